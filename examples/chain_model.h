/*
 * chain_model.h - a planar chain of N rigid links in absolute coordinates
 * (THEORY T4.1, T4.3), for the sparse backend: shared by examples/chain.c
 * and tests/bench/bench_network.c.
 *
 * Link i (mass m, length l, inertia J = m l^2 / 12 about its centre) has
 * coordinates q_i = (x_i, y_i, theta_i) of its centre; its axis is
 * u(theta) = (sin theta, -cos theta) (theta = 0 hangs straight down), its
 * top end r_i - (l/2) u_i and its bottom end r_i + (l/2) u_i. Joint i (two
 * rows 2i, 2i + 1) pins the top of link i to the bottom of link i - 1, and
 * joint 0 the top of link 0 to the origin:
 *     Phi_i = r_i - (l/2) u_i - (r_{i-1} + (l/2) u_{i-1})     (r_{-1} + ... = 0).
 * With u' = du/dtheta = (cos theta, sin theta) and u'' = -u:
 *     dPhi_i/dr_i = I,  dPhi_i/dtheta_i = -(l/2) u'_i,
 *     dPhi_i/dr_{i-1} = -I,  dPhi_i/dtheta_{i-1} = -(l/2) u'_{i-1},
 * and Phi_q q'' = gamma with
 *     gamma_i = -(l/2) (u_i theta_i'^2 + u_{i-1} theta_{i-1}'^2).
 * Dynamics (gravity g along -y): M q'' = Q + Phi_q^T lambda, M =
 * diag(m, m, J, ...), Q_i = (0, -m g, 0); lambda_i is the force that link
 * i - 1 (or the support) exerts on link i at joint i.
 *
 * Phi_q in compressed sparse columns (n = 3N columns, m = 2N rows): the
 * columns of link i hold rows of joints i and i + 1 (when i + 1 < N).
 */
#ifndef CDYN_EXAMPLE_CHAIN_MODEL_H
#define CDYN_EXAMPLE_CHAIN_MODEL_H

#include <math.h>

#define CHAIN_G 9.81 /* m/s^2 */

typedef struct {
    int links;            /* N */
    double mass, length;  /* per link: kg, m */
} chain_model;

/* Pattern of Phi_q: colptr (3N + 1), rowind (at most 8N entries). */
static inline void chain_pattern(const chain_model *c, int *colptr, int *rowind)
{
    int nnz = 0;
    colptr[0] = 0;
    for (int i = 0; i < c->links; ++i)
        for (int d = 0; d < 3; ++d) {
            int next = i + 1 < c->links;
            if (d < 2) { /* x or y: one row of joint i, one of joint i + 1 */
                rowind[nnz++] = 2 * i + d;
                if (next) rowind[nnz++] = 2 * (i + 1) + d;
            } else { /* theta: both rows of joint i and of joint i + 1 */
                rowind[nnz++] = 2 * i;
                rowind[nnz++] = 2 * i + 1;
                if (next) {
                    rowind[nnz++] = 2 * (i + 1);
                    rowind[nnz++] = 2 * (i + 1) + 1;
                }
            }
            colptr[3 * i + d + 1] = nnz;
        }
}

/* Values of Phi_q at q, in the pattern's order. */
static inline void chain_jacobian(const chain_model *c, const double *q, double *values)
{
    double h = 0.5 * c->length;
    int nnz = 0;
    for (int i = 0; i < c->links; ++i) {
        int next = i + 1 < c->links;
        double cth = cos(q[3 * i + 2]), sth = sin(q[3 * i + 2]);
        values[nnz++] = 1.0; /* x_i in joint i */
        if (next) values[nnz++] = -1.0;
        values[nnz++] = 1.0; /* y_i */
        if (next) values[nnz++] = -1.0;
        values[nnz++] = -h * cth; /* theta_i: top of link i in joint i */
        values[nnz++] = -h * sth;
        if (next) { /* bottom of link i in joint i + 1 */
            values[nnz++] = -h * cth;
            values[nnz++] = -h * sth;
        }
    }
}

/* Phi(q) (2N). */
static inline void chain_residual(const chain_model *c, const double *q, double *phi)
{
    double h = 0.5 * c->length, px = 0.0, py = 0.0; /* bottom of the previous link */
    for (int i = 0; i < c->links; ++i) {
        double ux = sin(q[3 * i + 2]), uy = -cos(q[3 * i + 2]);
        phi[2 * i] = q[3 * i] - h * ux - px;
        phi[2 * i + 1] = q[3 * i + 1] - h * uy - py;
        px = q[3 * i] + h * ux;
        py = q[3 * i + 1] + h * uy;
    }
}

/* gamma(q, q') (2N) of Phi_q q'' = gamma. */
static inline void chain_gamma(const chain_model *c, const double *q, const double *qd,
                               double *gamma)
{
    double h = 0.5 * c->length, prevx = 0.0, prevy = 0.0; /* u_{i-1} theta'^2 */
    for (int i = 0; i < c->links; ++i) {
        double w2 = qd[3 * i + 2] * qd[3 * i + 2];
        double ux = sin(q[3 * i + 2]) * w2, uy = -cos(q[3 * i + 2]) * w2;
        gamma[2 * i] = -h * (ux + prevx);
        gamma[2 * i + 1] = -h * (uy + prevy);
        prevx = ux;
        prevy = uy;
    }
}

/* The diagonal of M (3N) and the forces Q (3N). */
static inline void chain_mass_forces(const chain_model *c, double *M, double *Q)
{
    double J = c->mass * c->length * c->length / 12.0;
    for (int i = 0; i < c->links; ++i) {
        M[3 * i] = M[3 * i + 1] = c->mass;
        M[3 * i + 2] = J;
        Q[3 * i] = Q[3 * i + 2] = 0.0;
        Q[3 * i + 1] = -c->mass * CHAIN_G;
    }
}

/* A straight chain from the origin at angle theta, at rest. */
static inline void chain_straight(const chain_model *c, double theta, double *q, double *qd)
{
    for (int i = 0; i < c->links; ++i) {
        double s = (i + 0.5) * c->length;
        q[3 * i] = s * sin(theta);
        q[3 * i + 1] = -s * cos(theta);
        q[3 * i + 2] = theta;
        qd[3 * i] = qd[3 * i + 1] = qd[3 * i + 2] = 0.0;
    }
}

/* Kinetic plus potential energy. */
static inline double chain_energy(const chain_model *c, const double *q, const double *qd)
{
    double J = c->mass * c->length * c->length / 12.0, e = 0.0;
    for (int i = 0; i < c->links; ++i)
        e += 0.5 * c->mass * (qd[3 * i] * qd[3 * i] + qd[3 * i + 1] * qd[3 * i + 1]) +
             0.5 * J * qd[3 * i + 2] * qd[3 * i + 2] + c->mass * CHAIN_G * q[3 * i + 1];
    return e;
}

#endif
