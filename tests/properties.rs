//! Property tests: random shapes (each dimension 0..=300), transposes, layouts, padded leading
//! dimensions, scalars and kernels, against the f64 reference through the shared checker
//! (rogue padding, NaN in `C` when `beta = 0`, nothing written outside `C`, `A` and `B`
//! unchanged). Seeded, so a run is reproducible; a failure shrinks to the smallest failing
//! case. The CPU always, the GPU where there is one.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
use sgemm::{Backend, Engine, MatMut, MatRef};
use sgemm_check::suite::{self as check, COMBOS, Case};

/// `alpha` and `beta`: the special values BLAS treats apart, and general ones.
fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0f32), Just(1.0f32), Just(-1.0f32), -2.0f32..2.0]
}

/// A case with dimensions 0..=300 and the index of a kernel.
fn case(kernels: usize) -> impl Strategy<Value = (Case, usize, u64)> {
    (
        (0usize..=300, 0usize..=300, 0usize..=300),
        (scalar(), scalar()),
        0usize..=3,
        0..COMBOS.len(),
        0..kernels,
        any::<u64>(),
    )
        .prop_map(|((m, n, k), (alpha, beta), pad, combo, kernel, seed)| {
            (Case::new(m, n, k, alpha, beta, pad).with(COMBOS[combo]), kernel, seed)
        })
}

fn check_engine(engine: &Engine, cases: u32) {
    let kernels = engine.kernel_names();
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(0x5ce6_3a11),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(kernels.len()), |(case, kernel, seed)| {
        let name = kernels[kernel];
        let engine = engine.clone().with_kernel(name).unwrap();
        let outcome = check::run_case(&case, seed, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            engine.gemm(alpha, a, b, beta, c)
        });
        prop_assert!(outcome.is_ok(), "{} {name}: {}", engine.backend_name(), outcome.unwrap_err());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn random_cases_match_the_reference_on_the_cpu() {
    check_engine(&Engine::new(Backend::Cpu).unwrap(), 256);
}

#[test]
fn random_cases_match_the_reference_on_the_gpu() {
    match Engine::new(Backend::Gpu) {
        Ok(engine) => check_engine(&engine, 512),
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED random_cases_match_the_reference_on_the_gpu: {e}");
        }
    }
}
