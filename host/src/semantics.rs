//! The rules of a GEMM call that do not depend on where it runs, written once for both
//! backends: which work a call needs (the reference BLAS's quick returns), and the swap that
//! turns a column-major `C` into the row-major `C` every kernel writes.

use crate::matrix::Layout;

/// What `C = alpha * op(A) * op(B) + beta * C` needs once its operands are checked, by the
/// reference BLAS's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// Nothing: `C` is empty (`m == 0` or `n == 0`), or the product is zero (`alpha == 0` or
    /// `k == 0`) and `beta == 1`. No operand is read or written.
    Nothing,
    /// `C = beta * C`: the product is zero (`alpha == 0` or `k == 0`). `A` and `B` are not
    /// read; with `beta == 0` `C` is overwritten with zeros without being read.
    ScaleC,
    /// The product.
    Product,
}

/// The [`Work`] of an `m x n x k` GEMM with these scalars.
pub(crate) fn work(m: usize, n: usize, k: usize, alpha: f32, beta: f32) -> Work {
    let zero_product = alpha == 0.0 || k == 0;
    if m == 0 || n == 0 || (zero_product && beta == 1.0) {
        Work::Nothing
    } else if zero_product {
        Work::ScaleC
    } else {
        Work::Product
    }
}

/// A matrix view (host or device) whose transpose is a view of the same storage.
pub(crate) trait View: Sized {
    /// How the viewed storage is laid out.
    fn layout(&self) -> Layout;
    /// The transpose: the same storage read with the other layout.
    fn t(self) -> Self;
}

/// `(m, n)` of the row-major `C` the kernels compute for a `rows x cols` `C` in `layout`: a
/// column-major `C` is the row-major `C^T` ([`with_row_major_c`]).
pub(crate) fn row_major_shape(layout: Layout, rows: usize, cols: usize) -> (usize, usize) {
    match layout {
        Layout::RowMajor => (rows, cols),
        Layout::ColMajor => (cols, rows),
    }
}

/// The same GEMM with a row-major `C`: a column-major `C` is the row-major `C^T`, and
/// `C^T = op(B)^T op(A)^T` (seed 000, section 3), so the operands swap and transpose, as views.
/// Returns `(op(A), op(B), C)` of the row-major problem.
pub(crate) fn with_row_major_c<R: View, W: View>(a: R, b: R, c: W) -> (R, R, W) {
    match c.layout() {
        Layout::RowMajor => (a, b, c),
        Layout::ColMajor => (b.t(), a.t(), c.t()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_returns_follow_the_reference_blas() {
        assert_eq!(work(0, 5, 5, 1.0, 2.0), Work::Nothing);
        assert_eq!(work(5, 0, 5, 1.0, 2.0), Work::Nothing);
        assert_eq!(work(5, 5, 0, 1.0, 1.0), Work::Nothing);
        assert_eq!(work(5, 5, 5, 0.0, 1.0), Work::Nothing);
        assert_eq!(work(5, 5, 0, 1.0, 0.0), Work::ScaleC);
        assert_eq!(work(5, 5, 5, 0.0, f32::NAN), Work::ScaleC);
        assert_eq!(work(5, 5, 5, f32::NAN, 1.0), Work::Product);
        assert_eq!(work(1, 1, 1, 1.0, 1.0), Work::Product);
    }
}
