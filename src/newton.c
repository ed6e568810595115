/* Newton's method with pivoted-QR steps and an SVD outer-inverse fallback
 * (THEORY T2). */
#include "cdyn/newton.h"

#include "internal.h"
#include "linalg.h"
#include "newton_internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum factor_mode { MODE_QR_SQUARE, MODE_QR_WIDE, MODE_SVD };

struct cdyn_newton {
    int k, p;
    enum factor_mode mode; /* how the last Jacobian was factored */
    int rank;             /* rank by the tolerance */
    int rank_used;        /* singular values the SVD apply uses (>= rank when widened) */
    int rank_numerical;   /* singular values above max(k, p) eps s_0 */
    double smallest_kept, largest_dropped;
    int max_iterations;
    int max_backtracks;
    double residual_tol, step_tol, rank_tol, fd_step;
    cdyn_newton_report report;
    int n_dependent_rows, n_dropped_cols;
    int *dependent_rows;  /* k */
    int *dropped_cols;    /* p */
    /* workspace, sized at create */
    double *factor;       /* k*p: QR of J or J^T, or the SVD's copy of J */
    double *tau;          /* k */
    int *jpvt;            /* p */
    double *sv;           /* k singular values */
    double *u;            /* k x k */
    double *vt;           /* k x p */
    double *work;
    int lwork;
    double *jac;          /* k x p Jacobian */
    double *g;            /* k residual */
    double *g_shifted;    /* k, finite differences */
    double *rhs;          /* p, right-hand side / solution of the step */
    double *dx;           /* p */
    double *x_best;       /* p */
    double *x_prev;       /* p, iterate before a widened step */
    double *g_prev;       /* k */
    char msg[CDYN__MSG_LEN];
};

cdyn_newton *cdyn_newton_create(int k, int p, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (k < 1 || p < k || (size_t)k * (size_t)p > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_newton *nt = calloc(1, sizeof *nt);
    if (!nt) goto fail;
    nt->k = k;
    nt->p = p;
    nt->max_iterations = 20;
    nt->residual_tol = 1e-10;
    nt->step_tol = 1e-12;
    nt->rank_tol = 1e-10;
    nt->fd_step = 1.5e-8;
    int lwork = cdyn__geqp3_lwork(k, p);
    lwork = cdyn__max(lwork, cdyn__geqp3_lwork(p, k));
    lwork = cdyn__max(lwork, cdyn__gesvd_lwork(k, p));
    lwork = cdyn__max(lwork, cdyn__ormqr_lwork('L', 'T', k, 1, k));
    lwork = cdyn__max(lwork, cdyn__ormqr_lwork('L', 'N', p, 1, k));
    nt->lwork = lwork;
    nt->work = malloc(sizeof(double) * (size_t)lwork);
    nt->dependent_rows = malloc(sizeof(int) * (size_t)k);
    nt->dropped_cols = malloc(sizeof(int) * (size_t)p);
    nt->factor = malloc(sizeof(double) * (size_t)k * p);
    nt->tau = malloc(sizeof(double) * (size_t)k);
    nt->jpvt = malloc(sizeof(int) * (size_t)p);
    nt->sv = malloc(sizeof(double) * (size_t)k);
    nt->u = malloc(sizeof(double) * (size_t)k * k);
    nt->vt = malloc(sizeof(double) * (size_t)k * p);
    nt->jac = malloc(sizeof(double) * (size_t)k * p);
    nt->g = malloc(sizeof(double) * (size_t)k);
    nt->g_shifted = malloc(sizeof(double) * (size_t)k);
    nt->rhs = malloc(sizeof(double) * (size_t)p);
    nt->dx = malloc(sizeof(double) * (size_t)p);
    nt->x_best = malloc(sizeof(double) * (size_t)p);
    nt->x_prev = malloc(sizeof(double) * (size_t)p);
    nt->g_prev = malloc(sizeof(double) * (size_t)k);
    if (!nt->work || !nt->dependent_rows || !nt->dropped_cols || !nt->factor || !nt->tau ||
        !nt->jpvt || !nt->sv || !nt->u || !nt->vt || !nt->jac || !nt->g || !nt->g_shifted ||
        !nt->rhs || !nt->dx || !nt->x_best || !nt->x_prev || !nt->g_prev)
        goto fail;
    *status = CDYN_OK;
    return nt;
fail:
    cdyn_newton_free(nt);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

void cdyn_newton_free(cdyn_newton *nt)
{
    if (!nt) return;
    free(nt->work);
    free(nt->dependent_rows);
    free(nt->dropped_cols);
    free(nt->factor);
    free(nt->tau);
    free(nt->jpvt);
    free(nt->sv);
    free(nt->u);
    free(nt->vt);
    free(nt->jac);
    free(nt->g);
    free(nt->g_shifted);
    free(nt->rhs);
    free(nt->dx);
    free(nt->x_best);
    free(nt->x_prev);
    free(nt->g_prev);
    free(nt);
}

cdyn_status cdyn_newton_set_max_iterations(cdyn_newton *nt, int max_iterations)
{
    if (!nt) return CDYN_ERR_ARG;
    if (max_iterations < 1)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG,
                          "cdyn_newton_set_max_iterations: %d < 1", max_iterations);
    nt->max_iterations = max_iterations;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_max_backtracks(cdyn_newton *nt, int max_backtracks)
{
    if (!nt) return CDYN_ERR_ARG;
    if (max_backtracks < 0 || max_backtracks > 60)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG,
                          "cdyn_newton_set_max_backtracks: %d is not in [0, 60]", max_backtracks);
    nt->max_backtracks = max_backtracks;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_tolerances(cdyn_newton *nt, double residual_tol, double step_tol)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!(residual_tol >= 0.0) || !(step_tol >= 0.0) || isinf(residual_tol) ||
        isinf(step_tol) || (residual_tol == 0.0 && step_tol == 0.0))
        return cdyn__fail(nt->msg, CDYN_ERR_ARG,
                          "cdyn_newton_set_tolerances: residual_tol = %g, step_tol = %g "
                          "(each finite and >= 0, not both 0)",
                          residual_tol, step_tol);
    nt->residual_tol = residual_tol;
    nt->step_tol = step_tol;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_rank_tolerance(cdyn_newton *nt, double tol)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(nt->msg, CDYN_ERR_ARG,
                          "cdyn_newton_set_rank_tolerance: tol = %g is not in (0, 1)", tol);
    nt->rank_tol = tol;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_fd_step(cdyn_newton *nt, double h)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!(h > 0.0 && h < 1.0))
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "cdyn_newton_set_fd_step: h = %g is not in (0, 1)",
                          h);
    nt->fd_step = h;
    return CDYN_OK;
}

static double norm_inf(int n, const double *x)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Count the leading pivots |R_jj| > tol |R_00| of a pivoted QR held in a
 * (ld x *) array with `count` diagonal entries. */
static int qr_rank(const double *qr, int ld, int count, double tol, double *smallest_kept)
{
    double r00 = fabs(qr[0]);
    int rank = 0;
    while (rank < count && r00 > 0.0 && fabs(qr[rank + (size_t)rank * ld]) > tol * r00) ++rank;
    *smallest_kept = rank > 0 ? fabs(qr[(rank - 1) + (size_t)(rank - 1) * ld]) : 0.0;
    return rank;
}

/* Pivoted QR of J^T (p x k) into nt->factor; returns the rank. The column
 * pivots rank the equations (rows of J). */
static int factor_transpose(cdyn_newton *nt, const double *J, int ldj, double *smallest)
{
    int k = nt->k, p = nt->p;
    for (int i = 0; i < k; ++i)
        for (int j = 0; j < p; ++j) nt->factor[j + (size_t)i * p] = J[i + (size_t)j * ldj];
    memset(nt->jpvt, 0, sizeof(int) * (size_t)k);
    cdyn__geqp3(p, k, nt->factor, p, nt->jpvt, nt->tau, nt->work, nt->lwork);
    return qr_rank(nt->factor, p, k, nt->rank_tol, smallest);
}

/* Pivoted QR of J (k x p) into nt->factor; returns the rank. The column
 * pivots rank the unknowns. */
static int factor_direct(cdyn_newton *nt, const double *J, int ldj, double *smallest)
{
    int k = nt->k, p = nt->p;
    for (int j = 0; j < p; ++j)
        memcpy(nt->factor + (size_t)j * k, J + (size_t)j * ldj, sizeof(double) * (size_t)k);
    memset(nt->jpvt, 0, sizeof(int) * (size_t)p);
    cdyn__geqp3(k, p, nt->factor, k, nt->jpvt, nt->tau, nt->work, nt->lwork);
    return qr_rank(nt->factor, k, k, nt->rank_tol, smallest);
}

/* "Why singular" (T2.3): equations the pivoted QR of J^T ranks after the
 * rank, unknowns the pivoted QR of J ranks after the rank. */
static void diagnose(cdyn_newton *nt, const double *J, int ldj, int rank)
{
    double unused;
    int rank_rows = factor_transpose(nt, J, ldj, &unused);
    if (rank_rows > rank) rank_rows = rank;
    nt->n_dependent_rows = nt->k - rank_rows;
    for (int i = 0; i < nt->n_dependent_rows; ++i)
        nt->dependent_rows[i] = nt->jpvt[rank_rows + i] - 1;
    int rank_cols = factor_direct(nt, J, ldj, &unused);
    if (rank_cols > rank) rank_cols = rank;
    nt->n_dropped_cols = nt->p - rank_cols;
    for (int j = 0; j < nt->n_dropped_cols; ++j) nt->dropped_cols[j] = nt->jpvt[rank_cols + j] - 1;
}

/* SVD J = U S V^T into nt->u, nt->sv, nt->vt; the rank from the singular
 * values (T2.3). */
static void factor_svd(cdyn_newton *nt, const double *J, int ldj)
{
    int k = nt->k, p = nt->p;
    for (int j = 0; j < p; ++j)
        memcpy(nt->factor + (size_t)j * k, J + (size_t)j * ldj, sizeof(double) * (size_t)k);
    cdyn__gesvd(k, p, nt->factor, k, nt->sv, nt->u, k, nt->vt, k, nt->work, nt->lwork);
    int rank = 0;
    while (rank < k && nt->sv[0] > 0.0 && nt->sv[rank] > nt->rank_tol * nt->sv[0]) ++rank;
    int numerical = rank;
    double floor = (double)(k > p ? k : p) * DBL_EPSILON * nt->sv[0];
    while (numerical < k && nt->sv[numerical] > floor) ++numerical;
    nt->rank = nt->rank_used = rank;
    nt->rank_numerical = numerical;
    nt->smallest_kept = rank > 0 ? nt->sv[rank - 1] : 0.0;
    nt->largest_dropped = rank < k ? nt->sv[rank] : 0.0;
}

int cdyn__newton_factor(cdyn_newton *nt, const double *J, int ldj)
{
    int k = nt->k;
    double smallest = 0.0;
    int rank = (k == nt->p) ? factor_direct(nt, J, ldj, &smallest)
                            : factor_transpose(nt, J, ldj, &smallest);
    if (rank == k) {
        nt->mode = k == nt->p ? MODE_QR_SQUARE : MODE_QR_WIDE;
        nt->rank = nt->rank_used = nt->rank_numerical = rank;
        nt->smallest_kept = smallest;
        nt->largest_dropped = 0.0;
        return 0;
    }
    diagnose(nt, J, ldj, rank);
    factor_svd(nt, J, ldj);
    nt->mode = MODE_SVD;
    return 1;
}

void cdyn__newton_apply(cdyn_newton *nt, const double *b, double *x)
{
    int k = nt->k, p = nt->p;
    double *y = nt->rhs; /* p */
    switch (nt->mode) {
    case MODE_QR_SQUARE: /* J E = Q R: R z = Q^T b, x = E z */
        memcpy(y, b, sizeof(double) * (size_t)k);
        cdyn__ormqr('L', 'T', k, 1, k, nt->factor, k, nt->tau, y, k, nt->work, nt->lwork);
        cdyn__trsm('L', 'U', 'N', 'N', k, 1, 1.0, nt->factor, k, y, k);
        for (int i = 0; i < k; ++i) x[nt->jpvt[i] - 1] = y[i];
        break;
    case MODE_QR_WIDE: /* J^T E = Q R: R^T z = E^T b, x = Q [z; 0] (minimum norm) */
        for (int i = 0; i < k; ++i) y[i] = b[nt->jpvt[i] - 1];
        cdyn__trsm('L', 'U', 'T', 'N', k, 1, 1.0, nt->factor, p, y, k);
        memset(y + k, 0, sizeof(double) * (size_t)(p - k));
        cdyn__ormqr('L', 'N', p, 1, k, nt->factor, p, nt->tau, y, p, nt->work, nt->lwork);
        memcpy(x, y, sizeof(double) * (size_t)p);
        break;
    case MODE_SVD: /* x = V_r S_r^{-1} U_r^T b (T2.3) */
        for (int i = 0; i < nt->rank_used; ++i) {
            double s = 0.0;
            for (int r = 0; r < k; ++r) s += nt->u[r + (size_t)i * k] * b[r];
            y[i] = s / nt->sv[i];
        }
        cdyn__gemv('T', nt->rank_used, p, 1.0, nt->vt, k, y, 0.0, x);
        break;
    }
}

void cdyn__newton_apply_many(cdyn_newton *nt, const double *B, int ldb, int nrhs, double *X,
                             int ldx)
{
    int k = nt->k;
    if (nt->mode != MODE_QR_SQUARE) { /* column by column through the same solve */
        for (int j = 0; j < nrhs; ++j) {
            memcpy(nt->g_prev, B + (size_t)j * ldb, sizeof(double) * (size_t)k);
            cdyn__newton_apply(nt, nt->g_prev, X + (size_t)j * ldx);
        }
        return;
    }
    /* J E = Q R for all columns at once: Q^T B, R Z = ., X = E Z */
    if (X != B || ldx != ldb)
        for (int j = 0; j < nrhs; ++j)
            memcpy(X + (size_t)j * ldx, B + (size_t)j * ldb, sizeof(double) * (size_t)k);
    for (int j0 = 0; j0 < nrhs; j0 += nt->lwork) { /* dormqr needs lwork >= columns */
        int cols = nrhs - j0 < nt->lwork ? nrhs - j0 : nt->lwork;
        cdyn__ormqr('L', 'T', k, cols, k, nt->factor, k, nt->tau, X + (size_t)j0 * ldx, ldx,
                    nt->work, nt->lwork);
    }
    cdyn__trsm('L', 'U', 'N', 'N', k, nrhs, 1.0, nt->factor, k, X, ldx);
    for (int j = 0; j < nrhs; ++j) {
        double *col = X + (size_t)j * ldx;
        memcpy(nt->rhs, col, sizeof(double) * (size_t)k);
        for (int i = 0; i < k; ++i) col[nt->jpvt[i] - 1] = nt->rhs[i];
    }
}

/* One step dx = -J# G (T2.2; T2.3 when rank deficient). Inputs validated. */
static void newton_direction(cdyn_newton *nt, const double *J, int ldj, const double *G,
                             double *dx)
{
    nt->report.svd_steps += cdyn__newton_factor(nt, J, ldj);
    for (int i = 0; i < nt->k; ++i) nt->g_shifted[i] = -G[i];
    cdyn__newton_apply(nt, nt->g_shifted, dx);
    nt->report.rank = nt->rank;
    nt->report.smallest_kept = nt->smallest_kept;
    nt->report.largest_dropped = nt->largest_dropped;
}

static void report_reset(cdyn_newton *nt)
{
    memset(&nt->report, 0, sizeof nt->report);
    nt->n_dependent_rows = 0;
    nt->n_dropped_cols = 0;
}

cdyn_status cdyn_newton_step(cdyn_newton *nt, const double *J, int ldj, const double *G,
                             double *dx)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_step";
    if (!J || !G || !dx)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !J ? "J" : !G ? "G" : "dx");
    if (ldj < nt->k)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: ldj = %d < k = %d", fn, ldj, nt->k);
    long bad = cdyn__first_nonfinite(nt->k, nt->p, J, ldj);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: J(%ld, %ld) is not finite", fn,
                          bad % nt->k, bad / nt->k);
    bad = cdyn__first_nonfinite(nt->k, 1, G, nt->k);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: G[%ld] is not finite", fn, bad);
    report_reset(nt);
    newton_direction(nt, J, ldj, G, nt->dx);
    memcpy(dx, nt->dx, sizeof(double) * (size_t)nt->p);
    nt->report.iterations = 1;
    nt->report.step_norm = norm_inf(nt->p, dx);
    nt->report.residual_norm = norm_inf(nt->k, G);
    return CDYN_OK;
}

/* Evaluate G(x) into g; non-zero callback codes and NaN become statuses. */
static cdyn_status eval_residual(cdyn_newton *nt, cdyn_residual_fn residual, void *user,
                                 const double *x, double *g)
{
    nt->report.residual_evaluations++;
    int code = residual(x, g, user);
    if (code != 0) {
        nt->report.callback_code = code;
        return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK,
                          "cdyn_newton_solve: residual callback returned %d", code);
    }
    long bad = cdyn__first_nonfinite(nt->k, 1, g, nt->k);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                          "cdyn_newton_solve: residual G[%ld] is not finite", bad);
    return CDYN_OK;
}

/* J at x from the callback, or by forward differences around g = G(x). */
static cdyn_status eval_jacobian(cdyn_newton *nt, cdyn_residual_fn residual,
                                 cdyn_jacobian_fn jacobian, void *user, double *x)
{
    int k = nt->k, p = nt->p;
    if (jacobian) {
        int code = jacobian(x, nt->jac, k, user);
        if (code != 0) {
            nt->report.callback_code = code;
            return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK,
                              "cdyn_newton_solve: Jacobian callback returned %d", code);
        }
        long bad = cdyn__first_nonfinite(k, p, nt->jac, k);
        if (bad >= 0)
            return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                              "cdyn_newton_solve: Jacobian J(%ld, %ld) is not finite",
                              bad % k, bad / k);
        return CDYN_OK;
    }
    for (int j = 0; j < p; ++j) {
        double saved = x[j];
        double h = nt->fd_step * (fabs(saved) > 1.0 ? fabs(saved) : 1.0);
        x[j] = saved + h;
        h = x[j] - saved; /* the step actually representable */
        cdyn_status st = eval_residual(nt, residual, user, x, nt->g_shifted);
        x[j] = saved;
        if (st != CDYN_OK) return st;
        for (int i = 0; i < k; ++i) nt->jac[i + (size_t)j * k] = (nt->g_shifted[i] - nt->g[i]) / h;
    }
    /* differences of finite values can still overflow; LAPACK must not see it */
    if (cdyn__first_nonfinite(k, p, nt->jac, k) >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                          "cdyn_newton_solve: the finite-difference Jacobian overflowed");
    return CDYN_OK;
}

/* On the SVD path: are there numerically non-zero singular values that the
 * rank tolerance dropped? */
static int can_widen(const cdyn_newton *nt)
{
    return nt->mode == MODE_SVD && nt->rank_numerical > nt->rank_used;
}

/* T2.3 refinement: when the truncated step cannot lower a residual that is
 * still above tolerance (it sits in the dropped directions, as next to a
 * double root), step with every numerically non-zero singular value; the
 * line search keeps it only if the residual drops. Returns 1. */
static int widen(cdyn_newton *nt)
{
    nt->rank_used = nt->rank_numerical;
    for (int i = 0; i < nt->k; ++i) nt->g_prev[i] = -nt->g[i];
    cdyn__newton_apply(nt, nt->g_prev, nt->dx);
    return 1;
}

/* x <- x + a dx (T2.1) with a = 1, halved while the residual does not drop
 * below gnorm, at most max_backtracks times. Without must_descend the full
 * step is always taken (plain Newton). When no trial lowers the residual, x
 * and nt->g are restored and *step is 0; otherwise *step = ||a dx||_inf. */
static cdyn_status line_search(cdyn_newton *nt, cdyn_residual_fn residual, void *user,
                               double *x, double gnorm, int must_descend, double *step)
{
    int k = nt->k, p = nt->p;
    memcpy(nt->x_prev, x, sizeof(double) * (size_t)p);
    memcpy(nt->g_prev, nt->g, sizeof(double) * (size_t)k);
    double a = 1.0;
    for (int halvings = 0;; ++halvings) {
        for (int j = 0; j < p; ++j) x[j] = nt->x_prev[j] + a * nt->dx[j];
        cdyn_status st = eval_residual(nt, residual, user, x, nt->g);
        if (st != CDYN_OK) return st;
        if (!must_descend || norm_inf(k, nt->g) < gnorm) {
            *step = a * norm_inf(p, nt->dx);
            return CDYN_OK;
        }
        if (halvings >= nt->max_backtracks) break;
        a *= 0.5;
        nt->report.backtracks++;
    }
    memcpy(x, nt->x_prev, sizeof(double) * (size_t)p);
    memcpy(nt->g, nt->g_prev, sizeof(double) * (size_t)k);
    *step = 0.0;
    return CDYN_OK;
}

cdyn_status cdyn_newton_solve(cdyn_newton *nt, cdyn_residual_fn residual,
                              cdyn_jacobian_fn jacobian, void *user, double *x)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_solve";
    if (!residual) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: residual callback is NULL", fn);
    if (!x) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: x is NULL", fn);
    int k = nt->k, p = nt->p;
    long bad = cdyn__first_nonfinite(p, 1, x, p);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: x[%ld] is not finite", fn, bad);
    report_reset(nt);
    memcpy(nt->x_best, x, sizeof(double) * (size_t)p);
    double best = INFINITY;
    cdyn_status st = eval_residual(nt, residual, user, x, nt->g);
    while (st == CDYN_OK) {
        double gnorm = norm_inf(k, nt->g);
        nt->report.residual_norm = gnorm;
        if (gnorm < best) {
            best = gnorm;
            memcpy(nt->x_best, x, sizeof(double) * (size_t)p);
        }
        if (gnorm <= nt->residual_tol) {
            nt->report.converged = 1;
            return CDYN_OK;
        }
        if (nt->report.iterations >= nt->max_iterations) {
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: no convergence in %d iterations (||G||_inf = %.3e > %.3e)",
                            fn, nt->max_iterations, best, nt->residual_tol);
            break;
        }
        st = eval_jacobian(nt, residual, jacobian, user, x);
        if (st != CDYN_OK) break;
        newton_direction(nt, nt->jac, k, nt->g, nt->dx);
        int widened = 0;
        if (can_widen(nt) && norm_inf(p, nt->dx) <= nt->step_tol * (1.0 + norm_inf(p, x)))
            widened = widen(nt);
        double step = 0.0;
        st = line_search(nt, residual, user, x, gnorm, widened || nt->max_backtracks > 0, &step);
        if (st == CDYN_OK && step == 0.0 && !widened && can_widen(nt)) {
            /* the truncated direction does not descend: retry wider */
            widened = widen(nt);
            st = line_search(nt, residual, user, x, gnorm, 1, &step);
        }
        nt->report.iterations++;
        nt->report.step_norm = step;
        if (st != CDYN_OK) break;
        if (step == 0.0 && !widened) {
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: no descent along the Newton direction after %d step halvings "
                            "(||G||_inf = %.3e)",
                            fn, nt->max_backtracks, gnorm);
            break;
        }
        if (step <= nt->step_tol * (1.0 + norm_inf(p, x))) {
            /* the step can no longer change x: a solution to rounding, or on
             * the SVD path the minimum-norm-type point of T2.3, whose
             * non-zero residual the report gives */
            nt->report.residual_norm = norm_inf(k, nt->g);
            nt->report.converged = 1;
            return CDYN_OK;
        }
    }
    /* failure: hand back the best iterate seen */
    memcpy(x, nt->x_best, sizeof(double) * (size_t)p);
    nt->report.residual_norm = best;
    return st;
}

cdyn_status cdyn_newton_get_report(cdyn_newton *nt, cdyn_newton_report *report)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!report) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "cdyn_newton_get_report: report is NULL");
    *report = nt->report;
    return CDYN_OK;
}

int cdyn_newton_dependent_rows(const cdyn_newton *nt, int *rows)
{
    if (!nt) return -1;
    if (rows) memcpy(rows, nt->dependent_rows, sizeof(int) * (size_t)nt->n_dependent_rows);
    return nt->n_dependent_rows;
}

int cdyn_newton_dropped_columns(const cdyn_newton *nt, int *cols)
{
    if (!nt) return -1;
    if (cols) memcpy(cols, nt->dropped_cols, sizeof(int) * (size_t)nt->n_dropped_cols);
    return nt->n_dropped_cols;
}

const char *cdyn_newton_last_error(const cdyn_newton *nt)
{
    return nt ? nt->msg : "cdyn_newton: NULL object";
}

int cdyn__newton_rank(const cdyn_newton *nt) { return nt->rank; }
