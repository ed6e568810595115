/* libFuzzer harness: cdyn_nullspace with decoded sizes, W, M, F, c, in
 * decoded units: W -> R W S, M -> S M S, F -> S F, c -> R c. */
#include <cdyn.h>

#include "fuzz_input.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int n = fuzz_size(&in, 1, 12), m = fuzz_size(&in, 0, 11);
    int ldw = (m > 0 ? m : 1) + fuzz_size(&in, -1, 2);
    if (ldw > (m > 0 ? m : 1) + 2) ldw = (m > 0 ? m : 1) + 2; /* a huge ld is legal but costly */
    cdyn_status st;
    cdyn_nullspace *ns = cdyn_nullspace_create(n, m, &st);
    if (!ns) return 0; /* bad sizes are refused; nothing else to do */
    int d = n - m;
    double *W = calloc((size_t)(ldw > 0 ? ldw : 1) * n + 1, sizeof(double));
    double *M = malloc(sizeof(double) * (size_t)n * n);
    double *F = malloc(sizeof(double) * (size_t)n), *c = malloc(sizeof(double) * (size_t)(m + 1));
    double *R = malloc(sizeof(double) * (size_t)(m + 1)), *S = malloc(sizeof(double) * (size_t)n);
    double *vdot = malloc(sizeof(double) * (size_t)(n + FUZZ_GUARD));
    double *lambda = malloc(sizeof(double) * (size_t)(m + FUZZ_GUARD));
    double *Mbar = malloc(sizeof(double) * (size_t)(d * d + FUZZ_GUARD));
    double *alpha = malloc(sizeof(double) * (size_t)(n * d + FUZZ_GUARD));
    fuzz_fill(&in, W, (size_t)(ldw > 0 ? ldw : 1) * n);
    fuzz_fill(&in, M, (size_t)n * n);
    fuzz_fill(&in, F, (size_t)n);
    fuzz_fill(&in, c, (size_t)m);
    uint8_t opts = fuzz_byte(&in);
    if (opts & 1) cdyn_nullspace_set_rank_tolerance(ns, fuzz_double(&in));
    if (opts & 2) cdyn_nullspace_set_condition_limit(ns, fuzz_double(&in));
    fuzz_scales(&in, R, m);
    fuzz_scales(&in, S, n);
    if (ldw >= m) fuzz_scale_matrix(W, m, n, ldw, R, S); /* a bad ldw is refused anyway */
    fuzz_scale_matrix(M, n, n, n, S, S);
    fuzz_scale_vector(F, n, S);
    fuzz_scale_vector(c, m, R);
    fuzz_guard_set(vdot, (size_t)n);
    fuzz_guard_set(lambda, (size_t)m);
    fuzz_guard_set(Mbar, (size_t)d * d);
    fuzz_guard_set(alpha, (size_t)n * d);
    st = (opts & 4) ? cdyn_nullspace_update(ns, W, ldw, NULL) : cdyn_nullspace_factor(ns, W, ldw);
    if (st == CDYN_OK) {
        fuzz_ok_finite(cdyn_nullspace_alpha(ns, alpha, n), alpha, (size_t)n * d);
        st = cdyn_nullspace_solve(ns, M, n, F, (opts & 8) ? c : NULL, vdot, lambda);
        fuzz_ok_finite(fuzz_ok_finite(st, vdot, (size_t)n), lambda, (size_t)m);
        st = cdyn_nullspace_reduce(ns, M, n, F, c, Mbar, d > 0 ? d : 1, vdot);
        fuzz_ok_finite(fuzz_ok_finite(st, Mbar, (size_t)d * d), vdot, (size_t)d);
        fuzz_ok_finite(cdyn_nullspace_alpha_dot(ns, W, ldw, alpha, n), alpha, (size_t)n * d);
        fuzz_ok_finite(cdyn_nullspace_complete(ns, F, c, vdot), vdot, (size_t)n); /* vbar = F[0..d) */
        cdyn_nullspace_update(ns, W, ldw, NULL); /* refactor the same W */
        st = cdyn_nullspace_solve(ns, M, n, F, c, vdot, lambda);
        fuzz_ok_finite(fuzz_ok_finite(st, vdot, (size_t)n), lambda, (size_t)m);
    }
    if (!fuzz_guard_ok(vdot, (size_t)n) || !fuzz_guard_ok(lambda, (size_t)m) ||
        !fuzz_guard_ok(Mbar, (size_t)d * d) || !fuzz_guard_ok(alpha, (size_t)n * d))
        abort(); /* an out-of-bounds write */
    cdyn_nullspace_free(ns);
    free(W); free(M); free(F); free(c); free(vdot); free(lambda); free(Mbar); free(alpha);
    free(R); free(S);
    return 0;
}
