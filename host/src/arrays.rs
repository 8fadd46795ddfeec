//! `ndarray` views in, view out (feature `ndarray`): where Rust users keep their matrices.
//!
//! A view in standard (row-major) or Fortran (column-major) order goes to the GEMM as it is,
//! without a copy; so does a transposed view (`a.t()` of a standard array is Fortran-ordered).
//! Any other view (a submatrix with padding between rows, a stride other than 1, negative
//! strides) is copied first: such a view's slice would overlap memory that other views may
//! borrow mutably (the columns beside a `split_at`), so it cannot be handed on as a slice. A
//! non-contiguous `C` is computed into a copy whose `m x n` elements are then written back, so
//! nothing outside the view is touched either way.
//!
//! Batches are 3-D views, axis 0 the batch ([`Engine::gemm_batch_ndarray`]). A view whose
//! memory is one contiguous block (in any axis order, so a permuted array too, such as heads
//! side by side in a `(seq, heads, dim)` array viewed as `(heads, seq, dim)`) goes to
//! [`Engine::gemm_strided`] as it is when each member is row- or column-major (one of its two
//! matrix strides is 1) and no stride is negative; any other is copied as above.

use ndarray::{Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis};

use crate::batch::Strided;
use crate::matrix::{Layout, MatMut, MatRef};
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

    /// `C_i = alpha * A_i * B_i + beta * C_i` for every `i` along axis 0 of three 3-D views of
    /// equal length (a batch: [`gemm_strided`](Self::gemm_strided)'s semantics and checks);
    /// `a.permuted_axes([0, 2, 1])` for every `A_i^T`. See the module documentation for which
    /// views are copied.
    ///
    /// ```
    /// use ndarray::{Array3, array};
    /// use sgemm::{Backend, Engine};
    ///
    /// let engine = Engine::new(Backend::Cpu)?;
    /// let a = array![[[1.0f32, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]]; // two 2x2
    /// let mut c = Array3::<f32>::zeros((2, 2, 2));
    /// engine.gemm_batch_ndarray(1.0, a.view(), a.view(), 0.0, c.view_mut())?; // A_i A_i
    /// assert_eq!(c, array![[[7.0, 10.0], [15.0, 22.0]], [[1.0, 0.0], [0.0, 1.0]]]);
    /// # Ok::<(), sgemm::Error>(())
    /// ```
    pub fn gemm_batch_ndarray(
        &self,
        alpha: f32,
        a: ArrayView3<f32>,
        b: ArrayView3<f32>,
        beta: f32,
        mut c: ArrayViewMut3<f32>,
    ) -> Result<()> {
        let counts = [a.len_of(Axis(0)), b.len_of(Axis(0)), c.len_of(Axis(0))];
        crate::batch::check_counts(counts[0], counts[1], counts[2])?;
        let batch = counts[0];
        let (a, b) = (Batch::of(a), Batch::of(b));
        let (a, b) = (a.view(), b.view());
        let (dim, strides) = (c.dim(), c.strides().to_vec());
        if let Some((layout, ld, stride)) = strided_form(dim, &strides)
            && let Some(data) = c.view_mut().into_slice_memory_order()
        {
            let matrix = MatMut { data, rows: dim.1, cols: dim.2, ld, layout };
            return self.gemm_strided(batch, alpha, &a, &b, beta, &mut Strided::new(matrix, stride));
        }
        let mut copy: Vec<f32> = c.iter().copied().collect();
        let matrix = MatMut::contiguous(&mut copy, dim.1, dim.2);
        self.gemm_strided(batch, alpha, &a, &b, beta, &mut Strided::new(matrix, dim.1 * dim.2))?;
        c.iter_mut().zip(copy).for_each(|(x, y)| *x = y);
        Ok(())
    }
}

/// A batch operand: the view's own memory when [`strided_form`] describes it, else a row-major
/// copy of its members back to back.
enum Batch<'a> {
    Borrowed(Strided<MatRef<'a>>),
    Copied(Array3<f32>),
}

impl<'a> Batch<'a> {
    fn of(x: ArrayView3<'a, f32>) -> Self {
        let (dim, strides) = (x.dim(), x.strides().to_vec());
        if let Some((layout, ld, stride)) = strided_form(dim, &strides) {
            let matrix = |data| {
                Self::Borrowed(Strided::new(MatRef { data, rows: dim.1, cols: dim.2, ld, layout }, stride))
            };
            if let Some(data) = x.to_slice_memory_order() {
                return matrix(data);
            }
            // A broadcast (stride 0): one member's memory is the whole operand.
            if stride == 0
                && dim.0 > 0
                && let Some(data) = x.index_axis_move(Axis(0), 0).to_slice_memory_order()
            {
                return matrix(data);
            }
        }
        Self::Copied(x.as_standard_layout().into_owned())
    }

    fn view(&self) -> Strided<MatRef<'_>> {
        match self {
            Self::Borrowed(m) => *m,
            Self::Copied(x) => {
                let (_, rows, cols) = x.dim();
                let data = x.as_slice().expect("a standard-layout array is one slice");
                Strided::new(MatRef::contiguous(data, rows, cols), rows * cols)
            }
        }
    }
}

/// How a 3-D view of `dim` (batch, rows, cols) with element `strides` reads as a strided batch
/// over its memory block, which starts at its first element when no stride is negative:
/// `(layout, ld, member stride)`, or `None` when a stride is negative or neither matrix stride
/// is 1. An axis of length 1 has no step to take, so its stride does not count.
fn strided_form(dim: (usize, usize, usize), strides: &[isize]) -> Option<(Layout, usize, usize)> {
    let (batch, rows, cols) = dim;
    let [s0, s1, s2] = [strides[0], strides[1], strides[2]].map(|s| usize::try_from(s).ok());
    let (s0, s1, s2) = (s0?, s1?, s2?);
    let stride = if batch <= 1 { 0 } else { s0 };
    if s2 == 1 || cols <= 1 {
        let ld = if rows <= 1 { cols.max(1) } else { s1 };
        Some((Layout::RowMajor, ld, stride))
    } else if s1 == 1 || rows <= 1 {
        let ld = if cols <= 1 { rows.max(1) } else { s2 };
        Some((Layout::ColMajor, ld, stride))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(layout, ld, stride)` of the borrowed form, `None` for a copy.
    fn form(x: ArrayView3<f32>) -> Option<(Layout, usize, usize)> {
        match Batch::of(x) {
            Batch::Borrowed(s) => Some((s.matrix.layout, s.matrix.ld, s.stride)),
            Batch::Copied(_) => None,
        }
    }

    #[test]
    fn contiguous_batches_are_borrowed_in_place_and_others_copied() {
        let x = Array3::<f32>::zeros((4, 5, 6));
        assert_eq!(form(x.view()), Some((Layout::RowMajor, 6, 30)));
        // Every member transposed: column-major members.
        assert_eq!(form(x.view().permuted_axes([0, 2, 1])), Some((Layout::ColMajor, 6, 30)));
        // (seq, heads, dim) as (heads, seq, dim): heads interleaved, rows of all heads apart.
        let heads = Array3::<f32>::zeros((5, 4, 6));
        assert_eq!(form(heads.view().permuted_axes([1, 0, 2])), Some((Layout::RowMajor, 24, 6)));
        // One matrix broadcast to every member.
        let one = Array3::<f32>::zeros((1, 5, 6));
        assert_eq!(form(one.broadcast((4, 5, 6)).unwrap()), Some((Layout::RowMajor, 6, 0)));
        // Gaps between members, columns or rows: copied.
        assert_eq!(form(x.slice(ndarray::s![..;2, .., ..])), None);
        assert_eq!(form(x.slice(ndarray::s![.., .., ..;2])), None);
        // Reversed: copied.
        assert_eq!(form(x.slice(ndarray::s![..;-1, .., ..])), None);
    }
}
