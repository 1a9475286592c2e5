// The memory panel in plain words: what Quire uses now, one line per model with whether it fits
// (its file size as Settings shows it, and what it takes in memory, or on the graphics card where
// it runs on one with memory of its own), the computer's and the card's memory, and the figures
// behind them on demand.
import type { MemoryBudget } from "./api";
import { el } from "./dom";
import { fileName, formatBytes } from "./format";

/// What people call each model.
const ROLE_NAMES: Record<string, string> = {
  embedder: "Search model",
  target: "Answer model",
  draft: "Draft model (faster answers)",
};

/// `files`: each model file's size on disk by path (Settings' figures), where known.
export function renderMemory(root: HTMLElement, b: MemoryBudget, files: Record<string, number> = {}): void {
  const weights = b.models.filter((m) => m.loaded).reduce((s, m) => s + m.weights_bytes + m.gpu_bytes, 0);
  const models = b.models.map((m) => {
    // A model on a graphics card with memory of its own needs room there for its weights and
    // working memory; the rest of it (and any other model) needs the computer's.
    const onGpu = m.gpu_bytes > 0 && b.gpu != null;
    const needs = onGpu ? m.gpu_bytes + m.kv_cache_bytes : m.weights_bytes + m.kv_cache_bytes;
    const free = onGpu ? b.gpu!.free_bytes : b.machine_available_bytes;
    const where = onGpu ? " on the graphics card" : "";
    const fits = needs <= free;
    const verdict = m.loaded
      ? "in use"
      : fits
        ? `not loaded; fits${where}, with ${formatBytes(free - needs)} to spare`
        : `not loaded; needs ${formatBytes(needs)}${where}, ${formatBytes(free)} free`;
    const file = files[m.path];
    const held = onGpu
      ? `${formatBytes(m.gpu_bytes)} on the graphics card, ${formatBytes(m.weights_bytes)} in memory`
      : `${formatBytes(m.weights_bytes + m.gpu_bytes)} in memory`;
    const size = `${held}${file ? ` (${formatBytes(file)} file)` : ""}`;
    return el(
      "li",
      { attrs: { "data-role": m.role, "data-fits": String(m.loaded || fits), title: m.path } },
      el("span", { className: "mem-model", text: `${ROLE_NAMES[m.role] ?? m.role}: ${fileName(m.path)}` }),
      el("span", { className: "muted", text: `${size} · ${verdict}` }),
    );
  });
  // No draft model picked (the default): said with why, not left a mystery.
  if (!b.models.some((m) => m.role === "draft")) {
    models.push(
      el(
        "li",
        { attrs: { "data-role": "draft" } },
        el("span", { className: "mem-model", text: `${ROLE_NAMES.draft}: none` }),
        el("span", { className: "muted", text: "not needed: answers are sped up from their own grammar and the passages, which takes no memory (one can be picked under Settings → Models)" }),
      ),
    );
  }
  const used = b.machine_total_bytes - b.machine_available_bytes;
  const bar = el("div", { className: "membar", attrs: { role: "img", "aria-label": `memory in use: ${formatBytes(used)} of ${formatBytes(b.machine_total_bytes)}, Quire ${formatBytes(b.process_rss_bytes)}` } });
  const fill = el("div", { className: "membar-fill" });
  const mine = el("div", { className: "membar-mine" });
  fill.style.width = `${pct(used, b.machine_total_bytes)}%`;
  mine.style.width = `${pct(b.process_rss_bytes, b.machine_total_bytes)}%`;
  bar.append(fill, mine);
  const rows: [string, string][] = [];
  for (const m of b.models) {
    const where = m.gpu_bytes > 0 ? " on the graphics card" : "";
    if (m.kv_cache_bytes > 0) rows.push([`${ROLE_NAMES[m.role] ?? m.role}, working memory for ${b.context_tokens.toLocaleString("en")} tokens${where}`, formatBytes(m.kv_cache_bytes)]);
    if (m.kept_prompt_bytes > 0) rows.push([`last question kept for follow-ups (${m.kept_prompt_tokens.toLocaleString("en")} tokens)`, formatBytes(m.kept_prompt_bytes)]);
  }
  rows.push(["models loaded", formatBytes(weights)]);
  // The prediction covers Quire's own process; the window's web view runs in processes of its
  // own (some 400 MB), which the figure does not count: said, not hidden.
  rows.push(["expected with the answer model loaded (Quire's engine; the window's web view not counted)", formatBytes(b.predicted_rss_bytes)]);
  rows.push(["index on disk", formatBytes(b.index_bytes)]);
  root.replaceChildren(
    el("p", { className: "mem-now" }, "Quire uses ", el("strong", { text: formatBytes(b.process_rss_bytes), attrs: { id: "mem-rss", "data-bytes": String(b.process_rss_bytes) } }), " now"),
    el("ul", { className: "mem-models plain" }, ...models),
    el("p", { className: "muted mem-machine", text: `This computer: ${formatBytes(b.machine_available_bytes)} free of ${formatBytes(b.machine_total_bytes)}` }),
    bar,
    ...(b.gpu ? [el("p", { className: "muted mem-machine mem-gpu", text: `Graphics card (${b.gpu.name}): ${formatBytes(b.gpu.free_bytes)} free of ${formatBytes(b.gpu.total_bytes)}` })] : []),
    ...b.warnings.map((w) => el("p", { className: "warning", text: w })),
    el(
      "details",
      { className: "mem-details" },
      el("summary", { text: "details" }),
      el("table", { className: "memtable" }, ...rows.map(([a, v]) => el("tr", {}, el("th", { text: a, attrs: { scope: "row" } }), el("td", { className: "num", text: v })))),
      // Read by the tests and tools: the figures as bytes.
      el("span", { attrs: { id: "mem-weights", "data-bytes": String(weights), hidden: "" } }),
      el("span", { attrs: { id: "mem-predicted", "data-bytes": String(b.predicted_rss_bytes), hidden: "" } }),
    ),
  );
}

function pct(a: number, b: number): number {
  return b > 0 ? Math.min(100, Math.max(0, (100 * a) / b)) : 0;
}
