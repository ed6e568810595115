/* The index-2 form of a quasi-linear DAE (docs/theory.md "Index-2
 * networks"; THEORY T1.7 with T3.1-T3.3): hydraulic networks whose
 * junctions have no storage, alone or mixed with index-1 parts.
 *
 * The hidden constraints G0 = beta^T F see the states with mass x and
 * some of the massless ones. The massless states they see, as many as the
 * massless columns of G_v have rank, are w; the others are the
 * multipliers z (the junction pressures): G0 does not move along their
 * directions (a multiplier alone, or with a shift of w: the pressure level
 * of two junctions joined by an orifice, which sees only their
 * difference), so they are fixed only by the rates. With B = P^T M_x
 * (r x r, r = rank M = the number of x):
 *
 *     B x' = P^T F(x, w, z, t),      G_x x' + G_w w' + G_t = 0.
 *
 * x and w are split as a null-space reduction (T1.2) by a pivoted QR of
 * G_v that takes w first: x_d (completing the set, one per constraint)
 * and w follow the integrated x_i through G0 = 0 (the Newton solve of
 * index 1, unchanged), so the constraints hold at every evaluation without
 * drift; (z, w') solve H = G_x B^-1 P^T F(x, w, z, t) + G_w w' + G_t = 0
 * with a second Newton solver (one step when F is affine in z, as in
 * hydraulics); then x' = B^-1 P^T F. The rates are certified as those of
 * index 1 (the multipliers' columns of [P^T M; G_v] are zero). Where H_z
 * is the one of the last evaluation (F affine in z), that Newton solve is
 * left out: the rates' refinement through the kept factorization moves z,
 * and the certificate decides (multipliers_by_refinement). Without w (a
 * pure index-2 network) every multiplier's direction is its own state. */
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

/* The states G0 is solved or integrated in: j < r are the x in the order
 * of B's columns (integrated, then the dependent x_d), r <= j < r + q - nz
 * the massless dependent states w (mixed index 1/2). */
static inline int x_state(const cdyn_dae *dae, int j)
{
    return j < dae->ny ? dae->integrated[j] : dae->algebraic[j - dae->ny];
}

/* How much of G0's rate a shift of the states along dir (n) leaves, against
 * what it may leave: for every constraint k,
 *     |g_k . dir| <= 64 eps sum_j s_kj |dir_j| + 1e-6 sum_{j in W} |g_kj dir_j|,
 * g = G_v (constraint_jac, every column), s_kj the rounding size of g_kj
 * (|g_kj| when beta is a selection, else sum_i |beta_ik F_v,ij|), W the
 * states other than `own`. For dir = e_own (a multiplier absent from G0)
 * this is the rounding test alone; the second term lets the compensating
 * shifts of the massless dependent states carry the error of a Jacobian
 * from differences (about 1e-8), far below the O(1) of a multiplier that
 * G0 does see. */
/* The rounding size s_kj of g_kj (direction_absent). */
static double rounding_size(const cdyn_dae *dae, int k, int j)
{
    int n = dae->n;
    if (dae->part.beta_is_selection) return fabs(dae->part.constraint_jac[k + (size_t)j * dae->q]);
    const double *b = dae->part.beta + (size_t)k * n, *fv = dae->force_jac + (size_t)j * n;
    double size = 0.0;
    for (int i = 0; i < n; ++i) size += fabs(b[i] * fv[i]);
    return size;
}

/* direction_absent for a direction with one non-zero, a at state `only`. */
static int state_absent(const cdyn_dae *dae, int only, double a, int own)
{
    int q = dae->q;
    const double *g = dae->part.constraint_jac + (size_t)only * q;
    for (int k = 0; k < q; ++k) {
        double leak = fabs(g[k] * a), shifts = only != own ? leak : 0.0;
        if (leak == 0.0) continue; /* the bound is >= 0: every input is finite */
        if (!(leak <= 64.0 * DBL_EPSILON * rounding_size(dae, k, only) * fabs(a) + 1e-6 * shifts))
            return 0;
    }
    return 1;
}

static int direction_absent(const cdyn_dae *dae, const double *dir, int own)
{
    int n = dae->n, q = dae->q, nonzeros = 0, only = 0;
    const double *G = dae->part.constraint_jac;
    for (int j = 0; j < n; ++j)
        if (dir[j] != 0.0) ++nonzeros, only = j;
    if (nonzeros == 1) return state_absent(dae, only, dir[only], own);
    for (int k = 0; k < q; ++k) {
        double leak = 0.0, rounding = 0.0, shifts = 0.0;
        for (int j = 0; j < n; ++j) {
            if (dir[j] == 0.0) continue;
            double g = G[k + (size_t)j * q];
            leak += g * dir[j];
            rounding += rounding_size(dae, k, j) * fabs(dir[j]);
            if (j != own) shifts += fabs(g * dir[j]);
        }
        if (!(fabs(leak) <= 64.0 * DBL_EPSILON * rounding + 1e-6 * shifts)) return 0;
    }
    return 1;
}

/* Is column j of G_v (constraint_jac) zero up to the rounding of the
 * products that form it? */
static int absent_from_constraints(cdyn_dae *dae, int j)
{
    double *e = dae->tau; /* n */
    memset(e, 0, sizeof(double) * (size_t)dae->n);
    e[j] = 1.0;
    return direction_absent(dae, e, j);
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
     * dependent [r, n), multipliers [n, n + nz); the object's lists change
     * only when it is complete */
    int *independent = dae->jpvt, *dependent = dae->jpvt + r, *multiplier = dae->jpvt + n;
    double *gv = p->constraint_jac;
    cdyn__dae_beta_t_jacobian(dae, n, dae->force_jac, n, gv, q);
    int massless = 0;
    for (int j = 0; j < n; ++j) massless += p->massless[j] != 0;
    if (massless != q)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: the DAE has index 2 at t = %g but not the index-2 form cdyn "
                          "reduces: %d states without mass for %d hidden constraints (one "
                          "per constraint needed)",
                          fn, t, massless, q);
    /* multipliers absent from G0 are zero columns (their rounding is not a
     * column the QR should rank); the massless states G0 does see are
     * preferred as dependent (split_ns, as for index 1): those of full rank
     * become w, solved from G0 with the states x_d that complete the set */
    double *absent = dae->bound; /* n flags */
    for (int j = 0; j < n; ++j) absent[j] = p->massless[j] && absent_from_constraints(dae, j);
    for (int j = 0; j < n; ++j)
        if (absent[j] != 0.0) memset(gv + (size_t)j * q, 0, sizeof(double) * (size_t)q);
    cdyn_status st = cdyn_nullspace_factor(p->split_ns, gv, q);
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: index 2 at t = %g: the hidden constraints do not determine "
                          "%d states: %s",
                          fn, t, q, cdyn_nullspace_last_error(p->split_ns));
    cdyn_nullspace_partition(p->split_ns, independent, dependent);
    int nz = 0;
    for (int j = 0; j < r; ++j)
        if (p->massless[independent[j]]) multiplier[nz++] = independent[j];
    if (nz == 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: index 2 at t = %g: the split of the hidden constraints "
                          "failed",
                          fn, t);
    /* each multiplier's direction: its column of the null-space basis
     * alpha = Pi [I; -W2^-1 W1] of G_v, on the states without mass (the
     * massed entries are zero to rounding: G_v restricted to the massless
     * states has rank q - nz, and W2 holds that many of them) */
    double *alpha = dae->aug, *dir = dae->scratch; /* n x r, n x nz (n x n each) */
    cdyn_nullspace_alpha(p->split_ns, alpha, n);
    memset(dir, 0, sizeof(double) * (size_t)n * nz);
    cdyn__dae_beta_t_jacobian(dae, n, dae->force_jac, n, gv, q); /* every column again */
    for (int l = 0, c = 0; c < r; ++c) {
        if (!p->massless[independent[c]]) continue;
        double *d = dir + (size_t)l * n;
        for (int j = 0; j < n; ++j) d[j] = p->massless[j] ? alpha[j + (size_t)c * n] : 0.0;
        d[independent[c]] = 1.0;
        if (!direction_absent(dae, d, independent[c]))
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: index 2 at t = %g: state %d, a multiplier, moves the "
                              "hidden constraints along every choice of the others",
                              fn, t, independent[c]);
        ++l;
    }
    /* algebraic: the dependent states with mass first (B's columns), then w */
    int *algebraic = dae->algebraic, na = 0;
    for (int k = 0; k < q; ++k)
        if (!p->massless[dependent[k]]) algebraic[na++] = dependent[k];
    for (int k = 0; k < q; ++k)
        if (p->massless[dependent[k]]) algebraic[na++] = dependent[k];
    memcpy(dae->multiplier, multiplier, sizeof(int) * (size_t)nz);
    memset(p->multiplier_dir, 0, sizeof(double) * (size_t)n * q);
    memcpy(p->multiplier_dir, dir, sizeof(double) * (size_t)n * nz);
    int ny = 0;
    for (int j = 0; j < r; ++j)
        if (!p->massless[independent[j]]) dae->integrated[ny++] = independent[j];
    dae->nz = nz;
    dae->ny = ny; /* r - nz: B's r columns are the integrated and the nz x_d */
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
    cdyn__dae_solve_reduced(dae, 1, xdot, r);
}

/* out (q) = G_x x' + G_w w' + G_t for x' (r, in B's column order) and the
 * rates w' (q - nz, NULL for none). */
static void constraint_rate(const cdyn_dae *dae, const double *xdot, const double *wdot,
                            double *out)
{
    int q = dae->q, r = dae->r, nw = q - dae->nz;
    for (int k = 0; k < q; ++k) out[k] = -dae->part.vec_q2[k];
    for (int j = 0; j < r + (wdot ? nw : 0); ++j) {
        const double *g = dae->part.constraint_jac + (size_t)x_state(dae, j) * q;
        double c = j < r ? xdot[j] : wdot[j - r];
        for (int k = 0; k < q; ++k) out[k] += g[k] * c;
    }
}

/* Move the multipliers of v_trial by dz (nz) along their directions (the
 * massless dependent states w follow, so that G0 keeps its value). */
static void shift_multipliers(cdyn_dae *dae, const double *dz)
{
    int n = dae->n, q = dae->q, nz = dae->nz;
    for (int l = 0; l < nz; ++l) {
        const double *d = dae->part.multiplier_dir + (size_t)l * n;
        dae->v_trial[dae->multiplier[l]] += dz[l];
        for (int k = nz; k < q && dz[l] != 0.0; ++k) {
            int w = dae->algebraic[k];
            dae->v_trial[w] += d[w] * dz[l];
        }
    }
}

/* Set the multipliers of v_trial to z (nz) by such a shift. */
static void set_multipliers(cdyn_dae *dae, const double *z)
{
    int nz = dae->nz;
    double *step = dae->part.multiplier_step;
    for (int l = 0; l < nz; ++l) step[l] = z[l] - dae->v_trial[dae->multiplier[l]];
    shift_multipliers(dae, step);
    for (int l = 0; l < nz; ++l) dae->v_trial[dae->multiplier[l]] = z[l];
}

/* F at v_trial with the multipliers at u[0..nz) into out (counted,
 * guarded: this runs inside the Newton callbacks). */
static int force_with_multipliers(cdyn_dae *dae, const double *u, double *out)
{
    set_multipliers(dae, u);
    dae->guard.in_callback++;
    dae->counters.force_evaluations++;
    int code = dae->force(dae->t_eval, dae->v_trial, out, dae->user);
    dae->guard.in_callback--;
    if (code != 0) dae->callback_code = code;
    return code;
}

/* Newton residual H(z, w') = G_x B^-1 P^T F(x, w, z, t) + G_w w' + G_t,
 * u = (z, w'). */
static int multiplier_residual(const double *u, double *H, void *user)
{
    cdyn_dae *dae = user;
    int code = force_with_multipliers(dae, u, dae->force_shift);
    if (code != 0) return code;
    double *xdot = dae->part.reduced_rhs, *ptf = dae->residual;
    rates_of_x(dae, dae->force_shift, ptf, xdot);
    constraint_rate(dae, xdot, u + dae->nz, H);
    return 0;
}

/* dF/dv along each multiplier's direction into fz (n x nz) from the
 * caller's dF/dv in dae->force_jac. */
static void directional_force_jacobian(cdyn_dae *dae, double *fz)
{
    int n = dae->n, q = dae->q, nz = dae->nz;
    for (int l = 0; l < nz; ++l) {
        const double *d = dae->part.multiplier_dir + (size_t)l * n;
        double *col = fz + (size_t)l * n;
        memcpy(col, dae->force_jac + (size_t)dae->multiplier[l] * n, sizeof(double) * (size_t)n);
        for (int k = nz; k < q; ++k) {
            int w = dae->algebraic[k];
            const double *fw = dae->force_jac + (size_t)w * n;
            for (int i = 0; d[w] != 0.0 && i < n; ++i) col[i] += fw[i] * d[w];
        }
    }
}

/* dF/dv along each multiplier's direction into fz (n x nz): from the
 * caller's dF/dv or by forward differences in z (steps as for the
 * algebraic states). The multipliers are left at u. */
static int force_along_multipliers(cdyn_dae *dae, const double *u, double *fz)
{
    int n = dae->n, nz = dae->nz;
    int code;
    if (dae->jacobian) {
        set_multipliers(dae, u);
        dae->guard.in_callback++;
        dae->counters.jacobian_evaluations++;
        code = dae->jacobian(dae->t_eval, dae->v_trial, dae->force_jac, n, dae->user);
        dae->guard.in_callback--;
        if (code != 0) {
            dae->callback_code = code;
            return code;
        }
        directional_force_jacobian(dae, fz);
        return 0;
    }
    double *base = dae->tau, *shifted = dae->force_shift, *zs = dae->row_max;
    code = force_with_multipliers(dae, u, base);
    memcpy(zs, u, sizeof(double) * (size_t)nz);
    for (int l = 0; code == 0 && l < nz; ++l) {
        double step = dae->fd_step * cdyn__dae_step_scale(dae, dae->v_trial, dae->multiplier[l]);
        double h = 0.0;
        for (int tries = 0; code == 0 && step > 0.0; ++tries) {
            zs[l] = u[l] + step;
            h = zs[l] - u[l];
            code = force_with_multipliers(dae, zs, shifted);
            zs[l] = u[l];
            /* a step F's rounding swallows grows (cdyn__dae_next_step) */
            if (code == 0) step = cdyn__dae_next_step(n, base, shifted, step, tries);
        }
        for (int i = 0; code == 0 && i < n; ++i) fz[i + (size_t)l * n] = (shifted[i] - base[i]) / h;
    }
    set_multipliers(dae, u);
    return code;
}

/* With P^T F_z (F_z from fz, n x nz) into part.fz_next: are it and G_x
 * (part.constraint_jac) bit for bit those H_z and X_z were last formed
 * from (part.hz_last)? */
static int multiplier_jacobian_unchanged(cdyn_dae *dae, const double *fz)
{
    int n = dae->n, q = dae->q, r = dae->r, nz = dae->nz;
    cdyn__dae_part *p = &dae->part;
    cdyn__dae_range_t(dae, nz, fz, n, 1.0, p->fz_next, r);
    int same = p->hz_valid &&
               memcmp(p->fz_next, p->range_t_fz, sizeof(double) * (size_t)r * nz) == 0;
    for (int j = 0; same && j < r; ++j)
        same = memcmp(p->gx_last + (size_t)j * q, p->constraint_jac + (size_t)x_state(dae, j) * q,
                      sizeof(double) * (size_t)q) == 0;
    return same;
}

/* Newton Jacobian [H_z, G_w] with H_z = G_x B^-1 P^T F_z (F_z along the
 * multipliers' directions); B^-1 P^T F_z is kept in
 * part.rate_of_multiplier. */
static int multiplier_jacobian(const double *u, double *J, int ldj, void *user)
{
    cdyn_dae *dae = user;
    int q = dae->q, r = dae->r, nz = dae->nz;
    double *fz = dae->scratch; /* n x nz */
    int code = force_along_multipliers(dae, u, fz);
    if (code != 0) return code;
    cdyn__dae_part *p = &dae->part;
    double *x_z = p->rate_of_multiplier; /* r x nz */
    size_t fz_bytes = sizeof(double) * (size_t)r * nz;
    if (!multiplier_jacobian_unchanged(dae, fz)) {
        /* X_z = B^-1 P^T F_z, H_z = G_x X_z (else both as last time) */
        memcpy(p->range_t_fz, p->fz_next, fz_bytes);
        memcpy(x_z, p->range_t_fz, fz_bytes);
        cdyn__dae_solve_reduced(dae, nz, x_z, r);
        for (int j = 0; j < r; ++j)
            memcpy(p->gx_last + (size_t)j * q, p->constraint_jac + (size_t)x_state(dae, j) * q,
                   sizeof(double) * (size_t)q);
        memset(p->hz_last, 0, sizeof(double) * (size_t)q * nz);
        for (int l = 0; l < nz; ++l) {
            double *col = p->hz_last + (size_t)l * q;
            for (int j = 0; j < r; ++j) {
                const double *g = p->gx_last + (size_t)j * q;
                double c = x_z[j + (size_t)l * r];
                for (int k = 0; k < q; ++k) col[k] += g[k] * c;
            }
        }
        p->hz_valid = 1;
    }
    for (int l = 0; l < nz; ++l)
        memcpy(J + (size_t)l * ldj, p->hz_last + (size_t)l * q, sizeof(double) * (size_t)q);
    for (int l = nz; l < q; ++l) /* G_w: H is affine in w' */
        memcpy(J + (size_t)l * ldj, p->constraint_jac + (size_t)x_state(dae, r + l - nz) * q,
               sizeof(double) * (size_t)q);
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

/* Without dF/dv: the columns of G_v for x and w by central differences of
 * G0 (2 (r + q - nz) evaluations of F; the constraints are affine in x in
 * hydraulics, where this is exact to rounding, and a forward difference's
 * 1e-8 would reach the rates directly, since every dependent state x_d has
 * mass), and one shift of all multipliers together along their directions
 * to confirm that G0 does not see them (direction_absent's test, with the
 * differenced columns). F(v) is in force_val. The columns' differences
 * of F also size its terms in x and w for dF/dt's differences
 * (cdyn__dae_terms_of; the multipliers' are not needed: the hidden
 * constraints do not see them). */
static cdyn_status constraint_differences(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r, nz = dae->nz;
    cdyn__dae_part *p = &dae->part;
    double *v = dae->v_trial, *up = dae->force_shift, *down = dae->force_dt;
    double *g_up = p->vec_q, *g_down = dae->residual; /* q each */
    double *terms = cdyn__dae_time_terms(dae);
    if (terms) memset(terms, 0, sizeof(double) * (size_t)n);
    memset(p->constraint_jac, 0, sizeof(double) * (size_t)q * n);
    for (int j = 0; j < r + q - nz; ++j) {
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
        for (int i = 0; terms && i < n; ++i)
            terms[i] += fabs(up[i] - down[i]) / (ahead + behind) * fabs(saved);
    }
    /* saved (n), shift (n), dz (nz): free until the certificate */
    double *saved = dae->bound, *shift = dae->tau, *dz = p->multiplier_step;
    memcpy(saved, v, sizeof(double) * (size_t)n);
    for (int l = 0; l < nz; ++l)
        dz[l] = INDEX2_G_STEP * cdyn__dae_step_scale(dae, v, dae->multiplier[l]);
    shift_multipliers(dae, dz);
    cdyn_status st = cdyn__dae_force(dae, fn, t, v, up);
    for (int j = 0; j < n; ++j) { /* the shift taken, then v as it was */
        shift[j] = v[j] - saved[j];
        v[j] = saved[j];
    }
    if (st != CDYN_OK) return st;
    for (int k = 0; k < q; ++k) { /* beta^T (F(v + shift) - F(v)) against its rounding */
        const double *b = p->beta + (size_t)k * n;
        double change = 0.0, size = 0.0, shifts = 0.0;
        for (int i = 0; i < n; ++i) {
            change += b[i] * (up[i] - dae->force_val[i]);
            size += fabs(b[i]) * (fabs(up[i]) + fabs(dae->force_val[i]));
        }
        for (int i = nz; i < q; ++i) {
            int w = dae->algebraic[i];
            shifts += fabs(p->constraint_jac[k + (size_t)w * q] * shift[w]);
        }
        if (!(fabs(change) <= 64.0 * DBL_EPSILON * size + 1e-6 * shifts))
            return multiplier_appears(dae, fn, t, -1);
    }
    return CDYN_OK;
}

/* G_v (multipliers' columns zero), -G_t (part.vec_q2) and the LU of B at
 * v_trial, whose multiplier entries are the warm start (G0 does not move
 * along their directions). */
static cdyn_status constraint_data(cdyn_dae *dae, const char *fn, double t)
{
    int n = dae->n, q = dae->q, r = dae->r, nz = dae->nz;
    cdyn__dae_part *p = &dae->part;
    cdyn_status st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st == CDYN_OK && dae->jacobian) {
        st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_trial);
        if (st != CDYN_OK) return st;
        cdyn__dae_beta_t_jacobian(dae, n, dae->force_jac, n, p->constraint_jac, q);
        for (int l = 0; l < nz; ++l) {
            /* without w every direction is the multiplier's own unit vector */
            int z = dae->multiplier[l];
            int absent = q == nz ? state_absent(dae, z, 1.0, z)
                                 : direction_absent(dae, p->multiplier_dir + (size_t)l * n, z);
            if (!absent) return multiplier_appears(dae, fn, t, z);
        }
        for (int l = 0; l < nz; ++l)
            memset(p->constraint_jac + (size_t)dae->multiplier[l] * q, 0,
                   sizeof(double) * (size_t)q);
    } else if (st == CDYN_OK) {
        st = constraint_differences(dae, fn, t);
    }
    if (st == CDYN_OK) {
        const double *terms = dae->jacobian
                                  ? cdyn__dae_terms_of(dae, dae->force_jac, dae->v_trial)
                                  : cdyn__dae_time_terms(dae); /* constraint_differences' */
        st = cdyn__dae_force_time(dae, fn, t, dae->v_trial, terms);
    }
    if (st != CDYN_OK) return st;
    if (cdyn__first_nonfinite(q, n, p->constraint_jac, q) >= 0)
        return cdyn__fail(dae->msg, CDYN_ERR_NONFINITE, "%s: dG0/dv overflowed at t = %g", fn, t);
    cdyn__dae_beta_t(dae, 1, dae->force_dt, n, -1.0, p->vec_q2, q);
    if (dae->reduced_factored) return CDYN_OK; /* B is fixed by the split (constant M) */
    for (int j = 0; j < r; ++j)
        memcpy(p->reduced + (size_t)j * r, p->range_t_mass + (size_t)x_state(dae, j) * r,
               sizeof(double) * (size_t)r);
    if (cdyn__dae_factor_reduced(dae) != 0)
        return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                          "%s: P^T M of the states with mass is singular at t = %g", fn, t);
    dae->reduced_factored = 1;
    return CDYN_OK;
}

/* A factorization of [H_z, G_w] at the solution u = (z, w'), at full rank. */
static cdyn_status factor_at_solution(cdyn_dae *dae, const char *fn, double t, const double *u)
{
    int q = dae->q;
    if (cdyn__newton_solution_factored(dae->newton_z)) return CDYN_OK;
    double *hz = dae->part.ga;
    dae->t_eval = t;
    if (multiplier_jacobian(u, hz, q, dae) != 0)
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
 * rounding is part of the solution's, not of the data). The balances
 * (bottom rows, G_v v' = -G_t) are then given the rounding the top rows
 * leave in the rates they determine: rate j is resolved only to
 * eps * bound_i / |(P^T M)_ij| by a top row i, so a balance whose rates
 * are all that small (a network at rest: every rate is the rounding of
 * pressure terms that cancel) is judged against that resolution, not
 * against its own rounding-sized rates, which in some units made the
 * certificate fail at every steady state (found by a review). */
static double backward_error(cdyn_dae *dae, const double *vdot, const double *ptf)
{
    int n = dae->n, r = dae->r, nz = dae->nz;
    cdyn__dae_rates_backward_error(dae, vdot, ptf);
    const cdyn__dae_part *p = &dae->part;
    const double *ptfz = p->range_t_fz, *res = dae->residual;
    double *bound = dae->bound, worst = 0.0;
    for (int l = 0; l < nz; ++l) {
        double z = fabs(dae->v_trial[dae->multiplier[l]]);
        for (int i = 0; i < r; ++i) bound[i] += fabs(ptfz[i + (size_t)l * r]) * z;
    }
    for (int j = 0; j < n; ++j) {
        double resolution = 0.0; /* eps * max_i bound_i / |(P^T M)_ij| */
        for (int e = p->top_start[j]; e < p->top_start[j + 1]; ++e)
            resolution = fmax(resolution, bound[p->top_row[e]] / fabs(p->top_value[e]));
        resolution *= DBL_EPSILON;
        for (int e = p->bottom_start[j]; e < p->bottom_start[j + 1]; ++e)
            bound[r + p->bottom_row[e]] += fabs(p->bottom_value[e]) * resolution;
    }
    for (int i = 0; i < n; ++i) {
        double w = bound[i] > 0.0 ? fabs(res[i]) / bound[i] : (res[i] == 0.0 ? 0.0 : INFINITY);
        worst = w > worst || isnan(w) ? w : worst;
    }
    return worst;
}

/* One more step on G0 = 0 for the dependent states with the Newton
 * solver's last factorization: the solve stops once its predicted
 * correction is below the tolerance (1e-10 relative by default) without
 * taking it; taken, it leaves the balances of an affine G0 (the junctions)
 * met to rounding. After a solve (within_tolerance) the step is taken
 * only if it is within the solve's tolerances: a solve that ended with G0
 * at its rounding and a correction far beyond them (a state that enters
 * G0 only through the rounding of the null basis, a slope of 1e-15) has
 * no step to polish, and taking it moved that state by 0.25 and broke G0
 * at 9 % of its terms. Without it (a chord step from the warm start), the
 * Newton solve that follows judges where the step ends. */
static cdyn_status polish_dependent(cdyn_dae *dae, const char *fn, double t,
                                    int within_tolerance)
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
    if (within_tolerance) {
        const double *tol = cdyn__newton_tolerance(dae->newton);
        for (int k = 0; k < q; ++k)
            if (!(fabs(g[k]) <= tol[k])) return CDYN_OK;
    }
    for (int k = 0; k < q; ++k) dae->v_trial[dae->algebraic[k]] -= g[k];
    return CDYN_OK;
}

/* What G0 may be once the multipliers have moved (part.g0_bound): twice
 * the larger of the G0 solve's residual tolerance and |G0| at the state
 * the multipliers start from (F there in force_val); and w there
 * (part.w_start). */
static void bound_constraints(cdyn_dae *dae)
{
    int n = dae->n, q = dae->q, nz = dae->nz;
    double *bound = dae->part.g0_bound;
    for (int k = nz; k < q; ++k) dae->part.w_start[k - nz] = dae->v_trial[dae->algebraic[k]];
    const double *tol_g = cdyn__newton_residual_tolerance(dae->newton);
    cdyn__dae_beta_t(dae, 1, dae->force_val, n, 1.0, bound, q);
    for (int k = 0; k < q; ++k) bound[k] = 2.0 * fmax(fabs(bound[k]), tol_g[k]);
}

/* G0 at the state the multipliers moved to (F there given) within
 * part.g0_bound, the rounding of F and, as in direction_absent, 1e-6 of
 * the terms the shift of w brought (directions from a differenced G_v): a
 * multiplier whose coefficients in G0 were below its rounding where the
 * split and the warm start saw it (differences find such a column exactly
 * 0) can still move G0 once the rates send it far enough; the form does
 * not hold there. */
static cdyn_status constraints_still_hold(cdyn_dae *dae, const char *fn, double t,
                                          const double *F)
{
    int n = dae->n, q = dae->q, nz = dae->nz;
    const double *bound = dae->part.g0_bound;
    for (int k = 0; k < q; ++k) {
        double g = 0.0, size = 0.0, shifts = 0.0;
        for (int i = nz; i < q; ++i) {
            int w = dae->algebraic[i];
            shifts += fabs(dae->part.constraint_jac[k + (size_t)w * q] *
                           (dae->v_trial[w] - dae->part.w_start[i - nz]));
        }
        if (dae->part.beta_is_selection) {
            int i = dae->part.beta_rows[k];
            g = dae->part.beta_signs[k] * F[i];
            size = fabs(F[i]);
        } else {
            const double *b = dae->part.beta + (size_t)k * n;
            for (int i = 0; i < n; ++i) {
                g += b[i] * F[i];
                size += fabs(b[i] * F[i]);
            }
        }
        if (!(fabs(g) <= bound[k] + 64.0 * DBL_EPSILON * size + 1e-6 * shifts))
            return cdyn__fail(dae->msg, CDYN_ERR_SINGULAR,
                              "%s: at t = %g the multipliers moved to where the hidden "
                              "constraints see them (G0[%d] = %.3g against %.3g): the index-2 "
                              "form does not hold there",
                              fn, t, k, g, bound[k]);
    }
    return CDYN_OK;
}

/* vdot (n) from x' (r) and w' (q - nz); the multipliers' entries 0. */
static void assemble_rates(const cdyn_dae *dae, const double *xdot, const double *wdot,
                           double *vdot)
{
    int r = dae->r, nw = dae->q - dae->nz;
    memset(vdot, 0, sizeof(double) * (size_t)dae->n);
    for (int j = 0; j < r; ++j) vdot[x_state(dae, j)] = xdot[j];
    for (int i = 0; i < nw; ++i) vdot[x_state(dae, r + i)] = wdot[i];
}

/* (z, w') from the multipliers' Newton solve, started from v_trial's
 * multipliers and the last w'; w (when there is any) solved again at the
 * new z; [H_z, G_w] factored at the solution. z in v_trial, w' in
 * part.rate_w. */
static cdyn_status solve_multipliers(cdyn_dae *dae, const char *fn, double t)
{
    int q = dae->q, r = dae->r, nz = dae->nz, nw = q - nz;
    double *u = dae->part.vec_q, *wdot = dae->part.rate_w;
    for (int l = 0; l < nz; ++l) u[l] = dae->v_trial[dae->multiplier[l]];
    for (int i = 0; i < nw; ++i) /* w' from the last evaluation (H is affine in w') */
        u[nz + i] = dae->state_valid ? dae->vdot_last[x_state(dae, r + i)] : 0.0;
    dae->t_eval = t;
    cdyn_status st =
        cdyn_newton_solve(dae->newton_z, multiplier_residual, multiplier_jacobian, dae, u);
    set_multipliers(dae, u);
    memcpy(wdot, u + nz, sizeof(double) * (size_t)nw);
    const double *z_tolerance = cdyn__newton_tolerance(dae->newton_z);
    for (int l = 0; l < nz; ++l) dae->resolution[dae->multiplier[l]] = z_tolerance[l];
    if (st != CDYN_OK)
        return cdyn__fail(dae->msg, st, "%s: multipliers at t = %g: %s", fn, t,
                          cdyn_newton_last_error(dae->newton_z));
    if (nw > 0) { /* w moved with the multipliers: G0 = 0 again at the new z */
        st = cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
        if (st == CDYN_OK) st = constraints_still_hold(dae, fn, t, dae->force_val);
        if (st != CDYN_OK) return st;
        double *x = dae->part.multiplier_step;
        for (int k = 0; k < q; ++k) x[k] = dae->v_trial[dae->algebraic[k]];
        st = cdyn__dae_solve_algebraic(dae, fn, t, x);
        if (st != CDYN_OK) return st;
    }
    memcpy(u + nz, wdot, sizeof(double) * (size_t)nw);
    for (int l = 0; l < nz; ++l) u[l] = dae->v_trial[dae->multiplier[l]];
    return factor_at_solution(dae, fn, t, u);
}

/* x' = B^-1 P^T F(x, z, t) and w' into vdot, certified on
 * [P^T M; G_v] v' = [P^T F; -G_t] (the multipliers' columns are zero),
 * with up to `steps` steps of refinement of (x', z, w') through the
 * factorizations of B and [H_z, G_w]: dx0 = B^-1 res_top,
 * (dz, dw') = [H_z, G_w]^-1 (res_bottom - G_x dx0),
 * dx' = dx0 + (B^-1 P^T F_z) dz; F is evaluated again at the new z. With
 * `have_force` F at v_trial is already in force_val. CDYN_ERR_SINGULAR
 * when the certificate fails or G0 no longer holds where z ended. */
static cdyn_status certified_rates(cdyn_dae *dae, const char *fn, double t, double *vdot,
                                   int steps, int have_force)
{
    int n = dae->n, q = dae->q, r = dae->r, nz = dae->nz, nw = q - nz;
    double *ptf = dae->force_shift, *xdot = dae->part.reduced_rhs, *du = dae->part.vec_q;
    double *dx = dae->tau, *x_z = dae->part.rate_of_multiplier, *wdot = dae->part.rate_w;
    cdyn_status st =
        have_force ? CDYN_OK : cdyn__dae_force(dae, fn, t, dae->v_trial, dae->force_val);
    if (st != CDYN_OK) return st;
    rates_of_x(dae, dae->force_val, ptf, xdot);
    double tolerance = cdyn__kkt_backward_tolerance(n, 0), omega = INFINITY;
    for (int step = 0;; ++step) {
        assemble_rates(dae, xdot, wdot, vdot);
        omega = backward_error(dae, vdot, ptf);
        if (step == steps || !(omega > tolerance) || !isfinite(omega)) break;
        const double *res_top = dae->residual, *res_bottom = dae->residual + r;
        memcpy(dx, res_top, sizeof(double) * (size_t)r);
        cdyn__dae_solve_reduced(dae, 1, dx, r);
        constraint_rate(dae, dx, NULL, du); /* G_x dx0 - G_t */
        for (int k = 0; k < q; ++k) du[k] = res_bottom[k] - (du[k] + dae->part.vec_q2[k]);
        cdyn__newton_apply(dae->newton_z, du, du);
        for (int j = 0; j < r; ++j) {
            double c = dx[j];
            for (int l = 0; l < nz; ++l) c += x_z[j + (size_t)l * r] * du[l];
            xdot[j] += c;
        }
        for (int i = 0; i < nw; ++i) wdot[i] += du[nz + i];
        shift_multipliers(dae, du);
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
    /* G0 where the steps left z (and w with it; F there in force_val): the
     * certificate does not see the massless rows, and a step need not be
     * small (from the warm start when the Newton solve is left out; from a
     * far solution of an ill-scaled H, fuzz_dae) */
    return constraints_still_hold(dae, fn, t, dae->force_val);
}

/* May the multipliers' Newton solve be left out? When the last evaluation
 * ended with [H_z, G_w] factored at its solution (part.hz_factored) and
 * H_z at the warm start is bit for bit that one (F affine in z with
 * affine balances: the hydraulic case; dF/dv at v_trial, as
 * constraint_data left it), the rates' refinement through that
 * factorization is Newton's method on H from the warm start, and the
 * rates' certificate judges where it ends, as it judges the Newton
 * solve's result. Only without massless dependent states w (they would
 * need G0 solved again at the new z). The multipliers' tolerances
 * (dae->resolution, learn_magnitudes) stay those of the last Newton
 * solve. */
static int multipliers_by_refinement(cdyn_dae *dae)
{
    if (!dae->part.hz_factored || !dae->jacobian || dae->q != dae->nz) return 0;
    directional_force_jacobian(dae, dae->scratch);
    return multiplier_jacobian_unchanged(dae, dae->scratch);
}

cdyn_status cdyn__dae_index2_dependent(cdyn_dae *dae, const char *fn, double t, double *x)
{
    int q = dae->q;
    cdyn__dae_part *p = &dae->part;
    p->data_at_solution = 0;
    if (!dae->jacobian || !p->g0_factored) return cdyn__dae_solve_algebraic(dae, fn, t, x);
    /* a chord step from the warm start (v_trial holds it) and the polish
     * step, with the factorization the last evaluations left; F and G_v
     * where they end (x may be part.vec_q, their scratch: set below) */
    cdyn_status st = polish_dependent(dae, fn, t, 0);
    if (st == CDYN_OK) st = polish_dependent(dae, fn, t, 0);
    if (st == CDYN_OK) st = constraint_data(dae, fn, t);
    if (st == CDYN_OK) {
        /* the Newton solve judges that point as it judges any start: with
         * G and J there, from the constraint data; a step away from it
         * calls the model, and the rates then redo the data */
        for (int k = 0; k < q; ++k) p->g0_at[k] = x[k] = dae->v_trial[dae->algebraic[k]];
        long jacobians = dae->counters.jacobian_evaluations;
        p->g0_at_hand = 1;
        cdyn__newton_set_chord(dae->newton, 0); /* J is at hand: no chord steps */
        st = cdyn__dae_solve_algebraic(dae, fn, t, x);
        cdyn__newton_set_chord(dae->newton, 1);
        p->g0_at_hand = 0;
        p->data_at_solution = st == CDYN_OK &&
                              dae->counters.jacobian_evaluations == jacobians &&
                              memcmp(x, p->g0_at, sizeof(double) * (size_t)q) == 0;
        if (st == CDYN_OK) return CDYN_OK;
    }
    /* the plain solve from the warm start, with its own verdict */
    for (int k = 0; k < q; ++k) x[k] = dae->v_last[dae->algebraic[k]];
    for (int k = 0; k < q; ++k) dae->v_trial[dae->algebraic[k]] = x[k];
    return cdyn__dae_solve_algebraic(dae, fn, t, x);
}

cdyn_status cdyn__dae_index2_rates(cdyn_dae *dae, const char *fn, double t, double *vdot)
{
    int n = dae->n, q = dae->q, r = dae->r, nz = dae->nz, nw = q - nz;
    cdyn_status st = CDYN_OK;
    if (!dae->part.data_at_solution) { /* else cdyn__dae_index2_dependent left them */
        st = polish_dependent(dae, fn, t, 1);
        if (st == CDYN_OK) st = constraint_data(dae, fn, t);
    }
    dae->part.data_at_solution = 0;
    if (st != CDYN_OK) return st;
    bound_constraints(dae);
    if (multipliers_by_refinement(dae)) {
        /* the warm start's F is force_val (constraint_data); up to three
         * steps: one from the warm start, two of refinement as after the
         * Newton solve. Where the certificate or G0 fails, the Newton
         * solve takes over from the warm start (callback failures are
         * reported as they are) */
        dae->part.hz_factored = 0;
        double *z0 = dae->part.multiplier_start;
        for (int l = 0; l < nz; ++l) z0[l] = dae->v_trial[dae->multiplier[l]];
        st = certified_rates(dae, fn, t, vdot, 3, 1);
        if (st != CDYN_ERR_SINGULAR && st != CDYN_ERR_NONFINITE) {
            dae->part.hz_factored = st == CDYN_OK;
            return st;
        }
        set_multipliers(dae, z0);
    }
    dae->part.hz_factored = 0;
    st = solve_multipliers(dae, fn, t);
    if (st == CDYN_OK) st = certified_rates(dae, fn, t, vdot, 2, 0);
    if (st != CDYN_OK) return st;
    /* the rates of the massless states the multipliers move are not
     * determined (only those of w relative to the multipliers are) */
    for (int l = 0; l < nz; ++l) {
        const double *d = dae->part.multiplier_dir + (size_t)l * n;
        for (int i = 0; i < nw; ++i)
            if (d[x_state(dae, r + i)] != 0.0) vdot[x_state(dae, r + i)] = 0.0;
    }
    dae->part.hz_factored = 1;
    return CDYN_OK;
}

/* d ydot/dy by the implicit function theorem (the evaluation at y must be
 * the last one, with the Jacobian callback). Along a column e_j of y the
 * dependent states (x_d and w) move by D = -G_d^-1 G_i (the G0 solve's
 * factorization), so ds = [e_j; D e_j] over s = (y, x_d, w).
 * Differentiating B x' = P^T F(s, z, t) and the constraints' rate
 * G_x x' + G_w w' + G_t = 0 at fixed t (the multipliers held along their
 * directions, z' = 0):
 *     B dx' = P^T (F_s ds + F_z dz),   G_x dx' + G_w dw' + K ds = 0,
 * K = d/ds (G_s s' + G_t) at s' (zero for affine balances), hence
 *     [H_z, G_w] (dz, dw') = -(G_x B^-1 P^T F_s ds + K ds),
 *     dx' = B^-1 P^T F_s ds + X_z dz,
 * with H_z = G_x X_z and X_z = B^-1 P^T F_z as the multipliers' solve left
 * them at the solution. ydot's rows are the first ny of dx'. */
static cdyn_status exact_jacobian(cdyn_dae *dae, const char *fn, double t, double *J)
{
    int n = dae->n, q = dae->q, r = dae->r, ny = dae->ny, nz = dae->nz, ns = ny + q;
    const cdyn__dae_part *p = &dae->part;
    double *diff = dae->prod, *ks = dae->aug, *d = dae->aug_rhs, two_h = 0.0;
    cdyn_status st = cdyn__dae_jacobian_along_motion(dae, fn, t, diff, &two_h);
    if (st != CDYN_OK) return st;
    for (int j = 0; j < ns; ++j) /* K (q x ns, in the order of s) */
        cdyn__dae_beta_t(dae, 1, diff + (size_t)x_state(dae, j) * n, n, 1.0 / two_h,
                         ks + (size_t)j * q, q);
    st = cdyn__dae_force_jacobian(dae, fn, t, dae->v_last); /* F_v at the state */
    if (st != CDYN_OK) return st;
    for (int j = 0; j < ny; ++j) /* D = -G_d^-1 G_i (q x ny) */
        for (int k = 0; k < q; ++k)
            d[k + (size_t)j * q] = -p->constraint_jac[k + (size_t)dae->integrated[j] * q];
    cdyn__newton_apply_many(dae->newton, d, q, ny, d, q);
    double *ds = dae->origin, *u = dae->scratch, *s = dae->residual, *g = dae->bound;
    const double *x_z = p->rate_of_multiplier;
    for (int j = 0; j < ny; ++j) {
        for (int l = 0; l < ns; ++l) ds[l] = l < ny ? (l == j) : d[(l - ny) + (size_t)j * q];
        memset(u, 0, sizeof(double) * (size_t)n); /* F_s ds */
        for (int l = 0; l < ns; ++l) {
            const double *col = dae->force_jac + (size_t)x_state(dae, l) * n;
            for (int i = 0; ds[l] != 0.0 && i < n; ++i) u[i] += col[i] * ds[l];
        }
        rates_of_x(dae, u, dae->force_shift, s); /* s = B^-1 P^T F_s ds */
        for (int k = 0; k < q; ++k) g[k] = 0.0; /* -(G_x s + K ds) */
        for (int l = 0; l < ns; ++l) {
            const double *kl = ks + (size_t)l * q;
            for (int k = 0; k < q; ++k) g[k] -= kl[k] * ds[l];
        }
        for (int l = 0; l < r; ++l) {
            const double *gx = p->constraint_jac + (size_t)x_state(dae, l) * q;
            for (int k = 0; k < q; ++k) g[k] -= gx[k] * s[l];
        }
        cdyn__newton_apply(dae->newton_z, g, g); /* (dz, dw') */
        for (int i = 0; i < ny; ++i) {
            double c = s[i];
            for (int l = 0; l < nz; ++l) c += x_z[i + (size_t)l * r] * g[l];
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
