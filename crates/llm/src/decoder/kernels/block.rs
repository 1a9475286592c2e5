//! What every kernel reduces a (weight block, token block) pair to, on every CPU: the block's
//! weights as bytes in the order of the token's bytes, its sub-block scales, and two exact
//! integers per token that `canonical` turns into the running sum. Here too the plain-Rust
//! form of it all: the portable kernel set, for CPUs without one of their own, and the
//! reference the others are tested against bit for bit.

use candle_core::quantized::k_quants::BlockQ8K;

use super::{token_bytes, KernelTable, Q8K_BYTES, QK_K};

/// Q4_K's byte layout (`repr(C)` in candle, fields private): d, dmin (f16), 12 bytes of packed
/// 6-bit scales and mins, 128 bytes of nibbles.
pub const Q4K_BYTES: usize = 144;
/// Q6_K's: 128 bytes of low nibbles, 64 of high bit pairs, 16 i8 scales (one per 16 weights),
/// d (f16).
pub const Q6K_BYTES: usize = 210;
pub const Q6K_HIGH: usize = 128;
pub const Q6K_SCALES: usize = 192;
pub const Q6K_D: usize = 208;

/// How far ahead of the block it reads a one-token tile asks memory for the weights. Decoding
/// reads every weight once per token, and a tile's arithmetic per block (~80 instructions)
/// keeps the core from running far enough ahead of its loads to keep memory busy: without the
/// requests plain decoding ran at 11.3–12.4 tokens/s on a 2-core Zen 4, with them 16.5–18.8
/// (3–12 KB ahead alike, 1.5 KB 15.5–17.4, 24 KB less again; BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 4096;

/// Asks for the `bytes` of weights `PREFETCH_AHEAD` after `block` (x86's prefetch never
/// faults, so past the last row it is only a wasted request).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn prefetch_ahead(block: *const u8, bytes: usize) {
    prefetch(block.wrapping_add(PREFETCH_AHEAD), bytes);
}

/// Asks for the `bytes` from `at` on (any address: past a row's end it is a wasted request).
/// The panels unpack a task's rows a block at a time and multiply every panel with them
/// before the next (~16,000 instructions for a prompt block of 256 tokens): a row's next block
/// asked for when the one before is unpacked is in cache when it is needed.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn prefetch(at: *const u8, bytes: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // The last line the bytes touch, wherever they start in it.
    let lines = ((at as usize % 64) + bytes).div_ceil(64);
    for line in 0..lines {
        // SAFETY: a prefetch reads nothing and cannot fault, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(64 * line) as *const i8) };
    }
}

/// One block of one weight row, unpacked: what both formats reduce to.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Unpacked {
    /// The 256 weights as unsigned bytes, in the order of the token's bytes.
    pub weights: [u8; 256],
    /// One scale per sub-block (8 of 32 weights for Q4_K, 16 of 16 for Q6_K).
    pub scales: [i32; 16],
    /// Pairs of 16-bit multipliers of the token's pairs of sums, for the second integer of a
    /// block: Q4_K's 8 mins in pairs 0..4, against the token's sums of 32 values (`SUB`);
    /// Q6_K's 16 scales in 8 pairs, against its sums of 16.
    pub pairs: [u32; 8],
    /// The block's scale of the first integer and of the second (subtracted).
    pub d: f32,
    pub m: f32,
}

impl Unpacked {
    pub const ZERO: Unpacked = Unpacked { weights: [0; 256], scales: [0; 16], pairs: [0; 8], d: 0.0, m: 0.0 };
}

/// Two 16-bit values in one 32-bit lane (the operand layout of `vpdpwssd`).
pub fn pair(low: i16, high: i16) -> u32 {
    (low as u16 as u32) | ((high as u16 as u32) << 16)
}

/// The result every kernel gives for one (row, token) block: `acc + d·yd·first − m·yd·second`,
/// each product fused with its addition, in this order.
#[inline(always)]
pub fn canonical(acc: f32, d: f32, m: f32, yd: f32, first: i32, second: i32) -> f32 {
    let acc = (d * yd).mul_add(first as f32, acc);
    (-(m * yd)).mul_add(second as f32, acc)
}

pub fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 8 sub-block scales and mins of a Q4_K block (its 12 packed bytes), four bytes at a time
/// in 32-bit words, without a branch (every tile and panel runs this for every block it reads;
/// the same bytes as ggml's byte-by-byte definition, tested). Sub-blocks 0–3 hold
/// their 6 bits in bytes 0–3 (scales) and 4–7 (mins); sub-blocks 4–7 their low 4 bits in bytes
/// 8–11 (scales low, mins high) and their top 2 bits in the top bits of bytes 0–3 and 4–7.
#[inline(always)]
pub fn q4k_scales_and_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    const SIX: u32 = 0x3F3F_3F3F;
    const FOUR: u32 = 0x0F0F_0F0F;
    const TWO: u32 = 0x0303_0303;
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (a, b, c) = (word(0), word(1), word(2));
    let scales_high = (c & FOUR) | (((a >> 6) & TWO) << 4);
    let mins_high = ((c >> 4) & FOUR) | (((b >> 6) & TWO) << 4);
    let join = |low: u32, high: u32| (u64::from(low) | (u64::from(high) << 32)).to_le_bytes();
    (join(a & SIX, scales_high), join(b & SIX, mins_high))
}

/// Block `b` of a Q4_K row: sub-block 2k holds the low nibbles of bytes 32k..32k+32, 2k+1 their
/// high nibbles.
pub fn unpack_q4k(row: &[u8], b: usize, out: &mut Unpacked) {
    let x = &row[b * Q4K_BYTES..(b + 1) * Q4K_BYTES];
    let (sc, mn) = q4k_scales_and_mins(&x[4..16]);
    for k in 0..4 {
        for l in 0..32 {
            let byte = x[16 + 32 * k + l];
            out.weights[64 * k + l] = byte & 0xF;
            out.weights[64 * k + 32 + l] = byte >> 4;
        }
    }
    for (scale, &s) in out.scales.iter_mut().zip(&sc) {
        *scale = s as i32;
    }
    out.scales[8..].fill(0);
    for p in 0..4 {
        out.pairs[p] = pair(mn[2 * p] as i16, mn[2 * p + 1] as i16);
    }
    out.pairs[4..].fill(0);
    out.d = f16_at(x, 0);
    out.m = f16_at(x, 2);
}

/// Block `b` of a Q6_K row: weight `q` in 0..64 (Q6_K's value is `q − 32`, which the second
/// integer takes back: `m = 32·d`). Each half of 128 weights: 64 bytes of nibbles (low, then
/// high) and 32 of bit pairs (shifted 0, 2, 4, 6 for its four quarters).
pub fn unpack_q6k(row: &[u8], b: usize, out: &mut Unpacked) {
    let x = &row[b * Q6K_BYTES..(b + 1) * Q6K_BYTES];
    for half in 0..2 {
        let nibbles = &x[64 * half..64 * half + 64];
        let high = &x[Q6K_HIGH + 32 * half..Q6K_HIGH + 32 * half + 32];
        for quarter in 0..4 {
            for l in 0..32 {
                let nibble = nibbles[32 * (quarter % 2) + l] >> (4 * (quarter / 2)) & 0xF;
                let bits = high[l] >> (2 * quarter) & 3;
                out.weights[128 * half + 32 * quarter + l] = nibble | bits << 4;
            }
        }
    }
    let sc = &x[Q6K_SCALES..Q6K_SCALES + 16];
    for (scale, &s) in out.scales.iter_mut().zip(sc) {
        *scale = s as i8 as i32;
    }
    for u in 0..8 {
        out.pairs[u] = pair(sc[2 * u] as i8 as i16, sc[2 * u + 1] as i8 as i16);
    }
    let d = f16_at(x, Q6K_D);
    out.d = d;
    out.m = 32.0 * d;
}

/// A token's block `b`: its scale and its bytes (the 256 values, then 16 i16 sums of 16).
#[inline(always)]
pub fn token_block(token: &[u8], b: usize) -> (f32, &[u8]) {
    let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
    (f32::from_le_bytes([y[0], y[1], y[2], y[3]]), &y[4..])
}

/// The two integers of an unpacked block against a token's block bytes (`token_block`), for
/// sub-blocks of `sub` weights (32 for Q4_K, 16 for Q6_K).
#[inline(always)]
pub fn integers(u: &Unpacked, sub: usize, y: &[u8]) -> (i32, i32) {
    let q = &y[..QK_K];
    let first: i32 = (0..QK_K / sub)
        .map(|s| {
            let range = s * sub..(s + 1) * sub;
            u.scales[s]
                * u.weights[range.clone()].iter().zip(&q[range]).map(|(&w, &v)| w as i32 * v as i8 as i32).sum::<i32>()
        })
        .sum();
    let sum16 = |k: usize| i16::from_le_bytes([y[QK_K + 2 * k], y[QK_K + 2 * k + 1]]) as i32;
    // Sums of `sub` values: Q4_K's mins and Q6_K's scales cover that many each.
    let sum = |i: usize| (i * sub / 16..(i + 1) * sub / 16).map(sum16).sum::<i32>();
    let second: i32 = (0..128 / sub)
        .map(|p| {
            (u.pairs[p] as u16 as i16 as i32) * sum(2 * p) + ((u.pairs[p] >> 16) as u16 as i16 as i32) * sum(2 * p + 1)
        })
        .sum();
    (first, second)
}

/// `out[t] = row · tokens[t]` in plain Rust: each block unpacked once, then per token its two
/// integers and `canonical`. The same bits as every vector kernel.
pub fn dot_tile(
    row: &[u8],
    block_bytes: usize,
    sub: usize,
    unpack: fn(&[u8], usize, &mut Unpacked),
    tokens: &[&[u8]],
    out: &mut [f32],
) {
    out.fill(0.0);
    let mut u = Unpacked::ZERO;
    for b in 0..row.len() / block_bytes {
        unpack(row, b, &mut u);
        for (acc, token) in out.iter_mut().zip(tokens) {
            let (yd, y) = token_block(token, b);
            let (first, second) = integers(&u, sub, y);
            *acc = canonical(*acc, u.d, u.m, yd, first, second);
        }
    }
}

fn q4k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let ys = token_bytes(tokens);
    dot_tile(row, Q4K_BYTES, 32, unpack_q4k, &ys[..tokens.len()], out)
}

fn q6k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let ys = token_bytes(tokens);
    dot_tile(row, Q6K_BYTES, 16, unpack_q6k, &ys[..tokens.len()], out)
}

/// The plain-Rust kernels: tiles, no panels.
pub static TABLE: KernelTable =
    KernelTable { q4k_tile, q6k_tile, q4k_panels: None, q6k_panels: None, q8_0_dot: super::q8_0::plain };

#[cfg(test)]
mod tests {
    use super::q4k_scales_and_mins;

    /// The scales and mins by words equal ggml's definition byte by byte, for every value of
    /// each byte and for random blocks.
    #[test]
    fn q4k_scales_and_mins_by_words_equal_the_byte_definition() {
        let by_bytes = |s: &[u8]| {
            let (mut sc, mut mn) = ([0u8; 8], [0u8; 8]);
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
        };
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut blocks: Vec<[u8; 12]> = (0..100_000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let r = state.to_le_bytes();
                let t = state.rotate_left(29).to_le_bytes();
                [r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], t[0], t[1], t[2], t[3]]
            })
            .collect();
        for at in 0..12 {
            for value in 0..=255u8 {
                let mut s = [0x5Au8; 12];
                s[at] = value;
                blocks.push(s);
            }
        }
        for s in &blocks {
            assert_eq!(q4k_scales_and_mins(s), by_bytes(s), "{s:?}");
        }
    }
}
