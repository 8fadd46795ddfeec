//! Step 5, 2D block tiling: each thread computes an 8x8 block of `C` as outer products.
//!
//! The 1D kernel reuses each `B` value across 8 rows but still loads an `A` value from shared
//! memory for every multiply-add. Here each thread, for each `p`,
//! loads 8 values of the `A` tile's column `p` and 8 of the `B` tile's row `p` into registers
//! and forms their 8x8 outer product: 16 shared loads for 64 multiply-adds. The block's tile
//! grows to 128x128 with 256 threads, so each global element now serves 128 outputs.
//!
//! Tile: 128x128 of `C`, `K` step 8, 256 threads (8x8 outputs each), 8 KiB of shared memory.
//! Edges: predicated loads put zeros outside the matrices; stores are guarded.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block.
const BM: u32 = 128;
const BN: u32 = 128;
/// Depth of one shared-memory tile along `K`.
const BK: u32 = 8;
/// Rows and columns of `C` per thread.
const TM: u32 = 8;
const TN: u32 = 8;

/// Launch configuration of [`sgemm_blocktiling_2d`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "blocktiling_2d",
    entry: "sgemm_blocktiling_2d",
    vec4_entry: None,
    vec4_b: true,
    summary: "each thread computes an 8x8 block of C as outer products of register fragments",
    block: (BM * BN / (TM * TN), 1),
    tile: (BM, BN),
    smem_bytes: (BM * BK + BK * BN) * 4,
    min_blocks_per_sm: 0,
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
    (BM * BK).is_multiple_of(SPEC.threads()) && BK * BN == BM * BK,
    "the A and B tiles split evenly over the threads"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{BK, BM, BN, SPEC, TM, TN};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    /// Elements of each tile every thread loads per `K` step.
    const LOADS: u32 = BM * BK / SPEC.threads();

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C`, 128x128 tiles, 8x8 outputs per thread.
        sgemm_blocktiling_2d => gemm
    }

    #[inline(always)]
    unsafe fn gemm(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        // This thread's 8x8 block of C starts at (t_row * TM, t_col * TN) within the tile.
        let (t_row, t_col) = (tid / (BN / TN), tid % (BN / TN));

        let a_tile = dynamic_shared_f32();
        let b_tile = a_tile.wrapping_add((BM * BK) as usize);
        let mut acc = [[0.0f32; TN as usize]; TM as usize];
        let (mut a_frag, mut b_frag) = ([0.0f32; TM as usize], [0.0f32; TN as usize]);
        let mut k0 = 0;
        while k0 < k {
            for l in 0..LOADS {
                let idx = tid + l * SPEC.threads();
                // SAFETY: the guards keep the loads inside A and B; each slot has one writer.
                unsafe {
                    let (ar, ac) = (idx / BK, idx % BK);
                    let (gr, gc) = (row0 + ar, k0 + ac);
                    *a_tile.add(idx as usize) =
                        ld_global_nc_f32(a.wrapping_add(offset(gr, gc, lda)), gr < m && gc < k);
                    let (br, bc) = (idx / BN, idx % BN);
                    let (gr, gc) = (k0 + br, col0 + bc);
                    *b_tile.add(idx as usize) =
                        ld_global_nc_f32(b.wrapping_add(offset(gr, gc, ldb)), gr < k && gc < n);
                }
            }
            sync_threads();
            for p in 0..BK {
                // SAFETY: inside the tiles, written before the barrier.
                unsafe {
                    for (i, x) in a_frag.iter_mut().enumerate() {
                        *x = *a_tile.add(((t_row * TM + i as u32) * BK + p) as usize);
                    }
                    for (j, x) in b_frag.iter_mut().enumerate() {
                        *x = *b_tile.add((p * BN + t_col * TN + j as u32) as usize);
                    }
                }
                outer_product(&mut acc, &a_frag, &b_frag);
            }
            sync_threads();
            k0 += BK;
        }
        let (row, col) = (row0 + t_row * TM, col0 + t_col * TN);
        // SAFETY: C is valid for m x n with ldc (the kernel's contract).
        unsafe { update_c_block(&acc, row, col, m, n, alpha, beta, c, ldc) };
    }
}
