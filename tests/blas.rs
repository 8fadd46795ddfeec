//! BLAS semantics on every backend here (the CPU, and the GPU where there is one): every error
//! exit of `Engine::sgemm` in BLAS's order with its argument position, the quick returns, and
//! what `alpha = 0`, `k = 0` and `beta = 0` promise about reading `A`, `B` and `C`.

use sgemm::{Backend, Engine, Error, Layout, MatMut, MatRef};

/// The CPU engine, and the GPU engine when a GPU is usable.
fn engines() -> Vec<Engine> {
    let mut engines = vec![Engine::new(Backend::Cpu).unwrap()];
    if let Ok(gpu) = Engine::new(Backend::Gpu) {
        engines.push(gpu);
    }
    engines
}

/// A valid column-major call `C (2x3) = op(A) op(B)` with `op(A) = A^T` (A stored 4x2),
/// `op(B) = B` (4x3), which each test breaks in one argument.
#[derive(Clone)]
struct Call {
    layout: Layout,
    transa: u8,
    transb: u8,
    m: isize,
    n: isize,
    k: isize,
    a: Vec<f32>,
    lda: isize,
    b: Vec<f32>,
    ldb: isize,
    c_len: usize,
    ldc: isize,
}

impl Call {
    fn valid() -> Self {
        Call {
            layout: Layout::ColMajor,
            transa: b'T',
            transb: b'N',
            m: 2,
            n: 3,
            k: 4,
            a: vec![1.0; 8],
            lda: 4,
            b: vec![1.0; 12],
            ldb: 4,
            c_len: 6,
            ldc: 2,
        }
    }

    /// Runs the call on `engine` with `C` full of 7s; returns the result and `C` after it.
    fn run(&self, engine: &Engine) -> (Result<(), Error>, Vec<f32>) {
        let mut c = vec![7.0; self.c_len];
        let r = engine.sgemm(
            self.layout,
            self.transa,
            self.transb,
            self.m,
            self.n,
            self.k,
            1.0,
            &self.a,
            self.lda,
            &self.b,
            self.ldb,
            0.0,
            &mut c,
            self.ldc,
        );
        (r, c)
    }
}

/// The argument position of an error, if it names one.
fn position(e: &Error) -> Option<u8> {
    match e {
        Error::InvalidArgument { position, .. }
        | Error::LeadingDimension { position, .. }
        | Error::SliceTooShort { position, .. } => Some(*position),
        _ => None,
    }
}

#[test]
fn the_valid_call_computes() {
    for engine in engines() {
        let (r, c) = Call::valid().run(&engine);
        r.unwrap();
        assert_eq!(c, vec![4.0; 6], "{}", engine.backend_name());
    }
}

#[test]
fn every_error_exit_names_its_argument_and_leaves_c_alone() {
    type Break = fn(&mut Call);
    let exits: [(u8, Break); 11] = [
        (1, |c| c.transa = b'X'),
        (2, |c| c.transb = b'?'),
        (3, |c| c.m = -1),
        (4, |c| c.n = -1),
        (5, |c| c.k = -1),
        (8, |c| c.lda = 3),  // A^T stored 4x2 column-major needs lda >= 4
        (10, |c| c.ldb = 0), // B 4x3 needs ldb >= 4
        (13, |c| c.ldc = 1), // C 2x3 needs ldc >= 2
        (7, |c| c.a.truncate(7)),
        (9, |c| c.b.truncate(11)),
        (12, |c| c.c_len = 5),
    ];
    for engine in engines() {
        for (want, break_it) in exits {
            let mut call = Call::valid();
            break_it(&mut call);
            let (r, c) = call.run(&engine);
            let err = r.expect_err("a broken call must fail");
            assert_eq!(position(&err), Some(want), "{}: {err}", engine.backend_name());
            assert!(err.to_string().contains(&format!("argument {want} ")), "{err}");
            assert!(c.iter().all(|&x| x == 7.0), "C changed by a rejected call");
        }
    }
}

#[test]
fn errors_come_in_blas_order() {
    // Every argument wrong at once: BLAS reports the first, then the next once it is fixed.
    let engine = Engine::new(Backend::Cpu).unwrap();
    let mut call =
        Call { transa: b'x', transb: b'y', m: -1, n: -1, k: -1, lda: 0, ldb: 0, ldc: 0, ..Call::valid() };
    call.a.clear();
    call.b.clear();
    call.c_len = 0;
    let fixes: [fn(&mut Call); 10] = [
        |c| c.transa = b't',
        |c| c.transb = b'n',
        |c| c.m = 2,
        |c| c.n = 3,
        |c| c.k = 4,
        |c| c.lda = 4,
        |c| c.ldb = 4,
        |c| c.ldc = 2,
        |c| c.a = vec![1.0; 8],
        |c| c.b = vec![1.0; 12],
    ];
    let order = [1, 2, 3, 4, 5, 8, 10, 13, 7, 9, 12];
    for (i, want) in order.iter().enumerate() {
        let err = call.run(&engine).0.expect_err("still broken");
        assert_eq!(position(&err), Some(*want), "{err}");
        if let Some(fix) = fixes.get(i) {
            fix(&mut call);
        }
    }
}

#[test]
fn row_major_leading_dimensions_follow_cblas() {
    // CblasRowMajor: lda >= k for A (m x k), >= m for A^T stored k x m.
    let engine = Engine::new(Backend::Cpu).unwrap();
    let call = Call { layout: Layout::RowMajor, lda: 2, ldb: 3, ldc: 3, ..Call::valid() };
    call.run(&engine).0.unwrap();
    let err = Call { lda: 1, ..call.clone() }.run(&engine).0.unwrap_err();
    assert!(matches!(err, Error::LeadingDimension { position: 8, min: 2, .. }), "{err}");
}

#[test]
fn empty_and_zero_sized_calls_return_without_touching_anything() {
    for engine in engines() {
        // m = 0 or n = 0: nothing happens (C may even be empty).
        for (m, n) in [(0, 3), (2, 0)] {
            Call { m, n, c_len: 0, ..Call::valid() }.run(&engine).0.unwrap();
        }
    }
}

/// `A` and `B` full of NaN, `C` of 2s.
fn poisoned(engine: &Engine, alpha: f32, k: usize, beta: f32) -> Vec<f32> {
    let (m, n) = (5, 4);
    let a = vec![f32::NAN; m * k.max(1)];
    let b = vec![f32::NAN; k.max(1) * n];
    let mut c = vec![2.0; m * n];
    engine
        .gemm(
            alpha,
            &MatRef::new(&a, m, k, k.max(1)),
            &MatRef::contiguous(&b, k, n),
            beta,
            &mut MatMut::contiguous(&mut c, m, n),
        )
        .unwrap();
    c
}

#[test]
fn alpha_zero_or_k_zero_scales_c_without_reading_a_or_b() {
    for engine in engines() {
        for (alpha, k) in [(0.0, 3), (1.0, 0), (0.0, 0)] {
            assert_eq!(poisoned(&engine, alpha, k, 1.5), vec![3.0; 20], "{}", engine.backend_name());
            assert_eq!(poisoned(&engine, alpha, k, 0.0), vec![0.0; 20]);
            assert_eq!(poisoned(&engine, alpha, k, 1.0), vec![2.0; 20]);
        }
    }
}

#[test]
fn beta_zero_overwrites_c_without_reading_it() {
    for engine in engines() {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let (a, b) = (vec![1.0; 6], vec![2.0; 6]);
            let mut c = vec![f32::NAN, f32::INFINITY, f32::NAN, -f32::INFINITY];
            let (a, b) = (MatRef { layout, ..MatRef::new(&a, 2, 3, 3) }, MatRef::contiguous(&b, 3, 2));
            let a = if layout == Layout::ColMajor { MatRef { rows: 2, cols: 3, ld: 2, ..a } } else { a };
            engine
                .gemm(1.0, &a, &b, 0.0, &mut MatMut { layout, ..MatMut::contiguous(&mut c, 2, 2) })
                .unwrap();
            assert_eq!(c, vec![6.0; 4], "{} {layout:?}", engine.backend_name());
        }
    }
}
