/* Householder QR with column pivoting for small matrices (m, n <=
 * CDYN__SMALL_QR), the kernel behind cdyn__geqp3 at the sizes where the rank
 * policy (rank.h) runs at every load of a mechanism or a network.
 *
 * The result has LAPACK dgeqp3's form, so that dormqr and the callers read
 * it unchanged: R on and above the diagonal, the Householder vectors
 * H_i = I - tau_i v_i v_i^T (v_i(i) = 1 implied) below it, tau, and the
 * 1-based permutation jpvt (A P = Q R). Columns with jpvt[j] != 0 on entry
 * are moved to the front and factored first without pivoting, as dgeqp3
 * does. The free columns are then chosen by the largest norm of what is
 * left of them, downdated after each step by the entry it removes and
 * measured again where the downdate has cancelled (within sqrt(eps) of
 * the norm last measured), the rule of dgeqp3's unblocked step (dlaqp2):
 * the same pivots as dgeqp3 but between columns whose norms tie to
 * rounding. Up to CDYN__SMALL_QR (64) rows and columns, where dgeqp3
 * spends its time in the calls per column (dnrm2, dlarf, iladlc) of its
 * unblocked step: 0.66-0.68 of its time at 17 x 17 to 24 x 24, 0.72 at 32
 * and 42, 0.65-0.81 at 64 (random dense matrices, reference LAPACK and
 * OpenBLAS's). Tested against dgeqp3 in tests/test_linalg.c. */
#include "internal.h"
#include "linalg.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* The 2-norm of x scaled by its largest entry (the slow path of norm2). */
CDYN__COLD double norm2_scaled(int len, const double *x)
{
    double big = 0.0;
    for (int i = 0; i < len; ++i) big = fabs(x[i]) > big ? fabs(x[i]) : big;
    if (big == 0.0 || !(big <= DBL_MAX)) return big; /* 0, or Inf/NaN as it is */
    double sum = 0.0;
    for (int i = 0; i < len; ++i) {
        double t = x[i] / big;
        sum += t * t;
    }
    return big * sqrt(sum);
}

/* The 2-norm of x (len entries, stride 1) without overflow or underflow in
 * the squares: the plain sum of squares where it lies in [2^-1000, 2^1000]
 * (then every square that matters is a normal number), else scaled by the
 * largest entry. Inline: at these sizes the call costs more than the sum. */
static inline double norm2(int len, const double *x)
{
    double sum = 0.0;
    for (int i = 0; i < len; ++i) sum += x[i] * x[i];
    if (sum >= 0x1p-1000 && sum <= 0x1p+1000) return sqrt(sum);
    return norm2_scaled(len, x);
}

/* The reflector H = I - tau v v^T with H [alpha; x] = [beta; 0], v = [1; x'],
 * as dlarfg: x (len) is overwritten by x', alpha by beta; tau = 0 (H = I)
 * when x is zero. */
static double reflector(int len, double *alpha, double *x)
{
    double xnorm = norm2(len, x);
    if (xnorm == 0.0) return 0.0;
    double a = *alpha, pair[2] = {a, xnorm};
    double beta = -copysign(norm2(2, pair), a), pivot = a - beta;
    for (int i = 0; i < len; ++i) x[i] /= pivot;
    *alpha = beta;
    return (beta - a) / beta;
}

/* Apply H (from column k's reflector: v = [1; A(k+1:m, k)], tau) to the
 * rows k..end-1 of column j, beyond which v is zero; a column that H does
 * not change (v^T col = 0: the two have no row in common, as is common
 * in a banded Jacobian) is left as it is. With `rows` (count of them) the
 * rows below k where v is non-zero: the same sums without the zero terms. */
static void apply_reflector(int end, const int *rows, int count, double *A, int lda, int k,
                            double tau, int j)
{
    const double *v = A + (size_t)k * lda;
    double *col = A + (size_t)j * lda;
    double dot = col[k];
    if (rows) {
        for (int e = 0; e < count; ++e) dot += v[rows[e]] * col[rows[e]];
    } else {
        for (int i = k + 1; i < end; ++i) dot += v[i] * col[i];
    }
    if (dot == 0.0) return;
    dot *= tau;
    col[k] -= dot;
    if (rows) {
        for (int e = 0; e < count; ++e) col[rows[e]] -= dot * v[rows[e]];
    } else {
        for (int i = k + 1; i < end; ++i) col[i] -= dot * v[i];
    }
}

static void swap_columns(int m, double *A, int lda, int a, int b)
{
    double *ca = A + (size_t)a * lda, *cb = A + (size_t)b * lda;
    for (int i = 0; i < m; ++i) {
        double t = ca[i];
        ca[i] = cb[i];
        cb[i] = t;
    }
}

/* Step k: the reflector of column k, applied to the columns after it,
 * over v's non-zero rows only (dgeqp3's dlarf trims v's trailing zeros;
 * a banded Jacobian's v has a few non-zeros in all). */
static void eliminate(int m, int n, double *A, int lda, int k, double *tau)
{
    double *col = A + k + (size_t)k * lda;
    tau[k] = reflector(m - k - 1, col, col + 1);
    if (tau[k] == 0.0) return;
    int end = m; /* v's last non-zero, + 1 */
    while (end > k + 1 && col[end - 1 - k] == 0.0) --end;
    int rows[CDYN__SMALL_QR], count = 0, len = end - k - 1; /* v's non-zeros below k */
    if (len >= 8)
        for (int i = k + 1; i < end; ++i)
            if (col[i - k] != 0.0) rows[count++] = i;
    int sparse = len >= 8 && 2 * count <= len; /* long and mostly zeros: by index */
    for (int j = k + 1; j < n; ++j)
        apply_reflector(end, sparse ? rows : NULL, count, A, lda, k, tau[k], j);
}

int cdyn__small_geqp3(int m, int n, double *A, int lda, int *jpvt, double *tau)
{
    int fixed = 0, k = m < n ? m : n;
    for (int j = 0; j < n; ++j) { /* the columns flagged on entry go first */
        if (jpvt[j] != 0) {
            if (j != fixed) {
                swap_columns(m, A, lda, j, fixed);
                jpvt[j] = jpvt[fixed];
            }
            jpvt[fixed++] = j + 1;
        } else {
            jpvt[j] = j + 1;
        }
    }
    int step = 0;
    for (; step < k && step < fixed; ++step) eliminate(m, n, A, lda, step, tau);
    /* the norms of what is left of the free columns (partial) and the
     * norms they were last computed at (whole) */
    double partial[CDYN__SMALL_QR], whole[CDYN__SMALL_QR];
    for (int j = step; j < n; ++j)
        partial[j] = whole[j] = norm2(m - step, A + step + (size_t)j * lda);
    const double recompute = 1.0536712127723509e-08; /* sqrt(2^-53) */
    for (; step < k; ++step) {
        int best = step;
        for (int j = step + 1; j < n; ++j)
            if (partial[j] > partial[best]) best = j; /* the first of equal norms */
        if (best != step) {
            swap_columns(m, A, lda, best, step);
            int t = jpvt[best];
            jpvt[best] = jpvt[step];
            jpvt[step] = t;
            partial[best] = partial[step];
            whole[best] = whole[step];
        }
        eliminate(m, n, A, lda, step, tau);
        /* each later column loses its entry in row `step`: |rest|^2 =
         * |before|^2 - a^2, taken by the factor sqrt(1 - (a / before)^2);
         * where that has cancelled to within sqrt(eps) of the norm last
         * computed, the rest is measured again */
        for (int j = step + 1; j < n; ++j) {
            if (partial[j] == 0.0) continue;
            double ratio = fabs(A[step + (size_t)j * lda]) / partial[j];
            double left = 1.0 - ratio * ratio, kept = partial[j] / whole[j];
            left = left > 0.0 ? left : 0.0;
            if (left * kept * kept > recompute) {
                partial[j] *= sqrt(left);
            } else {
                partial[j] = step + 1 < m ? norm2(m - step - 1, A + step + 1 + (size_t)j * lda)
                                          : 0.0;
                whole[j] = partial[j];
            }
        }
    }
    return 0;
}

/* C <- H C (left) or C H (right) for H = I - tau v v^T, v = [1; below]
 * on the entries from offset on (len of them). */
static void reflect_left(int len, const double *below, double tau, int n, double *C, int ldc,
                         int offset)
{
    for (int j = 0; j < n; ++j) {
        double *col = C + offset + (size_t)j * ldc, dot = col[0];
        for (int i = 1; i < len; ++i) dot += below[i - 1] * col[i];
        dot *= tau;
        col[0] -= dot;
        for (int i = 1; i < len; ++i) col[i] -= dot * below[i - 1];
    }
}

static void reflect_right(int len, const double *below, double tau, int m, double *C, int ldc,
                          int offset)
{
    double *first = C + (size_t)offset * ldc;
    for (int r = 0; r < m; ++r) {
        double dot = first[r];
        for (int l = 1; l < len; ++l) dot += first[r + (size_t)l * ldc] * below[l - 1];
        dot *= tau;
        first[r] -= dot;
        for (int l = 1; l < len; ++l) first[r + (size_t)l * ldc] -= dot * below[l - 1];
    }
}

void cdyn__small_ormqr(char side, char trans, int m, int n, int k, const double *A, int lda,
                       const double *tau, double *C, int ldc)
{
    /* Q = H_0 H_1 ... H_{k-1}: Q C and C Q^T apply the last reflector
     * first, Q^T C and C Q the first */
    int left = side == 'L', forward = left == (trans == 'T'), nq = left ? m : n;
    for (int s = 0; s < k; ++s) {
        int i = forward ? s : k - 1 - s;
        if (tau[i] == 0.0) continue;
        const double *below = A + (i + 1) + (size_t)i * lda;
        if (left)
            reflect_left(nq - i, below, tau[i], n, C, ldc, i);
        else
            reflect_right(nq - i, below, tau[i], m, C, ldc, i);
    }
}
