//! Step 3, shared-memory tiling: the block stages a 32x32 tile of `A` and a 32x32 tile of `B`
//! in shared memory, then every thread reads its 32 products from there.
//!
//! In the coalesced kernel each element of `A` and `B` is fetched from global memory (or L1/L2)
//! by 32 different threads of the block. Here each block loads each element of its `A` and `B`
//! panels exactly once per tile (coalesced: a warp loads one 128-byte row of each tile), and
//! the 32 reuses go to shared memory, which is an order of magnitude closer than L2.
//!
//! Tile: 32x32 of `C` per 32x32-thread block, `K` walked 32 at a time; 8 KiB of shared memory.
//! Edges: elements of `A` and `B` outside the matrices are loaded as zero by a predicated
//! `ld.global.nc` ([`ld_global_nc_f32`](crate::infra::ptx::ld_global_nc_f32)), so any `M`, `N`, `K`
//! works with the same loop; threads outside `C` skip the store.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Depth of the `K` step: how many columns of `A` (rows of `B`) one shared-memory tile holds.
pub const TILE_K: u32 = 32;

/// Launch configuration of [`sgemm_smem_tiled`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "smem_tiled",
    entry: "sgemm_smem_tiled",
    vec4_entry: None,
    vec4_b: true,
    summary: "32x32 tiles of A and B staged in shared memory, each loaded once per block",
    block: (32, 32),
    tile: (32, 32),
    smem_bytes: (32 * TILE_K + TILE_K * 32) * 4,
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
    SPEC.block.0 == SPEC.tile.1 && SPEC.block.1 == SPEC.tile.0 && TILE_K == SPEC.block.0,
    "each thread loads one element of each tile and computes one element of C"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{SPEC, TILE_K};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 32x32 tiles of `A` and `B` in shared memory.
        sgemm_smem_tiled => gemm
    }

    #[inline(always)]
    unsafe fn gemm(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        const BM: u32 = SPEC.tile.0;
        const BN: u32 = SPEC.tile.1;
        let (tx, ty) = (thread_x(), thread_y());
        let row = block_y() * BM + ty;
        let col = block_x() * BN + tx;

        // Shared memory: A tile (BM x TILE_K, row-major), then B tile (TILE_K x BN, row-major).
        let a_tile = dynamic_shared_f32();
        let b_tile = a_tile.wrapping_add((BM * TILE_K) as usize);
        let mine = (ty * 32 + tx) as usize;

        let mut acc = 0.0;
        let mut k0 = 0;
        while k0 < k {
            // Thread (tx, ty) stages A[row][k0 + tx] and B[k0 + ty][col]; zeros past the edges.
            // SAFETY: each guard keeps the load inside its matrix; each thread writes its own
            // slot of each tile.
            unsafe {
                let a_ptr = a.wrapping_add(offset(row, k0 + tx, lda));
                let b_ptr = b.wrapping_add(offset(k0 + ty, col, ldb));
                *a_tile.add(mine) = ld_global_nc_f32(a_ptr, row < m && k0 + tx < k);
                *b_tile.add(mine) = ld_global_nc_f32(b_ptr, k0 + ty < k && col < n);
            }
            sync_threads();
            for p in 0..TILE_K {
                // SAFETY: inside the two tiles, written before the barrier above.
                unsafe {
                    acc = fma(
                        *a_tile.add((ty * TILE_K + p) as usize),
                        *b_tile.add((p * BN + tx) as usize),
                        acc,
                    );
                }
            }
            // Nobody overwrites a tile until everyone is done reading it.
            sync_threads();
            k0 += TILE_K;
        }
        if row < m && col < n {
            // SAFETY: row < m, col < n: inside C.
            unsafe { update_c(c.add(offset(row, col, ldc)), alpha, acc, beta) };
        }
    }
}
