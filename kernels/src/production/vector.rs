//! Matrix-vector products through the GEMM interface: `C = alpha * A * B + beta * C` where `C`
//! is a single column (`n == 1`: `A` times a vector) or a single row (`m == 1`: a vector times
//! `B`). A tile kernel computes such a product in one row or column of each 128 x 128 tile, so
//! most of its work is padding; this kernel gives every thread of the grid a share of the
//! reads, which is what bounds a matrix-vector product (each element of the matrix is used
//! once).
//!
//! Four geometries, each a block of 32 x 32 threads but the last two:
//! - [`SPEC`], 32 outputs a block:
//!   - a column (`n == 1`): warp `ty` computes row `32 * blockIdx.y + ty`, its lanes taking the
//!     elements `p = lane, lane + 32, ...` of the row of `A` (coalesced) times `B[p][0]`;
//!   - a row (`m == 1`): lane `tx` computes column `32 * blockIdx.x + tx`, warp `ty` taking the
//!     rows `p = ty, ty + 32, ...` of `B` (each warp reads 32 consecutive values of a row); a
//!     row of fewer than 32 columns takes them in groups of lanes (the columns rounded up to a
//!     power of two), so that a warp reads several rows of `B` at a time (four groups of 8 lanes
//!     for 5 to 8 columns);
//! - [`COLUMN_SPEC`], for a column of too few rows to fill the GPU 32 a block: 8 rows a block,
//!   128 threads (4 warps) a row, thread `q` taking the elements `p = q, q + 128, ...`: four
//!   times the blocks, each with a quarter of the work a row. The host gives it only columns
//!   too short for two of `SPEC`'s blocks per SM (`Gpu::chosen_for`);
//! - [`NARROW_SPEC`], for a column of many rows of at most 16 elements: 32 rows a warp, 256 a
//!   block of 8 warps. A row of 8 elements would leave 24 lanes of a row's warp idle; here a row
//!   is a group of 8 lanes (its length rounded up to a power of two), a load instruction reads
//!   four whole rows, and each lane's loads of 8 rows are in flight together. Rows a multiple
//!   of 4 long, aligned, are loaded 16 bytes a lane: a row of 16 is a group of 4 lanes, and the
//!   warp's 32 rows are one round of 4 loads a lane (8 rows' loads at a time otherwise);
//! - [`STAGED_SPEC`], for a column of many rows of at most 64 elements that `NARROW_SPEC` would
//!   load in more than one round: 32 rows a warp, 128 a block of 4 warps, copied into shared
//!   memory with `cp.async` (every element's copy in flight at once, no register held for it),
//!   then a row a lane. With a warp a row (`SPEC`), a row of 64 elements would be two loads a
//!   lane, too few in flight to cover the latency of memory.
//!
//! When either geometry's blocks do not fill the GPU (few outputs, deep `K`: 13 x 1 x 100000
//! is two blocks), the host splits `K` across blocks, the slices as a batch, and adds their
//! partials in order (`split_k`'s reduction).
//!
//! The matrix is read once in the whole grid, so its loads are *streaming* (`ld.global.cs`):
//! its lines take the evict-first place in L1 and L2, and replace each other rather than what
//! other work left in L2 (a previous kernel's dirty lines are not written back in the middle of
//! its reads).
//!
//! Each thread sums its share with one `f32` FMA per product, sixteen loads ahead: the sixteen
//! products of a group into a sum of their own, which is then added to the thread's running
//! sum. The partial sums of an output are then added pairwise: for a column in registers across
//! each warp (butterfly shuffles; for `COLUMN_SPEC` then the row's 4 warp sums), for a row
//! through shared memory. Both shorten the chains of additions an output's rounding errors
//! accumulate along (a chain's error grows with its length), and both are fixed orders, so the
//! result does not vary from run to run. `C` is not read when `beta == 0`.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Outputs per block, threads per output.
const LANES: u32 = 32;

/// The shallowest K slice the host gives a block when the outputs' blocks do not fill the GPU
/// (`Gpu::k_slices`): a full group of loads ahead for each of [`COLUMN_SPEC`]'s 128 threads of
/// a row.
const SLICE: u32 = 2048;

/// Launch configuration of [`sgemm_vector`](self): `tile` covers 32 outputs either way (32
/// rows of a column, or 32 columns of a row), so `grid(m, n)` is right for both; `K` is split
/// across blocks (slices of at least [`SLICE`]) when they do not fill the GPU.
pub const SPEC: KernelSpec = KernelSpec {
    name: "vector",
    entry: "sgemm_vector",
    vec4_entry: None,
    vec4_b: true,
    summary: "matrix-vector products (m = 1 or n = 1), 32 threads per output",
    block: (LANES, LANES),
    tile: (LANES, LANES),
    smem_bytes: LANES * (LANES + 1) * 4,
    // Two blocks an SM (the launch bound caps the registers at 32): short sums are bound by
    // their latency, which more warps hide.
    min_blocks_per_sm: 2,
    members_per_block: 1,
    k_slices: Some(SLICE),
    padding: Padding::Never,
    arch: None,
    module: Module::Production,
    shapes: Shapes::Vector,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

/// Rows per block of [`COLUMN_SPEC`].
const COLUMN_ROWS: u32 = 8;

/// Launch configuration of [`sgemm_vector_column`](self): 8 rows of a column (`n == 1` only)
/// a block, `K` split as for [`SPEC`].
pub const COLUMN_SPEC: KernelSpec = KernelSpec {
    name: "vector_column",
    entry: "sgemm_vector_column",
    summary: "a column (n = 1) of few rows, 128 threads per row",
    tile: (COLUMN_ROWS, 1),
    // A sum per warp.
    smem_bytes: LANES * 4,
    ..SPEC
};

/// The longest rows [`NARROW_SPEC`] takes: a group of lanes is at most 16 wide.
pub const NARROW_K: usize = 16;

/// Warps of a block of [`NARROW_SPEC`].
const NARROW_WARPS: u32 = 8;

/// Rows a lane of [`NARROW_SPEC`] loads at a time: rows longer than this are loaded in two
/// rounds (the choice against sixteen: `docs/performance-notes.md`).
pub const NARROW_ROUND: usize = 8;

/// Whether [`NARROW_SPEC`] loads a warp's rows of `k` elements in one round: rows of at most
/// [`NARROW_ROUND`], or of 12 or 16, which its 16-byte entry takes where `A` is aligned (the
/// usual case; the host chooses by shape). The host gives it those; other rows of at most
/// [`STAGED_K`] go to [`STAGED_SPEC`], whose copies need no rounds.
pub const fn narrow_in_one_round(k: usize) -> bool {
    k <= NARROW_ROUND || (k <= NARROW_K && k.is_multiple_of(4))
}

/// Launch configuration of [`sgemm_vector_narrow`](self): a column (`n == 1` only) of many rows
/// of at most [`NARROW_K`] elements, 32 rows a warp: a row per group of lanes, as many lanes as
/// the row's length rounded up to a power of two, so that every lane loads.
pub const NARROW_SPEC: KernelSpec = KernelSpec {
    name: "vector_narrow",
    entry: "sgemm_vector_narrow",
    vec4_entry: Some("sgemm_vector_narrow_vec4"),
    // The vector is read 4 bytes at a time.
    vec4_b: false,
    summary: "a column (n = 1) of many rows of at most 16, a row per group of lanes",
    block: (LANES, NARROW_WARPS),
    tile: (LANES * NARROW_WARPS, 1),
    smem_bytes: 0,
    // Eight blocks an SM, 32 registers: the whole SM's warps, as `SPEC`'s two.
    min_blocks_per_sm: 8,
    // Rows of `C` fill the GPU: never split.
    k_slices: None,
    ..SPEC
};

/// The longest rows [`STAGED_SPEC`] takes: a warp's shared memory holds 32 rows of at most
/// this many elements. Longer rows go to `SPEC`'s warp a row.
pub const STAGED_K: usize = 64;

/// Warps of a block of [`STAGED_SPEC`]: four, so that four blocks (34 KB of shared memory
/// each) fit an SM of every supported GPU.
const STAGED_WARPS: u32 = 4;

/// Floats of shared memory a warp of [`STAGED_SPEC`] owns: room for its 32 rows at a distance
/// of `k` rounded up to odd (at most `STAGED_K + 1`), then the vector.
const STAGED_WARP_FLOATS: u32 = LANES * (STAGED_K as u32 + 1) + STAGED_K as u32;

/// Launch configuration of [`sgemm_vector_staged`](self): a column (`n == 1` only) of many rows
/// of at most [`STAGED_K`] elements, 32 rows a warp, copied into shared memory before a lane
/// sums a row.
pub const STAGED_SPEC: KernelSpec = KernelSpec {
    name: "vector_staged",
    entry: "sgemm_vector_staged",
    vec4_entry: None,
    summary: "a column (n = 1) of many rows of at most 64, copied into shared memory, a row a lane",
    block: (LANES, STAGED_WARPS),
    tile: (LANES * STAGED_WARPS, 1),
    smem_bytes: STAGED_WARPS * STAGED_WARP_FLOATS * 4,
    // Four blocks an SM fit the shared memory of every supported GPU.
    min_blocks_per_sm: 4,
    // Rows of `C` fill the GPU: never split.
    k_slices: None,
    ..SPEC
};

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{COLUMN_ROWS, LANES, NARROW_K, NARROW_ROUND, SPEC, STAGED_K, STAGED_WARP_FLOATS};
    use crate::infra::ptx::{
        SharedAddr, cp_async_ca_4, cp_async_commit_group, cp_async_wait_group, ld_global_cs_f32,
        ld_global_cs_v4_f32, opaque_zero, shfl_bfly_f32, sync_warp,
    };
    /// Threads per row of [`COLUMN_SPEC`](super::COLUMN_SPEC), and their warps.
    const ROW_THREADS: u32 = LANES * LANES / COLUMN_ROWS;
    const WARPS_PER_ROW: u32 = ROW_THREADS / LANES;
    const _: () = assert!(
        LANES == 32 && WARPS_PER_ROW.is_power_of_two(),
        "the pairwise sums halve the partials to one"
    );
    use crate::infra::device::*;

    /// Loads ahead of the FMAs: the loads of a group are independent, so they are in flight
    /// together.
    const AHEAD: u32 = 16;

    /// The factors of `N` products `x(p + i STRIDE) y(p + i STRIDE)`, loaded when `present`,
    /// else zeros ([`opaque_zero`], nothing loaded); the matrix's loads streaming, as
    /// [`strided_dot`] says.
    ///
    /// # Safety
    /// When `present`, the `N` addresses are readable and no thread writes them.
    #[inline(always)]
    unsafe fn chunk<const N: usize, const STRIDE: u32>(
        p: u32,
        present: bool,
        x: &impl Fn(u32) -> *const f32,
        y: &impl Fn(u32) -> *const f32,
    ) -> ([f32; N], [f32; N]) {
        if !present {
            let zero = opaque_zero();
            return ([zero; N], [zero; N]);
        }
        let at = |i: usize| p + i as u32 * STRIDE;
        // SAFETY: the caller's contract.
        unsafe { (core::array::from_fn(|i| *x(at(i))), core::array::from_fn(|i| ld_global_cs_f32(y(at(i))))) }
    }

    /// `x(p) y(p)` summed over `p = first, first + STRIDE, ... < k`, where `x(p)` and `y(p)` give
    /// the addresses of the factors, `x` in the vector and `y` in the matrix: one FMA per
    /// product, each group of `AHEAD` products summed on its own (from its first product,
    /// rounded) before it is added to the total.
    ///
    /// What is left after one or more full groups (the tail of a long sum, fewer than `AHEAD`
    /// products) is one more group, loaded in chunks as its count needs: 8 products, then 4, 2
    /// and 1 together, each of those issued under its own condition and none used before all
    /// are issued (a skipped chunk loads nothing, and its zero products leave the sum as it is):
    /// two rounds of memory latency, as one would keep 30 values live, past the 32 registers of
    /// two blocks an SM.
    /// A sum shorter than a group takes its products one FMA at a time: such sums come many to
    /// a block, which hides their latency, and the chunks' conditions would cost more issue
    /// slots than the few loads they overlap.
    ///
    /// Each element of the matrix is read once in the whole grid, so its loads are streaming
    /// ([`ld_global_cs_f32`]); the vector's are read by every block and stay ordinary.
    ///
    /// # Safety
    /// Every address `x(p)`, `y(p)` for `p < k` is readable, and no thread writes the matrix.
    #[inline(always)]
    unsafe fn strided_dot<const STRIDE: u32>(
        first: u32,
        k: u32,
        x: impl Fn(u32) -> *const f32,
        y: impl Fn(u32) -> *const f32,
    ) -> f32 {
        const { assert!(AHEAD == 16, "the last group is at most 8 + 4 + 2 + 1 products") };
        let mut sum = 0.0f32;
        let mut p = first;
        // SAFETY: every load is of a product p < k (the caller's contract): the full groups'
        // by the loop condition, the chunks' by the count left, the short sum's by its loop's.
        unsafe {
            // Two separate paths, the first with a loop, so that the compiler cannot turn the
            // chunks' branches into predicates that every short sum would issue.
            if p + (AHEAD - 1) * STRIDE < k {
                while p + (AHEAD - 1) * STRIDE < k {
                    let (xs, ys) = chunk::<{ AHEAD as usize }, STRIDE>(p, true, &x, &y);
                    let mut group = xs[0] * ys[0];
                    for i in 1..AHEAD as usize {
                        group = fma(xs[i], ys[i], group);
                    }
                    sum += group;
                    p += AHEAD * STRIDE;
                }
                if p < k {
                    let left = (k - p).div_ceil(STRIDE);
                    let after = |taken: u32| p + (left & taken) * STRIDE;
                    let mut group = 0.0f32;
                    if left & 8 != 0 {
                        let (x8, y8) = chunk::<8, STRIDE>(p, true, &x, &y);
                        for i in 0..8 {
                            group = fma(x8[i], y8[i], group);
                        }
                    }
                    let (x4, y4) = chunk::<4, STRIDE>(after(8), left & 4 != 0, &x, &y);
                    let (x2, y2) = chunk::<2, STRIDE>(after(12), left & 2 != 0, &x, &y);
                    let (x1, y1) = chunk::<1, STRIDE>(after(14), left & 1 != 0, &x, &y);
                    for i in 0..4 {
                        group = fma(x4[i], y4[i], group);
                    }
                    group = fma(x2[1], y2[1], fma(x2[0], y2[0], group));
                    sum += fma(x1[0], y1[0], group);
                }
            } else {
                while p < k {
                    sum = fma(*x(p), ld_global_cs_f32(y(p)), sum);
                    p += STRIDE;
                }
            }
        }
        sum
    }

    /// `N` values (a power of two) summed pairwise: neighbours first, then neighbouring pairs,
    /// and so on.
    #[inline(always)]
    fn pairwise_sum<const N: usize>(mut xs: [f32; N]) -> f32 {
        let mut len = xs.len();
        while len > 1 {
            len /= 2;
            for i in 0..len {
                xs[i] = xs[2 * i] + xs[2 * i + 1];
            }
        }
        xs[0]
    }

    /// The 32 partials of a warp summed pairwise in registers, in [`pairwise_sum`]'s order:
    /// lane 0 ends with `((x0 + x1) + (x2 + x3)) + ...` (the other lanes with the same sum in
    /// other orders).
    ///
    /// # Safety
    /// Every lane of the warp calls it.
    #[inline(always)]
    unsafe fn warp_pairwise_sum(x: f32) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { warp_pairwise_sum_from(x, 1) }
    }

    /// The partials of the lanes `first` apart (a power of two, the same on every lane) summed
    /// pairwise as [`warp_pairwise_sum`] sums them: lane `l` ends with the sum over the lanes
    /// equal to `l` modulo `first`.
    ///
    /// # Safety
    /// Every lane of the warp calls it.
    #[inline(always)]
    unsafe fn warp_pairwise_sum_from(x: f32, first: u32) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { butterfly_sum(x, first, LANES) }
    }

    /// `x` summed pairwise over the butterfly steps of lane distances `from <= d < below`
    /// (powers of two), the nearest first: with `from == 1` each group of `below` neighbouring
    /// lanes ends with its group's sum, with `below == 32` each lane with the sum over the lanes
    /// equal to it modulo `from`.
    ///
    /// # Safety
    /// Every lane of the warp calls it, with the same `from` and `below`.
    #[inline(always)]
    unsafe fn butterfly_sum(x: f32, from: u32, below: u32) -> f32 {
        // SAFETY: the whole warp is here and takes the same steps (the caller's contract).
        let step =
            |x: f32, d: u32| if d >= from && d < below { x + unsafe { shfl_bfly_f32(x, d) } } else { x };
        // Written out: as a loop over the distances the compiler may keep the loop, selecting
        // each distance from the array by a chain of compares.
        step(step(step(step(step(x, 1), 2), 4), 8), 16)
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `m == 1` or `n == 1`,
    /// launched with [`SPEC`].
    unsafe fn vector(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let (tx, ty) = (thread_x(), thread_y());
        let partials = dynamic_shared_f32();
        let at = |row: u32, col: u32| row as usize * (LANES + 1) as usize + col as usize;
        // SAFETY: every read is guarded to A's m x k and B's k x n, which no thread writes (C
        // overlaps neither: the entry's contract); a column's warps run their
        // shuffles whole (a warp shares its row), and so do a row's (the width is the block's);
        // a row's shared array is LANES x (LANES + 1), written at (ty, tx) and read after the
        // barrier.
        unsafe {
            if n == 1 {
                // A warp per row: its partials summed in registers, no barrier.
                let row = block_y() * LANES + ty;
                if row < m {
                    let sum = strided_dot::<LANES>(
                        tx,
                        k,
                        |p| b.add(offset(p, 0, ldb)),
                        |p| a.add(offset(row, p, lda)),
                    );
                    let total = warp_pairwise_sum(sum);
                    if tx == 0 {
                        update_c(c.add(offset(row, 0, ldc)), alpha, total, beta);
                    }
                }
            } else {
                // A row of C narrower than the block's 32 columns (n < 32, one block across)
                // leaves lanes: its columns, rounded up to a power of two, are a group of lanes,
                // and a warp takes as many rows of B at a time as it holds groups.
                let width = if n < LANES { n.next_power_of_two() } else { LANES };
                let col = block_x() * LANES + (tx & (width - 1));
                let first = ty * (LANES / width) + tx / width;
                let sum = if col < n {
                    let x = |p: u32| a.add(p as usize);
                    let y = |p: u32| b.add(offset(p, col, ldb));
                    // The stride is the rows of B all warps take at a time.
                    match width {
                        32 => strided_dot::<32>(first, k, x, y),
                        16 => strided_dot::<64>(first, k, x, y),
                        8 => strided_dot::<128>(first, k, x, y),
                        4 => strided_dot::<256>(first, k, x, y),
                        2 => strided_dot::<512>(first, k, x, y),
                        _ => strided_dot::<1024>(first, k, x, y),
                    }
                } else {
                    0.0
                };
                // The groups of a warp add their sums pairwise, lane by lane of a group.
                let sum = warp_pairwise_sum_from(sum, width);
                *partials.add(at(ty, tx)) = sum;
                sync_threads();
                if ty == 0 && tx < width && col < n {
                    let total = pairwise_sum::<{ LANES as usize }>(core::array::from_fn(|warp| {
                        *partials.add(at(warp as u32, tx))
                    }));
                    update_c(c.add(col as usize), alpha, total, beta);
                }
            }
        }
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `n == 1`, launched
    /// with [`COLUMN_SPEC`](super::COLUMN_SPEC).
    unsafe fn column(GemmArgs { m, k, alpha, a, lda, b, ldb, beta, c, ldc, .. }: GemmArgs) {
        let (tx, ty) = (thread_x(), thread_y());
        let warp_sums = dynamic_shared_f32();
        // Thread q of row r: warp ty = 4 r + q / 32 of the block, lane q % 32.
        let (r, q) = (ty / WARPS_PER_ROW, ty % WARPS_PER_ROW * LANES + tx);
        let row = block_y() * COLUMN_ROWS + r;
        // SAFETY: every read is guarded to A's m x k and B's k x 1, which no thread writes; the
        // shared array holds a
        // sum per warp, written by its lane 0 and read after the barrier; every lane of a warp
        // runs the shuffles (a warp's threads share their row).
        unsafe {
            let sum = if row < m {
                strided_dot::<ROW_THREADS>(q, k, |p| b.add(offset(p, 0, ldb)), |p| a.add(offset(row, p, lda)))
            } else {
                0.0
            };
            let sum = warp_pairwise_sum(sum);
            if tx == 0 {
                *warp_sums.add(ty as usize) = sum;
            }
            sync_threads();
            if q == 0 && row < m {
                let first = (r * WARPS_PER_ROW) as usize;
                let total = pairwise_sum::<{ WARPS_PER_ROW as usize }>(core::array::from_fn(|w| {
                    *warp_sums.add(first + w)
                }));
                update_c(c.add(offset(row, 0, ldc)), alpha, total, beta);
            }
        }
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `n == 1` and
    /// `1 <= k <= NARROW_K`, launched with [`NARROW_SPEC`](super::NARROW_SPEC): [`narrow_rows`]
    /// with groups of `k` lanes rounded up to a power of two.
    unsafe fn narrow(args: GemmArgs) {
        const { assert!(NARROW_K == 16, "the widest group below is 16 lanes") };
        // SAFETY: the contract of the entry, with k <= NARROW_K (the host's).
        unsafe {
            match args.k {
                1 => narrow_rows::<1>(args),
                2 => narrow_rows::<2>(args),
                3..=4 => narrow_rows::<4>(args),
                5..=8 => narrow_rows::<8>(args),
                _ => narrow_rows::<16>(args),
            }
        }
    }

    /// `n == 1` with rows of `k <= W` elements, `W` a power of two: warp `w` of the grid computes
    /// the 32 rows from `32 w` on. Its lanes are `32 / W` groups of `W`; lane `q` of group `g`
    /// loads element `q` (none past `k`) of rows `g, g + 32 / W, ...` (`W` of them, one load
    /// each, [`NARROW_ROUND`] rows' loads in flight together; each load instruction reads
    /// `32 / W` whole rows), multiplies it by `B[q][0]` (one rounding), and the group adds its
    /// `W` products pairwise (neighbours first), row by row, in registers. Lane `q` of group `g`
    /// then writes the `q`-th of its rows, so that each lane writes one and the warp's 32 rows
    /// are written together. Rows past `m` are not loaded nor written.
    ///
    /// # Safety
    /// The contract of the entry, with `k <= W`.
    #[inline(always)]
    unsafe fn narrow_rows<const W: usize>(
        GemmArgs { m, k, alpha, a, lda, b, ldb, beta, c, ldc, .. }: GemmArgs,
    ) {
        let tx = thread_x();
        let Some(first) = warp_rows::<{ super::NARROW_WARPS }>(m) else { return };
        let width = W as u32;
        let (g, q) = (tx / width, tx % width);
        let row = |j: u32| first + j * (LANES / width) + g;
        // SAFETY: every load is of an element q < k of B's column or of a row below m of A,
        // which no thread writes; the early return is the warp's (`first` is the same for its
        // lanes), so the shuffles run whole; the row written is below m.
        unsafe {
            let x = if q < k { *b.add(offset(q, 0, ldb)) } else { 0.0 };
            // Sum q of the group's, kept by selects (indexing by a lane would use local memory).
            let mut mine = 0.0f32;
            for first_row in (0..W).step_by(NARROW_ROUND) {
                let ys: [f32; NARROW_ROUND] = core::array::from_fn(|i| {
                    let (j, row) = (first_row + i, row((first_row + i) as u32));
                    if j < W && q < k && row < m { ld_global_cs_f32(a.add(offset(row, q, lda))) } else { 0.0 }
                });
                for (i, &y) in ys.iter().enumerate().take(W - first_row) {
                    let sum = group_pairwise_sum::<W>(x * y);
                    mine = if q == (first_row + i) as u32 { sum } else { mine };
                }
            }
            if row(q) < m {
                update_c(c.add(offset(row(q), 0, ldc)), alpha, mine, beta);
            }
        }
    }

    /// The GEMM contract for `n == 1` and `k` one of 4, 8, 12, 16, with `A` 16-byte aligned
    /// and `lda` a multiple of 4, launched with [`NARROW_SPEC`](super::NARROW_SPEC):
    /// [`narrow_rows_wide`] with groups of `k / 4` lanes rounded up to a power of two.
    unsafe fn narrow_wide(args: GemmArgs) {
        // SAFETY: the contract of the entry, with k <= 16 a multiple of 4 (the host's).
        unsafe {
            match args.k {
                4 => narrow_rows_wide::<1>(args),
                8 => narrow_rows_wide::<2>(args),
                _ => narrow_rows_wide::<4>(args),
            }
        }
    }

    /// [`narrow_rows`] with 16-byte loads of `A`: a row is a group of `G` lanes, lane `q`
    /// loading elements `4q .. 4q + 4` (none past `k`, a multiple of 4) of `G` rows, one load
    /// each, all in flight together (each load instruction reads `32 / G` whole rows). A lane
    /// adds its four products pairwise and the group its lanes' sums pairwise, which is the order
    /// of [`narrow_rows`] with `W = 4 G`: the two entries give the same bits.
    ///
    /// # Safety
    /// The contract of the entry, with `k <= 4 G` a multiple of 4, `A` 16-byte aligned and
    /// `lda` a multiple of 4.
    #[inline(always)]
    unsafe fn narrow_rows_wide<const G: usize>(
        GemmArgs { m, k, alpha, a, lda, b, ldb, beta, c, ldc, .. }: GemmArgs,
    ) {
        let tx = thread_x();
        let Some(first) = warp_rows::<{ super::NARROW_WARPS }>(m) else { return };
        let width = G as u32;
        let (g, q) = (tx / width, tx % width);
        let row = |j: u32| first + j * (LANES / width) + g;
        let present = 4 * q < k;
        // SAFETY: every load is of elements below k of B's column or of a row below m of A,
        // 16-byte aligned (the contract), which no thread writes; the early return is the
        // warp's, so the shuffles run whole; the row written is below m.
        unsafe {
            let x: [f32; 4] =
                core::array::from_fn(
                    |i| if present { *b.add(offset(4 * q + i as u32, 0, ldb)) } else { 0.0 },
                );
            let ys: [[f32; 4]; G] = core::array::from_fn(|j| {
                let row = row(j as u32);
                ld_global_cs_v4_f32(a.add(offset(row, 4 * q, lda)), present && row < m).0
            });
            // Sum q of the group's, kept by selects (indexing by a lane would use local memory).
            let mut mine = 0.0f32;
            for (j, y) in ys.iter().enumerate() {
                let lane = (x[0] * y[0] + x[1] * y[1]) + (x[2] * y[2] + x[3] * y[3]);
                let sum = group_pairwise_sum::<G>(lane);
                mine = if q == j as u32 { sum } else { mine };
            }
            if row(q) < m {
                update_c(c.add(offset(row(q), 0, ldc)), alpha, mine, beta);
            }
        }
    }

    /// The first of the 32 rows of `C` this warp computes in the geometries of `WARPS` warps a
    /// block and 32 rows a warp ([`NARROW_SPEC`](super::NARROW_SPEC),
    /// [`STAGED_SPEC`](super::STAGED_SPEC)), `None` for a warp past the `m` rows: the same for
    /// all its lanes.
    #[inline(always)]
    fn warp_rows<const WARPS: u32>(m: u32) -> Option<u32> {
        let first = (block_y() * WARPS + thread_y()) * LANES;
        (first < m).then_some(first)
    }

    /// The values of each group of `W` neighbouring lanes (a power of two) summed pairwise, as
    /// [`warp_pairwise_sum`] sums a warp's: every lane of a group ends with its group's sum.
    ///
    /// # Safety
    /// Every lane of the warp calls it.
    #[inline(always)]
    unsafe fn group_pairwise_sum<const W: usize>(x: f32) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { butterfly_sum(x, 1, W as u32) }
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `n == 1` and
    /// `1 <= k <= STAGED_K`, launched with [`STAGED_SPEC`](super::STAGED_SPEC): warp `w` of the
    /// grid computes the 32 rows from `32 w` on. Its lanes copy the rows into the warp's part of
    /// shared memory with `cp.async`, element `f = lane + 32 i` of the rows' `32 k` (row
    /// `f / k`, column `f % k`: consecutive lanes read consecutive elements), all `k` copies of
    /// a lane in flight at once and no register held for them; the lanes copy the vector beside
    /// them, element `p` by lane `p % 32`. Then lane `r` sums row `r` (one FMA a product, in
    /// order) and writes it. The rows lie `k` rounded up to odd apart, so the 32 lanes' reads
    /// of a column fall in 32 different banks. Rows past `m` are not read (their copies
    /// zero-fill) nor written.
    unsafe fn staged(GemmArgs { m, k, alpha, a, lda, b, ldb, beta, c, ldc, .. }: GemmArgs) {
        let tx = thread_x();
        let Some(first) = warp_rows::<{ super::STAGED_WARPS }>(m) else { return };
        let ld = k | 1;
        // SAFETY: the warp's part of the block's dynamic shared memory (the spec sizes it for
        // its warps); every copy's source is an element of A's m x k or B's column (or, with
        // its guard false, not read: the base address then stands in); the wait and the warp
        // barrier publish the copies before any lane reads them; the early return is the
        // warp's; the row written is below m.
        unsafe {
            let rows = dynamic_shared_f32().add((thread_y() * STAGED_WARP_FLOATS) as usize);
            let vector = rows.add((LANES * (STAGED_K as u32 + 1)) as usize);
            let (rows_at, vector_at) = (SharedAddr::of(rows), SharedAddr::of(vector));
            for p in (tx..k).step_by(LANES as usize) {
                cp_async_ca_4(vector_at.offset_bytes(4 * p), b.add(offset(p, 0, ldb)), true);
            }
            let (step_r, step_p) = (LANES / k, LANES % k);
            let (mut r, mut p) = (tx / k, tx % k);
            for _ in 0..k {
                let present = first + r < m;
                let y = if present { a.add(offset(first + r, p, lda)) } else { a };
                cp_async_ca_4(rows_at.offset_bytes(4 * (r * ld + p)), y, present);
                (r, p) = (r + step_r, p + step_p);
                if p >= k {
                    (r, p) = (r + 1, p - k);
                }
            }
            cp_async_commit_group();
            cp_async_wait_group::<0>();
            sync_warp();
            let row = first + tx;
            if row < m {
                let mine = rows.add((tx * ld) as usize);
                let mut sum = 0.0f32;
                for q in 0..k as usize {
                    sum = fma(*mine.add(q), *vector.add(q), sum);
                }
                update_c(c.add(offset(row, 0, ldc)), alpha, sum, beta);
            }
        }
    }

    gemm_entry! { production:
        /// A column of many rows of at most `STAGED_K` elements: [`staged`]'s entry point.
        sgemm_vector_staged => staged
    }

    gemm_entry! { production:
        /// A column of many rows of at most `NARROW_K` elements: [`narrow`]'s entry point.
        sgemm_vector_narrow => narrow
    }

    gemm_entry! { production:
        /// The same with 16-byte loads of `A`: [`narrow_wide`]'s entry point.
        sgemm_vector_narrow_vec4 => narrow_wide
    }

    gemm_entry! { production:
        /// Matrix-vector products: [`vector`]'s entry point.
        sgemm_vector => vector
    }

    gemm_entry! { production:
        /// A column of few rows: [`column`]'s entry point.
        sgemm_vector_column => column
    }
}
