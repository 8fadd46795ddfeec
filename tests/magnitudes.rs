//! The magnitude suite (`sgemm_check::magnitudes`) on every precision policy of every backend:
//! operands from subnormal to near `f32::MAX`, alone and on unrelated scales, rows and columns
//! on scales of their own. Each result must stay within the reference BLAS bound, or within
//! twice the error of plain `f32` arithmetic where that loses accuracy too. On the GPU the
//! results must also be bitwise reproducible run to run.

use std::io::Write;

use sgemm::{Backend, Engine, MatMut, MatRef, Precision, gpu};
use sgemm_check::magnitudes;

/// Odd sizes: edges in every tile, `K` not a multiple of 4 (the tensor-core kernels pad it).
const SHAPE: (usize, usize, usize) = (131, 97, 203);
/// A small grid with a deep `K`: the GPU splits `K` across blocks.
const DEEP: (usize, usize, usize) = (67, 129, 1001);
/// The tile kernels the automatic choice picks among on the GPU, each run by name on every
/// case: by itself, the choice would run the small-product kernel on shapes this small.
const GPU_TILE_KERNELS: [&str; 3] = [gpu::ACCURATE_KERNEL, gpu::STRICT_KERNEL, gpu::SMALL_TILE_KERNEL];
/// Several tiles of the tensor-core kernel each way: where rows or columns sit on scales of
/// their own, some blocks read only data inside the window of its plain loop and keep that
/// loop's result, while others multiply their tile again, scaled.
const MANY_TILES: (usize, usize, usize) = (389, 263, 37);
/// Shapes the automatic choice gives to its kernels for few rows and for matrix-vector
/// products.
const FEW_ROWS: (usize, usize, usize) = (7, 131, 203);
/// The same with `n` and `k` multiples of 4: the few-row kernel's 16-byte entry.
const FEW_ROWS_VEC4: (usize, usize, usize) = (6, 132, 204);
/// A deep `k` over a narrow `n`: the few-row kernel with `K` split.
const FEW_ROWS_SPLIT: (usize, usize, usize) = (4, 68, 2052);
/// One row of `C` with `k > 2 n`: the few-row kernel too (scalar entry), not the vector one.
const ONE_ROW_DEEP: (usize, usize, usize) = (1, 97, 1001);
/// Two rows of the few-row kernel's tiles (its tall variant), `K` split.
const FEW_ROWS_TALL: (usize, usize, usize) = (13, 68, 1028);
/// A row and a column of `C` for the matrix-vector kernel.
const VECTOR: (usize, usize, usize) = (1, 597, 1001);
const COLUMN: (usize, usize, usize) = (597, 1, 1001);

fn check(engine: &Engine, shape: (usize, usize, usize), what: &str) {
    let (failures, outcomes) =
        magnitudes::run(shape, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            engine.gemm(alpha, a, b, beta, c)
        });
    let worst = outcomes.iter().map(|(_, o)| o.error).fold(0.0, f64::max);
    println!(
        "{what} {shape:?}: {} cases, {} failed, largest error {worst:.2e}",
        outcomes.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{what}: {} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_cpu_keeps_f32_accuracy_at_every_magnitude() {
    check(&Engine::new(Backend::Cpu).unwrap(), SHAPE, "cpu");
}

fn gpu_or_skip(test: &str) -> Option<Engine> {
    match Engine::new(Backend::Gpu) {
        Ok(engine) => Some(engine),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {e}");
            None
        }
    }
}

#[test]
fn every_gpu_precision_keeps_f32_accuracy_at_every_magnitude() {
    let Some(engine) = gpu_or_skip("every_gpu_precision_keeps_f32_accuracy_at_every_magnitude") else {
        return;
    };
    for precision in [Precision::Accurate, Precision::Strict] {
        let engine = engine.clone().with_precision(precision);
        for shape in [
            SHAPE,
            DEEP,
            FEW_ROWS,
            FEW_ROWS_VEC4,
            FEW_ROWS_SPLIT,
            ONE_ROW_DEEP,
            FEW_ROWS_TALL,
            VECTOR,
            COLUMN,
        ] {
            check(&engine, shape, &format!("gpu {precision:?}"));
        }
    }
    let names = engine.kernel_names();
    for name in GPU_TILE_KERNELS.into_iter().filter(|name| names.contains(name)) {
        let engine = engine.clone().with_kernel(name).unwrap();
        for shape in [SHAPE, DEEP] {
            check(&engine, shape, &format!("gpu {name}"));
        }
        if name == gpu::ACCURATE_KERNEL {
            check(&engine, MANY_TILES, &format!("gpu {name}"));
        }
    }
}

#[test]
fn gpu_results_are_bitwise_reproducible() {
    let Some(engine) = gpu_or_skip("gpu_results_are_bitwise_reproducible") else { return };
    for precision in [Precision::Accurate, Precision::Strict] {
        let engine = engine.clone().with_precision(precision);
        for case in magnitudes::cases(DEEP, 9)
            .iter()
            .chain(&magnitudes::cases((1000, 1000, 1000), 40))
            .chain(&magnitudes::cases((8, 1024, 1024), 41))
        {
            let run = || {
                let (a, b) = (
                    MatRef::contiguous(&case.a, case.m, case.k),
                    MatRef::contiguous(&case.b, case.k, case.n),
                );
                let mut c = vec![0.0f32; case.m * case.n];
                engine.gemm(1.0, &a, &b, 0.0, &mut MatMut::contiguous(&mut c, case.m, case.n)).unwrap();
                c.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            };
            assert!(run() == run(), "{precision:?} {}: two runs differ", case.name);
        }
    }
}
