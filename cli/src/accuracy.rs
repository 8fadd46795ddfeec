//! `gemm accuracy`: the magnitude suite (`sgemm_check::magnitudes`) on each precision policy
//! of the backend and on kernels named with `--kernels`, beside cuBLAS FP32 on the GPU (feature `cublas`) and the plain `f32` loop,
//! as a table of normalized errors per case.

use clap::Args;
use sgemm::{Backend, Engine, Error, MatMut, MatRef, Precision};
use sgemm_check::magnitudes;
#[cfg(feature = "cublas")]
use sgemm_check::magnitudes::Case;
use sgemm_check::reference::TOLERANCE;

#[derive(Args)]
pub struct AccuracyArgs {
    /// auto, cpu or gpu.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// The shape: M, N and K of every case.
    #[arg(long, default_value_t = 512)]
    size: usize,
    /// A shape other than a cube, `MxNxK` (instead of --size).
    #[arg(long, conflicts_with = "size", value_parser = parse_shape)]
    shape: Option<(usize, usize, usize)>,
    /// Every STEP-th decade of the magnitude sweep.
    #[arg(long, default_value_t = 1)]
    step: usize,
    /// Also measure cuBLAS SGEMM (FP32, no TF32) on the same inputs (GPU, feature `cublas`).
    #[arg(long)]
    peer: bool,
    /// Kernels to measure by name beside the policies, comma-separated (each its own column):
    /// on small shapes the policies run the small-product kernels, so `--kernels warpgroup`
    /// shows the tensor-core kernel's own errors.
    #[arg(long, value_delimiter = ',')]
    kernels: Vec<String>,
}

/// `--shape`: one `MxNxK`.
fn parse_shape(spec: &str) -> Result<(usize, usize, usize), String> {
    match crate::bench::parse_shapes(spec)?[..] {
        [shape] => Ok(shape),
        _ => Err(format!("`{spec}` is more than one shape")),
    }
}

/// Prints the table; `Ok(false)` when a policy fails a case (see `Outcome::passes`).
pub fn accuracy(args: &AccuracyArgs) -> Result<bool, Error> {
    let engine = crate::open(args.backend)?;
    let policies = [Precision::Accurate, Precision::Strict];
    let mut engines: Vec<Engine> = policies.iter().map(|&p| engine.clone().with_precision(p)).collect();
    for name in &args.kernels {
        engines.push(engine.clone().with_kernel(name)?);
    }
    #[cfg(feature = "cublas")]
    let cublas = match (args.peer, engine.gpu()) {
        (true, Some(gpu)) => Some((gpu, crate::cublas::Cublas::new(gpu)?)),
        _ => None,
    };
    #[cfg(not(feature = "cublas"))]
    if args.peer {
        return Err(Error::NoGpu("--peer needs gemm built with `--features cublas`".into()));
    }
    let (m, n, k) = args.shape.unwrap_or((args.size, args.size, args.size));
    println!("normalized error |c - ref| / (u sum|a||b|), u = 2^-24, {m}x{n}x{k}; * marks a failure");
    print!("{:<36} {:>11} {:>11}", "case", "accurate", "strict");
    for name in &args.kernels {
        print!(" {name:>11}");
    }
    if args.peer {
        print!(" {:>11}", "cublas");
    }
    println!(" {:>11}", "f32 loop");
    let u = f64::from(f32::EPSILON) / 2.0;
    let mut ok = true;
    for case in magnitudes::cases((m, n, k), args.step.max(1)) {
        let f32_error = magnitudes::error_of(&case, &magnitudes::f32_loop(&case));
        print!("{:<36}", case.name);
        for engine in &engines {
            let measured =
                magnitudes::measure(&case, |alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
                    engine.gemm(alpha, a, b, beta, c)
                });
            let outcome = match measured {
                Ok(outcome) => outcome,
                Err(e) => {
                    // The call itself failed: say so and count it as a failure.
                    print!(" {e}");
                    ok = false;
                    continue;
                }
            };
            ok &= outcome.passes();
            print!(" {:>10.3e}{}", outcome.error / u, if outcome.passes() { ' ' } else { '*' });
        }
        #[cfg(feature = "cublas")]
        if let Some((gpu, blas)) = &cublas {
            print!(" {:>10.3e} ", cublas_error(gpu, blas, &case)? / u);
        }
        println!(" {:>10.3e}", f32_error / u);
    }
    println!(
        "(tolerance {:.1} u; a case passes within it or within twice the f32 loop's error)",
        TOLERANCE / u
    );
    Ok(ok)
}

#[cfg(feature = "cublas")]
fn cublas_error(gpu: &sgemm::Gpu, blas: &crate::cublas::Cublas, case: &Case) -> Result<f64, Error> {
    let a = gpu.upload(&MatRef::contiguous(&case.a, case.m, case.k))?;
    let b = gpu.upload(&MatRef::contiguous(&case.b, case.k, case.n))?;
    let mut c = gpu.alloc(case.m, case.n, case.n)?;
    blas.enqueue(1.0, &a, &b, 0.0, &mut c)?;
    let mut out = vec![0.0f32; case.m * case.n];
    gpu.download(&c, &mut MatMut::contiguous(&mut out, case.m, case.n))?;
    Ok(magnitudes::error_of(case, &out))
}
