//! The two inner loops of attention for one token and one KV head: the query heads' scores
//! against every cached key, and the score-weighted sum of the cached values.
//!
//! A token's result is computed by the same instructions in the same order whatever else is in
//! its batch (each call sees one token), so attention stays batch-invariant. On x86-64 the
//! build baseline (x86-64-v3) has AVX2 and FMA; the loops keep several independent
//! accumulators so the FMA units are not waiting on one dependency chain (the plain loop spent
//! a quarter of a long prompt's time here).

/// `scores[h * seen + p] = scale × (queries[h] · keys[p])` for the `group` query heads of
/// `queries` (`group × hd`) and the `seen` keys of `keys` (`seen × hd`, one after another).
pub fn scores(queries: &[f32], keys: &[f32], hd: usize, scale: f32, scores: &mut [f32]) {
    let group = queries.len() / hd;
    let seen = scores.len() / group.max(1);
    debug_assert!(keys.len() >= seen * hd && scores.len() == group * seen);
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        // SAFETY: the build targets AVX2 and FMA (the cfg above); bounds are checked above.
        unsafe { avx2::scores(queries, keys, hd, group, seen, scale, scores) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    for p in 0..seen {
        let key = &keys[p * hd..(p + 1) * hd];
        for h in 0..group {
            let q = &queries[h * hd..(h + 1) * hd];
            scores[h * seen + p] = q.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() * scale;
        }
    }
}

/// `out[h] = Σ_p weights[h * seen + p] × values[p]` for each of the `group` heads of `out`
/// (`group × hd`) over the `seen` values of `values` (`seen × hd`).
pub fn weighted_values(weights: &[f32], values: &[f32], hd: usize, out: &mut [f32]) {
    let group = out.len() / hd;
    let seen = weights.len() / group.max(1);
    debug_assert!(values.len() >= seen * hd && weights.len() == group * seen);
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        // SAFETY: as in `scores`.
        unsafe { avx2::weighted_values(weights, values, hd, group, seen, out) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    for h in 0..group {
        let o = &mut out[h * hd..(h + 1) * hd];
        o.fill(0.0);
        for p in 0..seen {
            let w = weights[h * seen + p];
            for (oi, vi) in o.iter_mut().zip(&values[p * hd..(p + 1) * hd]) {
                *oi += w * vi;
            }
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub(super) use avx2::hsum;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2 {
    use std::arch::x86_64::*;

    /// The sum of a vector's eight floats, in a fixed order (the Q4_K kernels use it too).
    #[inline(always)]
    pub unsafe fn hsum(x: __m256) -> f32 {
        let r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        let r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        let r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    pub unsafe fn scores(q: &[f32], keys: &[f32], hd: usize, group: usize, seen: usize, scale: f32, out: &mut [f32]) {
        let wide = hd / 32 * 32;
        let narrow = hd / 8 * 8;
        for p in 0..seen {
            let k = keys.as_ptr().add(p * hd);
            for h in 0..group {
                let qh = q.as_ptr().add(h * hd);
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut c = 0;
                while c < wide {
                    for (i, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(_mm256_loadu_ps(qh.add(c + 8 * i)), _mm256_loadu_ps(k.add(c + 8 * i)), *a);
                    }
                    c += 32;
                }
                while c < narrow {
                    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(qh.add(c)), _mm256_loadu_ps(k.add(c)), acc[0]);
                    c += 8;
                }
                let mut s = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
                while c < hd {
                    s += *qh.add(c) * *k.add(c);
                    c += 1;
                }
                out[h * seen + p] = s * scale;
            }
        }
    }

    /// Eight running sums of eight lanes: 64 of a head's dimensions at a time, each value row
    /// read once per 64 dimensions for all positions.
    pub unsafe fn weighted_values(w: &[f32], values: &[f32], hd: usize, group: usize, seen: usize, out: &mut [f32]) {
        let wide = hd / 64 * 64;
        let narrow = hd / 8 * 8;
        for h in 0..group {
            let wh = &w[h * seen..(h + 1) * seen];
            let o = out.as_mut_ptr().add(h * hd);
            let mut c = 0;
            while c < wide {
                let mut acc = [_mm256_setzero_ps(); 8];
                for (p, &wp) in wh.iter().enumerate() {
                    let v = values.as_ptr().add(p * hd + c);
                    let wp = _mm256_set1_ps(wp);
                    for (i, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(wp, _mm256_loadu_ps(v.add(8 * i)), *a);
                    }
                }
                for (i, a) in acc.iter().enumerate() {
                    _mm256_storeu_ps(o.add(c + 8 * i), *a);
                }
                c += 64;
            }
            while c < narrow {
                let mut acc = _mm256_setzero_ps();
                for (p, &wp) in wh.iter().enumerate() {
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(wp), _mm256_loadu_ps(values.as_ptr().add(p * hd + c)), acc);
                }
                _mm256_storeu_ps(o.add(c), acc);
                c += 8;
            }
            while c < hd {
                let mut s = 0f32;
                for (p, &wp) in wh.iter().enumerate() {
                    s += wp * values[p * hd + c];
                }
                *o.add(c) = s;
                c += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the textbook loops in f64, for head sizes with every kind of tail.
    #[test]
    fn scores_and_weighted_values_match_plain_loops() {
        for hd in [64, 72, 100, 128] {
            let (group, seen) = (3, 37);
            let f = |i: usize, m: usize| ((i * m % 101) as f32 - 50.0) / 37.0;
            let q: Vec<f32> = (0..group * hd).map(|i| f(i, 7)).collect();
            let k: Vec<f32> = (0..seen * hd).map(|i| f(i, 13)).collect();
            let v: Vec<f32> = (0..seen * hd).map(|i| f(i, 17)).collect();
            let mut s = vec![0f32; group * seen];
            scores(&q, &k, hd, 0.5, &mut s);
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
}
