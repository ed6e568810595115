/* Check suite for the linearization of mechanisms: cdyn_mbs_partition_jacobian
 * (state matrix in minimal coordinates) and cdyn_mbs_rhs_jacobian.
 *
 * Expected values come from hand derivations:
 *  - the planar double pendulum in Cartesian coordinates (two equal masses
 *    m on massless rods of length L, gravity g) hanging at rest: in the
 *    independent coordinates (x1, x2) the linear modes have
 *    omega^2 = (g / L)(2 -+ sqrt 2) (the classical result for equal masses
 *    and lengths), and the state matrix is [0 I; K 0] with no dependence on
 *    the speeds (the speed terms are quadratic);
 *  - the single pendulum away from equilibrium, x independent:
 *        x'' = f(x, v) = -g x c / L^2 - x v^2 / (L^2 - x^2),  c = sqrt(L^2 - x^2)
 *    (from theta'' = -(g/L) sin theta, x = L sin theta), or y independent:
 *        y'' = -y w^2 / (L^2 - y^2) - g (1 - y^2 / L^2),
 *    differentiated by hand;
 *  - for the full right-hand side of the Lagrange form: the identities that
 *    follow from differentiating Phi_q q'' = xi along any state (for the
 *    pendulum Phi = x^2 + y^2 - L^2, xi = -2 |q'|^2):
 *        Phi_q d q''/dq = -2 q''^T,   Phi_q d q''/dq' = -4 q'^T,
 *    and the top half [0 I].
 *  - the input matrix of forces on the pendulum's bob, from the tangential
 *    component of the force (single_pendulum_input_matrix_by_hand);
 *  - two masses held together on a spring, state matrix [0 1; -K/(2m) 0],
 *    also with forces and masses 1e300 times larger, where the chain
 *    rule's differences overflow and the right-hand side is differenced;
 *  - the double pendulum in motion: its partitioned ODE written out again
 *    in __float128 (Newton for the dependent coordinates, the bordered
 *    solve) and differenced there, independently of cdyn.
 * Magnitudes: the single pendulum is also run at lengths 1.3e-6 and
 * 1.3e6 m, so the differences' steps must follow the state's own scale,
 * with Phi_t and xi given and left to cdyn's differences (whose steps must
 * then follow the motion's time scale: 38 minutes per swing at 1.3e6 m). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "models.h"
#include "quadref.h"
#include "testutil.h"
#include "cdyn.h"

static const double G = 9.81;

/* Largest |A - B| over a column, relative to that column's largest |B|
 * (and 1e-300), worst over the columns. */
static double column_error(int size, const double *A, const double *B)
{
    double worst = 0.0;
    for (int j = 0; j < size; ++j) {
        double diff = 0.0, big = 1e-300;
        for (int i = 0; i < size; ++i) {
            diff = fmax(diff, fabs(A[i + size * j] - B[i + size * j]));
            big = fmax(big, fabs(B[i + size * j]));
        }
        worst = fmax(worst, diff / big);
    }
    return worst;
}

/* ---- double pendulum: q = (x1, y1, x2, y2) --------------------------------- */

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
    Q[0] = 0.0;
    Q[1] = -c->m * G;
    Q[2] = 0.0;
    Q[3] = -c->m * G;
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
    J[2 * ld] = 0.0;
    J[3 * ld] = 0.0;
    J[1] = -2.0 * dx;
    J[1 + ld] = -2.0 * dy;
    J[1 + 2 * ld] = 2.0 * dx;
    J[1 + 3 * ld] = 2.0 * dy;
    return 0;
}

START_TEST(double_pendulum_frequencies_by_hand)
{
    chain c = {1.5, 0.8};
    cdyn_mbs *mbs = cdyn_mbs_create(4, 2, NULL);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, dp_mass, dp_force, dp_phi, dp_jacobian, &c), CDYN_OK);
    double y[8] = {0.0, -c.L, 0.0, -2.0 * c.L, 0.0, 0.0, 0.0, 0.0};
    ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
    int independent[2];
    ck_assert_int_ge(cdyn_mbs_partition_coordinates(mbs, independent, NULL), 0);
    ck_assert(independent[0] == 0 && independent[1] == 2); /* x1, x2: y's are pinned */
    double z[4], A[16];
    ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 4), CDYN_OK);
    /* [0 I; K D]: the top half exactly (the chain rule's columns), D = 0
     * at rest (the speed terms are quadratic; xi is left to differences) */
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 2; ++i) ck_assert(A[i + 4 * j] == (j == i + 2 ? 1.0 : 0.0));
    double scale = G / c.L;
    for (int j = 2; j < 4; ++j)
        for (int i = 2; i < 4; ++i) ck_assert_double_le(fabs(A[i + 4 * j]), 1e-12 * scale);
    /* omega^2 = eigenvalues of -K (2 x 2) */
    double k11 = -A[2], k21 = -A[3], k12 = -A[2 + 4], k22 = -A[3 + 4];
    double tr = k11 + k22, det = k11 * k22 - k12 * k21, disc = sqrt(tr * tr / 4.0 - det);
    double w_low = tr / 2.0 - disc, w_high = tr / 2.0 + disc;
    double e_low = scale * (2.0 - sqrt(2.0)), e_high = scale * (2.0 + sqrt(2.0));
    ck_assert_msg(fabs(w_low - e_low) <= 1e-12 * e_high && fabs(w_high - e_high) <= 1e-12 * e_high,
                  "omega^2 = %.12g, %.12g; by hand %.12g, %.12g", w_low, w_high, e_low, e_high);
    cdyn_mbs_free(mbs);
}
END_TEST

/* ---- the double pendulum in motion against a quad-precision reference ---- */

static int dp_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = Phi_t[1] = 0.0;
    return 0;
}

/* xi = Phi_q q'' = -(Phi_q q')_q q' = (-2 |v1|^2, -2 |v2 - v1|^2) */
static int dp_xi(double t, const double *q, const double *qdot, double *xi, void *user)
{
    (void)t, (void)q, (void)user;
    double a = qdot[2] - qdot[0], b = qdot[3] - qdot[1];
    xi[0] = -2.0 * (qdot[0] * qdot[0] + qdot[1] * qdot[1]);
    xi[1] = -2.0 * (a * a + b * b);
    return 0;
}

/* dp_phi and dp_jacobian in quad (J: 2 x 4). */
static void dp_quad_constraints(const chain *c, const quad *q, quad *phi, quad *J)
{
    quad L = c->L, dx = q[2] - q[0], dy = q[3] - q[1];
    phi[0] = q[0] * q[0] + q[1] * q[1] - L * L;
    phi[1] = dx * dx + dy * dy - L * L;
    J[0] = 2 * q[0];
    J[2] = 2 * q[1];
    J[4] = J[6] = 0;
    J[1] = -2 * dx;
    J[3] = -2 * dy;
    J[5] = 2 * dx;
    J[7] = 2 * dy;
}

/* The partitioned right-hand side's accelerations of the independent
 * coordinates at z (2 coordinates, 2 speeds), in quad and independently of
 * cdyn: the dependent coordinates by Newton on Phi = 0 from y's values,
 * the dependent speeds from Phi_q q' = 0, then the bordered system
 * [M -Phi_q^T; Phi_q 0] [q''; mu] = [Q; xi]. */
static void dp_partitioned_quad(const chain *c, const int *ind, const int *dep, const double *y,
                                const quad *z, quad *accel)
{
    quad q[4], v[4], phi[2], J[8], A[4], rhs[2], x[6], K[36], b[6];
    for (int i = 0; i < 4; ++i) q[i] = y[i];
    for (int k = 0; k < 2; ++k) q[ind[k]] = z[k];
    for (int iteration = 0; iteration < 8; ++iteration) { /* quadratic: 1e-4 to 1e-32 in 3 */
        dp_quad_constraints(c, q, phi, J);
        for (int r = 0; r < 2; ++r) {
            for (int k = 0; k < 2; ++k) A[r + 2 * k] = J[r + 2 * dep[k]];
            rhs[r] = -phi[r];
        }
        ck_assert_int_eq(qref_solve(2, A, rhs, x), 0);
        for (int k = 0; k < 2; ++k) q[dep[k]] += x[k];
    }
    dp_quad_constraints(c, q, phi, J);
    for (int k = 0; k < 2; ++k) v[ind[k]] = z[2 + k];
    for (int r = 0; r < 2; ++r)
        rhs[r] = -(J[r + 2 * ind[0]] * z[2] + J[r + 2 * ind[1]] * z[3]);
    ck_assert_int_eq(qref_solve(2, A, rhs, x), 0); /* A: Phi_q's dependent columns at q */
    for (int k = 0; k < 2; ++k) v[dep[k]] = x[k];
    memset(K, 0, sizeof K);
    for (int i = 0; i < 4; ++i) K[i + 6 * i] = c->m;
    for (int r = 0; r < 2; ++r)
        for (int j = 0; j < 4; ++j) {
            K[4 + r + 6 * j] = J[r + 2 * j];
            K[j + 6 * (4 + r)] = -J[r + 2 * j];
        }
    quad da = v[2] - v[0], db = v[3] - v[1];
    b[0] = b[2] = 0;
    b[1] = b[3] = -(quad)c->m * (quad)G;
    b[4] = -2 * (v[0] * v[0] + v[1] * v[1]);
    b[5] = -2 * (da * da + db * db);
    ck_assert_int_eq(qref_solve(6, K, b, x), 0);
    for (int k = 0; k < 2; ++k) accel[k] = x[ind[k]];
}

/* df/dz of dp_partitioned_quad by extrapolated central differences in
 * quad (steps 1e-4 |z_j|: truncation about 1e-18, rounding 1e-29), and
 * the top half [0 I] exactly. */
static void dp_state_matrix_quad(const chain *c, const int *ind, const int *dep, const double *y,
                                 const double *z, double *A)
{
    quad zs[4], f[4][2];
    memset(A, 0, sizeof(double) * 16);
    A[0 + 4 * 2] = A[1 + 4 * 3] = 1.0;
    for (int j = 0; j < 4; ++j) {
        quad h = (quad)1e-4 * fabs(z[j]), steps[4] = {h, -h, 2 * h, -2 * h};
        for (int p = 0; p < 4; ++p) {
            for (int i = 0; i < 4; ++i) zs[i] = z[i];
            zs[j] += steps[p];
            dp_partitioned_quad(c, ind, dep, y, zs, f[p]);
        }
        for (int i = 0; i < 2; ++i)
            A[2 + i + 4 * j] = (double)((8 * (f[0][i] - f[1][i]) - (f[2][i] - f[3][i])) / (12 * h));
    }
}

START_TEST(double_pendulum_in_motion_against_a_quad_reference)
{
    /* both rods off the vertical and turning: every entry of the state
     * matrix non-zero, the dependent coordinates and speeds moving with
     * each independent one. With xi given the chain rule's columns
     * (mbs_linearize.c) carry only the differences of the model's terms;
     * with xi left to cdyn's differences, their error adds. One
     * partitioned right-hand side per call: no Newton solve in the
     * differences. */
    chain c = {1.5, 0.8};
    double a = 0.3, b = 0.5, wa = 0.4, wb = -0.2, L = c.L;
    double y[8] = {L * sin(a), -L * cos(a), L * (sin(a) + sin(b)), -L * (cos(a) + cos(b)),
                   L * cos(a) * wa, L * sin(a) * wa, L * (cos(a) * wa + cos(b) * wb),
                   L * (sin(a) * wa + sin(b) * wb)};
    for (int given = 1; given >= 0; --given) {
        cdyn_mbs *mbs = cdyn_mbs_create(4, 2, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, dp_mass, dp_force, dp_phi, dp_jacobian, &c),
                         CDYN_OK);
        if (given) ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, dp_phi_t, dp_xi), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
        int ind[2], dep[2];
        ck_assert_int_ge(cdyn_mbs_partition_coordinates(mbs, ind, dep), 0);
        double z[4], A[16], ref[16];
        ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
        cdyn_mbs_counters before, after;
        ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &before), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 4), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &after), CDYN_OK);
        ck_assert_int_eq(after.partition_rhs - before.partition_rhs, 1);
        dp_state_matrix_quad(&c, ind, dep, y, z, ref);
        for (int j = 0; j < 4; ++j) /* the top half exactly */
            for (int i = 0; i < 2; ++i) ck_assert(A[i + 4 * j] == ref[i + 4 * j]);
        double err = column_error(4, A, ref);
        ck_assert_msg(err <= (given ? 1e-11 : 1e-6), "xi %s: off by %.3e",
                      given ? "given" : "by differences", err);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* ---- single pendulum: q = (x, y) ------------------------------------------------ */

typedef tm_pendulum bob; /* tests/models.h: m, l, g */

/* with_time_terms 0: Phi_t and xi left to cdyn's differences */
static cdyn_mbs *sp_make_with(bob *b, int with_time_terms)
{
    cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
    ck_assert_ptr_nonnull(mbs);
    ck_assert_int_eq(tm_pendulum_set(mbs, b, with_time_terms), CDYN_OK);
    return mbs;
}

static cdyn_mbs *sp_make(bob *b) { return sp_make_with(b, 1); }


START_TEST(single_pendulum_state_matrix_by_hand)
{
    const double lengths[] = {1.3, 1.3e-6, 1.3e6}; /* m: d f / d x spans 12 orders */
    for (int tt = 0; tt < 2; ++tt) {
        for (size_t u = 0; u < sizeof lengths / sizeof lengths[0]; ++u) {
            bob b = {2.0, lengths[u], G};
            double L = b.l;
            cdyn_mbs *mbs = sp_make_with(&b, tt);
            double y[4];
            tm_pendulum_state(&b, 0.4, 0.7 * sqrt(G / L), y);
            ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
            int independent = -1;
            cdyn_mbs_partition_coordinates(mbs, &independent, NULL);
            double z[2], A[4];
            ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
            ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_OK);
            double dfdx, dfdv;
            if (independent == 0) {
                double x = z[0], v = z[1], s = L * L - x * x, c = sqrt(s);
                dfdx = -(G / (L * L)) * (c - x * x / c) - v * v / s - 2.0 * x * x * v * v / (s * s);
                dfdv = -2.0 * x * v / s;
            } else {
                /* y independent (either is a valid choice: after equilibration
                 * Phi_q = 2 (x, y) has equal entries): y = -L cos theta,
                 * y'' = -y w^2 / (L^2 - y^2) - g (1 - y^2 / L^2), w = y' */
                ck_assert_int_eq(independent, 1);
                double yy = z[0], w = z[1], s = L * L - yy * yy;
                dfdx = -w * w / s - 2.0 * yy * yy * w * w / (s * s) + 2.0 * G * yy / (L * L);
                dfdv = -2.0 * yy * w / s;
            }
            ck_assert(A[0] == 0.0 && A[2] == 1.0);
            /* with Phi_t and xi given only the differences of the model's
             * terms (measured <= 2e-13); xi by differences adds its own
             * error (measured <= 3e-8) */
            double tol = tt ? 1e-11 : 1e-7;
            ck_assert_msg(fabs(A[1] - dfdx) <= tol * fabs(dfdx),
                          "time terms %d, L %g: df/dx %.15g vs %.15g", tt, L, A[1], dfdx);
            ck_assert_msg(fabs(A[3] - dfdv) <= tol * fabs(dfdv),
                          "time terms %d, L %g: df/dv %.15g vs %.15g", tt, L, A[3], dfdv);
            cdyn_mbs_free(mbs);
        }
    }
}
END_TEST

/* Input matrix: forces u = (u_x, u_y) on the bob. The tangential
 * component u_x cos theta + u_y sin theta gives theta'' a term
 * (u_x cos theta + u_y sin theta) / (m L), so with x = L sin theta,
 * y = -L cos theta: dx''/du = cos theta (cos theta, sin theta) / m and
 * dy''/du = sin theta (cos theta, sin theta) / m; q_ind' does not see u. */
START_TEST(single_pendulum_input_matrix_by_hand)
{
    const double lengths[] = {1.3, 1.3e-6, 1.3e6};
    for (size_t u = 0; u < sizeof lengths / sizeof lengths[0]; ++u) {
        bob b = {2.0, lengths[u], G};
        cdyn_mbs *mbs = sp_make(&b);
        double y[4], th = 0.4;
        tm_pendulum_state(&b, th, 0.7 * sqrt(G / b.l), y);
        ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
        int independent = -1;
        cdyn_mbs_partition_coordinates(mbs, &independent, NULL);
        double z[2], Qu[4] = {1.0, 0.0, 0.0, 1.0}, B[6];
        for (int i = 0; i < 6; ++i) B[i] = -7.0;
        ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 2, Qu, 2, B, 3), CDYN_OK);
        double lead = independent == 0 ? cos(th) : sin(th);
        double expect[2] = {lead * cos(th) / b.m, lead * sin(th) / b.m};
        for (int k = 0; k < 2; ++k) {
            ck_assert(B[0 + 3 * k] == 0.0);
            ck_assert_msg(fabs(B[1 + 3 * k] - expect[k]) <= 1e-12 / b.m,
                          "L %g input %d: %.17g vs %.17g", b.l, k, B[1 + 3 * k], expect[k]);
            ck_assert(B[2 + 3 * k] == -7.0); /* padding below 2d untouched */
        }
        /* refused: overlap, sizes, NaN, no partition */
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 2, Qu, 2, Qu, 2),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 0, Qu, 2, B, 3),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 2, Qu, 1, B, 3),
                         CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 2, Qu, 2, B, 1),
                         CDYN_ERR_ARG);
        double bad[2] = {NAN, 0.0};
        ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 1, bad, 2, B, 3),
                         CDYN_ERR_NONFINITE);
        /* a second column whose solve fails (a load of 1e308 N on a mass
         * of 2 kg overflows): refused with B untouched, first column too */
        double Qbig[4] = {1.0, 0.0, 1e308, -1e308}, Bk[6] = {5, 5, 5, 5, 5, 5};
        ck_assert_int_ne(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 2, Qbig, 2, Bk, 3),
                         CDYN_OK);
        for (int i = 0; i < 6; ++i) ck_assert(Bk[i] == 5.0);
        cdyn_mbs_free(mbs);
    }
    bob b = {2.0, 1.3, G};
    cdyn_mbs *mbs = sp_make(&b);
    double z[2] = {0.3, 0.0}, Qu[2] = {1.0, 0.0}, B[2];
    ck_assert_int_eq(cdyn_mbs_partition_input_matrix(mbs, 0.0, z, 1, Qu, 2, B, 2), CDYN_ERR_ARG);
    cdyn_mbs_free(mbs);
}
END_TEST

START_TEST(lagrange_rhs_jacobian_meets_the_differentiated_constraint)
{
    bob b = {2.0, 1.3, G};
    cdyn_mbs *mbs = sp_make(&b);
    double y[4], ydot[4], J[16];
    tm_pendulum_state(&b, 0.4, 1.1, y);
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, y, ydot), CDYN_OK);
    for (int j = 0; j < 4; ++j) /* top half: d q' / d y = [0 I] */
        for (int i = 0; i < 2; ++i)
            ck_assert_double_le(fabs(J[i + 4 * j] - (j == i + 2 ? 1.0 : 0.0)), 1e-9);
    /* Phi_q dq''/dq = -2 q''^T and Phi_q dq''/dq' = -4 q'^T */
    double size = G; /* accelerations ~ g; their derivatives ~ g / L and sqrt(g / L) */
    for (int j = 0; j < 4; ++j) {
        double lhs = 2.0 * y[0] * J[2 + 4 * j] + 2.0 * y[1] * J[3 + 4 * j];
        double rhs = j < 2 ? -2.0 * ydot[2 + j] : -4.0 * y[j];
        ck_assert_msg(fabs(lhs - rhs) <= 1e-7 * size * b.l, "column %d: %.15g vs %.15g", j, lhs,
                      rhs);
    }
    cdyn_mbs_free(mbs);
}
END_TEST

START_TEST(no_allocation_and_state_of_the_operating_point)
{
    bob b = {2.0, 1.3, G};
    cdyn_mbs *mbs = sp_make(&b);
    double y[4], z[2], A[4], J[16], zdot[2];
    tm_pendulum_state(&b, 0.4, 1.1, y);
    ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
    cdyn_status st[3];
    alloc_count_start(); /* no assertion inside: Check's own bookkeeping allocates */
    st[0] = cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2);
    st[1] = cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4);
    st[2] = cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 1);
    long allocations = alloc_count_stop();
    ck_assert_int_eq(allocations, 0);
    ck_assert(st[0] == CDYN_OK && st[1] == CDYN_OK && st[2] == CDYN_ERR_ARG);
    /* the last evaluation was at z: the reactions are those of (t, z) */
    double r1[2], r2[2];
    ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r1, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition_rhs(mbs, 0.0, z, zdot), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r2, NULL), CDYN_OK);
    for (int i = 0; i < 2; ++i) ck_assert(fabs(r1[i] - r2[i]) <= 1e-12 * fabs(r2[i]));
    /* A may alias z */
    double both[4] = {z[0], z[1], 0.0, 0.0};
    ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, both, NULL, both, 2), CDYN_OK);
    for (int i = 0; i < 4; ++i)
        ck_assert_double_le(fabs(both[i] - A[i]), 1e-9 * (1.0 + fabs(A[i])));
    cdyn_mbs_free(mbs);
}
END_TEST

/* ---- the Lagrange form's Jacobian through the KKT factorization --------- */

/* A cart (x, mass mc) carrying a pendulum (angle th, point mass mp on a
 * massless rod L) and a slider (w, mass mw) held by two constraints:
 *     Phi_1 = w - x^2 - L sin th,   Phi_2 = x + b th - c w^2,
 * so M depends on th and Q on the speeds. By hand:
 *     M = [mc + mp, mp L cos th, 0; mp L cos th, mp L^2, 0; 0, 0, mw],
 *     Q = (mp L th'^2 sin th - d x', -mp g L sin th, -k w),
 *     Phi_q = [-2x, -L cos th, 1; 1, b, -2 c w],
 *     xi = (2 x'^2 - L sin th th'^2, 2 c w'^2)
 * (xi = Phi_q q'' - Phi'' along any motion). */
typedef struct {
    double mc, mp, mw, L, b, c, d, k;
} cart;

static int cart_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t;
    const cart *p = user;
    double off = p->mp * p->L * cos(q[1]);
    M[0] = p->mc + p->mp;
    M[1] = M[ld] = off;
    M[1 + ld] = p->mp * p->L * p->L;
    M[2] = M[2 * ld] = M[2 + ld] = M[1 + 2 * ld] = 0.0;
    M[2 + 2 * ld] = p->mw;
    return 0;
}

static int cart_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    const cart *p = user;
    Q[0] = p->mp * p->L * qd[1] * qd[1] * sin(q[1]) - p->d * qd[0];
    Q[1] = -p->mp * G * p->L * sin(q[1]);
    Q[2] = -p->k * q[2];
    return 0;
}

static int cart_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t;
    const cart *p = user;
    Phi[0] = q[2] - q[0] * q[0] - p->L * sin(q[1]);
    Phi[1] = q[0] + p->b * q[1] - p->c * q[2] * q[2];
    return 0;
}

static int cart_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t;
    const cart *p = user;
    J[0] = -2.0 * q[0];
    J[ld] = -p->L * cos(q[1]);
    J[2 * ld] = 1.0;
    J[1] = 1.0;
    J[1 + ld] = p->b;
    J[1 + 2 * ld] = -2.0 * p->c * q[2];
    return 0;
}

static int cart_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = Phi_t[1] = 0.0;
    return 0;
}

static int cart_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    (void)t;
    const cart *p = user;
    xi[0] = 2.0 * qd[0] * qd[0] - p->L * sin(q[1]) * qd[1] * qd[1];
    xi[1] = 2.0 * p->c * qd[2] * qd[2];
    return 0;
}

/* The test's own reference: extrapolated central differences of
 * cdyn_mbs_rhs with steps 1e-4 max(|y_j|, its half's largest), the
 * right-hand side being certified to rounding. */
static void rhs_differences(cdyn_mbs *mbs, const double *y, int n, double *J)
{
    double ys[40], fp[40], fm[40], fp2[40], fm2[40];
    int size = 2 * n;
    for (int j = 0; j < size; ++j) {
        double big = 0.0;
        for (int i = j < n ? 0 : n; i < (j < n ? n : size); ++i) big = fmax(big, fabs(y[i]));
        double h = 1e-4 * fmax(fabs(y[j]), big);
        memcpy(ys, y, sizeof(double) * (size_t)size);
        ys[j] = y[j] + h;
        ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, ys, fp), CDYN_OK);
        ys[j] = y[j] - h;
        ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, ys, fm), CDYN_OK);
        ys[j] = y[j] + 2.0 * h;
        ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, ys, fp2), CDYN_OK);
        ys[j] = y[j] - 2.0 * h;
        ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, ys, fm2), CDYN_OK);
        for (int i = 0; i < size; ++i)
            J[i + size * j] = (8.0 * (fp[i] - fm[i]) - (fp2[i] - fm2[i])) / (12.0 * h);
    }
}

static long rhs_count(cdyn_mbs *mbs)
{
    cdyn_mbs_counters k;
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &k), CDYN_OK);
    return k.rhs;
}

START_TEST(lagrange_jacobian_through_the_factorization_is_the_hand_jacobian)
{
    /* the pendulum's Lagrange form by hand (no stabilization):
     *     q'' = g - c q,  c = (q.g + |q'|^2) / |q|^2,  g = (0, -G),
     *     dq''_i/dq_j = -c d_ij - q_i (g_j - 2 c q_j) / |q|^2,
     *     dq''_i/dq'_j = -2 q_i q'_j / |q|^2,
     * with lengths and masses in three unit systems each (the mass drops
     * out); one evaluation of the right-hand side (the factors are reused
     * for every column) */
    const double lengths[] = {1.3, 1.3e-6, 1.3e6}, masses[] = {2.0, 2e8, 2e-8};
    for (int u = 0; u < 9; ++u) {
        bob b = {masses[u / 3], lengths[u % 3], G};
        cdyn_mbs *mbs = sp_make(&b);
        double y[4], J[16], hand[16] = {0}, gv[2] = {0.0, -G};
        tm_pendulum_state(&b, 0.4, 1.1, y);
        const double *q = y, *qd = y + 2;
        double qq = q[0] * q[0] + q[1] * q[1];
        double c = (q[1] * gv[1] + qd[0] * qd[0] + qd[1] * qd[1]) / qq;
        hand[0 + 4 * 2] = hand[1 + 4 * 3] = 1.0;
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
                hand[2 + i + 4 * j] = -(i == j ? c : 0.0) - q[i] * (gv[j] - 2.0 * c * q[j]) / qq;
                hand[2 + i + 4 * (2 + j)] = -2.0 * q[i] * qd[j] / qq;
            }
        long before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        double err = column_error(4, J, hand);
        ck_assert_msg(err <= 1e-10, "L = %g m, m = %g kg: off by %.3e", b.l, b.m, err);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

START_TEST(lagrange_jacobian_with_gains_and_a_configuration_dependent_mass)
{
    /* the cart: M(th), Q(q'), two nonlinear constraints, off the manifold
     * so that the gains act; against the test's own differences of the
     * right-hand side, in each stabilization and with the time terms given
     * and left to cdyn */
    cart p = {3.0, 0.7, 0.4, 0.9, 0.3, 0.2, 0.5, 40.0};
    double y[6] = {0.12, 0.5, 0.0, 0.4, -1.3, 0.0}, J[36], ref[36];
    y[2] = p.L * sin(y[1]) + y[0] * y[0] + 1e-3; /* Phi_1 = 1e-3 */
    y[5] = 2.0 * y[0] * y[3] + p.L * cos(y[1]) * y[4]; /* speeds tangent to Phi_1 */
    for (int variant = 0; variant < 6; ++variant) { /* even: exact time terms, ref from them */
        cdyn_mbs *mbs = cdyn_mbs_create(3, 2, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, cart_mass, cart_force, cart_phi, cart_jacobian, &p),
                         CDYN_OK);
        if (variant % 2 == 0)
            ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, cart_phi_t, cart_xi), CDYN_OK);
        cdyn_constraint *k = cdyn_mbs_constraint(mbs);
        if (variant / 2 == 1) ck_assert_int_eq(cdyn_constraint_set_baumgarte(k, 5.0, 7.0), CDYN_OK);
        if (variant / 2 == 2) {
            double KD[4] = {10.0, 2.0, 2.0, 6.0}, KP[4] = {30.0, -4.0, -4.0, 20.0};
            ck_assert_int_eq(cdyn_constraint_set_gains(k, KD, 2, KP, 2), CDYN_OK);
        }
        long before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 6), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        if (variant % 2 == 0) rhs_differences(mbs, y, 3, ref);
        double err = column_error(6, J, ref);
        /* left to cdyn, the time terms carry their own differences' error
         * (mbs.h), divided here by the step: measured 4.9e-6 at most */
        ck_assert_msg(err <= (variant % 2 ? 2e-5 : 1e-10), "variant %d: off by %.3e", variant, err);
        /* the pseudo-inverse at full rank is the same system and path */
        ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PSEUDOINVERSE), CDYN_OK);
        double Jp[36];
        before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, Jp, 6), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        ck_assert_double_le(column_error(6, Jp, J), 1e-10);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* A planar chain of LINKS point masses m on rods l from a fixed pivot,
 * q = (x_1, y_1, ..., x_L, y_L), with gravity and a damping -d q' on each
 * mass: Phi_k = |p_k - p_{k-1}|^2 - l^2 (p_0 = 0), its Jacobian rows
 * 2 (p_k - p_{k-1}) and -2 (p_k - p_{k-1}), xi_k = -2 |v_k - v_{k-1}|^2.
 * n = 18 > 16: the general KKT path. */
enum { LINKS = 9 };
typedef struct {
    double m, l, d;
} rope;

static int rope_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const rope *r = user;
    for (int j = 0; j < 2 * LINKS; ++j)
        for (int i = 0; i < 2 * LINKS; ++i) M[i + j * ld] = i == j ? r->m : 0.0;
    return 0;
}

static int rope_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t, (void)q;
    const rope *r = user;
    for (int i = 0; i < 2 * LINKS; ++i) Q[i] = -r->d * qd[i] - (i % 2 ? r->m * G : 0.0);
    return 0;
}

static int rope_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t;
    const rope *r = user;
    for (int k = 0; k < LINKS; ++k) {
        double dx = q[2 * k] - (k ? q[2 * k - 2] : 0.0), dy = q[2 * k + 1] - (k ? q[2 * k - 1] : 0.0);
        Phi[k] = dx * dx + dy * dy - r->l * r->l;
    }
    return 0;
}

static int rope_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    for (int j = 0; j < 2 * LINKS; ++j)
        for (int k = 0; k < LINKS; ++k) J[k + j * ld] = 0.0;
    for (int k = 0; k < LINKS; ++k) {
        double dx = q[2 * k] - (k ? q[2 * k - 2] : 0.0), dy = q[2 * k + 1] - (k ? q[2 * k - 1] : 0.0);
        J[k + 2 * k * ld] = 2.0 * dx;
        J[k + (2 * k + 1) * ld] = 2.0 * dy;
        if (k == 0) continue;
        J[k + (2 * k - 2) * ld] = -2.0 * dx;
        J[k + (2 * k - 1) * ld] = -2.0 * dy;
    }
    return 0;
}

static int rope_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    for (int k = 0; k < LINKS; ++k) Phi_t[k] = 0.0;
    return 0;
}

static int rope_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    (void)t, (void)q, (void)user;
    for (int k = 0; k < LINKS; ++k) {
        double du = qd[2 * k] - (k ? qd[2 * k - 2] : 0.0), dv = qd[2 * k + 1] - (k ? qd[2 * k - 1] : 0.0);
        xi[k] = -2.0 * (du * du + dv * dv);
    }
    return 0;
}

START_TEST(lagrange_jacobian_of_a_large_mechanism_on_the_general_path)
{
    rope r = {0.3, 0.25, 0.05};
    enum { N = 2 * LINKS };
    double y[2 * N], J[4 * N * N], ref[4 * N * N], px = 0.0, py = 0.0, vx = 0.0, vy = 0.0;
    for (int k = 0; k < LINKS; ++k) { /* on the manifold, speeds tangent */
        double th = 0.3 + 0.1 * k, om = 0.5 - 0.13 * k;
        px += r.l * sin(th);
        py -= r.l * cos(th);
        vx += r.l * om * cos(th);
        vy += r.l * om * sin(th);
        y[2 * k] = px;
        y[2 * k + 1] = py;
        y[N + 2 * k] = vx;
        y[N + 2 * k + 1] = vy;
    }
    cdyn_mbs *mbs = cdyn_mbs_create(N, LINKS, NULL);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, rope_mass, rope_force, rope_phi, rope_jacobian, &r),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, rope_phi_t, rope_xi), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(cdyn_mbs_constraint(mbs), 3.0, 4.0), CDYN_OK);
    long before = rhs_count(mbs);
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2 * N), CDYN_OK);
    ck_assert_int_eq(rhs_count(mbs) - before, 1);
    rhs_differences(mbs, y, N, ref);
    double err = column_error(2 * N, J, ref);
    ck_assert_msg(err <= 1e-9, "off by %.3e", err);
    cdyn_mbs_free(mbs);
}
END_TEST

/* A bead (mass m) on a rod turning at the rate w about the origin, under
 * gravity: Phi = -x sin wt + y cos wt = n(t).q, n = (-sin wt, cos wt),
 * Phi_t = -w (x cos wt + y sin wt), and
 *     xi = 2w (x' cos wt + y' sin wt) - w^2 (x sin wt - y cos wt).
 * With |n| = 1 the Lagrange form is q'' = Q/m + n (s - n.Q/m),
 * s = xi - K_D Phi' - K_P Phi, so by hand (Q constant)
 *     dq''/dy = n ds/dy,   ds/dy = dxi/dy - K_D dPhi'/dy - K_P dPhi/dy,
 *     dxi/dq = w^2 (-sin wt, cos wt),  dxi/dq' = 2w (cos wt, sin wt),
 *     dPhi/dq = n,  dPhi'/dq = -w (cos wt, sin wt),  dPhi'/dq' = n. */
typedef struct {
    double m, w;
} bead;

static int bead_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const bead *b = user;
    M[0] = M[1 + ld] = b->m;
    M[1] = M[ld] = 0.0;
    return 0;
}

static int bead_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t, (void)q, (void)qd;
    const bead *b = user;
    Q[0] = 0.0;
    Q[1] = -b->m * G;
    return 0;
}

static int bead_phi(double t, const double *q, double *Phi, void *user)
{
    const bead *b = user;
    Phi[0] = -q[0] * sin(b->w * t) + q[1] * cos(b->w * t);
    return 0;
}

static int bead_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)q;
    const bead *b = user;
    J[0] = -sin(b->w * t);
    J[ld] = cos(b->w * t);
    return 0;
}

static int bead_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    const bead *b = user;
    Phi_t[0] = -b->w * (q[0] * cos(b->w * t) + q[1] * sin(b->w * t));
    return 0;
}

static int bead_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    const bead *b = user;
    double c = cos(b->w * t), s = sin(b->w * t);
    xi[0] = 2.0 * b->w * (qd[0] * c + qd[1] * s) - b->w * b->w * (q[0] * s - q[1] * c);
    return 0;
}

/* ---- a heavy mass pair on a stiff spring: q = (q1, q2), q1 = q2 ---------- */

/* Two equal masses m joined rigidly (Phi = q1 - q2), a spring of
 * stiffness K on q1: 2 m z'' = -K z, so the partitioned state matrix is
 * [0 1; -K / (2 m) 0] whichever coordinate is independent. In SI with
 * m = 1 kg and K = 1e10 N/m, and with forces and masses both 1e300 times
 * larger (m = 1e300 kg, K = 1e310 N/m: the same motion); K itself is not
 * representable there, and Q = -(k q1) k with k = 1e155. */
typedef struct {
    double m, k; /* K = k^2 */
} spring_pair;

static int sp_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const spring_pair *s = user;
    M[0] = M[1 + ld] = s->m;
    M[1] = M[ld] = 0.0;
    return 0;
}

static int sp_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    (void)t, (void)qdot;
    const spring_pair *s = user;
    Q[0] = -(s->k * q[0]) * s->k;
    Q[1] = 0.0;
    return 0;
}

static int sp_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = q[0] - q[1];
    return 0;
}

static int sp_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)q, (void)user;
    J[0] = 1.0;
    J[ld] = -1.0;
    return 0;
}

static int sp_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = 0.0;
    return 0;
}

static int sp_xi(double t, const double *q, const double *qdot, double *xi, void *user)
{
    (void)t, (void)q, (void)qdot, (void)user;
    xi[0] = 0.0;
    return 0;
}

/* At m = 1e300 kg the chain rule's differences of Q along a column
 * (|Q| = 1e307 N over steps of about 1e-11 m) overflow, so that column's
 * solve is not certified, and cdyn_mbs_partition_jacobian differences the
 * partitioned right-hand side instead (12 d + 2 = 14 more evaluations, as
 * mbs.h says); its accelerations are 5e6 m/s^2, their differences finite.
 * Both unit systems must give the hand matrix; in SI the chain rule
 * serves (one partitioned right-hand side). */
START_TEST(partition_jacobian_differences_the_right_hand_side_where_the_chain_overflows)
{
    const double masses[2] = {1.0, 1e300}, stiff[2] = {1e5, 1e155};
    const long evaluations[2] = {1, 15};
    for (int u = 0; u < 2; ++u) {
        spring_pair s = {masses[u], stiff[u]};
        cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, sp_mass, sp_force, sp_phi, sp_jacobian, &s),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, sp_phi_t, sp_xi), CDYN_OK);
        double y[4] = {1e-3, 1e-3, 0.3, 0.3}, z[2], A[4];
        ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
        cdyn_mbs_counters before, after;
        cdyn_mbs_get_counters(mbs, &before);
        ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_OK);
        cdyn_mbs_get_counters(mbs, &after);
        ck_assert_int_eq(after.partition_rhs - before.partition_rhs, evaluations[u]);
        const double hand[4] = {0.0, -5e9, 1.0, 0.0}; /* by columns */
        ck_assert_double_le(column_error(2, A, hand), 1e-10); /* 7e-14, 1.2e-13 seen */
        cdyn_mbs_free(mbs);
    }
}
END_TEST

START_TEST(lagrange_jacobian_of_a_rheonomic_constraint_by_hand)
{
    bead b = {0.3, 1.7};
    const double t = 0.7, kd = 2.0 * 3.0, kp = 4.0 * 4.0;
    double c = cos(b.w * t), sn = sin(b.w * t), nv[2] = {-sn, c};
    /* on the rod 0.8 m out, 1e-3 m off it, sliding and turning with it */
    double y[4] = {0.8 * c + 1e-3 * nv[0], 0.8 * sn + 1e-3 * nv[1], 0.0, 0.0}, J[16], hand[16];
    y[2] = 0.5 * c - b.w * 0.8 * sn;
    y[3] = 0.5 * sn + b.w * 0.8 * c;
    for (int variant = 0; variant < 3; ++variant) { /* time terms: given, xi left, both left */
        cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, bead_mass, bead_force, bead_phi, bead_jacobian, &b),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, variant < 2 ? bead_phi_t : NULL,
                                                 variant == 0 ? bead_xi : NULL),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(cdyn_mbs_constraint(mbs), 3.0, 4.0),
                         CDYN_OK);
        double ds[4] = {b.w * b.w * (-sn) - kd * (-b.w * c) - kp * nv[0],
                        b.w * b.w * c - kd * (-b.w * sn) - kp * nv[1],
                        2.0 * b.w * c - kd * nv[0], 2.0 * b.w * sn - kd * nv[1]};
        memset(hand, 0, sizeof hand);
        hand[0 + 4 * 2] = hand[1 + 4 * 3] = 1.0;
        for (int j = 0; j < 4; ++j)
            for (int i = 0; i < 2; ++i) hand[2 + i + 4 * j] = nv[i] * ds[j];
        long before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, t, y, NULL, J, 4), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        double err = column_error(4, J, hand);
        ck_assert_msg(err <= (variant == 0 ? 1e-10 : 1e-6), "variant %d: off by %.3e", variant,
                      err);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* Two coupled damped oscillators without constraints (m = 0): masses
 * (m1, m2), springs k1 to ground and k12 between them, dampers c on each,
 * and a cubic spring e q_1^3 on the first:
 *     q1'' = (-k1 q1 - e q1^3 - k12 (q1 - q2) - c q1') / m1,
 *     q2'' = (-k12 (q2 - q1) - c q2') / m2,
 * whose Jacobian is written down directly. */
typedef struct {
    double m1, m2, k1, k12, c, e;
} springs;

static int springs_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const springs *s = user;
    M[0] = s->m1;
    M[1 + ld] = s->m2;
    M[1] = M[ld] = 0.0;
    return 0;
}

static int springs_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    const springs *s = user;
    Q[0] = -s->k1 * q[0] - s->e * q[0] * q[0] * q[0] - s->k12 * (q[0] - q[1]) - s->c * qd[0];
    Q[1] = -s->k12 * (q[1] - q[0]) - s->c * qd[1];
    return 0;
}

static int springs_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)q, (void)Phi, (void)user;
    return 0;
}

static int springs_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)q, (void)J, (void)ld, (void)user;
    return 0;
}

START_TEST(jacobian_without_constraints_by_hand_and_into_its_own_state)
{
    springs sp = {2.0, 0.5, 30.0, 12.0, 0.4, 5.0};
    cdyn_mbs *mbs = cdyn_mbs_create(2, 0, NULL);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, springs_mass, springs_force, springs_phi,
                                        springs_jacobian, &sp),
                     CDYN_OK);
    double y[4] = {0.3, -0.2, 1.1, -0.7}, J[16], hand[16] = {0};
    hand[0 + 4 * 2] = hand[1 + 4 * 3] = 1.0;
    hand[2 + 4 * 0] = (-sp.k1 - 3.0 * sp.e * y[0] * y[0] - sp.k12) / sp.m1;
    hand[2 + 4 * 1] = sp.k12 / sp.m1;
    hand[2 + 4 * 2] = -sp.c / sp.m1;
    hand[3 + 4 * 0] = sp.k12 / sp.m2;
    hand[3 + 4 * 1] = -sp.k12 / sp.m2;
    hand[3 + 4 * 3] = -sp.c / sp.m2;
    long before = rhs_count(mbs);
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
    ck_assert_int_eq(rhs_count(mbs) - before, 1);
    double err = column_error(4, J, hand);
    ck_assert_msg(err <= 1e-10, "off by %.3e", err);
    /* J may alias y (mbs.h): the state in J's first column, the same J */
    double both[16];
    memcpy(both, y, sizeof y);
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, both, NULL, both, 4), CDYN_OK);
    for (int i = 0; i < 16; ++i) ck_assert(both[i] == J[i]);
    cdyn_mbs_free(mbs);
}
END_TEST

/* A body on a spring in length units of L m (x = L x_u): friction
 * regularized over v0 (mu tanh(v / v0)), or a road of wavelength 2 pi
 * lambda under it (k lambda sin(x / lambda)), dry friction mu sign(v), or
 * a spring k x with quadratic drag mu v |v|.
 * M_u = m L^2, Q_u = L Q. */
typedef struct {
    double m, k, mu, v0, lambda, L;
    int kind; /* 0 regularized friction, 1 road, 2 dry friction, 3 quadratic drag */
} rough;

static int rough_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q, (void)ld;
    const rough *r = user;
    M[0] = r->m * r->L * r->L;
    return 0;
}

static int rough_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    const rough *r = user;
    double x = r->L * q[0], v = r->L * qd[0], f;
    if (r->kind == 0) f = -r->k * x - r->mu * tanh(v / r->v0);
    else if (r->kind == 1) f = -r->k * r->lambda * sin(x / r->lambda);
    else if (r->kind == 2) f = -r->mu * (v > 0.0 ? 1.0 : v < 0.0 ? -1.0 : 0.0);
    else f = -r->k * x - r->mu * v * fabs(v);
    Q[0] = r->L * f;
    return 0;
}

/* Difference steps that the state's size does not fit (mbs_linearize.c):
 * the speed column of friction regularized over v0 = 1e-4 m/s at rest,
 * stepped by 1e-3 of the position (1 m), came out -5833 /s where it is
 * -mu / (m v0) = -50000 /s; the position column of a road of wavelength
 * 62.8 m at x = 100 km, stepped by 100 m, came out -0.84 /s^2 where it is
 * -k cos(x / lambda) / m = +9.52 /s^2; both with CDYN_OK. Each step is now
 * checked against a central difference 16.6 times finer and refined until
 * they agree. Asserted against the hand Jacobians within 1e-8 (per
 * column), in length units of 1e-8, 1 and 1e8 m (1.2e-11 measured for the
 * friction, 6e-11 to 4.7e-10 for the road). */
START_TEST(steps_the_state_does_not_fit_are_refined_until_they_agree)
{
    const double units[3] = {1e-8, 1.0, 1e8};
    for (int u = 0; u < 3; ++u)
        for (int kind = 0; kind < 2; ++kind) {
            rough r = {2.0, 100.0, 5.0, 1e-4, 10.0, units[u], kind};
            cdyn_mbs *mbs = cdyn_mbs_create(1, 0, NULL);
            ck_assert_int_eq(cdyn_mbs_set_model(mbs, rough_mass, rough_force, springs_phi,
                                                springs_jacobian, &r),
                             CDYN_OK);
            double x = kind == 0 ? 1.0 : 1e5, y[2] = {x / r.L, 0.0}, J[4], hand[4];
            hand[0] = 0.0;
            hand[2] = 1.0;
            hand[1] = kind == 0 ? -r.k / r.m : -r.k * cos(x / r.lambda) / r.m;
            hand[3] = kind == 0 ? -r.mu / (r.m * r.v0) : 0.0;
            ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2), CDYN_OK);
            double err = column_error(2, J, hand);
            ck_assert_msg(err <= 1e-8, "units %g, kind %d: off by %.3e", r.L, kind, err);
            cdyn_mbs_free(mbs);
        }
}
END_TEST

/* The same friction on a body whose second coordinate is held by the
 * same constraint twice: the pseudo-inverse is below full rank, so the
 * Jacobian differences cdyn_mbs_rhs itself, with the same verified steps
 * (the speed column refined: 39 right-hand sides, against 27 unrefined;
 * 1.2e-11 off the hand Jacobian in each unit system).
 * M = diag(m L^2, 1), Q = (L f, 0), Phi = (q_2, q_2). */
static int rough2_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const rough *r = user;
    M[0] = r->m * r->L * r->L;
    M[1] = M[ld] = 0.0;
    M[1 + ld] = 1.0;
    return 0;
}

static int rough2_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    Q[1] = 0.0;
    return rough_force(t, q, qd, Q, user);
}

static int rough2_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = Phi[1] = q[1];
    return 0;
}

static int rough2_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)q, (void)user;
    J[0] = J[1] = 0.0;
    J[ld] = J[1 + ld] = 1.0;
    return 0;
}

START_TEST(differences_of_the_right_hand_side_refine_their_steps_too)
{
    const double units[3] = {1e-8, 1.0, 1e8};
    for (int u = 0; u < 3; ++u) {
        rough r = {2.0, 100.0, 5.0, 1e-4, 10.0, units[u], 0};
        cdyn_mbs *mbs = cdyn_mbs_create(2, 2, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, rough2_mass, rough2_force, rough2_phi,
                                            rough2_jacobian, &r),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PSEUDOINVERSE), CDYN_OK);
        double y[4] = {1.0 / r.L, 0.0, 0.0, 0.0}, J[16], hand[16] = {0};
        hand[0 + 4 * 2] = hand[1 + 4 * 3] = 1.0;
        hand[2 + 4 * 0] = -r.k / r.m;
        hand[2 + 4 * 2] = -r.mu / (r.m * r.v0);
        long before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
        ck_assert_int_gt(rhs_count(mbs) - before, 1 + 12 * 2 + 2); /* refined */
        double err = column_error(4, J, hand);
        ck_assert_msg(err <= 1e-8, "units %g: off by %.3e", r.L, err);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* A road's whole length: every step that does not fit (1e-3 of x, from
 * 1 m up) must be refined, and a coincidental agreement must not pass.
 * The first check alone (first derivatives at h, 2h against h / 16.6)
 * passed 148 of 2.7 million states between 1e3 and 5e6 m with d v'/d x
 * off by up to its whole size, where their disagreement crossed zero
 * (near x = 5.1e4, 1.0e5, 2.1e5, 2.6e5 m ...); with the second
 * differences checked too, none. Asserted over 300 000 states from 1 to
 * 5e6 m (lambda = 1 m): all CDYN_OK, within 1e-7 of -k cos(x) / m (3.4e-9
 * measured, the rounding of x itself). */
START_TEST(a_road_of_any_length_gives_its_slope)
{
    rough r = {1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1};
    cdyn_mbs *mbs = cdyn_mbs_create(1, 0, NULL);
    ck_assert_int_eq(
        cdyn_mbs_set_model(mbs, rough_mass, rough_force, springs_phi, springs_jacobian, &r),
        CDYN_OK);
    double worst = 0.0, at = 0.0;
    const double ratio = exp(log(5e6) / 300000.0);
    for (double x = 1.0; x < 5e6; x *= ratio) {
        double y[2] = {x, 0.0}, J[4];
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2), CDYN_OK);
        double err = fabs(J[1] + cos(x));
        if (err > worst) worst = err, at = x;
    }
    ck_assert_msg(worst <= 1e-7, "d v'/d x off by %.3e at x = %.9e", worst, at);
    cdyn_mbs_free(mbs);
}
END_TEST

/* Quadratic drag at rest has a derivative, 0, but no second derivative:
 * its differences fall with the step (2 mu h / 3m) and never meet the
 * relative agreement of a smooth force. They settle once they are below
 * 1e-4 of the largest size they had; the first verified version refused
 * this with CDYN_ERR_NOCONV. Asserted in length units of 1e-8, 1 and 1e8
 * m, the spring alone and with no spring at all: CDYN_OK, the spring's
 * column exact to 1e-12, |d v'/d v| <= 1e-7 / s (about 3e-9 measured). */
START_TEST(quadratic_drag_at_rest_has_its_zero_derivative)
{
    const double units[3] = {1e-8, 1.0, 1e8}, stiffness[2] = {3.0, 0.0};
    for (int u = 0; u < 3; ++u)
        for (int sp = 0; sp < 2; ++sp) {
            rough r = {2.0, stiffness[sp], 0.7, 0.0, 1.0, units[u], 3};
            cdyn_mbs *mbs = cdyn_mbs_create(1, 0, NULL);
            ck_assert_int_eq(cdyn_mbs_set_model(mbs, rough_mass, rough_force, springs_phi,
                                                springs_jacobian, &r),
                             CDYN_OK);
            double y[2] = {0.5 / r.L, 0.0}, J[4];
            ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2), CDYN_OK);
            ck_assert(J[0] == 0.0 && J[2] == 1.0);
            ck_assert_double_le(fabs(J[1] + r.k / r.m), 1e-12 * fmax(r.k / r.m, 1.0));
            ck_assert_msg(fabs(J[3]) <= 1e-7, "units %g, spring %g: d v'/d v = %.3e", r.L, r.k,
                          J[3]);
            cdyn_mbs_free(mbs);
        }
}
END_TEST

/* Dry friction at rest has no derivative in the speed: its difference
 * quotients grow as 1 / h and agree on no step. The call refuses with
 * CDYN_ERR_NOCONV naming the column, J untouched, and the object gives the
 * Jacobian of a sliding state next (d v' / d v = 0 there). */
START_TEST(a_force_without_a_derivative_is_refused)
{
    rough r = {2.0, 0.0, 5.0, 0.0, 1.0, 1.0, 2};
    cdyn_mbs *mbs = cdyn_mbs_create(1, 0, NULL);
    ck_assert_int_eq(
        cdyn_mbs_set_model(mbs, rough_mass, rough_force, springs_phi, springs_jacobian, &r),
        CDYN_OK);
    double y[2] = {0.5, 0.0}, J[4] = {7.0, 7.0, 7.0, 7.0};
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2), CDYN_ERR_NOCONV);
    ck_assert_ptr_nonnull(strstr(cdyn_mbs_last_error(mbs), "column 1"));
    for (int i = 0; i < 4; ++i) ck_assert(J[i] == 7.0);
    y[1] = 0.3;
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 2), CDYN_OK);
    ck_assert(J[0] == 0.0 && J[2] == 1.0 && J[1] == 0.0 && J[3] == 0.0);
    cdyn_mbs_free(mbs);
}
END_TEST

/* The pendulum with its constraint given twice: the pseudo-inverse is
 * below full rank, so its Jacobian differences the right-hand side. */
static int twice_phi(double t, const double *q, double *Phi, void *user)
{
    ck_assert_int_eq(tm_pendulum_phi(t, q, Phi, user), 0);
    Phi[1] = Phi[0];
    return 0;
}

static int twice_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0] = J[1] = 2.0 * q[0];
    J[ld] = J[1 + ld] = 2.0 * q[1];
    return 0;
}

/* The pendulum's penalty form in quad precision (T4.8, no gains):
 * (m I + alpha Phi_q^T Phi_q) q'' = Q + Phi_q^T alpha xi, Phi_q = 2 q^T,
 * xi = -2 |q'|^2, into qdd; alpha = 0: the exact form, [m I Phi_q^T;
 * Phi_q 0] [q''; lambda] = [Q; xi]. */
static void penalty_pendulum_quad(const bob *b, quad alpha, const quad *y, quad *qdd)
{
    quad x = y[0], z = y[1], u = y[2], w = y[3], m = b->m;
    quad xi = -2 * (u * u + w * w), K[4], rhs[2];
    if (alpha == 0) {
        quad A[9] = {m, 0, 2 * x, 0, m, 2 * z, 2 * x, 2 * z, 0}, r[3] = {0, -m * (quad)b->g, xi};
        quad sol[3];
        ck_assert_int_eq(qref_solve(3, A, r, sol), 0);
        qdd[0] = sol[0];
        qdd[1] = sol[1];
        return;
    }
    K[0] = m + alpha * 4 * x * x;
    K[1] = K[2] = alpha * 4 * x * z;
    K[3] = m + alpha * 4 * z * z;
    rhs[0] = alpha * xi * 2 * x;
    rhs[1] = -m * (quad)b->g + alpha * xi * 2 * z;
    ck_assert_int_eq(qref_solve(2, K, rhs, qdd), 0);
}

/* Its Jacobian by extrapolated central differences in quad (steps 1e-4
 * |y_j|: truncation about 1e-16 relative, rounding 1e-34 times the
 * penalty's conditioning over the step). */
static void penalty_pendulum_reference(const bob *b, double alpha, const double *y, double *J)
{
    quad ys[4], f[4][2];
    memset(J, 0, sizeof(double) * 16);
    J[0 + 4 * 2] = J[1 + 4 * 3] = 1.0;
    for (int j = 0; j < 4; ++j) {
        quad h = (quad)1e-4 * fabs(y[j]), steps[4] = {h, -h, 2 * h, -2 * h};
        for (int p = 0; p < 4; ++p) {
            for (int i = 0; i < 4; ++i) ys[i] = y[i];
            ys[j] += steps[p];
            penalty_pendulum_quad(b, alpha, ys, f[p]);
        }
        for (int i = 0; i < 2; ++i)
            J[2 + i + 4 * j] = (double)((8 * (f[0][i] - f[1][i]) - (f[2][i] - f[3][i])) / (12 * h));
    }
}

/* The default penalty form is refined to the exact form's right-hand
 * side away from singular poses (constraint.h), and its Jacobian through
 * the penalty factorization is refined the same way (the default masses
 * are powers of two: the same alpha over a neighbourhood of the state).
 * Against the quad reference above of the exact form, for a bob of 1 g to
 * 1 t in length units of 1e-4, 1 and 1e4 m (g scaled with them): within
 * 1e-9 of the largest entry of each column (measured: 1.4e-13; the
 * unrefined form was off by its bias, 3.3e-6). */
START_TEST(default_penalty_jacobian_is_the_exact_forms)
{
    const double masses[] = {1e-3, 1.0, 1e3}, units[] = {1e-4, 1.0, 1e4};
    for (int a = 0; a < 3; ++a)
        for (int u = 0; u < 3; ++u) {
            bob b = {masses[a], 1.3 / units[u], G / units[u]};
            double y[4], J[16], ref[16];
            tm_pendulum_state(&b, 0.4, 1.1, y);
            cdyn_mbs *mbs = sp_make(&b);
            ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PENALTY), CDYN_OK);
            ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
            penalty_pendulum_reference(&b, 0.0, y, ref);
            double err = column_error(4, J, ref);
            ck_assert_msg(err <= 1e-9, "mass %g, unit %g: off by %.3e", masses[a], units[u], err);
            cdyn_mbs_free(mbs);
        }
}
END_TEST

START_TEST(penalty_jacobian_through_its_factorization)
{
    /* the penalty form's own q'' (T4.8, not the KKT one), through the
     * factorization of M + Phi_q^T alpha Phi_q: the pendulum against a
     * quad-precision reference with penalties from soft to stiff (the
     * double right-hand side's rounding, cond ~ alpha, would drown a
     * difference reference), and the cart (M(th), two constraints,
     * Baumgarte gains, off the manifold) at a soft penalty against the
     * test's own differences of the right-hand side */
    const double alphas[] = {1e2, 1e6, 1e9};
    for (int a = 0; a < 3; ++a) {
        bob b = {2.0, 1.3, G};
        double y[4], J[16], ref[16], alpha[1] = {alphas[a]};
        tm_pendulum_state(&b, 0.4, 1.1, y);
        cdyn_mbs *mbs = sp_make(&b);
        ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PENALTY), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_set_penalty(cdyn_mbs_constraint(mbs), alpha), CDYN_OK);
        long before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        penalty_pendulum_reference(&b, alphas[a], y, ref);
        /* the penalty form itself is conditioned like alpha |Phi_q|^2 / m
         * (3.4e9 at alpha = 1e9): its q'', and so J, carry that times eps
         * (measured: below 1e-9 up to 1e6, 8.8e-8 at 1e9) */
        double err = column_error(4, J, ref), tol = fmax(1e-9, 10.0 * alphas[a] * 2.2e-16);
        ck_assert_msg(err <= tol, "pendulum, alpha %g: off by %.3e", alphas[a], err);
        cdyn_mbs_free(mbs);
        if (a > 0) continue;

        cart p = {3.0, 0.7, 0.4, 0.9, 0.3, 0.2, 0.5, 40.0};
        double yc[6] = {0.12, 0.5, 0.0, 0.4, -1.3, 0.0}, Jc[36], refc[36], pen[2] = {alphas[a], 3.0 * alphas[a]};
        yc[2] = p.L * sin(yc[1]) + yc[0] * yc[0] + 1e-3;
        yc[5] = 2.0 * yc[0] * yc[3] + p.L * cos(yc[1]) * yc[4];
        mbs = cdyn_mbs_create(3, 2, NULL);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, cart_mass, cart_force, cart_phi, cart_jacobian, &p),
                         CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, cart_phi_t, cart_xi), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PENALTY), CDYN_OK);
        cdyn_constraint *k = cdyn_mbs_constraint(mbs);
        ck_assert_int_eq(cdyn_constraint_set_penalty(k, pen), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(k, 5.0, 7.0), CDYN_OK);
        before = rhs_count(mbs);
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, yc, NULL, Jc, 6), CDYN_OK);
        ck_assert_int_eq(rhs_count(mbs) - before, 1);
        rhs_differences(mbs, yc, 3, refc);
        err = column_error(6, Jc, refc);
        ck_assert_msg(err <= 1e-9, "cart, alpha %g: off by %.3e", alphas[a], err);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

START_TEST(redundant_rows_difference_the_right_hand_side)
{
    bob b = {2.0, 1.3, G};
    double y[4], J[16], ref[16];
    long before;
    tm_pendulum_state(&b, 0.4, 1.1, y);
    /* a redundant row: one evaluation finds the factors unusable (the
     * pseudo-inverse below full rank), then the differences */
    cdyn_mbs *mbs = cdyn_mbs_create(2, 2, NULL);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, tm_pendulum_mass, tm_pendulum_force, twice_phi,
                                        twice_jacobian, &b),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_set_formulation(mbs, CDYN_MBS_PSEUDOINVERSE), CDYN_OK);
    before = rhs_count(mbs);
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
    ck_assert_int_eq(rhs_count(mbs) - before, 1 + 12 * 2 + 2); /* 6 per column, 2 at y */
    rhs_differences(mbs, y, 2, ref);
    ck_assert_double_le(column_error(4, J, ref), 1e-6);
    cdyn_mbs_free(mbs);
}
END_TEST

/* A two-link arm (point masses m1 = m2 = 1 kg at the ends of links 0.5 m
 * long, relative joint angles from the downward vertical) held at rest by
 * constant joint torques at theta1 = 0.5 rad and theta2 small: nearly
 * straight. At rest and in equilibrium q'' = M^-1 (tau - G(q)) has
 * d q''/dq = -M^-1 dG/dq by hand (the velocity terms are quadratic in q'),
 * G1 = (m1 + m2) g l1 sin th1 + m2 g l2 sin(th1 + th2),
 * G2 = m2 g l2 sin(th1 + th2). The steps of a column started at 1e-3 of
 * |theta2| alone: from 1e-6 rad, refined below what th1 + th2 resolves,
 * every difference was 0 and the stiffness column came back 0 with
 * CDYN_OK (a mode lost), or CDYN_ERR_NOCONV at 1e-4 rad, or 5.4e-6 off at
 * 0.01 rad (found by an adversarial review). Locking the base joint
 * (Phi = th1 - 0.5) leaves the link-2 pendulum, omega^2 = g cos(th1 +
 * th2) / l2, through cdyn_mbs_partition_jacobian, whose independent
 * state holds theta2 alone. */
typedef struct {
    double tau[2];
} held_arm;

static const double arm_l = 0.5;

static int arm_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)user;
    double c2 = cos(q[1]), l = arm_l;
    M[0] = 2.0 * l * l + l * l + 2.0 * l * l * c2;
    M[1] = M[ld] = l * l + l * l * c2;
    M[1 + ld] = l * l;
    return 0;
}

static int arm_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    const held_arm *a = user;
    double l = arm_l, h = l * l * sin(q[1]), s12 = sin(q[0] + q[1]);
    Q[0] = a->tau[0] - 2.0 * G * l * sin(q[0]) - G * l * s12 +
           h * (2.0 * qd[0] * qd[1] + qd[1] * qd[1]);
    Q[1] = a->tau[1] - G * l * s12 - h * qd[0] * qd[0];
    return 0;
}

static int arm_lock(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = q[0] - 0.5;
    return 0;
}

static int arm_lock_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)q, (void)user;
    J[0] = 1.0, J[ld] = 0.0;
    return 0;
}

START_TEST(a_held_arm_nearly_straight_keeps_its_stiffness)
{
    const double bends[] = {1e-14, 1e-8, 1e-6, 1e-4, 1e-2, 0.3};
    for (size_t b = 0; b < sizeof bends / sizeof bends[0]; ++b) {
        double th1 = 0.5, th2 = bends[b], l = arm_l, c12 = cos(th1 + th2);
        held_arm a = {{2.0 * G * l * sin(th1) + G * l * sin(th1 + th2), G * l * sin(th1 + th2)}};
        /* by hand: K = -M^-1 dG/dq */
        double M[4], dG[4] = {2.0 * G * l * cos(th1) + G * l * c12, G * l * c12, G * l * c12,
                              G * l * c12}; /* column-major, symmetric */
        double q[2] = {th1, th2};
        arm_mass(0.0, q, M, 2, NULL);
        double det = M[0] * M[3] - M[1] * M[2], K[4];
        K[0] = -(M[3] * dG[0] - M[2] * dG[1]) / det;
        K[1] = -(-M[1] * dG[0] + M[0] * dG[1]) / det;
        K[2] = -(M[3] * dG[2] - M[2] * dG[3]) / det;
        K[3] = -(-M[1] * dG[2] + M[0] * dG[3]) / det;
        cdyn_mbs *mbs = cdyn_mbs_create(2, 0, NULL);
        ck_assert_ptr_nonnull(mbs);
        ck_assert_int_eq(cdyn_mbs_set_model(mbs, arm_mass, arm_force, arm_lock, arm_lock_jacobian, &a),
                         CDYN_OK); /* m = 0: Phi unused */
        double y[4] = {th1, th2, 0.0, 0.0}, J[16];
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < 2; ++i) {
                double size = fmax(fabs(K[2 * j]), fabs(K[1 + 2 * j]));
                ck_assert_msg(fabs(J[2 + i + 4 * j] - K[i + 2 * j]) <= 1e-8 * size,
                              "theta2 = %g: dq''_%d/dq_%d = %.15g, by hand %.15g", th2, i, j,
                              J[2 + i + 4 * j], K[i + 2 * j]);
            }
        cdyn_mbs_free(mbs);
        /* the base locked: one independent coordinate, theta2 */
        mbs = cdyn_mbs_create(2, 1, NULL);
        ck_assert_ptr_nonnull(mbs);
        ck_assert_int_eq(
            cdyn_mbs_set_model(mbs, arm_mass, arm_force, arm_lock, arm_lock_jacobian, &a),
            CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
        int independent = -1;
        cdyn_mbs_partition_coordinates(mbs, &independent, NULL);
        ck_assert_int_eq(independent, 1);
        double z[2], A[4], w2 = G * c12 / l;
        ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
        ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_OK);
        ck_assert_msg(fabs(A[1] + w2) <= 1e-8 * w2, "theta2 = %g: A[1, 0] = %.15g, by hand %.15g",
                      th2, A[1], -w2);
        ck_assert_double_le(fabs(A[3]), 1e-8 * sqrt(w2));
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* A thin bearing film beside a crank of many turns (found by a second
 * review of the step above): q = (theta, x), M = diag(0.01, 0.5), Q =
 * (-2 sin theta, -1e-6 (1 / (c - x)^2 - 1 / (c + x)^2)), c = 1e-5 m, at
 * theta = 1.2e5 rad. By hand dx''/dx = -1e-6 (2 / (c - x)^3 + 2 / (c + x)^3)
 * / 0.5 and dtheta''/dtheta = -2 cos theta / 0.01. The broad first step of
 * x (1e-3 of 1.2e5 rad, in metres) was refined seven times to 3.4e-7 m
 * and came back 2e-5 to 2.6e-4 off with CDYN_OK, or CDYN_ERR_NOCONV at
 * x = 8e-6 m; a broad step that does not settle at once now gives way to
 * the entry's own. */
static int film_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q, (void)user;
    M[0] = 0.01, M[1] = 0.0, M[ld] = 0.0, M[1 + ld] = 0.5;
    return 0;
}

static int film_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t, (void)qd, (void)user;
    const double c = 1e-5;
    Q[0] = -2.0 * sin(q[0]);
    Q[1] = -1e-6 * (1.0 / ((c - q[1]) * (c - q[1])) - 1.0 / ((c + q[1]) * (c + q[1])));
    return 0;
}

START_TEST(a_thin_film_beside_a_crank_of_many_turns)
{
    const double c = 1e-5, gaps[] = {0.0, 1e-6, 2e-6, 5e-6, 8e-6};
    for (size_t k = 0; k < sizeof gaps / sizeof gaps[0]; ++k) {
        double x = gaps[k], th = 1.2e5;
        cdyn_mbs *mbs = cdyn_mbs_create(2, 0, NULL);
        ck_assert_ptr_nonnull(mbs);
        ck_assert_int_eq(
            cdyn_mbs_set_model(mbs, film_mass, film_force, arm_lock, arm_lock_jacobian, NULL),
            CDYN_OK); /* m = 0: Phi unused */
        double y[4] = {th, x, 0.0, 0.0}, J[16];
        ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
        double dxx = -1e-6 * (2.0 / pow(c - x, 3) + 2.0 / pow(c + x, 3)) / 0.5;
        double dthth = -2.0 * cos(th) / 0.01;
        ck_assert_msg(fabs(J[3 + 4] - dxx) <= 1e-8 * fabs(dxx), "x = %g: dx''/dx = %.12g, by "
                      "hand %.12g", x, J[3 + 4], dxx);
        ck_assert_msg(fabs(J[2] - dthth) <= 1e-8 * fabs(dthth), "x = %g: dth''/dth = %.12g, by "
                      "hand %.12g", x, J[2], dthth);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* The pendulum's force callback refuses states with x beyond a limit. */
static double refuse_beyond;
static int picky_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    if (q[0] > refuse_beyond) return 7;
    return tm_pendulum_force(t, q, qd, Q, user);
}

START_TEST(a_failed_jacobian_leaves_the_object_as_before)
{
    bob b = {2.0, 1.3, G};
    cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, tm_pendulum_mass, picky_force, tm_pendulum_phi,
                                        tm_pendulum_jacobian, &b),
                     CDYN_OK);
    double y0[4], y[4], ydot[4], J[16], r_before[2], m_before[1], r_after[2], m_after[1];
    refuse_beyond = 1e300;
    tm_pendulum_state(&b, -0.2, 0.3, y0);
    ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, y0, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r_before, m_before), CDYN_OK);
    /* at y itself fine, refused a step to the right of it */
    tm_pendulum_state(&b, 0.4, 1.1, y);
    refuse_beyond = y[0] * (1.0 + 1e-4);
    for (int i = 0; i < 16; ++i) J[i] = 5.0;
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_ERR_CALLBACK);
    ck_assert_int_eq(cdyn_mbs_callback_code(mbs), 7);
    for (int i = 0; i < 16; ++i) ck_assert(J[i] == 5.0);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r_after, m_after), CDYN_OK);
    ck_assert(r_after[0] == r_before[0] && r_after[1] == r_before[1] && m_after[0] == m_before[0]);
    /* and usable: the same call without the refusal */
    refuse_beyond = 1e300;
    ck_assert_int_eq(cdyn_mbs_rhs_jacobian(mbs, 0.0, y, NULL, J, 4), CDYN_OK);
    /* the state matrix likewise: its evaluation at z commits, a refused
     * step of its differences gives back what was there before the call */
    double z[2], A[4] = {5.0, 5.0, 5.0, 5.0};
    ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, y0, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r_before, m_before), CDYN_OK);
    refuse_beyond = y[0] * (1.0 + 1e-4);
    ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_ERR_CALLBACK);
    ck_assert_int_eq(cdyn_mbs_callback_code(mbs), 7);
    for (int i = 0; i < 4; ++i) ck_assert(A[i] == 5.0);
    ck_assert_int_eq(cdyn_mbs_last_reactions(mbs, r_after, m_after), CDYN_OK);
    ck_assert(r_after[0] == r_before[0] && r_after[1] == r_before[1] && m_after[0] == m_before[0]);
    refuse_beyond = 1e300;
    ck_assert_int_eq(cdyn_mbs_partition_jacobian(mbs, 0.0, z, NULL, A, 2), CDYN_OK);
    cdyn_mbs_free(mbs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linearize");
    TCase *tc = tcase_create("mechanisms");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, double_pendulum_frequencies_by_hand);
    tcase_add_test(tc, double_pendulum_in_motion_against_a_quad_reference);
    tcase_add_test(tc, single_pendulum_state_matrix_by_hand);
    tcase_add_test(tc, single_pendulum_input_matrix_by_hand);
    tcase_add_test(tc, lagrange_rhs_jacobian_meets_the_differentiated_constraint);
    tcase_add_test(tc, no_allocation_and_state_of_the_operating_point);
    tcase_add_test(tc, lagrange_jacobian_through_the_factorization_is_the_hand_jacobian);
    tcase_add_test(tc, lagrange_jacobian_with_gains_and_a_configuration_dependent_mass);
    tcase_add_test(tc, lagrange_jacobian_of_a_large_mechanism_on_the_general_path);
    tcase_add_test(tc, lagrange_jacobian_of_a_rheonomic_constraint_by_hand);
    tcase_add_test(tc, jacobian_without_constraints_by_hand_and_into_its_own_state);
    tcase_add_test(tc, penalty_jacobian_through_its_factorization);
    tcase_add_test(tc, default_penalty_jacobian_is_the_exact_forms);
    tcase_add_test(tc, redundant_rows_difference_the_right_hand_side);
    tcase_add_test(tc, a_failed_jacobian_leaves_the_object_as_before);
    tcase_add_test(tc, partition_jacobian_differences_the_right_hand_side_where_the_chain_overflows);
    tcase_add_test(tc, steps_the_state_does_not_fit_are_refined_until_they_agree);
    tcase_add_test(tc, a_force_without_a_derivative_is_refused);
    tcase_add_test(tc, a_road_of_any_length_gives_its_slope);
    tcase_add_test(tc, a_held_arm_nearly_straight_keeps_its_stiffness);
    tcase_add_test(tc, a_thin_film_beside_a_crank_of_many_turns);
    tcase_add_test(tc, quadratic_drag_at_rest_has_its_zero_derivative);
    tcase_add_test(tc, differences_of_the_right_hand_side_refine_their_steps_too);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
