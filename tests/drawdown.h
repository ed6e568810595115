/* A test model shared by test_dae.c and test_sparse_dae.c (the third
 * review's drawdown): a reservoir of head 1000 m, P(t) = P0 - b t with
 * P0 = 9.81e6 Pa drawn down slowly, feeds a storage node p_s (compliance
 * C) through an orifice whose flow Q is algebraic; the node leaks k p_s.
 * States v = (p_s, Q), M = diag(C, 0):
 *     C p_s' = Q - k p_s
 *         0 = P(t) - p_s - R Q |Q|
 * in units: pressures times sp, flows times sq (R, C, k and b follow).
 * By hand, differentiating the second equation at the returned state:
 *     Q' = (P'(t) - p_s') / (2 R |Q|),   P'(t) = -b,
 * with p_s' = (Q - k p_s) / C, the first equation's own value. The terms
 * of the second equation are about 1e7 Pa while its value, at a
 * consistent state, is the residual: dF/dt by differences must be judged
 * against the rounding of the terms. drawdown_at() picks k so that p_s'
 * is about 0 (a steady draw, where Q' is the time term alone) or, with
 * `leak`, so that p_s' = -leak Q / C. */
#ifndef CDYN_TEST_DRAWDOWN_H
#define CDYN_TEST_DRAWDOWN_H

#include <math.h>

typedef struct {
    double P0, b, R, k, C, sp, sq;
} drawdown;

static inline int drawdown_force(double t, const double *v, double *F, void *user)
{
    const drawdown *m = user;
    F[0] = v[1] - m->k * v[0];
    F[1] = (m->P0 - m->b * t) - v[0] - m->R * v[1] * fabs(v[1]);
    return 0;
}

/* dF/dv, dense (column-major, leading dimension ld). */
static inline int drawdown_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    const drawdown *m = user;
    (void)t;
    J[0] = -m->k, J[1] = -1.0;
    J[ld] = 1.0, J[ld + 1] = -2.0 * m->R * fabs(v[1]);
    return 0;
}

/* dF/dv on the pattern colptr = {0, 2, 4}, rowind = {0, 1, 0, 1}. */
static inline int drawdown_values(double t, const double *v, double *values, void *user)
{
    return drawdown_jacobian(t, v, values, 2, user);
}

static inline int drawdown_time(double t, const double *v, double *dFdt, void *user)
{
    const drawdown *m = user;
    (void)t, (void)v;
    dFdt[0] = 0.0, dFdt[1] = -m->b;
    return 0;
}

/* The model at t with a flow of 1e-3 m^3/s (in units sp, sq; b in Pa/s),
 * and a start v (p_s consistent with that flow, Q 1 % off). */
static inline drawdown drawdown_at(double b, double t, double sp, double sq, double leak,
                                   double *v)
{
    drawdown m = {9.81e6 * sp, b * sp, 1e12 * sp / (sq * sq), 0.0, 1e-10 * sq / sp, sp, sq};
    double Q = 1e-3 * sq, ps = (m.P0 - m.b * t) - m.R * Q * Q;
    m.k = (1.0 - leak) * Q / ps;
    v[0] = ps, v[1] = 1.01 * Q;
    return m;
}

/* The relative error of a returned Q' (vdot[1]) at the returned state v
 * against the hand rate, in long double. */
static inline double drawdown_rate_error(const drawdown *m, double t, const double *v,
                                         double Qdot)
{
    double F[2];
    drawdown_force(t, v, F, (void *)m);
    long double psdot = (long double)F[0] / m->C;
    long double hand = (-(long double)m->b - psdot) / (2.0L * m->R * fabsl((long double)v[1]));
    return (double)(fabsl((long double)Qdot - hand) / fabsl(hand));
}

#endif
