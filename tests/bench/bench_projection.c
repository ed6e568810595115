/* The cost of projection (THEORY T4.9), issue 14's targets: one
 * cdyn_mbs_project against one cdyn_mbs_rhs at small sizes, and CVODE with
 * cdyn's projection against CVODE with a hand-written projection on the
 * Cartesian pendulum. Built only with the SUNDIALS adapters.
 *
 * A. Per call, ratios to cdyn_mbs_rhs at the same state (paths taken in
 *    turn, median over samples): cdyn_mbs_project from a state 1e-9
 *    (relative) off the manifold, the same on the manifold, and
 *    cdyn_mbs_project_velocities; both metrics. Models: the Cartesian
 *    pendulum (n = 2, m = 1), the slider crank (n = 3, m = 2,
 *    examples/slider_crank_model.h) and a planar chain of six point masses
 *    (n = 12, m = 6), each with its exact Phi_t and xi.
 * B. End to end: the pendulum (l = 1 m, m = 1 kg, from 0.5 rad at rest,
 *    10 s), CVODE BDF with a dense solver, rtol 1e-8, atol 1e-10, error
 *    projection on: cdyn_cvode_mbs_rhs + cdyn_cvode_attach_mbs (minimum-norm
 *    metric) against a hand-written right-hand side (closed-form
 *    multiplier) and CVProjFn (radial projection, the error estimate
 *    projected onto the tangent space), and the hand-written right-hand
 *    side without projection. Reported: time per run, ratio to the
 *    hand-written projected run, steps, projections, and the angle error at
 *    10 s against the exact solution (Jacobi elliptic functions, by the
 *    arithmetic-geometric mean).
 * C. The Jacobian d ydot / dy of the Lagrange form, per call:
 *    cdyn_mbs_rhs_jacobian (one factorization, reused for every column)
 *    against one cdyn_mbs_rhs and against forward differences of
 *    cdyn_mbs_rhs (2n + 1 calls, what CVODE's dense difference quotients
 *    cost), same models as A.
 * Ratios, not pass/fail. */
#include "bench_pendulum.h"
#include "bench_util.h"

#include <cdyn.h>
#include <cdyn/sundials.h>

#include <cvode/cvode.h>
#include <cvode/cvode_ls.h>
#include <cvode/cvode_proj.h>
#include <nvector/nvector_serial.h>
#include <sundials/sundials_context.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/slider_crank_model.h"

#if SUNDIALS_VERSION_MAJOR >= 7
#define SUN_NO_COMM SUN_COMM_NULL
#else
#define SUN_NO_COMM NULL
#endif

static const double GRAV = PEND_G;
enum { LINKS = 6, NMAX = 2 * LINKS };

/* ---- a planar chain of point masses (m, links of length l) -------------- */

typedef struct {
    int links;
    double m, l;
} chain;

static int ch_mass(double t, const double *q, double *M, int ld, void *user)
{
    (void)t, (void)q;
    const chain *c = user;
    int n = 2 * c->links;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) M[i + j * ld] = i == j ? c->m : 0.0;
    return 0;
}

static int ch_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    (void)t, (void)q, (void)qdot;
    const chain *c = user;
    for (int k = 0; k < c->links; ++k) {
        Q[2 * k] = 0.0;
        Q[2 * k + 1] = -c->m * GRAV;
    }
    return 0;
}

/* link k joins point k - 1 (the origin for k = 0) to point k */
static void link_vector(const double *q, int k, double *dx, double *dy)
{
    *dx = q[2 * k] - (k > 0 ? q[2 * k - 2] : 0.0);
    *dy = q[2 * k + 1] - (k > 0 ? q[2 * k - 1] : 0.0);
}

static int ch_phi(double t, const double *q, double *Phi, void *user)
{
    (void)t;
    const chain *c = user;
    for (int k = 0; k < c->links; ++k) {
        double dx, dy;
        link_vector(q, k, &dx, &dy);
        Phi[k] = dx * dx + dy * dy - c->l * c->l;
    }
    return 0;
}

static int ch_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    (void)t;
    const chain *c = user;
    int n = 2 * c->links;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < c->links; ++i) J[i + j * ld] = 0.0;
    for (int k = 0; k < c->links; ++k) {
        double dx, dy;
        link_vector(q, k, &dx, &dy);
        J[k + (2 * k) * ld] = 2.0 * dx;
        J[k + (2 * k + 1) * ld] = 2.0 * dy;
        if (k > 0) {
            J[k + (2 * k - 2) * ld] = -2.0 * dx;
            J[k + (2 * k - 1) * ld] = -2.0 * dy;
        }
    }
    return 0;
}

static int ch_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    (void)t, (void)q;
    const chain *c = user;
    for (int k = 0; k < c->links; ++k) Phi_t[k] = 0.0;
    return 0;
}

/* xi_k = -2 |v_k - v_{k-1}|^2 */
static int ch_xi(double t, const double *q, const double *qdot, double *xi, void *user)
{
    (void)t, (void)q;
    const chain *c = user;
    for (int k = 0; k < c->links; ++k) {
        double du, dv;
        link_vector(qdot, k, &du, &dv);
        xi[k] = -2.0 * (du * du + dv * dv);
    }
    return 0;
}

/* the chain at angles 0.3 + 0.1 k from the vertical, speeds 0.5 (k + 1)
 * rad/s about each joint: on the manifold by construction */
static void chain_state(const chain *c, double *y)
{
    int n = 2 * c->links;
    double x = 0.0, z = 0.0, u = 0.0, w = 0.0;
    for (int k = 0; k < c->links; ++k) {
        double a = 0.3 + 0.1 * k, rate = 0.5 * (k + 1);
        x += c->l * sin(a);
        z -= c->l * cos(a);
        u += c->l * cos(a) * rate;
        w += c->l * sin(a) * rate;
        y[2 * k] = x;
        y[2 * k + 1] = z;
        y[n + 2 * k] = u;
        y[n + 2 * k + 1] = w;
    }
}

/* ---- A. per call ------------------------------------------------------------ */

typedef struct {
    cdyn_mbs *mbs;
    int n;
    double y[2 * NMAX], y_off[2 * NMAX], work[2 * NMAX], ydot[2 * NMAX];
    int which; /* 0 rhs, 1 project from off, 2 project on, 3 velocities from off */
} call;

static int run_call(void *ctx)
{
    call *c = ctx;
    int size = 2 * c->n;
    switch (c->which) {
    case 0: return cdyn_mbs_rhs(c->mbs, 0.0, c->y, c->ydot) != CDYN_OK;
    case 1: memcpy(c->work, c->y_off, sizeof(double) * (size_t)size); break;
    default: memcpy(c->work, c->which == 2 ? c->y : c->y_off, sizeof(double) * (size_t)size);
    }
    cdyn_status st = c->which == 3 ? cdyn_mbs_project_velocities(c->mbs, 0.0, c->work)
                                   : cdyn_mbs_project(c->mbs, 0.0, c->work);
    return st != CDYN_OK;
}

static void per_call(const char *name, cdyn_mbs *mbs, int n, const double *y, int quick)
{
    static const char *what[] = {"cdyn_mbs_rhs", "project, 1e-9 off", "project, on manifold",
                                 "project_velocities"};
    for (int metric = 0; metric < 2; ++metric) {
        cdyn_mbs_set_projection_metric(mbs, metric ? CDYN_PROJECT_MASS : CDYN_PROJECT_MIN_NORM);
        call c[4];
        bu_path p[4];
        for (int k = 0; k < 4; ++k) {
            c[k].mbs = mbs;
            c[k].n = n;
            c[k].which = k;
            memcpy(c[k].y, y, sizeof(double) * 2 * (size_t)n);
            for (int i = 0; i < 2 * n; ++i) c[k].y_off[i] = y[i] * (1.0 + 1e-9 * sin(1.0 + i));
            p[k] = (bu_path){.fn = run_call, .ctx = &c[k]};
        }
        bu_measure(p, 4, quick ? 5 : 31, quick ? 3e-4 : 5e-3);
        for (int k = 0; k < 4; ++k)
            printf("  %-18s %-9s %-22s %9.3f us [%7.3f, %7.3f] %6.2f x rhs%s\n", name,
                   metric ? "mass" : "min-norm", what[k], 1e6 * p[k].t.median, 1e6 * p[k].t.min,
                   1e6 * p[k].t.max, p[k].t.median / p[0].t.median,
                   p[k].failures ? "  FAILED" : "");
    }
}

/* ---- C. the Jacobian of the right-hand side ------------------------------------- */

typedef struct {
    cdyn_mbs *mbs;
    int n, which; /* 0 rhs, 1 cdyn_mbs_rhs_jacobian, 2 forward differences */
    double y[2 * NMAX], ys[2 * NMAX], f0[2 * NMAX], f[2 * NMAX];
    double J[4 * NMAX * NMAX];
} jac_call;

/* which 2: what CVODE's dense difference quotients do, 2n + 1 right-hand
 * sides (steps sqrt(eps) max(|y_j|, 1e-3)) */
static int run_jacobian(void *ctx)
{
    jac_call *c = ctx;
    int size = 2 * c->n, bad = 0;
    if (c->which == 0) return cdyn_mbs_rhs(c->mbs, 0.0, c->y, c->f0) != CDYN_OK;
    if (c->which == 1) return cdyn_mbs_rhs_jacobian(c->mbs, 0.0, c->y, NULL, c->J, size) != CDYN_OK;
    bad |= cdyn_mbs_rhs(c->mbs, 0.0, c->y, c->f0) != CDYN_OK;
    memcpy(c->ys, c->y, sizeof(double) * (size_t)size);
    for (int j = 0; j < size; ++j) {
        double h = 1.4901161193847656e-08 * fmax(fabs(c->y[j]), 1e-3);
        c->ys[j] = c->y[j] + h;
        bad |= cdyn_mbs_rhs(c->mbs, 0.0, c->ys, c->f) != CDYN_OK;
        c->ys[j] = c->y[j];
        for (int i = 0; i < size; ++i) c->J[i + (size_t)j * size] = (c->f[i] - c->f0[i]) / h;
    }
    return bad;
}

static void per_jacobian(const char *name, cdyn_mbs *mbs, int n, const double *y, int quick)
{
    static const char *what[] = {"cdyn_mbs_rhs", "cdyn_mbs_rhs_jacobian", "2n+1 forward diffs"};
    static jac_call c[3];
    bu_path p[3];
    for (int k = 0; k < 3; ++k) {
        c[k].mbs = mbs;
        c[k].n = n;
        c[k].which = k;
        memcpy(c[k].y, y, sizeof(double) * 2 * (size_t)n);
        p[k] = (bu_path){.fn = run_jacobian, .ctx = &c[k]};
    }
    bu_measure(p, 3, quick ? 5 : 31, quick ? 3e-4 : 5e-3);
    for (int k = 0; k < 3; ++k)
        printf("  %-18s %-22s %9.3f us [%8.3f, %8.3f] %6.2f x rhs %6.2f x forward diffs%s\n",
               name, what[k], 1e6 * p[k].t.median, 1e6 * p[k].t.min, 1e6 * p[k].t.max,
               p[k].t.median / p[0].t.median, p[k].t.median / p[2].t.median,
               p[k].failures ? "  FAILED" : "");
}

/* ---- B. CVODE on the pendulum ------------------------------------------------------ */

static const double T_END = 10.0;

/* CVODE's right-hand side and projection around bench_pendulum.h's
 * hand-written step: y' = f(y), and corr = projected - ycur with the error
 * estimate's halves projected onto the tangent (radial part removed) */
static int hand_rhs(sunrealtype t, N_Vector yv, N_Vector ydv, void *user)
{
    (void)t, (void)user;
    pend_hand_rhs(N_VGetArrayPointer(yv), N_VGetArrayPointer(ydv));
    return 0;
}

static int hand_project(sunrealtype t, N_Vector ycur, N_Vector corr, sunrealtype eps,
                        N_Vector err, void *user)
{
    (void)t, (void)eps, (void)user;
    const double *y = N_VGetArrayPointer(ycur);
    double *c = N_VGetArrayPointer(corr);
    memcpy(c, y, 4 * sizeof(double));
    pend_hand_project(c);
    double r = sqrt(c[0] * c[0] + c[1] * c[1]), nx = c[0] / r, ny = c[1] / r;
    for (int i = 0; i < 4; ++i) c[i] -= y[i];
    if (err) {
        double *e = N_VGetArrayPointer(err);
        double ep = e[0] * nx + e[1] * ny, ev = e[2] * nx + e[3] * ny;
        e[0] -= ep * nx;
        e[1] -= ep * ny;
        e[2] -= ev * nx;
        e[3] -= ev * ny;
    }
    return 0;
}

typedef struct {
    SUNContext ctx;
    int kind; /* 0 hand + projection, 1 cdyn + projection, 2 hand, no projection */
    cdyn_mbs *mbs;
    long steps, projections;
    double angle_error;
} pend_run;

static int run_pendulum(void *arg)
{
    pend_run *R = arg;
    N_Vector y = N_VNew_Serial(4, R->ctx);
    double *py = N_VGetArrayPointer(y);
    pend_initial(py);
    void *cv = CVodeCreate(CV_BDF, R->ctx);
    SUNMatrix A = SUNDenseMatrix(4, 4, R->ctx);
    SUNLinearSolver LS = SUNLinSol_Dense(y, A, R->ctx);
    int flag = CVodeInit(cv, R->kind == 1 ? cdyn_cvode_mbs_rhs : hand_rhs, 0.0, y);
    flag |= CVodeSStolerances(cv, 1e-8, 1e-10);
    flag |= CVodeSetLinearSolver(cv, LS, A);
    flag |= CVodeSetMaxNumSteps(cv, 100000);
    if (R->kind == 1) flag |= cdyn_cvode_attach_mbs(cv, R->mbs);
    if (R->kind == 0) flag |= CVodeSetProjFn(cv, hand_project);
    sunrealtype t = 0.0;
    if (flag == 0) flag = CVode(cv, T_END, y, &t, CV_NORMAL);
    CVodeGetNumSteps(cv, &R->steps);
    R->projections = 0;
    if (R->kind != 2) CVodeGetNumProjEvals(cv, &R->projections);
    R->angle_error = fabs(atan2(py[0], -py[1]) - pend_exact_theta(T_END));
    CVodeFree(&cv);
    SUNLinSolFree(LS);
    SUNMatDestroy(A);
    N_VDestroy(y);
    return flag < 0;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_projection", &quick, &csv_path) != 0) return EXIT_FAILURE;
    if (csv_path) fprintf(stderr, "bench_projection: --csv is not supported; ignored\n");
    printf("cdyn %s projection benchmark (%s mode)\n", cdyn_version(), quick ? "quick" : "full");
    bu_print_machine(stdout, "  ");

    printf("\nA. per call, median [min, max]; ratio to cdyn_mbs_rhs at the same state\n");
    cdyn_mbs *pend = cdyn_mbs_create(2, 1, NULL);
    cdyn_mbs_set_model(pend, pend_mass, pend_force, pend_phi, pend_jacobian, NULL);
    cdyn_mbs_set_time_terms(pend, pend_phi_t, pend_xi);
    double yp[4] = {PEND_L * sin(0.5), -PEND_L * cos(0.5), PEND_L * cos(0.5) * 1.2,
                    PEND_L * sin(0.5) * 1.2};
    per_call("pendulum n=2", pend, 2, yp, quick);

    cdyn_mbs *crank = cdyn_mbs_create(N, M_CON, NULL);
    cdyn_mbs_set_model(crank, mass, force, phi, jacobian, NULL);
    cdyn_mbs_set_time_terms(crank, phi_t, xi);
    double th1 = 0.6, th3 = -asin(CRANK * sin(th1) / ROD);
    double yc[6] = {CRANK * cos(th1) + ROD * cos(th3), th1, th3, 0.0, 2.0, 0.0};
    cdyn_mbs_project(crank, 0.0, yc); /* consistent speeds */
    per_call("slider crank n=3", crank, N, yc, quick);

    chain ch = {LINKS, 0.5, 0.4};
    cdyn_mbs *chn = cdyn_mbs_create(2 * LINKS, LINKS, NULL);
    cdyn_mbs_set_model(chn, ch_mass, ch_force, ch_phi, ch_jacobian, &ch);
    cdyn_mbs_set_time_terms(chn, ch_phi_t, ch_xi);
    double ychain[4 * LINKS];
    chain_state(&ch, ychain);
    per_call("chain n=12", chn, 2 * LINKS, ychain, quick);

    printf("\nB. CVODE BDF on the pendulum, rtol 1e-8, atol 1e-10, 10 s, error projection on\n");
    SUNContext ctx = NULL;
    if (SUNContext_Create(SUN_NO_COMM, &ctx) != 0) return EXIT_FAILURE;
    static const char *kinds[] = {"hand rhs + hand projection", "cdyn rhs + cdyn projection",
                                  "hand rhs, no projection"};
    pend_run R[3];
    bu_path p[3];
    for (int k = 0; k < 3; ++k) {
        R[k] = (pend_run){.ctx = ctx, .kind = k, .mbs = pend};
        p[k] = (bu_path){.fn = run_pendulum, .ctx = &R[k]};
    }
    cdyn_mbs_set_projection_metric(pend, CDYN_PROJECT_MIN_NORM);
    bu_measure(p, 3, quick ? 3 : 11, quick ? 1e-3 : 0.1);
    for (int k = 0; k < 3; ++k) {
        int failed = run_pendulum(&R[k]);
        printf("  %-28s %10.4f ms [%8.4f, %8.4f] %6.2f x hand   steps %5ld  projections %5ld  "
               "angle error %.2e rad%s\n",
               kinds[k], 1e3 * p[k].t.median, 1e3 * p[k].t.min, 1e3 * p[k].t.max,
               p[k].t.median / p[0].t.median, R[k].steps, R[k].projections, R[k].angle_error,
               failed || p[k].failures ? "  FAILED" : "");
    }
    printf("\nC. the Jacobian d ydot / dy (Lagrange form), per call, median [min, max]; ratios "
           "to one cdyn_mbs_rhs and to a forward-difference Jacobian (2n + 1 rhs, what CVODE's "
           "difference quotients cost)\n");
    per_jacobian("pendulum n=2", pend, 2, yp, quick);
    per_jacobian("slider crank n=3", crank, N, yc, quick);
    per_jacobian("chain n=12", chn, 2 * LINKS, ychain, quick);

    SUNContext_Free(&ctx);
    cdyn_mbs_free(pend);
    cdyn_mbs_free(crank);
    cdyn_mbs_free(chn);
    return EXIT_SUCCESS;
}
