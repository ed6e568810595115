#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

void tu_rng_seed(tu_rng *r, unsigned long long seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }

double tu_uniform(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    unsigned long long x = r->s * 0x2545F4914F6CDD1Dull;
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

void tu_random(tu_rng *r, int rows, int cols, double *A, int ld)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) A[i + (size_t)j * ld] = tu_uniform(r);
}

void tu_random_spd(tu_rng *r, int n, double *A, int ld)
{
    double *B = malloc(sizeof(double) * (size_t)n * n);
    tu_random(r, n, n, B, n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            double s = (i == j) ? n : 0.0;
            for (int k = 0; k < n; ++k) s += B[i + (size_t)k * n] * B[j + (size_t)k * n];
            A[i + (size_t)j * ld] = s;
        }
    free(B);
}

void tu_matmul(int r, int k, int c, const double *A, int lda, const double *B, int ldb,
               double *C, int ldc)
{
    for (int j = 0; j < c; ++j)
        for (int i = 0; i < r; ++i) {
            double s = 0.0;
            for (int p = 0; p < k; ++p) s += A[i + (size_t)p * lda] * B[p + (size_t)j * ldb];
            C[i + (size_t)j * ldc] = s;
        }
}

void tu_matvec(int r, int c, const double *A, int lda, const double *x, double *y)
{
    for (int i = 0; i < r; ++i) {
        double s = 0.0;
        for (int j = 0; j < c; ++j) s += A[i + (size_t)j * lda] * x[j];
        y[i] = s;
    }
}

void tu_matvec_t(int r, int c, const double *A, int lda, const double *x, double *y)
{
    for (int j = 0; j < c; ++j) {
        double s = 0.0;
        for (int i = 0; i < r; ++i) s += A[i + (size_t)j * lda] * x[i];
        y[j] = s;
    }
}

double tu_max_abs(int rows, int cols, const double *A, int ld)
{
    double m = 0.0;
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            double a = fabs(A[i + (size_t)j * ld]);
            if (!(a <= m)) m = a; /* NaN propagates */
        }
    return m;
}

double tu_vec_max_abs(int n, const double *x) { return tu_max_abs(n, 1, x, n > 0 ? n : 1); }

int tu_bordered_solve(int n, int m, const double *M, int ldm, const double *G, int ldg,
                      double sign, const double *top, const double *bottom, double *K,
                      int *ipiv, double *x)
{
    int N = n + m, one = 1, info = 0;
    memset(K, 0, sizeof(double) * (size_t)N * N);
    for (int j = 0; j < n; ++j)
        memcpy(K + (size_t)j * N, M + (size_t)j * ldm, sizeof(double) * (size_t)n);
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            K[(n + i) + (size_t)j * N] = G[i + (size_t)j * ldg];
            K[j + (size_t)(n + i) * N] = sign * G[i + (size_t)j * ldg];
        }
    memcpy(x, top, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(x + n, bottom, sizeof(double) * (size_t)m);
    dgesv_(&N, &one, K, &N, ipiv, x, &N, &info);
    return info;
}

int tu_kkt_solve(int n, int m, const double *M, int ldm, const double *W, int ldw,
                 const double *F, const double *c, double *vdot, double *lambda)
{
    int N = n + m;
    double *K = malloc(sizeof(double) * (size_t)N * N);
    double *x = malloc(sizeof(double) * (size_t)N);
    double *bottom = calloc((size_t)(m > 0 ? m : 1), sizeof(double));
    int *ipiv = malloc(sizeof(int) * (size_t)N);
    for (int i = 0; i < m; ++i) bottom[i] = c ? -c[i] : 0.0;
    int info = tu_bordered_solve(n, m, M, ldm, W, ldw, -1.0, F, bottom, K, ipiv, x);
    for (int i = 0; i < n; ++i) vdot[i] = x[i];
    for (int i = 0; i < m; ++i) lambda[i] = x[n + i];
    free(K);
    free(x);
    free(bottom);
    free(ipiv);
    return info;
}
