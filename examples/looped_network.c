/*
 * looped_network.c - a looped water network whose junctions have no
 * storage (index 2), through cdyn_dae with default settings, in SI units
 * (docs/theory.md "Index-2 networks", THEORY T1.7).
 *
 *   b1(t) --> J1 -------- pipe 1 -------> J3 <-- b2(t)
 *              |                      ^    |
 *            pipe 0       pipe 4     /   pipe 3
 *              v       /------------/      v
 *              J2 ----/                    J4 --- pipe 5 ---> tank (p_T = 2 bar)
 *               \------- pipe 2 [valve] ---^
 *
 * Pipes (from -> to): 0: J1->J2, 1: J1->J3, 2: J2->J4 through a valve,
 * 3: J3->J4, 4: J2->J3, 5: J4->tank. Each pipe k carries a flow q_k with
 * inertance L_k = rho l_k / A and a turbulent loss K_k q_k |q_k|; the valve
 * adds K_v / s(t)^2 q_2 |q_2|, its opening s(t) closing from 3 to 4 s (to
 * a leakage of 0.1 % of its area) and opening again from 6 to 7 s
 * (smoothstep ramps). Inflows given as functions of time: b1(t) = 4 L/s
 * (1 + 0.25 sin(pi t / 2)) at J1, and b2(t) rising from 0 to 1 L/s between
 * 1 and 2 s at J3. The junctions J1..J4 have no storage: their pressures
 * appear in no equation with a time derivative. States
 * v = (q_0..q_5, p_1..p_4), M = diag(L_0..L_5, 0, 0, 0, 0):
 *     L_k q_k' = p_from(k) - p_to(k) - K_k q_k|q_k| (- valve, - p_T for pipe 5)
 *            0 = b_j(t) - (flow leaving J_j) + (flow entering J_j).
 *
 * cdyn_dae finds index 2 and its index-2 form by itself (cdyn_dae_split):
 * the four pressures are the multipliers of the four balances, the six
 * flows split by a pivoted QR (cdyn_nullspace) into 2 integrated flows (the
 * loop flows: 6 pipes - 4 junctions) and 4 dependent ones, which follow
 * from the balances at every evaluation, so the balances hold to rounding
 * without drift. F and dF/dt are given (dF/dv is left to cdyn's
 * differences); no tolerance is set: cdyn's defaults.
 *
 * Runs: cdyn's own fixed-step loop (RK4 on the minimum-order ODE,
 * dt = 1 ms, 10 s) and, when cdyn was built with SUNDIALS, CVODE (BDF,
 * rtol 1e-8) through the adapter (cdyn_cvode_dae_rhs, cdyn_cvode_attach_dae
 * with cdyn's Jacobian of the minimum-order ODE).
 *
 * Checks (exit status 1 if one fails):
 *  - the split: index 2, 2 integrated states, the pressures as multipliers;
 *  - the balances at every RK4 step, to BALANCE_TOL = 1e-14 of the flow
 *    scale (measured: a few 1e-16);
 *  - a second formulation every 0.5 s: cdyn_nullspace_solve on
 *    M q' = f + W^T p, W q = b(t) (W the incidence matrix, c = -b'(t); no
 *    pressure is a state there) gives the flow rates and, as multipliers,
 *    the junction pressures; the DAE's agree to RATE_TOL = 1e-10 of the
 *    largest flow rate and P_TOL = 1e-10 of the largest pressure;
 *  - the same comparison for a second cdyn_dae without dF/dt (cdyn's
 *    checked differences in t, dae.h), evaluated at the same states:
 *    within PLAIN_TOL = 2e-9 for both (measured 3.4e-10 and 7.3e-11; the
 *    kinks of the smoothstep ramps cost the last digit);
 *  - CVODE against RK4 at every 0.5 s within RUN_TOL = 1e-6 of the flow
 *    scale (measured 2.7e-7: the two integrators' errors at rtol 1e-8 and
 *    dt = 1 ms).
 *
 * usage: looped_network   (prints a table; no files)
 */
#include <cdyn/dae.h>
#include <cdyn/nullspace.h>

#ifdef LOOPED_NETWORK_CVODE
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
#endif

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { PIPES = 6, JUNCTIONS = 4, N = PIPES + JUNCTIONS };

static const double PI = 3.14159265358979323846;
static const double T_END = 10.0, DT = 1e-3, SAMPLE = 0.5; /* s */
static const double BALANCE_TOL = 1e-14, RATE_TOL = 1e-10, P_TOL = 1e-10, RUN_TOL = 1e-6;
static const double PLAIN_TOL = 2e-9;

/* pipe k runs from junction FROM[k] to TO[k] (-1: the tank) */
static const int FROM[PIPES] = {0, 0, 1, 2, 1, 3};
static const int TO[PIPES] = {1, 2, 3, 3, 2, -1};

typedef struct {
    double L[PIPES], K[PIPES]; /* inertance [kg/m^4], turbulent loss [kg/m^7] */
    double k_valve;            /* valve loss when open [kg/m^7] */
    double p_tank;             /* [Pa] */
} network;

static network make_network(void)
{
    const double rho = 1000.0, d = 0.08, area = PI * d * d / 4.0, friction = 0.02;
    const double length[PIPES] = {50.0, 40.0, 60.0, 45.0, 30.0, 80.0};
    const double valve_area = 2e-3, cd = 0.7; /* m^2 */
    network net;
    for (int k = 0; k < PIPES; ++k) {
        net.L[k] = rho * length[k] / area;
        net.K[k] = friction * length[k] / d * rho / (2.0 * area * area);
    }
    net.k_valve = rho / (2.0 * cd * cd * valve_area * valve_area);
    net.p_tank = 2e5;
    return net;
}

/* smoothstep from 0 to 1 as t goes from a to b */
static double smoothstep(double t, double a, double b)
{
    if (t <= a) return 0.0;
    if (t >= b) return 1.0;
    double x = (t - a) / (b - a);
    return x * x * (3.0 - 2.0 * x);
}

/* its derivative in t */
static double smoothstep_rate(double t, double a, double b)
{
    if (t <= a || t >= b) return 0.0;
    double x = (t - a) / (b - a);
    return 6.0 * x * (1.0 - x) / (b - a);
}

/* valve opening: 1, closing 3-4 s to 1e-3, opening 6-7 s; and its rate */
static const double LEAK = 1e-3;
static double opening(double t)
{
    return 1.0 - (1.0 - LEAK) * (smoothstep(t, 3.0, 4.0) - smoothstep(t, 6.0, 7.0));
}
static double opening_rate(double t)
{
    return -(1.0 - LEAK) * (smoothstep_rate(t, 3.0, 4.0) - smoothstep_rate(t, 6.0, 7.0));
}

/* inflows into J1..J4 [m^3/s] and their time derivatives */
static void inflows(double t, double *b, double *bdot)
{
    memset(b, 0, sizeof(double) * JUNCTIONS);
    b[0] = 4e-3 * (1.0 + 0.25 * sin(PI * t / 2.0));
    b[2] = 1e-3 * smoothstep(t, 1.0, 2.0);
    if (bdot) {
        memset(bdot, 0, sizeof(double) * JUNCTIONS);
        bdot[0] = 4e-3 * 0.25 * (PI / 2.0) * cos(PI * t / 2.0);
        bdot[2] = 1e-3 * smoothstep_rate(t, 1.0, 2.0);
    }
}

/* the pipe forces without pressures: -K q|q| (valve included), -p_T for
 * the pipe into the tank */
static void pipe_forces(const network *net, double t, const double *q, double *f)
{
    for (int k = 0; k < PIPES; ++k) f[k] = -net->K[k] * q[k] * fabs(q[k]);
    double s = opening(t);
    f[2] -= net->k_valve / (s * s) * q[2] * fabs(q[2]);
    f[5] -= net->p_tank;
}

/* F(v, t) of the DAE */
static int force(double t, const double *v, double *F, void *user)
{
    const network *net = user;
    const double *q = v, *p = v + PIPES;
    double b[JUNCTIONS];
    pipe_forces(net, t, q, F);
    for (int k = 0; k < PIPES; ++k) F[k] += p[FROM[k]] - (TO[k] >= 0 ? p[TO[k]] : 0.0);
    inflows(t, b, NULL);
    for (int j = 0; j < JUNCTIONS; ++j) F[PIPES + j] = b[j];
    for (int k = 0; k < PIPES; ++k) {
        F[PIPES + FROM[k]] -= q[k];
        if (TO[k] >= 0) F[PIPES + TO[k]] += q[k];
    }
    return 0;
}

/* dF/dt (v fixed): the valve's loss and the inflows depend on time. Given,
 * because both are known in closed form; without it cdyn differentiates F
 * in t by checked central differences (dae.h), which main() checks too
 * (PLAIN_TOL: the kinks of the smoothstep ramps, where b'' and s'' jump,
 * cost the last digit); one central difference, before, was off by
 * h |jump b''| / 2 = 9e-9 m^3/s^2 at the ends of the b2 ramp, 1.5e-4 of
 * the small rates at t = 1 s. */
static int force_rate(double t, const double *v, double *dF, void *user)
{
    const network *net = user;
    double b[JUNCTIONS], s = opening(t), q = v[2];
    memset(dF, 0, sizeof(double) * N);
    dF[2] = 2.0 * net->k_valve * opening_rate(t) / (s * s * s) * q * fabs(q);
    inflows(t, b, dF + PIPES);
    return 0;
}

/* ---- the second formulation: cdyn_nullspace (THEORY T1.7) --------------- */

/* W (junctions x pipes): +1 where a pipe leaves a junction, -1 where it
 * enters, so that W q = b(t) and the pipe equations read
 * M q' = f + W^T p. */
static void incidence(double *W)
{
    memset(W, 0, sizeof(double) * JUNCTIONS * PIPES);
    for (int k = 0; k < PIPES; ++k) {
        W[FROM[k] + JUNCTIONS * k] = 1.0;
        if (TO[k] >= 0) W[TO[k] + JUNCTIONS * k] = -1.0;
    }
}

/* rates and pressures of the null-space formulation at (t, q): 0 or 1 */
static int nullspace_reference(cdyn_nullspace *ns, const network *net, double t,
                               const double *q, double *qdot, double *p)
{
    double M[PIPES * PIPES] = {0}, f[PIPES], b[JUNCTIONS], bdot[JUNCTIONS], c[JUNCTIONS];
    for (int k = 0; k < PIPES; ++k) M[k + PIPES * k] = net->L[k];
    pipe_forces(net, t, q, f);
    inflows(t, b, bdot);
    for (int j = 0; j < JUNCTIONS; ++j) c[j] = -bdot[j]; /* W q' = -c */
    return cdyn_nullspace_solve(ns, M, PIPES, f, c, qdot, p) == CDYN_OK;
}

/* ---- cdyn's fixed-step loop ---------------------------------------------- */

static int rk4_step(cdyn_dae *dae, double t, double *y, int ny)
{
    double k1[N], k2[N], k3[N], k4[N], yt[N];
    if (cdyn_dae_rhs(dae, t, y, k1) != CDYN_OK) return 0;
    for (int i = 0; i < ny; ++i) yt[i] = y[i] + 0.5 * DT * k1[i];
    if (cdyn_dae_rhs(dae, t + 0.5 * DT, yt, k2) != CDYN_OK) return 0;
    for (int i = 0; i < ny; ++i) yt[i] = y[i] + 0.5 * DT * k2[i];
    if (cdyn_dae_rhs(dae, t + 0.5 * DT, yt, k3) != CDYN_OK) return 0;
    for (int i = 0; i < ny; ++i) yt[i] = y[i] + DT * k3[i];
    if (cdyn_dae_rhs(dae, t + DT, yt, k4) != CDYN_OK) return 0;
    for (int i = 0; i < ny; ++i) y[i] += DT / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* largest |balance| relative to the flow scale at the state v */
static double balance_error(double t, const double *v)
{
    double F[N], scale = 0.0, worst = 0.0;
    network unused = make_network();
    force(t, v, F, &unused);
    for (int k = 0; k < PIPES; ++k) scale = fmax(scale, fabs(v[k]));
    for (int j = 0; j < JUNCTIONS; ++j) worst = fmax(worst, fabs(F[PIPES + j]));
    return worst / scale;
}

static double max_abs(int n, const double *x)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i) m = fmax(m, fabs(x[i]));
    return m;
}

#define SAMPLES 21 /* T_END / SAMPLE + 1 */

#ifdef LOOPED_NETWORK_CVODE
/* CVODE (BDF, dense, cdyn's Jacobian) from the consistent start; its
 * integrated states at the samples into y_out (SAMPLES x ny). 0 on failure. */
static int run_cvode(cdyn_dae *dae, const double *y0, int ny, double *y_out, long *steps)
{
    SUNContext ctx = NULL;
    if (SUNContext_Create(SUN_NO_COMM, &ctx) != 0) return 0;
    N_Vector y = N_VNew_Serial(ny, ctx);
    SUNMatrix A = SUNDenseMatrix(ny, ny, ctx);
    SUNLinearSolver LS = y && A ? SUNLinSol_Dense(y, A, ctx) : NULL;
    void *mem = CVodeCreate(CV_BDF, ctx);
    int ok = y && A && LS && mem;
    if (ok) {
        memcpy(N_VGetArrayPointer(y), y0, sizeof(double) * (size_t)ny);
        memcpy(y_out, y0, sizeof(double) * (size_t)ny);
        ok = CVodeInit(mem, cdyn_cvode_dae_rhs, 0.0, y) == CV_SUCCESS &&
             CVodeSStolerances(mem, 1e-8, 1e-12) == CV_SUCCESS &&
             CVodeSetLinearSolver(mem, LS, A) == CV_SUCCESS &&
             CVodeSetMaxNumSteps(mem, 100000) == CV_SUCCESS &&
             cdyn_cvode_attach_dae(mem, dae) == CV_SUCCESS;
    }
    double t = 0.0;
    for (int s = 1; ok && s < SAMPLES; ++s) {
        double tout = s * SAMPLE;
        ok = CVodeSetStopTime(mem, tout) == CV_SUCCESS &&
             CVode(mem, tout, y, &t, CV_NORMAL) >= 0;
        if (ok) memcpy(y_out + (size_t)s * ny, N_VGetArrayPointer(y), sizeof(double) * (size_t)ny);
    }
    if (ok) CVodeGetNumSteps(mem, steps);
    CVodeFree(&mem);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    SUNContext_Free(&ctx);
    return ok;
}
#endif

int main(void)
{
    network net = make_network();
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(N, &st);
    cdyn_nullspace *ns = cdyn_nullspace_create(PIPES, JUNCTIONS, &st);
    if (!dae || !ns) return 1;
    double M[N * N] = {0};
    for (int k = 0; k < PIPES; ++k) M[k + N * k] = net.L[k];
    double W[JUNCTIONS * PIPES];
    incidence(W);
    /* a start that need not be consistent: cdyn_dae_consistent fixes it */
    double v[N] = {2e-3, 2e-3, 1e-3, 2e-3, 1e-3, 4e-3, 3e5, 2.5e5, 2.5e5, 2.2e5};
    int ok = cdyn_dae_set_mass(dae, M, N) == CDYN_OK &&
             cdyn_dae_set_model(dae, force, NULL, force_rate, &net) == CDYN_OK &&
             cdyn_nullspace_factor(ns, W, JUNCTIONS) == CDYN_OK;
    int index = -1;
    if (ok) ok = cdyn_dae_analyze(dae, 0.0, v, &index) == CDYN_OK;
    if (ok) ok = cdyn_dae_split(dae, 0.0, v) == CDYN_OK;
    if (ok) ok = cdyn_dae_consistent(dae, 0.0, v) == CDYN_OK;
    if (!ok) {
        fprintf(stderr, "looped_network: set-up failed: %s\n", cdyn_dae_last_error(dae));
        return 1;
    }
    int ny = cdyn_dae_ode_size(dae), integrated[N], others[N];
    cdyn_dae_split_states(dae, integrated, others);
    /* the same model without dF/dt, split at the same start: the same
     * integrated flows, so that it can be evaluated at the same y */
    cdyn_dae *plain = cdyn_dae_create(N, &st);
    int plain_integrated[N];
    int plain_ok = plain && cdyn_dae_set_mass(plain, M, N) == CDYN_OK &&
                   cdyn_dae_set_model(plain, force, NULL, NULL, &net) == CDYN_OK &&
                   cdyn_dae_split(plain, 0.0, v) == CDYN_OK &&
                   cdyn_dae_split_states(plain, plain_integrated, NULL) == ny;
    for (int i = 0; plain_ok && i < ny; ++i) plain_ok = plain_integrated[i] == integrated[i];
    int split_ok = index == 2 && cdyn_dae_index2(dae) == 1 && ny == PIPES - JUNCTIONS;
    for (int j = 0; j < JUNCTIONS; ++j) split_ok = split_ok && others[JUNCTIONS + j] == PIPES + j;
    printf("looped network: %d pipes, %d junctions without storage; index %d; integrated "
           "flows: q%d, q%d; pressures p1..p4 are the balances' multipliers%s\n",
           PIPES, JUNCTIONS, index, integrated[0], integrated[1], split_ok ? "" : " (UNEXPECTED)");

    /* RK4 with cdyn's right-hand side, checks along the way */
    double y[N], y_rk4[SAMPLES * N];
    for (int i = 0; i < ny; ++i) y[i] = v[integrated[i]];
    memcpy(y_rk4, y, sizeof(double) * (size_t)ny);
    double worst_balance = 0.0, worst_rate = 0.0, worst_p = 0.0, p2_peak = 0.0, t_peak = 0.0;
    double plain_rate = 0.0, plain_p = 0.0;
    printf("\n   t [s]  valve   q2 [L/s]  q4 [L/s]  q5 [L/s]  p1 [bar]  p2 [bar]  p4 [bar]\n");
    long steps = (long)(T_END / DT + 0.5);
    for (long step = 0; ok && step <= steps; ++step) {
        double t = step * DT, vdot[N];
        ok = cdyn_dae_rhs(dae, t, y, vdot) == CDYN_OK && cdyn_dae_last_state(dae, v, vdot) == CDYN_OK;
        if (!ok) break;
        worst_balance = fmax(worst_balance, balance_error(t, v));
        if (v[PIPES + 1] > p2_peak) {
            p2_peak = v[PIPES + 1];
            t_peak = t;
        }
        if (step % (long)(SAMPLE / DT + 0.5) == 0) {
            int s = (int)(step / (long)(SAMPLE / DT + 0.5));
            memcpy(y_rk4 + (size_t)s * ny, y, sizeof(double) * (size_t)ny);
            double qdot[PIPES], p[JUNCTIONS], ref_qdot[PIPES], ref_p[JUNCTIONS];
            ok = nullspace_reference(ns, &net, t, v, ref_qdot, ref_p);
            if (!ok) break;
            for (int k = 0; k < PIPES; ++k) qdot[k] = ref_qdot[k] - vdot[k];
            for (int j = 0; j < JUNCTIONS; ++j) p[j] = ref_p[j] - v[PIPES + j];
            worst_rate = fmax(worst_rate, max_abs(PIPES, qdot) / max_abs(PIPES, vdot));
            worst_p = fmax(worst_p, max_abs(JUNCTIONS, p) / max_abs(JUNCTIONS, v + PIPES));
            double w[N], wdot[N];
            plain_ok = plain_ok && cdyn_dae_rhs(plain, t, y, wdot) == CDYN_OK &&
                       cdyn_dae_last_state(plain, w, wdot) == CDYN_OK;
            for (int k = 0; plain_ok && k < PIPES; ++k) qdot[k] = ref_qdot[k] - wdot[k];
            for (int j = 0; plain_ok && j < JUNCTIONS; ++j) p[j] = ref_p[j] - w[PIPES + j];
            if (plain_ok) {
                plain_rate = fmax(plain_rate, max_abs(PIPES, qdot) / max_abs(PIPES, wdot));
                plain_p = fmax(plain_p, max_abs(JUNCTIONS, p) / max_abs(JUNCTIONS, w + PIPES));
            }
            printf("%8.2f  %5.3f  %8.4f  %8.4f  %8.4f  %8.4f  %8.4f  %8.4f\n", t, opening(t),
                   v[2] * 1e3, v[4] * 1e3, v[5] * 1e3, v[PIPES] * 1e-5, v[PIPES + 1] * 1e-5,
                   v[PIPES + 3] * 1e-5);
        }
        if (step < steps) ok = rk4_step(dae, t, y, ny);
    }
    if (!ok) {
        fprintf(stderr, "looped_network: the run failed: %s\n", cdyn_dae_last_error(dae));
        return 1;
    }
    printf("\nRK4, dt = %.0e s, %ld steps: p2 peaks at %.4f bar at t = %.3f s (valve "
           "opening %.3f)\n",
           DT, steps, p2_peak * 1e-5, t_peak, opening(t_peak));
    printf("balances at every step: %.2e of the flow scale (limit %.0e)\n", worst_balance,
           BALANCE_TOL);
    printf("against cdyn_nullspace (W q = b(t), pressures as multipliers): rates %.2e, "
           "pressures %.2e (limits %.0e, %.0e)\n",
           worst_rate, worst_p, RATE_TOL, P_TOL);
    printf("the same without dF/dt (cdyn's checked differences in t): %srates %.2e, "
           "pressures %.2e (limit %.0e)\n",
           plain_ok ? "" : "FAILED, ", plain_rate, plain_p, PLAIN_TOL);
    int pass = split_ok && worst_balance <= BALANCE_TOL && worst_rate <= RATE_TOL &&
               worst_p <= P_TOL && plain_ok && plain_rate <= PLAIN_TOL && plain_p <= PLAIN_TOL;

#ifdef LOOPED_NETWORK_CVODE
    {
        double y_cv[SAMPLES * N], y0[N], flow_scale = 0.0, worst_run = 0.0;
        long cv_steps = 0;
        for (int i = 0; i < ny; ++i) y0[i] = y_rk4[i];
        for (int s = 0; s < SAMPLES; ++s) flow_scale = fmax(flow_scale, max_abs(ny, y_rk4 + s * ny));
        /* CVODE starts from the same consistent state (a fresh evaluation
         * at t = 0 sets the warm start) */
        int cv_ok = cdyn_dae_rhs(dae, 0.0, y0, y_cv) == CDYN_OK &&
                    run_cvode(dae, y0, ny, y_cv, &cv_steps);
        for (int s = 0; cv_ok && s < SAMPLES; ++s)
            for (int i = 0; i < ny; ++i)
                worst_run = fmax(worst_run, fabs(y_cv[s * ny + i] - y_rk4[s * ny + i]));
        printf("CVODE (BDF, rtol 1e-8, cdyn's Jacobian): %s, %ld steps; against RK4 at the "
               "samples: %.2e of the flow scale (limit %.0e)\n",
               cv_ok ? "ran" : "FAILED", cv_steps, worst_run / flow_scale, RUN_TOL);
        pass = pass && cv_ok && worst_run <= RUN_TOL * flow_scale;
    }
#else
    printf("CVODE: cdyn was built without SUNDIALS; the CVODE run is skipped\n");
#endif
    printf("%s\n", pass ? "all checks passed" : "CHECK FAILED");
    cdyn_dae_free(dae);
    cdyn_dae_free(plain);
    cdyn_nullspace_free(ns);
    return pass ? 0 : 1;
}
