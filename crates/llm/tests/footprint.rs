//! Memory footprints predicted from the GGUF headers of the installed models, against the
//! architectures' published shapes.

use quire_llm::ModelFootprint;

#[test]
fn footprints_of_the_default_and_tiny_models() {
    let qwen = ModelFootprint::of_gguf(&quire_testkit::model(&quire_models::QWEN_1_5B)).unwrap();
    // Qwen2.5-1.5B: 28 layers, 2 KV heads of 128; BF16 cache → 2 × 28 × 2 × 128 × 2 bytes.
    assert_eq!((qwen.architecture.as_str(), qwen.layers), ("qwen2", 28));
    assert_eq!(qwen.kv_bytes_per_token, 2 * 28 * 2 * 128 * 2);
    // The token table (151,936 × 1,536) is held dequantized to f32 beside the quantized weights.
    let table_f32 = 151_936u64 * 1_536 * 4;
    assert!(qwen.weights_bytes > qwen.file_bytes + table_f32 - 50_000_000, "{qwen:?}");
    assert!(qwen.weights_bytes < qwen.file_bytes + table_f32 + 300_000_000, "{qwen:?}");

    let tiny = ModelFootprint::of_gguf(&quire_testkit::model(&quire_models::SMOLLM2)).unwrap();
    // SmolLM2-135M: 30 layers, 3 KV heads of 64.
    assert_eq!((tiny.architecture.as_str(), tiny.layers), ("llama", 30));
    assert_eq!(tiny.kv_bytes_per_token, 2 * 30 * 3 * 64 * 2);
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
