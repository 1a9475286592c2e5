//! Q6_K: its dot product with a tile of tokens by the kernel set in use (each set's tiles
//! unpack a block's 6-bit weights, low nibbles and high bit pairs, and its 16 scales once for
//! the tile). Q6_K stores a weight as `q - 32` with `q` in 0..64; the kernels multiply by `q`
//! and take `32 · scale · Σ y` back with the token's 16-value sums, in integers, so a block's
//! sum is exact (the same integer as candle's kernel computes).

use super::block::Q6K_BYTES;
use super::bytes_of;
use candle_core::quantized::k_quants::{BlockQ6K, BlockQ8K};

const _: () = assert!(std::mem::size_of::<BlockQ6K>() == Q6K_BYTES);

/// `out[t] = row · tokens[t]` for up to `TILE` tokens, by the set in use; `row` is one weight
/// row's blocks and each token one activation row quantized to Q8_K.
pub fn dot_tile(row: &[BlockQ6K], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    debug_assert!(tokens.len() <= super::TILE && out.len() == tokens.len());
    // SAFETY: `in_use` picks only sets this CPU runs (`runnable`).
    unsafe { (super::in_use().q6k_tile)(bytes_of(row), tokens, out) }
}
