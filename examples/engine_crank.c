/*
 * engine_crank.c - the slider crank of THEORY T6.1 turning at 3000 rpm, as
 * an engine's does, started where a crank stands after 6.7 minutes of it:
 * at 1.2e5 rad. The caller's RK4 (dt = 0.1 ms) with a projection after
 * every step runs it for 2 s, four ways: with xi from its callback or by
 * differences (the default), and without or with the angles' period given
 * (cdyn_mbs_set_periods, mbs.h).
 *
 * An angle's value says nothing of the scale it varies on, and a
 * projection's tolerance is relative to its unknowns: at 1.2e5 rad the
 * crank angle is resolved to 1.2e-7 rad. With its period 2 pi the
 * projection solves for it within its period, and |Phi| after each
 * projection stays at the rounding that the angle's own size leaves
 * (eps 1.2e5 rad times the 0.375 m crank, about 1e-11 m). The same run
 * from the same angle less its 19099 whole turns (-2.56 rad) is the
 * reference.
 *
 * Checks (exit status 1 if one fails): with the period, max |Phi| after
 * projection within 1e-10 m and the final crank angle equal to the
 * reference's plus the whole turns between their starts, to 1e-6 rad; xi by
 * differences gives the callback's end angle to 1e-6 rad (before cdyn
 * 0.2.x's fix its accelerations there were wrong in sign).
 */
#include <cdyn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "slider_crank_model.h"

#define TWO_PI 6.283185307179586
#define START 1.2e5 /* rad: 3000 rpm for 6.7 min */
#define SPEED 314.0  /* rad/s */
#define DT 1e-4      /* s */
#define STEPS 20000  /* 2 s */

typedef struct {
    double worst_phi; /* max |Phi| after projection [m] */
    double angle;     /* the crank angle at the end [rad] */
} run_result;

/* One RK4 step of y (2N) over dt with cdyn_mbs_rhs. */
static int rk4_step(cdyn_mbs *mbs, double t, double *y, double dt)
{
    double k[4][NY], stage[NY];
    static const double at[4] = {0.0, 0.5, 0.5, 1.0};
    for (int s = 0; s < 4; ++s) {
        for (int i = 0; i < NY; ++i) stage[i] = y[i] + (s ? at[s] * dt * k[s - 1][i] : 0.0);
        if (cdyn_mbs_rhs(mbs, t + at[s] * dt, stage, k[s]) != CDYN_OK) return -1;
    }
    for (int i = 0; i < NY; ++i) y[i] += dt / 6.0 * (k[0][i] + 2.0 * k[1][i] + 2.0 * k[2][i] + k[3][i]);
    return 0;
}

/* The run from crank angle theta0 at SPEED; returns 0 or -1 (a message). */
static int run(double theta0, int exact_xi, int periods, run_result *out)
{
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, NULL);
    if (!mbs || cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL) != CDYN_OK) return -1;
    if (exact_xi) cdyn_mbs_set_time_terms(mbs, phi_t, xi);
    const double period[N] = {0.0, TWO_PI, TWO_PI};
    if (periods) cdyn_mbs_set_periods(mbs, period);
    /* a consistent state: theta3 from Phi2 = 0, s from Phi1 = 0, speeds
     * from Phi_q q' = 0 */
    double th3 = asin(-CRANK * sin(theta0) / ROD);
    double w3 = -CRANK * cos(theta0) * SPEED / (ROD * cos(th3));
    double y[NY] = {CRANK * cos(theta0) + ROD * cos(th3), theta0, th3,
                    -CRANK * sin(theta0) * SPEED - ROD * sin(th3) * w3, SPEED, w3};
    out->worst_phi = 0.0;
    double t = 0.0;
    for (int k = 0; k < STEPS; ++k, t += DT) {
        cdyn_status st = rk4_step(mbs, t, y, DT) ? CDYN_ERR_ARG : cdyn_mbs_project(mbs, t + DT, y);
        if (st != CDYN_OK) {
            fprintf(stderr, "step %d: %s\n", k, cdyn_mbs_last_error(mbs));
            cdyn_mbs_free(mbs);
            return -1;
        }
        double P[M_CON];
        phi(t + DT, y, P, NULL);
        out->worst_phi = fmax(out->worst_phi, fmax(fabs(P[0]), fabs(P[1])));
    }
    out->angle = y[TH1];
    cdyn_mbs_free(mbs);
    return 0;
}

int main(void)
{
    run_result ref, r[2][2];
    const double reduced = remainder(START, TWO_PI), turns = START - reduced; /* exact */
    if (run(reduced, 1, 0, &ref)) return 1;
    printf("slider crank at 3000 rpm, RK4 dt = %g s with a projection every step, %g s\n", DT,
           STEPS * DT);
    printf("  from %.4f rad (reference):      max |Phi| after projection %.2e m\n", reduced,
           ref.worst_phi);
    int failed = 0;
    for (int exact = 1; exact >= 0; --exact) {
        for (int periods = 0; periods < 2; ++periods) {
            if (run(START, exact, periods, &r[exact][periods])) return 1;
            printf("  from %.4g rad, xi %s, %s: max |Phi| %.2e m, end angle - reference's - "
                   "turns = %+.2e rad\n",
                   START, exact ? "callback   " : "differenced",
                   periods ? "period 2 pi" : "no period  ", r[exact][periods].worst_phi,
                   r[exact][periods].angle - ref.angle - turns);
        }
        const run_result *p = &r[exact][1];
        if (!(p->worst_phi <= 1e-10)) failed = printf("FAIL: |Phi| %.2e m > 1e-10 m\n", p->worst_phi);
        if (!(fabs(p->angle - ref.angle - turns) <= 1e-6))
            failed = printf("FAIL: end angle off the reference's by %.2e rad\n",
                            p->angle - ref.angle - turns);
    }
    if (!(fabs(r[0][1].angle - r[1][1].angle) <= 1e-6))
        failed = printf("FAIL: xi by differences moves the end angle by %.2e rad\n",
                        r[0][1].angle - r[1][1].angle);
    if (failed) return 1;
    printf("checks passed: with the period, |Phi| at the rounding of the angle's size; "
           "xi by differences as the callback's\n");
    return 0;
}
