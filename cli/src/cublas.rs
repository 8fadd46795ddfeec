//! cuBLAS SGEMM as a peer for side-by-side timing (feature `cublas`), on the same stream and
//! the same device buffers as our kernels. FP32 arithmetic: the handle's math mode is set to
//! `CUBLAS_DEFAULT_MATH`, which never uses TF32 tensor cores.
//!
//! cuBLAS is column-major. A row-major `m x n` matrix with leading dimension `ld` is the same
//! memory as a column-major `n x m` matrix with that leading dimension, its transpose; so
//! `C = A B` in row-major is `C^T = B^T A^T` in column-major: call cuBLAS with the operands
//! swapped and `m` and `n` exchanged, no transposes.

use cudarc::cublas::sys::{cublasMath_t, cublasOperation_t, cublasSetMathMode};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};

use cudarc::driver::CudaView;
use sgemm::{DeviceMatMut, DeviceMatRef, Error, Gpu, Layout, Result};

/// An operand as cuBLAS sees it.
#[derive(Clone, Copy)]
struct View<'a, 'b> {
    buf: &'a CudaView<'b, f32>,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<'a, 'b> View<'a, 'b> {
    fn of(m: &'a DeviceMatRef<'b>) -> Self {
        Self { buf: m.buffer(), cols: m.cols(), ld: m.ld(), layout: m.layout() }
    }

    /// The transpose: the same memory read in the other layout.
    fn t(self, rows: usize) -> Self {
        Self { cols: rows, layout: self.layout.flip(), ..self }
    }
}

/// A cuBLAS handle bound to a [`Gpu`]'s stream.
pub struct Cublas {
    blas: CudaBlas,
}

impl Cublas {
    /// Creates the handle on `gpu`'s stream, in FP32 (no TF32) math mode.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let blas = CudaBlas::new(gpu.stream().clone()).map_err(|e| Error::NoGpu(format!("cuBLAS: {e}")))?;
        // SAFETY: the handle is valid for the lifetime of `blas`.
        let status = unsafe { cublasSetMathMode(*blas.handle(), cublasMath_t::CUBLAS_DEFAULT_MATH) };
        status.result().map_err(|e| Error::NoGpu(format!("cuBLAS math mode: {e}")))?;
        Ok(Self { blas })
    }

    /// Queues `C = alpha * op(A) * op(B) + beta * C` on views in any layout, as
    /// [`Gpu::enqueue`]: [`enqueue_strided`](Self::enqueue_strided) with one member.
    pub fn enqueue<'a, 'b, 'c>(
        &self,
        alpha: f32,
        a: impl Into<DeviceMatRef<'a>>,
        b: impl Into<DeviceMatRef<'b>>,
        beta: f32,
        c: impl Into<DeviceMatMut<'c>>,
    ) -> Result<()> {
        self.enqueue_strided(1, alpha, (a.into(), 0), (b.into(), 0), beta, (c.into(), 0))
    }

    /// Queues `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for `i < batch`, each operand given
    /// as its first member's view (any layout) and the step between members (0 repeats one
    /// matrix): `cublasSgemm` for one member, `cublasSgemmStridedBatched` for more. cuBLAS reads
    /// column-major matrices: a row-major operand is passed as the transpose (`CUBLAS_OP_T`) of
    /// the column-major matrix its memory is, and a row-major `C` is computed as the
    /// column-major `C^T = op(B)^T op(A)^T`. Errors when the shapes do not chain, a buffer is
    /// shorter than its last member, or a size exceeds cuBLAS's `int`.
    pub fn enqueue_strided(
        &self,
        batch: usize,
        alpha: f32,
        (a, a_step): (DeviceMatRef, usize),
        (b, b_step): (DeviceMatRef, usize),
        beta: f32,
        (mut c, c_step): (DeviceMatMut, usize),
    ) -> Result<()> {
        if a.rows() != c.rows() || b.cols() != c.cols() || a.cols() != b.rows() {
            return Err(Error::DimensionMismatch("the operands of the cuBLAS call do not chain".into()));
        }
        // The span of the last member, from the first element: what each buffer must hold.
        let last = |step: usize, layout: Layout, rows: usize, cols: usize, ld: usize| {
            let span = sgemm::matrix::span(layout, rows, cols, ld);
            (batch.max(1) - 1).checked_mul(step).and_then(|s| s.checked_add(span)).unwrap_or(usize::MAX)
        };
        if a.buffer().len() < last(a_step, a.layout(), a.rows(), a.cols(), a.ld())
            || b.buffer().len() < last(b_step, b.layout(), b.rows(), b.cols(), b.ld())
            || c.buffer().len() < last(c_step, c.layout(), c.rows(), c.cols(), c.ld())
        {
            return Err(Error::DimensionMismatch("a buffer of the cuBLAS batch is too short".into()));
        }
        let (a_rows, b_rows, c_layout) = (a.rows(), b.rows(), c.layout());
        let (a, b) = ((View::of(&a), a_step), (View::of(&b), b_step));
        let ((a, a_step), (b, b_step), m, n) = match c_layout {
            Layout::ColMajor => (a, b, c.rows(), c.cols()),
            Layout::RowMajor => ((b.0.t(b_rows), b.1), (a.0.t(a_rows), a.1), c.cols(), c.rows()),
        };
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| Error::DimensionMismatch(format!("{x} exceeds cuBLAS's int")))
        };
        let long = |x: usize| {
            i64::try_from(x).map_err(|_| Error::DimensionMismatch(format!("{x} exceeds cuBLAS's int64")))
        };
        let op = |x: &View| match x.layout {
            Layout::ColMajor => cublasOperation_t::CUBLAS_OP_N,
            Layout::RowMajor => cublasOperation_t::CUBLAS_OP_T,
        };
        let gemm = GemmConfig {
            transa: op(&a),
            transb: op(&b),
            m: int(m)?,
            n: int(n)?,
            k: int(a.cols)?,
            alpha,
            lda: int(a.ld)?,
            ldb: int(b.ld)?,
            beta,
            ldc: int(c.ld())?,
        };
        if batch == 1 {
            // SAFETY: the shapes chain, each buffer holds its matrix's span (both checked
            // above), and the operations and leading dimensions describe each buffer's layout.
            return unsafe { self.blas.gemm(gemm, a.buf, b.buf, c.buffer_mut()) }
                .map_err(|e| Error::NoGpu(format!("cublasSgemm failed: {e}")));
        }
        let cfg = StridedBatchedConfig {
            gemm,
            batch_size: int(batch)?,
            stride_a: long(a_step)?,
            stride_b: long(b_step)?,
            stride_c: long(c_step)?,
        };
        // SAFETY: as for one member, and each buffer holds its last member's span (checked
        // above).
        unsafe { self.blas.gemm_strided_batched(cfg, a.buf, b.buf, c.buffer_mut()) }
            .map_err(|e| Error::NoGpu(format!("cublasSgemmStridedBatched failed: {e}")))
    }
}
