/* Benchmark of the T1 per-step path against the baseline a user would write:
 * the bordered KKT system [M -W^T; W 0] solved by dgesv (LU of the whole
 * (n+m) matrix). Both compute v' and lambda from the same M, F, W.
 *
 * Reports, for n = 3 ... 300 and m = n/3: median, min and max time per call
 * over repeated samples, and the ratio of each cdyn path to the dgesv
 * baseline measured in the same run. Not a pass/fail test.
 *
 * The machine description (uname, CPU, compiler, cdyn version, the BLAS and
 * LAPACK shared objects actually loaded) heads the output and, as '#'
 * comment lines, the CSV. Before timing, both cdyn paths are checked
 * against the baseline's solution; the exit status is non-zero only if a
 * call fails or they differ by more than 1e-6 relative (a bug).
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
    cdyn_nullspace *ns;
} problem;

/* The naive baseline: assemble and LU-solve the bordered system. */
static void kkt_dgesv(problem *p)
{
    for (int i = 0; i < p->m; ++i) p->bottom[i] = -p->c[i];
    tu_bordered_solve(p->n, p->m, p->M, p->n, p->W, p->m, -1.0, p->F, p->bottom, p->kkt,
                      p->ipiv, p->rhs);
}

static long g_failures = 0; /* non-OK statuses of the cdyn calls */

static void cdyn_solve(problem *p)
{
    if (cdyn_nullspace_solve(p->ns, p->M, p->n, p->F, p->c, p->vdot, p->lambda) != CDYN_OK)
        ++g_failures;
}

static void cdyn_update_solve(problem *p)
{
    if (cdyn_nullspace_update(p->ns, p->W, p->m, NULL) != CDYN_OK ||
        cdyn_nullspace_solve(p->ns, p->M, p->n, p->F, p->c, p->vdot, p->lambda) != CDYN_OK)
        ++g_failures;
}

/* Largest relative difference of (v', lambda) of a cdyn path from the
 * baseline's solution in p->rhs. */
static double difference(problem *p, void (*fn)(problem *))
{
    int n = p->n, m = p->m;
    fn(p);
    double sv = tu_vec_max_abs(n, p->rhs), sl = tu_vec_max_abs(m, p->rhs + n), worst = 0.0;
    if (!(sv > 0.0)) sv = 1.0;
    if (!(sl > 0.0)) sl = 1.0;
    for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(p->vdot[i] - p->rhs[i]) / sv);
    for (int i = 0; i < m; ++i) worst = fmax(worst, fabs(p->lambda[i] - p->rhs[n + i]) / sl);
    return worst;
}

typedef struct { double median, min, max; } timing;

/* Median over `samples` samples of the mean time of `reps` calls. */
static timing measure(void (*fn)(problem *), problem *p, int samples, int reps)
{
    double t[64];
    for (int s = 0; s < samples; ++s) {
        double t0 = now_seconds();
        for (int r = 0; r < reps; ++r) fn(p);
        t[s] = (now_seconds() - t0) / reps;
    }
    qsort(t, (size_t)samples, sizeof(double), compare_double);
    timing out = {t[samples / 2], t[0], t[samples - 1]};
    return out;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    }
    const int sizes[] = {3, 6, 12, 30, 100, 300};
    const int samples = quick ? 3 : 15;
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv_path && !csv) {
        fprintf(stderr, "cannot open %s\n", csv_path);
        return EXIT_FAILURE;
    }
    if (csv) {
        fprintf(csv, "# cdyn bench_nullspace (%s mode)\n", quick ? "quick" : "full");
        bu_print_machine(csv, "# ");
        fprintf(csv, "n,m,path,median_s,min_s,max_s,ratio_to_dgesv\n");
    }
    int bugs = 0;
    printf("cdyn %s null-space benchmark (%s mode): time per call, median [min, max]\n",
           cdyn_version(), quick ? "quick" : "full");
    bu_print_machine(stdout, "  ");
    printf("%5s %4s  %-22s %12s %12s %12s %8s\n", "n", "m", "path", "median [us]", "min",
           "max", "ratio");
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
        tu_random_spd(&rng, n, p.M, n);
        tu_random(&rng, n, 1, p.F, n);
        tu_random(&rng, m, n, p.W, m);
        tu_random(&rng, m, 1, p.c, m);
        p.ns = cdyn_nullspace_create(n, m, NULL);
        if (!p.ns || cdyn_nullspace_factor(p.ns, p.W, m) != CDYN_OK) {
            fprintf(stderr, "setup failed at n = %d\n", n);
            return EXIT_FAILURE;
        }
        kkt_dgesv(&p);
        double d1 = difference(&p, cdyn_solve), d2 = difference(&p, cdyn_update_solve);
        if (!(fmax(d1, d2) <= 1e-6)) {
            fprintf(stderr, "BUG: n = %d: cdyn differs from the dgesv baseline by %.3e, %.3e\n",
                    n, d1, d2);
            ++bugs;
        }
        /* repetitions so one sample lasts about 2 ms (0.2 ms in quick mode) */
        double t0 = now_seconds();
        kkt_dgesv(&p);
        double once = now_seconds() - t0;
        int reps = (int)((quick ? 2e-4 : 2e-3) / (once > 1e-8 ? once : 1e-8));
        if (reps < 1) reps = 1;
        struct { const char *name; void (*fn)(problem *); } paths[] = {
            {"kkt_dgesv (baseline)", kkt_dgesv},
            {"nullspace_solve", cdyn_solve},
            {"nullspace_update+solve", cdyn_update_solve},
        };
        double base = 0.0;
        for (size_t q = 0; q < sizeof paths / sizeof paths[0]; ++q) {
            timing t = measure(paths[q].fn, &p, samples, reps);
            if (q == 0) base = t.median;
            double ratio = t.median / base;
            printf("%5d %4d  %-22s %12.3f %12.3f %12.3f %8.3f\n", n, m, paths[q].name,
                   1e6 * t.median, 1e6 * t.min, 1e6 * t.max, ratio);
            if (csv)
                fprintf(csv, "%d,%d,%s,%.9e,%.9e,%.9e,%.4f\n", n, m, paths[q].name, t.median,
                        t.min, t.max, ratio);
        }
        cdyn_nullspace_free(p.ns);
        free(p.M); free(p.F); free(p.W); free(p.c); free(p.vdot); free(p.lambda);
        free(p.kkt); free(p.rhs); free(p.bottom); free(p.ipiv);
    }
    if (csv) fclose(csv);
    if (g_failures || bugs) {
        fprintf(stderr, "bench_nullspace: %ld failed calls, %d disagreements > 1e-6: a bug\n",
                g_failures, bugs);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
