// The main window: wires the library pane, chat, sources, memory budget, lock screen and
// settings (each in its own module) to the app's status and events.
import { api, errorText, events, type AppStatus } from "./api";
import { setupChat } from "./chat";
import { byId, el } from "./dom";
import { formatBytes } from "./format";
import { num, speakTheAppsLanguage, t } from "./i18n";
import { IngestTracker } from "./ingest";
import { addPaths, DocumentList, ProblemsBanner, renderIngest } from "./library";
import { KeyPanel, setupLock, showLock } from "./lock";
import { renderMemory } from "./memory";
import { setupPaneTabs } from "./panes";
import { checkLibraryHealth, fillEmbedderPicker, setupSettings, showEmbedderOffer } from "./settings";

const tracker = new IngestTracker();
/** The status last read, and whether the collection's history was put on screen since it opened. */
let status: AppStatus | null = null;
let historyShown = false;

const chat = setupChat({ onAnswered: () => void refreshMemory(), onDamaged: checkLibraryHealth });
const keys = new KeyPanel(() => status?.documents.length ?? 0);
const documents = new DocumentList(
  byId("documents"),
  (docId) => api.removeDocument(docId).catch((e) => alert(errorText(e))),
  byId("documents-viewport"),
  (shown, total) => {
    byId("doc-filter-count").textContent = shown === total ? "" : t("library.filterCount", { shown, n: total });
    byId("doc-filter").hidden = total < FILTER_FROM;
  },
);
/// When the status was last read, and how often it is read again while an ingestion runs.
let lastStatusAt = 0;
let statusReading = false;
const STATUS_DURING_INGEST_MS = 5000;
/// The filter box shows from this many documents on.
const FILTER_FROM = 8;
/// Whether a drawing of the ingestion is already asked for (one per frame, however many events).
let ingestDrawPending = false;

function drawIngestSoon() {
  if (ingestDrawPending) return;
  ingestDrawPending = true;
  requestAnimationFrame(() => {
    ingestDrawPending = false;
    renderIngest(tracker);
  });
}
const problems = new ProblemsBanner(byId("problems"), { fetchModels: api.fetchModels, fetched: refreshStatus, repair: checkLibraryHealth });
const adding = (run: Parameters<typeof addPaths>[1]) => addPaths(tracker, run);

/// The conversation on screen belongs to the collection open now: another one (or a lock)
/// clears it, and the next one's history is shown when it is ready.
function leaveConversation() {
  chat.clear();
  historyShown = false;
}

async function refreshStatus() {
  try {
    status = await api.status();
  } catch (e) {
    problems.show([errorText(e)]);
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
  const ready = s.model_runs_on ? t("status.readyOn", { device: s.model_runs_on }) : t("status.ready");
  pill.textContent =
    engine === "opening" ? t("status.opening") : engine === "failed" ? t("status.notReady") : engine === "locked" ? t("status.locked") : loading ? t("status.loading") : ready;
  showLock(s.engine);
  pill.dataset.state = loading ? "loading" : engine;
  pill.title =
    engine !== "ready" || loading ? "" : s.model_runs_on ? t("status.runsOnTitle", { device: s.model_runs_on }) : t("status.loadsWithFirst");
  const said = [...s.problems];
  // A missing model is already said in plain words; other failures are shown as they are.
  if (s.engine.state === "failed" && said.length === 0) said.push(s.engine.reason);
  problems.show(said, s.missing_models);
  byId("ocr-model-line").textContent = s.ocr_model ? t("settings.ocrModel", { model: s.ocr_model }) : t("settings.ocrMissing");
  fillEmbedderPicker(s);
  showEmbedderOffer(s, {
    embedAgain: async (embedder) => {
      await adding(() => api.changeEmbedder(embedder));
      await refreshStatus();
    },
    decline: async () => {
      await api.declineEmbedderOffer().catch((e) => problems.show([errorText(e)]));
    },
  });
  if (engine === "ready" && !historyShown) {
    historyShown = true;
    void loadHistory();
  }
  if (engine === "ready") void keys.show();
  byId<HTMLInputElement>("local-api-toggle").checked = s.local_api_port != null;
  if (s.local_api_port != null) byId<HTMLInputElement>("local-api-port").value = String(s.local_api_port);
  byId("doc-count").textContent = `(${num(s.documents.length)})`;
  lastStatusAt = Date.now();
  // Once there are documents, the empty chat asks for a question, not for files.
  const emptyHint = document.querySelector("#chat-empty p");
  if (emptyHint)
    emptyHint.textContent = s.documents.length
      ? t("chat.emptyWithDocuments", { n: s.documents.length })
      : t("chat.emptyNoDocuments");
  documents.render(s.documents);
  byId<HTMLInputElement>("target-model-input").value = s.target_model.path;
  byId<HTMLInputElement>("draft-model-input").value = s.draft_model?.path ?? "";
  const size = (m: AppStatus["target_model"]) => (m.installed ? t("settings.fileSize", { size: formatBytes(m.file_bytes) }) : t("settings.notInstalled"));
  byId("target-model-size").textContent = size(s.target_model);
  byId("draft-model-size").textContent = s.draft_model ? size(s.draft_model) : "";
  byId("watched-list").replaceChildren(
    ...s.watched_folders.map((f) => {
      const b = el("button", { className: "small", text: t("settings.stopWatching"), attrs: { type: "button" } });
      b.addEventListener("click", () => api.removeWatchedFolder(f).then(refreshStatus));
      return el("li", {}, el("span", { text: f }), b);
    }),
  );
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
    byId("memory").replaceChildren(el("p", { className: "muted", text: t("memory.notOpen") }));
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

function setup() {
  setupPaneTabs();
  setupSettings({
    addPaths: adding,
    switching: leaveConversation,
    historyCleared: () => chat.clear(),
    refreshStatus,
    showKeyInfo: () => keys.show(),
  });
  setupLock(() => {
    leaveConversation();
    byId("source-list").replaceChildren();
  });
  keys.setupOffer();
  void events.onReseal((done, total) => {
    byId("key-message").textContent = t("key.resealing", { done, total });
  });
  byId("add-path-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = byId<HTMLInputElement>("add-path-input");
    const path = input.value.trim();
    if (!path) return;
    input.value = "";
    void adding(() => api.addPaths([path]));
  });
  byId("add-files-button").addEventListener("click", () => void adding(() => api.chooseAndAdd(false)));
  byId("add-folder-button").addEventListener("click", () => void adding(() => api.chooseAndAdd(true)));
  byId("cancel-ingest-button").addEventListener("click", () => void api.cancelIngest());
  byId("quick-ask-button").addEventListener("click", () => void api.showQuickAsk());
  byId<HTMLSelectElement>("collection-select").addEventListener("change", async (ev) => {
    const name = (ev.target as HTMLSelectElement).value;
    leaveConversation();
    await api.switchCollection(name).catch((e) => problems.show([errorText(e)]));
  });
  void events.onIngest((e) => {
    tracker.apply(e);
    drawIngestSoon();
  });
  byId<HTMLInputElement>("doc-filter").addEventListener("input", (ev) => documents.setFilter((ev.target as HTMLInputElement).value));
  void events.onStatusChanged(() => {
    void refreshStatus();
    void refreshMemory();
  });
  void events.onFilesDropped((paths) => void adding(() => api.addPaths(paths)));
  // While files are dragged over the window, it says where they go.
  void events.onDragging((dragging) => document.body.classList.toggle("dragging", dragging));
  void events.onFetch((line) => problems.fetchProgress(line));
  // The ETA and memory move even when no event arrives.
  window.setInterval(() => {
    if (!tracker.finished && tracker.files.size) {
      drawIngestSoon();
      // The list and its count grow as batches are stored, not only at the end.
      if (!statusReading && Date.now() - lastStatusAt > STATUS_DURING_INGEST_MS) {
        statusReading = true;
        void refreshStatus().finally(() => (statusReading = false));
      }
    }
  }, 1000);
  window.setInterval(() => void refreshMemory(), 3000);
  void refreshStatus();
  void refreshMemory();
}

void speakTheAppsLanguage(api.language, events.onLanguage).then(setup);
