// The Settings dialog: models (answer and draft pickers), watched folders, collections, the key
// (backup, restore, rotation), the local API, the library's health check and repair, history.
import { api, errorText, type AppStatus, type IngestSummary, type InstalledModel, type LibraryHealth } from "./api";
import { byId, el, sayingErrorsIn } from "./dom";
import { formatBytes } from "./format";
import { currentLanguage, LANGUAGE_NAMES, languageOf, t, type Language } from "./i18n";

/// The draft picker's first choice: no draft model (its value; a path is never empty).
export const NO_DRAFT = "none";

/// Fills the answer or draft model picker with the installed models, the one in use chosen; the
/// path box shows only behind "Other file…". The draft picker starts with "None", the default.
export function fillModelPicker(role: "target" | "draft", models: InstalledModel[], current: string) {
  const select = byId<HTMLSelectElement>(`${role}-model-select`);
  const input = byId<HTMLInputElement>(`${role}-model-input`);
  const other = byId(`${role}-model-other`);
  const verdict = (m: InstalledModel) =>
    t(m.fits ? "settings.fits" : "settings.tooBig", { size: formatBytes(m.memory_bytes) });
  const none = role === "draft"
    ? [el("option", { text: t("settings.noDraft"), attrs: { value: NO_DRAFT } })]
    : [];
  select.replaceChildren(
    ...none,
    ...models.map((m) =>
      el("option", { text: t("settings.modelOption", { name: m.name, size: formatBytes(m.file_bytes), verdict: verdict(m) }), attrs: { value: m.path } }),
    ),
    el("option", { text: t("settings.otherFile"), attrs: { value: "" } }),
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

/// Fills the language picker: the system's language first (the default), then each language
/// by its own name. A choice is kept by the app, which tells every window to speak it.
export function fillLanguagePicker(choice: { chosen: string | null; system: string }) {
  const select = byId<HTMLSelectElement>("language-select");
  const system = LANGUAGE_NAMES[languageOf(choice.system)];
  select.replaceChildren(
    el("option", { text: t("settings.systemLanguage", { name: system }), attrs: { value: "" } }),
    ...(Object.entries(LANGUAGE_NAMES) as [Language, string][]).map(([tag, name]) => el("option", { text: name, attrs: { value: tag, lang: tag } })),
  );
  select.value = choice.chosen ?? "";
}

/// Says which embedder the open library is searched with and offers the others installed; the
/// button embeds the library again with the one picked (not while it is the one in use, nor
/// while files are being added).
export function fillEmbedderPicker(s: Pick<AppStatus, "embedder" | "embedders" | "ingesting">) {
  const select = byId<HTMLSelectElement>("embedder-select");
  const button = byId<HTMLButtonElement>("change-embedder-button");
  byId("embedder-line").textContent = s.embedder ? t("settings.embedderNow", { name: s.embedder }) : "";
  const picked = select.value;
  select.replaceChildren(...s.embedders.map((name) => el("option", { text: name, attrs: { value: name } })));
  select.value = s.embedders.includes(picked) ? picked : (s.embedder ?? "");
  const usable = () => !!s.embedder && !!select.value && select.value !== s.embedder && !s.ingesting;
  button.disabled = !usable();
  select.onchange = () => (button.disabled = !usable());
}

/// The offer, in the library pane, of an embedder that reads the library's languages (where its
/// passages are mostly in languages its embedder does not read): what it would change, a
/// button that embeds the library again with it (not while files are being added, nor before it
/// is installed), and "Not now", after which it is not offered again.
export function showEmbedderOffer(
  s: Pick<AppStatus, "embedder_advice" | "ingesting">,
  actions: { embedAgain: (embedder: string) => Promise<void>; decline: () => Promise<void> },
) {
  const box = byId("embedder-offer");
  const advice = s.embedder_advice;
  box.hidden = !advice;
  if (!advice) return;
  const names = new Intl.DisplayNames([currentLanguage()], { type: "language" });
  const languages = advice.languages.map((tag) => names.of(tag) ?? tag).join(", ");
  const share = Math.round(advice.share * 100);
  byId("embedder-offer-text").textContent =
    t("embedderOffer.text", { share, languages, embedder: advice.embedder, suggested: advice.suggested }) +
    (advice.installed ? "" : " " + t("embedderOffer.notInstalled", { suggested: advice.suggested }));
  const button = byId<HTMLButtonElement>("embedder-offer-button");
  button.textContent = t("embedderOffer.embedAgain", { name: advice.suggested });
  button.disabled = !advice.installed || s.ingesting;
  button.onclick = () => void actions.embedAgain(advice.suggested);
  byId("embedder-offer-later").onclick = () => {
    box.hidden = true;
    void actions.decline();
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
    void api.language().then(fillLanguagePicker, (e) => (error.textContent = errorText(e)));
    void api.installedModels().then(
      (models) => {
        fillModelPicker("target", models, byId<HTMLInputElement>("target-model-input").value);
        fillModelPicker("draft", models, byId<HTMLInputElement>("draft-model-input").value);
      },
      (e) => (error.textContent = errorText(e)),
    );
  });
  byId<HTMLSelectElement>("language-select").addEventListener("change", guard(async () => {
    await api.setLanguage(byId<HTMLSelectElement>("language-select").value || null);
  }));
  byId("save-models-button").addEventListener("click", guard(async () => {
    const target = byId<HTMLInputElement>("target-model-input").value.trim();
    const draft = byId<HTMLInputElement>("draft-model-input").value.trim();
    const r = await api.setModels(target || null, draft || null);
    byId("models-message").textContent = r.warnings.length ? r.warnings.join("; ") : t("settings.saved");
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
    byId("key-message").textContent = where ? t("key.savedApart", { where }) : "";
  }));
  byId("import-key-button").addEventListener("click", guard(async () => {
    if (await api.importKey(backupPassphrase(), null)) byId("key-message").textContent = t("key.restored");
  }));
  byId("local-api-toggle").addEventListener("change", guard(async () => {
    const on = byId<HTMLInputElement>("local-api-toggle").checked;
    const port = Number(byId<HTMLInputElement>("local-api-port").value);
    const r = await api.setLocalApi(on ? port : null);
    byId("local-api-info").textContent = r.address ? t("settings.serving", { address: r.address, token: r.token ?? "" }) : t("settings.off");
  }));
  byId("rotate-key-button").addEventListener("click", guard(async () => {
    byId("key-message").textContent = t("key.replacingNow");
    const n = await api.rotateKey();
    byId("key-message").textContent = t("key.rotated", { n });
    await hooks.showKeyInfo();
  }));
  byId("change-embedder-button").addEventListener("click", guard(async () => {
    const embedder = byId<HTMLSelectElement>("embedder-select").value;
    dialog.close();
    await hooks.addPaths(() => api.changeEmbedder(embedder));
    await hooks.refreshStatus();
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
    showHealth(h.whole ? "whole" : "damaged", h.lines, h.whole ? whole : t("health.damaged"));
  byId("check-library-button").addEventListener("click", guard(async () => {
    showHealth("checking", [], t("health.checking"));
    try {
      healthSaid(await api.checkLibrary(), t("health.whole"));
    } catch (e) {
      showHealth("failed", [], "");
      throw e;
    }
  }));
  repairButton.addEventListener("click", guard(async () => {
    showHealth("repairing", [], t("health.repairing"));
    try {
      const h = await api.repairLibrary();
      healthSaid(h, h.reindexed ? t("health.repairedReindexed", { n: h.reindexed }) : t("health.repaired"));
    } catch (e) {
      showHealth("damaged", [], t("health.unfinished"));
      throw e;
    } finally {
      await refreshStatus();
    }
  }));
}
