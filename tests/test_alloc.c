/* Zero heap allocation in every per-step call of the library.
 *
 * tests/alloc_count.c wraps malloc/calloc/realloc/free at link time, so
 * every heap call made by libcdyn (linked statically here) is counted.
 * Each public header says which calls may allocate: the create functions,
 * and cdyn_dae_set_mass()/_set_mass_fn() (which build the Newton and
 * null-space objects). Everything else used per step must not. No header
 * documents lazy setup, so no call is warmed up: the first per-step call
 * after create and setup is counted like every later one.
 * The Jacobian checks (cdyn_newton_check_jacobian, cdyn_dae_check_jacobian,
 * cdyn_mbs_check_jacobian) are documented "No allocation" too: counted
 * beside the calls of their modules, on success and on failure.
 *
 * The counted calls are recorded one by one (EXPECT / NOTE below): the
 * counter is read and restarted after each call, so a failure names the
 * line of the call that allocated, and each call's status is checked
 * against the expected one (CDYN_OK, or the documented error) only after
 * counting has stopped. No Check assertion runs while counting (Check may
 * allocate to report a passed mark point).
 *
 * Small (every dimension <= 16) and larger sizes take different linear
 * algebra (plain-C kernels vs. Fortran BLAS/LAPACK), so the method layers
 * are run at both. Limitation: allocations made inside the shared BLAS,
 * LAPACK or libgfortran are not seen by link-time wrapping.
 */
#include "cdyn/constraint.h"
#include "cdyn/dae.h"
#include "cdyn/mbs.h"
#include "cdyn/newton.h"
#include "cdyn/nullspace.h"
#include "cdyn/rigid.h"

#include "alloc_count.h"
#include "linalg.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Recording counted calls                                                   */

enum { MAXREC = 128 };

typedef struct {
    int n;
    cdyn_status got[MAXREC], want[MAXREC];
    long allocs[MAXREC];
    int line[MAXREC];
} rec_t;

static void rec_begin(rec_t *r)
{
    r->n = 0;
    alloc_count_start();
}

/* Called after the recorded expression was evaluated (with counting on). */
static void rec_put(rec_t *r, cdyn_status got, cdyn_status want, int line)
{
    long calls = alloc_count_stop();
    if (r->n < MAXREC) {
        r->got[r->n] = got;
        r->want[r->n] = want;
        r->allocs[r->n] = calls;
        r->line[r->n] = line;
    }
    ++r->n;
    alloc_count_start();
}

/* Stop counting; every recorded call allocated nothing and returned what
 * it should. */
static void rec_end(rec_t *r, const char *what)
{
    long tail = alloc_count_stop();
    ck_assert_msg(r->n <= MAXREC, "%s: too many recorded calls (%d)", what, r->n);
    ck_assert_msg(tail == 0, "%s: %ld heap calls after the last recorded call", what, tail);
    for (int i = 0; i < r->n; ++i)
        ck_assert_msg(r->allocs[i] == 0, "%s: the call at test_alloc.c:%d made %ld heap calls",
                      what, r->line[i], r->allocs[i]);
    for (int i = 0; i < r->n; ++i)
        ck_assert_msg(r->got[i] == r->want[i],
                      "%s: the call at test_alloc.c:%d returned %d (%s), expected %d (%s)", what,
                      r->line[i], (int)r->got[i], cdyn_status_string(r->got[i]), (int)r->want[i],
                      cdyn_status_string(r->want[i]));
}

#define EXPECT(r, want, expr) rec_put((r), (expr), (want), __LINE__)
#define OK(r, expr) EXPECT(r, CDYN_OK, expr)
/* a call that returns no status (an accessor): only its allocations count */
#define NOTE(r, expr) ((void)(expr), rec_put((r), CDYN_OK, CDYN_OK, __LINE__))

static double *dalloc(size_t count)
{
    double *p = calloc(count > 0 ? count : 1, sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}

static double rel_diff(int len, const double *a, const double *b)
{
    double d = 0.0, s = 0.0;
    for (int i = 0; i < len; ++i) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(b[i]));
    }
    return d / (s > 0.0 ? s : 1.0);
}

/* The two size classes used for the method layers: (n, m). */
static const int SIZES[][2] = {{3, 1}, {3, 2}, {30, 10}};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* ======================================================================== */
/* 1. Null-space reduction                                                  */

START_TEST(nullspace_per_step_calls_do_not_allocate)
{
    for (int s = 0; s < NSIZES; ++s) {
        const int n = SIZES[s][0], m = SIZES[s][1], d = n - m;
        tu_rng r;
        tu_rng_seed(&r, 500 + (unsigned)s);
        double *W = dalloc((size_t)m * n), *Wp = dalloc((size_t)m * n);
        double *Wdot = dalloc((size_t)m * n), *M = dalloc((size_t)n * n), *F = dalloc(n);
        double *c = dalloc(m), *vbar = dalloc(d), *v = dalloc(n), *vb = dalloc(d);
        double *alpha = dalloc((size_t)n * d), *alpha_dot = dalloc((size_t)n * d);
        double *Mbar = dalloc((size_t)d * d), *Fbar = dalloc(d), *vdot = dalloc(n);
        double *lambda = dalloc(m), *vdot2 = dalloc(n), *lambda2 = dalloc(m);
        int *ind = calloc((size_t)n, sizeof(int)), *dep = calloc((size_t)n, sizeof(int));
        int *rows = calloc((size_t)m, sizeof(int));
        ck_assert(ind && dep && rows);
        tu_random(&r, m, n, W, m);
        tu_random(&r, m, n, Wdot, m);
        for (int i = 0; i < m * n; ++i) Wp[i] = W[i] + 1e-6 * tu_uniform(&r);
        tu_random_spd(&r, n, M, n);
        tu_random(&r, n, 1, F, n);
        tu_random(&r, m, 1, c, m);
        tu_random(&r, d, 1, vbar, d);
        cdyn_status st = CDYN_ERR_ARG;
        cdyn_nullspace *ns = cdyn_nullspace_create(n, m, &st);
        ck_assert_int_eq(st, CDYN_OK);
        int changed = -1, rank = -1;
        double cond = 0.0, dependence = 0.0;

        rec_t rec;
        rec_begin(&rec);
        OK(&rec, cdyn_nullspace_factor(ns, W, m));
        OK(&rec, cdyn_nullspace_reduce(ns, M, n, F, c, Mbar, d, Fbar));
        OK(&rec, cdyn_nullspace_reduce(ns, M, n, F, NULL, Mbar, d, Fbar));
        OK(&rec, cdyn_nullspace_recover(ns, M, n, F, c, vbar, vdot, lambda));
        OK(&rec, cdyn_nullspace_recover(ns, M, n, F, NULL, vbar, vdot, NULL));
        OK(&rec, cdyn_nullspace_solve(ns, M, n, F, c, vdot, lambda));
        OK(&rec, cdyn_nullspace_solve(ns, M, n, F, NULL, vdot2, NULL));
        OK(&rec, cdyn_nullspace_update(ns, Wp, m, &changed));
        OK(&rec, cdyn_nullspace_solve(ns, M, n, F, c, vdot2, lambda2));
        OK(&rec, cdyn_nullspace_update(ns, W, m, NULL));
        OK(&rec, cdyn_nullspace_solve(ns, M, n, F, c, vdot, lambda));
        NOTE(&rec, cdyn_nullspace_partition(ns, ind, dep));
        OK(&rec, cdyn_nullspace_alpha(ns, alpha, n));
        OK(&rec, cdyn_nullspace_alpha_dot(ns, Wdot, m, alpha_dot, n));
        OK(&rec, cdyn_nullspace_expand(ns, vbar, v));
        OK(&rec, cdyn_nullspace_complete(ns, vbar, c, v));
        OK(&rec, cdyn_nullspace_independent(ns, v, vb));
        NOTE(&rec, cond = cdyn_nullspace_condition(ns));
        NOTE(&rec, dependence = cdyn_nullspace_dependence(ns));
        NOTE(&rec, rank = cdyn_nullspace_rank(ns));
        NOTE(&rec, cdyn_nullspace_redundant_rows(ns, rows));
        rec_end(&rec, n > CDYN__SMALL ? "nullspace (n = 30)" : "nullspace (n = 3)");

        ck_assert_int_eq(rank, m);
        ck_assert_double_ge(cond, 1.0);
        ck_assert_double_ge(dependence, 0.0);
        ck_assert_int_eq(changed, 0);
        /* the counted solve computed the constrained rates: against a
         * bordered LU solve of M v' - W^T l = F, W v' = -c (well conditioned
         * random data: 1e-10 relative) */
        double *vref = dalloc(n), *lref = dalloc(m);
        ck_assert_int_eq(tu_kkt_solve(n, m, M, n, W, m, F, c, vref, lref), 0);
        ck_assert_double_le(rel_diff(n, vdot, vref), 1e-10);
        ck_assert_double_le(rel_diff(m, lambda, lref), 1e-10);
        free(vref);
        free(lref);
        cdyn_nullspace_free(ns);
        double *bufs[] = {W,     Wp,        Wdot, M,    F,    c,      vbar,  v,      vb,
                          alpha, alpha_dot, Mbar, Fbar, vdot, lambda, vdot2, lambda2};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) free(bufs[i]);
        free(ind);
        free(dep);
        free(rows);
    }
}
END_TEST

/* ======================================================================== */
/* 2. Minimum-order DAE                                                      */

/* n states, the first r with mass, q = n - r algebraic:
 *   F_i     = -v_i + 0.5 v_{r + i mod q} + 0.2 sin(t + i)              (i < r)
 *   F_{r+j} = v_{r+j}^3 + v_{r+j} - v_j + 0.1 v_{(j+1) mod r}           (j < q)
 * M = blockdiag(Mr, 0): G0 = the algebraic F, dG0/dv_a = diag(3 v^2 + 1)
 * is regular: index 1. */
typedef struct {
    int n, r;
    double Mr[20 * 20];
    int time_mass; /* for set_mass_fn: M(t) = (1 + 0.2 sin t) blockdiag(Mr, 0) */
} dae_model;

static int dae_force(double t, const double *v, double *F, void *user)
{
    const dae_model *p = user;
    int n = p->n, r = p->r, q = n - r;
    for (int i = 0; i < r; ++i) F[i] = -v[i] + 0.5 * v[r + i % q] + 0.2 * sin(t + i);
    for (int j = 0; j < q; ++j) {
        double a = v[r + j];
        F[r + j] = a * a * a + a - v[j] + 0.1 * v[(j + 1) % r];
    }
    return 0;
}

static int dae_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    const dae_model *p = user;
    int n = p->n, r = p->r, q = n - r;
    (void)t;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) J[i + (size_t)j * ld] = 0.0;
    for (int i = 0; i < r; ++i) {
        J[i + (size_t)i * ld] = -1.0;
        J[i + (size_t)(r + i % q) * ld] += 0.5;
    }
    for (int j = 0; j < q; ++j) {
        double a = v[r + j];
        J[(r + j) + (size_t)(r + j) * ld] = 3.0 * a * a + 1.0;
        J[(r + j) + (size_t)j * ld] += -1.0;
        J[(r + j) + (size_t)((j + 1) % r) * ld] += 0.1;
    }
    return 0;
}

static int dae_time(double t, const double *v, double *Ft, void *user)
{
    const dae_model *p = user;
    (void)v;
    for (int i = 0; i < p->n; ++i) Ft[i] = i < p->r ? 0.2 * cos(t + i) : 0.0;
    return 0;
}

static void dae_mass_at(const dae_model *p, double scale, double *M, int ldm)
{
    for (int j = 0; j < p->n; ++j)
        for (int i = 0; i < p->n; ++i)
            M[i + (size_t)j * ldm] =
                i < p->r && j < p->r ? scale * p->Mr[i + (size_t)j * p->r] : 0.0;
}

static int dae_mass(double t, double *M, int ldm, void *user)
{
    dae_mass_at(user, 1.0 + 0.2 * sin(t), M, ldm);
    return 0;
}

/* Closed valve: F = [-0.5 v0; -v1; v0 v2 - v1], M = diag(1, 1, 0).
 * At v0 = v1 = 0 every v2 solves G0 = 0 and dG0/dv2 = v0 = 0: the rate
 * solve takes the SVD outer inverse. The rates there are consistent:
 * v0' = v1' = 0 and the differentiated constraint v2 v0' + v0 v2' - v1' = 0
 * holds for any v2' (the outer inverse gives 0). They must be, since rhs
 * certifies its rates (dae.h): with a term 0.2 v2 in F0 (v0' = 0.2 v2) the
 * differentiated constraint would read 0.2 v2^2 = 0, no rates at all, and
 * rhs would rightly refuse with CDYN_ERR_SINGULAR. */
static int valve_force(double t, const double *v, double *F, void *user)
{
    (void)t;
    (void)user;
    F[0] = -0.5 * v[0];
    F[1] = -v[1];
    F[2] = v[0] * v[2] - v[1];
    return 0;
}

static int valve_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    (void)t;
    (void)user;
    double cols[3][3] = {{-0.5, 0.0, v[2]}, {0.0, -1.0, -1.0}, {0.0, 0.0, v[0]}};
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) J[i + (size_t)j * ld] = cols[j][i];
    return 0;
}

/* variant: 0 exact callbacks, 1 finite differences, 2 M(t) by callback */
static cdyn_dae *dae_ready(dae_model *p, int n, int variant, double *v0)
{
    tu_rng r;
    tu_rng_seed(&r, 600 + (unsigned)n);
    p->n = n;
    p->r = 2 * n / 3;
    if (n == 3) {
        const double Mr[4] = {2.0, 0.3, 0.3, 1.0};
        memcpy(p->Mr, Mr, sizeof Mr);
    } else {
        tu_random_spd(&r, p->r, p->Mr, p->r);
    }
    cdyn_status st = CDYN_ERR_ARG;
    cdyn_dae *dae = cdyn_dae_create(n, &st);
    ck_assert_int_eq(st, CDYN_OK);
    if (variant == 2) {
        ck_assert_int_eq(cdyn_dae_set_mass_fn(dae, dae_mass, p, 0.0), CDYN_OK);
    } else {
        double *M = dalloc((size_t)n * n);
        dae_mass_at(p, 1.0, M, n);
        ck_assert_int_eq(cdyn_dae_set_mass(dae, M, n), CDYN_OK);
        free(M);
    }
    ck_assert_int_eq(cdyn_dae_rank(dae), p->r);
    if (variant == 1)
        ck_assert_int_eq(cdyn_dae_set_model(dae, dae_force, NULL, NULL, p), CDYN_OK);
    else
        ck_assert_int_eq(cdyn_dae_set_model(dae, dae_force, dae_jacobian, dae_time, p),
                         CDYN_OK);
    for (int i = 0; i < n; ++i) v0[i] = 0.5 + 0.1 * tu_uniform(&r);
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v0), CDYN_OK);
    return dae;
}

START_TEST(dae_rhs_and_consistent_do_not_allocate)
{
    static const int cases[][2] = {{3, 0}, {3, 1}, {3, 2}, {30, 0}, {30, 1}, {30, 2}};
    for (int c = 0; c < 6; ++c) {
        const int n = cases[c][0], variant = cases[c][1];
        dae_model p;
        double v[30], vs[30], vd[30], G0[30], y[20], y2[20], ydot[20], ydot2[20];
        cdyn_dae *dae = dae_ready(&p, n, variant, v);
        const int rr = p.r;
        int integ[30], alg[30], idx = -1;
        cdyn_newton_report rep;
        cdyn_jacobian_check chk[2];
        memset(chk, 0, sizeof chk);
        long svd = -1;

        rec_t rec;
        rec_begin(&rec);
        /* the model check needs only set_functions; with neither dF/dv nor
         * dF/dt given (variant 1) there is nothing to check */
        EXPECT(&rec, variant == 1 ? CDYN_ERR_ARG : CDYN_OK,
               cdyn_dae_check_jacobian(dae, 0.0, v, &chk[0]));
        OK(&rec, cdyn_dae_consistent(dae, 0.0, v));
        NOTE(&rec, cdyn_dae_split_states(dae, integ, alg));
        for (int i = 0; i < rr; ++i) y[i] = v[i], y2[i] = v[i] + 0.05;
        OK(&rec, cdyn_dae_rhs(dae, 0.0, y, ydot));
        OK(&rec, cdyn_dae_rhs(dae, 0.1, y2, ydot2));
        OK(&rec, cdyn_dae_rhs(dae, 0.2, y, ydot));
        OK(&rec, cdyn_dae_last_state(dae, vs, vd));
        OK(&rec, cdyn_dae_hidden_constraints(dae, 0.2, vs, G0));
        OK(&rec, cdyn_dae_analyze(dae, 0.2, vs, &idx));
        OK(&rec, cdyn_newton_get_report(cdyn_dae_newton(dae), &rep));
        NOTE(&rec, svd = cdyn_dae_svd_rate_solves(dae));
        EXPECT(&rec, variant == 1 ? CDYN_ERR_ARG : CDYN_OK,
               cdyn_dae_check_jacobian(dae, 0.2, vs, &chk[1]));
        rec_end(&rec, n > CDYN__SMALL ? "dae (n = 30)" : "dae (n = 3)");

        if (variant != 1) /* exact dF/dv and dF/dt */
            for (int k = 0; k < 2; ++k) ck_assert_int_eq(chk[k].suspect, 0);

        ck_assert_int_eq(idx, 1);
        ck_assert_int_eq(svd, 0);
        ck_assert_int_eq(rep.converged, 1);
        /* the last rhs state is consistent and its integrated part is y */
        ck_assert_double_le(tu_vec_max_abs(n - rr, G0), 1e-9);
        for (int i = 0; i < rr; ++i) ck_assert_double_eq(vs[integ[i]], y[i]);
        cdyn_dae_free(dae);
    }

    /* the closed valve: Newton at a singular dG0/dv_a and the SVD rate solve */
    cdyn_status st = CDYN_ERR_ARG;
    cdyn_dae *dae = cdyn_dae_create(3, &st);
    ck_assert_int_eq(st, CDYN_OK);
    const double M[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0};
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 3), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, valve_force, valve_jacobian, NULL, NULL), CDYN_OK);
    double v[3] = {1.0, 0.5, 0.4}, yo[2] = {1.0, 0.5}, yc[2] = {0.0, 0.0}, ydot[2];
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    long svd = -1;
    rec_t rec;
    rec_begin(&rec);
    OK(&rec, cdyn_dae_consistent(dae, 0.0, v));
    OK(&rec, cdyn_dae_rhs(dae, 0.0, yo, ydot));
    OK(&rec, cdyn_dae_rhs(dae, 0.0, yc, ydot));
    NOTE(&rec, svd = cdyn_dae_svd_rate_solves(dae));
    rec_end(&rec, "dae (closed valve)");
    ck_assert_double_eq_tol(v[2], 0.5, 1e-10);
    ck_assert_int_ge(svd, 1);
    cdyn_dae_free(dae);
}
END_TEST

/* ======================================================================== */
/* 3. Newton                                                                 */

/* k equations in p unknowns:
 *   G_i = x_i^3 + x_i + 0.1 x_{(i+1) mod p} - (1 + 0.1 i),
 * and with `deficient` the last equation repeats the first (rank k - 1,
 * consistent: every step takes the SVD outer inverse). */
typedef struct {
    int k, p, deficient;
} nt_model;

static int nt_residual(const double *x, double *G, void *user)
{
    const nt_model *md = user;
    for (int i = 0; i < md->k; ++i) {
        int e = md->deficient && i == md->k - 1 ? 0 : i;
        G[i] = x[e] * x[e] * x[e] + x[e] + 0.1 * x[(e + 1) % md->p] - (1.0 + 0.1 * e);
    }
    return 0;
}

static int nt_jacobian(const double *x, double *J, int ld, void *user)
{
    const nt_model *md = user;
    for (int j = 0; j < md->p; ++j)
        for (int i = 0; i < md->k; ++i) J[i + (size_t)j * ld] = 0.0;
    for (int i = 0; i < md->k; ++i) {
        int e = md->deficient && i == md->k - 1 ? 0 : i;
        J[i + (size_t)e * ld] = 3.0 * x[e] * x[e] + 1.0;
        J[i + (size_t)((e + 1) % md->p) * ld] += 0.1;
    }
    return 0;
}

/* callbacks that fail: the error path of the Jacobian check */
static int failing_residual(const double *x, double *G, void *user)
{
    (void)x, (void)G, (void)user;
    return 3;
}

static int failing_jacobian(const double *x, double *J, int ld, void *user)
{
    (void)x, (void)J, (void)ld, (void)user;
    return 4;
}

START_TEST(newton_solve_and_step_do_not_allocate)
{
    static const int shapes[][2] = {{2, 2}, {3, 3}, {1, 3}, {2, 3}, {30, 30}, {20, 20}, {10, 30}};
    for (int s = 0; s < 7; ++s) {
        const int k = shapes[s][0], p = shapes[s][1];
        cdyn_status st = CDYN_ERR_ARG;
        cdyn_newton *nt = cdyn_newton_create(k, p, &st), *bt = cdyn_newton_create(k, p, &st);
        ck_assert_int_eq(st, CDYN_OK);
        ck_assert_int_eq(cdyn_newton_set_max_backtracks(bt, 4), CDYN_OK);
        nt_model full = {k, p, 0}, rankdef = {k, p, 1};
        double x[5][30], J[30 * 30], G[30], dx[30];
        int rows[30], cols[30];
        cdyn_newton_report rep[5];
        cdyn_jacobian_check chk[3];
        memset(chk, 0, sizeof chk);
        for (int c = 0; c < 5; ++c)
            for (int i = 0; i < p; ++i) x[c][i] = 0.8 + 0.01 * i;
        for (int i = 0; i < p; ++i) dx[i] = 0.0;
        nt_jacobian(x[0], J, k, &rankdef); /* a rank-deficient J for the step */
        nt_residual(x[0], G, &rankdef);

        rec_t rec;
        rec_begin(&rec);
        OK(&rec, cdyn_newton_solve(nt, nt_residual, nt_jacobian, &full, x[0]));
        OK(&rec, cdyn_newton_get_report(nt, &rep[0]));
        OK(&rec, cdyn_newton_solve(nt, nt_residual, NULL, &full, x[1]));
        OK(&rec, cdyn_newton_get_report(nt, &rep[1]));
        OK(&rec, cdyn_newton_solve(bt, nt_residual, nt_jacobian, &full, x[2]));
        OK(&rec, cdyn_newton_check_jacobian(nt, nt_residual, nt_jacobian, &full, x[0], &chk[0]));
        OK(&rec, cdyn_newton_check_jacobian(bt, nt_residual, nt_jacobian, &full, x[2], &chk[1]));
        if (k > 1) { /* rank-deficient Jacobian: SVD fallback on every step */
            OK(&rec, cdyn_newton_solve(nt, nt_residual, nt_jacobian, &rankdef, x[3]));
            OK(&rec, cdyn_newton_get_report(nt, &rep[3]));
            NOTE(&rec, cdyn_newton_dependent_rows(nt, rows));
            NOTE(&rec, cdyn_newton_dropped_columns(nt, cols));
            OK(&rec, cdyn_newton_solve(nt, nt_residual, NULL, &rankdef, x[4]));
            OK(&rec, cdyn_newton_get_report(nt, &rep[4]));
            OK(&rec, cdyn_newton_step(nt, J, k, G, dx));
            OK(&rec,
               cdyn_newton_check_jacobian(nt, nt_residual, nt_jacobian, &rankdef, x[3], &chk[2]));
        }
        nt_jacobian(x[0], J, k, &full);
        OK(&rec, cdyn_newton_step(nt, J, k, G, dx));
        rec_end(&rec, p > CDYN__SMALL ? "newton (large)" : "newton (small)");

        ck_assert_int_eq(rep[0].converged, 1);
        ck_assert_int_eq(rep[1].converged, 1);
        for (int c = 0; c < (k > 1 ? 3 : 2); ++c) ck_assert_int_eq(chk[c].suspect, 0);
        if (k > 1) {
            ck_assert_int_ge(rep[3].svd_steps, 1);
            ck_assert_int_eq(rep[3].rank, k - 1);
            ck_assert_int_eq(rep[3].converged, 1);
            ck_assert_int_ge(rep[4].svd_steps, 1);
            ck_assert_double_le(rep[3].residual_norm, 1e-10);
        }
        cdyn_newton_free(nt);
        cdyn_newton_free(bt);
    }
}
END_TEST

/* ======================================================================== */
/* 4. Constraint formulations                                                */

typedef struct {
    int n, m, ldp;
    double *M, *Q, *P, *Phi, *Phid, *xi, *C, *Cdup, *Pdup, *KD, *KP, *kcrit, *pen, *h;
} cons_data;

static void cons_init(cons_data *d, int n, int m, unsigned long long seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    d->n = n;
    d->m = m;
    d->ldp = m + 2; /* leading dimension above the row count */
    d->M = dalloc((size_t)n * n);
    d->Q = dalloc(n);
    d->P = dalloc((size_t)d->ldp * n);
    d->Pdup = dalloc((size_t)d->ldp * n);
    d->Phi = dalloc(m);
    d->Phid = dalloc(m);
    d->xi = dalloc(m);
    d->C = dalloc((size_t)m * n);
    d->Cdup = dalloc((size_t)m * n);
    d->KD = dalloc((size_t)m * m);
    d->KP = dalloc((size_t)m * m);
    d->kcrit = dalloc(m);
    d->pen = dalloc(m);
    d->h = dalloc(n);
    tu_random_spd(&r, n, d->M, n);
    tu_random(&r, n, 1, d->Q, n);
    tu_random(&r, m, n, d->P, d->ldp);
    tu_random(&r, m, 1, d->Phi, m);
    tu_random(&r, m, 1, d->Phid, m);
    tu_random(&r, m, 1, d->xi, m);
    tu_random(&r, n, 1, d->h, n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            d->C[i + (size_t)j * m] = d->P[i + (size_t)j * d->ldp] + 0.1 * tu_uniform(&r);
            /* the last row repeats the first (m > 1) or is zero: rank m - 1 */
            d->Pdup[i + (size_t)j * d->ldp] = i < m - 1 ? d->P[i + (size_t)j * d->ldp]
                                              : m > 1   ? d->P[(size_t)j * d->ldp]
                                                        : 0.0;
        }
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) /* C with the same dependence */
            d->Cdup[i + (size_t)j * m] = i < m - 1 ? d->C[i + (size_t)j * m]
                                         : m > 1   ? d->C[(size_t)j * m]
                                                   : 0.0;
    tu_random_spd(&r, m, d->KD, m);
    tu_random_spd(&r, m, d->KP, m);
    for (int i = 0; i < m; ++i) {
        d->kcrit[i] = 1.0 + i;
        d->pen[i] = 10.0 * (1.0 + i);
    }
}

static void cons_free(cons_data *d)
{
    double *bufs[] = {d->M, d->Q,    d->P,  d->Pdup, d->Phi,   d->Phid, d->xi,
                      d->C, d->Cdup, d->KD, d->KP,   d->kcrit, d->pen,  d->h};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) free(bufs[i]);
}

static void constraint_formulations(int n, int m, unsigned long long seed)
{
    cons_data d;
    cons_init(&d, n, m, seed);
    const int size = 2 * n + m;
    double *A = dalloc((size_t)size * size), *B = dalloc(size);
    double *qdd = dalloc(n), *lam = dalloc(m), *qdd0 = dalloc(n), *lam0 = dalloc(m);
    double *gf = dalloc(n), *mu = dalloc(m);
    int *rows = calloc((size_t)m, sizeof(int));
    ck_assert_ptr_nonnull(rows);
    cdyn_status st = CDYN_ERR_ARG;
    cdyn_constraint *c = cdyn_constraint_create(n, m, &st);
    ck_assert_int_eq(st, CDYN_OK);
    int rank_full = -2, rank_dup = -1, nred = -1;
    double sv_full = 0.0, sv_dup = 0.0, margin_full = -2.0;

    rec_t rec;
    rec_begin(&rec);
    /* no stabilization: s = xi */
    OK(&rec, cdyn_constraint_load(c, d.M, n, d.Q, d.P, d.ldp, d.Phi, d.Phid, d.xi));
    OK(&rec, cdyn_constraint_lagrange(c, qdd0, lam0));
    OK(&rec, cdyn_constraint_force(c, gf, mu));
    /* Baumgarte */
    OK(&rec, cdyn_constraint_set_baumgarte(c, 1.5, 2.0));
    OK(&rec, cdyn_constraint_load(c, d.M, n, d.Q, d.P, d.ldp, d.Phi, d.Phid, d.xi));
    OK(&rec, cdyn_constraint_lagrange(c, qdd, lam));
    /* generalized Baumgarte: SPD gain matrices, then critical gains */
    OK(&rec, cdyn_constraint_set_gains(c, d.KD, m, d.KP, m));
    OK(&rec, cdyn_constraint_load(c, d.M, n, d.Q, d.P, d.ldp, d.Phi, d.Phid, d.xi));
    OK(&rec, cdyn_constraint_lagrange(c, qdd, lam));
    OK(&rec, cdyn_constraint_set_critical_gains(c, d.kcrit));
    OK(&rec, cdyn_constraint_load(c, d.M, n, d.Q, d.P, d.ldp, d.Phi, d.Phid, d.xi));
    OK(&rec, cdyn_constraint_lagrange(c, qdd, lam));
    /* reactions with their own C, both the load's Phi_q and C */
    OK(&rec, cdyn_constraint_reactions(c, d.C, m, qdd, lam));
    OK(&rec, cdyn_constraint_force(c, gf, mu));
    OK(&rec, cdyn_constraint_reactions(c, d.P, d.ldp, qdd, lam));
    /* Phi_q of full rank, C with dependent rows: Phi_q M^-1 C^T singular */
    EXPECT(&rec, CDYN_ERR_SINGULAR, cdyn_constraint_reactions(c, d.Cdup, m, qdd, lam));
    OK(&rec, cdyn_constraint_reactions(c, d.C, m, qdd, lam));
    /* pseudo-inverse, full rank */
    OK(&rec, cdyn_constraint_pseudoinverse(c, qdd, lam));
    NOTE(&rec, rank_full = cdyn_constraint_rank(c));
    NOTE(&rec, sv_full = cdyn_constraint_smallest_singular_value(c));
    NOTE(&rec, margin_full = cdyn_constraint_margin(c));
    OK(&rec, cdyn_constraint_force(c, NULL, mu));
    /* penalty: the default constraint masses, then the caller's */
    OK(&rec, cdyn_constraint_penalty(c, qdd, lam));
    OK(&rec, cdyn_constraint_set_penalty(c, d.pen));
    OK(&rec, cdyn_constraint_penalty(c, qdd, lam));
    OK(&rec, cdyn_constraint_force(c, gf, NULL));
    /* export, both variants */
    OK(&rec, cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, d.h, A, size, B));
    OK(&rec, cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, d.C, m, d.h, A, size, B));
    OK(&rec, cdyn_constraint_set_rank_tolerance(c, 1e-11));
    /* a redundant row: KKT refuses, pseudo-inverse and penalty run */
    OK(&rec, cdyn_constraint_load(c, d.M, n, d.Q, d.Pdup, d.ldp, d.Phi, d.Phid, d.xi));
    EXPECT(&rec, CDYN_ERR_SINGULAR, cdyn_constraint_lagrange(c, qdd, lam));
    NOTE(&rec, nred = cdyn_constraint_redundant_rows(c, rows));
    OK(&rec, cdyn_constraint_pseudoinverse(c, qdd, lam));
    NOTE(&rec, rank_dup = cdyn_constraint_rank(c));
    NOTE(&rec, sv_dup = cdyn_constraint_smallest_singular_value(c));
    OK(&rec, cdyn_constraint_force(c, gf, mu));
    OK(&rec, cdyn_constraint_penalty(c, qdd, lam));
    EXPECT(&rec, CDYN_ERR_SINGULAR, cdyn_constraint_reactions(c, d.Pdup, d.ldp, qdd, lam));
    rec_end(&rec, n > CDYN__SMALL ? "constraint (n = 30)" : "constraint (n = 3)");

    /* full rank: the rank facts describe the last rank-LOSS report
     * (constraint.h), and there was none (the failed reactions with Cdup is
     * not about Phi_q's rank): fresh values; the monitor is the margin */
    ck_assert_int_eq(rank_full, -1);
    ck_assert(isnan(sv_full));
    ck_assert(margin_full > 1e-11 && margin_full <= 1.0);
    ck_assert_int_eq(rank_dup, m - 1);
    ck_assert_int_eq(nred, 1);
    ck_assert_int_eq(rows[0], m - 1);
    ck_assert_double_le(sv_dup, 1e-12);
    /* the first counted lagrange call against a bordered LU solve of
     * M q'' - W^T l = Q, W q'' = -c with W = Phi_q, c = -xi (lambda = -l);
     * well conditioned random data: 1e-10 relative */
    double *Pc = dalloc((size_t)m * n), *qref = dalloc(n), *lref = dalloc(m), *cc = dalloc(m);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) Pc[i + (size_t)j * m] = d.P[i + (size_t)j * d.ldp];
    for (int i = 0; i < m; ++i) cc[i] = -d.xi[i];
    ck_assert_int_eq(tu_kkt_solve(n, m, d.M, n, Pc, m, d.Q, cc, qref, lref), 0);
    for (int i = 0; i < m; ++i) lref[i] = -lref[i];
    ck_assert_double_le(rel_diff(n, qdd0, qref), 1e-10);
    ck_assert_double_le(rel_diff(m, lam0, lref), 1e-10);
    free(Pc);
    free(qref);
    free(lref);
    free(cc);
    cdyn_constraint_free(c);
    free(A);
    free(B);
    free(qdd);
    free(lam);
    free(qdd0);
    free(lam0);
    free(gf);
    free(mu);
    free(rows);
    cons_free(&d);
}

START_TEST(constraint_formulations_do_not_allocate_small)
{
    constraint_formulations(3, 1, 700);
    constraint_formulations(3, 2, 701);
}
END_TEST

START_TEST(constraint_formulations_do_not_allocate_large)
{
    constraint_formulations(30, 10, 702);
    constraint_formulations(40, 20, 703); /* m > 16: the Gram certificate of full rank */
}
END_TEST

/* Lagrange's rank-revealing path: A = Phi_q M^{-1} Phi_q^T with a nearly
 * dependent pair of rows has cond(A) = cond(L^{-1} Phi_q^T)^2 ~ 1e10, far
 * above the 1e6 up to which constraint.c trusts the Cholesky factor of A
 * (SCHUR_COND_LIMIT), while the rank decision on Phi_q (tolerance 1e-10)
 * still finds full rank: lagrange runs the pivoted QR of Y and succeeds.
 * The same rows made exactly dependent return CDYN_ERR_SINGULAR. */
START_TEST(lagrange_near_singular_and_rank_deficient_do_not_allocate)
{
    static const int cases[][2] = {{2, 2}, {3, 2}, {30, 10}, {40, 20}};
    for (int cs = 0; cs < 4; ++cs) {
        const int n = cases[cs][0], m = cases[cs][1];
        tu_rng r;
        tu_rng_seed(&r, 800 + (unsigned)cs);
        double *M = dalloc((size_t)n * n), *Q = dalloc(n), *xi = dalloc(m);
        double *P = dalloc((size_t)m * n), *Psing = dalloc((size_t)m * n);
        double *qdd = dalloc(n), *lam = dalloc(m), *gf = dalloc(n);
        double *qdd2 = dalloc(n), *f = dalloc(m);
        if (n > CDYN__SMALL) {
            tu_random_spd(&r, n, M, n);
            tu_random(&r, m, n, P, m);
        } else { /* M = I, Phi_q = [1 0 (0); 1 1e-5 (0)] */
            for (int i = 0; i < n; ++i) M[i + (size_t)i * n] = 1.0;
            P[0] = 1.0;
            P[1] = 1.0;
        }
        /* row m-1 = row m-2 + 1e-5 * (a unit-scale direction) */
        for (int j = 0; j < n; ++j) {
            double dir = n > CDYN__SMALL ? tu_uniform(&r) : (j == 1 ? 1.0 : 0.0);
            P[(m - 1) + (size_t)j * m] = P[(m - 2) + (size_t)j * m] + 1e-5 * dir;
        }
        memcpy(Psing, P, sizeof(double) * (size_t)m * n);
        for (int j = 0; j < n; ++j) Psing[(m - 1) + (size_t)j * m] = P[(m - 2) + (size_t)j * m];
        tu_random(&r, n, 1, Q, n);
        tu_random(&r, m, 1, xi, m);
        cdyn_status st = CDYN_ERR_ARG;
        cdyn_constraint *c = cdyn_constraint_create(n, m, &st);
        ck_assert_int_eq(st, CDYN_OK);
        int rank_ok = -2, rank_sing = -1, nred = -1, red[10];
        double margin_ok = -2.0;
        double sv_sing = -2.0;

        rec_t rec;
        rec_begin(&rec);
        OK(&rec, cdyn_constraint_load(c, M, n, Q, P, m, NULL, NULL, xi));
        OK(&rec, cdyn_constraint_lagrange(c, qdd, lam));
        NOTE(&rec, rank_ok = cdyn_constraint_rank(c));
        NOTE(&rec, margin_ok = cdyn_constraint_margin(c));
        OK(&rec, cdyn_constraint_force(c, gf, NULL));
        /* reactions with C = Phi_q: the same ill-conditioned product, solved
         * by its rank-revealing path */
        OK(&rec, cdyn_constraint_reactions(c, P, m, qdd2, f));
        OK(&rec, cdyn_constraint_load(c, M, n, Q, Psing, m, NULL, NULL, xi));
        EXPECT(&rec, CDYN_ERR_SINGULAR, cdyn_constraint_lagrange(c, qdd, lam));
        EXPECT(&rec, CDYN_ERR_SINGULAR, cdyn_constraint_reactions(c, Psing, m, qdd2, f));
        NOTE(&rec, rank_sing = cdyn_constraint_rank(c));
        NOTE(&rec, nred = cdyn_constraint_redundant_rows(c, red));
        NOTE(&rec, sv_sing = cdyn_constraint_smallest_singular_value(c));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_force(c, gf, NULL));
        rec_end(&rec, n > CDYN__SMALL ? "lagrange near-singular (n = 30, 40)"
                                      : "lagrange near-singular (small)");

        /* full rank (near-singular): no rank-loss report yet, so rank keeps
         * its fresh -1 (constraint.h); the margin is above the tolerance */
        ck_assert_int_eq(rank_ok, -1);
        ck_assert(margin_ok > 1e-10 && margin_ok <= 1.0);
        ck_assert_int_eq(rank_sing, m - 1);
        ck_assert_int_eq(nred, 1);
        ck_assert_double_ge(sv_sing, 0.0);
        ck_assert_double_le(sv_sing, 1e-12);
        /* the QR path really was needed: cond(Phi_q)^2 >= 1e6 with M = I
         * (for n = 30, cond(M) <= 10 changes that by far less than the
         * margin) */
        {
            int k = m, lw = cdyn__gesvd_lwork(m, n);
            double *Pw = dalloc((size_t)m * n), *sv = dalloc(k), *U = dalloc((size_t)m * k);
            double *VT = dalloc((size_t)k * n), *work = dalloc((size_t)lw);
            memcpy(Pw, P, sizeof(double) * (size_t)m * n);
            ck_assert_int_eq(cdyn__gesvd(m, n, Pw, m, sv, U, m, VT, k, work, lw), 0);
            double condA = (sv[0] / sv[k - 1]) * (sv[0] / sv[k - 1]);
            ck_assert_double_gt(condA, 1e8);
            free(Pw);
            free(sv);
            free(U);
            free(VT);
            free(work);
        }
        /* and its answer solves the KKT system K [q''; lambda] = [Q; xi]
         * (K = [M Phi_q^T; Phi_q 0]) with a small normwise backward error
         * ||r|| / (||K|| ||x|| + ||b||) (max norms): 1e-13, i.e. a few hundred
         * eps. Componentwise the rows are far less accurate: with lambda ~
         * 1e10 (n = 2) even LAPACK's dgesv on K leaves |Phi_q q'' - xi| ~ 1e-7
         * in the first row, where q''_0 = xi_0 exactly. */
        double res = 0.0, kmax = 0.0, xmax = 0.0, bmax = 0.0;
        for (int i = 0; i < n; ++i) {
            double s = -Q[i];
            for (int j = 0; j < n; ++j) {
                s += M[i + (size_t)j * n] * qdd[j];
                kmax = fmax(kmax, fabs(M[i + (size_t)j * n]));
            }
            for (int j = 0; j < m; ++j) {
                s += P[j + (size_t)i * m] * lam[j];
                kmax = fmax(kmax, fabs(P[j + (size_t)i * m]));
            }
            res = fmax(res, fabs(s));
            xmax = fmax(xmax, fabs(qdd[i]));
            bmax = fmax(bmax, fabs(Q[i]));
        }
        for (int i = 0; i < m; ++i) {
            double s = -xi[i];
            for (int j = 0; j < n; ++j) s += P[i + (size_t)j * m] * qdd[j];
            res = fmax(res, fabs(s));
            xmax = fmax(xmax, fabs(lam[i]));
            bmax = fmax(bmax, fabs(xi[i]));
        }
        ck_assert_msg(res <= 1e-13 * (kmax * xmax + bmax),
                      "n=%d m=%d: KKT residual %g, ||K|| ||x|| + ||b|| = %g", n, m, res,
                      kmax * xmax + bmax);
        cdyn_constraint_free(c);
        free(M);
        free(Q);
        free(xi);
        free(P);
        free(Psing);
        /* same accelerations from the reactions form (f = lambda there) */
        ck_assert_double_le(rel_diff(n, qdd2, qdd), 1e-6);
        free(qdd);
        free(lam);
        free(gf);
        free(qdd2);
        free(f);
    }
}
END_TEST

/* ======================================================================== */
/* 5. Multibody model                                                        */

/* Small: a particle (mass 2) on the circle where the unit sphere meets the
 * plane z = 0.2 x + 0.1; n = 3, m = 2. Large: a chain of N = 10 particles,
 * each rod of length 1 (the first from the origin); n = 30, m = 10, with
 * exact xi = -2 |v_i - v_{i-1}|^2 and Phi_t = 0 callbacks. Gravity along
 * -z, light damping. `poison` makes the mass callback write a NaN. */
typedef struct {
    int chain, N, poison;
} mbs_model;

static int mb_mass(double t, const double *q, double *M, int ldm, void *user)
{
    const mbs_model *md = user;
    int n = md->chain ? 3 * md->N : 3;
    (void)t;
    (void)q;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
            M[i + (size_t)j * ldm] = i == j ? (md->chain ? 1.0 + 0.1 * (i / 3) : 2.0) : 0.0;
    if (md->poison) M[0] = NAN;
    return 0;
}

static int mb_force(double t, const double *q, const double *qd, double *Q, void *user)
{
    const mbs_model *md = user;
    int n = md->chain ? 3 * md->N : 3;
    (void)t;
    (void)q;
    for (int i = 0; i < n; ++i) {
        double mass = md->chain ? 1.0 + 0.1 * (i / 3) : 2.0;
        Q[i] = (i % 3 == 2 ? -9.81 * mass : 0.0) - 0.05 * qd[i];
    }
    return 0;
}

static int mb_phi(double t, const double *q, double *Phi, void *user)
{
    const mbs_model *md = user;
    (void)t;
    if (!md->chain) {
        Phi[0] = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] - 1.0;
        Phi[1] = q[2] - 0.2 * q[0] - 0.1;
        return 0;
    }
    for (int i = 0; i < md->N; ++i) {
        double s = 0.0;
        for (int a = 0; a < 3; ++a) {
            double dd = q[3 * i + a] - (i > 0 ? q[3 * (i - 1) + a] : 0.0);
            s += dd * dd;
        }
        Phi[i] = s - 1.0;
    }
    return 0;
}

static int mb_jac(double t, const double *q, double *J, int ld, void *user)
{
    const mbs_model *md = user;
    (void)t;
    if (!md->chain) {
        const double rows[2][3] = {{2 * q[0], 2 * q[1], 2 * q[2]}, {-0.2, 0.0, 1.0}};
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 2; ++i) J[i + (size_t)j * ld] = rows[i][j];
        return 0;
    }
    int n = 3 * md->N;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < md->N; ++i) J[i + (size_t)j * ld] = 0.0;
    for (int i = 0; i < md->N; ++i)
        for (int a = 0; a < 3; ++a) {
            double dd = q[3 * i + a] - (i > 0 ? q[3 * (i - 1) + a] : 0.0);
            J[i + (size_t)(3 * i + a) * ld] = 2.0 * dd;
            if (i > 0) J[i + (size_t)(3 * (i - 1) + a) * ld] = -2.0 * dd;
        }
    return 0;
}

static int mb_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    const mbs_model *md = user;
    (void)t;
    (void)q;
    for (int i = 0; i < md->N; ++i) Phi_t[i] = 0.0;
    return 0;
}

static int mb_xi(double t, const double *q, const double *qd, double *xi, void *user)
{
    const mbs_model *md = user;
    (void)t;
    (void)q;
    for (int i = 0; i < md->N; ++i) {
        double s = 0.0;
        for (int a = 0; a < 3; ++a) {
            double dv = qd[3 * i + a] - (i > 0 ? qd[3 * (i - 1) + a] : 0.0);
            s += dv * dv;
        }
        xi[i] = -2.0 * s;
    }
    return 0;
}

/* A consistent y = [q; q'] for the model. */
static void mb_state(const mbs_model *md, double *y)
{
    if (!md->chain) {
        double x = 0.3, z = 0.2 * x + 0.1, yy = sqrt(1.0 - x * x - z * z);
        y[0] = x, y[1] = yy, y[2] = z;
        /* tangent: grad Phi_1 x grad Phi_2 */
        double g1[3] = {2 * x, 2 * yy, 2 * z}, g2[3] = {-0.2, 0.0, 1.0};
        y[3] = 0.4 * (g1[1] * g2[2] - g1[2] * g2[1]);
        y[4] = 0.4 * (g1[2] * g2[0] - g1[0] * g2[2]);
        y[5] = 0.4 * (g1[0] * g2[1] - g1[1] * g2[0]);
        return;
    }
    int n = 3 * md->N;
    const double e[3] = {0.3, -0.2, 1.0};
    for (int i = 0; i < md->N; ++i) {
        double a = 0.3 + 0.05 * i, b = 0.7 * i;
        double u[3] = {sin(a) * cos(b), sin(a) * sin(b), -cos(a)};
        double w[3] = {0.5 * (e[1] * u[2] - e[2] * u[1]), 0.5 * (e[2] * u[0] - e[0] * u[2]),
                       0.5 * (e[0] * u[1] - e[1] * u[0])};
        for (int k = 0; k < 3; ++k) {
            y[3 * i + k] = (i > 0 ? y[3 * (i - 1) + k] : 0.0) + u[k];
            y[n + 3 * i + k] = (i > 0 ? y[n + 3 * (i - 1) + k] : 0.0) + w[k];
        }
    }
}

static cdyn_mbs *mb_new(mbs_model *md, int chain)
{
    md->chain = chain;
    md->N = chain ? 10 : 2;
    md->poison = 0;
    int n = chain ? 30 : 3, m = chain ? 10 : 2;
    cdyn_status st = CDYN_ERR_ARG;
    cdyn_mbs *mbs = cdyn_mbs_create(n, m, &st);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(cdyn_mbs_set_model(mbs, mb_mass, mb_force, mb_phi, mb_jac, md), CDYN_OK);
    if (chain) ck_assert_int_eq(cdyn_mbs_set_time_terms(mbs, mb_phi_t, mb_xi), CDYN_OK);
    return mbs;
}

START_TEST(mbs_per_step_calls_do_not_allocate)
{
    for (int chain = 0; chain < 2; ++chain) {
        mbs_model md;
        cdyn_mbs *mbs = mb_new(&md, chain);
        const int n = chain ? 30 : 3, m = chain ? 10 : 2, d = n - m;
        double y[60], yp[60], ydot[60], z[40], zdot[40], ys[60], gf[30], lam[10], rp = -1, rv = -1;
        int ind[30], dep[10], event = -1;
        double qcur = -1.0, qbest = -1.0;
        cdyn_jacobian_check chk[2];
        memset(chk, 0, sizeof chk);
        double *KD = dalloc((size_t)m * m), *KP = dalloc((size_t)m * m);
        for (int i = 0; i < m; ++i) KD[i + i * m] = 4.0, KP[i + i * m] = 9.0;
        mb_state(&md, y);
        cdyn_constraint *c = cdyn_mbs_constraint(mbs);
        ck_assert_ptr_nonnull(c);

        rec_t rec;
        rec_begin(&rec);
        /* Phi_q (and, for the chain, Phi_t) against differences of Phi */
        OK(&rec, cdyn_mbs_check_jacobian(mbs, 0.0, y, &chk[0]));
        for (int stab = 0; stab < 3; ++stab) {
            if (stab == 1) OK(&rec, cdyn_constraint_set_baumgarte(c, 2.0, 3.0));
            if (stab == 2) OK(&rec, cdyn_constraint_set_gains(c, KD, m, KP, m));
            for (int form = 0; form < 3; ++form) {
                OK(&rec, cdyn_mbs_set_formulation(mbs, (cdyn_mbs_formulation)form));
                OK(&rec, cdyn_mbs_rhs(mbs, 0.0, y, ydot));
                OK(&rec, cdyn_mbs_last_reactions(mbs, gf, lam));
            }
        }
        OK(&rec, cdyn_mbs_set_formulation(mbs, CDYN_MBS_LAGRANGE));
        OK(&rec, cdyn_mbs_last_residuals(mbs, &rp, &rv));
        for (int metric = 0; metric < 2; ++metric) {
            memcpy(yp, y, sizeof y);
            yp[0] += 1e-3;
            yp[1] -= 2e-3;
            yp[n] += 1e-3;
            OK(&rec, cdyn_mbs_set_projection_metric(mbs, (cdyn_mbs_metric)metric));
            OK(&rec, cdyn_mbs_project(mbs, 0.0, yp));
            OK(&rec, cdyn_mbs_last_residuals(mbs, &rp, NULL));
            yp[n] += 1e-3;
            OK(&rec, cdyn_mbs_project_velocities(mbs, 0.0, yp));
        }
        /* with periods that put a whole period in every coordinate: the
         * projection solves with them taken off and, this model not
         * repeating with them, refuses at its final check (mbs.h) */
        double period[30];
        for (int j = 0; j < n; ++j) period[j] = fabs(y[j]) > 0.0 ? 0.75 * fabs(y[j]) : 0.0;
        OK(&rec, cdyn_mbs_set_periods(mbs, period));
        for (int metric = 0; metric < 2; ++metric) {
            memcpy(yp, y, sizeof y);
            yp[0] += 1e-3;
            OK(&rec, cdyn_mbs_set_projection_metric(mbs, (cdyn_mbs_metric)metric));
            EXPECT(&rec, CDYN_ERR_ARG, cdyn_mbs_project(mbs, 0.0, yp));
        }
        OK(&rec, cdyn_mbs_set_periods(mbs, NULL));
        /* partitioned form: cdyn_mbs_partition is the between-steps
         * repartition of the integration loop (mbs.h, partition_rhs) */
        OK(&rec, cdyn_mbs_partition(mbs, 0.0, y));
        NOTE(&rec, cdyn_mbs_partition_coordinates(mbs, ind, dep));
        OK(&rec, cdyn_mbs_partition_gather(mbs, y, z));
        OK(&rec, cdyn_mbs_partition_rhs(mbs, 0.0, z, zdot));
        z[0] += 1e-3;
        OK(&rec, cdyn_mbs_partition_rhs(mbs, 0.01, z, zdot));
        OK(&rec, cdyn_mbs_partition_state(mbs, 0.01, z, ys));
        NOTE(&rec, event = cdyn_mbs_partition_event(mbs));
        OK(&rec, cdyn_mbs_partition_quality(mbs, &qcur, &qbest));
        OK(&rec, cdyn_mbs_last_reactions(mbs, gf, lam));
        OK(&rec, cdyn_mbs_check_jacobian(mbs, 0.01, ys, &chk[1]));
        rec_end(&rec, chain ? "mbs (n = 30)" : "mbs (n = 3)");

        for (int k = 0; k < 2; ++k) ck_assert_int_eq(chk[k].suspect, 0); /* exact callbacks */

        ck_assert_double_le(rp, 1e-10);
        ck_assert(event == 0 || event == 1);
        ck_assert(qcur >= 1.0 && qbest >= 1.0); /* condition estimates are >= 1 */
        for (int i = 0; i < d; ++i) ck_assert_double_eq(ys[ind[i]], z[i]);
        free(KD);
        free(KP);
        cdyn_mbs_free(mbs);
    }
}
END_TEST

/* ======================================================================== */
/* 6. Rigid body                                                             */

static int carriage_motion(double t, double *pos, double *vel, double *acc, void *user)
{
    (void)user;
    pos[0] = 2.0 * t, vel[0] = 2.0, acc[0] = 0.0;
    pos[1] = 0.1 * sin(t), vel[1] = 0.1 * cos(t), acc[1] = -0.1 * sin(t);
    pos[2] = 0.05 * t * t, vel[2] = 0.1 * t, acc[2] = 0.1;
    return 0;
}

typedef struct {
    cdyn_rigid_preset preset;
    cdyn_rigid_preset_params params;
    double mass;
} rigid_ctx;

static int rigid_motion(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                        void *user)
{
    const rigid_ctx *ctx = user;
    return cdyn_rigid_preset_eval(ctx->preset, &ctx->params, t, q, qd, k) == CDYN_OK ? 0 : 1;
}

static int rigid_loads(double t, const double *q, const double *qd, const cdyn_rigid_kinematics *k,
                       double *F, void *user)
{
    const rigid_ctx *ctx = user;
    (void)t;
    (void)q;
    (void)k;
    F[2] = -9.81 * ctx->mass;
    F[3] = -0.1 * qd[0]; /* a small damping moment */
    return 0;
}

START_TEST(rigid_calls_do_not_allocate_for_every_preset)
{
    static const double I[9] = {2.0, 0.1, 0.0, 0.1, 3.0, 0.2, 0.0, 0.2, 4.0};
    static const double rpc[3] = {0.1, -0.2, 0.3};
    static const double q6[6] = {0.1, 0.2, 0.3, 0.2, -0.3, 0.4};
    static const double qd6[6] = {0.5, -0.4, 0.3, 0.2, 0.1, -0.3};
    for (int pr = 0; pr < 5; ++pr) {
        const cdyn_rigid_preset preset = (cdyn_rigid_preset)pr;
        const int f = cdyn_rigid_preset_dof(preset);
        ck_assert_int_ge(f, 1);
        rigid_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.preset = preset;
        ctx.mass = 3.0;
        ctx.params.axis[0] = 0.3, ctx.params.axis[1] = -0.4, ctx.params.axis[2] = 1.0;
        ctx.params.origin[0] = 0.5, ctx.params.origin[1] = 0.2, ctx.params.origin[2] = -0.1;
        ctx.params.z0 = 0.4;
        ctx.params.theta0 = 0.05;
        ctx.params.phi0 = 0.02;
        ctx.params.carriage = carriage_motion;
        cdyn_status st = CDYN_ERR_ARG;
        cdyn_rigid *rb = cdyn_rigid_create(f, &st);
        ck_assert_int_eq(st, CDYN_OK);
        cdyn_rigid_kinematics k;
        memset(&k, 0, sizeof k);
        double y[12], yd[12], qdd[6], Fq[6], Fq2[6], vp[3], om[3];
        const double Fi[6] = {0.0, 0.0, -9.81 * 3.0, 0.1, 0.0, 0.0};
        for (int i = 0; i < f; ++i) y[i] = q6[i], y[f + i] = qd6[i];

        rec_t rec;
        rec_begin(&rec);
        OK(&rec, cdyn_rigid_set_body(rb, ctx.mass, I, 3, rpc));
        OK(&rec, cdyn_rigid_preset_eval(preset, &ctx.params, 0.3, y, y + f, &k));
        OK(&rec, cdyn_rigid_accelerations(rb, &k, y + f, Fi, qdd, Fq));
        OK(&rec, cdyn_rigid_accelerations(rb, &k, y + f, Fi, qdd, NULL));
        OK(&rec, cdyn_rigid_velocities(rb, &k, y + f, vp, om));
        OK(&rec, cdyn_rigid_set_model(rb, rigid_motion, rigid_loads, &ctx));
        OK(&rec, cdyn_rigid_rhs(rb, 0.3, y, yd));
        OK(&rec, cdyn_rigid_last_constraint_loads(rb, Fq2));
        OK(&rec, cdyn_rigid_set_model(rb, rigid_motion, NULL, &ctx));
        OK(&rec, cdyn_rigid_rhs(rb, 0.4, y, yd));
        rec_end(&rec, "rigid");

        for (int i = 0; i < f; ++i) ck_assert_double_eq(yd[i], y[f + i]);
        cdyn_rigid_free(rb);
    }
}
END_TEST

/* ======================================================================== */
/* 7. Failing calls                                                          */

START_TEST(failing_calls_do_not_allocate)
{
    for (int large = 0; large < 2; ++large) {
        const int n = large ? 30 : 3, m = large ? 10 : 2, d = n - m;
        cons_data cd;
        cons_init(&cd, n, m, 900 + (unsigned)large);
        const int size = 2 * n + m;
        double *Mnan = dalloc((size_t)n * n), *Pnan = dalloc((size_t)cd.ldp * n);
        double *Wc = dalloc((size_t)m * n), *Wnan = dalloc((size_t)m * n);
        double *Knonsym = dalloc((size_t)m * m), *Cnan = dalloc((size_t)m * n);
        double *A = dalloc((size_t)size * size), *B = dalloc(size), *qdd = dalloc(n);
        double *lam = dalloc(m), *Fnan = dalloc(n), *vdot = dalloc(n),
               *Mbar = dalloc((size_t)d * d);
        double *Fbar = dalloc(d), *vbar = dalloc(d), *v = dalloc(n), *pen_nan = dalloc(m);
        memcpy(Mnan, cd.M, sizeof(double) * (size_t)n * n);
        Mnan[n + 1] = NAN;
        memcpy(Pnan, cd.P, sizeof(double) * (size_t)cd.ldp * n);
        Pnan[1] = INFINITY;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) Wc[i + (size_t)j * m] = cd.P[i + (size_t)j * cd.ldp];
        memcpy(Wnan, Wc, sizeof(double) * (size_t)m * n);
        Wnan[m] = NAN;
        memcpy(Cnan, cd.C, sizeof(double) * (size_t)m * n);
        Cnan[0] = NAN;
        memcpy(Knonsym, cd.KD, sizeof(double) * (size_t)m * m);
        Knonsym[m] += 0.5; /* (1, 0) changed, (0, 1) not */
        memcpy(Fnan, cd.Q, sizeof(double) * (size_t)n);
        Fnan[n - 1] = NAN;
        for (int i = 0; i < m; ++i) pen_nan[i] = NAN;
        vbar[0] = NAN;

        cdyn_status st = CDYN_ERR_ARG;
        cdyn_constraint *c = cdyn_constraint_create(n, m, &st),
                        *fresh = cdyn_constraint_create(n, m, &st);
        cdyn_nullspace *ns = cdyn_nullspace_create(n, m, &st);
        cdyn_newton *nt = cdyn_newton_create(m, m, &st);
        ck_assert_int_eq(st, CDYN_OK);
        ck_assert_int_eq(cdyn_nullspace_factor(ns, Wc, m), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_load(c, cd.M, n, cd.Q, cd.P, cd.ldp, NULL, NULL, NULL),
                         CDYN_OK);
        nt_model ntm = {m, m, 0};
        double x[10], xnan[10], J[100], G[10], dx[10];
        cdyn_jacobian_check chk;
        for (int i = 0; i < m; ++i) x[i] = 0.8, xnan[i] = i == 0 ? NAN : 0.8, G[i] = 1.0;
        nt_jacobian(x, J, m, &ntm);
        J[0] = NAN;

        rec_t rec;
        rec_begin(&rec);
        /* constraint */
        EXPECT(&rec, CDYN_ERR_NONFINITE,
               cdyn_constraint_load(c, Mnan, n, cd.Q, cd.P, cd.ldp, NULL, NULL, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE,
               cdyn_constraint_load(c, cd.M, n, cd.Q, Pnan, cd.ldp, NULL, NULL, NULL));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_constraint_load(c, cd.M, n - 1, cd.Q, cd.P, cd.ldp, NULL, NULL, NULL));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_constraint_load(c, cd.M, n, NULL, cd.P, cd.ldp, NULL, NULL, NULL));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_lagrange(fresh, qdd, lam));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_force(fresh, qdd, lam));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_lagrange(c, NULL, lam));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_pseudoinverse(c, qdd, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_constraint_reactions(c, Cnan, m, qdd, lam));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_reactions(c, cd.C, m - 1, qdd, lam));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_constraint_export(c, (cdyn_export_variant)5, cd.C, m, cd.h, A, size, B));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, cd.h, A, size - 1, B));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_set_gains(c, Knonsym, m, cd.KP, m));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_set_baumgarte(c, -1.0, 0.0));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_set_penalty(c, pen_nan));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_constraint_set_rank_tolerance(c, 2.0));
        /* null space */
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_nullspace_factor(ns, Wnan, m));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_nullspace_factor(ns, NULL, m));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_nullspace_factor(ns, Wc, 0));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_nullspace_update(ns, Wnan, m, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE,
               cdyn_nullspace_reduce(ns, Mnan, n, cd.Q, NULL, Mbar, d, Fbar));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_nullspace_reduce(ns, cd.M, n - 1, cd.Q, NULL, Mbar, d, Fbar));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_nullspace_recover(ns, cd.M, n, cd.Q, NULL, NULL, vdot, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_nullspace_solve(ns, cd.M, n, Fnan, NULL, vdot, NULL));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_nullspace_solve(ns, cd.M, n, cd.Q, NULL, NULL, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_nullspace_expand(ns, vbar, v));
        /* Newton */
        EXPECT(&rec, CDYN_ERR_NONFINITE,
               cdyn_newton_solve(nt, nt_residual, nt_jacobian, &ntm, xnan));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_newton_solve(nt, NULL, nt_jacobian, &ntm, x));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_newton_solve(nt, nt_residual, nt_jacobian, &ntm, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_newton_step(nt, J, m, G, dx));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_newton_step(nt, J, m - 1 > 0 ? m - 1 : 0, G, dx));
        EXPECT(&rec, CDYN_ERR_NONFINITE,
               cdyn_newton_check_jacobian(nt, nt_residual, nt_jacobian, &ntm, xnan, &chk));
        EXPECT(&rec, CDYN_ERR_ARG,
               cdyn_newton_check_jacobian(nt, nt_residual, NULL, &ntm, x, &chk));
        EXPECT(&rec, CDYN_ERR_CALLBACK,
               cdyn_newton_check_jacobian(nt, failing_residual, nt_jacobian, &ntm, x, &chk));
        EXPECT(&rec, CDYN_ERR_CALLBACK,
               cdyn_newton_check_jacobian(nt, nt_residual, failing_jacobian, &ntm, x, &chk));
        rec_end(&rec, large ? "failing calls (n = 30)" : "failing calls (n = 3)");

        cdyn_constraint_free(c);
        cdyn_constraint_free(fresh);
        cdyn_nullspace_free(ns);
        cdyn_newton_free(nt);
        double *bufs[] = {Mnan, Pnan, Wc,   Wnan, Knonsym, Cnan, A, B,      qdd,
                          lam,  Fnan, vdot, Mbar, Fbar,    vbar, v, pen_nan};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) free(bufs[i]);
        cons_free(&cd);
    }

    /* DAE, multibody and rigid body */
    for (int large = 0; large < 2; ++large) {
        const int n = large ? 30 : 3;
        dae_model p;
        double v0[30], vnan[30], y[20], ynan[20], ydot[20], G0[30];
        cdyn_dae *dae = dae_ready(&p, n, 0, v0);
        for (int i = 0; i < n; ++i) vnan[i] = i == 1 ? NAN : v0[i];
        for (int i = 0; i < p.r; ++i) y[i] = v0[i], ynan[i] = i == 0 ? INFINITY : v0[i];
        cdyn_status st = CDYN_ERR_ARG;
        cdyn_dae *unsplit = cdyn_dae_create(n, &st);
        ck_assert_int_eq(st, CDYN_OK);
        mbs_model md;
        cdyn_mbs *mbs = mb_new(&md, large), *mfresh = mb_new(&md, large);
        double ym[60], ymnan[60], ymd[60], z[40], gf[30];
        cdyn_jacobian_check chk;
        mb_state(&md, ym);
        memcpy(ymnan, ym, sizeof ym);
        ymnan[2] = NAN;
        for (int i = 0; i < 40; ++i) z[i] = NAN;

        rec_t rec;
        rec_begin(&rec);
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_dae_rhs(dae, 0.0, ynan, ydot));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_rhs(dae, 0.0, y, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_dae_rhs(dae, NAN, y, ydot));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_dae_consistent(dae, 0.0, vnan));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_hidden_constraints(dae, 0.0, NULL, G0));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_rhs(unsplit, 0.0, y, ydot));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_consistent(unsplit, 0.0, v0));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_dae_check_jacobian(dae, 0.0, vnan, &chk));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_dae_check_jacobian(dae, INFINITY, v0, &chk));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_check_jacobian(unsplit, 0.0, v0, &chk));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_dae_check_jacobian(dae, 0.0, v0, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_rhs(mbs, 0.0, ymnan, ymd));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_mbs_rhs(mbs, 0.0, ym, NULL));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_project(mbs, 0.0, ymnan));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_mbs_last_reactions(mfresh, gf, NULL));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_mbs_partition_rhs(mfresh, 0.0, z, ymd));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_check_jacobian(mbs, 0.0, ymnan, &chk));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_check_jacobian(mbs, NAN, ym, &chk));
        EXPECT(&rec, CDYN_ERR_ARG, cdyn_mbs_check_jacobian(mbs, 0.0, ym, NULL));
        md.poison = 1;
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_rhs(mbs, 0.0, ym, ymd));
        md.poison = 0;
        OK(&rec, cdyn_mbs_partition(mbs, 0.0, ym));
        EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_mbs_partition_rhs(mbs, 0.0, z, ymd));
        rec_end(&rec, large ? "failing calls, dae/mbs (n = 30)" : "failing calls, dae/mbs (n = 3)");

        cdyn_dae_free(dae);
        cdyn_dae_free(unsplit);
        cdyn_mbs_free(mbs);
        cdyn_mbs_free(mfresh);
    }

    rigid_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.preset = CDYN_RIGID_FREE;
    ctx.mass = 1.0;
    const double I[9] = {1, 0, 0, 0, 2, 0, 0, 0, 3}, Inan[9] = {1, 0, 0, 0, NAN, 0, 0, 0, 3};
    double q[6] = {0.1, 0.2, 0.3, 0.1, 0.2, 0.3}, qnan[6] = {0.1, NAN, 0.3, 0.1, 0.2, 0.3};
    double y[12] = {0}, ynan[12] = {0}, yd[12], qdd[6], Fi[6] = {0}, Finan[6] = {0, 0, NAN};
    ynan[7] = NAN;
    cdyn_rigid_kinematics k;
    memset(&k, 0, sizeof k);
    ck_assert_int_eq(cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0.0, q, q, &k), CDYN_OK);
    cdyn_status st = CDYN_ERR_ARG;
    cdyn_rigid *rb = cdyn_rigid_create(6, &st), *nomodel = cdyn_rigid_create(6, &st);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_set_body(rb, 1.0, I, 3, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_set_body(nomodel, 1.0, I, 3, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_rigid_set_model(rb, rigid_motion, rigid_loads, &ctx), CDYN_OK);
    rec_t rec;
    rec_begin(&rec);
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_accelerations(rb, &k, NULL, Fi, qdd, NULL));
    EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_rigid_accelerations(rb, &k, q, Finan, qdd, NULL));
    EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_rigid_rhs(rb, 0.0, ynan, yd));
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_rhs(rb, 0.0, y, NULL));
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_rhs(nomodel, 0.0, y, yd));
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_last_constraint_loads(nomodel, Fi));
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_set_body(rb, -1.0, I, 3, NULL));
    EXPECT(&rec, CDYN_ERR_NONFINITE, cdyn_rigid_set_body(rb, 1.0, Inan, 3, NULL));
    EXPECT(&rec, CDYN_ERR_ARG, cdyn_rigid_preset_eval((cdyn_rigid_preset)9, NULL, 0.0, q, q, &k));
    EXPECT(&rec, CDYN_ERR_NONFINITE,
           cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, 0.0, qnan, q, &k));
    EXPECT(&rec, CDYN_ERR_ARG,
           cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &ctx.params, 0.0, q, q, &k));
    rec_end(&rec, "failing calls, rigid");
    cdyn_rigid_free(rb);
    cdyn_rigid_free(nomodel);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("per-step calls allocate nothing");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, nullspace_per_step_calls_do_not_allocate);
    tcase_add_test(tc, dae_rhs_and_consistent_do_not_allocate);
    tcase_add_test(tc, newton_solve_and_step_do_not_allocate);
    tcase_add_test(tc, constraint_formulations_do_not_allocate_small);
    tcase_add_test(tc, constraint_formulations_do_not_allocate_large);
    tcase_add_test(tc, lagrange_near_singular_and_rank_deficient_do_not_allocate);
    tcase_add_test(tc, mbs_per_step_calls_do_not_allocate);
    tcase_add_test(tc, rigid_calls_do_not_allocate_for_every_preset);
    tcase_add_test(tc, failing_calls_do_not_allocate);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
