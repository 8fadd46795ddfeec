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
//! Members of `C` that lie apart in memory (`stride >= span`, the usual case) are split into
//! disjoint slices and may run side by side. Members interleaved with each other (heads side
//! by side in one wide matrix, `stride < ld`) share their slices' range, so they run one after
//! the other.

use super::{kernel, packed, run, thread_count, workers};
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
    let side_by_side = side_by_side(threads, batch, (c.rows, c.cols, a.cols)) && c_stride >= c_span;
    if !side_by_side {
        for i in 0..batch {
            let mut c_i = MatMut { data: &mut c.data[i * c_stride..], rows, cols, ld, layout };
            run(
                kernel,
                threads,
                alpha,
                &member(a, a_m.stride, i),
                &member(b, b_m.stride, i),
                beta,
                &mut c_i,
            )?;
        }
        return Ok(());
    }
    let members: Vec<_> = c.data.chunks_mut(c_stride.max(1)).take(batch).enumerate().collect();
    workers::for_each(threads, members, |(i, data)| {
        let mut c_i = MatMut { data, rows, cols, ld, layout };
        run(kernel, 1, alpha, &member(a, a_m.stride, i), &member(b, b_m.stride, i), beta, &mut c_i)
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
    if !side_by_side(threads, c.len(), (first.rows, first.cols, a[0].cols)) {
        for ((a, b), c) in a.iter().zip(b).zip(c.iter_mut()) {
            run(kernel, threads, alpha, a, b, beta, c)?;
        }
        return Ok(());
    }
    let members: Vec<_> = a.iter().zip(b).zip(c.iter_mut()).collect();
    workers::for_each(threads, members, |((a, b), c)| run(kernel, 1, alpha, a, b, beta, c))
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
    fn small_members_run_side_by_side() {
        assert!(side_by_side(16, 32, (64, 64, 64)));
        assert!(side_by_side(16, 2, (64, 64, 64)));
        assert!(!side_by_side(16, 8, (2048, 2048, 2048)));
        assert!(side_by_side(16, 32, (2048, 2048, 2048)));
        assert!(!side_by_side(1, 32, (64, 64, 64)));
    }
}
