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
 * extrapolated difference is checked against D(h / LIN_RATIO), in first
 * and second differences, and the step refined until they agree
 * (rates_agree, settle_column; docs/theory.md T4). g is a
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
#define LIN_FINE 1e-9                /* an extrapolation that needs no finer step */
#define LIN_LAST 1e-6                /* the error bound a last level must show */
#define TIME_NOISE 4.0               /* the time terms' error estimate, made a bound */
#define TERM_ROUNDING (16.0 * DBL_EPSILON) /* of a model term, relative to its parts */
#define RHS_ROUNDING 1e-10           /* of a right-hand side (the dependent Newton's tolerance) */

typedef cdyn_status (*rhs_fn)(cdyn_mbs *mbs, double t, const double *x, double *fx);

/* The magnitude of entry j of x (size 2h: coordinates, then speeds): the
 * caller's scale, else the largest |x| of its half (|x_j| among them); a
 * speed half that is all zero takes the coordinates' magnitude per second.
 * This broad magnitude is tried first (column_step, settle_column): a
 * value near 0 tells no more of the scale the model varies on than 0
 * does, and a two-link arm held at 1e-6 rad from straight, stepped by
 * 1e-9 rad and refined below what the sum of its angles resolves, had its
 * stiffness column come back 0 with CDYN_OK (found by an adversarial
 * review). */
static double magnitude(const double *x, const double *scale, int half, int j,
                        const double *wide)
{
    if (scale) return scale[j];
    int lo = j < half ? 0 : half;
    double largest = fabs(x[j]);
    for (int i = lo; i < lo + half; ++i) largest = fmax(largest, fabs(x[i]));
    if (wide) largest = fmax(largest, wide[lo ? 1 : 0]);
    if (largest > 0.0) return largest;
    if (lo == half)
        for (int i = 0; i < half; ++i) largest = fmax(largest, fabs(x[i]));
    if (lo == half && wide) largest = fmax(largest, wide[0]);
    return largest > 0.0 ? largest : 1.0;
}

/* wide (2) for magnitude(): the largest |q| and |q'| of the full state
 * y (2n) of a partitioned x = [q_ind; q'_ind], whose half may hold one
 * coordinate alone (a rail's one angle at 1e-6 rad beside a dependent one
 * at 0.5 rad: the same stiffness column of 0 with CDYN_OK). */
static void full_magnitudes(int n, const double *y, double wide[2])
{
    wide[0] = wide[1] = 0.0;
    for (int i = 0; i < n; ++i) {
        wide[0] = fmax(wide[0], fabs(y[i]));
        wide[1] = fmax(wide[1], fabs(y[n + i]));
    }
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
 * the caller scaled it), made representable. wide: see full_magnitudes
 * (NULL: none). *own: the step from |x_j| alone (at 0, from its half's
 * largest |x|) where that is less than half of it (else 0): where the
 * broad step does not settle at once
 * (settle_column), the entry is stepped on its own size. A film 1e-6 m
 * thick beside a crank at 1.2e5 rad, stepped by 0.12 m from the broad
 * magnitude, was refined seven times to 3.4e-7 m and its stiffness
 * came back 2e-5 off with CDYN_OK (found by a second review). */
static double column_step(const double *x, const double *scale, int half, int j, double cap,
                          const double *wide, double *own)
{
    double size = magnitude(x, scale, half, j, wide);
    if (!scale && size > cap) size = cap;
    volatile double ahead = x[j] + LIN_STEP * size;
    double h = ahead - x[j];
    *own = 0.0;
    if (!scale) { /* |x_j|, or at 0 its half's largest without the full state's */
        double mine = fabs(x[j]) > 0.0 ? fabs(x[j]) : magnitude(x, NULL, half, j, NULL);
        volatile double near = x[j] + LIN_STEP * fmin(mine, cap);
        double hj = near - x[j];
        if (hj > 0.0 && hj < 0.5 * h) *own = hj;
    }
    return h;
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

/* ---- verified steps ------------------------------------------------------ */

/* The model's terms, or sums of them: M (n x n), Phi_q (m x n, ld m1; both
 * only where the positions move), Q (n) and s or xi (m). */
typedef struct {
    double *dM, *dG, *dQ, *ds;
} term_rates;

/* The differences of one column at the three steps of a level, k = 0, 1,
 * 2 for h, 2h and h / LIN_RATIO (from mbs->lin_rates; vectors of n +
 * max(n, m1): n + m1 for the terms' residual rates, 2n for a right-hand
 * side): odd[k] the central difference (g(+s) - g(-s)) / 2s, even[k] the
 * second difference (g(+s) + g(-s) - 2 g(0)) / s^2; odd_size, even_size
 * the sizes of their parts at h (0 where a difference has no parts: its
 * own size counts); peak_* the largest of those over the levels; noise the
 * sizes the evaluations' rounding is relative to; e the extrapolated first
 * derivative, e_even its second-derivative twin (checked, not used); kept
 * a refined level's e (settle_column). sum_odd, sum_even, base: the terms'
 * sums of a step and the terms at y; spare: scratch. */
typedef struct level_work {
    term_rates sum_odd, sum_even, base;
    double *odd[3], *even[3];
    double *odd_size, *even_size, *peak_odd, *peak_even, *noise, *e, *e_even, *kept, *spare;
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
    carve_rates(mbs, &w->sum_odd, &at);
    carve_rates(mbs, &w->sum_even, &at);
    carve_rates(mbs, &w->base, &at);
    double **vectors[] = {&w->odd[0],   &w->odd[1],     &w->odd[2],     &w->even[0],
                          &w->even[1],  &w->even[2],    &w->odd_size,   &w->even_size,
                          &w->peak_odd, &w->peak_even,  &w->noise,      &w->e,
                          &w->e_even,   &w->kept,       &w->spare};
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

/* dst += w src (dM, dG only where positions). */
static void add_terms(const cdyn_mbs *mbs, int positions, double w, const term_rates *src,
                      const term_rates *dst)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    for (int i = 0; i < n; ++i) dst->dQ[i] += w * src->dQ[i];
    for (int i = 0; i < m; ++i) dst->ds[i] += w * src->ds[i];
    if (!positions) return;
    for (size_t e = 0; e < (size_t)n * n; ++e) dst->dM[e] += w * src->dM[e];
    for (int col = 0; col < n; ++col)
        for (int i = 0; i < m; ++i) {
            size_t at = i + (size_t)col * m1;
            dst->dG[at] += w * src->dG[at];
        }
}

/* odd += w_odd src and even += w_even src in one pass (dM, dG only where
 * positions): a point's terms into both sums of a step. */
static void add_point(const cdyn_mbs *mbs, int positions, double w_odd, double w_even,
                      const term_rates *src, const term_rates *odd, const term_rates *even)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    for (int i = 0; i < n; ++i) {
        odd->dQ[i] += w_odd * src->dQ[i];
        even->dQ[i] += w_even * src->dQ[i];
    }
    for (int i = 0; i < m; ++i) {
        odd->ds[i] += w_odd * src->ds[i];
        even->ds[i] += w_even * src->ds[i];
    }
    if (!positions) return;
    for (size_t e = 0; e < (size_t)n * n; ++e) {
        odd->dM[e] += w_odd * src->dM[e];
        even->dM[e] += w_even * src->dM[e];
    }
    for (int col = 0; col < n; ++col)
        for (int i = 0; i < m; ++i) {
            size_t at = i + (size_t)col * m1;
            odd->dG[at] += w_odd * src->dG[at];
            even->dG[at] += w_even * src->dG[at];
        }
}

/* dst = src. */
static void copy_terms(const cdyn_mbs *mbs, const term_rates *src, const term_rates *dst)
{
    zero_rates(mbs, dst, 1);
    add_terms(mbs, 1, 1.0, src, dst);
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

/* Does the extrapolation e = (4 r1 - r2) / 3 of differences at the steps
 * h, 2h agree with the difference rc at hc = h / LIN_RATIO, entry by
 * entry? order 1: central differences (first derivatives), 2: second
 * differences. Allowed: LIN_AGREE of the largest size the entry's parts
 * have had (peak, raised to size here; so that a rate that falls with the
 * step, as the derivative of v|v| at rest, settles near 0), rc's
 * truncation as r1 and r2 show it (|r2 - r1| / 3 at h, times (hc / h)^2,
 * twice), and the rounding of the values over the steps: `rounding`
 * (relative) of noise, and the time terms' error estimate time_error from
 * row `timed` on (s or xi; TIME_NOISE times it: an estimate, not a
 * bound). Second differences whose rounding exceeds their own size are
 * not judged. Writes e, and into *score the largest distance of e from rc
 * less its truncation (about e's own error) in units of LIN_FINE of the
 * peak plus the rounding: at most 1 where the step fits well (0 for a
 * linear function); into *bound that distance plus the rounding in units
 * of the peak, an error bound of e relative to the entry's size. A step
 * so large that the model varies on a shorter scale gives differences of
 * any size and sign, which disagree far beyond this except where the
 * disagreement happens to cross zero; the two orders cross zero apart
 * (settle_column). NaN disagrees. */
static int rates_agree(int order, int len, int timed, double time_error, double rounding,
                       double h, double hc, double *const r[3], double *e, const double *size,
                       double *peak, const double *noise, double *score, double *bound)
{
    double spread = order == 1 ? 1.5 / h + 1.0 / hc : 17.0 / (3.0 * h * h) + 4.0 / (hc * hc);
    double shrink = (hc / h) * (hc / h);
    int agree = 1;
    *score = *bound = 0.0;
    for (int i = 0; i < len; ++i) {
        e[i] = (4.0 * r[0][i] - r[1][i]) / 3.0; /* (finite: settle_column) */
        double seen = cdyn__larger(size[i], cdyn__larger(fabs(r[0][i]), fabs(r[1][i])));
        peak[i] = cdyn__larger(peak[i], seen);
        double truncation = (r[1][i] - r[0][i]) / 3.0 * shrink; /* of rc, about */
        double timed_error = i >= timed ? TIME_NOISE * time_error : 0.0;
        double rounded = (rounding * noise[i] + timed_error) * spread;
        double allowed = LIN_AGREE * peak[i] + 2.0 * fabs(truncation) + rounded;
        /* second differences drowned in their own rounding tell nothing */
        int judged = order == 1 || rounded < fabs(e[i]);
        if (judged && !(fabs(e[i] - r[2][i]) <= allowed)) agree = 0;
        /* e's own error: rc less its truncation leaves about rc's error
         * h^2 hc^2 apart from e's h^4 (T4: verified steps) */
        double fine = LIN_FINE * peak[i] + rounded, off = fabs(e[i] - (r[2][i] - truncation));
        if (off > 0.0) *score = cdyn__larger(*score, fine > 0.0 ? off / fine : INFINITY);
        if (off + rounded > 0.0)
            *bound = cdyn__larger(*bound, peak[i] > 0.0 ? (off + rounded) / peak[i] : INFINITY);
    }
    return agree;
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

/* One step of a level: the differences at step s into w->odd[k] and
 * w->even[k] (and at k = 0 the sizes of their parts into w->odd_size,
 * w->even_size), raising w->noise where the values set it. */
typedef cdyn_status (*step_fn)(cdyn_mbs *mbs, void *ctx, double s, int k, level_work *w);

/* The verified first derivative of one column into w->e (len entries):
 * levels of steps h, 2h and hc = h / LIN_RATIO (x0: the moved entry, so
 * that hc is representable), each checked by rates_agree in both orders,
 * with the even part (the second differences of the same evaluations) as
 * a second, independent check: a coincidental agreement of the first
 * derivatives, their disagreement crossing zero as the state moves (one
 * in 20 000 states of sin q at q = 1e3 to 5e6 rad, stepped by 1e-3 q), no
 * longer passes alone. A first level that agrees and whose
 * extrapolation's error is within LIN_FINE (score <= 1) settles. One that
 * agrees with a larger error (the step only begins to fit: at x = 295 m
 * on a road of wavelength 2 pi m the first step, 0.3 m, left 2.5e-4), or
 * any refined level that agrees (where the rounding allowed for can hide
 * that error), is kept and one level finer is taken: the finer settles if
 * it agrees and its error bound (disagreement plus rounding) is no larger
 * than the kept one's, else the kept one (rounding at the finer step:
 * with xi left to differences a finer level agreed within its larger
 * rounding and was 4 % off). *h: the last step. *finite = 0 (and
 * CDYN_OK) where a difference overflowed. CDYN_ERR_NOCONV (unsettled)
 * when no step agrees; a step's status otherwise. */
static cdyn_status settle_column(cdyn_mbs *mbs, const char *fn, double t, int j, double x0,
                                 double *h, double own, int len, int timed, double rounding,
                                 step_fn step, void *ctx, level_work *w, int *finite)
{
    size_t bytes = sizeof(double) * (size_t)len;
    int kept = 0;
    double kept_bound = INFINITY;
    *finite = 1;
    memset(w->peak_odd, 0, bytes);
    memset(w->peak_even, 0, bytes);
    for (int level = 0;; ++level) {
        int broad = level == 0 && own > 0.0; /* the broad first step (column_step) */
        double hc = finer_step(x0, *h), steps[3] = {*h, 2.0 * *h, hc};
        int count = hc > 0.0 ? 3 : 2, last = hc == 0.0 || level + 1 >= LIN_LEVELS;
        mbs->time_error = 0.0;
        int overflow = 0;
        for (int k = 0; k < count && !overflow; ++k) {
            cdyn_status st = step(mbs, ctx, steps[k], k, w);
            if (st) return st;
            overflow = cdyn__first_nonfinite(len, 1, w->odd[k], len) >= 0 ||
                       cdyn__first_nonfinite(len, 1, w->even[k], len) >= 0;
        }
        if (overflow && !broad) {
            *finite = 0;
            return CDYN_OK;
        }
        int agree = 0;
        double score = INFINITY, bound = INFINITY, even_score, even_bound;
        if (count == 3 && !overflow) {
            agree = rates_agree(1, len, timed, mbs->time_error, rounding, *h, hc, w->odd, w->e,
                                w->odd_size, w->peak_odd, w->noise, &score, &bound);
            agree &= rates_agree(2, len, timed, mbs->time_error, rounding, *h, hc, w->even,
                                 w->e_even, w->even_size, w->peak_even, w->noise, &even_score,
                                 &even_bound);
        }
        if (broad) { /* settled at once, or the entry's own step from the start */
            if (agree && score <= 1.0) return CDYN_OK;
            *h = own;
            own = 0.0;
            level = -1;
            memset(w->peak_odd, 0, bytes);
            memset(w->peak_even, 0, bytes);
            continue;
        }
        /* a last level settles on its agreement only within LIN_LAST of
         * its size (the film at x = 0 beside a crank of 1.2e5 rad, whose
         * steps from 120 m reached the last level agreeing within 1e-4,
         * came back 1.7e-5 off with CDYN_OK); else it is kept and
         * confirmed one level finer, as any refined level */
        int settled_last = last && bound <= LIN_LAST;
        if (agree && (kept ? bound <= kept_bound : ((level == 0 && score <= 1.0) || settled_last)))
            return CDYN_OK;
        if (kept) { /* the kept level is the better one */
            memcpy(w->e, w->kept, bytes);
            return CDYN_OK;
        }
        if (agree) {
            memcpy(w->kept, w->e, bytes);
            kept = 1;
            kept_bound = bound;
        } else if (last) {
            return unsettled(mbs, fn, t, j, *h);
        }
        *h = hc;
    }
}

/* ---- the right-hand side's columns with its own factors ------------------ */

/* The Lagrange form's terms (M, Phi_q, Q, s) at ys, moved from y by delta
 * along column j, into mbs->M, mbs->Phi_q, mbs->Q and mbs->vec_m (phi0,
 * phidot0: Phi and Phi' at y, read only when the gains use them, as the
 * rhs evaluates them). A coordinate moves M, Q, Phi, Phi_q, Phi' and xi;
 * a speed moves only Q, xi and Phi' = Phi_q q' + Phi_t, by delta times a
 * column of Phi_q (exact: Phi' is linear in q'), and leaves M and Phi_q.
 * The terms' differences are summed apart, before any product with the
 * solution, which keeps a small change of one term from drowning in the
 * rounding of the others (the speeds' terms of a pendulum of 1.3 um are
 * 1e-7 of its gravity terms). */
static cdyn_status moved_terms(cdyn_mbs *mbs, const char *fn, double t, const double *ys, int j,
                               double delta, const double *phi0, const double *phidot0)
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
    if (!st && m > 0) /* s = xi - K_D Phi' - K_P Phi (T4.6) */
        cdyn__constraint_accel_rhs(mbs->kernel, stabilized ? phi : NULL,
                                   stabilized ? mbs->Phi_dot : NULL, mbs->xi_val, mbs->vec_m);
    return st;
}

/* What a step of the Lagrange form's columns needs: the state y and its
 * scratch copy ys, column j, Phi and Phi' at y, and the solution x =
 * [q''; lambda] at y. */
typedef struct {
    const char *fn;
    double t;
    const double *y, *phi0, *phidot0, *x;
    double *ys;
    int j;
} kkt_step_ctx;

/* step_fn of the Lagrange form: the residual rates db - dK x of the terms'
 * differences at y +- s e_j (odd), and of their second differences. */
static cdyn_status kkt_step(cdyn_mbs *mbs, void *ctx, double s, int k, level_work *w)
{
    const kkt_step_ctx *c = ctx;
    int n = mbs->n, j = c->j, positions = j < n;
    zero_rates(mbs, &w->sum_odd, positions);
    zero_rates(mbs, &w->sum_even, positions);
    add_terms(mbs, positions, -2.0 / (s * s), &w->base, &w->sum_even);
    term_rates now = {mbs->M, mbs->Phi_q, mbs->Q, mbs->vec_m};
    for (int side = 1; side >= -1; side -= 2) {
        c->ys[j] = c->y[j] + side * s;
        cdyn_status st = moved_terms(mbs, c->fn, c->t, c->ys, j, c->ys[j] - c->y[j], c->phi0,
                                     c->phidot0);
        c->ys[j] = c->y[j];
        if (st) return st;
        add_point(mbs, positions, side / (2.0 * s), 1.0 / (s * s), &now, &w->sum_odd,
                  &w->sum_even);
    }
    const double *x = c->x;
    residual_rate(mbs, &w->sum_odd, positions, x, x + n, -1.0, w->odd[k], k ? NULL : w->odd_size);
    residual_rate(mbs, &w->sum_even, positions, x, x + n, -1.0, w->even[k],
                  k ? NULL : w->even_size);
    return CDYN_OK;
}

/* J = d ydot / dy (2n x 2n) at (t, y): one evaluation at y, then per
 * column the verified extrapolated rate db - dK [q''; lambda] of the
 * model's terms (the file's comment) and its solve with the evaluation's
 * factors. *applies = 0, with nothing written and the object as before
 * the call, when the kernel kept no such factors (the pseudo-inverse below
 * full rank), a column's differences overflow or its solve is not
 * certified: the caller then differences the right-hand side. */
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
        memcpy(x, jac + n, sizeof(double) * (size_t)n);
        memcpy(x + n, mbs->reaction_mult, sizeof(double) * (size_t)m);
        if (cdyn__constraint_stabilized(mbs->kernel)) { /* else the rhs left them out */
            memcpy(phi0, mbs->Phi, sizeof(double) * (size_t)m);
            memcpy(phidot0, mbs->Phi_dot, sizeof(double) * (size_t)m);
        }
        memcpy(ys, y, sizeof(double) * (size_t)size);
        /* the terms at y as loaded (for the second differences and the rounding) */
        const cdyn_constraint *k = mbs->kernel;
        term_rates at_y = {k->mass, k->jac, k->force, k->accel_rhs};
        copy_terms(mbs, &at_y, &w.base);
        residual_rate(mbs, &w.base, 1, x, x + n, -1.0, w.spare, w.noise);
    }
    kkt_step_ctx ctx = {fn, t, y, phi0, phidot0, x, ys, 0};
    for (int j = 0; st == CDYN_OK && *applies && j < size; ++j) {
        double own, h = column_step(y, scale, n, j, step_cap(mbs, NULL, n, j), NULL, &own);
        ctx.j = j;
        st = settle_column(mbs, fn, t, j, y[j], &h, own, n + m, n, TERM_ROUNDING, kkt_step, &ctx,
                           &w, applies);
        if (st == CDYN_OK && *applies &&
            !cdyn__constraint_solve_again(mbs->kernel, w.e, w.e + n, dx, dx + n))
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

/* What a step of a right-hand side's differences needs: f, x and its
 * scratch copy xs, f at x (base), scratch plus and minus (size each). */
typedef struct {
    rhs_fn f;
    double t;
    const double *x, *base;
    double *xs, *plus, *minus;
    int j, size;
} rhs_step_ctx;

/* step_fn of a right-hand side: its central and second differences at
 * step s along x_j; the noise: the larger of its entries and the largest
 * |f| of the same half (speeds, accelerations) at both states. */
static cdyn_status rhs_step(cdyn_mbs *mbs, void *ctx, double s, int k, level_work *w)
{
    const rhs_step_ctx *c = ctx;
    int j = c->j;
    c->xs[j] = c->x[j] + s;
    cdyn_status st = c->f(mbs, c->t, c->xs, c->plus);
    if (st == CDYN_OK) {
        c->xs[j] = c->x[j] - s;
        st = c->f(mbs, c->t, c->xs, c->minus);
    }
    c->xs[j] = c->x[j];
    int half = c->size / 2;
    for (int part = 0; st == CDYN_OK && part < 2; ++part) {
        double largest = 0.0; /* a solve's error is normwise: of its half's largest entry */
        for (int i = part * half; i < (part + 1) * half; ++i) {
            w->odd[k][i] = (c->plus[i] - c->minus[i]) / (2.0 * s);
            w->even[k][i] = (c->plus[i] + c->minus[i] - 2.0 * c->base[i]) / (s * s);
            largest = fmax(largest, fmax(w->noise[i], fmax(fabs(c->plus[i]), fabs(c->minus[i]))));
            if (k == 0) w->odd_size[i] = w->even_size[i] = 0.0; /* no parts: their own size */
        }
        for (int i = part * half; i < (part + 1) * half; ++i) w->noise[i] = largest;
    }
    return st;
}

/* A (size x size, lda) = df/dx at (t, x) by extrapolated central
 * differences of f, each column verified and refined by settle_column
 * (with f's own solve's error RHS_ROUNDING as the rounding; map:
 * step_cap); ends with an evaluation at x itself, so that the object's
 * state (warm starts, reactions) is that of (t, x). Written only on
 * success. */
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
    double wide[2] = {0.0, 0.0}; /* of the consistent state at x, for a partitioned x */
    if (map && st == CDYN_OK) full_magnitudes(mbs->n, mbs->y_part, wide);
    rhs_step_ctx ctx = {f, t, x, base, xs, fp, fm, 0, size};
    for (int j = 0; st == CDYN_OK && j < size; ++j) {
        double own, h = column_step(x, scale, half, j, step_cap(mbs, map, half, j),
                                    map ? wide : NULL, &own);
        int finite = 1;
        ctx.j = j;
        for (int i = 0; i < size; ++i) w.noise[i] = fabs(base[i]);
        st = settle_column(mbs, fn, t, j, x[j], &h, own, size, half, RHS_ROUNDING, rhs_step, &ctx,
                           &w, &finite);
        if (st == CDYN_OK && !finite)
            st = cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE, "%s: the Jacobian overflowed at t = %g",
                            fn, t);
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

/* What a step along a direction u (2n) from the consistent y needs; phidot0:
 * Phi_q q' + Phi_t at y (about 0: y is consistent). */
typedef struct {
    const char *fn;
    double t;
    const double *y, *u, *phidot0, *accel, *mu;
    double *ys;
    int positions;
} partition_step_ctx;

/* step_fn of the dependent speeds' rate: the differences of Phi' =
 * Phi_q q' + Phi_t along the coordinates' direction u at fixed q' (m
 * entries); the noise: the largest |Phi_q q'| + |Phi_t| by parts. */
static cdyn_status velocity_step(cdyn_mbs *mbs, void *ctx, double s, int k, level_work *w)
{
    const partition_step_ctx *c = ctx;
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    double *ys = c->ys;
    memcpy(ys + n, c->y + n, sizeof(double) * (size_t)n);
    for (int i = 0; i < m; ++i) {
        w->odd[k][i] = 0.0;
        w->even[k][i] = -2.0 * c->phidot0[i] / (s * s);
        if (k == 0) w->odd_size[i] = w->even_size[i] = 0.0;
    }
    for (int side = 1; side >= -1; side -= 2) {
        for (int i = 0; i < n; ++i) ys[i] = c->y[i] + side * s * c->u[i];
        cdyn_status st =
            cdyn__mbs_velocity_constraint(mbs, c->fn, c->t, ys, ys + n, mbs->Phi_q, mbs->Phi_dot);
        if (st) return st;
        for (int i = 0; i < m; ++i) {
            double parts = fabs(mbs->Phi_dot[i]);
            for (int col = 0; col < n; ++col)
                parts += fabs(mbs->Phi_q[i + (size_t)col * m1] * ys[n + col]);
            w->noise[i] = fmax(w->noise[i], parts);
            w->odd[k][i] += side / (2.0 * s) * mbs->Phi_dot[i];
            w->even[k][i] += mbs->Phi_dot[i] / (s * s);
        }
    }
    return CDYN_OK;
}

/* step_fn of the partitioned form's terms (M, Phi_q, Q, xi) along u: the
 * residual rates [dQ - dM q'' + dPhi_q^T mu; dxi - dPhi_q q''] of their
 * differences and second differences. */
static cdyn_status partition_step(cdyn_mbs *mbs, void *ctx, double s, int k, level_work *w)
{
    const partition_step_ctx *c = ctx;
    int n = mbs->n, positions = c->positions;
    zero_rates(mbs, &w->sum_odd, positions);
    zero_rates(mbs, &w->sum_even, positions);
    add_terms(mbs, positions, -2.0 / (s * s), &w->base, &w->sum_even);
    term_rates now = {mbs->M, mbs->Phi_q, mbs->Q, mbs->xi_val};
    for (int side = 1; side >= -1; side -= 2) {
        for (int i = 0; i < 2 * n; ++i) c->ys[i] = c->y[i] + side * s * c->u[i];
        cdyn_status st = CDYN_OK;
        if (positions) st = cdyn__mbs_mass(mbs, c->fn, c->t, c->ys);
        if (!st && positions) st = cdyn__mbs_jacobian(mbs, c->fn, c->t, c->ys, mbs->Phi_q);
        if (!st) st = cdyn__mbs_force(mbs, c->fn, c->t, c->ys, c->ys + n);
        if (!st) st = cdyn__mbs_xi(mbs, c->fn, c->t, c->ys, c->ys + n);
        if (st) return st;
        add_point(mbs, positions, side / (2.0 * s), 1.0 / (s * s), &now, &w->sum_odd,
                  &w->sum_even);
    }
    residual_rate(mbs, &w->sum_odd, positions, c->accel, c->mu, 1.0, w->odd[k],
                  k ? NULL : w->odd_size);
    residual_rate(mbs, &w->sum_even, positions, c->accel, c->mu, 1.0, w->even[k],
                  k ? NULL : w->even_size);
    return CDYN_OK;
}

/* A = df/dz (2d x 2d, lda) of the partitioned form at (t, z) by the chain
 * rule (the file's comment): one cdyn_mbs_partition_rhs at z, then per
 * column the direction u (for a coordinate, the dependent speeds from the
 * verified rate of Phi' along V e_k), the verified rates of the terms
 * along it and a solve of M dq'' - Phi_q^T dmu = dQ - dM q'' +
 * dPhi_q^T mu, Phi_q dq'' = dxi - dPhi_q q'' (nullspace.h's signs: mu the
 * multipliers of M q'' - Phi_q^T mu = Q) with the partition's factors at
 * z. *applies = 0, with nothing written and the object as before the
 * call, when a column's differences overflow or its solve is not
 * certified: the caller then differences the partitioned right-hand side. */
static cdyn_status partition_chain_jacobian(cdyn_mbs *mbs, const char *fn, double t,
                                            const double *z, const double *scale, double *A,
                                            int lda, int *applies)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1, d = n - m, size = 2 * d;
    cdyn_nullspace *ns = mbs->partition;
    double *jac = mbs->lin_work, *y = jac + (size_t)size * size, *ys = y + 2 * n, *u = ys + 2 * n,
           *accel = u + 2 * n, *da = accel + n, *unit = da + n, *noise = unit + n,
           *mu = noise + n + m1, *c = mu + m1, *dmu = c + m1, *phidot0 = dmu + m1,
           *space = phidot0 + m1;
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
        memcpy(accel, mbs->vec_n, sizeof(double) * (size_t)n);
        memcpy(mu, mbs->vec_m2, sizeof(double) * (size_t)m);
        /* the terms at y (for the second differences and the rounding) */
        term_rates at_y = {mbs->M, mbs->Phi_q, mbs->Q, mbs->xi_val};
        copy_terms(mbs, &at_y, &w.base);
        residual_rate(mbs, &w.base, 1, accel, mu, 1.0, w.spare, noise);
        st = cdyn__mbs_velocity_constraint(mbs, fn, t, y, y + n, mbs->jac_work, phidot0);
    }
    partition_step_ctx ctx = {fn, t, y, u, phidot0, accel, mu, ys, 0};
    double wide[2] = {0.0, 0.0};
    if (st == CDYN_OK) full_magnitudes(n, y, wide);
    for (int j = 0; st == CDYN_OK && *applies && j < size; ++j) {
        int positions = j < d, k = j % d;
        double own, cap = step_cap(mbs, mbs->ind_index, d, j);
        double h = column_step(z, scale, d, j, cap, wide, &own);
        memset(unit, 0, sizeof(double) * (size_t)d);
        unit[k] = 1.0;
        memset(u, 0, sizeof(double) * 2 * (size_t)n);
        cdyn_status basis = cdyn_nullspace_expand(ns, unit, positions ? u : u + n); /* V e_k */
        ctx.positions = positions;
        if (!basis && positions) { /* the dependent speeds: Phi_q dq' = -dPhi'/dq V e_k */
            memset(unit, 0, sizeof(double) * (size_t)d);
            memset(w.noise, 0, sizeof(double) * (size_t)m);
            st = settle_column(mbs, fn, t, j, z[j], &h, own, m, 0, TERM_ROUNDING, velocity_step,
                               &ctx, &w, applies);
            if (h <= own) own = 0.0; /* the speeds' step fell back to it: so do the terms' */
            if (!st && *applies) basis = cdyn_nullspace_complete(ns, unit, w.e, u + n);
        }
        if (basis) /* an overflowing direction */
            st = cdyn__fail(mbs->msg, basis, "%s at t = %g: %s", fn, t,
                            cdyn_nullspace_last_error(ns));
        if (st || !*applies) break;
        memcpy(w.noise, noise, sizeof(double) * (size_t)(n + m));
        st = settle_column(mbs, fn, t, j, z[j], &h, own, n + m, n, TERM_ROUNDING, partition_step,
                           &ctx, &w, applies);
        if (st || !*applies) break;
        /* M dq'' - Phi_q^T dmu = F, Phi_q dq'' = c: F = dQ - dM q'' + dPhi_q^T mu,
         * c = -(dxi - dPhi_q q''), the extrapolated rates' */
        for (int i = 0; i < m; ++i) c[i] = -w.e[n + i];
        if (cdyn_nullspace_solve(ns, w.base.dM, n, w.e, c, da, dmu) != CDYN_OK) {
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
