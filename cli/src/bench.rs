//! `gemm bench`: the one harness behind every performance figure of the project.
//!
//! Method (seed 000, section 2), per size and kernel, on one set of device buffers shared by
//! our kernels and the peer:
//! - one untimed run, whose result is checked against the f64 reference on 16 sampled rows
//!   (it is also the warm-up; the module was loaded when the GPU was opened); with `--beta`
//!   (`C = A B + beta C`), every contender's checked run starts from the same initial `C`;
//! - `max(20, 1000 * exp((1024 - n) / 3100))` timed replays, each preceded by a write of a
//!   buffer twice the L2 size (outside the timed region) and timed by CUDA events around the
//!   launch alone;
//! - the second half of the replays is what is reported: its mean (`seconds`, the seed's
//!   figure), its median and its spread (standard deviation over mean); the rate, and so every
//!   ratio, comes from the median ([`Estimator`]).
//!
//! On the CPU the contenders take turns, timed with the wall clock, and the median is reported
//! ([`time_cpu`]); on one thread a register-only FMA loop takes its turn in the same rounds, so
//! that the row carries the core's peak measured alongside it, and the fraction of it reached.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sgemm::{Backend, DeviceMatMut, Error, Gpu, Layout, MatMut, MatRef, Strided};
use sgemm_check::reference;

use crate::timing::{L2Flush, time_ms};
use crate::{device_view, plot};

/// The default sweep: powers of two and their neighbours, the odd sizes the seeds trip on.
const GPU_SIZES: &str = "1000,1024,2047,2048,3072,4095,4096,4097,5120,6144,7168,8192";
const CPU_SIZES: &str = "512,1000,1024,2047,2048,4096,4097";

#[derive(Args)]
pub struct BenchArgs {
    /// auto (the GPU if there is one, else the CPU), cpu or gpu.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// `auto` (the automatic choice of the accurate policy, its own row), `strict` (the
    /// automatic choice of the strict policy), `all` (every kernel, and auto), or a
    /// comma-separated list of these and kernel names. On the GPU, `NAME@S` runs a single
    /// product cut into `S` K slices (`Gpu::with_k_slices`; fewer where the kernel's slices
    /// would be too shallow), e.g. `specialized@1,specialized@4,auto`.
    #[arg(long, default_value = "auto")]
    kernels: String,
    /// Square sizes: a comma-separated list of `N` or `FIRST:LAST:STEP` ranges
    /// (default: 1000,1024,2047,2048,3072,4095,4096,4097,5120,6144,7168,8192 on the GPU,
    /// 512,1000,1024,2047,2048,4096,4097 on the CPU).
    #[arg(long, conflicts_with = "shapes")]
    sizes: Option<String>,
    /// Shapes instead of square sizes: a comma-separated list of `MxNxK` (`C` is `M x N`, the
    /// inner dimension `K`), e.g. vector-like `1x4096x8192`, small-k `4096x4096x16`, skinny
    /// `32x4096x4096`. `shapes` alone is a sweep of such shapes.
    #[arg(long)]
    shapes: Option<String>,
    /// Products per call: a strided batch of this many `M x N x K` products, members back to
    /// back (`Engine::gemm_strided`); the peers are cuBLAS's strided batched GEMM on the GPU
    /// and, on the CPU, each peer called once per member on the same threads.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// `op(A) = A^T`: every `A` stored transposed (`K x M` row-major, which is `op(A)` read
    /// column-major), as BLAS's `transa = 'T'`; every contender reads it so.
    #[arg(long)]
    transa: bool,
    /// `op(B) = B^T`: every `B` stored transposed (`N x K` row-major), as `transb = 'T'`.
    #[arg(long)]
    transb: bool,
    /// CPU thread counts, comma-separated; `all` is every core. Our threaded kernels and every
    /// peer run at each count, set explicitly (GPU rows record 1).
    #[arg(long, default_value = "1,all")]
    threads: String,
    /// Time the peers on the same buffers: cuBLAS on the GPU (feature `cublas`); OpenBLAS, the
    /// `gemm` crate and `faer` on the CPU (feature `cpu-peers`).
    #[arg(long)]
    peers: bool,
    /// Write the record as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the rows as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Draw TFLOP/s against size as an SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// `beta` of every call, `C = A B + beta C` (alpha 1): with `beta != 0` each kernel reads
    /// `C`. Each contender starts from the same random `C` for its checked run; its timed
    /// runs then update the `C` its previous run left. faer takes only 0 and 1, so it is timed
    /// only there.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    beta: f32,
}

/// The JSON record of one `gemm bench` run.
#[derive(Serialize, Deserialize)]
pub struct Record {
    pub device: String,
    pub backend: String,
    pub date: String,
    pub commit: String,
    pub driver: Option<String>,
    /// SM clock (MHz) read by nvidia-smi before and after the sweep.
    pub sm_clock_mhz: Option<(u32, u32)>,
    pub command: String,
    pub rows: Vec<Row>,
}

/// One kernel at one size.
#[derive(Serialize, Deserialize)]
pub struct Row {
    pub backend: String,
    /// The name asked for (`auto` for the automatic choice).
    pub kernel: String,
    /// The kernel that ran.
    pub resolved: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Products per call (a strided batch); 1 in records from before batches.
    #[serde(default = "one")]
    pub batch: usize,
    /// Whether `A` was stored transposed (`--transa`); false in records from before it.
    #[serde(default)]
    pub trans_a: bool,
    /// Whether `B` was stored transposed (`--transb`); false in records from before it.
    #[serde(default)]
    pub trans_b: bool,
    /// `beta` of every call (`C = A B + beta C`); 0 in records from before `--beta`.
    #[serde(default)]
    pub beta: f32,
    pub threads: usize,
    /// Mean of the samples the estimator looks at: the second half of the replays on the GPU,
    /// every round on the CPU ([`Estimator`]).
    pub seconds: f64,
    pub median_seconds: f64,
    /// Standard deviation over mean of the same samples.
    pub spread: f64,
    pub replays: usize,
    /// `2 m n k / t / 1e12`, `t` = `median_seconds`.
    pub tflops: f64,
    /// The fastest peer at this size, if any was timed.
    pub peer: Option<String>,
    pub peer_tflops: Option<f64>,
    /// `tflops / peer_tflops`.
    pub ratio: Option<f64>,
    /// GPU rows of a single product: the K slices it was cut into (as chosen for the shape
    /// before any padding of `K` to a multiple of 4); absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<usize>,
    /// Single-threaded CPU rows only: the register-only FMA loop, timed in the same rounds as
    /// this row's contenders (median), the core's peak at this moment.
    pub fma_peak_tflops: Option<f64>,
    /// `tflops / fma_peak_tflops`.
    pub peak_fraction: Option<f64>,
    /// Largest `|c - ref| / (|alpha| sum|a||b| + |beta c|)` on 16 sampled rows.
    pub max_rel_err: f64,
    pub passed: bool,
    /// Every peer timed at this size.
    pub peers: Vec<Timing>,
}

fn one() -> usize {
    1
}

/// A timed run of anything (our kernel or a peer).
#[derive(Clone, Serialize, Deserialize)]
pub struct Timing {
    pub name: String,
    pub seconds: f64,
    pub median_seconds: f64,
    pub spread: f64,
    pub replays: usize,
    pub tflops: f64,
    pub max_rel_err: f64,
}

/// The seed's replay count for size `n`: many for small, fast problems, at least 20.
pub fn replays(n: usize) -> usize {
    (1000.0 * ((1024.0 - n as f64) / 3100.0).exp()).max(20.0).round() as usize
}

/// The `--shapes shapes` sweep: vector-like, small-k, skinny, small square and large shapes.
const SHAPE_SWEEP: &str = "1x4096x8192,4096x1x8192,4096x4096x1,4096x4096x16,4096x4096x64,\
    8x4096x4096,32x4096x4096,128x4096x4096,4096x4096x128,256x256x256,512x512x512,4096x4096x4096";

/// How a shape is written in tables: `n` for a cube, `MxNxK` otherwise.
pub fn shape_label(m: usize, n: usize, k: usize) -> String {
    if m == n && n == k { n.to_string() } else { format!("{m}x{n}x{k}") }
}

/// How the operands' storage is written after a shape: nothing when neither is transposed,
/// else BLAS's `transa` and `transb` letters (` TN`: `A` transposed, `B` not).
pub fn ops_label(trans_a: bool, trans_b: bool) -> String {
    let op = |t: bool| if t { 'T' } else { 'N' };
    if trans_a || trans_b { format!(" {}{}", op(trans_a), op(trans_b)) } else { String::new() }
}

/// `--shapes` syntax: `MxNxK`, comma-separated (`shapes`: [`SHAPE_SWEEP`]).
pub fn parse_shapes(spec: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    let spec = if spec == "shapes" { SHAPE_SWEEP } else { spec };
    let shapes: Vec<_> = spec
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let dims: Vec<usize> = item.split('x').filter_map(|d| d.trim().parse().ok()).collect();
            match dims[..] {
                [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
                _ => Err(format!("--shapes: `{item}` is not MxNxK with positive sizes")),
            }
        })
        .collect::<Result<_, _>>()?;
    if shapes.is_empty() { Err("--shapes: no shape given".into()) } else { Ok(shapes) }
}

/// `--sizes` syntax: `N` and `FIRST:LAST:STEP`, comma-separated.
pub fn parse_sizes(spec: &str) -> Result<Vec<usize>, String> {
    let mut sizes = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<usize> = item
            .split(':')
            .map(|p| p.parse().map_err(|_| format!("--sizes: `{item}` is not N or FIRST:LAST:STEP")))
            .collect::<Result<_, _>>()?;
        match parts[..] {
            [n] => sizes.push(n),
            [first, last, step] if step > 0 && first <= last => sizes.extend((first..=last).step_by(step)),
            _ => return Err(format!("--sizes: `{item}` is not N or FIRST:LAST:STEP (STEP > 0)")),
        }
    }
    if sizes.is_empty() { Err("--sizes: no size given".into()) } else { Ok(sizes) }
}

/// `--threads` syntax: counts and `all`, comma-separated, without repeats.
pub fn parse_threads(spec: &str) -> Result<Vec<usize>, String> {
    let mut counts = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let t = match item {
            "all" => sgemm::cpu::default_threads(),
            t => t
                .parse()
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| format!("--threads: `{t}` is not a count or `all`"))?,
        };
        if !counts.contains(&t) {
            counts.push(t);
        }
    }
    if counts.is_empty() { Err("--threads: no count given".into()) } else { Ok(counts) }
}

/// Which time of a contender's samples its `tflops`, and so every ratio, comes from.
#[derive(Clone, Copy, Debug)]
enum Estimator {
    /// The median of the second half of the replays: the GPU. Seed 000 takes their mean, which
    /// one stalled replay moves, and with it the ratio of whichever contender it hit; the mean
    /// is still recorded (`seconds`).
    SecondHalfMedian,
    /// The median of every timed round (an untimed run warms each contender up first): the CPU.
    /// On this shared 2-core VM a neighbour's burst slows a few rounds by 20-60% (spreads up to
    /// 40% in a sweep), and a mean carried those bursts into the ratio of whichever contender
    /// they landed on. Every contender gets the same estimator.
    Median,
}

/// Mean, median and spread of the samples `estimator` looks at (seconds), and the rate.
fn summarize(name: &str, samples: &[f64], flops: f64, max_rel_err: f64, estimator: Estimator) -> Timing {
    let used = match estimator {
        Estimator::SecondHalfMedian => &samples[samples.len() / 2..],
        Estimator::Median => samples,
    };
    let mean = used.iter().sum::<f64>() / used.len() as f64;
    let var = used.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / used.len() as f64;
    let mut sorted = used.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    Timing {
        name: name.into(),
        seconds: mean,
        median_seconds: median,
        spread: var.sqrt() / mean,
        replays: samples.len(),
        tflops: flops / median / 1e12,
        max_rel_err,
    }
}

/// One problem's inputs, on the host: `batch` products of `m x n x k`, each operand's members
/// back to back, row-major (`A` and `B` transposed when asked: `op(A)` and `op(B)` then read
/// their storage column-major).
struct Problem {
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    beta: f32,
    a: Vec<f32>,
    b: Vec<f32>,
    c0: Vec<f32>,
}

impl Problem {
    fn new(
        (m, n, k): (usize, usize, usize),
        batch: usize,
        (trans_a, trans_b): (bool, bool),
        beta: f32,
        seed: u64,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ (m * 31 + n * 17 + k) as u64);
        let mut random = |len: usize| (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        Problem {
            batch,
            m,
            n,
            k,
            trans_a,
            trans_b,
            beta,
            a: random(batch * m * k),
            b: random(batch * k * n),
            c0: random(batch * m * n),
        }
    }

    /// Member `z`'s `op(A)`, `op(B)` and initial `C`, each a view of its buffer from the
    /// member's first element to the buffer's end.
    fn member(&self, z: usize) -> (MatRef<'_>, MatRef<'_>, MatRef<'_>) {
        let (m, n, k) = (self.m, self.n, self.k);
        fn op(data: &[f32], z: usize, trans: bool, rows: usize, cols: usize) -> MatRef<'_> {
            MatRef::op_contiguous(&data[z * rows * cols..], Layout::RowMajor, trans, rows, cols)
        }
        (op(&self.a, z, self.trans_a, m, k), op(&self.b, z, self.trans_b, k, n), op(&self.c0, z, false, m, n))
    }

    /// The batch as strided views: the first member's, members back to back.
    fn strided(&self) -> (Strided<MatRef<'_>>, Strided<MatRef<'_>>) {
        let (a, b, _) = self.member(0);
        (Strided::new(a, self.m * self.k), Strided::new(b, self.k * self.n))
    }

    /// `2 m n k` per product.
    fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// The side of the cube with as much work: what the replay count is chosen by.
    fn cube_side(&self) -> usize {
        (self.batch as f64 * self.m as f64 * self.n as f64 * self.k as f64).cbrt().round() as usize
    }

    /// `n` for a cube, `MxNxK` otherwise; `B*MxNxK` for a batch of `B`; then the operands'
    /// storage ([`ops_label`]).
    fn label(&self) -> String {
        let shape = match self.batch {
            1 => shape_label(self.m, self.n, self.k),
            batch => format!("{batch}*{}x{}x{}", self.m, self.n, self.k),
        };
        shape + &ops_label(self.trans_a, self.trans_b)
    }

    /// The sampled-row error of a result `c` of one call, `C = A B + beta C` from `C = c0`: the
    /// first and the last member.
    fn error(&self, c: &[f32]) -> f64 {
        let (m, n) = (self.m, self.n);
        let mut worst = 0.0f64;
        for z in [0, self.batch - 1] {
            let (a, b, c0) = self.member(z);
            let rows = reference::sample_rows(m, reference::sample_count(n, self.k));
            let c = MatRef::contiguous(&c[z * m * n..][..m * n], m, n);
            worst = worst.max(reference::compare(1.0, &a, &b, self.beta, &c0, &c, rows).max_error);
        }
        worst
    }
}

/// Errors of the harness: the library's, and its own (bad `--sizes`, unwritable files).
pub type BenchError = Box<dyn std::error::Error>;

pub fn bench(args: &BenchArgs, command: String) -> Result<bool, BenchError> {
    if args.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    if !args.beta.is_finite() {
        return Err("--beta must be finite".into());
    }
    let engine = crate::open(args.backend)?;
    let backend = engine.backend_name().to_string();
    let default_sizes = if engine.gpu().is_some() { GPU_SIZES } else { CPU_SIZES };
    let shapes = match &args.shapes {
        Some(spec) => parse_shapes(spec)?,
        None => parse_sizes(args.sizes.as_deref().unwrap_or(default_sizes))?
            .into_iter()
            .map(|n| (n, n, n))
            .collect(),
    };
    let thread_counts = if engine.gpu().is_some() { vec![1] } else { parse_threads(&args.threads)? };
    let kernels: Vec<String> = match args.kernels.as_str() {
        "auto" => vec!["auto".into()],
        "all" => engine.kernel_names().iter().map(|s| s.to_string()).chain(["auto".into()]).collect(),
        list => list.split(',').map(|s| s.trim().to_string()).collect(),
    };
    // Unknown names and slice counts fail before the sweep starts.
    let mut gpu_entries = Vec::new();
    for kernel in &kernels {
        let (name, slices) = kernel_and_slices(kernel)?;
        match engine.gpu() {
            Some(gpu) if name != "auto" && name != "strict" => _ = gpu.kernel(name)?,
            Some(_) => {}
            None if slices.is_some() => {
                return Err(format!("--kernels {kernel}: K slices are for GPU kernels").into());
            }
            None if name == "auto" || name == "strict" => {}
            None => _ = sgemm::cpu::kernel(Some(name))?,
        }
        gpu_entries.push((kernel.clone(), name.to_string(), slices));
    }
    // The L2 flush buffer is allocated once for the sweep.
    let mut flush = engine.gpu().map(L2Flush::new).transpose()?;
    let (driver, clock_before) = nvidia_smi();
    let device = match engine.gpu() {
        Some(gpu) => gpu.info().name.clone(),
        None => cpu_name(),
    };

    let progress = ProgressBar::new((shapes.len() * thread_counts.len() * kernels.len()) as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed} / ~{duration}]")
            .expect("a valid template"),
    );
    // Rates in the unit that suits the backend: TFLOP/s on a GPU, GFLOP/s on a CPU.
    let (unit, per_unit) = if engine.gpu().is_some() { ("TFLOP/s", 1.0) } else { ("GFLOP/s", 1e3) };
    say(
        &progress,
        format!(
            "{:>14} {:>3} {:<16} {:>10} {:>10} {:>7} {:>9} {:>9} {:>7} {:>7} {:>9}",
            "n",
            "thr",
            "kernel",
            "mean ms",
            "median ms",
            "spread",
            unit,
            "peer",
            "ratio",
            "of peak",
            "max err"
        ),
    );
    if args.beta != 0.0 {
        say(&progress, format!("C = A B + {} C (alpha 1): every kernel reads C", args.beta));
    }
    let mut rows = Vec::new();
    for &shape in &shapes {
        // One problem per shape, shared by every thread count.
        let problem = Problem::new(shape, args.batch, (args.transa, args.transb), args.beta, args.seed);
        let (m, n, k) = shape;
        let flops = problem.flops();
        for &threads in &thread_counts {
            progress.set_message(format!("{}, {threads} thread(s)", problem.label()));
            let Timings { ours, peers, peak } = match (engine.gpu(), flush.as_mut()) {
                (Some(gpu), Some(flush)) => {
                    time_gpu(gpu, flush, &problem, &gpu_entries, args.peers, flops, &progress)?
                }
                _ => time_cpu(&problem, &kernels, threads, args.peers, flops, &progress)?,
            };
            let best_peer = peers.iter().max_by(|x, y| x.tflops.total_cmp(&y.tflops)).cloned();
            for (kernel, resolved, slices, timing) in ours {
                let tolerance = reference::TOLERANCE;
                let row = Row {
                    backend: backend.clone(),
                    kernel,
                    resolved,
                    m,
                    n,
                    k,
                    batch: args.batch,
                    trans_a: args.transa,
                    trans_b: args.transb,
                    beta: args.beta,
                    threads,
                    seconds: timing.seconds,
                    median_seconds: timing.median_seconds,
                    spread: timing.spread,
                    replays: timing.replays,
                    tflops: timing.tflops,
                    peer: best_peer.as_ref().map(|p| p.name.clone()),
                    peer_tflops: best_peer.as_ref().map(|p| p.tflops),
                    ratio: best_peer.as_ref().map(|p| timing.tflops / p.tflops),
                    slices,
                    fma_peak_tflops: peak.as_ref().map(|p| p.tflops),
                    peak_fraction: peak.as_ref().map(|p| timing.tflops / p.tflops),
                    max_rel_err: timing.max_rel_err,
                    passed: timing.max_rel_err <= tolerance,
                    peers: peers.clone(),
                };
                say(
                    &progress,
                    format!(
                        "{:>14} {:>3} {:<16} {:>10.3} {:>10.3} {:>6.1}% {:>9.3} {:>9} {:>7} {:>7} {:>9.2e}{}",
                        problem.label(),
                        threads,
                        row.kernel,
                        row.seconds * 1e3,
                        row.median_seconds * 1e3,
                        row.spread * 100.0,
                        row.tflops * per_unit,
                        row.peer_tflops.map_or("-".into(), |p| format!("{:.3}", p * per_unit)),
                        row.ratio.map_or("-".into(), |r| format!("{r:.3}")),
                        row.peak_fraction.map_or("-".into(), |f| format!("{:.1}%", f * 100.0)),
                        row.max_rel_err,
                        if row.passed { "" } else { " FAIL" },
                    ),
                );
                rows.push(row);
            }
        }
    }
    progress.finish_and_clear();
    let (_, clock_after) = nvidia_smi();

    print_summary(&rows);
    let record = Record {
        device,
        backend,
        date: utc_now(),
        commit: env!("GEMM_COMMIT").into(),
        driver,
        sm_clock_mhz: clock_before.zip(clock_after),
        command,
        rows,
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&record).expect("the record serializes");
        write(path, &json)?;
    }
    if let Some(path) = &args.csv {
        write(path, &to_csv(&record))?;
    }
    if let Some(path) = &args.plot {
        plot::draw(&record, path).map_err(|e| format!("drawing {}: {e}", path.display()))?;
    }
    Ok(record.rows.iter().all(|r| r.passed))
}

/// Prints a line above the progress bar, or plainly when the bar is hidden (no terminal).
fn say(progress: &ProgressBar, line: String) {
    if progress.is_hidden() { println!("{line}") } else { progress.println(line) }
}

/// Our kernel's timing, with the name asked for, the kernel that ran and (GPU, single
/// products) the K slices it ran on.
type Timed = (String, String, Option<usize>, Timing);

/// A GPU `--kernels` entry as asked for, its kernel's name (or `auto`, `strict`) and K slices.
type GpuEntry = (String, String, Option<usize>);

/// A `--kernels` entry: the kernel's name (or `auto`, `strict`) and the K slices after `@`.
fn kernel_and_slices(entry: &str) -> Result<(&str, Option<usize>), String> {
    match entry.split_once('@') {
        None => Ok((entry, None)),
        Some((name, slices)) => match slices.parse() {
            Ok(s) if s > 0 => Ok((name, Some(s))),
            _ => Err(format!("--kernels {entry}: `{slices}` is not a positive count of K slices")),
        },
    }
}

/// Everything timed at one size and thread count.
struct Timings {
    ours: Vec<Timed>,
    peers: Vec<Timing>,
    /// The FMA loop timed alongside (CPU only).
    peak: Option<Timing>,
}

fn time_gpu(
    gpu: &Gpu,
    flush: &mut L2Flush,
    problem: &Problem,
    kernels: &[GpuEntry],
    with_peers: bool,
    flops: f64,
    progress: &ProgressBar,
) -> Result<Timings, Error> {
    let (batch, m, n, k) = (problem.batch, problem.m, problem.n, problem.k);
    // Every operand's members back to back: one matrix of `batch` times the member's rows.
    let whole =
        |data: &[f32], rows: usize, cols: usize| gpu.upload(&MatRef::contiguous(data, batch * rows, cols));
    let (a_dev, b_dev) = (whole(&problem.a, m, k)?, whole(&problem.b, k, n)?);
    let mut c_dev = whole(&problem.c0, m, n)?;
    // The first member's `op(A)` and `op(B)`: the views of the device buffers.
    let (a_host, b_host, _) = problem.member(0);
    let mut c = problem.c0.clone();
    let replays = replays(problem.cube_side());
    let beta = problem.beta;

    // Checks one run of `launch` from the initial C, then times `replays` runs, each after an
    // L2 flush.
    let mut measure = |name: &str, launch: &dyn Fn(&mut sgemm::DeviceMatrix) -> Result<(), Error>| {
        if beta != 0.0 {
            c_dev = whole(&problem.c0, m, n)?;
        }
        launch(&mut c_dev)?;
        gpu.synchronize()?;
        gpu.download(&c_dev, &mut MatMut::contiguous(&mut c, batch * m, n))?;
        let error = problem.error(&c);
        let mut samples = Vec::with_capacity(replays);
        for _ in 0..replays {
            flush.flush(gpu)?;
            samples.push(time_ms(gpu, || launch(&mut c_dev))? as f64 * 1e-3);
        }
        Ok::<_, Error>(summarize(name, &samples, flops, error, Estimator::SecondHalfMedian))
    };
    let mut ours = Vec::new();
    let strict = gpu.clone().with_precision(sgemm::Precision::Strict);
    for (kernel, name, slices) in kernels {
        let gpu = &match name.as_str() {
            "strict" => strict.clone(),
            _ => gpu.clone(),
        }
        .with_k_slices(*slices)?;
        let resolved = match name.as_str() {
            "auto" | "strict" => gpu.chosen_for_host(batch, &a_host, &b_host, &problem.member(0).2),
            name => gpu.kernel(name)?,
        };
        let timing = measure(kernel, &|c| {
            let c = DeviceMatMut::new(c.buffer_mut().as_view_mut(), Layout::RowMajor, m, n, n)?;
            let (a, b) = (device_view(&a_dev, &a_host)?, device_view(&b_dev, &b_host)?);
            let (a, b) = (Strided::new(a, m * k), Strided::new(b, k * n));
            gpu.enqueue_strided(resolved, batch, 1.0, a, b, beta, Strided::new(c, m * n))
        })?;
        let slices = (batch == 1).then(|| gpu.k_slices(resolved, m, n, k));
        ours.push((kernel.clone(), resolved.spec.name.to_string(), slices, timing));
        progress.inc(1);
    }
    let mut peers = Vec::new();
    if with_peers {
        peers.push(cublas_peer(gpu, &mut measure, batch, beta, (&a_dev, &a_host), (&b_dev, &b_host))?);
    }
    Ok(Timings { ours, peers, peak: None })
}

type Measure<'a> =
    dyn FnMut(&str, &dyn Fn(&mut sgemm::DeviceMatrix) -> Result<(), Error>) -> Result<Timing, Error> + 'a;

/// cuBLAS on the same buffers, each operand's device buffer with its first member's `op(X)`
/// (members back to back): `cublasSgemm` for one product, `cublasSgemmStridedBatched` for a
/// batch (FP32, TF32 off).
#[cfg(feature = "cublas")]
fn cublas_peer(
    gpu: &Gpu,
    measure: &mut Measure,
    batch: usize,
    beta: f32,
    (a_dev, a): (&sgemm::DeviceMatrix, &MatRef),
    (b_dev, b): (&sgemm::DeviceMatrix, &MatRef),
) -> Result<Timing, Error> {
    let blas = crate::cublas::Cublas::new(gpu)?;
    let (m, n, k) = (a.rows, b.cols, a.cols);
    measure("cublas", &|c| {
        let c = DeviceMatMut::new(c.buffer_mut().as_view_mut(), Layout::RowMajor, m, n, n)?;
        let (a, b) = ((device_view(a_dev, a)?, m * k), (device_view(b_dev, b)?, k * n));
        blas.enqueue_strided(batch, 1.0, a, b, beta, (c, m * n))
    })
}

#[cfg(not(feature = "cublas"))]
fn cublas_peer(
    _: &Gpu,
    _: &mut Measure,
    _: usize,
    _: f32,
    _: (&sgemm::DeviceMatrix, &MatRef),
    _: (&sgemm::DeviceMatrix, &MatRef),
) -> Result<Timing, Error> {
    Err(Error::NoGpu("--peers on the GPU times cuBLAS: build gemm with `--features cublas`".into()))
}

/// A CPU contender's run: `C = A B + beta C` on the given buffer.
type CpuRun<'a> = Box<dyn Fn(&mut [f32]) -> Result<(), Error> + 'a>;

/// What a CPU contender is.
enum Role<'a> {
    /// One of our kernels: the name it resolved to.
    Ours(&'a str),
    /// A peer library.
    Peer,
    /// The register-only FMA loop: no product to check, its own operation count.
    Peak { flops: f64 },
}

/// A CPU contender: its name, what it is, its run and the untimed pause after each run.
type Contender<'a> = (String, Role<'a>, CpuRun<'a>, Duration);

/// Times our CPU kernels and, with `with_peers`, every CPU peer, all on `threads` threads; on
/// one thread, the FMA peak as well.
///
/// Each contender runs twice untimed (the first result is checked), then the contenders take turns,
/// one timed run each per round, for as many rounds as fit in about ten seconds (7 at least, at
/// most the GPU schedule). On this 2-core VM, two seconds (3 rounds at n >= 2047, so a mean of
/// 2 samples) left rows swinging by 5-10% from one sweep to the next. Taking turns matters on a
/// shared machine: a burst of load from a neighbour lands on every contender alike instead of
/// on whichever was being timed.
///
/// The order is fixed: our kernels, then the peers, then the FMA loop. So the first of our kernels,
/// like every peer, runs right after another library's run, and a later one of ours right after one
/// of ours: the same kernel listed three times measured 2-3.5% slower in the first place than in
/// the second and third at n = 512 on one thread, with or without the FMA loop before it (likely
/// because our packing buffers are still in cache after one of ours). The ratio of `auto`, listed
/// first, is therefore taken as the peers' are; two of our kernels are compared in separate runs,
/// each listed first.
///
/// The FMA loop takes its turn last in every round, sized to last about as long as our first
/// kernel's run, and its median is the row's peak. Measured once before the sweep instead (the
/// best of three 30 ms runs), the peak was compared with GEMMs timed minutes later, while this
/// machine's speed drifts by several percent over minutes with its neighbours' load: n = 2048 on
/// one thread read 0.86-0.89 of that peak, and 0.90-0.92 of the peak timed alternately with it.
/// It is not timed on more threads: run on both cores of this VM (scoped threads or a rayon
/// pool, with or without a 20 ms pause after it), it slowed our 2-thread n = 512 run from about
/// 1.7 to 2.8 ms in the same rounds (cause not found), which would have skewed the comparison
/// with the peers it exists to support.
fn time_cpu(
    problem: &Problem,
    kernels: &[String],
    threads: usize,
    with_peers: bool,
    flops: f64,
    progress: &ProgressBar,
) -> Result<Timings, BenchError> {
    let (a, b) = problem.strided();
    let (batch, m, n, beta) = (problem.batch, problem.m, problem.n, problem.beta);
    let mut contenders: Vec<Contender> = Vec::new();
    for kernel in kernels {
        // Every CPU kernel is strict: `auto` and `strict` are the same automatic choice.
        let automatic = kernel == "auto" || kernel == "strict";
        let resolved = sgemm::cpu::kernel((!automatic).then_some(kernel.as_str()))?.name;
        // One product through the single-product call, as a user makes it.
        let run: CpuRun = Box::new(move |c| match batch {
            1 => sgemm::cpu::gemm(
                Some(resolved),
                Some(threads),
                1.0,
                &a.matrix,
                &b.matrix,
                beta,
                &mut MatMut::contiguous(c, m, n),
            ),
            _ => {
                let mut c = Strided::new(MatMut::contiguous(c, m, n), m * n);
                sgemm::cpu::gemm_strided(Some(resolved), Some(threads), batch, 1.0, &a, &b, beta, &mut c)
            }
        });
        contenders.push((kernel.clone(), Role::Ours(resolved), run, Duration::ZERO));
    }
    if with_peers {
        for peer in crate::cpu_peers::peers()?.iter().filter(|p| p.takes(beta)) {
            // One call per member, on the same threads.
            let run: CpuRun = Box::new(move |c| {
                for (z, c) in c.chunks_mut(m * n).enumerate() {
                    let (a, b, _) = problem.member(z);
                    (peer.run)(threads, &a, &b, beta, c);
                }
                Ok(())
            });
            contenders.push((peer.name.to_string(), Role::Peer, run, peer.settle));
        }
    }
    let mut c = problem.c0.clone();
    let (mut errors, untimed) = untimed_runs(problem, &contenders, &mut c)?;
    let round_seconds: f64 = untimed.iter().sum();
    if let Some(fma) = crate::fma_peak::FmaLoop::detect().filter(|_| threads == 1) {
        // Our first kernel's run (it has no pause after it).
        let trips = fma.trips_for(untimed[0]);
        let run: CpuRun = Box::new(move |_| {
            fma.run(trips);
            Ok(())
        });
        let role = Role::Peak { flops: fma.flops(trips) };
        contenders.push(("fma peak".into(), role, run, Duration::ZERO));
        errors.push(0.0); // no product to check
    }
    // A sample is `calls` back-to-back calls, the same count for every contender, so that a
    // small product's sample spans at least SAMPLE_SECONDS: one call of a microsecond is below
    // what a clock read and a round's other contenders let a single timing say, and the first
    // calls after another contender's turn (or OpenBLAS's pause) run on cold caches and a core
    // that was idle. Samples of 100 us read ours and the peers 5-30% below samples of 2 ms at
    // n = 32-128 on one thread, and swung more from run to run.
    const SAMPLE_SECONDS: f64 = 2e-3;
    /// The seed of the rounds' orders.
    const ROUND_ORDER_SEED: u64 = 31;
    let fastest = untimed.iter().copied().fold(f64::INFINITY, f64::min);
    let calls = ((SAMPLE_SECONDS / fastest).ceil() as usize).clamp(1, 100_000);
    let rounds = ((10.0 / (round_seconds * calls as f64)) as usize).clamp(7, replays(problem.cube_side()));
    let mut samples = vec![Vec::with_capacity(rounds); contenders.len()];
    // Each round takes the contenders in an order of its own (shuffled, the same sequence every
    // run), so that no contender always follows the same one: whoever comes right after the
    // FMA loop runs slower for a while, and whoever follows a peer's pause starts on an idle
    // core. Each contender follows each of the others in about as many rounds, and the median
    // of its rounds leaves those few out.
    let mut order: Vec<usize> = (0..contenders.len()).collect();
    let mut rng = StdRng::seed_from_u64(ROUND_ORDER_SEED);
    for _ in 0..rounds {
        order.shuffle(&mut rng);
        for &i in &order {
            let (_, _, run, settle) = &contenders[i];
            let started = Instant::now();
            for _ in 0..calls {
                run(&mut c)?;
            }
            samples[i].push(started.elapsed().as_secs_f64() / calls as f64);
            std::thread::sleep(*settle);
        }
    }
    let (mut ours, mut peers, mut peak) = (Vec::new(), Vec::new(), None);
    for (((name, role, _, _), samples), error) in contenders.iter().zip(&samples).zip(errors) {
        let flops = match *role {
            Role::Peak { flops } => flops,
            Role::Ours(_) | Role::Peer => flops,
        };
        let timing = summarize(name, samples, flops, error, Estimator::Median);
        match *role {
            Role::Ours(resolved) => {
                ours.push((name.clone(), resolved.to_string(), None, timing));
                progress.inc(1);
            }
            Role::Peer => peers.push(timing),
            Role::Peak { .. } => peak = Some(timing),
        }
    }
    Ok(Timings { ours, peers, peak })
}

/// Each contender's two untimed runs on `c`: the first from the problem's initial `C`, for its
/// error; the second, back to back with it, for its time (its pause included). A first call pays
/// for what a library sets up once (buffers, thread pools): at n = 8 ours took tens of
/// microseconds where later calls take a third of one, and samples sized by it were a handful
/// of calls, each sample then dominated by its first, cold call.
fn untimed_runs(
    problem: &Problem,
    contenders: &[Contender],
    c: &mut [f32],
) -> Result<(Vec<f64>, Vec<f64>), BenchError> {
    let (mut errors, mut untimed) = (Vec::new(), Vec::new());
    for (_, _, run, settle) in contenders {
        c.copy_from_slice(&problem.c0);
        run(c)?;
        errors.push(problem.error(c));
        let started = Instant::now();
        run(c)?;
        untimed.push(started.elapsed().as_secs_f64() + settle.as_secs_f64());
        std::thread::sleep(*settle);
    }
    Ok((errors, untimed))
}

/// Per kernel: the geometric mean and the minimum of the ratio to the peer over the sweep.
fn print_summary(rows: &[Row]) {
    let mut names: Vec<&str> = rows.iter().map(|r| r.kernel.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let ratios: Vec<f64> = rows.iter().filter(|r| r.kernel == name).filter_map(|r| r.ratio).collect();
        if ratios.is_empty() {
            continue;
        }
        let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{name}: ratio to the peer over {} sizes: geometric mean {geomean:.3}, minimum {min:.3}",
            ratios.len()
        );
    }
}

fn to_csv(record: &Record) -> String {
    let mut out = String::from(
        "device,date,commit,backend,kernel,resolved,m,n,k,trans_a,trans_b,threads,seconds,median_seconds,spread,replays,tflops,peer,peer_tflops,ratio,fma_peak_tflops,peak_fraction,max_rel_err,passed\n",
    );
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    for r in &record.rows {
        out += &format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            record.device,
            record.date,
            record.commit,
            r.backend,
            r.kernel,
            r.resolved,
            r.m,
            r.n,
            r.k,
            r.trans_a,
            r.trans_b,
            r.threads,
            r.seconds,
            r.median_seconds,
            r.spread,
            r.replays,
            r.tflops,
            r.peer.as_deref().unwrap_or(""),
            opt(r.peer_tflops),
            opt(r.ratio),
            opt(r.fma_peak_tflops),
            opt(r.peak_fraction),
            r.max_rel_err,
            r.passed
        );
    }
    out
}

fn write(path: &Path, contents: &str) -> Result<(), BenchError> {
    std::fs::write(path, contents).map_err(|e| format!("writing {}: {e}", path.display()).into())
}

/// The driver version and the current SM clock, from nvidia-smi when it is there.
fn nvidia_smi() -> (Option<String>, Option<u32>) {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=driver_version,clocks.sm", "--format=csv,noheader,nounits", "--id=0"])
        .output();
    let Ok(out) = out else { return (None, None) };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.lines().next().unwrap_or("").split(',').map(str::trim);
    let driver = fields.next().filter(|s| !s.is_empty()).map(str::to_string);
    let clock = fields.next().and_then(|s| s.parse().ok());
    (driver, clock)
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_lists_and_ranges() {
        assert_eq!(parse_sizes("512,1024:2048:512, 4097").unwrap(), vec![512, 1024, 1536, 2048, 4097]);
        assert!(parse_sizes("1024:512:1").is_err());
        assert_eq!(parse_shapes("1x4096x8192, 33x7x5").unwrap(), vec![(1, 4096, 8192), (33, 7, 5)]);
        assert_eq!(parse_shapes("shapes").unwrap().len(), 12);
        assert!(parse_shapes("4x0x2").is_err() && parse_shapes("4x2").is_err() && parse_shapes("").is_err());
        assert!(parse_sizes("x").is_err());
        assert!(parse_sizes("").is_err());
    }

    #[test]
    fn every_contender_is_checked_from_the_initial_c() {
        // With beta != 0 a run's result depends on the C it starts from: the second contender
        // would fail its check if it started from what the first left.
        let problem = Problem::new((33, 17, 9), 2, (false, true), 0.5, 7);
        let (a, b) = problem.strided();
        let (m, n, beta) = (problem.m, problem.n, problem.beta);
        let ours = |name: &'static str| -> Contender {
            let run: CpuRun = Box::new(move |c| {
                let mut c = Strided::new(MatMut::contiguous(c, m, n), m * n);
                sgemm::cpu::gemm_strided(None, Some(1), 2, 1.0, &a, &b, beta, &mut c)
            });
            (name.into(), Role::Ours(name), run, Duration::ZERO)
        };
        let mut c = problem.c0.clone();
        let (errors, untimed) = untimed_runs(&problem, &[ours("first"), ours("second")], &mut c).unwrap();
        assert_eq!(untimed.len(), 2);
        assert!(errors.iter().all(|&e| e <= reference::TOLERANCE), "{errors:?}");
        // `c` holds the result of two runs in a row: a check from there would fail.
        assert!(problem.error(&c) > reference::TOLERANCE);
    }

    #[test]
    fn replay_schedule_follows_the_seed() {
        assert_eq!(replays(1024), 1000);
        assert_eq!(replays(8192), 99);
        assert_eq!(replays(16384), 20);
        assert!(replays(2048) > 20 && replays(2048) < 1000);
    }

    #[test]
    fn second_half_statistics() {
        let t = summarize("x", &[9.0, 9.0, 1.0, 1.0], 2.0e12, 0.0, Estimator::SecondHalfMedian);
        assert_eq!((t.seconds, t.median_seconds, t.spread, t.tflops), (1.0, 1.0, 0.0, 2.0));
        // A stalled replay in the second half moves the mean, not the rate.
        let t = summarize("x", &[9.0, 9.0, 9.0, 1.0, 7.0, 1.0], 2.0e12, 0.0, Estimator::SecondHalfMedian);
        assert_eq!((t.seconds, t.median_seconds, t.tflops), (3.0, 1.0, 2.0));
    }

    #[test]
    fn the_median_ignores_a_burst() {
        let t = summarize("x", &[1.0, 1.0, 7.0, 1.0, 1.0], 2.0e12, 0.0, Estimator::Median);
        assert_eq!((t.seconds, t.median_seconds, t.tflops), (2.2, 1.0, 2.0));
    }

    #[test]
    fn date_is_iso_8601() {
        let d = utc_now();
        assert_eq!((d.len(), &d[4..5], &d[10..11]), (20, "-", "T"));
    }
}
