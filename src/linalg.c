/* Fortran BLAS/LAPACK bindings and the thin wrappers of linalg.h. */
#include "linalg.h"

#include <math.h>
#include <stddef.h>

/* gfortran passes the length of each CHARACTER argument as a trailing
 * hidden size_t; every character argument here has length 1. */
typedef size_t fchar_len;

void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *A, const int *lda, const double *B,
            const int *ldb, const double *beta, double *C, const int *ldc, fchar_len,
            fchar_len);
void dgemv_(const char *t, const int *m, const int *n, const double *alpha, const double *A,
            const int *lda, const double *x, const int *incx, const double *beta, double *y,
            const int *incy, fchar_len);
void dsyrk_(const char *uplo, const char *t, const int *n, const int *k, const double *alpha,
            const double *A, const int *lda, const double *beta, double *C, const int *ldc,
            fchar_len, fchar_len);
void dtrsm_(const char *side, const char *uplo, const char *ta, const char *diag, const int *m,
            const int *n, const double *alpha, const double *A, const int *lda, double *B,
            const int *ldb, fchar_len, fchar_len, fchar_len, fchar_len);
void dgeqp3_(const int *m, const int *n, double *A, const int *lda, int *jpvt, double *tau,
             double *work, const int *lwork, int *info);
void dormqr_(const char *side, const char *t, const int *m, const int *n, const int *k,
             const double *A, const int *lda, const double *tau, double *C, const int *ldc,
             double *work, const int *lwork, int *info, fchar_len, fchar_len);
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *A,
             const int *lda, double *s, double *U, const int *ldu, double *VT, const int *ldvt,
             double *work, const int *lwork, int *info, fchar_len, fchar_len);
void dpotrf_(const char *uplo, const int *n, double *A, const int *lda, int *info, fchar_len);
void dtrtri_(const char *uplo, const char *diag, const int *n, double *A, const int *lda, int *info,
             fchar_len, fchar_len);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *A, const int *lda,
             double *B, const int *ldb, int *info, fchar_len);
void dgetrf_(const int *m, const int *n, double *A, const int *lda, int *ipiv, int *info);
void dgetrs_(const char *t, const int *n, const int *nrhs, const double *A, const int *lda,
             const int *ipiv, double *B, const int *ldb, int *info, fchar_len);
void dgecon_(const char *norm, const int *n, const double *A, const int *lda,
             const double *anorm, double *rcond, double *work, int *iwork, int *info,
             fchar_len);

static const int one = 1;

/* Every dimension small enough for the plain loops of linalg_small.c? */
static int small2(int a, int b) { return a <= CDYN__SMALL && b <= CDYN__SMALL; }
static int small3(int a, int b, int c) { return small2(a, b) && c <= CDYN__SMALL; }
/* ... or one vector of length <= CDYN__SMALL_VECTOR (count == 1)? */
static int one_vector(int count, int a, int b)
{
    return count == 1 && a <= CDYN__SMALL_VECTOR && b <= CDYN__SMALL_VECTOR;
}

void cdyn__gemm(char transa, char transb, int m, int n, int k, double alpha,
                const double *A, int lda, const double *B, int ldb, double beta, double *C,
                int ldc)
{
    if (m == 0 || n == 0) return;
    if (small3(m, n, k)) {
        cdyn__small_gemm(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    dgemm_(&transa, &transb, &m, &n, &k, &alpha, A, &lda, B, &ldb, &beta, C, &ldc, 1, 1);
}

void cdyn__gemv(char trans, int m, int n, double alpha, const double *A, int lda,
                const double *x, double beta, double *y)
{
    if (m == 0 || n == 0) {
        /* BLAS would leave y alone when its length is non-zero but the sum is
         * empty; scale it so the result is beta*y as the formula says. */
        int len = (trans == 'N') ? m : n;
        for (int i = 0; i < len; ++i) y[i] = (beta == 0.0) ? 0.0 : beta * y[i];
        return;
    }
    if (small2(m, n)) {
        cdyn__small_gemv(trans, m, n, alpha, A, lda, x, beta, y);
        return;
    }
    dgemv_(&trans, &m, &n, &alpha, A, &lda, x, &one, &beta, y, &one, 1);
}

void cdyn__syrk(char uplo, char trans, int n, int k, double alpha, const double *A, int lda,
                double beta, double *C, int ldc)
{
    if (n == 0) return;
    if (small2(n, k)) {
        cdyn__small_syrk(uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
        return;
    }
    dsyrk_(&uplo, &trans, &n, &k, &alpha, A, &lda, &beta, C, &ldc, 1, 1);
}

void cdyn__trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha,
                const double *A, int lda, double *B, int ldb)
{
    if (m == 0 || n == 0) return;
    if (small2(m, n) || (side == 'L' ? one_vector(n, m, m) : one_vector(m, n, n))) {
        cdyn__small_trsm(side, uplo, transa, diag, m, n, alpha, A, lda, B, ldb);
        return;
    }
    dtrsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, A, &lda, B, &ldb, 1, 1, 1, 1);
}

/* LAPACK returns the optimal workspace as a double in work[0]. */
static int lwork_from(double w) { return w < 1.0 ? 1 : (int)w; }

int cdyn__geqp3(int m, int n, double *A, int lda, int *jpvt, double *tau, double *work,
                int lwork)
{
    int info = 0;
    if (m <= CDYN__SMALL_QR && n <= CDYN__SMALL_QR)
        return cdyn__small_geqp3(m, n, A, lda, jpvt, tau);
    dgeqp3_(&m, &n, A, &lda, jpvt, tau, work, &lwork, &info);
    return info;
}

int cdyn__geqp3_lwork(int m, int n)
{
    int info = 0, query = -1, lda = m > 1 ? m : 1, jpvt = 0;
    double w = 0.0, a = 0.0, tau = 0.0;
    dgeqp3_(&m, &n, &a, &lda, &jpvt, &tau, &w, &query, &info);
    return lwork_from(w);
}

int cdyn__ormqr(char side, char trans, int m, int n, int k, const double *A, int lda,
                const double *tau, double *C, int ldc, double *work, int lwork)
{
    int info = 0;
    if (small3(m, n, k) || (side == 'L' ? one_vector(n, m, k) : one_vector(m, n, k))) {
        cdyn__small_ormqr(side, trans, m, n, k, A, lda, tau, C, ldc);
        return 0;
    }
    dormqr_(&side, &trans, &m, &n, &k, A, &lda, tau, C, &ldc, work, &lwork, &info, 1, 1);
    return info;
}

int cdyn__ormqr_lwork(char side, char trans, int m, int n, int k)
{
    int info = 0, query = -1, nq = (side == 'L') ? m : n;
    int lda = nq > 1 ? nq : 1, ldc = m > 1 ? m : 1;
    double w = 0.0, a = 0.0, tau = 0.0, c = 0.0;
    dormqr_(&side, &trans, &m, &n, &k, &a, &lda, &tau, &c, &ldc, &w, &query, &info, 1, 1);
    return lwork_from(w);
}

int cdyn__gesvd_jobs(char jobu, char jobvt, int m, int n, double *A, int lda, double *s,
                     double *U, int ldu, double *VT, int ldvt, double *work, int lwork)
{
    int info = 0;
    dgesvd_(&jobu, &jobvt, &m, &n, A, &lda, s, U, &ldu, VT, &ldvt, work, &lwork, &info, 1, 1);
    return info;
}

int cdyn__gesvd_jobs_lwork(char jobu, char jobvt, int m, int n)
{
    int info = 0, query = -1, k = m < n ? m : n;
    int lda = m > 1 ? m : 1, ldu = lda, ldvt = k > 1 ? k : 1;
    double w = 0.0, a = 0.0, s = 0.0, u = 0.0, vt = 0.0;
    dgesvd_(&jobu, &jobvt, &m, &n, &a, &lda, &s, &u, &ldu, &vt, &ldvt, &w, &query, &info, 1, 1);
    return lwork_from(w);
}

int cdyn__gesvd(int m, int n, double *A, int lda, double *s, double *U, int ldu, double *VT,
                int ldvt, double *work, int lwork)
{
    return cdyn__gesvd_jobs('S', 'S', m, n, A, lda, s, U, ldu, VT, ldvt, work, lwork);
}

int cdyn__gesvd_lwork(int m, int n) { return cdyn__gesvd_jobs_lwork('S', 'S', m, n); }

int cdyn__potrf(int n, double *A, int lda)
{
    if (n <= CDYN__SMALL) return cdyn__small_potrf(n, A, lda);
    int info = 0;
    dpotrf_("L", &n, A, &lda, &info, 1);
    return info;
}

int cdyn__trtri_lower(int n, double *L, int ldl)
{
    int info = 0;
    dtrtri_("L", "N", &n, L, &ldl, &info, 1, 1);
    return info;
}

int cdyn__potrs(int n, int nrhs, const double *L, int ldl, double *B, int ldb)
{
    if (small2(n, nrhs)) {
        cdyn__small_potrs(n, nrhs, L, ldl, B, ldb);
        return 0;
    }
    int info = 0;
    dpotrs_("L", &n, &nrhs, L, &ldl, B, &ldb, &info, 1);
    return info;
}

int cdyn__getrf(int n, double *A, int lda, int *ipiv)
{
    if (n <= CDYN__SMALL) return cdyn__small_getrf(n, A, lda, ipiv);
    int info = 0;
    dgetrf_(&n, &n, A, &lda, ipiv, &info);
    return info;
}

int cdyn__getrs(char trans, int n, int nrhs, const double *LU, int ldlu, const int *ipiv,
                double *B, int ldb)
{
    int info = 0;
    if (n == 0 || nrhs == 0) return 0;
    if (small2(n, nrhs) || one_vector(nrhs, n, n)) {
        cdyn__small_getrs(trans, n, nrhs, LU, ldlu, ipiv, B, ldb);
        return 0;
    }
    dgetrs_(&trans, &n, &nrhs, LU, &ldlu, ipiv, B, &ldb, &info, 1);
    return info;
}

int cdyn__gecon(int n, const double *LU, int ldlu, double anorm, double *rcond, double *work,
                int *iwork)
{
    if (n <= CDYN__SMALL) {
        *rcond = cdyn__small_gecon(n, LU, ldlu, anorm, work);
        return 0;
    }
    int info = 0;
    dgecon_("1", &n, LU, &ldlu, &anorm, rcond, work, iwork, &info, 1);
    return info;
}

double cdyn__norm1(int m, int n, const double *A, int lda)
{
    double best = 0.0;
    for (int j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int i = 0; i < m; ++i) sum += fabs(A[i + (size_t)j * lda]);
        if (!(sum <= best)) best = sum; /* NaN propagates */
    }
    return best;
}
