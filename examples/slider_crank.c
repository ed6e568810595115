/*
 * slider_crank.c - the planar slider-crank of THEORY T6.1 (3 coordinates,
 * 2 holonomic constraints, 1 degree of freedom) run for 10 s with every
 * formulation and stabilizer of THEORY T4, each integrated by the caller's
 * own fixed-step RK4 (dt = 1 ms).
 *
 * Model. Plane x-y, gravity g = 9.81 m/s^2 along -y. The crank turns about
 * the origin, angle theta1 from +x; its pin A = r (cos theta1, sin theta1).
 * The slider moves on the x axis at B = (s, 0). theta3 is the angle of the
 * rod vector A -> B from +x, so B = A + L (cos theta3, sin theta3):
 *
 *     Phi1 = r cos theta1 + L cos theta3 - s = 0          [m]
 *     Phi2 = r sin theta1 + L sin theta3     = 0          [m]
 *
 *     Phi_q = [ -1  -r sin theta1  -L sin theta3 ]         q = (s, theta1, theta3)
 *             [  0   r cos theta1   L cos theta3 ]
 *
 * Phi_t = 0 (scleronomic), and by T4.1, xi = -(Phi_q q')_q q':
 *
 *     xi1 = r cos theta1 theta1'^2 + L cos theta3 theta3'^2
 *     xi2 = r sin theta1 theta1'^2 + L sin theta3 theta3'^2
 *
 * Matching the published M and F (T6.1). Take a slider of mass m_s, a rod
 * of mass m_r whose centre of mass lies a distance a from B towards A, at
 * B - a (cos theta3, sin theta3), with inertia J_r about B, and a crank with
 * inertia J_c about the origin and centre of mass at r_c (cos theta1,
 * sin theta1). Lagrange's equations of T = 1/2 m_s s'^2 + 1/2 m_r |v_G|^2 +
 * 1/2 (J_r - m_r a^2) theta3'^2 + 1/2 J_c theta1'^2 and
 * V = m_c g r_c sin theta1 - m_r g a sin theta3 give, term by term,
 *     M11 = m_s + m_r = 5/2 kg          M13 = m_r a sin theta3 = sin(theta3)/4
 *     M22 = J_c = 3/400 kg m^2          M33 = J_r = 129/1000 kg m^2
 *     F1 = -m_r a cos(theta3) theta3'^2 (the only velocity term: the theta3
 *          row's Coriolis terms cancel)          = -(theta3')^2 cos(theta3)/4
 *     F2 = -m_c g r_c cos theta1 = -2943 cos(theta1)/10000 -> m_c r_c = 0.03 kg m
 *     F3 = +m_r g a cos theta3   = 981 cos(theta3)/400  -> m_r a = 1/4 kg m,
 * so the published M and F are matched exactly, with the same g = 9.81 in
 * both gravity terms and m_r a = 1/4 appearing consistently in M13, F1, F3.
 * The pin distances r and L do not occur in M or F (only in Phi), so they
 * are a choice: a uniform crank bar (J_c = m_c r^2/3, r_c = r/2) fits J_c and
 * m_c r_c exactly with r = 3/8 m, m_c = 0.16 kg; for the rod, m_r = 1/2 kg,
 * a = 1/2 m (centre of mass at mid-rod, so L = 1 m), m_s = 2 kg and a
 * central inertia 129/1000 - 1/8 = 0.004 kg m^2 (less than the 0.042 of a
 * uniform bar: mass concentrated near the middle; a uniform rod would need
 * L = 0.774 m). L/r = 8/3 > 1, so the crank turns fully. F has no damping
 * and Phi_t = 0, so the constraint forces do no work: the energy
 * E = 1/2 q'^T M q' + V is conserved and its drift is a diagnostic.
 *
 * The multipliers (M q'' + Phi_q^T lambda = F, T4.4) are the force the
 * crank exerts on the rod at the pin A: Phi_q^T lambda on the rod's
 * coordinates is minus the generalized force of (Fx, Fy) = lambda at A,
 * and on theta1 it is that of -lambda at the crank's pin.
 *
 * Initial state: theta1 = 0, crank speed omega0 = 4 pi rad/s; the
 * constraints give theta3 = 0, s = r + L and, from Phi_q q' = 0,
 * theta3' = -r omega0 / L, s' = 0. On the manifold V = 1.214 sin(theta1) J,
 * while E(0) = 2.02 J: the crank goes over the top, about 0.7 rev/s.
 *
 * Phi_q has full rank 2 everywhere (its theta3 column has norm L, its
 * (s, theta3) block determinant -L cos theta3 != 0), so the pseudo-inverse
 * form (T4.7) gives the KKT multipliers: its row must equal Baumgarte's.
 * Partitioning (T4.10): the coordinates are chosen and watched in the
 * chart frame of cdyn_mbs_partition_quality() (Phi_q's history and the
 * masses, 2.5 kg of slider against a crank of 0.0075 kg m^2): the slider
 * s is independent away from the dead centres, where its chart folds
 * (d theta1 / ds grows without bound), and the crank angle near them
 * (from theta1 = 0 the rod angle for 11 ms first). The repartitioning code
 * below, run on cdyn_mbs_partition_event, switches 27 times in 10 s. (With
 * the crank angle independent throughout, whose dependent block [-1 -L sin
 * theta3; 0 L cos theta3] never degenerates, |theta3| <= asin(r/L) = 22
 * deg, theta1 stays within 5.5e-6 rad of the projected run; with the
 * default switching, within 3.4e-5.)
 *
 * Checks and their tolerances (exit status 1 if one fails):
 *  - the projected KKT run (T4.9, Newton residual 1e-12) keeps
 *    |Phi| <= 1e-10 m after every step;
 *  - every other run follows theta1(t) of the projected run within
 *    THETA_TOL = 1e-3 rad at all 10 ms samples (the unstabilized one over
 *    the first second only: its |Phi| grows like t^2, 1e-7 m at 1 s and
 *    7e-6 m at 10 s). The budget: (i) the runs differ by their RK4
 *    truncation errors, measured 8e-5 rad at 10 s for Baumgarte (5e-6 with
 *    dt/2, 3e-7 with dt/4: the dt^4 of RK4, i.e. no formulation error);
 *    a 1-DOF conservative motion turns an energy error dE into a phase error
 *    ~ theta1 dE / (2 E_kin,min) = 44 rad * 3e-6 J / 1.6 J = 8e-5 rad, as
 *    measured. (ii) The penalty form has a model error O(1/alpha) (see
 *    configure()): 3.3e3/alpha rad at 10 s, 3e-4 rad for alpha = 1e7 kg.
 *    1e-3 rad is three times the largest of these and 300 times below the
 *    0.33 rad of a penalty that is too soft (alpha = 1e4 kg).
 *
 * Long run (docs/long_runs.md): `slider_crank --long STEPS` integrates only
 * the projected KKT run (mass metric, as above) for STEPS fixed RK4 steps of
 * dt = 1 ms, with constant memory and no per-step output or files. It checks
 * |Phi| <= 1e-10 m after every projection and that every value stays
 * finite, and reports the energy drift relative to E(0), the Newton
 * iterations of the projections and the wall time per step; exit status 1
 * if a check fails or a cdyn call fails.
 *
 * usage: slider_crank [output-dir]   (CSV, and a PNG if gnuplot is found)
 *        slider_crank --long STEPS [output-dir]   (summary only, no files)
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <cdyn/mbs.h>

#include "slider_crank_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { RUN_LAGRANGE, RUN_BAUMGARTE, RUN_GENERALIZED, RUN_PSEUDOINVERSE, RUN_PENALTY,
       RUN_PROJECTED, RUN_PARTITION, RUN_COUNT };

static const double PI = 3.14159265358979323846;
static const double GRAVITY = 9.81;   /* m/s^2 */
static const double T_END = 10.0, DT = 1e-3, SAMPLE = 0.01; /* s */
static const double THETA_TOL = 1e-3; /* agreement of theta1 [rad], see above */
static const double PHI_TOL = 1e-10;  /* |Phi| of the projected run [m] */
#define SAMPLES 1000                  /* T_END / SAMPLE */

/* E = 1/2 q'^T M q' + V, V = m_c g r_c sin theta1 - m_r g a sin theta3 [J] */
static double energy(const double *y)
{
    double M[N * N], Mv[N] = {0.0, 0.0, 0.0}, e = 0.0;
    const double *v = y + N;
    mass(0.0, y, M, N, NULL);
    for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i) Mv[i] += M[i + j * N] * v[j];
    for (int i = 0; i < N; ++i) e += 0.5 * v[i] * Mv[i];
    return e + 0.03 * GRAVITY * sin(y[TH1]) - 0.25 * GRAVITY * sin(y[TH3]);
}

/* ||Phi||_inf [m] and ||Phi_q q'||_inf [m/s] from the callbacks */
static void residuals(const double *y, double *position, double *velocity)
{
    double P[M_CON], J[M_CON * N];
    phi(0.0, y, P, NULL);
    jacobian(0.0, y, J, M_CON, NULL);
    *position = *velocity = 0.0;
    for (int i = 0; i < M_CON; ++i) {
        double v = 0.0;
        for (int j = 0; j < N; ++j) v += J[i + j * M_CON] * y[N + j];
        *position = fmax(*position, fabs(P[i]));
        *velocity = fmax(*velocity, fabs(v));
    }
}

/* ---- the caller's integrator: classic RK4 on y (or z) ------------------- */

typedef cdyn_status (*rhs_fn)(cdyn_mbs *mbs, double t, const double *y, double *ydot);

static cdyn_status rk4_step(rhs_fn f, cdyn_mbs *mbs, int dim, double t, double *y, double dt)
{
    double k1[NY], k2[NY], k3[NY], k4[NY], stage[NY];
    cdyn_status st = f(mbs, t, y, k1);
    for (int i = 0; i < dim; ++i) stage[i] = y[i] + 0.5 * dt * k1[i];
    if (!st) st = f(mbs, t + 0.5 * dt, stage, k2);
    for (int i = 0; i < dim; ++i) stage[i] = y[i] + 0.5 * dt * k2[i];
    if (!st) st = f(mbs, t + 0.5 * dt, stage, k3);
    for (int i = 0; i < dim; ++i) stage[i] = y[i] + dt * k3[i];
    if (!st) st = f(mbs, t + dt, stage, k4);
    if (st) return st;
    for (int i = 0; i < dim; ++i) y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return CDYN_OK;
}

/* ---- one run per formulation ---------------------------------------------- */

typedef struct {
    const char *name, *slug;
    double theta1[SAMPLES + 1], s[SAMPLES + 1], phi[SAMPLES + 1]; /* at the samples */
    double max_phi, max_phidot, energy_drift, reaction[M_CON], y_end[NY];
    int repartitions;
} run_result;

static run_result runs[RUN_COUNT];

static int fail(cdyn_mbs *mbs, const run_result *run, const char *what, cdyn_status st)
{
    fprintf(stderr, "slider_crank: %s: %s: %s: %s\n", run->name, what, cdyn_status_string(st),
            cdyn_mbs_last_error(mbs));
    return 0;
}

/* Bookkeeping of the state y at step `step` (t = step * DT). */
static void record(run_result *run, int step, const double *y, double e0)
{
    double position, velocity;
    residuals(y, &position, &velocity);
    run->max_phi = fmax(run->max_phi, position);
    run->max_phidot = fmax(run->max_phidot, velocity);
    run->energy_drift = fmax(run->energy_drift, fabs(energy(y) - e0));
    const int per_sample = (int)lround(SAMPLE / DT);
    if (step % per_sample == 0) {
        int k = step / per_sample;
        run->theta1[k] = y[TH1];
        run->s[k] = y[S];
        run->phi[k] = position;
    }
}

/* Formulation, stabilizer and penalty of each run (THEORY T4.4-T4.10). */
static cdyn_status configure(cdyn_mbs *mbs, int kind)
{
    cdyn_constraint *c = cdyn_mbs_constraint(mbs);
    /* T4.6: per constraint k_i, the gains of seed 004 (T6.2): K_D = diag(20,
     * 10), K_P = diag(100, 25), time constants 0.1 s and 0.2 s */
    const double k[M_CON] = {10.0, 5.0};
    /* T4.8: constraint masses alpha [kg]. The penalty form meets
     * Phi_q q'' = s only up to lambda/alpha: with the gains the pin acts as a
     * spring-damper (alpha K_P, alpha K_D) that dissipates energy, so theta1
     * lags by ~3.3e3/alpha rad at 10 s (measured: 0.33 rad at alpha = 1e4,
     * 3.3e-3 at 1e6). Large alpha costs rounding in the Cholesky of
     * M + alpha Phi_q^T Phi_q (condition ~ alpha |Phi_q|^2 / min eig M, M22 =
     * 0.0075 kg m^2). Balancing the model error m_eff/alpha (m_eff = 2.5 kg,
     * the mass the pin sees along x) against alpha |Phi_q|^2 eps / 0.0075
     * gives alpha ~ sqrt(2.5 * 0.0075 / (2 * 2.2e-16)) ~ 7e6: alpha = 1e7 kg
     * (at 1e10 the error grows again). The seed's 3...50 (T4.8) only bounds
     * |Phi|; it does not reproduce the trajectory. */
    const double alpha[M_CON] = {1e7, 1e7};
    cdyn_status st = cdyn_mbs_set_time_terms(mbs, phi_t, xi);
    switch (kind) {
    case RUN_BAUMGARTE: /* T4.5: a = b = 5 1/s, critically damped at 5 1/s */
    case RUN_PSEUDOINVERSE:
        if (!st) st = cdyn_constraint_set_baumgarte(c, 5.0, 5.0);
        if (!st && kind == RUN_PSEUDOINVERSE)
            st = cdyn_mbs_set_formulation(mbs, CDYN_MBS_PSEUDOINVERSE);
        break;
    case RUN_GENERALIZED: if (!st) st = cdyn_constraint_set_critical_gains(c, k); break;
    case RUN_PENALTY:
        if (!st) st = cdyn_constraint_set_critical_gains(c, k);
        if (!st) st = cdyn_constraint_set_penalty(c, alpha);
        if (!st) st = cdyn_mbs_set_formulation(mbs, CDYN_MBS_PENALTY);
        break;
    case RUN_PROJECTED: /* T4.9 in the kinetic-energy metric (m and rad mixed otherwise) */
        if (!st) st = cdyn_mbs_set_projection_metric(mbs, CDYN_PROJECT_MASS);
        break;
    default: break; /* plain KKT (T4.4) without stabilization */
    }
    return st;
}

static int simulate(int kind, const double *y0)
{
    run_result *run = &runs[kind];
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, &st);
    if (!mbs) {
        fprintf(stderr, "slider_crank: cdyn_mbs_create: %s\n", cdyn_status_string(st));
        return 0;
    }
    int ok = (st = cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL)) == CDYN_OK &&
             (st = configure(mbs, kind)) == CDYN_OK;
    if (!ok) fail(mbs, run, "setup", st);
    const int steps = (int)lround(T_END / DT);
    const double e0 = energy(y0);
    double y[NY], z[NY], zdot[NY];
    for (int i = 0; i < NY; ++i) y[i] = y0[i];
    if (kind != RUN_PARTITION) {
        for (int step = 0; ok && step <= steps; ++step) {
            double t = step * DT;
            record(run, step, y, e0);
            if (step == steps) break;
            if ((st = rk4_step(cdyn_mbs_rhs, mbs, NY, t, y, DT)) != CDYN_OK)
                ok = fail(mbs, run, "RK4 step", st);
            else if (kind == RUN_PROJECTED && (st = cdyn_mbs_project(mbs, t + DT, y)) != CDYN_OK)
                ok = fail(mbs, run, "cdyn_mbs_project", st);
        }
        /* the reactions at the final state */
        if (ok && (st = cdyn_mbs_rhs(mbs, T_END, y, zdot)) != CDYN_OK)
            ok = fail(mbs, run, "final rhs", st);
    } else {
        /* T4.10: integrate z = [q_ind; q'_ind] only; the dependent ones come
         * from Newton on Phi = 0 and from Phi_q q' = 0 in every evaluation */
        ok = ok && ((st = cdyn_mbs_partition(mbs, 0.0, y)) == CDYN_OK ||
                    fail(mbs, run, "cdyn_mbs_partition", st));
        ok = ok && ((st = cdyn_mbs_partition_gather(mbs, y, z)) == CDYN_OK ||
                    fail(mbs, run, "partition_gather", st));
        for (int step = 0; ok && step <= steps; ++step) {
            double t = step * DT;
            /* one evaluation at the step's start updates the partition event;
             * the full state at the accepted (t, z) comes from partition_state */
            if ((st = cdyn_mbs_partition_rhs(mbs, t, z, zdot)) != CDYN_OK) {
                ok = fail(mbs, run, "partition_rhs", st);
                break;
            }
            if ((st = cdyn_mbs_partition_state(mbs, t, z, y)) != CDYN_OK) {
                ok = fail(mbs, run, "partition_state", st);
                break;
            }
            if (cdyn_mbs_partition_event(mbs)) { /* dependent block ill-conditioned */
                ++run->repartitions;
                if ((st = cdyn_mbs_partition(mbs, t, y)) != CDYN_OK ||
                    (st = cdyn_mbs_partition_gather(mbs, y, z)) != CDYN_OK) {
                    ok = fail(mbs, run, "repartition", st);
                    break;
                }
            }
            record(run, step, y, e0);
            if (step == steps) break;
            if ((st = rk4_step(cdyn_mbs_partition_rhs, mbs, 2 * (N - M_CON), t, z, DT)) !=
                CDYN_OK)
                ok = fail(mbs, run, "RK4 step", st);
        }
    }
    for (int i = 0; i < NY; ++i) run->y_end[i] = y[i];
    if (ok && (st = cdyn_mbs_last_reactions(mbs, NULL, run->reaction)) != CDYN_OK)
        ok = fail(mbs, run, "cdyn_mbs_last_reactions", st);
    if (ok && kind == RUN_PARTITION) {
        int independent[N - M_CON];
        cdyn_mbs_partition_coordinates(mbs, independent, NULL);
        static const char *const names[N] = {"s", "theta1", "theta3"};
        printf("partitioning: independent coordinate %s, %d repartition(s) in %.0f s\n",
               names[independent[0]], run->repartitions, T_END);
    }
    cdyn_mbs_free(mbs);
    return ok;
}

/* largest |theta1_run - theta1_ref| over the samples with t <= t_max [rad] */
static double theta1_deviation(const run_result *run, const run_result *ref, double t_max)
{
    double worst = 0.0;
    for (int k = 0; k <= SAMPLES && k * SAMPLE <= t_max + 1e-9; ++k)
        worst = fmax(worst, fabs(run->theta1[k] - ref->theta1[k]));
    return worst;
}

/* ---- the long run: projected KKT only, STEPS steps, constant memory ------ */

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int count_nonfinite(const double *v, int n)
{
    int count = 0;
    for (int i = 0; i < n; ++i) count += !isfinite(v[i]);
    return count;
}

static int long_fail(cdyn_mbs *mbs, long step, const char *what, cdyn_status st)
{
    cdyn_newton_report report;
    cdyn_newton_get_report(cdyn_mbs_newton(mbs), &report);
    fprintf(stderr, "slider_crank: long run: step %ld (t = %.3f s): %s: %s: %s "
            "(last projection: %d Newton iterations, residual %.2e m)\n",
            step, (double)step * DT, what, cdyn_status_string(st), cdyn_mbs_last_error(mbs),
            report.iterations, report.residual_norm);
    return 0;
}

/* KKT + projection in the mass metric (RUN_PROJECTED) for `steps` RK4
 * steps: max |Phi| after projection, non-finite values, energy drift,
 * projection Newton iterations and wall time; a progress line per tenth.
 * Returns 1 if every check passed. */
static int long_run(long steps, const double *y0)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, &st);
    if (!mbs) {
        fprintf(stderr, "slider_crank: cdyn_mbs_create: %s\n", cdyn_status_string(st));
        return 0;
    }
    int ok = (st = cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL)) == CDYN_OK &&
             (st = configure(mbs, RUN_PROJECTED)) == CDYN_OK;
    if (!ok) long_fail(mbs, 0, "setup", st);
    cdyn_newton *nt = cdyn_mbs_newton(mbs);

    const double e0 = energy(y0);
    double y[NY], position, velocity;
    for (int i = 0; i < NY; ++i) y[i] = y0[i];
    residuals(y, &position, &velocity);
    double max_phi = position, max_phidot = velocity, max_de = 0.0, last_de = 0.0;
    double max_phi_t = 0.0, part_phi = 0.0;
    long nonfinite = 0, newton_total = 0, noconv = 0, done = 0;
    double noconv_residual = 0.0; /* largest Newton residual of those projections [m] */
    int newton_max = 0;
    const long part = steps >= 10 ? steps / 10 : steps;

    printf("slider-crank long run: KKT + projection (mass metric), RK4 dt = %.0e s, %ld steps "
           "(t_end = %.0f s); E(0) = %.6f J\n", DT, steps, (double)steps * DT, e0);
    const double start = wall_seconds();
    for (long step = 1; ok && step <= steps; ++step) {
        double t = (double)(step - 1) * DT;
        if ((st = rk4_step(cdyn_mbs_rhs, mbs, NY, t, y, DT)) != CDYN_OK) {
            ok = long_fail(mbs, step, "RK4 step (cdyn_mbs_rhs)", st);
            break;
        }
        st = cdyn_mbs_project(mbs, t + DT, y);
        if (st == CDYN_ERR_NOCONV) {
            /* a failed cdyn call (the run fails), but y holds the best
             * iterate (mbs.h): counted, and the run goes on so that the
             * summary shows how often and how far */
            if (noconv++ == 0) long_fail(mbs, step, "cdyn_mbs_project (first time)", st);
        } else if (st != CDYN_OK) {
            ok = long_fail(mbs, step, "cdyn_mbs_project", st);
            break;
        }
        cdyn_newton_report report;
        cdyn_newton_get_report(nt, &report);
        newton_total += report.iterations;
        if (report.iterations > newton_max) newton_max = report.iterations;
        if (st == CDYN_ERR_NOCONV) noconv_residual = fmax(noconv_residual, report.residual_norm);

        double e = energy(y);
        int bad = count_nonfinite(y, NY) + !isfinite(e);
        if (bad) {
            nonfinite += bad;
            fprintf(stderr, "slider_crank: long run: step %ld (t = %.3f s): %d non-finite "
                    "value(s) in the state or energy\n", step, t + DT, bad);
            ok = 0;
            break;
        }
        residuals(y, &position, &velocity);
        if (position > max_phi) max_phi = position, max_phi_t = t + DT;
        max_phidot = fmax(max_phidot, velocity);
        part_phi = fmax(part_phi, position);
        last_de = e - e0;
        max_de = fmax(max_de, fabs(last_de));
        done = step;
        if (step % part == 0) {
            double elapsed = wall_seconds() - start;
            printf("  step %9ld  t = %6.0f s  theta1 = %10.3f rad  max|Phi| (this tenth) %8.2e m"
                   "  (E - E0)/E0 %+9.2e  NOCONV %ld  %.3g steps/s\n",
                   step, t + DT, y[TH1], part_phi, last_de / e0, noconv,
                   (double)step / elapsed);
            part_phi = 0.0;
            fflush(stdout); /* progress visible when redirected */
        }
    }
    const double elapsed = wall_seconds() - start;
    cdyn_mbs_free(mbs);

    const int pass = ok && noconv == 0 && max_phi <= PHI_TOL && nonfinite == 0;
    printf("\nsteps completed: %ld of %ld\n", done, steps);
    printf("max |Phi| after projection: %.2e m (at t = %.3f s; limit %.0e m)\n", max_phi,
           max_phi_t, PHI_TOL);
    printf("max |Phi_q q'| after projection: %.2e m/s\n", max_phidot);
    printf("non-finite values: %ld\n", nonfinite);
    printf("energy drift: max |E - E0| = %.3e J (%.3e of E0), final E - E0 = %+.3e J "
           "(%+.3e of E0)\n", max_de, max_de / e0, last_de, last_de / e0);
    printf("projection Newton: at most %d iterations (cap 10), %.3f on average; %ld "
           "projection(s) returned CDYN_ERR_NOCONV", newton_max,
           done > 0 ? (double)newton_total / (double)done : 0.0, noconv);
    if (noconv) printf(" (largest residual of those %.3e m)", noconv_residual);
    printf("\n");
    printf("wall time: %.2f s, %.3f us per step, %.4g steps/s\n", elapsed,
           done > 0 ? 1e6 * elapsed / (double)done : 0.0,
           elapsed > 0.0 ? (double)done / elapsed : 0.0);
    printf("checks: no failed cdyn call, |Phi| <= %.0e m after every step, no NaN/Inf: %s\n",
           PHI_TOL, pass ? "passed" : "FAILED");
    if (noconv)
        fprintf(stderr, "slider_crank: long run: %ld projection(s) returned CDYN_ERR_NOCONV\n",
                noconv);
    if (ok && max_phi > PHI_TOL)
        fprintf(stderr, "slider_crank: long run: max |Phi| = %.2e m > %.0e m (t = %.3f s)\n",
                max_phi, PHI_TOL, max_phi_t);
    return pass;
}

/* STEPS: a positive decimal integer */
static int parse_steps(const char *text, long *steps)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < 1) return 0;
    *steps = value;
    return 1;
}

/* The hand-written Phi_q against differences of Phi (cdyn_mbs_check_jacobian)
 * at the start and at a generic pose: a wrong entry would be named. */
static int check_model(const double *q0)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, &st);
    if (!mbs) return 0;
    const double generic[N] = {1.2, 0.7, -0.25}; /* s [m], theta1, theta3 [rad] */
    const double *poses[2] = {q0, generic};
    int ok = (st = cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL)) == CDYN_OK;
    for (int k = 0; ok && k < 2; ++k) {
        cdyn_jacobian_check check;
        ok = (st = cdyn_mbs_check_jacobian(mbs, 0.0, poses[k], &check)) == CDYN_OK;
        if (ok)
            printf("Phi_q check at %s pose: worst relative disagreement %.1e%s\n",
                   k == 0 ? "the initial" : "a generic", check.worst,
                   check.suspect ? " (suspect)" : "");
        ok = ok && !check.suspect;
    }
    if (!ok) fprintf(stderr, "slider_crank: Phi_q check failed: %s\n", cdyn_mbs_last_error(mbs));
    cdyn_mbs_free(mbs);
    return ok;
}

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : ".";
    const double omega0 = 4.0 * PI; /* rad/s */
    /* theta1 = 0: theta3 = 0, s = r + L; Phi_q q' = 0: s' = 0, theta3' = -r omega0 / L */
    const double y0[NY] = {CRANK + ROD, 0.0, 0.0, 0.0, omega0, -CRANK * omega0 / ROD};
    if (argc > 1 && strcmp(argv[1], "--long") == 0) {
        long steps;
        if (argc < 3 || argc > 4 || !parse_steps(argv[2], &steps)) {
            fprintf(stderr, "usage: slider_crank [output-dir]\n"
                            "       slider_crank --long STEPS [output-dir]\n");
            return EXIT_FAILURE;
        }
        /* the output directory is accepted for symmetry; the long run writes no files */
        return long_run(steps, y0) ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    static const char *const names[RUN_COUNT][2] = {
        {"KKT, unstabilized", "lagrange"},       {"KKT + Baumgarte a=b=5", "baumgarte"},
        {"KKT + gen. Baumgarte k=10,5", "generalized"},
        {"pseudo-inverse + Baumgarte", "pseudoinverse"},
        {"penalty a=1e7 + gen. Baumg.", "penalty"},
        {"KKT + projection", "projected"}, {"coordinate partitioning", "partition"}};

    printf("slider-crank (THEORY T6.1): r = %.3f m, L = %.3f m, g = %.2f m/s^2; "
           "theta1(0) = 0, omega0 = %.4f rad/s, E(0) = %.6f J\n",
           CRANK, ROD, GRAVITY, omega0, energy(y0));
    printf("RK4, dt = %.0e s, %.0f s\n", DT, T_END);
    if (!check_model(y0)) return EXIT_FAILURE;
    for (int kind = 0; kind < RUN_COUNT; ++kind) {
        runs[kind].name = names[kind][0];
        runs[kind].slug = names[kind][1];
        if (!simulate(kind, y0)) return EXIT_FAILURE;
    }

    const run_result *ref = &runs[RUN_PROJECTED];
    printf("\n%-28s %9s %10s %9s %9s %9s %9s %9s %10s\n", "formulation", "s [m]",
           "theta1", "max|Phi|", "max|Phi'|", "Fx [N]", "Fy [N]", "max|dE|", "max|dth1|");
    printf("%-28s %9s %10s %9s %9s %9s %9s %9s %10s\n", "(final values at t = 10 s)", "",
           "[rad]", "[m]", "[m/s]", "", "", "[J]", "[rad]");
    for (int kind = 0; kind < RUN_COUNT; ++kind) {
        const run_result *run = &runs[kind];
        printf("%-28s %9.6f %10.6f %9.2e %9.2e %9.4f %9.4f %9.2e %10.2e\n", run->name,
               run->y_end[S], run->y_end[TH1], run->max_phi, run->max_phidot, run->reaction[0],
               run->reaction[1], run->energy_drift, theta1_deviation(run, ref, T_END));
    }
    printf("(Fx, Fy: force of the crank on the rod at the crank pin; dth1: theta1 minus the "
           "projected KKT run at the 10 ms samples)\n");
    printf("unstabilized KKT over the first second: max|dth1| = %.2e rad\n",
           theta1_deviation(&runs[RUN_LAGRANGE], ref, 1.0));

    /* CSV: t, then theta1, s, |Phi| of each run (columns 2 + 3 k ...) */
    char path[1024];
    snprintf(path, sizeof path, "%s/slider_crank.csv", out_dir);
    FILE *csv = fopen(path, "w");
    if (csv) {
        fprintf(csv, "t_s");
        for (int kind = 0; kind < RUN_COUNT; ++kind)
            fprintf(csv, ",theta1_%s_rad,s_%s_m,phi_%s_m", runs[kind].slug, runs[kind].slug,
                    runs[kind].slug);
        fprintf(csv, "\n");
        for (int k = 0; k <= SAMPLES; ++k) {
            fprintf(csv, "%.3f", k * SAMPLE);
            for (int kind = 0; kind < RUN_COUNT; ++kind)
                fprintf(csv, ",%.12f,%.12f,%.3e", runs[kind].theta1[k], runs[kind].s[k],
                        runs[kind].phi[k]);
            fprintf(csv, "\n");
        }
        fclose(csv);
        printf("CSV: %s\n", path);
    }

    /* the checks (tolerances justified in the header) */
    int pass = 1;
    for (int kind = 0; kind < RUN_COUNT; ++kind) {
        if (kind == RUN_PROJECTED) continue;
        double t_max = kind == RUN_LAGRANGE ? 1.0 : T_END;
        double deviation = theta1_deviation(&runs[kind], ref, t_max);
        if (deviation > THETA_TOL) {
            fprintf(stderr, "slider_crank: %s: theta1 differs from the projected run by %.2e rad "
                    "(t <= %.0f s; limit %.0e rad)\n", runs[kind].name, deviation, t_max,
                    THETA_TOL);
            pass = 0;
        }
    }
    if (ref->max_phi > PHI_TOL) {
        fprintf(stderr, "slider_crank: projected run: max |Phi| = %.2e m > %.0e m\n",
                ref->max_phi, PHI_TOL);
        pass = 0;
    }
    printf("checks: theta1 within %.0e rad of the projected run (unstabilized: first 1 s), "
           "projected |Phi| <= %.0e m: %s\n", THETA_TOL, PHI_TOL, pass ? "passed" : "FAILED");

    if (pass && csv && system("command -v gnuplot > /dev/null 2>&1") == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"set terminal pngcairo size 900,650; set output '%s/slider_crank.png';"
                 " set datafile separator ','; set key outside; set xlabel 't [s]';"
                 " set multiplot layout 2,1 title 'Slider-crank (THEORY T6.1), RK4 dt = 1 ms';"
                 " set ylabel 'slider s [m]'; plot [0:3] '%s' u 1:18 w l lw 2 t 'KKT + projection',"
                 " '' u 1:6 w l dt 2 t 'Baumgarte', '' u 1:15 every 5 w p pt 6 ps 0.6 t 'penalty',"
                 " '' u 1:21 every 5 w p pt 1 ps 0.6 t 'partitioning';"
                 " set ylabel '|Phi| [m]'; set logscale y; set format y '10^{%%T}';"
                 " plot [0:10] [1e-17:1e-4] '' u 1:4 w l lw 2 t 'KKT unstabilized', '' u 1:7 w l t 'Baumgarte',"
                 " '' u 1:10 w l t 'gen. Baumgarte', '' u 1:16 w l t 'penalty',"
                 " '' u 1:19 w l lc 'black' t 'KKT + projection', '' u 1:22 w l lc 'red' t 'partitioning';"
                 " unset multiplot\"",
                 out_dir, path);
        if (system(cmd) == 0) printf("figure: %s/slider_crank.png\n", out_dir);
    }
    if (!pass) {
        fprintf(stderr, "slider_crank: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
