/* Small dense helpers for the tests, written independently of libcdyn's
 * linear-algebra layer so that the tests check the library against plain
 * loops and a reference LAPACK solve, not against itself. Column-major. */
#ifndef CDYN_TESTUTIL_H
#define CDYN_TESTUTIL_H

#include <stddef.h>

/* Run a Check suite (CK_NORMAL) and free it: the exit status of a test
 * program, 0 when every test passed (tests/suite_run.c; the suites only,
 * not the benchmarks, link it). Suite is Check's. */
struct Suite;
int tu_run_suite(struct Suite *s);

/* Deterministic generator (xorshift64*), uniform in [-1, 1). */
typedef struct { unsigned long long s; } tu_rng;
void tu_rng_seed(tu_rng *r, unsigned long long seed);
double tu_uniform(tu_rng *r);

/* Fill an rows x cols matrix (leading dimension ld) with uniform entries. */
void tu_random(tu_rng *r, int rows, int cols, double *A, int ld);
/* Random SPD n x n matrix: B B^T + n I with B uniform. */
void tu_random_spd(tu_rng *r, int n, double *A, int ld);

/* C = A B by plain loops (A: r x k, B: k x c). */
void tu_matmul(int r, int k, int c, const double *A, int lda, const double *B, int ldb,
               double *C, int ldc);
/* y = A x (A: r x c). */
void tu_matvec(int r, int c, const double *A, int lda, const double *x, double *y);
/* y = A^T x (A: r x c). */
void tu_matvec_t(int r, int c, const double *A, int lda, const double *x, double *y);

/* Largest |entry| of a rows x cols matrix, and of a vector. */
double tu_max_abs(int rows, int cols, const double *A, int ld);
double tu_vec_max_abs(int n, const double *x);

/* Assemble the bordered matrix [M  sign G^T; G 0] (n + m square, G m x n)
 * into K (leading dimension n + m), the right-hand side [top; bottom] into
 * x, and solve with LAPACK dgesv (LU of the whole matrix): the naive
 * baseline and independent reference of the tests and benchmarks. No
 * allocation: K (n+m)^2, ipiv (n+m), x (n+m) come from the caller. Returns
 * dgesv's info. */
int tu_bordered_solve(int n, int m, const double *M, int ldm, const double *G, int ldg,
                      double sign, const double *top, const double *bottom, double *K,
                      int *ipiv, double *x);

/* Reference solve of the bordered (KKT) system of THEORY T1.1,
 *     [ M  -W^T ] [v'    ]   [ F  ]
 *     [ W   0   ] [lambda] = [ -c ]
 * with LAPACK dgesv (LU of the whole (n+m) matrix). Returns dgesv's info. */
int tu_kkt_solve(int n, int m, const double *M, int ldm, const double *W, int ldw,
                 const double *F, const double *c, double *vdot, double *lambda);

#endif
