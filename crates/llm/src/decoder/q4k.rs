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

/// Each token's blocks as bytes (the kernels read them by offset).
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
fn token_bytes<'a>(tokens: &[&'a [BlockQ8K]]) -> [&'a [u8]; TILE] {
    let mut ys: [&[u8]; TILE] = [&[]; TILE];
    for (y, t) in ys.iter_mut().zip(tokens) {
        *y = bytes_of(t);
    }
    ys
}

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
    let (scales, mins) = scales_and_mins(&x[4..16]);
    Q4kBlock { d: f16_at(x, 0), dmin: f16_at(x, 2), scales, mins, nibbles: x[16..].as_ptr() }
}

/// Block `b` of a Q8_K token: its scale and where its 256 bytes (then 16 sums) start.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline(always)]
fn q8k_block(token: &[u8], b: usize) -> (f32, *const u8) {
    let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
    (f32::from_le_bytes([y[0], y[1], y[2], y[3]]), y[4..].as_ptr())
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
        if wide_kernel() {
            // SAFETY: the CPU has AVX-512 F/BW/VNNI (checked at run time).
            unsafe { avx512::dot_tile(bytes_of(row), tokens, out) }
        } else {
            // SAFETY: the build targets AVX2 and FMA (checked by the cfg above).
            unsafe { avx2::dot_tile(bytes_of(row), tokens, out) }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    {
        for (o, t) in out.iter_mut().zip(tokens) {
            *o = BlockQ4K::vec_dot(row.len() * QK_K, row, t);
        }
    }
}

/// Whether the AVX-512 kernel runs: the build baseline is x86-64-v3 (AVX2), so the app runs on
/// any recent x86-64 CPU, and this picks the wider kernel where the CPU has it (Intel since Ice
/// Lake, AMD since Zen 4). `QUIRE_KERNELS=avx2` keeps the baseline kernel, for side-by-side
/// measurements. Chosen once per process, so every token of a run goes through the same one.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn wide_kernel() -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| std::env::var("QUIRE_KERNELS").map_or(true, |k| k != "avx2") && cpu_has_avx512_vnni())
}

/// The CPU features the AVX-512 kernel needs.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
fn cpu_has_avx512_vnni() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vnni")
}

/// The kernel in use, for benchmark and log lines.
pub fn kernel_name() -> &'static str {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return if wide_kernel() { "AVX-512 VNNI" } else { "AVX2" };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    "portable"
}

/// The same sums as `avx2`, 64 weights (two sub-blocks) per instruction: `maddubs` pairs the
/// nibbles with the token's bytes and `dpwssd` (VNNI) scales and accumulates in one step. The
/// integer sums are exact in both kernels; only the float accumulation runs over 16 lanes
/// instead of 8.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q4K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = [_mm512_setzero_ps(); TILE];
        let mut acc_min = [_mm256_setzero_ps(); TILE];
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
            for t in 0..n {
                let (yd, q8) = q8k_block(ys[t], b);
                let mut sumi = _mm512_setzero_si512();
                for j in 0..4 {
                    let v = _mm512_loadu_si512(q8.add(64 * j) as *const _);
                    sumi = _mm512_dpwssd_epi32(sumi, scale[j], _mm512_maddubs_epi16(q4[j], v));
                }
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d * yd), _mm512_cvtepi32_ps(sumi), acc[t]);
                acc_min[t] = avx2::add_min_term(q8, mins, dmin * yd, acc_min[t]);
            }
        }
        for t in 0..n {
            out[t] = _mm512_reduce_add_ps(acc[t]) - avx2::hsum(acc_min[t]);
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use super::*;
    pub(super) use crate::decoder::attention::hsum;
    use std::arch::x86_64::*;

    /// Each sub-block's min twice, against the token's two 16-value sums per sub-block.
    #[inline(always)]
    pub(super) unsafe fn min_pairs(mn: &[u8; 8]) -> __m256i {
        let mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(mn.as_ptr() as *const __m128i));
        _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins))
    }

    /// `acc` plus `scale` times the mins against the sub-block sums that follow a Q8_K
    /// block's 256 bytes at `q8`.
    #[inline(always)]
    pub(super) unsafe fn add_min_term(q8: *const u8, mins: __m256i, scale: f32, acc: __m256) -> __m256 {
        let sums = _mm256_loadu_si256(q8.add(QK_K) as *const __m256i);
        let m = _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, mins));
        _mm256_fmadd_ps(_mm256_set1_ps(scale), m, acc)
    }

    pub unsafe fn dot_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
        let n = tokens.len();
        let blocks = row.len() / Q4K_BYTES;
        let ys = token_bytes(tokens);
        let mut acc = [_mm256_setzero_ps(); TILE];
        let mut acc_min = [_mm256_setzero_ps(); TILE];
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
            for t in 0..n {
                let (yd, q8) = q8k_block(ys[t], b);
                let mut sumi = _mm256_setzero_si256();
                for j in 0..8 {
                    let v = _mm256_loadu_si256(q8.add(32 * j) as *const __m256i);
                    let p16 = _mm256_maddubs_epi16(q4[j], v);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale[j], p16));
                }
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * yd), _mm256_cvtepi32_ps(sumi), acc[t]);
                acc_min[t] = add_min_term(q8, mins, dmin * yd, acc_min[t]);
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

    /// Both x86 kernels against candle's on a 16-block row (every scale and min packing, bytes
    /// down to -128), where the CPU has both; the wide one is what runs on such a CPU.
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    #[test]
    fn the_avx512_kernel_gives_the_avx2_kernels_sums() {
        let cols = 16 * QK_K;
        let w: Vec<f32> = (0..cols).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / (1.0 + (i / 256) as f32)).collect();
        let mut row = vec![BlockQ4K::zeros(); cols / QK_K];
        BlockQ4K::from_float(&w, &mut row);
        let tokens: Vec<Vec<BlockQ8K>> = (0..TILE)
            .map(|t| {
                let x: Vec<f32> = (0..cols).map(|i| ((i * (31 + t) % 257) as f32 - 128.0) / 3.0).collect();
                let mut q = vec![BlockQ8K::zeros(); cols / QK_K];
                BlockQ8K::from_float(&x, &mut q);
                q
            })
            .collect();
        let refs: Vec<&[BlockQ8K]> = tokens.iter().map(|t| t.as_slice()).collect();
        let mut narrow = vec![0f32; TILE];
        unsafe { avx2::dot_tile(bytes_of(&row), &refs, &mut narrow) };
        for t in 0..TILE {
            let candle = BlockQ4K::vec_dot(cols, &row, &tokens[t]);
            assert!((candle - narrow[t]).abs() <= 1e-4 * candle.abs().max(1.0), "AVX2 token {t}: {} vs {candle}", narrow[t]);
        }
        if !cpu_has_avx512_vnni() {
            println!("this CPU has no AVX-512 VNNI: only the AVX2 kernel checked");
            return;
        }
        let mut wide = vec![0f32; TILE];
        unsafe { avx512::dot_tile(bytes_of(&row), &refs, &mut wide) };
        for t in 0..TILE {
            assert!((wide[t] - narrow[t]).abs() <= 1e-5 * narrow[t].abs().max(1.0), "token {t}: {} vs {}", wide[t], narrow[t]);
            let mut single = [0f32];
            unsafe { avx512::dot_tile(bytes_of(&row), &refs[t..t + 1], &mut single) };
            assert_eq!(single[0].to_bits(), wide[t].to_bits(), "token {t}: batch changed the result");
        }
    }
}
