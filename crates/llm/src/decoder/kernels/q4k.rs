//! The Q4_K × Q8_K dot product for a tile of tokens: each block's nibbles and 6-bit scales and
//! mins are unpacked once for the tile.

use super::block::{self, Q4K_BYTES};
use super::{bytes_of, token_bytes, Tiles};
use candle_core::quantized::k_quants::{BlockQ4K, BlockQ8K};

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
use super::{block::f16_at, q8k_block, QK_K, TILE};

const _: () = assert!(std::mem::size_of::<BlockQ4K>() == Q4K_BYTES);

/// Block `b` of a Q4_K row: scales, mins and where its 128 bytes of nibbles start.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
struct Q4kBlock {
    d: f32,
    dmin: f32,
    scales: [u8; 8],
    mins: [u8; 8],
    nibbles: *const u8,
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline(always)]
fn q4k_block(row: &[u8], b: usize) -> Q4kBlock {
    let x = &row[b * Q4K_BYTES..(b + 1) * Q4K_BYTES];
    let (scales, mins) = block::q4k_scales_and_mins(&x[4..16]);
    Q4kBlock { d: f16_at(x, 0), dmin: f16_at(x, 2), scales, mins, nibbles: x[16..].as_ptr() }
}

/// The plain-Rust kernel (`block`), on bytes.
fn portable(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let ys = token_bytes(tokens);
    block::dot_tile(row, Q4K_BYTES, 32, block::unpack_q4k, &ys[..tokens.len()], out)
}

/// The format's kernels in every instruction set.
pub const TILES: Tiles = Tiles {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    avx512: avx512::dot_tile,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    avx2: avx2::dot_tile,
    #[cfg(target_arch = "aarch64")]
    dotprod: super::neon::q4k_dotprod,
    #[cfg(target_arch = "aarch64")]
    neon: super::neon::q4k_plain,
    portable,
};

/// `out[t] = row · tokens[t]` for up to `TILE` tokens; `row` is one weight row's blocks and
/// each token one activation row quantized to Q8_K.
pub fn dot_tile(row: &[BlockQ4K], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    TILES.dot(bytes_of(row), tokens, out)
}

/// 64 weights (two sub-blocks) per instruction: `maddubs` pairs the nibbles with the token's
/// bytes and `dpwssd` (VNNI) scales and accumulates in one step. Each block ends in
/// `panel::canonical`, so this kernel and the panels give the same bits.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx512 {
    use super::super::panel;
    use super::*;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q4K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = _mm_setzero_ps();
        let low = _mm512_set1_epi8(0xF);
        for b in 0..blocks {
            let Q4kBlock { d, dmin, scales: sc, mins: mn, nibbles: qs } = q4k_block(row, b);
            // Vector j: sub-blocks 2j (low nibbles) and 2j+1 (high nibbles), in the order of
            // the token's bytes 64j..64j+64; their scales as 16 words each.
            let mut q4 = [_mm512_setzero_si512(); 4];
            let mut scale = [_mm512_setzero_si512(); 4];
            for j in 0..4 {
                let bits = _mm256_loadu_si256(qs.add(32 * j) as *const __m256i);
                let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(bits), _mm256_srli_epi16::<4>(bits));
                q4[j] = _mm512_and_si512(both, low);
                scale[j] = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi16(sc[2 * j] as i16)),
                    _mm256_set1_epi16(sc[2 * j + 1] as i16),
                );
            }
            let mins = avx2::min_pairs(&mn);
            let mut first = [_mm256_setzero_si256(); TILE];
            let mut second = [_mm256_setzero_si256(); TILE];
            for t in 0..n {
                let (_, q8) = q8k_block(ys[t], b);
                let mut sumi = _mm512_setzero_si512();
                for j in 0..4 {
                    let v = _mm512_loadu_si512(q8.add(64 * j) as *const _);
                    sumi = _mm512_dpwssd_epi32(sumi, scale[j], _mm512_maddubs_epi16(q4[j], v));
                }
                first[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
                second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(QK_K) as *const __m256i), mins);
            }
            acc = panel::finish_tile(&first, &second, d, dmin, &ys, n, b, acc);
        }
        let mut sums = [0f32; TILE];
        _mm_storeu_ps(sums.as_mut_ptr(), acc);
        out.copy_from_slice(&sums[..n]);
    }
}

/// Block `b` of a row, unpacked for the panels (AVX2 instructions: both panel kernels use it).
///
/// # Safety
/// `row` holds whole Q4_K blocks, `b` one of them.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub unsafe fn unpack(row: &[u8], b: usize, out: &mut block::Unpacked) {
    use std::arch::x86_64::*;
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

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use super::super::panel;
    use super::*;
    use std::arch::x86_64::*;

    /// Each sub-block's min twice, against the token's two 16-value sums per sub-block.
    #[inline(always)]
    pub(super) unsafe fn min_pairs(mn: &[u8; 8]) -> __m256i {
        let mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(mn.as_ptr() as *const __m128i));
        _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins))
    }

    /// 32 weights per instruction: `maddubs` pairs the nibbles with the token's bytes and
    /// `madd` scales the pairs into 32-bit sums. Each block ends in `panel::canonical`, as the
    /// AVX-512 kernels and both panel kernels do, so every kernel gives the same bits.
    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q4K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = _mm_setzero_ps();
        let low = _mm256_set1_epi8(0xF);
        for b in 0..blocks {
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
            acc = panel::finish_tile(&first, &second, d, dmin, &ys, n, b, acc);
        }
        let mut sums = [0f32; TILE];
        _mm_storeu_ps(sums.as_mut_ptr(), acc);
        out.copy_from_slice(&sums[..n]);
    }
}
