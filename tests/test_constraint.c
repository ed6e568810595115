/* Check suite for cdyn_constraint (THEORY T4.3-T4.8, T6.1).
 *
 * Every expected value comes from somewhere other than the library:
 *  - a bordered solve written here with LAPACK dgesv (LU of the whole
 *    [M Phi_q^T; Phi_q 0] matrix), and its regularized form
 *    [M Phi_q^T; Phi_q -alpha^-1], which is exactly the penalty (modified
 *    Lagrange) equation with lambda = alpha (Phi_q q'' - s) eliminated;
 *  - a null-space formulation ([Phi_q; v^T M] q'' = [xi; v^T Q], v spanning
 *    the admissible motions) for the slider-crank;
 *  - analytic solutions: the pendulum (theta'' = -(g/l) sin theta, rod
 *    tension), the 1-dof parallelogram (Lagrange's equation in the crank
 *    angle), the critically damped constraint violation
 *    (Phi0 + (Phi'0 + k Phi0) t) e^{-kt};
 *  - identities any correct answer satisfies (M q'' + Phi_q^T lambda = Q,
 *    Phi_q q'' = s) with s = xi - K_D Phi' - K_P Phi computed here by loops.
 *
 * Tolerances: results of the exact formulations are compared relative to the
 * largest entry of the reference vector (1e-10, or 1e-12 for the tiny
 * analytic pendulum); residual identities relative to the sum of absolute
 * products that bounds their rounding.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "cdyn/constraint.h"
#include "cdyn/status.h"
#include "constraint_internal.h" /* which path solved (the small-size test) */
#include "guarded.h"
#include "quadref.h"
#include "testutil.h"

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b,
            const int *ldb, int *info);

static const double G_ACC = 9.81;


static size_t atleast1(int k) { return k > 0 ? (size_t)k : 1; }

/* ------------------------------------------------------------------------ */
/* Small numerics written here                                               */

/* max |a - b| / max |b| (NaN propagates; absolute if b is all zero). */
static double reldiff(int len, const double *a, const double *b)
{
    double d = 0.0, s = 0.0;
    for (int i = 0; i < len; ++i) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= d)) d = e;
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    return s > 0.0 ? d / s : d;
}

static int all_finite(int len, const double *x)
{
    for (int i = 0; i < len; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Bordered reference: [M G^T; P -D][q''; mult] = [Q; s] by dgesv, with
 * D = diag(inv_alpha) (NULL: zero block, the KKT system of T4.4/T4.3).
 * G (the force directions) may differ from P (Phi_q): G = C gives the
 * reactions form. Returns dgesv's info. */
static int bordered_solve_g(int n, int m, const double *M, int ldm, const double *P, int ldp,
                            const double *G, int ldg, const double *Q, const double *s,
                            const double *inv_alpha, double *qdd, double *mult)
{
    int N = n + m, one = 1, info = 0;
    double *K = calloc((size_t)N * N, sizeof(double));
    double *b = malloc(sizeof(double) * (size_t)N);
    int *ipiv = malloc(sizeof(int) * (size_t)N);
    ck_assert(K && b && ipiv);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) K[i + (size_t)j * N] = M[i + (size_t)j * ldm];
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            K[(n + i) + (size_t)j * N] = P[i + (size_t)j * ldp];
            K[j + (size_t)(n + i) * N] = G[i + (size_t)j * ldg];
        }
        if (inv_alpha) K[(n + i) + (size_t)(n + i) * N] = -inv_alpha[i];
    }
    for (int i = 0; i < n; ++i) b[i] = Q[i];
    for (int i = 0; i < m; ++i) b[n + i] = s[i];
    dgesv_(&N, &one, K, &N, ipiv, b, &N, &info);
    for (int i = 0; i < n; ++i) qdd[i] = b[i];
    for (int i = 0; i < m; ++i) mult[i] = b[n + i];
    free(K);
    free(b);
    free(ipiv);
    return info;
}

static int bordered_solve(int n, int m, const double *M, int ldm, const double *P, int ldp,
                          const double *Q, const double *s, const double *inv_alpha,
                          double *qdd, double *lambda)
{
    return bordered_solve_g(n, m, M, ldm, P, ldp, P, ldp, Q, s, inv_alpha, qdd, lambda);
}

/* Plain dgesv of an N x N system (A copied). */
static int dense_solve(int N, const double *A, int lda, const double *b, double *x)
{
    int one = 1, info = 0;
    double *K = malloc(sizeof(double) * (size_t)N * N);
    int *ipiv = malloc(sizeof(int) * (size_t)N);
    ck_assert(K && ipiv);
    for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i) K[i + (size_t)j * N] = A[i + (size_t)j * lda];
    for (int i = 0; i < N; ++i) x[i] = b[i];
    dgesv_(&N, &one, K, &N, ipiv, x, &N, &info);
    free(K);
    free(ipiv);
    return info;
}

/* s = xi - K_D Phi' - K_P Phi by loops; NULL gains or vectors count as zero. */
static void s_by_hand(int m, const double *xi, const double *KD, int ldkd, const double *KP,
                      int ldkp, const double *Phi, const double *Phid, double *s)
{
    for (int i = 0; i < m; ++i) {
        double v = xi ? xi[i] : 0.0;
        for (int j = 0; j < m; ++j) {
            if (KD && Phid) v -= KD[i + (size_t)j * ldkd] * Phid[j];
            if (KP && Phi) v -= KP[i + (size_t)j * ldkp] * Phi[j];
        }
        s[i] = v;
    }
}

/* Residual of M q'' + G^T f = Q relative to the rounding scale
 * sum_j |M_ij||q_j| + sum_k |G_ki||f_k| + |Q_i|. */
static double eom_residual(int n, int m, const double *M, int ldm, const double *G, int ldg,
                           const double *qdd, const double *f, const double *Q)
{
    double worst = 0.0;
    for (int i = 0; i < n; ++i) {
        double r = -Q[i], sc = fabs(Q[i]);
        for (int j = 0; j < n; ++j) {
            r += M[i + (size_t)j * ldm] * qdd[j];
            sc += fabs(M[i + (size_t)j * ldm] * qdd[j]);
        }
        for (int k = 0; k < m; ++k) {
            r += G[k + (size_t)i * ldg] * f[k];
            sc += fabs(G[k + (size_t)i * ldg] * f[k]);
        }
        double e = sc > 0.0 ? fabs(r) / sc : fabs(r);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* Residual of Phi_q q'' = s relative to sum_j |P_ij q_j| + |s_i|. */
static double acc_residual(int n, int m, const double *P, int ldp, const double *qdd,
                           const double *s)
{
    double worst = 0.0;
    for (int i = 0; i < m; ++i) {
        double r = -s[i], sc = fabs(s[i]);
        for (int j = 0; j < n; ++j) {
            r += P[i + (size_t)j * ldp] * qdd[j];
            sc += fabs(P[i + (size_t)j * ldp] * qdd[j]);
        }
        double e = sc > 0.0 ? fabs(r) / sc : fabs(r);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* ------------------------------------------------------------------------ */
/* A random instant: M SPD, Phi_q full rank (with probability 1). Padding   */
/* rows below M and Phi_q hold NaN, so a library that ignores the leading    */
/* dimension reads NaN and fails.                                            */

typedef struct {
    int n, m, ldm, ldp;
    double *M, *Q, *P, *Phi, *Phid, *xi;
} sys_t;

static double *nan_array(size_t count)
{
    double *a = malloc(sizeof(double) * (count > 0 ? count : 1));
    ck_assert_ptr_nonnull(a);
    for (size_t i = 0; i < count; ++i) a[i] = NAN;
    return a;
}

static void sys_random(sys_t *p, int n, int m, int pad, unsigned long long seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    p->n = n;
    p->m = m;
    p->ldm = n + pad;
    p->ldp = (int)atleast1(m) + pad;
    p->M = nan_array((size_t)p->ldm * n);
    p->P = nan_array((size_t)p->ldp * n);
    p->Q = nan_array((size_t)n);
    p->Phi = nan_array(atleast1(m));
    p->Phid = nan_array(atleast1(m));
    p->xi = nan_array(atleast1(m));
    tu_random_spd(&r, n, p->M, p->ldm);
    tu_random(&r, m, n, p->P, p->ldp);
    tu_random(&r, n, 1, p->Q, n);
    tu_random(&r, m, 1, p->Phi, (int)atleast1(m));
    tu_random(&r, m, 1, p->Phid, (int)atleast1(m));
    tu_random(&r, m, 1, p->xi, (int)atleast1(m));
}

/* An instant with given dense data (ld = rows), copied. */
static void sys_from(sys_t *p, int n, int m, const double *M, const double *Q, const double *P,
                     const double *Phi, const double *Phid, const double *xi)
{
    p->n = n;
    p->m = m;
    p->ldm = n;
    p->ldp = (int)atleast1(m);
    p->M = nan_array((size_t)n * n);
    p->P = nan_array((size_t)p->ldp * n);
    p->Q = nan_array((size_t)n);
    p->Phi = nan_array(atleast1(m));
    p->Phid = nan_array(atleast1(m));
    p->xi = nan_array(atleast1(m));
    memcpy(p->M, M, sizeof(double) * (size_t)n * n);
    memcpy(p->Q, Q, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(p->P, P, sizeof(double) * (size_t)m * n);
    for (int i = 0; i < m; ++i) {
        p->Phi[i] = Phi ? Phi[i] : 0.0;
        p->Phid[i] = Phid ? Phid[i] : 0.0;
        p->xi[i] = xi ? xi[i] : 0.0;
    }
}

static void sys_free(sys_t *p)
{
    free(p->M);
    free(p->Q);
    free(p->P);
    free(p->Phi);
    free(p->Phid);
    free(p->xi);
}

static cdyn_status sys_load(cdyn_constraint *c, const sys_t *p)
{
    return cdyn_constraint_load(c, p->M, p->ldm, p->Q, p->P, p->ldp, p->Phi, p->Phid, p->xi);
}

static cdyn_constraint *make(int n, int m)
{
    cdyn_status st = CDYN_ERR_LAPACK;
    cdyn_constraint *c = cdyn_constraint_create(n, m, &st);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(st, CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_size(c), n);
    ck_assert_int_eq(cdyn_constraint_rows(c), m);
    return c;
}

/* ======================================================================== */
/* 1. Exact formulations agree with the bordered solve                       */

/* After full-rank successes on an object that never lost rank: the rank
 * facts describe the last rank-LOSS report (constraint.h, last_error), so
 * they keep their fresh values (rank -1, sigma_min -1, no redundant rows),
 * and the monitor cdyn_constraint_margin() (sigma_min / sigma_max estimate
 * of the equilibrated Phi_q) is above the rank tolerance and at most 1. */
static void assert_full_rank_facts(const cdyn_constraint *c)
{
    ck_assert_int_eq(cdyn_constraint_rank(c), -1);
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, NULL), 0);
    ck_assert(isnan(cdyn_constraint_smallest_singular_value(c)));
    double margin = cdyn_constraint_margin(c);
    ck_assert_msg(margin > 1e-10 && margin <= 1.0, "margin %g", margin);
}

/* Run lagrange, reactions (C = Phi_q and C = R Phi_q), pseudoinverse on the
 * loaded instant p with stabilized right-hand side s and compare with the
 * bordered dgesv solution. */
static void check_exact_on_instant(cdyn_constraint *c, const sys_t *p, const double *s,
                                   unsigned long long seed, const char *what)
{
    int n = p->n, m = p->m;
    size_t m1 = atleast1(m);
    double *qref = malloc(sizeof(double) * (size_t)n), *lref = malloc(sizeof(double) * m1);
    ck_assert_int_eq(bordered_solve(n, m, p->M, p->ldm, p->P, p->ldp, p->Q, s, NULL, qref, lref),
                     0);
    double *q = dbuf((size_t)n), *l = dbuf(m1);
    const double tol = 1e-10;

    /* KKT (T4.4) */
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
    ck_assert_msg(reldiff(n, q, qref) <= tol, "%s lagrange q'': %g", what, reldiff(n, q, qref));
    ck_assert_msg(reldiff(m, l, lref) <= tol, "%s lagrange lambda: %g", what,
                  reldiff(m, l, lref));
    ck_assert_double_le(eom_residual(n, m, p->M, p->ldm, p->P, p->ldp, q, l, p->Q), 1e-12);
    ck_assert_double_le(acc_residual(n, m, p->P, p->ldp, q, s), 1e-12);
    assert_full_rank_facts(c);

    /* reactions with C = Phi_q: f = lambda */
    dbuf_reset(q, (size_t)n);
    dbuf_reset(l, m1);
    ck_assert_int_eq(cdyn_constraint_reactions(c, p->P, p->ldp, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
    ck_assert_msg(reldiff(n, q, qref) <= tol, "%s reactions q'': %g", what, reldiff(n, q, qref));
    ck_assert_msg(reldiff(m, l, lref) <= tol, "%s reactions f: %g", what, reldiff(m, l, lref));

    /* reactions with C = R Phi_q (R invertible): C^T f = Phi_q^T R^T f, so
     * R^T f = lambda; checked against its own bordered solve too */
    if (m > 0) {
        tu_rng r;
        tu_rng_seed(&r, seed * 13 + 5);
        double *R = malloc(sizeof(double) * (size_t)m * m);
        double *C = malloc(sizeof(double) * (size_t)(m + 1) * n);
        double *fref = malloc(sizeof(double) * m1), *qref2 = malloc(sizeof(double) * n);
        double *Rtf = malloc(sizeof(double) * m1);
        tu_random(&r, m, m, R, m);
        for (int i = 0; i < m * m; ++i) R[i] *= 0.3;
        for (int i = 0; i < m; ++i) R[i + (size_t)i * m] += 1.0 + 0.3 * m;
        for (int i = 0; i < (m + 1) * n; ++i) C[i] = NAN; /* padding row NaN */
        tu_matmul(m, m, n, R, m, p->P, p->ldp, C, m + 1);
        ck_assert_int_eq(bordered_solve_g(n, m, p->M, p->ldm, p->P, p->ldp, C, m + 1, p->Q, s,
                                          NULL, qref2, fref),
                         0);
        dbuf_reset(q, (size_t)n);
        dbuf_reset(l, m1);
        ck_assert_int_eq(cdyn_constraint_reactions(c, C, m + 1, q, l), CDYN_OK);
        ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
        ck_assert_msg(reldiff(n, q, qref) <= tol, "%s reactions(R Phi_q) q'': %g", what,
                      reldiff(n, q, qref));
        ck_assert_msg(reldiff(m, l, fref) <= tol, "%s reactions(R Phi_q) f: %g", what,
                      reldiff(m, l, fref));
        tu_matvec_t(m, m, R, m, l, Rtf);
        ck_assert_msg(reldiff(m, Rtf, lref) <= tol, "%s R^T f vs lambda: %g", what,
                      reldiff(m, Rtf, lref));
        ck_assert_double_le(eom_residual(n, m, p->M, p->ldm, C, m + 1, q, l, p->Q), 1e-12);
        free(R);
        free(C);
        free(fref);
        free(qref2);
        free(Rtf);
    }

    /* pseudo-inverse (T4.7): same answer for independent constraints */
    dbuf_reset(q, (size_t)n);
    dbuf_reset(l, m1);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
    ck_assert_msg(reldiff(n, q, qref) <= tol, "%s pinv q'': %g", what, reldiff(n, q, qref));
    ck_assert_msg(reldiff(m, l, lref) <= tol, "%s pinv lambda: %g", what, reldiff(m, l, lref));
    ck_assert_double_le(eom_residual(n, m, p->M, p->ldm, p->P, p->ldp, q, l, p->Q), 1e-12);
    ck_assert_double_le(acc_residual(n, m, p->P, p->ldp, q, s), 1e-12);
    assert_full_rank_facts(c);

    dbuf_free(q);
    dbuf_free(l);
    free(qref);
    free(lref);
}

static const int SIZES[][2] = {{3, 2}, {6, 2}, {12, 4}, {30, 10}, {100, 33}};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

START_TEST(exact_formulations_agree_with_bordered_solve_without_stabilization)
{
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        sys_t p;
        sys_random(&p, n, m, 2, 100 + (unsigned)k);
        cdyn_constraint *c = make(n, m);
        ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
        /* no stabilization: s = xi, Phi and Phi' do not enter */
        check_exact_on_instant(c, &p, p.xi, 100 + (unsigned)k, "plain");
        cdyn_constraint_free(c);
        sys_free(&p);
    }
}
END_TEST

START_TEST(exact_formulations_agree_with_bordered_solve_with_baumgarte)
{
    const double a = 1.5, b = 4.0;
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        sys_t p;
        sys_random(&p, n, m, 2, 200 + (unsigned)k);
        cdyn_constraint *c = make(n, m);
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, a, b), CDYN_OK);
        ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
        /* s_i = xi_i - 2a Phi'_i - b^2 Phi_i */
        double *s = malloc(sizeof(double) * (size_t)m);
        for (int i = 0; i < m; ++i) s[i] = p.xi[i] - 2.0 * a * p.Phid[i] - b * b * p.Phi[i];
        check_exact_on_instant(c, &p, s, 200 + (unsigned)k, "baumgarte");
        free(s);
        cdyn_constraint_free(c);
        sys_free(&p);
    }
}
END_TEST

START_TEST(exact_formulations_agree_with_bordered_solve_with_generalized_gains)
{
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        sys_t p;
        sys_random(&p, n, m, 2, 300 + (unsigned)k);
        tu_rng r;
        tu_rng_seed(&r, 300 + (unsigned)k);
        /* full SPD gains with leading dimension m + 1 (NaN padding) */
        int ld = m + 1;
        double *KD = nan_array((size_t)ld * m), *KP = nan_array((size_t)ld * m);
        tu_random_spd(&r, m, KD, ld);
        tu_random_spd(&r, m, KP, ld);
        for (int j = 0; j < m; ++j)
            for (int i = 0; i < m; ++i) KP[i + (size_t)j * ld] *= 3.0;
        cdyn_constraint *c = make(n, m);
        ck_assert_int_eq(cdyn_constraint_set_gains(c, KD, ld, KP, ld), CDYN_OK);
        ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
        double *s = malloc(sizeof(double) * (size_t)m);
        s_by_hand(m, p.xi, KD, ld, KP, ld, p.Phi, p.Phid, s);
        check_exact_on_instant(c, &p, s, 300 + (unsigned)k, "gains");

        /* critical gains k_i: K_D = diag(2 k_i), K_P = diag(k_i^2) */
        double *kk = malloc(sizeof(double) * (size_t)m);
        for (int i = 0; i < m; ++i) kk[i] = 1.0 + 0.7 * i;
        ck_assert_int_eq(cdyn_constraint_set_critical_gains(c, kk), CDYN_OK);
        ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
        for (int i = 0; i < m; ++i)
            s[i] = p.xi[i] - 2.0 * kk[i] * p.Phid[i] - kk[i] * kk[i] * p.Phi[i];
        check_exact_on_instant(c, &p, s, 400 + (unsigned)k, "critical");
        free(kk);
        free(s);
        free(KD);
        free(KP);
        cdyn_constraint_free(c);
        sys_free(&p);
    }
}
END_TEST

/* Rows of an m x n matrix made orthonormal (modified Gram-Schmidt on rows). */
static void orthonormal_rows(int m, int n, double *P, int ldp)
{
    for (int i = 0; i < m; ++i) {
        for (int k = 0; k < i; ++k) {
            double d = 0.0;
            for (int j = 0; j < n; ++j) d += P[i + (size_t)j * ldp] * P[k + (size_t)j * ldp];
            for (int j = 0; j < n; ++j) P[i + (size_t)j * ldp] -= d * P[k + (size_t)j * ldp];
        }
        double nrm = 0.0;
        for (int j = 0; j < n; ++j) nrm += P[i + (size_t)j * ldp] * P[i + (size_t)j * ldp];
        nrm = sqrt(nrm);
        for (int j = 0; j < n; ++j) P[i + (size_t)j * ldp] /= nrm;
    }
}

/* The multipliers come from the Cholesky of A = X X^T (X the whitened
 * constraint rows) when cond(A) <= 1e6, else from a pivoted QR of X^T that
 * never forms A. The path is no longer steered by the rank tolerance (which
 * only decides the rank; every result is certified by its backward error,
 * constraint.h), so each path is driven by the problem and checked against
 * the independent bordered solve: orthonormal Phi_q (cond(A) ~ cond(M) ~
 * 10: Cholesky) and the same Phi_q with its last row replaced by the first
 * plus 1e-4 times it (cond(Phi_q) ~ 1e4, cond(A) ~ 1e9 > 1e6: QR; still
 * full rank, the equilibrated ratio ~1e-4 >> 1e-10). Bounds: about
 * cond(KKT) eps, 1e-10 for the first; for the second cond(KKT) ~
 * cond(Phi_q)^2 = 1e8, and both the library's result and the bordered
 * reference carry about 1e8 eps ~ 1e-8 (1e-6 allowed).
 * Sizes on both sides of the small-kernel limit (16). */
/* Above 16 constraints the rank decision first tries a Gram certificate of
 * full rank (rank.h) and runs the pivoted QR only when that cannot certify.
 * Verdicts must be the QR's, in every unit system: n = 40, m = 20, one row
 * made a near copy of another at gaps 1, 1e-7 (full rank, but past what the
 * certificate can show: the QR decides), 1e-13 (below the rank tolerance)
 * and 0; states rescaled by alpha and constraint rows by beta (q = alpha x,
 * rows times beta: M / alpha^2, Phi_q beta / alpha, Q / alpha, s beta).
 * OK results satisfy M q'' + Phi_q^T lambda = Q and Phi_q q'' = s and at
 * gap 1 match the bordered solve; rank loss names row 2 or row 19. */
START_TEST(gram_certificate_keeps_the_rank_verdict_in_any_units)
{
    enum { NN = 40, MM = 20 };
    static const double gaps[] = {1.0, 1e-7, 1e-13, 0.0};
    static const double units[][2] = {{1.0, 1.0}, {1e8, 1e-8}, {1e-8, 1e8}, {1e8, 1e8}};
    tu_rng r;
    tu_rng_seed(&r, 902);
    double M0[NN * NN], P0[MM * NN], Q0[NN], s0[MM], M[NN * NN], P[MM * NN], Q[NN], s[MM];
    double q[NN], l[MM], qref[NN], lref[MM];
    tu_random_spd(&r, NN, M0, NN);
    tu_random(&r, NN, 1, Q0, NN);
    tu_random(&r, MM, 1, s0, MM);
    for (int g = 0; g < 4; ++g) {
        tu_random(&r, MM, NN, P0, MM);
        for (int j = 0; j < NN; ++j) P0[19 + j * MM] = P0[2 + j * MM] + gaps[g] * P0[19 + j * MM];
        double margin_first = -1.0;
        for (int u = 0; u < 4; ++u) {
            double alpha = units[u][0], beta = units[u][1];
            for (int i = 0; i < NN * NN; ++i) M[i] = M0[i] / (alpha * alpha);
            for (int i = 0; i < MM * NN; ++i) P[i] = P0[i] * beta / alpha;
            for (int i = 0; i < NN; ++i) Q[i] = Q0[i] / alpha;
            for (int i = 0; i < MM; ++i) s[i] = s0[i] * beta;
            cdyn_constraint *c = cdyn_constraint_create(NN, MM, NULL);
            ck_assert_ptr_nonnull(c);
            ck_assert_int_eq(cdyn_constraint_load(c, M, NN, Q, P, MM, NULL, NULL, s), CDYN_OK);
            cdyn_status st = cdyn_constraint_lagrange(c, q, l);
            if (g < 2) {
                ck_assert_msg(st == CDYN_OK, "gap %g units %d: %s", gaps[g], u,
                              cdyn_constraint_last_error(c));
                ck_assert_double_le(eom_residual(NN, MM, M, NN, P, MM, q, l, Q), 1e-12);
                ck_assert_double_le(acc_residual(NN, MM, P, MM, q, s), 1e-12);
                double margin = cdyn_constraint_margin(c);
                ck_assert_msg(margin > 1e-10 && margin <= 1.0, "margin %g", margin);
                if (u == 0) margin_first = margin;
                else
                    ck_assert_msg(margin >= margin_first / 16 && margin <= 16 * margin_first,
                                  "gap %g: margin %g in units %d, %g in SI", gaps[g], margin, u,
                                  margin_first);
                if (g == 0) {
                    ck_assert_int_eq(
                        bordered_solve(NN, MM, M, NN, P, MM, Q, s, NULL, qref, lref), 0);
                    ck_assert_double_le(reldiff(NN, q, qref), 1e-10);
                    ck_assert_double_le(reldiff(MM, l, lref), 1e-10);
                }
            } else {
                int rows[MM];
                ck_assert_msg(st == CDYN_ERR_SINGULAR, "gap %g units %d: status %d", gaps[g], u,
                              (int)st);
                ck_assert_int_eq(cdyn_constraint_rank(c), MM - 1);
                ck_assert_int_eq(cdyn_constraint_redundant_rows(c, rows), 1);
                ck_assert(rows[0] == 2 || rows[0] == 19);
            }
            cdyn_constraint_free(c);
        }
    }
}
END_TEST

/* The bordered system [M Phi^T; Phi 0] [q''; lambda] = [Q; s] solved in
 * quad precision (quadref.h): an independent reference, neither cdyn's
 * method nor LAPACK, for the small sizes. */
static void quad_kkt(int n, int m, const double *M, const double *P, const double *Q,
                     const double *s, quad *x)
{
    enum { MAXN = 32 };
    int N = n + m;
    quad K[MAXN * MAXN], b[MAXN];
    ck_assert_int_le(N, MAXN);
    for (int k = 0; k < N * N; ++k) K[k] = 0;
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) K[i + j * N] = M[i + (size_t)j * n];
        for (int i = 0; i < m; ++i) K[(n + i) + j * N] = K[j + (n + i) * N] = P[i + (size_t)j * m];
        b[j] = Q[j];
    }
    for (int i = 0; i < m; ++i) b[n + i] = s[i];
    ck_assert_int_eq(qref_solve(N, K, b, x), 0);
}

/* Unit systems 1e+-8 apart: coordinate j is scaled by a_j = unit[0] or its
 * inverse, alternately, and row i by b_i = unit[1] or its inverse. */
static const double UNITS[6][2] = {{1.0, 1.0}, {1e8, 1.0}, {1e-8, 1.0}, {1.0, 1e8},
                                   {1.0, 1e-8}, {1e8, 1e-8}};
enum { UNIT_MAXN = 16 };

/* The instant (M n x n, P m x n with ld m, Q, s) in those units: q = A x
 * and rows B Phi give M -> A^-1 M A^-1, Phi_q -> B Phi_q A^-1,
 * Q -> A^-1 Q, s -> B s; then q'' -> A q'' and lambda -> B^-1 lambda
 * (a[j], b[i] returned). */
static void in_units(const double *unit, int n, int m, const double *M, const double *P,
                     const double *Q, const double *s, double *a, double *b, double *Mu,
                     double *Pu, double *Qu, double *su)
{
    for (int j = 0; j < n; ++j) a[j] = j % 2 ? 1.0 / unit[0] : unit[0];
    for (int i = 0; i < m; ++i) b[i] = i % 2 ? 1.0 / unit[1] : unit[1];
    for (int j = 0; j < n; ++j) {
        Qu[j] = Q[j] / a[j];
        for (int i = 0; i < n; ++i) Mu[i + j * n] = M[i + j * n] / (a[i] * a[j]);
        for (int i = 0; i < m; ++i) Pu[i + j * m] = b[i] * P[i + j * m] / a[j];
    }
    for (int i = 0; i < m; ++i) su[i] = b[i] * s[i];
}

/* A random instant (cond(M) <= 2.3, Phi_q uniform) and its quad KKT
 * solution ref (n + m), with the largest |q''| and |lambda| of it. */
static void random_quad_instant(unsigned seed, int n, int m, double *M, double *P, double *Q,
                                double *s, quad *ref, quad *qmax, quad *lmax)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    tu_random_spd(&rng, n, M, n);
    tu_random(&rng, m, n, P, m);
    tu_random(&rng, n, 1, Q, n);
    tu_random(&rng, m, 1, s, m);
    quad_kkt(n, m, M, P, Q, s, ref);
    *qmax = *lmax = 0;
    for (int i = 0; i < n; ++i) *qmax = qref_abs(ref[i]) > *qmax ? qref_abs(ref[i]) : *qmax;
    for (int i = 0; i < m; ++i)
        *lmax = qref_abs(ref[n + i]) > *lmax ? qref_abs(ref[n + i]) : *lmax;
}

/* The largest errors of q'' and lambda, solved in the units (a, b), against
 * ref, relative to the largest of each. */
static void quad_errors(int n, int m, const quad *ref, quad qmax, quad lmax, const double *a,
                        const double *b, const double *q, const double *l, double *eq, double *el)
{
    *eq = *el = 0.0;
    for (int j = 0; j < n; ++j) *eq = fmax(*eq, (double)(qref_abs(q[j] / a[j] - ref[j]) / qmax));
    for (int i = 0; i < m; ++i) *el = fmax(*el, (double)(qref_abs(l[i] * b[i] - ref[n + i]) / lmax));
}

/* At n <= 16 a well-posed instant with M positive definite is solved
 * through the rank decision's own QR (constraint.h; the test asserts that
 * this path, and not the general one, gave the result). Random instants
 * (cond(M) <= 2.3, Phi_q uniform), in SI and in units where coordinates
 * and constraint rows are rescaled by 1e+-8 (M -> A^-1 M A^-1,
 * Phi_q -> B Phi_q A^-1, Q -> A^-1 Q, s -> B s; then q'' -> A q'',
 * lambda -> B^-1 lambda), every time after a history of larger Phi_q
 * (3 times the instant's, so that the decision's frame is not the
 * present instant's): q'' and lambda within 1e-12 of the quad
 * solve, relative to the largest of each. */
START_TEST(small_sizes_agree_with_a_quad_kkt_solve_in_any_units)
{
    static const int shapes[][2] = {{2, 1}, {2, 2}, {3, 1}, {3, 2}, {3, 3}, {4, 2}, {6, 3},
                                    {8, 1}, {8, 5}, {12, 6}, {16, 8}, {16, 16}};
    enum { NSHAPES = sizeof shapes / sizeof shapes[0], MAXN = UNIT_MAXN };
    for (int k = 0; k < NSHAPES; ++k) {
        int n = shapes[k][0], m = shapes[k][1];
        double M[MAXN * MAXN], P[MAXN * MAXN], Q[MAXN], s[MAXN];
        quad ref[2 * MAXN], qmax, lmax;
        random_quad_instant(4100 + (unsigned)k, n, m, M, P, Q, s, ref, &qmax, &lmax);
        cdyn_constraint *c = make(n, m);
        for (int u = 0; u < (int)(sizeof UNITS / sizeof UNITS[0]); ++u) {
            double a[MAXN], b[MAXN], Mu[MAXN * MAXN], Pu[MAXN * MAXN], Pbig[MAXN * MAXN];
            double Qu[MAXN], su[MAXN], q[MAXN], l[MAXN];
            in_units(UNITS[u], n, m, M, P, Q, s, a, b, Mu, Pu, Qu, su);
            for (int i = 0; i < m * n; ++i) Pbig[i] = 3.0 * Pu[i];
            ck_assert_int_eq(cdyn_constraint_reset_scales(c), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_load(c, Mu, n, Qu, Pbig, m, NULL, NULL, su), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_load(c, Mu, n, Qu, Pu, m, NULL, NULL, su), CDYN_OK);
            ck_assert_msg(cdyn_constraint_lagrange(c, q, l) == CDYN_OK, "n %d m %d units %d: %s",
                          n, m, u, cdyn_constraint_last_error(c));
            ck_assert_int_eq(c->path, CDYN__PATH_DECIDED);
            double eq, el;
            quad_errors(n, m, ref, qmax, lmax, a, b, q, l, &eq, &el);
            ck_assert_msg(eq <= 1e-12 && el <= 1e-12, "n %d m %d units %d: q'' %g, lambda %g", n,
                          m, u, eq, el);
        }
        cdyn_constraint_free(c);
    }
}
END_TEST

START_TEST(schur_and_rank_revealing_paths_give_the_same_solution)
{
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        for (int ill = 0; ill < 2; ++ill) {
            sys_t p;
            sys_random(&p, n, m, 1, 700 + (unsigned)k);
            orthonormal_rows(m, n, p.P, p.ldp);
            if (ill)
                for (int j = 0; j < n; ++j)
                    p.P[(m - 1) + (size_t)j * p.ldp] =
                        p.P[0 + (size_t)j * p.ldp] + 1e-4 * p.P[(m - 1) + (size_t)j * p.ldp];
            const double tq = ill ? 1e-6 : 1e-10, tl = ill ? 1e-6 : 1e-10;
            cdyn_constraint *c = make(n, m);
            ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
            double *qref = malloc(sizeof(double) * (size_t)n), *lref = malloc(sizeof(double) * (size_t)m);
            double *q1 = malloc(sizeof(double) * (size_t)n), *l1 = malloc(sizeof(double) * (size_t)m);
            ck_assert_int_eq(
                bordered_solve(n, m, p.M, p.ldm, p.P, p.ldp, p.Q, p.xi, NULL, qref, lref), 0);
            ck_assert_int_eq(cdyn_constraint_lagrange(c, q1, l1), CDYN_OK);
            assert_full_rank_facts(c);
            ck_assert_msg(reldiff(n, q1, qref) <= tq && reldiff(m, l1, lref) <= tl,
                          "n = %d, ill %d: lagrange differs by %g, %g", n, ill,
                          reldiff(n, q1, qref), reldiff(m, l1, lref));
            ck_assert_int_eq(cdyn_constraint_reactions(c, p.P, p.ldp, q1, l1), CDYN_OK);
            ck_assert_msg(reldiff(n, q1, qref) <= tq && reldiff(m, l1, lref) <= tl,
                          "n = %d, ill %d: reactions differ by %g, %g", n, ill,
                          reldiff(n, q1, qref), reldiff(m, l1, lref));
            free(qref), free(lref), free(q1), free(l1);
            cdyn_constraint_free(c);
            sys_free(&p);
        }
    }
}
END_TEST

START_TEST(badly_scaled_mass_is_solved_through_the_rank_revealing_path)
{
    /* M = diag(1e6, 1, 1e-6) (cond 1e12) with a well-conditioned Phi_q: the
     * Schur complement's condition bound is too large for the Cholesky path,
     * so the pivoted QR solves it; the identities M q'' + Phi_q^T lambda = Q
     * and Phi_q q'' = xi must hold to rounding, and lambda must match the
     * hand value from the 2 x 2 Schur complement. */
    const double M[9] = {1e6, 0, 0, 0, 1, 0, 0, 0, 1e-6}, Q[3] = {1e6, 2, 3e-6};
    const double P[6] = {1, 0, 1, 1, 0, 1}, xi[2] = {0.25, -0.5};
    cdyn_constraint *c = make(3, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 3, Q, P, 2, NULL, NULL, xi), CDYN_OK);
    double q[3], l[2];
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_double_le(eom_residual(3, 2, M, 3, P, 2, q, l, Q), 1e-14);
    ck_assert_double_le(acc_residual(3, 2, P, 2, q, xi), 1e-14);
    /* by hand: Phi_q M^-1 Q = (1 + 2, 2 + 3) = (3, 5); A = Phi_q M^-1 Phi_q^T
     * = [1e-6 + 1, 1; 1, 1 + 1e6]; lambda = A^-1 ((3, 5) - xi) */
    double a = 1e-6 + 1, b = 1.0, d = 1.0 + 1e6, r0 = 3 - 0.25, r1 = 5 + 0.5;
    double det = a * d - b * b, l0 = (d * r0 - b * r1) / det, l1 = (a * r1 - b * r0) / det;
    ck_assert_double_le(fabs(l[0] - l0) / fabs(l0), 1e-12);
    ck_assert_double_le(fabs(l[1] - l1) / fabs(l1), 1e-10);
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(schur_path_never_overrides_the_rank_decision_on_phi_q)
{
    /* The rank of Phi_q is decided on Phi_q equilibrated by powers of two
     * (one rank policy), so a column that is small only because of its
     * units is no rank loss: Phi_q = [1 0; 1 1e-11] equilibrates to
     * [1/2 0; 1/2 c] with c = 5e-12 * 2^38 = 0.687 (column 1 scaled up), a
     * well-conditioned matrix: pivoted QR of its transpose gives
     * |R22|/|R11| = c/2 / (1/4 + c^2) ~ 0.46, the margin. With
     * M = diag(1, 1e-22), Q = (1, 1e-22), xi = 0, by hand: both rows ask
     * q0'' = 0 and q1'' = 0, so Phi_q^T lambda = Q: lambda1 = 1e-22 / 1e-11 =
     * 1e-11, lambda0 = 1 - 1e-11. q1'' = 1e22 (Q1 - 1e-11 lambda1) amplifies
     * the rounding of lambda1 by 1e11, hence its bound; lambda1 itself comes
     * from (1 + 1e-11) - 1, so only absolutely exact. */
    const double M[4] = {1, 0, 0, 1e-22}, Q[2] = {1, 1e-22}, P[4] = {1, 1, 0, 1e-11};
    const double xi[2] = {0, 0};
    cdyn_constraint *c = make(2, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, xi), CDYN_OK);
    double q[2] = {SENTINEL, SENTINEL}, l[2] = {SENTINEL, SENTINEL};
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_double_le(fabs(l[0] - (1.0 - 1e-11)), 1e-15);
    ck_assert_double_le(fabs(l[1] - 1e-11), 1e-15);
    ck_assert_double_le(fabs(q[0]), 1e-15);
    ck_assert_double_le(fabs(q[1]), 1e-4);
    ck_assert_int_eq(cdyn_constraint_rank(c), -1); /* no rank-loss report */
    ck_assert_double_gt(cdyn_constraint_margin(c), 0.25);
    cdyn_constraint_free(c);

    /* A rank loss no scaling removes: Phi_q = [1 1; 1 1 + d], d = 2^-37
     * (7.3e-12, exact). Both rows have their largest entry in [1, 2): the
     * equilibrated Phi_q is Phi_q / 2 (column factors 1). Its transpose's
     * pivoted QR takes row 1 first (norm^2 1/2 + d/2 > 1/2), then
     * |R22|/|R11| = (d/4) / (1/4 + (1 + d)^2/4) ~ d/2 = 3.6e-12 <= 1e-10:
     * rank 1, row 0 redundant. M = I, Q = (2, 2 + d), xi = 0: whatever the
     * path, the documented rank loss must be reported, outputs untouched. */
    const double d = ldexp(1.0, -37);
    const double I2[4] = {1, 0, 0, 1}, Q2[2] = {2, 2 + d}, P2[4] = {1, 1, 1, 1 + d};
    c = make(2, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, I2, 2, Q2, P2, 2, NULL, NULL, xi), CDYN_OK);
    q[0] = q[1] = l[0] = l[1] = SENTINEL;
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(cdyn_constraint_rank(c), 1);
    int row = -1;
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, &row), 1);
    ck_assert_int_eq(row, 0);
    ck_assert(q[0] == SENTINEL && q[1] == SENTINEL && l[0] == SENTINEL && l[1] == SENTINEL);
    ck_assert_int_eq(cdyn_constraint_reactions(c, P2, 2, q, l), CDYN_ERR_SINGULAR);
    ck_assert(q[0] == SENTINEL && l[0] == SENTINEL);
    /* a finer tolerance (1e-13 < 3.6e-12) passes the rank decision, but
     * the KKT system [I Phi_q^T; Phi_q 0] has condition ~ (4/d)^2 = 3e23:
     * singular to working accuracy, so the certified solve still refuses
     * (constraint.h), outputs untouched */
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(c, 1e-13), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert(q[0] == SENTINEL && q[1] == SENTINEL && l[0] == SENTINEL && l[1] == SENTINEL);
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(pseudoinverse_survives_extreme_scales)
{
    /* Phi_q = a [1 1; 1 -1], M = I, Q = 0, xi = a (1, 2) for a = 1e155 and
     * a = 1e-160: the constraints alone fix q'' (q0 + q1 = 1, q0 - q1 = 2:
     * q'' = (1.5, -0.5)) and Phi_q^T lambda = -q'' gives lambda = -(0.5,
     * 1) / a. The squared singular values (1e310, 1e-320) are not
     * representable, so the coefficients must be divided by s twice. */
    const double scales[2] = {1e155, 1e-160};
    for (int k = 0; k < 2; ++k) {
        double a = scales[k];
        const double M[4] = {1, 0, 0, 1}, Q[2] = {0, 0}, P[4] = {a, a, a, -a};
        const double xi[2] = {a, 2 * a};
        cdyn_constraint *c = make(2, 2);
        ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, xi), CDYN_OK);
        double q[2], l[2];
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
        ck_assert_msg(fabs(q[0] - 1.5) <= 1e-14 && fabs(q[1] + 0.5) <= 1e-14,
                      "a = %g: q'' = (%g, %g)", a, q[0], q[1]);
        ck_assert_msg(fabs(l[0] * a + 0.5) <= 1e-14 && fabs(l[1] * a + 1.0) <= 1e-14,
                      "a = %g: lambda a = (%g, %g)", a, l[0] * a, l[1] * a);
        ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
        ck_assert(fabs(q[0] - 1.5) <= 1e-14 && fabs(q[1] + 0.5) <= 1e-14);
        cdyn_constraint_free(c);
    }
}
END_TEST

START_TEST(no_constraints_give_the_unconstrained_acceleration)
{
    /* m = 0: every formulation returns q'' = M^{-1} Q */
    int n = 4;
    sys_t p;
    sys_random(&p, n, 0, 1, 77);
    double qref[4];
    ck_assert_int_eq(dense_solve(n, p.M, p.ldm, p.Q, qref), 0);
    cdyn_constraint *c = make(n, 0);
    ck_assert_int_eq(cdyn_constraint_load(c, p.M, p.ldm, p.Q, NULL, 1, NULL, NULL, NULL), CDYN_OK);
    double *q = dbuf(4);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, NULL), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, qref), 1e-12);
    dbuf_reset(q, 4);
    ck_assert_int_eq(cdyn_constraint_reactions(c, NULL, 1, q, NULL), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, qref), 1e-12);
    dbuf_reset(q, 4);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, NULL), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, qref), 1e-12);
    dbuf_reset(q, 4);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, NULL), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, qref), 1e-12);
    ck_assert(dbuf_guards_intact(q, 4));
    double gf[4];
    ck_assert_int_eq(cdyn_constraint_force(c, gf, NULL), CDYN_OK);
    for (int i = 0; i < n; ++i) ck_assert_double_eq(gf[i], 0.0);
    dbuf_free(q);
    cdyn_constraint_free(c);
    sys_free(&p);
}
END_TEST

/* ======================================================================== */
/* 2. Penalty (modified Lagrange, T4.8)                                      */

START_TEST(penalty_solves_the_regularized_bordered_system)
{
    /* (M + Phi_q^T a Phi_q) q'' = Q + Phi_q^T a s with lambda = a (Phi_q q'' - s)
     * is exactly [M Phi_q^T; Phi_q -a^{-1}] [q''; lambda] = [Q; s]. */
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        sys_t p;
        sys_random(&p, n, m, 2, 500 + (unsigned)k);
        cdyn_constraint *c = make(n, m);
        const double a = 0.8, b = 2.5;
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, a, b), CDYN_OK);
        ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
        double *s = malloc(sizeof(double) * m), *inva = malloc(sizeof(double) * m);
        double *alpha = malloc(sizeof(double) * m), *qref = malloc(sizeof(double) * n);
        double *lref = malloc(sizeof(double) * m);
        double *q = dbuf((size_t)n), *l = dbuf((size_t)m);
        for (int i = 0; i < m; ++i) s[i] = p.xi[i] - 2.0 * a * p.Phid[i] - b * b * p.Phi[i];
        for (int pass = 0; pass < 2; ++pass) {
            /* pass 0: alpha = 10 for all; pass 1: per-constraint alpha */
            for (int i = 0; i < m; ++i) alpha[i] = pass == 0 ? 10.0 : 3.0 + 10.0 * i;
            ck_assert_int_eq(cdyn_constraint_set_penalty(c, alpha), CDYN_OK);
            for (int i = 0; i < m; ++i) inva[i] = 1.0 / alpha[i];
            ck_assert_int_eq(bordered_solve(n, m, p.M, p.ldm, p.P, p.ldp, p.Q, s, inva, qref,
                                            lref),
                             0);
            dbuf_reset(q, (size_t)n);
            dbuf_reset(l, (size_t)m);
            ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
            ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
            ck_assert_msg(reldiff(n, q, qref) <= 1e-10, "n=%d pass %d q'': %g", n, pass,
                          reldiff(n, q, qref));
            ck_assert_msg(reldiff(m, l, lref) <= 1e-10, "n=%d pass %d lambda: %g", n, pass,
                          reldiff(m, l, lref));
            /* the equations of motion hold exactly with the lambda estimate */
            ck_assert_double_le(eom_residual(n, m, p.M, p.ldm, p.P, p.ldp, q, l, p.Q), 1e-12);
        }
        dbuf_free(q);
        dbuf_free(l);
        free(s);
        free(inva);
        free(alpha);
        free(qref);
        free(lref);
        cdyn_constraint_free(c);
        sys_free(&p);
    }
}
END_TEST

/* Penalty error against the KKT solution for alpha = 1e4, 1e6, 1e8 (all
 * constraints). The first-order term is predicted independently: with
 * eps = 1/alpha, d/d eps of [M P^T; P -eps I][q; l] = [Q; s] at eps = 0 is
 * K [dq; dl] = [0; l_KKT] (K the KKT matrix), so q_alpha - q_KKT ~ dq/alpha. */
static void check_penalty_convergence(const sys_t *p, const double *s, const char *what)
{
    int n = p->n, m = p->m;
    double *qk = malloc(sizeof(double) * n), *lk = malloc(sizeof(double) * m);
    double *dq = malloc(sizeof(double) * n), *dl = malloc(sizeof(double) * m);
    double *zero = calloc((size_t)n, sizeof(double));
    double *q = malloc(sizeof(double) * n), *l = malloc(sizeof(double) * m);
    double *alpha = malloc(sizeof(double) * m), *pred = malloc(sizeof(double) * n);
    ck_assert_int_eq(bordered_solve(n, m, p->M, p->ldm, p->P, p->ldp, p->Q, s, NULL, qk, lk), 0);
    ck_assert_int_eq(bordered_solve(n, m, p->M, p->ldm, p->P, p->ldp, zero, lk, NULL, dq, dl), 0);
    cdyn_constraint *c = make(n, m);
    ck_assert_int_eq(sys_load(c, p), CDYN_OK);
    double eq[3], el[3];
    double dqn = tu_vec_max_abs(n, dq), dln = tu_vec_max_abs(m, dl);
    for (int t = 0; t < 3; ++t) {
        double alph = pow(10.0, 4 + 2 * t);
        for (int i = 0; i < m; ++i) alpha[i] = alph;
        ck_assert_int_eq(cdyn_constraint_set_penalty(c, alpha), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
        eq[t] = 0.0;
        el[t] = 0.0;
        for (int i = 0; i < n; ++i) eq[t] = fmax(eq[t], fabs(q[i] - qk[i]));
        for (int i = 0; i < m; ++i) el[t] = fmax(el[t], fabs(l[i] - lk[i]));
        ck_assert(all_finite(n, q) && all_finite(m, l));
        if (t < 2) {
            /* leading term dq / alpha; the next is O(alpha^-2) */
            for (int i = 0; i < n; ++i) pred[i] = qk[i] + dq[i] / alph;
            double e = 0.0;
            for (int i = 0; i < n; ++i) e = fmax(e, fabs(q[i] - pred[i]));
            ck_assert_msg(e <= 0.02 * dqn / alph, "%s alpha=%g: q'' - (q_KKT + dq/alpha) = %g, "
                          "|dq|/alpha = %g", what, alph, e, dqn / alph);
        }
        /* the error is of the predicted size 1/alpha (rounding grows like
         * eps * alpha and stays well below it up to 1e8) */
        ck_assert_msg(eq[t] <= 1.1 * dqn / alph && eq[t] >= 0.9 * dqn / alph,
                      "%s alpha=%g: |q'' - q_KKT| = %g vs |dq|/alpha = %g", what, alph, eq[t],
                      dqn / alph);
        ck_assert_msg(el[t] <= 1.5 * dln / alph, "%s alpha=%g: |lambda - lambda_KKT| = %g vs %g",
                      what, alph, el[t], dln / alph);
    }
    /* 100x per step of 100 in alpha */
    ck_assert_msg(eq[0] / eq[1] >= 85.0 && eq[0] / eq[1] <= 115.0, "%s ratio 1e4/1e6 = %g", what,
                  eq[0] / eq[1]);
    ck_assert_msg(eq[1] / eq[2] >= 85.0 && eq[1] / eq[2] <= 115.0, "%s ratio 1e6/1e8 = %g", what,
                  eq[1] / eq[2]);
    ck_assert_msg(el[0] / el[1] >= 85.0 && el[0] / el[1] <= 115.0, "%s lambda ratio = %g", what,
                  el[0] / el[1]);
    cdyn_constraint_free(c);
    free(qk);
    free(lk);
    free(dq);
    free(dl);
    free(zero);
    free(q);
    free(l);
    free(alpha);
    free(pred);
}

START_TEST(penalty_error_shrinks_like_one_over_alpha)
{
    for (int k = 0; k < NSIZES; ++k) {
        int n = SIZES[k][0], m = SIZES[k][1];
        sys_t p;
        sys_random(&p, n, m, 1, 600 + (unsigned)k);
        check_penalty_convergence(&p, p.xi, "random");
        sys_free(&p);
    }
}
END_TEST

START_TEST(penalty_handles_a_massless_coordinate)
{
    /* q = (q0, q1, q2, q3), q3 massless: M = [A 0; 0 0] with A SPD 3x3; two
     * constraints that involve q3. M is singular, but M is PD on the null
     * space of Phi_q (Phi_q e3 != 0), so the bordered matrix is nonsingular
     * and M + Phi_q^T alpha Phi_q is PD. */
    enum { n = 4, m = 2 };
    tu_rng r;
    tu_rng_seed(&r, 700);
    double A[9], M[16] = {0}, P[m * n], Q[n], xi[m];
    tu_random_spd(&r, 3, A, 3);
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) M[i + 4 * j] = A[i + 3 * j];
    tu_random(&r, m, n, P, m);
    P[0 + 3 * m] = 0.9;
    P[1 + 3 * m] = -0.6;
    tu_random(&r, n, 1, Q, n);
    tu_random(&r, m, 1, xi, m);
    sys_t p;
    sys_from(&p, n, m, M, Q, P, NULL, NULL, xi);

    cdyn_constraint *c = make(n, m);
    ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
    /* the exact forms no longer need M itself positive definite: with M
     * singular they solve through M + Phi_q^T D Phi_q (constraint.h), and
     * since the KKT system is regular they give its (exact) solution, the
     * bordered solve's */
    double *q = dbuf(n), *l = dbuf(m);
    double kq[n], kl[m];
    ck_assert_int_eq(bordered_solve(n, m, M, n, P, m, Q, xi, NULL, kq, kl), 0);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, n) && dbuf_guards_intact(l, m));
    ck_assert_double_le(reldiff(n, q, kq), 1e-10);
    ck_assert_double_le(reldiff(m, l, kl), 1e-10);
    dbuf_reset(q, n);
    dbuf_reset(l, m);
    ck_assert_int_eq(cdyn_constraint_reactions(c, P, m, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, kq), 1e-10);
    ck_assert_double_le(reldiff(m, l, kl), 1e-10);
    dbuf_reset(q, n);
    dbuf_reset(l, m);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, kq), 1e-10);
    ck_assert_double_le(reldiff(m, l, kl), 1e-10);
    dbuf_reset(q, n);
    dbuf_reset(l, m);

    /* exact at alpha = 10: the regularized bordered system */
    double qref[n], lref[m], inva[m] = {0.1, 0.1}, ten[m] = {10.0, 10.0};
    ck_assert_int_eq(bordered_solve(n, m, M, n, P, m, Q, xi, inva, qref, lref), 0);
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, ten), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, n) && dbuf_guards_intact(l, m));
    ck_assert_double_le(reldiff(n, q, qref), 1e-10);
    ck_assert_double_le(reldiff(m, l, lref), 1e-10);
    cdyn_constraint_free(c);

    /* and converges like 1/alpha to the bordered (KKT) solution */
    check_penalty_convergence(&p, xi, "massless");
    dbuf_free(q);
    dbuf_free(l);
    sys_free(&p);
}
END_TEST

/* The default constraint masses (constraint.h: 2^20 times the mass each
 * constraint moves) and the refinement of the default form make the
 * penalty form agree with the exact solution (a quad-precision KKT solve)
 * whatever the units: random instants as in
 * small_sizes_agree_with_a_quad_kkt_solve_in_any_units, with coordinates
 * and rows rescaled by 1e+-8 (each unit system a new history:
 * cdyn_constraint_reset_scales), within 1e-12 of the largest q'' and
 * lambda (measured: 5.3e-16; one unrefined penalty solve was 1.0e-5 off,
 * the bias 1/alpha, about 1e-6, times the conditioning of the
 * constraints through M, and this test allowed 5e-5). */
START_TEST(default_penalty_agrees_with_a_quad_kkt_solve_in_any_units)
{
    static const int shapes[][2] = {{2, 1}, {3, 1}, {3, 2}, {4, 2}, {6, 3},
                                    {8, 1}, {8, 5}, {12, 6}, {16, 8}};
    enum { NSHAPES = sizeof shapes / sizeof shapes[0], MAXN = UNIT_MAXN };
    for (int k = 0; k < NSHAPES; ++k) {
        int n = shapes[k][0], m = shapes[k][1];
        double M[MAXN * MAXN], P[MAXN * MAXN], Q[MAXN], s[MAXN];
        quad ref[2 * MAXN], qmax, lmax;
        random_quad_instant(4300 + (unsigned)k, n, m, M, P, Q, s, ref, &qmax, &lmax);
        cdyn_constraint *c = make(n, m);
        for (int u = 0; u < (int)(sizeof UNITS / sizeof UNITS[0]); ++u) {
            double a[MAXN], b[MAXN], Mu[MAXN * MAXN], Pu[MAXN * MAXN];
            double Qu[MAXN], su[MAXN], q[MAXN], l[MAXN];
            in_units(UNITS[u], n, m, M, P, Q, s, a, b, Mu, Pu, Qu, su);
            ck_assert_int_eq(cdyn_constraint_reset_scales(c), CDYN_OK); /* other units: a new history */
            ck_assert_int_eq(cdyn_constraint_load(c, Mu, n, Qu, Pu, m, NULL, NULL, su), CDYN_OK);
            ck_assert_msg(cdyn_constraint_penalty(c, q, l) == CDYN_OK, "n %d m %d units %d: %s",
                          n, m, u, cdyn_constraint_last_error(c));
            double eq, el;
            quad_errors(n, m, ref, qmax, lmax, a, b, q, l, &eq, &el);
            ck_assert_msg(eq <= 1e-12 && el <= 1e-12, "n %d m %d units %d: q'' %g, lambda %g", n,
                          m, u, eq, el);
        }
        cdyn_constraint_free(c);
    }
}
END_TEST

/* Light coordinates tied to heavy ones (third adversarial review): one
 * penalty solve leaves lambda 2^-20 off, and a light coordinate's
 * q'' = (Q - Phi_q^T lambda) / m_light multiplies that by the mass ratio
 * (1e6 kg beside 1e-6 kg gave q'' = 1 for 1e-6, with CDYN_OK); a light
 * coupler between heavy bodies made the default's diagonal estimate of
 * the mass each row moves 1e12 too small (100 % error). The refined
 * default with the rows' effective masses (constraint.h) must agree with
 * the quad KKT solve in every unit system of in_units (1e+-8 apart, each
 * a new history), within 1e-9 of the largest q'' and lambda (measured:
 * 1.0e-10, for the mass ratio 1e12 with rows in units of 1e8: the
 * refinement's rounding floor, eps times the ratio over 2^20), or refuse:
 *   - Phi_q = [1 -1], Q = (0, 1) on the light one, masses (1e3, 1),
 *     (1e6, 1e-6), (1, 1) and (1, 1e-12), (1, 0);
 *   - heavy - light - heavy, Phi_q = [1 -1 0; 0 1 -1], Q = (1, 0, 0):
 *     (1e3, 1), (1e6, 1e-6), (1, 1e-12), (1, 0);
 *   - 60 random instants, n <= 9, orthonormal rows, masses 10^U(-6, 6);
 *   - m2 = 1e-300 beside 1 kg (the penalty's error times 1e300; it was
 *     1.3e294 with CDYN_OK): CDYN_ERR_NOCONV, outputs untouched. */
static void check_light_beside_heavy(int n, int m, const double *M, const double *P,
                                     const double *Q, const double *s, const char *what)
{
    enum { MAXN = UNIT_MAXN };
    quad ref[2 * MAXN], qmax = 0, lmax = 0;
    quad_kkt(n, m, M, P, Q, s, ref);
    for (int j = 0; j < n; ++j) qmax = qref_abs(ref[j]) > qmax ? qref_abs(ref[j]) : qmax;
    for (int i = 0; i < m; ++i) lmax = qref_abs(ref[n + i]) > lmax ? qref_abs(ref[n + i]) : lmax;
    cdyn_constraint *c = make(n, m);
    for (int u = 0; u < (int)(sizeof UNITS / sizeof UNITS[0]); ++u) {
        double a[MAXN], b[MAXN], Mu[MAXN * MAXN], Pu[MAXN * MAXN], Qu[MAXN], su[MAXN];
        double q[MAXN], l[MAXN], eq, el;
        in_units(UNITS[u], n, m, M, P, Q, s, a, b, Mu, Pu, Qu, su);
        ck_assert_int_eq(cdyn_constraint_reset_scales(c), CDYN_OK); /* other units: a new history */
        ck_assert_int_eq(cdyn_constraint_load(c, Mu, n, Qu, Pu, m, NULL, NULL, su), CDYN_OK);
        ck_assert_msg(cdyn_constraint_penalty(c, q, l) == CDYN_OK, "%s, units %d: %s", what, u,
                      cdyn_constraint_last_error(c));
        quad_errors(n, m, ref, qmax, lmax, a, b, q, l, &eq, &el);
        ck_assert_msg(eq <= 1e-9 && el <= 1e-9, "%s, units %d: q'' %g, lambda %g", what, u, eq,
                      el);
    }
    cdyn_constraint_free(c);
}

START_TEST(default_penalty_is_exact_beside_light_coordinates)
{
    static const double pairs[][2] = {{1e3, 1.0}, {1e6, 1e-6}, {1.0, 1.0}, {1.0, 1e-12},
                                      {1.0, 0.0}};
    for (int k = 0; k < 5; ++k) {
        double M[4] = {pairs[k][0], 0.0, 0.0, pairs[k][1]}, P[2] = {1.0, -1.0};
        double Q[2] = {0.0, 1.0}, s[1] = {0.0};
        check_light_beside_heavy(2, 1, M, P, Q, s, "pair");
    }
    static const double chains[][2] = {{1e3, 1.0}, {1e6, 1e-6}, {1.0, 1e-12}, {1.0, 0.0}};
    for (int k = 0; k < 4; ++k) {
        double H = chains[k][0], L = chains[k][1];
        double M[9] = {H, 0, 0, 0, L, 0, 0, 0, H}, P[6] = {1, 0, -1, 1, 0, -1};
        double Q[3] = {1.0, 0.0, 0.0}, s[2] = {0.0, 0.0};
        check_light_beside_heavy(3, 2, M, P, Q, s, "chain");
    }
    tu_rng r;
    tu_rng_seed(&r, 4600);
    for (int t = 0; t < 60; ++t) {
        int n = 2 + (int)(4.0 * (tu_uniform(&r) + 1.0)), m = 1 + t % (n - 1); /* n <= 9 */
        double M[81] = {0}, P[81], Q[9], s[9];
        for (int j = 0; j < n; ++j) M[j + j * n] = pow(10.0, 6.0 * tu_uniform(&r));
        for (int i = 0; i < m; ++i) { /* orthonormal rows: Phi_q itself well conditioned */
            double row[9], norm = 0.0;
            for (int j = 0; j < n; ++j) row[j] = tu_uniform(&r);
            for (int p = 0; p < i; ++p) {
                double d = 0.0;
                for (int j = 0; j < n; ++j) d += row[j] * P[p + j * m];
                for (int j = 0; j < n; ++j) row[j] -= d * P[p + j * m];
            }
            for (int j = 0; j < n; ++j) norm += row[j] * row[j];
            for (int j = 0; j < n; ++j) P[i + j * m] = row[j] / sqrt(norm);
        }
        for (int j = 0; j < n; ++j) Q[j] = tu_uniform(&r) * M[j + j * n];
        for (int i = 0; i < m; ++i) s[i] = tu_uniform(&r);
        check_light_beside_heavy(n, m, M, P, Q, s, "random");
    }
    /* beyond what the refinement reaches: refused, not wrong */
    double M[4] = {1.0, 0.0, 0.0, 1e-300}, P[2] = {1.0, -1.0}, Q[2] = {0.0, 1.0}, s[1] = {0.0};
    cdyn_constraint *c = make(2, 1);
    double *q = dbuf(2), *l = dbuf(1);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 1, NULL, NULL, s), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_NOCONV);
    ck_assert(dbuf_untouched(q, 2) && dbuf_untouched(l, 1));
    ck_assert_ptr_nonnull(strstr(cdyn_constraint_last_error(c), "lagrange"));
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
}
END_TEST

/* A row of zeros in Phi_q (a pendulum at its pivot) moves nothing and
 * carries no multiplier under the default: lambda = 0 there and q'' is
 * the unconstrained M^-1 Q. A caller's alpha keeps its meaning: lambda =
 * alpha (0 - s) for that row.
 * A row that moves only a massless coordinate has no mass of its own to
 * outweigh. With M = diag(2, 3, 0) and rows [1 0 1] (a mass and the
 * massless q2) and [0 0 1] (q2 alone), the first row lends q2 its mass
 * and the second takes its default from it: q'' and lambda within 1e-12
 * of the bordered solve's (measured 1.9e-16; 2.1e-6 unrefined), in the six
 * unit systems of in_units (1e+-8 apart). Alone
 * (M = diag(2, 0), Phi_q = [0 1]) such a row has no default: CDYN_ERR_ARG,
 * outputs untouched, and the object solves once alpha is given; nor has a
 * row whose weight overflows (CDYN_ERR_NONFINITE). */
START_TEST(default_penalty_for_rows_of_zeros_and_of_massless_coordinates)
{
    double M[4] = {2.0, 0.0, 0.0, 2.0}, Q[2] = {0.0, -19.62}, P[2] = {0.0, 0.0}, s[1] = {-3.0};
    cdyn_constraint *c = make(2, 1);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 1, NULL, NULL, s), CDYN_OK);
    double *q = dbuf(3), *l = dbuf(2);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_eq(q[0], 0.0);
    ck_assert_double_eq_tol(q[1], -9.81, 1e-14);
    ck_assert_double_eq(l[0], 0.0);
    double alpha[1] = {7.0};
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, alpha), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_eq_tol(l[0], 21.0, 1e-13);
    ck_assert_double_eq_tol(q[1], -9.81, 1e-14);

    /* a massless coordinate alone in its row: no default */
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, NULL), CDYN_OK);
    double M1[4] = {2.0, 0.0, 0.0, 0.0}, Q1[2] = {1.5, 4.0}, P1[2] = {0.0, 1.0};
    ck_assert_int_eq(cdyn_constraint_load(c, M1, 2, Q1, P1, 1, NULL, NULL, s), CDYN_OK);
    dbuf_reset(q, 2);
    dbuf_reset(l, 1);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(q, 2) && dbuf_untouched(l, 1));
    ck_assert_ptr_nonnull(strstr(cdyn_constraint_last_error(c), "row 0"));
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, alpha), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_eq_tol(l[0], 4.0, 1e-13); /* lambda = Q1 for any alpha */

    /* a weight Phi_ij^2 / M_jj beyond the double range (1e400 / 1e-300):
     * no default alpha_c either */
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, NULL), CDYN_OK);
    double M2[4] = {1e-300, 0.0, 0.0, 1.0}, P2[2] = {1e200, 0.0};
    ck_assert_int_eq(cdyn_constraint_load(c, M2, 2, Q1, P2, 1, NULL, NULL, s), CDYN_OK);
    dbuf_reset(q, 2);
    dbuf_reset(l, 1);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_NONFINITE);
    ck_assert(dbuf_untouched(q, 2) && dbuf_untouched(l, 1));
    ck_assert_ptr_nonnull(strstr(cdyn_constraint_last_error(c), "alpha_c[0]"));
    cdyn_constraint_free(c);

    /* ... and with a row on a mass that reaches it */
    enum { n = 3, m = 2 };
    const double M3[9] = {2.0, 0, 0, 0, 3.0, 0, 0, 0, 0.0}, Q3[3] = {1.5, -2.0, 4.0};
    const double P3[6] = {1.0, 0.0, 0.0, 0.0, 1.0, 1.0}, s3[2] = {0.5, -3.0};
    double qref[n], lref[m];
    ck_assert_int_eq(bordered_solve(n, m, M3, n, P3, m, Q3, s3, NULL, qref, lref), 0);
    c = make(n, m);
    for (int u = 0; u < (int)(sizeof UNITS / sizeof UNITS[0]); ++u) {
        double a[n], b[m], Mu[9], Qu[n], Pu[6], su[m];
        in_units(UNITS[u], n, m, M3, P3, Q3, s3, a, b, Mu, Pu, Qu, su);
        ck_assert_int_eq(cdyn_constraint_reset_scales(c), CDYN_OK); /* other units: a new history */
        ck_assert_int_eq(cdyn_constraint_load(c, Mu, n, Qu, Pu, m, NULL, NULL, su), CDYN_OK);
        ck_assert_msg(cdyn_constraint_penalty(c, q, l) == CDYN_OK, "units %d: %s", u,
                      cdyn_constraint_last_error(c));
        double eq = 0.0, el = 0.0;
        for (int j = 0; j < n; ++j) eq = fmax(eq, fabs(q[j] / a[j] - qref[j]));
        for (int i = 0; i < m; ++i) el = fmax(el, fabs(l[i] * b[i] - lref[i]));
        ck_assert_msg(eq <= 1e-12 * tu_vec_max_abs(n, qref) &&
                          el <= 1e-12 * tu_vec_max_abs(m, lref),
                      "units %d: q'' %g, lambda %g", u, eq, el);
    }
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
}
END_TEST

/* The default takes the largest mass-weighted size a row has had
 * (constraint.h), so that a row vanishing at a singular pose keeps its
 * penalty instead of an ever stiffer one. M = diag(2, 3), Q = (1, -1),
 * Phi_q = [e 0], s = 1/4: (M + alpha Phi_q^T Phi_q) q'' = Q + Phi_q^T alpha s
 * gives q0'' = (1 + alpha e s) / (2 + alpha e^2), q1'' = -1/3 and
 * lambda = alpha (e q0'' - s) = alpha (e - 2 s) / (2 + alpha e^2) (by
 * hand). After e = 1 (w = 1/2, alpha = 2^21) the rows e = 1e-3 ... 1e-9
 * keep alpha = 2^21, and q0'' goes to Q0 / M00 = 1/2 as the row vanishes.
 * The default form is refined towards the exact solution (q0'' = s / e,
 * lambda = (1 - 2 s / e) / e) where alpha G = alpha e^2 / 2 is large
 * (e = 1: exact to rounding); where it is not (e <= 1e-3, about 1 and
 * below, the row's effective mass 2 / e^2 far above its history's 2) the
 * penalty's own answer above is kept: a singular pose. After
 * cdyn_constraint_reset_scales the present row sets alpha, 2^20 / w
 * rounded to the nearest power of two, w = e^2 / 2, and the refined answer
 * is the exact form's blow-up s / e. */
static void check_vanishing_row(cdyn_constraint *c, double e, double alpha)
{
    double M[4] = {2.0, 0.0, 0.0, 3.0}, Q[2] = {1.0, -1.0}, s[1] = {0.25}, P[2] = {e, 0.0};
    double q[2], l[1];
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 1, NULL, NULL, s), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    double den = 2.0 + alpha * e * e, want = (1.0 + alpha * e * s[0]) / den;
    double lam = alpha * (e - 2.0 * s[0]) / den, rounding = 0.0;
    if (alpha * e * e / 2.0 >= 0x1p10) { /* refined: the exact solution */
        want = s[0] / e;
        lam = (1.0 - 2.0 * want) / e;
        rounding = 8.0 * DBL_EPSILON * (1.0 + 2.0 * fabs(want)) / e; /* of its terms */
    } else { /* lambda = alpha (e q0'' - s) carries alpha eps of its terms (constraint.h) */
        rounding = 8.0 * alpha * DBL_EPSILON * (fabs(e * want) + s[0]);
    }
    ck_assert_msg(fabs(q[0] - want) <= 1e-12 * fabs(want), "e %g: q0'' %.17g, want %.17g", e, q[0],
                  want);
    ck_assert_double_eq_tol(q[1], -1.0 / 3.0, 1e-15);
    ck_assert_msg(fabs(l[0] - lam) <= rounding + 1e-12 * fabs(lam),
                  "e %g: lambda %.17g, want %.17g", e, l[0], lam);
}

START_TEST(default_penalty_keeps_the_largest_row_it_has_seen)
{
    cdyn_constraint *c = make(2, 1);
    const double rows[] = {1.0, 1e-3, 1e-6, 1e-9};
    for (int k = 0; k < 4; ++k) check_vanishing_row(c, rows[k], 0x1p21);
    double q[2], l[1];
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK); /* e = 1e-9 */
    ck_assert_double_lt(fabs(q[0] - 0.5), 1e-3); /* bounded: Q0 / M00 as the row vanishes */
    ck_assert_int_eq(cdyn_constraint_reset_scales(c), CDYN_OK);
    double e = 1e-3;
    check_vanishing_row(c, e, exp2(round(log2(0x1p20 / (e * e / 2.0)))));
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_gt(q[0], 249.0); /* s / e = 250: the exact form's */
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(penalty_reports_a_motion_without_mass_or_constraint)
{
    /* M = diag(1, 2, 0); the constraint Phi = q0 + q1 leaves q2 free and
     * massless: M + Phi_q^T alpha Phi_q = [1+a a 0; a 2+a 0; 0 0 0] is
     * singular for every alpha. */
    double M[9] = {1, 0, 0, 0, 2, 0, 0, 0, 0}, Q[3] = {1, -1, 0.5}, P[3] = {1, 1, 0};
    double xi[1] = {0.3};
    cdyn_constraint *c = make(3, 1);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 3, Q, P, 1, NULL, NULL, xi), CDYN_OK);
    double *q = dbuf(3), *l = dbuf(1);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert(dbuf_untouched(q, 3) && dbuf_untouched(l, 1));
    ck_assert_str_ne(cdyn_constraint_last_error(c), "");
    double big[1] = {1e6};
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, big), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert(dbuf_untouched(q, 3) && dbuf_untouched(l, 1));
    double gf[3];
    ck_assert_int_eq(cdyn_constraint_force(c, gf, NULL), CDYN_ERR_ARG);

    /* the object still works: give q2 a mass */
    M[8] = 3.0;
    ck_assert_int_eq(cdyn_constraint_load(c, M, 3, Q, P, 1, NULL, NULL, xi), CDYN_OK);
    double qref[3], lref[1], inva[1] = {1e-6};
    ck_assert_int_eq(bordered_solve(3, 1, M, 3, P, 1, Q, xi, inva, qref, lref), 0);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(3, q, qref), 1e-9);
    ck_assert_double_le(reldiff(1, l, lref), 1e-9);
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
}
END_TEST

/* ======================================================================== */
/* 3. Pendulum in Cartesian coordinates                                      */

START_TEST(pendulum_matches_the_angle_equation_and_rod_tension)
{
    /* x = l sin th, y = -l cos th; Phi = x^2 + y^2 - l^2, Phi_q = [2x 2y],
     * xi = -2 (x'^2 + y'^2), M = m I, Q = (0, -m g). Exact motion:
     * th'' = -(g/l) sin th; rod tension T = m g cos th + m l th'^2 pulls the
     * bob to the pivot, so Phi_q^T lambda = (T/l)(x, y) = 2 lambda (x, y)
     * gives lambda = T / (2 l); with C = (x, y)/l the reaction f = T. */
    const double mass = 2.5, len = 1.3, g = G_ACC;
    const double angles[] = {0.3, 1.2, -2.0, 2.9}, rates[] = {0.0, 1.7, -0.9};
    cdyn_constraint *c = make(2, 1);
    double *q = dbuf(2), *l = dbuf(1);
    for (size_t a = 0; a < sizeof angles / sizeof angles[0]; ++a)
        for (size_t b = 0; b < sizeof rates / sizeof rates[0]; ++b) {
            double th = angles[a], w = rates[b];
            double x = len * sin(th), y = -len * cos(th);
            double xd = len * cos(th) * w, yd = len * sin(th) * w;
            double thdd = -(g / len) * sin(th);
            double qref[2] = {len * (cos(th) * thdd - sin(th) * w * w),
                              len * (sin(th) * thdd + cos(th) * w * w)};
            double T = mass * g * cos(th) + mass * len * w * w;
            double M[4] = {mass, 0, 0, mass}, Q[2] = {0, -mass * g}, P[2] = {2 * x, 2 * y};
            double xi = -2.0 * (xd * xd + yd * yd), Phid = 2 * x * xd + 2 * y * yd;
            ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 1, NULL, &Phid, &xi), CDYN_OK);

            dbuf_reset(q, 2);
            dbuf_reset(l, 1);
            ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
            ck_assert_msg(reldiff(2, q, qref) <= 1e-12, "th=%g w=%g lagrange q'': %g", th, w,
                          reldiff(2, q, qref));
            ck_assert_msg(fabs(l[0] - T / (2 * len)) <= 1e-12 * fabs(T / (2 * len)),
                          "th=%g w=%g lambda %.17g vs T/(2l) %.17g", th, w, l[0], T / (2 * len));

            double C[2] = {x / len, y / len};
            dbuf_reset(q, 2);
            dbuf_reset(l, 1);
            ck_assert_int_eq(cdyn_constraint_reactions(c, C, 1, q, l), CDYN_OK);
            ck_assert_double_le(reldiff(2, q, qref), 1e-12);
            ck_assert_msg(fabs(l[0] - T) <= 1e-12 * fabs(T), "th=%g w=%g f %.17g vs T %.17g", th,
                          w, l[0], T);

            dbuf_reset(q, 2);
            dbuf_reset(l, 1);
            ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
            ck_assert_double_le(reldiff(2, q, qref), 1e-12);
            ck_assert_double_le(fabs(l[0] - T / (2 * len)), 1e-12 * fabs(T / (2 * len)));
            ck_assert(dbuf_guards_intact(q, 2) && dbuf_guards_intact(l, 1));
        }
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
}
END_TEST

/* ======================================================================== */
/* 4. Slider-crank of THEORY T6.1                                            */

/* Geometry chosen here (the published data give M and F only): crank of
 * length r = 0.15 pinned at the origin at angle th1 from +x, rod of length
 * L = 0.5 at angle th3, slider on the x axis at s:
 *     Phi1 = r cos th1 + L cos th3 - s = 0
 *     Phi2 = r sin th1 - L sin th3     = 0
 * q = (s, th1, th3); Phi_q = [-1  -r sin th1  -L sin th3;
 *                             0   r cos th1  -L cos th3];
 * xi = (r cos th1 th1'^2 + L cos th3 th3'^2, r sin th1 th1'^2 - L sin th3 th3'^2). */
START_TEST(slider_crank_formulations_agree_with_bordered_and_null_space_solves)
{
    const double r = 0.15, L = 0.5;
    const double crank[] = {0.7, 2.0, 4.0}, w1 = 3.0;
    cdyn_constraint *c = make(3, 2);
    for (size_t k = 0; k < sizeof crank / sizeof crank[0]; ++k) {
        double t1 = crank[k];
        double t3 = asin(r * sin(t1) / L);
        double kap = r * cos(t1) / (L * cos(t3)); /* th3' = kap th1' */
        double w3 = kap * w1;
        double s3 = sin(t3), c3 = cos(t3);
        /* T6.1, column-major */
        double M[9] = {2.5, 0, s3 / 4, 0, 3.0 / 400, 0, s3 / 4, 0, 129.0 / 1000};
        double F[3] = {-w3 * w3 * c3 / 4, -2943.0 * cos(t1) / 10000, 981.0 * c3 / 400};
        double P[6] = {-1, 0, -r * sin(t1), r * cos(t1), -L * s3, -L * c3};
        double xi[2] = {r * cos(t1) * w1 * w1 + L * c3 * w3 * w3,
                        r * sin(t1) * w1 * w1 - L * s3 * w3 * w3};
        /* Phi_dot = Phi_q q' = 0 for consistent speeds (checked) */
        double v[3] = {-r * sin(t1) - L * s3 * kap, 1.0, kap}, Pv[2];
        tu_matvec(2, 3, P, 2, v, Pv);
        ck_assert_double_le(fabs(Pv[0]) + fabs(Pv[1]), 1e-15);
        ck_assert_int_eq(cdyn_constraint_load(c, M, 3, F, P, 2, NULL, NULL, xi), CDYN_OK);

        double qref[3], lref[2];
        ck_assert_int_eq(bordered_solve(3, 2, M, 3, P, 2, F, xi, NULL, qref, lref), 0);
        /* null-space formulation: [Phi_q; v^T M] q'' = [xi; v^T F] */
        double A[9], b[3], qns[3], vM[3];
        tu_matvec_t(3, 3, M, 3, v, vM);
        for (int j = 0; j < 3; ++j) {
            A[0 + 3 * j] = P[0 + 2 * j];
            A[1 + 3 * j] = P[1 + 2 * j];
            A[2 + 3 * j] = vM[j];
        }
        b[0] = xi[0];
        b[1] = xi[1];
        b[2] = v[0] * F[0] + v[1] * F[1] + v[2] * F[2];
        ck_assert_int_eq(dense_solve(3, A, 3, b, qns), 0);
        ck_assert_double_le(reldiff(3, qref, qns), 1e-12);

        double q[3], l[2], Cneg[6];
        ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
        ck_assert_msg(reldiff(3, q, qref) <= 1e-10, "th1=%g lagrange %g", t1, reldiff(3, q, qref));
        ck_assert_double_le(reldiff(2, l, lref), 1e-10);
        ck_assert_double_le(reldiff(3, q, qns), 1e-10);
        ck_assert_double_le(eom_residual(3, 2, M, 3, P, 2, q, l, F), 1e-12);
        ck_assert_double_le(acc_residual(3, 2, P, 2, q, xi), 1e-12);

        ck_assert_int_eq(cdyn_constraint_reactions(c, P, 2, q, l), CDYN_OK);
        ck_assert_double_le(reldiff(3, q, qref), 1e-10);
        ck_assert_double_le(reldiff(2, l, lref), 1e-10);
        /* reactions measured the other way round: C = -Phi_q gives f = -lambda */
        for (int i = 0; i < 6; ++i) Cneg[i] = -P[i];
        ck_assert_int_eq(cdyn_constraint_reactions(c, Cneg, 2, q, l), CDYN_OK);
        ck_assert_double_le(reldiff(3, q, qref), 1e-10);
        ck_assert_double_le(fabs(l[0] + lref[0]) + fabs(l[1] + lref[1]),
                            1e-10 * tu_vec_max_abs(2, lref));

        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
        ck_assert_double_le(reldiff(3, q, qref), 1e-10);
        ck_assert_double_le(reldiff(2, l, lref), 1e-10);

        /* penalty: the regularized bordered system at alpha = 10 */
        double inva[2] = {0.1, 0.1}, ten[2] = {10.0, 10.0}, qp[3], lp[2];
        ck_assert_int_eq(bordered_solve(3, 2, M, 3, P, 2, F, xi, inva, qp, lp), 0);
        ck_assert_int_eq(cdyn_constraint_set_penalty(c, ten), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
        ck_assert_double_le(reldiff(3, q, qp), 1e-10);
        ck_assert_double_le(reldiff(2, l, lp), 1e-10);
    }
    cdyn_constraint_free(c);
}
END_TEST

/* ======================================================================== */
/* 5. Redundant constraints                                                  */

START_TEST(duplicated_row_is_named_by_lagrange_and_split_by_the_pseudoinverse)
{
    enum { n = 5, mb = 2, m = 3 };
    const double a = 1.0, b = 2.0;
    sys_t base;
    sys_random(&base, n, mb, 0, 800);
    /* rows (ra, ra, rb), ra the base row of larger norm, with Phi, Phi', xi
     * duplicated the same way. The pivoted QR of Phi_q^T then takes column 0
     * first and leaves its copy, column 1, for last (had rb been larger, the
     * first pivot would swap column 0 behind column 1 and row 0 would be
     * named: either copy is a correct answer, which is asserted as well) */
    double nrm[2] = {0, 0};
    for (int i = 0; i < mb; ++i)
        for (int j = 0; j < n; ++j) nrm[i] += base.P[i + mb * j] * base.P[i + mb * j];
    const int ra = nrm[0] >= nrm[1] ? 0 : 1, rb = 1 - ra;
    const int src[m] = {ra, ra, rb};
    double P[m * n], Phi[m], Phid[m], xi[m];
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) P[i + m * j] = base.P[src[i] + mb * j];
        Phi[i] = base.Phi[src[i]];
        Phid[i] = base.Phid[src[i]];
        xi[i] = base.xi[src[i]];
    }
    sys_t dup;
    sys_from(&dup, n, m, base.M, base.Q, P, Phi, Phid, xi);
    double sb[mb], sd[m], qk[n], lk[mb];
    for (int i = 0; i < mb; ++i) sb[i] = base.xi[i] - 2 * a * base.Phid[i] - b * b * base.Phi[i];
    for (int i = 0; i < m; ++i) sd[i] = sb[src[i]];
    ck_assert_int_eq(bordered_solve(n, mb, base.M, n, base.P, mb, base.Q, sb, NULL, qk, lk), 0);

    cdyn_constraint *c = make(n, m);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, a, b), CDYN_OK);
    ck_assert_int_eq(sys_load(c, &dup), CDYN_OK);
    double *q = dbuf(n), *l = dbuf(m);
    int *rows = ibuf(m);

    /* KKT: rank loss reported, nothing written */
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert(dbuf_untouched(q, n) && dbuf_untouched(l, m));
    ck_assert_int_eq(cdyn_constraint_rank(c), 2);
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, rows), 1);
    ck_assert(rows[0] == 0 || rows[0] == 1);
    ck_assert_int_eq(rows[0], 1); /* pivoted QR keeps the first of equal columns */
    ck_assert(ibuf_guards_intact(rows, 1));
    double sv = cdyn_constraint_smallest_singular_value(c);
    ck_assert_msg(sv >= 0.0 && sv <= 1e-14 * tu_max_abs(m, n, P, m), "sigma_min %g", sv);
    ck_assert_str_ne(cdyn_constraint_last_error(c), "");

    /* pseudo-inverse: the motion of the single constraint, lambda split */
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert(dbuf_guards_intact(q, n) && dbuf_guards_intact(l, m));
    ck_assert_msg(reldiff(n, q, qk) <= 1e-10, "pinv q'': %g", reldiff(n, q, qk));
    double lmin[m] = {lk[ra] / 2, lk[ra] / 2, lk[rb]};
    ck_assert_msg(reldiff(m, l, lmin) <= 1e-10, "pinv lambda: %g", reldiff(m, l, lmin));
    ck_assert_double_le(acc_residual(n, m, P, m, q, sd), 1e-12);
    ck_assert_int_eq(cdyn_constraint_rank(c), 2);
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, rows), 1);
    ck_assert_int_eq(rows[0], 1);

    /* penalty: exact at alpha = 10 against the regularized bordered system
     * (nonsingular despite the duplicate), and O(1/alpha) from the motion */
    double inva[m] = {0.1, 0.1, 0.1}, ten[m] = {10.0, 10.0, 10.0}, qp[n], lp[m];
    ck_assert_int_eq(bordered_solve(n, m, base.M, n, P, m, base.Q, sd, inva, qp, lp), 0);
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, ten), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(n, q, qp), 1e-10);
    ck_assert_double_le(reldiff(m, l, lp), 1e-10);
    double e[3];
    for (int t = 0; t < 3; ++t) {
        double alph = pow(10.0, 4 + 2 * t), al[m] = {alph, alph, alph};
        ck_assert_int_eq(cdyn_constraint_set_penalty(c, al), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
        e[t] = reldiff(n, q, qk);
        /* the two copies carry the same multiplier */
        ck_assert_double_le(fabs(l[0] - l[1]), 1e-6 * fabs(lk[ra]));
    }
    ck_assert_msg(e[0] / e[1] >= 85 && e[0] / e[1] <= 115, "ratio %g", e[0] / e[1]);
    ck_assert_msg(e[1] / e[2] >= 85 && e[1] / e[2] <= 115, "ratio %g", e[1] / e[2]);
    ck_assert_double_le(e[2], 1e-6);
    dbuf_free(q);
    dbuf_free(l);
    ibuf_free(rows);
    cdyn_constraint_free(c);
    sys_free(&base);
    sys_free(&dup);
}
END_TEST

/* Parallelogram with a redundant fifth link. Three cranks of length l are
 * pinned to the ground at (g_i, 0), g = (0, d, e), and to a coupler of length
 * d at the coupler points u = g_i measured from its left end. Coordinates
 * q = (th1, th2, th3, x, y, phi): crank angles from +x, coupler centre (x, y)
 * and angle phi. A coupler point is (x, y) + (u - d/2)(cos phi, sin phi), so
 * crank i gives
 *     Phi_{2i}   = g_i + l cos th_i - x - (g_i - d/2) cos phi
 *     Phi_{2i+1} = l sin th_i - y - (g_i - d/2) sin phi
 * Cranks 1, 2 and ground and coupler form the parallelogram; crank 3 is the
 * redundant link: n = 6, m = 6, rank 5, one degree of freedom. In the
 * parallelogram pose th_i = th, phi = 0, x = d/2 + l cos th, y = l sin th,
 * speeds th_i' = w, phi' = 0, the exact motion follows from Lagrange's
 * equation in th: J th'' = -g cos th (l/2 sum m_i + m_c l),
 * J = sum m_i l^2/3 + m_c l^2 (cranks: uniform rods about the pivot; the
 * coupler translates). */
typedef struct {
    double l, d, e, mc, mk[3];
} parallelogram;

static void parallelogram_instant(const parallelogram *g, double th, double w, double *M,
                                  double *Q, double *P, double *xi, double *qref)
{
    const int n = 6, m = 6;
    const double gi[3] = {0.0, g->d, g->e};
    memset(M, 0, sizeof(double) * n * n);
    memset(P, 0, sizeof(double) * m * n);
    for (int i = 0; i < 3; ++i) M[i + n * i] = g->mk[i] * g->l * g->l / 3.0;
    M[3 + n * 3] = g->mc;
    M[4 + n * 4] = g->mc;
    M[5 + n * 5] = g->mc * g->d * g->d / 12.0;
    for (int i = 0; i < 3; ++i) Q[i] = -g->mk[i] * G_ACC * g->l / 2.0 * cos(th);
    Q[3] = 0.0;
    Q[4] = -g->mc * G_ACC;
    Q[5] = 0.0;
    const double phi = 0.0;
    for (int i = 0; i < 3; ++i) {
        int r0 = 2 * i, r1 = 2 * i + 1;
        double off = gi[i] - g->d / 2.0;
        P[r0 + m * i] = -g->l * sin(th);
        P[r0 + m * 3] = -1.0;
        P[r0 + m * 5] = off * sin(phi);
        P[r1 + m * i] = g->l * cos(th);
        P[r1 + m * 4] = -1.0;
        P[r1 + m * 5] = -off * cos(phi);
        xi[r0] = g->l * cos(th) * w * w; /* phi' = 0 */
        xi[r1] = g->l * sin(th) * w * w;
    }
    double J = g->mc * g->l * g->l, Gm = g->mc * g->l;
    for (int i = 0; i < 3; ++i) {
        J += g->mk[i] * g->l * g->l / 3.0;
        Gm += g->mk[i] * g->l / 2.0;
    }
    double thdd = -G_ACC * cos(th) * Gm / J;
    for (int i = 0; i < 3; ++i) qref[i] = thdd;
    qref[3] = -g->l * (sin(th) * thdd + cos(th) * w * w);
    qref[4] = g->l * (cos(th) * thdd - sin(th) * w * w);
    qref[5] = 0.0;
}

/* constraint.h: the pseudo-inverse's minimum-norm multipliers do "not
 * depend on the units of the constraints". A row and its copy in units c
 * times larger are the same constraint, so they share the multiplier:
 * lambda_copy = lambda_orig / c, lambda_orig = Lambda / 2 (Lambda the
 * single row's). Stop 46: the norm used the rank decision's power-of-two
 * row factors, so c = 3 gave a split 28 % off and c = 1000 2.4 % off.
 * Asserts (1e-12 relative, 1e-10 for the last):
 *  - by hand, n = 2, M = I, Q = (0, -9.81), rows (0.6, 0.8) and c times
 *    it, xi = (0.5, 0.5 c): Lambda = 0.8 Q_1 - 0.5 = -8.348, for c = 3,
 *    1000, 1e-7, 1e8, -2.5 and the coordinates in units 1e-8..1e8 (which
 *    leave lambda as it is);
 *  - random: n = 4, two random rows a, b with copies c1 a, c2 b (c1, c2 =
 *    +-10^U(-8, 8)), M SPD: lambda against Lambda_a, Lambda_b of the
 *    two-row KKT system solved in quad (qref_solve), 20 draws;
 *  - a dependent row that is no copy (row 2 = 0.7 row 0 - 1.3 row 1): each
 *    row rescaled by 10^U(-8, 8) returns lambda_i / c_i, 20 draws. */
static void expect_split(const double *l, const double *want, int m, double tol,
                         const char *what)
{
    for (int i = 0; i < m; ++i)
        ck_assert_msg(fabs(l[i] - want[i]) <= tol * fabs(want[i]),
                      "%s: lambda[%d] = %.15g, want %.15g", what, i, l[i], want[i]);
}

START_TEST(pseudoinverse_split_does_not_depend_on_the_units_of_the_constraints)
{
    const double cs[6] = {3.0, 1000.0, 1e-7, 1e8, -2.5, 1.0}, units[3] = {1e-8, 1.0, 1e8};
    const double Lambda = 0.8 * -9.81 - 0.5;
    for (int k = 0; k < 6; ++k)
        for (int u = 0; u < 9; ++u) {
            double cf = cs[k], d[2] = {units[u % 3], units[u / 3]};
            double M[4] = {d[0] * d[0], 0.0, 0.0, d[1] * d[1]}, Q[2] = {0.0, -9.81 * d[1]};
            double P[4] = {0.6 * d[0], cf * 0.6 * d[0], 0.8 * d[1], cf * 0.8 * d[1]};
            double xi[2] = {0.5, 0.5 * cf}, q[2], l[2];
            double want[2] = {Lambda / 2.0, Lambda / (2.0 * cf)};
            cdyn_constraint *c = make(2, 2);
            ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, xi), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_rank(c), 1);
            expect_split(l, want, 2, 1e-12, "copy by hand");
            cdyn_constraint_free(c);
        }
    tu_rng r;
    tu_rng_seed(&r, 4646);
    enum { n = 4, m = 4 };
    for (int draw = 0; draw < 20; ++draw) {
        double M[n * n], Q[n], base[2 * n], xb[2], P[m * n], xi[m], q[n], l[m];
        tu_random_spd(&r, n, M, n);
        tu_random(&r, n, 1, Q, n);
        tu_random(&r, 2, n, base, 2);
        tu_random(&r, 2, 1, xb, 2);
        double c1 = copysign(pow(10.0, 8.0 * tu_uniform(&r)), tu_uniform(&r));
        double c2 = copysign(pow(10.0, 8.0 * tu_uniform(&r)), tu_uniform(&r));
        const double scale[m] = {1.0, c1, 1.0, c2};
        const int src[m] = {0, 0, 1, 1};
        for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) P[i + m * j] = scale[i] * base[src[i] + 2 * j];
            xi[i] = scale[i] * xb[src[i]];
        }
        /* [M B^T; B 0] [q''; Lambda] = [Q; xb] in quad, B the two base rows */
        quad K[36] = {0}, rhs[6], x[6];
        for (int j = 0; j < n; ++j) {
            for (int i = 0; i < n; ++i) K[i + 6 * j] = M[i + n * j];
            for (int i = 0; i < 2; ++i)
                K[(n + i) + 6 * j] = K[j + 6 * (n + i)] = base[i + 2 * j];
            rhs[j] = Q[j];
        }
        rhs[n] = xb[0];
        rhs[n + 1] = xb[1];
        ck_assert_int_eq(qref_solve(6, K, rhs, x), 0);
        const double want[m] = {(double)(x[n] / 2), (double)(x[n] / (2 * (quad)c1)),
                                (double)(x[n + 1] / 2), (double)(x[n + 1] / (2 * (quad)c2))};
        cdyn_constraint *c = make(n, m);
        ck_assert_int_eq(cdyn_constraint_load(c, M, n, Q, P, m, NULL, NULL, xi), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_rank(c), 2);
        expect_split(l, want, m, 1e-12, "random copies");
        cdyn_constraint_free(c);
    }
    for (int draw = 0; draw < 20; ++draw) {
        enum { n3 = 3, m3 = 3 };
        double M[n3 * n3], Q[n3], P[m3 * n3], xi[m3], q[n3], l1[m3], l[m3], Ps[m3 * n3], xs[m3];
        tu_random_spd(&r, n3, M, n3);
        tu_random(&r, n3, 1, Q, n3);
        tu_random(&r, m3, n3, P, m3);
        tu_random(&r, 2, 1, xi, m3);
        for (int j = 0; j < n3; ++j) P[2 + m3 * j] = 0.7 * P[0 + m3 * j] - 1.3 * P[1 + m3 * j];
        xi[2] = 0.7 * xi[0] - 1.3 * xi[1];
        cdyn_constraint *c = make(n3, m3);
        ck_assert_int_eq(cdyn_constraint_load(c, M, n3, Q, P, m3, NULL, NULL, xi), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l1), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_rank(c), 2);
        cdyn_constraint_free(c);
        double cr[m3], want[m3];
        for (int i = 0; i < m3; ++i) {
            cr[i] = pow(10.0, 8.0 * tu_uniform(&r));
            for (int j = 0; j < n3; ++j) Ps[i + m3 * j] = cr[i] * P[i + m3 * j];
            xs[i] = cr[i] * xi[i];
            want[i] = l1[i] / cr[i];
        }
        c = make(n3, m3);
        ck_assert_int_eq(cdyn_constraint_load(c, M, n3, Q, Ps, m3, NULL, NULL, xs), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
        expect_split(l, want, m3, 1e-10, "dependent row, rows rescaled");
        cdyn_constraint_free(c);
    }
}
END_TEST

START_TEST(redundant_parallelogram_link_moves_correctly_under_pinv_and_penalty)
{
    enum { n = 6, m = 6 };
    const parallelogram g = {0.4, 1.0, 0.35, 2.0, {1.0, 1.5, 0.7}};
    const double poses[][2] = {{1.0, 0.8}, {0.3, -1.5}, {2.2, 0.0}};
    cdyn_constraint *c = make(n, m);
    cdyn_constraint *red = make(n, m - 1);
    double *q = dbuf(n), *l = dbuf(m);
    int *rows = ibuf(m);
    for (size_t k = 0; k < sizeof poses / sizeof poses[0]; ++k) {
        double M[n * n], Q[n], P[m * n], xi[m], qref[n];
        parallelogram_instant(&g, poses[k][0], poses[k][1], M, Q, P, xi, qref);
        ck_assert_int_eq(cdyn_constraint_load(c, M, n, Q, P, m, NULL, NULL, xi), CDYN_OK);

        /* KKT refuses and names one row */
        dbuf_reset(q, n);
        dbuf_reset(l, m);
        ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
        ck_assert(dbuf_untouched(q, n) && dbuf_untouched(l, m));
        ck_assert_int_eq(cdyn_constraint_rank(c), 5);
        ck_assert_int_eq(cdyn_constraint_redundant_rows(c, rows), 1);
        ck_assert(ibuf_guards_intact(rows, 1));
        int drop = rows[0];
        ck_assert(drop >= 0 && drop < m);
        ck_assert_double_le(cdyn_constraint_smallest_singular_value(c), 1e-13);

        /* dropping the named row leaves an independent set: KKT on it gives
         * the exact motion */
        double Pr[(m - 1) * n], xr[m - 1], qr[n], lr[m - 1];
        for (int j = 0; j < n; ++j)
            for (int i = 0, ii = 0; i < m; ++i)
                if (i != drop) Pr[ii++ + (m - 1) * j] = P[i + m * j];
        for (int i = 0, ii = 0; i < m; ++i)
            if (i != drop) xr[ii++] = xi[i];
        ck_assert_int_eq(cdyn_constraint_load(red, M, n, Q, Pr, m - 1, NULL, NULL, xr), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_lagrange(red, qr, lr), CDYN_OK);
        ck_assert_msg(reldiff(n, qr, qref) <= 1e-10, "pose %zu reduced KKT: %g", k,
                      reldiff(n, qr, qref));

        /* pseudo-inverse: the exact motion with all six rows */
        dbuf_reset(q, n);
        dbuf_reset(l, m);
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
        ck_assert(dbuf_guards_intact(q, n) && dbuf_guards_intact(l, m));
        ck_assert_msg(reldiff(n, q, qref) <= 1e-10, "pose %zu pinv: %g", k, reldiff(n, q, qref));
        ck_assert_double_le(reldiff(n, q, qr), 1e-10);
        ck_assert_double_le(eom_residual(n, m, M, n, P, m, q, l, Q), 1e-12);
        ck_assert_int_eq(cdyn_constraint_rank(c), 5);

        /* penalty: exact regularized solution at alpha = 10, and converges
         * to the motion like 1/alpha. The penalty matrix has condition
         * ~ alpha |Phi_q|^2 / min(M) ~ alpha * 1e2 here (crank inertias
         * ~0.04), so rounding grows like 1e-14 alpha and meets the 1/alpha
         * error (~3e-2/alpha relative) near alpha ~ 1e7: the 1/alpha law is
         * checked on 1e2, 1e4, 1e6, and alpha = 1e8 only for accuracy. */
        double inva[m], qp[n], lp[m], al[m];
        for (int i = 0; i < m; ++i) inva[i] = 0.1;
        for (int i = 0; i < m; ++i) al[i] = 10.0;
        ck_assert_int_eq(cdyn_constraint_set_penalty(c, al), CDYN_OK);
        ck_assert_int_eq(bordered_solve(n, m, M, n, P, m, Q, xi, inva, qp, lp), 0);
        ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
        ck_assert_double_le(reldiff(n, q, qp), 1e-10);
        ck_assert_double_le(reldiff(m, l, lp), 1e-10);
        double e[4];
        for (int t = 0; t < 4; ++t) {
            for (int i = 0; i < m; ++i) al[i] = pow(10.0, 2 + 2 * t);
            ck_assert_int_eq(cdyn_constraint_set_penalty(c, al), CDYN_OK);
            ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_OK);
            e[t] = reldiff(n, q, qref);
        }
        ck_assert_msg(e[0] / e[1] >= 85 && e[0] / e[1] <= 115, "pose %zu ratio %g", k,
                      e[0] / e[1]);
        ck_assert_msg(e[1] / e[2] >= 85 && e[1] / e[2] <= 115, "pose %zu ratio %g", k,
                      e[1] / e[2]);
        ck_assert_msg(e[2] <= 1e-6 && e[3] <= 1e-6, "pose %zu: %g %g", k, e[2], e[3]);
    }
    dbuf_free(q);
    dbuf_free(l);
    ibuf_free(rows);
    cdyn_constraint_free(c);
    cdyn_constraint_free(red);
}
END_TEST

/* ======================================================================== */
/* 6. Generalized Baumgarte: per-constraint critically damped decay (T4.6)   */

/* Linear constraints Phi = P q - cvec (Phi_t = 0, xi = 0): with the
 * stabilized acceleration Phi'' = P q'' = s = -K_D Phi' - K_P Phi, so with
 * K_D = diag(2k), K_P = diag(k^2) each Phi_i follows
 * (Phi0 + (Phi'0 + k Phi0) t) e^{-kt} whatever M and Q are. */
typedef struct {
    int n, m;
    const double *M, *Q, *P, *cvec;
    cdyn_constraint *c;
} linear_system;

static void lin_accel(const linear_system *ls, const double *q, const double *v, double *qdd)
{
    double Phi[8], Phid[8], lam[8];
    tu_matvec(ls->m, ls->n, ls->P, ls->m, q, Phi);
    for (int i = 0; i < ls->m; ++i) Phi[i] -= ls->cvec[i];
    tu_matvec(ls->m, ls->n, ls->P, ls->m, v, Phid);
    ck_assert_int_eq(
        cdyn_constraint_load(ls->c, ls->M, ls->n, ls->Q, ls->P, ls->m, Phi, Phid, NULL),
        CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(ls->c, qdd, lam), CDYN_OK);
}

/* Least-squares residual of Phi(t) ~ (A + B t) e^{-k t} over the samples,
 * for a given k (A, B by the 2x2 normal equations). */
static double decay_fit(int ns, const double *t, const double *y, double k, double *A, double *B)
{
    double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
    for (int j = 0; j < ns; ++j) {
        double e = exp(-k * t[j]), f0 = e, f1 = t[j] * e;
        s00 += f0 * f0;
        s01 += f0 * f1;
        s11 += f1 * f1;
        r0 += f0 * y[j];
        r1 += f1 * y[j];
    }
    double det = s00 * s11 - s01 * s01;
    *A = (s11 * r0 - s01 * r1) / det;
    *B = (s00 * r1 - s01 * r0) / det;
    double res = 0.0;
    for (int j = 0; j < ns; ++j) {
        double d = y[j] - (*A + *B * t[j]) * exp(-k * t[j]);
        res += d * d;
    }
    return res;
}

/* The k that fits best: a log-spaced scan over [0.1, 100], then golden
 * section around the best grid point. */
static double fit_rate(int ns, const double *t, const double *y, double *A, double *B)
{
    int best = 0;
    double bestres = INFINITY;
    const int grid = 400;
    for (int g = 0; g <= grid; ++g) {
        double k = 0.1 * pow(1000.0, (double)g / grid);
        double res = decay_fit(ns, t, y, k, A, B);
        if (res < bestres) {
            bestres = res;
            best = g;
        }
    }
    double lo = 0.1 * pow(1000.0, (double)(best > 0 ? best - 1 : 0) / grid);
    double hi = 0.1 * pow(1000.0, (double)(best < grid ? best + 1 : grid) / grid);
    const double gr = 0.5 * (sqrt(5.0) - 1.0);
    for (int it = 0; it < 100; ++it) {
        double k1 = hi - gr * (hi - lo), k2 = lo + gr * (hi - lo);
        if (decay_fit(ns, t, y, k1, A, B) < decay_fit(ns, t, y, k2, A, B))
            hi = k2;
        else
            lo = k1;
    }
    double k = 0.5 * (lo + hi);
    decay_fit(ns, t, y, k, A, B);
    return k;
}

static void check_decay(int n, int m, const double *M, const double *Q, const double *P,
                        const double *q0, const double *v0, const double *Phi0,
                        const double *Phid0, const double *kk, const char *what)
{
    ck_assert(n <= 8 && m <= 2);
    /* cvec such that Phi(q0) = Phi0; the initial Phi'(0) = P v0 */
    double cvec[2], Pq[2], Pv[2];
    tu_matvec(m, n, P, m, q0, Pq);
    for (int i = 0; i < m; ++i) cvec[i] = Pq[i] - Phi0[i];
    tu_matvec(m, n, P, m, v0, Pv);
    for (int i = 0; i < m; ++i) ck_assert_double_le(fabs(Pv[i] - Phid0[i]), 1e-14);

    linear_system ls = {n, m, M, Q, P, cvec, make(n, m)};
    ck_assert_int_eq(cdyn_constraint_set_critical_gains(ls.c, kk), CDYN_OK);
    const double dt = 1e-3, T = 4.0;
    const int steps = (int)(T / dt + 0.5);
    double *ts = malloc(sizeof(double) * (steps + 1));
    double *ph = malloc(sizeof(double) * 2 * (steps + 1));
    double q[8], v[8], k1q[8], k1v[8], k2q[8], k2v[8], k3q[8], k3v[8], k4q[8], k4v[8];
    double qt[8], vt[8];
    memcpy(q, q0, sizeof(double) * n);
    memcpy(v, v0, sizeof(double) * n);
    for (int s = 0; s <= steps; ++s) {
        double t = s * dt, phi[2];
        tu_matvec(m, n, P, m, q, phi);
        ts[s] = t;
        for (int i = 0; i < m; ++i) {
            ph[i * (steps + 1) + s] = phi[i] - cvec[i];
            /* closed form along the way */
            double exact = (Phi0[i] + (Phid0[i] + kk[i] * Phi0[i]) * t) * exp(-kk[i] * t);
            double scale = fabs(Phi0[i]) + fabs(Phid0[i]) / kk[i];
            ck_assert_msg(fabs(phi[i] - cvec[i] - exact) <= 1e-8 * scale,
                          "%s constraint %d at t=%g: %g vs %g", what, i, t, phi[i] - cvec[i],
                          exact);
        }
        if (s == steps) break;
        /* classical RK4 on (q, v)' = (v, q''(q, v)) */
        memcpy(k1q, v, sizeof(double) * n);
        lin_accel(&ls, q, v, k1v);
        for (int i = 0; i < n; ++i) {
            qt[i] = q[i] + 0.5 * dt * k1q[i];
            vt[i] = v[i] + 0.5 * dt * k1v[i];
        }
        memcpy(k2q, vt, sizeof(double) * n);
        lin_accel(&ls, qt, vt, k2v);
        for (int i = 0; i < n; ++i) {
            qt[i] = q[i] + 0.5 * dt * k2q[i];
            vt[i] = v[i] + 0.5 * dt * k2v[i];
        }
        memcpy(k3q, vt, sizeof(double) * n);
        lin_accel(&ls, qt, vt, k3v);
        for (int i = 0; i < n; ++i) {
            qt[i] = q[i] + dt * k3q[i];
            vt[i] = v[i] + dt * k3v[i];
        }
        memcpy(k4q, vt, sizeof(double) * n);
        lin_accel(&ls, qt, vt, k4v);
        for (int i = 0; i < n; ++i) {
            q[i] += dt / 6.0 * (k1q[i] + 2 * k2q[i] + 2 * k3q[i] + k4q[i]);
            v[i] += dt / 6.0 * (k1v[i] + 2 * k2v[i] + 2 * k3v[i] + k4v[i]);
        }
    }
    /* fitted decay rate per constraint */
    for (int i = 0; i < m; ++i) {
        double A, B;
        double kf = fit_rate(steps + 1, ts, ph + i * (steps + 1), &A, &B);
        ck_assert_msg(fabs(kf - kk[i]) <= 0.03 * kk[i], "%s constraint %d: fitted rate %g, k = %g",
                      what, i, kf, kk[i]);
        ck_assert_msg(fabs(A - Phi0[i]) <= 0.03 * fabs(Phi0[i]), "%s: A = %g vs Phi0 = %g", what,
                      A, Phi0[i]);
        double Bx = Phid0[i] + kk[i] * Phi0[i];
        ck_assert_msg(fabs(B - Bx) <= 0.03 * (fabs(Phid0[i]) + kk[i] * fabs(Phi0[i])),
                      "%s: B = %g vs %g", what, B, Bx);
    }
    free(ts);
    free(ph);
    cdyn_constraint_free(ls.c);
}

/* Gains set after cdyn_constraint_load apply to the loaded instant, as a
 * new rank tolerance does (stop 46: they were silently ignored until the
 * next load, q'' = 0 with CDYN_OK). By hand, M = I (n = 2), Q = 0:
 *  - m = 1, Phi_q = [1 0], Phi = 0.1, Phi' = 0.2, xi = 0: q0'' = s =
 *    -K_D Phi' - K_P Phi = -4.5 for K_D = 10, K_P = 25 (set_gains), -0.8
 *    for Baumgarte a = 1, b = 2, -2.1 for critical k = 3, 0 for a = b = 0;
 *    the row in units r and the coordinate in units d (Phi_q = [r d 0],
 *    M = diag(d^2, 1), Phi, Phi', xi times r) give q0'' = s / d, for r, d
 *    in 1e-8..1e8; every exact formulation and the penalty form (1e-5),
 *    and the exported B's last entry (s);
 *  - m = 2, Phi_q = I, coupled K_D = [2 1; 1 2], K_P = [3 1; 1 3]: q'' = s
 *    = xi - K_D Phi' - K_P Phi by loops here. */
START_TEST(gains_set_after_the_load_apply_to_the_loaded_instant)
{
    const double units[3] = {1e-8, 1.0, 1e8};
    for (int u = 0; u < 9; ++u) {
        double r = units[u % 3], d = units[u / 3];
        double M[4] = {d * d, 0.0, 0.0, 1.0}, Q[2] = {0.0, 0.0}, P[2] = {r * d, 0.0};
        double Phi = 0.1 * r, Phid = 0.2 * r, xi = 0.0, q[2], l, A[25], B[5];
        cdyn_constraint *c = make(2, 1);
        ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 1, &Phi, &Phid, &xi), CDYN_OK);
        for (int g = 0; g < 4; ++g) {
            double KD = 10.0, KP = 25.0, k = 3.0, want;
            if (g == 0) {
                ck_assert_int_eq(cdyn_constraint_set_gains(c, &KD, 1, &KP, 1), CDYN_OK);
                want = -4.5;
            } else if (g == 1) {
                ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, 1.0, 2.0), CDYN_OK);
                want = -0.8;
            } else if (g == 2) {
                ck_assert_int_eq(cdyn_constraint_set_critical_gains(c, &k), CDYN_OK);
                want = -2.1;
            } else {
                ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, 0.0, 0.0), CDYN_OK);
                want = 0.0;
            }
            for (int form = 0; form < 4; ++form) {
                cdyn_status st = form == 0   ? cdyn_constraint_lagrange(c, q, &l)
                                 : form == 1 ? cdyn_constraint_reactions(c, P, 1, q, &l)
                                 : form == 2 ? cdyn_constraint_pseudoinverse(c, q, &l)
                                             : cdyn_constraint_penalty(c, q, &l);
                ck_assert_int_eq(st, CDYN_OK);
                double tol = form == 3 ? 1e-5 * (4.5 / d) : 1e-14 * (4.5 / d);
                ck_assert_msg(fabs(q[0] - want / d) <= tol && fabs(q[1]) <= tol,
                              "units r %g d %g, gains %d, form %d: q0'' = %.15g, want %.15g", r,
                              d, g, form, q[0], want / d);
            }
            double h[2] = {0.0, 0.0};
            ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, h, A, 5,
                                                    B),
                             CDYN_OK);
            ck_assert_double_le(fabs(B[4] - want * r), 1e-14 * 4.5 * r);
        }
        cdyn_constraint_free(c);
    }
    const double M[4] = {1.0, 0.0, 0.0, 1.0}, Q[2] = {0.0, 0.0}, P[4] = {1.0, 0.0, 0.0, 1.0};
    const double Phi[2] = {0.1, -0.2}, Phid[2] = {0.3, 0.05}, xi[2] = {1.0, 2.0};
    const double KD[4] = {2.0, 1.0, 1.0, 2.0}, KP[4] = {3.0, 1.0, 1.0, 3.0};
    double s[2], q[2], l[2];
    for (int i = 0; i < 2; ++i)
        s[i] = xi[i] - KD[i] * Phid[0] - KD[i + 2] * Phid[1] - KP[i] * Phi[0] - KP[i + 2] * Phi[1];
    cdyn_constraint *c = make(2, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, Phi, Phid, xi), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK); /* no gains yet: q'' = xi */
    ck_assert(fabs(q[0] - xi[0]) <= 1e-15 && fabs(q[1] - xi[1]) <= 1e-15);
    ck_assert_int_eq(cdyn_constraint_set_gains(c, KD, 2, KP, 2), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(2, q, s), 1e-15);
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(critical_gains_give_per_constraint_decay_rates)
{
    /* (a) two point masses, each on its own line: q = (x1, y1, x2, y2),
     *     Phi1 = y1 - 0.5 x1 - c1, Phi2 = x2 + y2 - c2, gravity -y, a side force */
    {
        const int n = 4, m = 2;
        const double M[16] = {1.5, 0, 0, 0, 0, 1.5, 0, 0, 0, 0, 0.8, 0, 0, 0, 0, 0.8};
        const double Q[4] = {0.3, -1.5 * G_ACC, -0.2, -0.8 * G_ACC};
        const double P[8] = {-0.5, 0, 1, 0, 0, 1, 0, 1};
        const double q0[4] = {0.2, 1.3, 0.5, 1.4};
        /* v0 with Phi'(0) = (0.3, 0.2): y1' - 0.5 x1' = 0.3, x2' + y2' = 0.2 */
        const double v0[4] = {0.4, 0.5, -0.1, 0.3};
        const double Phi0[2] = {0.1, -0.05}, Phid0[2] = {0.3, 0.2}, kk[2] = {2.0, 7.0};
        check_decay(n, m, M, Q, P, q0, v0, Phi0, Phid0, kk, "point masses");
    }
    /* (b) a coupled linear constraint set on a random mechanism */
    {
        const int n = 5, m = 2;
        tu_rng r;
        tu_rng_seed(&r, 900);
        double M[25], Q[5], P[10], q0[5], v0[5], Phid0[2];
        tu_random_spd(&r, n, M, n);
        tu_random(&r, n, 1, Q, n);
        tu_random(&r, m, n, P, m);
        tu_random(&r, n, 1, q0, n);
        tu_random(&r, n, 1, v0, n);
        for (int i = 0; i < n; ++i) v0[i] *= 0.3;
        tu_matvec(m, n, P, m, v0, Phid0);
        const double Phi0[2] = {-0.2, 0.15}, kk[2] = {3.0, 0.8};
        check_decay(n, m, M, Q, P, q0, v0, Phi0, Phid0, kk, "random linear");
    }
}
END_TEST

/* ======================================================================== */
/* 7. Export of A Y = B (T4.5)                                               */

START_TEST(exported_system_reproduces_the_kernel_solutions)
{
    enum { n = 5, m = 2, size = 2 * n + m, lda = size + 3 };
    const double a = 0.7, b = 1.9;
    sys_t p;
    sys_random(&p, n, m, 1, 1000);
    tu_rng r;
    tu_rng_seed(&r, 1001);
    double h[n], R[m * m], C[(m + 1) * n], s[m];
    tu_random(&r, n, 1, h, n);
    tu_random(&r, m, m, R, m);
    for (int i = 0; i < m; ++i) R[i + m * i] += 2.0;
    for (int i = 0; i < (m + 1) * n; ++i) C[i] = NAN;
    tu_matmul(m, m, n, R, m, p.P, p.ldp, C, m + 1);
    for (int i = 0; i < m; ++i) s[i] = p.xi[i] - 2 * a * p.Phid[i] - b * b * p.Phi[i];

    cdyn_constraint *c = make(n, m);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, a, b), CDYN_OK);
    ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
    double q[n], l[m], qf[n], f[m];
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_reactions(c, C, m + 1, qf, f), CDYN_OK);

    double *A = dbuf((size_t)lda * size), *B = dbuf(size);
    double Nan[(m + 1) * n];
    for (int i = 0; i < (m + 1) * n; ++i) Nan[i] = NAN;
    for (int variant = 0; variant < 2; ++variant) {
        const double *G = variant ? C : p.P;
        int ldg = variant ? m + 1 : p.ldp;
        dbuf_reset(A, (size_t)lda * size);
        dbuf_reset(B, size);
        cdyn_status st =
            variant ? cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, C, m + 1, h, A, lda, B)
                    /* C is ignored for the multipliers variant: NaN and ldc 0 */
                    : cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, Nan, 0, h, A, lda, B);
        ck_assert_int_eq(st, CDYN_OK);
        ck_assert(dbuf_guards_intact(A, (size_t)lda * size) && dbuf_guards_intact(B, size));
        /* block layout, entry by entry; padding rows never written */
        for (int j = 0; j < size; ++j) {
            for (int i = size; i < lda; ++i) ck_assert(A[i + lda * j] == SENTINEL);
            for (int i = 0; i < size; ++i) {
                double want;
                if (i < n && j < n) want = p.M[i + p.ldm * j];
                else if (i < n && j >= 2 * n) want = G[(j - 2 * n) + ldg * i];
                else if (i >= n && i < 2 * n && j >= n && j < 2 * n) want = (i == j) ? 1.0 : 0.0;
                else if (i >= 2 * n && j < n) want = p.P[(i - 2 * n) + p.ldp * j];
                else want = 0.0;
                ck_assert_msg(A[i + lda * j] == want, "variant %d A(%d,%d) = %g, want %g",
                              variant, i, j, A[i + lda * j], want);
            }
        }
        for (int i = 0; i < n; ++i) ck_assert(B[i] == p.Q[i] && B[n + i] == h[i]);
        for (int i = 0; i < m; ++i)
            ck_assert_double_le(fabs(B[2 * n + i] - s[i]), 1e-14 * (1.0 + fabs(s[i])) * 10);
        /* the caller's own solve */
        double Y[size];
        ck_assert_int_eq(dense_solve(size, A, lda, B, Y), 0);
        ck_assert_double_le(reldiff(n, Y, variant ? qf : q), 1e-10);
        ck_assert_double_le(reldiff(n, Y + n, h), 1e-14);
        ck_assert_double_le(reldiff(m, Y + 2 * n, variant ? f : l), 1e-10);
    }
    dbuf_free(A);
    dbuf_free(B);
    cdyn_constraint_free(c);
    sys_free(&p);
}
END_TEST

/* ======================================================================== */
/* 8. Constraint force                                                       */

START_TEST(force_returns_the_last_successful_formulations_force)
{
    enum { n = 6, m = 2 };
    sys_t p;
    sys_random(&p, n, m, 0, 1100);
    tu_rng r;
    tu_rng_seed(&r, 1101);
    double R[m * m], C[m * n];
    tu_random(&r, m, m, R, m);
    for (int i = 0; i < m; ++i) R[i + m * i] += 2.0;
    tu_matmul(m, m, n, R, m, p.P, m, C, m);
    cdyn_constraint *c = make(n, m);
    double *gf = dbuf(n), *mu = dbuf(m);

    /* nothing loaded yet */
    ck_assert_int_eq(cdyn_constraint_force(c, gf, mu), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(gf, n) && dbuf_untouched(mu, m));
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, 1.0, 3.0), CDYN_OK);
    ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
    /* loaded, but no formulation yet; an export is not a formulation */
    ck_assert_int_eq(cdyn_constraint_force(c, gf, mu), CDYN_ERR_ARG);
    double A[(2 * n + m) * (2 * n + m)], B[2 * n + m], h[n] = {0};
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, h, A, 2 * n + m,
                                            B),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_force(c, gf, mu), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(gf, n) && dbuf_untouched(mu, m));

    double q[n], l[m], want[n];
    for (int form = 0; form < 4; ++form) {
        const double *G = form == 1 ? C : p.P;
        cdyn_status st = form == 0   ? cdyn_constraint_lagrange(c, q, l)
                         : form == 1 ? cdyn_constraint_reactions(c, C, m, q, l)
                         : form == 2 ? cdyn_constraint_pseudoinverse(c, q, l)
                                     : cdyn_constraint_penalty(c, q, l);
        ck_assert_int_eq(st, CDYN_OK);
        dbuf_reset(gf, n);
        dbuf_reset(mu, m);
        ck_assert_int_eq(cdyn_constraint_force(c, gf, mu), CDYN_OK);
        ck_assert(dbuf_guards_intact(gf, n) && dbuf_guards_intact(mu, m));
        for (int i = 0; i < m; ++i) ck_assert_double_eq(mu[i], l[i]);
        tu_matvec_t(m, n, G, m, l, want); /* G^T mult */
        ck_assert_msg(reldiff(n, gf, want) <= 1e-14, "form %d: %g", form, reldiff(n, gf, want));
        /* and it is the force that balances the equations of motion (the
         * default penalty's lambda is alpha ~ 2^20 times a difference
         * that cancels to 1/alpha: the balance holds to about alpha eps) */
        ck_assert_double_le(eom_residual(n, m, p.M, n, G, m, q, mu, p.Q),
                            form == 3 ? 1e-7 : 1e-12);
        /* either output may be NULL */
        ck_assert_int_eq(cdyn_constraint_force(c, NULL, NULL), CDYN_OK);
        dbuf_reset(mu, m);
        ck_assert_int_eq(cdyn_constraint_force(c, NULL, mu), CDYN_OK);
        ck_assert(dbuf_guards_intact(mu, m) && mu[0] == l[0]);
    }
    /* a failed formulation keeps the last success (the penalty's) */
    double lpen[m];
    memcpy(lpen, l, sizeof lpen);
    double Cbad[m * n];
    memcpy(Cbad, C, sizeof Cbad);
    for (int j = 0; j < n; ++j) Cbad[1 + m * j] = 0.0; /* Phi_q M^-1 C^T singular */
    ck_assert_int_eq(cdyn_constraint_reactions(c, Cbad, m, q, l), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(cdyn_constraint_force(c, NULL, mu), CDYN_OK);
    ck_assert(mu[0] == lpen[0] && mu[1] == lpen[1]);
    /* a new load forgets it */
    ck_assert_int_eq(sys_load(c, &p), CDYN_OK);
    dbuf_reset(gf, n);
    ck_assert_int_eq(cdyn_constraint_force(c, gf, NULL), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(gf, n));
    dbuf_free(gf);
    dbuf_free(mu);
    cdyn_constraint_free(c);
    sys_free(&p);
}
END_TEST

/* ======================================================================== */
/* 9. Rank loss in lagrange                                                  */

/* Lagrange on (M, P) must refuse with the facts of P recorded; the named rows
 * are valid and ascending, and dropping them leaves an independent set (the
 * KKT of the rest succeeds); reactions with C = Phi_q refuses as well; the
 * pseudo-inverse and penalty forms give finite answers. */
static void check_rank_loss(int n, int m, const double *M, const double *P, int want_rank,
                            int want_row, const char *what)
{
    tu_rng r;
    tu_rng_seed(&r, 1200);
    double Q[16], xi[16];
    ck_assert(n <= 16 && m <= 16);
    tu_random(&r, n, 1, Q, n);
    tu_random(&r, m, 1, xi, m);
    cdyn_constraint *c = make(n, m);
    ck_assert_int_eq(cdyn_constraint_load(c, M, n, Q, P, m, NULL, NULL, xi), CDYN_OK);
    double *q = dbuf((size_t)n), *l = dbuf((size_t)m);
    int *rows = ibuf((size_t)m);

    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert_msg(dbuf_untouched(q, (size_t)n) && dbuf_untouched(l, (size_t)m), "%s", what);
    ck_assert_msg(cdyn_constraint_rank(c) == want_rank, "%s: rank %d", what,
                  cdyn_constraint_rank(c));
    int cnt = cdyn_constraint_redundant_rows(c, rows);
    ck_assert_int_eq(cnt, m - want_rank);
    ck_assert(ibuf_guards_intact(rows, (size_t)cnt));
    for (int i = 0; i < cnt; ++i) {
        ck_assert(rows[i] >= 0 && rows[i] < m);
        if (i > 0) ck_assert_int_gt(rows[i], rows[i - 1]);
    }
    if (want_row >= 0) ck_assert_int_eq(rows[0], want_row);
    double sv = cdyn_constraint_smallest_singular_value(c);
    ck_assert_msg(sv >= 0.0 && sv <= 1e-12 * tu_max_abs(m, n, P, m), "%s: sigma_min %g", what,
                  sv);
    ck_assert_str_ne(cdyn_constraint_last_error(c), "");

    /* the rest is independent: KKT on the rows not named succeeds */
    if (want_rank > 0) {
        int mr = m - cnt;
        double *Pr = malloc(sizeof(double) * (size_t)mr * n), qr[16], lr[16];
        for (int j = 0; j < n; ++j)
            for (int i = 0, ii = 0, k = 0; i < m; ++i) {
                if (k < cnt && rows[k] == i) {
                    ++k;
                    continue;
                }
                Pr[ii++ + (size_t)mr * j] = P[i + (size_t)m * j];
            }
        cdyn_constraint *cr = make(n, mr);
        ck_assert_int_eq(cdyn_constraint_load(cr, M, n, Q, Pr, mr, NULL, NULL, xi), CDYN_OK);
        ck_assert_msg(cdyn_constraint_lagrange(cr, qr, lr) == CDYN_OK, "%s: rest not independent",
                      what);
        cdyn_constraint_free(cr);
        free(Pr);
    }

    ck_assert_int_eq(cdyn_constraint_reactions(c, P, m, q, l), CDYN_ERR_SINGULAR);
    ck_assert(dbuf_untouched(q, (size_t)n) && dbuf_untouched(l, (size_t)m));
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert(all_finite(n, q) && all_finite(m, l));
    ck_assert(dbuf_guards_intact(q, (size_t)n) && dbuf_guards_intact(l, (size_t)m));
    ck_assert_int_eq(cdyn_constraint_rank(c), want_rank);
    dbuf_reset(q, (size_t)n);
    dbuf_reset(l, (size_t)m);
    ck_assert_msg(cdyn_constraint_penalty(c, q, l) == CDYN_OK, "%s: %s", what,
                  cdyn_constraint_last_error(c));
    ck_assert(all_finite(n, q) && all_finite(m, l));
    dbuf_free(q);
    dbuf_free(l);
    ibuf_free(rows);
    cdyn_constraint_free(c);
}

START_TEST(rank_loss_in_lagrange_is_reported_never_nan)
{
    tu_rng r;
    tu_rng_seed(&r, 1300);
    double M[25], P[15];
    tu_random_spd(&r, 5, M, 5);
    /* zero row 1 */
    tu_random(&r, 3, 5, P, 3);
    for (int j = 0; j < 5; ++j) P[1 + 3 * j] = 0.0;
    check_rank_loss(5, 3, M, P, 2, 1, "zero row");
    /* row 2 = row 0 + 2 row 1 */
    tu_random(&r, 3, 5, P, 3);
    for (int j = 0; j < 5; ++j) P[2 + 3 * j] = P[0 + 3 * j] + 2.0 * P[1 + 3 * j];
    check_rank_loss(5, 3, M, P, 2, -1, "dependent rows");
    /* two rows dependent on the first (rank 1) */
    tu_random(&r, 3, 5, P, 3);
    for (int j = 0; j < 5; ++j) {
        P[1 + 3 * j] = -0.5 * P[0 + 3 * j];
        P[2 + 3 * j] = 3.0 * P[0 + 3 * j];
    }
    check_rank_loss(5, 3, M, P, 1, -1, "rank one");
    /* dependence below the rank tolerance (1e-13 relative) */
    tu_random(&r, 3, 5, P, 3);
    for (int j = 0; j < 5; ++j) P[2 + 3 * j] = P[0 + 3 * j] - P[1 + 3 * j] + 1e-13 * tu_uniform(&r);
    check_rank_loss(5, 3, M, P, 2, -1, "nearly dependent");
    /* more constraints than coordinates: m = 3 > n = 2 (m - n zero singular
     * values in the row space) */
    double M2[4] = {2.0, 0.3, 0.3, 1.0}, P3[6];
    tu_random(&r, 3, 2, P3, 3);
    check_rank_loss(2, 3, M2, P3, 2, -1, "m > n");
    /* all-zero Jacobian: rank 0 */
    double Z[6] = {0};
    check_rank_loss(2, 3, M2, Z, 0, -1, "zero Jacobian");
}
END_TEST

/* The exact forms no longer need M positive definite by itself
 * (constraint.h): a singular (semidefinite) M is solved through
 * M + Phi_q^T D Phi_q when M is positive definite on the null space of
 * Phi_q (the KKT system is then regular); they refuse (CDYN_ERR_SINGULAR,
 * outputs untouched) when the KKT system is singular, and an indefinite M
 * is still "not SPD" (header of cdyn_constraint_lagrange).
 * Regular, by hand: M = diag(2, 0, 3), Q = (1, 2, 3), Phi_q = (1, 1, 1),
 * xi = 0.5 (on the null space u0 + u1 + u2 = 0, 2 u0^2 + 3 u2^2 > 0):
 *   2 q0 + l = 1, 0 q1 + l = 2, 3 q2 + l = 3: l = 2, q0 = -1/2, q2 = 1/3,
 *   q1 = 1/2 - q0 - q2 = 2/3.
 * Refused: M = diag(2, -1, 3) (indefinite) with Phi_q = (1, 1, 1);
 *   M = diag(2, 0, 3) with Phi_q = (1, 0, 1) (q1 has no mass and no
 *   constraint: KKT singular); M = diag(1, -1, 3) with Phi_q = (1, 1, 0)
 *   (u = (1, -1, 0): Phi_q u = 0, M u = Phi_q^T, so [u; -1] is a null
 *   vector of the KKT matrix). */
START_TEST(mass_matrix_that_is_not_positive_definite_is_refused)
{
    enum { n = 3, m = 1 };
    const double Mind[9] = {2, 0, 0, 0, -1, 0, 0, 0, 3}; /* indefinite */
    const double Msing[9] = {2, 0, 0, 0, 0, 0, 0, 0, 3}; /* semidefinite, singular */
    const double Mind2[9] = {1, 0, 0, 0, -1, 0, 0, 0, 3};
    const double Q[3] = {1, 2, 3}, P[3] = {1, 1, 1}, xi[1] = {0.5};
    const double P02[3] = {1, 0, 1}, P01[3] = {1, 1, 0};
    const double want_q[3] = {-0.5, 2.0 / 3.0, 1.0 / 3.0}, want_l = 2.0;
    cdyn_constraint *c = make(n, m);
    double *q = dbuf(n), *l = dbuf(m);
    ck_assert_int_eq(cdyn_constraint_load(c, Msing, n, Q, P, m, NULL, NULL, xi), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_int_ne(c->path, CDYN__PATH_DECIDED); /* M singular: the general path */
    for (int i = 0; i < n; ++i) ck_assert_double_eq_tol(q[i], want_q[i], 1e-13);
    ck_assert_double_eq_tol(l[0], want_l, 1e-13);
    dbuf_reset(q, n);
    dbuf_reset(l, m);
    ck_assert_int_eq(cdyn_constraint_reactions(c, P, m, q, l), CDYN_OK);
    for (int i = 0; i < n; ++i) ck_assert_double_eq_tol(q[i], want_q[i], 1e-13);
    ck_assert_double_eq_tol(l[0], want_l, 1e-13);
    dbuf_reset(q, n);
    dbuf_reset(l, m);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    for (int i = 0; i < n; ++i) ck_assert_double_eq_tol(q[i], want_q[i], 1e-13);
    ck_assert_double_eq_tol(l[0], want_l, 1e-13);
    dbuf_reset(q, n);
    dbuf_reset(l, m);
    const double *Mz[3] = {Mind, Msing, Mind2}, *Pz[3] = {P, P02, P01};
    for (int k = 0; k < 3; ++k) {
        ck_assert_int_eq(cdyn_constraint_load(c, Mz[k], n, Q, Pz[k], m, NULL, NULL, xi), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
        ck_assert(dbuf_untouched(q, n) && dbuf_untouched(l, m));
        ck_assert_int_eq(cdyn_constraint_reactions(c, Pz[k], m, q, l), CDYN_ERR_SINGULAR);
        ck_assert(dbuf_untouched(q, n) && dbuf_untouched(l, m));
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_ERR_SINGULAR);
        ck_assert(dbuf_untouched(q, n) && dbuf_untouched(l, m));
        ck_assert_str_ne(cdyn_constraint_last_error(c), "");
        ck_assert_int_eq(cdyn_constraint_force(c, NULL, NULL), CDYN_ERR_ARG);
    }
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(rank_tolerance_decides_nearly_dependent_rows)
{
    /* Rows (1, 1, 0) and (1, 1 + e, 0), e = 2^-27 (7.5e-9, exact): nearly
     * dependent in any scaling (rows (1, 0, 0), (1, 1e-8, 0) would not be:
     * equilibration scales the tiny column up, a change of units). Both rows
     * have their largest entry in [1, 2): the equilibrated Phi_q is Phi_q / 2
     * (columns unchanged). Pivoted QR of its transpose: row 1 first (norm^2
     * 1/2 + e/2 > 1/2), |R22|/|R11| = (e/4) / (1/4 + (1 + e)^2/4) ~ e/2 =
     * 3.7e-9: full rank at the default 1e-10, rank loss at 1e-6 with row 0
     * redundant. M = I, Q = (0, 0, 1), xi = (0.5, 0.5). */
    const double e = ldexp(1.0, -27);
    const double M[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, Q[3] = {0, 0, 1}, xi[2] = {0.5, 0.5};
    const double P[6] = {1, 1, 1, 1 + e, 0, 0};
    cdyn_constraint *c = make(3, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 3, Q, P, 2, NULL, NULL, xi), CDYN_OK);
    double q[3], l[2];
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK); /* default 1e-10 */
    /* q0'' + q1'' = 0.5 and e q1'' = 0: q0'' = 0.5, q1'' = 0 (condition
     * ~ 4/e = 5e8, so ~1e-7 accuracy); q2'' = Q2 = 1 */
    ck_assert_double_eq_tol(q[0], 0.5, 1e-7);
    ck_assert_double_eq_tol(q[1], 0.0, 1e-7);
    ck_assert_double_eq_tol(q[2], 1.0, 1e-12);
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(c, 1e-6), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_SINGULAR);
    ck_assert_int_eq(cdyn_constraint_rank(c), 1);
    int row = -1;
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, &row), 1);
    ck_assert_int_eq(row, 0);
    /* the pseudo-inverse drops the tiny direction: both rows then ask for
     * q0'' + q1'' = 0.5 (to O(e)); with M = I the smallest correction of
     * Q's (0, 0) is q'' = (1/4, 1/4, 1), and Phi_q^T lambda = Q - q'' =
     * -(1/4, 1/4, 0) needs lambda0 + lambda1 = -1/4. Both rows have the same
     * row factor, so the minimum norm is the Euclidean one: an even split,
     * lambda = (-1/8, -1/8). */
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert_double_eq_tol(q[0], 0.25, 1e-7);
    ck_assert_double_eq_tol(q[1], 0.25, 1e-7);
    ck_assert_double_eq_tol(q[2], 1.0, 1e-12);
    ck_assert_double_eq_tol(l[0], -0.125, 1e-7);
    ck_assert_double_eq_tol(l[1], -0.125, 1e-7);
    ck_assert_int_eq(cdyn_constraint_rank(c), 1);
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(rank_loss_facts_agree_with_the_status_near_a_singular_pose)
{
    /* Phi_q = [1 0; 1 1e-9] is full rank at the default tolerance (singular
     * values ~1.41 and ~7e-10, ratio 5e-10 > 1e-10); with M = diag(1, 1e4)
     * (a mass and an inertia in different units) the whitened Y = L^-1 Phi_q^T
     * has ratio ~7e-12. Whatever lagrange decides, the status and the recorded
     * facts must tell the same story: CDYN_OK, or CDYN_ERR_SINGULAR with a
     * rank below m and a named dependent row (header: "CDYN_ERR_SINGULAR when
     * M is not SPD or Phi_q is rank deficient (facts recorded)"). */
    const double M[4] = {1, 0, 0, 1e4}, Q[2] = {1, 2}, P[4] = {1, 1, 0, 1e-9};
    const double xi[2] = {0.5, 0.5};
    cdyn_constraint *c = make(2, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, xi), CDYN_OK);
    double q[2] = {SENTINEL, SENTINEL}, l[2] = {SENTINEL, SENTINEL};
    cdyn_status st = cdyn_constraint_lagrange(c, q, l);
    int rows[2] = {ISENTINEL, ISENTINEL};
    int cnt = cdyn_constraint_redundant_rows(c, rows);
    ck_assert_msg(st == CDYN_OK || (st == CDYN_ERR_SINGULAR && cdyn_constraint_rank(c) < 2 &&
                                    cnt >= 1 && rows[0] >= 0 && rows[0] < 2),
                  "status %d with rank %d, %d redundant rows (first %d), sigma_min %g: \"%s\"",
                  (int)st, cdyn_constraint_rank(c), cnt, rows[0],
                  cdyn_constraint_smallest_singular_value(c), cdyn_constraint_last_error(c));
    cdyn_constraint_free(c);
}
END_TEST

START_TEST(reactions_with_c_equal_to_phi_q_accept_what_lagrange_accepts)
{
    /* With C = Phi_q the reactions form is the KKT form (f = lambda, same
     * Schur complement Phi_q M^-1 Phi_q^T). Near a singular pose, Phi_q =
     * [1 0; 1 1e-5], M = I: singular values ~1.41 and ~7.1e-6, ratio 5e-6,
     * far above the rank tolerance 1e-10, so Phi_q has full rank; the Schur
     * complement has condition ~4e10 < 1/eps. Exact answer (by hand):
     * q0'' = xi0 = 0.5, q0'' + 1e-5 q1'' = xi1 = 0.5 + 3e-6 -> q1'' = 0.3;
     * lambda from M q'' + Phi_q^T lambda = Q = (1, 2): lambda1 = (2 - 0.3)/1e-5
     * = 1.7e5, lambda0 = 1 - 0.5 - lambda1. */
    const double eps = 1e-5;
    const double M[4] = {1, 0, 0, 1}, Q[2] = {1, 2}, P[4] = {1, 1, 0, eps};
    const double xi[2] = {0.5, 0.5 + 0.3 * eps};
    const double qx[2] = {0.5, 0.3}, l1 = (2.0 - 0.3) / eps, lx[2] = {0.5 - l1, l1};
    cdyn_constraint *c = make(2, 2);
    ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, xi), CDYN_OK);
    double q[2], l[2];
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(2, q, qx), 1e-9);
    ck_assert_double_le(reldiff(2, l, lx), 1e-5); /* condition 4e10 times eps */
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_OK);
    ck_assert_double_le(reldiff(2, q, qx), 1e-9);
    cdyn_status st = cdyn_constraint_reactions(c, P, 2, q, l);
    ck_assert_msg(st == CDYN_OK, "reactions(C = Phi_q) returned %d (rank of Phi_q %d): \"%s\"",
                  (int)st, cdyn_constraint_rank(c), cdyn_constraint_last_error(c));
    ck_assert_double_le(reldiff(2, q, qx), 1e-9);
    ck_assert_double_le(reldiff(2, l, lx), 1e-5);
    cdyn_constraint_free(c);
}
END_TEST

/* Componentwise backward error of (q'', lambda) on [M Phi^T; Phi 0] =
 * [Q; s] (n, m <= 2, ld 2), in long double: max over the rows of
 * |residual| / (sum of |terms|). */
/* Stop 46 (third adversarial review): n = m = 2, M = I, Q = (1, 1), s = 0
 * and a Phi_q of moderate entries (1e-18..4e6) whose rank decision is
 * clear (ratio 6e-8) but whose KKT system, with M = I tying the two
 * coordinates' units, has a Skeel condition of 2e44: in the equilibrated
 * frame X = Phi~ L^-T is singular to rounding. lagrange and pseudoinverse
 * returned CDYN_ERR_NONFINITE "q'' overflowed (inputs too large)" and
 * reactions with C = Phi_q "C does not act on the constrained motions".
 * Asserts in the reviewer's units: CDYN_ERR_SINGULAR from all three, with
 * "singular to working accuracy" and no "does not act"; in units rescaled
 * by 1e-8..1e8 (rows of Phi_q, each coordinate): never NONFINITE, and a
 * refusal says the same. (Some rescalings return CDYN_OK: whether those
 * results are right is the certificate's matter, not this test's.)
 * Genuine overflow stays CDYN_ERR_NONFINITE: M = diag(1e-300, 1), Q =
 * (1e300, 0), Phi_q = [0 1] gives q0'' = 1e600; M = 1, Phi_q = 1e-300, Q =
 * 1e10 gives lambda = 1e310. */
START_TEST(constrained_system_singular_to_rounding_is_refused_as_singular)
{
    const double P0[4] = {-4.1909155179808423e-07, 2.2764325722548738e-18, 4420416.1066239197,
                          -2.401092840069575e-05};
    const double units[3] = {1e-8, 1.0, 1e8};
    static const char *const names[3] = {"lagrange", "pseudoinverse", "reactions(C = Phi_q)"};
    for (int u = 0; u < 82; ++u) { /* u = 0: the reviewer's units; then 81 rescalings */
        int v = u - 1;
        double r[2] = {u ? units[v % 3] : 1.0, u ? units[v / 3 % 3] : 1.0};
        double d[2] = {u ? units[v / 9 % 3] : 1.0, u ? units[v / 27 % 3] : 1.0};
        double M[4] = {d[0] * d[0], 0.0, 0.0, d[1] * d[1]}, Q[2] = {d[0], d[1]};
        double P[4], s[2] = {0.0, 0.0};
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < 2; ++i) P[i + 2 * j] = r[i] * P0[i + 2 * j] * d[j];
        cdyn_constraint *c = make(2, 2);
        ck_assert_int_eq(cdyn_constraint_load(c, M, 2, Q, P, 2, NULL, NULL, s), CDYN_OK);
        for (int form = 0; form < 3; ++form) {
            double q[2] = {0.0, 0.0}, l[2] = {0.0, 0.0};
            cdyn_status st = form == 0   ? cdyn_constraint_lagrange(c, q, l)
                             : form == 1 ? cdyn_constraint_pseudoinverse(c, q, l)
                                         : cdyn_constraint_reactions(c, P, 2, q, l);
            const char *msg = cdyn_constraint_last_error(c);
            ck_assert_msg(st == CDYN_OK || st == CDYN_ERR_SINGULAR,
                          "rows x (%g, %g), coordinates x (%g, %g), %s: status %d \"%s\"",
                          r[0], r[1], d[0], d[1], names[form], (int)st, msg);
            if (u == 0) ck_assert_int_eq(st, CDYN_ERR_SINGULAR);
            if (st == CDYN_ERR_SINGULAR)
                ck_assert_msg(strstr(msg, "singular to working accuracy") &&
                                  !strstr(msg, "does not act"),
                              "%s: \"%s\"", names[form], msg);
        }
        cdyn_constraint_free(c);
    }
    /* genuine overflow (q0'' = 1e600 by hand), n = 2 and n = 8 */
    for (int n = 2; n <= 8; n += 6) {
        double M[64] = {0.0}, Q[8] = {0.0}, P[8] = {0.0}, xi = 0.0, q[8], l;
        for (int i = 0; i < n; ++i) M[i + i * n] = 1.0;
        M[0] = 1e-300;
        Q[0] = 1e300;
        P[1] = 1.0;
        cdyn_constraint *c = make(n, 1);
        ck_assert_int_eq(cdyn_constraint_load(c, M, n, Q, P, 1, NULL, NULL, &xi), CDYN_OK);
        ck_assert_int_eq(cdyn_constraint_lagrange(c, q, &l), CDYN_ERR_NONFINITE);
        ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, &l), CDYN_ERR_NONFINITE);
        ck_assert_int_eq(cdyn_constraint_reactions(c, P, 1, q, &l), CDYN_ERR_NONFINITE);
        ck_assert_ptr_nonnull(strstr(cdyn_constraint_last_error(c), "overflowed"));
        cdyn_constraint_free(c);
    }
    const double M1 = 1.0, Q1 = 1e10, P1 = 1e-300, xi1 = 0.0;
    double q1, l1;
    cdyn_constraint *c = make(1, 1);
    ck_assert_int_eq(cdyn_constraint_load(c, &M1, 1, &Q1, &P1, 1, NULL, NULL, &xi1), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, &q1, &l1), CDYN_ERR_NONFINITE);
    ck_assert_int_eq(cdyn_constraint_reactions(c, &P1, 1, &q1, &l1), CDYN_ERR_NONFINITE);
    cdyn_constraint_free(c);
}
END_TEST

/* ======================================================================== */
/* 10. Bad input                                                             */

/* A reference instant with known settings: Baumgarte (A0, B0), penalty
 * ALPHA0; results from the bordered solves. */
enum { BN = 4, BM = 2 };
static const double A0 = 1.0, B0 = 2.0;
static const double ALPHA0[BM] = {5.0, 20.0};

typedef struct {
    sys_t p;
    double s[BM], qk[BN], lk[BM], qp[BN], lp[BM];
} bad_ref;

static void bad_ref_init(bad_ref *b)
{
    sys_random(&b->p, BN, BM, 1, 1400);
    for (int i = 0; i < BM; ++i)
        b->s[i] = b->p.xi[i] - 2 * A0 * b->p.Phid[i] - B0 * B0 * b->p.Phi[i];
    double inva[BM];
    for (int i = 0; i < BM; ++i) inva[i] = 1.0 / ALPHA0[i];
    ck_assert_int_eq(bordered_solve(BN, BM, b->p.M, b->p.ldm, b->p.P, b->p.ldp, b->p.Q, b->s, NULL,
                                    b->qk, b->lk),
                     0);
    ck_assert_int_eq(bordered_solve(BN, BM, b->p.M, b->p.ldm, b->p.P, b->p.ldp, b->p.Q, b->s, inva,
                                    b->qp, b->lp),
                     0);
}

static cdyn_constraint *bad_ref_object(const bad_ref *b)
{
    cdyn_constraint *c = make(BN, BM);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, A0, B0), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, ALPHA0), CDYN_OK);
    ck_assert_int_eq(sys_load(c, &b->p), CDYN_OK);
    return c;
}

/* The object still answers for the reference instant with the reference
 * settings (no reload: the loaded instant must have survived). */
static void still_correct(cdyn_constraint *c, const bad_ref *b, const char *after)
{
    double q[BN], l[BM];
    ck_assert_msg(cdyn_constraint_lagrange(c, q, l) == CDYN_OK, "after %s: lagrange fails", after);
    ck_assert_msg(reldiff(BN, q, b->qk) <= 1e-10 && reldiff(BM, l, b->lk) <= 1e-10,
                  "after %s: lagrange differs (%g)", after, reldiff(BN, q, b->qk));
    ck_assert_msg(cdyn_constraint_penalty(c, q, l) == CDYN_OK, "after %s: penalty fails", after);
    ck_assert_msg(reldiff(BN, q, b->qp) <= 1e-10 && reldiff(BM, l, b->lp) <= 1e-10,
                  "after %s: penalty differs (%g)", after, reldiff(BN, q, b->qp));
}


/* A failed formulation keeps the last success's constraint force (found
 * by a random search once fuzz_constraint checked that CDYN_OK means a
 * finite output): after a Lagrange success, a penalty form whose force
 * Phi_q^T lambda overflows (alpha_c = 3.7e-209 with these magnitudes) is
 * refused, and cdyn_constraint_force() still reports
 * the Lagrange force, where it used to report Inf with CDYN_OK. */
START_TEST(failed_formulation_keeps_the_last_force)
{
    cdyn_constraint *c = cdyn_constraint_create(1, 1, NULL);
    const double M = 5.1649623141247634e-139, Q = 5.7724068439660875e+149;
    const double J = -4.9603082807845201e+22, Phi = -4.1073102894795871e-80;
    const double Pd = -1.3569069775231129e-184, xi = -1.1660770816041462e+251;
    const double alpha = 3.7491827509972069e-209;
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, &alpha), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_load(c, &M, 1, &Q, &J, 1, &Phi, &Pd, &xi), CDYN_OK);
    double qdd, lam, f0, l0, f = 0.0, l = 0.0;
    ck_assert_int_eq(cdyn_constraint_lagrange(c, &qdd, &lam), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_force(c, &f0, &l0), CDYN_OK);
    ck_assert(isfinite(f0) && isfinite(l0));
    ck_assert_int_eq(cdyn_constraint_penalty(c, &qdd, &lam), CDYN_ERR_NONFINITE);
    ck_assert_int_eq(cdyn_constraint_force(c, &f, &l), CDYN_OK);
    ck_assert(f == f0 && l == l0);
    cdyn_constraint_free(c);
}
END_TEST

/* Settings survive: reload (s depends on the gains) and compare. */
static void settings_kept(cdyn_constraint *c, const bad_ref *b, const char *after)
{
    ck_assert_int_eq(sys_load(c, &b->p), CDYN_OK);
    still_correct(c, b, after);
}

START_TEST(create_rejects_bad_sizes)
{
    const int bad[][2] = {{0, 0}, {0, 1}, {-1, 0}, {3, -1}, {-2, -2}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        cdyn_status st = CDYN_OK;
        ck_assert_ptr_null(cdyn_constraint_create(bad[k][0], bad[k][1], &st));
        ck_assert_int_eq(st, CDYN_ERR_ARG);
        ck_assert_ptr_null(cdyn_constraint_create(bad[k][0], bad[k][1], NULL));
    }
    /* the smallest valid sizes, and m > n (allowed: redundant sets) */
    cdyn_constraint *c = cdyn_constraint_create(1, 0, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(cdyn_constraint_rank(c), -1);
    ck_assert(isnan(cdyn_constraint_smallest_singular_value(c)));
    ck_assert_int_eq(cdyn_constraint_redundant_rows(c, NULL), 0);
    ck_assert_str_eq(cdyn_constraint_last_error(c), "");
    cdyn_constraint_free(c);
    c = make(2, 5);
    cdyn_constraint_free(c);
    cdyn_constraint_free(NULL);
}
END_TEST

START_TEST(null_object_is_rejected_everywhere)
{
    bad_ref b;
    bad_ref_init(&b);
    double k[BM] = {1, 2}, KD[BM * BM] = {1, 0, 0, 1}, A[100], B[10], h[BN] = {0};
    double *q = dbuf(BN), *l = dbuf(BM);
    int *rows = ibuf(BM);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(NULL, 1, 1), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_gains(NULL, KD, BM, KD, BM), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_critical_gains(NULL, k), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_penalty(NULL, k), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(NULL, 1e-8), CDYN_ERR_ARG);
    ck_assert_int_eq(sys_load(NULL, &b.p), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_lagrange(NULL, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_reactions(NULL, b.p.P, b.p.ldp, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(NULL, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_penalty(NULL, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_force(NULL, q, l), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(q, BN) && dbuf_untouched(l, BM));
    ck_assert_int_eq(cdyn_constraint_export(NULL, CDYN_EXPORT_MULTIPLIERS, NULL, 1, h, A, 10, B),
                     CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_rank(NULL), -1);
    ck_assert(isnan(cdyn_constraint_smallest_singular_value(NULL)));
    ck_assert_int_eq(cdyn_constraint_redundant_rows(NULL, rows), -1);
    ck_assert(ibuf_untouched(rows, BM));
    ck_assert_ptr_nonnull(cdyn_constraint_last_error(NULL));
    cdyn_constraint_free(NULL);
    dbuf_free(q);
    dbuf_free(l);
    ibuf_free(rows);
    sys_free(&b.p);
}
END_TEST

START_TEST(setters_reject_out_of_range_values_and_keep_settings)
{
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = bad_ref_object(&b);
    settings_kept(c, &b, "setup");

    /* Baumgarte: a, b >= 0 and finite */
    const double badab[][2] = {{-1, 1},       {1, -0.5}, {NAN, 1},
                               {1, NAN},      {INFINITY, 1}, {1, INFINITY}};
    for (size_t k = 0; k < sizeof badab / sizeof badab[0]; ++k) {
        ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, badab[k][0], badab[k][1]), CDYN_ERR_ARG);
        ck_assert_str_ne(cdyn_constraint_last_error(c), "");
        settings_kept(c, &b, "set_baumgarte");
    }

    /* generalized gains: SPD, finite, ld >= m, non-NULL */
    double spd[BM * BM] = {2, 0.5, 0.5, 1}, indef[BM * BM] = {1, 2, 2, 1};
    double sing[BM * BM] = {1, 1, 1, 1}, negd[BM * BM] = {-1, 0, 0, -2};
    double nanm[BM * BM] = {1, NAN, 0, 1}, infm[BM * BM] = {INFINITY, 0, 0, 1};
    ck_assert_int_eq(cdyn_constraint_set_gains(c, indef, BM, spd, BM), CDYN_ERR_SINGULAR);
    settings_kept(c, &b, "set_gains(indefinite K_D)");
    ck_assert_int_eq(cdyn_constraint_set_gains(c, spd, BM, sing, BM), CDYN_ERR_SINGULAR);
    settings_kept(c, &b, "set_gains(singular K_P)");
    ck_assert_int_eq(cdyn_constraint_set_gains(c, negd, BM, spd, BM), CDYN_ERR_SINGULAR);
    settings_kept(c, &b, "set_gains(negative definite K_D)");
    ck_assert_int_eq(cdyn_constraint_set_gains(c, nanm, BM, spd, BM), CDYN_ERR_NONFINITE);
    settings_kept(c, &b, "set_gains(NaN)");
    ck_assert_int_eq(cdyn_constraint_set_gains(c, spd, BM, infm, BM), CDYN_ERR_NONFINITE);
    settings_kept(c, &b, "set_gains(Inf)");
    ck_assert_int_eq(cdyn_constraint_set_gains(c, NULL, BM, spd, BM), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_gains(c, spd, BM, NULL, BM), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_gains(c, spd, BM - 1, spd, BM), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_set_gains(c, spd, BM, spd, BM - 1), CDYN_ERR_ARG);
    settings_kept(c, &b, "set_gains(NULL / ld)");

    /* critical gains: k > 0 (and finite: an infinite gain makes s Inf/NaN) */
    const double badk[][BM] = {{2, 0}, {-1, 2}, {NAN, 1}, {1, INFINITY}};
    for (size_t k = 0; k < sizeof badk / sizeof badk[0]; ++k) {
        cdyn_status st = cdyn_constraint_set_critical_gains(c, badk[k]);
        ck_assert_msg(st == CDYN_ERR_ARG || (k == 3 && st == CDYN_ERR_NONFINITE),
                      "critical gains case %zu: %d", k, (int)st);
        settings_kept(c, &b, "set_critical_gains");
    }
    ck_assert_int_eq(cdyn_constraint_set_critical_gains(c, NULL), CDYN_ERR_ARG);
    settings_kept(c, &b, "set_critical_gains(NULL)");

    /* penalty: alpha > 0 (and finite) */
    const double bada[][BM] = {{0, 1}, {1, -2}, {NAN, 1}, {INFINITY, 1}};
    for (size_t k = 0; k < sizeof bada / sizeof bada[0]; ++k) {
        cdyn_status st = cdyn_constraint_set_penalty(c, bada[k]);
        ck_assert_msg(st == CDYN_ERR_ARG || (k >= 2 && st == CDYN_ERR_NONFINITE),
                      "penalty case %zu: %d", k, (int)st);
        settings_kept(c, &b, "set_penalty");
    }
    /* NULL: back to the default, which is what a new object has (bit for
     * bit), and the caller's alpha again after it */
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, NULL), CDYN_OK);
    cdyn_constraint *fresh = make(BN, BM);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(fresh, A0, B0), CDYN_OK);
    ck_assert_int_eq(sys_load(fresh, &b.p), CDYN_OK);
    double qd[BN], ld[BM], qf[BN], lf[BM];
    ck_assert_int_eq(sys_load(c, &b.p), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(c, qd, ld), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_penalty(fresh, qf, lf), CDYN_OK);
    ck_assert(memcmp(qd, qf, sizeof qd) == 0 && memcmp(ld, lf, sizeof ld) == 0);
    ck_assert_double_gt(reldiff(BN, qd, b.qp), 1e-6); /* not ALPHA0's */
    cdyn_constraint_free(fresh);
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, ALPHA0), CDYN_OK);
    settings_kept(c, &b, "set_penalty(NULL), then ALPHA0");

    /* rank tolerance in (0, 1); a kept tolerance is seen on a nearly
     * dependent pair, rows (1, 1, 0) and (1, 1 + 2^-27, 0) (ratio ~3.7e-9
     * on the equilibrated Phi_q, rank_tolerance_decides_nearly_dependent_rows):
     * 1e-6 rejects it, 1e-10 accepts it */
    const double badtol[] = {0.0, 1.0, -1e-8, 2.0, NAN, INFINITY};
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(c, 1e-6), CDYN_OK);
    const double Mi[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, Qi[3] = {0, 0, 1};
    const double Pn[6] = {1, 1, 1, 1 + ldexp(1.0, -27), 0, 0};
    cdyn_constraint *t = make(3, 2);
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(t, 1e-6), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_load(t, Mi, 3, Qi, Pn, 2, NULL, NULL, NULL), CDYN_OK);
    double qq[3], ll[2];
    for (size_t k = 0; k < sizeof badtol / sizeof badtol[0]; ++k) {
        ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(t, badtol[k]), CDYN_ERR_ARG);
        ck_assert_int_eq(cdyn_constraint_lagrange(t, qq, ll), CDYN_ERR_SINGULAR);
    }
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(t, 1e-10), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_lagrange(t, qq, ll), CDYN_OK);
    cdyn_constraint_free(t);
    ck_assert_int_eq(cdyn_constraint_set_rank_tolerance(c, 1e-10), CDYN_OK);
    settings_kept(c, &b, "rank tolerance");
    cdyn_constraint_free(c);
    sys_free(&b.p);
}
END_TEST

START_TEST(set_gains_refuses_a_non_symmetric_gain_either_way)
{
    /* K_D must be symmetric positive definite (header; both triangles are
     * used in s = xi - K_D Phi' - K_P Phi). [1 10; 0 1] and its transpose are
     * both non-symmetric (and indefinite in the symmetric part: 1 - 25 < 0),
     * so both must be refused, whichever triangle a Cholesky check reads. */
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = bad_ref_object(&b);
    const double up[BM * BM] = {1, 0, 10, 1}, low[BM * BM] = {1, 10, 0, 1};
    const double spd[BM * BM] = {2, 0.5, 0.5, 1};
    cdyn_status st_low = cdyn_constraint_set_gains(c, low, BM, spd, BM);
    settings_kept(c, &b, "set_gains(non-symmetric, lower)");
    cdyn_status st_up = cdyn_constraint_set_gains(c, up, BM, spd, BM);
    ck_assert_msg(st_low != CDYN_OK && st_up != CDYN_OK,
                  "K_D = [1 0; 10 1] gives %d, its transpose [1 10; 0 1] gives %d", (int)st_low,
                  (int)st_up);
    settings_kept(c, &b, "set_gains(non-symmetric, upper)");
    cdyn_constraint_free(c);
    sys_free(&b.p);
}
END_TEST

START_TEST(load_rejects_bad_input_and_keeps_the_loaded_instant)
{
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = bad_ref_object(&b);
    /* a second, valid instant whose arrays get spoiled one entry at a time */
    sys_t o;
    sys_random(&o, BN, BM, 1, 1401);
    const sys_t *p = &o;

    ck_assert_int_eq(cdyn_constraint_load(c, NULL, p->ldm, p->Q, p->P, p->ldp, p->Phi, p->Phid,
                                          p->xi),
                     CDYN_ERR_ARG);
    still_correct(c, &b, "load(M NULL)");
    ck_assert_int_eq(cdyn_constraint_load(c, p->M, p->ldm, NULL, p->P, p->ldp, p->Phi, p->Phid,
                                          p->xi),
                     CDYN_ERR_ARG);
    still_correct(c, &b, "load(Q NULL)");
    ck_assert_int_eq(cdyn_constraint_load(c, p->M, p->ldm, p->Q, NULL, p->ldp, p->Phi, p->Phid,
                                          p->xi),
                     CDYN_ERR_ARG);
    still_correct(c, &b, "load(Phi_q NULL)");
    ck_assert_int_eq(cdyn_constraint_load(c, p->M, BN - 1, p->Q, p->P, p->ldp, p->Phi, p->Phid,
                                          p->xi),
                     CDYN_ERR_ARG);
    still_correct(c, &b, "load(ldm < n)");
    ck_assert_int_eq(cdyn_constraint_load(c, p->M, p->ldm, p->Q, p->P, BM - 1, p->Phi, p->Phid,
                                          p->xi),
                     CDYN_ERR_ARG);
    still_correct(c, &b, "load(ldphiq < m)");
    ck_assert_str_ne(cdyn_constraint_last_error(c), "");

    /* NaN, +Inf, -Inf in every input array, at a few positions */
    const double badv[3] = {NAN, INFINITY, -INFINITY};
    for (int v = 0; v < 3; ++v) {
        double *arrays[6] = {o.M, o.Q, o.P, o.Phi, o.Phid, o.xi};
        const int pos[6][2] = {{0, 1 + o.ldm * 2}, {0, BN - 1}, {0, 1 + o.ldp * 3},
                               {0, BM - 1},        {0, 1},      {0, BM - 1}};
        const char *names[6] = {"M", "Q", "Phi_q", "Phi", "Phi_dot", "xi"};
        for (int a = 0; a < 6; ++a)
            for (int k = 0; k < 2; ++k) {
                double *x = arrays[a] + pos[a][k], keep = *x;
                *x = badv[v];
                ck_assert_msg(sys_load(c, &o) == CDYN_ERR_NONFINITE, "%s[%d] = %g accepted",
                              names[a], pos[a][k], badv[v]);
                *x = keep;
                still_correct(c, &b, names[a]);
            }
    }
    /* NaN below the leading rows (padding) is not read */
    ck_assert(isnan(o.M[BN]) && isnan(o.P[BM]));
    ck_assert_int_eq(sys_load(c, &o), CDYN_OK);
    cdyn_constraint_free(c);
    sys_free(&o);
    sys_free(&b.p);
}
END_TEST

START_TEST(formulations_reject_bad_arguments_and_write_nothing)
{
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = bad_ref_object(&b);
    double *q = dbuf(BN), *l = dbuf(BM);
    const double *P = b.p.P;
    int ldp = b.p.ldp;
#define UNTOUCHED(what)                                                                    \
    do {                                                                                   \
        ck_assert_msg(dbuf_untouched(q, BN) && dbuf_untouched(l, BM), "%s wrote", what); \
        ck_assert_str_ne(cdyn_constraint_last_error(c), "");                               \
        still_correct(c, &b, what);                                                        \
    } while (0)
    ck_assert_int_eq(cdyn_constraint_lagrange(c, NULL, l), CDYN_ERR_ARG);
    UNTOUCHED("lagrange(qdd NULL)");
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, NULL), CDYN_ERR_ARG);
    UNTOUCHED("lagrange(lambda NULL)");
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, NULL, l), CDYN_ERR_ARG);
    UNTOUCHED("pinv(qdd NULL)");
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, NULL), CDYN_ERR_ARG);
    UNTOUCHED("pinv(lambda NULL)");
    ck_assert_int_eq(cdyn_constraint_penalty(c, NULL, l), CDYN_ERR_ARG);
    UNTOUCHED("penalty(qdd NULL)");
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, NULL), CDYN_ERR_ARG);
    UNTOUCHED("penalty(lambda NULL)");
    ck_assert_int_eq(cdyn_constraint_reactions(c, NULL, ldp, q, l), CDYN_ERR_ARG);
    UNTOUCHED("reactions(C NULL)");
    ck_assert_int_eq(cdyn_constraint_reactions(c, P, ldp, NULL, l), CDYN_ERR_ARG);
    UNTOUCHED("reactions(qdd NULL)");
    ck_assert_int_eq(cdyn_constraint_reactions(c, P, ldp, q, NULL), CDYN_ERR_ARG);
    UNTOUCHED("reactions(f NULL)");
    ck_assert_int_eq(cdyn_constraint_reactions(c, P, BM - 1, q, l), CDYN_ERR_ARG);
    UNTOUCHED("reactions(ldc < m)");
    double C[BM * BN];
    for (int j = 0; j < BN; ++j)
        for (int i = 0; i < BM; ++i) C[i + BM * j] = P[i + ldp * j];
    const double badv[3] = {NAN, INFINITY, -INFINITY};
    for (int v = 0; v < 3; ++v)
        for (int pos = 0; pos < BM * BN; pos += 3) {
            double keep = C[pos];
            C[pos] = badv[v];
            ck_assert_int_eq(cdyn_constraint_reactions(c, C, BM, q, l), CDYN_ERR_NONFINITE);
            C[pos] = keep;
            UNTOUCHED("reactions(C non-finite)");
        }
    /* singular Phi_q M^-1 C^T */
    for (int j = 0; j < BN; ++j) C[1 + BM * j] = 0.0;
    ck_assert_int_eq(cdyn_constraint_reactions(c, C, BM, q, l), CDYN_ERR_SINGULAR);
    UNTOUCHED("reactions(singular)");
#undef UNTOUCHED
    dbuf_free(q);
    dbuf_free(l);
    cdyn_constraint_free(c);
    sys_free(&b.p);
}
END_TEST

START_TEST(calls_before_load_are_rejected)
{
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = make(BN, BM);
    ck_assert_int_eq(cdyn_constraint_set_baumgarte(c, A0, B0), CDYN_OK);
    ck_assert_int_eq(cdyn_constraint_set_penalty(c, ALPHA0), CDYN_OK);
    enum { size = 2 * BN + BM };
    double *q = dbuf(BN), *l = dbuf(BM), *A = dbuf(size * size), *B = dbuf(size), h[BN] = {0};
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_reactions(c, b.p.P, b.p.ldp, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_pseudoinverse(c, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_penalty(c, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_force(c, q, l), CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, h, A, size, B),
                     CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(q, BN) && dbuf_untouched(l, BM));
    ck_assert(dbuf_untouched(A, size * size) && dbuf_untouched(B, size));
    ck_assert_str_ne(cdyn_constraint_last_error(c), "");
    /* a failed first load leaves it unloaded */
    ck_assert_int_eq(cdyn_constraint_load(c, b.p.M, BN - 1, b.p.Q, b.p.P, b.p.ldp, NULL, NULL,
                                          NULL),
                     CDYN_ERR_ARG);
    ck_assert_int_eq(cdyn_constraint_lagrange(c, q, l), CDYN_ERR_ARG);
    ck_assert(dbuf_untouched(q, BN) && dbuf_untouched(l, BM));
    /* and then it works */
    ck_assert_int_eq(sys_load(c, &b.p), CDYN_OK);
    still_correct(c, &b, "first load");
    dbuf_free(q);
    dbuf_free(l);
    dbuf_free(A);
    dbuf_free(B);
    cdyn_constraint_free(c);
    sys_free(&b.p);
}
END_TEST

START_TEST(export_rejects_bad_arguments)
{
    bad_ref b;
    bad_ref_init(&b);
    cdyn_constraint *c = bad_ref_object(&b);
    enum { size = 2 * BN + BM };
    double *A = dbuf(size * size), *B = dbuf(size), h[BN] = {0.1, 0.2, 0.3, 0.4};
    const double *P = b.p.P;
    int ldp = b.p.ldp;
#define NOWRITE(what)                                                                          \
    do {                                                                                       \
        ck_assert_msg(dbuf_untouched(A, size * size) && dbuf_untouched(B, size), "%s wrote", \
                      what);                                                                   \
        ck_assert_str_ne(cdyn_constraint_last_error(c), "");                                   \
        still_correct(c, &b, what);                                                            \
    } while (0)
    ck_assert_int_eq(cdyn_constraint_export(c, (cdyn_export_variant)2, P, ldp, h, A, size, B),
                     CDYN_ERR_ARG);
    NOWRITE("export(variant 2)");
    ck_assert_int_eq(cdyn_constraint_export(c, (cdyn_export_variant)-1, P, ldp, h, A, size, B),
                     CDYN_ERR_ARG);
    NOWRITE("export(variant -1)");
    for (int v = 0; v < 2; ++v) {
        cdyn_export_variant var = v ? CDYN_EXPORT_REACTIONS : CDYN_EXPORT_MULTIPLIERS;
        ck_assert_int_eq(cdyn_constraint_export(c, var, P, ldp, NULL, A, size, B), CDYN_ERR_ARG);
        NOWRITE("export(h NULL)");
        ck_assert_int_eq(cdyn_constraint_export(c, var, P, ldp, h, NULL, size, B), CDYN_ERR_ARG);
        NOWRITE("export(A NULL)");
        ck_assert_int_eq(cdyn_constraint_export(c, var, P, ldp, h, A, size, NULL), CDYN_ERR_ARG);
        NOWRITE("export(B NULL)");
        ck_assert_int_eq(cdyn_constraint_export(c, var, P, ldp, h, A, size - 1, B), CDYN_ERR_ARG);
        NOWRITE("export(lda < 2n+m)");
        const double badv[3] = {NAN, INFINITY, -INFINITY};
        for (int k = 0; k < 3; ++k) {
            double hb[BN] = {0.1, 0.2, 0.3, 0.4};
            hb[k] = badv[k];
            ck_assert_int_eq(cdyn_constraint_export(c, var, P, ldp, hb, A, size, B),
                             CDYN_ERR_NONFINITE);
            NOWRITE("export(h non-finite)");
        }
    }
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, NULL, ldp, h, A, size, B),
                     CDYN_ERR_ARG);
    NOWRITE("export(C NULL)");
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, P, BM - 1, h, A, size, B),
                     CDYN_ERR_ARG);
    NOWRITE("export(ldc < m)");
    double C[BM * BN];
    for (int j = 0; j < BN; ++j)
        for (int i = 0; i < BM; ++i) C[i + BM * j] = P[i + ldp * j];
    C[5] = NAN;
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, C, BM, h, A, size, B),
                     CDYN_ERR_NONFINITE);
    NOWRITE("export(C NaN)");
    C[5] = -INFINITY;
    ck_assert_int_eq(cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, C, BM, h, A, size, B),
                     CDYN_ERR_NONFINITE);
    NOWRITE("export(C Inf)");
#undef NOWRITE
    dbuf_free(A);
    dbuf_free(B);
    cdyn_constraint_free(c);
    sys_free(&b.p);
}
END_TEST

/* ======================================================================== */
/* 11. No allocation after create                                            */

START_TEST(per_instant_calls_do_not_allocate)
{
    enum { n = 6, m = 3, size = 2 * n + m };
    sys_t p;
    sys_random(&p, n, m, 1, 1500);
    double C[m * n], Cnan[m * n], Csing[m * n], Pdup[m * n], Mbad[n * n], Pz[m * n], h[n] = {0};
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            C[i + m * j] = 2.0 * p.P[i + p.ldp * j];
            Cnan[i + m * j] = C[i + m * j];
            Csing[i + m * j] = i == 1 ? 0.0 : C[i + m * j];
            Pdup[i + m * j] = p.P[(i == 2 ? 0 : i) + p.ldp * j];
            Pz[i + m * j] = j == 2 ? 0.0 : p.P[i + p.ldp * j];
        }
    Cnan[4] = NAN;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) Mbad[i + n * j] = p.M[i + p.ldm * j];
    /* coordinate 2 without mass (row and column 2 of M zero) and, with Pz,
     * without constraint: the KKT system is singular, which the exact forms
     * refuse (M singular alone would not be refused, constraint.h) */
    for (int i = 0; i < n; ++i) Mbad[2 + n * i] = Mbad[i + n * 2] = 0.0;
    double Mnan[n * n];
    memcpy(Mnan, Mbad, sizeof Mnan);
    Mnan[7] = NAN;
    double KD[m * m] = {3, 0, 0, 0, 3, 0, 0, 0, 3}, KP[m * m] = {4, 1, 0, 1, 4, 0, 0, 0, 4};
    double kk[m] = {1, 2, 3}, al[m] = {10, 20, 30}, Kbad[m * m] = {1, 2, 0, 2, 1, 0, 0, 0, 1};
    double *q = dbuf(n), *l = dbuf(m), *A = dbuf(size * size), *B = dbuf(size);
    double gf[n], mu[m], sv[4];
    int rows[m], ranks[4];
    cdyn_status st[64];
    int k = 0;
    cdyn_constraint *c = make(n, m), *fresh = make(n, m);

    alloc_count_start();
    st[k++] = cdyn_constraint_set_baumgarte(c, 1.0, 2.0);
    st[k++] = cdyn_constraint_set_gains(c, KD, m, KP, m);
    st[k++] = cdyn_constraint_set_critical_gains(c, kk);
    st[k++] = cdyn_constraint_set_penalty(c, al);
    st[k++] = cdyn_constraint_set_rank_tolerance(c, 1e-11);
    st[k++] = sys_load(fresh, &p); /* first load after create */
    st[k++] = cdyn_constraint_lagrange(fresh, q, l);
    st[k++] = sys_load(c, &p);
    st[k++] = cdyn_constraint_lagrange(c, q, l);
    st[k++] = cdyn_constraint_force(c, gf, mu);
    st[k++] = cdyn_constraint_reactions(c, p.P, p.ldp, q, l);
    st[k++] = cdyn_constraint_reactions(c, C, m, q, l);
    st[k++] = cdyn_constraint_force(c, gf, mu);
    st[k++] = cdyn_constraint_pseudoinverse(c, q, l);
    sv[0] = cdyn_constraint_smallest_singular_value(c);
    st[k++] = cdyn_constraint_penalty(c, q, l);
    st[k++] = cdyn_constraint_force(c, gf, NULL);
    st[k++] = cdyn_constraint_export(c, CDYN_EXPORT_MULTIPLIERS, NULL, 1, h, A, size, B);
    st[k++] = cdyn_constraint_export(c, CDYN_EXPORT_REACTIONS, C, m, h, A, size, B);
    const int nok = k;
    /* error paths */
    st[k++] = cdyn_constraint_set_gains(c, Kbad, m, KP, m);
    st[k++] = cdyn_constraint_set_rank_tolerance(c, 2.0);
    st[k++] = cdyn_constraint_load(c, Mnan, n, p.Q, p.P, p.ldp, NULL, NULL, NULL);
    st[k++] = cdyn_constraint_reactions(c, Cnan, m, q, l);
    st[k++] = cdyn_constraint_reactions(c, Csing, m, q, l);
    st[k++] = cdyn_constraint_export(c, (cdyn_export_variant)7, C, m, h, A, size, B);
    st[k++] = cdyn_constraint_load(c, p.M, p.ldm, p.Q, Pdup, m, NULL, NULL, NULL);
    st[k++] = cdyn_constraint_force(c, gf, mu); /* nothing since the load */
    st[k++] = cdyn_constraint_lagrange(c, q, l); /* rank loss */
    ranks[0] = cdyn_constraint_rank(c);
    ranks[1] = cdyn_constraint_redundant_rows(c, rows);
    sv[1] = cdyn_constraint_smallest_singular_value(c);
    const int nerr = k;
    st[k++] = cdyn_constraint_pseudoinverse(c, q, l); /* redundant set: fine */
    ranks[2] = cdyn_constraint_rank(c);
    st[k++] = cdyn_constraint_load(c, Mbad, n, p.Q, Pz, m, NULL, NULL, NULL);
    st[k++] = cdyn_constraint_lagrange(c, q, l);     /* KKT singular */
    st[k++] = cdyn_constraint_pseudoinverse(c, q, l); /* KKT singular */
    const char *msg = cdyn_constraint_last_error(c);
    long calls = alloc_count_stop();

    ck_assert_int_eq(calls, 0);
    for (int i = 0; i < nok; ++i)
        ck_assert_msg(st[i] == CDYN_OK, "call %d returned %d", i, (int)st[i]);
    const cdyn_status want[] = {CDYN_ERR_SINGULAR, CDYN_ERR_ARG,      CDYN_ERR_NONFINITE,
                                CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR, CDYN_ERR_ARG,
                                CDYN_OK,            CDYN_ERR_ARG,      CDYN_ERR_SINGULAR,
                                CDYN_OK,            CDYN_OK,           CDYN_ERR_SINGULAR,
                                CDYN_ERR_SINGULAR};
    ck_assert_int_eq(k - nok, (int)(sizeof want / sizeof want[0]));
    ck_assert_int_eq(nerr - nok, 9);
    for (int i = nok; i < k; ++i)
        ck_assert_msg(st[i] == want[i - nok], "error-path call %d returned %d, expected %d",
                      i - nok, (int)st[i], (int)want[i - nok]);
    ck_assert(isnan(sv[0])); /* full-rank successes: no rank-loss report yet */
    ck_assert_int_eq(ranks[0], 2);
    ck_assert_int_eq(ranks[1], 1);
    ck_assert_int_eq(rows[0], 2);
    ck_assert(sv[1] >= 0.0 && sv[1] < 1e-12);
    ck_assert_int_eq(ranks[2], 2);
    ck_assert(msg && msg[0] != '\0');
    ck_assert(dbuf_guards_intact(q, n) && dbuf_guards_intact(l, m));
    ck_assert(dbuf_guards_intact(A, size * size) && dbuf_guards_intact(B, size));
    dbuf_free(q);
    dbuf_free(l);
    dbuf_free(A);
    dbuf_free(B);
    cdyn_constraint_free(c);
    cdyn_constraint_free(fresh);
    sys_free(&p);
}
END_TEST

/* ======================================================================== */

static Suite *constraint_suite(void)
{
    Suite *s = suite_create("constraint");

    TCase *exact = tcase_create("exact");
    tcase_set_timeout(exact, 120);
    tcase_add_test(exact, exact_formulations_agree_with_bordered_solve_without_stabilization);
    tcase_add_test(exact, exact_formulations_agree_with_bordered_solve_with_baumgarte);
    tcase_add_test(exact, exact_formulations_agree_with_bordered_solve_with_generalized_gains);
    tcase_add_test(exact, no_constraints_give_the_unconstrained_acceleration);
    tcase_add_test(exact, schur_and_rank_revealing_paths_give_the_same_solution);
    tcase_add_test(exact, small_sizes_agree_with_a_quad_kkt_solve_in_any_units);
    tcase_add_test(exact, gram_certificate_keeps_the_rank_verdict_in_any_units);
    tcase_add_test(exact, badly_scaled_mass_is_solved_through_the_rank_revealing_path);
    tcase_add_test(exact, schur_path_never_overrides_the_rank_decision_on_phi_q);
    tcase_add_test(exact, pseudoinverse_survives_extreme_scales);
    suite_add_tcase(s, exact);

    TCase *penalty = tcase_create("penalty");
    tcase_set_timeout(penalty, 120);
    tcase_add_test(penalty, penalty_solves_the_regularized_bordered_system);
    tcase_add_test(penalty, penalty_error_shrinks_like_one_over_alpha);
    tcase_add_test(penalty, penalty_handles_a_massless_coordinate);
    tcase_add_test(penalty, penalty_reports_a_motion_without_mass_or_constraint);
    tcase_add_test(penalty, default_penalty_agrees_with_a_quad_kkt_solve_in_any_units);
    tcase_add_test(penalty, default_penalty_is_exact_beside_light_coordinates);
    tcase_add_test(penalty, default_penalty_for_rows_of_zeros_and_of_massless_coordinates);
    tcase_add_test(penalty, default_penalty_keeps_the_largest_row_it_has_seen);
    suite_add_tcase(s, penalty);

    TCase *mech = tcase_create("mechanisms");
    tcase_set_timeout(mech, 120);
    tcase_add_test(mech, pendulum_matches_the_angle_equation_and_rod_tension);
    tcase_add_test(mech, slider_crank_formulations_agree_with_bordered_and_null_space_solves);
    tcase_add_test(mech, duplicated_row_is_named_by_lagrange_and_split_by_the_pseudoinverse);
    tcase_add_test(mech, pseudoinverse_split_does_not_depend_on_the_units_of_the_constraints);
    tcase_add_test(mech, redundant_parallelogram_link_moves_correctly_under_pinv_and_penalty);
    tcase_add_test(mech, critical_gains_give_per_constraint_decay_rates);
    tcase_add_test(mech, gains_set_after_the_load_apply_to_the_loaded_instant);
    suite_add_tcase(s, mech);

    TCase *io = tcase_create("export_force");
    tcase_set_timeout(io, 120);
    tcase_add_test(io, exported_system_reproduces_the_kernel_solutions);
    tcase_add_test(io, force_returns_the_last_successful_formulations_force);
    suite_add_tcase(s, io);

    TCase *rank = tcase_create("rank");
    tcase_set_timeout(rank, 120);
    tcase_add_test(rank, rank_loss_in_lagrange_is_reported_never_nan);
    tcase_add_test(rank, mass_matrix_that_is_not_positive_definite_is_refused);
    tcase_add_test(rank, rank_tolerance_decides_nearly_dependent_rows);
    tcase_add_test(rank, rank_loss_facts_agree_with_the_status_near_a_singular_pose);
    tcase_add_test(rank, reactions_with_c_equal_to_phi_q_accept_what_lagrange_accepts);
    tcase_add_test(rank, constrained_system_singular_to_rounding_is_refused_as_singular);
    suite_add_tcase(s, rank);

    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, create_rejects_bad_sizes);
    tcase_add_test(bad, failed_formulation_keeps_the_last_force);
    tcase_add_test(bad, null_object_is_rejected_everywhere);
    tcase_add_test(bad, setters_reject_out_of_range_values_and_keep_settings);
    tcase_add_test(bad, set_gains_refuses_a_non_symmetric_gain_either_way);
    tcase_add_test(bad, load_rejects_bad_input_and_keeps_the_loaded_instant);
    tcase_add_test(bad, formulations_reject_bad_arguments_and_write_nothing);
    tcase_add_test(bad, calls_before_load_are_rejected);
    tcase_add_test(bad, export_rejects_bad_arguments);
    suite_add_tcase(s, bad);

    TCase *alloc = tcase_create("allocation");
    tcase_set_timeout(alloc, 120);
    tcase_add_test(alloc, per_instant_calls_do_not_allocate);
    suite_add_tcase(s, alloc);
    return s;
}

int main(void)
{
    return tu_run_suite(constraint_suite());
}
