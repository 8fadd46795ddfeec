//! The CPU backend: the seeds' CPU ladder, one module per step.
//!
//! 1. [`naive`]: the `i, j, p` triple loop.
//! 2. [`loop_reordered`]: `i, p, j`, a contiguous vectorizable inner loop.
//! 3. [`cache_blocked`]: the same on tiles of `B` that stay in cache.
//! 4. [`packed`]: the BLIS design, packed panels around a register-blocked
//!    [`microkernel`] in one of three instruction sets ([`simd`]), on all cores, blocked for
//!    the caches of the CPU it runs on ([`cache`]).
//!
//! Every CPU kernel has the same contract: the operands are already checked
//! ([`check_gemm`](crate::matrix::check_gemm)), `C` is row-major, `m, n > 0`, `k > 0` and
//! `alpha != 0` (the dispatcher handles the other cases without calling a kernel), and `C` is
//! not read when `beta == 0`. The packed kernels take `A` and `B` in either layout (packing
//! reads them, so a transpose costs nothing more); the earlier steps of the ladder take them
//! row-major, and the dispatcher hands them a row-major copy of a column-major operand.

mod batched;
mod cache;
pub mod cache_blocked;
pub mod loop_reordered;
mod microkernel;
pub mod naive;
pub(crate) mod pack;
pub mod packed;
mod scratch;
mod simd;
mod unpacked;
mod upcoming;
mod vector;
mod workers;

pub use batched::{gemm_batch, gemm_strided};

use crate::matrix::{Layout, MatMut, MatRef};
use crate::semantics::{Work, with_row_major_c, work};
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
    /// Whether it reads column-major `A` and `B` itself (else they arrive row-major).
    pub any_layout: bool,
    /// The kernel.
    pub run: CpuKernelFn,
}

/// The packed kernel with microkernel `uk`, as a registry row. In order:
/// - matrix-vector products that [`vector::takes_first`] go to `vector`, the same instruction
///   set's matrix-vector kernels;
/// - products that [`unpacked::fits`] go to `small`, the same register tile on the operands as
///   they lie, on the calling thread, and so do larger ones on one thread that
///   [`unpacked::fits_one_thread`];
/// - matrix-vector products and products of a few rows ([`vector::applies`]) go to `vector`;
/// - narrow ones ([`unpacked::fits_narrow`]) to `small` with their rows dealt to the threads;
/// - a few rows of tiles over a large `B` on one thread ([`unpacked::fits_striped`]) to `small`
///   in stripes of `B`;
/// - the rest to the packed path.
macro_rules! packed_kernel {
    ($name:literal, $uk:path, $small:path, $vector:path, $summary:literal) => {
        CpuKernel {
            name: $name,
            summary: $summary,
            threaded: true,
            detected: $uk.detected,
            any_layout: true,
            run: |alpha, a, b, beta, c, threads| {
                let (m, n, k) = (c.rows, c.cols, a.cols);
                let small = unpacked::fits(m, n, k, b.layout)
                    || (threads == 1 && unpacked::fits_one_thread(&$uk, m, n, k, b));
                if vector::takes_first(&$uk, m, n, k, b)
                    || (!small && vector::applies(&$vector, (m, n, k), b.layout))
                {
                    let kc = packed::sum_depth(&$uk, m, k);
                    // SAFETY: the dispatcher runs a kernel only where it is detected, and
                    // `vector` shares the microkernel's instruction set.
                    unsafe { vector::gemv(&$vector, kc, threads, alpha, a, b, beta, c) }
                } else if small {
                    // SAFETY: as above, for `small`.
                    unsafe { $small(alpha, a, b, beta, c, 0) };
                    Ok(())
                } else if unpacked::fits_narrow(&$uk, m, n, k) {
                    // SAFETY: as above; C is row-major (the contract).
                    unsafe { unpacked::by_rows($small, &$uk, threads, alpha, a, b, beta, c) }
                } else if threads == 1 && unpacked::fits_striped(&$uk, m, n, k, b) {
                    // SAFETY: as above.
                    unsafe { unpacked::striped($small, &$uk, alpha, a, b, beta, c) };
                    Ok(())
                } else {
                    packed::gemm(&$uk, threads, alpha, a, b, beta, c)
                }
            },
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
        unpacked::PORTABLE,
        vector::PORTABLE,
        "packed panels, 4x8 microkernel in portable Rust"
    ),
    #[cfg(target_arch = "x86_64")]
    packed_kernel!(
        "packed_avx2",
        microkernel::AVX2,
        unpacked::AVX2,
        vector::AVX2,
        "packed panels, 6x16 AVX2+FMA microkernel"
    ),
    #[cfg(target_arch = "x86_64")]
    packed_kernel!(
        "packed_avx512",
        microkernel::AVX512,
        unpacked::AVX512,
        vector::AVX512,
        "packed panels, 8x32 AVX-512 microkernel"
    ),
];

/// A test product's operands: `A` (`m x k`) and `B` (`k x n`) in the given layouts and a
/// row-major `C`, each inside a larger buffer (three spare values per line, two spare lines) of
/// values in `[-1, 1.75]`; `C` is NaN throughout when `beta == 0`, where it must not be read.
#[cfg(test)]
pub(crate) struct TestOperands {
    shape: (usize, usize, usize),
    a: (Vec<f32>, usize, Layout),
    b: (Vec<f32>, usize, Layout),
    /// `C`'s buffer before the product.
    pub c0: Vec<f32>,
    pub ldc: usize,
}

#[cfg(test)]
impl TestOperands {
    pub(crate) fn new((m, n, k): (usize, usize, usize), (la, lb): (Layout, Layout), beta: f32) -> Self {
        // A view of `rows x cols` in `layout`, and its buffer, of values that `salt` varies.
        let view = |layout: Layout, rows: usize, cols: usize, salt: usize| {
            let ld = layout.extents(rows, cols).0 + 3;
            let len = ld * (layout.extents(rows, cols).1 + 2);
            ((0..len).map(|i| ((i * 7 + salt * 13) % 23) as f32 / 8.0 - 1.0).collect::<Vec<f32>>(), ld)
        };
        let ((a, lda), (b, ldb)) = (view(la, m, k, 1), view(lb, k, n, 2));
        let (mut c0, ldc) = view(Layout::RowMajor, m, n, 3);
        if beta == 0.0 {
            c0.iter_mut().for_each(|x| *x = f32::NAN);
        }
        TestOperands { shape: (m, n, k), a: (a, lda, la), b: (b, ldb, lb), c0, ldc }
    }

    pub(crate) fn a(&self) -> MatRef<'_> {
        let (m, _, k) = self.shape;
        MatRef { data: &self.a.0, rows: m, cols: k, ld: self.a.1, layout: self.a.2 }
    }

    pub(crate) fn b(&self) -> MatRef<'_> {
        let (_, n, k) = self.shape;
        MatRef { data: &self.b.0, rows: k, cols: n, ld: self.b.1, layout: self.b.2 }
    }

    /// Asserts that `out`, the buffer of `C` after `C = alpha * A * B + beta * C`, holds on `C`'s
    /// block the `f64` sums within `1e-6` of their scale, and outside it the bits of before;
    /// `case` names the product in the messages.
    pub(crate) fn assert_product(&self, alpha: f32, beta: f32, out: &[f32], case: &str) {
        let ((m, n, k), ldc) = (self.shape, self.ldc);
        let (a, b) = (self.a(), self.b());
        for (idx, (&got, &was)) in out.iter().zip(&self.c0).enumerate() {
            let (i, j) = (idx / ldc, idx % ldc);
            if i >= m || j >= n {
                assert_eq!(got.to_bits(), was.to_bits(), "{case}: wrote outside C at {idx}");
                continue;
            }
            let (mut exact, mut size) = (0.0f64, 0.0f64);
            for p in 0..k {
                let (x, y) = (a.at(i, p) as f64, b.at(p, j) as f64);
                exact += x * y;
                size += (x * y).abs();
            }
            let old = if beta == 0.0 { 0.0 } else { was as f64 };
            let want = alpha as f64 * exact + beta as f64 * old;
            let scale = (alpha as f64).abs() * size + (beta as f64 * old).abs();
            assert!(
                (got as f64 - want).abs() <= 1e-6 * scale.max(f64::MIN_POSITIVE),
                "{case}: C[{i}, {j}] {got} against {want}"
            );
        }
    }
}

/// Asserts that `out` has the bits of the first result `first` holds (or keeps `out` as the
/// first), for results of one product that must not depend on `what` (a thread count).
#[cfg(test)]
pub(crate) fn assert_same_bits(first: &mut Option<Vec<f32>>, out: Vec<f32>, case: &str, what: &str) {
    match first {
        None => *first = Some(out),
        Some(one) => assert!(
            one.iter().zip(&out).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{case}: {what} changed the bits"
        ),
    }
}

/// `C = beta * C` on the `m x n` block: the whole GEMM when `alpha == 0` or `k == 0`.
/// With `beta == 0`, `C` is overwritten with zeros and never read.
pub(crate) fn scale_c(beta: f32, c: &mut MatMut) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let x = c.at_mut(i, j);
            *x = if beta == 0.0 { 0.0 } else { beta * *x };
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

/// `C = alpha * op(A) * op(B) + beta * C` on the CPU with `kernel` (the automatic choice for
/// `None`) on up to `threads` threads (all cores for `None`; `Some(0)` is an error; a product
/// gets one thread per 8 Mflop of work at most, as waking one costs more than a smaller share
/// saves). `op(A)` and `op(B)` are the views as given: pass `a.t()` for `A^T`. Any layout of
/// `C` works.
///
/// Quick returns follow the reference BLAS: nothing when `m == 0` or `n == 0`, or when
/// `beta == 1` and `alpha == 0` or `k == 0`; else `C = beta * C` without reading `A` and `B`
/// when `alpha == 0` or `k == 0`.
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
    run(self::kernel(kernel)?, thread_count(threads)?, alpha, a, b, beta, c)
}

/// The thread count of a call: all cores for `None`, an error for `Some(0)`.
fn thread_count(threads: Option<usize>) -> Result<usize> {
    match threads {
        Some(0) => Err(Error::ZeroThreads),
        Some(t) => Ok(t),
        None => Ok(default_threads()),
    }
}

/// [`gemm`] on checked operands, with the kernel and the thread count resolved.
fn run(
    kernel: &CpuKernel,
    threads: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> Result<()> {
    let (a, b, mut c) = with_row_major_c(*a, *b, c.rb_mut());
    match work(c.rows, c.cols, a.cols, alpha, beta) {
        Work::Nothing => return Ok(()),
        Work::ScaleC => {
            scale_c(beta, &mut c);
            return Ok(());
        }
        Work::Product => {}
    }
    let done = if kernel.any_layout {
        (kernel.run)(alpha, &a, &b, beta, &mut c, threads)
    } else {
        let (a_copy, b_copy) = (row_major_copy(&a), row_major_copy(&b));
        let a = a_copy.as_ref().map_or(a, |d| MatRef::contiguous(d, a.rows, a.cols));
        let b = b_copy.as_ref().map_or(b, |d| MatRef::contiguous(d, b.rows, b.cols));
        (kernel.run)(alpha, &a, &b, beta, &mut c, threads)
    };
    if threads > 1 {
        // The next call on as many threads may find the workers awake (packed::worth_waking).
        workers::call_ended(threads);
    }
    done
}

/// A row-major copy of a column-major view, for the kernels that read rows; `None` when the
/// view is row-major already.
fn row_major_copy(m: &MatRef) -> Option<Vec<f32>> {
    (m.layout == Layout::ColMajor).then(|| m.to_row_major())
}
