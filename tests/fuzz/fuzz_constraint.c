/* libFuzzer harness: cdyn_constraint load + every formulation + export on
 * decoded M, Q, Phi_q, Phi, Phi', xi, C, gains and penalties, in decoded
 * units: M -> S M S, Q -> S Q, Phi_q -> R Phi_q S, C -> R C S, and R on
 * Phi, Phi', xi (so s -> R s); then, by a last byte, the penalty form's
 * default again on the rows shrunk. */
#include <cdyn.h>

#include "fuzz_input.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    int n = fuzz_size(&in, 1, 8), m = fuzz_size(&in, 0, 10);
    cdyn_status st;
    cdyn_constraint *c = cdyn_constraint_create(n, m, &st);
    if (!c) return 0;
    int m1 = m > 0 ? m : 1, size2 = 2 * n + m;
    double *M = malloc(sizeof(double) * (size_t)n * n), *Q = malloc(sizeof(double) * (size_t)n);
    double *J = malloc(sizeof(double) * (size_t)m1 * n), *C = malloc(sizeof(double) * (size_t)m1 * n);
    double *Phi = malloc(sizeof(double) * (size_t)m1), *Phid = malloc(sizeof(double) * (size_t)m1);
    double *xi = malloc(sizeof(double) * (size_t)m1), *gains = malloc(sizeof(double) * (size_t)m1 * m1);
    double *R = malloc(sizeof(double) * (size_t)m1), *S = malloc(sizeof(double) * (size_t)n);
    double *qdd = malloc(sizeof(double) * (size_t)(n + FUZZ_GUARD));
    double *lam = malloc(sizeof(double) * (size_t)(m1 + FUZZ_GUARD));
    double *A = malloc(sizeof(double) * ((size_t)size2 * size2 + FUZZ_GUARD));
    double *B = malloc(sizeof(double) * (size_t)(size2 + FUZZ_GUARD));
    fuzz_fill(&in, M, (size_t)n * n);
    fuzz_fill(&in, Q, (size_t)n);
    fuzz_fill(&in, J, (size_t)m1 * n);
    fuzz_fill(&in, C, (size_t)m1 * n);
    fuzz_fill(&in, Phi, (size_t)m1);
    fuzz_fill(&in, Phid, (size_t)m1);
    fuzz_fill(&in, xi, (size_t)m1);
    fuzz_fill(&in, gains, (size_t)m1 * m1);
    uint8_t opts = fuzz_byte(&in);
    if (opts & 1) cdyn_constraint_set_baumgarte(c, fuzz_double(&in), fuzz_double(&in));
    if (opts & 2) cdyn_constraint_set_gains(c, gains, m1, gains, m1);
    if (opts & 4) cdyn_constraint_set_critical_gains(c, Phi);
    if (opts & 8) cdyn_constraint_set_penalty(c, xi);
    if (opts & 16) cdyn_constraint_set_rank_tolerance(c, fuzz_double(&in));
    fuzz_scales(&in, R, m1);
    fuzz_scales(&in, S, n);
    fuzz_scale_matrix(M, n, n, n, S, S);
    fuzz_scale_vector(Q, n, S);
    fuzz_scale_matrix(J, m1, n, m1, R, S);
    fuzz_scale_matrix(C, m1, n, m1, R, S);
    fuzz_scale_vector(Phi, m1, R);
    fuzz_scale_vector(Phid, m1, R);
    fuzz_scale_vector(xi, m1, R);
    fuzz_guard_set(qdd, (size_t)n);
    fuzz_guard_set(lam, (size_t)m);
    fuzz_guard_set(A, (size_t)size2 * size2);
    fuzz_guard_set(B, (size_t)size2);
    st = cdyn_constraint_load(c, M, n, Q, J, m1, (opts & 32) ? Phi : NULL, Phid, xi);
    if (st == CDYN_OK) {
        st = cdyn_constraint_lagrange(c, qdd, lam);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
        st = cdyn_constraint_reactions(c, C, m1, qdd, lam);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
        st = cdyn_constraint_pseudoinverse(c, qdd, lam);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
        st = cdyn_constraint_penalty(c, qdd, lam);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
        st = cdyn_constraint_export(c, (cdyn_export_variant)(opts >> 6), C, m1, Q, A, size2, B);
        fuzz_ok_finite(fuzz_ok_finite(st, A, (size_t)size2 * size2), B, (size_t)size2);
        st = cdyn_constraint_force(c, qdd, lam);
        fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
        /* one more byte (0 for inputs without it): the default penalty's
         * history, with the rows shrunk by up to 2^-31 (a row vanishing
         * at a singular pose), after the default or a reset */
        uint8_t more = fuzz_byte(&in);
        if (more) {
            if (more & 1) cdyn_constraint_set_penalty(c, NULL);
            if (more & 2) cdyn_constraint_reset_scales(c);
            if (more & 4) {
                double shrink = ldexp(1.0, -(int)(more >> 3));
                for (size_t k = 0; k < (size_t)m1 * n; ++k) J[k] *= shrink;
                st = cdyn_constraint_load(c, M, n, Q, J, m1, (opts & 32) ? Phi : NULL, Phid, xi);
            }
            if (st == CDYN_OK) {
                st = cdyn_constraint_penalty(c, qdd, lam);
                fuzz_ok_finite(fuzz_ok_finite(st, qdd, (size_t)n), lam, (size_t)m);
            }
        }
    }
    int rows[16];
    cdyn_constraint_redundant_rows(c, m <= 16 ? rows : NULL);
    if (!fuzz_guard_ok(qdd, (size_t)n) || !fuzz_guard_ok(lam, (size_t)m) ||
        !fuzz_guard_ok(A, (size_t)size2 * size2) || !fuzz_guard_ok(B, (size_t)size2))
        abort();
    cdyn_constraint_free(c);
    free(M); free(Q); free(J); free(C); free(Phi); free(Phid); free(xi); free(gains);
    free(qdd); free(lam); free(A); free(B); free(R); free(S);
    return 0;
}
