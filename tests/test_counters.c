/* Counters (newton.h, dae.h, mbs.h: cdyn_*_get_counters): what each counts,
 * against hand counts and identities between the counters of an object and
 * those of its Newton solver, and reset. */
#include <cdyn.h>

#include <check.h>

#include "models.h"
#include "testutil.h"
#include <math.h>
#include <string.h>

/* ---- newton: G = x^2 - 4 (root 2), J = 2x ------------------------------- */

static int sq_residual(const double *x, double *G, void *user)
{
    (void)user;
    G[0] = x[0] * x[0] - 4.0;
    return 0;
}

static int sq_jacobian(const double *x, double *J, int ld, void *user)
{
    (void)user;
    (void)ld;
    J[0] = 2.0 * x[0];
    return 0;
}

static int none_residual(const double *x, double *G, void *user) /* x^2 + 1: no root */
{
    (void)user;
    G[0] = x[0] * x[0] + 1.0;
    return 0;
}

/* Asserts: after two solves the counters are the sums of the two reports
 * (solves 2, failures 0); the loop evaluates J once per iterate it judges,
 * the returned one included: jacobian evaluations = iterations + 1 per
 * converged solve; a failing solve (no root, cap 3) adds a failure and 3
 * iterations; a step adds a step and nothing else; a Jacobian check adds
 * nothing; reset zeroes everything. */
START_TEST(newton_counters_sum_the_reports)
{
    cdyn_newton *nt = cdyn_newton_create(1, 1, NULL);
    ck_assert_ptr_nonnull(nt);
    cdyn_newton_counters c;
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &c), CDYN_OK);
    ck_assert(c.solves == 0 && c.iterations == 0 && c.residual_evaluations == 0);
    cdyn_newton_report r[2];
    const double starts[2] = {3.0, 1.0};
    for (int k = 0; k < 2; ++k) {
        double x = starts[k];
        ck_assert_int_eq(cdyn_newton_solve(nt, sq_residual, sq_jacobian, NULL, &x), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_get_report(nt, &r[k]), CDYN_OK);
    }
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &c), CDYN_OK);
    ck_assert_int_eq(c.solves, 2);
    ck_assert_int_eq(c.failures, 0);
    ck_assert_int_eq(c.iterations, r[0].iterations + r[1].iterations);
    ck_assert_int_eq(c.residual_evaluations, r[0].residual_evaluations + r[1].residual_evaluations);
    ck_assert_int_eq(c.svd_steps, r[0].svd_steps + r[1].svd_steps);
    ck_assert_int_eq(c.backtracks, r[0].backtracks + r[1].backtracks);
    ck_assert_int_eq(c.jacobian_evaluations, r[0].iterations + r[1].iterations + 2);
    ck_assert_int_eq(c.steps, 0);

    cdyn_newton_counters before = c;
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 3), CDYN_OK);
    double x = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, none_residual, sq_jacobian, NULL, &x),
                     CDYN_ERR_NOCONV);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &c), CDYN_OK);
    ck_assert_int_eq(c.solves, before.solves + 1);
    ck_assert_int_eq(c.failures, 1);
    ck_assert_int_le(c.iterations - before.iterations, 3);
    ck_assert_int_ge(c.iterations - before.iterations, 1);

    before = c;
    const double J = 2.0, G = 1.0;
    double dx;
    ck_assert_int_eq(cdyn_newton_step(nt, &J, 1, &G, &dx), CDYN_OK);
    cdyn_jacobian_check check;
    x = 2.5;
    ck_assert_int_eq(cdyn_newton_check_jacobian(nt, sq_residual, sq_jacobian, NULL, &x, &check),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &c), CDYN_OK);
    before.steps++;
    ck_assert(memcmp(&c, &before, sizeof c) == 0);

    ck_assert_int_eq(cdyn_newton_reset_counters(nt), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &c), CDYN_OK);
    const cdyn_newton_counters zero = {0};
    ck_assert(memcmp(&c, &zero, sizeof c) == 0);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_get_counters(NULL, &c), CDYN_ERR_ARG);
    cdyn_newton_free(nt);
}
END_TEST

/* ---- dae: M = diag(1, 0), x' = -x + y, 0 = y^3 + y - cos t --------------- */

static int cubic_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    F[0] = -v[0] + v[1];
    F[1] = v[1] * v[1] * v[1] + v[1] - cos(t);
    return 0;
}

static int cubic_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t;
    (void)user;
    J[0] = -1.0, J[ld] = 1.0;
    J[1] = 0.0, J[1 + ld] = 3.0 * v[1] * v[1] + 1.0;
    return 0;
}

static int cubic_time(double t, const double *v, double *dFdt, void *user)
{
    (void)v;
    (void)user;
    dFdt[0] = 0.0;
    dFdt[1] = sin(t);
    return 0;
}

/* With all three callbacks, one cdyn_dae_rhs calls F once per residual
 * evaluation of its Newton solve (G0 = beta^T F) and once more at the
 * solution (F for the rates), dF/dv once per Newton Jacobian (the rates
 * reuse the last one, taken at the solution, when G_a had full rank there,
 * as it has here), dF/dt once; M is constant. Asserts these identities between
 * the dae's counters and its solver's over 5 rhs calls, rhs == 5 with no
 * failures, and that reset zeroes the dae's counters only. */
START_TEST(dae_counters_match_the_solver_and_the_calls)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    ck_assert_ptr_nonnull(dae);
    const double M[4] = {1.0, 0.0, 0.0, 0.0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, cubic_force, cubic_jacobian, cubic_time, NULL),
                     CDYN_OK);
    double v[2] = {1.0, 0.5};
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_consistent(dae, 0.0, v), CDYN_OK);
    cdyn_newton *nt = cdyn_dae_newton(dae);
    ck_assert_int_eq(cdyn_dae_reset_counters(dae), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_reset_counters(nt), CDYN_OK);
    double y = v[0], ydot;
    for (int k = 1; k <= 5; ++k)
        ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1 * k, &y, &ydot), CDYN_OK);
    cdyn_dae_counters c;
    cdyn_newton_counters n;
    ck_assert_int_eq(cdyn_dae_get_counters(dae, &c), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &n), CDYN_OK);
    ck_assert_int_eq(c.rhs, 5);
    ck_assert_int_eq(c.rhs_failures, 0);
    ck_assert_int_eq(n.solves, 5);
    ck_assert_int_eq(c.force_evaluations, n.residual_evaluations + c.rhs);
    ck_assert_int_eq(c.jacobian_evaluations, n.jacobian_evaluations);
    ck_assert_int_eq(c.time_evaluations, c.rhs);
    ck_assert_int_eq(c.mass_evaluations, 0);
    ck_assert_int_eq(cdyn_dae_reset_counters(dae), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_get_counters(dae, &c), CDYN_OK);
    ck_assert(c.rhs == 0 && c.force_evaluations == 0);
    ck_assert_int_eq(cdyn_newton_get_counters(nt, &n), CDYN_OK);
    ck_assert_int_eq(n.solves, 5); /* the solver's own are kept */
    cdyn_dae_free(dae);
}
END_TEST

/* ---- mbs: the Cartesian pendulum of tests/models.h, m = l = 1 ------------ */

static const tm_pendulum PD = {1.0, 1.0, 9.81};


/* With every callback given and no stabilizer gains (the default), one
 * cdyn_mbs_rhs calls M, Q, Phi_q and xi once each, and Phi and Phi_t not at
 * all: cdyn_mbs_last_residuals calls Phi, Phi_q and Phi_t once, and once
 * only. With Baumgarte gains an rhs calls all six. Asserts: 4 rhs calls give
 * 4 of each it calls, a projection and a velocity projection count once
 * each, a partition and a partition_rhs once each, and reset zeroes all. */
START_TEST(mbs_counters_count_calls_and_callbacks)
{
    cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
    ck_assert_ptr_nonnull(mbs);
    ck_assert_int_eq(tm_pendulum_set(mbs, &PD, 1), CDYN_OK);
    const double th = 0.4;
    double y[4] = {sin(th), -cos(th), 0.3 * cos(th), 0.3 * sin(th)}, ydot[4];
    for (int k = 0; k < 4; ++k) ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, y, ydot), CDYN_OK);
    cdyn_mbs_counters c;
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &c), CDYN_OK);
    ck_assert(c.rhs == 4 && c.rhs_failures == 0);
    ck_assert(c.mass_evaluations == 4 && c.force_evaluations == 4 && c.phi_evaluations == 0);
    ck_assert(c.jacobian_evaluations == 4 && c.phi_t_evaluations == 0 && c.xi_evaluations == 4);
    double rp, rv;
    for (int k = 0; k < 2; ++k) ck_assert_int_eq(cdyn_mbs_last_residuals(mbs, &rp, &rv), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &c), CDYN_OK);
    ck_assert(c.phi_evaluations == 1 && c.jacobian_evaluations == 5 && c.phi_t_evaluations == 1);
    ck_assert(c.rhs == 4 && c.mass_evaluations == 4 && c.xi_evaluations == 4);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(cdyn_mbs_constraint(mbs), 1.0, 1.0), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_reset_counters(mbs), CDYN_OK);
    for (int k = 0; k < 4; ++k) ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, y, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_last_residuals(mbs, &rp, &rv), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &c), CDYN_OK);
    ck_assert(c.mass_evaluations == 4 && c.force_evaluations == 4 && c.phi_evaluations == 4);
    ck_assert(c.jacobian_evaluations == 4 && c.phi_t_evaluations == 4 && c.xi_evaluations == 4);
    ck_assert(c.projections == 0 && c.velocity_projections == 0 && c.partitions == 0);
    ck_assert_int_eq(cdyn_mbs_project(mbs, 0.0, y), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_project_velocities(mbs, 0.0, y), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition(mbs, 0.0, y), CDYN_OK);
    double z[2], zdot[2];
    ck_assert_int_eq(cdyn_mbs_partition_gather(mbs, y, z), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_partition_rhs(mbs, 0.0, z, zdot), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &c), CDYN_OK);
    ck_assert(c.projections == 1 && c.velocity_projections == 1);
    ck_assert(c.partitions == 1 && c.partition_rhs == 1 && c.rhs == 4);
    ck_assert_int_eq(cdyn_mbs_reset_counters(mbs), CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_get_counters(mbs, &c), CDYN_OK);
    const cdyn_mbs_counters zero = {0};
    ck_assert(memcmp(&c, &zero, sizeof c) == 0);
    cdyn_mbs_free(mbs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("counters");
    TCase *tc = tcase_create("counters");
    tcase_add_test(tc, newton_counters_sum_the_reports);
    tcase_add_test(tc, dae_counters_match_the_solver_and_the_calls);
    tcase_add_test(tc, mbs_counters_count_calls_and_callbacks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
