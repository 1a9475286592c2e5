//! The decoder's network on candle tensors, for GPUs (CUDA, Metal) and, in tests, candle's CPU
//! device: the same Qwen2 / Llama transformer as `transformer`, its matrices kept quantized on
//! the device (`QMatMul`), RoPE and RMSNorm from candle-nn, and a preallocated KV cache per
//! reply that is cut back by lowering its length (candle's own `KvCache` cannot be).
//!
//! Speculation needs a token's logits not to depend on how many tokens share its pass. Every
//! op here works per token row, or per (head, query) row of attention, and verify passes
//! attend token by token (`attention`), so no matmul kernel's choice for a batch's shape enters
//! a token's attention. Where a device's quantized matmul kernels change with the batch width
//! (candle's CUDA mat-vec kernels switch at widths 2–4, 5–8 and to a dequantizing matmul above
//! 8), every pass of at most `fixed_width` tokens is padded to that width, and the decoder
//! verifies no more tokens at once (`Network::widest_verify`); candle's CPU device runs its
//! quantized matmul token by token and needs no padding. Prompt passes attend all at once: a
//! kept prompt's cache holds what its own passes computed, so on a device a follow-up may
//! differ from a fresh run in the last bits (on the CPU kernels it cannot).

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor};

use super::network::Placement;
use super::transformer::{rope_tables, Block, Config};
use super::weights::{self, Matrix};

type Layer = Block<QMatMul, Tensor>;

pub struct DeviceTransformer {
    pub config: Config,
    device: Device,
    /// What the cache holds keys and values as (f16 on GPUs: half the memory and bandwidth).
    kv_dtype: DType,
    /// Passes of at most this many tokens run padded to it (see the module's comment).
    fixed_width: Option<usize>,
    /// Token embeddings stay in host memory: a pass uploads only its tokens' rows.
    embedding: Matrix,
    layers: Vec<Layer>,
    final_norm: Tensor,
    output: QMatMul,
    inv_freq: Vec<f32>,
}

/// Keys and values of the tokens seen so far: per layer one tensor `[1, kv_head, position,
/// head_dim]` of `capacity` positions. Cutting back only lowers `len` (`network::Cache`).
pub struct DeviceCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    pub(super) capacity: usize,
    /// Positions past `capacity` that padded passes may write (never counted in `len`).
    slack: usize,
    pub(super) len: usize,
}

impl Clone for DeviceCache {
    /// A copy with storage of its own: the cache is written in place, so a clone that shared
    /// the tensors' storage would see the other's writes.
    fn clone(&self) -> DeviceCache {
        let copy = |ts: &[Tensor]| ts.iter().map(|t| t.copy().expect("the device copies its own tensor")).collect();
        DeviceCache {
            keys: copy(&self.keys),
            values: copy(&self.values),
            capacity: self.capacity,
            slack: self.slack,
            len: self.len,
        }
    }
}

impl DeviceCache {
    /// This cache with room for `capacity` positions, its `len` positions kept: the same
    /// tensors when they are large enough and not more than twice that, else new ones.
    pub fn with_room(self, capacity: usize) -> Result<DeviceCache> {
        if (capacity..=2 * capacity).contains(&self.capacity) {
            return Ok(self);
        }
        let capacity = capacity.max(self.len);
        let grown = |old: &Tensor| -> Result<Tensor> {
            let (b, heads, _, d) = old.dims4()?;
            let new = Tensor::zeros((b, heads, capacity + self.slack, d), old.dtype(), old.device())?;
            if self.len > 0 {
                new.slice_set(&old.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
            }
            Ok(new)
        };
        Ok(DeviceCache {
            keys: self.keys.iter().map(grown).collect::<Result<_>>()?,
            values: self.values.iter().map(grown).collect::<Result<_>>()?,
            capacity,
            slack: self.slack,
            len: self.len,
        })
    }

    /// Bytes of device memory the cache holds.
    pub fn bytes(&self) -> usize {
        self.keys.iter().chain(&self.values).map(|t| t.elem_count() * t.dtype().size_in_bytes()).sum()
    }
}

impl DeviceTransformer {
    /// Loads the network `content` describes from `reader` onto `device`, its matrices as
    /// stored in the file.
    pub fn from_gguf(
        path: &Path,
        content: &Content,
        reader: &mut BufReader<File>,
        device: &Device,
    ) -> Result<DeviceTransformer> {
        let mut config = Config::read(path, content)?;
        let on_device = |e: candle_core::Error| anyhow::anyhow!("cannot put {} on {device:?}: {e}", path.display());
        let matrix = |name: &str, reader: &mut BufReader<File>| -> Result<QMatMul> {
            let tensor = content.tensor(reader, name, device).map_err(on_device)?;
            QMatMul::from_qtensor(tensor).map_err(on_device)
        };
        let vector = |name: &str, reader: &mut BufReader<File>| -> Result<Tensor> {
            let v = weights::load_vector(content, reader, name)?;
            Tensor::new(v, device).map_err(on_device)
        };
        let embedding = weights::load(content, reader, "token_embd.weight")?;
        let output_name =
            if content.tensor_infos.contains_key("output.weight") { "output.weight" } else { "token_embd.weight" };
        let output = matrix(output_name, reader)?;
        config.vocab = content.tensor_infos[output_name].shape.dims()[0];
        let layers =
            (0..config.layers).map(|i| Layer::read(content, i, reader, matrix, vector)).collect::<Result<Vec<_>>>()?;
        let final_norm = vector("output_norm.weight", reader)?;
        let kv_dtype = Placement::Candle(device.clone()).kv_dtype();
        let fixed_width = match device {
            Device::Cpu => None,
            _ => Some(FIXED_WIDTH),
        };
        let inv_freq = config.inv_freq();
        Ok(DeviceTransformer {
            config,
            device: device.clone(),
            kv_dtype,
            fixed_width,
            embedding,
            layers,
            final_norm,
            output,
            inv_freq,
        })
    }

    /// Pads every pass of at most `width` tokens to `width` (what GPUs get), or not (`None`):
    /// tests run the padded path on the CPU device.
    pub fn with_fixed_width(mut self, width: Option<usize>) -> DeviceTransformer {
        self.fixed_width = width;
        self
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Bytes the network holds: its token table in the process's memory, and its tensors as
    /// candle counts them on the device (on CUDA without the padding candle adds after each
    /// quantized matrix, which `ModelFootprint` predicts).
    pub fn held_bytes(&self) -> (usize, usize) {
        let matrix = |m: &QMatMul| match m {
            QMatMul::QTensor(q) => q.storage_size_in_bytes(),
            QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.elem_count() * t.dtype().size_in_bytes(),
        };
        let vector = |v: &Tensor| v.elem_count() * v.dtype().size_in_bytes();
        let layers: usize = self
            .layers
            .iter()
            .map(|l| l.matrices().into_iter().map(matrix).sum::<usize>() + l.vectors().map(vector).sum::<usize>())
            .sum();
        (self.embedding.bytes(), layers + matrix(&self.output) + vector(&self.final_norm))
    }

    /// The most tokens one verify pass may hold and still give every token the logits it gets
    /// alone; `None`: any number.
    pub fn widest_verify(&self) -> Option<usize> {
        self.fixed_width
    }

    pub fn new_cache(&self, capacity: usize) -> Result<DeviceCache> {
        let c = &self.config;
        let slack = self.fixed_width.unwrap_or(0);
        let zeros = || Tensor::zeros((1, c.kv_heads, capacity + slack, c.head_dim), self.kv_dtype, &self.device);
        Ok(DeviceCache {
            keys: (0..c.layers).map(|_| zeros()).collect::<candle_core::Result<_>>()?,
            values: (0..c.layers).map(|_| zeros()).collect::<candle_core::Result<_>>()?,
            capacity,
            slack,
            len: 0,
        })
    }

    /// As `Transformer::forward`: runs `tokens` after the cache's positions, appends their keys
    /// and values, and returns the logits of the tokens from `logits_from` on.
    pub fn forward(&self, tokens: &[u32], cache: &mut DeviceCache, logits_from: usize) -> Result<Vec<f32>> {
        let m = tokens.len();
        let start = cache.len;
        if start + m > cache.capacity {
            bail!("the conversation needs {} tokens; this model's cache holds {}", start + m, cache.capacity);
        }
        // Padding repeats the last token; its positions lie past `len`, where no real token's
        // attention reaches, and are overwritten by the next pass.
        let width = match self.fixed_width {
            Some(w) if m > 0 && m < w => w,
            _ => m,
        };
        let mut padded = tokens.to_vec();
        padded.resize(width, *tokens.last().unwrap_or(&0));
        let logits = self.run(&padded, cache, logits_from.min(m), m)?;
        cache.len = start + m;
        Ok(logits)
    }

    /// The pass over `tokens` (the first `real` of them counted), returning the logits of
    /// tokens `logits_from..real`.
    fn run(&self, tokens: &[u32], cache: &DeviceCache, logits_from: usize, real: usize) -> Result<Vec<f32>> {
        let c = &self.config;
        let (m, start, hd) = (tokens.len(), cache.len, c.head_dim);
        let mut rows = vec![0f32; m * c.hidden];
        for (t, &token) in tokens.iter().enumerate() {
            if token as usize >= self.embedding.rows {
                bail!("token {token} is outside the model's vocabulary");
            }
            self.embedding.row(token as usize, &mut rows[t * c.hidden..(t + 1) * c.hidden]);
        }
        let mut x = Tensor::from_vec(rows, (m, c.hidden), &self.device)?;
        let (cos, sin) = rope_tables(&self.inv_freq, start, m);
        let cos = Tensor::from_vec(cos, (m, hd / 2), &self.device)?;
        let sin = Tensor::from_vec(sin, (m, hd / 2), &self.device)?;
        // Passes of up to `EXACT_ATTENTION` tokens attend token by token (see `attention`).
        let mask = if m > EXACT_ATTENTION { Some(self.causal_mask(start, m)?) } else { None };
        let eps = c.norm_eps;
        for (li, layer) in self.layers.iter().enumerate() {
            let normed = candle_nn::ops::rms_norm(&x, &layer.attn_norm, eps)?;
            let heads = |w: &QMatMul, bias: &Option<Tensor>, count: usize, rotate: bool| -> Result<Tensor> {
                let mut y = w.forward(&normed)?;
                if let Some(b) = bias {
                    y = y.broadcast_add(b)?;
                }
                // [1, head, token, head_dim]
                let y = y.reshape((m, count, hd))?.transpose(0, 1)?.contiguous()?.unsqueeze(0)?;
                Ok(match (rotate, c.rope_halves) {
                    (false, _) => y,
                    (true, true) => candle_nn::rotary_emb::rope(&y, &cos, &sin)?,
                    (true, false) => candle_nn::rotary_emb::rope_i(&y, &cos, &sin)?,
                })
            };
            let q = heads(&layer.q, &layer.q_bias, c.heads, true)?;
            let k = heads(&layer.k, &layer.k_bias, c.kv_heads, true)?;
            let v = heads(&layer.v, &layer.v_bias, c.kv_heads, false)?;
            cache.keys[li].slice_set(&k.to_dtype(self.kv_dtype)?, 2, start)?;
            cache.values[li].slice_set(&v.to_dtype(self.kv_dtype)?, 2, start)?;
            let attended = self.attention(&q, &cache.keys[li], &cache.values[li], mask.as_ref(), start, m, real)?;
            x = (x + layer.o.forward(&attended)?)?;

            let normed = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, eps)?;
            let gated = (candle_nn::ops::silu(&layer.gate.forward(&normed)?)? * layer.up.forward(&normed)?)?;
            x = (x + layer.down.forward(&gated)?)?;
        }
        if logits_from >= real {
            return Ok(Vec::new());
        }
        let last = x.narrow(0, logits_from, real - logits_from)?;
        let last = candle_nn::ops::rms_norm(&last, &self.final_norm, eps)?;
        let logits = self.output.forward(&last)?;
        Ok(logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?)
    }

    /// Causal attention of `q` (`[1, head, token, head_dim]`) over the cache's positions up to
    /// each token's own. Without a mask (passes of up to `EXACT_ATTENTION` tokens: every
    /// verify pass) token by token: each token's products then have the same shapes whatever
    /// pass it is in, so no matmul kernel can sum them another way (on candle's CPU device the
    /// weighted values of a batch were summed otherwise: 28 of 30 answers equal to plain
    /// decoding, against 30 token by token); the first `real` tokens get an output, padding
    /// zeros. With the causal mask (prompts) all at once: per KV head, its group of query
    /// heads' rows together.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        q: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        mask: Option<&Tensor>,
        start: usize,
        m: usize,
        real: usize,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (hd, group) = (c.head_dim, c.heads / c.kv_heads);
        let scale = 1.0 / (hd as f64).sqrt();
        // Scores and weighted values in f32, the cache's f16 widened once per pass: in f16,
        // Qwen2.5-1.5B's query·key products pass 65,504 (on CUDA every token came out "!",
        // the argmax of NaN logits), as llama.cpp's f16 cache is also read into f32 sums.
        let keys = keys.narrow(2, 0, start + m)?.to_dtype(DType::F32)?;
        let values = values.narrow(2, 0, start + m)?.to_dtype(DType::F32)?;
        let attend = |q: Tensor, seen: usize, mask: Option<&Tensor>| -> Result<Tensor> {
            let k = keys.narrow(2, 0, seen)?.squeeze(0)?;
            let v = values.narrow(2, 0, seen)?.squeeze(0)?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let scores = match mask {
                Some(mask) => scores.broadcast_add(mask)?,
                None => scores,
            };
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            Ok(weights.matmul(&v)?)
        };
        if let Some(mask) = mask {
            let out = attend(q.reshape((c.kv_heads, group * m, hd))?, start + m, Some(mask))?;
            return Ok(out.reshape((c.heads, m, hd))?.transpose(0, 1)?.contiguous()?.reshape((m, c.heads * hd))?);
        }
        let mut rows = Vec::with_capacity(m);
        for t in 0..real {
            let one = q.narrow(2, t, 1)?.contiguous()?.reshape((c.kv_heads, group, hd))?;
            rows.push(attend(one, start + t + 1, None)?.reshape((1, c.heads * hd))?);
        }
        if real < m {
            rows.push(Tensor::zeros((m - real, c.heads * hd), DType::F32, &self.device)?);
        }
        Ok(Tensor::cat(&rows, 0)?)
    }

    /// `[group · m, start + m]`: 0 where query row `g · m + t` may look (positions up to its
    /// own, `start + t`), −∞ elsewhere.
    fn causal_mask(&self, start: usize, m: usize) -> Result<Tensor> {
        let group = self.config.heads / self.config.kv_heads;
        let seen = start + m;
        let mut mask = vec![0f32; group * m * seen];
        for (r, row) in mask.chunks_mut(seen).enumerate() {
            row[start + r % m + 1..].fill(f32::NEG_INFINITY);
        }
        Tensor::from_vec(mask, (group * m, seen), &self.device).context("cannot put the attention mask on the device")
    }
}

/// The widest pass that attends token by token (see `attention`): wider than any verify pass.
const EXACT_ATTENTION: usize = 16;

/// The verify width GPU passes are padded to: candle's CUDA mat-vec kernels serve up to 8
/// columns; wider passes go through another kernel, whose sums differ.
const FIXED_WIDTH: usize = 8;
