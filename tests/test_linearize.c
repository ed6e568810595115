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
 *    component of the force (single_pendulum_input_matrix_by_hand).
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
#include "testutil.h"
#include "cdyn.h"

static const double G = 9.81;

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
    /* [0 I; K D]: top half exact to the differences, D = 0 at rest */
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 2; ++i)
            ck_assert_double_le(fabs(A[i + 4 * j] - (j == i + 2 ? 1.0 : 0.0)), 1e-9);
    double scale = G / c.L;
    for (int j = 2; j < 4; ++j)
        for (int i = 2; i < 4; ++i) ck_assert_double_le(fabs(A[i + 4 * j]), 1e-7 * scale);
    /* omega^2 = eigenvalues of -K (2 x 2) */
    double k11 = -A[2], k21 = -A[3], k12 = -A[2 + 4], k22 = -A[3 + 4];
    double tr = k11 + k22, det = k11 * k22 - k12 * k21, disc = sqrt(tr * tr / 4.0 - det);
    double w_low = tr / 2.0 - disc, w_high = tr / 2.0 + disc;
    double e_low = scale * (2.0 - sqrt(2.0)), e_high = scale * (2.0 + sqrt(2.0));
    ck_assert_msg(fabs(w_low - e_low) <= 1e-7 * e_high && fabs(w_high - e_high) <= 1e-7 * e_high,
                  "omega^2 = %.12g, %.12g; by hand %.12g, %.12g", w_low, w_high, e_low, e_high);
    cdyn_mbs_free(mbs);
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
            ck_assert_double_le(fabs(A[0]), 1e-9);
            ck_assert_double_le(fabs(A[2] - 1.0), 1e-9);
            ck_assert_msg(fabs(A[1] - dfdx) <= 1e-7 * fabs(dfdx),
                          "time terms %d, L %g: df/dx %.15g vs %.15g", tt, L, A[1], dfdx);
            ck_assert_msg(fabs(A[3] - dfdv) <= 1e-7 * fabs(dfdv),
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

int main(void)
{
    Suite *s = suite_create("linearize");
    TCase *tc = tcase_create("mechanisms");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, double_pendulum_frequencies_by_hand);
    tcase_add_test(tc, single_pendulum_state_matrix_by_hand);
    tcase_add_test(tc, single_pendulum_input_matrix_by_hand);
    tcase_add_test(tc, lagrange_rhs_jacobian_meets_the_differentiated_constraint);
    tcase_add_test(tc, no_allocation_and_state_of_the_operating_point);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
