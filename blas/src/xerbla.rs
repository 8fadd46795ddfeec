//! Reporting a bad argument the way BLAS does: through the program's `xerbla_` (Fortran
//! `SGEMM`) or `cblas_xerbla` (`cblas_sgemm`).
//!
//! Where the process has the reference CBLAS's global `RowMajorStrg` (the reference CBLAS
//! library and its test programs define it), a row-major `cblas_sgemm` reports its bad
//! argument as the reference does: at its place in the column-major call the reference makes
//! (`m` and `n`, `lda` and `ldb` swapped), with `RowMajorStrg` set to 1 while the handler runs,
//! which is how the reference's handlers know to map it back. Elsewhere the handler is given
//! the argument's place in the caller's list.
//!
//! The library holds weak references to both names and defines neither. So a program (or a
//! BLAS library loaded beside this one, when it is preloaded in front of the system's) that
//! defines one has it called, with the reference arguments, whether it links the shared or
//! the static library; and where the process has none, the library prints the reference
//! implementation's message and returns (the reference handlers stop the program: a drop-in
//! must never end its caller on bad input). Preloaded, the library thus replaces SGEMM and
//! nothing else: the system BLAS's own routines keep their own handler.

use std::ffi::{CStr, c_char, c_int, c_void};

/// Fortran's `XERBLA(SRNAME, INFO)`: the name's hidden length comes last (gfortran passes it as
/// `size_t`).
type Xerbla = unsafe extern "C" fn(*const c_char, *const c_int, usize);
/// `XERBLA_64(SRNAME, INFO)` of the reference BLAS's 64-bit-integer build (`INFO` `INTEGER*8`).
type Xerbla64 = unsafe extern "C" fn(*const c_char, *const i64, usize);
/// `cblas_xerbla(p, rout, form, ...)`: variadic in the reference CBLAS.
type CblasXerbla = unsafe extern "C" fn(c_int, *const c_char, *const c_char, ...);
/// `cblas_xerbla_64(p, rout, form, ...)`: the reference CBLAS's handler for its 64-bit-integer
/// routines (`cblas_sgemm_64`).
type CblasXerbla64 = unsafe extern "C" fn(i64, *const c_char, *const c_char, ...);

// The addresses of the process's `xerbla_` and `cblas_xerbla`, filled by the linker (static
// linking) or the dynamic loader (shared): weak undefined references, null where nothing
// defines the name. (A weak reference also makes the linker export an executable's own
// definition to the shared library.)
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
std::arch::global_asm!(
    ".weak xerbla_",
    ".weak cblas_xerbla",
    ".weak RowMajorStrg",
    ".weak cblas_xerbla_64",
    ".weak xerbla_64_",
    ".pushsection .data.rel.ro.sgemm_blas_handlers,\"aw\"",
    ".p2align 3",
    ".globl sgemm_blas_handlers",
    ".hidden sgemm_blas_handlers",
    "sgemm_blas_handlers:",
    ".quad xerbla_",
    ".quad cblas_xerbla",
    ".quad RowMajorStrg",
    ".quad cblas_xerbla_64",
    ".quad xerbla_64_",
    ".popsection",
);

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe extern "C" {
    /// `[xerbla_, cblas_xerbla, RowMajorStrg, cblas_xerbla_64, xerbla_64_]`, each null when
    /// the process does not define it.
    static sgemm_blas_handlers: [*const c_void; 5];
}

/// Places in `sgemm_blas_handlers`.
const XERBLA: usize = 0;
const CBLAS_XERBLA: usize = 1;
const ROW_MAJOR_STRG: usize = 2;
const CBLAS_XERBLA_64: usize = 3;
const XERBLA_64: usize = 4;

/// The address of the process's symbol at `index` of `[xerbla_, cblas_xerbla, RowMajorStrg,
/// cblas_xerbla_64, xerbla_64_]`, if it has one.
fn handler(index: usize) -> Option<*const c_void> {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: a read-only table written once by the linker or loader.
        let address = unsafe { sgemm_blas_handlers[index] };
        (!address.is_null()).then_some(address)
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        let _ = index;
        None
    }
}

/// The handler to call among `(wide_index, index)` of `sgemm_blas_handlers`: with `wide`, the
/// 64-bit-integer one where the process has it, else the other; and whether it is the wide one.
fn chosen((wide_index, index): (usize, usize), wide: bool) -> Option<(*const c_void, bool)> {
    let wide_handler = handler(wide_index).filter(|_| wide).map(|address| (address, true));
    wide_handler.or(handler(index).map(|address| (address, false)))
}

/// Reports `SGEMM`'s bad argument `info` through the process's `xerbla_` (with `wide`, the
/// 64-bit-integer entries, its `xerbla_64_` first: the reference BLAS's handler in its
/// 64-bit-integer build), else prints it.
pub fn fortran(info: i32, wide: bool) {
    let name = b"SGEMM ";
    let Some((address, wide)) = chosen((XERBLA_64, XERBLA), wide) else {
        let name = String::from_utf8_lossy(name);
        eprintln!(" ** On entry to {:<6} parameter number {info:>2} had an illegal value", name.trim_end());
        return;
    };
    // SAFETY: the handlers have the Fortran XERBLA interface by BLAS's convention, `INFO` the
    // width of their build.
    unsafe {
        if wide {
            let xerbla: Xerbla64 = std::mem::transmute(address);
            xerbla(name.as_ptr().cast(), &i64::from(info), name.len());
        } else {
            let xerbla: Xerbla = std::mem::transmute(address);
            xerbla(name.as_ptr().cast(), &info, name.len());
        }
    }
}

/// Reports the bad argument at `position` (in the caller's list) of the CBLAS routine
/// `routine` through the process's `cblas_xerbla` (with `wide`, its `cblas_xerbla_64` first, the
/// reference's handler for 64-bit-integer routines), else prints it. `reference`: the position
/// the reference CBLAS reports for it in a row-major call, given to the handler with
/// `RowMajorStrg` set where the process has that global (see the module docs); `None` for a
/// column-major call or a routine without that convention.
pub fn cblas(routine: &CStr, position: i32, reference: Option<i32>, wide: bool) {
    let Some((address, wide)) = chosen((CBLAS_XERBLA_64, CBLAS_XERBLA), wide) else {
        eprintln!("Parameter {position} to routine {} was incorrect", routine.to_string_lossy());
        return;
    };
    let row_major = handler(ROW_MAJOR_STRG).map(|flag| flag.cast::<c_int>().cast_mut());
    let reported = match (row_major, reference) {
        (Some(_), Some(reference)) => reference,
        _ => position,
    };
    // SAFETY: `RowMajorStrg` is the reference's `int`.
    let set = |value: c_int| {
        if let Some(flag) = row_major {
            unsafe { flag.write_volatile(value) };
        }
    };
    set(c_int::from(reference.is_some()));
    // SAFETY: the handlers have the reference CBLAS interfaces; the format has no conversions,
    // so no variadic argument is read.
    unsafe {
        if wide {
            let xerbla: CblasXerbla64 = std::mem::transmute(address);
            xerbla(i64::from(reported), routine.as_ptr(), c"".as_ptr());
        } else {
            let xerbla: CblasXerbla = std::mem::transmute(address);
            xerbla(reported, routine.as_ptr(), c"".as_ptr());
        }
    }
    set(0);
}
