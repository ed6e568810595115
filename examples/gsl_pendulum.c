/*
 * gsl_pendulum.c - GSL's ODE driver (gsl_odeiv2 with rk8pd, GSL's explicit
 * embedded Runge-Kutta Prince-Dormand (8, 9) stepper) driving cdyn's
 * multibody right-hand side, with cdyn's projection after every output
 * interval, on a pendulum in Cartesian coordinates — compared with the
 * exact solution, which GSL's Jacobi elliptic functions give in closed
 * form.
 *
 * Model (THEORY T4): a point mass m = 1 kg on a massless rod of length
 * L = 1 m from the origin, gravity g = 9.81 m/s^2 along -y. q = (x, y),
 *     M = m I,  Q = (0, -m g),
 *     Phi = (x^2 + y^2 - L^2) / 2,  Phi_q = [x  y],  Phi_t = 0,
 *     xi = -(Phi_q q')_q q' = -(x'^2 + y'^2)            (T4.1)
 * KKT form (T4.4) without stabilization: cdyn_mbs_rhs() is the GSL system
 * function as it is (its y = [q; q'] layout is GSL's y[]). After every
 * 0.1 s output interval (about two rk8pd steps), cdyn_mbs_project() (T4.9)
 * puts q back on the circle and q' on its tangent; the driver is then reset
 * (gsl_odeiv2_driver_reset), because the state was changed behind it.
 *
 * Exact solution: with theta the angle from the downward vertical
 * (x = L sin theta, y = -L cos theta), released at rest from theta0,
 *     theta(t) = 2 asin(k sn(K(k) - omega0 t | k^2)),
 *     k = sin(theta0 / 2), omega0 = sqrt(g / L),
 * K the complete elliptic integral of the first kind (period 4 K / omega0)
 * — gsl_sf_elljac_e and gsl_sf_ellint_Kcomp. theta0 = 0.5 rad: far from
 * small (the small-angle solution theta0 cos(omega0 t) is printed for
 * comparison: its period is 1.6 % short, ~theta0^2 / 16, and it is off by
 * 0.23 rad within 10 s).
 *
 * Checks (exit status 1 if one fails), 10 s, 101 samples:
 *  - |theta - theta_exact| <= THETA_TOL = 1e-9 rad. Measured 2.6e-11 rad
 *    with the driver's epsabs = epsrel = 1e-10 (202 steps); with 1e-12 the
 *    error drops to 4.3e-13 (303 steps), so it is the integrator's, not the
 *    projection's or the reference's (elliptic functions by the AGM, good
 *    to ~1e-15). A bound from the local tolerance alone, 202 steps x 2e-10
 *    (epsabs + epsrel |y|) summed, is 4e-8 rad; the steps' actual errors
 *    stay far below the tolerance on this smooth problem. The limit is 40
 *    times the measured error and 40 times below that bound.
 *  - |Phi| <= 1e-10 m and |Phi_q q'| <= 1e-10 m/s after every projection
 *    (the projection's Newton tolerance is 1e-12; the limit of
 *    slider_crank.c). Without projection the drift, 1.4e-10 m in 10 s, and
 *    its 10 times larger angle error are printed for comparison.
 *
 * usage: gsl_pendulum   (prints a table; no files)
 */
#include <cdyn/mbs.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_mode.h>
#include <gsl/gsl_odeiv2.h>
#include <gsl/gsl_sf_ellint.h>
#include <gsl/gsl_sf_elljac.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 2, M_CON = 1, NY = 2 * N, X = 0, Y = 1 };

static const double GRAVITY = 9.81; /* m/s^2 */
static const double LENGTH = 1.0;   /* m */
static const double MASS = 1.0;     /* kg */
static const double THETA0 = 0.5;   /* rad, released at rest */
static const double T_END = 10.0, SAMPLE = 0.1; /* s: output and projection interval */
static const double EPS = 1e-10, EPS_TIGHT = 1e-12; /* driver tolerances */
static const double THETA_TOL = 1e-9;   /* rad, see the header */
static const double PHI_TOL = 1e-10;    /* m and m/s after projection */
#define SAMPLES 100                     /* T_END / SAMPLE */

/* ---- the model callbacks --------------------------------------------------- */

static int mass(double t, const double *q, double *M, int ldm, void *user)
{
    (void)t, (void)q, (void)user;
    M[0] = M[1 + ldm] = MASS;
    M[1] = M[ldm] = 0.0;
    return 0;
}

static int force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    (void)t, (void)q, (void)qdot, (void)user;
    Q[X] = 0.0;
    Q[Y] = -MASS * GRAVITY;
    return 0;
}

static int phi(double t, const double *q, double *Phi, void *user)
{
    (void)t, (void)user;
    Phi[0] = 0.5 * (q[X] * q[X] + q[Y] * q[Y] - LENGTH * LENGTH);
    return 0;
}

static int jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t, (void)user;
    J[0] = q[X];
    J[ld] = q[Y];
    return 0;
}

static int phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q, (void)user;
    Phi_t[0] = 0.0;
    return 0;
}

static int xi(double t, const double *q, const double *qdot, double *x, void *user)
{
    (void)t, (void)q, (void)user;
    x[0] = -(qdot[X] * qdot[X] + qdot[Y] * qdot[Y]);
    return 0;
}

/* ---- GSL's system function: cdyn_mbs_rhs ----------------------------------- */

static int gsl_rhs(double t, const double y[], double dydt[], void *params)
{
    /* GSL_EBADFUNC makes the driver stop and return it */
    return cdyn_mbs_rhs(params, t, y, dydt) == CDYN_OK ? GSL_SUCCESS : GSL_EBADFUNC;
}

/* ---- the exact solution ---------------------------------------------------- */

static double theta_exact(double t)
{
    const double k = sin(0.5 * THETA0), omega0 = sqrt(GRAVITY / LENGTH);
    double K = gsl_sf_ellint_Kcomp(k, GSL_PREC_DOUBLE), sn, cn, dn;
    gsl_sf_elljac_e(K - omega0 * t, k * k, &sn, &cn, &dn);
    return 2.0 * asin(k * sn);
}

typedef struct {
    double max_error;          /* |theta - theta_exact| over the samples [rad] */
    double max_phi, max_phidot; /* after the projections (or at the samples) */
    double max_small_angle;    /* |theta_exact - theta0 cos(omega0 t)| [rad] */
    double energy_drift;       /* max |E - E0| [J] */
    unsigned long steps;       /* driver steps */
    double theta_end;
} run_result;

static double energy(const double *y)
{
    return 0.5 * MASS * (y[2] * y[2] + y[3] * y[3]) + MASS * GRAVITY * y[Y];
}

/* one run: driver tolerance eps, projection after every interval or not */
static int run(double eps, int project, run_result *r)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, &st);
    if (!mbs) {
        fprintf(stderr, "gsl_pendulum: cdyn_mbs_create: %s\n", cdyn_status_string(st));
        return 0;
    }
    if ((st = cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL)) != CDYN_OK ||
        (st = cdyn_mbs_set_time_terms(mbs, phi_t, xi)) != CDYN_OK) {
        fprintf(stderr, "gsl_pendulum: setup: %s\n", cdyn_mbs_last_error(mbs));
        cdyn_mbs_free(mbs);
        return 0;
    }
    gsl_odeiv2_system sys = {gsl_rhs, NULL, NY, mbs}; /* rk8pd needs no Jacobian */
    gsl_odeiv2_driver *d = gsl_odeiv2_driver_alloc_y_new(&sys, gsl_odeiv2_step_rk8pd, 1e-3,
                                                         eps, eps);
    if (!d) {
        fprintf(stderr, "gsl_pendulum: gsl_odeiv2_driver_alloc_y_new failed\n");
        cdyn_mbs_free(mbs);
        return 0;
    }
    const double omega0 = sqrt(GRAVITY / LENGTH);
    double y[NY] = {LENGTH * sin(THETA0), -LENGTH * cos(THETA0), 0.0, 0.0}, t = 0.0;
    const double e0 = energy(y);
    int ok = 1;
    for (int k = 0; k <= SAMPLES; ++k) {
        if (k > 0) {
            int status = gsl_odeiv2_driver_apply(d, &t, k * SAMPLE, y);
            r->steps += d->n; /* steps of this interval */
            if (status != GSL_SUCCESS) {
                fprintf(stderr, "gsl_pendulum: gsl_odeiv2_driver_apply: %s at t = %.6f s (%s)\n",
                        gsl_strerror(status), t, cdyn_mbs_last_error(mbs));
                ok = 0;
                break;
            }
            if (project) {
                if ((st = cdyn_mbs_project(mbs, t, y)) != CDYN_OK) {
                    fprintf(stderr, "gsl_pendulum: cdyn_mbs_project: %s\n",
                            cdyn_mbs_last_error(mbs));
                    ok = 0;
                    break;
                }
                gsl_odeiv2_driver_reset(d); /* the state changed behind the driver */
            }
        }
        double theta = atan2(y[X], -y[Y]), exact = theta_exact(k * SAMPLE);
        double P = 0.5 * (y[X] * y[X] + y[Y] * y[Y] - LENGTH * LENGTH);
        double Pdot = y[X] * y[2] + y[Y] * y[3];
        r->max_error = fmax(r->max_error, fabs(theta - exact));
        r->max_phi = fmax(r->max_phi, fabs(P));
        r->max_phidot = fmax(r->max_phidot, fabs(Pdot));
        r->max_small_angle = fmax(r->max_small_angle, fabs(exact - THETA0 * cos(omega0 * k * SAMPLE)));
        r->energy_drift = fmax(r->energy_drift, fabs(energy(y) - e0));
        r->theta_end = theta;
        if (project && eps == EPS && k % 10 == 0)
            printf("%6.2f %13.10f %13.10f %10.2e %13.10f %9.1e\n", k * SAMPLE, theta, exact,
                   theta - exact, THETA0 * cos(omega0 * k * SAMPLE), fabs(P));
    }
    gsl_odeiv2_driver_free(d);
    cdyn_mbs_free(mbs);
    return ok;
}

int main(void)
{
    gsl_set_error_handler_off(); /* statuses are checked; no abort() */
    run_result main_run = {0}, tight = {0}, free_run = {0};
    const double k = sin(0.5 * THETA0), omega0 = sqrt(GRAVITY / LENGTH);
    printf("Cartesian pendulum: L = %.1f m, g = %.2f m/s^2, theta0 = %.2f rad from rest; "
           "period 4K/omega0 = %.6f s (small-angle 2 pi/omega0 = %.6f s)\n", LENGTH, GRAVITY,
           THETA0, 4.0 * gsl_sf_ellint_Kcomp(k, GSL_PREC_DOUBLE) / omega0,
           2.0 * 3.14159265358979323846 / omega0);
    printf("GSL gsl_odeiv2_driver + rk8pd (epsabs = epsrel = %.0e) on cdyn_mbs_rhs (KKT), "
           "cdyn_mbs_project every %.1f s, %.0f s\n\n", EPS, SAMPLE, T_END);
    printf("%6s %13s %13s %10s %13s %9s\n", "t [s]", "theta [rad]", "exact", "diff",
           "small-angle", "|Phi| [m]");
    if (!run(EPS, 1, &main_run) || !run(EPS_TIGHT, 1, &tight) || !run(EPS, 0, &free_run))
        return EXIT_FAILURE;

    printf("\nwith projection (eps %.0e): %lu rk8pd steps, max |theta - exact| %.2e rad "
           "(limit %.0e), max |Phi| %.1e m, max |Phi_q q'| %.1e m/s (limit %.0e), max |E - E0| "
           "%.1e J\n", EPS, main_run.steps, main_run.max_error, THETA_TOL, main_run.max_phi,
           main_run.max_phidot, PHI_TOL, main_run.energy_drift);
    printf("with projection (eps %.0e): %lu steps, max |theta - exact| %.2e rad\n", EPS_TIGHT,
           tight.steps, tight.max_error);
    printf("without projection (eps %.0e): %lu steps, max |theta - exact| %.2e rad, max |Phi| "
           "%.1e m, max |Phi_q q'| %.1e m/s, max |E - E0| %.1e J\n", EPS, free_run.steps,
           free_run.max_error, free_run.max_phi, free_run.max_phidot, free_run.energy_drift);
    printf("small-angle solution theta0 cos(omega0 t): off by up to %.3f rad\n",
           main_run.max_small_angle);

    int pass = main_run.max_error <= THETA_TOL && main_run.max_phi <= PHI_TOL &&
               main_run.max_phidot <= PHI_TOL;
    printf("checks: theta within %.0e rad of the exact solution, |Phi|, |Phi_q q'| <= %.0e "
           "after every projection: %s\n", THETA_TOL, PHI_TOL, pass ? "passed" : "FAILED");
    if (!pass) {
        fprintf(stderr, "gsl_pendulum: a check failed (see above)\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
