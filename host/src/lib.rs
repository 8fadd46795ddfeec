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
#![warn(missing_docs)]

#[cfg(feature = "ndarray")]
mod arrays;
pub mod batch;
mod blas;
pub mod cpu;
mod error;
pub mod gpu;
pub mod matrix;
mod semantics;

pub use batch::Strided;
pub use cudarc;
pub use error::{Error, Result};
pub use gpu::{DeviceMatMut, DeviceMatRef, DeviceMatrix, Gpu};
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

/// How the products of a GEMM may be computed. Every policy gives bitwise the same result on
/// every run for a given device, shape, layout and policy (no atomics, a fixed order of
/// additions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// `f32` accuracy on every input the format holds: normal and subnormal values anywhere in
    /// its range, operands on unrelated scales, infinities and NaN as IEEE `f32` arithmetic
    /// gives them. The error stays within the reference BLAS bound (16 `f32::EPSILON` relative
    /// to `|alpha| sum |a||b| + |beta c|`) wherever an `f32` FMA loop's does. On the H100 and
    /// H200 the products run on the tensor cores as three TF32 products per `f32` product, with
    /// each tile's rows and columns scaled by exact powers of two where the data is near the
    /// edges of the range (each block checks what it reads); elsewhere as in
    /// [`Strict`](Self::Strict).
    #[default]
    Accurate,
    /// Every multiply-add is one `f32` fused multiply-add, for callers who need IEEE `f32`
    /// semantics operation by operation.
    Strict,
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "accurate" => Ok(Self::Accurate),
            "strict" => Ok(Self::Strict),
            _ => Err(format!("unknown precision `{s}` (expected accurate or strict)")),
        }
    }
}

/// A resolved backend and the options of its calls, created once and reused for every call.
/// Cloning is cheap (a GPU's context and kernels are shared).
#[derive(Clone, Debug)]
pub struct Engine {
    gpu: Option<Gpu>,
    fallback: Option<String>,
    threads: Option<usize>,
    /// A CPU kernel chosen by name (the GPU's is kept by its handle).
    cpu_kernel: Option<&'static str>,
}

impl Engine {
    /// Resolves `backend`: opens the GPU for [`Backend::Gpu`] (an error when there is none) and
    /// for [`Backend::Auto`] (falling back to the CPU, with the reason kept in
    /// [`fallback_reason`](Self::fallback_reason)). Calls use [`Precision::Accurate`], the
    /// automatic kernel choice and every core of the CPU until the `with_` methods say otherwise.
    pub fn new(backend: Backend) -> Result<Self> {
        let cpu = |fallback| Self { gpu: None, fallback, threads: None, cpu_kernel: None };
        match backend {
            Backend::Cpu => Ok(cpu(None)),
            Backend::Gpu => Ok(Self { gpu: Some(Gpu::new(0)?), ..cpu(None) }),
            Backend::Auto => match Gpu::new(0) {
                Ok(gpu) => Ok(Self { gpu: Some(gpu), ..cpu(None) }),
                Err(e @ (Error::NoGpu(_) | Error::UnsupportedGpu { .. })) => Ok(cpu(Some(e.to_string()))),
                Err(e) => Err(e),
            },
        }
    }

    /// Calls under `precision` ([`Precision::Accurate`] by default). The CPU kernels are
    /// [`Precision::Strict`] under every policy.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.gpu = self.gpu.map(|g| g.with_precision(precision));
        self
    }

    /// Runs CPU GEMMs on up to `threads` threads instead of every core (`0` is rejected by the
    /// call; small products use fewer, see [`cpu::gemm`]).
    pub fn with_cpu_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Runs every call on the kernel called `name` (one of [`kernel_names`](Self::kernel_names):
    /// the steps of the optimization ladder, for study and comparison) instead of the automatic
    /// choice. [`Error::UnknownKernel`] if the backend has no such kernel,
    /// [`Error::UnsupportedCpu`] if this CPU lacks its instruction set.
    pub fn with_kernel(mut self, name: &str) -> Result<Self> {
        match self.gpu {
            Some(gpu) => self.gpu = Some(gpu.with_kernel(name)?),
            None => self.cpu_kernel = Some(cpu::kernel(Some(name))?.name),
        }
        Ok(self)
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
            Some(gpu) => gpu.kernel_names(),
            None => cpu::CPU_KERNELS.iter().filter(|k| (k.detected)()).map(|k| k.name).collect(),
        }
    }

    /// `C = alpha * op(A) * op(B) + beta * C`. `op(A)` and `op(B)` are the views as passed
    /// (`a.t()` for `A^T`); any layout of any operand works. For BLAS's argument list, see
    /// [`sgemm`](Self::sgemm).
    ///
    /// ```
    /// use sgemm::{Backend, Engine, MatMut, MatRef};
    ///
    /// let engine = Engine::new(Backend::Cpu)?;
    /// let a = [1.0, 2.0, 3.0, 4.0]; // 2 x 2, row-major
    /// let mut c = [0.0; 4];
    /// let a = MatRef::contiguous(&a, 2, 2);
    /// engine.gemm(1.0, &a.t(), &a, 0.0, &mut MatMut::contiguous(&mut c, 2, 2))?; // A^T A
    /// assert_eq!(c, [10.0, 14.0, 14.0, 20.0]);
    /// # Ok::<(), sgemm::Error>(())
    /// ```
    pub fn gemm(&self, alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.gemm(alpha, a, b, beta, c),
            None => cpu::gemm(self.cpu_kernel, self.threads, alpha, a, b, beta, c),
        }
    }

    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for `i < batch`, each operand one buffer
    /// of members `stride` elements apart ([`Strided`]; a stride of 0 gives every product the
    /// same `A` or `B`). Every product has [`gemm`](Self::gemm)'s semantics. Checked before
    /// anything runs: the shapes and leading dimensions as for one product, each buffer
    /// holding all its members ([`Error::SliceTooShort`]), and no two members of `C` sharing
    /// an element ([`Error::OverlappingOutputs`]). On the GPU, each launch covers the whole
    /// batch; on the CPU, small members run side by side on the threads
    /// ([`cpu::gemm_strided`]).
    ///
    /// ```
    /// use sgemm::{Backend, Engine, MatMut, MatRef, Strided};
    ///
    /// let engine = Engine::new(Backend::Cpu)?;
    /// let (batch, m, n, k) = (3, 2, 2, 2);
    /// let a: Vec<f32> = (0..batch * m * k).map(|x| x as f32).collect();
    /// let b = [1.0, 0.0, 0.0, 1.0]; // one identity, broadcast (stride 0)
    /// let mut c = vec![0.0; batch * m * n];
    /// engine.gemm_strided(
    ///     batch,
    ///     1.0,
    ///     &Strided::new(MatRef::contiguous(&a, m, k), m * k),
    ///     &Strided::new(MatRef::contiguous(&b, k, n), 0),
    ///     0.0,
    ///     &mut Strided::new(MatMut::contiguous(&mut c, m, n), m * n),
    /// )?;
    /// assert_eq!(c, a);
    /// # Ok::<(), sgemm::Error>(())
    /// ```
    pub fn gemm_strided(
        &self,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.gemm_strided(batch, alpha, a, b, beta, c),
            None => cpu::gemm_strided(self.cpu_kernel, self.threads, batch, alpha, a, b, beta, c),
        }
    }

    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for each `i` of three lists of views of
    /// equal length, the members of each list of one shape and layout (any leading
    /// dimensions). Every product has [`gemm`](Self::gemm)'s semantics and checks;
    /// [`Error::BatchMismatch`] for lists of different lengths or members of different shapes.
    pub fn gemm_batch(
        &self,
        alpha: f32,
        a: &[MatRef],
        b: &[MatRef],
        beta: f32,
        c: &mut [MatMut],
    ) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.gemm_batch(alpha, a, b, beta, c),
            None => cpu::gemm_batch(self.cpu_kernel, self.threads, alpha, a, b, beta, c),
        }
    }
}
