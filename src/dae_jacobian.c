/* The Jacobian of the minimum-order right-hand side of an index-1 DAE
 * (THEORY T3.3, differentiated; docs/theory.md "Jacobian of the
 * minimum-order system").
 *
 * With y = v_i, the algebraic states follow y through G0(v, t) = 0, so
 * dv = D dy with D = Pi [I; A], A = -G_a^# G_i (the implicit function
 * theorem, with the factorization of G_a that the evaluation's Newton solve
 * left). The rates solve S v' = [P^T F; -G_t], S = [P^T M; G_v]. M and P
 * do not depend on v, so differentiating at fixed t gives
 *     S dv' = [P^T F_v; -K] dv,   K = d/dv (G_v(v) w + G_t(v)) at w = v',
 * the derivative of the constraint's rate along the motion: with
 * G0 = beta(t)^T F, K = beta^T d/de F_v(v + e w, t + e) + beta'^T F_v.
 * Hence dy'/dy = the integrated rows of S^-1 [P^T F_v D; -K D], solved with
 * the evaluation's factorizations (cdyn__dae_solve_rates).
 *
 * K needs second derivatives of F. It matters only through P^T M_a, the
 * mass coupling of the algebraic states into the range of M; when those
 * columns are zero (a massless state, as in hydraulics) it is skipped.
 * Otherwise it is a central difference of the Jacobian callback along
 * (w, 1), or without one a four-point mixed difference of F.
 */
#include "dae_internal.h"
#include "linalg.h"
#include "newton_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Steps of the differences in K: eps^(1/3) for central differences of
 * dF/dv, eps^(1/4) for the mixed second difference of F (the truncation
 * and rounding errors then balance at about eps^(2/3) and eps^(1/2)). */
#define JAC_STEP_CENTRAL 6.0e-6
#define JAC_STEP_MIXED 1.2e-4

/* out (n x r) = X D = X(:, integrated) + X(:, algebraic) A for X (n x n). */
static void times_d(const cdyn_dae *dae, const double *X, double *out)
{
    int n = dae->n, q = dae->q, r = dae->r;
    const double *coef = dae->part.coef;
    for (int j = 0; j < r; ++j) {
        double *col = out + (size_t)j * n;
        memcpy(col, X + (size_t)dae->integrated[j] * n, sizeof(double) * (size_t)n);
        for (int k = 0; k < q; ++k) {
            double c = coef[k + (size_t)j * q];
            if (c == 0.0) continue;
            const double *xa = X + (size_t)dae->algebraic[k] * n;
            for (int i = 0; i < n; ++i) col[i] += xa[i] * c;
        }
    }
}

/* The step along the direction d (n) that moves no state by more than
 * `relative` times its magnitude (the difference steps' scales, dae.h),
 * and time (when `with_time`) by no more than `relative` seconds (the
 * size of t says nothing of the time scale of F's inputs, dae.c), as t + h
 * represents it. */
static double step_along(const cdyn_dae *dae, const double *d, int with_time, double t,
                         double relative)
{
    double rate = with_time ? 1.0 : 0.0;
    for (int i = 0; i < dae->n; ++i)
        rate = fmax(rate, fabs(d[i]) / cdyn__dae_step_scale(dae, dae->v_last, i));
    double h = rate > 0.0 ? relative / rate : relative;
    if (!with_time) return h;
    volatile double ahead = t + h; /* the step as t + h represents it */
    return ahead - t;
}

/* v_last + a w + b d into shifted (n). */
static void shifted_state(const cdyn_dae *dae, double a, const double *d, double b,
                          double *shifted)
{
    for (int i = 0; i < dae->n; ++i)
        shifted[i] = dae->v_last[i] + a * dae->vdot_last[i] + (d ? b * d[i] : 0.0);
}

/* cdyn__dae_jacobian_along_motion: dae_internal.h. */
cdyn_status cdyn__dae_jacobian_along_motion(cdyn_dae *dae, const char *fn, double t,
                                            double *diff, double *two_h)
{
    int n = dae->n;
    double *shifted = dae->tau;
    double h = step_along(dae, dae->vdot_last, 1, t, JAC_STEP_CENTRAL);
    shifted_state(dae, h, NULL, 0.0, shifted);
    cdyn_status st = cdyn__dae_force_jacobian(dae, fn, t + h, shifted);
    if (st != CDYN_OK) return st;
    memcpy(diff, dae->force_jac, sizeof(double) * (size_t)n * n);
    shifted_state(dae, -h, NULL, 0.0, shifted);
    st = cdyn__dae_force_jacobian(dae, fn, t - h, shifted);
    if (st != CDYN_OK) return st;
    for (size_t i = 0; i < (size_t)n * n; ++i) diff[i] -= dae->force_jac[i];
    *two_h = 2.0 * h;
    return CDYN_OK;
}

/* bottom (q x r) = beta^T (d/de F_v(v + e w, t + e)) D by central
 * differences of the Jacobian callback (2 calls). Uses prod, scratch is
 * F_v D and must survive; force_jac is overwritten. */
static cdyn_status k_from_jacobian(cdyn_dae *dae, const char *fn, double t, double *bottom)
{
    int n = dae->n, q = dae->q, r = dae->r;
    double *diff = dae->prod, *diff_d = dae->aug, two_h = 0.0;
    cdyn_status st = cdyn__dae_jacobian_along_motion(dae, fn, t, diff, &two_h);
    if (st != CDYN_OK) return st;
    times_d(dae, diff, diff_d);
    cdyn__dae_beta_t(dae, r, diff_d, n, 1.0 / two_h, bottom, q);
    return CDYN_OK;
}

/* The same without a Jacobian callback: column j of bottom is the mixed
 * second difference of beta^T F along (w, 1) and d_j = D e_j (4 r force
 * evaluations). */
static cdyn_status k_from_forces(cdyn_dae *dae, const char *fn, double t, double *bottom)
{
    int n = dae->n, q = dae->q, r = dae->r;
    double *shifted = dae->tau, *d = dae->aug, *g = dae->part.vec_q2;
    double h = step_along(dae, dae->vdot_last, 1, t, JAC_STEP_MIXED);
    for (int j = 0; j < r; ++j) {
        memset(d, 0, sizeof(double) * (size_t)n);
        d[dae->integrated[j]] = 1.0;
        for (int k = 0; k < q; ++k) d[dae->algebraic[k]] = dae->part.coef[k + (size_t)j * q];
        double delta = step_along(dae, d, 0, t, JAC_STEP_MIXED);
        double *col = bottom + (size_t)j * q;
        memset(col, 0, sizeof(double) * (size_t)q);
        for (int corner = 0; corner < 4; ++corner) {
            double sw = corner & 1 ? -1.0 : 1.0, sd = corner & 2 ? -1.0 : 1.0;
            shifted_state(dae, sw * h, d, sd * delta, shifted);
            cdyn_status st = cdyn__dae_force(dae, fn, t + sw * h, shifted, dae->force_shift);
            if (st != CDYN_OK) return st;
            cdyn__dae_beta_t(dae, 1, dae->force_shift, n, sw * sd / (4.0 * h * delta), g, q);
            for (int k = 0; k < q; ++k) col[k] += g[k];
        }
    }
    return CDYN_OK;
}

cdyn_status cdyn_dae_rhs_jacobian(cdyn_dae *dae, double t, const double *y, double *ydot,
                                  double *J, int ldj)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_rhs_jacobian";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q, r = dae->r, ny = dae->ny;
    if (ny > 0 && !J) return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: J is NULL", fn);
    if (ldj < (ny > 1 ? ny : 1))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ldj = %d < %d (the length of y)", fn,
                          ldj, ny);
    if (ny > 0 && ydot &&
        cdyn__overlap(ydot, sizeof(double) * (size_t)ny, J,
                      sizeof(double) * ((size_t)ldj * (ny - 1) + ny)))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: ydot and J overlap", fn);
    cdyn_status st = cdyn__dae_rhs_at(dae, fn, t, y);
    if (st != CDYN_OK) return st;
    dae->counters.rhs_jacobians++;
    if (ny == 0) return CDYN_OK;
    if (dae->index2) {
        double *columns = dae->u; /* ny x ny */
        st = cdyn__dae_index2_jacobian(dae, fn, t, y, columns);
        if (st != CDYN_OK) return st;
        if (cdyn__first_nonfinite(ny, ny, columns, ny) >= 0) /* finite rates, whose differences overflow */
            return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                              "%s: the Jacobian overflowed at t = %g", fn, t);
        for (int j = 0; j < ny; ++j) /* outputs last (either may alias y) */
            memcpy(J + (size_t)j * ldj, columns + (size_t)j * ny, sizeof(double) * (size_t)ny);
        if (ydot)
            for (int j = 0; j < ny; ++j) ydot[j] = dae->vdot_last[dae->integrated[j]];
        return CDYN_OK;
    }

    /* dF/dv at the state (left by the evaluation when q > 0) */
    if (q == 0) {
        st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_last);
        if (st != CDYN_OK) return st;
    }
    cdyn__dae_part *p = &dae->part;
    double *fd = dae->scratch, *top = dae->aug_rhs, *bottom = dae->origin, *dvdy = dae->u;
    if (q > 0) cdyn__dae_coupling(dae); /* A, for D = Pi [I; A] */
    times_d(dae, dae->force_jac, fd);                                        /* F_v D */
    cdyn__dae_range_t(dae, r, fd, n, 1.0, top, r);                          /* P^T F_v D */
    if (q > 0) {
        if (!dae->decoupled) {
            st = dae->jacobian ? k_from_jacobian(dae, fn, t, bottom)
                               : k_from_forces(dae, fn, t, bottom);
            if (st != CDYN_OK) return st;
            if (dae->mass_fn) /* + beta'^T F_v D */
                cdyn__gemm('T', 'N', q, r, n, 1.0, p->beta_dot, n, fd, n, 1.0, bottom, q);
            for (size_t i = 0; i < (size_t)q * r; ++i) bottom[i] = -bottom[i];
        } else {
            memset(bottom, 0, sizeof(double) * (size_t)q * r); /* v_i' does not see it */
        }
    }
    for (int j = 0; j < r; ++j)
        cdyn__dae_solve_rates(dae, top + (size_t)j * r, bottom + (size_t)j * q,
                              dvdy + (size_t)j * n);
    if (cdyn__first_nonfinite(n, r, dvdy, n) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: the Jacobian overflowed at t = %g",
                          fn, t);

    /* outputs last (either may alias y) */
    for (int j = 0; j < r; ++j)
        for (int i = 0; i < r; ++i)
            J[i + (size_t)j * ldj] = dvdy[dae->integrated[i] + (size_t)j * n];
    if (ydot)
        for (int j = 0; j < r; ++j) ydot[j] = dae->vdot_last[dae->integrated[j]];
    return CDYN_OK;
}

/* The rates' response v' (n, in dae->force_shift) to one input column fu
 * at the evaluated state: G_a dv_a = -beta^T fu (the evaluation's
 * factorization of G_a), then P^T M_i dv_i' = P^T (fu + F_v(:, a) dv_a);
 * the constraint rows move only v_a'. */
static const double *input_response(cdyn_dae *dae, const double *fu)
{
    int n = dae->n, q = dae->q, r = dae->r;
    double *g = dae->tau, *column = dae->residual, *top = dae->row_max;
    double *zero = dae->rate_unit, *out = dae->force_shift;
    memset(zero, 0, sizeof(double) * (size_t)n);
    memcpy(column, fu, sizeof(double) * (size_t)n);
    if (q > 0) {
        cdyn__dae_beta_t(dae, 1, fu, n, -1.0, g, q);
        cdyn__newton_apply(dae->newton, g, g);
        for (int a = 0; a < q; ++a) {
            const double *fv = dae->force_jac + (size_t)dae->algebraic[a] * n;
            for (int i = 0; i < n; ++i) column[i] += fv[i] * g[a];
        }
    }
    cdyn__dae_range_t(dae, 1, column, n, 1.0, top, r);
    cdyn__dae_solve_rates(dae, top, zero, out);
    return out;
}

cdyn_status cdyn_dae_input_matrix(cdyn_dae *dae, double t, const double *y, int inputs,
                                  const double *Fu, int ldfu, double *B, int ldb)
{
    if (!dae) return CDYN_ERR_ARG;
    const char *fn = "cdyn_dae_input_matrix";
    if (cdyn__dae_check_idle(dae, fn)) return CDYN_ERR_BUSY;
    if (!dae->split_done)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: call cdyn_dae_split first", fn);
    int n = dae->n, q = dae->q, ny = dae->ny;
    if (dae->index2)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "%s: not available for the index-2 form (the response of the "
                          "multipliers to u needs second derivatives of F)",
                          fn);
    if (!Fu || (ny > 0 && !B))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !Fu ? "Fu" : "B");
    if (inputs < 1 || ldfu < n || ldb < (ny > 1 ? ny : 1))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "%s: inputs = %d (>= 1), ldfu = %d (>= n = %d), ldb = %d (>= %d)", fn,
                          inputs, ldfu, n, ldb, ny);
    size_t b_bytes = sizeof(double) * ((size_t)ldb * (inputs - 1) + (size_t)ny);
    if (ny > 0 && ((y && cdyn__overlap(B, b_bytes, y, sizeof(double) * (size_t)ny)) ||
                   cdyn__overlap(B, b_bytes, Fu, sizeof(double) * ((size_t)ldfu * (inputs - 1) + n))))
        return cdyn__fail(dae->msg, CDYN_ERR_ARG, "%s: B overlaps y or Fu", fn);
    long bad = cdyn__first_nonfinite(n, inputs, Fu, ldfu);
    if (bad >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: Fu has NaN or Inf (column %ld)", fn,
                          bad / n);
    cdyn_status st = cdyn__dae_rhs_at(dae, fn, t, y);
    if (st != CDYN_OK) return st;
    if (q > 0 && !dae->decoupled)
        return cdyn__fail(dae->msg, CDYN_ERR_ARG,
                          "%s: the algebraic states carry mass into the range of M "
                          "(P^T M_a != 0): the input matrix then needs second derivatives of F "
                          "in u, which Fu does not give",
                          fn);
    /* two passes, so that B stays untouched when a column overflows: the
     * first only looks, the second writes */
    for (int pass = 0; pass < 2; ++pass)
        for (int k = 0; k < inputs; ++k) {
            const double *out = input_response(dae, Fu + (size_t)k * ldfu);
            if (pass == 1) {
                for (int j = 0; j < ny; ++j) B[j + (size_t)k * ldb] = out[dae->integrated[j]];
            } else if (cdyn__first_nonfinite(n, 1, out, n) >= 0) {
                return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE,
                                  "%s: column %d of B overflows at t = %g", fn, k, t);
            }
        }
    return CDYN_OK;
}
