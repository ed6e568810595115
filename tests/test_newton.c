/* Check suite for cdyn_newton (THEORY T2).
 *
 * Every expected value comes from somewhere other than the library:
 *  - analytic roots of the chosen systems;
 *  - exact identities of Newton's method on them: on the circle/line system
 *    the iteration is Heron's (Babylonian) square root after one step,
 *    e_{n+1} = e_n^2 / (2 x_n); for a homogeneous quadratic q, G = q - c,
 *    e_{n+1} = J(x_n)^{-1} q(e_n) exactly;
 *  - hand calculations: 2x2 and 3x3 inverses by the adjugate, the
 *    minimum-norm step -J^T (J J^T)^{-1} G of a 2x3 J, pseudo-inverses of
 *    rank-one matrices J = u v^T (J+ = v u^T / (|u|^2 |v|^2)) and the
 *    minimum-norm solution x - (n.x / |n|^2) n of a rank-(p-1) system with
 *    null vector n;
 *  - iterates and residual norms recorded inside the residual callback, from
 *    which the test itself decides which iterate is the best one.
 *
 * Tolerances are justified where they appear (rounding level ~ cond(J) eps
 * |x|, or a bound ||x - x*|| <= ||J^{-1}|| ||G|| at the residual tolerance).
 */
#include <check.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "testutil.h"
#include "cdyn/newton.h"
#include "cdyn/status.h"
#include "newton_internal.h"

enum { MAXP = 4, MAXREC = 256, GUARD = 8 };
static const double SENTINEL = 12345.0;
static const int ISENTINEL = -777;

/* ------------------------------------------------------------------------ */
/* Small vector helpers.                                                     */

static double vec_inf(int n, const double *x)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static double dist_inf(int n, const double *x, const double *y)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i)
        if (fabs(x[i] - y[i]) > m) m = fabs(x[i] - y[i]);
    return m;
}

/* Bitwise-identical doubles (also for NaN). */
static int same_bits(int n, const double *x, const double *y)
{
    return memcmp(x, y, sizeof(double) * (size_t)n) == 0;
}

static int all_finite(int n, const double *x)
{
    for (int i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void assert_report_finite(const cdyn_newton_report *r)
{
    ck_assert(isfinite(r->residual_norm));
    ck_assert(isfinite(r->step_norm));
    ck_assert(isfinite(r->smallest_kept));
    ck_assert(isfinite(r->largest_dropped));
}

static cdyn_newton_report get_report(cdyn_newton *nt)
{
    cdyn_newton_report r;
    memset(&r, 0xff, sizeof r);
    ck_assert_int_eq(cdyn_newton_get_report(nt, &r), CDYN_OK);
    return r;
}

static cdyn_newton *create_ok(int k, int p)
{
    cdyn_status st = CDYN_ERR_LAPACK;
    cdyn_newton *nt = cdyn_newton_create(k, p, &st);
    ck_assert_ptr_nonnull(nt);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(cdyn_newton_rows(nt), k); /* equations */
    ck_assert_int_eq(cdyn_newton_size(nt), p); /* unknowns */
    return nt;
}

/* ------------------------------------------------------------------------ */
/* Callback bookkeeping: every residual call records x and ||G||_inf, and    */
/* failures (non-zero return, NaN/Inf) can be injected on a chosen call.     */

typedef struct {
    double a;              /* problem parameter */
    const double *A;       /* linear problems G = A x - b: A k x p, leading dimension k */
    const double *b;
    int k, p;
    int calls;             /* residual callbacks so far */
    int jac_calls;         /* Jacobian callbacks so far */
    int fail_call, fail_code;       /* residual returns fail_code on that call (1-based) */
    int bad_call;                   /* residual writes bad_value into G[k-1] on that call */
    double bad_value;
    int jac_fail_call, jac_fail_code;
    int jac_bad_call;               /* Jacobian writes bad_value into J(0,0) on that call */
    int nrec;
    double xrec[MAXREC][MAXP];      /* x of each residual call */
    double gnorm[MAXREC];           /* its ||G||_inf; INFINITY if the call failed */
} tracker;

static void tracker_init(tracker *t, int k, int p, double a)
{
    memset(t, 0, sizeof *t);
    t->k = k;
    t->p = p;
    t->a = a;
    t->bad_value = NAN;
}

static int finish_residual(tracker *t, const double *x, double *G)
{
    int c = ++t->calls;
    int i = t->nrec < MAXREC ? t->nrec++ : -1;
    if (i >= 0)
        for (int j = 0; j < t->p; ++j) t->xrec[i][j] = x[j];
    if (c == t->fail_call) {
        if (i >= 0) t->gnorm[i] = INFINITY;
        return t->fail_code;
    }
    if (c == t->bad_call) {
        G[t->k - 1] = t->bad_value;
        if (i >= 0) t->gnorm[i] = INFINITY;
        return 0;
    }
    if (i >= 0) t->gnorm[i] = vec_inf(t->k, G);
    return 0;
}

static int finish_jacobian(tracker *t, double *J)
{
    int c = ++t->jac_calls;
    if (c == t->jac_fail_call) return t->jac_fail_code;
    if (c == t->jac_bad_call) J[0] = t->bad_value;
    return 0;
}

/* Circle and line, 2x2: x0^2 + x1^2 = a^2, x0 = x1. Root (a, a)/sqrt(2). */
static int res_circle_line(const double *x, double *G, void *user)
{
    tracker *t = user;
    G[0] = x[0] * x[0] + x[1] * x[1] - t->a * t->a;
    G[1] = x[0] - x[1];
    return finish_residual(t, x, G);
}

static int jac_circle_line(const double *x, double *J, int ldj, void *user)
{
    J[0] = 2.0 * x[0];
    J[1] = 1.0;
    J[ldj] = 2.0 * x[1];
    J[1 + ldj] = -1.0;
    return finish_jacobian(user, J);
}

/* Homogeneous quadratic 3x3: q(x) = (x0^2 + x1 x2, x1^2 - x0 x2, x2^2 + x0 x1),
 * G(x; a) = q(x) - a^2 q(1, 2, 3) = q(x) - a^2 (7, 1, 11). Root a (1, 2, 3). */
static void quad3_q(const double *x, double *q)
{
    q[0] = x[0] * x[0] + x[1] * x[2];
    q[1] = x[1] * x[1] - x[0] * x[2];
    q[2] = x[2] * x[2] + x[0] * x[1];
}

static void quad3_jac(const double *x, double *J, int ldj)
{
    J[0 + 0 * ldj] = 2.0 * x[0];
    J[0 + 1 * ldj] = x[2];
    J[0 + 2 * ldj] = x[1];
    J[1 + 0 * ldj] = -x[2];
    J[1 + 1 * ldj] = 2.0 * x[1];
    J[1 + 2 * ldj] = -x[0];
    J[2 + 0 * ldj] = x[1];
    J[2 + 1 * ldj] = x[0];
    J[2 + 2 * ldj] = 2.0 * x[2];
}

static int res_quad3(const double *x, double *G, void *user)
{
    tracker *t = user;
    const double c[3] = {7.0, 1.0, 11.0};
    quad3_q(x, G);
    for (int i = 0; i < 3; ++i) G[i] -= t->a * t->a * c[i];
    return finish_residual(t, x, G);
}

static int jac_quad3(const double *x, double *J, int ldj, void *user)
{
    quad3_jac(x, J, ldj);
    return finish_jacobian(user, J);
}

/* Cubic with a Newton 2-cycle 0 -> 1 -> 0 (f = x^3 - 2x + 2), coupled to a
 * linear equation: G = (x0^3 - 2 x0 + 2, x1 - x0). */
static int res_cubic_cycle(const double *x, double *G, void *user)
{
    G[0] = x[0] * x[0] * x[0] - 2.0 * x[0] + 2.0;
    G[1] = x[1] - x[0];
    return finish_residual(user, x, G);
}

static int jac_cubic_cycle(const double *x, double *J, int ldj, void *user)
{
    J[0] = 3.0 * x[0] * x[0] - 2.0;
    J[1] = -1.0;
    J[ldj] = 0.0;
    J[1 + ldj] = 1.0;
    return finish_jacobian(user, J);
}

/* Double root, 1x1: G = x^2. Newton halves x exactly: x_n = 2^-n x_0. */
static int res_square(const double *x, double *G, void *user)
{
    G[0] = x[0] * x[0];
    return finish_residual(user, x, G);
}

static int jac_square(const double *x, double *J, int ldj, void *user)
{
    (void)ldj;
    J[0] = 2.0 * x[0];
    return finish_jacobian(user, J);
}

/* Scalar G = x^2 - a. */
static int res_square_minus_a(const double *x, double *G, void *user)
{
    tracker *t = user;
    G[0] = x[0] * x[0] - t->a;
    return finish_residual(t, x, G);
}

/* arctan: Newton diverges with growing |G| from |x0| > 1.3917. */
static int res_atan(const double *x, double *G, void *user)
{
    G[0] = atan(x[0]);
    return finish_residual(user, x, G);
}

static int jac_atan(const double *x, double *J, int ldj, void *user)
{
    (void)ldj;
    J[0] = 1.0 / (1.0 + x[0] * x[0]);
    return finish_jacobian(user, J);
}

/* Linear G = A x - b (k x p, A leading dimension k). */
static int res_linear(const double *x, double *G, void *user)
{
    tracker *t = user;
    for (int i = 0; i < t->k; ++i) {
        double s = -t->b[i];
        for (int j = 0; j < t->p; ++j) s += t->A[i + j * t->k] * x[j];
        G[i] = s;
    }
    return finish_residual(t, x, G);
}

static int jac_linear(const double *x, double *J, int ldj, void *user)
{
    tracker *t = user;
    (void)x;
    for (int j = 0; j < t->p; ++j)
        for (int i = 0; i < t->k; ++i) J[i + j * ldj] = t->A[i + j * t->k];
    return finish_jacobian(t, J);
}

/* Signed square (T2.5): G = (x0 |x0|, x0 + x1 - 1); dG0/dx0 = 2|x0|. */
static int res_signed_square(const double *x, double *G, void *user)
{
    G[0] = x[0] * fabs(x[0]);
    G[1] = x[0] + x[1] - 1.0;
    return finish_residual(user, x, G);
}

static int jac_signed_square(const double *x, double *J, int ldj, void *user)
{
    J[0] = 2.0 * fabs(x[0]);
    J[1] = 1.0;
    J[ldj] = 0.0;
    J[1 + ldj] = 1.0;
    return finish_jacobian(user, J);
}

/* Unit circle as one equation in two unknowns: G = x0^2 + x1^2 - 1. */
static int res_circle(const double *x, double *G, void *user)
{
    G[0] = x[0] * x[0] + x[1] * x[1] - 1.0;
    return finish_residual(user, x, G);
}

static int jac_circle(const double *x, double *J, int ldj, void *user)
{
    J[0] = 2.0 * x[0];
    J[ldj] = 2.0 * x[1];
    return finish_jacobian(user, J);
}

/* ||A^{-1}||_inf of a 3x3 (column-major, ld 3) by the adjugate:
 * cof(i, j) with cyclic indices carries its sign, inv(i, j) = cof(j, i)/det. */
static double inv3_norm_inf(const double *A)
{
    double cof[3][3];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            int i1 = (i + 1) % 3, i2 = (i + 2) % 3, j1 = (j + 1) % 3, j2 = (j + 2) % 3;
            cof[i][j] = A[i1 + 3 * j1] * A[i2 + 3 * j2] - A[i1 + 3 * j2] * A[i2 + 3 * j1];
        }
    double det = A[0] * cof[0][0] + A[3] * cof[0][1] + A[6] * cof[0][2];
    double norm = 0.0;
    for (int i = 0; i < 3; ++i) {
        double row = 0.0;
        for (int j = 0; j < 3; ++j) row += fabs(cof[j][i] / det);
        if (row > norm) norm = row;
    }
    return norm;
}

/* A 2x2 object still solves the circle/line system correctly. */
static void assert_still_solves_2x2(cdyn_newton *nt, int with_jacobian)
{
    tracker t;
    tracker_init(&t, 2, 2, 2.0);
    double x[2] = {3.0, 1.0};
    cdyn_status st = cdyn_newton_solve(nt, res_circle_line, with_jacobian ? jac_circle_line : NULL,
                                       &t, x);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_double_eq_tol(x[0], sqrt(2.0), 1e-10);
    ck_assert_double_eq_tol(x[1], sqrt(2.0), 1e-10);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.converged, 1);
    ck_assert_int_eq(r.callback_code, 0);
}

/* ======================================================================== */
/* 1. Quadratic convergence.                                                 */

/* Circle/line from (3, 1), a = 2, root (sqrt2, sqrt2). The first step solves
 * the line exactly: J = [6 2; 1 -1], G = (6, 2) give dx = (-1.25, 0.75), so
 * x1 = (1.75, 1.75). On the line, Newton for 2 x^2 - 4 is Heron's iteration
 * x+ = (x + 2/x)/2 with the exact error identity
 *     x+ - sqrt2 = (x - sqrt2)^2 / (2 x),
 * so e_{n+1} <= C e_n^2 with C = 1/(2 sqrt2) (x_n >= sqrt2 by AM-GM, n >= 1).
 * The iterates are obtained by re-running from the same start with
 * max_iterations = 1, 2, ...: the residual decreases monotonically along
 * this sequence (6, 2.125, then Heron from above), so the best iterate after
 * n steps is x_n. */
START_TEST(circle_line_error_follows_heron_identity_with_order_two)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double r2 = sqrt(2.0);
    double xs[16][2], e[16];
    int m = -1;
    xs[0][0] = 3.0;
    xs[0][1] = 1.0;
    e[0] = fmax(fabs(3.0 - r2), fabs(1.0 - r2));
    for (int n = 1; n < 16; ++n) {
        tracker t;
        tracker_init(&t, 2, 2, 2.0);
        double x[2] = {3.0, 1.0};
        ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, n), CDYN_OK);
        cdyn_status st = cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x);
        cdyn_newton_report r = get_report(nt);
        xs[n][0] = x[0];
        xs[n][1] = x[1];
        e[n] = fmax(fabs(x[0] - r2), fabs(x[1] - r2));
        if (st == CDYN_OK) {
            ck_assert_int_eq(r.iterations, n);
            m = n;
            break;
        }
        ck_assert_int_eq(st, CDYN_ERR_NOCONV);
        ck_assert_int_eq(r.iterations, n);
    }
    /* Heron from 1.75: 1.4464, 1.41424, 1.4142136 (e = 4.6e-8), then the
     * residual 2 x^2 - 4 ~ 2.6e-7 needs one more step: 5 in all. */
    ck_assert_int_eq(m, 5);
    ck_assert_double_eq_tol(xs[1][0], 1.75, 4 * DBL_EPSILON);
    ck_assert_double_eq_tol(xs[1][1], 1.75, 4 * DBL_EPSILON);
    printf("circle/line: n  e_n  log(e_n+1)/log(e_n)  log(e_n+1/e_n)/log(e_n/e_n-1)\n");
    for (int n = 0; n <= m; ++n) {
        double o1 = n < m ? log(e[n + 1]) / log(e[n]) : NAN;
        double o2 = n >= 1 && n < m ? log(e[n + 1] / e[n]) / log(e[n] / e[n - 1]) : NAN;
        printf("  %d  %.3e  %.3f  %.3f\n", n, e[n], o1, o2);
    }
    fflush(stdout);
    /* Identity check, n >= 1. Rounding in a computed iterate: cond(J) = 2x
     * ~ 2.8 at the root, |x| ~ 1.4, a few eps: allowance 1e-14. */
    for (int n = 1; n < m; ++n) {
        double x = xs[n][0];
        double pred = (x - r2) * (x - r2) / (2.0 * x);
        ck_assert_msg(fabs((xs[n + 1][0] - r2) - pred) <= 1e-14,
                      "step %d: error %.3e, Heron predicts %.3e", n, xs[n + 1][0] - r2, pred);
        ck_assert_double_le(e[n + 1], e[n] * e[n] / (2.0 * r2) + 1e-14);
    }
    /* Order: the last two steps whose result is above the rounding floor
     * (1e-12; rounding sits at ~1e-15) have log(e+)/log(e) >= 1.8. */
    int checked = 0;
    for (int n = m - 1; n >= 0 && checked < 2; --n) {
        if (e[n + 1] < 1e-12) continue;
        double order = log(e[n + 1]) / log(e[n]);
        ck_assert_msg(order >= 1.8, "order estimate %.3f at step %d", order, n);
        ++checked;
    }
    ck_assert_int_eq(checked, 2);
    cdyn_newton_free(nt);
}
END_TEST

/* 3x3 quadratic system from (1.5, 1.5, 2.5) to (1, 2, 3). For a homogeneous
 * quadratic q, G(x) = J(x) e - q(e) with e = x - x*, so Newton's error is
 *     e_{n+1} = J(x_n)^{-1} q(e_n),  |q_i(e)| <= 2 ||e||_inf^2,
 * i.e. e_{n+1} <= C_n e_n^2 with C_n = 2 ||J(x_n)^{-1}||_inf (about 1.4 near
 * the root, where det J = 76). Iterates recorded in the residual callback
 * (exact Jacobian: one residual call per iterate). */
START_TEST(quadratic_3x3_error_obeys_newton_bound_with_order_two)
{
    cdyn_newton *nt = create_ok(3, 3);
    tracker t;
    tracker_init(&t, 3, 3, 1.0);
    const double xstar[3] = {1.0, 2.0, 3.0};
    double x[3] = {1.5, 1.5, 2.5};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_quad3, jac_quad3, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    int n = r.iterations;
    ck_assert_int_ge(n, 4);
    ck_assert_int_eq(t.calls, n + 1);
    ck_assert_int_eq(r.residual_evaluations, n + 1);
    /* convergence is judged by the correction predicted at the returned x
     * (newton.h), so J is evaluated at every iterate, the last included */
    ck_assert_int_eq(t.jac_calls, n + 1);
    ck_assert_int_eq(r.svd_steps, 0);
    ck_assert_int_eq(r.rank, 3);
    double e[MAXREC], C[MAXREC];
    printf("quadratic 3x3: i  e_i  C_i  log(e_i+1)/log(e_i)\n");
    for (int i = 0; i <= n; ++i) {
        double J[9];
        e[i] = dist_inf(3, t.xrec[i], xstar);
        quad3_jac(t.xrec[i], J, 3);
        C[i] = 2.0 * inv3_norm_inf(J);
    }
    for (int i = 0; i <= n; ++i)
        printf("  %d  %.3e  %.3f  %.3f\n", i, e[i], C[i],
               i < n ? log(e[i + 1]) / log(e[i]) : NAN);
    fflush(stdout);
    /* Rounding allowance for a computed iterate: cond(J) ~ 10, |x| ~ 3,
     * a few eps -> ~1e-14; 1e-13 leaves a margin. */
    for (int i = 0; i < n; ++i)
        ck_assert_msg(e[i + 1] <= C[i] * e[i] * e[i] + 1e-13,
                      "step %d: e+ = %.3e > C e^2 = %.3e", i, e[i + 1], C[i] * e[i] * e[i]);
    int checked = 0;
    for (int i = n - 1; i >= 0 && checked < 2; --i) {
        if (e[i + 1] < 1e-12) continue; /* rounding floor */
        double order = log(e[i + 1]) / log(e[i]);
        ck_assert_msg(order >= 1.8, "order estimate %.3f at step %d", order, i);
        ++checked;
    }
    ck_assert_int_eq(checked, 2);
    /* The returned x is the last iterate. It passed the error test: the
     * correction predicted there is |dx_j| <= 1e-10 |x_j| (default rtol; the
     * default atol is 0 on a fresh object), and for this quadratic
     * e = -dx + J^{-1} q(e) with ||J^{-1} q(e)|| <= 1.4 ||e||^2, so
     * ||e||_inf <= 1e-10 * 3 (1 + 1e-9) + rounding: 3.1e-10 bounds it. */
    ck_assert(same_bits(3, x, t.xrec[n]));
    ck_assert_double_le(dist_inf(3, x, xstar), 3.1e-10);
    ck_assert_double_le(r.error_ratio, 1.0);
    ck_assert_double_le(r.residual_ratio, 1.0);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 2. The iteration cap.                                                     */



/* An orifice c - 1e10 x|x| = 0 whose constant falls by 1e-4 per solve,
 * from 1e5 to 1e-31, one object warm-started from each root. The first
 * solve teaches it x's magnitude, 3.2e-3; from c = 1e-19 on, the last root
 * (100 times the new one) was within rtol of that magnitude, the equation
 * (the unknown's own term beside a constant 1e-4 of it) gave no scale to
 * cap it, and x came back 1e2 to 1e8 times the root with CDYN_OK. An
 * acceptance that rests on a learned magnitude no equation bounds now
 * waits for one more iterate, whose fit over two iterates finds the
 * constant: the root at every c. */
static int drain_residual(const double *x, double *G, void *user)
{
    G[0] = *(const double *)user - 1e10 * x[0] * fabs(x[0]);
    return 0;
}

static int drain_jacobian(const double *x, double *J, int ld, void *user)
{
    (void)ld, (void)user;
    J[0] = -2e10 * fabs(x[0]);
    return 0;
}

/* The price newton.h states: a closed valve (c = 0) whose flow sits at a
 * stale 1e-14 after the object learned 3.2e-3 takes one iterate per solve
 * (none before), halves the flow and keeps its learned tolerance: CDYN_OK
 * with |x| within rtol times that magnitude. */
START_TEST(a_closed_valve_with_a_stale_flow_costs_one_iterate)
{
    cdyn_newton *nt = cdyn_newton_create(1, 1, NULL);
    ck_assert_ptr_nonnull(nt);
    double c = 1e5, x[1] = {1e-3};
    ck_assert_int_eq(cdyn_newton_solve(nt, drain_residual, drain_jacobian, &c, x), CDYN_OK);
    c = 0.0;
    x[0] = 1e-14;
    for (int k = 0; k < 5; ++k) {
        double before = x[0];
        ck_assert_int_eq(cdyn_newton_solve(nt, drain_residual, drain_jacobian, &c, x), CDYN_OK);
        cdyn_newton_report r;
        ck_assert_int_eq(cdyn_newton_get_report(nt, &r), CDYN_OK);
        ck_assert_int_eq(r.iterations, 1);
        ck_assert_double_eq(x[0], 0.5 * before); /* Newton on k x|x| halves x, exactly */
        ck_assert_double_le(fabs(x[0]), 1e-10 * sqrt(1e5 / 1e10));
    }
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(a_learned_magnitude_does_not_hide_a_constant_behind_a_stale_term)
{
    cdyn_newton *nt = cdyn_newton_create(1, 1, NULL);
    ck_assert_ptr_nonnull(nt);
    double x[1] = {1e-3};
    for (double c = 1e5; c >= 1e-31; c *= 1e-4) {
        ck_assert_int_eq(cdyn_newton_solve(nt, drain_residual, drain_jacobian, &c, x), CDYN_OK);
        double root = sqrt(c / 1e10);
        ck_assert_msg(fabs(x[0] - root) <= 1e-8 * root, "c = %g: x = %.6e, the root %.6e", c,
                      x[0], root);
    }
    cdyn_newton_free(nt);
}
END_TEST

/* Two orifices in series from a supply c: c - p - K Q|Q| = 0 and
 * p - K Q|Q| = 0, K = 1e10, unknowns (Q, p). By hand Q = sqrt(c / 2K),
 * p = c / 2. Found by a second adversarial review, all with default
 * settings:
 *   - from the fresh guess (1e-3, 1) at c = 1e-17: Q 10.5 % off with
 *     CDYN_OK. The affine part G - J x of p - K Q|Q| is K Q|Q| itself;
 *     taken at an early iterate (2.5e3 at Q = 5e-4) as a constant of the
 *     equation and kept as the largest any iterate showed, it passed the
 *     equation at 20 % of its terms. Now each iterate's own (and the
 *     guess's) count;
 *   - one orifice alone (c - K Q|Q|) from 1e-3 at c = 1e-17: the halving
 *     corrections looked like a double root, the doubled step landed on
 *     Q = 0 exactly, where J = 0: CDYN_ERR_NOCONV. Such a landing is kept
 *     only where G is at its rounding;
 *   - a tank drained to c = 1e-33 and refilled to 1e5 at once (warm
 *     starts, the supply falling by 1e-2 per solve, 20 solves per cycle):
 *     from Q = 3e-22 the correction toward 3e-3 was 5e15, and 40 halvings
 *     never came back below the root: CDYN_ERR_NOCONV. The halvings now
 *     start again from a step no unknown moves more than 16 times its
 *     value or learned magnitude. */
typedef struct {
    double c, K;
    int series;
} orifices;

static int orifices_residual(const double *x, double *G, void *user)
{
    const orifices *o = user;
    double q = o->K * x[0] * fabs(x[0]);
    if (!o->series) {
        G[0] = o->c - q;
        return 0;
    }
    G[0] = o->c - x[1] - q;
    G[1] = x[1] - q;
    return 0;
}

static int orifices_jacobian(const double *x, double *J, int ld, void *user)
{
    const orifices *o = user;
    double d = 2.0 * o->K * fabs(x[0]);
    J[0] = -d;
    if (!o->series) return 0;
    J[1] = -d, J[ld] = -1.0, J[1 + ld] = 1.0;
    return 0;
}

START_TEST(orifices_from_far_guesses_and_through_a_drained_tank)
{
    for (int series = 0; series < 2; ++series) {
        orifices o = {1e-17, 1e10, series};
        int n = series ? 2 : 1;
        double share = series ? 2.0 : 1.0; /* the drop across one orifice: c / share */
        cdyn_newton *nt = cdyn_newton_create(n, n, NULL);
        ck_assert_ptr_nonnull(nt);
        double x[2] = {1e-3, 1.0};
        cdyn_status st = cdyn_newton_solve(nt, orifices_residual, orifices_jacobian, &o, x);
        double Q = sqrt(o.c / share / o.K);
        ck_assert_msg(st == CDYN_OK && fabs(x[0] - Q) <= 1e-8 * Q,
                      "series %d, fresh: status %d, Q = %.6e, by hand %.6e (%s)", series, st,
                      x[0], Q, cdyn_newton_last_error(nt));
        if (series) ck_assert_double_le(fabs(x[1] - o.c / 2.0), 1e-8 * o.c / 2.0);
        for (int k = 0; k < 60; ++k) { /* three cycles 1e5 .. 1e-33 */
            o.c = 1e5 * pow(1e-2, k % 20);
            st = cdyn_newton_solve(nt, orifices_residual, orifices_jacobian, &o, x);
            Q = sqrt(o.c / share / o.K);
            ck_assert_msg(st == CDYN_OK && fabs(x[0] - Q) <= 1e-8 * Q,
                          "series %d, c = %g: status %d, Q = %.6e, by hand %.6e (%s)", series,
                          o.c, st, x[0], Q, cdyn_newton_last_error(nt));
        }
        cdyn_newton_free(nt);
    }
}
END_TEST

/* A root approached linearly with an exact Jacobian: G1 = a + b - 2,
 * G2 = a + b - 2 + 1000 u^5 + 1e-7 u (u = a - b), whose only root (1, 1)
 * is simple (1000 u^5 + 1e-7 u increases strictly; cond(J) there about
 * 2e7). The correction shrinks by a factor 0.8 per step while the quintic
 * dominates, and the rule that took a residual test met twice with a
 * correction shrinking by less than 30 % for rounding ended the solve at
 * u = 8.3e-4, x 4.2e-4 off with G2 = 8.4e-11 (1e5 times its rounding),
 * with CDYN_OK. That rule now also needs G at its rounding. Asserted: the
 * root to 1e-10 (2.7e-14 measured, 20 iterations). */
static int quintic_residual(const double *x, double *G, void *user)
{
    (void)user;
    double a = x[0], b = x[1], u = a - b;
    G[0] = a + b - 2.0;
    G[1] = a + b - 2.0 + 1000.0 * u * u * u * u * u + 1e-7 * u;
    return 0;
}

static int quintic_jacobian(const double *x, double *J, int ld, void *user)
{
    (void)user;
    double u = x[0] - x[1], slope = 5000.0 * u * u * u * u + 1e-7;
    J[0] = 1.0, J[ld] = 1.0, J[1] = 1.0 + slope, J[1 + ld] = 1.0 - slope;
    return 0;
}

START_TEST(a_root_approached_linearly_is_not_taken_for_rounding)
{
    cdyn_newton *nt = cdyn_newton_create(2, 2, NULL);
    ck_assert_ptr_nonnull(nt);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 50), CDYN_OK);
    double x[2] = {1.05, 0.95};
    ck_assert_int_eq(cdyn_newton_solve(nt, quintic_residual, quintic_jacobian, NULL, x), CDYN_OK);
    ck_assert_msg(fabs(x[0] - 1.0) <= 1e-10 && fabs(x[1] - 1.0) <= 1e-10,
                  "x = (%.17g, %.17g), the root is (1, 1)", x[0], x[1]);
    cdyn_newton_free(nt);
}
END_TEST

/* A linear system of condition 1e8 solved with the default Jacobian by
 * differences: G1 = a + b - 2, G2 = a + (1 + 4e-8) b - (2 + 4e-8), root
 * (1, 1). The quotients carry about sqrt(eps) of their size, so J's small
 * singular value (2e-8 of the large one) is half noise: J came out rank 1
 * by the tolerance, the truncated correction met the tests, and x was
 * returned 7.7e-3 off with CDYN_OK. A differenced J whose dropped
 * singular values are not 0 to working accuracy must now leave no
 * correction beyond tolerance along them: CDYN_ERR_NOCONV, naming the
 * Jacobian callback. With the exact Jacobian the root to 1e-7. */
static int nearly_singular_residual(const double *x, double *G, void *user)
{
    (void)user;
    G[0] = x[0] + x[1] - 2.0;
    G[1] = x[0] + (1.0 + 4e-8) * x[1] - (2.0 + 4e-8);
    return 0;
}

static int nearly_singular_jacobian(const double *x, double *J, int ld, void *user)
{
    (void)x, (void)user;
    J[0] = 1.0, J[ld] = 1.0, J[1] = 1.0, J[1 + ld] = 1.0 + 4e-8;
    return 0;
}

START_TEST(a_differenced_jacobian_that_cannot_see_its_rank_is_refused)
{
    cdyn_newton *nt = cdyn_newton_create(2, 2, NULL);
    ck_assert_ptr_nonnull(nt);
    double x[2] = {1.1, 0.9};
    cdyn_status st = cdyn_newton_solve(nt, nearly_singular_residual, NULL, NULL, x);
    ck_assert_msg(st != CDYN_OK || (fabs(x[0] - 1.0) <= 1e-6 && fabs(x[1] - 1.0) <= 1e-6),
                  "CDYN_OK with x = (%.17g, %.17g), the root is (1, 1)", x[0], x[1]);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_ptr_nonnull(strstr(cdyn_newton_last_error(nt), "Jacobian callback"));
    x[0] = 1.1, x[1] = 0.9;
    ck_assert_int_eq(
        cdyn_newton_solve(nt, nearly_singular_residual, nearly_singular_jacobian, NULL, x),
        CDYN_OK);
    ck_assert(fabs(x[0] - 1.0) <= 1e-7 && fabs(x[1] - 1.0) <= 1e-7);
    cdyn_newton_free(nt);
}
END_TEST

/* The same kind of system in other units, condition 2e10: by differences
 * the correction does not descend, and the exit for "no step lowers the
 * residual, so G is at its rounding" returned x 2.8e-2 off with CDYN_OK,
 * G thousands of times its rounding. That exit now needs G at its
 * rounding. */
typedef struct {
    double d, sx, sg;
} scaled_pair;

static int scaled_pair_residual(const double *x, double *G, void *user)
{
    const scaled_pair *s = user;
    double a = x[0] * s->sx, b = x[1] * s->sx;
    G[0] = s->sg * (a + b - 2.0);
    G[1] = s->sg * (a + (1.0 + s->d) * b - (2.0 + s->d));
    return 0;
}

START_TEST(no_descent_above_the_rounding_is_refused)
{
    scaled_pair sp = {1.9866401229130021e-10, 2.2131664440799668, 6.5973648468364394e-06};
    double off = -0.028258190500998592, x[2] = {(1.0 + off) / sp.sx, (1.0 - off) / sp.sx};
    cdyn_newton *nt = cdyn_newton_create(2, 2, NULL);
    ck_assert_ptr_nonnull(nt);
    cdyn_status st = cdyn_newton_solve(nt, scaled_pair_residual, NULL, &sp, x);
    double error = fmax(fabs(x[0] * sp.sx - 1.0), fabs(x[1] * sp.sx - 1.0));
    ck_assert_msg(st != CDYN_OK || error <= 1e-6, "CDYN_OK %.3e from the root", error);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_ptr_nonnull(strstr(cdyn_newton_last_error(nt), "Jacobian callback"));
    cdyn_newton_free(nt);
}
END_TEST

/* x0 = (0, 5): Newton on the cubic cycles exactly 0 -> 1 -> 0 (f(0) = 2,
 * f'(0) = -2; f(1) = 1, f'(1) = 1), and the linear equation makes x1 = x0
 * after the first step: iterates (0,5), (1,1), (0,0), (1,1), ... with
 * ||G||_inf = 5, 1, 2, 1, ... The cycle is plain Newton's (T2.1): the line
 * search, on by default, would leave it, so it is switched off here. The
 * best iterate is the one with the smallest weighted residual (newton.h);
 * with equal equation tolerances gtol = (1e-10, 1e-10) that is the one with
 * the smallest ||G||_inf, (1, 1), also when the cap stops on (0, 0) (even
 * N). */
START_TEST(cap_is_honoured_exactly_and_best_iterate_returned_on_cycle)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double gtol[2] = {1e-10, 1e-10};
    ck_assert_int_eq(cdyn_newton_set_max_backtracks(nt, 0), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(nt, gtol), CDYN_OK);
    const int caps[] = {1, 2, 5, 6, 7, 12};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
        int N = caps[c];
        tracker t;
        tracker_init(&t, 2, 2, 0.0);
        double x[2] = {0.0, 5.0};
        ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, N), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_solve(nt, res_cubic_cycle, jac_cubic_cycle, &t, x),
                         CDYN_ERR_NOCONV);
        cdyn_newton_report r = get_report(nt);
        ck_assert_int_eq(r.iterations, N);
        ck_assert_int_eq(r.converged, 0);
        /* each step evaluates its full step, and at most one doubled trial
         * before it (newton.h: corrections shrinking by ~2 try the doubled
         * step first; never kept here, |G_0| >= 1 fails the residual test) */
        ck_assert_int_eq(r.residual_evaluations, t.calls);
        ck_assert_int_ge(t.calls, N + 1);
        ck_assert_int_le(t.calls, 2 * N + 1);
        /* the best iterate: (1, 1) with ||G||_inf = 1, by the cycle above */
        ck_assert_double_eq_tol(x[0], 1.0, 1e-12);
        ck_assert_double_eq_tol(x[1], 1.0, 1e-12);
        ck_assert_double_eq_tol(r.residual_norm, 1.0, 1e-12);
        double gx[2];
        tracker tx;
        tracker_init(&tx, 2, 2, 0.0);
        res_cubic_cycle(x, gx, &tx);
        ck_assert(r.residual_norm == vec_inf(2, gx));
        if (N % 2 == 0) /* the last iterate is near (0, 0), not the best one */
            ck_assert_double_lt(vec_inf(2, t.xrec[t.nrec - 1]), 1e-12);
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    cdyn_newton_free(nt);
}
END_TEST

/* G = x^2 + 1 from x0 = 2 has no real root: plain Newton (the line search
 * off) wanders, x+ = x - (x^2 + 1) / (2x) (x_1 = 0.75, x_2 = -0.2917,
 * x_3 = 1.568, ..., x_12 = -0.00785, x_13 = 63.7, ...), so every cap N is
 * reached: NOCONV after exactly N steps. With the fixed equation tolerance
 * gtol = 1e-10 the weighted residual is (x^2 + 1) / gtol, so the best
 * iterate is the x_n (n <= N) of smallest |x_n|; a doubled trial (when two
 * corrections shrink by ~2, as from x_13 on) is never kept, since
 * x^2 + 1 >= 1 never meets the residual test. The iterates are computed
 * here by the same formula (to rounding: the step is chaotic, so only
 * 1e-9 relative agreement is asked).
 * The true double root, G = x^2 from 1 (x_n = 2^-n for plain Newton):
 * corrections -1/2, then -1/4 shrink by 2, so the second step is the
 * doubled one, x = 1/2 - 2 (1/4) = 0, where G = 0 meets the residual test:
 * 2 steps whatever the cap beyond 1 and the tolerances (newton.h). */
START_TEST(cap_is_honoured_exactly_on_slow_double_root)
{
    cdyn_newton *nt = create_ok(1, 1);
    const double gtol[1] = {1e-10};
    ck_assert_int_eq(cdyn_newton_set_max_backtracks(nt, 0), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(nt, gtol), CDYN_OK);
    const int caps[] = {1, 3, 6, 16, 17};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; ++c) {
        int N = caps[c];
        double xs = 2.0, best = 2.0;
        for (int n = 1; n <= N; ++n) {
            xs = xs + -(xs * xs + 1.0) / (2.0 * xs);
            if (xs * xs + 1.0 < best * best + 1.0) best = xs;
        }
        tracker t;
        tracker_init(&t, 1, 1, -1.0); /* G = x^2 - (-1) */
        double x[1] = {2.0};
        ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, N), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_solve(nt, res_square_minus_a, jac_square, &t, x),
                         CDYN_ERR_NOCONV);
        cdyn_newton_report r = get_report(nt);
        ck_assert_int_eq(r.iterations, N);
        ck_assert_int_eq(r.residual_evaluations, t.calls);
        ck_assert_int_ge(t.calls, N + 1);
        ck_assert_int_le(t.calls, 2 * N + 1);
        /* the same iterate up to the rounding of a few chaotic steps */
        ck_assert_msg(fabs(x[0] - best) <= 1e-9 * fabs(best) + 1e-12,
                      "N = %d: x = %.17g, best iterate %.17g", N, x[0], best);
        ck_assert(r.residual_norm == x[0] * x[0] + 1.0);
    }
    /* the double root: found exactly with the default settings and any cap
     * >= 2 (today in two steps, the doubled one second; a bound, not a count) */
    cdyn_newton_free(nt);
    nt = create_ok(1, 1);
    for (int cap = 2; cap <= 17; cap += 15) {
        tracker t;
        tracker_init(&t, 1, 1, 0.0);
        double x[1] = {1.0};
        ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, cap), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_solve(nt, res_square, jac_square, &t, x), CDYN_OK);
        ck_assert_int_le(get_report(nt).iterations, 2);
        ck_assert(x[0] == 0.0);
    }
    /* cap 1 stops before the doubled step: the best iterate is x_1 = 1/2 */
    tracker t;
    tracker_init(&t, 1, 1, 0.0);
    double x[1] = {1.0};
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 1), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_solve(nt, res_square, jac_square, &t, x), CDYN_ERR_NOCONV);
    ck_assert_int_eq(get_report(nt).iterations, 1);
    ck_assert(x[0] == 0.5);
    cdyn_newton_free(nt);
}
END_TEST

/* arctan from 1.5: plain Newton (the default line search switched off: it
 * would damp exactly this) makes |x| grow at every step (-1.69, 2.32, -5.1,
 * ...), and so does the weighted residual |atan x| (1 + x^2) / (rtol |x|),
 * so the best iterate is the initial guess itself. */
START_TEST(cap_returns_initial_guess_when_newton_diverges)
{
    cdyn_newton *nt = create_ok(1, 1);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 5), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_max_backtracks(nt, 0), CDYN_OK);
    tracker t;
    tracker_init(&t, 1, 1, 0.0);
    double x[1] = {1.5};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_atan, jac_atan, &t, x), CDYN_ERR_NOCONV);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.iterations, 5);
    ck_assert_int_eq(t.calls, 6);
    for (int i = 1; i <= 5; ++i) ck_assert_double_gt(t.gnorm[i], t.gnorm[i - 1]);
    ck_assert(x[0] == 1.5);
    ck_assert(r.residual_norm == atan(1.5));
    cdyn_newton_free(nt);
}
END_TEST

/* G = exp(x) - 1 (root 0), J = exp(x). */
static int res_expm1(const double *x, double *G, void *user)
{
    G[0] = exp(x[0]) - 1.0;
    return finish_residual(user, x, G);
}

static int jac_exp(const double *x, double *J, int ldj, void *user)
{
    (void)ldj;
    J[0] = exp(x[0]);
    return finish_jacobian(user, J);
}

/* G = exp(x) - 1 from x0 = 10 with max_iterations = 3, other settings
 * default. Plain Newton: x+ = x - (1 - exp(-x)), so x1 = 9 + e^-10,
 * x2 = 8.00017, x3 = 7.00050 (computed below by this formula). The line
 * search changes nothing here: at x_k the weighted residual of a trial is
 * |G| / gtol with gtol = exp(x_k) rtol |x_k| of x_k itself, and the full
 * step lowers |G| = exp(x) - 1 (x_{k+1} < x_k), so it is kept without a
 * halving; the corrections -(1 - exp(-x_k)) ~ -1 do not shrink by ~2, so no
 * doubled step is tried: 3 steps, 4 residual evaluations. The best iterate
 * (newton.h: each iterate compared with the best so far under its own
 * weights, which both then share) is x3, whose |G| is the smallest: under
 * shared weights the comparison is one of |G|. (Compared each with its own
 * weights, |G| / (exp(x) rtol |x|) ~ 1 / (rtol |x|), the start x0 = 10
 * would look best.) Asserts: CDYN_ERR_NOCONV, 3 iterations, no halving,
 * 4 residual evaluations, x = x3 of the formula to 1e-13 relative (three
 * steps of rounding), and the reported residual norm is G(x). */
START_TEST(cap_returns_the_last_of_decreasing_iterates_not_the_start)
{
    cdyn_newton *nt = create_ok(1, 1);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 3), CDYN_OK);
    double iterate[4] = {10.0};
    for (int k = 0; k < 3; ++k) iterate[k + 1] = iterate[k] - (1.0 - exp(-iterate[k]));
    tracker t;
    tracker_init(&t, 1, 1, 0.0);
    double x[1] = {10.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_expm1, jac_exp, &t, x), CDYN_ERR_NOCONV);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.converged, 0);
    ck_assert_int_eq(r.iterations, 3);
    ck_assert_int_eq(r.backtracks, 0);
    ck_assert_int_eq(t.calls, 4);
    ck_assert_msg(fabs(x[0] - iterate[3]) <= 1e-13 * iterate[3],
                  "x = %.17g, third iterate %.17g (start %g, second %.17g)", x[0], iterate[3],
                  iterate[0], iterate[2]);
    ck_assert(r.residual_norm == exp(x[0]) - 1.0);
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 3. Warm start.                                                            */

/* Circle/line, a = 2 -> 2 (1 + 1e-3). From the old root the line holds, so
 * the run is Heron's iteration with e0 = 1e-3 sqrt2: e1 = e0^2/(2x) = 7e-7,
 * e2 = 1.7e-13, residual 4 sqrt2 e2 ~ 1e-12 <= 1e-10: two steps.
 * 3x3 quadratic, a = 1 -> 1.001: e0 = 3e-3, C ~ 1.4 gives e1 <= 1.3e-5,
 * e2 <= 2.4e-10; the actual contraction (direction of e along the root
 * scaling) gives ||G|| ~ 3e-12 after two steps. */
START_TEST(warm_start_after_small_parameter_change_needs_at_most_two_steps)
{
    cdyn_newton *nt = create_ok(2, 2);
    tracker t;
    tracker_init(&t, 2, 2, 2.0);
    double x[2] = {3.0, 1.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x), CDYN_OK);
    int cold = get_report(nt).iterations;
    tracker_init(&t, 2, 2, 2.0 * (1.0 + 1e-3));
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_le(r.iterations, 2);
    ck_assert_int_lt(r.iterations, cold);
    /* ||J^{-1}||_inf = 1/(4 sqrt2) + 1/2 < 0.7 at the root: error <= 0.7e-10 */
    ck_assert_double_eq_tol(x[0], 2.002 / sqrt(2.0), 1e-10);
    ck_assert_double_eq_tol(x[1], 2.002 / sqrt(2.0), 1e-10);
    cdyn_newton_free(nt);

    nt = create_ok(3, 3);
    tracker_init(&t, 3, 3, 1.0);
    double y[3] = {1.5, 1.5, 2.5};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_quad3, jac_quad3, &t, y), CDYN_OK);
    tracker_init(&t, 3, 3, 1.001);
    ck_assert_int_eq(cdyn_newton_solve(nt, res_quad3, jac_quad3, &t, y), CDYN_OK);
    r = get_report(nt);
    ck_assert_int_le(r.iterations, 2);
    const double ys[3] = {1.001, 2.002, 3.003};
    ck_assert_double_le(dist_inf(3, y, ys), 1e-10);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 4. Finite-difference Jacobian.                                            */

/* With jacobian = NULL every iterate costs p extra residual calls for its
 * Jacobian, the returned one included (convergence is judged by the
 * correction predicted there, newton.h), so residual_evaluations =
 * 1 + iterations (1 + p) + p. Accuracy: the error test passed at the
 * returned x, |dx_j| <= 1e-10 |x_j| (default rtol, atol 0 on a fresh
 * object), and near these simple roots the error is |dx| to first order
 * (plus the forward difference's ~1e-8 relative error on J times |dx|):
 * 3.1e-10 for the 3x3 root (|x| <= 3), 1.5e-10 for (sqrt2, sqrt2). */
/* A sparse system (a discretized -u'' + c u^3 = f, tridiagonal J: 70 of
 * 576 entries non-zero, so the solver's weights walk J by its non-zeros)
 * in units of its own: G(x) = s F(x / u), root x = u x* with x* chosen
 * and f made from it. */
enum { TRI_N = 24 };
typedef struct {
    double s, u, f[TRI_N];
} tri_system;

static double tri_root(int i) { return 1.0 + 0.5 * sin(1.0 + i); }

static void tri_apply(const double *X, double *F)
{
    for (int i = 0; i < TRI_N; ++i) {
        double left = i > 0 ? X[i - 1] : 0.0, right = i + 1 < TRI_N ? X[i + 1] : 0.0;
        F[i] = 2.0 * X[i] - left - right + 3.0 * X[i] * X[i] * X[i];
    }
}

static int res_tri(const double *x, double *G, void *user)
{
    const tri_system *t = user;
    double X[TRI_N];
    for (int i = 0; i < TRI_N; ++i) X[i] = x[i] / t->u;
    tri_apply(X, G);
    for (int i = 0; i < TRI_N; ++i) G[i] = t->s * (G[i] - t->f[i]);
    return 0;
}

static int jac_tri(const double *x, double *J, int ldj, void *user)
{
    const tri_system *t = user;
    double d = t->s / t->u;
    for (int j = 0; j < TRI_N; ++j)
        for (int i = 0; i < TRI_N; ++i) {
            double X = x[i] / t->u;
            double v = i == j ? 2.0 + 9.0 * X * X : (i == j + 1 || j == i + 1) ? -1.0 : 0.0;
            J[i + (size_t)j * ldj] = d * v;
        }
    return 0;
}

START_TEST(sparse_system_converges_to_its_root_with_the_same_verdicts_in_any_units)
{
    static const double scales[] = {1.0, 1e8, 1e-8};
    double star[TRI_N];
    for (int i = 0; i < TRI_N; ++i) star[i] = tri_root(i);
    int iterations = -1;
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 3; ++c) {
            tri_system t = {scales[a], scales[c], {0}};
            tri_apply(star, t.f);
            cdyn_newton *nt = cdyn_newton_create(TRI_N, TRI_N, NULL);
            ck_assert_ptr_nonnull(nt);
            double x[TRI_N];
            for (int i = 0; i < TRI_N; ++i) x[i] = t.u * (star[i] + 0.3 * cos(2.0 * i));
            ck_assert_int_eq(cdyn_newton_solve(nt, res_tri, jac_tri, &t, x), CDYN_OK);
            double err = 0.0;
            for (int i = 0; i < TRI_N; ++i) err = fmax(err, fabs(x[i] / t.u - star[i]));
            /* J's condition is below 10 (diagonally dominant): the default
             * rtol 1e-10 and quadratic convergence leave rounding */
            ck_assert_msg(err <= 1e-12, "s = %g, u = %g: error %g", t.s, t.u, err);
            cdyn_newton_report r;
            ck_assert_int_eq(cdyn_newton_get_report(nt, &r), CDYN_OK);
            if (iterations < 0) iterations = r.iterations;
            ck_assert_msg(r.iterations == iterations, "s = %g, u = %g: %d iterations, not %d",
                          t.s, t.u, r.iterations, iterations);
            cdyn_newton_free(nt);
        }
}
END_TEST

START_TEST(finite_difference_jacobian_converges_to_known_roots)
{
    cdyn_newton *nt = create_ok(3, 3);
    tracker t;
    tracker_init(&t, 3, 3, 1.0);
    double x[3] = {1.5, 1.5, 2.5};
    const double xstar[3] = {1.0, 2.0, 3.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_quad3, NULL, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_double_le(dist_inf(3, x, xstar), 3.1e-10);
    ck_assert_int_eq(r.converged, 1);
    ck_assert_double_le(r.residual_ratio, 1.0);
    ck_assert_double_le(r.error_ratio, 1.0);
    ck_assert_int_eq(r.residual_evaluations, t.calls);
    ck_assert_int_eq(r.residual_evaluations, 1 + r.iterations * 4 + 3);
    ck_assert_int_le(r.iterations, 8);
    cdyn_newton_free(nt);

    nt = create_ok(2, 2);
    tracker_init(&t, 2, 2, 2.0);
    double y[2] = {3.0, 1.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, NULL, &t, y), CDYN_OK);
    r = get_report(nt);
    ck_assert_double_eq_tol(y[0], sqrt(2.0), 1.5e-10);
    ck_assert_double_eq_tol(y[1], sqrt(2.0), 1.5e-10);
    ck_assert_int_eq(r.residual_evaluations, t.calls);
    ck_assert_int_eq(r.residual_evaluations, 1 + r.iterations * 3 + 2);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 5. Rank-deficient Jacobian in a solve: the SVD path.                      */

/* J = [1 2; 2 4] = u v^T, u = v = (1, 2); b = (3, 6) = 3u is in the range.
 * The SVD step is taken on the equilibrated J (newton.h): rows scaled by
 * powers of two to a largest entry in [1/2, 1), D_r = diag(1/4, 1/8), then
 * columns, D_c = diag(2, 1), give B = D_r J D_c = [1/2 1/2; 1/2 1/2] =
 * u' v'^T with u' = v' = (1, 1)/sqrt2 and the one singular value 1. The
 * outer-inverse step x = D_c B+ D_r b is the solution of J x = b with the
 * smallest norm in the equilibrated coordinates y = D_c^{-1} x:
 * D_r b = (3/4, 3/4), B+ D_r b = (3/4, 3/4), x = (3/2, 3/4) (J x = b).
 * From x0 = 0 one step lands there, where G = 0.
 * Diagnosis: B's two rows and two columns are equal, a tie the pivoted QR
 * breaks by rounding or by order, so the dependent row and the dropped
 * column are each 0 or 1 (one of each). Relative singular values: the
 * kept one is the largest (1), the dropped one 0 to rounding. */
START_TEST(singular_2x2_consistent_system_gives_minimum_norm_solution)
{
    const double A[4] = {1, 2, 2, 4}, b[2] = {3, 6};
    cdyn_newton *nt = create_ok(2, 2);
    tracker t;
    tracker_init(&t, 2, 2, 0.0);
    t.A = A;
    t.b = b;
    double x[2] = {0.0, 0.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_linear, jac_linear, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_double_eq_tol(x[0], 1.5, 1e-10);
    ck_assert_double_eq_tol(x[1], 0.75, 1e-10);
    ck_assert_int_ge(r.svd_steps, 1);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_int_eq(r.converged, 1);
    ck_assert_double_eq_tol(r.smallest_kept, 1.0, 1e-13);
    ck_assert_double_le(r.largest_dropped, 1e-14);
    int rows[2 + GUARD], cols[2 + GUARD];
    for (int i = 0; i < 2 + GUARD; ++i) rows[i] = cols[i] = ISENTINEL;
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 1);
    ck_assert_msg(rows[0] == 0 || rows[0] == 1, "dependent row %d", rows[0]);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, cols), 1);
    ck_assert_msg(cols[0] == 0 || cols[0] == 1, "dropped column %d", cols[0]);
    for (int i = 1; i < 2 + GUARD; ++i) {
        ck_assert_int_eq(rows[i], ISENTINEL);
        ck_assert_int_eq(cols[i], ISENTINEL);
    }
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, NULL), 1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 1);
    cdyn_newton_free(nt);
}
END_TEST

/* 3x3 of rank 2 with rows r0 = (2,1,0), r1 = (0,1,3). Null vector
 * n = r0 x r1 = (3, -6, 2), |n|^2 = 49; b = J (1,1,1). The SVD step works on
 * the equilibrated B = D_r J D_c (newton.h; rows, then columns, scaled by
 * powers of two to a largest entry in [1/2, 1)), and its outer inverse
 * gives the solution of J x = b with the smallest norm of y = D_c^{-1} x:
 * x = (1,1,1) + t n with t minimizing |D_c^{-1} ((1,1,1) + t n)|.
 * Which row/column is named: after the pivoted QR's first pick f, the
 * residuals of the two others satisfy w_a r_a' = -w_b r_b' (w the left/right
 * null vector of B: D_r^{-1} times J's left one, D_c^{-1} times n), so the
 * one with the larger |w| has the smaller residual and is ranked last.
 *  (a) r2 = r0 + r1 = (2,2,3): D_r = I/4, D_c = I (B = J/4), so x is the
 *      Euclidean minimum norm (1,1,1) - (n.(1,1,1)/49) n = (52, 43, 51)/49.
 *      Row norms^2 of B (x16) 5, 10, 17 -> row 2 first; the left null
 *      vector (1, 1, -1) ties rows 0 and 1 exactly (rounding decides), so
 *      the dependent row is 0 or 1, but never 2. Columns (x16) norms^2 8,
 *      6, 18 -> column 2 first; |n1| = 6 > |n0| = 3, so column 1 is dropped.
 *  (b) r2 = r0 + 3 r1 = (2,4,9): D_r = diag(1/4, 1/4, 1/16), then
 *      D_c = diag(1, 2, 1): B = [1/2 1/2 0; 0 1/2 3/4; 1/8 1/2 9/16].
 *      x: minimize (1+3t)^2 + ((1-6t)/2)^2 + (1+2t)^2, 7 + 44 t = 0,
 *      t = -7/44, x = (23, 86, 30)/44. Rows of B: norms^2 0.5, 0.8125,
 *      0.582 -> row 1 first; left null vector D_r^{-1} (1, 3, -1) ~
 *      (1, 3, -4): row 2 is dependent. Columns: norms^2 0.266, 0.75, 0.879
 *      -> column 2 first; right null vector D_c^{-1} n = (3, -3, 2) ties
 *      columns 0 and 1 (rounding decides): 0 or 1 is dropped, never 2. */
START_TEST(singular_3x3_with_sum_row_names_dependent_row_and_dropped_column)
{
    const double Aa[9] = {2, 0, 2, 1, 1, 2, 0, 3, 3}, ba[3] = {3, 4, 7};
    const double Ab[9] = {2, 0, 2, 1, 1, 4, 0, 3, 9}, bb[3] = {3, 4, 15};
    const double xa[3] = {52.0 / 49.0, 43.0 / 49.0, 51.0 / 49.0};
    const double xb[3] = {23.0 / 44.0, 86.0 / 44.0, 30.0 / 44.0};
    for (int c = 0; c < 2; ++c) {
        cdyn_newton *nt = create_ok(3, 3);
        tracker t;
        tracker_init(&t, 3, 3, 0.0);
        t.A = c == 0 ? Aa : Ab;
        t.b = c == 0 ? ba : bb;
        const double *xmn = c == 0 ? xa : xb;
        double x[3] = {0.0, 0.0, 0.0};
        ck_assert_int_eq(cdyn_newton_solve(nt, res_linear, jac_linear, &t, x), CDYN_OK);
        cdyn_newton_report r = get_report(nt);
        ck_assert_msg(dist_inf(3, x, xmn) <= 1e-10, "case %d: x = (%.17g, %.17g, %.17g)", c,
                      x[0], x[1], x[2]);
        ck_assert_int_ge(r.svd_steps, 1);
        ck_assert_int_eq(r.rank, 2);
        ck_assert_double_le(r.largest_dropped, 1e-13);
        int rows[3], cols[3];
        ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 1);
        ck_assert_int_eq(cdyn_newton_dropped_columns(nt, cols), 1);
        if (c == 0) {
            ck_assert_msg(rows[0] == 0 || rows[0] == 1, "dependent row %d", rows[0]);
            ck_assert_int_eq(cols[0], 1);
        } else {
            ck_assert_int_eq(rows[0], 2);
            ck_assert_msg(cols[0] == 0 || cols[0] == 1, "dropped column %d", cols[0]);
        }
        cdyn_newton_free(nt);
    }
}
END_TEST

/* ======================================================================== */
/* 6. cdyn_newton_step.                                                      */

START_TEST(step_on_full_rank_square_matches_hand_solution)
{
    /* J = [2 1; 1 3], G = (1, 2): J^{-1} = [3 -1; -1 2]/5, dx = -(0.2, 0.6).
     * The rank decision is made on the equilibrated J (rows scaled by 1/4,
     * columns by 1): B = [1/2 1/4; 1/4 3/4]. Pivoted QR takes column
     * (1/4, 3/4) first: |R11| = sqrt(5/8), |R22| = |det B|/|R11| =
     * (5/16)/sqrt(5/8), and the report gives |R22|/|R11| = (5/16)/(5/8) =
     * 1/2 (relative to the largest, newton.h). */
    cdyn_newton *nt = create_ok(2, 2);
    const double J[4] = {2, 1, 1, 3}, G[2] = {1, 2};
    double dx[2 + GUARD];
    for (int i = 0; i < 2 + GUARD; ++i) dx[i] = SENTINEL;
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_double_eq_tol(dx[0], -0.2, 1e-15);
    ck_assert_double_eq_tol(dx[1], -0.6, 1e-15);
    for (int i = 2; i < 2 + GUARD; ++i) ck_assert(dx[i] == SENTINEL);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.iterations, 1);
    ck_assert_int_eq(r.rank, 2);
    ck_assert_int_eq(r.svd_steps, 0);
    ck_assert(r.largest_dropped == 0.0);
    ck_assert_double_eq_tol(r.smallest_kept, 0.5, 1e-14);
    ck_assert_double_eq_tol(r.residual_norm, 2.0, 1e-15);
    ck_assert_double_eq_tol(r.step_norm, 0.6, 1e-15);
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, NULL), 0);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 0);
    cdyn_newton_free(nt);

    /* 3x3 J = [4 1 0; 1 3 1; 0 1 2] with G = -J (1, -2, 3) = (-2, 2, -4):
     * dx = (1, -2, 3). Stored with ldj = 5 and NaN in the two padding rows,
     * which are not part of J. */
    nt = create_ok(3, 3);
    const double J3[9] = {4, 1, 0, 1, 3, 1, 0, 1, 2};
    double Jp[15];
    for (int i = 0; i < 15; ++i) Jp[i] = NAN;
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) Jp[i + 5 * j] = J3[i + 3 * j];
    const double G3[3] = {-2, 2, -4};
    double d3[3 + GUARD];
    for (int i = 0; i < 3 + GUARD; ++i) d3[i] = SENTINEL;
    ck_assert_int_eq(cdyn_newton_step(nt, Jp, 5, G3, d3), CDYN_OK);
    ck_assert_double_eq_tol(d3[0], 1.0, 1e-14);
    ck_assert_double_eq_tol(d3[1], -2.0, 1e-14);
    ck_assert_double_eq_tol(d3[2], 3.0, 1e-14);
    for (int i = 3; i < 3 + GUARD; ++i) ck_assert(d3[i] == SENTINEL);
    r = get_report(nt);
    ck_assert_int_eq(r.rank, 3);
    ck_assert_int_eq(r.svd_steps, 0);
    ck_assert_double_eq_tol(r.step_norm, 3.0, 1e-14);
    ck_assert_double_eq_tol(r.residual_norm, 4.0, 1e-15);
    cdyn_newton_free(nt);
}
END_TEST

/* The last step of the 3 x 3 nt dropped one pivot: rank 2 through the SVD
 * step, with `row` the dependent equation and `col` the dropped unknown. */
static void assert_one_pivot_dropped(cdyn_newton *nt, int row, int col)
{
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.rank, 2);
    ck_assert_int_eq(r.svd_steps, 1);
    int dependent = -1, dropped = -1;
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, &dependent), 1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, &dropped), 1);
    ck_assert_int_eq(dependent, row);
    ck_assert_int_eq(dropped, col);
}

START_TEST(step_on_scaled_permutation_matches_hand_solution_and_the_qr_verdict)
{
    /* J = [0 0 3e-6; 0 -5e4 0; 2 0 0]: one non-zero per column, in distinct
     * rows (the diagonal Jacobian of leaking junctions, reordered), which
     * newton.c factors without a QR. G = (6e-6, 1e5, 4): J dx = -G gives
     * dx = (-2, 2, -2). The equilibrated entries (rows by powers of two into
     * [1/2, 1), the columns then already there) are 3e-6 * 2^18 = 0.786432,
     * 5e4 * 2^-16 = 0.762939453125 and 2 * 2^-2 = 0.5; the columns are
     * orthogonal, so the pivoted QR's |R_jj| are those three and its ratio
     * is 0.5 / 0.786432. A rank tolerance above that ratio drops the
     * smallest in that frame; but the rank policy's second opinion (the
     * scaling of a maximum-product matching, rank.h) pairs each non-zero
     * with its own row and scales it to within a factor 2 of 1, so no
     * tolerance below 1/2 drops one: rank 3, no SVD step, the exact step. */
    const double J[9] = {0, 0, 2, 0, -5e4, 0, 3e-6, 0, 0}, G[3] = {6e-6, 1e5, 4};
    const double ratio = 0.5 / 0.786432;
    double dx[3 + GUARD];
    for (int pass = 0; pass < 3; ++pass) {
        cdyn_newton *nt = create_ok(3, 3);
        if (pass == 1) ck_assert_int_eq(cdyn_newton_set_rank_tolerance(nt, 0.9 * ratio), CDYN_OK);
        if (pass == 2) ck_assert_int_eq(cdyn_newton_set_rank_tolerance(nt, 1.1 * ratio), CDYN_OK);
        for (int i = 0; i < 3 + GUARD; ++i) dx[i] = SENTINEL;
        ck_assert_int_eq(cdyn_newton_step(nt, J, 3, G, dx), CDYN_OK);
        for (int i = 3; i < 3 + GUARD; ++i) ck_assert(dx[i] == SENTINEL);
        cdyn_newton_report r = get_report(nt);
        ck_assert_double_eq_tol(dx[1], 2.0, 1e-15);
        ck_assert_double_eq_tol(dx[2], -2.0, 1e-15);
        ck_assert_double_eq_tol(dx[0], -2.0, 1e-15);
        ck_assert_int_eq(r.rank, 3);
        ck_assert_int_eq(r.svd_steps, 0);
        ck_assert(r.largest_dropped == 0.0);
        if (pass < 2) ck_assert_double_eq_tol(r.smallest_kept, ratio, 1e-15);
        else ck_assert(r.smallest_kept >= 0.5 && r.smallest_kept <= 1.0);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* G = (3e-6 (x2^3 - 8), -5e4 (x1 - 2), 2 (exp(x0) - exp(-2))): root
 * (-2, 2, 2), a scaled permutation for J everywhere; written in other
 * units (user: {equation scale, unknown scale}) as E G(D xs), x = D xs. */
static int permuted_residual(const double *xs, double *G, void *user)
{
    const double *unit = user;
    double x[3];
    for (int j = 0; j < 3; ++j) x[j] = unit[1] * xs[j];
    G[0] = unit[0] * 3e-6 * (x[2] * x[2] * x[2] - 8.0);
    G[1] = unit[0] * -5e4 * (x[1] - 2.0);
    G[2] = unit[0] * 2.0 * (exp(x[0]) - exp(-2.0));
    return 0;
}

static int permuted_jacobian(const double *xs, double *J, int ldj, void *user)
{
    const double *unit = user;
    double x[3], c = unit[0] * unit[1];
    for (int j = 0; j < 3; ++j) x[j] = unit[1] * xs[j];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) J[i + (size_t)j * ldj] = 0.0;
    J[2 + 0 * (size_t)ldj] = c * 2.0 * exp(x[0]);
    J[1 + 1 * (size_t)ldj] = c * -5e4;
    J[0 + 2 * (size_t)ldj] = c * 9e-6 * x[2] * x[2];
    return 0;
}

START_TEST(scaled_permutation_jacobian_converges_to_the_known_root_in_any_units)
{
    /* the factorization without a QR, through whole solves, in SI and with
     * the equations and the unknowns rescaled by 1e+-8: the same root, the
     * same iterations and the same rank verdict */
    static const double units[][2] = {{1.0, 1.0}, {1e8, 1e-8}, {1e-8, 1e8}, {1e8, 1e8}};
    int iterations = -1;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; ++u) {
        cdyn_newton *nt = create_ok(3, 3);
        const double start[3] = {-1.0, 5.0, 3.0};
        double x[3];
        for (int j = 0; j < 3; ++j) x[j] = start[j] / units[u][1];
        void *user = (void *)units[u];
        ck_assert_int_eq(cdyn_newton_solve(nt, permuted_residual, permuted_jacobian, user, x),
                         CDYN_OK);
        ck_assert_double_eq_tol(x[0] * units[u][1], -2.0, 1e-9);
        ck_assert_double_eq_tol(x[1] * units[u][1], 2.0, 1e-9);
        ck_assert_double_eq_tol(x[2] * units[u][1], 2.0, 1e-9);
        cdyn_newton_report r = get_report(nt);
        ck_assert_int_eq(r.rank, 3);
        ck_assert_int_eq(r.svd_steps, 0);
        ck_assert(r.converged);
        if (u == 0) iterations = r.iterations;
        ck_assert_int_eq(r.iterations, iterations);
        cdyn_newton_free(nt);
    }
}
END_TEST

START_TEST(scaled_permutation_step_is_exact_and_leaves_no_trace)
{
    /* 1. Exactness, the sign that the divisions are taken: J = [0 -1.3 0;
     * 0 0 0.7; 3 0 0] and dx spanning 17 orders of magnitude. The divisions
     * give each component from its own equation, to the rounding of
     * G = -J dx and of one quotient. A pivoted QR starts with column 0
     * (equilibrated 0.75, the largest), whose non-zero is in row 2: its
     * reflector exchanges rows 0 and 2 by subtraction, which leaves dx_0 an
     * absolute error of the order of G_0's ulp (8e-7 relative, measured). */
    const double J[9] = {0, 0, 3, -1.3, 0, 0, 0, 0.7, 0};
    const double want[3] = {1.7e-5, 2.5e5, -3.1e-12};
    double G[3] = {-(-1.3 * want[1]), -(0.7 * want[2]), -(3.0 * want[0])};
    double dx[3 + GUARD];
    cdyn_newton *nt = create_ok(3, 3);
    for (int i = 0; i < 3 + GUARD; ++i) dx[i] = SENTINEL;
    ck_assert_int_eq(cdyn_newton_step(nt, J, 3, G, dx), CDYN_OK);
    for (int i = 0; i < 3; ++i) ck_assert(fabs(dx[i] - want[i]) <= 4 * DBL_EPSILON * fabs(want[i]));
    for (int i = 3; i < 3 + GUARD; ++i) ck_assert(dx[i] == SENTINEL);

    /* 2. The same solver then steps on a dense J (the QR path): the
     * factorization's kind is not carried over. J = [2 1 0; 1 3 1; 0 1 4],
     * G = -(1, 0, 7): dx = (1, -1, 2) by hand. Then the permutation again,
     * and the dense one again. */
    const double D[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4}, GD[3] = {-1, 0, -7}, want_d[3] = {1, -1, 2};
    for (int round = 0; round < 2; ++round) {
        ck_assert_int_eq(cdyn_newton_step(nt, D, 3, GD, dx), CDYN_OK);
        for (int i = 0; i < 3; ++i) ck_assert_double_eq_tol(dx[i], want_d[i], 1e-14);
        ck_assert_int_eq(get_report(nt).rank, 3);
        ck_assert_int_eq(cdyn_newton_step(nt, J, 3, G, dx), CDYN_OK);
        for (int i = 0; i < 3; ++i)
            ck_assert(fabs(dx[i] - want[i]) <= 4 * DBL_EPSILON * fabs(want[i]));
    }
    cdyn_newton_free(nt);

    /* 3. The rank policy's strict inequality (kept when |R_jj| > tol |R_00|):
     * K = [0 0 3*2^-20; 0 -4.5 0; 3 0 0] equilibrates to entries 0.75,
     * 0.5625, 0.75, so the ratio 0.75 and its product 0.75 * 0.75 = 0.5625
     * are exact. At a tolerance just below 0.75 all three are kept; at 0.75
     * the smallest is dropped (the QR path: rank 2, column 1 and row 1). */
    const double K[9] = {0, 0, 3, 0, -4.5, 0, 3 * 0x1p-20, 0, 0}, GK[3] = {1, 1, 1};
    for (int pass = 0; pass < 2; ++pass) {
        double tol = pass == 0 ? nextafter(0.75, 0.0) : 0.75;
        nt = create_ok(3, 3);
        ck_assert_int_eq(cdyn_newton_set_rank_tolerance(nt, tol), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_step(nt, K, 3, GK, dx), CDYN_OK);
        cdyn_newton_report r = get_report(nt);
        if (pass == 0) {
            ck_assert_int_eq(r.rank, 3);
            ck_assert(r.smallest_kept == 0.75);
            ck_assert(dx[0] == -1.0 / 3.0 && dx[1] == 1.0 / 4.5 && dx[2] == -1.0 / (3 * 0x1p-20));
        } else {
            ck_assert(r.largest_dropped == 0.75);
            assert_one_pivot_dropped(nt, 1, 1);
        }
        cdyn_newton_free(nt);
    }
}
END_TEST

START_TEST(step_on_wide_jacobian_is_minimum_norm)
{
    /* J = [1 0 1; 0 1 1], J J^T = [2 1; 1 2], (J J^T)^{-1} = [2 -1; -1 2]/3.
     * G = (3, 0): (J J^T)^{-1} G = (2, -1), dx = -J^T (2, -1) = (-2, 1, -1).
     * G = (1, 2): (0, 1), dx = -(0, 1, 1). */
    cdyn_newton *nt = create_ok(2, 3);
    double Jp[9];
    for (int i = 0; i < 9; ++i) Jp[i] = NAN; /* ldj = 3, row 2 is padding */
    const double J[6] = {1, 0, 0, 1, 1, 1};
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) Jp[i + 3 * j] = J[i + 2 * j];
    const double Ga[2] = {3, 0}, Gb[2] = {1, 2};
    const double want_a[3] = {-2, 1, -1}, want_b[3] = {0, -1, -1};
    double dx[3 + GUARD];
    for (int c = 0; c < 2; ++c) {
        for (int i = 0; i < 3 + GUARD; ++i) dx[i] = SENTINEL;
        ck_assert_int_eq(cdyn_newton_step(nt, Jp, 3, c == 0 ? Ga : Gb, dx), CDYN_OK);
        const double *w = c == 0 ? want_a : want_b;
        for (int i = 0; i < 3; ++i) ck_assert_double_eq_tol(dx[i], w[i], 1e-14);
        for (int i = 3; i < 3 + GUARD; ++i) ck_assert(dx[i] == SENTINEL);
        cdyn_newton_report r = get_report(nt);
        ck_assert_int_eq(r.rank, 2);
        ck_assert_int_eq(r.svd_steps, 0);
        ck_assert_int_eq(r.iterations, 1);
    }
    /* Identities for a less round J: J dx = -G and dx orthogonal to the null
     * vector n = r0 x r1 (dx in the row space, i.e. minimum norm). */
    const double K[6] = {0.3, -1.2, 2.0, 0.7, -0.5, 1.1};
    const double GK[2] = {0.9, -0.4};
    ck_assert_int_eq(cdyn_newton_step(nt, K, 2, GK, dx), CDYN_OK);
    double n[3] = {K[2] * K[5] - K[4] * K[3], K[4] * K[1] - K[0] * K[5],
                   K[0] * K[3] - K[2] * K[1]};
    for (int i = 0; i < 2; ++i)
        ck_assert_double_eq_tol(K[i] * dx[0] + K[i + 2] * dx[1] + K[i + 4] * dx[2], -GK[i],
                                1e-14);
    ck_assert_double_eq_tol(n[0] * dx[0] + n[1] * dx[1] + n[2] * dx[2], 0.0, 1e-14);
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(step_on_singular_jacobian_uses_svd_outer_inverse)
{
    /* J = [1 2; 2 4] = u v^T, u = v = (1, 2). The outer inverse is that of
     * the equilibrated J (newton.h): D_r = diag(1/4, 1/8), D_c = diag(2, 1),
     * B = D_r J D_c = [1/2 1/2; 1/2 1/2] = u' v'^T, u' = v' = (1, 1)/sqrt2,
     * one singular value 1, the other 0. G = (1, 0): D_r G = (1/4, 0),
     * B+ D_r G = v' (u'.D_r G) = (1/8, 1/8), dx = -D_c (1/8, 1/8) =
     * -(1/4, 1/8). Relative singular values: kept 1, dropped 0. B's rows
     * and columns are equal (a tie): the dependent row and the dropped
     * column are each 0 or 1. */
    cdyn_newton *nt = create_ok(2, 2);
    const double J[4] = {1, 2, 2, 4}, G[2] = {1, 0};
    double dx[2];
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_double_eq_tol(dx[0], -0.25, 1e-15);
    ck_assert_double_eq_tol(dx[1], -0.125, 1e-15);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_int_eq(r.iterations, 1);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_double_eq_tol(r.smallest_kept, 1.0, 1e-14);
    ck_assert_double_le(r.largest_dropped, 1e-15);
    int rows[2], cols[2];
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 1);
    ck_assert_msg(rows[0] == 0 || rows[0] == 1, "dependent row %d", rows[0]);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, cols), 1);
    ck_assert_msg(cols[0] == 0 || cols[0] == 1, "dropped column %d", cols[0]);

    /* Nearly singular: J(1,1) = 4 + 1e-11. det = fl(4 + 1e-11) - 4 (exact by
     * Sterbenz). Equilibrated as above (the row factor of row 1 stays 1/8,
     * the column factors 2 and 1): B = [1/2 1/2; 1/2 J11/8], det B =
     * det / 16 exactly, sigma1 = 1 + O(1e-12), sigma2 = |det B| / sigma1
     * ~ 6e-13 below 1e-10 sigma1: dropped. The SVD's absolute accuracy is a
     * few eps sigma1, allowance 16 eps. The rank-1 truncation differs from
     * the exact B0 = [1/2 1/2; 1/2 1/2] by about 1e-12, so dx matches the
     * singular case's -(1/4, 1/8) to 1e-11. */
    double Jn[4] = {1, 2, 2, 4.0 + 1e-11};
    double det = Jn[0] * Jn[3] - Jn[1] * Jn[2];
    ck_assert_int_eq(cdyn_newton_step(nt, Jn, 2, G, dx), CDYN_OK);
    r = get_report(nt);
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_double_eq_tol(r.largest_dropped, fabs(det) / 16.0, 16 * DBL_EPSILON);
    ck_assert_double_gt(r.largest_dropped, 0.0);
    ck_assert_double_eq_tol(r.smallest_kept, 1.0, 1e-15);
    ck_assert_double_eq_tol(dx[0], -0.25, 1e-11);
    ck_assert_double_eq_tol(dx[1], -0.125, 1e-11);

    /* A following full-rank step clears the diagnosis. */
    const double Jf[4] = {2, 1, 1, 3};
    ck_assert_int_eq(cdyn_newton_step(nt, Jf, 2, G, dx), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 0);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, cols), 0);
    ck_assert_int_eq(get_report(nt).svd_steps, 0);
    cdyn_newton_free(nt);

    /* Wide and rank one: J = u v^T, u = (1, 2), v = (1, 2, 2), G = (1, 1)
     * (not in the range). Wide systems equilibrate the rows only (the
     * minimum norm stays in the caller's coordinates): D_r = diag(1/4, 1/8),
     * B = D_r J = [1 2 2; 1 2 2]/4 = u' s v'^T with u' = (1, 1)/sqrt2,
     * v' = (1, 2, 2)/3, s = 3 sqrt2 / 4; D_r G = (1/4, 1/8):
     * dx = -v' (u'.D_r G)/s = -v' (3/(8 sqrt2)) / (3 sqrt2/4) = -v'/4 =
     * -(1, 2, 2)/12 (the least-squares fit in the equilibrated rows). Both rows of B are equal
     * (a tie: row 0 or 1 dependent); fully equilibrated, all three columns
     * are (1/2, 1/2): two of them, any two, are dropped. */
    nt = create_ok(2, 3);
    const double Jw[6] = {1, 2, 2, 4, 2, 4}, Gw[2] = {1, 1};
    double dw[3];
    ck_assert_int_eq(cdyn_newton_step(nt, Jw, 2, Gw, dw), CDYN_OK);
    ck_assert_double_eq_tol(dw[0], -1.0 / 12.0, 1e-15);
    ck_assert_double_eq_tol(dw[1], -2.0 / 12.0, 1e-15);
    ck_assert_double_eq_tol(dw[2], -2.0 / 12.0, 1e-15);
    r = get_report(nt);
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_double_eq_tol(r.smallest_kept, 1.0, 1e-14);
    ck_assert_double_le(r.largest_dropped, 1e-14);
    int wr[2], wc[3];
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, wr), 1);
    ck_assert(wr[0] == 0 || wr[0] == 1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, wc), 2);
    ck_assert(wc[0] != wc[1]);
    ck_assert(wc[0] >= 0 && wc[0] < 3 && wc[1] >= 0 && wc[1] < 3);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 7. Under-determined solves.                                               */

START_TEST(underdetermined_linear_solve_gives_minimum_norm_solution)
{
    /* x + 2y + 3z = 14: J = a^T with a = (1,2,3); minimum norm
     * a (14 / |a|^2) = (1, 2, 3). */
    const double A[3] = {1, 2, 3}, b[1] = {14};
    cdyn_newton *nt = create_ok(1, 3);
    tracker t;
    tracker_init(&t, 1, 3, 0.0);
    t.A = A;
    t.b = b;
    double x[3] = {0, 0, 0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_linear, jac_linear, &t, x), CDYN_OK);
    ck_assert_double_eq_tol(x[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x[1], 2.0, 1e-12);
    ck_assert_double_eq_tol(x[2], 3.0, 1e-12);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_int_eq(r.svd_steps, 0);
    ck_assert_int_eq(r.iterations, 1);
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(underdetermined_circle_converges_along_ray_to_circle)
{
    /* G = x^2 + y^2 - 1 with J = 2 (x, y): the minimum-norm step is radial,
     * dx = -x (r^2 - 1)/(2 r^2), i.e. Newton for r^2 - 1 along the ray, so from
     * (2, 0) the limit is (1, 0) and from (2, 1) it is (2, 1)/sqrt5. The
     * residual tolerance 1e-10 bounds |r - 1| by 5e-11. */
    cdyn_newton *nt = create_ok(1, 2);
    const double starts[2][2] = {{2.0, 0.0}, {2.0, 1.0}};
    const double limits[2][2] = {{1.0, 0.0}, {2.0 / sqrt(5.0), 1.0 / sqrt(5.0)}};
    for (int c = 0; c < 2; ++c) {
        tracker t;
        tracker_init(&t, 1, 2, 0.0);
        double x[2] = {starts[c][0], starts[c][1]};
        ck_assert_int_eq(cdyn_newton_solve(nt, res_circle, jac_circle, &t, x), CDYN_OK);
        ck_assert_double_le(fabs(x[0] * x[0] + x[1] * x[1] - 1.0), 1e-10);
        ck_assert_double_le(dist_inf(2, x, limits[c]), 1e-10);
        cdyn_newton_report r = get_report(nt);
        ck_assert_int_eq(r.converged, 1);
        ck_assert_double_le(r.residual_norm, 1e-10);
        ck_assert_int_eq(r.rank, 1);
    }
    /* first step from (2, 0) by hand: J = (4, 0), G = 3, dx = (-0.75, 0) */
    tracker t;
    tracker_init(&t, 1, 2, 0.0);
    double x[2] = {2.0, 0.0};
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 1), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle, jac_circle, &t, x), CDYN_ERR_NOCONV);
    ck_assert_double_eq_tol(x[0], 1.25, 1e-15);
    ck_assert_double_eq_tol(x[1], 0.0, 1e-15);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 8. Signed squares (T2.5).                                                 */

/* G = (x0 |x0|, x0 + x1 - 1): the step is dx0 = -x0/2 and the linear row
 * puts x0 + x1 = 1 after every step. The root has zero flow, x0 = 0, which a
 * pure relative tolerance cannot accept: the caller gives the flows' scale,
 * atol = 1e-8 (newton.h). From (1, 0): dx = (-1/2, 1/2) to (1/2, 1/2); the
 * weighted corrections 0.5 / 1e-8 and then 0.25 / (1e-8 + 0.5e-10) shrink
 * by ~2 (a double root, T2.5), so the second step is the doubled one:
 * x0 = 1/2 - 2 (1/4) = 0 to rounding, x1 = 1, where both tests hold:
 * 2 steps (plain Newton would need 17 halvings for 1e-10). Near the root J
 * is [2|x0| 0; 1 1]: its equilibrated rows are [1/2 0; 1/2 1/2] for any
 * x0 != 0, so no SVD step. Guarantee of the error test at a double root:
 * |x0 - 0| <= 2 |dx0| <= 2e-8. */
START_TEST(signed_square_with_zero_flow_root_converges_without_nan)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double atol[2] = {1e-8, 1e-8};
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 40), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-10, atol), CDYN_OK);
    tracker t;
    tracker_init(&t, 2, 2, 0.0);
    double x[2] = {1.0, 0.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_signed_square, jac_signed_square, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert(all_finite(2, x));
    assert_report_finite(&r);
    for (int i = 0; i < t.nrec; ++i) ck_assert(all_finite(2, t.xrec[i]));
    ck_assert_int_eq(r.iterations, 2);
    ck_assert_int_eq(r.svd_steps, 0);
    ck_assert_double_eq_tol(t.xrec[1][0], 0.5, 1e-15);
    ck_assert_double_le(fabs(x[0]), 2e-8);
    ck_assert_double_eq_tol(x[0] + x[1], 1.0, 1e-15);
    ck_assert_double_eq_tol(x[1], 1.0, 2e-8);
    ck_assert_double_le(r.residual_ratio, 1.0);
    ck_assert_double_le(r.error_ratio, 1.0);
    cdyn_newton_free(nt);
}
END_TEST

/* Start exactly at zero flow, (0, 5): J = [0 0; 1 1] is singular (rank 1),
 * G = (0, 4). On the equilibrated J (D_r = diag(1, 1/2), D_c = I),
 * B = [0 0; 1/2 1/2] = u s v^T with u = (0, 1), v = (1, 1)/sqrt2,
 * s = 1/sqrt2, and D_r G = (0, 2), so dx = -v (u.D_r G)/s = -(2, 2):
 * x1 = (-2, 3). With atol = 1e-8 as above, the weighted corrections
 * 2 / 1e-8 and then 1 / (1e-8 + 2e-10) shrink by ~2, so the second step is
 * doubled: x0 = -2 + 2 (1) = 0 to rounding, x1 = 1: 2 steps, the first of
 * them SVD. Dependent row of the step alone: row 0 is zero. */
START_TEST(signed_square_started_at_zero_flow_takes_svd_step_without_nan)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double atol[2] = {1e-8, 1e-8};
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 40), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-10, atol), CDYN_OK);
    tracker t;
    tracker_init(&t, 2, 2, 0.0);
    double x[2] = {0.0, 5.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_signed_square, jac_signed_square, &t, x), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert(all_finite(2, x));
    assert_report_finite(&r);
    for (int i = 0; i < t.nrec; ++i) ck_assert(all_finite(2, t.xrec[i]));
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_double_eq_tol(t.xrec[1][0], -2.0, 1e-14);
    ck_assert_double_eq_tol(t.xrec[1][1], 3.0, 1e-14);
    ck_assert_int_eq(r.iterations, 2);
    ck_assert_double_le(fabs(x[0]), 2e-8);
    ck_assert_double_eq_tol(x[0] + x[1], 1.0, 1e-14);
    ck_assert_double_eq_tol(x[1], 1.0, 2e-8);
    cdyn_newton_free(nt);

    /* the step alone at the singular point; the relative singular values:
     * the kept one is the largest (1), the dropped one 0 */
    nt = create_ok(2, 2);
    const double J[4] = {0, 1, 0, 1}, G[2] = {0, 4};
    double dx[2];
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_double_eq_tol(dx[0], -2.0, 1e-14);
    ck_assert_double_eq_tol(dx[1], -2.0, 1e-14);
    r = get_report(nt);
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_double_eq_tol(r.smallest_kept, 1.0, 1e-14);
    ck_assert_double_le(r.largest_dropped, 1e-15);
    assert_report_finite(&r);
    int rows[2];
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 1);
    ck_assert_int_eq(rows[0], 0);
    cdyn_newton_free(nt);
}
END_TEST

/* Double roots at 0 with the default settings (newton.h: "for an unknown
 * never seen non-zero, tol_j is at least the change that moves each
 * equation it enters by rtol of that equation's other terms", and the
 * doubled step of T2.5). */

/* G = x|x|, 1x1: dG/dx = 2|x|. */
static int res_abs_square(const double *x, double *G, void *user)
{
    G[0] = x[0] * fabs(x[0]);
    return finish_residual(user, x, G);
}

static int jac_abs_square(const double *x, double *J, int ldj, void *user)
{
    (void)ldj;
    J[0] = 2.0 * fabs(x[0]);
    return finish_jacobian(user, J);
}

/* G = x|x| from x0 = 1, 1e-3, 1e-9, default settings, fresh objects.
 * What "converged" allows: the Newton correction at any x != 0 is
 * dx = -x|x| / (2|x|) = -x/2, and the equation has no other terms (the part
 * of |G(x0)| that |J x0| = 2 x0^2 does not account for is 0), so no floor
 * applies and tol_x = rtol |x|: the error test reads (|x|/2) / (rtol |x|)
 * = 1/(2 rtol) = 5e9 > 1 at every x whose G(x) is non-zero. So CDYN_OK
 * means G(x) = x|x| = 0 exactly in floating point (x = 0, or |x| below
 * ~1.5e-162 where x^2 underflows).
 * Bound on the steps: the first full step halves x (x1 = x0/2: the
 * weighted residual x^2 / (2 rtol x0^2) falls by 4, so no halving); the
 * second correction, -x1/2, is half the first under the same weights
 * (rtol |x1|), so the doubled step is tried: x2 = x1 - 2 (x1/2) = 0 to
 * rounding, where G = 0 meets the residual test and is kept; at x2 both
 * tests hold. So 2 iterations and 3 residual evaluations (x0, x1, the
 * doubled trial), whatever the scale of x0 (every quantity above scales
 * with x0). Asserts: CDYN_OK, converged, x|x| == 0, 2 iterations, 3
 * residual evaluations, for each x0. */
START_TEST(double_root_at_zero_converges_in_two_steps_at_any_scale)
{
    const double starts[3] = {1.0, 1e-3, 1e-9};
    for (int k = 0; k < 3; ++k) {
        cdyn_newton *nt = create_ok(1, 1);
        tracker t;
        tracker_init(&t, 1, 1, 0.0);
        double x[1] = {starts[k]};
        cdyn_status st = cdyn_newton_solve(nt, res_abs_square, jac_abs_square, &t, x);
        cdyn_newton_report r = get_report(nt);
        ck_assert_msg(st == CDYN_OK && r.converged == 1,
                      "x0 = %g: status %d after %d iterations, x = %.3e (%s)", starts[k], st,
                      r.iterations, x[0], cdyn_newton_last_error(nt));
        ck_assert_msg(x[0] * fabs(x[0]) == 0.0, "x0 = %g: x = %.3e, G(x) != 0", starts[k], x[0]);
        ck_assert_msg(r.iterations == 2 && r.residual_evaluations == 3,
                      "x0 = %g: %d iterations, %d residual evaluations (expected 2, 3)",
                      starts[k], r.iterations, r.residual_evaluations);
        ck_assert_int_eq(t.calls, 3);
        ck_assert_double_le(fabs(t.xrec[1][0] - 0.5 * starts[k]), 4 * DBL_EPSILON * starts[k]);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* A closed valve at a junction, in SI units: Qa through an orifice of
 * coefficient k = 5.6e11 Pa s^2/m^6 whose pressure drop is zero (the valve
 * side is closed: G1 = k Qa|Qa|), and the junction G2 = Qa + Qb - Q1 with
 * Q1 = 1e-3 m^3/s. Root: Qa = 0, Qb = Q1. J = [2k|Qa| 0; 1 1].
 * The tolerance of Qa (never seen non-zero): the junction is the only
 * equation with other terms, |Qb| (coefficient 1), so tol_Qa >=
 * rtol |Qb| (the header's rule; G1 has no other term). The correction of
 * Qa is -Qa/2 (row 1 of J involves Qa alone), so the error test at the
 * returned x gives |Qa| / 2 <= tol_Qa = max(rtol |Qa|, rtol |Qb|), i.e.
 * |Qa| <= 2 rtol |Qb| (2e-13 m^3/s): "converged" cannot leave more.
 * Steps: a full Newton step solves the linear junction exactly (to
 * rounding) and halves Qa, and from then on the corrections are
 * (dQa, dQb) = (-Qa/2, Qa/2): each exactly half the previous one in every
 * component, so at the latest at the third step the doubled step is tried,
 * lands on Qa = 0 to rounding (|Qa| eps ~ 1e-24) and Qb = Q1 - Qa, where
 * the residual test holds: at most 3 iterations. (From (1e-7, 1.2e-3) the
 * first correction is dominated by Qb's 2e-4, so the doubling waits for
 * the second and third; from (0, 1.2e-3) J is singular, the SVD step is
 * the minimum-norm one of the equilibrated rows [0 0; 1/2 1/2],
 * dx = -(1e-4, 1e-4), and the next correction (5e-5, -5e-5) is already
 * half of it: 2 iterations; from (1e-12, 0.9e-3) as from the first.)
 * Hence Qb = Q1 - Qa to rounding: |Qb - Q1| <= 1e-12 Q1.
 * Asserts for each start, fresh objects, default settings: CDYN_OK,
 * |Qa| <= 2e-10 |Qb|, |Qb - Q1| <= 1e-12 Q1, at most 3 iterations, no
 * step halvings. */
typedef struct {
    double k, Q1;
} closed_valve;

static int res_closed_valve(const double *x, double *G, void *user)
{
    const closed_valve *v = user;
    G[0] = v->k * x[0] * fabs(x[0]);
    G[1] = x[0] + x[1] - v->Q1;
    return 0;
}

static int jac_closed_valve(const double *x, double *J, int ldj, void *user)
{
    const closed_valve *v = user;
    J[0] = 2.0 * v->k * fabs(x[0]);
    J[1] = 1.0;
    J[ldj] = 0.0;
    J[1 + ldj] = 1.0;
    return 0;
}

START_TEST(closed_valve_flow_converges_to_zero_against_the_junction_flows)
{
    const closed_valve v = {5.6e11, 1e-3};
    const double starts[3][2] = {{1e-7, 1.2e-3}, {0.0, 1.2e-3}, {1e-12, 0.9e-3}};
    const double rtol = 1e-10; /* the default */
    for (int k = 0; k < 3; ++k) {
        cdyn_newton *nt = create_ok(2, 2);
        double x[2] = {starts[k][0], starts[k][1]};
        cdyn_status st =
            cdyn_newton_solve(nt, res_closed_valve, jac_closed_valve, (void *)&v, x);
        cdyn_newton_report r = get_report(nt);
        ck_assert_msg(st == CDYN_OK && r.converged == 1,
                      "start (%g, %g): status %d after %d iterations (%s)", starts[k][0],
                      starts[k][1], st, r.iterations, cdyn_newton_last_error(nt));
        ck_assert_msg(fabs(x[0]) <= 2.0 * rtol * fabs(x[1]),
                      "start (%g, %g): Qa = %.3e, more than 2 rtol |Qb| = %.3e", starts[k][0],
                      starts[k][1], x[0], 2.0 * rtol * fabs(x[1]));
        ck_assert_msg(fabs(x[1] - v.Q1) <= 1e-12 * v.Q1,
                      "start (%g, %g): Qb = %.17g, Q1 = %g (rel %.2e)", starts[k][0],
                      starts[k][1], x[1], v.Q1, fabs(x[1] - v.Q1) / v.Q1);
        ck_assert_msg(r.iterations <= 3 && r.backtracks == 0,
                      "start (%g, %g): %d iterations, %d halvings (expected <= 3, 0)",
                      starts[k][0], starts[k][1], r.iterations, r.backtracks);
        ck_assert_double_le(r.residual_ratio, 1.0);
        ck_assert_double_le(r.error_ratio, 1.0);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* A coefficient that is noise (fuzz_dae, a difference quotient's 3.55e-15
 * where the equation does not contain the unknown) must not set the
 * tolerance of an unknown of unknown magnitude. Four linear equations
 * A x = b with x* = (-0.05, 0.1, 0.05, 6.7): x_3 enters rows 0-2 with
 * coefficients 13-20 and row 3 with 3.55e-15, 2.4e-16 of that row's
 * largest. The floor of an unknown heading for 0 ("never below the
 * rounding of the largest equation that determines it") took row 3's
 * others / a = 4e4 as that equation: x_3's tolerance became 0.75, every
 * residual test of rows 0-2 passed with |G| of 0.19 on terms of 20, and
 * cdyn_dae returned CDYN_OK at such a state. By hand: rows 0-2 determine
 * x_3 with others / a of about rtol (sum of their terms) / 13, so its
 * tolerance is about 1e-10 of the other states' size; asserted below
 * 1e-8 |x_3|, in SI and with x_3 in units 1e8 larger and row 3 1e-8
 * smaller (the same verdict). A second solve from x* for b shifted by
 * 0.19 in rows 0-2 must then meet A x = b to 1e-9 of its terms. */
typedef struct {
    double A[16], b[4];
} noisy_linear;

static int res_noisy(const double *x, double *G, void *user)
{
    const noisy_linear *m = user;
    for (int i = 0; i < 4; ++i) {
        G[i] = -m->b[i];
        for (int j = 0; j < 4; ++j) G[i] += m->A[i + 4 * j] * x[j];
    }
    return 0;
}

static int jac_noisy(const double *x, double *J, int ldj, void *user)
{
    (void)x;
    const noisy_linear *m = user;
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i) J[i + (size_t)j * ldj] = m->A[i + 4 * j];
    return 0;
}

START_TEST(a_noise_coefficient_does_not_widen_a_tolerance)
{
    const double A[4][4] = {{19.6, 19.6, -13.2, -1.26},
                            {1.26, -19.6, 16.5, 0.0},
                            {1.26, -2.08, -19.6, 0.0},
                            {-14.8, -7.32, 3.55e-15, 0.0}};
    const double xs[4] = {-0.05, 0.1, 0.05, 6.7};
    for (int units = 0; units < 2; ++units) {
        double col2 = units ? 1e8 : 1.0, row3 = units ? 1e-8 : 1.0; /* x_3 = col2 * SI */
        noisy_linear m;
        double x[4], xstar[4];
        for (int j = 0; j < 4; ++j) xstar[j] = xs[j] * (j == 2 ? col2 : 1.0);
        for (int i = 0; i < 4; ++i) {
            m.b[i] = 0.0;
            for (int j = 0; j < 4; ++j) {
                m.A[i + 4 * j] = A[i][j] * (i == 3 ? row3 : 1.0) / (j == 2 ? col2 : 1.0);
                m.b[i] += m.A[i + 4 * j] * xstar[j];
            }
        }
        cdyn_newton *nt = create_ok(4, 4);
        memcpy(x, xstar, sizeof x);
        ck_assert_int_eq(cdyn_newton_solve(nt, res_noisy, jac_noisy, &m, x), CDYN_OK);
        const double *tol = cdyn__newton_tolerance(nt);
        ck_assert_msg(tol[2] <= 1e-8 * fabs(xstar[2]), "units %d: tol of x_3 %.3g for |x_3| %.3g",
                      units, tol[2], fabs(xstar[2]));
        for (int i = 0; i < 3; ++i) m.b[i] += (i == 0 ? 0.19 : -0.19);
        memcpy(x, xstar, sizeof x);
        ck_assert_int_eq(cdyn_newton_solve(nt, res_noisy, jac_noisy, &m, x), CDYN_OK);
        double G[4];
        res_noisy(x, G, &m);
        for (int i = 0; i < 4; ++i) {
            double terms = fabs(m.b[i]);
            for (int j = 0; j < 4; ++j) terms += fabs(m.A[i + 4 * j] * x[j]);
            ck_assert_double_le(fabs(G[i]), 1e-9 * terms);
        }
        cdyn_newton_free(nt);
    }
}
END_TEST

/* A solve far out must not loosen the next one. G(x) = x - c, solved at
 * c = 1e20 and then at c = 1 from the guess 0; by hand x = c. Until
 * 2026-11-27 the default atol, rtol times the largest |x| of any converged
 * solution, had no cap from the equations at hand: 1e10 after the first
 * solve, under which the guess 0
 * passed both tests at c = 1 (|G| = 1 against a residual tolerance of
 * 1e10) and came back as the root with CDYN_OK. Asserted for both signs of
 * the far solve and in two unit systems: x = c within 1e-10 |c| after the
 * far solve, as from a fresh object. */
static int res_shift(const double *x, double *G, void *user)
{
    G[0] = x[0] - *(const double *)user;
    return 0;
}

static int jac_shift(const double *x, double *J, int ldj, void *user)
{
    (void)x, (void)ldj, (void)user;
    J[0] = 1.0; /* (a difference from the guess 0 cannot see 1e20) */
    return 0;
}

START_TEST(a_far_solution_does_not_loosen_later_solves)
{
    for (int units = 0; units < 2; ++units)
        for (int sign = -1; sign <= 1; sign += 2) {
            double unit = units ? 1e-8 : 1.0, c = sign * 1e20 * unit, x[1] = {0.0};
            cdyn_newton *nt = create_ok(1, 1);
            ck_assert_int_eq(cdyn_newton_solve(nt, res_shift, jac_shift, &c, x), CDYN_OK);
            ck_assert_double_le(fabs(x[0] - c), 1e-10 * fabs(c));
            c = 1.0 * unit;
            x[0] = 0.0;
            ck_assert_int_eq(cdyn_newton_solve(nt, res_shift, jac_shift, &c, x), CDYN_OK);
            ck_assert_msg(fabs(x[0] - c) <= 1e-10 * fabs(c), "units %d sign %d: x = %.17g, by hand %g",
                          units, sign, x[0], c);
            cdyn_newton_free(nt);
        }
}
END_TEST

/* An equation an unknown barely enters must not set its scale (fuzz of
 * cdyn_sparse_dae): G0 = -14.56 x0|x0| (x0's term alone: a closed valve),
 * G1 = 7.3e-304 x0 + 21.9 x1 - 9.2. By hand the root is x0 = 0 (double),
 * x1 = 9.2 / 21.9. x0's scale from G1 was 9.2 / 7.3e-304 = 1e303 times
 * rtol, and the solve stopped at x0 = 1.5e-6 as converged from the guess
 * (0.19, 0.42). A scale 1e32 times every value x0 has taken is now
 * replaced by rtol times those values. Asserted: CDYN_OK with |x0| <=
 * 2 rtol 0.19 (the double root is reached by the doubled step), or an
 * honest CDYN_ERR_NOCONV; never OK with x0 far from 0. */
static int res_barely(const double *x, double *G, void *user)
{
    (void)user;
    G[0] = -14.56 * x[0] * fabs(x[0]);
    G[1] = 7.3e-304 * x[0] + 21.9 * x[1] - 9.2;
    return 0;
}

static int jac_barely(const double *x, double *J, int ldj, void *user)
{
    (void)user;
    J[0] = -29.12 * fabs(x[0]);
    J[1] = 7.3e-304;
    J[ldj] = 0.0;
    J[1 + ldj] = 21.9;
    return 0;
}

START_TEST(an_equation_an_unknown_barely_enters_does_not_set_its_scale)
{
    cdyn_newton *nt = create_ok(2, 2);
    double x[2] = {0.19, 0.42};
    cdyn_status st = cdyn_newton_solve(nt, res_barely, jac_barely, NULL, x);
    ck_assert_msg(st == CDYN_OK || st == CDYN_ERR_NOCONV, "status %d", st);
    if (st == CDYN_OK) {
        ck_assert_msg(fabs(x[0]) <= 2.0 * 1e-10 * 0.19, "x0 = %g", x[0]);
        ck_assert_double_le(fabs(x[1] - 9.2 / 21.9), 1e-10 * 9.2 / 21.9);
    }
    cdyn_newton_free(nt);
}
END_TEST


/* x0 + x1 = 3 and a x0 + 1e19 (x1 - 1) = 0 (a in user): root (2, 1 - 2a /
 * 1e19) ~ (2, 1). In the second equation x0's other terms over its
 * coefficient (the scale that equation gives x0) are rtol 1e19 / a: for
 * a = 1e-300, 1e309, beyond the double range. */
static int res_overflow(const double *x, double *G, void *user)
{
    double a = *(const double *)user;
    G[0] = x[0] + x[1] - 3.0;
    G[1] = a * x[0] + 1e19 * (x[1] - 1.0);
    return 0;
}

static int jac_overflow(const double *x, double *J, int ldj, void *user)
{
    (void)x;
    J[0] = 1.0;
    J[1] = *(const double *)user;
    J[ldj] = 1.0;
    J[1 + ldj] = 1e19;
    return 0;
}

START_TEST(a_scale_beyond_the_double_range_is_no_tolerance)
{
    /* at a = 1e-300 that overflowed scale became x0's tolerance floor
     * (Inf), and with it every equation's residual tolerance: the start
     * (0, 0), with residuals 3 and 1e19, came back as converged (found by
     * fuzz_dae with dF/dv, at a DAE's state of rest with G0 = 2.8e18).
     * Such a scale is now no scale, and the root is found as it is for a
     * coefficient whose scale stays in range */
    static const double coefficient[] = {1e-300, 1e-290, 1e-100, 1e-20};
    for (size_t c = 0; c < sizeof coefficient / sizeof coefficient[0]; ++c) {
        cdyn_newton *nt = create_ok(2, 2);
        double x[2] = {0.0, 0.0};
        void *user = (void *)&coefficient[c];
        ck_assert_int_eq(cdyn_newton_solve(nt, res_overflow, jac_overflow, user, x), CDYN_OK);
        ck_assert_msg(fabs(x[0] - 2.0) <= 1e-9, "a = %g: x0 = %g", coefficient[c], x[0]);
        ck_assert_double_le(fabs(x[1] - 1.0), 1e-15);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* s (x - 1) = 0 and 1e10 (y - 2) + 1e-3 x = 0 (s in user): root (1, 2 -
 * 1e-13). x enters the second equation barely (its terms 2e10, x's 1e-3),
 * which alone would give x a scale of rtol 2e13 and, through the floor
 * 8 eps (that scale) / rtol, a tolerance of 3.5e-3. The first equation
 * sets x's real scale; until its size was compared with the second's in
 * the equilibrated rows, at s <= 2e-2 its terms fell below 1e-12 of the
 * second's and were left out, and the start (1.001, 2) came back as the
 * root (at s = 1e-8 already: a unit change within 1e+-8). */
static int res_rows_apart(const double *x, double *G, void *user)
{
    double s = *(const double *)user;
    G[0] = s * (x[0] - 1.0);
    G[1] = 1e10 * (x[1] - 2.0) + 1e-3 * x[0];
    return 0;
}

static int jac_rows_apart(const double *x, double *J, int ldj, void *user)
{
    (void)x;
    J[0] = *(const double *)user;
    J[1] = 1e-3;
    J[ldj] = 0.0;
    J[1 + ldj] = 1e10;
    return 0;
}

START_TEST(equations_of_other_units_are_compared_in_equilibrated_rows)
{
    static const double scale[] = {1.0, 1e-8, 1e-20, 1e-150, 1e8, 1e150};
    for (size_t c = 0; c < sizeof scale / sizeof scale[0]; ++c) {
        cdyn_newton *nt = create_ok(2, 2);
        double x[2] = {1.001, 2.0};
        void *user = (void *)&scale[c];
        ck_assert_int_eq(cdyn_newton_solve(nt, res_rows_apart, jac_rows_apart, user, x),
                         CDYN_OK);
        ck_assert_msg(fabs(x[0] - 1.0) <= 1e-9, "s = %g: x = %.17g (1)", scale[c], x[0]);
        ck_assert_double_le(fabs(x[1] - (2.0 - 1e-13)), 1e-9);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* ======================================================================== */
/* 9. Callback failures.                                                     */

/* Circle/line from (3, 1), a = 2: residuals 6, 2.125, ... decrease, iterate
 * x1 = (1.75, 1.75). Each failure below happens after x1 was evaluated, so
 * the best iterate is x1 (recorded by the callback), or x0 when the failure
 * comes before any step. */
START_TEST(residual_callback_failure_returns_code_and_best_iterate)
{
    cdyn_newton *nt = create_ok(2, 2);
    tracker t;
    /* fails at its 3rd call (x2): best iterate x1 */
    tracker_init(&t, 2, 2, 2.0);
    t.fail_call = 3;
    t.fail_code = 7;
    double x[2] = {3.0, 1.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_CALLBACK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.callback_code, 7);
    ck_assert_int_eq(r.converged, 0);
    ck_assert(all_finite(2, x));
    ck_assert(same_bits(2, x, t.xrec[1]));
    ck_assert_double_eq_tol(x[0], 1.75, 4 * DBL_EPSILON);
    ck_assert_double_eq_tol(x[1], 1.75, 4 * DBL_EPSILON);
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    ck_assert_int_eq(t.calls, 3);

    /* fails at the very first call: x is the initial guess, no step taken */
    tracker_init(&t, 2, 2, 2.0);
    t.fail_call = 1;
    t.fail_code = -1;
    x[0] = 3.0;
    x[1] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_CALLBACK);
    r = get_report(nt);
    ck_assert_int_eq(r.callback_code, -1);
    ck_assert_int_eq(r.iterations, 0);
    ck_assert(x[0] == 3.0 && x[1] == 1.0);
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");

    /* finite differences, p = 2: a step needs G(x0) and 2 shifted calls, so
     * a failure at call 2 comes before any step: x is x0, not the shifted x */
    tracker_init(&t, 2, 2, 2.0);
    t.fail_call = 2;
    t.fail_code = 7;
    x[0] = 3.0;
    x[1] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, NULL, &t, x), CDYN_ERR_CALLBACK);
    ck_assert_int_eq(get_report(nt).callback_code, 7);
    ck_assert(x[0] == 3.0 && x[1] == 1.0);

    /* ... and at call 5 (first shifted call around x1, after G(x1) at call 4):
     * best iterate x1, which FD Jacobian error (~1e-8) keeps near (1.75,1.75) */
    tracker_init(&t, 2, 2, 2.0);
    t.fail_call = 5;
    t.fail_code = 9;
    x[0] = 3.0;
    x[1] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, NULL, &t, x), CDYN_ERR_CALLBACK);
    ck_assert_int_eq(get_report(nt).callback_code, 9);
    ck_assert(same_bits(2, x, t.xrec[3]));
    ck_assert_double_lt(t.gnorm[3], t.gnorm[0]);
    ck_assert_double_eq_tol(x[0], 1.75, 1e-6);
    ck_assert_double_eq_tol(x[1], 1.75, 1e-6);

    /* the object works normally afterwards, and the code is cleared */
    assert_still_solves_2x2(nt, 1);
    assert_still_solves_2x2(nt, 0);
    cdyn_newton_free(nt);
}
END_TEST

/* A Jacobian failure at an accepted iterate, before the iteration has judged
 * it (newton.h: on CDYN_ERR_CALLBACK "x holds the best iterate found"):
 * that iterate counts. Circle/line from (3, 1): x1 = (1.75, 1.75) with
 * ||G|| = 2.125 < 6; then Heron's step x2 = (1.75 + 2/1.75)/2 = 1.446428...
 * on both components with ||G|| = 2 x2^2 - 4 = 0.184 (no doubled trial in
 * between: the corrections 1.25 and 0.30 shrink by 0.24, not ~2). Asserts:
 * failing at x1 (the 2nd Jacobian) returns x1 bit for bit, the report's
 * residual norm is ||G(x1)|| and its error ratio -1 (no correction was
 * computed at x1); failing at x2 (the 3rd) returns x2; failing at x0
 * returns x0. */
START_TEST(jacobian_callback_failure_returns_code_and_best_iterate)
{
    cdyn_newton *nt = create_ok(2, 2);
    tracker t;
    tracker_init(&t, 2, 2, 2.0);
    t.jac_fail_call = 2; /* at x1 */
    t.jac_fail_code = -3;
    double x[2] = {3.0, 1.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_CALLBACK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.callback_code, -3);
    ck_assert(all_finite(2, x));
    ck_assert(same_bits(2, x, t.xrec[1]));
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    ck_assert(r.residual_norm == t.gnorm[1]);
    ck_assert_double_eq_tol(r.residual_norm, 2.125, 1e-14);
    ck_assert(r.error_ratio == -1.0);

    /* failing at x2, a better iterate than x1: x2 back */
    tracker_init(&t, 2, 2, 2.0);
    t.jac_fail_call = 3;
    t.jac_fail_code = 5;
    x[0] = 3.0;
    x[1] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_CALLBACK);
    ck_assert_int_eq(get_report(nt).callback_code, 5);
    ck_assert_int_eq(t.calls, 3);
    ck_assert(same_bits(2, x, t.xrec[2]));
    const double heron = 0.5 * (1.75 + 2.0 / 1.75);
    ck_assert_double_eq_tol(x[0], heron, 4 * DBL_EPSILON);
    ck_assert_double_eq_tol(x[1], heron, 4 * DBL_EPSILON);

    /* failing on the first call: x0 back */
    tracker_init(&t, 2, 2, 2.0);
    t.jac_fail_call = 1;
    t.jac_fail_code = 42;
    x[0] = 3.0;
    x[1] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_CALLBACK);
    ck_assert_int_eq(get_report(nt).callback_code, 42);
    ck_assert(x[0] == 3.0 && x[1] == 1.0);

    assert_still_solves_2x2(nt, 1);
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(nonfinite_callback_output_is_reported_with_best_iterate)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int c = 0; c < 3; ++c) {
        tracker t;
        tracker_init(&t, 2, 2, 2.0);
        t.bad_call = 3; /* G(x2) has NaN/Inf */
        t.bad_value = bad[c];
        double x[2] = {3.0, 1.0};
        ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                         CDYN_ERR_NONFINITE);
        ck_assert(all_finite(2, x));
        ck_assert(same_bits(2, x, t.xrec[1]));
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
        cdyn_newton_report r = get_report(nt);
        assert_report_finite(&r);
        ck_assert_int_eq(r.callback_code, 0);

        /* Jacobian with NaN/Inf at x1 */
        tracker_init(&t, 2, 2, 2.0);
        t.jac_bad_call = 2;
        t.bad_value = bad[c];
        x[0] = 3.0;
        x[1] = 1.0;
        ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                         CDYN_ERR_NONFINITE);
        ck_assert(same_bits(2, x, t.xrec[1]));
        r = get_report(nt);
        assert_report_finite(&r);

        /* NaN at the first residual: x0 back */
        tracker_init(&t, 2, 2, 2.0);
        t.bad_call = 1;
        t.bad_value = bad[c];
        x[0] = 3.0;
        x[1] = 1.0;
        ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                         CDYN_ERR_NONFINITE);
        ck_assert(x[0] == 3.0 && x[1] == 1.0);
    }
    assert_still_solves_2x2(nt, 1);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 10. Bad input.                                                            */

START_TEST(create_rejects_bad_sizes)
{
    const int bad[][2] = {{0, 0}, {0, 3}, {-1, 2}, {-1, -1}, {3, 2}, {2, 1}, {1, 0}, {5, -5}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        cdyn_status st = CDYN_OK;
        ck_assert_ptr_null(cdyn_newton_create(bad[i][0], bad[i][1], &st));
        ck_assert_msg(st == CDYN_ERR_ARG, "create(%d, %d): status %d", bad[i][0], bad[i][1],
                      (int)st);
        ck_assert_ptr_null(cdyn_newton_create(bad[i][0], bad[i][1], NULL));
    }
    cdyn_newton *nt = cdyn_newton_create(1, 1, NULL); /* status may be NULL */
    ck_assert_ptr_nonnull(nt);
    ck_assert_str_eq(cdyn_newton_last_error(nt), "");
    cdyn_newton_free(nt);
    nt = create_ok(2, 5);
    ck_assert_str_eq(cdyn_newton_last_error(nt), "");
    cdyn_newton_free(nt);
    cdyn_newton_free(NULL);
}
END_TEST

START_TEST(null_object_is_rejected_everywhere)
{
    cdyn_newton_report r;
    memset(&r, 0x5a, sizeof r);
    cdyn_newton_report r0 = r;
    ck_assert_int_eq(cdyn_newton_get_report(NULL, &r), CDYN_ERR_ARG);
    ck_assert(memcmp(&r, &r0, sizeof r) == 0);
    int rows[4] = {ISENTINEL, ISENTINEL, ISENTINEL, ISENTINEL};
    ck_assert_int_eq(cdyn_newton_dependent_rows(NULL, rows), -1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(NULL, rows), -1);
    ck_assert_int_eq(cdyn_newton_dependent_rows(NULL, NULL), -1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(NULL, NULL), -1);
    for (int i = 0; i < 4; ++i) ck_assert_int_eq(rows[i], ISENTINEL);
    const char *msg = cdyn_newton_last_error(NULL);
    ck_assert_ptr_nonnull(msg);
    ck_assert_int_gt((int)strlen(msg), 0);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(NULL, 5), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_set_tolerances(NULL, 1e-8, NULL), CDYN_ERR_ARG);
    const double one[1] = {1.0};
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(NULL, one), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(NULL, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_set_rank_tolerance(NULL, 1e-8), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_set_fd_step(NULL, 1e-6), CDYN_ERR_ARG);
    tracker t;
    tracker_init(&t, 2, 2, 2.0);
    double x[2] = {3.0, 1.0};
    ck_assert_int_eq(cdyn_newton_solve(NULL, res_circle_line, jac_circle_line, &t, x),
                     CDYN_ERR_ARG);
    ck_assert(x[0] == 3.0 && x[1] == 1.0);
    ck_assert_int_eq(t.calls, 0);
    const double J[4] = {2, 1, 1, 3}, G[2] = {1, 2};
    double dx[2] = {SENTINEL, SENTINEL};
    ck_assert_int_eq(cdyn_newton_step(NULL, J, 2, G, dx), CDYN_ERR_ARG);
    ck_assert(dx[0] == SENTINEL && dx[1] == SENTINEL);
    /* a valid object with a NULL report pointer */
    cdyn_newton *nt = create_ok(2, 2);
    ck_assert_int_eq(cdyn_newton_get_report(nt, NULL), CDYN_ERR_ARG);
    cdyn_newton_free(nt);
    cdyn_newton_free(NULL);
}
END_TEST

START_TEST(solve_rejects_null_and_nonfinite_arguments_leaving_x_untouched)
{
    cdyn_newton *nt = create_ok(2, 2);
    tracker t;
    tracker_init(&t, 2, 2, 2.0);
    double xb[2 + 2 * GUARD];
    double *x = xb + GUARD;
    for (int i = 0; i < 2 + 2 * GUARD; ++i) xb[i] = SENTINEL;
    x[0] = 3.0;
    x[1] = 1.0;
    double saved[2 + 2 * GUARD];
    memcpy(saved, xb, sizeof xb);

    ck_assert_int_eq(cdyn_newton_solve(nt, NULL, jac_circle_line, &t, x), CDYN_ERR_ARG);
    ck_assert(same_bits(2 + 2 * GUARD, xb, saved));
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    ck_assert_int_eq(cdyn_newton_solve(nt, NULL, NULL, &t, x), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, NULL),
                     CDYN_ERR_ARG);
    ck_assert_int_eq(t.calls, 0);
    ck_assert_int_eq(t.jac_calls, 0);

    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int c = 0; c < 3; ++c)
        for (int pos = 0; pos < 2; ++pos) {
            memcpy(xb, saved, sizeof xb);
            x[pos] = bad[c];
            double before[2 + 2 * GUARD];
            memcpy(before, xb, sizeof xb);
            ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x),
                             CDYN_ERR_NONFINITE);
            ck_assert(same_bits(2 + 2 * GUARD, xb, before));
            ck_assert_int_eq(t.calls, 0);
            ck_assert_str_ne(cdyn_newton_last_error(nt), "");
            assert_still_solves_2x2(nt, 1);
        }
    /* guards after x untouched by a successful solve */
    memcpy(xb, saved, sizeof xb);
    tracker_init(&t, 2, 2, 2.0);
    ck_assert_int_eq(cdyn_newton_solve(nt, res_circle_line, jac_circle_line, &t, x), CDYN_OK);
    for (int i = 0; i < GUARD; ++i) {
        ck_assert(xb[i] == SENTINEL);
        ck_assert(x[2 + i] == SENTINEL);
    }
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(step_rejects_bad_arguments_leaving_dx_untouched)
{
    cdyn_newton *nt = create_ok(2, 3);
    const double J[6] = {1, 0, 0, 1, 1, 1}, G[2] = {3, 0};
    double db[3 + 2 * GUARD];
    double *dx = db + GUARD;
    for (int i = 0; i < 3 + 2 * GUARD; ++i) db[i] = SENTINEL;
    double saved[3 + 2 * GUARD];
    memcpy(saved, db, sizeof db);

    ck_assert_int_eq(cdyn_newton_step(nt, NULL, 2, G, dx), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, NULL, dx), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, NULL), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_step(nt, J, 1, G, dx), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_step(nt, J, 0, G, dx), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_newton_step(nt, J, -2, G, dx), CDYN_ERR_ARG);
    ck_assert(same_bits(3 + 2 * GUARD, db, saved));
    ck_assert_str_ne(cdyn_newton_last_error(nt), "");

    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (int c = 0; c < 3; ++c) {
        for (int pos = 0; pos < 6; ++pos) {
            double Jb[6];
            memcpy(Jb, J, sizeof J);
            Jb[pos] = bad[c];
            ck_assert_int_eq(cdyn_newton_step(nt, Jb, 2, G, dx), CDYN_ERR_NONFINITE);
            ck_assert(same_bits(3 + 2 * GUARD, db, saved));
        }
        for (int pos = 0; pos < 2; ++pos) {
            double Gb[2] = {G[0], G[1]};
            Gb[pos] = bad[c];
            ck_assert_int_eq(cdyn_newton_step(nt, J, 2, Gb, dx), CDYN_ERR_NONFINITE);
            ck_assert(same_bits(3 + 2 * GUARD, db, saved));
        }
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    /* finite J and G whose step overflows: J = [1e-300 0 0; 0 1 1] (full
     * rank in any units), G = (1e300, 0): dx0 = -1e600 */
    const double Jt[6] = {1e-300, 0, 0, 1, 0, 1}, Gt[2] = {1e300, 0};
    ck_assert_int_eq(cdyn_newton_step(nt, Jt, 2, Gt, dx), CDYN_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(cdyn_newton_last_error(nt), "overflows"));
    ck_assert(same_bits(3 + 2 * GUARD, db, saved));
    /* still correct afterwards: dx = (-2, 1, -1) (hand solution above) */
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_double_eq_tol(dx[0], -2.0, 1e-14);
    ck_assert_double_eq_tol(dx[1], 1.0, 1e-14);
    ck_assert_double_eq_tol(dx[2], -1.0, 1e-14);
    for (int i = 0; i < GUARD; ++i) {
        ck_assert(db[i] == SENTINEL);
        ck_assert(dx[3 + i] == SENTINEL);
    }
    cdyn_newton_free(nt);
}
END_TEST

/* G = x^2 from 1 (x_n = 2^-n): with cap N the run stops at N steps. */
static int iterations_on_square(cdyn_newton *nt, cdyn_status *st)
{
    tracker t;
    tracker_init(&t, 1, 1, 0.0);
    double x[1] = {1.0};
    *st = cdyn_newton_solve(nt, res_square, jac_square, &t, x);
    return get_report(nt).iterations;
}

/* x^2 + 1 = 0 from 2 with plain Newton never converges (no real root,
 * cap_is_honoured_exactly_on_slow_double_root), so its iteration count is
 * the cap in force. */
static int iterations_without_root(cdyn_newton *nt, cdyn_status *st)
{
    tracker t;
    tracker_init(&t, 1, 1, -1.0);
    double x[1] = {2.0};
    *st = cdyn_newton_solve(nt, res_square_minus_a, jac_square, &t, x);
    return get_report(nt).iterations;
}

START_TEST(set_max_iterations_rejects_out_of_range_and_keeps_setting)
{
    /* the cap in force: the default 20, then 3 (kept through the bad
     * values), then 17; x^2 = 0 from 1 converges in exactly 2 steps (the
     * doubled step lands on the root): cap 1 stops one short, 2 is enough */
    cdyn_newton *nt = create_ok(1, 1);
    cdyn_status st;
    ck_assert_int_eq(cdyn_newton_set_max_backtracks(nt, 0), CDYN_OK);
    ck_assert_int_eq(iterations_without_root(nt, &st), 20);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 3), CDYN_OK);
    const int bad[] = {0, -1, -100, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, bad[i]), CDYN_ERR_ARG);
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    ck_assert_int_eq(iterations_without_root(nt, &st), 3);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 17), CDYN_OK);
    ck_assert_int_eq(iterations_without_root(nt, &st), 17);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 1), CDYN_OK);
    ck_assert_int_eq(iterations_on_square(nt, &st), 1);
    ck_assert_int_eq(st, CDYN_ERR_NOCONV);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 2), CDYN_OK);
    ck_assert_int_eq(iterations_on_square(nt, &st), 2);
    ck_assert_int_eq(st, CDYN_OK);
    cdyn_newton_free(nt);
}
END_TEST

/* G = x^2 - 4 from 3 converges quadratically to 2 (no correction ratio
 * near 1/2, so no doubled step): x_1 = 2.1667, x_2 = 2.00641,
 * x_3 = 2.0000102, x_4 = 2 + 2.6e-11, with corrections dx_n = -0.833,
 * -0.160, -6.40e-3, -1.02e-5, -2.6e-11 and residuals G_n = 5, 0.694,
 * 2.57e-2, 4.10e-5, 1.05e-10. Converged at x_n when |dx_n| <= tol_n =
 * rtol |x_n| + atol and |G_n| <= |J_n| tol_n (J = 2x, newton.h):
 *   (0.1, NULL):      n = 1 (0.160 <= 0.217, 0.694 <= 0.939; at x_0 0.833 > 0.3)
 *   (1e-3, NULL):     n = 3 (1.02e-5 <= 2.0e-3; at x_2 6.40e-3 > 2.0e-3)
 *   (1e-10, NULL):    n = 4 (2.6e-11 <= 2.0e-10; at x_3 1.02e-5 > 2.0e-10)
 *   (1e-10, 1e-3):    n = 3 (the same as 1e-3 relative here)
 * (the default atol, rtol times the largest converged |x|, adds at most
 * rtol * 2 and changes none of these). */
static int iterations_on_x2_minus_4(cdyn_newton *nt, cdyn_status *st)
{
    tracker t;
    tracker_init(&t, 1, 1, 4.0);
    double x[1] = {3.0};
    *st = cdyn_newton_solve(nt, res_square_minus_a, jac_square, &t, x);
    ck_assert(*st != CDYN_OK || fabs(x[0] - 2.0) <= 0.2);
    return get_report(nt).iterations;
}

START_TEST(set_tolerances_rejects_out_of_range_and_keeps_setting)
{
    cdyn_newton *nt = create_ok(1, 1);
    cdyn_status st;
    const double atol3[1] = {1e-3};
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 4); /* defaults */
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 0.1, NULL), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 1);
    ck_assert_int_eq(st, CDYN_OK);
    const double bad_rtol[] = {0.0, -0.0, -1e-3, 9e-16, 1.0, 2.0, NAN, INFINITY, -INFINITY};
    const double bad_atol[][1] = {{-1e-3}, {-1e-300}, {NAN}, {INFINITY}, {-INFINITY}};
    for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < sizeof bad_rtol / sizeof bad_rtol[0]; ++i) {
            ck_assert_msg(cdyn_newton_set_tolerances(nt, bad_rtol[i], atol3) == CDYN_ERR_ARG,
                          "rtol %g accepted", bad_rtol[i]);
            ck_assert_str_ne(cdyn_newton_last_error(nt), "");
        }
        for (size_t i = 0; i < sizeof bad_atol / sizeof bad_atol[0]; ++i) {
            ck_assert_msg(cdyn_newton_set_tolerances(nt, 1e-3, bad_atol[i]) == CDYN_ERR_ARG,
                          "atol %g accepted", bad_atol[i][0]);
            ck_assert_str_ne(cdyn_newton_last_error(nt), "");
        }
        if (round == 0) {
            ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 1); /* (0.1, NULL) kept */
            ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-10, atol3), CDYN_OK);
            ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 3);
        }
    }
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 3); /* (1e-10, 1e-3) kept */
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-3, NULL), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 3);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-10, NULL), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 4);
    ck_assert_int_eq(st, CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_double_le(r.residual_ratio, 1.0);
    ck_assert_double_le(r.error_ratio, 1.0);
    cdyn_newton_free(nt);
}
END_TEST

/* Equation tolerances replace sum_j |J_ij| tol_j in the residual test only
 * (newton.h). x^2 - 4 from 3 with rtol 0.1 converges at x_1 (above); with
 * gtol = 0.1 the residual test needs |G| <= 0.1: G_1 = 0.694 fails, G_2 =
 * 2.57e-2 passes (and |dx_2| = 6.4e-3 <= 0.2): 2 iterations, residual
 * ratio 0.257. Bad gtol values (not finite and > 0) are refused with the
 * setting kept; NULL restores the default. */
START_TEST(set_residual_tolerances_replace_the_default_residual_test)
{
    cdyn_newton *nt = create_ok(1, 1);
    cdyn_status st;
    const double g1[1] = {0.1};
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 0.1, NULL), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 1);
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(nt, g1), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 2);
    ck_assert_int_eq(st, CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_double_eq_tol(r.residual_ratio, 0.2568, 1e-3);
    ck_assert_double_le(r.error_ratio, 1.0);
    const double bad[][1] = {{0.0}, {-0.0}, {-1.0}, {NAN}, {INFINITY}, {-INFINITY}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        ck_assert_msg(cdyn_newton_set_residual_tolerances(nt, bad[i]) == CDYN_ERR_ARG,
                      "gtol %g accepted", bad[i][0]);
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 2);
    ck_assert_int_eq(cdyn_newton_set_residual_tolerances(nt, NULL), CDYN_OK);
    ck_assert_int_eq(iterations_on_x2_minus_4(nt, &st), 1);
    ck_assert_int_eq(st, CDYN_OK);
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(set_rank_tolerance_rejects_out_of_range_and_keeps_setting)
{
    /* Rank is decided on the equilibrated J (newton.h), so a badly scaled
     * diagonal is no rank loss; the test needs a J that is nearly singular
     * in any scaling: J = [1 1; 1 1 + d], d = 2^-13 (exact). Both rows have
     * their largest entry in [1, 2): D_r = I/2, then D_c = I, B = J/2.
     * Pivoted QR of B: column 1 first, |R22|/|R11| = det B / |col 1|^2 =
     * (d/4) / ((1 + (1+d)^2)/4) ~ d/2 = 6.1e-5; singular values of the
     * symmetric J: l1,2 = (2 + d +- sqrt(4 + d^2))/2, ratio l2/l1 = d/l1^2
     * ~ 3.1e-5. G = (1, 1) = J (1, 0).
     * tol 1e-5 (and the default 1e-10): full rank, dx = -(1, 0).
     * tol 1e-3: rank 1, the SVD step with the top singular pair (l1/2,
     * v1 = (1, c)/sqrt(1 + c^2), c = l1 - 1) of B: dx = -v1 (v1.G/2)/(l1/2)
     * = -(1, c)(1 + c)/((1 + c^2) l1), close to -(1/2, 1/2). */
    cdyn_newton *nt = create_ok(2, 2);
    const double d = ldexp(1.0, -13);
    const double J[4] = {1, 1, 1, 1 + d}, G[2] = {1, 1};
    const double l1 = (2.0 + d + sqrt(4.0 + d * d)) / 2.0, c = l1 - 1.0;
    const double f = (1.0 + c) / ((1.0 + c * c) * l1);
    double dx[2];
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_int_eq(get_report(nt).rank, 2);
    ck_assert_double_eq_tol(dx[0], -1.0, 1e-11);
    ck_assert_double_eq_tol(dx[1], 0.0, 1e-11);
    ck_assert_int_eq(cdyn_newton_set_rank_tolerance(nt, 1e-3), CDYN_OK);
    const double bad[] = {0.0, -0.0, -1e-3, 1.0, 1.5, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        ck_assert_msg(cdyn_newton_set_rank_tolerance(nt, bad[i]) == CDYN_ERR_ARG,
                      "rank tolerance %g accepted", bad[i]);
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    cdyn_newton_report r = get_report(nt);
    ck_assert_int_eq(r.rank, 1);
    ck_assert_int_eq(r.svd_steps, 1);
    ck_assert_double_eq_tol(r.largest_dropped, d / (l1 * l1), 1e-14);
    ck_assert_double_eq_tol(dx[0], -f, 1e-14);
    ck_assert_double_eq_tol(dx[1], -f * c, 1e-14);
    ck_assert_int_eq(cdyn_newton_set_rank_tolerance(nt, 1e-5), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
    ck_assert_int_eq(get_report(nt).rank, 2);
    ck_assert_double_eq_tol(dx[0], -1.0, 1e-11);
    ck_assert_double_eq_tol(dx[1], 0.0, 1e-11);
    cdyn_newton_free(nt);
}
END_TEST

START_TEST(set_fd_step_rejects_out_of_range_and_keeps_setting)
{
    /* G = x^2 - 4 from x = 1 with h = 0.5: the forward difference is
     * ((1.5)^2 - 1)/0.5 = 2.5 (exact), so one step gives 1 + 3/2.5 = 2.2
     * (exact Newton would give 2.5). |G(2.2)| = 0.84 < 3: best iterate.
     * Residual calls: G(1), G(1.5), G(2.2), and G(2.2 + 0.5 * 2.2) for the
     * Jacobian at 2.2, where the correction that judges convergence is
     * computed (newton.h) before the cap stops the solve: 4. */
    cdyn_newton *nt = create_ok(1, 1);
    ck_assert_int_eq(cdyn_newton_set_max_iterations(nt, 1), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_fd_step(nt, 0.5), CDYN_OK);
    const double bad[] = {0.0, -0.0, -0.1, 1.0, 2.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        ck_assert_msg(cdyn_newton_set_fd_step(nt, bad[i]) == CDYN_ERR_ARG, "fd step %g accepted",
                      bad[i]);
        ck_assert_str_ne(cdyn_newton_last_error(nt), "");
    }
    tracker t;
    tracker_init(&t, 1, 1, 4.0);
    double x[1] = {1.0};
    ck_assert_int_eq(cdyn_newton_solve(nt, res_square_minus_a, NULL, &t, x), CDYN_ERR_NOCONV);
    ck_assert_double_eq_tol(x[0], 2.2, 4 * DBL_EPSILON);
    ck_assert_int_eq(get_report(nt).residual_evaluations, 4);
    int shifted = 0; /* the forward differences were taken at 1 + 0.5, 2.2 + 1.1 */
    for (int i = 0; i < t.nrec; ++i) shifted += t.xrec[i][0] == 1.5;
    ck_assert_int_eq(shifted, 1);
    ck_assert_double_eq_tol(t.xrec[3][0], 3.3, 8 * DBL_EPSILON);
    /* a small h gives nearly exact Newton: 2.5 to ~1e-7 */
    ck_assert_int_eq(cdyn_newton_set_fd_step(nt, 1e-9), CDYN_OK);
    tracker_init(&t, 1, 1, 4.0);
    x[0] = 1.0;
    ck_assert_int_eq(cdyn_newton_solve(nt, res_square_minus_a, NULL, &t, x), CDYN_ERR_NOCONV);
    ck_assert_double_eq_tol(x[0], 2.5, 1e-6);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */
/* 11. No allocation per solve or step.                                      */

START_TEST(solve_and_step_do_not_allocate)
{
    cdyn_newton *n22 = create_ok(2, 2), *n33 = create_ok(3, 3), *n23 = create_ok(2, 3);
    cdyn_newton *n13 = create_ok(1, 3);
    const double As[4] = {1, 2, 2, 4}, bs[2] = {3, 6};
    const double Aw[3] = {1, 2, 3}, bw[1] = {14};
    tracker t[8];
    tracker_init(&t[0], 2, 2, 2.0);
    tracker_init(&t[1], 2, 2, 2.0);
    tracker_init(&t[2], 2, 2, 0.0);
    t[2].A = As;
    t[2].b = bs;
    tracker_init(&t[3], 2, 2, 2.0);
    t[3].fail_call = 3;
    t[3].fail_code = 7;
    tracker_init(&t[4], 2, 2, 2.0);
    t[4].jac_fail_call = 2;
    t[4].jac_fail_code = 5;
    tracker_init(&t[5], 3, 3, 1.0);
    tracker_init(&t[6], 1, 3, 0.0);
    t[6].A = Aw;
    t[6].b = bw;
    tracker_init(&t[7], 2, 2, 2.0);
    t[7].bad_call = 3;
    double x0[2] = {3, 1}, x1[2] = {3, 1}, x2[2] = {0, 0}, x3[2] = {3, 1}, x4[2] = {3, 1};
    double x5[3] = {1.5, 1.5, 2.5}, x6[3] = {0, 0, 0}, x7[2] = {3, 1};
    const double Jsq[4] = {2, 1, 1, 3}, Gsq[2] = {1, 2}, Jsing[4] = {1, 2, 2, 4};
    const double Jw[6] = {1, 0, 0, 1, 1, 1}, Gw[2] = {3, 0};
    double dsq[2], dsing[2], dw[3];
    int rows[3], cols[3];
    cdyn_newton_report rep;
    cdyn_status st[16];
    int k = 0;

    alloc_count_start();
    st[k++] = cdyn_newton_solve(n22, res_circle_line, jac_circle_line, &t[0], x0);
    st[k++] = cdyn_newton_solve(n22, res_circle_line, NULL, &t[1], x1);
    st[k++] = cdyn_newton_solve(n22, res_linear, jac_linear, &t[2], x2);
    int nrows = cdyn_newton_dependent_rows(n22, rows);
    int ncols = cdyn_newton_dropped_columns(n22, cols);
    st[k++] = cdyn_newton_solve(n22, res_circle_line, jac_circle_line, &t[3], x3);
    st[k++] = cdyn_newton_solve(n22, res_circle_line, jac_circle_line, &t[4], x4);
    st[k++] = cdyn_newton_solve(n22, res_circle_line, jac_circle_line, &t[7], x7);
    st[k++] = cdyn_newton_solve(n33, res_quad3, jac_quad3, &t[5], x5);
    st[k++] = cdyn_newton_solve(n13, res_linear, jac_linear, &t[6], x6);
    st[k++] = cdyn_newton_step(n22, Jsq, 2, Gsq, dsq);
    st[k++] = cdyn_newton_step(n22, Jsing, 2, Gsq, dsing);
    st[k++] = cdyn_newton_step(n23, Jw, 2, Gw, dw);
    st[k++] = cdyn_newton_step(n23, Jw, 1, Gw, dw); /* error path */
    st[k++] = cdyn_newton_get_report(n22, &rep);
    const char *msg = cdyn_newton_last_error(n23);
    long calls = alloc_count_stop();

    ck_assert_int_eq(calls, 0);
    const cdyn_status want[] = {CDYN_OK,           CDYN_OK,          CDYN_OK,
                                CDYN_ERR_CALLBACK, CDYN_ERR_CALLBACK, CDYN_ERR_NONFINITE,
                                CDYN_OK,           CDYN_OK,          CDYN_OK,
                                CDYN_OK,           CDYN_OK,          CDYN_ERR_ARG,
                                CDYN_OK};
    ck_assert_int_eq(k, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < k; ++i)
        ck_assert_msg(st[i] == want[i], "call %d returned %d, expected %d", i, (int)st[i],
                      (int)want[i]);
    /* and the counted calls computed the right things */
    ck_assert_double_eq_tol(x0[0], sqrt(2.0), 1e-10);
    ck_assert_double_eq_tol(x1[1], sqrt(2.0), 1e-10);
    /* minimum norm in the equilibrated coordinates (see
     * singular_2x2_consistent_system_gives_minimum_norm_solution) */
    ck_assert_double_eq_tol(x2[0], 1.5, 1e-10);
    ck_assert_double_eq_tol(x2[1], 0.75, 1e-10);
    ck_assert_int_eq(nrows, 1);
    ck_assert_int_eq(ncols, 1);
    ck_assert(same_bits(2, x3, t[3].xrec[1]));
    ck_assert(same_bits(2, x4, t[4].xrec[1]));
    ck_assert(same_bits(2, x7, t[7].xrec[1]));
    ck_assert_double_eq_tol(x5[0], 1.0, 3.1e-10); /* error-test bound, quadratic_3x3_... */
    ck_assert_double_eq_tol(x5[1], 2.0, 3.1e-10);
    ck_assert_double_eq_tol(x5[2], 3.0, 3.1e-10);
    ck_assert_double_eq_tol(x6[2], 3.0, 1e-12);
    ck_assert_double_eq_tol(dsq[1], -0.6, 1e-15);
    /* B = D_r Jsing D_c = [1/2 1/2; 1/2 1/2], D_r G = (1/4, 1/4):
     * dx = -D_c (1/4, 1/4) = -(1/2, 1/4) (step_on_singular_jacobian...) */
    ck_assert_double_eq_tol(dsing[0], -0.5, 1e-15);
    ck_assert_double_eq_tol(dsing[1], -0.25, 1e-15);
    ck_assert_double_eq_tol(dw[0], -2.0, 1e-14);
    ck_assert_int_eq(rep.svd_steps, 1);
    ck_assert(msg && msg[0] != '\0');
    cdyn_newton_free(n22);
    cdyn_newton_free(n33);
    cdyn_newton_free(n23);
    cdyn_newton_free(n13);
}
END_TEST

/* ======================================================================== */
/* Review: the rounding level of G, wide rank in any units, diagnosis after  */
/* a full-rank step.                                                         */

/* A = [1 1; 1 1 + d], d = 2^-23, b = (3, 3 + 2^-22): every number is exact
 * in binary and A (1, 2) = (3, 1 + 2 + 2d) = b exactly, so x* = (1, 2).
 * A^{-1} = [1 + d  -1; -1  1] / d, ||A^{-1}||_inf = (2 + d) / d = 2^24 + 1,
 * ||A||_inf = 2 + d, cond_inf(A) = (2 + d)^2 / d = 3.4e7 (all entries are
 * near 1, so the power-of-two equilibration leaves it so). G's evaluation,
 * (x0 + x1) - b0 and (x0 + (1 + d) x1) - b1, rounds at most three times
 * quantities <= |A||x| = 3 (near x*): an error <= 9u, u = 2^-53. With
 * quantized = 1, G_1 is evaluated only to the resolution q = 2^-43: the
 * midpoint of the cell of width q holding the computed value,
 * (floor(r / q) + 1/2) q (exact: q is a power of two), so |G_1| >= q/2
 * everywhere and |G_1 - r| <= q/2. */
typedef struct {
    int quantized;
} rl_system;

static const double RL_D = 0x1p-23, RL_Q = 0x1p-43;

static int rl_residual(const double *x, double *G, void *user)
{
    const rl_system *s = user;
    G[0] = (x[0] + x[1]) - 3.0;
    double r = (x[0] + (1.0 + RL_D) * x[1]) - (3.0 + 0x1p-22);
    G[1] = s->quantized ? (floor(r / RL_Q) + 0.5) * RL_Q : r;
    return 0;
}

static int rl_jacobian(const double *x, double *J, int ldj, void *user)
{
    (void)x;
    (void)user;
    J[0] = 1.0;
    J[1] = 1.0;
    J[ldj] = 1.0;
    J[1 + ldj] = 1.0 + RL_D;
    return 0;
}

/* newton.h, "One exception": when x meets the residual test and no step
 * along the correction lowers the residual, G is at its rounding level; x
 * is then as accurate as G can be evaluated, the solve ends converged and
 * error_ratio (> 1) tells how far that is from the tolerance. With
 * rtol = 1e-13 the tolerances are about tol_x = 2e-13 (rtol times the other
 * unknown's |x| in each equation, newton.h's floor) and tol_g = 4e-13.
 * (a) Plain G from (1.1, 1.9): the accuracy asked for is below what
 * rounding allows (||A^{-1}|| 9u = 1.7e-8 >> 2e-13), but this G evaluates
 * to exactly 0 at the first iterate (its rows meet b to the last bit about
 * 1e-9 from x*), so the correction there is 0 and the ordinary test passes:
 * the exception path is not reached. Whatever the path, x - x* = A^{-1} r
 * with r the exact residual, |r| <= |G| + 9u, and at the return |A^{-1} G|
 * is the correction (within tol_x on the ordinary path, at its rounding on
 * the exception's), so |x - x*|_inf <= 1.5 cond_inf(A) eps |x*|_inf
 * (= 2.2e-8 > ||A^{-1}|| 9u + tol_x). Asserts: OK, converged, that bound.
 * (b) G_1 quantized: no x has |G_1| < q/2 = 5.7e-14 (residual ratio 0.14:
 * the residual test holds there), so once Newton is within rounding of x*
 * (G_0 ~ 1e-16, G_1 = +-q/2) no step can lower the merit, and the
 * correction A^{-1} (0, +-q/2), of size q / (2d) = 2^-21 = 4.8e-7, is
 * 2.4e6 times tol_x. Asserts: OK, converged = 1, residual_ratio <= 1,
 * error_ratio > 1, ||G||_inf = q/2 (G_1 at its floor, G_0 below it), and
 * |x - x*|_inf <= ||A^{-1}||_inf (q + 9u) = 1.9e-6: |r_1| <= |G_1| + q/2 +
 * 9u = q + 9u and |r_0| <= ||G||_inf + 9u.
 * (c) The exception is not claimed when the residual is not at its
 * rounding level: plain G, rtol = 1e-6 (tol_x ~ 2e-6, tol_g ~ 4e-6), from
 * x0 = x* + 2^-10 (1, -1), where G = A (x0 - x*) = (0, -2^-33) exactly:
 * the residual test already holds (ratio ~ 3e-5) but the correction
 * 2^-10 (-1, 1) is ~500 times tol_x, and the full step lowers the residual
 * to rounding. Asserts: OK, converged, at least one iteration,
 * error_ratio <= 1, |x - x*|_inf <= 2.2e-8 (as in (a)). (Regression test for
 * b9eb999, which added the exception; without it (b) ends
 * CDYN_ERR_NOCONV.) */
START_TEST(residual_at_its_rounding_level_ends_converged_with_the_error_ratio)
{
    const double xstar[2] = {1.0, 2.0};
    const double inv_norm = 0x1p24 + 1.0, u = 0x1p-53;
    const double cond = (2.0 + RL_D) * (2.0 + RL_D) / RL_D;
    const double bound_plain = 1.5 * cond * DBL_EPSILON * 2.0;

    /* (a) */
    rl_system s = {0};
    cdyn_newton *nt = create_ok(2, 2);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-13, NULL), CDYN_OK);
    double x[2] = {1.1, 1.9};
    cdyn_status st = cdyn_newton_solve(nt, rl_residual, rl_jacobian, &s, x);
    cdyn_newton_report r = get_report(nt);
    ck_assert_msg(st == CDYN_OK && r.converged == 1, "(a): status %d, converged %d (%s)", st,
                  r.converged, cdyn_newton_last_error(nt));
    ck_assert_msg(dist_inf(2, x, xstar) <= bound_plain, "(a): |x - x*| = %.3e > %.3e",
                  dist_inf(2, x, xstar), bound_plain);
    cdyn_newton_free(nt);

    /* (b) */
    s.quantized = 1;
    nt = create_ok(2, 2);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-13, NULL), CDYN_OK);
    x[0] = 1.1;
    x[1] = 1.9;
    st = cdyn_newton_solve(nt, rl_residual, rl_jacobian, &s, x);
    r = get_report(nt);
    ck_assert_msg(st == CDYN_OK && r.converged == 1, "(b): status %d, converged %d (%s)", st,
                  r.converged, cdyn_newton_last_error(nt));
    ck_assert_msg(r.residual_ratio <= 1.0 && r.error_ratio > 1.0,
                  "(b): residual ratio %.3g, error ratio %.3g", r.residual_ratio,
                  r.error_ratio);
    ck_assert_msg(r.residual_norm == 0.5 * RL_Q, "(b): ||G|| = %.17g, q/2 = %.17g",
                  r.residual_norm, 0.5 * RL_Q);
    double bound = inv_norm * (RL_Q + 9.0 * u);
    ck_assert_msg(dist_inf(2, x, xstar) <= bound, "(b): |x - x*| = %.3e > %.3e",
                  dist_inf(2, x, xstar), bound);
    cdyn_newton_free(nt);

    /* (c) */
    s.quantized = 0;
    nt = create_ok(2, 2);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-6, NULL), CDYN_OK);
    x[0] = 1.0 + 0x1p-10;
    x[1] = 2.0 - 0x1p-10;
    double g0[2];
    rl_residual(x, g0, &s);
    ck_assert(g0[0] == 0.0 && g0[1] == -0x1p-33); /* the premise */
    st = cdyn_newton_solve(nt, rl_residual, rl_jacobian, &s, x);
    r = get_report(nt);
    ck_assert_msg(st == CDYN_OK && r.converged == 1 && r.iterations >= 1 &&
                      r.error_ratio <= 1.0,
                  "(c): status %d, converged %d, %d iterations, error ratio %.3g", st,
                  r.converged, r.iterations, r.error_ratio);
    ck_assert_msg(dist_inf(2, x, xstar) <= bound_plain, "(c): |x - x*| = %.3e > %.3e",
                  dist_inf(2, x, xstar), bound_plain);
    cdyn_newton_free(nt);
}
END_TEST

/* newton.h, "One exception", second clause: the residual test met at two
 * successive iterates while the correction shrinks by less than 30 %. The
 * system of the test above with G_1 carrying noise of amplitude q/2 that
 * changes with every bit of x (a hash of x's bits, in [-1/2, 1/2) q), and
 * plain Newton steps (no line search: every full step is taken, so the
 * first clause, no descent, cannot end the solve): the corrections
 * A^{-1} (0, noise), of size up to q/(2d) = 2^-21, never shrink. Without
 * the clause the solve runs to its cap of 20 iterations and ends
 * CDYN_ERR_NOCONV. Asserts: OK, converged, residual
 * ratio <= 1, error ratio > 1, fewer than 20 iterations, and
 * |x - x*|_inf <= ||A^{-1}||_inf (|G_1| + q/2 + 9u) <= ||A^{-1}|| (2q + 9u)
 * (at the return |G| meets its tolerance, tol_g ~ 4e-13 < q). */
static int noisy_residual(const double *x, double *G, void *user)
{
    (void)user;
    unsigned long long bits[2];
    memcpy(bits, x, sizeof bits);
    unsigned long long h = bits[0] * 0x9E3779B97F4A7C15ull ^ bits[1] * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    double noise = (double)(h >> 11) * 0x1p-53 - 0.5; /* in [-1/2, 1/2) */
    G[0] = (x[0] + x[1]) - 3.0;
    G[1] = (x[0] + (1.0 + RL_D) * x[1]) - (3.0 + 0x1p-22) + noise * RL_Q;
    return 0;
}

START_TEST(correction_that_stops_shrinking_at_the_rounding_level_ends_converged)
{
    const double xstar[2] = {1.0, 2.0}, inv_norm = 0x1p24 + 1.0, u = 0x1p-53;
    cdyn_newton *nt = create_ok(2, 2);
    ck_assert_int_eq(cdyn_newton_set_tolerances(nt, 1e-13, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_set_max_backtracks(nt, 0), CDYN_OK);
    double x[2] = {1.1, 1.9};
    cdyn_status st = cdyn_newton_solve(nt, noisy_residual, rl_jacobian, NULL, x);
    cdyn_newton_report r = get_report(nt);
    ck_assert_msg(st == CDYN_OK && r.converged == 1, "status %d, converged %d (%s)", st,
                  r.converged, cdyn_newton_last_error(nt));
    ck_assert_msg(r.residual_ratio <= 1.0 && r.error_ratio > 1.0 && r.iterations < 20,
                  "residual ratio %.3g, error ratio %.3g, %d iterations", r.residual_ratio,
                  r.error_ratio, r.iterations);
    double bound = inv_norm * (2.0 * RL_Q + 9.0 * u);
    ck_assert_msg(dist_inf(2, x, xstar) <= bound, "|x - x*| = %.3e > %.3e",
                  dist_inf(2, x, xstar), bound);
    cdyn_newton_free(nt);
}
END_TEST

/* newton.h: "wide systems (k < p) have their rank decided the same way"
 * (equilibrated rows and columns, so in any units). J = [1 1 e; 1 1 2e],
 * e = 1e-12, and the same J with unknown 2 in units 1e8 times smaller
 * (x2~ = 1e-8 x2, so column 2 times 1e8). The rows differ by (0, 0, e):
 * rank 2 for any e != 0. With rows scaled by 1/2 and column 2 by the power
 * of two f / e that puts its largest entry f in [1/2, 1), the equilibrated
 * J is [1/2 1/2 f/2; 1/2 1/2 f] in both unit systems; the pivoted QR of its
 * transpose takes b = (1/2, 1/2, f) first, then the rest of
 * a = (1/2, 1/2, f/2): |R22| / |R11| = |a x b| / |b|^2 =
 * (f / (2 sqrt 2)) / (1/2 + f^2), in [0.2357, 0.25] for f in [1/2, 1).
 * J' = [1 1 e; 2 2 2e] (row 1 twice row 0) has rank 1 in any units.
 * Asserts, with G = (1, 2), in both unit systems: J: rank 2, smallest_kept
 * in [0.235, 0.25], no dependent rows or dropped columns, J dx = -G to
 * 1e-12 of its terms; J': rank 1, one dependent row, the same one in both
 * units, and 2 dropped columns. (Regression: before d31dc6a the rank of a
 * wide J was decided with its rows equilibrated only: J had rank 1 in the
 * first units (pivot ratio ~1e-12) and 2 in the second.) */
START_TEST(wide_rank_is_the_same_in_any_units_of_the_unknowns)
{
    const double e = 1e-12, units[2] = {1.0, 1e8}, G[2] = {1.0, 2.0};
    int dep_row[2] = {-1, -1};
    for (int k = 0; k < 2; ++k) {
        double c = units[k], dx[3];
        cdyn_newton *nt = create_ok(2, 3);
        const double J[6] = {1.0, 1.0, 1.0, 1.0, e * c, 2.0 * e * c};
        ck_assert_int_eq(cdyn_newton_step(nt, J, 2, G, dx), CDYN_OK);
        cdyn_newton_report r = get_report(nt);
        ck_assert_msg(r.rank == 2 && r.smallest_kept >= 0.235 && r.smallest_kept <= 0.25,
                      "units %g: rank %d, smallest kept %.3g", c, r.rank, r.smallest_kept);
        ck_assert_int_eq(cdyn_newton_dependent_rows(nt, NULL), 0);
        ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 0);
        for (int i = 0; i < 2; ++i) {
            double sum = G[i], terms = fabs(G[i]);
            for (int j = 0; j < 3; ++j) {
                sum += J[i + 2 * j] * dx[j];
                terms += fabs(J[i + 2 * j] * dx[j]);
            }
            ck_assert_msg(fabs(sum) <= 1e-12 * terms, "units %g: row %d of J dx + G = %.3e", c,
                          i, sum);
        }
        const double Jd[6] = {1.0, 2.0, 1.0, 2.0, e * c, 2.0 * e * c};
        ck_assert_int_eq(cdyn_newton_step(nt, Jd, 2, G, dx), CDYN_OK);
        r = get_report(nt);
        ck_assert_msg(r.rank == 1, "units %g: rank %d of a rank-1 J", c, r.rank);
        ck_assert_int_eq(cdyn_newton_dependent_rows(nt, &dep_row[k]), 1);
        ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 2);
        cdyn_newton_free(nt);
    }
    ck_assert_msg(dep_row[0] == dep_row[1], "dependent row %d in the first units, %d in the "
                  "second", dep_row[0], dep_row[1]);
}
END_TEST

/* The slider crank's constraints (r = -28.68, l = -29.93) in the units of
 * a fuzz_mbs input (mbs_open_strict_projection_3): x = p / S with
 * S = (0.0625, 1e-6, 1e24) for the slider, the crank angle and the rod
 * angle, rows by (10, 1):
 *   G0 = 10 (r cos p1 + l cos p2 - p0),   G1 = r sin p1 - l sin p2. */
static const double CRANK_R[2] = {10.0, 1.0};
static const double CRANK_LEN[2] = {-28.6796875, -29.92578125};

static int res_scaled_crank(const double *x, double *G, void *user)
{
    const double *S = user, r = CRANK_LEN[0], l = CRANK_LEN[1];
    double p0 = S[0] * x[0], p1 = S[1] * x[1], p2 = S[2] * x[2];
    G[0] = CRANK_R[0] * (r * cos(p1) + l * cos(p2) - p0);
    G[1] = CRANK_R[1] * (r * sin(p1) - l * sin(p2));
    return 0;
}

static int jac_scaled_crank(const double *x, double *J, int ld, void *user)
{
    const double *S = user, r = CRANK_LEN[0], l = CRANK_LEN[1];
    double p1 = S[1] * x[1], p2 = S[2] * x[2];
    const double row0[3] = {-1.0, -r * sin(p1), -l * sin(p2)};
    const double row1[3] = {0.0, r * cos(p1), -l * cos(p2)};
    for (int j = 0; j < 3; ++j) {
        J[ld * j] = CRANK_R[0] * row0[j] * S[j];
        J[1 + ld * j] = CRANK_R[1] * row1[j] * S[j];
    }
    return 0;
}

/* An unknown at exactly 0 with a coefficient in a row is another term of
 * that row, though its term is 0 now. Here the rod angle starts at 0 with
 * a coefficient of 3e25 in the second row, whose only other term is the
 * crank angle's. The rule that gives an unknown no scale from a row that
 * is its term alone (a closed valve's k Q|Q| = 0) left that row out for
 * the crank angle, whose scale then came from the first row, where near
 * dead centre its coefficient is 4e-12: CDYN_OK after one step with the
 * second row at its whole size (-4e-6, terms 4e-6). From the second start
 * (the crank at 0.073 units; fuzz seed mbs_projection_unknown_at_zero_2)
 * the row counted, but the rows' sizes were compared with the second row
 * scaled by the idle rod angle's 3e25, its terms then looked like
 * rounding and the first row set the crank's floor: CDYN_OK with the
 * second row at -2.1e-6 of terms 2.1e-6 (equation_sizes in newton.c).
 * Asserted: an OK meets both rows within 1e-10 of their terms, from both
 * starts, in those units and in units where every coordinate is in
 * metres and radians (where the solve must end OK: no test that cannot
 * fail). */
START_TEST(an_unknown_at_zero_with_a_coefficient_is_another_term_of_its_row)
{
    const double units[2][3] = {{0.0625, 1e-6, 1e24}, {1.0, 1.0, 1.0}};
    const double starts[2][3] = {{-19.1259765625 * 0.0625, 0.138671875e-6, 0.0},
                                 {28.97328125 * 0.0625, 0.0732421875e-6, 0.0}};
    for (int s = 0; s < 4; ++s) {
        int u = s & 1;
        const double *S = units[u], *start_p = starts[s >> 1];
        double x[3], G[2];
        for (int j = 0; j < 3; ++j) x[j] = start_p[j] / S[j];
        cdyn_newton *nt = create_ok(2, 3);
        cdyn_status st = cdyn_newton_solve(nt, res_scaled_crank, jac_scaled_crank, (void *)S, x);
        res_scaled_crank(x, G, (void *)S);
        double p1 = S[1] * x[1], p2 = S[2] * x[2], r = fabs(CRANK_LEN[0]), l = fabs(CRANK_LEN[1]);
        double terms[2] = {CRANK_R[0] * (r * fabs(cos(p1)) + l * fabs(cos(p2)) + fabs(S[0] * x[0])),
                           CRANK_R[1] * (r * fabs(sin(p1)) + l * fabs(sin(p2)))};
        if (u == 1) ck_assert_int_eq(st, CDYN_OK);
        if (st == CDYN_OK)
            for (int i = 0; i < 2; ++i)
                ck_assert_msg(fabs(G[i]) <= 1e-10 * terms[i],
                              "start %d, units %d: CDYN_OK with row %d at %.3e of terms %.3e",
                              s >> 1, u, i, G[i], terms[i]);
        cdyn_newton_free(nt);
    }
}
END_TEST

/* G = (x0^2 - 1, x0 + x1 - 3), root (1, 2). */
static int res_fold_start(const double *x, double *G, void *user)
{
    (void)user;
    G[0] = x[0] * x[0] - 1.0;
    G[1] = x[0] + x[1] - 3.0;
    return 0;
}

static int jac_fold_start(const double *x, double *J, int ldj, void *user)
{
    (void)user;
    J[0] = 2.0 * x[0];
    J[1] = 1.0;
    J[ldj] = 0.0;
    J[1 + ldj] = 1.0;
    return 0;
}

/* newton.h: cdyn_newton_dependent_rows / _dropped_columns describe "the
 * last rank-deficient step" and return "0 if the last step had full rank".
 * (1) Steps: J = [1 2; 2 4] (rank 1) and then J = [2 1; 1 3] (det 5).
 * (2) A solve whose first Jacobian is singular: from x = (0, 0),
 * J = [2 x0 0; 1 1] = [0 0; 1 1] has rank 1 (row 0 is zero), the step is
 * the SVD one; at the root (1, 2) J = [2 0; 1 1] (det 2) has full rank, so
 * the last step of the solve has full rank. Asserts: (1) after the
 * singular step 1 dependent row and 1 dropped column, after the regular
 * one 0 and 0; (2) OK, converged, at least one SVD step (the premise), the
 * report's rank 2, 0 dependent rows and 0 dropped columns, x within 1e-9
 * of (1, 2) (rtol 1e-10). (Regression: before d31dc6a a solve kept the
 * diagnosis of its singular first step after later full-rank steps.) */
START_TEST(diagnosis_is_cleared_by_a_full_rank_step)
{
    cdyn_newton *nt = create_ok(2, 2);
    const double Js[4] = {1.0, 2.0, 2.0, 4.0}, Jr[4] = {2.0, 1.0, 1.0, 3.0}, G[2] = {1.0, 0.0};
    double dx[2];
    ck_assert_int_eq(cdyn_newton_step(nt, Js, 2, G, dx), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, NULL), 1);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 1);
    ck_assert_int_eq(cdyn_newton_step(nt, Jr, 2, G, dx), CDYN_OK);
    ck_assert_int_eq(cdyn_newton_dependent_rows(nt, NULL), 0);
    ck_assert_int_eq(cdyn_newton_dropped_columns(nt, NULL), 0);
    cdyn_newton_free(nt);

    nt = create_ok(2, 2);
    double x[2] = {0.0, 0.0};
    const double root[2] = {1.0, 2.0};
    cdyn_status st = cdyn_newton_solve(nt, res_fold_start, jac_fold_start, NULL, x);
    cdyn_newton_report r = get_report(nt);
    ck_assert_msg(st == CDYN_OK && r.converged == 1, "status %d (%s)", st,
                  cdyn_newton_last_error(nt));
    ck_assert_msg(r.svd_steps >= 1, "premise: no SVD step (%d)", r.svd_steps);
    ck_assert_int_eq(r.rank, 2);
    ck_assert_msg(cdyn_newton_dependent_rows(nt, NULL) == 0 &&
                      cdyn_newton_dropped_columns(nt, NULL) == 0,
                  "after a solve ending at full rank: %d dependent rows, %d dropped columns",
                  cdyn_newton_dependent_rows(nt, NULL), cdyn_newton_dropped_columns(nt, NULL));
    ck_assert_double_le(dist_inf(2, x, root), 1e-9);
    cdyn_newton_free(nt);
}
END_TEST

/* ======================================================================== */

static Suite *newton_suite(void)
{
    Suite *s = suite_create("newton");

    TCase *conv = tcase_create("convergence");
    tcase_set_timeout(conv, 60);
    tcase_add_test(conv, circle_line_error_follows_heron_identity_with_order_two);
    tcase_add_test(conv, a_root_approached_linearly_is_not_taken_for_rounding);
    tcase_add_test(conv, a_learned_magnitude_does_not_hide_a_constant_behind_a_stale_term);
    tcase_add_test(conv, a_closed_valve_with_a_stale_flow_costs_one_iterate);
    tcase_add_test(conv, orifices_from_far_guesses_and_through_a_drained_tank);
    tcase_add_test(conv, a_differenced_jacobian_that_cannot_see_its_rank_is_refused);
    tcase_add_test(conv, no_descent_above_the_rounding_is_refused);
    tcase_add_test(conv, quadratic_3x3_error_obeys_newton_bound_with_order_two);
    tcase_add_test(conv, warm_start_after_small_parameter_change_needs_at_most_two_steps);
    tcase_add_test(conv, finite_difference_jacobian_converges_to_known_roots);
    tcase_add_test(conv, sparse_system_converges_to_its_root_with_the_same_verdicts_in_any_units);
    suite_add_tcase(s, conv);

    TCase *cap = tcase_create("iteration_cap");
    tcase_set_timeout(cap, 60);
    tcase_add_test(cap, cap_is_honoured_exactly_and_best_iterate_returned_on_cycle);
    tcase_add_test(cap, cap_is_honoured_exactly_on_slow_double_root);
    tcase_add_test(cap, cap_returns_initial_guess_when_newton_diverges);
    tcase_add_test(cap, cap_returns_the_last_of_decreasing_iterates_not_the_start);
    suite_add_tcase(s, cap);

    TCase *rank = tcase_create("rank_deficient");
    tcase_set_timeout(rank, 60);
    tcase_add_test(rank, singular_2x2_consistent_system_gives_minimum_norm_solution);
    tcase_add_test(rank, singular_3x3_with_sum_row_names_dependent_row_and_dropped_column);
    tcase_add_test(rank, signed_square_with_zero_flow_root_converges_without_nan);
    tcase_add_test(rank, signed_square_started_at_zero_flow_takes_svd_step_without_nan);
    suite_add_tcase(s, rank);

    TCase *dbl = tcase_create("double_root");
    tcase_set_timeout(dbl, 60);
    tcase_add_test(dbl, double_root_at_zero_converges_in_two_steps_at_any_scale);
    tcase_add_test(dbl, closed_valve_flow_converges_to_zero_against_the_junction_flows);
    tcase_add_test(dbl, a_noise_coefficient_does_not_widen_a_tolerance);
    tcase_add_test(dbl, a_far_solution_does_not_loosen_later_solves);
    tcase_add_test(dbl, an_equation_an_unknown_barely_enters_does_not_set_its_scale);
    tcase_add_test(dbl, a_scale_beyond_the_double_range_is_no_tolerance);
    tcase_add_test(dbl, equations_of_other_units_are_compared_in_equilibrated_rows);
    suite_add_tcase(s, dbl);

    TCase *step = tcase_create("step");
    tcase_set_timeout(step, 60);
    tcase_add_test(step, step_on_full_rank_square_matches_hand_solution);
    tcase_add_test(step, step_on_scaled_permutation_matches_hand_solution_and_the_qr_verdict);
    tcase_add_test(step, scaled_permutation_jacobian_converges_to_the_known_root_in_any_units);
    tcase_add_test(step, scaled_permutation_step_is_exact_and_leaves_no_trace);
    tcase_add_test(step, step_on_wide_jacobian_is_minimum_norm);
    tcase_add_test(step, step_on_singular_jacobian_uses_svd_outer_inverse);
    suite_add_tcase(s, step);

    TCase *wide = tcase_create("underdetermined");
    tcase_set_timeout(wide, 60);
    tcase_add_test(wide, underdetermined_linear_solve_gives_minimum_norm_solution);
    tcase_add_test(wide, underdetermined_circle_converges_along_ray_to_circle);
    suite_add_tcase(s, wide);

    TCase *cb = tcase_create("callbacks");
    tcase_set_timeout(cb, 60);
    tcase_add_test(cb, residual_callback_failure_returns_code_and_best_iterate);
    tcase_add_test(cb, jacobian_callback_failure_returns_code_and_best_iterate);
    tcase_add_test(cb, nonfinite_callback_output_is_reported_with_best_iterate);
    suite_add_tcase(s, cb);

    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 60);
    tcase_add_test(bad, create_rejects_bad_sizes);
    tcase_add_test(bad, null_object_is_rejected_everywhere);
    tcase_add_test(bad, solve_rejects_null_and_nonfinite_arguments_leaving_x_untouched);
    tcase_add_test(bad, step_rejects_bad_arguments_leaving_dx_untouched);
    tcase_add_test(bad, set_max_iterations_rejects_out_of_range_and_keeps_setting);
    tcase_add_test(bad, set_tolerances_rejects_out_of_range_and_keeps_setting);
    tcase_add_test(bad, set_residual_tolerances_replace_the_default_residual_test);
    tcase_add_test(bad, set_rank_tolerance_rejects_out_of_range_and_keeps_setting);
    tcase_add_test(bad, set_fd_step_rejects_out_of_range_and_keeps_setting);
    suite_add_tcase(s, bad);

    TCase *alloc = tcase_create("allocation");
    tcase_set_timeout(alloc, 60);
    tcase_add_test(alloc, solve_and_step_do_not_allocate);
    suite_add_tcase(s, alloc);

    TCase *review = tcase_create("review");
    tcase_set_timeout(review, 60);
    tcase_add_test(review, residual_at_its_rounding_level_ends_converged_with_the_error_ratio);
    tcase_add_test(review, correction_that_stops_shrinking_at_the_rounding_level_ends_converged);
    tcase_add_test(review, wide_rank_is_the_same_in_any_units_of_the_unknowns);
    tcase_add_test(review, an_unknown_at_zero_with_a_coefficient_is_another_term_of_its_row);
    tcase_add_test(review, diagnosis_is_cleared_by_a_full_rank_step);
    suite_add_tcase(s, review);
    return s;
}

int main(void)
{
    return tu_run_suite(newton_suite());
}
