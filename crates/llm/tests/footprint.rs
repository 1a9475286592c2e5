//! Memory footprints predicted from the GGUF headers of the installed models, against the
//! architectures' published shapes.

use quire_llm::ModelFootprint;

#[test]
fn footprints_of_the_default_and_tiny_models() {
    // Both run on Quire's decoder: weights as stored (Q4_K/Q6_K stay), its cache's rows as
    // `KvPrecision` keeps them (f32 by default, 8 bits and their scales by choice).
    let row = |head_dim: usize| quire_llm::decoder::KvPrecision::in_use().row_bytes(head_dim) as u64;
    let qwen = ModelFootprint::of_gguf(&quire_testkit::model(&quire_models::QWEN_1_5B)).unwrap();
    // Qwen2.5-1.5B: 28 layers, 2 KV heads of 128 → 2 × 28 × 2 rows of 128 values.
    assert_eq!((qwen.architecture.as_str(), qwen.layers), ("qwen2", 28));
    assert_eq!(qwen.kv_bytes_per_token, 2 * 28 * 2 * row(128));
    // All its matrices are Q4_K or Q6_K: in memory as in the file, plus ~141 MB of tokenizer and
    // grammar tables for its 151,936 tokens.
    let tables = 151_936 * 930;
    assert!(qwen.weights_bytes > qwen.file_bytes + tables - 10_000_000, "{qwen:?}");
    assert!(qwen.weights_bytes < qwen.file_bytes + tables, "{qwen:?}");

    // Qwen2.5-0.5B is mostly Q5_0, which the decoder widens to Q8_0 (34 bytes per 32 weights
    // against 22): more memory than the file.
    let draft = ModelFootprint::of_gguf(&quire_testkit::model(&quire_models::QWEN_0_5B)).unwrap();
    assert!(draft.weights_bytes > draft.file_bytes + 100_000_000, "{draft:?}");

    let tiny = ModelFootprint::of_gguf(&quire_testkit::model(&quire_models::SMOLLM2)).unwrap();
    // SmolLM2-135M: 30 layers, 3 KV heads of 64.
    assert_eq!((tiny.architecture.as_str(), tiny.layers), ("llama", 30));
    assert_eq!(tiny.kv_bytes_per_token, 2 * 30 * 3 * row(64));
    assert_eq!(tiny.kv_bytes(1000), tiny.kv_bytes_per_token * 1000);
}

#[test]
fn a_file_that_is_not_gguf_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.gguf");
    std::fs::write(&path, b"this is not a model").unwrap();
    let err = format!("{:#}", ModelFootprint::of_gguf(&path).unwrap_err());
    assert!(err.contains("notes.gguf") && err.contains("not a GGUF"), "{err}");
}
