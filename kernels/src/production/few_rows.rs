//! Products whose `C` has a few rows (`m <= FEW`, `n` and `k` any): `C = alpha * A * B + beta
//! * C` for `A` of `m x k`. A tile kernel computes them in a few rows of each 128 x 128 tile,
//! padding the rest; here every element of `B` is read once, by one thread, which multiplies it
//! into all `m` sums of its column at once.
//!
//! A block is 16 warps of 32 threads and owns 32 columns of `C`: lane `tx` computes column
//! `32 * blockIdx.x + tx`, warp `ty` taking the rows `p = ty, ty + 16, ...` of `B` (each warp
//! reads 32 consecutive values of a row) times `A[0..m][p]`. Each thread sums with one `f32`
//! FMA per product, in order, eight rows of `B` loaded ahead; the 16 partial sums of an output
//! are then added in a fixed order through shared memory, so the result does not vary from run
//! to run. `C` is not read when `beta == 0`. (Matrix-vector products have a kernel of their
//! own, [`vector`](crate::production::vector), with twice the threads per output.)

use crate::infra::launch::{KernelSpec, Shapes};

/// The most rows of `C` the kernel computes.
pub const FEW: usize = 8;
/// Threads of a warp: the columns of a block.
const LANES: u32 = 32;
/// Warps of a block: the threads of each output.
const WARPS: u32 = 16;

/// Launch configuration of [`sgemm_few_rows`](self): a block covers 32 columns of `C` and
/// all of its at most 8 rows. (512 threads: the kernel's registers fit a block of them.)
pub const SPEC: KernelSpec = KernelSpec {
    name: "few_rows",
    entry: "sgemm_few_rows",
    summary: "products with at most 8 rows of C, 16 threads per output",
    block: (LANES, WARPS),
    tile: (FEW as u32, LANES),
    smem_bytes: FEW as u32 * WARPS * (LANES + 1) * 4,
    shapes: Shapes::FewRows(FEW),
    // Scalar loads, no launch bounds, no K split, every architecture: as the vector kernel.
    ..crate::production::vector::SPEC
};

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{FEW, LANES, SPEC, WARPS};
    use crate::infra::device::*;

    /// Rows of `B` loaded ahead of the FMAs, in flight together.
    const AHEAD: u32 = 8;

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `m <= FEW`, launched
    /// with [`SPEC`].
    unsafe fn few_rows(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let (tx, ty) = (thread_x(), thread_y());
        let col = block_x() * LANES + tx;
        let rows = (m as usize).min(FEW);
        let partials = dynamic_shared_f32();
        // Partial `(row i, warp, lane)`.
        let at = |i: usize, warp: u32, lane: u32| {
            (i * WARPS as usize + warp as usize) * (LANES + 1) as usize + lane as usize
        };
        let mut sums = [0.0f32; FEW];
        // SAFETY: every read is guarded to A's m x k and B's k x n (p < k, col < n, i < m);
        // each partial is written by one thread and read after the barrier.
        unsafe {
            if col < n {
                // Loops over all FEW rows with a uniform guard, so that they unroll and the
                // sums stay in registers.
                let mut p = ty;
                while p + (AHEAD - 1) * WARPS < k {
                    let bs: [f32; AHEAD as usize] =
                        core::array::from_fn(|s| *b.add(offset(p + s as u32 * WARPS, col, ldb)));
                    let avs: [[f32; AHEAD as usize]; FEW] = core::array::from_fn(|i| {
                        core::array::from_fn(|s| {
                            if i < rows { *a.add(offset(i as u32, p + s as u32 * WARPS, lda)) } else { 0.0 }
                        })
                    });
                    for (sum, avs) in sums.iter_mut().zip(&avs) {
                        for (&av, &bv) in avs.iter().zip(&bs) {
                            *sum = fma(av, bv, *sum);
                        }
                    }
                    p += AHEAD * WARPS;
                }
                while p < k {
                    let bv = *b.add(offset(p, col, ldb));
                    for (i, sum) in sums.iter_mut().enumerate() {
                        if i < rows {
                            *sum = fma(*a.add(offset(i as u32, p, lda)), bv, *sum);
                        }
                    }
                    p += WARPS;
                }
            }
            for (i, &sum) in sums.iter().enumerate().take(rows) {
                *partials.add(at(i, ty, tx)) = sum;
            }
            sync_threads();
            if ty == 0 && col < n {
                for i in 0..rows {
                    let total = (0..WARPS).fold(0.0f32, |t, warp| t + *partials.add(at(i, warp, tx)));
                    update_c(c.add(offset(i as u32, col, ldc)), alpha, total, beta);
                }
            }
        }
    }

    gemm_entry! { production:
        /// Products with a few rows of `C`: [`few_rows`]'s entry point.
        sgemm_few_rows => few_rows
    }
}
