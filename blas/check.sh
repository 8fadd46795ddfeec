#!/usr/bin/env bash
# The BLAS drop-in as its users meet it: builds libsgemm_blas (shared and static), then links
# and runs the C checks (blas/examples/check.c, and reference_xerbla.c: the error numbering a
# program with the reference CBLAS's RowMajorStrg gets) against each, the Fortran check
# (blas/examples/check.f90, gfortran) against the shared one, and numpy's float32 products
# through LD_PRELOAD (blas/examples/numpy_preload.py, Debian's python3-numpy). Needs gcc,
# gfortran and python3-numpy (CI installs them). BIN=<folder> keeps the executables there (for
# a machine without compilers: scripts/devbuild.sh carries them to the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sgemm-blas
lib=$PWD/target/release
bin=${BIN:-$(mktemp -d)}
mkdir -p "$bin"
cp "$lib/libsgemm_blas.so" "$bin/"
# The executables find the library beside them ($ORIGIN), wherever the folder goes.
rpath='-Wl,-rpath,$ORIGIN'
gcc -O2 -Wall -Wextra -Werror -Iblas/include blas/examples/check.c -L"$bin" -lsgemm_blas "$rpath" -lm -lpthread \
  -o "$bin/check-c"
gcc -O2 -Iblas/include blas/examples/check.c "$lib/libsgemm_blas.a" -lm -lpthread -ldl -o "$bin/check-c-static"
gcc -O2 -Wall -Werror -Iblas/include blas/examples/timing.c -L"$bin" -lsgemm_blas "$rpath" -o "$bin/timing"
gcc -O2 -Wall -Wextra -Werror -Iblas/include blas/examples/reference_xerbla.c -L"$bin" -lsgemm_blas "$rpath" \
  -o "$bin/reference-xerbla"
gcc -O2 -Iblas/include blas/examples/reference_xerbla.c "$lib/libsgemm_blas.a" -lm -lpthread -ldl \
  -o "$bin/reference-xerbla-static"
gfortran -O2 blas/examples/check.f90 -L"$bin" -lsgemm_blas "$rpath" -o "$bin/check-fortran"
cp blas/examples/numpy_preload.py "$bin/"
[ -n "${BUILD_ONLY:-}" ] && exit 0
echo "== C, shared library";  "$bin/check-c"
echo "== C, static library";  "$bin/check-c-static"
echo "== C, cblas_xerbla as the reference CBLAS calls it (shared, static)"
"$bin/reference-xerbla"
"$bin/reference-xerbla-static"
echo "== Fortran";            "$bin/check-fortran"
echo "== numpy through LD_PRELOAD"
/usr/bin/python3 "$bin/numpy_preload.py" "$bin/libsgemm_blas.so"
