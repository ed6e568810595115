/* Check suite "sundials": the CVODE adapter (include/cdyn/sundials.h) and
 * a right-hand side that fails with CDYN_ERR_SINGULAR.
 *
 * A rank-deficient Phi_q is a property of the state the integrator has
 * reached: a smaller step only approaches it. If the adapter reported it
 * as recoverable (a positive flag), CVODE would shrink the step again and
 * again and end with CV_TOO_MUCH_WORK or a repeated-failure flag, the
 * diagnosis lost; the adapter must stop CVODE (a negative flag) and leave
 * the rank-loss message in the cdyn_mbs.
 *
 * The mechanism: a point mass m = 2 kg, q = (x, y), gravity along -y, with
 *   Phi1 = x - 0.3 sin(2t)              (x prescribed)
 *   Phi2 = H(t) (y - 1),  H = 1 for t < 1/2, 0 from t = 1/2 on
 * (a clamp holding y = 1 that is released at t = 1/2 while its row stays
 * in the model). Phi_q = [1 0; 0 H]: full rank before t = 1/2, exactly
 * rank 1 from t = 1/2 on, with row 1 the dependent one. Phi_t = (-0.6
 * cos 2t, 0) and xi = (-1.2 sin 2t, 0), so before t = 1/2 the exact motion
 * is x = 0.3 sin 2t, y = 1 (zero degrees of freedom). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cdyn/mbs.h>
#include <cdyn/sundials.h>

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#if SUNDIALS_VERSION_MAJOR >= 7
#define SUN_NO_COMM SUN_COMM_NULL
#else
#define SUN_NO_COMM NULL
#endif

static const double MASS = 2.0, G = 9.81, T_RELEASE = 0.5;

static int clamp_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t;
    (void)q;
    (void)user;
    M[0] = MASS;
    M[1] = 0.0;
    M[ld] = 0.0;
    M[1 + ld] = MASS;
    return 0;
}

static int clamp_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    (void)t;
    (void)q;
    (void)qd;
    (void)user;
    Q[0] = 0.0;
    Q[1] = -MASS * G;
    return 0;
}

static double held(double t) { return t < T_RELEASE ? 1.0 : 0.0; }

static int clamp_phi(double t, const double *q, double *Phi, void *user)
{
    (void)user;
    Phi[0] = q[0] - 0.3 * sin(2.0 * t);
    Phi[1] = held(t) * (q[1] - 1.0);
    return 0;
}

static int clamp_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)q;
    (void)user;
    J[0] = 1.0;
    J[1] = 0.0;
    J[ld] = 0.0;
    J[1 + ld] = held(t);
    return 0;
}

static int clamp_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)q;
    (void)user;
    Phi_t[0] = -0.6 * cos(2.0 * t);
    Phi_t[1] = 0.0;
    return 0;
}

static int clamp_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    (void)q;
    (void)qd;
    (void)user;
    xi[0] = -1.2 * sin(2.0 * t);
    xi[1] = 0.0;
    return 0;
}

static cdyn_mbs *clamp_model(void)
{
    cdyn_mbs *mbs = cdyn_mbs_create(2, 2, NULL);
    ck_assert_ptr_nonnull(mbs);
    ck_assert_int_eq(
        cdyn_mbs_set_model(mbs, clamp_mass, clamp_force, clamp_phi, clamp_jacobian, NULL),
        CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, clamp_phi_t, clamp_xi), CDYN_OK);
    return mbs;
}

/* The rank-loss facts of the clamp after the release: the mbs message
 * reports the rank loss; the constraint object has rank 1, dependent row 1,
 * and its message names the row. (The mbs message is the constraint's with
 * a prefix "cdyn_mbs_rhs at t = ...: " and is cut at 255 characters, which
 * can drop the row number, so the row is checked on the constraint.) */
static void check_rank_loss(cdyn_mbs *mbs)
{
    const char *msg = cdyn_mbs_last_error(mbs);
    ck_assert_msg(strstr(msg, "rank deficient") != NULL, "cdyn_mbs_last_error: \"%s\"", msg);
    cdyn_constraint *c = cdyn_mbs_constraint(mbs);
    int rows[2] = {-1, -1};
    ck_assert_int_eq(cdyn_constraint_rank(c), 1);
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, rows), 1);
    ck_assert_int_eq(rows[0], 1);
    msg = cdyn_constraint_last_error(c);
    ck_assert_msg(strstr(msg, "rank deficient") != NULL && strstr(msg, "row 1") != NULL,
                  "cdyn_constraint_last_error: \"%s\"", msg);
}

/* Asserts: at t = 0.7 cdyn_mbs_rhs returns CDYN_ERR_SINGULAR, and the
 * CVRhsFn cdyn_cvode_mbs_rhs returns -CDYN_ERR_SINGULAR (negative: CVODE
 * stops; |flag| is the status), ydot untouched, the message in the mbs; at
 * t = 0.2 it returns 0 with q'' = (-1.2 sin 0.4, 0). */
START_TEST(cvode_rhs_flag_for_a_rank_deficient_phi_q_is_unrecoverable)
{
    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    cdyn_mbs *mbs = clamp_model();
    N_Vector y = N_VNew_Serial(4, ctx), yd = N_VNew_Serial(4, ctx);
    ck_assert(y && yd);
    double *py = N_VGetArrayPointer(y), *pyd = N_VGetArrayPointer(yd);
    double t = 0.7;
    py[0] = 0.3 * sin(2.0 * t);
    py[1] = 1.0;
    py[2] = 0.6 * cos(2.0 * t);
    py[3] = 0.0;
    double direct[4];
    ck_assert_int_eq(cdyn_mbs_rhs(mbs, t, py, direct), CDYN_ERR_SINGULAR);
    for (int i = 0; i < 4; ++i) pyd[i] = 12345.0;
    int flag = cdyn_cvode_mbs_rhs(t, y, yd, mbs);
    ck_assert_msg(flag == -(int)CDYN_ERR_SINGULAR,
                  "cdyn_cvode_mbs_rhs returned %d for CDYN_ERR_SINGULAR (expected %d)", flag,
                  -(int)CDYN_ERR_SINGULAR);
    for (int i = 0; i < 4; ++i) ck_assert(pyd[i] == 12345.0);
    check_rank_loss(mbs);
    t = 0.2;
    py[0] = 0.3 * sin(2.0 * t);
    py[2] = 0.6 * cos(2.0 * t);
    ck_assert_int_eq(cdyn_cvode_mbs_rhs(t, y, yd, mbs), 0);
    ck_assert_double_le(fabs(pyd[2] + 1.2 * sin(2.0 * t)), 1e-14);
    ck_assert_double_le(fabs(pyd[3]), 1e-14);
    N_VDestroy(y);
    N_VDestroy(yd);
    cdyn_mbs_free(mbs);
    SUNContext_Free(&ctx);
}
END_TEST

/* cdyn_cvode_mbs_rhs behind a counter of its calls and failures. The user
 * data stays the cdyn_mbs (cdyn_cvode_attach_mbs sets it for the
 * projection too), so the counter is file-scope. */
typedef struct {
    long calls, failing, last_flag;
} counted;

static counted COUNTER;

static int counted_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user_data)
{
    counted *c = &COUNTER;
    int flag = cdyn_cvode_mbs_rhs(t, y, ydot, user_data);
    ++c->calls;
    if (flag != 0) {
        ++c->failing;
        c->last_flag = flag;
    }
    return flag;
}

/* CVODE (BDF, dense Newton, rtol 1e-8, atol 1e-10, projection by
 * cdyn_cvode_attach_mbs) from t = 0, y = (0, 1, 0.6, 0) towards t = 1.
 * Asserts: CVode returns CV_RHSFUNC_FAIL (or CV_FIRST_RHSFUNC_ERR), not
 * CV_TOO_MUCH_WORK or a repeated-failure flag; exactly one rhs evaluation
 * failed (CVODE did not retry with smaller steps), with flag
 * -CDYN_ERR_SINGULAR; CVODE's last accepted time is before the release, with
 * x = 0.3 sin 2t and y = 1 to 1e-6; cdyn_mbs_last_error() and the rank
 * facts still describe the rank loss of row 1. */
START_TEST(cvode_stops_at_a_rank_deficient_phi_q)
{
    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    cdyn_mbs *mbs = clamp_model();
    counted *c = &COUNTER;
    memset(c, 0, sizeof *c);
    N_Vector y = N_VNew_Serial(4, ctx);
    ck_assert_ptr_nonnull(y);
    double *py = N_VGetArrayPointer(y);
    py[0] = 0.0;
    py[1] = 1.0;
    py[2] = 0.6;
    py[3] = 0.0;
    void *cv = CVodeCreate(CV_BDF, ctx);
    ck_assert_ptr_nonnull(cv);
    ck_assert_int_eq(CVodeInit(cv, counted_rhs, 0.0, y), CV_SUCCESS);
    ck_assert_int_eq(CVodeSStolerances(cv, 1e-8, 1e-10), CV_SUCCESS);
    SUNMatrix A = SUNDenseMatrix(4, 4, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    ck_assert(A && LS);
    ck_assert_int_eq(CVodeSetLinearSolver(cv, LS, A), CV_SUCCESS);
    ck_assert_int_eq(cdyn_cvode_attach_mbs(cv, mbs), CV_SUCCESS);
    ck_assert_int_eq(CVodeSetMaxNumSteps(cv, 100000), CV_SUCCESS);
    sunrealtype t = 0.0;
    int flag = CVode(cv, 1.0, y, &t, CV_NORMAL);
    ck_assert_msg(flag == CV_RHSFUNC_FAIL || flag == CV_FIRST_RHSFUNC_ERR,
                  "CVode returned %d at t = %.9g after %ld rhs calls, %ld failing (last flag "
                  "%ld); expected CV_RHSFUNC_FAIL (%d)",
                  flag, (double)t, c->calls, c->failing, c->last_flag, CV_RHSFUNC_FAIL);
    ck_assert_int_eq(c->failing, 1);
    ck_assert_int_eq(c->last_flag, -(int)CDYN_ERR_SINGULAR);
    ck_assert_double_lt(t, T_RELEASE);
    ck_assert_double_gt(t, 0.0);
    ck_assert_double_le(fabs(py[0] - 0.3 * sin(2.0 * t)), 1e-6);
    ck_assert_double_le(fabs(py[1] - 1.0), 1e-6);
    check_rank_loss(mbs);
    CVodeFree(&cv);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    cdyn_mbs_free(mbs);
    SUNContext_Free(&ctx);
}
END_TEST

static Suite *sundials_suite(void)
{
    Suite *s = suite_create("sundials");
    TCase *tc = tcase_create("cvode");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cvode_rhs_flag_for_a_rank_deficient_phi_q_is_unrecoverable);
    tcase_add_test(tc, cvode_stops_at_a_rank_deficient_phi_q);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sundials_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
