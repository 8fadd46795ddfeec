//! The outer-product register microkernel (seed 002, "Kernel 3: Outer Product"), and its
//! instances for AVX-512, AVX2 and the portable fallback.
//!
//! One call computes an `MR x NR` tile of `C` from a packed `A` panel (`kc` columns of `MR`
//! values: element `(r, p)` at `a[p * MR + r]`) and a packed `B` panel (`kc` rows of `NR`
//! values: element `(p, j)` at `b[p * NR + j]`). The tile lives in `MR * NR / LANES` vector
//! registers for the whole `kc` loop; each step loads `NR / LANES` vectors of `B`, broadcasts
//! `MR` scalars of `A` and issues `MR * NR / LANES` independent FMAs: the rank-1 update
//! `C += A[:, p] * B[p, :]`. Nothing but the packed panels is touched until the end, when the tile
//! is written to `C` once: `C = alpha * tile + beta * C`, and `C` is not read when `beta == 0`.
//!
//! Each step prefetches the row of `B` that [`B_LEAD`] steps later will load, so that the
//! panel streaming from L2 or L3 is in L1 when the FMAs want it. Between the steps the kernel
//! also prefetches a list of addresses it is given (`warm`), one every
//! `kc / len` steps (at most one a step), and never reads them: the loops pass the source lines of
//! the next `A` panel, so that packing it reads L1 or L2 instead of waiting on L3 with nothing to
//! overlap ([`packed`](super::packed)). The list is plain addresses, so the kernel still knows
//! nothing of the caller's layout. Its own tile of `C` it prefetches [`C_LEAD`] steps before the
//! end, late enough that the panel of `B` streaming through L1 has not pushed the lines out again
//! by the stores.
//!
//! The register count bounds the shape; the shapes of the products decide within it. AVX-512 has 32
//! registers of 16 lanes: `8 x 32` keeps 16 accumulators, 2 vectors of `B` and a broadcast (19
//! registers), 16 FMAs per 2 vector loads and 8 broadcasts, and its 8-row panels pad nothing when
//! `m` is a multiple of 8 (every power of two, and 1000). The `12 x 32` tile that fills the
//! register file (24 accumulators, the same 2 loads and one broadcast per 2 FMAs) reaches the FMA
//! peak too, but computes 512 rows as 516 and 1024 as 1032, and measured no faster over whole
//! products; of the other shapes timed, none was ahead of `8 x 32` (the figures are in
//! `docs/performance-notes.md`). AVX2 has 16 registers of 8 lanes: the seed's `6 x 16` keeps 12
//! accumulators, 2 of `B` and a broadcast (15). The portable kernel is `4 x 8` in two 4-lane
//! halves, which fits the 16 SSE registers of the x86-64 baseline.
//!
//! The `kc` loop runs in stretches between two prefetches of `warm` (the whole loop when there are
//! none), so a step checks nothing. Each kernel's stretches are unrolled as its entry says: the
//! AVX2 kernel's by 4, since its step of 12 FMAs of 8 lanes leaves the loop's count, compare and
//! branch a larger share of the instructions than the AVX-512 step of 16 FMAs of 16 lanes does
//! (the measurements are in `docs/performance-notes.md`).
//!
//! Edges need no code of their own: panels are zero-padded to `MR` rows and `NR` columns by the
//! packing, and the caller points a partial tile at a scratch tile instead of `C`
//! ([`packed`](super::packed)). Two things are spared them, so that zeros are not multiplied:
//! a last panel of `B` at most half full goes through the same kernel instantiated half as
//! wide ([`Microkernel::narrow`]), and a last panel of `A` with `h < MR` rows of `C` through
//! the kernel instantiated `h` rows tall ([`Microkernel::short`]), which reads the same panel.
//! (What each measured is in `docs/performance-notes.md`.)

// A microkernel takes its operands as plain arguments, in registers, as BLIS's do: eight of them.
#![allow(clippy::too_many_arguments)]

use super::pack::{PackA, PackB, pack_a, pack_b};
#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{LINE_FLOATS, Portable, Simd, prefetch};

/// How many `kc` steps before the end of its loop the microkernel prefetches its tile of `C`.
///
/// Asked for before the loop, the tile's lines were pushed out of the L1 again by the 64 KB
/// panel of `B` streaming through it, and the stores at the end missed. Asked for `C_LEAD` steps
/// (about 1,200 cycles) before the end, they are still in L1 at the stores. The loop is split
/// in two runs of steps with the prefetch between them, so that no step tests for it (the AVX2
/// kernel's 15 live registers leave none spare for the test).
const C_LEAD: usize = 48;

/// How many `kc` steps ahead the microkernel prefetches the rows of its `B` panel into L1: far
/// enough that a row coming from L2 arrives before its step, near enough that the lines in
/// flight fit the L1's fill buffers (the choice is measured in `docs/performance-notes.md`).
const B_LEAD: usize = 16;

/// The largest `MR * NR` of any microkernel: the size of the scratch tile for edges.
pub const MAX_TILE: usize = 8 * 32;

/// A microkernel entry: `(kc, a_panel, b_panel, alpha, beta, c, ldc, warm)`.
///
/// `warm` lists addresses to prefetch, spread evenly over the `kc` loop (at most `kc` of them
/// are): hints, never read, so they may point anywhere.
///
/// # Safety
/// The CPU has the kernel's instruction set; `a_panel` holds `kc * MR` and `b_panel` `kc * NR`
/// readable values; `c` points at `MR` rows of `NR` writable values (`NR / 2` for
/// [`narrow`](Microkernel::narrow)), `ldc` apart.
pub type MicrokernelFn = unsafe fn(usize, *const f32, *const f32, f32, f32, *mut f32, usize, &[*const f32]);

/// One microkernel, the packing for its panel shape and the cache blocking tuned for it.
#[derive(Clone, Copy, Debug)]
pub struct Microkernel {
    /// Rows of the register tile (the `A` panel height).
    pub mr: usize,
    /// Columns of the register tile (the `B` panel width).
    pub nr: usize,
    /// Largest depth of a packed block where `B` streams from L3 ([`cache`](super::cache)
    /// chooses): an `MR x kc` panel of `A` stays in L1 or L2 while the `B` panels stream past it.
    pub kc: usize,
    /// Target columns of a packed `B` block (`kc x nc`) where `B` streams from L3: the blocks
    /// of one product are of equal width around it.
    pub nc: usize,
    /// Whether the loops prefetch the lines of `C` some tiles ahead of the one being computed
    /// when the sums are short ([`packed`](super::packed)'s `SHORT_SUM`; how far, and on which
    /// CPUs: [`cache`](super::cache)'s `c_ahead_tiles`).
    pub prefetch_c: bool,
    /// The kernel.
    pub run: MicrokernelFn,
    /// The same kernel on the first `NR / 2` columns of each `B` panel (an `MR x NR/2` tile),
    /// for the last panel of a block when at most half of it is columns of `B`: the zero columns
    /// of its other half are not multiplied. `None` for a kernel one vector wide.
    pub narrow: Option<MicrokernelFn>,
    /// `short[h - 1]`: the same kernel on the first `h < MR` rows of each `A` panel (an
    /// `h x NR` tile; `c` points at `h` rows), for the last panel of `A` when `C`'s rows end
    /// inside it: the panel's zero rows are not multiplied.
    pub short: &'static [MicrokernelFn],
    /// Whether this CPU has the instruction set.
    pub detected: fn() -> bool,
    /// [`pack_a`] for `MR`.
    pub pack_a: PackA,
    /// [`pack_b`] for `NR`.
    pub pack_b: PackB,
}

impl Microkernel {
    /// The `MR x NR` kernel `run`, its `narrow` half and its `short` heights, with the packing
    /// for that shape, its blocking `(kc, nc)` and whether it prefetches `C` ahead for short sums.
    const fn new<const MR: usize, const NR: usize>(
        (kc, nc): (usize, usize),
        prefetch_c: bool,
        run: MicrokernelFn,
        narrow: Option<MicrokernelFn>,
        short: &'static [MicrokernelFn],
        detected: fn() -> bool,
    ) -> Self {
        assert!(short.len() + 1 == MR, "a short kernel for every height below MR");
        let (pack_a, pack_b) = (pack_a::<MR>, pack_b::<NR>);
        Microkernel { mr: MR, nr: NR, kc, nc, prefetch_c, run, narrow, short, detected, pack_a, pack_b }
    }
}

/// The register-tile outer product, generic over the instruction set: `MR` rows by `NV` vectors,
/// from a packed `A` panel of `A_COL` values a column (`MR`, or more for a short tile) and a
/// packed `B` panel of `B_ROW` values a row (`NV * S::LANES`, or more for a narrow tile), its
/// `kc` loop unrolled `UNROLL` times (`UNROLL >= 1`).
///
/// # Safety
/// As [`MicrokernelFn`], with `MR` rows of `C`, panels of `A_COL` and `B_ROW`, and a tile
/// `NV * S::LANES` wide.
#[inline(always)]
unsafe fn outer_product<
    S: Simd,
    const MR: usize,
    const A_COL: usize,
    const NV: usize,
    const B_ROW: usize,
    const UNROLL: usize,
>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    alpha: f32,
    beta: f32,
    c: *mut f32,
    ldc: usize,
    warm: &[*const f32],
) {
    let nr = NV * S::LANES;
    unsafe {
        let mut acc = [[S::zero(); NV]; MR];
        // One prefetch every `kc / warm.len()` steps (at most one a step): the lines arrive while
        // the FMAs run. Between two of them the steps run uninterrupted, `UNROLL` at a time.
        let every = (kc / warm.len().max(1)).max(1);
        let (mut warm, mut next_warm) = (warm.iter(), 0);
        // The tile of C is touched once, at the end: its lines are asked for between the two
        // runs of steps, `C_LEAD` steps before the end, so they arrive under the FMAs.
        let lead = kc.saturating_sub(C_LEAD);
        for (run, steps) in [0..lead, lead..kc].into_iter().enumerate() {
            if run == 1 {
                for r in 0..MR {
                    let row = c.wrapping_add(r * ldc);
                    prefetch(row);
                    prefetch(row.wrapping_add(nr - 1));
                }
            }
            // A stretch starts at the run's start or where a prefetch is due, and ends where the
            // next one is due or at the run's end.
            let mut p = steps.start;
            while p < steps.end {
                if p == next_warm {
                    match warm.next() {
                        Some(&line) => {
                            prefetch(line);
                            next_warm += every;
                        }
                        // No lines left: the rest of the loop is one stretch.
                        None => next_warm = kc,
                    }
                }
                let end = steps.end.min(next_warm);
                let groups = (end - p) / UNROLL;
                for g in 0..groups {
                    for u in 0..UNROLL {
                        step::<S, MR, A_COL, NV, B_ROW>(&mut acc, a, b, p + g * UNROLL + u);
                    }
                }
                for q in p + groups * UNROLL..end {
                    step::<S, MR, A_COL, NV, B_ROW>(&mut acc, a, b, q);
                }
                p = end;
            }
        }
        update_c::<S, MR, NV, false>(&acc, alpha, beta, c, ldc, [S::first(S::LANES); NV]);
    }
}

/// Step `p` of [`outer_product`]: the rank-1 update by column `p` of the packed `A` panel and
/// row `p` of the packed `B` panel, after a prefetch of the row [`B_LEAD`] steps on.
///
/// # Safety
/// As [`outer_product`], with `p < kc`.
#[inline(always)]
unsafe fn step<S: Simd, const MR: usize, const A_COL: usize, const NV: usize, const B_ROW: usize>(
    acc: &mut [[S::V; NV]; MR],
    a: *const f32,
    b: *const f32,
    p: usize,
) {
    unsafe {
        let b_row = b.add(p * B_ROW);
        // The row of `B` wanted `B_LEAD` steps on, one prefetch per cache line it reads: past
        // the panel's end these are the next panel's first rows.
        for line in (0..NV * S::LANES).step_by(LINE_FLOATS) {
            prefetch(b_row.wrapping_add(B_LEAD * B_ROW + line));
        }
        let a_col = a.add(p * A_COL);
        let bv: [S::V; NV] = std::array::from_fn(|v| S::load(b_row.add(v * S::LANES)));
        rank_one_update::<S, MR, NV>(acc, &bv, |r| *a_col.add(r));
    }
}

/// One step of the outer product: `acc[r][v] += a(r) * b[v]`, one fused multiply-add each.
///
/// # Safety
/// The CPU has `S`'s instruction set; `a` may be called for `r < MR`.
#[inline(always)]
pub(super) unsafe fn rank_one_update<S: Simd, const MR: usize, const NV: usize>(
    acc: &mut [[S::V; NV]; MR],
    b: &[S::V; NV],
    a: impl Fn(usize) -> f32,
) {
    unsafe {
        for (r, acc_row) in acc.iter_mut().enumerate() {
            let ar = S::splat(a(r));
            for (acc_rv, &bv) in acc_row.iter_mut().zip(b) {
                *acc_rv = S::fma(ar, bv, *acc_rv);
            }
        }
    }
}

/// The end of a tile: `C = alpha * acc + beta * C` on its `MR` rows, `ldc` apart from `c`, with
/// `C` not read when `beta == 0`; with `EDGE`, only the lanes of `masks` (one per vector) are
/// read and written.
///
/// # Safety
/// The CPU has `S`'s instruction set; the tile's rows (the masked lanes with `EDGE`) are
/// writable, and readable when `beta != 0`.
#[inline(always)]
pub(super) unsafe fn update_c<S: Simd, const MR: usize, const NV: usize, const EDGE: bool>(
    acc: &[[S::V; NV]; MR],
    alpha: f32,
    beta: f32,
    c: *mut f32,
    ldc: usize,
    masks: [S::Mask; NV],
) {
    unsafe {
        let alpha = S::splat(alpha);
        for (r, acc_row) in acc.iter().enumerate() {
            for (v, &acc_rv) in acc_row.iter().enumerate() {
                let cp = c.add(r * ldc + v * S::LANES);
                let scaled = S::mul(alpha, acc_rv);
                let out = match (beta == 0.0, EDGE) {
                    (true, _) => scaled,
                    (false, false) => S::fma(S::splat(beta), S::load(cp), scaled),
                    (false, true) => S::fma(S::splat(beta), S::load_masked(cp, masks[v]), scaled),
                };
                if EDGE { S::store_masked(cp, masks[v], out) } else { S::store(cp, out) }
            }
        }
    }
}

/// Defines `$name::<H>`, a [`MicrokernelFn`] for each `H`: [`outer_product`] for `$simd` at the
/// first `H` rows of `A` panels `$mr` tall by `$nv` vectors of `B` panels `$nr` wide, its `kc`
/// loop unrolled `$u` times, compiled under `$attr` (the instruction set's `target_feature`,
/// which the inlined body inherits). `$name::<$mr>` is the full kernel; smaller `H` are its
/// short kernels.
macro_rules! entry {
    ($(#[$attr:meta])* $name:ident: $simd:ty, $mr:literal x $nv:literal of $nr:literal, unrolled $u:literal) => {
        $(#[$attr])*
        unsafe fn $name<const H: usize>(
            kc: usize,
            a: *const f32,
            b: *const f32,
            alpha: f32,
            beta: f32,
            c: *mut f32,
            ldc: usize,
            warm: &[*const f32],
        ) {
            unsafe { outer_product::<$simd, H, $mr, $nv, $nr, $u>(kc, a, b, alpha, beta, c, ldc, warm) }
        }
    };
}

entry!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx512f")] avx512_8x32: Avx512, 8 x 2 of 32, unrolled 1);
entry!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx512f")] avx512_8x16: Avx512, 8 x 1 of 32, unrolled 1);
entry!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx2,fma")] avx2_6x16: Avx2, 6 x 2 of 16, unrolled 4);
entry!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx2,fma")] avx2_6x8: Avx2, 6 x 1 of 16, unrolled 4);
entry!(portable_4x8: Portable, 4 x 1 of 8, unrolled 1);

/// AVX-512F, `8 x 32`, with blocks of `kc = 1024` ([`packed`](super::packed) says why); `C`
/// prefetched ahead for short sums.
#[cfg(target_arch = "x86_64")]
pub const AVX512: Microkernel = Microkernel::new::<8, 32>(
    (1024, 2048),
    true,
    avx512_8x32::<8>,
    Some(avx512_8x16::<8>),
    AVX512_SHORT,
    Avx512::detected,
);
#[cfg(target_arch = "x86_64")]
const AVX512_SHORT: &[MicrokernelFn] = &[
    avx512_8x32::<1>,
    avx512_8x32::<2>,
    avx512_8x32::<3>,
    avx512_8x32::<4>,
    avx512_8x32::<5>,
    avx512_8x32::<6>,
    avx512_8x32::<7>,
];

/// AVX2 + FMA, `6 x 16` (seed 002's shape), with blocks of `kc = 1024` like the AVX-512 kernel;
/// `C` not prefetched ahead.
#[cfg(target_arch = "x86_64")]
pub const AVX2: Microkernel = Microkernel::new::<6, 16>(
    (1024, 2048),
    false,
    avx2_6x16::<6>,
    Some(avx2_6x8::<6>),
    AVX2_SHORT,
    Avx2::detected,
);
#[cfg(target_arch = "x86_64")]
const AVX2_SHORT: &[MicrokernelFn] =
    &[avx2_6x16::<1>, avx2_6x16::<2>, avx2_6x16::<3>, avx2_6x16::<4>, avx2_6x16::<5>];

/// Any CPU, `4 x 8`.
pub const PORTABLE: Microkernel =
    Microkernel::new::<4, 8>((256, 2048), false, portable_4x8::<4>, None, PORTABLE_SHORT, Portable::detected);
const PORTABLE_SHORT: &[MicrokernelFn] = &[portable_4x8::<1>, portable_4x8::<2>, portable_4x8::<3>];

// Every tile fits the scratch tile that edges are computed into.
#[cfg(target_arch = "x86_64")]
const _: () = assert!(AVX512.mr * AVX512.nr <= MAX_TILE && AVX2.mr * AVX2.nr <= MAX_TILE);
const _: () = assert!(PORTABLE.mr * PORTABLE.nr <= MAX_TILE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_short_kernel_gives_the_full_kernels_rows_and_writes_no_others() {
        let mut kernels = vec![PORTABLE];
        #[cfg(target_arch = "x86_64")]
        kernels.extend([AVX2, AVX512]);
        let kc = 37;
        for uk in kernels.into_iter().filter(|uk| (uk.detected)()) {
            let (mr, nr) = (uk.mr, uk.nr);
            // Packed panels of small integers: every sum is exact, so both kernels agree bit
            // for bit whatever their order.
            let a: Vec<f32> = (0..kc * mr).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..kc * nr).map(|i| (i % 5) as f32 - 2.0).collect();
            let ldc = nr + 3;
            let mut full = vec![0.0f32; mr * ldc];
            // SAFETY: the panels hold kc * MR and kc * NR values, the tile MR rows of ldc; the
            // CPU has the instruction set (detected).
            unsafe { (uk.run)(kc, a.as_ptr(), b.as_ptr(), 1.0, 0.0, full.as_mut_ptr(), ldc, &[]) };
            for (h, short) in uk.short.iter().enumerate().map(|(i, f)| (i + 1, f)) {
                let mut tile = vec![f32::NAN; mr * ldc];
                // SAFETY: as above, on h rows.
                unsafe { short(kc, a.as_ptr(), b.as_ptr(), 1.0, 0.0, tile.as_mut_ptr(), ldc, &[]) };
                for r in 0..mr {
                    for j in 0..ldc {
                        let (got, want) = (tile[r * ldc + j], full[r * ldc + j]);
                        if r < h && j < nr {
                            assert_eq!(got, want, "{mr}x{nr} kernel at height {h}: ({r}, {j})");
                        } else {
                            assert!(got.is_nan(), "{mr}x{nr} kernel at height {h} wrote ({r}, {j})");
                        }
                    }
                }
            }
        }
    }
}
