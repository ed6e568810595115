/* Index-1 DAEs: split into integrated and algebraic states, consistent
 * initial values, and the minimum-order right-hand side (THEORY T3.3). */
#include "dae_internal.h"
#include "linalg.h"
#include "newton_internal.h"

#include <math.h>
#include <string.h>

/* Newton residual for the algebraic states x = v_a, with the integrated
 * states already in v_trial: G0 = beta^T F(v, t) (T3.1). */
static int algebraic_residual(const double *x, double *G, void *user)
{
    cdyn_dae *dae = user;
    for (int k = 0; k < dae->q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    int code = dae->force(dae->t_eval, dae->v_trial, dae->force_shift, dae->user);
    if (code != 0) {
        dae->callback_code = code;
        return code;
    }
    cdyn__dae_beta_t(dae, 1, dae->force_shift, dae->n, 1.0, G, dae->q);
    return 0;
}

/* Newton Jacobian dG0/dv_a = beta^T (dF/dv)(:, algebraic) from the caller's
 * dF/dv (only installed when the caller gave one). */
static int algebraic_jacobian(const double *x, double *J, int ldj, void *user)
{
    cdyn_dae *dae = user;
    int n = dae->n, q = dae->q;
    for (int k = 0; k < q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    int code = dae->jacobian(dae->t_eval, dae->v_trial, dae->force_jac, n, dae->user);
    if (code != 0) {
        dae->callback_code = code;
        return code;
    }
    for (int k = 0; k < q; ++k)
        cdyn__dae_beta_t(dae, 1, dae->force_jac + (size_t)dae->algebraic[k] * n, n, 1.0,
                         J + (size_t)k * ldj, q);
    return 0;
}

/* Solve G0(v_i, v_a, t) = 0 for v_a (T3.3) starting from x; the integrated
 * states must be in v_trial. x holds the result (best iterate on failure). */
static cdyn_status solve_algebraic(cdyn_dae *dae, const char *fn, double t, double *x)
{
    dae->t_eval = t;
    cdyn_status st = cdyn_newton_solve(dae->newton, algebraic_residual,
                                       dae->jacobian ? algebraic_jacobian : NULL, dae, x);
    for (int k = 0; k < dae->q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, st, "%s: algebraic states at t = %g: %s", fn, t,
                          cdyn_newton_last_error(dae->newton));
    return CDYN_OK;
}

cdyn_status cdyn_dae_split(cdyn_dae *dae, double t, const double *v)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_split";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    int n = dae->n, q = dae->q, r = dae->r;
    if (q > 0) {
        int index = -1;
        st = cdyn_dae_analyze(dae, t, v, &index); /* leaves F and dF/dv at v */
        if (st != CDYN_OK) return st;
        if (index != 1)
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: the DAE has index %d at t = %g; the minimum-order system "
                              "needs index 1",
                              fn, index, t);
    }
    if (q == 0 || q == n) { /* nothing to choose */
        for (int j = 0; j < r; ++j) dae->integrated[j] = j;
        for (int k = 0; k < q; ++k) dae->algebraic[k] = k;
    } else {
        /* T3.3: dG0/dv = beta^T dF/dv; pivoted QR picks the algebraic states */
        cdyn__dae_beta_t(dae, n, dae->force_jac, n, 1.0, dae->constraint_jac, q);
        st = cdyn_nullspace_factor(dae->split_ns, dae->constraint_jac, q);
        if (st != CDYN_OK)
            return cdyn__fail(dae->msg, st, "%s: dG0/dv: %s", fn,
                              cdyn_nullspace_last_error(dae->split_ns));
        cdyn_nullspace_partition(dae->split_ns, dae->integrated, dae->algebraic);
    }
    memcpy(dae->v_last, v, sizeof(double) * (size_t)n);
    dae->split_done = 1;
    dae->state_valid = 0;
    dae->svd_rate_solves = 0;
    return CDYN_OK;
}

cdyn_status cdyn_dae_states(cdyn_dae *dae, int *integrated, int *algebraic)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "cdyn_dae_states: call cdyn_dae_split first");
    if (integrated) memcpy(integrated, dae->integrated, sizeof(int) * (size_t)dae->r);
    if (algebraic) memcpy(algebraic, dae->algebraic, sizeof(int) * (size_t)dae->q);
    return CDYN_OK;
}

cdyn_status cdyn_dae_consistent(cdyn_dae *dae, double t, double *v)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_consistent";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q;
    if (q == 0) return CDYN_OK;
    st = cdyn__dae_mass_at(dae, fn, t);
    if (st != CDYN_OK) return st;
    memcpy(dae->v_trial, v, sizeof(double) * (size_t)n);
    for (int k = 0; k < q; ++k) dae->vec_q[k] = v[dae->algebraic[k]];
    st = solve_algebraic(dae, fn, t, dae->vec_q);
    if (st == CDYN_OK || st == CDYN_ERR_NOCONV)
        for (int k = 0; k < q; ++k) v[dae->algebraic[k]] = dae->vec_q[k];
    if (st == CDYN_OK) memcpy(dae->v_last, v, sizeof(double) * (size_t)n);
    return st;
}

/* At the consistent state v_trial: coef = -G_a^# G_i and offset =
 * -G_a^# G_t (T3.3), with the rank-revealing solve of cdyn_newton. */
static cdyn_status algebraic_rates(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn_status st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_trial);
    if (st == CDYN_OK) st = cdyn__dae_force_time(dae, fn, t, dae->v_trial);
    if (st != CDYN_OK) return st;
    cdyn__dae_beta_t(dae, n, dae->force_jac, n, 1.0, dae->constraint_jac, q);
    if (cdyn__first_nonfinite(q, n, dae->constraint_jac, q) >= 0) /* LAPACK must not see it */
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: dG0/dv overflowed at t = %g", fn, t);
    for (int k = 0; k < q; ++k)
        memcpy(dae->ga + (size_t)k * q, dae->constraint_jac + (size_t)dae->algebraic[k] * q,
               sizeof(double) * (size_t)q);
    dae->svd_rate_solves += cdyn__newton_factor(dae->newton, dae->ga, q);
    for (int j = 0; j < r; ++j) {
        const double *gi = dae->constraint_jac + (size_t)dae->integrated[j] * q;
        for (int k = 0; k < q; ++k) dae->coef[k + (size_t)j * q] = -gi[k];
    }
    cdyn__newton_apply_many(dae->newton, dae->coef, q, r, dae->coef, q);
    /* G_t = beta^T dF/dt (+ beta'^T F for a time-varying M) */
    cdyn__dae_beta_t(dae, 1, dae->force_dt, n, -1.0, dae->vec_q2, q);
    if (dae->mass_fn) {
        st = cdyn__dae_beta_rate(dae, fn, t);
        if (st != CDYN_OK) return st;
        cdyn__gemv('T', n, q, -1.0, dae->beta_dot, n, dae->force_val, 1.0, dae->vec_q2);
    }
    cdyn__newton_apply(dae->newton, dae->vec_q2, dae->offset);
    return CDYN_OK;
}

cdyn_status cdyn_dae_rhs(cdyn_dae *dae, double t, const double *y, double *ydot)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_rhs";
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q, r = dae->r;
    if ((!y || !ydot) && r > 0)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "ydot");
    if (!isfinite(t)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    long bad = r > 0 ? cdyn__first_nonfinite(r, 1, y, r) : -1;
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: y[%ld] is not finite", fn, bad);

    /* v_i from y, v_a from the warm start, then G0 = 0 for v_a */
    memcpy(dae->v_trial, dae->v_last, sizeof(double) * (size_t)n);
    for (int j = 0; j < r; ++j) dae->v_trial[dae->integrated[j]] = y[j];
    cdyn_status st = cdyn__dae_mass_at(dae, fn, t);
    if (st == CDYN_OK && q > 0) {
        for (int k = 0; k < q; ++k) dae->vec_q[k] = dae->v_last[dae->algebraic[k]];
        st = solve_algebraic(dae, fn, t, dae->vec_q);
    }
    if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st == CDYN_OK && q > 0) st = algebraic_rates(dae, fn, t);
    if (st != CDYN_OK) return st;

    /* [P^T M Pi [I; coef]] v_i' = P^T (F - M Pi [0; offset])  (T3.3) */
    const double *ptm = dae->range_t_mass; /* r x n */
    for (int j = 0; j < r; ++j) {
        double *col = dae->reduced + (size_t)j * r;
        memcpy(col, ptm + (size_t)dae->integrated[j] * r, sizeof(double) * (size_t)r);
        for (int k = 0; k < q; ++k) {
            double c = dae->coef[k + (size_t)j * q];
            const double *ptm_a = ptm + (size_t)dae->algebraic[k] * r;
            for (int i = 0; i < r; ++i) col[i] += ptm_a[i] * c;
        }
    }
    cdyn__gemv('T', n, r, 1.0, dae->range, n, dae->force_val, 0.0, dae->reduced_rhs);
    for (int k = 0; k < q; ++k) {
        const double *ptm_a = ptm + (size_t)dae->algebraic[k] * r;
        for (int i = 0; i < r; ++i) dae->reduced_rhs[i] -= ptm_a[i] * dae->offset[k];
    }
    if (r > 0 && cdyn__getrf(r, dae->reduced, r, dae->ipiv) != 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: minimum-order matrix P^T M Pi [I; -G_a^-1 G_i] is singular at "
                          "t = %g",
                          fn, t);
    cdyn__getrs('N', r, 1, dae->reduced, r, dae->ipiv, dae->reduced_rhs, r);

    if (r > 0 && cdyn__first_nonfinite(r, 1, dae->reduced_rhs, r) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: v_i' overflowed at t = %g", fn, t);
    /* commit: v, v' = Pi [v_i'; coef v_i' + offset] */
    for (int j = 0; j < r; ++j) dae->vdot_last[dae->integrated[j]] = dae->reduced_rhs[j];
    for (int k = 0; k < q; ++k) {
        double s = dae->offset[k];
        for (int j = 0; j < r; ++j) s += dae->coef[k + (size_t)j * q] * dae->reduced_rhs[j];
        dae->vdot_last[dae->algebraic[k]] = s;
    }
    memcpy(dae->v_last, dae->v_trial, sizeof(double) * (size_t)n);
    if (dae->mass_fn) memcpy(dae->beta_ref, dae->beta, sizeof(double) * (size_t)n * q);
    if (r > 0) memcpy(ydot, dae->reduced_rhs, sizeof(double) * (size_t)r);
    dae->state_valid = 1;
    return CDYN_OK;
}

cdyn_status cdyn_dae_state(cdyn_dae *dae, double *v, double *vdot)
{
    if (!dae) return CDYN_ERR_ARG;
    if (!dae->state_valid)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "cdyn_dae_state: no successful cdyn_dae_rhs since the split");
    if (v) memcpy(v, dae->v_last, sizeof(double) * (size_t)dae->n);
    if (vdot) memcpy(vdot, dae->vdot_last, sizeof(double) * (size_t)dae->n);
    return CDYN_OK;
}
