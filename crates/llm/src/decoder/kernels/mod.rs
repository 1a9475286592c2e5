//! Dot products of one quantized weight row with several tokens at once, for the k-quant
//! formats most of a Q4_K_M model is stored in (Q4_K, and Q6_K for the value and down
//! projections of half the layers and for the output). Each 256-weight block is unpacked once
//! and multiplied with every token of the tile, where candle's kernels unpack it again for
//! each token. A token's result is computed by the same instructions in the same order
//! whatever the tile holds, so it is bit-identical to computing it alone.
//!
//! The build baseline is x86-64-v3 (AVX2), so the app runs on any recent x86-64 CPU; where the
//! CPU has AVX-512 with VNNI the wider kernels run, chosen once per process.

use candle_core::quantized::k_quants::BlockQ8K;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod panel;
pub mod q4k;
pub mod q6k;

pub const QK_K: usize = 256;
/// Tokens handled per pass over a weight row.
pub const TILE: usize = 4;
/// Q8_K's byte layout (`repr(C)` in candle, fields private): d (f32), 256 i8, 16 i16 sums of
/// 16 values each.
pub const Q8K_BYTES: usize = 292;
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == Q8K_BYTES);

pub fn bytes_of<T>(blocks: &[T]) -> &[u8] {
    // SAFETY: plain `repr(C)` data read as bytes, same length in bytes.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks)) }
}

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
