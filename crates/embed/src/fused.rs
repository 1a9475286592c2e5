//! The BERT encoder's forward pass over plain f32 rows, for the CPU: the same arithmetic as
//! `bert::BertModel::forward` (which stays as the reference, `Path::Candle`) without its costs
//! there. A profile of the candle graph on 440-token chunks spent a third of the time in the
//! matrix multiplications and the rest in what surrounds them: a new tensor for every
//! element-wise step (allocation and page faults), libm's `expf` one value at a time in the
//! softmax, `erf` in the GELU, and padding. Here:
//! - the batch's sequences are packed without padding (attention runs per sequence, so no
//!   position ever attends to padding and no work is spent on it);
//! - query, key and value are one matrix multiplication (their weights concatenated);
//! - bias, GELU, residual and LayerNorm are fused into the pass after each multiplication;
//! - the exponential and erf are polynomials the compiler vectorises; the softmax is
//!   `quire_simd`'s, the decoder's (the same bits on every CPU).
//!
//! Dense layers go through `matmul` (8-bit integers where the CPU has exact 8-bit products,
//! else f32) and so do attention's two products (f32, the keys and values of a head packed
//! per sequence): the same chains of multiply-adds on every CPU, so the same vectors.

use anyhow::Result;
use candle_core::Tensor;
use rayon::prelude::*;

use crate::bert::BertModel;
use quire_dense::{Dense, Packed, PANEL};

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

struct Layer {
    /// Query, key and value weights stacked: outputs are `[q | k | v]`.
    qkv: Dense,
    attn_out: Dense,
    attn_norm: Norm,
    intermediate: Dense,
    output: Dense,
    out_norm: Norm,
}

/// The word embeddings: f32 rows, or the 4-bit Q4_0 blocks a packed file keeps them in (a
/// row widened when a token needs it, to the same f32 values: multilingual-e5-small's 250,037
/// rows take 54 MB so, 384 MB in f32).
pub(crate) enum WordTable {
    F32(Vec<f32>),
    Q4_0(Vec<u8>),
}

impl WordTable {
    fn rows(&self, hidden: usize) -> usize {
        match self {
            WordTable::F32(values) => values.len() / hidden,
            WordTable::Q4_0(blocks) => blocks.len() / crate::packed::q4_0_bytes(hidden),
        }
    }

    /// Adds row `id` to `out`.
    fn add_row(&self, id: usize, out: &mut [f32]) {
        let h = out.len();
        match self {
            WordTable::F32(values) => out.iter_mut().zip(&values[id * h..][..h]).for_each(|(o, w)| *o += w),
            WordTable::Q4_0(blocks) => {
                let bytes = crate::packed::q4_0_bytes(h);
                crate::packed::add_q4_0(&blocks[id * bytes..][..bytes], out);
            }
        }
    }
}

pub struct FusedBert {
    word: WordTable,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    head_dim: usize,
}

fn values(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

fn dense(linears: &[&candle_nn::Linear], int8: bool) -> Result<Dense> {
    let (mut weight, mut bias, mut outputs, mut inputs) = (Vec::new(), Vec::new(), 0, 0);
    for l in linears {
        let (o, i) = l.weight().dims2()?;
        weight.extend(values(l.weight())?);
        bias.extend(match l.bias() {
            Some(b) => values(b)?,
            None => vec![0.0; o],
        });
        outputs += o;
        inputs = i;
    }
    Ok(Dense::new(weight, bias, outputs, inputs, int8))
}

fn norm(n: &candle_nn::LayerNorm) -> Result<Norm> {
    let weight = values(n.weight())?;
    let bias = match n.bias() {
        Some(b) => values(b)?,
        None => vec![0.0; weight.len()],
    };
    Ok(Norm { weight, bias, eps: n.eps() as f32 })
}

impl FusedBert {
    /// The model's weights laid out for this pass; its dense layers in 8-bit integers where
    /// `int8` asks for it and the CPU runs that kernel (`int8::available`).
    pub fn from_model(model: &BertModel, int8: bool) -> Result<FusedBert> {
        let parts = model.parts();
        let mut layers = Vec::new();
        for l in parts.layers {
            layers.push(Layer {
                qkv: dense(&[l.query, l.key, l.value], int8)?,
                attn_out: dense(&[l.attn_out], int8)?,
                attn_norm: norm(l.attn_norm)?,
                intermediate: dense(&[l.intermediate], int8)?,
                output: dense(&[l.output], int8)?,
                out_norm: norm(l.out_norm)?,
            });
        }
        let word = WordTable::F32(values(parts.word.embeddings())?);
        let hidden = parts.word.embeddings().dims2()?.1;
        Ok(FusedBert {
            word,
            position: values(parts.position.embeddings())?,
            token_type: values(parts.token_type.embeddings())?[..hidden].to_vec(),
            emb_norm: norm(parts.emb_norm)?,
            layers,
            hidden,
            heads: parts.heads,
            head_dim: parts.head_dim,
        })
    }

    /// The same model with its word embeddings kept as `table` (the same values).
    pub(crate) fn with_word_table(self, table: WordTable) -> FusedBert {
        FusedBert { word: table, ..self }
    }

    /// The last hidden state of each sequence: `sequences[i].len()` rows of `hidden` values;
    /// in f32 throughout where `exact` asks for it, even if the layers have int8 weights.
    pub fn forward(&self, sequences: &[&[u32]], exact: bool) -> Result<Vec<Vec<f32>>> {
        let h = self.hidden;
        let max_position = self.position.len() / h;
        let mut starts = Vec::with_capacity(sequences.len() + 1);
        starts.push(0);
        for s in sequences {
            anyhow::ensure!(
                s.len() <= max_position,
                "a sequence of {} tokens is over the model's {max_position}",
                s.len()
            );
            starts.push(starts.last().unwrap() + s.len());
        }
        let rows = *starts.last().unwrap();
        let vocab = self.word.rows(h);
        let mut x = vec![0f32; rows * h];
        for (s, ids) in sequences.iter().enumerate() {
            for (j, &id) in ids.iter().enumerate() {
                anyhow::ensure!((id as usize) < vocab, "token id {id} is outside the vocabulary");
                let row = &mut x[(starts[s] + j) * h..][..h];
                self.word.add_row(id as usize, row);
                let p = &self.position[j * h..][..h];
                for d in 0..h {
                    // (word + position) + type, in that order: the same bits as always.
                    row[d] = row[d] + p[d] + self.token_type[d];
                }
            }
        }
        normalize_rows(&mut x, None, &self.emb_norm, h);

        let mut qkv = vec![0f32; rows * 3 * h];
        let mut context = vec![0f32; rows * h];
        let mut attended = vec![0f32; rows * h];
        let mut inner = Vec::new();
        let mut out = vec![0f32; rows * h];
        for layer in &self.layers {
            layer.qkv.forward(&x, rows, &mut qkv, exact);
            self.attention(&qkv, &starts, &mut context);
            layer.attn_out.forward(&context, rows, &mut attended, exact);
            normalize_rows(&mut attended, Some(&x), &layer.attn_norm, h);
            inner.resize(rows * layer.intermediate.outputs, 0.0);
            layer.intermediate.forward(&attended, rows, &mut inner, exact);
            inner.par_chunks_mut(4096).for_each(|c| c.iter_mut().for_each(|v| *v = gelu(*v)));
            layer.output.forward(&inner, rows, &mut out, exact);
            normalize_rows(&mut out, Some(&attended), &layer.out_norm, h);
            std::mem::swap(&mut x, &mut out);
        }
        Ok(starts.windows(2).map(|w| x[w[0] * h..w[1] * h].to_vec()).collect())
    }

    /// Scaled dot-product attention of each sequence with itself, head by head, from the
    /// packed `[q | k | v]` rows into `context` (rows of `hidden`, heads side by side). Both
    /// products are `matmul::Packed`'s chains, so every CPU gets the same bits.
    fn attention(&self, qkv: &[f32], starts: &[usize], context: &mut [f32]) {
        let (h, d) = (self.hidden, self.head_dim);
        let scale = 1.0 / (d as f32).sqrt();
        let tasks: Vec<(usize, usize)> =
            (0..starts.len() - 1).flat_map(|s| (0..self.heads).map(move |head| (s, head))).collect();
        let context_at = context.as_mut_ptr() as usize;
        tasks.par_iter().for_each_init(Scratch::default, |scratch, &(s, head)| {
            let (first, len) = (starts[s], starts[s + 1] - starts[s]);
            if len == 0 {
                return;
            }
            let rows = &qkv[first * 3 * h..(first + len) * 3 * h];
            // scores[i][j] = scale · q_i · k_j: the keys are the "weights", one per output.
            scratch.keys.refill_by_output(&rows[h + head * d..], 3 * h, len, d);
            let width = scratch.keys.width();
            scratch.zeros.resize(width.max(d.next_multiple_of(PANEL)), 0.0);
            scratch.scores.resize(len * width, 0.0);
            scratch.keys.product(&rows[head * d..], 3 * h, len, &scratch.zeros, &mut scratch.scores, width);
            for row in scratch.scores.chunks_mut(width) {
                let row = &mut row[..len];
                row.iter_mut().for_each(|v| *v *= scale);
                quire_simd::softmax(row);
            }
            // context_i = Σ_j p_ij · v_j: the values are the weights, one per dimension.
            scratch.values.refill_by_input(&rows[2 * h + head * d..], 3 * h, d, len);
            let width_v = scratch.values.width();
            scratch.context.resize(len * width_v, 0.0);
            scratch.values.product(&scratch.scores, width, len, &scratch.zeros, &mut scratch.context, width_v);
            for (i, row) in scratch.context.chunks(width_v).enumerate() {
                // SAFETY: row `first + i` of `context`, this head's `d` columns: no other
                // task writes them, and they lie inside the buffer (`rows × hidden`).
                let out = unsafe {
                    std::slice::from_raw_parts_mut((context_at as *mut f32).add((first + i) * h + head * d), d)
                };
                out.copy_from_slice(&row[..d]);
            }
        });
    }
}

/// One attention task's buffers, kept for the thread's next task.
#[derive(Default)]
struct Scratch {
    keys: Packed,
    values: Packed,
    scores: Vec<f32>,
    context: Vec<f32>,
    zeros: Vec<f32>,
}

/// Each row of `x` (plus the same row of `residual`) normalised: LayerNorm.
fn normalize_rows(x: &mut [f32], residual: Option<&[f32]>, norm: &Norm, width: usize) {
    x.par_chunks_mut(width).enumerate().for_each(|(r, row)| {
        if let Some(res) = residual {
            for (v, a) in row.iter_mut().zip(&res[r * width..][..width]) {
                *v += a;
            }
        }
        let mean = lanes(row, 0.0, |v| v, |a, b| a + b) / width as f32;
        let var = lanes(row, 0.0, |v| (v - mean) * (v - mean), |a, b| a + b) / width as f32;
        let inv = 1.0 / (var + norm.eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = (*v - mean) * inv * w + b;
        }
    });
}

/// `map` of each value of `row`, folded with `fold` in 16 independent lanes, then across
/// them: the compiler does not reorder a float reduction itself, and one running value a step
/// does not vectorise.
#[inline(always)]
fn lanes(row: &[f32], init: f32, map: impl Fn(f32) -> f32, fold: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 16];
    let mut chunks = row.chunks_exact(16);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a = fold(*a, map(v));
        }
    }
    let rest = chunks.remainder().iter().fold(init, |a, &v| fold(a, map(v)));
    acc.into_iter().fold(rest, &fold)
}

/// eˣ within an ulp or two (Cephes' expf polynomial), branch-free so loops over it vectorise.
#[inline(always)]
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    y * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// GELU with the exact erf form BERT uses; erf from Abramowitz & Stegun 7.1.26 (absolute
/// error under 1.5e-7, below f32's resolution of the result).
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let a = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t + 0.254_829_6) * t;
    let erf = (1.0 - poly * exp(-a * a)).copysign(x);
    0.5 * x * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_gelu_match_the_library_functions() {
        for i in -8000..=800 {
            let x = i as f32 * 0.01;
            let (ours, theirs) = (exp(x), x.exp());
            assert!((ours - theirs).abs() <= 3e-7 * theirs, "exp({x}) = {ours}, libm {theirs}");
        }
        // (|x| ≤ 5: where the series below is exact in f64; beyond, GELU is x or 0 to f32.)
        for i in -500..=500 {
            let x = i as f32 * 0.01;
            let exact = 0.5 * x as f64 * (1.0 + libm_erf(x as f64 / std::f64::consts::SQRT_2));
            assert!((gelu(x) as f64 - exact).abs() < 1e-6 * (1.0 + x.abs() as f64), "gelu({x})");
        }
    }

    /// erf by its Taylor series (exact to ~1e-11 in f64 for |x| ≤ 3.6), independent of the code above.
    fn libm_erf(x: f64) -> f64 {
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }
}
