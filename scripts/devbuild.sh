#!/usr/bin/env bash
# Builds, here, everything the GPU check needs on the device (which has no Rust toolchain):
# the `gemm` binary with the cuBLAS peer and the integration-test executables, copied into
# .devbuild/ (ignored by git, carried to the device). Then run scripts/on-device.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.devbuild
rm -rf "$out" && mkdir -p "$out"
cargo build --release -p sgemm --features cublas
cp target/release/gemm "$out/"
cargo test -p sgemm --features cublas,ndarray --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil
for line in sys.stdin:
    msg = json.loads(line)
    # The CPU suite runs here; the device gets every test that also runs on the GPU.
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] in ("gpu", "errors", "blas", "properties", "ndarray"):
        shutil.copy(msg["executable"], sys.argv[1] + "/test-" + msg["target"]["name"])
' "$out"
strip "$out"/*
du -sh "$out"
