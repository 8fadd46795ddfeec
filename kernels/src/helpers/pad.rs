//! `B = A` padded with zeros: copies a row-major `rows x cols` matrix into the top-left corner
//! of a `rows_pad x cols_pad` row-major buffer (leading dimension `cols_pad`) and zeroes the
//! rest. The GPU backend uses it to give a kernel that only has 16-byte copies
//! ([`tensor_core`](crate::ladder::tensor_core)) operands whose rows are a multiple of 4 floats long;
//! the zero columns of `A` and rows of `B` add nothing to the product.
//!
//! One thread per element of the destination, a warp along a row: reads and writes coalesced.

use crate::infra::launch::KernelSpec;

/// Launch configuration of [`sgemm_pad`](self); its grid covers the destination.
pub const SPEC: KernelSpec = KernelSpec::elementwise(
    "pad",
    "sgemm_pad",
    "B = A in a larger zero-padded buffer (operands of 16-byte-only kernels)",
);

crate::infra::params::kernel_params! { $ pad_entry,
    /// [`sgemm_pad`](self)'s parameters: `a` is row-major `rows x cols` with `lda`, `b`
    /// row-major `rows_pad x cols_pad`, contiguous.
    PadParams<In, Out> { rows: u32, cols: u32, a: In, lda: u32, rows_pad: u32, cols_pad: u32, b: Out }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{PadParams, SPEC, pad_entry};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    /// `b[r][c] = a[r][c]` for `r < rows`, `c < cols`, and `0` elsewhere in `b`'s
    /// `rows_pad x cols_pad`.
    ///
    /// # Safety
    /// `a` is a row-major `rows x cols` matrix with `lda >= cols`, `b` a row-major
    /// `rows_pad x cols_pad` buffer (`rows_pad >= rows`, `cols_pad >= cols`) apart from `a`;
    /// launched with [`SPEC`]'s block over a `rows_pad x cols_pad` grid.
    unsafe fn pad(PadParams { rows, cols, a, lda, rows_pad, cols_pad, b }: PadParams<*const f32, *mut f32>) {
        let (row, col) = element(&SPEC);
        if row < rows_pad && col < cols_pad {
            // SAFETY: the load is guarded to A's rows x cols; row < rows_pad, col < cols_pad is
            // inside B.
            unsafe {
                let x = ld_global_nc_f32(a.wrapping_add(offset(row, col, lda)), row < rows && col < cols);
                *b.add(offset(row, col, cols_pad)) = x;
            }
        }
    }

    pad_entry! {
        /// [`pad`]'s entry point.
        sgemm_pad => pad
    }
}
