//! The correctness suite both backends run: the same cases for the CPU tests, the GPU tests,
//! the property tests and `gemm selftest` (which is how the suite runs on a machine that has a
//! GPU but no Rust toolchain).
//!
//! Each case stores `A`, `B` and `C` in a layout (row- or column-major), passes `A^T` or `B^T`
//! as transposed views where the case says so, surrounds every operand with rogue values
//! (`-1e10` and NaN in the padding from a leading dimension larger than the matrix, and in a
//! tail after it), fills `C` with NaN when `beta == 0` (it must not be read), runs the GEMM,
//! then checks that `A` and `B` are bit-identical, that nothing outside `C`'s `m x n` block
//! changed, and compares `C` with the f64 [`reference`](mod@crate::reference).
//!
//! Two sets of cases: [`cases`], shapes around the kernels' tiles and odd sizes up to 4097, and
//! [`blas_sweep`], the sweep of the reference BLAS test program `sblat3`: every `m, n, k` in
//! `{0, 1, 2, 3, 5, 9}` and the tile sizes plus or minus one, every transpose pair, both
//! layouts, `alpha` in `{0, 1, 0.7}`, `beta` in `{0, 1, 1.3}`.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use sgemm::matrix::{span, stored_shape};
use sgemm::{Layout, MatMut, MatRef};

use crate::reference;

/// What the padding around every operand holds, alternating with NaN: large enough to wreck
/// any result it leaks into.
pub const ROGUE: f32 = -1.0e10;

/// Extra elements after each operand's last row, checked to stay untouched.
const TAIL: usize = 5;

/// Above this many multiply-adds, only sampled rows are compared with the reference (every
/// element is still checked to be written and finite).
const FULL_CHECK_LIMIT: usize = 1 << 25;

/// One GEMM to check: `C = alpha * op(A) * op(B) + beta * C` with `op(A): m x k`,
/// `op(B): k x n`, every matrix stored in `layout` with `pad` added to its leading dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    /// Added to every leading dimension (`lda = inner + pad`, ...).
    pub pad: usize,
    /// `op(A) = A^T`: `A` is stored `k x m`.
    pub trans_a: bool,
    /// `op(B) = B^T`: `B` is stored `n x k`.
    pub trans_b: bool,
    /// How `A`, `B` and `C` are stored.
    pub layout: Layout,
}

impl Case {
    /// A row-major, untransposed case.
    pub fn new(m: usize, n: usize, k: usize, alpha: f32, beta: f32, pad: usize) -> Self {
        Self { m, n, k, alpha, beta, pad, trans_a: false, trans_b: false, layout: Layout::RowMajor }
    }

    /// The same case with transposes and layout `combo` of [`COMBOS`].
    pub fn with(self, (trans_a, trans_b, layout): (bool, bool, Layout)) -> Self {
        Self { trans_a, trans_b, layout, ..self }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |t: bool| if t { 'T' } else { 'N' };
        write!(
            f,
            "{:?} {}{} m={} n={} k={} alpha={} beta={} ld+{}",
            self.layout,
            op(self.trans_a),
            op(self.trans_b),
            self.m,
            self.n,
            self.k,
            self.alpha,
            self.beta,
            self.pad
        )
    }
}

/// Every transpose pair in both layouts: `(trans_a, trans_b, layout)`.
pub const COMBOS: [(bool, bool, Layout); 8] = [
    (false, false, Layout::RowMajor),
    (true, false, Layout::RowMajor),
    (false, true, Layout::RowMajor),
    (true, true, Layout::RowMajor),
    (false, false, Layout::ColMajor),
    (true, false, Layout::ColMajor),
    (false, true, Layout::ColMajor),
    (true, true, Layout::ColMajor),
];

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
    // A few rows with `n` and `k` multiples of 4 (the 16-byte entry of the GPU's few-row kernel
    // when unpadded): one quad of `k`, an odd number of quads per thread, fewer than its threads.
    shapes.extend([(8, 128, 4), (6, 520, 1028), (3, 260, 64)]);
    // A deep `k` over a narrow `n` (the few-row kernel with `K` split, the 16-byte entry with
    // a tail of 4 columns of `A` left to the reduction), a row of `C` among them.
    shapes.extend([(4, 64, 2052), (1, 96, 1028)]);
    // A little taller than 8 rows (the GPU's few-row kernel over two rows of its tiles).
    shapes.extend([(12, 260, 64), (13, 131, 1001)]);
    shapes.extend([(61, 67, 71), (97, 89, 101), (251, 241, 239)]);
    shapes.extend([(1000, 3, 17), (3, 1000, 29), (517, 1, 33), (1, 517, 65)]);
    shapes.extend([(64, 64, 1), (100, 37, 1)]);
    // A shallow `K` over a wide `C` of odd width (the GPU's rank-k kernel).
    shapes.extend([(301, 1001, 3), (37, 515, 8)]);
    shapes.extend([(5, 7, 1000), (33, 17, 4097)]);
    // A last row of tiles 2 rows tall and a last column of tiles 62 wide (the GPU's
    // specialized kernel multiplies it 64 wide, with its second warpgroup idle).
    shapes.push((130, 190, 77));
    // A few rows or columns of C in products just above the CPU's unpacked limit (8 Mflop): the
    // CPU's matrix-vector forms with several heads (rows with B row-major, columns with A
    // row-major, as the transposes and layouts taking turns give them), edges included.
    shapes.extend([(3, 1100, 1300), (1100, 3, 1300), (4, 1030, 1031), (1029, 2, 2049)]);
    shapes.extend([(0, 5, 3), (4, 0, 3), (9, 5, 0)]);
    shapes
}

/// Large odd shapes, run with two scalar pairs and two transpose/layout combinations.
const LARGE_SHAPES: &[(usize, usize, usize)] = &[(1000, 1000, 1000), (4097, 129, 1000)];

/// The shape suite: every shape with every scalar pair, the transposes and layouts taking
/// turns from shape to shape (so each combination meets tiles, edges and primes).
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (i, (m, n, k)) in small_shapes().into_iter().enumerate() {
        for (j, &(alpha, beta)) in SCALARS.iter().enumerate() {
            // Every other shape with padded leading dimensions.
            let case = Case::new(m, n, k, alpha, beta, (i % 2) * 3);
            cases.push(case.with(COMBOS[(i + j) % COMBOS.len()]));
        }
    }
    for &(m, n, k) in LARGE_SHAPES {
        cases.push(Case::new(m, n, k, 1.0, 0.0, 1));
        cases.push(Case::new(m, n, k, 0.7, 1.3, 1).with(COMBOS[7]));
    }
    cases
}

/// The `sblat3` sweep: sizes `{0, 1, 2, 3, 5, 9}` for each of `m`, `n`, `k`, then shapes at
/// the tile sizes plus or minus one (CPU microkernel tiles 8 and 32, and 16, the width of the
/// narrow kernel for a last panel at most half full; GPU tiles 32 and 128),
/// each with every transpose pair, both layouts, `alpha` in `{0, 1, 0.7}`, `beta` in
/// `{0, 1, 1.3}`, and leading dimensions padded by one.
pub fn blas_sweep() -> Vec<Case> {
    const SIZES: [usize; 6] = [0, 1, 2, 3, 5, 9];
    let mut shapes = Vec::new();
    for m in SIZES {
        for n in SIZES {
            for k in SIZES {
                shapes.push((m, n, k));
            }
        }
    }
    for t in [7, 15, 17, 31, 33, 127, 129] {
        shapes.push((t, t, t));
    }
    shapes.extend([(127, 129, 128), (129, 128, 127), (128, 127, 129), (7, 48, 9), (9, 49, 7)]);
    let mut cases = Vec::new();
    for (m, n, k) in shapes {
        for combo in COMBOS {
            for alpha in [0.0, 1.0, 0.7] {
                for beta in [0.0, 1.0, 1.3] {
                    cases.push(Case::new(m, n, k, alpha, beta, 1).with(combo));
                }
            }
        }
    }
    cases
}

/// A GEMM under test, called as `gemm(alpha, op(A), op(B), beta, C)` with views.
pub trait GemmUnderTest: FnMut(f32, &MatRef, &MatRef, f32, &mut MatMut) -> sgemm::Result<()> {}
impl<F: FnMut(f32, &MatRef, &MatRef, f32, &mut MatMut) -> sgemm::Result<()>> GemmUnderTest for F {}

/// Whether element `idx` of a buffer belongs to the matrix (not to its padding or tail).
pub fn in_matrix(layout: Layout, rows: usize, cols: usize, ld: usize, idx: usize) -> bool {
    let (inner, _) = layout.extents(rows, cols);
    idx < span(layout, rows, cols, ld) && idx % ld < inner
}

/// A buffer holding a `rows x cols` matrix stored in `layout` with leading dimension
/// `max(1, inner) + pad`, rogue values (`-1e10` and NaN in turn) in the padding and the tail,
/// and `fill()` in the matrix.
pub fn operand(
    layout: Layout,
    rows: usize,
    cols: usize,
    pad: usize,
    mut fill: impl FnMut() -> f32,
) -> (Vec<f32>, usize) {
    let ld = layout.extents(rows, cols).0.max(1) + pad;
    let len = span(layout, rows, cols, ld) + TAIL;
    let data = (0..len)
        .map(|i| if in_matrix(layout, rows, cols, ld, i) { fill() } else { [ROGUE, f32::NAN][i % 2] })
        .collect();
    (data, ld)
}

/// Bit-for-bit equality (NaN padding included).
pub fn same_bits(x: &[f32], y: &[f32]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits())
}

/// Runs one case with inputs drawn uniformly from `(-1, 1)` with `seed`; returns the largest
/// normalized error, or a description of what went wrong (naming the case and the seed).
pub fn run_case(case: &Case, seed: u64, gemm: impl GemmUnderTest) -> Result<f64, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    run_case_with(case, seed, || rng.random_range(-1.0f32..1.0), gemm)
}

/// Runs one case with inputs from `fill` (see [`run_case`]).
pub fn run_case_with(
    case: &Case,
    seed: u64,
    mut fill: impl FnMut() -> f32,
    mut gemm: impl GemmUnderTest,
) -> Result<f64, String> {
    let Case { m, n, k, alpha, beta, pad, trans_a, trans_b, layout } = *case;
    let fail = |what: String| format!("{case} seed={seed}: {what}");
    let (ar, ac) = stored_shape(trans_a, m, k);
    let (br, bc) = stored_shape(trans_b, k, n);
    let (a_buf, lda) = operand(layout, ar, ac, pad, &mut fill);
    let (b_buf, ldb) = operand(layout, br, bc, pad, &mut fill);
    let (mut c_buf, ldc) = if beta == 0.0 {
        operand(layout, m, n, pad, || f32::NAN)
    } else {
        operand(layout, m, n, pad, &mut fill)
    };
    let (a_before, b_before, c_before) = (a_buf.clone(), b_buf.clone(), c_buf.clone());

    let a = MatRef::op(&a_buf, layout, trans_a, m, k, lda);
    let b = MatRef::op(&b_buf, layout, trans_b, k, n, ldb);
    gemm(alpha, &a, &b, beta, &mut MatMut { data: &mut c_buf, rows: m, cols: n, ld: ldc, layout })
        .map_err(|e| fail(format!("returned {e}")))?;

    if !same_bits(&a_buf, &a_before) || !same_bits(&b_buf, &b_before) {
        return Err(fail("A or B changed".into()));
    }
    let in_block = |idx: usize| in_matrix(layout, m, n, ldc, idx);
    if let Some(idx) = (0..c_buf.len()).find(|&i| !in_block(i) && c_buf[i].to_bits() != c_before[i].to_bits())
    {
        return Err(fail(format!("wrote C[{idx}] outside the {m}x{n} block (ldc={ldc})")));
    }
    let c = MatRef { data: &c_buf, rows: m, cols: n, ld: ldc, layout };
    for i in 0..m {
        if let Some(j) = (0..n).find(|&j| !c.at(i, j).is_finite()) {
            return Err(fail(format!("C[{i}][{j}] = {} (unwritten or NaN propagated)", c.at(i, j))));
        }
    }
    let rows = if m * n * k <= FULL_CHECK_LIMIT { (0..m).collect() } else { reference::sample_rows(m, 16) };
    let c0 = MatRef { data: &c_before, ..c };
    let found = reference::compare(alpha, &a, &b, beta, &c0, &c, rows);
    match found.first_failure {
        None => Ok(found.max_error),
        Some((i, j, got, want)) => Err(fail(format!(
            "C[{i}][{j}] = {got}, reference {want} (max normalized error {:.2e}, tolerance {:.2e})",
            found.max_error,
            reference::TOLERANCE
        ))),
    }
}

/// Runs every case of `cases`, each with its own seed; returns the failures (empty when all
/// passed) and the largest error seen.
pub fn run_cases(cases: &[Case], mut gemm: impl GemmUnderTest) -> (Vec<String>, f64) {
    let mut failures = Vec::new();
    let mut worst = 0.0f64;
    for (seed, case) in cases.iter().enumerate() {
        match run_case(case, seed as u64, &mut gemm) {
            Ok(err) => worst = worst.max(err),
            Err(msg) => failures.push(msg),
        }
    }
    (failures, worst)
}

/// Every case of the suite: [`cases`] then [`blas_sweep`].
pub fn all_cases() -> Vec<Case> {
    let mut all = cases();
    all.extend(blas_sweep());
    all
}

/// `len` small integers (-4 to 4) from a fixed sequence, varied by `salt`: their products and
/// sums stay exact in `f32`, so any order of summation gives the same result.
pub fn integers(len: usize, salt: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7 + salt * 13 + i / 5) % 9) as f32 - 4.0).collect()
}

/// Inputs that no TF32 split can carry, against `f32` arithmetic: an infinity and NaNs of
/// several payloads in `A`, an infinity and a negative NaN in `B`, and `f32::MAX` in `A` (finite in `f32`, infinite once rounded to TF32)
/// whose products stay finite; `m x n x k = 129 x 67 x 1001`, so that the GPU's tensor-core
/// kernels split `K` and an output recomputed exactly in one slice meets the other slices'
/// sums. Every output must be NaN where `f32` gives NaN and equal to it otherwise: the other
/// values are small integers and each output has at most one huge term, so no order of
/// summation rounds differently. `C = A B + C`, row-major.
pub fn run_non_finite_case(mut gemm: impl GemmUnderTest) -> Result<(), String> {
    let (m, n, k) = (129, 67, 1001);
    let (mut a, mut b, c0) = (integers(m * k, 1), integers(k * n, 2), integers(m * n, 3));
    a[3 * k + 10] = f32::INFINITY; // row 3: +-inf, or NaN where B[10][j] is 0
    a[50 * k + 600] = f32::NAN; // row 50: NaN
    // NaNs with other payloads: the one GPU arithmetic makes, its negative, a signaling one.
    a[70 * k + 300] = f32::from_bits(0x7fff_ffff); // row 70
    b[400 * n + 30] = f32::from_bits(0xffff_ffff); // column 30
    a[90 * k + 900] = f32::from_bits(0x7f80_0001); // row 90
    b[20 * n + 5] = f32::NEG_INFINITY; // column 5: +-inf or NaN
    a[100 * k + 7] = f32::MAX; // row 100: MAX / 2 plus integers, which MAX / 2 absorbs
    b[7 * n..8 * n].fill(0.5);
    let expected: Vec<f32> = (0..m * n)
        .map(|e| (0..k).fold(c0[e], |sum, p| a[e / n * k + p].mul_add(b[p * n + e % n], sum)))
        .collect();
    let mut c = c0.clone();
    gemm(
        1.0,
        &MatRef::contiguous(&a, m, k),
        &MatRef::contiguous(&b, k, n),
        1.0,
        &mut MatMut::contiguous(&mut c, m, n),
    )
    .map_err(|e| format!("non-finite case: returned {e}"))?;
    let wrong: Vec<String> = (0..m * n)
        .filter(|&e| if expected[e].is_nan() { !c[e].is_nan() } else { c[e] != expected[e] })
        .map(|e| format!("C[{}][{}] = {}, f32 gives {}", e / n, e % n, c[e], expected[e]))
        .collect();
    match wrong.first() {
        None => Ok(()),
        Some(first) => Err(format!("non-finite case: {} outputs wrong, first {first}", wrong.len())),
    }
}

/// Runs [`all_cases`]; see [`run_cases`].
pub fn run_suite(gemm: impl GemmUnderTest) -> (Vec<String>, f64) {
    run_cases(&all_cases(), gemm)
}
