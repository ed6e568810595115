#include "quadref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *quad_alloc(size_t count)
{
    void *p = malloc(sizeof(quad) * (count > 0 ? count : 1));
    if (!p) {
        fprintf(stderr, "quadref: out of memory\n");
        abort();
    }
    return p;
}

quad qref_abs(quad x) { return x < 0 ? -x : x; }

quad qref_pow10(int k)
{
    quad p = 1;
    for (int i = 0; i < abs(k); ++i) p *= 10;
    return k < 0 ? 1 / p : p;
}

/* In-place LU with partial pivoting of the N x N matrix LU: row i of the
 * factored matrix is row piv[i] of the original. Returns -1 on an exactly
 * zero pivot. */
static int lu_factor(int N, quad *LU, int *piv)
{
    for (int i = 0; i < N; ++i) piv[i] = i;
    for (int k = 0; k < N; ++k) {
        int p = k;
        for (int i = k + 1; i < N; ++i)
            if (qref_abs(LU[i + (size_t)k * N]) > qref_abs(LU[p + (size_t)k * N])) p = i;
        if (LU[p + (size_t)k * N] == 0) return -1;
        if (p != k) {
            for (int j = 0; j < N; ++j) {
                quad t = LU[k + (size_t)j * N];
                LU[k + (size_t)j * N] = LU[p + (size_t)j * N];
                LU[p + (size_t)j * N] = t;
            }
            int t = piv[k];
            piv[k] = piv[p];
            piv[p] = t;
        }
        quad pivot = LU[k + (size_t)k * N];
        for (int i = k + 1; i < N; ++i) LU[i + (size_t)k * N] /= pivot;
        for (int j = k + 1; j < N; ++j) {
            quad ukj = LU[k + (size_t)j * N];
            if (ukj == 0) continue;
            for (int i = k + 1; i < N; ++i) LU[i + (size_t)j * N] -= LU[i + (size_t)k * N] * ukj;
        }
    }
    return 0;
}

/* x = A^{-1} b from lu_factor's output. */
static void lu_solve(int N, const quad *LU, const int *piv, const quad *b, quad *x)
{
    for (int i = 0; i < N; ++i) x[i] = b[piv[i]];
    for (int j = 0; j < N; ++j)
        for (int i = j + 1; i < N; ++i) x[i] -= LU[i + (size_t)j * N] * x[j];
    for (int j = N - 1; j >= 0; --j) {
        x[j] /= LU[j + (size_t)j * N];
        for (int i = 0; i < j; ++i) x[i] -= LU[i + (size_t)j * N] * x[j];
    }
}

int qref_solve(int N, const quad *A, const quad *b, quad *x)
{
    quad *LU = quad_alloc((size_t)N * N);
    int *piv = malloc(sizeof(int) * (size_t)(N > 0 ? N : 1));
    if (!piv) abort();
    memcpy(LU, A, sizeof(quad) * (size_t)N * N);
    int info = lu_factor(N, LU, piv);
    if (info == 0) lu_solve(N, LU, piv, b, x);
    free(LU);
    free(piv);
    return info;
}

static quad vec_norm_inf(int len, const quad *x)
{
    quad m = 0;
    for (int i = 0; i < len; ++i)
        if (!(qref_abs(x[i]) <= m)) m = qref_abs(x[i]);
    return m;
}

static quad mat_norm_inf(int N, const quad *A)
{
    quad m = 0;
    for (int i = 0; i < N; ++i) {
        quad row = 0;
        for (int j = 0; j < N; ++j) row += qref_abs(A[i + (size_t)j * N]);
        if (row > m) m = row;
    }
    return m;
}

static quad mat_norm_1(int N, const quad *A)
{
    quad m = 0;
    for (int j = 0; j < N; ++j) {
        quad col = 0;
        for (int i = 0; i < N; ++i) col += qref_abs(A[i + (size_t)j * N]);
        if (col > m) m = col;
    }
    return m;
}

double qref_residual(int N, const quad *A, const quad *b, const quad *x)
{
    quad worst = 0;
    for (int i = 0; i < N; ++i) {
        quad r = b[i];
        for (int j = 0; j < N; ++j) r -= A[i + (size_t)j * N] * x[j];
        if (!(qref_abs(r) <= worst)) worst = qref_abs(r);
    }
    quad scale = mat_norm_inf(N, A) * vec_norm_inf(N, x) + vec_norm_inf(N, b);
    return scale > 0 ? (double)(worst / scale) : (double)worst;
}

double qref_cond1(int N, const quad *A)
{
    quad *LU = quad_alloc((size_t)N * N);
    quad *col = quad_alloc((size_t)N), *e = quad_alloc((size_t)N);
    int *piv = malloc(sizeof(int) * (size_t)(N > 0 ? N : 1));
    if (!piv) abort();
    memcpy(LU, A, sizeof(quad) * (size_t)N * N);
    double cond = INFINITY;
    if (lu_factor(N, LU, piv) == 0) {
        quad inv_norm = 0;
        for (int j = 0; j < N; ++j) {
            for (int i = 0; i < N; ++i) e[i] = (i == j);
            lu_solve(N, LU, piv, e, col);
            quad sum = 0;
            for (int i = 0; i < N; ++i) sum += qref_abs(col[i]);
            if (sum > inv_norm) inv_norm = sum;
        }
        cond = (double)(mat_norm_1(N, A) * inv_norm);
    }
    free(LU);
    free(col);
    free(e);
    free(piv);
    return cond;
}

int qref_is_spd(int n, const quad *A)
{
    /* A = L D L^T (unit lower L, no square roots): A is positive definite
     * exactly when every pivot d_j is positive. */
    quad *L = quad_alloc((size_t)n * n), *d = quad_alloc((size_t)n);
    int spd = 1;
    for (int j = 0; j < n && spd; ++j) {
        d[j] = A[j + (size_t)j * n];
        for (int k = 0; k < j; ++k) d[j] -= L[j + (size_t)k * n] * L[j + (size_t)k * n] * d[k];
        spd = d[j] > 0;
        for (int i = j + 1; i < n && spd; ++i) {
            quad s = A[i + (size_t)j * n];
            for (int k = 0; k < j; ++k) s -= L[i + (size_t)k * n] * L[j + (size_t)k * n] * d[k];
            L[i + (size_t)j * n] = s / d[j];
        }
    }
    free(L);
    free(d);
    return spd;
}

double qref_relerr(int len, const quad *x, const quad *ref)
{
    quad worst = 0;
    for (int i = 0; i < len; ++i) {
        quad e = qref_abs(x[i] - ref[i]);
        if (!(e <= worst)) worst = e;
    }
    quad scale = vec_norm_inf(len, ref);
    return scale > 0 ? (double)(worst / scale) : (double)worst;
}
