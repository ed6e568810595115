/* The DAE in residual form for implicit integrators (THEORY T3.1):
 * r = M(t) v' - F(t, v) and the iteration matrix c_j M(t) - dF/dv at any
 * (t, v, v') the caller holds. It uses buffers of its own, so the
 * factorizations the last cdyn_dae_rhs() left for reuse stay valid. */
#include "dae_internal.h"

#include <math.h>
#include <string.h>

/* M at t into dae->resid_mass (the callback's M(t), or the constant M). */
static cdyn_status mass_at(cdyn_dae *dae, const char *fn, double t)
{
    if (dae->mass_fn) return cdyn__dae_call_mass(dae, fn, t, dae->resid_mass);
    memcpy(dae->resid_mass, dae->part.mass, sizeof(double) * (size_t)dae->n * (size_t)dae->n);
    return CDYN_OK;
}

cdyn_status cdyn_dae_residual(cdyn_dae *dae, double t, const double *v, const double *vdot,
                              double *r)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_residual";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    int n = dae->n;
    if (!vdot || !r)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !vdot ? "vdot" : "r");
    long bad = cdyn__first_nonfinite(n, 1, vdot, n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: vdot[%ld] is not finite", fn, bad);
    st = mass_at(dae, fn, t);
    if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, v, dae->resid_f);
    if (st != CDYN_OK) return st;
    double *out = dae->resid_out; /* r may alias v or vdot */
    for (int i = 0; i < n; ++i) out[i] = -dae->resid_f[i];
    for (int j = 0; j < n; ++j) {
        double vj = vdot[j];
        if (vj == 0.0) continue;
        const double *col = dae->resid_mass + (size_t)j * n;
        for (int i = 0; i < n; ++i) out[i] += col[i] * vj;
    }
    memcpy(r, out, sizeof(double) * (size_t)n);
    return CDYN_OK;
}

cdyn_status cdyn_dae_residual_jacobian(cdyn_dae *dae, double t, double c_j, const double *v,
                                       double *J, int ldj)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_residual_jacobian";
    cdyn_status st = cdyn__dae_check_point(dae, fn, t, v);
    if (st != CDYN_OK) return st;
    int n = dae->n;
    if (!J) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: J is NULL", fn);
    if (ldj < n) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ldj = %d < n = %d", fn, ldj, n);
    if (!isfinite(c_j))
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: c_j is not finite", fn);
    double *vv = dae->resid_v; /* the differences move one entry at a time */
    memcpy(vv, v, sizeof(double) * (size_t)n);
    st = mass_at(dae, fn, t);
    if (st == CDYN_OK && !dae->jacobian) st = cdyn__dae_force(dae, fn, t, vv, dae->resid_f);
    if (st == CDYN_OK)
        st = cdyn__dae_force_jacobian_to(dae, fn, t, vv, dae->resid_f, dae->resid_out,
                                         dae->resid_jac, n);
    if (st != CDYN_OK) return st; /* J untouched */
    for (int j = 0; j < n; ++j) {
        double *col = J + (size_t)j * ldj;
        const double *mcol = dae->resid_mass + (size_t)j * n;
        const double *fcol = dae->resid_jac + (size_t)j * n;
        for (int i = 0; i < n; ++i) col[i] = c_j * mcol[i] - fcol[i];
    }
    return CDYN_OK;
}
