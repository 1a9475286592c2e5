import { answerPlaces, citedPlaces, ExchangeView, renderSources, retrievedPlaces } from "./answer";
import type { Citation } from "./bindings/Citation";

const citation = (number: number, quote: string, passage: string, range: [number, number] | null, page: number | null = 4): Citation => ({
  number, chunk_id: `doc:${number}`, path: `/docs/guide${number}.pdf`, page, quote, quote_range: range, passage,
});

describe("answer view", () => {
  it("streams deltas, then shows one marker per cited source", () => {
    const opened: number[] = [];
    const v = new ExchangeView("What is ssearch36?", (n) => opened.push(n));
    v.onEvent({ type: "retrieved", sources: [] });
    v.onEvent({ type: "answer_delta", text: "It is " });
    v.onEvent({ type: "answer_delta", text: "a search." });
    expect(v.root.querySelector(".answer-text")!.textContent).toBe("It is a search.");
    expect(v.updates).toBe(2);
    const cited = v.finish({
      question: "q", text: "It is a search.", raw: "", sources: [], declined: null, confidence: -0.2,
      citations: [citation(2, "b", "ab", [1, 2]), citation(1, "a", "ab", [0, 1]), citation(2, "again", "ab", null)],
      stats: { prompt_tokens: 1, prompt_reused_tokens: 0, completion_tokens: 2, time_to_first_token: { secs: 1, nanos: 500_000_000 }, total_time: { secs: 2, nanos: 0 }, decode_tokens_per_sec: 10, prompt_tokens_per_sec: 5, finish_reason: "stop" },
      speculation: {
        verify_steps: 4, tree_steps: 0, branch_proposed: 0, branch_accepted: 0, tree_pauses: 0,
        generated_tokens: 10, draft_model_steps: 0, decode_tokens_per_sec: 10, decode_secs: 1, power: null,
        grammar: { proposed: 6, accepted: 6, pauses: 0 }, lookup: { proposed: 2, accepted: 0, pauses: 0 }, model: { proposed: 0, accepted: 0, pauses: 0 },
      },
      timing: {
        search: { secs: 0, nanos: 120_000_000 }, model_load: { secs: 0, nanos: 1_000_000 }, prompt_building: { secs: 0, nanos: 250_000_000 },
        first_word: { secs: 1, nanos: 900_000_000 }, total: { secs: 3, nanos: 100_000_000 },
      },
    });
    // In the order the answer cites them, each source once.
    expect(cited.map((c) => c.number)).toEqual([2, 1]);
    const markers = [...v.root.querySelectorAll<HTMLButtonElement>(".citation-marker")];
    expect(markers.map((m) => m.textContent)).toEqual(["2", "1"]);
    expect(markers[1].title).toBe("guide1.pdf, p. 4");
    // Under the answer, the words of the document it rests on (its first citation) and where.
    const quote = v.root.querySelector<HTMLElement>(".answer-quote")!;
    expect(quote.hidden).toBe(false);
    expect(quote.textContent).toBe("“b”guide2.pdf, p. 4");
    markers[1].click();
    expect(opened).toEqual([1]);
    expect(v.root.dataset.state).toBe("done");
    // The whole wait from the question, not the model's part alone (1.5 s).
    expect(v.root.querySelector(".answer-meta")!.textContent).toBe("first word after 1.9 s");
    const details = v.root.querySelector<HTMLDetailsElement>(".answer-details")!;
    expect(details.hidden).toBe(false);
    expect(details.open).toBe(false);
    expect(details.textContent).toContain("2 tokens written at 10.0 tok/s · 2.5 tokens/step");
    expect(details.textContent).toContain("searched in 0.12 s · passages' sentences chosen in 0.25 s · model read 1 tokens of question and passages in 1.5 s (0 kept from the last question)");
    expect(details.textContent).toContain("whole answer after 3.1 s");
    // A model already loaded is not mentioned.
    expect(details.textContent).not.toContain("loaded");
  });

  it("shows how far the model has read the passages until the first word", () => {
    const v = new ExchangeView("q", () => {});
    const source = { number: 1, chunk_id: "doc:0", path: "/docs/a.pdf", page: 3, start: 0, end: 4, text: "text", score: 1 };
    v.onEvent({ type: "retrieved", sources: [source, { ...source, number: 2 }, { ...source, number: 3 }] });
    const bar = v.root.querySelector<HTMLProgressElement>("progress.reading")!;
    const meta = v.root.querySelector(".answer-meta")!;
    expect(bar.hidden).toBe(true);
    v.onEvent({ type: "prompt_progress", done: 0, total: 1400 });
    v.onEvent({ type: "prompt_progress", done: 512, total: 1400 });
    expect(bar.hidden).toBe(false);
    expect([bar.value, bar.max]).toEqual([512, 1400]);
    expect(meta.textContent).toBe("reading the question and 3 passages: 512 of 1,400 tokens");
    expect(v.root.dataset.prompt).toBe("512/1400");
    v.onEvent({ type: "prompt_progress", done: 1400, total: 1400 });
    v.onEvent({ type: "answer_delta", text: "It" });
    expect(bar.hidden).toBe(true);
    expect(meta.textContent).toBe("writing…");
    v.onEvent({ type: "prompt_progress", done: 3, total: 1400 });
    expect(bar.hidden).toBe(true);
    expect(v.root.dataset.prompt).toBe("1400/1400");
  });

  it("lists the retrieved passages before any is cited", () => {
    const list = document.createElement("ol");
    const source = { number: 2, chunk_id: "doc:7", path: "/docs/guide.pdf", page: 12, start: 0, end: 9, text: "a passage", score: 0.5 };
    renderSources(list, retrievedPlaces([source]), () => {});
    const item = list.querySelector("li.source")!;
    expect(item.id).toBe("source-2");
    expect(item.querySelector(".source-doc")!.textContent).toBe("guide.pdf, p. 12");
    expect(item.querySelector(".passage")!.textContent).toBe("a passage");
    expect(item.querySelector("mark")).toBeNull();
    expect(item.textContent).not.toContain("not found word for word");
  });

  it("shows a Markdown passage's badges as words, the quote still marked", () => {
    const list = document.createElement("ol");
    const passage = "# Notify\n\n[![» Crate](https://flat.badgen.net/crates/v/notify)][crate]\n\nCross-platform filesystem notification library for Rust.";
    const quote = "Cross-platform filesystem notification library";
    const start = new TextEncoder().encode(passage.slice(0, passage.indexOf(quote))).length;
    const range: [number, number] = [start, start + new TextEncoder().encode(quote).length];
    renderSources(list, citedPlaces([citation(1, quote, passage, range, null)].map((c) => ({ ...c, path: "/docs/notify-README.md" }))), () => {});
    const shown = list.querySelector(".passage")!;
    expect(shown.textContent).toBe("# Notify\n\n» Crate\n\nCross-platform filesystem notification library for Rust.");
    expect(shown.querySelector("mark")!.textContent).toBe(quote);
    // A PDF's text is shown as it is.
    renderSources(list, citedPlaces([citation(1, quote, passage, range, 3)]), () => {});
    expect(list.querySelector(".passage")!.textContent).toBe(passage);
  });

  it("highlights the quoted words in the passage and never turns text into markup", () => {
    const list = document.createElement("ol");
    const passage = "Intro <b>not bold</b> then the rigorous Smith-Waterman search.";
    const quote = "rigorous Smith-Waterman search";
    const start = passage.indexOf(quote);
    const opened: [string, number | null][] = [];
    renderSources(list, citedPlaces([citation(1, quote, passage, [start, start + quote.length], 12)]), (id, page) => opened.push([id, page]));
    const item = list.querySelector("li.source")!;
    expect(item.getAttribute("data-page")).toBe("12");
    expect(item.querySelector(".source-doc")!.textContent).toBe("guide1.pdf, p. 12");
    expect(item.querySelector("mark")!.textContent).toBe(quote);
    expect(item.querySelector("b")).toBeNull();
    expect(item.querySelector(".passage")!.textContent).toBe(passage);
    item.querySelector("button")!.click();
    // "Open document" asks for the cited page.
    expect(opened).toEqual([["doc:1", 12]]);
  });

  it("says when a quote is not in the passage word for word", () => {
    const list = document.createElement("ol");
    renderSources(list, citedPlaces([citation(1, "made up", "real text", null, null)]), () => {});
    expect(list.querySelector("mark")).toBeNull();
    expect(list.textContent).toContain("not found word for word");
    expect(list.querySelector(".source-doc")!.textContent).toBe("guide1.pdf");
  });

  it("keeps every passage an answer was written from, cited ones first, the uncited ones said so", () => {
    const source = (number: number) => ({ number, chunk_id: `doc:${number}`, path: `/docs/guide${number}.pdf`, page: 4, start: 0, end: 2, text: "ab", score: 1 });
    // The cited passages first, in citation order; then the rest by number.
    const places = answerPlaces([citation(3, "b", "ab", [1, 2]), citation(2, "a", "ab", [0, 1])], [source(1), source(3), source(2), source(4)]);
    expect(places.map((p) => [p.number, p.cited])).toEqual([[3, true], [2, true], [1, false], [4, false]]);
    const list = document.createElement("ol");
    renderSources(list, places, () => {});
    const items = [...list.querySelectorAll("li.source")];
    expect(items.map((i) => i.getAttribute("data-cited"))).toEqual(["true", "true", "false", "false"]);
    expect(items[2].textContent).toContain("Read for this answer, not cited.");
    expect(items[0].textContent).not.toContain("not cited");
    expect(items[0].querySelector("mark")!.textContent).toBe("b");
  });

  it("shows a past answer with markers for its own passages, or names them where none were kept", () => {
    const opened: number[] = [];
    const kept = {
      question: "q", answer: "It is a search.", at_ms: 0, declined: null,
      citations: [{ number: 3, chunk_id: "doc:3", path: "/docs/old.pdf", page: 9, quote: "x", quote_range: [0, 1] as [number, number], passage: "x y" }],
      sources: [],
    };
    const v = ExchangeView.past(kept, (n) => opened.push(n));
    expect(v.root.dataset.state).toBe("history");
    expect(v.root.querySelector(".answer-text")!.textContent).toBe("It is a search.");
    expect(v.places.map((p) => [p.number, p.path, p.passage])).toEqual([[3, "/docs/old.pdf", "x y"]]);
    v.root.querySelector<HTMLButtonElement>(".citation-marker")!.click();
    expect(opened).toEqual([3]);
    const before = ExchangeView.past({ ...kept, citations: [{ ...kept.citations[0], chunk_id: "", quote_range: null, passage: "" }] }, () => {});
    expect(before.root.querySelector(".citation-marker")).toBeNull();
    expect(before.root.querySelector(".answer-meta")!.textContent).toBe("[3] old.pdf, p. 9");
  });

  it("shows a decline as an answer: the streamed words withdrawn, no markers, the passages read", () => {
    const v = new ExchangeView("What is the capital of France?", () => {});
    const source = { number: 1, chunk_id: "doc:0", path: "/docs/4ti2.pdf", page: 56, start: 0, end: 4, text: "text", score: 1 };
    v.onEvent({ type: "retrieved", sources: [source] });
    v.onEvent({ type: "answer_delta", text: "Paris" });
    const text = "Your documents don't say. The closest passages are from 4ti2.pdf (page 56).";
    const stats = { prompt_tokens: 1, prompt_reused_tokens: 0, completion_tokens: 2, time_to_first_token: { secs: 1, nanos: 0 }, total_time: { secs: 2, nanos: 0 }, decode_tokens_per_sec: 10, prompt_tokens_per_sec: 5, finish_reason: "stop" };
    const places = v.finish({
      question: "q", text, raw: "", sources: [source], citations: [], stats, speculation: null, confidence: -2.5,
      declined: { about: "The closest passages are from 4ti2.pdf (page 56).", unsupported_answer: "Paris" },
      timing: {
        search: { secs: 0, nanos: 80_000_000 }, model_load: { secs: 2, nanos: 400_000_000 }, prompt_building: { secs: 0, nanos: 30_000_000 },
        first_word: { secs: 4, nanos: 0 }, total: { secs: 5, nanos: 0 },
      },
    });
    // The first question after start waited for the model: the details say so.
    expect(v.root.querySelector(".answer-details")!.textContent).toContain("searched in 0.08 s · answer model loaded in 2.4 s ·");
    expect(v.root.classList.contains("declined")).toBe(true);
    expect(v.root.querySelector(".answer-text")!.textContent).toBe(text);
    expect(v.root.querySelector(".withdrawn")!.textContent).toContain("Not given, as the passages do not bear it out: “Paris”");
    expect(v.root.querySelectorAll(".citation-marker").length).toBe(0);
    expect(v.root.querySelector<HTMLElement>(".answer-quote")!.hidden).toBe(true);
    expect(places.map((p) => [p.number, p.cited])).toEqual([[1, false]]);
    // From the history, the same.
    const past = ExchangeView.past({ question: "q", answer: text, at_ms: 0, citations: [], sources: [source], declined: { about: "x", unsupported_answer: null } }, () => {});
    expect(past.root.classList.contains("declined")).toBe(true);
    expect(past.root.querySelector(".withdrawn")).toBeNull();
  });
});
