//! The one error type of the library: every bad input and every GPU failure is a variant.

use cudarc::driver::DriverError;

/// Everything that can go wrong in a GEMM call. New variants may come in minor releases.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The shapes of the views do not chain (`op(A): m x k`, `op(B): k x n`, `C: m x n`).
    #[error("dimension mismatch: {0}")]
    DimensionMismatch(String),
    /// An argument the reference BLAS `sgemm` rejects (its `xerbla` report): `position` is the
    /// argument's place in `sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c,
    /// ldc)`, `1` to `13`.
    #[error("argument {position} ({name}) of sgemm is invalid: {reason}")]
    InvalidArgument { position: u8, name: &'static str, reason: String },
    /// A leading dimension below `max(1, inner)`, the length of its matrix's contiguous rows
    /// (row-major) or columns (column-major): argument 8 (`lda`), 10 (`ldb`) or 13 (`ldc`).
    /// Position 0: a matrix outside a GEMM call ([`Gpu::alloc`](crate::Gpu::alloc), ...).
    #[error("{name} = {ld} is less than its minimum {min}{}", argument(*position))]
    LeadingDimension { position: u8, name: &'static str, ld: usize, min: usize },
    /// A slice cannot hold the matrix its shape and leading dimension declare: argument 7 (`a`),
    /// 9 (`b`) or 12 (`c`).
    #[error("{matrix} holds {len} elements; its matrix needs {needed}{}", argument(*position))]
    SliceTooShort { position: u8, matrix: &'static str, needed: usize, len: usize },
    /// No usable CUDA driver or device.
    #[error("no CUDA GPU available: {0}")]
    NoGpu(String),
    /// A GPU older than the oldest architecture the embedded PTX targets.
    #[error("{name} has compute capability {major}.{minor}; the kernels need 8.0 or newer")]
    UnsupportedGpu { name: String, major: i32, minor: i32 },
    /// A kernel name that the chosen backend does not have.
    #[error("no kernel `{name}` on the {backend} backend (available: {available})")]
    UnknownKernel { name: String, backend: &'static str, available: String },
    /// A CPU kernel whose instruction set (AVX-512, AVX2) this CPU does not have.
    #[error("the CPU kernel `{kernel}` needs an instruction set this CPU does not have")]
    UnsupportedCpu { kernel: &'static str },
    /// A thread count of zero.
    #[error("the thread count must be at least 1")]
    ZeroThreads,
    /// The CPU worker threads could not be started.
    #[error("could not start the CPU worker threads: {0}")]
    ThreadPool(String),
    /// A shape the chosen kernel cannot launch (sizes past `u32`, grid past CUDA's limits).
    #[error("{m}x{n}x{k} is too large for `{kernel}`: {why}")]
    ShapeTooLarge { m: usize, n: usize, k: usize, kernel: &'static str, why: &'static str },
    /// A device buffer of a GEMM belongs to another CUDA context than the [`Gpu`](crate::Gpu)
    /// handle it was given to (see [`Gpu::from_stream`](crate::Gpu::from_stream)).
    #[error("a device buffer belongs to another CUDA context than the GPU handle's")]
    WrongContext,
    /// The device could not allocate a buffer; the handle stays usable.
    #[error("out of device memory allocating {bytes} bytes")]
    OutOfDeviceMemory { bytes: usize },
    /// Any other CUDA driver failure (module load, launch, a fault inside a kernel).
    #[error("CUDA error while {during}: {source}")]
    Cuda { during: &'static str, source: DriverError },
}

/// `" (argument N of sgemm)"`, or nothing for position 0.
fn argument(position: u8) -> String {
    if position == 0 { String::new() } else { format!(" (argument {position} of sgemm)") }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a driver error, naming what the library was doing.
    pub(crate) fn cuda(during: &'static str) -> impl FnOnce(DriverError) -> Self {
        move |source| Error::Cuda { during, source }
    }
}
