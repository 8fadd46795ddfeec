//! Every CPU kernel against the f64 reference over the shared suite (`sgemm::check`).

use sgemm::cpu::{self, CPU_KERNELS};
use sgemm::{MatMut, MatRef};
use sgemm_check::suite as check;

#[test]
fn every_cpu_kernel_passes_the_suite() {
    let mut failures = Vec::new();
    for kernel in CPU_KERNELS {
        if !(kernel.detected)() {
            println!("cpu {}: skipped, this CPU lacks its instruction set", kernel.name);
            continue;
        }
        let (failed, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            cpu::gemm(Some(kernel.name), None, alpha, a, b, beta, c)
        });
        println!(
            "cpu {}: {} cases, {} failed, max normalized error {worst:.2e}",
            kernel.name,
            check::all_cases().len(),
            failed.len()
        );
        failures.extend(failed.into_iter().map(|f| format!("cpu {}: {f}", kernel.name)));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_cpu_kernel_gives_the_f32_results_on_non_finite_inputs() {
    for kernel in CPU_KERNELS.iter().filter(|k| (k.detected)()) {
        let result = check::run_non_finite_case(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            cpu::gemm(Some(kernel.name), None, alpha, a, b, beta, c)
        });
        assert!(result.is_ok(), "cpu {}: {}", kernel.name, result.unwrap_err());
    }
    // Not vacuous: a GEMM that flushes non-finite outputs to zero fails it.
    let flushing = check::run_non_finite_case(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
        cpu::gemm(None, None, alpha, a, b, beta, c)?;
        c.data.iter_mut().filter(|x| !x.is_finite()).for_each(|x| *x = 0.0);
        Ok(())
    });
    assert!(flushing.is_err());
}

#[test]
fn the_checker_catches_a_wrong_kernel() {
    // A GEMM that forgets beta must fail the suite: the suite is not vacuous.
    let (failures, _) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, _beta, c: &mut MatMut| {
        cpu::gemm(None, None, alpha, a, b, 0.0, c)
    });
    assert!(!failures.is_empty());
}

#[test]
fn the_checker_catches_writes_to_padding() {
    let case = check::Case::new(4, 3, 2, 1.0, 0.0, 2);
    let result = check::run_case(&case, 1, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
        cpu::gemm(None, None, alpha, a, b, beta, c)?;
        c.data[3] = 0.0; // padding after row 0
        Ok(())
    });
    assert!(result.unwrap_err().contains("outside"), "padding write not caught");
}

/// Fixed `m x k` and `k x n` integer-pattern inputs, multiplied by one kernel at a time.
struct Product {
    m: usize,
    n: usize,
    k: usize,
    a: Vec<f32>,
    b: Vec<f32>,
}

impl Product {
    fn new(m: usize, n: usize, k: usize) -> Self {
        let a = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let b = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 5.0).collect();
        Product { m, n, k, a, b }
    }

    /// `alpha * A * B + beta * C` by `kernel` on `threads` threads, `C` all ones before.
    fn run(&self, kernel: &str, threads: usize, alpha: f32, beta: f32) -> Vec<f32> {
        let (m, n, k) = (self.m, self.n, self.k);
        let mut c = vec![1.0f32; m * n];
        let (a, b) = (MatRef::contiguous(&self.a, m, k), MatRef::contiguous(&self.b, k, n));
        cpu::gemm(Some(kernel), Some(threads), alpha, &a, &b, beta, &mut MatMut::contiguous(&mut c, m, n))
            .unwrap();
        c
    }
}

#[test]
fn packed_kernels_give_the_same_bits_on_any_thread_count() {
    // Each tile of C is computed by one task in the same order whatever the thread count, so
    // the results must be identical, not merely close; this also runs the row-block split with
    // more threads than this machine has cores. The second and fourth products have few panels
    // of rows, so their threads share strips of the columns instead, and (where B streams from
    // L3) pack blocks of whole rows of B, 256 deep: two sums and four. The first and third are
    // narrower than a block of B, so their threads pack blocks of several sums each (the third's
    // last block is shallower), where one thread packs one sum per block. The last two are
    // computed unpacked on one thread (one sum, `B` within L2) and packed on more.
    let products = [
        Product::new(1000, 257, 700),
        Product::new(20, 1500, 300),
        Product::new(100, 64, 1500),
        Product::new(8, 700, 1000),
        Product::new(250, 300, 120),
        Product::new(301, 203, 200),
    ];
    for product in products {
        for kernel in CPU_KERNELS.iter().filter(|k| k.threaded && (k.detected)()) {
            let one = product.run(kernel.name, 1, 0.5, 2.0);
            for threads in [2, 3, 8] {
                assert!(
                    one == product.run(kernel.name, threads, 0.5, 2.0),
                    "{} {}x{}x{}: {threads} threads differ from 1",
                    kernel.name,
                    product.m,
                    product.n,
                    product.k
                );
            }
        }
    }
}

#[test]
fn packed_kernels_serve_concurrent_callers() {
    // Callers on several threads at once share one worker pool per thread count, whose workers
    // join the calls' teams as they come and wait within a call for the work of each phase:
    // every call must still finish, with the single-threaded bits.
    let product = Product::new(300, 200, 100);
    for kernel in CPU_KERNELS.iter().filter(|k| k.threaded && (k.detected)()) {
        let run = |threads, caller: usize| product.run(kernel.name, threads, caller as f32 + 1.0, 0.0);
        let want: Vec<Vec<f32>> = (0..4).map(|caller| run(1, caller)).collect();
        std::thread::scope(|s| {
            for (caller, want) in want.iter().enumerate() {
                s.spawn(move || {
                    for _ in 0..10 {
                        assert!(run(2, caller) == *want, "{}: caller {caller} differs", kernel.name);
                    }
                });
            }
        });
    }
}

#[test]
fn zero_threads_is_an_error_and_unknown_kernels_are_named() {
    let (a, b, mut c) = (vec![1.0; 4], vec![1.0; 4], vec![0.0; 4]);
    let call = |kernel, threads, c: &mut Vec<f32>| {
        cpu::gemm(
            kernel,
            threads,
            1.0,
            &MatRef::contiguous(&a, 2, 2),
            &MatRef::contiguous(&b, 2, 2),
            0.0,
            &mut MatMut::contiguous(c, 2, 2),
        )
    };
    assert!(matches!(call(None, Some(0), &mut c), Err(sgemm::Error::ZeroThreads)));
    assert!(matches!(call(Some("nope"), None, &mut c), Err(sgemm::Error::UnknownKernel { .. })));
    assert_eq!(c, vec![0.0; 4]);
    call(None, Some(1), &mut c).unwrap();
    assert_eq!(c, vec![2.0; 4]);
}

#[test]
fn the_checker_catches_an_ignored_transpose() {
    // A GEMM that reads op(A) = A^T as if it were A must fail.
    let case = check::Case::new(3, 4, 3, 1.0, 0.0, 1).with(check::COMBOS[1]);
    let result = check::run_case(&case, 1, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
        let as_stored = MatRef { layout: sgemm::Layout::RowMajor, ..*a };
        cpu::gemm(None, None, alpha, &as_stored, b, beta, c)
    });
    assert!(result.unwrap_err().contains("reference"), "an ignored transpose was not caught");
}

#[test]
fn integer_inputs_give_exact_results_in_every_layout() {
    // Small integers: every product and partial sum is exact in f32, so every kernel, in every
    // transpose and layout, must return exactly the reference (the GPU test compares the GPU
    // with this same CPU result bit for bit).
    let (m, n, k) = (67, 45, 301);
    for combo in check::COMBOS {
        let case = check::Case::new(m, n, k, 2.0, -1.0, 1).with(combo);
        for kernel in CPU_KERNELS.iter().filter(|k| (k.detected)()) {
            let mut next = 0u32;
            let fill = || {
                next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                ((next >> 16) % 9) as f32 - 4.0
            };
            let error = check::run_case_with(
                &case,
                0,
                fill,
                |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
                    cpu::gemm(Some(kernel.name), None, alpha, a, b, beta, c)
                },
            )
            .unwrap();
            assert_eq!(error, 0.0, "{} {case}: inexact", kernel.name);
        }
    }
}

#[test]
fn packed_kernels_cross_every_block_boundary() {
    // The suite's shapes stay below one block of B's columns (about 2048); these cross it: two
    // column blocks of 2080 (n = 4097) and of 1760 (n = 3500), two k blocks, a one-column edge
    // panel, in every transpose and layout, on 1 and 2 threads. The third is packed (10 Mflop)
    // with sums of 5 steps, whose rows of tiles prefetch C ahead, and an 11-column edge panel.
    for (m, n, k) in [(5, 4097, 1100), (13, 3500, 1300), (1030, 1003, 5)] {
        for combo in check::COMBOS {
            let case = check::Case::new(m, n, k, 1.5, 0.5, 3).with(combo);
            for kernel in CPU_KERNELS.iter().filter(|k| k.threaded && (k.detected)()) {
                for threads in [1, 2] {
                    let gemm = |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
                        cpu::gemm(Some(kernel.name), Some(threads), alpha, a, b, beta, c)
                    };
                    let result = check::run_case(&case, 7, gemm);
                    assert!(result.is_ok(), "{} {case} on {threads} threads: {result:?}", kernel.name);
                }
            }
        }
    }
}
