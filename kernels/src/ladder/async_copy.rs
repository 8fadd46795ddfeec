//! Step 9, the second flagship technique: `cp.async` copies straight from global to shared
//! memory, in a multi-stage pipeline (seed 000, end of section 6).
//!
//! What it adds over [`double_buffering`](crate::ladder::double_buffering): the next tiles no longer
//! pass through registers. A thread starts the copies of a tile with `cp.async` and forgets
//! them until a `cp.async.wait_group` just before the tile is used, so
//! - no registers hold staged data across the main loop, which leaves the whole budget of 128
//!   (two blocks per SM) to accumulators, fragments and addresses;
//! - several tiles can be in flight: with [`STAGES`] stages the loads of tile `t + STAGES - 1`
//!   start while tile `t` is computed, hiding global-memory latency behind `STAGES - 1` tiles
//!   of arithmetic instead of one.
//!
//! `A` is still transposed on the way in (the fragment loads need it): each thread copies its
//! 4 consecutive `k` of one row as four 4-byte `cp.async.ca` to a column of the `A_tile[k][row]`
//! array, whose leading dimension of 132 keeps those 4-byte stores conflict-free. `B` is one
//! 16-byte `cp.async.cg` per thread (the `vec4` entry) or four 4-byte copies. Out-of-range
//! elements are zero-filled by the copy itself (source size 0), so edges need no other code.
//!
//! One barrier per tile: at the top of tile `t`, after waiting for its copies, the barrier
//! both publishes tile `t` and proves that every warp is done with tile `t - 1`, whose stage
//! the copies of tile `t + STAGES - 1` then overwrite.
//!
//! Tile: 128 x 128 of `C`, `K` step 8, 256 threads (8 x 8 outputs each, warp-tiled as in
//! [`warp_tile`](crate::ladder::warp_tile)), `C` written through shared memory.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};
use crate::ladder::warp_tile::{BK, BM, BN, STAGE, THREADS, WARPS_N, smem_bytes};

/// Tiles in flight or being computed.
pub const STAGES: u32 = 4;

/// Launch configuration of [`sgemm_async_copy`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "async_copy",
    entry: "sgemm_async_copy",
    vec4_entry: Some("sgemm_async_copy_vec4"),
    vec4_b: true,
    summary: "flagship 128x128x8: cp.async global-to-shared copies, multi-stage pipeline",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: smem_bytes(STAGES * STAGE, WARPS_N as usize),
    min_blocks_per_sm: 2,
    members_per_block: 1,
    k_slices: None,
    padding: Padding::Never,
    arch: None,
    module: Module::Ladder,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

const _: () = assert!(
    BM * BK / 4 == THREADS && BK * BN / 4 == THREADS && STAGES >= 2,
    "each thread copies one 4-vector of each tile per stage"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::STAGES;
    use crate::infra::device::*;
    use crate::infra::ptx::{SharedAddr, cp_async_ca_4, cp_async_cg_16, cp_async_commit_group};
    use crate::ladder::warp_tile::{A_LD, A_TILE, BK, BM, BN, STAGE, WARPS_N, WarpTile};

    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        let tile = WarpTile::<8, { WARPS_N as usize }>::of(tid);

        // Copies: A row a_row, columns a_k..a_k + 4; B row b_k, columns b_col..b_col + 4.
        let (a_row, a_k) = (tid / (BK / 4), tid % (BK / 4) * 4);
        let (b_k, b_col) = (tid / (BN / 4), tid % (BN / 4) * 4);
        let a_row_ok = row0 + a_row < m;
        let mut a_ptr = a.wrapping_add(offset(row0 + a_row, a_k, lda));
        let mut b_ptr = b.wrapping_add(offset(b_k, col0 + b_col, ldb));
        let b_step = BK as usize * ldb as usize;

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let a_dst = base.offset_bytes((a_k * A_LD + a_row) * 4);
        let b_dst = base.offset_bytes(A_TILE + (b_k * BN + b_col) * 4);

        // Starts the copies of tile `k0` into the stage at byte offset `stage` as one group.
        let copy_tile = |stage: u32, k0: u32| {
            // SAFETY: the guards admit only elements inside A and B (the rest is zero-filled);
            // VEC4's conditions are the host's dispatch (ldb, n multiples of 4, b 16-byte
            // aligned). The stage is not read until this group is waited for and a barrier
            // passed (see the module doc).
            unsafe {
                for i in 0..4 {
                    let dst = a_dst.offset_bytes(stage + i * A_LD * 4);
                    cp_async_ca_4(dst, a_ptr.wrapping_add(i as usize), a_row_ok && k0 + a_k + i < k);
                }
                let b_row_ok = k0 + b_k < k;
                if VEC4 {
                    cp_async_cg_16(b_dst.offset_bytes(stage), b_ptr, b_row_ok && col0 + b_col < n);
                } else {
                    for i in 0..4 {
                        let ok = b_row_ok && col0 + b_col + i < n;
                        cp_async_ca_4(b_dst.offset_bytes(stage + i * 4), b_ptr.wrapping_add(i as usize), ok);
                    }
                }
                cp_async_commit_group();
            }
            a_ptr = a_ptr.wrapping_add(BK as usize);
            b_ptr = b_ptr.wrapping_add(b_step);
        };
        // The fragments of `k = p` of the stage at `at`.
        // SAFETY: a stage whose copies completed before the last barrier.
        let fragments = |at: SharedAddr, p: u32| unsafe { tile.fragments(at, p, BN) };
        let mut acc = [[0.0f32; 8]; 8];
        let compute = |stage: u32| {
            let at = base.offset_bytes(stage);
            let mut frag = fragments(at, 0);
            for p in 0..BK {
                // Register double buffering: the fragments of p + 1 load during p's products.
                let next = if p + 1 < BK { fragments(at, p + 1) } else { frag };
                outer_product(&mut acc, &frag.0, &frag.1);
                frag = next;
            }
        };
        // The ring (module docs): one barrier per tile, the copies of the tile STAGES - 1 ahead
        // started after it, and the copies still in flight drained at the end.
        // SAFETY: the whole block runs the pipeline; `copy_tile` commits one group per call.
        unsafe { run_pipeline::<STAGES, STAGE, BK, { STAGES - 2 }>(k, copy_tile, compute) };
        // Every warp is done with the stages before they become C's staging.
        sync_threads();
        // SAFETY: the staging area is this block's shared memory (SPEC.smem_bytes covers it)
        // and no longer read as tiles; C is valid for m x n with ldc.
        unsafe { tile.store_c(&acc, base, (row0, col0), (m, n), alpha, beta, c, ldc) };
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 4-byte copies: any pointer, any `ld`.
        sgemm_async_copy => gemm::<false>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 16-byte copies of `B`; the host launches it only
        /// when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n` multiples of 4.
        sgemm_async_copy_vec4 => gemm::<true>
    }
}
