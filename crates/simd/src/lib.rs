//! What the decoder (`quire-llm`) and the embedder (`quire-embed`) share about the CPU: the
//! kernel sets it runs (`KernelSet`), and the softmax and SiLU with the helpers they need, in
//! the build's baseline vectors (x86-64-v3's AVX2 and FMA, ARM's NEON).
//!
//! `softmax` is the decoder's and the embedder's attention's: its result must not change with
//! anything but the row (batch invariance) nor with the CPU, so it is one sequence of
//! operations (`plain::softmax`'s) on every CPU; no wider form, whose sums would differ.

/// The instruction sets the kernels (the decoder's and the embedder's) come in, chosen once
/// per process. Every set gives the same bits, so the choice changes nothing but the time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(dead_code)] // a build constructs only its own CPU family's sets
pub enum KernelSet {
    /// x86-64 with AVX-512 F/BW/VL/VNNI (Intel since Ice Lake, AMD since Zen 4).
    Avx512Vnni,
    /// x86-64 with 256-bit VNNI: AVX-VNNI (Intel since Alder Lake, AMD since Zen 5). Where the
    /// CPU has AVX-512 VNNI instead, the same kernels run in that encoding of the instruction
    /// (`avxvnni_encoding`), for side-by-side figures.
    AvxVnni,
    /// x86-64-v3, the x86 build's baseline.
    Avx2,
    /// ARMv8.6 int8 matrix multiplies (`smmla`) with dot products: Apple M2 on, Snapdragon X,
    /// Graviton 3 on. The prompt's panels by `smmla`; everything else as `NeonDotprod`.
    NeonI8mm,
    /// ARMv8.2 dot products (`sdot`): every Apple silicon Mac, Snapdragon X, Graviton 2 on.
    NeonDotprod,
    /// NEON alone (every 64-bit ARM CPU).
    Neon,
    /// Plain Rust: any other CPU, and the reference the others are tested against.
    Portable,
}

impl KernelSet {
    /// The best set this CPU runs, or the one `QUIRE_KERNELS` names where the CPU runs it
    /// (`avx512`, `avxvnni`, `avx2`, `i8mm`, `dotprod`, `neon`, `portable`).
    pub fn in_use() -> KernelSet {
        static SET: std::sync::OnceLock<KernelSet> = std::sync::OnceLock::new();
        *SET.get_or_init(|| {
            let runnable = KernelSet::runnable();
            let wanted = std::env::var("QUIRE_KERNELS").ok();
            wanted
                .and_then(|w| runnable.iter().copied().find(|set| set.flag() == w.trim().to_lowercase()))
                .unwrap_or(runnable[0])
        })
    }

    /// The sets this CPU runs, best first (`Portable` last, always).
    pub fn runnable() -> Vec<KernelSet> {
        let mut sets = Vec::new();
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx512_vnni = has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
            if avx512_vnni {
                sets.push(KernelSet::Avx512Vnni);
            }
            if avx512_vnni || has!("avxvnni") {
                sets.push(KernelSet::AvxVnni);
            }
            sets.push(KernelSet::Avx2);
        }
        #[cfg(target_arch = "aarch64")]
        {
            use std::arch::is_aarch64_feature_detected as has;
            if has!("dotprod") && has!("i8mm") {
                sets.push(KernelSet::NeonI8mm);
            }
            if has!("dotprod") {
                sets.push(KernelSet::NeonDotprod);
            }
            sets.push(KernelSet::Neon);
        }
        sets.push(KernelSet::Portable);
        sets
    }

    /// Whether the 256-bit VNNI kernels run in the AVX-VNNI encoding (VEX) or, on a CPU with
    /// AVX-512 VNNI but not AVX-VNNI (AMD Zen 4, Intel Ice Lake to Sapphire Rapids' servers),
    /// in the AVX-512 VL one (EVEX): the same operation on the same registers.
    #[cfg(target_arch = "x86_64")]
    pub fn avxvnni_encoding() -> VnniEncoding {
        static ENCODING: std::sync::OnceLock<VnniEncoding> = std::sync::OnceLock::new();
        *ENCODING.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avxvnni") {
                VnniEncoding::Vex
            } else {
                VnniEncoding::Evex
            }
        })
    }

    /// The word `QUIRE_KERNELS` takes for this set.
    pub fn flag(self) -> &'static str {
        match self {
            KernelSet::Avx512Vnni => "avx512",
            KernelSet::AvxVnni => "avxvnni",
            KernelSet::Avx2 => "avx2",
            KernelSet::NeonI8mm => "i8mm",
            KernelSet::NeonDotprod => "dotprod",
            KernelSet::Neon => "neon",
            KernelSet::Portable => "portable",
        }
    }

    /// For benchmark and log lines.
    pub fn name(self) -> &'static str {
        match self {
            KernelSet::Avx512Vnni => "AVX-512 VNNI",
            #[cfg(target_arch = "x86_64")]
            KernelSet::AvxVnni if KernelSet::avxvnni_encoding() == VnniEncoding::Evex => {
                "AVX-VNNI (256-bit, EVEX-encoded)"
            }
            KernelSet::AvxVnni => "AVX-VNNI",
            KernelSet::Avx2 => "AVX2",
            KernelSet::NeonI8mm => "NEON i8mm",
            KernelSet::NeonDotprod => "NEON dotprod",
            KernelSet::Neon => "NEON",
            KernelSet::Portable => "portable",
        }
    }

    /// Whether the process runs this CPU's best set (no `QUIRE_KERNELS` asking for a narrower
    /// one): where it does, f32 kernels may use the widest vectors the CPU has.
    pub fn best() -> bool {
        KernelSet::in_use() == KernelSet::runnable()[0]
    }
}

/// The encoding the 256-bit VNNI kernels run in (`KernelSet::avxvnni_encoding`).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VnniEncoding {
    Vex,
    Evex,
}

/// This thread's floating point from now on treats denormal numbers (below 1.2e-38) as zero,
/// read and written (x86's MXCSR flags DAZ and FTZ): on x86 each operation on a denormal takes
/// ~100 cycles of microcode, which a network's layers can meet by the million. For threads that
/// run only such work (the OCR detector's); nothing is done elsewhere (ARM's cores take
/// denormals at full speed).
pub fn flush_denormals_on_this_thread() {
    #[cfg(target_arch = "x86_64")]
    {
        const DENORMALS_ARE_ZERO: u32 = 1 << 6;
        const FLUSH_TO_ZERO: u32 = 1 << 15;
        let mut csr = 0u32;
        // SAFETY: `stmxcsr` stores the 4-byte control register to `csr`, `ldmxcsr` loads it
        // back with two mode bits set; SSE is part of every x86-64 CPU.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack));
            csr |= DENORMALS_ARE_ZERO | FLUSH_TO_ZERO;
            std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack));
        }
    }
}

/// `row` becomes its softmax: the same bits on every CPU (`plain` is the reference).
pub fn softmax(row: &mut [f32]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        // SAFETY: the build targets AVX2 and FMA.
        unsafe { avx2::softmax(row) }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe { neon::softmax(row) }
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"),
        target_arch = "aarch64"
    )))]
    plain::softmax(row)
}

/// `gate[i] = gate[i] / (1 + e^-gate[i]) * up[i]`: the SiLU of the gate times the up
/// projection (the decoder's feed-forward layers), its exponential `plain::exp_clamped`'s, 8
/// or 4 values per instruction where the CPU has vectors: the same bits on every CPU and OS.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "the gate and up projections are as long");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    let done = {
        // SAFETY: the build targets AVX2 and FMA; the lengths are equal.
        unsafe { avx2::silu_mul(gate, up) }
    };
    #[cfg(target_arch = "aarch64")]
    let done = {
        // SAFETY: NEON is part of every aarch64 CPU; the lengths are equal.
        unsafe { neon::silu_mul(gate, up) }
    };
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"),
        target_arch = "aarch64"
    )))]
    let done = 0;
    plain::silu_mul(&mut gate[done..], &up[done..]);
}

/// The softmax one value at a time, each step the one the AVX2 form takes in each of its 8
/// lanes: the exponential's polynomial with fused multiply-adds, the sum in 8 running sums
/// (value i into sum i mod 8, the tail last) added in `avx2::hsum`'s order. Any CPU gets the
/// vector forms' bits from it.
pub mod plain {
    /// `e^x` as `avx2::exp` computes it (x ≤ 0).
    #[inline]
    pub fn exp(x: f32) -> f32 {
        let x = if x > -87.0 { x } else { -87.0 };
        let n = (x * std::f32::consts::LOG2_E).round_ties_even();
        let r = (-n).mul_add(0.693_359_4, x);
        let r = (-n).mul_add(-2.121_944_4e-4, r);
        let mut y = 1.987_569_1e-4f32;
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
            y = y.mul_add(r, c);
        }
        let y = y.mul_add(r * r, r) + 1.0;
        y * f32::from_bits(((n as i32 + 127) as u32) << 23)
    }

    /// `e^x` for any `x` by `exp`'s polynomial, `x` held below 88 (e^88 stands for anything
    /// larger: where it is added to 1 and divided by, as in the SiLU, that is ∞'s result to
    /// within 1e-36). The same bits on every CPU and OS, where libm's `expf` differs between
    /// glibc and Windows'.
    #[inline]
    pub fn exp_clamped(x: f32) -> f32 {
        exp(x.min(88.0))
    }

    /// `silu_mul` one value at a time.
    pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
        for (g, u) in gate.iter_mut().zip(up) {
            *g = *g / (1.0 + exp_clamped(-*g)) * u;
        }
    }

    /// The sum of 8 lanes in `avx2::hsum`'s order.
    #[inline]
    pub fn hsum(s: [f32; 8]) -> f32 {
        ((s[4] + s[0]) + (s[6] + s[2])) + ((s[5] + s[1]) + (s[7] + s[3]))
    }

    pub fn softmax(row: &mut [f32]) {
        let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let whole = row.len() / 8 * 8;
        let mut sums = [0f32; 8];
        for (i, v) in row.iter_mut().enumerate() {
            *v = exp(*v - max);
            if i < whole {
                sums[i % 8] += *v;
            }
        }
        for (i, v) in row[whole..].iter().enumerate() {
            sums[i] += v;
        }
        let inverse = 1.0 / hsum(sums);
        for v in row.iter_mut() {
            *v *= inverse;
        }
    }
}

/// The AVX2 form on ARM: its 8 lanes as two vectors of 4, every step the same instruction
/// (`vrndnq` rounds half to even as `_MM_FROUND_TO_NEAREST_INT` does; `vfmaq`/`vfmsq` round
/// once as `vfmadd`/`vfnmadd`).
#[cfg(target_arch = "aarch64")]
pub mod neon {
    use std::arch::aarch64::*;

    /// `acc` plus, per lane, the 4 products of that lane's 4 bytes of `a` with bytes
    /// `4·LANE..4·LANE + 4` of `b`: `sdot` by element (inline assembly while Rust's intrinsic
    /// is unstable). The decoder's panels and the embedder's int8 layers use it.
    ///
    /// # Safety
    /// The CPU must have the dot product extension.
    #[inline(always)]
    pub unsafe fn sdot_lane<const LANE: usize>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        macro_rules! sdot {
            ($lane:literal) => {
                std::arch::asm!(
                    concat!("sdot {acc:v}.4s, {a:v}.16b, {b:v}.4b[", $lane, "]"),
                    acc = inout(vreg) acc,
                    a = in(vreg) a,
                    b = in(vreg) b,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
        }
        match LANE {
            0 => sdot!("0"),
            1 => sdot!("1"),
            2 => sdot!("2"),
            _ => sdot!("3"),
        }
        acc
    }

    /// `acc` plus, per lane, the 4 products of that lane's 4 bytes of `a` and of `b`: `sdot`
    /// (inline assembly while Rust's intrinsic is unstable). The decoder's tiles and Q8_0 dot
    /// products use it.
    ///
    /// # Safety
    /// The CPU must have the dot product extension.
    #[inline(always)]
    pub unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        std::arch::asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }

    /// `acc` plus the 2×2 products of `a`'s two rows of 8 bytes (bytes 0..8, 8..16) with
    /// `b`'s two: lanes a0·b0, a0·b1, a1·b0, a1·b1. `smmla` (inline assembly while Rust's
    /// intrinsic is unstable); the decoder's panels use it.
    ///
    /// # Safety
    /// The CPU must have the int8 matrix multiply extension (i8mm).
    #[inline(always)]
    pub unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        std::arch::asm!(
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }

    #[inline(always)]
    unsafe fn exp(x: float32x4_t) -> float32x4_t {
        let x = vmaxq_f32(x, vdupq_n_f32(-87.0));
        let n = vrndnq_f32(vmulq_n_f32(x, std::f32::consts::LOG2_E));
        let r = vfmsq_f32(x, n, vdupq_n_f32(0.693_359_4));
        let r = vfmsq_f32(r, n, vdupq_n_f32(-2.121_944_4e-4));
        let mut y = vdupq_n_f32(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
            y = vfmaq_f32(vdupq_n_f32(c), y, r);
        }
        let y = vaddq_f32(vfmaq_f32(r, y, vmulq_f32(r, r)), vdupq_n_f32(1.0));
        let two_n = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
        vmulq_f32(y, vreinterpretq_f32_s32(two_n))
    }

    /// `silu_mul` for the whole vectors of 4 values; returns how many it did (the caller does
    /// the rest with `plain::silu_mul`).
    ///
    /// # Safety
    /// `up` must be as long as `gate`.
    pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) -> usize {
        let whole = gate.len() / 4 * 4;
        let (g, u) = (gate.as_mut_ptr(), up.as_ptr());
        for c in (0..whole).step_by(4) {
            let x = vld1q_f32(g.add(c));
            // `exp_clamped(-x)`: `f32::min` keeps 88 against a NaN, as `vminnmq` does.
            let e = exp(vminnmq_f32(vnegq_f32(x), vdupq_n_f32(88.0)));
            let silu = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0), e));
            vst1q_f32(g.add(c), vmulq_f32(silu, vld1q_f32(u.add(c))));
        }
        whole
    }

    /// `row` becomes its softmax.
    ///
    /// # Safety
    /// None beyond the slice's (NEON is part of every aarch64 CPU).
    pub unsafe fn softmax(row: &mut [f32]) {
        let n = row.len();
        let whole = n / 8 * 8;
        let p = row.as_mut_ptr();
        let max = vdupq_n_f32(row.iter().cloned().fold(f32::NEG_INFINITY, f32::max));
        let mut sums = [vdupq_n_f32(0.0); 2];
        for c in (0..whole).step_by(8) {
            for (h, sum) in sums.iter_mut().enumerate() {
                let e = exp(vsubq_f32(vld1q_f32(p.add(c + 4 * h)), max));
                vst1q_f32(p.add(c + 4 * h), e);
                *sum = vaddq_f32(*sum, e);
            }
        }
        let mut lanes = [0f32; 8];
        vst1q_f32(lanes.as_mut_ptr(), sums[0]);
        vst1q_f32(lanes.as_mut_ptr().add(4), sums[1]);
        for (i, v) in row[whole..].iter_mut().enumerate() {
            *v = super::plain::exp(*v - vgetq_lane_f32::<0>(max));
            lanes[i] += *v;
        }
        let inverse = 1.0 / super::plain::hsum(lanes);
        for c in (0..whole).step_by(4) {
            vst1q_f32(p.add(c), vmulq_n_f32(vld1q_f32(p.add(c)), inverse));
        }
        for v in &mut row[whole..] {
            *v *= inverse;
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

    /// `silu_mul` for the whole vectors of 8 values; returns how many it did (the caller does
    /// the rest with `plain::silu_mul`).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (the build baseline); `up` must be as long as `gate`.
    pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) -> usize {
        let whole = gate.len() / 8 * 8;
        let (g, u) = (gate.as_mut_ptr(), up.as_ptr());
        for c in (0..whole).step_by(8) {
            let x = _mm256_loadu_ps(g.add(c));
            // `exp_clamped(-x)`: `minps` gives its second operand (88) against a NaN, as
            // `f32::min` does.
            let minus = _mm256_xor_ps(x, _mm256_set1_ps(-0.0));
            let e = exp(_mm256_min_ps(minus, _mm256_set1_ps(88.0)));
            let silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e));
            _mm256_storeu_ps(g.add(c), _mm256_mul_ps(silu, _mm256_loadu_ps(u.add(c))));
        }
        whole
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

    /// The vector form this CPU runs gives the plain form's bits, and those are the bits
    /// recorded on x86-64 (2026-12-03): every CPU's decoder weighs its passages alike.
    #[test]
    fn the_softmax_gives_the_same_bits_on_every_cpu() {
        let mut all = Vec::new();
        for n in [1, 3, 8, 13, 16, 37, 300, 1025] {
            let row: Vec<f32> = (0..n)
                .map(|i| ((i * 7919 % 1009) as f32 - 500.0) / 23.0 - if i % 13 == 0 { 95.0 } else { 0.0 })
                .collect();
            let (mut fast, mut reference) = (row.clone(), row.clone());
            softmax(&mut fast);
            plain::softmax(&mut reference);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&reference), "n {n}");
            all.extend(bits(&fast));
        }
        let digest = all.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        assert_eq!(digest, 4224196377031875016, "the softmax's bits differ from x86-64's");
    }

    /// `plain::exp_clamped` within 2 ulp of e^x over the range the SiLU meets, infinite
    /// nowhere, and its bits the ones recorded on x86-64 (the decoder's feed-forward layers
    /// give the same bits on every OS, where libm's `expf` does not).
    #[test]
    fn the_clamped_exponential_is_close_and_the_same_everywhere() {
        let mut digest = 0xcbf29ce484222325u64;
        for i in 0..20_000 {
            let x = (i as f32 - 10_000.0) / 100.0;
            let got = plain::exp_clamped(x);
            assert!(got.is_finite() && got > 0.0, "e^{x}: {got}");
            let want = (x.clamp(-87.0, 88.0) as f64).exp();
            assert!(((got as f64 - want) / want).abs() < 2.5e-7, "e^{x}: {got} vs {want}");
            digest = (digest ^ got.to_bits() as u64).wrapping_mul(0x100000001b3);
        }
        assert_eq!(digest, 3691093972656521137, "the exponential's bits differ from x86-64's");
    }

    /// `neon::smmla` against its definition (a 2×8 by 8×2 product added to a 2×2 one), where
    /// the CPU has i8mm; and `sdot_lane` against its, where it has dot products.
    #[test]
    #[cfg(target_arch = "aarch64")]
    fn the_arm_integer_products_are_their_definitions() {
        use std::arch::aarch64::*;
        let a: [i8; 16] = std::array::from_fn(|i| (i as i8).wrapping_mul(37).wrapping_sub(100));
        let b: [i8; 16] =
            std::array::from_fn(|i| if i % 5 == 0 { -128 } else { (i as i8).wrapping_mul(91).wrapping_add(7) });
        let acc = [5i32, -7, 1 << 20, -3];
        let dot = |x: &[i8], y: &[i8]| x.iter().zip(y).map(|(&x, &y)| x as i32 * y as i32).sum::<i32>();
        let lanes = |v: int32x4_t| {
            let mut out = [0i32; 4];
            // SAFETY: `out` holds four lanes; NEON is every aarch64 CPU's.
            unsafe { vst1q_s32(out.as_mut_ptr(), v) };
            out
        };
        // SAFETY: each array holds the lanes loaded; NEON is every aarch64 CPU's.
        let (va, vb, vacc) = unsafe { (vld1q_s8(a.as_ptr()), vld1q_s8(b.as_ptr()), vld1q_s32(acc.as_ptr())) };
        // The instructions assemble only in functions built for their extensions.
        #[target_feature(enable = "i8mm")]
        unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
            neon::smmla(acc, a, b)
        }
        #[target_feature(enable = "dotprod")]
        unsafe fn sdot_lane2(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
            neon::sdot_lane::<2>(acc, a, b)
        }
        if std::arch::is_aarch64_feature_detected!("i8mm") {
            let want = [
                acc[0] + dot(&a[..8], &b[..8]),
                acc[1] + dot(&a[..8], &b[8..]),
                acc[2] + dot(&a[8..], &b[..8]),
                acc[3] + dot(&a[8..], &b[8..]),
            ];
            // SAFETY: the CPU has i8mm (checked above).
            assert_eq!(lanes(unsafe { smmla(vacc, va, vb) }), want);
        } else {
            eprintln!("no i8mm on this CPU: smmla is not tested here");
        }
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            let want: [i32; 4] = std::array::from_fn(|l| acc[l] + dot(&a[4 * l..4 * l + 4], &b[8..12]));
            // SAFETY: the CPU has dot products (checked above).
            assert_eq!(lanes(unsafe { sdot_lane2(vacc, va, vb) }), want);
        }
    }

    /// The vector SiLU gives the plain one's bits (tails of every length included), and those
    /// are the bits recorded on x86-64 (2026-12-04).
    #[test]
    fn the_silu_gives_the_same_bits_on_every_cpu() {
        let mut digest = 0xcbf29ce484222325u64;
        for n in [1, 3, 4, 7, 8, 9, 31, 1000] {
            let gate: Vec<f32> = (0..n).map(|i| ((i * 7919 % 2003) as f32 - 1000.0) / 9.0).collect();
            let up: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
            let (mut fast, mut reference) = (gate.clone(), gate.clone());
            silu_mul(&mut fast, &up);
            plain::silu_mul(&mut reference, &up);
            for (i, (&f, &r)) in fast.iter().zip(&reference).enumerate() {
                assert_eq!(f.to_bits(), r.to_bits(), "n {n} i {i}: {f} vs {r}");
                let want = gate[i] as f64 / (1.0 + (-gate[i] as f64).exp()) * up[i] as f64;
                assert!((f as f64 - want).abs() <= 1e-6 * want.abs().max(1e-3), "n {n} i {i}: {f} vs {want}");
                digest = (digest ^ f.to_bits() as u64).wrapping_mul(0x100000001b3);
            }
        }
        assert_eq!(digest, 7869501711864209868, "the SiLU's bits differ from x86-64's");
    }
}
