/* Benchmark of one constrained-acceleration evaluation (THEORY T4.3-T4.8):
 * cdyn_constraint_load() followed by one formulation, against the baseline a
 * user would write: compute s = xi - 2a Phi' - b^2 Phi, assemble the bordered
 * KKT matrix [M Phi_q^T; Phi_q 0] and solve it with dgesv (LU of the whole
 * (n+m) matrix). All paths use the same M, Q, Phi_q, Phi, Phi', xi and the
 * same Baumgarte gains (a = 1, b = 2).
 *
 * Paths: lagrange (Cholesky + pivoted QR of L^-1 Phi_q^T), reactions with
 * C = Phi_q (LU of Phi_q M^-1 C^T), pseudoinverse (SVD), penalty (Cholesky
 * of M + Phi_q^T alpha Phi_q), export (assembling the (2n+m) system A Y = B
 * only) and export + dgesv (a caller solving the exported system itself).
 *
 * Reports, for n = 3 ... 300 and m ~ n/3 (m = 2 for n = 3): median, min and
 * max time per evaluation over repeated samples, and the ratio of each path
 * to the dgesv baseline measured in the same run. Not a pass/fail test.
 *
 * usage: bench_constraint [--quick] [--csv FILE]
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

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

static const double BAUM_A = 1.0, BAUM_B = 2.0;

typedef struct {
    int n, m;
    double *M, *Q, *P, *Phi, *Phid, *xi, *h;
    double *qdd, *lambda;
    double *kkt, *rhs, *bottom; /* baseline workspace, allocated once */
    int *ipiv;
    double *A, *B; /* exported system (2n+m) */
    int *ipiv_export;
    cdyn_constraint *c;
} problem;

/* The naive baseline: stabilized right-hand side, bordered matrix, dgesv. */
static void kkt_dgesv(problem *p)
{
    for (int i = 0; i < p->m; ++i)
        p->bottom[i] = p->xi[i] - 2.0 * BAUM_A * p->Phid[i] - BAUM_B * BAUM_B * p->Phi[i];
    tu_bordered_solve(p->n, p->m, p->M, p->n, p->P, p->m, 1.0, p->Q, p->bottom, p->kkt, p->ipiv,
                      p->rhs);
}

static void load(problem *p)
{
    cdyn_constraint_load(p->c, p->M, p->n, p->Q, p->P, p->m, p->Phi, p->Phid, p->xi);
}

static void run_lagrange(problem *p)
{
    load(p);
    cdyn_constraint_lagrange(p->c, p->qdd, p->lambda);
}

static void run_reactions(problem *p)
{
    load(p);
    cdyn_constraint_reactions(p->c, p->P, p->m, p->qdd, p->lambda);
}

static void run_pseudoinverse(problem *p)
{
    load(p);
    cdyn_constraint_pseudoinverse(p->c, p->qdd, p->lambda);
}

static void run_penalty(problem *p)
{
    load(p);
    cdyn_constraint_penalty(p->c, p->qdd, p->lambda);
}

static void run_export(problem *p)
{
    int size = 2 * p->n + p->m;
    load(p);
    cdyn_constraint_export(p->c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, p->h, p->A, size, p->B);
}

static void run_export_dgesv(problem *p)
{
    int size = 2 * p->n + p->m, one = 1, info = 0;
    load(p);
    cdyn_constraint_export(p->c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, p->h, p->A, size, p->B);
    dgesv_(&size, &one, p->A, &size, p->ipiv_export, p->B, &size, &info);
}

typedef struct { double median, min, max; } timing;

enum { MAX_SAMPLES = 64 };

/* Median over `samples` samples of the mean time of `reps` calls. */
static timing measure(void (*fn)(problem *), problem *p, int samples, int reps)
{
    double t[MAX_SAMPLES];
    for (int s = 0; s < samples; ++s) {
        double t0 = now_seconds();
        for (int r = 0; r < reps; ++r) fn(p);
        t[s] = (now_seconds() - t0) / reps;
    }
    qsort(t, (size_t)samples, sizeof(double), compare_double);
    timing out = {t[samples / 2], t[0], t[samples - 1]};
    return out;
}

/* Largest relative difference of the cdyn paths from the baseline, as a
 * sanity check that all of them solved the same problem. */
static double check_agreement(problem *p)
{
    int n = p->n, m = p->m;
    kkt_dgesv(p);
    double scale_q = tu_vec_max_abs(n, p->rhs), scale_l = tu_vec_max_abs(m, p->rhs + n);
    double worst = 0.0;
    void (*paths[])(problem *) = {run_lagrange, run_reactions, run_pseudoinverse};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; ++k) {
        paths[k](p);
        for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(p->qdd[i] - p->rhs[i]) / scale_q);
        for (int i = 0; i < m; ++i)
            worst = fmax(worst, fabs(p->lambda[i] - p->rhs[n + i]) / scale_l);
    }
    return worst;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--csv FILE]\n", argv[0]);
            return EXIT_FAILURE;
        }
    }
    const int sizes[] = {3, 6, 12, 30, 100, 300};
    const int samples = quick ? 3 : 15;
    const double target = quick ? 2e-4 : 2e-3; /* seconds per sample */
    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "cannot open %s\n", csv_path);
            return EXIT_FAILURE;
        }
        fprintf(csv, "n,m,path,median_s,min_s,max_s,ratio_to_dgesv\n");
    }
    printf("cdyn %s constrained-acceleration benchmark (%s mode): time per evaluation "
           "(load + formulation), median [min, max]\n",
           cdyn_version(), quick ? "quick" : "full");
    printf("%5s %4s  %-24s %12s %12s %12s %8s\n", "n", "m", "path", "median [us]", "min", "max",
           "ratio");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        problem p = {0};
        p.n = sizes[k];
        p.m = p.n == 3 ? 2 : p.n / 3;
        int n = p.n, m = p.m, N = n + m, size = 2 * n + m;
        tu_rng rng;
        tu_rng_seed(&rng, 4242 + (unsigned)n);
        p.M = malloc(sizeof(double) * (size_t)n * n);
        p.Q = malloc(sizeof(double) * (size_t)n);
        p.P = malloc(sizeof(double) * (size_t)m * n);
        p.Phi = malloc(sizeof(double) * (size_t)m);
        p.Phid = malloc(sizeof(double) * (size_t)m);
        p.xi = malloc(sizeof(double) * (size_t)m);
        p.h = malloc(sizeof(double) * (size_t)n);
        p.qdd = malloc(sizeof(double) * (size_t)n);
        p.lambda = malloc(sizeof(double) * (size_t)m);
        p.kkt = malloc(sizeof(double) * (size_t)N * N);
        p.rhs = malloc(sizeof(double) * (size_t)N);
        p.bottom = malloc(sizeof(double) * (size_t)m);
        p.ipiv = malloc(sizeof(int) * (size_t)N);
        p.A = malloc(sizeof(double) * (size_t)size * size);
        p.B = malloc(sizeof(double) * (size_t)size);
        p.ipiv_export = malloc(sizeof(int) * (size_t)size);
        if (!p.M || !p.Q || !p.P || !p.Phi || !p.Phid || !p.xi || !p.h || !p.qdd || !p.lambda ||
            !p.kkt || !p.rhs || !p.ipiv || !p.A || !p.B || !p.ipiv_export) {
            fprintf(stderr, "out of memory at n = %d\n", n);
            return EXIT_FAILURE;
        }
        tu_random_spd(&rng, n, p.M, n);
        tu_random(&rng, n, 1, p.Q, n);
        tu_random(&rng, m, n, p.P, m);
        tu_random(&rng, m, 1, p.Phi, m);
        tu_random(&rng, m, 1, p.Phid, m);
        tu_random(&rng, m, 1, p.xi, m);
        tu_random(&rng, n, 1, p.h, n);
        cdyn_status st;
        p.c = cdyn_constraint_create(n, m, &st);
        if (!p.c || cdyn_constraint_set_baumgarte(p.c, BAUM_A, BAUM_B) != CDYN_OK) {
            fprintf(stderr, "setup failed at n = %d\n", n);
            return EXIT_FAILURE;
        }
        double agree = check_agreement(&p);
        if (!(agree <= 1e-8))
            fprintf(stderr, "warning: n = %d: cdyn paths differ from dgesv by %.3e\n", n, agree);

        struct { const char *name; void (*fn)(problem *); } paths[] = {
            {"kkt_dgesv (baseline)", kkt_dgesv},
            {"load+lagrange", run_lagrange},
            {"load+reactions(C=Phi_q)", run_reactions},
            {"load+pseudoinverse", run_pseudoinverse},
            {"load+penalty", run_penalty},
            {"load+export", run_export},
            {"load+export+dgesv", run_export_dgesv},
        };
        double base = 0.0;
        for (size_t q = 0; q < sizeof paths / sizeof paths[0]; ++q) {
            /* repetitions so one sample lasts about `target` seconds */
            paths[q].fn(&p); /* warm-up */
            double t0 = now_seconds();
            paths[q].fn(&p);
            double once = now_seconds() - t0;
            int reps = (int)(target / (once > 1e-8 ? once : 1e-8));
            if (reps < 1) reps = 1;
            timing t = measure(paths[q].fn, &p, samples, reps);
            if (q == 0) base = t.median;
            double ratio = t.median / base;
            printf("%5d %4d  %-24s %12.3f %12.3f %12.3f %8.3f\n", n, m, paths[q].name,
                   1e6 * t.median, 1e6 * t.min, 1e6 * t.max, ratio);
            if (csv)
                fprintf(csv, "%d,%d,%s,%.9e,%.9e,%.9e,%.4f\n", n, m, paths[q].name, t.median,
                        t.min, t.max, ratio);
        }
        fflush(stdout);
        cdyn_constraint_free(p.c);
        free(p.M); free(p.Q); free(p.P); free(p.Phi); free(p.Phid); free(p.xi); free(p.h);
        free(p.qdd); free(p.lambda); free(p.kkt); free(p.rhs); free(p.bottom); free(p.ipiv);
        free(p.A); free(p.B); free(p.ipiv_export);
    }
    if (csv) fclose(csv);
    return EXIT_SUCCESS;
}
