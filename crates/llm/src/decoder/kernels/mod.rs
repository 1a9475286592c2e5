//! Dot products of one quantized weight row with several tokens at once, for the k-quant
//! formats most of a Q4_K_M model is stored in (Q4_K, and Q6_K for the value and down
//! projections of half the layers and for the output). Each 256-weight block is unpacked once
//! and multiplied with every token of the tile, where candle's kernels unpack it again for
//! each token. A token's result is computed by the same instructions in the same order
//! whatever the tile holds, so it is bit-identical to computing it alone.
//!
//! Prompt-sized batches go through panels of 16 tokens (`panel`, `panel_avx2`), which multiply
//! several rows with all 16 at once.
//!
//! The build baseline is x86-64-v3 (AVX2), so the app runs on any recent x86-64 CPU; where the
//! CPU has AVX-512 with VNNI the wider kernels run, chosen once per process. Every kernel ends
//! each block in the same two exact integers and the same two fused multiply-adds
//! (`panel::canonical`), so they all give the same bits.

use candle_core::quantized::k_quants::BlockQ8K;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod panel;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod panel_avx2;
pub mod q4k;
pub mod q6k;

pub const QK_K: usize = 256;
/// Tokens handled per pass over a weight row.
pub const TILE: usize = 4;
/// Q8_K's byte layout (`repr(C)` in candle, fields private): d (f32), 256 i8, 16 i16 sums of
/// 16 values each.
pub const Q8K_BYTES: usize = 292;
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == Q8K_BYTES);

// For the AVX2 kernels, and the tests' bit-for-bit comparisons on every CPU.
#[cfg(any(test, all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
pub fn bytes_of<T>(blocks: &[T]) -> &[u8] {
    // SAFETY: plain `repr(C)` data read as bytes, same length in bytes.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks)) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Each token's blocks as bytes (the kernels read them by offset).
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn token_bytes<'a>(tokens: &[&'a [BlockQ8K]]) -> [&'a [u8]; TILE] {
    let mut ys: [&[u8]; TILE] = [&[]; TILE];
    for (y, t) in ys.iter_mut().zip(tokens) {
        *y = bytes_of(t);
    }
    ys
}

/// Block `b` of a Q8_K token: its scale and where its 256 bytes (then 16 sums) start.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline(always)]
pub fn q8k_block(token: &[u8], b: usize) -> (f32, *const u8) {
    let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
    (f32::from_le_bytes([y[0], y[1], y[2], y[3]]), y[4..].as_ptr())
}

/// Whether the AVX-512 kernels run: where the CPU has them (Intel since Ice Lake, AMD since
/// Zen 4). `QUIRE_KERNELS=avx2` keeps the baseline kernels, for side-by-side measurements.
/// Chosen once per process, so every token of a run goes through the same ones.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn wide_kernel() -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| std::env::var("QUIRE_KERNELS").map_or(true, |k| k != "avx2") && cpu_has_avx512_vnni())
}

/// The CPU features the AVX-512 kernels need.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn cpu_has_avx512_vnni() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// A tile kernel's signature: one row's blocks (as bytes), up to `TILE` tokens, their results.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub type TileKernel = unsafe fn(&[u8], &[&[BlockQ8K]], &mut [f32]);

/// `out[t] = row · tokens[t]` for up to `TILE` tokens, through a format's AVX-512 kernel where
/// `wide_kernel`, else its AVX2 one.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn dispatch(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32], wide: TileKernel, narrow: TileKernel) {
    debug_assert!(tokens.len() <= TILE && out.len() == tokens.len());
    if wide_kernel() {
        // SAFETY: the CPU has AVX-512 F/BW/VNNI (checked at run time).
        unsafe { wide(row, tokens, out) }
    } else {
        // SAFETY: the build targets AVX2 and FMA (checked by the cfg above).
        unsafe { narrow(row, tokens, out) }
    }
}

/// candle's dot product per token, where the build has no x86 kernels.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
pub fn portable<T: candle_core::quantized::k_quants::GgmlType<VecDotType = BlockQ8K>>(
    row: &[T],
    tokens: &[&[BlockQ8K]],
    out: &mut [f32],
) {
    for (o, t) in out.iter_mut().zip(tokens) {
        *o = T::vec_dot(row.len() * QK_K, row, t);
    }
}

/// The kernels in use, for benchmark and log lines.
pub fn kernel_name() -> &'static str {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return if wide_kernel() { "AVX-512 VNNI" } else { "AVX2" };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    "portable"
}

/// `x` (whole blocks of 256) quantized to Q8_K, bit for bit as candle's `BlockQ8K::from_float`
/// (each block scaled so its largest magnitude is -128, rounded half away from zero, capped at
/// 127), 8 values per instruction where the build has AVX2.
pub fn quantize_q8k(x: &[f32], out: &mut [BlockQ8K]) {
    assert_eq!(x.len(), out.len() * QK_K, "Q8_K quantizes whole blocks of {QK_K}");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    for (xs, block) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        // SAFETY: the build targets AVX2; `block` is 292 bytes of plain data (d, 256 i8, 16 i16).
        unsafe { quantize_block(xs, (block as *mut BlockQ8K) as *mut u8) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    <BlockQ8K as candle_core::quantized::k_quants::GgmlType>::from_float(x, out);
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
unsafe fn quantize_block(xs: &[f32], block: *mut u8) {
    use std::arch::x86_64::*;
    let p = xs.as_ptr();
    let sign = _mm256_set1_ps(-0.0);
    let mut amax = _mm256_setzero_ps();
    for c in (0..QK_K).step_by(8) {
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(c))));
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), amax);
    let amax = lanes.iter().cloned().fold(0f32, f32::max);
    let qs = block.add(4) as *mut i8;
    let sums = block.add(4 + QK_K) as *mut i16;
    if amax == 0.0 {
        std::ptr::write_bytes(block, 0, Q8K_BYTES);
        return;
    }
    // The first value of the largest magnitude, with its sign (as candle picks it).
    let max = *xs.iter().find(|x| x.abs() == amax).unwrap_or(&amax);
    let iscale = -128f32 / max;
    let scale = _mm256_set1_ps(iscale);
    let half = _mm256_set1_ps(0.5);
    let one = _mm256_set1_ps(1.0);
    let cap = _mm256_set1_ps(127.0);
    for c in (0..QK_K).step_by(16) {
        let mut ints = [_mm256_setzero_si256(); 2];
        for (i, v) in ints.iter_mut().enumerate() {
            let y = _mm256_mul_ps(scale, _mm256_loadu_ps(p.add(c + 8 * i)));
            // Half away from zero: truncate, then one step away where the dropped part is ≥ ½.
            let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
            let away = _mm256_cmp_ps::<_CMP_GE_OQ>(_mm256_andnot_ps(sign, _mm256_sub_ps(y, t)), half);
            let step = _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(sign, y)));
            *v = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_add_ps(t, step), cap));
        }
        // 16 values as i16 (in order), their sum, and as i8.
        let words = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(ints[0], ints[1]));
        let bytes = _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256::<1>(words));
        _mm_storeu_si128(qs.add(c) as *mut __m128i, bytes);
        let pairs = _mm256_madd_epi16(words, _mm256_set1_epi16(1));
        let mut s = [0i32; 8];
        _mm256_storeu_si256(s.as_mut_ptr() as *mut __m256i, pairs);
        sums.add(c / 16).write_unaligned(s.iter().sum::<i32>() as i16);
    }
    (block as *mut f32).write_unaligned(1.0 / iscale);
}

#[cfg(test)]
mod quantize_tests {
    use super::*;
    use candle_core::quantized::k_quants::GgmlType;

    /// Bit for bit as candle's quantizer, ties (x.5 after scaling) and all-zero blocks included.
    #[test]
    fn q8k_quantization_equals_candles() {
        let mut x: Vec<f32> = (0..4 * QK_K).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 37.0).collect();
        // Block 1: the largest magnitude 128 and negative, so values scale by exactly 1: halves tie.
        for (j, v) in x[QK_K..2 * QK_K].iter_mut().enumerate() {
            *v = (j as f32 - 128.0) / 2.0 + 0.25 * (j % 3) as f32;
        }
        x[QK_K] = -128.0;
        x[2 * QK_K..3 * QK_K].fill(0.0);
        let mut ours = vec![BlockQ8K::zeros(); 4];
        let mut candles = vec![BlockQ8K::zeros(); 4];
        quantize_q8k(&x, &mut ours);
        BlockQ8K::from_float(&x, &mut candles);
        assert_eq!(bytes_of(&ours), bytes_of(&candles));
    }
}
