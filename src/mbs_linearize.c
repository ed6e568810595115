/* Linearization of a mechanism's equations of motion: the Jacobian of the
 * right-hand side y' = f(t, y), y = [q; q'] (THEORY T4, any formulation),
 * and the state matrix of the minimum-order (partitioned) system
 * z' = f(t, z), z = [q_ind; q'_ind] (T4.10), whose eigenvalues are the
 * mechanism's linear modes at an operating point, with its input matrix
 * for forces that depend on inputs u (exact: q'' is linear in Q).
 *
 * Both rest on extrapolated central differences: for each column,
 * D(h) = (g(x + h e_j) - g(x - h e_j)) / 2h at h and 2h, and
 * (4 D(h) - D(2h)) / 3, whose truncation error is O(h^4), with a first
 * step of 1e-3 of the state's magnitude. That magnitude says nothing of
 * the scale g varies on (an angle of many turns stepped by 120 rad,
 * friction regularized over 1e-4 m/s stepped by 1e-3), so each column's
 * extrapolated difference is checked against D(h / LIN_RATIO) and the
 * step refined until they agree (rates_agree, level_verdict). g is a
 * right-hand side itself only for
 * the pseudo-inverse below full rank and where a column's solve below is
 * not certified (the partitioned right-hand side then carries the
 * rounding of a Newton solve, about its tolerance, 1e-10 relative, and
 * that over h makes about 1e-7); otherwise the model's terms. In the
 * Lagrange form (and the pseudo-inverse at full rank) x = [q''; lambda] solves
 * K(y) x = b(y), K = [M Phi_q^T; Phi_q 0], b = [Q; s] (T4.4-T4.6), and
 * differentiating along e_j gives K dx/dy_j = db - dK x at fixed x: the
 * differences are those of the model's terms, and each column is one
 * solve with the factors of the evaluation at y
 * (cdyn__constraint_solve_again), in place of 8 right-hand sides each with
 * its own factorization. The penalty form (T4.8) has the same
 * M q'' + Phi_q^T lambda = Q with lambda = alpha (Phi_q q'' - s), so the
 * same [top; bottom] = db - dK x goes to its own matrix:
 * (M + Phi_q^T alpha Phi_q) dq'' = top + Phi_q^T alpha bottom.
 *
 * The partitioned form's state matrix goes through the chain rule the same
 * way. Its right-hand side is q''(y(z)) at the consistent state y(z), q''
 * from K x = [Q; xi] with no stabilizer (consistent states need none), so
 * column j is dq''/dy u_j with u_j = dy/dz_j, the direction a change of
 * z_j moves the consistent state in (THEORY T4.10): for a speed, u =
 * [0; V e_k] (V the null-space basis with I on the independent
 * coordinates, exact); for a coordinate, u = [V e_k; dq'] with the
 * dependent speeds' change dq' from Phi_q dq' = -d(Phi_q q' + Phi_t)/dq
 * V e_k at fixed q' (a difference of Phi' along V e_k). The extrapolated
 * differences of M, Phi_q, Q and xi along u then give db - dK x, solved
 * with the partition's factors of the evaluation at z: no Newton solve in
 * the differences, whose noise (about its tolerance over h) was the 1e-7
 * of differencing the partitioned right-hand side itself.
 */
#include "constraint_internal.h"
#include "linalg.h"
#include "mbs_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define LIN_STEP 1e-3
#define LIN_RATIO 16.618033988749895 /* 16 + 1/phi: far from any fraction of small terms */
#define LIN_LEVELS 8                 /* the step may fall by LIN_RATIO^7, 3.5e8 */
#define LIN_AGREE 1e-4               /* the rates' agreement, of the sizes of their parts */
#define TERM_ROUNDING (16.0 * DBL_EPSILON) /* of a model term, relative to its parts */
#define RHS_ROUNDING 1e-10           /* of a right-hand side (the dependent Newton's tolerance) */

typedef cdyn_status (*rhs_fn)(cdyn_mbs *mbs, double t, const double *x, double *fx);

/* The magnitude of entry j of x (size 2h: coordinates, then speeds): the
 * caller's scale, else |x_j|, else the largest |x| of its half; a speed
 * half that is all zero takes the coordinates' magnitude per second. */
static double magnitude(const double *x, const double *scale, int half, int j)
{
    if (scale) return scale[j];
    if (x[j] != 0.0) return fabs(x[j]);
    int lo = j < half ? 0 : half;
    double largest = 0.0;
    for (int i = lo; i < lo + half; ++i) largest = fmax(largest, fabs(x[i]));
    if (largest > 0.0) return largest;
    if (lo == half)
        for (int i = 0; i < half; ++i) largest = fmax(largest, fabs(x[i]));
    return largest > 0.0 ? largest : 1.0;
}

/* CDYN_ERR_ARG unless scale (size values; may be NULL) is finite and > 0. */
static cdyn_status check_scale(cdyn_mbs *mbs, const char *fn, int size, const double *scale)
{
    for (int j = 0; j < size && scale; ++j)
        if (!(scale[j] > 0.0) || isinf(scale[j]))
            return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: scale[%d] = %g is not finite and > 0",
                              fn, j, scale[j]);
    return CDYN_OK;
}

/* The largest magnitude the step of column j may take (of x = [q; q'] or
 * [q_ind; q'_ind], half coordinates; map: their indices in q, NULL for
 * q itself): cdyn__mbs_variation_scale of a coordinate, none for a speed. */
static double step_cap(const cdyn_mbs *mbs, const int *map, int half, int j)
{
    return j < half ? cdyn__mbs_variation_scale(mbs, map ? map[j] : j) : INFINITY;
}

/* The step of column j: LIN_STEP times its magnitude (at most cap unless
 * the caller scaled it), made representable. */
static double column_step(const double *x, const double *scale, int half, int j, double cap)
{
    double size = magnitude(x, scale, half, j);
    if (!scale && size > cap) size = cap;
    double h = LIN_STEP * size;
    volatile double ahead = x[j] + h;
    return ahead - x[j];
}

/* What the evaluations commit and a failed call must give back: the
 * reactions, the residuals (with the state of those still to be evaluated,
 * in mbs->report_saved), the partition's warm start and verdict. */
typedef struct {
    double *reaction_force, *reaction_mult, *y_part;
    int has_reactions, has_residuals, event, position_pending, velocity_pending;
    double residual_position, residual_velocity, quality, best_quality, report_t;
} committed;

static void save_committed(cdyn_mbs *mbs, double *space, committed *c)
{
    int n = mbs->n;
    c->reaction_force = space;
    c->reaction_mult = space + n;
    c->y_part = space + n + mbs->m1;
    memcpy(c->reaction_force, mbs->reaction_force, sizeof(double) * (size_t)n);
    memcpy(c->reaction_mult, mbs->reaction_mult, sizeof(double) * (size_t)mbs->m1);
    memcpy(c->y_part, mbs->y_part, sizeof(double) * 2 * (size_t)n);
    c->has_reactions = mbs->has_reactions;
    c->has_residuals = mbs->has_residuals;
    c->event = mbs->event;
    c->residual_position = mbs->residual_position;
    c->residual_velocity = mbs->residual_velocity;
    c->position_pending = mbs->position_pending;
    c->velocity_pending = mbs->velocity_pending;
    c->report_t = mbs->report_t;
    memcpy(mbs->report_saved, mbs->report_y, sizeof(double) * 2 * (size_t)n);
    c->quality = mbs->quality;
    c->best_quality = mbs->best_quality;
}

static void restore_committed(cdyn_mbs *mbs, const committed *c)
{
    int n = mbs->n;
    memcpy(mbs->reaction_force, c->reaction_force, sizeof(double) * (size_t)n);
    memcpy(mbs->reaction_mult, c->reaction_mult, sizeof(double) * (size_t)mbs->m1);
    memcpy(mbs->y_part, c->y_part, sizeof(double) * 2 * (size_t)n);
    mbs->has_reactions = c->has_reactions;
    mbs->has_residuals = c->has_residuals;
    mbs->event = c->event;
    mbs->residual_position = c->residual_position;
    mbs->residual_velocity = c->residual_velocity;
    mbs->position_pending = c->position_pending;
    mbs->velocity_pending = c->velocity_pending;
    mbs->report_t = c->report_t;
    memcpy(mbs->report_y, mbs->report_saved, sizeof(double) * 2 * (size_t)n);
    mbs->quality = c->quality;
    mbs->best_quality = c->best_quality;
}

/* The end of a Jacobian call: with st OK and `written`, jac (size x size)
 * into A (ld lda); otherwise the object's committed state of before the
 * call back (A untouched). Returns st. */
static cdyn_status finish_jacobian(cdyn_mbs *mbs, const committed *before, cdyn_status st,
                                   int written, const double *jac, int size, double *A, int lda)
{
    if (st != CDYN_OK || !written) {
        restore_committed(mbs, before);
        return st;
    }
    for (int j = 0; j < size; ++j)
        memcpy(A + (size_t)j * lda, jac + (size_t)j * size, sizeof(double) * (size_t)size);
    return CDYN_OK;
}

/* ---- through the evaluation's factorization ------------------------------ */

/* w M and w Phi_q (as evaluated last) added into dM (n x n) and dG (m x n,
 * ld m1). */
static void add_position_terms(const cdyn_mbs *mbs, double w, double *dM, double *dG)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    for (size_t e = 0; e < (size_t)n * n; ++e) dM[e] += w * mbs->M[e];
    for (int col = 0; col < n; ++col)
        for (int i = 0; i < m; ++i)
            dG[i + (size_t)col * m1] += w * mbs->Phi_q[i + (size_t)col * m1];
}

/* The model's terms at ys, moved from y by delta along column j, added
 * with weight w into the sums dM (n x n), dG (m x n, ld m1), dQ (n) and
 * ds (m) of the difference stencil (phi0, phidot0: Phi and Phi' at y,
 * read only when the gains use them, as the rhs evaluates them). A
 * coordinate moves M, Q, Phi, Phi_q, Phi' and xi; a speed moves only Q,
 * xi and Phi' = Phi_q q' + Phi_t, by delta times a column of Phi_q (exact:
 * Phi' is linear in q'), so dM and dG are left alone. Summing each term's
 * differences apart, before any product with the solution, keeps a small
 * change of one term from drowning in the rounding of the others (the
 * speeds' terms of a pendulum of 1.3 um are 1e-7 of its gravity terms). */
static cdyn_status add_moved_terms(cdyn_mbs *mbs, const char *fn, double t, const double *ys,
                                   int j, double delta, double w, const double *phi0,
                                   const double *phidot0, double *dM, double *dG, double *dQ,
                                   double *ds)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    int stabilized = cdyn__constraint_stabilized(mbs->kernel); /* else s needs no Phi, Phi' */
    const double *q = ys, *qdot = ys + n, *phi = phi0;
    cdyn_status st = CDYN_OK;
    if (j < n) {
        st = cdyn__mbs_mass(mbs, fn, t, q);
        if (!st && m > 0 && stabilized) st = cdyn__mbs_phi(mbs, fn, t, q, mbs->Phi);
        if (!st && m > 0 && stabilized)
            st = cdyn__mbs_velocity_constraint(mbs, fn, t, q, qdot, mbs->Phi_q, mbs->Phi_dot);
        if (!st && m > 0 && !stabilized) st = cdyn__mbs_jacobian(mbs, fn, t, q, mbs->Phi_q);
        phi = mbs->Phi;
    } else if (stabilized) {
        const double *g = mbs->kernel->jac + (size_t)(j - n) * m1;
        for (int i = 0; i < m; ++i) mbs->Phi_dot[i] = phidot0[i] + delta * g[i];
    }
    if (!st) st = cdyn__mbs_force(mbs, fn, t, q, qdot);
    if (!st && m > 0) st = cdyn__mbs_xi(mbs, fn, t, q, qdot);
    if (st) return st;
    for (int i = 0; i < n; ++i) dQ[i] += w * mbs->Q[i];
    if (m > 0) { /* s = xi - K_D Phi' - K_P Phi (T4.6), through vec_m */
        cdyn__constraint_accel_rhs(mbs->kernel, stabilized ? phi : NULL,
                                   stabilized ? mbs->Phi_dot : NULL, mbs->xi_val, mbs->vec_m);
        for (int i = 0; i < m; ++i) ds[i] += w * mbs->vec_m[i];
    }
    if (j < n) add_position_terms(mbs, w, dM, dG);
    return CDYN_OK;
}

/* ---- verified steps ------------------------------------------------------ */

/* The central differences of the model's terms along one direction at one
 * step s, (term(y + s u) - term(y - s u)) / 2s, term by term: M (n x n),
 * Phi_q (m x n, ld m1; both only for a coordinate), Q (n) and s or xi (m). */
typedef struct {
    double *dM, *dG, *dQ, *ds;
} term_rates;

/* Three such sets and the vectors of their residual rates (n + max(n, m1)
 * each: n + m1 for the terms, 2n for a right-hand side)
 * from mbs->lin_rates: d1 and d2 at the steps h and 2h, c at h / LIN_RATIO;
 * e the extrapolated rate, size the sizes of its parts, noise the terms'
 * sizes at y, kept a refined level's rate (level_verdict). */
typedef struct {
    term_rates d1, d2, c;
    double *r1, *r2, *rc, *e, *size, *noise, *spare, *kept;
} level_work;

static void carve_rates(const cdyn_mbs *mbs, term_rates *r, double **at)
{
    int n = mbs->n, m1 = mbs->m1;
    r->dM = *at;
    r->dG = r->dM + (size_t)n * n;
    r->dQ = r->dG + (size_t)n * m1;
    r->ds = r->dQ + n;
    *at = r->ds + m1;
}

static void carve_levels(const cdyn_mbs *mbs, level_work *w)
{
    double *at = mbs->lin_rates;
    size_t len = (size_t)mbs->n + (size_t)cdyn__max(mbs->n, mbs->m1);
    carve_rates(mbs, &w->d1, &at);
    carve_rates(mbs, &w->d2, &at);
    carve_rates(mbs, &w->c, &at);
    double **vectors[] = {&w->r1, &w->r2, &w->rc, &w->e, &w->size, &w->noise, &w->spare, &w->kept};
    for (size_t k = 0; k < sizeof vectors / sizeof vectors[0]; ++k, at += len) *vectors[k] = at;
}

static void zero_rates(const cdyn_mbs *mbs, const term_rates *r, int positions)
{
    int n = mbs->n, m1 = mbs->m1;
    memset(r->dQ, 0, sizeof(double) * (size_t)n);
    memset(r->ds, 0, sizeof(double) * (size_t)m1);
    if (!positions) return;
    memset(r->dM, 0, sizeof(double) * (size_t)n * n);
    memset(r->dG, 0, sizeof(double) * (size_t)n * m1);
}

/* The residual rate of the terms r: out = [dQ - dM a + sign dPhi_q^T mu;
 * ds - dPhi_q a] (n + m; without dM, dPhi_q unless positions), and when
 * size is not NULL the sums of the absolute values of its parts. a: n,
 * mu: m. With r the terms themselves (M, Phi_q, Q, s at y) size is the
 * magnitude the terms' rounding is relative to. */
static void residual_rate(const cdyn_mbs *mbs, const term_rates *r, int positions,
                          const double *a, const double *mu, double sign, double *out,
                          double *size)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    for (int i = 0; i < n; ++i) {
        out[i] = r->dQ[i];
        if (size) size[i] = fabs(r->dQ[i]);
    }
    for (int i = 0; i < m; ++i) {
        out[n + i] = r->ds[i];
        if (size) size[n + i] = fabs(r->ds[i]);
    }
    for (int col = 0; positions && col < n; ++col) {
        const double *mc = r->dM + (size_t)col * n, *gc = r->dG + (size_t)col * m1;
        double gtmu = 0.0, gtmu_size = 0.0;
        for (int i = 0; i < n; ++i) out[i] -= mc[i] * a[col];
        for (int i = 0; i < m; ++i) {
            out[n + i] -= gc[i] * a[col];
            gtmu += gc[i] * mu[i];
        }
        out[col] += sign * gtmu;
        if (!size) continue;
        for (int i = 0; i < n; ++i) size[i] += fabs(mc[i] * a[col]);
        for (int i = 0; i < m; ++i) {
            size[n + i] += fabs(gc[i] * a[col]);
            gtmu_size += fabs(gc[i] * mu[i]);
        }
        size[col] += gtmu_size;
    }
}

/* The step h / LIN_RATIO as it is representable at x (0 where it is not). */
static double finer_step(double x, double h)
{
    volatile double ahead = x + h / LIN_RATIO;
    return ahead - x;
}

/* Does the extrapolated rate e = (4 r1 - r2) / 3 (steps h, 2h) agree with
 * the central rate rc at hc = h / LIN_RATIO? Entry by entry within
 * LIN_AGREE of the sizes of its parts, plus rc's truncation as r1 and r2
 * show it (|r2 - r1| / 3 at h, times (hc / h)^2), plus the rounding of
 * both: `rounding` (relative) times the sizes in noise and the time
 * terms' error estimate time_error (from row `timed` on: s or xi), each
 * over the steps. Writes e. A step so large that the model varies on a shorter
 * scale (an angle of many turns stepped by 120 rad, friction regularized
 * over 1e-4 m/s stepped by 1e-3) gives rates of any size and sign; they
 * disagree far beyond this, except where h and hc are both near multiples
 * of a period, which LIN_RATIO's distance from any small fraction makes
 * rare. NaN disagrees. */
static int rates_agree(int len, int timed, double time_error, double rounding, double h,
                       double hc, level_work *w)
{
    double spread = 1.5 / h + 1.0 / hc, shrink = (hc / h) * (hc / h);
    int agree = 1;
    for (int i = 0; i < len; ++i) {
        w->e[i] = (4.0 * w->r1[i] - w->r2[i]) / 3.0;
        double allowed = LIN_AGREE * w->size[i] + 2.0 * fabs(w->r2[i] - w->r1[i]) / 3.0 * shrink +
                         rounding * w->noise[i] * spread +
                         (i >= timed ? time_error * spread : 0.0);
        if (!(fabs(w->e[i] - w->rc[i]) <= allowed)) agree = 0;
    }
    return agree;
}

static void swap_rates(term_rates *a, term_rates *b)
{
    term_rates keep = *a;
    *a = *b;
    *b = keep;
}

static void swap_vectors(double **a, double **b)
{
    double *keep = *a;
    *a = *b;
    *b = keep;
}

/* What a level's agreement (rates_agree) settles, with last: no finer
 * level can follow. A first step that agrees settles the column. A step
 * that had to be refined may still sit where the extrapolation is only
 * beginning to work (its rate as far off as the agreement allows, 1e-4),
 * so its rate is kept and one level finer is taken: that rate settles if
 * it agrees too (its error is then below the kept one's by about
 * LIN_RATIO^4), the kept one if it does not (rounding at the finer step).
 * Returns 1 settled (the rate in w->e), 0 go on finer, -1 unsettled. */
static int level_verdict(level_work *w, int len, int agree, int level, int last, int *kept)
{
    size_t bytes = sizeof(double) * (size_t)len;
    if (agree && (level == 0 || *kept || last)) return 1;
    if (*kept) {
        memcpy(w->e, w->kept, bytes);
        return 1;
    }
    if (agree) {
        memcpy(w->kept, w->e, bytes);
        *kept = 1;
        return 0;
    }
    return last ? -1 : 0;
}

/* CDYN_ERR_NOCONV: column j's rates did not agree down to the step h. */
static cdyn_status unsettled(cdyn_mbs *mbs, const char *fn, double t, int j, double h)
{
    return cdyn__fail(mbs->msg, CDYN_ERR_NOCONV,
                      "%s at t = %g: the differences of column %d do not settle on any step "
                      "down to %g (the model is not smooth there, or varies on a scale its "
                      "state's size does not show: pass scale or set periods)",
                      fn, t, j, h);
}

/* Are the three rates (len each) finite? Where a term's differences
 * overflow, the caller differences its right-hand side instead. */
static int rates_finite(int len, const level_work *w)
{
    return cdyn__first_nonfinite(len, 1, w->r1, len) < 0 &&
           cdyn__first_nonfinite(len, 1, w->r2, len) < 0 &&
           cdyn__first_nonfinite(len, 1, w->rc, len) < 0;
}

/* ---- the right-hand side's columns with its own factors ---------------- */

/* The central difference at step s along column j of the Lagrange form's
 * terms into r (add_moved_terms at y +- s e_j). ys: y, restored. */
static cdyn_status kkt_central(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                               double *ys, int j, double s, const double *phi0,
                               const double *phidot0, const term_rates *r)
{
    cdyn_status st = CDYN_OK;
    zero_rates(mbs, r, j < mbs->n);
    for (int side = 1; st == CDYN_OK && side >= -1; side -= 2) {
        ys[j] = y[j] + side * s;
        st = add_moved_terms(mbs, fn, t, ys, j, ys[j] - y[j], side / (2.0 * s), phi0, phidot0,
                             r->dM, r->dG, r->dQ, r->ds);
    }
    ys[j] = y[j];
    return st;
}

/* J = d ydot / dy (2n x 2n) at (t, y): one evaluation at y, then per
 * column the verified extrapolated rate db - dK [q''; lambda] of the
 * model's terms (the file's comment) and its solve with the evaluation's
 * factors. *applies = 0, with nothing written and the object as before
 * the call, when the kernel kept no such factors (the pseudo-inverse below
 * full rank) or a column's solve is not certified: the caller then
 * differences the right-hand side. */
static cdyn_status kkt_jacobian(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                                const double *scale, double *J, int ldj, int *applies)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1, size = 2 * n, nm = n + m1;
    double *jac = mbs->lin_work, *ys = jac + (size_t)size * size, *x = ys + size,
           *dx = x + nm, *phi0 = dx + nm, *phidot0 = phi0 + m1, *space = phidot0 + m1;
    level_work w;
    carve_levels(mbs, &w);
    *applies = 1;
    cdyn_status st = check_scale(mbs, fn, size, scale);
    if (st) return st;
    committed before;
    save_committed(mbs, space, &before);
    st = cdyn_mbs_rhs(mbs, t, y, jac); /* the factors, and x, at y */
    if (st == CDYN_OK && !mbs->kernel->reusable) *applies = 0;
    if (st == CDYN_OK && *applies) {
        int stabilized = cdyn__constraint_stabilized(mbs->kernel);
        memcpy(x, jac + n, sizeof(double) * (size_t)n);
        memcpy(x + n, mbs->reaction_mult, sizeof(double) * (size_t)m);
        if (stabilized) { /* else the rhs left them out */
            memcpy(phi0, mbs->Phi, sizeof(double) * (size_t)m);
            memcpy(phidot0, mbs->Phi_dot, sizeof(double) * (size_t)m);
        }
        memcpy(ys, y, sizeof(double) * (size_t)size);
        /* the terms at y as loaded, for their rounding: M, Phi_q, Q and s */
        const cdyn_constraint *k = mbs->kernel;
        term_rates at_y = {k->mass, k->jac, k->force, k->accel_rhs};
        residual_rate(mbs, &at_y, 1, x, x + n, -1.0, w.spare, w.noise);
    }
    for (int j = 0; st == CDYN_OK && *applies && j < size; ++j) {
        double h = column_step(y, scale, n, j, step_cap(mbs, NULL, n, j));
        int have_d1 = 0, kept = 0;
        for (int level = 0; st == CDYN_OK; ++level) {
            double hc = finer_step(y[j], h);
            mbs->time_error = 0.0;
            if (!have_d1) st = kkt_central(mbs, fn, t, y, ys, j, h, phi0, phidot0, &w.d1);
            if (!st) st = kkt_central(mbs, fn, t, y, ys, j, 2.0 * h, phi0, phidot0, &w.d2);
            if (!st && hc > 0.0) st = kkt_central(mbs, fn, t, y, ys, j, hc, phi0, phidot0, &w.c);
            if (st) break;
            if (!have_d1) residual_rate(mbs, &w.d1, j < n, x, x + n, -1.0, w.r1, NULL);
            residual_rate(mbs, &w.d2, j < n, x, x + n, -1.0, w.r2, w.size);
            residual_rate(mbs, &w.c, j < n, x, x + n, -1.0, w.rc, NULL);
            if (!rates_finite(n + m, &w)) {
                *applies = 0;
                break;
            }
            int agree = hc > 0.0 && rates_agree(n + m, n, mbs->time_error, TERM_ROUNDING, h, hc, &w);
            int verdict = level_verdict(&w, n + m, agree, level,
                                        hc == 0.0 || level + 1 == LIN_LEVELS, &kept);
            if (verdict > 0) break;
            if (verdict < 0) {
                st = unsettled(mbs, fn, t, j, h);
                break;
            }
            swap_rates(&w.d1, &w.c); /* the finer central rate is the next level's d1 */
            swap_vectors(&w.r1, &w.rc);
            have_d1 = 1;
            h = hc;
        }
        if (st == CDYN_OK && *applies && !cdyn__constraint_solve_again(mbs->kernel, w.e, w.e + n, dx, dx + n))
            *applies = 0;
        double *column = jac + (size_t)j * size;
        for (int i = 0; st == CDYN_OK && *applies && i < n; ++i) {
            column[i] = j == n + i ? 1.0 : 0.0;
            column[n + i] = dx[i];
        }
    }
    return finish_jacobian(mbs, &before, st, *applies, jac, size, J, ldj);
}

/* ---- differences of a right-hand side itself ----------------------------- */

/* rate (size) = the central difference of f at step s along x_j; noise:
 * the larger of its entries and |f| at both states. xs: x, restored. */
static cdyn_status rhs_central(cdyn_mbs *mbs, rhs_fn f, double t, const double *x, double *xs,
                               int j, double s, int size, double *plus, double *minus,
                               double *rate, double *noise)
{
    xs[j] = x[j] + s;
    cdyn_status st = f(mbs, t, xs, plus);
    if (st == CDYN_OK) {
        xs[j] = x[j] - s;
        st = f(mbs, t, xs, minus);
    }
    xs[j] = x[j];
    for (int i = 0; st == CDYN_OK && i < size; ++i) {
        rate[i] = (plus[i] - minus[i]) / (2.0 * s);
        noise[i] = fmax(noise[i], fmax(fabs(plus[i]), fabs(minus[i])));
    }
    return st;
}

/* A (size x size, lda) = df/dx at (t, x) by extrapolated central
 * differences of f, each column's step verified and refined as the terms'
 * (rates_agree, with f's own solve's error RHS_ROUNDING as its rounding;
 * map: step_cap); ends with an evaluation at x itself, so that the
 * object's state (warm starts, reactions) is that of (t, x). Written only
 * on success. */
static cdyn_status difference_jacobian(cdyn_mbs *mbs, const char *fn, rhs_fn f, int size,
                                       const int *map, double t, const double *x,
                                       const double *scale, double *A, int lda)
{
    double *jac = mbs->lin_work, *xs = jac + (size_t)size * size;
    double *fp = xs + size, *fm = fp + size, *base = fm + size;
    int half = size / 2;
    level_work w;
    carve_levels(mbs, &w);
    cdyn_status st = check_scale(mbs, fn, size, scale);
    if (st) return st;
    committed before;
    save_committed(mbs, base + size, &before);
    memcpy(xs, x, sizeof(double) * (size_t)size);
    st = f(mbs, t, xs, base); /* a failure at x itself is reported as such */
    for (int j = 0; st == CDYN_OK && j < size; ++j) {
        double h = column_step(x, scale, half, j, step_cap(mbs, map, half, j));
        int have_d1 = 0, kept = 0;
        for (int i = 0; i < size; ++i) w.noise[i] = fabs(base[i]);
        for (int level = 0; st == CDYN_OK; ++level) {
            double hc = finer_step(x[j], h);
            if (!have_d1) st = rhs_central(mbs, f, t, x, xs, j, h, size, fp, fm, w.r1, w.noise);
            if (!st) st = rhs_central(mbs, f, t, x, xs, j, 2.0 * h, size, fp, fm, w.r2, w.noise);
            if (!st && hc > 0.0)
                st = rhs_central(mbs, f, t, x, xs, j, hc, size, fp, fm, w.rc, w.noise);
            if (st) break;
            if (!rates_finite(size, &w)) {
                st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE,
                                "%s: the Jacobian overflowed at t = %g", fn, t);
                break;
            }
            for (int i = 0; i < size; ++i) w.size[i] = fmax(fabs(w.r1[i]), fabs(w.r2[i]));
            int agree = hc > 0.0 && rates_agree(size, size, 0.0, RHS_ROUNDING, h, hc, &w);
            int verdict = level_verdict(&w, size, agree, level,
                                        hc == 0.0 || level + 1 == LIN_LEVELS, &kept);
            if (verdict > 0) break;
            if (verdict < 0) {
                st = unsettled(mbs, fn, t, j, h);
                break;
            }
            swap_vectors(&w.r1, &w.rc);
            have_d1 = 1;
            h = hc;
        }
        if (st == CDYN_OK) memcpy(jac + (size_t)j * size, w.e, sizeof(double) * (size_t)size);
    }
    if (st == CDYN_OK) st = f(mbs, t, x, base); /* leave the state at x */
    if (st == CDYN_OK && cdyn__first_nonfinite(size, size, jac, size) >= 0)
        st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: the Jacobian overflowed at t = %g", fn,
                        t);
    return finish_jacobian(mbs, &before, st, 1, jac, size, A, lda);
}

cdyn_status cdyn_mbs_rhs_jacobian(cdyn_mbs *mbs, double t, const double *y, const double *scale,
                                  double *J, int ldj)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_rhs_jacobian";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    int size = 2 * mbs->n;
    if (!y || !J) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "J");
    if (ldj < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: ldj = %d < 2n = %d", fn, ldj, size);
    int applies = 0;
    cdyn_status st = kkt_jacobian(mbs, fn, t, y, scale, J, ldj, &applies);
    if (applies) return st;
    return difference_jacobian(mbs, fn, cdyn_mbs_rhs, size, NULL, t, y, scale, J, ldj);
}

/* ---- the partitioned form through the chain rule ------------------------- */

/* out (m) = the central difference at step s of Phi' = Phi_q q' + Phi_t
 * along dq at the consistent y (2n), q' fixed; size (m): the largest
 * |Phi_q q'| + |Phi_t| of the two, each summed by its parts (for their
 * rounding). ys: 2n of scratch. */
static cdyn_status velocity_constraint_central(cdyn_mbs *mbs, const char *fn, double t,
                                               const double *y, const double *dq, double s,
                                               double *ys, double *out, double *size)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    memset(out, 0, sizeof(double) * (size_t)m);
    memset(size, 0, sizeof(double) * (size_t)m);
    memcpy(ys + n, y + n, sizeof(double) * (size_t)n);
    for (int side = 1; side >= -1; side -= 2) {
        for (int i = 0; i < n; ++i) ys[i] = y[i] + side * s * dq[i];
        cdyn_status st =
            cdyn__mbs_velocity_constraint(mbs, fn, t, ys, ys + n, mbs->Phi_q, mbs->Phi_dot);
        if (st) return st;
        for (int i = 0; i < m; ++i) {
            double parts = 0.0;
            for (int c = 0; c < n; ++c) parts += fabs(mbs->Phi_q[i + (size_t)c * m1] * ys[n + c]);
            parts += fabs(mbs->Phi_dot[i]);
            size[i] = fmax(size[i], parts);
            out[i] += side / (2.0 * s) * mbs->Phi_dot[i];
        }
    }
    return CDYN_OK;
}

/* c (m) = the verified extrapolated rate of Phi' along dq at y (as
 * kkt_jacobian's columns: steps h, 2h, h / LIN_RATIO, refined; x0 the
 * moved entry of the state, for representable steps), the dependent
 * speeds' change of a coordinate's direction; *h: the step that settled. */
static cdyn_status velocity_constraint_rate(cdyn_mbs *mbs, const char *fn, double t,
                                            const double *y, const double *dq, int j, double x0,
                                            double *h, double *ys, level_work *w, double *c)
{
    int m = mbs->m;
    double *noise2 = w->spare;
    int kept = 0;
    for (int level = 0;; ++level) {
        double hc = finer_step(x0, *h);
        mbs->time_error = 0.0;
        cdyn_status st = velocity_constraint_central(mbs, fn, t, y, dq, *h, ys, w->r1, w->noise);
        if (!st) st = velocity_constraint_central(mbs, fn, t, y, dq, 2.0 * *h, ys, w->r2, noise2);
        if (!st && hc > 0.0)
            st = velocity_constraint_central(mbs, fn, t, y, dq, hc, ys, w->rc, w->size);
        if (st) return st;
        for (int i = 0; i < m; ++i) {
            w->noise[i] = fmax(w->noise[i], fmax(noise2[i], w->size[i]));
            w->size[i] = fmax(fabs(w->r1[i]), fabs(w->r2[i]));
        }
        int agree = hc > 0.0 && rates_agree(m, 0, mbs->time_error, TERM_ROUNDING, *h, hc, w);
        int verdict =
            level_verdict(w, m, agree, level, hc == 0.0 || level + 1 == LIN_LEVELS, &kept);
        if (verdict > 0) {
            memcpy(c, w->e, sizeof(double) * (size_t)m);
            return CDYN_OK;
        }
        if (verdict < 0) return unsettled(mbs, fn, t, j, *h);
        *h = hc;
    }
}

/* The partitioned form's terms at ys (2n): M and Phi_q when the positions
 * moved, Q and xi always (no stabilizer), added with weight w into dM, dG
 * (m x n, ld m1), dQ (n) and dxi (m). */
static cdyn_status add_terms_at(cdyn_mbs *mbs, const char *fn, double t, const double *ys,
                                int positions, double w, double *dM, double *dG, double *dQ,
                                double *dxi)
{
    int n = mbs->n, m = mbs->m;
    cdyn_status st = CDYN_OK;
    if (positions) st = cdyn__mbs_mass(mbs, fn, t, ys);
    if (!st && positions) st = cdyn__mbs_jacobian(mbs, fn, t, ys, mbs->Phi_q);
    if (!st) st = cdyn__mbs_force(mbs, fn, t, ys, ys + n);
    if (!st) st = cdyn__mbs_xi(mbs, fn, t, ys, ys + n);
    if (st) return st;
    for (int i = 0; i < n; ++i) dQ[i] += w * mbs->Q[i];
    for (int i = 0; i < m; ++i) dxi[i] += w * mbs->xi_val[i];
    if (positions) add_position_terms(mbs, w, dM, dG);
    return CDYN_OK;
}

/* The central difference at step s along u (2n) of the partitioned form's
 * terms at the consistent y into r (add_terms_at at y +- s u). ys: 2n of
 * scratch. */
static cdyn_status partition_central(cdyn_mbs *mbs, const char *fn, double t, const double *y,
                                     const double *u, double s, int positions, double *ys,
                                     const term_rates *r)
{
    cdyn_status st = CDYN_OK;
    zero_rates(mbs, r, positions);
    for (int side = 1; st == CDYN_OK && side >= -1; side -= 2) {
        for (int i = 0; i < 2 * mbs->n; ++i) ys[i] = y[i] + side * s * u[i];
        st = add_terms_at(mbs, fn, t, ys, positions, side / (2.0 * s), r->dM, r->dG, r->dQ, r->ds);
    }
    return st;
}

/* A = df/dz (2d x 2d, lda) of the partitioned form at (t, z) by the chain
 * rule (the file's comment): one cdyn_mbs_partition_rhs at z, then per
 * column the direction u, the differences of the terms along it and a
 * solve of M dq'' - Phi_q^T dmu = dQ - dM q'' + dPhi_q^T mu,
 * Phi_q dq'' = dxi - dPhi_q q'' (nullspace.h's signs: mu the multipliers
 * of M q'' - Phi_q^T mu = Q) with the partition's factors at z. *applies
 * = 0, with nothing written and the object as before the call, when a
 * column's solve is not certified: the caller then differences the
 * partitioned right-hand side. */
static cdyn_status partition_chain_jacobian(cdyn_mbs *mbs, const char *fn, double t,
                                            const double *z, const double *scale, double *A,
                                            int lda, int *applies)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1, d = n - m, size = 2 * d;
    cdyn_nullspace *ns = mbs->partition;
    double *jac = mbs->lin_work, *M0 = jac + (size_t)size * size, *y = M0 + (size_t)n * n,
           *ys = y + 2 * n, *u = ys + 2 * n, *accel = u + 2 * n, *da = accel + n, *unit = da + n,
           *noise = unit + n, *mu = noise + n + m1, *c = mu + m1, *dmu = c + m1, *space = dmu + m1;
    level_work w;
    carve_levels(mbs, &w);
    *applies = 1;
    cdyn_status st = check_scale(mbs, fn, size, scale);
    if (st) return st;
    committed before;
    save_committed(mbs, space, &before);
    st = cdyn_mbs_partition_rhs(mbs, t, z, u); /* the factors, q'' and mu at z */
    if (st == CDYN_OK) {
        memcpy(y, mbs->y_part, sizeof(double) * 2 * (size_t)n);
        memcpy(M0, mbs->M, sizeof(double) * (size_t)n * n);
        memcpy(accel, mbs->vec_n, sizeof(double) * (size_t)n);
        memcpy(mu, mbs->vec_m2, sizeof(double) * (size_t)m);
        /* the terms at y, for their rounding: M, Phi_q, Q and xi */
        term_rates at_y = {mbs->M, mbs->Phi_q, mbs->Q, mbs->xi_val};
        residual_rate(mbs, &at_y, 1, accel, mu, 1.0, w.spare, noise);
    }
    for (int j = 0; st == CDYN_OK && *applies && j < size; ++j) {
        int positions = j < d, k = j % d, kept = 0, verdict = 0;
        double h = column_step(z, scale, d, j, step_cap(mbs, mbs->ind_index, d, j));
        for (int level = 0; st == CDYN_OK && verdict == 0; ++level) {
            memset(unit, 0, sizeof(double) * (size_t)d);
            unit[k] = 1.0;
            memset(u, 0, sizeof(double) * 2 * (size_t)n);
            cdyn_status basis = cdyn_nullspace_expand(ns, unit, positions ? u : u + n); /* V e_k */
            if (!basis && positions) { /* the dependent speeds: Phi_q dq' = -dPhi'/dq V e_k */
                memset(unit, 0, sizeof(double) * (size_t)d);
                st = velocity_constraint_rate(mbs, fn, t, y, u, j, z[j], &h, ys, &w, c);
                if (!st) basis = cdyn_nullspace_complete(ns, unit, c, u + n);
            }
            if (basis) /* an overflowing direction */
                st = cdyn__fail(mbs->msg, basis, "%s at t = %g: %s", fn, t,
                                cdyn_nullspace_last_error(ns));
            double hc = finer_step(z[j], h);
            mbs->time_error = 0.0;
            if (!st) st = partition_central(mbs, fn, t, y, u, h, positions, ys, &w.d1);
            if (!st) st = partition_central(mbs, fn, t, y, u, 2.0 * h, positions, ys, &w.d2);
            if (!st && hc > 0.0) st = partition_central(mbs, fn, t, y, u, hc, positions, ys, &w.c);
            if (st) break;
            residual_rate(mbs, &w.d1, positions, accel, mu, 1.0, w.r1, NULL);
            residual_rate(mbs, &w.d2, positions, accel, mu, 1.0, w.r2, w.size);
            residual_rate(mbs, &w.c, positions, accel, mu, 1.0, w.rc, NULL);
            if (!rates_finite(n + m, &w)) {
                *applies = 0;
                break;
            }
            memcpy(w.noise, noise, sizeof(double) * (size_t)(n + m));
            int agree = hc > 0.0 && rates_agree(n + m, n, mbs->time_error, TERM_ROUNDING, h, hc, &w);
            verdict = level_verdict(&w, n + m, agree, level,
                                    hc == 0.0 || level + 1 == LIN_LEVELS, &kept);
            if (verdict < 0) st = unsettled(mbs, fn, t, j, h);
            h = hc;
        }
        if (st || !*applies) break;
        /* M dq'' - Phi_q^T dmu = F, Phi_q dq'' = c: F = dQ - dM q'' + dPhi_q^T mu,
         * c = -(dxi - dPhi_q q''), the extrapolated rates' */
        for (int i = 0; i < m; ++i) w.e[n + i] = -w.e[n + i];
        if (cdyn_nullspace_solve(ns, M0, n, w.e, w.e + n, da, dmu) != CDYN_OK) {
            *applies = 0;
            break;
        }
        double *column = jac + (size_t)j * size;
        for (int i = 0; i < d; ++i) {
            column[i] = !positions && i == k ? 1.0 : 0.0;
            column[d + i] = da[mbs->ind_index[i]];
        }
    }
    if (st == CDYN_OK && *applies && cdyn__first_nonfinite(size, size, jac, size) >= 0)
        *applies = 0;
    return finish_jacobian(mbs, &before, st, *applies, jac, size, A, lda);
}

cdyn_status cdyn_mbs_partition_jacobian(cdyn_mbs *mbs, double t, const double *z,
                                        const double *scale, double *A, int lda)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_jacobian";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->partitioned)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    int size = 2 * (mbs->n - mbs->m);
    if (!z || !A) return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !z ? "z" : "A");
    if (lda < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: lda = %d < 2d = %d", fn, lda, size);
    int applies = 0;
    cdyn_status st = partition_chain_jacobian(mbs, fn, t, z, scale, A, lda, &applies);
    if (applies) return st;
    return difference_jacobian(mbs, fn, cdyn_mbs_partition_rhs, size, mbs->ind_index, t, z, scale,
                               A, lda);
}

cdyn_status cdyn_mbs_partition_input_matrix(cdyn_mbs *mbs, double t, const double *z, int inputs,
                                            const double *Qu, int ldqu, double *B, int ldb)
{
    if (!mbs) return CDYN_ERR_ARG;
    const char *fn = "cdyn_mbs_partition_input_matrix";
    if (cdyn__mbs_check_idle(mbs, fn)) return CDYN_ERR_BUSY;
    if (!mbs->partitioned)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: call cdyn_mbs_partition first", fn);
    int n = mbs->n, d = n - mbs->m, size = 2 * d;
    if (!z || !Qu || !B)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !z ? "z" : !Qu ? "Qu" : "B");
    if (inputs < 1 || ldqu < n || ldb < size)
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG,
                          "%s: inputs = %d (>= 1), ldqu = %d (>= n = %d), ldb = %d (>= 2d = %d)",
                          fn, inputs, ldqu, n, ldb, size);
    size_t b_bytes = sizeof(double) * ((size_t)ldb * (inputs - 1) + size);
    if (cdyn__overlap(B, b_bytes, z, sizeof(double) * (size_t)size) ||
        cdyn__overlap(B, b_bytes, Qu, sizeof(double) * ((size_t)ldqu * (inputs - 1) + n)))
        return cdyn__fail(mbs->msg, CDYN_ERR_ARG, "%s: B overlaps z or Qu", fn);
    long bad = cdyn__first_nonfinite(n, inputs, Qu, ldqu);
    if (bad >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: Qu has NaN or Inf (column %ld)", fn,
                          bad / n);
    /* the evaluation at (t, z) leaves M(q) and the partition's
     * factorization at the state; q'' is linear in Q (T1.4-T1.5), so the
     * response to input k is the solve with F = dQ/du_k and c = 0 */
    double *zdot = mbs->lin_work, *response = zdot + size;
    cdyn_status st = cdyn_mbs_partition_rhs(mbs, t, z, zdot);
    /* two passes, so that B stays untouched when a solve fails: the first
     * only looks, the second (the same solves again) writes */
    for (int pass = 0; st == CDYN_OK && pass < 2; ++pass)
        for (int k = 0; st == CDYN_OK && k < inputs; ++k) {
            st = cdyn_nullspace_solve(mbs->partition, mbs->M, n, Qu + (size_t)k * ldqu, NULL,
                                      response, NULL);
            if (st != CDYN_OK)
                return cdyn__fail(mbs->msg, st, "%s at t = %g: %s", fn, t,
                                  cdyn_nullspace_last_error(mbs->partition));
            if (pass == 0) continue;
            double *col = B + (size_t)k * ldb;
            for (int j = 0; j < d; ++j) {
                col[j] = 0.0;
                col[d + j] = response[mbs->ind_index[j]];
            }
        }
    return st;
}
