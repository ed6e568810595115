/* The shared mechanisms of tests/models.h. */
#include "models.h"

#include <math.h>

int tm_pendulum_mass(double t, const double *q, double *M, int ld, void *user)
{
    const tm_pendulum *p = user;
    (void)t, (void)q;
    M[0] = M[1 + ld] = p->m;
    M[1] = M[ld] = 0.0;
    return 0;
}

int tm_pendulum_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    const tm_pendulum *p = user;
    (void)t, (void)q, (void)qd;
    Q[0] = 0.0;
    Q[1] = -p->m * p->g;
    return 0;
}

int tm_pendulum_phi(double t, const double *q, double *Phi, void *user)
{
    const tm_pendulum *p = user;
    (void)t;
    Phi[0] = q[0] * q[0] + q[1] * q[1] - p->l * p->l;
    return 0;
}

int tm_pendulum_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0] = 2.0 * q[0];
    J[ld] = 2.0 * q[1];
    return 0;
}

int tm_pendulum_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = 0.0;
    return 0;
}

int tm_pendulum_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    (void)t, (void)q, (void)user;
    xi[0] = -2.0 * (qd[0] * qd[0] + qd[1] * qd[1]);
    return 0;
}

cdyn_status tm_pendulum_set(cdyn_mbs *mbs, const tm_pendulum *p, int time_terms)
{
    cdyn_status st = cdyn_mbs_set_model(mbs, tm_pendulum_mass, tm_pendulum_force, tm_pendulum_phi,
                                        tm_pendulum_jacobian, (void *)p);
    if (st == CDYN_OK && time_terms)
        st = cdyn_mbs_set_time_terms(mbs, tm_pendulum_phi_t, tm_pendulum_xi);
    return st;
}

void tm_pendulum_state(const tm_pendulum *p, double th, double om, double *y)
{
    y[0] = p->l * sin(th);
    y[1] = -p->l * cos(th);
    y[2] = p->l * om * cos(th);
    y[3] = p->l * om * sin(th);
}
