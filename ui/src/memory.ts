// The memory panel in plain words: what Quire uses now, one line per model with whether it fits
// (its file size as Settings shows it, and what it takes in memory, or on the graphics card where
// it runs on one with memory of its own), the computer's and the card's memory, and the figures
// behind them on demand.
import type { MemoryBudget } from "./api";
import { el } from "./dom";
import { fileName, formatBytes } from "./format";
import { t, type Key } from "./i18n";

/// What people call each model (the engine names its role).
const ROLE_NAMES: Record<string, Key> = {
  embedder: "memory.roleEmbedder",
  target: "memory.roleTarget",
  draft: "memory.roleDraft",
};
const roleName = (role: string) => (ROLE_NAMES[role] ? t(ROLE_NAMES[role]) : role);

/// `files`: each model file's size on disk by path (Settings' figures), where known.
export function renderMemory(root: HTMLElement, b: MemoryBudget, files: Record<string, number> = {}): void {
  const weights = b.models.filter((m) => m.loaded).reduce((s, m) => s + m.weights_bytes + m.gpu_bytes, 0);
  const models = b.models.map((m) => {
    // A model on a graphics card with memory of its own needs room there for its weights and
    // working memory; the rest of it (and any other model) needs the computer's.
    const onGpu = m.gpu_bytes > 0 && b.gpu != null;
    const needs = onGpu ? m.gpu_bytes + m.kv_cache_bytes : m.weights_bytes + m.kv_cache_bytes;
    const free = onGpu ? b.gpu!.free_bytes : b.machine_available_bytes;
    const fits = needs <= free;
    const verdict = m.loaded
      ? t("memory.inUse")
      : fits
        ? t(onGpu ? "memory.fitsGpu" : "memory.fits", { spare: formatBytes(free - needs) })
        : t(onGpu ? "memory.needsGpu" : "memory.needs", { needs: formatBytes(needs), free: formatBytes(free) });
    const file = files[m.path];
    const held = onGpu
      ? t("memory.heldGpu", { gpu: formatBytes(m.gpu_bytes), ram: formatBytes(m.weights_bytes) })
      : t("memory.held", { ram: formatBytes(m.weights_bytes + m.gpu_bytes) });
    const size = file ? t("memory.withFile", { held, file: formatBytes(file) }) : held;
    return el(
      "li",
      { attrs: { "data-role": m.role, "data-fits": String(m.loaded || fits), title: m.path } },
      el("span", { className: "mem-model", text: t("memory.modelLine", { role: roleName(m.role), file: fileName(m.path) }) }),
      el("span", { className: "muted", text: `${size} · ${verdict}` }),
    );
  });
  // No draft model picked (the default): said with why, not left a mystery.
  if (!b.models.some((m) => m.role === "draft")) {
    models.push(
      el(
        "li",
        { attrs: { "data-role": "draft" } },
        el("span", { className: "mem-model", text: t("memory.noDraft", { role: roleName("draft") }) }),
        el("span", { className: "muted", text: t("memory.noDraftWhy") }),
      ),
    );
  }
  const used = b.machine_total_bytes - b.machine_available_bytes;
  const bar = el("div", { className: "membar", attrs: { role: "img", "aria-label": t("memory.barLabel", { used: formatBytes(used), total: formatBytes(b.machine_total_bytes), rss: formatBytes(b.process_rss_bytes) }) } });
  const fill = el("div", { className: "membar-fill" });
  const mine = el("div", { className: "membar-mine" });
  fill.style.width = `${pct(used, b.machine_total_bytes)}%`;
  mine.style.width = `${pct(b.process_rss_bytes, b.machine_total_bytes)}%`;
  bar.append(fill, mine);
  const rows: [string, string][] = [];
  for (const m of b.models) {
    const kv = t(m.gpu_bytes > 0 ? "memory.kvGpu" : "memory.kv", { role: roleName(m.role), n: b.context_tokens });
    if (m.kv_cache_bytes > 0) rows.push([kv, formatBytes(m.kv_cache_bytes)]);
    if (m.kept_prompt_bytes > 0) rows.push([t("memory.kept", { n: m.kept_prompt_tokens }), formatBytes(m.kept_prompt_bytes)]);
  }
  rows.push([t("memory.loaded"), formatBytes(weights)]);
  // The prediction covers Quire's own process; the window's web view runs in processes of its
  // own (some 400 MB), which the figure does not count: said, not hidden.
  rows.push([t("memory.expected"), formatBytes(b.predicted_rss_bytes)]);
  rows.push([t("memory.index"), formatBytes(b.index_bytes)]);
  root.replaceChildren(
    el(
      "p",
      { className: "mem-now" },
      t("memory.usesBefore"),
      el("strong", { text: formatBytes(b.process_rss_bytes), attrs: { id: "mem-rss", "data-bytes": String(b.process_rss_bytes) } }),
      t("memory.usesAfter"),
    ),
    el("ul", { className: "mem-models plain" }, ...models),
    el("p", { className: "muted mem-machine", text: t("memory.machine", { free: formatBytes(b.machine_available_bytes), total: formatBytes(b.machine_total_bytes) }) }),
    bar,
    ...(b.gpu ? [el("p", { className: "muted mem-machine mem-gpu", text: t("memory.gpu", { name: b.gpu.name, free: formatBytes(b.gpu.free_bytes), total: formatBytes(b.gpu.total_bytes) }) })] : []),
    ...b.warnings.map((w) => el("p", { className: "warning", text: w })),
    el(
      "details",
      { className: "mem-details" },
      el("summary", { text: t("common.details") }),
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
