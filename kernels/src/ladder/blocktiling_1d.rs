//! Step 4, 1D block tiling: each thread computes a column of `TM = 8` elements of `C`.
//!
//! In the shared-memory kernel every multiply-add needs two shared-memory loads. Here a thread
//! loads one element of the `B` tile into a register and reuses it against `TM` elements of
//! the `A` tile: `TM + 1` shared loads for `TM` multiply-adds. The block's tile grows to 64x64
//! (512 threads, 8 accumulators each) and `K` advances 8 at a time, so each block also loads
//! each element of `A` and `B` from global memory for twice as many outputs as before.
//!
//! Tile: 64x64 of `C`, `K` step 8, 512 threads, 4 KiB of shared memory. Edges: predicated
//! loads put zeros outside the matrices; stores are guarded.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block.
const BM: u32 = 64;
const BN: u32 = 64;
/// Depth of one shared-memory tile along `K`.
const BK: u32 = 8;
/// Rows of `C` per thread.
const TM: u32 = 8;

/// Launch configuration of [`sgemm_blocktiling_1d`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "blocktiling_1d",
    entry: "sgemm_blocktiling_1d",
    vec4_entry: None,
    vec4_b: true,
    summary: "each thread computes 8 rows of one column, reusing a B value from a register",
    block: (BM * BN / TM, 1),
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
    SPEC.threads() == BM * BK && SPEC.threads() == BK * BN,
    "each thread loads one element of the A tile and one of the B tile"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{BK, BM, BN, TM};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C`, 64x64 tiles, 8 outputs per thread.
        sgemm_blocktiling_1d => gemm
    }

    #[inline(always)]
    unsafe fn gemm(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        // This thread's outputs: rows row0 + t_row * TM .. + TM, column col0 + t_col.
        let (t_row, t_col) = (tid / BN, tid % BN);
        // This thread's element of each tile.
        let (a_row, a_col) = (tid / BK, tid % BK);
        let (b_row, b_col) = (tid / BN, tid % BN);

        let a_tile = dynamic_shared_f32();
        let b_tile = a_tile.wrapping_add((BM * BK) as usize);
        let mut acc = [0.0f32; TM as usize];
        let mut k0 = 0;
        while k0 < k {
            // SAFETY: the guards keep the loads inside A and B; each thread writes its own slot.
            unsafe {
                let (ar, ac) = (row0 + a_row, k0 + a_col);
                let (br, bc) = (k0 + b_row, col0 + b_col);
                *a_tile.add((a_row * BK + a_col) as usize) =
                    ld_global_nc_f32(a.wrapping_add(offset(ar, ac, lda)), ar < m && ac < k);
                *b_tile.add((b_row * BN + b_col) as usize) =
                    ld_global_nc_f32(b.wrapping_add(offset(br, bc, ldb)), br < k && bc < n);
            }
            sync_threads();
            for p in 0..BK {
                // SAFETY: inside the tiles, written before the barrier.
                let b_val = unsafe { *b_tile.add((p * BN + t_col) as usize) };
                for (i, acc) in acc.iter_mut().enumerate() {
                    let a_val = unsafe { *a_tile.add(((t_row * TM + i as u32) * BK + p) as usize) };
                    *acc = fma(a_val, b_val, *acc);
                }
            }
            sync_threads();
            k0 += BK;
        }
        let col = col0 + t_col;
        for (i, acc) in acc.iter().enumerate() {
            let row = row0 + t_row * TM + i as u32;
            if row < m && col < n {
                // SAFETY: row < m, col < n: inside C.
                unsafe { update_c(c.add(offset(row, col, ldc)), alpha, *acc, beta) };
            }
        }
    }
}
