#ifndef CDYN_BENCH_PENDULUM_H
#define CDYN_BENCH_PENDULUM_H

#include <math.h>

/* The Cartesian pendulum shared by bench_mechanics and bench_projection:
 * cdyn's model callbacks, the hand-written baseline (closed-form KKT and
 * radial projection) and the exact solution.
 *
 * A point mass on a massless rod, pivot at the origin, gravity along -y:
 * q = (x, y), M = m I, Q = (0, -m g), Phi = x^2 + y^2 - l^2,
 * Phi_q = [2x 2y], xi = -2 (x'^2 + y'^2) (T4.1, Phi_t = 0). */
#define PEND_L 1.0
#define PEND_MASS 1.0
#define PEND_G 9.81
#define PEND_THETA0 0.5 /* rad from the downward vertical, released at rest */

static inline int pend_mass(double t, const double *q, double *Mq, int ldm, void *user)
{
    (void)t, (void)q, (void)user;
    Mq[0] = Mq[1 + ldm] = PEND_MASS;
    Mq[1] = Mq[ldm] = 0.0;
    return 0;
}

static inline int pend_force(double t, const double *q, const double *qdot, double *Qv,
                             void *user)
{
    (void)t, (void)q, (void)qdot, (void)user;
    Qv[0] = 0.0;
    Qv[1] = -PEND_MASS * PEND_G;
    return 0;
}

static inline int pend_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = q[0] * q[0] + q[1] * q[1] - PEND_L * PEND_L;
    return 0;
}

static inline int pend_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0] = 2.0 * q[0];
    J[ld] = 2.0 * q[1];
    return 0;
}

static inline int pend_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = 0.0;
    return 0;
}

static inline int pend_xi(double t, const double *q, const double *qdot, double *x, void *user)
{
    (void)t, (void)q, (void)user;
    x[0] = -2.0 * (qdot[0] * qdot[0] + qdot[1] * qdot[1]);
    return 0;
}

/* Hand-written right-hand side: the KKT system m q'' + 2 q lambda = Q,
 * 2 q . q'' = xi in closed form, lambda = (2 q . Q - m xi) / (4 |q|^2). */
static inline void pend_hand_rhs(const double *y, double *yd)
{
    double x = y[0], z = y[1], u = y[2], v = y[3];
    double xi2 = -2.0 * (u * u + v * v), qQ = -PEND_MASS * PEND_G * z;
    double lambda = (2.0 * qQ - PEND_MASS * xi2) / (4.0 * (x * x + z * z));
    yd[0] = u;
    yd[1] = v;
    yd[2] = -2.0 * x * lambda / PEND_MASS;
    yd[3] = (-PEND_MASS * PEND_G - 2.0 * z * lambda) / PEND_MASS;
}

/* Hand-written projection: q radially onto the circle (the minimum-norm
 * and, with M = m I, the mass-metric projection), then the radial part of
 * q' removed. */
static inline void pend_hand_project(double *y)
{
    double r = sqrt(y[0] * y[0] + y[1] * y[1]), f = PEND_L / r;
    y[0] *= f;
    y[1] *= f;
    double radial = (y[0] * y[2] + y[1] * y[3]) / (PEND_L * PEND_L);
    y[2] -= radial * y[0];
    y[3] -= radial * y[1];
}

/* Exact pendulum: sin(theta / 2) = k sn(K - w t; k), k = sin(theta0 / 2),
 * w = sqrt(g / l), sn by the arithmetic-geometric mean (Abramowitz &
 * Stegun 16.4.3; K = pi / (2 a_N)). */
static inline double pend_exact_theta(double t)
{
    enum { MAXIT = 20 };
    double k = sin(0.5 * PEND_THETA0), w = sqrt(PEND_G / PEND_L);
    double a[MAXIT + 1], c[MAXIT + 1], b = sqrt(1.0 - k * k);
    int it = 0;
    a[0] = 1.0;
    c[0] = k;
    while (it < MAXIT && fabs(c[it]) > 1e-16 * a[it]) {
        double an = a[it];
        a[it + 1] = 0.5 * (an + b);
        c[it + 1] = 0.5 * (an - b);
        b = sqrt(an * b);
        ++it;
    }
    double K = (0.5 * 3.14159265358979323846) / a[it];
    double phi_n = ldexp(a[it] * (K - w * t), it);
    for (int i = it; i > 0; --i) phi_n = 0.5 * (phi_n + asin(c[i] / a[i] * sin(phi_n)));
    return 2.0 * asin(k * sin(phi_n));
}

static inline void pend_initial(double *y)
{
    y[0] = PEND_L * sin(PEND_THETA0);
    y[1] = -PEND_L * cos(PEND_THETA0);
    y[2] = y[3] = 0.0;
}

#endif
