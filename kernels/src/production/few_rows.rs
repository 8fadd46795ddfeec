//! Products whose `C` has a few rows (`m <= FEW`, `n` and `k` any): `C = alpha * A * B + beta
//! * C` for `A` of `m x k`. A tile kernel computes them in a few rows of each 128 x 128 tile,
//! padding the rest; here every element of `B` is read once, by one thread, which multiplies it
//! into all `m` sums of its column at once.
//!
//! A block is 8 warps of 32 threads and owns 32 columns of `C`: lane `tx` computes column
//! `32 * blockIdx.x + tx`, warp `ty` taking the rows `p = ty, ty + 8, ...` of `B` (each warp
//! reads 32 consecutive values of a row) times `A[0..m][p]`. Each thread sums with one `f32`
//! FMA per product, in order, eight rows of `B` loaded ahead; the 8 partial sums of an output
//! are then added in a fixed order through shared memory, so the result does not vary from run
//! to run. `C` is not read when `beta == 0`. (Matrix-vector products have a kernel of their
//! own, [`vector`](crate::production::vector), with more threads per output.)
//!
//! The 16-byte-load entry (`A` and `B` aligned, `k`, `n` and the leading dimensions multiples
//! of 4) covers the same 32 columns with the same threads in another arrangement. A lane owns
//! four adjacent columns of `C` (one 16-byte vector of a row of `B`): eight lanes span the 32
//! columns, and the four such groups of a warp with its 8 warps are 32 threads down `K`. Each
//! takes four consecutive rows of `B` at a time (a quad: four 16-byte loads) with the four
//! matching columns of each row of `A` (one 16-byte load a row), 128 FMAs for 12 loads where
//! the scalar entry issues 9 loads per 8 FMAs. The four groups of a warp add their sums with
//! two butterfly shuffles, and the warps theirs through shared memory as above, each in a
//! fixed order.
//!
//! A tall variant ([`TALL_SPEC`]) covers `C` with such blocks over rows of tiles of `FEW`
//! rows, each block taking its own rows of `A` and `C`.
//!
//! Outside the tall variant each element of `B` is read once in the whole grid, so those loads
//! are streaming, as in the [`vector`](crate::production::vector) kernel (evict-first in L1 and
//! L2); the tall variant's rows of tiles read the same `B`, and load it as usual.
//!
//! A variant for a column-major `B` ([`NT_SPEC`]: `B^T` stored row-major, its columns
//! contiguous, as in `Q K^T` with few queries) reads it as it lies instead of after a transposed
//! copy (the whole of `B` read and written once more than the product reads it). Its block
//! covers the same 32 columns: warp `ty` four of them, its lanes down `K` (each column's run of
//! `K` read by a warp at a time, coalesced), every lane summing `FEW x 4` products with one
//! `f32` FMA each, in order, over its share of `K` (`p = lane, lane + 32, ...`, or four
//! consecutive values at a time in the 16-byte entry). The warp then adds each of its 32 sums
//! across its lanes in a fixed order (five rounds of butterfly shuffles, each halving the sums a
//! lane holds), which leaves lane `l` the total of row `l / 4` in column `l % 4`, and writes it.
//! `K` is not split for it: its reads are each column's whole run.
//!
//! One block per 32 columns is a small grid (32 blocks at `n = 1024`), so the host splits `K`
//! across more blocks as it does for the tile kernels ([`split_k`](crate::production::split_k)),
//! in slices of at least [`SLICE`] rows of `B`: one quad for each thread down `K`. Two blocks
//! fit on an SM, so a split grid keeps 16 warps of loads in flight on each.

use crate::infra::launch::{KernelSpec, Shapes};

/// The most rows of `C` the kernel computes.
pub const FEW: usize = 8;
/// Threads of a warp: the columns of a block.
const LANES: u32 = 32;
/// Warps of a block: the threads of each output.
const WARPS: u32 = 8;
// The sums are written to C by one warp per row.
const _: () = assert!(WARPS as usize >= FEW);
/// Lanes of a warp side by side along a row in the 16-byte entry: each owns four columns, the
/// 32 of the block.
const GROUPS: u32 = LANES / 4;
/// Threads of a warp down `K` in the 16-byte entry: one per group of [`GROUPS`] lanes.
const K_LANES: u32 = LANES / GROUPS;
/// The shallowest K slice the host gives a block: a quad of `B` for each of the 16-byte
/// entry's threads down `K`.
pub const SLICE: u32 = 4 * K_LANES * WARPS;

/// Launch configuration of [`sgemm_few_rows`](self): a block covers 32 columns of `C` and
/// all of its at most 8 rows, two blocks to an SM (the launch bound caps the registers at 128).
pub const SPEC: KernelSpec = KernelSpec {
    name: "few_rows",
    entry: "sgemm_few_rows",
    vec4_entry: Some("sgemm_few_rows_vec4"),
    summary: "products with at most 8 rows of C, 8 threads per output, K split for small grids",
    block: (LANES, WARPS),
    tile: (FEW as u32, LANES),
    smem_bytes: FEW as u32 * WARPS * (LANES + 1) * 4,
    min_blocks_per_sm: 2,
    k_slices: Some(SLICE),
    shapes: Shapes::FewRows(FEW),
    reads_a_transposed: false,
    reads_b_transposed: false,
    // Every architecture: as the vector kernel.
    ..crate::production::vector::SPEC
};

/// Launch configuration of [`sgemm_few_rows_nt`](self): [`SPEC`]'s blocks and grid on a
/// column-major `B` read as it lies ([`KernelSpec::reads_b_transposed`]), `K` not split.
pub const NT_SPEC: KernelSpec = KernelSpec {
    name: "few_rows_nt",
    entry: "sgemm_few_rows_nt",
    vec4_entry: Some("sgemm_few_rows_nt_vec4"),
    summary: "products with at most 8 rows of C over a column-major B, a warp down K per 4 columns",
    smem_bytes: 0,
    k_slices: None,
    reads_b_transposed: true,
    ..SPEC
};

/// Launch configuration of [`sgemm_few_rows_nt_tall`](self): [`NT_SPEC`] over rows of tiles, as
/// [`TALL_SPEC`] is [`SPEC`] over them.
pub const NT_TALL_SPEC: KernelSpec = KernelSpec {
    name: "few_rows_nt_tall",
    entry: "sgemm_few_rows_nt_tall",
    vec4_entry: Some("sgemm_few_rows_nt_tall_vec4"),
    summary: "few_rows_nt over rows of tiles of 8, for products a little taller than 8 rows",
    shapes: Shapes::Any,
    reads_b_transposed: true,
    ..NT_SPEC
};

/// Launch configuration of the tall variant, [`sgemm_few_rows_tall`](self): the same blocks
/// over `m / FEW` rows of tiles, for products a little taller than [`FEW`] rows. The rows of
/// tiles of one strip read the same `B`; when the grid is one wave they run together, and `B`
/// comes from memory once.
pub const TALL_SPEC: KernelSpec = KernelSpec {
    name: "few_rows_tall",
    entry: "sgemm_few_rows_tall",
    vec4_entry: Some("sgemm_few_rows_tall_vec4"),
    summary: "few_rows over rows of tiles of 8, for products a little taller than 8 rows",
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
    ..SPEC
};

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{FEW, GROUPS, K_LANES, LANES, SPEC, WARPS};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        F32x4, ld_global_cs_f32, ld_global_cs_v4_f32, ld_global_nc_v4_f32, shfl_bfly_f32,
    };

    /// Loads an element of `B`: streaming ([`ld_global_cs_f32`]) where each element is read once
    /// in the whole grid, an ordinary load in the tall variant (`TALL`), whose rows of tiles
    /// read the same `B`.
    ///
    /// # Safety
    /// `ptr` is a readable element of `B`, which no thread writes.
    #[inline(always)]
    unsafe fn load_b<const TALL: bool>(ptr: *const f32) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { if TALL { *ptr } else { ld_global_cs_f32(ptr) } }
    }

    /// [`load_b`] for four consecutive elements of `B` in one 16-byte load, when `guard` holds
    /// (zeros when it does not).
    ///
    /// # Safety
    /// When `guard` holds, `ptr` is 16-byte aligned and its four elements are readable elements
    /// of `B`, which no thread writes.
    #[inline(always)]
    unsafe fn load_b4<const TALL: bool>(ptr: *const f32, guard: bool) -> F32x4 {
        // SAFETY: the caller's contract.
        unsafe { if TALL { ld_global_nc_v4_f32(ptr, guard) } else { ld_global_cs_v4_f32(ptr, guard) } }
    }

    /// The index in the block's shared memory of row `i`'s partial sum of warp `warp` for lane
    /// `lane`'s column: rows of `WARPS` runs of `LANES + 1` floats (the extra one keeps the
    /// warps' runs in distinct banks).
    #[inline(always)]
    fn partial(i: usize, warp: u32, lane: u32) -> usize {
        (i * WARPS as usize + warp as usize) * (LANES + 1) as usize + lane as usize
    }

    /// This block's part of the arguments: in the tall variant ([`TALL_SPEC`]) the rows from
    /// `FEW` times its row of tiles (`m` the rows left, at most `FEW`), otherwise the arguments
    /// as they are (`m <= FEW`, one row of tiles).
    #[inline(always)]
    fn place<const TALL: bool>(args: GemmArgs) -> GemmArgs {
        if !TALL {
            return args;
        }
        let first = block_y() * FEW as u32;
        let rows = (args.m - first).min(FEW as u32);
        let a = args.a.wrapping_add(offset(first, 0, args.lda));
        let c = args.c.wrapping_add(offset(first, 0, args.ldc));
        GemmArgs { m: rows, a, c, ..args }
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)), launched with [`SPEC`]
    /// for `m <= FEW` or with [`TALL_SPEC`] (`TALL`) for any `m`. `AHEAD` rows of `B` are
    /// loaded ahead of the FMAs, in flight together: eight, or six in the tall variant, whose
    /// row offsets leave no room for eight under the register cap.
    unsafe fn few_rows<const TALL: bool, const AHEAD: usize>(args: GemmArgs) {
        let (strip, GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }) =
            (block_x(), place::<TALL>(args));
        let (tx, ty) = (thread_x(), thread_y());
        let col = strip * LANES + tx;
        let rows = (m as usize).min(FEW);
        let partials = dynamic_shared_f32();
        let mut sums = [0.0f32; FEW];
        // SAFETY: every read is guarded to A's m x k and B's k x n (p < k, col < n, i < m);
        // each partial is written by one thread and read after the barrier.
        unsafe {
            if col < n {
                // Loops over all FEW rows with a uniform guard, so that they unroll and the
                // sums stay in registers.
                let mut p = ty;
                let ahead = AHEAD as u32;
                while p + (ahead - 1) * WARPS < k {
                    let bs: [f32; AHEAD] = core::array::from_fn(|s| {
                        load_b::<TALL>(b.add(offset(p + s as u32 * WARPS, col, ldb)))
                    });
                    let avs: [[f32; AHEAD]; FEW] = core::array::from_fn(|i| {
                        core::array::from_fn(|s| {
                            if i < rows { *a.add(offset(i as u32, p + s as u32 * WARPS, lda)) } else { 0.0 }
                        })
                    });
                    for (sum, avs) in sums.iter_mut().zip(&avs) {
                        for (&av, &bv) in avs.iter().zip(&bs) {
                            *sum = fma(av, bv, *sum);
                        }
                    }
                    p += ahead * WARPS;
                }
                while p < k {
                    let bv = load_b::<TALL>(b.add(offset(p, col, ldb)));
                    for (i, sum) in sums.iter_mut().enumerate() {
                        if i < rows {
                            *sum = fma(*a.add(offset(i as u32, p, lda)), bv, *sum);
                        }
                    }
                    p += WARPS;
                }
            }
            // All FEW rows (those past m are zeros, never read): a loop bounded by `rows`
            // would not unroll, and would pick each sum out of the registers by a chain of
            // selects.
            for (i, &sum) in sums.iter().enumerate() {
                *partials.add(partial(i, ty, tx)) = sum;
            }
            sync_threads();
            write_c(partials, rows, col, GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc });
        }
    }

    /// The end of both entries, after the barrier: warp `i < rows` adds row `i`'s partial sums
    /// of column `col` (lane `tx` of the block's columns) in warp order and writes `C`.
    ///
    /// # Safety
    /// `partials` holds row `i`'s sums of every warp at [`partial`]`(i, warp, tx)`, written
    /// before the barrier; `col` is this lane's column.
    #[inline(always)]
    unsafe fn write_c(
        partials: *const f32,
        rows: usize,
        col: u32,
        GemmArgs { n, alpha, beta, c, ldc, .. }: GemmArgs,
    ) {
        let (tx, row) = (thread_x(), thread_y());
        if (row as usize) < rows && col < n {
            // SAFETY: as the contract says; the element of C is inside (row < m, col < n).
            unsafe {
                let total =
                    (0..WARPS).fold(0.0f32, |t, warp| t + *partials.add(partial(row as usize, warp, tx)));
                update_c(c.add(offset(row, col, ldc)), alpha, total, beta);
            }
        }
    }

    /// [`few_rows`] with 16-byte loads of `A` and `B`, launched as it is (the module doc
    /// describes the arrangement).
    ///
    /// # Safety
    /// As [`few_rows`], and `a` and `b` 16-byte aligned with `k`, `n`, `lda` and `ldb`
    /// multiples of 4.
    unsafe fn few_rows_vec4<const TALL: bool>(args: GemmArgs) {
        let (strip, GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }) =
            (block_x(), place::<TALL>(args));
        let (tx, ty) = (thread_x(), thread_y());
        let (group, k_lane) = (tx % GROUPS, tx / GROUPS);
        let col = strip * LANES + 4 * group;
        let rows = (m as usize).min(FEW);
        let partials = dynamic_shared_f32();
        // Quads (4 rows of B) a step of all threads down K covers, and this thread's first.
        let (step, quads) = (WARPS * K_LANES, k / 4);
        let mut q = ty * K_LANES + k_lane;
        let mut sums = [[0.0f32; 4]; FEW];
        // SAFETY: loads are guarded to B's k x n (a quad is whole: k % 4 == 0; a vector is
        // whole: col and n are multiples of 4) and to A's m x k (i < m, whole quads); the
        // vectors start 16-byte aligned (aligned bases, leading dimensions multiples of 4).
        // Every lane reaches both shuffles and the barrier; each partial is written by one
        // thread and read after the barrier.
        unsafe {
            let quad_of_b = |q: u32| -> [F32x4; 4] {
                core::array::from_fn(|s| {
                    load_b4::<TALL>(b.wrapping_add(offset(4 * q + s as u32, col, ldb)), col < n)
                })
            };
            let multiply = |sums: &mut [[f32; 4]; FEW], q: u32, bs: &[F32x4; 4]| {
                for (i, row_sums) in sums.iter_mut().enumerate() {
                    let av = ld_global_nc_v4_f32(a.wrapping_add(offset(i as u32, 4 * q, lda)), i < rows);
                    for (&a_p, b_p) in av.0.iter().zip(bs) {
                        for (sum, &b_pj) in row_sums.iter_mut().zip(&b_p.0) {
                            *sum = fma(a_p, b_pj, *sum);
                        }
                    }
                }
            };
            // Two quads a trip: their eight loads of B are in flight together.
            while q + step < quads {
                let (first, second) = (quad_of_b(q), quad_of_b(q + step));
                multiply(&mut sums, q, &first);
                multiply(&mut sums, q + step, &second);
                q += 2 * step;
            }
            if q < quads {
                let only = quad_of_b(q);
                multiply(&mut sums, q, &only);
            }
            // Each row's four sums are added across the groups; then the thread `k_lane` of the
            // group writes the row's column `k_lane` (every thread one value a row, all FEW
            // rows as in the scalar entry). The `match` is a select: indexing the array by
            // `k_lane` would put it in local memory.
            for (i, row_sums) in sums.iter_mut().enumerate() {
                for sum in row_sums.iter_mut() {
                    *sum += shfl_bfly_f32(*sum, 2 * GROUPS);
                    *sum += shfl_bfly_f32(*sum, GROUPS);
                }
                let mine = match k_lane {
                    0 => row_sums[0],
                    1 => row_sums[1],
                    2 => row_sums[2],
                    _ => row_sums[3],
                };
                *partials.add(partial(i, ty, 4 * group + k_lane)) = mine;
            }
            sync_threads();
            let col = strip * LANES + tx;
            write_c(partials, rows, col, GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc });
        }
    }

    /// Columns of `C` a warp of [`NT_SPEC`](super::NT_SPEC) computes: 4, the block's 32 over
    /// its 8 warps.
    const NT_COLUMNS: u32 = LANES / WARPS;

    /// The sums a lane of [`few_rows_nt`] keeps: row `i`'s products with column `c` of its
    /// warp's four at `4 i + c`.
    const NT_SUMS: usize = FEW * NT_COLUMNS as usize;

    /// Adds each of the warp's `NT_SUMS` sums across its 32 lanes and returns lane `lane`'s
    /// total: sum `lane` of the list. Five rounds, each pairing lanes `offset` apart (16, 8, 4,
    /// 2, 1) and halving the sums a lane holds: the lane with bit `offset` set keeps the upper
    /// half of its list, its partner the lower, each adding the other's copy of what it keeps
    /// (one shuffle a pair of sums). A fixed order, the same on every run.
    ///
    /// # Safety
    /// Every lane of the warp calls it (the shuffles are warp-wide).
    #[inline(always)]
    unsafe fn across_lanes(mut sums: [f32; NT_SUMS], lane: u32) -> f32 {
        const { assert!(NT_SUMS == LANES as usize, "one total a lane") };
        let mut len = NT_SUMS;
        let mut offset = LANES / 2;
        while len > 1 {
            let half = len / 2;
            let upper = lane & offset != 0;
            for i in 0..half {
                let (keep, send) = if upper { (sums[i + half], sums[i]) } else { (sums[i], sums[i + half]) };
                // SAFETY: the caller's contract.
                sums[i] = keep + unsafe { shfl_bfly_f32(send, offset) };
            }
            len = half;
            offset /= 2;
        }
        sums[0]
    }

    /// The end of [`few_rows_nt`]'s entries: the warp's totals ([`across_lanes`]), lane `l`
    /// writing row `l / 4` of column `first + l % 4` where both are inside `C`.
    ///
    /// # Safety
    /// Every lane of the warp calls it; `c` is `C` (`ldc`), `rows` and `n` its extent.
    #[inline(always)]
    unsafe fn write_nt(sums: [f32; NT_SUMS], first: u32, rows: usize, args: &GemmArgs) {
        let lane = thread_x();
        // SAFETY: the caller's contract; the element written is inside C (row < rows <= m,
        // col < n).
        unsafe {
            let total = across_lanes(sums, lane);
            let (row, col) = (lane / NT_COLUMNS, first + lane % NT_COLUMNS);
            if (row as usize) < rows && col < args.n {
                update_c(args.c.add(offset(row, col, args.ldc)), args.alpha, total, args.beta);
            }
        }
    }

    /// The GEMM contract with a column-major `B` of leading dimension `ldb` (element `(p, j)` at
    /// `b[j * ldb + p]`), launched with [`NT_SPEC`] for `m <= FEW` or with
    /// [`NT_TALL_SPEC`](super::NT_TALL_SPEC) (`TALL`) for any `m`: warp `ty` computes columns
    /// `32 * blockIdx.x + 4 ty ..` (four) of its row of tiles, its lanes taking `p = lane,
    /// lane + 32, ...`, `AHEAD` of them a trip with their loads in flight together.
    unsafe fn few_rows_nt<const TALL: bool, const AHEAD: usize>(args: GemmArgs) {
        let args = place::<TALL>(args);
        let GemmArgs { m, n, k, a, lda, b, ldb, .. } = args;
        let (lane, warp) = (thread_x(), thread_y());
        let first = block_x() * LANES + warp * NT_COLUMNS;
        let rows = (m as usize).min(FEW);
        let mut sums = [0.0f32; NT_SUMS];
        // SAFETY: every read is guarded to A's m x k and B's k x n (i < m, j < n, p < k); every
        // lane reaches the shuffles.
        unsafe {
            let column = |c: u32, p: u32| -> f32 {
                let j = first + c;
                if j < n { load_b::<TALL>(b.add(offset(j, p, ldb))) } else { 0.0 }
            };
            let row =
                |i: usize, p: u32| -> f32 { if i < rows { *a.add(offset(i as u32, p, lda)) } else { 0.0 } };
            let multiply = |sums: &mut [f32; NT_SUMS], bs: &[f32; NT_COLUMNS as usize], p: u32| {
                for i in 0..FEW {
                    let av = row(i, p);
                    for (c, &bv) in bs.iter().enumerate() {
                        sums[i * NT_COLUMNS as usize + c] = fma(av, bv, sums[i * NT_COLUMNS as usize + c]);
                    }
                }
            };
            let ahead = AHEAD as u32;
            let mut p = lane;
            while p + (ahead - 1) * LANES < k {
                let bs: [[f32; NT_COLUMNS as usize]; AHEAD] = core::array::from_fn(|s| {
                    core::array::from_fn(|c| column(c as u32, p + s as u32 * LANES))
                });
                for (s, bs) in bs.iter().enumerate() {
                    multiply(&mut sums, bs, p + s as u32 * LANES);
                }
                p += ahead * LANES;
            }
            while p < k {
                let bs: [f32; NT_COLUMNS as usize] = core::array::from_fn(|c| column(c as u32, p));
                multiply(&mut sums, &bs, p);
                p += LANES;
            }
            write_nt(sums, first, rows, &args);
        }
    }

    /// [`few_rows_nt`] with 16-byte loads of `A` and `B`: lane `lane` takes the four values of
    /// `K` from `4 lane`, then every 128 on, two such runs a trip.
    ///
    /// # Safety
    /// As [`few_rows_nt`], and `a` and `b` 16-byte aligned with `k`, `lda` and `ldb` multiples
    /// of 4.
    unsafe fn few_rows_nt_vec4<const TALL: bool>(args: GemmArgs) {
        let args = place::<TALL>(args);
        let GemmArgs { m, n, k, a, lda, b, ldb, .. } = args;
        let (lane, warp) = (thread_x(), thread_y());
        let first = block_x() * LANES + warp * NT_COLUMNS;
        let rows = (m as usize).min(FEW);
        let (quads, step) = (k / 4, LANES);
        let mut sums = [0.0f32; NT_SUMS];
        // SAFETY: loads are guarded to B's n columns and A's m rows, whole quads of K
        // (k % 4 == 0); the vectors start 16-byte aligned (aligned bases, leading dimensions
        // multiples of 4). Every lane reaches the shuffles.
        unsafe {
            let columns = |q: u32| -> [F32x4; NT_COLUMNS as usize] {
                core::array::from_fn(|c| {
                    let j = first + c as u32;
                    load_b4::<TALL>(b.wrapping_add(offset(j, 4 * q, ldb)), j < n)
                })
            };
            let multiply = |sums: &mut [f32; NT_SUMS], q: u32, bs: &[F32x4; NT_COLUMNS as usize]| {
                for i in 0..FEW {
                    let av = ld_global_nc_v4_f32(a.wrapping_add(offset(i as u32, 4 * q, lda)), i < rows);
                    for (c, bv) in bs.iter().enumerate() {
                        let sum = &mut sums[i * NT_COLUMNS as usize + c];
                        for (&a_p, &b_p) in av.0.iter().zip(&bv.0) {
                            *sum = fma(a_p, b_p, *sum);
                        }
                    }
                }
            };
            let mut q = lane;
            while q + step < quads {
                let (first_run, second_run) = (columns(q), columns(q + step));
                multiply(&mut sums, q, &first_run);
                multiply(&mut sums, q + step, &second_run);
                q += 2 * step;
            }
            if q < quads {
                let only = columns(q);
                multiply(&mut sums, q, &only);
            }
            write_nt(sums, first, rows, &args);
        }
    }

    gemm_entry! { production:
        /// Products with a few rows of `C` over a column-major `B`: [`few_rows_nt`]'s entry
        /// point.
        sgemm_few_rows_nt => few_rows_nt::<false, 4>
    }

    gemm_entry! { production:
        /// [`few_rows_nt`] with 16-byte loads (the host launches it only when `a` and `b` are
        /// 16-byte aligned and `lda`, `ldb`, `k` multiples of 4): [`few_rows_nt_vec4`]'s entry
        /// point.
        sgemm_few_rows_nt_vec4 => few_rows_nt_vec4::<false>
    }

    gemm_entry! { production:
        /// [`few_rows_nt`] over rows of tiles: the tall variant's entry point.
        sgemm_few_rows_nt_tall => few_rows_nt::<true, 4>
    }

    gemm_entry! { production:
        /// [`few_rows_nt_vec4`] over rows of tiles (the conditions of `sgemm_few_rows_nt_vec4`).
        sgemm_few_rows_nt_tall_vec4 => few_rows_nt_vec4::<true>
    }

    gemm_entry! { production:
        /// Products with a few rows of `C`: [`few_rows`]'s entry point.
        sgemm_few_rows => few_rows::<false, 8>
    }

    gemm_entry! { production:
        /// Products with a few rows of `C`, 16-byte global loads (the host launches it only
        /// when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n` multiples of 4):
        /// [`few_rows_vec4`]'s entry point.
        sgemm_few_rows_vec4 => few_rows_vec4::<false>
    }

    gemm_entry! { production:
        /// [`few_rows`] over rows of tiles: the tall variant's entry point.
        sgemm_few_rows_tall => few_rows::<true, 6>
    }

    gemm_entry! { production:
        /// [`few_rows_vec4`] over rows of tiles (the conditions of `sgemm_few_rows_vec4`).
        sgemm_few_rows_tall_vec4 => few_rows_vec4::<true>
    }
}
