//! CPU step 1, naive: the textbook triple loop `i, j, p`, one dot product per element of `C`.
//!
//! The inner loop walks down a column of `B` (stride `ldb`), touching a new cache line on every
//! iteration once `B` outgrows the cache, and the dot product is a serial dependency chain the
//! compiler cannot vectorize without reassociating floating-point sums.

use super::CpuKernel;
use crate::matrix::{MatMut, MatRef};

/// Registry row.
pub const KERNEL: CpuKernel = CpuKernel {
    name: "naive",
    summary: "i-j-p triple loop, one dot product per C element",
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
        for j in 0..c.cols {
            let mut acc = 0.0f32;
            for (p, &a_ip) in a_row.iter().enumerate() {
                acc += a_ip * b.at(p, j);
            }
            let c_ij = &mut c.data[i * c.ld + j];
            *c_ij = if beta == 0.0 { alpha * acc } else { alpha * acc + beta * *c_ij };
        }
    }
}
