/* Check suite "sundials": the CVODE adapter (include/cdyn/sundials.h) and
 * a right-hand side that fails with CDYN_ERR_SINGULAR; the Jacobian
 * adapters for CVODE and IDA (a DAE's minimum-order ODE, its index-2 form,
 * a pendulum against its hand-derived Jacobian).
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

#include "models.h"
#include "testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cdyn/dae.h>
#include <cdyn/mbs.h>
#include <cdyn/sundials.h>

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <ida/ida.h>
#include <ida/ida_ls.h>
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


/* ------------------------------------------------------------------------ */
/* cdyn_cvode_dae_jacobian: CVODE BDF on a stiff junction in SI units.       */
/* States v = (Q1, Q2, Q3, p): three pipes (inertance L_i, loss R_i Q|Q|)    */
/* meet at a junction without storage, from which an orifice passes          */
/* Q4 = sgn(p - p4) sqrt(|p - p4| / k) to a tank:                            */
/*   L1 Q1' = ps(t) - p - R1 Q1|Q1|,  L2 Q2' = p - p2 - R2 Q2|Q2|,            */
/*   L3 Q3' = p - p3 - R3 Q3|Q3|,     0 = Q1 - Q2 - Q3 - Q4(p).               */
/* By hand the algebraic state is explicit: with s = Q1 - Q2 - Q3,           */
/* p = p4 + k s|s|, which gives the reference ODE in (Q1, Q2, Q3) (short     */
/* pipe 2: eigenvalues near -2 k |s| / L2 ~ -1e4 /s, stiff).                 */

typedef struct {
    double L[3], R[3], ps0, p2, p3, p4, k;
} junction;

static const junction JUNCTION = {.L = {2e8, 1e5, 1.2e9}, .R = {4e11, 9e11, 2e12},
                                  .ps0 = 3e5, .p2 = 1e5, .p3 = 1.2e5, .p4 = 1e5, .k = 2e12};

static double junction_source(double t) { return JUNCTION.ps0 * (1.0 + 0.1 * sin(3.0 * t)); }

static int junction_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    const junction *j = &JUNCTION;
    double p = v[3], dp = p - j->p4;
    F[0] = junction_source(t) - p - j->R[0] * v[0] * fabs(v[0]);
    F[1] = p - j->p2 - j->R[1] * v[1] * fabs(v[1]);
    F[2] = p - j->p3 - j->R[2] * v[2] * fabs(v[2]);
    F[3] = v[0] - v[1] - v[2] - copysign(sqrt(fabs(dp) / j->k), dp);
    return 0;
}

static int junction_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)user;
    const junction *j = &JUNCTION;
    for (int c = 0; c < 4; ++c)
        for (int r = 0; r < 4; ++r) J[r + (size_t)c * ld] = 0.0;
    for (int i = 0; i < 3; ++i) J[i + (size_t)i * ld] = -2.0 * j->R[i] * fabs(v[i]);
    J[0 + 3 * (size_t)ld] = -1.0;
    J[1 + 3 * (size_t)ld] = 1.0;
    J[2 + 3 * (size_t)ld] = 1.0;
    J[3] = 1.0;
    J[3 + (size_t)ld] = -1.0;
    J[3 + 2 * (size_t)ld] = -1.0;
    J[3 + 3 * (size_t)ld] = -0.5 / sqrt(j->k * fabs(v[3] - j->p4));
    return 0;
}

/* The hand-reduced ODE (reference). */
static int junction_reduced(sunrealtype t, N_Vector y, N_Vector ydot, void *user)
{
    (void)user;
    const junction *j = &JUNCTION;
    const double *q = N_VGetArrayPointer(y);
    double *f = N_VGetArrayPointer(ydot);
    double s = q[0] - q[1] - q[2], p = j->p4 + j->k * s * fabs(s);
    f[0] = (junction_source(t) - p - j->R[0] * q[0] * fabs(q[0])) / j->L[0];
    f[1] = (p - j->p2 - j->R[1] * q[1] * fabs(q[1])) / j->L[1];
    f[2] = (p - j->p3 - j->R[2] * q[2] * fabs(q[2])) / j->L[2];
    return 0;
}

typedef struct {
    double y[3];
    long steps, rhs, dq_rhs, jacobians;
} cvode_run;

/* Integrate to t = 1 with CVODE BDF, dense linear solver. dae NULL: the
 * hand-reduced ODE; else cdyn's minimum-order ODE, with cdyn's Jacobian
 * when `with_jacobian`, CVODE's difference quotients otherwise. */
static cvode_run junction_run(SUNContext ctx, cdyn_dae *dae, int with_jacobian, double rtol)
{
    cvode_run out = {{0}, 0, 0, 0, 0};
    N_Vector y = N_VNew_Serial(3, ctx);
    double *py = N_VGetArrayPointer(y);
    py[0] = 3e-4;
    py[1] = 2.2e-4;
    py[2] = 0.5e-4;
    void *cv = CVodeCreate(CV_BDF, ctx);
    ck_assert_int_eq(CVodeInit(cv, dae ? cdyn_cvode_dae_rhs : junction_reduced, 0.0, y),
                     CV_SUCCESS);
    N_Vector atol = N_VNew_Serial(3, ctx);
    N_VConst(1e-9 * rtol / 1e-8, atol); /* flows ~1e-4 m^3/s */
    ck_assert_int_eq(CVodeSVtolerances(cv, rtol, atol), CV_SUCCESS);
    SUNMatrix A = SUNDenseMatrix(3, 3, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    ck_assert_int_eq(CVodeSetLinearSolver(cv, LS, A), CV_SUCCESS);
    if (dae && with_jacobian)
        ck_assert_int_eq(cdyn_cvode_attach_dae(cv, dae), CV_SUCCESS);
    else if (dae)
        ck_assert_int_eq(CVodeSetUserData(cv, dae), CV_SUCCESS);
    ck_assert_int_eq(CVodeSetMaxNumSteps(cv, 100000), CV_SUCCESS);
    sunrealtype t = 0.0;
    ck_assert_int_eq(CVode(cv, 1.0, y, &t, CV_NORMAL), CV_SUCCESS);
    memcpy(out.y, py, sizeof out.y);
    CVodeGetNumSteps(cv, &out.steps);
    CVodeGetNumRhsEvals(cv, &out.rhs);
    CVodeGetNumLinRhsEvals(cv, &out.dq_rhs);
    CVodeGetNumJacEvals(cv, &out.jacobians);
    CVodeFree(&cv);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(atol);
    N_VDestroy(y);
    return out;
}

static cdyn_dae *junction_dae(void)
{
    cdyn_dae *dae = cdyn_dae_create(4, NULL);
    double M[16] = {0};
    for (int i = 0; i < 3; ++i) M[i + 4 * i] = JUNCTION.L[i];
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 4), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, junction_force, junction_jacobian, NULL, NULL),
                     CDYN_OK);
    double v[4] = {3e-4, 2.2e-4, 0.5e-4, 1.1e5};
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_consistent(dae, 0.0, v), CDYN_OK);
    return dae;
}

/* With cdyn's Jacobian CVODE spends no right-hand side on difference
 * quotients, and the result agrees with the hand-reduced ODE as closely as
 * CVODE's difference-quotient run does. */
START_TEST(cvode_with_the_dae_jacobian)
{
    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    cvode_run reference = junction_run(ctx, NULL, 0, 1e-12);
    cdyn_dae *with = junction_dae(), *without = junction_dae();
    cvode_run a = junction_run(ctx, with, 1, 1e-8);
    cvode_run b = junction_run(ctx, without, 0, 1e-8);
    ck_assert_int_gt(a.jacobians, 0);
    ck_assert_int_eq(a.dq_rhs, 0);
    ck_assert_int_ge(b.dq_rhs, 3 * b.jacobians);
    cdyn_dae_counters c;
    ck_assert_int_eq(cdyn_dae_get_counters(with, &c), CDYN_OK);
    ck_assert_int_eq(c.rhs_jacobians, a.jacobians);
    double err_a = 0.0, err_b = 0.0;
    for (int i = 0; i < 3; ++i) {
        err_a = fmax(err_a, fabs(a.y[i] - reference.y[i]));
        err_b = fmax(err_b, fabs(b.y[i] - reference.y[i]));
    }
    /* flows ~1e-4 m^3/s, rtol 1e-8: a global error of a few 1e-6 relative
     * (measured 5.6e-10 and 3.1e-10 m^3/s) */
    ck_assert_msg(err_a <= 2e-9 && err_b <= 2e-9, "errors %.3e (Jacobian) %.3e (DQ)", err_a,
                  err_b);
    /* wrong matrix shape and missing user data are refused, not written */
    SUNMatrix wrong = SUNDenseMatrix(2, 2, ctx);
    N_Vector y = N_VNew_Serial(3, ctx);
    N_VConst(1e-4, y);
    ck_assert_int_eq(cdyn_cvode_dae_jacobian(0.0, y, y, wrong, with, y, y, y),
                     -(int)CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_cvode_dae_jacobian(0.0, y, y, wrong, NULL, y, y, y),
                     -(int)CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_cvode_attach_dae(NULL, with), CV_MEM_NULL);
    SUNMatDestroy(wrong);
    N_VDestroy(y);
    cdyn_dae_free(with);
    cdyn_dae_free(without);
    SUNContext_Free(&ctx);
}
END_TEST

/* The index-2 form through CVODE: v = (x1, x2, z), M = diag(1, 1, 0),
 *   x1' = -x1 + z,  x2' = x1 - x2,  0 = x1 - sin t
 * (z is absent from the constraint: its multiplier). The minimum-order ODE
 * integrates x2 alone; x1 = sin t, so x2 = (sin t - cos t) / 2 +
 * (x2(0) + 1/2) e^-t. CVODE with the adapter's Jacobian (central
 * differences in this form) against that; the IDA adapter refuses the
 * form with its reason. */
static int index2_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    F[0] = -v[0] + v[2];
    F[1] = v[0] - v[1];
    F[2] = v[0] - sin(t);
    return 0;
}

START_TEST(cvode_integrates_the_index_two_form_and_ida_refuses_it)
{
    cdyn_dae *dae = cdyn_dae_create(3, NULL);
    double M[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0}, v[3] = {0.0, 0.3, 1.0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 3), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, index2_force, NULL, NULL, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_consistent(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_ode_size(dae), 1);

    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    N_Vector y = N_VNew_Serial(1, ctx);
    SUNMatrix A = SUNDenseMatrix(1, 1, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    void *mem = CVodeCreate(CV_BDF, ctx);
    N_VGetArrayPointer(y)[0] = 0.3;
    ck_assert_int_eq(CVodeInit(mem, cdyn_cvode_dae_rhs, 0.0, y), CV_SUCCESS);
    ck_assert_int_eq(CVodeSStolerances(mem, 1e-10, 1e-12), CV_SUCCESS);
    ck_assert_int_eq(CVodeSetLinearSolver(mem, LS, A), CV_SUCCESS);
    ck_assert_int_eq(cdyn_cvode_attach_dae(mem, dae), CV_SUCCESS);
    double t = 0.0;
    ck_assert_int_ge(CVode(mem, 2.0, y, &t, CV_NORMAL), 0);
    double exact = (sin(t) - cos(t)) / 2.0 + 0.8 * exp(-t);
    /* rtol 1e-10 on a decaying solution: global error ~1e-9 */
    ck_assert_double_le(fabs(N_VGetArrayPointer(y)[0] - exact), 1e-8);
    cdyn_dae_counters c;
    ck_assert_int_eq(cdyn_dae_get_counters(dae, &c), CDYN_OK);
    ck_assert_int_gt(c.rhs_jacobians, 0);
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);

    cdyn_status st;
    cdyn_ida_dae *ida = cdyn_ida_dae_create(dae, &st);
    ck_assert_ptr_nonnull(ida);
    N_Vector id = N_VNew_Serial(3, ctx);
    ck_assert_int_eq(cdyn_ida_dae_id(ida, id), CDYN_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(cdyn_ida_dae_last_error(ida), "index-2 form"));
    ck_assert_int_eq(cdyn_ida_dae_consistent(ida, 0.0, id, id), CDYN_ERR_ARG);
    N_VDestroy(id);
    cdyn_ida_dae_free(ida);
    N_VDestroy(y);
    SUNContext_Free(&ctx);
    cdyn_dae_free(dae);
}
END_TEST

/* ---- the mbs Jacobian adapters ------------------------------------------ */
/* A Cartesian pendulum, m = 1.5 kg, L = 1.2 m, q = (x, y), Phi = |q|^2 - L^2,
 * in the default formulation (KKT, no stabilization). By hand:
 *   q'' = g - c q,  c = (q.g + |q'|^2) / |q|^2,  g = (0, -9.81),
 *   dq''/dq = -c I - q (g - 2 c q)^T / |q|^2,  dq''/dq' = -2 q q'^T / |q|^2. */
static const double PL = 1.2;
static const tm_pendulum PEND = {1.5, 1.2, 9.81}; /* tests/models.h: m, PL, G */


static cdyn_mbs *pendulum_model(void)
{
    cdyn_mbs *mbs = cdyn_mbs_create(2, 1, NULL);
    ck_assert_ptr_nonnull(mbs);
    ck_assert_int_eq(tm_pendulum_set(mbs, &PEND, 1), CDYN_OK);
    return mbs;
}

/* the hand Jacobian (4 x 4, ld 4) of [q'; q''] at y */
static void pendulum_jacobian(const double *y, double *J)
{
    const double *q = y, *qd = y + 2, g[2] = {0.0, -G};
    double qq = q[0] * q[0] + q[1] * q[1];
    double c = (q[0] * g[0] + q[1] * g[1] + qd[0] * qd[0] + qd[1] * qd[1]) / qq;
    memset(J, 0, sizeof(double) * 16);
    J[0 + 4 * 2] = J[1 + 4 * 3] = 1.0;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            J[2 + i + 4 * j] = -(i == j ? c : 0.0) - q[i] * (g[j] - 2.0 * c * q[j]) / qq;
            J[2 + i + 4 * (2 + j)] = -2.0 * q[i] * qd[j] / qq;
        }
}


/* The IDA adapter takes n, M and the callbacks from the cdyn_dae. Index 1,
 * M = diag(1, 0), F = (-v0 + v1, sin t - v1): v1 = sin t and
 * v0 = (sin t - cos t)/2 + 0.8 e^-t from v0(0) = 0.3. */
static int ida1_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    F[0] = -v[0] + v[1];
    F[1] = sin(t) - v[1];
    return 0;
}

static int ida1_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t, (void)v, (void)user;
    J[0] = -1.0; J[1] = 0.0;
    J[ld] = 1.0; J[ld + 1] = -1.0;
    return 0;
}

/* Asserts, with the jacobian callback and with cdyn's differences: the
 * adapter's size is the DAE's; the id vector marks v0; consistent values
 * at t = 0 give v1 = 0 and v0' = -0.3; IDA (rtol 1e-10) ends within 1e-7
 * of the analytic v0 and v1 at t = 2; the residual adapter evaluates the
 * DAE's force (its counter grows). NULL dae and a DAE without mass are
 * refused. */
START_TEST(ida_adapter_takes_the_model_from_the_dae)
{
    cdyn_status st;
    ck_assert_ptr_null(cdyn_ida_dae_create(NULL, &st));
    ck_assert_int_eq(st, CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_ida_dae_size(NULL), -1);
    for (int exact = 0; exact < 2; ++exact) {
        SUNContext ctx = NULL;
        ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
        cdyn_dae *dae = cdyn_dae_create(2, NULL);
        ck_assert_ptr_null(cdyn_ida_dae_create(dae, &st)); /* no mass yet */
        ck_assert_int_eq(st, CDYN_ERR_ARG);
        const double M[4] = {1.0, 0.0, 0.0, 0.0};
        double v0[2] = {0.3, 0.5};
        ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
        ck_assert_int_eq(cdyn_dae_set_model(dae, ida1_force, exact ? ida1_jacobian : NULL, NULL,
                                            NULL), CDYN_OK);
        ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v0), CDYN_OK);
        cdyn_ida_dae *ida = cdyn_ida_dae_create(dae, &st);
        ck_assert_ptr_nonnull(ida);
        ck_assert_int_eq(cdyn_ida_dae_size(ida), 2);
        N_Vector v = N_VNew_Serial(2, ctx), vdot = N_VNew_Serial(2, ctx);
        double *vd = N_VGetArrayPointer(v), *pd = N_VGetArrayPointer(vdot);
        vd[0] = 0.3;
        vd[1] = 0.5; /* a guess */
        ck_assert_int_eq(cdyn_ida_dae_consistent(ida, 0.0, v, vdot), CDYN_OK);
        ck_assert_double_le(fabs(vd[1]), 1e-12);
        ck_assert_double_le(fabs(pd[0] + 0.3), 1e-12);
        void *mem = IDACreate(ctx);
        SUNMatrix A = SUNDenseMatrix(2, 2, ctx);
        SUNLinearSolver LS = SUNLinSol_Dense(v, A, ctx);
        ck_assert_int_eq(IDAInit(mem, cdyn_ida_dae_residual, 0.0, v, vdot), IDA_SUCCESS);
        ck_assert_int_eq(IDASStolerances(mem, 1e-10, 1e-12), IDA_SUCCESS);
        ck_assert_int_eq(IDASetLinearSolver(mem, LS, A), IDA_SUCCESS);
        ck_assert_int_eq(cdyn_ida_attach_dae(mem, ida, v), IDA_SUCCESS);
        cdyn_dae_counters before, after;
        ck_assert_int_eq(cdyn_dae_get_counters(dae, &before), CDYN_OK);
        double t = 0.0;
        ck_assert_int_ge(IDASolve(mem, 2.0, &t, v, vdot, IDA_NORMAL), 0);
        ck_assert_int_eq(cdyn_dae_get_counters(dae, &after), CDYN_OK);
        ck_assert_int_gt(after.force_evaluations, before.force_evaluations);
        double exact_v0 = (sin(t) - cos(t)) / 2.0 + 0.8 * exp(-t);
        ck_assert_msg(fabs(vd[0] - exact_v0) <= 1e-7 && fabs(vd[1] - sin(t)) <= 1e-7,
                      "t = %g: v = (%.12g, %.12g), exact (%.12g, %.12g)", t, vd[0], vd[1],
                      exact_v0, sin(t));
        IDAFree(&mem);
        SUNLinSolFree(LS);
        SUNMatDestroy(A);
        N_VDestroy(v);
        N_VDestroy(vdot);
        cdyn_ida_dae_free(ida);
        cdyn_dae_free(dae);
        SUNContext_Free(&ctx);
    }
}
END_TEST

/* A purely algebraic DAE (M = 0, r = 0), states in units u0, u1:
 *   0 = v0 / u0 - sin t,  0 = v1 / u1 - (v0 / u0)^2,
 * so v = (u0 sin t, u1 sin^2 t) and, by d/dt G0 = 0, the rates are
 * v' = (u0 cos t, 2 u1 sin t cos t). */
static int alg_force(double t, const double *v, double *F, void *user)
{
    const double *u = user;
    F[0] = v[0] / u[0] - sin(t);
    F[1] = v[1] / u[1] - (v[0] / u[0]) * (v[0] / u[0]);
    return 0;
}

static int alg_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t;
    const double *u = user;
    J[0] = 1.0 / u[0];
    J[1] = -2.0 * v[0] / (u[0] * u[0]);
    J[ld] = 0.0;
    J[ld + 1] = 1.0 / u[1];
    return 0;
}

static int alg_time(double t, const double *v, double *dFdt, void *user)
{
    (void)v, (void)user;
    dFdt[0] = -cos(t);
    dFdt[1] = 0.0;
    return 0;
}

/* sundials.h: cdyn_ida_dae_consistent's v' has "the algebraic rates satisfy
 * d/dt G0 = 0" — for M = 0 too, where it returned v' = 0 before (stop 46).
 * Asserts at t0 = 0.5, for units 1e-8..1e8 on each state, with the exact
 * derivative callbacks (1e-12 relative to the analytic rates) and with
 * cdyn's differences (1e-6): v and v' as above. */
START_TEST(ida_consistent_rates_of_a_purely_algebraic_dae)
{
    const double units[] = {1e-8, 1.0, 3.0, 1e8}, t0 = 0.5;
    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    N_Vector v = N_VNew_Serial(2, ctx), vdot = N_VNew_Serial(2, ctx);
    double *vd = N_VGetArrayPointer(v), *pd = N_VGetArrayPointer(vdot);
    for (int exact = 0; exact < 2; ++exact)
        for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
                double u[2] = {units[a], units[b]};
                const double M[4] = {0.0, 0.0, 0.0, 0.0};
                cdyn_dae *dae = cdyn_dae_create(2, NULL);
                ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 2), CDYN_OK);
                ck_assert_int_eq(cdyn_dae_set_model(dae, alg_force,
                                                    exact ? alg_jacobian : NULL,
                                                    exact ? alg_time : NULL, u),
                                 CDYN_OK);
                vd[0] = 0.1 * u[0];
                vd[1] = 0.1 * u[1];
                ck_assert_int_eq(cdyn_dae_split(dae, t0, vd), CDYN_OK);
                cdyn_ida_dae *ida = cdyn_ida_dae_create(dae, NULL);
                ck_assert_ptr_nonnull(ida);
                ck_assert_int_eq(cdyn_ida_dae_consistent(ida, t0, v, vdot), CDYN_OK);
                double want_v[2] = {u[0] * sin(t0), u[1] * sin(t0) * sin(t0)};
                double want_p[2] = {u[0] * cos(t0), 2.0 * u[1] * sin(t0) * cos(t0)};
                double tol = exact ? 1e-12 : 1e-6;
                for (int i = 0; i < 2; ++i)
                    ck_assert_msg(fabs(vd[i] - want_v[i]) <= 1e-12 * fabs(want_v[i]) &&
                                      fabs(pd[i] - want_p[i]) <= tol * fabs(want_p[i]),
                                  "units (%g, %g), exact %d: v[%d] = %.15g (want %.15g), "
                                  "v'[%d] = %.15g (want %.15g)",
                                  u[0], u[1], exact, i, vd[i], want_v[i], i, pd[i], want_p[i]);
                cdyn_ida_dae_free(ida);
                cdyn_dae_free(dae);
            }
    N_VDestroy(v);
    N_VDestroy(vdot);
    SUNContext_Free(&ctx);
}
END_TEST

/* CVODE (BDF, rtol 1e-10) over 2 s with the given Jacobian function (NULL:
 * CVODE's difference quotients); returns y at the end and the counts */
typedef struct {
    double y[4];
    long steps, rhs, jacobians, dq_rhs;
    int flag;
} pendulum_run;

static pendulum_run run_pendulum_cvode(SUNContext ctx, cdyn_mbs *mbs, CVLsJacFn jac)
{
    pendulum_run run = {{0}, 0, 0, 0, 0, 0};
    N_Vector y = N_VNew_Serial(4, ctx);
    SUNMatrix A = SUNDenseMatrix(4, 4, ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
    void *mem = CVodeCreate(CV_BDF, ctx);
    double th = 0.4, *p = N_VGetArrayPointer(y);
    p[0] = PL * sin(th);
    p[1] = -PL * cos(th);
    p[2] = p[3] = 0.0;
    ck_assert_int_eq(CVodeInit(mem, cdyn_cvode_mbs_rhs, 0.0, y), CV_SUCCESS);
    ck_assert_int_eq(CVodeSStolerances(mem, 1e-10, 1e-12), CV_SUCCESS);
    ck_assert_int_eq(CVodeSetLinearSolver(mem, LS, A), CV_SUCCESS);
    ck_assert_int_eq(cdyn_cvode_attach_mbs(mem, mbs), CV_SUCCESS);
    if (jac) ck_assert_int_eq(CVodeSetJacFn(mem, jac), CV_SUCCESS);
    ck_assert_int_eq(CVodeSetMaxNumSteps(mem, 100000), CV_SUCCESS);
    double t = 0.0;
    run.flag = CVode(mem, 2.0, y, &t, CV_NORMAL);
    memcpy(run.y, p, sizeof run.y);
    CVodeGetNumSteps(mem, &run.steps);
    CVodeGetNumRhsEvals(mem, &run.rhs);
    CVodeGetNumJacEvals(mem, &run.jacobians);
    CVodeGetNumLinRhsEvals(mem, &run.dq_rhs);
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    return run;
}

START_TEST(mbs_jacobian_adapters_give_the_hand_jacobian_and_drive_cvode_and_ida)
{
    SUNContext ctx = NULL;
    ck_assert_int_eq(SUNContext_Create(SUN_NO_COMM, &ctx), 0);
    cdyn_mbs *mbs = pendulum_model();
    N_Vector y = N_VNew_Serial(4, ctx);
    SUNMatrix A = SUNDenseMatrix(4, 4, ctx);
    double th = 0.4, om = 0.7, *p = N_VGetArrayPointer(y), hand[16];
    p[0] = PL * sin(th);
    p[1] = -PL * cos(th);
    p[2] = PL * om * cos(th);
    p[3] = PL * om * sin(th);
    pendulum_jacobian(p, hand);
    /* CVODE's: J = df/dy; IDA's: c_j I - df/dy */
    ck_assert_int_eq(cdyn_cvode_mbs_jacobian(0.0, y, y, A, mbs, y, y, y), 0);
    double *J = SUNDenseMatrix_Data(A), worst = 0.0;
    for (int i = 0; i < 16; ++i) worst = fmax(worst, fabs(J[i] - hand[i]));
    ck_assert_msg(worst <= 1e-7 * 10.0, "cvode mbs jacobian off by %.3e", worst);
    ck_assert_int_eq(cdyn_ida_mbs_jacobian(0.0, 3.0, y, y, y, A, mbs, y, y, y), 0);
    worst = 0.0;
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i)
            worst = fmax(worst, fabs(J[i + 4 * j] - ((i == j ? 3.0 : 0.0) - hand[i + 4 * j])));
    ck_assert_msg(worst <= 1e-7 * 10.0, "ida mbs jacobian off by %.3e", worst);
    /* refused: wrong shape, missing user data */
    SUNMatrix wrong = SUNDenseMatrix(2, 2, ctx);
    ck_assert_int_eq(cdyn_cvode_mbs_jacobian(0.0, y, y, wrong, mbs, y, y, y), -(int)CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_cvode_mbs_jacobian(0.0, y, y, A, NULL, y, y, y), -(int)CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_ida_mbs_jacobian(0.0, 1.0, y, y, y, wrong, mbs, y, y, y),
                     -(int)CDYN_ERR_ARG);
    SUNMatDestroy(wrong);

    /* CVODE with the installed Jacobian and with its own differences: the
     * same motion (both at rtol 1e-10; measured 4e-13 m apart, the same
     * steps: the iteration matrix only drives the corrector) */
    pendulum_run with = run_pendulum_cvode(ctx, mbs, cdyn_cvode_mbs_jacobian);
    pendulum_run dq = run_pendulum_cvode(ctx, mbs, NULL);
    ck_assert_int_ge(with.flag, 0);
    ck_assert_int_ge(dq.flag, 0);
    ck_assert_int_gt(with.jacobians, 0);
    double apart = 0.0;
    for (int i = 0; i < 2; ++i) apart = fmax(apart, fabs(with.y[i] - dq.y[i]));
    ck_assert_msg(apart <= 1e-7, "runs apart by %.3e m", apart);
    /* the constraint holds (projection) */
    ck_assert_double_le(fabs(with.y[0] * with.y[0] + with.y[1] * with.y[1] - PL * PL), 1e-9);
    printf("CVODE pendulum, rtol 1e-10: cdyn Jacobian %ld steps, %ld rhs, %ld Jacobians; "
           "difference quotients %ld steps, %ld + %ld rhs, %ld Jacobians; apart %.2e m\n",
           with.steps, with.rhs, with.jacobians, dq.steps, dq.rhs, dq.dq_rhs, dq.jacobians,
           apart);

    /* IDA on the residual y' - f(y) with the matching Jacobian (no
     * projection: the KKT drift over 2 s stays far below the check) */
    N_Vector yi = N_VNew_Serial(4, ctx), ypi = N_VNew_Serial(4, ctx);
    SUNMatrix B = SUNDenseMatrix(4, 4, ctx);
    SUNLinearSolver LSi = SUNLinSol_Dense(yi, B, ctx);
    void *ida = IDACreate(ctx);
    double *pi = N_VGetArrayPointer(yi);
    pi[0] = PL * sin(0.4);
    pi[1] = -PL * cos(0.4);
    pi[2] = pi[3] = 0.0;
    ck_assert_int_eq(cdyn_mbs_rhs(mbs, 0.0, pi, N_VGetArrayPointer(ypi)), CDYN_OK);
    ck_assert_int_eq(IDAInit(ida, cdyn_ida_mbs_residual, 0.0, yi, ypi), IDA_SUCCESS);
    ck_assert_int_eq(IDASStolerances(ida, 1e-10, 1e-12), IDA_SUCCESS);
    ck_assert_int_eq(IDASetUserData(ida, mbs), IDA_SUCCESS);
    ck_assert_int_eq(IDASetLinearSolver(ida, LSi, B), IDA_SUCCESS);
    ck_assert_int_eq(IDASetJacFn(ida, cdyn_ida_mbs_jacobian), IDA_SUCCESS);
    ck_assert_int_eq(IDASetMaxNumSteps(ida, 100000), IDA_SUCCESS);
    double ti = 0.0;
    ck_assert_int_ge(IDASolve(ida, 2.0, &ti, yi, ypi, IDA_NORMAL), 0);
    long ida_jac = 0;
    IDAGetNumJacEvals(ida, &ida_jac);
    ck_assert_int_gt(ida_jac, 0);
    double ida_apart = fmax(fabs(pi[0] - with.y[0]), fabs(pi[1] - with.y[1]));
    ck_assert_msg(ida_apart <= 1e-6, "IDA apart from CVODE by %.3e m", ida_apart);
    printf("IDA pendulum with cdyn_ida_mbs_jacobian: %ld Jacobians, apart from CVODE %.2e m\n",
           ida_jac, ida_apart);
    IDAFree(&ida);
    SUNLinSolFree(LSi);
    SUNMatDestroy(B);
    N_VDestroy(yi);
    N_VDestroy(ypi);
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
    tcase_add_test(tc, cvode_with_the_dae_jacobian);
    tcase_add_test(tc, cvode_integrates_the_index_two_form_and_ida_refuses_it);
    tcase_add_test(tc, mbs_jacobian_adapters_give_the_hand_jacobian_and_drive_cvode_and_ida);
    tcase_add_test(tc, ida_adapter_takes_the_model_from_the_dae);
    tcase_add_test(tc, ida_consistent_rates_of_a_purely_algebraic_dae);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(sundials_suite());
}
