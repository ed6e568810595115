/* Checking the caller's Phi_q and Phi_t callbacks of a cdyn_mbs against
 * differences of Phi (status.h, cdyn_jacobian_check). */
#include "jacobian_check.h"
#include "mbs_internal.h"

#include <math.h>
#include <string.h>

static const char *const FN = "cdyn_mbs_check_jacobian";

typedef struct phi_call {
    cdyn_mbs *mbs;
    double t;
    const double *q; /* the point, for t moving */
} phi_call;

/* Phi at (t, q) for q moving. */
static cdyn_status phi_of_q(void *ctx, const double *q, double *out)
{
    phi_call *call = ctx;
    return cdyn__mbs_phi(call->mbs, FN, call->t, q, out);
}

/* Phi at (t, q) for t moving (t is a 1-vector). */
static cdyn_status phi_of_t(void *ctx, const double *t, double *out)
{
    phi_call *call = ctx;
    return cdyn__mbs_phi(call->mbs, FN, *t, call->q, out);
}

cdyn_status cdyn_mbs_check_jacobian(cdyn_mbs *mbs, double t, const double *q,
                                    cdyn_jacobian_check *report)
{
    if (!mbs) return CDYN_ERR_ARG;
    if (cdyn__mbs_check_idle(mbs, FN)) return CDYN_ERR_BUSY;
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    if (!mbs->phi)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_set_model first", FN);
    if (!q || !report)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", FN, !q ? "q" : "report");
    if (!isfinite(t)) return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", FN);
    long bad = cdyn__first_nonfinite(n, 1, q, n);
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: q[%ld] is not finite", FN, bad);
    cdyn_jacobian_check found;
    cdyn__check_start(&found);
    if (m == 0) {
        *report = found;
        return CDYN_OK;
    }
    double *point = mbs->q_base, *scale = mbs->vec_n;
    memcpy(point, q, sizeof(double) * (size_t)n);
    /* steps: eps^(1/3) |q_j|, or of the largest |q| for a zero coordinate;
     * at most of the coordinate's cdyn__mbs_variation_scale (at 1.2e5 rad
     * the steps were 0.7 rad and a 5 % error in Phi_q went unnamed) */
    double largest = 0.0;
    for (int j = 0; j < n; ++j) {
        double cap = cdyn__mbs_variation_scale(mbs, j);
        scale[j] = fabs(q[j]) > cap ? cap : fabs(q[j]);
        largest = fmax(largest, scale[j]);
    }
    for (int j = 0; j < n; ++j)
        if (scale[j] == 0.0) scale[j] = largest > 0.0 ? largest : 1.0;
    cdyn__check_work w = {mbs->Phi, mbs->Phi_dot, mbs->xi_val, mbs->vec_m, mbs->vec_m2};
    phi_call call = {mbs, t, point};
    cdyn_status st = cdyn__mbs_jacobian(mbs, FN, t, point, mbs->Phi_q);
    if (!st)
        st = cdyn__check_jacobian(m, n, mbs->Phi_q, m1, point, scale, NULL, phi_of_q, &call,
                                  &w, 0, &found);
    if (!st && mbs->phi_t) {
        double *terms = mbs->fd_work; /* the coordinates' terms of Phi, for its rounding */
        memcpy(terms, w.row_size, sizeof(double) * (size_t)m);
        st = cdyn__mbs_phi_t(mbs, FN, t, point, mbs->Phi_q, mbs->Phi_t); /* the callback's */
        double time = t, time_scale = 1.0; /* a 1 s time scale, as Phi_t's differences */
        if (!st)
            st = cdyn__check_jacobian(m, 1, mbs->Phi_t, m1, &time, &time_scale, terms, phi_of_t,
                                      &call, &w, n, &found);
    }
    if (st) return st;
    *report = found;
    return CDYN_OK;
}
