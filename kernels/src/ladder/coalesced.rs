//! Step 2, global-memory coalescing: the naive kernel with the roles of `threadIdx.x` and
//! `threadIdx.y` swapped.
//!
//! Consecutive threads of a warp now take consecutive **columns** of `C`. Their loads of
//! `B[p][col..col+32]` fall in one 128-byte line (one transaction instead of 32), their load of
//! `A[row][p]` is the same address for the whole warp (a broadcast), and their stores to `C`
//! are contiguous. Same arithmetic, same tile, far fewer memory transactions.
//!
//! Tile: 32x32 elements of `C` per 32x32-thread block. Edges: threads outside `C` do nothing.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Launch configuration of [`sgemm_coalesced`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "coalesced",
    entry: "sgemm_coalesced",
    vec4_entry: None,
    vec4_b: true,
    summary: "one thread per C element; lanes walk along a row (coalesced B and C)",
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
        /// `C = alpha * A * B + beta * C`, one thread per element, lanes along columns.
        sgemm_coalesced => gemm
    }

    #[inline(always)]
    unsafe fn gemm(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let (row, col) = element(&SPEC);
        if row < m && col < n {
            // SAFETY: row < m, col < n: inside A's rows, B's columns and C.
            unsafe {
                let acc = dot(k, a, lda, b, ldb, row, col);
                update_c(c.add(offset(row, col, ldc)), alpha, acc, beta);
            }
        }
    }
}
