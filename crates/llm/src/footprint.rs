//! How much memory a GGUF model takes once loaded, predicted from the file's header alone (no
//! weights are read), so the app can warn before loading a model that would not fit.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{Context, Result};
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value};
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use serde::Serialize;
use ts_rs::TS;

use crate::decoder::Placement;

/// Bytes per element of the KV cache of mistral.rs (BF16 on the CPU); Quire's decoder's row
/// is `Placement::kv_row_bytes`.
const MISTRAL_KV_ELEMENT_BYTES: u64 = 2;
/// Values of room candle's CUDA backend adds after each quantized matrix it holds
/// (`MATRIX_ROW_PADDING`, private to its CUDA build).
const CUDA_ROW_PADDING: usize = 512;
/// Quire's decoder also holds the tokenizer (vocabulary, merges) and the grammar engine's token
/// trie: measured 81 + 60 MB for Qwen2's 151,936 tokens, ~930 bytes a token.
const OWN_BYTES_PER_VOCABULARY_TOKEN: u64 = 930;

#[derive(Debug, Clone, Serialize, TS)]
pub struct ModelFootprint {
    pub architecture: String,
    #[ts(type = "number")]
    pub file_bytes: u64,
    /// Bytes of the model in this process's memory after loading. Quire's decoder (Qwen2,
    /// Llama) on the CPU: the tensors as stored, except matrices in formats without a fast
    /// kernel, which it keeps as Q8_0, plus its tokenizer and grammar tables; on a GPU: the token
    /// table (read a row a token) and those tables, the rest in `gpu_weights_bytes` (or here too
    /// where the GPU shares the computer's memory, Apple silicon).
    /// mistral.rs (other architectures): the quantized tensors, plus the token embedding
    /// table dequantized to f32 for lookups (kept quantized as the output projection when the
    /// model ties them), plus the rotary tables.
    #[ts(type = "number")]
    pub weights_bytes: u64,
    /// Bytes of the weights in a GPU's own memory (CUDA): the matrices as stored (F16 and F32
    /// ones as f32), each quantized one with candle's padding, and the norms as f32. 0 where
    /// the model runs in the computer's memory.
    #[ts(type = "number")]
    pub gpu_weights_bytes: u64,
    /// Keys and values of one token across all layers (in the GPU's memory where
    /// `gpu_weights_bytes` is not 0).
    #[ts(type = "number")]
    pub kv_bytes_per_token: u64,
    pub context_length: u32,
    pub layers: u32,
}

/// Where the bytes of a model on Quire's decoder sit, by who holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecoderBytes {
    /// Matrices the decoder reads itself: all of them on the CPU kernels, the token table on a
    /// device.
    pub own_matrices: u64,
    /// Tensors candle holds on the device (none on the CPU kernels).
    pub candle_tensors: u64,
    /// The tokenizer and the grammar engine's token trie.
    pub tables: u64,
}

impl ModelFootprint {
    /// As the model would be held on the CPU kernels.
    pub fn of_gguf(path: &Path) -> Result<ModelFootprint> {
        ModelFootprint::of_gguf_on(path, &Placement::Kernels)
    }

    /// As the model would be held where `placement` puts Quire's decoder (mistral.rs models
    /// are predicted as on the CPU).
    pub fn of_gguf_on(path: &Path, placement: &Placement) -> Result<ModelFootprint> {
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

        let own_decoder = crate::OWN_DECODER_ARCHITECTURES.contains(&arch.as_str());
        let (weights_bytes, gpu_weights_bytes, kv_row_bytes) = if own_decoder {
            let held = DecoderBytes::of(&content, placement);
            let in_process = held.own_matrices + held.tables;
            let kv_row_bytes = placement.kv_row_bytes(head_dim as usize) as u64;
            if placement.own_memory() {
                (in_process, held.candle_tensors, kv_row_bytes)
            } else {
                (in_process + held.candle_tensors, 0, kv_row_bytes)
            }
        } else {
            let quantized: u64 = content.tensor_infos.values().map(stored_bytes).sum();
            let embedding_f32 =
                content.tensor_infos.get("token_embd.weight").map(|i| i.shape.elem_count() as u64 * 4).unwrap_or(0);
            let tied_output = if content.tensor_infos.contains_key("output.weight") {
                0
            } else {
                content.tensor_infos.get("token_embd.weight").map(stored_bytes).unwrap_or(0)
            };
            let rotary = context_length * head_dim * 4;
            (quantized + embedding_f32 + tied_output + rotary, 0, MISTRAL_KV_ELEMENT_BYTES * head_dim)
        };
        Ok(ModelFootprint {
            architecture: arch,
            file_bytes,
            weights_bytes,
            gpu_weights_bytes,
            kv_bytes_per_token: 2 * layers * kv_heads * kv_row_bytes,
            context_length: context_length as u32,
            layers: layers as u32,
        })
    }

    /// KV cache for a context of `tokens` tokens.
    pub fn kv_bytes(&self, tokens: u64) -> u64 {
        self.kv_bytes_per_token * tokens
    }

    /// Whether the weights (and then the KV cache) sit in a GPU's own memory.
    pub fn on_gpu(&self) -> bool {
        self.gpu_weights_bytes > 0
    }
}

impl DecoderBytes {
    /// What Quire's decoder holds of the model `content` describes where `placement` puts it,
    /// tensor by tensor as `Transformer` and `DeviceTransformer` load them.
    pub(crate) fn of(content: &Content, placement: &Placement) -> DecoderBytes {
        let tables = match content.metadata.get("tokenizer.ggml.tokens") {
            Some(Value::Array(tokens)) => tokens.len() as u64 * OWN_BYTES_PER_VOCABULARY_TOKEN,
            _ => 0,
        };
        let infos = &content.tensor_infos;
        let Placement::Candle(device) = placement else {
            let own_matrices = infos.values().map(as_the_kernels_hold).sum();
            return DecoderBytes { own_matrices, candle_tensors: 0, tables };
        };
        // The token table stays with the decoder (a pass uploads its tokens' rows); a tied
        // output projection is the same tensor on the device too.
        let own_matrices = infos.get("token_embd.weight").map(as_the_kernels_hold).unwrap_or(0);
        let tied = !infos.contains_key("output.weight");
        let candle_tensors = infos
            .iter()
            .filter(|(name, _)| tied || name.as_str() != "token_embd.weight")
            .map(|(_, info)| as_candle_holds(info, device))
            .sum();
        DecoderBytes { own_matrices, candle_tensors, tables }
    }
}

/// A tensor's bytes as stored in the file.
fn stored_bytes(info: &TensorInfo) -> u64 {
    (info.shape.elem_count() / info.ggml_dtype.block_size() * info.ggml_dtype.type_size()) as u64
}

/// A tensor's bytes as the CPU kernels hold it (`weights::load`).
fn as_the_kernels_hold(info: &TensorInfo) -> u64 {
    if crate::decoder::widened_to_q8_0(info.ggml_dtype, info.shape.dims()) {
        (info.shape.elem_count() / 32 * 34) as u64
    } else {
        stored_bytes(info)
    }
}

/// A tensor's bytes as candle holds it on `device` (`DeviceTransformer::from_gguf`): vectors as
/// f32; F32, F16 and BF16 matrices dequantized to f32 (`QMatMul`); other matrices as stored,
/// on CUDA with room for 512 more values (candle's `MATRIX_ROW_PADDING`).
fn as_candle_holds(info: &TensorInfo, device: &Device) -> u64 {
    let elements = info.shape.elem_count() as u64;
    let dtype = info.ggml_dtype;
    if info.shape.dims().len() < 2 || matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
        return elements * 4;
    }
    let padding = match device {
        Device::Cuda(_) => (CUDA_ROW_PADDING * dtype.type_size() / dtype.block_size()) as u64,
        _ => 0,
    };
    stored_bytes(info) + padding
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::{open_gguf, DeviceTransformer};

    /// The prediction for candle's device from the header alone equals what the loaded network
    /// holds, tensor for tensor, and its KV cache what the cache allocates (padded passes' slack
    /// included).
    #[test]
    fn the_device_prediction_is_what_the_loaded_network_holds() {
        let path = quire_testkit::model(&quire_models::SMOLLM2);
        let placement = Placement::Candle(Device::Cpu);
        let (content, mut reader) = open_gguf(&path).unwrap();
        let predicted = DecoderBytes::of(&content, &placement);
        let network = DeviceTransformer::from_gguf(&path, &content, &mut reader, &Device::Cpu).unwrap();
        let (own, candle) = network.held_bytes();
        assert_eq!((predicted.own_matrices, predicted.candle_tensors), (own as u64, candle as u64));
        // SmolLM2 ties its output projection to the token table: both hold it.
        assert!(predicted.candle_tensors > predicted.own_matrices, "{predicted:?}");

        let footprint = ModelFootprint::of_gguf_on(&path, &placement).unwrap();
        // candle's CPU device is the computer's memory: nothing counted as a GPU's.
        assert!(!footprint.on_gpu());
        assert_eq!(footprint.weights_bytes, predicted.own_matrices + predicted.candle_tensors + predicted.tables);
        assert_eq!(footprint.kv_bytes(100), network.new_cache(100).unwrap().bytes() as u64);
        let padded = network.with_fixed_width(Some(8));
        assert_eq!(footprint.kv_bytes(100 + 8), padded.new_cache(100).unwrap().bytes() as u64);
    }

    /// The CPU kernels keep every matrix themselves and nothing on candle's device; the decoder
    /// on a device keeps only the token table.
    #[test]
    fn the_kernels_hold_every_matrix_and_a_device_the_rest() {
        let path = quire_testkit::model(&quire_models::SMOLLM2);
        let (content, _) = open_gguf(&path).unwrap();
        let kernels = DecoderBytes::of(&content, &Placement::Kernels);
        let device = DecoderBytes::of(&content, &Placement::Candle(Device::Cpu));
        assert_eq!(kernels.candle_tensors, 0);
        assert_eq!(kernels.tables, device.tables);
        assert!(device.own_matrices < kernels.own_matrices / 4, "{kernels:?} {device:?}");
        let cpu = ModelFootprint::of_gguf(&path).unwrap();
        assert_eq!(cpu.weights_bytes, kernels.own_matrices + kernels.tables);
        let row = crate::decoder::KvPrecision::in_use().row_bytes(64) as u64;
        assert_eq!(cpu.kv_bytes_per_token, 2 * 30 * 3 * row);
        // As the kernels' own cache holds it (a whole number of key blocks).
        let (content, mut reader) = open_gguf(&path).unwrap();
        let network = crate::decoder::Transformer::from_gguf(&path, &content, &mut reader).unwrap();
        assert_eq!(cpu.kv_bytes(112), network.new_cache(112).bytes() as u64);
    }
}
