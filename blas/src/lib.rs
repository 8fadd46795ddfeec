//! SGEMM as a BLAS drop-in: the reference BLAS's `sgemm_` (Fortran), CBLAS's `cblas_sgemm`
//! (C) and MKL's strided batch `cblas_sgemm_batch_strided`, exported from a shared library (`libsgemm_blas.so`) and a static one
//! (`libsgemm_blas.a`), computed by the `sgemm` crate on the GPU or the CPU.
//!
//! Link it (`-lsgemm_blas`) or put it in front of the system BLAS (`LD_PRELOAD`): then a
//! program's SGEMM calls come here and every other BLAS routine still comes from the system
//! library. The C declarations are in `include/sgemm_blas.h`. The library exports `sgemm_`
//! (with the aliases `sgemm` and `SGEMM`), `cblas_sgemm`, their 64-bit-integer forms (under
//! OpenBLAS's `64_` suffix and the reference CBLAS's `_64`) and `cblas_sgemm_batch_strided`,
//! nothing else.
//!
//! Semantics are the reference implementations', end to end:
//! - the arguments are checked in the reference order, and a bad one is reported through the
//!   program's `xerbla_` (Fortran) or `cblas_xerbla` (CBLAS) with the reference's numbering
//!   (for a row-major `cblas_sgemm` in a program that has the reference CBLAS's `RowMajorStrg`,
//!   the reference's own convention, which its handlers map back), or, where the program has
//!   none, by printing the reference message (without the reference handlers' stop); the call
//!   returns with `C` untouched ([`xerbla`]);
//! - quick return when `m == 0`, `n == 0`, or `beta == 1` with `alpha == 0` or `k == 0`; `A`
//!   and `B` are not read when `alpha == 0` or `k == 0` (they may then be null), `C` is not read
//!   when `beta == 0`; nothing outside `C`'s `m x n` block is written;
//! - 32-bit integers (LP64), as the reference BLAS and the Debian and most distribution
//!   libraries use.
//!
//! Where a call runs is decided per call ([`routing`]): a usable GPU for products big enough
//! to pay for the copies, the CPU otherwise, with environment variables to steer it. One engine
//! serves the whole process, created on the first call, and calls from many threads at once
//! are safe. Nothing here panics across the boundary: a panic inside is caught, reported on
//! standard error, and the call returns.

pub mod args;
pub mod routing;
pub mod xerbla;

use std::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use sgemm::{MatMut, MatRef, Strided};

use crate::args::{
    CBLAS_COL_MAJOR, CBLAS_ROW_MAJOR, Checked, cblas_position, cblas_trans, check, column_major_call_position,
};
use crate::routing::Router;

/// Runs `f`, catching a panic so that it never crosses into the caller's language.
fn guarded(routine: &str, f: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(f)) {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("sgemm: internal error in {routine}, call abandoned: {what}");
    }
}

/// The column-major GEMM `call` on raw pointers, after its checks, for `batch` products whose
/// matrices lie `stride` elements apart in each operand (a single product is the batch of one):
/// builds views of exactly the spans the shapes cover and runs it. Fails only when members of
/// `C` overlap, with `C` untouched.
///
/// # Safety
/// The pointers hold the matrices `call` describes (column-major, with its leading
/// dimensions), every member of the batch, as BLAS requires; `A` and `B` are not touched when
/// `alpha == 0` or `k == 0`, `C` not at all on a quick return.
#[allow(clippy::too_many_arguments)]
unsafe fn run(
    routine: &str,
    call: Checked,
    batch: usize,
    alpha: f32,
    (a, a_stride): (*const f32, usize),
    (b, b_stride): (*const f32, usize),
    beta: f32,
    (c, c_stride): (*mut f32, usize),
) -> Result<(), sgemm::Error> {
    let Checked { trans_a, trans_b, m, n, k, lda, ldb, ldc } = call;
    if batch == 0 || m == 0 || n == 0 || ((alpha == 0.0 || k == 0) && beta == 1.0) {
        return Ok(());
    }
    if c.is_null() {
        eprintln!("sgemm: {routine}: C is a null pointer");
        return Ok(());
    }
    // The spans of the three operands, every member; one past what an address space holds
    // cannot describe memory the caller has (only 64-bit integers can say it), and is refused.
    let span = |ld: usize, rows: usize, cols: usize, stride: usize| -> Option<usize> {
        let member = ld.checked_mul(cols - 1)?.checked_add(rows)?;
        stride.checked_mul(batch - 1)?.checked_add(member).filter(|&len| len <= isize::MAX as usize / 4)
    };
    let (a_rows, a_cols) = if trans_a { (k, m) } else { (m, k) };
    let (b_rows, b_cols) = if trans_b { (n, k) } else { (k, n) };
    let product = alpha != 0.0 && k > 0;
    let spans = (
        span(ldc, m, n, c_stride),
        if product {
            span(lda, a_rows, a_cols, a_stride).zip(span(ldb, b_rows, b_cols, b_stride))
        } else {
            Some((0, 0))
        },
    );
    let (Some(c_len), Some((a_len, b_len))) = spans else {
        eprintln!("sgemm: {routine}: the matrices span more memory than an address space holds");
        return Ok(());
    };
    // SAFETY: the caller's C holds every member's ldc x (n - 1) + m elements (ldc >= m was
    // checked), the last one c_stride x (batch - 1) elements on.
    let c_data = unsafe { std::slice::from_raw_parts_mut(c, c_len) };
    let mut c = Strided::new(MatMut::col_major(c_data, m, n, ldc), c_stride);
    if !product {
        // The product is zero: `A` and `B` are not read (they may be null), so they are passed
        // as `m x 0` and `0 x n`, which is the same GEMM.
        let (a, b) = (MatRef::col_major(&[], m, 0, m), MatRef::col_major(&[], 0, n, 1));
        let (a, b) = (Strided::new(a, 0), Strided::new(b, 0));
        return Router::get().gemm_strided(routine, batch, alpha, &a, &b, beta, &mut c);
    }
    if a.is_null() || b.is_null() {
        eprintln!("sgemm: {routine}: A or B is a null pointer");
        return Ok(());
    }
    // A is stored m x k (k x m when transposed), B k x n (n x k), column-major.
    // SAFETY: the caller's A and B hold their stored matrices with the checked leading
    // dimensions, every member; the spans are exactly those elements.
    let (a_data, b_data) =
        unsafe { (std::slice::from_raw_parts(a, a_len), std::slice::from_raw_parts(b, b_len)) };
    let a = MatRef::col_major(a_data, a_rows, a_cols, lda);
    let b = MatRef::col_major(b_data, b_rows, b_cols, ldb);
    let a = Strided::new(if trans_a { a.t() } else { a }, a_stride);
    let b = Strided::new(if trans_b { b.t() } else { b }, b_stride);
    Router::get().gemm_strided(routine, batch, alpha, &a, &b, beta, &mut c)
}

/// The reference `SGEMM` on Fortran arguments (all by reference) whose integers are `I`.
///
/// # Safety
/// [`sgemm_`]'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn fortran_sgemm<I: Copy + Into<i64>>(
    routine: &str,
    transa: *const c_char,
    transb: *const c_char,
    m: *const I,
    n: *const I,
    k: *const I,
    alpha: *const f32,
    a: *const f32,
    lda: *const I,
    b: *const f32,
    ldb: *const I,
    beta: *const f32,
    c: *mut f32,
    ldc: *const I,
) {
    guarded(routine, || {
        // SAFETY: the caller's contract: readable scalars.
        let (transa, transb, alpha, beta) = unsafe { (*transa as u8, *transb as u8, *alpha, *beta) };
        let [m, n, k, lda, ldb, ldc] = [m, n, k, lda, ldb, ldc].map(|x| unsafe { (*x).into() });
        match check(transa, transb, m, n, k, lda, ldb, ldc) {
            // SAFETY: the caller's contract.
            Ok(call) => {
                // A single product: no members to overlap, so it does not fail.
                let _ = unsafe { run(routine, call, 1, alpha, (a, 0), (b, 0), beta, (c, 0)) };
            }
            // The 64-bit-integer entries report through a 64-bit XERBLA where there is one.
            Err(info) => xerbla::fortran(info, size_of::<I>() == size_of::<i64>()),
        }
    })
}

/// `cblas_sgemm` with integers `I`.
///
/// # Safety
/// [`cblas_sgemm`]'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn cblas<I: Into<i64>>(
    routine: &str,
    layout: c_int,
    transa: c_int,
    transb: c_int,
    m: I,
    n: I,
    k: I,
    alpha: f32,
    a: *const f32,
    lda: I,
    b: *const f32,
    ldb: I,
    beta: f32,
    c: *mut f32,
    ldc: I,
) {
    guarded(routine, || {
        let sizes = [m.into(), n.into(), k.into(), lda.into(), ldb.into(), ldc.into()];
        // The reference CBLAS's 64-bit routines report through its `cblas_xerbla_64`.
        let wide = routine.ends_with("_64");
        let report = |position, reference| xerbla::cblas(c"cblas_sgemm", position, reference, wide);
        let Some((row_major, call)) = cblas_checked(layout, transa, transb, sizes, report) else { return };
        let (a, b) = in_column_major_order(row_major, a, b);
        // SAFETY: the caller's contract. A single product has no members to overlap, so it
        // does not fail.
        let _ = unsafe { run(routine, call, 1, alpha, (a, 0), (b, 0), beta, (c, 0)) };
    })
}

/// A CBLAS call's layout, transposes and sizes (`m, n, k, lda, ldb, ldc`) checked as
/// `cblas_sgemm` checks them: whether it is row-major and the column-major call it is, or `None`
/// after reporting the first bad argument to `report`: its `cblas_sgemm` position in the
/// caller's list and, for a row-major call, the position the reference CBLAS reports for it
/// ([`column_major_call_position`]).
fn cblas_checked(
    layout: c_int,
    transa: c_int,
    transb: c_int,
    [m, n, k, lda, ldb, ldc]: [i64; 6],
    report: impl FnOnce(i32, Option<i32>),
) -> Option<(bool, Checked)> {
    let row_major = match layout {
        CBLAS_ROW_MAJOR => true,
        CBLAS_COL_MAJOR => false,
        _ => {
            report(1, None);
            return None;
        }
    };
    let report = |position| report(position, row_major.then(|| column_major_call_position(position)));
    let Some(ta) = cblas_trans(transa) else {
        report(2);
        return None;
    };
    let Some(tb) = cblas_trans(transb) else {
        report(3);
        return None;
    };
    let checked =
        if row_major { check(tb, ta, n, m, k, ldb, lda, ldc) } else { check(ta, tb, m, n, k, lda, ldb, ldc) };
    match checked {
        Ok(call) => Some((row_major, call)),
        Err(info) => {
            report(cblas_position(row_major, info));
            None
        }
    }
}

/// `(A, B)` as the column-major call reads them: a row-major call is the column-major
/// `C^T = op(B)^T op(A)^T`, the operands swapped as views of the same memory.
fn in_column_major_order<T>(row_major: bool, a: T, b: T) -> (T, T) {
    if row_major { (b, a) } else { (a, b) }
}

/// Exports the Fortran `SGEMM` under `$name` with integers `$int`.
macro_rules! fortran_entry {
    ($(#[$doc:meta])* $name:ident, $int:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every pointer is valid as the reference BLAS requires: the scalars readable, `A`, `B`
        /// and `C` holding their column-major matrices (`A` and `B` may be anything when
        /// `alpha == 0` or `k == 0`).
        #[unsafe(no_mangle)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            transa: *const c_char,
            transb: *const c_char,
            m: *const $int,
            n: *const $int,
            k: *const $int,
            alpha: *const f32,
            a: *const f32,
            lda: *const $int,
            b: *const f32,
            ldb: *const $int,
            beta: *const f32,
            c: *mut f32,
            ldc: *const $int,
        ) {
            // SAFETY: the same contract.
            unsafe {
                fortran_sgemm(stringify!($name), transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
            }
        }
    };
}

/// Exports `cblas_sgemm` under `$name` with integers `$int`.
macro_rules! cblas_entry {
    ($(#[$doc:meta])* $name:ident, $int:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `A`, `B` and `C` hold their matrices in `layout` as CBLAS requires (`A` and `B` may
        /// be anything when `alpha == 0` or `k == 0`).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            layout: c_int,
            transa: c_int,
            transb: c_int,
            m: $int,
            n: $int,
            k: $int,
            alpha: f32,
            a: *const f32,
            lda: $int,
            b: *const f32,
            ldb: $int,
            beta: f32,
            c: *mut f32,
            ldc: $int,
        ) {
            // SAFETY: the same contract.
            unsafe { cblas(stringify!($name), layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
        }
    };
}

fortran_entry! {
    /// The reference BLAS's `SGEMM`, Fortran calling convention: every argument by reference,
    /// column-major matrices, 32-bit integers. (gfortran's hidden lengths of `TRANSA` and
    /// `TRANSB` may follow; they are not needed, as only the first character counts.)
    sgemm_, c_int
}
fortran_entry! {
    /// [`sgemm_`] under the name some compilers and programs use without the underscore.
    sgemm, c_int
}
fortran_entry! {
    /// [`sgemm_`] under the upper-case name (Fortran compilers that keep the case).
    SGEMM, c_int
}
fortran_entry! {
    /// [`sgemm_`] with 64-bit integers (ILP64), under the `64_` suffix of ILP64 BLAS builds.
    sgemm_64_, i64
}
fortran_entry! {
    /// [`sgemm_64_`] under the name the PyPI wheels of numpy and SciPy call (their bundled
    /// OpenBLAS, `scipy-openblas64`, prefixes its symbols with `scipy_`).
    scipy_sgemm_64_, i64
}

cblas_entry! {
    /// CBLAS's `cblas_sgemm`: `layout` `CblasRowMajor` (101) or `CblasColMajor` (102),
    /// transposes `CblasNoTrans` (111), `CblasTrans` (112) or `CblasConjTrans` (113), 32-bit
    /// integers. A row-major call is the column-major `C^T = op(B)^T op(A)^T`, as in the
    /// reference CBLAS, and a bad argument is numbered as the reference CBLAS numbers it (the
    /// layout is 1, `ldc` 14).
    cblas_sgemm, c_int
}
cblas_entry! {
    /// [`cblas_sgemm`] with 64-bit integers (ILP64), under the `64_` suffix of ILP64 builds.
    cblas_sgemm64_, i64
}
cblas_entry! {
    /// [`cblas_sgemm64_`] under the `_64` suffix of the reference CBLAS's 64-bit-integer
    /// routines (LAPACK's `BUILD_INDEX64_EXT_API`); a bad argument goes to the program's
    /// `cblas_xerbla_64` where it has one.
    cblas_sgemm_64, i64
}
cblas_entry! {
    /// [`cblas_sgemm64_`] under the name the PyPI wheels of numpy and SciPy call (see
    /// [`scipy_sgemm_64_`]): `LD_PRELOAD` then reaches a pip-installed numpy too.
    scipy_cblas_sgemm64_, i64
}

/// MKL's `cblas_sgemm_batch_strided`, 32-bit integers: `C_i = alpha * op(A_i) * op(B_i) + beta
/// * C_i` for `i < batch_size`, member `i` of each operand `i * stride` elements after the
/// pointer (a stride of 0 gives every product the same `A` or `B`). Each product is checked and
/// computed as [`cblas_sgemm`] would; a bad argument is reported through `cblas_xerbla` with
/// this routine's numbering (the layout 1, `lda` 9, `stridea` 10, `ldb` 12, `strideb` 13, `ldc`
/// 16, `stridec` 17, `batch_size` 18): a negative count or stride, or a `stridec` that makes
/// members of `C` share an element (17). `batch_size == 0` returns at once.
///
/// # Safety
/// `A`, `B` and `C` hold every member of their batch in `layout` (`A` and `B` may be anything
/// when `alpha == 0` or `k == 0`).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cblas_sgemm_batch_strided(
    layout: c_int,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: f32,
    a: *const f32,
    lda: c_int,
    stridea: c_int,
    b: *const f32,
    ldb: c_int,
    strideb: c_int,
    beta: f32,
    c: *mut f32,
    ldc: c_int,
    stridec: c_int,
    batch_size: c_int,
) {
    let routine = "cblas_sgemm_batch_strided";
    // MKL's routine, whose numbering is the caller's list in either layout.
    let report = |position| xerbla::cblas(c"cblas_sgemm_batch_strided", position, None, false);
    guarded(routine, || {
        let sizes = [m, n, k, lda, ldb, ldc].map(i64::from);
        let at_batch_position = |position, _| report(batch_position(position));
        let Some((row_major, call)) = cblas_checked(layout, transa, transb, sizes, at_batch_position) else {
            return;
        };
        let count = |x: c_int, position| usize::try_from(x).map_err(|_| position);
        let counts = (count(stridea, 10), count(strideb, 13), count(stridec, 17), count(batch_size, 18));
        let (sa, sb, sc, batch) = match counts {
            (Ok(sa), Ok(sb), Ok(sc), Ok(batch)) => (sa, sb, sc, batch),
            (Err(p), ..) | (_, Err(p), ..) | (_, _, Err(p), _) | (.., Err(p)) => return report(p),
        };
        let (a, b) = in_column_major_order(row_major, (a, sa), (b, sb));
        // SAFETY: the caller's contract.
        let outcome = unsafe { run(routine, call, batch, alpha, a, b, beta, (c, sc)) };
        if outcome.is_err() {
            report(17);
        }
    })
}

/// The position in `cblas_sgemm_batch_strided`'s argument list of the `cblas_sgemm` argument at
/// `position`: the same up to `lda` (9), then each later one moved on by the strides before it.
fn batch_position(position: i32) -> i32 {
    match position {
        11 => 12, // ldb
        14 => 16, // ldc
        p => p,
    }
}
