/* Benchmark: cdyn_sparse_dae_rhs on hydraulic grids (tests/hydraulic_grid.h)
 * of k x k junctions, k = 10, 30, 100 (quick: 10, 30), n = 3 k^2 - 2 k + ...
 * states, against a baseline measured in the same run on the same data:
 * the least one converged Newton solve with KLU costs written by hand (the
 * model's F and dF/dv at the state, the block gathered, klu_refactor with
 * the kept pivots and two klu_solve: the Newton correction and the
 * algebraic rates), with no equilibration, rank test, certificate or check.
 * Each timed call is one right-hand side at a state that moves along the
 * trajectory (an Euler step of 1 us per call), as an integrator's stages do.
 * Reported: median [min, max] per call, the ratio to the baseline and the
 * time exponent against the previous size. Ratios, not pass/fail.
 *
 * A third row per size times the rank-revealing factorization that
 * cdyn_sparse_dae takes where the block is singular (src/sparse/rank_qr.h):
 * the same grid with one resistive pipe a closed valve at zero flow (its
 * row of the block vanishes), one SuiteSparseQR factorization (allocating,
 * with the condition estimate of its kept triangle) and one apply, against
 * the same hand KLU step. */
#include <cdyn/sparse_dae.h>

#include "bench_util.h"
#include "hydraulic_grid.h"
#include "rank_qr.h"

#include <suitesparse/klu.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    grid g;
    cdyn_sparse_dae *sd;
    int nd, q, *integrated, *algebraic, *position;
    double *y, *ydot, *v, *F, *values;
    /* the baseline's block: A by columns with the index of each value */
    int *a_start, *a_row, *a_src;
    double *a_value, *w;
    /* the block with a closed valve at zero flow, and its rank-revealing QR */
    double *a_closed;
    cdyn__rank_qr rank_qr;
    klu_common common;
    klu_symbolic *symbolic;
    klu_numeric *numeric;
} bench_case;

static int run_cdyn(void *ctx)
{
    bench_case *c = ctx;
    if (cdyn_sparse_dae_rhs(c->sd, 0.0, c->y, c->ydot) != CDYN_OK) return 1;
    for (int l = 0; l < c->nd; ++l) c->y[l] += 1e-6 * c->ydot[l];
    return 0;
}

static int run_hand(void *ctx)
{
    bench_case *c = ctx;
    grid_force(0.0, c->v, c->F, &c->g);
    grid_jacobian(0.0, c->v, c->values, &c->g);
    for (int e = 0; e < c->a_start[c->q]; ++e) c->a_value[e] = c->values[c->a_src[e]];
    if (!klu_refactor(c->a_start, c->a_row, c->a_value, c->symbolic, c->numeric, &c->common))
        return 1;
    for (int k = 0; k < c->q; ++k) c->w[k] = c->F[c->algebraic[k]];
    klu_solve(c->symbolic, c->numeric, c->q, 1, c->w, &c->common);
    klu_solve(c->symbolic, c->numeric, c->q, 1, c->w, &c->common);
    return 0;
}

static int run_rank_qr(void *ctx)
{
    bench_case *c = ctx;
    double rcond;
    int rank = cdyn__rank_qr_factor(&c->rank_qr, c->a_closed, 1e-10, &rcond);
    if (rank != c->q - 1) return 1;
    for (int k = 0; k < c->q; ++k) c->w[k] = c->F[c->algebraic[k]];
    cdyn__rank_qr_apply(&c->rank_qr, c->w, c->w);
    return 0;
}

/* The block at v with pipe grid_set_valve's valve closed at zero flow, and
 * the rank-revealing QR's set-up on its pattern. */
static void closed_block(bench_case *c)
{
    grid *g = &c->g;
    int e = grid_set_valve(g, 0.0), count = c->a_start[c->q];
    double flow = c->v[e];
    c->v[e] = 0.0;
    grid_jacobian(0.0, c->v, c->values, g);
    c->v[e] = flow;
    g->valve = -1;
    c->a_closed = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
    for (int x = 0; x < count; ++x) c->a_closed[x] = c->values[c->a_src[x]];
    /* equilibrated as cdyn_sparse_dae does before it (row maxima, then
     * column maxima; here by plain division) */
    double *row_max = calloc((size_t)c->q, sizeof(double));
    for (int x = 0; x < count; ++x)
        row_max[c->a_row[x]] = fmax(row_max[c->a_row[x]], fabs(c->a_closed[x]));
    for (int x = 0; x < count; ++x)
        if (row_max[c->a_row[x]] > 0.0) c->a_closed[x] /= row_max[c->a_row[x]];
    for (int j = 0; j < c->q; ++j) {
        double largest = 0.0;
        for (int x = c->a_start[j]; x < c->a_start[j + 1]; ++x)
            largest = fmax(largest, fabs(c->a_closed[x]));
        for (int x = c->a_start[j]; x < c->a_start[j + 1] && largest > 0.0; ++x)
            c->a_closed[x] /= largest;
    }
    free(row_max);
    if (!cdyn__rank_qr_init(&c->rank_qr, c->q, c->a_start, c->a_row)) {
        fprintf(stderr, "bench_sparse_dae: out of memory\n");
        exit(EXIT_FAILURE);
    }
}

/* The algebraic block's pattern for the baseline (massless rows and columns). */
static void hand_block(bench_case *c)
{
    grid *g = &c->g;
    int count = 0;
    c->a_start = calloc((size_t)c->q + 1, sizeof(int));
    c->a_row = malloc(sizeof(int) * (size_t)g->nnz);
    c->a_src = malloc(sizeof(int) * (size_t)g->nnz);
    c->a_value = malloc(sizeof(double) * (size_t)g->nnz);
    c->w = malloc(sizeof(double) * (size_t)c->q);
    for (int k = 0; k < c->q; ++k) {
        int j = c->algebraic[k];
        for (int e = g->colptr[j]; e < g->colptr[j + 1]; ++e)
            if (g->mass[g->rowind[e]] == 0.0) {
                c->a_row[count] = c->position[g->rowind[e]];
                c->a_src[count++] = e;
            }
        c->a_start[k + 1] = count;
    }
    klu_defaults(&c->common);
    c->symbolic = klu_analyze(c->q, c->a_start, c->a_row, &c->common);
    grid_jacobian(0.0, c->v, c->values, g);
    for (int e = 0; e < count; ++e) c->a_value[e] = c->values[c->a_src[e]];
    c->numeric = klu_factor(c->a_start, c->a_row, c->a_value, c->symbolic, &c->common);
    if (!c->symbolic || !c->numeric) {
        fprintf(stderr, "bench_sparse_dae: KLU failed on the baseline's block\n");
        exit(EXIT_FAILURE);
    }
}

static void case_init(bench_case *c, int k)
{
    memset(c, 0, sizeof *c);
    grid_init(&c->g, k);
    grid *g = &c->g;
    cdyn_status st;
    c->sd = cdyn_sparse_dae_create(g->n, g->mass, g->colptr, g->rowind, &st);
    if (!c->sd || cdyn_sparse_dae_set_model(c->sd, grid_force, grid_jacobian, grid_time, g)) {
        fprintf(stderr, "bench_sparse_dae: set-up failed: %s\n", cdyn_status_string(st));
        exit(EXIT_FAILURE);
    }
    c->nd = cdyn_sparse_dae_ode_size(c->sd);
    c->q = g->n - c->nd;
    c->integrated = malloc(sizeof(int) * (size_t)c->nd);
    c->algebraic = malloc(sizeof(int) * (size_t)c->q);
    c->position = malloc(sizeof(int) * (size_t)g->n);
    cdyn_sparse_dae_split_states(c->sd, c->integrated, c->algebraic);
    for (int l = 0; l < c->nd; ++l) c->position[c->integrated[l]] = l;
    for (int k2 = 0; k2 < c->q; ++k2) c->position[c->algebraic[k2]] = k2;
    c->v = malloc(sizeof(double) * (size_t)g->n);
    c->F = malloc(sizeof(double) * (size_t)g->n);
    c->values = malloc(sizeof(double) * (size_t)g->nnz);
    c->y = malloc(sizeof(double) * (size_t)c->nd);
    c->ydot = malloc(sizeof(double) * (size_t)c->nd);
    grid_guess(g, c->v);
    if (cdyn_sparse_dae_consistent(c->sd, 0.0, c->v) != CDYN_OK) {
        fprintf(stderr, "bench_sparse_dae: %s\n", cdyn_sparse_dae_last_error(c->sd));
        exit(EXIT_FAILURE);
    }
    for (int l = 0; l < c->nd; ++l) c->y[l] = c->v[c->integrated[l]];
    hand_block(c);
    closed_block(c);
}

static void case_free(bench_case *c)
{
    klu_free_numeric(&c->numeric, &c->common);
    klu_free_symbolic(&c->symbolic, &c->common);
    cdyn_sparse_dae_free(c->sd);
    free(c->integrated), free(c->algebraic), free(c->position), free(c->v), free(c->F);
    free(c->values), free(c->y), free(c->ydot), free(c->a_start), free(c->a_row);
    free(c->a_src), free(c->a_value), free(c->w), free(c->a_closed);
    cdyn__rank_qr_free(&c->rank_qr);
    grid_free(&c->g);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *csv_path = NULL;
    if (bu_parse_args(argc, argv, "bench_sparse_dae", &quick, &csv_path) != 0) return 1;
    FILE *csv = bu_open_csv(csv_path, "bench_sparse_dae", quick,
                            "k,n,q,path,median_s,min_s,max_s,ratio,exponent");
    printf("cdyn %s sparse DAE benchmark (%s mode): one right-hand side per call on a k x k "
           "hydraulic grid; ratio = path / the hand-written KLU step of the same run\n",
           cdyn_version(), quick ? "quick" : "full");
    bu_print_machine(stdout, "  ");
    printf("  %5s %7s %7s  %-32s %12s %24s %7s %9s\n", "k", "n", "q", "path", "median [us]",
           "[min, max]", "ratio", "exponent");
    static const int sizes[] = {10, 30, 100};
    int count = quick ? 2 : 3;
    double previous_n = 0.0, previous_t[2] = {0.0, 0.0};
    for (int s = 0; s < count; ++s) {
        bench_case c;
        case_init(&c, sizes[s]);
        bu_path paths[3] = {{run_hand, &c, 0, 0, {0, 0, 0}},
                            {run_cdyn, &c, 0, 0, {0, 0, 0}},
                            {run_rank_qr, &c, 0, 0, {0, 0, 0}}};
        bu_measure(paths, 3, quick ? 3 : 11, quick ? 2e-3 : 0.2);
        static const char *names[3] = {"hand KLU step (baseline)", "cdyn_sparse_dae_rhs",
                                       "rank-revealing QR, closed valve"};
        for (int p = 0; p < 3; ++p) {
            const bu_timing *t = &paths[p].t;
            double ratio = t->median / paths[0].t.median;
            char exponent[16] = "-";
            if (p >= 1 && previous_n > 0.0)
                snprintf(exponent, sizeof exponent, "%.2f",
                         log(t->median / previous_t[p - 1]) / log(c.g.n / previous_n));
            printf("  %5d %7d %7d  %-32s %12.2f [%10.2f, %10.2f] %7.2f %9s%s\n", sizes[s], c.g.n,
                   c.q, names[p], 1e6 * t->median, 1e6 * t->min, 1e6 * t->max, ratio, exponent,
                   paths[p].failures ? "  FAILED" : "");
            if (csv)
                fprintf(csv, "%d,%d,%d,\"%s\",%.6e,%.6e,%.6e,%.4f,%s\n", sizes[s], c.g.n, c.q,
                        names[p], t->median, t->min, t->max, ratio, exponent);
        }
        previous_n = c.g.n;
        previous_t[0] = paths[1].t.median;
        previous_t[1] = paths[2].t.median;
        printf("  (KLU pivotings in all: %ld)\n", cdyn_sparse_dae_pivotings(c.sd));
        case_free(&c);
    }
    if (csv) fclose(csv);
    return 0;
}
