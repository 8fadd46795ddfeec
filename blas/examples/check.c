/* Checks libsgemm_blas from C: cblas_sgemm and sgemm_ against a double-precision loop on odd
 * shapes, both layouts and every transpose pair, with padded leading dimensions whose padding
 * must survive; cblas_sgemm_batch_strided likewise, member by member, gaps left alone; the error exits with their reference numbers and C untouched (through this
 * program's own cblas_xerbla and xerbla_, which must take the library's place); and calls
 * from several threads at once. Exit code 0 when everything holds. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sgemm_blas.h"

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* The handlers the library must call instead of its own. */
static int last_cblas = -1, last_fortran = -1;
static char last_routine[32];
void cblas_xerbla(int p, const char *rout, const char *form, ...) {
  (void)form;
  last_cblas = p;
  snprintf(last_routine, sizeof last_routine, "%s", rout);
}
void xerbla_(const char *srname, const int *info, size_t len) {
  last_fortran = *info;
  snprintf(last_routine, sizeof last_routine, "%.*s", (int)len, srname);
}

static float rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return (float)((*s >> 8) % 2001) / 1000.0f - 1.0f; }

/* Element (i, j) of a matrix stored in `order` with leading dimension ld. */
static size_t at(int row_major, int ld, int i, int j) { return row_major ? (size_t)i * ld + j : (size_t)j * ld + i; }

/* One product through cblas_sgemm (or sgemm_ for a column-major call when `fortran`). */
static void one(int row_major, int ta, int tb, int m, int n, int k, int fortran) {
  unsigned s = 7u * m + 13u * n + k;
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int lda = (row_major ? ac : ar) + 3, ldb = (row_major ? bc : br) + 2, ldc = (row_major ? n : m) + 1;
  size_t alen = (size_t)lda * (row_major ? ar : ac), blen = (size_t)ldb * (row_major ? br : bc);
  size_t clen = (size_t)ldc * (row_major ? m : n);
  float *a = malloc(alen * 4), *b = malloc(blen * 4), *c = malloc(clen * 4), *c0 = malloc(clen * 4);
  for (size_t i = 0; i < alen; i++) a[i] = rnd(&s);
  for (size_t i = 0; i < blen; i++) b[i] = rnd(&s);
  for (size_t i = 0; i < clen; i++) c0[i] = c[i] = rnd(&s);
  float alpha = 0.75f, beta = -1.5f;
  if (fortran) {
    char tra = ta ? 'T' : 'N', trb = tb ? 'T' : 'N';
    sgemm_(&tra, &trb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
  } else {
    cblas_sgemm(row_major ? CblasRowMajor : CblasColMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  double worst = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0, mag = 0;
      for (int p = 0; p < k; p++) {
        double x = (double)a[ta ? at(row_major, lda, p, i) : at(row_major, lda, i, p)] *
                   (double)b[tb ? at(row_major, ldb, j, p) : at(row_major, ldb, p, j)];
        sum += x; mag += fabs(x);
      }
      double want = alpha * sum + beta * (double)c0[at(row_major, ldc, i, j)];
      double scale = fabs(alpha) * mag + fabs(beta * (double)c0[at(row_major, ldc, i, j)]);
      double err = fabs(c[at(row_major, ldc, i, j)] - want) / (scale > 0 ? scale : 1);
      if (err > worst) worst = err;
    }
  CHECK(worst <= 16 * 1.1920929e-7, "%s %s %c%c %dx%dx%d: error %.3g", fortran ? "sgemm_" : "cblas_sgemm",
        row_major ? "row" : "col", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, worst);
  /* The padding of C is never written. */
  for (int outer = 0; outer < (row_major ? m : n); outer++)
    for (int x = row_major ? n : m; x < ldc; x++)
      CHECK(c[(size_t)outer * ldc + x] == c0[(size_t)outer * ldc + x], "padding of C written");
  free(a); free(b); free(c); free(c0);
}

/* A bad call must report `want` and leave C alone. */
static void bad_cblas(int want, int layout, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
  float a[64] = {0}, b[64] = {0}, c[64];
  for (int i = 0; i < 64; i++) c[i] = (float)i;
  last_cblas = -1;
  cblas_sgemm(layout, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  CHECK(last_cblas == want && strcmp(last_routine, "cblas_sgemm") == 0, "cblas error: want %d, got %d (%s)", want,
        last_cblas, last_routine);
  for (int i = 0; i < 64; i++) CHECK(c[i] == (float)i, "C written on an error exit");
}

static void bad_fortran(int want, char ta, char tb, int m, int n, int k, int lda, int ldb, int ldc) {
  float a[64] = {0}, b[64] = {0}, c[64], one = 1, zero = 0;
  for (int i = 0; i < 64; i++) c[i] = (float)i;
  last_fortran = -1;
  sgemm_(&ta, &tb, &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc);
  CHECK(last_fortran == want && strncmp(last_routine, "SGEMM", 5) == 0, "sgemm_ error: want %d, got %d (%s)", want,
        last_fortran, last_routine);
  for (int i = 0; i < 64; i++) CHECK(c[i] == (float)i, "C written on an error exit");
}

/* A strided batch through cblas_sgemm_batch_strided: every member against the double loop, the
 * gaps between members of C (and C's padding) untouched; A broadcast (stride 0) when `bcast`. */
static void batch(int row_major, int ta, int tb, int m, int n, int k, int count, int bcast) {
  unsigned s = 11u * m + 5u * n + 3u * k + (unsigned)count;
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int lda = (row_major ? ac : ar) + 1, ldb = (row_major ? bc : br) + 2, ldc = (row_major ? n : m) + 3;
  int asize = lda * (row_major ? ar : ac), bsize = ldb * (row_major ? br : bc), csize = ldc * (row_major ? m : n);
  int sa = bcast ? 0 : asize + 5, sb = bsize + 1, sc = csize + 7;
  size_t alen = (size_t)sa * (count - 1) + asize, blen = (size_t)sb * (count - 1) + bsize;
  size_t clen = (size_t)sc * (count - 1) + csize;
  float *a = malloc(alen * 4), *b = malloc(blen * 4), *c = malloc(clen * 4), *c0 = malloc(clen * 4);
  for (size_t i = 0; i < alen; i++) a[i] = rnd(&s);
  for (size_t i = 0; i < blen; i++) b[i] = rnd(&s);
  for (size_t i = 0; i < clen; i++) c0[i] = c[i] = rnd(&s);
  float alpha = -1.25f, beta = 0.5f;
  last_cblas = -1;
  cblas_sgemm_batch_strided(row_major ? CblasRowMajor : CblasColMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc,
                            sc, count);
  CHECK(last_cblas == -1, "a valid batch reported error %d", last_cblas);
  double worst = 0;
  for (int z = 0; z < count; z++) {
    const float *az = a + (size_t)sa * z, *bz = b + (size_t)sb * z;
    float *cz = c + (size_t)sc * z, *c0z = c0 + (size_t)sc * z;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double sum = 0, mag = 0;
        for (int p = 0; p < k; p++) {
          double x = (double)az[ta ? at(row_major, lda, p, i) : at(row_major, lda, i, p)] *
                     (double)bz[tb ? at(row_major, ldb, j, p) : at(row_major, ldb, p, j)];
          sum += x; mag += fabs(x);
        }
        double old = (double)c0z[at(row_major, ldc, i, j)];
        double err = fabs(cz[at(row_major, ldc, i, j)] - (alpha * sum + beta * old));
        double scale = fabs(alpha) * mag + fabs(beta * old);
        err /= scale > 0 ? scale : 1;
        if (err > worst) worst = err;
      }
    /* Everything of C outside the member's m x n block: its padding and the gap after it. */
    for (int x = 0; x < sc && (size_t)sc * z + x < clen; x++) {
      int outer = x / ldc, inner = x % ldc;
      int inside = outer < (row_major ? m : n) && inner < (row_major ? n : m);
      if (!inside) CHECK(cz[x] == c0z[x], "batch member %d: element %d outside its C written", z, x);
    }
  }
  CHECK(worst <= 16 * 1.1920929e-7, "cblas_sgemm_batch_strided %s %c%c %d*%dx%dx%d%s: error %.3g",
        row_major ? "row" : "col", ta ? 'T' : 'N', tb ? 'T' : 'N', count, m, n, k, bcast ? " (A broadcast)" : "", worst);
  free(a); free(b); free(c); free(c0);
}

/* A bad batch must report `want` (cblas_sgemm_batch_strided's numbering) and leave C alone. */
static void bad_batch(int want, int m, int n, int k, int lda, int sa, int ldb, int sb, int ldc, int sc, int count) {
  float a[64] = {0}, b[64] = {0}, c[64];
  for (int i = 0; i < 64; i++) c[i] = (float)i;
  last_cblas = -1;
  cblas_sgemm_batch_strided(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, 0.0f,
                            c, ldc, sc, count);
  CHECK(last_cblas == want && strcmp(last_routine, "cblas_sgemm_batch_strided") == 0,
        "batch error: want %d, got %d (%s)", want, last_cblas, last_routine);
  for (int i = 0; i < 64; i++) CHECK(c[i] == (float)i, "C written on a batch error exit");
}

static void *worker(void *arg) {
  int id = (int)(size_t)arg;
  for (int r = 0; r < 4; r++) one(id % 2, id % 3 == 0, r % 2, 37 + id, 29 + r, 41, 0);
  return NULL;
}

int main(void) {
  int shapes[][3] = {{1, 1, 1}, {2, 3, 4}, {17, 9, 33}, {64, 64, 64}, {65, 31, 127}, {130, 7, 1}, {3, 300, 5}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int row = 0; row < 2; row++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          one(row, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0);
          if (!row) one(0, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1);
        }

  /* cblas_sgemm's error exits, numbered as the reference CBLAS numbers them. */
  bad_cblas(1, 100, CblasNoTrans, CblasNoTrans, 2, 2, 2, 2, 2, 2);
  bad_cblas(2, CblasColMajor, 110, CblasNoTrans, 2, 2, 2, 2, 2, 2);
  bad_cblas(3, CblasRowMajor, CblasNoTrans, 0, 2, 2, 2, 2, 2, 2);
  bad_cblas(4, CblasColMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 2, 2, 2);
  bad_cblas(4, CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, 2, 2, 2, 2, 2);
  bad_cblas(5, CblasRowMajor, CblasNoTrans, CblasNoTrans, -1, -1, 2, 2, 2, 2); /* the reference checks n first */
  bad_cblas(6, CblasColMajor, CblasNoTrans, CblasNoTrans, 2, 2, -1, 2, 2, 2);
  bad_cblas(9, CblasColMajor, CblasNoTrans, CblasNoTrans, 4, 2, 2, 3, 2, 4);
  bad_cblas(9, CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 4, 3, 2, 2); /* row-major A: lda >= k */
  bad_cblas(11, CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 5, 2, 2, 4, 5);
  bad_cblas(14, CblasColMajor, CblasNoTrans, CblasNoTrans, 4, 2, 2, 4, 2, 3);
  bad_cblas(14, CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 4, 2, 2, 4, 3);

  /* sgemm_'s, numbered as the reference SGEMM numbers them. */
  bad_fortran(1, 'X', 'N', 2, 2, 2, 2, 2, 2);
  bad_fortran(2, 'N', 'X', 2, 2, 2, 2, 2, 2);
  bad_fortran(3, 'N', 'N', -1, 2, 2, 2, 2, 2);
  bad_fortran(4, 'N', 'N', 2, -1, 2, 2, 2, 2);
  bad_fortran(5, 'N', 'N', 2, 2, -1, 2, 2, 2);
  bad_fortran(8, 'N', 'N', 4, 2, 2, 3, 2, 4);
  bad_fortran(10, 'N', 'N', 2, 2, 4, 2, 3, 2);
  bad_fortran(13, 'N', 'N', 4, 2, 2, 4, 2, 3);

  /* Strided batches: both layouts, every transpose pair, odd shapes, A broadcast. */
  int batches[][4] = {{3, 5, 7, 4}, {17, 9, 33, 3}, {64, 64, 64, 5}, {1, 40, 9, 2}, {33, 1, 17, 6}};
  for (size_t s = 0; s < sizeof batches / sizeof batches[0]; s++)
    for (int row = 0; row < 2; row++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
          batch(row, ta, tb, batches[s][0], batches[s][1], batches[s][2], batches[s][3], (ta + tb + row) % 2);
  /* Its error exits: the single product's checks at their places in this argument list, then the
   * strides and the count; a stride of C that makes members share an element is stridec's. */
  bad_batch(4, -1, 2, 2, 2, 4, 2, 4, 2, 4, 2);
  bad_batch(9, 4, 2, 2, 3, 8, 2, 4, 4, 8, 2);
  bad_batch(12, 2, 2, 4, 2, 8, 3, 8, 2, 4, 2);
  bad_batch(16, 4, 2, 2, 4, 8, 2, 4, 3, 8, 2);
  bad_batch(10, 2, 2, 2, 2, -1, 2, 4, 2, 4, 2);
  bad_batch(13, 2, 2, 2, 2, 4, 2, -4, 2, 4, 2);
  bad_batch(17, 2, 2, 2, 2, 4, 2, 4, 2, -4, 2);
  bad_batch(18, 2, 2, 2, 2, 4, 2, 4, 2, 4, -1);
  bad_batch(17, 2, 2, 2, 2, 4, 2, 4, 2, 3, 2); /* member 1 of C starts inside member 0 */
  bad_batch(17, 2, 2, 2, 2, 4, 2, 4, 2, 0, 2);
  last_cblas = -1;
  cblas_sgemm_batch_strided(CblasColMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, NULL, 2, 4, NULL, 2, 4, 0.0f,
                            NULL, 2, 4, 0);
  CHECK(last_cblas == -1, "an empty batch reported error %d", last_cblas);

  /* alpha == 0: A and B are not read (null here); beta == 0: C is overwritten, NaN ignored. */
  float c[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 2, 3, 4, 0.0f, NULL, 2, NULL, 4, 0.0f, c, 2);
  for (int i = 0; i < 6; i++) CHECK(c[i] == 0.0f, "alpha = beta = 0 must give zeros");

  /* The ILP64 entries give the LP64 ones' bits, and take sizes past 2^31 to their checks. */
  last_cblas = last_fortran = -1;
  {
    float a[35], b[42], c32[30] = {0}, c64[30] = {1}, cf[30] = {2}, ccol[30] = {3};
    unsigned s = 5;
    for (int i = 0; i < 35; i++) a[i] = rnd(&s);
    for (int i = 0; i < 42; i++) b[i] = rnd(&s);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 5, 6, 7, 1.5f, a, 7, b, 7, 0.0f, c32, 6);
    cblas_sgemm64_(CblasRowMajor, CblasNoTrans, CblasTrans, 5, 6, 7, 1.5f, a, 7, b, 7, 0.0f, c64, 6);
    long long m = 5, n = 6, k = 7, lda = 5, ldb = 7, ldc = 5;
    float alpha = 1.5f, beta = 0.0f;
    sgemm_64_("N", "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, cf, &ldc);
    CHECK(memcmp(c32, c64, sizeof c32) == 0, "cblas_sgemm64_ differs from cblas_sgemm");
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 5, 6, 7, 1.5f, a, 5, b, 7, 0.0f, ccol, 5);
    CHECK(memcmp(ccol, cf, sizeof cf) == 0, "sgemm_64_ differs from cblas_sgemm");
    CHECK(last_cblas == -1 && last_fortran == -1, "a valid ILP64 call reported an error");
    last_cblas = -1;
    cblas_sgemm64_(CblasColMajor, CblasNoTrans, CblasNoTrans, 1LL << 33, 2, 2, 1.0f, a, 5, b, 2, 0.0f, c64, 1LL << 33);
    CHECK(last_cblas == 9, "cblas_sgemm64_ with m = 2^33 and lda = 5: want 9, got %d", last_cblas);
    /* Sizes whose spans no address space holds: refused without touching anything. */
    float before[30];
    memcpy(before, c64, sizeof before);
    long long huge = 1LL << 40;
    cblas_sgemm64_(CblasColMajor, CblasNoTrans, CblasNoTrans, huge, huge, 1, 1.0f, a, huge, b, 1, 0.0f, c64, huge);
    CHECK(memcmp(before, c64, sizeof before) == 0, "a call spanning more than memory wrote C");
  }

  /* Several threads at once. */
  pthread_t threads[8];
  for (int t = 0; t < 8; t++) pthread_create(&threads[t], NULL, worker, (void *)(size_t)t);
  for (int t = 0; t < 8; t++) pthread_join(threads[t], NULL);

  printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
