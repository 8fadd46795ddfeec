//! The correctness suite both backends run: the same cases for the CPU tests, the GPU tests
//! and `gemm selftest` (which is how the suite runs on a machine that has a GPU but no Rust
//! toolchain).
//!
//! Each case surrounds every operand with rogue values (padding between rows, from a leading
//! dimension larger than the row, and a tail after the last row), fills `C` with NaN when
//! `beta == 0` (it must not be read), runs the GEMM, then checks that nothing outside `C`'s
//! `m x n` block changed and compares `C` with the f64 [`reference`](crate::reference).

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::matrix::{MatMut, MatRef, span};
use crate::reference;

/// What the padding around every operand holds: large enough to wreck any result it leaks into.
pub const ROGUE: f32 = -1.0e10;

/// Extra elements after each operand's last row, checked to stay untouched.
const TAIL: usize = 5;

/// Above this many multiply-adds, only sampled rows are compared with the reference (every
/// element is still checked to be written and finite).
const FULL_CHECK_LIMIT: usize = 1 << 25;

/// One GEMM to check: shape, scalars, and the padding added to each leading dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    /// Added to every leading dimension (`lda = k + pad`, ...).
    pub pad: usize,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "m={} n={} k={} alpha={} beta={} ld+{}",
            self.m, self.n, self.k, self.alpha, self.beta, self.pad
        )
    }
}

/// `(alpha, beta)` pairs every small shape runs with: plain, accumulate, general, beta = 0 with
/// a negative alpha, alpha = 0 (C scaled, A and B not used), and both zero.
const SCALARS: &[(f32, f32)] = &[(1.0, 0.0), (1.0, 1.0), (0.7, 1.3), (-1.5, 0.0), (0.0, 1.3), (0.0, 0.0)];

/// Shapes `(m, n, k)` of the suite: tiny, around the 32 and 128 tile sizes, primes, tall and
/// skinny, `k = 1`, `k` larger than `m` and `n`, and empty dimensions.
fn small_shapes() -> Vec<(usize, usize, usize)> {
    let mut shapes = vec![(1, 1, 1), (7, 5, 3), (2, 3, 4)];
    for m in 31..=33 {
        for n in 31..=33 {
            for k in 31..=33 {
                shapes.push((m, n, k));
            }
        }
    }
    for t in [127, 128, 129] {
        shapes.extend([(t, 128, 128), (128, t, 128), (128, 128, t), (t, t, t)]);
    }
    shapes.extend([(61, 67, 71), (97, 89, 101), (251, 241, 239)]);
    shapes.extend([(1000, 3, 17), (3, 1000, 29), (517, 1, 33), (1, 517, 65)]);
    shapes.extend([(64, 64, 1), (100, 37, 1)]);
    shapes.extend([(5, 7, 1000), (33, 17, 4097)]);
    shapes.extend([(0, 5, 3), (4, 0, 3), (9, 5, 0)]);
    shapes
}

/// Large odd shapes, run with two scalar pairs only.
const LARGE_SHAPES: &[(usize, usize, usize)] = &[(1000, 1000, 1000), (4097, 129, 1000)];

/// Every case of the suite.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (i, (m, n, k)) in small_shapes().into_iter().enumerate() {
        for &(alpha, beta) in SCALARS {
            // Every other shape with padded leading dimensions.
            cases.push(Case { m, n, k, alpha, beta, pad: (i % 2) * 3 });
        }
    }
    for &(m, n, k) in LARGE_SHAPES {
        for (alpha, beta) in [(1.0, 0.0), (0.7, 1.3)] {
            cases.push(Case { m, n, k, alpha, beta, pad: 1 });
        }
    }
    cases
}

/// A GEMM under test, called as `gemm(alpha, A, B, beta, C)`.
pub trait GemmUnderTest: FnMut(f32, &MatRef, &MatRef, f32, &mut MatMut) -> crate::Result<()> {}
impl<F: FnMut(f32, &MatRef, &MatRef, f32, &mut MatMut) -> crate::Result<()>> GemmUnderTest for F {}

/// A buffer holding a `rows x cols` matrix with leading dimension `max(1, cols) + pad`, rogue values
/// in the padding and the tail, and `fill()` in the matrix.
fn operand(rows: usize, cols: usize, pad: usize, mut fill: impl FnMut() -> f32) -> (Vec<f32>, usize) {
    let ld = cols.max(1) + pad;
    let mut data = vec![ROGUE; span(rows, cols, ld) + TAIL];
    for i in (0..rows).filter(|_| cols > 0) {
        data[i * ld..i * ld + cols].iter_mut().for_each(|x| *x = fill());
    }
    (data, ld)
}

/// Runs one case with inputs drawn from `seed`; returns the largest normalized error, or a
/// description of what went wrong (naming the case and the seed).
pub fn run_case(case: &Case, seed: u64, mut gemm: impl GemmUnderTest) -> Result<f64, String> {
    let Case { m, n, k, alpha, beta, pad } = *case;
    let fail = |what: String| format!("{case} seed={seed}: {what}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut uniform = || rng.random_range(-1.0f32..1.0);
    let (a_buf, lda) = operand(m, k, pad, &mut uniform);
    let (b_buf, ldb) = operand(k, n, pad, &mut uniform);
    let (mut c_buf, ldc) =
        if beta == 0.0 { operand(m, n, pad, || f32::NAN) } else { operand(m, n, pad, &mut uniform) };
    let (a_before, b_before, c_before) = (a_buf.clone(), b_buf.clone(), c_buf.clone());

    let a = MatRef::new(&a_buf, m, k, lda);
    let b = MatRef::new(&b_buf, k, n, ldb);
    gemm(alpha, &a, &b, beta, &mut MatMut::new(&mut c_buf, m, n, ldc))
        .map_err(|e| fail(format!("returned {e}")))?;

    if a_buf != a_before || b_buf != b_before {
        return Err(fail("A or B changed".into()));
    }
    let in_block = |idx: usize| idx < span(m, n, ldc) && idx % ldc < n;
    if let Some(idx) = (0..c_buf.len()).find(|&i| !in_block(i) && c_buf[i].to_bits() != c_before[i].to_bits())
    {
        return Err(fail(format!("wrote C[{idx}] outside the {m}x{n} block (ldc={ldc})")));
    }
    if let Some(idx) = (0..c_buf.len()).find(|&i| in_block(i) && !c_buf[i].is_finite()) {
        return Err(fail(format!(
            "C[{}][{}] = {} (unwritten or NaN propagated)",
            idx / ldc,
            idx % ldc,
            c_buf[idx]
        )));
    }
    let rows = if m * n * k <= FULL_CHECK_LIMIT { (0..m).collect() } else { reference::sample_rows(m, 16) };
    let c0 = MatRef::new(&c_before, m, n, ldc);
    let found = reference::compare(alpha, &a, &b, beta, &c0, &MatRef::new(&c_buf, m, n, ldc), rows);
    match found.first_failure {
        None => Ok(found.max_error),
        Some((i, j, got, want)) => Err(fail(format!(
            "C[{i}][{j}] = {got}, reference {want} (max normalized error {:.2e}, tolerance {:.2e})",
            found.max_error,
            reference::tolerance(k)
        ))),
    }
}

/// Runs every case of [`cases`], each with its own seed; returns the failures (empty when all
/// passed) and the largest error seen.
pub fn run_suite(mut gemm: impl GemmUnderTest) -> (Vec<String>, f64) {
    let mut failures = Vec::new();
    let mut worst = 0.0f64;
    for (seed, case) in cases().iter().enumerate() {
        match run_case(case, seed as u64, &mut gemm) {
            Ok(err) => worst = worst.max(err),
            Err(msg) => failures.push(msg),
        }
    }
    (failures, worst)
}
