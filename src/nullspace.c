/* Null-space reduction of linear velocity constraints (THEORY T1). */
#include "cdyn/nullspace.h"

#include "internal.h"
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One factorization of W for a given partition. Two of them live in the
 * object: the committed one and a scratch one that becomes committed (by a
 * swap) only when a factor/update succeeds, so a failure never disturbs the
 * object. */
typedef struct partition {
    int *order;     /* n state indices: order[0..d-1] independent, order[d..n-1] dependent */
    double *w2_lu;  /* m x m LU of W2 = W[:, dependent] (dgetrf) */
    int *ipiv;      /* m pivots of that LU */
    double *beta;   /* m x d, -W2^{-1} W1: the lower block of alpha (T1.2) */
    double cond;    /* 1-norm condition estimate of W2 */
} partition;

struct cdyn_nullspace {
    int n, m, d;
    double rank_tol;
    double cond_limit;
    int factored;
    int rank;           /* rank of W found by the last selection, -1 before */
    int n_redundant;    /* after a rank-deficient W: rows named in redundant */
    partition current, scratch;
    int *redundant;     /* m */
    /* workspace, all sized at create time */
    double *qr;         /* max(m*n, n*m) for dgeqp3 of W or W^T */
    double *tau;        /* min(m, n) = m */
    int *jpvt;          /* n */
    int *mark;          /* n, for sort_indices and choose_preferred */
    int *prefer;        /* n flags: states preferred as dependent */
    int has_preference;
    double *lwork_buf;  /* lwork doubles: dgeqp3 and dgecon */
    int lwork;
    int *iwork;         /* m, dgecon */
    double *m_alpha;    /* n x d: M alpha */
    double *m_dep;      /* n x m: M[:, dependent] */
    double *rates_dep;  /* m x max(d, 1): alpha' block, dependent offsets */
    double *mass_reduced;   /* d x d for cdyn_nullspace_solve */
    double *force_reduced;  /* d */
    double *vec_n;      /* n */
    double *vec_m;      /* m */
    char msg[CDYN__MSG_LEN];
};

static int partition_alloc(partition *p, int n, int m, int d)
{
    p->order = malloc(sizeof(int) * (size_t)n);
    p->w2_lu = malloc(sizeof(double) * (size_t)cdyn__max(m * m, 1));
    p->ipiv = malloc(sizeof(int) * (size_t)cdyn__max(m, 1));
    p->beta = malloc(sizeof(double) * (size_t)cdyn__max(m * d, 1));
    p->cond = -1.0;
    return p->order && p->w2_lu && p->ipiv && p->beta;
}

static void partition_free(partition *p)
{
    free(p->order);
    free(p->w2_lu);
    free(p->ipiv);
    free(p->beta);
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
    cdyn_nullspace *ns = calloc(1, sizeof *ns);
    if (!ns) goto fail;
    int d = n - m;
    ns->n = n;
    ns->m = m;
    ns->d = d;
    ns->rank_tol = 1e-12;
    ns->cond_limit = 1e8;
    ns->rank = -1;
    int m1 = cdyn__max(m, 1);
    /* dgeqp3 runs on W (m x n) to select, and on W^T (n x m) to name
     * redundant rows; dgecon needs 4m. */
    ns->lwork = cdyn__max(cdyn__geqp3_lwork(m1, n), cdyn__geqp3_lwork(n, m1));
    ns->lwork = cdyn__max(ns->lwork, 4 * m1);
    ns->qr = malloc(sizeof(double) * (size_t)n * m1);
    ns->tau = malloc(sizeof(double) * (size_t)n);
    ns->jpvt = malloc(sizeof(int) * (size_t)n);
    ns->mark = malloc(sizeof(int) * (size_t)n);
    ns->prefer = calloc((size_t)n, sizeof(int));
    ns->lwork_buf = malloc(sizeof(double) * (size_t)ns->lwork);
    ns->iwork = malloc(sizeof(int) * (size_t)m1);
    ns->redundant = malloc(sizeof(int) * (size_t)m1);
    ns->m_alpha = malloc(sizeof(double) * (size_t)n * d);
    ns->m_dep = malloc(sizeof(double) * (size_t)n * m1);
    ns->rates_dep = malloc(sizeof(double) * (size_t)m1 * d);
    ns->mass_reduced = malloc(sizeof(double) * (size_t)d * d);
    ns->force_reduced = malloc(sizeof(double) * (size_t)d);
    ns->vec_n = malloc(sizeof(double) * (size_t)n);
    ns->vec_m = malloc(sizeof(double) * (size_t)m1);
    if (!partition_alloc(&ns->current, n, m, d) || !partition_alloc(&ns->scratch, n, m, d) ||
        !ns->qr || !ns->tau || !ns->jpvt || !ns->mark || !ns->prefer || !ns->lwork_buf || !ns->iwork || !ns->redundant ||
        !ns->m_alpha || !ns->m_dep || !ns->rates_dep || !ns->mass_reduced ||
        !ns->force_reduced || !ns->vec_n || !ns->vec_m)
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
    free(ns->qr);
    free(ns->tau);
    free(ns->jpvt);
    free(ns->mark);
    free(ns->prefer);
    free(ns->lwork_buf);
    free(ns->iwork);
    free(ns->redundant);
    free(ns->m_alpha);
    free(ns->m_dep);
    free(ns->rates_dep);
    free(ns->mass_reduced);
    free(ns->force_reduced);
    free(ns->vec_n);
    free(ns->vec_m);
    free(ns);
}

int cdyn_nullspace_states(const cdyn_nullspace *ns) { return ns ? ns->n : 0; }
int cdyn_nullspace_constraints(const cdyn_nullspace *ns) { return ns ? ns->m : 0; }

cdyn_status cdyn_nullspace_set_rank_tolerance(cdyn_nullspace *ns, double tol)
{
    if (!ns) return CDYN_ERR_ARG;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "cdyn_nullspace_set_rank_tolerance: tol = %g is not in (0, 1)", tol);
    ns->rank_tol = tol;
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_set_condition_limit(cdyn_nullspace *ns, double limit)
{
    if (!ns) return CDYN_ERR_ARG;
    if (!(limit >= 1.0) || isinf(limit))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "cdyn_nullspace_set_condition_limit: limit = %g is not in [1, inf)",
                          limit);
    ns->cond_limit = limit;
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_set_preferred_dependent(cdyn_nullspace *ns, const int *prefer)
{
    if (!ns) return CDYN_ERR_ARG;
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

/* Factor W2 = W[:, dependent] of the scratch partition, whose order is set:
 * LU, condition estimate, and beta = -W2^{-1} W1 (T1.2). Returns the LU's
 * info (> 0: W2 exactly singular). */
static int factor_scratch(cdyn_nullspace *ns, const double *W, int ldw)
{
    partition *p = &ns->scratch;
    int m = ns->m, d = ns->d;
    const int *dep = p->order + d, *ind = p->order;
    for (int j = 0; j < m; ++j)
        memcpy(p->w2_lu + (size_t)j * m, W + (size_t)dep[j] * ldw, sizeof(double) * m);
    for (int j = 0; j < d; ++j)
        memcpy(p->beta + (size_t)j * m, W + (size_t)ind[j] * ldw, sizeof(double) * m);
    double anorm = cdyn__norm1(m, m, p->w2_lu, m);
    int info = cdyn__getrf(m, p->w2_lu, m, p->ipiv);
    if (info != 0) {
        p->cond = INFINITY;
        return info;
    }
    double rcond = 0.0;
    cdyn__gecon(m, p->w2_lu, m, anorm, &rcond, ns->lwork_buf, ns->iwork);
    /* a condition number is >= 1; the estimate can round just below */
    p->cond = rcond > 0.0 ? fmax(1.0, 1.0 / rcond) : INFINITY;
    cdyn__getrs('N', m, d, p->w2_lu, m, p->ipiv, p->beta, m);
    for (size_t k = 0; k < (size_t)m * d; ++k) p->beta[k] = -p->beta[k];
    return 0;
}

/* Name the m - rank rows of W that depend on the others: pivoted QR of W^T
 * ranks the rows; those left after the first `rank` pivots are redundant. */
static void find_redundant_rows(cdyn_nullspace *ns, const double *W, int ldw, int rank)
{
    int n = ns->n, m = ns->m;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) ns->qr[j + (size_t)i * n] = W[i + (size_t)j * ldw];
    memset(ns->jpvt, 0, sizeof(int) * (size_t)m);
    cdyn__geqp3(n, m, ns->qr, n, ns->jpvt, ns->tau, ns->lwork_buf, ns->lwork);
    ns->n_redundant = m - rank;
    for (int k = 0; k < ns->n_redundant; ++k) ns->redundant[k] = ns->jpvt[rank + k] - 1;
    sort_indices(ns->redundant, ns->n_redundant, m, ns->mark);
}

/* Among the preferred states, the (at most m) columns of W that a pivoted
 * QR of those columns alone ranks as independent: flagged in ns->mark, to be
 * placed first in the QR of the whole W. Returns how many. */
static int choose_preferred(cdyn_nullspace *ns, const double *W, int ldw)
{
    int n = ns->n, m = ns->m, count = 0;
    int *columns = ns->scratch.order; /* free until the partition is written */
    for (int j = 0; j < n; ++j)
        if (ns->prefer[j]) {
            memcpy(ns->qr + (size_t)count * m, W + (size_t)j * ldw, sizeof(double) * m);
            columns[count++] = j;
        }
    memset(ns->mark, 0, sizeof(int) * (size_t)n);
    if (count == 0) return 0;
    memset(ns->jpvt, 0, sizeof(int) * (size_t)count);
    cdyn__geqp3(m, count, ns->qr, m, ns->jpvt, ns->tau, ns->lwork_buf, ns->lwork);
    int limit = count < m ? count : m;
    double r11 = fabs(ns->qr[0]);
    int chosen = 0;
    while (chosen < limit && r11 > 0.0 &&
           fabs(ns->qr[chosen + (size_t)chosen * m]) > ns->rank_tol * r11)
        ++chosen;
    for (int k = 0; k < chosen; ++k) ns->mark[columns[ns->jpvt[k] - 1]] = 1;
    return chosen;
}

/* Select the partition by pivoted QR of W (T1.2) into the scratch slot and
 * factor it. Preferred states, if any, are taken as dependent first. */
static cdyn_status select_partition(cdyn_nullspace *ns, const char *fn, const double *W,
                                    int ldw)
{
    int n = ns->n, m = ns->m, d = ns->d;
    int *order = ns->scratch.order;
    ns->n_redundant = 0;
    if (m == 0) {
        for (int j = 0; j < n; ++j) order[j] = j;
        ns->scratch.cond = 1.0;
        ns->rank = 0;
        return CDYN_OK;
    }
    int leading = ns->has_preference ? choose_preferred(ns, W, ldw) : 0;
    for (int j = 0; j < n; ++j) memcpy(ns->qr + (size_t)j * m, W + (size_t)j * ldw,
                                       sizeof(double) * m);
    /* dgeqp3 moves columns with jpvt != 0 to the front unpivoted */
    for (int j = 0; j < n; ++j) ns->jpvt[j] = leading > 0 ? ns->mark[j] : 0;
    int info = cdyn__geqp3(m, n, ns->qr, m, ns->jpvt, ns->tau, ns->lwork_buf, ns->lwork);
    if (info != 0)
        return cdyn__fail(ns->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 returned info = %d", fn, info);
    /* Rank: pivots |R_jj| above tol * max |R_jj| (T2.2 applied to W); the
     * free pivots decrease, the leading block is independent by choice. */
    double r11 = 0.0;
    for (int j = 0; j < m; ++j) r11 = fmax(r11, fabs(ns->qr[j + (size_t)j * m]));
    int rank = 0;
    while (rank < m && r11 > 0.0 && fabs(ns->qr[rank + (size_t)rank * m]) > ns->rank_tol * r11)
        ++rank;
    ns->rank = rank;
    if (rank < m) {
        double rlast = fabs(ns->qr[rank + (size_t)rank * m]);
        find_redundant_rows(ns, W, ldw, rank);
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: W is rank deficient (rank %d < m = %d; |R(%d,%d)|/max|R(j,j)| = "
                          "%.3g <= tol %.3g); dependent constraint row%s %d%s",
                          fn, rank, m, rank, rank, r11 > 0.0 ? rlast / r11 : 0.0, ns->rank_tol,
                          ns->n_redundant > 1 ? "s" : "", ns->redundant[0],
                          ns->n_redundant > 1 ? " ..." : "");
    }
    /* First m pivot columns are the dependent states; both sets sorted so
     * vbar keeps the caller's state order. */
    for (int j = 0; j < m; ++j) order[d + j] = ns->jpvt[j] - 1;
    for (int j = 0; j < d; ++j) order[j] = ns->jpvt[m + j] - 1;
    sort_indices(order, d, n, ns->mark);
    sort_indices(order + d, m, n, ns->mark);
    if (factor_scratch(ns, W, ldw) != 0)
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

cdyn_status cdyn_nullspace_factor(cdyn_nullspace *ns, const double *W, int ldw)
{
    if (!ns) return CDYN_ERR_ARG;
    cdyn_status st = check_w(ns, "cdyn_nullspace_factor", W, ldw);
    if (st == CDYN_OK) st = select_partition(ns, "cdyn_nullspace_factor", W, ldw);
    if (st == CDYN_OK) commit_scratch(ns);
    return st;
}

cdyn_status cdyn_nullspace_update(cdyn_nullspace *ns, const double *W, int ldw, int *changed)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_update";
    cdyn_status st = check_w(ns, fn, W, ldw);
    if (st != CDYN_OK) return st;
    int keep = ns->factored;
    if (keep && ns->m > 0) {
        memcpy(ns->scratch.order, ns->current.order, sizeof(int) * (size_t)ns->n);
        keep = factor_scratch(ns, W, ldw) == 0 && ns->scratch.cond <= ns->cond_limit;
    } else if (keep) {
        memcpy(ns->scratch.order, ns->current.order, sizeof(int) * (size_t)ns->n);
        ns->scratch.cond = 1.0;
    }
    if (!keep) {
        st = select_partition(ns, fn, W, ldw);
        if (st != CDYN_OK) return st;
    }
    int was_changed = commit_scratch(ns);
    if (changed) *changed = was_changed;
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_partition(cdyn_nullspace *ns, int *independent, int *dependent)
{
    if (!ns) return CDYN_ERR_ARG;
    if (!ns->factored)
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "cdyn_nullspace_partition: no factorization yet; call "
                          "cdyn_nullspace_factor first");
    if (independent) memcpy(independent, ns->current.order, sizeof(int) * (size_t)ns->d);
    if (dependent)
        memcpy(dependent, ns->current.order + ns->d, sizeof(int) * (size_t)ns->m);
    return CDYN_OK;
}

double cdyn_nullspace_condition(const cdyn_nullspace *ns)
{
    return (ns && ns->factored) ? ns->current.cond : -1.0;
}

int cdyn_nullspace_rank(const cdyn_nullspace *ns) { return ns ? ns->rank : -1; }

double cdyn_nullspace_dependence(const cdyn_nullspace *ns)
{
    if (!ns || !ns->factored) return -1.0;
    double largest = 0.0; /* beta = -W2^{-1} W1 */
    for (size_t k = 0; k < (size_t)ns->m * ns->d; ++k)
        largest = fmax(largest, fabs(ns->current.beta[k]));
    return largest;
}

int cdyn_nullspace_redundant_rows(const cdyn_nullspace *ns, int *rows)
{
    if (!ns) return -1;
    if (rows) memcpy(rows, ns->redundant, sizeof(int) * (size_t)ns->n_redundant);
    return ns->n_redundant;
}

const char *cdyn_nullspace_last_error(const cdyn_nullspace *ns)
{
    return ns ? ns->msg : "cdyn_nullspace: NULL object";
}

/* ---- per-step calls: validation ------------------------------------- */

static cdyn_status check_ready(cdyn_nullspace *ns, const char *fn)
{
    if (!ns->factored)
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "%s: no factorization yet; call cdyn_nullspace_factor first", fn);
    return CDYN_OK;
}

static cdyn_status check_ptr(cdyn_nullspace *ns, const char *fn, const void *p,
                             const char *name)
{
    if (!p) return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    return CDYN_OK;
}

static cdyn_status check_ld(cdyn_nullspace *ns, const char *fn, int ld, int rows,
                            const char *name)
{
    if (ld < cdyn__max(rows, 1))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s = %d < max(1, %d)", fn, name, ld,
                          rows);
    return CDYN_OK;
}

static cdyn_status check_finite(cdyn_nullspace *ns, const char *fn, int rows, int cols,
                                const double *A, int ld, const char *name)
{
    if (!A || rows == 0) return CDYN_OK;
    long bad = cdyn__first_nonfinite(rows, cols, A, ld);
    if (bad < 0) return CDYN_OK;
    if (cols == 1)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] is not finite", fn, name,
                          bad);
    return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: %s(%ld, %ld) is not finite", fn, name,
                      bad % rows, bad / rows);
}

/* The M, F, c inputs shared by reduce, recover and solve. */
static cdyn_status check_dynamics(cdyn_nullspace *ns, const char *fn, const double *M, int ldm,
                                  const double *F, const double *c)
{
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, M, "M");
    if (!st) st = check_ptr(ns, fn, F, "F");
    if (!st) st = check_ld(ns, fn, ldm, ns->n, "ldm");
    if (!st) st = check_finite(ns, fn, ns->n, ns->n, M, ldm, "M");
    if (!st) st = check_finite(ns, fn, ns->n, 1, F, ns->n, "F");
    if (!st) st = check_finite(ns, fn, ns->m, 1, c, ns->m, "c");
    return st;
}

/* ---- per-step calls: the maths --------------------------------------- */

cdyn_status cdyn_nullspace_alpha(cdyn_nullspace *ns, double *alpha, int ldalpha)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_alpha";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, alpha, "alpha");
    if (!st) st = check_ld(ns, fn, ldalpha, ns->n, "ldalpha");
    if (st) return st;
    /* T1.2: alpha = Pi [I_d; beta] */
    const partition *p = &ns->current;
    for (int j = 0; j < ns->d; ++j) {
        double *col = alpha + (size_t)j * ldalpha;
        memset(col, 0, sizeof(double) * (size_t)ns->n);
        col[p->order[j]] = 1.0;
        for (int i = 0; i < ns->m; ++i) col[p->order[ns->d + i]] = p->beta[i + (size_t)j * ns->m];
    }
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_alpha_dot(cdyn_nullspace *ns, const double *Wdot, int ldwdot,
                                     double *alpha_dot, int ldalpha_dot)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_alpha_dot";
    int n = ns->n, m = ns->m, d = ns->d;
    cdyn_status st = check_ready(ns, fn);
    if (!st && m > 0) st = check_ptr(ns, fn, Wdot, "Wdot");
    if (!st) st = check_ptr(ns, fn, alpha_dot, "alpha_dot");
    if (!st) st = check_ld(ns, fn, ldwdot, m, "ldwdot");
    if (!st) st = check_ld(ns, fn, ldalpha_dot, n, "ldalpha_dot");
    if (!st) st = check_finite(ns, fn, m, n, Wdot, ldwdot, "Wdot");
    if (st) return st;
    /* T1.3: lower block = -W2^{-1} (W1' + W2' beta), beta = -W2^{-1} W1 */
    const partition *p = &ns->current;
    double *block = ns->rates_dep; /* m x d */
    for (int j = 0; j < d; ++j)
        memcpy(block + (size_t)j * m, Wdot + (size_t)p->order[j] * ldwdot, sizeof(double) * m);
    for (int k = 0; k < m; ++k) { /* block += W2'(:, k) beta(k, :) */
        const double *w2dot_col = Wdot + (size_t)p->order[d + k] * ldwdot;
        for (int j = 0; j < d; ++j) {
            double b = p->beta[k + (size_t)j * m];
            for (int i = 0; i < m; ++i) block[i + (size_t)j * m] += w2dot_col[i] * b;
        }
    }
    cdyn__getrs('N', m, d, p->w2_lu, m, p->ipiv, block, m);
    for (int j = 0; j < d; ++j) {
        double *col = alpha_dot + (size_t)j * ldalpha_dot;
        memset(col, 0, sizeof(double) * (size_t)n);
        for (int i = 0; i < m; ++i) col[p->order[d + i]] = -block[i + (size_t)j * m];
    }
    return CDYN_OK;
}

/* v = Pi [vbar; beta vbar - W2^{-1} c] into v (validation done). */
static void complete_into(cdyn_nullspace *ns, const double *vbar, const double *c, double *v);

cdyn_status cdyn_nullspace_expand(cdyn_nullspace *ns, const double *vbar, double *v)
{
    return cdyn_nullspace_complete(ns, vbar, NULL, v);
}

cdyn_status cdyn_nullspace_complete(cdyn_nullspace *ns, const double *vbar, const double *c,
                                    double *v)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = c ? "cdyn_nullspace_complete" : "cdyn_nullspace_expand";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, vbar, "vbar");
    if (!st) st = check_ptr(ns, fn, v, "v");
    if (!st) st = check_finite(ns, fn, ns->d, 1, vbar, ns->d, "vbar");
    if (!st) st = check_finite(ns, fn, ns->m, 1, c, ns->m, "c");
    if (st) return st;
    complete_into(ns, vbar, c, v);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_independent(cdyn_nullspace *ns, const double *v, double *vbar)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_independent";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, v, "v");
    if (!st) st = check_ptr(ns, fn, vbar, "vbar");
    if (!st) st = check_finite(ns, fn, ns->n, 1, v, ns->n, "v");
    if (st) return st;
    for (int j = 0; j < ns->d; ++j) vbar[j] = v[ns->current.order[j]];
    return CDYN_OK;
}

/* Dependent block of alpha' vbar (T1.3): -W2^{-1} c into ns->vec_m
 * (zero when c is NULL). */
static void rate_offset(cdyn_nullspace *ns, const double *c)
{
    int m = ns->m;
    if (!c) {
        memset(ns->vec_m, 0, sizeof(double) * (size_t)cdyn__max(m, 1));
        return;
    }
    for (int i = 0; i < m; ++i) ns->vec_m[i] = -c[i];
    cdyn__getrs('N', m, 1, ns->current.w2_lu, m, ns->current.ipiv, ns->vec_m, m);
}

static void complete_into(cdyn_nullspace *ns, const double *vbar, const double *c, double *v)
{
    /* T1.2: v = Pi [vbar; beta vbar + offset], offset = -W2^{-1} c (T1.5) */
    const partition *p = &ns->current;
    rate_offset(ns, c);
    cdyn__gemv('N', ns->m, ns->d, 1.0, p->beta, cdyn__max(ns->m, 1), vbar, 1.0, ns->vec_m);
    for (int j = 0; j < ns->d; ++j) v[p->order[j]] = vbar[j];
    for (int i = 0; i < ns->m; ++i) v[p->order[ns->d + i]] = ns->vec_m[i];
}

/* Mbar = alpha^T M alpha and Fbar = alpha^T (F - M alpha' vbar) (T1.4),
 * written to caller arrays; validation done. */
static void reduce_into(cdyn_nullspace *ns, const double *M, int ldm, const double *F,
                        const double *c, double *Mbar, int ldmbar, double *Fbar)
{
    int n = ns->n, m = ns->m, d = ns->d, m1 = cdyn__max(m, 1);
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    /* M alpha = M[:, ind] + M[:, dep] beta */
    for (int j = 0; j < d; ++j)
        memcpy(ns->m_alpha + (size_t)j * n, M + (size_t)ind[j] * ldm, sizeof(double) * n);
    for (int j = 0; j < m; ++j)
        memcpy(ns->m_dep + (size_t)j * n, M + (size_t)dep[j] * ldm, sizeof(double) * n);
    cdyn__gemm('N', 'N', n, d, m, 1.0, ns->m_dep, n, p->beta, m1, 1.0, ns->m_alpha, n);
    /* alpha^T (M alpha) = (M alpha)[ind, :] + beta^T (M alpha)[dep, :] */
    for (int j = 0; j < d; ++j) {
        for (int i = 0; i < d; ++i)
            Mbar[i + (size_t)j * ldmbar] = ns->m_alpha[ind[i] + (size_t)j * n];
        for (int i = 0; i < m; ++i) ns->rates_dep[i + (size_t)j * m1] =
            ns->m_alpha[dep[i] + (size_t)j * n];
    }
    cdyn__gemm('T', 'N', d, d, m, 1.0, p->beta, m1, ns->rates_dep, m1, 1.0, Mbar, ldmbar);
    for (int j = 0; j < d; ++j) /* symmetric by construction; remove rounding skew */
        for (int i = j + 1; i < d; ++i) {
            double mean = 0.5 * (Mbar[i + (size_t)j * ldmbar] + Mbar[j + (size_t)i * ldmbar]);
            Mbar[i + (size_t)j * ldmbar] = Mbar[j + (size_t)i * ldmbar] = mean;
        }
    /* g = F - M alpha' vbar = F - M[:, dep] offset;  Fbar = g[ind] + beta^T g[dep] */
    rate_offset(ns, c);
    memcpy(ns->vec_n, F, sizeof(double) * (size_t)n);
    cdyn__gemv('N', n, m, -1.0, ns->m_dep, n, ns->vec_m, 1.0, ns->vec_n);
    for (int i = 0; i < m; ++i) ns->vec_m[i] = ns->vec_n[dep[i]];
    for (int j = 0; j < d; ++j) Fbar[j] = ns->vec_n[ind[j]];
    cdyn__gemv('T', m, d, 1.0, p->beta, m1, ns->vec_m, 1.0, Fbar);
}

/* v' and lambda from vbar' (T1.5); validation done. */
static void recover_into(cdyn_nullspace *ns, const double *M, int ldm, const double *F,
                         const double *c, const double *vbar_dot, double *vdot, double *lambda)
{
    int n = ns->n, m = ns->m, d = ns->d;
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    /* vhat' = -W2^{-1}(W1 vbar' + c) = beta vbar' - W2^{-1} c */
    rate_offset(ns, c);
    cdyn__gemv('N', m, d, 1.0, p->beta, cdyn__max(m, 1), vbar_dot, 1.0, ns->vec_m);
    for (int j = 0; j < d; ++j) ns->vec_n[ind[j]] = vbar_dot[j];
    for (int i = 0; i < m; ++i) ns->vec_n[dep[i]] = ns->vec_m[i];
    if (lambda && m > 0) {
        /* lambda = W2^{-T} (M v' - F)[dep] */
        for (int i = 0; i < m; ++i) {
            const double *row = M + dep[i];
            double s = -F[dep[i]];
            for (int k = 0; k < n; ++k) s += row[(size_t)k * ldm] * ns->vec_n[k];
            ns->vec_m[i] = s;
        }
        cdyn__getrs('T', m, 1, p->w2_lu, m, p->ipiv, ns->vec_m, m);
        memcpy(lambda, ns->vec_m, sizeof(double) * (size_t)m);
    }
    memcpy(vdot, ns->vec_n, sizeof(double) * (size_t)n);
}

cdyn_status cdyn_nullspace_reduce(cdyn_nullspace *ns, const double *M, int ldm,
                                  const double *F, const double *c, double *Mbar, int ldmbar,
                                  double *Fbar)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_reduce";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, Mbar, "Mbar");
    if (!st) st = check_ptr(ns, fn, Fbar, "Fbar");
    if (!st) st = check_ld(ns, fn, ldmbar, ns->d, "ldmbar");
    if (st) return st;
    reduce_into(ns, M, ldm, F, c, Mbar, ldmbar, Fbar);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_recover(cdyn_nullspace *ns, const double *M, int ldm,
                                   const double *F, const double *c, const double *vbar_dot,
                                   double *vdot, double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_recover";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vbar_dot, "vbar_dot");
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (!st) st = check_finite(ns, fn, ns->d, 1, vbar_dot, ns->d, "vbar_dot");
    if (st) return st;
    recover_into(ns, M, ldm, F, c, vbar_dot, vdot, lambda);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_solve(cdyn_nullspace *ns, const double *M, int ldm,
                                 const double *F, const double *c, double *vdot,
                                 double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_solve";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (st) return st;
    int d = ns->d;
    reduce_into(ns, M, ldm, F, c, ns->mass_reduced, d, ns->force_reduced);
    int info = cdyn__potrf(d, ns->mass_reduced, d);
    if (info > 0)
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: reduced mass matrix alpha^T M alpha is not positive definite "
                          "(leading minor %d)",
                          fn, info);
    cdyn__potrs(d, 1, ns->mass_reduced, d, ns->force_reduced, d);
    recover_into(ns, M, ldm, F, c, ns->force_reduced, vdot, lambda);
    return CDYN_OK;
}
