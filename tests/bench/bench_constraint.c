/* Benchmark of the T4 per-step paths: one constrained-acceleration
 * evaluation (THEORY T4.3-T4.8) and, on a scalable cdyn_mbs model, the
 * projection (T4.9) and coordinate partitioning (T4.10), for n = 3, 6, 12,
 * 30, 100, 300 and m = n/3 (m = 2 for n = 3).
 *
 * Section T4: cdyn_constraint_load() followed by one formulation, each
 * against the baseline a user would write for the IDENTICAL linear system:
 * compute s, assemble the bordered matrix [M Phi_q^T; Phi_q 0] and solve it
 * with dgesv (LU of the whole (n+m) matrix). Same M, Q, Phi_q, Phi, Phi',
 * xi for every path. Three baselines, because the stabilizer changes s:
 *   dgesv_plain   s = xi                                   (for kkt)
 *   dgesv_baum    s = xi - 2a Phi' - b^2 Phi, a = 1, b = 2 (baumgarte,
 *                 reactions, pseudoinverse, penalty, export, export_dgesv)
 *   dgesv_gbaum   s = xi - K_D Phi' - K_P Phi, K_D, K_P full (non-diagonal)
 *                 SPD m x m                                (gen_baumgarte)
 * s is computed inside every timed call, by cdyn_constraint_load() and by
 * the baseline alike (O(m) or O(m^2): negligible next to the solves).
 * Paths:
 *   kkt            object without stabilization, load(Phi = Phi' = NULL) +
 *                  cdyn_constraint_lagrange
 *   baumgarte      cdyn_constraint_set_baumgarte(1, 2), load + lagrange
 *   gen_baumgarte  cdyn_constraint_set_gains(K_D, K_P) once, load + lagrange
 *   reactions      load + cdyn_constraint_reactions with C = Phi_q
 *   pseudoinverse  load + cdyn_constraint_pseudoinverse
 *   penalty        load + cdyn_constraint_penalty (default alpha, refined
 *                  to the exact form's answer away from singular poses):
 *                  its difference from the baseline is printed, not checked
 *   export         load + cdyn_constraint_export (assembly of A Y = B only)
 *   export_dgesv   load + export + dgesv of the (2n+m) system (a caller
 *                  with its own solver)
 *   dgemm          C = A B, n x n (2n^3 flops), at n = 100 and 300 only: the
 *                  large-size reference rate
 * Every path's flop count is stated in bench_util.c (approximations, said
 * so there); GFLOP/s = flops / median time, and at n = 100, 300 the rate
 * as a fraction of dgemm's measured in the same run.
 *
 * Section mbs: a scalable model with n coordinates and m constraints
 *   Phi_i(q) = sum_j A_ij q_j + 0.05 sum_j C_ij sin(q_j) - b_i,
 * A = [D | R] with its columns shuffled, R uniform in [-1, 1], D diagonal
 * with D_ii = 2 + sum_j |R_ij| (so Phi_q is well conditioned and the
 * dependent block chosen by the partition is diagonally dominant), C
 * uniform, b such that a random q0 is consistent; M constant random SPD,
 * Q = f0 - 0.1 q', exact xi callback. Paths:
 *   dgesv_mbs (cost unit) the bordered dgesv of M, Phi_q(q0), Q, xi at y0 —
 *                  ONE KKT solve of the same n, m; the ratios of this
 *                  section are in units of it
 *   mbs_rhs        cdyn_mbs_rhs (callbacks + load + KKT)
 *   project_mass   cdyn_mbs_project, mass metric, from y0 perturbed by
 *                  +-1e-6 in every component: Newton iterations on Phi = 0
 *                  (each one a factorization) plus the velocity step, so
 *                  its ratio counts KKT-solve equivalents, not one solve
 *   project_minnorm the same with the minimum-norm metric
 *   partition_rhs  cdyn_mbs_partition_rhs, z alternating between z0 and
 *                  z0 + 1e-6 so that the dependent Newton starts one
 *                  perturbation away (as inside an integrator)
 *
 * Reports median, min and max time per call over samples (the paths of one
 * size are sampled in turn), ratios to the named baseline of the same run,
 * GFLOP/s, and the relative difference of each exact path from its
 * baseline's solution. Not a pass/fail timed test: the exit status is
 * non-zero only if a path returned a non-OK status or an exact path differs
 * from its baseline by more than 1e-6 (a bug; printed as such).
 *
 * CSV (--csv FILE): the machine description as '#' comment lines first,
 * then the header
 *   section,n,m,path,baseline,median_s,min_s,max_s,ratio,flops,gflops,
 *   frac_dgemm,rel_diff,note
 * with empty fields where a value does not apply. plot_performance.sh
 * draws it.
 *
 * usage: bench_constraint [--quick] [--csv FILE]
 */
#include <cdyn.h>

#include "bench_util.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);

static const double BAUM_A = 1.0, BAUM_B = 2.0;
static const double AGREE_WARN = 1e-8, AGREE_FAIL = 1e-6;

static FILE *g_csv = NULL;
static int g_bugs = 0;      /* exact paths that disagree with their baseline > AGREE_FAIL */
static long g_failures = 0; /* non-OK statuses, setup and timed loops */

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_constraint: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(EXIT_FAILURE);
}

static void *xmalloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) die("out of memory", NULL);
    return p;
}

/* ---- one output row --------------------------------------------------------- */

typedef struct {
    const char *section, *path, *baseline; /* baseline NULL: the row is a baseline */
    int n, m;
    bu_timing t;
    double ratio;      /* NAN: not applicable */
    double flops;      /* <= 0: not stated */
    double frac_dgemm; /* NAN: not measured at this n */
    double rel_diff;   /* NAN: not checked */
    const char *note;
} row;

static void print_row(const row *r)
{
    char ratio[16] = "-", rate[16] = "-", frac[16] = "-", diff[16] = "-";
    double gflops = r->flops > 0.0 ? 1e-9 * r->flops / r->t.median : NAN;
    if (!isnan(r->ratio)) snprintf(ratio, sizeof ratio, "%.3f", r->ratio);
    if (!isnan(gflops)) snprintf(rate, sizeof rate, "%.3f", gflops);
    if (!isnan(r->frac_dgemm)) snprintf(frac, sizeof frac, "%.1f%%", 100.0 * r->frac_dgemm);
    if (!isnan(r->rel_diff)) snprintf(diff, sizeof diff, "%.1e", r->rel_diff);
    printf("%4d %4d  %-15s %-13s %11.3f %11.3f %11.3f %8s %8s %7s %8s  %s\n", r->n, r->m,
           r->path, r->baseline ? r->baseline : "(baseline)", 1e6 * r->t.median, 1e6 * r->t.min,
           1e6 * r->t.max, ratio, rate, frac, diff, r->note ? r->note : "");
    if (!g_csv) return;
    fprintf(g_csv, "%s,%d,%d,%s,%s,%.9e,%.9e,%.9e,", r->section, r->n, r->m, r->path,
            r->baseline ? r->baseline : "", r->t.median, r->t.min, r->t.max);
    if (!isnan(r->ratio)) fprintf(g_csv, "%.5f", r->ratio);
    fputc(',', g_csv);
    if (r->flops > 0.0) fprintf(g_csv, "%.6e,%.5f", r->flops, gflops);
    else fputc(',', g_csv);
    fputc(',', g_csv);
    if (!isnan(r->frac_dgemm)) fprintf(g_csv, "%.5f", r->frac_dgemm);
    fputc(',', g_csv);
    if (!isnan(r->rel_diff)) fprintf(g_csv, "%.3e", r->rel_diff);
    fprintf(g_csv, ",%s\n", r->note ? r->note : "");
}

static void print_table_header(void)
{
    printf("%4s %4s  %-15s %-13s %11s %11s %11s %8s %8s %7s %8s  %s\n", "n", "m", "path",
           "baseline", "median[us]", "min", "max", "ratio", "GFLOP/s", "%dgemm", "rel.diff",
           "note");
}

/* Largest relative difference of (x, l) from the reference (xr, lr), each
 * part scaled by its largest entry. */
static double rel_diff(int n, int m, const double *x, const double *l, const double *xr,
                       const double *lr)
{
    double sx = tu_vec_max_abs(n, xr), sl = m > 0 ? tu_vec_max_abs(m, lr) : 1.0, worst = 0.0;
    if (!(sx > 0.0)) sx = 1.0;
    if (!(sl > 0.0)) sl = 1.0;
    for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(x[i] - xr[i]) / sx);
    for (int i = 0; i < m; ++i) worst = fmax(worst, fabs(l[i] - lr[i]) / sl);
    return worst;
}

/* Record the agreement of an exact path: warn above AGREE_WARN, count a bug
 * above AGREE_FAIL (NaN included). */
static void judge(const char *path, int n, double diff)
{
    if (diff <= AGREE_WARN) return;
    if (diff <= AGREE_FAIL) {
        fprintf(stderr, "warning: n = %d: %s differs from its baseline by %.3e\n", n, path,
                diff);
        return;
    }
    fprintf(stderr, "BUG: n = %d: %s differs from its baseline by %.3e (> %.0e)\n", n, path,
            diff, AGREE_FAIL);
    ++g_bugs;
}

/* =========================== section T4 =================================== */

typedef struct {
    int n, m;
    double *M, *Q, *P, *Phi, *Phid, *xi, *h, *KD, *KP;
    double *qdd, *lambda;
    double *kkt, *rhs, *bottom; /* baseline workspace, allocated once */
    int *ipiv;
    double *A, *B; /* exported system (2n+m) */
    int *ipiv_export;
    cdyn_constraint *c_plain, *c_baum, *c_gen;
} problem;

static int bordered(problem *p)
{
    return tu_bordered_solve(p->n, p->m, p->M, p->n, p->P, p->m, 1.0, p->Q, p->bottom, p->kkt,
                             p->ipiv, p->rhs) != 0;
}

/* Baselines: s as the user would compute it, bordered matrix, dgesv. */
static int base_plain(void *ctx)
{
    problem *p = ctx;
    memcpy(p->bottom, p->xi, sizeof(double) * (size_t)p->m);
    return bordered(p);
}

static int base_baum(void *ctx)
{
    problem *p = ctx;
    for (int i = 0; i < p->m; ++i)
        p->bottom[i] = p->xi[i] - 2.0 * BAUM_A * p->Phid[i] - BAUM_B * BAUM_B * p->Phi[i];
    return bordered(p);
}

static int base_gbaum(void *ctx)
{
    problem *p = ctx;
    int m = p->m;
    for (int i = 0; i < m; ++i) {
        double s = p->xi[i];
        for (int j = 0; j < m; ++j)
            s -= p->KD[i + (size_t)j * m] * p->Phid[j] + p->KP[i + (size_t)j * m] * p->Phi[j];
        p->bottom[i] = s;
    }
    return bordered(p);
}

static int load_into(problem *p, cdyn_constraint *c, int stabilized)
{
    return cdyn_constraint_load(c, p->M, p->n, p->Q, p->P, p->m, stabilized ? p->Phi : NULL,
                                stabilized ? p->Phid : NULL, p->xi) != CDYN_OK;
}

static int run_kkt(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_plain, 0) ||
           cdyn_constraint_lagrange(p->c_plain, p->qdd, p->lambda) != CDYN_OK;
}

static int run_baumgarte(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_baum, 1) ||
           cdyn_constraint_lagrange(p->c_baum, p->qdd, p->lambda) != CDYN_OK;
}

static int run_gen_baumgarte(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_gen, 1) ||
           cdyn_constraint_lagrange(p->c_gen, p->qdd, p->lambda) != CDYN_OK;
}

static int run_reactions(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_baum, 1) ||
           cdyn_constraint_reactions(p->c_baum, p->P, p->m, p->qdd, p->lambda) != CDYN_OK;
}

static int run_pseudoinverse(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_baum, 1) ||
           cdyn_constraint_pseudoinverse(p->c_baum, p->qdd, p->lambda) != CDYN_OK;
}

static int run_penalty(void *ctx)
{
    problem *p = ctx;
    return load_into(p, p->c_baum, 1) ||
           cdyn_constraint_penalty(p->c_baum, p->qdd, p->lambda) != CDYN_OK;
}

static int run_export(void *ctx)
{
    problem *p = ctx;
    int size = 2 * p->n + p->m;
    return load_into(p, p->c_baum, 1) ||
           cdyn_constraint_export(p->c_baum, CDYN_EXPORT_MULTIPLIERS, NULL, 1, p->h, p->A, size,
                                  p->B) != CDYN_OK;
}

static int run_export_dgesv(void *ctx)
{
    problem *p = ctx;
    int size = 2 * p->n + p->m, one = 1, info = 0;
    if (run_export(p)) return 1;
    dgesv_(&size, &one, p->A, &size, p->ipiv_export, p->B, &size, &info);
    return info != 0;
}

typedef struct { int n; double *A, *B, *C; } gemm_problem;

static int run_dgemm(void *ctx)
{
    gemm_problem *g = ctx;
    const double one = 1.0, zero = 0.0;
    dgemm_("N", "N", &g->n, &g->n, &g->n, &one, g->A, &g->n, g->B, &g->n, &zero, g->C, &g->n);
    return 0;
}

/* Where a path leaves its result, for the agreement check. */
enum { OUT_NONE, OUT_QDD, OUT_RHS, OUT_EXPORT };
/* How it is checked. */
enum { CHECK_NONE, CHECK_EXACT, CHECK_LOOSE };

typedef struct {
    const char *id;
    int baseline; /* index in the table; -1 for a baseline */
    double flops;
    int out, check;
    bu_fn fn;
    const char *note;
    int object; /* whose last error to print: 0 c_plain, 1 c_baum, 2 c_gen */
} path_def;

enum { B_PLAIN, B_BAUM, B_GBAUM, NBASE };

static void problem_alloc(problem *p, int n, int m)
{
    int N = n + m, size = 2 * n + m;
    p->n = n;
    p->m = m;
    p->M = xmalloc(sizeof(double) * (size_t)n * n);
    p->Q = xmalloc(sizeof(double) * (size_t)n);
    p->P = xmalloc(sizeof(double) * (size_t)m * n);
    p->Phi = xmalloc(sizeof(double) * (size_t)m);
    p->Phid = xmalloc(sizeof(double) * (size_t)m);
    p->xi = xmalloc(sizeof(double) * (size_t)m);
    p->h = xmalloc(sizeof(double) * (size_t)n);
    p->KD = xmalloc(sizeof(double) * (size_t)m * m);
    p->KP = xmalloc(sizeof(double) * (size_t)m * m);
    p->qdd = xmalloc(sizeof(double) * (size_t)n);
    p->lambda = xmalloc(sizeof(double) * (size_t)m);
    p->kkt = xmalloc(sizeof(double) * (size_t)N * N);
    p->rhs = xmalloc(sizeof(double) * (size_t)N);
    p->bottom = xmalloc(sizeof(double) * (size_t)m);
    p->ipiv = xmalloc(sizeof(int) * (size_t)N);
    p->A = xmalloc(sizeof(double) * (size_t)size * size);
    p->B = xmalloc(sizeof(double) * (size_t)size);
    p->ipiv_export = xmalloc(sizeof(int) * (size_t)size);
}

static void problem_free(problem *p)
{
    cdyn_constraint_free(p->c_plain);
    cdyn_constraint_free(p->c_baum);
    cdyn_constraint_free(p->c_gen);
    free(p->M), free(p->Q), free(p->P), free(p->Phi), free(p->Phid), free(p->xi), free(p->h);
    free(p->KD), free(p->KP), free(p->qdd), free(p->lambda), free(p->kkt), free(p->rhs);
    free(p->bottom), free(p->ipiv), free(p->A), free(p->B), free(p->ipiv_export);
}

/* Random SPD gain matrix (full, non-diagonal): scale (B B^T + m I) / m. */
static void random_gains(tu_rng *rng, int m, double scale, double *K)
{
    tu_random_spd(rng, m, K, m);
    for (int i = 0; i < m * m; ++i) K[i] *= scale / m;
}

static void section_t4(int n, int m, int samples, double target)
{
    problem p;
    memset(&p, 0, sizeof p);
    problem_alloc(&p, n, m);
    tu_rng rng;
    tu_rng_seed(&rng, 4242 + (unsigned)n);
    tu_random_spd(&rng, n, p.M, n);
    tu_random(&rng, n, 1, p.Q, n);
    tu_random(&rng, m, n, p.P, m);
    tu_random(&rng, m, 1, p.Phi, m);
    tu_random(&rng, m, 1, p.Phid, m);
    tu_random(&rng, m, 1, p.xi, m);
    tu_random(&rng, n, 1, p.h, n);
    random_gains(&rng, m, 2.0, p.KD);
    random_gains(&rng, m, 4.0, p.KP);
    cdyn_status st;
    p.c_plain = cdyn_constraint_create(n, m, &st);
    p.c_baum = cdyn_constraint_create(n, m, &st);
    p.c_gen = cdyn_constraint_create(n, m, &st);
    if (!p.c_plain || !p.c_baum || !p.c_gen) die("cdyn_constraint_create", cdyn_status_string(st));
    if (cdyn_constraint_set_baumgarte(p.c_baum, BAUM_A, BAUM_B) != CDYN_OK)
        die("cdyn_constraint_set_baumgarte", cdyn_constraint_last_error(p.c_baum));
    if (cdyn_constraint_set_gains(p.c_gen, p.KD, m, p.KP, m) != CDYN_OK)
        die("cdyn_constraint_set_gains", cdyn_constraint_last_error(p.c_gen));

    const int N = n + m, size = 2 * n + m;
    const double stab = bu_flops_stabilizer(m, 1), kkt = bu_flops_kkt(n, m);
    const double lu = bu_flops_bordered_lu(N);
    path_def defs[] = {
        {"dgesv_plain", -1, lu, OUT_RHS, CHECK_NONE, base_plain, "s = xi", 0},
        {"dgesv_baum", -1, lu + 4.0 * m, OUT_RHS, CHECK_NONE, base_baum,
         "s = xi-2a Phi'-b^2 Phi", 0},
        {"dgesv_gbaum", -1, lu + 4.0 * (double)m * m, OUT_RHS, CHECK_NONE, base_gbaum,
         "s = xi-K_D Phi'-K_P Phi", 0},
        {"kkt", B_PLAIN, kkt, OUT_QDD, CHECK_EXACT, run_kkt, "no stabilization", 0},
        {"baumgarte", B_BAUM, kkt + stab, OUT_QDD, CHECK_EXACT, run_baumgarte, "a=1 b=2", 1},
        {"gen_baumgarte", B_GBAUM, kkt + stab, OUT_QDD, CHECK_EXACT, run_gen_baumgarte,
         "full SPD K_D K_P", 2},
        {"reactions", B_BAUM, bu_flops_reactions(n, m) + stab, OUT_QDD, CHECK_EXACT,
         run_reactions, "C = Phi_q", 1},
        {"pseudoinverse", B_BAUM, bu_flops_pseudoinverse(n, m) + stab, OUT_QDD, CHECK_EXACT,
         run_pseudoinverse, NULL, 1},
        {"penalty", B_BAUM, bu_flops_penalty(n, m) + stab, OUT_QDD, CHECK_LOOSE, run_penalty,
         "default alpha, refined: not checked", 1},
        {"export", B_BAUM, 0.0, OUT_NONE, CHECK_NONE, run_export, "assembly only", 1},
        {"export_dgesv", B_BAUM, bu_flops_bordered_lu(size) + stab, OUT_EXPORT, CHECK_EXACT,
         run_export_dgesv, "LU of 2n+m", 1},
    };
    enum { NDEFS = sizeof defs / sizeof defs[0] };

    /* agreement: every path against the solution of its baseline */
    double *ref = xmalloc(sizeof(double) * (size_t)NBASE * N);
    double diff[NDEFS];
    for (int k = 0; k < NDEFS; ++k) {
        diff[k] = NAN;
        if (defs[k].fn(&p)) {
            ++g_failures;
            fprintf(stderr, "FAILED: n = %d: %s returned an error: %s\n", n, defs[k].id,
                    k < NBASE                ? "dgesv info != 0"
                    : defs[k].object == 0 ? cdyn_constraint_last_error(p.c_plain)
                    : defs[k].object == 2 ? cdyn_constraint_last_error(p.c_gen)
                                          : cdyn_constraint_last_error(p.c_baum));
            continue;
        }
        if (k < NBASE) {
            memcpy(ref + (size_t)k * N, p.rhs, sizeof(double) * (size_t)N);
            continue;
        }
        const double *r = ref + (size_t)defs[k].baseline * N;
        if (defs[k].out == OUT_QDD) diff[k] = rel_diff(n, m, p.qdd, p.lambda, r, r + n);
        else if (defs[k].out == OUT_EXPORT)
            diff[k] = rel_diff(n, m, p.B, p.B + 2 * n, r, r + n);
        if (defs[k].check == CHECK_EXACT) judge(defs[k].id, n, diff[k]);
    }

    bu_path paths[NDEFS + 1];
    memset(paths, 0, sizeof paths);
    for (int k = 0; k < NDEFS; ++k) paths[k].fn = defs[k].fn, paths[k].ctx = &p;
    gemm_problem g = {n, NULL, NULL, NULL};
    int with_gemm = n == 100 || n == 300, count = NDEFS;
    if (with_gemm) {
        g.A = xmalloc(sizeof(double) * (size_t)n * n);
        g.B = xmalloc(sizeof(double) * (size_t)n * n);
        g.C = xmalloc(sizeof(double) * (size_t)n * n);
        tu_random(&rng, n, n, g.A, n);
        tu_random(&rng, n, n, g.B, n);
        paths[count].fn = run_dgemm;
        paths[count].ctx = &g;
        ++count;
    }
    bu_measure(paths, count, samples, target);

    double gemm_rate = NAN;
    if (with_gemm) {
        const double fl = 2.0 * (double)n * n * n;
        gemm_rate = fl / paths[NDEFS].t.median;
        row r = {"T4", "dgemm", NULL, n, n, paths[NDEFS].t, NAN, fl, NAN, NAN,
                 "C = A B n x n: reference rate"};
        print_row(&r);
    }
    for (int k = 0; k < NDEFS; ++k) {
        g_failures += paths[k].failures;
        const path_def *d = &defs[k];
        int b = d->baseline;
        row r = {"T4", d->id, b >= 0 ? defs[b].id : NULL, n, m, paths[k].t,
                 paths[k].t.median / paths[b >= 0 ? b : k].t.median, d->flops,
                 with_gemm && d->flops > 0.0 ? d->flops / paths[k].t.median / gemm_rate : NAN,
                 diff[k], paths[k].failures ? "FAILED calls in the timed loop" : d->note};
        print_row(&r);
    }
    fflush(stdout);
    free(ref);
    free(g.A), free(g.B), free(g.C);
    problem_free(&p);
}

/* =========================== section mbs ================================== */

#define SIN_WEIGHT 0.05

typedef struct {
    int n, m;
    double *A, *C, *b; /* m x n, m x n, m */
    double *M, *f0;    /* n x n SPD, n */
} scal_model;

static int sm_mass(double t, const double *q, double *M, int ldm, void *user)
{
    const scal_model *s = user;
    (void)t, (void)q;
    for (int j = 0; j < s->n; ++j)
        memcpy(M + (size_t)j * ldm, s->M + (size_t)j * s->n, sizeof(double) * (size_t)s->n);
    return 0;
}

static int sm_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    const scal_model *s = user;
    (void)t, (void)q;
    for (int i = 0; i < s->n; ++i) Q[i] = s->f0[i] - 0.1 * qdot[i];
    return 0;
}

static int sm_phi(double t, const double *q, double *Phi, void *user)
{
    const scal_model *s = user;
    int n = s->n, m = s->m;
    (void)t;
    for (int i = 0; i < m; ++i) Phi[i] = -s->b[i];
    for (int j = 0; j < n; ++j) {
        double qj = q[j], sj = SIN_WEIGHT * sin(q[j]);
        const double *a = s->A + (size_t)j * m, *c = s->C + (size_t)j * m;
        for (int i = 0; i < m; ++i) Phi[i] += a[i] * qj + c[i] * sj;
    }
    return 0;
}

static int sm_jacobian(double t, const double *q, double *J, int ld, void *user)
{
    const scal_model *s = user;
    int n = s->n, m = s->m;
    (void)t;
    for (int j = 0; j < n; ++j) {
        double cj = SIN_WEIGHT * cos(q[j]);
        const double *a = s->A + (size_t)j * m, *c = s->C + (size_t)j * m;
        for (int i = 0; i < m; ++i) J[i + (size_t)j * ld] = a[i] + c[i] * cj;
    }
    return 0;
}

static int sm_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    const scal_model *s = user;
    (void)t, (void)q;
    memset(Phi_t, 0, sizeof(double) * (size_t)s->m);
    return 0;
}

/* xi = -(Phi_q q')_q q' = 0.05 sum_j C_ij sin(q_j) q'_j^2 (Phi_t = 0) */
static int sm_xi(double t, const double *q, const double *qdot, double *x, void *user)
{
    const scal_model *s = user;
    int n = s->n, m = s->m;
    (void)t;
    memset(x, 0, sizeof(double) * (size_t)m);
    for (int j = 0; j < n; ++j) {
        double w = SIN_WEIGHT * sin(q[j]) * qdot[j] * qdot[j];
        const double *c = s->C + (size_t)j * m;
        for (int i = 0; i < m; ++i) x[i] += c[i] * w;
    }
    return 0;
}

static void scal_model_init(scal_model *s, int n, int m, tu_rng *rng, double *q0)
{
    s->n = n;
    s->m = m;
    s->A = xmalloc(sizeof(double) * (size_t)m * n);
    s->C = xmalloc(sizeof(double) * (size_t)m * n);
    s->b = xmalloc(sizeof(double) * (size_t)m);
    s->M = xmalloc(sizeof(double) * (size_t)n * n);
    s->f0 = xmalloc(sizeof(double) * (size_t)n);
    int *perm = xmalloc(sizeof(int) * (size_t)n);
    for (int j = 0; j < n; ++j) perm[j] = j;
    for (int j = n - 1; j > 0; --j) { /* Fisher-Yates */
        int k = (int)((0.5 * (tu_uniform(rng) + 1.0)) * (j + 1));
        if (k > j) k = j;
        int tmp = perm[j];
        perm[j] = perm[k];
        perm[k] = tmp;
    }
    /* columns perm[0..m) carry D, the others R */
    for (int j = m; j < n; ++j)
        for (int i = 0; i < m; ++i) s->A[i + (size_t)perm[j] * m] = tu_uniform(rng);
    for (int i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int j = m; j < n; ++j) sum += fabs(s->A[i + (size_t)perm[j] * m]);
        for (int k = 0; k < m; ++k) s->A[i + (size_t)perm[k] * m] = k == i ? 2.0 + sum : 0.0;
    }
    free(perm);
    tu_random(rng, m, n, s->C, m);
    tu_random_spd(rng, n, s->M, n);
    tu_random(rng, n, 1, s->f0, n);
    tu_random(rng, n, 1, q0, n);
    memset(s->b, 0, sizeof(double) * (size_t)m);
    sm_phi(0.0, q0, s->b, s); /* Phi(q0) with b = 0 */
}

static void scal_model_free(scal_model *s)
{
    free(s->A), free(s->C), free(s->b), free(s->M), free(s->f0);
}

typedef struct {
    int n, m, d;
    scal_model *model;
    cdyn_mbs *mass_mbs, *norm_mbs, *part_mbs;
    double *y0, *yp, *y, *ydot, *z0, *z1, *z, *zdot;
    int flip;
    /* baseline at y0 */
    double *M, *Q, *J, *xi, *kkt, *rhs;
    int *ipiv;
} mbs_bench;

static int run_mbs_dgesv(void *ctx)
{
    mbs_bench *b = ctx;
    return tu_bordered_solve(b->n, b->m, b->M, b->n, b->J, b->m, 1.0, b->Q, b->xi, b->kkt,
                             b->ipiv, b->rhs) != 0;
}

static int run_mbs_rhs(void *ctx)
{
    mbs_bench *b = ctx;
    return cdyn_mbs_rhs(b->mass_mbs, 0.0, b->y0, b->ydot) != CDYN_OK;
}

static int project_with(mbs_bench *b, cdyn_mbs *mbs)
{
    memcpy(b->y, b->yp, sizeof(double) * (size_t)(2 * b->n));
    return cdyn_mbs_project(mbs, 0.0, b->y) != CDYN_OK;
}

static int run_project_mass(void *ctx)
{
    mbs_bench *b = ctx;
    return project_with(b, b->mass_mbs);
}

static int run_project_minnorm(void *ctx)
{
    mbs_bench *b = ctx;
    return project_with(b, b->norm_mbs);
}

static int run_partition_rhs(void *ctx)
{
    mbs_bench *b = ctx;
    b->flip = !b->flip;
    return cdyn_mbs_partition_rhs(b->part_mbs, 0.0, b->flip ? b->z1 : b->z0, b->zdot) != CDYN_OK;
}

static cdyn_mbs *scal_mbs(scal_model *s, cdyn_mbs_metric metric)
{
    cdyn_status st;
    cdyn_mbs *mbs = cdyn_mbs_create(s->n, s->m, &st);
    if (!mbs) die("cdyn_mbs_create", cdyn_status_string(st));
    if (cdyn_mbs_set_model(mbs, sm_mass, sm_force, sm_phi, sm_jacobian, s) != CDYN_OK ||
        cdyn_mbs_set_time_terms(mbs, sm_phi_t, sm_xi) != CDYN_OK ||
        cdyn_mbs_set_projection_metric(mbs, metric) != CDYN_OK)
        die("scalable model setup", cdyn_mbs_last_error(mbs));
    return mbs;
}

/* ||Phi(q)||_inf and ||Phi_q q'||_inf at y, by the model's callbacks. */
static void residuals(const mbs_bench *b, const double *y, double *pos, double *vel)
{
    int n = b->n, m = b->m;
    double *r = xmalloc(sizeof(double) * (size_t)m), *J = xmalloc(sizeof(double) * (size_t)m * n);
    sm_phi(0.0, y, r, b->model);
    *pos = tu_vec_max_abs(m, r);
    sm_jacobian(0.0, y, J, m, b->model);
    tu_matvec(m, n, J, m, y + n, r);
    *vel = tu_vec_max_abs(m, r);
    free(r);
    free(J);
}

static void section_mbs(int n, int m, int samples, double target)
{
    if (m < 1 || m >= n) { /* partitioning needs 0 < m < n */
        printf("%4d %4d  skipped: the projection and partitioning need 0 < m < n\n", n, m);
        return;
    }
    mbs_bench b;
    memset(&b, 0, sizeof b);
    scal_model s;
    memset(&s, 0, sizeof s);
    b.n = n, b.m = m, b.d = n - m, b.model = &s;
    int ny = 2 * n, N = n + m;
    b.y0 = xmalloc(sizeof(double) * (size_t)ny);
    b.yp = xmalloc(sizeof(double) * (size_t)ny);
    b.y = xmalloc(sizeof(double) * (size_t)ny);
    b.ydot = xmalloc(sizeof(double) * (size_t)ny);
    b.z0 = xmalloc(sizeof(double) * (size_t)(2 * b.d));
    b.z1 = xmalloc(sizeof(double) * (size_t)(2 * b.d));
    b.zdot = xmalloc(sizeof(double) * (size_t)(2 * b.d));
    b.M = xmalloc(sizeof(double) * (size_t)n * n);
    b.Q = xmalloc(sizeof(double) * (size_t)n);
    b.J = xmalloc(sizeof(double) * (size_t)m * n);
    b.xi = xmalloc(sizeof(double) * (size_t)m);
    b.kkt = xmalloc(sizeof(double) * (size_t)N * N);
    b.rhs = xmalloc(sizeof(double) * (size_t)N);
    b.ipiv = xmalloc(sizeof(int) * (size_t)N);
    tu_rng rng;
    tu_rng_seed(&rng, 9090 + (unsigned)n);
    scal_model_init(&s, n, m, &rng, b.y0);
    tu_random(&rng, n, 1, b.y0 + n, n);
    b.mass_mbs = scal_mbs(&s, CDYN_PROJECT_MASS);
    b.norm_mbs = scal_mbs(&s, CDYN_PROJECT_MIN_NORM);
    b.part_mbs = scal_mbs(&s, CDYN_PROJECT_MASS);

    /* consistent y0: q0 satisfies Phi = 0 by construction of b; the
     * projection's velocity step makes q' consistent */
    if (cdyn_mbs_project(b.mass_mbs, 0.0, b.y0) != CDYN_OK)
        die("projection of the initial state", cdyn_mbs_last_error(b.mass_mbs));
    double pos, vel;
    residuals(&b, b.y0, &pos, &vel);
    if (!(pos <= 1e-10 && vel <= 1e-10)) {
        fprintf(stderr, "BUG: n = %d: initial state not consistent: |Phi| %.2e |Phi_q q'| %.2e\n",
                n, pos, vel);
        ++g_bugs;
    }
    for (int i = 0; i < ny; ++i) b.yp[i] = b.y0[i] + 1e-6 * (i % 2 ? -1.0 : 1.0);

    /* baseline data at y0 */
    sm_mass(0.0, b.y0, b.M, n, &s);
    sm_force(0.0, b.y0, b.y0 + n, b.Q, &s);
    sm_jacobian(0.0, b.y0, b.J, m, &s);
    sm_xi(0.0, b.y0, b.y0 + n, b.xi, &s);
    if (run_mbs_dgesv(&b)) die("dgesv of the scalable model", NULL);

    /* agreement and facts, outside the timed loops */
    double d_rhs = NAN, d_part = NAN, d_proj_mass = NAN, d_proj_norm = NAN;
    char note_mass[96] = "", note_norm[96] = "", note_part[96] = "";
    if (run_mbs_rhs(&b)) {
        ++g_failures;
        fprintf(stderr, "FAILED: n = %d: cdyn_mbs_rhs: %s\n", n, cdyn_mbs_last_error(b.mass_mbs));
    } else {
        d_rhs = rel_diff(n, 0, b.ydot + n, NULL, b.rhs, NULL);
        judge("mbs_rhs", n, d_rhs);
    }
    cdyn_mbs *pm[2] = {b.mass_mbs, b.norm_mbs};
    double *dp[2] = {&d_proj_mass, &d_proj_norm};
    char *np[2] = {note_mass, note_norm};
    for (int k = 0; k < 2; ++k) {
        if (project_with(&b, pm[k])) {
            ++g_failures;
            fprintf(stderr, "FAILED: n = %d: cdyn_mbs_project: %s\n", n, cdyn_mbs_last_error(pm[k]));
            continue;
        }
        cdyn_newton_report rep;
        memset(&rep, 0, sizeof rep);
        cdyn_newton_get_report(cdyn_mbs_newton(pm[k]), &rep);
        residuals(&b, b.y, &pos, &vel);
        *dp[k] = fmax(pos, vel); /* absolute residuals after the projection */
        if (!(*dp[k] <= AGREE_FAIL)) {
            fprintf(stderr, "BUG: n = %d: projection leaves |Phi| %.2e |Phi_q q'| %.2e\n", n, pos,
                    vel);
            ++g_bugs;
        }
        snprintf(np[k], 96, "Newton iterations: %d; rel.diff = max residual", rep.iterations);
    }
    if (cdyn_mbs_partition(b.part_mbs, 0.0, b.y0) != CDYN_OK ||
        cdyn_mbs_partition_gather(b.part_mbs, b.y0, b.z0) != CDYN_OK)
        die("cdyn_mbs_partition", cdyn_mbs_last_error(b.part_mbs));
    for (int i = 0; i < 2 * b.d; ++i) b.z1[i] = b.z0[i] + 1e-6 * (i % 2 ? -1.0 : 1.0);
    if (cdyn_mbs_partition_rhs(b.part_mbs, 0.0, b.z0, b.zdot) != CDYN_OK) {
        ++g_failures;
        fprintf(stderr, "FAILED: n = %d: cdyn_mbs_partition_rhs: %s\n", n,
                cdyn_mbs_last_error(b.part_mbs));
    } else {
        /* q''_ind against the bordered solve at the same (consistent) state */
        int *ind = xmalloc(sizeof(int) * (size_t)b.d);
        double *yc = xmalloc(sizeof(double) * (size_t)ny);
        double *ref = xmalloc(sizeof(double) * (size_t)b.d);
        cdyn_mbs_partition_coordinates(b.part_mbs, ind, NULL);
        if (cdyn_mbs_partition_state(b.part_mbs, 0.0, b.z0, yc) != CDYN_OK)
            die("cdyn_mbs_partition_state", cdyn_mbs_last_error(b.part_mbs));
        double dq = 0.0;
        for (int i = 0; i < ny; ++i) dq = fmax(dq, fabs(yc[i] - b.y0[i]));
        for (int i = 0; i < b.d; ++i) ref[i] = b.rhs[ind[i]];
        d_part = rel_diff(b.d, 0, b.zdot + b.d, NULL, ref, NULL);
        if (dq > 1e-10) d_part = NAN; /* not the same state: not comparable */
        else judge("partition_rhs", n, d_part);
        snprintf(note_part, sizeof note_part, "d = %d; partition event %d", b.d,
                 cdyn_mbs_partition_event(b.part_mbs));
        free(ind), free(yc), free(ref);
    }

    struct { const char *id; bu_fn fn; double diff; const char *note; } defs[] = {
        {"dgesv_mbs", run_mbs_dgesv, NAN, "cost unit: one bordered KKT solve"},
        {"mbs_rhs", run_mbs_rhs, d_rhs, "callbacks + load + KKT"},
        {"project_mass", run_project_mass, d_proj_mass, note_mass},
        {"project_minnorm", run_project_minnorm, d_proj_norm, note_norm},
        {"partition_rhs", run_partition_rhs, d_part, note_part},
    };
    enum { NDEFS = sizeof defs / sizeof defs[0] };
    bu_path paths[NDEFS];
    memset(paths, 0, sizeof paths);
    for (int k = 0; k < NDEFS; ++k) paths[k].fn = defs[k].fn, paths[k].ctx = &b;
    bu_measure(paths, NDEFS, samples, target);
    for (int k = 0; k < NDEFS; ++k) {
        g_failures += paths[k].failures;
        row r = {"mbs", defs[k].id, k ? "dgesv_mbs" : NULL, n, m, paths[k].t,
                 paths[k].t.median / paths[0].t.median, k ? 0.0 : bu_flops_bordered_lu(N), NAN,
                 defs[k].diff, paths[k].failures ? "FAILED calls in the timed loop" : defs[k].note};
        print_row(&r);
    }
    fflush(stdout);
    cdyn_mbs_free(b.mass_mbs), cdyn_mbs_free(b.norm_mbs), cdyn_mbs_free(b.part_mbs);
    scal_model_free(&s);
    free(b.y0), free(b.yp), free(b.y), free(b.ydot), free(b.z0), free(b.z1), free(b.zdot);
    free(b.M), free(b.Q), free(b.J), free(b.xi), free(b.kkt), free(b.rhs), free(b.ipiv);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_constraint", &quick, &csv_path) != 0)
        return EXIT_FAILURE;
    const int sizes[] = {3, 6, 12, 30, 100, 300};
    const int samples = quick ? 3 : 15;
    const double target = quick ? 2e-4 : 2e-3; /* seconds per sample */
    g_csv = bu_open_csv(csv_path, "bench_constraint", quick,
                        "section,n,m,path,baseline,median_s,min_s,max_s,ratio,flops,gflops,"
                        "frac_dgemm,rel_diff,note");
    double t_start = now_seconds();
    printf("cdyn %s constrained-acceleration benchmark (%s mode, %d samples)\n", cdyn_version(),
           quick ? "quick" : "full", samples);
    bu_print_machine(stdout, "  ");
    printf("\nSection T4: time per evaluation (load + formulation), median [min, max] in us; "
           "ratio = median / median of the named\nbaseline (bordered dgesv of the identical "
           "system, same run); GFLOP/s from the stated flop counts (bench_util.c);\n%%dgemm = "
           "rate / dgemm rate (n = 100, 300 only: dgemm is the large-size reference and is "
           "not measured below; above 100%% the\nflop count overestimates or this BLAS's dgemm "
           "is no ceiling, as the unblocked reference dgemm);\nrel.diff = largest relative difference of (q'', lambda) from "
           "the baseline's solution.\n");
    print_table_header();
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        int n = sizes[k], m = n == 3 ? 2 : n / 3;
        section_t4(n, m, samples, target);
    }
    printf("\nSection mbs: scalable model (Phi = A q + 0.05 C sin(q) - b); ratio = median / one "
           "bordered dgesv KKT solve of the same n, m\n(the cost unit, dgesv_mbs). The "
           "projection runs Newton iterations on Phi = 0 plus a velocity step, so its ratio\n"
           "counts KKT-solve equivalents. rel.diff: mbs_rhs and partition_rhs against the "
           "bordered solve; projections: max\n|Phi|, |Phi_q q'| after the call (absolute).\n");
    print_table_header();
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        int n = sizes[k], m = n == 3 ? 2 : n / 3;
        section_mbs(n, m, samples, target);
    }
    if (g_csv) fclose(g_csv);
    printf("\ntotal %.2f s\n", now_seconds() - t_start);
    if (g_failures || g_bugs) {
        fprintf(stderr,
                "bench_constraint: %ld failed calls, %d disagreements > %.0e: this is a bug, "
                "not a timing result\n",
                g_failures, g_bugs, AGREE_FAIL);
        printf("RESULT: %ld failed calls, %d disagreements > %.0e (see stderr)\n", g_failures,
               g_bugs, AGREE_FAIL);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
