/* Jacobian checks (status.h, cdyn_jacobian_check): central differences with
 * steps h and 2h, extrapolated, against the caller's derivatives; a
 * column's step is shortened where their truncation hides an entry. */
#include "jacobian_check.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

/* An entry whose discrepancy exceeds this relative error is reported. */
#define CHECK_THRESHOLD 1e-6
/* Steps shortened by 16 at most this often where truncation hides an entry. */
#define CHECK_LEVELS 6

void cdyn__check_start(cdyn_jacobian_check *out)
{
    out->worst = 0.0;
    out->row = out->col = -1;
    out->given = out->estimate = 0.0;
    out->suspect = 0;
}

/* f at x with x[j] moved by delta (restored) into out. */
static cdyn_status shifted(cdyn__eval_fn f, void *ctx, double *x, int j, double delta,
                           double *out)
{
    double saved = x[j];
    x[j] = saved + delta;
    cdyn_status st = f(ctx, x, out);
    x[j] = saved;
    return st;
}

/* Does the truncation of the differences at step h (their disagreement
 * |d1 - d2| between h and 2h), rather than f's rounding, keep some entry
 * of column j from being judged at CHECK_THRESHOLD? Then a shorter step
 * helps: the step came from the unknown's size, which need not be the
 * scale f varies on (an angle of 1.2e5 rad stepped by 0.7 rad hid a 5 %
 * error in a constraint Jacobian). */
static int truncation_hides(int k, int j, const double *J, int ldj, const double *scale,
                            const double *terms, const cdyn__check_work *w, double h)
{
    for (int i = 0; i < k; ++i) {
        double d1 = (w->plus[i] - w->minus[i]) / (2.0 * h);
        double d2 = (w->plus2[i] - w->minus2[i]) / (4.0 * h);
        double f_size = fmax(fmax(fabs(w->plus[i]), fabs(w->minus[i])),
                             fmax(fabs(w->plus2[i]), fabs(w->minus2[i])));
        f_size = fmax(f_size, fmax(w->row_size[i], terms ? terms[i] : 0.0));
        double truncation = fabs(d1 - d2), rounding = 4.0 * DBL_EPSILON * f_size / h;
        double given = J[i + (size_t)j * ldj];
        double base = fmax(fmax(fabs(given), fabs(d1)), 1e-8 * w->row_size[i] / scale[j]);
        if (truncation > rounding && 10.0 * (truncation + rounding) > CHECK_THRESHOLD * base)
            return 1;
    }
    return 0;
}

cdyn_status cdyn__check_jacobian(int k, int p, const double *J, int ldj, double *x,
                                 const double *scale, const double *terms, cdyn__eval_fn f,
                                 void *ctx, const cdyn__check_work *w, int col_offset,
                                 cdyn_jacobian_check *out)
{
    /* each row's size max_l |J_il| scale_l, from the given J (unit-free) */
    double *row_size = w->row_size;
    for (int i = 0; i < k; ++i) row_size[i] = 0.0;
    for (int j = 0; j < p; ++j)
        for (int i = 0; i < k; ++i)
            row_size[i] = fmax(row_size[i], fabs(J[i + (size_t)j * ldj]) * scale[j]);
    const double step = cbrt(DBL_EPSILON);
    for (int j = 0; j < p; ++j) {
        double size = step * scale[j], h = 0.0;
        for (int level = 0;; ++level) {
            volatile double up = x[j] + size;
            h = up - x[j]; /* the step actually representable */
            cdyn_status st = shifted(f, ctx, x, j, h, w->plus);
            if (!st) st = shifted(f, ctx, x, j, -h, w->minus);
            if (!st) st = shifted(f, ctx, x, j, 2.0 * h, w->plus2);
            if (!st) st = shifted(f, ctx, x, j, -2.0 * h, w->minus2);
            if (st) return st;
            if (level == CHECK_LEVELS || !truncation_hides(k, j, J, ldj, scale, terms, w, h))
                break;
            size = h / 16.0;
        }
        for (int i = 0; i < k; ++i) {
            double d1 = (w->plus[i] - w->minus[i]) / (2.0 * h);
            double d2 = (w->plus2[i] - w->minus2[i]) / (4.0 * h);
            /* the estimate's own error: the steps' disagreement (truncation)
             * and the rounding of f, eps |terms of f| / h, that no step
             * escapes (f itself may be ~0 where its terms cancel) */
            double f_size = fmax(fmax(fabs(w->plus[i]), fabs(w->minus[i])),
                                 fmax(fabs(w->plus2[i]), fabs(w->minus2[i])));
            f_size = fmax(f_size, fmax(row_size[i], terms ? terms[i] : 0.0));
            double estimate = (4.0 * d1 - d2) / 3.0;
            double own_error = fabs(d1 - d2) + 4.0 * DBL_EPSILON * f_size / h;
            double given = J[i + (size_t)j * ldj];
            double gap = fabs(given - estimate);
            double base = fmax(fmax(fabs(given), fabs(estimate)), 1e-8 * row_size[i] / scale[j]);
            double error = gap > 0.0 ? (base > 0.0 ? gap / base : INFINITY) : 0.0;
            if (!isfinite(estimate)) error = INFINITY;
            if (!(gap > 10.0 * own_error) && isfinite(estimate)) continue;
            if (!(error > out->worst)) continue;
            out->worst = error;
            out->row = i;
            out->col = col_offset + j;
            out->given = given;
            out->estimate = estimate;
        }
    }
    out->suspect = out->worst > CHECK_THRESHOLD;
    return CDYN_OK;
}
