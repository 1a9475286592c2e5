//! The panels (`panel.rs`) for CPUs with AVX2 but not AVX-512 VNNI: the same panels of 16
//! tokens, each as two halves of 8 in 256-bit vectors. Without `vpdpbusd`, `vpmaddubsw` turns
//! four weights of a row times the same four positions of 8 tokens into 16 sums of two
//! products; these are added as 16-bit integers over as many groups as cannot overflow, then
//! `vpmaddwd` multiplies them by the sub-block's scale into 32-bit sums.
//!
//! Exactness: the same two integers per (row, token) block as every other kernel (integer sums
//! are exact whatever their grouping), then `canonical`'s two fused multiply-adds: a token's
//! result equals the per-token tiles' bit for bit, so a prompt's logits do not depend on how it
//! was batched.

use super::block::Unpacked;
use super::panels::{each_block, Layout, Panels, PANEL};
use std::arch::x86_64::*;

/// Weight rows multiplied with a panel at once (they share each load of its tokens).
const ROWS: usize = 2;

/// `panel::matmul` on AVX2: `out[i * stride + t] = row i · token t` for a task's `rows` weight
/// rows (`unpack(i, b, …)` gives block b of row i) and every panel's tokens. `SUB` is the
/// sub-block size (32 for Q4_K, 16 for Q6_K).
pub fn matmul<const SUB: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    each_block(rows, blocks, unpack, panels, Layout::Groups, out, stride, 1, ROWS, |group, p, _, b, o| {
        // SAFETY: the build targets AVX2 and FMA; `each_block` hands out panel p's place in row
        // `group[0]`'s output.
        unsafe {
            if group.len() == ROWS {
                accumulate::<SUB, ROWS>(group, panels, p, b, o, stride)
            } else {
                accumulate::<SUB, 1>(group, panels, p, b, o, stride)
            }
        }
    });
}

/// Adds block `b` of `R` rows times panel `p` to `out[i * stride + t]`, by `canonical`.
///
/// 16-bit sums: a pair of products is at most 2 · 63 · 128 = 16,128 in magnitude for Q6_K's
/// weights (0..63), so two groups of four positions fit; Q4_K's (0..15) give at most 3,840, so
/// a whole sub-block's eight groups do (30,720).
#[inline(always)]
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
    let span = if SUB == 32 { 8 } else { 2 };
    let at = p * panels.blocks + b;
    let codes = panels.codes.as_ptr().add(at * 64 * PANEL);
    let weights = |i: usize| rows[i].weights.as_ptr() as *const i32;
    let mut first = [[_mm256_setzero_si256(); 2]; R];
    for s in 0..256 / SUB {
        for g0 in (s * SUB / 4..(s + 1) * SUB / 4).step_by(span) {
            let mut raw = [[_mm256_setzero_si256(); 2]; R];
            for g in g0..g0 + span {
                let y = [0, 8].map(|h| _mm256_loadu_si256(codes.add(g * PANEL + h) as *const __m256i));
                for i in 0..R {
                    let w = _mm256_set1_epi32(weights(i).add(g).read());
                    for h in 0..2 {
                        raw[i][h] = _mm256_add_epi16(raw[i][h], _mm256_maddubs_epi16(w, y[h]));
                    }
                }
            }
            for i in 0..R {
                let scale = _mm256_set1_epi16(rows[i].scales[s] as i16);
                for h in 0..2 {
                    first[i][h] = _mm256_add_epi32(first[i][h], _mm256_madd_epi16(raw[i][h], scale));
                }
            }
        }
    }
    // Q4_K's second integer takes the sums of 32 values, 4 pairs; Q6_K's the sums of 16, 8.
    let pairs = 256 / SUB / 2;
    for h in 0..2 {
        let sums = if SUB == 32 {
            panels.sums32.as_ptr().add(at * 4 * PANEL + 8 * h)
        } else {
            panels.sums.as_ptr().add(at * 8 * PANEL + 8 * h)
        };
        let sums: [__m256i; 8] = std::array::from_fn(|u| {
            if u < pairs {
                _mm256_loadu_si256(sums.add(u * PANEL) as *const __m256i)
            } else {
                _mm256_setzero_si256()
            }
        });
        let yd = _mm256_loadu_ps(panels.scales.as_ptr().add(at * PANEL + 8 * h));
        for i in 0..R {
            let mut second = _mm256_setzero_si256();
            for u in 0..pairs {
                second =
                    _mm256_add_epi32(second, _mm256_madd_epi16(_mm256_set1_epi32(rows[i].pairs[u] as i32), sums[u]));
            }
            let o = out.add(i * stride + 8 * h);
            let d = _mm256_mul_ps(_mm256_set1_ps(rows[i].d), yd);
            let m = _mm256_mul_ps(_mm256_set1_ps(rows[i].m), yd);
            let acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(first[i][h]), _mm256_loadu_ps(o));
            _mm256_storeu_ps(o, _mm256_fnmadd_ps(m, _mm256_cvtepi32_ps(second), acc));
        }
    }
}
