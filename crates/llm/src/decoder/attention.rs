//! The inner loops of attention for one token and one KV head: the query heads' scores against
//! every cached key, their softmax, and the score-weighted sum of the cached values.
//!
//! A token's result is computed by the same instructions in the same order whatever else is in
//! its batch (each call sees one token), so attention stays batch-invariant. On x86-64 the
//! build baseline (x86-64-v3) has AVX2 and FMA. Keys are cached in blocks of 16 positions,
//! dimension-major (`KEY_BLOCK`), so scores come 16 positions at a time, one per lane, with no
//! horizontal sums, and several query heads share each load of a key block; the softmax is
//! `quire_simd::softmax` (8 exponentials at a time).

/// Positions per block of the key cache: within a block, dimension d of the 16 positions sits
/// at `d * 16 .. d * 16 + 16`.
pub const KEY_BLOCK: usize = 16;

use super::kernels::KernelSet;

/// `scores[h * seen + p] = scale × (queries[h] · key p)` for the `group` query heads of
/// `queries` (`group × hd`) and the `seen` keys of `keys` (whole blocks of `KEY_BLOCK`).
pub fn scores(queries: &[f32], keys: &[f32], hd: usize, scale: f32, scores: &mut [f32]) {
    scores_by(KernelSet::in_use(), queries, keys, hd, scale, scores)
}

/// `scores` by the kernels of `set`, which the CPU must run (`KernelSet::runnable`).
fn scores_by(set: KernelSet, queries: &[f32], keys: &[f32], hd: usize, scale: f32, scores: &mut [f32]) {
    let group = queries.len() / hd;
    let seen = scores.len() / group.max(1);
    assert!(keys.len() >= seen.next_multiple_of(KEY_BLOCK) * hd && scores.len() == group * seen);
    match set {
        // SAFETY: the CPU has AVX-512 F (`runnable`); bounds are checked above.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni => unsafe { avx512::scores(queries, keys, hd, group, seen, scale, scores) },
        // SAFETY: the build targets AVX2 and FMA (the cfg); bounds are checked above.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx2 | KernelSet::AvxVnni => unsafe { avx2::scores(queries, keys, hd, group, seen, scale, scores) },
        // SAFETY: NEON is part of every aarch64 CPU; bounds are checked above.
        #[cfg(target_arch = "aarch64")]
        KernelSet::NeonI8mm | KernelSet::NeonDotprod | KernelSet::Neon => unsafe {
            neon::scores(queries, keys, hd, group, seen, scale, scores)
        },
        _ => plain::scores(queries, keys, hd, group, seen, scale, scores),
    }
}

/// `out[h] = Σ_p weights[h * seen + p] × values[p]` for each of the `group` heads of `out`
/// (`group × hd`) over the `seen` values of `values` (`seen × hd`).
pub fn weighted_values(weights: &[f32], values: &[f32], hd: usize, out: &mut [f32]) {
    weighted_values_by(KernelSet::in_use(), weights, values, hd, out)
}

/// `weighted_values`' chains carried on from `out` over `seen` more positions (a few: a
/// tree's branch verified after the cache's positions it shares), in plain loops: each kernel
/// set's chain for a lane is the plain one, so the sums are the bits one kernel call over all
/// the positions in order gives.
pub fn weighted_values_more(weights: &[f32], values: &[f32], hd: usize, out: &mut [f32]) {
    let group = out.len() / hd;
    let seen = weights.len() / group.max(1);
    assert!(values.len() >= seen * hd && weights.len() == group * seen);
    plain::more_weighted_values(weights, values, hd, group, seen, out)
}

/// `weighted_values_i8`' chains carried on from `out`, as `weighted_values_more`.
pub fn weighted_values_i8_more(weights: &[f32], values: &[i8], value_scales: &[f32], hd: usize, out: &mut [f32]) {
    let group = out.len() / hd;
    let seen = weights.len() / group.max(1);
    assert!(values.len() >= seen * hd && value_scales.len() >= seen * hd.div_ceil(SCALE_BLOCK));
    assert!(weights.len() == group * seen);
    plain::more_weighted_values_i8(weights, values, value_scales, hd, group, seen, out)
}

/// `weighted_values` by the kernels of `set`, which the CPU must run.
fn weighted_values_by(set: KernelSet, weights: &[f32], values: &[f32], hd: usize, out: &mut [f32]) {
    let group = out.len() / hd;
    let seen = weights.len() / group.max(1);
    assert!(values.len() >= seen * hd && weights.len() == group * seen);
    match set {
        // SAFETY: as in `scores`.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni => unsafe { avx512::weighted_values(weights, values, hd, group, seen, out) },
        // SAFETY: as in `scores`.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx2 | KernelSet::AvxVnni => unsafe { avx2::weighted_values(weights, values, hd, group, seen, out) },
        // SAFETY: as in `scores`.
        #[cfg(target_arch = "aarch64")]
        KernelSet::NeonI8mm | KernelSet::NeonDotprod | KernelSet::Neon => unsafe {
            neon::weighted_values(weights, values, hd, group, seen, out)
        },
        _ => {
            out.fill(0.0);
            plain::more_weighted_values(weights, values, hd, group, seen, out)
        }
    }
}

/// Dimensions that share one scale in the 8-bit cache (as llama.cpp's `q8_0`: an outlier
/// dimension coarsens only its own block's steps).
pub const SCALE_BLOCK: usize = 32;

/// `scores` over keys cached in 8 bits, each position's dimensions in blocks of `SCALE_BLOCK`
/// with a scale each: `key_scales` holds, per block of `KEY_BLOCK` positions, each dimension
/// block's 16 scales. A score is `Σ_b (queries[h] · keys[p] over block b) × scale_b`, then
/// times `scale`: each block's dot product the chain of fused multiply-adds `scores` runs, over
/// the keys widened to f32 (exactly), the blocks added by fused multiply-adds in order.
pub fn scores_i8(queries: &[f32], keys: &[i8], key_scales: &[f32], hd: usize, scale: f32, scores: &mut [f32]) {
    scores_i8_by(KernelSet::in_use(), queries, keys, key_scales, hd, scale, scores)
}

fn scores_i8_by(
    set: KernelSet,
    queries: &[f32],
    keys: &[i8],
    key_scales: &[f32],
    hd: usize,
    scale: f32,
    scores: &mut [f32],
) {
    let group = queries.len() / hd;
    let seen = scores.len() / group.max(1);
    let blocks = seen.next_multiple_of(KEY_BLOCK);
    assert!(keys.len() >= blocks * hd && key_scales.len() >= blocks * hd.div_ceil(SCALE_BLOCK));
    assert!(scores.len() == group * seen);
    match set {
        // SAFETY: the build targets AVX2 and FMA (the cfg); bounds are checked above. AVX-512's
        // wider lanes would give the same bits; 8-bit keys are read at AVX2's width.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni | KernelSet::Avx2 | KernelSet::AvxVnni => unsafe {
            avx2_i8::scores_i8(queries, keys, key_scales, hd, group, seen, scale, scores)
        },
        _ => plain::scores_i8(queries, keys, key_scales, hd, group, seen, scale, scores),
    }
}

/// `weighted_values` over values cached in 8 bits with a scale per `SCALE_BLOCK` dimensions
/// (`value_scales`: per position, its blocks' scales): each position's weight times its block's
/// scale, then the same chains as `weighted_values`' over the values widened to f32.
pub fn weighted_values_i8(weights: &[f32], values: &[i8], value_scales: &[f32], hd: usize, out: &mut [f32]) {
    weighted_values_i8_by(KernelSet::in_use(), weights, values, value_scales, hd, out)
}

fn weighted_values_i8_by(
    set: KernelSet,
    weights: &[f32],
    values: &[i8],
    value_scales: &[f32],
    hd: usize,
    out: &mut [f32],
) {
    let group = out.len() / hd;
    let seen = weights.len() / group.max(1);
    assert!(values.len() >= seen * hd && value_scales.len() >= seen * hd.div_ceil(SCALE_BLOCK));
    assert!(weights.len() == group * seen);
    match set {
        // SAFETY: as in `scores_i8`.
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        KernelSet::Avx512Vnni | KernelSet::Avx2 | KernelSet::AvxVnni => unsafe {
            avx2_i8::weighted_values_i8(weights, values, value_scales, hd, group, seen, out)
        },
        _ => {
            out.fill(0.0);
            plain::more_weighted_values_i8(weights, values, value_scales, hd, group, seen, out)
        }
    }
}

/// The sums every kernel set computes, one lane at a time in plain Rust: a score is a chain of
/// fused multiply-adds over the dimensions, from zero, then times the scale; a weighted value
/// a chain over the positions, fused for the dimensions that fill vectors of 8 and plain
/// (multiply, then add) for the last `hd % 8`, as the AVX2 loops do.
mod plain {
    use super::{KEY_BLOCK, SCALE_BLOCK};

    pub fn scores(q: &[f32], keys: &[f32], hd: usize, group: usize, seen: usize, scale: f32, out: &mut [f32]) {
        for p in 0..seen {
            let block = &keys[p / KEY_BLOCK * KEY_BLOCK * hd..];
            for h in 0..group {
                let q = &q[h * hd..(h + 1) * hd];
                let dot = (0..hd).fold(0f32, |acc, d| q[d].mul_add(block[d * KEY_BLOCK + p % KEY_BLOCK], acc));
                out[h * seen + p] = dot * scale;
            }
        }
    }

    /// `weighted_values`' chains from the sums in `out` on (from zeros for the kernel itself).
    pub fn more_weighted_values(w: &[f32], values: &[f32], hd: usize, group: usize, seen: usize, out: &mut [f32]) {
        let fused = hd / 8 * 8;
        for h in 0..group {
            let o = &mut out[h * hd..(h + 1) * hd];
            for p in 0..seen {
                let wp = w[h * seen + p];
                let v = &values[p * hd..(p + 1) * hd];
                for c in 0..hd {
                    o[c] = if c < fused { wp.mul_add(v[c], o[c]) } else { o[c] + wp * v[c] };
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn scores_i8(
        q: &[f32],
        keys: &[i8],
        key_scales: &[f32],
        hd: usize,
        group: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let blocks = hd.div_ceil(SCALE_BLOCK);
        for p in 0..seen {
            let block = &keys[p / KEY_BLOCK * KEY_BLOCK * hd..];
            let scales = &key_scales[p / KEY_BLOCK * KEY_BLOCK * blocks..];
            for h in 0..group {
                let q = &q[h * hd..(h + 1) * hd];
                let mut total = 0f32;
                for b in 0..blocks {
                    let dims = b * SCALE_BLOCK..((b + 1) * SCALE_BLOCK).min(hd);
                    let part =
                        dims.fold(0f32, |acc, d| q[d].mul_add(f32::from(block[d * KEY_BLOCK + p % KEY_BLOCK]), acc));
                    total = part.mul_add(scales[b * KEY_BLOCK + p % KEY_BLOCK], total);
                }
                out[h * seen + p] = total * scale;
            }
        }
    }

    /// `weighted_values_i8`' chains from the sums in `out` on (from zeros for the kernel).
    pub fn more_weighted_values_i8(
        w: &[f32],
        values: &[i8],
        value_scales: &[f32],
        hd: usize,
        group: usize,
        seen: usize,
        out: &mut [f32],
    ) {
        let fused = hd / 8 * 8;
        let blocks = hd.div_ceil(SCALE_BLOCK);
        for h in 0..group {
            let o = &mut out[h * hd..(h + 1) * hd];
            for p in 0..seen {
                let v = &values[p * hd..(p + 1) * hd];
                for c in 0..hd {
                    let wp = w[h * seen + p] * value_scales[p * blocks + c / SCALE_BLOCK];
                    let vc = f32::from(v[c]);
                    o[c] = if c < fused { wp.mul_add(vc, o[c]) } else { o[c] + wp * vc };
                }
            }
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use super::KEY_BLOCK;
    use std::arch::x86_64::*;

    pub unsafe fn scores(q: &[f32], keys: &[f32], hd: usize, group: usize, seen: usize, scale: f32, out: &mut [f32]) {
        // Up to 6 heads per pass over a block: 12 accumulators, 2 key vectors, 1 broadcast.
        for first in (0..group).step_by(6) {
            let heads = &q[first * hd..(first + (group - first).min(6)) * hd];
            let out = &mut out[first * seen..];
            match heads.len() / hd {
                1 => heads_scores::<1>(heads, keys, hd, seen, scale, out),
                2 => heads_scores::<2>(heads, keys, hd, seen, scale, out),
                3 => heads_scores::<3>(heads, keys, hd, seen, scale, out),
                4 => heads_scores::<4>(heads, keys, hd, seen, scale, out),
                5 => heads_scores::<5>(heads, keys, hd, seen, scale, out),
                _ => heads_scores::<6>(heads, keys, hd, seen, scale, out),
            }
        }
    }

    /// Scores of `N` heads: per block, per dimension, the 16 positions' values against each
    /// head's broadcast query value.
    #[inline(always)]
    unsafe fn heads_scores<const N: usize>(
        q: &[f32],
        keys: &[f32],
        hd: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let scale = _mm256_set1_ps(scale);
        for block in 0..seen.div_ceil(KEY_BLOCK) {
            let k = keys.as_ptr().add(block * KEY_BLOCK * hd);
            let mut acc = [[_mm256_setzero_ps(); 2]; N];
            for d in 0..hd {
                let k0 = _mm256_loadu_ps(k.add(d * KEY_BLOCK));
                let k1 = _mm256_loadu_ps(k.add(d * KEY_BLOCK + 8));
                for (h, a) in acc.iter_mut().enumerate() {
                    let qd = _mm256_broadcast_ss(&*q.as_ptr().add(h * hd + d));
                    a[0] = _mm256_fmadd_ps(qd, k0, a[0]);
                    a[1] = _mm256_fmadd_ps(qd, k1, a[1]);
                }
            }
            let from = block * KEY_BLOCK;
            let here = (seen - from).min(KEY_BLOCK);
            for (h, a) in acc.iter().enumerate() {
                let mut lanes = [0f32; KEY_BLOCK];
                _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_mul_ps(a[0], scale));
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), _mm256_mul_ps(a[1], scale));
                out[h * seen + from..h * seen + from + here].copy_from_slice(&lanes[..here]);
            }
        }
    }

    /// Up to 3 heads at a time over 32 of their dimensions: 12 running sums, and each value row
    /// read once for all of them.
    pub unsafe fn weighted_values(w: &[f32], values: &[f32], hd: usize, group: usize, seen: usize, out: &mut [f32]) {
        for first in (0..group).step_by(3) {
            let heads = (group - first).min(3);
            let (w, out) = (&w[first * seen..(first + heads) * seen], &mut out[first * hd..(first + heads) * hd]);
            match heads {
                1 => heads_values::<1>(w, values, hd, seen, out),
                2 => heads_values::<2>(w, values, hd, seen, out),
                _ => heads_values::<3>(w, values, hd, seen, out),
            }
        }
    }

    #[inline(always)]
    unsafe fn heads_values<const N: usize>(w: &[f32], values: &[f32], hd: usize, seen: usize, out: &mut [f32]) {
        heads_values_from::<N, f32>(values, hd, seen, out, 0, |h, p, _| w[h * seen + p])
    }

    /// A value the cache holds, widened to f32 exactly: eight at a time, or one.
    pub trait Cached: Copy {
        unsafe fn eight(at: *const Self) -> __m256;
        fn one(self) -> f32;
    }

    impl Cached for f32 {
        #[inline(always)]
        unsafe fn eight(at: *const f32) -> __m256 {
            _mm256_loadu_ps(at)
        }
        fn one(self) -> f32 {
            self
        }
    }

    impl Cached for i8 {
        #[inline(always)]
        unsafe fn eight(at: *const i8) -> __m256 {
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(at as *const __m128i)))
        }
        fn one(self) -> f32 {
            f32::from(self)
        }
    }

    /// `heads_values` for dimensions `from..hd` (each dimension's sum is its own, so where a
    /// wider kernel did the first ones the rest are as they would be here), over values of
    /// either kind, `weight(h, p, c)` head h's weight of position p for dimension c.
    #[inline(always)]
    pub unsafe fn heads_values_from<const N: usize, T: Cached>(
        values: &[T],
        hd: usize,
        seen: usize,
        out: &mut [f32],
        from: usize,
        weight: impl Fn(usize, usize, usize) -> f32,
    ) {
        let wide = from + (hd - from) / 32 * 32;
        let narrow = from + (hd - from) / 8 * 8;
        let v = values.as_ptr();
        let mut c = from;
        while c < wide {
            let mut acc = [[_mm256_setzero_ps(); 4]; N];
            for p in 0..seen {
                let row = [0, 8, 16, 24].map(|i| T::eight(v.add(p * hd + c + i)));
                for (h, a) in acc.iter_mut().enumerate() {
                    let wp = _mm256_set1_ps(weight(h, p, c));
                    for i in 0..4 {
                        a[i] = _mm256_fmadd_ps(wp, row[i], a[i]);
                    }
                }
            }
            for (h, a) in acc.iter().enumerate() {
                for (i, ai) in a.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(h * hd + c + 8 * i), *ai);
                }
            }
            c += 32;
        }
        while c < narrow {
            for h in 0..N {
                let mut acc = _mm256_setzero_ps();
                for p in 0..seen {
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(weight(h, p, c)), T::eight(v.add(p * hd + c)), acc);
                }
                _mm256_storeu_ps(out.as_mut_ptr().add(h * hd + c), acc);
            }
            c += 8;
        }
        while c < hd {
            for h in 0..N {
                let mut s = 0f32;
                for p in 0..seen {
                    s += weight(h, p, c) * values[p * hd + c].one();
                }
                out[h * hd + c] = s;
            }
            c += 1;
        }
    }
}

/// `avx2`'s loops over keys and values cached in 8 bits: each byte widened to f32 (exactly)
/// where `avx2` loads an f32, then the same chains, block by block of `SCALE_BLOCK` dimensions.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2_i8 {
    use super::avx2::Cached;
    use super::{KEY_BLOCK, SCALE_BLOCK};
    use std::arch::x86_64::*;

    #[allow(clippy::too_many_arguments)]
    pub unsafe fn scores_i8(
        q: &[f32],
        keys: &[i8],
        ks: &[f32],
        hd: usize,
        group: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        for first in (0..group).step_by(4) {
            let heads = &q[first * hd..(first + (group - first).min(4)) * hd];
            let out = &mut out[first * seen..];
            match heads.len() / hd {
                1 => heads_scores::<1>(heads, keys, ks, hd, seen, scale, out),
                2 => heads_scores::<2>(heads, keys, ks, hd, seen, scale, out),
                3 => heads_scores::<3>(heads, keys, ks, hd, seen, scale, out),
                _ => heads_scores::<4>(heads, keys, ks, hd, seen, scale, out),
            }
        }
    }

    /// Scores of `N` heads (4 at most: 16 running sums, a block's and the total's, in 16 registers).
    #[inline(always)]
    unsafe fn heads_scores<const N: usize>(
        q: &[f32],
        keys: &[i8],
        ks: &[f32],
        hd: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let scale = _mm256_set1_ps(scale);
        let blocks = hd.div_ceil(SCALE_BLOCK);
        for block in 0..seen.div_ceil(KEY_BLOCK) {
            let k = keys.as_ptr().add(block * KEY_BLOCK * hd);
            let s = ks.as_ptr().add(block * KEY_BLOCK * blocks);
            let mut total = [[_mm256_setzero_ps(); 2]; N];
            for b in 0..blocks {
                let mut part = [[_mm256_setzero_ps(); 2]; N];
                for d in b * SCALE_BLOCK..((b + 1) * SCALE_BLOCK).min(hd) {
                    let k0 = i8::eight(k.add(d * KEY_BLOCK));
                    let k1 = i8::eight(k.add(d * KEY_BLOCK + 8));
                    for (h, a) in part.iter_mut().enumerate() {
                        let qd = _mm256_broadcast_ss(&*q.as_ptr().add(h * hd + d));
                        a[0] = _mm256_fmadd_ps(qd, k0, a[0]);
                        a[1] = _mm256_fmadd_ps(qd, k1, a[1]);
                    }
                }
                let sb = [_mm256_loadu_ps(s.add(b * KEY_BLOCK)), _mm256_loadu_ps(s.add(b * KEY_BLOCK + 8))];
                for (t, a) in total.iter_mut().zip(&part) {
                    t[0] = _mm256_fmadd_ps(a[0], sb[0], t[0]);
                    t[1] = _mm256_fmadd_ps(a[1], sb[1], t[1]);
                }
            }
            let from = block * KEY_BLOCK;
            let here = (seen - from).min(KEY_BLOCK);
            for (h, t) in total.iter().enumerate() {
                let mut lanes = [0f32; KEY_BLOCK];
                _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_mul_ps(t[0], scale));
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), _mm256_mul_ps(t[1], scale));
                out[h * seen + from..h * seen + from + here].copy_from_slice(&lanes[..here]);
            }
        }
    }

    pub unsafe fn weighted_values_i8(
        w: &[f32],
        values: &[i8],
        vs: &[f32],
        hd: usize,
        group: usize,
        seen: usize,
        out: &mut [f32],
    ) {
        for first in (0..group).step_by(3) {
            let heads = (group - first).min(3);
            let (w, out) = (&w[first * seen..(first + heads) * seen], &mut out[first * hd..(first + heads) * hd]);
            match heads {
                1 => heads_values::<1>(w, values, vs, hd, seen, out),
                2 => heads_values::<2>(w, values, vs, hd, seen, out),
                _ => heads_values::<3>(w, values, vs, hd, seen, out),
            }
        }
    }

    /// `avx2`'s loops over the bytes, a weight times its position's scale of the dimension's block.
    #[inline(always)]
    unsafe fn heads_values<const N: usize>(
        w: &[f32],
        values: &[i8],
        vs: &[f32],
        hd: usize,
        seen: usize,
        out: &mut [f32],
    ) {
        let blocks = hd.div_ceil(SCALE_BLOCK);
        let weight = |h: usize, p: usize, c: usize| w[h * seen + p] * vs[p * blocks + c / SCALE_BLOCK];
        super::avx2::heads_values_from::<N, i8>(values, hd, seen, out, 0, weight)
    }
}

/// The same sums 16 lanes at a time where the CPU has AVX-512: each lane runs the same chain
/// of fused multiply-adds in the same order as in `avx2` (a key block's 16 positions are one
/// vector here, two there; value dimensions likewise), so the results are the same bits and
/// the choice of kernel changes nothing but the time.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx512 {
    use super::KEY_BLOCK;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn scores(q: &[f32], keys: &[f32], hd: usize, group: usize, seen: usize, scale: f32, out: &mut [f32]) {
        // Up to 8 heads per pass over a block: 8 accumulators, a key vector, a broadcast.
        for first in (0..group).step_by(8) {
            let heads = &q[first * hd..(first + (group - first).min(8)) * hd];
            let out = &mut out[first * seen..];
            match heads.len() / hd {
                1 => heads_scores::<1>(heads, keys, hd, seen, scale, out),
                2 => heads_scores::<2>(heads, keys, hd, seen, scale, out),
                3 => heads_scores::<3>(heads, keys, hd, seen, scale, out),
                4 => heads_scores::<4>(heads, keys, hd, seen, scale, out),
                5 => heads_scores::<5>(heads, keys, hd, seen, scale, out),
                6 => heads_scores::<6>(heads, keys, hd, seen, scale, out),
                7 => heads_scores::<7>(heads, keys, hd, seen, scale, out),
                _ => heads_scores::<8>(heads, keys, hd, seen, scale, out),
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn heads_scores<const N: usize>(
        q: &[f32],
        keys: &[f32],
        hd: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let scale = _mm512_set1_ps(scale);
        let blocks = seen.div_ceil(KEY_BLOCK);
        // Two blocks per pass where there are two: each sum is a chain of `hd` multiply-adds,
        // and one block's N chains (6 for Qwen2.5-1.5B) keep the multipliers busy only N
        // cycles in every 4 (the instruction's latency). Each lane's chain is the same either way.
        for pair in (0..blocks).step_by(2) {
            if pair + 1 < blocks {
                blocks_scores::<N, 2>(q, keys, hd, pair, seen, scale, out);
            } else {
                blocks_scores::<N, 1>(q, keys, hd, pair, seen, scale, out);
            }
        }
    }

    /// The scores of `B` key blocks from block `first` on, each against the `N` heads.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn blocks_scores<const N: usize, const B: usize>(
        q: &[f32],
        keys: &[f32],
        hd: usize,
        first: usize,
        seen: usize,
        scale: __m512,
        out: &mut [f32],
    ) {
        let k = keys.as_ptr().add(first * KEY_BLOCK * hd);
        let mut acc = [[_mm512_setzero_ps(); N]; B];
        for d in 0..hd {
            let mut kd = [_mm512_setzero_ps(); B];
            for (b, kd) in kd.iter_mut().enumerate() {
                *kd = _mm512_loadu_ps(k.add(b * KEY_BLOCK * hd + d * KEY_BLOCK));
            }
            for h in 0..N {
                let qd = _mm512_set1_ps(*q.as_ptr().add(h * hd + d));
                for (a, kd) in acc.iter_mut().zip(kd) {
                    a[h] = _mm512_fmadd_ps(qd, kd, a[h]);
                }
            }
        }
        for (b, acc) in acc.iter().enumerate() {
            store_scores(acc, (first + b) * KEY_BLOCK, seen, scale, out);
        }
    }

    /// Head h's scores of the key block from position `from` on, times `scale`, into
    /// `out[h * seen + from..]` (past `seen`, none).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store_scores<const N: usize>(
        acc: &[__m512; N],
        from: usize,
        seen: usize,
        scale: __m512,
        out: &mut [f32],
    ) {
        let here = (seen - from).min(KEY_BLOCK);
        let mask: __mmask16 = ((1u32 << here) - 1) as u16;
        for (h, a) in acc.iter().enumerate() {
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(h * seen + from), mask, _mm512_mul_ps(*a, scale));
        }
    }

    #[target_feature(enable = "avx512f")]
    pub unsafe fn weighted_values(w: &[f32], values: &[f32], hd: usize, group: usize, seen: usize, out: &mut [f32]) {
        for first in (0..group).step_by(3) {
            let heads = (group - first).min(3);
            let (w, out) = (&w[first * seen..(first + heads) * seen], &mut out[first * hd..(first + heads) * hd]);
            match heads {
                1 => heads_values::<1>(w, values, hd, seen, out),
                2 => heads_values::<2>(w, values, hd, seen, out),
                _ => heads_values::<3>(w, values, hd, seen, out),
            }
        }
    }

    /// Up to 3 heads over 64 of their dimensions at a time (12 running sums); dimensions past
    /// the last 64 by `avx2`'s loops.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn heads_values<const N: usize>(w: &[f32], values: &[f32], hd: usize, seen: usize, out: &mut [f32]) {
        let wide = hd / 64 * 64;
        let v = values.as_ptr();
        for c in (0..wide).step_by(64) {
            let mut acc = [[_mm512_setzero_ps(); 4]; N];
            for p in 0..seen {
                let row = [0, 16, 32, 48].map(|i| _mm512_loadu_ps(v.add(p * hd + c + i)));
                for (h, a) in acc.iter_mut().enumerate() {
                    let wp = _mm512_set1_ps(*w.get_unchecked(h * seen + p));
                    for i in 0..4 {
                        a[i] = _mm512_fmadd_ps(wp, row[i], a[i]);
                    }
                }
            }
            for (h, a) in acc.iter().enumerate() {
                for (i, ai) in a.iter().enumerate() {
                    _mm512_storeu_ps(out.as_mut_ptr().add(h * hd + c + 16 * i), *ai);
                }
            }
        }
        if wide < hd {
            super::avx2::heads_values_from::<N, f32>(values, hd, seen, out, wide, |h, p, _| {
                *w.get_unchecked(h * seen + p)
            });
        }
    }
}

/// The same chains of fused multiply-adds four lanes at a time on ARM (`vfmaq_f32` rounds
/// once, as `vfmadd` does): a key block's 16 positions are four vectors here, two with AVX2.
#[cfg(target_arch = "aarch64")]
mod neon {
    use super::KEY_BLOCK;
    use std::arch::aarch64::*;

    pub unsafe fn scores(q: &[f32], keys: &[f32], hd: usize, group: usize, seen: usize, scale: f32, out: &mut [f32]) {
        // Up to 6 heads per pass over a block: 24 accumulators, 4 key vectors.
        for first in (0..group).step_by(6) {
            let heads = &q[first * hd..(first + (group - first).min(6)) * hd];
            let out = &mut out[first * seen..];
            match heads.len() / hd {
                1 => heads_scores::<1>(heads, keys, hd, seen, scale, out),
                2 => heads_scores::<2>(heads, keys, hd, seen, scale, out),
                3 => heads_scores::<3>(heads, keys, hd, seen, scale, out),
                4 => heads_scores::<4>(heads, keys, hd, seen, scale, out),
                5 => heads_scores::<5>(heads, keys, hd, seen, scale, out),
                _ => heads_scores::<6>(heads, keys, hd, seen, scale, out),
            }
        }
    }

    #[inline(always)]
    unsafe fn heads_scores<const N: usize>(
        q: &[f32],
        keys: &[f32],
        hd: usize,
        seen: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        for block in 0..seen.div_ceil(KEY_BLOCK) {
            let k = keys.as_ptr().add(block * KEY_BLOCK * hd);
            let mut acc = [[vdupq_n_f32(0.0); 4]; N];
            for d in 0..hd {
                let kd = [0, 4, 8, 12].map(|i| vld1q_f32(k.add(d * KEY_BLOCK + i)));
                for (h, a) in acc.iter_mut().enumerate() {
                    let qd = *q.get_unchecked(h * hd + d);
                    for i in 0..4 {
                        a[i] = vfmaq_n_f32(a[i], kd[i], qd);
                    }
                }
            }
            let from = block * KEY_BLOCK;
            let here = (seen - from).min(KEY_BLOCK);
            for (h, a) in acc.iter().enumerate() {
                let mut lanes = [0f32; KEY_BLOCK];
                for (i, ai) in a.iter().enumerate() {
                    vst1q_f32(lanes.as_mut_ptr().add(4 * i), vmulq_n_f32(*ai, scale));
                }
                out[h * seen + from..h * seen + from + here].copy_from_slice(&lanes[..here]);
            }
        }
    }

    pub unsafe fn weighted_values(w: &[f32], values: &[f32], hd: usize, group: usize, seen: usize, out: &mut [f32]) {
        let fused = hd / 8 * 8;
        let v = values.as_ptr();
        for h in 0..group {
            let w = &w[h * seen..(h + 1) * seen];
            let o = out.as_mut_ptr().add(h * hd);
            // 32 dimensions at a time (8 running sums), then 4.
            let mut c = 0;
            while c + 32 <= fused {
                let mut acc = [vdupq_n_f32(0.0); 8];
                for (p, &wp) in w.iter().enumerate() {
                    for (i, a) in acc.iter_mut().enumerate() {
                        *a = vfmaq_n_f32(*a, vld1q_f32(v.add(p * hd + c + 4 * i)), wp);
                    }
                }
                for (i, a) in acc.iter().enumerate() {
                    vst1q_f32(o.add(c + 4 * i), *a);
                }
                c += 32;
            }
            while c < fused {
                let mut acc = vdupq_n_f32(0.0);
                for (p, &wp) in w.iter().enumerate() {
                    acc = vfmaq_n_f32(acc, vld1q_f32(v.add(p * hd + c)), wp);
                }
                vst1q_f32(o.add(c), acc);
                c += 4;
            }
            for c in fused..hd {
                let mut s = 0f32;
                for (p, &wp) in w.iter().enumerate() {
                    s += wp * values[p * hd + c];
                }
                *o.add(c) = s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the textbook loops in f64, for head sizes with every kind of tail, head counts
    /// over one pass (7 = 6 + 1) and a last key block part full.
    #[test]
    fn scores_and_weighted_values_match_plain_loops() {
        for hd in [64, 72, 100, 128] {
            let (group, seen) = (7, 37);
            let f = |i: usize, m: usize| ((i * m % 101) as f32 - 50.0) / 37.0;
            let q: Vec<f32> = (0..group * hd).map(|i| f(i, 7)).collect();
            let k: Vec<f32> = (0..seen * hd).map(|i| f(i, 13)).collect();
            let v: Vec<f32> = (0..seen * hd).map(|i| f(i, 17)).collect();
            // The cache's layout: blocks of 16 positions, dimension-major.
            let mut blocked = vec![f32::NAN; seen.next_multiple_of(KEY_BLOCK) * hd];
            for p in 0..seen {
                for d in 0..hd {
                    blocked[p / KEY_BLOCK * KEY_BLOCK * hd + d * KEY_BLOCK + p % KEY_BLOCK] = k[p * hd + d];
                }
            }
            let mut s = vec![0f32; group * seen];
            scores(&q, &blocked, hd, 0.5, &mut s);
            for h in 0..group {
                for p in 0..seen {
                    let want: f64 = (0..hd).map(|d| q[h * hd + d] as f64 * k[p * hd + d] as f64).sum::<f64>() * 0.5;
                    assert!((s[h * seen + p] as f64 - want).abs() < 1e-3, "hd {hd} h {h} p {p}");
                }
            }
            let w: Vec<f32> = (0..group * seen).map(|i| f(i, 3) / 10.0).collect();
            let mut out = vec![f32::NAN; group * hd];
            weighted_values(&w, &v, hd, &mut out);
            for h in 0..group {
                for d in 0..hd {
                    let want: f64 = (0..seen).map(|p| w[h * seen + p] as f64 * v[p * hd + d] as f64).sum();
                    assert!((out[h * hd + d] as f64 - want).abs() < 1e-3, "hd {hd} h {h} d {d}");
                }
            }
        }
    }

    /// Every kernel set this CPU runs gives the plain sums' bits (on x86 AVX-512 and AVX2, on
    /// ARM NEON), so which of them runs, and on which CPU, changes no answer.
    #[test]
    fn every_kernel_set_gives_the_same_bits() {
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for hd in [64, 72, 100, 128] {
            let (group, seen): (usize, usize) = (7, 37);
            let f = |i: usize, m: usize| ((i * m % 101) as f32 - 50.0) / 37.0;
            let q: Vec<f32> = (0..group * hd).map(|i| f(i, 7)).collect();
            let keys: Vec<f32> = (0..seen.next_multiple_of(KEY_BLOCK) * hd).map(|i| f(i, 13)).collect();
            let v: Vec<f32> = (0..seen * hd).map(|i| f(i, 17)).collect();
            let w: Vec<f32> = (0..group * seen).map(|i| f(i, 3) / 10.0).collect();
            let mut plain_scores = vec![0f32; group * seen];
            scores_by(KernelSet::Portable, &q, &keys, hd, 0.3, &mut plain_scores);
            let mut plain_values = vec![0f32; group * hd];
            weighted_values_by(KernelSet::Portable, &w, &v, hd, &mut plain_values);
            for set in KernelSet::runnable() {
                let mut s = vec![0f32; group * seen];
                scores_by(set, &q, &keys, hd, 0.3, &mut s);
                assert_eq!(bits(&s), bits(&plain_scores), "scores, {} kernels, hd {hd}", set.name());
                let mut out = vec![f32::NAN; group * hd];
                weighted_values_by(set, &w, &v, hd, &mut out);
                assert_eq!(bits(&out), bits(&plain_values), "weighted values, {} kernels, hd {hd}", set.name());
                // A tree's branch: the first positions by the kernels, the chains carried on
                // over the last few give the bits of one run over all.
                for near in [1, 16, 30] {
                    let (wn, wf) = split_rows(&w, group, seen, near);
                    let mut out = vec![f32::NAN; group * hd];
                    weighted_values_by(set, &wn, &v, hd, &mut out);
                    weighted_values_more(&wf, &v[near * hd..], hd, &mut out);
                    assert_eq!(bits(&out), bits(&plain_values), "carried on after {near}, {} kernels", set.name());
                }
            }
        }
    }

    /// Over keys and values cached in 8 bits: every kernel set the plain sums' bits, and the
    /// sums those of the widened keys and values with their blocks' scales, as in f64.
    #[test]
    fn eight_bit_keys_and_values_give_the_same_bits_in_every_kernel_set() {
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for hd in [64usize, 72, 100, 128] {
            let (group, seen): (usize, usize) = (7, 37);
            let (blocks, dim_blocks) = (seen.next_multiple_of(KEY_BLOCK), hd.div_ceil(SCALE_BLOCK));
            let f = |i: usize, m: usize| ((i * m % 101) as f32 - 50.0) / 37.0;
            let q: Vec<f32> = (0..group * hd).map(|i| f(i, 7)).collect();
            let byte = |i: usize, m: usize| ((i * m % 255) as i32 - 127) as i8;
            let keys: Vec<i8> = (0..blocks * hd).map(|i| byte(i, 13)).collect();
            let key_scales: Vec<f32> = (0..blocks * dim_blocks).map(|i| 0.01 + (i % 97) as f32 / 997.0).collect();
            let v: Vec<i8> = (0..seen * hd).map(|i| byte(i, 17)).collect();
            let value_scales: Vec<f32> = (0..seen * dim_blocks).map(|i| 0.02 + (i % 89) as f32 / 991.0).collect();
            let w: Vec<f32> = (0..group * seen).map(|i| f(i, 3) / 10.0).collect();
            let mut plain_scores = vec![0f32; group * seen];
            scores_i8_by(KernelSet::Portable, &q, &keys, &key_scales, hd, 0.3, &mut plain_scores);
            let mut plain_values = vec![0f32; group * hd];
            weighted_values_i8_by(KernelSet::Portable, &w, &v, &value_scales, hd, &mut plain_values);
            for h in 0..group {
                for p in 0..seen {
                    let (at, lane) = (p / KEY_BLOCK * KEY_BLOCK, p % KEY_BLOCK);
                    let key = |d: usize| keys[at * hd + d * KEY_BLOCK + lane] as f64;
                    let key_scale = |d: usize| key_scales[at * dim_blocks + d / SCALE_BLOCK * KEY_BLOCK + lane] as f64;
                    let want = (0..hd).map(|d| q[h * hd + d] as f64 * key(d) * key_scale(d)).sum::<f64>() * 0.3;
                    assert!((plain_scores[h * seen + p] as f64 - want).abs() < 1e-3, "hd {hd} h {h} p {p}");
                }
                for d in 0..hd {
                    let want: f64 = (0..seen)
                        .map(|p| {
                            w[h * seen + p] as f64
                                * value_scales[p * dim_blocks + d / SCALE_BLOCK] as f64
                                * v[p * hd + d] as f64
                        })
                        .sum();
                    assert!((plain_values[h * hd + d] as f64 - want).abs() < 1e-3, "hd {hd} h {h} d {d}");
                }
            }
            for set in KernelSet::runnable() {
                let mut s = vec![0f32; group * seen];
                scores_i8_by(set, &q, &keys, &key_scales, hd, 0.3, &mut s);
                assert_eq!(bits(&s), bits(&plain_scores), "8-bit scores, {} kernels, hd {hd}", set.name());
                let mut out = vec![f32::NAN; group * hd];
                weighted_values_i8_by(set, &w, &v, &value_scales, hd, &mut out);
                assert_eq!(bits(&out), bits(&plain_values), "8-bit weighted values, {} kernels, hd {hd}", set.name());
                for near in [1, 16, 30] {
                    let (wn, wf) = split_rows(&w, group, seen, near);
                    let mut out = vec![f32::NAN; group * hd];
                    weighted_values_i8_by(set, &wn, &v, &value_scales, hd, &mut out);
                    let far_scales = &value_scales[near * dim_blocks..];
                    weighted_values_i8_more(&wf, &v[near * hd..], far_scales, hd, &mut out);
                    assert_eq!(bits(&out), bits(&plain_values), "8-bit, carried on after {near}, {}", set.name());
                }
            }
        }
    }

    /// Each of `group` rows of `seen` weights cut after `near`: the first parts' rows, the rest's.
    fn split_rows(w: &[f32], group: usize, seen: usize, near: usize) -> (Vec<f32>, Vec<f32>) {
        let rows = || w.chunks(seen).take(group);
        (rows().flat_map(|r| &r[..near]).copied().collect(), rows().flat_map(|r| &r[near..]).copied().collect())
    }
}
