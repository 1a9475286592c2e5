// The tray's quick-ask window: ask, read the streamed answer and its sources, jump to the app.
import { api, events } from "./api";
import { setupChat } from "./chat";
import { byId } from "./dom";
import { speakTheAppsLanguage } from "./i18n";

function setup() {
  setupChat();
  byId("open-main-button").addEventListener("click", () => void api.showMainWindow());
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") void api.hideQuickAsk();
  });
  // Each time the window is shown (tray, shortcut, main window) the question box has the keys.
  const question = byId<HTMLTextAreaElement>("question");
  question.focus();
  window.addEventListener("focus", () => question.focus());
}

void speakTheAppsLanguage(api.language, events.onLanguage).then(setup);
