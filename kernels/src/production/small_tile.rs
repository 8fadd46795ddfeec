//! Small tiles: the [`double_buffered`](crate::ladder::double_buffering) kernel on a 64 x 64 tile
//! of `C` with 128 threads, for products whose `C` is too small for 128 x 128 tiles.
//!
//! A tile kernel computes whole tiles: an `m x n` product costs `ceil(m / BM) BM x ceil(n / BN)
//! BN` outputs' worth of work, and covers `C` with `ceil(m / BM) ceil(n / BN)` blocks. With 128 x
//! 128 tiles a 64 x 64 `C` (an attention head's product) is a quarter of one tile's work for one
//! block, and a 64-column `C` half of each of its tiles. On 64 x 64 tiles the same products
//! waste nothing and give four times the blocks, which is what a batch of small members or a
//! small single product needs to fill the GPU.
//!
//! The layout is the [`warp_tile`](crate::ladder::warp_tile) one with `R = 4` rows per lane and
//! one warp across (`WN = 1`): four warps down, each owning 16 x 64 of the tile, each lane a
//! 4 x 8 block of accumulators. Per `k` a lane reads one 4-vector of `A` and two of `B` for 32
//! FMAs (the 128 x 128 kernel reads two and two for 64), so this kernel issues more shared
//! loads per FMA; it is the better choice only where the larger tile would compute padding or
//! leave SMs idle. Each thread loads one 4-vector of `A` and one of `B` per `K` step of 8.
//!
//! A warp whose 16 rows of the tile all lie past the last row of `C` only loads and stores its
//! share of the tiles (`SKIP_IDLE` in the shared body): a `C` of 17 to 48 rows, or the last
//! row of tiles of any `C`, costs the FMAs of the warps that have rows.
//!
//! Like [`split_k`](crate::production::split_k) it takes the K slices of a split-K launch as a
//! batch, so the host splits `K` for it by the same rule when its tiles do not fill the GPU.
//!
//! Its variants [`TN_SPEC`], [`NT_SPEC`] and [`TT_SPEC`] read `A`, `B` or both column-major
//! (`A^T` or `B^T` stored row-major, as in attention's `Q K^T` and its gradients) as they lie,
//! instead of after a transposed copy that reads and writes the whole operand once more than
//! the product reads it: only the global loads change, the tiles in shared memory are the same
//! (the shared body's `A_COLUMNS` and `B_COLUMNS`).

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};
use crate::ladder::warp_tile::{BK, bm, bn, smem_bytes, stage, threads};

/// Accumulator rows per lane.
const R: usize = 4;
/// Warps across the tile.
const WN: usize = 1;

/// Launch configuration of [`sgemm_small_tile`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "small_tile",
    entry: "sgemm_small_tile",
    vec4_entry: Some("sgemm_small_tile_vec4"),
    vec4_b: true,
    summary: "double_buffered on 64x64 tiles (128 threads, 4x8 outputs each) for small products",
    block: (threads(WN), 1),
    tile: (bm(R), bn(WN)),
    smem_bytes: smem_bytes(2 * stage(R, WN), WN),
    min_blocks_per_sm: 4,
    members_per_block: 1,
    k_slices: Some(bm(R)),
    padding: Padding::Never,
    arch: None,
    module: Module::Production,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

/// [`SPEC`] on a column-major `A` ([`KernelSpec::reads_a_transposed`]).
pub const TN_SPEC: KernelSpec = SPEC.reading_columns(("small_tile_tn", "sgemm_small_tile_tn"), true, false);
/// [`SPEC`] on a column-major `B` ([`KernelSpec::reads_b_transposed`]).
pub const NT_SPEC: KernelSpec = SPEC.reading_columns(("small_tile_nt", "sgemm_small_tile_nt"), false, true);
/// [`SPEC`] on a column-major `A` and `B`.
pub const TT_SPEC: KernelSpec = SPEC.reading_columns(("small_tile_tt", "sgemm_small_tile_tt"), true, true);

const _: () = assert!(
    bm(R) * BK / 4 == threads(WN) && BK * bn(WN) / 4 == threads(WN),
    "each thread loads one 4-vector of each tile per stage"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{R, WN};
    use crate::infra::device::*;
    use crate::ladder::double_buffering::device_code::gemm;

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 64 x 64 tiles, scalar global loads.
        sgemm_small_tile => gemm::<false, R, 1, WN, 2, true, false, false>
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` on 64 x 64 tiles, 16-byte global loads (the host
        /// launches it only when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4).
        sgemm_small_tile_vec4 => gemm::<true, R, 1, WN, 2, true, false, false>
    }

    gemm_entry! { production:
        /// [`sgemm_small_tile_vec4`] on a column-major `A` (`lda`, `m`, `ldb`, `n` multiples of 4).
        sgemm_small_tile_tn => gemm::<true, R, 1, WN, 2, true, true, false>
    }

    gemm_entry! { production:
        /// [`sgemm_small_tile_vec4`] on a column-major `B` (`lda`, `k`, `ldb` multiples of 4).
        sgemm_small_tile_nt => gemm::<true, R, 1, WN, 2, true, false, true>
    }

    gemm_entry! { production:
        /// [`sgemm_small_tile_vec4`] on a column-major `A` and `B` (`lda`, `m`, `ldb`, `k`
        /// multiples of 4).
        sgemm_small_tile_tt => gemm::<true, R, 1, WN, 2, true, true, true>
    }
}
