//! Row-major matrix views over slices, with a leading dimension, and their validation.
//!
//! Element `(i, j)` of a view lives at `data[i * ld + j]`; a view of `rows x cols` needs
//! `ld >= cols` and a slice of at least `ld * (rows - 1) + cols` elements (nothing when
//! `rows == 0` or `cols == 0`). A view does not check itself when made: [`check_gemm`] checks
//! all three operands of a call, naming the one at fault.

use crate::{Error, Result};

/// A read-only row-major `rows x cols` matrix in `data`, rows `ld` elements apart.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

/// A mutable row-major `rows x cols` matrix in `data`, rows `ld` elements apart. Only the
/// `rows x cols` block is ever written; padding between rows is left as it was.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl<'a> MatRef<'a> {
    /// A view with an explicit leading dimension.
    pub fn new(data: &'a [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld }
    }

    /// A contiguous view (`ld == cols`).
    pub fn contiguous(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols)
    }
}

impl<'a> MatMut<'a> {
    /// A view with an explicit leading dimension.
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld }
    }

    /// A contiguous view (`ld == cols`).
    pub fn contiguous(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols)
    }

    /// The same matrix, read-only.
    pub fn as_ref(&self) -> MatRef<'_> {
        MatRef::new(self.data, self.rows, self.cols, self.ld)
    }

    /// Row `i`'s `cols` elements.
    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.ld..i * self.ld + self.cols]
    }
}

impl MatRef<'_> {
    /// Row `i`'s `cols` elements.
    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.ld..i * self.ld + self.cols]
    }

    /// Element `(i, j)`.
    pub(crate) fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.ld + j]
    }
}

/// Elements a `rows x cols` matrix with leading dimension `ld` spans in its slice.
pub fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 { 0 } else { ld * (rows - 1) + cols }
}

/// Checks one view: `ld >= cols` and a slice long enough for the declared matrix.
pub(crate) fn check_view(
    matrix: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    if ld < cols.max(1) {
        return Err(Error::LeadingDimension { matrix, ld, cols });
    }
    let needed = (ld as u128) * (rows.saturating_sub(1) as u128) + cols as u128;
    let needed = if rows == 0 || cols == 0 { 0 } else { needed };
    if (len as u128) < needed {
        let needed = usize::try_from(needed).unwrap_or(usize::MAX);
        return Err(Error::SliceTooShort { matrix, rows, cols, ld, needed, len });
    }
    Ok(())
}

/// Checks that `A: m x k`, `B: k x n` and `C: m x n` chain; dimensions are `(rows, cols)`.
pub(crate) fn check_shapes(a: (usize, usize), b: (usize, usize), c: (usize, usize)) -> Result<()> {
    if a.1 != b.0 {
        return Err(Error::DimensionMismatch(format!(
            "A is {}x{} and B is {}x{}: A's columns must equal B's rows",
            a.0, a.1, b.0, b.1
        )));
    }
    if c != (a.0, b.1) {
        return Err(Error::DimensionMismatch(format!(
            "A is {}x{} and B is {}x{}, so C must be {}x{}, not {}x{}",
            a.0, a.1, b.0, b.1, a.0, b.1, c.0, c.1
        )));
    }
    Ok(())
}

/// Checks a GEMM's operands in BLAS order: the shapes first, then each operand's leading
/// dimension and slice length.
pub fn check_gemm(a: &MatRef, b: &MatRef, c: &MatRef) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.rows, b.cols), (c.rows, c.cols))?;
    check_view("A", a.data.len(), a.rows, a.cols, a.ld)?;
    check_view("B", b.data.len(), b.rows, b.cols, b.ld)?;
    check_view("C", c.data.len(), c.rows, c.cols, c.ld)
}
