/* Check suite for the rank-revealing step of cdyn_sparse_dae (sparse_dae.h
 * "Rank policy"; src/sparse/rank_qr.h): singular algebraic blocks.
 *
 * Checked against: LAPACK's minimum-norm least-squares solve (dgelss, an
 * SVD) for the outer inverse of the rank-revealing QR on rank-deficient
 * sparse matrices, and the identities X A X = X and A X b = b; the hand
 * solution of a junction whose two branches are closed (the dense
 * cdyn_dae's test of the same case), in several unit systems; and the dense
 * cdyn_dae (SVD steps) along a valve that closes and reopens; and a closed
 * valve in a 30 x 30 hydraulic grid against the same grid with a regular
 * closure, with the identities m v' = F and A v_A' + C v_D' + F_t = 0. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <suitesparse/SuiteSparse_config.h>

#include "../examples/valve_network.h"
#include "alloc_count.h"
#include "cdyn.h"
#include "cdyn/sparse_dae.h"
#include "hydraulic_grid.h"
#include "rising_junction.h"
#include "rank_qr.h"
#include "testutil.h"

void dgelss_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
             const int *ldb, double *s, const double *rcond, int *rank, double *work,
             const int *lwork, int *info);

/* ------------------------------------------------------------------------ */
/* The outer inverse of the rank-revealing QR against an SVD.               */

enum { Q = 40 };

static double max_abs_diff(int n, const double *a, const double *b)
{
    double worst = 0.0;
    for (int i = 0; i < n; ++i) worst = fmax(worst, fabs(a[i] - b[i]));
    return worst;
}

/* A sparse Q x Q matrix, dense column-major in a (for the reference) and by
 * columns of its non-zeros: a diagonal of 4..6, a few random off-diagonal
 * entries, then dependent rows: row 7 = row 3 - 2 row 5 (+ noise), row 20 =
 * 0.5 row 1, row 33 = row 12, row 38 = 0. */
static void deficient_matrix(double *a, double noise, unsigned seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    memset(a, 0, sizeof(double) * Q * Q);
    for (int i = 0; i < Q; ++i) {
        a[i + i * Q] = 5.0 + tu_uniform(&rng); /* tu_uniform: [-1, 1) */
        for (int c = 0; c < 3; ++c) {
            int j = (int)(0.5 * Q * (1.0 + tu_uniform(&rng))) % Q;
            if (j != i) a[i + j * Q] = tu_uniform(&rng);
        }
    }
    for (int j = 0; j < Q; ++j) {
        a[7 + j * Q] = a[3 + j * Q] - 2.0 * a[5 + j * Q];
        a[20 + j * Q] = 0.5 * a[1 + j * Q];
        a[33 + j * Q] = a[12 + j * Q];
        a[38 + j * Q] = 0.0;
    }
    a[7 + 0 * Q] += noise;
}

static int to_columns(const double *a, int *colptr, int *rowind, double *values)
{
    int count = 0;
    colptr[0] = 0;
    for (int j = 0; j < Q; ++j) {
        for (int i = 0; i < Q; ++i)
            if (a[i + j * Q] != 0.0 || i == j) { /* keep the diagonal in the pattern */
                rowind[count] = i;
                values[count++] = a[i + j * Q];
            }
        colptr[j + 1] = count;
    }
    return count;
}

static void multiply(const double *a, const double *x, double *y)
{
    for (int i = 0; i < Q; ++i) {
        y[i] = 0.0;
        for (int j = 0; j < Q; ++j) y[i] += a[i + j * Q] * x[j];
    }
}

/* The minimum-norm solution of a x = b by LAPACK's SVD (dgelss, singular
 * values below 1e-10 of the largest dropped). */
static void svd_solve(const double *a, const double *b, double *x)
{
    double copy[Q * Q], s[Q], work[8 * Q * Q];
    int n = Q, one = 1, rank, info, lwork = 8 * Q * Q;
    double rcond = 1e-10;
    memcpy(copy, a, sizeof copy);
    memcpy(x, b, sizeof(double) * Q);
    dgelss_(&n, &n, &one, copy, &n, x, &n, s, &rcond, &rank, work, &lwork, &info);
    ck_assert_int_eq(info, 0);
}

START_TEST(the_outer_inverse_is_the_minimum_norm_solution_of_an_svd)
{
    SuiteSparse_config.malloc_func = malloc; /* the wrapped ones: counted */
    SuiteSparse_config.calloc_func = calloc;
    SuiteSparse_config.realloc_func = realloc;
    SuiteSparse_config.free_func = free;
    static double a[Q * Q], values[Q * Q];
    static int colptr[Q + 1], rowind[Q * Q];
    const double noises[2] = {0.0, 1e-14}; /* exact dependence, and below the tolerance */
    for (int trial = 0; trial < 6; ++trial) {
        deficient_matrix(a, noises[trial % 2], 11u + (unsigned)trial);
        to_columns(a, colptr, rowind, values);
        cdyn__rank_qr f;
        ck_assert_int_eq(cdyn__rank_qr_init(&f, Q, colptr, rowind), 1);
        double rcond = -1.0;
        alloc_count_start();
        int rank = cdyn__rank_qr_factor(&f, values, 1e-10, &rcond);
        ck_assert(alloc_count_stop() > 0); /* SuiteSparseQR's factors (documented) */
        ck_assert_int_eq(rank, Q - 4);
        ck_assert(rcond > 1e-6 && rcond <= 1.0);
        int rows[Q];
        ck_assert_int_eq(cdyn__rank_qr_dependent(&f, rows), 4);
        /* one row of each dependent group is named */
        int named[Q] = {0};
        for (int k = 0; k < 4; ++k) named[rows[k]] = 1;
        ck_assert(named[38]);
        ck_assert(named[3] + named[5] + named[7] == 1);
        ck_assert(named[1] + named[20] == 1);
        ck_assert(named[12] + named[33] == 1);
        double x0[Q], b[Q], x[Q], ref[Q], back[Q];
        for (int i = 0; i < Q; ++i) x0[i] = sin(1.0 + i) * (i % 3 ? 1.0 : 100.0);
        multiply(a, x0, b); /* consistent */
        memcpy(x, b, sizeof x);
        alloc_count_start();
        cdyn__rank_qr_apply(&f, x, x); /* in place */
        ck_assert_int_eq(alloc_count_stop(), 0);
        svd_solve(a, b, ref);
        double scale = 0.0, bscale = 0.0;
        for (int i = 0; i < Q; ++i) scale = fmax(scale, fabs(ref[i]));
        for (int i = 0; i < Q; ++i) bscale = fmax(bscale, fabs(b[i]));
        ck_assert_double_le(max_abs_diff(Q, x, ref), 1e-11 * scale);
        multiply(a, x, back);
        ck_assert_double_le(max_abs_diff(Q, back, b), 1e-12 * bscale);
        /* X A X = X on an arbitrary vector (inconsistent for A) */
        double z[Q], xz[Q], axz[Q], xaxz[Q];
        for (int i = 0; i < Q; ++i) z[i] = cos(3.0 * i);
        cdyn__rank_qr_apply(&f, z, xz);
        multiply(a, xz, axz);
        cdyn__rank_qr_apply(&f, axz, xaxz);
        double xs = 0.0;
        for (int i = 0; i < Q; ++i) xs = fmax(xs, fabs(xz[i]));
        ck_assert_double_le(max_abs_diff(Q, xaxz, xz), 1e-12 * xs);
        cdyn__rank_qr_free(&f);
    }
}
END_TEST

START_TEST(full_rank_and_zero_blocks_are_told_apart)
{
    static double a[Q * Q], values[Q * Q];
    static int colptr[Q + 1], rowind[Q * Q];
    deficient_matrix(a, 0.0, 5u);
    for (int j = 0; j < Q; ++j) a[38 + j * Q] = (j == 38) ? 5.0 : 0.0; /* restore rows */
    for (int j = 0; j < Q; ++j) a[33 + j * Q] += (j == 33) ? 1e-6 : 0.0;
    for (int j = 0; j < Q; ++j) a[20 + j * Q] += (j == 20) ? 1.0 : 0.0;
    for (int j = 0; j < Q; ++j) a[7 + j * Q] += (j == 7) ? 1.0 : 0.0;
    to_columns(a, colptr, rowind, values);
    cdyn__rank_qr f;
    ck_assert_int_eq(cdyn__rank_qr_init(&f, Q, colptr, rowind), 1);
    double rcond;
    /* row 33 is 1e-6 away from row 12: independent at the tolerance 1e-10,
     * and the kept triangle says how close (its condition near 1e6 / 5) */
    ck_assert_int_eq(cdyn__rank_qr_factor(&f, values, 1e-10, &rcond), Q);
    ck_assert(rcond < 1e-5 && rcond > 1e-9);
    ck_assert_int_eq(cdyn__rank_qr_dependent(&f, NULL), 0);
    double x0[Q], b[Q], x[Q], back[Q];
    for (int i = 0; i < Q; ++i) x0[i] = 1.0 + i;
    multiply(a, x0, b);
    cdyn__rank_qr_apply(&f, b, x);
    multiply(a, x, back);
    ck_assert_double_le(max_abs_diff(Q, back, b), 1e-9 * 5.0 * Q);
    /* the same pattern with all values zero: rank 0, every row dependent */
    memset(values, 0, sizeof(double) * (size_t)colptr[Q]);
    ck_assert_int_eq(cdyn__rank_qr_factor(&f, values, 1e-10, &rcond), 0);
    ck_assert_int_eq(cdyn__rank_qr_dependent(&f, NULL), Q);
    cdyn__rank_qr_apply(&f, b, x);
    for (int i = 0; i < Q; ++i) ck_assert(x[i] == 0.0);
    cdyn__rank_qr_free(&f);
    cdyn__rank_qr_free(&f); /* a freed (zeroed) one may be freed again */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A junction with two closed branches (test_dae's hand case).              */
/*                                                                          */
/* v = (Q1, Qa, Qb, pJ), m = (I1, 0, 0, 0):                                 */
/*   I1 Q1' = p1 - R Q1 - pJ;  0 = pJ - p2 - k Qa|Qa|;                      */
/*   0 = pJ - p3 - k Qb|Qb|;   0 = Q1 - Qa - Qb.                            */
/* With p2 = p3 = 1 and Q1 = 0: Qa = Qb = 0, pJ = 1, and the block          */
/* d(F1, F2, F3)/d(Qa, Qb, pJ) = [0 0 1; 0 0 1; -1 -1 0] has rank 2 (the two */
/* branch equations are the same). Its rates: pJ' = 0, Qa' + Qb' = Q1' with */
/* Q1' = (p1 - pJ) / I1 = 4.5; the minimum-norm one Qa' = Qb' = 2.25.       */
/* In units: flows times sq, pressures times sp, equation i times se^(+-1). */

typedef struct {
    double I1, R, k, p1, p2, p3;
    double sq, sp, e[4];
} junction;

static void junction_init(junction *h, double sq, double sp, double se)
{
    h->I1 = 2.0, h->R = 0.5, h->k = 3.0, h->p1 = 10.0, h->p2 = 1.0, h->p3 = 1.0;
    h->sq = sq, h->sp = sp;
    for (int i = 0; i < 4; ++i) h->e[i] = i % 2 ? 1.0 / se : se;
}

static int junction_force(double t, const double *v, double *F, void *user)
{
    const junction *h = user;
    (void)t;
    double q1 = v[0] / h->sq, qa = v[1] / h->sq, qb = v[2] / h->sq, pj = v[3] / h->sp;
    F[0] = h->e[0] * (h->p1 - h->R * q1 - pj);
    F[1] = h->e[1] * (pj - h->p2 - h->k * qa * fabs(qa));
    F[2] = h->e[2] * (pj - h->p3 - h->k * qb * fabs(qb));
    F[3] = h->e[3] * (q1 - qa - qb);
    return 0;
}

/* pattern: column Q1 rows (0, 3); Qa (1, 3); Qb (2, 3); pJ (0, 1, 2) */
static const int JUNCTION_COLPTR[5] = {0, 2, 4, 6, 9};
static const int JUNCTION_ROWIND[9] = {0, 3, 1, 3, 2, 3, 0, 1, 2};

static int junction_jacobian(double t, const double *v, double *values, void *user)
{
    const junction *h = user;
    (void)t;
    double qa = v[1] / h->sq, qb = v[2] / h->sq, e0 = h->e[0], e1 = h->e[1], e2 = h->e[2],
           e3 = h->e[3];
    values[0] = -e0 * h->R / h->sq, values[1] = e3 / h->sq;
    values[2] = -e1 * 2.0 * h->k * fabs(qa) / h->sq, values[3] = -e3 / h->sq;
    values[4] = -e2 * 2.0 * h->k * fabs(qb) / h->sq, values[5] = -e3 / h->sq;
    values[6] = -e0 / h->sp, values[7] = e1 / h->sp, values[8] = e2 / h->sp;
    return 0;
}

START_TEST(closed_branches_step_through_with_minimum_norm_rates_in_any_units)
{
    const double units[5][3] = {{1, 1, 1}, {1e8, 1, 1}, {1e-8, 1e8, 1}, {1, 1e-8, 1e8},
                                {1e8, 1e8, 1e-8}};
    for (int u = 0; u < 5; ++u) {
        junction h;
        junction_init(&h, units[u][0], units[u][1], units[u][2]);
        const double mass[4] = {h.e[0] * h.I1 / h.sq, 0.0, 0.0, 0.0};
        cdyn_status st;
        cdyn_sparse_dae *sd = cdyn_sparse_dae_create(4, mass, JUNCTION_COLPTR, JUNCTION_ROWIND,
                                                     &st);
        ck_assert_ptr_nonnull(sd);
        ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, junction_force, junction_jacobian, NULL,
                                                   &h),
                         CDYN_OK);
        double v[4] = {0.0, 0.0, 0.0, 1.0 * h.sp};
        ck_assert_int_eq(cdyn_sparse_dae_consistent(sd, 0.0, v), CDYN_OK);
        ck_assert(v[1] == 0.0 && v[2] == 0.0 && v[3] == h.sp);
        double y = 0.0, ydot, w[4], wdot[4];
        ck_assert_int_eq(cdyn_sparse_dae_rhs(sd, 0.0, &y, &ydot), CDYN_OK);
        ck_assert_double_le(fabs(ydot / h.sq - 4.5), 1e-12 * 4.5);
        ck_assert_int_eq(cdyn_sparse_dae_last_state(sd, w, wdot), CDYN_OK);
        ck_assert_double_le(fabs(wdot[1] / h.sq - 2.25), 1e-12 * 4.5);
        ck_assert_double_le(fabs(wdot[2] / h.sq - 2.25), 1e-12 * 4.5);
        ck_assert_double_le(fabs(wdot[3] / h.sp), 1e-12 * 4.5);
        ck_assert(cdyn_sparse_dae_rank_factorizations(sd) >= 1);
        /* the Newton report names one of the two branch equations */
        const cdyn_newton *nt = cdyn_sparse_dae_newton(sd);
        int rows[3];
        ck_assert_int_eq(cdyn_sparse_dae_consistent(sd, 0.0, v), CDYN_OK);
        ck_assert_int_eq(cdyn_newton_dependent_rows(nt, rows), 1);
        ck_assert(rows[0] == 0 || rows[0] == 1);
        cdyn_sparse_dae_free(sd);
    }
}
END_TEST

/* Inconsistent rates at a singular block are refused: the same junction
 * with a source term in the branch equations' time derivative (p2 rising
 * at one rate, p3 at another) cannot keep both branches closed. */
static int junction_time(double t, const double *v, double *dFdt, void *user)
{
    const junction *h = user;
    (void)t, (void)v;
    dFdt[0] = dFdt[3] = 0.0;
    dFdt[1] = -h->e[1] * 1.0; /* p2' = 1 */
    dFdt[2] = -h->e[2] * 2.0; /* p3' = 2 */
    return 0;
}

START_TEST(rates_outside_the_range_of_a_singular_block_are_refused)
{
    junction h;
    junction_init(&h, 1.0, 1.0, 1.0);
    const double mass[4] = {h.I1, 0.0, 0.0, 0.0};
    cdyn_status st;
    cdyn_sparse_dae *sd = cdyn_sparse_dae_create(4, mass, JUNCTION_COLPTR, JUNCTION_ROWIND, &st);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, junction_force, junction_jacobian,
                                               junction_time, &h),
                     CDYN_OK);
    double v[4] = {0.0, 0.0, 0.0, 1.0};
    ck_assert_int_eq(cdyn_sparse_dae_consistent(sd, 0.0, v), CDYN_OK);
    double y = 0.0, ydot = -7.0;
    ck_assert_int_eq(cdyn_sparse_dae_rhs(sd, 0.0, &y, &ydot), CDYN_ERR_SINGULAR);
    ck_assert_ptr_nonnull(strstr(cdyn_sparse_dae_last_error(sd), "not determined"));
    ck_assert(ydot == -7.0);
    /* consistent rates (both tanks rising alike) pass */
    h.p3 = h.p2;
    ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, junction_force, junction_jacobian, NULL, &h),
                     CDYN_OK);
    ck_assert_int_eq(cdyn_sparse_dae_rhs(sd, 0.0, &y, &ydot), CDYN_OK);
    ck_assert_double_le(fabs(ydot - 4.5), 1e-12 * 4.5);
    cdyn_sparse_dae_free(sd);
}
END_TEST

/* The same closed junction with tanks rising at different rates and a
 * decoupled massless state of rate C = 1e28 (rising_junction.h, shared with
 * test_dae): its rate must not loosen the certificate of the junction's,
 * which are inconsistent for d = 0.01 and refused as for C = 1. (A floor
 * over all unknowns at the rounding of the largest, 1e28 eps, accepted
 * them with pJ' 1 % off one of its two equations.) */

/* pattern: the junction's, then column s row (4) */
static const int RISING_COLPTR[6] = {0, 2, 4, 6, 9, 10};
static const int RISING_ROWIND[10] = {0, 3, 1, 3, 2, 3, 0, 1, 2, 4};

/* The entries of a dense n x n J (ld n) on a pattern, by columns. */
static void gather(int n, const double *J, const int *colptr, const int *rowind, double *values)
{
    for (int j = 0; j < n; ++j)
        for (int e = colptr[j]; e < colptr[j + 1]; ++e) values[e] = J[rowind[e] + n * j];
}

/* dF/dv on that pattern, from the shared dense Jacobian */
static int rising_values(double t, const double *v, double *values, void *user)
{
    double J[25];
    rising_jacobian(t, v, J, 5, user);
    gather(5, J, RISING_COLPTR, RISING_ROWIND, values);
    return 0;
}

START_TEST(a_large_decoupled_rate_does_not_hide_inconsistent_ones)
{
    const double cases[3][2] = {{1.0, 0.01}, {1e28, 0.01}, {1e28, 0.0}};
    for (int k = 0; k < 3; ++k) {
        rising u = {cases[k][0], cases[k][1], 1.0};
        const double mass[5] = {2.0, 0.0, 0.0, 0.0, 0.0};
        cdyn_status st;
        cdyn_sparse_dae *sd =
            cdyn_sparse_dae_create(5, mass, RISING_COLPTR, RISING_ROWIND, &st);
        ck_assert_ptr_nonnull(sd);
        ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, rising_force, rising_values, rising_time,
                                                   &u),
                         CDYN_OK);
        double v[5] = {0.0, 0.0, 0.0, 1.0, 0.0}, y = 0.0, ydot = -7.0;
        ck_assert_int_eq(cdyn_sparse_dae_consistent(sd, 0.0, v), CDYN_OK);
        st = cdyn_sparse_dae_rhs(sd, 0.0, &y, &ydot);
        if (u.d != 0.0) {
            ck_assert_int_eq(st, CDYN_ERR_SINGULAR);
            ck_assert(ydot == -7.0);
        } else { /* consistent: pJ' = 1, Qa' = Qb' = Q1' / 2, s' = C */
            ck_assert_int_eq(st, CDYN_OK);
            double w[5], wd[5];
            ck_assert_int_eq(cdyn_sparse_dae_last_state(sd, w, wd), CDYN_OK);
            ck_assert_double_le(fabs(ydot - 4.5), 1e-12 * 4.5);
            ck_assert_double_le(fabs(wd[3] - 1.0), 1e-15);
            ck_assert_double_le(fabs(wd[1] - 2.25), 1e-12 * 4.5);
            ck_assert_double_le(fabs(wd[4] - u.c), 1e-15 * u.c);
        }
        cdyn_sparse_dae_free(sd);
    }
}
END_TEST

/* Three algebraic states, F = A v - A (1, 1, 0) with a zero row and a
 * zero column and rows 1, 2 = (1, 1, 0), (1, 1 + d, 0) (the pattern is
 * full, so the block is structurally regular). Its kept triangle has
 * condition about 8 / d: for d = 1e-3 the rank 2 is decided and the
 * minimum-norm steps reach v = (1, 1, 0) (the zero column's state keeps
 * its start, 0); for d = 3e-10 Heath's test still keeps row 2 (its remainder
 * 2.1e-10 is above 1e-10 of the row norms) but the triangle's reciprocal
 * condition, 4e-11, is not: the rank is not decided and the block is
 * refused. */
static int near_force(double t, const double *v, double *F, void *user)
{
    const double d = *(const double *)user;
    (void)t;
    F[0] = 0.0;
    F[1] = v[0] + v[1] - 2.0;
    F[2] = v[0] + (1.0 + d) * v[1] - (2.0 + d);
    return 0;
}

static const int NEAR_COLPTR[4] = {0, 3, 6, 9};
static const int NEAR_ROWIND[9] = {0, 1, 2, 0, 1, 2, 0, 1, 2};

static int near_jacobian(double t, const double *v, double *values, void *user)
{
    const double d = *(const double *)user;
    (void)t, (void)v;
    const double x[9] = {0.0, 1.0, 1.0, 0.0, 1.0, 1.0 + d, 0.0, 0.0, 0.0};
    memcpy(values, x, sizeof x);
    return 0;
}

START_TEST(a_rank_that_is_not_decided_cleanly_is_refused)
{
    const double mass[3] = {0.0, 0.0, 0.0};
    for (int k = 0; k < 2; ++k) {
        double d = k == 0 ? 1e-3 : 3e-10;
        cdyn_status st;
        cdyn_sparse_dae *sd = cdyn_sparse_dae_create(3, mass, NEAR_COLPTR, NEAR_ROWIND, &st);
        ck_assert_ptr_nonnull(sd);
        ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, near_force, near_jacobian, NULL, &d),
                         CDYN_OK);
        double v[3] = {0.0, 0.0, 0.0};
        st = cdyn_sparse_dae_consistent(sd, 0.0, v);
        if (k == 0) {
            ck_assert_int_eq(st, CDYN_OK);
            ck_assert_double_le(fabs(v[0] - 1.0), 1e-9);
            ck_assert_double_le(fabs(v[1] - 1.0), 1e-9);
            ck_assert(v[2] == 0.0);
            int rows[3];
            ck_assert_int_eq(cdyn_newton_dependent_rows(cdyn_sparse_dae_newton(sd), rows), 1);
            ck_assert_int_eq(rows[0], 0);
        } else {
            ck_assert_int_eq(st, CDYN_ERR_SINGULAR);
            ck_assert_ptr_nonnull(strstr(cdyn_sparse_dae_last_error(sd), "not be decided"));
            ck_assert(v[0] == 0.0 && v[1] == 0.0 && v[2] == 0.0); /* untouched */
        }
        cdyn_sparse_dae_free(sd);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The valve network of examples/valve_network.h: a valve that closes and   */
/* reopens, integrated by RK4 through the sparse and the dense DAE.         */

/* pattern: Q1 (Q1, PJ); QA (QA, PJ); QB (QB, PJ); PJ (Q1, QA, QB) */
static const int VALVE_COLPTR[5] = {0, 2, 4, 6, 9};
static const int VALVE_ROWIND[9] = {Q1, PJ, QA, PJ, QB, PJ, Q1, QA, QB};

static int valve_values(double t, const double *v, double *values, void *user)
{
    double J[16];
    valve_jacobian(t, v, J, 4, user);
    gather(4, J, VALVE_COLPTR, VALVE_ROWIND, values);
    return 0;
}

typedef cdyn_status (*rhs_fn)(void *object, double t, const double *y, double *ydot);

static cdyn_status sparse_rhs(void *o, double t, const double *y, double *ydot)
{
    return cdyn_sparse_dae_rhs(o, t, y, ydot);
}

static cdyn_status dense_rhs(void *o, double t, const double *y, double *ydot)
{
    return cdyn_dae_rhs(o, t, y, ydot);
}

static cdyn_status rk4(rhs_fn f, void *o, double t, double h, double *y)
{
    double k1 = 0.0, k2 = 0.0, k3 = 0.0, k4 = 0.0, w; /* a failed call leaves its stage unset */
    cdyn_status st = f(o, t, y, &k1);
    w = *y + 0.5 * h * k1;
    if (st == CDYN_OK) st = f(o, t + 0.5 * h, &w, &k2);
    w = *y + 0.5 * h * k2;
    if (st == CDYN_OK) st = f(o, t + 0.5 * h, &w, &k3);
    w = *y + h * k3;
    if (st == CDYN_OK) st = f(o, t + h, &w, &k4);
    if (st == CDYN_OK) *y += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    return st;
}

START_TEST(a_closing_valve_matches_the_dense_dae)
{
    network net = make_network();
    const double mass[4] = {net.inertance, 0.0, 0.0, 0.0};
    cdyn_status st;
    cdyn_sparse_dae *sd = cdyn_sparse_dae_create(4, mass, VALVE_COLPTR, VALVE_ROWIND, &st);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, valve_force, valve_values, valve_time, &net),
                     CDYN_OK);
    cdyn_dae *dae = cdyn_dae_create(4, &st);
    ck_assert_ptr_nonnull(dae);
    double M[16] = {0};
    M[0] = net.inertance;
    ck_assert_int_eq(cdyn_dae_set_mass(dae, M, 4), CDYN_OK);
    ck_assert_int_eq(cdyn_dae_set_model(dae, valve_force, valve_jacobian, valve_time, &net),
                     CDYN_OK);
    double v[4] = {2e-3, 1e-3, 1e-3, 5e5}, vs[4], vd[4];
    ck_assert_int_eq(cdyn_dae_split(dae, 0.0, v), CDYN_OK);
    memcpy(vs, v, sizeof v);
    ck_assert_int_eq(cdyn_dae_consistent(dae, 0.0, v), CDYN_OK);
    ck_assert_int_eq(cdyn_sparse_dae_consistent(sd, 0.0, vs), CDYN_OK);
    double ys = vs[Q1], yd = v[Q1], h = 1e-3, worst_q = 0.0, worst_p = 0.0;
    for (int step = 0; step < 1000; ++step) {
        double t = step * h;
        ck_assert_int_eq(rk4(sparse_rhs, sd, t, h, &ys), CDYN_OK);
        ck_assert_int_eq(rk4(dense_rhs, dae, t, h, &yd), CDYN_OK);
        ck_assert_int_eq(cdyn_sparse_dae_last_state(sd, vs, NULL), CDYN_OK);
        ck_assert_int_eq(cdyn_dae_last_state(dae, vd, NULL), CDYN_OK);
        worst_q = fmax(worst_q, fabs(ys - yd));
        for (int i = QA; i <= QB; ++i) worst_q = fmax(worst_q, fabs(vs[i] - vd[i]));
        worst_p = fmax(worst_p, fabs(vs[PJ] - vd[PJ]));
    }
    /* flows ~2e-3 m^3/s, pressures ~1e6 Pa */
    ck_assert_double_le(worst_q, 1e-9 * 2e-3);
    ck_assert_double_le(worst_p, 1e-9 * 1e6);
    ck_assert(cdyn_sparse_dae_rank_factorizations(sd) > 0); /* the closed phase took it */
    cdyn_newton_counters c;
    ck_assert_int_eq(cdyn_newton_get_counters(cdyn_sparse_dae_newton(sd), &c), CDYN_OK);
    ck_assert(c.svd_steps > 0);
    cdyn_sparse_dae_free(sd);
    cdyn_dae_free(dae);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A closed valve in a 30 x 30 hydraulic grid (hydraulic_grid.h, n = 3540): */
/* its row of the block vanishes. The states and the integrated rates must  */
/* be those of the same grid whose closed valve also has a linear          */
/* resistance (a regular block, the same root q_e = 0), and the identities */
/* m v' = F and A v_A' + C v_D' + dF_A/dt = 0 hold.                         */

static cdyn_sparse_dae *valve_grid(grid *g, double resistance)
{
    grid_init(g, 30);
    int e = grid_set_valve(g, 0.0);
    g->valve_resistance = resistance;
    cdyn_status st;
    cdyn_sparse_dae *sd = cdyn_sparse_dae_create(g->n, g->mass, g->colptr, g->rowind, &st);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(cdyn_sparse_dae_set_model(sd, grid_force, grid_jacobian, grid_time, g),
                     CDYN_OK);
    double *v = malloc(sizeof(double) * (size_t)g->n);
    grid_guess(g, v);
    v[e] = 0.0;
    cdyn_newton_counters c;
    alloc_count_start();
    cdyn_status status = cdyn_sparse_dae_consistent(sd, 0.0, v);
    long allocations = alloc_count_stop();
    ck_assert_int_eq(status, CDYN_OK);
    /* SuiteSparseQR's factors are allocated (documented); KLU's first
     * numeric factorization too */
    ck_assert(allocations > 0);
    ck_assert_int_eq(cdyn_newton_get_counters(cdyn_sparse_dae_newton(sd), &c), CDYN_OK);
    if (resistance == 0.0) { /* the first step was the rank-revealing one */
        ck_assert(c.svd_steps >= 1);
        ck_assert(cdyn_sparse_dae_rank_factorizations(sd) >= 1);
    }
    free(v);
    return sd;
}

START_TEST(a_closed_valve_in_a_large_grid_matches_a_regular_closure)
{
    SuiteSparse_config.malloc_func = malloc; /* the wrapped ones: counted */
    SuiteSparse_config.calloc_func = calloc;
    SuiteSparse_config.realloc_func = realloc;
    SuiteSparse_config.free_func = free;
    grid g, r;
    cdyn_sparse_dae *sd = valve_grid(&g, 0.0), *sr = valve_grid(&r, 1e7);
    ck_assert_int_eq(cdyn_sparse_dae_rank_factorizations(sr), 0);
    int n = g.n, nd = cdyn_sparse_dae_ode_size(sd), q = n - nd;
    int *integrated = malloc(sizeof(int) * (size_t)nd);
    int *algebraic = malloc(sizeof(int) * (size_t)q);
    cdyn_sparse_dae_split_states(sd, integrated, algebraic);
    double *y = malloc(sizeof(double) * (size_t)nd), *yr = malloc(sizeof(double) * (size_t)nd);
    double *k = malloc(sizeof(double) * (size_t)nd), *kr = malloc(sizeof(double) * (size_t)nd);
    double *w = malloc(sizeof(double) * (size_t)n), *wd = malloc(sizeof(double) * (size_t)n);
    double *wr = malloc(sizeof(double) * (size_t)n), *F = malloc(sizeof(double) * (size_t)n);
    double *values = malloc(sizeof(double) * (size_t)g.nnz), *Ft = malloc(sizeof(double) * (size_t)n);
    grid_guess(&g, w);
    for (int l = 0; l < nd; ++l) y[l] = yr[l] = w[integrated[l]];
    /* explicit Euler, 10 us (the grid is stiff: 1 ms diverges), both alike;
     * the closed valve's flow stays zero to the Newton tolerance (the
     * comparison with the exact root of the regular closure below):
     * the block is singular at the start (a rank-revealing solve), then
     * regular after equilibration */
    for (int step = 0; step < 20; ++step) {
        double t = 1e-5 * step;
        alloc_count_start();
        cdyn_status status = cdyn_sparse_dae_rhs(sd, t, y, k);
        long allocations = alloc_count_stop(); /* (Check's asserts allocate) */
        ck_assert_int_eq(status, CDYN_OK);
        if (step >= 2) /* KLU's pivots may change once after the singular block */
            ck_assert_int_eq(allocations, 0);
        ck_assert_int_eq(cdyn_sparse_dae_rhs(sr, t, yr, kr), CDYN_OK);
        ck_assert_int_eq(cdyn_sparse_dae_last_state(sd, w, wd), CDYN_OK);
        ck_assert_int_eq(cdyn_sparse_dae_last_state(sr, wr, NULL), CDYN_OK);
        ck_assert(wr[g.valve] == 0.0); /* the regular closure's root is exact */
        double scale_q = 0.0, scale_p = 0.0, dq = 0.0, dp = 0.0, rate = 0.0, drate = 0.0;
        for (int i = 0; i < n; ++i) {
            int pressure = i >= g.np && i < g.np + g.nj;
            double *scale = pressure ? &scale_p : &scale_q, *d = pressure ? &dp : &dq;
            *scale = fmax(*scale, fabs(wr[i]));
            *d = fmax(*d, fabs(w[i] - wr[i]));
        }
        for (int l = 0; l < nd; ++l) {
            rate = fmax(rate, fabs(kr[l]));
            drate = fmax(drate, fabs(k[l] - kr[l]));
        }
        ck_assert_double_le(dq, 1e-9 * scale_q);
        ck_assert_double_le(dp, 1e-9 * scale_p);
        ck_assert_double_le(drate, 1e-8 * rate);
        /* m v' = F (the states with mass); A v_A' + C v_D' + dF_A/dt = 0 */
        grid_force(t, w, F, &g);
        grid_jacobian(t, w, values, &g);
        grid_time(t, w, Ft, &g);
        for (int l = 0; l < nd; ++l) {
            int j = integrated[l];
            ck_assert_double_le(fabs(g.mass[j] * wd[j] - F[j]), 4e-16 * fabs(F[j]));
        }
        /* each residual against its terms, and against each term's
         * coefficient times the largest rate of that kind (flows, pressures):
         * the closed valve's q_e' is zero up to the others' rounding */
        double largest[2] = {0.0, 0.0};
        for (int j = 0; j < n; ++j) {
            int kind = j >= g.np && j < g.np + g.nj;
            largest[kind] = fmax(largest[kind], fabs(wd[j]));
        }
        double *res = Ft, *bound = F; /* reuse: residual and its size, per equation */
        for (int i = 0; i < n; ++i) bound[i] = fabs(res[i]);
        for (int j = 0; j < n; ++j) {
            double floor = fabs(wd[j]) + 1e-3 * largest[j >= g.np && j < g.np + g.nj];
            for (int x = g.colptr[j]; x < g.colptr[j + 1]; ++x) {
                res[g.rowind[x]] += values[x] * wd[j];
                bound[g.rowind[x]] += fabs(values[x]) * floor;
            }
        }
        for (int a = 0; a < q; ++a) {
            int i = algebraic[a];
            ck_assert_double_le(fabs(res[i]), 1e-13 * bound[i]);
        }
        for (int l = 0; l < nd; ++l) {
            y[l] += 1e-5 * k[l];
            yr[l] += 1e-5 * kr[l];
        }
    }
    ck_assert(cdyn_sparse_dae_rank_factorizations(sd) >= 1);
    ck_assert_int_eq(cdyn_sparse_dae_rank_factorizations(sr), 0);
    ck_assert(cdyn_sparse_dae_pivotings(sd) <= 2);
    void *arrays[] = {integrated, algebraic, y, yr, k, kr, w, wd, wr, F, values, Ft};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    cdyn_sparse_dae_free(sd);
    cdyn_sparse_dae_free(sr);
    grid_free(&g);
    grid_free(&r);
}
END_TEST

START_TEST(null_object)
{
    ck_assert_int_eq(cdyn_sparse_dae_rank_factorizations(NULL), -1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sparse_singular");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_outer_inverse_is_the_minimum_norm_solution_of_an_svd);
    tcase_add_test(tc, full_rank_and_zero_blocks_are_told_apart);
    tcase_add_test(tc, closed_branches_step_through_with_minimum_norm_rates_in_any_units);
    tcase_add_test(tc, rates_outside_the_range_of_a_singular_block_are_refused);
    tcase_add_test(tc, a_large_decoupled_rate_does_not_hide_inconsistent_ones);
    tcase_add_test(tc, a_rank_that_is_not_decided_cleanly_is_refused);
    tcase_add_test(tc, a_closing_valve_matches_the_dense_dae);
    tcase_add_test(tc, a_closed_valve_in_a_large_grid_matches_a_regular_closure);
    tcase_add_test(tc, null_object);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
