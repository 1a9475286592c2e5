import page from "../index.html?raw";
import type { InstalledModel } from "./api";
import { setLanguage } from "./i18n";
import { fillEmbedderPicker, fillModelPicker, NO_DRAFT, showEmbedderOffer } from "./settings";

const models: InstalledModel[] = [
  { path: "/m/qwen-1.5b.gguf", name: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M", file_bytes: 1_100_000_000, memory_bytes: 1_400_000_000, fits: true },
  { path: "/m/big.gguf", name: "big.gguf", file_bytes: 9_000_000_000, memory_bytes: 30_000_000_000, fits: false },
];
const select = (role: string) => document.getElementById(`${role}-model-select`) as HTMLSelectElement;
const pathBox = (role: string) => document.getElementById(`${role}-model-input`) as HTMLInputElement;
const other = (role: string) => document.getElementById(`${role}-model-other`)!;

beforeEach(() => {
  document.body.innerHTML = new DOMParser().parseFromString(page, "text/html").body.innerHTML;
});

describe("the model pickers", () => {
  it("list the installed models with whether each fits, the one in use chosen", () => {
    fillModelPicker("target", models, "/m/qwen-1.5b.gguf");
    expect([...select("target").options].map((o) => o.text)).toEqual([
      "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M · 1.1 GB file · fits in memory (1.4 GB)",
      "big.gguf · 9.0 GB file · needs 30.0 GB, more than is free",
      "Other file…",
    ]);
    expect(select("target").value).toBe("/m/qwen-1.5b.gguf");
    expect(other("target").hidden).toBe(true);
  });

  it("show the path box for a model that is not among the installed ones", () => {
    fillModelPicker("target", models, "/elsewhere/mine.gguf");
    expect(select("target").value).toBe("");
    expect(other("target").hidden).toBe(false);
  });

  it("start the draft picker with None, chosen when no draft model is set", () => {
    fillModelPicker("draft", models, "");
    expect(select("draft").options[0].text).toBe("None: drafts from the answer's grammar and the passages");
    expect(select("draft").value).toBe(NO_DRAFT);
    expect(other("draft").hidden).toBe(true);
  });

  it("put the choice in the path box: a model's path, nothing for None, the box itself for Other", () => {
    fillModelPicker("draft", models, "");
    const choose = (value: string) => {
      select("draft").value = value;
      select("draft").dispatchEvent(new Event("change"));
    };
    choose("/m/qwen-1.5b.gguf");
    expect(pathBox("draft").value).toBe("/m/qwen-1.5b.gguf");
    choose(NO_DRAFT);
    expect(pathBox("draft").value).toBe("");
    choose("");
    expect(other("draft").hidden).toBe(false);
  });
});

describe("the search model picker", () => {
  const embedders = ["all-minilm-l6-v2", "multilingual-e5-small"];
  const picker = () => document.getElementById("embedder-select") as HTMLSelectElement;
  const button = () => document.getElementById("change-embedder-button") as HTMLButtonElement;

  it("says which model the library is searched with and offers another, the button off until one is picked", () => {
    fillEmbedderPicker({ embedder: "all-minilm-l6-v2", embedders, ingesting: false });
    expect(document.getElementById("embedder-line")!.textContent).toBe("This library is searched with all-minilm-l6-v2.");
    expect([...picker().options].map((o) => o.value)).toEqual(embedders);
    expect(picker().value).toBe("all-minilm-l6-v2");
    expect(button().disabled).toBe(true);
    picker().value = "multilingual-e5-small";
    picker().dispatchEvent(new Event("change"));
    expect(button().disabled).toBe(false);
  });

  it("keeps the model picked across a status refresh, and offers nothing while files are added or the library is closed", () => {
    fillEmbedderPicker({ embedder: "all-minilm-l6-v2", embedders, ingesting: false });
    picker().value = "multilingual-e5-small";
    fillEmbedderPicker({ embedder: "all-minilm-l6-v2", embedders, ingesting: true });
    expect(picker().value).toBe("multilingual-e5-small");
    expect(button().disabled).toBe(true);
    fillEmbedderPicker({ embedder: null, embedders, ingesting: false });
    expect(document.getElementById("embedder-line")!.textContent).toBe("");
    expect(button().disabled).toBe(true);
  });
});

describe("the offer of a search model that reads the library's languages", () => {
  const advice = { embedder: "all-minilm-l6-v2", suggested: "multilingual-e5-small", installed: true, languages: ["de", "ja"], share: 0.7 };
  const box = () => document.getElementById("embedder-offer")!;
  const button = () => document.getElementById("embedder-offer-button") as HTMLButtonElement;
  afterEach(() => setLanguage("en"));

  it("says what share of the passages is in which languages, and embeds again with the model offered", async () => {
    const chosen: string[] = [];
    showEmbedderOffer({ embedder_advice: advice, ingesting: false }, { embedAgain: async (e) => void chosen.push(e), decline: async () => {} });
    expect(box().hidden).toBe(false);
    expect(document.getElementById("embedder-offer-text")!.textContent).toBe(
      "70% of this library's passages are in German, Japanese, and its search model, all-minilm-l6-v2, reads English only. " +
        "Embedded again with multilingual-e5-small, which reads about 100 languages, they are found by their meaning too; the library answers as it is meanwhile.",
    );
    expect(button().textContent).toBe("Embed again with multilingual-e5-small");
    button().click();
    expect(chosen).toEqual(["multilingual-e5-small"]);
  });

  it("names the languages in the app's language", () => {
    setLanguage("de");
    showEmbedderOffer({ embedder_advice: advice, ingesting: false }, { embedAgain: async () => {}, decline: async () => {} });
    expect(document.getElementById("embedder-offer-text")!.textContent).toContain("sind auf Deutsch, Japanisch");
  });

  it("waits while files are added or the model is not installed, goes on Not now, and is hidden without advice", () => {
    let declined = 0;
    const actions = { embedAgain: async () => {}, decline: async () => void declined++ };
    showEmbedderOffer({ embedder_advice: advice, ingesting: true }, actions);
    expect(button().disabled).toBe(true);
    showEmbedderOffer({ embedder_advice: { ...advice, installed: false }, ingesting: false }, actions);
    expect(button().disabled).toBe(true);
    expect(document.getElementById("embedder-offer-text")!.textContent).toContain("Install it first: quire models fetch multilingual-e5-small.");
    showEmbedderOffer({ embedder_advice: advice, ingesting: false }, actions);
    expect(button().disabled).toBe(false);
    (document.getElementById("embedder-offer-later") as HTMLButtonElement).click();
    expect(box().hidden).toBe(true);
    expect(declined).toBe(1);
    showEmbedderOffer({ embedder_advice: null, ingesting: false }, actions);
    expect(box().hidden).toBe(true);
  });
});
