/* The DAE in residual form for implicit integrators (THEORY T3.1):
 * r = M(t) v' - F(t, v) and the iteration matrix c_j M(t) - dF/dv at any
 * (t, v, v') the caller holds. It uses buffers of its own, so the
 * factorizations the last cdyn_dae_rhs() left for reuse stay valid. */
#include "dae_internal.h"

#include <math.h>
#include <string.h>

/* M at t: the callback's M(t) into dae->resid_mass, or the constant M
 * where cdyn_dae_set_mass() keeps it (read only; no copy per call). */
static cdyn_status mass_at(cdyn_dae *dae, const char *fn, double t, const double **mass)
{
    *mass = dae->mass_fn ? dae->resid_mass : dae->part.mass;
    return dae->mass_fn ? cdyn__dae_call_mass(dae, fn, t, dae->resid_mass) : CDYN_OK;
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
    const double *mass = NULL;
    st = mass_at(dae, fn, t, &mass);
    if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, v, dae->resid_f);
    if (st != CDYN_OK) return st;
    double *out = dae->resid_out; /* r may alias v or vdot */
    for (int i = 0; i < n; ++i) out[i] = -dae->resid_f[i];
    if (dae->mass_fn) { /* M(t): dense */
        for (int j = 0; j < n; ++j) {
            double vj = vdot[j];
            const double *col = mass + (size_t)j * n;
            for (int i = 0; vj != 0.0 && i < n; ++i) out[i] += col[i] * vj;
        }
    } else { /* the constant M's non-zero entries (set at cdyn_dae_set_mass) */
        const int *start = dae->part.mass_start, *row = dae->part.mass_row;
        for (int j = 0; j < n; ++j) {
            double vj = vdot[j];
            const double *col = mass + (size_t)j * n;
            for (int k = start[j]; k < start[j + 1]; ++k) out[row[k]] += col[row[k]] * vj;
        }
    }
    bad = cdyn__first_nonfinite(n, 1, out, n);
    if (bad >= 0) /* finite inputs, but M v' - F overflowed */
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: r[%ld] overflows at t = %g", fn,
                          bad, t);
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
    const double *mass = NULL;
    st = mass_at(dae, fn, t, &mass);
    if (st == CDYN_OK && !dae->jacobian) st = cdyn__dae_force(dae, fn, t, vv, dae->resid_f);
    if (st == CDYN_OK)
        st = cdyn__dae_force_jacobian_to(dae, fn, t, vv, dae->resid_f, dae->resid_out,
                                         dae->resid_jac, n);
    if (st != CDYN_OK) return st; /* J untouched */
    double *A = dae->resid_jac; /* c_j M - dF/dv in place, then to J */
    for (size_t k = 0; k < (size_t)n * (size_t)n; ++k) A[k] = c_j * mass[k] - A[k];
    long bad = cdyn__first_nonfinite(n, n, A, n);
    if (bad >= 0) /* finite inputs, but c_j M - dF/dv overflowed */
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: J(%ld, %ld) overflows at t = %g",
                          fn, bad % n, bad / n, t);
    for (int j = 0; j < n; ++j)
        memcpy(J + (size_t)j * ldj, A + (size_t)j * n, sizeof(double) * (size_t)n);
    return CDYN_OK;
}
