//! A prompt-sized batch laid out for the panel kernels (`avx512`, `avxvnni`, `avx2`, `neon`'s
//! with dot products and with i8mm), and the loop they all run over
//! a task's weight rows: plain Rust, the same on every CPU.
//!
//! The tokens' bytes are laid out once per matmul so that the four bytes of each token at
//! positions 4g..4g+4 sit side by side: one vector load gives the same four positions of many
//! tokens, which a single broadcast group of four weights multiplies. For `smmla` (ARM's i8mm)
//! they are laid out in pairs of tokens instead: one load gives 8 positions of two tokens.

use super::block::{pair, Unpacked};
use super::Q8K_BYTES;

/// Tokens per panel: the 16 lanes of a 512-bit vector of 32-bit sums.
pub const PANEL: usize = 16;

/// How a panel's token bytes are laid out (`Panels::codes`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    /// Per block, 64 groups of the 16 tokens' four bytes (positions 4g..4g+4).
    Groups,
    /// Per block, 32 runs of 8 positions (8e..8e+8), each as 8 pairs of tokens: tokens 2k and
    /// 2k+1's 8 bytes, one after the other.
    TokenPairs,
}

impl Layout {
    /// The layout the panel kernels of the set in use read.
    pub fn in_use() -> Layout {
        if super::KernelSet::in_use() == super::KernelSet::NeonI8mm {
            Layout::TokenPairs
        } else {
            Layout::Groups
        }
    }
}

/// A batch's Q8_K activations in panels of 16 tokens, per panel and block: the 16 tokens'
/// 256 bytes (`layout`), 8 groups of their pairs of 16-value sums, 4 of their pairs of 32-value
/// sums, and their 16 scales.
pub struct Panels {
    pub panels: usize,
    pub(super) layout: Layout,
    pub(super) blocks: usize,
    pub(super) codes: Vec<u32>,
    pub(super) sums: Vec<u32>,
    pub(super) sums32: Vec<u32>,
    pub(super) scales: Vec<f32>,
}

impl Panels {
    /// `tokens` (each a row of Q8_K blocks, as bytes) in `lanes / 16` panels, laid out for the
    /// kernels in use: with `lanes` past the tokens, the last panel's empty lanes are zero
    /// (their results are zero, and dropped).
    pub fn new(tokens: &[&[u8]], blocks: usize, lanes: usize) -> Panels {
        Panels::laid_out(tokens, blocks, lanes, Layout::in_use())
    }

    /// As `new`, in `layout`.
    pub fn laid_out(tokens: &[&[u8]], blocks: usize, lanes: usize, layout: Layout) -> Panels {
        use rayon::prelude::*;
        let panels = lanes / PANEL;
        let mut codes = vec![0u32; panels * blocks * 64 * PANEL];
        let mut sums = vec![0u32; panels * blocks * 8 * PANEL];
        let mut sums32 = vec![0u32; panels * blocks * 4 * PANEL];
        let mut scales = vec![0f32; panels * blocks * PANEL];
        codes
            .par_chunks_mut(blocks * 64 * PANEL)
            .zip(sums.par_chunks_mut(blocks * 8 * PANEL))
            .zip(sums32.par_chunks_mut(blocks * 4 * PANEL))
            .zip(scales.par_chunks_mut(blocks * PANEL))
            .enumerate()
            .for_each(|(p, (((codes, sums), sums32), scales))| {
                for (lane, token) in tokens.iter().skip(p * PANEL).take(PANEL).enumerate() {
                    for b in 0..blocks {
                        let y = &token[b * Q8K_BYTES..(b + 1) * Q8K_BYTES];
                        scales[b * PANEL + lane] = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
                        for g in 0..64 {
                            let q = &y[4 + 4 * g..8 + 4 * g];
                            let at = match layout {
                                Layout::Groups => (b * 64 + g) * PANEL + lane,
                                // Run g / 2, pair lane / 2, token lane % 2, half g % 2.
                                Layout::TokenPairs => ((b * 32 + g / 2) * 8 + lane / 2) * 4 + lane % 2 * 2 + g % 2,
                            };
                            codes[at] = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
                        }
                        for u in 0..8 {
                            let s = &y[260 + 4 * u..264 + 4 * u];
                            sums[(b * 8 + u) * PANEL + lane] = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                        }
                        // Sums of 32 values fit 16 bits too (at most 32 · 128 in magnitude).
                        let sum32 = |v: usize| {
                            let s = |i: usize| i16::from_le_bytes([y[260 + 2 * i], y[261 + 2 * i]]);
                            s(2 * v) + s(2 * v + 1)
                        };
                        for u in 0..4 {
                            sums32[(b * 4 + u) * PANEL + lane] = pair(sum32(2 * u), sum32(2 * u + 1));
                        }
                    }
                }
            });
        Panels { panels, layout, blocks, codes, sums, sums32, scales }
    }
}

/// The loop every panel kernel runs over a task: for each block in order, the task's rows
/// unpacked, then every group of `group` panels against every `rows_at_once` rows (a last
/// smaller group of rows one at a time): `accumulate(rows, first panel, panels, block, where
/// the first row's first panel's results go)`, called for blocks 0, 1, … in order. `out` is
/// zeroed first; `panels` must be in the `layout` the kernel reads.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn each_block(
    rows: usize,
    blocks: usize,
    unpack: impl Fn(usize, usize, &mut Unpacked),
    panels: &Panels,
    layout: Layout,
    out: &mut [f32],
    stride: usize,
    group: usize,
    rows_at_once: usize,
    accumulate: impl Fn(&[Unpacked], usize, usize, usize, *mut f32),
) {
    assert_eq!(panels.layout, layout, "the panels are not laid out as the kernel reads them");
    assert!(panels.blocks == blocks && out.len() >= rows.saturating_sub(1) * stride + PANEL * panels.panels);
    out.iter_mut().for_each(|o| *o = 0.0);
    let mut unpacked = vec![Unpacked::ZERO; rows];
    // Every place handed out is in bounds (asserted above).
    let base = out.as_mut_ptr();
    let at = |row: usize, p: usize| base.wrapping_add(row * stride + p * PANEL);
    for b in 0..blocks {
        for (i, u) in unpacked.iter_mut().enumerate() {
            unpack(i, b, u);
        }
        for p in (0..panels.panels).step_by(group) {
            let count = (panels.panels - p).min(group);
            for first in (0..rows).step_by(rows_at_once) {
                let these = &unpacked[first..(first + rows_at_once).min(rows)];
                if these.len() == rows_at_once {
                    accumulate(these, p, count, b, at(first, p));
                } else {
                    for (i, row) in these.iter().enumerate() {
                        accumulate(std::slice::from_ref(row), p, count, b, at(first + i, p));
                    }
                }
            }
        }
    }
}
