/* Distinct objects are independent (DESIGN 4): 8 threads, each with its own
 * objects, run the same problems and must produce results bit-identical to
 * a single-threaded run. Run under ThreadSanitizer in CI. */
#include <cdyn.h>

#include "testutil.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 8, N = 24, M = 8, RESULT = 3 * N + M + 4, REPEAT = 20 };

/* A nonlinear system with a known root for Newton: x_i^3 + x_i = c_i. */
static int cubic(const double *x, double *G, void *user)
{
    const double *c = user;
    for (int i = 0; i < 4; ++i) G[i] = x[i] * x[i] * x[i] + x[i] - c[i];
    return 0;
}

/* The DAE x' = -x + y, 0 = y^3 + y - cos t (index 1). */
static int dae_force(double t, const double *v, double *F, void *user)
{
    (void)user;
    F[0] = -v[0] + v[1];
    F[1] = v[1] * v[1] * v[1] + v[1] - cos(t);
    return 0;
}

/* One thread's work: every module on the same data; results to out. */
static void workload(double *out)
{
    tu_rng rng;
    tu_rng_seed(&rng, 2026);
    double W[M * N], Mass[N * N], F[N], vdot[N], lambda[M];
    tu_random(&rng, M, N, W, M);
    tu_random_spd(&rng, N, Mass, N);
    tu_random(&rng, N, 1, F, N);
    memset(out, 0, sizeof(double) * RESULT);
    for (int rep = 0; rep < REPEAT; ++rep) {
        cdyn_nullspace *ns = cdyn_nullspace_create(N, M, NULL);
        cdyn_nullspace_factor(ns, W, M);
        cdyn_nullspace_solve(ns, Mass, N, F, NULL, vdot, lambda);
        cdyn_nullspace_free(ns);
        for (int i = 0; i < N; ++i) out[i] = vdot[i];
        for (int i = 0; i < M; ++i) out[N + i] = lambda[i];

        cdyn_constraint *c = cdyn_constraint_create(N, M, NULL);
        cdyn_constraint_set_baumgarte(c, 2.0, 3.0);
        cdyn_constraint_load(c, Mass, N, F, W, M, F, F + 1, F + 2);
        cdyn_constraint_lagrange(c, out + N + M, lambda);
        cdyn_constraint_penalty(c, out + 2 * N + M, lambda);
        cdyn_constraint_free(c);

        double rhs_c[4] = {1.0, 2.0, 3.0, 10.0}, x[4] = {0.5, 0.5, 0.5, 0.5};
        cdyn_newton *nt = cdyn_newton_create(4, 4, NULL);
        cdyn_newton_solve(nt, cubic, NULL, rhs_c, x);
        cdyn_newton_free(nt);
        for (int i = 0; i < 4; ++i) out[3 * N + M + i] = x[i];

        double mass[4] = {1.0, 0.0, 0.0, 0.0}, v[2] = {0.1, 0.5}, y = 0.1, ydot;
        cdyn_dae *dae = cdyn_dae_create(2, NULL);
        cdyn_dae_set_mass(dae, mass, 2);
        cdyn_dae_set_functions(dae, dae_force, NULL, NULL, NULL);
        cdyn_dae_split(dae, 0.0, v);
        for (int k = 0; k < 50; ++k) {
            cdyn_dae_rhs(dae, 0.01 * k, &y, &ydot);
            y += 0.01 * ydot;
        }
        cdyn_dae_free(dae);
        out[3 * N + M] += y; /* fold into the result */
    }
}

static void *thread_main(void *arg)
{
    workload(arg);
    return NULL;
}

START_TEST(threads_with_own_objects_match_single_thread_bit_for_bit)
{
    double reference[RESULT], results[THREADS][RESULT];
    workload(reference);
    for (int i = 0; i < RESULT; ++i) ck_assert(isfinite(reference[i]));
    pthread_t threads[THREADS];
    for (int k = 0; k < THREADS; ++k)
        ck_assert_int_eq(pthread_create(&threads[k], NULL, thread_main, results[k]), 0);
    for (int k = 0; k < THREADS; ++k) ck_assert_int_eq(pthread_join(threads[k], NULL), 0);
    for (int k = 0; k < THREADS; ++k)
        ck_assert_msg(memcmp(results[k], reference, sizeof reference) == 0,
                      "thread %d differs from the single-threaded run", k);
}
END_TEST

START_TEST(repeated_runs_are_deterministic)
{
    double first[RESULT], second[RESULT];
    workload(first);
    workload(second);
    ck_assert(memcmp(first, second, sizeof first) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("independence");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, threads_with_own_objects_match_single_thread_bit_for_bit);
    tcase_add_test(tc, repeated_runs_are_deterministic);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
