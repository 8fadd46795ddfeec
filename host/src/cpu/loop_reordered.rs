//! CPU step 2, loop reorder: the same arithmetic in `i, p, j` order.
//!
//! The innermost loop now runs along a row of `B` and a row of `C`, both contiguous: every
//! cache line fetched is used whole, and the loop `C[i][..] += (alpha * A[i][p]) * B[p][..]`
//! has no dependency between iterations, so the compiler vectorizes it. `C`'s row is first
//! scaled by `beta` (zeroed, without reading, when `beta == 0`).

use super::CpuKernel;
use crate::matrix::{MatMut, MatRef};

/// Registry row.
pub const KERNEL: CpuKernel = CpuKernel {
    name: "loop_reordered",
    summary: "i-p-j loop order: contiguous, vectorizable inner loop over rows of B and C",
    threaded: false,
    detected: || true,
    any_layout: false,
    run: |alpha, a, b, beta, c, _threads| {
        gemm(alpha, a, b, beta, c);
        Ok(())
    },
};

fn gemm(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut) {
    for i in 0..c.rows {
        let a_row = a.row(i);
        let c_row = c.row_mut(i);
        if beta == 0.0 {
            c_row.fill(0.0);
        } else if beta != 1.0 {
            c_row.iter_mut().for_each(|x| *x *= beta);
        }
        for (p, &a_ip) in a_row.iter().enumerate() {
            let s = alpha * a_ip;
            for (c_ij, &b_pj) in c_row.iter_mut().zip(b.row(p)) {
                *c_ij += s * b_pj;
            }
        }
    }
}
