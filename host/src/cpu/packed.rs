//! CPU step 4, the packed register-blocked GEMM (the BLIS design), multithreaded.
//!
//! Four loops around the [`microkernel`](super::microkernel), each sized for one level of the
//! memory hierarchy (BLIS's five, with its `ic` and `ir` loops in one, below):
//!
//! ```text
//! for jc in 0..n step nc            B block of depth x nc ([`cache`] sizes it)
//!   for pc in 0..k step depth       depth = kc, or a few kc when C is narrower than nc
//!     pack B[pc.., jc..] into NR-column panels        (threads split the panels)
//!     for ir in 0..m step MR        in parallel: each task owns MR rows of C
//!       pack A[ir.., pc..] into one MR x depth panel  (reused from L1/L2 ...
//!       for sum in pc.. step kc     one sum of kc steps per tile of C
//!         for jr in panels of B                         ... while the panels of B stream past)
//!           microkernel: C[ir.., jr..] = alpha * A_panel B_panel + beta' * C
//!                        (the last 2 tiles also prefetch the source of A[ir+MR.., pc..])
//! ```
//!
//! The inner loops run A-panel-outer: an `8 x kc` panel of A (16 KB at `kc = 512`) is read once per
//! tile, the `kc x 32` panels of B arrive in address order (the hardware prefetcher follows them),
//! and the tiles of C are visited along a row, again in address order. (The other order, a B
//! panel kept in L1 while A panels pass, cannot keep it there: a `256 x 32` panel of B alone fills
//! a 32 KB L1.) Larger `kc` means fewer passes over C (`k / kc` reads and writes of each tile, and
//! as many tile epilogues), up to where the block of B no longer stays in its cache
//! ([`cache`] chooses the block). A block of B far larger than the L2 streams from
//! L3 at every A panel, which the microkernel's 128 bytes of B per 16 cycles allow, and which
//! repacks A less often than a block that fits the L2.
//!
//! Packing the next panel of `A` would wait on L3 with nothing to overlap: the source was pushed
//! out of L2 by the `B` stream. So the microkernels of a row's last [`WARM_TILES`] tiles prefetch
//! its lines between their FMAs ([`pack::source_lines`]); earlier tiles do not, as every tile
//! streams a 64 KB panel of `B` through the L1. A block of A small enough to stay in L2
//! ([`COLD_A_BLOCK`]) is not prefetched at all.
//!
//! `beta' = beta` on the first `kc` block and `1` after it, so `C` is read at most once per
//! block and never when `beta == 0`. A tile cut by the edge of `C` is computed in a scratch
//! tile holding a copy of its part of `C` (when `beta != 0`), by the same kernel with the same
//! update, and only that part is copied back, so nothing outside `C`'s block is written and an
//! edge is rounded as a whole tile is; a tile at most half as wide as a panel is computed by
//! the microkernel's [`narrow`](Microkernel::narrow) half, and the tiles of the last panel of
//! `A`, where `C`'s rows end inside it, by the kernel of its height
//! ([`short`](Microkernel::short)), straight into `C` when they are full width.
//!
//! The threads go through the whole product as one team ([`Team`]): the calling thread and the
//! pool's workers, each joining where the team is when it wakes ([`workers`]). For each block
//! the members present pack the runs of `B` panels not yet taken, wait until every run is
//! packed, take panels of `A` until none is left, and wait until every panel is done before `B`
//! is packed over; the waits are for work already taken, never for a member still asleep. A
//! task is one panel of A, the BLIS `ic` and `ir` loops in one: the panel stays in L1 or L2 and
//! B in L3 whatever the height of a task, so the height only decides how evenly the threads
//! share a block (a few hundred tasks leave at most one panel's work to one thread at the end).
//! Each thread starts on its own contiguous share of the panels, so the next panel, whose
//! source its microkernels prefetch, is usually its own next task.
//!
//! A product of few rows has too few panels of A for its threads (`8 x 4096 x 4096` has one),
//! and packing each block of B for them alone, between two waits, costs as much as using it.
//! With fewer than [`TASKS_PER_THREAD`] panels a thread, or [`FEW_PANELS`] in a `C` at least
//! twice as wide as tall, and a strip for every thread, the threads share strips of C's columns
//! instead: a task packs its strip of B and all of A block by block and computes its strip
//! whole, with no wait, so one thread's packing runs beside another's FMAs. Either way each
//! tile is the same sequence of microkernel calls, so the bits do not change.
//!
//! A column-major `A` (a transposed one on row-major storage) is packed from `kc` columns,
//! `MR` values of each: short pieces far apart, which only the many panels of `B` each panel
//! meets pay for. With a narrow `C` they do not, and the product is computed transposed instead
//! ([`through_transpose`]): `C^T = B^T A^T`, in which `A^T` is the right operand, row-major,
//! and packed as a `B` is, from runs of its rows.
//!
//! The waits spin, then yield, and never sleep ([`workers::wait_for`]): a worker put to sleep between the
//! two phases of a block has to be woken for the next one. (Measurements of this, and of every
//! alternative named in these docs: `docs/performance-notes.md`.)

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

use super::microkernel::{MAX_TILE, Microkernel};
use super::scratch::{Scratch, with_scratch};
use super::simd::{line_offsets, prefetch};
use super::{cache, pack, workers};
use crate::Result;
use crate::matrix::{Layout, MatMut, MatRef};

/// `C = alpha * A * B + beta * C` with `uk` on `threads` threads (contract of
/// [`CpuKernelFn`](super::CpuKernelFn); `uk` must be [`detected`](Microkernel::detected)).
pub fn gemm(
    uk: &Microkernel,
    threads: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> Result<()> {
    if a.layout == Layout::ColMajor
        && c.cols <= TRANSPOSED_MAX_COLS
        && c.cols < c.rows
        && a.cols >= TRANSPOSED_DEPTH_PER_COL * c.cols
    {
        return through_transpose(uk, threads, alpha, a, b, beta, c);
    }
    let threads = worth_waking(threads, c.rows, c.cols, a.cols);
    let nc_target = cache::block_shape(uk, c.rows, c.cols).1;
    let nc = balanced_nc(c.cols, nc_target, uk.nr);
    let kc = sum_depth(uk, c.rows, a.cols);
    let depth = kc * sums_per_block(threads, nc_target, nc);
    // Each thread packs one run of consecutive panels of every B block.
    let group = (nc / uk.nr).div_ceil(threads);
    let a_panels = c.rows.div_ceil(uk.mr);
    let run_len = group * pack::b_panel_stride(depth, uk.nr);
    let strips = strip_width(threads, (c.rows, c.cols), (a_panels, uk.nr), group);
    // Strips are dealt once for the whole product; blocks have a phase each.
    let strip_tasks = Tasks::new(threads);
    let phases = match strips {
        Some(strip) => {
            strip_tasks.deal(c.cols.div_ceil(uk.nr).div_ceil(strip));
            Vec::new()
        }
        None => {
            let blocks = c.cols.div_ceil(nc) * a.cols.div_ceil(depth);
            (0..blocks).map(|_| Phase::new(threads, a_panels)).collect()
        }
    };
    with_scratch(&PACK_B, threads * run_len, |b_packed| {
        let team = Team {
            uk,
            nc,
            kc,
            depth,
            group,
            alpha,
            beta,
            a,
            b,
            n: c.cols,
            ldc: c.ld,
            b_runs: b_packed.chunks_mut(run_len).map(RwLock::new).collect(),
            c: TilesOfC { data: c.data.as_mut_ptr(), _c: PhantomData },
            a_panels,
            strips: strip_tasks,
            phases,
            current: AtomicUsize::new(0),
        };
        // Member 0 is the calling thread, which starts at once; the others are the pool's
        // workers, each joining where the team is when it wakes (crate::cpu::workers).
        workers::share(threads, threads, &|t| match strips {
            Some(strip) => team.work_on_strips(t, strip),
            None => team.work(t),
        })
    })
}

/// What the members of one product's team share. They go through the blocks in step, each
/// block's [`Phase`] counting its work: the runs of B are packed, then the panels of A
/// multiplied, and a member goes on only when the work of the phase is done. The locks make
/// that sharing safe Rust; the phases order the packing and the reading of a block, so a lock
/// is contended only by a member that joins late. C is written through [`TilesOfC`].
struct Team<'a> {
    uk: &'a Microkernel,
    nc: usize,
    /// The depth of one microkernel call: of the sums each tile of C receives.
    kc: usize,
    /// The depth of a block of B: a whole number of `kc`, more than one where `C` is narrower
    /// than the width a block could have ([`sums_per_block`]).
    depth: usize,
    /// Panels of B in one thread's run.
    group: usize,
    alpha: f32,
    beta: f32,
    a: &'a MatRef<'a>,
    b: &'a MatRef<'a>,
    n: usize,
    ldc: usize,
    /// Thread `t`'s run of packed B panels: written by `t`, then read by all.
    b_runs: Vec<RwLock<&'a mut [f32]>>,
    c: TilesOfC<'a>,
    /// Panels of A (of `MR` rows of C).
    a_panels: usize,
    /// The strips of C's columns, as tasks ([`Team::work_on_strips`]).
    strips: Tasks,
    /// Each block's progress, in the order of the loops ([`Team::work`]).
    phases: Vec<Phase>,
    /// The first block that some member may still be working on: where a member that joins
    /// late starts.
    current: AtomicUsize,
}

/// One block's progress, shared by the members of the team present: the runs of B not yet
/// taken and those packed, its panels of A as tasks and those done.
struct Phase {
    runs_taken: AtomicUsize,
    runs_packed: AtomicUsize,
    panels: Tasks,
    panels_done: AtomicUsize,
}

impl Phase {
    fn new(members: usize, a_panels: usize) -> Self {
        let panels = Tasks::new(members);
        panels.deal(a_panels);
        let zero = || AtomicUsize::new(0);
        Phase { runs_taken: zero(), runs_packed: zero(), panels, panels_done: zero() }
    }
}

/// One block of the product: columns `cols` of B and C, depth `depth` of A and B.
struct Block {
    cols: Range<usize>,
    depth: Range<usize>,
}

impl Team<'_> {
    /// Member `t`'s part of the whole product: the loops of the [module docs](self), from the
    /// block where the team is when it joins.
    fn work(&self, t: usize) {
        let (k, runs) = (self.a.cols, self.b_runs.len());
        let depths = k.div_ceil(self.depth);
        for (i, phase) in self.phases.iter().enumerate().skip(self.current.load(Ordering::Acquire)) {
            let (jc, pc) = (i / depths * self.nc, i % depths * self.depth);
            let block = Block { cols: jc..self.n.min(jc + self.nc), depth: pc..k.min(pc + self.depth) };
            // Runs of B not yet taken, whoever packs them.
            loop {
                let run = phase.runs_taken.fetch_add(1, Ordering::Relaxed);
                if run >= runs {
                    break;
                }
                self.pack_b(run, &block);
                phase.runs_packed.fetch_add(1, Ordering::Release);
            }
            workers::wait_for(&phase.runs_packed, runs);
            self.multiply(t, &block, phase);
            // The B block is packed over only when every panel of A has been multiplied by it.
            workers::wait_for(&phase.panels_done, self.a_panels);
            self.current.fetch_max(i + 1, Ordering::Release);
        }
    }

    /// Thread `t`'s part of a product of few rows: it takes strips of `strip` panels of B's
    /// columns until none is left, and computes each strip of C whole, every block of its depth
    /// in order: its own copy of the strip of B and of every panel of A, no barrier.
    fn work_on_strips(&self, t: usize, strip: usize) {
        let (uk, k, n) = (self.uk, self.a.cols, self.n);
        let mut b_strip = self.b_runs[t].write().unwrap_or_else(PoisonError::into_inner);
        with_scratch(&PACK_A, self.a_panels * uk.mr * self.depth, |a_packed| {
            while let Some(s) = self.strips.next(t) {
                let cols = s * strip * uk.nr..n.min((s + 1) * strip * uk.nr);
                for pc in (0..k).step_by(self.depth) {
                    let depth = pc..k.min(pc + self.depth);
                    let len = cols.len().div_ceil(uk.nr) * pack::b_panel_stride(depth.len(), uk.nr);
                    (uk.pack_b)(self.b, depth.clone(), cols.clone(), 0, &mut b_strip[..len]);
                    let b_panels: Vec<&[f32]> = pack::b_panels(&b_strip[..len], depth.len(), uk.nr).collect();
                    let a_panels = a_packed.chunks_exact_mut(uk.mr * depth.len()).take(self.a_panels);
                    for (i, a_panel) in a_panels.enumerate() {
                        // SAFETY: columns `cols` of C are this task's alone (TilesOfC).
                        unsafe { self.row_of_tiles(i, &depth, &cols, &b_panels, a_panel, &[]) };
                    }
                }
            }
        });
    }

    /// The rows of A (and C) of panel `i` of A.
    fn panel_rows(&self, i: usize) -> Range<usize> {
        i * self.uk.mr..self.a.rows.min(i * self.uk.mr + self.uk.mr)
    }

    /// Packs panel `i` of A at `depth` into `a_panel` and multiplies it by `b_panels` (the
    /// packed B of C's columns `cols` at that depth): one row of tiles of C, each tile receiving
    /// one sum per `kc` of the depth in order, `beta` applied with the product's first; the
    /// microkernels prefetch `warm`, each sum's row a share.
    ///
    /// # Safety
    /// The calling task owns those tiles of C ([`TilesOfC`]).
    unsafe fn row_of_tiles(
        &self,
        i: usize,
        depth: &Range<usize>,
        cols: &Range<usize>,
        b_panels: &[&[f32]],
        a_panel: &mut [f32],
        warm: &[*const f32],
    ) {
        let panel_rows = self.panel_rows(i);
        let height = panel_rows.len();
        (self.uk.pack_a)(self.a, panel_rows, depth.clone(), a_panel);
        // Each sum's row prefetches its share of `warm`, as a block of one sum would.
        let sums = depth.len().div_ceil(self.kc);
        let mut warm = warm.chunks(warm.len().div_ceil(sums).max(1));
        // SAFETY: the panel's rows of C lie inside C.
        let c = unsafe { self.c.data.add(i * self.uk.mr * self.ldc) };
        for sum in depth.clone().step_by(self.kc) {
            let (first, kc) = (sum - depth.start, self.kc.min(depth.end - sum));
            let beta = if sum == 0 { self.beta } else { 1.0 };
            let a_panel = &a_panel[first * self.uk.mr..(first + kc) * self.uk.mr];
            let row = RowOfTiles { kc, first, alpha: self.alpha, beta, a_panel, height };
            let warm = warm.next().unwrap_or_default();
            // SAFETY: the caller owns columns `cols` of the panel's rows of C.
            unsafe { row_of_tiles(self.uk, &row, b_panels, cols.clone(), c, self.ldc, warm) };
        }
    }

    /// The panels of `block`'s B in thread `t`'s run.
    fn run(&self, t: usize, block: &Block) -> Range<usize> {
        let panels = block.cols.len().div_ceil(self.uk.nr);
        t * self.group..panels.min(t * self.group + self.group)
    }

    /// Packs run `r` of `block`'s B.
    fn pack_b(&self, r: usize, block: &Block) {
        let run = self.run(r, block);
        if !run.is_empty() {
            let mut out = self.b_runs[r].write().unwrap_or_else(PoisonError::into_inner);
            let len = run.len() * pack::b_panel_stride(block.depth.len(), self.uk.nr);
            (self.uk.pack_b)(self.b, block.depth.clone(), block.cols.clone(), run.start, &mut out[..len]);
        }
    }

    /// Member `t` takes `phase`'s panels of A until none is left, and multiplies each by the
    /// whole packed block of B: one row of tiles of C.
    fn multiply(&self, t: usize, block: &Block, phase: &Phase) {
        let (uk, a, kc) = (self.uk, self.a, block.depth.len());
        let runs: Vec<_> =
            self.b_runs.iter().map(|r| r.read().unwrap_or_else(PoisonError::into_inner)).collect();
        let stride = pack::b_panel_stride(kc, uk.nr);
        let b_panels: Vec<&[f32]> = (runs.iter().enumerate())
            .flat_map(|(u, run)| pack::b_panels(&run[..self.run(u, block).len() * stride], kc, uk.nr))
            .collect();
        let prefetch_next = a.rows * kc * size_of::<f32>() > COLD_A_BLOCK;
        // One packed panel of A and one list of lines for all of this thread's tasks.
        with_scratch(&PACK_A, uk.mr * kc, |a_panel| {
            NEXT_LINES.with_borrow_mut(|next| {
                while let Some(i) = phase.panels.next(t) {
                    // The source lines of the next panel, usually this thread's next task.
                    next.clear();
                    if prefetch_next && i + 1 < self.a_panels {
                        pack::source_lines(a, self.panel_rows(i + 1), block.depth.clone(), next);
                    }
                    // SAFETY: rows `i * MR..` of C are this task's alone in this block (TilesOfC).
                    unsafe { self.row_of_tiles(i, &block.depth, &block.cols, &b_panels, a_panel, next) };
                    phase.panels_done.fetch_add(1, Ordering::Release);
                }
            })
        });
    }
}

/// `C`'s values, written by the tasks. Within a block, a task owns the tiles of its panel of A's
/// `MR` rows, so no two threads touch one element, and the wait between two blocks (every
/// panel done, [`Phase`]) orders every write of one before any read of the next (a tile may change threads from block to
/// block); a task of [`Team::work_on_strips`] owns its strip of columns for the whole product.
struct TilesOfC<'a> {
    data: *mut f32,
    _c: PhantomData<&'a mut [f32]>,
}

// SAFETY: the threads write disjoint tiles (above), as `&mut [f32]` pieces of C would be Send.
unsafe impl Send for TilesOfC<'_> {}
// SAFETY: as above; shared only to hand each task its own tiles.
unsafe impl Sync for TilesOfC<'_> {}

/// The panels of A of one block, as tasks: thread `t` takes its own contiguous share in order
/// (so the next panel, which its microkernels prefetch, is usually its own next task) and, when
/// that is done, takes panels from the end of the share with the most left.
struct Tasks {
    /// Per thread, the `next..end` panels of its share still to take: `next << 32 | end`.
    shares: Vec<AtomicU64>,
}

impl Tasks {
    fn new(threads: usize) -> Self {
        Tasks { shares: (0..threads).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Shares out panels `0..count` equally (only while no thread is taking any).
    fn deal(&self, count: usize) {
        let threads = self.shares.len();
        for (t, share) in self.shares.iter().enumerate() {
            let (next, end) = (count * t / threads, count * (t + 1) / threads);
            share.store((next as u64) << 32 | end as u64, Ordering::Relaxed);
        }
    }

    /// The next panel for thread `t`, or `None` when every panel is taken.
    fn next(&self, t: usize) -> Option<usize> {
        let left = |s: &AtomicU64| {
            let (next, end) = bounds(s.load(Ordering::Relaxed));
            end.saturating_sub(next)
        };
        take(&self.shares[t], true).or_else(|| {
            loop {
                let fullest = self.shares.iter().max_by_key(|s| left(s))?;
                if left(fullest) == 0 {
                    return None;
                }
                if let Some(i) = take(fullest, false) {
                    return Some(i);
                }
            }
        })
    }
}

/// A share's `next..end` from its value `next << 32 | end`.
fn bounds(share: u64) -> (u64, u64) {
    (share >> 32, share & 0xffff_ffff)
}

/// Takes the first (`front`) or last panel of a share, if any is left.
fn take(share: &AtomicU64, front: bool) -> Option<usize> {
    let mut v = share.load(Ordering::Relaxed);
    loop {
        let (next, end) = bounds(v);
        if next >= end {
            return None;
        }
        let (taken, rest) =
            if front { (next, (next + 1) << 32 | end) } else { (end - 1, next << 32 | (end - 1)) };
        match share.compare_exchange_weak(v, rest, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(taken as usize),
            Err(now) => v = now,
        }
    }
}

/// The least number of tasks per thread that the panels of A must give for the threads to share
/// the rows; with fewer, they share strips of the columns ([`Team::work_on_strips`]), cut so
/// that each thread gets this many.
const TASKS_PER_THREAD: usize = 4;

/// Panels of A below which the threads share strips of the columns whatever their count, when
/// `C` is at least twice as wide as tall: each strip then packs all of A (fewer than `64 * MR`
/// rows) for itself, which its width pays for, and no wait separates packing from computing.
const FEW_PANELS: usize = 64;

/// The narrowest strip, in panels of B: a strip packs all of A for itself, which needs this
/// many columns of work to pay for.
const MIN_STRIP: usize = 4;

/// The width, in panels of B, of the strips of columns the threads share for a product of few
/// rows ([`Team::work_on_strips`]), or `None` when they share the rows: `threads` threads on an
/// `m x n` C of `a_panels` panels of A and `nr`-column panels of B, at most `group` panels to a
/// strip (what one thread's buffer holds). Strips are taken when the panels of A give fewer than
/// [`TASKS_PER_THREAD`] tasks a thread, or are fewer than [`FEW_PANELS`] in a C at least twice as
/// wide as tall, and when there is a strip for every thread.
fn strip_width(
    threads: usize,
    (m, n): (usize, usize),
    (a_panels, nr): (usize, usize),
    group: usize,
) -> Option<usize> {
    let few_rows = a_panels < TASKS_PER_THREAD * threads || (a_panels < FEW_PANELS && n >= 2 * m);
    let b_panels = n.div_ceil(nr);
    let strip = b_panels.div_ceil(TASKS_PER_THREAD * threads).max(MIN_STRIP).min(group);
    (threads > 1 && few_rows && b_panels.div_ceil(strip) >= threads).then_some(strip)
}

/// How many tiles at the end of a row prefetch the next panel's source: a panel of B (64 KB at
/// `kc = 512`) passes through the L1 per tile, so lines asked for earlier are gone again by the
/// time they are packed.
const WARM_TILES: usize = 2;

/// The size in bytes of a block of `A` above which the next panel's source is prefetched. In a
/// square product a smaller block fits a 1 MB L2 together with its block of `B`, so the source
/// is still there when it is packed, and building the list of lines is pure overhead.
const COLD_A_BLOCK: usize = 512 * 1024;

/// The deepest sum (`kc`) for which [`row_of_tiles`] prefetches the lines of `C` of the tile
/// [`cache::c_ahead_tiles`] tiles on before each tile, where the kernel asks for it
/// ([`Microkernel::prefetch_c`]). A row of
/// tiles of `C` is `MR` streams of stores; with sums this short the microkernels' own prefetch
/// of their tile comes a few dozen cycles before the stores, and each line is fetched at the
/// store that first writes it, one stream at a time (products such as `4096 x 4096 x 8`, where
/// writing `C` is most of the work). With deeper sums the FMAs hide that, and the extra requests
/// only compete with the panels of `B` streaming into L1 (measured in
/// `docs/performance-notes.md`).
const SHORT_SUM: usize = 8;

/// What the tiles of one row share: the depth, the scalars, the packed `A` panel and how many
/// of its `MR` rows are rows of C.
struct RowOfTiles<'a> {
    kc: usize,
    /// The first row of each packed panel of `B` that this sum multiplies.
    first: usize,
    alpha: f32,
    beta: f32,
    a_panel: &'a [f32],
    height: usize,
}

/// The inner loop: one packed `A` panel against panels of one packed `B` block (columns `cols`
/// of C); `c` is C's element in the panel's first row and column 0. The microkernels prefetch
/// the lines `warm` between them, so the next panel of `A` is packed from L1 or L2; for sums of
/// at most [`SHORT_SUM`] steps each tile's lines of C are asked for [`cache::c_ahead_tiles`]
/// tiles before it (a hint: nothing is read or written there early).
///
/// # Safety
/// The panel's `height` rows of C, `ldc` apart from `c` on, hold columns `cols`, and no other
/// thread reads or writes those elements during the call.
unsafe fn row_of_tiles(
    uk: &Microkernel,
    row: &RowOfTiles,
    b_panels: &[&[f32]],
    cols: Range<usize>,
    c: *mut f32,
    ldc: usize,
    warm: &[*const f32],
) {
    let RowOfTiles { kc, first, alpha, beta, a_panel, height } = *row;
    let (mr, nr) = (uk.mr, uk.nr);
    let mut scratch = [0.0f32; MAX_TILE];
    let tiles = b_panels.len();
    let warm_from = tiles.saturating_sub(WARM_TILES);
    let mut warm = warm.chunks(warm.len().div_ceil(tiles - warm_from).max(1));
    let ahead = if uk.prefetch_c && kc <= SHORT_SUM { cache::c_ahead_tiles(uk) } else { 0 };
    let prefetch_tile = |q: usize| {
        let col = cols.start + q * nr;
        let width = nr.min(cols.end - col);
        for i in 0..height {
            let row = c.wrapping_add(i * ldc + col);
            for line in line_offsets(width) {
                prefetch(row.wrapping_add(line));
            }
        }
    };
    (0..ahead.min(tiles)).for_each(prefetch_tile);
    // The MR x kc panel of A is read again for every panel of the B block streaming past it
    // (from L1, or from L2 where the B panel going through the 32 KB L1 evicted it),
    // writing one row of tiles of C left to right (sequential lines the prefetcher follows).
    for (q, b_panel) in b_panels.iter().enumerate() {
        let b_panel = &b_panel[first * nr..(first + kc) * nr];
        let col = cols.start + q * nr;
        let width = nr.min(cols.end - col);
        let warm = if q >= warm_from { warm.next().unwrap_or_default() } else { &[] };
        if ahead > 0 && q + ahead < tiles {
            prefetch_tile(q + ahead);
        }
        // The kernel of the panel's height (the last panel of A, where C's rows end, is
        // shorter); at full height a panel of B at most half full takes the half-width kernel.
        let run = if height < mr {
            uk.short[height - 1]
        } else {
            uk.narrow.filter(|_| 2 * width <= nr).unwrap_or(uk.run)
        };
        if width == nr {
            // SAFETY: the tile's `height` rows of NR columns are the caller's (col + nr <=
            // cols.end); the panels hold kc * MR and kc * NR values; `uk` was detected by the
            // dispatcher.
            unsafe { run(kc, a_panel.as_ptr(), b_panel.as_ptr(), alpha, beta, c.add(col), ldc, warm) };
        } else {
            // The tile's part of C goes through the scratch tile, so that the kernel's own
            // update (its rounding of alpha * tile + beta * C) is applied to it.
            // SAFETY: row i's `width` columns from `col` on are the caller's.
            let row = |i: usize| unsafe { std::slice::from_raw_parts_mut(c.add(col + i * ldc), width) };
            if beta != 0.0 {
                (0..height).for_each(|i| scratch[i * nr..i * nr + width].copy_from_slice(row(i)));
            }
            // SAFETY: as above, into the MR x NR scratch tile (MAX_TILE >= MR * NR).
            unsafe {
                run(kc, a_panel.as_ptr(), b_panel.as_ptr(), alpha, beta, scratch.as_mut_ptr(), nr, warm)
            };
            (0..height).for_each(|i| row(i).copy_from_slice(&scratch[i * nr..i * nr + width]));
        }
    }
}

thread_local! {
    /// The packed panels of A of the worker threads.
    static PACK_A: Scratch = const { RefCell::new(Vec::new()) };
    /// The packed block of B, on the calling thread: one run of panels per thread of the team.
    static PACK_B: Scratch = const { RefCell::new(Vec::new()) };
    /// `C^T` of a product computed through its transpose.
    static C_T: Scratch = const { RefCell::new(Vec::new()) };
    /// The addresses the microkernels prefetch for the next panel of A.
    static NEXT_LINES: RefCell<Vec<*const f32>> = const { RefCell::new(Vec::new()) };
}

/// The least work, in flops, that pays for one more thread of the team when its workers
/// sleep: about what a core does in the time that waking a sleeping pool worker, and the
/// caller after it, takes on a virtual machine whose idle vCPUs halt (tens of microseconds;
/// the measurements are in `docs/performance-notes.md`).
pub(super) const FLOPS_PER_THREAD: usize = 8_000_000;

/// The least work that pays for one more thread in calls made one after another
/// ([`workers::in_a_loop`]), whose workers are still awake from the call before: a few
/// microseconds of a core's work, so that the team's shared packing and waits stay a small
/// part of each share.
pub(super) const FLOPS_PER_AWAKE_THREAD: usize = 1_000_000;

/// How many of the `threads` a product of `m x n x k` gets: one per [`FLOPS_PER_THREAD`] of
/// work, or per [`FLOPS_PER_AWAKE_THREAD`] in a loop of calls, at least one. The count changes
/// no bits: every path that takes it computes each output the same way on any number of
/// threads.
pub(super) fn worth_waking(threads: usize, m: usize, n: usize, k: usize) -> usize {
    let floor =
        if threads > 1 && workers::in_a_loop(threads) { FLOPS_PER_AWAKE_THREAD } else { FLOPS_PER_THREAD };
    threads_for(threads, floor, m, n, k)
}

/// `threads` capped at one per `flops_per_thread` of an `m x n x k` product's work, at least one.
fn threads_for(threads: usize, flops_per_thread: usize, m: usize, n: usize, k: usize) -> usize {
    let flops = 2usize.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    threads.min(flops / flops_per_thread).max(1)
}

/// The width of the `n` blocks: `round(n / nc_target)` blocks (at least one) of equal width in
/// whole `nr` panels: at most 3/2 of `nc_target`, and at least 3/4 of it when `n` is split.
/// Cutting at `nc_target` left n = 4097 with a third block one column wide, for which all of
/// `A` was packed again and every tile went through the edge path: 2-3% of the whole product.
/// The B block lives in L3 either way ([module docs](self)), so a wider one costs nothing.
fn balanced_nc(n: usize, nc_target: usize, nr: usize) -> usize {
    let blocks = ((n as f64 / nc_target as f64).round() as usize).max(1);
    n.div_ceil(blocks).next_multiple_of(nr)
}

/// How many sums of `kc` a block of B holds on `threads` threads: on more than one, as many as
/// make a block `nc` wide as large as one of the target width `nc_target`, at most
/// [`MAX_SUMS_PER_BLOCK`]. A product narrower than the target then packs deeper blocks, so its
/// threads wait for each other fewer times, while each tile of C still receives the same sums,
/// in the same order, as with one sum per block: the bits do not change. One thread has no
/// waits to save, and keeps one sum per block.
fn sums_per_block(threads: usize, nc_target: usize, nc: usize) -> usize {
    if threads == 1 { 1 } else { (nc_target / nc).clamp(1, MAX_SUMS_PER_BLOCK) }
}

/// The deepest block of B, in sums of `kc`: a task packs its panel of A to the whole depth.
const MAX_SUMS_PER_BLOCK: usize = 4;

/// The depth of the sums that each tile of `C` receives in a product of `m` rows and depth `k`
/// with `uk` on this CPU, in order: [`balanced_kc`] of the depth of a block of `B`.
pub(super) fn sum_depth(uk: &Microkernel, m: usize, k: usize) -> usize {
    balanced_kc(k, cache::block_shape(uk, m, 0).0)
}

/// The depth of the `k` blocks: at most `kc_max`, and equal, so that no block is a sliver.
fn balanced_kc(k: usize, kc_max: usize) -> usize {
    k.div_ceil(k.div_ceil(kc_max))
}

/// The widest `C` that [`gemm`] computes through its transpose when `A` is column-major (and
/// `C` taller than wide, and the product deep enough: [`TRANSPOSED_DEPTH_PER_COL`]). Packing an `MR`-row panel of a column-major `A` reads `MR` values from
/// each of `kc` columns far apart, which only pays when every panel then meets many panels of
/// `B`; for a narrow `C` the transposed product packs that `A` as its `B`, whose rows are runs
/// in memory. Beyond this width the direct product is as fast or faster (measured in
/// `docs/performance-notes.md`).
const TRANSPOSED_MAX_COLS: usize = 256;

/// The shallowest product (`k` per column of `C`) that [`gemm`] computes through its transpose:
/// writing `C^T` back costs `O(mn)` beside the product's `O(mnk)`, and the packing it saves is
/// worth more only with deep sums (measured in `docs/performance-notes.md`).
const TRANSPOSED_DEPTH_PER_COL: usize = 4;

/// The most rows of `C` computed by one transposed product in [`through_transpose`], so that the
/// scratch `C^T` stays a few MB whatever the height of `C`.
const TRANSPOSED_ROWS: usize = 4096;

/// `C = alpha * A * B + beta * C` for a column-major `A`, as `C^T = alpha * B^T A^T` (an `A` of
/// `n` rows and a row-major `B`) in blocks of [`TRANSPOSED_ROWS`] rows of `C`, each into a
/// row-major scratch and then into `C`: `C = C^T^T + beta * C`, `C` not read when `beta == 0`.
/// Nothing outside `C`'s block is written.
fn through_transpose(
    uk: &Microkernel,
    threads: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> Result<()> {
    let (m, n) = (c.rows, c.cols);
    with_scratch(&C_T, TRANSPOSED_ROWS.min(m) * n, |scratch| {
        for first in (0..m).step_by(TRANSPOSED_ROWS) {
            let rows = TRANSPOSED_ROWS.min(m - first);
            // Rows first.. of a column-major A start `first` values on.
            let a_rows = MatRef { data: &a.data[first..], rows, ..*a };
            let ct = &mut scratch[..rows * n];
            gemm(uk, threads, alpha, &b.t(), &a_rows.t(), 0.0, &mut MatMut::contiguous(ct, n, rows))?;
            for i in 0..rows {
                for (j, x) in c.data[(first + i) * c.ld..][..n].iter_mut().enumerate() {
                    let v = ct[j * rows + i];
                    *x = if beta == 0.0 { v } else { beta.mul_add(*x, v) };
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_products_stay_on_fewer_threads() {
        let asleep = |t, m, n, k| threads_for(t, FLOPS_PER_THREAD, m, n, k);
        assert_eq!(asleep(2, 8, 8, 8), 1);
        assert_eq!(asleep(2, 160, 160, 160), 1); // 8.2 Mflop
        assert_eq!(asleep(2, 256, 256, 256), 2); // 33.6 Mflop
        assert_eq!(asleep(16, 256, 256, 256), 4);
        assert_eq!(asleep(16, 4096, 4096, 4096), 16);
        assert_eq!(asleep(4, 1, 1 << 40, 1 << 40), 4); // saturates instead of overflowing
        let awake = |t, m, n, k| threads_for(t, FLOPS_PER_AWAKE_THREAD, m, n, k);
        assert_eq!(awake(16, 64, 64, 64), 1); // 0.5 Mflop
        assert_eq!(awake(16, 192, 192, 192), 14); // 14.2 Mflop
        assert_eq!(worth_waking(1, 4096, 4096, 4096), 1);
    }

    #[test]
    fn narrow_products_on_several_threads_pack_deeper_blocks() {
        assert_eq!(sums_per_block(1, 1024, 64), 1);
        assert_eq!(sums_per_block(2, 1024, 64), MAX_SUMS_PER_BLOCK);
        assert_eq!(sums_per_block(2, 1024, 512), 2);
        assert_eq!(sums_per_block(2, 1024, 1024), 1);
        assert_eq!(sums_per_block(16, 1024, 1536), 1); // a block wider than the target
    }

    /// A column-major `A` with a narrow `C`, through the transposed product: right against an
    /// `f64` sum, in blocks of rows that cut `C` (4100 rows), with `C` not read when `beta == 0`
    /// (NaN there), nothing outside it written, and the same bits on any thread count.
    #[test]
    fn narrow_products_of_a_column_major_a_go_through_the_transpose() {
        use crate::cpu::microkernel::PORTABLE;
        use crate::cpu::{TestOperands, assert_same_bits};
        for (m, n, k) in [(4100, 5, 33), (70, 9, 40), (300, TRANSPOSED_MAX_COLS, 1024), (1000, 3, 12)] {
            for b_layout in [Layout::RowMajor, Layout::ColMajor] {
                for (alpha, beta) in [(1.5, 0.0), (-0.75, 0.5)] {
                    let operands = TestOperands::new((m, n, k), (Layout::ColMajor, b_layout), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), &operands.c0, operands.ldc);
                    let mut first: Option<Vec<f32>> = None;
                    for threads in [1, 2] {
                        let mut out = c0.clone();
                        gemm(&PORTABLE, threads, alpha, &a, &b, beta, &mut MatMut::new(&mut out, m, n, ldc))
                            .unwrap();
                        let case = format!("{m}x{n}x{k} {b_layout:?} beta {beta}");
                        operands.assert_product(alpha, beta, &out, &case);
                        assert_same_bits(&mut first, out, &case, "the thread count");
                    }
                }
            }
        }
    }

    #[test]
    fn column_blocks_are_equal_and_never_slivers() {
        assert_eq!(balanced_nc(100, 2048, 32), 128); // one block, rounded up to whole panels
        assert_eq!(balanced_nc(3000, 2048, 32), 3008); // one block of 1.46 targets
        assert_eq!(balanced_nc(4097, 2048, 32), 2080); // two, not 2048 + 2048 + 1
        assert_eq!(balanced_nc(8192, 2048, 32), 2048);
    }
}
