//! Step 11, the wide tile: [`double_buffered`](crate::ladder::double_buffering) on a 256 x 128 tile,
//! each thread computing 16 x 8 outputs, one block per SM.
//!
//! ncu on the H100 at n = 4096 shows what cuBLAS runs for FP32 SGEMM:
//! `sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma`, 256
//! threads, 254 registers, one block per SM (8 warps), issue slots 87% busy; `double_buffered`
//! (128 x 128, 128 registers, two blocks per SM, 16 warps) keeps them 78% busy with the same
//! FFMA count. The larger per-thread tile reads 6 fragment vectors per 128 FFMA instead of 4
//! per 64 (4.7% of the loop's instructions instead of 6.3%), and each block loads its `B`
//! tile for twice the rows of `C`; the price is half the warps per scheduler to hide latency
//! with, which the 128 independent accumulators per thread must make up for.
//!
//! The same body as `double_buffered` ([`warp_tile`](crate::ladder::warp_tile) with `R = 16`): each
//! thread loads two 4-vectors of `A` per tile (rows 128 apart) and one of `B`.
//!
//! Measured (`gemm bench`, NVIDIA H100 80GB HBM3 at 1980 MHz, same run as `double_buffered`):
//! slower at every size, 44.0 TFLOP/s at 4096 (0.86x cuBLAS) against 46.6 (0.91x), 32.2 at
//! 3072 (0.72x: 288 blocks for 132 SMs is 2.2 waves of one block each). Expected: fewer
//! non-FFMA instructions to lift issue efficiency toward cuBLAS's. Got the fewer instructions
//! (ncu at 4096: 2.33 G executed against 2.40 G, the same 2.15 G FFMA), but the stalls per
//! issued instruction moved to global-load latency: long scoreboard 0.23 (0.04 in
//! `double_buffered`), because with 255 registers in use (ptxas's cap, no spills) and only 8
//! warps per SM, loading one tile ahead through registers no longer hides the loads. cuBLAS's
//! kernel pipelines 3 stages with `cp.async` ("stage3"), which costs no registers: the step
//! this one calls for. Kept as the measured evidence for it; `auto` does not use it.

use crate::infra::launch::{KernelSpec, Module};
use crate::ladder::warp_tile::{BK, BN, THREADS, bm, smem_bytes, stage};

/// Accumulator rows per lane.
const R: usize = 16;

/// Launch configuration of [`sgemm_wide_tile`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "wide_tile",
    entry: "sgemm_wide_tile",
    vec4_entry: Some("sgemm_wide_tile_vec4"),
    summary: "256x128x8 tile, 16x8 outputs per thread, one block per SM (cuBLAS's shape)",
    block: (THREADS, 1),
    tile: (bm(R), BN),
    smem_bytes: smem_bytes(2 * stage(R)),
    min_blocks_per_sm: 1,
    splits_k: false,
    vec4_only: false,
    arch: None,
    module: Module::Ladder,
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

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` on 256 x 128 tiles, scalar global loads.
        sgemm_wide_tile => gemm::<false, R, 2>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` on 256 x 128 tiles, 16-byte global loads (the host
        /// launches it only when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4).
        sgemm_wide_tile_vec4 => gemm::<true, R, 2>
    }
}
