//! Dot products of one quantized weight row with several tokens at once, for the k-quant
//! formats most of a Q4_K_M model is stored in (Q4_K, and Q6_K for the value and down
//! projections of half the layers and for the output). Each 256-weight block is unpacked once
//! and multiplied with every token of the tile, where candle's kernels unpack it again for
//! each token. A token's result is computed by the same instructions in the same order
//! whatever the tile holds, so it is bit-identical to computing it alone.
//!
//! Prompt-sized batches go through panels of 16 tokens, which multiply several rows with all 16
//! at once.
//!
//! Kernel sets (`KernelSet`), chosen once per process: on x86-64 the build baseline is
//! x86-64-v3 (AVX2) and AVX-512 VNNI or 256-bit VNNI runs where the CPU has it; on 64-bit ARM
//! NEON, with `sdot` where the CPU has dot products and `smmla` where it has i8mm; elsewhere
//! plain Rust. Each set is one file (`avx512.rs`, `avxvnni.rs`, `avx2.rs`, `neon.rs`, and
//! `block.rs`, the plain form every other is tested against) with its `KernelTable`; `table`
//! is the one place a set is looked up. Every kernel ends each block in the same two exact
//! integers and the same two fused multiply-adds (`block::canonical`), so they all give the
//! same bits on every CPU.

use candle_core::quantized::k_quants::{BlockQ8K, BlockQ8_0};

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod avx2;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod avx512;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod avxvnni;
pub mod block;
#[cfg(target_arch = "aarch64")]
pub mod neon;
pub mod panels;
pub mod q4k;
pub mod q6k;
pub mod q8_0;

pub const QK_K: usize = 256;
/// Tokens handled per pass over a weight row.
pub const TILE: usize = 4;
/// Q8_K's byte layout (`repr(C)` in candle, fields private): d (f32), 256 i8, 16 i16 sums of
/// 16 values each.
pub const Q8K_BYTES: usize = 292;
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == Q8K_BYTES);

/// Blocks of plain `repr(C)` data as the bytes the kernels read by offset.
pub fn bytes_of<T>(blocks: &[T]) -> &[u8] {
    // SAFETY: plain `repr(C)` data read as bytes, same length in bytes.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u8, std::mem::size_of_val(blocks)) }
}

/// Each token's blocks as bytes (the kernels read them by offset).
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

pub use quire_simd::KernelSet;

/// The CPU features the AVX-512 kernels need (the panel tests' check).
#[cfg(all(test, target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub fn cpu_has_avx512_vnni() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// A tile kernel's signature: one row's blocks (as bytes), up to `TILE` tokens, their results.
pub type TileKernel = unsafe fn(&[u8], &[&[BlockQ8K]], &mut [f32]);

/// A panel kernel's signature: a task's weight rows (whole blocks, `per_row` to a row) times
/// every panel's tokens, into `out[i * stride + t]`.
pub type PanelKernel = unsafe fn(&[u8], usize, &panels::Panels, &mut [f32], usize);

/// One kernel set: what it multiplies each format with.
pub struct KernelTable {
    /// Q4_K and Q6_K rows against up to `TILE` tokens.
    pub q4k_tile: TileKernel,
    pub q6k_tile: TileKernel,
    /// Q4_K and Q6_K rows against panels of 16 tokens, where the set has panels.
    pub q4k_panels: Option<PanelKernel>,
    pub q6k_panels: Option<PanelKernel>,
    /// Q8_0 × Q8_0 (one token), in candle's x86 arithmetic.
    pub q8_0_dot: unsafe fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32,
}

/// The kernels of `set`. Calling them is sound only where the CPU runs `set`
/// (`KernelSet::runnable`).
pub fn table(set: KernelSet) -> &'static KernelTable {
    match set {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni => &avx512::TABLE,
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::AvxVnni => &avxvnni::TABLE,
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx2 => &avx2::TABLE,
        #[cfg(target_arch = "aarch64")]
        KernelSet::NeonI8mm => &neon::I8MM,
        #[cfg(target_arch = "aarch64")]
        KernelSet::NeonDotprod => &neon::DOTPROD,
        #[cfg(target_arch = "aarch64")]
        KernelSet::Neon => &neon::PLAIN,
        _ => &block::TABLE,
    }
}

/// The kernels of the set in use (`KernelSet::in_use`: one this CPU runs).
pub fn in_use() -> &'static KernelTable {
    table(KernelSet::in_use())
}

/// A set's panel kernel for one format as a `PanelKernel`: the task's rows sliced out of the
/// bytes, unpacked by `$unpack`, multiplied by `$matmul::<$sub>`.
macro_rules! panel_kernel {
    ($(#[$doc:meta])* $name:ident, $matmul:ident, $unpack:path, $sub:literal, $block_bytes:expr) => {
        $(#[$doc])*
        #[allow(unused_unsafe)]
        unsafe fn $name(rows: &[u8], per_row: usize, panels: &Panels, out: &mut [f32], stride: usize) {
            let row_bytes = per_row * $block_bytes;
            let row = |i: usize| &rows[i * row_bytes..(i + 1) * row_bytes];
            // SAFETY: the kernel runs on a CPU with its set (this function's contract) and each
            // row holds whole blocks.
            let unpack = |i: usize, b: usize, u: &mut Unpacked| unsafe { $unpack(row(i), b, u) };
            // SAFETY: as above.
            unsafe { $matmul::<$sub>(rows.len() / row_bytes, per_row, unpack, panels, out, stride) }
        }
    };
}
pub(crate) use panel_kernel;

/// The kernels in use, for benchmark and log lines.
pub fn kernel_name() -> &'static str {
    KernelSet::in_use().name()
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

#[cfg(test)]
mod set_tests {
    use super::block::{Q4K_BYTES, Q6K_BYTES};
    use super::*;

    /// Deterministic bytes (a 64-bit LCG), the same on every CPU.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    /// `rows` weight rows of `blocks` blocks of a format: random bytes with f16 scales of a
    /// weight's size put at `scale_at`.
    fn rows(seed: u64, rows: usize, blocks: usize, block_bytes: usize, scale_at: &[usize]) -> Vec<u8> {
        let mut x = bytes(seed, rows * blocks * block_bytes);
        for (i, block) in x.chunks_mut(block_bytes).enumerate() {
            for (k, &at) in scale_at.iter().enumerate() {
                let v = half::f16::from_f32((1 + (i * 7 + k * 3) % 13) as f32 * 1e-3);
                block[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        x
    }

    /// Q8_K tokens: random values, a scale, and their true 16-value sums.
    fn tokens(seed: u64, count: usize, blocks: usize) -> Vec<Vec<BlockQ8K>> {
        (0..count)
            .map(|t| {
                let mut raw = bytes(seed + t as u64, blocks * Q8K_BYTES);
                for (b, y) in raw.chunks_mut(Q8K_BYTES).enumerate() {
                    y[..4].copy_from_slice(&(0.01 + 0.003 * (b + t) as f32).to_le_bytes());
                    for s in 0..16 {
                        let sum: i16 = y[4 + 16 * s..4 + 16 * s + 16].iter().map(|&v| v as i8 as i16).sum();
                        y[4 + QK_K + 2 * s..4 + QK_K + 2 * s + 2].copy_from_slice(&sum.to_le_bytes());
                    }
                }
                let mut blocks_out = vec![BlockQ8K::zeros(); blocks];
                // SAFETY: BlockQ8K is plain `repr(C)` data of Q8K_BYTES bytes.
                unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), blocks_out.as_mut_ptr() as *mut u8, raw.len()) };
                blocks_out
            })
            .collect()
    }

    use candle_core::quantized::k_quants::GgmlType;

    /// Every set's results for 8 rows × 7 tokens, in tiles of 4 and 3, and one token alone.
    fn results(
        tile_of: fn(&KernelTable) -> TileKernel,
        set: KernelSet,
        rows: &[u8],
        row_bytes: usize,
        tokens: &[Vec<BlockQ8K>],
    ) -> Vec<u32> {
        let refs: Vec<&[BlockQ8K]> = tokens.iter().map(|t| t.as_slice()).collect();
        let mut bits = Vec::new();
        for row in rows.chunks(row_bytes) {
            for tile in refs.chunks(TILE) {
                let mut out = vec![f32::NAN; tile.len()];
                // SAFETY: `set` is one this CPU runs (`runnable`).
                unsafe { tile_of(table(set))(row, tile, &mut out) };
                bits.extend(out.iter().map(|v| v.to_bits()));
            }
            let mut alone = [f32::NAN];
            // SAFETY: `set` is one this CPU runs (`runnable`); the row and tokens hold whole blocks.
            unsafe { tile_of(table(set))(row, &refs[5..6], &mut alone) };
            assert_eq!(alone[0].to_bits(), bits[bits.len() - 2], "{}: token 5 alone and in its tile", set.name());
        }
        bits
    }

    fn fnv(bits: &[u32]) -> u64 {
        bits.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
    }

    /// Every kernel set this CPU runs gives the plain-Rust kernel's bits for both formats, and
    /// those bits are the ones recorded on x86-64 (AVX-512 VNNI, AVX2 and plain all agreeing,
    /// 2026-12-03): a CPU whose kernels, compiler or floating point round differently fails
    /// here, not in an answer.
    #[test]
    fn every_kernel_set_gives_the_recorded_bits() {
        let blocks = 6;
        let tokens = tokens(11, 7, blocks);
        let q4k_tile: fn(&KernelTable) -> TileKernel = |t| t.q4k_tile;
        let q6k_tile: fn(&KernelTable) -> TileKernel = |t| t.q6k_tile;
        for (name, tiles, block_bytes, scale_at, recorded) in [
            ("Q4_K", q4k_tile, Q4K_BYTES, &[0usize, 2][..], 1508532872545149749u64),
            ("Q6_K", q6k_tile, Q6K_BYTES, &[block::Q6K_D][..], 857392238854436711u64),
        ] {
            let rows = rows(3, 8, blocks, block_bytes, scale_at);
            let plain = results(tiles, KernelSet::Portable, &rows, blocks * block_bytes, &tokens);
            for set in KernelSet::runnable() {
                assert_eq!(
                    results(tiles, set, &rows, blocks * block_bytes, &tokens),
                    plain,
                    "{name}: {} kernels",
                    set.name()
                );
            }
            // Near candle's own dot product (whose sums run in another order).
            for (r, row) in rows.chunks(blocks * block_bytes).enumerate() {
                let candle = match name {
                    "Q4_K" => candle_dot::<candle_core::quantized::k_quants::BlockQ4K>(row, &tokens[0]),
                    _ => candle_dot::<candle_core::quantized::k_quants::BlockQ6K>(row, &tokens[0]),
                };
                let ours = f32::from_bits(plain[r * 7]);
                assert!(
                    (ours - candle).abs() <= 1e-4 * candle.abs().max(1.0),
                    "{name} row {r}: {ours} vs candle {candle}"
                );
            }
            assert_eq!(fnv(&plain), recorded, "{name}: the bits differ from x86-64's");
        }
    }

    /// The process runs the best set its CPU has unless told otherwise (tools/test-aarch64.sh
    /// reads the printed name under each emulated CPU).
    #[test]
    fn the_kernels_in_use_are_the_best_the_cpu_runs() {
        println!("kernels in use: {}", kernel_name());
        if std::env::var_os("QUIRE_KERNELS").is_none() {
            assert_eq!(KernelSet::in_use(), KernelSet::runnable()[0]);
        }
        assert_eq!(KernelSet::runnable().last(), Some(&KernelSet::Portable));
    }

    /// candle's dot product of a row given as bytes (copied into aligned blocks).
    fn candle_dot<T: GgmlType<VecDotType = BlockQ8K>>(row: &[u8], token: &[BlockQ8K]) -> f32 {
        let mut blocks = vec![T::zeros(); row.len() / std::mem::size_of::<T>()];
        // SAFETY: the blocks are plain `repr(C)` data of exactly these bytes.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), blocks.as_mut_ptr() as *mut u8, row.len()) };
        T::vec_dot(blocks.len() * QK_K, &blocks, token)
    }
}
