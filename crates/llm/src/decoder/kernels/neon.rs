//! The kernel sets of 64-bit ARM (NEON alone, with dot products, with i8mm): the tiles, a
//! block's weights unpacked once into 16 vectors of 16 bytes for the tile, each sub-block's products summed by `sdot` (ARMv8.2 dot products) or, on
//! CPUs without it, by `smull` and pairwise adds; then per token the block's two exact
//! integers and `block::canonical`, as every kernel set does, so ARM gives x86's bits.
//!
//! `sdot` is written as inline assembly: Rust's `vdotq_s32` is not stable yet. The weights are
//! unsigned (0..16 for Q4_K, 0..64 for Q6_K) and fit a signed byte, so the signed form serves.

use super::block::{
    canonical, f16_at, q4k_scales_and_mins, unpack_q4k, unpack_q6k, Unpacked, Q4K_BYTES, Q6K_BYTES, Q6K_D, Q6K_HIGH,
    Q6K_SCALES,
};
use super::panels::{each_block, Layout, Panels, PANEL};
use super::{bytes_of, panel_kernel, token_bytes, KernelTable, Q8K_BYTES, QK_K, TILE};
use candle_core::quantized::k_quants::{BlockQ8K, BlockQ8_0};
use quire_simd::neon::{sdot, sdot_lane, smmla};
use std::arch::aarch64::*;

/// `acc` plus the 16 products of `a` and `b`, four to a lane.
#[inline(always)]
unsafe fn dot<const SDOT: bool>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    if SDOT {
        // SAFETY (of the caller): the CPU has dotprod (`KernelSet::NeonDotprod`).
        sdot(acc, a, b)
    } else {
        let low = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let high = vmull_high_s8(a, b);
        vpadalq_s16(vpadalq_s16(acc, low), high)
    }
}

/// A token's block `b`: its scale, its 256 bytes and its 16 sums of 16.
#[inline(always)]
unsafe fn token_block(token: &[u8], b: usize) -> (f32, *const i8, int16x8_t, int16x8_t) {
    let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
    let sums = y.as_ptr().add(4 + QK_K) as *const i16;
    (
        f32::from_le_bytes([y[0], y[1], y[2], y[3]]),
        y.as_ptr().add(4) as *const i8,
        vld1q_s16(sums),
        vld1q_s16(sums.add(8)),
    )
}

/// The sum of the products of two vectors of eight 16-bit integers, widened to 32 bits.
#[inline(always)]
unsafe fn dot16(a: int16x8_t, b: int16x8_t) -> int32x4_t {
    vmlal_high_s16(vmull_s16(vget_low_s16(a), vget_low_s16(b)), a, b)
}

#[inline(always)]
unsafe fn q4k<const SDOT: bool>(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let ys = token_bytes(tokens);
    let mut acc = [0f32; TILE];
    let low = vdupq_n_u8(0xF);
    for b in 0..row.len() / Q4K_BYTES {
        let x = &row[b * Q4K_BYTES..(b + 1) * Q4K_BYTES];
        let (d, dmin) = (f16_at(x, 0), f16_at(x, 2));
        let (sc, mn) = q4k_scales_and_mins(&x[4..16]);
        // Sub-block 2k: the low nibbles of bytes 32k..32k+32 (vectors 4k, 4k+1); 2k+1 their
        // high nibbles (4k+2, 4k+3).
        let mut w = [vdupq_n_s8(0); 16];
        let qs = x.as_ptr().add(16);
        for k in 0..4 {
            let bits = [vld1q_u8(qs.add(32 * k)), vld1q_u8(qs.add(32 * k + 16))];
            for h in 0..2 {
                w[4 * k + h] = vreinterpretq_s8_u8(vandq_u8(bits[h], low));
                w[4 * k + 2 + h] = vreinterpretq_s8_u8(vshrq_n_u8::<4>(bits[h]));
            }
        }
        // Each min against the sum of its 32 values: the token's 16-value sums in pairs.
        let mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn.as_ptr())));
        for t in 0..n {
            let (yd, q8, sums_low, sums_high) = token_block(ys[t], b);
            let mut first = vdupq_n_s32(0);
            for j in 0..8 {
                let s = dot::<SDOT>(vdupq_n_s32(0), w[2 * j], vld1q_s8(q8.add(32 * j)));
                let s = dot::<SDOT>(s, w[2 * j + 1], vld1q_s8(q8.add(32 * j + 16)));
                first = vmlaq_n_s32(first, s, sc[j] as i32);
            }
            let second = vaddvq_s32(dot16(vpaddq_s16(sums_low, sums_high), mins));
            acc[t] = canonical(acc[t], d, dmin, yd, vaddvq_s32(first), second);
        }
    }
    out.copy_from_slice(&acc[..n]);
}

#[inline(always)]
unsafe fn q6k<const SDOT: bool>(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let ys = token_bytes(tokens);
    let mut acc = [0f32; TILE];
    let (low, two) = (vdupq_n_u8(0xF), vdupq_n_u8(3));
    for b in 0..row.len() / Q6K_BYTES {
        let x = &row[b * Q6K_BYTES..(b + 1) * Q6K_BYTES];
        let p = x.as_ptr();
        // Vector v holds weights 16v..16v+16, one sub-block: per half of 128, quarter q takes
        // the low (q < 2) or high nibbles of bytes 32(q % 2).. and the bit pair at 2q.
        let mut w = [vdupq_n_s8(0); 16];
        for half in 0..2 {
            for l in 0..2 {
                let high = vld1q_u8(p.add(Q6K_HIGH + 32 * half + 16 * l));
                let first = vld1q_u8(p.add(64 * half + 16 * l));
                let second = vld1q_u8(p.add(64 * half + 32 + 16 * l));
                let nibbles =
                    [vandq_u8(first, low), vandq_u8(second, low), vshrq_n_u8::<4>(first), vshrq_n_u8::<4>(second)];
                let pairs = [high, vshrq_n_u8::<2>(high), vshrq_n_u8::<4>(high), vshrq_n_u8::<6>(high)];
                for q in 0..4 {
                    let bits = vshlq_n_u8::<4>(vandq_u8(pairs[q], two));
                    w[8 * half + 2 * q + l] = vreinterpretq_s8_u8(vorrq_u8(nibbles[q], bits));
                }
            }
        }
        let scales = vld1q_s8(p.add(Q6K_SCALES) as *const i8);
        let (scales_low, scales_high) = (vmovl_s8(vget_low_s8(scales)), vmovl_high_s8(scales));
        let sc: [i32; 16] = std::array::from_fn(|s| x[Q6K_SCALES + s] as i8 as i32);
        let d = f16_at(x, Q6K_D);
        for t in 0..n {
            let (yd, q8, sums_low, sums_high) = token_block(ys[t], b);
            let mut first = vdupq_n_s32(0);
            for (v, &scale) in sc.iter().enumerate() {
                let s = dot::<SDOT>(vdupq_n_s32(0), w[v], vld1q_s8(q8.add(16 * v)));
                first = vmlaq_n_s32(first, s, scale);
            }
            let second = vaddvq_s32(vaddq_s32(dot16(sums_low, scales_low), dot16(sums_high, scales_high)));
            acc[t] = canonical(acc[t], d, 32.0 * d, yd, vaddvq_s32(first), second);
        }
    }
    out.copy_from_slice(&acc[..n]);
}

/// Q4_K tiles with `sdot`.
///
/// # Safety
/// The CPU must have the dot product extension.
#[target_feature(enable = "dotprod")]
pub unsafe fn q4k_dotprod(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    q4k::<true>(row, tokens, out)
}

/// Q4_K tiles with NEON alone.
///
/// # Safety
/// None beyond the slices' (NEON is part of every aarch64 CPU).
pub unsafe fn q4k_plain(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    q4k::<false>(row, tokens, out)
}

/// Q6_K tiles with `sdot`.
///
/// # Safety
/// The CPU must have the dot product extension.
#[target_feature(enable = "dotprod")]
pub unsafe fn q6k_dotprod(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    q6k::<true>(row, tokens, out)
}

/// Q6_K tiles with NEON alone.
///
/// # Safety
/// None beyond the slices'.
pub unsafe fn q6k_plain(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    q6k::<false>(row, tokens, out)
}

/// Weight rows multiplied with a panel at once: 2 rows × 4 vectors of 4 tokens × 2 sums (the
/// sub-block's and the block's), the panel's 4 vectors and the rows' weights: 22 of the 32
/// registers.
const PANEL_ROWS: usize = 2;

/// The panels on ARM with dot products: `out[i * stride + t] = row i · token t` for a task's
/// `rows` weight rows (`unpack(i, b, …)` gives block b of row i) and every panel's tokens.
/// One `sdot` by element multiplies four weights of a row with the same four positions of 4
/// tokens; each block ends in `canonical`'s two fused multiply-adds, as every kernel does.
///
/// # Safety
/// The CPU must have the dot product extension.
#[target_feature(enable = "dotprod")]
pub unsafe fn panel_matmul<const SUB: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    each_block(rows, blocks, unpack, panels, Layout::Groups, out, stride, 1, PANEL_ROWS, |group, p, _, b, o| {
        // SAFETY: the CPU has dot products (this function's contract); `each_block` hands out
        // panel p's place in row `group[0]`'s output.
        unsafe {
            match group.len() {
                PANEL_ROWS => accumulate::<SUB, PANEL_ROWS>(group, panels, p, b, o, stride),
                _ => accumulate::<SUB, 1>(group, panels, p, b, o, stride),
            }
        }
    });
}

/// Adds block `b` of `R` rows times panel `p` to `out[i * stride + t]`.
#[target_feature(enable = "dotprod")]
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
    let codes = panels.codes.as_ptr().add(at * 64 * PANEL) as *const i8;
    let mut first = [[vdupq_n_s32(0); 4]; R];
    for s in 0..QK_K / SUB {
        let mut raw = [[vdupq_n_s32(0); 4]; R];
        // Four groups of four weights per load of a row's weights.
        for g4 in (s * SUB / 4..(s + 1) * SUB / 4).step_by(4) {
            let w: [int8x16_t; R] =
                std::array::from_fn(|i| vld1q_s8(rows[i].weights.as_ptr().add(4 * g4) as *const i8));
            macro_rules! group {
                ($lane:literal) => {{
                    let g = g4 + $lane;
                    let y = [0, 1, 2, 3].map(|q| vld1q_s8(codes.add((g * PANEL + 4 * q) * 4)));
                    for i in 0..R {
                        for q in 0..4 {
                            raw[i][q] = sdot_lane::<$lane>(raw[i][q], y[q], w[i]);
                        }
                    }
                }};
            }
            group!(0);
            group!(1);
            group!(2);
            group!(3);
        }
        for i in 0..R {
            for q in 0..4 {
                first[i][q] = vmlaq_n_s32(first[i][q], raw[i][q], rows[i].scales[s]);
            }
        }
    }
    let (sums, yd) = (sums_of::<SUB>(panels, at), scales_of(panels, at));
    for i in 0..R {
        for q in 0..4 {
            finish(out.add(i * stride + 4 * q), &rows[i], yd[q], first[i][q], second::<SUB>(&rows[i], sums, q));
        }
    }
}

/// Where block `at` (panel × blocks + block) of a panel's sums for the second integer start:
/// Q4_K's takes the sums of 32 values, Q6_K's the sums of 16.
#[inline(always)]
unsafe fn sums_of<const SUB: usize>(panels: &Panels, at: usize) -> *const u32 {
    if SUB == 32 {
        panels.sums32.as_ptr().add(at * 4 * PANEL)
    } else {
        panels.sums.as_ptr().add(at * 8 * PANEL)
    }
}

/// The 16 tokens' scales of block `at`, four to a vector.
#[inline(always)]
unsafe fn scales_of(panels: &Panels, at: usize) -> [float32x4_t; 4] {
    [0, 1, 2, 3].map(|q| vld1q_f32(panels.scales.as_ptr().add(at * PANEL + 4 * q)))
}

/// A row's second integer of the block for tokens 4q..4q+4 of the panel: each token's pairs
/// of sums (4 pairs for Q4_K, 8 for Q6_K) times the row's pairs of multipliers, added.
#[inline(always)]
unsafe fn second<const SUB: usize>(row: &Unpacked, sums: *const u32, q: usize) -> int32x4_t {
    let mut second = vdupq_n_s32(0);
    for u in 0..QK_K / SUB / 2 {
        let multipliers = vreinterpretq_s16_u32(vdupq_n_u32(row.pairs[u]));
        let v = vld1q_s16(sums.add(u * PANEL + 4 * q) as *const i16);
        let products =
            vpaddq_s32(vmull_s16(vget_low_s16(v), vget_low_s16(multipliers)), vmull_high_s16(v, multipliers));
        second = vaddq_s32(second, products);
    }
    second
}

/// `block::canonical` for four tokens of a row: `o += d·yd·first − m·yd·second`, each product
/// fused with its addition.
#[inline(always)]
unsafe fn finish(o: *mut f32, row: &Unpacked, yd: float32x4_t, first: int32x4_t, second: int32x4_t) {
    let d = vmulq_n_f32(yd, row.d);
    let m = vmulq_n_f32(yd, row.m);
    let acc = vfmaq_f32(vld1q_f32(o), d, vcvtq_f32_s32(first));
    vst1q_f32(o, vfmsq_f32(acc, m, vcvtq_f32_s32(second)));
}

/// Weight rows multiplied with a panel at once by `smmla`: two pairs of rows, half a panel (8
/// tokens, 4 pairs) at a time: 8 sums of the sub-block and 8 of the block, 4 vectors of
/// tokens and 2 of weights, 22 of the 32 registers. Per 8 positions: 8 `smmla`, 4 loads of
/// tokens, 4 of weights and 2 moves that pair them.
const MM_ROWS: usize = 4;

/// The panels on ARM with int8 matrix multiplies: as `panel_matmul`, but each `smmla`
/// multiplies 8 weights of two rows with the same 8 positions of two tokens (a 2×8 by 8×2
/// product), twice the work of an `sdot` by element; the panels laid out in pairs of tokens
/// (`Layout::TokenPairs`). Every block ends in `canonical`'s two fused multiply-adds, as every
/// kernel does.
///
/// # Safety
/// The CPU must have the dot product and int8 matrix multiply extensions.
#[target_feature(enable = "dotprod,i8mm")]
pub unsafe fn panel_matmul_i8mm<const SUB: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    each_block(rows, blocks, unpack, panels, Layout::TokenPairs, out, stride, 1, MM_ROWS, |group, p, _, b, o| {
        // SAFETY: the CPU has i8mm (this function's contract); `each_block` hands out panel
        // p's place in row `group[0]`'s output. A last row alone goes with a row of zeros,
        // whose results are not stored.
        unsafe {
            match group.len() {
                MM_ROWS => accumulate_mm::<SUB, 2>(
                    [[&group[0], &group[1]], [&group[2], &group[3]]],
                    4,
                    panels,
                    p,
                    b,
                    o,
                    stride,
                ),
                _ => accumulate_mm::<SUB, 1>([[&group[0], &Unpacked::ZERO]], 1, panels, p, b, o, stride),
            }
        }
    });
}

/// Adds block `b` of `RP` pairs of rows (the first `stored` rows stored) times panel `p` to
/// `out[i * stride + t]`.
#[target_feature(enable = "dotprod,i8mm")]
#[inline]
#[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
unsafe fn accumulate_mm<const SUB: usize, const RP: usize>(
    pairs: [[&Unpacked; 2]; RP],
    stored: usize,
    panels: &Panels,
    p: usize,
    b: usize,
    out: *mut f32,
    stride: usize,
) {
    debug_assert!(p < panels.panels && stored <= 2 * RP);
    let at = p * panels.blocks + b;
    // Per 8 positions, 8 pairs of tokens of 16 bytes.
    let codes = panels.codes.as_ptr().add(at * 64 * PANEL) as *const i8;
    let (sums, yd) = (sums_of::<SUB>(panels, at), scales_of(panels, at));
    for half in 0..2 {
        // Per pair of rows and pair of tokens: lanes (row 0, token 0), (0, 1), (1, 0), (1, 1).
        let mut first = [[vdupq_n_s32(0); 4]; RP];
        for s in 0..QK_K / SUB {
            let mut raw = [[vdupq_n_s32(0); 4]; RP];
            for e in s * SUB / 8..(s + 1) * SUB / 8 {
                // Bytes 8e..8e+8 of the half's 4 pairs of tokens.
                let y = [0, 1, 2, 3].map(|k| vld1q_s8(codes.add((e * 8 + 4 * half + k) * 16)));
                for r in 0..RP {
                    let weights = |i: usize| vld1_s8(pairs[r][i].weights.as_ptr().add(8 * e) as *const i8);
                    let w = vcombine_s8(weights(0), weights(1));
                    for k in 0..4 {
                        raw[r][k] = smmla(raw[r][k], w, y[k]);
                    }
                }
            }
            for r in 0..RP {
                let scales = vcombine_s32(vdup_n_s32(pairs[r][0].scales[s]), vdup_n_s32(pairs[r][1].scales[s]));
                for k in 0..4 {
                    first[r][k] = vmlaq_s32(first[r][k], raw[r][k], scales);
                }
            }
        }
        for r in 0..RP {
            for (i, row) in pairs[r].iter().enumerate().take(stored - 2 * r) {
                for q in 0..2 {
                    // Tokens 4q..4q+4 of the half: the row's lanes of two pairs of tokens.
                    let (a, c) = (vreinterpretq_s64_s32(first[r][2 * q]), vreinterpretq_s64_s32(first[r][2 * q + 1]));
                    let mine = vreinterpretq_s32_s64(if i == 0 { vzip1q_s64(a, c) } else { vzip2q_s64(a, c) });
                    let quarter = 2 * half + q;
                    let o = out.add((2 * r + i) * stride + 4 * quarter);
                    finish(o, row, yd[quarter], mine, second::<SUB>(row, sums, quarter));
                }
            }
        }
    }
}

/// Q8_0 × Q8_0 in x86's arithmetic (`q8_0.rs`): 8 lanes of 4 neighbouring products each.
mod q8_0 {
    use super::super::q8_0::{scale, BYTES};
    use std::arch::aarch64::*;

    /// The 8 lanes' sums of 4 neighbouring products, as two vectors of 4. (No closure here: a
    /// closure is a function of its own, without the caller's `dotprod`, and `sdot`'s inline
    /// assembly would not assemble in it.)
    #[inline(always)]
    unsafe fn sums<const SDOT: bool>(x: *const i8, y: *const i8) -> [int32x4_t; 2] {
        [sum_of_16::<SDOT>(x, y), sum_of_16::<SDOT>(x.add(16), y.add(16))]
    }

    /// 4 lanes, each the sum of 4 neighbouring products of 16 bytes of `x` and `y`.
    #[inline(always)]
    unsafe fn sum_of_16<const SDOT: bool>(x: *const i8, y: *const i8) -> int32x4_t {
        let (a, b) = (vld1q_s8(x), vld1q_s8(y));
        if SDOT {
            quire_simd::neon::sdot(vdupq_n_s32(0), a, b)
        } else {
            let low = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let high = vpaddlq_s16(vmull_high_s8(a, b));
            vpaddq_s32(low, high)
        }
    }

    #[inline(always)]
    unsafe fn dot<const SDOT: bool>(row: &[u8], token: &[u8]) -> f32 {
        let mut lanes = [vdupq_n_f32(0.0); 2];
        for (x, y) in row.chunks_exact(BYTES).zip(token.chunks_exact(BYTES)) {
            let d = vdupq_n_f32(scale(x) * scale(y));
            let s = sums::<SDOT>(x.as_ptr().add(2) as *const i8, y.as_ptr().add(2) as *const i8);
            for h in 0..2 {
                lanes[h] = vfmaq_f32(lanes[h], d, vcvtq_f32_s32(s[h]));
            }
        }
        let mut all = [0f32; 8];
        vst1q_f32(all.as_mut_ptr(), lanes[0]);
        vst1q_f32(all.as_mut_ptr().add(4), lanes[1]);
        quire_simd::plain::hsum(all)
    }

    /// # Safety
    /// The CPU must have the dot product extension.
    #[target_feature(enable = "dotprod")]
    pub unsafe fn dot_dotprod(row: &[u8], token: &[u8]) -> f32 {
        dot::<true>(row, token)
    }

    /// # Safety
    /// None beyond the slices' (NEON is part of every aarch64 CPU).
    pub unsafe fn dot_plain(row: &[u8], token: &[u8]) -> f32 {
        dot::<false>(row, token)
    }
}

/// Q8_0 rows with `sdot`.
///
/// # Safety
/// The CPU must have the dot product extension.
unsafe fn q8_0_dotprod(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    q8_0::dot_dotprod(bytes_of(row), bytes_of(token))
}

/// Q8_0 rows with NEON alone.
///
/// # Safety
/// None beyond the slices' (NEON is part of every aarch64 CPU).
unsafe fn q8_0_plain(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    q8_0::dot_plain(bytes_of(row), bytes_of(token))
}

// The three sets' tables: NEON alone (tiles), with dot products (tiles and panels), with i8mm
// (its own panels, the dot-product tiles).
panel_kernel!(
    /// # Safety
    /// The CPU must have the dot product extension.
    q4k_panels_dotprod, panel_matmul, unpack_q4k, 32, Q4K_BYTES
);
panel_kernel!(
    /// # Safety
    /// The CPU must have the dot product extension.
    q6k_panels_dotprod, panel_matmul, unpack_q6k, 16, Q6K_BYTES
);
panel_kernel!(
    /// # Safety
    /// The CPU must have the dot product and int8 matrix multiply extensions.
    q4k_panels_i8mm, panel_matmul_i8mm, unpack_q4k, 32, Q4K_BYTES
);
panel_kernel!(
    /// # Safety
    /// The CPU must have the dot product and int8 matrix multiply extensions.
    q6k_panels_i8mm, panel_matmul_i8mm, unpack_q6k, 16, Q6K_BYTES
);

/// NEON with dot products and int8 matrix multiplies.
pub static I8MM: KernelTable = KernelTable {
    q4k_tile: q4k_dotprod,
    q6k_tile: q6k_dotprod,
    q4k_panels: Some(q4k_panels_i8mm),
    q6k_panels: Some(q6k_panels_i8mm),
    q8_0_dot: q8_0_dotprod,
};

/// NEON with dot products.
pub static DOTPROD: KernelTable = KernelTable {
    q4k_tile: q4k_dotprod,
    q6k_tile: q6k_dotprod,
    q4k_panels: Some(q4k_panels_dotprod),
    q6k_panels: Some(q6k_panels_dotprod),
    q8_0_dot: q8_0_dotprod,
};

/// NEON alone: tiles, no panels.
pub static PLAIN: KernelTable =
    KernelTable { q4k_tile: q4k_plain, q6k_tile: q6k_plain, q4k_panels: None, q6k_panels: None, q8_0_dot: q8_0_plain };

#[cfg(test)]
mod tests {
    use super::super::{block, quantize_q8k, TileKernel};
    use super::*;
    use candle_core::quantized::k_quants::{BlockQ4K, BlockQ6K, GgmlType};
    use quire_simd::KernelSet;

    /// Each ARM panel kernel this CPU runs (dot products; i8mm where it has it) gives the plain
    /// tiles' bits, for 7 rows (groups of four and two, then a row alone) and 37 tokens (two
    /// panels and a part one whose empty lanes are dropped).
    fn agree<T: GgmlType<VecDotType = BlockQ8K>, const SUB: usize>(
        unpack: fn(&[u8], usize, &mut Unpacked),
        plain_tile: TileKernel,
    ) {
        let (rows, cols, m, lanes) = (7, 4 * 256, 37, 48);
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 300.0).collect();
        let x: Vec<f32> = (0..m * cols).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
        let mut blocks = vec![T::zeros(); rows * cols / 256];
        T::from_float(&w, &mut blocks);
        let row_bytes = cols / 256 * std::mem::size_of::<T>();
        let bytes = bytes_of(&blocks);
        let row = |i: usize| &bytes[i * row_bytes..(i + 1) * row_bytes];
        let mut tokens = vec![vec![BlockQ8K::zeros(); cols / 256]; m];
        for (t, token) in tokens.iter_mut().enumerate() {
            quantize_q8k(&x[t * cols..(t + 1) * cols], token);
        }
        let token_bytes: Vec<&[u8]> = tokens.iter().map(|t| bytes_of(t)).collect();
        let groups = Panels::laid_out(&token_bytes, cols / 256, lanes, Layout::Groups);
        let pairs = Panels::laid_out(&token_bytes, cols / 256, lanes, Layout::TokenPairs);
        let unpack_row = |i: usize, b: usize, u: &mut Unpacked| unpack(row(i), b, u);
        type Kernel<'a> = Box<dyn Fn(&mut [f32]) + 'a>;
        let mut kernels: Vec<(&str, Kernel)> = Vec::new();
        let runnable = KernelSet::runnable();
        if runnable.contains(&KernelSet::NeonDotprod) {
            kernels.push((
                "dot product panels",
                // SAFETY: dot products checked above; rows and panels hold whole blocks.
                Box::new(|out: &mut [f32]| unsafe {
                    panel_matmul::<SUB>(rows, cols / 256, unpack_row, &groups, out, lanes)
                }),
            ));
        }
        if runnable.contains(&KernelSet::NeonI8mm) {
            kernels.push((
                "i8mm panels",
                // SAFETY: i8mm checked above; rows and panels hold whole blocks.
                Box::new(|out: &mut [f32]| unsafe {
                    panel_matmul_i8mm::<SUB>(rows, cols / 256, unpack_row, &pairs, out, lanes)
                }),
            ));
        }
        println!("{:?}: {} panel kernels on this CPU", T::DTYPE, kernels.len());
        for (name, kernel) in kernels {
            let mut out = vec![f32::NAN; rows * lanes];
            kernel(&mut out);
            for r in 0..rows {
                for t in 0..m {
                    let mut want = [0f32];
                    // SAFETY: the plain kernel runs on every CPU; the row and token hold whole blocks.
                    unsafe { plain_tile(row(r), &[&tokens[t]], &mut want) };
                    assert_eq!(out[r * lanes + t].to_bits(), want[0].to_bits(), "{name}: row {r} token {t}");
                }
            }
        }
    }

    #[test]
    fn q4k_panels_give_the_plain_kernels_bits() {
        agree::<BlockQ4K, 32>(unpack_q4k, block::TABLE.q4k_tile);
    }

    #[test]
    fn q6k_panels_give_the_plain_kernels_bits() {
        agree::<BlockQ6K, 16>(unpack_q6k, block::TABLE.q6k_tile);
    }
}
