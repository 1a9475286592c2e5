//! Dense layers in 8-bit integers: `vpdpbusd` (AVX-512 VNNI, 64 byte pairs per instruction;
//! AVX-VNNI, 32), `vpmaddwd` (AVX2 alone, 16 pairs of the same bytes widened to 16 bits) or
//! `sdot` (ARM dot products, 16) where an f32 FMA multiplies 16, 8 or 4 values.
//!
//! Both sides are quantized per block of `GROUP` inputs, which keeps the vectors within the
//! embedder's tolerance (cosine ≥ 0.999 to sentence-transformers'); one scale per output row
//! alone did not (a few large weights and activations set the scale for the whole row):
//! - weights: signed, symmetric, one scale per output and block, quantized once at load;
//! - activations: unsigned with an offset (`a ≈ scale · q + low`, `q` in 0..=255), per row and
//!   block, quantized as each layer runs. The offset's share, `low · Σ w`, is a precomputed
//!   per-output sum, so the integer products need no correction inside the loop.
//!
//! Every kernel set computes the same exact integer per (row, output, block) and ends it with
//! the same two fused multiply-adds (`plain::finish`), so the vectors are the same bits on
//! every CPU that runs int8. A row's result depends only on that row, so batching does not
//! change vectors either.

use quire_simd::KernelSet;
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
    /// The sums themselves (ARM's signed products take back 128 of each).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    sum: Vec<i32>,
    /// For the AVX2 kernel alone (`vpmaddwd` multiplies 16-bit words): the same integers
    /// widened, panels of `PANEL` outputs, inside a panel the inputs 2 at a time, inside those
    /// each output's 2 words. Empty where another set runs.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    wide: Vec<i16>,
    outputs: usize,
    /// Inputs in whole blocks: the caller's rows of `given` values, the last block filled
    /// out with zeros (zero weights there, so the padding adds nothing).
    inputs: usize,
    given: usize,
}

/// The int8 kernels in use: those of the process's kernel set (`QUIRE_KERNELS` may ask for
/// a narrower one), where that set has them.
fn kernels() -> Option<KernelSet> {
    kernels_of(KernelSet::in_use())
}

/// The int8 kernels of `set`, where it has them: the VNNI sets', AVX2's and ARM's dot products
/// (with i8mm too: the embedder's layers are matrix-vector shaped per token group, which `sdot`
/// by element serves). AVX2's 8-bit product `vpmaddubsw` saturates its sums of two (2 · 255 ·
/// 127 > 32,767), so its kernel multiplies the same integers as 16-bit words (`vpmaddwd`,
/// exact). NEON without dot products stays in f32.
fn kernels_of(set: KernelSet) -> Option<KernelSet> {
    match set {
        KernelSet::Avx512Vnni | KernelSet::AvxVnni | KernelSet::Avx2 | KernelSet::NeonDotprod => Some(set),
        KernelSet::NeonI8mm => Some(KernelSet::NeonDotprod),
        _ => None,
    }
}

/// Whether this CPU runs the int8 layers. Checked once.
pub fn available() -> bool {
    kernels().is_some()
}

impl Int8Weights {
    /// The layer's row-major `[out][in]` weights quantized, or `None` where the kernel does not
    /// run here or the shape does not fit its blocks.
    pub fn new(weight: &[f32], outputs: usize, inputs: usize) -> Option<Int8Weights> {
        let set = kernels()?;
        Int8Weights::quantized(weight, outputs, inputs, set == KernelSet::Avx2)
    }

    /// The weights quantized whatever the CPU, where the outputs fill whole panels (any number
    /// of inputs: the last block is padded); with the AVX2 kernel's words where `wide` asks.
    fn quantized(weight: &[f32], outputs: usize, given: usize, wide: bool) -> Option<Int8Weights> {
        if !outputs.is_multiple_of(PANEL) || given == 0 {
            return None;
        }
        let inputs = given.next_multiple_of(GROUP);
        let blocks = inputs / GROUP;
        let mut packed = vec![0i8; outputs * inputs];
        let mut scale = vec![0f32; outputs * blocks];
        let mut scaled_sum = vec![0f32; outputs * blocks];
        let mut sums = vec![0i32; outputs * blocks];
        let mut words = vec![0i16; if wide { outputs * inputs } else { 0 }];
        for o in 0..outputs {
            let (p, j) = (o / PANEL, o % PANEL);
            for b in 0..blocks {
                let mut w = [0f32; GROUP];
                let real = given.min((b + 1) * GROUP) - b * GROUP;
                w[..real].copy_from_slice(&weight[o * given + b * GROUP..][..real]);
                let largest = w.iter().fold(0f32, |m, v| m.max(v.abs()));
                let s = largest / 127.0;
                let inv = if s > 0.0 { 1.0 / s } else { 0.0 };
                let mut sum = 0i32;
                for (i, &v) in w.iter().enumerate() {
                    let q = (v * inv).round().clamp(-127.0, 127.0) as i8;
                    sum += q as i32;
                    let input = b * GROUP + i;
                    packed[(p * inputs / 4 + input / 4) * PANEL * 4 + j * 4 + input % 4] = q;
                    if wide {
                        words[(p * inputs / 2 + input / 2) * PANEL * 2 + j * 2 + input % 2] = q as i16;
                    }
                }
                let at = (p * blocks + b) * PANEL + j;
                scale[at] = s;
                scaled_sum[at] = s * sum as f32;
                sums[at] = sum;
            }
        }
        Some(Int8Weights { packed, scale, scaled_sum, sum: sums, wide: words, outputs, inputs, given })
    }

    /// `out[r] = input[r] · weightᵀ + bias` for `rows` rows, the work split over the thread pool.
    pub fn forward(&self, input: &[f32], rows: usize, bias: &[f32], out: &mut [f32]) {
        let set = kernels().expect("int8 weights exist only where int8 kernels run");
        self.forward_by(set, input, rows, bias, out)
    }

    /// `forward` by the kernels of `set`, which this CPU must run.
    fn forward_by(&self, set: KernelSet, input: &[f32], rows: usize, bias: &[f32], out: &mut [f32]) {
        let (n, k) = (self.outputs, self.given);
        assert!(input.len() >= rows * k && out.len() >= rows * n && bias.len() >= n);
        input[..rows * k].par_chunks(TASK_ROWS * k).zip(out[..rows * n].par_chunks_mut(TASK_ROWS * n)).for_each_init(
            Quantized::default,
            |q, (input, out)| {
                q.quantize(set, input, k, self.inputs);
                // SAFETY (each arm): `set` is one this CPU runs; `q` holds whole rows of `k`
                // inputs and `out` the same rows of `n` outputs.
                match set {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `set` is one this CPU runs; `q`, `out` and the weights hold the rows' blocks.
                    KernelSet::Avx512Vnni => unsafe { vnni::rows(q, self, bias, out) },
                    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
                    KernelSet::AvxVnni => match KernelSet::avxvnni_encoding() {
                        // SAFETY: as above; AVX-VNNI (VEX encoding) is what this CPU has.
                        quire_simd::VnniEncoding::Vex => unsafe { ymm_vex::rows(q, self, bias, out) },
                        // SAFETY: as above; AVX-VNNI in its EVEX encoding is what this CPU has.
                        quire_simd::VnniEncoding::Evex => unsafe { ymm_evex::rows(q, self, bias, out) },
                    },
                    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
                    // SAFETY: as above; AVX2 is the build's baseline.
                    KernelSet::Avx2 => unsafe { avx2::rows(q, self, bias, out) },
                    #[cfg(target_arch = "aarch64")]
                    // SAFETY: as above; this CPU has dot products.
                    KernelSet::NeonDotprod => unsafe { neon::rows(q, self, bias, out) },
                    _ => plain::rows(q, self, bias, out),
                }
            },
        );
    }
}

/// A task's rows as bytes, with each row's per-block scale and offset.
#[derive(Default)]
struct Quantized {
    bytes: Vec<u8>,
    /// The bytes widened to 16-bit words, for the AVX2 kernel alone.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    wide: Vec<u16>,
    /// `[row][block]`
    scale: Vec<f32>,
    low: Vec<f32>,
    rows: usize,
}

impl Quantized {
    /// `input`'s rows of `given` values quantized block by block into rows of `k` bytes (a
    /// whole number of blocks; a part block is filled out with zeros first), by `set`'s vector
    /// instructions where it has them (the same bytes as `plain::quantize_block`).
    fn quantize(&mut self, set: KernelSet, input: &[f32], given: usize, k: usize) {
        let (rows, blocks) = (input.len() / given, k / GROUP);
        self.bytes.resize(rows * k, 0);
        self.scale.resize(rows * blocks, 0.0);
        self.low.resize(rows * blocks, 0.0);
        self.rows = rows;
        let mut filled = [0f32; GROUP];
        let values = input.chunks_exact(given).flat_map(|row| {
            (0..blocks).map(move |b| {
                let real = given.min((b + 1) * GROUP) - b * GROUP;
                (&row[b * GROUP..][..real], real)
            })
        });
        for (i, ((values, real), bytes)) in values.zip(self.bytes.chunks_exact_mut(GROUP)).enumerate() {
            let values = if real == GROUP {
                values
            } else {
                filled[..real].copy_from_slice(values);
                filled[real..].fill(0.0);
                &filled[..]
            };
            let (s, low) = match set {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `set` is one this CPU runs; both blocks hold `GROUP` values.
                KernelSet::Avx512Vnni => unsafe { vnni::quantize_block(values, bytes) },
                #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
                // SAFETY: as above; AVX2 is the build's baseline.
                KernelSet::AvxVnni | KernelSet::Avx2 => unsafe { avx2::quantize_block(values, bytes) },
                #[cfg(target_arch = "aarch64")]
                // SAFETY: as above; this CPU has dot products.
                KernelSet::NeonDotprod => unsafe { neon::quantize_block(values, bytes) },
                _ => plain::quantize_block(values, bytes),
            };
            self.scale[i] = s;
            self.low[i] = low;
        }
        if set == KernelSet::Avx2 {
            self.wide.clear();
            self.wide.extend(self.bytes.iter().map(|&b| b as u16));
        }
    }
}

/// The arithmetic every kernel set shares, one value at a time: the reference the vector
/// kernels are tested against, and the kernel of sets without their own.
mod plain {
    use super::{Int8Weights, Quantized, GROUP, PANEL};

    /// One block of `GROUP` activations as bytes (`a ≈ scale · q + low`, `q` rounded to the
    /// nearest, ties to even), returning `(scale, low)`.
    pub fn quantize_block(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
        debug_assert!(values.len() == GROUP && bytes.len() == GROUP);
        let low = values.iter().copied().fold(f32::INFINITY, f32::min);
        let high = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let scale = (high - low) / 255.0;
        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        for (b, &v) in bytes.iter_mut().zip(values) {
            // Kept in 0..=255 whatever rounding does at the ends.
            *b = (((v - low) * inv).round_ties_even() as i32).clamp(0, 255) as u8;
        }
        (scale, low)
    }

    /// One output's value from its block's exact integer: `base + a_low·(w_scale·Σw)` first,
    /// then `+ integer·(a_scale·w_scale)`, each a fused multiply-add.
    #[inline(always)]
    pub fn finish(integer: i32, a_scale: f32, w_scale: f32, a_low: f32, scaled_sum: f32, base: f32) -> f32 {
        (integer as f32).mul_add(a_scale * w_scale, a_low.mul_add(scaled_sum, base))
    }

    /// Weight `input` of output `o`'s, from the packed panels.
    fn weight(w: &Int8Weights, o: usize, input: usize) -> i32 {
        let (p, j) = (o / PANEL, o % PANEL);
        w.packed[(p * w.inputs / 4 + input / 4) * PANEL * 4 + j * 4 + input % 4] as i32
    }

    pub fn rows(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32]) {
        let (n, k, blocks) = (w.outputs, w.inputs, w.inputs / GROUP);
        for r in 0..q.rows {
            for o in 0..n {
                let mut v = bias[o];
                for b in 0..blocks {
                    let integer: i32 =
                        (b * GROUP..(b + 1) * GROUP).map(|i| q.bytes[r * k + i] as i32 * weight(w, o, i)).sum();
                    let at = (o / PANEL * blocks + b) * PANEL + o % PANEL;
                    let (a_scale, a_low) = (q.scale[r * blocks + b], q.low[r * blocks + b]);
                    v = finish(integer, a_scale, w.scale[at], a_low, w.scaled_sum[at], v);
                }
                out[r * n + o] = v;
            }
        }
    }
}

/// AVX-512 VNNI: tiles of 8 rows × 32 outputs.
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

/// Where a tile of the 256-bit and ARM kernels goes: rows `r..`, block `b`, outputs
/// `16·half..16·half + 16` of panel `p`.
#[derive(Clone, Copy)]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
struct HalfPanel {
    r: usize,
    b: usize,
    p: usize,
    half: usize,
}

/// Every tile of up to `tile_rows` rows × 16 outputs, blocks in order (a tile of block b > 0
/// adds to what block b − 1 left in `out`): `each(where, rows)`.
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
fn each_half_panel(q: &Quantized, w: &Int8Weights, tile_rows: usize, mut each: impl FnMut(HalfPanel, usize)) {
    for b in 0..w.inputs / GROUP {
        for p in 0..w.outputs / PANEL {
            for half in 0..2 {
                for r in (0..q.rows).step_by(tile_rows) {
                    each(HalfPanel { r, b, p, half }, (q.rows - r).min(tile_rows));
                }
            }
        }
    }
}

/// The 256-bit VNNI kernels, in one of the instruction's two encodings: tiles of 6 rows × 16
/// outputs (12 accumulators, 2 weight registers and a broadcast of the 16 registers).
macro_rules! ymm_vnni {
    ($name:ident, $features:literal, $dpbusd:ident) => {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
        mod $name {
            use std::arch::x86_64::*;

            use super::{HalfPanel, Int8Weights, Quantized, GROUP, PANEL};

            use super::avx2::TILE_ROWS;

            /// The caller's CPU has this module's features.
            pub unsafe fn rows(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32]) {
                super::avx2::each_tile(
                    q,
                    w,
                    bias,
                    out,
                    [tile::<1>, tile::<2>, tile::<3>, tile::<4>, tile::<5>, tile::<TILE_ROWS>],
                )
            }

            /// Rows `r..r + R`, block `b`, outputs `16·half..` of panel `p`; the first block
            /// starts from the bias, the others from what `out` holds.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn tile<const R: usize>(q: &Quantized, w: &Int8Weights, bias: &[f32], out: *mut f32, at: HalfPanel) {
                let HalfPanel { r, b, p, half } = at;
                let k = w.inputs;
                let panel = w.packed.as_ptr().add((p * k + b * GROUP) * PANEL + 64 * half);
                let a = q.bytes.as_ptr().add(r * k + b * GROUP);
                let mut acc = [[_mm256_setzero_si256(); 2]; R];
                for step in 0..GROUP / 4 {
                    let wp = panel.add(step * PANEL * 4);
                    let (w0, w1) =
                        (_mm256_loadu_si256(wp as *const __m256i), _mm256_loadu_si256(wp.add(32) as *const __m256i));
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let x = _mm256_set1_epi32((a.add(i * k + step * 4) as *const i32).read_unaligned());
                        acc[0] = $dpbusd(acc[0], x, w0);
                        acc[1] = $dpbusd(acc[1], x, w1);
                    }
                }
                super::avx2::finish(&acc, q, w, bias, out, at);
            }
        }
    };
}

ymm_vnni!(ymm_vex, "avxvnni", _mm256_dpbusd_avx_epi32);

/// Any x86-64-v3 CPU: quantizing activations 8 at a time and ending a tile (the 256-bit VNNI
/// kernels' too), and the AVX2 kernel: tiles of 6 rows × 16 outputs as in the VNNI kernels,
/// the bytes of both sides widened to 16-bit words so that `vpmaddwd` multiplies them exactly
/// (2 · 255 · 127 fits its 32-bit sums), each pair's sum added to the row's accumulators: the
/// same integers as `vpdpbusd`'s.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{HalfPanel, Int8Weights, Quantized, GROUP, PANEL};

    /// Rows per tile: 6 × 2 integer accumulators, 2 weight registers and a broadcast.
    pub const TILE_ROWS: usize = 6;

    pub unsafe fn rows(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32]) {
        debug_assert!(w.wide.len() == w.packed.len() && q.wide.len() == q.bytes.len());
        each_tile(q, w, bias, out, [tile::<1>, tile::<2>, tile::<3>, tile::<4>, tile::<5>, tile::<TILE_ROWS>])
    }

    /// A tile of rows `at.r..at.r + R` (the 256-bit kernels' and this one's).
    pub type Tile = unsafe fn(&Quantized, &Int8Weights, &[f32], *mut f32, HalfPanel);

    /// Every tile of the layer, blocks in order, one of `r` rows by `tiles[r - 1]`. The tiles
    /// must run on this CPU (the caller's contract).
    pub unsafe fn each_tile(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32], tiles: [Tile; TILE_ROWS]) {
        let out = out.as_mut_ptr();
        // SAFETY: the caller's contract; `at` is in bounds.
        super::each_half_panel(q, w, TILE_ROWS, |at, rows| unsafe { tiles[rows - 1](q, w, bias, out, at) });
    }

    /// Rows `r..r + R`, block `b`, outputs `16·half..` of panel `p`, 2 inputs a step.
    #[inline]
    unsafe fn tile<const R: usize>(q: &Quantized, w: &Int8Weights, bias: &[f32], out: *mut f32, at: HalfPanel) {
        let HalfPanel { r, b, p, half } = at;
        let k = w.inputs;
        let panel = w.wide.as_ptr().add((p * k + b * GROUP) * PANEL + 32 * half);
        let a = q.wide.as_ptr().add(r * k + b * GROUP);
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        for step in 0..GROUP / 2 {
            let wp = panel.add(step * PANEL * 2);
            let (w0, w1) = (_mm256_loadu_si256(wp as *const __m256i), _mm256_loadu_si256(wp.add(16) as *const __m256i));
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_set1_epi32((a.add(i * k + step * 2) as *const i32).read_unaligned());
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(x, w0));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(x, w1));
            }
        }
        finish(&acc, q, w, bias, out, at);
    }

    /// A tile's exact integers into its outputs, `plain::finish`'s two fused multiply-adds 8
    /// outputs at a time; the first block starts from the bias, the others from what `out`
    /// holds.
    #[inline(always)]
    pub unsafe fn finish<const R: usize>(
        acc: &[[__m256i; 2]; R],
        q: &Quantized,
        w: &Int8Weights,
        bias: &[f32],
        out: *mut f32,
        at: HalfPanel,
    ) {
        let HalfPanel { r, b, p, half } = at;
        let (n, blocks) = (w.outputs, w.inputs / GROUP);
        let at = (p * blocks + b) * PANEL + 16 * half;
        let s = [0, 8].map(|j| _mm256_loadu_ps(w.scale.as_ptr().add(at + j)));
        let m = [0, 8].map(|j| _mm256_loadu_ps(w.scaled_sum.as_ptr().add(at + j)));
        for (i, acc) in acc.iter().enumerate() {
            let o = out.add((r + i) * n + p * PANEL + 16 * half);
            let from = if b == 0 { bias.as_ptr().add(p * PANEL + 16 * half) } else { o as *const f32 };
            let a_scale = _mm256_set1_ps(q.scale[(r + i) * blocks + b]);
            let a_low = _mm256_set1_ps(q.low[(r + i) * blocks + b]);
            for j in 0..2 {
                let base = _mm256_loadu_ps(from.add(8 * j));
                let v = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(acc[j]),
                    _mm256_mul_ps(a_scale, s[j]),
                    _mm256_fmadd_ps(a_low, m[j], base),
                );
                _mm256_storeu_ps(o.add(8 * j), v);
            }
        }
    }

    /// `plain::quantize_block`'s bytes: the same rounding (`cvtps` rounds half to even), the
    /// clamp to 0..=255 by the packs' saturation.
    pub unsafe fn quantize_block(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
        debug_assert!(values.len() == GROUP && bytes.len() == GROUP);
        let v = values.as_ptr();
        let (mut low, mut high) = (_mm256_loadu_ps(v), _mm256_loadu_ps(v));
        for j in (8..GROUP).step_by(8) {
            let x = _mm256_loadu_ps(v.add(j));
            low = _mm256_min_ps(low, x);
            high = _mm256_max_ps(high, x);
        }
        let mut lanes = [[0f32; 8]; 2];
        _mm256_storeu_ps(lanes[0].as_mut_ptr(), low);
        _mm256_storeu_ps(lanes[1].as_mut_ptr(), high);
        let low = lanes[0].iter().copied().fold(f32::INFINITY, f32::min);
        let high = lanes[1].iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let scale = (high - low) / 255.0;
        let inv = _mm256_set1_ps(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let low_v = _mm256_set1_ps(low);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for j in (0..GROUP).step_by(32) {
            let q: [__m256i; 4] = std::array::from_fn(|i| {
                _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v.add(j + 8 * i)), low_v), inv))
            });
            let words = [_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3])];
            let packed = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words[0], words[1]), order);
            _mm256_storeu_si256(bytes.as_mut_ptr().add(j) as *mut __m256i, packed);
        }
        (scale, low)
    }
}
ymm_vnni!(ymm_evex, "avx512vnni,avx512vl", _mm256_dpbusd_epi32);

/// ARM with dot products: tiles of 4 rows × 16 outputs (16 accumulators). `sdot` multiplies
/// signed bytes, so the activations go in as `q − 128` and each output takes back
/// `128 · Σ w` (exact): the same integer as `vpdpbusd`'s.
#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::{HalfPanel, Int8Weights, Quantized, GROUP, PANEL};
    use quire_simd::neon::sdot_lane;

    const TILE_ROWS: usize = 4;

    /// `plain::quantize_block`'s bytes: `fcvtns` rounds half to even, the narrowing moves
    /// saturate to 0..=255.
    pub unsafe fn quantize_block(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
        debug_assert!(values.len() == GROUP && bytes.len() == GROUP);
        let v = values.as_ptr();
        let (mut low, mut high) = (vld1q_f32(v), vld1q_f32(v));
        for j in (4..GROUP).step_by(4) {
            let x = vld1q_f32(v.add(j));
            low = vminq_f32(low, x);
            high = vmaxq_f32(high, x);
        }
        let (low, high) = (vminvq_f32(low), vmaxvq_f32(high));
        let scale = (high - low) / 255.0;
        let inv = vdupq_n_f32(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let low_v = vdupq_n_f32(low);
        for j in (0..GROUP).step_by(16) {
            let q: [int32x4_t; 4] =
                std::array::from_fn(|i| vcvtnq_s32_f32(vmulq_f32(vsubq_f32(vld1q_f32(v.add(j + 4 * i)), low_v), inv)));
            let words = [
                vcombine_u16(vqmovun_s32(q[0]), vqmovun_s32(q[1])),
                vcombine_u16(vqmovun_s32(q[2]), vqmovun_s32(q[3])),
            ];
            vst1q_u8(bytes.as_mut_ptr().add(j), vcombine_u8(vqmovn_u16(words[0]), vqmovn_u16(words[1])));
        }
        (scale, low)
    }

    #[target_feature(enable = "dotprod")]
    pub unsafe fn rows(q: &Quantized, w: &Int8Weights, bias: &[f32], out: &mut [f32]) {
        let out = out.as_mut_ptr();
        super::each_half_panel(q, w, TILE_ROWS, |at, rows| {
            // SAFETY: the CPU has dot products (the caller's contract); `at` is in bounds.
            unsafe {
                match rows {
                    1 => tile::<1>(q, w, bias, out, at),
                    2 => tile::<2>(q, w, bias, out, at),
                    3 => tile::<3>(q, w, bias, out, at),
                    _ => tile::<TILE_ROWS>(q, w, bias, out, at),
                }
            }
        });
    }

    /// Rows `r..r + R`, block `b`, outputs `16·half..` of panel `p`, as in the 256-bit
    /// kernels.
    #[target_feature(enable = "dotprod")]
    #[inline]
    unsafe fn tile<const R: usize>(q: &Quantized, w: &Int8Weights, bias: &[f32], out: *mut f32, at: HalfPanel) {
        let HalfPanel { r, b, p, half } = at;
        let (n, k, blocks) = (w.outputs, w.inputs, w.inputs / GROUP);
        let panel = w.packed.as_ptr().add((p * k + b * GROUP) * PANEL + 64 * half);
        let a = q.bytes.as_ptr().add(r * k + b * GROUP);
        let flip = vdupq_n_u8(0x80);
        let mut acc = [[vdupq_n_s32(0); 4]; R];
        // 16 inputs at a time: each row's 16 bytes, then four steps of 4 inputs.
        for group in 0..GROUP / 16 {
            let x: [int8x16_t; R] =
                std::array::from_fn(|i| vreinterpretq_s8_u8(veorq_u8(vld1q_u8(a.add(i * k + 16 * group)), flip)));
            macro_rules! step {
                ($lane:literal) => {{
                    let wp = panel.add((4 * group + $lane) * PANEL * 4);
                    let ws = [0, 16, 32, 48].map(|j| vld1q_s8(wp.add(j)));
                    for (i, acc) in acc.iter_mut().enumerate() {
                        for j in 0..4 {
                            acc[j] = sdot_lane::<$lane>(acc[j], ws[j], x[i]);
                        }
                    }
                }};
            }
            step!(0);
            step!(1);
            step!(2);
            step!(3);
        }
        let at = (p * blocks + b) * PANEL + 16 * half;
        let back = [0, 4, 8, 12].map(|j| vshlq_n_s32::<7>(vld1q_s32(w.sum.as_ptr().add(at + j))));
        let s = [0, 4, 8, 12].map(|j| vld1q_f32(w.scale.as_ptr().add(at + j)));
        let m = [0, 4, 8, 12].map(|j| vld1q_f32(w.scaled_sum.as_ptr().add(at + j)));
        for (i, acc) in acc.iter().enumerate() {
            let o = out.add((r + i) * n + p * PANEL + 16 * half);
            let from = if b == 0 { bias.as_ptr().add(p * PANEL + 16 * half) } else { o as *const f32 };
            let a_scale = vdupq_n_f32(q.scale[(r + i) * blocks + b]);
            let a_low = vdupq_n_f32(q.low[(r + i) * blocks + b]);
            for j in 0..4 {
                let integer = vaddq_s32(acc[j], back[j]);
                let inner = vfmaq_f32(vld1q_f32(from.add(4 * j)), a_low, m[j]);
                vst1q_f32(o.add(4 * j), vfmaq_f32(inner, vcvtq_f32_s32(integer), vmulq_f32(a_scale, s[j])));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_block_of_inputs_is_the_whole_block_filled_out_with_zeros() {
        // 200 inputs: one whole block and 72 of the next. The same layer given 256 inputs, the
        // last 56 weights and values zero, gives the same bits, by every kernel set this CPU
        // runs (AVX2's words too) and by the plain arithmetic.
        let (rows, k, n) = (37, 200usize, 64);
        let wide = k.next_multiple_of(GROUP);
        let value = |i: usize, salt: usize| (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 700.0;
        let weight: Vec<f32> = (0..n * k).map(|i| value(i, 1)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let input: Vec<f32> = (0..rows * k).map(|i| value(i, 3)).collect();
        let widen = |v: &[f32]| -> Vec<f32> {
            v.chunks_exact(k).flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0.0, wide - k))).collect()
        };
        let (part, whole) = (
            Int8Weights::quantized(&weight, n, k, true).unwrap(),
            Int8Weights::quantized(&widen(&weight), n, wide, true).unwrap(),
        );
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let sets = KernelSet::runnable().into_iter().filter_map(kernels_of).chain([KernelSet::Portable]);
        for set in sets {
            let (mut out, mut expected) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
            part.forward_by(set, &input, rows, &bias, &mut out);
            whole.forward_by(set, &widen(&input), rows, &bias, &mut expected);
            assert_eq!(bits(&out), bits(&expected), "{} int8 kernels", set.name());
            assert!(out.iter().all(|v| v.is_finite()) && out.iter().any(|&v| v != 0.0));
        }
    }

    #[test]
    fn the_int8_layer_stays_close_to_the_exact_one() {
        if !available() {
            eprintln!("skipped: this CPU runs no int8 kernel (NEON without dot products)");
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

    /// Every int8 kernel set this CPU runs gives the plain arithmetic's bits (AVX-512 VNNI, the
    /// 256-bit VNNI kernels and AVX2's 16-bit words on x86, `sdot` on ARM), and those are the bits recorded on
    /// x86-64 (2026-12-03): a passage's vector is the same on every CPU that runs int8.
    #[test]
    fn every_int8_kernel_set_gives_the_same_bits() {
        let (rows, k, n) = (13, 3 * GROUP, 2 * PANEL);
        let value = |i: usize, salt: usize| (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 700.0;
        let weight: Vec<f32> = (0..n * k).map(|i| value(i, 1)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let mut input: Vec<f32> = (0..rows * k).map(|i| value(i, 3) * if i % 7 == 0 { 9.0 } else { 1.0 }).collect();
        input[2 * k..2 * k + GROUP].fill(-0.5);
        let layer = Int8Weights::quantized(&weight, n, k, true).unwrap();
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut plain = vec![0f32; rows * n];
        layer.forward_by(KernelSet::Portable, &input, rows, &bias, &mut plain);
        let mut ran = Vec::new();
        for set in KernelSet::runnable().into_iter().filter_map(kernels_of) {
            let mut out = vec![f32::NAN; rows * n];
            layer.forward_by(set, &input, rows, &bias, &mut out);
            assert_eq!(bits(&out), bits(&plain), "{} int8 kernels", set.name());
            ran.push(set.name());
        }
        eprintln!("int8 kernel sets checked against the plain arithmetic: {ran:?}");
        let digest =
            bits(&plain).iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        assert_eq!(digest, 10012433555042800838, "the int8 layer's bits differ from x86-64's");
    }
}
