//! How much memory a GGUF model takes once loaded, predicted from the file's header alone (no
//! weights are read), so the app can warn before loading a model that would not fit.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{Context, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use serde::Serialize;
use ts_rs::TS;

/// Bytes per element of the KV cache: mistral.rs keeps BF16 on the CPU, Quire's decoder f32
/// (so a token's logits do not depend on rounding of the cache).
const MISTRAL_KV_ELEMENT_BYTES: u64 = 2;
const OWN_KV_ELEMENT_BYTES: u64 = 4;
/// Quire's decoder also holds the tokenizer (vocabulary, merges) and the grammar engine's token
/// trie: measured 81 + 60 MB for Qwen2's 151,936 tokens, ~930 bytes a token.
const OWN_BYTES_PER_VOCABULARY_TOKEN: u64 = 930;

#[derive(Debug, Clone, Serialize, TS)]
pub struct ModelFootprint {
    pub architecture: String,
    #[ts(type = "number")]
    pub file_bytes: u64,
    /// Resident bytes of the model after loading. Quire's decoder (Qwen2, Llama): the tensors
    /// as stored, except matrices in formats without a fast kernel, which it keeps as Q8_0, plus
    /// its tokenizer and grammar tables.
    /// mistral.rs (other architectures, Metal): the quantized tensors, plus the token embedding
    /// table dequantized to f32 for lookups (kept quantized as the output projection when the
    /// model ties them), plus the rotary tables.
    #[ts(type = "number")]
    pub weights_bytes: u64,
    /// Keys and values of one token across all layers.
    #[ts(type = "number")]
    pub kv_bytes_per_token: u64,
    pub context_length: u32,
    pub layers: u32,
}

impl ModelFootprint {
    pub fn of_gguf(path: &Path) -> Result<ModelFootprint> {
        let file = File::open(path).with_context(|| format!("cannot open the model {}", path.display()))?;
        let file_bytes = file.metadata()?.len();
        let mut reader = BufReader::new(file);
        let content =
            Content::read(&mut reader).with_context(|| format!("{} is not a GGUF model file", path.display()))?;
        let meta = |key: &str| content.metadata.get(key);
        let arch = match meta("general.architecture") {
            Some(Value::String(s)) => s.clone(),
            _ => anyhow::bail!("{} has no general.architecture", path.display()),
        };
        let number = |key: &str| -> Option<u64> {
            match meta(&format!("{arch}.{key}"))? {
                Value::U32(v) => Some(*v as u64),
                Value::I32(v) => Some(*v as u64),
                Value::U64(v) => Some(*v),
                Value::I64(v) => Some(*v as u64),
                _ => None,
            }
        };
        let required = |key: &str| number(key).with_context(|| format!("{} lacks {arch}.{key}", path.display()));
        let layers = required("block_count")?;
        let embedding = required("embedding_length")?;
        let heads = required("attention.head_count")?;
        let kv_heads = number("attention.head_count_kv").unwrap_or(heads);
        let head_dim = number("attention.key_length").unwrap_or(embedding / heads);
        let context_length = number("context_length").unwrap_or(4096);

        let tensor_bytes = |name: &str| -> Option<u64> {
            let info = content.tensor_infos.get(name)?;
            let dtype = info.ggml_dtype;
            Some((info.shape.elem_count() / dtype.block_size() * dtype.type_size()) as u64)
        };
        // As the decoder holds a model on the CPU; on a GPU its weights and cache are in device
        // memory, which this does not model.
        let own_decoder = crate::OWN_DECODER_ARCHITECTURES.contains(&arch.as_str());
        let (weights_bytes, kv_element_bytes) = if own_decoder {
            let as_loaded: u64 = content
                .tensor_infos
                .iter()
                .filter_map(|(name, info)| {
                    if crate::decoder::widened_to_q8_0(info.ggml_dtype, info.shape.dims()) {
                        Some((info.shape.elem_count() / 32 * 34) as u64)
                    } else {
                        tensor_bytes(name)
                    }
                })
                .sum();
            let vocabulary = match meta("tokenizer.ggml.tokens") {
                Some(Value::Array(tokens)) => tokens.len() as u64,
                _ => 0,
            };
            (as_loaded + vocabulary * OWN_BYTES_PER_VOCABULARY_TOKEN, OWN_KV_ELEMENT_BYTES)
        } else {
            let quantized: u64 = content.tensor_infos.keys().filter_map(|n| tensor_bytes(n)).sum();
            let embedding_f32 =
                content.tensor_infos.get("token_embd.weight").map(|i| i.shape.elem_count() as u64 * 4).unwrap_or(0);
            let tied_output = if content.tensor_infos.contains_key("output.weight") {
                0
            } else {
                tensor_bytes("token_embd.weight").unwrap_or(0)
            };
            let rotary = context_length * head_dim * 4;
            (quantized + embedding_f32 + tied_output + rotary, MISTRAL_KV_ELEMENT_BYTES)
        };
        Ok(ModelFootprint {
            architecture: arch,
            file_bytes,
            weights_bytes,
            kv_bytes_per_token: 2 * layers * kv_heads * head_dim * kv_element_bytes,
            context_length: context_length as u32,
            layers: layers as u32,
        })
    }

    /// KV cache for a context of `tokens` tokens.
    pub fn kv_bytes(&self, tokens: u64) -> u64 {
        self.kv_bytes_per_token * tokens
    }
}
