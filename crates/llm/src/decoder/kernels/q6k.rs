//! The Q6_K × Q8_K dot product for a tile of tokens: each block's 6-bit weights (low nibbles
//! and high bit pairs) and its 16 scales are unpacked once for the tile. Q6_K stores a weight
//! as `q - 32` with `q` in 0..64; the kernels multiply by `q` and take `32 · scale · Σ y` back
//! with the token's 16-value sums, in integers, so a block's sum is exact (the same integer
//! as candle's kernel computes).

use super::block::{self, Q6K_BYTES};
use super::{bytes_of, token_bytes, Tiles};
use candle_core::quantized::k_quants::{BlockQ6K, BlockQ8K};

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
use super::{
    block::{f16_at, Q6K_D as D, Q6K_HIGH as HIGH, Q6K_SCALES as SCALES},
    q8k_block, TILE,
};

const _: () = assert!(std::mem::size_of::<BlockQ6K>() == Q6K_BYTES);

/// The plain-Rust kernel (`block`), on bytes.
fn portable(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let ys = token_bytes(tokens);
    block::dot_tile(row, Q6K_BYTES, 16, block::unpack_q6k, &ys[..tokens.len()], out)
}

/// The format's kernels in every instruction set.
pub const TILES: Tiles = Tiles {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    avx512: avx512::dot_tile,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    avx2: avx2::dot_tile,
    #[cfg(target_arch = "aarch64")]
    dotprod: super::neon::q6k_dotprod,
    #[cfg(target_arch = "aarch64")]
    neon: super::neon::q6k_plain,
    portable,
};

/// `out[t] = row · tokens[t]` for up to `TILE` tokens; `row` is one weight row's blocks and
/// each token one activation row quantized to Q8_K.
pub fn dot_tile(row: &[BlockQ6K], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    TILES.dot(bytes_of(row), tokens, out)
}

/// 64 weights per vector: `maddubs` pairs the 6-bit weights with the token's bytes and
/// `dpwssd` (VNNI) scales and accumulates in one step. Each block ends in `panel::canonical`
/// (first integer Σ scale·q·y, second Σ scale·(16-value sum), m = 32·d), so this kernel and
/// the panels give the same bits.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx512 {
    use super::super::panel;
    use super::*;
    use std::arch::x86_64::*;

    /// Block `b`'s weights as 4 vectors of 64 bytes (0..64) in the order of the token's bytes,
    /// and its 16 scales as words.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn weights_of(row: &[u8], b: usize) -> ([__m512i; 4], __m256i, f32) {
        let x = row.as_ptr().add(b * Q6K_BYTES);
        let low = _mm512_set1_epi8(0xF);
        let two = _mm512_set1_epi8(3);
        let mut q6 = [_mm512_setzero_si512(); 4];
        for j in 0..2 {
            let nibbles = _mm512_loadu_si512(x.add(64 * j) as *const _);
            let h = _mm256_loadu_si256(x.add(HIGH + 32 * j) as *const __m256i);
            let high = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(h), _mm256_srli_epi16::<2>(h));
            q6[2 * j] =
                _mm512_or_si512(_mm512_and_si512(nibbles, low), _mm512_slli_epi16::<4>(_mm512_and_si512(high, two)));
            q6[2 * j + 1] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(nibbles), low),
                _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srli_epi16::<4>(high), two)),
            );
        }
        let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.add(SCALES) as *const __m128i));
        (q6, scales16, f16_at(&row[b * Q6K_BYTES..], D))
    }

    /// Word w of vector v takes scale 4v + w/8 (each scale covers 16 weights, 8 words): the
    /// `permutexvar` indices that spread a block's 16 scales over its 4 vectors.
    const SPREAD: [[i16; 32]; 4] = {
        let mut idx = [[0i16; 32]; 4];
        let mut i = 0;
        while i < 128 {
            idx[i / 32][i % 32] = (4 * (i / 32) + i % 32 / 8) as i16;
            i += 1;
        }
        idx
    };

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q6K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = _mm_setzero_ps();
        let spread = SPREAD.map(|idx| _mm512_loadu_si512(idx.as_ptr() as *const _));
        for b in 0..blocks {
            let (q6, scales16, d) = weights_of(row, b);
            let all = _mm512_castsi256_si512(scales16);
            let scale = spread.map(|s| _mm512_permutexvar_epi16(s, all));
            let mut first = [_mm256_setzero_si256(); TILE];
            let mut second = [_mm256_setzero_si256(); TILE];
            for t in 0..n {
                let (_, q8) = q8k_block(ys[t], b);
                let mut sumi = _mm512_setzero_si512();
                for v in 0..4 {
                    let y = _mm512_loadu_si512(q8.add(64 * v) as *const _);
                    sumi = _mm512_dpwssd_epi32(sumi, scale[v], _mm512_maddubs_epi16(q6[v], y));
                }
                first[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
                second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(256) as *const __m256i), scales16);
            }
            acc = panel::finish_tile(&first, &second, d, 32.0 * d, &ys, n, b, acc);
        }
        let mut sums = [0f32; TILE];
        _mm_storeu_ps(sums.as_mut_ptr(), acc);
        out.copy_from_slice(&sums[..n]);
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub use avx2::unpack;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use super::super::block::{pair, Unpacked};
    use super::super::panel;
    use super::*;
    use std::arch::x86_64::*;

    /// Block `b`'s weights as 8 vectors of 32 bytes (0..64) in the order of the token's bytes,
    /// and the block's d.
    #[inline(always)]
    unsafe fn weights_of(row: &[u8], b: usize) -> ([__m256i; 8], f32) {
        let x = row.as_ptr().add(b * Q6K_BYTES);
        let low = _mm256_set1_epi8(0xF);
        let two = _mm256_set1_epi8(3);
        // Vector k holds weights 32k..32k+32.
        let mut q6 = [_mm256_setzero_si256(); 8];
        for j in 0..2 {
            let first = _mm256_loadu_si256(x.add(64 * j) as *const __m256i);
            let second = _mm256_loadu_si256(x.add(64 * j + 32) as *const __m256i);
            let h = _mm256_loadu_si256(x.add(HIGH + 32 * j) as *const __m256i);
            // The high bit pairs of vectors 4j..4j+4, shifted above the nibbles.
            let high = [h, _mm256_srli_epi16::<2>(h), _mm256_srli_epi16::<4>(h), _mm256_srli_epi16::<6>(h)]
                .map(|bits| _mm256_slli_epi16::<4>(_mm256_and_si256(bits, two)));
            q6[4 * j] = _mm256_or_si256(_mm256_and_si256(first, low), high[0]);
            q6[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(second, low), high[1]);
            q6[4 * j + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(first), low), high[2]);
            q6[4 * j + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(second), low), high[3]);
        }
        (q6, f16_at(&row[b * Q6K_BYTES..], D))
    }

    /// 32 weights per instruction: `maddubs` pairs the 6-bit weights with the token's bytes and
    /// `madd` scales the pairs into 32-bit sums. Each block ends in `panel::canonical` (first
    /// integer Σ scale·q·y, second Σ scale·(16-value sum), m = 32·d), as every kernel does.
    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q6K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = _mm_setzero_ps();
        for b in 0..blocks {
            let (q6, d) = weights_of(row, b);
            let s = row.as_ptr().add(b * Q6K_BYTES + SCALES);
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
            acc = panel::finish_tile(&first, &second, d, 32.0 * d, &ys, n, b, acc);
        }
        let mut sums = [0f32; TILE];
        _mm_storeu_ps(sums.as_mut_ptr(), acc);
        out.copy_from_slice(&sums[..n]);
    }

    /// Block `b` of a row, unpacked for the panels (AVX2 instructions: both panel kernels use
    /// it).
    ///
    /// # Safety
    /// `row` holds whole Q6_K blocks, `b` one of them.
    pub unsafe fn unpack(row: &[u8], b: usize, out: &mut Unpacked) {
        let (q6, d) = weights_of(row, b);
        for (k, q) in q6.iter().enumerate() {
            _mm256_storeu_si256(out.weights.as_mut_ptr().add(32 * k) as *mut __m256i, *q);
        }
        let sc = &row[b * Q6K_BYTES + SCALES..b * Q6K_BYTES + SCALES + 16];
        for (scale, &s) in out.scales.iter_mut().zip(sc) {
            *scale = s as i8 as i32;
        }
        for u in 0..8 {
            out.pairs[u] = pair(sc[2 * u] as i8 as i16, sc[2 * u + 1] as i8 as i16);
        }
        out.d = d;
        out.m = 32.0 * d;
    }
}
