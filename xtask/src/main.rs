//! `cargo xtask build-ptx`: compiles the `kernels` crate to its PTX modules (production and
//! ladder, `KernelSpec::module`) for each shipped GPU architecture, writes them where the host
//! library embeds them (`host/ptx/<module>-<arch>.ptx`), checks that every registered kernel is
//! in its module, and assembles the production modules to SASS with `ptxas` (`$PTXAS`, then
//! `PATH`; `pip install nvidia-cuda-nvcc` provides it) as `host/ptx/production-<arch>.cubin`,
//! which the driver loads without compiling. It prints each kernel's registers, local memory
//! and shared memory and fails if any kernel uses local memory (a stack frame, such as a
//! dynamically indexed array, or register spills): in a GEMM kernel either means the register
//! tile was not kept in registers.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use sgemm_kernels::helpers::{pad, scale, transpose};
use sgemm_kernels::production::split_k;
use sgemm_kernels::{GEMM_KERNELS, GEMM_VARIANTS, KernelSpec, Module};

/// The nightly toolchain that compiles the kernels (rustc's `nvptx64-nvidia-cuda` backend and
/// `-Zbuild-std=core` need one), with the components that build needs. Only this command uses
/// it: everything else in the workspace builds on stable Rust. Move the date only after
/// checking that every component downloads for it.
const NIGHTLY: &str = "nightly-2026-10-01";
const COMPONENTS: &[&str] = &["rust-src", "llvm-bitcode-linker-preview", "llvm-tools-preview"];

/// One PTX module we ship.
struct Arch {
    name: &'static str,
    /// Code-generation flags. They go through `RUSTFLAGS` so that `core`, built from source by
    /// `-Zbuild-std`, gets them too. `-unroll-threshold` is raised so that LLVM fully unrolls
    /// the register-tile loops (8 x 8 accumulators, 8 `k` per tile): a loop left rolled
    /// indexes the accumulator array at run time, which puts it in local memory.
    flags: &'static str,
    /// Whether the kernels are tuned and measured on this architecture: only then are their
    /// launch bounds (`KernelSpec::min_blocks_per_sm`) written into the module. The register
    /// caps they imply were fitted to sm_90a's code; elsewhere ptxas is left free, so the
    /// module stays spill-free even if slower.
    tuned: bool,
}

const ARCHES: &[Arch] = &[
    Arch { name: "sm_80", flags: "-C target-cpu=sm_80 -C llvm-args=-unroll-threshold=5000", tuned: false },
    Arch {
        name: "sm_90a",
        flags: "-C target-cpu=sm_90a -C target-feature=+ptx80 -C llvm-args=-unroll-threshold=5000",
        tuned: true,
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("build-ptx") => match build_ptx() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: cargo xtask build-ptx");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").into()
}

/// Installs [`NIGHTLY`] and its components through rustup when they are missing (rustup
/// installs nothing by itself when `RUSTUP_AUTO_INSTALL=0`).
fn ensure_nightly() -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["run", NIGHTLY, "rustc", "--print", "sysroot"])
        .output()
        .map_err(|e| format!("running rustup (needed to build the kernels with {NIGHTLY}): {e}"))?;
    let sysroot = String::from_utf8_lossy(&installed.stdout).trim().to_string();
    let has_src = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core").is_dir();
    if installed.status.success() && has_src {
        return Ok(());
    }
    println!("installing {NIGHTLY} with {} (used by build-ptx only)", COMPONENTS.join(", "));
    let status = Command::new("rustup")
        .args(["toolchain", "install", NIGHTLY, "--profile", "minimal", "--component", &COMPONENTS.join(",")])
        .status()
        .map_err(|e| format!("running rustup: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("rustup could not install {NIGHTLY}")) }
}

fn build_ptx() -> Result<(), String> {
    let root = workspace_root();
    ensure_nightly()?;
    let ptxas = find_ptxas().ok_or(
        "ptxas not found ($PTXAS or PATH): `pip install nvidia-cuda-nvcc` provides it (nvidia/cu13/bin/ptxas)",
    )?;
    let mut failures = Vec::new();
    for module in Module::ALL {
        for &Arch { name: arch, flags, tuned } in ARCHES {
            let ptx = compile(&root, module, arch, flags)?;
            check_entries(module, arch, &ptx)?;
            let ptx = if tuned { add_launch_bounds(&ptx) } else { ptx };
            let stem = format!("{}-{arch}", module.name());
            let dest = root.join("host/ptx").join(format!("{stem}.ptx"));
            std::fs::write(&dest, &ptx).map_err(|e| format!("writing {}: {e}", dest.display()))?;
            println!("wrote {}", dest.strip_prefix(&root).unwrap_or(&dest).display());
            // The production modules ship as SASS too; the ladder's are only checked.
            let cubin = (module == Module::Production).then(|| dest.with_extension("cubin"));
            // Report every module before failing on any.
            if let Err(e) = assemble(&ptxas, &stem, arch, &dest, cubin.as_deref()) {
                failures.push(e);
            }
        }
    }
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n")) }
}

/// Compiles the kernels crate's `module` for `arch` with the nightly; returns the PTX.
fn compile(root: &Path, module: Module, arch: &str, flags: &str) -> Result<String, String> {
    let target_dir = root.join("target").join(format!("ptx-{}-{arch}", module.name()));
    // Through the rustup proxy with the toolchain named, not `$CARGO` (the stable cargo
    // running this command).
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(root)
        .env("RUSTUP_TOOLCHAIN", NIGHTLY)
        .env("RUSTFLAGS", flags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .args(["rustc", "--package", "sgemm-kernels", "--profile", "ptx"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(&target_dir);
    if module == Module::Ladder {
        cargo.args(["--features", "ladder"]);
    }
    let status = cargo.status().map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the {} kernels for {arch} failed", module.name()));
    }
    let built = target_dir.join("nvptx64-nvidia-cuda/ptx/sgemm_kernels.ptx");
    std::fs::read_to_string(&built).map_err(|e| format!("reading {}: {e}", built.display()))
}

/// Every kernel the host may launch from this module must be an entry of it.
fn check_entries(module: Module, arch: &str, ptx: &str) -> Result<(), String> {
    let in_module = all_specs().filter(|s| s.module == module && s.in_module(arch));
    let entries = in_module.flat_map(|s| [Some(s.entry), s.vec4_entry]).flatten();
    for entry in entries {
        if !ptx.contains(&format!(".entry {entry}(")) {
            return Err(format!(
                "{}-{arch}: kernel `{entry}` is registered but not in the PTX",
                module.name()
            ));
        }
    }
    Ok(())
}

/// Adds launch bounds after the parameter list of each kernel whose spec asks for a number of
/// blocks per SM: `.maxntid` (the block it is always launched with) and `.minnctapersm`. Rust has no
/// attribute for these PTX performance-tuning directives, so they are written here.
fn add_launch_bounds(ptx: &str) -> String {
    let specs: Vec<_> = all_specs().collect();
    let mut out = String::with_capacity(ptx.len() + 4096);
    let mut bounds: Option<String> = None;
    for line in ptx.lines() {
        if let Some(name) = line.strip_prefix(".visible .entry ").and_then(|rest| rest.strip_suffix('(')) {
            let spec = specs.iter().find(|s| s.entry == name || s.vec4_entry == Some(name));
            bounds = spec.filter(|s| s.min_blocks_per_sm > 0).map(|s| {
                let (x, y) = s.block;
                format!(".maxntid {x}, {y}, 1\n.minnctapersm {}\n", s.min_blocks_per_sm)
            });
        }
        out.push_str(line);
        out.push('\n');
        if line.starts_with(')')
            && let Some(b) = bounds.take()
        {
            out.push_str(&b);
        }
    }
    out
}

/// Every kernel the host may launch: the GEMM registry, the kernels it chooses by shape and
/// layout ([`GEMM_VARIANTS`]), `scale_c`, `transpose`, `pad` and the split-K reduction.
fn all_specs() -> impl Iterator<Item = &'static KernelSpec> {
    GEMM_KERNELS.iter().chain(GEMM_VARIANTS).chain([
        &scale::SPEC,
        &transpose::SPEC,
        &pad::SPEC,
        &split_k::REDUCE,
    ])
}

fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Runs `ptxas -v` on a module, writing its SASS to `cubin` (or nowhere), and prints one line
/// per kernel; a kernel using local memory is an error.
fn assemble(ptxas: &Path, stem: &str, arch: &str, ptx: &Path, cubin: Option<&Path>) -> Result<(), String> {
    let out = Command::new(ptxas)
        .args(["-v", &format!("-arch={arch}"), "-o"])
        .arg(cubin.unwrap_or(Path::new("/dev/null")))
        .arg(ptx)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ptxas rejected {stem}:\n{log}"));
    }
    if let Some(cubin) = cubin {
        println!("wrote {}", cubin.display());
    }
    println!("{stem}: {:<20} {:>5} {:>12} {:>12}", "kernel", "regs", "local bytes", "static smem");
    let mut spilled = Vec::new();
    let mut kernel = "";
    let mut spill = 0u64;
    for line in log.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            kernel = rest.trim();
        } else if line.contains("spill stores") {
            // "N bytes stack frame, N bytes spill stores, N bytes spill loads"
            spill = numbers(line).iter().take(3).sum();
        } else if line.contains("Used") && line.contains("registers") {
            let regs = numbers(line).first().copied().unwrap_or(0);
            let smem = line
                .split(',')
                .find(|part| part.contains("smem"))
                .and_then(|part| numbers(part).first().copied())
                .unwrap_or(0);
            println!("{stem}: {kernel:<20} {regs:>5} {spill:>12} {smem:>12}");
            if spill > 0 {
                spilled.push(kernel.to_string());
            }
        }
    }
    if spilled.is_empty() {
        Ok(())
    } else {
        Err(format!("{stem}: kernels use local memory: {}", spilled.join(", ")))
    }
}

/// The unsigned integers in a line of ptxas output, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect()
}
