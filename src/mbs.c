/* Multibody model layer: callbacks → right-hand side, projection,
 * reactions and residuals (THEORY T4.1, T4.4-T4.9). */
#include "mbs_internal.h"
#include "linalg.h"
#include "constraint_internal.h"
#include "newton_internal.h"
#include "nullspace_internal.h"
#include "rank.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

cdyn_mbs *cdyn_mbs_create(int n, int m, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    size_t big = (size_t)(n > m ? n : m);
    if (n < 1 || m < 0 || big * big > (size_t)INT_MAX / 8) { /* the kernel's own limit */
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_mbs *mbs = cdyn__object_alloc(sizeof *mbs, offsetof(cdyn_mbs, msg));
    if (!mbs) goto fail;
    int m1 = cdyn__max(m, 1);
    mbs->n = n;
    mbs->m = m;
    mbs->m1 = m1;
    mbs->partition_limit = 1.1;
    mbs->quality = mbs->best_quality = -1.0;
    cdyn_status st = CDYN_OK;
    mbs->kernel = cdyn_constraint_create(n, m, &st);
    if (st == CDYN_OK && m > 0 && m <= n) mbs->projector = cdyn_newton_create(m, n, &st);
    if (st == CDYN_OK && m > 0 && m < n) mbs->partition = cdyn_nullspace_create(n, m, &st);
    if (st == CDYN_OK && m > 0 && m < n) mbs->probe = cdyn_nullspace_create(n, m, &st);
    if (st == CDYN_OK && m > 0 && m < n) mbs->dependent = cdyn_newton_create(m, m, &st);
    if (st != CDYN_OK) goto fail;
    /* the owned objects refuse calls from inside the model's callbacks */
    const int *busy = &mbs->guard.in_callback;
    cdyn__constraint_set_owner(mbs->kernel, busy);
    if (mbs->projector) {
        cdyn_newton_set_max_iterations(mbs->projector, 10);
        cdyn_newton_set_tolerances(mbs->projector, 1e-12, NULL);
        /* the Newton may end without a J at the projected q: the speed
         * step and the tangent projection solve with Phi_q there through
         * the factorization it left (near_solve) */
        cdyn__newton_set_judge_near(mbs->projector, 1);
        /* its steps are corrections of least change even for m = n (T4.9) */
        cdyn__newton_set_min_norm(mbs->projector, 1);
        cdyn__newton_set_owner(mbs->projector, busy);
    }
    if (mbs->dependent) {
        cdyn_newton_set_max_iterations(mbs->dependent, 10);
        cdyn_newton_set_tolerances(mbs->dependent, 1e-12, NULL);
        cdyn__newton_set_owner(mbs->dependent, busy);
    }
    if (mbs->partition) {
        cdyn_nullspace_set_condition_limit(mbs->partition, DBL_MAX);
        cdyn__nullspace_set_owner(mbs->partition, busy);
    }
    size_t nn = (size_t)n * n, nm = (size_t)n * m1;
    mbs->M = malloc(sizeof(double) * nn);
    mbs->Q = malloc(sizeof(double) * (size_t)n);
    mbs->Phi = malloc(sizeof(double) * (size_t)m1);
    mbs->Phi_q = calloc(nm, sizeof(double)); /* mbs_time.c reads it for magnitudes */
    mbs->Phi_t = malloc(sizeof(double) * (size_t)m1);
    mbs->Phi_dot = malloc(sizeof(double) * (size_t)m1);
    mbs->xi_val = malloc(sizeof(double) * (size_t)m1);
    mbs->q_work = malloc(sizeof(double) * (size_t)n);
    mbs->qdot_work = malloc(sizeof(double) * (size_t)n);
    mbs->vec_n = malloc(sizeof(double) * (size_t)n);
    mbs->vec_m = malloc(sizeof(double) * (size_t)m1);
    mbs->vec_m2 = malloc(sizeof(double) * (size_t)m1);
    mbs->fd_work = malloc(sizeof(double) * CDYN__FD_WORK * (size_t)m1);
    mbs->chol = malloc(sizeof(double) * nn);
    mbs->mass_scale = malloc(sizeof(double) * (size_t)n);
    mbs->jac_work = malloc(sizeof(double) * nm);
    mbs->q_base = malloc(sizeof(double) * (size_t)n);
    mbs->held_magnitudes = malloc(sizeof(double) * (size_t)n);
    mbs->period = calloc((size_t)n, sizeof(double));
    mbs->origin = calloc((size_t)n, sizeof(double));
    mbs->lin_work = malloc(sizeof(double) * (6 * nn + nm + 15 * (size_t)n + 7 * (size_t)m1));
    size_t rates_len = (size_t)n + (size_t)cdyn__max(n, m1); /* mbs_linearize.c's vectors */
    mbs->lin_rates = malloc(sizeof(double) * (3 * (nn + nm + (size_t)n + m1) + 15 * rates_len));
    mbs->y_part = malloc(sizeof(double) * 2 * (size_t)n);
    mbs->report_y = malloc(sizeof(double) * 2 * (size_t)n);
    mbs->report_saved = malloc(sizeof(double) * 2 * (size_t)n);
    mbs->ind_index = malloc(sizeof(int) * (size_t)n);
    mbs->dep_index = malloc(sizeof(int) * (size_t)m1);
    mbs->reaction_force = malloc(sizeof(double) * (size_t)n);
    mbs->reaction_mult = malloc(sizeof(double) * (size_t)m1);
    mbs->partition_ref.amax = calloc(nm, sizeof(double));
    mbs->partition_inertia = calloc((size_t)n, sizeof(double));
    mbs->inertia_saved = malloc(sizeof(double) * (size_t)n);
    int frames = mbs->partition_inertia && mbs->inertia_saved;
    if (mbs->partition) { /* partition and probe judged in one frame */
        cdyn__nullspace_share_references(mbs->partition, mbs->partition_ref);
        cdyn__nullspace_share_references(mbs->probe, mbs->partition_ref);
        frames = frames &&
                 cdyn__nullspace_use_chart_frame(mbs->partition, mbs->partition_inertia) &&
                 cdyn__nullspace_use_chart_frame(mbs->probe, mbs->partition_inertia);
    }
    if (!frames || !mbs->partition_ref.amax || !mbs->M || !mbs->Q || !mbs->Phi || !mbs->Phi_q || !mbs->Phi_t || !mbs->Phi_dot ||
        !mbs->xi_val || !mbs->q_work || !mbs->qdot_work || !mbs->vec_n || !mbs->vec_m ||
        !mbs->vec_m2 || !mbs->fd_work || !mbs->chol || !mbs->mass_scale || !mbs->jac_work || !mbs->q_base || !mbs->held_magnitudes || !mbs->period || !mbs->origin || !mbs->lin_work || !mbs->lin_rates || !mbs->y_part || !mbs->report_y || !mbs->report_saved ||
        !mbs->ind_index || !mbs->dep_index || !mbs->reaction_force || !mbs->reaction_mult)
        goto fail;
    *status = CDYN_OK;
    return mbs;
fail:
    cdyn_mbs_free(mbs);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

void cdyn_mbs_free(cdyn_mbs *mbs)
{
    if (!mbs) return;
    cdyn_constraint_free(mbs->kernel);
    cdyn_newton_free(mbs->projector);
    cdyn_nullspace_free(mbs->partition);
    cdyn_nullspace_free(mbs->probe);
    cdyn_newton_free(mbs->dependent);
    double *arrays[] = {mbs->M,      mbs->Q,       mbs->Phi,     mbs->Phi_q,    mbs->Phi_t,
                        mbs->Phi_dot, mbs->xi_val, mbs->q_work,  mbs->qdot_work, mbs->vec_n,
                        mbs->vec_m,  mbs->vec_m2,  mbs->chol,    mbs->jac_work, mbs->q_base,
                        mbs->y_part, mbs->reaction_force, mbs->reaction_mult, mbs->fd_work,
                        mbs->mass_scale, mbs->partition_ref.amax, mbs->partition_inertia, mbs->inertia_saved, mbs->lin_work, mbs->lin_rates,
                        mbs->held_magnitudes, mbs->report_y, mbs->report_saved,
                        mbs->period, mbs->origin};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(mbs->ind_index);
    free(mbs->dep_index);
    free(mbs);
}

cdyn_status cdyn__mbs_check_busy(const cdyn_mbs *mbs, const char *fn)
{
    if (cdyn__guard_busy(&mbs->guard)) return cdyn__busy(mbs->msg, fn);
    return CDYN_OK;
}

cdyn_status cdyn__mbs_check_idle(cdyn_mbs *mbs, const char *fn)
{
    if (cdyn__mbs_check_busy(mbs, fn)) return CDYN_ERR_BUSY;
    mbs->tangent_valid = 0; /* any call that may change the object ends it */
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_model(cdyn_mbs *mbs, cdyn_mbs_mass_fn mass, cdyn_mbs_force_fn force,
                               cdyn_mbs_phi_fn phi, cdyn_mbs_jacobian_fn jacobian, void *user)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, "cdyn_mbs_set_model")) return CDYN_ERR_BUSY;
    if (!mass || !force || !phi || !jacobian)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "cdyn_mbs_set_model: %s callback is NULL",
                          !mass ? "mass" : !force ? "force" : !phi ? "phi" : "jacobian");
    mbs->mass = mass;
    mbs->force = force;
    mbs->phi = phi;
    mbs->jacobian = jacobian;
    mbs->user = user;
    cdyn_constraint_reset_scales(mbs->kernel); /* a new mechanism: no history */
    memset(mbs->partition_ref.amax, 0, sizeof(double) * (size_t)mbs->m1 * (size_t)mbs->n);
    memset(mbs->partition_inertia, 0, sizeof(double) * (size_t)mbs->n);
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_time_terms(cdyn_mbs *mbs, cdyn_mbs_phi_t_fn phi_t, cdyn_mbs_xi_fn xi)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, "cdyn_mbs_set_time_terms")) return CDYN_ERR_BUSY;
    mbs->phi_t = phi_t;
    mbs->xi = xi;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_formulation(cdyn_mbs *mbs, cdyn_mbs_formulation formulation)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, "cdyn_mbs_set_formulation")) return CDYN_ERR_BUSY;
    if (formulation != CDYN_MBS_LAGRANGE && formulation != CDYN_MBS_PSEUDOINVERSE &&
        formulation != CDYN_MBS_PENALTY)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "cdyn_mbs_set_formulation: unknown value %d",
                          (int)formulation);
    mbs->formulation = formulation;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_projection_metric(cdyn_mbs *mbs, cdyn_mbs_metric metric)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, "cdyn_mbs_set_projection_metric")) return CDYN_ERR_BUSY;
    if (metric != CDYN_PROJECT_MIN_NORM && metric != CDYN_PROJECT_MASS)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                          "cdyn_mbs_set_projection_metric: unknown value %d", (int)metric);
    /* learned magnitudes of one metric's unknowns (q, L^T q) do not fit
     * the other's */
    if (metric != mbs->metric && mbs->projector) cdyn__newton_forget(mbs->projector);
    mbs->metric = metric;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_set_periods(cdyn_mbs *mbs, const double *period)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_set_periods";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    int n = mbs->n, any = 0;
    for (int j = 0; period && j < n; ++j) {
        if (!(period[j] >= 0.0) || isinf(period[j]))
            return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: period[%d] = %g is not finite and >= 0",
                              fn, j, period[j]);
        any |= period[j] > 0.0;
    }
    for (int j = 0; j < n; ++j) mbs->period[j] = period ? period[j] : 0.0;
    /* magnitudes learned of unknowns taken whole do not fit reduced ones */
    if (any != mbs->has_periods && mbs->projector) cdyn__newton_forget(mbs->projector);
    mbs->has_periods = any;
    return CDYN_OK;
}

cdyn_constraint *cdyn_mbs_constraint(cdyn_mbs *mbs) { return mbs ? mbs->kernel : NULL; }
cdyn_newton *cdyn_mbs_newton(cdyn_mbs *mbs) { return mbs ? mbs->projector : NULL; }
int cdyn_mbs_callback_code(const cdyn_mbs *mbs) { return mbs ? mbs->callback_code : 0; }

int cdyn_mbs_size(const cdyn_mbs *mbs) { return mbs ? mbs->n : -1; }

int cdyn_mbs_rows(const cdyn_mbs *mbs) { return mbs ? mbs->m : -1; }

const char *cdyn_mbs_last_error(const cdyn_mbs *mbs)
{
    return mbs ? mbs->msg : "cdyn_mbs: NULL object";
}

/* ---- model evaluations ------------------------------------------------ */

cdyn_status cdyn__mbs_callback_result(cdyn_mbs *mbs, const char *fn, const char *which, int code,
                                      int rows, int cols, const double *out, int ld)
{
    if (code != 0) {
        mbs->callback_code = code;
        return cdyn__fail(mbs->msg, CDYN_ERR_CALLBACK, "%s: %s callback returned %d", fn, which,
                          code);
    }
    long bad = rows > 0 ? cdyn__first_nonfinite(rows, cols, out, ld) : -1;
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: %s callback gave NaN/Inf (entry %ld)",
                          fn, which, bad);
    return CDYN_OK;
}

cdyn_status cdyn__mbs_mass(cdyn_mbs *mbs, const char *fn, double t, const double *q)
{
    mbs->guard.in_callback++;
    mbs->counters.mass_evaluations++;
    int code = mbs->mass(t, q, mbs->M, mbs->n, mbs->user);
    mbs->guard.in_callback--;
    return cdyn__mbs_callback_result(mbs, fn, "mass", code, mbs->n, mbs->n, mbs->M, mbs->n);
}

cdyn_status cdyn__mbs_force(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                            const double *qdot)
{
    mbs->guard.in_callback++;
    mbs->counters.force_evaluations++;
    int code = mbs->force(t, q, qdot, mbs->Q, mbs->user);
    mbs->guard.in_callback--;
    return cdyn__mbs_callback_result(mbs, fn, "force", code, mbs->n, 1, mbs->Q, mbs->n);
}

cdyn_status cdyn__mbs_phi(cdyn_mbs *mbs, const char *fn, double t, const double *q, double *out)
{
    mbs->guard.in_callback++;
    mbs->counters.phi_evaluations++;
    int code = mbs->phi(t, q, out, mbs->user);
    mbs->guard.in_callback--;
    return cdyn__mbs_callback_result(mbs, fn, "phi", code, mbs->m, 1, out, mbs->m1);
}

cdyn_status cdyn__mbs_jacobian(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                               double *out)
{
    mbs->guard.in_callback++;
    mbs->counters.jacobian_evaluations++;
    int code = mbs->jacobian(t, q, out, mbs->m1, mbs->user);
    mbs->guard.in_callback--;
    return cdyn__mbs_callback_result(mbs, fn, "jacobian", code, mbs->m, mbs->n, out, mbs->m1);
}

cdyn_status cdyn__mbs_check_state(cdyn_mbs *mbs, const char *fn, double t, const double *y)
{
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->mass)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_set_model first", fn);
    if (!y) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: y is NULL", fn);
    if (!isfinite(t)) return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    long bad = cdyn__first_nonfinite(2 * mbs->n, 1, y, 2 * mbs->n);
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: y[%ld] is not finite", fn, bad);
    return CDYN_OK;
}

/* ---- the residuals a call reports (cdyn_mbs_last_residuals) ------------ */

void cdyn__mbs_set_residuals(cdyn_mbs *mbs, double position, double velocity)
{
    mbs->residual_position = position;
    mbs->residual_velocity = velocity;
    mbs->position_pending = mbs->velocity_pending = 0;
    mbs->has_residuals = 1;
}

/* The residuals of the state (t, y) are left to be evaluated when asked
 * for: the position residual, and the velocity one too if both. */
static void hold_residuals(cdyn_mbs *mbs, double t, const double *y, int both)
{
    memcpy(mbs->report_y, y, sizeof(double) * 2 * (size_t)mbs->n);
    mbs->report_t = t;
    mbs->position_pending = 1;
    mbs->velocity_pending = both;
    mbs->has_residuals = 1;
}

/* ||Phi(q, t)||_inf and ||Phi_q q' + Phi_t||_inf at y = (q, q') into
 * *position and *velocity, each only when its flag is set (T4.1; the
 * evaluation buffers are the workspace). */
static cdyn_status state_residuals(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                                   int want_position, double *position, int want_velocity,
                                   double *velocity)
{
    int n = mbs->n, m = mbs->m;
    cdyn_status st = CDYN_OK;
    if (m > 0 && want_position) st = cdyn__mbs_phi(mbs, fn, t, y, mbs->Phi);
    if (!st && m > 0 && want_velocity)
        st = cdyn__mbs_velocity_constraint(mbs, fn, t, y, y + n, mbs->Phi_q, mbs->Phi_dot);
    if (st) return st;
    if (want_position) *position = cdyn__largest_magnitude(m, mbs->Phi);
    if (want_velocity) *velocity = cdyn__largest_magnitude(m, mbs->Phi_dot);
    return CDYN_OK;
}

/* ---- right-hand side -------------------------------------------------- */

cdyn_status cdyn_mbs_rhs(cdyn_mbs *mbs, double t, const double *y, double *ydot)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_rhs";
    int n = mbs->n, m = mbs->m;
    cdyn_status st = cdyn__mbs_check_state(mbs, fn, t, y);
    if (!st && !ydot) st = cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: ydot is NULL", fn);
    if (st) return st;
    mbs->counters.rhs++;
    const double *q = y, *qdot = y + n;
    cdyn_constraint *k = mbs->kernel;
    /* T4.1: Phi_q and xi; Phi and Phi' = Phi_q q' + Phi_t only where the
     * gains use them (T4.6; with none, the default, they are left to
     * cdyn_mbs_last_residuals); then the formulation */
    int stabilized = cdyn__constraint_stabilized(k);
    st = cdyn__mbs_mass(mbs, fn, t, q);
    if (!st) st = cdyn__mbs_force(mbs, fn, t, q, qdot);
    if (!st && m > 0 && stabilized) st = cdyn__mbs_phi(mbs, fn, t, q, mbs->Phi);
    if (!st && m > 0 && stabilized)
        st = cdyn__mbs_velocity_constraint(mbs, fn, t, q, qdot, mbs->Phi_q, mbs->Phi_dot);
    if (!st && m > 0 && !stabilized) st = cdyn__mbs_jacobian(mbs, fn, t, q, mbs->Phi_q);
    if (!st && m > 0) st = cdyn__mbs_xi(mbs, fn, t, q, qdot);
    if (st) {
        mbs->counters.rhs_failures++;
        return st;
    }
    /* every callback's result is checked already (cdyn__mbs_callback_result) */
    st = cdyn__constraint_load_finite(k, mbs->M, mbs->Q, mbs->Phi_q, stabilized ? mbs->Phi : NULL,
                                      stabilized ? mbs->Phi_dot : NULL, mbs->xi_val);
    if (!st) {
        switch (mbs->formulation) {
        case CDYN_MBS_LAGRANGE: st = cdyn_constraint_lagrange(k, mbs->vec_n, mbs->vec_m); break;
        case CDYN_MBS_PSEUDOINVERSE:
            st = cdyn_constraint_pseudoinverse(k, mbs->vec_n, mbs->vec_m);
            break;
        case CDYN_MBS_PENALTY: st = cdyn_constraint_penalty(k, mbs->vec_n, mbs->vec_m); break;
        }
    }
    if (st) {
        mbs->counters.rhs_failures++;
        return cdyn__fail(mbs->msg, st, "%s at t = %g: %s", fn, t, cdyn_constraint_last_error(k));
    }
    memcpy(ydot, qdot, sizeof(double) * (size_t)n);
    memcpy(ydot + n, mbs->vec_n, sizeof(double) * (size_t)n);
    cdyn_constraint_force(k, mbs->reaction_force, mbs->reaction_mult);
    mbs->has_reactions = 1;
    if (stabilized) {
        cdyn__mbs_set_residuals(mbs, cdyn__largest_magnitude(m, mbs->Phi),
                                cdyn__largest_magnitude(m, mbs->Phi_dot));
    } else {
        hold_residuals(mbs, t, y, 1);
    }
    return CDYN_OK;
}

cdyn_status cdyn_mbs_get_counters(const cdyn_mbs *mbs, cdyn_mbs_counters *counters)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (!counters)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "cdyn_mbs_get_counters: counters is NULL");
    *counters = mbs->counters;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_reset_counters(cdyn_mbs *mbs)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, "cdyn_mbs_reset_counters")) return CDYN_ERR_BUSY;
    memset(&mbs->counters, 0, sizeof mbs->counters);
    return CDYN_OK;
}

cdyn_status cdyn_mbs_last_reactions(const cdyn_mbs *mbs, double *generalized_force, double *multipliers)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (!mbs->has_reactions)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "cdyn_mbs_last_reactions: no successful rhs yet");
    if (generalized_force)
        memcpy(generalized_force, mbs->reaction_force, sizeof(double) * (size_t)mbs->n);
    if (multipliers && mbs->m > 0)
        memcpy(multipliers, mbs->reaction_mult, sizeof(double) * (size_t)mbs->m);
    return CDYN_OK;
}

cdyn_status cdyn_mbs_last_residuals(cdyn_mbs *mbs, double *position, double *velocity)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_last_residuals";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->has_residuals)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: no successful rhs or projection yet", fn);
    if (mbs->position_pending || mbs->velocity_pending) {
        double p = mbs->residual_position, v = mbs->residual_velocity;
        cdyn_status st = state_residuals(mbs, fn, mbs->report_t, mbs->report_y,
                                         mbs->position_pending, &p, mbs->velocity_pending, &v);
        if (st) return st;
        cdyn__mbs_set_residuals(mbs, p, v);
    }
    if (position) *position = mbs->residual_position;
    if (velocity) *velocity = mbs->residual_velocity;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_residuals(cdyn_mbs *mbs, double t, const double *y, double *position,
                                  double *velocity)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_residuals";
    cdyn_status st = cdyn__mbs_check_state(mbs, fn, t, y);
    if (st) return st;
    double p = 0.0, v = 0.0;
    st = state_residuals(mbs, fn, t, y, 1, &p, 1, &v);
    if (st) return st;
    if (position) *position = p;
    if (velocity) *velocity = v;
    return CDYN_OK;
}

/* ---- projection (T4.9) ------------------------------------------------- */

/* Row i of L^T q (L = mbs->chol, lower, M = L L^T), and in *size the sum
 * of its terms' magnitudes. */
static double chol_transpose_row(const cdyn_mbs *mbs, int i, const double *q, double *size)
{
    int n = mbs->n;
    double sum = 0.0, terms = 0.0;
    for (int j = i; j < n; ++j) {
        double t = mbs->chol[j + (size_t)i * n] * q[j];
        sum += t;
        terms += fabs(t);
    }
    *size = terms;
    return sum;
}

/* Newton unknowns x → q: q = x (minimum norm) or, in the mass metric
 * (M = L L^T, so that |dx| = |dq|_M), q with L^T q = x, into mbs->q_work.
 * First through the change from the projection's origin q0 and x0 = L^T q0
 * (in mbs->lin_work, set by cdyn_mbs_project), q = q0 + L^{-T} (x - x0):
 * where L couples a light coordinate to a heavy one, L^T q0 holds the
 * light one below the rounding of the heavy one's term, and L^{-T} x lost
 * it (a slider of 2.5 kg coupled by 1e31 to a coordinate of 1.8e276 kg
 * came back at 0 m from 94 m). That q is kept only when L^T q gives back
 * x within the rounding of its terms, 8 (n + 1) eps (|L^T| |q| + |x|) in
 * each row; a change as large as q0 itself cancels, and q0 + L^{-T}
 * (x - x0) then rounds away what x holds (a pendulum's bob at 0 m where
 * the Newton's x put it 1.5e126 m out, from 6.3e142 m: the iteration,
 * judging x, accepted a q that was never on the circle). Otherwise q =
 * L^{-T} x, which (backward stable) always meets that test. The unknowns
 * are absolute, not corrections, so the Newton step test compares a step
 * with the size of the coordinates: it also ends the iteration where
 * rounding of large coordinates keeps |Phi| above its tolerance. */
static void unknowns_to_coordinates(cdyn_mbs *mbs, const double *x)
{
    int n = mbs->n;
    if (mbs->metric != CDYN_PROJECT_MASS) {
        memcpy(mbs->q_work, x, sizeof(double) * (size_t)n);
        return;
    }
    const double *q0 = mbs->lin_work, *x0 = q0 + n;
    double *q = mbs->q_work, unit = 8.0 * (n + 1) * DBL_EPSILON;
    for (int i = 0; i < n; ++i) q[i] = x[i] - x0[i];
    cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, mbs->chol, n, q, n);
    for (int i = 0; i < n; ++i) q[i] += q0[i];
    for (int i = 0; i < n; ++i) {
        double size, r = chol_transpose_row(mbs, i, q, &size) - x[i];
        if (!(fabs(r) <= unit * (size + fabs(x[i])))) { /* the change cancelled */
            memcpy(q, x, sizeof(double) * (size_t)n);
            cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, mbs->chol, n, q, n);
            return;
        }
    }
}

static int projection_residual(const double *x, double *G, void *user)
{
    cdyn_mbs *mbs = user;
    unknowns_to_coordinates(mbs, x);
    mbs->guard.in_callback++;
    mbs->counters.phi_evaluations++;
    int code = mbs->phi(mbs->t_eval, mbs->q_work, G, mbs->user);
    mbs->guard.in_callback--;
    if (code != 0) mbs->callback_code = code;
    return code;
}

/* J = Phi_q (minimum norm) or Phi_q L^{-T} (mass metric). */
static int projection_jacobian(const double *x, double *J, int ldj, void *user)
{
    cdyn_mbs *mbs = user;
    int n = mbs->n;
    unknowns_to_coordinates(mbs, x);
    mbs->guard.in_callback++;
    mbs->counters.jacobian_evaluations++;
    int code = mbs->jacobian(mbs->t_eval, mbs->q_work, J, ldj, mbs->user);
    mbs->guard.in_callback--;
    if (code != 0) {
        mbs->callback_code = code;
        return code;
    }
    if (mbs->metric == CDYN_PROJECT_MASS)
        cdyn__trsm('R', 'L', 'T', 'N', mbs->m, n, 1.0, mbs->chol, n, J, ldj);
    return 0;
}

/* The mass metric of T4.9 at q: M = L L^T into mbs->chol (the
 * definiteness policy: S M S = L~ L~^T, so L = S^{-1} L~). */
static cdyn_status mass_metric(cdyn_mbs *mbs, const char *fn, double t, const double *q)
{
    int n = mbs->n;
    cdyn_status st = cdyn__mbs_mass(mbs, fn, t, q);
    if (st) return st;
    if (cdyn__spd_factor(n, mbs->M, n, mbs->chol, n, mbs->mass_scale) != 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_SINGULAR,
                          "%s: M is not positive definite; use the minimum-norm metric", fn);
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) mbs->chol[i + (size_t)j * n] /= mbs->mass_scale[i];
    return CDYN_OK;
}

/* v = J^+ b (J = mbs->jac_work: Phi_q at q_work in the metric, m x n, ld
 * m1) when the projector's factorization is of J at the Newton iterate one
 * step before q_work (cdyn__newton_near_factored): v = J^T y with
 * J J^T y = b solved by iterations preconditioned with that factorization
 * (or, for square J, v refined on J v = b), until each row of J v meets b
 * to the rounding of the products, |J v - b|_i <= (n + 1) eps (|J| |v| +
 * |b|)_i, or within 64 times that where an iteration no longer gains a
 * digit. The result then lies in range(J^T) at q_work as J^+ b does.
 * 0 when it does not get there in four iterations (the caller factors J). Uses
 * mbs->fd_work (3m); b and v must not be in it. */
static int near_solve(cdyn_mbs *mbs, const double *b, double *v)
{
    int n = mbs->n, m = mbs->m, ld = mbs->m1, wide = cdyn__newton_wide(mbs->projector);
    const double *J = mbs->jac_work;
    double *y = mbs->fd_work, *r = y + m, *step = r + m; /* m each (m = n when square) */
    double unit = (n + 1) * DBL_EPSILON, previous = INFINITY;
    memcpy(r, b, sizeof(double) * (size_t)m);
    memset(y, 0, sizeof(double) * (size_t)m);
    memset(v, 0, sizeof(double) * (size_t)n);
    for (int iteration = 0; iteration < 4; ++iteration) {
        if (wide) { /* y += (J0 J0^T)^-1 r, v = J^T y */
            cdyn__newton_apply_gram(mbs->projector, r, step);
            for (int i = 0; i < m; ++i) y[i] += step[i];
            for (int j = 0; j < n; ++j) {
                double sum = 0.0;
                for (int i = 0; i < m; ++i) sum += J[i + (size_t)j * ld] * y[i];
                v[j] = sum;
            }
        } else { /* v += J0^-1 r */
            cdyn__newton_apply(mbs->projector, r, step);
            for (int j = 0; j < n; ++j) v[j] += step[j];
        }
        double worst = 0.0; /* max_i |r_i| / ((n + 1) eps (|J| |v| + |b|)_i) */
        for (int i = 0; i < m; ++i) {
            double Jv = 0.0, terms = fabs(b[i]);
            for (int j = 0; j < n; ++j) {
                Jv += J[i + (size_t)j * ld] * v[j];
                terms += fabs(J[i + (size_t)j * ld] * v[j]);
            }
            r[i] = b[i] - Jv;
            double ratio = fabs(r[i]) / (unit * terms);
            if (r[i] != 0.0 && !(ratio <= worst)) worst = ratio;
        }
        /* at the rounding of the products, or within 64 times it where
         * another iteration no longer gains a digit */
        if (worst <= 1.0 || (worst <= 64.0 && worst > 0.1 * previous)) return 1;
        previous = worst;
    }
    return previous <= 64.0;
}

/* x = J^+ b (J = mbs->jac_work) with the projector's factorization: as it
 * stands when it is of J, by near_solve when it is of the Newton iterate
 * before q_work (*near), factoring J when near_solve falls short (*near
 * then 0). -1 when LAPACK fails. */
static int metric_solve(cdyn_mbs *mbs, int *near, const double *b, double *x)
{
    if (*near && near_solve(mbs, b, x)) return 0;
    if (*near) {
        *near = 0;
        if (cdyn__newton_factor(mbs->projector, mbs->jac_work, mbs->m1) < 0) return -1;
    }
    cdyn__newton_apply(mbs->projector, b, x);
    return 0;
}

/* T4.9 speeds at the positions in mbs->q_work: q' + dq', dq' = -J^+ (Phi_q
 * q' + Phi_t) in the metric (one linear step, the rank-revealing solve of
 * the projector, whose report is left alone), into mbs->vec_n, and the
 * velocity residual into mbs->vec_m. With `reuse` the projector's
 * factorization left by the position solve serves: of J at q_work, or (the
 * Newton's last step judged on the factorization before it) of J one
 * iterate before, through metric_solve. mbs->jac_work keeps J at q_work
 * for cdyn_mbs_project_tangent. CDYN_ERR_SINGULAR when the velocity
 * constraints are left unmet beyond the rounding of their terms |Phi_q|
 * (|q'| + |q'_new|) + |Phi'| and what the rank decision dropped (a
 * rank-deficient Phi_q whose rows ask for inconsistent speeds). */
static cdyn_status project_speeds(cdyn_mbs *mbs, const char *fn, double t, const double *qdot,
                                  int reuse)
{
    int n = mbs->n, m = mbs->m;
    cdyn_status st =
        cdyn__mbs_velocity_constraint(mbs, fn, t, mbs->q_work, qdot, mbs->Phi_q, mbs->Phi_dot);
    if (st) return st;
    memcpy(mbs->jac_work, mbs->Phi_q, sizeof(double) * (size_t)mbs->m1 * n);
    if (mbs->metric == CDYN_PROJECT_MASS)
        cdyn__trsm('R', 'L', 'T', 'N', m, n, 1.0, mbs->chol, n, mbs->jac_work, mbs->m1);
    mbs->projector_near = reuse && !cdyn__newton_solution_factored(mbs->projector);
    if (!reuse && cdyn__newton_factor(mbs->projector, mbs->jac_work, mbs->m1) < 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_LAPACK, "%s: LAPACK failed on Phi_q", fn);
    for (int i = 0; i < m; ++i) mbs->vec_m2[i] = -mbs->Phi_dot[i];
    if (metric_solve(mbs, &mbs->projector_near, mbs->vec_m2, mbs->qdot_work) < 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_LAPACK, "%s: LAPACK failed on Phi_q", fn);
    if (mbs->metric == CDYN_PROJECT_MASS)
        cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, mbs->chol, n, mbs->qdot_work, n);
    double *speeds = mbs->vec_n;
    for (int j = 0; j < n; ++j) speeds[j] = qdot[j] + mbs->qdot_work[j];
    if (cdyn__first_nonfinite(n, 1, speeds, n) >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE,
                          "%s: the projected speeds overflowed (inputs too large)", fn);
    int unmet = -1;
    double worst = 0.0;
    double slack = 64.0 * (n + 1) * DBL_EPSILON + 4.0 * cdyn__newton_dropped(mbs->projector);
    for (int i = 0; i < m; ++i) {
        double terms = fabs(mbs->Phi_dot[i]), r = mbs->Phi_dot[i];
        for (int j = 0; j < n; ++j) {
            double a = mbs->Phi_q[i + (size_t)j * mbs->m1];
            r += a * mbs->qdot_work[j];
            terms += fabs(a) * (fabs(qdot[j]) + fabs(speeds[j]));
        }
        mbs->vec_m[i] = r;
        double ratio = fabs(r) / (slack * terms);
        if (r != 0.0 && !(ratio <= 1.0) && !(ratio <= worst)) worst = ratio, unmet = i;
    }
    if (unmet >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_SINGULAR,
                          "%s: the velocity constraints cannot be met: row %d keeps %.3e (%.3g "
                          "times what rounding and the rank decision allow); Phi_q is rank "
                          "deficient and its rows ask for inconsistent speeds",
                          fn, unmet, mbs->vec_m[unmet], worst);
    return CDYN_OK;
}

/* The checks both projections share; *done when there is nothing to do. */
static cdyn_status check_projection(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                                    int *done)
{
    cdyn_status st = cdyn__mbs_check_state(mbs, fn, t, y);
    *done = !st && mbs->m == 0;
    if (!st && mbs->m > mbs->n)
        st = cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                        "%s: %d constraints on %d coordinates; projection needs m <= n", fn,
                        mbs->m, mbs->n);
    return st;
}

/* After a projection solved with the periodic coordinates less their
 * whole periods (cdyn_mbs_project): Phi at the coordinates with their
 * periods back (mbs->q_work; Phi_q there in mbs->Phi_q, from the speed
 * step) must meet what the solve met, its residual tolerance, within the
 * rounding that adding the periods back leaves, 8 eps sum_j |Phi_q,ij|
 * |q_j|. Else the model does not repeat with the periods set (a driving
 * constraint theta - w t is not periodic in theta): CDYN_ERR_ARG. On
 * success *norm = ||Phi||_inf there. */
static cdyn_status check_periods(cdyn_mbs *mbs, const char *fn, double t, double *norm)
{
    int n = mbs->n, m = mbs->m, ld = mbs->m1;
    double *Phi = mbs->fd_work; /* free after the speed step */
    cdyn_status st = cdyn__mbs_phi(mbs, fn, t, mbs->q_work, Phi);
    if (st) return st;
    const double *tol = cdyn__newton_residual_tolerance(mbs->projector);
    *norm = 0.0;
    for (int i = 0; i < m; ++i) {
        double rounding = 0.0;
        for (int j = 0; j < n; ++j)
            rounding += fabs(mbs->Phi_q[i + (size_t)j * ld]) * fabs(mbs->q_work[j]);
        rounding *= 8.0 * DBL_EPSILON;
        if (!(fabs(Phi[i]) <= tol[i] + rounding))
            return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                              "%s: Phi[%d] = %.3e at the projected q, where the coordinates less "
                              "their whole periods give it within %.3e: the model does not "
                              "repeat with the periods set (cdyn_mbs_set_periods)",
                              fn, i, Phi[i], tol[i] + rounding);
        *norm = fabs(Phi[i]) > *norm ? fabs(Phi[i]) : *norm;
    }
    return CDYN_OK;
}

/* The position solve of cdyn_mbs_project from x (its unknowns at the
 * start q; start: that q, periods reduced), in x. Phi_q of redundant
 * constraints has rank r < m on the manifold, and off it a singular value
 * of the size of the distance: full-rank steps along that one amplify the
 * redundant rows' O(distance^2) inconsistency into a drift along the
 * manifold (a pendulum with a redundant rod-length row, 1e-3 off, ended
 * 17 times the correction from the closest point, CDYN_OK). A solve that
 * ends at rank r < m is therefore done again from the start with steps of
 * rank r at most, and r is kept for the next projections; a solve so
 * capped that fails is done again without the cap, which is dropped. */
static cdyn_status project_positions(cdyn_mbs *mbs, const double *start, double *x)
{
    int n = mbs->n, m = mbs->m, cap = mbs->projector_rank_cap, refused = 0;
    cdyn__newton_set_rank_cap(mbs->projector, cap);
    cdyn_status st = cdyn_newton_solve(mbs->projector, projection_residual,
                                       projection_jacobian, mbs, x);
    for (int again = 0; again < 2; ++again) {
        cdyn_newton_report report;
        cdyn_newton_get_report(mbs->projector, &report);
        if (st == CDYN_OK && report.rank < m && !refused && (cap == 0 || report.rank < cap)) {
            cap = report.rank;
        } else if (st == CDYN_ERR_NOCONV && cap > 0) {
            cap = 0;
            refused = 1;
        } else {
            break;
        }
        /* from the start again: x0 = L^T q (kept after it) or q */
        const double *x0 = mbs->metric == CDYN_PROJECT_MASS ? mbs->lin_work + n : start;
        memcpy(x, x0, sizeof(double) * (size_t)n);
        cdyn__newton_set_rank_cap(mbs->projector, cap);
        st = cdyn_newton_solve(mbs->projector, projection_residual, projection_jacobian, mbs, x);
    }
    mbs->projector_rank_cap = st == CDYN_OK ? cap : 0;
    /* the cap is the position solve's: a speed projection alone, at any
     * configuration, factors Phi_q at its own rank (the factorization the
     * speed step of this projection reuses is kept) */
    cdyn__newton_set_rank_cap(mbs->projector, 0);
    return st;
}

cdyn_status cdyn_mbs_project(cdyn_mbs *mbs, double t, double *y)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_project";
    int n = mbs->n, m = mbs->m, done = 0;
    cdyn_status st = check_projection(mbs, fn, t, y, &done);
    if (st || done) return st;
    mbs->counters.projections++;
    double *q = y, *qdot = y + n;
    mbs->t_eval = t;
    /* unknowns: q itself, or x = L^T q; of a periodic coordinate, q less
     * its whole periods c (exactly: c and q are within a factor 2 of each
     * other, or c = 0). The Newton's callbacks see those reduced
     * coordinates (the same configuration, mbs.h); c goes back before the
     * speed step, and check_periods verifies Phi there. */
    double *x = mbs->vec_n, *reduced = mbs->lin_work; /* the start q (n) */
    mbs->shifted = 0;
    for (int j = 0; mbs->has_periods && j < n; ++j) {
        double c = mbs->period[j] > 0.0 ? mbs->period[j] * nearbyint(q[j] / mbs->period[j]) : 0.0;
        mbs->origin[j] = isfinite(c) ? c : 0.0;
        mbs->shifted |= mbs->origin[j] != 0.0;
        reduced[j] = q[j] - mbs->origin[j];
    }
    const double *start = mbs->has_periods ? reduced : q;
    if (mbs->metric == CDYN_PROJECT_MASS) {
        st = mass_metric(mbs, fn, t, q);
        if (st) return st;
        double size;
        for (int i = 0; i < n; ++i) x[i] = chol_transpose_row(mbs, i, start, &size); /* L^T q */
        /* the origin of unknowns_to_coordinates: q0 and x0 */
        if (start != reduced) memcpy(reduced, q, sizeof(double) * (size_t)n);
        memcpy(mbs->lin_work + n, x, sizeof(double) * (size_t)n);
    } else {
        memcpy(x, start, sizeof(double) * (size_t)n);
    }
    /* what the projector has learned so far: put back if the speed step
     * fails after the positions converged */
    double *held = mbs->held_magnitudes;
    cdyn__newton_save_magnitudes(mbs->projector, held);
    /* T4.9 positions: Newton with minimum-norm steps dq = -Phi_q^+ Phi */
    cdyn_status newton = project_positions(mbs, start, x);
    if (newton != CDYN_OK && newton != CDYN_ERR_NOCONV)
        return cdyn__fail(mbs->msg, newton, "%s: %s", fn, cdyn_newton_last_error(mbs->projector));
    unknowns_to_coordinates(mbs, x);
    if (mbs->shifted) /* the whole periods back */
        for (int j = 0; j < n; ++j) mbs->q_work[j] += mbs->origin[j];
    cdyn_newton_report position_report;
    cdyn_newton_get_report(mbs->projector, &position_report);
    /* the position solve's last factorization is of J at the projected q,
     * or at the iterate one step before it, when it converged at full
     * rank: the speed step uses it (metric_solve) */
    int reuse = newton == CDYN_OK && (cdyn__newton_solution_factored(mbs->projector) ||
                                      cdyn__newton_near_factored(mbs->projector));
    st = project_speeds(mbs, fn, t, qdot, reuse);
    if (!st && mbs->shifted && newton == CDYN_OK)
        st = check_periods(mbs, fn, t, &position_report.residual_norm);
    if (st) {
        cdyn__newton_restore_magnitudes(mbs->projector, held);
        return st;
    }
    /* commit */
    memcpy(q, mbs->q_work, sizeof(double) * (size_t)n);
    memcpy(qdot, mbs->vec_n, sizeof(double) * (size_t)n);
    cdyn__mbs_set_residuals(mbs, position_report.residual_norm,
                            cdyn__largest_magnitude(m, mbs->vec_m));
    if (newton != CDYN_OK)
        return cdyn__fail(mbs->msg, newton, "%s: positions: %s", fn,
                          cdyn_newton_last_error(mbs->projector));
    mbs->tangent_valid = 1;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_project_velocities(cdyn_mbs *mbs, double t, double *y)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_project_velocities";
    int n = mbs->n, m = mbs->m, done = 0;
    cdyn_status st = check_projection(mbs, fn, t, y, &done);
    if (st || done) return st;
    mbs->counters.velocity_projections++;
    const double *q = y;
    double *qdot = y + n;
    memcpy(mbs->q_work, q, sizeof(double) * (size_t)n);
    if (mbs->metric == CDYN_PROJECT_MASS) st = mass_metric(mbs, fn, t, q);
    if (!st) st = project_speeds(mbs, fn, t, qdot, 0);
    if (st) return st;
    /* commit: q' only; the position residual (q is unchanged) when asked */
    memcpy(qdot, mbs->vec_n, sizeof(double) * (size_t)n);
    hold_residuals(mbs, t, y, 0);
    mbs->residual_velocity = cdyn__largest_magnitude(m, mbs->vec_m);
    mbs->tangent_valid = 1;
    return CDYN_OK;
}

cdyn_status cdyn_mbs_project_tangent(cdyn_mbs *mbs, double *w)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_project_tangent";
    if (cdyn__guard_busy(&mbs->guard)) return cdyn__busy(mbs->msg, fn);
    int n = mbs->n, m = mbs->m;
    if (!w) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: w is NULL", fn);
    long bad = cdyn__first_nonfinite(2 * n, 1, w, 2 * n);
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: w[%ld] is not finite", fn, bad);
    if (m == 0) return CDYN_OK; /* no constraint: every direction is tangent */
    if (!mbs->tangent_valid)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                          "%s: needs a successful cdyn_mbs_project or "
                          "cdyn_mbs_project_velocities as the last call on the object",
                          fn);
    /* each half h <- h - W Phi_q^T (Phi_q W Phi_q^T)^+ Phi_q h = h - L^-T J^# (Phi_q h)
     * (W = I, or M^-1 = L^-T L^-1 with J = Phi_q L^-T): the projection's
     * speed step without Phi_t, with its factorization */
    double *out = mbs->lin_work; /* 2n: w stays untouched if a component overflows */
    for (int half = 0; half < 2; ++half) {
        const double *h = w + (size_t)half * n;
        double *dq = mbs->qdot_work, *o = out + (size_t)half * n;
        cdyn__gemv('N', m, n, 1.0, mbs->Phi_q, mbs->m1, h, 0.0, mbs->vec_m);
        if (metric_solve(mbs, &mbs->projector_near, mbs->vec_m, dq) < 0)
            return cdyn__fail(mbs->msg, CDYN_ERR_LAPACK, "%s: LAPACK failed on Phi_q", fn);
        if (mbs->metric == CDYN_PROJECT_MASS)
            cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, mbs->chol, n, dq, n);
        for (int j = 0; j < n; ++j) o[j] = h[j] - dq[j];
    }
    bad = cdyn__first_nonfinite(2 * n, 1, out, 2 * n);
    if (bad >= 0) /* a finite w, but its projection overflows */
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: w[%ld] overflows", fn, bad);
    memcpy(w, out, sizeof(double) * 2 * (size_t)n);
    return CDYN_OK;
}
