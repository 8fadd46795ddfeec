//! `gemm`: multiplies random matrices on the GPU or the CPU, times it, and checks the result
//! against the f64 reference; `gemm selftest` runs the correctness suite.

use std::process::ExitCode;
use std::time::Instant;

mod accuracy;
mod bench;
mod cpu_peers;
#[cfg(feature = "cublas")]
mod cublas;
mod fma_peak;
mod plot;
mod report;
mod timing;

use clap::{Args, Parser, Subcommand};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sgemm::{Backend, DeviceMatrix, Engine, Error, Gpu, Layout, MatMut, MatRef, Precision};
use sgemm_check::{reference, suite as check};

#[derive(Parser)]
#[command(name = "gemm", version, about = "Single-precision GEMM on the GPU (Rust kernels) or the CPU")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Sweep sizes and kernels beside the peers on the same buffers: on the GPU with the seed's
    /// timing method (L2 flushed before each replay, the mean of the second half of the
    /// replays), on the CPU in turns with the peers (the median of each one's rounds); writes a
    /// table, and on request JSON, CSV and an SVG plot.
    Bench(bench::BenchArgs),
    /// The magnitude suite: operands from subnormal to near f32::MAX, on each precision
    /// policy (and cuBLAS with --peer), as a table of normalized errors per case.
    Accuracy(accuracy::AccuracyArgs),
    /// Print a benchmark record's table, or regenerate the tables of a Markdown document
    /// from the records its `<!-- gemm report RECORD -->` blocks name (--check: only compare).
    Report(report::ReportArgs),
    /// Run the correctness suite on every kernel of the backend (odd shapes, alpha/beta,
    /// padded leading dimensions, beta = 0 with NaN in C).
    Selftest {
        /// auto, cpu or gpu.
        #[arg(long, default_value = "auto")]
        backend: Backend,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Rows of A and C.
    #[arg(long, default_value_t = 4096)]
    m: usize,
    /// Columns of B and C (default: --m).
    #[arg(long)]
    n: Option<usize>,
    /// Columns of A, rows of B (default: --m).
    #[arg(long)]
    k: Option<usize>,
    /// auto (the GPU if there is one, else the CPU), cpu or gpu.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// A kernel name (see --list-kernels), or `all` for every kernel of the backend (default:
    /// the automatic choice of --precision).
    #[arg(long)]
    kernel: Option<String>,
    /// The precision policy of the automatic choice: accurate (f32 accuracy on every input,
    /// tensor cores where they keep it) or strict (one f32 FMA per multiply-add).
    #[arg(long, default_value = "accurate")]
    precision: Precision,
    /// op(A) = A^T: A is stored k x m.
    #[arg(long)]
    transa: bool,
    /// op(B) = B^T: B is stored n x k.
    #[arg(long)]
    transb: bool,
    /// How A, B and C are stored: row or col (column-major).
    #[arg(long, default_value = "row")]
    layout: Layout,
    #[arg(long, default_value_t = 1.0)]
    alpha: f32,
    /// Multiplies A's entries (uniform in (-1, 1)): inputs anywhere in the f32 range.
    #[arg(long, default_value_t = 1.0)]
    scale_a: f32,
    /// Multiplies B's entries.
    #[arg(long, default_value_t = 1.0)]
    scale_b: f32,
    #[arg(long, default_value_t = 0.0)]
    beta: f32,
    /// Timed repetitions (after one warm-up run).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// Skip the comparison with the f64 reference.
    #[arg(long)]
    no_check: bool,
    /// List the backend's kernels and exit.
    #[arg(long)]
    list_kernels: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// CPU threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Also time cuBLAS SGEMM (FP32, no TF32) on the same buffers (GPU, feature `cublas`).
    #[arg(long)]
    peer: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Some(Command::Selftest { backend }) => selftest(backend).map_err(Into::into),
        Some(Command::Accuracy(args)) => accuracy::accuracy(&args).map_err(Into::into),
        Some(Command::Report(args)) => report::report(&args).map_err(Into::into),
        Some(Command::Bench(args)) => {
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            bench::bench(&args, command)
        }
        None => run(&cli.run).map_err(Into::into),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the backend and says which one runs, and why when `auto` fell back to the CPU.
fn open(backend: Backend) -> Result<Engine, Error> {
    let engine = Engine::new(backend)?;
    match (engine.gpu(), engine.fallback_reason()) {
        (Some(gpu), _) => {
            let info = gpu.info();
            let (major, minor) = info.compute_capability;
            let code = if info.sass { "SASS" } else { "PTX compiled by the driver" };
            println!(
                "backend: gpu: {} (compute {major}.{minor}, {} SMs, {} kernels as {code})",
                info.name, info.sm_count, info.module_arch
            );
        }
        (None, Some(reason)) => println!("backend: cpu ({reason}; running on the CPU)"),
        (None, None) => println!("backend: cpu"),
    }
    Ok(engine)
}

fn selftest(backend: Backend) -> Result<bool, Error> {
    let engine = open(backend)?;
    let cases = check::all_cases().len();
    let mut all_passed = true;
    for name in engine.kernel_names() {
        let started = Instant::now();
        let engine = engine.clone().with_kernel(name)?;
        let (failures, worst) = check::run_suite(|alpha, a: &MatRef, b: &MatRef, beta, c: &mut MatMut| {
            engine.gemm(alpha, a, b, beta, c)
        });
        let secs = started.elapsed().as_secs_f64();
        for f in &failures {
            println!("FAIL {name}: {f}");
        }
        let passed = cases - failures.len();
        println!(
            "{name:<16} {passed} passed, {} failed (max normalized error {worst:.2e}, {secs:.1} s)",
            failures.len()
        );
        all_passed &= failures.is_empty();
    }
    Ok(all_passed)
}

/// One timed result row.
struct Row {
    kernel: String,
    median_ms: f64,
    max_error: Option<f64>,
}

fn run(args: &RunArgs) -> Result<bool, Error> {
    let engine = open(args.backend)?.with_precision(args.precision);
    if args.list_kernels {
        for name in engine.kernel_names() {
            println!("{name}");
        }
        return Ok(true);
    }
    let (m, n, k) = (args.m, args.n.unwrap_or(args.m), args.k.unwrap_or(args.m));
    let kernels: Vec<Option<String>> = match args.kernel.as_deref() {
        Some("all") => engine.kernel_names().into_iter().map(|s| Some(s.to_string())).collect(),
        other => vec![other.map(str::to_string)],
    };
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut random = |len: usize| (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect::<Vec<_>>();
    let scaled = |v: Vec<f32>, s: f32| v.into_iter().map(|x| x * s).collect::<Vec<_>>();
    let (a, b, c0) =
        (scaled(random(m * k), args.scale_a), scaled(random(k * n), args.scale_b), random(m * n));
    // op(X) as a view of X stored in the chosen layout (transposed when asked).
    let a = MatRef::op_contiguous(a.leak(), args.layout, args.transa, m, k);
    let b = MatRef::op_contiguous(b.leak(), args.layout, args.transb, k, n);
    let c0 = MatRef::op_contiguous(c0.leak(), args.layout, false, m, n);
    let op = |t: bool| if t { "T" } else { "N" };
    println!(
        "problem: m={m} n={n} k={k} alpha={} beta={} op(A)={} op(B)={} {:?} ({} timed runs)",
        args.alpha,
        args.beta,
        op(args.transa),
        op(args.transb),
        args.layout,
        args.iters
    );

    let sampled = reference::sample_count(n, k);
    let check = |c: &[f32]| -> Option<f64> {
        (!args.no_check).then(|| {
            let rows = reference::sample_rows(m, sampled);
            reference::compare(args.alpha, &a, &b, args.beta, &c0, &MatRef { data: c, ..c0 }, rows).max_error
        })
    };
    let mut rows = Vec::new();
    for kernel in &kernels {
        let row = match engine.gpu() {
            Some(gpu) => time_gpu(gpu, kernel.as_deref(), args, &a, &b, &c0, &check)?,
            None => time_cpu(kernel.as_deref(), args, &a, &b, &c0, &check)?,
        };
        rows.push(row);
    }
    if args.peer {
        rows.push(time_peer(&engine, args, &a, &b, &c0, &check)?);
    }

    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    let tolerance = reference::TOLERANCE;
    // Rates in the unit that suits the backend: TFLOP/s on a GPU, GFLOP/s on a CPU.
    let (unit, per_second) = if engine.gpu().is_some() { ("TFLOP/s", 1e12) } else { ("GFLOP/s", 1e9) };
    println!("{:<16} {:>12} {:>10} {:>14}", "kernel", "median ms", unit, "max rel err");
    let mut ok = true;
    for row in &rows {
        let err = match row.max_error {
            Some(e) => {
                ok &= e <= tolerance;
                format!("{e:.2e}{}", if e <= tolerance { "" } else { " FAIL" })
            }
            None => "-".into(),
        };
        let rate = flops / (row.median_ms * 1e-3) / per_second;
        println!("{:<16} {:>12.3} {:>10.3} {:>14}", row.kernel, row.median_ms, rate, err);
    }
    if !args.no_check {
        println!(
            "(error: |c - ref| / (|alpha| sum|a||b| + |beta c|) on {} sampled rows, tolerance {tolerance:.2e})",
            sampled.min(m)
        );
    }
    Ok(ok)
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

fn time_cpu(
    kernel: Option<&str>,
    args: &RunArgs,
    a: &MatRef,
    b: &MatRef,
    c0: &MatRef,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let name = sgemm::cpu::kernel(kernel)?.name;
    let run = |c: &mut [f32]| {
        let mut c = MatMut { data: c, rows: c0.rows, cols: c0.cols, ld: c0.ld, layout: c0.layout };
        sgemm::cpu::gemm(Some(name), args.threads, args.alpha, a, b, args.beta, &mut c)
    };
    let mut c = c0.data.to_vec();
    run(&mut c)?;
    let max_error = check(&c);
    let mut times = Vec::new();
    for _ in 0..args.iters {
        let started = Instant::now();
        run(&mut c)?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Row { kernel: name.into(), median_ms: median(times), max_error })
}

/// Uploads once, checks one run of `kernel` against the reference, then times `iters` runs.
fn time_gpu(
    gpu: &Gpu,
    kernel: Option<&str>,
    args: &RunArgs,
    a: &MatRef,
    b: &MatRef,
    c0: &MatRef,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let kernel = match kernel {
        Some(name) => gpu.kernel(name)?,
        None => gpu.chosen_for(c0.layout, 1, c0.rows, c0.cols, a.cols),
    };
    let (a_dev, b_dev) = (gpu.upload(a)?, gpu.upload(b)?);
    time_device(gpu, kernel.spec.name, args, c0, check, &|c| {
        gpu.enqueue(kernel, args.alpha, &a_dev, &b_dev, args.beta, c)
    })
}

/// Runs `launch` once on `C = c0` and checks it, then times `iters` runs with CUDA events.
fn time_device(
    gpu: &Gpu,
    name: &str,
    args: &RunArgs,
    c0: &MatRef,
    check: &dyn Fn(&[f32]) -> Option<f64>,
    launch: &dyn Fn(&mut DeviceMatrix) -> Result<(), Error>,
) -> Result<Row, Error> {
    let mut c_dev = gpu.upload(c0)?;
    launch(&mut c_dev)?;
    gpu.synchronize()?;
    let mut c = c0.data.to_vec();
    gpu.download(
        &c_dev,
        &mut MatMut { data: &mut c, rows: c0.rows, cols: c0.cols, ld: c0.ld, layout: c0.layout },
    )?;
    let max_error = check(&c);
    let mut times = Vec::new();
    for _ in 0..args.iters {
        times.push(timing::time_ms(gpu, || launch(&mut c_dev))? as f64);
    }
    Ok(Row { kernel: name.into(), median_ms: median(times), max_error })
}

#[cfg(feature = "cublas")]
fn time_peer(
    engine: &Engine,
    args: &RunArgs,
    a: &MatRef,
    b: &MatRef,
    c0: &MatRef,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let gpu = engine.gpu().ok_or_else(|| Error::NoGpu("--peer times cuBLAS, which needs the GPU".into()))?;
    let blas = cublas::Cublas::new(gpu)?;
    let (a_dev, b_dev) = (gpu.upload(a)?, gpu.upload(b)?);
    time_device(gpu, "cublas", args, c0, check, &|c| blas.enqueue(args.alpha, &a_dev, &b_dev, args.beta, c))
}

#[cfg(not(feature = "cublas"))]
fn time_peer(
    _: &Engine,
    _: &RunArgs,
    _: &MatRef,
    _: &MatRef,
    _: &MatRef,
    _: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    Err(Error::NoGpu("--peer needs gemm built with `--features cublas`".into()))
}
