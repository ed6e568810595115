/* Benchmark of the T1 per-step path against the baseline a user would write:
 * the bordered KKT system [M -W^T; W 0] solved by dgesv (LU of the whole
 * (n+m) matrix). Both compute v' and lambda from the same M, F, W.
 *
 * Reports, for n = 3 ... 300 and m = n/3: median, min and max time per call
 * over repeated samples, and the ratio of each cdyn path to the dgesv
 * baseline measured in the same run. Not a pass/fail test.
 *
 * The three cdyn paths are the three levels of caching (performance issue:
 * factorizations that do not change between calls are cached and reused):
 *   nullspace_factor+solve  nothing cached: cdyn_nullspace_factor (pivoted
 *                           QR of W to choose the partition, LU of W2) and
 *                           solve every call, a library without caching;
 *   nullspace_update+solve  partition cached: cdyn_nullspace_update (LU of
 *                           W2 only, partition kept) and solve;
 *   nullspace_solve         everything cached (constant W: one valve mode).
 * Each path has its own object; the four paths are timed in turn within
 * every sample (bu_measure), so a slow phase of the machine hits them alike.
 * One line per size states what each cached level saves against the
 * per-call re-plan ("vs_replan" = median / median of factor+solve).
 *
 * The machine description (uname, CPU, compiler, cdyn version, the BLAS and
 * LAPACK shared objects actually loaded) heads the output and, as '#'
 * comment lines, the CSV. Before timing, the three cdyn paths are checked
 * against the baseline's solution (1e-6 relative) and against each other
 * (same W, same partition: the cached and uncached answers must agree to
 * 1e-10 relative, printed); the exit status is non-zero only if a call
 * fails or a check fails (a bug).
 *
 * usage: bench_nullspace [--quick] [--csv FILE]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <cdyn.h>

#include "bench_util.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int n, m;
    double *M, *F, *W, *c, *vdot, *lambda;
    double *kkt, *rhs, *bottom; /* baseline workspace, allocated once */
    int *ipiv;
    cdyn_nullspace *ns;     /* factored once: everything cached */
    cdyn_nullspace *ns_upd; /* refactored by update every call */
    cdyn_nullspace *ns_fac; /* re-planned by factor every call */
} problem;

/* The naive baseline: assemble and LU-solve the bordered system. */
static void kkt_dgesv(problem *p)
{
    for (int i = 0; i < p->m; ++i) p->bottom[i] = -p->c[i];
    tu_bordered_solve(p->n, p->m, p->M, p->n, p->W, p->m, -1.0, p->F, p->bottom, p->kkt,
                      p->ipiv, p->rhs);
}

/* The timed paths (bu_fn: non-zero on a failed call). */
static int run_kkt(void *ctx)
{
    kkt_dgesv(ctx);
    return 0;
}

/* everything cached: partition and LU of W2 from the one factor at set-up */
static int run_solve(void *ctx)
{
    problem *p = ctx;
    return cdyn_nullspace_solve(p->ns, p->M, p->n, p->F, p->c, p->vdot, p->lambda) != CDYN_OK;
}

/* partition cached: W2 refactored (LU) every call */
static int run_update_solve(void *ctx)
{
    problem *p = ctx;
    return cdyn_nullspace_update(p->ns_upd, p->W, p->m, NULL) != CDYN_OK ||
           cdyn_nullspace_solve(p->ns_upd, p->M, p->n, p->F, p->c, p->vdot, p->lambda) !=
               CDYN_OK;
}

/* nothing cached: pivoted QR of W (partition) and LU of W2 every call */
static int run_factor_solve(void *ctx)
{
    problem *p = ctx;
    return cdyn_nullspace_factor(p->ns_fac, p->W, p->m) != CDYN_OK ||
           cdyn_nullspace_solve(p->ns_fac, p->M, p->n, p->F, p->c, p->vdot, p->lambda) !=
               CDYN_OK;
}

/* Largest relative difference (normwise per block: v' and lambda) of
 * (a, a + n) from (b, b + n). */
static double rel_difference(int n, int m, const double *a, const double *b)
{
    double sv = tu_vec_max_abs(n, b), sl = tu_vec_max_abs(m, b + n), worst = 0.0;
    if (!(sv > 0.0)) sv = 1.0;
    if (!(sl > 0.0)) sl = 1.0;
    for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(a[i] - b[i]) / sv);
    for (int i = 0; i < m; ++i) worst = fmax(worst, fabs(a[n + i] - b[n + i]) / sl);
    return worst;
}

/* One call of a cdyn path; (v', lambda) into out (n + m). Returns fn's code. */
static int run_into(problem *p, bu_fn fn, double *out)
{
    int code = fn(p);
    memcpy(out, p->vdot, sizeof(double) * (size_t)p->n);
    memcpy(out + p->n, p->lambda, sizeof(double) * (size_t)p->m);
    return code;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_nullspace", &quick, &csv_path) != 0)
        return EXIT_FAILURE;
    const int sizes[] = {3, 6, 12, 30, 100, 300};
    const int samples = quick ? 3 : 15;
    const double target = quick ? 2e-4 : 2e-3; /* seconds per sample and path */
    FILE *csv = bu_open_csv(csv_path, "bench_nullspace", quick,
                            "n,m,path,median_s,min_s,max_s,ratio_to_dgesv,ratio_to_replan");
    int bugs = 0;
    long failures = 0;
    printf("cdyn %s null-space benchmark (%s mode): time per call, median [min, max] over %d "
           "samples\n",
           cdyn_version(), quick ? "quick" : "full", samples);
    bu_print_machine(stdout, "  ");
    printf("caching levels: factor+solve = nothing cached (pivoted QR partition + LU of W2 per "
           "call),\n  update+solve = partition cached (LU of W2 per call), solve = partition "
           "and LU of W2 cached\n");
    printf("ratio: to kkt_dgesv; vs_replan: to nullspace_factor+solve (the per-call re-plan)\n");
    printf("%5s %4s  %-22s %12s %12s %12s %8s %9s\n", "n", "m", "path", "median [us]", "min",
           "max", "ratio", "vs_replan");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        problem p = {0};
        p.n = sizes[k];
        p.m = p.n / 3 > 0 ? p.n / 3 : 1;
        int n = p.n, m = p.m, N = n + m;
        tu_rng rng;
        tu_rng_seed(&rng, 42 + (unsigned)n);
        p.M = malloc(sizeof(double) * n * n);
        p.F = malloc(sizeof(double) * n);
        p.W = malloc(sizeof(double) * m * n);
        p.c = malloc(sizeof(double) * m);
        p.vdot = malloc(sizeof(double) * n);
        p.lambda = malloc(sizeof(double) * m);
        p.kkt = malloc(sizeof(double) * N * N);
        p.rhs = malloc(sizeof(double) * N);
        p.bottom = malloc(sizeof(double) * m);
        p.ipiv = malloc(sizeof(int) * N);
        double *out = malloc(sizeof(double) * 3 * N); /* (v', lambda) of the 3 cdyn paths */
        if (!p.M || !p.F || !p.W || !p.c || !p.vdot || !p.lambda || !p.kkt || !p.rhs ||
            !p.bottom || !p.ipiv || !out) {
            fprintf(stderr, "out of memory at n = %d\n", n);
            return EXIT_FAILURE;
        }
        tu_random_spd(&rng, n, p.M, n);
        tu_random(&rng, n, 1, p.F, n);
        tu_random(&rng, m, n, p.W, m);
        tu_random(&rng, m, 1, p.c, m);
        p.ns = cdyn_nullspace_create(n, m, NULL);
        p.ns_upd = cdyn_nullspace_create(n, m, NULL);
        p.ns_fac = cdyn_nullspace_create(n, m, NULL);
        if (!p.ns || !p.ns_upd || !p.ns_fac || cdyn_nullspace_factor(p.ns, p.W, m) != CDYN_OK ||
            cdyn_nullspace_factor(p.ns_upd, p.W, m) != CDYN_OK) {
            fprintf(stderr, "setup failed at n = %d\n", n);
            return EXIT_FAILURE;
        }

        /* agreement: each path against the dgesv baseline (1e-6), and the
         * uncached paths against the cached one (1e-10: same W, same
         * partition, so any larger difference is a bug) */
        kkt_dgesv(&p);
        double *o_solve = out, *o_upd = out + N, *o_fac = out + 2 * N;
        if (run_into(&p, run_solve, o_solve) || run_into(&p, run_update_solve, o_upd) ||
            run_into(&p, run_factor_solve, o_fac)) {
            fprintf(stderr, "BUG: n = %d: a cdyn call failed: %s%s%s\n", n,
                    cdyn_nullspace_last_error(p.ns), cdyn_nullspace_last_error(p.ns_upd),
                    cdyn_nullspace_last_error(p.ns_fac));
            return EXIT_FAILURE;
        }
        double d_base = fmax(rel_difference(n, m, o_solve, p.rhs),
                             fmax(rel_difference(n, m, o_upd, p.rhs),
                                  rel_difference(n, m, o_fac, p.rhs)));
        double d_cache = fmax(rel_difference(n, m, o_upd, o_solve),
                              rel_difference(n, m, o_fac, o_solve));
        if (!(d_base <= 1e-6)) {
            fprintf(stderr, "BUG: n = %d: cdyn differs from the dgesv baseline by %.3e\n", n,
                    d_base);
            ++bugs;
        }
        if (!(d_cache <= 1e-10)) {
            fprintf(stderr, "BUG: n = %d: cached and uncached paths differ by %.3e\n", n,
                    d_cache);
            ++bugs;
        }

        bu_path paths[4] = {{run_kkt, &p, 0, 0, {0, 0, 0}},
                            {run_factor_solve, &p, 0, 0, {0, 0, 0}},
                            {run_update_solve, &p, 0, 0, {0, 0, 0}},
                            {run_solve, &p, 0, 0, {0, 0, 0}}};
        static const char *names[4] = {"kkt_dgesv (baseline)", "nullspace_factor+solve",
                                       "nullspace_update+solve", "nullspace_solve"};
        bu_measure(paths, 4, samples, target);
        double base = paths[0].t.median, replan = paths[1].t.median;
        for (int q = 0; q < 4; ++q) {
            failures += paths[q].failures;
            const bu_timing *t = &paths[q].t;
            double ratio = t->median / base, vs = q ? t->median / replan : -1.0;
            char vs_s[16] = "-";
            if (q) snprintf(vs_s, sizeof vs_s, "%.3f", vs);
            printf("%5d %4d  %-22s %12.3f %12.3f %12.3f %8.3f %9s\n", n, m, names[q],
                   1e6 * t->median, 1e6 * t->min, 1e6 * t->max, ratio, vs_s);
            if (csv)
                fprintf(csv, "%d,%d,%s,%.9e,%.9e,%.9e,%.4f,%s\n", n, m, names[q], t->median,
                        t->min, t->max, ratio, q ? vs_s : "");
        }
        double t_upd = paths[2].t.median, t_solve = paths[3].t.median;
        printf("%5s %4s  n = %d: cached partition saves %.0f%% of a per-call re-plan, "
               "partition + W2 LU %.0f%% (%.0f%% of update+solve); cached/uncached rel. diff "
               "%.1e\n",
               "", "", n, 100.0 * (1.0 - t_upd / replan), 100.0 * (1.0 - t_solve / replan),
               100.0 * (1.0 - t_solve / t_upd), d_cache);
        cdyn_nullspace_free(p.ns);
        cdyn_nullspace_free(p.ns_upd);
        cdyn_nullspace_free(p.ns_fac);
        free(p.M); free(p.F); free(p.W); free(p.c); free(p.vdot); free(p.lambda);
        free(p.kkt); free(p.rhs); free(p.bottom); free(p.ipiv); free(out);
    }
    if (csv) fclose(csv);
    if (failures || bugs) {
        fprintf(stderr, "bench_nullspace: %ld failed calls, %d failed agreement checks: a bug\n",
                failures, bugs);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
