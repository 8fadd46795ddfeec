//! Batches on the CPU ([`crate::batch`]): the members spread over the threads.
//!
//! A product gets one thread per 8 Mflop at most (waking more costs more than a smaller share
//! saves), so a batch of small products would leave most cores idle if its members ran one
//! after the other. Members run side by side instead, one thread each (the caller and the
//! pool's workers take them as they come, [`workers`](super::workers), so unequal progress
//! evens out), when a member would not use more than one thread anyway or the batch has at
//! least two members per thread; otherwise (a few large members) one after the other, each on
//! the usual partition of all the threads.
//!
//! A thread that runs members one after the other tells each the member it runs next
//! ([`upcoming`](super::upcoming)), whose operands the small products' kernel asks into L2 as
//! it goes. So that a thread knows its next member, members side by side are dealt in runs of
//! consecutive ones ([`run_length`]), a few runs a thread.
//!
//! Members of `C` that lie apart in memory (`stride >= span`, the usual case) are split into
//! disjoint slices and may run side by side. Members interleaved with each other (heads side
//! by side in one wide matrix, `stride < ld`) share their slices' range, so they run one after
//! the other.

use super::upcoming::{self, Upcoming};
use super::{cache, kernel, packed, run, thread_count, workers};
use crate::Result;
use crate::batch::{Members, Strided, check_list, check_strided};
use crate::matrix::{MatMut, MatRef, span};

/// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for `i < batch`, strided (see
/// [`crate::batch`]); `kernel` and `threads` as for [`gemm`](super::gemm). The checks of
/// [`Engine::gemm_strided`](crate::Engine::gemm_strided).
#[allow(clippy::too_many_arguments)]
pub fn gemm_strided(
    kernel_name: Option<&str>,
    threads: Option<usize>,
    batch: usize,
    alpha: f32,
    a: &Strided<MatRef>,
    b: &Strided<MatRef>,
    beta: f32,
    c: &mut Strided<MatMut>,
) -> Result<()> {
    let (a_m, b_m) = (Members::of(&a.matrix, a.stride), Members::of(&b.matrix, b.stride));
    check_strided(batch, a_m, b_m, Members::of(&c.matrix.as_ref(), c.stride))?;
    let (kernel, threads) = (kernel(kernel_name)?, thread_count(threads)?);
    if batch == 0 {
        return Ok(());
    }

    let (a, b, c_stride) = (&a.matrix, &b.matrix, c.stride);
    let c = &mut c.matrix;
    let c_span = span(c.layout, c.rows, c.cols, c.ld);
    let (rows, cols, ld, layout) = (c.rows, c.cols, c.ld, c.layout);
    let operands = |i: usize| (member(a, a_m.stride, i), member(b, b_m.stride, i));
    let side_by_side = side_by_side(threads, batch, (c.rows, c.cols, a.cols)) && c_stride >= c_span;
    if !side_by_side {
        // Indices, not slices: interleaved members of C share their range, so only one at a
        // time is borrowed mutably.
        return in_order((0..batch).collect(), |i, next| {
            if let Some(&j) = next {
                let (a_next, b_next) = operands(j);
                let c_next = MatRef { data: &c.data[j * c_stride..], rows, cols, ld, layout };
                announce(&a_next, &b_next, &c_next);
            }
            let (a_i, b_i) = operands(i);
            let mut c_i = MatMut { data: &mut c.data[i * c_stride..], rows, cols, ld, layout };
            run(kernel, threads, alpha, &a_i, &b_i, beta, &mut c_i)
        });
    }
    let members: Vec<_> = c.data.chunks_mut(c_stride.max(1)).take(batch).enumerate().collect();
    workers::for_each(threads, runs_of(members, run_length(threads, batch)), |run_of| {
        in_order(run_of, |(i, data), next| {
            if let Some((j, data)) = next {
                let ((a_next, b_next), c_next) = (operands(*j), MatRef { data, rows, cols, ld, layout });
                announce(&a_next, &b_next, &c_next);
            }
            let ((a_i, b_i), mut c_i) = (operands(i), MatMut { data, rows, cols, ld, layout });
            run(kernel, 1, alpha, &a_i, &b_i, beta, &mut c_i)
        })
    })
}

/// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for each `i` of lists of equal length, whose
/// members have one shape and layout per operand (see [`crate::batch`]); `kernel` and
/// `threads` as for [`gemm`](super::gemm). Each member is checked as a single product.
pub fn gemm_batch(
    kernel_name: Option<&str>,
    threads: Option<usize>,
    alpha: f32,
    a: &[MatRef],
    b: &[MatRef],
    beta: f32,
    c: &mut [MatMut],
) -> Result<()> {
    check_list(a, b, c)?;
    let (kernel, threads) = (kernel(kernel_name)?, thread_count(threads)?);
    let Some(first) = c.first() else { return Ok(()) };
    let side_by_side = side_by_side(threads, c.len(), (first.rows, first.cols, a[0].cols));
    // Each member on one thread side by side, else on all of them.
    let member_threads = if side_by_side { 1 } else { threads };
    type Member<'m, 'a, 'b, 'c> = ((&'m MatRef<'a>, &'m MatRef<'b>), &'m mut MatMut<'c>);
    let run_member = |((a, b), c): Member, next: Option<&Member>| {
        if let Some(((a_next, b_next), c_next)) = next {
            announce(a_next, b_next, &c_next.as_ref());
        }
        run(kernel, member_threads, alpha, a, b, beta, c)
    };
    let members: Vec<_> = a.iter().zip(b).zip(c.iter_mut()).collect();
    if !side_by_side {
        return in_order(members, run_member);
    }
    let length = run_length(threads, members.len());
    workers::for_each(threads, runs_of(members, length), |run_of| in_order(run_of, run_member))
}

/// Runs `f` on each item of `items` in order, with the item after it (`None` for the last),
/// then forgets any next member `f` announced ([`announce`]) that no product took
/// ([`upcoming::set_next`]).
fn in_order<T>(items: Vec<T>, mut f: impl FnMut(T, Option<&T>) -> Result<()>) -> Result<()> {
    let mut items = items.into_iter().peekable();
    let mut done = Ok(());
    while let Some(item) = items.next() {
        done = f(item, items.peek());
        if done.is_err() {
            break;
        }
    }
    upcoming::set_next(None);
    done
}

/// How many consecutive members a thread takes at once when `batch` members run side by side
/// on `threads` threads: a few runs a thread, so that a worker that wakes late still finds
/// some ([`workers`]), and within a run each member's successor is known ([`upcoming`]).
fn run_length(threads: usize, batch: usize) -> usize {
    (batch / (RUNS_PER_THREAD * threads)).max(1)
}

/// How many runs of members [`run_length`] cuts for each thread.
const RUNS_PER_THREAD: usize = 4;

/// `items` in runs of `length` consecutive ones (the last may be shorter).
fn runs_of<T>(items: Vec<T>, length: usize) -> Vec<Vec<T>> {
    let mut runs = Vec::with_capacity(items.len().div_ceil(length));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        runs.push(items.by_ref().take(length).collect());
    }
    runs
}

/// Tells this thread's next product that it computes the member of operands `a`, `b`, `c`
/// after it ([`upcoming`]), as far as [`cache::ahead_bytes`]: what stays in L2 beside the
/// member it computes.
fn announce(a: &MatRef, b: &MatRef, c: &MatRef) {
    upcoming::set_next(Some(Upcoming::new(a, b, c, cache::ahead_bytes())));
}

/// Whether `batch` members of `m x n x k` run side by side, one thread each (see the
/// [module docs](self)), rather than one after the other on `threads` threads each.
fn side_by_side(threads: usize, batch: usize, (m, n, k): (usize, usize, usize)) -> bool {
    threads > 1 && batch > 1 && (packed::worth_waking(threads, m, n, k) == 1 || batch >= 2 * threads)
}

/// Member `i` of a strided operand whose first member is `x`.
fn member<'a>(x: &MatRef<'a>, stride: usize, i: usize) -> MatRef<'a> {
    MatRef { data: &x.data[i * stride..], ..*x }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_dealt_in_runs_of_consecutive_ones_a_few_runs_a_thread() {
        for (threads, batch) in [(2, 64), (16, 64), (16, 256), (3, 7), (16, 2), (4, 1000)] {
            let length = run_length(threads, batch);
            let runs = runs_of((0..batch).collect(), length);
            assert_eq!(runs.concat(), (0..batch).collect::<Vec<_>>(), "{threads} threads, {batch}");
            assert!(runs.iter().all(|r| !r.is_empty() && r.len() <= length));
            assert!(runs.len() >= (RUNS_PER_THREAD * threads).min(batch), "{threads} threads, {batch}");
        }
        assert_eq!(run_length(2, 64), 8);
    }

    #[test]
    fn in_order_passes_each_item_its_successor_and_stops_at_an_error() {
        let mut seen = Vec::new();
        let done = in_order(vec![1, 2, 3, 4], |x, next| {
            seen.push((x, next.copied()));
            upcoming::set_next(Some(Upcoming::default()));
            if x == 3 { Err(crate::Error::ZeroThreads) } else { Ok(()) }
        });
        assert!(done.is_err());
        assert_eq!(seen, [(1, Some(2)), (2, Some(3)), (3, Some(4))]);
        assert!(upcoming::take_next().is_none(), "a hint left behind is forgotten");
    }

    #[test]
    fn small_members_run_side_by_side() {
        assert!(side_by_side(16, 32, (64, 64, 64)));
        assert!(side_by_side(16, 2, (64, 64, 64)));
        assert!(!side_by_side(16, 8, (2048, 2048, 2048)));
        assert!(side_by_side(16, 32, (2048, 2048, 2048)));
        assert!(!side_by_side(1, 32, (64, 64, 64)));
    }
}
