/* Distinct objects are independent (DESIGN 4): 8 threads, each with its own
 * objects, run the same problems and must produce results bit-identical to
 * a single-threaded run, whose every call returned CDYN_OK and whose results
 * are checked by identities and a second computation. Run under
 * ThreadSanitizer in CI. */
#include <cdyn.h>

#include "testutil.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 8, N = 24, M = 8, RESULT = 3 * N + 2 * M + 6, REPEAT = 20 };

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

/* One thread's work: every module on the same data; results to out, and
 * into out[STATUS] the number of calls that did not return CDYN_OK (or
 * objects not created), so that runs that all failed cannot "match". */
enum { STATUS = RESULT - 1 };

static void workload(double *out)
{
    tu_rng rng;
    tu_rng_seed(&rng, 2026);
    double W[M * N], Mass[N * N], F[N], vdot[N], lambda[M];
    tu_random(&rng, M, N, W, M);
    tu_random_spd(&rng, N, Mass, N);
    tu_random(&rng, N, 1, F, N);
    memset(out, 0, sizeof(double) * RESULT);
    int bad = 0;
#define CHECKED(call) (bad += (call) != CDYN_OK)
    for (int rep = 0; rep < REPEAT; ++rep) {
        cdyn_nullspace *ns = cdyn_nullspace_create(N, M, NULL);
        bad += ns == NULL;
        CHECKED(cdyn_nullspace_factor(ns, W, M));
        CHECKED(cdyn_nullspace_solve(ns, Mass, N, F, NULL, vdot, lambda));
        cdyn_nullspace_free(ns);
        for (int i = 0; i < N; ++i) out[i] = vdot[i];
        for (int i = 0; i < M; ++i) out[N + i] = lambda[i];

        cdyn_constraint *c = cdyn_constraint_create(N, M, NULL);
        bad += c == NULL;
        CHECKED(cdyn_constraint_set_baumgarte(c, 2.0, 3.0));
        CHECKED(cdyn_constraint_load(c, Mass, N, F, W, M, F, F + 1, F + 2));
        CHECKED(cdyn_constraint_lagrange(c, out + N + M, out + 3 * N + M + 5));
        CHECKED(cdyn_constraint_penalty(c, out + 2 * N + M, lambda));
        cdyn_constraint_free(c);

        double rhs_c[4] = {1.0, 2.0, 3.0, 10.0}, x[4] = {0.5, 0.5, 0.5, 0.5};
        cdyn_newton *nt = cdyn_newton_create(4, 4, NULL);
        bad += nt == NULL;
        CHECKED(cdyn_newton_solve(nt, cubic, NULL, rhs_c, x));
        cdyn_newton_free(nt);
        for (int i = 0; i < 4; ++i) out[3 * N + M + i] = x[i];

        double mass[4] = {1.0, 0.0, 0.0, 0.0}, v[2] = {0.1, 0.5}, y = 0.1, ydot;
        cdyn_dae *dae = cdyn_dae_create(2, NULL);
        bad += dae == NULL;
        CHECKED(cdyn_dae_set_mass(dae, mass, 2));
        CHECKED(cdyn_dae_set_model(dae, dae_force, NULL, NULL, NULL));
        CHECKED(cdyn_dae_split(dae, 0.0, v));
        for (int k = 0; k < 50; ++k) {
            CHECKED(cdyn_dae_rhs(dae, 0.01 * k, &y, &ydot));
            y += 0.01 * ydot;
        }
        cdyn_dae_free(dae);
        out[3 * N + M + 4] = y; /* the last repetition's */
    }
#undef CHECKED
    out[STATUS] = bad;
}

/* The real root of y^3 + y = c (increasing: bisection, then exact to
 * rounding). */
static double cubic_root(double c)
{
    double lo = -2.0 - fabs(c), hi = 2.0 + fabs(c);
    for (int i = 0; i < 200; ++i) {
        double mid = 0.5 * (lo + hi);
        if (mid * mid * mid + mid < c)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* The serial run is right, by identities and a second computation:
 * M v' - F - W^T lambda = 0 and W v' = 0 (null space); M q'' + W^T lambda =
 * F and W q'' = s, s = xi - 2a Phi' - b^2 Phi (Lagrange with Baumgarte
 * a = 2, b = 3, Phi = F[0..M), Phi' = F[1..M], xi = F[2..M+1]); the
 * Newton roots; the DAE's explicit Euler run against the same run by hand
 * with the algebraic state from the cubic's root. */
static void check_known_good(const double *out)
{
    ck_assert(out[STATUS] == 0.0);
    tu_rng rng;
    tu_rng_seed(&rng, 2026);
    double W[M * N], Mass[N * N], F[N], r[N], c[M];
    tu_random(&rng, M, N, W, M);
    tu_random_spd(&rng, N, Mass, N);
    tu_random(&rng, N, 1, F, N);
    const double *vdot = out, *lam = out + N, *qdd = out + N + M, *lam2 = out + 3 * N + M + 5;
    for (int pass = 0; pass < 2; ++pass) {
        const double *a = pass == 0 ? vdot : qdd, *l = pass == 0 ? lam : lam2;
        double sign = pass == 0 ? -1.0 : 1.0; /* T1: M v' = F + W^T lambda; T4: M q'' + ... */
        tu_matvec(N, N, Mass, N, a, r);
        double Wl[N];
        tu_matvec_t(M, N, W, M, l, Wl);
        for (int i = 0; i < N; ++i) r[i] += sign * Wl[i] - F[i];
        ck_assert_double_le(tu_vec_max_abs(N, r), 1e-10 * (tu_vec_max_abs(N, F) + 1.0));
        tu_matvec(M, N, W, M, a, c);
        for (int k = 0; k < M && pass == 1; ++k) c[k] -= F[2 + k] - 4.0 * F[1 + k] - 9.0 * F[k];
        ck_assert_double_le(tu_vec_max_abs(M, c), 1e-10 * (tu_vec_max_abs(N, F) + 1.0));
    }
    const double rhs_c[4] = {1.0, 2.0, 3.0, 10.0};
    for (int i = 0; i < 4; ++i)
        ck_assert_double_le(fabs(out[3 * N + M + i] - cubic_root(rhs_c[i])), 1e-9);
    double x = 0.1;
    for (int k = 0; k < 50; ++k) x += 0.01 * (-x + cubic_root(cos(0.01 * k)));
    ck_assert_double_le(fabs(out[3 * N + M + 4] - x), 1e-9);
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
    check_known_good(reference);
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
    return tu_run_suite(s);
}
