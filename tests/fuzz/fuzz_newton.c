/* libFuzzer harness: cdyn_newton_step on decoded J, G, and cdyn_newton_solve
 * on a decoded polynomial system (signed squares included), both in decoded
 * units: equations scaled by R, unknowns x = S x~ (J -> R J S). */
#include <cdyn.h>

#include "fuzz_input.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct { int k, p; double coef[3 * 8 * 8 + 8]; } poly_system;

/* G_i = c_i + sum_j a_ij x_j + b_ij x_j|x_j| */
static int residual(const double *x, double *G, void *user)
{
    const poly_system *s = user;
    for (int i = 0; i < s->k; ++i) {
        double g = s->coef[i];
        for (int j = 0; j < s->p; ++j) {
            g += s->coef[8 + i * s->p + j] * x[j];
            g += s->coef[8 + 64 + i * s->p + j] * x[j] * fabs(x[j]);
        }
        G[i] = g;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int k = fuzz_size(&in, 1, 8), p = fuzz_size(&in, 1, 8);
    cdyn_status st;
    cdyn_newton *nt = cdyn_newton_create(k, p, &st);
    if (!nt) return 0;
    if (k > 8 || p > 8) { /* a hostile size the library accepted: it must also free it */
        cdyn_newton_free(nt);
        return 0;
    }
    double J[12 * 8] = {0}, G[8], dx[8 + FUZZ_GUARD], x[8];
    fuzz_fill(&in, J, (size_t)k * p);
    fuzz_fill(&in, G, (size_t)k);
    uint8_t opts = fuzz_byte(&in);
    if (opts & 1) cdyn_newton_set_rank_tolerance(nt, fuzz_double(&in));
    if (opts & 2) cdyn_newton_set_max_iterations(nt, (int)(fuzz_byte(&in) % 40) - 2);
    if (opts & 4) cdyn_newton_set_max_backtracks(nt, fuzz_byte(&in) % 70);
    if (opts & 8) { /* rtol, and one atol for every unknown (or the default) */
        double rtol = fuzz_double(&in), atol[8];
        double a = fuzz_double(&in);
        for (int j = 0; j < 8; ++j) atol[j] = a;
        cdyn_newton_set_tolerances(nt, rtol, (opts & 64) ? NULL : atol);
        if (opts & 128) cdyn_newton_set_residual_tolerances(nt, atol);
    }
    poly_system sys = {k, p, {0}};
    fuzz_fill(&in, sys.coef, sizeof sys.coef / sizeof sys.coef[0]);
    fuzz_fill(&in, x, (size_t)p);
    double R[8], S[8], S2[8], Sinv[8];
    fuzz_scales(&in, R, k);
    fuzz_scales(&in, S, p);
    for (int j = 0; j < p; ++j) {
        S2[j] = S[j] * S[j];
        Sinv[j] = 1.0 / S[j];
    }
    fuzz_scale_matrix(J, k, p, k + (opts >> 6), R, S);
    fuzz_scale_vector(G, k, R);
    fuzz_scale_vector(sys.coef, k, R);                       /* c -> R c */
    fuzz_scale_matrix(sys.coef + 8, p, k, p, S, R);          /* a (row-major) -> R a S */
    fuzz_scale_matrix(sys.coef + 8 + 64, p, k, p, S2, R);    /* b -> R b S^2 */
    fuzz_scale_vector(x, p, Sinv);
    fuzz_guard_set(dx, (size_t)p);
    fuzz_ok_finite(cdyn_newton_step(nt, J, k + (opts >> 6), G, dx), dx, (size_t)p);
    if (!fuzz_guard_ok(dx, (size_t)p)) abort();
    fuzz_ok_finite(cdyn_newton_solve(nt, residual, NULL, &sys, x), x, (size_t)p);
    cdyn_newton_report report;
    cdyn_newton_get_report(nt, &report);
    int rows[8], cols[8];
    cdyn_newton_dependent_rows(nt, rows);
    cdyn_newton_dropped_columns(nt, cols);
    cdyn_newton_free(nt);
    return 0;
}
