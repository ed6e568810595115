/* The index-2 form of a quasi-linear DAE (docs/theory.md "Index-2
 * networks"; THEORY T1.7 with T3.1-T3.3): hydraulic networks whose
 * junctions have no storage.
 *
 * The states split into x, the states with mass (or that appear in the
 * hidden constraints), and z, massless states absent from the hidden
 * constraints G0 = beta^T F (the junction pressures), one per constraint.
 * G0(x, t) = 0 is then a constraint on x alone (the junction balances,
 * T1.7), and z is its multiplier: it is fixed only by the rates. With
 * B = P^T M_x (r x r, r = rank M = the number of x):
 *
 *     B x' = P^T F(x, z, t),      G_x x' + G_t = 0.
 *
 * The x are split as a null-space reduction (T1.2) by a pivoted QR of G_x:
 * x_d (one per constraint) follow the integrated x_i through G0 = 0 (the
 * Newton solve of index 1, unchanged), so the constraints hold at every
 * evaluation without drift; z solves H(z) = G_x B^-1 P^T F(x, z, t) + G_t
 * = 0 with a second Newton solver (one step when F is affine in z, as in
 * hydraulics); then x' = B^-1 P^T F. The rates are certified as those of
 * index 1 (the multipliers' columns of [P^T M; G_v] are zero). */
#include "dae_internal.h"
#include "kkt.h"
#include "linalg.h"
#include "newton_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Relative step of the central differences of G0 without dF/dv:
 * eps^(1/3) of the state's magnitude. */
#define INDEX2_G_STEP 6.0e-6

/* The x states in the order of B's columns: integrated, then dependent. */
static inline int x_state(const cdyn_dae *dae, int j)
{
    return j < dae->ny ? dae->integrated[j] : dae->algebraic[j - dae->ny];
}

/* Is column j of G_v = beta^T dF/dv (in constraint_jac, F_v in force_jac)
 * zero up to the rounding of the products that form it? */
static int absent_from_constraints(const cdyn_dae *dae, int j)
{
    int n = dae->n, q = dae->q;
    const double *g = dae->part.constraint_jac + (size_t)j * q;
    if (dae->part.beta_is_selection) { /* each entry is one product: rounding-free */
        for (int k = 0; k < q; ++k)
            if (g[k] != 0.0) return 0;
        return 1;
    }
    const double *fv = dae->force_jac + (size_t)j * n;
    for (int k = 0; k < q; ++k) {
        const double *b = dae->part.beta + (size_t)k * n;
        double size = 0.0;
        for (int i = 0; i < n; ++i) size += fabs(b[i] * fv[i]);
        if (!(fabs(g[k]) <= 64.0 * DBL_EPSILON * size)) return 0;
    }
    return 1;
}

cdyn_status cdyn__dae_index2_split(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    if (dae->mass_fn)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the DAE has index 2 at t = %g; the index-2 form needs a "
                          "constant M (cdyn_dae_set_mass)",
                          fn, t);
    /* the split is found in jpvt (2 n): independent states [0, r),
     * dependent [r, n), multipliers [n, n + q); the object's lists change
     * only when it is complete */
    int *independent = dae->jpvt, *dependent = dae->jpvt + r, *multiplier = dae->jpvt + n;
    double *gv = p->constraint_jac;
    cdyn__dae_beta_t(dae, n, dae->force_jac, n, 1.0, gv, q);
    int count = 0;
    for (int j = 0; j < n; ++j) {
        if (!p->massless[j] || !absent_from_constraints(dae, j)) continue;
        if (count < q) multiplier[count] = j;
        ++count;
        memset(gv + (size_t)j * q, 0, sizeof(double) * (size_t)q);
    }
    if (count != q)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the DAE has index 2 at t = %g but not the index-2 form cdyn "
                          "reduces: %d massless states are absent from the %d hidden "
                          "constraints (one per constraint needed)",
                          fn, t, count, q);
    cdyn_status st = cdyn_nullspace_factor(p->split_ns, gv, q);
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: index 2 at t = %g: the hidden constraints do not determine "
                          "%d states with mass: %s",
                          fn, t, q, cdyn_nullspace_last_error(p->split_ns));
    cdyn_nullspace_partition(p->split_ns, independent, dependent);
    for (int k = 0; k < q; ++k)
        if (p->massless[dependent[k]] && absent_from_constraints(dae, dependent[k]))
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: index 2 at t = %g: the split of the hidden constraints "
                              "failed",
                              fn, t);
    memcpy(dae->multiplier, multiplier, sizeof(int) * (size_t)q);
    memcpy(dae->algebraic, dependent, sizeof(int) * (size_t)q);
    int ny = 0;
    for (int j = 0; j < r; ++j) {
        int is_multiplier = 0;
        for (int k = 0; k < q; ++k) is_multiplier |= independent[j] == multiplier[k];
        if (!is_multiplier) dae->integrated[ny++] = independent[j];
    }
    dae->ny = ny; /* r - q: every multiplier is among the r independent */
    dae->index2 = 1;
    return CDYN_OK;
}

/* x' = B^-1 P^T F for F (n) into xdot (r; B's LU in part.reduced), with
 * P^T F into ptf (r). */
static void rates_of_x(cdyn_dae *dae, const double *F, double *ptf, double *xdot)
{
    int n = dae->n, r = dae->r;
    cdyn__dae_range_t(dae, 1, F, n, 1.0, ptf, r);
    memcpy(xdot, ptf, sizeof(double) * (size_t)r);
    cdyn__getrs('N', r, 1, dae->part.reduced, r, dae->part.ipiv, xdot, r);
}

/* out (q) = G_x x' + G_t for x' (r, in B's column order). */
static void constraint_rate(const cdyn_dae *dae, const double *xdot, double *out)
{
    int q = dae->q;
    for (int k = 0; k < q; ++k) out[k] = -dae->part.vec_q2[k];
    for (int j = 0; j < dae->r; ++j) {
        const double *g = dae->part.constraint_jac + (size_t)x_state(dae, j) * q;
        for (int k = 0; k < q; ++k) out[k] += g[k] * xdot[j];
    }
}

/* F at v_trial with the multipliers z into out (counted, guarded: this runs
 * inside the Newton callbacks). */
static int force_with_multipliers(cdyn_dae *dae, const double *z, double *out)
{
    for (int k = 0; k < dae->q; ++k) dae->v_trial[dae->multiplier[k]] = z[k];
    dae->guard.in_callback++;
    dae->counters.force_evaluations++;
    int code = dae->force(dae->t_eval, dae->v_trial, out, dae->user);
    dae->guard.in_callback--;
    if (code != 0) dae->callback_code = code;
    return code;
}

/* Newton residual H(z) = G_x B^-1 P^T F(x, z, t) + G_t. */
static int multiplier_residual(const double *z, double *H, void *user)
{
    cdyn_dae *dae = user;
    int code = force_with_multipliers(dae, z, dae->force_shift);
    if (code != 0) return code;
    double *xdot = dae->part.reduced_rhs, *ptf = dae->residual;
    rates_of_x(dae, dae->force_shift, ptf, xdot);
    constraint_rate(dae, xdot, H);
    return 0;
}

/* Newton Jacobian H_z = G_x B^-1 P^T F_z; B^-1 P^T F_z is kept in
 * part.rate_of_multiplier. F_z from the caller's dF/dv or by forward
 * differences in z (steps as for the algebraic states). */
static int multiplier_jacobian(const double *z, double *J, int ldj, void *user)
{
    cdyn_dae *dae = user;
    int n = dae->n, q = dae->q, r = dae->r;
    double *fz = dae->scratch; /* n x q */
    int code;
    if (dae->jacobian) {
        for (int k = 0; k < q; ++k) dae->v_trial[dae->multiplier[k]] = z[k];
        dae->guard.in_callback++;
        dae->counters.jacobian_evaluations++;
        code = dae->jacobian(dae->t_eval, dae->v_trial, dae->force_jac, n, dae->user);
        dae->guard.in_callback--;
        if (code != 0) {
            dae->callback_code = code;
            return code;
        }
        for (int k = 0; k < q; ++k)
            memcpy(fz + (size_t)k * n, dae->force_jac + (size_t)dae->multiplier[k] * n,
                   sizeof(double) * (size_t)n);
    } else {
        double *base = dae->tau, *shifted = dae->force_shift, *zs = dae->row_max;
        code = force_with_multipliers(dae, z, base);
        memcpy(zs, z, sizeof(double) * (size_t)q);
        for (int k = 0; code == 0 && k < q; ++k) {
            double step = dae->fd_step * cdyn__dae_step_scale(dae, dae->v_trial, dae->multiplier[k]);
            double h = 0.0;
            for (int tries = 0; code == 0 && step > 0.0; ++tries) {
                zs[k] = z[k] + step;
                h = zs[k] - z[k];
                code = force_with_multipliers(dae, zs, shifted);
                zs[k] = z[k];
                /* a step F's rounding swallows grows (cdyn__dae_next_step) */
                if (code == 0) step = cdyn__dae_next_step(n, base, shifted, step, tries);
            }
            for (int i = 0; code == 0 && i < n; ++i)
                fz[i + (size_t)k * n] = (shifted[i] - base[i]) / h;
        }
        for (int k = 0; k < q; ++k) dae->v_trial[dae->multiplier[k]] = z[k];
        if (code != 0) return code;
    }
    cdyn__dae_part *p = &dae->part;
    double *x_z = p->rate_of_multiplier; /* r x q */
    size_t fz_bytes = sizeof(double) * (size_t)r * q;
    cdyn__dae_range_t(dae, q, fz, n, 1.0, p->fz_next, r);
    int same = p->hz_valid && memcmp(p->fz_next, p->range_t_fz, fz_bytes) == 0;
    for (int j = 0; same && j < r; ++j)
        same = memcmp(p->gx_last + (size_t)j * q, p->constraint_jac + (size_t)x_state(dae, j) * q,
                      sizeof(double) * (size_t)q) == 0;
    if (!same) { /* X_z = B^-1 P^T F_z, H_z = G_x X_z (else both as last time) */
        memcpy(p->range_t_fz, p->fz_next, fz_bytes);
        memcpy(x_z, p->range_t_fz, fz_bytes);
        cdyn__getrs('N', r, q, p->reduced, r, p->ipiv, x_z, r);
        for (int j = 0; j < r; ++j)
            memcpy(p->gx_last + (size_t)j * q, p->constraint_jac + (size_t)x_state(dae, j) * q,
                   sizeof(double) * (size_t)q);
        memset(p->hz_last, 0, sizeof(double) * (size_t)q * q);
        for (int l = 0; l < q; ++l) {
            double *col = p->hz_last + (size_t)l * q;
            for (int j = 0; j < r; ++j) {
                const double *g = p->gx_last + (size_t)j * q;
                double c = x_z[j + (size_t)l * r];
                for (int k = 0; k < q; ++k) col[k] += g[k] * c;
            }
        }
        p->hz_valid = 1;
    }
    for (int l = 0; l < q; ++l)
        memcpy(J + (size_t)l * ldj, p->hz_last + (size_t)l * q, sizeof(double) * (size_t)q);
    return 0;
}

/* A multiplier appears in the hidden constraints at v_trial (z: which
 * one, -1 when only their joint shift was tried). */
static cdyn_status multiplier_appears(cdyn_dae *dae, const char *fn, double t, int z)
{
    if (z < 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the multipliers of the index-2 split appear in the hidden "
                          "constraints at t = %g (split again)",
                          fn, t);
    return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                      "%s: state %d, a multiplier of the index-2 split, appears in the hidden "
                      "constraints at t = %g (split again)",
                      fn, z, t);
}

/* Without dF/dv: G_x by central differences of G0 (2 r force
 * evaluations; the constraints are affine in x in hydraulics, where this
 * is exact to rounding, and a forward difference's 1e-8 would reach the
 * rates directly, since every dependent state has mass), and one shift of
 * all multipliers together to confirm that G0 does not see them. F(v) is
 * in force_val. */
static cdyn_status constraint_differences(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    double *v = dae->v_trial, *up = dae->force_shift, *down = dae->force_dt;
    double *g_up = p->vec_q, *g_down = dae->residual; /* q each */
    memset(p->constraint_jac, 0, sizeof(double) * (size_t)q * n);
    for (int j = 0; j < r; ++j) {
        int x = x_state(dae, j);
        double saved = v[x], h = INDEX2_G_STEP * cdyn__dae_step_scale(dae, v, x);
        double ahead = 0.0, behind = 0.0;
        for (int tries = 0; h > 0.0; ++tries) {
            v[x] = saved + h;
            ahead = v[x] - saved;
            cdyn_status st = cdyn__dae_force(dae, fn, t, v, up);
            v[x] = saved - h;
            behind = saved - v[x];
            if (st == CDYN_OK) st = cdyn__dae_force(dae, fn, t, v, down);
            v[x] = saved;
            if (st != CDYN_OK) return st;
            /* a step F's rounding swallows grows (cdyn__dae_next_step) */
            h = cdyn__dae_next_step(n, down, up, h, tries);
        }
        cdyn__dae_beta_t(dae, 1, up, n, 1.0, g_up, q);
        cdyn__dae_beta_t(dae, 1, down, n, 1.0, g_down, q);
        double *col = p->constraint_jac + (size_t)x * q;
        for (int k = 0; k < q; ++k) col[k] = (g_up[k] - g_down[k]) / (ahead + behind);
    }
    double *saved_z = dae->bound; /* q; free until the certificate */
    for (int k = 0; k < q; ++k) {
        int z = dae->multiplier[k];
        saved_z[k] = v[z];
        v[z] += INDEX2_G_STEP * cdyn__dae_step_scale(dae, v, z);
    }
    cdyn_status st = cdyn__dae_force(dae, fn, t, v, up);
    for (int k = 0; k < q; ++k) v[dae->multiplier[k]] = saved_z[k];
    if (st != CDYN_OK) return st;
    for (int k = 0; k < q; ++k) { /* beta^T (F(z + h) - F(z)) is rounding only */
        const double *b = p->beta + (size_t)k * n;
        double change = 0.0, size = 0.0;
        for (int i = 0; i < n; ++i) {
            change += b[i] * (up[i] - dae->force_val[i]);
            size += fabs(b[i]) * (fabs(up[i]) + fabs(dae->force_val[i]));
        }
        if (!(fabs(change) <= 64.0 * DBL_EPSILON * size))
            return multiplier_appears(dae, fn, t, -1);
    }
    return CDYN_OK;
}

/* G_v, -G_t (part.vec_q2) and the LU of B at v_trial, whose multiplier
 * entries are the warm start (G0 does not depend on them). */
static cdyn_status constraint_data(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_part *p = &dae->part;
    cdyn_status st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st == CDYN_OK && dae->jacobian) {
        st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_trial);
        if (st != CDYN_OK) return st;
        cdyn__dae_beta_t(dae, n, dae->force_jac, n, 1.0, p->constraint_jac, q);
        for (int k = 0; k < q; ++k) {
            int z = dae->multiplier[k];
            if (!absent_from_constraints(dae, z)) return multiplier_appears(dae, fn, t, z);
            memset(p->constraint_jac + (size_t)z * q, 0, sizeof(double) * (size_t)q);
        }
    } else if (st == CDYN_OK) {
        st = constraint_differences(dae, fn, t);
    }
    if (st == CDYN_OK) st = cdyn__dae_force_time(dae, fn, t, dae->v_trial);
    if (st != CDYN_OK) return st;
    if (cdyn__first_nonfinite(q, n, p->constraint_jac, q) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: dG0/dv overflowed at t = %g", fn, t);
    cdyn__dae_beta_t(dae, 1, dae->force_dt, n, -1.0, p->vec_q2, q);
    if (dae->reduced_factored) return CDYN_OK; /* B is fixed by the split (constant M) */
    for (int j = 0; j < r; ++j)
        memcpy(p->reduced + (size_t)j * r, p->range_t_mass + (size_t)x_state(dae, j) * r,
               sizeof(double) * (size_t)r);
    if (cdyn__getrf(r, p->reduced, r, p->ipiv) != 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: P^T M of the states with mass is singular at t = %g", fn, t);
    dae->reduced_factored = 1;
    return CDYN_OK;
}

/* A factorization of H_z at the solution z (v_trial), at full rank. */
static cdyn_status factor_at_solution(cdyn_dae *dae, const char *fn, double t)
{
    int q = dae->q;
    if (cdyn__newton_solution_factored(dae->newton_z)) return CDYN_OK;
    double *hz = dae->part.ga, *zs = dae->bound; /* bound: free until the certificate */
    for (int k = 0; k < q; ++k) zs[k] = dae->v_trial[dae->multiplier[k]];
    dae->t_eval = t;
    if (multiplier_jacobian(zs, hz, q, dae) != 0)
        return cdyn__fail(dae->msg, CDYN_ERR_CALLBACK,
                          "%s: the model callback returned %d at t = %g", fn,
                          dae->callback_code, t);
    if (cdyn__first_nonfinite(q, q, hz, q) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                          "%s: the multipliers' Jacobian overflowed at t = %g", fn, t);
    int svd = cdyn__newton_factor(dae->newton_z, hz, q);
    if (svd < 0) return cdyn__fail(dae->msg, CDYN_ERR_LAPACK, "%s: LAPACK failed on H_z", fn);
    if (svd > 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the multipliers (junction pressures) are not determined at "
                          "t = %g: dH/dz is singular",
                          fn, t);
    return CDYN_OK;
}

/* The backward error of the rates with the multipliers as unknowns of the
 * same linear system: cdyn__dae_rates_backward_error's measure, with
 * |P^T F_z| |z| added to the bound of each top row (F depends on z, whose
 * rounding is part of the solution's, not of the data). */
static double backward_error(cdyn_dae *dae, const double *vdot, const double *ptf)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn__dae_rates_backward_error(dae, vdot, ptf);
    const double *ptfz = dae->part.range_t_fz, *res = dae->residual;
    double *bound = dae->bound, worst = 0.0;
    for (int k = 0; k < q; ++k) {
        double z = fabs(dae->v_trial[dae->multiplier[k]]);
        for (int i = 0; i < r; ++i) bound[i] += fabs(ptfz[i + (size_t)k * r]) * z;
    }
    for (int i = 0; i < n; ++i) {
        double w = bound[i] > 0.0 ? fabs(res[i]) / bound[i] : (res[i] == 0.0 ? 0.0 : INFINITY);
        worst = w > worst || isnan(w) ? w : worst;
    }
    return worst;
}

/* One more step on G0 = 0 for x_d with the Newton solver's last
 * factorization: the solve stops once its predicted correction is below
 * the tolerance (1e-10 relative by default) without taking it; taken, it
 * leaves the balances of an affine G0 (the junctions) met to rounding. */
static cdyn_status polish_dependent(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q;
    double *g = dae->part.vec_q;
    cdyn_status st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st != CDYN_OK) return st;
    cdyn__dae_beta_t(dae, 1, dae->force_val, n, 1.0, g, q);
    int moved = 0;
    for (int k = 0; k < q; ++k) moved |= g[k] != 0.0;
    if (!moved) return CDYN_OK;
    cdyn__newton_apply(dae->newton, g, g);
    for (int k = 0; k < q; ++k) dae->v_trial[dae->algebraic[k]] -= g[k];
    return CDYN_OK;
}

cdyn_status cdyn__dae_index2_rates(cdyn_dae *dae, const char *fn, double t, double *vdot)
{
    int n = dae->n, q = dae->q, r = dae->r;
    cdyn_status st = polish_dependent(dae, fn, t);
    if (st == CDYN_OK) st = constraint_data(dae, fn, t);
    if (st != CDYN_OK) return st;
    double *z = dae->part.vec_q;
    for (int k = 0; k < q; ++k) z[k] = dae->v_trial[dae->multiplier[k]];
    dae->t_eval = t;
    st = cdyn_newton_solve(dae->newton_z, multiplier_residual, multiplier_jacobian, dae, z);
    for (int k = 0; k < q; ++k) dae->v_trial[dae->multiplier[k]] = z[k];
    const double *z_tolerance = cdyn__newton_tolerance(dae->newton_z);
    for (int k = 0; k < q; ++k) dae->resolution[dae->multiplier[k]] = z_tolerance[k];
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, st, "%s: multipliers at t = %g: %s", fn, t,
                          cdyn_newton_last_error(dae->newton_z));
    st = factor_at_solution(dae, fn, t);
    if (st != CDYN_OK) return st;

    /* x' = B^-1 P^T F(x, z, t), certified on [P^T M; G_v] v' = [P^T F; -G_t]
     * (the multipliers' columns are zero), with up to two steps of
     * refinement of (x', z) through the factorizations of B and H_z:
     * dx0 = B^-1 res_top, dz = H_z^-1 (res_bottom - G_x dx0),
     * dx' = dx0 + (B^-1 P^T F_z) dz; F is evaluated again at the new z */
    double *ptf = dae->force_shift, *xdot = dae->part.reduced_rhs, *dz = dae->part.vec_q;
    double *dx = dae->tau, *x_z = dae->part.rate_of_multiplier;
    st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st != CDYN_OK) return st;
    rates_of_x(dae, dae->force_val, ptf, xdot);
    double tolerance = cdyn__kkt_backward_tolerance(n, 0), omega = INFINITY;
    for (int step = 0;; ++step) {
        memset(vdot, 0, sizeof(double) * (size_t)n);
        for (int j = 0; j < r; ++j) vdot[x_state(dae, j)] = xdot[j];
        omega = backward_error(dae, vdot, ptf);
        if (step == 2 || !(omega > tolerance) || !isfinite(omega)) break;
        const double *res_top = dae->residual, *res_bottom = dae->residual + r;
        memcpy(dx, res_top, sizeof(double) * (size_t)r);
        cdyn__getrs('N', r, 1, dae->part.reduced, r, dae->part.ipiv, dx, r);
        constraint_rate(dae, dx, dz); /* G_x dx0 - G_t */
        for (int k = 0; k < q; ++k) dz[k] = res_bottom[k] - (dz[k] + dae->part.vec_q2[k]);
        cdyn__newton_apply(dae->newton_z, dz, dz);
        for (int j = 0; j < r; ++j) {
            double c = dx[j];
            for (int k = 0; k < q; ++k) c += x_z[j + (size_t)k * r] * dz[k];
            xdot[j] += c;
        }
        for (int k = 0; k < q; ++k) dae->v_trial[dae->multiplier[k]] += dz[k];
        st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
        if (st != CDYN_OK) return st;
        cdyn__dae_range_t(dae, 1, dae->force_val, n, 1.0, ptf, r);
    }
    if (cdyn__first_nonfinite(n, 1, vdot, n) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: v' overflowed at t = %g", fn, t);
    if (!(omega <= tolerance))
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the rates at t = %g are not determined to working accuracy "
                          "(componentwise backward error %.2e > %.2e): the index-2 system is "
                          "singular to rounding there",
                          fn, t, omega, tolerance);
    return CDYN_OK;
}

/* d ydot/dy by the implicit function theorem (the evaluation at y must be
 * the last one, with the Jacobian callback). Along a column e_j of y the
 * dependent states move by D = -G_d^-1 G_i (the x_d solve's factorization),
 * so dx = [e_j; D e_j]. Differentiating B x' = P^T F(x, z, t) and the
 * constraints' rate G_x x' + G_t = 0 at fixed t:
 *     B dx' = P^T (F_x dx + F_z dz),   G_x dx' + K dx = 0,
 * K = d/dx (G_x w + G_t) at w = x' (zero for affine balances), hence
 *     H_z dz = -(G_x B^-1 P^T F_x dx + K dx),   dx' = B^-1 P^T F_x dx + X_z dz,
 * with H_z = G_x X_z and X_z = B^-1 P^T F_z as the multipliers' solve left
 * them at the solution. ydot's rows are the first ny of dx'. */
static cdyn_status exact_jacobian(cdyn_dae *dae, const char *fn, double t, double *J)
{
    int n = dae->n, q = dae->q, r = dae->r, ny = dae->ny;
    const cdyn__dae_part *p = &dae->part;
    double *diff = dae->prod, *kx = dae->aug, *d = dae->aug_rhs, two_h = 0.0;
    cdyn_status st = cdyn__dae_jacobian_along_motion(dae, fn, t, diff, &two_h);
    if (st != CDYN_OK) return st;
    for (int j = 0; j < r; ++j) /* K (q x r, B's column order) */
        cdyn__dae_beta_t(dae, 1, diff + (size_t)x_state(dae, j) * n, n, 1.0 / two_h,
                         kx + (size_t)j * q, q);
    st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_last); /* F_v at the state */
    if (st != CDYN_OK) return st;
    for (int j = 0; j < ny; ++j) /* D = -G_d^-1 G_i (q x ny) */
        for (int k = 0; k < q; ++k)
            d[k + (size_t)j * q] = -p->constraint_jac[k + (size_t)dae->integrated[j] * q];
    cdyn__newton_apply_many(dae->newton, d, q, ny, d, q);
    double *dx = dae->origin, *u = dae->scratch, *s = dae->residual, *g = dae->bound;
    const double *x_z = p->rate_of_multiplier;
    for (int j = 0; j < ny; ++j) {
        for (int l = 0; l < r; ++l) dx[l] = l < ny ? (l == j) : d[(l - ny) + (size_t)j * q];
        memset(u, 0, sizeof(double) * (size_t)n); /* F_x dx */
        for (int l = 0; l < r; ++l) {
            const double *col = dae->force_jac + (size_t)x_state(dae, l) * n;
            for (int i = 0; dx[l] != 0.0 && i < n; ++i) u[i] += col[i] * dx[l];
        }
        rates_of_x(dae, u, dae->force_shift, s); /* s = B^-1 P^T F_x dx */
        for (int k = 0; k < q; ++k) g[k] = 0.0; /* -(G_x s + K dx) */
        for (int l = 0; l < r; ++l) {
            const double *gx = p->constraint_jac + (size_t)x_state(dae, l) * q;
            const double *kl = kx + (size_t)l * q;
            for (int k = 0; k < q; ++k) g[k] -= gx[k] * s[l] + kl[k] * dx[l];
        }
        cdyn__newton_apply(dae->newton_z, g, g); /* dz */
        for (int i = 0; i < ny; ++i) {
            double c = s[i];
            for (int k = 0; k < q; ++k) c += x_z[i + (size_t)k * r] * g[k];
            J[i + (size_t)j * ny] = c;
        }
    }
    return CDYN_OK;
}

/* Step of the central differences in the Jacobian: eps^(1/3) of the
 * state's magnitude (truncation and rounding then balance near eps^(2/3)). */
#define INDEX2_JAC_STEP 6.0e-6

cdyn_status cdyn__dae_index2_jacobian(cdyn_dae *dae, const char *fn, double t, const double *y,
                                      double *J)
{
    if (dae->jacobian) return exact_jacobian(dae, fn, t, J);
    int n = dae->n, ny = dae->ny;
    double *saved = dae->origin, *saved_rate = saved + n; /* n x n >= 2 n */
    double *shifted = dae->aug_rhs, *plus = shifted + ny; /* 2 ny < n n */
    memcpy(saved, dae->v_last, sizeof(double) * (size_t)n);
    memcpy(saved_rate, dae->vdot_last, sizeof(double) * (size_t)n);
    cdyn_status st = CDYN_OK;
    dae->hold_chord = 1; /* every column starts from the evaluation at y */
    for (int j = 0; j < ny && st == CDYN_OK; ++j) {
        double h = INDEX2_JAC_STEP * cdyn__dae_step_scale(dae, saved, dae->integrated[j]);
        memcpy(shifted, y, sizeof(double) * (size_t)ny);
        shifted[j] = y[j] + h;
        double up = shifted[j] - y[j];
        st = cdyn__dae_rhs_at(dae, fn, t, shifted);
        for (int i = 0; st == CDYN_OK && i < ny; ++i) plus[i] = dae->vdot_last[dae->integrated[i]];
        shifted[j] = y[j] - h;
        double down = y[j] - shifted[j];
        if (st == CDYN_OK) st = cdyn__dae_rhs_at(dae, fn, t, shifted);
        for (int i = 0; st == CDYN_OK && i < ny; ++i)
            J[i + (size_t)j * ny] = (plus[i] - dae->vdot_last[dae->integrated[i]]) / (up + down);
    }
    dae->hold_chord = 0;
    /* the object's state is that of the evaluation at y again */
    memcpy(dae->v_last, saved, sizeof(double) * (size_t)n);
    memcpy(dae->vdot_last, saved_rate, sizeof(double) * (size_t)n);
    dae->state_valid = 1;
    return st;
}
