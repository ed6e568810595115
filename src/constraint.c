/* Constrained accelerations of a mechanism at one instant (THEORY
 * T4.3-T4.8): the object, its settings, the loaded instant, the rank of
 * Phi_q by the rank policy and the diagnosis of a rank loss. The
 * formulations are in constraint_solve.c. */
#include "constraint_internal.h"
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static double *doubles(size_t count) { return malloc(sizeof(double) * (count > 0 ? count : 1)); }

cdyn_constraint *cdyn_constraint_create(int n, int m, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    int big = n > m ? n : m;
    if (n < 1 || m < 0 || (size_t)big * (size_t)big > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_constraint *c = cdyn__object_alloc(sizeof *c, offsetof(cdyn_constraint, msg));
    if (!c) goto fail;
    int m1 = cdyn__max(m, 1), k = n < m1 ? n : m1;
    size_t nn = (size_t)n * n, nm = (size_t)n * m1, mm = (size_t)m1 * m1;
    c->n = n;
    c->m = m;
    c->m1 = m1;
    c->k = k;
    c->rank_tol = CDYN__RANK_TOL;
    c->rank = -1;
    c->sigma_min = NAN;
    c->margin = NAN;
    int lwork = cdyn__max(cdyn__geqp3_lwork(n, m1), cdyn__geqp3_lwork(m1, n));
    lwork = cdyn__max(lwork, cdyn__geqp3_lwork(m1, m1)); /* pseudo-inverse's null space */
    lwork = cdyn__max(lwork, cdyn__ormqr_lwork('R', 'N', m1, n, k));   /* reactions */
    lwork = cdyn__max(lwork, cdyn__gesvd_jobs_lwork('N', 'N', m1, n)); /* sigma_min */
    lwork = cdyn__max(lwork, 4 * m1);
    c->lwork = lwork;
    c->work = doubles((size_t)lwork);
    /* the Gram certificate of full rank runs above the small sizes */
    int gram_work = m1 > CDYN__SMALL && m1 <= n ? 2 * m1 * m1 : 1;
    int ws_ok = cdyn__rank_ws_init(&c->ws, m1, n, gram_work);
    c->kd = calloc(mm, sizeof(double));
    c->kp = calloc(mm, sizeof(double));
    c->alpha = doubles((size_t)m1);
    c->weight_exp = malloc(sizeof(int) * (size_t)m1);
    c->mass_exp = malloc(sizeof(int) * (size_t)m1);
    c->mass = doubles(nn);
    c->force = doubles((size_t)n);
    c->jac = doubles(nm);
    c->mass_next = doubles(nn);
    c->jac_next = doubles(nm);
    c->accel_rhs = doubles((size_t)m1);
    c->phi = doubles((size_t)m1 * 3);
    if (c->phi) c->phi_dot = c->phi + m1, c->xi = c->phi_dot + m1;
    c->ref.amax = calloc(nm, sizeof(double));
    c->row_order = malloc(sizeof(int) * (size_t)m1);
    c->redundant_flag = calloc((size_t)m1, sizeof(int));
    c->gen_force = doubles((size_t)n);
    c->multipliers = doubles((size_t)m1);
    c->redundant = malloc(sizeof(int) * (size_t)m1);
    c->scale_q = doubles((size_t)n);
    c->scale_g = doubles((size_t)m1);
    c->scale_f = doubles((size_t)m1);
    c->aug_weight = doubles((size_t)m1);
    c->mult_unit = doubles((size_t)m1);
    c->chol = doubles(nn);
    c->jac_scaled = doubles(nm);
    c->coef_scaled = doubles(nm);
    c->x_rows = doubles(nm);
    c->z_rows = doubles(nm);
    c->small = doubles(mm);
    c->qr = doubles((size_t)big * big);
    c->tau = doubles((size_t)big);
    c->jpvt = malloc(sizeof(int) * (size_t)big);
    c->sv = doubles((size_t)k);
    c->active_rows = malloc(sizeof(int) * (size_t)m1);
    c->ipiv = malloc(sizeof(int) * (size_t)m1);
    c->iwork = malloc(sizeof(int) * (size_t)big);
    double **vectors_n[] = {&c->top, &c->w, &c->q_scaled, &c->q_result, &c->residual_top,
                            &c->delta_q, &c->pivot_inv};
    double **vectors_m[] = {&c->bottom,          &c->r,          &c->mult_scaled,
                            &c->mult_result,     &c->residual_bottom, &c->delta_mult,
                            &c->vec_m};
    int vectors_ok = 1;
    for (size_t i = 0; i < sizeof vectors_n / sizeof vectors_n[0]; ++i)
        vectors_ok &= (*vectors_n[i] = doubles((size_t)n)) != NULL;
    for (size_t i = 0; i < sizeof vectors_m / sizeof vectors_m[0]; ++i)
        vectors_ok &= (*vectors_m[i] = doubles((size_t)m1)) != NULL;
    c->kkt_work = doubles((size_t)(2 * n + m1)); /* the equilibration's */
    if (!ws_ok || !vectors_ok || !c->work || !c->kd || !c->kp || !c->alpha || !c->weight_exp ||
        !c->mass_exp || !c->mass ||
        !c->force || !c->jac || !c->accel_rhs || !c->phi || !c->row_order || !c->redundant_flag ||
        !c->gen_force || !c->multipliers || !c->redundant || !c->scale_q || !c->scale_g ||
        !c->scale_f || !c->aug_weight || !c->mult_unit || !c->chol || !c->jac_scaled || !c->coef_scaled || !c->x_rows ||
        !c->z_rows || !c->small || !c->qr || !c->tau || !c->jpvt || !c->sv ||
        !c->active_rows || !c->ipiv || !c->iwork || !c->kkt_work || !c->ref.amax ||
        !c->mass_next || !c->jac_next)
        goto fail;
    for (int i = 0; i < m1; ++i) { /* no history */
        c->weight_exp[i] = INT_MIN;
        c->mass_exp[i] = INT_MAX;
    }
    c->mass_history = 0;
    *status = CDYN_OK;
    return c;
fail:
    cdyn_constraint_free(c);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

void cdyn_constraint_free(cdyn_constraint *c)
{
    if (!c) return;
    cdyn__rank_ws_free(&c->ws);
    double *arrays[] = {c->work,      c->kd,          c->kp,          c->alpha,
                        c->mass,      c->force,       c->jac,         c->accel_rhs,
                        c->phi,
                        c->gen_force, c->multipliers, c->scale_q,     c->scale_g,
                        c->scale_f,   c->aug_weight, c->mult_unit, c->chol,        c->jac_scaled,  c->coef_scaled,
                        c->x_rows,    c->z_rows,      c->small,
                        c->qr,        c->tau,         c->sv,
                        c->top,       c->w,           c->q_scaled,    c->q_result,
                        c->residual_top, c->delta_q,  c->bottom,      c->r,
                        c->mult_scaled, c->mult_result, c->residual_bottom, c->delta_mult,
                        c->vec_m,     c->kkt_work,    c->ref.amax,    c->mass_next,
                        c->jac_next,  c->pivot_inv};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(c->row_order);
    free(c->weight_exp);
    free(c->mass_exp);
    free(c->active_rows);
    free(c->redundant_flag);
    free(c->redundant);
    free(c->jpvt);
    free(c->ipiv);
    free(c->iwork);
    free(c);
}

cdyn_status cdyn__constraint_check_idle(cdyn_constraint *c, const char *fn)
{
    return cdyn__guard_busy(&c->guard) ? cdyn__busy(c->msg, fn) : CDYN_OK;
}

void cdyn__constraint_set_owner(cdyn_constraint *c, const int *owner_in_callback)
{
    c->guard.owner = owner_in_callback;
}

/* ---- settings --------------------------------------------------------- */

/* c->stabilized from the gains as they now are; a loaded instant takes
 * them too (its s is formed again before its next use: cdyn__constraint_
 * restabilize), as a new rank tolerance re-decides it. */
static void note_gains(cdyn_constraint *c)
{
    size_t count = (size_t)c->m * c->m;
    c->stabilized = 0;
    for (size_t k = 0; k < count; ++k) c->stabilized |= c->kd[k] != 0.0 || c->kp[k] != 0.0;
    c->gains_pending = c->loaded;
    c->reusable = 0;
}

int cdyn__constraint_stabilized(const cdyn_constraint *c) { return c->stabilized; }

/* K_D = kd I, K_P = kp I (T4.6). */
static void set_diagonal_gains(cdyn_constraint *c, double kd, double kp)
{
    int m = c->m;
    c->gains_full = 0;
    memset(c->kd, 0, sizeof(double) * (size_t)c->m1 * c->m1);
    memset(c->kp, 0, sizeof(double) * (size_t)c->m1 * c->m1);
    for (int i = 0; i < m; ++i) {
        c->kd[i + (size_t)i * m] = kd;
        c->kp[i + (size_t)i * m] = kp;
    }
    note_gains(c);
}

/* CDYN_OK when every x[i] (m of them) is finite and > 0; NULL only if m = 0. */
static cdyn_status check_positive(cdyn_constraint *c, const char *fn, const char *name,
                                  const double *x)
{
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (c->m > 0 && !x) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    for (int i = 0; i < c->m; ++i)
        if (!(x[i] > 0.0) || isinf(x[i]))
            return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s[%d] = %g is not > 0", fn, name, i,
                              x[i]);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_baumgarte(cdyn_constraint *c, double a, double b)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_set_baumgarte";
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (!(a >= 0.0 && b >= 0.0) || isinf(a) || isinf(b))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: a = %g, b = %g (need finite >= 0)", fn, a, b);
    set_diagonal_gains(c, 2.0 * a, b * b);
    return CDYN_OK;
}

/* Is the m x m symmetric A positive definite? (the definiteness policy) */
static int is_spd(cdyn_constraint *c, const double *A, int lda)
{
    return cdyn__spd_factor(c->m, A, lda, c->small, c->m, c->vec_m) == 0;
}

cdyn_status cdyn_constraint_set_gains(cdyn_constraint *c, const double *KD, int ldkd,
                                      const double *KP, int ldkp)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_set_gains";
    int m = c->m;
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (m == 0) return CDYN_OK;
    if (!KD || !KP) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !KD ? "KD" : "KP");
    if (ldkd < m || ldkp < m)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: leading dimension < m = %d", fn, m);
    if (cdyn__first_nonfinite(m, m, KD, ldkd) >= 0 || cdyn__first_nonfinite(m, m, KP, ldkp) >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: NaN or Inf in the gains", fn);
    for (int j = 0; j < m; ++j)
        for (int i = j + 1; i < m; ++i) {
            double kd_skew = fabs(KD[i + (size_t)j * ldkd] - KD[j + (size_t)i * ldkd]);
            double kp_skew = fabs(KP[i + (size_t)j * ldkp] - KP[j + (size_t)i * ldkp]);
            double scale = fabs(KD[i + (size_t)j * ldkd]) + fabs(KD[j + (size_t)i * ldkd]) +
                           fabs(KP[i + (size_t)j * ldkp]) + fabs(KP[j + (size_t)i * ldkp]);
            if (kd_skew > 1e-12 * scale || kp_skew > 1e-12 * scale)
                return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is not symmetric (entry %d, %d)",
                                  fn, kd_skew > 1e-12 * scale ? "K_D" : "K_P", i, j);
        }
    int kd_ok = is_spd(c, KD, ldkd), kp_ok = kd_ok && is_spd(c, KP, ldkp);
    if (!kd_ok || !kp_ok)
        return cdyn__fail(c->msg, CDYN_ERR_SINGULAR, "%s: %s is not symmetric positive definite",
                          fn, !kd_ok ? "K_D" : "K_P");
    for (int j = 0; j < m; ++j) {
        memcpy(c->kd + (size_t)j * m, KD + (size_t)j * ldkd, sizeof(double) * (size_t)m);
        memcpy(c->kp + (size_t)j * m, KP + (size_t)j * ldkp, sizeof(double) * (size_t)m);
    }
    c->gains_full = 1;
    note_gains(c);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_critical_gains(cdyn_constraint *c, const double *k)
{
    if (!c) return CDYN_ERR_ARG;
    cdyn_status st = check_positive(c, "cdyn_constraint_set_critical_gains", "k", k);
    if (st) return st;
    set_diagonal_gains(c, 0.0, 0.0);
    for (int i = 0; i < c->m; ++i) { /* T4.6: critically damped per constraint */
        c->kd[i + (size_t)i * c->m] = 2.0 * k[i];
        c->kp[i + (size_t)i * c->m] = k[i] * k[i];
    }
    note_gains(c);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_penalty(cdyn_constraint *c, const double *alpha)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_set_penalty";
    if (!alpha) { /* back to the default, chosen at each solve (constraint.h) */
        if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
        c->alpha_given = 0;
    } else {
        cdyn_status st = check_positive(c, fn, "alpha", alpha);
        if (st) return st;
        if (c->m > 0) memcpy(c->alpha, alpha, sizeof(double) * (size_t)c->m);
        c->alpha_given = 1;
    }
    c->reusable = 0; /* the penalty form's factors hold the old alpha */
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_rank_tolerance(cdyn_constraint *c, double tol)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_set_rank_tolerance";
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: tol = %g is not in (0, 1)", fn, tol);
    c->rank_tol = tol;
    c->decided = c->reusable = 0; /* the loaded instant is decided again */
    return CDYN_OK;
}

cdyn_status cdyn_constraint_reset_scales(cdyn_constraint *c)
{
    if (!c) return CDYN_ERR_ARG;
    if (cdyn__constraint_check_idle(c, "cdyn_constraint_reset_scales")) return CDYN_ERR_BUSY;
    memset(c->ref.amax, 0, sizeof(double) * (size_t)c->m1 * (size_t)c->n);
    for (int i = 0; i < c->m1; ++i) {
        c->weight_exp[i] = INT_MIN;
        c->mass_exp[i] = INT_MAX;
    }
    c->mass_history = 0;
    c->decided = c->reusable = 0; /* the loaded instant is decided again, against itself */
    return CDYN_OK;
}

/* ---- the instant ------------------------------------------------------ */

static cdyn_status check_vector(cdyn_constraint *c, const char *fn, const char *name, int len,
                                const double *x)
{
    long bad = x && len > 0 ? cdyn__first_nonfinite(len, 1, x, len) : -1;
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] is not finite", fn, name, bad);
}

void cdyn__constraint_accel_rhs(const cdyn_constraint *c, const double *Phi, const double *Phi_dot,
                                const double *xi, double *s)
{
    int m = c->m;
    for (int i = 0; i < m; ++i) s[i] = xi ? xi[i] : 0.0;
    if (c->gains_full) {
        if (Phi_dot) cdyn__gemv('N', m, m, -1.0, c->kd, m, Phi_dot, 1.0, s);
        if (Phi) cdyn__gemv('N', m, m, -1.0, c->kp, m, Phi, 1.0, s);
    } else { /* diagonal gains (the default 0, Baumgarte, critical) */
        for (int i = 0; Phi_dot && i < m; ++i) s[i] -= c->kd[i + (size_t)i * m] * Phi_dot[i];
        for (int i = 0; Phi && i < m; ++i) s[i] -= c->kp[i + (size_t)i * m] * Phi[i];
    }
}

/* out = x (m), 0 for a NULL x: the load's Phi, Phi', xi kept for gains
 * set before the next load. */
static inline void keep_term(int m, const double *restrict x, double *restrict out)
{
    if (x)
        for (int i = 0; i < m; ++i) out[i] = x[i];
    else
        for (int i = 0; i < m; ++i) out[i] = 0.0;
}

cdyn_status cdyn__constraint_restabilize(cdyn_constraint *c, const char *fn)
{
    if (!c->terms_known)
        return cdyn__fail(c->msg, CDYN_ERR_ARG,
                          "%s: the gains changed after a load without Phi and Phi' (cdyn_mbs_rhs "
                          "loads them only when some gain is set); load the instant again",
                          fn);
    double *s = c->vec_m; /* T4.6 with the new gains */
    cdyn__constraint_accel_rhs(c, c->phi, c->phi_dot, c->xi, s);
    if (cdyn__first_nonfinite(c->m, 1, s, c->m1) >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE,
                          "%s: s = xi - K_D Phi' - K_P Phi overflowed with the gains set after "
                          "the load",
                          fn);
    if (c->m > 0) memcpy(c->accel_rhs, s, sizeof(double) * (size_t)c->m);
    c->gains_pending = 0;
    return CDYN_OK;
}

/* The end of a load whose M and Phi_q are in the staging arrays and whose
 * inputs are finite: s (T4.6), and the staged instant made the loaded one. */
static inline cdyn_status install(cdyn_constraint *c, const char *fn, const double *Q,
                                  const double *Phi, const double *Phi_dot, const double *xi,
                                  int terms_known)
{
    int n = c->n, m = c->m;
    /* T4.6: s = xi - K_D Phi' - K_P Phi, checked before anything is copied
     * in (a failed load keeps the previous instant) */
    double *s = c->vec_m;
    cdyn__constraint_accel_rhs(c, Phi, Phi_dot, xi, s);
    if (cdyn__first_nonfinite(m, 1, s, c->m1) >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE,
                          "%s: s = xi - K_D Phi' - K_P Phi overflowed", fn);
    double *swap = c->mass;
    c->mass = c->mass_next;
    c->mass_next = swap;
    swap = c->jac;
    c->jac = c->jac_next;
    c->jac_next = swap;
    memcpy(c->force, Q, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(c->accel_rhs, s, sizeof(double) * (size_t)m);
    keep_term(m, Phi, c->phi);
    keep_term(m, Phi_dot, c->phi_dot);
    keep_term(m, xi, c->xi);
    c->terms_known = terms_known;
    c->gains_pending = 0;
    c->loaded = 1;
    c->reusable = 0;
    c->decided = 0;
    c->has_result = 0;
    return CDYN_OK;
}

cdyn_status cdyn_constraint_load(cdyn_constraint *c, const double *M, int ldm, const double *Q,
                                 const double *Phi_q, int ldphiq, const double *Phi,
                                 const double *Phi_dot, const double *xi)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_load";
    int n = c->n, m = c->m;
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (!M || !Q || (m > 0 && !Phi_q))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !M ? "M" : !Q ? "Q" : "Phi_q");
    if (ldm < n) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldm = %d < n = %d", fn, ldm, n);
    if (ldphiq < c->m1)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldphiq = %d < max(1, m = %d)", fn, ldphiq, m);
    /* copied into the staging arrays and checked in the same pass; they
     * become the instant only when everything holds (a failed load keeps
     * the previous instant) */
    int finite = 1;
    if (ldm == n) /* contiguous: one pass */
        finite = cdyn__copy_finite(n * n, M, c->mass_next);
    for (int j = 0; j < n && ldm != n; ++j)
        finite &= cdyn__copy_finite(n, M + (size_t)j * ldm, c->mass_next + (size_t)j * n);
    long bad = finite ? -1 : cdyn__first_nonfinite(n, n, M, ldm);
    if (bad >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) is not finite", fn,
                          bad % n, bad / n);
    if (m > 0 && ldphiq == m)
        finite = cdyn__copy_finite(m * n, Phi_q, c->jac_next);
    for (int j = 0; j < n && m > 0 && ldphiq != m; ++j)
        finite &= cdyn__copy_finite(m, Phi_q + (size_t)j * ldphiq, c->jac_next + (size_t)j * c->m1);
    bad = finite ? -1 : cdyn__first_nonfinite(m, n, Phi_q, ldphiq);
    if (bad >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: Phi_q(%ld, %ld) is not finite", fn,
                          bad % m, bad / m);
    cdyn_status st = check_vector(c, fn, "Q", n, Q);
    if (!st) st = check_vector(c, fn, "Phi", m, Phi);
    if (!st) st = check_vector(c, fn, "Phi_dot", m, Phi_dot);
    if (!st) st = check_vector(c, fn, "xi", m, xi);
    if (st) return st;
    return install(c, fn, Q, Phi, Phi_dot, xi, 1);
}

cdyn_status cdyn__constraint_load_finite(cdyn_constraint *c, const double *M, const double *Q,
                                         const double *Phi_q, const double *Phi,
                                         const double *Phi_dot, const double *xi)
{
    const char *fn = "cdyn_constraint_load";
    int n = c->n, m = c->m;
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    memcpy(c->mass_next, M, sizeof(double) * (size_t)n * n);
    if (m > 0) memcpy(c->jac_next, Phi_q, sizeof(double) * (size_t)m * n);
    return install(c, fn, Q, Phi, Phi_dot, xi, (Phi && Phi_dot) || m == 0);
}

/* ---- the rank of Phi_q (rank policy) and the diagnosis ---------------- */

int cdyn__constraint_decide_rank(cdyn_constraint *c)
{
    int m = c->m;
    if (c->decided) return c->decision.rank;
    if (m == 0) {
        c->decision = (cdyn__rank){0, 1.0, 0.0};
        c->decided = 1;
        return 0;
    }
    /* a fact of the constraints alone: M plays no part. Above the small
     * sizes a Gram certificate of full rank, when it holds, stands in for
     * the pivoted QR (rank.h: the verdict is the QR's) */
    int rank = m;
    if (m <= CDYN__SMALL ||
        !cdyn__rank_full_rows(&c->ws, m, c->n, c->jac, c->m1, c->rank_tol, &c->ref, &c->decision))
        rank = cdyn__rank_decide(&c->ws, CDYN__RANK_ROWS, m, c->n, c->jac, c->m1, c->rank_tol,
                                 NULL, &c->ref, &c->decision);
    if (rank < 0) return -1;
    memcpy(c->row_order, c->ws.jpvt, sizeof(int) * (size_t)m);
    for (int i = 0; i < m; ++i) c->redundant_flag[i] = 0;
    for (int i = rank; i < m; ++i) c->redundant_flag[c->row_order[i]] = 1;
    c->decided = 1;
    return rank;
}

/* Smallest singular value of Phi_q in the caller's units (SVD). */
static double smallest_singular_value(cdyn_constraint *c)
{
    int n = c->n, m = c->m, k = c->k;
    if (m == 0) return 0.0;
    for (int j = 0; j < n; ++j)
        memcpy(c->qr + (size_t)j * m, c->jac + (size_t)j * c->m1, sizeof(double) * (size_t)m);
    cdyn__gesvd_jobs('N', 'N', m, n, c->qr, m, c->sv, NULL, 1, NULL, 1, c->work, c->lwork);
    return m > n ? 0.0 : c->sv[k - 1];
}

cdyn_status cdyn__constraint_report_rank_loss(cdyn_constraint *c, const char *fn,
                                              cdyn_status status)
{
    int m = c->m, rank = c->decision.rank;
    c->rank = rank;
    c->n_redundant = 0;
    for (int i = 0; i < m; ++i)
        if (c->redundant_flag[i]) c->redundant[c->n_redundant++] = i;
    c->sigma_min = smallest_singular_value(c);
    const char *verdict = status == CDYN_OK ? "the pseudo-inverse drops" : "dependent constraint";
    return cdyn__fail(c->msg, status,
                      "%s: %s row%s %d%s: Phi_q is rank deficient (rank %d < m = %d: pivot "
                      "ratio %.3g <= tol %.3g with Phi_q equilibrated as for its history, not "
                      "a matter of units; smallest singular value %.3e in the caller's units)",
                      fn, verdict, c->n_redundant > 1 ? "s" : "",
                      c->n_redundant > 0 ? c->redundant[0] : -1, c->n_redundant > 1 ? " ..." : "",
                      rank, m, c->decision.dropped, c->rank_tol, c->sigma_min);
}

void cdyn__constraint_clear_facts(cdyn_constraint *c)
{
    c->rank = -1;
    c->n_redundant = 0;
    c->sigma_min = NAN;
}

/* ---- accessors ---------------------------------------------------------- */

cdyn_status cdyn_constraint_force(const cdyn_constraint *c, double *generalized_force,
                                  double *multipliers)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_force";
    if (!c->has_result)
        return cdyn__fail(c->msg, CDYN_ERR_ARG,
                          "%s: no formulation has succeeded since the last load", fn);
    if (generalized_force && multipliers && c->m > 0 &&
        cdyn__overlap(generalized_force, sizeof(double) * (size_t)c->n, multipliers,
                      sizeof(double) * (size_t)c->m))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: the outputs overlap", fn);
    if (generalized_force)
        memcpy(generalized_force, c->gen_force, sizeof(double) * (size_t)c->n);
    if (multipliers && c->m > 0)
        memcpy(multipliers, c->multipliers, sizeof(double) * (size_t)c->m);
    return CDYN_OK;
}

int cdyn_constraint_rank(const cdyn_constraint *c) { return c ? c->rank : -1; }

double cdyn_constraint_smallest_singular_value(const cdyn_constraint *c)
{
    return c ? c->sigma_min : NAN;
}

int cdyn_constraint_redundant_rows(const cdyn_constraint *c, int *rows)
{
    if (!c) return -1;
    if (rows && c->n_redundant > 0)
        memcpy(rows, c->redundant, sizeof(int) * (size_t)c->n_redundant);
    return c->n_redundant;
}

double cdyn_constraint_margin(const cdyn_constraint *c) { return c ? c->margin : NAN; }

int cdyn_constraint_size(const cdyn_constraint *c) { return c ? c->n : -1; }

int cdyn_constraint_rows(const cdyn_constraint *c) { return c ? c->m : -1; }

const char *cdyn_constraint_last_error(const cdyn_constraint *c)
{
    return c ? c->msg : "cdyn_constraint: NULL object";
}
