//! Every bad input is a typed error, on both backends, and leaves C untouched.

use sgemm::{Backend, Engine, Error, MatMut, MatRef};

fn call(backend: Backend, a: MatRef, b: MatRef, c: &mut MatMut) -> Result<(), Error> {
    let engine = Engine::new(backend)?;
    engine.gemm(1.0, &a, &b, 0.0, c)
}

fn backends() -> Vec<Backend> {
    // The GPU backend is checked where there is one; Auto falls back to the CPU elsewhere.
    vec![Backend::Cpu, Backend::Auto]
}

#[test]
fn shapes_that_do_not_chain_are_rejected() {
    let (a, b) = (vec![0.0; 6], vec![0.0; 6]);
    for backend in backends() {
        let mut c = vec![7.0; 4];
        let err = call(
            backend,
            MatRef::contiguous(&a, 2, 3),
            MatRef::contiguous(&b, 2, 3),
            &mut MatMut::contiguous(&mut c, 2, 3),
        );
        assert!(matches!(err, Err(Error::DimensionMismatch(_))), "{err:?}");
        let err = call(
            backend,
            MatRef::contiguous(&a, 2, 3),
            MatRef::contiguous(&b, 3, 2),
            &mut MatMut::contiguous(&mut c, 2, 3),
        );
        assert!(matches!(err, Err(Error::DimensionMismatch(_))), "{err:?}");
        assert_eq!(c, vec![7.0; 4]);
    }
}

#[test]
fn a_leading_dimension_below_the_row_length_is_rejected() {
    let (a, b) = (vec![0.0; 6], vec![0.0; 9]);
    for backend in backends() {
        let mut c = vec![0.0; 6];
        let err = call(
            backend,
            MatRef::new(&a, 2, 3, 2),
            MatRef::contiguous(&b, 3, 3),
            &mut MatMut::contiguous(&mut c, 2, 3),
        );
        assert!(
            matches!(err, Err(Error::LeadingDimension { position: 8, name: "lda", ld: 2, min: 3 })),
            "{err:?}"
        );
        let err = call(
            backend,
            MatRef::contiguous(&a, 2, 3),
            MatRef::contiguous(&b, 3, 3),
            &mut MatMut::new(&mut c, 2, 3, 1),
        );
        assert!(matches!(err, Err(Error::LeadingDimension { position: 13, name: "ldc", .. })), "{err:?}");
    }
}

#[test]
fn slices_too_short_for_their_declared_shape_are_rejected() {
    let (a, b) = (vec![0.0; 6], vec![0.0; 9]);
    for backend in backends() {
        let mut c = vec![0.0; 6];
        // B declared 3x3 with ld 4 needs 4 * 2 + 3 = 11 elements.
        let err = call(
            backend,
            MatRef::contiguous(&a, 2, 3),
            MatRef::new(&b, 3, 3, 4),
            &mut MatMut::contiguous(&mut c, 2, 3),
        );
        assert!(
            matches!(err, Err(Error::SliceTooShort { position: 9, matrix: "B", needed: 11, len: 9 })),
            "{err:?}"
        );
        let err = call(
            backend,
            MatRef::contiguous(&a, 2, 3),
            MatRef::contiguous(&b, 3, 3),
            &mut MatMut::contiguous(&mut c[..5], 2, 3),
        );
        assert!(matches!(err, Err(Error::SliceTooShort { position: 12, matrix: "C", .. })), "{err:?}");
    }
}

#[test]
fn unknown_kernels_are_rejected_with_the_list() {
    let err = Engine::new(Backend::Cpu).unwrap().with_kernel("nope");
    match err {
        Err(Error::UnknownKernel { name, available, .. }) => {
            assert_eq!(name, "nope");
            assert!(available.contains("loop_reordered"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn asking_for_the_gpu_without_one_is_an_error_and_auto_falls_back() {
    match Engine::new(Backend::Gpu) {
        Ok(engine) => assert_eq!(engine.backend_name(), "gpu"),
        Err(e) => {
            assert!(matches!(e, Error::NoGpu(_) | Error::UnsupportedGpu { .. }), "{e:?}");
            let auto = Engine::new(Backend::Auto).unwrap();
            assert_eq!(auto.backend_name(), "cpu");
            assert!(auto.fallback_reason().is_some());
        }
    }
}
