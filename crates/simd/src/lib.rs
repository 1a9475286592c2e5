//! Vector float routines shared by the decoder (`quire-llm`) and the embedder (`quire-embed`):
//! the softmax and the helpers it needs. The build baseline (x86-64-v3) has AVX2 and FMA;
//! the AVX-512 form is for callers that detected it at run time.
//!
//! `softmax` is the decoder's: attention calls it for one token at a time and its result must
//! not change with anything but the row (batch invariance), so it is the same instructions on
//! every call of a process.

/// `row` becomes its softmax.
pub fn softmax(row: &mut [f32]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        // SAFETY: the build targets AVX2 and FMA.
        unsafe { avx2::softmax(row) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    {
        let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for s in row.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        for s in row.iter_mut() {
            *s /= sum;
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub mod avx2 {
    use std::arch::x86_64::*;

    /// The sum of a vector's eight floats, in a fixed order (the Q4_K kernels use it too).
    ///
    /// # Safety
    /// The CPU must have AVX2 (the build's baseline).
    #[inline(always)]
    pub unsafe fn hsum(x: __m256) -> f32 {
        let r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        let r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        let r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    /// `e^x` for each lane, x ≤ 0 (the softmax subtracts the maximum): Cephes' expf, 2^n by
    /// the exponent bits and a degree-5 polynomial on the rest (within 2 ulp); below -87 it
    /// gives e^-87 (the weight vanishes against the maximum's 1 either way).
    #[inline(always)]
    unsafe fn exp(x: __m256) -> __m256 {
        let x = _mm256_max_ps(x, _mm256_set1_ps(-87.0));
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
            x,
            _mm256_set1_ps(std::f32::consts::LOG2_E),
        ));
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut y = _mm256_set1_ps(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
            y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
        }
        let y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
        let two_n = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
        _mm256_mul_ps(y, _mm256_castsi256_ps(two_n))
    }

    /// `row` becomes its softmax, 8 values per instruction.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (the build baseline).
    pub unsafe fn softmax(row: &mut [f32]) {
        let n = row.len();
        let whole = n / 8 * 8;
        let p = row.as_mut_ptr();
        // The tail as a ninth vector, its missing lanes at -inf (max) and masked out (sum).
        let mut tail = [f32::NEG_INFINITY; 8];
        tail[..n - whole].copy_from_slice(&row[whole..]);
        let mut max = _mm256_loadu_ps(tail.as_ptr());
        for c in (0..whole).step_by(8) {
            max = _mm256_max_ps(max, _mm256_loadu_ps(p.add(c)));
        }
        let m = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps::<1>(max));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_movehdup_ps(m));
        let max = _mm256_broadcastss_ps(m);
        let mut sum = _mm256_setzero_ps();
        for c in (0..whole).step_by(8) {
            let e = exp(_mm256_sub_ps(_mm256_loadu_ps(p.add(c)), max));
            _mm256_storeu_ps(p.add(c), e);
            sum = _mm256_add_ps(sum, e);
        }
        let valid: [i32; 8] = std::array::from_fn(|i| if i < n - whole { -1 } else { 0 });
        let mask = _mm256_loadu_si256(valid.as_ptr() as *const __m256i);
        let e = _mm256_and_ps(exp(_mm256_sub_ps(_mm256_loadu_ps(tail.as_ptr()), max)), _mm256_castsi256_ps(mask));
        sum = _mm256_add_ps(sum, e);
        _mm256_storeu_ps(tail.as_mut_ptr(), e);
        row[whole..].copy_from_slice(&tail[..n - whole]);
        let inverse = 1.0 / hsum(sum);
        for c in (0..whole).step_by(8) {
            _mm256_storeu_ps(p.add(c), _mm256_mul_ps(_mm256_loadu_ps(p.add(c)), _mm256_set1_ps(inverse)));
        }
        for v in &mut row[whole..] {
            *v *= inverse;
        }
    }
}

/// The softmax 16 values per instruction: the same polynomial as `avx2`'s exponential, the
/// power of two applied with `vscalefps`, the tail under a mask.
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    use std::arch::x86_64::*;

    /// `row` becomes its softmax.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn softmax(row: &mut [f32]) {
        let len = row.len();
        let p = row.as_mut_ptr();
        let tail = (len % 16) as u32;
        let tail_mask: __mmask16 = ((1u32 << tail) - 1) as u16;
        let whole = len - tail as usize;
        let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
        for i in (0..whole).step_by(16) {
            max = _mm512_max_ps(max, _mm512_loadu_ps(p.add(i)));
        }
        max = _mm512_max_ps(max, _mm512_mask_loadu_ps(_mm512_set1_ps(f32::NEG_INFINITY), tail_mask, p.add(whole)));
        let max = _mm512_set1_ps(_mm512_reduce_max_ps(max));
        let mut sum = _mm512_setzero_ps();
        for i in (0..whole).step_by(16) {
            let y = exp(_mm512_sub_ps(_mm512_loadu_ps(p.add(i)), max));
            _mm512_storeu_ps(p.add(i), y);
            sum = _mm512_add_ps(sum, y);
        }
        if tail > 0 {
            let y = exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail_mask, p.add(whole)), max));
            _mm512_mask_storeu_ps(p.add(whole), tail_mask, y);
            sum = _mm512_mask_add_ps(sum, tail_mask, sum, y);
        }
        let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(sum));
        for i in (0..whole).step_by(16) {
            _mm512_storeu_ps(p.add(i), _mm512_mul_ps(_mm512_loadu_ps(p.add(i)), inv));
        }
        if tail > 0 {
            let v = _mm512_maskz_loadu_ps(tail_mask, p.add(whole));
            _mm512_mask_storeu_ps(p.add(whole), tail_mask, _mm512_mul_ps(v, inv));
        }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn exp(x: __m512) -> __m512 {
        let x = _mm512_max_ps(x, _mm512_set1_ps(-87.0));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(_mm512_fmadd_ps(
            x,
            _mm512_set1_ps(std::f32::consts::LOG2_E),
            _mm512_set1_ps(0.5),
        ));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
        let r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.121_944_4e-4), r);
        let mut p = _mm512_set1_ps(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
        _mm512_scalef_ps(y, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f64 softmax of `row`.
    fn exact(row: &[f32]) -> Vec<f64> {
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, |a, b| a.max(b as f64));
        let total: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
        row.iter().map(|&x| (x as f64 - max).exp() / total).collect()
    }

    /// Against exp in f64, for lengths with and without a tail and scores far below the
    /// maximum (whose weights vanish).
    #[test]
    fn softmax_matches_the_f64_formula() {
        for n in [1, 5, 8, 37, 300] {
            let row: Vec<f32> =
                (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 3.0 - if i % 11 == 0 { 200.0 } else { 0.0 }).collect();
            let mut got = row.clone();
            softmax(&mut got);
            for (i, (&g, want)) in got.iter().zip(exact(&row)).enumerate() {
                assert!((g as f64 - want).abs() <= 4e-6 * want.max(1e-30) + 1e-37, "n {n} i {i}: {g} vs {want}");
            }
        }
    }

    /// The AVX-512 form against the same formula, where the CPU has it (on others only the
    /// baseline form above is tested).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx512_softmax_matches_the_f64_formula() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512F on this CPU: the AVX-512 softmax is not tested here");
            return;
        }
        for n in 1..70 {
            let row: Vec<f32> = (0..n).map(|i| ((i * 7919 % 61) as f32 - 30.0) * 0.37).collect();
            let mut got = row.clone();
            unsafe { avx512::softmax(&mut got) };
            for (i, (&g, want)) in got.iter().zip(exact(&row)).enumerate() {
                assert!((g as f64 - want).abs() <= 4e-6 * want.max(1e-30) + 1e-37, "n {n} i {i}: {g} vs {want}");
            }
        }
    }
}
