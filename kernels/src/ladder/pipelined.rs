//! Step 12, the pipelined wide tile: 128 x 256 x 8 tiles fed by a 4-stage `cp.async` pipeline
//! in which every copy is 16 bytes, 8 x 16 outputs per thread, one block per SM.
//!
//! What it changes after [`wide_tile`](crate::ladder::wide_tile), whose larger per-thread tile cut the
//! non-FFMA instructions but stalled on global loads (prefetching one tile ahead through
//! registers, at the 255-register cap):
//! - The tiles come in through `cp.async` ([`async_copy`](crate::ladder::async_copy)'s technique), three
//!   tiles ahead of the one being computed, and cost no registers on the way.
//! - No copy transposes: `A` stays `[row][k]` in shared memory, so each thread copies one
//!   16-byte piece of `A` and two of `B` per tile (`async_copy` needed four 4-byte copies to
//!   transpose `A`, which loaded the memory pipeline the fragment loads need). The fragment
//!   loads read `A` four `k` at a time instead: one `ld.shared.v4` gives a row's 4 values for
//!   the next 4 steps, 8 of them cover the thread's 8 rows for those 4 steps.
//! - The tile is 128 x 256 (cuBLAS's 256 x 128 turned around: the 16 columns per thread come
//!   from `B`, whose `[k][col]` rows are read as vectors directly). Per `k` a thread issues 4
//!   `ld.shared.v4` of `B` and, per 4 `k`, 8 of `A`: 6 per 128 FFMA, as cuBLAS.
//!
//! Layout: 8 warps, 2 down x 4 across, each 64 x 64; lane `(lane_row, lane_col)` of the 8 x 4
//! lane grid owns rows `lane_row + 8 i` (`i` in `0..8`) and columns
//! `lane_col * 4 + {0, 16, 32, 48} + 0..4` of its warp's region. A warp's `A` reads hit 8
//! consecutive rows (disjoint banks with the padded row stride [`A_LD`]) and its `B` reads 4
//! adjacent vectors: no bank conflicts.
//! `C` is updated in place, 4 consecutive columns per lane.
//!
//! The main loop double-buffers every fragment: the `A` rows of steps 4..8 load during steps
//! 0..4, and before a tile's last step the next tile is waited for and published (one barrier
//! per tile) and its first `A` rows and `B` columns load during the last products.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block, and the `K` depth of a tile.
const BM: u32 = 128;
const BN: u32 = 256;
const BK: u32 = 8;
/// Threads per block.
const THREADS: u32 = 256;
/// Tiles in flight or being computed.
const STAGES: u32 = 4;
/// Row stride of the `A` tile in shared memory, in floats: with 4 floats of padding the 8
/// consecutive rows a warp's `A` reads hit start 12 banks apart, 8 disjoint groups of 4
/// banks (with 8 floats they would fall on 2 groups: 4-way conflicts).
const A_LD: u32 = BK + 4;
/// Bytes of a stage's `A` tile (`[BM][A_LD]`), which its `B` tile (`[BK][BN]`) follows.
const A_BYTES: u32 = BM * A_LD * 4;
/// Bytes of one stage.
const STAGE: u32 = A_BYTES + BK * BN * 4;

/// Launch configuration of [`sgemm_pipelined`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "pipelined",
    entry: "sgemm_pipelined",
    vec4_entry: Some("sgemm_pipelined_vec4"),
    vec4_b: true,
    summary: "128x256x8 tile, 4-stage cp.async pipeline of 16-byte copies, 8x16 per thread",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: STAGES * STAGE,
    min_blocks_per_sm: 1,
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
    BM * BK / 4 == THREADS && BK * BN / 4 == 2 * THREADS && STAGES >= 2,
    "each thread copies one 4-vector of A and two of B per stage"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{A_BYTES, A_LD, BK, BM, BN, STAGE, STAGES};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        SharedAddr, cp_async_ca_4, cp_async_cg_16, cp_async_commit_group, cp_async_wait_group,
        ld_shared_v4_f32,
    };

    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        let (warp, lane) = (tid / 32, tid % 32);
        let (lane_row, lane_col) = (lane / 4, lane % 4);
        // The thread's first row and column in the block tile; its rows are t_row + 8 i for
        // i in 0..8, its columns t_col + 16 g + 0..4 for g in 0..4.
        let t_row = warp / 4 * 64 + lane_row;
        let t_col = warp % 4 * 64 + lane_col * 4;

        // Copies: A row a_row, k a_k..a_k + 4; B rows b_k and b_k + 4, columns b_col..b_col + 4.
        let (a_row, a_k) = (tid / 2, tid % 2 * 4);
        let (b_k, b_col) = (tid / (BN / 4), tid % (BN / 4) * 4);
        let a_row_ok = row0 + a_row < m;
        let b_col_ok = col0 + b_col < n;
        let mut a_ptr = a.wrapping_add(offset(row0 + a_row, a_k, lda));
        let mut b_ptr = b.wrapping_add(offset(b_k, col0 + b_col, ldb));
        let b_half = 4 * ldb as usize;
        let b_step = BK as usize * ldb as usize;

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let a_dst = base.offset_bytes((a_row * A_LD + a_k) * 4);
        let b_dst = base.offset_bytes(A_BYTES + (b_k * BN + b_col) * 4);

        // Starts the copies of tile `k0` into the stage at byte offset `stage`, as one group.
        let mut copy_tile = |stage: u32, k0: u32| {
            // SAFETY: the guards admit only elements inside A and B (the rest is zero-filled);
            // VEC4's conditions are the host's dispatch (lda, ldb, k, n multiples of 4, a and
            // b 16-byte aligned), so a 4-vector is inside or outside as a whole. The stage is
            // not read until this group is waited for and a barrier passed.
            unsafe {
                if VEC4 {
                    cp_async_cg_16(a_dst.offset_bytes(stage), a_ptr, a_row_ok && k0 + a_k < k);
                    for h in 0..2 {
                        let dst = b_dst.offset_bytes(stage + h * 4 * BN * 4);
                        let ok = k0 + b_k + 4 * h < k && b_col_ok;
                        cp_async_cg_16(dst, b_ptr.wrapping_add(h as usize * b_half), ok);
                    }
                } else {
                    for i in 0..4 {
                        let ok = a_row_ok && k0 + a_k + i < k;
                        cp_async_ca_4(a_dst.offset_bytes(stage + i * 4), a_ptr.wrapping_add(i as usize), ok);
                    }
                    for h in 0..2 {
                        for i in 0..4 {
                            let dst = b_dst.offset_bytes(stage + (h * 4 * BN + i) * 4);
                            let src = b_ptr.wrapping_add(h as usize * b_half + i as usize);
                            cp_async_ca_4(dst, src, k0 + b_k + 4 * h < k && col0 + b_col + i < n);
                        }
                    }
                }
                cp_async_commit_group();
            }
            a_ptr = a_ptr.wrapping_add(BK as usize);
            b_ptr = b_ptr.wrapping_add(b_step);
        };

        // The thread's 8 rows of A for steps kk..kk + 4 of the stage at `at`: a[i][p].
        let a_fragment = |at: SharedAddr, kk: u32| -> [[f32; 4]; 8] {
            core::array::from_fn(|i| {
                let row = t_row + 8 * i as u32;
                // SAFETY: inside the stage's A tile, 16-byte aligned (kk is 0 or 4), written
                // before the last barrier.
                unsafe { ld_shared_v4_f32(at.offset_bytes((row * A_LD + kk) * 4)).0 }
            })
        };
        // The thread's 16 columns of B for step p of the stage at `at`.
        let b_fragment = |at: SharedAddr, p: u32| -> [f32; 16] {
            let mut out = [0.0f32; 16];
            for g in 0..4 {
                let col = t_col + g * 16;
                // SAFETY: inside the stage's B tile, 16-byte aligned, written before the last
                // barrier.
                let v = unsafe { ld_shared_v4_f32(at.offset_bytes(A_BYTES + (p * BN + col) * 4)) };
                for q in 0..4 {
                    out[g as usize * 4 + q] = v.0[q];
                }
            }
            out
        };
        let next_stage = next_stage::<STAGES, STAGE>;

        // Prologue: tiles 0..STAGES - 1 in flight, then tile 0 published and its first fragments loaded.
        let mut write_stage = start_pipeline::<STAGES, STAGE, BK>(&mut copy_tile);
        // Tile t's group is complete when at most STAGES - 2 newer ones are pending; the
        // barrier publishes it and proves every warp is done with the stage copied next.
        // SAFETY: waiting has no preconditions.
        unsafe { cp_async_wait_group::<{ STAGES - 2 }>() };
        sync_threads();
        let mut acc = [[0.0f32; 16]; 8];
        let mut read_stage = 0;
        let mut k_next = (STAGES - 1) * BK;
        let mut a_lo = a_fragment(base, 0);
        let mut b_frag = b_fragment(base, 0);
        for _ in 0..k.div_ceil(BK) {
            // The stage of the previous tile: every warp passed the barrier after its last read.
            copy_tile(write_stage, k_next);
            write_stage = next_stage(write_stage);
            k_next += BK;
            let (at, next) = (base.offset_bytes(read_stage), next_stage(read_stage));

            // Steps 0..4 with the rows loaded last time; steps 4..8's rows load meanwhile.
            let a_hi = a_fragment(at, 4);
            for p in 0..4 {
                let b_next = b_fragment(at, p + 1);
                let a_col: [f32; 8] = core::array::from_fn(|i| a_lo[i][p as usize]);
                outer_product(&mut acc, &a_col, &b_frag);
                b_frag = b_next;
            }
            // Steps 4..8; before the last one, the next tile is waited for and published, and
            // its first rows and columns load during the last products.
            for p in 0..4 {
                let b_next = if p < 3 {
                    b_fragment(at, 4 + p + 1)
                } else {
                    // SAFETY: as above.
                    unsafe { cp_async_wait_group::<{ STAGES - 2 }>() };
                    sync_threads();
                    let at_next = base.offset_bytes(next);
                    a_lo = a_fragment(at_next, 0);
                    b_fragment(at_next, 0)
                };
                let a_col: [f32; 8] = core::array::from_fn(|i| a_hi[i][p as usize]);
                outer_product(&mut acc, &a_col, &b_frag);
                b_frag = b_next;
            }
            read_stage = next;
        }
        // Drain the (zero-filled) copies still in flight.
        // SAFETY: as above.
        unsafe { cp_async_wait_group::<0>() };

        for (i, acc_row) in acc.iter().enumerate() {
            let row = row0 + t_row + 8 * i as u32;
            for (j, &x) in acc_row.iter().enumerate() {
                let col = col0 + t_col + (j as u32 / 4) * 16 + j as u32 % 4;
                if row < m && col < n {
                    // SAFETY: row < m, col < n: inside C.
                    unsafe { update_c(c.add(offset(row, col, ldc)), alpha, x, beta) };
                }
            }
        }
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 4-byte copies: any pointer, any `ld`.
        sgemm_pipelined => gemm::<false>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 16-byte copies; the host launches it only when
        /// `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n` multiples of 4.
        sgemm_pipelined_vec4 => gemm::<true>
    }
}
