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
use sgemm::{
    Backend, DeviceMatMut, DeviceMatRef, DeviceMatrix, Engine, Error, Gpu, Layout, MatMut, MatRef, Precision,
    Strided,
};
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
    /// timing method (L2 flushed before each replay, the second half of the replays; rates
    /// from its median), on the CPU in turns with the peers (the median of each one's rounds);
    /// writes a table, and on request JSON, CSV and an SVG plot.
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
    /// Also time cuBLAS SGEMM (FP32, no TF32) on the same buffers (GPU, feature `cublas`;
    /// with --batch, cuBLAS's strided batched GEMM on the same layouts and strides).
    #[arg(long)]
    peer: bool,
    /// Products in one call: C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, each
    /// operand's members --stride-a/-b/-c elements apart in one buffer.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Elements from one member of A to the next (default: a member's size, back to back; 0:
    /// one A for every product).
    #[arg(long)]
    stride_a: Option<usize>,
    /// Elements from one member of B to the next (default: a member's size; 0: one B).
    #[arg(long)]
    stride_b: Option<usize>,
    /// Elements from one member of C to the next (default: a member's size).
    #[arg(long)]
    stride_c: Option<usize>,
}

/// One operand of a run: its buffer of every member, the first member's view (over the whole
/// buffer) and the member stride.
#[derive(Clone, Copy)]
struct Operand {
    view: MatRef<'static>,
    stride: usize,
}

impl Operand {
    /// Member `z` of the batch, as a view of its own.
    fn member(&self, z: usize) -> MatRef<'static> {
        MatRef { data: &self.view.data[z * self.stride..], ..self.view }
    }

    fn strided(&self) -> Strided<MatRef<'static>> {
        Strided::new(self.view, self.stride)
    }
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
    let batch = args.batch;
    // Each operand's members in one buffer, `stride` apart (a member's size unless asked), each
    // stored in the chosen layout (transposed when asked): op(X) as a view of the first.
    let mut operand = |rows, cols, trans, stride: Option<usize>, scale: f32| {
        let stride = stride.unwrap_or(rows * cols);
        let len = stride * batch.saturating_sub(1) + rows * cols;
        let data: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0) * scale).collect();
        Operand { view: MatRef::op_contiguous(data.leak(), args.layout, trans, rows, cols), stride }
    };
    let a = operand(m, k, args.transa, args.stride_a, args.scale_a);
    let b = operand(k, n, args.transb, args.stride_b, args.scale_b);
    let c0 = operand(m, n, false, args.stride_c, 1.0);
    let op = |t: bool| if t { "T" } else { "N" };
    let shape = if batch == 1 { String::new() } else { format!("batch={batch} ") };
    println!(
        "problem: {shape}m={m} n={n} k={k} alpha={} beta={} op(A)={} op(B)={} {:?} ({} timed runs)",
        args.alpha,
        args.beta,
        op(args.transa),
        op(args.transb),
        args.layout,
        args.iters
    );

    // The first, middle and last members are compared with the reference, on sampled rows.
    let sampled = reference::sample_count(n, k);
    let check = |c: &[f32]| -> Option<f64> {
        (!args.no_check).then(|| {
            let mut members = vec![0, batch / 2, batch.saturating_sub(1)];
            members.dedup();
            let worst = members.into_iter().filter(|&z| z < batch).map(|z| {
                let c = MatRef { data: &c[z * c0.stride..], ..c0.view };
                let (a, b, c0) = (a.member(z), b.member(z), c0.member(z));
                let rows = reference::sample_rows(m, sampled);
                reference::compare(args.alpha, &a, &b, args.beta, &c0, &c, rows).max_error
            });
            worst.fold(0.0, f64::max)
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

    let flops = 2.0 * batch as f64 * m as f64 * n as f64 * k as f64;
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
    a: &Operand,
    b: &Operand,
    c0: &Operand,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let name = sgemm::cpu::kernel(kernel)?.name;
    let run = |c: &mut [f32]| {
        let c = MatMut {
            data: c,
            rows: c0.view.rows,
            cols: c0.view.cols,
            ld: c0.view.ld,
            layout: c0.view.layout,
        };
        let (a, b, mut c) = (a.strided(), b.strided(), Strided::new(c, c0.stride));
        sgemm::cpu::gemm_strided(Some(name), args.threads, args.batch, args.alpha, &a, &b, args.beta, &mut c)
    };
    let mut c = c0.view.data.to_vec();
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
    a: &Operand,
    b: &Operand,
    c0: &Operand,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let (a_view, c_view) = (a.view, c0.view);
    let kernel = match kernel {
        Some(name) => gpu.kernel(name)?,
        None => gpu.chosen_for_host(args.batch, &a_view, &b.view, &c_view),
    };
    let (a_dev, b_dev) = (upload_whole(gpu, &a_view)?, upload_whole(gpu, &b.view)?);
    let device = |buf, x: &Operand| Ok::<_, Error>(Strided::new(device_view(buf, &x.view)?, x.stride));
    time_device(gpu, kernel.spec.name, args, c0, check, &|c| {
        let (a, b) = (device(&a_dev, a)?, device(&b_dev, b)?);
        let c = Strided::new(device_view_mut(c, &c_view)?, c0.stride);
        gpu.enqueue_strided(kernel, args.batch, args.alpha, a, b, args.beta, c)
    })
}

/// The view `x` describes, over a device buffer that holds `x`'s data.
pub(crate) fn device_view<'a>(buf: &'a DeviceMatrix, x: &MatRef) -> Result<DeviceMatRef<'a>, Error> {
    DeviceMatRef::new(buf.buffer().as_view(), x.layout, x.rows, x.cols, x.ld)
}

/// [`device_view`], writable.
fn device_view_mut<'a>(buf: &'a mut DeviceMatrix, x: &MatRef) -> Result<DeviceMatMut<'a>, Error> {
    DeviceMatMut::new(buf.buffer_mut().as_view_mut(), x.layout, x.rows, x.cols, x.ld)
}

/// An operand's whole buffer (every member) on the device, as one row.
fn upload_whole(gpu: &Gpu, x: &MatRef) -> Result<DeviceMatrix, Error> {
    gpu.upload(&MatRef::contiguous(x.data, 1, x.data.len()))
}

/// Runs `launch` once on `C = c0` (every member) and checks it, then times `iters` runs with
/// CUDA events.
fn time_device(
    gpu: &Gpu,
    name: &str,
    args: &RunArgs,
    c0: &Operand,
    check: &dyn Fn(&[f32]) -> Option<f64>,
    launch: &dyn Fn(&mut DeviceMatrix) -> Result<(), Error>,
) -> Result<Row, Error> {
    let mut c_dev = upload_whole(gpu, &c0.view)?;
    launch(&mut c_dev)?;
    gpu.synchronize()?;
    let mut c = c0.view.data.to_vec();
    let len = c.len();
    gpu.download(&c_dev, &mut MatMut::contiguous(&mut c, 1, len))?;
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
    a: &Operand,
    b: &Operand,
    c0: &Operand,
    check: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    let gpu = engine.gpu().ok_or_else(|| Error::NoGpu("--peer times cuBLAS, which needs the GPU".into()))?;
    let blas = cublas::Cublas::new(gpu)?;
    let (a_dev, b_dev) = (upload_whole(gpu, &a.view)?, upload_whole(gpu, &b.view)?);
    let (a_view, b_view, c_view) = (a.view, b.view, c0.view);
    time_device(gpu, "cublas", args, c0, check, &|c| {
        let (a, b) = ((device_view(&a_dev, &a_view)?, a.stride), (device_view(&b_dev, &b_view)?, b.stride));
        blas.enqueue_strided(
            args.batch,
            args.alpha,
            a,
            b,
            args.beta,
            (device_view_mut(c, &c_view)?, c0.stride),
        )
    })
}

#[cfg(not(feature = "cublas"))]
fn time_peer(
    _: &Engine,
    _: &RunArgs,
    _: &Operand,
    _: &Operand,
    _: &Operand,
    _: &dyn Fn(&[f32]) -> Option<f64>,
) -> Result<Row, Error> {
    Err(Error::NoGpu("--peer needs gemm built with `--features cublas`".into()))
}
