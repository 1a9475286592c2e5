//! `out = input · weightᵀ + bias` in f32 for the encoder's dense layers and its attention, with
//! the kernel picked at run time. The weights are packed once (a layer's at load, a head's
//! keys and values per sequence) so each step reads 32 outputs' weights contiguously; tiles of
//! 6 rows × 32 outputs on CPUs with AVX-512 (12 accumulators of 16 lanes), 6 rows × 16 outputs
//! with AVX2 and FMA (x86-64's baseline) and with NEON (every 64-bit ARM CPU), and the same
//! arithmetic in plain Rust elsewhere.
//!
//! Every kernel computes each output as one chain of fused multiply-adds from its bias over
//! the inputs in order, so every CPU gets the same bits (the chain does not depend on the
//! vector width, the blocking or the cache sizes; `gemm`, used before, summed in an order that
//! differed between x86-64 and ARM). Where asked for and the CPU runs int8 kernels, a dense
//! layer runs in 8-bit integers instead (`int8`).

use rayon::prelude::*;

use crate::int8::Int8Weights;

/// Outputs per packed panel (two 16-lane registers).
pub const PANEL: usize = 32;
/// Rows per tile: 6 × 2 accumulators + 2 weight registers + 1 broadcast fit in AVX-512's 32
/// registers with room for the loads ahead; 6 × 2 of 8 lanes in AVX2's 16; 6 × 4 of 4 lanes
/// in NEON's 32.
const TILE_ROWS: usize = 6;
/// Rows per task: a task's inputs stay in the core's L2 while every panel passes over them.
const TASK_ROWS: usize = 48;
/// Inputs per block: 32 outputs' weights of a block (16 KiB) and 48 rows' inputs (24 KiB) fit
/// a 48 KiB L1 together. The block only splits the loop: the chain carries on through `out`.
const K_BLOCK: usize = 128;

/// Weights `w(o, i)` of `outputs` × `inputs`, in panels of `PANEL` outputs (the last one
/// padded with zeros), input-major inside a panel.
#[derive(Default)]
pub struct Packed {
    data: Vec<f32>,
    /// `outputs` rounded up to a whole panel.
    width: usize,
    inputs: usize,
}

impl Packed {
    pub fn new(outputs: usize, inputs: usize, w: impl Fn(usize, usize) -> f32) -> Packed {
        let mut packed = Packed::default();
        let width = packed.reset(outputs, inputs);
        for p in 0..width / PANEL {
            for i in 0..inputs {
                let at = (p * inputs + i) * PANEL;
                for (j, slot) in packed.data[at..at + PANEL].iter_mut().enumerate() {
                    let o = p * PANEL + j;
                    if o < outputs {
                        *slot = w(o, i);
                    }
                }
            }
        }
        packed
    }

    /// Zeros for `outputs` × `inputs` weights (keeping the memory): the width they take.
    fn reset(&mut self, outputs: usize, inputs: usize) -> usize {
        (self.width, self.inputs) = (outputs.next_multiple_of(PANEL), inputs);
        self.data.clear();
        self.data.resize(self.width * inputs, 0.0);
        self.width
    }

    /// Weights whose output `o`'s `inputs` values are row `o` of `rows` (rows `stride`
    /// apart): attention's keys, one output per key. Reads each row once, in order.
    pub fn refill_by_output(&mut self, rows: &[f32], stride: usize, outputs: usize, inputs: usize) {
        self.reset(outputs, inputs);
        for o in 0..outputs {
            let (p, j) = (o / PANEL, o % PANEL);
            let panel = &mut self.data[p * inputs * PANEL..][..inputs * PANEL];
            for (i, &v) in rows[o * stride..][..inputs].iter().enumerate() {
                panel[i * PANEL + j] = v;
            }
        }
    }

    /// Weights whose input `i`'s values for the `outputs` outputs are row `i` of `rows` (rows
    /// `stride` apart): attention's values, one input per value row. A panel's step is a copy
    /// of part of a row.
    pub fn refill_by_input(&mut self, rows: &[f32], stride: usize, outputs: usize, inputs: usize) {
        let width = self.reset(outputs, inputs);
        for p in 0..width / PANEL {
            let part = (outputs - p * PANEL).min(PANEL);
            for i in 0..inputs {
                let at = (p * inputs + i) * PANEL;
                self.data[at..at + part].copy_from_slice(&rows[i * stride + p * PANEL..][..part]);
            }
        }
    }

    /// Outputs rounded up to a whole panel: the columns `product` writes.
    pub fn width(&self) -> usize {
        self.width
    }

    /// `out[r][o] = bias[o] + Σᵢ a[r][i] · w(o, i)` for `rows` rows of `a` (rows `a_stride`
    /// apart, `inputs` values each) into rows of `out` (`out_stride` apart, `width()` values
    /// each: the padding's columns get the padding's bias), on this thread.
    pub fn product(&self, a: &[f32], a_stride: usize, rows: usize, bias: &[f32], out: &mut [f32], out_stride: usize) {
        let (k, n) = (self.inputs, self.width);
        if rows == 0 {
            return;
        }
        assert!(a_stride >= k && a.len() >= (rows - 1) * a_stride + k, "the rows of a are within it");
        assert!(out_stride >= n && out.len() >= (rows - 1) * out_stride + n, "the rows of out are within it");
        assert!(bias.len() >= n, "a bias for every column");
        // SAFETY: the bounds are checked above; the kernel in use is one this CPU runs.
        unsafe { self.product_by(F32Kernel::in_use(), a.as_ptr(), a_stride, rows, bias, out.as_mut_ptr(), out_stride) }
    }

    /// `product` by `kernel`, which this CPU must run, the bounds checked by the caller.
    #[allow(clippy::too_many_arguments)]
    unsafe fn product_by(
        &self,
        kernel: F32Kernel,
        a: *const f32,
        a_stride: usize,
        rows: usize,
        bias: &[f32],
        out: *mut f32,
        out_stride: usize,
    ) {
        let (k, n) = (self.inputs, self.width);
        // SAFETY: as the caller promised (each arm).
        unsafe {
            match kernel {
                #[cfg(target_arch = "x86_64")]
                F32Kernel::Avx512 => avx512::product(a, a_stride, rows, k, &self.data, bias, n, out, out_stride),
                #[cfg(target_arch = "x86_64")]
                F32Kernel::Avx2 => avx2::product(a, a_stride, rows, k, &self.data, bias, n, out, out_stride),
                #[cfg(target_arch = "aarch64")]
                F32Kernel::Neon => neon::product(a, a_stride, rows, k, &self.data, bias, n, out, out_stride),
                F32Kernel::Portable => portable::product(a, a_stride, rows, k, &self.data, bias, n, out, out_stride),
            }
        }
    }
}

pub struct Dense {
    /// The weights in f32, packed; the int8 pass still runs its short sequences on them.
    packed: Packed,
    /// The weights in 8-bit integers; where asked for and the CPU runs the int8 kernel.
    int8: Option<Int8Weights>,
    /// `outputs` values, then zeros for the last panel's padding.
    bias: Vec<f32>,
    pub outputs: usize,
    pub inputs: usize,
}

impl Dense {
    /// A layer from row-major `[out][in]` weights; in 8-bit integers where `int8` asks for it
    /// and this CPU and the layer's shape allow it, else in f32.
    pub fn new(weight: Vec<f32>, mut bias: Vec<f32>, outputs: usize, inputs: usize, int8: bool) -> Dense {
        let int8 = if int8 { Int8Weights::new(&weight, outputs, inputs) } else { None };
        let packed = Packed::new(outputs, inputs, |o, i| weight[o * inputs + i]);
        bias.resize(packed.width(), 0.0);
        Dense { packed, int8, bias, outputs, inputs }
    }

    /// `out[r] = input[r] · weightᵀ + bias` for `rows` rows, the work split over the thread pool;
    /// in f32 where `exact` asks for it even if the layer has int8 weights.
    pub fn forward(&self, input: &[f32], rows: usize, out: &mut [f32], exact: bool) {
        let (n, k) = (self.outputs, self.inputs);
        assert!(input.len() >= rows * k && out.len() >= rows * n);
        if let Some(int8) = self.int8.as_ref().filter(|_| !exact) {
            return int8.forward(input, rows, &self.bias[..n], out);
        }
        let width = self.packed.width();
        input[..rows * k].par_chunks(TASK_ROWS * k).zip(out[..rows * n].par_chunks_mut(TASK_ROWS * n)).for_each_init(
            Vec::new,
            |wide, (input, out)| {
                let rows = input.len() / k;
                if width == n {
                    return self.packed.product(input, k, rows, &self.bias, out, n);
                }
                // Outputs that end inside a panel: the whole panels into a wider buffer first.
                wide.resize(rows * width, 0.0);
                self.packed.product(input, k, rows, &self.bias, wide, width);
                for (row, wide) in out.chunks_mut(n).zip(wide.chunks(width)) {
                    row.copy_from_slice(&wide[..n]);
                }
            },
        );
    }
}

/// The f32 kernels a process runs: the widest this CPU has (AVX-512F where it has it), unless
/// `QUIRE_KERNELS` (the decoder's switch too) asks for a narrower set, for side-by-side
/// figures. Every one gives the same bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum F32Kernel {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "aarch64")]
    Neon,
    Portable,
}

impl F32Kernel {
    fn in_use() -> F32Kernel {
        static KERNEL: std::sync::OnceLock<F32Kernel> = std::sync::OnceLock::new();
        *KERNEL.get_or_init(|| {
            use quire_simd::KernelSet;
            if KernelSet::in_use() == KernelSet::Portable {
                return F32Kernel::Portable;
            }
            #[cfg(target_arch = "x86_64")]
            return if KernelSet::best() && detect_avx512() { F32Kernel::Avx512 } else { F32Kernel::Avx2 };
            #[cfg(target_arch = "aarch64")]
            return F32Kernel::Neon;
            #[allow(unreachable_code)]
            F32Kernel::Portable
        })
    }

    /// Every kernel this CPU runs, for the tests.
    #[cfg(test)]
    fn runnable() -> Vec<F32Kernel> {
        let mut kernels = vec![F32Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            kernels.push(F32Kernel::Avx2);
            if detect_avx512() {
                kernels.push(F32Kernel::Avx512);
            }
        }
        #[cfg(target_arch = "aarch64")]
        kernels.push(F32Kernel::Neon);
        kernels
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Each kernel set's `product`: `out[r][o] = bias[o] + Σᵢ a[r][i] · w(o, i)` for `rows` rows
/// of `a` (`k` inputs, rows `a_stride` apart) and `n` outputs (whole panels) into rows of
/// `out` `out_stride` apart, by the set's `tile::<R>` of `$width` outputs: inputs a block at a
/// time (a panel's block and the rows' block stay in L1 while every tile passes over them),
/// then panels, then tiles of rows. The caller guarantees the bounds (`Packed::product`).
macro_rules! product {
    ($width:expr $(, $feature:literal)?) => {
        $(#[target_feature(enable = $feature)])?
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn product(
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
            let mut k0 = 0;
            while k0 < k {
                let kb = (k - k0).min(K_BLOCK);
                let first = k0 == 0;
                for p in 0..n / PANEL {
                    for part in (0..PANEL).step_by($width) {
                        let panel = packed.as_ptr().add((p * k + k0) * PANEL + part);
                        let bias = bias.as_ptr().add(p * PANEL + part);
                        let mut r = 0;
                        while r < rows {
                            let a = a.add(r * a_stride + k0);
                            let o = out.add(r * out_stride + p * PANEL + part);
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
                }
                k0 += kb;
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{K_BLOCK, PANEL, TILE_ROWS};

    product!(32, "avx512f");

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

/// The packed kernel with 256-bit FMA: each panel as two parts of 16 outputs.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{K_BLOCK, PANEL, TILE_ROWS};

    product!(16, "avx2,fma");

    /// `R` rows of `a` times 16 outputs of a panel, as `avx512::tile` does 32.
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

/// The packed kernel with NEON's fused multiply-add by a scalar (`fmla` by element): each
/// panel as two parts of 16 outputs, 4 registers of 4 lanes.
#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::{K_BLOCK, PANEL, TILE_ROWS};

    product!(16, "neon");

    /// `R` rows of `a` times 16 outputs of a panel, as `avx512::tile` does 32.
    #[target_feature(enable = "neon")]
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
        let from = if first { bias } else { out as *const f32 };
        let mut acc = [[vdupq_n_f32(0.0); 4]; R];
        for (r, acc) in acc.iter_mut().enumerate() {
            let from = if first { from } else { from.add(r * n) };
            *acc = [vld1q_f32(from), vld1q_f32(from.add(4)), vld1q_f32(from.add(8)), vld1q_f32(from.add(12))];
        }
        for kk in 0..k {
            let w = panel.add(kk * PANEL);
            let w = [vld1q_f32(w), vld1q_f32(w.add(4)), vld1q_f32(w.add(8)), vld1q_f32(w.add(12))];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = *a.add(r * a_stride + kk);
                for (acc, w) in acc.iter_mut().zip(w) {
                    *acc = vfmaq_n_f32(*acc, w, x);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (i, acc) in acc.iter().enumerate() {
                vst1q_f32(out.add(r * n + 4 * i), *acc);
            }
        }
    }
}

/// The same chains in plain Rust (`mul_add` is one fused multiply-add where the CPU has it):
/// the reference the vector kernels are tested against, and any other CPU's kernel.
mod portable {
    use super::{K_BLOCK, PANEL, TILE_ROWS};

    product!(16);

    /// `R` rows of `a` times 16 outputs of a panel, as `avx512::tile` does 32.
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
        let mut acc = [[0f32; 16]; R];
        for (r, acc) in acc.iter_mut().enumerate() {
            let from = if first { bias } else { out.add(r * n) as *const f32 };
            acc.copy_from_slice(std::slice::from_raw_parts(from, 16));
        }
        for kk in 0..k {
            let w = std::slice::from_raw_parts(panel.add(kk * PANEL), 16);
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = *a.add(r * a_stride + kk);
                for (acc, &w) in acc.iter_mut().zip(w) {
                    *acc = x.mul_add(w, *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            std::slice::from_raw_parts_mut(out.add(r * n), 16).copy_from_slice(acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(i: usize, salt: usize) -> f32 {
        (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 700.0
    }

    /// Every kernel this CPU runs gives the plain Rust chain's bits, over shapes with part
    /// panels, part blocks of inputs (more than 128), part tiles of rows and strided rows; and
    /// the chain stays close to the exact sum.
    #[test]
    fn every_kernel_gives_the_same_bits() {
        for (rows, k, n, a_stride, out_extra) in [(101, 300, 64, 300, 0), (13, 32, 45, 96, 3), (7, 129, 32, 200, 32)] {
            let weight: Vec<f32> = (0..n * k).map(|i| value(i, 1)).collect();
            let packed = Packed::new(n, k, |o, i| weight[o * k + i]);
            let mut bias: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
            bias.resize(packed.width(), 0.0);
            let input: Vec<f32> = (0..rows * a_stride).map(|i| value(i, 3)).collect();
            let out_stride = packed.width() + out_extra;
            let run = |kernel: F32Kernel| {
                let mut out = vec![f32::NAN; rows * out_stride];
                // SAFETY: `runnable` lists kernels this CPU runs; the buffers hold every row.
                unsafe {
                    packed.product_by(kernel, input.as_ptr(), a_stride, rows, &bias, out.as_mut_ptr(), out_stride)
                };
                out
            };
            let reference = run(F32Kernel::Portable);
            for r in 0..rows {
                for o in 0..n {
                    let exact = bias[o] as f64
                        + (0..k).map(|i| input[r * a_stride + i] as f64 * weight[o * k + i] as f64).sum::<f64>();
                    let got = reference[r * out_stride + o] as f64;
                    assert!((got - exact).abs() < 2e-4, "{rows}×{k}×{n}: row {r} output {o}: {got} against {exact}");
                }
            }
            for kernel in F32Kernel::runnable() {
                let out = run(kernel);
                for r in 0..rows {
                    let (ours, theirs) = (&out[r * out_stride..][..n], &reference[r * out_stride..][..n]);
                    assert!(
                        ours.iter().zip(theirs).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{kernel:?} differs from the plain chain in row {r} of {rows}×{k}×{n}"
                    );
                }
            }
        }
    }

    /// The plain chain's bits as x86-64 computed them: an ARM build (`tools/test-aarch64.sh`)
    /// must get the same.
    #[test]
    fn the_chain_gives_x86_64s_bits() {
        let (rows, k, n) = (9, 200, 40);
        let packed = Packed::new(n, k, |o, i| value(o * k + i, 5));
        let bias = vec![0.25; packed.width()];
        let input: Vec<f32> = (0..rows * k).map(|i| value(i, 7)).collect();
        let mut out = vec![0f32; rows * packed.width()];
        packed.product(&input, k, rows, &bias, &mut out, packed.width());
        let digest =
            out.iter().fold(0xcbf29ce484222325u64, |h, v| (h ^ v.to_bits() as u64).wrapping_mul(0x100000001b3));
        assert_eq!(digest, 5359531017940971421, "the f32 chain's bits differ from x86-64's");
    }

    #[test]
    fn attentions_packings_are_the_general_one() {
        let (count, width, stride) = (45, 40, 70);
        let rows: Vec<f32> = (0..count * stride).map(|i| value(i, 8)).collect();
        let general = Packed::new(count, width, |o, i| rows[o * stride + i]);
        let mut by_output = Packed::default();
        by_output.refill_by_output(&rows, stride, count, width);
        assert_eq!((by_output.data == general.data, by_output.width), (true, general.width));
        let general = Packed::new(width, count, |o, i| rows[i * stride + o]);
        let mut by_input = Packed::new(3, 3, |_, _| 1.0);
        by_input.refill_by_input(&rows, stride, width, count);
        assert_eq!((by_input.data == general.data, by_input.width), (true, general.width));
    }

    #[test]
    fn a_layer_with_outputs_inside_a_panel_writes_only_its_own() {
        let (rows, k, n) = (50, 40, 20);
        let weight: Vec<f32> = (0..n * k).map(|i| value(i, 9)).collect();
        let bias: Vec<f32> = (0..n).map(|i| value(i, 4)).collect();
        let input: Vec<f32> = (0..rows * k).map(|i| value(i, 6)).collect();
        let layer = Dense::new(weight.clone(), bias.clone(), n, k, false);
        let mut out = vec![f32::NAN; rows * n + 1];
        layer.forward(&input, rows, &mut out, false);
        assert!(out[rows * n].is_nan(), "nothing written past the rows");
        for r in 0..rows {
            for o in 0..n {
                let exact =
                    bias[o] as f64 + (0..k).map(|i| input[r * k + i] as f64 * weight[o * k + i] as f64).sum::<f64>();
                assert!((out[r * n + o] as f64 - exact).abs() < 1e-4, "row {r} output {o}");
            }
        }
    }
}
