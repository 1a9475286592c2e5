//! Q8_0 × Q8_0, the format the decoder widens Q4_1, Q5_0, Q5_1 and F16 matrices to (most of
//! the 0.5B draft and the tiny test model). candle's x86 kernel is the canonical arithmetic:
//! per block of 32, 8 lanes each summing 4 neighbouring products (exact integers), each lane
//! `fma(dx·dy, sum, lane)`, and at the end the lanes added in `quire_simd::plain::hsum`'s
//! order. On x86 candle's kernel runs as it is; elsewhere the same arithmetic in NEON or plain
//! Rust (candle's own NEON kernel sums in 4 lanes, so its bits differ), so ARM gives x86's bits.

use super::{bytes_of, KernelSet};
use candle_core::quantized::k_quants::BlockQ8_0;

/// Bytes of a block: d (f16), 32 i8.
const BYTES: usize = 34;
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == BYTES);

/// `row · token`, both as Q8_0 blocks.
pub fn dot(row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    dot_by(KernelSet::in_use(), row, token)
}

/// `dot` by the kernels of `set`, which the CPU must run.
pub fn dot_by(set: KernelSet, row: &[BlockQ8_0], token: &[BlockQ8_0]) -> f32 {
    match set {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni | KernelSet::AvxVnni | KernelSet::Avx2 => {
            <BlockQ8_0 as candle_core::quantized::k_quants::GgmlType>::vec_dot(row.len() * 32, row, token)
        }
        // SAFETY: `set` is one this CPU runs.
        #[cfg(target_arch = "aarch64")]
        KernelSet::NeonI8mm | KernelSet::NeonDotprod => unsafe { neon::dot_dotprod(bytes_of(row), bytes_of(token)) },
        // SAFETY: NEON is every aarch64 CPU's.
        #[cfg(target_arch = "aarch64")]
        KernelSet::Neon => unsafe { neon::dot_plain(bytes_of(row), bytes_of(token)) },
        _ => plain(bytes_of(row), bytes_of(token)),
    }
}

fn scale(block: &[u8]) -> f32 {
    half::f16::from_le_bytes([block[0], block[1]]).to_f32()
}

/// The canonical arithmetic one lane at a time.
fn plain(row: &[u8], token: &[u8]) -> f32 {
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

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{scale, BYTES};
    use std::arch::aarch64::*;

    /// The 8 lanes' sums of 4 neighbouring products, as two vectors of 4. (No closure here: a
    /// closure is a function of its own, without the caller's `dotprod`, and `sdot`'s inline
    /// assembly would not assemble in it.)
    #[inline(always)]
    unsafe fn sums<const SDOT: bool>(x: *const i8, y: *const i8) -> [int32x4_t; 2] {
        [sum_of_16::<SDOT>(x, y), sum_of_16::<SDOT>(x.add(16), y.add(16))]
    }

    /// 4 lanes, each the sum of 4 neighbouring products of 16 bytes of `x` and `y`.
    #[inline(always)]
    unsafe fn sum_of_16<const SDOT: bool>(x: *const i8, y: *const i8) -> int32x4_t {
        let (a, b) = (vld1q_s8(x), vld1q_s8(y));
        if SDOT {
            quire_simd::neon::sdot(vdupq_n_s32(0), a, b)
        } else {
            let low = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let high = vpaddlq_s16(vmull_high_s8(a, b));
            vpaddq_s32(low, high)
        }
    }

    #[inline(always)]
    unsafe fn dot<const SDOT: bool>(row: &[u8], token: &[u8]) -> f32 {
        let mut lanes = [vdupq_n_f32(0.0); 2];
        for (x, y) in row.chunks_exact(BYTES).zip(token.chunks_exact(BYTES)) {
            let d = vdupq_n_f32(scale(x) * scale(y));
            let s = sums::<SDOT>(x.as_ptr().add(2) as *const i8, y.as_ptr().add(2) as *const i8);
            for h in 0..2 {
                lanes[h] = vfmaq_f32(lanes[h], d, vcvtq_f32_s32(s[h]));
            }
        }
        let mut all = [0f32; 8];
        vst1q_f32(all.as_mut_ptr(), lanes[0]);
        vst1q_f32(all.as_mut_ptr().add(4), lanes[1]);
        quire_simd::plain::hsum(all)
    }

    /// # Safety
    /// The CPU must have the dot product extension.
    #[target_feature(enable = "dotprod")]
    pub unsafe fn dot_dotprod(row: &[u8], token: &[u8]) -> f32 {
        dot::<true>(row, token)
    }

    /// # Safety
    /// None beyond the slices' (NEON is part of every aarch64 CPU).
    pub unsafe fn dot_plain(row: &[u8], token: &[u8]) -> f32 {
        dot::<false>(row, token)
    }
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
            let reference = plain(bytes_of(&row), bytes_of(&token));
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
