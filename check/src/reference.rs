//! The f64 reference both backends are checked against, and the error measure.
//!
//! For element `(i, j)` the reference is `alpha * sum_p A[i][p] * B[p][j] + beta * C0[i][j]`
//! computed in f64 (the `beta` term is left out when `beta == 0`: BLAS does not read `C` then).
//! The error of a result is measured relative to the magnitude the sum was built from,
//! `scale = |alpha| * sum_p |A[i][p] * B[p][j]| + |beta * C0[i][j]|`, the quantity the
//! floating-point error bound of a dot product is proportional to, so that cancellation never
//! divides by a tiny reference. This is the test ratio of the reference BLAS test program
//! `sblat3`, which requires it below `16 * eps` ([`TOLERANCE`]). The worst-case rounding bound
//! grows as `(k + 2) * eps`, but with inputs of both signs the errors of a long sum largely
//! cancel: the suite's largest error is a fraction of `eps` even at `k = 4097`.
//!
//! Operands are views ([`MatRef`]), so `op(A)` and `op(B)` are read through their layouts.

use sgemm::{Layout, MatRef};

/// The largest normalized error accepted: `sblat3`'s threshold, 16 units of `f32::EPSILON`.
pub const TOLERANCE: f64 = 16.0 * f32::EPSILON as f64;

/// The reference values of row `i` of `C` and the scales their errors are measured against,
/// `(value, scale)` for each column. The sums run in whichever order reads `B` contiguously
/// (along its rows when it is row-major, down its columns when column-major), so a row of a
/// large product costs `k x n` cache-friendly multiply-adds.
pub fn row(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c0: &MatRef, i: usize) -> Vec<(f64, f64)> {
    let (k, n) = (a.cols, b.cols);
    let a_row: Vec<f64> = (0..k).map(|p| a.at(i, p) as f64).collect();
    let mut sums = vec![(0.0f64, 0.0f64); n];
    match b.layout {
        // An empty B (k == 0 or n == 0) may be an empty slice: no products to add.
        _ if k == 0 || n == 0 => {}
        Layout::RowMajor => {
            for (p, &x) in a_row.iter().enumerate() {
                let b_row = &b.data[p * b.ld..][..n];
                for ((sum, mag), &y) in sums.iter_mut().zip(b_row) {
                    let prod = x * y as f64;
                    *sum += prod;
                    *mag += prod.abs();
                }
            }
        }
        Layout::ColMajor => {
            for (j, (sum, mag)) in sums.iter_mut().enumerate() {
                let b_col = &b.data[j * b.ld..][..k];
                for (&x, &y) in a_row.iter().zip(b_col) {
                    let prod = x * y as f64;
                    *sum += prod;
                    *mag += prod.abs();
                }
            }
        }
    }
    let alpha = alpha as f64;
    sums.iter()
        .enumerate()
        .map(|(j, &(sum, mag))| {
            let (mut value, mut scale) = (alpha * sum, alpha.abs() * mag);
            if beta != 0.0 {
                let bc = beta as f64 * c0.at(i, j) as f64;
                value += bc;
                scale += bc.abs();
            }
            (value, scale)
        })
        .collect()
}

/// What comparing a result with the reference found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// The largest normalized error `|c - ref| / scale` (infinite for NaN or Inf results, and
    /// for an inexact result where `scale == 0`).
    pub max_error: f64,
    /// The first element outside the tolerance: `(i, j, got, want)`.
    pub first_failure: Option<(usize, usize, f32, f64)>,
}

/// Compares the given rows of `c` with the reference, element by element, within
/// [`TOLERANCE`] of each element's scale. `c0` is `C` as it was before the call. The rows are
/// shared among the CPU's cores.
pub fn compare(
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c0: &MatRef,
    c: &MatRef,
    rows: impl IntoIterator<Item = usize>,
) -> Comparison {
    let rows: Vec<usize> = rows.into_iter().collect();
    let compare_row = |i: usize| -> Comparison {
        let mut found = Comparison { max_error: 0.0, first_failure: None };
        for (j, (want, scale)) in row(alpha, a, b, beta, c0, i).into_iter().enumerate() {
            let got = c.at(i, j);
            // An exact result beyond f32's range rounds to an infinity: that infinity is the
            // right answer, not an error.
            let exact = got as f64 == want || (got.is_infinite() && got == want as f32);
            let err = if exact {
                0.0
            } else if scale > 0.0 && got.is_finite() {
                (got as f64 - want).abs() / scale
            } else {
                f64::INFINITY
            };
            found.max_error = found.max_error.max(err);
            let within = exact || (got as f64 - want).abs() <= TOLERANCE * scale;
            if !within && found.first_failure.is_none() {
                found.first_failure = Some((i, j, got, want));
            }
        }
        found
    };
    // Threads pay for themselves only on large rows: the suite's thousands of small cases
    // run on the calling thread.
    let work = rows.len() * b.cols * a.cols;
    let threads = if work < PARALLEL_WORK {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |t| t.get()).min(rows.len())
    };
    let chunk = rows.len().div_ceil(threads).max(1);
    let per_chunk: Vec<Vec<Comparison>> = std::thread::scope(|scope| {
        let workers: Vec<_> = rows
            .chunks(chunk)
            .map(|chunk| scope.spawn(move || chunk.iter().map(|&i| compare_row(i)).collect::<Vec<_>>()))
            .collect();
        workers.into_iter().map(|w| w.join().expect("a reference worker panicked")).collect()
    });
    // Merged in row order: the first failure is the one of the earliest row.
    let mut found = Comparison { max_error: 0.0, first_failure: None };
    for r in per_chunk.into_iter().flatten() {
        found.max_error = found.max_error.max(r.max_error);
        found.first_failure = found.first_failure.or(r.first_failure);
    }
    found
}

/// The multiply-adds of a comparison below which it runs on the calling thread alone.
const PARALLEL_WORK: usize = 1 << 22;

/// How many rows of an `m x n` result with inner dimension `k` to check against the reference
/// ([`sample_rows`]): 16, fewer when `n x k` is past `2^28` (16384^2 on both), so that the
/// check stays within about `2^32` multiply-adds (a few seconds) at any size; never below 2.
pub fn sample_count(n: usize, k: usize) -> usize {
    ((1usize << 32) / n.saturating_mul(k).max(1)).clamp(2, 16)
}

/// Up to `count` row indices spread evenly over `0..rows`, always with the first and the last.
pub fn sample_rows(rows: usize, count: usize) -> Vec<usize> {
    if rows <= count {
        return (0..rows).collect();
    }
    let mut picked: Vec<usize> = (0..count).map(|s| s * (rows - 1) / (count - 1)).collect();
    picked.dedup();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_reads_b_in_either_layout_alike() {
        let (m, n, k) = (3, 5, 7);
        let a: Vec<f32> = (0..m * k).map(|x| x as f32 - 9.0).collect();
        let b: Vec<f32> = (0..k * n).map(|x| (x % 4) as f32 - 1.5).collect();
        let b_col: Vec<f32> = (0..k * n).map(|x| b[(x % k) * n + x / k]).collect();
        let c0 = vec![2.0f32; m * n];
        let (a, c0) = (MatRef::contiguous(&a, m, k), MatRef::contiguous(&c0, m, n));
        let (b_row, b_col) = (MatRef::contiguous(&b, k, n), MatRef::col_major(&b_col, k, n, k));
        for i in 0..m {
            let want: Vec<(f64, f64)> = (0..n)
                .map(|j| {
                    let prods = (0..k).map(|p| a.at(i, p) as f64 * b_row.at(p, j) as f64);
                    let (sum, mag) = prods.fold((0.0, 0.0), |(s, g), x| (s + x, g + x.abs()));
                    (0.5 * sum + 3.0 * 2.0, 0.5 * mag + 6.0)
                })
                .collect();
            assert_eq!(row(0.5, &a, &b_row, 3.0, &c0, i), want);
            assert_eq!(row(0.5, &a, &b_col, 3.0, &c0, i), want);
        }
    }

    /// A result whose exact value is beyond f32's range is right as the infinity it rounds to,
    /// and wrong as an infinity when the exact value is in range.
    #[test]
    fn an_overflowing_result_is_right_as_the_infinity_it_rounds_to() {
        let a = [3e38f32, 3e38];
        let b = [1.0f32, 1.0];
        let (a, b) = (MatRef::contiguous(&a, 1, 2), MatRef::contiguous(&b, 2, 1));
        let c0 = [0.0f32];
        let c0 = MatRef::contiguous(&c0, 1, 1);
        let got = |x: f32| {
            let c = [x];
            compare(1.0, &a, &b, 0.0, &c0, &MatRef::contiguous(&c, 1, 1), [0])
        };
        assert_eq!(got(f32::INFINITY).max_error, 0.0);
        assert_eq!(got(f32::INFINITY).first_failure, None);
        assert!(got(f32::NEG_INFINITY).first_failure.is_some());
        assert!(got(f32::MAX).first_failure.is_some());
        // 0.5 * 6e38 = 3e38 is in range: an infinity is wrong there.
        let c = [f32::INFINITY];
        let half = compare(0.5, &a, &b, 0.0, &c0, &MatRef::contiguous(&c, 1, 1), [0]);
        assert!(half.first_failure.is_some() && half.max_error.is_infinite());
    }

    #[test]
    fn the_sample_shrinks_with_the_row_cost() {
        assert_eq!(sample_count(4096, 4096), 16);
        assert_eq!(sample_count(16384, 16384), 16);
        assert_eq!(sample_count(32768, 32768), 4);
        assert_eq!(sample_count(1 << 20, 1 << 20), 2);
        assert_eq!(sample_count(0, 0), 16);
    }
}
