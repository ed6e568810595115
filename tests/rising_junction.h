/* A test model shared by test_dae.c and test_sparse_singular.c: the closed
 * junction of test_dae's hydraulic case (THEORY T3.4) with tanks rising at
 * different rates and a decoupled massless state s. States v = (Q1, Qa,
 * Qb, pJ, s), M = diag(2, 0, 0, 0, 0):
 *     2 Q1' = 10 - 0.5 Q1 - pJ
 *         0 = pJ - (1 + t) - 3 Qa|Qa|            (tank 2 rising at 1)
 *         0 = pJ - (p3 + (1 + d) t) - 3 Qb|Qb|  (tank 3 rising at 1 + d)
 *         0 = Q1 - Qa - Qb
 *         0 = s - C t
 * With p3 = 1 and Q1 = Qa = Qb = 0 both branches are closed: the rates need
 * pJ' = 1 and pJ' = 1 + d, inconsistent for d != 0 however large s' = C
 * is; for d = 0 they are pJ' = 1, Qa' = Qb' = Q1' / 2 = 2.25, s' = C. */
#ifndef CDYN_TEST_RISING_JUNCTION_H
#define CDYN_TEST_RISING_JUNCTION_H

#include <math.h>

typedef struct {
    double c, d, p3;
} rising;

static inline int rising_force(double t, const double *v, double *F, void *user)
{
    const rising *u = user;
    F[0] = 10.0 - 0.5 * v[0] - v[3];
    F[1] = v[3] - 1.0 - t - 3.0 * v[1] * fabs(v[1]);
    F[2] = v[3] - u->p3 - (1.0 + u->d) * t - 3.0 * v[2] * fabs(v[2]);
    F[3] = v[0] - v[1] - v[2];
    F[4] = v[4] - u->c * t;
    return 0;
}

/* dF/dv, dense (column-major, leading dimension ld). */
static inline int rising_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    for (int j = 0; j < 5; ++j)
        for (int i = 0; i < 5; ++i) J[i + j * ld] = 0.0;
    J[0] = -0.5, J[0 + 3 * ld] = -1.0;
    J[1 + 1 * ld] = -6.0 * fabs(v[1]), J[1 + 3 * ld] = 1.0;
    J[2 + 2 * ld] = -6.0 * fabs(v[2]), J[2 + 3 * ld] = 1.0;
    J[3] = 1.0, J[3 + 1 * ld] = -1.0, J[3 + 2 * ld] = -1.0;
    J[4 + 4 * ld] = 1.0;
    return 0;
}

static inline int rising_time(double t, const double *v, double *dFdt, void *user)
{
    const rising *u = user;
    (void)t, (void)v;
    dFdt[0] = dFdt[3] = 0.0;
    dFdt[1] = -1.0;
    dFdt[2] = -(1.0 + u->d);
    dFdt[4] = -u->c;
    return 0;
}

#endif
