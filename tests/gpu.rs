//! Every GPU kernel against the f64 reference over the same suite as the CPU. Without a usable
//! CUDA device the tests say so and pass (CI has no GPU); on the device they are the proof.

use std::io::Write;

use sgemm::check;
use sgemm::{Error, Gpu, MatMut, MatRef};

fn gpu_or_skip(test: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e @ (Error::NoGpu(_) | Error::UnsupportedGpu { .. })) => {
            // Straight to stderr: libtest captures `eprintln!` of passing tests, and a skip
            // must be visible in CI's log.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {e}");
            None
        }
        Err(e) => panic!("the GPU is there but unusable: {e}"),
    }
}

#[test]
fn every_gpu_kernel_passes_the_suite() {
    let Some(gpu) = gpu_or_skip("every_gpu_kernel_passes_the_suite") else { return };
    let mut failures = Vec::new();
    for kernel in gpu.kernels() {
        let name = kernel.spec.name;
        let (failed, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            gpu.gemm(Some(name), alpha, a, b, beta, c)
        });
        println!(
            "gpu {name}: {} cases, {} failed, max normalized error {worst:.2e}",
            check::all_cases().len(),
            failed.len()
        );
        failures.extend(failed.into_iter().map(|f| format!("gpu {name}: {f}")));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn device_resident_calls_match_host_calls() {
    let Some(gpu) = gpu_or_skip("device_resident_calls_match_host_calls") else { return };
    let (m, n, k) = (129, 65, 33);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (a, b) = (MatRef::contiguous(&a, m, k), MatRef::contiguous(&b, k, n));
    let mut host = vec![0.0; m * n];
    gpu.gemm(None, 1.0, &a, &b, 0.0, &mut MatMut::contiguous(&mut host, m, n)).unwrap();
    let (a_dev, b_dev) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut c_dev = gpu.alloc(m, n, n).unwrap();
    gpu.gemm_device(None, 1.0, &a_dev, &b_dev, 0.0, &mut c_dev).unwrap();
    let mut device = vec![0.0; m * n];
    gpu.download(&c_dev, &mut MatMut::contiguous(&mut device, m, n)).unwrap();
    // Small integers: every product and partial sum is exact, so the two must agree exactly.
    assert_eq!(host, device);
}

#[test]
fn device_out_of_memory_is_an_error_and_the_handle_survives() {
    let Some(gpu) = gpu_or_skip("device_out_of_memory_is_an_error_and_the_handle_survives") else { return };
    let huge = gpu.alloc(1 << 20, 1 << 20, 1 << 20); // 4 TiB
    assert!(matches!(huge, Err(Error::OutOfDeviceMemory { .. })), "{huge:?}");
    assert!(gpu.alloc(16, 16, 16).is_ok());
}
