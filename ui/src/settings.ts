// The Settings dialog: models (answer and draft pickers), watched folders, collections, the key
// (backup, restore, rotation), the local API, the library's health check and repair, history.
import { api, errorText, type IngestSummary, type InstalledModel, type LibraryHealth } from "./api";
import { byId, el, sayingErrorsIn } from "./dom";
import { counted, formatBytes } from "./format";

/// The draft picker's first choice: no draft model (its value; a path is never empty).
export const NO_DRAFT = "none";

/// Fills the answer or draft model picker with the installed models, the one in use chosen; the
/// path box shows only behind "Other file…". The draft picker starts with "None", the default.
export function fillModelPicker(role: "target" | "draft", models: InstalledModel[], current: string) {
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
export function checkLibraryHealth() {
  byId<HTMLDialogElement>("settings-dialog").showModal();
  byId("library-health-fields").scrollIntoView({ block: "nearest" });
  byId("check-library-button").click();
}

/// What the dialog's actions need from the rest of the window.
export type SettingsHooks = {
  /// Runs an addition and says how it went in the library pane.
  addPaths: (run: () => Promise<IngestSummary | null>) => Promise<void>;
  /// Another collection is about to open: the conversation on screen goes.
  switching: () => void;
  /// The history was cleared.
  historyCleared: () => void;
  refreshStatus: () => Promise<void>;
  showKeyInfo: () => Promise<void>;
};

export function setupSettings(hooks: SettingsHooks) {
  const dialog = byId<HTMLDialogElement>("settings-dialog");
  const error = byId("settings-error");
  const guard = sayingErrorsIn(error);
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
    await hooks.addPaths(() => api.addWatchedFolder(path));
  }));
  byId("choose-watch-button").addEventListener("click", guard(async () => {
    dialog.close();
    await hooks.addPaths(() => api.chooseWatchedFolder());
  }));
  byId("new-collection-button").addEventListener("click", guard(async () => {
    const name = byId<HTMLInputElement>("new-collection-input").value.trim();
    if (!name) return;
    hooks.switching();
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
    await hooks.showKeyInfo();
  }));
  setupLibraryHealth(guard, hooks.refreshStatus);
  byId("clear-history-button").addEventListener("click", guard(async () => {
    await api.clearHistory();
    hooks.historyCleared();
  }));
}

/// Check reads the library's files whole; Repair (shown only when something is damaged) mends
/// them and indexes again what they lost.
function setupLibraryHealth(guard: (f: () => Promise<unknown>) => () => Promise<void>, refreshStatus: () => Promise<void>) {
  const health = byId("library-health");
  const repairButton = byId<HTMLButtonElement>("repair-library-button");
  const showHealth = (state: string, lines: string[], last: string) => {
    health.dataset.state = state;
    health.replaceChildren(...[...lines, last].map((l) => el("li", { text: l, className: l.includes("DAMAGED") ? "error" : "" })));
    repairButton.hidden = state !== "damaged";
    // The offer comes in below what was in view, where the dialog's Close row would cover it.
    if (!repairButton.hidden) repairButton.scrollIntoView({ block: "center" });
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
}
