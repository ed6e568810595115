/* Benchmarks of the mechanics layers at their two size limits and end to end
 * (THEORY T4, T5, T6.1). Every number is reported with a baseline measured in
 * the same run on the same data: medians [min, max] over samples and ratios,
 * not pass/fail.
 *
 * Sections:
 *  1. small-size limit: the slider crank (n = 3, m = 2) at one instant.
 *     hand kernel (baseline) = assemble the 5 x 5 bordered KKT matrix
 *     [M Phi_q^T; Phi_q 0] and solve it by Gaussian elimination with partial
 *     pivoting written here (no BLAS/LAPACK); against load + lagrange and a
 *     naive bordered dgesv, on the same M, Q, Phi_q, xi.
 *  2. large-size limit: dgemm C = A B (2 n^3 flops) at n = 100, 300 and the
 *     achieved rate of load + lagrange (m = n/3) as a fraction of dgemm's
 *     (flop count: bu_flops_kkt in bench_util.c, an approximation).
 *  3. per-call timings: cdyn_mbs_project (slider crank, from a 1e-6
 *     perturbation, mass metric), cdyn_mbs_partition_rhs (slider crank),
 *     cdyn_rigid_accelerations (FREE, f = 6; MANEUVER4, f = 4). Their cost
 *     unit is one dgesv of a 12 x 12 well-conditioned system (copy of the
 *     matrix and right-hand side included) — NOT a bordered solve of the same
 *     body; ratio = time / cost unit.
 *  4. end to end: slider crank, fixed-step RK4 (dt = 1e-3) over 10 s (1 s
 *     with --quick), cdyn_mbs_rhs (KKT) and cdyn_mbs_project (mass metric)
 *     after each step: time per step, steps per second, max |Phi|.
 *     The Cartesian pendulum likewise (q = (x, y), Phi = x^2 + y^2 - l^2,
 *     gravity, theta0 = 0.5 rad from rest), against a hand-written step of
 *     the same scheme (RK4 with the closed-form KKT solution, radial
 *     projection of q and q': no BLAS, no library): time per step, steps
 *     per second, max |Phi| after projection, the largest angle error
 *     against the exact (Jacobi elliptic) solution, the energy drift, and
 *     the largest difference between the cdyn and the hand trajectories.
 *  5. scaling: load + lagrange and the bordered dgesv over random problems
 *     (n = 6 ... 300, m = n/3); least-squares slope of log(time) vs log(n)
 *     over n = 30, 100, 300.
 *
 * The machine description (uname, CPU, compiler, cdyn version, the BLAS and
 * LAPACK shared objects actually loaded) heads the output and, as '#'
 * comment lines, the CSV. Exit status non-zero only on a failed call or a
 * disagreement with a baseline (> 1e-6 relative): a bug, not a timing.
 *
 * usage: bench_mechanics [--quick] [--csv FILE]
 */
#include <cdyn.h>

#include "bench_pendulum.h"
#include "bench_util.h"
#include "testutil.h"

#include "../../examples/slider_crank_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);

/* ---- shared measurement and reporting ------------------------------------- */

typedef struct { double median, min, max; } timing;

enum { MAX_SAMPLES = 64 };

static int g_samples = 15;
static double g_target = 2e-3; /* seconds per sample */
static FILE *g_csv = NULL;
static int g_failures = 0; /* non-OK statuses seen inside timed loops */

/* Median over samples of the mean time of reps calls; reps chosen so that one
 * sample lasts about g_target seconds. */
static timing measure(void (*fn)(void *), void *ctx)
{
    double t[MAX_SAMPLES];
    fn(ctx); /* warm-up */
    double t0 = now_seconds();
    fn(ctx);
    double once = now_seconds() - t0;
    int reps = (int)(g_target / (once > 1e-8 ? once : 1e-8));
    if (reps < 1) reps = 1;
    for (int s = 0; s < g_samples; ++s) {
        t0 = now_seconds();
        for (int r = 0; r < reps; ++r) fn(ctx);
        t[s] = (now_seconds() - t0) / reps;
    }
    qsort(t, (size_t)g_samples, sizeof(double), compare_double);
    timing out = {t[g_samples / 2], t[0], t[g_samples - 1]};
    return out;
}

/* One row: section, case, n, m, timing, ratio to the named baseline, extra
 * (a rate or count, meaning given by extra_name). */
static void report(const char *section, const char *name, int n, int m, timing t,
                   const char *baseline, double ratio, const char *extra_name, double extra)
{
    printf("%-3s %-34s %4d %4d %11.3f %11.3f %11.3f %8.3f  %-18s", section, name, n, m,
           1e6 * t.median, 1e6 * t.min, 1e6 * t.max, ratio, baseline);
    if (extra_name) printf(" %s=%.4g", extra_name, extra);
    printf("\n");
    if (g_csv)
        fprintf(g_csv, "%s,%s,%d,%d,%.9e,%.9e,%.9e,%s,%.4f,%s,%.6e\n", section, name, n, m,
                t.median, t.min, t.max, baseline, ratio, extra_name ? extra_name : "",
                extra_name ? extra : 0.0);
    fflush(stdout);
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_mechanics: setup failed: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(EXIT_FAILURE);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("out of memory", NULL);
    return p;
}

/* ---- the slider crank at one consistent instant --------------------------- */

/* Consistent y = [q; q'] of the slider crank at crank angle th1, speed w1. */
static void slider_state(double th1, double w1, double *y)
{
    double th3 = -asin(CRANK * sin(th1) / ROD);
    double w3 = -CRANK * cos(th1) * w1 / (ROD * cos(th3));
    y[S] = CRANK * cos(th1) + ROD * cos(th3);
    y[TH1] = th1;
    y[TH3] = th3;
    y[N + S] = -CRANK * sin(th1) * w1 - ROD * sin(th3) * w3;
    y[N + TH1] = w1;
    y[N + TH3] = w3;
}

/* ---- section 1: the small-size limit -------------------------------------- */

typedef struct {
    double Mm[9], Qv[3], P[6], xiv[2]; /* M (3x3), Q, Phi_q (2x3, ld 2), xi */
    double qdd[3], lambda[2];
    double kkt[25], rhs[5];
    int ipiv[5];
    cdyn_constraint *c;
} small_problem;

/* Baseline: bordered 5 x 5 system by Gaussian elimination with partial
 * pivoting, written out for the fixed size (no BLAS). */
static void small_hand(void *ctx)
{
    small_problem *p = ctx;
    double a[5][6]; /* row-major augmented [K | rhs] */
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) a[i][j] = p->Mm[i + 3 * j];
        a[i][3] = p->P[0 + 2 * i];
        a[i][4] = p->P[1 + 2 * i];
        a[i][5] = p->Qv[i];
    }
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 3; ++j) a[3 + i][j] = p->P[i + 2 * j];
        a[3 + i][3] = a[3 + i][4] = 0.0;
        a[3 + i][5] = p->xiv[i];
    }
    for (int k = 0; k < 5; ++k) {
        int piv = k;
        for (int i = k + 1; i < 5; ++i)
            if (fabs(a[i][k]) > fabs(a[piv][k])) piv = i;
        if (piv != k)
            for (int j = k; j < 6; ++j) {
                double tmp = a[k][j];
                a[k][j] = a[piv][j];
                a[piv][j] = tmp;
            }
        double inv = 1.0 / a[k][k];
        for (int i = k + 1; i < 5; ++i) {
            double f = a[i][k] * inv;
            for (int j = k + 1; j < 6; ++j) a[i][j] -= f * a[k][j];
        }
    }
    double x[5];
    for (int i = 4; i >= 0; --i) {
        double sum = a[i][5];
        for (int j = i + 1; j < 5; ++j) sum -= a[i][j] * x[j];
        x[i] = sum / a[i][i];
    }
    memcpy(p->qdd, x, sizeof(double) * 3);
    memcpy(p->lambda, x + 3, sizeof(double) * 2);
}

/* Naive: assemble the bordered matrix, dgesv. */
static void bordered_dgesv(int n, int m, const double *Mm, const double *Qv, const double *P,
                           const double *xiv, double *kkt, double *rhs, int *ipiv)
{
    if (tu_bordered_solve(n, m, Mm, n, P, m, 1.0, Qv, xiv, kkt, ipiv, rhs) != 0) ++g_failures;
}

static void small_dgesv(void *ctx)
{
    small_problem *p = ctx;
    bordered_dgesv(3, 2, p->Mm, p->Qv, p->P, p->xiv, p->kkt, p->rhs, p->ipiv);
}

static void small_cdyn(void *ctx)
{
    small_problem *p = ctx;
    if (cdyn_constraint_load(p->c, p->Mm, 3, p->Qv, p->P, 2, NULL, NULL, p->xiv) != CDYN_OK ||
        cdyn_constraint_lagrange(p->c, p->qdd, p->lambda) != CDYN_OK)
        ++g_failures;
}

static void section_small(double *hand_time, double *dgesv5_time)
{
    small_problem p;
    memset(&p, 0, sizeof p);
    double y[NY];
    slider_state(0.6, 2.0, y);
    mass(0.0, y, p.Mm, 3, NULL);
    force(0.0, y, y + N, p.Qv, NULL);
    jacobian(0.0, y, p.P, 2, NULL);
    xi(0.0, y, y + N, p.xiv, NULL);
    cdyn_status st;
    p.c = cdyn_constraint_create(3, 2, &st);
    if (!p.c) die("cdyn_constraint_create(3, 2)", cdyn_status_string(st));
    st = cdyn_constraint_load(p.c, p.Mm, 3, p.Qv, p.P, 2, NULL, NULL, p.xiv);
    if (st != CDYN_OK) die("cdyn_constraint_load (slider crank)", cdyn_constraint_last_error(p.c));
    st = cdyn_constraint_lagrange(p.c, p.qdd, p.lambda);
    if (st != CDYN_OK) die("cdyn_constraint_lagrange (slider crank)", cdyn_constraint_last_error(p.c));
    double ref[5];
    memcpy(ref, p.qdd, sizeof(double) * 3);
    memcpy(ref + 3, p.lambda, sizeof(double) * 2);
    small_hand(&p);
    double worst = 0.0;
    for (int i = 0; i < 3; ++i) worst = fmax(worst, fabs(p.qdd[i] - ref[i]) / (1.0 + fabs(ref[i])));
    for (int i = 0; i < 2; ++i)
        worst = fmax(worst, fabs(p.lambda[i] - ref[3 + i]) / (1.0 + fabs(ref[3 + i])));
    small_dgesv(&p);
    for (int i = 0; i < 5; ++i) worst = fmax(worst, fabs(p.rhs[i] - ref[i]) / (1.0 + fabs(ref[i])));
    if (!(worst <= 1e-10)) die("slider crank: hand kernel, dgesv and cdyn disagree", NULL);

    timing th = measure(small_hand, &p);
    timing td = measure(small_dgesv, &p);
    timing tc = measure(small_cdyn, &p);
    report("1", "hand GE 5x5 (baseline)", 3, 2, th, "hand", 1.0, NULL, 0);
    report("1", "bordered dgesv", 3, 2, td, "hand", td.median / th.median, "ratio_to_dgesv", 1.0);
    report("1", "load+lagrange", 3, 2, tc, "hand", tc.median / th.median, "ratio_to_dgesv",
           tc.median / td.median);
    *hand_time = th.median;
    *dgesv5_time = td.median;
    cdyn_constraint_free(p.c);
}

/* ---- sections 2 and 5: random problems, dgemm ----------------------------- */

typedef struct {
    int n, m;
    double *Mm, *Qv, *P, *xiv, *qdd, *lambda, *kkt, *rhs;
    int *ipiv;
    cdyn_constraint *c;
} big_problem;

static void big_cdyn(void *ctx)
{
    big_problem *p = ctx;
    if (cdyn_constraint_load(p->c, p->Mm, p->n, p->Qv, p->P, p->m, NULL, NULL, p->xiv) !=
            CDYN_OK ||
        cdyn_constraint_lagrange(p->c, p->qdd, p->lambda) != CDYN_OK)
        ++g_failures;
}

static void big_dgesv(void *ctx)
{
    big_problem *p = ctx;
    bordered_dgesv(p->n, p->m, p->Mm, p->Qv, p->P, p->xiv, p->kkt, p->rhs, p->ipiv);
}

typedef struct { int n; double *A, *B, *C; } gemm_problem;

static void run_dgemm(void *ctx)
{
    gemm_problem *g = ctx;
    const double one = 1.0, zero = 0.0;
    dgemm_("N", "N", &g->n, &g->n, &g->n, &one, g->A, &g->n, g->B, &g->n, &zero, g->C, &g->n);
}

/* Approximate flops of load + lagrange: the count stated in bench_util.c
 * (bu_flops_kkt: Schur-Cholesky path, n^3/3 + n^2 m + n m^2 + m^3/3 + lower
 * order terms), shared with bench_constraint. */
static double lagrange_flops(int n, int m) { return bu_flops_kkt(n, m); }

static double slope(int k, const double *x, const double *y)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (int i = 0; i < k; ++i) mx += log(x[i]) / k, my += log(y[i]) / k;
    for (int i = 0; i < k; ++i) {
        sxy += (log(x[i]) - mx) * (log(y[i]) - my);
        sxx += (log(x[i]) - mx) * (log(x[i]) - mx);
    }
    return sxy / sxx;
}

static void section_large(void)
{
    const int sizes[] = {6, 12, 30, 100, 300};
    enum { NSIZES = sizeof sizes / sizeof sizes[0] };
    double tl[NSIZES], tg[NSIZES], gemm_rate[NSIZES] = {0}, nn[NSIZES];
    for (int k = 0; k < NSIZES; ++k) {
        big_problem p;
        memset(&p, 0, sizeof p);
        p.n = sizes[k];
        p.m = p.n / 3;
        int n = p.n, m = p.m, nb = n + m;
        tu_rng rng;
        tu_rng_seed(&rng, 777 + (unsigned)n);
        p.Mm = xmalloc(sizeof(double) * (size_t)n * n);
        p.Qv = xmalloc(sizeof(double) * (size_t)n);
        p.P = xmalloc(sizeof(double) * (size_t)m * n);
        p.xiv = xmalloc(sizeof(double) * (size_t)m);
        p.qdd = xmalloc(sizeof(double) * (size_t)n);
        p.lambda = xmalloc(sizeof(double) * (size_t)m);
        p.kkt = xmalloc(sizeof(double) * (size_t)nb * nb);
        p.rhs = xmalloc(sizeof(double) * (size_t)nb);
        p.ipiv = xmalloc(sizeof(int) * (size_t)nb);
        tu_random_spd(&rng, n, p.Mm, n);
        tu_random(&rng, n, 1, p.Qv, n);
        tu_random(&rng, m, n, p.P, m);
        tu_random(&rng, m, 1, p.xiv, m);
        cdyn_status st;
        p.c = cdyn_constraint_create(n, m, &st);
        if (!p.c) die("cdyn_constraint_create", cdyn_status_string(st));
        if (cdyn_constraint_load(p.c, p.Mm, n, p.Qv, p.P, m, NULL, NULL, p.xiv) != CDYN_OK ||
            cdyn_constraint_lagrange(p.c, p.qdd, p.lambda) != CDYN_OK)
            die("load+lagrange on a random problem", cdyn_constraint_last_error(p.c));
        big_dgesv(&p);
        double sq = tu_vec_max_abs(n, p.rhs), worst = 0.0;
        for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(p.qdd[i] - p.rhs[i]) / sq);
        if (!(worst <= 1e-6)) {
            fprintf(stderr, "BUG: n = %d: lagrange differs from dgesv by %.3e (> 1e-6)\n", n,
                    worst);
            ++g_failures;
        } else if (worst > 1e-8)
            fprintf(stderr, "warning: n = %d: lagrange vs dgesv %.3e\n", n, worst);

        timing td = measure(big_dgesv, &p);
        timing tc = measure(big_cdyn, &p);
        double fl = lagrange_flops(n, m);
        report("5", "bordered dgesv (baseline)", n, m, td, "dgesv", 1.0, NULL, 0);
        report("5", "load+lagrange", n, m, tc, "dgesv", tc.median / td.median, "GFLOPs",
               1e-9 * fl / tc.median);
        tl[k] = tc.median;
        tg[k] = td.median;
        nn[k] = n;

        if (n == 100 || n == 300) {
            gemm_problem g = {n, NULL, NULL, NULL};
            g.A = xmalloc(sizeof(double) * (size_t)n * n);
            g.B = xmalloc(sizeof(double) * (size_t)n * n);
            g.C = xmalloc(sizeof(double) * (size_t)n * n);
            tu_random(&rng, n, n, g.A, n);
            tu_random(&rng, n, n, g.B, n);
            timing tm = measure(run_dgemm, &g);
            gemm_rate[k] = 2.0 * (double)n * n * n / tm.median;
            double lag_rate = fl / tc.median;
            report("2", "dgemm C=AB (baseline)", n, n, tm, "dgemm", 1.0, "GFLOPs",
                   1e-9 * gemm_rate[k]);
            timing tcopy = tc;
            report("2", "load+lagrange rate/dgemm rate", n, m, tcopy, "dgemm",
                   lag_rate / gemm_rate[k], "GFLOPs", 1e-9 * lag_rate);
            free(g.A), free(g.B), free(g.C);
        }
        cdyn_constraint_free(p.c);
        free(p.Mm), free(p.Qv), free(p.P), free(p.xiv), free(p.qdd), free(p.lambda);
        free(p.kkt), free(p.rhs), free(p.ipiv);
    }
    double sl = slope(3, nn + 2, tl + 2), sg = slope(3, nn + 2, tg + 2);
    printf("5   scaling exponent over n = 30, 100, 300 (LSQ slope of log t vs log n): "
           "load+lagrange %.3f, bordered dgesv %.3f\n", sl, sg);
    if (g_csv) {
        fprintf(g_csv, "5,slope n=30..300 load+lagrange,300,100,,,,,,slope,%.4f\n", sl);
        fprintf(g_csv, "5,slope n=30..300 bordered dgesv,300,100,,,,,,slope,%.4f\n", sg);
    }
}

/* ---- section 3: per-call timings ------------------------------------------ */

typedef struct {
    double A0[144], b0[12], A[144], b[12];
    int ipiv[12];
} unit_problem;

static void run_unit(void *ctx)
{
    unit_problem *u = ctx;
    int n = 12, one = 1, info = 0;
    memcpy(u->A, u->A0, sizeof u->A);
    memcpy(u->b, u->b0, sizeof u->b);
    dgesv_(&n, &one, u->A, &n, u->ipiv, u->b, &n, &info);
    if (info != 0) ++g_failures;
}

typedef struct {
    cdyn_mbs *mbs;
    double y0[NY], y[NY], z[2 * (N - M_CON)], zdot[2 * (N - M_CON)];
} mbs_ctx;

static void run_project(void *ctx)
{
    mbs_ctx *c = ctx;
    memcpy(c->y, c->y0, sizeof c->y);
    if (cdyn_mbs_project(c->mbs, 0.0, c->y) != CDYN_OK) ++g_failures;
}

static void run_partition_rhs(void *ctx)
{
    mbs_ctx *c = ctx;
    if (cdyn_mbs_partition_rhs(c->mbs, 0.0, c->z, c->zdot) != CDYN_OK) ++g_failures;
}

typedef struct {
    cdyn_rigid *rb;
    cdyn_rigid_kinematics k;
    double qdot[6], Fi[6], qdd[6], Fq[6];
} rigid_ctx;

static void run_rigid(void *ctx)
{
    rigid_ctx *r = ctx;
    if (cdyn_rigid_accelerations(r->rb, &r->k, r->qdot, r->Fi, r->qdd, r->Fq) != CDYN_OK)
        ++g_failures;
}

static cdyn_mbs *slider_mbs(void)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(N, M_CON, &st);
    if (!mbs) die("cdyn_mbs_create", cdyn_status_string(st));
    if (cdyn_mbs_set_model(mbs, mass, force, phi, jacobian, NULL) != CDYN_OK ||
        cdyn_mbs_set_time_terms(mbs, phi_t, xi) != CDYN_OK ||
        cdyn_mbs_set_formulation(mbs, CDYN_MBS_LAGRANGE) != CDYN_OK ||
        cdyn_mbs_set_projection_metric(mbs, CDYN_PROJECT_MASS) != CDYN_OK)
        die("slider crank model setup", cdyn_mbs_last_error(mbs));
    return mbs;
}

static void rigid_case(const char *name, cdyn_rigid_preset preset, double unit)
{
    int f = cdyn_rigid_preset_dof(preset);
    rigid_ctx r;
    memset(&r, 0, sizeof r);
    cdyn_status st;
    r.rb = cdyn_rigid_create(f, &st);
    if (!r.rb) die("cdyn_rigid_create", cdyn_status_string(st));
    const double inertia[9] = {1.0, 0.1, 0.0, 0.1, 2.0, 0.2, 0.0, 0.2, 3.0};
    const double rpc[3] = {0.1, -0.2, 0.3};
    if (cdyn_rigid_set_body(r.rb, 5.0, inertia, 3, rpc) != CDYN_OK)
        die("cdyn_rigid_set_body", cdyn_rigid_last_error(r.rb));
    cdyn_rigid_preset_params prm;
    memset(&prm, 0, sizeof prm);
    prm.z0 = 0.5;
    prm.theta0 = 0.1;
    double q[6] = {0.1, 0.2, 0.3, 0.1, 0.2, 0.3};
    double qd[6] = {0.5, -0.4, 0.3, 0.2, -0.1, 0.3};
    if (preset == CDYN_RIGID_MANEUVER4) q[3] = 0.15, qd[3] = 0.25; /* (x, y, phi, psi) */
    memcpy(r.qdot, qd, sizeof qd);
    st = cdyn_rigid_preset_eval(preset, &prm, 0.0, q, r.qdot, &r.k);
    if (st != CDYN_OK) die("cdyn_rigid_preset_eval", cdyn_status_string(st));
    r.Fi[2] = -5.0 * 9.81;
    r.Fi[3] = 0.3;
    st = cdyn_rigid_accelerations(r.rb, &r.k, r.qdot, r.Fi, r.qdd, r.Fq);
    if (st != CDYN_OK) die("cdyn_rigid_accelerations", cdyn_rigid_last_error(r.rb));
    timing t = measure(run_rigid, &r);
    report("3", name, f, 6 - f, t, "dgesv12", t.median / unit, NULL, 0);
    cdyn_rigid_free(r.rb);
}

/* ---- the free body about its centre of mass: cdyn_rigid_rhs against the
 * Euler equations written by hand ---------------------------------------- */

/* A free body (q = x, y, z, phi, theta, psi with R = Rz(psi) Ry(theta)
 * Rx(phi)), P at the centre of mass, gravity and a constant lab moment. */
typedef struct {
    double mass, inertia[9], inertia_inv[9], force[3], moment[3];
    double y[12], ydot[12];
    cdyn_rigid *rb, *rb_preset; /* FREE by a motion callback; by cdyn_rigid_set_preset */
} free_body;

static void free_body_loads_into(const free_body *b, double *F_i)
{
    memcpy(F_i, b->force, sizeof b->force);
    memcpy(F_i + 3, b->moment, sizeof b->moment);
}

static int free_motion_cb(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                          void *user)
{
    (void)user;
    return cdyn_rigid_preset_eval(CDYN_RIGID_FREE, NULL, t, q, qd, k) == CDYN_OK ? 0 : 1;
}

static int free_loads_cb(double t, const double *q, const double *qd,
                         const cdyn_rigid_kinematics *k, double *F_i, void *user)
{
    (void)t, (void)q, (void)qd, (void)k;
    free_body_loads_into(user, F_i);
    return 0;
}

/* The hand-written right-hand side: omega from the Euler-angle rates, the
 * Euler equations in the body frame with I^-1 prepared once, then the angle
 * accelerations from omega' = J_R q'' + L_R solved in closed form. */
static void free_body_hand(void *ctx)
{
    free_body *b = ctx;
    const double *q = b->y, *qd = b->y + 6;
    double cf = cos(q[3]), sf = sin(q[3]), ct = cos(q[4]), st = sin(q[4]), cp = cos(q[5]),
           sp = sin(q[5]);
    double R[9] = {cp * ct, sp * ct, -st, cp * st * sf - sp * cf, sp * st * sf + cp * cf, ct * sf,
                   cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf};
    double dph = qd[3], dth = qd[4], dps = qd[5];
    double w[3] = {ct * cp * dph - sp * dth, ct * sp * dph + cp * dth, -st * dph + dps};
    double LR[3] = {dph * (-st * cp * dth - ct * sp * dps) - dth * cp * dps,
                    dph * (-st * sp * dth + ct * cp * dps) - dth * sp * dps, -dph * ct * dth};
    double wb[3], tb[3], Iw[3], rhs[3], wbd[3], a[3];
    for (int i = 0; i < 3; ++i) { /* body frame: R^T */
        wb[i] = R[3 * i] * w[0] + R[3 * i + 1] * w[1] + R[3 * i + 2] * w[2];
        tb[i] = R[3 * i] * b->moment[0] + R[3 * i + 1] * b->moment[1] +
                R[3 * i + 2] * b->moment[2];
    }
    for (int i = 0; i < 3; ++i)
        Iw[i] = b->inertia[i] * wb[0] + b->inertia[i + 3] * wb[1] + b->inertia[i + 6] * wb[2];
    rhs[0] = tb[0] - (wb[1] * Iw[2] - wb[2] * Iw[1]);
    rhs[1] = tb[1] - (wb[2] * Iw[0] - wb[0] * Iw[2]);
    rhs[2] = tb[2] - (wb[0] * Iw[1] - wb[1] * Iw[0]);
    for (int i = 0; i < 3; ++i)
        wbd[i] = b->inertia_inv[i] * rhs[0] + b->inertia_inv[i + 3] * rhs[1] +
                 b->inertia_inv[i + 6] * rhs[2];
    for (int i = 0; i < 3; ++i) /* back to the lab: R, less the velocity terms */
        a[i] = R[i] * wbd[0] + R[i + 3] * wbd[1] + R[i + 6] * wbd[2] - LR[i];
    double *yd = b->ydot;
    memcpy(yd, qd, 6 * sizeof(double));
    for (int i = 0; i < 3; ++i) yd[6 + i] = b->force[i] / b->mass;
    yd[9] = (cp * a[0] + sp * a[1]) / ct;
    yd[10] = -sp * a[0] + cp * a[1];
    yd[11] = a[2] + st * yd[9];
}

static void free_body_cdyn(void *ctx)
{
    free_body *b = ctx;
    if (cdyn_rigid_rhs(b->rb, 0.0, b->y, b->ydot) != CDYN_OK) ++g_failures;
}

static void free_body_preset(void *ctx)
{
    free_body *b = ctx;
    if (cdyn_rigid_rhs(b->rb_preset, 0.0, b->y, b->ydot) != CDYN_OK) ++g_failures;
}

/* The 3 x 3 inverse by cofactors (the hand version's one-time set-up). */
static void inverse3(const double *A, double *X)
{
    double c00 = A[4] * A[8] - A[7] * A[5], c01 = A[7] * A[2] - A[1] * A[8],
           c02 = A[1] * A[5] - A[4] * A[2];
    double det = A[0] * c00 + A[3] * c01 + A[6] * c02;
    X[0] = c00 / det, X[1] = c01 / det, X[2] = c02 / det;
    X[3] = (A[6] * A[5] - A[3] * A[8]) / det, X[4] = (A[0] * A[8] - A[6] * A[2]) / det;
    X[5] = (A[3] * A[2] - A[0] * A[5]) / det;
    X[6] = (A[3] * A[7] - A[6] * A[4]) / det, X[7] = (A[6] * A[1] - A[0] * A[7]) / det;
    X[8] = (A[0] * A[4] - A[3] * A[1]) / det;
}

static void section_rigid_hand(void)
{
    free_body b;
    memset(&b, 0, sizeof b);
    const double inertia[9] = {1.0, 0.1, 0.0, 0.1, 2.0, 0.2, 0.0, 0.2, 3.0};
    const double y0[12] = {0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.5, -0.4, 0.3, 0.2, -0.1, 0.3};
    b.mass = 5.0;
    memcpy(b.inertia, inertia, sizeof inertia);
    inverse3(inertia, b.inertia_inv);
    b.force[2] = -5.0 * 9.81;
    b.moment[0] = 0.3, b.moment[1] = -0.1, b.moment[2] = 0.05;
    memcpy(b.y, y0, sizeof y0);
    cdyn_status st;
    b.rb = cdyn_rigid_create(6, &st);
    const double at_c[3] = {0.0, 0.0, 0.0};
    if (!b.rb || cdyn_rigid_set_body(b.rb, b.mass, inertia, 3, at_c) != CDYN_OK ||
        cdyn_rigid_set_model(b.rb, free_motion_cb, free_loads_cb, &b) != CDYN_OK)
        die("free body set-up", b.rb ? cdyn_rigid_last_error(b.rb) : cdyn_status_string(st));
    b.rb_preset = cdyn_rigid_create(6, &st);
    if (!b.rb_preset || cdyn_rigid_set_body(b.rb_preset, b.mass, inertia, 3, at_c) != CDYN_OK ||
        cdyn_rigid_set_preset(b.rb_preset, CDYN_RIGID_FREE, NULL, free_loads_cb, &b) != CDYN_OK)
        die("free body set-up (preset)",
            b.rb_preset ? cdyn_rigid_last_error(b.rb_preset) : cdyn_status_string(st));
    double hand[12];
    free_body_hand(&b);
    memcpy(hand, b.ydot, sizeof hand);
    void (*routes[2])(void *) = {free_body_cdyn, free_body_preset};
    for (int k = 0; k < 2; ++k) { /* both routes checked against the hand equations */
        double worst = 0.0, scale = 0.0;
        routes[k](&b);
        for (int i = 0; i < 12; ++i) {
            worst = fmax(worst, fabs(b.ydot[i] - hand[i]));
            scale = fmax(scale, fabs(hand[i]));
        }
        if (!(worst <= 1e-12 * scale))
            die("free body: cdyn_rigid_rhs and the hand Euler equations disagree", NULL);
    }
    timing th = measure(free_body_hand, &b), tc = measure(free_body_cdyn, &b),
           tp = measure(free_body_preset, &b);
    report("3", "hand Euler eqs, free body (baseline)", 6, 0, th, "hand_rigid", 1.0, NULL, 0);
    report("3", "cdyn_rigid_rhs FREE preset", 6, 0, tc, "hand_rigid", tc.median / th.median,
           NULL, 0);
    report("3", "cdyn_rigid_rhs FREE by set_preset", 6, 0, tp, "hand_rigid",
           tp.median / th.median, NULL, 0);
    cdyn_rigid_free(b.rb);
    cdyn_rigid_free(b.rb_preset);
}

static void section_calls(double dgesv5_time)
{
    unit_problem u;
    tu_rng rng;
    tu_rng_seed(&rng, 12);
    tu_random(&rng, 12, 12, u.A0, 12);
    for (int i = 0; i < 12; ++i) u.A0[i + 12 * i] += 12.0;
    tu_random(&rng, 12, 1, u.b0, 12);
    timing tu = measure(run_unit, &u);
    report("3", "dgesv 12x12 (cost unit)", 12, 0, tu, "dgesv12", 1.0, "ratio_to_dgesv5x5",
           tu.median / dgesv5_time);

    mbs_ctx c;
    memset(&c, 0, sizeof c);
    c.mbs = slider_mbs();
    slider_state(0.6, 2.0, c.y0);
    for (int i = 0; i < NY; ++i) c.y0[i] += 1e-6 * (i % 2 ? -1.0 : 1.0);
    memcpy(c.y, c.y0, sizeof c.y);
    cdyn_status st = cdyn_mbs_project(c.mbs, 0.0, c.y);
    if (st != CDYN_OK) die("cdyn_mbs_project", cdyn_mbs_last_error(c.mbs));
    timing tp = measure(run_project, &c);
    report("3", "mbs_project (1e-6; mass metric)", N, M_CON, tp, "dgesv12", tp.median / tu.median,
           NULL, 0);

    double ys[NY];
    slider_state(0.6, 2.0, ys);
    if (cdyn_mbs_partition(c.mbs, 0.0, ys) != CDYN_OK ||
        cdyn_mbs_partition_gather(c.mbs, ys, c.z) != CDYN_OK ||
        cdyn_mbs_partition_rhs(c.mbs, 0.0, c.z, c.zdot) != CDYN_OK)
        die("slider crank partition", cdyn_mbs_last_error(c.mbs));
    timing tr = measure(run_partition_rhs, &c);
    report("3", "mbs_partition_rhs", N, M_CON, tr, "dgesv12", tr.median / tu.median, NULL, 0);
    cdyn_mbs_free(c.mbs);

    rigid_case("rigid_accelerations FREE", CDYN_RIGID_FREE, tu.median);
    rigid_case("rigid_accelerations MANEUVER4", CDYN_RIGID_MANEUVER4, tu.median);
    section_rigid_hand();
}

/* ---- section 4: end to end ------------------------------------------------ */

/* One RK4 + projection run of the slider crank from its consistent start;
 * returns the largest |Phi| after a projection. With spent (2 entries, or
 * NULL) the time inside cdyn_mbs_rhs and inside cdyn_mbs_project is added
 * there (two clock reads per call: the breakdown run, not the timed one). */
static double slider_run(cdyn_mbs *mbs, int steps, double dt, double *spent)
{
    double y[NY], k[4][NY], yt[NY], ph[M_CON], max_phi = 0.0, t = 0.0;
    static const double stage_c[4] = {0.0, 0.5, 0.5, 1.0};
    slider_state(0.6, 2.0, y);
    for (int step = 0; step < steps; ++step) {
        for (int s = 0; s < 4; ++s) {
            for (int i = 0; i < NY; ++i)
                yt[i] = s == 0 ? y[i] : y[i] + stage_c[s] * dt * k[s - 1][i];
            double t0 = spent ? now_seconds() : 0.0;
            cdyn_status st = cdyn_mbs_rhs(mbs, t + stage_c[s] * dt, yt, k[s]);
            if (spent) spent[0] += now_seconds() - t0;
            if (st != CDYN_OK) die("cdyn_mbs_rhs during the run", cdyn_mbs_last_error(mbs));
        }
        for (int i = 0; i < NY; ++i)
            y[i] += dt / 6.0 * (k[0][i] + 2.0 * k[1][i] + 2.0 * k[2][i] + k[3][i]);
        t = (step + 1) * dt;
        double t0 = spent ? now_seconds() : 0.0;
        cdyn_status st = cdyn_mbs_project(mbs, t, y);
        if (spent) spent[1] += now_seconds() - t0;
        if (st != CDYN_OK) die("cdyn_mbs_project during the run", cdyn_mbs_last_error(mbs));
        phi(t, y, ph, NULL);
        max_phi = fmax(max_phi, fmax(fabs(ph[0]), fabs(ph[1])));
    }
    return max_phi;
}

static void section_run(int quick, double hand_time)
{
    const double dt = 1e-3, t_end = quick ? 1.0 : 10.0;
    const int steps = (int)lround(t_end / dt);
    const int samples = quick ? 1 : 3;
    double per_step[MAX_SAMPLES], max_phi = 0.0;
    cdyn_mbs *mbs = slider_mbs();
    for (int s = 0; s < samples; ++s) {
        double t0 = now_seconds();
        max_phi = slider_run(mbs, steps, dt, NULL);
        per_step[s] = (now_seconds() - t0) / steps;
    }
    qsort(per_step, (size_t)samples, sizeof(double), compare_double);
    timing tt = {per_step[samples / 2], per_step[0], per_step[samples - 1]};
    char name[64];
    snprintf(name, sizeof name, "RK4+project %g s; per step", t_end);
    report("4", name, N, M_CON, tt, "hand", tt.median / hand_time, "steps_per_s", 1.0 / tt.median);
    printf("4   max |Phi| after projection over the run: %.3e\n", max_phi);
    if (g_csv) fprintf(g_csv, "4,max_abs_phi,%d,%d,,,,,,max_abs_phi,%.6e\n", N, M_CON, max_phi);
    /* the breakdown: one more run with the calls timed; ratio = share of
     * that run's step */
    double spent[2] = {0.0, 0.0}, t0 = now_seconds();
    slider_run(mbs, steps, dt, spent);
    double step = (now_seconds() - t0) / steps, rhs = spent[0] / steps, proj = spent[1] / steps;
    double rest = step - rhs - proj;
    timing tr = {rhs, rhs, rhs}, tp = {proj, proj, proj}, ti = {rest, rest, rest};
    report("4", "  of which 4 cdyn_mbs_rhs", N, M_CON, tr, "step_share", rhs / step, NULL, 0);
    report("4", "  of which cdyn_mbs_project", N, M_CON, tp, "step_share", proj / step, NULL, 0);
    report("4", "  of which RK4 and the rest", N, M_CON, ti, "step_share", rest / step, NULL, 0);
    cdyn_mbs_free(mbs);
}

/* ---- section 4: the Cartesian pendulum end to end ---------------------- */

/* The model, the hand-written step and the exact solution: bench_pendulum.h. */

static cdyn_mbs *pendulum_mbs(void)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(2, 1, &st);
    if (!mbs) die("cdyn_mbs_create(2, 1)", cdyn_status_string(st));
    if (cdyn_mbs_set_model(mbs, pend_mass, pend_force, pend_phi, pend_jacobian, NULL) !=
            CDYN_OK ||
        cdyn_mbs_set_time_terms(mbs, pend_phi_t, pend_xi) != CDYN_OK ||
        cdyn_mbs_set_formulation(mbs, CDYN_MBS_LAGRANGE) != CDYN_OK ||
        cdyn_mbs_set_projection_metric(mbs, CDYN_PROJECT_MASS) != CDYN_OK)
        die("pendulum model setup", cdyn_mbs_last_error(mbs));
    return mbs;
}

static double pend_energy(const double *y)
{
    return 0.5 * PEND_MASS * (y[2] * y[2] + y[3] * y[3]) + PEND_MASS * PEND_G * (y[1] + PEND_L);
}

typedef struct {
    double max_phi, max_theta_err, max_energy_drift; /* over the run */
    double y_end[4];
} pend_result;

static void pend_track(pend_result *r, double t, const double *y, double e0)
{
    double ph = fabs(y[0] * y[0] + y[1] * y[1] - PEND_L * PEND_L);
    double th = atan2(y[0], -y[1]);
    r->max_phi = fmax(r->max_phi, ph);
    r->max_theta_err = fmax(r->max_theta_err, fabs(th - pend_exact_theta(t)));
    r->max_energy_drift = fmax(r->max_energy_drift, fabs(pend_energy(y) - e0) / e0);
}

/* One run of `steps` RK4 steps + projection, cdyn (mbs != NULL) or the
 * hand-written step; returns seconds; r (may be NULL) gets the accuracy
 * figures, tracked outside the timed loop by a second, untimed pass. */
static double pend_run(cdyn_mbs *mbs, int steps, double dt, pend_result *r)
{
    double y[4], k1[4], k2[4], k3[4], k4[4], yt[4];
    pend_initial(y);
    double e0 = pend_energy(y), t = 0.0, t0 = now_seconds();
    if (r) memset(r, 0, sizeof *r);
    for (int step = 0; step < steps; ++step) {
        cdyn_status st = CDYN_OK;
        if (mbs) st = cdyn_mbs_rhs(mbs, t, y, k1);
        else pend_hand_rhs(y, k1);
        for (int i = 0; i < 4; ++i) yt[i] = y[i] + 0.5 * dt * k1[i];
        if (mbs) st = st ? st : cdyn_mbs_rhs(mbs, t + 0.5 * dt, yt, k2);
        else pend_hand_rhs(yt, k2);
        for (int i = 0; i < 4; ++i) yt[i] = y[i] + 0.5 * dt * k2[i];
        if (mbs) st = st ? st : cdyn_mbs_rhs(mbs, t + 0.5 * dt, yt, k3);
        else pend_hand_rhs(yt, k3);
        for (int i = 0; i < 4; ++i) yt[i] = y[i] + dt * k3[i];
        if (mbs) st = st ? st : cdyn_mbs_rhs(mbs, t + dt, yt, k4);
        else pend_hand_rhs(yt, k4);
        if (st != CDYN_OK) die("cdyn_mbs_rhs during the pendulum run", cdyn_mbs_last_error(mbs));
        for (int i = 0; i < 4; ++i) y[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        t = (step + 1) * dt;
        if (mbs) {
            st = cdyn_mbs_project(mbs, t, y);
            if (st != CDYN_OK)
                die("cdyn_mbs_project during the pendulum run", cdyn_mbs_last_error(mbs));
        } else
            pend_hand_project(y);
        if (r) pend_track(r, t, y, e0);
    }
    double seconds = now_seconds() - t0;
    if (r) memcpy(r->y_end, y, sizeof y);
    return seconds;
}

static void section_pendulum(int quick)
{
    const double dt = 1e-3, t_end = quick ? 1.0 : 10.0;
    const int steps = (int)lround(t_end / dt);
    const int samples = quick ? 1 : 3, hand_samples = quick ? 3 : 15;
    double per_step[MAX_SAMPLES], hand_step[MAX_SAMPLES];
    cdyn_mbs *mbs = pendulum_mbs();
    pend_result rc, rh;
    pend_run(mbs, steps, dt, &rc); /* accuracy figures (untimed pass) */
    pend_run(NULL, steps, dt, &rh);
    for (int s = 0; s < hand_samples; ++s) hand_step[s] = pend_run(NULL, steps, dt, NULL) / steps;
    for (int s = 0; s < samples; ++s) per_step[s] = pend_run(mbs, steps, dt, NULL) / steps;
    qsort(hand_step, (size_t)hand_samples, sizeof(double), compare_double);
    qsort(per_step, (size_t)samples, sizeof(double), compare_double);
    timing th = {hand_step[hand_samples / 2], hand_step[0], hand_step[hand_samples - 1]};
    timing tc = {per_step[samples / 2], per_step[0], per_step[samples - 1]};
    char name[64];
    snprintf(name, sizeof name, "pendulum hand step %g s (baseline)", t_end);
    report("4", name, 2, 1, th, "hand_step", 1.0, "steps_per_s", 1.0 / th.median);
    snprintf(name, sizeof name, "pendulum RK4+project %g s; per step", t_end);
    report("4", name, 2, 1, tc, "hand_step", tc.median / th.median, "steps_per_s",
           1.0 / tc.median);
    double dy = 0.0;
    for (int i = 0; i < 4; ++i) dy = fmax(dy, fabs(rc.y_end[i] - rh.y_end[i]));
    printf("4   pendulum (theta0 = %.2f rad, dt = %g s, %g s): max |Phi| after projection "
           "%.3e (hand %.3e); max |theta - exact| %.3e rad (hand %.3e); max |E - E0| / E0 "
           "%.3e (hand %.3e); |y_cdyn - y_hand| at the end %.3e\n",
           PEND_THETA0, dt, t_end, rc.max_phi, rh.max_phi, rc.max_theta_err, rh.max_theta_err,
           rc.max_energy_drift, rh.max_energy_drift, dy);
    if (g_csv) {
        fprintf(g_csv, "4,pendulum max_abs_phi,2,1,,,,,,max_abs_phi,%.6e\n", rc.max_phi);
        fprintf(g_csv, "4,pendulum max_theta_error,2,1,,,,,,rad,%.6e\n", rc.max_theta_err);
        fprintf(g_csv, "4,pendulum max_rel_energy_drift,2,1,,,,,,rel,%.6e\n",
                rc.max_energy_drift);
        fprintf(g_csv, "4,pendulum cdyn vs hand at the end,2,1,,,,,,max_abs_diff,%.6e\n", dy);
    }
    /* the same scheme on the same manifold: the trajectories must agree;
     * the exact solution bounds both (RK4 at dt = 1e-3: ~1e-10 rad) */
    if (!(rc.max_phi <= 1e-10) || !(dy <= 1e-6) || !(rc.max_theta_err <= 1e-6)) {
        fprintf(stderr, "BUG: pendulum: max |Phi| %.3e, |y_cdyn - y_hand| %.3e, theta error "
                        "%.3e (limits 1e-10, 1e-6, 1e-6)\n",
                rc.max_phi, dy, rc.max_theta_err);
        ++g_failures;
    }
    cdyn_mbs_free(mbs);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_mechanics", &quick, &csv_path) != 0)
        return EXIT_FAILURE;
    g_samples = quick ? 3 : 15;
    g_target = quick ? 2e-4 : 2e-3;
    g_csv = bu_open_csv(csv_path, "bench_mechanics", quick,
                        "section,case,n,m,median_s,min_s,max_s,baseline,ratio,extra_name,extra");
    double t_start = now_seconds();
    printf("cdyn %s mechanics benchmark (%s mode): time per call [us], median [min, max]; "
           "ratio = median / median of the named baseline (same run)\n",
           cdyn_version(), quick ? "quick" : "full");
    bu_print_machine(stdout, "  ");
    printf("%-3s %-34s %4s %4s %11s %11s %11s %8s  %-18s\n", "sec", "case", "n", "m", "median",
           "min", "max", "ratio", "baseline");
    double hand_time = 0.0, dgesv5_time = 0.0;
    section_small(&hand_time, &dgesv5_time);
    section_calls(dgesv5_time);
    section_run(quick, hand_time);
    section_pendulum(quick);
    section_large();
    if (g_csv) fclose(g_csv);
    printf("total %.2f s\n", now_seconds() - t_start);
    if (g_failures) {
        fprintf(stderr, "bench_mechanics: %d calls failed inside timed loops\n", g_failures);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
