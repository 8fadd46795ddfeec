/* Checks that libsgemm_blas reports cblas_sgemm's bad arguments as the reference CBLAS does in a
 * program that has the reference's global RowMajorStrg (the reference CBLAS library and its test
 * programs define it): a row-major call's m and n, lda and ldb at their places in the
 * column-major call the reference makes, with RowMajorStrg set to 1 while cblas_xerbla runs and
 * back to 0 after, so that a handler written for the reference maps them back. A column-major
 * call, a bad layout, and MKL's cblas_sgemm_batch_strided keep the caller's numbering with
 * RowMajorStrg 0. The 64-bit-integer entries report through the reference's 64-bit handlers,
 * cblas_xerbla_64 and xerbla_64_, where the program has them. Exit code 0 when everything
 * holds. */
#include <stdio.h>
#include <string.h>

#include "sgemm_blas.h"

int RowMajorStrg = 0;

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static int last_info = -1, last_flag = -1, last_wide = -1;
void cblas_xerbla(int p, const char *rout, const char *form, ...) {
  (void)rout;
  (void)form;
  last_info = p;
  last_flag = RowMajorStrg;
  last_wide = 0;
}
/* The reference BLAS's handler in its 64-bit-integer build (sgemm_64_). */
static long long last_fortran64 = -1;
void xerbla_64_(const char *srname, const long long *info, size_t len) {
  (void)srname;
  (void)len;
  last_fortran64 = *info;
}
/* The reference CBLAS's handler of its 64-bit routines (cblas_sgemm_64). */
void cblas_xerbla_64(long long p, const char *rout, const char *form, ...) {
  (void)rout;
  (void)form;
  last_info = (int)p;
  last_flag = RowMajorStrg;
  last_wide = 1;
}

static void expect_from(const char *what, int info, int flag, int wide) {
  CHECK(last_info == info && last_flag == flag, "%s: want %d with RowMajorStrg %d, got %d with %d", what, info, flag,
        last_info, last_flag);
  CHECK(last_wide == wide, "%s: want cblas_xerbla%s", what, wide ? "_64" : "");
  CHECK(RowMajorStrg == 0, "%s: RowMajorStrg left at %d", what, RowMajorStrg);
  last_info = last_flag = last_wide = -1;
}
static void expect(const char *what, int info, int flag) { expect_from(what, info, flag, 0); }

int main(void) {
  float a[64] = {0}, b[64] = {0}, c[64] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("row-major m", 5, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, -1, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("row-major n", 4, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 4, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  expect("row-major lda", 11, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 5, 2, 1.0f, a, 2, b, 4, 0.0f, c, 5);
  expect("row-major ldb", 9, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, -1, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("row-major k", 6, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 4, 2, 1.0f, a, 2, b, 4, 0.0f, c, 3);
  expect("row-major ldc", 14, 1);
  cblas_sgemm(CblasRowMajor, (enum CBLAS_TRANSPOSE)0, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("row-major transa", 2, 1);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("column-major m", 4, 0);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 4, 2, 2, 1.0f, a, 3, b, 2, 0.0f, c, 4);
  expect("column-major lda", 9, 0);
  cblas_sgemm((CBLAS_LAYOUT)100, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("layout", 1, 0);
  cblas_sgemm_batch_strided(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, 4, b, 2, 4, 0.0f, c, 2,
                            4, 1);
  expect("batch, row-major m", 4, 0);
  cblas_sgemm_64(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect_from("cblas_sgemm_64, row-major m", 5, 1, 1);
  cblas_sgemm_64(CblasColMajor, CblasNoTrans, CblasNoTrans, 4, 2, 2, 1.0f, a, 3, b, 2, 0.0f, c, 4);
  expect_from("cblas_sgemm_64, column-major lda", 9, 0, 1);
  cblas_sgemm64_(CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  expect("cblas_sgemm64_ (OpenBLAS's name), row-major m", 5, 1);
  long long m = -1, two = 2;
  float one = 1.0f, zero = 0.0f;
  sgemm_64_("N", "N", &m, &two, &two, &one, a, &two, b, &two, &zero, c, &two);
  CHECK(last_fortran64 == 3, "sgemm_64_ m: want 3 through xerbla_64_, got %lld", last_fortran64);
  if (failures) {
    printf("%d failures\n", failures);
    return 1;
  }
  printf("ok: cblas_xerbla as the reference CBLAS calls it\n");
  return 0;
}
