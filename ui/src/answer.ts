// One question and its answer in the conversation, streamed as the model writes, then shown with
// numbered citation markers; and the sources pane listing the passages it was written from, the
// cited ones with their quotes marked. Each answer keeps its own passages (in the history too),
// so an old answer's markers show its passages, not the latest answer's.
import type { Answer, EngineEvent, Exchange } from "./api";
import type { Citation } from "./bindings/Citation";
import type { Declined } from "./bindings/Declined";
import type { Source } from "./bindings/Source";
import { el } from "./dom";
import { location, quoted, readableMarkdown, seconds, splitByteRange } from "./format";
import { currentLanguage, num, t } from "./i18n";

export type Cited = { number: number; chunkId: string; path: string; page: number | null; passage: string; quote: string; range: [number, number] | null; cited: boolean };

export class ExchangeView {
  readonly root: HTMLElement;
  private text: HTMLElement;
  private markers: HTMLElement;
  /// The words of the document the answer rests on (its first citation's quote), under it: the
  /// answer said in the document's own terms, with where it stands.
  private quote: HTMLElement;
  private meta: HTMLElement;
  /// How the answer was made (tokens, speeds, speculation), for those who want to know.
  private details: HTMLDetailsElement;
  private reading: HTMLProgressElement;
  private streamed = "";
  sources: Source[] = [];
  /// What the sources pane shows for this answer once it is in: every passage it was written
  /// from, cited or not.
  places: Cited[] = [];
  /// How many text updates arrived while streaming (the UI shows them as they come).
  updates = 0;

  constructor(question: string, private onMarker: (n: number) => void) {
    this.text = el("div", { className: "answer-text" });
    this.markers = el("div", { className: "citation-markers" });
    this.quote = el("blockquote", { className: "answer-quote" });
    this.quote.hidden = true;
    this.meta = el("div", { className: "answer-meta muted", text: t("answer.searching") });
    // How far the model has read the question and passages: most of the wait on a CPU.
    this.reading = el("progress", { className: "reading", attrs: { max: "1", value: "0", "aria-label": t("answer.readingLabel") } });
    this.reading.hidden = true;
    this.details = el("details", { className: "answer-details muted" });
    this.details.hidden = true;
    this.root = el(
      "article",
      { className: "exchange", attrs: { "data-state": "streaming" } },
      el("p", { className: "question", text: question }),
      el("div", { className: "answer" }, this.text, this.markers),
      this.quote,
      this.reading,
      this.meta,
      this.details,
    );
  }

  onEvent(e: EngineEvent): void {
    if (e.type === "retrieved") {
      this.sources = e.sources;
      this.meta.textContent = t("answer.found", { n: e.sources.length });
    } else if (e.type === "prompt_progress") {
      if (this.streamed) return;
      this.reading.max = Math.max(1, e.total);
      this.reading.value = e.done;
      this.reading.hidden = false;
      this.meta.textContent = t("answer.reading", { n: this.sources.length, done: e.done, total: e.total });
      this.root.setAttribute("data-prompt", `${e.done}/${e.total}`);
    } else if (e.type === "answer_delta") {
      this.reading.hidden = true;
      if (!this.streamed) this.meta.textContent = t("answer.writing");
      this.streamed += e.text;
      this.text.textContent = this.streamed;
      this.updates++;
    }
  }

  finish(answer: Answer): Cited[] {
    this.reading.hidden = true;
    this.text.textContent = answer.text;
    this.places = answerPlaces(answer.citations, answer.sources);
    this.showMarkers();
    this.showQuote();
    this.showDeclined(answer.declined);
    const s = answer.stats;
    const time = answer.timing;
    const spec = answer.speculation;
    // Tokens per model step: above 1 when drafted tokens were accepted (speculative decoding).
    const perStep = spec && spec.verify_steps > 0 ? t("answer.perStep", { n: num(spec.generated_tokens / spec.verify_steps, 1) }) : "";
    // Loading shows only when this question waited for it (the first after start or unlock).
    const loading = seconds(time.model_load) >= 0.05 ? t("answer.loaded", { s: num(seconds(time.model_load), 1) }) : "";
    // One plain line, the whole wait from the question; the figures behind "details".
    this.meta.textContent = t("answer.firstWord", { s: num(seconds(time.first_word), 1) });
    const details = t("answer.details", {
      search: num(seconds(time.search), 2),
      loading,
      choosing: num(seconds(time.prompt_building), 2),
      prompt: s.prompt_tokens,
      reading: num(seconds(s.time_to_first_token), 1),
      reused: s.prompt_reused_tokens,
      written: s.completion_tokens,
      rate: num(s.decode_tokens_per_sec, 1),
      perStep,
      total: num(seconds(time.total), 1),
    });
    this.details.replaceChildren(el("summary", { text: t("common.details") }), el("span", { text: details }));
    this.details.hidden = false;
    this.root.setAttribute("data-state", "done");
    return this.places;
  }

  /// An answer from the history, with its markers where its passages were kept (answers
  /// recorded before passages were kept name their sources in plain text).
  static past(x: Exchange, onMarker: (n: number) => void): ExchangeView {
    const v = new ExchangeView(x.question, onMarker);
    v.text.textContent = x.answer;
    v.root.setAttribute("data-state", "history");
    v.showDeclined(x.declined);
    if (x.citations.length && x.citations.every((c) => c.passage)) {
      v.places = answerPlaces(x.citations, x.sources);
      v.showMarkers();
      v.showQuote();
      v.meta.textContent = t("answer.asked", { when: new Date(x.at_ms).toLocaleString(currentLanguage()) });
    } else {
      v.meta.textContent = x.citations.map((c) => `[${c.number}] ${location(c.path, c.page)}`).join("  ");
    }
    return v;
  }

  /// A decline is an answer, shown as one: the documents do not say, nothing is cited, and a
  /// streamed answer that no passage supported is replaced and named as withdrawn.
  private showDeclined(declined: Declined | null | undefined): void {
    this.root.classList.toggle("declined", !!declined);
    this.root.querySelector(".withdrawn")?.remove();
    if (declined?.unsupported_answer) {
      const note = el("p", { className: "withdrawn muted", text: t("answer.withdrawn", { answer: quoted(declined.unsupported_answer) }) });
      this.text.after(note);
    }
  }

  /// Marks this answer as the one whose passages the sources pane shows.
  showing(shown: boolean): void {
    this.root.classList.toggle("sources-shown", shown);
  }

  private showQuote(): void {
    const first = this.places.find((c) => c.cited && c.quote);
    this.quote.hidden = !first;
    this.quote.replaceChildren();
    if (first) this.quote.append(el("span", { text: quoted(first.quote) }), el("cite", { className: "muted", text: location(first.path, first.page) }));
  }

  private showMarkers(): void {
    this.markers.replaceChildren(
      ...this.places.filter((c) => c.cited).map((c) => {
        const b = el("button", {
          className: "citation-marker",
          text: String(c.number),
          attrs: { type: "button", title: location(c.path, c.page), "data-number": String(c.number) },
        });
        b.addEventListener("click", () => this.onMarker(c.number));
        return b;
      }),
    );
  }

  /// `action`: a button after the message, offering the way out.
  fail(message: string, action?: { label: string; run: () => void }): void {
    this.reading.hidden = true;
    this.root.setAttribute("data-state", message === "cancelled" ? "cancelled" : "error");
    this.meta.textContent = message === "cancelled" ? t("answer.stopped") : message;
    this.meta.classList.toggle("error", message !== "cancelled");
    if (action) {
      const button = el("button", { className: "small offer", text: action.label, attrs: { type: "button" } });
      button.addEventListener("click", action.run);
      this.meta.append(" ", button);
    }
  }
}

/// The retrieved passages as the sources pane shows them before the answer cites any.
export function retrievedPlaces(sources: Source[]): Cited[] {
  return sources.map((s) => ({ number: s.number, chunkId: s.chunk_id, path: s.path, page: s.page, passage: s.text, quote: "", range: null, cited: false }));
}

/// One entry per cited source, in the order the answer cites them (a source cited twice keeps
/// its first place and quote).
export function citedPlaces(citations: Citation[]): Cited[] {
  const seen = new Map<number, Cited>();
  for (const c of citations) {
    if (!seen.has(c.number))
      seen.set(c.number, { number: c.number, chunkId: c.chunk_id, path: c.path, page: c.page, passage: c.passage, quote: c.quote, range: c.quote_range, cited: true });
  }
  return [...seen.values()];
}

/// An answer's passages as the pane lists them: the cited ones first, in citation order with
/// their quotes (so the one the answer rests on is at the top, not below passages it did not
/// use), then the ones it read and did not cite, by number, so a reader can check those too.
export function answerPlaces(citations: Citation[], sources: Source[]): Cited[] {
  const cited = citedPlaces(citations);
  const numbers = new Set(cited.map((c) => c.number));
  const read = retrievedPlaces(sources.filter((s) => !numbers.has(s.number)).sort((a, b) => a.number - b.number));
  return [...cited, ...read];
}

export function renderSources(list: HTMLElement, cited: Cited[], onOpen: (chunkId: string, page: number | null) => void): void {
  // Before the answer cites anything every passage is simply found; after, the others were read.
  const answered = cited.some((c) => c.cited);
  list.replaceChildren(
    ...cited.map((c) => {
      const parts = splitByteRange(c.passage, c.range);
      const [before, quote, after] = /\.(md|markdown)$/i.test(c.path) ? parts.map(readableMarkdown) : parts;
      const passage = el("blockquote", { className: "passage" }, before);
      if (quote) {
        const mark = el("mark", { text: quote });
        passage.append(mark, after);
        // Show the quoted words, not the top of a long passage.
        requestAnimationFrame(() => {
          passage.scrollTop = Math.max(0, mark.offsetTop - passage.offsetTop - 40);
        });
      }
      const open = el("button", { className: "small", text: t("sources.open"), attrs: { type: "button" } });
      open.addEventListener("click", () => onOpen(c.chunkId, c.page));
      const li = el(
        "li",
        { className: "source", attrs: { id: `source-${c.number}`, "data-page": c.page == null ? "" : String(c.page), "data-cited": String(c.cited) } },
        el("div", { className: "source-head" }, el("span", { className: "source-number", text: String(c.number) }), el("span", { className: "source-doc", text: location(c.path, c.page) }), open),
        passage,
      );
      if (!quote && c.quote) li.append(el("p", { className: "muted", text: t("sources.quotedNotFound", { quote: quoted(c.quote) }) }));
      if (!c.cited && answered) li.append(el("p", { className: "muted", text: t("sources.readNotCited") }));
      return li;
    }),
  );
}
