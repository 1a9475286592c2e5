// The chat and the sources in a narrow window: one at a time, chosen by two tabs (the CSS
// shows both side by side where there is room, and the tabs only where there is not).

export type Pane = "chat" | "sources";

/// Shows `pane` (where the window is narrow; where it is wide both are shown anyway).
export function showPane(pane: Pane) {
  document.body.dataset.pane = pane;
  for (const [id, of] of [["tab-chat", "chat"], ["tab-sources", "sources"]] as const)
    document.getElementById(id)?.setAttribute("aria-selected", String(of === pane));
}

/// Wires the tabs, and keeps the Sources tab's count of the passages shown.
export function setupPaneTabs() {
  document.getElementById("tab-chat")?.addEventListener("click", () => showPane("chat"));
  document.getElementById("tab-sources")?.addEventListener("click", () => showPane("sources"));
  const list = document.getElementById("source-list");
  const count = document.getElementById("tab-sources-count");
  if (!list || !count) return;
  const update = () => {
    const n = list.children.length;
    count.textContent = n ? `(${n})` : "";
  };
  new MutationObserver(update).observe(list, { childList: true });
  showPane("chat");
}
