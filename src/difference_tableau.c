/* Derivatives by central differences refined in a Richardson tableau
 * (difference_tableau.h; THEORY T4.1 for the mechanism's time terms). */
#include "difference_tableau.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The largest |a_i - b_i| (NaN propagates). */
static double largest_difference(int m, const double *a, const double *b)
{
    double d = 0.0;
    for (int i = 0; i < m; ++i)
        if (!(fabs(a[i] - b[i]) <= d)) d = fabs(a[i] - b[i]);
    return d;
}

/* The error of a central difference is a series in h^2, so T[k][j] =
 * T[k][j-1] + (T[k][j-1] - T[k-1][j-1]) / (16^j - 1) removes its terms one
 * by one. The winner is chosen relative to its own size: steps far longer
 * than the scale f varies on give differences of about |f| / h^order,
 * near 0 and near each other, whose absolute estimates are small (an
 * angle of many turns: such an entry, -1e-3 with an estimate of 3e-7,
 * beat the converged 4374 with 4.6e-6 and made a crank's accelerations
 * wrong in sign with CDYN_OK). But where the derivative is 0 (a prescribed
 * motion at a zero of its acceleration) no entry is small relative to
 * itself, and the finest steps' rounding, large and as far off as itself,
 * won (0.18 of the acceleration's amplitude, with CDYN_OK): without an
 * entry within 1e-2 of itself the smallest absolute estimate wins. And
 * steps that are whole periods of a prescribed motion (2.4e-3 s and
 * 6e-4 s at 5 kHz) give the same differences, an entry whose estimate is
 * exactly 0: when the next level is off by its own size, that was no
 * convergence, and the entries so far are dropped. */
cdyn_status cdyn__tableau_derivative(int order, int m, int m1, double t, double c, int levels,
                                     int most, int prefetched, cdyn__offset_fn f, void *ctx,
                                     const cdyn__tableau_work *w, double *out, double *best_out)
{
    double *plus = w->plus, *minus = w->minus, *center = w->center;
    double *row = w->row, *previous = w->previous;
    cdyn_status st = CDYN_OK;
    double best = INFINITY, best_relative = INFINITY, least = INFINITY, step = c;
    for (int k = 0; st == CDYN_OK && k < most; ++k, step *= 0.25) {
        /* past `levels` only while no entry is within 1e-6 of itself, and
         * once more after levels that agreed exactly (whole periods can
         * make all of them agree) */
        if (k >= levels && best_relative <= 1e-6 && (best > 0.0 || k > levels)) break;
        volatile double ahead = t + step; /* the step actually representable */
        double h = ahead - t;
        if (prefetched && k == 1) /* its f(h) is in center */
            memcpy(plus, center, sizeof(double) * (size_t)m);
        else if (!(prefetched && k == 0))
            st = f(ctx, h, plus);
        if (st == CDYN_OK && !(prefetched && k == 0)) st = f(ctx, -h, minus);
        if (st != CDYN_OK) break;
        for (int i = 0; i < m; ++i)
            row[i] = order == 1 ? (plus[i] - minus[i]) / (2.0 * h)
                                : (plus[i] - 2.0 * center[i] + minus[i]) / (h * h);
        double factor = 1.0;
        for (int j = 1; j <= k; ++j) {
            double *entry = row + (size_t)j * m1, *left = entry - m1;
            const double *up = previous + (size_t)(j - 1) * m1;
            factor *= 16.0;
            for (int i = 0; i < m; ++i) entry[i] = left[i] + (left[i] - up[i]) / (factor - 1.0);
            double error =
                fmax(largest_difference(m, entry, left), largest_difference(m, entry, up));
            double relative =
                error == 0.0 ? 0.0 : error / cdyn__largest_magnitude(m, entry);
            if (relative < best_relative || (relative == best_relative && error < best)) {
                best = error;
                best_relative = relative;
                memcpy(out, entry, sizeof(double) * (size_t)m);
            }
            if (error < least) {
                least = error;
                memcpy(w->least, entry, sizeof(double) * (size_t)m);
            }
        }
        /* (out is written once best is finite) */
        const double *diagonal = row + (size_t)k * m1;
        double moved = k > 0 ? largest_difference(m, diagonal, previous + (size_t)(k - 1) * m1)
                             : 0.0;
        if (k > 0 && best_relative <= 1e-4 && moved > 2.0 * best) {
            double size = fmax(cdyn__largest_magnitude(m, out),
                               cdyn__largest_magnitude(m, diagonal));
            if (best > 0.0 || moved <= 0.1 * size || k + 1 >= most)
                break; /* rounding has taken over */
            /* levels that agreed exactly, and a new diagonal as far off as
             * its own size: no rounding, and the agreement was no
             * convergence (steps that are whole periods) */
            best = best_relative = least = INFINITY;
        }
        double *swap = previous;
        previous = row;
        row = swap;
    }
    if (best_relative > 1e-2 && least < INFINITY) { /* no entry within 1e-2 of itself */
        memcpy(out, w->least, sizeof(double) * (size_t)m);
        best = least;
    }
    *best_out = best;
    return st;
}

/* The two central differences D0 (step h0) and D1 (h1 = h0 / 4) agree
 * entry by entry when their distance is within the rounding of the
 * quotients (D0, the longer step, is then the better) or within 1e-4 of
 * the extrapolated E = D1 + (D1 - D0) / 15 (whose error is then about
 * 1e-4^2 / 200 of it for a smooth input: the h^4 term over the h^2 term
 * is about (w h0)^2 / 6, and the h^2 term is the distance). Entries that
 * agree are written to out, the others are marked NaN there; returns how
 * many do not agree. */
static int time_levels_disagree(int m, double h0, double h1, const double *plus0,
                                const double *minus0, const double *plus1, const double *minus1,
                                double *out)
{
    int count = 0;
    for (int i = 0; i < m; ++i) {
        double d0 = (plus0[i] - minus0[i]) / (2.0 * h0), d1 = (plus1[i] - minus1[i]) / (2.0 * h1);
        double extrapolated = d1 + (d1 - d0) / 15.0, distance = fabs(d1 - d0);
        double size = fmax(fmax(fabs(plus0[i]), fabs(minus0[i])),
                           fmax(fabs(plus1[i]), fabs(minus1[i])));
        if (distance <= 4.0 * DBL_EPSILON * size / h1) {
            out[i] = d0;
        } else if (distance <= 1e-4 * fabs(extrapolated)) {
            out[i] = extrapolated;
        } else {
            out[i] = NAN;
            ++count;
        }
    }
    return count;
}

/* f restricted to the entries marked NaN in marks (m of them in all). */
typedef struct {
    cdyn__offset_fn f;
    void *ctx;
    const double *marks;
    double *full;
    int m;
} marked_entries;

static void gather_marked(int m, const double *marks, const double *full, double *out)
{
    for (int i = 0, j = 0; i < m; ++i)
        if (isnan(marks[i])) out[j++] = full[i];
}

static cdyn_status marked_offset(void *ctx, double tau, double *out)
{
    const marked_entries *e = ctx;
    cdyn_status st = e->f(e->ctx, tau, e->full);
    if (st == CDYN_OK) gather_marked(e->m, e->marks, e->full, out);
    return st;
}

cdyn_status cdyn__time_derivative(int m, int m1, double t, double c, int levels,
                                  cdyn__offset_fn f, void *ctx, const cdyn__tableau_work *w,
                                  double *spare, double *out, double *best)
{
    volatile double ahead = t + c, ahead1 = t + 0.25 * c; /* as in the tableau */
    double h0 = ahead - t, h1 = ahead1 - t, *below = w->row; /* f(-h1) */
    *best = 0.0;
    cdyn_status st = f(ctx, h0, w->plus);
    if (st == CDYN_OK) st = f(ctx, -h0, w->minus);
    if (st != CDYN_OK) return st;
    if (memcmp(w->plus, w->minus, sizeof(double) * (size_t)m) == 0) {
        for (int i = 0; i < m; ++i) out[i] = 0.0; /* f does not depend on t here */
        return CDYN_OK;
    }
    st = f(ctx, h1, w->center);
    if (st == CDYN_OK) st = f(ctx, -h1, below);
    if (st != CDYN_OK) return st;
    int count = m;
    if (h1 > 0.0 && h1 < h0)
        count = time_levels_disagree(m, h0, h1, w->plus, w->minus, w->center, below, out);
    else
        for (int i = 0; i < m; ++i) out[i] = NAN;
    if (count == 0) return CDYN_OK;
    /* entries that vary faster than the steps, or jump near t: the tableau
     * for those alone (the others would lose accuracy to its finer steps'
     * rounding), its first two levels from these evaluations */
    marked_entries e = {f, ctx, out, spare, m};
    gather_marked(m, out, w->plus, w->plus);
    gather_marked(m, out, w->minus, w->minus);
    gather_marked(m, out, w->center, w->center);
    double *result = spare + m1;
    st = cdyn__tableau_derivative(1, count, m1, t, c, 3, levels, 1, marked_offset, &e, w,
                                  result, best);
    if (st != CDYN_OK || !isfinite(*best)) return st;
    for (int i = 0, j = 0; i < m; ++i)
        if (isnan(out[i])) out[i] = result[j++];
    return CDYN_OK;
}
