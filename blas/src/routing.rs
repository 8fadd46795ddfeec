//! Where each call runs: one engine per process, created on the first call, configured from
//! the environment, and shared by every thread.
//!
//! | variable | values | default |
//! |---|---|---|
//! | `SGEMM_BACKEND` | `auto`, `cpu`, `gpu` | `auto` |
//! | `SGEMM_PRECISION` | `accurate`, `strict` | `accurate` |
//! | `SGEMM_CPU_THREADS` | a count | every core |
//! | `SGEMM_GPU_MIN_WORK` | `m * n * k` | 8.4e6 per CPU thread |
//! | `SGEMM_VERBOSE` | `1` | off |
//!
//! Under `auto` a product goes to the GPU when there is a usable one and `m * n * k` is at
//! least `SGEMM_GPU_MIN_WORK`: from host memory a GPU call copies `A`, `B` and `C` over PCIe
//! and back, which a small product does not earn back. The CPU's time for a product falls
//! with its thread count while the GPU's copies do not, so the default is a share of work per
//! CPU thread ([`GPU_MIN_WORK_PER_THREAD`]): more cores keep larger products on the CPU.
//! `gpu` sends every product there (and falls back to the CPU, saying so once, when there is no
//! GPU); `cpu` never opens the GPU. `SGEMM_VERBOSE=1` prints one line per call to standard
//! error: the shape, where it ran, and how long it took. A value that does not parse is
//! reported once and the default used.

use std::sync::OnceLock;
use std::time::Instant;

use sgemm::{Backend, Engine, MatMut, MatRef, Precision, Strided};

/// The settings read from the environment.
#[derive(Debug)]
struct Config {
    backend: Backend,
    precision: Precision,
    threads: Option<usize>,
    gpu_min_work: f64,
    verbose: bool,
}

/// `name`'s value parsed by `parse`, or `default` (saying why when it was set but did not parse).
fn var<T>(name: &str, default: T, parse: impl FnOnce(&str) -> Option<T>) -> T {
    match std::env::var(name) {
        Ok(value) => parse(value.trim()).unwrap_or_else(|| {
            eprintln!("sgemm: ignoring {name}={value:?} (not a valid value)");
            default
        }),
        Err(_) => default,
    }
}

/// The `m * n * k` per CPU thread from which a product goes to the GPU under `auto`: the
/// crossing of the two paths from host memory, 512^3 over 16 threads, as measured in
/// `docs/performance-notes.md`.
pub const GPU_MIN_WORK_PER_THREAD: f64 = (512.0 * 512.0 * 512.0) / 16.0;

impl Config {
    fn from_env() -> Self {
        let threads = var("SGEMM_CPU_THREADS", None, |v| v.parse().ok().filter(|&t| t > 0).map(Some));
        let cpu_threads = threads.unwrap_or_else(sgemm::cpu::default_threads);
        Self {
            backend: var("SGEMM_BACKEND", Backend::Auto, |v| v.parse().ok()),
            precision: var("SGEMM_PRECISION", Precision::Accurate, |v| v.parse().ok()),
            threads,
            gpu_min_work: var("SGEMM_GPU_MIN_WORK", GPU_MIN_WORK_PER_THREAD * cpu_threads as f64, |v| {
                v.parse().ok().filter(|w: &f64| *w >= 0.0)
            }),
            verbose: var("SGEMM_VERBOSE", false, |v| match v {
                "1" | "true" | "yes" => Some(true),
                "0" | "false" | "no" | "" => Some(false),
                _ => None,
            }),
        }
    }
}

/// The process's engines: the CPU always, the GPU opened the first time a product is sent
/// there.
pub struct Router {
    config: Config,
    cpu: Engine,
    gpu: OnceLock<Option<Engine>>,
}

impl Router {
    /// The process's router, created on first use.
    pub fn get() -> &'static Router {
        static ROUTER: OnceLock<Router> = OnceLock::new();
        ROUTER.get_or_init(|| {
            let config = Config::from_env();
            let mut cpu = Engine::new(Backend::Cpu).expect("the CPU backend opens without fail");
            if let Some(t) = config.threads {
                cpu = cpu.with_cpu_threads(t);
            }
            Router { config, cpu, gpu: OnceLock::new() }
        })
    }

    /// The GPU engine, opened on first use; `None` (said once) when there is no usable GPU.
    fn gpu(&self) -> Option<&Engine> {
        self.gpu
            .get_or_init(|| match Engine::new(Backend::Gpu) {
                Ok(engine) => Some(engine.with_precision(self.config.precision)),
                Err(e) => {
                    if self.config.backend == Backend::Gpu || self.config.verbose {
                        eprintln!("sgemm: no GPU ({e}); running on the CPU");
                    }
                    None
                }
            })
            .as_ref()
    }

    /// The engine for `batch` products of `m x n x k` (the work of the whole batch decides).
    fn engine(&self, batch: usize, m: usize, n: usize, k: usize) -> &Engine {
        let work = batch as f64 * m as f64 * n as f64 * k as f64;
        let on_gpu = match self.config.backend {
            Backend::Cpu => false,
            Backend::Gpu => true,
            Backend::Auto => work >= self.config.gpu_min_work,
        };
        if on_gpu { self.gpu().unwrap_or(&self.cpu) } else { &self.cpu }
    }

    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for a strided batch of `batch` products
    /// (a single product when `batch == 1`) on the engine the shape calls for; with
    /// `SGEMM_VERBOSE` the call is reported as `routine`. Fails only on a batch whose members
    /// of `C` overlap ([`sgemm::Error::OverlappingOutputs`]), with `C` untouched: a device
    /// failure is reported and the CPU computes the call instead.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_strided(
        &self,
        routine: &str,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> Result<(), sgemm::Error> {
        let (m, n, k) = (c.matrix.rows, c.matrix.cols, a.matrix.cols);
        // Formatted only when said: a small product takes less time than the formatting.
        let shape = || if batch == 1 { format!("{m}x{n}x{k}") } else { format!("{batch}*{m}x{n}x{k}") };
        let engine = self.engine(batch, m, n, k);
        let started = self.config.verbose.then(Instant::now);
        // A single product through the single-product call, which skips the batch's checks.
        let outcome = if batch == 1 {
            engine.gemm(alpha, &a.matrix, &b.matrix, beta, &mut c.matrix)
        } else {
            engine.gemm_strided(batch, alpha, a, b, beta, c)
        };
        if let Some(started) = started {
            let kernel = match engine.gpu() {
                Some(gpu) => gpu.chosen_for_host(batch, &a.matrix, &b.matrix, &c.matrix.as_ref()).spec.name,
                None => sgemm::cpu::kernel(None).map_or("cpu", |k| k.name),
            };
            let ms = started.elapsed().as_secs_f64() * 1e3;
            eprintln!("sgemm: {routine} {} on {} ({kernel}), {ms:.3} ms", shape(), engine.backend_name());
        }
        match outcome {
            Ok(()) => Ok(()),
            Err(e @ sgemm::Error::OverlappingOutputs { .. }) => Err(e),
            Err(e) => {
                // The arguments were checked as BLAS checks them, so what is left is a device
                // failure (out of memory, say), which happens before C is copied back: the CPU
                // computes the call instead.
                eprintln!("sgemm: {routine} {} failed on the {}: {e}", shape(), engine.backend_name());
                if engine.gpu().is_some()
                    && let Err(e) = self.cpu.gemm_strided(batch, alpha, a, b, beta, c)
                {
                    eprintln!("sgemm: {routine} {} failed on the cpu: {e}", shape());
                }
                Ok(())
            }
        }
    }
}
