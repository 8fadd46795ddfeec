//! Products with a shallow `K` (rank-`k` updates): `C` streamed once, with no tiles in shared
//! memory.
//!
//! With `k` of a few columns, a GEMM is the write of `C` (and its read when `beta != 0`): a
//! tile kernel's copies of `A` and `B` into shared memory, its pipeline's prologue and its
//! epilogue cost more than the products they prepare. Here each warp computes [`ROWS`] rows by
//! [`BN`] columns of `C` straight from global memory: at each step `p` along `K`, every lane
//! loads its [`COLS`] values of row `p` of `B` (32 consecutive floats per load across the warp)
//! and the warp's [`ROWS`] values of column `p` of `A` (one address for the whole warp), and
//! adds their products with `f32` FMAs, in order, from zero (so the results are those of the
//! strict policy, whichever policy chose the kernel).
//! Each of `C`'s stores is then 32 consecutive floats of a row, whatever `ldc`.
//!
//! The kernel is correct for any `k`; the host chooses it for `k` up to a few columns, where
//! the tile kernels are slower.

use crate::infra::launch::KernelSpec;

/// Rows of `C` per warp, and columns per lane: each step along `K` loads `ROWS + COLS` values
/// for `ROWS x COLS` multiply-adds.
pub const ROWS: u32 = 4;
pub const COLS: u32 = 4;
/// Columns of `C` per block (a warp's), and warps per block, stacked along `M`.
pub const BN: u32 = 32 * COLS;
const WARPS: u32 = 4;

/// Launch configuration of [`sgemm_rank_k`](self): an elementwise kernel's, each warp covering
/// `ROWS x BN` outputs.
pub const SPEC: KernelSpec = KernelSpec {
    block: (32, WARPS),
    tile: (WARPS * ROWS, BN),
    ..KernelSpec::elementwise(
        "rank_k",
        "sgemm_rank_k",
        "shallow K (rank-k updates): C streamed once, 4 x 4 outputs a lane, no shared memory",
    )
};

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{BN, COLS, ROWS, WARPS};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    /// `C = alpha * A * B + beta * C` over this warp's `ROWS x BN` part of `C`: lane `l`'s
    /// outputs are rows `row0 + r` and columns `col0 + l + 32 q`.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)).
    #[inline(always)]
    unsafe fn rank_k(args: GemmArgs) {
        let GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc } = args;
        let row0 = (block_y() * WARPS + thread_y()) * ROWS;
        let col0 = block_x() * BN + thread_x();
        let rows: [bool; ROWS as usize] = core::array::from_fn(|r| row0 + (r as u32) < m);
        let cols: [bool; COLS as usize] = core::array::from_fn(|q| col0 + 32 * (q as u32) < n);
        let mut acc = [[0.0f32; COLS as usize]; ROWS as usize];
        for p in 0..k {
            // SAFETY: each load is guarded by its row of A or column of B lying inside; p < k.
            let (x, y) = unsafe {
                (
                    core::array::from_fn::<f32, { ROWS as usize }, _>(|r| {
                        ld_global_nc_f32(a.wrapping_add(offset(row0 + r as u32, p, lda)), rows[r])
                    }),
                    core::array::from_fn::<f32, { COLS as usize }, _>(|q| {
                        ld_global_nc_f32(b.wrapping_add(offset(p, col0 + 32 * q as u32, ldb)), cols[q])
                    }),
                )
            };
            for (sums, &x) in acc.iter_mut().zip(&x) {
                for (sum, &y) in sums.iter_mut().zip(&y) {
                    *sum = fma(x, y, *sum);
                }
            }
        }
        // Output e is row `e / COLS`, column `e % COLS` of the lane's: all 16 reads of C before
        // the first write (`read_c`).
        const OUTPUTS: usize = (ROWS * COLS) as usize;
        let (r, q) = (|e: usize| e / COLS as usize, |e: usize| e % COLS as usize);
        let x: [[f32; 1]; OUTPUTS] = core::array::from_fn(|e| [acc[r(e)][q(e)]]);
        // SAFETY: only outputs inside C (their row and column checked), each one lane's.
        unsafe {
            update_c_runs::<1, false, OUTPUTS>(
                |e| c.wrapping_add(offset(row0 + r(e) as u32, col0 + 32 * q(e) as u32, ldc)),
                |e| rows[r(e)] && cols[q(e)],
                alpha,
                &x,
                beta,
            )
        };
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` for one batch member per `blockIdx.z`, `C` streamed
        /// once: for a shallow `K`.
        sgemm_rank_k => rank_k
    }
}
