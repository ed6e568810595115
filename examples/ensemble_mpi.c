/*
 * ensemble_mpi.c - a Monte Carlo study over valve timings, run as an MPI
 * ensemble: every rank builds its own network and cdyn_network object (cdyn
 * objects are never shared between processes or threads) and runs its
 * share of the variants; rank 0 gathers the results (docs/ensembles.md).
 *
 * The model is the looped water network of examples/water_network.c
 * (examples/water_model.h) on a 16 x 16 grid (482 pipes, 256 junctions, SI
 * units, default settings). Variant v closes the valve (to 10 % of its
 * area) starting at 3 s over a duration T_v drawn log-uniformly from
 * [0.1, 2] s by a fixed generator, so the set of variants does not depend
 * on the number of ranks; the result of a variant is the largest pressure
 * rise at the valve junction over the pressure just before closing.
 * Variants go to ranks round-robin (v % size); MPI_Reduce sums the result
 * arrays (each entry is written by exactly one rank) into rank 0.
 *
 * Checks on rank 0 (exit status 1 if one fails, on every rank):
 *  - every variant ran with CDYN_OK;
 *  - physics: sorted by closing duration, the surge does not grow as the
 *    closing gets slower (a rigid column's surge is about its inertance
 *    times the flow change over the closing time);
 *  - the ensemble is reproducible: rank 0 reruns the variant that the
 *    highest rank computed and gets the same number to the last bit.
 *
 * usage: mpirun -np 2 ensemble_mpi [variants]   (default 16; also runs as a
 * single process without mpirun)
 */
#include "water_model.h"

#include <mpi.h>

#define DT 5e-3
#define T_START 3.0

/* The closing duration of variant v: log-uniform in [0.1, 2] s. */
static double duration(int v)
{
    unsigned long long x = 0x9E3779B97F4A7C15ULL * (unsigned long long)(v + 1);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    double u = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
    return 0.1 * pow(20.0, u);
}

/* Run variant v; the surge in Pa, or NAN if a call failed. */
static double run_variant(int v)
{
    network net;
    sparse_run r;
    double surge = NAN;
    if (!build(&net, 16)) return NAN;
    net.t_close = T_START;
    net.closing = duration(v);
    double *vbar = NULL, *work = NULL;
    if (!open_sparse(&r, &net)) goto done;
    vbar = malloc(sizeof(double) * (size_t)r.d);
    work = malloc(sizeof(double) * 5 * (size_t)r.d);
    if (!vbar || !work || !start_state(&r, vbar)) goto done;
    double before = 0.0, peak = -INFINITY, t_end = T_START + net.closing + 0.5;
    int steps = (int)ceil(t_end / DT);
    for (int s = 0; s <= steps; ++s) {
        double t = s * DT;
        if (!sparse_rhs(&r, t, vbar, work)) goto done;
        double p = r.p[net.valve_node];
        if (t < T_START) before = p;
        else peak = fmax(peak, p);
        if (s < steps && !rk4(sparse_rhs_cb, &r, t, DT, r.d, vbar, work)) goto done;
    }
    surge = peak - before;
done:
    free(vbar);
    free(work);
    close_sparse(&r);
    release(&net);
    return surge;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int variants = argc > 1 ? atoi(argv[1]) : 16;
    if (variants < 2 || variants > 1000) {
        if (rank == 0) fprintf(stderr, "usage: ensemble_mpi [variants], 2 <= variants <= 1000\n");
        MPI_Finalize();
        return 2;
    }
    double *mine = calloc((size_t)variants, sizeof(double));
    double *all = calloc((size_t)variants, sizeof(double));
    int my_failures = 0, failures = 0;
    double t0 = MPI_Wtime();
    for (int v = rank; v < variants; v += size) {
        mine[v] = run_variant(v);
        if (!isfinite(mine[v])) my_failures++;
    }
    double my_time = MPI_Wtime() - t0, longest = 0.0;
    MPI_Reduce(mine, all, variants, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&my_failures, &failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&my_time, &longest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int failed = 0;
    if (rank == 0) {
        printf("%d variants on %d rank%s, %.2f s (slowest rank)\n", variants, size,
               size > 1 ? "s" : "", longest);
        /* sort the variants by closing duration (insertion sort: few) */
        int *order = malloc(sizeof(int) * (size_t)variants);
        for (int v = 0; v < variants; ++v) {
            int i = v;
            while (i > 0 && duration(order[i - 1]) > duration(v)) {
                order[i] = order[i - 1];
                --i;
            }
            order[i] = v;
        }
        printf("%8s %8s %14s %14s\n", "variant", "rank", "closing [s]", "surge [bar]");
        for (int i = 0; i < variants; ++i) {
            int v = order[i];
            printf("%8d %8d %14.3f %14.4f\n", v, v % size, duration(v), all[v] / 1e5);
        }
        if (failures) {
            printf("FAIL: %d variants failed\n", failures);
            failed = 1;
        }
        for (int i = 1; i < variants; ++i)
            if (!(all[order[i]] <= all[order[i - 1]] * (1.0 + 1e-9))) {
                printf("FAIL: a slower closing (%.3f s) gave a larger surge than %.3f s\n",
                       duration(order[i]), duration(order[i - 1]));
                failed = 1;
            }
        int last = variants - 1; /* a variant of the highest rank that has one */
        while (last % size != (size - 1 < variants ? size - 1 : 0)) --last;
        double again = run_variant(last);
        printf("variant %d rerun on rank 0: %s (%.17g Pa, rank %d gave %.17g Pa)\n", last,
               again == all[last] ? "identical" : "DIFFERENT", again, last % size, all[last]);
        if (again != all[last]) failed = 1;
        printf(failed ? "ensemble_mpi: FAILED\n" : "ensemble_mpi: all checks passed\n");
        free(order);
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(mine);
    free(all);
    MPI_Finalize();
    return failed;
}
