#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over what scripts/devbuild.sh built:
# the GPU correctness suite, the integration tests, compute-sanitizer, and the benchmark
# against cuBLAS (KERNELS and SIZES as for `gemm bench`; default: every kernel, default sizes). Logs go to $OUT (or ./device-logs); the summary is printed last.
set -uo pipefail
b=.devbuild
out=${OUT:-device-logs}
mkdir -p "$out"
status=0
# The test executables arrive compressed (scripts/devbuild.sh).
if [ -f $b/tests.tar.xz ]; then tar xJf $b/tests.tar.xz -C $b; fi
step() { echo; echo "== $*"; }
# STEPS picks a subset (default: all of them, in this order).
STEPS=${STEPS:-"sass coldstart selftest tests accuracy sanitizer transposes batch bench"}
# (Also, on request: before, the previous build's sweep; cpu, the CPU path beside the host's
# numpy and PyTorch, CPU_SHAPES and CPU_THREADS.)
want() { [[ " $STEPS " == *" $1 "* ]]; }

step "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$out/device.txt"

if want sass; then
step "SASS of the sm_90a modules: 16-byte loads, FFMA, HMMA (mma.sync) and HGMMA (wgmma) per kernel"
ptxas -arch=sm_90a -o "$out/ladder-sm_90a.cubin" host/ptx/ladder-sm_90a.ptx &&
  { cuobjdump --dump-sass host/ptx/production-sm_90a.cubin && cuobjdump --dump-sass "$out/ladder-sm_90a.cubin"; } >"$out/sm_90a.sass" &&
  awk '/Function :/ {f=$3; seen[f]=1} /LDS.128/ {lds[f]++} /LDG.E.128/ {ldg[f]++} /STS.128/ {sts[f]++} /LDGSTS/ {cpa[f]++} /FFMA/ {ffma[f]++} /HMMA/ {hmma[f]++} /HGMMA/ {hgmma[f]++} /STL|LDL/ {loc[f]++}
       END {printf "%-28s %8s %8s %8s %7s %6s %6s %6s %6s\n", "kernel", "LDS.128", "LDG.128", "STS.128", "LDGSTS", "FFMA", "HMMA", "HGMMA", "local";
            for (f in seen) printf "%-28s %8d %8d %8d %7d %6d %6d %6d %6d\n", f, lds[f], ldg[f], sts[f], cpa[f], ffma[f], hmma[f], hgmma[f], loc[f]}' "$out/sm_90a.sass"
rm -f "$out/ladder-sm_90a.cubin"
fi

if want coldstart; then
step "cold start: the first result of a fresh process with the driver's JIT cache off (CUDA_CACHE_DISABLE=1)"
for g in $b/gemm-before $b/gemm; do
  [ -x "$g" ] || continue
  for kernel in "" "--kernel naive"; do
    t0=$EPOCHREALTIME
    CUDA_CACHE_DISABLE=1 $g --backend gpu --m 64 --iters 1 --no-check $kernel >/dev/null 2>&1 || status=1
    t1=$EPOCHREALTIME
    awk -v g="$(basename $g)" -v k="${kernel:-auto}" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-12s %-16s %.2f s\n", g, k, b - a }'
  done
done | tee "$out/coldstart.txt"
fi

if want selftest; then
step "selftest (the shared suite on every GPU kernel)"
$b/gemm selftest --backend gpu 2>&1 | tee "$out/selftest.log" || status=1
fi

if want tests; then
step "integration tests (SGEMM_LARGE_TESTS: C past 2^32 elements, 17.6 GB)"
for t in $b/test-*; do
  SGEMM_LARGE_TESTS=1 "$t" --test-threads=1 2>&1 | tee -a "$out/tests.log" | grep -E "^test |test result|SKIPPED|failures" || status=1
done
fi

if want accuracy; then
step "accuracy over magnitudes: each precision policy beside cuBLAS FP32 (normalized errors in u = 2^-24)"
$b/gemm accuracy --backend gpu --peer --size ${ACCURACY_SIZE:-512} --step ${ACCURACY_STEP:-3} 2>&1 | tee "$out/accuracy.log" || status=1
fi

if want sanitizer; then
step "compute-sanitizer"
san="compute-sanitizer --error-exitcode 9 --print-limit 20"
for kernel in ${SAN_KERNELS:-$($b/gemm --backend gpu --list-kernels | tail -n +2)}; do
  $san --tool memcheck $b/gemm --backend gpu --kernel "$kernel" --m 129 --n 127 --k 33 --beta 0.5 --iters 1 >"$out/san.log" 2>&1 \
    && echo "memcheck  $kernel: clean" || { echo "memcheck  $kernel: FAILED"; tail -30 "$out/san.log"; status=1; }
  $san --tool racecheck $b/gemm --backend gpu --kernel "$kernel" --m 65 --n 97 --k 129 --iters 1 >"$out/san.log" 2>&1 \
    && echo "racecheck $kernel: clean" || { echo "racecheck $kernel: FAILED"; tail -30 "$out/san.log"; status=1; }
  $san --tool initcheck $b/gemm --backend gpu --kernel "$kernel" --m 33 --n 31 --k 7 --beta 0 --iters 1 >"$out/san.log" 2>&1 \
    && echo "initcheck $kernel: clean" || { echo "initcheck $kernel: FAILED"; tail -30 "$out/san.log"; status=1; }
done
# the split-K kernels with K actually split (7 slices and a tail of 21 columns), then transposes and
# column-major (the transpose kernel and the swapped operands), on the auto kernel.
# warpgroup's scaled path (tiles whose rows and columns are scaled by powers of two).
for tool in memcheck racecheck initcheck; do
  $san --tool $tool $b/gemm --backend gpu --kernel warpgroup --m 129 --n 127 --k 1001 --scale-a 1e-38 --scale-b 1e30 --beta 0 --iters 1 >"$out/san.log" 2>&1 \
    && echo "$tool warpgroup scaled 129x127x1001: clean" || { echo "$tool warpgroup scaled: FAILED"; tail -30 "$out/san.log"; status=1; }
done
for kernel in split_k small_tile tensor_core warpgroup; do
  for tool in memcheck racecheck initcheck; do
    $san --tool $tool $b/gemm --backend gpu --kernel $kernel --m 129 --n 127 --k 1001 --beta 0 --iters 1 >"$out/san.log" 2>&1 \
      && echo "$tool $kernel 129x127x1001: clean" || { echo "$tool $kernel 129x127x1001: FAILED"; tail -30 "$out/san.log"; status=1; }
  done
done
# The kernels the automatic choice gives to narrow shapes (not selectable by name): vector
# rows (a deep one split), columns (few rows; many short rows: a group of lanes a row, or
# staged), few_rows (scalar and 16-byte entries, K split), its tall variant.
for shape in "1 131 3001" "1 64 65536" "1 3 100001" "129 1 3001" "5000 1 777" "13 1 100000" "100003 1 63" "150001 1 16" "150001 1 24" "100003 1 17" "34001 1 31" "100003 1 3" "7 131 3001" "7 132 3000" "13 132 3000"; do
  set -- $shape
  for tool in memcheck racecheck initcheck; do
    $san --tool $tool $b/gemm --backend gpu --m $1 --n $2 --k $3 --beta 0.5 --iters 1 >"$out/san.log" 2>&1 \
      && echo "$tool auto ${1}x${2}x${3}: clean" || { echo "$tool auto ${1}x${2}x${3}: FAILED"; tail -30 "$out/san.log"; status=1; }
  done
done
for ops in "--transa" "--transb --layout col" "--transa --transb --layout col"; do
  $san --tool memcheck $b/gemm --backend gpu $ops --m 129 --n 127 --k 33 --beta 0.5 --iters 1 >"$out/san.log" 2>&1 \
    && echo "memcheck  auto $ops: clean" || { echo "memcheck  auto $ops: FAILED"; tail -30 "$out/san.log"; status=1; }
  $san --tool initcheck $b/gemm --backend gpu $ops --m 33 --n 31 --k 7 --beta 0 --iters 1 >"$out/san.log" 2>&1 \
    && echo "initcheck auto $ops: clean" || { echo "initcheck auto $ops: FAILED"; tail -30 "$out/san.log"; status=1; }
  $san --tool racecheck $b/gemm --backend gpu $ops --m 65 --n 97 --k 129 --iters 1 >"$out/san.log" 2>&1 \
    && echo "racecheck auto $ops: clean" || { echo "racecheck auto $ops: FAILED"; tail -30 "$out/san.log"; status=1; }
done
fi

if want transposes; then
step "transposed operands at n = 4096: ours (transpose kernel + GEMM) and cuBLAS"
for ops in "" "--transa" "--transb" "--transa --transb" "--layout col" "--transa --layout col"; do
  $b/gemm --backend gpu --m 4096 --iters 20 --peer $ops 2>&1 | grep -E "problem|tensor|split|warpgroup|cublas" || status=1
done
fi

if want batch; then
step "batches: compute-sanitizer on the batch tests, then ours beside cuBLAS's strided batched GEMM"
san="compute-sanitizer --error-exitcode 9 --print-limit 20"
for t in a_batch_gives_what_its_members_give_alone_on_the_cpu_and_the_same_bits_every_run gpu_batches_past_the_grid_limit; do
  for tool in memcheck racecheck initcheck; do
    $san --tool $tool $b/test-batch --exact $t --test-threads=1 >"$out/san.log" 2>&1 \
      && echo "$tool $t: clean" || { echo "$tool $t: FAILED"; tail -30 "$out/san.log"; status=1; }
  done
done
for batch in ${BATCHES:-32 256 1024}; do
  $b/gemm bench --backend gpu --kernels auto,strict --peers --batch $batch \
    --shapes "${BATCH_SHAPES:-64x64x64,128x128x64,128x128x128,256x256x64,512x512x64,512x64x512}" \
    --json "$out/bench-batch-$batch.json" 2>&1 | tee "$out/bench-batch-$batch.log" || status=1
done
$b/gemm bench --backend gpu --kernels auto,strict --peers --batch 8 --shapes 2048x2048x2048 \
  --json "$out/bench-batch-8.json" 2>&1 | tee "$out/bench-batch-8.log" || status=1
fi

if want before; then
step "before/after: the previous build's auto beside cuBLAS, then this build's (same sizes, one run)"
$b/gemm-before bench --backend gpu --kernels auto --peers ${SIZES:+--sizes "$SIZES"} \
  --json "$out/bench-before.json" 2>&1 | tee "$out/bench-before.log" || status=1
fi

if want bench; then
step "benchmark against cuBLAS (gemm bench: same process, same buffers, L2 flushed per replay)"
$b/gemm bench --backend gpu --kernels "${KERNELS:-all}" --peers ${SIZES:+--sizes "$SIZES"} ${SHAPES:+--shapes "$SHAPES"} \
  --json "$out/bench-gpu.json" --csv "$out/bench-gpu.csv" --plot "$out/bench-gpu.svg" 2>&1 | tee "$out/bench.log" || status=1
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee -a "$out/device.txt"
fi

if want cpu; then
step "CPU path on the host beside numpy (OpenBLAS) and PyTorch (MKL), in one process on the same buffers; GFLOP/s"
lscpu | grep -E "Model name|L2 cache" ; grep -m1 -o "avx512[a-z_0-9]*" /proc/cpuinfo | head -3 | tr '\n' ' '; echo
for t in ${CPU_THREADS:-1 16}; do
  python3 scripts/cpu-peers.py --ours $b/blas/libsgemm_blas.so --threads $t \
    --shapes "${CPU_SHAPES:-512,1000,1024,2048,4096}" 2>&1 | tee -a "$out/cpu.log" || status=1
done
fi

echo; echo "on-device status: $status"
exit $status
