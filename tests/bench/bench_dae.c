/* Benchmark of the T3 index-1 DAE path (cdyn_dae_rhs) and of the T2 Newton
 * solver behind it, against the baseline a user would write for an index-1
 * system whose first r equations are the differential ones: a plain Newton
 * iteration on the algebraic rows with dgesv (LU) on their q x q Jacobian,
 * then the r x r mass block solved with dgesv.
 *
 * Models: the valve network of examples/hydraulic_valve.c (n = 4, r = 1,
 * q = 3; SI units, m^3/s and Pa, cdyn with its default settings) at an
 * open and at a closed valve (s = 0: the Jacobian of the valve row
 * vanishes at Qa = 0, where a step takes the SVD path of T2.3; at a Qa
 * near zero the equilibrated Jacobian is regular and the step takes the QR
 * path), and random index-1 systems
 *     M = diag(M_ii, 0),  F(v, t) = A v + f0 + f1 sin(w t) + 0.1 tanh(v_a)
 * (tanh on the q = n/3 algebraic rows only) whose algebraic block
 * A_aa + 0.1 diag(sech^2) is strictly diagonally dominant, so dG0/dv_a is
 * invertible everywhere and the index is 1. Exact dF/dv and dF/dt callbacks.
 *
 * Units of a model: the benchmark's own perturbations and comparisons, and
 * the baseline's convergence tests (absolute, as a hand-written Newton's
 * are), are stated in a unit per state and per equation: 1 for the random
 * systems; L/s and bar for the valve (so its perturbations and the
 * baseline's iterations are those of the scaled network it replaced). cdyn
 * is given none of them.
 *
 * Sections (each: median, min and max time per call over samples; the
 * samples of the paths compared in one group are taken in turn, so that a
 * slow phase of the machine hits them alike):
 *  A. right-hand side y' = f(t, y) at y0 + 1e-6 u_j sin(k + j) (u_j the
 *     unit of state j), warm-started
 *     from the previous call: cdyn_dae_rhs against the dgesv baseline
 *     (y' only, and y' plus v_a' as cdyn returns), and in units of one
 *     dgesv of size n;
 *  B. Newton solve of the algebraic equations alone (q unknowns) from
 *     x* + 1e-4 (u + |x*|) sin(k + j + 0.5): cdyn_newton_solve against the
 *     dgesv Newton, mean iterations per solve (solves that end without
 *     convergence are counted and reported, not fatal);
 *  C. one Newton step (cdyn_newton_step) with a full-rank q x q Jacobian
 *     (pivoted QR path) and a rank-deficient one (SVD path), and one dgesv;
 *  D. a valve run through one closure (RK4, dt = 1 ms, t in [0, 1] s, as in
 *     the example): Newton steps per path and the estimated share of Newton
 *     step time spent on SVD steps, from the step costs of C;
 *  E. what each cached factorization of the DAE path saves (performance
 *     issue: factorizations that do not change between calls are cached),
 *     same models and y sequence as A, the three paths timed in turn:
 *     cdyn_dae_rhs with the split of one cdyn_dae_split call and the SVD of
 *     the constant M from set_mass (everything cached), against
 *     (a) cdyn_dae_split + cdyn_dae_rhs every call (the index analysis and
 *         pivoted QR of dG0/dv re-done: a library without caching), split
 *         at the current state (last consistent v_a, the new v_i), and
 *     (b) the same constant M given through cdyn_dae_set_mass_fn, so that
 *         every call refactors it (SVD of M at t and t +- h, Procrustes
 *         alignment of beta: beta' comes out exactly 0 here).
 *     The valve only with the valve open (at a closed valve cdyn_dae_split
 *     refuses to re-plan: the analysis finds no index <= 5). Before timing, the
 *     three paths run the same 8 y values from the same state and must
 *     agree on y', v and v' to 1e-10 relative (printed; each vector
 *     measured in the model's units, relative to its largest entry).
 * Not a pass/fail test; the process fails only if a setup or a cdyn call
 * fails (other than those counted in B), if cdyn and the baseline disagree
 * on v', or if the cached and uncached paths of E disagree.
 *
 * The machine description (uname, CPU, compiler, cdyn version, the BLAS and
 * LAPACK shared objects actually loaded) heads the output and, as '#'
 * comment lines, the CSV.
 *
 * usage: bench_dae [--quick] [--csv FILE]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <cdyn.h>

#include "../../examples/valve_network.h"
#include "bench_util.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

/* ---- timing --------------------------------------------------------------- */

typedef struct { double median, min, max; } timing;

/* A timed call: returns 0 on success, non-zero to abort the measurement. */
typedef int (*bench_fn)(void *ctx);

enum { MAX_SAMPLES = 64, MAX_PATHS = 4 };

/* One timed path: fn(ctx) per call; reps, code and t are outputs. */
typedef struct {
    bench_fn fn;
    void *ctx;
    int reps;   /* calls per sample */
    int code;   /* first non-zero return of fn (the path then drops out) */
    timing t;   /* time per call */
} bench_path;

/* Warm up and calibrate each path (repetitions so one sample lasts about
 * `target` seconds), then `samples` rounds that each time every path once
 * in turn, so that a slow phase of the machine hits all paths alike: per
 * path, the median, min and max over the samples of the mean time of one
 * call. */
static void measure_paths(bench_path *p, int count, int samples, double target)
{
    static double t[MAX_PATHS][MAX_SAMPLES];
    if (samples > MAX_SAMPLES) samples = MAX_SAMPLES;
    if (count > MAX_PATHS) count = MAX_PATHS;
    for (int i = 0; i < count; ++i) {
        int calls = 0;
        double t0 = now_seconds(), elapsed;
        p[i].code = 0;
        do {
            if ((p[i].code = p[i].fn(p[i].ctx)) != 0) break;
            ++calls;
            elapsed = now_seconds() - t0;
        } while (elapsed < 0.25 * target);
        if (p[i].code) continue;
        double once = elapsed / calls;
        p[i].reps = (int)(target / (once > 1e-9 ? once : 1e-9));
        if (p[i].reps < 1) p[i].reps = 1;
    }
    for (int s = 0; s < samples; ++s)
        for (int i = 0; i < count; ++i) {
            if (p[i].code) continue;
            double t0 = now_seconds();
            for (int r = 0; r < p[i].reps; ++r)
                if ((p[i].code = p[i].fn(p[i].ctx)) != 0) break;
            t[i][s] = (now_seconds() - t0) / p[i].reps;
        }
    for (int i = 0; i < count; ++i) {
        if (p[i].code) continue;
        qsort(t[i], (size_t)samples, sizeof(double), compare_double);
        p[i].t.median = t[i][samples / 2];
        p[i].t.min = t[i][0];
        p[i].t.max = t[i][samples - 1];
    }
}

/* ---- output --------------------------------------------------------------- */

static FILE *csv_out;

/* One table row; iters, svd, ratio, unit < 0 print as "-". Without a
 * timing (t == NULL) the path failed and note says why; with one, a note
 * is printed on the next line. Either way the note ends the CSV line. */
static void print_row(const char *section, const char *name, int n, int q, const char *path,
                      const timing *t, double iters, double svd, double ratio, double unit,
                      const char *note)
{
    char it[16] = "-", sv[16] = "-", ra[16] = "-", un[16] = "-";
    if (iters >= 0) snprintf(it, sizeof it, "%.2f", iters);
    if (svd >= 0) snprintf(sv, sizeof sv, "%.2f", svd);
    if (ratio >= 0) snprintf(ra, sizeof ra, "%.3f", ratio);
    if (unit >= 0) snprintf(un, sizeof un, "%.2f", unit);
    if (!t) {
        printf("%-12s %4d %3d  %-26s %s\n", name, n, q, path, note ? note : "fails");
    } else {
        printf("%-12s %4d %3d  %-26s %10.3f %10.3f %10.3f %6s %5s %7s %7s\n", name, n, q, path,
               1e6 * t->median, 1e6 * t->min, 1e6 * t->max, it, sv, ra, un);
        if (note) printf("%-12s %4s %3s    (%s)\n", "", "", "", note);
    }
    if (!csv_out) return;
    fprintf(csv_out, "%s,%s,%d,%d,%s,", section, name, n, q, path);
    if (!t)
        fprintf(csv_out, ",,,,,,,\"%s\"\n", note ? note : "fails");
    else
        fprintf(csv_out, "%.9e,%.9e,%.9e,%s,%s,%s,%s,%s%s%s\n", t->median, t->min, t->max,
                iters >= 0 ? it : "", svd >= 0 ? sv : "", ratio >= 0 ? ra : "",
                unit >= 0 ? un : "", note ? "\"" : "", note ? note : "", note ? "\"" : "");
}

static void print_header(const char *title)
{
    printf("\n%s\n", title);
    printf("%-12s %4s %3s  %-26s %10s %10s %10s %6s %5s %7s %7s\n", "case", "n", "q", "path",
           "median[us]", "min", "max", "iters", "svd", "ratio", "units");
}

_Noreturn static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_dae: %s%s%s\n", what, detail && *detail ? ": " : "",
            detail ? detail : "");
    exit(EXIT_FAILURE);
}

/* ---- the valve network: examples/valve_network.h ---------------------- */

enum { VN = VALVE_STATES };

/* ---- random index-1 systems ------------------------------------------------ */

typedef struct {
    int n, r;
    double *A;      /* n x n */
    double *f0, *f1; /* n */
    double omega;
} random_system;

static int random_force(double t, const double *v, double *F, void *user)
{
    const random_system *rs = user;
    int n = rs->n;
    double st = sin(rs->omega * t);
    for (int i = 0; i < n; ++i) F[i] = rs->f0[i] + rs->f1[i] * st;
    for (int j = 0; j < n; ++j) {
        const double *col = rs->A + (size_t)j * n;
        double vj = v[j];
        for (int i = 0; i < n; ++i) F[i] += col[i] * vj;
    }
    for (int k = rs->r; k < n; ++k) F[k] += 0.1 * tanh(v[k]);
    return 0;
}

static int random_jacobian(double t, const double *v, double *J, int ld, void *user)
{
    const random_system *rs = user;
    int n = rs->n;
    (void)t;
    for (int j = 0; j < n; ++j)
        memcpy(J + (size_t)j * ld, rs->A + (size_t)j * n, sizeof(double) * (size_t)n);
    for (int k = rs->r; k < n; ++k) {
        double th = tanh(v[k]);
        J[k + (size_t)k * ld] += 0.1 * (1.0 - th * th);
    }
    return 0;
}

static int random_time(double t, const double *v, double *dFdt, void *user)
{
    const random_system *rs = user;
    (void)v;
    double ct = rs->omega * cos(rs->omega * t);
    for (int i = 0; i < rs->n; ++i) dFdt[i] = rs->f1[i] * ct;
    return 0;
}

/* Rows 0..r-1 uniform; algebraic rows r..n-1 uniform off the diagonal with
 * diagonal 1 + 2 sum |off-diagonal of the algebraic block| (strictly
 * diagonally dominant, and tanh' >= 0 only adds to it). */
static void random_system_init(random_system *rs, int n, int r, tu_rng *rng)
{
    rs->n = n;
    rs->r = r;
    rs->omega = 2.0;
    rs->A = malloc(sizeof(double) * (size_t)n * n);
    rs->f0 = malloc(sizeof(double) * (size_t)n);
    rs->f1 = malloc(sizeof(double) * (size_t)n);
    if (!rs->A || !rs->f0 || !rs->f1) die("out of memory", NULL);
    tu_random(rng, n, n, rs->A, n);
    tu_random(rng, n, 1, rs->f0, n);
    tu_random(rng, n, 1, rs->f1, n);
    for (int k = r; k < n; ++k) {
        double off = 0.0;
        for (int j = r; j < n; ++j)
            if (j != k) off += fabs(rs->A[k + (size_t)j * n]);
        rs->A[k + (size_t)k * n] = 1.0 + 2.0 * off;
    }
}

static void random_system_free(random_system *rs)
{
    free(rs->A);
    free(rs->f0);
    free(rs->f1);
}

/* ---- a model: what the benchmark needs to know about one DAE --------------- */

typedef struct {
    const char *name;
    int n, r, q;        /* first r states / equations integrated / differential */
    double t;           /* evaluation time */
    double *M;          /* n x n, diag(M_ii, 0) */
    cdyn_dae_force_fn force;
    cdyn_dae_jacobian_fn jacobian;
    cdyn_dae_time_fn time_derivative;
    void *user;
    double t_split;     /* where cdyn_dae_split() decides (index 1 there) */
    double *v_split;    /* n */
    double *v0;         /* n, in: guess at t; out: consistent state at t */
    /* Newton settings given to cdyn unless newton_defaults; cap,
     * residual_tol and step_tol are also the baseline's */
    int newton_defaults;
    int cap, backtracks;
    double residual_tol, step_tol, rank_tol;
    /* units of the states and of the equations F_i (NULL: 1): the
     * benchmark's perturbations and comparisons, and the baseline's tests */
    const double *unit, *row_unit;
    /* a consistent state solved first by each cdyn solver of the model
     * (NULL: none): see valve_model */
    const double *prime_v;
    double prime_t;
} model;

static double state_unit(const model *m, int j) { return m->unit ? m->unit[j] : 1.0; }
static double row_unit(const model *m, int i) { return m->row_unit ? m->row_unit[i] : 1.0; }

static void model_alloc(model *m, int n, int r)
{
    m->n = n;
    m->r = r;
    m->q = n - r;
    m->M = calloc((size_t)n * n, sizeof(double));
    m->v_split = calloc((size_t)n, sizeof(double));
    m->v0 = calloc((size_t)n, sizeof(double));
    if (!m->M || !m->v_split || !m->v0) die("out of memory", NULL);
    m->newton_defaults = 0;
    m->cap = 20;
    m->backtracks = 0;
    m->residual_tol = 1e-10;
    m->step_tol = 1e-12;
    m->rank_tol = 1e-10;
    m->unit = m->row_unit = NULL;
    m->prime_v = NULL;
    m->prime_t = 0.0;
}

/* The solver's history of a primed model: a consistent state at (prime_t,
 * prime_v) solved before the model's own (see valve_model). */
static void prime_dae(const model *m, cdyn_dae *dae)
{
    if (!m->prime_v) return;
    double *v = malloc(sizeof(double) * (size_t)m->n);
    if (!v) die("out of memory", NULL);
    memcpy(v, m->prime_v, sizeof(double) * (size_t)m->n);
    cdyn_status st = cdyn_dae_consistent(dae, m->prime_t, v);
    free(v);
    if (st != CDYN_OK) {
        fprintf(stderr, "bench_dae: priming cdyn_dae_consistent (%s): %s: %s\n", m->name,
                cdyn_status_string(st), cdyn_dae_last_error(dae));
        exit(EXIT_FAILURE);
    }
}

static void model_free(model *m)
{
    free(m->M);
    free(m->v_split);
    free(m->v0);
}

static void check_newton(cdyn_status st, cdyn_newton *nt, const char *what)
{
    if (st != CDYN_OK) die(what, nt ? cdyn_newton_last_error(nt) : cdyn_status_string(st));
}

static void apply_newton_settings(const model *m, cdyn_newton *nt)
{
    if (m->newton_defaults) return;
    check_newton(cdyn_newton_set_max_iterations(nt, m->cap), nt, "cdyn_newton_set_max_iterations");
    check_newton(cdyn_newton_set_max_backtracks(nt, m->backtracks), nt,
                 "cdyn_newton_set_max_backtracks");
    check_newton(cdyn_newton_set_tolerances(nt, m->residual_tol, NULL), nt,
                 "cdyn_newton_set_tolerances");
    check_newton(cdyn_newton_set_rank_tolerance(nt, m->rank_tol), nt,
                 "cdyn_newton_set_rank_tolerance");
}

static void check_dae(cdyn_status st, cdyn_dae *dae, const char *what, const char *name)
{
    if (st == CDYN_OK) return;
    fprintf(stderr, "bench_dae: %s (%s): %s: %s\n", what, name, cdyn_status_string(st),
            cdyn_dae_last_error(dae));
    exit(EXIT_FAILURE);
}

/* create, set_mass, set_functions, Newton settings, split at (t_split,
 * v_split), consistent at (t, v0); checks the split is the natural one. */
static cdyn_dae *model_dae(model *m, int *integrated)
{
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(m->n, &st);
    if (!dae) die("cdyn_dae_create", cdyn_status_string(st));
    check_dae(cdyn_dae_set_mass(dae, m->M, m->n), dae, "cdyn_dae_set_mass", m->name);
    if (cdyn_dae_rank(dae) != m->r) die("unexpected rank of M", m->name);
    check_dae(cdyn_dae_set_model(dae, m->force, m->jacobian, m->time_derivative, m->user),
              dae, "cdyn_dae_set_model", m->name);
    cdyn_newton *nt = cdyn_dae_newton(dae);
    if (!nt) die("cdyn_dae_newton returned NULL", m->name);
    apply_newton_settings(m, nt);
    check_dae(cdyn_dae_split(dae, m->t_split, m->v_split), dae, "cdyn_dae_split", m->name);
    int *algebraic = malloc(sizeof(int) * (size_t)m->q);
    if (!algebraic) die("out of memory", NULL);
    check_dae(cdyn_dae_split_states(dae, integrated, algebraic) < 0 ? CDYN_ERR_ARG : CDYN_OK, dae, "cdyn_dae_split_states", m->name);
    for (int k = 0; k < m->q; ++k)
        if (algebraic[k] < m->r) die("cdyn chose a massive state as algebraic", m->name);
    free(algebraic);
    prime_dae(m, dae);
    check_dae(cdyn_dae_consistent(dae, m->t, m->v0), dae, "cdyn_dae_consistent", m->name);
    return dae;
}

/* ---- the baseline: Newton with dgesv, then dgesv on the mass block --------- */

typedef struct {
    const model *m;
    double *v;                  /* n: current state, algebraic part = warm start */
    double *F, *J, *Jaa, *dx;   /* n, n x n, q x q, n */
    double *Mii, *dFdt, *vdot;  /* r x r, n, n */
    int *ipiv;                  /* n */
    long iterations;
} baseline;

static void baseline_init(baseline *b, const model *m)
{
    int n = m->n;
    b->m = m;
    b->v = malloc(sizeof(double) * (size_t)n);
    b->F = malloc(sizeof(double) * (size_t)n);
    b->J = malloc(sizeof(double) * (size_t)n * n);
    b->Jaa = malloc(sizeof(double) * (size_t)n * n);
    b->dx = malloc(sizeof(double) * (size_t)n);
    b->Mii = malloc(sizeof(double) * (size_t)n * n);
    b->dFdt = malloc(sizeof(double) * (size_t)n);
    b->vdot = malloc(sizeof(double) * (size_t)n);
    b->ipiv = malloc(sizeof(int) * (size_t)n);
    if (!b->v || !b->F || !b->J || !b->Jaa || !b->dx || !b->Mii || !b->dFdt || !b->vdot ||
        !b->ipiv)
        die("out of memory", NULL);
    memcpy(b->v, m->v0, sizeof(double) * (size_t)n);
    b->iterations = 0;
}

static void baseline_free(baseline *b)
{
    free(b->v); free(b->F); free(b->J); free(b->Jaa); free(b->dx);
    free(b->Mii); free(b->dFdt); free(b->vdot); free(b->ipiv);
}

/* Plain Newton on F_a(v_i, v_a, t) = 0 for v_a (rows and states r..n-1),
 * v_i already in v, dgesv on dF_a/dv_a; cdyn's cap, and absolute tests in
 * the model's units: max |F_i| / row unit <= residual_tol, or the step
 * max |dx_j| / unit <= step_tol (1 + max |x_j| / unit).
 * On success F = F(v, t) at the solution; *iterations = steps taken. Returns 0, dgesv's info > 0
 * (singular Jacobian), -1 (cap reached) or -2 (callback). */
static int lu_newton(baseline *b, double t, double *v, int *iterations)
{
    const model *m = b->m;
    int n = m->n, r = m->r, q = m->q, one = 1, info = 0;
    for (int it = 0;; ++it) {
        if (m->force(t, v, b->F, m->user) != 0) return -2;
        double g = 0.0;
        for (int k = 0; k < q; ++k) g = fmax(g, fabs(b->F[r + k]) / row_unit(m, r + k));
        if (g <= m->residual_tol) {
            *iterations = it;
            return 0;
        }
        *iterations = it;
        if (it >= m->cap) return -1;
        if (m->jacobian(t, v, b->J, n, m->user) != 0) return -2;
        for (int j = 0; j < q; ++j)
            memcpy(b->Jaa + (size_t)j * q, b->J + r + (size_t)(r + j) * n,
                   sizeof(double) * (size_t)q);
        for (int k = 0; k < q; ++k) b->dx[k] = -b->F[r + k];
        dgesv_(&q, &one, b->Jaa, &q, b->ipiv, b->dx, &q, &info);
        if (info != 0) return info;
        *iterations = it + 1;
        double step = 0.0, xn = 0.0;
        for (int k = 0; k < q; ++k) {
            v[r + k] += b->dx[k];
            step = fmax(step, fabs(b->dx[k]) / state_unit(m, r + k));
            xn = fmax(xn, fabs(v[r + k]) / state_unit(m, r + k));
        }
        if (step <= m->step_tol * (1.0 + xn))
            return m->force(t, v, b->F, m->user) != 0 ? -2 : 0;
    }
}

/* y' (natural order, v_i = y) into ydot; with `full`, also v_a' into
 * vdot[r..] = -J_aa^{-1} (J_ai v_i' + dF_a/dt) (the v' cdyn returns).
 * On failure the warm start is kept. */
static int baseline_rhs(baseline *b, double t, const double *y, double *ydot, int full)
{
    const model *m = b->m;
    int n = m->n, r = m->r, q = m->q, one = 1, info = 0, its = 0;
    for (int k = 0; k < q; ++k) b->dx[k] = b->v[r + k]; /* keep the warm start */
    memcpy(b->v, y, sizeof(double) * (size_t)r);
    int code = lu_newton(b, t, b->v, &its);
    if (code != 0) {
        for (int k = 0; k < q; ++k) b->v[r + k] = b->dx[k];
        return code;
    }
    b->iterations += its;
    for (int j = 0; j < r; ++j)
        memcpy(b->Mii + (size_t)j * r, m->M + (size_t)j * n, sizeof(double) * (size_t)r);
    memcpy(ydot, b->F, sizeof(double) * (size_t)r);
    dgesv_(&r, &one, b->Mii, &r, b->ipiv, ydot, &r, &info);
    if (info != 0) return info;
    if (!full) return 0;
    if (m->jacobian(t, b->v, b->J, n, m->user) != 0 ||
        m->time_derivative(t, b->v, b->dFdt, m->user) != 0)
        return -2;
    double *va_dot = b->vdot + r;
    for (int k = 0; k < q; ++k) {
        double s = b->dFdt[r + k];
        for (int j = 0; j < r; ++j) s += b->J[r + k + (size_t)j * n] * ydot[j];
        va_dot[k] = -s;
    }
    for (int j = 0; j < q; ++j)
        memcpy(b->Jaa + (size_t)j * q, b->J + r + (size_t)(r + j) * n, sizeof(double) * (size_t)q);
    dgesv_(&q, &one, b->Jaa, &q, b->ipiv, va_dot, &q, &info);
    return info;
}

/* ---- section A: right-hand side ------------------------------------------- */

typedef struct {
    const model *m;
    cdyn_dae *dae;          /* cdyn path, or */
    baseline *base;         /* baseline path */
    int full;               /* baseline: also v_a' */
    const int *integrated;  /* cdyn's y order: y[j] = v[integrated[j]] */
    double *y0;             /* r, natural order */
    double *y, *ycdyn, *ydot;
    long calls, iterations, svd_steps;
    cdyn_status status;
} rhs_ctx;

static void rhs_ctx_init(rhs_ctx *c, const model *m, cdyn_dae *dae, baseline *base, int full,
                         const int *integrated)
{
    size_t r = (size_t)m->r;
    memset(c, 0, sizeof *c);
    c->m = m;
    c->dae = dae;
    c->base = base;
    c->full = full;
    c->integrated = integrated;
    c->y0 = malloc(sizeof(double) * r);
    c->y = malloc(sizeof(double) * r);
    c->ycdyn = malloc(sizeof(double) * r);
    c->ydot = malloc(sizeof(double) * r);
    if (!c->y0 || !c->y || !c->ycdyn || !c->ydot) die("out of memory", NULL);
    memcpy(c->y0, m->v0, sizeof(double) * r);
}

static void rhs_ctx_free(rhs_ctx *c)
{
    free(c->y0); free(c->y); free(c->ycdyn); free(c->ydot);
}

static void perturbed_y(rhs_ctx *c)
{
    for (int j = 0; j < c->m->r; ++j)
        c->y[j] = c->y0[j] + 1e-6 * state_unit(c->m, j) * sin((double)(c->calls + j));
    ++c->calls;
}

static int run_cdyn_rhs(void *p)
{
    rhs_ctx *c = p;
    perturbed_y(c);
    for (int j = 0; j < c->m->r; ++j) c->ycdyn[j] = c->y[c->integrated[j]];
    c->status = cdyn_dae_rhs(c->dae, c->m->t, c->ycdyn, c->ydot);
    if (c->status != CDYN_OK) return 1;
    cdyn_newton_report rep;
    cdyn_newton_get_report(cdyn_dae_newton(c->dae), &rep);
    c->iterations += rep.iterations;
    c->svd_steps += rep.svd_steps;
    return 0;
}

static int run_baseline_rhs(void *p)
{
    rhs_ctx *c = p;
    perturbed_y(c);
    return baseline_rhs(c->base, c->m->t, c->y, c->ydot, c->full);
}

/* one dgesv of size n on a fixed well-conditioned matrix (copy included):
 * the cost unit */
typedef struct {
    int n;
    double *A, *Awork, *b;
    int *ipiv;
} dgesv_ctx;

static void dgesv_ctx_init(dgesv_ctx *c, int n)
{
    c->n = n;
    c->A = malloc(sizeof(double) * (size_t)n * n);
    c->Awork = malloc(sizeof(double) * (size_t)n * n);
    c->b = malloc(sizeof(double) * (size_t)n);
    c->ipiv = malloc(sizeof(int) * (size_t)n);
    if (!c->A || !c->Awork || !c->b || !c->ipiv) die("out of memory", NULL);
    tu_rng rng;
    tu_rng_seed(&rng, 7 + (unsigned)n);
    tu_random(&rng, n, n, c->A, n);
    for (int i = 0; i < n; ++i) c->A[i + (size_t)i * n] += n;
}

static void dgesv_ctx_free(dgesv_ctx *c)
{
    free(c->A); free(c->Awork); free(c->b); free(c->ipiv);
}

static int run_dgesv(void *p)
{
    dgesv_ctx *c = p;
    int one = 1, info = 0;
    memcpy(c->Awork, c->A, sizeof(double) * (size_t)c->n * c->n);
    for (int i = 0; i < c->n; ++i) c->b[i] = 1.0;
    dgesv_(&c->n, &one, c->Awork, &c->n, c->ipiv, c->b, &c->n, &info);
    return info;
}

static const char *failure_note(int code)
{
    return code > 0    ? "fails: dgesv finds the Jacobian singular"
           : code == -1 ? "fails: no convergence within the cap"
                        : "fails: callback";
}

/* cdyn's y' and v' at one perturbed y against the baseline's (skipped when
 * the baseline cannot solve there) */
static void cross_check(rhs_ctx *cc, rhs_ctx *cf)
{
    const model *m = cc->m;
    int n = m->n, r = m->r, q = m->q;
    double *vdot = malloc(sizeof(double) * (size_t)n);
    if (!vdot) die("out of memory", NULL);
    cc->calls = cf->calls = 1;
    if (run_cdyn_rhs(cc) != 0) check_dae(cc->status, cc->dae, "cdyn_dae_rhs", m->name);
    check_dae(cdyn_dae_last_state(cc->dae, NULL, vdot), cc->dae, "cdyn_dae_last_state", m->name);
    if (run_baseline_rhs(cf) == 0) {
        const double *bv = cf->base->vdot;
        double diff = 0.0, scale = 0.0;
        /* in the model's units (per second) */
        for (int j = 0; j < r; ++j) {
            int i = cc->integrated[j];
            diff = fmax(diff, fabs(cc->ydot[j] - cf->ydot[i]) / state_unit(m, i));
            scale = fmax(scale, fabs(cf->ydot[j]) / state_unit(m, j));
        }
        for (int k = r; k < n; ++k) {
            diff = fmax(diff, fabs(vdot[k] - bv[k]) / state_unit(m, k));
            scale = fmax(scale, fabs(bv[k]) / state_unit(m, k));
        }
        if (diff > 1e-6 * (1.0 + scale)) {
            fprintf(stderr, "bench_dae: %s, n = %d: cdyn and the baseline disagree on v' (%.3e)\n",
                    m->name, n, diff);
            exit(EXIT_FAILURE);
        }
    }
    (void)q;
    free(vdot);
    /* the timed runs start from the same warm start */
    memcpy(cf->base->v, m->v0, sizeof(double) * (size_t)n);
    cc->calls = cf->calls = 0;
}

static void bench_rhs(model *m, int samples, double target)
{
    int n = m->n, r = m->r, q = m->q;
    int *integrated = malloc(sizeof(int) * (size_t)r);
    if (!integrated) die("out of memory", NULL);
    cdyn_dae *dae = model_dae(m, integrated);
    baseline base_min, base_full;
    baseline_init(&base_min, m);
    baseline_init(&base_full, m);
    rhs_ctx cb, cf, cc;
    rhs_ctx_init(&cb, m, NULL, &base_min, 0, integrated);
    rhs_ctx_init(&cf, m, NULL, &base_full, 1, integrated);
    rhs_ctx_init(&cc, m, dae, NULL, 0, integrated);
    dgesv_ctx cu;
    dgesv_ctx_init(&cu, n);
    cross_check(&cc, &cf);

    bench_path p[4] = {{run_dgesv, &cu, 0, 0, {0, 0, 0}},
                       {run_baseline_rhs, &cb, 0, 0, {0, 0, 0}},
                       {run_baseline_rhs, &cf, 0, 0, {0, 0, 0}},
                       {run_cdyn_rhs, &cc, 0, 0, {0, 0, 0}}};
    measure_paths(p, 4, samples, target);
    if (p[0].code) die("dgesv failed", NULL);
    if (p[3].code) check_dae(cc.status, dae, "cdyn_dae_rhs", m->name);
    if (p[1].code == -2 || p[2].code == -2) die("a model callback failed", m->name);

    double unit = p[0].t.median, base = p[1].t.median;
    const char *path_b = "baseline LU: y' only", *path_f = "baseline LU: y' and v_a'";
    if (p[1].code)
        print_row("rhs", m->name, n, q, path_b, NULL, -1, -1, -1, -1, failure_note(p[1].code));
    else
        print_row("rhs", m->name, n, q, path_b, &p[1].t,
                  (double)base_min.iterations / (double)cb.calls, -1, 1.0, base / unit, NULL);
    if (p[2].code)
        print_row("rhs", m->name, n, q, path_f, NULL, -1, -1, -1, -1, failure_note(p[2].code));
    else
        print_row("rhs", m->name, n, q, path_f, &p[2].t,
                  (double)base_full.iterations / (double)cf.calls, -1,
                  p[1].code ? -1 : p[2].t.median / base, p[2].t.median / unit, NULL);
    print_row("rhs", m->name, n, q, "cdyn_dae_rhs", &p[3].t,
              (double)cc.iterations / (double)cc.calls, (double)cc.svd_steps / (double)cc.calls,
              p[1].code ? -1 : p[3].t.median / base, p[3].t.median / unit, NULL);

    rhs_ctx_free(&cb); rhs_ctx_free(&cf); rhs_ctx_free(&cc);
    dgesv_ctx_free(&cu);
    free(integrated);
    baseline_free(&base_min);
    baseline_free(&base_full);
    cdyn_dae_free(dae);
}

/* ---- section B: Newton solve of the algebraic equations alone -------------- */

typedef struct {
    const model *m;
    double *v, *F, *J;      /* n, n, n x n */
    double *xstar, *x;      /* q */
    cdyn_newton *nt;
    baseline *base;
    long calls, iterations, svd_steps;
    long failures;          /* solves that did not converge (counted, not fatal) */
    double worst_residual;  /* of those */
    cdyn_status status;
} solve_ctx;

static int algebraic_residual(const double *x, double *G, void *user)
{
    solve_ctx *c = user;
    const model *m = c->m;
    memcpy(c->v + m->r, x, sizeof(double) * (size_t)m->q);
    int code = m->force(m->t, c->v, c->F, m->user);
    memcpy(G, c->F + m->r, sizeof(double) * (size_t)m->q);
    return code;
}

static int algebraic_jacobian(const double *x, double *Jx, int ldj, void *user)
{
    solve_ctx *c = user;
    const model *m = c->m;
    int n = m->n, r = m->r, q = m->q;
    memcpy(c->v + r, x, sizeof(double) * (size_t)q);
    int code = m->jacobian(m->t, c->v, c->J, n, m->user);
    for (int j = 0; j < q; ++j)
        memcpy(Jx + (size_t)j * ldj, c->J + r + (size_t)(r + j) * n, sizeof(double) * (size_t)q);
    return code;
}

static void perturbed_start(solve_ctx *c, double *x)
{
    for (int k = 0; k < c->m->q; ++k)
        x[k] = c->xstar[k] + 1e-4 * (state_unit(c->m, c->m->r + k) + fabs(c->xstar[k])) *
                                 sin((double)(c->calls + k) + 0.5);
    ++c->calls;
}

static int run_cdyn_solve(void *p)
{
    solve_ctx *c = p;
    perturbed_start(c, c->x);
    c->status = cdyn_newton_solve(c->nt, algebraic_residual, algebraic_jacobian, c, c->x);
    if (c->status != CDYN_OK && c->status != CDYN_ERR_NOCONV) return 1;
    cdyn_newton_report rep;
    cdyn_newton_get_report(c->nt, &rep);
    c->iterations += rep.iterations;
    c->svd_steps += rep.svd_steps;
    if (c->status == CDYN_ERR_NOCONV) {
        ++c->failures;
        if (rep.residual_norm > c->worst_residual) c->worst_residual = rep.residual_norm;
    }
    return 0;
}

static int run_baseline_solve(void *p)
{
    solve_ctx *c = p;
    perturbed_start(c, c->base->v + c->m->r);
    int its = 0, code = lu_newton(c->base, c->m->t, c->base->v, &its);
    c->iterations += its;
    if (code == -2) return code;
    if (code != 0) ++c->failures; /* singular Jacobian or cap: counted */
    return 0;
}

static void solve_ctx_init(solve_ctx *c, const model *m)
{
    int n = m->n, q = m->q;
    memset(c, 0, sizeof *c);
    c->m = m;
    c->v = malloc(sizeof(double) * (size_t)n);
    c->F = malloc(sizeof(double) * (size_t)n);
    c->J = malloc(sizeof(double) * (size_t)n * n);
    c->xstar = malloc(sizeof(double) * (size_t)q);
    c->x = malloc(sizeof(double) * (size_t)q);
    if (!c->v || !c->F || !c->J || !c->xstar || !c->x) die("out of memory", NULL);
    memcpy(c->v, m->v0, sizeof(double) * (size_t)n);
    memcpy(c->xstar, m->v0 + m->r, sizeof(double) * (size_t)q);
}

static void solve_ctx_free(solve_ctx *c)
{
    free(c->v); free(c->F); free(c->J); free(c->xstar); free(c->x);
}

static void bench_solve(model *m, int samples, double target)
{
    int n = m->n, q = m->q;
    cdyn_status st;
    solve_ctx cb, cc;
    solve_ctx_init(&cb, m);
    solve_ctx_init(&cc, m);
    cc.nt = cdyn_newton_create(q, q, &st);
    if (!cc.nt) die("cdyn_newton_create", cdyn_status_string(st));
    apply_newton_settings(m, cc.nt);
    if (m->prime_v) {
        /* the solver's history (see valve_model): the algebraic equations
         * at (prime_t, prime_v) solved first */
        model pm = *m;
        pm.t = m->prime_t;
        pm.v0 = malloc(sizeof(double) * (size_t)n);
        if (!pm.v0) die("out of memory", NULL);
        memcpy(pm.v0, m->prime_v, sizeof(double) * (size_t)n);
        solve_ctx pc;
        solve_ctx_init(&pc, &pm);
        memcpy(pc.x, pc.xstar, sizeof(double) * (size_t)q);
        check_newton(cdyn_newton_solve(cc.nt, algebraic_residual, algebraic_jacobian, &pc, pc.x),
                     cc.nt, "cdyn_newton_solve (priming)");
        solve_ctx_free(&pc);
        free(pm.v0);
    }
    baseline base;
    baseline_init(&base, m);
    cb.base = &base;
    dgesv_ctx cu;
    dgesv_ctx_init(&cu, q);

    bench_path p[3] = {{run_dgesv, &cu, 0, 0, {0, 0, 0}},
                       {run_baseline_solve, &cb, 0, 0, {0, 0, 0}},
                       {run_cdyn_solve, &cc, 0, 0, {0, 0, 0}}};
    measure_paths(p, 3, samples, target);
    if (p[0].code) die("dgesv failed", NULL);
    if (p[1].code) die("a model callback failed", m->name);
    if (p[2].code) check_newton(cc.status, cc.nt, "cdyn_newton_solve");

    double unit = p[0].t.median, base_t = p[1].t.median;
    char note_b[128], note_c[128];
    snprintf(note_b, sizeof note_b, "%ld of %ld solves failed: dgesv singular or cap reached",
             cb.failures, cb.calls);
    snprintf(note_c, sizeof note_c,
             "%ld of %ld solves ended CDYN_ERR_NOCONV, ||G|| up to %.1e; timed as they ran",
             cc.failures, cc.calls, cc.worst_residual);
    print_row("solve", m->name, n, q, "baseline Newton (LU)", &p[1].t,
              (double)cb.iterations / (double)cb.calls, -1, 1.0, base_t / unit,
              cb.failures ? note_b : NULL);
    print_row("solve", m->name, n, q, "cdyn_newton_solve", &p[2].t,
              (double)cc.iterations / (double)cc.calls, (double)cc.svd_steps / (double)cc.calls,
              p[2].t.median / base_t, p[2].t.median / unit, cc.failures ? note_c : NULL);
    cdyn_newton_free(cc.nt);
    baseline_free(&base);
    dgesv_ctx_free(&cu);
    solve_ctx_free(&cb);
    solve_ctx_free(&cc);
}

/* ---- section C: one Newton step, QR path against SVD path ------------------ */

typedef struct {
    int q;
    const double *J;
    double *Jwork, *G, *dx;
    int *ipiv;
    cdyn_newton *nt;
    cdyn_status status;
} step_ctx;

static int run_step(void *p)
{
    step_ctx *c = p;
    c->status = cdyn_newton_step(c->nt, c->J, c->q, c->G, c->dx);
    return c->status != CDYN_OK;
}

static int run_lu_step(void *p)
{
    step_ctx *c = p;
    int one = 1, info = 0;
    memcpy(c->Jwork, c->J, sizeof(double) * (size_t)c->q * c->q);
    for (int k = 0; k < c->q; ++k) c->dx[k] = -c->G[k];
    dgesv_(&c->q, &one, c->Jwork, &c->q, c->ipiv, c->dx, &c->q, &info);
    return info;
}

/* J_full (rank q) and J_def (rank deficient), q x q. Prints the rows and
 * returns the median step times of the two cdyn paths. */
static void bench_steps(const char *name, int n, int q, const double *J_full, const double *J_def,
                        double rank_tol, int samples, double target, double *t_qr, double *t_svd)
{
    cdyn_status st;
    step_ctx cq = {q, J_full, NULL, NULL, NULL, NULL, NULL, CDYN_OK};
    cq.Jwork = malloc(sizeof(double) * (size_t)q * q);
    cq.G = malloc(sizeof(double) * (size_t)q);
    cq.dx = malloc(sizeof(double) * (size_t)q);
    cq.ipiv = malloc(sizeof(int) * (size_t)q);
    if (!cq.Jwork || !cq.G || !cq.dx || !cq.ipiv) die("out of memory", NULL);
    for (int k = 0; k < q; ++k) cq.G[k] = sin(1.0 + k);
    cq.nt = cdyn_newton_create(q, q, &st);
    if (!cq.nt) die("cdyn_newton_create", cdyn_status_string(st));
    if (rank_tol > 0.0) /* else cdyn's default */
        check_newton(cdyn_newton_set_rank_tolerance(cq.nt, rank_tol), cq.nt,
                     "cdyn_newton_set_rank_tolerance");
    step_ctx cs = cq; /* same solver and buffers, the rank-deficient J */
    cs.J = J_def;

    /* each Jacobian takes the path it is meant for */
    cdyn_newton_report rep;
    if (run_step(&cq) != 0) check_newton(cq.status, cq.nt, "cdyn_newton_step");
    cdyn_newton_get_report(cq.nt, &rep);
    if (rep.svd_steps != 0 || rep.rank != q) die("full-rank Jacobian took the SVD path", name);
    if (run_step(&cs) != 0) check_newton(cs.status, cs.nt, "cdyn_newton_step");
    cdyn_newton_get_report(cs.nt, &rep);
    if (rep.svd_steps != 1) die("rank-deficient Jacobian did not take the SVD path", name);

    bench_path p[3] = {{run_lu_step, &cq, 0, 0, {0, 0, 0}},
                       {run_step, &cq, 0, 0, {0, 0, 0}},
                       {run_step, &cs, 0, 0, {0, 0, 0}}};
    measure_paths(p, 3, samples, target);
    if (p[0].code) die("dgesv step failed", name);
    if (p[1].code) check_newton(cq.status, cq.nt, "cdyn_newton_step");
    if (p[2].code) check_newton(cs.status, cs.nt, "cdyn_newton_step");

    double unit = p[0].t.median, tq = p[1].t.median, ts = p[2].t.median;
    print_row("step", name, n, q, "dgesv (LU) step", &p[0].t, -1, -1, unit / tq, 1.0, NULL);
    print_row("step", name, n, q, "newton_step QR path", &p[1].t, -1, 0, 1.0, tq / unit, NULL);
    print_row("step", name, n, q, "newton_step SVD path", &p[2].t, -1, 1, ts / tq, ts / unit,
              NULL);
    *t_qr = tq;
    *t_svd = ts;
    cdyn_newton_free(cq.nt);
    free(cq.Jwork); free(cq.G); free(cq.dx); free(cq.ipiv);
}

/* dF_a/dv_a of a model at its consistent state (q x q) */
static void algebraic_block(const model *m, const double *v, double *Jaa)
{
    int n = m->n, r = m->r, q = m->q;
    double *J = malloc(sizeof(double) * (size_t)n * n);
    if (!J) die("out of memory", NULL);
    if (m->jacobian(m->t, v, J, n, m->user) != 0) die("Jacobian callback failed", m->name);
    for (int j = 0; j < q; ++j)
        memcpy(Jaa + (size_t)j * q, J + r + (size_t)(r + j) * n, sizeof(double) * (size_t)q);
    free(J);
}

/* ---- section D: a valve run through one closure ---------------------------- */

typedef struct {
    long rhs_calls, iterations, svd_steps;
    double seconds;
} run_result;

static double run_rhs(cdyn_dae *dae, double t, double y, run_result *res)
{
    double ydot;
    check_dae(cdyn_dae_rhs(dae, t, &y, &ydot), dae, "cdyn_dae_rhs", "valve run");
    cdyn_newton_report rep;
    cdyn_newton_get_report(cdyn_dae_newton(dae), &rep);
    res->rhs_calls++;
    res->iterations += rep.iterations;
    res->svd_steps += rep.svd_steps;
    return ydot;
}

static run_result valve_run(model *m, long *svd_rate_solves)
{
    int integrated[1];
    run_result res = {0, 0, 0, 0.0};
    cdyn_dae *dae = model_dae(m, integrated);
    const double dt = 1e-3, t_end = 1.0;
    const int steps = (int)lround(t_end / dt);
    double y = m->v0[Q1];
    double t0 = now_seconds();
    for (int s = 0; s < steps; ++s) {
        double t = s * dt;
        double k1 = run_rhs(dae, t, y, &res);
        double k2 = run_rhs(dae, t + 0.5 * dt, y + 0.5 * dt * k1, &res);
        double k3 = run_rhs(dae, t + 0.5 * dt, y + 0.5 * dt * k2, &res);
        double k4 = run_rhs(dae, t + dt, y + dt * k3, &res);
        y += dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    }
    res.seconds = now_seconds() - t0;
    *svd_rate_solves = cdyn_dae_svd_rate_solves(dae);
    cdyn_dae_free(dae);
    return res;
}

/* ---- section E: what the cached factorizations save ------------------------ */

/* The constant M of a model through the M(t) callback interface. */
static int constant_mass_fn(double t, double *M, int ldm, void *user)
{
    const model *m = user;
    (void)t;
    for (int j = 0; j < m->n; ++j)
        memcpy(M + (size_t)j * ldm, m->M + (size_t)j * m->n, sizeof(double) * (size_t)m->n);
    return 0;
}

/* As model_dae, with M by callback (set_mass_fn at t_split). */
static cdyn_dae *model_dae_mass_fn(model *m, int *integrated)
{
    cdyn_status st;
    cdyn_dae *dae = cdyn_dae_create(m->n, &st);
    if (!dae) die("cdyn_dae_create", cdyn_status_string(st));
    check_dae(cdyn_dae_set_mass_fn(dae, constant_mass_fn, m, m->t_split), dae,
              "cdyn_dae_set_mass_fn", m->name);
    if (cdyn_dae_rank(dae) != m->r) die("unexpected rank of M(t)", m->name);
    check_dae(cdyn_dae_set_model(dae, m->force, m->jacobian, m->time_derivative, m->user),
              dae, "cdyn_dae_set_model", m->name);
    cdyn_newton *nt = cdyn_dae_newton(dae);
    if (!nt) die("cdyn_dae_newton returned NULL", m->name);
    apply_newton_settings(m, nt);
    check_dae(cdyn_dae_split(dae, m->t_split, m->v_split), dae, "cdyn_dae_split", m->name);
    check_dae(cdyn_dae_split_states(dae, integrated, NULL) < 0 ? CDYN_ERR_ARG : CDYN_OK, dae, "cdyn_dae_split_states", m->name);
    prime_dae(m, dae);
    check_dae(cdyn_dae_consistent(dae, m->t, m->v0), dae, "cdyn_dae_consistent", m->name);
    return dae;
}

/* cdyn_dae_rhs, optionally re-planned (cdyn_dae_split first) every call */
typedef struct {
    rhs_ctx rc;
    int replan;
    double *v_plan;     /* n: where the re-plan splits (current state) */
    const char *call;   /* the call that failed */
} cache_ctx;

static int run_cache_rhs(void *p)
{
    cache_ctx *c = p;
    rhs_ctx *rc = &c->rc;
    const model *m = rc->m;
    if (!c->replan) {
        c->call = "cdyn_dae_rhs";
        return run_cdyn_rhs(rc);
    }
    perturbed_y(rc);
    for (int j = 0; j < m->r; ++j) {
        rc->ycdyn[j] = rc->y[rc->integrated[j]];
        c->v_plan[rc->integrated[j]] = rc->ycdyn[j];
    }
    c->call = "cdyn_dae_split";
    rc->status = cdyn_dae_split(rc->dae, m->t, c->v_plan);
    if (rc->status != CDYN_OK) return 1;
    c->call = "cdyn_dae_rhs";
    rc->status = cdyn_dae_rhs(rc->dae, m->t, rc->ycdyn, rc->ydot);
    if (rc->status != CDYN_OK) return 1;
    c->call = "cdyn_dae_last_state";
    rc->status = cdyn_dae_last_state(rc->dae, c->v_plan, NULL); /* next plan point */
    if (rc->status != CDYN_OK) return 1;
    cdyn_newton_report rep;
    cdyn_newton_get_report(cdyn_dae_newton(rc->dae), &rep);
    rc->iterations += rep.iterations;
    rc->svd_steps += rep.svd_steps;
    return 0;
}

static void cache_ctx_init(cache_ctx *c, const model *m, cdyn_dae *dae, int replan,
                           const int *integrated)
{
    rhs_ctx_init(&c->rc, m, dae, NULL, 0, integrated);
    c->replan = replan;
    c->call = "cdyn_dae_rhs";
    c->v_plan = malloc(sizeof(double) * (size_t)m->n);
    if (!c->v_plan) die("out of memory", NULL);
    memcpy(c->v_plan, m->v0, sizeof(double) * (size_t)m->n);
}

static void cache_ctx_free(cache_ctx *c)
{
    rhs_ctx_free(&c->rc);
    free(c->v_plan);
}

static void cache_check(cache_ctx *c, const char *name)
{
    check_dae(c->rc.status, c->rc.dae, c->call, name);
    die("a timed call failed", name); /* status OK yet failed: not expected */
}

/* max |a - b| / max |b| over y' (r) and over v, v' (n each), entries in
 * the model's units; a[k], b[k] belong to state states[k] (NULL: k) */
static double rel_diff(const model *m, int len, const int *states, const double *a,
                       const double *b)
{
    double diff = 0.0, scale = 0.0;
    for (int k = 0; k < len; ++k) {
        double u = state_unit(m, states ? states[k] : k);
        diff = fmax(diff, fabs(a[k] - b[k]) / u);
        scale = fmax(scale, fabs(b[k]) / u);
    }
    return diff / (scale > 0.0 ? scale : 1.0);
}

/* Same y values from the same state through the cached path c[0] and the
 * uncached ones c[1], c[2]: largest relative difference of each from c[0]
 * (y', v, v'), in diff[1], diff[2]. The paths stay in step (same calls). */
static void cache_agreement(cache_ctx *c, double *diff)
{
    const model *m = c[0].rc.m;
    int n = m->n, r = m->r;
    double *ref = malloc(sizeof(double) * (size_t)(r + 2 * n));
    double *got = malloc(sizeof(double) * (size_t)(r + 2 * n));
    if (!ref || !got) die("out of memory", NULL);
    diff[0] = diff[1] = diff[2] = 0.0;
    for (int call = 0; call < 8; ++call)
        for (int k = 0; k < 3; ++k) {
            double *out = k ? got : ref;
            if (run_cache_rhs(&c[k]) != 0) cache_check(&c[k], m->name);
            memcpy(out, c[k].rc.ydot, sizeof(double) * (size_t)r);
            check_dae(cdyn_dae_last_state(c[k].rc.dae, out + r, out + r + n), c[k].rc.dae,
                      "cdyn_dae_last_state", m->name);
            if (k) {
                diff[k] = fmax(diff[k], rel_diff(m, r, c[0].rc.integrated, got, ref));
                diff[k] = fmax(diff[k], rel_diff(m, n, NULL, got + r, ref + r));
                diff[k] = fmax(diff[k], rel_diff(m, n, NULL, got + r + n, ref + r + n));
            }
        }
    /* the re-planned split must still be the cached one */
    int *integrated = malloc(sizeof(int) * (size_t)r);
    if (!integrated) die("out of memory", NULL);
    check_dae(cdyn_dae_split_states(c[1].rc.dae, integrated, NULL) < 0 ? CDYN_ERR_ARG : CDYN_OK, c[1].rc.dae, "cdyn_dae_split_states",
              m->name);
    if (memcmp(integrated, c[0].rc.integrated, sizeof(int) * (size_t)r) != 0)
        die("the re-planned split differs from the cached one", m->name);
    free(integrated);
    free(ref);
    free(got);
    for (int k = 0; k < 3; ++k) c[k].rc.calls = c[k].rc.iterations = c[k].rc.svd_steps = 0;
}

static int g_cache_bugs; /* cached and uncached paths of E disagree */

static void bench_cache(model *m, int samples, double target)
{
    int n = m->n, r = m->r, q = m->q;
    int *integrated = malloc(sizeof(int) * (size_t)r);
    int *integrated_fn = malloc(sizeof(int) * (size_t)r);
    double *v_start = malloc(sizeof(double) * (size_t)n);
    if (!integrated || !integrated_fn || !v_start) die("out of memory", NULL);
    memcpy(v_start, m->v0, sizeof(double) * (size_t)n);
    cdyn_dae *dae_cached = model_dae(m, integrated);
    memcpy(m->v0, v_start, sizeof(double) * (size_t)n);
    cdyn_dae *dae_replan = model_dae(m, integrated_fn);
    if (memcmp(integrated, integrated_fn, sizeof(int) * (size_t)r) != 0)
        die("two splits of the same model differ", m->name);
    memcpy(m->v0, v_start, sizeof(double) * (size_t)n);
    cdyn_dae *dae_mass_fn = model_dae_mass_fn(m, integrated_fn);
    if (memcmp(integrated, integrated_fn, sizeof(int) * (size_t)r) != 0)
        die("the split with M by callback differs", m->name);
    memcpy(m->v0, v_start, sizeof(double) * (size_t)n);

    cache_ctx c[3];
    cache_ctx_init(&c[0], m, dae_cached, 0, integrated);
    cache_ctx_init(&c[1], m, dae_replan, 1, integrated);
    cache_ctx_init(&c[2], m, dae_mass_fn, 0, integrated);
    double diff[3];
    cache_agreement(c, diff);

    bench_path p[3] = {{run_cache_rhs, &c[0], 0, 0, {0, 0, 0}},
                       {run_cache_rhs, &c[1], 0, 0, {0, 0, 0}},
                       {run_cache_rhs, &c[2], 0, 0, {0, 0, 0}}};
    measure_paths(p, 3, samples, target);
    for (int k = 0; k < 3; ++k)
        if (p[k].code) cache_check(&c[k], m->name);

    static const char *paths[3] = {"rhs: split + SVD(M) cached", "(a) split+rhs every call",
                                   "(b) rhs, M by M(t) callback"};
    static const char *what[3] = {"", "cached split saves %.1f%% of a per-call re-plan at n = %d "
                                      "(%s); rel. diff %.1e",
                                  "cached SVD of M saves %.1f%% of a per-call mass "
                                  "factorization at n = %d (%s); rel. diff %.1e"};
    double cached = p[0].t.median;
    for (int k = 0; k < 3; ++k) {
        const rhs_ctx *rc = &c[k].rc;
        char note[160];
        if (k) {
            double saving = 100.0 * (1.0 - cached / p[k].t.median);
            snprintf(note, sizeof note, what[k], saving, n, m->name, diff[k]);
        }
        print_row("cache", m->name, n, q, paths[k], &p[k].t,
                  (double)rc->iterations / (double)rc->calls,
                  (double)rc->svd_steps / (double)rc->calls, p[k].t.median / cached, -1,
                  k ? note : NULL);
        if (k && !(diff[k] <= 1e-10)) {
            fprintf(stderr,
                    "bench_dae: BUG: %s, n = %d: %s and the cached path differ by %.3e\n",
                    m->name, n, paths[k], diff[k]);
            ++g_cache_bugs;
        }
    }
    for (int k = 0; k < 3; ++k) cache_ctx_free(&c[k]);
    cdyn_dae_free(dae_cached);
    cdyn_dae_free(dae_replan);
    cdyn_dae_free(dae_mass_fn);
    free(integrated);
    free(integrated_fn);
    free(v_start);
}

/* ---- the models --------------------------------------------------------- */

/* Valve network at t (open: 0.1 s; closed: 0.45 s) in SI units, cdyn with
 * its default settings as in the example (cap 20, 40 halvings, rtol 1e-10,
 * rank tolerance 1e-10: no tuning); the baseline with cap 20 and its
 * absolute tests in L/s and bar (residual 1e-10, step 1e-14), as before the
 * network was in SI.
 *
 * The closed valve is primed (main): each of its cdyn solvers first solves
 * the open valve at 0.1 s, as in any run that reaches the closure. Without
 * that history cdyn's default tolerance of Qa, never seen non-zero, is
 * rtol |Qa| alone once a step moves Qa off zero, and Newton, which only
 * halves Qa at the double root Qa = 0, cannot meet it: every evaluation
 * ends CDYN_ERR_NOCONV after 20 iterations. With it (atol of Qa = rtol
 * times the open flow) an evaluation takes 1-3 iterations. */
static void valve_model(model *m, network *net, const char *name, double t, const double *guess)
{
    static const double probe[VN] = {2e-3, 1.2e-3, 0.8e-3, 5e5}; /* m^3/s, Pa */
    /* L/s and bar in SI; rows: pipe, valve, orifice [Pa], continuity [m^3/s] */
    static const double unit[VN] = {1.0 / VALVE_LPS, 1.0 / VALVE_LPS, 1.0 / VALVE_LPS,
                                    1.0 / VALVE_BAR};
    static const double rows[VN] = {1.0 / VALVE_BAR, 1.0 / VALVE_BAR, 1.0 / VALVE_BAR,
                                    1.0 / VALVE_LPS};
    model_alloc(m, VN, 1);
    m->name = name;
    m->t = t;
    m->M[0] = net->inertance;
    m->force = valve_force;
    m->jacobian = valve_jacobian;
    m->time_derivative = valve_time;
    m->user = net;
    m->t_split = 0.0;
    memcpy(m->v_split, probe, sizeof probe);
    memcpy(m->v0, guess, sizeof(double) * VN);
    m->newton_defaults = 1;
    m->cap = 20; /* cdyn's default; the baseline's cap */
    m->residual_tol = 1e-10;
    m->step_tol = 1e-14;
    m->rank_tol = 0.0; /* cdyn's default (section C) */
    m->unit = unit;
    m->row_unit = rows;
}

static void random_model(model *m, random_system *rs, int n)
{
    int q = n / 3, r = n - q;
    tu_rng rng;
    tu_rng_seed(&rng, 1234 + (unsigned)n);
    random_system_init(rs, n, r, &rng);
    model_alloc(m, n, r);
    m->name = "random";
    m->t = 0.3;
    double *Mii = malloc(sizeof(double) * (size_t)r * r);
    if (!Mii) die("out of memory", NULL);
    tu_random_spd(&rng, r, Mii, r);
    for (int j = 0; j < r; ++j)
        memcpy(m->M + (size_t)j * n, Mii + (size_t)j * r, sizeof(double) * (size_t)r);
    free(Mii);
    m->force = random_force;
    m->jacobian = random_jacobian;
    m->time_derivative = random_time;
    m->user = rs;
    m->t_split = m->t;
    tu_random(&rng, n, 1, m->v_split, n);
    memcpy(m->v0, m->v_split, sizeof(double) * (size_t)n);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_dae", &quick, &csv_path) != 0) return EXIT_FAILURE;
    const int samples = quick ? 5 : 31;
    const double target = quick ? 3e-4 : 6e-3; /* seconds per sample */
    csv_out = bu_open_csv(csv_path, "bench_dae", quick,
                          "section,case,n,q,path,median_s,min_s,max_s,iterations,svd_steps,"
                          "ratio,cost_units,note");
    printf("cdyn %s index-1 DAE benchmark (%s mode): time per call, median [min, max] over "
           "%d samples\n",
           cdyn_version(), quick ? "quick" : "full", samples);
    bu_print_machine(stdout, "  ");
    printf("iters, svd: mean Newton iterations and SVD-path steps per call\n");

    /* models: valve open, valve closed, random n = 10, 30, 100 */
    network net = make_network();
    enum { NMODELS = 5 };
    static const int random_sizes[] = {10, 30, 100};
    model models[NMODELS];
    random_system systems[3];
    const double open_guess[VN] = {2.5e-3, 1.5e-3, 1.0e-3, 8.7e5}; /* m^3/s, Pa */
    /* closed: steady flow through b alone, p_s - R Q = k_b Q^2 (SI: 0.98 L/s) */
    double qc = (-net.resistance + sqrt(net.resistance * net.resistance +
                                        4.0 * net.k_orifice * net.p_supply)) /
                (2.0 * net.k_orifice);
    const double closed_guess[VN] = {qc, 0.0, qc, net.k_orifice * qc * qc};
    valve_model(&models[0], &net, "valve open", 0.1, open_guess);
    valve_model(&models[1], &net, "valve closed", 0.45, closed_guess);
    models[1].prime_v = open_guess; /* see valve_model */
    models[1].prime_t = 0.1;
    for (int k = 0; k < 3; ++k)
        random_model(&models[2 + k], &systems[k], random_sizes[k]);

    print_header("A. right-hand side y' = f(t, y), warm-started at y0 + 1e-6 u sin(k + j) (u: "
                 "L/s or bar for the valve, 1 otherwise); ratio to the y'-only baseline, units = "
                 "one dgesv of size n");
    for (int k = 0; k < NMODELS; ++k) bench_rhs(&models[k], samples, target);

    print_header("B. Newton solve of the q algebraic equations from x* + 1e-4 (u + |x*|) "
                 "sin(k + j + 0.5) (u as in A); ratio to the dgesv Newton, units = one dgesv "
                 "of size q");
    for (int k = 0; k < NMODELS; ++k) bench_solve(&models[k], samples, target);

    print_header("C. one Newton step dx = -J# G, q x q; ratio to the QR path, units = one "
                 "dgesv of size q");
    double t_qr_valve = 0.0, t_svd_valve = 0.0;
    {
        /* valve: open-valve Jacobian (QR) and closed-valve one at Qa = 0 (SVD) */
        double Jo[9], Jc[9];
        algebraic_block(&models[0], models[0].v0, Jo);
        algebraic_block(&models[1], models[1].v0, Jc);
        bench_steps("valve", VN, 3, Jo, Jc, models[0].rank_tol, samples, target, &t_qr_valve,
                    &t_svd_valve);
    }
    for (int k = 2; k < NMODELS; ++k) {
        model *m = &models[k];
        int q = m->q;
        double *Jf = malloc(sizeof(double) * (size_t)q * q);
        double *Jd = malloc(sizeof(double) * (size_t)q * q);
        if (!Jf || !Jd) die("out of memory", NULL);
        algebraic_block(m, m->v0, Jf);
        memcpy(Jd, Jf, sizeof(double) * (size_t)q * q);
        for (int j = 0; j < q; ++j) Jd[(q - 1) + (size_t)j * q] = Jf[(size_t)j * q]; /* rank q-1 */
        double tq, ts;
        bench_steps(m->name, m->n, q, Jf, Jd, m->rank_tol, samples, target, &tq, &ts);
        free(Jf);
        free(Jd);
    }

    /* D: from rest at t = 0, one valve cycle (closure 0.3-0.4 s, closed to
     * 0.6 s, reopening to 0.7 s) */
    model run_model;
    const double rest[VN] = {0.0, 0.0, 0.0, 0.0};
    valve_model(&run_model, &net, "valve run", 0.0, rest);
    long svd_rate = 0;
    run_result run = valve_run(&run_model, &svd_rate);
    long qr_steps = run.iterations - run.svd_steps;
    double svd_time = (double)run.svd_steps * t_svd_valve;
    double qr_time = (double)qr_steps * t_qr_valve;
    double share = svd_time + qr_time > 0.0 ? svd_time / (svd_time + qr_time) : 0.0;
    /* with the one G_a factorisation per evaluation for v_a' (QR or SVD) */
    double fact_svd = (double)(run.svd_steps + svd_rate) * t_svd_valve;
    double fact_qr = (double)(qr_steps + run.rhs_calls - svd_rate) * t_qr_valve;
    double share_all = fact_svd / (fact_svd + fact_qr);
    printf("\nD. valve run, RK4 dt = 1 ms through one cycle (t = 0..1 s; closes 0.3-0.4 s, "
           "reopens 0.6-0.7 s)\n");
    printf("   %ld rhs evaluations in %.2f ms (%.3f us each); Newton steps %ld (%.2f per "
           "evaluation): %ld QR, %ld SVD; rate solves on the SVD path: %ld\n",
           run.rhs_calls, 1e3 * run.seconds, 1e6 * run.seconds / (double)run.rhs_calls,
           run.iterations, (double)run.iterations / (double)run.rhs_calls, qr_steps,
           run.svd_steps, svd_rate);
    printf("   step cost (C, valve): QR %.3f us, SVD %.3f us (x%.2f)\n", 1e6 * t_qr_valve,
           1e6 * t_svd_valve, t_svd_valve / t_qr_valve);
    printf("   estimated share of Newton step time on SVD steps: %.1f %%; with the rate "
           "factorisations: %.1f %%; SVD time / run time: %.2f %%\n",
           100.0 * share, 100.0 * share_all, 100.0 * (fact_svd / run.seconds));
    if (csv_out) {
        fprintf(csv_out, "run,valve run,4,3,svd_share_newton_steps,,,,%ld,%ld,%.4f,,\n",
                run.iterations, run.svd_steps, share);
        fprintf(csv_out, "run,valve run,4,3,svd_share_all_factorisations,,,,%ld,%ld,%.4f,,\n",
                run.iterations + run.rhs_calls, run.svd_steps + svd_rate, share_all);
        fprintf(csv_out, "run,valve run,4,3,rhs_mean,%.9e,,,%.3f,,,,\n",
                run.seconds / (double)run.rhs_calls,
                (double)run.iterations / (double)run.rhs_calls);
    }

    print_header("E. cached factorizations: cdyn_dae_rhs with the split and SVD(M) cached vs "
                 "(a) cdyn_dae_split + cdyn_dae_rhs every call, (b) the same constant M "
                 "through the M(t) callback (SVD of M at t, t +- h every call); ratio to the "
                 "cached path");
    bench_cache(&models[0], samples, target); /* valve open (closed: split refuses, no index <= 5) */
    for (int k = 2; k < NMODELS; ++k) bench_cache(&models[k], samples, target);
    if (csv_out) fclose(csv_out);
    if (g_cache_bugs) {
        fprintf(stderr, "bench_dae: %d cached/uncached disagreements > 1e-10: a bug\n",
                g_cache_bugs);
        return EXIT_FAILURE;
    }

    model_free(&run_model);
    for (int k = 0; k < NMODELS; ++k) model_free(&models[k]);
    for (int k = 0; k < 3; ++k) random_system_free(&systems[k]);
    return EXIT_SUCCESS;
}
