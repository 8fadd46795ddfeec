//! The rules of a GEMM call that do not depend on where it runs, written once for both
//! backends: which work a call needs (the reference BLAS's quick returns), the swap that
//! turns a column-major `C` into the row-major `C` every kernel writes, and the layout a
//! matrix-vector product's vectors are read in (a vector reads the same in either layout, so the
//! product can be turned so that its matrix is read as it lies).

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
    /// `(rows, cols, ld)`.
    fn dims(&self) -> (usize, usize, usize);
    /// The same `rows x cols` matrix described in `layout` with leading dimension `ld`, the
    /// storage untouched: called only by [`relaid`], where that reads the same elements.
    fn described_as(self, layout: Layout, ld: usize) -> Self;
}

/// Whether a `rows x cols` matrix stored in `layout` with leading dimension `ld` reads the same
/// elements in the other layout: one row or one column whose elements lie next to each other
/// (a row of a row-major matrix, a column of a column-major one, or either with `ld == 1`).
fn either_layout(layout: Layout, (rows, cols, ld): (usize, usize, usize)) -> bool {
    let (line, lines) = layout.extents(rows, cols);
    lines <= 1 || (line == 1 && ld == 1)
}

/// `x` described in `layout` (its leading dimension the least that layout allows) where it
/// reads the same elements there ([`either_layout`]), else `x` as it is.
pub(crate) fn relaid<V: View>(x: V, layout: Layout) -> V {
    let dims = x.dims();
    if x.layout() == layout || !either_layout(x.layout(), dims) {
        return x;
    }
    let (rows, cols, _) = dims;
    x.described_as(layout, layout.extents(rows, cols).0.max(1))
}

/// The layouts of `op(A)` and `op(B)` (`a`, `b`) in the row-major problem of a `C` in layout `c`
/// ([`with_row_major_c`]): as they are, or for a column-major `C` those of `op(B)^T` and
/// `op(A)^T`.
pub(crate) fn row_major_layouts(c: Layout, a: Layout, b: Layout) -> (Layout, Layout) {
    match c {
        Layout::RowMajor => (a, b),
        Layout::ColMajor => (b.flip(), a.flip()),
    }
}

/// The layout to describe `c` in for the product `c = op(A) op(B)` (`a`, `b`: `op(A)`,
/// `op(B)`): its own, unless it is one row or one column of a matrix-vector product (the
/// matrix at least 2 x 2) whose matrix the row-major problem ([`with_row_major_c`]) would read
/// column-major, and `c` reads the same in the other layout ([`either_layout`]). In the other
/// layout the row-major problem is the transposed one, whose matrix is read as it lies.
pub(crate) fn vector_c_layout<R: View, W: View>(a: &R, b: &R, c: &W) -> Layout {
    let (layout, dims) = (c.layout(), c.dims());
    // The row-major problem's m x n and its matrix's layout there.
    let (m, n) = row_major_shape(layout, dims.0, dims.1);
    let (first, second) = row_major_layouts(layout, a.layout(), b.layout());
    let k = a.dims().1;
    let matrix = match (m, n) {
        (m, 1) if m > 1 && k > 1 => first,
        (1, n) if n > 1 && k > 1 => second,
        _ => return layout,
    };
    if matrix == Layout::ColMajor && either_layout(layout, dims) { layout.flip() } else { layout }
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

    use crate::matrix::MatRef;

    #[test]
    fn vectors_are_relaid_only_where_they_read_the_same_elements() {
        let data = [0.0f32; 64];
        let col = |rows, cols, ld| MatRef::col_major(&data, rows, cols, ld);
        // A row of a row-major matrix, a column of a column-major one, either with ld 1.
        let x = relaid(MatRef::new(&data, 1, 7, 9), Layout::ColMajor);
        assert_eq!((x.layout, x.rows, x.cols, x.ld), (Layout::ColMajor, 1, 7, 1));
        let x = relaid(col(7, 1, 9), Layout::RowMajor);
        assert_eq!((x.layout, x.rows, x.cols, x.ld), (Layout::RowMajor, 7, 1, 1));
        let x = relaid(col(1, 7, 1), Layout::RowMajor);
        assert_eq!((x.layout, x.ld), (Layout::RowMajor, 7));
        for (i, j) in [(0, 0), (0, 5)] {
            let (before, after) = (col(1, 7, 1), relaid(col(1, 7, 1), Layout::RowMajor));
            assert_eq!(
                crate::matrix::index(before.layout, before.ld, i, j),
                crate::matrix::index(after.layout, after.ld, i, j)
            );
        }
        // A row 9 apart, a column of a row-major matrix with rows 9 apart, a matrix: unchanged.
        assert_eq!(relaid(col(1, 7, 9), Layout::RowMajor).layout, Layout::ColMajor);
        assert_eq!(relaid(MatRef::new(&data, 7, 1, 9), Layout::ColMajor).layout, Layout::RowMajor);
        assert_eq!(relaid(MatRef::new(&data, 3, 3, 3), Layout::ColMajor).layout, Layout::RowMajor);
    }

    #[test]
    fn a_matrix_vector_product_is_turned_so_that_its_matrix_is_read_as_it_lies() {
        let (data, out) = ([0.0f32; 64], [0.0f32; 64]);
        let (m, k) = (6, 5);
        // C = op(A) x, op(A) = A^T: the transposed problem reads A row-major.
        let a_t = MatRef::new(&data, k, m, m).t();
        let x = MatRef::new(&data, k, 1, 1);
        let c = MatRef::new(&out, m, 1, 1);
        assert_eq!(vector_c_layout(&a_t, &x, &c), Layout::ColMajor);
        // A row-major A: as it is.
        let a = MatRef::new(&data, m, k, k);
        assert_eq!(vector_c_layout(&a, &x, &c), Layout::RowMajor);
        // A column of C with rows 3 apart cannot be described column-major.
        assert_eq!(vector_c_layout(&a_t, &x, &MatRef::new(&out, m, 1, 3)), Layout::RowMajor);
        // y = x^T op(B), op(B) = B^T (m == 1).
        let x_row = MatRef::new(&data, 1, k, k);
        let b_t = MatRef::new(&data, m, k, k).t();
        let c_row = MatRef::new(&out, 1, m, m);
        assert_eq!(vector_c_layout(&x_row, &b_t, &c_row), Layout::ColMajor);
        // A column-major C of one column over a row-major A: its row-major problem is the row
        // C^T = x^T A^T, whose A^T is column-major: turned back (C described row-major).
        let c_col = MatRef::col_major(&out, m, 1, m);
        assert_eq!(vector_c_layout(&a, &x, &c_col), Layout::RowMajor);
        // 1 x 1, and k == 1: no matrix to turn for.
        assert_eq!(
            vector_c_layout(&MatRef::new(&data, 1, k, k), &x, &MatRef::new(&out, 1, 1, 1)),
            Layout::RowMajor
        );
        assert_eq!(
            vector_c_layout(&MatRef::new(&data, 1, m, 1).t(), &MatRef::new(&data, 1, 1, 1), &c),
            Layout::RowMajor
        );
    }

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
