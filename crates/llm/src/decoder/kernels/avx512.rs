//! Prompt-sized batches on AVX-512 VNNI: weight rows times panels of 16 tokens, one `vpdpbusd`
//! multiplying four weights of one row with the same four positions of all 16 tokens (64
//! products per instruction, where the per-token kernels make 16 or fewer).
//!
//! The tokens' bytes are laid out once per matmul (`panels::Panels`); a task's weight rows are
//! unpacked to one byte per weight a block at a time and reused for every panel.
//!
//! Exactness: a (row, token) result here equals the per-token kernel's bit for bit
//! (`canonical`): per 256-weight block both compute the same two exact integers, then the same
//! two fused multiply-adds in block order. So a token's logits do not depend on whether its
//! batch went through panels or tiles, nor on what else was in it.

pub use super::block::Unpacked;
use super::panels::{each_block, Layout};
pub use super::panels::{Panels, PANEL};
use super::Q8K_BYTES;
use std::arch::x86_64::*;

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

/// The per-token kernels' end of a block for a tile of up to 4 tokens: each token's two
/// integers arrive as 8 partial sums (`first[t]`, `second[t]`), are summed exactly, and go
/// through `canonical` with token t in lane t of `acc`.
#[inline(always)]
unsafe fn finish_block(first: &[__m256i; 4], second: &[__m256i; 4], d: f32, m: f32, yd: __m128, acc: __m128) -> __m128 {
    let first = _mm_cvtepi32_ps(totals(first));
    let second = _mm_cvtepi32_ps(totals(second));
    let acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(d), yd), first, acc);
    _mm_fnmadd_ps(_mm_mul_ps(_mm_set1_ps(m), yd), second, acc)
}

/// A tile's end of block `b` for its `n` tokens: `finish_one` for one, else `finish_block`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn finish_tile(
    first: &[__m256i; 4],
    second: &[__m256i; 4],
    d: f32,
    m: f32,
    ys: &[&[u8]; 4],
    n: usize,
    b: usize,
    acc: __m128,
) -> __m128 {
    if n == 1 {
        finish_one(first[0], second[0], d, m, super::q8k_block(ys[0], b).0, acc)
    } else {
        finish_block(first, second, d, m, token_scales(ys, n, b), acc)
    }
}

/// `finish_block` for a tile of one token (decoding): its two integers reduced together, lane 0
/// of `acc` updated by the same two fused multiply-adds.
#[inline(always)]
unsafe fn finish_one(first: __m256i, second: __m256i, d: f32, m: f32, yd: f32, acc: __m128) -> __m128 {
    // [f01 f23 s01 s23 | f45 f67 s45 s67], then [f0123 s0123 … | f4567 s4567 …].
    let h = _mm256_hadd_epi32(first, second);
    let h = _mm256_hadd_epi32(h, h);
    let totals = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h)));
    let acc = _mm_fmadd_ss(_mm_set_ss(d * yd), totals, acc);
    _mm_fnmadd_ss(_mm_set_ss(m * yd), _mm_movehdup_ps(totals), acc)
}

/// The sum of each of four vectors' eight 32-bit lanes, as lanes 0..4.
#[inline(always)]
unsafe fn totals(v: &[__m256i; 4]) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// The tile's tokens' scales of block `b` (0 for lanes without a token).
#[inline(always)]
unsafe fn token_scales(ys: &[&[u8]; 4], n: usize, b: usize) -> __m128 {
    let mut yd = [0f32; 4];
    for t in 0..n {
        let y = &ys[t][b * Q8K_BYTES..];
        yd[t] = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
    }
    _mm_loadu_ps(yd.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::super::block::canonical;
    use super::super::{bytes_of, cpu_has_avx512_vnni, q4k, q6k, KernelSet, TileKernel, Tiles, TILE};
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
        tiles: &Tiles,
    ) {
        if !cpu_has_avx512_vnni() {
            println!("this CPU has no AVX-512 VNNI: only the AVX2 panels and tiles run here");
        }
        // 4 and 5 panels: groups of three panels, of two and of one; 6 rows: a group of four
        // and two alone.
        for m in [4 * PANEL, 5 * PANEL] {
            agree_over::<T>(m, sub, unpack, plain_unpack, tiles);
        }
    }

    fn agree_over<T: GgmlType<VecDotType = BlockQ8K>>(
        m: usize,
        sub: usize,
        unpack: unsafe fn(&[u8], usize, &mut Unpacked),
        plain_unpack: fn(&[u8], usize, &mut Unpacked),
        kernels: &Tiles,
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
            32 => super::super::panel_avx2::matmul::<32>(rows, cols / 256, unpack_row, &panels, &mut outs[0].1, m),
            _ => super::super::panel_avx2::matmul::<16>(rows, cols / 256, unpack_row, &panels, &mut outs[0].1, m),
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
                    32 => super::super::panel_vnni256::matmul::<32>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                    _ => super::super::panel_vnni256::matmul::<16>(rows, cols / 256, unpack_row, &panels, &mut out, m),
                }
            }
            outs.push(("256-bit VNNI panels", out));
        }
        let mut tiles: Vec<(&str, TileKernel)> = vec![("AVX2 tiles", kernels.avx2), ("plain tiles", kernels.portable)];
        if vnni {
            tiles.push(("AVX-512 tiles", kernels.avx512));
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
                        super::super::panel_avx2::matmul::<SUB>(16, cols / 256, unpacking(task), &panels, out, m)
                    }),
                ),
            ];
            if KernelSet::runnable().contains(&KernelSet::AvxVnni) {
                kernels.push((
                    "256-bit VNNI panels",
                    // SAFETY: AVX-VNNI checked above; rows and panels hold whole blocks.
                    Box::new(|task: usize, out: &mut [f32]| unsafe {
                        super::super::panel_vnni256::matmul::<SUB>(16, cols / 256, unpacking(task), &panels, out, m)
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
        speeds::<BlockQ4K, 32>(q4k::unpack, q4k::TILES.avx2);
        speeds::<BlockQ6K, 16>(q6k::unpack, q6k::TILES.avx2);
    }

    #[test]
    fn q4k_panels_give_the_per_token_kernels_bits() {
        agree::<BlockQ4K>(32, q4k::unpack, super::super::block::unpack_q4k, &q4k::TILES);
    }

    #[test]
    fn q6k_panels_give_the_per_token_kernels_bits() {
        agree::<BlockQ6K>(16, q6k::unpack, super::super::block::unpack_q6k, &q6k::TILES);
    }
}
