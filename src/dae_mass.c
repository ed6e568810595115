/* Time-varying mass matrix M(t) for cdyn_dae: refactor at each time with a
 * left null-space basis that varies smoothly, and its time derivative
 * (THEORY T3.1-T3.3 with M(t)). */
#include "dae_internal.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

cdyn_status cdyn_dae_set_mass_fn(cdyn_dae *dae, cdyn_dae_mass_fn mass, void *user, double t0)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_set_mass_fn";
    int n = dae->n;
    if (!mass) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: mass is NULL", fn);
    if (!isfinite(t0)) return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: t0 is not finite", fn);
    int code = mass(t0, dae->svd_copy, n, user);
    if (code != 0) {
        dae->callback_code = code;
        return cdyn__fail(dae->msg, CDYN_ERR_CALLBACK, "%s: mass callback returned %d", fn, code);
    }
    long bad = cdyn__first_nonfinite(n, n, dae->svd_copy, n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) at t0 is not finite", fn,
                          bad % n, bad / n);
    memcpy(dae->mass, dae->svd_copy, sizeof(double) * (size_t)n * n);
    cdyn_status st = cdyn__dae_install_mass(dae, fn);
    if (st != CDYN_OK) return st;
    dae->mass_fn = mass;
    dae->mass_user = user;
    return CDYN_OK;
}

/* M(t) into dae->mass and its SVD; the rank must be the set-up rank. */
static cdyn_status factor_mass_at(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n;
    int code = dae->mass_fn(t, dae->mass, n, dae->mass_user);
    if (code != 0) {
        dae->callback_code = code;
        return cdyn__fail(dae->msg, CDYN_ERR_CALLBACK, "%s: mass callback returned %d at t = %g",
                          fn, code, t);
    }
    long bad = cdyn__first_nonfinite(n, n, dae->mass, n);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) at t = %g is not finite",
                          fn, bad % n, bad / n, t);
    int rank = cdyn__dae_mass_svd(dae);
    if (rank != dae->r)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: M(t) has rank %d at t = %g but %d at set-up; the split into "
                          "integrated and algebraic states no longer applies",
                          fn, rank, t, dae->r);
    return CDYN_OK;
}

/* The basis of the left null space in dae->u (columns r..n-1) closest to
 * ref, written to out: out = U_0 W with W the orthogonal polar factor of
 * U_0^T ref (orthogonal Procrustes), so successive bases vary smoothly. */
static void aligned_null_basis(cdyn_dae *dae, const double *ref, double *out)
{
    int n = dae->n, q = dae->q;
    const double *null_basis = dae->u + (size_t)n * dae->r;
    cdyn__gemm('T', 'N', q, q, n, 1.0, null_basis, n, ref, n, 0.0, dae->align, q);
    cdyn__gesvd(q, q, dae->align, q, dae->align_sv, dae->align_u, q, dae->align_vt, q, dae->work,
                dae->lwork);
    cdyn__gemm('N', 'N', q, q, q, 1.0, dae->align_u, q, dae->align_vt, q, 0.0, dae->align, q);
    cdyn__gemm('N', 'N', n, q, q, 1.0, null_basis, n, dae->align, q, 0.0, out, n);
}

cdyn_status cdyn__dae_mass_at(cdyn_dae *dae, const char *fn, double t)
{
    if (!dae->mass_fn) return CDYN_OK;
    cdyn_status st = factor_mass_at(dae, fn, t);
    if (st != CDYN_OK) return st;
    int n = dae->n, r = dae->r;
    if (dae->q > 0) aligned_null_basis(dae, dae->beta_ref, dae->beta);
    cdyn__dae_detect_selection(dae);
    memcpy(dae->range, dae->u, sizeof(double) * (size_t)n * r);
    cdyn__gemm('T', 'N', r, n, n, 1.0, dae->range, n, dae->mass, n, 0.0, dae->range_t_mass,
               r > 0 ? r : 1);
    return CDYN_OK;
}

cdyn_status cdyn__dae_beta_rate(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n;
    size_t nq = (size_t)n * dae->q;
    memcpy(dae->mass_saved, dae->mass, sizeof(double) * (size_t)n * n);
    double h = dae->fd_step * fmax(fabs(t), 1.0);
    cdyn_status st = factor_mass_at(dae, fn, t + h);
    if (st == CDYN_OK) {
        aligned_null_basis(dae, dae->beta, dae->beta_plus);
        st = factor_mass_at(dae, fn, t - h);
    }
    if (st == CDYN_OK) {
        aligned_null_basis(dae, dae->beta, dae->beta_minus);
        for (size_t k = 0; k < nq; ++k)
            dae->beta_dot[k] = (dae->beta_plus[k] - dae->beta_minus[k]) / (2.0 * h);
    }
    memcpy(dae->mass, dae->mass_saved, sizeof(double) * (size_t)n * n);
    return st;
}
