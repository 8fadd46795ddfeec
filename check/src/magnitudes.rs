//! The suite over magnitudes: products whose operands sit anywhere in the `f32` range, from
//! subnormal to near `f32::MAX`, alone or on unrelated scales, with rows and columns on scales
//! of their own.
//!
//! Each case is judged against two yardsticks on the same inputs: the f64
//! [`reference`](crate::reference) (the normalized error of `sblat3`) and the plain `f32`
//! answer, one fused multiply-add per term in order ([`f32_loop`]), which is what an `f32`
//! GEMM such as cuBLAS FP32 computes up to the order of its additions. A result passes when its
//! error is within the reference BLAS bound ([`TOLERANCE`]) or at most twice the `f32` loop's:
//! where `f32` arithmetic itself loses accuracy (results in the subnormal range), nothing may
//! lose much more; everywhere else the bound holds.
//!
//! Inputs are uniform in `(-1, 1)` times a scale; the shape (`m x n x k`) is the caller's, with
//! odd sizes the usual choice so that every tile has edges.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sgemm::{MatMut, MatRef};

use crate::reference::{self, TOLERANCE};
use crate::suite::GemmUnderTest;

/// How the entries of one operand are scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Every entry times this factor (the product with a value in `(-1, 1)` is rounded to
    /// `f32`, so factors below `f32::MIN_POSITIVE` give subnormal entries).
    All(f64),
    /// Row `i` (of `A`) or column `j` (of `B`) times `2^e`, `e` drawn uniformly from
    /// `-e_max..=e_max` per line.
    Lines(i32),
    /// The `K` dimension scaled: column `p` of `A` times `2^e_p`, row `p` of `B` times
    /// `2^-e_p`, `e_p` from `-e_max..=e_max`; every product keeps its magnitude, but each row of
    /// `A` and column of `B` spans `2 e_max` binades.
    Inner(i32),
    /// The middle row (of `A`) or column (of `B`) times `2^e`, the others as drawn: a kernel
    /// that decides per tile how to multiply meets one line that needs care among many that do
    /// not.
    Line(i32),
    /// Every entry in `+-[2^e, 2^(e + 1))` (a uniform mantissa and sign): one binade, with no
    /// entry near zero.
    Binade(i32),
}

/// One product of the suite: `C = A B` with `A` (`m x k`) and `B` (`k x n`) row-major.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

impl Case {
    /// Draws the operands for `a_scale` and `b_scale` with `seed`.
    pub fn new(
        name: String,
        (m, n, k): (usize, usize, usize),
        a_scale: Scale,
        b_scale: Scale,
        seed: u64,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut a: Vec<f64> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut b: Vec<f64> = (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut exponents = |len: usize, e_max: i32| -> Vec<f64> {
            (0..len).map(|_| 2f64.powi(rng.random_range(-e_max..=e_max))).collect()
        };
        let binade = |x: &mut f64, e: i32| *x = x.signum() * (1.0 + x.abs()) * 2f64.powi(e);
        match a_scale {
            Scale::All(f) => a.iter_mut().for_each(|x| *x *= f),
            Scale::Binade(e) => a.iter_mut().for_each(|x| binade(x, e)),
            Scale::Line(e) => a.iter_mut().skip(m / 2 * k).take(k).for_each(|x| *x *= 2f64.powi(e)),
            Scale::Lines(e) => {
                let rows = exponents(m, e);
                a.iter_mut().enumerate().for_each(|(i, x)| *x *= rows[i / k]);
            }
            Scale::Inner(e) => {
                let inner = exponents(k, e);
                a.iter_mut().enumerate().for_each(|(i, x)| *x *= inner[i % k]);
                b.iter_mut().enumerate().for_each(|(i, x)| *x /= inner[i / n]);
            }
        }
        match b_scale {
            Scale::All(f) => b.iter_mut().for_each(|x| *x *= f),
            Scale::Binade(e) => b.iter_mut().for_each(|x| binade(x, e)),
            Scale::Line(e) => {
                let line = b.iter_mut().enumerate().filter(|(i, _)| i % n == n / 2);
                line.for_each(|(_, x)| *x *= 2f64.powi(e));
            }
            Scale::Lines(e) => {
                let cols = exponents(n, e);
                b.iter_mut().enumerate().for_each(|(i, x)| *x *= cols[i % n]);
            }
            Scale::Inner(_) => {}
        }
        let to_f32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
        Self { name, m, n, k, a: to_f32(a), b: to_f32(b) }
    }
}

/// The cases at shape `(m, n, k)`: every decade of `A` alone (`B` in `(-1, 1)`), of `B`
/// alone, of both on reciprocal scales (`A 10^d`, `B 10^-d`) and on the same scale (as far as
/// the products stay finite), values up to `f32::MAX`, all-subnormal operands, rows and
/// columns on scales of their own, one row or column on a scale of its own, a scaled inner dimension, and operands of one binade each
/// at and just past the edges of the window inside which the tensor-core kernel needs no
/// scaling (`sgemm_kernels::production::window`). `step` thins the decades (1: every
/// decade).
pub fn cases((m, n, k): (usize, usize, usize), step: usize) -> Vec<Case> {
    let shape = (m, n, k);
    // Sums of k terms below 1e36 * k stay finite.
    let finite_sum = (f32::MAX as f64 / k as f64).log10().floor() as i32;
    let mut cases = Vec::new();
    let mut seed = 0u64;
    let mut push = |name: String, a: Scale, b: Scale| {
        seed += 1;
        cases.push(Case::new(name, shape, a, b, seed));
    };
    for d in (-45..=finite_sum).step_by(step) {
        push(format!("A 1e{d}"), Scale::All(10f64.powi(d)), Scale::All(1.0));
        push(format!("B 1e{d}"), Scale::All(1.0), Scale::All(10f64.powi(d)));
        if d.abs() <= 38 {
            push(format!("A 1e{d} B 1e{}", -d), Scale::All(10f64.powi(d)), Scale::All(10f64.powi(-d)));
        }
        if 2 * d >= -45 && 2 * d <= finite_sum {
            push(format!("A 1e{d} B 1e{d}"), Scale::All(10f64.powi(d)), Scale::All(10f64.powi(d)));
        }
    }
    push("A near MAX, B 1/k".into(), Scale::All(f32::MAX as f64), Scale::All(0.5 / k as f64));
    push("A subnormal, B 1e30".into(), Scale::All(1e-39), Scale::All(1e30));
    push("A 1e30, B subnormal".into(), Scale::All(1e30), Scale::All(1e-39));
    push("A 1e-40 B 1e35".into(), Scale::All(1e-40), Scale::All(1e35));
    push("A 1e-38 B 1e38".into(), Scale::All(1e-38), Scale::All(1e38));
    for e in [20, 60, 100] {
        push(format!("rows of A, columns of B 2^+-{e}"), Scale::Lines(e), Scale::Lines(e));
        push(format!("rows of A 2^+-{e}"), Scale::Lines(e), Scale::All(1.0));
        push(format!("columns of B 2^+-{e}"), Scale::All(1.0), Scale::Lines(e));
    }
    push("the middle row of A 2^-120".into(), Scale::Line(-120), Scale::All(1.0));
    push("the middle column of B 2^-120".into(), Scale::All(1.0), Scale::Line(-120));
    push("the middle row of A, column of B 2^-60".into(), Scale::Line(-60), Scale::Line(-60));
    for e in [20, 60] {
        push(format!("inner dimension 2^+-{e}"), Scale::Inner(e), Scale::All(1.0));
    }
    for (ea, eb) in [(-51, -51), (-52, -52), (47, 47), (48, 48), (-51, 47), (47, -52)] {
        if 2f64.powi(ea + eb + 2) * (k as f64) < f32::MAX as f64 {
            push(format!("A in 2^{ea}, B in 2^{eb}"), Scale::Binade(ea), Scale::Binade(eb));
        }
    }
    cases
}

/// `C = A B` in `f32`, one fused multiply-add per term in order of `k`: the yardstick of an
/// `f32` GEMM's accuracy (row-major, `m x n`).
pub fn f32_loop(case: &Case) -> Vec<f32> {
    let Case { m, n, k, a, b, .. } = case;
    (0..m * n)
        .map(|e| (0..*k).fold(0.0f32, |sum, p| a[e / n * k + p].mul_add(b[p * n + e % n], sum)))
        .collect()
}

/// What a case measured: the largest normalized error of the result under test, and of the
/// `f32` loop on the same inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub error: f64,
    pub f32_error: f64,
}

impl Outcome {
    /// Within the reference BLAS bound, or within twice the `f32` loop's error.
    pub fn passes(&self) -> bool {
        self.error <= TOLERANCE || self.error <= 2.0 * self.f32_error
    }
}

/// The largest normalized error of a row-major `m x n` result of `case` (`C = A B`).
pub fn error_of(case: &Case, c: &[f32]) -> f64 {
    let (a, b) = (MatRef::contiguous(&case.a, case.m, case.k), MatRef::contiguous(&case.b, case.k, case.n));
    let zero = vec![0.0f32; case.m * case.n];
    let c0 = MatRef::contiguous(&zero, case.m, case.n);
    let c = MatRef::contiguous(c, case.m, case.n);
    reference::compare(1.0, &a, &b, 0.0, &c0, &c, 0..case.m).max_error
}

/// Runs `gemm` on `case` and measures it beside the `f32` loop.
pub fn measure(case: &Case, mut gemm: impl GemmUnderTest) -> Result<Outcome, String> {
    let (a, b) = (MatRef::contiguous(&case.a, case.m, case.k), MatRef::contiguous(&case.b, case.k, case.n));
    let mut c = vec![f32::NAN; case.m * case.n];
    gemm(1.0, &a, &b, 0.0, &mut MatMut::contiguous(&mut c, case.m, case.n))
        .map_err(|e| format!("{}: returned {e}", case.name))?;
    Ok(Outcome { error: error_of(case, &c), f32_error: error_of(case, &f32_loop(case)) })
}

/// Runs every case of [`cases`] at `shape`; returns the failures (empty when all passed) and
/// every case's outcome.
pub fn run(
    shape: (usize, usize, usize),
    mut gemm: impl GemmUnderTest,
) -> (Vec<String>, Vec<(String, Outcome)>) {
    let mut failures = Vec::new();
    let mut outcomes = Vec::new();
    for case in cases(shape, 1) {
        match measure(&case, &mut gemm) {
            Ok(o) => {
                if !o.passes() {
                    failures.push(format!(
                        "{} ({}x{}x{}): error {:.3e}, f32 loop {:.3e}, tolerance {TOLERANCE:.3e}",
                        case.name, case.m, case.n, case.k, o.error, o.f32_error
                    ));
                }
                outcomes.push((case.name, o));
            }
            Err(e) => failures.push(e),
        }
    }
    (failures, outcomes)
}
