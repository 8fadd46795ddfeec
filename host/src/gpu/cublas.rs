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

use super::{DeviceMatrix, Gpu};
use crate::matrix::check_shapes;
use crate::{Error, Result};

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

    /// Queues `C = alpha * A * B + beta * C` (row-major, as [`Gpu::enqueue`]).
    pub fn enqueue(
        &self,
        alpha: f32,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        beta: f32,
        c: &mut DeviceMatrix,
    ) -> Result<()> {
        check_shapes(a.dims(), b.dims(), c.dims())?;
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| Error::DimensionMismatch(format!("{x} exceeds cuBLAS's int")))
        };
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: int(c.cols())?,
            n: int(c.rows())?,
            k: int(a.cols())?,
            alpha,
            lda: int(b.ld())?,
            ldb: int(a.ld())?,
            beta,
            ldc: int(c.ld())?,
        };
        // SAFETY: the shapes chain (checked above) and each buffer holds its matrix's span.
        unsafe { self.blas.gemm(cfg, &b.buf, &a.buf, &mut c.buf) }
            .map_err(|e| Error::NoGpu(format!("cublasSgemm failed: {e}")))
    }
}
