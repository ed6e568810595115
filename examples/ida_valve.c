/*
 * ida_valve.c - the valve network of hydraulic_valve.c (THEORY T3, T6.3)
 * integrated by SUNDIALS IDA as the full DAE M v' - F(v, t) = 0 through the
 * cdyn_sundials adapter, and by CVODE on cdyn's minimum-order ODE, both
 * compared over the first valve cycle (1 s) with cdyn's own fixed-step run
 * (RK4, dt = 1 ms, on the minimum-order ODE, as hydraulic_valve.c).
 *
 *   supply tank (p_s) --pipe 1, Q1--> junction (p_J) --valve a, Qa--> return tank (0)
 *                                                  \--orifice b, Qb--> return tank (0)
 *
 * States v = (Q1, Qa, Qb, p_J) in SI units [m^3/s, Pa] (valve_network.h),
 * M = diag(I1, 0, 0, 0):
 *   I1 Q1' = p_s - R1 Q1 - p_J,  0 = s(t)^2 p_J - k_a Qa|Qa|,
 *        0 = p_J - k_b Qb|Qb|,   0 = Q1 - Qa - Qb,
 * valve opening s(t): open, closing ramp 0.3-0.4 s, closed to 0.6 s,
 * opening ramp 0.6-0.7 s, open (smoothstep ramps). Index 1 while the valve
 * is open; cdyn integrates Q1 and solves (Qa, Qb, p_J), with its default
 * settings (no Newton or rank tolerance set: its tests do not depend on the
 * units). SUNDIALS' tolerances are the integrator user's: rtol 1e-8 and,
 * per component (IDASVtolerances, CVodeSVtolerances), atol 1e-13 m^3/s for
 * the flows and 1e-5 Pa for the pressure (1e-10 L/s and 1e-10 bar). The
 * checks are in SI; everything is printed in L/s and bar.
 *
 * What the adapter provides to IDA: the residual (cdyn_ida_dae_residual),
 * the Jacobian c_j M - dF/dv from the model's dF/dv (cdyn_ida_dae_jacobian),
 * the id vector (1 for Q1, 0 for Qa, Qb, p_J: cdyn's split), used with
 * IDASetSuppressAlg, and consistent v, v' (cdyn_ida_dae_consistent) — all
 * set by cdyn_ida_attach_dae() after IDAInit.
 *
 * The closed valve. At s = 0 the valve row reads -k_a Qa|Qa| = 0: a double
 * root at Qa = 0 where its derivative 2 k_a |Qa| vanishes, so the DAE's
 * Jacobian (and IDA's iteration matrix) is singular there — the point
 * where cdyn's Newton takes the SVD outer-inverse path (THEORY T2.3). IDA
 * has no such path: with the exact Jacobian its corrector stops converging
 * at the closure (measured: no step past t = 0.4000 s, where the valve has
 * just closed, after 29 corrector failures). So IDA is run, and checked, over
 * the open phases only: [0, 0.3] s from rest, and [0.7, 1.0] s restarted
 * (IDAReInit) from cdyn's state after the reopening, made consistent by
 * cdyn_ida_dae_consistent() and confirmed by IDACalcIC (IDA_YA_YDP_INIT)
 * with cdyn's id vector. Two whole-cycle IDA attempts are reported, not
 * checked: the exact Jacobian (where it stops), and IDA's
 * difference-quotient Jacobian with the algebraic states in the error test,
 * which happens to get through (a finite-difference slope of Qa|Qa| is
 * never exactly zero) — a property of the perturbation, not a method to
 * rely on. CVODE on cdyn's minimum-order ODE (cdyn_cvode_dae_rhs) runs the
 * whole cycle: the algebraic solve, closure included, is cdyn's.
 *
 * IDA's outputs. IDA stops at every 10 ms sample (IDASetStopTime), so the
 * samples are its own steps: with the algebraic states out of the error
 * test (IDASetSuppressAlg) their interpolated values between steps are not
 * error-controlled, and the interpolant does not satisfy the nonlinear
 * orifice rows (a copy without the stop times, rtol 1e-8, interpolating
 * between steps: Qa and Qb off by up to 1.5e-6 L/s in opposite directions,
 * an orifice-row residual of 4.4e-5 bar, while the linear continuity row
 * holds to 1.2e-13 L/s; docs/integrators.md).
 *
 * Consistent values at rest (t = 0, v = 0) are a special case: the orifice
 * laws have zero slope at zero flow, so dG0/dv_a is singular there and the
 * hidden constraint's derivative does not fix the split of Q1' between Qa'
 * and Qb'; cdyn's outer inverse gives the minimum-norm split (36.1, 36.1)
 * L/s^2, the solution's limit is 72.2 (5/8, 3/8) = (45.1, 27.1) L/s^2 (the
 * area ratio). IDA corrects this in its first steps.
 *
 * Checks (exit status 1 if one fails), at the 10 ms samples, in SI (the
 * limits in parentheses in L/s and bar, as printed):
 *  - IDA (rtol 1e-8, atol 1e-13 m^3/s, 1e-5 Pa) on the open phases within
 *    FLOW_TOL = 5e-10 m^3/s (5e-7 L/s) and P_TOL = 0.3 Pa (3e-6 bar) of
 *    cdyn's RK4 run. Measured: 7.6e-8 L/s and 5.1e-7 bar. That is IDA's own
 *    error: IDA at rtol 1e-8 differs from IDA at rtol 1e-10 by 7.1e-8 L/s
 *    and 4.8e-7 bar, while RK4's error (16/15 |y(dt) - y(dt/2)|) is 2.1e-8
 *    L/s and 1.3e-7 bar there. The limits are six times the measured
 *    values, and 3e-7 of the valve's scale (Qa 1.57 L/s, p_J 8.7 bar).
 *  - IDA's samples satisfy the algebraic rows: valve and orifice [Pa] to
 *    ROWS_TOL_P = 0.1 Pa (1e-6 bar; measured 6.3e-9 bar: IDA's Newton
 *    tolerance, scaled by its error weights), continuity [m^3/s] to
 *    ROWS_TOL_FLOW = 1e-9 m^3/s (1e-6 L/s; measured 4.2e-15 L/s).
 *  - CVODE (BDF, rtol 1e-8, atol 1e-13 m^3/s) on the minimum-order ODE: on
 *    the open phases within FLOW_TOL, P_TOL of RK4 (measured 1.4e-7 L/s,
 *    8.7e-7 bar); from 0.31 to 0.69 s within FLOW_TOL_CLOSED = 2e-8 m^3/s
 *    (2e-5 L/s) and P_TOL_CLOSED = 40 Pa (4e-4 bar): measured 1.7e-7 L/s
 *    and 2.9e-6 bar, the integrators' error there (RK4 at dt and dt/2
 *    differ by 1.9e-7 L/s, 3.9e-6 bar). Both runs sit at the double root
 *    while the valve is closed, and cdyn's weighted tests (newton.h) bound
 *    what they leave there: the valve row's tolerance is 2 k_a |Qa| tol_Qa,
 *    so |Qa| <= 2 tol_Qa, with tol_Qa = 1e-10 times the largest |Qa| solved
 *    (1.57e-3 m^3/s): |Qa| <= 3.1e-13 m^3/s, which moves p_J = k_b Qb^2 by
 *    at most 2 k_b Qb |Qa| = 6e-4 Pa (k_a = 3.55e11, k_b = 9.86e11 kg/m^7,
 *    Qb = 9.8e-4 m^3/s); measured |Qa| <= 1e-19 L/s at the samples (the
 *    doubled step lands on the root). These limits are those of the
 *    scaled-unit version of this example (absolute Newton tolerance 1e-10
 *    in L/s and bar: |Qa| up to 5.3e-6 L/s, p_J moved by 1.0e-4 bar), kept
 *    in SI: about a hundred times the measured differences now.
 *
 * usage: ida_valve   (prints a table; no files)
 */
#include <cdyn/dae.h>
#include <cdyn/sundials.h>

#include "valve_network.h"

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <ida/ida.h>
#include <ida/ida_ls.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if SUNDIALS_VERSION_MAJOR >= 7
#define SUN_NO_COMM SUN_COMM_NULL
#else
#define SUN_NO_COMM NULL
#endif

enum { N = VALVE_STATES };

static const double T_END = 1.0, DT = 1e-3, SAMPLE = 0.01; /* s */
/* SUNDIALS' tolerances (IDA, CVODE): rtol, and atol per component in SI,
 * 1e-10 L/s and 1e-10 bar */
static const double RTOL = 1e-8, ATOL_FLOW = 1e-13 /* m^3/s */, ATOL_P = 1e-5 /* Pa */;
/* the checks, in SI (printed in L/s and bar): see the header */
static const double FLOW_TOL = 5e-10, P_TOL = 0.3;               /* m^3/s, Pa (5e-7 L/s, 3e-6 bar) */
static const double FLOW_TOL_CLOSED = 2e-8, P_TOL_CLOSED = 40.0; /* around the closure: m^3/s, Pa */
static const double ROWS_TOL_P = 0.1, ROWS_TOL_FLOW = 1e-9;      /* Pa, m^3/s (1e-6 bar, L/s) */
#define SAMPLES 100                                /* T_END / SAMPLE */
/* the valve's phase boundaries [s]: the integrators stop there (kinks of s'') */
static const double BREAKS[] = {0.3, 0.4, 0.6, 0.7, 1.0};
enum { NBREAKS = 5 };

/* A cdyn_dae for the network: M, callbacks, index check and split at a
 * state with flow; cdyn's default settings, as hydraulic_valve.c. */
static cdyn_dae *make_dae(network *net, const double *M, int report)
{
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(N, &st);
    if (!dae) {
        fprintf(stderr, "ida_valve: cdyn_dae_create: %s\n", cdyn_status_string(st));
        return NULL;
    }
    double v_probe[N] = {2e-3, 1.2e-3, 0.8e-3, 5e5}; /* m^3/s, Pa */
    int index = -1;
    st = cdyn_dae_set_mass(dae, M, N);
    if (st == CDYN_OK) st = cdyn_dae_set_model(dae, valve_force, valve_jacobian, valve_time, net);
    if (st == CDYN_OK) st = cdyn_dae_analyze(dae, 0.0, v_probe, &index);
    if (st == CDYN_OK) st = cdyn_dae_split(dae, 0.0, v_probe);
    if (st != CDYN_OK || index != 1) {
        fprintf(stderr, "ida_valve: setup: %s (index %d): %s\n", cdyn_status_string(st), index,
                cdyn_dae_last_error(dae));
        cdyn_dae_free(dae);
        return NULL;
    }
    if (report) {
        int integrated[N], algebraic[N];
        static const char *const names[N] = {"Q1", "Qa", "Qb", "p_J"};
        cdyn_dae_split_states(dae, integrated, algebraic);
        printf("cdyn: DAE index %d; integrated %s, algebraic %s, %s, %s\n", index,
               names[integrated[0]], names[algebraic[0]], names[algebraic[1]],
               names[algebraic[2]]);
    }
    return dae;
}

/* The smallest phase boundary >= t (the stop time of the next output). */
static double next_break(double t)
{
    for (int b = 0; b < NBREAKS; ++b)
        if (BREAKS[b] >= t - 1e-12) return BREAKS[b];
    return T_END;
}

typedef struct {
    double v[SAMPLES + 1][N];
    int have[SAMPLES + 1]; /* 1 where the run has a sample */
    double t_reached;
    long steps, evaluations, jacobians, error_fails, newton_fails;
    int newton_max_iterations; /* cdyn's Newton per evaluation (RK4 run) */
    long newton_svd_steps;
} run_result;

/* cdyn's Newton statistics of the last evaluation into run */
static void newton_stats(cdyn_dae *dae, run_result *run)
{
    cdyn_newton_report report;
    cdyn_newton_get_report(cdyn_dae_newton(dae), &report);
    if (report.iterations > run->newton_max_iterations)
        run->newton_max_iterations = report.iterations;
    run->newton_svd_steps += report.svd_steps;
}

/* ---- cdyn's run: RK4 on the minimum-order ODE ------------------------------ */

static int rk4_run(network *net, const double *M, double dt, run_result *run)
{
    cdyn_dae *dae = make_dae(net, M, dt == DT);
    if (!dae) return 0;
    double v[N] = {0.0, 0.0, 0.0, 0.0}, y, k1, k2, k3, k4, stage;
    cdyn_status st = cdyn_dae_consistent(dae, 0.0, v);
    y = v[Q1];
    const long steps = lround(T_END / dt), per_sample = lround(SAMPLE / dt);
    for (long step = 0; st == CDYN_OK && step <= steps; ++step) {
        double t = (double)step * dt;
        st = cdyn_dae_rhs(dae, t, &y, &k1); /* also the full state at t */
        if (st != CDYN_OK) break;
        newton_stats(dae, run);
        if (step % per_sample == 0) {
            cdyn_dae_last_state(dae, run->v[step / per_sample], NULL);
            run->have[step / per_sample] = 1;
        }
        if (step == steps) break;
        stage = y + 0.5 * dt * k1;
        st = cdyn_dae_rhs(dae, t + 0.5 * dt, &stage, &k2);
        if (st == CDYN_OK) newton_stats(dae, run);
        stage = y + 0.5 * dt * k2;
        if (st == CDYN_OK) st = cdyn_dae_rhs(dae, t + 0.5 * dt, &stage, &k3);
        if (st == CDYN_OK) newton_stats(dae, run);
        stage = y + dt * k3;
        if (st == CDYN_OK) st = cdyn_dae_rhs(dae, t + dt, &stage, &k4);
        if (st == CDYN_OK) newton_stats(dae, run);
        y += dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
        run->steps = step + 1;
    }
    if (st != CDYN_OK)
        fprintf(stderr, "ida_valve: RK4 run: %s: %s\n", cdyn_status_string(st),
                cdyn_dae_last_error(dae));
    run->t_reached = (double)run->steps * dt;
    cdyn_dae_free(dae);
    return st == CDYN_OK;
}

/* ---- IDA on M v' - F(v, t) = 0 through the adapter -------------------------- */

typedef struct {
    double t0, t1;     /* a segment [t0, t1] */
} segment;

typedef struct {
    int exact_jacobian; /* the adapter's Jacobian, else IDA's difference quotients */
    int suppress_alg;   /* IDASetSuppressAlg with cdyn's id vector */
    double rtol, atol_flow, atol_p; /* IDASVtolerances: atol per component [m^3/s, Pa] */
    double calcic_change; /* largest change IDACalcIC made to cdyn's values (restarts) */
} ida_options;

static int ida_flag(int flag, const char *call, int quiet)
{
    if (flag >= 0) return 1;
    if (!quiet) fprintf(stderr, "ida_valve: %s returned %d\n", call, flag);
    return 0;
}

/* IDA over the segments, each started (or restarted) from the RK4 run's
 * state at its start made consistent by cdyn. Returns 1 if every segment
 * was completed; run->t_reached says how far it got. quiet: a failure is
 * expected (the whole-cycle attempts) and only reported in run. */
static int ida_run(network *net, const double *M, const run_result *ref, const segment *segs,
                   int nsegs, ida_options *opt, run_result *run, int quiet)
{
    SUNContext ctx = NULL;
    if (SUNContext_Create(SUN_NO_COMM, &ctx) != 0) return 0;
    cdyn_status st;
    cdyn_dae *dae = make_dae(net, M, 0);
    cdyn_ida_dae *adapter = dae ? cdyn_ida_dae_create(dae, &st) : NULL; /* model from dae */
    N_Vector v = N_VNew_Serial(N, ctx), vdot = N_VNew_Serial(N, ctx);
    N_Vector atol = N_VNew_Serial(N, ctx);
    SUNMatrix A = SUNDenseMatrix(N, N, ctx);
    SUNLinearSolver LS = v && A ? SUNLinSol_Dense(v, A, ctx) : NULL;
    void *mem = IDACreate(ctx);
    int ok = dae && adapter && v && vdot && atol && A && LS && mem;
    if (!ok) fprintf(stderr, "ida_valve: IDA setup failed\n");
    for (int i = 0; ok && i < N; ++i)
        N_VGetArrayPointer(atol)[i] = i == PJ ? opt->atol_p : opt->atol_flow;
    double *vd = ok ? N_VGetArrayPointer(v) : NULL, t = 0.0;
    if (!quiet) opt->calcic_change = 0.0;
    if (!ida_flag(IDASetErrFile(mem, quiet ? NULL : stderr), "IDASetErrFile", quiet)) ok = 0;
    for (int g = 0; ok && g < nsegs; ++g) {
        int k0 = (int)lround(segs[g].t0 / SAMPLE), k1 = (int)lround(segs[g].t1 / SAMPLE);
        t = segs[g].t0;
        /* consistent v, v' from cdyn at the segment's start */
        memcpy(vd, ref->v[k0], sizeof(double) * N);
        if ((st = cdyn_ida_dae_consistent(adapter, t, v, vdot)) != CDYN_OK) {
            fprintf(stderr, "ida_valve: cdyn_ida_dae_consistent: %s: %s\n",
                    cdyn_status_string(st), cdyn_ida_dae_last_error(adapter));
            ok = 0;
            break;
        }
        if (g == 0) {
            ok = ida_flag(IDAInit(mem, cdyn_ida_dae_residual, t, v, vdot), "IDAInit", 0) &&
                 ida_flag(IDASVtolerances(mem, opt->rtol, atol), "IDASVtolerances", 0) &&
                 ida_flag(IDASetLinearSolver(mem, LS, A), "IDASetLinearSolver", 0) &&
                 /* user data, id vector, the DAE's Jacobian */
                 ida_flag(cdyn_ida_attach_dae(mem, adapter, v), "cdyn_ida_attach_dae", 0) &&
                 (opt->exact_jacobian || /* else back to IDA's difference quotients */
                  ida_flag(IDASetJacFn(mem, NULL), "IDASetJacFn", 0)) &&
                 ida_flag(IDASetSuppressAlg(mem, opt->suppress_alg), "IDASetSuppressAlg", 0) &&
                 ida_flag(IDASetMaxNumSteps(mem, 20000), "IDASetMaxNumSteps", 0);
        } else {
            /* restart: IDACalcIC with cdyn's id vector must find cdyn's values consistent */
            double before[N], after_dot[N];
            memcpy(before, vd, sizeof before);
            memcpy(after_dot, N_VGetArrayPointer(vdot), sizeof after_dot);
            ok = ida_flag(IDAReInit(mem, t, v, vdot), "IDAReInit", 0) &&
                 ida_flag(IDACalcIC(mem, IDA_YA_YDP_INIT, t + SAMPLE), "IDACalcIC", 0) &&
                 ida_flag(IDAGetConsistentIC(mem, v, vdot), "IDAGetConsistentIC", 0);
            for (int i = 0; ok && i < N; ++i) {
                opt->calcic_change = fmax(opt->calcic_change, fabs(vd[i] - before[i]));
                opt->calcic_change =
                    fmax(opt->calcic_change, fabs(N_VGetArrayPointer(vdot)[i] - after_dot[i]));
            }
        }
        if (!ok) break;
        memcpy(run->v[k0], vd, sizeof(double) * N);
        run->have[k0] = 1;
        for (int k = k0 + 1; ok && k <= k1; ++k) {
            double tout = k * SAMPLE;
            /* stop at every sample: the samples are IDA's own steps (see the header) */
            ok = ida_flag(IDASetStopTime(mem, tout), "IDASetStopTime", 0) &&
                 ida_flag(IDASolve(mem, tout, &t, v, vdot, IDA_NORMAL), "IDASolve", quiet);
            if (!ok) {
                IDAGetCurrentTime(mem, &t);
                if (!quiet) fprintf(stderr, "  at t = %.6f s\n", t);
                break;
            }
            memcpy(run->v[k], vd, sizeof(double) * N);
            run->have[k] = 1;
        }
    }
    run->t_reached = t;
    if (mem) {
        IDAGetNumSteps(mem, &run->steps);
        IDAGetNumResEvals(mem, &run->evaluations);
        IDAGetNumJacEvals(mem, &run->jacobians);
        IDAGetNumErrTestFails(mem, &run->error_fails);
        IDAGetNumNonlinSolvConvFails(mem, &run->newton_fails);
    }
    IDAFree(&mem);
    if (LS) SUNLinSolFree(LS);
    if (A) SUNMatDestroy(A);
    if (atol) N_VDestroy(atol);
    if (vdot) N_VDestroy(vdot);
    if (v) N_VDestroy(v);
    cdyn_ida_dae_free(adapter);
    cdyn_dae_free(dae);
    SUNContext_Free(&ctx);
    return ok;
}

/* ---- CVODE on the minimum-order ODE through the adapter --------------------- */

static int cvode_run(network *net, const double *M, run_result *run)
{
    SUNContext ctx = NULL;
    if (SUNContext_Create(SUN_NO_COMM, &ctx) != 0) return 0;
    cdyn_dae *dae = make_dae(net, M, 0);
    N_Vector y = N_VNew_Serial(1, ctx), atol = N_VNew_Serial(1, ctx);
    SUNMatrix A = SUNDenseMatrix(1, 1, ctx);
    SUNLinearSolver LS = y && A ? SUNLinSol_Dense(y, A, ctx) : NULL;
    void *mem = CVodeCreate(CV_BDF, ctx);
    int ok = dae && y && atol && A && LS && mem;
    double v[N] = {0.0, 0.0, 0.0, 0.0}, t = 0.0, ydot;
    cdyn_status st = ok ? cdyn_dae_consistent(dae, 0.0, v) : CDYN_ERR_ARG;
    ok = ok && st == CDYN_OK;
    if (ok) {
        N_VGetArrayPointer(y)[0] = v[Q1]; /* y = v_i = (Q1) */
        N_VGetArrayPointer(atol)[0] = ATOL_FLOW;
        ok = CVodeInit(mem, cdyn_cvode_dae_rhs, 0.0, y) == CV_SUCCESS &&
             CVodeSVtolerances(mem, RTOL, atol) == CV_SUCCESS &&
             CVodeSetLinearSolver(mem, LS, A) == CV_SUCCESS &&
             CVodeSetUserData(mem, dae) == CV_SUCCESS &&
             CVodeSetMaxNumSteps(mem, 20000) == CV_SUCCESS;
    }
    for (int k = 0; ok && k <= SAMPLES; ++k) {
        double tout = k * SAMPLE;
        if (k > 0) {
            int flag = CVodeSetStopTime(mem, next_break(tout));
            if (flag == CV_SUCCESS) flag = CVode(mem, tout, y, &t, CV_NORMAL);
            if (flag < 0) {
                fprintf(stderr, "ida_valve: CVode returned %d at t = %.6f s: %s\n", flag, t,
                        cdyn_dae_last_error(dae));
                ok = 0;
                break;
            }
        }
        /* the full state at the output: one evaluation there */
        if ((st = cdyn_dae_rhs(dae, tout, N_VGetArrayPointer(y), &ydot)) != CDYN_OK) {
            fprintf(stderr, "ida_valve: cdyn_dae_rhs: %s\n", cdyn_dae_last_error(dae));
            ok = 0;
            break;
        }
        cdyn_dae_last_state(dae, run->v[k], NULL);
        run->have[k] = 1;
        run->t_reached = tout;
    }
    if (mem) {
        CVodeGetNumSteps(mem, &run->steps);
        CVodeGetNumRhsEvals(mem, &run->evaluations);
        CVodeGetNumJacEvals(mem, &run->jacobians);
        CVodeGetNumErrTestFails(mem, &run->error_fails);
        CVodeGetNumNonlinSolvConvFails(mem, &run->newton_fails);
    }
    CVodeFree(&mem);
    if (LS) SUNLinSolFree(LS);
    if (A) SUNMatDestroy(A);
    if (atol) N_VDestroy(atol);
    if (y) N_VDestroy(y);
    cdyn_dae_free(dae);
    SUNContext_Free(&ctx);
    return ok;
}

/* largest |run - ref| over the samples both have in [ta, tb], flows and
 * pressure apart */
static void deviation(const run_result *run, const run_result *ref, double ta, double tb,
                      double *flow, double *pressure)
{
    *flow = *pressure = 0.0;
    for (int k = 0; k <= SAMPLES; ++k) {
        if (!run->have[k] || !ref->have[k] || k * SAMPLE < ta - 1e-9 || k * SAMPLE > tb + 1e-9)
            continue;
        for (int i = 0; i < N; ++i) {
            double dv = fabs(run->v[k][i] - ref->v[k][i]);
            if (i == PJ) *pressure = fmax(*pressure, dv);
            else *flow = fmax(*flow, dv);
        }
    }
}

/* largest |F_i(v, t)| of the algebraic rows over the run's samples: the
 * valve and orifice rows [Pa] into *pressure_rows, continuity [m^3/s] into
 * *continuity */
static void worst_algebraic_rows(network *net, const run_result *run, double *pressure_rows,
                                 double *continuity)
{
    double F[N];
    *pressure_rows = *continuity = 0.0;
    for (int k = 0; k <= SAMPLES; ++k) {
        if (!run->have[k]) continue;
        valve_force(k * SAMPLE, run->v[k], F, net);
        *pressure_rows = fmax(*pressure_rows, fmax(fabs(F[QA]), fabs(F[QB])));
        *continuity = fmax(*continuity, fabs(F[PJ]));
    }
}

static run_result rk4, rk4_half, ida, ida_tight, ida_exact_cycle, ida_dq_cycle, cv;

int main(void)
{
    const double L = VALVE_LPS, B = VALVE_BAR; /* printing: L/s and bar */
    network net = make_network();
    double M[N * N] = {0};
    M[Q1 + Q1 * N] = net.inertance;
    const segment open_phases[2] = {{0.0, 0.3}, {0.7, T_END}}, cycle[1] = {{0.0, T_END}};
    ida_options opt = {1, 1, RTOL, ATOL_FLOW, ATOL_P, 0.0};
    ida_options tight = {1, 1, 1e-2 * RTOL, 1e-2 * ATOL_FLOW, 1e-2 * ATOL_P, 0.0};
    ida_options exact_cycle = {1, 1, RTOL, ATOL_FLOW, ATOL_P, 0.0};
    ida_options dq_cycle = {0, 0, RTOL, ATOL_FLOW, ATOL_P, 0.0};

    printf("valve network (hydraulic_valve.c, THEORY T6.3, SI units), first cycle of %.0f s: "
           "IDA and CVODE through cdyn_sundials vs cdyn's RK4 (dt = %.0e s); cdyn with its "
           "default settings\n", T_END, DT);
    if (!rk4_run(&net, M, DT, &rk4) || !rk4_run(&net, M, 0.5 * DT, &rk4_half) ||
        !ida_run(&net, M, &rk4, open_phases, 2, &opt, &ida, 0) ||
        !ida_run(&net, M, &rk4, open_phases, 2, &tight, &ida_tight, 0) ||
        !cvode_run(&net, M, &cv))
        return EXIT_FAILURE;
    /* the whole-cycle attempts: expected to stop (exact Jacobian) */
    int exact_ok = ida_run(&net, M, &rk4, cycle, 1, &exact_cycle, &ida_exact_cycle, 1);
    int dq_ok = ida_run(&net, M, &rk4, cycle, 1, &dq_cycle, &ida_dq_cycle, 1);

    printf("\nflows in L/s, pressures in bar\n");
    printf("%5s %7s %9s %9s %9s %9s %9s %10s %10s %10s\n", "t [s]", "opening", "Q1 RK4",
           "Q1 IDA", "Q1 CVODE", "Qa RK4", "Qa IDA", "p_J RK4", "p_J IDA", "p_J CVODE");
    for (int k = 0; k <= SAMPLES; k += 5) {
        double s, ds;
        valve_opening(&net, k * SAMPLE, &s, &ds);
        printf("%5.2f %7.3f %9.6f ", k * SAMPLE, s, L * rk4.v[k][Q1]);
        if (ida.have[k]) printf("%9.6f ", L * ida.v[k][Q1]);
        else printf("%9s ", "-");
        printf("%9.6f %9.6f ", L * cv.v[k][Q1], L * rk4.v[k][QA]);
        if (ida.have[k]) printf("%9.6f ", L * ida.v[k][QA]);
        else printf("%9s ", "-");
        printf("%10.6f ", B * rk4.v[k][PJ]);
        if (ida.have[k]) printf("%10.6f ", B * ida.v[k][PJ]);
        else printf("%10s ", "-");
        printf("%10.6f\n", B * cv.v[k][PJ]);
    }
    printf("(IDA '-': the closing/closed/reopening phase 0.3-0.7 s, where IDA is not run)\n");

    /* the windows: open [0, 0.3] and [0.7, 1]; closing, closed, reopening between */
    double d[8][2]; /* flow [m^3/s], pressure [Pa] */
    deviation(&ida, &rk4, 0.0, T_END, &d[0][0], &d[0][1]);
    deviation(&ida, &ida_tight, 0.0, T_END, &d[1][0], &d[1][1]);
    deviation(&rk4, &rk4_half, 0.0, 0.3, &d[2][0], &d[2][1]);
    deviation(&rk4, &rk4_half, 0.7, T_END, &d[3][0], &d[3][1]);
    d[2][0] = fmax(d[2][0], d[3][0]), d[2][1] = fmax(d[2][1], d[3][1]);
    deviation(&cv, &rk4, 0.0, 0.3, &d[4][0], &d[4][1]);
    deviation(&cv, &rk4, 0.7, T_END, &d[5][0], &d[5][1]);
    d[4][0] = fmax(d[4][0], d[5][0]), d[4][1] = fmax(d[4][1], d[5][1]);
    deviation(&cv, &rk4, 0.31, 0.69, &d[5][0], &d[5][1]);
    deviation(&rk4, &rk4_half, 0.31, 0.69, &d[6][0], &d[6][1]);
    deviation(&ida_dq_cycle, &rk4, 0.0, T_END, &d[7][0], &d[7][1]);
    double rows_p, rows_flow;
    worst_algebraic_rows(&net, &ida, &rows_p, &rows_flow);
    double qa_closed = 0.0; /* |Qa| at the closed valve, RK4 samples 0.4-0.6 s */
    for (int k = 40; k <= 60; ++k) qa_closed = fmax(qa_closed, fabs(rk4.v[k][QA]));

    printf("\ncdyn (default settings) in the RK4 run: at most %d Newton iterations per "
           "evaluation, %ld SVD steps; |Qa| at the closed valve (samples 0.4-0.6 s) <= %.1e L/s\n",
           rk4.newton_max_iterations, rk4.newton_svd_steps, L * qa_closed);
    printf("IDA (rtol %.0e, atol %.0e m^3/s and %.0e Pa; adapter Jacobian, id vector + "
           "suppressed algebraic error test) on the open phases [0, 0.3] and [0.7, 1] s: %ld "
           "steps, %ld residuals, %ld Jacobians, %ld error-test and %ld corrector failures\n",
           RTOL, ATOL_FLOW, ATOL_P, ida.steps, ida.evaluations, ida.jacobians, ida.error_fails,
           ida.newton_fails);
    printf("  restart at 0.7 s from cdyn's consistent values: IDACalcIC (IDA_YA_YDP_INIT, "
           "cdyn's id vector) changed them by %.1e (SI)\n", opt.calcic_change);
    printf("  max |IDA - RK4| %.2e L/s (limit %.0e), %.2e bar (limit %.0e); algebraic rows "
           "|F_a(v, t)|: valve and orifice %.1e bar (limit %.0e), continuity %.1e L/s (limit "
           "%.0e)\n", L * d[0][0], L * FLOW_TOL, B * d[0][1], B * P_TOL, B * rows_p,
           B * ROWS_TOL_P, L * rows_flow, L * ROWS_TOL_FLOW);
    printf("  error estimates: |IDA(rtol 1e-8) - IDA(rtol 1e-10)| %.1e L/s, %.1e bar; RK4 "
           "16/15 |y(dt) - y(dt/2)| %.1e L/s, %.1e bar\n", L * d[1][0], B * d[1][1],
           16.0 / 15.0 * L * d[2][0], 16.0 / 15.0 * B * d[2][1]);
    printf("IDA over the whole cycle, exact Jacobian: %s at t = %.4f s (%ld steps, %ld "
           "corrector failures): the valve is closed from 0.4 s, the iteration matrix "
           "singular\n", exact_ok ? "completed" : "stopped", ida_exact_cycle.t_reached,
           ida_exact_cycle.steps, ida_exact_cycle.newton_fails);
    printf("IDA over the whole cycle, difference-quotient Jacobian, algebraic states in the "
           "error test: %s at t = %.4f s (%ld steps, %ld corrector and %ld error-test "
           "failures); max |IDA - RK4| %.1e L/s, %.1e bar\n", dq_ok ? "completed" : "stopped",
           ida_dq_cycle.t_reached, ida_dq_cycle.steps, ida_dq_cycle.newton_fails,
           ida_dq_cycle.error_fails, L * d[7][0], B * d[7][1]);
    printf("CVODE BDF (rtol %.0e, atol %.0e m^3/s) on cdyn's minimum-order ODE (y = Q1), "
           "whole cycle: %ld steps, %ld rhs evaluations, %ld error-test failures\n", RTOL,
           ATOL_FLOW, cv.steps, cv.evaluations, cv.error_fails);
    printf("  max |CVODE - RK4| open phases %.2e L/s, %.2e bar (limits %.0e, %.0e); "
           "closing/closed/reopening %.2e L/s, %.2e bar (limits %.0e, %.0e; RK4 dt vs dt/2 "
           "there: %.1e, %.1e)\n", L * d[4][0], B * d[4][1], L * FLOW_TOL, B * P_TOL,
           L * d[5][0], B * d[5][1], L * FLOW_TOL_CLOSED, B * P_TOL_CLOSED, L * d[6][0],
           B * d[6][1]);

    int pass = d[0][0] <= FLOW_TOL && d[0][1] <= P_TOL && rows_p <= ROWS_TOL_P &&
               rows_flow <= ROWS_TOL_FLOW && d[4][0] <= FLOW_TOL && d[4][1] <= P_TOL &&
               d[5][0] <= FLOW_TOL_CLOSED && d[5][1] <= P_TOL_CLOSED;
    printf("checks: IDA on the open phases and CVODE within %.0e L/s, %.0e bar of RK4 "
           "(CVODE around the closure: %.0e L/s, %.0e bar), IDA's algebraic rows <= %.0e bar, "
           "%.0e L/s: %s\n", L * FLOW_TOL, B * P_TOL, L * FLOW_TOL_CLOSED, B * P_TOL_CLOSED,
           B * ROWS_TOL_P, L * ROWS_TOL_FLOW, pass ? "passed" : "FAILED");
    if (!pass) {
        fprintf(stderr, "ida_valve: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
