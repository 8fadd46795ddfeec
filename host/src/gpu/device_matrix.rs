//! Row-major matrices that live in device memory, and the copies to and from the host.

use cudarc::driver::CudaSlice;

use super::{Gpu, alloc_error};
use crate::matrix::{MatMut, MatRef, check_view, span};
use crate::{Error, Result};

/// A row-major `rows x cols` matrix in device memory, rows `ld` elements apart. Its buffer
/// always holds exactly the matrix's span (at least one element), so a `DeviceMatrix` is valid
/// by construction.
#[derive(Debug)]
pub struct DeviceMatrix {
    pub(super) buf: CudaSlice<f32>,
    rows: usize,
    cols: usize,
    ld: usize,
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

    /// Distance between rows, in elements.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// `(rows, cols)`.
    pub(super) fn dims(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

impl Gpu {
    /// Allocates a `rows x cols` device matrix with leading dimension `ld`, zero-filled.
    pub fn alloc(&self, rows: usize, cols: usize, ld: usize) -> Result<DeviceMatrix> {
        check_view("device matrix", usize::MAX, rows, cols, ld)?;
        let len = span(rows, cols, ld).max(1);
        let bytes = len.saturating_mul(4);
        let buf = self.stream.alloc_zeros::<f32>(len).map_err(alloc_error(bytes))?;
        Ok(DeviceMatrix { buf, rows, cols, ld })
    }

    /// Copies a host matrix (its whole span, padding included) to a new device matrix with the
    /// same leading dimension.
    pub fn upload(&self, m: &MatRef) -> Result<DeviceMatrix> {
        check_view("host matrix", m.data.len(), m.rows, m.cols, m.ld)?;
        let len = span(m.rows, m.cols, m.ld);
        let mut d = self.alloc(m.rows, m.cols, m.ld)?;
        if len > 0 {
            self.stream
                .memcpy_htod(&m.data[..len], &mut d.buf)
                .map_err(Error::cuda("copying to the device"))?;
        }
        Ok(d)
    }

    /// Copies the `rows x cols` block of a device matrix into a host matrix of the same shape,
    /// row by row: the host padding between rows is not written.
    pub fn download(&self, d: &DeviceMatrix, out: &mut MatMut) -> Result<()> {
        if (d.rows, d.cols) != (out.rows, out.cols) {
            return Err(Error::DimensionMismatch(format!(
                "cannot copy a {}x{} device matrix into a {}x{} host matrix",
                d.rows, d.cols, out.rows, out.cols
            )));
        }
        check_view("host matrix", out.data.len(), out.rows, out.cols, out.ld)?;
        let staged = self.stream.clone_dtoh(&d.buf).map_err(Error::cuda("copying to the host"))?;
        for i in 0..d.rows {
            out.row_mut(i).copy_from_slice(&staged[i * d.ld..i * d.ld + d.cols]);
        }
        Ok(())
    }
}
