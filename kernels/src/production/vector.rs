//! Matrix-vector products, and products with a few rows or columns, through the GEMM
//! interface: `C = alpha * A * B + beta * C` where `C` has at most [`FEW`] columns (`A` times a
//! few vectors) or at most `FEW` rows (a few vectors times `B`). A tile kernel computes such a
//! product in a few rows or columns of each 128 x 128 tile, so most of its work is padding;
//! this kernel gives every thread of the grid a share of the reads, which is what bounds such
//! a product (each element of the large operand is used a few times at most).
//!
//! A block is 16 warps of 32 threads and owns 16 rows or 32 columns of `C`:
//! - few columns (`n <= FEW`): warp `ty` computes row `16 * blockIdx.y + ty`, its lanes taking
//!   the elements `p = lane, lane + 32, ...` of the row of `A` (coalesced) times `B[p][0..n]`;
//! - few rows (`m <= FEW`): lane `tx` computes column `32 * blockIdx.x + tx`, warp `ty` taking
//!   the rows `p = ty, ty + 16, ...` of `B` (each warp reads 32 consecutive values of a row)
//!   times `A[0..m][p]`.
//!
//! Each thread sums its share with one `f32` FMA per product, in order, loads ahead of the
//! FMAs; the 32 partial sums of an output are then added in a fixed order through shared
//! memory, so the result does not vary from run to run. `C` is not read when `beta == 0`.

use crate::infra::launch::{KernelSpec, Module};

/// Threads of a warp: columns of a block, and threads per output of a row.
const LANES: u32 = 32;
/// Warps of a block: rows of a block, and threads per output of a column.
const WARPS: u32 = 16;

/// The most rows (or columns) of `C` the kernel computes at once: a product with more of both
/// belongs to a tile kernel.
pub const FEW: usize = 8;

/// Launch configuration of [`sgemm_vector`](self): `tile` covers 16 rows or 32 columns of `C`,
/// and the other side has at most 8, so `grid(m, n)` is right for both. (512 threads: the
/// kernel's 72 registers a thread fit a block of them.)
pub const SPEC: KernelSpec = KernelSpec {
    name: "vector",
    entry: "sgemm_vector",
    vec4_entry: None,
    summary: "products with at most 8 rows or columns of C, 32 threads per output",
    block: (LANES, WARPS),
    tile: (WARPS, LANES),
    smem_bytes: FEW as u32 * WARPS * (LANES + 1) * 4,
    min_blocks_per_sm: 0,
    splits_k: false,
    vec4_only: false,
    arch: None,
    module: Module::Production,
};

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{FEW, LANES, SPEC, WARPS};
    use crate::infra::device::*;

    /// Loads ahead of the FMAs: the loads of a group are independent, so they are in flight
    /// together.
    const AHEAD: u32 = 4;

    /// `sums[j] = x(p0) y(j, p0) + x(p1) y(j, p1) + ...` for `j < count` over
    /// `p = first, first + STRIDE, ... < k`, one FMA per product in order; `x(p)` and `y(j, p)`
    /// give the addresses of the factors (`x` is shared by the `count` sums).
    ///
    /// # Safety
    /// Every address `x(p)`, `y(j, p)` for `p < k`, `j < count` is readable; `count <= FEW`.
    #[inline(always)]
    unsafe fn strided_dots<const STRIDE: u32>(
        first: u32,
        k: u32,
        count: usize,
        x: impl Fn(u32) -> *const f32,
        y: impl Fn(usize, u32) -> *const f32,
    ) -> [f32; FEW] {
        let mut sums = [0.0f32; FEW];
        let mut p = first;
        unsafe {
            while p + (AHEAD - 1) * STRIDE < k {
                let xs: [f32; AHEAD as usize] = core::array::from_fn(|i| *x(p + i as u32 * STRIDE));
                let ys: [[f32; AHEAD as usize]; FEW] = core::array::from_fn(|j| {
                    core::array::from_fn(|i| if j < count { *y(j, p + i as u32 * STRIDE) } else { 0.0 })
                });
                for (sum, ys) in sums.iter_mut().zip(&ys) {
                    for i in 0..AHEAD as usize {
                        *sum = fma(xs[i], ys[i], *sum);
                    }
                }
                p += AHEAD * STRIDE;
            }
            while p < k {
                let xp = *x(p);
                for (j, sum) in sums.iter_mut().enumerate().take(count) {
                    *sum = fma(xp, *y(j, p), *sum);
                }
                p += STRIDE;
            }
        }
        sums
    }

    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for `m <= FEW` or
    /// `n <= FEW`, launched with [`SPEC`].
    unsafe fn vector(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let (tx, ty) = (thread_x(), thread_y());
        let partials = dynamic_shared_f32();
        // Partial `(output j, warp, lane)` of the block's outputs.
        let at = |j: usize, warp: u32, lane: u32| {
            (j * WARPS as usize + warp as usize) * (LANES + 1) as usize + lane as usize
        };
        // SAFETY: every read is guarded to A's m x k and B's k x n; the shared array holds
        // FEW x WARPS x (LANES + 1) partials, each written by one thread and read after the
        // barrier.
        unsafe {
            if n as usize <= FEW && n <= m {
                // Few columns: row `row` of C, its n values.
                let row = block_y() * WARPS + ty;
                let count = n as usize;
                let sums = if row < m {
                    strided_dots::<LANES>(
                        tx,
                        k,
                        count,
                        |p| a.add(offset(row, p, lda)),
                        |j, p| b.add(offset(p, j as u32, ldb)),
                    )
                } else {
                    [0.0; FEW]
                };
                for (j, &sum) in sums.iter().enumerate().take(count) {
                    *partials.add(at(j, ty, tx)) = sum;
                }
                sync_threads();
                if tx == 0 && row < m {
                    for j in 0..count {
                        let total = (0..LANES).fold(0.0f32, |t, lane| t + *partials.add(at(j, ty, lane)));
                        update_c(c.add(offset(row, j as u32, ldc)), alpha, total, beta);
                    }
                }
            } else {
                // Few rows: column `col` of C, its m values.
                let col = block_x() * LANES + tx;
                let count = m as usize;
                let sums = if col < n {
                    strided_dots::<WARPS>(
                        ty,
                        k,
                        count,
                        |p| b.add(offset(p, col, ldb)),
                        |i, p| a.add(offset(i as u32, p, lda)),
                    )
                } else {
                    [0.0; FEW]
                };
                for (i, &sum) in sums.iter().enumerate().take(count) {
                    *partials.add(at(i, ty, tx)) = sum;
                }
                sync_threads();
                if ty == 0 && col < n {
                    for i in 0..count {
                        let total = (0..WARPS).fold(0.0f32, |t, warp| t + *partials.add(at(i, warp, tx)));
                        update_c(c.add(offset(i as u32, col, ldc)), alpha, total, beta);
                    }
                }
            }
        }
    }

    gemm_entry! { production:
        /// Products with few rows or columns: [`vector`]'s entry point.
        sgemm_vector => vector
    }
}
