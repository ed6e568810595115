/*
 * linearize.c - natural frequencies from cdyn's linearizations, checked
 * against hand calculations (exit status 1 if they disagree).
 *
 * 1. A mechanism: the planar double pendulum in Cartesian coordinates
 *    (two 1 kg bobs on massless 0.5 m rods, q = (x1, y1, x2, y2), two
 *    length constraints), hanging at rest. cdyn partitions the coordinates
 *    (independent x1, x2) and cdyn_mbs_partition_jacobian() gives the state
 *    matrix of the minimum-order ODE, [0 I; K 0]; the eigenvalues of -K are
 *    omega^2. By hand (equal masses and lengths, small angles):
 *        omega^2 = (g / L)(2 -+ sqrt 2).
 *
 * 2. A hydraulic line (THEORY T6, SI units): a 10 m oil pipe (inertance
 *    I = rho l / a, laminar resistance R) from a supply at ps into a
 *    junction without storage, from which a laminar restriction Ro feeds a
 *    gas-charged accumulator (capacitance C) that leaks to tank through Rl.
 *    States v = (Q, pJ, pA), M = diag(I, 0, C):
 *        I Q'  = ps - pJ - R Q
 *        0     = Q - (pJ - pA) / Ro             (junction: pJ algebraic)
 *        C pA' = (pJ - pA) / Ro - (pA - pt) / Rl
 *    cdyn_dae_rhs_jacobian() gives the state matrix of the minimum-order
 *    ODE in (Q, pA). By hand, with pJ = pA + Ro Q:
 *        A = [-(R + Ro)/I   -1/I ;  1/C   -1/(Rl C)],
 *    natural frequency omega_n = sqrt(det A), damping ratio
 *    zeta = -trace(A) / (2 omega_n).
 */
#include <cdyn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const double G = 9.81;
#define PI 3.14159265358979323846

/* ---- 1. double pendulum ------------------------------------------------- */

typedef struct {
    double m, L;
} chain;

static int dp_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const chain *c = user;
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i) M[i + j * ld] = i == j ? c->m : 0.0;
    return 0;
}

static int dp_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    (void)t, (void)q, (void)qdot;
    const chain *c = user;
    Q[0] = Q[2] = 0.0;
    Q[1] = Q[3] = -c->m * G;
    return 0;
}

static int dp_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t;
    const chain *c = user;
    double dx = q[2] - q[0], dy = q[3] - q[1];
    Phi[0] = q[0] * q[0] + q[1] * q[1] - c->L * c->L;
    Phi[1] = dx * dx + dy * dy - c->L * c->L;
    return 0;
}

static int dp_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    double dx = q[2] - q[0], dy = q[3] - q[1];
    J[0] = 2.0 * q[0];
    J[ld] = 2.0 * q[1];
    J[2 * ld] = J[3 * ld] = 0.0;
    J[1] = -2.0 * dx;
    J[1 + ld] = -2.0 * dy;
    J[1 + 2 * ld] = 2.0 * dx;
    J[1 + 3 * ld] = 2.0 * dy;
    return 0;
}

/* Eigenvalues of a real 2 x 2 matrix [a b; c d] (column-major A): real
 * parts re[2], imaginary parts im[2] (im >= 0 first). */
static void eig2(const double *A, int lda, double *re, double *im)
{
    double a = A[0], c = A[1], b = A[lda], d = A[1 + lda];
    double half = 0.5 * (a + d), det = a * d - b * c, disc = half * half - det;
    if (disc >= 0.0) {
        re[0] = half + sqrt(disc);
        re[1] = half - sqrt(disc);
        im[0] = im[1] = 0.0;
    } else {
        re[0] = re[1] = half;
        im[0] = sqrt(-disc);
        im[1] = -im[0];
    }
}

static int double_pendulum(void)
{
    chain c = {1.0, 0.5};
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(4, 2, &st);
    if (!mbs) return 1;
    double y[8] = {0.0, -c.L, 0.0, -2.0 * c.L, 0.0, 0.0, 0.0, 0.0}, z[4], A[16];
    int independent[2];
    st = cdyn_mbs_set_model(mbs, dp_mass, dp_force, dp_phi, dp_jacobian, &c);
    if (st == CDYN_OK) st = cdyn_mbs_partition(mbs, 0.0, y);
    if (st == CDYN_OK && cdyn_mbs_partition_coordinates(mbs, independent, NULL) != 2)
        st = CDYN_ERR_ARG; /* d = n - m = 2 */
    if (st == CDYN_OK) st = cdyn_mbs_partition_gather(mbs, y, z);
    if (st == CDYN_OK) st = cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 4);
    if (st != CDYN_OK) {
        fprintf(stderr, "double pendulum: %s\n", cdyn_mbs_last_error(mbs));
        cdyn_mbs_free(mbs);
        return 1;
    }
    /* -K, the lower-left block with its sign changed: eigenvalues omega^2 */
    double minus_k[4] = {-A[2], -A[3], -A[2 + 4], -A[3 + 4]}, re[2], im[2];
    eig2(minus_k, 2, re, im);
    double hand[2] = {G / c.L * (2.0 + sqrt(2.0)), G / c.L * (2.0 - sqrt(2.0))};
    printf("double pendulum (m = %g kg, L = %g m), independent coordinates q%d, q%d:\n", c.m,
           c.L, independent[0], independent[1]);
    int bad = im[0] != 0.0;
    for (int k = 0; k < 2; ++k) {
        double w = sqrt(re[k]), w_hand = sqrt(hand[k]), rel = fabs(w - w_hand) / w_hand;
        printf("  mode %d: omega = %.9f rad/s (%.6f Hz), by hand %.9f rad/s, rel. diff %.1e\n",
               k + 1, w, w / (2.0 * PI), w_hand, rel);
        bad |= !(rel < 1e-12);
    }
    cdyn_mbs_free(mbs);
    return bad;
}

/* ---- 2. hydraulic line with an accumulator ----------------------------------- */

enum { Q = 0, PJ = 1, PA = 2 };

typedef struct {
    double inertance, resistance, restriction, leak, capacitance, p_supply, p_tank;
} line;

static int line_force(double t, const double *v, double *F, void *user)
{
    (void)t;
    const line *h = user;
    double through = (v[PJ] - v[PA]) / h->restriction;
    F[Q] = h->p_supply - v[PJ] - h->resistance * v[Q];
    F[PJ] = v[Q] - through;
    F[PA] = through - (v[PA] - h->p_tank) / h->leak;
    return 0;
}

static int line_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)v;
    const line *h = user;
    double g = 1.0 / h->restriction;
    J[Q + Q * ld] = -h->resistance;
    J[Q + PJ * ld] = -1.0;
    J[Q + PA * ld] = 0.0;
    J[PJ + Q * ld] = 1.0;
    J[PJ + PJ * ld] = -g;
    J[PJ + PA * ld] = g;
    J[PA + Q * ld] = 0.0;
    J[PA + PJ * ld] = g;
    J[PA + PA * ld] = -g - 1.0 / h->leak;
    return 0;
}

static int hydraulic_line(void)
{
    const double rho = 870.0, mu = 0.04, length = 10.0, d = 0.02;
    const double area = PI * d * d / 4.0;
    line h = {.inertance = rho * length / area,
              .resistance = 128.0 * mu * length / (PI * pow(d, 4)),
              .restriction = 1e8, /* Pa s/m^3 */
              .leak = 1e10,
              .capacitance = 1e-10, /* m^3/Pa */
              .p_supply = 100e5,
              .p_tank = 1e5};
    /* the operating point: the steady state (every relation is linear) */
    double q0 = (h.p_supply - h.p_tank) / (h.resistance + h.restriction + h.leak);
    double pa0 = h.p_tank + h.leak * q0, v[3] = {q0, pa0 + h.restriction * q0, pa0};
    double M[9] = {h.inertance, 0, 0, 0, 0, 0, 0, 0, h.capacitance};
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(3, &st);
    if (!dae) return 1;
    int integrated[2];
    double y[2], J[4];
    st = cdyn_dae_set_mass(dae, M, 3);
    if (st == CDYN_OK) st = cdyn_dae_set_model(dae, line_force, line_jacobian, NULL, &h);
    if (st == CDYN_OK) st = cdyn_dae_split(dae, 0.0, v);
    if (st == CDYN_OK) st = cdyn_dae_consistent(dae, 0.0, v);
    if (st == CDYN_OK && cdyn_dae_split_states(dae, integrated, NULL) < 0) st = CDYN_ERR_ARG;
    if (st == CDYN_OK) {
        y[0] = v[integrated[0]];
        y[1] = v[integrated[1]];
        st = cdyn_dae_rhs_jacobian(dae, 0.0, y, NULL, J, 2);
    }
    if (st != CDYN_OK || integrated[0] != Q || integrated[1] != PA) {
        fprintf(stderr, "hydraulic line: %s\n",
                st != CDYN_OK ? cdyn_dae_last_error(dae) : "unexpected split");
        cdyn_dae_free(dae);
        return 1;
    }
    double hand[4] = {-(h.resistance + h.restriction) / h.inertance, 1.0 / h.capacitance,
                      -1.0 / h.inertance, -1.0 / (h.leak * h.capacitance)};
    int bad = 0;
    for (int i = 0; i < 4; ++i) bad |= !(fabs(J[i] - hand[i]) <= 1e-12 * fabs(hand[i]));
    double re[2], im[2];
    eig2(J, 2, re, im);
    double wn = sqrt(J[0] * J[3] - J[1] * J[2]), zeta = -(J[0] + J[3]) / (2.0 * wn);
    double wn_hand = sqrt(hand[0] * hand[3] - hand[1] * hand[2]);
    double zeta_hand = -(hand[0] + hand[3]) / (2.0 * wn_hand);
    printf("hydraulic line (I = %.3e kg/m^4, R = %.3e Pa s/m^3, C = %.1e m^3/Pa), steady flow "
           "%.4f L/s:\n",
           h.inertance, h.resistance, h.capacitance, q0 * 1e3);
    printf("  state matrix in (Q, pA): [%.6e %.6e; %.6e %.6e], by hand [%.6e %.6e; %.6e %.6e]\n",
           J[0], J[2], J[1], J[3], hand[0], hand[2], hand[1], hand[3]);
    printf("  omega_n = %.6f rad/s (%.6f Hz), by hand %.6f; zeta = %.6f, by hand %.6f; "
           "eigenvalues %.4f +- %.4f i /s\n",
           wn, wn / (2.0 * PI), wn_hand, zeta, zeta_hand, re[0], fabs(im[0]));
    bad |= !(fabs(wn - wn_hand) <= 1e-12 * wn_hand) || !(fabs(zeta - zeta_hand) <= 1e-12);
    cdyn_dae_free(dae);
    return bad;
}

int main(void)
{
    int bad = double_pendulum();
    bad |= hydraulic_line();
    printf(bad ? "MISMATCH with the hand calculations\n" : "all frequencies match the hand "
                                                            "calculations\n");
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
