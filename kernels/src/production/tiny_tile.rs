//! Tiny tiles: 32 x 32 tiles of `C` with 64 threads and a ring of `cp.async` stages, for
//! batches of small members and small products, whose 64 x 64 tiles leave most SMs idle.
//!
//! Why: a batch of 32 products of 64^3 is 32 blocks of
//! [`small_tile`](crate::production::small_tile) on a GPU of 132 SMs, and each block walks its
//! 64-deep `K` in eight steps with two steps' loads ahead, so it waits on memory several times
//! in a row. On 32 x 32 tiles the same batch is 128 blocks, each with a quarter of the
//! arithmetic; and with [`async_copy`](crate::ladder::async_copy)'s ring of stages the copies of
//! `STAGES - 1` tiles of 16 along `K` are in flight at once, so a 64-deep member has asked for
//! three quarters of its operands before it computes anything.
//!
//! Layout: the 64 threads form an 8 x 8 grid; thread `(ty, tx)` owns the 4 x 4 block of
//! accumulators at rows `ty + 8 r` (`r < 4`) and columns `4 tx..4 tx + 4` of the tile. The `A`
//! tile is kept as it lies (`A_tile[row][k]`, rows [`A_LD`] floats apart), the `B` tile too
//! (`B_tile[k][col]`). For four consecutive `k` a thread reads one 4-vector of each of its
//! rows of `A` and of each of the four rows of `B`, all `ld.shared.v4`, for 64 FMAs, each
//! output's sum still in order along `k`. A warp's lanes read 4 adjacent rows of `A` (rows `A_LD`
//! floats apart fall in 4 distinct groups of 4 banks) and 8 adjacent `B` vectors: no bank
//! conflicts.
//!
//! Copies, one `cp.async` group per stage, zero-filled outside `A` and `B` (source size 0), so
//! edges need no other code:
//! - `A` goes row to row: one 16-byte copy per 4 values of a row (the `vec4` entry), or 4-byte
//!   copies with 16 lanes along one row, so that a warp's copy reads two rows' 64 bytes rather
//!   than one value from each of 32 rows.
//! - `B` goes row to row: one 16-byte copy per 4 columns (the `vec4` entry), or 4-byte copies
//!   with a warp's 32 lanes along one row (128 consecutive bytes an instruction).
//!
//! One barrier per tile, as in `async_copy` (the ring is [`run_pipeline`]'s): at the top of tile
//! `t`, after its copies are waited for, it both publishes tile `t` and proves every warp done
//! with tile `t - 1`, whose stage the copies of tile `t + STAGES - 1` then overwrite; the
//! groups of tiles past the end of `K` are empty. The epilogue writes each thread's 4 x 4 block
//! straight to `C`, a 16-byte access a row, where `C`'s rows are 16-byte aligned; elsewhere the
//! tile goes through shared memory, so that a warp writes rows of 32 consecutive floats.
//!
//! [`run_pipeline`]: crate::infra::device::run_pipeline
//!
//! Like [`small_tile`](crate::production::small_tile) it takes the K slices of a split-K
//! launch as a batch.
//!
//! Its variants [`TN_SPEC`], [`NT_SPEC`] and [`TT_SPEC`] read `A`, `B` or both column-major as
//! they lie, 16 bytes a copy along the operand's columns, instead of after a transposed copy:
//! - a column-major `A` goes into its tile transposed (`A_tile[k][row]`, rows [`BM`] floats
//!   apart, where a copy's 4 rows of one `k` lie side by side), and a thread owns the rows
//!   `4 ty..4 ty + 4`, so that one `ld.shared.v4` of a row of that tile gives its 4 rows at one
//!   `k` (a warp's lanes read 4 adjacent vectors: no conflicts);
//! - a column-major `B` goes into its tile transposed (`B_tile[col][k]`, rows [`A_LD`] floats
//!   apart, as `A`'s), and a thread owns the columns `tx + 8 c` (`c < 4`), whose rows of that
//!   tile fall in distinct groups of 4 banks for the 8 lanes of a quarter-warp; its `C` then goes
//!   through shared memory (its columns are not runs of 4).
//!
//! Each output's sum is the same, in the same order, as on row-major copies of the operands.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block.
const BM: u32 = 32;
const BN: u32 = 32;
/// Depth of a stage along `K`.
const BK: u32 = 16;
/// Threads per block: an 8 x 8 grid of 4 x 4 accumulator blocks.
const THREADS: u32 = 64;
/// Stages of the ring: the copies of `STAGES - 1` tiles in flight while one is computed.
const STAGES: u32 = 4;
/// Leading dimension of the `A` tile (`A_tile[row][k]`), in floats: 16-byte rows for the
/// fragment loads, four adjacent rows in four distinct groups of 4 banks.
const A_LD: u32 = BK + 4;
/// Bytes of the `A` tile, which the `B` tile (`BN` floats a row) follows in a stage.
const A_TILE: u32 = BM * A_LD * 4;
/// Bytes of one stage (both tiles).
const STAGE: u32 = A_TILE + BK * BN * 4;
/// Bytes of one stage where `B` is read column-major: its tile transposed, `BN` rows of
/// [`A_LD`] floats.
const STAGE_B_COLUMNS: u32 = A_TILE + BN * A_LD * 4;

/// Launch configuration of [`sgemm_tiny_tile`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "tiny_tile",
    entry: "sgemm_tiny_tile",
    vec4_entry: Some("sgemm_tiny_tile_vec4"),
    vec4_b: true,
    summary: "32x32 tiles (64 threads, 4x4 outputs each) on a 4-stage cp.async ring, for small batches",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: STAGES * STAGE,
    // At most 128 registers a thread; far fewer are used.
    min_blocks_per_sm: 8,
    members_per_block: 1,
    // Slices as deep as `small_tile`'s: a 64-deep product is not worth a second launch.
    k_slices: Some(64),
    padding: Padding::Never,
    arch: None,
    module: Module::Production,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

/// [`SPEC`] on a column-major `A` ([`KernelSpec::reads_a_transposed`]), 16-byte copies only.
pub const TN_SPEC: KernelSpec = SPEC.reading_columns(("tiny_tile_tn", "sgemm_tiny_tile_tn"), true, false);
/// [`SPEC`] on a column-major `B` ([`KernelSpec::reads_b_transposed`]), 16-byte copies only, in
/// stages of [`STAGE_B_COLUMNS`].
pub const NT_SPEC: KernelSpec = KernelSpec {
    smem_bytes: STAGES * STAGE_B_COLUMNS,
    ..SPEC.reading_columns(("tiny_tile_nt", "sgemm_tiny_tile_nt"), false, true)
};
/// [`SPEC`] on a column-major `A` and `B`, as [`NT_SPEC`].
pub const TT_SPEC: KernelSpec = KernelSpec {
    smem_bytes: STAGES * STAGE_B_COLUMNS,
    ..SPEC.reading_columns(("tiny_tile_tt", "sgemm_tiny_tile_tt"), true, true)
};

const _: () = assert!(
    (BM / 4) * (BN / 4) == THREADS
        && BM / 4 == 8
        && BK == 16
        && (BM * BK / 4).is_multiple_of(THREADS)
        && (BN * BK / 4).is_multiple_of(THREADS)
        && THREADS.is_multiple_of(BK)
        && THREADS.is_multiple_of(BN)
        && (A_LD * 4).is_multiple_of(16)
        && BK * BM <= BM * A_LD
        && BM * BN * 4 <= STAGES * STAGE,
    "the 8 x 8 thread grid, rows ty + 8 r; whole rows of A and B a copy instruction; whole \
     4-vectors per thread; A's transposed tile fits its place; C's tile fits the stages"
);

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{A_LD, A_TILE, BK, BM, BN, STAGE, STAGE_B_COLUMNS, STAGES, THREADS};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        F32x4, SharedAddr, cp_async_ca_4, cp_async_cg_16, cp_async_commit_group, ld_shared_f32,
        ld_shared_v4_f32, st_shared_f32, st_shared_v4_f32,
    };

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)); `VEC4`: the host's 16-byte
    /// conditions (`a` and `b` 16-byte aligned, `lda`, `ldb` and the lengths of the lines read,
    /// `k` or `m` for `A`, `n` or `k` for `B`, multiples of 4). `A_COLUMNS`, `B_COLUMNS`: `A`
    /// (element `(i, p)` at `a[p * lda + i]`), `B` (element `(p, j)` at `b[j * ldb + p]`) read
    /// column-major, into transposed tiles (see the module doc).
    #[inline(always)]
    unsafe fn gemm<const VEC4: bool, const A_COLUMNS: bool, const B_COLUMNS: bool>(args: GemmArgs) {
        let GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc } = args;
        let tid = thread_x();
        let (ty, tx) = (tid / (BN / 4), tid % (BN / 4));
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        // The thread's rows and columns of the tile (see the module doc).
        let row = |r: usize| if A_COLUMNS { 4 * ty + r as u32 } else { ty + 8 * r as u32 };
        let col = |c: usize| if B_COLUMNS { tx + 8 * c as u32 } else { 4 * tx + c as u32 };

        // The copies go along the lines of both operands, `width` floats a copy (16 bytes in
        // the `vec4` entry, else 4): a thread's first copy of a tile of `lines` lines of `len`
        // floats is at (tid / per_line, (tid % per_line) * width) with `per_line = len / width`
        // threads a line, the others `THREADS / per_line` lines apart, `lines * len / width /
        // THREADS` in all. A warp's copy reads whole lines (or 128 consecutive bytes of one),
        // never one value from each of 32 lines. A's lines are its rows (`BK` long) or, read
        // column-major, its columns (`BM` long); B's its rows (`BN`) or its columns (`BK`).
        let width = if VEC4 { 4 } else { 1 };
        let (a_len, b_len) = (if A_COLUMNS { BM } else { BK }, if B_COLUMNS { BK } else { BN });
        let (a_per_line, b_per_line) = (a_len / width, b_len / width);
        // (line, position along it) of the thread's first copy of each tile.
        let (a_line, a_at) = (tid / a_per_line, tid % a_per_line * width);
        let (b_line, b_at) = (tid / b_per_line, tid % b_per_line * width);
        let (a_lines_step, b_lines_step) = (THREADS / a_per_line, THREADS / b_per_line);
        let (a_copies, b_copies) = (BM * BK / width / THREADS, BK * BN / width / THREADS);
        // The thread's first copy: row and k of A, k and column of B.
        let (a_row, a_k) = if A_COLUMNS { (a_at, a_line) } else { (a_line, a_at) };
        let (b_k, b_col) = if B_COLUMNS { (b_at, b_line) } else { (b_line, b_at) };
        let mut a_ptr = a.wrapping_add(if A_COLUMNS {
            offset(a_k, row0 + a_row, lda)
        } else {
            offset(row0 + a_row, a_k, lda)
        });
        let mut b_ptr = b.wrapping_add(if B_COLUMNS {
            offset(col0 + b_col, b_k, ldb)
        } else {
            offset(b_k, col0 + b_col, ldb)
        });
        let (a_next_lines, b_next_lines) =
            (a_lines_step as usize * lda as usize, b_lines_step as usize * ldb as usize);
        let a_step = if A_COLUMNS { BK as usize * lda as usize } else { BK as usize };
        let b_step = if B_COLUMNS { BK as usize } else { BK as usize * ldb as usize };

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (the spec's smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        // Tiles: A_tile[row][k] (rows A_LD floats apart) or, transposed, A_tile[k][row] (BM);
        // B_tile[k][col] (BN) or, transposed, B_tile[col][k] (A_LD). A copy's line is a row of
        // its tile either way.
        let (a_ld, b_ld) = (if A_COLUMNS { BM } else { A_LD }, if B_COLUMNS { A_LD } else { BN });
        let a_dst = base.offset_bytes((a_line * a_ld + a_at) * 4);
        let b_dst = base.offset_bytes(A_TILE + (b_line * b_ld + b_at) * 4);

        // Starts the copies of tile `k0` into the stage at byte offset `stage` as one group;
        // past the end of K the group is empty (the ring's wait counts groups, not copies).
        let copy_tile = |stage: u32, k0: u32| {
            // SAFETY: the guards admit only elements inside A and B (the rest is zero-filled);
            // VEC4's conditions are the host's dispatch (with the lengths of the lines read
            // multiples of 4, a 4-vector lies wholly inside or outside). The stage is not read
            // until this group is waited for and a barrier passed, nor written while it may
            // still be read (see the module doc).
            unsafe {
                let copy = |dst: SharedAddr, src: *const f32, ok: bool| {
                    if VEC4 { cp_async_cg_16(dst, src, ok) } else { cp_async_ca_4(dst, src, ok) }
                };
                if k0 < k {
                    // Each copy's guard: the part common to the thread's copies of the tile,
                    // and its line's.
                    let a_ok = if A_COLUMNS { row0 + a_row < m } else { k0 + a_k < k };
                    for j in 0..a_copies {
                        let dst = a_dst.offset_bytes(stage + a_lines_step * j * a_ld * 4);
                        let line = a_lines_step * j;
                        let ok =
                            a_ok && if A_COLUMNS { k0 + a_k + line < k } else { row0 + a_row + line < m };
                        copy(dst, a_ptr.wrapping_add(j as usize * a_next_lines), ok);
                    }
                    let b_ok = if B_COLUMNS { k0 + b_k < k } else { col0 + b_col < n };
                    for j in 0..b_copies {
                        let dst = b_dst.offset_bytes(stage + b_lines_step * j * b_ld * 4);
                        let line = b_lines_step * j;
                        let ok =
                            b_ok && if B_COLUMNS { col0 + b_col + line < n } else { k0 + b_k + line < k };
                        copy(dst, b_ptr.wrapping_add(j as usize * b_next_lines), ok);
                    }
                }
                cp_async_commit_group();
            }
            a_ptr = a_ptr.wrapping_add(a_step);
            b_ptr = b_ptr.wrapping_add(b_step);
        };
        // acc[r][c]: row `row(r)`, column `col(c)` of the tile.
        let mut acc = [[0.0f32; 4]; 4];
        let compute = |stage: u32| {
            let at = base.offset_bytes(stage);
            let load = |offset: u32| {
                // SAFETY: inside the stage, whose copies completed before the pipeline's barrier.
                unsafe { ld_shared_v4_f32(at.offset_bytes(offset * 4)).0 }
            };
            // Four 4-vectors, `[x[0][q], x[1][q], x[2][q], x[3][q]]` for each q.
            let transpose =
                |x: [[f32; 4]; 4]| core::array::from_fn::<_, 4, _>(|q| [x[0][q], x[1][q], x[2][q], x[3][q]]);
            for p0 in (0..BK).step_by(4) {
                // The thread's values of A and B at k = p0 + q: a[q][r] for row(r), b[q][c] for
                // col(c).
                let a: [[f32; 4]; 4] = if A_COLUMNS {
                    core::array::from_fn(|q| load((p0 + q as u32) * BM + 4 * ty))
                } else {
                    transpose(core::array::from_fn(|r| load(row(r) * A_LD + p0)))
                };
                let b: [[f32; 4]; 4] = if B_COLUMNS {
                    transpose(core::array::from_fn(|c| load(A_TILE / 4 + col(c) * A_LD + p0)))
                } else {
                    core::array::from_fn(|q| load(A_TILE / 4 + (p0 + q as u32) * BN + 4 * tx))
                };
                // Step p0 + q, in order along k.
                for q in 0..4 {
                    outer_product(&mut acc, &a[q], &b[q]);
                }
            }
        };
        // SAFETY: the whole block runs the pipeline; `copy_tile` commits one group per call.
        unsafe {
            if B_COLUMNS {
                run_pipeline::<STAGES, STAGE_B_COLUMNS, BK, { STAGES - 2 }>(k, copy_tile, compute)
            } else {
                run_pipeline::<STAGES, STAGE, BK, { STAGES - 2 }>(k, copy_tile, compute)
            }
        };
        // Where the thread's columns are runs of 4 starting at multiples of 4 and the rows of C
        // are 16-byte aligned: one 16-byte access each (element by element at C's edges). Else
        // the tile goes through shared memory first, so that a warp's accesses to C are 32
        // consecutive floats of a row rather than 4 from each of 8 places in 4 rows.
        // (Uniform across the block, so the barriers are passed by all its threads.)
        if !B_COLUMNS && c_rows_aligned(&args) {
            let (row, col) = (|r: usize| row0 + row(r), col0 + 4 * tx);
            let whole = |r: usize| row(r) < m && col + 4 <= n;
            // SAFETY: C is valid for m x n with ldc; the 16-byte updates only for runs inside C
            // from 16-byte aligned addresses (all rows' reads of C before their writes,
            // `read_c`), the others skip elements outside it.
            unsafe {
                let at = |r: usize| c.wrapping_add(offset(row(r), col, ldc));
                update_c_runs::<4, true, 4>(at, whole, alpha, &acc, beta);
                for (r, acc_row) in acc.iter().enumerate() {
                    if !whole(r) {
                        update_c_block(&[*acc_row], row(r), col, m, n, alpha, beta, c, ldc);
                    }
                }
            }
        } else {
            // Every warp is past its last read of the stages, which become the tile of C
            // (`BM x BN`, rows BN floats apart).
            sync_threads();
            for (r, acc_row) in acc.iter().enumerate() {
                // SAFETY: inside the tile, 16-byte aligned for the vectors; one writer a slot.
                unsafe {
                    if B_COLUMNS {
                        for (c, &x) in acc_row.iter().enumerate() {
                            st_shared_f32(base.offset_bytes((row(r) * BN + col(c)) * 4), x);
                        }
                    } else {
                        st_shared_v4_f32(base.offset_bytes((row(r) * BN + col(0)) * 4), F32x4(*acc_row));
                    }
                }
            }
            sync_threads();
            const PER_THREAD: usize = (BM * BN / THREADS) as usize;
            let at = |i: usize| ((tid + THREADS * i as u32) / BN, (tid + THREADS * i as u32) % BN);
            // SAFETY: written before the barrier.
            let x: [[f32; 1]; PER_THREAD] = core::array::from_fn(|i| {
                let (row, col) = at(i);
                [unsafe { ld_shared_f32(base.offset_bytes((row * BN + col) * 4)) }]
            });
            // SAFETY: only elements inside C, each one thread's; all reads of C before the
            // writes (`read_c`).
            unsafe {
                update_c_runs::<1, false, PER_THREAD>(
                    |i| c.wrapping_add(offset(row0 + at(i).0, col0 + at(i).1, ldc)),
                    |i| row0 + at(i).0 < m && col0 + at(i).1 < n,
                    alpha,
                    &x,
                    beta,
                )
            };
        }
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 32 x 32 tiles, 4-byte copies: any pointer, any `ld`.
        sgemm_tiny_tile => gemm::<false, false, false>
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 32 x 32 tiles, 16-byte copies of `B` (the host
        /// launches it only when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4).
        sgemm_tiny_tile_vec4 => gemm::<true, false, false>
    }

    gemm_entry! { production:
        /// [`sgemm_tiny_tile_vec4`] on a column-major `A` (`lda`, `m`, `ldb`, `n` multiples of 4).
        sgemm_tiny_tile_tn => gemm::<true, true, false>
    }

    gemm_entry! { production:
        /// [`sgemm_tiny_tile_vec4`] on a column-major `B` (`lda`, `k`, `ldb` multiples of 4).
        sgemm_tiny_tile_nt => gemm::<true, false, true>
    }

    gemm_entry! { production:
        /// [`sgemm_tiny_tile_vec4`] on a column-major `A` and `B` (`lda`, `m`, `ldb`, `k`
        /// multiples of 4).
        sgemm_tiny_tile_tt => gemm::<true, true, true>
    }
}
