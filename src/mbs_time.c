/* The time terms of a mechanism (THEORY T4.1): Phi_t, the velocity
 * constraint Phi' = Phi_q q' + Phi_t and xi, from the caller's callbacks or,
 * when those are not given, by differences along the motion with the step
 * chosen per derivative order and refined by Richardson extrapolation. */
#include "difference_tableau.h"
#include "linalg.h"
#include "mbs_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* What a difference quotient differentiates, as a function of tau. */
enum path_kind {
    PHI_IN_TIME,      /* Phi(q, t + tau): Phi_t */
    VELOCITY_ON_PATH, /* Phi'(q + tau q', t + tau): -xi (order 1) */
    PHI_ON_PATH       /* Phi(q + tau q', t + tau): -xi (order 2) */
};

/* f(tau) (m entries) into out; tau must be representable at t. */
static cdyn_status evaluate(cdyn_mbs *mbs, const char *fn, enum path_kind kind, double t,
                            const double *q, const double *qdot, double tau, double *out)
{
    if (kind == PHI_IN_TIME) return cdyn__mbs_phi(mbs, fn, t + tau, q, out);
    for (int j = 0; j < mbs->n; ++j) mbs->q_work[j] = q[j] + tau * qdot[j];
    if (kind == PHI_ON_PATH) return cdyn__mbs_phi(mbs, fn, t + tau, mbs->q_work, out);
    return cdyn__mbs_velocity_constraint(mbs, fn, t + tau, mbs->q_work, qdot, mbs->jac_work, out);
}

/* A point on the path of a derivative (evaluate's arguments). */
typedef struct {
    cdyn_mbs *mbs;
    const char *fn;
    enum path_kind kind;
    double t;
    const double *q, *qdot;
} path_point;

/* cdyn__offset_fn of a path: f(tau) at the point's (t, q, qdot). */
static cdyn_status path_offset(void *ctx, double tau, double *out)
{
    const path_point *p = ctx;
    return evaluate(p->mbs, p->fn, p->kind, p->t, p->q, p->qdot, tau, out);
}

/* Phi(q, t + h0) into plus, Phi(q, t - h0) into minus and Phi(q, t + h1)
 * into at_h1 for the tableau's first two steps (h0 = c, h1 = c/4 as they
 * are representable at t); *same when all three are the same bits at
 * three distinct times (at a t so large that the steps round to 0 or to
 * each other, never: the tableau then reports its quotients). */
static cdyn_status time_independent(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                                    double c, double *plus, double *minus, double *at_h1,
                                    int *same)
{
    volatile double ahead = t + c, ahead1 = t + 0.25 * c; /* as in the tableau */
    double h0 = ahead - t, h1 = ahead1 - t;
    cdyn_status st = cdyn__mbs_phi(mbs, fn, t + h0, q, plus);
    if (st == CDYN_OK) st = cdyn__mbs_phi(mbs, fn, t - h0, q, minus);
    if (st == CDYN_OK) st = cdyn__mbs_phi(mbs, fn, t + h1, q, at_h1);
    if (st != CDYN_OK) return st;
    size_t bytes = sizeof(double) * (size_t)mbs->m;
    *same = h1 > 0.0 && h1 < h0 && memcmp(plus, minus, bytes) == 0 &&
            memcmp(plus, at_h1, bytes) == 0;
    return CDYN_OK;
}

/* The rounding of a path's Phi values, by the magnitudes of their terms
 * in the coordinates (jac: Phi_q at or near (t, q)): Phi(q + tau q', t)
 * carries about eps sum_j |Phi_ij| (|q_j| + |tau q'_j|), Phi_q q' + Phi_t
 * about eps sum_j |Phi_ij q'_j|. A prescribed motion's own terms are left
 * out: on the constraint they are about as large as the coordinates'. */
static cdyn__tableau_rounding rounding_of(cdyn_mbs *mbs, enum path_kind kind, const double *q,
                                          const double *qdot, const double *jac)
{
    int n = mbs->n, m = mbs->m, m1 = mbs->m1;
    double *terms = mbs->fd_work + (size_t)CDYN__TABLEAU_WORK(CDYN__FD_LEVELS) * m1;
    double *rates = terms + m1;
    const double *size = kind == VELOCITY_ON_PATH ? qdot : q;
    for (int i = 0; i < m; ++i) terms[i] = rates[i] = 0.0;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double entry = fabs(jac[i + (size_t)j * m1]);
            terms[i] += entry * fabs(size[j]);
            if (kind == PHI_ON_PATH) rates[i] += entry * fabs(qdot[j]);
        }
    cdyn__tableau_rounding noise = {terms, kind == PHI_ON_PATH ? rates : NULL};
    return noise;
}

/* The derivative of order 1 or 2 of f at tau = 0 (THEORY T4.1) into out,
 * by central differences D_k with steps h_k = c T 4^-k extrapolated to the
 * limit h -> 0 (Richardson, in a tableau: the error of a central
 * difference is a series in h^2, so T[k][j] = T[k][j-1] + (T[k][j-1] -
 * T[k-1][j-1]) / (16^j - 1) removes its terms one by one), row by row of
 * Phi (cdyn__tableau_derivative; rounding_of sizes a row's rounding). Each
 * entry's error is estimated by its distance to its two parents; the
 * entry with the smallest estimate relative to its own size wins, and a
 * row stops once its new diagonal entry is twice as far off as its best
 * (rounding has taken over). Relative, because steps far longer than the scale the
 * constraints vary on (an angle of many turns, whose T below is |q| /
 * |q'|) give second differences of about |Phi| / h^2, near 0 and close to
 * each other: at 8.4e4 rad and 92 rad/s such an entry, -1e-3 with an
 * estimate of 3e-7, beat the converged 4374 with 4.6e-6 and made the
 * accelerations wrong in sign with CDYN_OK. So the step
 * adapts to the time scale of the motion and to the rounding of the
 * caller's functions. c = eps^(1/5) (order 1) or eps^(1/6) (order 2). T is
 * a time scale: along the motion, the larger of 1 s and the motion's own
 * |q|_inf / |q'|_inf (the time it takes to move by its own size, at most
 * 1e4 s), so that the first step neither drowns a slow, large motion in
 * rounding nor depends on the units of length or time; but 1 s when Phi
 * depends on t explicitly, whose time scale cdyn cannot know. The levels
 * reach down to c min(1 s, |q|_inf / |q'|_inf) / 64. For Phi_t alone,
 * T = 1 s and four levels, and the first three evaluations (t - c, t + c,
 * t + c/4: unequally spaced) come first: when Phi gives the same bits at
 * all three it does not depend on t there (a scleronomic constraint), and
 * Phi_t = 0 exactly, without the other five; else the tableau goes on with
 * them. */
static cdyn_status path_derivative(cdyn_mbs *mbs, const char *fn, enum path_kind kind,
                                   int order, double t, const double *q, const double *qdot,
                                   const double *jac, double *out)
{
    int m = mbs->m, m1 = mbs->m1;
    cdyn__tableau_work work = cdyn__tableau_layout(mbs->fd_work, (size_t)m1, CDYN__FD_LEVELS);
    double *plus = work.plus, *minus = work.minus, *center = work.center;
    double c = order == 1 ? 7.4e-4 : 2.4e-3, size = 0.0, speed = 0.0;
    for (int j = 0; kind != PHI_IN_TIME && j < mbs->n; ++j) {
        size = fmax(size, fabs(q[j]));
        speed = fmax(speed, fabs(qdot[j]));
    }
    /* T [s], at most 1e4 s: the tableau's 12 levels must still reach the
     * steps a time dependence that looks constant here (a switch) needs */
    double scale = speed > 0.0 && size > 0.0 ? fmin(size / speed, 1e4) : 1.0;
    cdyn_status st = CDYN_OK;
    if (scale > 1.0) {
        /* steps beyond 1 s only where Phi has no explicit time dependence:
         * a scleronomic callback ignores t, so Phi(q, t), Phi(q, t + a c)
         * and Phi(q, t - b c) agree bit for bit (three points, unequally
         * spaced: two can agree by symmetry about an extremum); a
         * prescribed motion keeps its 1 s scale. a and b are no round
         * fractions: with t + c and t - c/3, a prescribed sinusoid of a
         * multiple of 1250 Hz (5, 20, 100 kHz) at its flat extremum gave
         * the same bits there, and the steps grew to 24 s (q'' 67 % off,
         * with CDYN_OK) */
        st = cdyn__mbs_phi(mbs, fn, t, q, center);
        if (st == CDYN_OK) st = cdyn__mbs_phi(mbs, fn, t + 0.7734 * c, q, plus);
        if (st == CDYN_OK) st = cdyn__mbs_phi(mbs, fn, t - 0.3519 * c, q, minus);
        if (st != CDYN_OK) return st;
        size_t bytes = sizeof(double) * (size_t)m;
        if (memcmp(plus, center, bytes) != 0 || memcmp(minus, center, bytes) != 0) scale = 1.0;
    }
    double longest = fmax(scale, 1.0), shortest = fmin(scale, 1.0);
    int levels = 4;
    for (double reach = longest / shortest; reach > 1.0 && levels < CDYN__FD_LEVELS; reach *= 0.25)
        ++levels;
    c *= longest;
    if (order == 2) st = evaluate(mbs, fn, kind, t, q, qdot, 0.0, center);
    if (kind == PHI_IN_TIME) { /* levels 0 and 1's t + h first (center: order 1) */
        int same = 0;
        st = time_independent(mbs, fn, t, q, c, plus, minus, center, &same);
        if (st != CDYN_OK) return st;
        if (same) {
            for (int i = 0; i < m; ++i) out[i] = 0.0;
            return CDYN_OK;
        }
    }
    path_point at = {mbs, fn, kind, t, q, qdot};
    cdyn__tableau_rounding noise = rounding_of(mbs, kind, q, qdot, jac);
    double best = INFINITY;
    if (st == CDYN_OK)
        st = cdyn__tableau_derivative(order, m, m1, t, c, levels, CDYN__FD_LEVELS,
                                      kind == PHI_IN_TIME, &noise, path_offset, &at, &work, out,
                                      &best);
    if (st == CDYN_OK && !isfinite(best))
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE,
                          "%s: the difference quotients of the time terms are not finite", fn);
    if (st == CDYN_OK && best > mbs->time_error) mbs->time_error = best; /* mbs_linearize.c */
    return st;
}

cdyn_status cdyn__mbs_phi_t(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                            const double *jac, double *out)
{
    int m = mbs->m;
    if (mbs->phi_t) {
        mbs->guard.in_callback++;
        mbs->counters.phi_t_evaluations++;
        int code = mbs->phi_t(t, q, out, mbs->user);
        mbs->guard.in_callback--;
        return cdyn__mbs_callback_result(mbs, fn, "phi_t", code, m, 1, out, mbs->m1);
    }
    return path_derivative(mbs, fn, PHI_IN_TIME, 1, t, q, NULL, jac, out);
}

cdyn_status cdyn__mbs_velocity_constraint(cdyn_mbs *mbs, const char *fn, double t,
                                          const double *q, const double *qdot, double *jac,
                                          double *out)
{
    cdyn_status st = cdyn__mbs_jacobian(mbs, fn, t, q, jac);
    if (st == CDYN_OK) st = cdyn__mbs_phi_t(mbs, fn, t, q, jac, out);
    if (st != CDYN_OK) return st;
    cdyn__gemv('N', mbs->m, mbs->n, 1.0, jac, mbs->m1, qdot, 1.0, out);
    if (mbs->m > 0 && cdyn__first_nonfinite(mbs->m, 1, out, mbs->m1) >= 0)
        return cdyn__fail(mbs->msg, CDYN_ERR_NONFINITE,
                          "%s: Phi_q q' + Phi_t overflowed (inputs too large)", fn);
    return CDYN_OK;
}

cdyn_status cdyn__mbs_xi(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                         const double *qdot)
{
    int m = mbs->m;
    double *xi = mbs->xi_val;
    if (mbs->xi) {
        mbs->guard.in_callback++;
        mbs->counters.xi_evaluations++;
        int code = mbs->xi(t, q, qdot, xi, mbs->user);
        mbs->guard.in_callback--;
        return cdyn__mbs_callback_result(mbs, fn, "xi", code, m, 1, xi, mbs->m1);
    }
    /* T4.1: xi = -d/dtau (Phi_q q' + Phi_t) along (q + tau q', t + tau), or,
     * without Phi_t, -d^2/dtau^2 Phi along that path */
    const double *jac = mbs->Phi_q;
    cdyn_status st =
        mbs->phi_t ? path_derivative(mbs, fn, VELOCITY_ON_PATH, 1, t, q, qdot, jac, xi)
                   : path_derivative(mbs, fn, PHI_ON_PATH, 2, t, q, qdot, jac, xi);
    if (st != CDYN_OK) return st;
    for (int i = 0; i < m; ++i) xi[i] = -xi[i];
    return CDYN_OK;
}
