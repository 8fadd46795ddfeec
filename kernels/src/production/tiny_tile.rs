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
//! accumulators at rows `4 ty..4 ty + 4`, columns `4 tx..4 tx + 4` of the tile. For one `k` it
//! reads one 4-vector of the transposed `A` tile (`A_tile[k][row]`) and one of the `B` tile
//! (`B_tile[k][col]`), both `ld.shared.v4`, for 16 FMAs. A warp's lanes read 4 distinct `A`
//! vectors (each broadcast to 8 lanes) and 8 adjacent `B` vectors: no bank conflicts.
//!
//! Copies, one `cp.async` group per stage, zero-filled outside `A` and `B` (source size 0), so
//! edges need no other code:
//! - `A` is transposed on the way in: a thread copies 4 consecutive `k` of one row as four
//!   4-byte copies into a column of `A_tile`; the 32 lanes of a warp take 32 rows, so each of
//!   its shared stores hits another bank.
//! - `B` goes row to row: one 16-byte copy per 4 columns (the `vec4` entry) or four 4-byte ones.
//!
//! One barrier per tile, as in `async_copy` (the ring is [`run_pipeline`]'s): at the top of tile
//! `t`, after its copies are waited for, it both publishes tile `t` and proves every warp done
//! with tile `t - 1`, whose stage the copies of tile `t + STAGES - 1` then overwrite. The
//! epilogue writes each thread's 4 x 4 block straight to `C`.
//!
//! [`run_pipeline`]: crate::infra::device::run_pipeline
//!
//! Like [`small_tile`](crate::production::small_tile) it takes the K slices of a split-K
//! launch as a batch.

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
/// Leading dimension of the transposed `A` tile, in floats: 16-byte rows for the fragment
/// loads, shifted by 4 banks from one `k` to the next.
const A_LD: u32 = BM + 4;
/// Bytes of the `A` tile, which the `B` tile (`BN` floats a row) follows in a stage.
const A_TILE: u32 = BK * A_LD * 4;
/// Bytes of one stage (both tiles).
const STAGE: u32 = A_TILE + BK * BN * 4;

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
};

const _: () = assert!(
    (BM / 4) * (BN / 4) == THREADS
        && BM == 32
        && BK.is_multiple_of(8)
        && (BN * BK / 4).is_multiple_of(THREADS),
    "the 8 x 8 thread grid; a warp's lanes copy one row of A each; whole 4-vectors of B per thread"
);

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{A_LD, A_TILE, BK, BM, BN, STAGE, STAGES, THREADS};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        SharedAddr, cp_async_ca_4, cp_async_cg_16, cp_async_commit_group, ld_shared_v4_f32,
    };

    /// 4-vectors of `A` a thread copies per stage (4 consecutive `k` of its row each), and of
    /// `B` (4 consecutive columns of a row each).
    const A_COPIES: u32 = BM * BK / 4 / THREADS;
    const B_COPIES: u32 = BK * BN / 4 / THREADS;

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)); `VEC4`: the host's
    /// 16-byte conditions (`b` 16-byte aligned, `ldb` and `n` multiples of 4).
    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (ty, tx) = (tid / (BN / 4), tid % (BN / 4));
        let (row0, col0) = (block_y() * BM, block_x() * BN);

        // Copies: A row a_row, k groups a_k + 8 j; B rows b_k + (THREADS / 8) j, columns
        // b_col..b_col + 4.
        let (a_row, a_k) = (tid % BM, tid / BM * 4);
        let a_k_step = THREADS / BM * 4;
        let (b_k, b_col) = (tid / (BN / 4), tid % (BN / 4) * 4);
        let b_k_step = THREADS / (BN / 4);
        let a_row_ok = row0 + a_row < m;
        let mut a_ptr = a.wrapping_add(offset(row0 + a_row, a_k, lda));
        let mut b_ptr = b.wrapping_add(offset(b_k, col0 + b_col, ldb));
        let b_next_rows = b_k_step as usize * ldb as usize;
        let b_step = BK as usize * ldb as usize;

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let a_dst = base.offset_bytes((a_k * A_LD + a_row) * 4);
        let b_dst = base.offset_bytes(A_TILE + (b_k * BN + b_col) * 4);

        // Starts the copies of tile `k0` into the stage at byte offset `stage` as one group.
        let copy_tile = |stage: u32, k0: u32| {
            // SAFETY: the guards admit only elements inside A and B (the rest is zero-filled);
            // VEC4's conditions are the host's dispatch. The stage is not read until this group
            // is waited for and a barrier passed, nor written while it may still be read (see
            // the module doc).
            unsafe {
                for j in 0..A_COPIES {
                    let kk = a_k + a_k_step * j;
                    for i in 0..4 {
                        let dst = a_dst.offset_bytes(stage + (a_k_step * j + i) * A_LD * 4);
                        let src = a_ptr.wrapping_add((a_k_step * j + i) as usize);
                        cp_async_ca_4(dst, src, a_row_ok && k0 + kk + i < k);
                    }
                }
                for j in 0..B_COPIES {
                    let dst = b_dst.offset_bytes(stage + b_k_step * j * BN * 4);
                    let src = b_ptr.wrapping_add(j as usize * b_next_rows);
                    let row_ok = k0 + b_k + b_k_step * j < k;
                    if VEC4 {
                        cp_async_cg_16(dst, src, row_ok && col0 + b_col < n);
                    } else {
                        for i in 0..4 {
                            let ok = row_ok && col0 + b_col + i < n;
                            cp_async_ca_4(dst.offset_bytes(i * 4), src.wrapping_add(i as usize), ok);
                        }
                    }
                }
                cp_async_commit_group();
            }
            a_ptr = a_ptr.wrapping_add(BK as usize);
            b_ptr = b_ptr.wrapping_add(b_step);
        };
        let mut acc = [[0.0f32; 4]; 4];
        let compute = |stage: u32| {
            let at = base.offset_bytes(stage);
            for p in 0..BK {
                // SAFETY: inside the stage, whose copies completed before the pipeline's barrier.
                let (a_frag, b_frag) = unsafe {
                    (
                        ld_shared_v4_f32(at.offset_bytes((p * A_LD + 4 * ty) * 4)),
                        ld_shared_v4_f32(at.offset_bytes(A_TILE + (p * BN + 4 * tx) * 4)),
                    )
                };
                outer_product(&mut acc, &a_frag.0, &b_frag.0);
            }
        };
        // SAFETY: the whole block runs the pipeline; `copy_tile` commits one group per call.
        unsafe { run_pipeline::<STAGES, STAGE, BK, { STAGES - 2 }>(k, copy_tile, compute) };
        // SAFETY: C is valid for m x n with ldc; the update skips elements outside it.
        unsafe { update_c_block(&acc, row0 + 4 * ty, col0 + 4 * tx, m, n, alpha, beta, c, ldc) };
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 32 x 32 tiles, 4-byte copies: any pointer, any `ld`.
        sgemm_tiny_tile => gemm::<false>
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 32 x 32 tiles, 16-byte copies of `B` (the host
        /// launches it only when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4).
        sgemm_tiny_tile_vec4 => gemm::<true>
    }
}
