/* Null-space reduction of linear velocity constraints (THEORY T1): the
 * object, the choice of the partition and the factorization of W2 (T1.2),
 * every decision made by the rank policy (rank.h). */
#include "nullspace_internal.h"
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static double *doubles(size_t count) { return malloc(sizeof(double) * (count > 0 ? count : 1)); }

static int partition_alloc(partition *p, int n, int m, int d)
{
    p->order = malloc(sizeof(int) * (size_t)n);
    p->w = doubles((size_t)m * n);
    p->row_scale = doubles((size_t)m);
    p->col_scale = doubles((size_t)n);
    p->w2_lu = doubles((size_t)m * m);
    p->ipiv = malloc(sizeof(int) * (size_t)cdyn__max(m, 1));
    p->beta = doubles((size_t)m * d);
    p->cond = -1.0;
    p->dependence = -1.0;
    return p->order && p->w && p->row_scale && p->col_scale && p->w2_lu && p->ipiv && p->beta;
}

static void partition_free(partition *p)
{
    free(p->order);
    free(p->w);
    free(p->row_scale);
    free(p->col_scale);
    free(p->w2_lu);
    free(p->ipiv);
    free(p->beta);
}

static void chart_frame_free(chart_frame *f)
{
    if (!f) return;
    double *arrays[] = {f->rho, f->gamma, f->at, f->logh, f->weight, f->scaled, f->system};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(f->root);
    free(f);
}

cdyn_nullspace *cdyn_nullspace_create(int n, int m, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (n < 1 || m < 0 || m >= n) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    if ((size_t)n * (size_t)n > (size_t)INT_MAX / 8) { /* int sizes for LAPACK */
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_nullspace *ns = cdyn__object_alloc(sizeof *ns, offsetof(cdyn_nullspace, msg));
    if (!ns) goto fail;
    int d = n - m, m1 = cdyn__max(m, 1);
    ns->n = n;
    ns->m = m;
    ns->d = d;
    ns->rank_tol = CDYN__RANK_TOL;
    ns->cond_limit = 1e8;
    ns->rank = -1;
    int ws_ok = cdyn__rank_ws_init(&ns->ws, m1, n, 1);
    ns->mark = malloc(sizeof(int) * (size_t)n);
    ns->prefer = calloc((size_t)n, sizeof(int));
    ns->sub = doubles((size_t)n * m1);
    ns->gecon_work = doubles(4 * (size_t)m1);
    ns->iwork = malloc(sizeof(int) * (size_t)m1);
    ns->redundant = malloc(sizeof(int) * (size_t)m1);
    ns->own_ref.amax = calloc((size_t)m1 * n, sizeof(double));
    ns->saved_ref.amax = doubles((size_t)m1 * n);
    ns->ref = ns->own_ref;
    ns->m_alpha = doubles((size_t)n * d);
    ns->m_dep = doubles((size_t)n * m1);
    ns->rates_dep = doubles((size_t)m1 * d);
    ns->mass_reduced = doubles((size_t)d * d);
    ns->mass_scale = doubles((size_t)d);
    ns->force_reduced = doubles((size_t)d);
    ns->vec_n = doubles((size_t)n);
    ns->vec_n2 = doubles((size_t)n);
    ns->vec_n3 = doubles((size_t)n);
    ns->vec_m = doubles((size_t)m1);
    ns->vec_m2 = doubles((size_t)m1);
    ns->residual_top = doubles((size_t)n);
    ns->delta_v = doubles((size_t)n);
    ns->residual_bottom = doubles((size_t)m1);
    ns->delta_lambda = doubles((size_t)m1);
    ns->neg_c = doubles((size_t)m1);
    ns->kkt_work = doubles((size_t)(n + m1));
    if (!ws_ok || !partition_alloc(&ns->current, n, m, d) ||
        !partition_alloc(&ns->scratch, n, m, d) || !ns->mark || !ns->prefer || !ns->sub ||
        !ns->gecon_work || !ns->iwork || !ns->redundant || !ns->own_ref.amax ||
        !ns->saved_ref.amax || !ns->m_alpha || !ns->m_dep ||
        !ns->rates_dep || !ns->mass_reduced || !ns->mass_scale || !ns->force_reduced ||
        !ns->vec_n || !ns->vec_n2 || !ns->vec_n3 || !ns->vec_m || !ns->vec_m2 || !ns->residual_top || !ns->delta_v ||
        !ns->residual_bottom || !ns->delta_lambda || !ns->neg_c || !ns->kkt_work)
        goto fail;
    *status = CDYN_OK;
    return ns;
fail:
    cdyn_nullspace_free(ns);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

void cdyn_nullspace_free(cdyn_nullspace *ns)
{
    if (!ns) return;
    partition_free(&ns->current);
    partition_free(&ns->scratch);
    cdyn__rank_ws_free(&ns->ws);
    double *arrays[] = {ns->sub,       ns->gecon_work, ns->m_alpha,      ns->m_dep,
                        ns->rates_dep, ns->mass_reduced, ns->mass_scale, ns->force_reduced,
                        ns->vec_n,     ns->vec_n2,     ns->vec_n3,       ns->vec_m,
                        ns->vec_m2,    ns->residual_top, ns->delta_v, ns->residual_bottom,
                        ns->delta_lambda, ns->neg_c,   ns->kkt_work,  ns->own_ref.amax, ns->saved_ref.amax};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    chart_frame_free(ns->chart);
    free(ns->mark);
    free(ns->prefer);
    free(ns->iwork);
    free(ns->redundant);
    free(ns);
}

int cdyn__nullspace_use_chart_frame(cdyn_nullspace *ns, const double *inertia)
{
    if (ns->chart) return 1;
    size_t rows = (size_t)ns->m + 1, n = (size_t)ns->n;
    chart_frame *f = calloc(1, sizeof *f);
    if (!f) return 0;
    f->inertia = inertia;
    f->rho = doubles(rows);
    f->gamma = doubles(n);
    f->at = doubles(rows * n);
    f->logh = doubles(rows * n);
    f->weight = doubles(rows * n);
    f->scaled = doubles(rows * n);
    f->system = doubles(rows * rows);
    f->root = malloc(sizeof(int) * rows);
    if (!f->rho || !f->gamma || !f->at || !f->logh || !f->weight || !f->scaled || !f->system ||
        !f->root) {
        chart_frame_free(f);
        return 0;
    }
    ns->chart = f;
    return 1;
}

void cdyn__nullspace_set_owner(cdyn_nullspace *ns, const int *owner_in_callback)
{
    ns->guard.owner = owner_in_callback;
}

cdyn_status cdyn__nullspace_check_idle(const cdyn_nullspace *ns, const char *fn)
{
    return cdyn__guard_busy(&ns->guard) ? cdyn__busy(ns->msg, fn) : CDYN_OK;
}

int cdyn_nullspace_size(const cdyn_nullspace *ns) { return ns ? ns->n : -1; }
int cdyn_nullspace_rows(const cdyn_nullspace *ns) { return ns ? ns->m : -1; }

cdyn_status cdyn_nullspace_set_rank_tolerance(cdyn_nullspace *ns, double tol)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_set_rank_tolerance";
    if (cdyn__nullspace_check_idle(ns, fn)) return CDYN_ERR_BUSY;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: tol = %g is not in (0, 1)", fn, tol);
    ns->rank_tol = tol;
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_set_condition_limit(cdyn_nullspace *ns, double limit)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_set_condition_limit";
    if (cdyn__nullspace_check_idle(ns, fn)) return CDYN_ERR_BUSY;
    if (!(limit >= 1.0) || isinf(limit))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: limit = %g is not in [1, inf)", fn, limit);
    ns->cond_limit = limit;
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_set_preferred_dependent(cdyn_nullspace *ns, const int *prefer)
{
    if (!ns) return CDYN_ERR_ARG;
    if (cdyn__nullspace_check_idle(ns, "cdyn_nullspace_set_preferred_dependent"))
        return CDYN_ERR_BUSY;
    ns->has_preference = 0;
    for (int j = 0; j < ns->n; ++j) {
        ns->prefer[j] = prefer && prefer[j] != 0;
        ns->has_preference |= ns->prefer[j];
    }
    return CDYN_OK;
}

/* Shared argument checks of factor and update. */
static cdyn_status check_w(cdyn_nullspace *ns, const char *fn, const double *W, int ldw)
{
    if (cdyn__nullspace_check_idle(ns, fn)) return CDYN_ERR_BUSY;
    if (ns->m > 0 && !W) return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: W is NULL", fn);
    if (ldw < cdyn__max(ns->m, 1))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: ldw = %d < max(1, m = %d)", fn, ldw,
                          ns->m);
    long bad = ns->m > 0 ? cdyn__first_nonfinite(ns->m, ns->n, W, ldw) : -1;
    if (bad >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: W(%ld, %ld) is not finite", fn,
                          bad % ns->m, bad / ns->m);
    return CDYN_OK;
}

/* Sort the distinct indices list[0..count-1], all in [0, range), in place
 * and in O(range) with the marker array mark (range ints): no qsort, which
 * may allocate. */
static void sort_indices(int *list, int count, int range, int *mark)
{
    memset(mark, 0, sizeof(int) * (size_t)range);
    for (int k = 0; k < count; ++k) mark[list[k]] = 1;
    int k = 0;
    for (int i = 0; i < range; ++i)
        if (mark[i]) list[k++] = i;
}

/* --- the chart frame (THEORY T4.10) ------------------------------------
 * A partition's quality is a sensitivity |d q_dep / d q_ind|, which has
 * the units of the coordinates: it needs a unit for each, the mechanism's
 * own. Two sources give them. The history H of Phi_q (rank.h): H_ij says
 * how much a unit of q_j moves constraint i. And the inertia sqrt(M_jj)
 * (the owner's row, the largest each coordinate has had): the kinetic
 * energy a unit of q_j at unit speed carries. The frame balances both,
 * one more row of H: row and column log factors rho, gamma minimize
 * sum w_ij (log H_ij + rho_i + gamma_j)^2 over the entries > 0 (a
 * coordinate's unit is exp(gamma_j)). A change of units scales H's and
 * M's rows and columns, which shifts rho and gamma and leaves the balanced
 * matrix exp(log H + rho + gamma) and every decision taken in it as they
 * were (to rounding); the row maximum of the old frame (column_sizes)
 * mixed the units of different columns, and a slider crank in km chose
 * another partition than in m. The history's weights start at 1; an entry
 * far below its balanced neighbours (a cos(pi/2) of 6e-17 beside 1) would
 * pull the least-squares frame by a power of its smallness, so two more
 * passes weight each by its balanced size squared (capped at 1, floored
 * at 1e-8, where the entry no longer moves the frame and the system stays
 * well conditioned). The inertia keeps weight 1: it ties what the history
 * has not seen yet, and at a first partition next to a fold the history's
 * entries that vanish there are fresh and tiny (a slider crank started at
 * its dead centre: from the history alone the slider's unit, against the
 * crank's, came out 170 times smaller than a quarter turn later, the
 * slider was made independent a step from its fold, and the energy was
 * 2 % off after that step). Rows not linked through a
 * column share one free factor (a common scale of those rows and the
 * inverse on their columns): the sum of their rho is fixed at 0, which
 * leaves the balanced matrix as it is. */
enum { FRAME_PASSES = 3 };
static const double FRAME_INERTIA_WEIGHT = 1.0;

static int frame_root(int *root, int i)
{
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
}

/* Rows that share a column belong together (their factors are tied). */
static void frame_components(chart_frame *f, int rows, int n)
{
    for (int i = 0; i < rows; ++i) f->root[i] = i;
    for (int j = 0; j < n; ++j) {
        int first = -1;
        for (int i = 0; i < rows; ++i) {
            if (!(f->weight[i + (size_t)j * rows] > 0.0)) continue;
            int r = frame_root(f->root, i);
            if (first < 0) first = r;
            else if (r != first) f->root[r] = first;
        }
    }
    for (int i = 0; i < rows; ++i) f->root[i] = frame_root(f->root, i);
}

/* One weighted least-squares balance of the rows x n log entries: gamma
 * eliminated (gamma_j is minus the weighted mean of log H_ij + rho_i down
 * column j), the rows' normal equations (diag(row weights) - S S^T) rho =
 * -sum_j w_ij (log H_ij - mean_j), S_ij = w_ij / sqrt(column weight j),
 * plus 1 between the rows of one component (the gauge), by Cholesky.
 * Returns 0, or the potrf info. */
static int frame_pass(chart_frame *f, int rows, int n)
{
    double *A = f->system, *rho = f->rho, *gamma = f->gamma;
    for (int i = 0; i < rows; ++i) {
        rho[i] = 0.0;
        for (int k = i; k < rows; ++k)
            A[k + (size_t)i * rows] = f->root[k] == f->root[i] ? 1.0 : 0.0;
    }
    for (int j = 0; j < n; ++j) {
        const double *w = f->weight + (size_t)j * rows, *l = f->logh + (size_t)j * rows;
        double *s = f->scaled + (size_t)j * rows, sum = 0.0, mean = 0.0;
        for (int i = 0; i < rows; ++i) {
            sum += w[i];
            mean += w[i] * l[i];
        }
        gamma[j] = sum; /* the column's weight, until gamma is solved */
        double root_sum = sum > 0.0 ? sqrt(sum) : 1.0;
        if (sum > 0.0) mean /= sum;
        for (int i = 0; i < rows; ++i) {
            s[i] = w[i] / root_sum;
            A[i + (size_t)i * rows] += w[i];
            rho[i] -= w[i] * (l[i] - mean);
        }
    }
    cdyn__syrk('L', 'N', rows, n, -1.0, f->scaled, rows, 1.0, A, rows);
    int info = cdyn__potrf(rows, A, rows);
    if (info != 0) return info;
    cdyn__potrs(rows, 1, A, rows, rho, rows);
    for (int j = 0; j < n; ++j) {
        const double *w = f->weight + (size_t)j * rows, *l = f->logh + (size_t)j * rows;
        double sum = gamma[j], acc = 0.0;
        for (int i = 0; i < rows; ++i) acc += w[i] * (l[i] + rho[i]);
        gamma[j] = sum > 0.0 ? -acc / sum : 0.0;
    }
    return 0;
}

/* The chart frame of the present history and inertia (kept while they do
 * not change): rows m + 1, the inertia last. */
static void chart_frame_update(cdyn_nullspace *ns)
{
    chart_frame *f = ns->chart;
    int m = ns->m, n = ns->n, rows = m + 1;
    size_t count = (size_t)m * (size_t)n;
    const double *h = ns->ref.amax;
    if (f->valid && memcmp(f->at, h, sizeof(double) * count) == 0 &&
        memcmp(f->at + count, f->inertia, sizeof(double) * (size_t)n) == 0)
        return;
    memcpy(f->at, h, sizeof(double) * count);
    memcpy(f->at + count, f->inertia, sizeof(double) * (size_t)n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < rows; ++i) {
            double x = i < m ? h[i + (size_t)j * m] : f->inertia[j];
            size_t k = i + (size_t)j * rows;
            f->weight[k] = x > 0.0 ? (i < m ? 1.0 : FRAME_INERTIA_WEIGHT) : 0.0;
            f->logh[k] = x > 0.0 ? log(x) : 0.0;
        }
    frame_components(f, rows, n);
    for (int pass = 0; pass < FRAME_PASSES; ++pass) {
        if (pass > 0) /* each entry of H by its balanced size (see above) */
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < m; ++i) {
                    size_t k = i + (size_t)j * rows;
                    if (!(f->weight[k] > 0.0)) continue;
                    double balanced = f->logh[k] + f->rho[i] + f->gamma[j];
                    f->weight[k] = fmax(1e-8, fmin(1.0, exp(2.0 * balanced)));
                }
        if (frame_pass(f, rows, n) != 0) { /* not expected: the system is SPD */
            for (int i = 0; i < rows; ++i) f->rho[i] = 0.0;
            for (int j = 0; j < n; ++j) f->gamma[j] = 0.0;
            break;
        }
    }
    f->valid = 1;
}

/* |beta_ij| (d q_dep_i / d q_ind_j) with both coordinates in frame units. */
static double frame_sensitivity(const chart_frame *f, double beta, int dep, int ind)
{
    if (beta == 0.0) return 0.0;
    return exp(log(fabs(beta)) + f->gamma[ind] - f->gamma[dep]);
}

/* The size of each column of the history (size, n entries): its largest
 * entry with every row divided by the row's largest (row sizes in
 * ns->vec_m). A column never touched has size 0. */
static void column_sizes(cdyn_nullspace *ns, double *size)
{
    int m = ns->m, n = ns->n;
    const double *h = ns->ref.amax;
    double *row = ns->vec_m;
    for (int i = 0; i < m; ++i) row[i] = 0.0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) row[i] = fmax(row[i], h[i + (size_t)j * m]);
    for (int j = 0; j < n; ++j) {
        size[j] = 0.0;
        for (int i = 0; i < m; ++i)
            if (row[i] > 0.0) size[j] = fmax(size[j], h[i + (size_t)j * m] / row[i]);
    }
}

/* Factor the equilibrated W2 = D_r W[:, dependent] D_dep of the scratch
 * partition, whose order is set: LU, condition estimate, beta = -W2^{-1} W1
 * (T1.2) and its largest entry. The factors equilibrate W's history
 * (rank.h; updated here), the largest |entries| W has had, rather than W,
 * so that a coordinate whose column shrinks (the pendulum's y as it nears
 * the horizontal, where dy/dx = -x/y grows) shows in cond and dependence,
 * which scaling by the present sizes would hide. For a fresh history the
 * two coincide. Returns the LU's info (> 0: W2 exactly singular), or -1
 * when beta overflows in the caller's units (finite W whose columns differ
 * by more than the range of double). */
static int factor_scratch(cdyn_nullspace *ns, const double *W, int ldw)
{
    partition *p = &ns->scratch;
    int m = ns->m, d = ns->d;
    const int *dep = p->order + d, *ind = p->order;
    for (int j = 0; j < ns->n; ++j)
        memcpy(p->w + (size_t)j * m, W + (size_t)j * ldw, sizeof(double) * (size_t)m);
    cdyn__equilibrate_ref(m, ns->n, W, ldw, &ns->ref, p->row_scale, p->col_scale);
    const double *r = p->row_scale, *c = p->col_scale;
    for (int j = 0; j < m; ++j)
        for (int i = 0; i < m; ++i)
            p->w2_lu[i + (size_t)j * m] = r[i] * W[i + (size_t)dep[j] * ldw] * c[dep[j]];
    for (int j = 0; j < d; ++j) /* the equilibrated W1 */
        for (int i = 0; i < m; ++i)
            p->beta[i + (size_t)j * m] = r[i] * W[i + (size_t)ind[j] * ldw] * c[ind[j]];
    double anorm = cdyn__norm1(m, m, p->w2_lu, m);
    int info = cdyn__getrf(m, p->w2_lu, m, p->ipiv);
    if (info != 0) {
        p->cond = INFINITY;
        return info;
    }
    double rcond = 0.0;
    cdyn__gecon(m, p->w2_lu, m, anorm, &rcond, ns->gecon_work, ns->iwork);
    /* a condition number is >= 1; the estimate can round just below */
    p->cond = rcond > 0.0 ? fmax(1.0, 1.0 / rcond) : INFINITY;
    cdyn__getrs('N', m, d, p->w2_lu, m, p->ipiv, p->beta, m);
    /* equilibrated beta~ = -W2~^{-1} W1~; beta = D_dep beta~ D_ind^{-1}.
     * The dependence is measured with each state in its unit of the chart
     * frame when there is one (a mechanism's partition, unit-free), else
     * in units of its column's size in the history, each row divided
     * exactly by its own largest entry (not rounded to powers of two: a
     * monitor with a limit such as 1.2 must not move by factors of 2; for
     * m = 1 it is unit-free to rounding); where it is largest is kept for
     * chart_exchanges */
    double *size = ns->vec_n3;
    if (ns->chart) chart_frame_update(ns);
    else column_sizes(ns, size);
    p->dependence = 0.0;
    p->worst_dep = p->worst_ind = 0;
    for (int j = 0; j < d; ++j)
        for (int i = 0; i < m; ++i) {
            double *b = p->beta + i + (size_t)j * m, sensitivity = 0.0;
            *b = -*b * c[dep[i]] / c[ind[j]];
            if (ns->chart)
                sensitivity = frame_sensitivity(ns->chart, *b, dep[i], ind[j]);
            else if (size[ind[j]] > 0.0)
                sensitivity = fabs(*b) * size[dep[i]] / size[ind[j]];
            if (sensitivity > p->dependence) {
                p->dependence = sensitivity;
                p->worst_dep = i;
                p->worst_ind = j;
            }
        }
    if (cdyn__first_nonfinite(m, d, p->beta, m) >= 0) return -1;
    return 0;
}

/* Name the m - rank rows of W that depend on the others: a pivoted QR of
 * the equilibrated W^T ranks the rows; those after the first `rank` are
 * redundant. */
static void find_redundant_rows(cdyn_nullspace *ns, const double *W, int ldw, int rank)
{
    int m = ns->m;
    cdyn__rank_decide(&ns->ws, CDYN__RANK_ROWS, m, ns->n, W, ldw, ns->rank_tol, NULL, &ns->ref,
                      NULL);
    ns->n_redundant = m - rank;
    memcpy(ns->redundant, ns->ws.jpvt + rank, sizeof(int) * (size_t)ns->n_redundant);
    sort_indices(ns->redundant, ns->n_redundant, m, ns->mark);
}

/* Among the preferred states, the (at most m) columns of W that a pivoted
 * QR of those columns alone (equilibrated) ranks as independent: flagged
 * in ns->mark, to be placed first in the QR of the whole W. */
static void choose_preferred(cdyn_nullspace *ns, const double *W, int ldw)
{
    int n = ns->n, m = ns->m, count = 0;
    int *columns = ns->scratch.order; /* free until the partition is written */
    for (int j = 0; j < n; ++j)
        if (ns->prefer[j]) {
            memcpy(ns->sub + (size_t)count * m, W + (size_t)j * ldw, sizeof(double) * m);
            columns[count++] = j;
        }
    memset(ns->mark, 0, sizeof(int) * (size_t)n);
    if (count == 0) return;
    cdyn__rank r;
    cdyn__rank_decide(&ns->ws, CDYN__RANK_COLUMNS, m, count, ns->sub, m, ns->rank_tol, NULL,
                      NULL, &r);
    for (int k = 0; k < r.rank; ++k) ns->mark[columns[ns->ws.jpvt[k]]] = 1;
}

/* The partition's first choice in the chart frame: the pivot order of a
 * pivoted QR of the balanced W, exp(rho_i) W_ij exp(gamma_j), into
 * ns->ws.jpvt (0-based). The rank decision before it is the rank policy's
 * own (rank.h); this only ranks the columns, in the frame the partition
 * is judged in, so that the choice does not follow the units. Returns the
 * dgeqp3 info. */
static int chart_pivots(cdyn_nullspace *ns, const double *W, int ldw)
{
    int m = ns->m, n = ns->n;
    chart_frame_update(ns);
    const chart_frame *f = ns->chart;
    double *B = ns->ws.qr;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double w = W[i + (size_t)j * ldw];
            B[i + (size_t)j * m] =
                w == 0.0 ? 0.0 : copysign(exp(log(fabs(w)) + f->rho[i] + f->gamma[j]), w);
        }
    for (int j = 0; j < n; ++j) ns->ws.jpvt[j] = 0;
    int info = cdyn__geqp3(m, n, B, m, ns->ws.jpvt, ns->ws.tau, ns->ws.work, ns->ws.lwork);
    for (int j = 0; j < n; ++j) --ns->ws.jpvt[j];
    return info;
}

/* Improve the scratch partition by exchanges: while some |d q_dep_i / d
 * q_ind_j| in frame units exceeds 1 + 1/16, exchange the two coordinates
 * (the frame's |det W2| grows by that factor, so this ends; a partition
 * where no entry exceeds 1 is one of largest volume among its neighbours,
 * the best a partition can be in this measure). At most 4 (m + 1)
 * exchanges; each refactors. Returns factor_scratch's info of the last. */
static int chart_exchanges(cdyn_nullspace *ns, const double *W, int ldw)
{
    partition *p = &ns->scratch;
    int n = ns->n, m = ns->m, d = ns->d;
    for (int round = 0; round < 4 * (m + 1) && p->dependence > 1.0625; ++round) {
        int *dep = p->order + d, *ind = p->order;
        int i = p->worst_dep, j = p->worst_ind, column = dep[i];
        dep[i] = ind[j];
        ind[j] = column;
        sort_indices(ind, d, n, ns->mark);
        sort_indices(dep, m, n, ns->mark);
        int info = factor_scratch(ns, W, ldw);
        if (info != 0) return info;
    }
    return 0;
}

/* Select the partition by pivoted QR of the equilibrated W (T1.2) into the
 * scratch slot and factor it. Preferred states, if any, are taken as
 * dependent first. */
static cdyn_status select_partition(cdyn_nullspace *ns, const char *fn, const double *W,
                                    int ldw)
{
    int n = ns->n, m = ns->m, d = ns->d;
    int *order = ns->scratch.order;
    ns->n_redundant = 0;
    if (m == 0) {
        for (int j = 0; j < n; ++j) order[j] = j;
        ns->scratch.cond = 1.0;
        ns->scratch.dependence = 0.0;
        ns->rank = 0;
        return CDYN_OK;
    }
    if (ns->has_preference) choose_preferred(ns, W, ldw);
    cdyn__rank decision;
    int rank = cdyn__rank_decide(&ns->ws, CDYN__RANK_COLUMNS, m, n, W, ldw, ns->rank_tol,
                                 ns->has_preference ? ns->mark : NULL, &ns->ref, &decision);
    if (rank < 0)
        return cdyn__fail(ns->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 failed on W", fn);
    ns->rank = rank;
    if (rank < m) {
        find_redundant_rows(ns, W, ldw, rank);
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: W is rank deficient (rank %d < m = %d: pivot ratio %.3g <= "
                          "tol %.3g with W equilibrated as for its history since factor, not "
                          "a matter of units); dependent constraint row%s %d%s",
                          fn, rank, m, decision.dropped, ns->rank_tol,
                          ns->n_redundant > 1 ? "s" : "", ns->redundant[0],
                          ns->n_redundant > 1 ? " ..." : "");
    }
    if (ns->chart && !ns->has_preference && chart_pivots(ns, W, ldw) != 0)
        return cdyn__fail(ns->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 failed on W", fn);
    /* First m pivot columns are the dependent states; both sets sorted so
     * vbar keeps the caller's state order. */
    for (int j = 0; j < m; ++j) order[d + j] = ns->ws.jpvt[j];
    for (int j = 0; j < d; ++j) order[j] = ns->ws.jpvt[m + j];
    sort_indices(order, d, n, ns->mark);
    sort_indices(order + d, m, n, ns->mark);
    int info = factor_scratch(ns, W, ldw);
    if (info == 0 && ns->chart && !ns->has_preference) info = chart_exchanges(ns, W, ldw);
    if (info < 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: beta = -W2^-1 W1 overflows (W's columns differ by more than the "
                          "range of double)", fn);
    if (info != 0)
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: W2 chosen by pivoted QR is exactly singular", fn);
    return CDYN_OK;
}

/* Make the scratch partition the current one; report whether the state
 * split changed. */
static int commit_scratch(cdyn_nullspace *ns)
{
    int changed = !ns->factored ||
                  memcmp(ns->current.order, ns->scratch.order, sizeof(int) * (size_t)ns->n) != 0;
    partition tmp = ns->current;
    ns->current = ns->scratch;
    ns->scratch = tmp;
    ns->factored = 1;
    return changed;
}

void cdyn__nullspace_share_references(cdyn_nullspace *ns, cdyn__rank_ref ref)
{
    ns->ref = ref;
}

/* The references before a call, so that a failed call leaves them as they
 * were (restore = 1 puts them back). */
static void keep_references(cdyn_nullspace *ns, int restore)
{
    size_t bytes = sizeof(double) * (size_t)ns->m * (size_t)ns->n;
    if (restore)
        memcpy(ns->ref.amax, ns->saved_ref.amax, bytes);
    else
        memcpy(ns->saved_ref.amax, ns->ref.amax, bytes);
}

cdyn_status cdyn_nullspace_factor(cdyn_nullspace *ns, const double *W, int ldw)
{
    if (!ns) return CDYN_ERR_ARG;
    cdyn_status st = check_w(ns, "cdyn_nullspace_factor", W, ldw);
    if (st != CDYN_OK) return st;
    keep_references(ns, 0);
    if (ns->ref.amax == ns->own_ref.amax) /* a new pattern, a new history (unless shared) */
        memset(ns->ref.amax, 0, sizeof(double) * (size_t)ns->m * (size_t)ns->n);
    st = select_partition(ns, "cdyn_nullspace_factor", W, ldw);
    if (st == CDYN_OK)
        commit_scratch(ns);
    else
        keep_references(ns, 1);
    return st;
}

cdyn_status cdyn_nullspace_update(cdyn_nullspace *ns, const double *W, int ldw, int *changed)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_update";
    cdyn_status st = check_w(ns, fn, W, ldw);
    if (st != CDYN_OK) return st;
    keep_references(ns, 0);
    int keep = ns->factored;
    if (keep) memcpy(ns->scratch.order, ns->current.order, sizeof(int) * (size_t)ns->n);
    if (keep && ns->m > 0) {
        keep = factor_scratch(ns, W, ldw) == 0 && ns->scratch.cond <= ns->cond_limit;
    } else if (keep) {
        ns->scratch.cond = 1.0;
        ns->scratch.dependence = 0.0;
    }
    if (!keep) {
        st = select_partition(ns, fn, W, ldw);
        if (st != CDYN_OK) {
            keep_references(ns, 1);
            return st;
        }
    } else { /* a well-conditioned W2 of m columns: W has full rank */
        ns->rank = ns->m;
        ns->n_redundant = 0;
    }
    int was_changed = commit_scratch(ns);
    if (changed) *changed = was_changed;
    return CDYN_OK;
}

int cdyn_nullspace_partition(const cdyn_nullspace *ns, int *independent, int *dependent)
{
    if (!ns) return -1;
    const char *fn = "cdyn_nullspace_partition";
    if (!ns->factored) {
        cdyn__fail(ns->msg, CDYN_ERR_ARG,
                   "%s: no factorization yet; call cdyn_nullspace_factor first", fn);
        return -1;
    }
    if (independent && dependent &&
        cdyn__overlap(independent, sizeof(int) * (size_t)ns->d, dependent,
                      sizeof(int) * (size_t)ns->m)) {
        cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: independent and dependent overlap", fn);
        return -1;
    }
    if (independent) memcpy(independent, ns->current.order, sizeof(int) * (size_t)ns->d);
    if (dependent)
        memcpy(dependent, ns->current.order + ns->d, sizeof(int) * (size_t)ns->m);
    return ns->d;
}

double cdyn_nullspace_condition(const cdyn_nullspace *ns)
{
    return (ns && ns->factored) ? ns->current.cond : NAN;
}

int cdyn_nullspace_rank(const cdyn_nullspace *ns) { return ns ? ns->rank : -1; }

double cdyn_nullspace_dependence(const cdyn_nullspace *ns)
{
    return (ns && ns->factored) ? ns->current.dependence : NAN;
}

int cdyn_nullspace_redundant_rows(const cdyn_nullspace *ns, int *rows)
{
    if (!ns) return -1;
    if (rows) memcpy(rows, ns->redundant, sizeof(int) * (size_t)ns->n_redundant);
    return ns->n_redundant;
}

void cdyn__nullspace_w2_solve(cdyn_nullspace *ns, char trans, double *x)
{
    /* W2^{-1} = D_dep W2~^{-1} D_r, W2^{-T} = D_r W2~^{-T} D_dep */
    const partition *p = &ns->current;
    int m = ns->m;
    const int *dep = p->order + ns->d;
    for (int i = 0; i < m; ++i) x[i] *= trans == 'N' ? p->row_scale[i] : p->col_scale[dep[i]];
    cdyn__getrs(trans, m, 1, p->w2_lu, m, p->ipiv, x, m);
    for (int i = 0; i < m; ++i) x[i] *= trans == 'N' ? p->col_scale[dep[i]] : p->row_scale[i];
}

const char *cdyn_nullspace_last_error(const cdyn_nullspace *ns)
{
    return ns ? ns->msg : "cdyn_nullspace: NULL object";
}
