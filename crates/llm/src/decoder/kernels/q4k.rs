//! Q4_K: its layout as the x86 kernels read it, and its dot product with a tile of tokens by
//! the kernel set in use (each set's tiles unpack a block's nibbles and 6-bit scales and mins
//! once for the tile).

use super::block::Q4K_BYTES;
use super::bytes_of;
use candle_core::quantized::k_quants::{BlockQ4K, BlockQ8K};

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
use super::block::{self, f16_at};

const _: () = assert!(std::mem::size_of::<BlockQ4K>() == Q4K_BYTES);

/// Block `b` of a Q4_K row: scales, mins and where its 128 bytes of nibbles start.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub(super) struct Q4kBlock {
    pub d: f32,
    pub dmin: f32,
    pub scales: [u8; 8],
    pub mins: [u8; 8],
    pub nibbles: *const u8,
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline(always)]
pub(super) fn q4k_block(row: &[u8], b: usize) -> Q4kBlock {
    let x = &row[b * Q4K_BYTES..(b + 1) * Q4K_BYTES];
    let (scales, mins) = block::q4k_scales_and_mins(&x[4..16]);
    Q4kBlock { d: f16_at(x, 0), dmin: f16_at(x, 2), scales, mins, nibbles: x[16..].as_ptr() }
}

/// `out[t] = row · tokens[t]` for up to `TILE` tokens, by the set in use; `row` is one weight
/// row's blocks and each token one activation row quantized to Q8_K.
pub fn dot_tile(row: &[BlockQ4K], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    debug_assert!(tokens.len() <= super::TILE && out.len() == tokens.len());
    // SAFETY: `in_use` picks only sets this CPU runs (`runnable`).
    unsafe { (super::in_use().q4k_tile)(bytes_of(row), tokens, out) }
}
