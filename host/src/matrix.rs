//! Matrix views over slices (row- or column-major, with a leading dimension), transposes as
//! views, and the argument checks every GEMM call goes through.
//!
//! A view of `rows x cols` stores element `(i, j)` at `data[i * ld + j]` when row-major and at
//! `data[i + j * ld]` when column-major. Its *inner* extent is the contiguous one (`cols` for
//! row-major, `rows` for column-major), its *outer* extent the other; it needs
//! `ld >= max(1, inner)` and a slice of at least `ld * (outer - 1) + inner` elements (nothing
//! when either extent is 0). [`MatRef::t`] is the transpose as a view: the same slice read
//! with the other layout, so `op(A) = A^T` costs nothing to express.
//!
//! A view does not check itself when made: [`check_gemm`] checks all three operands of a call
//! in the order of the reference BLAS `sgemm`, naming the argument at fault and its position
//! in `sgemm`'s argument list.

use crate::{Error, Result};

/// How a matrix is laid out in its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
// A word wide: views pass by value through every call, and the copies of a one-byte field
// (with the padding after it, in odd-sized pieces) stalled the loads that read them back.
#[repr(u64)]
pub enum Layout {
    /// Rows are contiguous, `ld` elements apart (C, NumPy, ndarray's default).
    RowMajor,
    /// Columns are contiguous, `ld` elements apart (Fortran BLAS, LAPACK, cuBLAS).
    ColMajor,
}

impl Layout {
    /// The other layout: how the transpose of a matrix reads the same slice.
    pub fn flip(self) -> Self {
        match self {
            Self::RowMajor => Self::ColMajor,
            Self::ColMajor => Self::RowMajor,
        }
    }

    /// `(inner, outer)` of a `rows x cols` matrix in this layout: the contiguous extent (the
    /// minimum leading dimension, when not 0), then the other.
    pub fn extents(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            Self::RowMajor => (cols, rows),
            Self::ColMajor => (rows, cols),
        }
    }
}

/// The shape `X` is stored in when `op(X)` is `rows x cols`: `cols x rows` when `op(X) = X^T`.
pub fn stored_shape(trans: bool, rows: usize, cols: usize) -> (usize, usize) {
    if trans { (cols, rows) } else { (rows, cols) }
}

impl std::str::FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "row" | "row-major" => Ok(Self::RowMajor),
            "col" | "col-major" | "column-major" => Ok(Self::ColMajor),
            _ => Err(format!("unknown layout `{s}` (expected row or col)")),
        }
    }
}

/// A read-only `rows x cols` matrix in `data`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The storage: element `(i, j)` at `i * ld + j` (row-major) or `i + j * ld` (column-major).
    pub data: &'a [f32],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance between consecutive rows (row-major) or columns (column-major).
    pub ld: usize,
    /// How the matrix is laid out in `data`.
    pub layout: Layout,
}

/// A mutable `rows x cols` matrix in `data`. Only the `rows x cols` block is ever written;
/// padding between rows (or columns) is left as it was.
#[derive(Debug)]
pub struct MatMut<'a> {
    /// The storage: element `(i, j)` at `i * ld + j` (row-major) or `i + j * ld` (column-major).
    pub data: &'a mut [f32],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance between consecutive rows (row-major) or columns (column-major).
    pub ld: usize,
    /// How the matrix is laid out in `data`.
    pub layout: Layout,
}

/// Where element `(i, j)` lives, for a layout and leading dimension.
pub(crate) fn index(layout: Layout, ld: usize, i: usize, j: usize) -> usize {
    match layout {
        Layout::RowMajor => i * ld + j,
        Layout::ColMajor => i + j * ld,
    }
}

impl<'a> MatRef<'a> {
    /// A row-major view with leading dimension `ld` (`ld >= cols`).
    pub fn new(data: &'a [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld, layout: Layout::RowMajor }
    }

    /// A contiguous row-major view (`ld == cols`).
    pub fn contiguous(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols)
    }

    /// A column-major view with leading dimension `ld` (`ld >= rows`), as BLAS stores matrices.
    pub fn col_major(data: &'a [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld, layout: Layout::ColMajor }
    }

    /// The transpose, `cols x rows`, as a view of the same slice (nothing is copied).
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, layout: self.layout.flip(), ..self }
    }

    /// `op(X)`, `rows x cols`, as BLAS describes an operand: `X` stored in `layout` with
    /// leading dimension `ld`, as [`stored_shape`]`(trans, rows, cols)`, and read transposed
    /// when `trans`.
    pub fn op(data: &'a [f32], layout: Layout, trans: bool, rows: usize, cols: usize, ld: usize) -> Self {
        let (rows, cols) = stored_shape(trans, rows, cols);
        let stored = Self { data, rows, cols, ld, layout };
        if trans { stored.t() } else { stored }
    }

    /// [`op`](Self::op) with `X` stored contiguously (its leading dimension the least allowed).
    pub fn op_contiguous(data: &'a [f32], layout: Layout, trans: bool, rows: usize, cols: usize) -> Self {
        let (stored_rows, stored_cols) = stored_shape(trans, rows, cols);
        let ld = layout.extents(stored_rows, stored_cols).0.max(1);
        Self::op(data, layout, trans, rows, cols, ld)
    }

    /// The distances in `data` between consecutive rows and between consecutive columns.
    pub fn strides(&self) -> (usize, usize) {
        match self.layout {
            Layout::RowMajor => (self.ld, 1),
            Layout::ColMajor => (1, self.ld),
        }
    }

    /// Element `(i, j)`.
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.data[index(self.layout, self.ld, i, j)]
    }

    /// Row `i`'s `cols` elements, contiguous: row-major views only.
    pub(crate) fn row(&self, i: usize) -> &'a [f32] {
        debug_assert_eq!(self.layout, Layout::RowMajor);
        &self.data[i * self.ld..i * self.ld + self.cols]
    }

    /// Column `j`'s `rows` elements, contiguous: column-major views only.
    pub(crate) fn col(&self, j: usize) -> &'a [f32] {
        debug_assert_eq!(self.layout, Layout::ColMajor);
        &self.data[j * self.ld..j * self.ld + self.rows]
    }

    /// A row-major copy (contiguous) of this matrix.
    pub fn to_row_major(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        self.copy_row_major(&mut out, self.cols);
        out
    }

    /// Writes this matrix row-major into `out`, its rows `ld` apart (`ld >= cols`; the values
    /// between one row's end and the next row's start are left as they were): a row-major one
    /// row by row, a column-major one in blocks of columns transposed in registers
    /// ([`columns_to_rows`](crate::cpu::pack::columns_to_rows)).
    pub(crate) fn copy_row_major(&self, out: &mut [f32], ld: usize) {
        match self.layout {
            Layout::RowMajor => {
                (0..self.rows).for_each(|i| out[i * ld..][..self.cols].copy_from_slice(self.row(i)))
            }
            Layout::ColMajor => crate::cpu::pack::columns_to_rows(self, out, ld),
        }
    }
}

impl<'a> MatMut<'a> {
    /// A row-major view with leading dimension `ld` (`ld >= cols`).
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld, layout: Layout::RowMajor }
    }

    /// A contiguous row-major view (`ld == cols`).
    pub fn contiguous(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols)
    }

    /// A column-major view with leading dimension `ld` (`ld >= rows`).
    pub fn col_major(data: &'a mut [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld, layout: Layout::ColMajor }
    }

    /// The transpose, `cols x rows`, as a view of the same slice.
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, layout: self.layout.flip(), ..self }
    }

    /// The same matrix, read-only.
    pub fn as_ref(&self) -> MatRef<'_> {
        MatRef { data: self.data, rows: self.rows, cols: self.cols, ld: self.ld, layout: self.layout }
    }

    /// The same matrix, reborrowed (to pass on without giving the view away).
    pub fn rb_mut(&mut self) -> MatMut<'_> {
        MatMut { data: self.data, rows: self.rows, cols: self.cols, ld: self.ld, layout: self.layout }
    }

    /// Row `i`'s `cols` elements: row-major views only.
    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [f32] {
        debug_assert_eq!(self.layout, Layout::RowMajor);
        &mut self.data[i * self.ld..i * self.ld + self.cols]
    }

    /// Element `(i, j)`, mutably.
    pub(crate) fn at_mut(&mut self, i: usize, j: usize) -> &mut f32 {
        &mut self.data[index(self.layout, self.ld, i, j)]
    }
}

/// Elements a `rows x cols` matrix with leading dimension `ld` spans in its slice.
pub fn span(layout: Layout, rows: usize, cols: usize, ld: usize) -> usize {
    let (inner, outer) = layout.extents(rows, cols);
    if inner == 0 || outer == 0 { 0 } else { ld * (outer - 1) + inner }
}

/// One operand of `sgemm` as BLAS names it: the matrix, its array and its leading dimension,
/// with their positions in the reference `sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb,
/// beta, c, ldc)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    pub matrix: &'static str,
    pub array_position: u8,
    pub ld_name: &'static str,
    pub ld_position: u8,
}

pub(crate) const A: Operand = Operand { matrix: "A", array_position: 7, ld_name: "lda", ld_position: 8 };
pub(crate) const B: Operand = Operand { matrix: "B", array_position: 9, ld_name: "ldb", ld_position: 10 };
pub(crate) const C: Operand = Operand { matrix: "C", array_position: 12, ld_name: "ldc", ld_position: 13 };
/// A matrix outside a GEMM call (a device allocation, an upload, a download).
pub(crate) const MATRIX: Operand =
    Operand { matrix: "the matrix", array_position: 0, ld_name: "ld", ld_position: 0 };

/// Checks a leading dimension: `ld >= max(1, inner)` (BLAS's rule, also for empty matrices).
pub(crate) fn check_ld(op: Operand, layout: Layout, rows: usize, cols: usize, ld: usize) -> Result<()> {
    let (inner, _) = layout.extents(rows, cols);
    if ld < inner.max(1) {
        return Err(Error::LeadingDimension {
            position: op.ld_position,
            name: op.ld_name,
            ld,
            min: inner.max(1),
        });
    }
    Ok(())
}

/// Checks that a slice of `len` elements holds the declared matrix.
pub(crate) fn check_len(
    op: Operand,
    len: usize,
    layout: Layout,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    let (inner, outer) = layout.extents(rows, cols);
    let needed = (ld as u128) * (outer.saturating_sub(1) as u128) + inner as u128;
    let needed = if inner == 0 || outer == 0 { 0 } else { needed };
    if (len as u128) < needed {
        let needed = usize::try_from(needed).unwrap_or(usize::MAX);
        return Err(Error::SliceTooShort { position: op.array_position, matrix: op.matrix, needed, len });
    }
    Ok(())
}

/// Checks that `op(A): m x k`, `op(B): k x n` and `C: m x n` chain; dimensions are
/// `(rows, cols)`.
pub(crate) fn check_shapes(a: (usize, usize), b: (usize, usize), c: (usize, usize)) -> Result<()> {
    if a.1 != b.0 {
        return Err(Error::DimensionMismatch(format!(
            "op(A) is {}x{} and op(B) is {}x{}: op(A)'s columns must equal op(B)'s rows",
            a.0, a.1, b.0, b.1
        )));
    }
    if c != (a.0, b.1) {
        return Err(Error::DimensionMismatch(format!(
            "op(A) is {}x{} and op(B) is {}x{}, so C must be {}x{}, not {}x{}",
            a.0, a.1, b.0, b.1, a.0, b.1, c.0, c.1
        )));
    }
    Ok(())
}

/// Checks a GEMM's operands in the reference BLAS order: the shapes, then `lda`, `ldb`, `ldc`,
/// then that each slice holds its matrix.
pub fn check_gemm(a: &MatRef, b: &MatRef, c: &MatRef) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.rows, b.cols), (c.rows, c.cols))?;
    // Operand by operand rather than over an array of them, which the compiler built by
    // copying: a small product's call takes tens of nanoseconds.
    check_ld(A, a.layout, a.rows, a.cols, a.ld)?;
    check_ld(B, b.layout, b.rows, b.cols, b.ld)?;
    check_ld(C, c.layout, c.rows, c.cols, c.ld)?;
    check_len(A, a.data.len(), a.layout, a.rows, a.cols, a.ld)?;
    check_len(B, b.data.len(), b.layout, b.rows, b.cols, b.ld)?;
    check_len(C, c.data.len(), c.layout, c.rows, c.cols, c.ld)
}

impl crate::semantics::View for MatRef<'_> {
    fn layout(&self) -> Layout {
        self.layout
    }

    fn t(self) -> Self {
        MatRef::t(self)
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.ld)
    }

    fn described_as(self, layout: Layout, ld: usize) -> Self {
        Self { layout, ld, ..self }
    }
}

impl crate::semantics::View for MatMut<'_> {
    fn layout(&self) -> Layout {
        self.layout
    }

    fn t(self) -> Self {
        MatMut::t(self)
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.ld)
    }

    fn described_as(self, layout: Layout, ld: usize) -> Self {
        Self { layout, ld, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transpose_view_reads_the_same_elements() {
        let data: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let a = MatRef::new(&data, 3, 3, 4); // 3x3 with one padding column
        let t = a.t();
        assert_eq!((t.rows, t.cols, t.layout), (3, 3, Layout::ColMajor));
        for i in 0..3 {
            for j in 0..3 {
                assert_eq!(a.at(i, j), t.at(j, i));
            }
        }
        assert_eq!(MatRef::col_major(&data, 4, 3, 4).to_row_major()[..3], [0.0, 4.0, 8.0]);
    }

    #[test]
    fn spans_follow_the_layout() {
        assert_eq!(span(Layout::RowMajor, 3, 2, 5), 12);
        assert_eq!(span(Layout::ColMajor, 3, 2, 5), 8);
        assert_eq!(span(Layout::ColMajor, 0, 2, 5), 0);
    }
}
