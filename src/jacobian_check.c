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

/* The size of f_i's terms, for its rounding over the steps of column j:
 * its values at the steps, its row's largest term, its terms of no
 * unknown, and |J_ij x_j|, the rounding of x_j inside f (sin(w t) at
 * t = 3600 s rounds its phase to eps w t: an exact Phi_t was named at
 * 3.7e-6 when that went uncounted). */
static double value_size(const cdyn__check_work *w, const double *terms, int i, double given,
                         double xj)
{
    double f_size = fmax(fmax(fabs(w->plus[i]), fabs(w->minus[i])),
                         fmax(fabs(w->plus2[i]), fabs(w->minus2[i])));
    f_size = fmax(f_size, fmax(w->row_size[i], terms ? terms[i] : 0.0));
    return fmax(f_size, fabs(given * xj));
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
static int truncation_hides(int k, int j, const double *J, int ldj, double scale_j, double xj,
                            const double *terms, const cdyn__check_work *w, double h,
                            double *kink)
{
    int hides = 0;
    *kink = 0.0;
    for (int i = 0; i < k; ++i) {
        double d1 = (w->plus[i] - w->minus[i]) / (2.0 * h);
        double d2 = (w->plus2[i] - w->minus2[i]) / (4.0 * h);
        double given = J[i + (size_t)j * ldj];
        double f_size = value_size(w, terms, i, given, xj);
        double truncation = fabs(d1 - d2), rounding = 4.0 * DBL_EPSILON * f_size / h;
        double base = fmax(fmax(fabs(given), fabs(d1)), 1e-8 * w->row_size[i] / scale_j);
        if (truncation > rounding && 10.0 * (truncation + rounding) > CHECK_THRESHOLD * base)
            hides = 1;
        /* a kink inside the steps: the slopes of the outer intervals,
         * [x + h, x + 2h] and [x - 2h, x - h], differ by more than 1e-2 of
         * the entry while the central differences agree (both average the
         * same two slopes: a spring stiffer for u >= 0, at u = 1e-11
         * stepped by 6e-6, had its exact slope named and one 5 % off
         * passed). A smooth f bends them too, by 3 h f'' (an extremum:
         * cosh x at 1e-12), but that shrinks with the step, a kink's does
         * not: *kink, the largest such bend in units of 1e-2 of its entry,
         * is compared level to level by the caller. */
        double outer_plus = (w->plus2[i] - w->plus[i]) / h;
        double outer_minus = (w->minus[i] - w->minus2[i]) / h;
        double bend = fabs(outer_plus - outer_minus);
        if (bend > 4.0 * rounding && base > 0.0) *kink = fmax(*kink, bend / (1e-2 * base));
    }
    return hides;
}

/* The scale of unknown j's steps: scale[j], or more where a row it enters
 * says so: the change of x_j that moves row i by the row's own size (its
 * largest term |J_il| scale_l, or its terms of no unknown) is that size
 * over |J_ij|, the least over the rows; never more than the largest
 * scale of any unknown (widest), which is what an unknown at exactly 0
 * takes. scale[j] is the unknown's size, and one near 0 (1e-10 beside
 * terms of 1) was stepped by 6e-16: the rounding of f over that step
 * covered errors of any size, and a 5 % error, even a wrong sign, went
 * unnamed (found by an adversarial review). A step too wide for a row
 * that varies faster is shortened by the truncation test. The same scale
 * sets the floor of the errors' scale (1e-8 of the row over it), so that
 * 1e-300 is judged as 0 is: an entry 1e-12 of its row with the unknown
 * at the widest scale stays negligible, as before. */
static double column_scale(int k, int j, const double *J, int ldj, const double *scale,
                           const double *terms, const double *row_size, double widest)
{
    double least = INFINITY;
    for (int i = 0; i < k; ++i) {
        double a = fabs(J[i + (size_t)j * ldj]);
        if (!(a > 0.0)) continue;
        double size = fmax(row_size[i], terms ? terms[i] : 0.0) / a;
        least = size < least ? size : least;
    }
    least = least < widest ? least : widest;
    return least > scale[j] ? least : scale[j];
}

/* x + size - x: the step actually representable at x (0 where none is). */
static double representable(double x, double size)
{
    volatile double up = x + size;
    return up - x;
}

/* The step at which the rounding of f, 4 eps |f| / h, no longer keeps an
 * entry of column j from being judged at CHECK_THRESHOLD (twice that, for
 * a margin), the widest over the entries above 1e-8 of their row over
 * scale_j (the row's terms of no unknown included: a time derivative
 * near its zero, 1e-11 beside terms of 1, is left to its rounding as it
 * was, not stepped by 500 s); 0 where rounding hides none
 * at the step h of the values in w. Entries are measured by the given
 * value (an estimate of an entry given as 0 is mostly noise about 0, and
 * widening for it stepped time by 400 s). The unknown's size need not be the
 * scale f varies on at all: exp(a x) at x = 1e-12 has its entry a, and a
 * step of 6e-18 covered any error of it. */
static double rounding_step(int k, int j, const double *J, int ldj, double scale_j, double xj,
                            const double *terms, const cdyn__check_work *w, double h)
{
    double wider = 0.0;
    for (int i = 0; i < k; ++i) {
        double base = fabs(J[i + (size_t)j * ldj]); /* not the estimate: noise about 0 */
        double f_size = value_size(w, terms, i, base, xj);
        double row = fmax(w->row_size[i], terms ? terms[i] : 0.0);
        if (!(base > 1e-8 * row / scale_j) || !isfinite(base)) continue;
        double rounding = 4.0 * DBL_EPSILON * f_size / h;
        if (!(10.0 * rounding > CHECK_THRESHOLD * base)) continue;
        double need = 2.0 * 40.0 * DBL_EPSILON * f_size / (CHECK_THRESHOLD * base);
        wider = need > wider && isfinite(need) ? need : wider;
    }
    return wider;
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
    double widest = 0.0;
    for (int j = 0; j < p; ++j) widest = fmax(widest, scale[j]);
    for (int j = 0; j < p; ++j) {
        double scale_j = column_scale(k, j, J, ldj, scale, terms, row_size, widest);
        double size = step * scale_j, h = 0.0, kink_before = 0.0;
        int widened = 0, back = 0;
        for (int level = 0;; ++level) {
            h = representable(x[j], size);
            if (!(h > 0.0)) break; /* no step at x[j]: the column is not judged */
            cdyn_status st = shifted(f, ctx, x, j, h, w->plus);
            if (!st) st = shifted(f, ctx, x, j, -h, w->minus);
            if (!st) st = shifted(f, ctx, x, j, 2.0 * h, w->plus2);
            if (!st) st = shifted(f, ctx, x, j, -2.0 * h, w->minus2);
            if (st && (st == CDYN_ERR_NONFINITE || st == CDYN_ERR_CALLBACK) &&
                h > 2.0 * step * scale[j]) {
                /* a step beyond the unknown's own size left f's domain
                 * (sqrt(x0) at x0 = 1e-8 stepped by 0.6): from its own */
                scale_j = scale[j];
                size = step * scale_j;
                widened = 1;
                level = -1;
                continue;
            }
            if (st) return st;
            if (!widened) { /* once, from the first step: rounding that hides */
                double wider = rounding_step(k, j, J, ldj, scale_j, x[j], terms, w, h);
                widened = 1;
                if (wider > 2.0 * h) {
                    size = wider;
                    level = -1;
                    continue;
                }
            }
            if (back) break; /* the level before, again: judged there */
            double kink = 0.0;
            int hides = truncation_hides(k, j, J, ldj, scale_j, x[j], terms, w, h, &kink);
            /* a bend that shrank with the step (by 16, less than 8 here)
             * was a smooth f's curvature, not a kink: the level before,
             * shortened for it alone, is judged after all (its rounding
             * is 16 times less) */
            int smooth = kink_before > 0.0 && kink < kink_before / 8.0;
            if (smooth && !hides) {
                size = 16.0 * h;
                back = 1;
                continue;
            }
            int kinked = kink > 1.0 && !smooth;
            if (level == CHECK_LEVELS || !(representable(x[j], h / 16.0) > 0.0) ||
                (!hides && !kinked))
                break;
            kink_before = hides ? 0.0 : kink; /* shortened for the bend alone */
            size = h / 16.0;
        }
        if (!(h > 0.0)) continue;
        for (int i = 0; i < k; ++i) {
            double d1 = (w->plus[i] - w->minus[i]) / (2.0 * h);
            double d2 = (w->plus2[i] - w->minus2[i]) / (4.0 * h);
            /* the estimate's own error: the steps' disagreement (truncation)
             * and the rounding of f, eps |terms of f| / h, that no step
             * escapes (f itself may be ~0 where its terms cancel) */
            double given = J[i + (size_t)j * ldj];
            double f_size = value_size(w, terms, i, given, x[j]);
            double estimate = (4.0 * d1 - d2) / 3.0;
            double own_error = fabs(d1 - d2) + 4.0 * DBL_EPSILON * f_size / h;
            double gap = fabs(given - estimate);
            double base = fmax(fmax(fabs(given), fabs(estimate)), 1e-8 * row_size[i] / scale_j);
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
