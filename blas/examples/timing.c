/* Times cblas_sgemm on n x n x n products from host memory (the sizes on the command line),
 * best of 5 after a warm-up: how the GPU threshold SGEMM_GPU_MIN_WORK was measured, with
 * SGEMM_BACKEND=cpu and =gpu in turn. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "sgemm_blas.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int n = atoi(argv[i]);
    float *a = malloc((size_t)n * n * 4), *b = malloc((size_t)n * n * 4), *c = malloc((size_t)n * n * 4);
    for (size_t j = 0; j < (size_t)n * n; j++) { a[j] = (float)(j % 7) - 3; b[j] = (float)(j % 5) - 2; c[j] = 0; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 1e30;
    for (int r = 0; r < 5; r++) { double t = now(); cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n); t = now() - t; if (t < best) best = t; }
    printf("n %5d  %9.3f ms  %8.1f GFLOP/s\n", n, best * 1e3, 2.0 * n * n * (double)n / best / 1e9);
    free(a); free(b); free(c);
  }
  return 0;
}
