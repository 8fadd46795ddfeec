//! The batch suite both backends run: the single product's checks ([`suite`](crate::suite))
//! for every member of strided batches and lists of views.
//!
//! Each case stores every member of every operand with rogue values around it (the padding
//! of a leading dimension, gaps between members, a tail), fills `C` with NaN when `beta == 0`,
//! runs the batch, then checks that `A` and `B` are bit-identical, that no element outside
//! the members of `C` changed, and each member against the f64 reference. The forms: members
//! back to back, members with gaps, `A` or `B` broadcast (stride 0), the members of `C` side
//! by side in one wide matrix (interleaved, as attention heads are), and lists of separate
//! views.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use sgemm::matrix::{span, stored_shape};
use sgemm::{Layout, MatMut, MatRef, Strided};

use crate::reference;
use crate::suite::{COMBOS, ROGUE, in_matrix, operand, same_bits};

/// How a case's members are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// One buffer per operand, members `gap` elements after the end of the one before.
    Strided { gap: usize },
    /// As `Strided`, with one `A` for every product (stride 0).
    BroadcastA,
    /// As `Strided`, with one `B` for every product (stride 0).
    BroadcastB,
    /// The members of `C` side by side in one wide matrix (stride = one member's inner
    /// extent); `A` and `B` back to back.
    InterleavedC,
    /// Lists of separate views.
    List,
}

/// One batch to check.
#[derive(Clone, Copy, Debug)]
pub struct BatchCase {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub layout: Layout,
    /// Added to every leading dimension.
    pub pad: usize,
    pub form: Form,
}

impl fmt::Display for BatchCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |t: bool| if t { 'T' } else { 'N' };
        write!(
            f,
            "{:?} batch={} {:?} {}{} m={} n={} k={} alpha={} beta={} ld+{}",
            self.form,
            self.batch,
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

/// A batched GEMM under test: both forms.
pub trait BatchedGemm {
    /// The strided form.
    fn strided(
        &mut self,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> sgemm::Result<()>;
    /// The list form.
    fn list(
        &mut self,
        alpha: f32,
        a: &[MatRef],
        b: &[MatRef],
        beta: f32,
        c: &mut [MatMut],
    ) -> sgemm::Result<()>;
}

/// The cases: small and odd shapes (vector-like, few rows, empty, `k = 1` and `k = 0`),
/// every form, the transposes and layouts and scalars taking turns.
pub fn cases() -> Vec<BatchCase> {
    let shapes = [
        (1, 1, 1),
        (7, 5, 3),
        (33, 31, 17),
        (64, 64, 64),
        (65, 63, 129),
        (1, 100, 37),
        (5, 70, 40),
        (130, 1, 64),
        (128, 128, 1),
        (3, 4, 0),
        (0, 3, 3),
        (40, 36, 300),
    ];
    let forms = [
        Form::Strided { gap: 0 },
        Form::Strided { gap: 3 },
        Form::BroadcastA,
        Form::BroadcastB,
        Form::InterleavedC,
        Form::List,
    ];
    let scalars = [(1.0, 0.0), (0.7, 1.3), (0.0, 1.3), (-1.5, 0.0), (1.0, 1.0)];
    let mut cases = Vec::new();
    let mut turn = 0;
    for (m, n, k) in shapes {
        for form in forms {
            for batch in [1, 3, 7] {
                let (alpha, beta) = scalars[turn % scalars.len()];
                let (trans_a, trans_b, layout) = COMBOS[turn % COMBOS.len()];
                let pad = turn % 3;
                cases.push(BatchCase { batch, m, n, k, alpha, beta, trans_a, trans_b, layout, pad, form });
                turn += 1;
            }
        }
    }
    // Enough members for every thread and more than one wave of blocks.
    for form in [Form::Strided { gap: 1 }, Form::List] {
        cases.push(BatchCase {
            batch: 300,
            m: 9,
            n: 17,
            k: 12,
            alpha: 0.5,
            beta: 2.0,
            trans_a: true,
            trans_b: false,
            layout: Layout::ColMajor,
            pad: 1,
            form,
        });
    }
    cases
}

/// One operand's members in one buffer: the buffer, the leading dimension and the stride.
struct Buffer {
    data: Vec<f32>,
    ld: usize,
    stride: usize,
    /// Whether each element belongs to a member.
    owned: Vec<bool>,
}

/// `count` members of `rows x cols` in `layout` (leading dimension `inner + pad`, or `ld`),
/// `stride` apart (`None`: one member span plus `gap`), rogue values elsewhere, `fill()` in
/// the members.
fn strided_buffer(
    layout: Layout,
    (rows, cols): (usize, usize),
    count: usize,
    ld: usize,
    stride: Option<usize>,
    gap: usize,
    mut fill: impl FnMut() -> f32,
) -> Buffer {
    let member = span(layout, rows, cols, ld);
    let stride = stride.unwrap_or(member + gap);
    let len = if count == 0 { 0 } else { (count - 1) * stride + member } + 5;
    let mut owned = vec![false; len];
    let (inner, outer) = layout.extents(rows, cols);
    for z in 0..count {
        for line in 0..outer {
            for p in 0..inner {
                owned[z * stride + line * ld + p] = true;
            }
        }
    }
    let data = (0..len).map(|i| if owned[i] { fill() } else { [ROGUE, f32::NAN][i % 2] }).collect();
    Buffer { data, ld, stride, owned }
}

/// Runs one case with inputs uniform in `(-1, 1)` from `seed`; the largest normalized error,
/// or what went wrong.
pub fn run_case(case: &BatchCase, seed: u64, gemm: &mut impl BatchedGemm) -> Result<f64, String> {
    let BatchCase { batch, m, n, k, alpha, beta, trans_a, trans_b, layout, pad, form } = *case;
    let fail = |what: String| format!("{case} seed={seed}: {what}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fill = || rng.random_range(-1.0f32..1.0);
    let (a_shape, b_shape) = (stored_shape(trans_a, m, k), stored_shape(trans_b, k, n));
    let ld_of = |(r, c): (usize, usize)| layout.extents(r, c).0.max(1) + pad;

    if form == Form::List {
        let members = |shape: (usize, usize), fill: &mut dyn FnMut() -> f32| -> Vec<(Vec<f32>, usize)> {
            (0..batch).map(|_| operand(layout, shape.0, shape.1, pad, &mut *fill)).collect()
        };
        let a_bufs = members(a_shape, &mut fill);
        let b_bufs = members(b_shape, &mut fill);
        let mut c_bufs =
            if beta == 0.0 { members((m, n), &mut || f32::NAN) } else { members((m, n), &mut fill) };
        let (a_before, b_before, c_before) = (a_bufs.clone(), b_bufs.clone(), c_bufs.clone());
        let a: Vec<MatRef> = a_bufs.iter().map(|(d, ld)| MatRef::op(d, layout, trans_a, m, k, *ld)).collect();
        let b: Vec<MatRef> = b_bufs.iter().map(|(d, ld)| MatRef::op(d, layout, trans_b, k, n, *ld)).collect();
        let mut c: Vec<MatMut> =
            c_bufs.iter_mut().map(|(d, ld)| MatMut { data: d, rows: m, cols: n, ld: *ld, layout }).collect();
        gemm.list(alpha, &a, &b, beta, &mut c).map_err(|e| fail(format!("returned {e}")))?;
        drop(c);
        if a_bufs
            .iter()
            .zip(&a_before)
            .chain(b_bufs.iter().zip(&b_before))
            .any(|(x, y)| !same_bits(&x.0, &y.0))
        {
            return Err(fail("A or B changed".into()));
        }
        let mut worst = 0.0f64;
        for z in 0..batch {
            let ld = c_bufs[z].1;
            let (after, before) = (&c_bufs[z].0, &c_before[z].0);
            let outside =
                |i: usize| !in_matrix(layout, m, n, ld, i) && after[i].to_bits() != before[i].to_bits();
            if let Some(i) = (0..after.len()).find(|&i| outside(i)) {
                return Err(fail(format!("member {z}: wrote C at {i}, outside its block")));
            }
            let c_after = MatRef { data: after, rows: m, cols: n, ld, layout };
            let c0 = MatRef { data: before, ..c_after };
            worst = worst.max(check_member(&fail, z, alpha, &a[z], &b[z], beta, &c0, &c_after)?);
        }
        return Ok(worst);
    }

    let (a_stride, b_stride) = match form {
        Form::BroadcastA => (Some(0), None),
        Form::BroadcastB => (None, Some(0)),
        _ => (None, None),
    };
    let gap = if let Form::Strided { gap } = form { gap } else { 0 };
    let a_buf = strided_buffer(layout, a_shape, batch, ld_of(a_shape), a_stride, gap, &mut fill);
    let b_buf = strided_buffer(layout, b_shape, batch, ld_of(b_shape), b_stride, gap, &mut fill);
    let (c_ld, c_stride) = if form == Form::InterleavedC {
        let inner = layout.extents(m, n).0;
        ((batch * inner).max(1) + pad, Some(inner))
    } else {
        (ld_of((m, n)), None)
    };
    let mut c_buf = if beta == 0.0 {
        strided_buffer(layout, (m, n), batch, c_ld, c_stride, gap, || f32::NAN)
    } else {
        strided_buffer(layout, (m, n), batch, c_ld, c_stride, gap, &mut fill)
    };
    let (a_before, b_before, c_before) = (a_buf.data.clone(), b_buf.data.clone(), c_buf.data.clone());
    let a = Strided::new(MatRef::op(&a_buf.data, layout, trans_a, m, k, a_buf.ld), a_buf.stride);
    let b = Strided::new(MatRef::op(&b_buf.data, layout, trans_b, k, n, b_buf.ld), b_buf.stride);
    let mut c =
        Strided::new(MatMut { data: &mut c_buf.data, rows: m, cols: n, ld: c_ld, layout }, c_buf.stride);
    gemm.strided(batch, alpha, &a, &b, beta, &mut c).map_err(|e| fail(format!("returned {e}")))?;
    if !same_bits(&a_buf.data, &a_before) || !same_bits(&b_buf.data, &b_before) {
        return Err(fail("A or B changed".into()));
    }
    let mut worst = 0.0f64;
    for z in 0..batch {
        fn member<'a>(x: &MatRef<'a>, stride: usize, z: usize) -> MatRef<'a> {
            MatRef { data: &x.data[(z * stride).min(x.data.len())..], ..*x }
        }
        let (a_z, b_z) = (member(&a.matrix, a.stride, z), member(&b.matrix, b.stride, z));
        let c_all = MatRef { data: &c_buf.data, rows: m, cols: n, ld: c_ld, layout };
        let (c_z, c0_z) =
            (member(&c_all, c_buf.stride, z), member(&MatRef { data: &c_before, ..c_all }, c_buf.stride, z));
        // What lies outside every member is checked for the whole buffer below.
        worst = worst.max(check_member(&fail, z, alpha, &a_z, &b_z, beta, &c0_z, &c_z)?);
    }
    if let Some(i) =
        (0..c_buf.data.len()).find(|&i| !c_buf.owned[i] && c_buf.data[i].to_bits() != c_before[i].to_bits())
    {
        return Err(fail(format!("wrote C's buffer at {i}, outside every member")));
    }
    Ok(worst)
}

/// Checks member `z`: every output finite, and the values against the reference.
#[allow(clippy::too_many_arguments)]
fn check_member(
    fail: &dyn Fn(String) -> String,
    z: usize,
    alpha: f32,
    a: &MatRef,
    b: &MatRef,
    beta: f32,
    c0: &MatRef,
    c: &MatRef,
) -> Result<f64, String> {
    for i in 0..c.rows {
        if let Some(j) = (0..c.cols).find(|&j| !c.at(i, j).is_finite()) {
            return Err(fail(format!(
                "member {z}: C[{i}][{j}] = {} (unwritten or NaN propagated)",
                c.at(i, j)
            )));
        }
    }
    let found = reference::compare(alpha, a, b, beta, c0, c, 0..c.rows);
    match found.first_failure {
        None => Ok(found.max_error),
        Some((i, j, got, want)) => Err(fail(format!("member {z}: C[{i}][{j}] = {got}, reference {want}"))),
    }
}

/// Runs every case of [`cases`], each with its own seed: the failures and the largest error.
pub fn run_suite(gemm: &mut impl BatchedGemm) -> (Vec<String>, f64) {
    let mut failures = Vec::new();
    let mut worst = 0.0f64;
    for (seed, case) in cases().iter().enumerate() {
        match run_case(case, seed as u64, gemm) {
            Ok(e) => worst = worst.max(e),
            Err(msg) => failures.push(msg),
        }
    }
    (failures, worst)
}
