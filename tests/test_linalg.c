/* The internal BLAS/LAPACK layer against plain loops and known answers. */
#include "linalg.h"
#include "rank.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 7, K = 5 };

START_TEST(gemm_and_gemv_match_plain_loops)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    double A[N * K], B[K * N], C[N * N], ref[N * N], x[K], y[N], yref[N];
    tu_random(&r, N, K, A, N);
    tu_random(&r, K, N, B, K);
    tu_random(&r, K, 1, x, K);
    tu_matmul(N, K, N, A, N, B, K, ref, N);
    for (int i = 0; i < N * N; ++i) C[i] = 1.0;
    cdyn__gemm('N', 'N', N, N, K, 1.0, A, N, B, K, 0.0, C, N);
    for (int i = 0; i < N * N; ++i) ck_assert_double_eq_tol(C[i], ref[i], 1e-14);
    /* A^T A through 'T' equals the plain product of the transpose */
    double At[K * N], ata[K * K], ref2[K * K];
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < K; ++j) At[j + i * K] = A[i + j * N];
    tu_matmul(K, N, K, At, K, A, N, ref2, K);
    cdyn__gemm('T', 'N', K, K, N, 1.0, A, N, A, N, 0.0, ata, K);
    for (int i = 0; i < K * K; ++i) ck_assert_double_eq_tol(ata[i], ref2[i], 1e-14);
    /* syrk fills the lower triangle of the same product */
    double low[K * K];
    memset(low, 0, sizeof low);
    cdyn__syrk('L', 'T', K, N, 1.0, A, N, 0.0, low, K);
    for (int j = 0; j < K; ++j)
        for (int i = j; i < K; ++i) ck_assert_double_eq_tol(low[i + j * K], ref2[i + j * K], 1e-14);
    tu_matvec(N, K, A, N, x, yref);
    cdyn__gemv('N', N, K, 1.0, A, N, x, 0.0, y);
    for (int i = 0; i < N; ++i) ck_assert_double_eq_tol(y[i], yref[i], 1e-14);
    /* empty product: y = beta y */
    for (int i = 0; i < N; ++i) y[i] = 2.0;
    cdyn__gemv('N', N, 0, 1.0, A, N, x, 0.5, y);
    for (int i = 0; i < N; ++i) ck_assert_double_eq(y[i], 1.0);
}
END_TEST

START_TEST(pivoted_qr_reconstructs_and_orders_the_diagonal)
{
    tu_rng r;
    tu_rng_seed(&r, 12);
    int m = 4, n = N;
    double A[4 * N], QR[4 * N], tau[4], R[4 * N];
    int jpvt[N];
    tu_random(&r, m, n, A, m);
    memcpy(QR, A, sizeof A);
    memset(jpvt, 0, sizeof jpvt);
    int lwork = cdyn__geqp3_lwork(m, n);
    double *work = malloc(sizeof(double) * (size_t)lwork);
    ck_assert_int_eq(cdyn__geqp3(m, n, QR, m, jpvt, tau, work, lwork), 0);
    free(work);
    for (int j = 1; j < m; ++j)
        ck_assert(fabs(QR[j + j * m]) <= fabs(QR[(j - 1) + (j - 1) * m]) * (1 + 1e-15));
    /* Q R = A P: apply Q to R with ormqr */
    memset(R, 0, sizeof R);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i <= j && i < m; ++i) R[i + j * m] = QR[i + j * m];
    lwork = cdyn__ormqr_lwork('L', 'N', m, n, m);
    work = malloc(sizeof(double) * (size_t)lwork);
    ck_assert_int_eq(cdyn__ormqr('L', 'N', m, n, m, QR, m, tau, R, m, work, lwork), 0);
    free(work);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
            ck_assert_double_eq_tol(R[i + j * m], A[i + (jpvt[j] - 1) * m], 1e-14);
}
END_TEST

START_TEST(svd_gives_known_singular_values)
{
    /* A = U diag(3, 2, 0) V^T with U, V built from plane rotations: singular
     * values known exactly; the third is zero (rank 2). */
    double c = cos(0.3), s = sin(0.3), c2 = cos(1.1), s2 = sin(1.1);
    double U[9] = {c, s, 0, -s, c, 0, 0, 0, 1};
    double V[9] = {1, 0, 0, 0, c2, s2, 0, -s2, c2};
    double S[3] = {3, 2, 0}, A[9], US[9];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) US[i + 3 * j] = U[i + 3 * j] * S[j];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double sum = 0;
            for (int k = 0; k < 3; ++k) sum += US[i + 3 * k] * V[j + 3 * k];
            A[i + 3 * j] = sum;
        }
    double sv[3], Uo[9], VT[9];
    int lwork = cdyn__gesvd_lwork(3, 3);
    double *work = malloc(sizeof(double) * (size_t)lwork);
    ck_assert_int_eq(cdyn__gesvd(3, 3, A, 3, sv, Uo, 3, VT, 3, work, lwork), 0);
    free(work);
    ck_assert_double_eq_tol(sv[0], 3.0, 1e-14);
    ck_assert_double_eq_tol(sv[1], 2.0, 1e-14);
    ck_assert_double_le(sv[2], 1e-14);
}
END_TEST

START_TEST(cholesky_and_lu_solve_known_systems)
{
    /* SPD [4 2; 2 3] x = [2; 1]  ->  x = [0.5; 0] */
    double S[4] = {4, 2, 2, 3}, b[2] = {2, 1};
    ck_assert_int_eq(cdyn__potrf(2, S, 2), 0);
    ck_assert_int_eq(cdyn__potrs(2, 1, S, 2, b, 2), 0);
    ck_assert_double_eq_tol(b[0], 0.5, 1e-15);
    ck_assert_double_eq_tol(b[1], 0.0, 1e-15);
    /* indefinite: potrf reports the failing minor */
    double I2[4] = {1, 2, 2, 1};
    ck_assert_int_eq(cdyn__potrf(2, I2, 2), 2);
    /* LU of [0 1; 2 0] (needs pivoting); A^T x = [4; 3] -> x = [3; 2] */
    double A[4] = {0, 2, 1, 0}, x[2] = {4, 3};
    int ipiv[2];
    double anorm = cdyn__norm1(2, 2, A, 2);
    ck_assert_double_eq(anorm, 2.0);
    ck_assert_int_eq(cdyn__getrf(2, A, 2, ipiv), 0);
    ck_assert_int_eq(cdyn__getrs('T', 2, 1, A, 2, ipiv, x, 2), 0);
    ck_assert_double_eq_tol(x[0], 3.0, 1e-15);
    ck_assert_double_eq_tol(x[1], 2.0, 1e-15);
    /* cond_1 of diag(1, 1e-6) is 1e6 exactly */
    double D[4] = {1, 0, 0, 1e-6}, work[8], rcond;
    int iwork[2];
    anorm = cdyn__norm1(2, 2, D, 2);
    ck_assert_int_eq(cdyn__getrf(2, D, 2, ipiv), 0);
    ck_assert_int_eq(cdyn__gecon(2, D, 2, anorm, &rcond, work, iwork), 0);
    ck_assert_double_eq_tol(1.0 / rcond, 1e6, 1e-6);
    /* singular LU reports the zero pivot */
    double Z[4] = {1, 2, 2, 4};
    ck_assert_int_gt(cdyn__getrf(2, Z, 2, ipiv), 0);
}
END_TEST

START_TEST(triangular_solve_inverts_a_known_triangle)
{
    /* L = [2 0; 1 4], L X = [2; 9] -> X = [1; 2] */
    double L[4] = {2, 1, 0, 4}, B[2] = {2, 9};
    cdyn__trsm('L', 'L', 'N', 'N', 2, 1, 1.0, L, 2, B, 2);
    ck_assert_double_eq_tol(B[0], 1.0, 1e-15);
    ck_assert_double_eq_tol(B[1], 2.0, 1e-15);
}
END_TEST

/* ======================================================================== */
/* The small-size kernels (linalg_small.c) against the Fortran routines.     */
/*
 * Each kernel is called side by side with the reference BLAS/LAPACK routine
 * on the same inputs, for every combination of its flag arguments, sizes
 * 0, 1, 2, 5 and CDYN__SMALL, and leading dimensions larger than the row
 * count. Inputs carry NaN wherever the routine must not read (padding rows,
 * the unreferenced triangle, a unit diagonal, C or y when beta = 0, B when
 * alpha = 0): a kernel that reads there gives a NaN and fails. Outputs
 * carry OUT_PAD wherever the routine must not write (padding rows, the
 * other triangle of syrk/potrf, entries past the last column), checked
 * exactly afterwards.
 *
 * Tolerance: two correct summations of the same k products differ by at
 * most about 2 k eps sum |terms| (k <= 16: < 1e-14 of that sum), so the
 * products are compared at 1e-13 of the sum of the magnitudes of their
 * terms. Solves and factorizations are compared at 1e-13 of the largest
 * entry of the result, the data being well conditioned (SPD B B^T + n I,
 * triangles with a dominant diagonal); the exceptions say why.
 */

/* gfortran's hidden CHARACTER lengths, as in src/linalg.c. */
typedef size_t flen;
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *A, const int *lda, const double *B, const int *ldb,
            const double *beta, double *C, const int *ldc, flen, flen);
void dgemv_(const char *t, const int *m, const int *n, const double *alpha, const double *A,
            const int *lda, const double *x, const int *incx, const double *beta, double *y,
            const int *incy, flen);
void dsyrk_(const char *uplo, const char *t, const int *n, const int *k, const double *alpha,
            const double *A, const int *lda, const double *beta, double *C, const int *ldc, flen,
            flen);
void dtrsm_(const char *side, const char *uplo, const char *ta, const char *diag, const int *m,
            const int *n, const double *alpha, const double *A, const int *lda, double *B,
            const int *ldb, flen, flen, flen, flen);
void dpotrf_(const char *uplo, const int *n, double *A, const int *lda, int *info, flen);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *A, const int *lda,
             double *B, const int *ldb, int *info, flen);
void dgetrf_(const int *m, const int *n, double *A, const int *lda, int *ipiv, int *info);
void dgetrs_(const char *t, const int *n, const int *nrhs, const double *A, const int *lda,
             const int *ipiv, double *B, const int *ldb, int *info, flen);
void dgecon_(const char *norm, const int *n, const double *A, const int *lda, const double *anorm,
             double *rcond, double *work, int *iwork, int *info, flen);
void dgeqp3_(const int *m, const int *n, double *A, const int *lda, int *jpvt, double *tau,
             double *work, const int *lwork, int *info);
void dormqr_(const char *side, const char *t, const int *m, const int *n, const int *k,
             const double *A, const int *lda, const double *tau, double *C, const int *ldc,
             double *work, const int *lwork, int *info, flen, flen);
void dsyev_(const char *jobz, const char *uplo, const int *n, double *A, const int *lda, double *w,
            double *work, const int *lwork, int *info, flen, flen);

#define OUT_PAD (-7777.25)               /* marks output memory a routine must not write */
enum { LDX = 72, BUFN = LDX * LDX + 8 }; /* room for 65 x 65 with ld 68, and a tail */

static const int SMALL_SIZES[] = {0, 1, 2, 5, CDYN__SMALL};
#define NSIZES ((int)(sizeof SMALL_SIZES / sizeof SMALL_SIZES[0]))

static int imax(int a, int b) { return a > b ? a : b; }

/* rows x cols random entries at leading dimension ld; fill everywhere else
 * in buf[0..BUFN) (padding rows and the tail). */
static void fill(tu_rng *r, int rows, int cols, double *buf, int ld, double pad)
{
    for (int i = 0; i < BUFN; ++i) buf[i] = pad;
    tu_random(r, rows, cols, buf, ld);
}

/* Every entry of buf outside the rows x cols block (ld) still equals pad. */
static int pad_intact(int rows, int cols, const double *buf, int ld, double pad)
{
    for (int i = 0; i < BUFN; ++i) {
        int col = i / ld, row = i % ld;
        if (col < cols && row < rows) continue;
        if (buf[i] != pad) return 0;
    }
    return 1;
}

static double max_abs_block(int rows, int cols, const double *A, int ld)
{
    return rows > 0 && cols > 0 ? tu_max_abs(rows, cols, A, ld) : 0.0;
}

/* Largest |a - b| over a rows x cols block of two matrices with ld. */
static double max_diff(int rows, int cols, const double *a, const double *b, int ld)
{
    double d = 0.0;
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i) {
            double e = fabs(a[i + (size_t)j * ld] - b[i + (size_t)j * ld]);
            if (!(e <= d)) d = e; /* NaN propagates */
        }
    return d;
}

static int all_finite(int rows, int cols, const double *A, int ld)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
            if (!isfinite(A[i + (size_t)j * ld])) return 0;
    return 1;
}

/* alpha / beta pairs: generic, beta = 0 (C or y pre-filled with NaN), alpha
 * = 0 (A and B not read), both 0, and beta = 1. */
static const double ALPHA_BETA[][2] = {{-1.7, 0.6}, {0.45, 0.0}, {0.0, -1.3},
                                       {0.0, 0.0},  {2.5, 1.0},  {1.0, 0.0}};
#define NAB ((int)(sizeof ALPHA_BETA / sizeof ALPHA_BETA[0]))

START_TEST(small_gemm_matches_dgemm)
{
    static const char tr[2] = {'N', 'T'};
    tu_rng r;
    tu_rng_seed(&r, 101);
    double A[BUFN], B[BUFN], C0[BUFN], Cs[BUFN], Cf[BUFN];
    int cases = 0;
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
            for (int im = 0; im < NSIZES; ++im)
                for (int in = 0; in < NSIZES; ++in)
                    for (int ik = 0; ik < NSIZES; ++ik)
                        for (int ab = 0; ab < NAB; ++ab) {
                            int m = SMALL_SIZES[im], n = SMALL_SIZES[in], k = SMALL_SIZES[ik];
                            double alpha = ALPHA_BETA[ab][0], beta = ALPHA_BETA[ab][1];
                            char a = tr[ta], b = tr[tb];
                            int ar = a == 'N' ? m : k, ac = a == 'N' ? k : m;
                            int br = b == 'N' ? k : n, bc = b == 'N' ? n : k;
                            int lda = imax(ar, 1) + 3, ldb = imax(br, 1) + 2;
                            int ldc = imax(m, 1) + 2;
                            fill(&r, ar, ac, A, lda, NAN);
                            fill(&r, br, bc, B, ldb, NAN);
                            fill(&r, m, n, C0, ldc, OUT_PAD);
                            if (beta == 0.0)
                                for (int j = 0; j < n; ++j)
                                    for (int i = 0; i < m; ++i) C0[i + j * ldc] = NAN;
                            if (alpha == 0.0) { /* BLAS: A and B need not be set */
                                fill(&r, 0, 0, A, lda, NAN);
                                fill(&r, 0, 0, B, ldb, NAN);
                            }
                            memcpy(Cs, C0, sizeof C0);
                            memcpy(Cf, C0, sizeof C0);
                            cdyn__small_gemm(a, b, m, n, k, alpha, A, lda, B, ldb, beta, Cs, ldc);
                            dgemm_(&a, &b, &m, &n, &k, &alpha, A, &lda, B, &ldb, &beta, Cf, &ldc, 1,
                                   1);
                            double scale =
                                (alpha != 0.0 ? fabs(alpha) * k * max_abs_block(ar, ac, A, lda) *
                                                    max_abs_block(br, bc, B, ldb)
                                              : 0.0) +
                                (beta != 0.0 ? fabs(beta) * max_abs_block(m, n, C0, ldc) : 0.0);
                            double d = max_diff(m, n, Cs, Cf, ldc);
                            ck_assert_msg(all_finite(m, n, Cs, ldc) && d <= 1e-13 * scale,
                                          "gemm %c%c m=%d n=%d k=%d alpha=%g beta=%g: "
                                          "|diff| %g, scale %g",
                                          a, b, m, n, k, alpha, beta, d, scale);
                            ck_assert_msg(pad_intact(m, n, Cs, ldc, OUT_PAD),
                                          "gemm %c%c m=%d n=%d k=%d wrote outside C", a, b, m, n,
                                          k);
                            ck_assert(pad_intact(m, n, Cf, ldc, OUT_PAD));
                            ++cases;
                        }
    ck_assert_int_eq(cases, 4 * NSIZES * NSIZES * NSIZES * NAB);
}
END_TEST

START_TEST(small_gemv_matches_dgemv)
{
    /* m = 0 or n = 0 never reaches the kernel: the wrapper defines y = beta
     * y there, where dgemv returns without touching y (checked below). */
    static const int sizes[] = {1, 2, 5, CDYN__SMALL};
    static const char tr[2] = {'N', 'T'};
    const int one = 1;
    tu_rng r;
    tu_rng_seed(&r, 102);
    double A[BUFN], x[BUFN], y0[BUFN], ys[BUFN], yf[BUFN];
    for (int t = 0; t < 2; ++t)
        for (int im = 0; im < 4; ++im)
            for (int in = 0; in < 4; ++in)
                for (int ab = 0; ab < NAB; ++ab) {
                    int m = sizes[im], n = sizes[in], lda = m + 3;
                    char tc = tr[t];
                    double alpha = ALPHA_BETA[ab][0], beta = ALPHA_BETA[ab][1];
                    int xl = tc == 'N' ? n : m, yl = tc == 'N' ? m : n;
                    fill(&r, m, n, A, lda, NAN);
                    fill(&r, xl, 1, x, xl, NAN);
                    fill(&r, yl, 1, y0, yl, OUT_PAD);
                    if (beta == 0.0)
                        for (int i = 0; i < yl; ++i) y0[i] = NAN;
                    if (alpha == 0.0) {
                        fill(&r, 0, 0, A, lda, NAN);
                        fill(&r, 0, 0, x, xl, NAN);
                    }
                    memcpy(ys, y0, sizeof y0);
                    memcpy(yf, y0, sizeof y0);
                    cdyn__small_gemv(tc, m, n, alpha, A, lda, x, beta, ys);
                    dgemv_(&tc, &m, &n, &alpha, A, &lda, x, &one, &beta, yf, &one, 1);
                    double scale = (alpha != 0.0 ? fabs(alpha) * xl * max_abs_block(m, n, A, lda) *
                                                       max_abs_block(xl, 1, x, xl)
                                                 : 0.0) +
                                   (beta != 0.0 ? fabs(beta) * max_abs_block(yl, 1, y0, yl) : 0.0);
                    double d = max_diff(yl, 1, ys, yf, yl);
                    ck_assert_msg(all_finite(yl, 1, ys, yl) && d <= 1e-13 * scale,
                                  "gemv %c m=%d n=%d alpha=%g beta=%g: |diff| %g, scale %g", tc, m,
                                  n, alpha, beta, d, scale);
                    ck_assert(pad_intact(yl, 1, ys, yl, OUT_PAD));
                }
    /* the wrapper at zero sizes: y = beta y over the output length, NaN in y
     * ignored when beta = 0, nothing past it written */
    for (int t = 0; t < 2; ++t)
        for (int ab = 0; ab < NAB; ++ab) {
            char tc = tr[t];
            double beta = ALPHA_BETA[ab][1];
            for (int z = 0; z < 2; ++z) {
                int m = z == 0 ? 0 : 4, n = z == 0 ? 3 : 0, yl = tc == 'N' ? m : n;
                fill(&r, 4, 3, A, 5, NAN);
                fill(&r, yl, 1, y0, imax(yl, 1), OUT_PAD);
                if (beta == 0.0)
                    for (int i = 0; i < yl; ++i) y0[i] = NAN;
                memcpy(ys, y0, sizeof y0);
                cdyn__gemv(tc, m, n, ALPHA_BETA[ab][0], A, 5, A, beta, ys);
                for (int i = 0; i < yl; ++i)
                    ck_assert_double_eq(ys[i], beta == 0.0 ? 0.0 : beta * y0[i]);
                ck_assert(pad_intact(yl, 1, ys, imax(yl, 1), OUT_PAD));
            }
        }
}
END_TEST

START_TEST(small_syrk_matches_dsyrk)
{
    static const char ul[2] = {'L', 'U'}, tr[2] = {'N', 'T'};
    tu_rng r;
    tu_rng_seed(&r, 103);
    double A[BUFN], C0[BUFN], Cs[BUFN], Cf[BUFN];
    for (int u = 0; u < 2; ++u)
        for (int t = 0; t < 2; ++t)
            for (int in = 0; in < NSIZES; ++in)
                for (int ik = 0; ik < NSIZES; ++ik)
                    for (int ab = 0; ab < NAB; ++ab) {
                        int n = SMALL_SIZES[in], k = SMALL_SIZES[ik];
                        char uc = ul[u], tc = tr[t];
                        double alpha = ALPHA_BETA[ab][0], beta = ALPHA_BETA[ab][1];
                        int ar = tc == 'N' ? n : k, ac = tc == 'N' ? k : n;
                        int lda = imax(ar, 1) + 3, ldc = imax(n, 1) + 2;
                        fill(&r, ar, ac, A, lda, NAN);
                        if (alpha == 0.0) fill(&r, 0, 0, A, lda, NAN);
                        /* only the uplo triangle of C is data; the other one
                         * and the padding are OUT_PAD */
                        for (int i = 0; i < BUFN; ++i) C0[i] = OUT_PAD;
                        for (int j = 0; j < n; ++j)
                            for (int i = 0; i < n; ++i)
                                if (uc == 'L' ? i >= j : i <= j)
                                    C0[i + j * ldc] = beta == 0.0 ? NAN : tu_uniform(&r);
                        memcpy(Cs, C0, sizeof C0);
                        memcpy(Cf, C0, sizeof C0);
                        cdyn__small_syrk(uc, tc, n, k, alpha, A, lda, beta, Cs, ldc);
                        dsyrk_(&uc, &tc, &n, &k, &alpha, A, &lda, &beta, Cf, &ldc, 1, 1);
                        double ma = alpha != 0.0 ? max_abs_block(ar, ac, A, lda) : 0.0;
                        double scale = fabs(alpha) * k * ma * ma + fabs(beta) * 1.0;
                        for (int j = 0; j < n; ++j)
                            for (int i = 0; i < n; ++i) {
                                size_t at = (size_t)i + (size_t)j * ldc;
                                if (uc == 'L' ? i >= j : i <= j) {
                                    ck_assert_msg(isfinite(Cs[at]) &&
                                                      fabs(Cs[at] - Cf[at]) <= 1e-13 * scale,
                                                  "syrk %c%c n=%d k=%d alpha=%g beta=%g (%d,%d): "
                                                  "%.17g vs %.17g",
                                                  uc, tc, n, k, alpha, beta, i, j, Cs[at], Cf[at]);
                                } else {
                                    ck_assert_msg(Cs[at] == OUT_PAD,
                                                  "syrk %c%c n=%d k=%d wrote the other "
                                                  "triangle at (%d,%d)",
                                                  uc, tc, n, k, i, j);
                                    ck_assert(Cf[at] == OUT_PAD);
                                }
                            }
                        ck_assert(pad_intact(n, n, Cs, ldc, OUT_PAD));
                    }
}
END_TEST

/* A dim x dim triangle (uplo) at ld: off-diagonal entries uniform in
 * [-0.5, 0.5], diagonal in [1.5, 2.5] (NaN for a unit diagonal, which must
 * not be read), NaN in the other triangle and the padding. Such triangles
 * stay well conditioned at dim <= 20 (forward errors near eps). */
static void fill_triangle(tu_rng *r, int dim, char uplo, char diag, double *A, int ld)
{
    for (int i = 0; i < BUFN; ++i) A[i] = NAN;
    for (int j = 0; j < dim; ++j)
        for (int i = 0; i < dim; ++i) {
            if (i == j)
                A[i + j * ld] = diag == 'U' ? NAN : 2.0 + 0.5 * tu_uniform(r);
            else if (uplo == 'L' ? i > j : i < j)
                A[i + j * ld] = 0.5 * tu_uniform(r);
        }
}

START_TEST(small_trsm_matches_dtrsm)
{
    static const char sd[2] = {'L', 'R'}, ul[2] = {'L', 'U'}, tr[2] = {'N', 'T'},
                      dg[2] = {'N', 'U'};
    static const double alphas[] = {1.0, -0.8, 2.3};
    tu_rng r;
    tu_rng_seed(&r, 104);
    double A[BUFN], B0[BUFN], Bs[BUFN], Bf[BUFN];
    for (int s = 0; s < 2; ++s)
        for (int u = 0; u < 2; ++u)
            for (int t = 0; t < 2; ++t)
                for (int g = 0; g < 2; ++g)
                    for (int im = 0; im < NSIZES; ++im)
                        for (int in = 0; in < NSIZES; ++in)
                            for (int ia = 0; ia < 3; ++ia) {
                                int m = SMALL_SIZES[im], n = SMALL_SIZES[in];
                                char sc = sd[s], uc = ul[u], tc = tr[t], dc = dg[g];
                                double alpha = alphas[ia];
                                int dim = sc == 'L' ? m : n, lda = imax(dim, 1) + 3;
                                int ldb = imax(m, 1) + 2;
                                fill_triangle(&r, dim, uc, dc, A, lda);
                                fill(&r, m, n, B0, ldb, OUT_PAD);
                                memcpy(Bs, B0, sizeof B0);
                                memcpy(Bf, B0, sizeof B0);
                                cdyn__small_trsm(sc, uc, tc, dc, m, n, alpha, A, lda, Bs, ldb);
                                dtrsm_(&sc, &uc, &tc, &dc, &m, &n, &alpha, A, &lda, Bf, &ldb, 1, 1,
                                       1, 1);
                                double scale = max_abs_block(m, n, Bf, ldb);
                                double d = max_diff(m, n, Bs, Bf, ldb);
                                ck_assert_msg(all_finite(m, n, Bs, ldb) && d <= 1e-13 * scale,
                                              "trsm %c%c%c%c m=%d n=%d alpha=%g: |diff| %g, "
                                              "max|X| %g",
                                              sc, uc, tc, dc, m, n, alpha, d, scale);
                                ck_assert(pad_intact(m, n, Bs, ldb, OUT_PAD));
                            }
}
END_TEST

START_TEST(small_trsm_with_zero_alpha_does_not_read_b)
{
    /* BLAS: "When alpha is zero then A is not referenced and B need not be
     * set before entry": X = 0 whatever B held. */
    static const char sd[2] = {'L', 'R'};
    tu_rng r;
    tu_rng_seed(&r, 105);
    double A[BUFN], Bs[BUFN], Bf[BUFN];
    const double zero = 0.0;
    for (int s = 0; s < 2; ++s) {
        int m = 5, n = 3, dim = s == 0 ? m : n, lda = dim + 3, ldb = m + 2;
        char sc = sd[s];
        fill_triangle(&r, dim, 'L', 'N', A, lda);
        fill(&r, m, n, Bs, ldb, OUT_PAD);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) Bs[i + j * ldb] = NAN;
        memcpy(Bf, Bs, sizeof Bs);
        dtrsm_(&sc, "L", "N", "N", &m, &n, &zero, A, &lda, Bf, &ldb, 1, 1, 1, 1);
        cdyn__small_trsm(sc, 'L', 'N', 'N', m, n, 0.0, A, lda, Bs, ldb);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                ck_assert_double_eq(Bf[i + j * ldb], 0.0);
                ck_assert_msg(Bs[i + j * ldb] == 0.0,
                              "trsm side %c alpha = 0: X(%d,%d) = %g (B was NaN), dtrsm gives 0",
                              sc, i, j, Bs[i + j * ldb]);
            }
    }
}
END_TEST

/* Random SPD (B B^T + n I) in the lower triangle at ld, OUT_PAD in the
 * strict upper triangle and the padding (dpotrf 'L' reads and writes only
 * the lower triangle). */
static void fill_spd_lower(tu_rng *r, int n, double *A, int ld)
{
    double full[LDX * LDX];
    if (n > 0) tu_random_spd(r, n, full, n);
    for (int i = 0; i < BUFN; ++i) A[i] = OUT_PAD;
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) A[i + j * ld] = full[i + j * n];
}

static int lower_and_pad_only(int n, const double *A, const double *A0, int ld)
{
    for (int i = 0; i < BUFN; ++i) {
        int col = i / ld, row = i % ld;
        if (col < n && row < n && row >= col) continue;
        if (A[i] != A0[i]) return 0;
    }
    return 1;
}

START_TEST(small_potrf_matches_dpotrf)
{
    tu_rng r;
    tu_rng_seed(&r, 106);
    double A0[BUFN], As[BUFN], Af[BUFN];
    for (int is = 0; is < NSIZES; ++is)
        for (int rep = 0; rep < 3; ++rep) {
            int n = SMALL_SIZES[is], ld = imax(n, 1) + 3, info_f = -1;
            fill_spd_lower(&r, n, A0, ld);
            memcpy(As, A0, sizeof A0);
            memcpy(Af, A0, sizeof A0);
            int info_s = cdyn__small_potrf(n, As, ld);
            dpotrf_("L", &n, Af, &ld, &info_f, 1);
            ck_assert_int_eq(info_f, 0);
            ck_assert_int_eq(info_s, 0);
            double scale = 0.0, d = 0.0;
            for (int j = 0; j < n; ++j)
                for (int i = j; i < n; ++i) {
                    scale = fmax(scale, fabs(Af[i + j * ld]));
                    d = fmax(d, fabs(As[i + j * ld] - Af[i + j * ld]));
                }
            ck_assert_msg(d <= 1e-13 * scale, "potrf n=%d: |diff| %g, max|L| %g", n, d, scale);
            ck_assert_msg(lower_and_pad_only(n, As, A0, ld),
                          "potrf n=%d wrote outside the lower triangle", n);
        }
}
END_TEST

START_TEST(small_potrf_reports_the_failing_minor_as_dpotrf)
{
    tu_rng r;
    tu_rng_seed(&r, 107);
    double A0[BUFN], As[BUFN], Af[BUFN];
    static const int sizes[] = {1, 2, 5, CDYN__SMALL};
    for (int is = 0; is < 4; ++is) {
        int n = sizes[is], ld = n + 3;
        for (int kind = 0; kind < 4; ++kind)
            for (int at = 0; at < n; at += (n > 4 ? n / 4 : 1)) {
                fill_spd_lower(&r, n, A0, ld);
                if (kind == 0)
                    A0[at + at * ld] = -0.5; /* negative pivot at 'at' */
                else if (kind == 1)
                    A0[at + at * ld] = NAN; /* NaN on the diagonal */
                else if (kind == 2)
                    A0[at + at * ld] = 0.0; /* zero diagonal: indefinite */
                else                        /* random symmetric, indefinite in general */
                    for (int j = 0; j < n; ++j)
                        for (int i = j; i < n; ++i) A0[i + j * ld] = tu_uniform(&r);
                memcpy(As, A0, sizeof A0);
                memcpy(Af, A0, sizeof A0);
                int info_f = -1, info_s = cdyn__small_potrf(n, As, ld);
                dpotrf_("L", &n, Af, &ld, &info_f, 1);
                /* a NaN pivot: reference LAPACK (dpotrf2's DISNAN) reports it,
                 * OpenBLAS's own potrf does not (info 0 with NaN in L): only
                 * the kernel's info is checked, and must be > 0 */
                ck_assert_msg(info_s == info_f || (kind == 1 && info_f == 0),
                              "potrf n=%d kind %d at %d: info %d, dpotrf info %d", n, kind, at,
                              info_s, info_f);
                if (kind < 3) ck_assert_int_gt(info_s, 0);
                if (kind == 1) ck_assert_int_le(info_s, at + 1);
            }
    }
}
END_TEST

START_TEST(small_potrs_matches_dpotrs)
{
    static const int nrhs_sizes[] = {0, 1, 3, CDYN__SMALL};
    tu_rng r;
    tu_rng_seed(&r, 108);
    double L[BUFN], B0[BUFN], Bs[BUFN], Bf[BUFN];
    for (int is = 0; is < NSIZES; ++is)
        for (int ir = 0; ir < 4; ++ir) {
            int n = SMALL_SIZES[is], nrhs = nrhs_sizes[ir], ldl = imax(n, 1) + 3;
            int ldb = imax(n, 1) + 2, info = -1;
            fill_spd_lower(&r, n, L, ldl);
            dpotrf_("L", &n, L, &ldl, &info, 1);
            ck_assert_int_eq(info, 0);
            /* the strict upper triangle and padding of L must not be read */
            for (int i = 0; i < BUFN; ++i) {
                int col = i / ldl, row = i % ldl;
                if (!(col < n && row < n && row >= col)) L[i] = NAN;
            }
            fill(&r, n, nrhs, B0, ldb, OUT_PAD);
            memcpy(Bs, B0, sizeof B0);
            memcpy(Bf, B0, sizeof B0);
            cdyn__small_potrs(n, nrhs, L, ldl, Bs, ldb);
            dpotrs_("L", &n, &nrhs, L, &ldl, Bf, &ldb, &info, 1);
            ck_assert_int_eq(info, 0);
            double scale = max_abs_block(n, nrhs, Bf, ldb), d = max_diff(n, nrhs, Bs, Bf, ldb);
            ck_assert_msg(all_finite(n, nrhs, Bs, ldb) && d <= 1e-13 * scale,
                          "potrs n=%d nrhs=%d: |diff| %g, max|X| %g", n, nrhs, d, scale);
            ck_assert(pad_intact(n, nrhs, Bs, ldb, OUT_PAD));
        }
}
END_TEST

/* A = Q diag(lambda) Q^T (n x n, ld n) with Q a product of n random
 * Householder reflectors. */
static void spd_with_spectrum(tu_rng *r, int n, const double *lambda, double *A)
{
    double Q[LDX * LDX], v[LDX], Qv[LDX];
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) Q[i + j * n] = i == j;
    for (int h = 0; h < n; ++h) {
        double vv = 0.0;
        for (int i = 0; i < n; ++i) {
            v[i] = tu_uniform(r);
            vv += v[i] * v[i];
        }
        for (int i = 0; i < n; ++i) {
            Qv[i] = 0.0;
            for (int l = 0; l < n; ++l) Qv[i] += Q[i + l * n] * v[l];
        }
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) Q[i + j * n] -= 2.0 * Qv[i] * v[j] / vv;
    }
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            double s = 0.0;
            for (int l = 0; l < n; ++l) s += Q[i + l * n] * lambda[l] * Q[j + l * n];
            A[i + j * n] = s;
        }
    for (int j = 0; j < n; ++j) /* exactly symmetric */
        for (int i = j + 1; i < n; ++i) A[j + i * n] = A[i + j * n];
}

/* Exact 2-norm condition number of the SPD n x n A from its eigenvalues. */
static double exact_cond2(int n, const double *A)
{
    double W[LDX * LDX], w[LDX], work[64 * LDX];
    int lwork = 64 * LDX, info = -1;
    memcpy(W, A, sizeof(double) * (size_t)n * n);
    dsyev_("N", "L", &n, W, &n, w, work, &lwork, &info, 1, 1);
    ck_assert_int_eq(info, 0);
    ck_assert_double_gt(w[0], 0.0);
    return w[n - 1] / w[0];
}

START_TEST(small_spd_cond_bounds_the_2_norm_condition)
{
    /* cond_2(A) <= tr(A) tr(A^{-1}) holds exactly (tr(A) >= lambda_max,
     * tr(A^{-1}) >= 1/lambda_min). The upper side is NOT "n times" as
     * linalg.h says: tr(A) tr(A^{-1}) = n^2 for A = I (checked exactly at the
     * end), and by the Kantorovich inequality its largest value for a given
     * cond_2 = kappa is n^2 (kappa + 1)^2 / (4 kappa) <= n^2 kappa, reached
     * by two clusters of n/2 eigenvalues at the ends of the spectrum. That
     * is the upper bound checked here; the over-estimate only makes the
     * caller (the Schur-Cholesky test of constraint.c) more cautious.
     *
     * Tolerance: the kernel's tr(A^{-1}) from the computed Cholesky factor
     * and dsyev's lambda_min both carry relative errors of order n kappa eps
     * (<= 16 * 1e8 * 2.2e-16 ~ 4e-7), so the bounds are checked with that
     * slack times 8. */
    static const int sizes[] = {1, 2, 3, 5, 8, CDYN__SMALL};
    static const double kappas[] = {1.0, 10.0, 1e3, 1e5, 1e8};
    tu_rng r;
    tu_rng_seed(&r, 109);
    double A[LDX * LDX], L[BUFN], lambda[LDX], work[LDX];
    for (int is = 0; is < 6; ++is)
        for (int ik = 0; ik < 5; ++ik)
            for (int shape = 0; shape < 3; ++shape) {
                int n = sizes[is], ld = n + 2, info = -1;
                double kappa = kappas[ik];
                if (shape == 2 && n < 2) continue;
                for (int i = 0; i < n; ++i) {
                    if (shape == 0) /* geometric spread from 1 down to 1/kappa */
                        lambda[i] = n == 1 ? 1.0 : pow(kappa, -(double)i / (n - 1));
                    else if (shape == 1) /* geometric with random exponents */
                        lambda[i] = i == 0       ? 1.0
                                    : i == n - 1 ? 1.0 / kappa
                                                 : pow(kappa, -0.5 * (1.0 + tu_uniform(&r)));
                    else /* two clusters at the ends */
                        lambda[i] = i < n / 2 ? 1.0 : 1.0 / kappa;
                }
                if (n == 1) lambda[0] = 3.0;
                spd_with_spectrum(&r, n, lambda, A);
                double c2 = exact_cond2(n, A);
                for (int i = 0; i < BUFN; ++i) L[i] = OUT_PAD;
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < n; ++i) L[i + j * ld] = A[i + j * n];
                dpotrf_("L", &n, L, &ld, &info, 1);
                ck_assert_int_eq(info, 0);
                for (int j = 0; j < n; ++j) /* the kernel reads only the lower triangle */
                    for (int i = 0; i < j; ++i) L[i + j * ld] = NAN;
                double est = cdyn__small_spd_cond(n, L, ld, work);
                double slack = 8.0 * n * c2 * 2.2e-16;
                ck_assert_msg(est >= c2 * (1.0 - slack),
                              "spd_cond n=%d kappa=%g shape %d: %.17g < cond_2 %.17g", n, kappa,
                              shape, est, c2);
                double kant = n * n * (c2 + 1.0) * (c2 + 1.0) / (4.0 * c2);
                ck_assert_msg(est <= kant * (1.0 + slack),
                              "spd_cond n=%d kappa=%g shape %d: %.17g > n^2 (k+1)^2/(4k) = %.17g",
                              n, kappa, shape, est, kant);
            }
    /* the random SPD matrices of the other tests (B B^T + n I) too */
    for (int is = 0; is < 6; ++is) {
        int n = sizes[is], info = -1;
        tu_random_spd(&r, n, A, n);
        double c2 = exact_cond2(n, A);
        memcpy(L, A, sizeof(double) * (size_t)n * n);
        dpotrf_("L", &n, L, &n, &info, 1);
        ck_assert_int_eq(info, 0);
        double est = cdyn__small_spd_cond(n, L, n, work);
        ck_assert_double_ge(est, c2 * (1.0 - 1e-12));
        ck_assert_double_le(est, n * n * c2 * (1.0 + 1e-12));
    }
    /* A = I: tr(A) tr(A^{-1}) = n^2 exactly, n times cond_2 = 1 */
    for (int i = 0; i < BUFN; ++i) L[i] = 0.0;
    for (int i = 0; i < CDYN__SMALL; ++i) L[i + i * CDYN__SMALL] = 1.0;
    ck_assert_double_eq(cdyn__small_spd_cond(CDYN__SMALL, L, CDYN__SMALL, work),
                        (double)CDYN__SMALL * CDYN__SMALL);
    /* n = 1: exactly 1 for any non-zero finite pivot; 0, Inf, NaN singular */
    const double pivots[4] = {3.0e-200, 7.5e150, 0.0, NAN};
    for (int k = 0; k < 4; ++k) {
        L[0] = pivots[k];
        ck_assert_double_eq(cdyn__small_spd_cond(1, L, 1, work), k < 2 ? 1.0 : INFINITY);
    }
}
END_TEST

/* ---- LU: getrf, getrs, gecon ------------------------------------------ */

/* Exact ||A^{-1}||_1 of the n x n A (ld) through LAPACK: A^{-1} by dgetrf +
 * dgetrs on the identity. */
static double inverse_norm1(int n, const double *A, int ld)
{
    double LU[BUFN], X[LDX * LDX];
    int ipiv[LDX], info = -1;
    memcpy(LU, A, sizeof LU);
    dgetrf_(&n, &n, LU, &ld, ipiv, &info);
    ck_assert_int_eq(info, 0);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) X[i + j * n] = i == j;
    dgetrs_("N", &n, &n, LU, &ld, ipiv, X, &n, &info, 1);
    ck_assert_int_eq(info, 0);
    double best = 0.0;
    for (int j = 0; j < n; ++j) {
        double s = 0.0;
        for (int i = 0; i < n; ++i) s += fabs(X[i + j * n]);
        best = fmax(best, s);
    }
    return best;
}

START_TEST(small_getrf_matches_dgetrf)
{
    /* Uniform random matrices: partial pivoting keeps the multipliers <= 1
     * and the growth small at n <= 16, so the factors of the two orders of
     * elimination agree to 1e-13 of max |A| (max |A| <= 1). Singular cases
     * with exact zeros (a zero column, a zero matrix) must report the same
     * info and the same factors as dgetrf. */
    tu_rng r;
    tu_rng_seed(&r, 111);
    double A0[BUFN], As[BUFN], Af[BUFN];
    int ps[LDX], pf[LDX];
    for (int is = 0; is < NSIZES; ++is)
        for (int kind = 0; kind < 4; ++kind)
            for (int rep = 0; rep < 2; ++rep) {
                int n = SMALL_SIZES[is], ld = imax(n, 1) + 3, info_f = -1;
                if (kind > 0 && n == 0) continue;
                fill(&r, n, n, A0, ld, OUT_PAD);
                int zc = kind == 1 ? 0 : kind == 2 ? n - 1 : n / 2;
                if (kind == 1 || kind == 2 || kind == 3) /* a zero column */
                    for (int i = 0; i < n; ++i) A0[i + zc * ld] = 0.0;
                if (kind == 3 && rep == 1) /* all zero */
                    for (int j = 0; j < n; ++j)
                        for (int i = 0; i < n; ++i) A0[i + j * ld] = 0.0;
                memcpy(As, A0, sizeof A0);
                memcpy(Af, A0, sizeof A0);
                for (int i = 0; i < LDX; ++i) ps[i] = pf[i] = -7;
                int info_s = cdyn__small_getrf(n, As, ld, ps);
                dgetrf_(&n, &n, Af, &ld, pf, &info_f);
                ck_assert_msg(info_s == info_f, "getrf n=%d kind %d: info %d, dgetrf %d", n, kind,
                              info_s, info_f);
                if (kind > 0) ck_assert_int_gt(info_s, 0);
                for (int i = 0; i < LDX; ++i)
                    ck_assert_msg(ps[i] == pf[i], "getrf n=%d kind %d: ipiv[%d] %d, dgetrf %d", n,
                                  kind, i, ps[i], pf[i]);
                double d = max_diff(n, n, As, Af, ld);
                ck_assert_msg(d <= 1e-13, "getrf n=%d kind %d: |diff| %g", n, kind, d);
                ck_assert(pad_intact(n, n, As, ld, OUT_PAD));
            }
}
END_TEST

START_TEST(small_getrs_matches_dgetrs)
{
    /* Both solve with the same factors (from dgetrf); the results differ by
     * rounding amplified by the condition number: compared at 1e-13 *
     * cond_1(A) of max |X| (cond_1 computed exactly). */
    static const char tr[2] = {'N', 'T'};
    static const int nrhs_sizes[] = {0, 1, 3, CDYN__SMALL};
    tu_rng r;
    tu_rng_seed(&r, 112);
    double A[BUFN], LU[BUFN], B0[BUFN], Bs[BUFN], Bf[BUFN];
    int ipiv[LDX];
    for (int t = 0; t < 2; ++t)
        for (int is = 0; is < NSIZES; ++is)
            for (int ir = 0; ir < 4; ++ir) {
                int n = SMALL_SIZES[is], nrhs = nrhs_sizes[ir], ld = imax(n, 1) + 3;
                int ldb = imax(n, 1) + 2, info = -1;
                char tc = tr[t];
                fill(&r, n, n, A, ld, NAN);
                memcpy(LU, A, sizeof A);
                dgetrf_(&n, &n, LU, &ld, ipiv, &info);
                ck_assert_int_eq(info, 0);
                double cond = n > 0 ? cdyn__norm1(n, n, A, ld) * inverse_norm1(n, A, ld) : 1.0;
                fill(&r, n, nrhs, B0, ldb, OUT_PAD);
                memcpy(Bs, B0, sizeof B0);
                memcpy(Bf, B0, sizeof B0);
                cdyn__small_getrs(tc, n, nrhs, LU, ld, ipiv, Bs, ldb);
                if (n > 0 && nrhs > 0) /* the wrapper does not call dgetrs for empty sizes */
                    dgetrs_(&tc, &n, &nrhs, LU, &ld, ipiv, Bf, &ldb, &info, 1);
                ck_assert_int_eq(info, 0);
                double scale = max_abs_block(n, nrhs, Bf, ldb), d = max_diff(n, nrhs, Bs, Bf, ldb);
                ck_assert_msg(all_finite(n, nrhs, Bs, ldb) && d <= 1e-13 * cond * scale,
                              "getrs %c n=%d nrhs=%d: |diff| %g, max|X| %g, cond %g", tc, n, nrhs,
                              d, scale, cond);
                ck_assert(pad_intact(n, nrhs, Bs, ldb, OUT_PAD));
            }
}
END_TEST

START_TEST(small_gecon_is_the_exact_reciprocal_condition)
{
    /* linalg.h: exact for n <= CDYN__SMALL, i.e. 1 / (||A||_1 ||A^{-1}||_1).
     * The reference inverse (dgetrs on I) and the kernel's differ by
     * rounding times cond: compared at 1e-13 * cond relative. dgecon's
     * estimate of ||A^{-1}||_1 is a lower bound, so its rcond is never
     * below the exact one. */
    tu_rng r;
    tu_rng_seed(&r, 113);
    double A[BUFN], LU[BUFN], work[4 * LDX];
    int ipiv[LDX], iwork[LDX];
    for (int is = 1; is < NSIZES; ++is)
        for (int rep = 0; rep < 4; ++rep) {
            int n = SMALL_SIZES[is], ld = n + 3, info = -1;
            fill(&r, n, n, A, ld, NAN);
            if (rep == 3) /* badly scaled rows: cond ~ 1e6 and more */
                for (int j = 0; j < n; ++j) A[(n - 1) + j * ld] *= 1e-6;
            memcpy(LU, A, sizeof A);
            dgetrf_(&n, &n, LU, &ld, ipiv, &info);
            ck_assert_int_eq(info, 0);
            double anorm = cdyn__norm1(n, n, A, ld);
            double exact = 1.0 / (anorm * inverse_norm1(n, A, ld)), cond = 1.0 / exact;
            double rs = cdyn__small_gecon(n, LU, ld, anorm, work), rf = -1.0;
            dgecon_("1", &n, LU, &ld, &anorm, &rf, work, iwork, &info, 1);
            ck_assert_int_eq(info, 0);
            ck_assert_msg(fabs(rs - exact) <= 1e-13 * cond * exact,
                          "gecon n=%d rep %d: %.17g, exact %.17g", n, rep, rs, exact);
            ck_assert_msg(rs <= rf * (1.0 + 1e-12), "gecon n=%d: %.17g above dgecon's %.17g", n, rs,
                          rf);
        }
    /* n = 0: rcond 1 as dgecon; anorm = 0 or a zero pivot: 0 */
    ck_assert_double_eq(cdyn__small_gecon(0, A, 1, 1.0, work), 1.0);
    double Z[4] = {1.0, 2.0, 0.0, 0.0}; /* LU with U(1,1) = 0 */
    ck_assert_double_eq(cdyn__small_gecon(2, Z, 2, 3.0, work), 0.0);
    double I2[4] = {1.0, 0.0, 0.0, 1.0};
    ck_assert_double_eq(cdyn__small_gecon(2, I2, 2, 0.0, work), 0.0);
    ck_assert_double_eq(cdyn__small_gecon(2, I2, 2, 1.0, work), 1.0);
}
END_TEST

/* ---- the dispatch boundary: the wrappers take the kernels at <= 16 and the
 * Fortran routines above; each result must be bit-identical to the routine
 * the wrapper is meant to call. ---- */

static int same_bits(int rows, int cols, const double *a, int lda, const double *b, int ldb)
{
    for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
            if (memcmp(&a[i + (size_t)j * lda], &b[i + (size_t)j * ldb], sizeof(double)) != 0)
                return 0;
    return 1;
}

START_TEST(wrappers_dispatch_at_the_small_boundary)
{
    static const int dims[][3] = {{16, 16, 16}, {17, 16, 16}, {16, 17, 16}, {16, 16, 17},
                                  {20, 20, 20}, {3, 3, 20},   {20, 2, 3},
                                  /* one vector: trsm's B is 1 x n, getrs has nrhs = 1 */
                                  {1, 32, 32},  {1, 33, 33},  {32, 32, 1},  {33, 33, 1}};
    const int nd = (int)(sizeof dims / sizeof dims[0]), one = 1;
    tu_rng r;
    tu_rng_seed(&r, 110);
    double A[BUFN], B[BUFN], Bw[BUFN], Bk[BUFN], C0[BUFN], Cw[BUFN], Cr[BUFN];
    for (int c = 0; c < nd; ++c) {
        int m = dims[c][0], n = dims[c][1], k = dims[c][2];
        const double alpha = -1.3, beta = 0.7;
        /* gemm (T, N): A k x m, B k x n */
        int small = m <= CDYN__SMALL && n <= CDYN__SMALL && k <= CDYN__SMALL;
        int lda = k + 1, ldb = k + 2, ldc = m + 1;
        fill(&r, k, m, A, lda, NAN);
        fill(&r, k, n, B, ldb, NAN);
        fill(&r, m, n, C0, ldc, OUT_PAD);
        memcpy(Cw, C0, sizeof C0);
        memcpy(Cr, C0, sizeof C0);
        cdyn__gemm('T', 'N', m, n, k, alpha, A, lda, B, ldb, beta, Cw, ldc);
        if (small)
            cdyn__small_gemm('T', 'N', m, n, k, alpha, A, lda, B, ldb, beta, Cr, ldc);
        else
            dgemm_("T", "N", &m, &n, &k, &alpha, A, &lda, B, &ldb, &beta, Cr, &ldc, 1, 1);
        ck_assert_msg(same_bits(m, n, Cw, ldc, Cr, ldc), "gemm %dx%dx%d: not the %s path", m, n, k,
                      small ? "kernel" : "dgemm");
        ck_assert(pad_intact(m, n, Cw, ldc, OUT_PAD));
        /* gemv (N): A m x n */
        small = m <= CDYN__SMALL && n <= CDYN__SMALL;
        fill(&r, m, n, A, m + 1, NAN);
        fill(&r, n, 1, B, n, NAN);
        fill(&r, m, 1, C0, m, OUT_PAD);
        memcpy(Cw, C0, sizeof C0);
        memcpy(Cr, C0, sizeof C0);
        cdyn__gemv('N', m, n, alpha, A, m + 1, B, beta, Cw);
        int lda2 = m + 1;
        if (small)
            cdyn__small_gemv('N', m, n, alpha, A, lda2, B, beta, Cr);
        else
            dgemv_("N", &m, &n, &alpha, A, &lda2, B, &one, &beta, Cr, &one, 1);
        ck_assert_msg(same_bits(m, 1, Cw, m, Cr, m), "gemv %dx%d: not the %s path", m, n,
                      small ? "kernel" : "dgemv");
        /* syrk (L, N): A n x k */
        small = n <= CDYN__SMALL && k <= CDYN__SMALL;
        fill(&r, n, k, A, n + 1, NAN);
        fill(&r, n, n, C0, n + 1, OUT_PAD);
        memcpy(Cw, C0, sizeof C0);
        memcpy(Cr, C0, sizeof C0);
        int lda3 = n + 1, ldc3 = n + 1;
        cdyn__syrk('L', 'N', n, k, alpha, A, lda3, beta, Cw, ldc3);
        if (small)
            cdyn__small_syrk('L', 'N', n, k, alpha, A, lda3, beta, Cr, ldc3);
        else
            dsyrk_("L", "N", &n, &k, &alpha, A, &lda3, &beta, Cr, &ldc3, 1, 1);
        ck_assert_msg(same_bits(n, n, Cw, ldc3, Cr, ldc3), "syrk n=%d k=%d: not the %s path", n, k,
                      small ? "kernel" : "dsyrk");
        /* trsm (R, U, T, N): B m x n, A n x n; one row of B is one vector */
        small = (m <= CDYN__SMALL && n <= CDYN__SMALL) || (m == 1 && n <= CDYN__SMALL_VECTOR);
        int lda4 = n + 2, ldb4 = m + 1;
        fill_triangle(&r, n, 'U', 'N', A, lda4);
        fill(&r, m, n, Bw, ldb4, OUT_PAD);
        memcpy(Bk, Bw, sizeof Bw);
        cdyn__trsm('R', 'U', 'T', 'N', m, n, alpha, A, lda4, Bw, ldb4);
        if (small)
            cdyn__small_trsm('R', 'U', 'T', 'N', m, n, alpha, A, lda4, Bk, ldb4);
        else
            dtrsm_("R", "U", "T", "N", &m, &n, &alpha, A, &lda4, Bk, &ldb4, 1, 1, 1, 1);
        ck_assert_msg(same_bits(m, n, Bw, ldb4, Bk, ldb4), "trsm %dx%d: not the %s path", m, n,
                      small ? "kernel" : "dtrsm");
        /* potrf n = m, potrs nrhs = k, spd_cond */
        int nn = m, nrhs = k, ld5 = nn + 1, info = -1;
        small = nn <= CDYN__SMALL;
        double A0[BUFN];
        fill_spd_lower(&r, nn, A0, ld5); /* lower triangle only */
        memcpy(Cw, A0, sizeof A0);
        memcpy(Cr, A0, sizeof A0);
        ck_assert_int_eq(cdyn__potrf(nn, Cw, ld5), 0);
        if (small)
            info = cdyn__small_potrf(nn, Cr, ld5);
        else
            dpotrf_("L", &nn, Cr, &ld5, &info, 1);
        ck_assert_int_eq(info, 0);
        ck_assert_msg(same_bits(nn, nn, Cw, ld5, Cr, ld5), "potrf n=%d: not the %s path", nn,
                      small ? "kernel" : "dpotrf");
        small = nn <= CDYN__SMALL && nrhs <= CDYN__SMALL;
        fill(&r, nn, nrhs, Bw, ld5, OUT_PAD);
        memcpy(Bk, Bw, sizeof Bw);
        ck_assert_int_eq(cdyn__potrs(nn, nrhs, Cw, ld5, Bw, ld5), 0);
        if (small)
            cdyn__small_potrs(nn, nrhs, Cw, ld5, Bk, ld5);
        else
            dpotrs_("L", &nn, &nrhs, Cw, &ld5, Bk, &ld5, &info, 1);
        ck_assert_msg(same_bits(nn, nrhs, Bw, ld5, Bk, ld5), "potrs n=%d nrhs=%d: not the %s path",
                      nn, nrhs, small ? "kernel" : "dpotrs");
        double work[4 * LDX], work2[4 * LDX];
        int iwork[LDX];
        /* getrf, getrs (T), gecon on a general n x n matrix */
        small = nn <= CDYN__SMALL;
        int ipw[LDX], ipr[LDX];
        fill(&r, nn, nn, Cw, ld5, OUT_PAD);
        memcpy(Cr, Cw, sizeof Cw);
        double gnorm = cdyn__norm1(nn, nn, Cw, ld5);
        ck_assert_int_eq(cdyn__getrf(nn, Cw, ld5, ipw), 0);
        if (small)
            info = cdyn__small_getrf(nn, Cr, ld5, ipr);
        else
            dgetrf_(&nn, &nn, Cr, &ld5, ipr, &info);
        ck_assert_int_eq(info, 0);
        ck_assert_msg(same_bits(nn, nn, Cw, ld5, Cr, ld5) &&
                          memcmp(ipw, ipr, sizeof(int) * nn) == 0,
                      "getrf n=%d: not the %s path", nn, small ? "kernel" : "dgetrf");
        small = (nn <= CDYN__SMALL && nrhs <= CDYN__SMALL) ||
                (nrhs == 1 && nn <= CDYN__SMALL_VECTOR);
        fill(&r, nn, nrhs, Bw, ld5, OUT_PAD);
        memcpy(Bk, Bw, sizeof Bw);
        ck_assert_int_eq(cdyn__getrs('T', nn, nrhs, Cw, ld5, ipw, Bw, ld5), 0);
        if (small)
            cdyn__small_getrs('T', nn, nrhs, Cw, ld5, ipw, Bk, ld5);
        else
            dgetrs_("T", &nn, &nrhs, Cw, &ld5, ipw, Bk, &ld5, &info, 1);
        ck_assert_msg(same_bits(nn, nrhs, Bw, ld5, Bk, ld5), "getrs n=%d nrhs=%d: not the %s path",
                      nn, nrhs, small ? "kernel" : "dgetrs");
        double rw = -1.0, rr = -2.0;
        ck_assert_int_eq(cdyn__gecon(nn, Cw, ld5, gnorm, &rw, work, iwork), 0);
        if (nn <= CDYN__SMALL) {
            rr = cdyn__small_gecon(nn, Cw, ld5, gnorm, work2);
        } else {
            double work4[4 * LDX];
            dgecon_("1", &nn, Cw, &ld5, &gnorm, &rr, work4, iwork, &info, 1);
            ck_assert_int_eq(info, 0);
        }
        ck_assert_msg(memcmp(&rw, &rr, sizeof rw) == 0, "gecon n=%d: %.17g vs %.17g (%s)", nn, rw,
                      rr, nn <= CDYN__SMALL ? "kernel" : "dgecon");
    }
}
END_TEST

/* The small pivoted QR against dgeqp3 on the same data: R, the Householder
 * vectors, tau and the pivots agree (random data: no ties between column
 * norms), with columns flagged to lead, at shapes up to 64 x 64 with
 * padded leading dimensions; nothing outside the m x n block is written.
 * On a rank-deficient matrix the first pivots agree and the trailing
 * diagonal is at rounding level in both. */
static void qr_pair(int m, int n, const double *A0, int ld, const int *lead, double *As, int *ps,
                    double *ts, double *Af, int *pf, double *tf)
{
    memcpy(As, A0, sizeof(double) * BUFN);
    memcpy(Af, A0, sizeof(double) * BUFN);
    for (int j = 0; j < n; ++j) ps[j] = pf[j] = lead ? lead[j] : 0;
    double work[64 * LDX];
    int lwork = 64 * LDX, info = -1;
    ck_assert_int_eq(cdyn__small_geqp3(m, n, As, ld, ps, ts), 0);
    dgeqp3_(&m, &n, Af, &ld, pf, tf, work, &lwork, &info);
    ck_assert_int_eq(info, 0);
}

START_TEST(small_geqp3_matches_dgeqp3)
{
    static const int shapes[][2] = {{0, 3}, {3, 0}, {1, 1}, {1, 5}, {5, 1}, {2, 3},  {3, 2},
                                    {4, 4}, {7, 3}, {3, 7}, {16, 16}, {16, 9}, {9, 16}, {12, 12},
                                    {24, 24}, {30, 17}, {17, 30}, {42, 42}, {64, 64}, {64, 40}};
    tu_rng r;
    tu_rng_seed(&r, 121);
    double A0[BUFN], As[BUFN], Af[BUFN], ts[LDX], tf[LDX];
    int ps[LDX], pf[LDX], lead[LDX];
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c)
        for (int variant = 0; variant < 3; ++variant) {
            int m = shapes[c][0], n = shapes[c][1], ld = imax(m, 1) + 2, k = m < n ? m : n;
            fill(&r, m, n, A0, ld, OUT_PAD);
            for (int j = 0; j < n; ++j) /* variant 1: columns 1 and 3 lead; 2: the last */
                lead[j] = (variant == 1 && (j == 1 || j == 3)) || (variant == 2 && j == n - 1);
            qr_pair(m, n, A0, ld, variant ? lead : NULL, As, ps, ts, Af, pf, tf);
            for (int j = 0; j < n; ++j)
                ck_assert_msg(ps[j] == pf[j], "geqp3 %dx%d v%d: jpvt[%d] %d vs %d", m, n, variant,
                              j, ps[j], pf[j]);
            double scale = max_abs_block(m, n, A0, ld);
            ck_assert_msg(max_diff(m, n, As, Af, ld) <= 1e-13 * scale * (1 + m),
                          "geqp3 %dx%d v%d: factors differ by %g", m, n, variant,
                          max_diff(m, n, As, Af, ld));
            for (int i = 0; i < k; ++i) ck_assert_double_eq_tol(ts[i], tf[i], 1e-13);
            ck_assert_msg(pad_intact(m, n, As, ld, OUT_PAD), "geqp3 %dx%d wrote outside A", m, n);
        }
    /* rank 3 in 8 x 6 (products of 8 x 3 and 3 x 6 factors) */
    int m = 8, n = 6, ld = 9, rank = 3;
    double U[8 * 3], V[3 * 6];
    tu_random(&r, m, rank, U, m);
    tu_random(&r, rank, n, V, rank);
    for (int i = 0; i < BUFN; ++i) A0[i] = OUT_PAD;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            double sum = 0.0;
            for (int l = 0; l < rank; ++l) sum += U[i + l * m] * V[l + j * rank];
            A0[i + j * ld] = sum;
        }
    qr_pair(m, n, A0, ld, NULL, As, ps, ts, Af, pf, tf);
    double r00 = fabs(As[0]);
    for (int k = 0; k < rank; ++k) {
        ck_assert_int_eq(ps[k], pf[k]);
        ck_assert_double_eq_tol(fabs(As[k + k * ld]), fabs(Af[k + k * ld]), 1e-13 * r00);
    }
    for (int k = rank; k < n; ++k) {
        ck_assert_msg(fabs(As[k + k * ld]) <= 1e-14 * r00, "kernel R(%d,%d) = %g", k, k,
                      As[k + k * ld]);
        ck_assert_msg(fabs(Af[k + k * ld]) <= 1e-14 * r00, "dgeqp3 R(%d,%d) = %g", k, k,
                      Af[k + k * ld]);
    }
    /* extreme magnitudes: no overflow or underflow in the norms */
    for (int e = -1; e <= 1; e += 2) {
        m = 5, n = 4, ld = 5;
        fill(&r, m, n, A0, ld, OUT_PAD);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) A0[i + j * ld] = ldexp(A0[i + j * ld], e * 1000);
        qr_pair(m, n, A0, ld, NULL, As, ps, ts, Af, pf, tf);
        ck_assert(all_finite(m, n, As, ld));
        for (int j = 0; j < n; ++j) ck_assert_int_eq(ps[j], pf[j]);
        /* R (on and above the diagonal) at its own scale, the vectors at 1 */
        double big = 0.0, dr = 0.0, dv = 0.0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                double d = fabs(As[i + j * ld] - Af[i + j * ld]);
                if (i <= j) big = fmax(big, fabs(Af[i + j * ld]));
                if (i <= j) dr = fmax(dr, d);
                else dv = fmax(dv, d);
            }
        ck_assert_msg(dr <= 1e-13 * big && dv <= 1e-13, "geqp3 at 2^%d: R %g of %g, v %g",
                      e * 1000, dr, big, dv);
    }
}
END_TEST

START_TEST(qr_wrappers_dispatch_at_the_small_boundary)
{
    static const int dims[][2] = {{16, 16}, {17, 16}, {16, 17}, {20, 3}, {3, 20},
                                  {32, 32}, {33, 33}, {64, 64}, {65, 64}, {64, 65}};
    const int one = 1;
    tu_rng r;
    tu_rng_seed(&r, 122);
    double A0[BUFN], Aw[BUFN], Ar[BUFN], tw[LDX], tr[LDX], work[64 * LDX];
    int pw[LDX], pr[LDX], lwork = 64 * LDX, info = -1;
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; ++c) {
        int m = dims[c][0], n = dims[c][1], ld = m + 1;
        int small = m <= CDYN__SMALL_QR && n <= CDYN__SMALL_QR;
        fill(&r, m, n, A0, ld, OUT_PAD);
        memcpy(Aw, A0, sizeof A0);
        memcpy(Ar, A0, sizeof A0);
        memset(pw, 0, sizeof pw);
        memset(pr, 0, sizeof pr);
        ck_assert_int_eq(cdyn__geqp3(m, n, Aw, ld, pw, tw, work, lwork), 0);
        if (small)
            ck_assert_int_eq(cdyn__small_geqp3(m, n, Ar, ld, pr, tr), 0);
        else
            dgeqp3_(&m, &n, Ar, &ld, pr, tr, work, &lwork, &info);
        ck_assert_msg(same_bits(m, n, Aw, ld, Ar, ld), "geqp3 %dx%d: not the %s path", m, n,
                      small ? "kernel" : "dgeqp3");
        /* Q^T C for C m x 2, with k = min(m, n) reflectors */
        int k = m < n ? m : n, two = 2;
        double Cw[BUFN], Cr[BUFN];
        fill(&r, m, 2, Cw, m, OUT_PAD);
        memcpy(Cr, Cw, sizeof Cw);
        ck_assert_int_eq(cdyn__ormqr('L', 'T', m, 2, k, Aw, ld, tw, Cw, m, work, lwork), 0);
        small = m <= CDYN__SMALL && k <= CDYN__SMALL;
        if (small)
            cdyn__small_ormqr('L', 'T', m, 2, k, Aw, ld, tw, Cr, m);
        else
            dormqr_("L", "T", &m, &two, &k, Aw, &ld, tw, Cr, &m, work, &lwork, &info, 1, 1);
        ck_assert_msg(same_bits(m, 2, Cw, m, Cr, m), "ormqr %dx2 k=%d: not the %s path", m, k,
                      small ? "kernel" : "dormqr");
        /* Q^T c for one vector c */
        fill(&r, m, 1, Cw, m, OUT_PAD);
        memcpy(Cr, Cw, sizeof Cw);
        ck_assert_int_eq(cdyn__ormqr('L', 'T', m, 1, k, Aw, ld, tw, Cw, m, work, lwork), 0);
        small = (m <= CDYN__SMALL && k <= CDYN__SMALL) ||
                (m <= CDYN__SMALL_VECTOR && k <= CDYN__SMALL_VECTOR);
        if (small)
            cdyn__small_ormqr('L', 'T', m, 1, k, Aw, ld, tw, Cr, m);
        else
            dormqr_("L", "T", &m, &one, &k, Aw, &ld, tw, Cr, &m, work, &lwork, &info, 1, 1);
        ck_assert_msg(same_bits(m, 1, Cw, m, Cr, m), "ormqr %dx1 k=%d: not the %s path", m, k,
                      small ? "kernel" : "dormqr");
    }
}
END_TEST

/* The small Q application against dormqr for every side and transpose,
 * with Q from dgeqp3 of an nq x k matrix (k <= nq, and k = 0), padded
 * leading dimensions; nothing outside C's block is written. */
START_TEST(small_ormqr_matches_dormqr)
{
    static const int shapes[][3] = {{1, 1, 1}, {3, 2, 2}, {5, 4, 3}, {7, 1, 7}, {16, 16, 16},
                                    {16, 3, 9}, {2, 16, 1}, {4, 4, 0}};
    static const char sides[] = {'L', 'R'}, transes[] = {'N', 'T'};
    tu_rng r;
    tu_rng_seed(&r, 123);
    double A[BUFN], C0[BUFN], Cs[BUFN], Cf[BUFN], tau[LDX], work[64 * LDX];
    int jpvt[LDX], lwork = 64 * LDX, info = -1;
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c)
        for (int si = 0; si < 2; ++si)
            for (int ti = 0; ti < 2; ++ti) {
                int m = shapes[c][0], n = shapes[c][1], k = shapes[c][2];
                char side = sides[si], trans = transes[ti];
                int nq = side == 'L' ? m : n, lda = nq + 1, ldc = m + 2;
                if (k > nq) continue;
                fill(&r, nq, imax(k, 1), A, lda, NAN);
                memset(jpvt, 0, sizeof jpvt);
                if (k > 0) dgeqp3_(&nq, &k, A, &lda, jpvt, tau, work, &lwork, &info);
                fill(&r, m, n, C0, ldc, OUT_PAD);
                memcpy(Cs, C0, sizeof C0);
                memcpy(Cf, C0, sizeof C0);
                cdyn__small_ormqr(side, trans, m, n, k, A, lda, tau, Cs, ldc);
                dormqr_(&side, &trans, &m, &n, &k, A, &lda, tau, Cf, &ldc, work, &lwork, &info, 1,
                        1);
                ck_assert_int_eq(info, 0);
                double scale = max_abs_block(m, n, C0, ldc) * (1 + nq);
                ck_assert_msg(max_diff(m, n, Cs, Cf, ldc) <= 1e-13 * scale,
                              "ormqr %c%c %dx%d k=%d: %g", side, trans, m, n, k,
                              max_diff(m, n, Cs, Cf, ldc));
                ck_assert(pad_intact(m, n, Cs, ldc, OUT_PAD));
            }
}
END_TEST

/* The Gram certificate of full row rank (rank.h) against the decision it
 * stands in for: rows rows x cols cols matrices with one row made nearly
 * dependent on another at gaps 1 ... 1e-15 (columns at assorted scales).
 * Whenever it certifies, the pivoted QR finds full rank, and its ratio
 * (a lower bound of sigma_min / |R_00|) is at most the QR's pivot ratio;
 * when the QR finds rank loss it never certifies; and it certifies every
 * case whose gap is 1e-3 or more (the cheap path is the usual one). */
START_TEST(gram_certificate_never_overrides_the_pivoted_qr)
{
    tu_rng r;
    tu_rng_seed(&r, 124);
    enum { ROWS_MAX = 40, COLS_MAX = 60 };
    double *A = malloc(sizeof(double) * ROWS_MAX * COLS_MAX);
    ck_assert_ptr_nonnull(A);
    int certified_far = 0, far = 0;
    static const int shapes[][2] = {{17, 17}, {20, 40}, {40, 60}, {33, 34}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c)
        for (int k = 0; k <= 15; ++k) {
            int rows = shapes[c][0], cols = shapes[c][1];
            double gap = k == 15 ? 0.0 : pow(10.0, -k);
            tu_random(&r, rows, cols, A, rows);
            for (int j = 0; j < cols; ++j) { /* columns in assorted units */
                double unit = pow(10.0, (double)(j % 7) - 3.0);
                for (int i = 0; i < rows; ++i) A[i + j * rows] *= unit;
            }
            int near = rows - 1, base = 2;
            for (int j = 0; j < cols; ++j)
                A[near + j * rows] = A[base + j * rows] + gap * A[near + j * rows];
            cdyn__rank_ws ws;
            ck_assert(cdyn__rank_ws_init(&ws, rows, cols, 2 * rows * rows));
            cdyn__rank cert, qr;
            int ok = cdyn__rank_full_rows(&ws, rows, cols, A, rows, CDYN__RANK_TOL, NULL, &cert);
            int rank = cdyn__rank_decide(&ws, CDYN__RANK_ROWS, rows, cols, A, rows, CDYN__RANK_TOL,
                                         NULL, NULL, &qr);
            cdyn__rank_ws_free(&ws);
            if (ok) {
                ck_assert_msg(rank == rows, "%dx%d gap %g: certified but QR rank %d", rows, cols,
                              gap, rank);
                ck_assert_int_eq(cert.rank, rows);
                ck_assert_msg(cert.ratio > 0.0 && cert.ratio <= qr.ratio * (1.0 + 1e-12),
                              "%dx%d gap %g: certified ratio %g, QR ratio %g", rows, cols, gap,
                              cert.ratio, qr.ratio);
            }
            if (gap >= 1e-3) {
                ++far;
                certified_far += ok;
            }
        }
    free(A);
    ck_assert_int_eq(certified_far, far);
    /* never for more rows than columns, nor for a zero matrix */
    cdyn__rank_ws ws;
    double B[6] = {1, 0, 0, 1, 1, 1}, Z[6] = {0};
    ck_assert(cdyn__rank_ws_init(&ws, 3, 3, 18));
    ck_assert_int_eq(cdyn__rank_full_rows(&ws, 3, 2, B, 3, CDYN__RANK_TOL, NULL, NULL), 0);
    ck_assert_int_eq(cdyn__rank_full_rows(&ws, 2, 3, Z, 2, CDYN__RANK_TOL, NULL, NULL), 0);
    ck_assert_int_eq(cdyn__rank_full_rows(&ws, 2, 3, B, 2, CDYN__RANK_TOL, NULL, NULL), 1);
    cdyn__rank_ws_free(&ws);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linalg");
    TCase *tc = tcase_create("wrappers");
    tcase_add_test(tc, gemm_and_gemv_match_plain_loops);
    tcase_add_test(tc, pivoted_qr_reconstructs_and_orders_the_diagonal);
    tcase_add_test(tc, svd_gives_known_singular_values);
    tcase_add_test(tc, cholesky_and_lu_solve_known_systems);
    tcase_add_test(tc, triangular_solve_inverts_a_known_triangle);
    tcase_add_test(tc, gram_certificate_never_overrides_the_pivoted_qr);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("small kernels vs Fortran");
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, small_gemm_matches_dgemm);
    tcase_add_test(ts, small_gemv_matches_dgemv);
    tcase_add_test(ts, small_syrk_matches_dsyrk);
    tcase_add_test(ts, small_trsm_matches_dtrsm);
    tcase_add_test(ts, small_trsm_with_zero_alpha_does_not_read_b);
    tcase_add_test(ts, small_potrf_matches_dpotrf);
    tcase_add_test(ts, small_potrf_reports_the_failing_minor_as_dpotrf);
    tcase_add_test(ts, small_potrs_matches_dpotrs);
    tcase_add_test(ts, small_spd_cond_bounds_the_2_norm_condition);
    tcase_add_test(ts, small_getrf_matches_dgetrf);
    tcase_add_test(ts, small_getrs_matches_dgetrs);
    tcase_add_test(ts, small_gecon_is_the_exact_reciprocal_condition);
    tcase_add_test(ts, small_geqp3_matches_dgeqp3);
    tcase_add_test(ts, small_ormqr_matches_dormqr);
    tcase_add_test(ts, wrappers_dispatch_at_the_small_boundary);
    tcase_add_test(ts, qr_wrappers_dispatch_at_the_small_boundary);
    suite_add_tcase(s, ts);
    return tu_run_suite(s);
}
