/* Checking a caller's derivative callback against central differences of
 * the function it differentiates (cdyn_jacobian_check, status.h), shared by
 * cdyn_newton, cdyn_dae and cdyn_mbs. */
#ifndef CDYN_JACOBIAN_CHECK_H
#define CDYN_JACOBIAN_CHECK_H

#include "cdyn/status.h"

/* out (k values) = f(x); CDYN_OK or the failure's status (message and
 * callback code kept by the caller's object). */
typedef cdyn_status (*cdyn__eval_fn)(void *ctx, const double *x, double *out);

/* Scratch of k doubles each, distinct. */
typedef struct cdyn__check_work {
    double *plus, *minus, *plus2, *minus2, *row_size;
} cdyn__check_work;

/* Compare the k x p given J (ld ldj) with differences of f at x (p
 * entries, modified during the call and restored), unknown j moved by
 * eps^(1/3) scale[j] (scale > 0); col_offset is added to the column
 * reported. terms (k, or NULL): the size of the terms of each f_i that do
 * not depend on these unknowns (for the rounding of f). Merges into *out:
 * the worse of its current content and this comparison (start from
 * cdyn__check_start()). Afterwards w->row_size holds each row's largest
 * |J_ij| scale_j. */
cdyn_status cdyn__check_jacobian(int k, int p, const double *J, int ldj, double *x,
                                 const double *scale, const double *terms, cdyn__eval_fn f,
                                 void *ctx, const cdyn__check_work *w, int col_offset,
                                 cdyn_jacobian_check *out);

/* An empty report: nothing found yet. */
void cdyn__check_start(cdyn_jacobian_check *out);

#endif
