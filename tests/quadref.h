/* Quad-precision (__float128) reference for the accuracy suite: Gaussian
 * elimination with partial pivoting, the 1-norm condition number, a
 * positive-definiteness test and relative errors, all in software quad
 * arithmetic (GCC/Clang builtin on x86_64; only libgcc's soft-float
 * routines are used, not libquadmath). Values are printed by converting to
 * double. Column-major, leading dimension = number of rows. */
#ifndef CDYN_TEST_QUADREF_H
#define CDYN_TEST_QUADREF_H

__extension__ typedef __float128 quad;

/* |x| */
quad qref_abs(quad x);

/* 10^k: exact for 0 <= k <= 8 (and up to 10^48 in quad), rounded in quad
 * (relative 1e-34) for k < 0. */
quad qref_pow10(int k);

/* Solve A x = b (A: N x N) by Gaussian elimination with partial pivoting.
 * A and b are not modified. Returns 0, or -1 when a pivot is exactly zero. */
int qref_solve(int N, const quad *A, const quad *b, quad *x);

/* Normwise relative residual ||b - A x||_inf / (||A||_inf ||x||_inf +
 * ||b||_inf), evaluated in quad. */
double qref_residual(int N, const quad *A, const quad *b, const quad *x);

/* ||A||_1 ||A^{-1}||_1 with the explicit inverse (one LU, N solves);
 * INFINITY when a pivot is exactly zero. */
double qref_cond1(int N, const quad *A);

/* 1 when the symmetric n x n matrix A is positive definite (every pivot
 * of its Cholesky factorization in quad is positive), else 0. */
int qref_is_spd(int n, const quad *A);

/* ||x - ref||_inf / ||ref||_inf (absolute when ref = 0); NaN in x gives
 * NaN. */
double qref_relerr(int len, const quad *x, const quad *ref);

#endif
