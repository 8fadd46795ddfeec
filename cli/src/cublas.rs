//! cuBLAS SGEMM as a peer for side-by-side timing (feature `cublas`), on the same stream and
//! the same device buffers as our kernels. FP32 arithmetic: the handle's math mode is set to
//! `CUBLAS_DEFAULT_MATH`, which never uses TF32 tensor cores.
//!
//! cuBLAS is column-major. A row-major `m x n` matrix with leading dimension `ld` is the same
//! memory as a column-major `n x m` matrix with that leading dimension, its transpose; so
//! `C = A B` in row-major is `C^T = B^T A^T` in column-major: call cuBLAS with the operands
//! swapped and `m` and `n` exchanged, no transposes.

use cudarc::cublas::sys::{cublasMath_t, cublasOperation_t, cublasSetMathMode};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};

use cudarc::driver::CudaSlice;
use sgemm::{DeviceMatrix, Error, Gpu, Layout, Result};

/// An operand as cuBLAS sees it.
#[derive(Clone, Copy)]
struct View<'a> {
    buf: &'a CudaSlice<f32>,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<'a> View<'a> {
    fn of(m: &'a DeviceMatrix) -> Self {
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
    /// [`Gpu::enqueue`]. cuBLAS reads column-major matrices: a row-major operand is passed as
    /// the transpose (`CUBLAS_OP_T`) of the column-major matrix its memory is, and a row-major
    /// `C` is computed as the column-major `C^T = op(B)^T op(A)^T`.
    pub fn enqueue(
        &self,
        alpha: f32,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        beta: f32,
        c: &mut DeviceMatrix,
    ) -> Result<()> {
        if a.rows() != c.rows() || b.cols() != c.cols() || a.cols() != b.rows() {
            return Err(Error::DimensionMismatch("the operands of the cuBLAS call do not chain".into()));
        }
        let (a_rows, b_rows) = (a.rows(), b.rows());
        let (a, b) = (View::of(a), View::of(b));
        let (a, b, m, n) = match c.layout() {
            Layout::ColMajor => (a, b, c.rows(), c.cols()),
            Layout::RowMajor => (b.t(b_rows), a.t(a_rows), c.cols(), c.rows()),
        };
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| Error::DimensionMismatch(format!("{x} exceeds cuBLAS's int")))
        };
        let op = |x: &View| match x.layout {
            Layout::ColMajor => cublasOperation_t::CUBLAS_OP_N,
            Layout::RowMajor => cublasOperation_t::CUBLAS_OP_T,
        };
        let cfg = GemmConfig {
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
        // SAFETY: the shapes chain (checked above), each buffer holds its matrix's span, and
        // the operations and leading dimensions describe each buffer's layout.
        unsafe { self.blas.gemm(cfg, a.buf, b.buf, c.buffer_mut()) }
            .map_err(|e| Error::NoGpu(format!("cublasSgemm failed: {e}")))
    }
}
