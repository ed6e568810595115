/*
 * hydraulic_valve.c - a valve that closes and reopens in a network whose
 * orifice branches have no inertance: a DAE with a singular mass matrix
 * (THEORY T3, T6.3), integrated as a minimum-order ODE.
 *
 *   supply tank (p_s) --pipe 1, Q1--> junction (p_J) --valve a, Qa--> return tank (0)
 *                                                  \--orifice b, Qb--> return tank (0)
 *
 * Pipe 1 has inertance I1 = rho L / A and laminar resistance R1. The short
 * branches a and b are pure orifices (inertance neglected): their pressure
 * drop is k Q|Q| / s(t)^2, where s is the valve's opening (area over full
 * area; s = 1 for the fixed orifice b). Multiplying by s^2 keeps the
 * equation finite when the valve closes (s = 0). States
 * v = (Q1, Qa, Qb, p_J) in SI units (m^3/s and Pa: flows ~1e-3 beside
 * pressures ~1e5), and cdyn runs with its default settings: its rank
 * decisions and Newton tolerances do not depend on the units (printed
 * values are converted to L/s and bar for reading):
 *
 *   I1 Q1' = p_s - R1 Q1 - p_J                 (row 0, inertial)
 *        0 = s(t)^2 p_J - k_a Qa|Qa|           (row 1, valve a)
 *        0 = p_J - k_b Qb|Qb|                  (row 2, orifice b)
 *        0 = Q1 - Qa - Qb                       (row 3, continuity)
 *
 * M = diag(I1, 0, 0, 0) has rank 1: three hidden constraints, index 1 while
 * the valve is open. cdyn_dae integrates Q1 and solves (Qa, Qb, p_J) from
 * the constraints with Newton at every evaluation. When s = 0, row 1 reads
 * -k_a Qa|Qa| = 0: a double root at Qa = 0 where its Jacobian vanishes, so
 * Newton meets a double root there (THEORY T2.3, T2.5): it steps at full
 * length while the Jacobian is regular after equilibration, doubles the
 * step when the corrections shrink by two, and takes the SVD outer-inverse
 * path when the Jacobian is singular to the rank tolerance.
 *
 * Reference, computed here too: the same network with a small inertance eps
 * on rows 1 and 2 and a small junction compliance C_J on row 3, an ODE
 * M_eps v' = F(v, t) integrated by explicit RK4 with a small step. As eps and
 * C_J go to zero its solution approaches the DAE's (singular perturbation).
 *
 * Long run (docs/long_runs.md): `hydraulic_valve --cycles N` runs N valve
 * cycles (1 s each, RK4 dt = 1 ms) of the DAE alone: no references, no
 * files. Every evaluation must succeed within the Newton cap and leave the
 * continuity residual within 1e-9 of the steady flow; the junction pressure at
 * the end of each open phase is compared with the steady state by hand.
 * Exit status 1 on any violation.
 *
 * usage: hydraulic_valve [output-dir]   (CSV, and a PNG if gnuplot is found)
 *        hydraulic_valve --cycles N [output-dir]   (summary only, no files)
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <cdyn/dae.h>

#include "valve_network.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = VALVE_STATES, NEWTON_CAP = 20 /* cdyn_newton's default */ };
/* Continuity |Q1 - Qa - Qb| relative to the steady flow: the Newton
 * solve's default relative tolerance (1e-10) on each flow, with margin. */
static const double CONTINUITY_TOL = 1e-9;

/* Open-valve steady state by hand: p_J = k_a Qa^2 = k_b Qb^2, so
 * Q1 = Qa + Qb = c sqrt(p_J) with c = 1/sqrt(k_a) + 1/sqrt(k_b), and pipe 1
 * gives p_s - R1 c sqrt(p_J) = p_J: a quadratic in x = sqrt(p_J),
 * x^2 + R1 c x - p_s = 0, positive root x = 2 p_s / (R1 c + sqrt((R1 c)^2 + 4 p_s)). */
static double steady_junction_pressure(const network *net)
{
    double c = 1.0 / sqrt(net->k_valve) + 1.0 / sqrt(net->k_orifice), b = net->resistance * c;
    double x = 2.0 * net->p_supply / (b + sqrt(b * b + 4.0 * net->p_supply));
    return x * x;
}

/* The steady flow through pipe 1: Q1 = c sqrt(p_J). */
static double steady_flow(const network *net)
{
    double c = 1.0 / sqrt(net->k_valve) + 1.0 / sqrt(net->k_orifice);
    return c * sqrt(steady_junction_pressure(net));
}

/* ---- the reference: M_eps v' = F(v, t), explicit RK4 ------------------- */

typedef struct {
    const network *net;
    double mass[N]; /* diag(I1, eps, eps, C_J) */
} reference;

static void reference_rate(const reference *ref, double t, const double *v, double *rate)
{
    double F[N];
    valve_force(t, v, F, (void *)ref->net);
    for (int i = 0; i < N; ++i) rate[i] = F[i] / ref->mass[i];
}

static void reference_step(const reference *ref, double t, double *v, double dt)
{
    double k1[N], k2[N], k3[N], k4[N], stage[N];
    reference_rate(ref, t, v, k1);
    for (int i = 0; i < N; ++i) stage[i] = v[i] + 0.5 * dt * k1[i];
    reference_rate(ref, t + 0.5 * dt, stage, k2);
    for (int i = 0; i < N; ++i) stage[i] = v[i] + 0.5 * dt * k2[i];
    reference_rate(ref, t + 0.5 * dt, stage, k3);
    for (int i = 0; i < N; ++i) stage[i] = v[i] + dt * k3[i];
    reference_rate(ref, t + dt, stage, k4);
    for (int i = 0; i < N; ++i) v[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

/* ---- the DAE run -------------------------------------------------------- */

typedef struct {
    const network *net;
    int max_newton_iterations;
    long newton_svd_steps;        /* all Newton steps on the SVD path */
    long svd_steps_near_closure;  /* those while the valve is closing, closed or opening */
    double flow_scale;            /* the steady flow Q1 by hand [m^3/s] */
    double worst_continuity;      /* |Q1 - Qa - Qb| / flow_scale */
    /* gathered for the long run (--cycles) */
    double worst_continuity_t;    /* where the worst continuity residual occurred [s] */
    double worst_newton_residual; /* largest residual / tolerance of a converged solve */
    long evaluations, newton_iterations, backtracks;
    cdyn_status failed_status;    /* status of the failed evaluation (CDYN_OK: none) */
    double failed_t;              /* its time [s] */
} run_stats;

static int fail(cdyn_dae *dae, const char *what, cdyn_status st)
{
    fprintf(stderr, "hydraulic_valve: %s: %s: %s\n", what, cdyn_status_string(st),
            cdyn_dae_last_error(dae));
    return 0;
}

/* y' = f(t, y) through cdyn (THEORY T3.3), with the statistics the example
 * reports gathered after each evaluation. */
static int dae_rhs(cdyn_dae *dae, double t, double y, double *ydot, run_stats *stats)
{
    cdyn_status st = cdyn_dae_rhs(dae, t, &y, ydot);
    if (st != CDYN_OK) {
        stats->failed_status = st;
        stats->failed_t = t;
        return fail(dae, "cdyn_dae_rhs", st);
    }
    cdyn_newton_report report;
    cdyn_newton_get_report(cdyn_dae_newton(dae), &report);
    if (report.iterations > stats->max_newton_iterations)
        stats->max_newton_iterations = report.iterations;
    stats->newton_svd_steps += report.svd_steps;
    ++stats->evaluations;
    stats->newton_iterations += report.iterations;
    stats->backtracks += report.backtracks;
    if (report.residual_ratio > stats->worst_newton_residual)
        stats->worst_newton_residual = report.residual_ratio;
    double phase = fmod(t, stats->net->period);
    if (phase >= 0.3 && phase <= 0.7) stats->svd_steps_near_closure += report.svd_steps;
    double v[N];
    cdyn_dae_last_state(dae, v, NULL);
    double residual = fabs(v[Q1] - v[QA] - v[QB]) / stats->flow_scale;
    if (residual > stats->worst_continuity) {
        stats->worst_continuity = residual;
        stats->worst_continuity_t = t;
    }
    return 1;
}

/* One RK4 step; v_start (may be NULL) receives the full state at t, from
 * the first stage. */
static int dae_step(cdyn_dae *dae, double t, double *y, double dt, run_stats *stats,
                    double *v_start)
{
    double k1, k2, k3, k4;
    if (!dae_rhs(dae, t, *y, &k1, stats)) return 0;
    if (v_start) cdyn_dae_last_state(dae, v_start, NULL);
    if (!dae_rhs(dae, t + 0.5 * dt, *y + 0.5 * dt * k1, &k2, stats) ||
        !dae_rhs(dae, t + 0.5 * dt, *y + 0.5 * dt * k2, &k3, stats) ||
        !dae_rhs(dae, t + dt, *y + dt * k3, &k4, stats))
        return 0;
    *y += dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    return 1;
}

/* Set up M, the callbacks, the index check and the split at the initial
 * (open, at rest) state; prints what cdyn found. */
static int setup(cdyn_dae *dae, network *net, const double *v0)
{
    double M[N * N] = {0};
    M[Q1 + Q1 * N] = net->inertance;
    cdyn_status st = cdyn_dae_set_mass(dae, M, N);
    if (st == CDYN_OK) st = cdyn_dae_set_model(dae, valve_force, valve_jacobian, valve_time, net);
    if (st != CDYN_OK) return fail(dae, "setup", st);
    /* a state near the initial one with flow, where the index is generic */
    double v_probe[N] = {2e-3, 1.2e-3, 0.8e-3, 5e5};
    int index = -1;
    st = cdyn_dae_analyze(dae, 0.0, v_probe, &index);
    if (st != CDYN_OK) return fail(dae, "cdyn_dae_analyze", st);
    st = cdyn_dae_split(dae, 0.0, v_probe);
    if (st != CDYN_OK) return fail(dae, "cdyn_dae_split", st);
    int integrated[N], algebraic[N];
    cdyn_dae_split_states(dae, integrated, algebraic);
    static const char *const names[N] = {"Q1", "Qa", "Qb", "p_J"};
    printf("DAE index %d (hidden constraints: %d); integrated states %d (%s), algebraic "
           "states %d (%s, %s, %s)\n",
           index, cdyn_dae_constraints_at_level(dae, 0), cdyn_dae_rank(dae), names[integrated[0]],
           N - cdyn_dae_rank(dae), names[algebraic[0]], names[algebraic[1]],
           names[algebraic[2]]);
    if (index != 1) return 0;
    /* default settings: Newton capped at 20 iterations per evaluation, the
     * algebraic states solved to a relative 1e-10 */
    double v[N] = {v0[0], v0[1], v0[2], v0[3]};
    st = cdyn_dae_consistent(dae, 0.0, v);
    if (st != CDYN_OK) return fail(dae, "cdyn_dae_consistent", st);
    return 1;
}

/* How far the eps-reference may lag the DAE (its singular-perturbation
 * error). The worst case is the end of a closure: the reference's valve flow
 * relaxes at the rate 2 k_a Qa / eps, which vanishes with Qa. With the
 * quasi-static flow Qa_s = s c (c = sqrt(p_J / k_a) <= sqrt(p_s / k_a)) and
 * the smoothstep near its end, s ~ 3 u^2 (u = time left / ramp), the lag
 * eps dQa_s/dt / (2 k_a Qa_s) = eps / (k_a ramp u) reaches Qa_s itself when
 * u^3 = eps / (3 c k_a ramp): a lag of at most
 *     delta = 3 c (eps / (3 c k_a ramp))^(2/3)   in flow,
 * and 2 k_b Qb delta <= 2 sqrt(p_s k_b) delta in junction pressure (the
 * orifice b carries the flow that the lagging valve still passes). The error
 * thus shrinks like eps^(2/3): a reference with 8 eps must be about 4 times
 * further away. */
static void reference_tolerance(const network *net, double eps, double *flow, double *pressure)
{
    const double ramp = 0.1;
    double c = sqrt(net->p_supply / net->k_valve);
    double delta = 3.0 * c * pow(eps / (3.0 * c * net->k_valve * ramp), 2.0 / 3.0);
    *flow = 2.0 * delta;
    *pressure = 2.0 * 2.0 * sqrt(net->p_supply * net->k_orifice) * delta;
}

/* ---- the long run: N valve cycles of the DAE alone ------------------- */

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs `cycles` valve periods (RK4, dt = 1 ms) from rest and checks every
 * evaluation; the junction pressure at the end of each open phase (phase
 * 0.3 s, where the valve starts to close) is compared with the steady state
 * by hand: from rest in cycle 0 (reported), 0.6 s after a reopening in
 * every later cycle (checked, with the 1e-6 of the default run). A progress
 * line per tenth. Returns 1 if every check passed. */
static int cycles_run(long cycles)
{
    network net = make_network();
    const double dt = 1e-3, open_end = 0.3, p_tol = 1e-6;
    const long per_cycle = lround(net.period / dt), sample = lround(open_end / dt);
    const double v0[N] = {0.0, 0.0, 0.0, 0.0};
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(N, &st);
    if (!dae) {
        fprintf(stderr, "hydraulic_valve: cdyn_dae_create: %s\n", cdyn_status_string(st));
        return 0;
    }
    if (!setup(dae, &net, v0)) {
        cdyn_dae_free(dae);
        return 0;
    }
    const double p_hand = steady_junction_pressure(&net);
    run_stats stats = {.net = &net, .flow_scale = steady_flow(&net)};
    double y = v0[Q1], p_first = 0.0, p_worst = 0.0, p_part = 0.0, slowest = 0.0;
    long p_worst_cycle = -1, done = 0;
    const long part = cycles >= 10 ? cycles / 10 : cycles;
    int ok = 1;

    printf("valve long run: %ld cycles of %.0f s, RK4 dt = %.0e s, DAE only; steady p_J by "
           "hand %.6f bar\n", cycles, net.period, dt, p_hand * VALVE_BAR);
    const double start = wall_seconds();
    for (long c = 0; ok && c < cycles; ++c) {
        const double cycle_start = wall_seconds();
        for (long k = 0; k < per_cycle; ++k) {
            double t = (double)(c * per_cycle + k) * dt, v[N];
            if (!(ok = dae_step(dae, t, &y, dt, &stats, k == sample ? v : NULL))) break;
            if (k == sample) {
                double rel = fabs(v[PJ] - p_hand) / p_hand;
                if (c == 0) {
                    p_first = rel;
                } else {
                    if (rel > p_worst) p_worst = rel, p_worst_cycle = c;
                    p_part = fmax(p_part, rel);
                }
            }
        }
        if (!ok) break;
        const double cycle_time = wall_seconds() - cycle_start;
        slowest = fmax(slowest, cycle_time);
        done = c + 1;
        if (done % part == 0) {
            printf("  cycle %6ld  t = %6.0f s  max Newton iterations %2d  worst continuity "
                   "%.2e (rel.)  worst p_J rel. diff (this tenth) %.1e  %.3f ms/cycle\n",
                   done, (double)done * net.period, stats.max_newton_iterations,
                   stats.worst_continuity, p_part, 1e3 * (wall_seconds() - start) / (double)done);
            p_part = 0.0;
            fflush(stdout); /* progress visible when redirected */
        }
    }
    const double elapsed = wall_seconds() - start;
    if (!ok) {
        double t = stats.failed_t, s, ds;
        cdyn_newton_report report;
        cdyn_newton_get_report(cdyn_dae_newton(dae), &report);
        valve_opening(&net, t, &s, &ds);
        fprintf(stderr, "hydraulic_valve: long run: failed evaluation at t = %.6f s (cycle %ld, "
                "phase %.6f s, opening %.6f): %s; Newton: %d iterations, %d SVD steps, "
                "%d backtracks, residual %.2e\n", t, (long)floor(t / net.period),
                fmod(t, net.period), s, cdyn_status_string(stats.failed_status),
                report.iterations, report.svd_steps, report.backtracks, report.residual_norm);
    }
    const long failures = stats.failed_status != CDYN_OK;
    printf("\ncycles completed: %ld of %ld; failed evaluations: %ld (of %ld)\n", done, cycles,
           failures, stats.evaluations + failures);
    printf("Newton: at most %d iterations per evaluation (cap %d), %.3f on average, %ld "
           "backtracks; %ld steps took the SVD path, %ld of them around the closures; %ld "
           "rate solves used the SVD\n", stats.max_newton_iterations, NEWTON_CAP,
           stats.evaluations ? (double)stats.newton_iterations / (double)stats.evaluations : 0.0,
           stats.backtracks, stats.newton_svd_steps, stats.svd_steps_near_closure,
           cdyn_dae_svd_rate_solves(dae));
    printf("worst continuity residual |Q1 - Qa - Qb| / Q1_steady: %.2e at t = %.3f s (limit "
           "%.0e); largest Newton residual / tolerance %.2e\n", stats.worst_continuity,
           stats.worst_continuity_t, CONTINUITY_TOL, stats.worst_newton_residual);
    printf("junction pressure at the end of the open phases vs. steady state by hand: first "
           "(from rest) %.1e, ", p_first);
    if (p_worst_cycle >= 0)
        printf("after reopenings at worst %.1e (cycle %ld; limit %.0e)\n", p_worst,
               p_worst_cycle, p_tol);
    else
        printf("no reopening in %ld cycle(s)\n", done);
    printf("wall time: %.2f s, %.3f ms per cycle on average, %.3f ms the slowest cycle, "
           "%.3f us per evaluation\n", elapsed, done ? 1e3 * elapsed / (double)done : 0.0,
           1e3 * slowest, stats.evaluations ? 1e6 * elapsed / (double)stats.evaluations : 0.0);
    cdyn_dae_free(dae);

    int pass = ok && stats.max_newton_iterations <= NEWTON_CAP &&
               stats.worst_continuity <= CONTINUITY_TOL && p_worst <= p_tol;
    printf("checks: no failed evaluation, Newton iterations <= %d, continuity residual <= %.0e, "
           "p_J after reopenings within %.0e of the steady state: %s\n", NEWTON_CAP,
           CONTINUITY_TOL, p_tol, pass ? "passed" : "FAILED");
    return pass;
}

/* N: a positive decimal integer */
static int parse_count(const char *text, long *count)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || value < 1) return 0;
    *count = value;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--cycles") == 0) {
        long cycles;
        if (argc < 3 || argc > 4 || !parse_count(argv[2], &cycles)) {
            fprintf(stderr, "usage: hydraulic_valve [output-dir]\n"
                            "       hydraulic_valve --cycles N [output-dir]\n");
            return EXIT_FAILURE;
        }
        /* the output directory is accepted for symmetry; the long run writes no files */
        return cycles_run(cycles) ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    const char *out_dir = argc > 1 ? argv[1] : ".";
    network net = make_network();
    const double t_end = 3.3, dt = 1e-3, sample = 0.01;
    /* references with eps and 8 eps (junction compliance scaled alike):
     * inertance 4e3 kg/m^4 on the orifice branches (3.6e3 times below pipe
     * 1's), compliance 2e-14 m^3/Pa at the junction */
    const double eps = 4e3, compliance = 2e-14, dt_ref = 1e-6;
    const double v0[N] = {0.0, 0.0, 0.0, 0.0}; /* at rest: consistent */

    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(N, &st);
    if (!dae) {
        fprintf(stderr, "hydraulic_valve: cdyn_dae_create: %s\n", cdyn_status_string(st));
        return EXIT_FAILURE;
    }
    if (!setup(dae, &net, v0)) {
        cdyn_dae_free(dae);
        return EXIT_FAILURE;
    }
    reference ref[2] = {{&net, {net.inertance, eps, eps, compliance}},
                        {&net, {net.inertance, 8 * eps, 8 * eps, 8 * compliance}}};
    double v_ref[2][N] = {{v0[0], v0[1], v0[2], v0[3]}, {v0[0], v0[1], v0[2], v0[3]}};
    double worst_flow[2] = {0.0, 0.0}, worst_pressure[2] = {0.0, 0.0};

    char path[1024];
    snprintf(path, sizeof path, "%s/hydraulic_valve.csv", out_dir);
    FILE *csv = fopen(path, "w");
    if (csv) fprintf(csv, "t_s,opening,Q1_Lps,Qa_Lps,Qb_Lps,pJ_bar,Q1_ref,Qa_ref,Qb_ref,pJ_ref\n");

    run_stats stats = {.net = &net, .flow_scale = steady_flow(&net)};
    double y = v0[Q1];
    const int steps = (int)lround(t_end / dt), per_sample = (int)lround(sample / dt);
    const int ref_per_step = (int)lround(dt / dt_ref);
    int ok = 1;
    printf("\n%6s %7s %9s %9s %9s %9s\n", "t [s]", "opening", "Q1 [L/s]", "Qa [L/s]",
           "Qb [L/s]", "p_J [bar]");
    for (int step = 0; ok && step <= steps; ++step) {
        double t = step * dt, ydot, v[N], s, ds;
        ok = dae_rhs(dae, t, y, &ydot, &stats); /* the state at t */
        if (!ok) break;
        cdyn_dae_last_state(dae, v, NULL);
        if (step % per_sample == 0) {
            for (int r = 0; r < 2; ++r)
                for (int i = 0; i < N; ++i) {
                    double diff = fabs(v[i] - v_ref[r][i]);
                    double *worst = i == PJ ? &worst_pressure[r] : &worst_flow[r];
                    if (diff > *worst) *worst = diff;
                }
            valve_opening(&net, t, &s, &ds);
            const double L = VALVE_LPS, B = VALVE_BAR;
            if (csv)
                fprintf(csv, "%.4f,%.4f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f\n", t, s,
                        L * v[Q1], L * v[QA], L * v[QB], B * v[PJ], L * v_ref[0][Q1],
                        L * v_ref[0][QA], L * v_ref[0][QB], B * v_ref[0][PJ]);
            if (step % (10 * per_sample) == 0)
                printf("%6.2f %7.3f %9.5f %9.5f %9.5f %9.5f\n", t, s, L * v[Q1], L * v[QA],
                       L * v[QB], B * v[PJ]);
        }
        if (step == steps) break;
        ok = dae_step(dae, t, &y, dt, &stats, NULL);
        for (int k = 0; k < ref_per_step; ++k)
            for (int r = 0; r < 2; ++r) reference_step(&ref[r], t + k * dt_ref, v_ref[r], dt_ref);
    }
    if (csv) fclose(csv);
    if (!ok) {
        cdyn_dae_free(dae);
        return EXIT_FAILURE;
    }

    double v_end[N], tol_flow, tol_pressure;
    cdyn_dae_last_state(dae, v_end, NULL);
    double p_hand = steady_junction_pressure(&net);
    reference_tolerance(&net, eps, &tol_flow, &tol_pressure);
    printf("\nNewton: at most %d iterations per evaluation (cap %d); %ld steps took the SVD "
           "path, %ld of them around the closures; %ld rate solves used the SVD\n",
           stats.max_newton_iterations, NEWTON_CAP, stats.newton_svd_steps,
           stats.svd_steps_near_closure, cdyn_dae_svd_rate_solves(dae));
    printf("worst continuity residual |Q1 - Qa - Qb| / Q1_steady: %.2e (limit %.0e)\n",
           stats.worst_continuity, CONTINUITY_TOL);
    printf("junction pressure at t = %.1f s: %.6f bar (valve open); steady state by hand: "
           "%.6f bar (relative difference %.1e)\n",
           t_end, v_end[PJ] * VALVE_BAR, p_hand * VALVE_BAR, fabs(v_end[PJ] - p_hand) / p_hand);
    printf("reference eps = %.0e kg/m^4 (C_J = %.0e m^3/Pa, RK4 dt = %.0e s): worst difference "
           "%.2e L/s (limit %.1e), %.2e bar (limit %.1e)\n",
           eps, compliance, dt_ref, worst_flow[0] * VALVE_LPS, tol_flow * VALVE_LPS,
           worst_pressure[0] * VALVE_BAR, tol_pressure * VALVE_BAR);
    printf("reference 8 eps: worst difference %.2e L/s, %.2e bar (ratios %.2f, %.2f; "
           "eps^(2/3) scaling predicts 0.25)\n",
           worst_flow[1] * VALVE_LPS, worst_pressure[1] * VALVE_BAR,
           worst_flow[0] / worst_flow[1], worst_pressure[0] / worst_pressure[1]);
    printf("CSV: %s\n", path);

    int pass = stats.max_newton_iterations <= NEWTON_CAP &&
               stats.worst_continuity <= CONTINUITY_TOL && worst_flow[0] <= tol_flow &&
               worst_pressure[0] <= tol_pressure && worst_flow[0] <= 0.5 * worst_flow[1] &&
               worst_pressure[0] <= 0.5 * worst_pressure[1] &&
               fabs(v_end[PJ] - p_hand) <= 1e-6 * p_hand;
    if (pass && csv && system("command -v gnuplot > /dev/null 2>&1") == 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"set terminal pngcairo size 900,600; set output '%s/hydraulic_valve.png';"
                 " set datafile separator ','; set key outside; set xlabel 't [s]';"
                 " set multiplot layout 2,1 title 'Valve closure and reopening (cdyn DAE, lines; eps-reference, points)';"
                 " set ylabel 'flow [L/s]'; plot [0:1] '%s' u 1:3 w l t 'Q1', '' u 1:4 w l t 'Qa (valve)',"
                 " '' u 1:5 w l t 'Qb', '' every 4 u 1:8 w p pt 6 ps 0.5 t 'Qa ref';"
                 " set ylabel 'p_J [bar]'; plot [0:1] '%s' u 1:6 w l t 'p_J', '' every 4 u 1:10 w p pt 6 ps 0.5 t 'p_J ref', '' u 1:(10*\\$2) w l dt 2 t '10 x opening';"
                 " unset multiplot\"",
                 out_dir, path, path);
        if (system(cmd) == 0) printf("figure: %s/hydraulic_valve.png\n", out_dir);
    }
    cdyn_dae_free(dae);
    if (!pass) {
        fprintf(stderr, "hydraulic_valve: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
