//! PP-OCRv6 small's line recognizer, run by Quire itself rather than by rten: its 1×1
//! convolutions and its 18,710-class head are nearly all of its multiply-adds, and as dense
//! layers over the pixels (`quire-dense`) they run in 8-bit integers where the CPU has exact
//! 8-bit products (AVX-512 VNNI, AVX-VNNI, AVX2, ARM dot products), f32 elsewhere.
//!
//! The network, as the model file lists it (`build` checks each operator it reads, so another
//! model is refused rather than misread):
//! - stem: 3×3 stride 2 convolution; two 2×2 convolutions beside a 2×2 max pool, concatenated;
//!   3×3 stride 2 convolution; 1×1 convolution (ReLU after each);
//! - blocks: 3×3 depthwise convolution (stride 1, or 2 down and 1 across), an optional
//!   squeeze-and-excitation, then 1×1 up, GELU, 1×1 down, added to the block's input where
//!   the channels match;
//! - 3 × 2 average pool: one row of steps;
//! - neck: two 1×1 convolutions (batch norm, swish), one of them mixed along the steps by a 1×7
//!   depthwise convolution; two transformer layers (8 heads) over the steps; layer norm; the
//!   other 1×1 branch added;
//! - head: 120 → 18,710 classes per step (the softmax after it is left out: greedy CTC decoding
//!   needs only each step's largest).
//!
//! Feature maps are kept channels-last (`Map`), so a 1×1 convolution is one dense layer over
//! the pixels. Depthwise convolutions, pools and activations are plain loops the compiler
//! vectorizes; their arithmetic has no fused multiply-adds and no libm, so they give the same
//! bits on every CPU.

use anyhow::{Context, Result};
use quire_dense::Dense;
use rayon::prelude::*;
use rten_simd::SimdUnaryOp;

use crate::graph::Operator;

/// Whether the dense layers run in 8-bit integers (where the CPU has exact 8-bit products) or
/// in f32 everywhere (`QUIRE_OCR=f32`, for side-by-side figures).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Precision {
    Int8,
    F32,
}

impl Precision {
    pub fn from_env() -> Precision {
        match std::env::var("QUIRE_OCR").as_deref() {
            Ok("f32") => Precision::F32,
            _ => Precision::Int8,
        }
    }
}

pub(crate) struct Recognizer {
    stem: Stem,
    blocks: Vec<Block>,
    neck: Neck,
    head: Layer,
}

mod layers;
mod loading;
mod spare;

use layers::{
    average_pool_3x2, concat, conv, depthwise, hard_sigmoid, max_pool_2x2, pointwise, pointwise_consuming, relu, swish,
};
use loading::{build, Ops};

/// Pixels per band in a block's 1×1 layers and in the convolutions' patches: a band's hidden
/// values (up to 768 channels) or patches stay in the core's cache.
const BAND: usize = 256;

/// Steps per task in the head: their scores (18,720 each) stay in the core's cache.
const HEAD_STEPS: usize = 16;

/// The index of the largest value (the first of equals): the largest found 16 lanes at a
/// time (vectors), then its first place.
fn largest(values: &[f32]) -> usize {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = values.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = if v > *lane { v } else { *lane };
        }
    }
    let top = lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    values.iter().position(|&v| v == top).unwrap_or(0)
}

/// A feature map, channels last: `data[(y * width + x) * channels + c]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Map {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub data: Vec<f32>,
}

impl Map {
    fn pixels(&self) -> usize {
        self.height * self.width
    }
}

/// A dense layer, `[rows][inputs] → [rows][outputs]`. For the int8 kernels, whose panels are
/// 32 outputs, the outputs are padded with zero weights (`width`).
struct Layer {
    dense: Dense,
    inputs: usize,
    outputs: usize,
}

impl Layer {
    /// From row-major `[outputs][inputs]` weights.
    fn new(mut weight: Vec<f32>, mut bias: Vec<f32>, outputs: usize, inputs: usize, int8: bool) -> Layer {
        let int8 = int8 && quire_dense::int8::available();
        let width = if int8 { outputs.next_multiple_of(quire_dense::PANEL) } else { outputs };
        weight.resize(width * inputs, 0.0);
        bias.resize(width, 0.0);
        Layer { dense: Dense::new(weight, bias, width, inputs, int8), inputs, outputs }
    }

    /// Outputs per row as `forward_wide` writes them.
    fn width(&self) -> usize {
        self.dense.outputs
    }

    /// `rows` rows of `inputs` values in, `rows` rows of `width` values out.
    fn forward_wide(&self, input: &[f32], rows: usize) -> Vec<f32> {
        debug_assert_eq!(input.len(), rows * self.inputs);
        let mut out = spare::take(rows * self.width());
        self.dense.forward(input, rows, &mut out, false);
        out
    }

    /// `rows` rows of `inputs` values in, `rows` rows of `outputs` values written to `out`.
    fn forward_into(&self, input: &[f32], rows: usize, out: &mut [f32]) {
        if self.width() == self.outputs {
            self.dense.forward(input, rows, out, false);
        } else {
            let values = self.forward(input, rows);
            out.copy_from_slice(&values);
            spare::give(values);
        }
    }

    /// `rows` rows of `inputs` values in, `rows` rows of `outputs` values out.
    fn forward(&self, input: &[f32], rows: usize) -> Vec<f32> {
        let wide = self.forward_wide(input, rows);
        if self.width() == self.outputs {
            return wide;
        }
        let mut out = spare::take(rows * self.outputs);
        for (to, from) in out.chunks_exact_mut(self.outputs).zip(wide.chunks_exact(self.width())) {
            to.copy_from_slice(&from[..self.outputs]);
        }
        spare::give(wide);
        out
    }
}

/// A convolution with its own weights per input channel, as a dense layer over the patches.
struct Conv {
    layer: Layer,
    kernel: (usize, usize),
    stride: (usize, usize),
    /// Top, left, bottom, right.
    pads: [usize; 4],
}

/// A depthwise convolution: one filter per channel, weights `[ky][kx][c]`.
struct Depthwise {
    weight: Vec<f32>,
    bias: Vec<f32>,
    kernel: (usize, usize),
    stride: (usize, usize),
    pads: [usize; 4],
}

struct Excitation {
    reduce: Layer,
    expand: Layer,
    alpha: f32,
    beta: f32,
}

struct Block {
    depthwise: Depthwise,
    excitation: Option<Excitation>,
    up: Layer,
    down: Layer,
    residual: bool,
}

struct Stem {
    first: Conv,
    left: Conv,
    right: Conv,
    joined: Conv,
    widen: Layer,
}

struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
    epsilon: f32,
}

struct Encoder {
    attention_norm: Norm,
    qkv: Layer,
    heads: usize,
    scale: f32,
    projection: Layer,
    mlp_norm: Norm,
    mlp_up: Layer,
    mlp_down: Layer,
}

struct Neck {
    shortcut: Layer,
    mix_in: Layer,
    mix_along: Depthwise,
    encoders: Vec<Encoder>,
    norm: Norm,
}

impl Recognizer {
    /// The recognizer from its model file's operators.
    pub fn build(operators: &[Operator], precision: Precision) -> Result<Recognizer> {
        let mut ops = Ops { ops: operators, at: 0 };
        let int8 = precision == Precision::Int8;
        build(&mut ops, int8)
            .with_context(|| format!("the OCR recognizer is not the network Quire runs (at its operator {})", ops.at))
    }

    /// The best class at each step for a line image: `input` is 48 pixels high, 3 channels
    /// (blue, green, red, each in [-1, 1]).
    pub fn best_classes(&self, input: &Map) -> Vec<usize> {
        let features = self.features(input);
        // A few steps at a time, each's scores looked through while they are in cache.
        let (inputs, width, classes) = (self.head.inputs, self.head.width(), self.head.outputs);
        features
            .par_chunks(HEAD_STEPS * inputs)
            .flat_map_iter(|steps| {
                let scores = self.head.forward_wide(steps, steps.len() / inputs);
                (0..scores.len() / width).map(move |t| largest(&scores[t * width..][..classes]))
            })
            .collect()
    }

    /// The head's input: `[steps][120]`.
    fn features(&self, input: &Map) -> Vec<f32> {
        let s = &self.stem;
        let a = relu(conv(&s.first, input));
        let left = relu(conv(&s.left, &a));
        let b = relu(conv(&s.right, &left));
        let pooled = max_pool_2x2(&a);
        let joined = concat(&pooled, &b);
        for map in [a, left, b, pooled] {
            spare::give(map.data);
        }
        let x = relu(conv(&s.joined, &joined));
        spare::give(joined.data);
        let mut x = relu(pointwise_consuming(&s.widen, x));
        for block in &self.blocks {
            x = block.forward(x);
        }
        let pooled = average_pool_3x2(&x);
        spare::give(x.data);
        self.neck.forward(&pooled)
    }
}

impl Block {
    fn forward(&self, input: Map) -> Map {
        let mut x = depthwise(&self.depthwise, &input);
        spare::give(input.data);
        if let Some(e) = &self.excitation {
            let mut mean = vec![0f32; x.channels];
            for pixel in x.data.chunks_exact(x.channels) {
                for (m, v) in mean.iter_mut().zip(pixel) {
                    *m += v;
                }
            }
            let count = x.pixels() as f32;
            mean.iter_mut().for_each(|m| *m /= count);
            let reduced: Vec<f32> = e.reduce.forward(&mean, 1).into_iter().map(|v| v.max(0.0)).collect();
            let weights: Vec<f32> =
                e.expand.forward(&reduced, 1).into_iter().map(|v| hard_sigmoid(v, e.alpha, e.beta)).collect();
            for pixel in x.data.chunks_exact_mut(x.channels) {
                for (v, w) in pixel.iter_mut().zip(&weights) {
                    *v *= w;
                }
            }
        }
        // Up, GELU and down a band of pixels at a time: the band's hidden values (twice the
        // channels) stay in the core's cache instead of going out to memory and back.
        let channels = self.down.outputs;
        let mut data = spare::take(x.pixels() * channels);
        let bands = x.data.chunks(BAND * x.channels).zip(data.chunks_mut(BAND * channels));
        for (input, out) in bands {
            let rows = input.len() / x.channels;
            let mut hidden = self.up.forward(input, rows);
            rten_vecmath::Gelu {}.map_mut(&mut hidden);
            self.down.forward_into(&hidden, rows, out);
            spare::give(hidden);
            if self.residual {
                out.iter_mut().zip(input).for_each(|(o, v)| *o += *v);
            }
        }
        spare::give(x.data);
        Map { height: x.height, width: x.width, channels, data }
    }
}

impl Neck {
    /// `[steps][120]` from the pooled row of steps.
    fn forward(&self, pooled: &Map) -> Vec<f32> {
        debug_assert_eq!(pooled.height, 1);
        let steps = pooled.width;
        let mut shortcut = pointwise(&self.shortcut, pooled);
        swish(&mut shortcut.data);
        let mut mixed = pointwise(&self.mix_in, pooled);
        swish(&mut mixed.data);
        let mut along = depthwise(&self.mix_along, &mixed);
        swish(&mut along.data);
        let mut x: Vec<f32> = mixed.data.iter().zip(&along.data).map(|(a, b)| a + b).collect();
        for encoder in &self.encoders {
            encoder.forward(&mut x, steps);
        }
        self.norm.apply(&mut x);
        x.iter_mut().zip(&shortcut.data).for_each(|(v, s)| *v += s);
        x
    }
}

impl Encoder {
    fn forward(&self, x: &mut [f32], steps: usize) {
        let width = self.qkv.inputs;
        let mut normed = x.to_vec();
        self.attention_norm.apply(&mut normed);
        let qkv = self.qkv.forward(&normed, steps);
        let size = width / self.heads;
        let heads: Vec<Vec<f32>> =
            (0..self.heads).into_par_iter().map(|h| self.attend(&qkv, steps, h * size, size)).collect();
        let mut attended = vec![0f32; steps * width];
        for (h, head) in heads.iter().enumerate() {
            for (t, values) in head.chunks_exact(size).enumerate() {
                attended[t * width + h * size..][..size].copy_from_slice(values);
            }
        }
        let projected = self.projection.forward(&attended, steps);
        x.iter_mut().zip(&projected).for_each(|(v, p)| *v += p);
        let mut normed = x.to_vec();
        self.mlp_norm.apply(&mut normed);
        let mut hidden = self.mlp_up.forward(&normed, steps);
        swish(&mut hidden);
        let out = self.mlp_down.forward(&hidden, steps);
        x.iter_mut().zip(&out).for_each(|(v, o)| *v += o);
    }

    /// One head's attention, `[steps][size]`: its queries at `offset` in each row of `qkv`,
    /// its keys and values one and two widths on. Keys and values are laid out by dimension
    /// (`[size][steps]`) so each loop runs along the steps, in vectors.
    fn attend(&self, qkv: &[f32], steps: usize, offset: usize, size: usize) -> Vec<f32> {
        let width = self.qkv.inputs;
        let column = |part: usize, d: usize| -> Vec<f32> {
            (0..steps).map(|u| qkv[u * 3 * width + part * width + offset + d]).collect()
        };
        let keys: Vec<Vec<f32>> = (0..size).map(|d| column(1, d)).collect();
        let values: Vec<Vec<f32>> = (0..size).map(|d| column(2, d)).collect();
        let mut out = vec![0f32; steps * size];
        let mut scores = vec![0f32; steps];
        for t in 0..steps {
            scores.fill(0.0);
            for (d, key) in keys.iter().enumerate() {
                let q = qkv[t * 3 * width + offset + d] * self.scale;
                scores.iter_mut().zip(key).for_each(|(s, k)| *s += q * k);
            }
            quire_simd::softmax(&mut scores);
            for (d, value) in values.iter().enumerate() {
                out[t * size + d] = dot(&scores, value);
            }
        }
        out
    }
}

/// A dot product in 8 running sums (so it runs in vectors), added pairwise at the end.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ta, tb) = (a8.remainder(), b8.remainder());
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    for (i, (x, y)) in ta.iter().zip(tb).enumerate() {
        sums[i] += x * y;
    }
    quire_simd::plain::hsum(sums)
}

impl Norm {
    /// Layer norm over each row of `gain.len()` values.
    fn apply(&self, x: &mut [f32]) {
        let n = self.gain.len();
        for row in x.chunks_exact_mut(n) {
            let mean = row.iter().sum::<f32>() / n as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
            let deviation = (variance + self.epsilon).sqrt();
            for (i, v) in row.iter_mut().enumerate() {
                *v = (*v - mean) / deviation * self.gain[i] + self.bias[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::layers::output_size;
    use super::loading::{by_patch, by_tap};
    use super::*;

    fn value(i: usize, salt: usize) -> f32 {
        (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 500.0
    }

    fn map(height: usize, width: usize, channels: usize, salt: usize) -> Map {
        Map { height, width, channels, data: (0..height * width * channels).map(|i| value(i, salt)).collect() }
    }

    /// The convolution by its definition: output (y, x, o) sums input (y·sy + ky − top,
    /// x·sx + kx − left, i) · w(o, i, ky, kx) over the taps on the map, plus the bias; depthwise
    /// where `w(o, i, …)` exists only for i = o.
    #[allow(clippy::too_many_arguments)]
    fn by_definition(
        input: &Map,
        w: impl Fn(usize, usize, usize, usize) -> f32,
        bias: &[f32],
        kernel: (usize, usize),
        stride: (usize, usize),
        pads: [usize; 4],
        depthwise: bool,
    ) -> Map {
        let [top, left, bottom, right] = pads;
        let height = output_size(input.height, kernel.0, stride.0, top, bottom);
        let width = output_size(input.width, kernel.1, stride.1, left, right);
        let mut data = Vec::new();
        for y in 0..height {
            for x in 0..width {
                for (o, &b) in bias.iter().enumerate() {
                    let mut sum = b as f64;
                    for ky in 0..kernel.0 {
                        for kx in 0..kernel.1 {
                            let (iy, ix) = (
                                (y * stride.0 + ky) as isize - top as isize,
                                (x * stride.1 + kx) as isize - left as isize,
                            );
                            if iy < 0 || ix < 0 || iy >= input.height as isize || ix >= input.width as isize {
                                continue;
                            }
                            let at = (iy as usize * input.width + ix as usize) * input.channels;
                            let inputs = if depthwise { o..o + 1 } else { 0..input.channels };
                            for i in inputs {
                                sum += input.data[at + i] as f64 * w(o, i, ky, kx) as f64;
                            }
                        }
                    }
                    data.push(sum as f32);
                }
            }
        }
        Map { height, width, channels: bias.len(), data }
    }

    fn assert_close(got: &Map, expected: &Map) {
        assert_eq!((got.height, got.width, got.channels), (expected.height, expected.width, expected.channels));
        for (i, (g, e)) in got.data.iter().zip(&expected.data).enumerate() {
            assert!((g - e).abs() <= 1e-4 * (1.0 + e.abs()), "value {i}: {g} against {e}");
        }
    }

    #[test]
    fn depthwise_convolutions_are_their_definition() {
        // The backbone's 3×3 (stride 1, and 2 down 1 across), the neck's 1×7; channels that
        // are and are not a multiple of 16.
        for (kernel, stride, pads, channels) in
            [((3, 3), (1, 1), [1, 1, 1, 1], 48), ((3, 3), (2, 1), [1, 1, 1, 1], 40), ((1, 7), (1, 1), [0, 3, 0, 3], 24)]
        {
            let input = map(7, 13, channels, channels);
            let weights: Vec<f32> = (0..channels * kernel.0 * kernel.1).map(|i| value(i, 9)).collect();
            let bias: Vec<f32> = (0..channels).map(|i| value(i, 5)).collect();
            let w = |o: usize, _: usize, ky: usize, kx: usize| weights[(o * kernel.0 + ky) * kernel.1 + kx];
            let laid_out = by_tap(&weights, channels, kernel.0 * kernel.1, None);
            let d = Depthwise { weight: laid_out, bias: bias.clone(), kernel, stride, pads };
            assert_close(&depthwise(&d, &input), &by_definition(&input, w, &bias, kernel, stride, pads, true));
        }
    }

    #[test]
    fn full_convolutions_by_their_patches_are_their_definition() {
        // The stem's 3×3 stride 2 and its 2×2 padded at the end (SAME_UPPER); over more than
        // one band of pixels.
        for (kernel, stride, pads, inputs, outputs) in
            [((3, 3), (2, 2), [1, 1, 1, 1], 5, 8), ((2, 2), (1, 1), [0, 0, 1, 1], 6, 4)]
        {
            let input = map(40, 48, inputs, inputs);
            let weights: Vec<f32> = (0..outputs * inputs * kernel.0 * kernel.1).map(|i| value(i, 3)).collect();
            let bias: Vec<f32> = (0..outputs).map(|i| value(i, 4)).collect();
            let w =
                |o: usize, i: usize, ky: usize, kx: usize| weights[((o * inputs + i) * kernel.0 + ky) * kernel.1 + kx];
            let patch = kernel.0 * kernel.1 * inputs;
            let laid_out = by_patch(&weights, outputs, inputs, kernel);
            let c = Conv { layer: Layer::new(laid_out, bias.clone(), outputs, patch, false), kernel, stride, pads };
            let got = conv(&c, &input);
            assert!(got.pixels() > BAND, "more than one band");
            assert_close(&got, &by_definition(&input, w, &bias, kernel, stride, pads, false));
        }
    }

    #[test]
    fn the_largest_class_is_the_first_of_the_largest() {
        let mut scores: Vec<f32> = (0..18_710).map(|i| value(i, 7)).collect();
        assert_eq!(largest(&scores), (0..scores.len()).fold(0, |b, i| if scores[i] > scores[b] { i } else { b }));
        scores[18_705] = 5.0;
        scores[40] = 5.0;
        assert_eq!(largest(&scores), 40);
        assert_eq!(largest(&scores[41..]), 18_705 - 41);
        assert_eq!(largest(&[f32::NEG_INFINITY; 3]), 0);
    }

    #[test]
    fn pools_take_the_largest_and_the_mean() {
        let input = map(6, 5, 3, 1);
        let at = |y: usize, x: usize, c: usize| input.data[(y * 5 + x) * 3 + c];
        let max = max_pool_2x2(&input);
        let mean = average_pool_3x2(&input);
        assert_eq!((mean.height, mean.width), (2, 2));
        for c in 0..3 {
            // Inside, and on the last column where the pool's window is padded.
            assert_eq!(max.data[(2 * 5 + 1) * 3 + c], at(2, 1, c).max(at(2, 2, c)).max(at(3, 1, c)).max(at(3, 2, c)));
            assert_eq!(max.data[(2 * 5 + 4) * 3 + c], at(2, 4, c).max(at(3, 4, c)));
            let window: f32 = (3..6).flat_map(|y| (2..4).map(move |x| (y, x))).map(|(y, x)| at(y, x, c)).sum();
            assert!((mean.data[(2 + 1) * 3 + c] - window / 6.0).abs() < 1e-6);
        }
    }
}
