//! The AVX2 kernel set, x86-64's baseline (every x86 CPU Quire runs on): the per-token tiles
//! (four tokens a pass over a weight row), the unpacking every x86 panel kernel uses, the tiles'
//! end of a block, and panels for CPUs without AVX-512 VNNI or AVX-VNNI: the same panels of 16
//! tokens as `avx512.rs`, each as two halves of 8 in 256-bit vectors. Without `vpdpbusd`,
//! `vpmaddubsw` turns four weights of a row times the same four positions of 8 tokens into 16
//! sums of two products; these are added as 16-bit integers over as many groups as cannot overflow, then
//! `vpmaddwd` multiplies them by the sub-block's scale into 32-bit sums.
//!
//! Exactness: the same two integers per (row, token) block as every other kernel (integer sums
//! are exact whatever their grouping), then `canonical`'s two fused multiply-adds: a token's
//! result equals the per-token tiles' bit for bit, so a prompt's logits do not depend on how it
//! was batched.

use candle_core::quantized::k_quants::BlockQ8K;
use std::arch::x86_64::*;

use super::block::{self, f16_at, pair, Unpacked, Q4K_BYTES, Q6K_BYTES, Q6K_D, Q6K_HIGH, Q6K_SCALES};
use super::panels::{each_block, Layout, Panels, PANEL};
use super::q4k::{q4k_block, Q4kBlock};
use super::{panel_kernel, q8k_block, token_bytes, KernelTable, Q8K_BYTES, QK_K, TILE};

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

/// The per-token kernels' end of a block for a tile of up to 4 tokens: each token's two
/// integers arrive as 8 partial sums (`first[t]`, `second[t]`), are summed exactly, and go
/// through `canonical` with token t in lane t of `acc`.
#[inline(always)]
unsafe fn finish_block(first: &[__m256i; 4], second: &[__m256i; 4], d: f32, m: f32, yd: __m128, acc: __m128) -> __m128 {
    let first = _mm_cvtepi32_ps(totals(first));
    let second = _mm_cvtepi32_ps(totals(second));
    let acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(d), yd), first, acc);
    _mm_fnmadd_ps(_mm_mul_ps(_mm_set1_ps(m), yd), second, acc)
}

/// A tile's end of block `b` for its `n` tokens: `finish_one` for one, else `finish_block`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn finish_tile(
    first: &[__m256i; 4],
    second: &[__m256i; 4],
    d: f32,
    m: f32,
    ys: &[&[u8]; 4],
    n: usize,
    b: usize,
    acc: __m128,
) -> __m128 {
    if n == 1 {
        finish_one(first[0], second[0], d, m, q8k_block(ys[0], b).0, acc)
    } else {
        finish_block(first, second, d, m, token_scales(ys, n, b), acc)
    }
}

/// `finish_block` for a tile of one token (decoding): its two integers reduced together, lane 0
/// of `acc` updated by the same two fused multiply-adds.
#[inline(always)]
unsafe fn finish_one(first: __m256i, second: __m256i, d: f32, m: f32, yd: f32, acc: __m128) -> __m128 {
    // [f01 f23 s01 s23 | f45 f67 s45 s67], then [f0123 s0123 … | f4567 s4567 …].
    let h = _mm256_hadd_epi32(first, second);
    let h = _mm256_hadd_epi32(h, h);
    let totals = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h)));
    let acc = _mm_fmadd_ss(_mm_set_ss(d * yd), totals, acc);
    _mm_fnmadd_ss(_mm_set_ss(m * yd), _mm_movehdup_ps(totals), acc)
}

/// The sum of each of four vectors' eight 32-bit lanes, as lanes 0..4.
#[inline(always)]
unsafe fn totals(v: &[__m256i; 4]) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// The tile's tokens' scales of block `b` (0 for lanes without a token).
#[inline(always)]
unsafe fn token_scales(ys: &[&[u8]; 4], n: usize, b: usize) -> __m128 {
    let mut yd = [0f32; 4];
    for t in 0..n {
        let y = &ys[t][b * Q8K_BYTES..];
        yd[t] = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
    }
    _mm_loadu_ps(yd.as_ptr())
}

/// Each sub-block's min twice, against the token's two 16-value sums per sub-block.
#[inline(always)]
pub(super) unsafe fn min_pairs(mn: &[u8; 8]) -> __m256i {
    let mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(mn.as_ptr() as *const __m128i));
    _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins))
}

/// 32 weights per instruction: `maddubs` pairs the nibbles with the token's bytes and
/// `madd` scales the pairs into 32-bit sums. Each block ends in `block::canonical`, as the
/// AVX-512 kernels and both panel kernels do, so every kernel gives the same bits.
pub unsafe fn q4k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let blocks = row.len() / Q4K_BYTES;
    let ys = token_bytes(tokens);
    let mut acc = _mm_setzero_ps();
    let low = _mm256_set1_epi8(0xF);
    for b in 0..blocks {
        block::prefetch_ahead(row.as_ptr().add(b * Q4K_BYTES), Q4K_BYTES);
        let Q4kBlock { d, dmin, scales: sc, mins: mn, nibbles: qs } = q4k_block(row, b);
        // The block's 256 weights as 8 vectors of 32 unsigned nibbles, and their scales.
        let mut q4 = [_mm256_setzero_si256(); 8];
        let mut scale = [_mm256_setzero_si256(); 8];
        for j in 0..4 {
            let bits = _mm256_loadu_si256(qs.add(32 * j) as *const __m256i);
            q4[2 * j] = _mm256_and_si256(bits, low);
            q4[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low);
        }
        for j in 0..8 {
            scale[j] = _mm256_set1_epi16(sc[j] as i16);
        }
        let mins = min_pairs(&mn);
        let mut first = [_mm256_setzero_si256(); TILE];
        let mut second = [_mm256_setzero_si256(); TILE];
        for t in 0..n {
            let (_, q8) = q8k_block(ys[t], b);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..8 {
                let v = _mm256_loadu_si256(q8.add(32 * j) as *const __m256i);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale[j], _mm256_maddubs_epi16(q4[j], v)));
            }
            first[t] = sumi;
            second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(QK_K) as *const __m256i), mins);
        }
        acc = finish_tile(&first, &second, d, dmin, &ys, n, b, acc);
    }
    let mut sums = [0f32; TILE];
    _mm_storeu_ps(sums.as_mut_ptr(), acc);
    out.copy_from_slice(&sums[..n]);
}

/// Block `b` of a Q4_K row, unpacked for the panels (AVX2 instructions: every x86 panel
/// kernel uses it).
///
/// # Safety
/// `row` holds whole Q4_K blocks, `b` one of them.
pub unsafe fn unpack_q4k(row: &[u8], b: usize, out: &mut block::Unpacked) {
    use std::arch::x86_64::*;
    block::prefetch(row.as_ptr().wrapping_add((b + 1) * Q4K_BYTES), Q4K_BYTES);
    let Q4kBlock { d, dmin, scales: sc, mins: mn, nibbles: qs } = q4k_block(row, b);
    let low = _mm256_set1_epi8(0xF);
    for j in 0..4 {
        let bits = _mm256_loadu_si256(qs.add(32 * j) as *const __m256i);
        let w = out.weights.as_mut_ptr().add(64 * j) as *mut __m256i;
        _mm256_storeu_si256(w, _mm256_and_si256(bits, low));
        _mm256_storeu_si256(w.add(1), _mm256_and_si256(_mm256_srli_epi16::<4>(bits), low));
    }
    for (scale, &s) in out.scales.iter_mut().zip(&sc) {
        *scale = s as i32;
    }
    // Pairs 4.. are not read for Q4_K (its mins against the sums of 32 values take 4).
    for p in 0..4 {
        out.pairs[p] = block::pair(mn[2 * p] as i16, mn[2 * p + 1] as i16);
    }
    out.d = d;
    out.m = dmin;
}

/// Block `b`'s weights as 8 vectors of 32 bytes (0..64) in the order of the token's bytes,
/// and the block's d.
#[inline(always)]
unsafe fn q6k_weights(row: &[u8], b: usize) -> ([__m256i; 8], f32) {
    let x = row.as_ptr().add(b * Q6K_BYTES);
    let low = _mm256_set1_epi8(0xF);
    let two = _mm256_set1_epi8(3);
    // Vector k holds weights 32k..32k+32.
    let mut q6 = [_mm256_setzero_si256(); 8];
    for j in 0..2 {
        let first = _mm256_loadu_si256(x.add(64 * j) as *const __m256i);
        let second = _mm256_loadu_si256(x.add(64 * j + 32) as *const __m256i);
        let h = _mm256_loadu_si256(x.add(Q6K_HIGH + 32 * j) as *const __m256i);
        // The high bit pairs of vectors 4j..4j+4, shifted above the nibbles.
        let high = [h, _mm256_srli_epi16::<2>(h), _mm256_srli_epi16::<4>(h), _mm256_srli_epi16::<6>(h)]
            .map(|bits| _mm256_slli_epi16::<4>(_mm256_and_si256(bits, two)));
        q6[4 * j] = _mm256_or_si256(_mm256_and_si256(first, low), high[0]);
        q6[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(second, low), high[1]);
        q6[4 * j + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(first), low), high[2]);
        q6[4 * j + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(second), low), high[3]);
    }
    (q6, f16_at(&row[b * Q6K_BYTES..], Q6K_D))
}

/// 32 weights per instruction: `maddubs` pairs the 6-bit weights with the token's bytes and
/// `madd` scales the pairs into 32-bit sums. Each block ends in `block::canonical` (first
/// integer Σ scale·q·y, second Σ scale·(16-value sum), m = 32·d), as every kernel does.
pub unsafe fn q6k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let blocks = row.len() / Q6K_BYTES;
    let ys = token_bytes(tokens);
    let mut acc = _mm_setzero_ps();
    for b in 0..blocks {
        block::prefetch_ahead(row.as_ptr().add(b * Q6K_BYTES), Q6K_BYTES);
        let (q6, d) = q6k_weights(row, b);
        let s = row.as_ptr().add(b * Q6K_BYTES + Q6K_SCALES);
        let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(s as *const __m128i));
        // Vector k's first 16 weights take scale 2k, the rest 2k+1.
        let s = s as *const i8;
        let scale: [__m256i; 8] = std::array::from_fn(|k| {
            _mm256_set_m128i(_mm_set1_epi16(*s.add(2 * k + 1) as i16), _mm_set1_epi16(*s.add(2 * k) as i16))
        });
        let mut first = [_mm256_setzero_si256(); TILE];
        let mut second = [_mm256_setzero_si256(); TILE];
        for t in 0..n {
            let (_, q8) = q8k_block(ys[t], b);
            let mut sumi = _mm256_setzero_si256();
            for k in 0..8 {
                let y = _mm256_loadu_si256(q8.add(32 * k) as *const __m256i);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale[k], _mm256_maddubs_epi16(q6[k], y)));
            }
            first[t] = sumi;
            second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(256) as *const __m256i), scales16);
        }
        acc = finish_tile(&first, &second, d, 32.0 * d, &ys, n, b, acc);
    }
    let mut sums = [0f32; TILE];
    _mm_storeu_ps(sums.as_mut_ptr(), acc);
    out.copy_from_slice(&sums[..n]);
}

/// Block `b` of a Q6_K row, unpacked for the panels (AVX2 instructions: every x86 panel
/// kernel uses it).
///
/// # Safety
/// `row` holds whole Q6_K blocks, `b` one of them.
pub unsafe fn unpack_q6k(row: &[u8], b: usize, out: &mut Unpacked) {
    block::prefetch(row.as_ptr().wrapping_add((b + 1) * Q6K_BYTES), Q6K_BYTES);
    let (q6, d) = q6k_weights(row, b);
    for (k, q) in q6.iter().enumerate() {
        _mm256_storeu_si256(out.weights.as_mut_ptr().add(32 * k) as *mut __m256i, *q);
    }
    let sc = &row[b * Q6K_BYTES + Q6K_SCALES..b * Q6K_BYTES + Q6K_SCALES + 16];
    for (scale, &s) in out.scales.iter_mut().zip(sc) {
        *scale = s as i8 as i32;
    }
    for u in 0..8 {
        out.pairs[u] = pair(sc[2 * u] as i8 as i16, sc[2 * u + 1] as i8 as i16);
    }
    out.d = d;
    out.m = 32.0 * d;
}

// The set's table: its tiles and its panels.
panel_kernel!(q4k_panels, matmul, unpack_q4k, 32, Q4K_BYTES);
panel_kernel!(q6k_panels, matmul, unpack_q6k, 16, Q6K_BYTES);

/// AVX2's kernels.
pub static TABLE: KernelTable = KernelTable {
    q4k_tile,
    q6k_tile,
    q4k_panels: Some(q4k_panels),
    q6k_panels: Some(q6k_panels),
    q8_0_dot: super::q8_0::candle_x86,
};
