//! Every CPU kernel against the f64 reference over the shared suite (`sgemm::check`).

use sgemm::cpu::{self, CPU_KERNELS};
use sgemm::{MatMut, MatRef, check};

#[test]
fn every_cpu_kernel_passes_the_suite() {
    let mut failures = Vec::new();
    for kernel in CPU_KERNELS {
        let (failed, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            cpu::gemm(Some(kernel.name), alpha, a, b, beta, c)
        });
        println!(
            "cpu {}: {} cases, {} failed, max normalized error {worst:.2e}",
            kernel.name,
            check::cases().len(),
            failed.len()
        );
        failures.extend(failed.into_iter().map(|f| format!("cpu {}: {f}", kernel.name)));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_checker_catches_a_wrong_kernel() {
    // A GEMM that forgets beta must fail the suite: the suite is not vacuous.
    let (failures, _) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, _beta, c: &mut MatMut| {
        cpu::gemm(None, alpha, a, b, 0.0, c)
    });
    assert!(!failures.is_empty());
}

#[test]
fn the_checker_catches_writes_to_padding() {
    let case = check::Case { m: 4, n: 3, k: 2, alpha: 1.0, beta: 0.0, pad: 2 };
    let result = check::run_case(&case, 1, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
        cpu::gemm(None, alpha, a, b, beta, c)?;
        c.data[3] = 0.0; // padding after row 0
        Ok(())
    });
    assert!(result.unwrap_err().contains("outside"), "padding write not caught");
}
