/* cdyn_dae_residual and cdyn_dae_residual_jacobian (THEORY T3.1): the
 * residual form M(t) v' - F(t, v) and its iteration matrix against hand
 * values, with a constant and a time-varying mass, the jacobian callback
 * and the differences; aliasing, the last evaluation left alone, re-entry,
 * no allocation. Also results that overflow from finite inputs, here and
 * in cdyn_dae_hidden_constraints. */
#include <cdyn.h>

#include "alloc_count.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <string.h>

/* n = 3: M = [2 1 0; 1 1 0; 0 0 0] (rank 2), F = (-v0 v1 + t, sin v1 - v2,
 * v0 - v2^3 - 3 t). dF/dv = [-v1 -v0 0; 0 cos v1 -1; 1 0 -3 v2^2]. */
typedef struct {
    int calls, reenter;
    cdyn_dae *dae;
    cdyn_status inner;
} model;

static int force(double t, const double *v, double *F, void *user)
{
    model *m = user;
    m->calls++;
    if (m->reenter) {
        double r[3];
        m->inner = cdyn_dae_residual(m->dae, t, v, v, r);
    }
    F[0] = -v[0] * v[1] + t;
    F[1] = sin(v[1]) - v[2];
    F[2] = v[0] - v[2] * v[2] * v[2] - 3.0 * t;
    return 0;
}

static int jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0] = -v[1]; J[1] = 0.0;          J[2] = 1.0;
    J[ld] = -v[0]; J[ld + 1] = cos(v[1]); J[ld + 2] = 0.0;
    J[2 * ld] = 0.0; J[2 * ld + 1] = -1.0; J[2 * ld + 2] = -3.0 * v[2] * v[2];
    return 0;
}

static const double M0[9] = {2, 1, 0, 1, 1, 0, 0, 0, 0};

/* The hand residual and iteration matrix at (t, v, vdot), mass M. */
static void hand_residual(const double *M, double t, const double *v, const double *vd,
                          double *r)
{
    double F[3] = {-v[0] * v[1] + t, sin(v[1]) - v[2], v[0] - v[2] * v[2] * v[2] - 3.0 * t};
    for (int i = 0; i < 3; ++i) {
        r[i] = -F[i];
        for (int j = 0; j < 3; ++j) r[i] += M[i + 3 * j] * vd[j];
    }
}

static void hand_iteration_matrix(const double *M, double cj, const double *v, double *J, int ld)
{
    double dF[9];
    jacobian(0.0, v, dF, 3, NULL);
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) J[i + ld * j] = cj * M[i + 3 * j] - dF[i + 3 * j];
}

static cdyn_dae *make(model *m, int with_jacobian)
{
    cdyn_dae *dae = cdyn_dae_create(3, NULL);
    ck_assert_ptr_nonnull(dae);
    m->dae = dae;
    ck_assert_int_eq(cdyn_dae_size(dae), 3);
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M0, 3), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, force, with_jacobian ? jacobian : NULL, NULL, m),
                     CDYN_OK);
    return dae;
}

/* Asserts: r = M v' - F to 1e-15 relative at two points, also with r
 * aliasing vdot and v; the iteration matrix c_j M - dF/dv exactly (the
 * callback) and to 1e-6 (differences); padding outside ldj untouched; the
 * residual of a second constant M with other zeros, and of M0 again. */
START_TEST(residual_and_iteration_matrix_match_the_hand_values)
{
    for (int with_jac = 0; with_jac < 2; ++with_jac) {
        model m = {0};
        cdyn_dae *dae = make(&m, with_jac);
        const double pts[2][7] = {{0.3, 1.5, -0.4, 0.25, 2.0, -1.0, 0.5},
                                  {2.0, -0.2, 0.9, 3.0, 1e-3, 4.0, -2.5}};
        for (int k = 0; k < 2; ++k) {
            double t = pts[k][0], v[3], vd[3], r[3], want[3];
            memcpy(v, pts[k] + 1, sizeof v);
            memcpy(vd, pts[k] + 4, sizeof vd);
            hand_residual(M0, t, v, vd, want);
            ck_assert_int_eq(cdyn_dae_residual(dae, t, v, vd, r), CDYN_OK);
            for (int i = 0; i < 3; ++i)
                ck_assert_double_le(fabs(r[i] - want[i]), 1e-15 * (1.0 + fabs(want[i])));
            double alias[3];
            memcpy(alias, vd, sizeof alias);
            ck_assert_int_eq(cdyn_dae_residual(dae, t, v, alias, alias), CDYN_OK);
            ck_assert(memcmp(alias, r, sizeof r) == 0);
            memcpy(alias, v, sizeof alias);
            ck_assert_int_eq(cdyn_dae_residual(dae, t, alias, vd, alias), CDYN_OK);
            ck_assert(memcmp(alias, r, sizeof r) == 0);

            const int ld = 5;
            double J[15], H[15];
            for (int i = 0; i < 15; ++i) J[i] = H[i] = -77.0;
            const double cj = 37.5;
            hand_iteration_matrix(M0, cj, v, H, ld);
            ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, t, cj, v, J, ld), CDYN_OK);
            for (int j = 0; j < 3; ++j) {
                for (int i = 0; i < 3; ++i) {
                    double e = fabs(J[i + ld * j] - H[i + ld * j]);
                    ck_assert_double_le(e, with_jac ? 0.0 : 1e-6 * (1.0 + fabs(H[i + ld * j])));
                }
                ck_assert(J[3 + ld * j] == -77.0 && J[4 + ld * j] == -77.0);
            }
        }
        /* another constant M: the residual reads its entries (the pattern
         * of M0's zeros is not kept), then M0's again */
        static const double M1[9] = {0, 0, 4, 0, 3, 0, 4, 0, -0.5};
        const double *masses[2] = {M1, M0};
        for (int k = 0; k < 2; ++k) {
            double v[3] = {0.7, -1.1, 0.2}, vd[3] = {-2.0, 0.5, 3.5}, r[3], want[3];
            ck_assert_int_eq(cdyn_dae_set_mass(dae, masses[k], 3), CDYN_OK);
            hand_residual(masses[k], 0.4, v, vd, want);
            ck_assert_int_eq(cdyn_dae_residual(dae, 0.4, v, vd, r), CDYN_OK);
            for (int i = 0; i < 3; ++i)
                ck_assert_double_le(fabs(r[i] - want[i]), 1e-15 * (1.0 + fabs(want[i])));
        }
        cdyn_dae_free(dae);
    }
}
END_TEST

/* A rank-1 M(t) = u u^T, u = (cos t, sin t), plus a zero third row and
 * column; the same F. Asserts r = M(t) v' - F at two times (the callback's
 * M at that t, not the M of set-up) and c_j M(t) - dF/dv. */
static int rotating_mass(double t, double *M, int ldm, void *user)
{
    (void)user;
    double u[3] = {cos(t), sin(t), 0.0};
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) M[i + ldm * j] = u[i] * u[j];
    M[0] += 1.0; /* rank 2: e0 e0^T + u u^T */
    return 0;
}

START_TEST(residual_uses_the_mass_callback_at_the_given_time)
{
    model m = {0};
    cdyn_dae *dae = cdyn_dae_create(3, NULL);
    ck_assert_ptr_nonnull(dae);
    ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, rotating_mass, NULL, 0.3), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, force, jacobian, NULL, &m), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rank(dae), 2);
    const double times[2] = {0.3, 1.1};
    for (int k = 0; k < 2; ++k) {
        double t = times[k], Mt[9], v[3] = {0.7, -1.2, 0.4}, vd[3] = {1.0, 2.0, -3.0};
        double r[3], want[3], J[9], H[9];
        rotating_mass(t, Mt, 3, NULL);
        hand_residual(Mt, t, v, vd, want);
        ck_assert_int_eq(cdyn_dae_residual(dae, t, v, vd, r), CDYN_OK);
        for (int i = 0; i < 3; ++i)
            ck_assert_double_le(fabs(r[i] - want[i]), 1e-15 * (1.0 + fabs(want[i])));
        hand_iteration_matrix(Mt, 2.5, v, H, 3);
        ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, t, 2.5, v, J, 3), CDYN_OK);
        for (int i = 0; i < 9; ++i) ck_assert_double_le(fabs(J[i] - H[i]), 1e-15 * (1.0 + fabs(H[i])));
    }
    cdyn_dae_free(dae);
}
END_TEST

/* Asserts: after a split and an rhs, residual calls leave
 * cdyn_dae_last_state() bit for bit, and the next rhs (which may reuse
 * the last evaluation's factors) equals the rhs of a twin that never saw
 * a residual call; neither call allocates. */
START_TEST(residual_calls_leave_the_last_evaluation_alone)
{
    model m = {0}, mt = {0};
    cdyn_dae *dae = make(&m, 1), *twin = make(&mt, 1);
    const double v0[3] = {0.5, 0.2, 0.1};
    double v[2][3];
    for (int k = 0; k < 2; ++k) {
        cdyn_dae *d = k ? twin : dae;
        ck_assert_int_eq(cdyn_dae_split(d, 0.0, v0), CDYN_OK);
        memcpy(v[k], v0, sizeof v0);
        ck_assert_int_eq(cdyn_dae_consistent(d, 0.0, v[k]), CDYN_OK);
    }
    ck_assert(memcmp(v[0], v[1], sizeof v[0]) == 0);
    int ny = cdyn_dae_ode_size(dae);
    ck_assert_int_eq(ny, cdyn_dae_ode_size(twin));
    int integ[3];
    ck_assert_int_eq(cdyn_dae_split_states(dae, integ, NULL), ny);
    double y[3], ydot[3], ydot_twin[3], vl[3], vdl[3], vl2[3], vdl2[3];
    for (int j = 0; j < ny; ++j) y[j] = v[0][integ[j]]; /* the consistent v */
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.1, y, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rhs(twin, 0.1, y, ydot_twin), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_last_state(dae, vl, vdl), CDYN_OK);
    double r[3], J[9], vp[3] = {3.0, -2.0, 1.0};
    alloc_count_start();
    cdyn_status s1 = cdyn_dae_residual(dae, 0.7, vp, vp, r);
    cdyn_status s2 = cdyn_dae_residual_jacobian(dae, 0.7, 4.0, vp, J, 3);
    long allocations = alloc_count_stop();
    ck_assert_int_eq(allocations, 0);
    ck_assert_int_eq(s1, CDYN_OK);
    ck_assert_int_eq(s2, CDYN_OK);
    ck_assert_int_eq(cdyn_dae_last_state(dae, vl2, vdl2), CDYN_OK);
    ck_assert(memcmp(vl, vl2, sizeof vl) == 0 && memcmp(vdl, vdl2, sizeof vdl) == 0);
    ck_assert_int_eq(cdyn_dae_rhs(dae, 0.2, y, ydot), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_rhs(twin, 0.2, y, ydot_twin), CDYN_OK);
    ck_assert(memcmp(ydot, ydot_twin, sizeof(double) * (size_t)ny) == 0);
    cdyn_dae_free(dae);
    cdyn_dae_free(twin);
}
END_TEST

/* Asserts: NULL pointers, no mass, no model, ldj < n, non-finite t, v,
 * vdot and c_j, and results that overflow, are refused with their status
 * and a message, r and J untouched;
 * a residual call from the force callback is refused (CDYN_ERR_BUSY) and
 * the outer call still succeeds. */
START_TEST(bad_input_and_reentry_are_refused)
{
    model m = {0};
    double v[3] = {1, 2, 3}, r[3] = {9, 9, 9}, J[9];
    ck_assert_int_eq(cdyn_dae_residual(NULL, 0.0, v, v, r), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_residual_jacobian(NULL, 0.0, 1.0, v, J, 3), CDYN_ERR_ARG);
    cdyn_dae *dae = cdyn_dae_create(3, NULL);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, v, r), CDYN_ERR_ARG); /* no mass */
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "set_mass"));
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M0, 3), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, v, r), CDYN_ERR_ARG); /* no model */
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "set_model"));
    cdyn_dae_free(dae);

    dae = make(&m, 1);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, NULL, v, r), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, NULL, r), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, v, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_residual(dae, NAN, v, v, r), CDYN_ERR_NONFINITE);
    double bad[3] = {1, INFINITY, 3};
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, bad, v, r), CDYN_ERR_NONFINITE);
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, bad, r), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "vdot[1]"));
    ck_assert(r[0] == 9 && r[1] == 9 && r[2] == 9);
    ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, 0.0, 1.0, v, NULL, 3), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, 0.0, 1.0, v, J, 2), CDYN_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "ldj"));
    ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, 0.0, NAN, v, J, 3), CDYN_ERR_NONFINITE);
    ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, 0.0, 1.0, bad, J, 3), CDYN_ERR_NONFINITE);
    /* finite inputs whose M v' or c_j M overflows: refused, outputs untouched */
    const double huge[3] = {1e308, 1e308, 0.0};
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, huge, r), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "overflows"));
    ck_assert(r[0] == 9 && r[1] == 9 && r[2] == 9);
    for (int i = 0; i < 9; ++i) J[i] = 7.0;
    ck_assert_int_eq(cdyn_dae_residual_jacobian(dae, 0.0, 1e308, v, J, 3), CDYN_ERR_NONFINITE);
    for (int i = 0; i < 9; ++i) ck_assert(J[i] == 7.0);

    m.reenter = 1;
    m.inner = CDYN_OK;
    ck_assert_int_eq(cdyn_dae_residual(dae, 0.0, v, v, r), CDYN_OK);
    ck_assert_int_eq(m.inner, CDYN_ERR_BUSY);
    double want[3];
    hand_residual(M0, 0.0, v, v, want);
    for (int i = 0; i < 3; ++i) ck_assert_double_le(fabs(r[i] - want[i]), 1e-15 * (1 + fabs(want[i])));
    cdyn_dae_free(dae);
}
END_TEST

/* M = [1 1; 1 1] (beta = (1, -1)/sqrt 2 up to sign) and F = (1.7e308,
 * -1.7e308): beta^T F is 2.4e308, beyond double. Asserts: the hidden
 * constraint is refused with CDYN_ERR_NONFINITE and G0 untouched, never
 * CDYN_OK with an Inf. */
static int opposed_force(double t, const double *v, double *F, void *user)
{
    (void)t, (void)v, (void)user;
    F[0] = 1.7e308;
    F[1] = -1.7e308;
    return 0;
}

START_TEST(hidden_constraint_that_overflows_is_refused)
{
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    const double M[4] = {1, 1, 1, 1};
    double v[2] = {1.0, 2.0}, G0[1] = {7.0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, opposed_force, NULL, NULL, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_hidden_constraints(dae, 0.0, v, G0), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_dae_last_error(dae), "overflows"));
    ck_assert(G0[0] == 7.0);
    cdyn_dae_free(dae);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dae_residual");
    TCase *tc = tcase_create("residual form");
    tcase_add_test(tc, residual_and_iteration_matrix_match_the_hand_values);
    tcase_add_test(tc, residual_uses_the_mass_callback_at_the_given_time);
    tcase_add_test(tc, residual_calls_leave_the_last_evaluation_alone);
    tcase_add_test(tc, bad_input_and_reentry_are_refused);
    tcase_add_test(tc, hidden_constraint_that_overflows_is_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
