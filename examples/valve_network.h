/*
 * valve_network.h - the hydraulic network with a closing valve of THEORY
 * T6.3, shared by examples/hydraulic_valve.c (which derives it), the IDA
 * example examples/ida_valve.c and the benchmark tests/bench/bench_dae.c.
 *
 * States v = (Q1, Qa, Qb, p_J) in SI units, m^3/s and Pa (flows ~1e-3,
 * pressures ~1e5: cdyn's decisions and tolerances do not depend on units):
 *   I1 Q1' = p_s - R1 Q1 - p_J                 (pipe 1, inertial)
 *        0 = s(t)^2 p_J - k_a Qa|Qa|           (valve a, opening s)
 *        0 = p_J - k_b Qb|Qb|                  (orifice b)
 *        0 = Q1 - Qa - Qb                       (continuity)
 */
#ifndef CDYN_EXAMPLE_VALVE_NETWORK_H
#define CDYN_EXAMPLE_VALVE_NETWORK_H

#include <math.h>

enum { VALVE_STATES = 4, Q1 = 0, QA = 1, QB = 2, PJ = 3 };

#define VALVE_PI 3.14159265358979323846
/* Units for printing only: flows in L/s, pressures in bar. */
#define VALVE_LPS 1e3 /* L/s per m^3/s */
#define VALVE_BAR 1e-5 /* bar per Pa */

typedef struct {
    double inertance;  /* pipe 1, rho L / A [kg/m^4] */
    double resistance; /* pipe 1, laminar 128 mu L / (pi d^4) [Pa s/m^3] */
    double k_valve, k_orifice; /* rho / (2 Cd^2 A^2) [kg/m^7] */
    double p_supply;   /* [Pa] */
    double period;     /* valve cycle [s] */
} network;

/* Hydraulic oil (rho = 870 kg/m^3, mu = 0.04 Pa s), Cd = 0.7. */
static inline network make_network(void)
{
    const double rho = 870.0, mu = 0.04, cd = 0.7;
    const double length = 5.0, diameter = 0.02, area = VALVE_PI * diameter * diameter / 4.0;
    const double valve_area = 5e-5, orifice_area = 3e-5; /* m^2 */
    network net;
    net.inertance = rho * length / area;
    net.resistance = 128.0 * mu * length / (VALVE_PI * pow(diameter, 4));
    net.k_valve = rho / (2.0 * cd * cd * valve_area * valve_area);
    net.k_orifice = rho / (2.0 * cd * cd * orifice_area * orifice_area);
    net.p_supply = 10e5;
    net.period = 1.0;
    return net;
}

/* Valve opening s(t) and ds/dt: open, closing ramp (smoothstep, 0.1 s),
 * closed, opening ramp, open; one cycle per period. */
static inline void valve_opening(const network *net, double t, double *s, double *ds)
{
    const double phase = fmod(t, net->period), ramp = 0.1;
    const double close_at = 0.3, open_at = 0.6;
    double x, dir;
    if (phase < close_at) { *s = 1.0; *ds = 0.0; return; }
    if (phase < close_at + ramp) { x = (phase - close_at) / ramp; dir = -1.0; }
    else if (phase < open_at) { *s = 0.0; *ds = 0.0; return; }
    else if (phase < open_at + ramp) { x = (phase - open_at) / ramp; dir = 1.0; }
    else { *s = 1.0; *ds = 0.0; return; }
    double smooth = x * x * (3.0 - 2.0 * x), slope = 6.0 * x * (1.0 - x) / ramp;
    *s = dir > 0 ? smooth : 1.0 - smooth;
    *ds = dir * slope;
}

/* F(v, t), its Jacobian and its time derivative (the cdyn_dae callbacks;
 * user is the network). */
static inline int valve_force(double t, const double *v, double *F, void *user)
{
    const network *net = user;
    double s, ds;
    valve_opening(net, t, &s, &ds);
    F[Q1] = net->p_supply - net->resistance * v[Q1] - v[PJ];
    F[QA] = s * s * v[PJ] - net->k_valve * v[QA] * fabs(v[QA]);
    F[QB] = v[PJ] - net->k_orifice * v[QB] * fabs(v[QB]);
    F[PJ] = v[Q1] - v[QA] - v[QB];
    return 0;
}

static inline int valve_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    const network *net = user;
    double s, ds;
    valve_opening(net, t, &s, &ds);
    for (int j = 0; j < VALVE_STATES; ++j)
        for (int i = 0; i < VALVE_STATES; ++i) J[i + j * ld] = 0.0;
    J[Q1 + Q1 * ld] = -net->resistance;
    J[Q1 + PJ * ld] = -1.0;
    J[QA + QA * ld] = -2.0 * net->k_valve * fabs(v[QA]); /* T2.5: 2 diag(|u|) */
    J[QA + PJ * ld] = s * s;
    J[QB + QB * ld] = -2.0 * net->k_orifice * fabs(v[QB]);
    J[QB + PJ * ld] = 1.0;
    J[PJ + Q1 * ld] = 1.0;
    J[PJ + QA * ld] = -1.0;
    J[PJ + QB * ld] = -1.0;
    return 0;
}

static inline int valve_time(double t, const double *v, double *dFdt, void *user)
{
    const network *net = user;
    double s, ds;
    valve_opening(net, t, &s, &ds);
    dFdt[Q1] = dFdt[QB] = dFdt[PJ] = 0.0;
    dFdt[QA] = 2.0 * s * ds * v[PJ];
    return 0;
}

#endif
