//! Matrices that live in device memory: [`DeviceMatrix`], which owns its buffer, the views
//! [`DeviceMatRef`] and [`DeviceMatMut`] over any cudarc buffer (a caller's own included), and
//! the copies to and from the host.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtr, DeviceSlice};

use super::{Gpu, alloc_error};
use crate::matrix::{self, Layout, MatMut, MatRef, check_ld, check_len, span};
use crate::semantics::View;
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

/// The shape accessors and the transpose, alike for the matrix and its views.
macro_rules! view_accessors {
    () => {
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

        /// The transpose, `cols x rows`: the same buffer read with the other layout (nothing
        /// moves on the device). Pass `a.t()` to a GEMM for `op(A) = A^T`.
        pub fn t(self) -> Self {
            Self { rows: self.cols, cols: self.rows, layout: self.layout.flip(), ..self }
        }
    };
}

/// Checks that a buffer of `len` elements holds a `rows x cols` matrix in `layout` with
/// leading dimension `ld` (errors as for a host matrix).
fn check_span(len: usize, layout: Layout, rows: usize, cols: usize, ld: usize) -> Result<()> {
    check_ld(matrix::MATRIX, layout, rows, cols, ld)?;
    check_len(matrix::MATRIX, len, layout, rows, cols, ld)
}

impl DeviceMatrix {
    view_accessors!();

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
        check_span(buf.len(), layout, rows, cols, ld)?;
        Ok(Self { buf, rows, cols, ld, layout })
    }

    /// The buffer, giving up the matrix view.
    pub fn into_buffer(self) -> CudaSlice<f32> {
        self.buf
    }

    /// The matrix as a read-only view (what the GEMM calls take).
    pub fn view(&self) -> DeviceMatRef<'_> {
        // A whole allocation of the driver's: 256-byte aligned, no pointer query needed.
        DeviceMatRef {
            buf: self.buf.as_view(),
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
            layout: self.layout,
            aligned: true,
        }
    }

    /// The matrix as a writable view.
    pub fn view_mut(&mut self) -> DeviceMatMut<'_> {
        DeviceMatMut {
            buf: self.buf.as_view_mut(),
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
            layout: self.layout,
        }
    }
}

/// A `rows x cols` matrix in device memory that is read, borrowed from a cudarc buffer: a
/// [`DeviceMatrix`] (`From`, or [`DeviceMatrix::view`]), or a caller's own `CudaSlice<f32>` or
/// part of one (`buf.as_view()`, `buf.slice(offset..)`), in either layout with leading
/// dimension `ld` (see [`MatRef`] for the layouts). Valid by construction: the buffer holds
/// the matrix's span.
///
/// ```no_run
/// use cudarc::driver::CudaSlice;
/// use sgemm::{DeviceMatMut, DeviceMatRef, Gpu, Layout};
///
/// let gpu = Gpu::new(0)?;
/// // Buffers of your own, on the same context (here: the primary context of device 0).
/// let (m, n, k) = (64, 48, 32);
/// let a: CudaSlice<f32> = gpu.stream().alloc_zeros(m * k).unwrap();
/// let b: CudaSlice<f32> = gpu.stream().alloc_zeros(k * n).unwrap();
/// let mut c: CudaSlice<f32> = gpu.stream().alloc_zeros(m * n).unwrap();
/// let a = DeviceMatRef::new(a.as_view(), Layout::ColMajor, m, k, m)?;
/// let b = DeviceMatRef::new(b.as_view(), Layout::RowMajor, k, n, n)?;
/// let c = DeviceMatMut::new(c.as_view_mut(), Layout::RowMajor, m, n, n)?;
/// gpu.gemm_device(1.0, a, b, 0.0, c)?;
/// # Ok::<(), sgemm::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceMatRef<'a> {
    pub(super) buf: CudaView<'a, f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
    /// Whether the first element is 16-byte aligned (what the 16-byte loads need).
    pub(super) aligned: bool,
}

/// A `rows x cols` matrix in device memory that is written, borrowed from a cudarc buffer (a
/// [`DeviceMatrix`], or `buf.as_view_mut()` / `buf.slice_mut(offset..)` of a caller's
/// `CudaSlice<f32>`). Valid by construction, as [`DeviceMatRef`]. A GEMM writes only its
/// `rows x cols` block, never the padding between lines.
#[derive(Debug)]
pub struct DeviceMatMut<'a> {
    pub(super) buf: CudaViewMut<'a, f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<'a> DeviceMatRef<'a> {
    /// Whether every line of every member (`step` elements apart in a batch) starts 16-byte
    /// aligned: the first element is, and `ld` and `step` are multiples of 4 floats.
    pub(super) fn lines_aligned(&self, step: usize) -> bool {
        self.aligned && self.ld.is_multiple_of(4) && step.is_multiple_of(4)
    }

    /// A view of `buf` as a `rows x cols` matrix in `layout` with leading dimension `ld`.
    /// Errors as for a host matrix when `ld` is too small or `buf` shorter than the span.
    pub fn new(buf: CudaView<'a, f32>, layout: Layout, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        check_span(buf.len(), layout, rows, cols, ld)?;
        let aligned = buf.device_ptr(buf.stream()).0.is_multiple_of(16);
        Ok(Self { buf, rows, cols, ld, layout, aligned })
    }

    view_accessors!();

    /// The same matrix `offset` elements further into the buffer: a later member of a batch.
    /// Requires `offset` plus the matrix's span within the buffer (a checked batch's member).
    pub(super) fn member(&self, offset: usize) -> DeviceMatRef<'_> {
        let buf = self.buf.slice(offset..);
        let aligned = buf.device_ptr(buf.stream()).0.is_multiple_of(16);
        DeviceMatRef { buf, aligned, ..*self }
    }

    /// The viewed buffer.
    pub fn buffer(&self) -> &CudaView<'a, f32> {
        &self.buf
    }
}

impl<'a> DeviceMatMut<'a> {
    /// A view of `buf` as a `rows x cols` matrix in `layout` with leading dimension `ld`.
    /// Errors as for a host matrix when `ld` is too small or `buf` shorter than the span.
    pub fn new(
        buf: CudaViewMut<'a, f32>,
        layout: Layout,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<Self> {
        check_span(buf.len(), layout, rows, cols, ld)?;
        Ok(Self { buf, rows, cols, ld, layout })
    }

    view_accessors!();

    /// The same matrix `offset` elements further into the buffer, as
    /// [`DeviceMatRef::member`].
    pub(super) fn member_mut(&mut self, offset: usize) -> DeviceMatMut<'_> {
        let (rows, cols, ld, layout) = (self.rows, self.cols, self.ld, self.layout);
        DeviceMatMut { buf: self.buf.slice_mut(offset..), rows, cols, ld, layout }
    }

    /// The viewed buffer.
    pub fn buffer(&self) -> &CudaViewMut<'a, f32> {
        &self.buf
    }

    /// The viewed buffer, writable (for calls of other libraries on the same memory).
    pub fn buffer_mut(&mut self) -> &mut CudaViewMut<'a, f32> {
        &mut self.buf
    }

    /// The same matrix, read-only.
    pub fn as_ref(&self) -> DeviceMatRef<'_> {
        let buf = self.buf.slice(..);
        let aligned = buf.device_ptr(buf.stream()).0.is_multiple_of(16);
        DeviceMatRef { buf, rows: self.rows, cols: self.cols, ld: self.ld, layout: self.layout, aligned }
    }
}

impl<'a> From<&'a DeviceMatrix> for DeviceMatRef<'a> {
    fn from(m: &'a DeviceMatrix) -> Self {
        m.view()
    }
}

impl<'a> From<&'a mut DeviceMatrix> for DeviceMatMut<'a> {
    fn from(m: &'a mut DeviceMatrix) -> Self {
        m.view_mut()
    }
}

impl View for DeviceMatRef<'_> {
    fn layout(&self) -> Layout {
        self.layout
    }

    fn t(self) -> Self {
        DeviceMatRef::t(self)
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.ld)
    }

    fn described_as(self, layout: Layout, ld: usize) -> Self {
        Self { layout, ld, ..self }
    }
}

impl View for DeviceMatMut<'_> {
    fn layout(&self) -> Layout {
        self.layout
    }

    fn t(self) -> Self {
        DeviceMatMut::t(self)
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.ld)
    }

    fn described_as(self, layout: Layout, ld: usize) -> Self {
        Self { layout, ld, ..self }
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

    /// Copies the `rows x cols` block of a device matrix (a [`DeviceMatrix`] or a view) into
    /// a host matrix of the same shape, in any layout: the host padding is not written.
    pub fn download<'a>(&self, d: impl Into<DeviceMatRef<'a>>, out: &mut MatMut) -> Result<()> {
        let d = d.into();
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
        let len = span(d.layout, d.rows, d.cols, d.ld);
        let (inner, _) = d.layout.extents(d.rows, d.cols);
        if out.layout == d.layout && out.ld == inner && d.ld == inner {
            // Both contiguous, without padding: one copy straight into the caller's slice.
            return self
                .loaded
                .stream
                .memcpy_dtoh(&d.buf.slice(..len), &mut out.data[..len])
                .map_err(Error::cuda("copying to the host"));
        }
        let staged =
            self.loaded.stream.clone_dtoh(&d.buf.slice(..len)).map_err(Error::cuda("copying to the host"))?;
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
