//! Small products without packing: the register tile reads `A` and `B` where they lie.
//!
//! Packing ([`pack`](super::pack)) pays for itself through reuse: each packed panel of `B` is
//! read by every panel of `A`, contiguously and from a cache close to the core. A small
//! product has little reuse to pay with, and what a packed call costs besides its arithmetic
//! (copying both operands, setting up the team of threads, its scratch buffers) is most of the
//! call. Here the outer-product tile of the [`microkernel`](super::microkernel) reads the
//! caller's matrices instead:
//!
//! - each step broadcasts `MR` values of a column of `A` from wherever the view keeps them (any
//!   layout and leading dimension: two strides), and loads `NV` vectors of a row of `B`, which
//!   must therefore be contiguous along its rows. A column-major `B` is first copied row-major
//!   into a scratch buffer of this thread (`k x n` values, at most half the L2: [`fits`]), its
//!   rows starting on cache lines; so is a row-major `B` whose rows do not, on CPUs where the
//!   loads that straddle two lines cost more over the rows of tiles than the copy
//!   ([`b_copy_ld`]).
//! - a tile cut by the right edge of `C` loads only the columns of `B` that exist and stores
//!   only the columns of `C` that exist, under a mask ([`Simd::load_masked`]); a tile cut by
//!   the bottom edge is the same tile with fewer rows (one instance per height), so nothing
//!   outside the operands is read and nothing outside `C`'s block is written, and no scratch
//!   tile is needed.
//! - while a row of tiles is computed, its first tile asks for the rows of `A` of the next row
//!   of tiles ([`warms_next_rows`]): rows too short for the hardware's prefetchers to follow
//!   would otherwise be waited for line by line when `A` is not in cache (each member of a
//!   batch).
//! - while a tile is computed, it asks for the lines of `C` of the tile after it (to its right,
//!   or the first of the row of tiles below): a tile writes its block of `C` all at its end, and
//!   where `C` is not in cache each of those stores would otherwise wait for its line to be read
//!   for ownership (and read for `beta`).
//! - after each stretch of steps, a tile asks for a few lines of the product this thread
//!   computes next, where a batch said which ([`upcoming`]): the next member's operands are in
//!   L2 when its first tiles start.
//!
//! Each element of `C` is the same computation as in the packed kernel when `k` fits one block
//! (`k <= kc`): one sum over `p` in order, fused multiply-adds from zero, then
//! `alpha * sum + beta * c`, with `C` not read when `beta == 0`. Small products ([`fits`]) run
//! on the calling thread whatever the thread count, so the result does not depend on it.
//! Larger ones are computed here only when they run on one thread anyway and their sum is the
//! packed path's ([`fits_one_thread`]): the same bits either way.
//!
//! Products of a few rows of tiles over a large `B` ([`fits_striped`], [`striped`]): packing
//! such a `B` buys little reuse (each packed panel would meet at most [`STRIPED_ROWS_OF_TILES`]
//! panels of `A`), and it costs more than the copy's reads, since the packed block's lines,
//! written once, are evicted dirty from L1 while `B` streams in. Here each sum's rows of `B` are
//! read where they lie, a stripe of rows across all of `C`'s columns, once for each row of tiles
//! (the later ones from L2 or L3), and each step asks into L2 for its rows' lines a few tiles to
//! the right ([`b_ahead_values`]): the stripe's rows are as many streams, more than the
//! hardware's prefetchers follow.
//!
//! Narrow products ([`fits_narrow`]): a `C` of at most a few register tiles' width, however
//! tall, over a `B` whose rows for one packed sum stay in L2. Packing there costs what
//! little reuse there is: each packed panel of `A` serves only the few tiles across `C`, so the
//! copy of `A` is a large share of the product (measured in `docs/performance-notes.md`). Their
//! rows of `C` are dealt to the threads in blocks of whole tiles ([`by_rows`]); each element is
//! the same computation on any thread count.

use std::cell::RefCell;

use super::microkernel::{Microkernel, rank_one_update, update_c};
use super::scratch::{Scratch, with_scratch};
#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{LINE_BYTES, LINE_FLOATS, Portable, Simd, line_offsets, prefetch, prefetch_l2};
use super::upcoming::{self, Cursor};
use super::{cache, packed, workers};
use crate::matrix::{Layout, MatMut, MatRef};

/// An unpacked kernel: `C = alpha * A * B + beta * C` on the calling thread, under the contract
/// of [`CpuKernelFn`](super::CpuKernelFn), for a product that [`fits`]. Each step asks for the
/// lines of its row of `B` the last argument's number of values to the right (none when 0: a
/// hint, whatever it points at).
///
/// # Safety
/// The CPU has the kernel's instruction set.
pub type UnpackedFn = unsafe fn(f32, &MatRef, &MatRef, f32, &mut MatMut, usize);

/// The most flops (`2 m n k`) of a product computed unpacked: about where packing starts to pay
/// for itself on one thread (`docs/performance-notes.md`).
const MAX_FLOPS: usize = 8_000_000;

// A product that fits would not get a second thread from sleeping workers either.
const _: () = assert!(MAX_FLOPS < 2 * packed::FLOPS_PER_THREAD);

/// The most values of a column-major `B` copied row-major for a product computed unpacked: the
/// share of this core's L2 the packed path's blocking gives `B` ([`cache::b_share`],
/// [`cache::l2_bytes_or_default`]), so that the copy, which this thread keeps for its next call,
/// stays in L2 beside `A` and `C`. A larger `B` is packed instead.
fn max_b_copy() -> usize {
    cache::b_share(cache::l2_bytes_or_default())
}

/// Whether an `m x n x k` product whose `B` is in layout `b` is computed unpacked; such a
/// product runs on one thread whatever the thread count.
pub fn fits(m: usize, n: usize, k: usize, b: Layout) -> bool {
    let small = 2usize.saturating_mul(m).saturating_mul(n).saturating_mul(k) <= MAX_FLOPS;
    small && (b == Layout::RowMajor || k.saturating_mul(n) <= max_b_copy())
}

/// The distance in bytes at which addresses fall in the same set of an x86 core's L1 data
/// cache: it is indexed within a 4 KB page (32 KB of 8 ways, 48 KB of 12).
const L1_SET_STRIDE: usize = 4096;

/// Whether an `m x n x k` product (`b`: its `B`) that runs on one thread anyway (a member of a
/// batch beside the others, or a call on one thread) is computed unpacked past [`MAX_FLOPS`]:
/// - its sum over `k` is one of the packed path's (`uk`'s depth for the shape), so each element
///   is the packed path's computation, bit for bit;
/// - `B` (or the row-major copy of a column-major one), which every row of tiles reads, and `A`,
///   whose rows each row of tiles reads across all of `C`, stay within this core's share of L2;
/// - the rows of `B` the tile reads are not a multiple of [`L1_SET_STRIDE`] apart: the `k`
///   steps of a tile would then all load lines of one L1 set, which holds only a few.
///
/// Packing then buys no reuse that the unpacked tile does not get from the caches.
pub fn fits_one_thread(uk: &Microkernel, m: usize, n: usize, k: usize, b: &MatRef) -> bool {
    let b_rows_apart = rows_of_b_apart(b, m / uk.mr) * size_of::<f32>();
    packed::sum_depth(uk, m, k) >= k
        && k.saturating_mul(n) <= max_b_copy()
        && m.saturating_mul(k) <= max_b_copy()
        && !b_rows_apart.is_multiple_of(L1_SET_STRIDE)
}

/// The widest `C`, in register tiles, that [`fits_narrow`] takes: each packed panel of `A`
/// would serve at most this many tiles.
const NARROW_TILES: usize = 4;

/// The largest `C`, in register tiles (`(rows, columns)`), that [`fits_narrow`] takes when `k`
/// is deeper than one of the packed path's sums: past it the packed panels, each read once for
/// every tile across `C` and every sum, are worth their copy (the measurements are in
/// `docs/performance-notes.md`).
const DEEP_NARROW_TILES: (usize, usize) = (8, 2);

/// The most rows of register tiles of `C` that [`fits_striped`] takes where the packed path
/// streams its block of `B` from L3 too: each row of tiles reads the stripes of `B` again, from
/// L2 or L3, so past a few rows of tiles the packed copy pays (where:
/// `docs/performance-notes.md`).
const STRIPED_ROWS_OF_TILES: usize = 4;

/// The most rows of register tiles of `C` that [`fits_striped`] takes for `uk` on this CPU:
/// [`STRIPED_ROWS_OF_TILES`], or one where the packed path keeps its block of `B` in L2
/// ([`cache::keeps_b_in_l2`]), which each row of tiles then reads from L2 while every row of
/// stripes would read `B` from L3 again.
fn striped_rows_of_tiles(uk: &Microkernel) -> usize {
    if cache::keeps_b_in_l2(uk) { 1 } else { STRIPED_ROWS_OF_TILES }
}

/// Whether an `m x n x k` product on one thread is computed unpacked by [`striped`]: `C` at
/// most [`striped_rows_of_tiles`] rows of `uk`'s tiles tall, `B` row-major and larger than this
/// core's share of L2 (a smaller one stays in cache, packed or not), its rows not a multiple of
/// [`L1_SET_STRIDE`] apart. Rows that are would put the lines a stripe asks for ahead in a few
/// sets of the L2 (its index within a page is the same for every row), where they evict each
/// other before they are read.
pub fn fits_striped(uk: &Microkernel, m: usize, n: usize, k: usize, b: &MatRef) -> bool {
    m <= striped_rows_of_tiles(uk) * uk.mr
        && b.layout == Layout::RowMajor
        && k.saturating_mul(n) > max_b_copy()
        && !(b.ld * size_of::<f32>()).is_multiple_of(L1_SET_STRIDE)
}

/// The values of `B` to the right of a step's row at which [`striped`] asks for lines, for sums
/// of `depth` rows and tiles `nr` wide: [`cache::ahead_bytes`] spread over the rows of a sum, in
/// whole tiles, at least one, so that the lines asked for and not yet read stay within it.
fn b_ahead_values(depth: usize, nr: usize) -> usize {
    let values = cache::ahead_bytes() / size_of::<f32>() / depth.max(1);
    (values / nr).max(1) * nr
}

/// `C = alpha * A * B + beta * C` by `small` for a product that [`fits_striped`], on the calling
/// thread: one sum per packed depth ([`in_sums`], so each element is the packed path's
/// computation, bit for bit), each step asking for `B` [`b_ahead_values`] ahead along its row.
///
/// # Safety
/// The CPU has `small`'s instruction set; `C` is row-major (the contract of
/// [`CpuKernelFn`](super::CpuKernelFn)).
pub unsafe fn striped(
    small: UnpackedFn,
    uk: &Microkernel,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) {
    let depth = packed::sum_depth(uk, c.rows, a.cols);
    // SAFETY: the caller's contract.
    unsafe { in_sums(small, depth, b_ahead_values(depth, uk.nr), alpha, a, b, beta, c) };
}

/// Whether an `m x n x k` product is computed unpacked with its rows dealt to the threads
/// ([`by_rows`]): `C` at most [`NARROW_TILES`] of `uk`'s tiles wide (within
/// [`DEEP_NARROW_TILES`] when `k` takes more than one of the packed path's sums), and the rows
/// of `B` of one sum within this core's share of L2 (every row of tiles reads them).
/// [`in_sums`] adds the sums as the packed path does, so each element is its computation, bit
/// for bit.
pub fn fits_narrow(uk: &Microkernel, m: usize, n: usize, k: usize) -> bool {
    let depth = packed::sum_depth(uk, m, k);
    let (rows, cols) = DEEP_NARROW_TILES;
    let shape_fits =
        if depth >= k { n <= NARROW_TILES * uk.nr } else { m <= rows * uk.mr && n <= cols * uk.nr };
    shape_fits && depth.saturating_mul(n) <= max_b_copy()
}

/// How many blocks of rows [`by_rows`] cuts for each thread: a few, so that a worker that wakes
/// late ([`workers`]) still finds a share of the product.
const BLOCKS_PER_THREAD: usize = 4;

/// `C = alpha * A * B + beta * C` by `small` ([`UnpackedFn`], `uk`'s tile), the rows of `C`
/// dealt to as many of `threads` as the work pays for ([`packed::worth_waking`]), in blocks of
/// whole tiles of `uk.mr` rows; each thread copies a column-major `B` for itself.
///
/// # Safety
/// The CPU has `small`'s instruction set; `C` is row-major (the contract of
/// [`CpuKernelFn`](super::CpuKernelFn)).
#[allow(clippy::too_many_arguments)]
pub unsafe fn by_rows(
    small: UnpackedFn,
    uk: &Microkernel,
    threads: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> crate::Result<()> {
    let (m, n, k) = (c.rows, c.cols, a.cols);
    let threads = packed::worth_waking(threads, m, n, k);
    let depth = packed::sum_depth(uk, m, k);
    if threads == 1 {
        // SAFETY: the caller's contract.
        unsafe { in_sums(small, depth, 0, alpha, a, b, beta, c) };
        return Ok(());
    }
    let rows = m.div_ceil(threads * BLOCKS_PER_THREAD).next_multiple_of(uk.mr);
    let (a_row, _) = a.strides();
    let (ldc, layout) = (c.ld, c.layout);
    // Each block's rows of C, disjoint: rows r0..r0 + rows start at r0 * ldc.
    let blocks: Vec<(usize, &mut [f32])> = c
        .data
        .chunks_mut(rows * ldc)
        .take(m.div_ceil(rows))
        .enumerate()
        .map(|(i, d)| (i * rows, d))
        .collect();
    workers::for_each(threads, blocks, |(r0, data)| {
        let height = rows.min(m - r0);
        let a = MatRef { data: &a.data[r0 * a_row..], rows: height, ..*a };
        let mut c = MatMut { data, rows: height, cols: n, ld: ldc, layout };
        // SAFETY: the caller's contract; rows r0.. of A and C, a row-major block.
        unsafe { in_sums(small, depth, 0, alpha, &a, b, beta, &mut c) };
        Ok(())
    })
}

/// `C = alpha * A * B + beta * C` by `small`, one sum per `depth` of `k` in order, as the packed
/// path adds them: the first with `beta`, each later one with `1`. Each sum's rows of `B` are
/// read by every row of tiles of `C` while they are in cache; `b_ahead` goes to `small`.
///
/// # Safety
/// As [`UnpackedFn`].
#[allow(clippy::too_many_arguments)]
unsafe fn in_sums(
    small: UnpackedFn,
    depth: usize,
    b_ahead: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) {
    let k = a.cols;
    let ((_, a_col), (b_row, _)) = (a.strides(), b.strides());
    // At least one sum: `beta` is applied even to an empty product.
    for first in (0..k.max(1)).step_by(depth) {
        let len = depth.min(k - first);
        let a = MatRef { data: &a.data[first * a_col..], cols: len, ..*a };
        let b = MatRef { data: &b.data[first * b_row..], rows: len, ..*b };
        let beta = if first == 0 { beta } else { 1.0 };
        // SAFETY: the caller's contract, for columns first.. of A and rows first.. of B.
        unsafe { small(alpha, &a, &b, beta, c, b_ahead) };
    }
}

/// Whether the unpacked kernels with tiles of `mr` rows prefetch into L2, while a row of tiles
/// is computed, the rows of `A` of the row of tiles below it: when `A` is row-major
/// (`a_col == 1`) and its rows are at most [`cache::warm_row_values`] long.
///
/// A row of tiles broadcasts `mr` rows of `A` side by side, a line of each every
/// [`LINE_FLOATS`] steps. Where `A` is not in a cache (each member of a batch, a first call),
/// each of those lines is a miss, and short rows end before the hardware's stream prefetchers
/// have followed them, so the tile would wait on memory for each line of each row. A
/// column-major `A` is read one line a step along a constant stride, which the hardware follows.
fn warms_next_rows(mr: usize, a_col: usize, k: usize) -> bool {
    a_col == 1 && k <= cache::warm_row_values(mr)
}

/// Where a tile reads its operands and writes its result.
#[derive(Clone, Copy)]
struct Operands {
    k: usize,
    /// `A[i, 0]` for the tile's first row `i`, and the distances between rows and columns.
    a: *const f32,
    a_row: usize,
    a_col: usize,
    /// `B[0, j]` for the tile's first column `j`, and the distance between rows.
    b: *const f32,
    ldb: usize,
    /// `C[i, j]`, and the distance between rows.
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
    /// The values to the right of each step's row of `B` whose lines it asks for, where the
    /// tile is instantiated to (`AHEAD`).
    b_ahead: usize,
}

/// The most steps of a sum, per row of the tile, at which a full-width tile asks for all its
/// lines at once after its steps ([`tile`]'s `ONCE`) instead of after each of `R` stretches:
/// stretches of one to four steps cost more in the requests and the loop around them than
/// spreading the requests saves (measured: `docs/performance-notes.md`).
const ONE_STRETCH_STEPS_PER_ROW: usize = 4;

/// One `R x (NV * LANES)` tile of `C`; with `EDGE`, only its first `cols` columns exist (at
/// least `(NV - 1) * LANES + 1` of them). With `next_a`, the first `R` rows of a row-major `A`
/// from there (`k` values each) are prefetched into L2 while the tile is computed: the row of
/// tiles below it, which [`warms_next_rows`] says to ask for. The lines of `R` rows of `NV`
/// vectors from `next_c` (`ldc` apart) are prefetched into L1 as it goes, a row after each of
/// `R` stretches of steps, or with `ONCE` all after the steps: the next tile's block of `C` (a
/// hint: any address will do). With `AHEAD`, each step
/// asks into L2 for the line at the start of each of its `NV` vectors of `B`, `o.b_ahead`
/// values to the right: over the tiles of a row, every line of the row's run.
/// After each stretch, `ahead` asks for its next lines (the next product's operands).
///
/// # Safety
/// The CPU has `S`'s instruction set; the `R` rows of `A` and the `cols` columns of `B` and `C`
/// from the pointers of `o` lie inside their views (`k` columns of `A`, `k` rows of `B`, `R`
/// rows of `C`).
#[inline(always)]
unsafe fn tile<
    S: Simd,
    const R: usize,
    const NV: usize,
    const EDGE: bool,
    const AHEAD: bool,
    const ONCE: bool,
>(
    o: Operands,
    cols: usize,
    next_a: Option<*const f32>,
    next_c: *const f32,
    ahead: &mut Cursor,
) {
    unsafe {
        let masks: [S::Mask; NV] =
            std::array::from_fn(|v| S::first(cols.saturating_sub(v * S::LANES).clamp(1, S::LANES)));
        let load = |p: *const f32, v: usize| if EDGE { S::load_masked(p, masks[v]) } else { S::load(p) };
        let mut acc = [[S::zero(); NV]; R];
        // The rows of A in groups of three, each step's values addressed from its group's first
        // row: an x86 address adds a register scaled by 1, 2, 4 or 8 bytes, so with the row
        // distance in a register the three rows of a group need no arithmetic of their own.
        const { assert!(R <= 9, "three groups of three rows") };
        let groups: [*const f32; 3] = std::array::from_fn(|g| o.a.wrapping_add(3 * g * o.a_row));
        // The steps in `stretches`; after each, the lines of its rows of the next block of `C`
        // and of `next_a`, so that the requests spread over the tile and no step tests for them.
        let stretches = if ONCE { 1 } else { R };
        let mut p = 0;
        for s in 0..stretches {
            let end = o.k * (s + 1) / stretches;
            while p < end {
                let b_row = o.b.add(p * o.ldb);
                let bv: [S::V; NV] = std::array::from_fn(|v| load(b_row.add(v * S::LANES), v));
                if AHEAD {
                    for v in 0..NV {
                        prefetch_l2(b_row.wrapping_add(o.b_ahead + v * S::LANES));
                    }
                }
                let step = p * o.a_col;
                rank_one_update::<S, R, NV>(&mut acc, &bv, |r| *groups[r / 3].add(step + r % 3 * o.a_row));
                p += 1;
            }
            for r in s * R / stretches..(s + 1) * R / stretches {
                let row = next_c.wrapping_add(r * o.ldc);
                for line in line_offsets(NV * S::LANES) {
                    prefetch(row.wrapping_add(line));
                }
                if let Some(next) = next_a {
                    let row = next.wrapping_add(r * o.a_row);
                    for line in line_offsets(o.k) {
                        prefetch_l2(row.wrapping_add(line));
                    }
                }
            }
            ahead.ask();
        }
        update_c::<S, R, NV, EDGE>(&acc, o.alpha, o.beta, o.c, o.ldc, masks);
    }
}

/// The tiles of `R` rows of `C` from `o`'s pointers on, left to right, `n` columns; the first
/// one prefetches `next_a`, each the block of `C` of the next (the last the first block of the
/// `R` rows below), and each asks `ahead` for lines (see [`tile`]). Tiles are `NV` vectors
/// wide; where `NW = NV + 1`, a last tile of at most one vector after a whole one is joined to
/// it as one tile of `NW` vectors: each step of a tile broadcasts its `R` values of `A` once for all its vectors, so a
/// tile of one vector would broadcast as often as it multiplies.
///
/// # Safety
/// As [`tile`], for all `n` columns.
#[inline(always)]
unsafe fn row_of_tiles<S: Simd, const R: usize, const NV: usize, const NW: usize, const AHEAD: bool>(
    o: Operands,
    n: usize,
    next_a: Option<*const f32>,
    ahead: &mut Cursor,
) {
    const { assert!(NW == NV || NW == NV + 1, "a joined tile is one vector wider") };
    let nr = NV * S::LANES;
    let last = n % nr;
    let joined = NW > NV && n > nr && last != 0 && last <= S::LANES;
    let below_c = o.c.wrapping_add(R * o.ldc);
    let mut j = 0;
    while j < n {
        // The last two tiles are one where they are joined: the only tile wider than `nr`.
        let cols = if joined && n - j < 2 * nr { n - j } else { nr.min(n - j) };
        let o = Operands { b: o.b.wrapping_add(j), c: o.c.wrapping_add(j), ..o };
        let next = if j == 0 { next_a } else { None };
        let next_c = if j + cols < n { o.c.wrapping_add(cols) } else { below_c } as *const f32;
        unsafe {
            if cols == nr && o.k <= ONE_STRETCH_STEPS_PER_ROW * R {
                tile::<S, R, NV, false, AHEAD, true>(o, cols, next, next_c, ahead);
            } else if cols == nr {
                tile::<S, R, NV, false, AHEAD, false>(o, cols, next, next_c, ahead);
            } else if cols <= S::LANES {
                tile::<S, R, 1, true, AHEAD, false>(o, cols, next, next_c, ahead);
            } else if cols < nr {
                tile::<S, R, NV, true, AHEAD, false>(o, cols, next, next_c, ahead);
            } else if cols == NW * S::LANES {
                tile::<S, R, NW, false, AHEAD, false>(o, cols, next, next_c, ahead);
            } else {
                tile::<S, R, NW, true, AHEAD, false>(o, cols, next, next_c, ahead);
            }
        }
        j += cols;
    }
}

thread_local! {
    /// `B` copied row-major, its rows on cache lines.
    static B_ROWS: Scratch = const { RefCell::new(Vec::new()) };
}

/// The rows of the row-major copy of `B` that the unpacked kernels read for a product with
/// `rows_of_tiles` full rows of register tiles, `Some(ld)` (their distance in values: the rows
/// start on cache lines), or `None` when they read `B` where it lies. A column-major `B` is
/// always copied. A row-major one whose rows do not all start on cache lines is copied where
/// this CPU repays the copy over that many rows of tiles
/// ([`cache::realign_b_rows_of_tiles`]), when the copy fits [`max_b_copy`].
fn b_copy_ld(b: &MatRef, rows_of_tiles: usize) -> Option<usize> {
    b_copy_ld_from(b, rows_of_tiles, cache::realign_b_rows_of_tiles())
}

/// [`b_copy_ld`] on a CPU that realigns `B` from `realign` rows of tiles (`None`: never).
fn b_copy_ld_from(b: &MatRef, rows_of_tiles: usize, realign: Option<usize>) -> Option<usize> {
    let copied = match b.layout {
        Layout::ColMajor => true,
        Layout::RowMajor => {
            let on_lines =
                (b.data.as_ptr() as usize).is_multiple_of(LINE_BYTES) && b.ld.is_multiple_of(LINE_FLOATS);
            !on_lines
                && realign.is_some_and(|rows| rows_of_tiles >= rows)
                && b.rows.saturating_mul(b.cols) <= max_b_copy()
        }
    };
    copied.then(|| b.cols.next_multiple_of(LINE_FLOATS))
}

/// Runs `f` on `B` as `(first value, distance between rows)`, its rows contiguous: the view
/// itself, or its row-major copy in this thread's scratch ([`b_copy_ld`]; `rows_of_tiles`: the
/// full rows of register tiles of `C`).
fn with_rows_of_b<R>(b: &MatRef, rows_of_tiles: usize, f: impl FnOnce(*const f32, usize) -> R) -> R {
    match b_copy_ld(b, rows_of_tiles) {
        None => f(b.data.as_ptr(), b.ld),
        Some(ld) => with_scratch(&B_ROWS, b.rows * ld, |rows| {
            b.copy_row_major(rows, ld);
            f(rows.as_ptr(), ld)
        }),
    }
}

/// The distance, in values, between the rows of `B` that [`with_rows_of_b`] gives for
/// `rows_of_tiles` full rows of register tiles of `C`.
fn rows_of_b_apart(b: &MatRef, rows_of_tiles: usize) -> usize {
    b_copy_ld(b, rows_of_tiles).unwrap_or(b.ld)
}

/// Defines `$name`, an [`UnpackedFn`]: tiles of `$mr` rows (and of each height below, for the
/// last rows) by `$nv` vectors of `$simd`, a last one-vector tile joined to the one before as
/// `$nw` vectors ([`row_of_tiles`]; `$nw = $nv`: never), compiled under `$attr` (the instruction
/// set's `target_feature`, which the inlined tiles inherit).
macro_rules! unpacked {
    ($(#[$attr:meta])* $name:ident: $simd:ty, $mr:literal x $nv:literal, joined $nw:literal, shorter $($r:literal)*) => {
        $(#[$attr])*
        unsafe fn $name(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut, b_ahead: usize) {
            let (m, n, k) = (c.rows, c.cols, a.cols);
            let (a_row, a_col) = a.strides();
            let ldc = c.ld;
            let (a_data, c_data) = (a.data.as_ptr(), c.data.as_mut_ptr());
            let warm = warms_next_rows($mr, a_col, k);
            let mut ahead = Cursor::new(upcoming::take_next());
            with_rows_of_b(b, m / $mr, |b, ldb| {
                for i in (0..m).step_by($mr) {
                    let next_a = (warm && i + $mr < m).then(|| a_data.wrapping_add((i + $mr) * a_row));
                    let o = Operands {
                        k,
                        a: a_data.wrapping_add(i * a_row),
                        a_row,
                        a_col,
                        b,
                        ldb,
                        c: c_data.wrapping_add(i * ldc),
                        ldc,
                        alpha,
                        beta,
                        b_ahead,
                    };
                    // SAFETY: the operands were checked against their slices and C is
                    // row-major (the contract of CpuKernelFn): rows i.. of A and C and the n
                    // columns of B's k rows lie inside them; the caller detected the CPU.
                    unsafe {
                        // The steps ask for `B` ahead only where told to (`striped`).
                        match (m - i, b_ahead != 0) {
                            $(($r, false) => row_of_tiles::<$simd, $r, $nv, $nw, false>(o, n, next_a, &mut ahead),
                            ($r, true) => row_of_tiles::<$simd, $r, $nv, $nw, true>(o, n, next_a, &mut ahead),)*
                            (_, false) => row_of_tiles::<$simd, $mr, $nv, $nw, false>(o, n, next_a, &mut ahead),
                            (_, true) => row_of_tiles::<$simd, $mr, $nv, $nw, true>(o, n, next_a, &mut ahead),
                        }
                    }
                }
            })
        }
    };
}

unpacked!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx512f")] avx512_8x32: Avx512, 8 x 2, joined 3, shorter 1 2 3 4 5 6 7);
unpacked!(#[cfg(target_arch = "x86_64")] #[target_feature(enable = "avx2,fma")] avx2_6x16: Avx2, 6 x 2, joined 2, shorter 1 2 3 4 5);
unpacked!(portable_4x8: Portable, 4 x 1, joined 1, shorter 1 2 3);

/// The unpacked kernel beside the AVX-512 microkernel: the same `8 x 32` tile.
#[cfg(target_arch = "x86_64")]
pub const AVX512: UnpackedFn = avx512_8x32;
/// The unpacked kernel beside the AVX2 microkernel: the same `6 x 16` tile.
#[cfg(target_arch = "x86_64")]
pub const AVX2: UnpackedFn = avx2_6x16;
/// The unpacked kernel beside the portable microkernel: the same `4 x 8` tile.
pub const PORTABLE: UnpackedFn = portable_4x8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::TestOperands;
    use crate::cpu::microkernel;

    /// Each instruction set this CPU has: its unpacked kernel beside its packed microkernel.
    fn kernels() -> Vec<(UnpackedFn, Microkernel)> {
        let mut kernels = vec![(PORTABLE, microkernel::PORTABLE)];
        #[cfg(target_arch = "x86_64")]
        kernels.extend([(AVX2, microkernel::AVX2), (AVX512, microkernel::AVX512)]);
        kernels.retain(|(_, uk)| (uk.detected)());
        kernels
    }

    #[test]
    fn narrow_products_by_rows_give_the_packed_kernels_bits_on_any_thread_count() {
        let layouts = [Layout::RowMajor, Layout::ColMajor];
        for (small, uk) in kernels() {
            // Tall and narrow, heights that are not a multiple of the tile's, widths across
            // one to four tiles; the first two large enough for several threads.
            // The last two deeper than one packed sum.
            let shapes = [
                (4001, 3 * uk.nr + 5, 41),
                (8197, uk.nr, 64),
                (2 * uk.mr + 1, 2 * uk.nr, 9),
                (8 * uk.mr - 3, uk.nr + 3, 8001),
                (3 * uk.mr, 2 * uk.nr, 12000),
            ];
            for (m, n, k) in shapes {
                let threads_used = packed::worth_waking(7, m, n, k);
                assert!(fits_narrow(&uk, m, n, k), "{m}x{n}x{k}");
                if k > 1000 {
                    assert!(packed::sum_depth(&uk, m, k) < k, "{m}x{n}x{k} in one sum");
                }
                for (la, lb, beta) in [(0, 0, 0.0), (1, 1, 0.5), (0, 1, 0.3)] {
                    let operands = TestOperands::new((m, n, k), (layouts[la], layouts[lb]), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), operands.c0.clone(), operands.ldc);
                    let mut packed = c0.clone();
                    packed::gemm(&uk, 1, 1.5, &a, &b, beta, &mut MatMut::new(&mut packed, m, n, ldc))
                        .unwrap();
                    for threads in [1, 2, 3, 7].into_iter().filter(|&t| t == 1 || threads_used > 1) {
                        let mut out = c0.clone();
                        let mut c = MatMut::new(&mut out, m, n, ldc);
                        // SAFETY: `uk` was detected, and `small` shares its instruction set; C
                        // is row-major.
                        unsafe { by_rows(small, &uk, threads, 1.5, &a, &b, beta, &mut c) }.unwrap();
                        let case = format!(
                            "{m}x{n}x{k} {:?} {:?} beta {beta}, {threads} threads",
                            layouts[la], layouts[lb]
                        );
                        for (idx, (&u, &p)) in out.iter().zip(&packed).enumerate() {
                            assert_eq!(u.to_bits(), p.to_bits(), "{case}: element {idx}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn striped_products_give_the_packed_kernels_bits_and_write_only_c() {
        for (small, uk) in kernels() {
            // One row of tiles or a few, full or not, over a B past any L2's share (about 1.2
            // M values), several sums deep, last tiles cut by the edge.
            let rows = striped_rows_of_tiles(&uk) * uk.mr;
            let shapes = [
                (uk.mr, 1201, 1003),
                (uk.mr - 1, 517, 2400),
                (1, 3 * uk.nr + 1, 9001),
                ((uk.mr + 1).min(rows), 1201, 1003),
                (rows, 517, 2400),
            ];
            for (m, n, k) in shapes {
                for (beta, alpha) in [(0.0, 1.5), (0.5, -1.0), (1.0, 0.75)] {
                    let operands = TestOperands::new((m, n, k), (Layout::RowMajor, Layout::RowMajor), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), operands.c0.clone(), operands.ldc);
                    assert!(fits_striped(&uk, m, n, k, &b), "{m}x{n}x{k}");
                    assert!(packed::sum_depth(&uk, m, k) < k, "{m}x{n}x{k} in one sum");
                    let (mut out, mut packed) = (c0.clone(), c0.clone());
                    // SAFETY: `uk` was detected, and `small` shares its instruction set; C is
                    // row-major.
                    unsafe {
                        striped(small, &uk, alpha, &a, &b, beta, &mut MatMut::new(&mut out, m, n, ldc))
                    };
                    packed::gemm(&uk, 1, alpha, &a, &b, beta, &mut MatMut::new(&mut packed, m, n, ldc))
                        .unwrap();
                    for (idx, (&u, &p)) in out.iter().zip(&packed).enumerate() {
                        let (i, j) = (idx / ldc, idx % ldc);
                        let case = format!("{m}x{n}x{k} beta {beta}: C[{i}, {j}]");
                        if i < m && j < n {
                            assert_eq!(u.to_bits(), p.to_bits(), "{case}");
                        } else {
                            assert_eq!(u.to_bits(), c0[idx].to_bits(), "{case}: wrote outside C");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn stripes_take_a_few_rows_of_tiles_over_a_large_row_major_b_off_the_set_stride() {
        let uk = &microkernel::PORTABLE;
        let data = vec![0.0f32; 1 << 22];
        let (n, k) = (1000, max_b_copy() / 1000 + 1);
        let b = MatRef::new(&data, k, n, n);
        let rows = striped_rows_of_tiles(uk) * uk.mr;
        assert!(fits_striped(uk, rows, n, k, &b));
        assert!(fits_striped(uk, 1, n, k, &b));
        // One row of tiles too many; B within the L2 share; column-major; rows 4 KB apart.
        assert!(!fits_striped(uk, rows + 1, n, k, &b));
        assert!(!fits_striped(uk, uk.mr, n, k - 1, &MatRef::new(&data, k - 1, n, n)));
        assert!(!fits_striped(uk, uk.mr, n, k, &MatRef::col_major(&data, k, n, k)));
        assert!(!fits_striped(uk, uk.mr, n, k, &MatRef::new(&data, k, n, 1024)));
        // Whole tiles ahead, at least one, fewer for deeper sums.
        for depth in [1, 256, 1 << 20] {
            let values = b_ahead_values(depth, uk.nr);
            assert!(values >= uk.nr && values.is_multiple_of(uk.nr));
        }
        assert!(b_ahead_values(64, uk.nr) >= b_ahead_values(256, uk.nr));
    }

    #[test]
    fn products_on_one_thread_are_unpacked_within_one_sum_and_the_l2_off_the_set_stride() {
        let uk = &microkernel::PORTABLE;
        let data = vec![0.0f32; 1 << 20];
        let b = |layout, rows, cols, ld| match layout {
            Layout::RowMajor => MatRef::new(&data, rows, cols, ld),
            Layout::ColMajor => MatRef::col_major(&data, rows, cols, ld),
        };
        let (rows_fit, k) = (max_b_copy() / 256, packed::sum_depth(uk, 256, 256).min(256));
        // Within one sum, both operands within this CPU's L2 share, rows of B at most 300
        // floats apart.
        let (m, n) = (256.min(max_b_copy() / k), 300.min(max_b_copy() / k));
        assert!(fits_one_thread(uk, m, n, k, &b(Layout::RowMajor, k, n, n)));
        assert!(fits_one_thread(uk, m, n, k, &b(Layout::ColMajor, k, n, k)));
        // Rows of B a multiple of 4 KB apart: as the view lies, or as the copy lays them.
        assert!(!fits_one_thread(uk, 256, 300, k, &b(Layout::RowMajor, k, 300, 1024)));
        assert!(!fits_one_thread(uk, 256, 1024, k, &b(Layout::ColMajor, k, 1024, k)));
        // A or B past the share.
        assert!(!fits_one_thread(uk, 256, rows_fit * 2, 256, &b(Layout::RowMajor, 256, 2, 2)));
        assert!(!fits_one_thread(uk, rows_fit * 2, 300, 256, &b(Layout::RowMajor, 256, 300, 300)));
        // More than one sum.
        let deep = packed::sum_depth(uk, 256, 1 << 20) + 1;
        assert!(!fits_one_thread(uk, 8, 8, deep, &b(Layout::RowMajor, deep, 8, 9)));
    }

    #[test]
    fn b_is_copied_onto_cache_lines_where_its_rows_are_off_them_and_the_cpu_pays_for_that() {
        let values: Vec<f32> = (0..40 * 64).map(|x| x as f32).collect();
        let offset = values.as_ptr().align_offset(LINE_BYTES);
        let on_lines = MatRef::new(&values[offset..], 20, 40, 48);
        let off_lines = MatRef::new(&values[offset + 1..], 20, 40, 48);
        let odd_ld = MatRef::new(&values[offset..], 20, 40, 41);
        let realign = Some(16);
        assert_eq!(b_copy_ld_from(&on_lines, 16, realign), None);
        assert_eq!(b_copy_ld_from(&off_lines, 16, realign), Some(48));
        assert_eq!(b_copy_ld_from(&odd_ld, 16, realign), Some(48));
        // Too few rows of tiles to repay the copy, or a CPU whose split loads cost less than it.
        assert_eq!(b_copy_ld_from(&off_lines, 15, realign), None);
        assert_eq!(b_copy_ld_from(&off_lines, 125, None), None);
        // A column-major B is copied on any CPU, its rows on lines too.
        assert_eq!(b_copy_ld_from(&odd_ld.t(), 1, None), Some(32));

        // The copy holds B's values at the rows it says, whatever the source's layout.
        for b in [off_lines, odd_ld, odd_ld.t()] {
            let ld = b.cols.next_multiple_of(LINE_FLOATS);
            let mut copy = vec![f32::NAN; b.rows * ld];
            b.copy_row_major(&mut copy, ld);
            let expected = b.to_row_major();
            for i in 0..b.rows {
                assert_eq!(copy[i * ld..][..b.cols], expected[i * b.cols..][..b.cols]);
            }
        }
    }

    #[test]
    fn only_short_rows_of_a_row_major_a_are_prefetched() {
        let longest = cache::warm_row_values(8);
        assert!(warms_next_rows(8, 1, 1));
        assert!(warms_next_rows(8, 1, longest));
        assert!(!warms_next_rows(8, 1, longest + 1));
        assert!(!warms_next_rows(8, 64, 64));
    }

    #[test]
    fn unpacked_tiles_give_the_packed_kernels_bits_and_write_only_c() {
        let layouts = [Layout::RowMajor, Layout::ColMajor];
        for (small, uk) in kernels() {
            // Every height below a tile's and every width across one and two vectors, with
            // and without a full tile beside them, and last tiles joined to the one before
            // (whole or cut by the edge, after another tile or not); k within one packed block.
            let shapes = [
                (1, 1, 1),
                (7, 5, 3),
                (9, 17, 8),
                (13, 33, 31),
                (17, 40, 64),
                (3, 70, 5),
                (9, 48, 16),
                (5, 80, 7),
            ];
            for (m, n, k) in shapes {
                for (la, lb, beta) in [(0, 0, 0.0), (1, 0, 0.5), (0, 1, 1.0), (1, 1, -2.0), (0, 0, 0.3)] {
                    // C row-major inside a larger buffer; NaN where beta == 0 must not read.
                    let operands = TestOperands::new((m, n, k), (layouts[la], layouts[lb]), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), operands.c0.clone(), operands.ldc);
                    let (mut unpacked, mut packed) = (c0.clone(), c0.clone());
                    let mut c = MatMut::new(&mut unpacked, m, n, ldc);
                    // SAFETY: `uk` was detected, and `small` shares its instruction set.
                    unsafe { small(1.5, &a, &b, beta, &mut c, 0) };
                    packed::gemm(&uk, 1, 1.5, &a, &b, beta, &mut MatMut::new(&mut packed, m, n, ldc))
                        .unwrap();
                    let case = format!("{}x{}x{} {:?} {:?} beta {beta}", m, n, k, layouts[la], layouts[lb]);
                    for (idx, (&u, &p)) in unpacked.iter().zip(&packed).enumerate() {
                        let (i, j) = (idx / ldc, idx % ldc);
                        if i < m && j < n {
                            assert_eq!(u.to_bits(), p.to_bits(), "{case}: C[{i}, {j}]");
                        } else {
                            assert_eq!(u.to_bits(), c0[idx].to_bits(), "{case}: wrote outside C at {idx}");
                        }
                    }
                }
            }
        }
    }
}
