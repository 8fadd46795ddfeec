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
    InvalidArgument {
        /// The argument's position in the reference `sgemm`'s list.
        position: u8,
        /// Its name there (`transa`, `m`, ...).
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A leading dimension below `max(1, inner)`, the length of its matrix's contiguous rows
    /// (row-major) or columns (column-major): argument 8 (`lda`), 10 (`ldb`) or 13 (`ldc`).
    /// Position 0: a matrix outside a GEMM call ([`Gpu::alloc`](crate::Gpu::alloc), ...).
    #[error("{name} = {ld} is less than its minimum {min}{}", argument(*position))]
    LeadingDimension {
        /// The argument's position in `sgemm`'s list (0 outside a GEMM call).
        position: u8,
        /// `lda`, `ldb`, `ldc` or `ld`.
        name: &'static str,
        /// The leading dimension given.
        ld: usize,
        /// The smallest one the matrix allows.
        min: usize,
    },
    /// A slice cannot hold the matrix its shape and leading dimension declare: argument 7 (`a`),
    /// 9 (`b`) or 12 (`c`).
    #[error("{matrix} holds {len} elements; its matrix needs {needed}{}", argument(*position))]
    SliceTooShort {
        /// The array's position in `sgemm`'s list (0 outside a GEMM call).
        position: u8,
        /// `A`, `B`, `C` or `matrix`.
        matrix: &'static str,
        /// The elements the matrix spans.
        needed: usize,
        /// The elements the slice has.
        len: usize,
    },
    /// Two members of a batch's `C` share an element (a stride of 0, or one shorter than a
    /// member's span that makes them cross): the products would overwrite each other.
    #[error("members {first} and {second} of C overlap with stride {stride}: each product needs its own C")]
    OverlappingOutputs {
        /// The stride of `C`'s members.
        stride: usize,
        /// The first member that shares an element.
        first: usize,
        /// The member it shares it with.
        second: usize,
    },
    /// The lists of a batch differ in length, or their members in shape, layout or leading
    /// dimension where one is required.
    #[error("batch mismatch: {0}")]
    BatchMismatch(String),
    /// No usable CUDA driver or device.
    #[error("no CUDA GPU available: {0}")]
    NoGpu(String),
    /// A GPU older than the oldest architecture the embedded PTX targets.
    #[error("{name} has compute capability {major}.{minor}; the kernels need 8.0 or newer")]
    UnsupportedGpu {
        /// The device's name.
        name: String,
        /// Its compute capability, major part.
        major: i32,
        /// Its compute capability, minor part.
        minor: i32,
    },
    /// A kernel name that the chosen backend does not have.
    #[error("no kernel `{name}` on the {backend} backend (available: {available})")]
    UnknownKernel {
        /// The name asked for.
        name: String,
        /// `cpu` or `gpu`.
        backend: &'static str,
        /// The backend's kernels, comma-separated.
        available: String,
    },
    /// A CPU kernel whose instruction set (AVX-512, AVX2) this CPU does not have.
    #[error("the CPU kernel `{kernel}` needs an instruction set this CPU does not have")]
    UnsupportedCpu {
        /// The kernel asked for.
        kernel: &'static str,
    },
    /// A thread count of zero.
    #[error("the thread count must be at least 1")]
    ZeroThreads,
    /// The CPU worker threads could not be started.
    #[error("could not start the CPU worker threads: {0}")]
    ThreadPool(String),
    /// A shape the chosen kernel cannot launch (sizes past `u32`, grid past CUDA's limits).
    #[error("{m}x{n}x{k} is too large for `{kernel}`: {why}")]
    ShapeTooLarge {
        /// Rows of `C`.
        m: usize,
        /// Columns of `C`.
        n: usize,
        /// The inner dimension.
        k: usize,
        /// The kernel that cannot launch it.
        kernel: &'static str,
        /// The limit it passes.
        why: &'static str,
    },
    /// A device buffer of a GEMM belongs to another CUDA context than the [`Gpu`](crate::Gpu)
    /// handle it was given to (see [`Gpu::from_stream`](crate::Gpu::from_stream)).
    #[error("a device buffer belongs to another CUDA context than the GPU handle's")]
    WrongContext,
    /// The device could not allocate a buffer; the handle stays usable.
    #[error("out of device memory allocating {bytes} bytes")]
    OutOfDeviceMemory {
        /// The size of the allocation that failed.
        bytes: usize,
    },
    /// Any other CUDA driver failure (module load, launch, a fault inside a kernel).
    #[error("CUDA error while {during}: {source}")]
    Cuda {
        /// What the library was doing.
        during: &'static str,
        /// The driver's error.
        source: DriverError,
    },
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
