import { renderMemory } from "./memory";

describe("memory panel", () => {
  it("sums loaded weights and shows RSS, prediction and warnings", () => {
    const root = document.createElement("div");
    renderMemory(root, {
      models: [
        { role: "embedder", path: "/m/all-minilm-l6-v2", weights_bytes: 90_000_000, kv_cache_bytes: 0, loaded: true, kept_prompt_tokens: 0, kept_prompt_bytes: 0 },
        { role: "target", path: "/m/qwen.gguf", weights_bytes: 2_000_000_000, kv_cache_bytes: 93_000_000, loaded: true, kept_prompt_tokens: 1402, kept_prompt_bytes: 80_000_000 },
        { role: "draft", path: "/m/draft.gguf", weights_bytes: 700_000_000, kv_cache_bytes: 12_000_000, loaded: false, kept_prompt_tokens: 0, kept_prompt_bytes: 0 },
      ],
      context_tokens: 3312,
      index_bytes: 5_000_000,
      predicted_rss_bytes: 2_300_000_000,
      process_rss_bytes: 2_250_000_000,
      machine_total_bytes: 24_000_000_000,
      machine_available_bytes: 20_000_000_000,
      warnings: ["the draft model needs more"],
    });
    expect(root.querySelector("#mem-weights")!.getAttribute("data-bytes")).toBe("2090000000");
    expect(root.querySelector("#mem-rss")!.textContent).toBe("2.3 GB");
    expect(root.querySelector("#mem-predicted")!.getAttribute("data-bytes")).toBe("2300000000");
    expect(root.textContent).toContain("not loaded · draft.gguf");
    expect(root.textContent).toContain("at 3312 tokens");
    expect(root.textContent).toContain("last prompt80.0 MB1402 tokens kept for follow-ups");
    expect(root.textContent?.match(/last prompt/g)?.length).toBe(1);
    expect(root.querySelector(".warning")!.textContent).toBe("the draft model needs more");
  });
});
