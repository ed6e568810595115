/* Internal entry points of cdyn_newton for other modules: the same
 * rank-revealing linear solve the Newton step uses (pivoted QR, SVD outer
 * inverse when rank deficient; THEORY T2.2-T2.3), applied to several
 * right-hand sides with one factorization. */
#ifndef CDYN_NEWTON_INTERNAL_H
#define CDYN_NEWTON_INTERNAL_H

#include "cdyn/newton.h"

/* Factor J (k x p, ldj >= k; finite). Returns 1 if J was rank deficient and
 * the SVD path was taken, else 0. Does not touch the solve report, but sets
 * the dependent-row / dropped-column diagnosis on rank deficiency. */
int cdyn__newton_factor(cdyn_newton *nt, const double *J, int ldj);

/* x (p) = J# b (k) with the last factorization. x and b must not alias. */
void cdyn__newton_apply(cdyn_newton *nt, const double *b, double *x);

/* X (p x nrhs, ldx) = J# B (k x nrhs, ldb) with the last factorization;
 * X may be B itself (same leading dimension) for square J. */
void cdyn__newton_apply_many(cdyn_newton *nt, const double *B, int ldb, int nrhs, double *X,
                             int ldx);

/* Rank and extreme kept/dropped values of the last factorization. */
int cdyn__newton_rank(const cdyn_newton *nt);

#endif
