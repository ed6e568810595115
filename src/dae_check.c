/* Checking the caller's dF/dv and dF/dt callbacks of a cdyn_dae against
 * differences of F (status.h, cdyn_jacobian_check). */
#include "dae_internal.h"
#include "jacobian_check.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const char *const FN = "cdyn_dae_check_jacobian";

typedef struct force_call {
    cdyn_dae *dae;
    double t;
} force_call;

/* F at (t, v) for v moving. */
static cdyn_status force_of_v(void *ctx, const double *v, double *out)
{
    force_call *call = ctx;
    return cdyn__dae_force(call->dae, FN, call->t, v, out);
}

/* F at (t, v_trial) for t moving (t is a 1-vector). */
static cdyn_status force_of_t(void *ctx, const double *t, double *out)
{
    force_call *call = ctx;
    return cdyn__dae_force(call->dae, FN, *t, call->dae->v_trial, out);
}

/* terms (n) = max_j |F_i(v + h_j e_j) - F_i(v)| / h_j times v_j's
 * magnitude, h_j = eps^(1/3) of it: the size of the states' terms of each
 * F_i at v = dae->v_trial (restored). w->plus, w->minus: scratch. */
static cdyn_status state_terms(cdyn_dae *dae, force_call *call, const cdyn__check_work *w,
                               double *terms)
{
    int n = dae->n;
    double *v = dae->v_trial;
    cdyn_status st = force_of_v(call, v, w->plus);
    for (int j = 0; !st && j < n; ++j) {
        double size = cdyn__dae_step_scale(dae, v, j), saved = v[j];
        volatile double up = saved + cbrt(DBL_EPSILON) * size;
        double h = up - saved;
        if (!(h > 0.0)) continue;
        v[j] = up;
        st = force_of_v(call, v, w->minus);
        v[j] = saved;
        for (int i = 0; !st && i < n; ++i) {
            double term = fabs(w->minus[i] - w->plus[i]) / h * size;
            terms[i] = term > terms[i] && isfinite(term) ? term : terms[i];
        }
    }
    return st;
}

cdyn_status cdyn_dae_check_jacobian(cdyn_dae *dae, double t, const double *v,
                                    cdyn_jacobian_check *report)
{
    if (!dae) return CDYN_ERR_ARG;
    if (cdyn__dae_check_idle(dae, FN)) return CDYN_ERR_BUSY;
    int n = dae->n;
    if (!dae->force)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_set_model first", FN);
    if (!dae->jacobian && !dae->time_derivative)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "%s: neither dF/dv nor dF/dt was given: nothing to check", FN);
    if (!v || !report)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: %s is NULL", FN, !v ? "v" : "report");
    if (!isfinite(t)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", FN);
    long bad = cdyn__first_nonfinite(n, 1, v, n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: v[%ld] is not finite", FN, bad);
    memcpy(dae->v_trial, v, sizeof(double) * (size_t)n);
    cdyn__check_work w = {dae->force_val, dae->force_shift, dae->residual, dae->bound,
                          dae->row_max};
    force_call call = {dae, t};
    cdyn_jacobian_check found;
    cdyn__check_start(&found);
    cdyn_status st = CDYN_OK;
    if (dae->jacobian) {
        st = cdyn__dae_force_jacobian(dae, FN, t, dae->v_trial); /* the callback's dF/dv */
        double *scale = dae->rate_unit; /* the difference steps' magnitudes */
        for (int j = 0; !st && j < n; ++j) scale[j] = cdyn__dae_step_scale(dae, dae->v_trial, j);
        if (!st)
            st = cdyn__check_jacobian(n, n, dae->force_jac, n, dae->v_trial, scale, NULL,
                                      force_of_v, &call, &w, 0, &found);
    }
    /* the states' terms of F, for the rounding of the time differences:
     * the largest |dF_i/dv_j| times v_j's magnitude, from the check of
     * dF/dv, or without that callback from forward differences of F (n + 1
     * evaluations: with none counted, F = v0 - (1000 + 1e-3 sin t) at a
     * consistent v had an exact dF/dt named 6e-3 off, its rounding against
     * terms of 1000 unseen) */
    double *terms = dae->prod;
    for (int i = 0; i < n; ++i) terms[i] = dae->jacobian && !st ? w.row_size[i] : 0.0;
    if (!st && dae->time_derivative && !dae->jacobian)
        st = state_terms(dae, &call, &w, terms);
    if (!st && dae->time_derivative) {
        st = cdyn__dae_force_time(dae, FN, t, dae->v_trial, NULL); /* the callback's */
        double time = t, scale = 1.0; /* a 1 s time scale, as dF/dt's differences */
        if (!st)
            st = cdyn__check_jacobian(n, 1, dae->force_dt, n, &time, &scale, terms, force_of_t,
                                      &call, &w, n, &found);
    }
    if (st) return st;
    *report = found;
    return CDYN_OK;
}
