// The library pane: its documents (removed with two clicks), the ingestion under way and what it
// skipped, and the problems banner with its way out (fetch the missing models, check and repair).
import { errorText, saysDamaged, type AppStatus, type IngestSummary } from "./api";
import { byId, el } from "./dom";
import { counted, fileName, formatBytes, formatTimeLeft } from "./format";
import { num, t } from "./i18n";
import { describe, type IngestTracker } from "./ingest";

type DocumentRecord = AppStatus["documents"][number];

/// How long a first Remove click waits for the second.
export const REMOVE_ASKS_MS = 4000;

/// Each row of the documents list is this tall, so that only the rows in view are drawn: a
/// library of 50,000 documents is a few dozen elements on screen, not 50,000.
export const ROW_PX = 44;
/// Rows drawn beyond the view on each side, so a quick scroll does not show blank rows.
const OVERSCAN = 8;
/// Rows drawn when the list's height is not known yet (not laid out).
const UNMEASURED_ROWS = 40;

type Row = { kind: "folder"; folder: string; count: number } | { kind: "doc"; doc: DocumentRecord };

/// The folder a path is in ("" for a bare name).
export function folderOf(path: string): string {
  const cut = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return cut < 0 ? "" : path.slice(0, cut);
}

/// The documents list: grouped by folder (when they come from more than one), filtered by the
/// words typed in its filter box, and drawn only where it is in view. Remove asks first (for a
/// few seconds) and removes on the second click; the file itself stays. Which document asks is
/// kept here, not in its button: rows are drawn again as the list scrolls and whenever the
/// status changes (an ingestion, a watched folder), the question with them.
export class DocumentList {
  /// The document asking, the timer that takes the question back, and how its button stops asking.
  private asked: { docId: string; timer: number; stop: () => void } | null = null;
  private documents: { doc: DocumentRecord; key: string }[] = [];
  private filter = "";
  private readonly collapsed = new Set<string>();
  private rows: Row[] = [];
  private drawPending = false;

  /// `root` is the list; it scrolls in `viewport`. `shown` hears how many documents the filter
  /// lets through, of how many.
  constructor(
    private readonly root: HTMLElement,
    private readonly remove: (docId: string) => Promise<unknown>,
    private readonly viewport: HTMLElement = root,
    private readonly shown: (shown: number, total: number) => void = () => {},
  ) {
    viewport.addEventListener("scroll", () => this.drawSoon());
  }

  render(documents: DocumentRecord[]) {
    this.documents = documents.map((doc) => ({ doc, key: doc.path.toLowerCase() }));
    this.layout();
  }

  /// Shows only the documents whose path holds every word of `text` (any case).
  setFilter(text: string) {
    this.filter = text.trim().toLowerCase();
    this.viewport.scrollTop = 0;
    this.layout();
  }

  /// The rows for the documents and filter now: folder headings and documents, in order.
  private layout() {
    const words = this.filter.split(/\s+/).filter(Boolean);
    const matching = words.length ? this.documents.filter((d) => words.every((w) => d.key.includes(w))) : this.documents;
    const byFolder = new Map<string, DocumentRecord[]>();
    for (const { doc } of matching) {
      const folder = folderOf(doc.path);
      const docs = byFolder.get(folder);
      if (docs) docs.push(doc);
      else byFolder.set(folder, [doc]);
    }
    const grouped = byFolder.size > 1;
    this.rows = [];
    for (const [folder, docs] of byFolder) {
      if (grouped) this.rows.push({ kind: "folder", folder, count: docs.length });
      if (!grouped || !this.collapsed.has(folder)) for (const doc of docs) this.rows.push({ kind: "doc", doc });
    }
    this.shown(matching.length, this.documents.length);
    this.root.style.height = `${this.rows.length * ROW_PX}px`;
    this.draw();
  }

  private drawSoon() {
    if (this.drawPending) return;
    this.drawPending = true;
    requestAnimationFrame(() => {
      this.drawPending = false;
      this.draw();
    });
  }

  /// Draws the rows in view (and a few beyond).
  private draw() {
    const height = this.viewport.clientHeight;
    // The list's own top inside its (positioned) viewport: rows are placed from there.
    const top = Math.max(0, this.viewport.scrollTop - (this.viewport === this.root ? 0 : this.root.offsetTop));
    const first = height > 0 ? Math.max(0, Math.floor(top / ROW_PX) - OVERSCAN) : 0;
    const last = height > 0 ? Math.min(this.rows.length, Math.ceil((top + height) / ROW_PX) + OVERSCAN) : Math.min(this.rows.length, UNMEASURED_ROWS);
    const items: HTMLElement[] = [];
    for (let i = first; i < last; i++) {
      const row = this.rows[i];
      const item = row.kind === "folder" ? this.folderItem(row.folder, row.count) : this.item(row.doc);
      item.style.top = `${i * ROW_PX}px`;
      items.push(item);
    }
    this.root.replaceChildren(...items);
  }

  private folderItem(folder: string, count: number): HTMLElement {
    const open = !this.collapsed.has(folder);
    const button = el("button", {
      className: "folder-toggle",
      text: `${open ? "▾" : "▸"} ${fileName(folder) || folder || t("library.noFolder")}`,
      attrs: { type: "button", "aria-expanded": String(open), title: folder },
    });
    button.addEventListener("click", () => {
      if (open) this.collapsed.add(folder);
      else this.collapsed.delete(folder);
      this.layout();
    });
    return el("li", { className: "folder", attrs: { "data-folder": folder } }, button, el("span", { className: "muted", text: counted(count, "document") }));
  }

  private takeBack() {
    if (!this.asked) return;
    window.clearTimeout(this.asked.timer);
    this.asked.stop();
    this.asked = null;
  }

  private item(d: DocumentRecord): HTMLElement {
    const name = fileName(d.path);
    const button = el("button", { className: "small", text: t("library.remove"), attrs: { type: "button", "aria-label": t("library.removeLabel", { name }) } });
    const asking = (on: boolean) => {
      button.textContent = on ? t("library.removeAsk") : t("library.remove");
      button.classList.toggle("danger", on);
      button.title = on ? t("library.removeTitle") : "";
    };
    if (this.asked?.docId === d.doc_id) {
      this.asked.stop = () => asking(false);
      asking(true);
    }
    button.addEventListener("click", () => {
      if (this.asked?.docId !== d.doc_id) {
        // Another document's question is taken back: one asks at a time.
        this.takeBack();
        const timer = window.setTimeout(() => this.takeBack(), REMOVE_ASKS_MS);
        this.asked = { docId: d.doc_id, timer, stop: () => asking(false) };
        asking(true);
        return;
      }
      window.clearTimeout(this.asked.timer);
      this.asked = null;
      void this.remove(d.doc_id);
    });
    return el(
      "li",
      { attrs: { title: d.path } },
      el("span", { className: "doc-name", text: name }),
      el("span", { className: "muted", text: t("library.docLine", { pages: counted(d.pages, "page"), passages: counted(d.chunks, "passage") }) }),
      button,
    );
  }
}

/// The banner saying what is wrong. Damaged files get a "Check and repair" offer; missing models
/// a button that downloads them, with the download's last line while it runs.
export class ProblemsBanner {
  private fetching = false;
  private fetchLine = "";
  private problems: string[] = [];
  private missing: string[] = [];

  constructor(
    private readonly box: HTMLElement,
    private readonly ways: {
      fetchModels: () => Promise<string[]>;
      /// After a download, finished or failed: the status is read again.
      fetched: () => Promise<void>;
      repair: () => void;
    },
  ) {}

  show(problems: string[], missing: string[] = []) {
    this.problems = problems;
    this.missing = missing;
    this.draw();
  }

  /// A line of the download's progress.
  fetchProgress(line: string) {
    this.fetchLine = line;
    const shown = this.box.querySelector("#fetch-progress");
    if (shown) shown.textContent = line;
  }

  private draw() {
    this.box.hidden = this.problems.length === 0 && !this.fetching;
    const lines: HTMLElement[] = this.problems.map((p) => {
      if (!saysDamaged(p)) return el("p", { text: p });
      const button = el("button", { className: "small offer", text: t("problems.checkRepair"), attrs: { type: "button" } });
      button.addEventListener("click", () => this.ways.repair());
      return el("p", { text: `${p} ` }, button);
    });
    if (this.missing.length || this.fetching) {
      const button = el("button", {
        text: this.fetching ? t("problems.downloading") : t("problems.download", { models: this.missing.join(", ") }),
        attrs: { type: "button", id: "fetch-models-button" },
      });
      button.disabled = this.fetching;
      button.addEventListener("click", () => void this.fetch());
      lines.push(
        el("p", {}, button, el("span", { className: "muted", text: t("problems.downloadWhy") })),
        el("p", { className: "muted", text: this.fetchLine, attrs: { id: "fetch-progress", role: "status" } }),
      );
    }
    this.box.replaceChildren(...lines);
  }

  private async fetch() {
    this.fetching = true;
    this.fetchLine = t("problems.starting");
    this.missing = [];
    this.draw();
    try {
      const fetched = await this.ways.fetchModels();
      this.fetchLine = t("problems.installed", { models: fetched.join(", ") });
    } catch (e) {
      this.fetchLine = errorText(e);
    }
    this.fetching = false;
    await this.ways.fetched();
  }
}

/// Failed files the ingestion panel names while a batch runs, and files in progress.
const FAILURES_SHOWN = 20;
const WORKING_SHOWN = 3;

/// Draws the ingestion under way from the tracker: headline, progress, time left, the files
/// being read and those that failed.
export function renderIngest(tracker: IngestTracker) {
  const panel = byId("ingest-panel");
  panel.hidden = tracker.files.size === 0 || tracker.finished;
  const { done, total } = tracker.counts();
  // The share done moves while a large first file is read, before any file is finished.
  const share = Math.floor(tracker.progress() * 100);
  const current = tracker.current();
  const headline = t("ingest.headline", { done, n: total, share });
  byId("ingest-headline").textContent = current ? t("ingest.headlineFile", { headline, stage: current.stage, file: fileName(current.path) }) : headline;
  byId<HTMLProgressElement>("ingest-progress").value = tracker.progress();
  const eta = tracker.etaSeconds();
  const rate = tracker.chunksPerSecond == null ? "" : t("ingest.rate", { rate: num(tracker.chunksPerSecond, 1) });
  byId("ingest-eta").textContent = [eta == null ? "" : formatTimeLeft(eta), rate].filter(Boolean).join(" · ");
  // The files being read now and those that failed: a row for every file of a batch of
  // thousands would cost the window more than the batch.
  const failures = tracker.failures(FAILURES_SHOWN);
  // Files are stored in batches: many may be "storing" at once.
  const working = tracker.inProgress();
  const rows = [...working.slice(0, WORKING_SHOWN), ...failures.shown].map((f) =>
    el(
      "li",
      { attrs: { "data-state": f.state.kind, title: f.path } },
      el("span", { className: "doc-name", text: fileName(f.path) }),
      el("span", { className: "muted", text: `${describe(f.state)}${f.bytes ? ` · ${formatBytes(f.bytes)}` : ""}` }),
    ),
  );
  if (working.length > WORKING_SHOWN)
    rows.splice(WORKING_SHOWN, 0, el("li", { className: "muted", text: t("ingest.moreWorking", { n: working.length - WORKING_SHOWN }) }));
  if (failures.total > failures.shown.length)
    rows.push(el("li", { className: "muted", text: t("ingest.moreFailed", { n: failures.total - failures.shown.length }) }));
  byId("ingest-files").replaceChildren(...rows);
  if (tracker.finished) showSummaryLine(tracker.summary);
  // A new run (a watched folder changing, say) replaces the last run's summary.
  else if (!panel.hidden) byId("ingest-summary").replaceChildren();
}

/// Sets the summary's first line, keeping what follows it (the files skipped). The line comes
/// with the batch's last event, which may arrive before or after the addition's reply has put
/// the skipped files below it: either way both end up shown.
function showSummaryLine(text: string) {
  const box = byId("ingest-summary");
  const line = box.querySelector<HTMLElement>(":scope > p.summary-line");
  if (line) line.textContent = text;
  else box.prepend(el("p", { className: "summary-line", text }));
}

/// Skipped files named after a batch; the rest are counted.
const SKIPPED_NAMED = 50;

/// Runs an addition (dropped paths, a picker, a watched folder) and says how it went: the
/// tracker's summary and the files skipped with why, or the error. `run` answers null when the
/// person dismissed a picker.
export async function addPaths(tracker: IngestTracker, run: () => Promise<IngestSummary | null>) {
  const box = byId("ingest-summary");
  try {
    const summary = await run();
    if (!summary) return;
    box.replaceChildren();
    showSummaryLine(tracker.summary);
    if (summary.failed.length) {
      const named = summary.failed.slice(0, SKIPPED_NAMED);
      const more = summary.failed.length - named.length;
      box.append(
        el("p", { className: "muted", text: t("ingest.skipped") }),
        el(
          "ul",
          { className: "skipped" },
          ...named.map((f) => el("li", { attrs: { title: f.path } }, el("strong", { text: fileName(f.path) }), ` ${f.reason}`)),
          ...(more > 0 ? [el("li", { text: t("ingest.moreFiles", { n: more }) })] : []),
        ),
      );
    }
  } catch (e) {
    box.replaceChildren(el("p", { className: "error", text: errorText(e) }));
  }
}
