//! The vector operations the register tiles are written in, once per instruction set.
//!
//! The microkernels ([`microkernel`](super::microkernel), [`unpacked`](super::unpacked)) are
//! generic over [`Simd`]: they load rows of `B`, broadcast elements of `A` and accumulate with
//! fused multiply-adds; the unpacked one loads and stores the columns at the edge of `C` under a
//! mask. Each implementation maps those operations onto one instruction set:
//!
//! | type | vector | instructions | masked |
//! | --- | --- | --- | --- |
//! | [`Avx512`] | `__m512`, 16 lanes | `vmovups zmm`, `vbroadcastss zmm`, `vfmadd231ps zmm` | `vmovups zmm{k}` |
//! | [`Avx2`] | `__m256`, 8 lanes | `vmovups ymm`, `vbroadcastss ymm`, `vfmadd231ps ymm` | `vmaskmovps` |
//! | [`Portable`] | `[f32; 8]` | plain Rust the compiler vectorizes for the baseline target | a loop |
//!
//! Every method is `#[inline(always)]` and has no `#[target_feature]` of its own: it is inlined
//! into a function that does (`#[target_feature(enable = "avx512f")]` on the microkernel entry),
//! and there the intrinsics it calls inline in turn. Calling them anywhere else is the caller's
//! promise, hence `unsafe`: the CPU must have the instruction set ([`Simd::detected`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// A vector of `LANES` f32 values and the operations the microkernel needs.
///
/// # Safety
/// The methods may only run on a CPU for which [`Simd::detected`] returns `true`; the pointer
/// methods need `LANES` readable (writable) `f32`s at the pointer, with no alignment required.
pub trait Simd: Copy {
    /// The register type.
    type V: Copy;
    /// A choice of lanes.
    type Mask: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// Vector registers of the instruction set.
    const REGISTERS: usize;
    /// Whether this CPU can run the instructions (checked once at dispatch).
    fn detected() -> bool;
    /// A vector of zeros.
    unsafe fn zero() -> Self::V;
    /// `x` in every lane.
    unsafe fn splat(x: f32) -> Self::V;
    /// `LANES` consecutive values from `p` (unaligned).
    unsafe fn load(p: *const f32) -> Self::V;
    /// Stores `LANES` values at `p` (unaligned).
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `a * b + c`, rounded once (fused) where the instruction set has FMA.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a * b`.
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a + b`.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// The sum of the lanes, added pairwise in halves (the upper half of the lanes onto the
    /// lower, again, down to one): the same order on every call.
    unsafe fn sum(v: Self::V) -> f32;
    /// The first `lanes` lanes (`1 <= lanes <= LANES`), for the masked loads and stores.
    unsafe fn first(lanes: usize) -> Self::Mask;
    /// The lanes of `mask` from `p`, zeros in the others; only the masked lanes need be
    /// readable (the others are not touched).
    unsafe fn load_masked(p: *const f32, mask: Self::Mask) -> Self::V;
    /// Stores the lanes of `mask` at `p`; nothing else is written (or need be writable).
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self::V);
}

/// AVX-512F: 32 registers of 16 lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Simd for Avx512 {
    type V = __m512;
    type Mask = __mmask16;
    const LANES: usize = 16;
    const REGISTERS: usize = 32;
    fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
    }
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sum(v: __m512) -> f32 {
        // SAFETY: AVX-512F (the caller's), which includes the AVX2 of the halves.
        unsafe {
            let upper = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            let half = _mm256_add_ps(_mm512_castps512_ps256(v), upper);
            Avx2::sum(half)
        }
    }
    #[inline(always)]
    unsafe fn first(lanes: usize) -> __mmask16 {
        ((1u32 << lanes) - 1) as __mmask16
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: __mmask16) -> __m512 {
        // Masked-off lanes are not accessed: no fault, whatever lies there.
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: __mmask16, v: __m512) {
        unsafe { _mm512_mask_storeu_ps(p, mask, v) }
    }
}

/// AVX2 with FMA: 16 registers of 8 lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Simd for Avx2 {
    type V = __m256;
    type Mask = __m256i;
    const LANES: usize = 8;
    const REGISTERS: usize = 16;
    fn detected() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sum(v: __m256) -> f32 {
        unsafe {
            let quarter = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let pair = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
            _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)))
        }
    }
    #[inline(always)]
    unsafe fn first(lanes: usize) -> __m256i {
        // Lane l is selected when its sign bit is set: l < lanes.
        unsafe {
            _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
        }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: __m256i) -> __m256 {
        // Masked-off lanes are not accessed: no fault, whatever lies there.
        unsafe { _mm256_maskload_ps(p, mask) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: __m256i, v: __m256) {
        unsafe { _mm256_maskstore_ps(p, mask, v) }
    }
}

/// No instruction-set assumption: arrays of 8 lanes, multiply then add (two roundings; a fused
/// `mul_add` would be a libm call on targets without FMA). Runs on every CPU.
#[derive(Clone, Copy, Debug)]
pub struct Portable;

impl Simd for Portable {
    type V = [f32; 8];
    type Mask = usize;
    const LANES: usize = 8;
    // Two SSE registers a vector on the baseline target.
    const REGISTERS: usize = 8;
    fn detected() -> bool {
        true
    }
    #[inline(always)]
    unsafe fn zero() -> [f32; 8] {
        [0.0; 8]
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> [f32; 8] {
        [x; 8]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> [f32; 8] {
        unsafe { p.cast::<[f32; 8]>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: [f32; 8]) {
        unsafe { p.cast::<[f32; 8]>().write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn fma(a: [f32; 8], b: [f32; 8], c: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|l| a[l] * b[l] + c[l])
    }
    #[inline(always)]
    unsafe fn mul(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|l| a[l] * b[l])
    }
    #[inline(always)]
    unsafe fn add(a: [f32; 8], b: [f32; 8]) -> [f32; 8] {
        std::array::from_fn(|l| a[l] + b[l])
    }
    #[inline(always)]
    unsafe fn sum(v: [f32; 8]) -> f32 {
        let quarter: [f32; 4] = std::array::from_fn(|l| v[l] + v[l + 4]);
        let pair = [quarter[0] + quarter[2], quarter[1] + quarter[3]];
        pair[0] + pair[1]
    }
    #[inline(always)]
    unsafe fn first(lanes: usize) -> usize {
        lanes
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, lanes: usize) -> [f32; 8] {
        std::array::from_fn(|l| if l < lanes { unsafe { *p.add(l) } } else { 0.0 })
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, lanes: usize, v: [f32; 8]) {
        for (l, &x) in v.iter().enumerate().take(lanes) {
            unsafe { *p.add(l) = x };
        }
    }
}

/// `f32` values in a cache line (64 bytes on x86-64 and on most 64-bit Arm cores): the unit
/// [`prefetch`] fetches and the alignment of the packed buffers.
pub const LINE_FLOATS: usize = 64 / size_of::<f32>();

/// A cache line in bytes: [`LINE_FLOATS`] values.
pub const LINE_BYTES: usize = LINE_FLOATS * size_of::<f32>();

/// Offsets, in values, into a run of `len > 0` consecutive values that fall in every cache line
/// the run touches, wherever it starts: one every [`LINE_FLOATS`] and the last value (a run off
/// a line's start ends in one line more than its length in lines). What a prefetch of the whole
/// run asks for. (One loop over a range, so that the compiler keeps it a plain counted loop
/// wherever it is inlined; the last offset may repeat the one before it.)
pub fn line_offsets(len: usize) -> impl Iterator<Item = usize> {
    (0..len.div_ceil(LINE_FLOATS) + 1).map(move |i| (i * LINE_FLOATS).min(len - 1))
}

/// Asks the cache hierarchy for the line holding `p` (x86 `prefetcht0`; nothing elsewhere). A
/// hint: it never faults, whatever the address.
#[inline(always)]
pub fn prefetch(p: *const f32) {
    prefetch_with::<{ HINT_L1 }>(p);
}

/// Asks for the line holding `p` into the L2 and the caches beyond it (x86 `prefetcht1`;
/// nothing elsewhere). A hint: it never faults, whatever the address.
#[inline(always)]
pub fn prefetch_l2(p: *const f32) {
    prefetch_with::<{ HINT_L2 }>(p);
}

#[cfg(target_arch = "x86_64")]
const HINT_L1: i32 = _MM_HINT_T0;
#[cfg(target_arch = "x86_64")]
const HINT_L2: i32 = _MM_HINT_T1;
#[cfg(not(target_arch = "x86_64"))]
const HINT_L1: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const HINT_L2: i32 = 0;

/// `_mm_prefetch` with `HINT` on x86-64; nothing elsewhere.
#[inline(always)]
fn prefetch_with<const HINT: i32>(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the prefetch instructions are part of the x86-64 baseline (SSE) and do not access
    // memory.
    unsafe {
        _mm_prefetch::<HINT>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sum` adds the lanes in the order its contract gives (upper half onto lower, down to
    /// one), bit for bit, on every instruction set this CPU has; `add` adds lane by lane.
    #[test]
    fn sums_add_the_halves_in_order() {
        fn check<S: Simd>() {
            if !S::detected() {
                return;
            }
            // Values whose sum depends on the order: large and small magnitudes mixed.
            let x: Vec<f32> =
                (0..S::LANES).map(|l| if l % 3 == 0 { 1e8 } else { 1.0 + l as f32 * 0.37 }).collect();
            let mut want = x.clone();
            while want.len() > 1 {
                let half = want.len() / 2;
                want = (0..half).map(|l| want[l] + want[l + half]).collect();
            }
            let mut doubled = vec![0.0f32; S::LANES];
            // SAFETY: the instruction set was detected; `x` and `doubled` hold LANES values.
            unsafe {
                let v = S::load(x.as_ptr());
                assert_eq!(S::sum(v).to_bits(), want[0].to_bits(), "{} lanes", S::LANES);
                S::store(doubled.as_mut_ptr(), S::add(v, v));
            }
            assert!(doubled.iter().zip(&x).all(|(d, x)| *d == x + x));
        }
        check::<Portable>();
        #[cfg(target_arch = "x86_64")]
        {
            check::<Avx2>();
            check::<Avx512>();
        }
    }

    #[test]
    fn line_offsets_touch_every_line_of_a_run_wherever_it_starts() {
        for len in [1, 2, 15, 16, 17, 32, 33, 100] {
            let offsets: Vec<usize> = line_offsets(len).collect();
            assert!(offsets.iter().all(|&o| o < len), "{len}: {offsets:?}");
            for start in 0..LINE_FLOATS {
                let lines = |o: usize| (start + o) / LINE_FLOATS;
                let touched: std::collections::BTreeSet<usize> = offsets.iter().map(|&o| lines(o)).collect();
                let spanned: std::collections::BTreeSet<usize> = (0..len).map(lines).collect();
                assert_eq!(touched, spanned, "{len} values from {start}");
            }
        }
    }
}
