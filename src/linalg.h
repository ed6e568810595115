/* Internal linear-algebra layer: thin wrappers over the Fortran BLAS and
 * LAPACK symbols, so the method code reads like its equations.
 *
 * How cdyn calls LAPACK: directly through the Fortran symbols (dgeqp3_, ...),
 * every argument by pointer, with the hidden CHARACTER length arguments that
 * gfortran (>= 8) appends passed explicitly as size_t 1. No LAPACKE, no
 * CBLAS: nothing allocates behind our back. Routines that take a workspace
 * get it from the caller; the *_lwork() queries (lwork = -1) are called once
 * at create time. Sizes are int, as reference LAPACK takes them.
 *
 * Matrices are column-major with a leading dimension. Wrappers that can fail
 * return LAPACK's info (0 = success, > 0 = numerical failure such as a zero
 * pivot, < 0 = bad argument, i.e. a bug in cdyn).
 */
#ifndef CDYN_LINALG_H
#define CDYN_LINALG_H

/* --- BLAS ------------------------------------------------------------- */

/* C = alpha op(A) op(B) + beta C; op = 'N' or 'T'. C is m x n, k inner. */
void cdyn__gemm(char transa, char transb, int m, int n, int k, double alpha,
                const double *A, int lda, const double *B, int ldb, double beta, double *C,
                int ldc);

/* y = alpha op(A) x + beta y; A is m x n. */
void cdyn__gemv(char trans, int m, int n, double alpha, const double *A, int lda,
                const double *x, double beta, double *y);

/* C = alpha op(A) op(A)^T + beta C on the triangle uplo of the n x n C;
 * trans = 'N': A is n x k; 'T': A is k x n. */
void cdyn__syrk(char uplo, char trans, int n, int k, double alpha, const double *A, int lda,
                double beta, double *C, int ldc);

/* Solve op(A) X = alpha B (side 'L') or X op(A) = alpha B (side 'R') with A
 * triangular (uplo 'U'/'L', diag 'N'/'U'); B is m x n, overwritten by X. */
void cdyn__trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha,
                const double *A, int lda, double *B, int ldb);

/* --- LAPACK ----------------------------------------------------------- */

/* Column-pivoted QR A P = Q R of the m x n A (dgeqp3). jpvt (n) must be zero
 * on entry for free columns; on exit it holds 1-based pivot columns. */
int cdyn__geqp3(int m, int n, double *A, int lda, int *jpvt, double *tau, double *work,
                int lwork);
/* Optimal workspace (doubles) for cdyn__geqp3 on m x n. */
int cdyn__geqp3_lwork(int m, int n);

/* Apply Q or Q^T of a QR factorization (dormqr): C = op(Q) C (side 'L')
 * with C m x n and k reflectors. */
int cdyn__ormqr(char side, char trans, int m, int n, int k, const double *A, int lda,
                const double *tau, double *C, int ldc, double *work, int lwork);
int cdyn__ormqr_lwork(char side, char trans, int m, int n, int k);

/* Thin SVD A = U S V^T of the m x n A (dgesvd with jobu = jobvt = 'S'):
 * s (min(m,n)), U (m x min), VT (min x n). A is destroyed. */
int cdyn__gesvd(int m, int n, double *A, int lda, double *s, double *U, int ldu, double *VT,
                int ldvt, double *work, int lwork);
int cdyn__gesvd_lwork(int m, int n);
/* The same with dgesvd's jobs: 'S' (thin factor) or 'N' (not computed;
 * U or VT is then not referenced), e.g. 'N', 'N' for the values alone. */
int cdyn__gesvd_jobs(char jobu, char jobvt, int m, int n, double *A, int lda, double *s,
                     double *U, int ldu, double *VT, int ldvt, double *work, int lwork);
int cdyn__gesvd_jobs_lwork(char jobu, char jobvt, int m, int n);

/* Cholesky A = L L^T of the lower triangle (dpotrf), and its solve (dpotrs)
 * with nrhs right-hand sides. potrf returns k > 0 if the leading k x k minor
 * is not positive definite. */
int cdyn__potrf(int n, double *A, int lda);
int cdyn__potrs(int n, int nrhs, const double *L, int ldl, double *B, int ldb);

/* The inverse of the lower triangular, non-unit L in place (dtrtri; the
 * strict upper triangle is not referenced). Returns k > 0 when L_kk = 0. */
int cdyn__trtri_lower(int n, double *L, int ldl);

/* LU with partial pivoting (dgetrf), its solve (dgetrs, trans 'N'/'T') and a
 * 1-norm reciprocal condition estimate (dgecon; work 4n, iwork n; exact for
 * n <= CDYN__SMALL). */
int cdyn__getrf(int n, double *A, int lda, int *ipiv);
int cdyn__getrs(char trans, int n, int nrhs, const double *LU, int ldlu, const int *ipiv,
                double *B, int ldb);
int cdyn__gecon(int n, const double *LU, int ldlu, double anorm, double *rcond, double *work,
                int *iwork);

/* 1-norm (largest column sum) of an m x n matrix. */
double cdyn__norm1(int m, int n, const double *A, int lda);

/* --- small sizes (linalg_small.c) -------------------------------------- */

/* The wrappers above send a call whose every dimension is <= CDYN__SMALL to
 * these plain loops (same arguments, same info), which at such sizes cost
 * a fraction of a BLAS call. Declared here so the tests can compare them
 * with the Fortran routines. */
#define CDYN__SMALL 16
/* One right-hand side (a triangular solve, an LU solve or Q^T applied to a
 * single vector) goes to the plain loops up to this size: there a BLAS-2
 * call per reflector or per solve costs more than the arithmetic. */
#define CDYN__SMALL_VECTOR 32
_Static_assert(CDYN__SMALL_VECTOR >= CDYN__SMALL, "the kernels' buffers hold either size");
/* The pivoted QR (the rank decisions' kernel) goes to its plain loops up
 * to this size: LAPACK's dgeqp3 runs unblocked below 128 columns, with a
 * BLAS call per column and step. */
#define CDYN__SMALL_QR 64
_Static_assert(CDYN__SMALL_QR >= CDYN__SMALL, "the QR kernel takes every small size");
void cdyn__small_gemm(char transa, char transb, int m, int n, int k, double alpha,
                      const double *A, int lda, const double *B, int ldb, double beta,
                      double *C, int ldc);
void cdyn__small_gemv(char trans, int m, int n, double alpha, const double *A, int lda,
                      const double *x, double beta, double *y);
void cdyn__small_syrk(char uplo, char trans, int n, int k, double alpha, const double *A,
                      int lda, double beta, double *C, int ldc);
void cdyn__small_trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha,
                      const double *A, int lda, double *B, int ldb);
int cdyn__small_potrf(int n, double *A, int lda);
void cdyn__small_potrs(int n, int nrhs, const double *L, int ldl, double *B, int ldb);
int cdyn__small_getrf(int n, double *A, int lda, int *ipiv);
void cdyn__small_getrs(char trans, int n, int nrhs, const double *LU, int ldlu,
                       const int *ipiv, double *B, int ldb);
/* Exact reciprocal 1-norm condition from the LU factors; work n. */
double cdyn__small_gecon(int n, const double *LU, int ldlu, double anorm, double *work);
/* Pivoted Householder QR in dgeqp3's form (linalg_small_qr.c), m, n <=
 * CDYN__SMALL_QR; info 0. */
int cdyn__small_geqp3(int m, int n, double *A, int lda, int *jpvt, double *tau);
/* Q C, Q^T C, C Q or C Q^T with Q from k reflectors of that form (dormqr). */
void cdyn__small_ormqr(char side, char trans, int m, int n, int k, const double *A, int lda,
                       const double *tau, double *C, int ldc);
/* tr(A) tr(A^{-1}) >= cond_2(A) from the Cholesky factor (exactly 1 for
 * n = 1; Inf for a zero or non-finite pivot); work n. */
double cdyn__small_spd_cond(int n, const double *L, int ldl, double *work);

#endif /* CDYN_LINALG_H */
