/* Mechanisms shared by the suites, each derived by hand in its comment
 * (tests/models.c). */
#ifndef CDYN_TEST_MODELS_H
#define CDYN_TEST_MODELS_H

#include <cdyn/mbs.h>

/* A planar pendulum in Cartesian coordinates q = (x, y), pivot at the
 * origin, bob mass m, rod l, gravity g along -y (THEORY T4.1):
 *   M = m I, Q = (0, -m g), Phi = x^2 + y^2 - l^2, Phi_q = [2x 2y],
 *   Phi_t = 0, xi = -(Phi_q q')_q q' = -2 (x'^2 + y'^2).
 * On the circle x = l sin th, y = -l cos th (th from the bottom) and
 * th'' = -(g / l) sin th. The callbacks take a tm_pendulum as user data. */
typedef struct {
    double m, l, g;
} tm_pendulum;

int tm_pendulum_mass(double t, const double *q, double *M, int ld, void *user);
int tm_pendulum_force(double t, const double *q, const double *qd, double *Q, void *user);
int tm_pendulum_phi(double t, const double *q, double *Phi, void *user);
int tm_pendulum_jacobian(double t, const double *q, double *J, int ld, void *user);
int tm_pendulum_phi_t(double t, const double *q, double *Phi_t, void *user);
int tm_pendulum_xi(double t, const double *q, const double *qd, double *xi, void *user);

/* Register the model on a 2 x 1 mbs: every callback, or (time_terms 0)
 * without Phi_t and xi, which cdyn then differences. Returns the status of
 * the registration. p must outlive the model. */
cdyn_status tm_pendulum_set(cdyn_mbs *mbs, const tm_pendulum *p, int time_terms);

/* y = (q, q') (4) on the circle at angle th and rate om. */
void tm_pendulum_state(const tm_pendulum *p, double th, double om, double *y);

#endif
