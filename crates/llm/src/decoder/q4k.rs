//! The Q4_K × Q8_K dot product for several tokens at once (AVX2): each 256-weight block is
//! unpacked (nibbles, 6-bit scales and mins) once and multiplied with every token of the
//! batch, where candle's kernel unpacks it again for each token. Batched verification of
//! drafted tokens and prompt processing get cheaper per token; a token's result is computed
//! by the same instructions in the same order whatever the batch size, so it is bit-identical
//! to computing it alone.

use candle_core::quantized::k_quants::{BlockQ4K, BlockQ8K};
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))))]
use candle_core::quantized::k_quants::GgmlType;

const QK_K: usize = 256;
/// Tokens handled per pass over a weight row.
pub const TILE: usize = 4;

/// Byte layout of the blocks (`repr(C)` in candle, fields private): Q4_K is d, dmin (f16),
/// 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles; Q8_K is d (f32), 256 i8,
/// 16 i16 sums of 16 values each.
const Q4K_BYTES: usize = 144;
const Q8K_BYTES: usize = 292;
const _: () = assert!(std::mem::size_of::<BlockQ4K>() == Q4K_BYTES && std::mem::size_of::<BlockQ8K>() == Q8K_BYTES);

fn bytes_of<T>(blocks: &[T]) -> &[u8] {
    // SAFETY: plain `repr(C)` data read as bytes, same length in bytes.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks)) }
}

/// The 8 sub-block scales and mins of a Q4_K block.
#[inline(always)]
fn scales_and_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        if j < 4 {
            sc[j] = s[j] & 63;
            mn[j] = s[j + 4] & 63;
        } else {
            sc[j] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
            mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
    }
    (sc, mn)
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// `out[t] = row · tokens[t]` for up to `TILE` tokens; `row` is one weight row's blocks and
/// each token one activation row quantized to Q8_K.
pub fn dot_tile(row: &[BlockQ4K], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    debug_assert!(tokens.len() <= TILE && out.len() == tokens.len());
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        // SAFETY: the build targets AVX2 and FMA (checked by the cfg above).
        unsafe { avx2::dot_tile(bytes_of(row), tokens, out) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    {
        for (o, t) in out.iter_mut().zip(tokens) {
            *o = BlockQ4K::vec_dot(row.len() * QK_K, row, t);
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn hsum(x: __m256) -> f32 {
        let r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        let r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        let r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q4K_BYTES;
        let ys: Vec<&[u8]> = tokens.iter().map(|t| bytes_of(t)).collect();
        let mut acc = [_mm256_setzero_ps(); TILE];
        let mut acc_min = [_mm256_setzero_ps(); TILE];
        let low = _mm256_set1_epi8(0xF);
        for b in 0..blocks {
            let x = &row[b * Q4K_BYTES..(b + 1) * Q4K_BYTES];
            let d = f16_at(x, 0);
            let dmin = f16_at(x, 2);
            let (sc, mn) = scales_and_mins(&x[4..16]);
            let qs = x[16..].as_ptr();
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
            // Each sub-block's min twice, against the token's two 16-value sums per sub-block.
            let mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(mn.as_ptr() as *const __m128i));
            let mins = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
            for t in 0..n {
                let y = &ys[t][b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
                let yd = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
                let q8 = y[4..].as_ptr();
                let mut sumi = _mm256_setzero_si256();
                for j in 0..8 {
                    let v = _mm256_loadu_si256(q8.add(32 * j) as *const __m256i);
                    let p16 = _mm256_maddubs_epi16(q4[j], v);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale[j], p16));
                }
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * yd), _mm256_cvtepi32_ps(sumi), acc[t]);
                let sums = _mm256_loadu_si256(q8.add(QK_K) as *const __m256i);
                let m = _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, mins));
                acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * yd), m, acc_min[t]);
            }
        }
        for t in 0..n {
            out[t] = hsum(acc[t]) - hsum(acc_min[t]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_match_candles_kernel_and_do_not_depend_on_the_batch() {
        let cols = 512;
        let w: Vec<f32> = (0..cols).map(|i| ((i * 31 % 97) as f32 - 48.0) / 20.0).collect();
        let mut row = vec![BlockQ4K::zeros(); cols / QK_K];
        BlockQ4K::from_float(&w, &mut row);
        let tokens: Vec<Vec<BlockQ8K>> = (0..TILE)
            .map(|t| {
                let x: Vec<f32> = (0..cols).map(|i| (((i + 7 * t) * 13 % 41) as f32 - 20.0) / 9.0).collect();
                let mut q = vec![BlockQ8K::zeros(); cols / QK_K];
                BlockQ8K::from_float(&x, &mut q);
                q
            })
            .collect();
        let refs: Vec<&[BlockQ8K]> = tokens.iter().map(|t| t.as_slice()).collect();
        let mut tile = vec![0f32; TILE];
        dot_tile(&row, &refs, &mut tile);
        for t in 0..TILE {
            let mut single = [0f32];
            dot_tile(&row, &refs[t..t + 1], &mut single);
            assert_eq!(single[0].to_bits(), tile[t].to_bits(), "token {t}: batch changed the result");
            let candle = BlockQ4K::vec_dot(cols, &row, &tokens[t]);
            assert!((candle - tile[t]).abs() <= 1e-3 * candle.abs().max(1.0), "token {t}: {} vs candle {candle}", tile[t]);
        }
    }
}
