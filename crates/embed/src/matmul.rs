//! `out = input · weightᵀ + bias` for the encoder's dense layers, with the kernel picked at run
//! time. The weights are packed once at load so each step reads 32 outputs' weights
//! contiguously; on CPUs with AVX-512, tiles of 6 rows × 32 outputs (12 accumulators of 16
//! lanes), on other x86-64 CPUs (AVX2 and FMA, the build's baseline) tiles of 6 rows × 16
//! outputs (12 of 8 lanes); elsewhere `gemm` (candle's CPU kernel). Where asked for and the CPU
//! runs int8 kernels, the layer runs in 8-bit integers instead (`int8`).

// The packed kernels are x86-64's; elsewhere `gemm` runs every layer and the packing lies idle.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use crate::int8::Int8Weights;

/// Outputs per packed panel (two 16-lane registers).
const PANEL: usize = 32;
/// Rows per tile: 6 × 2 accumulators + 2 weight registers + 1 broadcast fit in 32 registers
/// with room for the loads ahead (AVX-512), and in AVX2's 16.
const TILE_ROWS: usize = 6;
/// Rows per task: a task's inputs stay in the core's L2 while every panel passes over them.
const TASK_ROWS: usize = 48;

pub struct Dense {
    /// Row-major `[out][in]`, as stored in the checkpoint.
    weight: Vec<f32>,
    /// The weights in panels of `PANEL` outputs, input-major inside a panel; only where the
    /// AVX-512 kernel runs.
    packed: Option<Vec<f32>>,
    /// The weights in 8-bit integers; where asked for and the CPU runs the int8 kernel.
    int8: Option<Int8Weights>,
    pub bias: Vec<f32>,
    pub outputs: usize,
    pub inputs: usize,
}

impl Dense {
    /// A layer from row-major `[out][in]` weights; in 8-bit integers where `int8` asks for it
    /// and this CPU and the layer's shape allow it, else in f32.
    pub fn new(weight: Vec<f32>, bias: Vec<f32>, outputs: usize, inputs: usize, int8: bool) -> Dense {
        let int8 = if int8 { Int8Weights::new(&weight, outputs, inputs) } else { None };
        Dense::with_kernel(weight, bias, outputs, inputs, cfg!(target_arch = "x86_64") && int8.is_none(), int8)
    }

    fn with_kernel(
        weight: Vec<f32>,
        bias: Vec<f32>,
        outputs: usize,
        inputs: usize,
        wide: bool,
        int8: Option<Int8Weights>,
    ) -> Dense {
        let packed = (wide && outputs.is_multiple_of(PANEL)).then(|| {
            let mut packed = Vec::new();
            pack(outputs, inputs, |o, i| weight[o * inputs + i], &mut packed);
            packed
        });
        Dense { weight, packed, int8, bias, outputs, inputs }
    }

    /// `out[r] = input[r] · weightᵀ + bias` for `rows` rows, the work split over the thread pool;
    /// in f32 where `exact` asks for it even if the layer has int8 weights.
    pub fn forward(&self, input: &[f32], rows: usize, out: &mut [f32], exact: bool) {
        let (n, k) = (self.outputs, self.inputs);
        assert!(input.len() >= rows * k && out.len() >= rows * n);
        if let Some(int8) = self.int8.as_ref().filter(|_| !exact) {
            return int8.forward(input, rows, &self.bias, out);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(packed) = &self.packed {
            input[..rows * k].par_chunks(TASK_ROWS * k).zip(out[..rows * n].par_chunks_mut(TASK_ROWS * n)).for_each(
                |(input, out)| {
                    // SAFETY: AVX-512F where `avx512()` says the CPU has it, else AVX2 and FMA
                    // (the build's baseline); the slices hold whole rows of `k` inputs and `n`
                    // outputs.
                    unsafe {
                        if avx512() {
                            avx512::rows(input, packed, &self.bias, k, n, out)
                        } else {
                            avx2::rows(input, packed, &self.bias, k, n, out)
                        }
                    }
                },
            );
            return;
        }
        for row in out.chunks_mut(n).take(rows) {
            row.copy_from_slice(&self.bias);
        }
        // SAFETY: out is rows×n, input rows×k, weight n×k, all row-major and within their buffers.
        unsafe {
            gemm(
                rows,
                n,
                k,
                out.as_mut_ptr(),
                1,
                n as isize,
                true,
                input.as_ptr(),
                1,
                k as isize,
                self.weight.as_ptr(),
                k as isize,
                1,
                1.0,
                1.0,
                false,
                false,
                false,
                Parallelism::Rayon(0),
            );
        }
    }
}

/// Whether to run the AVX-512 kernels: the CPU has AVX-512F, and `QUIRE_KERNELS` (the
/// decoder's switch too) does not ask for a narrower set, for side-by-side figures. Checked
/// once.
pub fn avx512() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| quire_simd::KernelSet::best() && detect_avx512())
}

fn detect_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{PANEL, TILE_ROWS};

    /// Inputs per block: 32 outputs' weights of a block (16 KiB) and 48 rows' inputs (24 KiB)
    /// fit a 48 KiB L1 together.
    const K_BLOCK: usize = 128;

    /// Every row of `input` (rows of `k`) against every panel, into `out` (rows of `n`).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn rows(input: &[f32], packed: &[f32], bias: &[f32], k: usize, n: usize, out: &mut [f32]) {
        product(input.as_ptr(), k, input.len() / k, k, packed, bias, n, out.as_mut_ptr(), n);
    }

    /// `out[r][o] = bias[o] + Σᵢ a[r][i] · w(o, i)` for `rows` rows of `a` (`k` inputs, rows
    /// `a_stride` apart) and `n` outputs (a multiple of `PANEL`) packed as `Dense` packs them,
    /// into rows of `out` `out_stride` apart. The caller guarantees the bounds.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn product(
        a: *const f32,
        a_stride: usize,
        rows: usize,
        k: usize,
        packed: &[f32],
        bias: &[f32],
        n: usize,
        out: *mut f32,
        out_stride: usize,
    ) {
        debug_assert!(n.is_multiple_of(PANEL) && packed.len() >= n * k && bias.len() >= n);
        // Inputs a block at a time, so a panel's block and the rows' block stay in L1 while
        // every tile passes over them.
        let mut k0 = 0;
        while k0 < k {
            let kb = (k - k0).min(K_BLOCK);
            let first = k0 == 0;
            for p in 0..n / PANEL {
                let panel = packed[(p * k + k0) * PANEL..].as_ptr();
                let bias = bias[p * PANEL..].as_ptr();
                let mut r = 0;
                while r < rows {
                    let a = a.add(r * a_stride + k0);
                    let o = out.add(r * out_stride + p * PANEL);
                    match rows - r {
                        1 => tile::<1>(a, a_stride, kb, panel, bias, first, o, out_stride),
                        2 => tile::<2>(a, a_stride, kb, panel, bias, first, o, out_stride),
                        3 => tile::<3>(a, a_stride, kb, panel, bias, first, o, out_stride),
                        4 => tile::<4>(a, a_stride, kb, panel, bias, first, o, out_stride),
                        5 => tile::<5>(a, a_stride, kb, panel, bias, first, o, out_stride),
                        _ => tile::<TILE_ROWS>(a, a_stride, kb, panel, bias, first, o, out_stride),
                    }
                    r += TILE_ROWS;
                }
            }
            k0 += kb;
        }
    }

    /// `R` rows of `a` (stride `a_stride`, `k` inputs) times one panel, added to the panel's
    /// bias (`first`) or to what `out` (stride `n`) holds, into `out`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize>(
        a: *const f32,
        a_stride: usize,
        k: usize,
        panel: *const f32,
        bias: *const f32,
        first: bool,
        out: *mut f32,
        n: usize,
    ) {
        let (b0, b1) = (_mm512_loadu_ps(bias), _mm512_loadu_ps(bias.add(16)));
        let mut acc = [[b0, b1]; R];
        if !first {
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = [_mm512_loadu_ps(out.add(r * n)), _mm512_loadu_ps(out.add(r * n + 16))];
            }
        }
        for kk in 0..k {
            let w = panel.add(kk * PANEL);
            let (w0, w1) = (_mm512_loadu_ps(w), _mm512_loadu_ps(w.add(16)));
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*a.add(r * a_stride + kk));
                acc[0] = _mm512_fmadd_ps(x, w0, acc[0]);
                acc[1] = _mm512_fmadd_ps(x, w1, acc[1]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add(r * n), acc[0]);
            _mm512_storeu_ps(out.add(r * n + 16), acc[1]);
        }
    }
}

/// The packed kernel with 256-bit FMA: each panel as two halves of 16 outputs.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{PANEL, TILE_ROWS};

    /// Inputs per block, as in `avx512`.
    const K_BLOCK: usize = 128;

    /// Every row of `input` (rows of `k`) against every panel, into `out` (rows of `n`).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows(input: &[f32], packed: &[f32], bias: &[f32], k: usize, n: usize, out: &mut [f32]) {
        debug_assert!(n.is_multiple_of(PANEL) && packed.len() >= n * k && bias.len() >= n);
        let (a, rows, out) = (input.as_ptr(), input.len() / k, out.as_mut_ptr());
        let mut k0 = 0;
        while k0 < k {
            let kb = (k - k0).min(K_BLOCK);
            let first = k0 == 0;
            for p in 0..n / PANEL {
                for half in [0, 16] {
                    let panel = packed[(p * k + k0) * PANEL + half..].as_ptr();
                    let bias = bias[p * PANEL + half..].as_ptr();
                    let mut r = 0;
                    while r < rows {
                        let a = a.add(r * k + k0);
                        let o = out.add(r * n + p * PANEL + half);
                        match rows - r {
                            1 => tile::<1>(a, k, kb, panel, bias, first, o, n),
                            2 => tile::<2>(a, k, kb, panel, bias, first, o, n),
                            3 => tile::<3>(a, k, kb, panel, bias, first, o, n),
                            4 => tile::<4>(a, k, kb, panel, bias, first, o, n),
                            5 => tile::<5>(a, k, kb, panel, bias, first, o, n),
                            _ => tile::<TILE_ROWS>(a, k, kb, panel, bias, first, o, n),
                        }
                        r += TILE_ROWS;
                    }
                }
            }
            k0 += kb;
        }
    }

    /// `R` rows of `a` (stride `a_stride`, `k` inputs) times 16 outputs of a panel, added to
    /// their bias (`first`) or to what `out` (stride `n`) holds, into `out`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize>(
        a: *const f32,
        a_stride: usize,
        k: usize,
        panel: *const f32,
        bias: *const f32,
        first: bool,
        out: *mut f32,
        n: usize,
    ) {
        let (b0, b1) = (_mm256_loadu_ps(bias), _mm256_loadu_ps(bias.add(8)));
        let mut acc = [[b0, b1]; R];
        if !first {
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = [_mm256_loadu_ps(out.add(r * n)), _mm256_loadu_ps(out.add(r * n + 8))];
            }
        }
        for kk in 0..k {
            let w = panel.add(kk * PANEL);
            let (w0, w1) = (_mm256_loadu_ps(w), _mm256_loadu_ps(w.add(8)));
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*a.add(r * a_stride + kk));
                acc[0] = _mm256_fmadd_ps(x, w0, acc[0]);
                acc[1] = _mm256_fmadd_ps(x, w1, acc[1]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(r * n), acc[0]);
            _mm256_storeu_ps(out.add(r * n + 8), acc[1]);
        }
    }
}

/// `w(o, i)` for `outputs` × `inputs` laid out as `Dense` packs its weights, into `packed`
/// (resized): panels of `PANEL` outputs, input-major inside a panel.
fn pack(outputs: usize, inputs: usize, w: impl Fn(usize, usize) -> f32, packed: &mut Vec<f32>) {
    packed.resize(outputs * inputs, 0.0);
    for p in 0..outputs / PANEL {
        for i in 0..inputs {
            for j in 0..PANEL {
                packed[(p * inputs + i) * PANEL + j] = w(p * PANEL + j, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kernels_compute_the_same_layer() {
        // More inputs than a block (128), with a part block at the end.
        let (rows, k, n) = (101, 300, 64);
        let value = |i: usize, salt: usize| (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 700.0;
        let weight: Vec<f32> = (0..n * k).map(|i| value(i, 1)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let input: Vec<f32> = (0..rows * k).map(|i| value(i, 3)).collect();
        let exact = |r: usize, o: usize| {
            bias[o] as f64 + (0..k).map(|j| input[r * k + j] as f64 * weight[o * k + j] as f64).sum::<f64>()
        };
        let kernels = if cfg!(target_arch = "x86_64") { vec![false, true] } else { vec![false] };
        for wide in kernels {
            let layer = Dense::with_kernel(weight.clone(), bias.clone(), n, k, wide, None);
            assert_eq!(layer.packed.is_some(), wide);
            let mut out = vec![0f32; rows * n];
            layer.forward(&input, rows, &mut out, false);
            for r in 0..rows {
                for o in 0..n {
                    assert!((out[r * n + o] as f64 - exact(r, o)).abs() < 2e-4, "wide {wide}: row {r} output {o}");
                }
            }
            // Both packed kernels, whichever `forward` picked here.
            #[cfg(target_arch = "x86_64")]
            if let Some(packed) = &layer.packed {
                let mut narrow = vec![0f32; rows * n];
                // SAFETY: the build's baseline has AVX2 and FMA; the slices hold whole rows.
                unsafe { avx2::rows(&input, packed, &bias, k, n, &mut narrow) };
                for r in 0..rows {
                    for o in 0..n {
                        assert!((narrow[r * n + o] as f64 - exact(r, o)).abs() < 2e-4, "AVX2: row {r} output {o}");
                    }
                }
            }
        }
    }
}
