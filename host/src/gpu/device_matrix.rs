//! Matrices that live in device memory, and the copies to and from the host.

use cudarc::driver::CudaSlice;

use super::{Gpu, alloc_error};
use crate::matrix::{self, Layout, MatMut, MatRef, check_ld, check_len, span};
use crate::{Error, Result};

/// A `rows x cols` matrix in device memory, row- or column-major with leading dimension `ld`
/// (see [`MatRef`] for the layouts). Its buffer always holds at least the matrix's whole span,
/// so a `DeviceMatrix` is valid by construction.
#[derive(Debug)]
pub struct DeviceMatrix {
    pub(super) buf: CudaSlice<f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl DeviceMatrix {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Distance between rows (row-major) or columns (column-major), in elements.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// How the matrix is stored.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The transpose, `cols x rows`: the same buffer read with the other layout (nothing moves
    /// on the device). Pass `a.t()` to a GEMM for `op(A) = A^T`.
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, layout: self.layout.flip(), ..self }
    }

    /// The device buffer (cudarc's), which holds the matrix's span: for interoperation with
    /// other cudarc code (a kernel of your own, a library call).
    pub fn buffer(&self) -> &CudaSlice<f32> {
        &self.buf
    }

    /// The device buffer, writable. Changing it changes the matrix; its length stays.
    pub fn buffer_mut(&mut self) -> &mut CudaSlice<f32> {
        &mut self.buf
    }

    /// A device matrix over a buffer of your own (allocated by cudarc on the same context as
    /// the [`Gpu`] it is used with): `rows x cols` in `layout` with leading dimension `ld`.
    /// Errors as for a host matrix when `ld` is too small or the buffer shorter than the span.
    pub fn from_buffer(
        buf: CudaSlice<f32>,
        layout: Layout,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<Self> {
        check_ld(matrix::MATRIX, layout, rows, cols, ld)?;
        check_len(matrix::MATRIX, buf.len(), layout, rows, cols, ld)?;
        Ok(Self { buf, rows, cols, ld, layout })
    }

    /// The buffer, giving up the matrix view.
    pub fn into_buffer(self) -> CudaSlice<f32> {
        self.buf
    }

    /// `(rows, cols)`.
    pub(super) fn dims(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

impl Gpu {
    /// Allocates a row-major `rows x cols` device matrix with leading dimension `ld`,
    /// zero-filled (`.t()` of a `cols x rows` one is column-major).
    pub fn alloc(&self, rows: usize, cols: usize, ld: usize) -> Result<DeviceMatrix> {
        self.alloc_as(Layout::RowMajor, rows, cols, ld)
    }

    /// [`alloc`](Self::alloc) in either layout.
    pub(super) fn alloc_as(
        &self,
        layout: Layout,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<DeviceMatrix> {
        check_ld(matrix::MATRIX, layout, rows, cols, ld)?;
        let len = span(layout, rows, cols, ld).max(1);
        let bytes = len.saturating_mul(4);
        let buf = self.loaded.stream.alloc_zeros::<f32>(len).map_err(alloc_error(bytes))?;
        Ok(DeviceMatrix { buf, rows, cols, ld, layout })
    }

    /// Copies a host matrix (its whole span, padding included) to a new device matrix with the
    /// same layout and leading dimension.
    pub fn upload(&self, m: &MatRef) -> Result<DeviceMatrix> {
        check_ld(matrix::MATRIX, m.layout, m.rows, m.cols, m.ld)?;
        check_len(matrix::MATRIX, m.data.len(), m.layout, m.rows, m.cols, m.ld)?;
        let len = span(m.layout, m.rows, m.cols, m.ld);
        let mut d = self.alloc_as(m.layout, m.rows, m.cols, m.ld)?;
        if len > 0 {
            self.loaded
                .stream
                .memcpy_htod(&m.data[..len], &mut d.buf)
                .map_err(Error::cuda("copying to the device"))?;
        }
        Ok(d)
    }

    /// Copies the `rows x cols` block of a device matrix into a host matrix of the same shape
    /// (in any layout): the host padding is not written.
    pub fn download(&self, d: &DeviceMatrix, out: &mut MatMut) -> Result<()> {
        if (d.rows, d.cols) != (out.rows, out.cols) {
            return Err(Error::DimensionMismatch(format!(
                "cannot copy a {}x{} device matrix into a {}x{} host matrix",
                d.rows, d.cols, out.rows, out.cols
            )));
        }
        check_ld(matrix::MATRIX, out.layout, out.rows, out.cols, out.ld)?;
        check_len(matrix::MATRIX, out.data.len(), out.layout, out.rows, out.cols, out.ld)?;
        if d.rows == 0 || d.cols == 0 {
            return Ok(());
        }
        let staged = self.loaded.stream.clone_dtoh(&d.buf).map_err(Error::cuda("copying to the host"))?;
        let staged = MatRef { data: &staged, rows: d.rows, cols: d.cols, ld: d.ld, layout: d.layout };
        if out.layout == d.layout {
            // Line by line (rows, or columns): whole contiguous runs.
            let (inner, lines) = d.layout.extents(d.rows, d.cols);
            for line in 0..lines {
                out.data[line * out.ld..][..inner].copy_from_slice(&staged.data[line * d.ld..][..inner]);
            }
        } else {
            for i in 0..d.rows {
                for j in 0..d.cols {
                    *out.at_mut(i, j) = staged.at(i, j);
                }
            }
        }
        Ok(())
    }
}
