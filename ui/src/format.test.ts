import { counted, fileName, formatBytes, formatDuration, formatTimeLeft, location, newPassphraseProblem, readableMarkdown, splitByteRange } from "./format";

describe("format", () => {
  it("takes a new passphrase only when long enough and typed the same twice", () => {
    expect(newPassphraseProblem("correct horse", "correct horse")).toBeNull();
    expect(newPassphraseProblem("short", "short")).toContain("at least 8");
    expect(newPassphraseProblem("correct horse", "correct hose")).toContain("differ");
    expect(newPassphraseProblem("", "")).toContain("at least 8");
  });

  it("prints sizes in decimal units", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(999)).toBe("999 B");
    expect(formatBytes(1500)).toBe("1.5 KB");
    expect(formatBytes(1_090_000_000)).toBe("1.1 GB");
    expect(formatBytes(250_000_000)).toBe("250 MB");
    expect(formatBytes(-1)).toBe("–");
  });

  it("says the time left coarsely", () => {
    expect(formatTimeLeft(4)).toBe("a few seconds left");
    expect(formatTimeLeft(23)).toBe("about 25 s left");
    expect(formatTimeLeft(75)).toBe("about 1 min left");
    expect(formatTimeLeft(130)).toBe("about 2 min left");
    expect(formatTimeLeft(7300)).toBe("about 2 h 0 min left");
    expect(formatTimeLeft(Number.NaN)).toBe("–");
  });

  it("prints durations", () => {
    expect(formatDuration(4.4)).toBe("4 s");
    expect(formatDuration(125)).toBe("2 min 5 s");
    expect(formatDuration(3 * 3600 + 7 * 60)).toBe("3 h 7 min");
  });

  it("names files and pages", () => {
    expect(fileName("/home/a/fasta_guide.pdf")).toBe("fasta_guide.pdf");
    expect(fileName("C:\\docs\\x.md")).toBe("x.md");
    expect(location("/d/fasta_guide.pdf", 12)).toBe("fasta_guide.pdf, p. 12");
    expect(location("/d/notes.md", null)).toBe("notes.md");
  });

  it("splits on UTF-8 byte offsets, not UTF-16 indexes", () => {
    // "é" is 2 bytes, "€" 3 bytes: byte offsets differ from string indexes after them.
    const text = "café costs 5€ here";
    const start = new TextEncoder().encode("café costs ").length;
    const end = start + new TextEncoder().encode("5€").length;
    expect(splitByteRange(text, [start, end])).toEqual(["café costs ", "5€", " here"]);
    expect(splitByteRange(text, null)).toEqual([text, "", ""]);
    expect(splitByteRange(text, [5, 999])).toEqual([text, "", ""]);
  });
});

describe("counted", () => {
  it("says one thing in the singular and others in the plural", () => {
    expect(counted(1, "page")).toBe("1 page");
    expect(counted(0, "passage")).toBe("0 passages");
    expect(counted(1234, "document")).toBe("1,234 documents");
  });
});

describe("readableMarkdown", () => {
  it("shows badges as their words and leaves out the links they point to", () => {
    const notify = "# Notify\n\n[![» Crate](https://flat.badgen.net/crates/v/notify)][crate]\n[![» CI](https://flat.badgen.net/github/checks/x)](https://github.com/x)\n\n_Cross-platform filesystem notification library for Rust._";
    expect(readableMarkdown(notify)).toBe("# Notify\n\n» Crate\n» CI\n\n_Cross-platform filesystem notification library for Rust._");
    const tokio = "[![Crates.io][crates-badge]][crates-url]\n![logo](logo.png) Tokio\n\n[crates-badge]: https://img.shields.io/crates/v/tokio.svg\n[crates-url]: https://crates.io/crates/tokio\nNext.";
    expect(readableMarkdown(tokio)).toBe("Crates.io\nlogo Tokio\n\nNext.");
  });

  it("leaves links, code and plain text alone", () => {
    const text = "See [the docs](https://docs.rs/notify) and `a[0](b)`; arrays[i]: ok.";
    expect(readableMarkdown(text)).toBe(text);
  });
});
