//! Single-precision GEMM, `C = alpha * op(A) * op(B) + beta * C`, on NVIDIA GPUs (kernels
//! written in Rust, compiled to PTX by `cargo xtask build-ptx` and embedded here) and on CPUs,
//! with the reference BLAS's semantics.
//!
//! ```no_run
//! use sgemm::{Backend, Engine, MatMut, MatRef};
//!
//! let (m, n, k) = (300, 200, 100);
//! let a = vec![1.0f32; m * k];
//! let b = vec![0.5f32; k * n];
//! let mut c = vec![0.0f32; m * n];
//! let engine = Engine::new(Backend::Auto)?; // the GPU when there is one, else the CPU
//! engine.gemm(
//!     None, // the automatic kernel choice
//!     1.0,
//!     &MatRef::contiguous(&a, m, k),
//!     &MatRef::contiguous(&b, k, n),
//!     0.0,
//!     &mut MatMut::contiguous(&mut c, m, n),
//! )?;
//! assert_eq!(c[0], 50.0);
//! # Ok::<(), sgemm::Error>(())
//! ```
//!
//! Matrices are views with a leading dimension, row- or column-major ([`MatRef`], [`MatMut`],
//! [`Layout`]), so a submatrix of a larger matrix is a view too, and `.t()` is the transpose as
//! a view (`op(A) = A^T` is `a.t()`). [`Engine::sgemm`] takes the reference BLAS argument
//! list instead; with the feature `ndarray`, `Engine::gemm_ndarray` takes `ndarray` views.
//! Every bad input is an [`Error`] naming the BLAS argument at fault, never a panic; nothing
//! outside `C`'s `m x n` block is written; `C` is not read when `beta == 0`, `A` and `B` are
//! not read when `alpha == 0` or `k == 0`. For data that stays on the GPU, use [`Gpu`] and
//! [`DeviceMatrix`] directly.
//!
//! The steps of the CPU ladder below the public kernels (the microkernel, its packing, its SIMD
//! trait) are private modules with their own documentation, linked from the public pages:
//! `cargo doc --document-private-items` builds them.
#![allow(rustdoc::private_intra_doc_links)]

#[cfg(feature = "ndarray")]
mod arrays;
mod blas;
pub mod check;
pub mod cpu;
mod error;
pub mod gpu;
pub mod matrix;
pub mod reference;

pub use error::{Error, Result};
pub use gpu::{DeviceMatrix, Gpu};
pub use matrix::{Layout, MatMut, MatRef};

/// Where a GEMM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The GPU when a CUDA device is usable, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA device 0; an error when there is none.
    Gpu,
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            _ => Err(format!("unknown backend `{s}` (expected auto, cpu or gpu)")),
        }
    }
}

/// A resolved backend, created once and reused for every call.
#[derive(Debug)]
pub struct Engine {
    gpu: Option<Gpu>,
    fallback: Option<String>,
    threads: Option<usize>,
}

impl Engine {
    /// Resolves `backend`: opens the GPU for [`Backend::Gpu`] (an error when there is none) and
    /// for [`Backend::Auto`] (falling back to the CPU, with the reason kept in
    /// [`fallback_reason`](Self::fallback_reason)).
    pub fn new(backend: Backend) -> Result<Self> {
        match backend {
            Backend::Cpu => Ok(Self { gpu: None, fallback: None, threads: None }),
            Backend::Gpu => Ok(Self { gpu: Some(Gpu::new(0)?), fallback: None, threads: None }),
            Backend::Auto => match Gpu::new(0) {
                Ok(gpu) => Ok(Self { gpu: Some(gpu), fallback: None, threads: None }),
                Err(e @ (Error::NoGpu(_) | Error::UnsupportedGpu { .. })) => {
                    Ok(Self { gpu: None, fallback: Some(e.to_string()), threads: None })
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Runs CPU GEMMs on up to `threads` threads instead of every core (`0` is rejected by the
    /// call; small products use fewer, see [`cpu::gemm`]).
    pub fn with_cpu_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// The GPU, when this engine runs there.
    pub fn gpu(&self) -> Option<&Gpu> {
        self.gpu.as_ref()
    }

    /// Why [`Backend::Auto`] chose the CPU, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// `"gpu"` or `"cpu"`.
    pub fn backend_name(&self) -> &'static str {
        if self.gpu.is_some() { "gpu" } else { "cpu" }
    }

    /// The names of the kernels this backend can run here, in ladder order (CPU kernels whose
    /// instruction set this CPU lacks are left out).
    pub fn kernel_names(&self) -> Vec<&'static str> {
        match &self.gpu {
            Some(gpu) => gpu.kernels().iter().map(|k| k.spec.name).collect(),
            None => cpu::CPU_KERNELS.iter().filter(|k| (k.detected)()).map(|k| k.name).collect(),
        }
    }

    /// `C = alpha * op(A) * op(B) + beta * C` with the named kernel (the automatic choice for
    /// `None`). `op(A)` and `op(B)` are the views as passed (`a.t()` for `A^T`); any layout of
    /// any operand works. For BLAS's argument list, see [`sgemm`](Self::sgemm).
    pub fn gemm(
        &self,
        kernel: Option<&str>,
        alpha: f32,
        a: &MatRef,
        b: &MatRef,
        beta: f32,
        c: &mut MatMut,
    ) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.gemm(kernel, alpha, a, b, beta, c),
            None => cpu::gemm(kernel, self.threads, alpha, a, b, beta, c),
        }
    }
}
