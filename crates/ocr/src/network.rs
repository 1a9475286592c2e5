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

use anyhow::{bail, ensure, Context, Result};
use quire_dense::Dense;
use rayon::prelude::*;
use rten_simd::SimdUnaryOp;

use crate::graph::{name, Constant, Kind, Operator};

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

/// Buffers reused between a line's layers, each thread its own. Every layer writes the whole
/// of its output, so a reused buffer needs no clearing, where a fresh one costs zeroing and,
/// when large, page faults: the two were 15 % of a line's time.
mod spare {
    use std::cell::RefCell;

    thread_local! {
        static BUFFERS: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
    }

    /// Values kept per thread at most (64 MB: a wide line's stem needs ~30).
    const KEPT_VALUES: usize = 16 << 20;

    /// A buffer of `len` values, their contents left from earlier use: the caller writes each.
    /// Every buffer's whole capacity is written when it is made (kept by `give`).
    pub fn take(len: usize) -> Vec<f32> {
        let found = BUFFERS.with(|b| {
            let mut buffers = b.borrow_mut();
            // The smallest that is long enough, else the longest (made anew).
            let fits = (0..buffers.len()).filter(|&i| buffers[i].len() >= len).min_by_key(|&i| buffers[i].len());
            let pick = fits.or_else(|| (0..buffers.len()).max_by_key(|&i| buffers[i].len()));
            pick.map(|i| buffers.swap_remove(i))
        });
        let mut buffer = found.unwrap_or_default();
        if buffer.len() < len {
            buffer = Vec::with_capacity(len);
            buffer.resize(buffer.capacity(), 0.0);
        }
        buffer.truncate(len);
        buffer
    }

    /// A buffer from `take` back for the next one.
    pub fn give(mut buffer: Vec<f32>) {
        // SAFETY: the buffer came from `take`, which wrote its whole capacity when it made it;
        // shortening it since left those values in place (f32s need no dropping).
        unsafe { buffer.set_len(buffer.capacity()) };
        BUFFERS.with(|b| {
            let mut buffers = b.borrow_mut();
            let kept: usize = buffers.iter().map(Vec::capacity).sum();
            if buffers.len() < 12 && kept + buffer.capacity() <= KEPT_VALUES {
                buffers.push(buffer);
            }
        });
    }
}

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

fn relu(mut map: Map) -> Map {
    map.data.iter_mut().for_each(|v| *v = v.max(0.0));
    map
}

fn hard_sigmoid(v: f32, alpha: f32, beta: f32) -> f32 {
    (v * alpha + beta).clamp(0.0, 1.0)
}

/// `x · sigmoid(x)`, by rten's vectorized kernel.
fn swish(values: &mut [f32]) {
    rten_vecmath::Silu {}.map_mut(values);
}

/// `pointwise`, the input's buffer given back after.
fn pointwise_consuming(layer: &Layer, input: Map) -> Map {
    let out = pointwise(layer, &input);
    spare::give(input.data);
    out
}

fn pointwise(layer: &Layer, input: &Map) -> Map {
    Map {
        height: input.height,
        width: input.width,
        channels: layer.outputs,
        data: layer.forward(&input.data, input.pixels()),
    }
}

fn output_size(size: usize, kernel: usize, stride: usize, before: usize, after: usize) -> usize {
    (size + before + after - kernel) / stride + 1
}

/// A convolution as a dense layer over its patches, each laid out `[ky][kx][c]`, a band of
/// output pixels at a time (the band's patches stay in cache).
fn conv(c: &Conv, input: &Map) -> Map {
    let (kh, kw) = c.kernel;
    let [top, left, bottom, right] = c.pads;
    let height = output_size(input.height, kh, c.stride.0, top, bottom);
    let width = output_size(input.width, kw, c.stride.1, left, right);
    let (patch, channels) = (kh * kw * input.channels, c.layer.outputs);
    let mut data = spare::take(height * width * channels);
    let mut patches = Vec::new();
    for (band, out) in data.chunks_mut(BAND * channels).enumerate() {
        let first = band * BAND;
        let pixels = out.len() / channels;
        patches.clear();
        patches.resize(pixels * patch, 0f32);
        for (p, row) in patches.chunks_exact_mut(patch).enumerate() {
            let (y, x) = ((first + p) / width, (first + p) % width);
            for ky in 0..kh {
                let Some(iy) = (y * c.stride.0 + ky).checked_sub(top).filter(|&iy| iy < input.height) else { continue };
                for kx in 0..kw {
                    let Some(ix) = (x * c.stride.1 + kx).checked_sub(left).filter(|&ix| ix < input.width) else {
                        continue;
                    };
                    let from = &input.data[(iy * input.width + ix) * input.channels..][..input.channels];
                    row[(ky * kw + kx) * input.channels..][..input.channels].copy_from_slice(from);
                }
            }
        }
        c.layer.forward_into(&patches, pixels, out);
    }
    Map { height, width, channels, data }
}

/// A depthwise convolution. Rows above and below the map read a row of zeros; columns off
/// its sides are left out of the pixels at the edges (`depthwise_edge_pixel`), so the pixels
/// in between read every tap where it lies (`depthwise_pixel`).
fn depthwise(d: &Depthwise, input: &Map) -> Map {
    let (kh, kw) = d.kernel;
    let [top, left, bottom, right] = d.pads;
    let channels = input.channels;
    let height = output_size(input.height, kh, d.stride.0, top, bottom);
    let width = output_size(input.width, kw, d.stride.1, left, right);
    assert!(d.stride.1 == 1 && left < kw && right < kw, "depthwise convolutions here step 1 across");
    let mut zeros = spare::take(input.width * channels);
    zeros.fill(0.0);
    let mut data = spare::take(height * width * channels);
    let mut rows: Vec<&[f32]> = Vec::with_capacity(kh);
    for (y, out_row) in data.chunks_exact_mut(width * channels).enumerate() {
        rows.clear();
        rows.extend((0..kh).map(|ky| match (y * d.stride.0 + ky).checked_sub(top).filter(|&iy| iy < input.height) {
            Some(iy) => &input.data[iy * input.width * channels..][..input.width * channels],
            None => &zeros[..],
        }));
        // Output x reads input columns x − left ..= x − left + kw − 1: all on the map for
        // x in left ..= input width + left − kw.
        let inside = left..(input.width + left + 1).saturating_sub(kw).max(left);
        for (x, out) in out_row.chunks_exact_mut(channels).enumerate() {
            if inside.contains(&x) {
                depthwise_pixel(d, &rows, x - left, out);
            } else {
                depthwise_edge_pixel(d, &rows, x as isize - left as isize, input.width, out);
            }
        }
    }
    drop(rows);
    spare::give(zeros);
    Map { height, width, channels, data }
}

/// A pixel at the edge of a depthwise convolution: its taps from column `x` (which may be
/// off the map, as may the next ones) only where they lie on the map's `width` columns.
fn depthwise_edge_pixel(d: &Depthwise, rows: &[&[f32]], x: isize, width: usize, out: &mut [f32]) {
    let (c, kw) = (d.bias.len(), d.kernel.1);
    out.copy_from_slice(&d.bias);
    for (ky, row) in rows.iter().enumerate() {
        for kx in 0..kw {
            let column = x + kx as isize;
            if column < 0 || column >= width as isize {
                continue;
            }
            let (a, w) = (&row[column as usize * c..][..c], &d.weight[(ky * kw + kx) * c..][..c]);
            for ((o, a), w) in out.iter_mut().zip(a).zip(w) {
                *o = a.mul_add(*w, *o);
            }
        }
    }
}

/// One output pixel of a depthwise convolution, its taps read from the rows at columns `x`
/// onwards, all on the map. 3 × 3 kernels (the backbone's) go through all nine taps per channel in one
/// run along the channels, so the compiler vectorizes across channels with nine independent
/// values in flight; other kernels (the neck's 1 × 7) tap by tap.
fn depthwise_pixel(d: &Depthwise, rows: &[&[f32]], x: usize, out: &mut [f32]) {
    let c = d.bias.len();
    let kw = d.kernel.1;
    let tap = |ky: usize, kx: usize| (&rows[ky][(x + kx) * c..][..c], &d.weight[(ky * kw + kx) * c..][..c]);
    if d.kernel == (3, 3) {
        let [(a0, w0), (a1, w1), (a2, w2)] = [0, 1, 2].map(|kx| tap(0, kx));
        let [(b0, v0), (b1, v1), (b2, v2)] = [0, 1, 2].map(|kx| tap(1, kx));
        let [(c0, u0), (c1, u1), (c2, u2)] = [0, 1, 2].map(|kx| tap(2, kx));
        let out = &mut out[..c];
        for i in 0..c {
            let mut s = d.bias[i];
            s = a0[i].mul_add(w0[i], s);
            s = a1[i].mul_add(w1[i], s);
            s = a2[i].mul_add(w2[i], s);
            s = b0[i].mul_add(v0[i], s);
            s = b1[i].mul_add(v1[i], s);
            s = b2[i].mul_add(v2[i], s);
            s = c0[i].mul_add(u0[i], s);
            s = c1[i].mul_add(u1[i], s);
            s = c2[i].mul_add(u2[i], s);
            out[i] = s;
        }
        return;
    }
    out.copy_from_slice(&d.bias);
    for ky in 0..rows.len() {
        for kx in 0..kw {
            let (a, w) = tap(ky, kx);
            for ((o, a), w) in out.iter_mut().zip(a).zip(w) {
                *o = a.mul_add(*w, *o);
            }
        }
    }
}

/// 2×2 max pool, stride 1, padded at the bottom and right (`SAME_UPPER`): the same size out.
fn max_pool_2x2(input: &Map) -> Map {
    let (h, w, c) = (input.height, input.width, input.channels);
    let mut data = spare::take(input.data.len());
    data.copy_from_slice(&input.data);
    for y in 0..h {
        for x in 0..w {
            let out = &mut data[(y * w + x) * c..][..c];
            for (dy, dx) in [(0, 1), (1, 0), (1, 1)] {
                if y + dy < h && x + dx < w {
                    let other = &input.data[((y + dy) * w + x + dx) * c..][..c];
                    out.iter_mut().zip(other).for_each(|(o, v)| *o = o.max(*v));
                }
            }
        }
    }
    Map { data, ..*input }
}

/// 3 high × 2 wide average pool, stride 3 × 2, no padding.
fn average_pool_3x2(input: &Map) -> Map {
    let (c, height, width) = (input.channels, input.height / 3, input.width / 2);
    let mut data = vec![0f32; height * width * c];
    for y in 0..height {
        for x in 0..width {
            let out = &mut data[(y * width + x) * c..][..c];
            for dy in 0..3 {
                for dx in 0..2 {
                    let from = &input.data[((3 * y + dy) * input.width + 2 * x + dx) * c..][..c];
                    out.iter_mut().zip(from).for_each(|(o, v)| *o += v);
                }
            }
            out.iter_mut().for_each(|o| *o /= 6.0);
        }
    }
    Map { height, width, channels: c, data }
}

fn concat(a: &Map, b: &Map) -> Map {
    let channels = a.channels + b.channels;
    let mut data = spare::take(a.pixels() * channels);
    let pixels = a.data.chunks_exact(a.channels).zip(b.data.chunks_exact(b.channels));
    for (out, (pa, pb)) in data.chunks_exact_mut(channels).zip(pixels) {
        out[..a.channels].copy_from_slice(pa);
        out[a.channels..].copy_from_slice(pb);
    }
    Map { height: a.height, width: a.width, channels, data }
}

/// The operators in order, read one at a time, each checked to be what the network has next.
struct Ops<'a> {
    ops: &'a [Operator],
    at: usize,
}

impl<'a> Ops<'a> {
    fn peek(&self) -> Option<&'a Operator> {
        self.ops.get(self.at)
    }

    fn next(&mut self, kind: Kind) -> Result<&'a Operator> {
        let op = self.peek().context("the model ends early")?;
        if op.kind != kind {
            bail!("found {} where {} was expected", name(op.kind), name(kind));
        }
        self.at += 1;
        Ok(op)
    }

    fn next_is(&self, kind: Kind) -> bool {
        self.peek().is_some_and(|op| op.kind == kind)
    }

    /// The shape operators between the parts the network reads (their effect is built in).
    fn skip_plumbing(&mut self) {
        const PLUMBING: [Kind; 7] =
            [Kind::Shape, Kind::Slice, Kind::Squeeze, Kind::Unsqueeze, Kind::Concat, Kind::Reshape, Kind::Transpose];
        while self.peek().is_some_and(|op| PLUMBING.contains(&op.kind)) {
            self.at += 1;
        }
    }

    /// A convolution's weight and attributes, and the bias added after it.
    fn conv_with_bias(&mut self) -> Result<(&'a Operator, Vec<f32>)> {
        let conv = self.next(Kind::Conv)?;
        let channels = conv.constant(1)?.shape[0];
        let add = self.next(Kind::Add)?;
        let bias = add.the_constant()?;
        ensure!(bias.values.len() == channels, "a bias of {} values for {channels} channels", bias.values.len());
        Ok((conv, bias.values.clone()))
    }

    /// Layer norm as the exported graph spells it: mean, subtract, square, mean, add ε,
    /// square root, divide, scale, shift.
    fn norm(&mut self) -> Result<Norm> {
        self.next(Kind::ReduceMean)?;
        self.next(Kind::Sub)?;
        let square = self.next(Kind::Pow)?;
        ensure!(square.the_constant()?.values == [2.0], "layer norm squares");
        self.next(Kind::ReduceMean)?;
        let epsilon = self.next(Kind::Add)?.the_constant()?.values[0];
        self.next(Kind::Sqrt)?;
        self.next(Kind::Div)?;
        let gain = self.next(Kind::Mul)?.the_constant()?.values.clone();
        let bias = self.next(Kind::Add)?.the_constant()?.values.clone();
        Ok(Norm { gain, bias, epsilon })
    }

    /// `MatMul` by a constant `[inputs][outputs]` then `Add` of a bias, as a layer.
    fn linear(&mut self) -> Result<Layer> {
        let weight = self.next(Kind::MatMul)?.the_constant()?;
        let bias = self.next(Kind::Add)?.the_constant()?.values.clone();
        let &[inputs, outputs] = &weight.shape[..] else { bail!("a matrix of shape {:?}", weight.shape) };
        Ok(Layer::new(by_output(&weight.values, inputs, outputs), bias, outputs, inputs, false))
    }

    fn swish(&mut self) -> Result<()> {
        self.next(Kind::Sigmoid)?;
        self.next(Kind::Mul)?;
        Ok(())
    }

    /// A convolution without bias followed by batch norm and swish, batch norm folded in.
    fn conv_norm_swish(&mut self) -> Result<(&'a Operator, Vec<f32>, Vec<f32>)> {
        let conv = self.next(Kind::Conv)?;
        let norm = self.next(Kind::BatchNormalization)?;
        let [gamma, beta, mean, variance] = [1, 2, 3, 4].map(|i| norm.constant(i).map(|c| &c.values));
        let (gamma, beta, mean, variance) = (gamma?, beta?, mean?, variance?);
        let scale: Vec<f32> = gamma.iter().zip(variance).map(|(g, v)| g / (v + norm.attrs.epsilon).sqrt()).collect();
        let shift = beta.iter().zip(mean).zip(&scale).map(|((b, m), s)| b - m * s).collect();
        self.swish()?;
        Ok((conv, scale, shift))
    }
}

fn pads(op: &Operator, kernel: (usize, usize)) -> Result<[usize; 4]> {
    if op.attrs.same {
        // SAME_UPPER with stride 1: the kernel's extra row and column go after.
        return Ok([(kernel.0 - 1) / 2, (kernel.1 - 1) / 2, kernel.0 / 2, kernel.1 / 2]);
    }
    match op.attrs.pads[..] {
        [] => Ok([0; 4]),
        [top, left, bottom, right] => Ok([top, left, bottom, right]),
        _ => bail!("padding {:?}", op.attrs.pads),
    }
}

fn strides(op: &Operator) -> Result<(usize, usize)> {
    match op.attrs.strides[..] {
        [] => Ok((1, 1)),
        [sy, sx] => Ok((sy, sx)),
        _ => bail!("strides {:?}", op.attrs.strides),
    }
}

/// A matrix stored `[inputs][outputs]` (ONNX's `MatMul` by a constant) as a layer's
/// `[outputs][inputs]`.
fn by_output(weight: &[f32], inputs: usize, outputs: usize) -> Vec<f32> {
    let mut laid_out = vec![0f32; inputs * outputs];
    for i in 0..inputs {
        for o in 0..outputs {
            laid_out[o * inputs + i] = weight[i * outputs + o];
        }
    }
    laid_out
}

/// A convolution's kernel `[out][in][ky][kx]` as a layer's rows over patches laid out
/// `[ky][kx][in]` (what `conv` gathers).
fn by_patch(weight: &[f32], outputs: usize, inputs: usize, (kh, kw): (usize, usize)) -> Vec<f32> {
    let patch = kh * kw * inputs;
    let mut laid_out = vec![0f32; outputs * patch];
    for o in 0..outputs {
        for i in 0..inputs {
            for ky in 0..kh {
                for kx in 0..kw {
                    laid_out[o * patch + (ky * kw + kx) * inputs + i] = weight[((o * inputs + i) * kh + ky) * kw + kx];
                }
            }
        }
    }
    laid_out
}

/// A depthwise kernel `[c][tap]` laid out `[tap][c]` (what `depthwise` reads), each channel's
/// weights times its `scale` (a folded norm) where given.
fn by_tap(weight: &[f32], channels: usize, taps: usize, scale: Option<&[f32]>) -> Vec<f32> {
    let mut laid_out = vec![0f32; taps * channels];
    for c in 0..channels {
        let s = scale.map_or(1.0, |s| s[c]);
        for k in 0..taps {
            laid_out[k * channels + c] = weight[c * taps + k] * s;
        }
    }
    laid_out
}

/// A full convolution `[out][in][ky][kx]` as a layer over patches laid out `[ky][kx][in]`.
fn full_conv(op: &Operator, bias: Vec<f32>, int8: bool) -> Result<Conv> {
    let weight: &Constant = op.constant(1)?;
    let &[outputs, inputs, kh, kw] = &weight.shape[..] else { bail!("a kernel of shape {:?}", weight.shape) };
    ensure!(op.attrs.groups <= 1, "a grouped convolution where a full one was expected");
    let laid_out = by_patch(&weight.values, outputs, inputs, (kh, kw));
    let (stride, pads) = (strides(op)?, pads(op, (kh, kw))?);
    Ok(Conv { layer: Layer::new(laid_out, bias, outputs, kh * kw * inputs, int8), kernel: (kh, kw), stride, pads })
}

/// A 1×1 convolution as a layer; `scale` multiplies each output's weights (a folded norm).
fn one_by_one(op: &Operator, bias: Vec<f32>, scale: Option<&[f32]>, int8: bool) -> Result<Layer> {
    let weight = op.constant(1)?;
    let &[outputs, inputs, 1, 1] = &weight.shape[..] else { bail!("a 1×1 kernel of shape {:?}", weight.shape) };
    ensure!(op.attrs.groups <= 1 && strides(op)? == (1, 1), "a 1×1 convolution with groups or strides");
    let mut values = weight.values.clone();
    if let Some(scale) = scale {
        for (row, s) in values.chunks_exact_mut(inputs).zip(scale) {
            row.iter_mut().for_each(|v| *v *= s);
        }
    }
    Ok(Layer::new(values, bias, outputs, inputs, int8))
}

fn depthwise_conv(op: &Operator, bias: Vec<f32>, scale: Option<&[f32]>) -> Result<Depthwise> {
    let weight = op.constant(1)?;
    let &[channels, 1, kh, kw] = &weight.shape[..] else { bail!("a depthwise kernel of shape {:?}", weight.shape) };
    ensure!(
        op.attrs.groups == channels,
        "a depthwise convolution of {} groups for {channels} channels",
        op.attrs.groups
    );
    let laid_out = by_tap(&weight.values, channels, kh * kw, scale);
    let (stride, pads) = (strides(op)?, pads(op, (kh, kw))?);
    // What `depthwise` runs: a step of 1 across, padding narrower than the kernel.
    ensure!(
        stride.1 == 1 && pads[1] < kw && pads[3] < kw,
        "a depthwise convolution stepping {stride:?}, padded {pads:?}"
    );
    Ok(Depthwise { weight: laid_out, bias, kernel: (kh, kw), stride, pads })
}

fn build(ops: &mut Ops, int8: bool) -> Result<Recognizer> {
    // The stem's layers stay in f32: with 24 to 96 outputs a row, quantizing each row costs
    // what 8-bit products save (measured: no faster).
    let stem_conv = |ops: &mut Ops, int8: bool| -> Result<Conv> {
        let (op, bias) = ops.conv_with_bias()?;
        ops.next(Kind::Relu)?;
        full_conv(op, bias, int8)
    };
    let first = stem_conv(ops, false)?;
    let left = stem_conv(ops, false)?;
    let right = stem_conv(ops, false)?;
    let pool = ops.next(Kind::MaxPool)?;
    ensure!(pool.attrs.kernel == [2, 2] && pool.attrs.same, "the stem's pool is 2×2, same size");
    ops.next(Kind::Concat)?;
    let joined = stem_conv(ops, false)?;
    let (op, bias) = ops.conv_with_bias()?;
    ops.next(Kind::Relu)?;
    let widen = one_by_one(op, bias, None, false)?;
    let stem = Stem { first, left, right, joined, widen };

    let mut blocks = Vec::new();
    while ops.next_is(Kind::Conv) {
        let (op, bias) = ops.conv_with_bias()?;
        let depthwise = depthwise_conv(op, bias, None)?;
        let excitation = if ops.next_is(Kind::ReduceMean) {
            let mean = ops.next(Kind::ReduceMean)?;
            ensure!(mean.attrs.axes == [2, 3], "the excitation averages over the map");
            let (op, bias) = ops.conv_with_bias()?;
            let reduce = one_by_one(op, bias, None, false)?;
            ops.next(Kind::Relu)?;
            let (op, bias) = ops.conv_with_bias()?;
            let expand = one_by_one(op, bias, None, false)?;
            let hard = ops.next(Kind::HardSigmoid)?;
            ops.next(Kind::Mul)?;
            Some(Excitation { reduce, expand, alpha: hard.attrs.alpha, beta: hard.attrs.beta })
        } else {
            None
        };
        let (op, bias) = ops.conv_with_bias()?;
        let up = one_by_one(op, bias, None, int8)?;
        // GELU: x / √2, erf, + 1, × x, × ½.
        let divide = ops.next(Kind::Div)?;
        ensure!((divide.the_constant()?.values[0] - std::f32::consts::SQRT_2).abs() < 1e-6, "GELU divides by √2");
        for kind in [Kind::Erf, Kind::Add, Kind::Mul, Kind::Mul] {
            ops.next(kind)?;
        }
        let (op, bias) = ops.conv_with_bias()?;
        let down = one_by_one(op, bias, None, int8)?;
        let residual = ops.peek().is_some_and(|op| op.kind == Kind::Add && op.all_values());
        if residual {
            ops.next(Kind::Add)?;
            ensure!(down.outputs == depthwise.bias.len(), "a residual across a change of channels");
        }
        blocks.push(Block { depthwise, excitation, up, down, residual });
    }
    let pool = ops.next(Kind::AveragePool)?;
    ensure!(pool.attrs.kernel == [3, 2] && pool.attrs.strides == [3, 2], "the last pool is 3 × 2");

    let (op, scale, shift) = ops.conv_norm_swish()?;
    let shortcut = one_by_one(op, shift, Some(&scale), int8)?;
    let (op, scale, shift) = ops.conv_norm_swish()?;
    let mix_in = one_by_one(op, shift, Some(&scale), int8)?;
    let (op, scale, shift) = ops.conv_norm_swish()?;
    let mix_along = depthwise_conv(op, shift, Some(&scale))?;
    ops.next(Kind::Add)?;
    ops.skip_plumbing();
    let mut encoders = Vec::new();
    let norm = loop {
        let norm = ops.norm()?;
        if !ops.next_is(Kind::MatMul) {
            break norm;
        }
        let qkv = ops.linear()?;
        let split = ops.next(Kind::Reshape)?.the_constant()?;
        let &[_, _, parts, heads, head_size] = &split.values[..] else {
            bail!("the attention's split {:?}", split.values)
        };
        ensure!(parts == 3.0, "the attention's split {:?}", split.values);
        let (heads, head_size) = (heads as usize, head_size as usize);
        ensure!(heads * head_size == qkv.inputs && qkv.outputs == 3 * qkv.inputs, "heads of {head_size} × {heads}");
        ops.skip_plumbing();
        let scale = ops.next(Kind::Mul)?.the_constant()?.values[0];
        ensure!(ops.next(Kind::Add)?.the_constant()?.values == [0.0], "the queries are only scaled");
        ops.skip_plumbing();
        ops.next(Kind::MatMul)?;
        ops.next(Kind::Softmax)?;
        ops.next(Kind::MatMul)?;
        ops.skip_plumbing();
        let projection = ops.linear()?;
        ops.next(Kind::Add)?;
        let mlp_norm = ops.norm()?;
        let mlp_up = ops.linear()?;
        ops.swish()?;
        let mlp_down = ops.linear()?;
        ops.next(Kind::Add)?;
        encoders.push(Encoder { attention_norm: norm, qkv, heads, scale, projection, mlp_norm, mlp_up, mlp_down });
    };
    ops.skip_plumbing();
    ops.next(Kind::Add)?;
    ops.skip_plumbing();
    let weight = ops.next(Kind::MatMul)?.the_constant()?;
    let bias = ops.next(Kind::Add)?.the_constant()?.values.clone();
    ops.next(Kind::Softmax)?;
    let &[inputs, classes] = &weight.shape[..] else { bail!("a head of shape {:?}", weight.shape) };
    ensure!(inputs == 120 && encoders.iter().all(|e| e.qkv.inputs == inputs), "a head over {inputs} features");
    let head = Layer::new(by_output(&weight.values, inputs, classes), bias, classes, inputs, int8);
    ensure!(ops.peek().is_none(), "operators after the head");
    Ok(Recognizer { stem, blocks, neck: Neck { shortcut, mix_in, mix_along, encoders, norm }, head })
}

#[cfg(test)]
mod tests {
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
