#!/usr/bin/env bash
export LD_LIBRARY_PATH=$PWD/.devbuild/lib
g=.devbuild/gemm
{ lscpu | grep -E "Model name|L1d|L2|L3|^CPU\(s\)|Thread"; grep -m1 flags /proc/cpuinfo; } | tee $OUT/cpu.txt
case "$1" in
small) $g bench --backend cpu --peers --threads 1,16 --sizes 8,16,32,64,96,128,192,256 --json $OUT/small.json 2>&1 | grep -vE "^\s*$" | tail -25;;
sweep) $g bench --backend cpu --peers --threads 1,16 --json $OUT/sweep.json --csv $OUT/sweep.csv --plot $OUT/sweep.svg 2>&1 | tail -20
       python3 scripts/cpu-peers.py --sizes 512,1024,2048,4096 --threads 1,16 2>&1 | tee $OUT/mkl.txt;;
shapes) $g bench --backend cpu --peers --threads 1,16 --shapes 4096x4096x64,64x4096x4096,4096x64x4096,1024x1024x64,8x4096x4096,4096x4096x8 --json $OUT/shapes.json 2>&1 | tail -16;;
esac
