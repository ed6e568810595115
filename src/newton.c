/* Newton's method with pivoted-QR steps and an SVD outer-inverse fallback
 * (THEORY T2), rank decisions by the one rank policy (rank.h) and
 * convergence judged with weighted norms (newton.h). */
#include "cdyn/newton.h"

#include "internal.h"
#include "linalg.h"
#include "newton_internal.h"
#include "jacobian_check.h"
#include "rank.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum factor_mode { MODE_QR_SQUARE, MODE_QR_WIDE, MODE_SVD };

/* Everything sized by the problem, allocated together so that growing it
 * is all or nothing. Capacity k x p. */
typedef struct buffers {
    int k, p;
    cdyn__rank_ws ws;           /* pivoted QR of the equilibrated J or J^T */
    double *row_scale;          /* k: D_r of the current factorization */
    double *col_scale;          /* p: D_c (1 for wide systems) */
    double *sv, *u, *vt;        /* k, k x k, k x p: SVD of the equilibrated J */
    double *svd_copy;           /* k x p */
    double *atol;               /* p */
    double *nominal;            /* p: the largest converged |x_j| told apart from 0 */
    double *reached;            /* p: the largest |x_j| of this solve's iterates */
    double *gtol;               /* k */
    double *jac;                /* k x p */
    double *jac_prev;           /* k x p: J at the iterate before (this solve; ld k) */
    double *g, *g_trial, *g_best; /* k */
    double *g_keep;             /* k: G at x_best */
    double *g_start;            /* k: the terms of no unknown, from the initial guess */
    double *g_base;             /* k: of those, what the guess alone showed (constant_terms) */
    double *fit;                /* 3k: G, sum J x and sum |J x| at the iterate before */
    double *known;              /* k: the owner's size of those terms (next solve) */
    double *noise, *noise_best; /* k: the rounding of G at x, and at g_best's x */
    double *factored;           /* k x p: the J of the current factorization (ld k) */
    double *tol_x, *tol_g;      /* p, k */
    double *rhs, *dx, *x_best, *x_prev; /* p each */
    double *dx_prev;            /* p: the previous Newton correction */
    double *scratch;            /* max(k, p) */
    double *col_abs;            /* k: |J_ij| of one column's equations with other terms */
    double *packed;             /* k x p: J's non-zeros by columns (pack_columns) */
    int *packed_rows;           /* k x p: their rows */
    int *packed_start;          /* p + 1: column j's at packed_start[j] .. [j + 1] - 1 */
    int *col_rows;              /* k: their rows */
    int *idle;                  /* k: the unknowns at exactly 0 with a non-zero J_ij, per row */
    double *size_scale, *size_active; /* k each: the factors equations' terms are compared by */
    int *dependent_rows;        /* k */
    int *dropped_cols;          /* p */
    /* the square QR kept for chord starts (cdyn__newton_keep_for_chord) */
    double *kept_qr, *kept_jac; /* k x p (k x k used, ld k) */
    double *kept_tau, *kept_row_scale, *kept_col_scale; /* k, k, p */
    int *kept_jpvt;             /* p */
} buffers;

struct cdyn_newton {
    int k, p;                   /* problem size (<= capacity) */
    buffers b;
    enum factor_mode mode;      /* how the last Jacobian was factored */
    int rank;                   /* rank by the tolerance */
    int rank_used;              /* singular values the SVD apply uses (>= rank when widened) */
    int rank_numerical;         /* singular values above max(k, p) eps s_0 */
    double smallest_kept, largest_dropped; /* relative to the largest */
    int max_iterations, max_backtracks;
    double rtol, rank_tol, fd_step;
    int has_atol, has_gtol;
    cdyn_newton_report report;
    cdyn_newton_counters counters; /* since create or the last reset */
    int solving;                /* a solve past its argument checks (counted) */
    int n_dependent_rows, n_dropped_cols;
    int solution_factored;      /* the last factorization is that of J at the solution */
    int near_factored;          /* ... or of J one full step before it (cdyn__newton_set_judge_near) */
    int judge_near;             /* accept on the last factorization's correction */
    int min_norm_square;        /* square J# minimum-norm in x (cdyn__newton_set_min_norm) */
    int rank_cap;               /* at most this rank per step, 0: none (cdyn__newton_set_rank_cap) */
    int differenced;            /* the owner's Jacobian callback is a difference quotient */
    int has_known;              /* b.known holds the owner's terms for the next solve */
    const int *observed_count;  /* the owner's rows besides G, filled by its Jacobian */
    const double *observed_coef, *observed_size; /* callback (this solve;
                                 * cdyn__newton_set_observed_rows) */
    int observed_ld;
    const double *noise_source; /* the owner's rounding of G, filled by its residual
                                 * callback (this solve; cdyn__newton_set_residual_noise) */
    int factored_valid;         /* b.factored is the J of the current factorization */
    int jac_prev_valid;         /* b.jac_prev is J at the iterate before b.jac's (this solve) */
    int fit_valid;              /* b.fit holds an earlier iterate of this solve */
    int fit_pair;               /* constant_terms fitted over two iterates at this one */
    int learned_unchecked;      /* tolerances() trusted a learned magnitude (below) */
    int factored_result;        /* what cdyn__newton_factor returned for it */
    const double *packed_from;  /* the J whose non-zeros b.packed holds, or NULL */
    int has_ops;                /* the Jacobian is the owner's (cdyn__newton_create_linear) */
    cdyn__newton_linear ops;
    int chord;                  /* start solves with chord steps (cdyn__newton_set_chord) */
    int kept_valid;             /* b.kept_* hold a factorization for them */
    int r_diagonal;             /* the square QR is Q = I, R diagonal (factor_scaled_permutation) */
    int kept_r_diagonal;        /* ... and so is the kept one */
    cdyn__guard guard;
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* ---- buffers ------------------------------------------------------------ */

static void buffers_free(buffers *b)
{
    cdyn__rank_ws_free(&b->ws);
    double *arrays[] = {b->g_start, b->g_base, b->row_scale, b->col_scale, b->sv, b->u, b->vt,
                        b->svd_copy,  b->atol,      b->nominal, b->reached, b->gtol, b->jac,
                        b->g,         b->g_trial,   b->g_best,  b->tol_x,  b->tol_g,
                        b->rhs,       b->dx,        b->x_best,  b->x_prev, b->scratch,
                        b->g_keep,    b->dx_prev,   b->known,   b->factored, b->jac_prev,
                        b->noise,     b->noise_best,
                        b->kept_qr,   b->kept_jac,  b->kept_tau, b->kept_row_scale,
                        b->kept_col_scale, b->col_abs, b->fit};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(b->col_rows);
    free(b->idle);
    free(b->size_scale);
    free(b->size_active);
    free(b->packed);
    free(b->packed_rows);
    free(b->packed_start);
    free(b->dependent_rows);
    free(b->dropped_cols);
    free(b->kept_jpvt);
    memset(b, 0, sizeof *b);
}

static double *doubles(size_t count) { return calloc(count > 0 ? count : 1, sizeof(double)); }

/* Allocate for k x p; 0 when out of memory (b freed). Without dense, none
 * of the k x p buffers (the owner keeps J: cdyn__newton_create_linear). */
static int buffers_alloc(buffers *b, int k, int p, int dense)
{
    memset(b, 0, sizeof *b);
    b->k = k;
    b->p = p;
    size_t kk = (size_t)k, pp = (size_t)p, big = (size_t)cdyn__max(k, p);
    size_t kp = dense ? kk * pp : 1, k2 = dense ? kk * kk : 1;
    int ok = 1;
    if (dense) {
        int lwork = cdyn__gesvd_lwork(k, p);
        lwork = cdyn__max(lwork, cdyn__ormqr_lwork('L', 'T', k, 1, k));
        lwork = cdyn__max(lwork, cdyn__ormqr_lwork('L', 'N', p, 1, k));
        ok = cdyn__rank_ws_init(&b->ws, k, p, lwork);
    }
    b->row_scale = doubles(kk);
    b->col_scale = doubles(pp);
    b->sv = doubles(kk);
    b->u = doubles(k2);
    b->vt = doubles(kp);
    b->svd_copy = doubles(kp);
    b->atol = doubles(pp);
    b->nominal = doubles(pp);
    b->reached = doubles(pp);
    b->gtol = doubles(kk);
    b->jac = doubles(kp);
    b->jac_prev = doubles(kp);
    b->g = doubles(kk);
    b->g_trial = doubles(kk);
    b->g_best = doubles(kk);
    b->g_start = doubles(kk);
    b->g_base = doubles(kk);
    b->fit = doubles(3 * kk);
    b->known = doubles(kk);
    b->noise = doubles(kk);
    b->noise_best = doubles(kk);
    b->factored = doubles(kp);
    b->g_keep = doubles(kk);
    b->dx_prev = doubles(pp);
    b->tol_x = doubles(pp);
    b->tol_g = doubles(kk);
    b->rhs = doubles(pp);
    b->dx = doubles(pp);
    b->x_best = doubles(pp);
    b->x_prev = doubles(pp);
    b->scratch = doubles(big);
    b->col_abs = doubles(kk);
    b->col_rows = calloc(kk, sizeof(int));
    b->idle = calloc(kk, sizeof(int));
    b->size_scale = doubles(kk);
    b->size_active = doubles(kk);
    b->packed = doubles(kp);
    b->packed_rows = calloc(kp, sizeof(int));
    b->packed_start = calloc(pp + 1, sizeof(int));
    b->dependent_rows = calloc(kk, sizeof(int));
    b->dropped_cols = calloc(pp, sizeof(int));
    b->kept_qr = doubles(kp);
    b->kept_jac = doubles(kp);
    b->kept_tau = doubles(kk);
    b->kept_row_scale = doubles(kk);
    b->kept_col_scale = doubles(pp);
    b->kept_jpvt = calloc(pp, sizeof(int));
    ok = ok && b->row_scale && b->col_scale && b->sv && b->u && b->vt && b->svd_copy &&
         b->atol && b->nominal && b->reached && b->gtol && b->jac && b->jac_prev && b->g &&
         b->g_trial && b->g_best && b->g_start && b->g_base && b->fit &&
         b->tol_x && b->tol_g && b->rhs && b->dx && b->x_best && b->x_prev && b->scratch &&
         b->g_keep && b->dx_prev && b->known && b->noise && b->noise_best && b->factored && b->col_abs && b->col_rows && b->idle &&
         b->size_scale && b->size_active &&
         b->packed && b->packed_rows && b->packed_start &&
         b->dependent_rows && b->dropped_cols && b->kept_qr && b->kept_jac && b->kept_tau &&
         b->kept_row_scale && b->kept_col_scale && b->kept_jpvt;
    if (!ok) buffers_free(b);
    return ok;
}

/* ---- object ------------------------------------------------------------- */

/* The settings of a new solver (newton.h documents them). */
static void set_defaults(cdyn_newton *nt)
{
    nt->max_iterations = 20;
    nt->max_backtracks = 40;
    nt->rtol = 1e-10;
    nt->rank_tol = CDYN__RANK_TOL;
    nt->fd_step = 1.5e-8;
}

cdyn_newton *cdyn_newton_create(int k, int p, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (k < 1 || p < k || (size_t)k * (size_t)p > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_newton *nt = cdyn__object_alloc(sizeof *nt, offsetof(cdyn_newton, msg));
    if (!nt || !buffers_alloc(&nt->b, k, p, 1)) {
        free(nt);
        *status = CDYN_ERR_NOMEM;
        return NULL;
    }
    nt->k = k;
    nt->p = p;
    set_defaults(nt);
    *status = CDYN_OK;
    return nt;
}

cdyn_newton *cdyn__newton_create_linear(int k, const cdyn__newton_linear *ops,
                                        cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (k < 1 || !ops || !ops->evaluate || !ops->column || !ops->factor || !ops->apply) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_newton *nt = cdyn__object_alloc(sizeof *nt, offsetof(cdyn_newton, msg));
    if (!nt || !buffers_alloc(&nt->b, k, k, 0)) {
        free(nt);
        *status = CDYN_ERR_NOMEM;
        return NULL;
    }
    nt->k = nt->p = k;
    nt->has_ops = 1;
    nt->ops = *ops;
    set_defaults(nt);
    *status = CDYN_OK;
    return nt;
}

void cdyn_newton_free(cdyn_newton *nt)
{
    if (!nt) return;
    buffers_free(&nt->b);
    free(nt);
}

static void clear_problem_settings(cdyn_newton *nt)
{
    nt->has_atol = nt->has_gtol = 0;
    cdyn__newton_forget(nt);
}

cdyn_status cdyn__newton_set_size(cdyn_newton *nt, int k, int p)
{
    if (k == nt->k && p == nt->p) return CDYN_OK;
    if (k > nt->b.k || p > nt->b.p) {
        buffers grown;
        if (!buffers_alloc(&grown, cdyn__max(k, nt->b.k), cdyn__max(p, nt->b.p), !nt->has_ops))
            return cdyn__fail(nt->msg, CDYN_ERR_NOMEM, "cdyn_newton: out of memory");
        buffers_free(&nt->b);
        nt->b = grown;
    }
    nt->k = k;
    nt->p = p;
    nt->factored_valid = nt->kept_valid = 0;
    nt->packed_from = NULL;
    clear_problem_settings(nt);
    memset(&nt->report, 0, sizeof nt->report);
    nt->n_dependent_rows = nt->n_dropped_cols = 0;
    return CDYN_OK;
}

void cdyn__newton_forget(cdyn_newton *nt)
{
    nt->kept_valid = 0; /* nor may a chord start use the old J */
    memset(nt->b.nominal, 0, sizeof(double) * (size_t)nt->b.p);
}

void cdyn__newton_save_magnitudes(const cdyn_newton *nt, double *out)
{
    memcpy(out, nt->b.nominal, sizeof(double) * (size_t)nt->p);
}

void cdyn__newton_restore_magnitudes(cdyn_newton *nt, const double *in)
{
    memcpy(nt->b.nominal, in, sizeof(double) * (size_t)nt->p);
}

const double *cdyn__newton_tolerance(const cdyn_newton *nt) { return nt->b.tol_x; }

const double *cdyn__newton_residual_tolerance(const cdyn_newton *nt) { return nt->b.tol_g; }

void cdyn__newton_set_known_terms(cdyn_newton *nt, const double *terms)
{
    nt->has_known = terms != NULL;
    if (terms) memcpy(nt->b.known, terms, sizeof(double) * (size_t)nt->k);
}

void cdyn__newton_set_residual_noise(cdyn_newton *nt, const double *noise)
{
    nt->noise_source = noise;
    if (noise) memset(nt->b.noise, 0, sizeof(double) * (size_t)nt->k);
}

void cdyn__newton_set_differenced(cdyn_newton *nt, int differenced)
{
    nt->differenced = differenced != 0;
}

void cdyn__newton_set_observed_rows(cdyn_newton *nt, const int *count, const double *coef,
                                    int ld, const double *size)
{
    nt->observed_count = count;
    nt->observed_coef = coef;
    nt->observed_ld = ld;
    nt->observed_size = size;
}

void cdyn__newton_set_chord(cdyn_newton *nt, int on) { nt->chord = on != 0; }

void cdyn__newton_set_judge_near(cdyn_newton *nt, int on) { nt->judge_near = on != 0; }

void cdyn__newton_set_min_norm(cdyn_newton *nt, int on) { nt->min_norm_square = on != 0; }

void cdyn__newton_set_rank_cap(cdyn_newton *nt, int cap)
{
    cap = cap > 0 ? cap : 0;
    if (cap == nt->rank_cap) return; /* an unchanged J keeps its factorization */
    nt->rank_cap = cap;
    nt->factored_valid = 0; /* the same J may now factor otherwise */
}

void cdyn__newton_keep_for_chord(cdyn_newton *nt)
{
    buffers *b = &nt->b;
    size_t k = (size_t)nt->k;
    nt->kept_valid = nt->chord && nt->factored_valid && nt->factored_result == 0 &&
                     nt->mode == MODE_QR_SQUARE;
    if (!nt->kept_valid) return;
    if (nt->packed_from == b->kept_jac) nt->packed_from = NULL; /* it changes */
    memcpy(b->kept_qr, b->ws.qr, sizeof(double) * k * k);
    memcpy(b->kept_jac, b->factored, sizeof(double) * k * k);
    memcpy(b->kept_tau, b->ws.tau, sizeof(double) * k);
    memcpy(b->kept_row_scale, b->row_scale, sizeof(double) * k);
    memcpy(b->kept_col_scale, b->col_scale, sizeof(double) * k);
    memcpy(b->kept_jpvt, b->ws.jpvt, sizeof(int) * k);
    nt->kept_r_diagonal = nt->r_diagonal;
}

void cdyn__newton_set_owner(cdyn_newton *nt, const int *owner_in_callback)
{
    nt->guard.owner = owner_in_callback;
}

/* ---- settings ----------------------------------------------------------- */

/* CDYN_ERR_BUSY when called from inside a callback of nt (or its owner). */
static cdyn_status check_idle(cdyn_newton *nt, const char *fn)
{
    return cdyn__guard_busy(&nt->guard) ? cdyn__busy(nt->msg, fn) : CDYN_OK;
}

cdyn_status cdyn_newton_set_max_iterations(cdyn_newton *nt, int max_iterations)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_max_iterations";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (max_iterations < 1)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: %d < 1", fn, max_iterations);
    nt->max_iterations = max_iterations;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_max_backtracks(cdyn_newton *nt, int max_backtracks)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_max_backtracks";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (max_backtracks < 0 || max_backtracks > 60)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: %d is not in [0, 60]", fn, max_backtracks);
    nt->max_backtracks = max_backtracks;
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_tolerances(cdyn_newton *nt, double rtol, const double *atol)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_tolerances";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    cdyn_status st = cdyn__check_tolerances(nt->msg, fn, rtol, atol, nt->p);
    if (st != CDYN_OK) return st;
    nt->rtol = rtol;
    nt->has_atol = atol != NULL;
    if (atol) memcpy(nt->b.atol, atol, sizeof(double) * (size_t)nt->p);
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_residual_tolerances(cdyn_newton *nt, const double *gtol)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_residual_tolerances";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    for (int i = 0; gtol && i < nt->k; ++i)
        if (!(gtol[i] > 0.0) || isinf(gtol[i]))
            return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: gtol[%d] = %g is not finite and > 0",
                              fn, i, gtol[i]);
    nt->has_gtol = gtol != NULL;
    if (gtol) memcpy(nt->b.gtol, gtol, sizeof(double) * (size_t)nt->k);
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_rank_tolerance(cdyn_newton *nt, double tol)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_rank_tolerance";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: tol = %g is not in (0, 1)", fn, tol);
    nt->rank_tol = tol;
    nt->factored_valid = nt->kept_valid = 0; /* the next J is decided with the new tolerance */
    return CDYN_OK;
}

cdyn_status cdyn_newton_set_fd_step(cdyn_newton *nt, double h)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_set_fd_step";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (!(h > 0.0 && h < 1.0))
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: h = %g is not in (0, 1)", fn, h);
    nt->fd_step = h;
    return CDYN_OK;
}

/* ---- the rank-revealing solve (T2.2, T2.3) ------------------------------ */

static double norm_inf(int n, const double *x)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* "Why singular" (T2.3), decided on the equilibrated J: the equations a
 * pivoted QR of J^T ranks after the rank, and the unknowns a pivoted QR of
 * J ranks after it. */
static void diagnose(cdyn_newton *nt, const double *J, int ldj, int rank)
{
    cdyn__rank_ws *w = &nt->b.ws;
    int rank_rows = cdyn__rank_decide(w, CDYN__RANK_ROWS, nt->k, nt->p, J, ldj, nt->rank_tol,
                                      NULL, NULL, NULL);
    if (rank_rows < 0 || rank_rows > rank) rank_rows = rank;
    nt->n_dependent_rows = nt->k - rank_rows;
    memcpy(nt->b.dependent_rows, w->jpvt + rank_rows, sizeof(int) * (size_t)nt->n_dependent_rows);
    int rank_cols = cdyn__rank_decide(w, CDYN__RANK_COLUMNS, nt->k, nt->p, J, ldj, nt->rank_tol,
                                      NULL, NULL, NULL);
    if (rank_cols < 0 || rank_cols > rank) rank_cols = rank;
    nt->n_dropped_cols = nt->p - rank_cols;
    memcpy(nt->b.dropped_cols, w->jpvt + rank_cols, sizeof(int) * (size_t)nt->n_dropped_cols);
}

/* SVD of the equilibrated J (D_r J D_c; D_c = I for a wide J, and for a
 * square one whose owner asked for steps of minimum norm in x) into u, sv,
 * vt with its factors; the rank from the singular values (T2.3). */
static int factor_svd(cdyn_newton *nt, const double *J, int ldj)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    cdyn__equilibrate(k, p, J, ldj, b->row_scale, b->col_scale);
    if (k < p || nt->min_norm_square)
        for (int j = 0; j < p; ++j) b->col_scale[j] = 1.0;
    for (int j = 0; j < p; ++j)
        for (int i = 0; i < k; ++i)
            b->svd_copy[i + (size_t)j * k] = b->row_scale[i] * J[i + (size_t)j * ldj] * b->col_scale[j];
    if (cdyn__gesvd(k, p, b->svd_copy, k, b->sv, b->u, k, b->vt, k, b->ws.work, b->ws.lwork) != 0)
        return -1;
    int rank = 0;
    while (rank < k && b->sv[0] > 0.0 && b->sv[rank] > nt->rank_tol * b->sv[0]) ++rank;
    int numerical = rank;
    double floor = (double)(k > p ? k : p) * DBL_EPSILON * b->sv[0];
    while (numerical < k && b->sv[numerical] > floor) ++numerical;
    if (nt->rank_cap > 0 && numerical > nt->rank_cap) /* no step, widened or not, beyond it */
        numerical = nt->rank_cap;
    if (rank > numerical) rank = numerical;
    nt->rank = nt->rank_used = rank;
    nt->rank_numerical = numerical;
    nt->smallest_kept = rank > 0 ? b->sv[rank - 1] / b->sv[0] : 0.0;
    nt->largest_dropped = rank < k && b->sv[0] > 0.0 ? b->sv[rank] / b->sv[0] : 0.0;
    return 1;
}

/* Is J (ld ldj) bit for bit the J of the current factorization? */
static int same_as_factored(const cdyn_newton *nt, const double *J, int ldj)
{
    if (!nt->factored_valid) return 0;
    int k = nt->k, p = nt->p;
    for (int j = 0; j < p; ++j)
        if (memcmp(J + (size_t)j * ldj, nt->b.factored + (size_t)j * k, sizeof(double) * (size_t)k))
            return 0;
    return 1;
}

static int factor(cdyn_newton *nt, const double *J, int ldj);

int cdyn__newton_factor(cdyn_newton *nt, const double *J, int ldj)
{
    int k = nt->k, p = nt->p;
    nt->solution_factored = nt->near_factored = 0;
    /* an unchanged J (constant junction balances, a linear model) keeps its
     * factorization: the same input, the same factors */
    if (same_as_factored(nt, J, ldj)) {
        if (nt->mode == MODE_SVD) nt->rank_used = nt->rank; /* undo a widening */
        return nt->factored_result;
    }
    int result = factor(nt, J, ldj);
    nt->factored_valid = result >= 0;
    nt->factored_result = result;
    for (int j = 0; result >= 0 && j < p; ++j)
        memcpy(nt->b.factored + (size_t)j * k, J + (size_t)j * ldj, sizeof(double) * (size_t)k);
    return result;
}

/* Has the one-row J (ld ldj, p columns) a non-zero entry? */
static int nonzero_row(int p, const double *J, int ldj)
{
    for (int j = 0; j < p; ++j)
        if (J[(size_t)j * ldj] != 0.0) return 1;
    return 0;
}

/* A square J with one non-zero in each column, the columns' in distinct
 * rows (a scaled permutation: the diagonal Jacobian of junctions that each
 * leak through an orifice of their own), needs no QR. Its equilibrated
 * B = D_r J D_c has every non-zero in [1/2, 1) (each row and column holds
 * only that one), and ordering its columns by the rows of their non-zeros
 * gives B E = R diagonal with Q = I: the QR that cdyn__newton_apply reads,
 * with tau = 0. A pivoted QR of B finds the same pivots in magnitude (its
 * columns are orthogonal), so the rank decision is the one the QR path
 * makes: all k kept when the smallest |R_ii| / the largest exceeds the
 * tolerance (always, for the default), and that ratio is reported. Here
 * the ratio is exact; cdyn's own QR (k <= CDYN__SMALL_QR) gives it bit for
 * bit, LAPACK's dgeqp3 above that size to an ulp or two, so the two
 * verdicts can differ only for a tolerance within ulps of the ratio.
 * Returns 0 when J is not such a matrix or the tolerance would drop a
 * pivot; the QR path then refills the workspace it has written. */
static int factor_scaled_permutation(cdyn_newton *nt, const double *J, int ldj,
                                     cdyn__rank *decision)
{
    int k = nt->k;
    cdyn__rank_ws *w = &nt->b.ws;
    int *column_of_row = w->jpvt;
    for (int i = 0; i < k; ++i) column_of_row[i] = -1;
    for (int j = 0; j < k; ++j) {
        const double *col = J + (size_t)j * ldj;
        int row = -1;
        for (int i = 0; i < k; ++i) {
            if (col[i] == 0.0) continue;
            if (row >= 0) return 0; /* a second non-zero */
            row = i;
        }
        if (row < 0 || column_of_row[row] >= 0) return 0;
        column_of_row[row] = j;
    }
    cdyn__equilibrate(k, k, J, ldj, w->row_scale, w->col_scale);
    double smallest = INFINITY, largest = 0.0;
    memset(w->qr, 0, sizeof(double) * (size_t)k * k);
    for (int i = 0; i < k; ++i) {
        int j = column_of_row[i];
        double b = w->row_scale[i] * J[i + (size_t)j * ldj] * w->col_scale[j];
        w->qr[i + (size_t)i * k] = b;
        w->tau[i] = 0.0;
        smallest = fabs(b) < smallest ? fabs(b) : smallest;
        largest = fabs(b) > largest ? fabs(b) : largest;
    }
    if (!(smallest > nt->rank_tol * largest)) return 0;
    *decision = (cdyn__rank){.rank = k, .ratio = smallest / largest, .dropped = 0.0};
    return 1;
}

/* The factorization itself (cdyn__newton_factor). */
static int factor(cdyn_newton *nt, const double *J, int ldj)
{
    int k = nt->k, p = nt->p;
    cdyn__rank decision;
    /* the rank of a wide J is decided with its columns equilibrated too (a
     * fact of J, whatever the units of the unknowns); its minimum-norm step
     * then needs the QR in the caller's metric, a second factorization */
    enum cdyn__rank_mode how = k == p ? CDYN__RANK_COLUMNS : CDYN__RANK_ROWS;
    int rank;
    nt->r_diagonal = 0;
    if (k == 1 && p > 1 && nonzero_row(p, J, ldj)) {
        /* one row: its one pivot is the largest, so the decision keeps it
         * in any scaling (the equilibrated row is non-zero with J's) */
        rank = 1;
        decision = (cdyn__rank){.rank = 1, .ratio = 1.0, .dropped = 0.0};
    } else if (k == p && k > 0 && factor_scaled_permutation(nt, J, ldj, &decision)) {
        rank = k;
        nt->r_diagonal = 1;
    } else {
        rank = cdyn__rank_decide(&nt->b.ws, how, k, p, J, ldj, nt->rank_tol, NULL, NULL,
                                 &decision);
    }
    if (rank == k && k < p &&
        cdyn__rank_decide(&nt->b.ws, CDYN__RANK_ROWS_METRIC, k, p, J, ldj, nt->rank_tol, NULL,
                          NULL, NULL) < 0)
        rank = -1;
    if (rank < 0) return -1;
    if (nt->rank_cap > 0 && rank > nt->rank_cap) rank = nt->rank_cap; /* the SVD's steps */
    if (rank == k) {
        nt->n_dependent_rows = nt->n_dropped_cols = 0;
        nt->mode = k == p ? MODE_QR_SQUARE : MODE_QR_WIDE;
        nt->rank = nt->rank_used = nt->rank_numerical = rank;
        nt->smallest_kept = decision.ratio;
        nt->largest_dropped = 0.0;
        memcpy(nt->b.row_scale, nt->b.ws.row_scale, sizeof(double) * (size_t)k);
        memcpy(nt->b.col_scale, nt->b.ws.col_scale, sizeof(double) * (size_t)p);
        return 0;
    }
    diagnose(nt, J, ldj, rank);
    nt->mode = MODE_SVD;
    return factor_svd(nt, J, ldj);
}

/* x = J^-1 b from the QR of a square J's equilibrated B = D_r J D_c,
 * B E = Q R: R z = Q^T D_r b, x = D_c E z; with Q = I and a diagonal R
 * (diagonal) by divisions. x and b may alias. */
static void apply_square(cdyn_newton *nt, const double *qr, const double *tau, const int *jpvt,
                         const double *row_scale, const double *col_scale, int diagonal,
                         const double *b_in, double *x)
{
    cdyn__rank_ws *w = &nt->b.ws;
    double *y = nt->b.rhs;
    int k = nt->k;
    if (diagonal) {
        for (int i = 0; i < k; ++i) y[i] = row_scale[i] * b_in[i] / qr[i + (size_t)i * k];
    } else {
        for (int i = 0; i < k; ++i) y[i] = row_scale[i] * b_in[i];
        cdyn__ormqr('L', 'T', k, 1, k, qr, k, tau, y, k, w->work, w->lwork);
        cdyn__trsm('L', 'U', 'N', 'N', k, 1, 1.0, qr, k, y, k);
    }
    for (int i = 0; i < k; ++i) x[jpvt[i]] = col_scale[jpvt[i]] * y[i];
}

void cdyn__newton_apply(cdyn_newton *nt, const double *b_in, double *x)
{
    buffers *b = &nt->b;
    cdyn__rank_ws *w = &b->ws;
    int k = nt->k, p = nt->p;
    double *y = b->rhs; /* p */
    switch (nt->mode) {
    case MODE_QR_SQUARE:
        apply_square(nt, w->qr, w->tau, w->jpvt, b->row_scale, b->col_scale, nt->r_diagonal,
                     b_in, x);
        break;
    case MODE_QR_WIDE: /* B = D_r J, B^T E = Q R: R^T z = E^T D_r b, x = Q [z; 0] */
        for (int i = 0; i < k; ++i) y[i] = b->row_scale[w->jpvt[i]] * b_in[w->jpvt[i]];
        cdyn__trsm('L', 'U', 'T', 'N', k, 1, 1.0, w->qr, p, y, k);
        memset(y + k, 0, sizeof(double) * (size_t)(p - k));
        cdyn__ormqr('L', 'N', p, 1, k, w->qr, p, w->tau, y, p, w->work, w->lwork);
        memcpy(x, y, sizeof(double) * (size_t)p);
        break;
    case MODE_SVD: /* x = D_c V_r S_r^{-1} U_r^T D_r b (T2.3) */
        for (int i = 0; i < nt->rank_used; ++i) {
            double s = 0.0;
            for (int r = 0; r < k; ++r) s += b->u[r + (size_t)i * k] * b->row_scale[r] * b_in[r];
            y[i] = s / b->sv[i];
        }
        cdyn__gemv('T', nt->rank_used, p, 1.0, b->vt, k, y, 0.0, b->scratch);
        for (int j = 0; j < p; ++j) x[j] = b->col_scale[j] * b->scratch[j];
        break;
    }
}

void cdyn__newton_apply_gram(cdyn_newton *nt, const double *b_in, double *y)
{
    buffers *b = &nt->b;
    cdyn__rank_ws *w = &b->ws;
    int k = nt->k, p = nt->p;
    const double *R = w->qr; /* upper k x k, ld p */
    double *z = b->rhs;
    /* B = D_r J, B^T E = Q R: J J^T = D_r^-1 E R^T R E^T D_r^-1 */
    for (int i = 0; i < k; ++i) z[i] = b->row_scale[w->jpvt[i]] * b_in[w->jpvt[i]];
    if (k > 16) {
        cdyn__trsm('L', 'U', 'T', 'N', k, 1, 1.0, R, p, z, k);
        cdyn__trsm('L', 'U', 'N', 'N', k, 1, 1.0, R, p, z, k);
    } else { /* R^T z = c by columns of R, then R w = z */
        for (int i = 0; i < k; ++i) {
            double sum = z[i];
            for (int l = 0; l < i; ++l) sum -= R[l + (size_t)i * p] * z[l];
            z[i] = sum / R[i + (size_t)i * p];
        }
        for (int i = k - 1; i >= 0; --i) {
            z[i] /= R[i + (size_t)i * p];
            for (int l = 0; l < i; ++l) z[l] -= R[l + (size_t)i * p] * z[i];
        }
    }
    for (int i = 0; i < k; ++i) y[w->jpvt[i]] = b->row_scale[w->jpvt[i]] * z[i];
}

int cdyn__newton_wide(const cdyn_newton *nt) { return nt->mode == MODE_QR_WIDE; }

void cdyn__newton_apply_many(cdyn_newton *nt, const double *B, int ldb, int nrhs, double *X,
                             int ldx)
{
    buffers *b = &nt->b;
    cdyn__rank_ws *w = &b->ws;
    int k = nt->k;
    if (nt->mode != MODE_QR_SQUARE) { /* column by column through the same solve */
        for (int j = 0; j < nrhs; ++j) {
            memcpy(b->scratch, B + (size_t)j * ldb, sizeof(double) * (size_t)k);
            cdyn__newton_apply(nt, b->scratch, X + (size_t)j * ldx);
        }
        return;
    }
    /* all columns at once: D_r B, Q^T, R Z = ., X = D_c E Z */
    for (int j = 0; j < nrhs; ++j)
        for (int i = 0; i < k; ++i)
            X[i + (size_t)j * ldx] = b->row_scale[i] * B[i + (size_t)j * ldb];
    if (nt->r_diagonal) { /* Q = I, R diagonal */
        for (int j = 0; j < nrhs; ++j)
            for (int i = 0; i < k; ++i) X[i + (size_t)j * ldx] /= w->qr[i + (size_t)i * k];
    } else {
        for (int j0 = 0; j0 < nrhs; j0 += w->lwork) { /* dormqr needs lwork >= columns */
            int cols = nrhs - j0 < w->lwork ? nrhs - j0 : w->lwork;
            cdyn__ormqr('L', 'T', k, cols, k, w->qr, k, w->tau, X + (size_t)j0 * ldx, ldx,
                        w->work, w->lwork);
        }
        cdyn__trsm('L', 'U', 'N', 'N', k, nrhs, 1.0, w->qr, k, X, ldx);
    }
    for (int j = 0; j < nrhs; ++j) {
        double *col = X + (size_t)j * ldx;
        memcpy(b->rhs, col, sizeof(double) * (size_t)k);
        for (int i = 0; i < k; ++i) col[w->jpvt[i]] = b->col_scale[w->jpvt[i]] * b->rhs[i];
    }
}

double cdyn__newton_dropped(const cdyn_newton *nt) { return nt->largest_dropped; }

/* dx = -J# G (T2.2; T2.3 when rank deficient) and the rank facts in the
 * report. Inputs validated. */
static cdyn_status newton_direction(cdyn_newton *nt, const double *J, int ldj, const double *G,
                                    double *dx)
{
    if (nt->has_ops) { /* the owner factors its J and decides its rank */
        int rank = nt->k;
        double smallest = NAN;
        int result = nt->ops.factor(nt->ops.ctx, &rank, &smallest);
        if (result < 0)
            return cdyn__fail(nt->msg, CDYN_ERR_NOMEM,
                              "cdyn_newton: the Jacobian's factorization failed");
        /* a rank-deficient J (result 1) is stepped through with the owner's
         * outer inverse, as the SVD path does (T2.3); it cannot be widened */
        nt->rank = nt->rank_used = nt->rank_numerical = rank;
        nt->smallest_kept = smallest;
        nt->largest_dropped = 0.0;
        nt->mode = result == 1 ? MODE_SVD : MODE_QR_SQUARE;
        nt->r_diagonal = 0; /* the owner's factors, not the workspace's */
        nt->n_dependent_rows = nt->n_dropped_cols = 0;
        if (result == 1) {
            nt->report.svd_steps++;
            if (nt->ops.dependent)
                nt->n_dependent_rows = nt->ops.dependent(nt->ops.ctx, nt->b.dependent_rows);
        }
        nt->report.rank = rank;
        nt->report.smallest_kept = smallest;
        nt->report.largest_dropped = 0.0;
        if (result > 1)
            return cdyn__fail(nt->msg, CDYN_ERR_SINGULAR,
                              "cdyn_newton_solve: the Jacobian is singular to the rank "
                              "tolerance (its estimated reciprocal condition %.3g)%s",
                              smallest,
                              result == 3 ? " and its rank could not be decided" : "");
        for (int i = 0; i < nt->k; ++i) nt->b.scratch[i] = -G[i];
        nt->ops.apply(nt->ops.ctx, nt->b.scratch, dx);
        return CDYN_OK;
    }
    int svd = cdyn__newton_factor(nt, J, ldj);
    if (svd < 0)
        return cdyn__fail(nt->msg, CDYN_ERR_LAPACK, "cdyn_newton: LAPACK failed on the Jacobian");
    nt->report.svd_steps += svd;
    for (int i = 0; i < nt->k; ++i) nt->b.scratch[i] = -G[i];
    cdyn__newton_apply(nt, nt->b.scratch, dx);
    nt->report.rank = nt->rank;
    nt->report.smallest_kept = nt->smallest_kept;
    nt->report.largest_dropped = nt->largest_dropped;
    return CDYN_OK;
}

static void report_reset(cdyn_newton *nt)
{
    memset(&nt->report, 0, sizeof nt->report);
    nt->solution_factored = nt->near_factored = 0;
    nt->n_dependent_rows = 0;
    nt->n_dropped_cols = 0;
}

cdyn_status cdyn_newton_step(cdyn_newton *nt, const double *J, int ldj, const double *G,
                             double *dx)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_step";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (nt->has_ops)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: this solver's Jacobian is its owner's", fn);
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
    cdyn_status st = newton_direction(nt, J, ldj, G, nt->b.dx);
    if (st) return st;
    bad = cdyn__first_nonfinite(nt->p, 1, nt->b.dx, nt->p);
    if (bad >= 0) /* finite J and G, but the step overflows (J nearly singular in its units) */
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: dx[%ld] overflows", fn, bad);
    nt->report.iterations = 1;
    nt->counters.steps++;
    nt->report.step_norm = norm_inf(nt->p, nt->b.dx);
    nt->report.residual_norm = norm_inf(nt->k, G);
    nt->report.residual_ratio = nt->report.error_ratio = -1.0;
    memcpy(dx, nt->b.dx, sizeof(double) * (size_t)nt->p);
    return CDYN_OK;
}

/* ---- callbacks ---------------------------------------------------------- */

/* G(x) into g; non-zero callback codes and NaN become statuses. */
static cdyn_status eval_residual(cdyn_newton *nt, cdyn_residual_fn residual, void *user,
                                 const double *x, double *g)
{
    nt->report.residual_evaluations++;
    nt->counters.residual_evaluations++;
    nt->guard.in_callback++;
    int code = residual(x, g, user);
    nt->guard.in_callback--;
    if (code != 0) {
        nt->report.callback_code = code;
        return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK,
                          "cdyn_newton_solve: residual callback returned %d", code);
    }
    long bad = cdyn__first_nonfinite(nt->k, 1, g, nt->k);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                          "cdyn_newton_solve: residual G[%ld] is not finite", bad);
    /* G at an iterate (not a difference quotient's): its rounding with it */
    if (nt->noise_source && g == nt->b.g)
        memcpy(nt->b.noise, nt->noise_source, sizeof(double) * (size_t)nt->k);
    return CDYN_OK;
}

/* The magnitude of unknown j for a difference step: |x_j|, what atol or
 * earlier solutions say, else (0) the largest such magnitude of any
 * unknown. */
static double magnitude(const cdyn_newton *nt, const double *x, int j)
{
    double s = fmax(fabs(x[j]), nt->b.nominal[j]);
    if (nt->has_atol) s = fmax(s, nt->b.atol[j] / nt->rtol);
    return s;
}

/* J at x from the callback, or by forward differences around b->g = G(x). */
static cdyn_status eval_jacobian(cdyn_newton *nt, cdyn_residual_fn residual,
                                 cdyn_jacobian_fn jacobian, void *user, double *x)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    nt->counters.jacobian_evaluations++;
    nt->packed_from = NULL; /* b->jac changes */
    if (nt->has_ops) { /* the owner's J */
        int code = 0;
        nt->guard.in_callback++;
        int result = nt->ops.evaluate(nt->ops.ctx, x, &code);
        nt->guard.in_callback--;
        if (result > 0) {
            nt->report.callback_code = code;
            return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK,
                              "cdyn_newton_solve: Jacobian callback returned %d", code);
        }
        if (result < 0)
            return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                              "cdyn_newton_solve: the Jacobian is not finite");
        return CDYN_OK;
    }
    if (jacobian) {
        nt->guard.in_callback++;
        int code = jacobian(x, b->jac, k, user);
        nt->guard.in_callback--;
        if (code != 0) {
            nt->report.callback_code = code;
            return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK,
                              "cdyn_newton_solve: Jacobian callback returned %d", code);
        }
        long bad = cdyn__first_nonfinite(k, p, b->jac, k);
        if (bad >= 0)
            return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                              "cdyn_newton_solve: Jacobian J(%ld, %ld) is not finite", bad % k,
                              bad / k);
        return CDYN_OK;
    }
    double fallback = 0.0;
    for (int j = 0; j < p; ++j) fallback = fmax(fallback, magnitude(nt, x, j));
    if (fallback == 0.0) fallback = 1.0;
    for (int j = 0; j < p; ++j) {
        double saved = x[j], s = magnitude(nt, x, j);
        double h = nt->fd_step * (s > 0.0 ? s : fallback);
        x[j] = saved + h;
        h = x[j] - saved; /* the step actually representable */
        cdyn_status st = eval_residual(nt, residual, user, x, b->g_trial);
        x[j] = saved;
        if (st != CDYN_OK) return st;
        for (int i = 0; i < k; ++i) b->jac[i + (size_t)j * k] = (b->g_trial[i] - b->g[i]) / h;
    }
    /* differences of finite values can still overflow; LAPACK must not see it */
    if (cdyn__first_nonfinite(k, p, b->jac, k) >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE,
                          "cdyn_newton_solve: the finite-difference Jacobian overflowed");
    return CDYN_OK;
}

/* ---- checking the caller's Jacobian --------------------------------------- */

typedef struct residual_call {
    cdyn_newton *nt;
    cdyn_residual_fn residual;
    void *user;
} residual_call;

/* G for the check: the callback under the guard, the report untouched. */
static cdyn_status check_residual(void *ctx, const double *x, double *g)
{
    residual_call *call = ctx;
    cdyn_newton *nt = call->nt;
    nt->guard.in_callback++;
    int code = call->residual(x, g, call->user);
    nt->guard.in_callback--;
    const char *fn = "cdyn_newton_check_jacobian";
    if (code != 0)
        return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK, "%s: residual callback returned %d", fn,
                          code);
    long bad = cdyn__first_nonfinite(nt->k, 1, g, nt->k);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: residual G[%ld] is not finite", fn,
                          bad);
    return CDYN_OK;
}

cdyn_status cdyn_newton_check_jacobian(cdyn_newton *nt, cdyn_residual_fn residual,
                                       cdyn_jacobian_fn jacobian, void *user, const double *x,
                                       cdyn_jacobian_check *report)
{
    if (!nt) return CDYN_ERR_ARG;
    const char *fn = "cdyn_newton_check_jacobian";
    if (check_idle(nt, fn)) return CDYN_ERR_BUSY;
    if (nt->has_ops)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: this solver's Jacobian is its owner's", fn);
    if (!residual || !jacobian || !x || !report)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !residual ? "residual" : !jacobian ? "jacobian" : !x ? "x" : "report");
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    long bad = cdyn__first_nonfinite(p, 1, x, p);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: x[%ld] is not finite", fn, bad);
    double *point = b->x_prev, *scale = b->rhs;
    memcpy(point, x, sizeof(double) * (size_t)p);
    nt->packed_from = NULL; /* b->jac changes */
    nt->guard.in_callback++;
    int code = jacobian(point, b->jac, k, user);
    nt->guard.in_callback--;
    if (code != 0)
        return cdyn__fail(nt->msg, CDYN_ERR_CALLBACK, "%s: Jacobian callback returned %d", fn,
                          code);
    bad = cdyn__first_nonfinite(k, p, b->jac, k);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: J(%ld, %ld) is not finite", fn,
                          bad % k, bad / k);
    double fallback = 0.0; /* the difference steps of cdyn_newton_solve */
    for (int j = 0; j < p; ++j) fallback = fmax(fallback, magnitude(nt, point, j));
    if (fallback == 0.0) fallback = 1.0;
    for (int j = 0; j < p; ++j) {
        double s = magnitude(nt, point, j);
        scale[j] = s > 0.0 ? s : fallback;
    }
    residual_call call = {nt, residual, user};
    cdyn__check_work w = {b->g_trial, b->g_best, b->g_keep, b->scratch, b->tol_g};
    cdyn_jacobian_check found;
    cdyn__check_start(&found);
    cdyn_status st = cdyn__check_jacobian(k, p, b->jac, k, point, scale, NULL, check_residual,
                                          &call, &w, 0, &found);
    if (st) return st;
    *report = found;
    return CDYN_OK;
}

/* ---- convergence (weighted norms) ---------------------------------------- */

/* Column j of J: its entries' values and rows (NULL: rows 0 .. k-1), and
 * their count. J is k x p with ld k, or the owner's (cdyn__newton_linear);
 * a dense J that pack_columns has packed gives its non-zeros only (the
 * weights' sums lose nothing: a zero entry adds 0 to each of them). */
static int column(const cdyn_newton *nt, const double *J, int j, const int **rows,
                  const double **values)
{
    if (nt->has_ops) return nt->ops.column(nt->ops.ctx, j, rows, values);
    if (J == nt->packed_from) {
        const int *start = nt->b.packed_start;
        *rows = nt->b.packed_rows + start[j];
        *values = nt->b.packed + start[j];
        return start[j + 1] - start[j];
    }
    *rows = NULL;
    *values = J + (size_t)j * nt->k;
    return nt->k;
}

/* Pack the non-zeros of J (k x p, ld k) by columns for column(), when they
 * are at most a quarter of it (a network's or a chain's Jacobian): the
 * weights walk J five times per iteration, and in the hydraulic line's
 * 24 x 24 Jacobian 7 entries in 8 are zeros. */
static void pack_columns(cdyn_newton *nt, const double *J)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p, count = 0, limit = k * p / 4;
    nt->packed_from = NULL;
    if (nt->has_ops || k * p < 64) return;
    for (int j = 0; j < p; ++j) {
        const double *col = J + (size_t)j * k;
        b->packed_start[j] = count;
        for (int i = 0; i < k; ++i) {
            if (col[i] == 0.0) continue;
            if (count == limit) return; /* dense: column() reads J itself */
            b->packed[count] = col[i];
            b->packed_rows[count++] = i;
        }
    }
    b->packed_start[p] = count;
    nt->packed_from = J;
}

/* The least scale of unknown j (in x_j, with rtol) that the owner's other
 * rows give it (cdyn__newton_set_observed_rows): each row with terms
 * besides x_j's asks that x_j move it by no more than rtol of those, and
 * by no less than its own rounding. Rows the owner computes its outputs
 * from (a DAE's rows of F that carry mass, from which the rates come): an
 * unknown that barely enters G (a hidden constraint's 1e-15 beside terms
 * of 4) while it is a term of the size of its row there would otherwise
 * be judged by G alone (CDYN_OK with the rates off by 30 %). The least
 * such scale (INFINITY: none) can only lower the one G gives, floor
 * included: G's rounding is no limit to a row that resolves x_j better. A
 * learned magnitude takes nothing from it (a closed valve's flow keeps
 * its tolerance). own = rtol |x_j|. */
static double observed_scale(const cdyn_newton *nt, int j, double own)
{
    double best = INFINITY;
    int m = nt->observed_count ? *nt->observed_count : 0;
    if (m == 0) return best;
    const double *coef = nt->observed_coef + (size_t)j * nt->observed_ld;
    for (int i = 0; i < m; ++i) {
        double a = fabs(coef[i]), t = nt->rtol * nt->observed_size[i];
        if (!(a > 0.0) || !(t - a * own > 4.0 * DBL_EPSILON * t)) continue;
        double ratio = (t - a * own) / a;
        double rounding = 8.0 * DBL_EPSILON * nt->observed_size[i] / a;
        ratio = ratio > rounding ? ratio : rounding;
        if (ratio < best) best = ratio;
    }
    return best;
}

/* The factors by which tolerances() compares the sizes of the equations'
 * terms (NULL: as given): D_r of the factorization of J (B = D_r J D_c,
 * row_scale and col_scale), so that an equation's size does not depend on
 * its units. In a row where an unknown at exactly 0 has a coefficient
 * (b->idle, set by tolerances()) that coefficient may be the one that set
 * D_r, and the row's terms, which are the other unknowns', then measure
 * only their ratio to it: a rod angle in units of 1e24 rad sitting at 0,
 * 3e25 m per unit, put the terms of the crank angle beside it at 1e-31,
 * the row passed for one at its rounding and dropped out of the
 * comparison, and the crank angle's floor came from a row it barely
 * enters (CDYN_OK with this row off by the whole of its terms). There the
 * factor is D_r over the largest |B_ij| of the unknowns not at 0, each row
 * measured against the coefficients of the unknowns that make its terms
 * (at most 1e100 times D_r: no overflow in the comparisons). Rows without
 * an idle unknown, and rows of idle unknowns only, keep D_r (all rows,
 * without computing anything, when no row has one: any_idle = 0). */
static const double *equation_sizes(cdyn_newton *nt, const double *J, const double *x,
                                    const double *row_scale, const double *col_scale,
                                    int any_idle)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    if (!row_scale || !any_idle) return row_scale;
    double *all = b->size_scale, *active = b->size_active;
    for (int i = 0; i < k; ++i) all[i] = active[i] = 0.0;
    for (int j = 0; j < p; ++j) {
        const int *rows;
        const double *col;
        int count = column(nt, J, j, &rows, &col);
        double c = col_scale ? col_scale[j] : 1.0;
        for (int e = 0; e < count; ++e) {
            int i = rows ? rows[e] : e;
            if (!b->idle[i]) continue;
            double a = fabs(col[e]) * c;
            all[i] = a > all[i] ? a : all[i];
            if (x[j] != 0.0) active[i] = a > active[i] ? a : active[i];
        }
    }
    for (int i = 0; i < k; ++i) {
        double factor = 1.0;
        if (b->idle[i] && active[i] > 0.0 && all[i] > active[i])
            factor = all[i] < 1e100 * active[i] ? all[i] / active[i] : 1e100;
        all[i] = row_scale[i] * factor;
    }
    return all;
}

/* Tolerances at x with J (k x p, ld k; see newton.h): tol_x_j = rtol |x_j|
 * + atol_j and tol_g_i = gtol_i or sum_j |J_ij| tol_x_j. row_scale (k) and
 * col_scale (p), or NULL for none: D_r and D_c of the factorization of J,
 * in which the equations' sizes are compared (below, equation_sizes). When
 * J is b->jac and b->jac_prev holds J at the iterate before
 * (nt->jac_prev_valid), a coefficient that changed by more than half of
 * itself over that step gives the unknown no scale (below). */
static void tolerances(cdyn_newton *nt, const double *J, const double *x,
                       const double *row_scale, const double *col_scale)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    double rtol = nt->rtol;
    const double *before = nt->jac_prev_valid && !nt->has_ops && J == b->jac ? b->jac_prev : NULL;
    nt->learned_unchecked = 0;
    for (int j = 0; j < p; ++j) {
        b->tol_x[j] = rtol * fabs(x[j]) + (nt->has_atol ? b->atol[j] : 0.0);
        b->reached[j] = fabs(x[j]) > b->reached[j] ? fabs(x[j]) : b->reached[j];
    }
    if (!nt->has_atol) {
        /* the scale the equations at hand give each unknown: at least the
         * change that moves each equation it enters by rtol of its other
         * terms (those of the other unknowns at their present values, and
         * those of no unknown: g_start). Without such a floor an unknown
         * heading for a root at 0 would need a relative accuracy it can
         * never have. An unknown seen non-zero in an earlier solution
         * takes rtol times that magnitude instead (a flow keeps its size
         * when its valve closes; an angle's linearized terms |J x| grow
         * without bound and say nothing of the other unknowns' scales),
         * but never more than the widest scale its equations give it now:
         * one solution far out (1e20 where 3 is due next) would otherwise
         * loosen every later solve until a wrong root passes. J is walked
         * by columns; every x, J and g_start here is finite, so plain
         * comparisons stand for fmax. */
        double *terms = b->g_trial;
        const int *rows;
        const double *col;
        for (int i = 0; i < k; ++i) {
            terms[i] = rtol * b->g_start[i];
            b->idle[i] = 0;
        }
        int any_idle = 0;
        for (int j = 0; j < p; ++j) {
            int count = column(nt, J, j, &rows, &col);
            double w = rtol * fabs(x[j]);
            for (int e = 0; e < count; ++e) {
                terms[rows ? rows[e] : e] += fabs(col[e]) * w;
                if (x[j] == 0.0 && col[e] != 0.0) {
                    b->idle[rows ? rows[e] : e]++;
                    any_idle = 1;
                }
            }
        }
        const double *sizes = equation_sizes(nt, J, x, row_scale, col_scale, any_idle);
        for (int j = 0; j < p; ++j) {
            int count = column(nt, J, j, &rows, &col), with_others = 0;
            double best = INFINITY, widest = 0.0, own = rtol * fabs(x[j]), reach = 0.0;
            double cap = 0.0; /* widest, the coefficients of the last step's change included */
            double largest = 0.0; /* the largest terms of an equation with other terms */
            /* the equations j enters that have other terms, gathered once
             * (an equation whose only term is this unknown's, a closed
             * valve's k Q|Q| = 0, says nothing of its scale) */
            for (int e = 0; e < count; ++e) {
                int i = rows ? rows[e] : e;
                double a = fabs(col[e]);
                /* another unknown at exactly 0 with a coefficient here is
                 * another term too, though of size 0 now: beside one that
                 * is not (own > 0), the row is no closed valve's */
                int idle_others = own > 0.0 && b->idle[i] > 0;
                if (a > 0.0 &&
                    (terms[i] - a * own > 4.0 * DBL_EPSILON * terms[i] || idle_others)) {
                    b->col_rows[with_others] = i;
                    b->col_abs[with_others++] = a;
                    double size = sizes ? terms[i] * sizes[i] : terms[i];
                    largest = size > largest ? size : largest;
                }
            }
            for (int e = 0; e < with_others; ++e) { /* the largest |J_ij| / terms_i among those */
                int i = b->col_rows[e];
                double t = terms[i], a = b->col_abs[e];
                if ((sizes ? t * sizes[i] : t) >= 1e-12 * largest)
                    reach = a / t > reach ? a / t : reach;
            }
            for (int e = 0; e < with_others; ++e) {
                /* nor does an equation that this unknown moves less than
                 * 1e-6 as much, for the size of its terms, as the equation
                 * with other terms it moves most (among those whose terms
                 * are not below 1e-12 of the largest such, near its
                 * rounding: an equation whose terms all but vanish, a
                 * junction on a path without flow, is moved by anything;
                 * sizes compared in the rows of the factorization's
                 * equilibrated J, D_r J D_c, where an equation's terms
                 * do not depend on its units: compared as given, rows
                 * 1e20 apart put the small one below that line and its
                 * hidden constraint passed at 1e-4 of its terms).
                 * Such a coefficient may be a difference quotient's noise
                 * (about 1e-8 in that measure), whose others / a would set
                 * the floor below at the equation's size over that noise.
                 * Unit-free (rows and the column scale alike); leaving an
                 * equation out can only tighten the tolerance. */
                double t = terms[b->col_rows[e]], a = b->col_abs[e];
                if (a <= 1e-6 * reach * t) continue;
                double ratio = (t - a * own) / a; /* the other terms, in x_j */
                /* beyond the double range: a scale no x_j can have (an
                 * infinite tolerance would pass any residual) */
                if (!(ratio < INFINITY)) continue;
                cap = ratio > cap ? ratio : cap;
                /* nor one whose coefficient changed by more than half of
                 * itself over the solve's last step: both rules extrapolate
                 * J_ij linearly over a change of x_j (others / a, and the
                 * floor below 8 eps / rtol of it) mostly far wider than
                 * that step, and such a J_ij is no such slope but a
                 * derivative vanishing at the root (a crank angle in
                 * r cos(angle) at dead centre, whose 1e-9 rad of rounding
                 * gave it a slope of 209 where it is 0, and the angle a
                 * floor of 1.9e-6 rad: CDYN_OK with the other row off by
                 * 5e-7 m; with the angle's rounding alone as its value,
                 * a scale of 1.5e-3 rad). Unit-free: J_ij against itself. */
                if (before) {
                    size_t at = (size_t)b->col_rows[e] + (size_t)j * k;
                    if (!(fabs(J[at] - before[at]) <= 0.5 * fabs(J[at]))) continue;
                }
                best = ratio < best ? ratio : best;
                widest = ratio > widest ? ratio : widest;
            }
            if (b->nominal[j] > 0.0) { /* learned, within what the equations say */
                double learned = rtol * b->nominal[j];
                if (cap > 0.0 && learned > cap) learned = cap;
                b->tol_x[j] += learned;
                /* no equation bounds it (each of j's has j's term alone,
                 * as far as this iterate shows) while the correction moves
                 * x_j beyond rtol of itself: a closed valve's flow heading
                 * for 0, or a constant hidden behind the stale term of a
                 * warm start (1e-19 Pa beside 1e10 Q|Q| = 1e-15 from the
                 * last solution: that Q is 100 times the root, within this
                 * tolerance, and a rate through a compliance of 1e-9 came
                 * back 1e2 times too large). solve() takes one more
                 * iterate, whose pair with this one fits the constant. */
                if (cap == 0.0 && fabs(b->dx[j]) > rtol * fabs(x[j])) nt->learned_unchecked = 1;
                continue;
            }
            /* and never below the rounding of the largest equation that
             * determines it (others / a / rtol is that equation's terms in
             * the unknown's units): an equation whose terms all vanish (a
             * junction on a path without flow) asks for an accuracy no
             * iteration can reach */
            /* the owner's other rows may ask for more (each within its
             * own rounding, not G's: observed_scale) */
            double observed = observed_scale(nt, j, own);
            if (isfinite(best) || isfinite(observed)) {
                double floor = 8.0 * DBL_EPSILON * widest / rtol;
                double least = best > floor ? best : floor;
                least = observed < least ? observed : least;
                /* a scale 1e32 times every (non-zero) value the unknown
                 * has taken in this solve says nothing of it either (an
                 * equation it barely enters: 1e-303 x beside terms of 10
                 * set 1e294 for an x of 0.2): then rtol of those values */
                if (b->reached[j] > 0.0 && least > 1e32 * b->reached[j])
                    least = rtol * b->reached[j];
                if (least > b->tol_x[j]) b->tol_x[j] = least;
            }
        }
    }
    if (nt->has_gtol) {
        memcpy(b->tol_g, b->gtol, sizeof(double) * (size_t)k);
        return;
    }
    memset(b->tol_g, 0, sizeof(double) * (size_t)k);
    for (int j = 0; j < p; ++j) {
        const int *rows;
        const double *col;
        int count = column(nt, J, j, &rows, &col);
        double t = b->tol_x[j];
        for (int e = 0; e < count; ++e) b->tol_g[rows ? rows[e] : e] += fabs(col[e]) * t;
    }
    /* never below the rounding the owner knows G is evaluated with: no
     * iterate can bring G below it */
    if (nt->noise_source)
        for (int i = 0; i < k; ++i) b->tol_g[i] = b->noise[i] > b->tol_g[i] ? b->noise[i] : b->tol_g[i];
}

/* The constant of equation i fitted over two iterates (THEORY T2.5): a term
 * a x^p of one unknown has J x = p a x^p, so G = c + s (J x) with s = 1/p;
 * two iterates give s = dG / d(J x) and c = G - s J x. That finds a
 * constant hidden behind a curvature term (1.76 sin t beside -2 v|v| far
 * from the root, where G - J x = c + 2 v|v| passes for no constant) and
 * finds none in a pure power (k Q|Q| at a closing valve: c = 0 to
 * rounding). Only fits with 1/8 <= s <= 1 (powers 1 to 8) count, only
 * beyond the error that a Jacobian accurate to 1e-6 of its terms (a
 * difference quotient's) and the rounding of G leave in c, and never more
 * than the terms |J x| themselves: an equation's constant then gives an
 * unknown at most the scale its own terms give, so a wrong fit can loosen
 * no tolerance by more than a factor 2. affine = G - J x and terms =
 * sum_j |J_ij x_j| at this iterate; b->fit holds them at the one before. */
static double fitted_constant(const cdyn_newton *nt, int i, double affine, double terms)
{
    const buffers *b = &nt->b;
    int k = nt->k;
    double g = b->g[i], y = g - affine;
    double g0 = b->fit[i], y0 = b->fit[k + i], terms0 = b->fit[2 * k + i];
    double dy = y - y0;
    if (!(fabs(dy) > 0.0) || !isfinite(dy)) return 0.0;
    double s = (g - g0) / dy;
    if (!(s >= 0.125 && s <= 1.0)) return 0.0;
    double c = fabs(g - s * y);
    double spread = 1.0 + (terms + terms0) / fabs(dy); /* the fit's amplification */
    double error = 1e-6 * s * terms * spread +
                   4.0 * (nt->p + 1) * DBL_EPSILON * (fabs(g) + fabs(g0) + terms + terms0) * spread;
    if (!(c > error)) return 0.0;
    return c < terms ? c : terms;
}

/* The size of the terms of each equation that belong to no unknown, at the
 * initial guess: what of |G_i| the unknowns' terms |J_ij x_j| do not account
 * for (exact for equations linear in x; 0 for an equation made only of
 * unknowns' terms, such as k Q|Q| at a closed valve, whose |G| must not pass
 * for a scale of its own; 0 too where that difference is within the
 * rounding of |G| and the terms: far from the root, eps |G(x0)| would pass
 * for a constant that no later iterate's terms come near, 1e20 m beside a
 * slider's 73 m). An equation that (nearly) holds at the guess
 * while its affine part c = G(x0) - J x0 is large has a term of no unknown
 * of that size which cancels the unknowns' terms (a constant load balanced
 * by a flow): then |c| (for k Q|Q| alone, |G| = |c|, and nothing changes).
 * The iterations apply that rule again at every iterate (first = 0): a
 * guess far from the root can hide a constant behind a term that vanishes
 * at the root. On entry (first) g_start = |G(x0)|; b->g = G(x) at x; J
 * (ld k) is J(x), or for a chord start the kept Jacobian. */
static void constant_terms(cdyn_newton *nt, const double *J, const double *x, int first)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    nt->fit_pair = !first && nt->fit_valid;
    double *terms = b->g_trial; /* sum_j |J_ij x_j|, by columns */
    double *affine = b->g_best; /* G(x0) - J x0; free until a line search */
    memset(terms, 0, sizeof(double) * (size_t)k);
    memcpy(affine, b->g, sizeof(double) * (size_t)k);
    for (int j = 0; j < p; ++j) {
        const int *rows;
        const double *col;
        int count = column(nt, J, j, &rows, &col);
        for (int e = 0; e < count; ++e) {
            terms[rows ? rows[e] : e] += fabs(col[e] * x[j]);
            affine[rows ? rows[e] : e] -= col[e] * x[j];
        }
    }
    for (int i = 0; i < k; ++i) {
        if (first) { /* |G| - sum |J x|: a part below their rounding is none */
            double rest = b->g_start[i] - terms[i];
            double rounding = 4.0 * (p + 1) * DBL_EPSILON * (b->g_start[i] + terms[i]);
            b->g_base[i] = rest > rounding ? rest : 0.0;
            /* terms that cancel in G(x0) (two equal flows into and out of
             * a junction) hide their size from the guess; an owner that
             * knows them says so (cdyn__newton_set_known_terms) */
            if (nt->has_known) b->g_base[i] = fmax(b->g_base[i], b->known[i]);
        }
        /* the guess's part, and what this iterate shows: not the largest
         * any iterate showed. The affine part of k Q|Q| is that term
         * itself: kept from an early iterate (2.5e3 at Q = 5e-4 where the
         * root is 2e-14) it passed the equation at 20 % of its terms,
         * CDYN_OK with Q 10 % off from a fresh guess. A true constant
         * shows at every iterate. */
        b->g_start[i] = b->g_base[i];
        if (fabs(b->g[i]) < 0.5 * fabs(affine[i]) && isfinite(affine[i]))
            b->g_start[i] = fmax(b->g_start[i], fabs(affine[i]));
        if (!first && nt->fit_valid)
            b->g_start[i] = fmax(b->g_start[i], fitted_constant(nt, i, affine[i], terms[i]));
        double *fit = b->fit;
        fit[i] = b->g[i];
        fit[k + i] = b->g[i] - affine[i];
        fit[2 * k + i] = terms[i];
    }
    nt->fit_valid = 1;
}

/* max_i |v_i| / tol_i, with 0/0 = 0 and v/0 = Inf. */
static double weighted_max(int n, const double *v, const double *tol)
{
    double worst = 0.0;
    for (int i = 0; i < n; ++i) {
        double a = fabs(v[i]);
        if (a == 0.0) continue;
        worst = fmax(worst, tol[i] > 0.0 ? a / tol[i] : INFINITY);
    }
    return worst;
}

/* The line search's merit: max_i |G_i| / gtol_i over the equations that
 * have a scale. An equation without one (every unknown in it of unknown
 * magnitude and nothing else in it at the start: a flow and a pressure
 * that are exactly zero at rest) cannot be judged until a step gives it
 * one; the convergence test still requires it (weighted_max). */
static double merit(int n, const double *g, const double *tol)
{
    double worst = 0.0;
    for (int i = 0; i < n; ++i)
        if (tol[i] > 0.0) worst = fmax(worst, fabs(g[i]) / tol[i]);
    return worst;
}

/* ---- the iteration --------------------------------------------------------- */

/* On the SVD path: are there numerically non-zero singular values that the
 * rank tolerance dropped? */
static int can_widen(const cdyn_newton *nt)
{
    return nt->mode == MODE_SVD && nt->rank_numerical > nt->rank_used;
}

/* With J by differences (no callback, not the owner's): the correction
 * along the singular values that the rank tolerance dropped but that are
 * not 0 to working accuracy, in units of tol_x. A difference quotient's
 * entries carry about sqrt(eps) of their size, so the rank decision at
 * 1e-10 decides in their noise: a linear system of condition 1e8 was
 * judged rank 1, the truncated correction met the tests, and x came back
 * 7.7e-3 off with CDYN_OK. When this is above 1, x is not determined by
 * what the differences can see.
 * Uses b->dx_prev (p) for the wide correction. */
static double hidden_correction(cdyn_newton *nt)
{
    if (!can_widen(nt)) return 0.0;
    int used = nt->rank_used;
    nt->rank_used = nt->rank_numerical;
    for (int i = 0; i < nt->k; ++i) nt->b.scratch[i] = -nt->b.g[i];
    cdyn__newton_apply(nt, nt->b.scratch, nt->b.dx_prev);
    nt->rank_used = used;
    return weighted_max(nt->p, nt->b.dx_prev, nt->b.tol_x);
}

/* T2.3 refinement: when the truncated step cannot lower a residual that is
 * still above tolerance (it sits in the dropped directions), step with
 * every numerically non-zero singular value. */
static void widen(cdyn_newton *nt)
{
    nt->rank_used = nt->rank_numerical;
    for (int i = 0; i < nt->k; ++i) nt->b.scratch[i] = -nt->b.g[i];
    cdyn__newton_apply(nt, nt->b.scratch, nt->b.dx);
}

/* x <- x + a dx (T2.1), first with a = first (2 for a suspected double
 * root: kept only if it meets the residual test), then a = 1, halved while
 * the weighted residual does not fall below `current`, at most
 * max_backtracks times. Without must_descend a full step (a = 1) is always
 * taken (plain Newton). When no trial lowers the residual, x and b->g are
 * restored and *step is 0; otherwise *step = ||a dx||_inf. */
/* The fraction a of the correction b->dx at which no unknown moves by
 * more than 16 times the larger of its value and its learned magnitude
 * (1: none would). From a flow of 3e-22 m^3/s (a drained tank, learned
 * 3e-3) the correction toward a root at 3e-3 is 5e15, and 40 halvings of
 * it never came back below the root: "no descent", CDYN_ERR_NOCONV, where
 * a fresh guess converges. Only after the line search from the full
 * step found no descent. */
static double bounded_start(const cdyn_newton *nt, const double *x)
{
    double a = 1.0;
    for (int j = 0; j < nt->p; ++j) {
        double reach = 16.0 * fmax(fabs(x[j]), nt->b.nominal[j]), move = fabs(nt->b.dx[j]);
        if (reach > 0.0 && move * a > reach) a = reach / move;
    }
    return a;
}

/* Did a doubled step put an unknown exactly on 0 while G is not 0 there?
 * Halving corrections (x|x| far from a root c / k near 0) look like a
 * double root, and the doubled step lands on x = 0 exactly, where J = 0:
 * an orifice from a guess of 1e-3 m^3/s with a pressure drop of 1e-17 Pa
 * ended CDYN_ERR_NOCONV ("J has rank 0"). Such a trial is not kept unless
 * G is at its rounding there (a true double root at 0: a closed valve's
 * flow beside its junction). b->x_prev: the step's start; b->g: G at the
 * trial; b->jac: J at the step's start. */
static int residual_at_rounding(cdyn_newton *nt, const double *J, const double *x);

static int lands_on_zero(cdyn_newton *nt, const double *x)
{
    int landed = 0;
    for (int j = 0; j < nt->p; ++j) landed |= x[j] == 0.0 && nt->b.x_prev[j] != 0.0;
    return landed && !residual_at_rounding(nt, nt->b.jac, x);
}

static cdyn_status line_search(cdyn_newton *nt, cdyn_residual_fn residual, void *user,
                               double *x, double current, double first, int must_descend,
                               double *step)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    memcpy(b->x_prev, x, sizeof(double) * (size_t)p);
    memcpy(b->g_best, b->g, sizeof(double) * (size_t)k);
    memcpy(b->noise_best, b->noise, sizeof(double) * (size_t)k);
    double a = first;
    for (int halvings = 0;;) {
        for (int j = 0; j < p; ++j) x[j] = b->x_prev[j] + a * b->dx[j];
        cdyn_status st = eval_residual(nt, residual, user, x, b->g);
        if (st != CDYN_OK) return st;
        double trial = merit(k, b->g, b->tol_g);
        /* a doubled step is kept only when it solves the equations (a
         * double root); far from a root the corrections halve too, and
         * there the doubled step would overshoot below the root */
        int accept = a > 1.0 ? trial <= 1.0 && !lands_on_zero(nt, x) : trial < current || (!must_descend && a == 1.0);
        if (accept) {
            *step = a * norm_inf(p, b->dx);
            return CDYN_OK;
        }
        if (a > 1.0) {
            a = 1.0; /* the doubled trial failed: plain Newton next */
            continue;
        }
        if (halvings >= nt->max_backtracks) break;
        a *= 0.5;
        ++halvings;
        nt->report.backtracks++;
    }
    memcpy(x, b->x_prev, sizeof(double) * (size_t)p);
    memcpy(b->g, b->g_best, sizeof(double) * (size_t)k);
    memcpy(b->noise, b->noise_best, sizeof(double) * (size_t)k);
    *step = 0.0;
    return CDYN_OK;
}

/* Record the converged solution's magnitudes (tolerances()): only values
 * that the tolerance tells apart from zero (a flow that converged to
 * 1e-170 at a closed valve is zero, not a magnitude). */
static void learn_magnitudes(cdyn_newton *nt, const double *x)
{
    for (int j = 0; j < nt->p; ++j)
        if (fabs(x[j]) > nt->b.tol_x[j]) nt->b.nominal[j] = fmax(nt->b.nominal[j], fabs(x[j]));
}

/* Is G at its rounding at x? Each |G_i| within ROUNDING_SLACK eps of its
 * equation's terms: sum_j |J_ij x_j|, the part no unknown accounts for
 * (g_start) and the owner's known rounding. The shrink rule below took a
 * correction that shrank by less than 30 % as the sign of rounding; a
 * root approached linearly (a quintic beside a 1e-7 slope, or any inexact
 * Jacobian) shrinks so too, and x came back 4.2e-4 off with G 8.4e-11,
 * 1e5 times its rounding, with CDYN_OK. Uses b->scratch. */
#define ROUNDING_SLACK 64.0

static int residual_at_rounding(cdyn_newton *nt, const double *J, const double *x)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    double *terms = b->scratch;
    for (int i = 0; i < k; ++i) terms[i] = fabs(b->g_start[i]);
    for (int j = 0; j < p; ++j) {
        const int *rows;
        const double *col;
        int count = column(nt, J, j, &rows, &col);
        for (int e = 0; e < count; ++e) terms[rows ? rows[e] : e] += fabs(col[e] * x[j]);
    }
    for (int i = 0; i < k; ++i) {
        double floor = ROUNDING_SLACK * DBL_EPSILON * terms[i];
        if (nt->noise_source && b->noise[i] > floor) floor = b->noise[i];
        if (!(fabs(b->g[i]) <= floor)) return 0;
    }
    return 1;
}

/* The end of a solve whose x meets the residual test while G is at its
 * rounding level: the correction is rounding too, amplified by J's
 * conditioning, and no iteration can improve x; the report's error ratio
 * (> 1) says how far that is from the requested tolerance. b->g = G(x). */
static cdyn_status converged_at_rounding(cdyn_newton *nt, const double *x, double res,
                                         double err)
{
    nt->report.converged = 1;
    nt->report.residual_norm = norm_inf(nt->k, nt->b.g);
    nt->report.residual_ratio = res;
    nt->report.error_ratio = err;
    learn_magnitudes(nt, x);
    return CDYN_OK;
}

/* Can a solve start with chord steps? The owner asked for them and kept a
 * factorization for them. */
static int chord_ready(const cdyn_newton *nt)
{
    int kept = nt->has_ops ? nt->ops.kept && nt->ops.kept(nt->ops.ctx) : nt->kept_valid;
    return nt->chord && kept && nt->max_iterations > 2;
}

/* Chord steps (simplified Newton): x += -J0^-1 G(x) with the factorization
 * the owner kept, J0 its Jacobian at an earlier, nearby point (the last
 * solution it committed), without a new Jacobian or factorization. They go
 * on while the corrections shrink by at least half and lower the residual,
 * at most CHORD_STEPS times, and stop as soon as a correction is within
 * tolerance;
 * a trial that does not lower the residual is undone. The regular
 * iteration then judges x with a fresh Jacobian exactly as it judges any
 * iterate, so the chord changes what a solve costs, never what it accepts.
 * A residual callback that fails at a trial fails the solve, as in the line
 * search. On entry b->g = G(x). */
enum { CHORD_STEPS = 4 };

static cdyn_status chord(cdyn_newton *nt, cdyn_residual_fn residual, void *user, double *x)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    const double *J0 = b->kept_jac; /* the owner's J, by column access, on its solver */
    pack_columns(nt, J0);
    constant_terms(nt, J0, x, 1);
    int steps = nt->max_iterations - 2 < CHORD_STEPS ? nt->max_iterations - 2 : CHORD_STEPS;
    double previous = INFINITY;
    for (int s = 0; s < steps; ++s) {
        for (int i = 0; i < k; ++i) b->scratch[i] = -b->g[i];
        if (nt->has_ops)
            nt->ops.apply(nt->ops.ctx, b->scratch, b->dx);
        else
            apply_square(nt, b->kept_qr, b->kept_tau, b->kept_jpvt, b->kept_row_scale,
                         b->kept_col_scale, nt->kept_r_diagonal, b->scratch, b->dx);
        if (s == 0) /* the weights of the start serve the chord */
            tolerances(nt, J0, x, nt->has_ops ? NULL : b->kept_row_scale, b->kept_col_scale);
        double err = weighted_max(p, b->dx, b->tol_x);
        if (!(err > 1.0 && err < 0.5 * previous && isfinite(err))) break;
        double current = merit(k, b->g, b->tol_g);
        memcpy(b->x_prev, x, sizeof(double) * (size_t)p);
        memcpy(b->g_best, b->g, sizeof(double) * (size_t)k);
        memcpy(b->noise_best, b->noise, sizeof(double) * (size_t)k);
        for (int j = 0; j < p; ++j) x[j] += b->dx[j];
        nt->report.iterations++;
        cdyn_status st = eval_residual(nt, residual, user, x, b->g);
        if (st != CDYN_OK) return st;
        if (!(merit(k, b->g, b->tol_g) < current)) { /* the regular iteration starts back */
            memcpy(x, b->x_prev, sizeof(double) * (size_t)p);
            memcpy(b->g, b->g_best, sizeof(double) * (size_t)k);
            memcpy(b->noise, b->noise_best, sizeof(double) * (size_t)k);
            break;
        }
        previous = err;
    }
    return CDYN_OK;
}

/* The acceptance of cdyn__newton_set_judge_near, after a full step from
 * x_prev to x (b->g = G(x), b->dx_prev the step): the next correction by
 * the step's own factorization of J(x_prev), with tolerances at x. x is
 * accepted when that correction and G meet the usual tests and the
 * correction is at most a tenth of the step, which it shrank from (the
 * quadratic regime, where J(x_prev) and J(x) give the same correction to
 * within that tenth). Only the pivoted QR at full rank, square or wide,
 * with the caller's Jacobian judges this way. */
static int accepted_near(cdyn_newton *nt, int has_jacobian, const double *x)
{
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    if (!nt->judge_near || !has_jacobian || nt->has_ops || nt->mode == MODE_SVD ||
        nt->rank < k)
        return 0;
    for (int i = 0; i < k; ++i) b->scratch[i] = -b->g[i];
    cdyn__newton_apply(nt, b->scratch, b->dx);
    tolerances(nt, b->jac, x, b->row_scale, b->col_scale);
    if (nt->learned_unchecked) return 0; /* as in solve(): the next iterate fits it */
    double res = weighted_max(k, b->g, b->tol_g), err = weighted_max(p, b->dx, b->tol_x);
    double step = weighted_max(p, b->dx_prev, b->tol_x);
    if (!(res <= 1.0 && err <= 1.0 && err <= 0.1 * step)) return 0;
    nt->report.converged = 1;
    nt->report.residual_norm = norm_inf(k, b->g);
    nt->report.residual_ratio = res;
    nt->report.error_ratio = err;
    learn_magnitudes(nt, x);
    nt->near_factored = 1;
    return 1;
}

static cdyn_status solve(cdyn_newton *nt, cdyn_residual_fn residual, cdyn_jacobian_fn jacobian,
                         void *user, double *x);

cdyn_status cdyn_newton_solve(cdyn_newton *nt, cdyn_residual_fn residual,
                              cdyn_jacobian_fn jacobian, void *user, double *x)
{
    if (!nt) return CDYN_ERR_ARG;
    if (check_idle(nt, "cdyn_newton_solve")) return CDYN_ERR_BUSY;
    nt->solving = 0;
    cdyn_status st = solve(nt, residual, jacobian, user, x);
    nt->has_known = 0; /* the owner's terms were for this solve */
    nt->noise_source = NULL; /* and its rounding */
    nt->observed_count = NULL; /* and its other rows */
    if (nt->solving) { /* the counters take the solve's report */
        cdyn_newton_counters *c = &nt->counters;
        c->solves++;
        c->failures += st != CDYN_OK;
        c->iterations += nt->report.iterations;
        c->svd_steps += nt->report.svd_steps;
        c->backtracks += nt->report.backtracks;
        nt->solving = 0;
    }
    return st;
}

/* The solve itself, after the object checks. */
static cdyn_status solve(cdyn_newton *nt, cdyn_residual_fn residual, cdyn_jacobian_fn jacobian,
                         void *user, double *x)
{
    const char *fn = "cdyn_newton_solve";
    if (!residual) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: residual callback is NULL", fn);
    if (!x) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "%s: x is NULL", fn);
    buffers *b = &nt->b;
    int k = nt->k, p = nt->p;
    long bad = cdyn__first_nonfinite(p, 1, x, p);
    if (bad >= 0)
        return cdyn__fail(nt->msg, CDYN_ERR_NONFINITE, "%s: x[%ld] is not finite", fn, bad);
    report_reset(nt);
    nt->solving = 1;
    memcpy(b->x_best, x, sizeof(double) * (size_t)p);
    for (int j = 0; j < p; ++j) b->reached[j] = fabs(x[j]);
    nt->jac_prev_valid = 0;
    nt->fit_valid = 0;
    int have_jacobian = 0; /* b->jac is J at an iterate of this solve */
    double best = INFINITY, best_norm = 0.0, best_error = INFINITY;
    int previous_full = 0;
    int pending = 0; /* x is an accepted iterate not yet compared with the best */
    int previous_met = 0; /* the previous iterate met the residual test */
    int deferred = 0;     /* this iterate's acceptance waits for the next one */
    cdyn_status st = eval_residual(nt, residual, user, x, b->g);
    for (int i = 0; st == CDYN_OK && i < k; ++i) b->g_start[i] = fabs(b->g[i]);
    int fresh = 1;
    if (st == CDYN_OK && chord_ready(nt)) {
        st = chord(nt, residual, user, x);
        fresh = 0;
        nt->fit_valid = 0; /* the chord's G and J x are no iterate pair of the fit */
    }
    for (; st == CDYN_OK; fresh = 0) {
        if (have_jacobian && !nt->has_ops) { /* J at the iterate before, for tolerances() */
            memcpy(b->jac_prev, b->jac, sizeof(double) * (size_t)k * (size_t)p);
            nt->jac_prev_valid = 1;
        }
        st = eval_jacobian(nt, residual, jacobian, user, x);
        have_jacobian = st == CDYN_OK;
        if (st == CDYN_OK) pack_columns(nt, b->jac);
        if (st == CDYN_OK) constant_terms(nt, b->jac, x, fresh);
        if (st == CDYN_OK) st = newton_direction(nt, b->jac, k, b->g, b->dx);
        if (st != CDYN_OK) break;
        tolerances(nt, b->jac, x, nt->has_ops ? NULL : b->row_scale, b->col_scale);
        double res = weighted_max(k, b->g, b->tol_g), err = weighted_max(p, b->dx, b->tol_x);
        nt->report.residual_norm = norm_inf(k, b->g);
        nt->report.residual_ratio = res;
        nt->report.error_ratio = err;
        /* the best iterate so far, both judged with today's weights (the
         * weights move with x: compared each with its own, a far iterate of
         * large |x| would look better than a nearer one) */
        pending = 0;
        if (!isfinite(best) || res < weighted_max(k, b->g_keep, b->tol_g)) {
            best = res;
            best_norm = nt->report.residual_norm;
            best_error = err;
            memcpy(b->x_best, x, sizeof(double) * (size_t)p);
            memcpy(b->g_keep, b->g, sizeof(double) * (size_t)k);
        }
        int accept = res <= 1.0 && err <= 1.0;
        /* an acceptance that rests on a learned magnitude no equation
         * bounds waits for one more iterate (tolerances(), above), unless
         * this one already has its pair or the budget is spent */
        deferred = accept && nt->learned_unchecked && !nt->fit_pair &&
                   nt->report.iterations < nt->max_iterations;
        if (deferred) accept = 0;
        int at_rounding = !accept && !deferred && res <= 1.0 && previous_met &&
                          err > 0.7 * weighted_max(p, b->dx_prev, b->tol_x) &&
                          residual_at_rounding(nt, b->jac, x);
        int differenced = (!jacobian || nt->differenced) && !nt->has_ops;
        double hidden = (accept || at_rounding) && differenced ? hidden_correction(nt) : 0.0;
        if (hidden > 1.0) {
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: J by differences drops singular values (rank %d of %d kept) "
                            "that are not 0 to its accuracy, and along them x may be off by %.3g "
                            "times its tolerance: give the Jacobian callback",
                            fn, nt->rank_used, nt->rank_numerical, hidden);
            break;
        }
        if (accept) {
            nt->report.converged = 1;
            learn_magnitudes(nt, x);
            nt->solution_factored = (jacobian || nt->has_ops) && nt->mode != MODE_SVD;
            return CDYN_OK;
        }
        /* the residual test met here and at the previous iterate while the
         * correction no longer shrinks: rounding, not progress (newton.h) */
        if (at_rounding) {
            nt->solution_factored = (jacobian || nt->has_ops) && nt->mode != MODE_SVD;
            return converged_at_rounding(nt, x, res, err);
        }
        previous_met = res <= 1.0;
        if (nt->report.iterations >= nt->max_iterations) {
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: no convergence in %d iterations (at the best iterate the "
                            "residual is %.3g times its tolerance, the predicted error %.3g "
                            "times)",
                            fn, nt->max_iterations, best, best_error);
            break;
        }
        /* a truncated (SVD) step within tolerance cannot reduce the residual
         * left in the dropped directions: widen it, or there is no solution */
        int widened = 0;
        if (nt->mode == MODE_SVD && err <= 1.0 && !deferred) {
            if (!can_widen(nt)) {
                st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                                "%s: no solution near x: J has rank %d < %d there and the "
                                "residual left in the directions it cannot reach is %.3g "
                                "times its tolerance (||G||_inf = %.3e)",
                                fn, nt->rank, k, res, nt->report.residual_norm);
                break;
            }
            widen(nt);
            widened = 1;
        }
        /* two full corrections shrinking by about 2: a double root (T2.5);
         * both measured with today's weights, which shrink with x when the
         * root is at 0 */
        double previous = previous_full ? weighted_max(p, b->dx_prev, b->tol_x) : 0.0;
        double ratio = previous > 0.0 && isfinite(previous) ? err / previous : 0.0;
        double first = ratio > 0.3 && ratio < 0.7 ? 2.0 : 1.0;
        memcpy(b->dx_prev, b->dx, sizeof(double) * (size_t)p);
        double step = 0.0;
        double current = merit(k, b->g, b->tol_g);
        st = line_search(nt, residual, user, x, current, first,
                         widened || nt->max_backtracks > 0, &step);
        if (st == CDYN_OK && step == 0.0 && deferred) { /* x restored: as it was judged */
            nt->report.converged = 1;
            learn_magnitudes(nt, x);
            nt->solution_factored = (jacobian || nt->has_ops) && nt->mode != MODE_SVD;
            return CDYN_OK;
        }
        if (st == CDYN_OK && step == 0.0 && !widened && can_widen(nt)) {
            widen(nt); /* the truncated direction does not descend: retry wider */
            widened = 1;
            st = line_search(nt, residual, user, x, current, 1.0, 1, &step);
        }
        double bounded = st == CDYN_OK && step == 0.0 ? bounded_start(nt, x) : 1.0;
        if (bounded < 0.5) /* halvings from there, not from a step far past every scale */
            st = line_search(nt, residual, user, x, current, bounded, 1, &step);
        nt->report.iterations++;
        nt->report.step_norm = step;
        pending = st == CDYN_OK && step > 0.0;
        previous_full = step > 0.0 && step == norm_inf(p, b->dx_prev);
        if (st == CDYN_OK && previous_full && accepted_near(nt, jacobian != NULL, x))
            return CDYN_OK;
        if (st == CDYN_OK && step == 0.0 && res <= 1.0 && !residual_at_rounding(nt, b->jac, x)) {
            /* no descent although G is above its rounding: the correction
             * is not J's (a Jacobian by differences in its noise left x
             * 2.8e-2 off with this exit's CDYN_OK) */
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: no step along the correction lowers the residual (%.3g times "
                            "its tolerance, above its rounding): the Jacobian does not fit G "
                            "here%s",
                            fn, res,
                            (jacobian && !nt->differenced) || nt->has_ops
                                ? ""
                                : " (by differences: give the Jacobian callback)");
            break;
        }
        if (st == CDYN_OK && step == 0.0 && res <= 1.0) {
            /* x (restored) meets the residual test and no step along the
             * correction lowers the residual: G is at its rounding level */
            nt->solution_factored = (jacobian || nt->has_ops) && nt->mode != MODE_SVD;
            return converged_at_rounding(nt, x, res, err);
        }
        if (st == CDYN_OK && step == 0.0)
            st = cdyn__fail(nt->msg, CDYN_ERR_NOCONV,
                            "%s: no descent along the Newton direction%s (the residual stays "
                            "%.3g times its tolerance)",
                            fn, widened ? " even with every non-zero singular value" : "", res);
    }
    /* failure: hand back the best iterate seen, the last accepted one
     * included when the failure came before it was judged (b->g = G(x)) */
    if (pending && isfinite(best)) {
        double res = weighted_max(k, b->g, b->tol_g);
        if (res < weighted_max(k, b->g_keep, b->tol_g)) {
            best = res;
            best_norm = norm_inf(k, b->g);
            best_error = -1.0; /* no correction was computed there */
            memcpy(b->x_best, x, sizeof(double) * (size_t)p);
        }
    }
    memcpy(x, b->x_best, sizeof(double) * (size_t)p);
    if (isfinite(best)) {
        nt->report.residual_norm = best_norm;
        nt->report.residual_ratio = best;
        nt->report.error_ratio = best_error;
    }
    return st;
}

cdyn_status cdyn_newton_get_report(const cdyn_newton *nt, cdyn_newton_report *report)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!report) return cdyn__fail(nt->msg, CDYN_ERR_ARG, "cdyn_newton_get_report: report is NULL");
    *report = nt->report;
    return CDYN_OK;
}

int cdyn_newton_dependent_rows(const cdyn_newton *nt, int *rows)
{
    if (!nt) return -1;
    if (rows) memcpy(rows, nt->b.dependent_rows, sizeof(int) * (size_t)nt->n_dependent_rows);
    return nt->n_dependent_rows;
}

int cdyn_newton_dropped_columns(const cdyn_newton *nt, int *cols)
{
    if (!nt) return -1;
    if (cols) memcpy(cols, nt->b.dropped_cols, sizeof(int) * (size_t)nt->n_dropped_cols);
    return nt->n_dropped_cols;
}

cdyn_status cdyn_newton_get_counters(const cdyn_newton *nt, cdyn_newton_counters *counters)
{
    if (!nt) return CDYN_ERR_ARG;
    if (!counters)
        return cdyn__fail(nt->msg, CDYN_ERR_ARG, "cdyn_newton_get_counters: counters is NULL");
    *counters = nt->counters;
    return CDYN_OK;
}

cdyn_status cdyn_newton_reset_counters(cdyn_newton *nt)
{
    if (!nt) return CDYN_ERR_ARG;
    if (check_idle(nt, "cdyn_newton_reset_counters")) return CDYN_ERR_BUSY;
    memset(&nt->counters, 0, sizeof nt->counters);
    return CDYN_OK;
}

int cdyn_newton_size(const cdyn_newton *nt) { return nt ? nt->p : -1; }

int cdyn_newton_rows(const cdyn_newton *nt) { return nt ? nt->k : -1; }

const char *cdyn_newton_last_error(const cdyn_newton *nt)
{
    return nt ? nt->msg : "cdyn_newton: NULL object";
}

int cdyn__newton_solution_factored(const cdyn_newton *nt)
{
    return nt->solution_factored;
}

int cdyn__newton_near_factored(const cdyn_newton *nt) { return nt->near_factored; }
