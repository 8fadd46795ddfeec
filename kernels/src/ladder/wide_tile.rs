//! Step 11, the wide tile: [`double_buffered`](crate::ladder::double_buffering) on a 256 x 128 tile,
//! each thread computing 16 x 8 outputs, one block per SM.
//!
//! The same body as `double_buffered` ([`warp_tile`](crate::ladder::warp_tile) with `R = 16`): each
//! thread loads two 4-vectors of `A` per tile (rows 128 apart) and one of `B`.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};
use crate::ladder::warp_tile::{BK, BN, THREADS, WARPS_N, bm, smem_bytes, stage};

/// Accumulator rows per lane.
const R: usize = 16;

/// Launch configuration of [`sgemm_wide_tile`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "wide_tile",
    entry: "sgemm_wide_tile",
    vec4_entry: Some("sgemm_wide_tile_vec4"),
    vec4_b: true,
    summary: "256x128x8 tile, 16x8 outputs per thread, one block per SM (cuBLAS's shape)",
    block: (THREADS, 1),
    tile: (bm(R), BN),
    smem_bytes: smem_bytes(2 * stage(R, WARPS_N as usize), WARPS_N as usize),
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
    bm(R) * BK / 4 == 2 * THREADS && BK * BN / 4 == THREADS,
    "each thread loads two 4-vectors of A and one of B per stage"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::R;
    use crate::infra::device::*;
    use crate::ladder::double_buffering::device_code::gemm;
    use crate::ladder::warp_tile::WARPS_N;

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` on 256 x 128 tiles, scalar global loads.
        sgemm_wide_tile => gemm::<false, R, 2, { WARPS_N as usize }, 1, false, false, false>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` on 256 x 128 tiles, 16-byte global loads (the host
        /// launches it only when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4).
        sgemm_wide_tile_vec4 => gemm::<true, R, 2, { WARPS_N as usize }, 1, false, false, false>
    }
}
