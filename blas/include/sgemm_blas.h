/* sgemm_blas.h: the SGEMM entry points of libsgemm_blas (the `sgemm-blas` crate).
 *
 * The same ABI as the reference BLAS and CBLAS (32-bit integers), so a program written
 * against <cblas.h> or the Fortran `SGEMM` links against this library unchanged; this header
 * is for programs that want the declarations without a system cblas.h (do not include both).
 * Environment variables (SGEMM_BACKEND, SGEMM_PRECISION, SGEMM_CPU_THREADS,
 * SGEMM_GPU_MIN_WORK, SGEMM_VERBOSE): see the README.
 */
#ifndef SGEMM_BLAS_H
#define SGEMM_BLAS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };
typedef enum CBLAS_ORDER CBLAS_LAYOUT;

/* C = alpha * op(A) * op(B) + beta * C; a bad argument is reported through cblas_xerbla with
 * the reference CBLAS's numbering (layout 1 ... ldc 14) and C is left untouched. */
void cblas_sgemm(CBLAS_LAYOUT layout, enum CBLAS_TRANSPOSE transa, enum CBLAS_TRANSPOSE transb,
                 int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);

/* MKL's strided batch: C_i = alpha * op(A_i) * op(B_i) + beta * C_i for i < batch_size, member i
 * of each operand i * stride elements after its pointer (stride 0: the same A or B for every
 * product). A bad argument is reported through cblas_xerbla with this routine's numbering
 * (layout 1, lda 9, stridea 10, ldb 12, strideb 13, ldc 16, stridec 17, batch_size 18); a
 * stridec that makes members of C share an element is reported as 17. */
void cblas_sgemm_batch_strided(CBLAS_LAYOUT layout, enum CBLAS_TRANSPOSE transa, enum CBLAS_TRANSPOSE transb,
                               int m, int n, int k, float alpha, const float *a, int lda, int stridea,
                               const float *b, int ldb, int strideb, float beta, float *c, int ldc,
                               int stridec, int batch_size);

/* The Fortran SGEMM (every argument by reference, column-major); also exported as sgemm and
 * SGEMM. A bad argument is reported through xerbla_ with the reference numbering (1 ... 13). */
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc);

/* The same with 64-bit integers (ILP64), under the 64_ suffix of ILP64 BLAS builds (also
 * exported as scipy_cblas_sgemm64_ and scipy_sgemm_64_, the names numpy's and SciPy's PyPI
 * wheels call). */
void cblas_sgemm64_(CBLAS_LAYOUT layout, enum CBLAS_TRANSPOSE transa, enum CBLAS_TRANSPOSE transb,
                    long long m, long long n, long long k, float alpha, const float *a, long long lda,
                    const float *b, long long ldb, float beta, float *c, long long ldc);
void sgemm_64_(const char *transa, const char *transb, const long long *m, const long long *n,
               const long long *k, const float *alpha, const float *a, const long long *lda,
               const float *b, const long long *ldb, const float *beta, float *c, const long long *ldc);
/* cblas_sgemm64_ under the _64 suffix of the reference CBLAS's 64-bit-integer routines. */
void cblas_sgemm_64(CBLAS_LAYOUT layout, enum CBLAS_TRANSPOSE transa, enum CBLAS_TRANSPOSE transb,
                    long long m, long long n, long long k, float alpha, const float *a, long long lda,
                    const float *b, long long ldb, float beta, float *c, long long ldc);

/* The error handlers the library calls when the program (or a BLAS loaded beside it) defines
 * them; where none is defined it prints the reference messages and returns. The library
 * defines none of them. Where the program has the reference CBLAS's global RowMajorStrg, a
 * row-major call's bad m, n, lda or ldb is reported as the reference reports it (at its place
 * in the column-major call, with RowMajorStrg set while the handler runs). */
void xerbla_(const char *srname, const int *info, size_t srname_len);
void cblas_xerbla(int p, const char *rout, const char *form, ...);
/* The handlers of the reference BLAS's and CBLAS's 64-bit-integer builds: sgemm_64_ (and
 * scipy_sgemm_64_) report through xerbla_64_ first, cblas_sgemm_64 through cblas_xerbla_64
 * first, where the program defines them. */
void xerbla_64_(const char *srname, const long long *info, size_t srname_len);
void cblas_xerbla_64(long long p, const char *rout, const char *form, ...);

#ifdef __cplusplus
}
#endif

#endif /* SGEMM_BLAS_H */
