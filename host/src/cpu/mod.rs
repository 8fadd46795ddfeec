//! The CPU backend: the seeds' CPU ladder, one module per step.
//!
//! 1. [`naive`]: the `i, j, p` triple loop.
//! 2. [`loop_reordered`]: `i, p, j`, a contiguous vectorizable inner loop.
//! 3. [`cache_blocked`]: the same on tiles of `B` that stay in cache.
//! 4. [`packed`]: the BLIS design, packed panels around a register-blocked
//!    [`microkernel`] in one of three instruction sets ([`simd`]), on all cores.
//!
//! Every CPU kernel has the same contract: the operands are already checked
//! ([`check_gemm`](crate::matrix::check_gemm)), `m, n > 0`, `k > 0` and `alpha != 0` (the
//! dispatcher handles the other cases without calling a kernel), and `C` is not read when
//! `beta == 0`.

pub mod cache_blocked;
pub mod loop_reordered;
mod microkernel;
pub mod naive;
mod pack;
pub mod packed;
mod simd;

use crate::matrix::{MatMut, MatRef};
use crate::{Error, Result};

/// A CPU kernel: `C = alpha * A * B + beta * C` under the contract above, on `threads` threads
/// (the single-threaded steps of the ladder ignore it).
pub type CpuKernelFn =
    fn(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut, threads: usize) -> Result<()>;

/// One row of the CPU registry.
#[derive(Clone, Copy, Debug)]
pub struct CpuKernel {
    /// The name users pick it by (`gemm --backend cpu --kernel NAME`).
    pub name: &'static str,
    /// One line: the technique it adds.
    pub summary: &'static str,
    /// Whether it uses the thread count it is given.
    pub threaded: bool,
    /// Whether this CPU can run it (its instruction set is present).
    pub detected: fn() -> bool,
    /// The kernel.
    pub run: CpuKernelFn,
}

/// The packed kernel with microkernel `uk`, as a registry row.
macro_rules! packed_kernel {
    ($name:literal, $uk:path, $summary:literal) => {
        CpuKernel {
            name: $name,
            summary: $summary,
            threaded: true,
            detected: $uk.detected,
            run: |alpha, a, b, beta, c, threads| packed::gemm(&$uk, threads, alpha, a, b, beta, c),
        }
    };
}

/// Every CPU kernel, in ladder order. The automatic choice is the last one this CPU can run.
pub const CPU_KERNELS: &[CpuKernel] = &[
    naive::KERNEL,
    loop_reordered::KERNEL,
    cache_blocked::KERNEL,
    packed_kernel!(
        "packed_portable",
        microkernel::PORTABLE,
        "packed panels, 4x8 microkernel in portable Rust"
    ),
    #[cfg(target_arch = "x86_64")]
    packed_kernel!("packed_avx2", microkernel::AVX2, "packed panels, 6x16 AVX2+FMA microkernel"),
    #[cfg(target_arch = "x86_64")]
    packed_kernel!("packed_avx512", microkernel::AVX512, "packed panels, 12x32 AVX-512 microkernel"),
];

/// `C = beta * C` on the `m x n` block: the whole GEMM when `alpha == 0` or `k == 0`.
/// With `beta == 0`, `C` is overwritten with zeros and never read.
pub fn scale_c(beta: f32, c: &mut MatMut) {
    for i in 0..c.rows {
        let row = c.row_mut(i);
        if beta == 0.0 {
            row.fill(0.0);
        } else {
            row.iter_mut().for_each(|x| *x *= beta);
        }
    }
}

/// The kernel called `name`, or the automatic choice for `None`: the last kernel of the ladder
/// that this CPU can run. Naming a kernel whose instruction set this CPU lacks is an error.
pub fn kernel(name: Option<&str>) -> Result<&'static CpuKernel> {
    match name {
        None => {
            Ok(CPU_KERNELS.iter().rev().find(|k| (k.detected)()).expect("the portable kernels run anywhere"))
        }
        Some(name) => {
            let kernel = CPU_KERNELS.iter().find(|k| k.name == name).ok_or_else(|| Error::UnknownKernel {
                name: name.into(),
                backend: "cpu",
                available: CPU_KERNELS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
            })?;
            if (kernel.detected)() { Ok(kernel) } else { Err(Error::UnsupportedCpu { kernel: kernel.name }) }
        }
    }
}

/// The number of threads used when none is given: every core this process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `C = alpha * A * B + beta * C` on the CPU with `kernel` (the automatic choice for `None`) on
/// `threads` threads (all cores for `None`; `Some(0)` is an error).
///
/// Quick returns follow BLAS: nothing when `m == 0` or `n == 0`; `C = beta * C` without reading
/// `A` and `B` when `alpha == 0` or `k == 0`.
pub fn gemm(
    kernel: Option<&str>,
    threads: Option<usize>,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> Result<()> {
    crate::matrix::check_gemm(a, b, &c.as_ref())?;
    let kernel = self::kernel(kernel)?;
    let threads = match threads {
        Some(0) => return Err(Error::ZeroThreads),
        Some(t) => t,
        None => default_threads(),
    };
    if c.rows == 0 || c.cols == 0 {
        return Ok(());
    }
    if alpha == 0.0 || a.cols == 0 {
        scale_c(beta, c);
        Ok(())
    } else {
        (kernel.run)(alpha, a, b, beta, c, threads)
    }
}
