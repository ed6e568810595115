/* Plain-C kernels for small matrices (every dimension <= CDYN__SMALL).
 *
 * At the sizes of a slider crank or a ship model a BLAS/LAPACK call costs
 * more in argument checking and dispatch than in arithmetic; these loops do
 * the same operations with the same argument conventions and the same
 * failure reports (info), and linalg.c sends small problems here. They are
 * tested against the Fortran routines in tests/test_linalg.c.
 *
 * A matrix entry op(A)(i, j) is read through a row and a column stride, so
 * one loop serves A and its transpose.
 */
#include "linalg.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* Strides of op(A) for A stored column-major with leading dimension lda. */
static void strides(char trans, int lda, size_t *row, size_t *col)
{
    *row = trans == 'N' ? 1 : (size_t)lda;
    *col = trans == 'N' ? (size_t)lda : 1;
}

/* BLAS semantics: beta = 0 overwrites without reading (NaN in C is ignored). */
static double scaled(double beta, double c) { return beta == 0.0 ? 0.0 : beta * c; }

void cdyn__small_gemm(char transa, char transb, int m, int n, int k, double alpha,
                      const double *A, int lda, const double *B, int ldb, double beta,
                      double *C, int ldc)
{
    if (transa == 'T' && transb == 'N' && alpha != 0.0) {
        /* C = alpha A^T B + beta C: dot products of contiguous columns (the
         * general loop below in the same order, with unit strides) */
        for (int j = 0; j < n; ++j) {
            const double *b = B + (size_t)j * ldb;
            for (int i = 0; i < m; ++i) {
                const double *a = A + (size_t)i * lda;
                double sum = 0.0;
                for (int l = 0; l < k; ++l) sum += a[l] * b[l];
                double *cij = C + i + (size_t)j * ldc;
                *cij = scaled(beta, *cij) + alpha * sum;
            }
        }
        return;
    }
    size_t ar, ac, br, bc;
    strides(transa, lda, &ar, &ac);
    strides(transb, ldb, &br, &bc);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double sum = 0.0;
            if (alpha != 0.0)
                for (int l = 0; l < k; ++l) sum += A[i * ar + l * ac] * B[l * br + j * bc];
            double *cij = C + i + (size_t)j * ldc;
            *cij = scaled(beta, *cij) + (alpha != 0.0 ? alpha * sum : 0.0);
        }
}

void cdyn__small_gemv(char trans, int m, int n, double alpha, const double *A, int lda,
                      const double *x, double beta, double *y)
{
    size_t ar, ac;
    strides(trans, lda, &ar, &ac);
    int rows = trans == 'N' ? m : n, cols = trans == 'N' ? n : m;
    for (int i = 0; i < rows; ++i) {
        double sum = 0.0;
        if (alpha != 0.0)
            for (int l = 0; l < cols; ++l) sum += A[i * ar + l * ac] * x[l];
        y[i] = scaled(beta, y[i]) + (alpha != 0.0 ? alpha * sum : 0.0);
    }
}

void cdyn__small_syrk(char uplo, char trans, int n, int k, double alpha, const double *A,
                      int lda, double beta, double *C, int ldc)
{
    size_t ar, ac; /* op(A) is n x k */
    strides(trans, lda, &ar, &ac);
    for (int j = 0; j < n; ++j) {
        int lo = uplo == 'L' ? j : 0, hi = uplo == 'L' ? n : j + 1;
        for (int i = lo; i < hi; ++i) {
            double sum = 0.0;
            if (alpha != 0.0)
                for (int l = 0; l < k; ++l) sum += A[i * ar + l * ac] * A[j * ar + l * ac];
            double *cij = C + i + (size_t)j * ldc;
            *cij = scaled(beta, *cij) + (alpha != 0.0 ? alpha * sum : 0.0);
        }
    }
}

/* Reciprocals of the diagonal of a dim x dim triangle (T(i, i) = T[i*step]),
 * computed once so the substitutions below multiply instead of chaining
 * divisions; LAPACK's Cholesky scales by the reciprocal in the same way. */
static void reciprocal_diagonal(int dim, const double *T, size_t step, double *inv)
{
    for (int i = 0; i < dim; ++i) inv[i] = 1.0 / T[i * step];
}

/* Solve T x = alpha x in place for the dim x dim triangle T(i, j) =
 * T[i*tr + j*tc] (lower or upper; inv = reciprocal diagonal, NULL for a unit
 * diagonal); x has stride incx. When the columns of T are contiguous the
 * column (axpy) form runs, otherwise the row (dot) form: both walk memory
 * in order. */
static void triangular_solve(int dim, const double *T, size_t tr, size_t tc, int lower,
                             const double *inv, double alpha, double *x, size_t incx)
{
    if (alpha != 1.0)
        for (int i = 0; i < dim; ++i) x[i * incx] *= alpha;
    if (tr == 1 && incx == 1) {
        if (lower) {
            for (int l = 0; l < dim; ++l) {
                const double *col = T + l * tc;
                double xl = inv ? x[l] * inv[l] : x[l];
                x[l] = xl;
                for (int i = l + 1; i < dim; ++i) x[i] -= col[i] * xl;
            }
        } else {
            for (int l = dim - 1; l >= 0; --l) {
                const double *col = T + l * tc;
                double xl = inv ? x[l] * inv[l] : x[l];
                x[l] = xl;
                for (int i = 0; i < l; ++i) x[i] -= col[i] * xl;
            }
        }
        return;
    }
    if (lower) {
        for (int i = 0; i < dim; ++i) {
            double sum = x[i * incx];
            for (int l = 0; l < i; ++l) sum -= T[i * tr + l * tc] * x[l * incx];
            x[i * incx] = inv ? sum * inv[i] : sum;
        }
    } else {
        for (int i = dim - 1; i >= 0; --i) {
            double sum = x[i * incx];
            for (int l = i + 1; l < dim; ++l) sum -= T[i * tr + l * tc] * x[l * incx];
            x[i * incx] = inv ? sum * inv[i] : sum;
        }
    }
}

void cdyn__small_trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha,
                      const double *A, int lda, double *B, int ldb)
{
    if (alpha == 0.0) { /* as BLAS: X = 0, B not read */
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) B[i + (size_t)j * ldb] = 0.0;
        return;
    }
    size_t tr, tc; /* strides of op(A) */
    strides(transa, lda, &tr, &tc);
    int lower = (uplo == 'L') != (transa == 'T'), dim = side == 'L' ? m : n;
    double inv[CDYN__SMALL_VECTOR]; /* >= CDYN__SMALL: one vector goes up to that size */
    if (diag != 'U') reciprocal_diagonal(dim, A, (size_t)lda + 1, inv);
    const double *d = diag == 'U' ? NULL : inv;
    if (side == 'L') { /* op(A) X = alpha B, one column of B at a time */
        for (int j = 0; j < n; ++j)
            triangular_solve(m, A, tr, tc, lower, d, alpha, B + (size_t)j * ldb, 1);
    } else { /* X op(A) = alpha B: op(A)^T x = alpha b for each row of B */
        for (int i = 0; i < m; ++i)
            triangular_solve(n, A, tc, tr, !lower, d, alpha, B + i, (size_t)ldb);
    }
}

int cdyn__small_potrf(int n, double *A, int lda)
{
    /* right-looking: scale column j, then update the trailing lower
     * triangle column by column (contiguous inner loops) */
    for (int j = 0; j < n; ++j) {
        double *col = A + (size_t)j * lda;
        double d = col[j];
        if (!(d > 0.0)) return j + 1; /* also catches NaN */
        double ljj = sqrt(d), scale = 1.0 / ljj;
        col[j] = ljj;
        for (int i = j + 1; i < n; ++i) col[i] *= scale;
        for (int k = j + 1; k < n; ++k) {
            double *ck = A + (size_t)k * lda, lkj = col[k];
            for (int i = k; i < n; ++i) ck[i] -= col[i] * lkj;
        }
    }
    return 0;
}

void cdyn__small_potrs(int n, int nrhs, const double *L, int ldl, double *B, int ldb)
{
    double inv[CDYN__SMALL];
    reciprocal_diagonal(n, L, (size_t)ldl + 1, inv);
    for (int j = 0; j < nrhs; ++j) {
        double *b = B + (size_t)j * ldb;
        triangular_solve(n, L, 1, (size_t)ldl, 1, inv, 1.0, b, 1); /* L y = b */
        triangular_solve(n, L, (size_t)ldl, 1, 0, inv, 1.0, b, 1); /* L^T x = y */
    }
}

double cdyn__small_spd_cond(int n, const double *L, int ldl, double *work)
{
    /* cond_2(A) <= tr(A) tr(A^{-1}) = ||L||_F^2 ||L^{-1}||_F^2 (both traces
     * bound the extreme eigenvalues); column j of L^{-1} is zero above row
     * j and solves the trailing triangle against e_1 */
    if (n == 1) /* exactly 1; a zero or non-finite pivot counts as singular */
        return L[0] != 0.0 && isfinite(L[0]) ? 1.0 : INFINITY;
    double tr = 0.0, tr_inv = 0.0, inv[CDYN__SMALL];
    reciprocal_diagonal(n, L, (size_t)ldl + 1, inv);
    for (int j = 0; j < n; ++j) {
        const double *corner = L + j + (size_t)j * ldl;
        for (int i = 0; i < n - j; ++i) {
            tr += corner[i] * corner[i];
            work[i] = i == 0 ? 1.0 : 0.0;
        }
        triangular_solve(n - j, corner, 1, (size_t)ldl, 1, inv + j, 1.0, work, 1);
        for (int i = 0; i < n - j; ++i) tr_inv += work[i] * work[i];
    }
    double cond = tr * tr_inv;
    return cond == cond ? cond : INFINITY; /* NaN (a zero pivot) counts as singular */
}

int cdyn__small_getrf(int n, double *A, int lda, int *ipiv)
{
    int info = 0;
    for (int j = 0; j < n; ++j) {
        double *col = A + (size_t)j * lda;
        int p = j;
        for (int i = j + 1; i < n; ++i)
            if (fabs(col[i]) > fabs(col[p])) p = i;
        ipiv[j] = p + 1;
        if (col[p] != 0.0) {
            if (p != j)
                for (int k = 0; k < n; ++k) {
                    double *row = A + (size_t)k * lda, tmp = row[j];
                    row[j] = row[p];
                    row[p] = tmp;
                }
            if (fabs(col[j]) >= DBL_MIN) { /* as LAPACK: reciprocal unless it overflows */
                double scale = 1.0 / col[j];
                for (int i = j + 1; i < n; ++i) col[i] *= scale;
            } else {
                for (int i = j + 1; i < n; ++i) col[i] /= col[j];
            }
        } else if (info == 0) {
            info = j + 1;
        }
        for (int k = j + 1; k < n; ++k) {
            double *ck = A + (size_t)k * lda, ujk = ck[j];
            for (int i = j + 1; i < n; ++i) ck[i] -= col[i] * ujk;
        }
    }
    return info;
}

void cdyn__small_getrs(char trans, int n, int nrhs, const double *LU, int ldlu,
                       const int *ipiv, double *B, int ldb)
{
    double inv[CDYN__SMALL_VECTOR]; /* >= CDYN__SMALL: one vector goes up to that size */
    reciprocal_diagonal(n, LU, (size_t)ldlu + 1, inv);
    size_t ld = (size_t)ldlu;
    for (int j = 0; j < nrhs; ++j) {
        double *b = B + (size_t)j * ldb;
        if (trans == 'N') { /* P L U x = b */
            for (int i = 0; i < n; ++i) {
                double tmp = b[i];
                b[i] = b[ipiv[i] - 1];
                b[ipiv[i] - 1] = tmp;
            }
            triangular_solve(n, LU, 1, ld, 1, NULL, 1.0, b, 1);
            triangular_solve(n, LU, 1, ld, 0, inv, 1.0, b, 1);
        } else { /* U^T L^T P^T x = b */
            triangular_solve(n, LU, ld, 1, 1, inv, 1.0, b, 1);
            triangular_solve(n, LU, ld, 1, 0, NULL, 1.0, b, 1);
            for (int i = n - 1; i >= 0; --i) {
                double tmp = b[i];
                b[i] = b[ipiv[i] - 1];
                b[ipiv[i] - 1] = tmp;
            }
        }
    }
}

double cdyn__small_gecon(int n, const double *LU, int ldlu, double anorm, double *work)
{
    /* exact ||A^{-1}||_1: A^{-1} = U^{-1} L^{-1} P^T has the columns of
     * (LU)^{-1} in another order, so the pivots do not matter */
    double inv[CDYN__SMALL], inv_norm = 0.0;
    reciprocal_diagonal(n, LU, (size_t)ldlu + 1, inv);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) work[i] = i == j ? 1.0 : 0.0;
        triangular_solve(n, LU, 1, (size_t)ldlu, 1, NULL, 1.0, work, 1);
        triangular_solve(n, LU, 1, (size_t)ldlu, 0, inv, 1.0, work, 1);
        double sum = 0.0;
        for (int i = 0; i < n; ++i) sum += fabs(work[i]);
        if (!(sum <= inv_norm)) inv_norm = sum; /* NaN or Inf propagates */
    }
    if (n == 0) return 1.0;
    if (!(anorm > 0.0) || !(inv_norm < INFINITY)) return 0.0;
    return 1.0 / (anorm * inv_norm);
}
