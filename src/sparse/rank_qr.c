/* The rank-revealing sparse QR of cdyn_sparse_dae's singular blocks
 * (rank_qr.h; THEORY T2.3 in sparse form). */
#include "rank_qr.h"

#include <suitesparse/SuiteSparseQR_C.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Iterations of the 1-norm estimate of R_11^-1 (Hager's method; it
 * usually settles in two or three). */
#define NORM_ESTIMATE_STEPS 5

static void drop_factorization(cdyn__rank_qr *f)
{
    cholmod_common *cc = &f->cc;
    if (f->r) cholmod_l_free_sparse(&f->r, cc);
    if (f->h) cholmod_l_free_sparse(&f->h, cc);
    if (f->tau) cholmod_l_free_dense(&f->tau, cc);
    if (f->e) cholmod_l_free((size_t)f->q, sizeof(SuiteSparse_long), f->e, cc);
    if (f->hpinv) cholmod_l_free((size_t)f->q, sizeof(SuiteSparse_long), f->hpinv, cc);
    f->e = f->hpinv = NULL;
    f->rank = 0;
}

void cdyn__rank_qr_free(cdyn__rank_qr *f)
{
    if (!f) return;
    if (f->started) {
        drop_factorization(f);
        if (f->at) cholmod_l_free_sparse(&f->at, &f->cc);
        cholmod_l_finish(&f->cc);
    }
    void *arrays[] = {f->to_transpose, f->live, f->dependent, f->diagonal, f->y, f->z, f->w};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    memset(f, 0, sizeof *f);
}

int cdyn__rank_qr_init(cdyn__rank_qr *f, int q, const int *colptr, const int *rowind)
{
    memset(f, 0, sizeof *f);
    f->q = q;
    size_t qq = (size_t)(q > 0 ? q : 1), nnz = (size_t)colptr[q];
    if (!cholmod_l_start(&f->cc)) return 0;
    f->started = 1;
    f->cc.print = 0; /* statuses are read, never printed */
    f->at = cholmod_l_allocate_sparse((size_t)q, (size_t)q, nnz > 0 ? nnz : 1, 1, 1, 0,
                                      CHOLMOD_REAL, &f->cc);
    f->to_transpose = malloc(sizeof(int) * (nnz > 0 ? nnz : 1));
    f->live = calloc(qq, sizeof(int));
    f->dependent = calloc(qq, sizeof(int));
    f->diagonal = calloc(qq, sizeof(SuiteSparse_long));
    f->y = calloc(qq, sizeof(double));
    f->z = calloc(qq, sizeof(double));
    f->w = calloc(qq, sizeof(double));
    if (!f->at || !f->to_transpose || !f->live || !f->dependent || !f->diagonal || !f->y ||
        !f->z || !f->w)
        return 0;
    /* column i of A^T is row i of A: count, then place in the order of A's
     * columns, so that the rows of every column of A^T come sorted */
    SuiteSparse_long *tp = f->at->p, *ti = f->at->i;
    memset(tp, 0, sizeof(SuiteSparse_long) * ((size_t)q + 1));
    for (size_t e = 0; e < nnz; ++e) tp[rowind[e] + 1]++;
    for (int i = 0; i < q; ++i) tp[i + 1] += tp[i];
    SuiteSparse_long *next = (SuiteSparse_long *)f->diagonal; /* scratch until the first factor */
    memcpy(next, tp, sizeof(SuiteSparse_long) * (size_t)q);
    for (int j = 0; j < q; ++j)
        for (int e = colptr[j]; e < colptr[j + 1]; ++e) {
            SuiteSparse_long at = next[rowind[e]]++;
            ti[at] = j;
            f->to_transpose[e] = (int)at;
        }
    return 1;
}

/* ---- R_11, the kept triangle: column k is R's column live[k], its
 * off-diagonal entries in rows < k and its diagonal at diagonal[k] ---- */

/* T z = w in place (back substitution by columns). */
static void solve_kept(const cdyn__rank_qr *f, double *w)
{
    const SuiteSparse_long *rp = f->r->p, *ri = f->r->i;
    const double *rx = f->r->x;
    for (int k = f->rank - 1; k >= 0; --k) {
        double zk = w[k] / rx[f->diagonal[k]];
        w[k] = zk;
        for (SuiteSparse_long e = rp[f->live[k]]; e < rp[f->live[k] + 1]; ++e)
            if (e != f->diagonal[k]) w[ri[e]] -= rx[e] * zk;
    }
}

/* T^T z = w in place (forward substitution: one dot product per column). */
static void solve_kept_transposed(const cdyn__rank_qr *f, double *w)
{
    const SuiteSparse_long *rp = f->r->p, *ri = f->r->i;
    const double *rx = f->r->x;
    for (int k = 0; k < f->rank; ++k) {
        double s = w[k];
        for (SuiteSparse_long e = rp[f->live[k]]; e < rp[f->live[k] + 1]; ++e)
            if (e != f->diagonal[k]) s -= rx[e] * w[ri[e]];
        w[k] = s / rx[f->diagonal[k]];
    }
}

static double norm1(int n, const double *x)
{
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += fabs(x[i]);
    return s;
}

/* An estimate (from below) of ||T^-1||_1: Hager's iteration on the unit
 * 1-norm ball, then the alternating-sign vector of Higham's refinement,
 * which catches what the iteration misses on structured triangles. */
static double inverse_norm1(cdyn__rank_qr *f)
{
    int r = f->rank;
    double *x = f->y, *w = f->w, estimate = 0.0;
    for (int i = 0; i < r; ++i) x[i] = 1.0 / r;
    for (int step = 0; step < NORM_ESTIMATE_STEPS; ++step) {
        memcpy(w, x, sizeof(double) * (size_t)r);
        solve_kept(f, w);
        double norm = norm1(r, w);
        if (step > 0 && norm <= estimate) break;
        estimate = norm;
        for (int i = 0; i < r; ++i) w[i] = w[i] >= 0.0 ? 1.0 : -1.0;
        solve_kept_transposed(f, w);
        int best = 0;
        double zx = 0.0;
        for (int i = 0; i < r; ++i) {
            zx += w[i] * x[i];
            if (fabs(w[i]) > fabs(w[best])) best = i;
        }
        if (step > 0 && fabs(w[best]) <= zx) break;
        memset(x, 0, sizeof(double) * (size_t)r);
        x[best] = 1.0;
    }
    for (int i = 0; i < r; ++i)
        w[i] = (i % 2 ? -1.0 : 1.0) * (1.0 + (r > 1 ? (double)i / (r - 1) : 0.0));
    solve_kept(f, w);
    double alternative = 2.0 * norm1(r, w) / (3.0 * r);
    return alternative > estimate ? alternative : estimate;
}

/* 1 / (||T||_1 ||T^-1||_1 estimated); 1 for an empty T. */
static double kept_rcond(cdyn__rank_qr *f)
{
    if (f->rank == 0) return 1.0;
    const SuiteSparse_long *rp = f->r->p;
    const double *rx = f->r->x;
    double norm = 0.0;
    for (int k = 0; k < f->rank; ++k) {
        double s = 0.0;
        for (SuiteSparse_long e = rp[f->live[k]]; e < rp[f->live[k] + 1]; ++e) s += fabs(rx[e]);
        norm = s > norm ? s : norm;
    }
    double inverse = inverse_norm1(f);
    return norm > 0.0 && inverse > 0.0 ? 1.0 / (norm * inverse) : 0.0;
}

/* Sort R's columns into live (a new diagonal: an entry in the next row)
 * and dead (rows above only: the dependent rows of the block). */
static void classify_columns(cdyn__rank_qr *f)
{
    const SuiteSparse_long *rp = f->r->p, *ri = f->r->i;
    const double *rx = f->r->x;
    int k = 0, dead = 0, rows = (int)f->r->nrow;
    for (int j = 0; j < f->q; ++j) {
        SuiteSparse_long at = -1;
        for (SuiteSparse_long e = rp[j]; k < rows && e < rp[j + 1]; ++e)
            if (ri[e] == k && rx[e] != 0.0) at = e;
        if (at >= 0) {
            f->live[k] = j;
            f->diagonal[k++] = at;
        } else {
            f->dependent[dead++] = f->e ? (int)f->e[j] : j;
        }
    }
    f->rank = k;
}

int cdyn__rank_qr_factor(cdyn__rank_qr *f, const double *values, double tol, double *rcond)
{
    drop_factorization(f);
    int q = f->q;
    size_t nnz = (size_t)((SuiteSparse_long *)f->at->p)[q];
    double *tx = f->at->x, largest = 0.0;
    for (size_t e = 0; e < nnz; ++e) tx[f->to_transpose[e]] = values[e];
    const SuiteSparse_long *tp = f->at->p;
    for (int i = 0; i < q; ++i) {
        double s = 0.0;
        for (SuiteSparse_long e = tp[i]; e < tp[i + 1]; ++e) s += tx[e] * tx[e];
        largest = s > largest ? s : largest;
    }
    *rcond = 1.0;
    if (!(largest > 0.0)) { /* a zero block: every row dependent, the step 0 */
        for (int i = 0; i < q; ++i) f->dependent[i] = i;
        return 0;
    }
    f->factorizations++;
    SuiteSparse_long rank =
        SuiteSparseQR_C(SPQR_ORDERING_DEFAULT, tol * sqrt(largest), 0, 0, f->at, NULL, NULL,
                        NULL, NULL, &f->r, &f->e, &f->h, &f->hpinv, &f->tau, &f->cc);
    if (rank < 0 || !f->r || !f->h || !f->tau || !f->hpinv) {
        int out_of_memory = f->cc.status == CHOLMOD_OUT_OF_MEMORY;
        drop_factorization(f);
        return out_of_memory ? -1 : -2;
    }
    classify_columns(f);
    if (f->rank != rank) { /* R's shape disagrees with SuiteSparseQR's count */
        drop_factorization(f);
        return -2;
    }
    *rcond = kept_rcond(f);
    return f->rank;
}

void cdyn__rank_qr_apply(cdyn__rank_qr *f, const double *b, double *x)
{
    int q = f->q, r = f->rank;
    double *y = f->z;
    /* R_11^T y_1 = (E^T b)_1, y_2 = 0 */
    for (int k = 0; k < r; ++k) {
        int j = f->live[k];
        y[k] = b[f->e ? f->e[j] : j];
    }
    memset(y + r, 0, sizeof(double) * (size_t)(q - r));
    if (r > 0) solve_kept_transposed(f, y);
    else {
        memset(x, 0, sizeof(double) * (size_t)q);
        return;
    }
    /* x = Q y: the reflections in reverse order, then SPQR's row order
     * (Q^T applies y[hpinv[i]] = x[i] first, then H_0, H_1, ...) */
    const SuiteSparse_long *hp = f->h->p, *hi = f->h->i;
    const double *hx = f->h->x, *tau = f->tau->x;
    for (SuiteSparse_long k = (SuiteSparse_long)f->h->ncol - 1; k >= 0; --k) {
        double s = 0.0;
        for (SuiteSparse_long e = hp[k]; e < hp[k + 1]; ++e) s += hx[e] * y[hi[e]];
        s *= tau[k];
        for (SuiteSparse_long e = hp[k]; e < hp[k + 1]; ++e) y[hi[e]] -= s * hx[e];
    }
    for (int i = 0; i < q; ++i) x[i] = y[f->hpinv[i]];
}

int cdyn__rank_qr_dependent(const cdyn__rank_qr *f, int *rows)
{
    int count = f->q - f->rank;
    if (rows) memcpy(rows, f->dependent, sizeof(int) * (size_t)count);
    return count;
}
