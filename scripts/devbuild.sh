#!/usr/bin/env bash
# Builds, here, everything the GPU check needs on the device (which has no Rust toolchain):
# the `gemm` binary with the cuBLAS peer and the integration-test executables, copied into
# .devbuild/ (ignored by git, carried to the device). Then run scripts/on-device.sh there.
# BEFORE=<commit> also builds that commit's `gemm` as .devbuild/gemm-before, for a before/after
# benchmark in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.devbuild
rm -rf "$out" && mkdir -p "$out"
cargo build --release -p sgemm-cli --features cublas
cp target/release/gemm "$out/"
cargo test -p sgemm-check --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil
for line in sys.stdin:
    msg = json.loads(line)
    # The CPU suite runs here; the device gets every test that also runs on the GPU.
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] in ("gpu", "batch", "magnitudes", "errors", "blas", "properties", "ndarray"):
        shutil.copy(msg["executable"], sys.argv[1] + "/test-" + msg["target"]["name"])
' "$out"
if [ -n "${BEFORE:-}" ]; then
  tree=$(mktemp -d)
  git worktree add --detach "$tree" "$BEFORE" >/dev/null
  # Older commits kept the command in the library crate.
  (cd "$tree" && { cargo +stable build --release -p sgemm-cli --features cublas 2>/dev/null ||
    cargo +stable build --release -p sgemm --features cublas; }) >/dev/null
  cp "$tree/target/release/gemm" "$out/gemm-before"
  git worktree remove --force "$tree"
fi
# The BLAS drop-in's C and Fortran checks and the numpy script, with the library beside them.
BUILD_ONLY=1 BIN="$out/blas" blas/check.sh >/dev/null
strip "$out"/* 2>/dev/null || true
# The carried tree is limited to 64 MiB: the test executables travel compressed (about a
# thirtieth of their size) and scripts/on-device.sh unpacks them.
tar cJf "$out/tests.tar.xz" -C "$out" $(cd "$out" && ls test-*) && rm "$out"/test-*
du -sh "$out"
