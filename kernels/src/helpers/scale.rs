//! `C = beta * C` over an `m x n` block: the whole GEMM when `alpha == 0` or `k == 0`, where
//! BLAS semantics forbid reading `A` and `B` (a NaN there must not reach `C`). With
//! `beta == 0`, `C` is overwritten with zeros and never read.

use crate::infra::launch::KernelSpec;

/// Launch configuration of [`sgemm_scale_c`](self).
pub const SPEC: KernelSpec =
    KernelSpec::elementwise("scale_c", "sgemm_scale_c", "C = beta * C (the GEMM when alpha = 0 or k = 0)");

crate::infra::params::kernel_params! { $ scale_c_entry,
    /// [`sgemm_scale_c`](self)'s parameters: each member's `C` (see
    /// [Batches](crate::infra::params#batches)) is row-major `m x n` with `ldc`.
    ScaleParams<Out> { m: u32, n: u32, beta: f32, c: Out, ldc: u32, c_step: u64 }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{SPEC, ScaleParams, scale_c_entry};
    use crate::infra::device::*;

    /// `C = beta * C` on the `m x n` block of this block's member of the batch; `C` is not
    /// read when `beta == 0`.
    ///
    /// # Safety
    /// Each member's `c` is a device pointer to a row-major `m x n` matrix with `ldc >= n`,
    /// apart from the others; launched with [`SPEC`]'s block and grid, `gridDim.z` members.
    unsafe fn scale_c(ScaleParams { m, n, beta, c, ldc, c_step }: ScaleParams<*mut f32>) {
        let (row, col) = element(&SPEC);
        if row < m && col < n {
            // SAFETY: this member's C (the contract); row < m, col < n: inside it.
            unsafe {
                let c = member(c, c_step).add(offset(row, col, ldc));
                *c = if beta == 0.0 { 0.0 } else { beta * *c };
            }
        }
    }

    scale_c_entry! {
        /// `C = beta * C`: [`scale_c`]'s entry point.
        sgemm_scale_c => scale_c
    }
}
