/* Check suite for cdyn_nullspace (THEORY T1).
 *
 * Every expected value comes from somewhere other than the library:
 *  - identities that hold for any correct answer (W alpha = 0, the rows of
 *    alpha at the independent states form I, M v' - F - W^T lambda = 0,
 *    W v' = -c, W alpha' = -W' alpha);
 *  - the reference KKT solve of testutil (LAPACK dgesv on the whole bordered
 *    system of T1.1);
 *  - a small Gaussian elimination written here (ge_solve), used to build
 *    alpha, Mbar and Fbar from their THEORY formulas for a given partition;
 *  - hand calculations for the small constructed matrices.
 *
 * Tolerances are relative to the natural scale of the rounding in each
 * quantity: a sum of products sum_k A_ik x_k is compared with
 * sum_k |A_ik| |x_k|, which bounds how large its rounding error can be.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "cdyn/nullspace.h"
#include "cdyn/status.h"
#include "guarded.h"
#include "testutil.h"


static size_t atleast1(int k) { return k > 0 ? (size_t)k : 1; }

/* ------------------------------------------------------------------------ */
/* A random constrained problem M v' = F + W^T lambda, W v' = -c.            */

typedef struct {
    int n, m, d;
    int ldw, ldm;
    double *W; /* m x n, leading dimension ldw; padding rows are NaN */
    double *M; /* n x n SPD, leading dimension ldm; padding rows are NaN */
    double *F; /* n */
    double *c; /* m, or NULL for a constant W */
} problem;

/* pad > 0 adds pad rows of NaN below W and M, so a library that ignores the
 * leading dimension reads NaN and fails. */
static void problem_init(problem *p, int n, int m, int pad, int with_c, unsigned long long seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    p->n = n;
    p->m = m;
    p->d = n - m;
    p->ldw = (m > 0 ? m : 1) + pad;
    p->ldm = n + pad;
    p->W = malloc(sizeof(double) * (size_t)p->ldw * (size_t)n);
    p->M = malloc(sizeof(double) * (size_t)p->ldm * (size_t)n);
    p->F = malloc(sizeof(double) * (size_t)n);
    ck_assert(p->W && p->M && p->F);
    for (size_t i = 0; i < (size_t)p->ldw * (size_t)n; ++i) p->W[i] = NAN;
    for (size_t i = 0; i < (size_t)p->ldm * (size_t)n; ++i) p->M[i] = NAN;
    tu_random(&r, m, n, p->W, p->ldw);
    tu_random_spd(&r, n, p->M, p->ldm);
    tu_random(&r, n, 1, p->F, n);
    p->c = NULL;
    if (with_c && m > 0) {
        p->c = malloc(sizeof(double) * (size_t)m);
        ck_assert_ptr_nonnull(p->c);
        tu_random(&r, m, 1, p->c, m);
    }
}

static void problem_free(problem *p)
{
    free(p->W);
    free(p->M);
    free(p->F);
    free(p->c);
}

static double *W_at(const problem *p, int i, int j) { return &p->W[i + (size_t)j * p->ldw]; }

/* ------------------------------------------------------------------------ */
/* Independent reference computations.                                       */

/* Solve A X = B in place (A: k x k, B: k x nrhs) by Gaussian elimination with
 * partial pivoting. Returns 0, or -1 on an exactly zero pivot. */
static int ge_solve(int k, int nrhs, double *A, int lda, double *B, int ldb)
{
    for (int j = 0; j < k; ++j) {
        int piv = j;
        for (int i = j + 1; i < k; ++i)
            if (fabs(A[i + j * lda]) > fabs(A[piv + j * lda])) piv = i;
        if (A[piv + j * lda] == 0.0) return -1;
        if (piv != j) {
            for (int q = 0; q < k; ++q) {
                double t = A[j + q * lda];
                A[j + q * lda] = A[piv + q * lda];
                A[piv + q * lda] = t;
            }
            for (int q = 0; q < nrhs; ++q) {
                double t = B[j + q * ldb];
                B[j + q * ldb] = B[piv + q * ldb];
                B[piv + q * ldb] = t;
            }
        }
        for (int i = j + 1; i < k; ++i) {
            double l = A[i + j * lda] / A[j + j * lda];
            for (int q = j + 1; q < k; ++q) A[i + q * lda] -= l * A[j + q * lda];
            for (int q = 0; q < nrhs; ++q) B[i + q * ldb] -= l * B[j + q * ldb];
        }
    }
    for (int q = 0; q < nrhs; ++q)
        for (int i = k - 1; i >= 0; --i) {
            double s = B[i + q * ldb];
            for (int t = i + 1; t < k; ++t) s -= A[i + t * lda] * B[t + q * ldb];
            B[i + q * ldb] = s / A[i + i * lda];
        }
    return 0;
}

/* W2 = W(:, dep) as a dense m x m matrix (leading dimension m). */
static double *gather_W2(const problem *p, const int *dep)
{
    double *W2 = malloc(sizeof(double) * atleast1(p->m * p->m));
    ck_assert_ptr_nonnull(W2);
    for (int j = 0; j < p->m; ++j)
        for (int i = 0; i < p->m; ++i) W2[i + j * p->m] = *W_at(p, i, dep[j]);
    return W2;
}

/* Exact 1-norm condition number of W2 = W(:, dep), from its inverse computed
 * by ge_solve; +Inf when W2 is exactly singular; 1 for m = 0. */
static double kappa1_W2(const problem *p, const int *dep)
{
    int m = p->m;
    if (m == 0) return 1.0;
    double *W2 = gather_W2(p, dep), *inv = calloc((size_t)m * m, sizeof(double));
    ck_assert_ptr_nonnull(inv);
    double norm_W2 = 0.0, norm_inv = 0.0;
    for (int j = 0; j < m; ++j) {
        double s = 0.0;
        for (int i = 0; i < m; ++i) s += fabs(W2[i + j * m]);
        if (s > norm_W2) norm_W2 = s;
        inv[j + j * m] = 1.0;
    }
    double kappa = INFINITY;
    if (ge_solve(m, m, W2, m, inv, m) == 0) {
        for (int j = 0; j < m; ++j) {
            double s = 0.0;
            for (int i = 0; i < m; ++i) s += fabs(inv[i + j * m]);
            if (s > norm_inv) norm_inv = s;
        }
        kappa = norm_W2 * norm_inv;
    }
    free(W2);
    free(inv);
    return kappa;
}

/* THEORY T1.2 for a given partition: alpha = Pi [I_d; -W2^{-1} W1], i.e.
 * alpha(indep[k], k) = 1 and alpha(dep, :) = X with W2 X = -W1.
 * alpha: n x d, leading dimension n. */
static void ref_alpha(const problem *p, const int *indep, const int *dep, double *alpha)
{
    int n = p->n, m = p->m, d = p->d;
    double *W2 = gather_W2(p, dep), *X = malloc(sizeof(double) * atleast1(m * d));
    ck_assert_ptr_nonnull(X);
    for (int k = 0; k < d; ++k)
        for (int i = 0; i < m; ++i) X[i + k * m] = -*W_at(p, i, indep[k]);
    ck_assert_int_eq(ge_solve(m, d, W2, m, X, m), 0);
    for (int i = 0; i < n * d; ++i) alpha[i] = 0.0;
    for (int k = 0; k < d; ++k) {
        alpha[indep[k] + k * n] = 1.0;
        for (int i = 0; i < m; ++i) alpha[dep[i] + k * n] = X[i + k * m];
    }
    free(W2);
    free(X);
}

/* The particular rate a = alpha' vbar of T1.3/T1.4: a(indep) = 0 and
 * a(dep) = -W2^{-1} c, i.e. the vector with zero independent entries and
 * W a = -c. (c = NULL means c = 0, so a = 0.) */
static void ref_particular(const problem *p, const int *dep, const double *c, double *a)
{
    int m = p->m;
    for (int i = 0; i < p->n; ++i) a[i] = 0.0;
    if (m == 0 || !c) return;
    double *W2 = gather_W2(p, dep), *x = malloc(sizeof(double) * (size_t)m);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < m; ++i) x[i] = -c[i];
    ck_assert_int_eq(ge_solve(m, 1, W2, m, x, m), 0);
    for (int i = 0; i < m; ++i) a[dep[i]] = x[i];
    free(W2);
    free(x);
}

/* THEORY T1.4: Mbar = alpha^T M alpha (d x d, ld d), Fbar = alpha^T (F - M a),
 * by plain loops. mbar_scale and fbar_scale receive the largest entry of
 * |alpha|^T |M| |alpha| and of |alpha|^T (|F| + |M| |a|). */
static void ref_reduce(const problem *p, const double *alpha, const double *a, double *Mbar,
                       double *Fbar, double *mbar_scale, double *fbar_scale)
{
    int n = p->n, d = p->d;
    double *Malpha = malloc(sizeof(double) * (size_t)n * d);
    double *absMalpha = malloc(sizeof(double) * (size_t)n * d);
    double *r = malloc(sizeof(double) * (size_t)n), *absr = malloc(sizeof(double) * (size_t)n);
    ck_assert(Malpha && absMalpha && r && absr);
    tu_matmul(n, n, d, p->M, p->ldm, alpha, n, Malpha, n);
    for (int j = 0; j < d; ++j)
        for (int i = 0; i < n; ++i) {
            double s = 0.0;
            for (int k = 0; k < n; ++k) s += fabs(p->M[i + k * p->ldm] * alpha[k + j * n]);
            absMalpha[i + j * n] = s;
        }
    for (int i = 0; i < n; ++i) {
        double s = p->F[i], t = fabs(p->F[i]);
        for (int k = 0; k < n; ++k) {
            s -= p->M[i + k * p->ldm] * a[k];
            t += fabs(p->M[i + k * p->ldm] * a[k]);
        }
        r[i] = s;
        absr[i] = t;
    }
    *mbar_scale = 0.0;
    *fbar_scale = 0.0;
    for (int j = 0; j < d; ++j) {
        for (int i = 0; i < d; ++i) {
            double s = 0.0, t = 0.0;
            for (int k = 0; k < n; ++k) {
                s += alpha[k + i * n] * Malpha[k + j * n];
                t += fabs(alpha[k + i * n]) * absMalpha[k + j * n];
            }
            Mbar[i + j * d] = s;
            if (t > *mbar_scale) *mbar_scale = t;
        }
        double s = 0.0, t = 0.0;
        for (int k = 0; k < n; ++k) {
            s += alpha[k + j * n] * r[k];
            t += fabs(alpha[k + j * n]) * absr[k];
        }
        Fbar[j] = s;
        if (t > *fbar_scale) *fbar_scale = t;
    }
    free(Malpha);
    free(absMalpha);
    free(r);
    free(absr);
}

/* ------------------------------------------------------------------------ */
/* Error measures.                                                           */

static double max_update(double worst, double x) { return (x <= worst) ? worst : x; } /* NaN wins */

/* max |x - ref| / max |ref| (absolute when ref = 0). */
static double rel_diff(int k, const double *x, const double *ref)
{
    double diff = 0.0, scale = tu_vec_max_abs(k, ref);
    for (int i = 0; i < k; ++i) diff = max_update(diff, fabs(x[i] - ref[i]));
    return scale > 0.0 ? diff / scale : diff;
}

/* max |A X + B Y| / max (|A| |X| + |B| |Y|), A: r x k, X: k x c, B: r x k
 * and Y: k x c (B may be NULL). The denominator bounds the rounding in the
 * products, so this is the residual in units of the achievable accuracy. */
static double rel_residual(int r, int k, int c, const double *A, int lda, const double *X, int ldx,
                           const double *B, int ldb, const double *Y, int ldy)
{
    double worst = 0.0, scale = 0.0;
    for (int j = 0; j < c; ++j)
        for (int i = 0; i < r; ++i) {
            double s = 0.0, t = 0.0;
            for (int q = 0; q < k; ++q) {
                s += A[i + q * lda] * X[q + j * ldx];
                t += fabs(A[i + q * lda] * X[q + j * ldx]);
                if (B) {
                    s += B[i + q * ldb] * Y[q + j * ldy];
                    t += fabs(B[i + q * ldb] * Y[q + j * ldy]);
                }
            }
            worst = max_update(worst, fabs(s));
            scale = max_update(scale, t);
        }
    return scale > 0.0 ? worst / scale : worst;
}

/* T1.1, first block: max_i |M v' - F - W^T lambda|_i relative to
 * max_i (|M| |v'| + |F| + |W^T| |lambda|)_i, over all n rows. */
static double dynamics_residual(const problem *p, const double *vdot, const double *lambda)
{
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < p->n; ++i) {
        double s = -p->F[i], t = fabs(p->F[i]);
        for (int j = 0; j < p->n; ++j) {
            s += p->M[i + j * p->ldm] * vdot[j];
            t += fabs(p->M[i + j * p->ldm] * vdot[j]);
        }
        for (int k = 0; k < p->m; ++k) {
            s -= *W_at(p, k, i) * lambda[k];
            t += fabs(*W_at(p, k, i) * lambda[k]);
        }
        worst = max_update(worst, fabs(s));
        scale = max_update(scale, t);
    }
    return scale > 0.0 ? worst / scale : worst;
}

/* T1.1, second block differentiated: max |W v' + c| relative to |W| |v'| + |c|. */
static double constraint_residual(const problem *p, const double *vdot)
{
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < p->m; ++i) {
        double s = p->c ? p->c[i] : 0.0, t = fabs(s);
        for (int j = 0; j < p->n; ++j) {
            s += *W_at(p, i, j) * vdot[j];
            t += fabs(*W_at(p, i, j) * vdot[j]);
        }
        worst = max_update(worst, fabs(s));
        scale = max_update(scale, t);
    }
    return scale > 0.0 ? worst / scale : worst;
}

/* ------------------------------------------------------------------------ */
/* Assertions shared by many tests.                                          */

/* A rate solution must satisfy T1.1 on all n rows and W v' = -c. The bound
 * 1e-10 leaves room for cond(Mbar) and |alpha|^2 amplification of rounding
 * (random SPD M = B B^T + n I is well conditioned). */
static void assert_satisfies_dynamics(const problem *p, const double *vdot, const double *lambda)
{
    double rd = dynamics_residual(p, vdot, lambda), rc = constraint_residual(p, vdot);
    ck_assert_msg(rd <= 1e-10, "M v' - F - W^T lambda: relative residual %g (n=%d m=%d)", rd, p->n,
                  p->m);
    ck_assert_msg(rc <= 1e-10, "W v' + c: relative residual %g (n=%d m=%d)", rc, p->n, p->m);
}

/* The same solution from the reference KKT solve (dgesv on T1.1's bordered
 * system, same sign convention: M v' = F + W^T lambda, W v' = -c). Both
 * solutions are accurate to about cond(KKT) eps, far below 1e-10. */
static void assert_matches_kkt(const problem *p, const double *vdot, const double *lambda)
{
    double *vref = malloc(sizeof(double) * (size_t)p->n);
    double *lref = malloc(sizeof(double) * atleast1(p->m));
    ck_assert(vref && lref);
    ck_assert_int_eq(tu_kkt_solve(p->n, p->m, p->M, p->ldm, p->W, p->ldw, p->F, p->c, vref, lref),
                     0);
    double ev = rel_diff(p->n, vdot, vref), el = rel_diff(p->m, lambda, lref);
    ck_assert_msg(ev <= 1e-10, "v' differs from the KKT solve by %g relative (n=%d m=%d)", ev, p->n,
                  p->m);
    ck_assert_msg(el <= 1e-10, "lambda differs from the KKT solve by %g relative (n=%d m=%d)", el,
                  p->n, p->m);
    free(vref);
    free(lref);
}

/* cdyn_nullspace_solve into guarded buffers, then both checks above. */
static void assert_solve_correct(cdyn_nullspace *ns, const problem *p)
{
    double *vdot = dbuf((size_t)p->n), *lambda = dbuf(atleast1(p->m));
    ck_assert_int_eq(cdyn_nullspace_solve(ns, p->M, p->ldm, p->F, p->c, vdot, lambda), CDYN_OK);
    ck_assert(dbuf_guards_intact(vdot, (size_t)p->n));
    ck_assert(dbuf_guards_intact(lambda, (size_t)p->m));
    assert_satisfies_dynamics(p, vdot, lambda);
    assert_matches_kkt(p, vdot, lambda);
    dbuf_free(vdot);
    dbuf_free(lambda);
}

static cdyn_nullspace *create_ok(int n, int m)
{
    cdyn_status st = CDYN_ERR_LAPACK;
    cdyn_nullspace *ns = cdyn_nullspace_create(n, m, &st);
    ck_assert_ptr_nonnull(ns);
    ck_assert_int_eq(st, CDYN_OK);
    return ns;
}

static cdyn_nullspace *create_factored(const problem *p)
{
    cdyn_nullspace *ns = create_ok(p->n, p->m);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p->W, p->ldw), CDYN_OK);
    return ns;
}

/* Read the partition and check that independent and dependent together are a
 * permutation of 0..n-1. indep holds d entries, dep max(1, m). */
static void get_partition(cdyn_nullspace *ns, int n, int m, int *indep, int *dep)
{
    ck_assert_int_eq(cdyn_nullspace_partition(ns, indep, m > 0 ? dep : NULL), n - m);
    ck_assert_int_eq(cdyn_nullspace_partition(ns, NULL, NULL), n - m); /* the length only */
    int *seen = calloc((size_t)n, sizeof(int));
    ck_assert_ptr_nonnull(seen);
    for (int k = 0; k < n - m; ++k) {
        ck_assert(indep[k] >= 0 && indep[k] < n);
        seen[indep[k]]++;
    }
    for (int k = 0; k < m; ++k) {
        ck_assert(dep[k] >= 0 && dep[k] < n);
        seen[dep[k]]++;
    }
    for (int i = 0; i < n; ++i)
        ck_assert_msg(seen[i] == 1, "state %d appears %d times", i, seen[i]);
    free(seen);
}

static int contains(int k, const int *set, int value)
{
    for (int i = 0; i < k; ++i)
        if (set[i] == value) return 1;
    return 0;
}

static void assert_message_set(const cdyn_nullspace *ns, const char *what)
{
    const char *msg = cdyn_nullspace_last_error(ns);
    ck_assert_msg(msg && msg[0] != '\0', "%s: no last_error message", what);
}

/* ------------------------------------------------------------------------ */
/* Sizes and seeds for the randomized tests.                                 */

static const int sizes[][2] = {{3, 1},   {5, 2}, {10, 4}, {50, 20}, {200, 70},
                               {200, 1}, {7, 6}, {1, 0},  {4, 0}};
enum { NSIZES = (int)(sizeof sizes / sizeof sizes[0]) };
static const unsigned long long seeds[] = {1, 42, 20240607};
enum { NSEEDS = (int)(sizeof seeds / sizeof seeds[0]) };

static unsigned long long case_seed(int size_index, int seed_index)
{
    return seeds[seed_index] * 1000003ull + (unsigned long long)size_index;
}

/* ======================================================================== */
/* T1.2: the null-space basis.                                              */

START_TEST(alpha_spans_null_space_with_identity_independent_rows)
{
    int n = sizes[_i][0], m = sizes[_i][1], d = n - m;
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, 0, case_seed(_i, s));
        cdyn_nullspace *ns = create_factored(&p);
        int *indep = ibuf((size_t)d), *dep = ibuf(atleast1(m));
        get_partition(ns, n, m, indep, dep);
        ck_assert(ibuf_guards_intact(indep, (size_t)d) && ibuf_guards_intact(dep, (size_t)m));

        double *alpha = dbuf((size_t)n * d);
        ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
        ck_assert(dbuf_guards_intact(alpha, (size_t)n * d));

        /* W alpha = 0. Each entry is sum_k W_ik alpha_kj; a backward-stable
         * solve for -W2^{-1} W1 plus the test's own product leave a residual
         * of a small multiple of m eps (|W| |alpha|)_ij (about 1e-14 for
         * m = 70), so 1e-12 of that scale is a rounding-level bound that is
         * independent of how large alpha is. */
        double res = rel_residual(m, n, d, p.W, p.ldw, alpha, n, NULL, 0, NULL, 0);
        ck_assert_msg(res <= 1e-12, "W alpha relative residual %g (n=%d m=%d)", res, n, m);

        /* Full column rank: the independent rows of alpha are exactly I_d
         * (alpha = Pi [I_d; ...]); with m = 0 this makes alpha a permutation. */
        for (int j = 0; j < d; ++j)
            for (int k = 0; k < d; ++k)
                ck_assert_double_eq(alpha[indep[k] + j * n], k == j ? 1.0 : 0.0);

        /* The dependent block W2 is nonsingular. dgecon's estimate is a lower
         * bound of the exact 1-norm condition number kappa; a condition
         * number is never below 1 (the library clamps rounding below 1). */
        double kappa = kappa1_W2(&p, dep), est = cdyn_nullspace_condition(ns);
        ck_assert_msg(isfinite(kappa), "W2 singular (n=%d m=%d)", n, m);
        ck_assert_double_ge(est, 1.0);
        ck_assert_double_le(est, kappa * (1.0 + 1e-6));
        if (m == 0) ck_assert_double_eq(est, 1.0);
        ck_assert_int_eq(cdyn_nullspace_rank(ns), m);
        ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 0);

        dbuf_free(alpha);
        ibuf_free(indep);
        ibuf_free(dep);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

START_TEST(expand_then_independent_round_trips_exactly)
{
    int n = sizes[_i][0], m = sizes[_i][1], d = n - m;
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, 0, case_seed(_i, s));
        cdyn_nullspace *ns = create_factored(&p);
        tu_rng r;
        tu_rng_seed(&r, case_seed(_i, s) + 7);
        double *vbar = malloc(sizeof(double) * (size_t)d);
        ck_assert_ptr_nonnull(vbar);
        tu_random(&r, d, 1, vbar, d);

        double *v = dbuf((size_t)n), *vbar_back = dbuf((size_t)d);
        ck_assert_int_eq(cdyn_nullspace_expand(ns, vbar, v), CDYN_OK);
        ck_assert(dbuf_guards_intact(v, (size_t)n));
        /* W v = 0 at rounding level (see the W alpha test for the scale). */
        double res = rel_residual(m, n, 1, p.W, p.ldw, v, n, NULL, 0, NULL, 0);
        ck_assert_msg(res <= 1e-12, "W v relative residual %g (n=%d m=%d)", res, n, m);

        /* v[independent] is vbar itself (identity rows of alpha): exact. */
        ck_assert_int_eq(cdyn_nullspace_independent(ns, v, vbar_back), CDYN_OK);
        ck_assert(dbuf_guards_intact(vbar_back, (size_t)d));
        for (int k = 0; k < d; ++k) ck_assert_double_eq(vbar_back[k], vbar[k]);

        free(vbar);
        dbuf_free(v);
        dbuf_free(vbar_back);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

/* ======================================================================== */
/* T1.4 / T1.5: reduce, recover, solve.                                     */

/* Loop index: size index * 2 + (0 without c, 1 with c). */
START_TEST(solve_satisfies_dynamics_and_constraints_on_all_rows)
{
    int size_index = _i / 2, with_c = _i % 2;
    int n = sizes[size_index][0], m = sizes[size_index][1];
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, with_c, case_seed(size_index, s));
        cdyn_nullspace *ns = create_factored(&p);
        double *vdot = dbuf((size_t)n), *lambda = dbuf(atleast1(m));
        ck_assert_int_eq(cdyn_nullspace_solve(ns, p.M, p.ldm, p.F, p.c, vdot, lambda), CDYN_OK);
        ck_assert(dbuf_guards_intact(vdot, (size_t)n) && dbuf_guards_intact(lambda, (size_t)m));
        assert_satisfies_dynamics(&p, vdot, lambda);
        dbuf_free(vdot);
        dbuf_free(lambda);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

START_TEST(solve_matches_kkt_reference)
{
    int size_index = _i / 2, with_c = _i % 2;
    int n = sizes[size_index][0], m = sizes[size_index][1];
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, with_c, case_seed(size_index, s));
        cdyn_nullspace *ns = create_factored(&p);
        double *vdot = dbuf((size_t)n), *lambda = dbuf(atleast1(m));
        ck_assert_int_eq(cdyn_nullspace_solve(ns, p.M, p.ldm, p.F, p.c, vdot, lambda), CDYN_OK);
        assert_matches_kkt(&p, vdot, lambda);

        /* lambda = NULL is allowed and does not change v'. */
        double *vdot2 = dbuf((size_t)n);
        ck_assert_int_eq(cdyn_nullspace_solve(ns, p.M, p.ldm, p.F, p.c, vdot2, NULL), CDYN_OK);
        ck_assert(dbuf_guards_intact(vdot2, (size_t)n));
        ck_assert_double_le(rel_diff(n, vdot2, vdot), 1e-14);

        dbuf_free(vdot);
        dbuf_free(vdot2);
        dbuf_free(lambda);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

START_TEST(reduce_gives_alphaT_M_alpha_and_alphaT_F_minus_M_a)
{
    int size_index = _i / 2, with_c = _i % 2;
    int n = sizes[size_index][0], m = sizes[size_index][1], d = n - m;
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, with_c, case_seed(size_index, s));
        cdyn_nullspace *ns = create_factored(&p);
        int *indep = ibuf((size_t)d), *dep = ibuf(atleast1(m));
        get_partition(ns, n, m, indep, dep);

        /* Expected values from T1.2-T1.4 for this partition, built here. */
        double *alpha = malloc(sizeof(double) * (size_t)n * d);
        double *a = malloc(sizeof(double) * (size_t)n);
        double *Mbar_ref = malloc(sizeof(double) * (size_t)d * d);
        double *Fbar_ref = malloc(sizeof(double) * (size_t)d);
        ck_assert(alpha && a && Mbar_ref && Fbar_ref);
        ref_alpha(&p, indep, dep, alpha);
        ref_particular(&p, dep, p.c, a);
        /* the particular rate has zero independent entries and W a = -c */
        if (m > 0 && p.c) {
            double res = 0.0, scale = 0.0;
            for (int i = 0; i < m; ++i) {
                double t = p.c[i], u = fabs(p.c[i]);
                for (int j = 0; j < n; ++j) {
                    t += *W_at(&p, i, j) * a[j];
                    u += fabs(*W_at(&p, i, j) * a[j]);
                }
                res = max_update(res, fabs(t));
                scale = max_update(scale, u);
            }
            ck_assert_double_le(res, 1e-12 * scale);
        }
        for (int k = 0; k < d; ++k) ck_assert_double_eq(a[indep[k]], 0.0);
        double mbar_scale, fbar_scale;
        ref_reduce(&p, alpha, a, Mbar_ref, Fbar_ref, &mbar_scale, &fbar_scale);

        double *Mbar = dbuf((size_t)d * d), *Fbar = dbuf((size_t)d);
        ck_assert_int_eq(cdyn_nullspace_reduce(ns, p.M, p.ldm, p.F, p.c, Mbar, d, Fbar), CDYN_OK);
        ck_assert(dbuf_guards_intact(Mbar, (size_t)d * d) && dbuf_guards_intact(Fbar, (size_t)d));

        /* Both triangles written, symmetric to rounding. */
        for (int j = 0; j < d; ++j)
            for (int i = 0; i < j; ++i)
                ck_assert_double_le(fabs(Mbar[i + j * d] - Mbar[j + i * d]), 1e-12 * mbar_scale);
        /* Equal to the reference within a rounding-level multiple of
         * |alpha|^T |M| |alpha| (alpha itself is accurate to cond(W2) eps). */
        for (int j = 0; j < d; ++j)
            for (int i = 0; i < d; ++i)
                ck_assert_msg(fabs(Mbar[i + j * d] - Mbar_ref[i + j * d]) <= 1e-10 * mbar_scale,
                              "Mbar(%d,%d) = %.17g, expected %.17g (n=%d m=%d)", i, j,
                              Mbar[i + j * d], Mbar_ref[i + j * d], n, m);
        for (int i = 0; i < d; ++i)
            ck_assert_msg(fabs(Fbar[i] - Fbar_ref[i]) <= 1e-10 * fbar_scale,
                          "Fbar(%d) = %.17g, expected %.17g (n=%d m=%d c=%d)", i, Fbar[i],
                          Fbar_ref[i], n, m, with_c);

        free(alpha);
        free(a);
        free(Mbar_ref);
        free(Fbar_ref);
        dbuf_free(Mbar);
        dbuf_free(Fbar);
        ibuf_free(indep);
        ibuf_free(dep);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

START_TEST(recover_from_own_reduced_solution_matches_kkt)
{
    int size_index = _i / 2, with_c = _i % 2;
    int n = sizes[size_index][0], m = sizes[size_index][1], d = n - m;
    for (int s = 0; s < NSEEDS; ++s) {
        problem p;
        problem_init(&p, n, m, 0, with_c, case_seed(size_index, s));
        cdyn_nullspace *ns = create_factored(&p);
        int *indep = ibuf((size_t)d), *dep = ibuf(atleast1(m));
        get_partition(ns, n, m, indep, dep);

        /* vbar' from Mbar vbar' = Fbar, all built and solved in the test. */
        double *alpha = malloc(sizeof(double) * (size_t)n * d);
        double *a = malloc(sizeof(double) * (size_t)n);
        double *Mbar = malloc(sizeof(double) * (size_t)d * d);
        double *vbar_dot = malloc(sizeof(double) * (size_t)d);
        ck_assert(alpha && a && Mbar && vbar_dot);
        double mbar_scale, fbar_scale;
        ref_alpha(&p, indep, dep, alpha);
        ref_particular(&p, dep, p.c, a);
        ref_reduce(&p, alpha, a, Mbar, vbar_dot, &mbar_scale, &fbar_scale);
        ck_assert_int_eq(ge_solve(d, 1, Mbar, d, vbar_dot, d), 0);

        double *vdot = dbuf((size_t)n), *lambda = dbuf(atleast1(m));
        ck_assert_int_eq(cdyn_nullspace_recover(ns, p.M, p.ldm, p.F, p.c, vbar_dot, vdot, lambda),
                         CDYN_OK);
        ck_assert(dbuf_guards_intact(vdot, (size_t)n) && dbuf_guards_intact(lambda, (size_t)m));
        /* v' = Pi [vbar'; vhat']: the independent entries are vbar' itself. */
        for (int k = 0; k < d; ++k) ck_assert_double_eq(vdot[indep[k]], vbar_dot[k]);
        assert_satisfies_dynamics(&p, vdot, lambda);
        assert_matches_kkt(&p, vdot, lambda);

        /* lambda = NULL is allowed; v' is the same. */
        double *vdot2 = dbuf((size_t)n);
        ck_assert_int_eq(cdyn_nullspace_recover(ns, p.M, p.ldm, p.F, p.c, vbar_dot, vdot2, NULL),
                         CDYN_OK);
        ck_assert(dbuf_guards_intact(vdot2, (size_t)n));
        ck_assert_double_le(rel_diff(n, vdot2, vdot), 1e-14);

        free(alpha);
        free(a);
        free(Mbar);
        free(vbar_dot);
        dbuf_free(vdot);
        dbuf_free(vdot2);
        dbuf_free(lambda);
        ibuf_free(indep);
        ibuf_free(dep);
        cdyn_nullspace_free(ns);
        problem_free(&p);
    }
}
END_TEST

/* Every matrix with a leading dimension larger than its row count, NaN in the
 * input padding and sentinels in the output padding: the padding is neither
 * read nor written, and the results are still right. */
START_TEST(leading_dimensions_larger_than_rows_are_respected)
{
    const int n = 9, m = 3, d = n - m, pad = 3;
    problem p;
    problem_init(&p, n, m, pad, 1, 777);
    cdyn_nullspace *ns = create_factored(&p);
    int *indep = ibuf((size_t)d), *dep = ibuf((size_t)m);
    get_partition(ns, n, m, indep, dep);

    int lda = n + 2, ldmbar = d + 2, ldwdot = m + pad;
    double *alpha = dbuf((size_t)lda * d);
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, lda), CDYN_OK);
    ck_assert(dbuf_guards_intact(alpha, (size_t)lda * d));
    for (int j = 0; j < d; ++j)
        for (int i = n; i < lda; ++i) ck_assert_double_eq(alpha[i + j * lda], SENTINEL);
    ck_assert_double_le(rel_residual(m, n, d, p.W, p.ldw, alpha, lda, NULL, 0, NULL, 0), 1e-12);

    /* alpha_dot with a padded Wdot (random, NaN padding) */
    tu_rng r;
    tu_rng_seed(&r, 778);
    double *Wdot = malloc(sizeof(double) * (size_t)ldwdot * n);
    ck_assert_ptr_nonnull(Wdot);
    for (int i = 0; i < ldwdot * n; ++i) Wdot[i] = NAN;
    tu_random(&r, m, n, Wdot, ldwdot);
    double *alpha_dot = dbuf((size_t)lda * d);
    ck_assert_int_eq(cdyn_nullspace_alpha_dot(ns, Wdot, ldwdot, alpha_dot, lda), CDYN_OK);
    ck_assert(dbuf_guards_intact(alpha_dot, (size_t)lda * d));
    for (int j = 0; j < d; ++j)
        for (int i = n; i < lda; ++i) ck_assert_double_eq(alpha_dot[i + j * lda], SENTINEL);
    /* W alpha' + W' alpha = 0 */
    ck_assert_double_le(rel_residual(m, n, d, p.W, p.ldw, alpha_dot, lda, Wdot, ldwdot, alpha, lda),
                        1e-12);

    /* reduce into a padded Mbar */
    double *Mbar = dbuf((size_t)ldmbar * d), *Fbar = dbuf((size_t)d);
    ck_assert_int_eq(cdyn_nullspace_reduce(ns, p.M, p.ldm, p.F, p.c, Mbar, ldmbar, Fbar), CDYN_OK);
    ck_assert(dbuf_guards_intact(Mbar, (size_t)ldmbar * d));
    for (int j = 0; j < d; ++j)
        for (int i = d; i < ldmbar; ++i) ck_assert_double_eq(Mbar[i + j * ldmbar], SENTINEL);
    double *ralpha = malloc(sizeof(double) * (size_t)n * d), *a = malloc(sizeof(double) * n);
    double *Mbar_ref = malloc(sizeof(double) * (size_t)d * d),
           *Fbar_ref = malloc(sizeof(double) * d);
    ck_assert(ralpha && a && Mbar_ref && Fbar_ref);
    double mbar_scale, fbar_scale;
    ref_alpha(&p, indep, dep, ralpha);
    ref_particular(&p, dep, p.c, a);
    ref_reduce(&p, ralpha, a, Mbar_ref, Fbar_ref, &mbar_scale, &fbar_scale);
    for (int j = 0; j < d; ++j)
        for (int i = 0; i < d; ++i)
            ck_assert_double_le(fabs(Mbar[i + j * ldmbar] - Mbar_ref[i + j * d]),
                                1e-10 * mbar_scale);
    for (int i = 0; i < d; ++i)
        ck_assert_double_le(fabs(Fbar[i] - Fbar_ref[i]), 1e-10 * fbar_scale);

    /* solve and recover with the padded M */
    assert_solve_correct(ns, &p);
    ck_assert_int_eq(ge_solve(d, 1, Mbar_ref, d, Fbar_ref, d), 0);
    double *vdot = dbuf((size_t)n), *lambda = dbuf((size_t)m);
    ck_assert_int_eq(cdyn_nullspace_recover(ns, p.M, p.ldm, p.F, p.c, Fbar_ref, vdot, lambda),
                     CDYN_OK);
    assert_matches_kkt(&p, vdot, lambda);

    /* update with a padded W */
    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns, p.W, p.ldw, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 0);

    free(Wdot);
    free(ralpha);
    free(a);
    free(Mbar_ref);
    free(Fbar_ref);
    dbuf_free(alpha);
    dbuf_free(alpha_dot);
    dbuf_free(Mbar);
    dbuf_free(Fbar);
    dbuf_free(vdot);
    dbuf_free(lambda);
    ibuf_free(indep);
    ibuf_free(dep);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* T1.3: time-varying W.                                                     */

static const int tv_sizes[][2] = {{3, 1}, {5, 2}, {10, 4}, {30, 12}};
enum { NTV = (int)(sizeof tv_sizes / sizeof tv_sizes[0]) };

/* W(t) = W0 + t W1 into W (m x n, ld m). */
static void W_of_t(int m, int n, const double *W0, const double *W1, double t, double *W)
{
    for (int i = 0; i < m * n; ++i) W[i] = W0[i] + t * W1[i];
}

START_TEST(alpha_dot_matches_central_difference_of_alpha)
{
    int n = tv_sizes[_i][0], m = tv_sizes[_i][1], d = n - m;
    const double t = 0.3, h = 1e-6;
    for (int s = 0; s < 2; ++s) {
        tu_rng r;
        tu_rng_seed(&r, 5000 + 17 * (unsigned long long)_i + (unsigned long long)s);
        double *W0 = malloc(sizeof(double) * (size_t)m * n),
               *W1 = malloc(sizeof(double) * (size_t)m * n);
        double *Wt = malloc(sizeof(double) * (size_t)m * n),
               *Wh = malloc(sizeof(double) * (size_t)m * n);
        ck_assert(W0 && W1 && Wt && Wh);
        tu_random(&r, m, n, W0, m);
        tu_random(&r, m, n, W1, m);
        W_of_t(m, n, W0, W1, t, Wt);

        cdyn_nullspace *ns = create_ok(n, m), *ns_plus = create_ok(n, m),
                       *ns_minus = create_ok(n, m);
        ck_assert_int_eq(cdyn_nullspace_factor(ns, Wt, m), CDYN_OK);
        /* The difference needs alpha(t +- h) for the same partition: factor
         * at t, then update keeps it (checked via changed and the partition). */
        int changed = ISENTINEL;
        ck_assert_int_eq(cdyn_nullspace_factor(ns_plus, Wt, m), CDYN_OK);
        W_of_t(m, n, W0, W1, t + h, Wh);
        ck_assert_int_eq(cdyn_nullspace_update(ns_plus, Wh, m, &changed), CDYN_OK);
        ck_assert_int_eq(changed, 0);
        ck_assert_int_eq(cdyn_nullspace_factor(ns_minus, Wt, m), CDYN_OK);
        W_of_t(m, n, W0, W1, t - h, Wh);
        changed = ISENTINEL;
        ck_assert_int_eq(cdyn_nullspace_update(ns_minus, Wh, m, &changed), CDYN_OK);
        ck_assert_int_eq(changed, 0);
        int *p0 = ibuf((size_t)n), *pp = ibuf((size_t)n), *pm = ibuf((size_t)n);
        ck_assert_int_ge(cdyn_nullspace_partition(ns, p0, p0 + d), 0);
        ck_assert_int_ge(cdyn_nullspace_partition(ns_plus, pp, pp + d), 0);
        ck_assert_int_ge(cdyn_nullspace_partition(ns_minus, pm, pm + d), 0);
        for (int i = 0; i < n; ++i) {
            ck_assert_int_eq(pp[i], p0[i]);
            ck_assert_int_eq(pm[i], p0[i]);
        }

        double *alpha = dbuf((size_t)n * d), *alpha_dot = dbuf((size_t)n * d);
        double *a_plus = dbuf((size_t)n * d), *a_minus = dbuf((size_t)n * d);
        ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
        ck_assert_int_eq(cdyn_nullspace_alpha_dot(ns, W1, m, alpha_dot, n), CDYN_OK);
        ck_assert(dbuf_guards_intact(alpha_dot, (size_t)n * d));
        ck_assert_int_eq(cdyn_nullspace_alpha(ns_plus, a_plus, n), CDYN_OK);
        ck_assert_int_eq(cdyn_nullspace_alpha(ns_minus, a_minus, n), CDYN_OK);

        /* Central difference: truncation h^2/6 |alpha'''| ~ 1e-12, rounding
         * eps |alpha| / h ~ 1e-10 |alpha|; 1e-7 of max(|alpha'|, |alpha|)
         * keeps a factor of ~1000 above both. */
        double scale = fmax(tu_max_abs(n, d, alpha_dot, n), tu_max_abs(n, d, alpha, n));
        double worst = 0.0;
        for (int i = 0; i < n * d; ++i)
            worst = max_update(worst, fabs(alpha_dot[i] - (a_plus[i] - a_minus[i]) / (2.0 * h)));
        ck_assert_msg(worst <= 1e-7 * scale,
                      "alpha' vs central difference: %g (scale %g, n=%d m=%d)", worst, scale, n, m);

        /* alpha' = Pi [0; ...]: independent rows exactly zero. */
        for (int j = 0; j < d; ++j)
            for (int k = 0; k < d; ++k) ck_assert_double_eq(alpha_dot[p0[k] + j * n], 0.0);
        /* W alpha' = -W' alpha (rounding-level, see the W alpha test). */
        double res = rel_residual(m, n, d, Wt, m, alpha_dot, n, W1, m, alpha, n);
        ck_assert_msg(res <= 1e-12, "W alpha' + W' alpha relative residual %g", res);

        dbuf_free(alpha);
        dbuf_free(alpha_dot);
        dbuf_free(a_plus);
        dbuf_free(a_minus);
        ibuf_free(p0);
        ibuf_free(pp);
        ibuf_free(pm);
        cdyn_nullspace_free(ns);
        cdyn_nullspace_free(ns_plus);
        cdyn_nullspace_free(ns_minus);
        free(W0);
        free(W1);
        free(Wt);
        free(Wh);
    }
}
END_TEST

/* T1.3: alpha' vbar = -Pi [0; W2^{-1} W' v] with v = alpha vbar, i.e. the
 * particular rate for c = W' v. Ties the alpha_dot output to the c argument
 * of reduce/recover/solve. */
START_TEST(alpha_dot_times_vbar_is_particular_rate_for_c_equal_Wdot_v)
{
    int n = tv_sizes[_i][0], m = tv_sizes[_i][1], d = n - m;
    problem p;
    problem_init(&p, n, m, 0, 0, 6000 + (unsigned long long)_i);
    tu_rng r;
    tu_rng_seed(&r, 6100 + (unsigned long long)_i);
    double *Wdot = malloc(sizeof(double) * (size_t)m * n), *vbar = malloc(sizeof(double) * d);
    double *c = malloc(sizeof(double) * m), *a_ref = malloc(sizeof(double) * n);
    double *a = malloc(sizeof(double) * n);
    ck_assert(Wdot && vbar && c && a_ref && a);
    tu_random(&r, m, n, Wdot, m);
    tu_random(&r, d, 1, vbar, d);

    cdyn_nullspace *ns = create_factored(&p);
    int *indep = ibuf((size_t)d), *dep = ibuf((size_t)m);
    get_partition(ns, n, m, indep, dep);
    double *v = dbuf((size_t)n), *alpha_dot = dbuf((size_t)n * d);
    ck_assert_int_eq(cdyn_nullspace_expand(ns, vbar, v), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_alpha_dot(ns, Wdot, m, alpha_dot, n), CDYN_OK);
    tu_matvec(m, n, Wdot, m, v, c);
    ref_particular(&p, dep, c, a_ref);
    tu_matvec(n, d, alpha_dot, n, vbar, a);
    double err = rel_diff(n, a, a_ref);
    ck_assert_msg(err <= 1e-10, "alpha' vbar differs from -Pi[0; W2^-1 W' v] by %g relative", err);

    free(Wdot);
    free(vbar);
    free(c);
    free(a_ref);
    free(a);
    dbuf_free(v);
    dbuf_free(alpha_dot);
    ibuf_free(indep);
    ibuf_free(dep);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* Choice of the partition.                                                  */

/* Hand example: the last two columns of W are equal, so the naive choice
 * "dependent = last m columns" gives W2 = [6 6; 8 8], det = 0. They are also
 * the largest columns, so a correct pivoted QR takes one of them first and
 * then must not take the other (its residual after the first is zero). */
START_TEST(pivoting_avoids_equal_trailing_columns)
{
    const int n = 5, m = 2, d = n - m;
    const double W[] = {0.3, 0.1, -0.2, 0.4, 0.5, -0.3, 6.0, 8.0, 6.0, 8.0};
    problem p;
    problem_init(&p, n, m, 0, 1, 9001);
    memcpy(p.W, W, sizeof W);
    cdyn_nullspace *ns = create_factored(&p);
    int indep[3], dep[2];
    get_partition(ns, n, m, indep, dep);
    ck_assert_msg(!(contains(m, dep, 3) && contains(m, dep, 4)),
                  "dependent set {%d,%d} is the singular pair", dep[0], dep[1]);
    ck_assert(contains(m, dep, 3) || contains(m, dep, 4));
    double kappa = kappa1_W2(&p, dep);
    ck_assert_msg(isfinite(kappa) && kappa < 1e6, "kappa1(W2) = %g", kappa);

    double alpha[5 * 3];
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
    ck_assert_double_le(rel_residual(m, n, d, p.W, p.ldw, alpha, n, NULL, 0, NULL, 0), 1e-12);
    assert_solve_correct(ns, &p);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* Random 6 x 20 W whose last six columns hold a zero column (17) and two
 * equal large columns (18, 19): the trailing block is singular, a zero column
 * can never be in a nonsingular W2, and at most one of 18, 19 can. */
START_TEST(pivoting_avoids_zero_and_repeated_columns)
{
    const int n = 20, m = 6;
    problem p;
    problem_init(&p, n, m, 0, 1, 9002);
    for (int i = 0; i < m; ++i) {
        *W_at(&p, i, 17) = 0.0;
        *W_at(&p, i, 18) = 5.0 * *W_at(&p, i, 18);
        *W_at(&p, i, 19) = *W_at(&p, i, 18);
    }
    cdyn_nullspace *ns = create_factored(&p);
    int indep[14], dep[6];
    get_partition(ns, n, m, indep, dep);
    ck_assert(!contains(m, dep, 17));
    ck_assert(!(contains(m, dep, 18) && contains(m, dep, 19)));
    double kappa = kappa1_W2(&p, dep);
    ck_assert_msg(isfinite(kappa) && kappa < 1e6, "kappa1(W2) = %g", kappa);
    double *alpha = malloc(sizeof(double) * n * (n - m));
    ck_assert_ptr_nonnull(alpha);
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
    ck_assert_double_le(rel_residual(m, n, n - m, p.W, p.ldw, alpha, n, NULL, 0, NULL, 0), 1e-12);
    assert_solve_correct(ns, &p);
    free(alpha);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

START_TEST(update_keeps_partition_for_small_perturbation)
{
    const int n = 10, m = 4, d = n - m;
    problem p;
    problem_init(&p, n, m, 0, 1, 9100);
    cdyn_nullspace *ns = create_factored(&p);
    int before[10], after[10];
    get_partition(ns, n, m, before, before + d);

    tu_rng r;
    tu_rng_seed(&r, 9101);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) *W_at(&p, i, j) += 1e-6 * tu_uniform(&r);
    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns, p.W, p.ldw, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 0);
    get_partition(ns, n, m, after, after + d);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(after[i], before[i]);
    double est = cdyn_nullspace_condition(ns);
    ck_assert(isfinite(est));
    ck_assert_double_ge(est, 1.0);
    ck_assert_double_le(est, kappa1_W2(&p, after + d) * (1.0 + 1e-6));
    assert_solve_correct(ns, &p); /* the new W, not the old one */

    /* changed may be NULL */
    for (int j = 0; j < n; ++j) *W_at(&p, 0, j) += 1e-7;
    ck_assert_int_eq(cdyn_nullspace_update(ns, p.W, p.ldw, NULL), CDYN_OK);
    assert_solve_correct(ns, &p);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

START_TEST(update_before_first_factor_acts_as_factor)
{
    const int n = 8, m = 3;
    problem p;
    problem_init(&p, n, m, 0, 1, 9150);
    cdyn_nullspace *ns = create_ok(n, m), *ref = create_factored(&p);
    ck_assert_int_eq(cdyn_nullspace_update(ns, p.W, p.ldw, NULL), CDYN_OK);
    int pa[8], pb[8];
    get_partition(ns, n, m, pa, pa + n - m);
    get_partition(ref, n, m, pb, pb + n - m);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(pa[i], pb[i]);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m);
    assert_solve_correct(ns, &p);
    cdyn_nullspace_free(ns);
    cdyn_nullspace_free(ref);
    problem_free(&p);
}
END_TEST

/* Copy a dependent column onto another dependent column: W2 becomes exactly
 * rank deficient (two equal columns) while W keeps full row rank (the other
 * n - 1 columns are generic), so update must choose a new partition. */
START_TEST(update_reselects_when_W2_becomes_singular)
{
    const int n = 10, m = 4, d = n - m;
    problem p;
    problem_init(&p, n, m, 0, 1, 9200);
    cdyn_nullspace *ns = create_factored(&p);
    int before[10], after[10];
    get_partition(ns, n, m, before, before + d);
    const int *dep = before + d;
    for (int i = 0; i < m; ++i) *W_at(&p, i, dep[1]) = *W_at(&p, i, dep[0]);
    ck_assert(!isfinite(kappa1_W2(&p, dep)) || kappa1_W2(&p, dep) > 1e14);

    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns, p.W, p.ldw, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 1);
    get_partition(ns, n, m, after, after + d);
    ck_assert(!(contains(m, after + d, dep[0]) && contains(m, after + d, dep[1])));
    double kappa = kappa1_W2(&p, after + d);
    ck_assert_msg(isfinite(kappa) && kappa < 1e8, "new kappa1(W2) = %g", kappa);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m);
    double *alpha = malloc(sizeof(double) * n * d);
    ck_assert_ptr_nonnull(alpha);
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
    ck_assert_double_le(rel_residual(m, n, d, p.W, p.ldw, alpha, n, NULL, 0, NULL, 0), 1e-12);
    assert_solve_correct(ns, &p);
    free(alpha);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* Hand example, n = 4, m = 2. The partition and the condition are decided
 * on the equilibrated W (rows, then columns, scaled by powers of two to a
 * largest entry in [1/2, 1); cond of the equilibrated W2): every row and
 * column of Wa and Wb already has its largest entry in [1/2, 1), so
 * equilibration leaves them unchanged and the hand values hold as written.
 * Wa = [.75 0 .5 .5; 0 .625 .5 -.5]: pivoted QR takes column 0 (norm 0.75
 * against 0.707 and 0.625), then column 1 (residual norm 0.625 against 0.5
 * and 0.5): dependent {0, 1}.
 * Wb = [.5 .25 .75 0; .25 .5 0 .625]: columns {0, 1} give W2 = [.5 .25;
 * .25 .5], det = 0.1875, W2^{-1} = [.5 -.25; -.25 .5] / 0.1875, kappa1 =
 * 0.75 * 4 = 3 -- well below the default limit 1e8, so update keeps {0, 1};
 * above a limit of 1, so with that limit update reselects: column 2 (norm
 * 0.75 against 0.625 and 0.559), then column 3 (residual 0.625 against 0.5
 * and 0.25): dependent {2, 3}, W2 = diag(.75, .625), kappa1 = 1.2. */
START_TEST(update_reselects_when_condition_exceeds_limit)
{
    const int n = 4, m = 2;
    const double Wa[] = {0.75, 0, 0, 0.625, 0.5, 0.5, 0.5, -0.5};
    const double Wb[] = {0.5, 0.25, 0.25, 0.5, 0.75, 0, 0, 0.625};
    problem p;
    problem_init(&p, n, m, 0, 1, 9300);
    memcpy(p.W, Wb, sizeof Wb);
    cdyn_nullspace *keep = create_ok(n, m), *strict = create_ok(n, m);
    /* an invalid limit is rejected and leaves the default in place */
    ck_assert_int_eq(cdyn_nullspace_set_condition_limit(keep, 0.5), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_nullspace_set_condition_limit(strict, 1.0), CDYN_OK);
    int part[4], changed;

    ck_assert_int_eq(cdyn_nullspace_factor(keep, Wa, m), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(strict, Wa, m), CDYN_OK);
    get_partition(strict, n, m, part, part + 2);
    ck_assert(contains(2, part + 2, 0) && contains(2, part + 2, 1));

    changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(keep, Wb, m, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 0);
    get_partition(keep, n, m, part, part + 2);
    ck_assert(contains(2, part + 2, 0) && contains(2, part + 2, 1));
    ck_assert_double_le(cdyn_nullspace_condition(keep), 3.0 * (1.0 + 1e-12));
    ck_assert_double_ge(cdyn_nullspace_condition(keep), 1.0);
    assert_solve_correct(keep, &p);

    changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(strict, Wb, m, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 1);
    get_partition(strict, n, m, part, part + 2);
    ck_assert(contains(2, part + 2, 2) && contains(2, part + 2, 3));
    ck_assert_double_eq_tol(cdyn_nullspace_condition(strict), 1.2, 1e-12);
    assert_solve_correct(strict, &p);

    /* Same W again: reselection picks the same columns, so nothing changed. */
    changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(strict, Wb, m, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 0);
    assert_solve_correct(strict, &p);

    cdyn_nullspace_free(keep);
    cdyn_nullspace_free(strict);
    problem_free(&p);
}
END_TEST

/* set_preferred_dependent: marked states become dependent when their columns
 * of W are independent (generic random columns, at most m of them); with
 * more than m marked, the dependent set is drawn from the marked ones; a
 * marked zero column can never be in a nonsingular W2; NULL clears. */
START_TEST(preferred_states_become_dependent)
{
    const int n = 8, m = 3, d = n - m;
    problem p;
    problem_init(&p, n, m, 0, 1, 9350);
    for (int i = 0; i < m; ++i) *W_at(&p, i, 2) = 0.0;
    cdyn_nullspace *ns = create_ok(n, m), *plain = create_factored(&p);
    int part[8], ref[8];
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(NULL, NULL), CDYN_ERR_ARG);

    const int two[8] = {0, 1, 0, 0, 0, 1, 0, 0};
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(ns, two), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    get_partition(ns, n, m, part, part + d);
    ck_assert(contains(m, part + d, 1) && contains(m, part + d, 5));
    ck_assert(isfinite(kappa1_W2(&p, part + d)));
    assert_solve_correct(ns, &p);

    const int five[8] = {1, 1, 0, 1, 1, 0, 0, 1};
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(ns, five), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    get_partition(ns, n, m, part, part + d);
    for (int i = 0; i < m; ++i)
        ck_assert_msg(five[part[d + i]], "state %d not marked", part[d + i]);
    assert_solve_correct(ns, &p);

    const int zero_col[8] = {0, 0, 1, 0, 0, 0, 1, 0};
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(ns, zero_col), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    get_partition(ns, n, m, part, part + d);
    ck_assert(contains(m, part + d, 6) && !contains(m, part + d, 2));
    assert_solve_correct(ns, &p);

    /* NULL clears: the same partition as an object without preference */
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(ns, NULL), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    get_partition(ns, n, m, part, part + d);
    get_partition(plain, n, m, ref, ref + d);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(part[i], ref[i]);
    cdyn_nullspace_free(ns);
    cdyn_nullspace_free(plain);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* Rank-deficient W.                                                         */

/* Remove row `drop` from p's W into a new (m-1) x n matrix (ld m-1) and check
 * that it has full rank by factoring it: the named row was indeed redundant. */
static void assert_rest_has_full_rank(const problem *p, int drop)
{
    int m1 = p->m - 1;
    double *Wr = malloc(sizeof(double) * atleast1(m1 * p->n));
    ck_assert_ptr_nonnull(Wr);
    for (int j = 0; j < p->n; ++j)
        for (int i = 0, k = 0; i < p->m; ++i)
            if (i != drop) Wr[k++ + j * m1] = *W_at(p, i, j);
    cdyn_nullspace *ns = create_ok(p->n, m1);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, Wr, m1 > 0 ? m1 : 1), CDYN_OK);
    cdyn_nullspace_free(ns);
    free(Wr);
}

/* Row 2 = row 0 + row 1 (rows 3 and 4 generic). The only relation is
 * r0 + r1 - r2 = 0: it involves rows 0, 1 and 2 with nonzero coefficients,
 * so dropping any one of them restores full rank (a valid answer), while
 * dropping row 3 or 4 leaves the relation in place. */
START_TEST(rank_deficient_W_is_reported_with_a_redundant_row)
{
    const int n = 8, m = 5;
    problem p;
    problem_init(&p, n, m, 0, 0, 9400);
    for (int j = 0; j < n; ++j) *W_at(&p, 2, j) = *W_at(&p, 0, j) + *W_at(&p, 1, j);
    cdyn_nullspace *ns = create_ok(n, m);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_ERR_SINGULAR);
    assert_message_set(ns, "factor(rank deficient W)");
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m - 1);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 1);
    int *rows = ibuf(1);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, rows), 1);
    ck_assert(ibuf_guards_intact(rows, 1));
    ck_assert_msg(rows[0] == 0 || rows[0] == 1 || rows[0] == 2, "named row %d", rows[0]);
    assert_rest_has_full_rank(&p, rows[0]);
    ibuf_free(rows);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* A zero row is the only redundant one: dropping any other row leaves the
 * zero row, and W still rank deficient. Via update, too. */
START_TEST(zero_row_is_named_as_redundant)
{
    const int n = 6, m = 3;
    problem p;
    problem_init(&p, n, m, 0, 0, 9500);
    for (int j = 0; j < n; ++j) *W_at(&p, 1, j) = 0.0;
    cdyn_nullspace *ns = create_ok(n, m);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_ERR_SINGULAR);
    assert_message_set(ns, "factor(zero row)");
    ck_assert_int_eq(cdyn_nullspace_rank(ns), 2);
    int *rows = ibuf(1);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, rows), 1);
    ck_assert(ibuf_guards_intact(rows, 1));
    ck_assert_int_eq(rows[0], 1);
    ibuf_free(rows);

    cdyn_nullspace *ns2 = create_ok(n, m);
    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns2, p.W, p.ldw, &changed), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(changed, ISENTINEL);
    int row = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns2, &row), 1);
    ck_assert_int_eq(row, 1);
    cdyn_nullspace_free(ns);
    cdyn_nullspace_free(ns2);
    problem_free(&p);
}
END_TEST

START_TEST(failed_factor_keeps_previous_factorization)
{
    const int n = 8, m = 3, d = n - m;
    problem good, bad;
    problem_init(&good, n, m, 0, 1, 9600);
    problem_init(&bad, n, m, 0, 1, 9601);
    for (int j = 0; j < n; ++j) *W_at(&bad, 2, j) = *W_at(&bad, 0, j) - 2.0 * *W_at(&bad, 1, j);

    cdyn_nullspace *ns = create_factored(&good);
    int before[8], after[8];
    get_partition(ns, n, m, before, before + d);
    double cond_before = cdyn_nullspace_condition(ns);

    ck_assert_int_eq(cdyn_nullspace_factor(ns, bad.W, bad.ldw), CDYN_ERR_SINGULAR);
    assert_message_set(ns, "factor(rank deficient W)");
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m - 1);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 1);
    /* The old factorization answers as before: same partition, condition,
     * alpha in the null space of the old W, solve = KKT of the old W. */
    get_partition(ns, n, m, after, after + d);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(after[i], before[i]);
    ck_assert_double_eq(cdyn_nullspace_condition(ns), cond_before);
    double *alpha = malloc(sizeof(double) * n * d);
    ck_assert_ptr_nonnull(alpha);
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
    ck_assert_double_le(rel_residual(m, n, d, good.W, good.ldw, alpha, n, NULL, 0, NULL, 0), 1e-12);
    assert_solve_correct(ns, &good);

    /* A failed update keeps it too, and does not write changed. */
    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns, bad.W, bad.ldw, &changed), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(changed, ISENTINEL);
    assert_solve_correct(ns, &good);

    /* A new good W is factored normally afterwards. */
    problem other;
    problem_init(&other, n, m, 0, 1, 9602);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, other.W, other.ldw), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 0);
    assert_solve_correct(ns, &other);

    free(alpha);
    cdyn_nullspace_free(ns);
    problem_free(&good);
    problem_free(&bad);
    problem_free(&other);
}
END_TEST

START_TEST(failed_first_factor_leaves_object_unfactored_and_usable)
{
    const int n = 6, m = 2;
    problem p;
    problem_init(&p, n, m, 0, 1, 9700);
    double saved[6];
    for (int j = 0; j < n; ++j) {
        saved[j] = *W_at(&p, 1, j);
        *W_at(&p, 1, j) = 3.0 * *W_at(&p, 0, j);
    }
    cdyn_nullspace *ns = create_ok(n, m);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), 1);
    int *part = ibuf((size_t)n);
    ck_assert_int_eq(cdyn_nullspace_partition(ns, part, part + n - m), -1);
    ck_assert(ibuf_untouched(part, (size_t)n));
    ck_assert(isnan(cdyn_nullspace_condition(ns)));
    double *alpha = dbuf((size_t)n * (n - m));
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(alpha, (size_t)n * (n - m)));

    for (int j = 0; j < n; ++j) *W_at(&p, 1, j) = saved[j];
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    assert_solve_correct(ns, &p);
    ibuf_free(part);
    dbuf_free(alpha);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* Row 2 = row 0 + row 1 + 1e-8 e: the third pivot of the pivoted QR is about
 * 1e-8 relative to the first, between the default tolerance 1e-12 (full
 * rank) and 1e-6 (rank deficient) by four orders of magnitude each way. */
START_TEST(rank_tolerance_decides_nearly_dependent_rows)
{
    const int n = 8, m = 4;
    problem p;
    problem_init(&p, n, m, 0, 1, 9800);
    tu_rng r;
    tu_rng_seed(&r, 9801);
    for (int j = 0; j < n; ++j)
        *W_at(&p, 2, j) = *W_at(&p, 0, j) + *W_at(&p, 1, j) + 1e-8 * tu_uniform(&r);
    cdyn_nullspace *ns = create_ok(n, m);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m);

    ck_assert_int_eq(cdyn_nullspace_set_rank_tolerance(ns, 1e-6), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), m - 1);
    int row = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, &row), 1);
    ck_assert(row == 0 || row == 1 || row == 2);

    /* rejected values leave 1e-6 in place */
    const double badtol[] = {0.0, 1.0, -1e-3, 1.5, NAN, INFINITY};
    for (size_t k = 0; k < sizeof badtol / sizeof badtol[0]; ++k)
        ck_assert_int_eq(cdyn_nullspace_set_rank_tolerance(ns, badtol[k]), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_ERR_SINGULAR);

    ck_assert_int_eq(cdyn_nullspace_set_rank_tolerance(ns, 1e-12), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, p.ldw), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 0);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* m = 0.                                                                    */

START_TEST(without_constraints_alpha_is_permutation_and_solve_is_M_inverse_F)
{
    const int n = 5;
    problem p;
    problem_init(&p, n, 0, 0, 0, 9900);
    cdyn_nullspace *ns = create_ok(n, 0);
    ck_assert_int_eq(cdyn_nullspace_rows(ns), 0);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, NULL, 1), CDYN_OK); /* NULL W allowed when m = 0 */
    /* W is 0 x n: its (NaN) storage holds no entries and must not be read */
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, 1), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_rank(ns), 0);
    ck_assert_double_eq(cdyn_nullspace_condition(ns), 1.0);
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(ns, NULL), 0);
    int indep[5];
    get_partition(ns, n, 0, indep, NULL);

    /* alpha is the permutation matrix with alpha(indep[k], k) = 1 */
    double *alpha = dbuf(25);
    ck_assert_int_eq(cdyn_nullspace_alpha(ns, alpha, n), CDYN_OK);
    ck_assert(dbuf_guards_intact(alpha, 25));
    for (int k = 0; k < n; ++k)
        for (int i = 0; i < n; ++i)
            ck_assert_double_eq(alpha[i + k * n], i == indep[k] ? 1.0 : 0.0);

    /* alpha' = 0 (nothing depends on W) */
    double Wdot_dummy[1] = {0.0};
    double *alpha_dot = dbuf(25);
    ck_assert_int_eq(cdyn_nullspace_alpha_dot(ns, Wdot_dummy, 1, alpha_dot, n), CDYN_OK);
    for (int i = 0; i < 25; ++i) ck_assert_double_eq(alpha_dot[i], 0.0);
    ck_assert(dbuf_guards_intact(alpha_dot, 25));

    /* Mbar is M with rows and columns permuted: exact (products with 0 and 1) */
    double *Mbar = dbuf(25), *Fbar = dbuf(5);
    ck_assert_int_eq(cdyn_nullspace_reduce(ns, p.M, p.ldm, p.F, NULL, Mbar, n, Fbar), CDYN_OK);
    for (int l = 0; l < n; ++l) {
        ck_assert_double_eq(Fbar[l], p.F[indep[l]]);
        for (int k = 0; k < n; ++k)
            ck_assert_double_eq(Mbar[k + l * n], p.M[indep[k] + indep[l] * p.ldm]);
    }

    /* v' = M^{-1} F: residual of M v' = F and agreement with dgesv */
    double *vdot = dbuf(5), *lambda = dbuf(1);
    ck_assert_int_eq(cdyn_nullspace_solve(ns, p.M, p.ldm, p.F, NULL, vdot, lambda), CDYN_OK);
    ck_assert(dbuf_untouched(lambda, 1)); /* length m = 0: nothing written */
    ck_assert(dbuf_guards_intact(vdot, 5));
    assert_satisfies_dynamics(&p, vdot, lambda);
    assert_matches_kkt(&p, vdot, lambda);
    ck_assert_int_eq(cdyn_nullspace_solve(ns, p.M, p.ldm, p.F, NULL, vdot, NULL), CDYN_OK);
    assert_matches_kkt(&p, vdot, lambda);

    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_update(ns, NULL, 1, &changed), CDYN_OK);
    ck_assert_int_eq(changed, 0);

    dbuf_free(alpha);
    dbuf_free(alpha_dot);
    dbuf_free(Mbar);
    dbuf_free(Fbar);
    dbuf_free(vdot);
    dbuf_free(lambda);
    cdyn_nullspace_free(ns);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* Bad input. A fixture: a factored 7 x 3 problem with c, valid inputs, and   */
/* guarded output buffers that must stay all-SENTINEL through every failure.  */

typedef struct {
    problem p;
    cdyn_nullspace *ns;
    int n, m, d;
    int indep[4], dep[3];
    double *vbar_in, *v_in, *Wdot, *vbar_dot_in;                        /* valid inputs */
    double *alpha, *alpha_dot, *v, *vbar, *Mbar, *Fbar, *vdot, *lambda; /* outputs */
    int *rows;
} fixture;

static void fixture_init(fixture *fx)
{
    fx->n = 7;
    fx->m = 3;
    fx->d = 4;
    problem_init(&fx->p, fx->n, fx->m, 0, 1, 31337);
    fx->ns = create_factored(&fx->p);
    get_partition(fx->ns, fx->n, fx->m, fx->indep, fx->dep);
    tu_rng r;
    tu_rng_seed(&r, 31338);
    fx->vbar_in = malloc(sizeof(double) * fx->d);
    fx->v_in = malloc(sizeof(double) * fx->n);
    fx->Wdot = malloc(sizeof(double) * fx->m * fx->n);
    fx->vbar_dot_in = malloc(sizeof(double) * fx->d);
    ck_assert(fx->vbar_in && fx->v_in && fx->Wdot && fx->vbar_dot_in);
    tu_random(&r, fx->d, 1, fx->vbar_in, fx->d);
    tu_random(&r, fx->n, 1, fx->v_in, fx->n);
    tu_random(&r, fx->m, fx->n, fx->Wdot, fx->m);
    tu_random(&r, fx->d, 1, fx->vbar_dot_in, fx->d);
    fx->alpha = dbuf((size_t)fx->n * fx->d);
    fx->alpha_dot = dbuf((size_t)fx->n * fx->d);
    fx->v = dbuf((size_t)fx->n);
    fx->vbar = dbuf((size_t)fx->d);
    fx->Mbar = dbuf((size_t)fx->d * fx->d);
    fx->Fbar = dbuf((size_t)fx->d);
    fx->vdot = dbuf((size_t)fx->n);
    fx->lambda = dbuf((size_t)fx->m);
    fx->rows = ibuf((size_t)fx->m);
}

static void fixture_free(fixture *fx)
{
    cdyn_nullspace_free(fx->ns);
    problem_free(&fx->p);
    free(fx->vbar_in);
    free(fx->v_in);
    free(fx->Wdot);
    free(fx->vbar_dot_in);
    dbuf_free(fx->alpha);
    dbuf_free(fx->alpha_dot);
    dbuf_free(fx->v);
    dbuf_free(fx->vbar);
    dbuf_free(fx->Mbar);
    dbuf_free(fx->Fbar);
    dbuf_free(fx->vdot);
    dbuf_free(fx->lambda);
    ibuf_free(fx->rows);
}

static int outputs_untouched(const fixture *fx)
{
    size_t n = (size_t)fx->n, d = (size_t)fx->d, m = (size_t)fx->m;
    return dbuf_untouched(fx->alpha, n * d) && dbuf_untouched(fx->alpha_dot, n * d) &&
           dbuf_untouched(fx->v, n) && dbuf_untouched(fx->vbar, d) &&
           dbuf_untouched(fx->Mbar, d * d) && dbuf_untouched(fx->Fbar, d) &&
           dbuf_untouched(fx->vdot, n) && dbuf_untouched(fx->lambda, m) &&
           ibuf_untouched(fx->rows, m);
}

/* A failed call on fx->ns: the status, a message, no output written, and the
 * object still gives the KKT answer for its (unchanged) W. */
static void expect_failure(fixture *fx, cdyn_status got, cdyn_status want, const char *what)
{
    ck_assert_msg(got == want, "%s returned %d (%s), expected %d", what, (int)got,
                  cdyn_status_string(got), (int)want);
    assert_message_set(fx->ns, what);
    ck_assert_msg(outputs_untouched(fx), "%s wrote to an output", what);
    assert_solve_correct(fx->ns, &fx->p);
}

/* A failed call with ns = NULL: the status and no output written. */
static void expect_null_failure(fixture *fx, cdyn_status got, const char *what)
{
    ck_assert_msg(got == CDYN_ERR_ARG, "%s returned %d, expected CDYN_ERR_ARG", what, (int)got);
    ck_assert_msg(outputs_untouched(fx), "%s wrote to an output", what);
}

/* A copy of `src` (count entries) with entry `at` replaced by `value`. */
static double *poisoned(const double *src, size_t count, size_t at, double value)
{
    double *x = malloc(sizeof(double) * count);
    ck_assert_ptr_nonnull(x);
    memcpy(x, src, sizeof(double) * count);
    x[at] = value;
    return x;
}

static const double nonfinite[] = {NAN, INFINITY, -INFINITY};
enum { NNONFINITE = 3 };

START_TEST(create_rejects_bad_sizes)
{
    const int bad[][2] = {{0, 0}, {-1, 0}, {3, -1}, {3, 3}, {3, 4}, {1, 1}, {0, -1}, {-5, -6}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        cdyn_status st = CDYN_OK;
        ck_assert_ptr_null(cdyn_nullspace_create(bad[k][0], bad[k][1], &st));
        ck_assert_msg(st == CDYN_ERR_ARG, "create(%d, %d): status %d", bad[k][0], bad[k][1],
                      (int)st);
        ck_assert_ptr_null(cdyn_nullspace_create(bad[k][0], bad[k][1], NULL));
    }
    cdyn_nullspace *ns = cdyn_nullspace_create(1, 0, NULL); /* status may be NULL */
    ck_assert_ptr_nonnull(ns);
    ck_assert_int_eq(cdyn_nullspace_size(ns), 1);
    ck_assert_int_eq(cdyn_nullspace_rows(ns), 0);
    cdyn_nullspace_free(ns);
    ns = create_ok(12, 11);
    ck_assert_int_eq(cdyn_nullspace_size(ns), 12);
    ck_assert_int_eq(cdyn_nullspace_rows(ns), 11);
    ck_assert_str_eq(cdyn_nullspace_last_error(ns), ""); /* no failure yet */
    cdyn_nullspace_free(ns);
    cdyn_nullspace_free(NULL);
}
END_TEST

START_TEST(null_object_is_rejected_everywhere)
{
    fixture fx;
    fixture_init(&fx);
    int n = fx.n, m = fx.m, d = fx.d;
    problem *p = &fx.p;
    int changed = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_size(NULL), -1);
    ck_assert_int_eq(cdyn_nullspace_rows(NULL), -1);
    ck_assert(isnan(cdyn_nullspace_condition(NULL)));
    ck_assert_int_eq(cdyn_nullspace_redundant_rows(NULL, fx.rows), -1);
    ck_assert_int_eq(cdyn_nullspace_set_rank_tolerance(NULL, 1e-10), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_nullspace_set_condition_limit(NULL, 1e6), CDYN_ERR_ARG);
    expect_null_failure(&fx, cdyn_nullspace_factor(NULL, p->W, p->ldw), "factor(NULL)");
    expect_null_failure(&fx, cdyn_nullspace_update(NULL, p->W, p->ldw, &changed), "update(NULL)");
    ck_assert_int_eq(changed, ISENTINEL);
    int part[7];
    for (int i = 0; i < n; ++i) part[i] = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_partition(NULL, part, part + d), -1);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(part[i], ISENTINEL);
    expect_null_failure(&fx, cdyn_nullspace_alpha(NULL, fx.alpha, n), "alpha(NULL)");
    expect_null_failure(&fx, cdyn_nullspace_alpha_dot(NULL, fx.Wdot, m, fx.alpha_dot, n),
                        "alpha_dot(NULL)");
    expect_null_failure(&fx, cdyn_nullspace_expand(NULL, fx.vbar_in, fx.v), "expand(NULL)");
    expect_null_failure(&fx, cdyn_nullspace_independent(NULL, fx.v_in, fx.vbar),
                        "independent(NULL)");
    expect_null_failure(&fx,
                        cdyn_nullspace_reduce(NULL, p->M, p->ldm, p->F, p->c, fx.Mbar, d, fx.Fbar),
                        "reduce(NULL)");
    expect_null_failure(
        &fx,
        cdyn_nullspace_recover(NULL, p->M, p->ldm, p->F, p->c, fx.vbar_dot_in, fx.vdot, fx.lambda),
        "recover(NULL)");
    expect_null_failure(&fx,
                        cdyn_nullspace_solve(NULL, p->M, p->ldm, p->F, p->c, fx.vdot, fx.lambda),
                        "solve(NULL)");
    assert_solve_correct(fx.ns, p);
    fixture_free(&fx);
}
END_TEST

START_TEST(setters_reject_out_of_range_values)
{
    fixture fx;
    fixture_init(&fx);
    const double badtol[] = {0.0, 1.0, -1e-12, 2.0, NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof badtol / sizeof badtol[0]; ++k)
        expect_failure(&fx, cdyn_nullspace_set_rank_tolerance(fx.ns, badtol[k]), CDYN_ERR_ARG,
                       "set_rank_tolerance(out of (0,1))");
    const double badlimit[] = {0.999, 0.0, -1.0, NAN, -INFINITY};
    for (size_t k = 0; k < sizeof badlimit / sizeof badlimit[0]; ++k)
        expect_failure(&fx, cdyn_nullspace_set_condition_limit(fx.ns, badlimit[k]), CDYN_ERR_ARG,
                       "set_condition_limit(< 1)");
    ck_assert_int_eq(cdyn_nullspace_set_rank_tolerance(fx.ns, 1e-10), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_set_condition_limit(fx.ns, 1.0), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_set_condition_limit(fx.ns, 1e12), CDYN_OK);
    fixture_free(&fx);
}
END_TEST

START_TEST(factor_and_update_reject_bad_W)
{
    fixture fx;
    fixture_init(&fx);
    problem *p = &fx.p;
    int m = fx.m, n = fx.n;
    int changed = ISENTINEL;
    expect_failure(&fx, cdyn_nullspace_factor(fx.ns, NULL, m), CDYN_ERR_ARG, "factor(W NULL)");
    expect_failure(&fx, cdyn_nullspace_factor(fx.ns, p->W, m - 1), CDYN_ERR_ARG, "factor(ldw < m)");
    expect_failure(&fx, cdyn_nullspace_factor(fx.ns, p->W, 0), CDYN_ERR_ARG, "factor(ldw 0)");
    expect_failure(&fx, cdyn_nullspace_update(fx.ns, NULL, m, &changed), CDYN_ERR_ARG,
                   "update(W NULL)");
    expect_failure(&fx, cdyn_nullspace_update(fx.ns, p->W, m - 1, &changed), CDYN_ERR_ARG,
                   "update(ldw < m)");
    ck_assert_int_eq(changed, ISENTINEL);
    const size_t where[] = {0, (size_t)(m * n) / 2, (size_t)(m * n) - 1};
    for (int k = 0; k < NNONFINITE; ++k)
        for (int w = 0; w < 3; ++w) {
            double *W = poisoned(p->W, (size_t)m * n, where[w], nonfinite[k]);
            expect_failure(&fx, cdyn_nullspace_factor(fx.ns, W, m), CDYN_ERR_NONFINITE,
                           "factor(W nonfinite)");
            expect_failure(&fx, cdyn_nullspace_update(fx.ns, W, m, &changed), CDYN_ERR_NONFINITE,
                           "update(W nonfinite)");
            ck_assert_int_eq(changed, ISENTINEL);
            free(W);
        }
    fixture_free(&fx);
}
END_TEST

START_TEST(alpha_and_alpha_dot_reject_bad_arguments)
{
    fixture fx;
    fixture_init(&fx);
    int m = fx.m, n = fx.n;
    expect_failure(&fx, cdyn_nullspace_alpha(fx.ns, NULL, n), CDYN_ERR_ARG, "alpha(NULL)");
    expect_failure(&fx, cdyn_nullspace_alpha(fx.ns, fx.alpha, n - 1), CDYN_ERR_ARG,
                   "alpha(ld < n)");
    expect_failure(&fx, cdyn_nullspace_alpha(fx.ns, fx.alpha, 0), CDYN_ERR_ARG, "alpha(ld 0)");
    expect_failure(&fx, cdyn_nullspace_alpha_dot(fx.ns, NULL, m, fx.alpha_dot, n), CDYN_ERR_ARG,
                   "alpha_dot(Wdot NULL)");
    expect_failure(&fx, cdyn_nullspace_alpha_dot(fx.ns, fx.Wdot, m, NULL, n), CDYN_ERR_ARG,
                   "alpha_dot(out NULL)");
    expect_failure(&fx, cdyn_nullspace_alpha_dot(fx.ns, fx.Wdot, m - 1, fx.alpha_dot, n),
                   CDYN_ERR_ARG, "alpha_dot(ldwdot < m)");
    expect_failure(&fx, cdyn_nullspace_alpha_dot(fx.ns, fx.Wdot, m, fx.alpha_dot, n - 1),
                   CDYN_ERR_ARG, "alpha_dot(ld < n)");
    for (int k = 0; k < NNONFINITE; ++k)
        for (size_t w = 0; w < (size_t)(m * n); w += 5) {
            double *Wdot = poisoned(fx.Wdot, (size_t)m * n, w, nonfinite[k]);
            expect_failure(&fx, cdyn_nullspace_alpha_dot(fx.ns, Wdot, m, fx.alpha_dot, n),
                           CDYN_ERR_NONFINITE, "alpha_dot(Wdot nonfinite)");
            free(Wdot);
        }
    fixture_free(&fx);
}
END_TEST

START_TEST(expand_and_independent_reject_bad_arguments)
{
    fixture fx;
    fixture_init(&fx);
    int n = fx.n, d = fx.d;
    expect_failure(&fx, cdyn_nullspace_expand(fx.ns, NULL, fx.v), CDYN_ERR_ARG,
                   "expand(vbar NULL)");
    expect_failure(&fx, cdyn_nullspace_expand(fx.ns, fx.vbar_in, NULL), CDYN_ERR_ARG,
                   "expand(v NULL)");
    expect_failure(&fx, cdyn_nullspace_independent(fx.ns, NULL, fx.vbar), CDYN_ERR_ARG,
                   "independent(v NULL)");
    expect_failure(&fx, cdyn_nullspace_independent(fx.ns, fx.v_in, NULL), CDYN_ERR_ARG,
                   "independent(vbar NULL)");
    for (int k = 0; k < NNONFINITE; ++k) {
        for (int w = 0; w < d; ++w) {
            double *vbar = poisoned(fx.vbar_in, (size_t)d, (size_t)w, nonfinite[k]);
            expect_failure(&fx, cdyn_nullspace_expand(fx.ns, vbar, fx.v), CDYN_ERR_NONFINITE,
                           "expand(vbar nonfinite)");
            free(vbar);
            /* a non-finite independent entry of v is certainly read */
            double *v = poisoned(fx.v_in, (size_t)n, (size_t)fx.indep[w], nonfinite[k]);
            expect_failure(&fx, cdyn_nullspace_independent(fx.ns, v, fx.vbar), CDYN_ERR_NONFINITE,
                           "independent(v nonfinite)");
            free(v);
        }
    }
    fixture_free(&fx);
}
END_TEST

START_TEST(reduce_rejects_bad_arguments)
{
    fixture fx;
    fixture_init(&fx);
    problem *p = &fx.p;
    int n = fx.n, m = fx.m, d = fx.d;
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, NULL, n, p->F, p->c, fx.Mbar, d, fx.Fbar),
                   CDYN_ERR_ARG, "reduce(M NULL)");
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, NULL, p->c, fx.Mbar, d, fx.Fbar),
                   CDYN_ERR_ARG, "reduce(F NULL)");
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, p->F, p->c, NULL, d, fx.Fbar),
                   CDYN_ERR_ARG, "reduce(Mbar NULL)");
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, p->F, p->c, fx.Mbar, d, NULL),
                   CDYN_ERR_ARG, "reduce(Fbar NULL)");
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n - 1, p->F, p->c, fx.Mbar, d, fx.Fbar),
                   CDYN_ERR_ARG, "reduce(ldm < n)");
    expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, p->F, p->c, fx.Mbar, d - 1, fx.Fbar),
                   CDYN_ERR_ARG, "reduce(ldmbar < d)");
    /* both triangles of M are read: upper, lower and diagonal entries */
    const size_t mwhere[] = {(size_t)(n - 1) * n, (size_t)(n - 1), (size_t)3 * n + 3};
    for (int k = 0; k < NNONFINITE; ++k) {
        for (int w = 0; w < 3; ++w) {
            double *M = poisoned(p->M, (size_t)n * n, mwhere[w], nonfinite[k]);
            expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, M, n, p->F, p->c, fx.Mbar, d, fx.Fbar),
                           CDYN_ERR_NONFINITE, "reduce(M nonfinite)");
            free(M);
        }
        double *F = poisoned(p->F, (size_t)n, (size_t)n - 1, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, F, p->c, fx.Mbar, d, fx.Fbar),
                       CDYN_ERR_NONFINITE, "reduce(F nonfinite)");
        free(F);
        double *c = poisoned(p->c, (size_t)m, (size_t)m - 1, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_reduce(fx.ns, p->M, n, p->F, c, fx.Mbar, d, fx.Fbar),
                       CDYN_ERR_NONFINITE, "reduce(c nonfinite)");
        free(c);
    }
    fixture_free(&fx);
}
END_TEST

START_TEST(recover_rejects_bad_arguments)
{
    fixture fx;
    fixture_init(&fx);
    problem *p = &fx.p;
    int n = fx.n, m = fx.m, d = fx.d;
    const double *vb = fx.vbar_dot_in;
    expect_failure(&fx, cdyn_nullspace_recover(fx.ns, NULL, n, p->F, p->c, vb, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "recover(M NULL)");
    expect_failure(&fx, cdyn_nullspace_recover(fx.ns, p->M, n, NULL, p->c, vb, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "recover(F NULL)");
    expect_failure(&fx,
                   cdyn_nullspace_recover(fx.ns, p->M, n, p->F, p->c, NULL, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "recover(vbar_dot NULL)");
    expect_failure(&fx, cdyn_nullspace_recover(fx.ns, p->M, n, p->F, p->c, vb, NULL, fx.lambda),
                   CDYN_ERR_ARG, "recover(vdot NULL)");
    expect_failure(&fx,
                   cdyn_nullspace_recover(fx.ns, p->M, n - 1, p->F, p->c, vb, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "recover(ldm < n)");
    for (int k = 0; k < NNONFINITE; ++k) {
        double *M = poisoned(p->M, (size_t)n * n, (size_t)n + 2, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_recover(fx.ns, M, n, p->F, p->c, vb, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "recover(M nonfinite)");
        free(M);
        double *F = poisoned(p->F, (size_t)n, 0, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_recover(fx.ns, p->M, n, F, p->c, vb, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "recover(F nonfinite)");
        free(F);
        double *c = poisoned(p->c, (size_t)m, 1, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_recover(fx.ns, p->M, n, p->F, c, vb, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "recover(c nonfinite)");
        free(c);
        double *vbd = poisoned(vb, (size_t)d, (size_t)d - 1, nonfinite[k]);
        expect_failure(&fx,
                       cdyn_nullspace_recover(fx.ns, p->M, n, p->F, p->c, vbd, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "recover(vbar_dot nonfinite)");
        free(vbd);
    }
    fixture_free(&fx);
}
END_TEST

START_TEST(solve_rejects_bad_arguments)
{
    fixture fx;
    fixture_init(&fx);
    problem *p = &fx.p;
    int n = fx.n, m = fx.m;
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, NULL, n, p->F, p->c, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "solve(M NULL)");
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, n, NULL, p->c, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "solve(F NULL)");
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, n, p->F, p->c, NULL, fx.lambda),
                   CDYN_ERR_ARG, "solve(vdot NULL)");
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, n - 1, p->F, p->c, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "solve(ldm < n)");
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, 0, p->F, p->c, fx.vdot, fx.lambda),
                   CDYN_ERR_ARG, "solve(ldm 0)");
    for (int k = 0; k < NNONFINITE; ++k) {
        double *M = poisoned(p->M, (size_t)n * n, (size_t)n * n - 1, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_solve(fx.ns, M, n, p->F, p->c, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "solve(M nonfinite)");
        free(M);
        double *F = poisoned(p->F, (size_t)n, 3, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, n, F, p->c, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "solve(F nonfinite)");
        free(F);
        double *c = poisoned(p->c, (size_t)m, 0, nonfinite[k]);
        expect_failure(&fx, cdyn_nullspace_solve(fx.ns, p->M, n, p->F, c, fx.vdot, fx.lambda),
                       CDYN_ERR_NONFINITE, "solve(c nonfinite)");
        free(c);
    }
    fixture_free(&fx);
}
END_TEST

/* M = -I gives Mbar = -alpha^T alpha, negative definite: not solvable by
 * Cholesky, reported as singular with nothing written. */
START_TEST(solve_reports_indefinite_reduced_mass)
{
    fixture fx;
    fixture_init(&fx);
    int n = fx.n;
    double *M = calloc((size_t)n * n, sizeof(double));
    ck_assert_ptr_nonnull(M);
    for (int i = 0; i < n; ++i) M[i + i * n] = -1.0;
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, M, n, fx.p.F, fx.p.c, fx.vdot, fx.lambda),
                   CDYN_ERR_SINGULAR, "solve(M = -I)");
    expect_failure(&fx, cdyn_nullspace_solve(fx.ns, M, n, fx.p.F, fx.p.c, fx.vdot, NULL),
                   CDYN_ERR_SINGULAR, "solve(M = -I, lambda NULL)");
    free(M);
    fixture_free(&fx);
}
END_TEST

/* A reduced mass matrix that is exactly singular but whose Cholesky
 * pivots pass: three states coupled as a ring (M's top-left block is the
 * ring's Laplacian with weights 1, 1e-8 and 1e-12, null vector (1, 1, 1))
 * and a fourth that W = [0 0 0 1] fixes, so Mbar is that block. Its last
 * pivot passed the pivot test and v' came back with an arbitrary
 * component along (1, 1, 1) (a change of F by one ulp moved it from
 * -5.8 to -9.7), with CDYN_OK. Asserted: CDYN_ERR_SINGULAR, nothing
 * written, and in the masses' units scaled by 1e8 and 1e-8 too; the object
 * stays usable (a regular M of the same shape solves). */
START_TEST(solve_reports_a_singular_reduced_mass_its_pivots_hide)
{
    const double scales[3] = {1.0, 1e8, 1e-8};
    for (int k = 0; k < 3; ++k) {
        double u = scales[k], a = u, b = 1e-8 * u, c = 1e-12 * u;
        double M[16] = {a + c, -a, -c, 0, -a, a + b, -b, 0, -c, -b, b + c, 0, 0, 0, 0, u};
        double W[4] = {0, 0, 0, 1}, F[4] = {u, -0.5 * u, -0.5 * u, 0.0};
        double v[4] = {7, 7, 7, 7}, lam[1] = {7};
        cdyn_status st;
        cdyn_nullspace *ns = cdyn_nullspace_create(4, 1, &st);
        ck_assert_ptr_nonnull(ns);
        ck_assert_int_eq(cdyn_nullspace_factor(ns, W, 1), CDYN_OK);
        ck_assert_int_eq(cdyn_nullspace_solve(ns, M, 4, F, NULL, v, lam), CDYN_ERR_SINGULAR);
        ck_assert_ptr_nonnull(strstr(cdyn_nullspace_last_error(ns), "singular"));
        for (int i = 0; i < 4; ++i) ck_assert(v[i] == 7.0);
        ck_assert(lam[0] == 7.0);
        M[0] += u; /* a mass on the first state: regular */
        ck_assert_int_eq(cdyn_nullspace_solve(ns, M, 4, F, NULL, v, lam), CDYN_OK);
        cdyn_nullspace_free(ns);
    }
}
END_TEST

/* W = [-1, -1e-300, 1] in units where the middle state is tiny: the
 * equilibrated columns are equal, and the state of index 1 can be the
 * dependent one (v1 = 1e300 (v2 - v0)). With vbar = (1e308, 1e308) the
 * exact v1 is 0, but beta vbar = 1e300 (1e308 - 1e308) is formed as
 * Inf - Inf in floating point. With the middle state made the dependent
 * one (preferred), asserts: expand, complete and alpha_dot all refuse with
 * CDYN_ERR_NONFINITE, a message that says "overflows", and the outputs
 * untouched; never CDYN_OK with a NaN. */
START_TEST(results_that_overflow_are_refused_not_returned)
{
    cdyn_nullspace *ns = cdyn_nullspace_create(3, 1, NULL);
    ck_assert_ptr_nonnull(ns);
    const double W[3] = {-1.0, -1e-300, 1.0};
    const int prefer[3] = {0, 1, 0}; /* the middle state dependent, whatever the QR's tie-break */
    ck_assert_int_eq(cdyn_nullspace_set_preferred_dependent(ns, prefer), CDYN_OK);
    ck_assert_int_eq(cdyn_nullspace_factor(ns, W, 1), CDYN_OK);
    int dep = -1;
    ck_assert_int_eq(cdyn_nullspace_partition(ns, NULL, &dep), 2);
    ck_assert_int_eq(dep, 1);
    const double vbar[2] = {1e308, 1e308}, c[1] = {1e308};
    const double Wdot[3] = {1e308, 1e308, 1e308};
    int refused = 0;
    for (int k = 0; k < 3; ++k) {
        double out[6] = {7, 7, 7, 7, 7, 7};
        cdyn_status st = k == 0   ? cdyn_nullspace_expand(ns, vbar, out)
                         : k == 1 ? cdyn_nullspace_complete(ns, vbar, c, out)
                                  : cdyn_nullspace_alpha_dot(ns, Wdot, 1, out, 3);
        if (st == CDYN_OK) {
            for (int i = 0; i < 6 && (k == 2 || i < 3); ++i) ck_assert(isfinite(out[i]));
            continue;
        }
        refused++;
        ck_assert_int_eq(st, CDYN_ERR_NONFINITE);
        ck_assert_ptr_nonnull(strstr(cdyn_nullspace_last_error(ns), "overflows"));
        for (int i = 0; i < 6; ++i) ck_assert(out[i] == 7.0);
    }
    ck_assert_int_eq(refused, 3); /* with the middle state dependent all three overflow */
    cdyn_nullspace_free(ns);
}
END_TEST

START_TEST(calls_before_factor_are_rejected)
{
    fixture fx;
    fixture_init(&fx);
    problem *p = &fx.p;
    int n = fx.n, m = fx.m, d = fx.d;
    cdyn_nullspace *fresh = create_ok(n, m);
    ck_assert_str_eq(cdyn_nullspace_last_error(fresh), "");
    ck_assert_int_eq(cdyn_nullspace_rank(fresh), -1);
    ck_assert(isnan(cdyn_nullspace_condition(fresh)));
    int part[7];
    for (int i = 0; i < n; ++i) part[i] = ISENTINEL;
    ck_assert_int_eq(cdyn_nullspace_partition(fresh, part, part + d), -1);
    for (int i = 0; i < n; ++i) ck_assert_int_eq(part[i], ISENTINEL);
    assert_message_set(fresh, "partition(unfactored)");

    struct {
        cdyn_status st;
        const char *what;
    } calls[] = {
        {cdyn_nullspace_alpha(fresh, fx.alpha, n), "alpha"},
        {cdyn_nullspace_alpha_dot(fresh, fx.Wdot, m, fx.alpha_dot, n), "alpha_dot"},
        {cdyn_nullspace_expand(fresh, fx.vbar_in, fx.v), "expand"},
        {cdyn_nullspace_independent(fresh, fx.v_in, fx.vbar), "independent"},
        {cdyn_nullspace_reduce(fresh, p->M, n, p->F, p->c, fx.Mbar, d, fx.Fbar), "reduce"},
        {cdyn_nullspace_recover(fresh, p->M, n, p->F, p->c, fx.vbar_dot_in, fx.vdot, fx.lambda),
         "recover"},
        {cdyn_nullspace_solve(fresh, p->M, n, p->F, p->c, fx.vdot, fx.lambda), "solve"},
    };
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; ++k)
        ck_assert_msg(calls[k].st == CDYN_ERR_ARG, "%s before factor returned %d", calls[k].what,
                      (int)calls[k].st);
    ck_assert(outputs_untouched(&fx));
    assert_message_set(fresh, "calls before factor");

    /* and the object works once factored */
    ck_assert_int_eq(cdyn_nullspace_factor(fresh, p->W, p->ldw), CDYN_OK);
    assert_solve_correct(fresh, p);
    cdyn_nullspace_free(fresh);
    fixture_free(&fx);
}
END_TEST

/* ======================================================================== */
/* No allocation after create.                                               */

START_TEST(per_step_calls_do_not_allocate)
{
    const int n = 10, m = 4, d = n - m;
    problem p;
    problem_init(&p, n, m, 0, 1, 4242);
    cdyn_nullspace *ns = create_ok(n, m), *fresh = create_ok(n, m);

    /* Inputs prepared before counting starts. */
    double *Wpert = malloc(sizeof(double) * m * n), *Wsing = malloc(sizeof(double) * m * n);
    double *Wnan = malloc(sizeof(double) * m * n), *Wrank = malloc(sizeof(double) * m * n);
    double *Wdot = malloc(sizeof(double) * m * n), *Mneg = calloc((size_t)n * n, sizeof(double));
    double *Mnan = malloc(sizeof(double) * n * n), *vbar = malloc(sizeof(double) * d);
    ck_assert(Wpert && Wsing && Wnan && Wrank && Wdot && Mneg && Mnan && vbar);
    tu_rng r;
    tu_rng_seed(&r, 4243);
    tu_random(&r, m, n, Wdot, m);
    tu_random(&r, d, 1, vbar, d);
    int part[10];
    ck_assert_int_eq(cdyn_nullspace_factor(ns, p.W, m), CDYN_OK);
    get_partition(ns, n, m, part, part + d);
    for (int i = 0; i < m * n; ++i) {
        Wpert[i] = p.W[i] + 1e-7 * tu_uniform(&r);
        Wsing[i] = p.W[i];
        Wnan[i] = p.W[i];
        Wrank[i] = p.W[i];
    }
    for (int i = 0; i < m; ++i) Wsing[i + part[d + 1] * m] = Wsing[i + part[d] * m];
    Wnan[5] = NAN;
    for (int j = 0; j < n; ++j) Wrank[3 + j * m] = Wrank[0 + j * m] + Wrank[1 + j * m];
    for (int i = 0; i < n; ++i) Mneg[i + i * n] = -1.0;
    memcpy(Mnan, p.M, sizeof(double) * n * n);
    Mnan[7] = NAN;
    double *alpha = dbuf((size_t)n * d), *alpha_dot = dbuf((size_t)n * d), *v = dbuf((size_t)n);
    double *vb = dbuf((size_t)d), *Mbar = dbuf((size_t)d * d), *Fbar = dbuf((size_t)d);
    double *vdot = dbuf((size_t)n), *lambda = dbuf((size_t)m);
    int rows[4], changed[4], ranks[3];
    double cond;
    cdyn_status st[40];
    int k = 0;

    alloc_count_start();
    st[k++] = cdyn_nullspace_factor(fresh, p.W, m); /* first factor after create */
    st[k++] = cdyn_nullspace_factor(ns, p.W, m);
    st[k++] = cdyn_nullspace_update(ns, Wpert, m, &changed[0]);
    st[k++] = cdyn_nullspace_update(ns, Wsing, m, &changed[1]); /* reselects */
    st[k++] = cdyn_nullspace_update(ns, p.W, m, &changed[2]);
    st[k++] = cdyn_nullspace_partition(ns, part, part + d) == d ? CDYN_OK : CDYN_ERR_ARG;
    cond = cdyn_nullspace_condition(ns);
    ranks[0] = cdyn_nullspace_rank(ns);
    ranks[1] = cdyn_nullspace_redundant_rows(ns, rows);
    st[k++] = cdyn_nullspace_alpha(ns, alpha, n);
    st[k++] = cdyn_nullspace_alpha_dot(ns, Wdot, m, alpha_dot, n);
    st[k++] = cdyn_nullspace_expand(ns, vbar, v);
    st[k++] = cdyn_nullspace_independent(ns, v, vb);
    st[k++] = cdyn_nullspace_reduce(ns, p.M, n, p.F, p.c, Mbar, d, Fbar);
    st[k++] = cdyn_nullspace_reduce(ns, p.M, n, p.F, NULL, Mbar, d, Fbar);
    st[k++] = cdyn_nullspace_recover(ns, p.M, n, p.F, p.c, vb, vdot, lambda);
    st[k++] = cdyn_nullspace_recover(ns, p.M, n, p.F, p.c, vb, vdot, NULL);
    st[k++] = cdyn_nullspace_solve(ns, p.M, n, p.F, NULL, vdot, NULL);
    st[k++] = cdyn_nullspace_solve(ns, p.M, n, p.F, p.c, vdot, lambda);
    const int nok = k;
    /* error paths */
    st[k++] = cdyn_nullspace_factor(ns, Wnan, m);
    st[k++] = cdyn_nullspace_update(ns, Wnan, m, &changed[3]);
    st[k++] = cdyn_nullspace_factor(ns, Wrank, m);
    ranks[2] = cdyn_nullspace_redundant_rows(ns, rows);
    st[k++] = cdyn_nullspace_update(ns, Wrank, m, &changed[3]);
    st[k++] = cdyn_nullspace_factor(ns, NULL, m);
    st[k++] = cdyn_nullspace_alpha(ns, alpha, n - 1);
    st[k++] = cdyn_nullspace_alpha_dot(ns, Wnan, m, alpha_dot, n);
    st[k++] = cdyn_nullspace_expand(ns, NULL, v);
    st[k++] = cdyn_nullspace_reduce(ns, Mnan, n, p.F, p.c, Mbar, d, Fbar);
    st[k++] = cdyn_nullspace_recover(ns, Mnan, n, p.F, p.c, vb, vdot, lambda);
    st[k++] = cdyn_nullspace_solve(ns, Mneg, n, p.F, p.c, vdot, lambda);
    st[k++] = cdyn_nullspace_solve(ns, Mnan, n, p.F, p.c, vdot, lambda);
    st[k++] = cdyn_nullspace_set_rank_tolerance(ns, 2.0);
    st[k++] = cdyn_nullspace_partition(NULL, part, part + d) == -1 ? CDYN_ERR_ARG : CDYN_OK;
    const char *msg = cdyn_nullspace_last_error(ns);
    long calls = alloc_count_stop();

    ck_assert_int_eq(calls, 0);
    for (int i = 0; i < nok; ++i)
        ck_assert_msg(st[i] == CDYN_OK, "call %d returned %d", i, (int)st[i]);
    const cdyn_status want[] = {CDYN_ERR_NONFINITE, CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR,
                                CDYN_ERR_SINGULAR,  CDYN_ERR_ARG,       CDYN_ERR_ARG,
                                CDYN_ERR_NONFINITE, CDYN_ERR_ARG,       CDYN_ERR_NONFINITE,
                                CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR,  CDYN_ERR_NONFINITE,
                                CDYN_ERR_ARG,       CDYN_ERR_ARG};
    ck_assert_int_eq(k - nok, (int)(sizeof want / sizeof want[0]));
    for (int i = nok; i < k; ++i)
        ck_assert_msg(st[i] == want[i - nok], "error call %d returned %d, expected %d", i - nok,
                      (int)st[i], (int)want[i - nok]);
    ck_assert_int_eq(changed[0], 0);
    ck_assert_int_eq(changed[1], 1);
    ck_assert(isfinite(cond) && cond >= 1.0);
    ck_assert_int_eq(ranks[0], m);
    ck_assert_int_eq(ranks[1], 0);
    ck_assert_int_eq(ranks[2], 1);
    ck_assert(msg && msg[0] != '\0');
    /* The last good solve (for p.W, with c) is right; the failures after it
     * wrote nothing. */
    assert_satisfies_dynamics(&p, vdot, lambda);
    assert_matches_kkt(&p, vdot, lambda);

    free(Wpert);
    free(Wsing);
    free(Wnan);
    free(Wrank);
    free(Wdot);
    free(Mneg);
    free(Mnan);
    free(vbar);
    dbuf_free(alpha);
    dbuf_free(alpha_dot);
    dbuf_free(v);
    dbuf_free(vb);
    dbuf_free(Mbar);
    dbuf_free(Fbar);
    dbuf_free(vdot);
    dbuf_free(lambda);
    cdyn_nullspace_free(ns);
    cdyn_nullspace_free(fresh);
    problem_free(&p);
}
END_TEST

/* ======================================================================== */
/* Status strings.                                                           */

START_TEST(status_strings_are_nonempty_and_distinct)
{
    const cdyn_status codes[] = {CDYN_OK,           CDYN_ERR_ARG,    CDYN_ERR_NONFINITE,
                                 CDYN_ERR_SINGULAR, CDYN_ERR_NOCONV, CDYN_ERR_CALLBACK,
                                 CDYN_ERR_NOMEM,    CDYN_ERR_LAPACK};
    const size_t count = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < count; ++i) {
        const char *s = cdyn_status_string(codes[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_gt((int)strlen(s), 0);
        for (size_t j = 0; j < i; ++j) ck_assert_str_ne(s, cdyn_status_string(codes[j]));
    }
    ck_assert_ptr_nonnull(cdyn_status_string((cdyn_status)99));
    ck_assert_ptr_nonnull(cdyn_status_string((cdyn_status)-1));
}
END_TEST

/* ======================================================================== */

static Suite *nullspace_suite(void)
{
    Suite *s = suite_create("nullspace");

    TCase *basis = tcase_create("basis");
    tcase_set_timeout(basis, 120);
    tcase_add_loop_test(basis, alpha_spans_null_space_with_identity_independent_rows, 0, NSIZES);
    tcase_add_loop_test(basis, expand_then_independent_round_trips_exactly, 0, NSIZES);
    suite_add_tcase(s, basis);

    TCase *reduction = tcase_create("reduction");
    tcase_set_timeout(reduction, 120);
    tcase_add_loop_test(reduction, solve_satisfies_dynamics_and_constraints_on_all_rows, 0,
                        2 * NSIZES);
    tcase_add_loop_test(reduction, solve_matches_kkt_reference, 0, 2 * NSIZES);
    tcase_add_loop_test(reduction, reduce_gives_alphaT_M_alpha_and_alphaT_F_minus_M_a, 0,
                        2 * NSIZES);
    tcase_add_loop_test(reduction, recover_from_own_reduced_solution_matches_kkt, 0, 2 * NSIZES);
    tcase_add_test(reduction, leading_dimensions_larger_than_rows_are_respected);
    tcase_add_test(reduction, without_constraints_alpha_is_permutation_and_solve_is_M_inverse_F);
    suite_add_tcase(s, reduction);

    TCase *timevar = tcase_create("time_varying");
    tcase_set_timeout(timevar, 60);
    tcase_add_loop_test(timevar, alpha_dot_matches_central_difference_of_alpha, 0, NTV);
    tcase_add_loop_test(timevar, alpha_dot_times_vbar_is_particular_rate_for_c_equal_Wdot_v, 0,
                        NTV);
    suite_add_tcase(s, timevar);

    TCase *partition = tcase_create("partition");
    tcase_set_timeout(partition, 60);
    tcase_add_test(partition, pivoting_avoids_equal_trailing_columns);
    tcase_add_test(partition, pivoting_avoids_zero_and_repeated_columns);
    tcase_add_test(partition, update_keeps_partition_for_small_perturbation);
    tcase_add_test(partition, update_before_first_factor_acts_as_factor);
    tcase_add_test(partition, update_reselects_when_W2_becomes_singular);
    tcase_add_test(partition, update_reselects_when_condition_exceeds_limit);
    tcase_add_test(partition, preferred_states_become_dependent);
    suite_add_tcase(s, partition);

    TCase *rank = tcase_create("rank");
    tcase_set_timeout(rank, 60);
    tcase_add_test(rank, rank_deficient_W_is_reported_with_a_redundant_row);
    tcase_add_test(rank, zero_row_is_named_as_redundant);
    tcase_add_test(rank, failed_factor_keeps_previous_factorization);
    tcase_add_test(rank, failed_first_factor_leaves_object_unfactored_and_usable);
    tcase_add_test(rank, rank_tolerance_decides_nearly_dependent_rows);
    suite_add_tcase(s, rank);

    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, results_that_overflow_are_refused_not_returned);
    tcase_set_timeout(bad, 60);
    tcase_add_test(bad, create_rejects_bad_sizes);
    tcase_add_test(bad, null_object_is_rejected_everywhere);
    tcase_add_test(bad, setters_reject_out_of_range_values);
    tcase_add_test(bad, factor_and_update_reject_bad_W);
    tcase_add_test(bad, alpha_and_alpha_dot_reject_bad_arguments);
    tcase_add_test(bad, expand_and_independent_reject_bad_arguments);
    tcase_add_test(bad, reduce_rejects_bad_arguments);
    tcase_add_test(bad, recover_rejects_bad_arguments);
    tcase_add_test(bad, solve_rejects_bad_arguments);
    tcase_add_test(bad, solve_reports_indefinite_reduced_mass);
    tcase_add_test(bad, solve_reports_a_singular_reduced_mass_its_pivots_hide);
    tcase_add_test(bad, calls_before_factor_are_rejected);
    suite_add_tcase(s, bad);

    TCase *alloc = tcase_create("allocation");
    tcase_set_timeout(alloc, 60);
    tcase_add_test(alloc, per_step_calls_do_not_allocate);
    suite_add_tcase(s, alloc);

    TCase *status = tcase_create("status");
    tcase_add_test(status, status_strings_are_nonempty_and_distinct);
    suite_add_tcase(s, status);
    return s;
}

int main(void)
{
    return tu_run_suite(nullspace_suite());
}
