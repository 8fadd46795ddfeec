//! The CPU peers of `gemm bench --peers` (built with the feature `cpu-peers`): OpenBLAS, the `gemm` crate and
//! `faer`, each computing `C = A B + beta C` on the same buffers as our kernels (`A` and `B` in
//! either layout, `C` row-major), with its thread count set explicitly.

use std::time::Duration;

use sgemm::MatRef;

/// A peer: its name, `run(threads, A, B, beta, C)` for `C = A B + beta C` (`C` row-major and
/// contiguous, `A` and `B` views in either layout), the betas it takes, and its settle time.
pub struct CpuPeer {
    pub name: &'static str,
    pub run: fn(usize, &MatRef, &MatRef, f32, &mut [f32]),
    /// Whether `run` takes any `beta`; if not, only 0 and 1 (`faer` replaces or adds to `C`):
    /// ask [`takes`](Self::takes).
    any_beta: bool,
    /// How long its worker threads keep spinning after a call returns: the harness waits that
    /// long (untimed) before the next contender runs, so that no contender is timed while
    /// another's idle threads still occupy the cores.
    pub settle: Duration,
}

impl CpuPeer {
    /// Whether `run` computes `C = A B + beta C` for this `beta`.
    pub fn takes(&self, beta: f32) -> bool {
        self.any_beta || beta == 0.0 || beta == 1.0
    }
}

/// How long OpenBLAS's workers spin after a call: 2^28 cycles (its default `THREAD_TIMEOUT`)
/// on a core of 2 GHz or faster (the measurements behind it: `docs/performance-notes.md`).
#[cfg(feature = "cpu-peers")]
const OPENBLAS_SPIN: Duration = Duration::from_millis(150);

/// Every CPU peer, or why this build has none.
pub fn peers() -> Result<&'static [CpuPeer], &'static str> {
    #[cfg(feature = "cpu-peers")]
    return Ok(&[
        CpuPeer { name: "openblas", run: openblas::sgemm, any_beta: true, settle: OPENBLAS_SPIN },
        // rayon's idle workers go to sleep within microseconds.
        CpuPeer { name: "gemm", run: gemm_crate, any_beta: true, settle: Duration::ZERO },
        CpuPeer { name: "faer", run: faer_crate, any_beta: false, settle: Duration::ZERO },
    ]);
    #[cfg(not(feature = "cpu-peers"))]
    Err("--peers on the CPU times OpenBLAS, gemm and faer: build gemm with `--features cpu-peers`")
}

/// OpenBLAS through its CBLAS interface, linked from the system library (Debian's
/// `libopenblas-dev`, the pthreads build).
#[cfg(feature = "cpu-peers")]
mod openblas {
    use std::ffi::c_int;

    use sgemm::MatRef;

    use sgemm::Layout;

    const ROW_MAJOR: c_int = 101;
    const NO_TRANS: c_int = 111;
    const TRANS: c_int = 112;

    #[link(name = "openblas")]
    unsafe extern "C" {
        #[allow(clippy::too_many_arguments)]
        fn cblas_sgemm(
            order: c_int,
            trans_a: c_int,
            trans_b: c_int,
            m: c_int,
            n: c_int,
            k: c_int,
            alpha: f32,
            a: *const f32,
            lda: c_int,
            b: *const f32,
            ldb: c_int,
            beta: f32,
            c: *mut f32,
            ldc: c_int,
        );
        fn openblas_set_num_threads(threads: c_int);
    }

    pub fn sgemm(threads: usize, a: &MatRef, b: &MatRef, beta: f32, c: &mut [f32]) {
        let dim = |x: usize| c_int::try_from(x).expect("bench sizes fit a C int");
        let (m, n, k) = (dim(a.rows), dim(b.cols), dim(a.cols));
        assert!(c.len() >= a.rows * b.cols);
        // A column-major view is the transpose of the row-major matrix its memory is.
        let op = |x: &MatRef| if x.layout == Layout::ColMajor { TRANS } else { NO_TRANS };
        // SAFETY: A (m x k, lda) and B (k x n, ldb), each row-major or read transposed, and C
        // (m x n, ldc = n) lie inside their slices (checked by the views' construction in the
        // harness and the assert).
        unsafe {
            openblas_set_num_threads(dim(threads));
            cblas_sgemm(
                ROW_MAJOR,
                op(a),
                op(b),
                m,
                n,
                k,
                1.0,
                a.data.as_ptr(),
                dim(a.ld),
                b.data.as_ptr(),
                dim(b.ld),
                beta,
                c.as_mut_ptr(),
                n,
            );
        }
    }
}

/// The `gemm` crate. Its scalars are `dst = alpha * dst + beta * lhs * rhs` (`dst` not read when
/// `read_dst` is false): our `beta` is its `alpha`, and its `beta` is 1.
#[cfg(feature = "cpu-peers")]
fn gemm_crate(threads: usize, a: &MatRef, b: &MatRef, beta: f32, c: &mut [f32]) {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    assert!(c.len() >= m * n);
    let parallelism = if threads == 1 { gemm::Parallelism::None } else { gemm::Parallelism::Rayon(threads) };
    // The views' distances between rows and between columns, as the crate takes them.
    let strides = |x: &MatRef| (x.strides().0 as isize, x.strides().1 as isize);
    let ((a_rs, a_cs), (b_rs, b_cs)) = (strides(a), strides(b));
    // SAFETY: every pointer and stride describes a matrix inside its slice.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            beta != 0.0,
            a.data.as_ptr(),
            a_cs,
            a_rs,
            b.data.as_ptr(),
            b_cs,
            b_rs,
            beta,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `faer`'s matrix multiply: `beta` 0 or 1 only (replace or add to `C`).
#[cfg(feature = "cpu-peers")]
fn faer_crate(threads: usize, a: &MatRef, b: &MatRef, beta: f32, c: &mut [f32]) {
    use faer::{Accum, Par};
    let (m, n) = (a.rows, b.cols);
    let par = if threads == 1 { Par::Seq } else { Par::rayon(threads) };
    fn view<'a>(x: &MatRef<'a>) -> faer::MatRef<'a, f32> {
        match x.layout {
            sgemm::Layout::RowMajor => {
                faer::MatRef::from_row_major_slice_with_stride(x.data, x.rows, x.cols, x.ld)
            }
            sgemm::Layout::ColMajor => {
                faer::MatRef::from_column_major_slice_with_stride(x.data, x.rows, x.cols, x.ld)
            }
        }
    }
    let (lhs, rhs) = (view(a), view(b));
    let dst = faer::MatMut::from_row_major_slice_mut(&mut c[..m * n], m, n);
    debug_assert!(beta == 0.0 || beta == 1.0, "faer takes beta 0 or 1");
    let accum = if beta == 0.0 { Accum::Replace } else { Accum::Add };
    faer::linalg::matmul::matmul(dst, accum, lhs, rhs, 1.0, par);
}
