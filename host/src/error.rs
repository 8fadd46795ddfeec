//! The one error type of the library: every bad input and every GPU failure is a variant.

use cudarc::driver::DriverError;

/// Everything that can go wrong in a GEMM call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The shapes of A, B and C do not chain (`A: m x k`, `B: k x n`, `C: m x n`).
    #[error("dimension mismatch: {0}")]
    DimensionMismatch(String),
    /// A leading dimension is smaller than the row length of its row-major matrix.
    #[error("leading dimension of {matrix} is {ld}, less than its row length {cols}")]
    LeadingDimension { matrix: &'static str, ld: usize, cols: usize },
    /// A slice cannot hold the matrix its shape and leading dimension declare.
    #[error(
        "{matrix} is declared {rows}x{cols} with leading dimension {ld}, which needs {needed} \
         elements, but its slice holds {len}"
    )]
    SliceTooShort { matrix: &'static str, rows: usize, cols: usize, ld: usize, needed: usize, len: usize },
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
    /// The device could not allocate a buffer; the handle stays usable.
    #[error("out of device memory allocating {bytes} bytes")]
    OutOfDeviceMemory { bytes: usize },
    /// Any other CUDA driver failure (module load, launch, a fault inside a kernel).
    #[error("CUDA error while {during}: {source}")]
    Cuda { during: &'static str, source: DriverError },
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a driver error, naming what the library was doing.
    pub(crate) fn cuda(during: &'static str) -> impl FnOnce(DriverError) -> Self {
        move |source| Error::Cuda { during, source }
    }
}
