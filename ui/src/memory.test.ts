import { renderMemory } from "./memory";

describe("memory panel", () => {
  const budget = {
    models: [
      { role: "embedder", path: "/m/all-minilm-l6-v2", weights_bytes: 90_000_000, gpu_bytes: 0, kv_cache_bytes: 0, loaded: true, kept_prompt_tokens: 0, kept_prompt_bytes: 0 },
      { role: "target", path: "/m/qwen.gguf", weights_bytes: 2_000_000_000, gpu_bytes: 0, kv_cache_bytes: 93_000_000, loaded: true, kept_prompt_tokens: 1402, kept_prompt_bytes: 80_000_000 },
      { role: "draft", path: "/m/draft.gguf", weights_bytes: 700_000_000, gpu_bytes: 0, kv_cache_bytes: 12_000_000, loaded: false, kept_prompt_tokens: 0, kept_prompt_bytes: 0 },
    ],
    context_tokens: 3312,
    index_bytes: 5_000_000,
    predicted_rss_bytes: 2_300_000_000,
    process_rss_bytes: 2_250_000_000,
    machine_total_bytes: 24_000_000_000,
    machine_available_bytes: 20_000_000_000,
    gpu: null,
    warnings: ["the draft model needs more"],
  };

  it("says what Quire uses now and, per model in plain words, its size and whether it fits", () => {
    const root = document.createElement("div");
    renderMemory(root, budget, { "/m/qwen.gguf": 1_100_000_000 });
    expect(root.querySelector(".mem-now")!.textContent).toBe("Quire uses 2.3 GB now");
    const lines = [...root.querySelectorAll(".mem-models li")].map((l) => l.textContent);
    expect(lines).toEqual([
      "Search model: all-minilm-l6-v290.0 MB in memory · in use",
      "Answer model: qwen.gguf2.0 GB in memory (1.1 GB file) · in use",
      "Draft model (faster answers): draft.gguf700 MB in memory · not loaded; fits, with 19.3 GB to spare",
    ]);
    expect(root.textContent).toContain("This computer: 20.0 GB free of 24.0 GB");
    expect(root.textContent).not.toMatch(/\b(RSS|KV|target)\b/);
    expect(root.querySelector(".warning")!.textContent).toBe("the draft model needs more");
    // The figures behind the words, on demand.
    const details = root.querySelector<HTMLDetailsElement>(".mem-details")!;
    expect(details.open).toBe(false);
    expect(details.textContent).toContain("last question kept for follow-ups (1,402 tokens)80.0 MB");
    expect(details.textContent).toContain("Answer model, working memory for 3,312 tokens93.0 MB");
    expect(root.querySelector("#mem-weights")!.getAttribute("data-bytes")).toBe("2090000000");
    expect(root.querySelector("#mem-predicted")!.getAttribute("data-bytes")).toBe("2300000000");
    expect(root.querySelector("#mem-rss")!.getAttribute("data-bytes")).toBe("2250000000");
  });

  it("says why there is no draft model when none is picked (the default)", () => {
    const root = document.createElement("div");
    renderMemory(root, { ...budget, models: budget.models.slice(0, 2) });
    const draft = root.querySelector<HTMLElement>(".mem-models li[data-role=draft]")!;
    expect(draft.textContent).toBe(
      "Draft model (faster answers): nonenot needed: answers are sped up from their own grammar and the passages, which takes no memory (one can be picked under Settings → Models)",
    );
    expect(draft.dataset.fits).toBeUndefined();
  });

  it("says when a model would not fit", () => {
    const root = document.createElement("div");
    renderMemory(root, { ...budget, machine_available_bytes: 500_000_000 });
    const draft = root.querySelector<HTMLElement>(".mem-models li[data-role=draft]")!;
    expect(draft.dataset.fits).toBe("false");
    expect(draft.textContent).toContain("not loaded; needs 712 MB, 500 MB free");
  });

  it("holds models on a graphics card with memory of its own against the card's free memory", () => {
    const root = document.createElement("div");
    const onGpu = {
      ...budget,
      models: [
        budget.models[0],
        { ...budget.models[1], weights_bytes: 150_000_000, gpu_bytes: 1_000_000_000 },
        { ...budget.models[2], weights_bytes: 150_000_000, gpu_bytes: 400_000_000 },
      ],
      gpu: { name: "CUDA GPU", total_bytes: 16_000_000_000, free_bytes: 410_000_000 },
    };
    renderMemory(root, onGpu);
    const lines = [...root.querySelectorAll(".mem-models li")].map((l) => l.textContent);
    expect(lines).toEqual([
      "Search model: all-minilm-l6-v290.0 MB in memory · in use",
      "Answer model: qwen.gguf1.0 GB on the graphics card, 150 MB in memory · in use",
      // 400 MB of weights and 12 MB of working memory on the card, 410 MB free there.
      "Draft model (faster answers): draft.gguf400 MB on the graphics card, 150 MB in memory · not loaded; needs 412 MB on the graphics card, 410 MB free",
    ]);
    expect(root.querySelector<HTMLElement>(".mem-models li[data-role=draft]")!.dataset.fits).toBe("false");
    expect(root.querySelector(".mem-gpu")!.textContent).toBe("Graphics card (CUDA GPU): 410 MB free of 16.0 GB");
    expect(root.querySelector(".mem-details")!.textContent).toContain("Answer model, working memory for 3,312 tokens on the graphics card93.0 MB");
    // The weights loaded count both places: 90 MB + 1.15 GB.
    expect(root.querySelector("#mem-weights")!.getAttribute("data-bytes")).toBe("1240000000");
    // Without a card of its own (the CPU, Apple silicon) the panel says nothing of one.
    renderMemory(root, budget);
    expect(root.querySelector(".mem-gpu")).toBeNull();
  });
});
