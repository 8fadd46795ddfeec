//! `Engine::gemm_ndarray` and `Engine::gemm_batch_ndarray` (feature `ndarray`): standard,
//! Fortran, transposed, strided and split views, permuted and broadcast batches, against the f64
//! reference, on the CPU and on the GPU where there is one.

use ndarray::{Array2, Array3, ArrayView2, ArrayView3, Axis, ShapeBuilder, s};
use sgemm::{Backend, Engine, MatRef};
use sgemm_check::reference::{self, TOLERANCE};

fn engines() -> Vec<Engine> {
    let mut engines = vec![Engine::new(Backend::Cpu).unwrap()];
    if let Ok(gpu) = Engine::new(Backend::Gpu) {
        engines.push(gpu);
    }
    engines
}

/// A matrix of small distinct values.
fn filled(rows: usize, cols: usize, salt: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 7 + j * 3 + salt) % 11) as f32 / 4.0 - 1.0)
}

/// `alpha * a * b + beta * c0` in f64, compared with `c` element by element.
fn assert_gemm(
    alpha: f32,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    beta: f32,
    c0: &Array2<f32>,
    c: ArrayView2<f32>,
) {
    let (a, b, c0) = (
        a.as_standard_layout().into_owned(),
        b.as_standard_layout().into_owned(),
        c0.as_standard_layout().into_owned(),
    );
    let av = MatRef::contiguous(a.as_slice().unwrap(), a.nrows(), a.ncols());
    let bv = MatRef::contiguous(b.as_slice().unwrap(), b.nrows(), b.ncols());
    let cv = MatRef::contiguous(c0.as_slice().unwrap(), c0.nrows(), c0.ncols());
    let rows: Vec<_> = (0..c.nrows()).map(|i| reference::row(alpha, &av, &bv, beta, &cv, i)).collect();
    for ((i, j), &got) in c.indexed_iter() {
        let (want, scale) = rows[i][j];
        assert!((got as f64 - want).abs() <= TOLERANCE * scale, "C[{i}][{j}] = {got}, want {want}");
    }
}

#[test]
fn contiguous_views_in_either_order() {
    for engine in engines() {
        let (m, n, k) = (37, 29, 41);
        let a = filled(m, k, 1);
        let b_f = Array2::from_shape_vec((k, n).f(), filled(k, n, 2).t().iter().copied().collect()).unwrap();
        let mut c = Array2::<f32>::zeros((m, n).f());
        let c0 = c.clone();
        engine.gemm_ndarray(1.5, a.view(), b_f.view(), 0.0, c.view_mut()).unwrap();
        assert_gemm(1.5, a.view(), b_f.view(), 0.0, &c0, c.view());
        // Transposed views: A^T B^T with A stored k x m, B stored n x k.
        let (at, bt) = (filled(k, m, 3), filled(n, k, 4));
        let mut c = filled(m, n, 5);
        let c0 = c.clone();
        engine.gemm_ndarray(0.5, at.t(), bt.t(), 2.0, c.view_mut()).unwrap();
        assert_gemm(0.5, at.t(), bt.t(), 2.0, &c0, c.view());
    }
}

#[test]
fn strided_views_are_computed_and_nothing_around_them_is_written() {
    for engine in engines() {
        let big_a = filled(50, 60, 6);
        let big_b = filled(40, 70, 7);
        let a = big_a.slice(s![3..40;2, 5..36]); // row stride 2: neither order
        let b = big_b.slice(s![1..32, 10..35]); // padded rows
        let mut big_c = Array2::<f32>::from_elem((30, 40), -1e10);
        let before = big_c.clone();
        let rows = a.nrows();
        let mut c = big_c.slice_mut(s![2..2 + rows, 4..29]);
        c.fill(1.0);
        let c0 = c.to_owned();
        engine.gemm_ndarray(1.0, a, b, -1.0, c.view_mut()).unwrap();
        assert_gemm(1.0, a, b, -1.0, &c0, c.view());
        for ((i, j), &x) in big_c.indexed_iter() {
            let inside = (2..2 + rows).contains(&i) && (4..29).contains(&j);
            assert!(inside || x == before[[i, j]], "wrote outside C at ({i}, {j})");
        }
    }
}

#[test]
fn split_halves_of_one_array_as_operand_and_output() {
    // A and C are the two halves of one array: A's memory interleaves with C's.
    for engine in engines() {
        let mut whole = filled(16, 24, 8);
        let (left, mut right) = whole.view_mut().split_at(Axis(1), 12);
        let b = filled(12, 12, 9);
        let c0 = right.to_owned();
        engine.gemm_ndarray(1.0, left.view(), b.view(), 1.0, right.view_mut()).unwrap();
        assert_gemm(1.0, left.view(), b.view(), 1.0, &c0, right.view());
    }
}

/// A batch of small distinct values.
fn filled3(batch: usize, rows: usize, cols: usize, salt: usize) -> Array3<f32> {
    Array3::from_shape_fn((batch, rows, cols), |(z, i, j)| {
        ((z * 5 + i * 7 + j * 3 + salt) % 13) as f32 / 4.0 - 1.5
    })
}

/// Every member of `c` against `alpha * a_z * b_z + beta * c0_z`.
fn assert_batch(
    alpha: f32,
    a: ArrayView3<f32>,
    b: ArrayView3<f32>,
    beta: f32,
    c0: &Array3<f32>,
    c: ArrayView3<f32>,
) {
    for z in 0..c.len_of(Axis(0)) {
        let c0z = c0.index_axis(Axis(0), z).to_owned();
        assert_gemm(
            alpha,
            a.index_axis(Axis(0), z),
            b.index_axis(Axis(0), z),
            beta,
            &c0z,
            c.index_axis(Axis(0), z),
        );
    }
}

#[test]
fn batches_of_standard_permuted_transposed_and_broadcast_views() {
    for engine in engines() {
        let (batch, m, n, k) = (5, 19, 23, 17);
        let a = filled3(batch, m, k, 1);
        let b = filled3(batch, k, n, 2);
        let mut c = filled3(batch, m, n, 3);
        let c0 = c.clone();
        engine.gemm_batch_ndarray(1.5, a.view(), b.view(), -0.5, c.view_mut()).unwrap();
        assert_batch(1.5, a.view(), b.view(), -0.5, &c0, c.view());

        // Heads side by side: (seq, heads, dim) arrays viewed as (heads, seq, dim), borrowed
        // with a member stride of one head's columns; each member transposed for A^T.
        let q = filled3(m, batch, k, 4); // seq m, heads, dim k
        let kt = filled3(n, batch, k, 5); // seq n, heads, dim k
        let (q, kt) = (q.view().permuted_axes([1, 0, 2]), kt.view().permuted_axes([1, 2, 0]));
        let mut scores = Array3::<f32>::from_elem((m, batch, n), f32::NAN);
        let mut view = scores.view_mut().permuted_axes([1, 0, 2]);
        let nan = view.to_owned();
        engine.gemm_batch_ndarray(0.25, q, kt, 0.0, view.view_mut()).unwrap();
        assert_batch(0.25, q, kt, 0.0, &nan.mapv(|_| 0.0), view.view());

        // B broadcast to every member.
        let b1 = filled3(1, k, n, 6);
        let bb = b1.broadcast((batch, k, n)).unwrap();
        let mut c = filled3(batch, m, n, 7);
        let c0 = c.clone();
        engine.gemm_batch_ndarray(1.0, a.view(), bb, 1.0, c.view_mut()).unwrap();
        assert_batch(1.0, a.view(), bb, 1.0, &c0, c.view());
    }
}

#[test]
fn batches_of_gapped_views_are_computed_and_nothing_around_them_is_written() {
    for engine in engines() {
        let (batch, m, n, k) = (4, 9, 11, 13);
        let big_a = filled3(2 * batch, m + 3, 2 * k, 8);
        let a = big_a.slice(s![..;2, 1..1 + m, ..;2]); // every other member and column: copied
        let b = filled3(batch, k, n, 9);
        let mut big_c = Array3::<f32>::from_elem((batch + 1, m + 2, n + 5), -1e10);
        let before = big_c.clone();
        let mut c = big_c.slice_mut(s![1.., 1..1 + m, 2..2 + n]);
        c.fill(0.5);
        let c0 = c.to_owned();
        engine.gemm_batch_ndarray(2.0, a, b.view(), 3.0, c.view_mut()).unwrap();
        assert_batch(2.0, a, b.view(), 3.0, &c0, c.view());
        for ((z, i, j), &x) in big_c.indexed_iter() {
            let inside = z >= 1 && (1..1 + m).contains(&i) && (2..2 + n).contains(&j);
            assert!(inside || x == before[[z, i, j]], "wrote outside C at ({z}, {i}, {j})");
        }
        // Batches of unequal length are refused.
        let short = filled3(batch - 1, k, n, 10);
        let mut c = Array3::<f32>::zeros((batch, m, n));
        assert!(engine.gemm_batch_ndarray(1.0, a, short.view(), 0.0, c.view_mut()).is_err());
    }
}
