import type { AppStatus } from "./api";
import { addPaths, DocumentList, ProblemsBanner, REMOVE_ASKS_MS, renderIngest, ROW_PX } from "./library";
import { IngestTracker } from "./ingest";
import { DAMAGE_REMEDY } from "./bindings/said";

const doc = (docId: string, path: string): AppStatus["documents"][number] => ({
  doc_id: docId, path, kind: "markdown", content_hash: "", bytes: 10, pages: 2, chunks: 1, ingested_at_ms: 0, modified_ms: 0,
});

describe("the documents list", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const setUp = () => {
    const root = document.createElement("ul");
    const removed: string[] = [];
    const list = new DocumentList(root, async (id) => void removed.push(id));
    const docs = [doc("a", "/notes/a.md"), doc("b", "/notes/b.pdf")];
    list.render(docs);
    const button = (i: number) => root.querySelectorAll("button")[i] as HTMLButtonElement;
    return { root, removed, list, docs, button };
  };

  it("names each document with its pages and passages", () => {
    const { root } = setUp();
    expect([...root.querySelectorAll("li")].map((l) => l.textContent)).toEqual([
      "a.md2 pages · 1 passageRemove",
      "b.pdf2 pages · 1 passageRemove",
    ]);
    expect(root.querySelector("li")!.title).toBe("/notes/a.md");
  });

  it("removes on the second click only, and the question survives the list being drawn again", () => {
    const { removed, list, docs, button } = setUp();
    button(0).click();
    expect(removed).toEqual([]);
    expect(button(0).textContent).toBe("Remove?");
    list.render(docs); // a status change meanwhile
    expect(button(0).textContent).toBe("Remove?");
    expect(button(1).textContent).toBe("Remove");
    button(0).click();
    expect(removed).toEqual(["a"]);
  });

  it("takes the question back after a few seconds, and when another document is asked about", () => {
    const { removed, button } = setUp();
    button(0).click();
    vi.advanceTimersByTime(REMOVE_ASKS_MS);
    expect(button(0).textContent).toBe("Remove");
    button(0).click(); // asks again, does not remove
    expect(removed).toEqual([]);
    button(1).click();
    expect(button(0).textContent).toBe("Remove");
    expect(button(1).textContent).toBe("Remove?");
    button(1).click();
    expect(removed).toEqual(["b"]);
  });
});

describe("a library of many documents", () => {
  const many = (n: number) =>
    Array.from({ length: n }, (_, i) => doc(`d${i}`, `/library/folder-${String(i % 50).padStart(2, "0")}/note-${String(i).padStart(5, "0")}.md`))
      .sort((a, b) => a.path.localeCompare(b.path));

  it("draws only a window of rows, groups by folder, and filters by name", () => {
    const root = document.createElement("ul");
    const counts: [number, number][] = [];
    const list = new DocumentList(root, async () => {}, root, (shown, total) => counts.push([shown, total]));
    list.render(many(50_000));
    // 50 folder headings and 50,000 documents, of which a window is drawn.
    expect(root.style.height).toBe(`${50_050 * ROW_PX}px`);
    expect(root.querySelectorAll("li").length).toBeLessThanOrEqual(40);
    expect(root.querySelector("li.folder")!.textContent).toBe("▾ folder-001,000 documents");
    expect(counts.at(-1)).toEqual([50_000, 50_000]);

    const started = performance.now();
    list.setFilter("NOTE-31337");
    const took = performance.now() - started;
    console.log(`filtering 50,000 documents by name: ${took.toFixed(1)} ms`);
    expect(counts.at(-1)).toEqual([1, 50_000]);
    // One folder left: no heading for it.
    expect([...root.querySelectorAll("li")].map((l) => l.title)).toEqual(["/library/folder-37/note-31337.md"]);
    // Every word typed must be in the path, any case.
    list.setFilter("folder-37 note-313");
    expect(counts.at(-1)).toEqual([2, 50_000]); // note-31337 and note-31387, both in folder-37
    list.setFilter("");
    expect(counts.at(-1)).toEqual([50_000, 50_000]);
  });

  it("folds a folder away and opens it again", () => {
    const root = document.createElement("ul");
    const list = new DocumentList(root, async () => {});
    list.render([doc("a", "/x/a.md"), doc("b", "/x/b.md"), doc("c", "/y/c.md")]);
    const names = () => [...root.querySelectorAll("li")].map((l) => l.querySelector(".doc-name, .folder-toggle")!.textContent);
    expect(names()).toEqual(["▾ x", "a.md", "b.md", "▾ y", "c.md"]);
    (root.querySelector("li.folder button") as HTMLButtonElement).click();
    expect(names()).toEqual(["▸ x", "▾ y", "c.md"]);
    (root.querySelector("li.folder button") as HTMLButtonElement).click();
    expect(names()).toEqual(["▾ x", "a.md", "b.md", "▾ y", "c.md"]);
    // Rows sit at their place in the whole list.
    expect([...root.querySelectorAll("li")].map((l) => l.style.top)).toEqual(["0px", "44px", "88px", "132px", "176px"]);
  });
});

describe("the problems banner", () => {
  const setUp = (fetchModels: () => Promise<string[]>) => {
    const box = document.createElement("div");
    const calls: string[] = [];
    const banner = new ProblemsBanner(box, {
      fetchModels,
      fetched: async () => void calls.push("fetched"),
      repair: () => void calls.push("repair"),
    });
    return { box, banner, calls };
  };

  it("is hidden with nothing wrong, and offers a repair where the files are damaged", () => {
    const { box, banner, calls } = setUp(async () => []);
    banner.show([]);
    expect(box.hidden).toBe(true);
    banner.show([`the passages cannot be opened; the library's files look damaged: ${DAMAGE_REMEDY}`, "The disk is nearly full."]);
    expect(box.hidden).toBe(false);
    const buttons = box.querySelectorAll("button");
    expect(buttons).toHaveLength(1);
    expect(buttons[0].textContent).toBe("Check and repair the library…");
    buttons[0].click();
    expect(calls).toEqual(["repair"]);
  });

  it("downloads the missing models when asked, says so while it runs, then what it installed", async () => {
    let finish: (names: string[]) => void = () => {};
    const { box, banner, calls } = setUp(() => new Promise((resolve) => (finish = resolve)));
    banner.show(["The answer model is not installed."], ["qwen2.5-coder-1.5b"]);
    const button = () => box.querySelector<HTMLButtonElement>("#fetch-models-button")!;
    expect(button().textContent).toBe("Download qwen2.5-coder-1.5b");
    button().click();
    expect(button().textContent).toBe("Downloading…");
    expect(button().disabled).toBe(true);
    banner.fetchProgress("qwen2.5-coder-1.5b: 40 %");
    expect(box.querySelector("#fetch-progress")!.textContent).toBe("qwen2.5-coder-1.5b: 40 %");
    finish(["qwen2.5-coder-1.5b"]);
    await vi.waitFor(() => expect(calls).toEqual(["fetched"]));
    banner.show([], []);
    expect(box.hidden).toBe(true);
  });

  it("says why a download failed", async () => {
    const { box, banner, calls } = setUp(() => Promise.reject("no network: connect to the internet and try again"));
    banner.show(["The answer model is not installed."], ["m"]);
    box.querySelector<HTMLButtonElement>("#fetch-models-button")!.click();
    await vi.waitFor(() => expect(calls).toEqual(["fetched"]));
    banner.show(["The answer model is not installed."], ["m"]);
    expect(box.querySelector("#fetch-progress")!.textContent).toBe("no network: connect to the internet and try again");
  });
});

describe("an addition's summary", () => {
  const setUp = () => {
    document.body.innerHTML = `<div id="ingest-panel"><strong id="ingest-headline"></strong><progress id="ingest-progress"></progress>
      <div id="ingest-eta"></div><ul id="ingest-files"></ul></div><div id="ingest-summary"></div>`;
    const tracker = new IngestTracker();
    tracker.apply({ type: "ingest_started", files: [{ path: "/d/good.md", bytes: 10 }, { path: "/d/bad.pdf", bytes: 10 }] });
    const reply = { indexed: 1, unchanged: 0, failed: [{ path: "/d/bad.pdf", reason: "the PDF is damaged" }], chunks: 2, cancelled: false };
    const finished = () => {
      tracker.apply({ type: "file_finished", path: "/d/good.md", outcome: { status: "indexed", pages: 1, chunks: 2, embedded: 2, unreadable_pages: [], pages_resumed: 0 } });
      tracker.apply({ type: "file_finished", path: "/d/bad.pdf", outcome: { status: "failed", reason: "the PDF is damaged" } });
      tracker.apply({ type: "ingest_finished", indexed: 1, unchanged: 0, removed: 0, failed: 1, chunks: 2, cancelled: false });
      renderIngest(tracker);
    };
    const shown = () => document.getElementById("ingest-summary")!.textContent!;
    return { tracker, reply, finished, shown };
  };

  it("shows the counts and the files skipped when the last event comes before the reply", async () => {
    const { tracker, reply, finished, shown } = setUp();
    finished();
    await addPaths(tracker, async () => reply);
    renderIngest(tracker);
    expect(shown()).toContain("1 indexed, 0 unchanged, 1 failed; 2 passages");
    expect(shown()).toContain("Skipped:");
    expect(shown()).toContain("bad.pdf the PDF is damaged");
  });

  it("shows them both when the reply comes first and the last event after it", async () => {
    const { tracker, reply, finished, shown } = setUp();
    await addPaths(tracker, async () => reply);
    finished();
    renderIngest(tracker);
    expect(shown()).toContain("1 indexed, 0 unchanged, 1 failed; 2 passages");
    expect(shown()).toContain("bad.pdf the PDF is damaged");
    expect(document.querySelectorAll("#ingest-summary p.summary-line").length).toBe(1);
  });
});
