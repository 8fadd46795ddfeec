//! `ndarray` views in, view out (feature `ndarray`): where Rust users keep their matrices.
//!
//! A view in standard (row-major) or Fortran (column-major) order goes to the GEMM as it is,
//! without a copy; so does a transposed view (`a.t()` of a standard array is Fortran-ordered).
//! Any other view (a submatrix with padding between rows, a stride other than 1, negative
//! strides) is copied first: such a view's slice would overlap memory that other views may
//! borrow mutably (the columns beside a `split_at`), so it cannot be handed on as a slice. A
//! non-contiguous `C` is computed into a copy whose `m x n` elements are then written back, so
//! nothing outside the view is touched either way.

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::matrix::{MatMut, MatRef};
use crate::{Engine, Result};

/// An operand: the view's own memory when it is contiguous in either order, else a row-major
/// copy of its elements.
enum Operand<'a> {
    Borrowed(MatRef<'a>),
    Copied { data: Vec<f32>, rows: usize, cols: usize },
}

impl<'a> Operand<'a> {
    fn of(x: ArrayView2<'a, f32>) -> Self {
        let (rows, cols) = x.dim();
        if let Some(data) = x.to_slice() {
            Self::Borrowed(MatRef::contiguous(data, rows, cols))
        } else if let Some(data) = x.reversed_axes().to_slice() {
            Self::Borrowed(MatRef::col_major(data, rows, cols, rows.max(1)))
        } else {
            Self::Copied { data: x.iter().copied().collect(), rows, cols }
        }
    }

    fn view(&self) -> MatRef<'_> {
        match self {
            Self::Borrowed(m) => *m,
            Self::Copied { data, rows, cols } => MatRef::contiguous(data, *rows, *cols),
        }
    }
}

impl Engine {
    /// `C = alpha * A * B + beta * C` on `ndarray` views (`a.t()` for `A^T`); see the module
    /// documentation for which views are copied.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use sgemm::{Backend, Engine};
    ///
    /// let engine = Engine::new(Backend::Cpu)?;
    /// let a = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]; // 3x2
    /// let mut c = Array2::<f32>::zeros((2, 2));
    /// engine.gemm_ndarray(1.0, a.t(), a.view(), 0.0, c.view_mut())?; // A^T A
    /// assert_eq!(c, array![[35.0, 44.0], [44.0, 56.0]]);
    /// # Ok::<(), sgemm::Error>(())
    /// ```
    pub fn gemm_ndarray(
        &self,
        alpha: f32,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
        beta: f32,
        mut c: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let (a, b) = (Operand::of(a), Operand::of(b));
        let (a, b) = (a.view(), b.view());
        let (rows, cols) = c.dim();
        if c.is_standard_layout()
            && let Some(data) = c.view_mut().into_slice()
        {
            return self.gemm(alpha, &a, &b, beta, &mut MatMut::contiguous(data, rows, cols));
        }
        if c.t().is_standard_layout()
            && let Some(data) = c.view_mut().reversed_axes().into_slice()
        {
            return self.gemm(alpha, &a, &b, beta, &mut MatMut::col_major(data, rows, cols, rows.max(1)));
        }
        let mut copy: Vec<f32> = c.iter().copied().collect();
        self.gemm(alpha, &a, &b, beta, &mut MatMut::contiguous(&mut copy, rows, cols))?;
        c.iter_mut().zip(copy).for_each(|(x, y)| *x = y);
        Ok(())
    }
}
