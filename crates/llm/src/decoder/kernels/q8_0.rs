//! Q8_0 × Q8_0, the format the decoder widens Q4_1, Q5_0, Q5_1 and F16 matrices to (most of
//! the 0.5B draft and the tiny test model). candle's x86 kernel is the canonical arithmetic:
//! per block of 32, 8 lanes each summing 4 neighbouring products (exact integers), each lane
//! `fma(dx·dy, sum, lane)`, and at the end the lanes added in `quire_simd::plain::hsum`'s
//! order. On x86 candle's kernel runs as it is; elsewhere the same arithmetic in NEON (`neon.rs`'s
//! sets take it from here) or plain Rust (candle's own NEON kernel sums in 4 lanes, so its bits differ), so ARM gives x86's bits.

use super::bytes_of;
#[cfg(test)]
use super::KernelSet;
use candle_core::quantized::k_quants::BlockQ8_0;

/// Bytes of a block: d (f16), 32 i8.
pub(super) const BYTES: usize = 34;
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == BYTES);

/// `row · token`, both as Q8_0 blocks.
pub fn dot(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    // SAFETY: `in_use` picks only sets this CPU runs (`runnable`).
    unsafe { (super::in_use().q8_0_dot)(row, token) }
}

/// `dot` by the kernels of `set`, which the CPU must run.
#[cfg(test)]
fn dot_by(set: KernelSet, row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    // SAFETY: the caller runs only sets this CPU has.
    unsafe { (super::table(set).q8_0_dot)(row, token) }
}

/// candle's own x86 kernel: the canonical arithmetic (AVX2, the x86 sets' baseline).
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub(super) fn candle_x86(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    <BlockQ8_0 as candle_core::quantized::k_quants::GgmlType>::vec_dot(row.len() * 32, row, token)
}

/// The canonical arithmetic in plain Rust.
pub(super) fn plain(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    plain_bytes(bytes_of(row), bytes_of(token))
}

pub(super) fn scale(block: &[u8]) -> f32 {
    half::f16::from_le_bytes([block[0], block[1]]).to_f32()
}

/// The canonical arithmetic one lane at a time.
fn plain_bytes(row: &[u8], token: &[u8]) -> f32 {
    let mut lanes = [0f32; 8];
    for (x, y) in row.chunks_exact(BYTES).zip(token.chunks_exact(BYTES)) {
        let d = scale(x) * scale(y);
        for (j, lane) in lanes.iter_mut().enumerate() {
            let sum: i32 = (2 + 4 * j..6 + 4 * j).map(|k| x[k] as i8 as i32 * y[k] as i8 as i32).sum();
            *lane = d.mul_add(sum as f32, *lane);
        }
    }
    quire_simd::plain::hsum(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::k_quants::GgmlType;

    /// Every set this CPU runs gives the plain arithmetic's bits, which are candle's x86
    /// kernel's (checked where that kernel runs) and the ones recorded on x86-64.
    #[test]
    fn every_kernel_set_gives_candles_x86_bits() {
        let n = 32 * 45;
        let value = |i: usize, salt: usize| (((i * 2654435761 + salt) % 1000) as f32 - 500.0) / 97.0;
        let mut bits = Vec::new();
        for r in 0..6 {
            let (w, x): (Vec<f32>, Vec<f32>) =
                (0..n).map(|i| (value(i, r), value(i, 7 + r) * (1 + i % 5) as f32)).unzip();
            let (mut row, mut token) = (vec![BlockQ8_0::zeros(); n / 32], vec![BlockQ8_0::zeros(); n / 32]);
            BlockQ8_0::from_float(&w, &mut row);
            BlockQ8_0::from_float(&x, &mut token);
            let reference = plain(&row, &token);
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            assert_eq!(
                reference.to_bits(),
                BlockQ8_0::vec_dot(n, &row, &token).to_bits(),
                "row {r}: candle's x86 kernel"
            );
            for set in KernelSet::runnable() {
                assert_eq!(dot_by(set, &row, &token).to_bits(), reference.to_bits(), "row {r}: {} kernels", set.name());
            }
            bits.push(reference.to_bits());
        }
        let digest = bits.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        assert_eq!(digest, 15622433018755907635, "the bits differ from x86-64's");
    }
}
