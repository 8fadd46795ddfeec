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

use cudarc::driver::{CudaSlice, CudaView};
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
    /// [`Gpu::enqueue`]. cuBLAS reads column-major matrices: a row-major operand is passed as
    /// the transpose (`CUBLAS_OP_T`) of the column-major matrix its memory is, and a row-major
    /// `C` is computed as the column-major `C^T = op(B)^T op(A)^T`.
    pub fn enqueue<'a, 'b, 'c>(
        &self,
        alpha: f32,
        a: impl Into<DeviceMatRef<'a>>,
        b: impl Into<DeviceMatRef<'b>>,
        beta: f32,
        c: impl Into<DeviceMatMut<'c>>,
    ) -> Result<()> {
        let (a, b, mut c) = (a.into(), b.into(), c.into());
        if a.rows() != c.rows() || b.cols() != c.cols() || a.cols() != b.rows() {
            return Err(Error::DimensionMismatch("the operands of the cuBLAS call do not chain".into()));
        }
        let (a_rows, b_rows) = (a.rows(), b.rows());
        let (a, b) = (View::of(&a), View::of(&b));
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

    /// Queues `C_i = alpha A_i B_i + beta C_i` for `i < batch` with `cublasSgemmStridedBatched`:
    /// row-major members of `m x k`, `k x n` and `m x n` back to back in `a`, `b` and `c`
    /// (computed as the column-major `C_i^T = alpha B_i^T A_i^T + beta C_i^T`).
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_strided(
        &self,
        batch: usize,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        beta: f32,
        c: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| Error::DimensionMismatch(format!("{x} exceeds cuBLAS's int")))
        };
        let long = |x: usize| x as i64;
        let cfg = StridedBatchedConfig {
            gemm: GemmConfig {
                transa: cublasOperation_t::CUBLAS_OP_N,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: int(n)?,
                n: int(m)?,
                k: int(k)?,
                alpha,
                lda: int(n)?,
                ldb: int(k)?,
                beta,
                ldc: int(n)?,
            },
            batch_size: int(batch)?,
            stride_a: long(k * n),
            stride_b: long(m * k),
            stride_c: long(m * n),
        };
        if a.len() < batch * m * k || b.len() < batch * k * n || c.len() < batch * m * n {
            return Err(Error::DimensionMismatch("a buffer of the cuBLAS batch is too short".into()));
        }
        // SAFETY: each buffer holds `batch` members of its shape back to back (checked above);
        // B's members are the column-major `n x k` first operand, A's the `k x m` second.
        unsafe { self.blas.gemm_strided_batched(cfg, b, a, c) }
            .map_err(|e| Error::NoGpu(format!("cublasSgemmStridedBatched failed: {e}")))
    }
}
