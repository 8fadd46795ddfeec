//! Step 1, naive: one thread per element of `C`, each computing a full dot product straight
//! from global memory.
//!
//! Within a warp (32 consecutive `threadIdx.x`), consecutive threads take consecutive **rows**
//! of `C`. So a warp's 32 loads of `A` hit 32 different rows (32 separate memory transactions
//! instead of one) and its stores to `C` are strided by `ldc`: every access of `A` and `C` is
//! uncoalesced. This is the baseline the next step fixes by swapping two indices.
//!
//! Tile: 32x32 elements of `C` per 32x32-thread block. Edges: threads outside `C` do nothing.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Launch configuration of [`sgemm_naive`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "naive",
    entry: "sgemm_naive",
    vec4_entry: None,
    vec4_b: true,
    summary: "one thread per C element; lanes walk down a column (uncoalesced)",
    block: (32, 32),
    tile: (32, 32),
    smem_bytes: 0,
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

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::SPEC;
    use crate::infra::device::*;

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C`, one thread per element, lanes along rows.
        sgemm_naive => gemm
    }

    #[inline(always)]
    unsafe fn gemm(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let row = block_y() * SPEC.tile.0 + thread_x();
        let col = block_x() * SPEC.tile.1 + thread_y();
        if row < m && col < n {
            // SAFETY: row < m, col < n: inside A's rows, B's columns and C.
            unsafe {
                let acc = dot(k, a, lda, b, ldb, row, col);
                update_c(c.add(offset(row, col, ldc)), alpha, acc, beta);
            }
        }
    }
}
