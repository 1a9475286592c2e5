//! A BERT encoder (embeddings + transformer layers, no pooler head) on candle.

use std::path::Path;

use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(rename = "_name_or_path")]
    pub name_or_path: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

/// The model's weights, for `fused::FusedBert` to copy.
pub(crate) struct Parts<'a> {
    pub word: &'a Embedding,
    pub position: &'a Embedding,
    pub token_type: &'a Embedding,
    pub emb_norm: &'a LayerNorm,
    pub layers: Vec<LayerParts<'a>>,
    pub heads: usize,
    pub head_dim: usize,
}

pub(crate) struct LayerParts<'a> {
    pub query: &'a Linear,
    pub key: &'a Linear,
    pub value: &'a Linear,
    pub attn_out: &'a Linear,
    pub attn_norm: &'a LayerNorm,
    pub intermediate: &'a Linear,
    pub output: &'a Linear,
    pub out_norm: &'a LayerNorm,
}

pub struct BertModel {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
}

impl BertModel {
    pub fn load(weights: &Path, cfg: &BertConfig, device: &Device) -> Result<BertModel> {
        // SAFETY: the file is memory-mapped read-only and not modified while the model lives.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, device)? };
        // Some checkpoints prefix every tensor with `bert.`.
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
        BertModel::from_var_builder(vb, cfg)
    }

    /// The model from tensors named as Hugging Face's BERT names them.
    pub(crate) fn from_var_builder(vb: VarBuilder, cfg: &BertConfig) -> Result<BertModel> {
        if cfg.hidden_act != "gelu" {
            anyhow::bail!("unsupported activation {:?} (Quire's BERT supports gelu)", cfg.hidden_act);
        }
        let h = cfg.hidden_size;
        let e = vb.pp("embeddings");
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            layers.push(Layer {
                query: linear(h, h, l.pp("attention.self.query"))?,
                key: linear(h, h, l.pp("attention.self.key"))?,
                value: linear(h, h, l.pp("attention.self.value"))?,
                attn_out: linear(h, h, l.pp("attention.output.dense"))?,
                attn_norm: layer_norm(h, cfg.layer_norm_eps, l.pp("attention.output.LayerNorm"))?,
                intermediate: linear(h, cfg.intermediate_size, l.pp("intermediate.dense"))?,
                output: linear(cfg.intermediate_size, h, l.pp("output.dense"))?,
                out_norm: layer_norm(h, cfg.layer_norm_eps, l.pp("output.LayerNorm"))?,
            });
        }
        Ok(BertModel {
            word: embedding(cfg.vocab_size, h, e.pp("word_embeddings"))?,
            position: embedding(cfg.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_type: embedding(cfg.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            emb_norm: layer_norm(h, cfg.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
        })
    }

    pub(crate) fn parts(&self) -> Parts<'_> {
        Parts {
            word: &self.word,
            position: &self.position,
            token_type: &self.token_type,
            emb_norm: &self.emb_norm,
            layers: self
                .layers
                .iter()
                .map(|l| LayerParts {
                    query: &l.query,
                    key: &l.key,
                    value: &l.value,
                    attn_out: &l.attn_out,
                    attn_norm: &l.attn_norm,
                    intermediate: &l.intermediate,
                    output: &l.output,
                    out_norm: &l.out_norm,
                })
                .collect(),
            heads: self.heads,
            head_dim: self.head_dim,
        }
    }

    /// `ids` and `mask` are (batch, seq) u32; returns the last hidden state (batch, seq, hidden).
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let device = ids.device();
        let positions = Tensor::arange(0u32, seq as u32, device)?.unsqueeze(0)?;
        let types = ids.zeros_like()?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .broadcast_add(&self.token_type.forward(&types)?)?;
        let mut x = self.emb_norm.forward(&x)?;
        // Padding positions get a large negative score so softmax gives them no weight.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((batch, 1, 1, seq))?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> Result<Tensor> {
                Ok(t.reshape((batch, seq, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous()?)
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((batch, seq, self.heads * self.head_dim))?;
            let x1 = layer.attn_norm.forward(&(layer.attn_out.forward(&ctx)? + &x)?)?;
            let ff = layer.intermediate.forward(&x1)?.gelu_erf()?;
            x = layer.out_norm.forward(&(layer.output.forward(&ff)? + &x1)?)?;
        }
        Ok(x)
    }
}
