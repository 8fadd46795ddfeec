//! `cargo xtask build-ptx`: compiles the `kernels` crate to one PTX module per shipped GPU
//! architecture, writes them where the host library embeds them (`host/ptx/<arch>.ptx`),
//! checks that every registered kernel is in each module, and, when `ptxas` can be found
//! (`$PTXAS`, then `PATH`), prints each kernel's registers, spills and shared memory and fails
//! if any kernel spills to local memory.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use sgemm_kernels::{GEMM_KERNELS, scale};

/// The architectures we ship, with the code-generation flags each needs. The flags go through
/// `RUSTFLAGS` so that `core`, built from source by `-Zbuild-std`, gets them too.
const ARCHES: &[(&str, &str)] =
    &[("sm_80", "-C target-cpu=sm_80"), ("sm_90", "-C target-cpu=sm_90 -C target-feature=+ptx80")];

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

fn build_ptx() -> Result<(), String> {
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ptxas = find_ptxas();
    if ptxas.is_none() {
        println!("ptxas not found ($PTXAS or PATH): skipping the register and spill report");
    }
    for (arch, flags) in ARCHES {
        let target_dir = root.join("target").join(format!("ptx-{arch}"));
        let status = Command::new(&cargo)
            .current_dir(&root)
            .env("RUSTFLAGS", flags)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .args(["rustc", "--package", "sgemm-kernels", "--profile", "ptx"])
            .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
            .args(["--crate-type", "cdylib", "--target-dir"])
            .arg(&target_dir)
            .status()
            .map_err(|e| format!("running {cargo}: {e}"))?;
        if !status.success() {
            return Err(format!("building the kernels for {arch} failed"));
        }
        let built = target_dir.join("nvptx64-nvidia-cuda/ptx/sgemm_kernels.ptx");
        let ptx = std::fs::read_to_string(&built).map_err(|e| format!("reading {}: {e}", built.display()))?;
        check_entries(arch, &ptx)?;
        let dest = root.join("host/ptx").join(format!("{arch}.ptx"));
        std::fs::write(&dest, &ptx).map_err(|e| format!("writing {}: {e}", dest.display()))?;
        println!("wrote {}", dest.strip_prefix(&root).unwrap_or(&dest).display());
        if let Some(ptxas) = &ptxas {
            report_resources(ptxas, arch, &dest)?;
        }
    }
    Ok(())
}

/// Every kernel the host may launch must be an entry of the module.
fn check_entries(arch: &str, ptx: &str) -> Result<(), String> {
    let specs = GEMM_KERNELS.iter().chain([&scale::SPEC]);
    let entries = specs.flat_map(|s| [Some(s.entry), s.vec4_entry]).flatten();
    for entry in entries {
        if !ptx.contains(&format!(".entry {entry}(")) {
            return Err(format!("{arch}: kernel `{entry}` is registered but not in the PTX"));
        }
    }
    Ok(())
}

fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Runs `ptxas -v` and prints one line per kernel; a kernel that spills is an error.
fn report_resources(ptxas: &Path, arch: &str, ptx: &Path) -> Result<(), String> {
    let out = Command::new(ptxas)
        .args(["-v", &format!("-arch={arch}"), "-o", "/dev/null"])
        .arg(ptx)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ptxas rejected the {arch} module:\n{log}"));
    }
    println!("{arch}: {:<20} {:>5} {:>12} {:>12}", "kernel", "regs", "spill bytes", "static smem");
    let mut spilled = Vec::new();
    let mut kernel = "";
    let mut spill = 0u64;
    for line in log.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            kernel = rest.trim();
        } else if line.contains("spill stores") {
            spill = numbers(line).iter().take(3).skip(1).sum();
        } else if line.contains("Used") && line.contains("registers") {
            let regs = numbers(line).first().copied().unwrap_or(0);
            let smem = line
                .split(',')
                .find(|part| part.contains("smem"))
                .and_then(|part| numbers(part).first().copied())
                .unwrap_or(0);
            println!("{arch}: {kernel:<20} {regs:>5} {spill:>12} {smem:>12}");
            if spill > 0 {
                spilled.push(kernel.to_string());
            }
        }
    }
    if spilled.is_empty() {
        Ok(())
    } else {
        Err(format!("{arch}: kernels spill to local memory: {}", spilled.join(", ")))
    }
}

/// The unsigned integers in a line of ptxas output, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect()
}
