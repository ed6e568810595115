/* Null-space reduction of linear velocity constraints (THEORY T1): the
 * object, the choice of the partition and the factorization of W2 (T1.2). */
#include "nullspace_internal.h"
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
