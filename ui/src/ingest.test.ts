import { describe as describeState, IngestTracker } from "./ingest";

describe("IngestTracker", () => {
  it("follows each file through its stages and estimates the time left", () => {
    let now = 0;
    const t = new IngestTracker(() => now);
    t.apply({ type: "ingest_started", files: [{ path: "/a.pdf", bytes: 300 }, { path: "/b.md", bytes: 100 }, { path: "/gone", bytes: 0 }] });
    expect(t.counts()).toEqual({ done: 0, total: 3 });
    expect(t.etaSeconds()).toBeNull();

    t.apply({ type: "file_started", path: "/a.pdf" });
    expect(describeState(t.files.get("/a.pdf")!.state)).toBe("reading");
    // A scan: the pages OCR has read.
    t.apply({ type: "file_progress", path: "/a.pdf", stage: "reading", done: 2, total: 3 });
    expect(describeState(t.files.get("/a.pdf")!.state)).toBe("reading: OCR page 2 of 3");
    t.apply({ type: "file_progress", path: "/a.pdf", stage: "embedding", done: 10, total: 20 });
    now = 10_000;
    // 150 of 401 weighted bytes done in 10 s.
    expect(t.progress()).toBeCloseTo(150 / 401, 5);
    expect(t.etaSeconds()).toBeCloseTo((10 * (1 - 150 / 401)) / (150 / 401), 5);
    expect(describeState(t.files.get("/a.pdf")!.state)).toBe("embedding 10 of 20 passages");

    t.apply({ type: "ingest_progress", files_done: 0, files_total: 3, chunks_embedded: 10, chunks_per_s: 1.5, eta_s: 12 });
    expect(t.chunksPerSecond).toBe(1.5);
    t.apply({ type: "file_finished", path: "/a.pdf", outcome: { status: "indexed", pages: 3, chunks: 20, embedded: 20, unreadable_pages: [{ page: 2, reason: "no JPEG 2000" }, { page: 3, reason: "no JPEG 2000" }], pages_resumed: 0 } });
    t.apply({ type: "file_finished", path: "/gone", outcome: { status: "failed", reason: "cannot read" } });
    expect(describeState(t.files.get("/a.pdf")!.state)).toBe("indexed: 3 pages, 20 passages; pages 2, 3 unreadable: no JPEG 2000");
    expect(describeState(t.files.get("/gone")!.state)).toBe("failed: cannot read");
    expect(t.counts()).toEqual({ done: 2, total: 3 });

    t.apply({ type: "ingest_finished", indexed: 1, unchanged: 0, removed: 0, failed: 1, chunks: 20, cancelled: true });
    expect(t.files.get("/b.md")!.state.kind).toBe("cancelled");
    expect(t.summary).toBe("1 indexed, 0 unchanged, 1 failed; 20 passages (cancelled)");
    expect(t.etaSeconds()).toBeNull();
  });

  it("runs the time left down steadily when files go at different rates", () => {
    let now = 0;
    const t = new IngestTracker(() => now);
    t.apply({ type: "ingest_started", files: [{ path: "/big.pdf", bytes: 1000 }, { path: "/small.md", bytes: 1000 }] });
    t.apply({ type: "file_started", path: "/big.pdf" });
    // Nothing to go by in the first seconds.
    now = 3_000;
    t.apply({ type: "file_progress", path: "/big.pdf", stage: "embedding", done: 1, total: 10 });
    expect(t.etaSeconds()).toBeNull();
    expect(t.current()).toEqual({ path: "/big.pdf", stage: "embedding 1 of 10 passages" });
    // Slow at first (5 % in 5 s: 95 s left at that rate), then fast: the rate so far swings
    // from 95 s left to a few seconds, the estimate shown moves a step at a time.
    now = 5_000;
    const first = t.etaSeconds()!;
    expect(first).toBeCloseTo(95, 5);
    let last = first;
    for (let s = 6; s <= 12; s++) {
      now = s * 1000;
      t.apply({ type: "file_progress", path: "/big.pdf", stage: "embedding", done: Math.min(10, s - 4), total: 10 });
      const eta = t.etaSeconds()!;
      const atRate = (s * (1 - t.progress())) / t.progress();
      expect(eta).toBeLessThan(last); // always down, never back up
      expect(eta).toBeGreaterThan(atRate); // and not all the way to the new rate's at once
      last = eta;
    }
  });

  it("keeps its figures as events come, for a batch of 50,000 files", () => {
    const t = new IngestTracker(() => 0);
    const files = Array.from({ length: 50_000 }, (_, i) => ({ path: `/n/${i}.md`, bytes: 100 }));
    const started = performance.now();
    t.apply({ type: "ingest_started", files });
    for (let i = 0; i < files.length; i++) {
      t.apply({ type: "file_started", path: files[i].path });
      t.apply({ type: "file_finished", path: files[i].path, outcome: i % 1000 === 7 ? { status: "failed", reason: "empty" } : { status: "unchanged" } });
      if (i === 24_999) {
        expect(t.counts()).toEqual({ done: 25_000, total: 50_000 });
        expect(t.progress()).toBeCloseTo(0.5, 9);
        expect(t.inProgress()).toEqual([]);
      }
    }
    console.log(`100,000 events of a 50,000-file batch followed in ${(performance.now() - started).toFixed(0)} ms`);
    const failures = t.failures(20);
    expect(failures.total).toBe(50);
    expect(failures.shown.map((f) => f.path).slice(0, 2)).toEqual(["/n/7.md", "/n/1007.md"]);
    expect(t.counts()).toEqual({ done: 50_000, total: 50_000 });
  });

  it("shows reused chunks and removed files", () => {
    const t = new IngestTracker(() => 0);
    t.apply({ type: "ingest_started", files: [{ path: "/renamed.md", bytes: 10 }] });
    t.apply({ type: "file_finished", path: "/renamed.md", outcome: { status: "indexed", pages: 1, chunks: 4, embedded: 1, unreadable_pages: [], pages_resumed: 0 } });
    t.apply({ type: "file_finished", path: "/old.md", outcome: { status: "removed" } });
    expect(describeState(t.files.get("/renamed.md")!.state)).toBe("indexed: 1 page, 4 passages (3 reused)");
    expect(describeState(t.files.get("/old.md")!.state)).toBe("removed (gone from disk)");
    t.apply({ type: "ingest_finished", indexed: 1, unchanged: 0, removed: 1, failed: 0, chunks: 4, cancelled: false });
    expect(t.summary).toBe("1 indexed, 0 unchanged, 1 removed, 0 failed; 4 passages");
  });

  it("ignores answer events", () => {
    const t = new IngestTracker(() => 0);
    t.apply({ type: "answer_delta", text: "x" });
    expect(t.files.size).toBe(0);
  });
});
