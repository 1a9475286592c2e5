// Tracks a batch ingestion from the engine's events: each file's stage, the batch's progress by
// bytes, an ETA from the rate so far, and the embedding rate the engine reports.
import type { EngineEvent } from "./api";
import type { UnreadablePage } from "./bindings/UnreadablePage";
import { counted } from "./format";
import { t } from "./i18n";

export type FileState =
  | { kind: "queued" }
  | { kind: "working"; stage: string; done: number; total: number }
  | { kind: "indexed"; chunks: number; embedded: number; pages: number; unreadablePages: UnreadablePage[] }
  | { kind: "unchanged" }
  | { kind: "removed" }
  | { kind: "failed"; reason: string }
  | { kind: "cancelled" };

export interface TrackedFile {
  path: string;
  bytes: number;
  state: FileState;
}

/// Whether a file is still to be done.
const pending = (s: FileState) => s.kind === "queued" || s.kind === "working";

/// Follows a batch. Every figure it gives is kept up to date as events come (not counted over
/// all files at each), so a batch of 50,000 files costs the window no more per event than one
/// of ten.
export class IngestTracker {
  files = new Map<string, TrackedFile>();
  startedAt = 0;
  finished = false;
  summary = "";
  chunksPerSecond: number | null = null;
  /// The estimate last shown, and when: the next one starts from it, counted down.
  private shownEta: number | null = null;
  private shownAt = 0;
  private done = 0;
  private totalWeight = 0;
  private doneWeight = 0;
  private readonly working = new Set<string>();
  /// The files that failed, in the order they did.
  private readonly failedPaths: string[] = [];

  constructor(private now: () => number = () => Date.now()) {}

  apply(e: EngineEvent): void {
    switch (e.type) {
      case "ingest_started":
        this.files = new Map(e.files.map((f) => [f.path, { path: f.path, bytes: f.bytes, state: { kind: "queued" } }]));
        this.done = 0;
        this.doneWeight = 0;
        this.totalWeight = e.files.reduce((sum, f) => sum + weight(f), 0);
        this.working.clear();
        this.failedPaths.length = 0;
        this.startedAt = this.now();
        this.finished = false;
        this.summary = "";
        this.chunksPerSecond = null;
        this.shownEta = null;
        break;
      case "ingest_progress":
        if (e.chunks_embedded > 0) this.chunksPerSecond = e.chunks_per_s;
        break;
      case "file_started":
        this.set(e.path, { kind: "working", stage: "reading", done: 0, total: 0 });
        break;
      case "file_progress":
        this.set(e.path, { kind: "working", stage: e.stage, done: e.done, total: e.total });
        break;
      case "file_finished": {
        const o = e.outcome;
        if (o.status === "indexed")
          this.set(e.path, { kind: "indexed", chunks: o.chunks, embedded: o.embedded, pages: o.pages, unreadablePages: o.unreadable_pages });
        else if (o.status === "unchanged") this.set(e.path, { kind: "unchanged" });
        else if (o.status === "removed") this.set(e.path, { kind: "removed" });
        else this.set(e.path, { kind: "failed", reason: o.reason });
        break;
      }
      case "ingest_finished":
        this.finished = true;
        for (const path of [...this.working]) this.set(path, { kind: "cancelled" });
        if (this.done < this.files.size) for (const f of this.files.values()) if (pending(f.state)) this.set(f.path, { kind: "cancelled" });
      {
        const counts = { indexed: e.indexed, unchanged: e.unchanged, removed: e.removed, failed: e.failed, passages: counted(e.chunks, "passage") };
        const summary = t(e.removed ? "ingest.summaryRemoved" : "ingest.summary", counts);
        this.summary = e.cancelled ? t("ingest.cancelledSummary", { summary }) : summary;
      }
        break;
      default:
        break;
    }
  }

  private set(path: string, state: FileState) {
    let f = this.files.get(path);
    if (!f) {
      f = { path, bytes: 0, state: { kind: "queued" } };
      this.files.set(path, f);
      this.totalWeight += weight(f);
    }
    const was = f.state;
    if (pending(was) && !pending(state)) {
      this.done++;
      this.doneWeight += weight(f);
    } else if (!pending(was) && pending(state)) {
      this.done--;
      this.doneWeight -= weight(f);
    }
    if (state.kind === "working") this.working.add(path);
    else this.working.delete(path);
    if (state.kind === "failed" && was.kind !== "failed") this.failedPaths.push(path);
    f.state = state;
  }

  /// Share of the batch done, by bytes; a file being embedded counts by its chunks done.
  progress(): number {
    let done = this.doneWeight;
    for (const path of this.working) {
      const f = this.files.get(path)!;
      const s = f.state;
      if (s.kind === "working" && s.total > 0) done += (weight(f) * s.done) / s.total;
    }
    return this.totalWeight === 0 ? 0 : done / this.totalWeight;
  }

  /// Seconds left at the rate so far; null until there is a rate to go by (2 % done, 5 s in).
  /// Files differ (a PDF is read slowly, then its chunks embed fast), so the rate so far swings:
  /// each estimate moves the last one, counted down since it was shown, a quarter of the way to
  /// the new rate's, so the time left runs down steadily instead of jumping.
  etaSeconds(): number | null {
    const p = this.progress();
    const now = this.now();
    const elapsed = (now - this.startedAt) / 1000;
    if (this.finished || p < 0.02 || elapsed < 5) return null;
    const atRate = (elapsed * (1 - p)) / p;
    if (this.shownEta == null) {
      this.shownEta = atRate;
    } else {
      const countedDown = Math.max(0, this.shownEta - (now - this.shownAt) / 1000);
      this.shownEta = countedDown + 0.25 * (atRate - countedDown);
    }
    this.shownAt = now;
    return this.shownEta;
  }

  /// The file being worked on and what is being done to it, if any.
  current(): { path: string; stage: string } | null {
    for (const path of this.working) return { path, stage: describe(this.files.get(path)!.state) };
    return null;
  }

  /// The files being worked on now.
  inProgress(): TrackedFile[] {
    return [...this.working].map((path) => this.files.get(path)!);
  }

  /// The files that failed so far, the first `limit` of them, and how many in all.
  failures(limit: number): { shown: TrackedFile[]; total: number } {
    return { shown: this.failedPaths.slice(0, limit).map((p) => this.files.get(p)!), total: this.failedPaths.length };
  }

  counts(): { done: number; total: number } {
    return { done: this.done, total: this.files.size };
  }
}

/// A file's share of the batch: its bytes (at least one, so empty files count).
function weight(f: { bytes: number }): number {
  return Math.max(f.bytes, 1);
}

export function describe(state: FileState): string {
  switch (state.kind) {
    case "queued":
      return t("file.queued");
    case "working":
      // While reading a scan, the pages OCR has read.
      if (state.stage === "reading" && state.total > 0) return t("file.ocrPage", { done: state.done, total: state.total });
      if (state.stage === "embedding" && state.total > 0) return t("file.embedding", { done: state.done, n: state.total });
      return stageName(state.stage);
    case "indexed": {
      const line = t("file.indexed", { pages: counted(state.pages, "page"), passages: counted(state.chunks, "passage") });
      const reused = state.embedded < state.chunks ? t("file.reused", { line, n: state.chunks - state.embedded }) : line;
      return unreadable(reused, state.unreadablePages);
    }
    case "unchanged":
      return t("file.unchanged");
    case "removed":
      return t("file.removed");
    case "failed":
      return t("file.failed", { reason: state.reason });
    case "cancelled":
      return t("file.cancelled");
  }
}

/// A stage of the pipeline by its name in the language (the engine names it in English).
export function stageName(stage: string): string {
  return stage === "reading" || stage === "chunking" || stage === "embedding" || stage === "storing" ? t(`stage.${stage}`) : stage;
}

/// `line` and the pages left out of its file, grouped by reason: "…; pages 2, 5 unreadable: <reason>".
function unreadable(line: string, pages: UnreadablePage[]): string {
  const byReason = new Map<string, number[]>();
  for (const p of pages) byReason.set(p.reason, [...(byReason.get(p.reason) ?? []), p.page]);
  return [...byReason].reduce(
    (said, [reason, numbers]) => t(numbers.length > 1 ? "file.unreadablePages" : "file.unreadablePage", { line: said, pages: numbers.join(", "), reason }),
    line,
  );
}
