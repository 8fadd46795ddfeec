//! Matrix-vector products that arrive as GEMM: one row or one column of `C`, and products of a
//! few rows.
//!
//! With `m == 1` or `n == 1` every value of the large operand (call it `X`: `B` for one row of
//! `C`, `A` for one column) is used once, for one multiply-add: the product moves 4 bytes of `X`
//! per 2 flops and runs at the speed memory delivers `X`. Packing `X` would copy each value once
//! more, and the register tile would multiply a padded panel of `MR` rows (or `NR` columns) for
//! one, so here `X` is read where it lies, once, in the direction it is contiguous in. With a
//! few rows of `C` ([`Vector::few_rows`]) it is still so: each value of `B` is used for a few
//! multiply-adds, and a panel of `MR` rows would be mostly padding, so the rows of `C` are
//! computed together, as several *heads* against one `X = B^T`, each row of `X` read once for
//! all of them; likewise a few columns of `C`, against `X = A`:
//!
//! - **Rows of `C`'s direction contiguous** (rows of `C` with `B` row-major, columns with `A`
//!   column-major): `out_h += v_h[p] * X[p, ..]` for each step `p` and head `h`, scaled rows
//!   of `X` added to runs of accumulators that stay in L1 (half of it together:
//!   [`axpy_block`]), [`AXPY_ROWS`] rows a pass over them, each row of `X` loaded once for all
//!   heads and read as one long run in address order, the run the hardware prefetcher follows
//!   best. Each value of `out` is one sum over `p` in order per `kc` steps, fused multiply-adds
//!   from zero, then `alpha * sum + beta * out` (`beta` with the first sum, `1` after it): the
//!   packed path's sums ([`packed::sum_depth`]).
//! - **Rows along `k` contiguous** (rows of `C` with `B` column-major, columns with `A`
//!   row-major): `out_h[i] = v_h . X[i, ..]`, [`DOT_ROWS`] rows of `X` at a time against the
//!   vectors (made contiguous first if they are not), each row loaded once for all heads; a
//!   single head sums each row in `2 * LANES` partial sums, several in `LANES` each (the
//!   accumulators of all the heads stay in registers), added in a fixed order at the end. Past
//!   [`head_group`] heads ([`dot_blocked`]) the sums go over blocks of `K` small enough for the
//!   heads' vectors to stay in L1, each block's sum added to a running one in order.
//!
//! The threads split `out` into equal contiguous ranges, each computed as on one thread, so the
//! bits do not depend on the thread count. Nothing but `out` is written, and `out` is not read
//! when `beta == 0`.

use std::cell::RefCell;
use std::ops::Range;

use super::microkernel::Microkernel;
use super::scratch::{Scratch, with_scratch};
#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{LINE_FLOATS, Portable, Simd};
use super::{cache, packed, workers};
use crate::Result;
use crate::matrix::{Layout, MatMut, MatRef};

/// The values of `out` accumulated at once in the `axpy` form: half of this core's L1 (of 32 KB
/// when the CPU does not say) in whole cache lines, so the accumulators stay in L1 beside the
/// rows of `X` streaming through it.
fn axpy_block() -> usize {
    let half = cache::l1_bytes_or_default() / 2 / size_of::<f32>();
    (half / LINE_FLOATS).max(1) * LINE_FLOATS
}

/// The most groups of [`dot_head_group`] heads in the `dot` form over a column-major `B` (rows
/// of `C`): each group reads `X` (`B^T`) again from L3, where the packed path copies `B` once and
/// reads the copy from L2 for each panel of rows, so past a few groups the copy pays (where:
/// `docs/performance-notes.md`).
const DOT_GROUPS: usize = 2;

/// Rows of `X` against the vector at once in the `dot` form: `2 * DOT_ROWS` accumulators and
/// two vectors of `v`, within the 16 registers of AVX2.
const DOT_ROWS: usize = 4;

/// Whether an `m x n x k` product (`b`: the layout of `B`) is computed by `kernel`: a
/// matrix-vector product, a product of at most [`Vector::few_rows`] rows or columns in any
/// layouts, or of at most [`Vector::dot_rows`] rows over a column-major `B` that fits half of
/// this CPU's L3 (the `dot` form; a larger `B` goes to the packed path: the performance notes
/// say why).
pub fn applies(kernel: &Vector, (m, n, k): (usize, usize, usize), b: Layout) -> bool {
    let b_in_l3 =
        cache::l3_bytes().is_some_and(|l3| k.saturating_mul(n).saturating_mul(size_of::<f32>()) <= l3 / 2);
    m == 1
        || n == 1
        || m <= kernel.few_rows
        || n <= kernel.few_rows
        || (b == Layout::ColMajor && b_in_l3 && m <= kernel.dot_rows)
}

/// Whether a matrix-vector product (`m == 1` or `n == 1`, `b` its `B`) goes to [`gemv`] before
/// the unpacked tiles would take it as a small product: always for one column of `C` (the tile
/// would compute one of its `NR` columns), and for one row unless `B` is row-major and the tile
/// reads it from this core's L2 share, rows not a multiple of 4 KB apart
/// ([`unpacked::fits_one_thread`](super::unpacked::fits_one_thread)). A larger or column-major
/// `B` is read once here, in the direction it is contiguous in, where the tile would read its
/// rows from farther away or copy it first.
pub fn takes_first(uk: &Microkernel, m: usize, n: usize, k: usize, b: &MatRef) -> bool {
    n == 1 || (m == 1 && !(b.layout == Layout::RowMajor && super::unpacked::fits_one_thread(uk, m, n, k, b)))
}

/// The most heads computed at once, and so the most rows or columns of `C` a product computed
/// here has (each row of `X` is then loaded once for all of them): in the `axpy` form their
/// [`AXPY_ROWS`] broadcast values each, in the `dot` form their accumulators for [`DOT_ROWS`]
/// rows, stay in registers beside the rows of `X`: 4 heads within 32 registers (AVX-512), 2
/// within 16. With more rows the packed path, whose tile keeps `MR` rows in registers, is faster
/// (measured in `docs/performance-notes.md`).
const fn head_group<S: Simd>() -> usize {
    if S::REGISTERS >= 32 { 4 } else { 2 }
}

/// The most heads the `dot` form computes at once ([`dot_blocked`] past [`head_group`]): 8
/// within 32 registers (two rows of `X` a step: 16 accumulators, 8 vectors, a row of `X`), 4
/// within 16. Each row of `X` is loaded once for all of them, so that many rows of `C` over a
/// column-major `B` read `B` once, where the packed path would transpose it into panels.
const fn dot_head_group<S: Simd>() -> usize {
    if S::REGISTERS >= 32 { 8 } else { 4 }
}

/// Rows of `X` a step of [`dot_blocked`].
const BLOCKED_ROWS: usize = 2;
/// Rows of `X` whose running sums [`dot_blocked`] keeps at once (on the stack, for
/// [`MOST_HEADS`] heads: 8 KB): each block of the heads' vectors is loaded from L2 once a run.
const BLOCKED_RUN: usize = 256;
/// The most heads of any instruction set's [`dot_head_group`].
const MOST_HEADS: usize = 8;

/// The depth of [`dot_blocked`]'s blocks of `K` for `heads` heads: the heads' vectors of a block
/// fill half of this core's L1 (of 32 KB when the CPU does not say), in whole vectors of
/// `lanes`, so that they stay there while every row of `X` goes by.
fn dot_block(heads: usize, lanes: usize) -> usize {
    let values = cache::l1_bytes_or_default() / 2 / size_of::<f32>() / heads.max(1);
    (values / lanes).max(1) * lanes
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
    /// Products computed at once against the same `X` (`heads` rows of `C`), each with its own
    /// vector (`v_head` apart) and output (`out_head` apart); 1 except in the `axpy` form.
    heads: usize,
    v: *const f32,
    v_head: usize,
    v_stride: usize,
    out: *mut f32,
    out_head: usize,
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
    /// The most rows or columns of `C` of a product computed here in any layout
    /// ([`head_group`]).
    pub few_rows: usize,
    /// The most rows of `C` of a product computed here over a column-major `B`: [`DOT_GROUPS`]
    /// groups of [`dot_head_group`].
    pub dot_rows: usize,
}

impl Vector {
    /// The most rows of `C` computed here over a `B` in layout `b` (the heads are rows of `C`
    /// against `X = B^T`: the `dot` form when `B` is column-major).
    fn rows_of_c_at_most(&self, b: Layout) -> usize {
        if b == Layout::ColMajor { self.dot_rows } else { self.few_rows }
    }
}

thread_local! {
    /// The vector of a `dot` product, made contiguous.
    static V_COPY: Scratch = const { RefCell::new(Vec::new()) };
    /// The row of `X` of a product of one value, made contiguous.
    static X_COPY: Scratch = const { RefCell::new(Vec::new()) };
}

/// `C = alpha * A * B + beta * C` for a product that [`applies`] to `kernel`, under the contract of
/// [`CpuKernelFn`](super::CpuKernelFn), on up to `threads` threads; `kc` is the depth of the
/// sums of the `axpy` form.
///
/// # Safety
/// The CPU has `kernel`'s instruction set, and the product [`applies`] to it (with `m > 1` and
/// `n > 1`, `B` row-major: the `axpy` form is the one that computes several heads).
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
    // X, read once, as a `len x k` view, and the vectors v_h as the rows of a `heads x k` view;
    // C is row-major (the contract): a row's values 1 apart, a column's ldc.
    // The heads are the rows of C when they are few (with both few, when B is row-major: then the
    // axpy form runs), else its columns.
    let few = kernel.few_rows;
    let rows_of_c = m == 1
        || (n > 1 && m <= kernel.rows_of_c_at_most(b.layout) && (b.layout == Layout::RowMajor || n > few));
    let ((x, v), (out_head, out_stride)) = if rows_of_c {
        // out_h = row h of C, X(j, p) = B[p, j], v_h(p) = A[h, p].
        ((b.t(), *a), (c.ld, 1))
    } else {
        // out_h = column h of C, X(i, p) = A[i, p], v_h(p) = B[p, h].
        ((*a, b.t()), (1, c.ld))
    };
    let ((x_out, x_depth), (v_head, v_stride)) = (x.strides(), v.strides());
    let heads = v.rows;
    let gemv = Gemv {
        len: x.rows,
        depth: k,
        x: x.data.as_ptr(),
        x_out,
        x_depth,
        heads,
        v: v.data.as_ptr(),
        v_head,
        v_stride,
        out: c.data.as_mut_ptr(),
        out_head,
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
    // The dot form reads the vectors and X's rows contiguously; strided vectors are copied
    // first (then `k` apart), and so is a strided X, which is a vector (`len == 1`, as
    // `x_out != 1` means `x_depth == 1` otherwise).
    with_contiguous(&V_COPY, &v, v_stride == 1, |v_data| {
        with_contiguous(&X_COPY, &x, x_depth == 1, |x| {
            let v_head = if v_stride == 1 { v_head } else { k };
            let gemv = Gemv { x, x_depth: 1, v: v_data, v_head, v_stride: 1, ..gemv };
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
        view.copy_row_major(copy, view.cols);
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
        workers::thread_pool(threads)?.broadcast(|ctx| {
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

/// `out_h[range] = alpha * X v_h + beta * out_h[range]` for every head `h` in the `axpy` form
/// (`x_out == 1`): per run of values (the heads' runs together [`axpy_block`] values) and per
/// sum of `kc` steps, `acc_h += v_h(p) * X(run, p)` step by step, then
/// `out_h = alpha * acc_h + beta' * out_h`.
///
/// # Safety
/// As [`FormFn`].
#[inline(always)]
unsafe fn axpy<S: Simd>(g: &Gemv, range: Range<usize>) {
    // Each head's accumulators, `width` values in whole lines, together half the L1.
    let width = (axpy_block() / g.heads / LINE_FLOATS).max(1) * LINE_FLOATS;
    // A few KB per call and thread, next to a product of at least a few megaflops.
    let mut acc = vec![0.0f32; g.heads * width];
    for first in range.clone().step_by(width) {
        let len = width.min(range.end - first);
        for start in (0..g.depth).step_by(g.kc) {
            acc.fill(0.0);
            let end = g.depth.min(start + g.kc);
            let mut p = start;
            while p + AXPY_ROWS <= end {
                // SAFETY: v(h, p..p + AXPY_ROWS) for every head, and X(first.., p..) for `len`
                // values, lie inside their views.
                unsafe { add_rows::<S, AXPY_ROWS>(&mut acc, width, len, g, first, p) };
                p += AXPY_ROWS;
            }
            for p in p..end {
                // SAFETY: as above, for step p.
                unsafe { add_rows::<S, 1>(&mut acc, width, len, g, first, p) };
            }
            let beta = if start == 0 { g.beta } else { 1.0 };
            for (h, acc) in acc.chunks(width).enumerate() {
                for (l, &sum) in acc[..len].iter().enumerate() {
                    // SAFETY: out(h, first + l) is in this call's range.
                    unsafe { update(g, h, first + l, sum, beta) };
                }
            }
        }
    }
}

/// [`add_scaled`] for every head: all at once within a [`head_group`] (the products that
/// [`applies`] gives this form), else one at a time. Head `h`'s accumulators are
/// `acc[h * width..][..len]`.
///
/// # Safety
/// As [`add_scaled`], for every head.
#[inline(always)]
unsafe fn add_rows<S: Simd, const R: usize>(
    acc: &mut [f32],
    width: usize,
    len: usize,
    g: &Gemv,
    first: usize,
    p: usize,
) {
    let group = head_group::<S>();
    // SAFETY: the caller's promise, for all the heads or for head h.
    unsafe {
        match g.heads {
            1 => add_scaled::<S, R, 1>(acc, width, len, g, 0, first, p),
            2 => add_scaled::<S, R, 2>(acc, width, len, g, 0, first, p),
            3 if group >= 3 => add_scaled::<S, R, 3>(acc, width, len, g, 0, first, p),
            4 if group >= 4 => add_scaled::<S, R, 4>(acc, width, len, g, 0, first, p),
            heads => {
                for h in 0..heads {
                    add_scaled::<S, R, 1>(&mut acc[h * width..], width, len, g, h, first, p);
                }
            }
        }
    }
}

/// Steps of the `axpy` form added into the accumulators per pass over them: each accumulator
/// is loaded and stored once per `AXPY_ROWS` fused multiply-adds, and as many rows of `X` stream
/// in at once.
const AXPY_ROWS: usize = 4;

/// For heads `h0..h0 + H`: `acc_h += v_h(p) X(first.., p) + ... + v_h(p + R - 1) X(first..,
/// p + R - 1)` over `len` values, head `h0 + i`'s accumulators at `acc[i * width..]`; one fused
/// multiply-add per value and step, the steps in order (so the sums are those of one step at a
/// time), the last partial vector under a mask. The `R` rows of `X` are loaded once for the `H`
/// heads.
///
/// # Safety
/// The CPU has `S`'s instruction set; `acc` holds `(H - 1) * width + len` values; `v_h(p..p +
/// R)` for those heads and `X(first..first + len, p..p + R)` lie inside `g`'s views.
#[inline(always)]
unsafe fn add_scaled<S: Simd, const R: usize, const H: usize>(
    acc: &mut [f32],
    width: usize,
    len: usize,
    g: &Gemv,
    h0: usize,
    first: usize,
    p: usize,
) {
    let (whole, rest) = (len / S::LANES * S::LANES, len % S::LANES);
    let dst: [*mut f32; H] = std::array::from_fn(|i| acc[i * width..].as_mut_ptr());
    // SAFETY: each head's `dst` and each row hold `len` values; the last partial vector is
    // masked.
    unsafe {
        let s: [[S::V; R]; H] = std::array::from_fn(|i| {
            std::array::from_fn(|r| S::splat(*g.v.add((h0 + i) * g.v_head + (p + r) * g.v_stride)))
        });
        let rows: [*const f32; R] = std::array::from_fn(|r| g.x.add((p + r) * g.x_depth + first));
        for l in (0..whole).step_by(S::LANES) {
            let xs: [S::V; R] = std::array::from_fn(|r| S::load(rows[r].add(l)));
            for i in 0..H {
                let mut sum = S::load(dst[i].add(l));
                for r in 0..R {
                    sum = S::fma(s[i][r], xs[r], sum);
                }
                S::store(dst[i].add(l), sum);
            }
        }
        if rest > 0 {
            let mask = S::first(rest);
            let xs: [S::V; R] = std::array::from_fn(|r| S::load_masked(rows[r].add(whole), mask));
            for i in 0..H {
                let mut sum = S::load_masked(dst[i].add(whole), mask);
                for r in 0..R {
                    sum = S::fma(s[i][r], xs[r], sum);
                }
                S::store_masked(dst[i].add(whole), mask, sum);
            }
        }
    }
}

/// `out_h[i] = alpha * sum + beta * out_h[i]`, `out_h[i]` not read when `beta == 0`.
///
/// # Safety
/// `out_h(i)` lies inside `C` and is the caller's to write.
#[inline(always)]
unsafe fn update(g: &Gemv, h: usize, i: usize, sum: f32, beta: f32) {
    unsafe {
        let out = g.out.add(h * g.out_head + i * g.out_stride);
        *out = if beta == 0.0 { g.alpha * sum } else { beta.mul_add(*out, g.alpha * sum) };
    }
}

/// `out[range] = alpha * X v + beta * out[range]` in the `dot` form (`v_stride == 1`), for every
/// head, in groups of at most [`dot_head_group`] heads ([`dot_group`]; each group reads `X`).
///
/// # Safety
/// As [`FormFn`].
#[inline(always)]
unsafe fn dot<S: Simd>(g: &Gemv, range: Range<usize>) {
    let wide = dot_head_group::<S>();
    if g.heads <= wide {
        // SAFETY: the caller's promise.
        return unsafe { dot_group::<S>(g, range) };
    }
    for h0 in (0..g.heads).step_by(wide) {
        // SAFETY: heads h0.. are in range (the caller's promise).
        let group = unsafe {
            Gemv {
                heads: wide.min(g.heads - h0),
                v: g.v.add(h0 * g.v_head),
                out: g.out.add(h0 * g.out_head),
                ..*g
            }
        };
        // SAFETY: as above, for those heads.
        unsafe { dot_group::<S>(&group, range.clone()) };
    }
}

/// [`dot`] for one group of at most [`dot_head_group`] heads: up to [`head_group`] heads
/// [`DOT_ROWS`] rows of `X` at a time (then one), more [`dot_blocked`].
///
/// # Safety
/// As [`FormFn`], with `g.heads <= dot_head_group::<S>()`.
#[inline(always)]
unsafe fn dot_group<S: Simd>(g: &Gemv, range: Range<usize>) {
    let (group, wide) = (head_group::<S>(), dot_head_group::<S>());
    // SAFETY: the caller's promise, for all the heads or for head h.
    unsafe {
        match g.heads {
            1 => dot_range::<S, 1>(g, 0, range),
            2 => dot_range::<S, 2>(g, 0, range),
            3 if group >= 3 => dot_range::<S, 3>(g, 0, range),
            4 if group >= 4 => dot_range::<S, 4>(g, 0, range),
            3 if wide >= 3 => dot_blocked::<S, 3>(g, range),
            4 if wide >= 4 => dot_blocked::<S, 4>(g, range),
            5 if wide >= 5 => dot_blocked::<S, 5>(g, range),
            6 if wide >= 6 => dot_blocked::<S, 6>(g, range),
            7 if wide >= 7 => dot_blocked::<S, 7>(g, range),
            8 if wide >= 8 => dot_blocked::<S, 8>(g, range),
            heads => unreachable!("{heads} heads in a group of at most {wide}"),
        }
    }
}

/// [`dot`] for heads `h0..h0 + H`: [`DOT_ROWS`] rows of `X` at a time (then one).
///
/// # Safety
/// As [`FormFn`], for those heads.
#[inline(always)]
unsafe fn dot_range<S: Simd, const H: usize>(g: &Gemv, h0: usize, range: Range<usize>) {
    let mut i = range.start;
    while i + DOT_ROWS <= range.end {
        // SAFETY: rows i.. of X are in range.
        unsafe {
            if H == 1 { dot_rows::<S, DOT_ROWS>(g, h0, i) } else { dot_heads::<S, DOT_ROWS, H>(g, h0, i) }
        };
        i += DOT_ROWS;
    }
    for i in i..range.end {
        // SAFETY: as above.
        unsafe { if H == 1 { dot_rows::<S, 1>(g, h0, i) } else { dot_heads::<S, 1, H>(g, h0, i) } };
    }
}

/// [`dot`] for `H` heads past [`head_group`] (at most [`dot_head_group`]): the rows of `X` in
/// runs of [`BLOCKED_RUN`], and over each run `K` in blocks of [`dot_block`], each block's rows
/// [`BLOCKED_ROWS`] at a time against all the heads, each (row, head) summed over the block in
/// one vector of `LANES` partial sums, added in lane order ([`Simd::sum`]) to its running sum
/// (blocks in order, the first from zero); then `out = alpha * sum + beta * out`.
///
/// # Safety
/// As [`FormFn`].
#[inline(always)]
unsafe fn dot_blocked<S: Simd, const H: usize>(g: &Gemv, range: Range<usize>) {
    const R: usize = BLOCKED_ROWS;
    let block = dot_block(H, S::LANES);
    const { assert!(H <= MOST_HEADS, "the running sums hold MOST_HEADS heads") };
    let mut totals = [0.0f32; MOST_HEADS * BLOCKED_RUN];
    // SAFETY (the pointers): the heads' vectors are in range (the caller's promise).
    let vs: [*const f32; H] = std::array::from_fn(|h| unsafe { g.v.add(h * g.v_head) });
    for first in range.clone().step_by(BLOCKED_RUN) {
        let end = (first + BLOCKED_RUN).min(range.end);
        let mut p0 = 0;
        while p0 < g.depth {
            let p1 = (p0 + block).min(g.depth);
            let mut i = first;
            while i < end {
                let rows = R.min(end - i);
                // SAFETY: rows i..i + rows of X are in range (the caller's promise; a pair's
                // missing second row reads the first again).
                let acc = unsafe {
                    let x_rows: [*const f32; R] =
                        std::array::from_fn(|r| g.x.add((i + r.min(rows - 1)) * g.x_out));
                    partial_sums::<S, R, H>(x_rows, vs, p0..p1)
                };
                for r in 0..rows {
                    for h in 0..H {
                        let total = &mut totals[h * BLOCKED_RUN + i - first + r];
                        // SAFETY: the caller's instruction set.
                        let part = unsafe { S::sum(acc[r][h]) };
                        *total = if p0 == 0 { part } else { *total + part };
                    }
                }
                i += rows;
            }
            p0 = p1;
        }
        for h in 0..H {
            for i in first..end {
                // SAFETY: out's values `range` of head h are the caller's.
                unsafe { update(g, h, i, totals[h * BLOCKED_RUN + i - first], g.beta) };
            }
        }
    }
}

/// The sums over steps `steps` of `R` rows of `X` (from `rows`) against `H` vectors (from `vs`),
/// each (row, head) in one vector of `LANES` partial sums: whole vectors in order, then the last
/// `steps.len() % LANES` values under a mask.
///
/// # Safety
/// The CPU has `S`'s instruction set; each row and vector holds the values `steps`.
#[inline(always)]
unsafe fn partial_sums<S: Simd, const R: usize, const H: usize>(
    rows: [*const f32; R],
    vs: [*const f32; H],
    steps: Range<usize>,
) -> [[S::V; H]; R] {
    let whole = steps.start + steps.len() / S::LANES * S::LANES;
    // SAFETY: the caller's promise; the masked loads read only values below `steps.end`.
    unsafe {
        let mut acc = [[S::zero(); H]; R];
        // Index loops: iterator chains over `acc` kept it in memory, stored at every step.
        for p in (steps.start..whole).step_by(S::LANES) {
            let v: [S::V; H] = std::array::from_fn(|h| S::load(vs[h].add(p)));
            for r in 0..R {
                let x = S::load(rows[r].add(p));
                for h in 0..H {
                    acc[r][h] = S::fma(x, v[h], acc[r][h]);
                }
            }
        }
        if whole < steps.end {
            let mask = S::first(steps.end - whole);
            let v: [S::V; H] = std::array::from_fn(|h| S::load_masked(vs[h].add(whole), mask));
            for r in 0..R {
                let x = S::load_masked(rows[r].add(whole), mask);
                for h in 0..H {
                    acc[r][h] = S::fma(x, v[h], acc[r][h]);
                }
            }
        }
        acc
    }
}

/// Rows `i..i + R` of the `dot` form against heads `h0..h0 + H` (`H > 1`): each row of `X`
/// loaded once for all the heads, each (row, head) summed in one vector of `LANES` partial sums,
/// which are added in lane order at the end.
///
/// # Safety
/// As [`FormFn`], for those rows and heads.
#[inline(always)]
unsafe fn dot_heads<S: Simd, const R: usize, const H: usize>(g: &Gemv, h0: usize, i: usize) {
    unsafe {
        let rows: [*const f32; R] = std::array::from_fn(|r| g.x.add((i + r) * g.x_out));
        let vs: [*const f32; H] = std::array::from_fn(|h| g.v.add((h0 + h) * g.v_head));
        let acc = partial_sums::<S, R, H>(rows, vs, 0..g.depth);
        for (r, acc) in acc.iter().enumerate() {
            for (h, &acc) in acc.iter().enumerate() {
                update(g, h0 + h, i + r, S::sum(acc), g.beta);
            }
        }
    }
}

/// Rows `i..i + R` of the `dot` form.
///
/// # Safety
/// As [`FormFn`], for those rows.
#[inline(always)]
unsafe fn dot_rows<S: Simd, const R: usize>(g: &Gemv, h: usize, i: usize) {
    let step = 2 * S::LANES;
    let whole = g.depth / step * step;
    unsafe {
        let rows: [*const f32; R] = std::array::from_fn(|r| g.x.add((i + r) * g.x_out));
        let v0 = g.v.add(h * g.v_head);
        let mut acc = [[S::zero(); 2]; R];
        for p in (0..whole).step_by(step) {
            let v = [S::load(v0.add(p)), S::load(v0.add(p + S::LANES))];
            for (acc, row) in acc.iter_mut().zip(rows) {
                acc[0] = S::fma(S::load(row.add(p)), v[0], acc[0]);
                acc[1] = S::fma(S::load(row.add(p + S::LANES)), v[1], acc[1]);
            }
        }
        // The last `depth % (2 * LANES)` steps, a vector at a time under a mask.
        for (half, p) in (whole..g.depth).step_by(S::LANES).enumerate() {
            let mask = S::first(S::LANES.min(g.depth - p));
            let v = S::load_masked(v0.add(p), mask);
            for (acc, row) in acc.iter_mut().zip(rows) {
                acc[half] = S::fma(S::load_masked(row.add(p), mask), v, acc[half]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            update(g, h, i + r, S::sum(S::add(acc[0], acc[1])), g.beta);
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
            Vector {
                axpy: axpy_fn,
                dot: dot_fn,
                few_rows: head_group::<$simd>(),
                dot_rows: DOT_GROUPS * dot_head_group::<$simd>(),
            }
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
    use crate::cpu::{TestOperands, assert_same_bits};
    use crate::matrix::Layout;

    /// [`takes_first`]: every column of `C`; a row of `C` unless `B` is row-major, within the L2
    /// share and its rows off the 4 KB stride; nothing wider.
    #[test]
    fn matrix_vector_products_come_here_before_the_unpacked_tiles() {
        let uk = &crate::cpu::microkernel::PORTABLE;
        let data = vec![0.0f32; 1 << 20];
        let row_major = |rows, cols, ld| MatRef::new(&data, rows, cols, ld);
        assert!(takes_first(uk, 64, 1, 64, &row_major(64, 1, 1)));
        assert!(takes_first(uk, 1000, 1, 1000, &MatRef::col_major(&data, 1000, 1, 1000)));
        // One row: B small and off the stride stays with the tiles ...
        assert!(!takes_first(uk, 1, 200, 200, &row_major(200, 200, 200)));
        // ... not one whose rows are 4 KB apart, nor a column-major one (which they would copy).
        assert!(takes_first(uk, 1, 1024, 256, &row_major(256, 1024, 1024)));
        assert!(takes_first(uk, 1, 200, 200, &MatRef::col_major(&data, 200, 200, 200)));
        assert!(!takes_first(uk, 2, 200, 200, &row_major(200, 200, 200)));
    }

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
        let shapes = [
            (1, 1, 1),
            (1, 1, 45),
            (1, 5, 3),
            (1, 70, 33),
            (1, 4200, 9),
            (3, 1, 1),
            (77, 1, 40),
            (9, 1, 17),
            // A few rows (B row-major only): heads in groups and alone, runs of accumulators
            // cut by the L1 block and by a partial vector.
            (2, 70, 33),
            (3, 4200, 9),
            (4, 1000, 13),
            (4, 37, 1),
            // A few columns (A row-major only), likewise.
            (70, 2, 33),
            (4200, 3, 9),
            (1000, 4, 13),
            (37, 4, 1),
            // Up to 8 rows over a column-major B: blocks of K (one, several, a partial vector)
            // over runs of rows of X (one, several, a pair cut short); up to 16 in two groups
            // of heads (a full and a partial second group).
            (5, 70, 33),
            (8, 301, 4000),
            (7, 600, 1),
            (6, 257, 777),
            (16, 301, 1000),
            (11, 70, 33),
            (13, 600, 4001),
        ];
        for (name, kernel) in kernels() {
            for (m, n, k) in shapes {
                for (la, lb, alpha, beta) in
                    [(0, 0, 1.25, 0.0), (1, 0, 1.5, 0.5), (0, 1, -2.0, 1.0), (1, 1, 0.75, -3.0)]
                {
                    if !applies(&kernel, (m, n, k), layouts[lb]) {
                        continue;
                    }
                    let operands = TestOperands::new((m, n, k), (layouts[la], layouts[lb]), beta);
                    let (a, b, c0, ldc) = (operands.a(), operands.b(), &operands.c0, operands.ldc);
                    let case = format!("{name} {m}x{n}x{k} {:?} {:?} beta {beta}", layouts[la], layouts[lb]);
                    let mut first: Option<Vec<f32>> = None;
                    for threads in [1, 2, 3] {
                        let mut out = c0.clone();
                        let mut c = MatMut::new(&mut out, m, n, ldc);
                        // SAFETY: the kernel's instruction set was detected.
                        unsafe { gemv(&kernel, 7, threads, alpha, &a, &b, beta, &mut c) }.unwrap();
                        operands.assert_product(alpha, beta, &out, &case);
                        assert_same_bits(&mut first, out, &case, &format!("{threads} threads"));
                    }
                }
            }
        }
    }
}
