//! The 256-bit VNNI kernel set: the panels (as `avx512.rs`'s) for CPUs with 256-bit VNNI but not AVX-512 (AVX-VNNI: Intel since
//! Alder Lake, AMD since Zen 5): each panel of 16 tokens as two halves of 8, one `vpdpbusd`
//! multiplying four weights of a row with the same four positions of 8 tokens into their
//! 32-bit sums, where AVX2 needs `vpmaddubsw`, an add and later a `vpmaddwd`.
//!
//! The instruction comes in two encodings: AVX-VNNI's (VEX, what those CPUs have) and AVX-512
//! VL's (EVEX, on CPUs with AVX-512 VNNI). Both are made from one source here (`panels!`), so
//! a CPU with AVX-512 VNNI runs and tests the very loop an AVX-VNNI laptop runs.
//!
//! Exactness: the same two integers per (row, token) block as every other kernel, then
//! `canonical`'s two fused multiply-adds.

use super::avx2;
use super::block::{Unpacked, Q4K_BYTES, Q6K_BYTES};
use super::panels::{each_block, Layout, Panels, PANEL};
use super::{panel_kernel, KernelTable};

/// Weight rows multiplied with a panel at once: 3 rows × 2 halves × 2 sums (the sub-block's
/// and the block's), 2 token vectors and a broadcast fill 15 of the 16 registers.
const ROWS: usize = 3;

macro_rules! panels {
    ($name:ident, $features:literal, $dpbusd:ident, $dpwssd:ident) => {
        pub mod $name {
            use super::*;
            use std::arch::x86_64::*;

            /// `panel::matmul` with 256-bit VNNI: `out[i * stride + t] = row i · token t` for a
            /// task's `rows` weight rows and every panel's tokens. `SUB` is the sub-block size.
            ///
            /// # Safety
            /// The CPU must have this module's features.
            #[target_feature(enable = $features)]
            pub unsafe fn matmul<const SUB: usize>(
                rows: usize,
                blocks: usize,
                unpack: impl Fn(usize, usize, &mut Unpacked),
                panels: &Panels,
                out: &mut [f32],
                stride: usize,
            ) {
                super::each_block(
                    rows,
                    blocks,
                    unpack,
                    panels,
                    super::Layout::Groups,
                    out,
                    stride,
                    1,
                    ROWS,
                    |group, p, _, b, o| {
                        // SAFETY: this function's features; `each_block` hands out panel p's place
                        // in row `group[0]`'s output.
                        unsafe {
                            match group.len() {
                                ROWS => accumulate::<SUB, ROWS>(group, panels, p, b, o, stride),
                                _ => accumulate::<SUB, 1>(group, panels, p, b, o, stride),
                            }
                        }
                    },
                );
            }

            /// Adds block `b` of `R` rows times panel `p` to `out[i * stride + t]`, by
            /// `canonical`.
            #[target_feature(enable = $features)]
            #[inline]
            // Indices into several small arrays at once, which stay in registers as they are.
            #[allow(clippy::needless_range_loop)]
            unsafe fn accumulate<const SUB: usize, const R: usize>(
                rows: &[Unpacked],
                panels: &Panels,
                p: usize,
                b: usize,
                out: *mut f32,
                stride: usize,
            ) {
                debug_assert!(rows.len() == R && p < panels.panels);
                let at = p * panels.blocks + b;
                let codes = panels.codes.as_ptr().add(at * 64 * PANEL);
                let weights = |i: usize| rows[i].weights.as_ptr() as *const i32;
                let mut first = [[_mm256_setzero_si256(); 2]; R];
                for s in 0..256 / SUB {
                    let mut raw = [[_mm256_setzero_si256(); 2]; R];
                    for g in s * SUB / 4..(s + 1) * SUB / 4 {
                        let y = [0, 8].map(|h| _mm256_loadu_si256(codes.add(g * PANEL + h) as *const __m256i));
                        for i in 0..R {
                            let w = _mm256_set1_epi32(weights(i).add(g).read());
                            for h in 0..2 {
                                raw[i][h] = $dpbusd(raw[i][h], w, y[h]);
                            }
                        }
                    }
                    for i in 0..R {
                        let scale = _mm256_set1_epi32(rows[i].scales[s]);
                        for h in 0..2 {
                            first[i][h] = _mm256_add_epi32(first[i][h], _mm256_mullo_epi32(raw[i][h], scale));
                        }
                    }
                }
                // Q4_K's second integer takes the sums of 32 values, 4 pairs; Q6_K's the sums
                // of 16, 8.
                let pairs = 256 / SUB / 2;
                for h in 0..2 {
                    let sums = if SUB == 32 {
                        panels.sums32.as_ptr().add(at * 4 * PANEL + 8 * h)
                    } else {
                        panels.sums.as_ptr().add(at * 8 * PANEL + 8 * h)
                    };
                    let yd = _mm256_loadu_ps(panels.scales.as_ptr().add(at * PANEL + 8 * h));
                    for i in 0..R {
                        let mut second = _mm256_setzero_si256();
                        for u in 0..pairs {
                            let sum = _mm256_loadu_si256(sums.add(u * PANEL) as *const __m256i);
                            second = $dpwssd(second, _mm256_set1_epi32(rows[i].pairs[u] as i32), sum);
                        }
                        let o = out.add(i * stride + 8 * h);
                        let d = _mm256_mul_ps(_mm256_set1_ps(rows[i].d), yd);
                        let m = _mm256_mul_ps(_mm256_set1_ps(rows[i].m), yd);
                        let acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(first[i][h]), _mm256_loadu_ps(o));
                        _mm256_storeu_ps(o, _mm256_fnmadd_ps(m, _mm256_cvtepi32_ps(second), acc));
                    }
                }
            }
        }
    };
}

panels!(vex, "avxvnni", _mm256_dpbusd_avx_epi32, _mm256_dpwssd_avx_epi32);
panels!(evex, "avx512vnni,avx512vl", _mm256_dpbusd_epi32, _mm256_dpwssd_epi32);

/// `matmul` in the encoding this CPU has (`KernelSet::avxvnni_encoding`).
///
/// # Safety
/// The CPU must run `KernelSet::AvxVnni`.
pub unsafe fn matmul<const SUB: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    match quire_simd::KernelSet::avxvnni_encoding() {
        quire_simd::VnniEncoding::Vex => vex::matmul::<SUB>(rows, blocks, unpack, panels, out, stride),
        quire_simd::VnniEncoding::Evex => evex::matmul::<SUB>(rows, blocks, unpack, panels, out, stride),
    }
}

// The set's table: its own panels; AVX2's tiles (a few tokens a pass gain little from VNNI).
panel_kernel!(
    /// # Safety
    /// The CPU must run `KernelSet::AvxVnni`.
    q4k_panels, matmul, avx2::unpack_q4k, 32, Q4K_BYTES
);
panel_kernel!(
    /// # Safety
    /// The CPU must run `KernelSet::AvxVnni`.
    q6k_panels, matmul, avx2::unpack_q6k, 16, Q6K_BYTES
);

/// 256-bit VNNI's kernels.
pub static TABLE: KernelTable = KernelTable {
    q4k_tile: avx2::q4k_tile,
    q6k_tile: avx2::q6k_tile,
    q4k_panels: Some(q4k_panels),
    q6k_panels: Some(q6k_panels),
    q8_0_dot: super::q8_0::candle_x86,
};
