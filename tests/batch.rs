//! Batches (strided and lists of views) on both backends against the f64 reference, the
//! device forms on the GPU, and the batch's own errors. Without a usable CUDA device the GPU
//! tests say so and pass (CI has no GPU).

use sgemm::{Backend, DeviceMatMut, DeviceMatRef, Engine, Error, Gpu, MatMut, MatRef, Precision, Strided};
use sgemm_check::batch::{self, BatchedGemm};
use sgemm_check::gpu_or_skip;
use sgemm_check::suite::integers;

/// An engine as a [`BatchedGemm`].
struct Through<'a>(&'a Engine);

impl BatchedGemm for Through<'_> {
    fn strided(
        &mut self,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> sgemm::Result<()> {
        self.0.gemm_strided(batch, alpha, a, b, beta, c)
    }

    fn list(
        &mut self,
        alpha: f32,
        a: &[MatRef],
        b: &[MatRef],
        beta: f32,
        c: &mut [MatMut],
    ) -> sgemm::Result<()> {
        self.0.gemm_batch(alpha, a, b, beta, c)
    }
}

fn run(label: &str, engine: &Engine) {
    let (failures, worst) = batch::run_suite(&mut Through(engine));
    println!(
        "{label}: {} cases, {} failed, max normalized error {worst:.2e}",
        batch::cases().len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{label}: {} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn cpu_batches_pass_the_suite_on_one_and_two_threads() {
    for threads in [1, 2] {
        let engine = Engine::new(Backend::Cpu).unwrap().with_cpu_threads(threads);
        run(&format!("cpu, {threads} threads"), &engine);
    }
}

#[test]
fn cpu_ladder_kernels_take_batches() {
    let engine = Engine::new(Backend::Cpu).unwrap().with_cpu_threads(2);
    for name in engine.kernel_names() {
        run(&format!("cpu {name}"), &engine.clone().with_kernel(name).unwrap());
    }
}

#[test]
fn gpu_batches_pass_the_suite_under_each_policy_and_kernel() {
    let Some(_) = gpu_or_skip("gpu_batches_pass_the_suite_under_each_policy_and_kernel") else { return };
    let engine = Engine::new(Backend::Gpu).unwrap();
    for precision in [Precision::Accurate, Precision::Strict] {
        run(&format!("gpu {precision:?}"), &engine.clone().with_precision(precision));
    }
    for name in engine.kernel_names() {
        run(&format!("gpu {name}"), &engine.clone().with_kernel(name).unwrap());
    }
}

/// The device forms through host buffers: each operand uploaded whole, the device call, the
/// result copied back whole (the suite then checks every element of C's buffer).
struct OnDevice<'a>(&'a Gpu);

impl BatchedGemm for OnDevice<'_> {
    fn strided(
        &mut self,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> sgemm::Result<()> {
        let stream = self.0.stream();
        let a_buf = stream.clone_htod(a.matrix.data).unwrap();
        let b_buf = stream.clone_htod(b.matrix.data).unwrap();
        let mut c_buf = stream.clone_htod(&*c.matrix.data).unwrap();
        let view = |buf, m: &MatRef| DeviceMatRef::new(buf, m.layout, m.rows, m.cols, m.ld);
        let (am, bm, cm) = (&a.matrix, &b.matrix, &c.matrix);
        let c_view = DeviceMatMut::new(c_buf.as_view_mut(), cm.layout, cm.rows, cm.cols, cm.ld)?;
        self.0.gemm_strided_device(
            batch,
            alpha,
            Strided::new(view(a_buf.as_view(), am)?, a.stride),
            Strided::new(view(b_buf.as_view(), bm)?, b.stride),
            beta,
            Strided::new(c_view, c.stride),
        )?;
        stream.memcpy_dtoh(&c_buf, &mut *c.matrix.data).unwrap();
        Ok(())
    }

    fn list(
        &mut self,
        alpha: f32,
        a: &[MatRef],
        b: &[MatRef],
        beta: f32,
        c: &mut [MatMut],
    ) -> sgemm::Result<()> {
        let stream = self.0.stream();
        let a_bufs: Vec<_> = a.iter().map(|m| stream.clone_htod(m.data).unwrap()).collect();
        let b_bufs: Vec<_> = b.iter().map(|m| stream.clone_htod(m.data).unwrap()).collect();
        let mut c_bufs: Vec<_> = c.iter().map(|m| stream.clone_htod(&*m.data).unwrap()).collect();
        let a_views = a
            .iter()
            .zip(&a_bufs)
            .map(|(m, d)| DeviceMatRef::new(d.as_view(), m.layout, m.rows, m.cols, m.ld));
        let b_views = b
            .iter()
            .zip(&b_bufs)
            .map(|(m, d)| DeviceMatRef::new(d.as_view(), m.layout, m.rows, m.cols, m.ld));
        let (a_views, b_views) =
            (a_views.collect::<sgemm::Result<Vec<_>>>()?, b_views.collect::<sgemm::Result<Vec<_>>>()?);
        let c_views = c
            .iter()
            .zip(c_bufs.iter_mut())
            .map(|(m, d)| DeviceMatMut::new(d.as_view_mut(), m.layout, m.rows, m.cols, m.ld));
        let mut c_views = c_views.collect::<sgemm::Result<Vec<_>>>()?;
        self.0.gemm_batch_device(alpha, &a_views, &b_views, beta, &mut c_views)?;
        drop(c_views);
        for (m, d) in c.iter_mut().zip(&c_bufs) {
            stream.memcpy_dtoh(d, &mut *m.data).unwrap();
        }
        Ok(())
    }
}

#[test]
fn gpu_device_batches_pass_the_suite() {
    let Some(gpu) = gpu_or_skip("gpu_device_batches_pass_the_suite") else { return };
    for precision in [Precision::Accurate, Precision::Strict] {
        let gpu = gpu.clone().with_precision(precision);
        let (failures, worst) = batch::run_suite(&mut OnDevice(&gpu));
        println!("gpu device {precision:?}: {} failed, max normalized error {worst:.2e}", failures.len());
        assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    }
}

/// More members than one grid's `gridDim.z` (65535) holds: the launches split the batch.
#[test]
fn gpu_batches_past_the_grid_limit() {
    let Some(gpu) = gpu_or_skip("gpu_batches_past_the_grid_limit") else { return };
    let (batch, m, n, k) = (70_001, 3, 5, 4);
    let a = integers(batch * m * k, 1);
    let b = integers(batch * k * n, 2);
    let mut c = vec![f32::NAN; batch * m * n];
    for policy in [Precision::Accurate, Precision::Strict] {
        let gpu = gpu.clone().with_precision(policy);
        gpu.gemm_strided(
            batch,
            1.0,
            &Strided::new(MatRef::contiguous(&a, m, k), m * k).t().t(),
            &Strided::new(MatRef::col_major(&b, k, n, k), k * n),
            0.0,
            &mut Strided::new(MatMut::contiguous(&mut c, m, n), m * n),
        )
        .unwrap();
        for z in [0, 65_534, 65_535, 65_536, batch - 1] {
            for i in 0..m {
                for j in 0..n {
                    // B is column-major (transposed on the device, member by member): B[p][j] is
                    // b[z k n + j k + p].
                    let want: f32 = (0..k).map(|p| a[z * m * k + i * k + p] * b[z * k * n + j * k + p]).sum();
                    assert_eq!(c[z * m * n + i * n + j], want, "{policy:?} member {z} ({i}, {j})");
                }
            }
        }
    }
}

#[test]
fn gpu_batches_of_columns_give_what_their_members_give_alone() {
    let Some(gpu) = gpu_or_skip("gpu_batches_of_columns_give_what_their_members_give_alone") else { return };
    // Columns of many short rows (the matrix-vector kernels for them take the batch on the
    // grid): members of A a multiple of 4 floats apart (16-byte loads where k allows) and an
    // odd distance apart (4-byte loads), one vector for all of them (stride 0). Each member
    // must give the bits of the same product alone.
    let (batch, m) = (3, 40_001);
    for (k, pad) in [(8, 4), (12, 0), (12, 1), (7, 3), (24, 0)] {
        let stride = m * k + pad;
        let value = |i: usize| ((i * 7919) % 1999) as f32 / 977.0 - 1.0;
        let a: Vec<f32> = (0..batch * stride).map(value).collect();
        let x: Vec<f32> = (0..k).map(|i| value(i + 5)).collect();
        let mut c = vec![f32::NAN; batch * m];
        gpu.gemm_strided(
            batch,
            1.0,
            &Strided::new(MatRef::contiguous(&a, m, k), stride),
            &Strided::new(MatRef::contiguous(&x, k, 1), 0),
            0.0,
            &mut Strided::new(MatMut::contiguous(&mut c, m, 1), m),
        )
        .unwrap();
        for z in 0..batch {
            let mut alone = vec![f32::NAN; m];
            gpu.gemm(
                1.0,
                &MatRef::contiguous(&a[z * stride..], m, k),
                &MatRef::contiguous(&x, k, 1),
                0.0,
                &mut MatMut::contiguous(&mut alone, m, 1),
            )
            .unwrap();
            for (i, want) in alone.iter().enumerate() {
                assert_eq!(c[z * m + i].to_bits(), want.to_bits(), "k = {k}, member {z}, row {i}");
            }
        }
    }
}

/// Batches of 9 to 16 rows a member (up to 32 from `NT_TALL_BATCH_DEEP` on, where the tile
/// kernels would copy `B`; only up to 16 from there where they read it as it lies) over a `B`
/// stored transposed, which `few_rows_nt_tall` reads as it lies: every member must give the bits
/// of the same product alone (which the suites check against the reference), with members of
/// `A` a multiple of 4 floats apart (16-byte loads where `k` allows) and an odd distance apart,
/// odd depths, a partial last block of columns, and one `B` for every member (stride 0). A batch
/// too shallow (`NT_TALL_BATCH_DEPTH`), or too tall for its depth (`TALL_ROWS`), goes to the
/// tile kernels, a single product of that shape does not where it is at most `TALL_ROWS` tall
/// or the tile kernels would copy `B` (an odd depth).
#[test]
fn gpu_batches_over_a_column_major_b_give_what_their_members_give_alone() {
    let Some(gpu) = gpu_or_skip("gpu_batches_over_a_column_major_b_give_what_their_members_give_alone")
    else {
        return;
    };
    let batch = 5;
    let deep = sgemm::gpu::NT_TALL_BATCH_DEEP;
    // Odd depths (the tile kernels copy B), then depths they read B at as it lies.
    for (m, k) in [(16, sgemm::gpu::NT_TALL_BATCH_DEPTH - 1), (17, deep - 1), (16, deep - 4), (17, 2 * deep)]
    {
        let n = 128;
        let data = vec![0.0f32; n * k];
        let (a, b_t) = (MatRef::contiguous(&data, m, k), MatRef::contiguous(&data, n, k).t());
        let c = MatRef::contiguous(&data, m, n);
        assert_ne!(gpu.chosen_for_host(batch, &a, &b_t, &c).spec.name, "few_rows_nt_tall");
        let single_tall = m <= sgemm::gpu::TALL_ROWS || !k.is_multiple_of(4);
        assert_eq!(
            gpu.chosen_for_host(1, &a, &b_t, &c).spec.name == "few_rows_nt_tall",
            single_tall,
            "{m}x{k}"
        );
    }
    let cases = [
        (16, 300, 1024, 0, true),
        (13, 1001, 167, 1, true),
        (16, 64, 1001, 4, false),
        (9, 4099, 83, 3, true),
        (29, 100, 1025, 0, true),
    ];
    for (m, n, k, pad, own_b) in cases {
        let (a_step, b_step, c_step) = (m * k + pad, if own_b { n * k + pad } else { 0 }, m * n);
        let value = |i: usize| ((i * 7919) % 1999) as f32 / 977.0 - 1.0;
        let a: Vec<f32> = (0..batch * a_step).map(value).collect();
        let b: Vec<f32> = (0..(batch - 1) * b_step + n * k).map(|i| value(i + 11)).collect();
        let c0: Vec<f32> = (0..batch * c_step).map(|i| value(i + 3)).collect();
        let (a_view, b_t) = (MatRef::contiguous(&a, m, k), MatRef::contiguous(&b, n, k).t());
        let chosen = gpu.chosen_for_host(batch, &a_view, &b_t, &MatRef::contiguous(&c0, m, n));
        assert_eq!(chosen.spec.name, "few_rows_nt_tall", "{m}x{n}x{k}");
        let mut c = c0.clone();
        gpu.gemm_strided(
            batch,
            0.75,
            &Strided::new(a_view, a_step),
            &Strided::new(b_t, b_step),
            0.5,
            &mut Strided::new(MatMut::contiguous(&mut c, m, n), c_step),
        )
        .unwrap();
        for z in 0..batch {
            let mut alone = c0[z * c_step..(z + 1) * c_step].to_vec();
            gpu.gemm(
                0.75,
                &MatRef::contiguous(&a[z * a_step..], m, k),
                &MatRef::contiguous(&b[z * b_step..], n, k).t(),
                0.5,
                &mut MatMut::contiguous(&mut alone, m, n),
            )
            .unwrap();
            for (i, want) in alone.iter().enumerate() {
                let got = c[z * c_step + i];
                assert_eq!(got.to_bits(), want.to_bits(), "{m}x{n}x{k}: member {z}, element {i}");
            }
        }
    }
}

/// A batch whose transposed copies would not fit the buffers a handle keeps for them (128 MB an
/// operand) runs in runs of members: every member, those on either side of a run's end among
/// them, must give the bits of the same product alone on the same kernel.
#[test]
fn gpu_batches_larger_than_the_kept_copies_give_what_their_members_give_alone() {
    let Some(gpu) = gpu_or_skip("gpu_batches_larger_than_the_kept_copies_give_what_their_members_give_alone")
    else {
        return;
    };
    let gpu = gpu.with_kernel("small_tile").unwrap().with_k_slices(Some(1)).unwrap();
    // 260 members of a 130 x 1030 A^T: 139 MB of copies, a run of 250 members and one of 10.
    let (batch, m, n, k) = (260, 130, 24, 1030);
    let value = |i: usize| ((i * 7919) % 1999) as f32 / 977.0 - 1.0;
    let a: Vec<f32> = (0..batch * m * k).map(value).collect();
    let b: Vec<f32> = (0..batch * k * n).map(|i| value(i + 11)).collect();
    let mut c = vec![f32::NAN; batch * m * n];
    gpu.gemm_strided(
        batch,
        1.0,
        &Strided::new(MatRef::contiguous(&a, k, m).t(), m * k),
        &Strided::new(MatRef::contiguous(&b, n, k).t(), k * n),
        0.0,
        &mut Strided::new(MatMut::contiguous(&mut c, m, n), m * n),
    )
    .unwrap();
    for z in 0..batch {
        let mut alone = vec![f32::NAN; m * n];
        gpu.gemm(
            1.0,
            &MatRef::contiguous(&a[z * m * k..], k, m).t(),
            &MatRef::contiguous(&b[z * k * n..], n, k).t(),
            0.0,
            &mut MatMut::contiguous(&mut alone, m, n),
        )
        .unwrap();
        for (i, want) in alone.iter().enumerate() {
            assert_eq!(c[z * m * n + i].to_bits(), want.to_bits(), "member {z}, element {i}");
        }
    }
}

/// Batches with more member tiles than the GPU holds at once, on `specialized`, which then
/// computes several members per block in turn: every member must give the bits of the same
/// product alone, including members whose values are outside the window (one with huge
/// values, one with an infinity: the scaled loop at the end), tiles past the edges of `C`,
/// narrow tiles, and rows of `C` that do not start on 32-byte sectors (the last member's
/// staged epilogue).
#[test]
fn gpu_batches_of_several_members_per_block_give_what_their_members_give_alone() {
    let Some(gpu) =
        gpu_or_skip("gpu_batches_of_several_members_per_block_give_what_their_members_give_alone")
    else {
        return;
    };
    if !gpu.kernel_names().contains(&"specialized") {
        println!("SKIPPED: no `specialized` kernel on this device");
        return;
    }
    let gpu = gpu.with_kernel("specialized").unwrap().with_k_slices(Some(1)).unwrap();
    let batch = 301;
    for (m, n, k, beta) in [(130, 100, 70, 0.5), (200, 60, 33, 0.0), (64, 128, 96, 1.0)] {
        let value = |i: usize| ((i * 7919) % 1999) as f32 / 977.0 - 1.0;
        let mut a: Vec<f32> = (0..batch * m * k).map(value).collect();
        let b: Vec<f32> = (0..batch * k * n).map(|i| value(i + 11)).collect();
        // Member 7's A outside the window (scaled), member 150's holds an infinity, and the
        // last member's is tiny (scaled too).
        a[7 * m * k..8 * m * k].iter_mut().for_each(|x| *x *= 1e30);
        a[150 * m * k + 5] = f32::INFINITY;
        a[(batch - 1) * m * k..].iter_mut().for_each(|x| *x *= 1e-30);
        let c0: Vec<f32> = (0..batch * m * n).map(|i| value(i + 3)).collect();
        let mut c = c0.clone();
        gpu.gemm_strided(
            batch,
            0.75,
            &Strided::new(MatRef::contiguous(&a, m, k), m * k),
            &Strided::new(MatRef::contiguous(&b, k, n), k * n),
            beta,
            &mut Strided::new(MatMut::contiguous(&mut c, m, n), m * n),
        )
        .unwrap();
        for z in 0..batch {
            let mut alone = c0[z * m * n..(z + 1) * m * n].to_vec();
            gpu.gemm(
                0.75,
                &MatRef::contiguous(&a[z * m * k..], m, k),
                &MatRef::contiguous(&b[z * k * n..], k, n),
                beta,
                &mut MatMut::contiguous(&mut alone, m, n),
            )
            .unwrap();
            for (i, want) in alone.iter().enumerate() {
                let got = c[z * m * n + i];
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{m}x{n}x{k}: member {z}, element {i}: {got} against {want} alone"
                );
            }
        }
    }
}

#[test]
fn batches_are_checked_before_anything_runs() {
    let engine = Engine::new(Backend::Cpu).unwrap();
    let (a, b) = (vec![1.0f32; 2 * 3 * 4], vec![1.0f32; 2 * 4 * 5]);
    let mut c = vec![7.0f32; 2 * 3 * 5];
    let a_s = Strided::new(MatRef::contiguous(&a, 3, 4), 12);
    let b_s = Strided::new(MatRef::contiguous(&b, 4, 5), 20);
    // C's members overlap: stride 0, then a stride that crosses rows.
    for stride in [0, 4, 14] {
        let mut c_s = Strided::new(MatMut::contiguous(&mut c, 3, 5), stride);
        let err = engine.gemm_strided(2, 1.0, &a_s, &b_s, 0.0, &mut c_s).unwrap_err();
        assert!(
            matches!(err, Error::OverlappingOutputs { first: 0, second: 1, .. }),
            "stride {stride}: {err}"
        );
    }
    // Side by side in a wider matrix: apart.
    let mut wide = vec![7.0f32; 3 * 10];
    let mut c_s = Strided::new(MatMut::new(&mut wide, 3, 5, 10), 5);
    engine.gemm_strided(2, 1.0, &a_s, &b_s, 0.0, &mut c_s).unwrap();
    assert!(wide.iter().all(|&x| x == 4.0));
    // A buffer one element short of its last member.
    let short = Strided::new(MatRef::contiguous(&a[..23], 3, 4), 12);
    let mut c_s = Strided::new(MatMut::contiguous(&mut c, 3, 5), 15);
    let err = engine.gemm_strided(2, 1.0, &short, &b_s, 0.0, &mut c_s).unwrap_err();
    assert!(matches!(err, Error::SliceTooShort { position: 7, needed: 24, len: 23, .. }), "{err}");
    // Shapes and leading dimensions as for one product, in BLAS order.
    let bad = Strided::new(MatRef::contiguous(&b, 5, 4), 20);
    let err = engine.gemm_strided(2, 1.0, &a_s, &bad, 0.0, &mut c_s).unwrap_err();
    assert!(matches!(err, Error::DimensionMismatch(_)), "{err}");
    // A batch of none does nothing, even with nothing to hold it.
    engine
        .gemm_strided(0, 1.0, &Strided::new(MatRef::contiguous(&[], 3, 4), 12), &b_s, 0.0, &mut c_s)
        .unwrap();
    assert!(c.iter().all(|&x| x == 7.0), "C written despite the errors");
    // Lists: one length each, one shape per list.
    let (a0, a1) = (MatRef::contiguous(&a[..12], 3, 4), MatRef::contiguous(&a[12..], 4, 3));
    let b0 = MatRef::contiguous(&b[..20], 4, 5);
    let (c0, c1) = c.split_at_mut(15);
    let mut cs = [MatMut::contiguous(c0, 3, 5), MatMut::contiguous(c1, 3, 5)];
    let err = engine.gemm_batch(1.0, &[a0, a0], &[b0], 0.0, &mut cs).unwrap_err();
    assert!(matches!(err, Error::BatchMismatch(_)), "{err}");
    let err = engine.gemm_batch(1.0, &[a0, a1], &[b0, b0], 0.0, &mut cs).unwrap_err();
    assert!(matches!(err, Error::BatchMismatch(_)), "{err}");
    engine.gemm_batch(1.0, &[a0, a0], &[b0, b0], 0.0, &mut cs).unwrap();
    assert!(c.iter().all(|&x| x == 4.0));
}

#[test]
fn a_batch_gives_what_its_members_give_alone_on_the_cpu_and_the_same_bits_every_run() {
    // On the CPU a member is computed as the product alone is. On the GPU a lone product
    // whose tiles do not fill the device splits K, and a batch member is not split, so the
    // sums run in another order there: the GPU's claim is the same bits on every run.
    let (batch, m, n, k) = (5, 37, 29, 300);
    let a = integers(batch * m * k, 3).iter().map(|x| x * 0.37).collect::<Vec<_>>();
    let b = integers(batch * k * n, 4).iter().map(|x| x * 1.13).collect::<Vec<_>>();
    let run = |engine: &Engine| {
        let mut c = vec![0.0f32; batch * m * n];
        engine
            .gemm_strided(
                batch,
                1.0,
                &Strided::new(MatRef::contiguous(&a, m, k), m * k),
                &Strided::new(MatRef::col_major(&b, k, n, k), k * n),
                0.0,
                &mut Strided::new(MatMut::contiguous(&mut c, m, n), m * n),
            )
            .unwrap();
        c
    };
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let cpu = Engine::new(Backend::Cpu).unwrap().with_cpu_threads(2);
    let batched = run(&cpu);
    for z in 0..batch {
        let mut alone = vec![0.0f32; m * n];
        cpu.gemm(
            1.0,
            &MatRef::contiguous(&a[z * m * k..], m, k),
            &MatRef::col_major(&b[z * k * n..], k, n, k),
            0.0,
            &mut MatMut::contiguous(&mut alone, m, n),
        )
        .unwrap();
        assert_eq!(
            bits(&alone),
            bits(&batched[z * m * n..][..m * n]),
            "cpu: member {z} differs from the product alone"
        );
    }
    if let Ok(gpu) = Engine::new(Backend::Gpu) {
        for precision in [Precision::Accurate, Precision::Strict] {
            let gpu = gpu.clone().with_precision(precision);
            assert_eq!(bits(&run(&gpu)), bits(&run(&gpu)), "gpu {precision:?}: two runs differ");
        }
    }
}
