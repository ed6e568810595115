/*
 * hydraulic_junction.c - two tanks feed one junction that drains to ambient.
 *
 *   tank 1 (p1) --pipe 1, Q1-->+
 *                              junction (p_J) --pipe 3, Q3--> orifice --> ambient (p = 0)
 *   tank 2 (p2) --pipe 2, Q2-->+
 *
 * Every pipe has an inertance I = rho L / A and a laminar (Hagen-Poiseuille)
 * resistance R = 128 mu L / (pi D^4); the orifice adds k Q3|Q3| with
 * k = rho / (2 Cd^2 A0^2) (THEORY T6.3). Momentum of each pipe, flows positive
 * along the arrows (THEORY T1.1):
 *   I1 Q1' = p1  - R1 Q1 - p_J
 *   I2 Q2' = p2  - R2 Q2 - p_J
 *   I3 Q3' = p_J - R3 Q3 - k Q3|Q3|
 * Continuity Q1 + Q2 = Q3 is W v = 0 with W = [-1 -1 1] and v = [Q1 Q2 Q3].
 * W^T lambda = [-lambda, -lambda, +lambda] enters exactly where -p_J, -p_J and
 * +p_J do, so lambda is the junction pressure, M = diag(I1, I2, I3) and
 * F = [p1 - R1 Q1, p2 - R2 Q2, -R3 Q3 - k Q3|Q3|].
 *
 * cdyn reduces the three flows to d = 2 independent ones (THEORY T1.2); this
 * program's own fixed-step RK4 advances them, and cdyn recovers the dependent
 * flow and p_J at every stage (THEORY T1.4, T1.5).
 */
#include <cdyn/nullspace.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N_PIPES = 3, N_JUNCTIONS = 1, N_FREE = N_PIPES - N_JUNCTIONS };

static const double PI = 3.14159265358979323846;
static const double RHO = 870.0;           /* hydraulic oil density [kg/m^3] */
static const double MU = 0.04;             /* dynamic viscosity [Pa s] */
static const double DIAMETER = 0.010;      /* all pipes [m] */
static const double LENGTH[N_PIPES] = {2.0, 2.4, 1.6}; /* [m] */
static const double P_TANK1 = 3.0e5;       /* gauge [Pa] */
static const double P_TANK2 = 2.0e5;       /* gauge [Pa] */
static const double ORIFICE_AREA = 5.0e-5; /* A0 [m^2] */
static const double DISCHARGE_COEFF = 0.7; /* Cd [-] */
/* Steady flow: Re = 4 rho Q / (pi mu D) = 1040, 160, 1190 < 2300 (laminar);
 * time constant I/R = rho D^2 / (32 mu) = 68 ms, so p_J settles within 0.3 s. */

typedef struct {
    cdyn_nullspace *ns;
    double mass[N_PIPES * N_PIPES];  /* M = diag(inertances) [kg/m^4], column-major */
    double resistance[N_PIPES];      /* R [Pa s/m^3] */
    double k_orifice;                /* k [Pa s^2/m^6] */
} network;

static int call_ok(cdyn_status status, const network *net, const char *call)
{
    if (status == CDYN_OK)
        return 1;
    fprintf(stderr, "hydraulic_junction: %s failed (%s): %s\n", call,
            cdyn_status_string(status), cdyn_nullspace_last_error(net->ns));
    return 0;
}

static void network_init(network *net)
{
    const double area = PI * DIAMETER * DIAMETER / 4.0;
    for (int i = 0; i < N_PIPES * N_PIPES; ++i)
        net->mass[i] = 0.0;
    for (int pipe = 0; pipe < N_PIPES; ++pipe) {
        net->mass[pipe * (N_PIPES + 1)] = RHO * LENGTH[pipe] / area;
        net->resistance[pipe] = 128.0 * MU * LENGTH[pipe] / (PI * pow(DIAMETER, 4));
    }
    net->k_orifice = RHO / (2.0 * pow(DISCHARGE_COEFF * ORIFICE_AREA, 2));
}

/* F(v): the pipe forces without the junction pressure (THEORY T1.1). */
static void pipe_forces(const network *net, const double *flow, double *force)
{
    const double *R = net->resistance;
    force[0] = P_TANK1 - R[0] * flow[0];
    force[1] = P_TANK2 - R[1] * flow[1];
    force[2] = -R[2] * flow[2] - net->k_orifice * flow[2] * fabs(flow[2]);
}

/* The reduced ODE vbar' = f(vbar): expand v = alpha vbar (T1.2), solve
 * Mbar vbar' = Fbar and recover v' and p_J (T1.4, T1.5; W constant, c = 0). */
static int reduced_rhs(const network *net, const double *vbar, double *vbar_dot,
                       double *p_junction)
{
    double flow[N_PIPES], force[N_PIPES], flow_rate[N_PIPES];
    if (!call_ok(cdyn_nullspace_expand(net->ns, vbar, flow), net, "cdyn_nullspace_expand"))
        return 0;
    pipe_forces(net, flow, force);
    if (!call_ok(cdyn_nullspace_solve(net->ns, net->mass, N_PIPES, force, NULL, flow_rate,
                                      p_junction), net, "cdyn_nullspace_solve"))
        return 0;
    return call_ok(cdyn_nullspace_independent(net->ns, flow_rate, vbar_dot), net,
                   "cdyn_nullspace_independent");
}

/* One classical RK4 step of the caller's integrator; k1 = f(vbar) is given. */
static int rk4_step(const network *net, double *vbar, const double *k1, double dt)
{
    double k2[N_FREE], k3[N_FREE], k4[N_FREE], stage[N_FREE];
    for (int i = 0; i < N_FREE; ++i) stage[i] = vbar[i] + 0.5 * dt * k1[i];
    if (!reduced_rhs(net, stage, k2, NULL)) return 0;
    for (int i = 0; i < N_FREE; ++i) stage[i] = vbar[i] + 0.5 * dt * k2[i];
    if (!reduced_rhs(net, stage, k3, NULL)) return 0;
    for (int i = 0; i < N_FREE; ++i) stage[i] = vbar[i] + dt * k3[i];
    if (!reduced_rhs(net, stage, k4, NULL)) return 0;
    for (int i = 0; i < N_FREE; ++i)
        vbar[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    return 1;
}

/* Steady state by hand (THEORY T6.3). With Q' = 0, pipes 1 and 2 give
 * Q1 = (p1 - p_J)/R1 and Q2 = (p2 - p_J)/R2, so continuity reads
 *   Q3 = Q1 + Q2 = S - G p_J,   G = 1/R1 + 1/R2,  S = p1/R1 + p2/R2,
 * and the drain pipe (Q3 > 0) gives p_J = R3 Q3 + k Q3^2. Eliminating
 * p_J = (S - Q3)/G:  k Q3^2 + (R3 + 1/G) Q3 - S/G = 0. With a = k,
 * b = R3 + 1/G > 0, c = -S/G < 0 the positive root, written without
 * cancellation, is Q3 = 2(-c) / (b + sqrt(b^2 - 4ac)). */
static double hand_junction_pressure(const network *net)
{
    const double *R = net->resistance;
    const double G = 1.0 / R[0] + 1.0 / R[1];
    const double S = P_TANK1 / R[0] + P_TANK2 / R[1];
    const double a = net->k_orifice, b = R[2] + 1.0 / G, c = -S / G;
    const double q3 = -2.0 * c / (b + sqrt(b * b - 4.0 * a * c));
    return (S - q3) / G;
}

static int print_row(const network *net, double t, const double *vbar, double p_junction)
{
    const double to_l_per_min = 60.0e3;
    double flow[N_PIPES];
    if (!call_ok(cdyn_nullspace_expand(net->ns, vbar, flow), net, "cdyn_nullspace_expand"))
        return 0;
    printf("%6.2f %11.4f %11.4f %11.4f %10.5f %14.2e\n", t, flow[0] * to_l_per_min,
           flow[1] * to_l_per_min, flow[2] * to_l_per_min, p_junction / 1e5,
           fabs(flow[0] + flow[1] - flow[2]));
    return 1;
}

/* Factor W once (THEORY T1.2) and report which flows cdyn keeps as states. */
static int factor_constraints(const network *net)
{
    static const char *const names[N_PIPES] = {"Q1", "Q2", "Q3"};
    const double W[N_PIPES] = {-1.0, -1.0, 1.0}; /* 1 x 3, ldw = 1 */
    int independent[N_FREE], dependent[N_JUNCTIONS];
    if (!call_ok(cdyn_nullspace_factor(net->ns, W, 1), net, "cdyn_nullspace_factor"))
        return 0;
    if (cdyn_nullspace_partition(net->ns, independent, dependent) != N_FREE) {
        fprintf(stderr, "cdyn_nullspace_partition: %s\n", cdyn_nullspace_last_error(net->ns));
        return 0;
    }
    printf("independent flows: %s, %s; dependent flow: %s\n\n", names[independent[0]],
           names[independent[1]], names[dependent[0]]);
    return 1;
}

/* Start from rest, run 5 s with dt = 1 ms, then compare p_J with the hand value. */
static int simulate(const network *net)
{
    const double dt = 1e-3, settle_band = 1e-3, tolerance = 1e-6;
    const int n_steps = 5000;
    const double p_hand = hand_junction_pressure(net);
    double vbar[N_FREE] = {0.0, 0.0}, vbar_dot[N_FREE], p_junction = 0.0, settle_time = 0.0;

    printf("%6s %11s %11s %11s %10s %14s\n", "t [s]", "Q1 [L/min]", "Q2 [L/min]",
           "Q3 [L/min]", "p_J [bar]", "|Q1+Q2-Q3|");
    printf("%6s %11s %11s %11s %10s %14s\n", "", "", "", "", "", "[m^3/s]");
    for (int step = 0; step <= n_steps; ++step) {
        const double t = step * dt;
        if (!reduced_rhs(net, vbar, vbar_dot, &p_junction)) return 0;
        if (fabs(p_junction - p_hand) > settle_band * p_hand) settle_time = t + dt;
        /* every 50 ms during the transient, every 0.5 s afterwards */
        const int print_every = step < 500 ? 50 : 500;
        if (step % print_every == 0 && !print_row(net, t, vbar, p_junction)) return 0;
        if (step < n_steps && !rk4_step(net, vbar, vbar_dot, dt)) return 0;
    }

    const double rel_diff = fabs(p_junction - p_hand) / p_hand;
    printf("\nsteady-state junction pressure\n");
    printf("  cdyn + RK4 at t = %.1f s  %.6f bar (%.3f Pa)\n", n_steps * dt,
           p_junction / 1e5, p_junction);
    printf("  hand calculation         %.6f bar (%.3f Pa)\n", p_hand / 1e5, p_hand);
    printf("  relative difference      %.2e (limit %.0e)\n", rel_diff, tolerance);
    printf("p_J within %.1f %% of the hand value from t = %.3f s on\n",
           100.0 * settle_band, settle_time);
    if (!(rel_diff <= tolerance)) {
        fprintf(stderr, "hydraulic_junction: simulated and hand-calculated p_J differ\n");
        return 0;
    }
    return 1;
}

int main(void)
{
    cdyn_status status;
    network net;
    network_init(&net);
    net.ns = cdyn_nullspace_create(N_PIPES, N_JUNCTIONS, &status);
    if (!net.ns) {
        fprintf(stderr, "hydraulic_junction: cdyn_nullspace_create failed: %s\n",
                cdyn_status_string(status));
        return EXIT_FAILURE;
    }
    const int ok = factor_constraints(&net) && simulate(&net);
    cdyn_nullspace_free(net.ns);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
