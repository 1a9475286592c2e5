//! Dense layers in 8-bit integers for CPUs with AVX-512 VNNI: `vpdpbusd` multiplies 64 byte
//! pairs per instruction where an f32 FMA multiplies 16 values.
//!
//! Both sides are quantized per block of `GROUP` inputs, which keeps the vectors within the
//! embedder's tolerance (cosine ≥ 0.999 to sentence-transformers'); one scale per output row
//! alone did not (a few large weights and activations set the scale for the whole row):
//! - weights: signed, symmetric, one scale per output and block, quantized once at load;
//! - activations: unsigned with an offset (`a ≈ scale · q + low`, `q` in 0..=255), per row and
//!   block, quantized as each layer runs. The offset's share, `low · Σ w`, is a precomputed
//!   per-output sum, so the integer products need no correction inside the loop.
//!
//! A row's result depends only on that row, so batching does not change vectors.

// The kernel is x86-64's (AVX-512 VNNI); elsewhere `available()` is false and nothing here runs,
// so the parts it would use lie idle there.
#![cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, unused_variables, unreachable_code, clippy::diverging_sub_expression, clippy::never_loop)
)]

use rayon::prelude::*;

/// Inputs per quantization block (and per L1 block of the kernel).
pub const GROUP: usize = 128;
/// Outputs per packed panel (two 16-lane registers).
const PANEL: usize = 32;
/// Rows per task, as in the f32 kernel: a task's inputs stay in L2.
const TASK_ROWS: usize = 48;

pub struct Int8Weights {
    /// Panels of `PANEL` outputs; inside a panel, the inputs 4 at a time; inside those, each
    /// output's 4 bytes (the lanes `vpdpbusd` sums).
    packed: Vec<i8>,
    /// Per panel and block, each output's scale: `[panel][block][PANEL]`.
    scale: Vec<f32>,
    /// The same, times the sum of the output's quantized weights over the block.
    scaled_sum: Vec<f32>,
    outputs: usize,
    inputs: usize,
}

/// Whether this CPU runs the int8 kernel (AVX-512 F, BW and VNNI), and `QUIRE_KERNELS=avx2`
/// does not ask for the baseline. Checked once.
pub fn available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            crate::matmul::avx512()
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

impl Int8Weights {
    /// The layer's row-major `[out][in]` weights quantized, or `None` where the kernel does not
    /// run here or the shape does not fit its blocks.
    pub fn new(weight: &[f32], outputs: usize, inputs: usize) -> Option<Int8Weights> {
        if !available() || !outputs.is_multiple_of(PANEL) || !inputs.is_multiple_of(GROUP) {
            return None;
        }
        let blocks = inputs / GROUP;
        let mut packed = vec![0i8; outputs * inputs];
        let mut scale = vec![0f32; outputs * blocks];
        let mut scaled_sum = vec![0f32; outputs * blocks];
        for o in 0..outputs {
            let (p, j) = (o / PANEL, o % PANEL);
            for b in 0..blocks {
                let w = &weight[o * inputs + b * GROUP..][..GROUP];
                let largest = w.iter().fold(0f32, |m, v| m.max(v.abs()));
                let s = largest / 127.0;
                let inv = if s > 0.0 { 1.0 / s } else { 0.0 };
                let mut sum = 0i32;
                for (i, &v) in w.iter().enumerate() {
                    let q = (v * inv).round().clamp(-127.0, 127.0) as i8;
                    sum += q as i32;
                    let input = b * GROUP + i;
                    packed[(p * inputs / 4 + input / 4) * PANEL * 4 + j * 4 + input % 4] = q;
                }
                let at = (p * blocks + b) * PANEL + j;
                scale[at] = s;
                scaled_sum[at] = s * sum as f32;
            }
        }
        Some(Int8Weights { packed, scale, scaled_sum, outputs, inputs })
    }

    /// `out[r] = input[r] · weightᵀ + bias` for `rows` rows, the work split over the thread pool.
    pub fn forward(&self, input: &[f32], rows: usize, bias: &[f32], out: &mut [f32]) {
        let (n, k) = (self.outputs, self.inputs);
        assert!(input.len() >= rows * k && out.len() >= rows * n && bias.len() >= n);
        input[..rows * k].par_chunks(TASK_ROWS * k).zip(out[..rows * n].par_chunks_mut(TASK_ROWS * n)).for_each_init(
            Quantized::default,
            |q, (input, out)| {
                q.quantize(input, k);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Int8Weights` exists only where the CPU has AVX-512 F/BW/VNNI; `q`
                // holds whole rows of `k` inputs and `out` the same rows of `n` outputs.
                unsafe {
                    vnni::rows(q, self, bias, out)
                }
            },
        );
    }
}

/// A task's rows as bytes, with each row's per-block scale and offset.
#[derive(Default)]
struct Quantized {
    bytes: Vec<u8>,
    /// `[row][block]`
    scale: Vec<f32>,
    low: Vec<f32>,
    rows: usize,
}

impl Quantized {
    fn quantize(&mut self, input: &[f32], k: usize) {
        let (rows, blocks) = (input.len() / k, k / GROUP);
        self.bytes.resize(rows * k, 0);
        self.scale.resize(rows * blocks, 0.0);
        self.low.resize(rows * blocks, 0.0);
        self.rows = rows;
        let blocks = input.chunks_exact(GROUP).zip(self.bytes.chunks_exact_mut(GROUP));
        for (i, (values, bytes)) in blocks.enumerate() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Quantized` is only used where the CPU has AVX-512 F/BW (`available`).
            let (s, low) = unsafe { vnni::quantize_block(values, bytes) };
            #[cfg(not(target_arch = "x86_64"))]
            let (s, low) = unreachable!("the int8 kernel runs on x86-64 only: {values:?} {bytes:?}");
            self.scale[i] = s;
            self.low[i] = low;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{Int8Weights, Quantized, GROUP, PANEL};

    /// Rows per tile: 8 × 2 integer accumulators, 2 weight registers and a broadcast.
    const TILE_ROWS: usize = 8;

    /// One block of `GROUP` activations as bytes (`a ≈ scale · q + low`, `q` rounded to the
    /// nearest), returning `(scale, low)`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn quantize_block(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
        debug_assert!(values.len() == GROUP && bytes.len() == GROUP);
        let v = values.as_ptr();
        let (mut low, mut high) = (_mm512_loadu_ps(v), _mm512_loadu_ps(v));
        for j in (16..GROUP).step_by(16) {
            let x = _mm512_loadu_ps(v.add(j));
            low = _mm512_min_ps(low, x);
            high = _mm512_max_ps(high, x);
        }
        let (low, high) = (_mm512_reduce_min_ps(low), _mm512_reduce_max_ps(high));
        let scale = (high - low) / 255.0;
        let inv = _mm512_set1_ps(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let low_v = _mm512_set1_ps(low);
        for j in (0..GROUP).step_by(16) {
            let q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v.add(j)), low_v), inv));
            // Kept in 0..=255 whatever rounding does at the ends.
            let q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), _mm512_set1_epi32(255));
            _mm_storeu_si128(bytes.as_mut_ptr().add(j) as *mut __m128i, _mm512_cvtepi32_epi8(q));
        }
        (scale, low)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn rows(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32]) {
        let (n, k, blocks) = (w.outputs, w.inputs, w.inputs / GROUP);
        let out = out.as_mut_ptr();
        for b in 0..blocks {
            for p in 0..n / PANEL {
                let panel = w.packed[(p * k + b * GROUP) * PANEL..].as_ptr();
                let at = (p * blocks + b) * PANEL;
                let scales = (w.scale[at..].as_ptr(), w.scaled_sum[at..].as_ptr());
                let bias = bias[p * PANEL..].as_ptr();
                let mut r = 0;
                while r < q.rows {
                    let tile = Tile {
                        a: q.bytes[r * k + b * GROUP..].as_ptr(),
                        k,
                        a_scale: q.scale[r * blocks + b..].as_ptr(),
                        a_low: q.low[r * blocks + b..].as_ptr(),
                        blocks,
                        panel,
                        scales,
                        bias: (b == 0).then_some(bias),
                        out: out.add(r * n + p * PANEL),
                        n,
                    };
                    match q.rows - r {
                        1 => tile.run::<1>(),
                        2 => tile.run::<2>(),
                        3 => tile.run::<3>(),
                        4 => tile.run::<4>(),
                        5 => tile.run::<5>(),
                        6 => tile.run::<6>(),
                        7 => tile.run::<7>(),
                        _ => tile.run::<TILE_ROWS>(),
                    }
                    r += TILE_ROWS;
                }
            }
        }
    }

    /// One block of `R` rows against one panel.
    struct Tile {
        /// The rows' bytes of this block, rows `k` apart.
        a: *const u8,
        k: usize,
        /// The rows' scale and offset for this block, rows `blocks` apart.
        a_scale: *const f32,
        a_low: *const f32,
        blocks: usize,
        panel: *const i8,
        /// The panel's scales and scaled sums for this block.
        scales: (*const f32, *const f32),
        /// The first block starts from the bias, the others from what `out` holds.
        bias: Option<*const f32>,
        /// The tile's first output, rows `n` apart.
        out: *mut f32,
        n: usize,
    }

    impl Tile {
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        #[inline]
        unsafe fn run<const R: usize>(&self) {
            let mut acc = [[_mm512_setzero_si512(); 2]; R];
            for step in 0..GROUP / 4 {
                let w = self.panel.add(step * PANEL * 4);
                let (w0, w1) = (_mm512_loadu_si512(w as *const _), _mm512_loadu_si512(w.add(64) as *const _));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_epi32((self.a.add(r * self.k + step * 4) as *const i32).read_unaligned());
                    acc[0] = _mm512_dpbusd_epi32(acc[0], x, w0);
                    acc[1] = _mm512_dpbusd_epi32(acc[1], x, w1);
                }
            }
            let (scale, sum) = self.scales;
            let (s0, s1) = (_mm512_loadu_ps(scale), _mm512_loadu_ps(scale.add(16)));
            let (m0, m1) = (_mm512_loadu_ps(sum), _mm512_loadu_ps(sum.add(16)));
            for (r, acc) in acc.iter().enumerate() {
                let o = self.out.add(r * self.n);
                let (base0, base1) = match self.bias {
                    Some(b) => (_mm512_loadu_ps(b), _mm512_loadu_ps(b.add(16))),
                    None => (_mm512_loadu_ps(o), _mm512_loadu_ps(o.add(16))),
                };
                let a_scale = _mm512_set1_ps(*self.a_scale.add(r * self.blocks));
                let a_low = _mm512_set1_ps(*self.a_low.add(r * self.blocks));
                // Σ (a_scale·q + a_low) · w_scale·p = a_scale·w_scale · Σ q·p + a_low · w_scale·Σ p
                let v0 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(acc[0]),
                    _mm512_mul_ps(a_scale, s0),
                    _mm512_fmadd_ps(a_low, m0, base0),
                );
                let v1 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(acc[1]),
                    _mm512_mul_ps(a_scale, s1),
                    _mm512_fmadd_ps(a_low, m1, base1),
                );
                _mm512_storeu_ps(o, v0);
                _mm512_storeu_ps(o.add(16), v1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_int8_layer_stays_close_to_the_exact_one() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        // Two blocks, rows not a multiple of a tile or a task, one constant block of inputs.
        let (rows, k, n) = (101, 2 * GROUP, 64);
        let value = |i: usize, salt: usize| (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 700.0;
        let weight: Vec<f32> = (0..n * k).map(|i| value(i, 1)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let mut input: Vec<f32> = (0..rows * k).map(|i| value(i, 3)).collect();
        input[5 * k..5 * k + GROUP].fill(0.25);
        let layer = Int8Weights::new(&weight, n, k).unwrap();
        let mut out = vec![0f32; rows * n];
        layer.forward(&input, rows, &bias, &mut out);
        for r in 0..rows {
            let exact: Vec<f64> = (0..n)
                .map(|o| {
                    bias[o] as f64 + (0..k).map(|j| input[r * k + j] as f64 * weight[o * k + j] as f64).sum::<f64>()
                })
                .collect();
            // Quantization error of a dot product of 256 terms of ±0.7: well under 1 % of its size.
            let size = (exact.iter().map(|e| e * e).sum::<f64>() / n as f64).sqrt();
            for o in 0..n {
                let err = (out[r * n + o] as f64 - exact[o]).abs();
                assert!(err < 0.01 * size + 1e-3, "row {r} output {o}: {} against {}", out[r * n + o], exact[o]);
            }
        }
        // A row's result does not depend on the rows beside it.
        let mut alone = vec![0f32; n];
        layer.forward(&input[7 * k..8 * k], 1, &bias, &mut alone);
        assert_eq!(alone, out[7 * n..8 * n]);
    }
}
