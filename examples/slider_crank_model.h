/*
 * slider_crank_model.h - the slider crank of THEORY T6.1 (the published
 * MapleSim M and F) with the constraints derived in examples/slider_crank.c;
 * shared by that example and examples/cvode_slider_crank.c.
 *
 * q = (s, theta1, theta3): slider position, crank angle, rod angle (from +x,
 * of the vector from the crank pin A to the slider pin B).
 *   Phi1 = r cos theta1 + L cos theta3 - s,   Phi2 = r sin theta1 + L sin theta3.
 */
#ifndef CDYN_EXAMPLE_SLIDER_CRANK_MODEL_H
#define CDYN_EXAMPLE_SLIDER_CRANK_MODEL_H

#include <math.h>

enum { N = 3, M_CON = 2, NY = 2 * N, S = 0, TH1 = 1, TH3 = 2 };

#define CRANK 0.375 /* r: crank pin distance [m] */
#define ROD 1.0     /* L: rod pin distance [m] */

static inline int mass(double t, const double *q, double *M, int ldm, void *user)
{
    (void)t, (void)user;
    M[TH1 + S * ldm] = M[S + TH1 * ldm] = M[TH1 + TH3 * ldm] = M[TH3 + TH1 * ldm] = 0.0;
    M[S + S * ldm] = 5.0 / 2.0;
    M[TH1 + TH1 * ldm] = 3.0 / 400.0;
    M[TH3 + TH3 * ldm] = 129.0 / 1000.0;
    M[S + TH3 * ldm] = M[TH3 + S * ldm] = sin(q[TH3]) / 4.0;
    return 0;
}

static inline int force(double t, const double *q, const double *qdot, double *F, void *user)
{
    (void)t, (void)user;
    F[S] = -qdot[TH3] * qdot[TH3] * cos(q[TH3]) / 4.0;
    F[TH1] = -2943.0 * cos(q[TH1]) / 10000.0;
    F[TH3] = 981.0 * cos(q[TH3]) / 400.0;
    return 0;
}

static inline int phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = CRANK * cos(q[TH1]) + ROD * cos(q[TH3]) - q[S];
    Phi[1] = CRANK * sin(q[TH1]) + ROD * sin(q[TH3]);
    return 0;
}

static inline int jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0 + S * ld] = -1.0, J[0 + TH1 * ld] = -CRANK * sin(q[TH1]);
    J[1 + S * ld] = 0.0, J[1 + TH1 * ld] = CRANK * cos(q[TH1]);
    J[0 + TH3 * ld] = -ROD * sin(q[TH3]), J[1 + TH3 * ld] = ROD * cos(q[TH3]);
    return 0;
}

static inline int phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = Phi_t[1] = 0.0;
    return 0;
}

/* xi = -(Phi_q q')_q q' (T4.1; Phi_t = 0) */
static inline int xi(double t, const double *q, const double *qdot, double *x, void *user)
{
    (void)t, (void)user;
    double w1 = qdot[TH1] * qdot[TH1], w3 = qdot[TH3] * qdot[TH3];
    x[0] = CRANK * cos(q[TH1]) * w1 + ROD * cos(q[TH3]) * w3;
    x[1] = CRANK * sin(q[TH1]) * w1 + ROD * sin(q[TH3]) * w3;
    return 0;
}

#endif
