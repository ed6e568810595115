/* The internal BLAS/LAPACK layer against plain loops and known answers. */
#include "linalg.h"
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

int main(void)
{
    Suite *s = suite_create("linalg");
    TCase *tc = tcase_create("wrappers");
    tcase_add_test(tc, gemm_and_gemv_match_plain_loops);
    tcase_add_test(tc, pivoted_qr_reconstructs_and_orders_the_diagonal);
    tcase_add_test(tc, svd_gives_known_singular_values);
    tcase_add_test(tc, cholesky_and_lu_solve_known_systems);
    tcase_add_test(tc, triangular_solve_inverts_a_known_triangle);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
