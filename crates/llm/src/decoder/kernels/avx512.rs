//! The AVX-512 VNNI kernel set: per-token tiles (64 weights per instruction) and, for
//! prompt-sized batches, weight rows times panels of 16 tokens, one `vpdpbusd` multiplying four
//! weights of one row with the same four positions of all 16 tokens (64 products per
//! instruction, where the per-token kernels make 16 or fewer).
//!
//! The tokens' bytes are laid out once per matmul (`panels::Panels`); a task's weight rows are
//! unpacked to one byte per weight a block at a time and reused for every panel.
//!
//! Exactness: a (row, token) result here equals the per-token kernel's bit for bit
//! (`canonical`): per 256-weight block both compute the same two exact integers, then the same
//! two fused multiply-adds in block order. So a token's logits do not depend on whether its
//! batch went through panels or tiles, nor on what else was in it.

use candle_core::quantized::k_quants::BlockQ8K;
use std::arch::x86_64::*;

use super::avx2;
use super::block::{self, f16_at, Unpacked, Q4K_BYTES, Q6K_BYTES, Q6K_D, Q6K_HIGH, Q6K_SCALES};
use super::panels::{each_block, Layout, Panels, PANEL};
use super::q4k::{q4k_block, Q4kBlock};
use super::{panel_kernel, q8k_block, token_bytes, KernelTable, QK_K, TILE};

/// Weight rows multiplied with panels at once (they share each load of a panel).
const ROWS: usize = 4;
/// Panels multiplied with a group of rows at once (they share each broadcast weight). Four
/// rows by three panels keep 12 `vpdpbusd` sums independent of each other: the instruction
/// takes 5 cycles and two can start each cycle, so four chains (one panel) left the
/// multipliers idle more than half the time.
const PANELS_AT_ONCE: usize = 3;

/// `out[i * stride + t] = row i · token t` for the `rows` weight rows of a task (`unpack(i, b,
/// …)` gives block b of row i) and every panel's tokens. `SUB` is the sub-block size (32 for
/// Q4_K, 16 for Q6_K).
///
/// # Safety
/// The CPU must have AVX-512 F/BW/VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub unsafe fn matmul<const SUB: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    matmul_grouped::<SUB, PANELS_AT_ONCE>(rows, blocks, unpack, panels, out, stride)
}

/// `matmul` with `GROUP` panels at once (the speed test compares groupings).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn matmul_grouped<const SUB: usize, const GROUP: usize>(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    out: &mut [f32],
    stride: usize,
) {
    // A group of panels' block (14 KB for three) stays in cache while every row of the task
    // meets it.
    each_block(rows, blocks, unpack, panels, Layout::Groups, out, stride, GROUP, ROWS, |group, p, count, b, o| {
        // SAFETY: the CPU has AVX-512 F/BW/VNNI (this function's contract); `each_block` hands
        // out panel p's place in row `group[0]`'s output.
        unsafe {
            if group.len() == ROWS {
                accumulate_panels::<SUB, ROWS>(group, panels, p, count, b, o, stride)
            } else {
                accumulate_panels::<SUB, 1>(group, panels, p, count, b, o, stride)
            }
        }
    });
}

/// `accumulate` for `count` (1 to 3) panels from `p` on.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate_panels<const SUB: usize, const R: usize>(
    rows: &[Unpacked],
    panels: &Panels,
    p: usize,
    count: usize,
    b: usize,
    out: *mut f32,
    stride: usize,
) {
    match count {
        3 => accumulate::<SUB, R, 3>(rows, panels, p, b, out, stride),
        2 => accumulate::<SUB, R, 2>(rows, panels, p, b, out, stride),
        _ => accumulate::<SUB, R, 1>(rows, panels, p, b, out, stride),
    }
}

/// Adds block `b` of `R` rows times panels `p..p + P` to `out[i * stride + t]` (panel p + j's
/// tokens at t = 16 j..), by `canonical`: called for b = 0, 1, … in order, it gives the
/// per-token kernels' sums. The integers are exact, so how they are grouped changes nothing.
///
/// The weights (0 to 63) are `vpdpbusd`'s unsigned operand, each four broadcast to every lane
/// (a load, no shuffle), and the tokens' bytes its signed one, as they are.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
// Indices into several small arrays at once, which stay in registers as they are.
#[allow(clippy::needless_range_loop)]
unsafe fn accumulate<const SUB: usize, const R: usize, const P: usize>(
    rows: &[Unpacked],
    panels: &Panels,
    p: usize,
    b: usize,
    out: *mut f32,
    stride: usize,
) {
    debug_assert!(rows.len() == R && p + P <= panels.panels);
    let at = |j: usize| (p + j) * panels.blocks + b;
    let mut codes = [std::ptr::null::<u32>(); P];
    for (j, c) in codes.iter_mut().enumerate() {
        *c = panels.codes.as_ptr().add(at(j) * 64 * PANEL);
    }
    let weights = |i: usize| rows[i].weights.as_ptr() as *const i32;
    let mut first = [[_mm512_setzero_si512(); P]; R];
    for s in 0..256 / SUB {
        let mut raw = [[_mm512_setzero_si512(); P]; R];
        for g in s * SUB / 4..(s + 1) * SUB / 4 {
            let mut y = [_mm512_setzero_si512(); P];
            for j in 0..P {
                y[j] = _mm512_loadu_si512(codes[j].add(g * PANEL) as *const _);
            }
            for i in 0..R {
                let w = _mm512_set1_epi32(weights(i).add(g).read());
                for j in 0..P {
                    raw[i][j] = _mm512_dpbusd_epi32(raw[i][j], w, y[j]);
                }
            }
        }
        for i in 0..R {
            let scale = _mm512_set1_epi32(rows[i].scales[s]);
            for j in 0..P {
                first[i][j] = _mm512_add_epi32(first[i][j], _mm512_mullo_epi32(raw[i][j], scale));
            }
        }
    }
    // Q4_K's second integer takes the sums of 32 values, 4 pairs; Q6_K's the sums of 16, 8.
    let pairs = 256 / SUB / 2;
    for j in 0..P {
        // Loaded once for the rows (the compiler cannot know the stores to `out` leave them).
        let sums = if SUB == 32 {
            panels.sums32.as_ptr().add(at(j) * 4 * PANEL)
        } else {
            panels.sums.as_ptr().add(at(j) * 8 * PANEL)
        };
        let sums: [__m512i; 8] = std::array::from_fn(|u| {
            if u < pairs {
                _mm512_loadu_si512(sums.add(u * PANEL) as *const _)
            } else {
                _mm512_setzero_si512()
            }
        });
        let yd = _mm512_loadu_ps(panels.scales.as_ptr().add(at(j) * PANEL));
        for i in 0..R {
            let mut second = _mm512_setzero_si512();
            for u in 0..pairs {
                second = _mm512_dpwssd_epi32(second, _mm512_set1_epi32(rows[i].pairs[u] as i32), sums[u]);
            }
            let o = out.add(i * stride + j * PANEL);
            let d = _mm512_mul_ps(_mm512_set1_ps(rows[i].d), yd);
            let m = _mm512_mul_ps(_mm512_set1_ps(rows[i].m), yd);
            let acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(first[i][j]), _mm512_loadu_ps(o));
            _mm512_storeu_ps(o, _mm512_fnmadd_ps(m, _mm512_cvtepi32_ps(second), acc));
        }
    }
}

/// 64 weights (two sub-blocks) per instruction: `maddubs` pairs the nibbles with the token's
/// bytes and `dpwssd` (VNNI) scales and accumulates in one step. Each block ends in
/// `block::canonical`, so this kernel and the panels give the same bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub unsafe fn q4k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let blocks = row.len() / Q4K_BYTES;
    let ys = token_bytes(tokens);
    let mut acc = _mm_setzero_ps();
    let low = _mm512_set1_epi8(0xF);
    for b in 0..blocks {
        block::prefetch_ahead(row.as_ptr().add(b * Q4K_BYTES), Q4K_BYTES);
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
        let mut first = [_mm256_setzero_si256(); TILE];
        let mut second = [_mm256_setzero_si256(); TILE];
        for t in 0..n {
            let (_, q8) = q8k_block(ys[t], b);
            let mut sumi = _mm512_setzero_si512();
            for j in 0..4 {
                let v = _mm512_loadu_si512(q8.add(64 * j) as *const _);
                sumi = _mm512_dpwssd_epi32(sumi, scale[j], _mm512_maddubs_epi16(q4[j], v));
            }
            first[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
            second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(QK_K) as *const __m256i), mins);
        }
        acc = avx2::finish_tile(&first, &second, d, dmin, &ys, n, b, acc);
    }
    let mut sums = [0f32; TILE];
    _mm_storeu_ps(sums.as_mut_ptr(), acc);
    out.copy_from_slice(&sums[..n]);
}

/// 64 weights per vector: `maddubs` pairs the 6-bit weights with the token's bytes and
/// `dpwssd` (VNNI) scales and accumulates in one step. Each block ends in `block::canonical`
/// (first integer Σ scale·q·y, second Σ scale·(16-value sum), m = 32·d), so this kernel and
/// the panels give the same bits.
/// Block `b`'s weights as 4 vectors of 64 bytes (0..64) in the order of the token's bytes,
/// and its 16 scales as words.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn q6k_weights(row: &[u8], b: usize) -> ([__m512i; 4], __m256i, f32) {
    let x = row.as_ptr().add(b * Q6K_BYTES);
    let low = _mm512_set1_epi8(0xF);
    let two = _mm512_set1_epi8(3);
    let mut q6 = [_mm512_setzero_si512(); 4];
    for j in 0..2 {
        let nibbles = _mm512_loadu_si512(x.add(64 * j) as *const _);
        let h = _mm256_loadu_si256(x.add(Q6K_HIGH + 32 * j) as *const __m256i);
        let high = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(h), _mm256_srli_epi16::<2>(h));
        q6[2 * j] =
            _mm512_or_si512(_mm512_and_si512(nibbles, low), _mm512_slli_epi16::<4>(_mm512_and_si512(high, two)));
        q6[2 * j + 1] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16::<4>(nibbles), low),
            _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srli_epi16::<4>(high), two)),
        );
    }
    let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.add(Q6K_SCALES) as *const __m128i));
    (q6, scales16, f16_at(&row[b * Q6K_BYTES..], Q6K_D))
}

/// Word w of vector v takes scale 4v + w/8 (each scale covers 16 weights, 8 words): the
/// `permutexvar` indices that spread a block's 16 scales over its 4 vectors.
const SPREAD: [[i16; 32]; 4] = {
    let mut idx = [[0i16; 32]; 4];
    let mut i = 0;
    while i < 128 {
        idx[i / 32][i % 32] = (4 * (i / 32) + i % 32 / 8) as i16;
        i += 1;
    }
    idx
};

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub unsafe fn q6k_tile(row: &[u8], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
    let n = tokens.len();
    let blocks = row.len() / Q6K_BYTES;
    let ys = token_bytes(tokens);
    let mut acc = _mm_setzero_ps();
    let spread = SPREAD.map(|idx| _mm512_loadu_si512(idx.as_ptr() as *const _));
    for b in 0..blocks {
        block::prefetch_ahead(row.as_ptr().add(b * Q6K_BYTES), Q6K_BYTES);
        let (q6, scales16, d) = q6k_weights(row, b);
        let all = _mm512_castsi256_si512(scales16);
        let scale = spread.map(|s| _mm512_permutexvar_epi16(s, all));
        let mut first = [_mm256_setzero_si256(); TILE];
        let mut second = [_mm256_setzero_si256(); TILE];
        for t in 0..n {
            let (_, q8) = q8k_block(ys[t], b);
            let mut sumi = _mm512_setzero_si512();
            for v in 0..4 {
                let y = _mm512_loadu_si512(q8.add(64 * v) as *const _);
                sumi = _mm512_dpwssd_epi32(sumi, scale[v], _mm512_maddubs_epi16(q6[v], y));
            }
            first[t] = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
            second[t] = _mm256_madd_epi16(_mm256_loadu_si256(q8.add(256) as *const __m256i), scales16);
        }
        acc = avx2::finish_tile(&first, &second, d, 32.0 * d, &ys, n, b, acc);
    }
    let mut sums = [0f32; TILE];
    _mm_storeu_ps(sums.as_mut_ptr(), acc);
    out.copy_from_slice(&sums[..n]);
}

// The set's table: its own tiles and panels, over AVX2's unpacking.
panel_kernel!(
    /// # Safety
    /// The CPU must have AVX-512 F/BW/VNNI.
    q4k_panels, matmul, avx2::unpack_q4k, 32, Q4K_BYTES
);
panel_kernel!(
    /// # Safety
    /// The CPU must have AVX-512 F/BW/VNNI.
    q6k_panels, matmul, avx2::unpack_q6k, 16, Q6K_BYTES
);

/// AVX-512 VNNI's kernels.
pub static TABLE: KernelTable = KernelTable {
    q4k_tile,
    q6k_tile,
    q4k_panels: Some(q4k_panels),
    q6k_panels: Some(q6k_panels),
    q8_0_dot: super::q8_0::candle_x86,
};

#[cfg(test)]
mod tests {
    use super::super::block::{self, canonical};
    use super::super::panels::PANEL;
    use super::super::{avxvnni, bytes_of, cpu_has_avx512_vnni, KernelSet, KernelTable, TileKernel, Q8K_BYTES};
    use super::*;
    use candle_core::quantized::k_quants::{BlockQ4K, BlockQ6K, BlockQ8K, GgmlType};

    /// `canonical` over a row's unpacked blocks and a token's Q8_K bytes, in plain integers.
    fn reference(unpacked: &[Unpacked], sub: usize, token: &[u8]) -> f32 {
        let mut acc = 0f32;
        for (b, u) in unpacked.iter().enumerate() {
            let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
            let yd = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
            let q = |k: usize| y[4 + k] as i8 as i32;
            let first: i32 = (0..256 / sub)
                .map(|s| u.scales[s] * (s * sub..(s + 1) * sub).map(|k| u.weights[k] as i32 * q(k)).sum::<i32>())
                .sum();
            // Sums of `sub` values: Q4_K's mins and Q6_K's scales cover that many each.
            let sum = |i: usize| {
                (i * sub / 16..(i + 1) * sub / 16)
                    .map(|k| i16::from_le_bytes([y[260 + 2 * k], y[261 + 2 * k]]) as i32)
                    .sum::<i32>()
            };
            let second: i32 = (0..128 / sub)
                .map(|p| {
                    (u.pairs[p] as u16 as i16 as i32) * sum(2 * p)
                        + ((u.pairs[p] >> 16) as u16 as i16 as i32) * sum(2 * p + 1)
                })
                .sum();
            acc = canonical(acc, u.d, u.m, yd, first, second);
        }
        acc
    }

    fn tokens(cols: usize, count: usize) -> Vec<Vec<BlockQ8K>> {
        (0..count)
            .map(|t| {
                let x: Vec<f32> = (0..cols).map(|i| ((i * (31 + t) % 257) as f32 - 128.0) / (3.0 + t as f32)).collect();
                let mut q = vec![BlockQ8K::zeros(); cols / 256];
                BlockQ8K::from_float(&x, &mut q);
                q
            })
            .collect()
    }

    /// Rows of 16 blocks whose values (both signs, scales large and small) reach every packing.
    fn weights(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| {
                ((i * 7919 % 1013) as f32 - 506.0) / (1.0 + (i / 256 % 16) as f32)
                    * if i % 48 < 16 { -1.0 } else { 1.0 }
            })
            .collect()
    }

    /// The panels (AVX2, and AVX-512 VNNI where the CPU has it), the per-token tiles (the same
    /// two) and the plain-integer reference give the same bits, for both formats; a tile's
    /// token the same alone as with others.
    fn agree<T: GgmlType<VecDotType = BlockQ8K>>(
        sub: usize,
        unpack: unsafe fn(&[u8], usize, &mut Unpacked),
        plain_unpack: fn(&[u8], usize, &mut Unpacked),
        tile: fn(&KernelTable) -> TileKernel,
    ) {
        if !cpu_has_avx512_vnni() {
            println!("this CPU has no AVX-512 VNNI: only the AVX2 panels and tiles run here");
        }
        // 4 and 5 panels: groups of three panels, of two and of one; 6 rows: a group of four
        // and two alone.
        for m in [4 * PANEL, 5 * PANEL] {
            agree_over::<T>(m, sub, unpack, plain_unpack, tile);
        }
    }

    fn agree_over<T: GgmlType<VecDotType = BlockQ8K>>(
        m: usize,
        sub: usize,
        unpack: unsafe fn(&[u8], usize, &mut Unpacked),
        plain_unpack: fn(&[u8], usize, &mut Unpacked),
        tile_of: fn(&KernelTable) -> TileKernel,
    ) {
        let (rows, cols) = (6, 16 * 256);
        let w = weights(rows, cols);
        let mut blocks = vec![T::zeros(); rows * cols / 256];
        T::from_float(&w, &mut blocks);
        let row_bytes = cols / 256 * std::mem::size_of::<T>();
        let bytes = bytes_of(&blocks);
        let tokens = tokens(cols, m);
        let token_bytes: Vec<&[u8]> = tokens.iter().map(|t| bytes_of(t)).collect();
        let panels = Panels::new(&token_bytes, cols / 256, m);
        // SAFETY: the unpacking's set is one this CPU runs; each row holds whole blocks.
        let unpack_row =
            |i: usize, b: usize, u: &mut Unpacked| unsafe { unpack(&bytes[i * row_bytes..(i + 1) * row_bytes], b, u) };
        let vnni = cpu_has_avx512_vnni();
        let mut outs = vec![("AVX2 panels", vec![f32::NAN; rows * m])];
        match sub {
            32 => avx2::matmul::<32>(rows, cols / 256, unpack_row, &panels, &mut outs[0].1, m),
            _ => avx2::matmul::<16>(rows, cols / 256, unpack_row, &panels, &mut outs[0].1, m),
        }
        if vnni {
            let mut out = vec![f32::NAN; rows * m];
            // SAFETY: AVX-512 VNNI checked above; rows and panels hold whole blocks.
            unsafe {
                match sub {
                    32 => matmul::<32>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                    _ => matmul::<16>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                }
            }
            outs.push(("AVX-512 panels", out));
        }
        if KernelSet::runnable().contains(&KernelSet::AvxVnni) {
            let mut out = vec![f32::NAN; rows * m];
            // SAFETY: AVX-VNNI checked above; rows and panels hold whole blocks.
            unsafe {
                match sub {
                    32 => avxvnni::matmul::<32>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                    _ => avxvnni::matmul::<16>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                }
            }
            outs.push(("256-bit VNNI panels", out));
        }
        let mut tiles: Vec<(&str, TileKernel)> =
            vec![("AVX2 tiles", tile_of(&avx2::TABLE)), ("plain tiles", tile_of(&block::TABLE))];
        if vnni {
            tiles.push(("AVX-512 tiles", tile_of(&TABLE)));
        }
        for r in 0..rows {
            let row = &blocks[r * cols / 256..(r + 1) * cols / 256];
            let unpacked: Vec<Unpacked> = (0..cols / 256)
                .map(|b| {
                    let mut u = Unpacked::ZERO;
                    unpack_row(r, b, &mut u);
                    // The plain unpacker (every CPU's) gives the vector one's block.
                    let mut plain = Unpacked::ZERO;
                    plain_unpack(&bytes[r * row_bytes..(r + 1) * row_bytes], b, &mut plain);
                    assert_eq!(plain.weights, u.weights, "row {r} block {b}: weights");
                    assert_eq!(plain.scales[..256 / sub], u.scales[..256 / sub], "row {r} block {b}: scales");
                    assert_eq!(plain.pairs[..128 / sub], u.pairs[..128 / sub], "row {r} block {b}: pairs");
                    assert_eq!((plain.d.to_bits(), plain.m.to_bits()), (u.d.to_bits(), u.m.to_bits()));
                    u
                })
                .collect();
            for t in 0..m {
                let expected = reference(&unpacked, sub, token_bytes[t]);
                for &(name, tile) in &tiles {
                    let mut alone = [0f32];
                    // SAFETY: every tile listed is of a set this CPU runs; the row and token hold whole blocks.
                    unsafe { tile(bytes_of(row), &[&tokens[t]], &mut alone) };
                    let tile_start = t / TILE * TILE;
                    let together: Vec<&[BlockQ8K]> =
                        tokens[tile_start..tile_start + TILE].iter().map(|t| t.as_slice()).collect();
                    let mut in_tile = [0f32; TILE];
                    // SAFETY: as above, over a tile's worth of tokens.
                    unsafe { tile(bytes_of(row), &together, &mut in_tile) };
                    assert_eq!(
                        alone[0].to_bits(),
                        expected.to_bits(),
                        "row {r} token {t}: {name} {} vs reference {expected}",
                        alone[0]
                    );
                    assert_eq!(
                        in_tile[t - tile_start].to_bits(),
                        expected.to_bits(),
                        "row {r} token {t}: {name}: the tile changed the result"
                    );
                }
                for (name, out) in &outs {
                    let panel = out[r * m + t];
                    assert_eq!(
                        panel.to_bits(),
                        expected.to_bits(),
                        "row {r} token {t}: {name} {panel} vs reference {expected}"
                    );
                }
                let candle = T::vec_dot(cols, row, &tokens[t]);
                assert!(
                    (candle - expected).abs() <= 1e-4 * candle.abs().max(1.0),
                    "row {r} token {t}: {expected} vs candle {candle}"
                );
            }
        }
    }

    /// Multiply-adds per second on one thread at a prompt's shape (1,024 rows of 1,536, a slice
    /// of the FFN's gate, and 96 tokens), for each format: the AVX2 tiles (four tokens a pass
    /// over the row), the AVX2 panels and, where the CPU has AVX-512 VNNI, its panels one and
    /// three at a time. Every kernel must give the same bits. The speeds are printed, not
    /// checked: run with --ignored --nocapture.
    #[test]
    #[ignore = "a measurement: cargo test --release panel_speed -- --ignored --nocapture"]
    fn panel_speed() {
        fn speeds<T: GgmlType<VecDotType = BlockQ8K>, const SUB: usize>(
            unpack: unsafe fn(&[u8], usize, &mut Unpacked),
            narrow: TileKernel,
        ) {
            let (rows, cols, m) = (1024, 1536, 6 * PANEL);
            let mut blocks = vec![T::zeros(); rows * cols / 256];
            T::from_float(&weights(rows, cols), &mut blocks);
            let row_bytes = cols / 256 * std::mem::size_of::<T>();
            let bytes = bytes_of(&blocks);
            let tokens = tokens(cols, m);
            let token_bytes: Vec<&[u8]> = tokens.iter().map(|t| bytes_of(t)).collect();
            let panels = Panels::new(&token_bytes, cols / 256, m);
            let rounds = 10;
            // A task of 16 rows into `out` ([row][token]).
            type Task<'a> = Box<dyn Fn(usize, &mut [f32]) + 'a>;
            let row = |r: usize| &bytes[r * row_bytes..(r + 1) * row_bytes];
            // SAFETY: the unpacking's set is one this CPU runs; each task's rows hold whole blocks.
            let unpacking =
                |task: usize| move |i: usize, b: usize, u: &mut Unpacked| unsafe { unpack(row(task * 16 + i), b, u) };
            let mut kernels: Vec<(&str, Task)> = vec![
                (
                    "AVX2 tiles",
                    Box::new(|task: usize, out: &mut [f32]| {
                        let refs: Vec<&[BlockQ8K]> = tokens.iter().map(|t| t.as_slice()).collect();
                        for i in 0..16 {
                            for (t, o) in refs.chunks(TILE).zip(out[i * m..(i + 1) * m].chunks_mut(TILE)) {
                                // SAFETY: `narrow` is of a set this CPU runs; the row and tokens hold whole blocks.
                                unsafe { narrow(row(task * 16 + i), t, o) };
                            }
                        }
                    }),
                ),
                (
                    "AVX2 panels",
                    Box::new(|task: usize, out: &mut [f32]| {
                        avx2::matmul::<SUB>(16, cols / 256, unpacking(task), &panels, out, m)
                    }),
                ),
            ];
            if KernelSet::runnable().contains(&KernelSet::AvxVnni) {
                kernels.push((
                    "256-bit VNNI panels",
                    // SAFETY: AVX-VNNI checked above; rows and panels hold whole blocks.
                    Box::new(|task: usize, out: &mut [f32]| unsafe {
                        avxvnni::matmul::<SUB>(16, cols / 256, unpacking(task), &panels, out, m)
                    }),
                ));
            }
            if cpu_has_avx512_vnni() {
                kernels.push((
                    "AVX-512 panels one at a time",
                    // SAFETY: AVX-512 VNNI checked above; rows and panels hold whole blocks.
                    Box::new(|task: usize, out: &mut [f32]| unsafe {
                        matmul_grouped::<SUB, 1>(16, cols / 256, unpacking(task), &panels, out, m)
                    }),
                ));
                kernels.push((
                    "AVX-512 panels three at a time",
                    // SAFETY: AVX-512 VNNI checked above; rows and panels hold whole blocks.
                    Box::new(|task: usize, out: &mut [f32]| unsafe {
                        matmul_grouped::<SUB, 3>(16, cols / 256, unpacking(task), &panels, out, m)
                    }),
                ));
            }
            for _ in 0..3 {
                let mut line = format!("{:?}, G multiply-adds/s on one thread:", T::DTYPE);
                let mut last: Option<Vec<f32>> = None;
                for (name, kernel) in &kernels {
                    let mut out = vec![0f32; 16 * m];
                    let start = std::time::Instant::now();
                    for _ in 0..rounds {
                        for task in 0..rows / 16 {
                            kernel(task, &mut out);
                        }
                    }
                    let rate = (rounds * rows * cols * m) as f64 / start.elapsed().as_secs_f64() / 1e9;
                    line += &format!(" {name} {rate:.1};");
                    if let Some(last) = &last {
                        assert!(last.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()), "{name} differs");
                    }
                    last = Some(out);
                }
                println!("{line}");
            }
        }
        speeds::<BlockQ4K, 32>(avx2::unpack_q4k, avx2::q4k_tile);
        speeds::<BlockQ6K, 16>(avx2::unpack_q6k, avx2::q6k_tile);
    }

    #[test]
    fn q4k_panels_give_the_per_token_kernels_bits() {
        agree::<BlockQ4K>(32, avx2::unpack_q4k, block::unpack_q4k, |t| t.q4k_tile);
    }

    #[test]
    fn q6k_panels_give_the_per_token_kernels_bits() {
        agree::<BlockQ6K>(16, avx2::unpack_q6k, block::unpack_q6k, |t| t.q6k_tile);
    }
}
