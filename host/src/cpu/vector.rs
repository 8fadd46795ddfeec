//! Matrix-vector products that arrive as GEMM: one row or one column of `C`.
//!
//! With `m == 1` or `n == 1` every value of the large operand (call it `X`: `B` for one row of
//! `C`, `A` for one column) is used once, for one multiply-add: the product moves 4 bytes of `X`
//! per 2 flops and runs at the speed memory delivers `X`. Packing `X` would copy each value once
//! more, and the register tile would multiply a padded panel of `MR` rows (or `NR` columns) for
//! one, so here `X` is read where it lies, once, in the direction it is contiguous in:
//!
//! - **Rows of `C`'s direction contiguous** (one row of `C` with `B` row-major, one column with
//!   `A` column-major): `out += v[p] * X[p, ..]` for each step `p`, scaled rows of `X` added to
//!   a block of accumulators that stays in L1 (half of it: [`axpy_block`]), [`AXPY_ROWS`] rows a
//!   pass over it, each row of `X` read as one long run in address order, the run the hardware
//!   prefetcher follows best. Each value
//!   of `out` is one sum over `p` in order per `kc` steps, fused multiply-adds from zero, then
//!   `alpha * sum + beta * out` (`beta` with the first sum, `1` after it): the packed path's
//!   sums ([`packed::sum_depth`]).
//! - **Rows along `k` contiguous** (one row of `C` with `B` column-major, one column with `A`
//!   row-major): `out[i] = v . X[i, ..]`, [`DOT_ROWS`] rows of `X` at a time against the vector
//!   (made contiguous first if it is not), each row summed in `2 * LANES` partial sums that are
//!   added in a fixed order at the end.
//!
//! The threads split `out` into equal contiguous ranges, each computed as on one thread, so the
//! bits do not depend on the thread count. Nothing but `out` is written, and `out` is not read
//! when `beta == 0`.

use std::cell::RefCell;
use std::ops::Range;

use super::scratch::{Scratch, with_scratch};
#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{LINE_FLOATS, Portable, Simd};
use super::{cache, packed};
use crate::Result;
use crate::matrix::{MatMut, MatRef};

/// The values of `out` accumulated at once in the `axpy` form: half of this core's L1 (of 32 KB
/// when the CPU does not say) in whole cache lines, so the accumulators stay in L1 beside the
/// rows of `X` streaming through it.
fn axpy_block() -> usize {
    let half = cache::l1_bytes().unwrap_or(32 << 10) / 2 / size_of::<f32>();
    (half / LINE_FLOATS).max(1) * LINE_FLOATS
}

/// Rows of `X` against the vector at once in the `dot` form: `2 * DOT_ROWS` accumulators and
/// two vectors of `v`, within the 16 registers of AVX2.
const DOT_ROWS: usize = 4;

/// Whether an `m x n` product is a matrix-vector product, computed here.
pub fn applies(m: usize, n: usize) -> bool {
    m == 1 || n == 1
}

/// One matrix-vector product: `out[i * out_stride] = alpha * sum_p X(i, p) v(p) + beta * out`
/// for `i < len`, `p < depth`, with `X(i, p)` at `x[i * x_out + p * x_depth]` and `v(p)` at
/// `v[p * v_stride]`.
#[derive(Clone, Copy)]
struct Gemv {
    len: usize,
    depth: usize,
    x: *const f32,
    x_out: usize,
    x_depth: usize,
    v: *const f32,
    v_stride: usize,
    out: *mut f32,
    out_stride: usize,
    alpha: f32,
    beta: f32,
    /// The depth of each sum in the `axpy` form.
    kc: usize,
}

/// A form's kernel: `Gemv`'s `out` values `range`.
///
/// # Safety
/// The CPU has the kernel's instruction set; the pointers of the `Gemv` cover its extents; no
/// other thread touches `out`'s values `range` during the call; for the `dot` form,
/// `v_stride == 1`.
type FormFn = unsafe fn(&Gemv, Range<usize>);

/// The two forms' kernels for one instruction set.
#[derive(Clone, Copy, Debug)]
pub struct Vector {
    axpy: FormFn,
    dot: FormFn,
}

thread_local! {
    /// The vector of a `dot` product, made contiguous.
    static V_COPY: Scratch = const { RefCell::new(Vec::new()) };
    /// The row of `X` of a product of one value, made contiguous.
    static X_COPY: Scratch = const { RefCell::new(Vec::new()) };
}

/// `C = alpha * A * B + beta * C` for `m == 1` or `n == 1` ([`applies`]), under the contract of
/// [`CpuKernelFn`](super::CpuKernelFn), on up to `threads` threads; `kc` is the depth of the
/// sums of the `axpy` form.
///
/// # Safety
/// The CPU has `kernel`'s instruction set.
// The GEMM's five operands, and how to compute them: the kernels, the depth of a sum, threads.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv(
    kernel: &Vector,
    kc: usize,
    threads: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c: &mut MatMut,
) -> Result<()> {
    let (m, n, k) = (c.rows, c.cols, a.cols);
    // X, read once, as a `len x k` view, and the vector v; C is row-major (the contract): a
    // row's values 1 apart, a column's ldc.
    let (x, v, out_stride) = if m == 1 {
        // out = row 0 of C, X(j, p) = B[p, j], v(p) = A[0, p].
        (b.t(), *a, 1)
    } else {
        // out = column 0 of C, X(i, p) = A[i, p], v(p) = B[p, 0].
        (*a, *b, c.ld)
    };
    let ((x_out, x_depth), v_strides) = (x.strides(), v.strides());
    let v_stride = if v.rows == 1 { v_strides.1 } else { v_strides.0 };
    let gemv = Gemv {
        len: x.rows,
        depth: k,
        x: x.data.as_ptr(),
        x_out,
        x_depth,
        v: v.data.as_ptr(),
        v_stride,
        out: c.data.as_mut_ptr(),
        out_stride,
        alpha,
        beta,
        kc,
    };
    let threads = packed::worth_waking(threads, m, n, k);
    if x_out == 1 && gemv.len > 1 {
        // SAFETY: the caller detected the CPU; the views were checked against their slices.
        return unsafe { split(kernel.axpy, &gemv, threads) };
    }
    // The dot form reads v and X's rows contiguously; a strided one is a vector (X with `len ==
    // 1`, as `x_out != 1` means `x_depth == 1` otherwise), copied first.
    with_contiguous(&V_COPY, &v, v_stride == 1, |v| {
        with_contiguous(&X_COPY, &x, x_depth == 1, |x| {
            let gemv = Gemv { x, x_depth: 1, v, v_stride: 1, ..gemv };
            // SAFETY: as above, with contiguous vectors.
            unsafe { split(kernel.dot, &gemv, threads) }
        })
    })
}

/// Runs `f` on `view`'s values: in place when they are `contiguous`, else copied row-major into
/// this thread's `scratch`.
fn with_contiguous<R>(
    scratch: &'static std::thread::LocalKey<Scratch>,
    view: &MatRef,
    contiguous: bool,
    f: impl FnOnce(*const f32) -> R,
) -> R {
    if contiguous {
        return f(view.data.as_ptr());
    }
    with_scratch(scratch, view.rows * view.cols, |copy| {
        view.copy_row_major(copy);
        f(copy.as_ptr())
    })
}

/// Runs `form` on `threads` equal ranges of `gemv`'s `out`, one per thread.
///
/// # Safety
/// As [`FormFn`] for the whole of `out`.
unsafe fn split(form: FormFn, gemv: &Gemv, threads: usize) -> Result<()> {
    let threads = threads.min(gemv.len.div_ceil(MIN_RANGE)).max(1);
    let len = gemv.len;
    let range = |t: usize| len * t / threads..len * (t + 1) / threads;
    if threads == 1 {
        // SAFETY: the caller's promise, for all of out.
        unsafe { form(gemv, 0..gemv.len) };
    } else {
        let shared = Shared(*gemv);
        packed::thread_pool(threads)?.broadcast(|ctx| {
            // SAFETY: the ranges of the threads are disjoint and cover out.
            unsafe { form(shared.get(), range(ctx.index())) }
        });
    }
    Ok(())
}

/// The fewest values of `out` a thread computes: a range of a few cache lines, so that two
/// threads do not write one line of `out` in the `axpy` form.
const MIN_RANGE: usize = 64;

/// A `Gemv` shared by the threads of [`split`].
struct Shared(Gemv);
// SAFETY: the threads only read X and v, and each writes only its own range of out.
unsafe impl Sync for Shared {}

impl Shared {
    /// The product (a method, so that closures capture the whole `Shared`, not its field).
    fn get(&self) -> &Gemv {
        &self.0
    }
}

/// `out[range] = alpha * X v + beta * out[range]` in the `axpy` form (`x_out == 1`): per block
/// of [`axpy_block`] values and per sum of `kc` steps, `acc += v(p) * X(block, p)` step by step,
/// then `out = alpha * acc + beta' * out`.
///
/// # Safety
/// As [`FormFn`].
#[inline(always)]
unsafe fn axpy<S: Simd>(g: &Gemv, range: Range<usize>) {
    let block = axpy_block();
    // A few KB per call and thread, next to a product of at least a few megaflops.
    let mut acc = vec![0.0f32; block];
    for first in range.clone().step_by(block) {
        let acc = &mut acc[..block.min(range.end - first)];
        for start in (0..g.depth).step_by(g.kc) {
            acc.fill(0.0);
            let end = g.depth.min(start + g.kc);
            let mut p = start;
            while p + AXPY_ROWS <= end {
                // SAFETY: v(p..p + AXPY_ROWS), and X(first.., p..) for `acc.len()` values, lie
                // inside their views.
                unsafe { add_scaled::<S, AXPY_ROWS>(acc, g, first, p) };
                p += AXPY_ROWS;
            }
            for p in p..end {
                // SAFETY: as above, for step p.
                unsafe { add_scaled::<S, 1>(acc, g, first, p) };
            }
            let beta = if start == 0 { g.beta } else { 1.0 };
            for (l, &sum) in acc.iter().enumerate() {
                // SAFETY: out(first + l) is in this call's range.
                unsafe { update(g, first + l, sum, beta) };
            }
        }
    }
}

/// Steps of the `axpy` form added into the accumulators per pass over them: each accumulator
/// is loaded and stored once per `AXPY_ROWS` fused multiply-adds, and as many rows of `X` stream
/// in at once.
const AXPY_ROWS: usize = 4;

/// `acc += v(p) X(first.., p) + ... + v(p + R - 1) X(first.., p + R - 1)` over `acc.len()`
/// values, one fused multiply-add per value and step, the steps in order (so the sums are those
/// of one step at a time), the last partial vector under a mask.
///
/// # Safety
/// The CPU has `S`'s instruction set; `v(p..p + R)` and `X(first..first + acc.len(), p..p + R)`
/// lie inside `g`'s views.
#[inline(always)]
unsafe fn add_scaled<S: Simd, const R: usize>(acc: &mut [f32], g: &Gemv, first: usize, p: usize) {
    let (whole, rest) = (acc.len() / S::LANES * S::LANES, acc.len() % S::LANES);
    let dst = acc.as_mut_ptr();
    // SAFETY: `dst` and each row hold `acc.len()` values; the last partial vector is masked.
    unsafe {
        let s: [S::V; R] = std::array::from_fn(|r| S::splat(*g.v.add((p + r) * g.v_stride)));
        let rows: [*const f32; R] = std::array::from_fn(|r| g.x.add((p + r) * g.x_depth + first));
        for l in (0..whole).step_by(S::LANES) {
            let mut sum = S::load(dst.add(l));
            for r in 0..R {
                sum = S::fma(s[r], S::load(rows[r].add(l)), sum);
            }
            S::store(dst.add(l), sum);
        }
        if rest > 0 {
            let mask = S::first(rest);
            let mut sum = S::load_masked(dst.add(whole), mask);
            for r in 0..R {
                sum = S::fma(s[r], S::load_masked(rows[r].add(whole), mask), sum);
            }
            S::store_masked(dst.add(whole), mask, sum);
        }
    }
}

/// `out[i] = alpha * sum + beta * out[i]`, `out[i]` not read when `beta == 0`.
///
/// # Safety
/// `out(i)` lies inside `C` and is the caller's to write.
#[inline(always)]
unsafe fn update(g: &Gemv, i: usize, sum: f32, beta: f32) {
    unsafe {
        let out = g.out.add(i * g.out_stride);
        *out = if beta == 0.0 { g.alpha * sum } else { beta.mul_add(*out, g.alpha * sum) };
    }
}

/// `out[range] = alpha * X v + beta * out[range]` in the `dot` form (`v_stride == 1`):
/// [`DOT_ROWS`] rows of `X` at a time (then one), each against `v` in `2 * LANES` partial sums.
///
/// # Safety
/// As [`FormFn`].
#[inline(always)]
unsafe fn dot<S: Simd>(g: &Gemv, range: Range<usize>) {
    let mut i = range.start;
    while i + DOT_ROWS <= range.end {
        // SAFETY: rows i.. of X are in range.
        unsafe { dot_rows::<S, DOT_ROWS>(g, i) };
        i += DOT_ROWS;
    }
    for i in i..range.end {
        // SAFETY: as above.
        unsafe { dot_rows::<S, 1>(g, i) };
    }
}

/// Rows `i..i + R` of the `dot` form.
///
/// # Safety
/// As [`FormFn`], for those rows.
#[inline(always)]
unsafe fn dot_rows<S: Simd, const R: usize>(g: &Gemv, i: usize) {
    let step = 2 * S::LANES;
    let whole = g.depth / step * step;
    unsafe {
        let rows: [*const f32; R] = std::array::from_fn(|r| g.x.add((i + r) * g.x_out));
        let mut acc = [[S::zero(); 2]; R];
        for p in (0..whole).step_by(step) {
            let v = [S::load(g.v.add(p)), S::load(g.v.add(p + S::LANES))];
            for (acc, row) in acc.iter_mut().zip(rows) {
                acc[0] = S::fma(S::load(row.add(p)), v[0], acc[0]);
                acc[1] = S::fma(S::load(row.add(p + S::LANES)), v[1], acc[1]);
            }
        }
        // The last `depth % (2 * LANES)` steps, a vector at a time under a mask.
        for (half, p) in (whole..g.depth).step_by(S::LANES).enumerate() {
            let mask = S::first(S::LANES.min(g.depth - p));
            let v = S::load_masked(g.v.add(p), mask);
            for (acc, row) in acc.iter_mut().zip(rows) {
                acc[half] = S::fma(S::load_masked(row.add(p), mask), v, acc[half]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // 16: the most lanes of any instruction set.
            let mut lanes = [[0.0f32; 16]; 2];
            for (lane, &v) in lanes.iter_mut().zip(acc) {
                S::store(lane.as_mut_ptr(), v);
            }
            let sum = (0..S::LANES).map(|l| lanes[0][l] + lanes[1][l]).sum();
            update(g, i + r, sum, g.beta);
        }
    }
}

/// Defines `$name`, a [`Vector`] of `$simd` compiled under `$feature` (the instruction set's
/// `target_feature`, which the inlined forms inherit).
macro_rules! vector {
    ($(#[doc = $doc:literal])* $name:ident: $(#[$feature:meta])? $simd:ty) => {
        $(#[doc = $doc])*
        pub const $name: Vector = {
            $(#[$feature])?
            unsafe fn axpy_fn(g: &Gemv, range: Range<usize>) {
                // SAFETY: the contract of FormFn.
                unsafe { axpy::<$simd>(g, range) }
            }
            $(#[$feature])?
            unsafe fn dot_fn(g: &Gemv, range: Range<usize>) {
                // SAFETY: the contract of FormFn.
                unsafe { dot::<$simd>(g, range) }
            }
            Vector { axpy: axpy_fn, dot: dot_fn }
        };
    };
}

#[cfg(target_arch = "x86_64")]
vector!(
    /// The matrix-vector kernels in AVX-512.
    AVX512: #[target_feature(enable = "avx512f")] Avx512
);
#[cfg(target_arch = "x86_64")]
vector!(
    /// The matrix-vector kernels in AVX2 and FMA.
    AVX2: #[target_feature(enable = "avx2,fma")] Avx2
);
vector!(
    /// The matrix-vector kernels in portable Rust.
    PORTABLE: Portable
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::TestOperands;
    use crate::matrix::Layout;

    /// Each instruction set this CPU has.
    fn kernels() -> Vec<(&'static str, Vector)> {
        let mut kernels = vec![("portable", PORTABLE)];
        #[cfg(target_arch = "x86_64")]
        {
            if Avx2::detected() {
                kernels.push(("avx2", AVX2));
            }
            if Avx512::detected() {
                kernels.push(("avx512", AVX512));
            }
        }
        kernels
    }

    #[test]
    fn matrix_vector_products_are_right_write_only_c_and_keep_their_bits_on_any_thread_count() {
        let layouts = [Layout::RowMajor, Layout::ColMajor];
        // One row, one column and one value of C; lengths across the vectors, the blocks of
        // the axpy form and the partial sums of the dot form; kc = 7 splits the sums.
        let shapes =
            [(1, 1, 1), (1, 1, 45), (1, 5, 3), (1, 70, 33), (1, 4200, 9), (3, 1, 1), (77, 1, 40), (9, 1, 17)];
        for (name, kernel) in kernels() {
            for (m, n, k) in shapes {
                for (la, lb, alpha, beta) in
                    [(0, 0, 1.25, 0.0), (1, 0, 1.5, 0.5), (0, 1, -2.0, 1.0), (1, 1, 0.75, -3.0)]
                {
                    let operands = TestOperands::new((m, n, k), (layouts[la], layouts[lb]), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), operands.c0.clone(), operands.ldc);
                    let case = format!("{name} {m}x{n}x{k} {:?} {:?} beta {beta}", layouts[la], layouts[lb]);
                    let mut first: Option<Vec<f32>> = None;
                    for threads in [1, 2, 3] {
                        let mut out = c0.clone();
                        let mut c = MatMut::new(&mut out, m, n, ldc);
                        // SAFETY: the kernel's instruction set was detected.
                        unsafe { gemv(&kernel, 7, threads, alpha, &a, &b, beta, &mut c) }.unwrap();
                        for (idx, (&got, &was)) in out.iter().zip(&c0).enumerate() {
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
                            let err = (got as f64 - want).abs();
                            assert!(
                                err <= 1e-6 * scale.max(f64::MIN_POSITIVE),
                                "{case}: C[{i}, {j}] {got} against {want}"
                            );
                        }
                        match &first {
                            None => first = Some(out),
                            Some(one) => assert!(
                                one.iter().zip(&out).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "{case}: {threads} threads changed the bits"
                            ),
                        }
                    }
                }
            }
        }
    }
}
