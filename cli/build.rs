//! Records the git commit the `gemm` binary is built from (`GEMM_COMMIT`), so every benchmark
//! record names the code that produced it; `unknown` outside a git checkout.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match (
        git(&["rev-parse", "--short=12", "HEAD"]),
        git(&["status", "--porcelain", "--untracked-files=no"]),
    ) {
        (Some(hash), Some(status)) if !status.is_empty() => format!("{hash}-dirty"),
        (Some(hash), _) => hash,
        (None, _) => "unknown".into(),
    };
    println!("cargo:rustc-env=GEMM_COMMIT={commit}");
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/index");
}
