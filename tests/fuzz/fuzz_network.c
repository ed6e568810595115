/* libFuzzer harness: cdyn_network (optional cdyn_sparse) with a decoded
 * pattern (well formed or not: column counts and row indices straight from
 * the input), decoded blocks of M, values and units (states S, equations
 * R: W -> R W S, M -> S M S, F -> S F, g -> R g). Checks that a
 * malformed pattern is refused, that nothing is written past the outputs,
 * and that the tree's indices are in range. */
#include <cdyn/network.h>

#include "fuzz_input.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int n = fuzz_size(&in, 1, 12), m = fuzz_size(&in, 0, 12);
    cdyn_status st;
    if (n < 1 || n > 12 || m < 0 || m > 12) { /* hostile sizes: refused */
        if (cdyn_network_create(n, m, NULL, NULL, NULL, 0, &st) || st != CDYN_ERR_ARG) abort();
        return 0;
    }
    int colptr[13], rowind[12 * 12 + 1], blocks[12], nblocks = 0;
    colptr[0] = 0;
    for (int k = 0; k < n; ++k) { /* 0..3 entries a column, rows as decoded */
        int count = fuzz_byte(&in) % 4;
        colptr[k + 1] = colptr[k];
        for (int c = 0; c < count && colptr[k + 1] < 12 * 12; ++c) {
            uint8_t b = fuzz_byte(&in);
            rowind[colptr[k + 1]++] = b == 0xFF ? -1 : (int)(b % (unsigned)(m + 1));
        }
    }
    uint8_t opts = fuzz_byte(&in);
    if (opts & 1) { /* blocks from the input (sizes may not sum to n) */
        for (int left = n; left > 0 && nblocks < 12;) {
            int b = 1 + fuzz_byte(&in) % 3;
            blocks[nblocks++] = (opts & 2) ? b : (b < left ? b : left);
            left -= b;
        }
    }
    cdyn_network *net = cdyn_network_create(n, m, colptr, rowind, (opts & 1) ? blocks : NULL,
                                            nblocks, &st);
    if (!net) return 0; /* a malformed pattern is refused */
    long nmass = cdyn_network_mass_values(net), nnz = cdyn_network_nonzeros(net);
    double *M = malloc(sizeof(double) * (size_t)(nmass + 1));
    double *W = malloc(sizeof(double) * (size_t)(nnz + 1));
    double *F = malloc(sizeof(double) * (size_t)n), *g = malloc(sizeof(double) * (size_t)(m + 1));
    double *R = malloc(sizeof(double) * (size_t)(m + 1)), *S = malloc(sizeof(double) * (size_t)n);
    double *vdot = malloc(sizeof(double) * (size_t)(n + FUZZ_GUARD));
    double *lambda = malloc(sizeof(double) * (size_t)(m + FUZZ_GUARD));
    double *v = malloc(sizeof(double) * (size_t)(n + FUZZ_GUARD));
    int *rows = malloc(sizeof(int) * (size_t)(m + 1));
    int *indep = malloc(sizeof(int) * (size_t)(n + 1)), *dep = malloc(sizeof(int) * (size_t)(m + 1));
    fuzz_fill(&in, M, (size_t)nmass);
    fuzz_fill(&in, W, (size_t)nnz);
    fuzz_fill(&in, F, (size_t)n);
    fuzz_fill(&in, g, (size_t)m);
    fuzz_fill(&in, v, (size_t)n);
    fuzz_scales(&in, R, m);
    fuzz_scales(&in, S, n);
    if (opts & 4) { /* make the mass blocks symmetric positive definite-ish */
        for (long i = 0; i < nmass; ++i) M[i] = fabs(M[i]) + 1.0;
    }
    /* units: W_ik -> R_i W_ik S_k; M (diagonal case only) -> S M S */
    for (int k = 0; k < n; ++k)
        for (int p = colptr[k]; p < colptr[k + 1]; ++p) W[p] *= R[rowind[p]] * S[k];
    if (!(opts & 1))
        for (int k = 0; k < n; ++k) M[k] *= S[k] * S[k];
    fuzz_scale_vector(F, n, S);
    fuzz_scale_vector(g, m, R);
    fuzz_guard_set(vdot, (size_t)n);
    fuzz_guard_set(lambda, (size_t)m);
    fuzz_guard_set(v, (size_t)n);
    if (opts & 32) cdyn_network_set_allow_redundant(net, 1);
    st = cdyn_network_load(net, M, W);
    if (cdyn_network_redundant_rows(net, rows) > m) abort();
    st = cdyn_network_solve(net, F, (opts & 8) ? g : NULL, vdot, lambda);
    fuzz_ok_finite(fuzz_ok_finite(st, vdot, (size_t)n), lambda, (size_t)m);
    if (cdyn_network_partition(net, indep, dep) >= 0)
        for (int i = 0; i < m; ++i)
            if (dep[i] < 0 || dep[i] >= n) abort();
    fuzz_ok_finite(cdyn_network_complete(net, v, (opts & 16) ? g : NULL), v, (size_t)n);
    cdyn_network_solve(net, F, g, F, NULL); /* in place */
    if (!fuzz_guard_ok(vdot, (size_t)n) || !fuzz_guard_ok(lambda, (size_t)m) ||
        !fuzz_guard_ok(v, (size_t)n))
        abort(); /* an out-of-bounds write */
    (void)st;
    cdyn_network_free(net);
    free(M); free(W); free(F); free(g); free(R); free(S); free(vdot); free(lambda); free(v);
    free(rows); free(indep); free(dep);
    return 0;
}
