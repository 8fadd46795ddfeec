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

use sgemm::MatRef;

/// The largest normalized error accepted: `sblat3`'s threshold, 16 units of `f32::EPSILON`.
pub const TOLERANCE: f64 = 16.0 * f32::EPSILON as f64;

/// The reference value of element `(i, j)` and the scale its error is measured against.
pub fn element(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c0: &MatRef, i: usize, j: usize) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0f64, 0.0f64);
    for p in 0..a.cols {
        let prod = a.at(i, p) as f64 * b.at(p, j) as f64;
        sum += prod;
        mag += prod.abs();
    }
    let alpha = alpha as f64;
    let (mut value, mut scale) = (alpha * sum, alpha.abs() * mag);
    if beta != 0.0 {
        let bc = beta as f64 * c0.at(i, j) as f64;
        value += bc;
        scale += bc.abs();
    }
    (value, scale)
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
/// [`TOLERANCE`] of each element's scale. `c0` is `C` as it was before the call.
pub fn compare(
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c0: &MatRef,
    c: &MatRef,
    rows: impl IntoIterator<Item = usize>,
) -> Comparison {
    let tol = TOLERANCE;
    let mut found = Comparison { max_error: 0.0, first_failure: None };
    for i in rows {
        for j in 0..c.cols {
            let (want, scale) = element(alpha, a, b, beta, c0, i, j);
            let got = c.at(i, j);
            let err = if got as f64 == want {
                0.0
            } else if scale > 0.0 && got.is_finite() {
                (got as f64 - want).abs() / scale
            } else {
                f64::INFINITY
            };
            found.max_error = found.max_error.max(err);
            let within = (got as f64 - want).abs() <= tol * scale;
            if !within && found.first_failure.is_none() {
                found.first_failure = Some((i, j, got, want));
            }
        }
    }
    found
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
