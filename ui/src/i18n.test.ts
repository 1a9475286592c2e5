import indexHtml from "../index.html?raw";
import quickHtml from "../quick.html?raw";
import { CATALOGUES, LANGUAGE_NAMES, languageOf, setLanguage, t, translatePage, type Key, type Language } from "./i18n";
import { describe as describeFile } from "./ingest";
import { counted, formatTimeLeft, location } from "./format";
import { renderMemory } from "./memory";

const english = CATALOGUES.en;
const languages = Object.keys(LANGUAGE_NAMES) as Language[];

/// The placeholders a message fills, sorted ("other" for one with plural forms).
function placeholders(entry: unknown): string[] {
  const text = typeof entry === "string" ? entry : (entry as Record<string, string>).other;
  return [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
}

const PAGES: Record<string, string> = { "index.html": indexHtml, "quick.html": quickHtml };

function page(file: string): Document {
  return new DOMParser().parseFromString(PAGES[file], "text/html");
}

const MARKED_ATTRIBUTES = ["title", "placeholder", "aria-label"];

describe("the catalogues", () => {
  afterEach(() => setLanguage("en"));

  it.each(languages)("%s has every key, no other, with the same placeholders", (language) => {
    const catalogue = CATALOGUES[language];
    expect(Object.keys(catalogue).filter((k) => !(k in english))).toEqual([]);
    for (const key of Object.keys(english) as Key[]) {
      const entry = catalogue[key];
      expect(entry, `${language}: ${key}`).toBeDefined();
      expect(placeholders(entry), `${language}: ${key}`).toEqual(placeholders(english[key]));
      if (typeof entry !== "string") expect(entry.other, `${language}: ${key} has no "other" form`).toBeTruthy();
    }
  });

  it.each(languages.filter((l) => l !== "en"))("%s translates the words a person reads (not left in English)", (language) => {
    // Messages that stay the same in a language are few and short ("{pages} · {passages}").
    const same = (Object.keys(english) as Key[]).filter((k) => JSON.stringify(CATALOGUES[language][k]) === JSON.stringify(english[k]));
    const long = same.filter((k) => placeholders(english[k]).length === 0 && JSON.stringify(english[k]).length > 12);
    expect(long).toEqual([]);
  });

  it.each(["index.html", "quick.html"])("%s marks every word it shows, each with a key of the catalogue", (file) => {
    const doc = page(file);
    const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
    const unmarked: string[] = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const text = n.textContent!.trim();
      const parent = n.parentElement!;
      if (text && !parent.closest("[data-i18n], [translate=no], script, style")) unmarked.push(text);
    }
    expect(unmarked).toEqual([]);
    for (const e of doc.querySelectorAll("*")) {
      for (const a of MARKED_ATTRIBUTES)
        if (e.hasAttribute(a)) expect(e.hasAttribute(`data-i18n-${a}`), `${e.outerHTML.slice(0, 80)}: its ${a}`).toBe(true);
      for (const a of ["data-i18n", ...MARKED_ATTRIBUTES.map((x) => `data-i18n-${x}`)]) {
        const key = e.getAttribute(a);
        if (key != null) expect(key in english, `${a}="${key}"`).toBe(true);
      }
    }
  });

  it("puts the page in the language: text, attributes and the page's own lang", () => {
    document.body.innerHTML = `<button data-i18n="chat.ask" data-i18n-title="chat.stopTitle" title="x">Ask</button>`;
    setLanguage("ja");
    translatePage();
    const b = document.querySelector("button")!;
    expect(b.textContent).toBe("質問");
    expect(b.title).toBe("回答を停止 (Esc)");
    expect(document.documentElement.lang).toBe("ja");
  });

  it("reads locale tags as the languages it speaks, English otherwise", () => {
    expect(languageOf("ja-JP")).toBe("ja");
    expect(languageOf("de_DE.UTF-8")).toBe("de");
    expect(languageOf("zh-Hans-CN")).toBe("zh");
    expect(languageOf("pt-BR")).toBe("en");
    expect(languageOf(null)).toBe("en");
  });

  it("says counts, numbers and quotes as each language does", () => {
    setLanguage("de");
    expect(counted(1, "page")).toBe("1 Seite");
    expect(counted(2000, "page")).toBe("2.000 Seiten");
    expect(location("/a/b.pdf", 12)).toBe("b.pdf, S. 12");
    expect(t("format.quoted", { text: "x" })).toBe("„x“");
    setLanguage("fr");
    expect(counted(2000, "passage")).toMatch(/^2\s000 passages$/);
    setLanguage("ja");
    expect(counted(3, "document")).toBe("3 件の文書");
    expect(formatTimeLeft(130)).toBe("残り約 2 分");
    expect(t("format.quoted", { text: "x" })).toBe("「x」");
    setLanguage("zh");
    expect(location("/a/b.pdf", 3)).toBe("b.pdf，第 3 页");
  });

  it("draws the memory panel and a file's progress with no English left (Japanese)", () => {
    setLanguage("ja");
    const root = document.createElement("div");
    renderMemory(root, {
      models: [
        { role: "target", path: "/m/answer.gguf", loaded: true, weights_bytes: 1e9, gpu_bytes: 0, kv_cache_bytes: 2e8, kept_prompt_bytes: 1e6, kept_prompt_tokens: 300 },
        { role: "embedder", path: "/m/search", loaded: false, weights_bytes: 1e8, gpu_bytes: 0, kv_cache_bytes: 0, kept_prompt_bytes: 0, kept_prompt_tokens: 0 },
      ],
      machine_total_bytes: 16e9,
      machine_available_bytes: 8e9,
      process_rss_bytes: 1.5e9,
      predicted_rss_bytes: 1.6e9,
      index_bytes: 3e6,
      context_tokens: 4096,
      gpu: null,
      warnings: [],
    } as unknown as Parameters<typeof renderMemory>[1]);
    const said = [
      root.textContent!,
      describeFile({ kind: "indexed", chunks: 12, embedded: 10, pages: 3, unreadablePages: [] }),
      describeFile({ kind: "working", stage: "embedding", done: 4, total: 12 }),
      describeFile({ kind: "working", stage: "storing", done: 0, total: 0 }),
    ].join(" ");
    // What is left in Latin letters are names (files, Quire, Web) and units (GB, MB).
    const latinWords = (said.match(/[A-Za-z]{3,}/g) ?? []).filter((w) => !["Quire", "Web", "gguf", "answer", "search"].includes(w));
    expect(latinWords).toEqual([]);
    expect(said).toContain("回答モデル");
    expect(said).toContain("埋め込み中 4 / 12 個の一節");
  });
});
