//! Every GPU kernel against the f64 reference over the same suite as the CPU. Without a usable
//! CUDA device the tests say so and pass (CI has no GPU); on the device they are the proof.

use std::io::Write;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sgemm::{DeviceMatMut, DeviceMatRef, Error, Gpu, Layout, MatMut, MatRef, Precision};
use sgemm_check::gpu_or_skip;
use sgemm_check::suite as check;

#[test]
fn every_gpu_kernel_passes_the_suite() {
    let Some(gpu) = gpu_or_skip("every_gpu_kernel_passes_the_suite") else { return };
    let mut failures = Vec::new();
    for name in gpu.kernel_names() {
        let gpu = gpu.clone().with_kernel(name).unwrap();
        let (failed, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            gpu.gemm(alpha, a, b, beta, c)
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
fn every_kernel_is_resident_as_its_launch_bounds_promise() {
    // The split-K and small-tile rules count resident blocks with the driver's occupancy. On
    // sm_90a, where `cargo xtask build-ptx` writes the launch bounds, a kernel compiled with
    // `min_blocks_per_sm` must reach it (the few-row and column kernels, which `kernel_names`
    // does not list, among them); elsewhere ptxas is free and the counts are printed only.
    let Some(gpu) = gpu_or_skip("every_kernel_is_resident_as_its_launch_bounds_promise") else { return };
    let mut kernels: Vec<_> = gpu.kernel_names().into_iter().map(|name| gpu.kernel(name).unwrap()).collect();
    for (m, name) in [(8, "few_rows"), (sgemm::gpu::TALL_ROWS, "few_rows_tall")] {
        let kernel = gpu.chosen_for(Layout::RowMajor, 1, m, 1024, 1024);
        assert_eq!(kernel.spec.name, name);
        kernels.push(kernel);
    }
    let data = vec![0.0f32; 1024 * 1024];
    let (a, b_t) = (MatRef::new(&data, 8, 1024, 1024), MatRef::new(&data, 1024, 1024, 1024).t());
    let kernel = gpu.chosen_for_host(1, &a, &b_t, &MatRef::new(&data, 8, 1024, 1024));
    assert_eq!(kernel.spec.name, "few_rows_nt");
    kernels.push(kernel);
    let a16 = MatRef::new(&data, 16, 1024, 1024);
    let kernel = gpu.chosen_for_host(1, &a16, &b_t, &MatRef::new(&data, 16, 1024, 1024));
    assert_eq!(kernel.spec.name, "few_rows_nt_tall");
    kernels.push(kernel);
    for (k, name) in [(8, "vector_narrow"), (17, "vector_staged"), (40, "vector_staged")] {
        let kernel = gpu.chosen_for(Layout::RowMajor, 1, 100_003, 1, k);
        assert_eq!(kernel.spec.name, name);
        kernels.push(kernel);
    }
    let bounded = gpu.info().module_arch == "sm_90a";
    for kernel in kernels {
        println!("{}: {} blocks per SM", kernel.spec.name, kernel.blocks_per_sm());
        if bounded {
            assert!(kernel.blocks_per_sm() >= kernel.spec.min_blocks_per_sm.max(1), "{}", kernel.spec.name);
        }
    }
}

#[test]
fn the_automatic_choice_of_each_policy_passes_the_suite() {
    // The policies pick their kernel by shape (Gpu::chosen_for): the suite's shapes, small k
    // and large, go through whichever each policy picks.
    let Some(gpu) = gpu_or_skip("the_automatic_choice_of_each_policy_passes_the_suite") else { return };
    let mut failures = Vec::new();
    for precision in [Precision::Accurate, Precision::Strict] {
        let gpu = gpu.clone().with_precision(precision);
        let (failed, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            gpu.gemm(alpha, a, b, beta, c)
        });
        println!("gpu {precision:?}: {} failed, max normalized error {worst:.2e}", failed.len());
        failures.extend(failed.into_iter().map(|f| format!("gpu {precision:?}: {f}")));
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
    gpu.gemm(1.0, &a, &b, 0.0, &mut MatMut::contiguous(&mut host, m, n)).unwrap();
    let (a_dev, b_dev) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut c_dev = gpu.alloc(m, n, n).unwrap();
    gpu.gemm_device(1.0, &a_dev, &b_dev, 0.0, &mut c_dev).unwrap();
    let mut device = vec![0.0; m * n];
    gpu.download(&c_dev, &mut MatMut::contiguous(&mut device, m, n)).unwrap();
    // Small integers: every product and partial sum is exact, so the two must agree exactly.
    assert_eq!(host, device);

    // The same product with A stored transposed (k x m, uploaded, then `.t()`), into a
    // column-major C on the device (`alloc(n, m, ld).t()`), downloaded into a row-major host C.
    let a_stored: Vec<f32> = (0..k * m).map(|i| a.at(i % m, i / m)).collect(); // A^T row-major
    let a_t = gpu.upload(&MatRef::contiguous(&a_stored, k, m)).unwrap().t();
    assert_eq!((a_t.rows(), a_t.cols(), a_t.layout()), (m, k, Layout::ColMajor));
    let mut c_col = gpu.alloc(n, m, m + 3).unwrap().t();
    gpu.gemm_device(1.0, &a_t, &b_dev, 0.0, &mut c_col).unwrap();
    let mut from_col = vec![0.0; m * n];
    gpu.download(&c_col, &mut MatMut::contiguous(&mut from_col, m, n)).unwrap();
    assert_eq!(host, from_col);
}

#[test]
fn views_over_a_callers_buffers_at_any_offset_compute_in_place() {
    let Some(gpu) = gpu_or_skip("views_over_a_callers_buffers_at_any_offset_compute_in_place") else {
        return;
    };
    // A column-major A, a row-major B and a row-major C with a padded leading dimension, each
    // starting `offset` elements into a buffer of the caller's own (an offset of 1 or 3 leaves
    // it 4-byte aligned only, which the 16-byte-load kernels must notice). C's buffer carries
    // guard values before, between and after the block, which must survive.
    let (m, n, k) = (67, 40, 36);
    let guard = -7.5f32;
    for precision in [Precision::Accurate, Precision::Strict] {
        let gpu = gpu.clone().with_precision(precision);
        for offset in [0, 1, 3, 4] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect(); // column-major m x k
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect(); // row-major k x n
            let ldc = n + 5;
            let mut expected = vec![0.0f32; m * n];
            let (a_host, b_host) = (MatRef::col_major(&a, m, k, m), MatRef::contiguous(&b, k, n));
            sgemm::cpu::gemm(
                None,
                Some(1),
                1.0,
                &a_host,
                &b_host,
                0.0,
                &mut MatMut::contiguous(&mut expected, m, n),
            )
            .unwrap();
            let pad = |data: &[f32]| [vec![guard; offset], data.to_vec(), vec![guard; 9]].concat();
            let stream = gpu.stream();
            let a_buf = stream.clone_htod(&pad(&a)).unwrap();
            let b_buf = stream.clone_htod(&pad(&b)).unwrap();
            let mut c_buf = stream.clone_htod(&vec![guard; offset + m * ldc + 9]).unwrap();
            let a_view = DeviceMatRef::new(a_buf.slice(offset..), Layout::ColMajor, m, k, m).unwrap();
            let b_view = DeviceMatRef::new(b_buf.slice(offset..), Layout::RowMajor, k, n, n).unwrap();
            let c_view = DeviceMatMut::new(c_buf.slice_mut(offset..), Layout::RowMajor, m, n, ldc).unwrap();
            gpu.gemm_device(1.0, a_view, b_view, 0.0, c_view).unwrap();
            let c = stream.clone_dtoh(&c_buf).unwrap();
            for (i, &x) in c.iter().enumerate() {
                let inside = i >= offset && (i - offset) / ldc < m && (i - offset) % ldc < n;
                let want = if inside { expected[(i - offset) / ldc * n + (i - offset) % ldc] } else { guard };
                assert_eq!(x, want, "{precision:?}, offset {offset}, element {i} of C's buffer");
            }
        }
    }
}

#[test]
fn host_calls_with_page_locked_operands_match_the_cpu() {
    let Some(gpu) = gpu_or_skip("host_calls_with_page_locked_operands_match_the_cpu") else { return };
    // Operands past the page-locking threshold (4 MB), small integers so that every result is
    // exact: a padded C read with beta (staged download, padding kept), then a contiguous C
    // with beta = 0 (the direct download), each equal to the CPU's bits.
    let (m, n, k) = (1100, 1030, 1024);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (a, b) = (MatRef::contiguous(&a, m, k), MatRef::contiguous(&b, k, n));
    for (ld, beta) in [(n + 3, 2.0), (n, 0.0)] {
        let c0: Vec<f32> = (0..m * ld).map(|i| (i % 3) as f32).collect();
        let (mut on_gpu, mut on_cpu) = (c0.clone(), c0.clone());
        gpu.gemm(1.0, &a, &b, beta, &mut MatMut::new(&mut on_gpu, m, n, ld)).unwrap();
        sgemm::cpu::gemm(None, None, 1.0, &a, &b, beta, &mut MatMut::new(&mut on_cpu, m, n, ld)).unwrap();
        assert!(on_gpu == on_cpu, "ld {ld}, beta {beta}: the GPU's C differs from the CPU's");
    }
}

#[test]
fn a_view_shorter_than_its_matrix_is_rejected() {
    let Some(gpu) = gpu_or_skip("a_view_shorter_than_its_matrix_is_rejected") else { return };
    let buf = gpu.stream().alloc_zeros::<f32>(99).unwrap();
    let short = DeviceMatRef::new(buf.as_view(), Layout::RowMajor, 10, 10, 10);
    assert!(matches!(short, Err(Error::SliceTooShort { needed: 100, len: 99, .. })), "{short:?}");
}

#[test]
fn device_out_of_memory_is_an_error_and_the_handle_survives() {
    let Some(gpu) = gpu_or_skip("device_out_of_memory_is_an_error_and_the_handle_survives") else { return };
    let huge = gpu.alloc(1 << 20, 1 << 20, 1 << 20); // 4 TiB
    assert!(matches!(huge, Err(Error::OutOfDeviceMemory { .. })), "{huge:?}");
    assert!(gpu.alloc(16, 16, 16).is_ok());
}

#[test]
fn gpu_and_cpu_agree_bit_for_bit_on_integers() {
    let Some(gpu) = gpu_or_skip("gpu_and_cpu_agree_bit_for_bit_on_integers") else { return };
    let (m, n, k) = (129, 67, 301);
    for (trans_a, trans_b, layout) in check::COMBOS {
        // Each view is op(X), X stored contiguously in `layout`.
        let a = MatRef::op_contiguous(check::integers(m * k, 1).leak(), layout, trans_a, m, k);
        let b = MatRef::op_contiguous(check::integers(k * n, 2).leak(), layout, trans_b, k, n);
        let c0 = check::integers(m * n, 3);
        let (ldc, _) = layout.extents(m, n);
        let mut cpu = c0.clone();
        let mut c = MatMut { data: &mut cpu, rows: m, cols: n, ld: ldc, layout };
        sgemm::cpu::gemm(None, None, 2.0, &a, &b, -1.0, &mut c).unwrap();
        for name in gpu.kernel_names() {
            let mut out = c0.clone();
            let mut c = MatMut { data: &mut out, rows: m, cols: n, ld: ldc, layout };
            gpu.clone().with_kernel(name).unwrap().gemm(2.0, &a, &b, -1.0, &mut c).unwrap();
            assert!(out == cpu, "{name} {layout:?} {trans_a} {trans_b}: GPU differs from CPU");
        }
    }
}

#[test]
fn non_finite_and_huge_inputs_give_the_f32_results() {
    let Some(gpu) = gpu_or_skip("non_finite_and_huge_inputs_give_the_f32_results") else { return };
    for name in gpu.kernel_names() {
        let gpu = gpu.clone().with_kernel(name).unwrap();
        let result = check::run_non_finite_case(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            gpu.gemm(alpha, a, b, beta, c)
        });
        assert!(result.is_ok(), "gpu {name}: {}", result.unwrap_err());
    }
}

#[test]
fn shapes_past_one_grid_run_as_several_launches() {
    let Some(gpu) = gpu_or_skip("shapes_past_one_grid_run_as_several_launches") else { return };
    // 65535 tiles of 128 rows plus a partial one: two launches of every kernel (more for the
    // 32-row tiles); then a transposed A of 2.2M x 2, more rows than one transpose grid covers.
    let cases = [
        check::Case::new(65_535 * 128 + 129, 3, 2, 1.0, 0.0, 0),
        check::Case::new(65_535 * 128 + 129, 3, 2, 0.0, 1.5, 0),
        check::Case::new(2, 3, 2_200_000, 1.0, 1.0, 1).with(check::COMBOS[3]),
    ];
    for name in gpu.kernel_names() {
        assert_cases_pass(&gpu.clone().with_kernel(name).unwrap(), &cases, name);
    }
}

/// Runs each case (its index as the seed) through `gpu.gemm` and asserts that it passes the
/// reference check; `label` names the handle in the message.
fn assert_cases_pass(gpu: &sgemm::Gpu, cases: &[check::Case], label: &str) {
    for (seed, case) in cases.iter().enumerate() {
        let r = check::run_case(case, seed as u64, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            gpu.gemm(alpha, a, b, beta, c)
        });
        assert!(r.is_ok(), "{label}: {}", r.unwrap_err());
    }
}

#[test]
fn narrow_shapes_pass_on_the_kernels_made_for_them() {
    let Some(gpu) = gpu_or_skip("narrow_shapes_pass_on_the_kernels_made_for_them") else { return };
    // Shapes the automatic choice gives to the matrix-vector and few-row kernels, each large
    // enough for its own geometry on a GPU of up to 192 SMs: a column of many short rows (a
    // group of lanes a row: every group width, 4- and 16-byte loads; or copied into shared
    // memory: rows of 15, 17 to 64), rows deep enough to split K many ways (narrower than 32 columns: groups
    // of lanes), few outputs with K split, a row split finely on few_rows; odd lengths, padded
    // leading dimensions, a transposed A, a column-major C (the row-major C^T: a row, or for
    // 1 x n a column) and beta = 0 over NaN.
    let cases = [
        check::Case::new(100_003, 1, 63, 1.0, 0.0, 0),
        check::Case::new(100_003, 1, 64, 0.5, 1.5, 1),
        check::Case::new(100_003, 1, 17, 1.0, 0.0, 2),
        check::Case::new(150_001, 1, 16, -2.0, 0.5, 0),
        check::Case::new(150_001, 1, 15, 0.5, 0.0, 1),
        check::Case::new(150_001, 1, 24, 1.0, 0.5, 0),
        check::Case::new(150_001, 1, 32, 1.0, 0.0, 4),
        check::Case::new(100_003, 1, 29, 1.5, 0.0, 1).with(check::COMBOS[1]),
        check::Case::new(1, 100_003, 21, 1.0, -1.0, 2).with(check::COMBOS[4]),
        check::Case::new(60_001, 1, 16, 1.0, 0.0, 0),
        check::Case::new(150_001, 1, 12, 1.0, 0.0, 1).with(check::COMBOS[1]),
        check::Case::new(100_003, 1, 7, -1.0, 0.0, 0),
        check::Case::new(100_003, 1, 3, 1.0, 1.0, 0),
        check::Case::new(100_003, 1, 2, 0.5, 1.5, 3),
        check::Case::new(100_003, 1, 1, 1.0, 0.0, 0),
        check::Case::new(1, 100_003, 8, 1.0, 0.0, 0).with(check::COMBOS[4]),
        check::Case::new(100_003, 1, 5, 1.0, 0.0, 0).with(check::COMBOS[4]),
        check::Case::new(1, 3, 100_001, 1.0, 0.5, 0),
        check::Case::new(1, 9, 40_000, 0.5, 1.5, 2),
        check::Case::new(1, 5, 5000, 1.0, 0.0, 1),
        check::Case::new(1, 257, 65_537, 1.0, 0.0, 1),
        check::Case::new(13, 1, 100_000, 1.0, 1.0, 0),
        check::Case::new(1, 131, 3001, 1.0, 0.0, 0),
    ];
    // The columns of short rows go where the cases above say.
    let choices = [
        (100_003, 65, "vector"),
        (100_003, 64, "vector_staged"),
        (100_003, 33, "vector_staged"),
        (100_003, 32, "vector_staged"),
        (100_003, 17, "vector_staged"),
        (100_003, 15, "vector_staged"),
        (100_003, 16, "vector_narrow"),
        (100_003, 12, "vector_narrow"),
        (100_003, 8, "vector_narrow"),
    ];
    for (m, k, kernel) in choices {
        assert_eq!(gpu.chosen_for(Layout::RowMajor, 1, m, 1, k).spec.name, kernel, "{m}x1x{k}");
    }
    for precision in [Precision::Accurate, Precision::Strict] {
        assert_cases_pass(&gpu.clone().with_precision(precision), &cases, &format!("{precision:?}"));
    }
}

#[test]
fn few_rows_over_a_column_major_b_read_it_as_it_lies() {
    // `few_rows_nt` (and its tall variant, 9 to 32 rows): `B` stored transposed (or `A`, with a column-major `C`, whose row-major
    // problem is `C^T = op(B)^T op(A)^T`), with 16-byte loads (aligned, `k` and `ldb` multiples
    // of 4, any `n`) and 4-byte ones (odd `k`, padded leading dimensions), a partial last
    // block, rows 1 to 8, beta = 0 over NaN and beta != 0.
    let Some(gpu) = gpu_or_skip("few_rows_over_a_column_major_b_read_it_as_it_lies") else { return };
    let (m, n, k) = (8, 4096, 4096);
    let data = vec![0.0f32; n * k];
    let out = vec![0.0f32; m * n];
    let (a, b_t, c) =
        (MatRef::new(&data, m, k, k), MatRef::new(&data, n, k, k).t(), MatRef::new(&out, m, n, n));
    assert_eq!(gpu.chosen_for_host(1, &a, &b_t, &c).spec.name, "few_rows_nt");
    assert_eq!(gpu.chosen_for_host(1, &a, &MatRef::new(&data, k, n, n), &c).spec.name, "few_rows");
    // 9 to 16 rows: the tall variant, whether B fits the L2 or not; 17 to 32 rows only where
    // the tile kernels would copy B (rows of B^T that are not whole 4-vectors), else a tile
    // kernel that reads B as it lies.
    let (a16, b16_t) = (MatRef::new(&data, 16, 1024, 1024), MatRef::new(&data, 2048, 1024, 1024).t());
    let c16 = MatRef::new(&out, 16, 2048, 2048);
    assert_eq!(gpu.chosen_for_host(1, &a16, &b16_t, &c16).spec.name, "few_rows_nt_tall");
    let (a32, c32) = (MatRef::new(&data, 32, k, k), MatRef::new(&out, 32, 64, 64));
    let b32_t = MatRef::new(&data, 64, k, k).t();
    let chosen = gpu.chosen_for_host(1, &a32, &b32_t, &c32);
    assert!(chosen.spec.reads_b_transposed && chosen.spec.name != "few_rows_nt_tall", "{}", chosen.spec.name);
    let (a32, b32_t) = (MatRef::new(&data, 32, k - 1, k - 1), MatRef::new(&data, 64, k - 1, k - 1).t());
    assert_eq!(gpu.chosen_for_host(1, &a32, &b32_t, &c32).spec.name, "few_rows_nt_tall");
    let cases = [
        check::Case::new(8, 4096, 4096, 1.0, 0.0, 0).with(check::COMBOS[2]),
        check::Case::new(5, 1001, 4096, 0.5, 1.5, 0).with(check::COMBOS[2]),
        check::Case::new(8, 4099, 4001, 1.0, 0.0, 0).with(check::COMBOS[3]),
        check::Case::new(3, 777, 1000, -1.0, 0.5, 2).with(check::COMBOS[2]),
        check::Case::new(1, 300, 37, 1.0, 0.0, 0).with(check::COMBOS[2]),
        check::Case::new(4099, 6, 2000, 1.5, 0.0, 0).with(check::COMBOS[5]),
        check::Case::new(2001, 7, 129, 1.0, 1.0, 1).with(check::COMBOS[7]),
        check::Case::new(16, 2048, 1024, 1.0, 0.0, 0).with(check::COMBOS[2]),
        check::Case::new(13, 1004, 1000, 0.5, 1.5, 0).with(check::COMBOS[3]),
        check::Case::new(29, 3001, 2003, 1.0, 0.5, 0).with(check::COMBOS[2]),
        check::Case::new(3001, 32, 2048, 1.0, 0.0, 1).with(check::COMBOS[5]),
    ];
    for precision in [Precision::Accurate, Precision::Strict] {
        assert_cases_pass(&gpu.clone().with_precision(precision), &cases, &format!("{precision:?}"));
    }
}

#[test]
fn matrix_vector_products_read_a_transposed_matrix_as_it_lies() {
    // `C = op(A) x` with `A` stored transposed, `C = x^T op(B)` with `B` stored transposed, in
    // each layout and pairing: the vector `C` is described in the other layout, the product
    // computed as its transpose, so the choice is the transposed problem's kernel. Padded
    // leading dimensions leave a strided vector `C` that cannot be described so (the matrix is
    // then copied): every case still gives the product and writes nothing outside `C`.
    let Some(gpu) = gpu_or_skip("matrix_vector_products_read_a_transposed_matrix_as_it_lies") else { return };
    let (long, k) = (20_001, 1001);
    let data = vec![0.0f32; long * k];
    let out = vec![0.0f32; long];
    let a_t = MatRef::new(&data, k, long, long).t();
    let (x, c) = (MatRef::new(&data, k, 1, 1), MatRef::new(&out, long, 1, 1));
    let transposed_problem = gpu.chosen_for(Layout::RowMajor, 1, 1, long, k).spec.name;
    assert_eq!(gpu.chosen_for_host(1, &a_t, &x, &c).spec.name, transposed_problem);
    let (x_row, b_t) = (MatRef::new(&data, 1, k, k), MatRef::new(&data, long, k, k).t());
    let c_row = MatRef::new(&out, 1, long, long);
    assert_eq!(
        gpu.chosen_for_host(1, &x_row, &b_t, &c_row).spec.name,
        gpu.chosen_for(Layout::RowMajor, 1, long, 1, k).spec.name
    );
    let mut cases = Vec::new();
    for combo in check::COMBOS {
        for (pad, beta) in [(0, 0.0), (0, 0.5), (3, 0.0)] {
            cases.push(check::Case::new(long, 1, k, 1.5, beta, pad).with(combo));
            cases.push(check::Case::new(1, long, k, 1.0, beta, pad).with(combo));
        }
    }
    for precision in [Precision::Accurate, Precision::Strict] {
        assert_cases_pass(&gpu.clone().with_precision(precision), &cases, &format!("{precision:?}"));
    }
}

#[test]
fn every_count_of_k_slices_gives_the_product() {
    let Some(gpu) = gpu_or_skip("every_count_of_k_slices_gives_the_product") else { return };
    // `with_k_slices` forces the split that `k_slices` otherwise chooses: every tile kernel
    // that splits K, at counts that divide K evenly and not, in slices of 4- and 16-byte
    // loads (K odd and a multiple of 4), on a transposed A, a column-major C, padded leading
    // dimensions and beta = 0 over NaN.
    let cases = [
        check::Case::new(97, 75, 1001, 1.0, 0.5, 1),
        check::Case::new(130, 190, 1024, -1.5, 0.0, 0),
        check::Case::new(64, 33, 2049, 0.5, 1.5, 3).with(check::COMBOS[1]),
        check::Case::new(200, 70, 777, 1.0, 0.0, 2).with(check::COMBOS[4]),
    ];
    assert!(matches!(gpu.clone().with_k_slices(Some(0)), Err(Error::InvalidArgument { .. })));
    for name in ["specialized", "split_k", "small_tile", "tiny_tile"] {
        let Ok(by_name) = gpu.clone().with_kernel(name) else { continue };
        let kernel = gpu.kernel(name).unwrap();
        let shallowest = kernel.spec.k_slices.unwrap() as usize;
        for slices in [1, 2, 3, 5, 7, 32, 1000] {
            let gpu = by_name.clone().with_k_slices(Some(slices)).unwrap();
            // The count asked for, within the kernel's limits.
            let expected = slices.min(32).min(1001 / shallowest).max(1);
            assert_eq!(gpu.k_slices(kernel, 97, 75, 1001), expected, "{name} at {slices}");
            assert_cases_pass(&gpu, &cases, &format!("{name} in {slices} K slices"));
        }
    }
}

#[test]
fn calls_from_several_threads_share_the_kept_buffers() {
    let Some(gpu) = gpu_or_skip("calls_from_several_threads_share_the_kept_buffers") else { return };
    // The buffers a device keeps between calls (host operands' copies, padded and transposed
    // copies, split-K partials) are shared by every handle of the device: four threads call on
    // clones of one handle, with copies of every kind, larger and smaller in turn, so that each
    // buffer is grown, then handed out again holding another call's values.
    let cases = [
        check::Case::new(1001, 999, 1003, 1.0, 0.5, 0),
        check::Case::new(64, 33, 17, -1.0, 0.0, 1).with(check::COMBOS[5]),
        check::Case::new(700, 500, 333, 0.5, 1.5, 2).with(check::COMBOS[3]),
        check::Case::new(130, 190, 1024, 1.0, 0.0, 0).with(check::COMBOS[4]),
        check::Case::new(97, 75, 1001, 1.0, 0.5, 1),
    ];
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (gpu, cases) = (gpu.clone(), &cases);
            s.spawn(move || {
                for round in 0..2u64 {
                    for (i, case) in cases.iter().enumerate() {
                        let seed = thread * 100 + round * 10 + i as u64;
                        let r = check::run_case(
                            case,
                            seed,
                            |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
                                gpu.gemm(alpha, a, b, beta, c)
                            },
                        );
                        assert!(r.is_ok(), "thread {thread}, round {round}: {}", r.unwrap_err());
                    }
                }
            });
        }
    });
}

#[test]
fn columns_of_short_rows_give_the_same_bits_with_4_and_16_byte_loads() {
    let Some(gpu) = gpu_or_skip("columns_of_short_rows_give_the_same_bits_with_4_and_16_byte_loads") else {
        return;
    };
    // `vector_narrow` loads A 16 bytes at a time where A is 16-byte aligned and its rows a
    // multiple of 4 long, else 4 bytes at a time, with the same order of additions: A at an
    // offset of 0 and of 1 element in a buffer of the caller's takes each entry. Values that
    // are not integers, so that another order would show in the bits.
    let m = 150_001;
    for k in [4, 8, 12, 16] {
        let value = |i: usize, seed: usize| ((i * 7919 + seed) % 1999) as f32 / 977.0 - 1.0;
        let a: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
        let x: Vec<f32> = (0..k).map(|i| value(i, 2)).collect();
        let stream = gpu.stream();
        let b_buf = stream.clone_htod(&x).unwrap();
        let results = [0, 1].map(|offset| {
            let a_buf = stream.clone_htod(&[vec![0.0; offset], a.clone()].concat()).unwrap();
            let mut c_buf = stream.clone_htod(&vec![f32::NAN; m]).unwrap();
            let a_view = DeviceMatRef::new(a_buf.slice(offset..), Layout::RowMajor, m, k, k).unwrap();
            let b_view = DeviceMatRef::new(b_buf.slice(..), Layout::RowMajor, k, 1, 1).unwrap();
            let c_view = DeviceMatMut::new(c_buf.slice_mut(..), Layout::RowMajor, m, 1, 1).unwrap();
            gpu.gemm_device(1.5, a_view, b_view, 0.0, c_view).unwrap();
            stream.clone_dtoh(&c_buf).unwrap()
        });
        assert_eq!(gpu.chosen_for(Layout::RowMajor, 1, m, 1, k).spec.name, "vector_narrow");
        for (i, (wide, narrow)) in results[0].iter().zip(&results[1]).enumerate() {
            let want: f64 = 1.5 * (0..k).map(|p| a[i * k + p] as f64 * x[p] as f64).sum::<f64>();
            assert!(
                (*wide as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "k = {k}, row {i}: {wide} against {want}"
            );
            assert_eq!(wide.to_bits(), narrow.to_bits(), "k = {k}, row {i}");
        }
    }
}

#[test]
fn offsets_past_2_to_the_32_elements_index_correctly() {
    // C with 2^21 + 1 rows 2100 elements apart spans 4.4e9 elements (17.6 GB): a 32-bit
    // element offset would wrap. Opt-in (SGEMM_LARGE_TESTS=1): it needs that much memory on
    // the device and about twice on the host.
    if std::env::var_os("SGEMM_LARGE_TESTS").is_none() {
        let _ = writeln!(std::io::stderr(), "SKIPPED offsets_past_2_to_the_32: set SGEMM_LARGE_TESTS=1");
        return;
    }
    let Some(gpu) = gpu_or_skip("offsets_past_2_to_the_32_elements_index_correctly") else { return };
    let (m, n, k, ldc) = ((1 << 21) + 1, 4, 4, 2100);
    let (a, b) = (check::integers(m * k, 4), check::integers(k * n, 5));
    let span = (m - 1) * ldc + n;
    assert!(span > 1 << 32);
    let mut c = vec![0.0f32; span];
    // naive, and the automatic choice.
    for (name, gpu) in [("naive", gpu.clone().with_kernel("naive").unwrap()), ("auto", gpu)] {
        gpu.gemm(
            1.0,
            &MatRef::contiguous(&a, m, k),
            &MatRef::contiguous(&b, k, n),
            0.0,
            &mut MatMut::new(&mut c, m, n, ldc),
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert_eq!(c[i * ldc + j], want, "{name}: C[{i}][{j}] at offset {}", i * ldc + j);
            }
        }
        c.iter_mut().for_each(|x| *x = 0.0);
    }
}

#[test]
fn tile_kernels_read_transposed_operands_as_they_lie() {
    // `small_tile`, `tiny_tile` and `split_k` (whole, and in K slices: the cost model's, which
    // for a column-major `B` leave no columns of `K` over, or a count given, which may leave a
    // tail for the reduction: then only a column-major `A` is read as it lies, and `B` copied)
    // on `A`, `B` or both stored transposed, where their 16-byte entries read them as they lie
    // (the variant is the kernel chosen), single and strided: the tiles in shared memory are
    // those of row-major copies, so the bits are the same kernel's on such copies (made here)
    // in as many K slices. Non-integer values, so that a sum in another order would differ. An
    // odd `m` or `k` (a transposed operand's lines of no whole 4-vectors) goes to the copy, with
    // the same bits.
    let Some(gpu) = gpu_or_skip("tile_kernels_read_transposed_operands_as_they_lie") else { return };
    // `batch` members of a `rows x cols` matrix stored column-major with leading dimension
    // `ld`, `cols * ld` apart, NaN between their columns; and their row-major copies.
    let stored_transposed = |batch: usize, (rows, cols, ld): (usize, usize, usize), seed: u64| {
        let mut rng = StdRng::seed_from_u64(seed);
        let member = cols * ld;
        let data: Vec<f32> = (0..batch * member)
            .map(|i| match check::in_matrix(Layout::ColMajor, rows, cols, ld, i % member) {
                true => rng.random_range(-1.0f32..1.0),
                false => f32::NAN,
            })
            .collect();
        let row_major: Vec<f32> =
            data.chunks(member).flat_map(|x| MatRef::col_major(x, rows, cols, ld).to_row_major()).collect();
        (data, row_major)
    };
    for (name, slices) in [
        ("small_tile", None),
        ("tiny_tile", None),
        ("tiny_tile", Some(3)),
        ("split_k", None),
        ("split_k", Some(3)),
    ] {
        let by_name = gpu.clone().with_kernel(name).unwrap().with_k_slices(slices).unwrap();
        let kernel = gpu.kernel(name).unwrap();
        for (m, n, k, batch) in [
            (64usize, 64usize, 64usize, 1usize),
            (132, 100, 1008, 1),
            (96, 80, 1000, 1),
            (64, 64, 64, 7),
            (260, 36, 516, 3),
            (67, 40, 1001, 2),
        ] {
            // Leading dimensions padded to a multiple of 4 where the shape is one.
            let (lda_t, ldb_t) = (m.next_multiple_of(4), k.next_multiple_of(4));
            let ((a_t, a), (b_t, b)) =
                (stored_transposed(batch, (m, k, lda_t), 1), stored_transposed(batch, (k, n, ldb_t), 2));
            let mut rng = StdRng::seed_from_u64(3);
            let c0: Vec<f32> = (0..batch * m * n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let run = |gpu: &Gpu, a_view: MatRef, a_step: usize, b_view: MatRef, b_step: usize| {
                let mut c = c0.clone();
                let a_s = sgemm::Strided::new(a_view, a_step);
                let b_s = sgemm::Strided::new(b_view, b_step);
                let mut c_s = sgemm::Strided::new(MatMut::contiguous(&mut c, m, n), m * n);
                gpu.gemm_strided(batch, 0.75, &a_s, &b_s, 0.5, &mut c_s).unwrap();
                c
            };
            let (a_rm, b_rm) = (MatRef::contiguous(&a, m, k), MatRef::contiguous(&b, k, n));
            let (a_cm, b_cm) = (MatRef::new(&a_t, k, m, lda_t).t(), MatRef::new(&b_t, n, k, ldb_t).t());
            let (a_len, b_len) = (k * lda_t, n * ldb_t);
            for (ta, tb, suffix) in [(true, false, "_tn"), (false, true, "_nt"), (true, true, "_tt")] {
                let (a_view, a_step) = if ta { (a_cm, a_len) } else { (a_rm, m * k) };
                let (b_view, b_step) = if tb { (b_cm, b_len) } else { (b_rm, k * n) };
                let c = run(&by_name, a_view, a_step, b_view, b_step);
                let out = vec![0.0f32; m * n];
                let chosen =
                    by_name.chosen_for_host(batch, &a_view, &b_view, &MatRef::contiguous(&out, m, n));
                // The row-major copies in the K slices of the kernel run.
                let run_slices = if batch == 1 { by_name.k_slices(chosen, m, n, k) } else { 1 };
                let copies = by_name.clone().with_k_slices(Some(run_slices)).unwrap();
                let want = run(&copies, a_rm, m * k, b_rm, k * n);
                let label = format!("{name} {m}x{n}x{k} x{batch} {suffix} slices {slices:?}");
                assert!(check::same_bits(&c, &want), "{label}: bits differ from the row-major copies");
                // A column-major B as it lies where the K slices (given, or the model's for a
                // row-major B) leave no columns over; where only other counts would, as it lies
                // in those or copied, as the model predicts; with both column-major, else A as
                // it lies and a copy of B.
                let base_slices = if batch == 1 { by_name.k_slices(kernel, m, n, k) } else { 1 };
                let a_as_it_lies = !ta || m % 4 == 0;
                let b_as_it_lies = !tb || k % (4 * base_slices) == 0;
                let b_may_lie = !tb || (slices.is_none() && k % 4 == 0);
                let fallback = if ta && tb && m % 4 == 0 && n % 4 == 0 {
                    format!("{name}_tn")
                } else {
                    name.to_string()
                };
                let variant = format!("{name}{suffix}");
                if a_as_it_lies && b_as_it_lies {
                    assert_eq!(chosen.spec.name, variant, "{label}");
                } else if a_as_it_lies && b_may_lie {
                    let got = chosen.spec.name;
                    assert!(got == variant || got == fallback, "{label}: {got}");
                } else {
                    assert_eq!(chosen.spec.name, fallback, "{label}");
                }
            }
        }
    }
}
