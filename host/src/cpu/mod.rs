//! The CPU backend: the seeds' CPU ladder, one module per step.
//!
//! Every CPU kernel has the same contract: the operands are already checked
//! ([`check_gemm`](crate::matrix::check_gemm)), `m, n > 0`, `k > 0` and `alpha != 0` (the
//! dispatcher handles the other cases without calling a kernel), and `C` is not read when
//! `beta == 0`.

pub mod loop_reordered;
pub mod naive;

use crate::matrix::{MatMut, MatRef};

/// A CPU kernel: `C = alpha * A * B + beta * C` under the contract above.
pub type CpuKernelFn = fn(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut);

/// One row of the CPU registry.
#[derive(Clone, Copy, Debug)]
pub struct CpuKernel {
    /// The name users pick it by (`gemm --backend cpu --kernel NAME`).
    pub name: &'static str,
    /// One line: the technique it adds.
    pub summary: &'static str,
    /// The kernel.
    pub run: CpuKernelFn,
}

/// Every CPU kernel, in ladder order; the last one is the automatic choice.
pub const CPU_KERNELS: &[CpuKernel] = &[naive::KERNEL, loop_reordered::KERNEL];

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

/// The kernel called `name`, or the automatic choice (the last of the ladder) for `None`.
pub fn kernel(name: Option<&str>) -> crate::Result<&'static CpuKernel> {
    match name {
        None => Ok(CPU_KERNELS.last().expect("the CPU registry is not empty")),
        Some(name) => {
            CPU_KERNELS.iter().find(|k| k.name == name).ok_or_else(|| crate::Error::UnknownKernel {
                name: name.into(),
                backend: "cpu",
                available: CPU_KERNELS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
            })
        }
    }
}

/// `C = alpha * A * B + beta * C` on the CPU with `kernel` (the automatic choice for `None`).
///
/// Quick returns follow BLAS: nothing when `m == 0` or `n == 0`; `C = beta * C` without reading
/// `A` and `B` when `alpha == 0` or `k == 0`.
pub fn gemm(
    kernel: Option<&str>,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> crate::Result<()> {
    crate::matrix::check_gemm(a, b, &c.as_ref())?;
    let kernel = self::kernel(kernel)?;
    if c.rows == 0 || c.cols == 0 {
        return Ok(());
    }
    if alpha == 0.0 || a.cols == 0 {
        scale_c(beta, c);
    } else {
        (kernel.run)(alpha, a, b, beta, c);
    }
    Ok(())
}
