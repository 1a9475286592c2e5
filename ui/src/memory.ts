// The memory budget panel: each model's weights and KV cache, the index, this process and the machine.
import type { MemoryBudget } from "./api";
import { el } from "./dom";
import { fileName, formatBytes } from "./format";

export function renderMemory(root: HTMLElement, b: MemoryBudget): void {
  const weights = b.models.filter((m) => m.loaded).reduce((s, m) => s + m.weights_bytes, 0);
  const rows: [string, string, string][] = [];
  for (const m of b.models) {
    rows.push([m.role, formatBytes(m.weights_bytes), `${m.loaded ? "" : "not loaded · "}${fileName(m.path)}`]);
    if (m.kv_cache_bytes > 0) rows.push([`${m.role} KV`, formatBytes(m.kv_cache_bytes), `at ${b.context_tokens} tokens`]);
    if (m.kept_prompt_bytes > 0) rows.push(["last prompt", formatBytes(m.kept_prompt_bytes), `${m.kept_prompt_tokens} tokens kept for follow-ups`]);
  }
  rows.push(["index on disk", formatBytes(b.index_bytes), ""]);
  const used = b.machine_total_bytes - b.machine_available_bytes;
  const bar = el("div", { className: "membar", attrs: { role: "img", "aria-label": "machine memory in use" } });
  const fill = el("div", { className: "membar-fill" });
  const mine = el("div", { className: "membar-mine" });
  fill.style.width = `${pct(used, b.machine_total_bytes)}%`;
  mine.style.width = `${pct(b.process_rss_bytes, b.machine_total_bytes)}%`;
  bar.append(fill, mine);
  root.replaceChildren(
    el(
      "table",
      { className: "memtable" },
      ...rows.map(([a, v, n]) => el("tr", {}, el("th", { text: a, attrs: { scope: "row" } }), el("td", { className: "num", text: v }), el("td", { className: "muted", text: n }))),
    ),
    el("dl", { className: "memsum" },
      el("dt", { text: "Models loaded" }), el("dd", { text: formatBytes(weights), attrs: { id: "mem-weights", "data-bytes": String(weights) } }),
      el("dt", { text: "Quire uses (RSS)" }), el("dd", { text: formatBytes(b.process_rss_bytes), attrs: { id: "mem-rss", "data-bytes": String(b.process_rss_bytes) } }),
      el("dt", { text: "Predicted (with answer model)" }), el("dd", { text: formatBytes(b.predicted_rss_bytes), attrs: { id: "mem-predicted", "data-bytes": String(b.predicted_rss_bytes) } }),
      el("dt", { text: "Machine" }), el("dd", { text: `${formatBytes(b.machine_available_bytes)} free of ${formatBytes(b.machine_total_bytes)}` }),
    ),
    bar,
    ...b.warnings.map((w) => el("p", { className: "warning", text: w })),
  );
}

function pct(a: number, b: number): number {
  return b > 0 ? Math.min(100, Math.max(0, (100 * a) / b)) : 0;
}
