/* Derivatives by central differences refined in a Richardson tableau
 * (difference_tableau.h; THEORY T4.1 for the mechanism's time terms). */
#include "difference_tableau.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

cdyn__tableau_work cdyn__tableau_layout(double *base, size_t m1, int levels)
{
    cdyn__tableau_work w;
    w.plus = base;
    w.minus = base + m1;
    w.center = base + 2 * m1;
    w.least = base + 3 * m1;
    w.error = base + 4 * m1;
    w.relative = base + 5 * m1;
    w.least_error = base + 6 * m1;
    w.open = base + 7 * m1;
    w.row = base + 8 * m1;
    w.previous = w.row + (size_t)levels * m1;
    return w;
}

/* An entry's state in w->open. */
#define ENTRY_OPEN 1.0    /* its levels go on */
#define ENTRY_PENDING 0.5 /* stopped; the next level, if another entry needs it, checks it */
#define ENTRY_DONE 0.0

/* The larger of a and b, NaN when either is. */
static double larger(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

/* `times` the rounding of entry i's difference quotients at step h: its
 * values carry about eps (terms_i + h rates_i) (noise). */
static double quotient_rounding(const cdyn__tableau_rounding *noise, int order, int i, double h,
                                double times)
{
    double values = noise->terms[i] + (noise->rates ? h * noise->rates[i] : 0.0);
    return times * DBL_EPSILON * values / (order == 1 ? h : h * h);
}

/* Does a diagonal entry `moved` away from the winner `best` (estimate
 * `error`) contradict it? After an estimate of exactly 0 (levels that
 * agreed to the bit: steps that are whole periods of a prescribed motion)
 * a move by a tenth of the entry's size does, which rounding never is.
 * Else only a move beyond the entry's size: rounding that grows from a
 * converged winner can jump by a quarter of it within one level (the
 * phase of sin(w t) at t = 538 s, a 2e-7 winner), while chance agreements
 * of steps far too long (a crank's several turns per step at 1.2e5 rad:
 * -442 then 5309) move by many times it. */
static int contradicted(double moved, double best, double diagonal, double error)
{
    double size = fmax(fabs(best), fabs(diagonal));
    return moved > (error == 0.0 ? 0.1 : 1.0) * size;
}

/* Entry i's winners so far are dropped and its levels go on. */
static void reopen(const cdyn__tableau_work *w, int i)
{
    w->error[i] = w->relative[i] = w->least_error[i] = INFINITY;
    w->open[i] = ENTRY_OPEN;
}

/* The error of a central difference is a series in h^2, so T[k][j] =
 * T[k][j-1] + (T[k][j-1] - T[k-1][j-1]) / (16^j - 1) removes its terms one
 * by one. Every entry of f is judged on its own: rows of a mechanism can
 * be 1e16 apart in size and in time scale, and judged together, relative
 * to the largest, a slow row's convergence ended the levels before a
 * 100 kHz row's steps were short enough (q'' 100 % off, with CDYN_OK).
 * The winner is chosen relative to its own size: steps far longer than
 * the scale f varies on give differences of about |f| / h^order, near 0
 * and near each other, whose absolute estimates are small (an angle of
 * many turns: such an entry, -1e-3 with an estimate of 3e-7, beat the
 * converged 4374 with 4.6e-6 and made a crank's accelerations wrong in
 * sign with CDYN_OK). But where the derivative is 0 (a prescribed motion
 * at a zero of its acceleration) no entry is small relative to itself,
 * and the finest steps' rounding, large and as far off as itself, won
 * (0.18 of the acceleration's amplitude, with CDYN_OK): without an entry
 * within 1e-2 of itself the smallest absolute estimate wins.
 * Levels that agree and are followed by one that contradicts them
 * (contradicted()) were no convergence: steps that are whole periods of a
 * prescribed motion (2.4e-3 s and 6e-4 s at 5 kHz) agree exactly, and
 * steps of several turns of a crank agree by chance (to 1e-5 at 1.2e5 rad,
 * then the next level was 12 times as large). The entry's winners so far
 * are dropped; and an entry that stopped is checked so against the next
 * level when another entry needs it (judged one by one, a crank's row
 * stopped on such a chance agreement where, judged with the other row, it
 * had gone on). With `noise`, no estimate counts below the rounding of its
 * step's quotients. */
cdyn_status cdyn__tableau_derivative(int order, int m, int m1, double t, double c, int levels,
                                     int most, int prefetched, const cdyn__tableau_rounding *noise,
                                     cdyn__offset_fn f, void *ctx, const cdyn__tableau_work *w,
                                     double *out, double *best_out)
{
    double *plus = w->plus, *minus = w->minus, *center = w->center;
    double *row = w->row, *previous = w->previous;
    double *error = w->error, *relative = w->relative, *least_error = w->least_error;
    double *open = w->open;
    for (int i = 0; i < m; ++i) reopen(w, i);
    cdyn_status st = CDYN_OK;
    double step = c;
    for (int k = 0; st == CDYN_OK && k < most; ++k, step *= 0.25) {
        /* past `levels` an entry goes on only while it is not within 1e-6
         * of itself, and once more after levels that agreed exactly
         * (whole periods can make all of them agree) */
        int going = 0;
        for (int i = 0; i < m; ++i) {
            if (open[i] == ENTRY_OPEN && k >= levels && relative[i] <= 1e-6 &&
                (error[i] > 0.0 || k > levels))
                open[i] = ENTRY_PENDING;
            going |= open[i] == ENTRY_OPEN;
        }
        if (!going) break;
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
            for (int i = 0; i < m; ++i) {
                entry[i] = left[i] + (left[i] - up[i]) / (factor - 1.0);
                if (open[i] != ENTRY_OPEN) continue;
                double e = larger(fabs(entry[i] - left[i]), fabs(entry[i] - up[i]));
                /* no estimate below the rounding of this step's quotients
                 * (entries that agree exactly because f's values are the
                 * same bits there are no converged ones: a prescribed
                 * motion of 1e-6 m about an offset of 100 m won with an
                 * estimate of 0 at the fine steps, and q'' came back
                 * 4e6 times its amplitude off) */
                if (noise) {
                    double floor = quotient_rounding(noise, order, i, h, 1.0);
                    if (e < floor) e = floor;
                }
                double r = e == 0.0 ? 0.0 : e / fabs(entry[i]);
                if (r < relative[i] || (r == relative[i] && e < error[i])) {
                    error[i] = e;
                    relative[i] = r;
                    out[i] = entry[i]; /* (out[i] is written once error[i] is finite) */
                }
                if (e < least_error[i]) {
                    least_error[i] = e;
                    w->least[i] = entry[i];
                }
            }
        }
        const double *diagonal = row + (size_t)k * m1;
        const double *before = previous + (size_t)(k > 0 ? k - 1 : 0) * m1;
        for (int i = 0; k > 0 && i < m; ++i) {
            if (open[i] == ENTRY_PENDING) { /* (out[i] is written: it stopped on it) */
                if (contradicted(fabs(diagonal[i] - out[i]), out[i], diagonal[i], error[i]) &&
                    k + 1 < most)
                    reopen(w, i);
                else
                    open[i] = ENTRY_DONE;
                continue;
            }
            if (open[i] != ENTRY_OPEN) continue;
            double moved = fabs(diagonal[i] - before[i]);
            if (relative[i] <= 1e-4 && moved > 2.0 * error[i]) {
                /* rounding has taken over, unless the move contradicts
                 * the winner (without `noise`, a DAE's inputs, checked
                 * before: only after an estimate of exactly 0) */
                int against = contradicted(moved, out[i], diagonal[i], error[i]);
                if (!against || (!noise && error[i] > 0.0) || k + 1 >= most)
                    open[i] = ENTRY_PENDING;
                else
                    reopen(w, i);
            } else if (noise && k >= 4 && (relative[i] > 1e-4 || error[i] == 0.0)) {
                /* a derivative of 0 up to the rounding: its estimates and
                 * its last move are within 64 times the rounding of the
                 * quotients at this step, past the first four (steps that
                 * are whole periods of a prescribed motion, at multiples
                 * of 64 / c Hz, make those agree to the rounding) */
                double rounding = quotient_rounding(noise, order, i, h, 64.0);
                if (least_error[i] <= rounding && moved <= rounding) open[i] = ENTRY_DONE;
            }
        }
        double *swap = previous;
        previous = row;
        row = swap;
    }
    double best = 0.0;
    for (int i = 0; i < m; ++i) {
        if (relative[i] > 1e-2 && least_error[i] < INFINITY) { /* none within 1e-2 of itself */
            out[i] = w->least[i];
            error[i] = least_error[i];
        }
        best = larger(best, error[i]);
    }
    *best_out = isnan(best) ? INFINITY : best;
    return st;
}

/* The size of entry i's values, whose rounding the differences carry:
 * the largest |f_i| at the steps, and its terms when the caller knows
 * them (at a consistent state an algebraic equation's value is its
 * residual, about 0, while its terms are as large as its inputs: THEORY
 * T3.3). */
static double value_size(int i, const double *terms, const double *a, const double *b)
{
    return fmax(terms ? terms[i] : 0.0, fmax(fabs(a[i]), fabs(b[i])));
}

/* A slow drift on large terms (a reservoir of 1e7 Pa drawn down by
 * 1e-3 Pa/s moves by 6e-9 Pa, 3 ulps, over 6e-6 s): a difference whose
 * rounding eps size / h is above this part of it goes on to longer steps. */
#define TIME_ROUNDING 1e-6

/* The two central differences D0 (step h0) and D1 (h1 = h0 / 4) agree
 * entry by entry when their distance is within the rounding of the
 * quotients (D0, the longer step, is then the better) or within 1e-4 of
 * the extrapolated E = D1 + (D1 - D0) / 15 (whose error is then about
 * 1e-4^2 / 200 of it for a smooth input: the h^4 term over the h^2 term
 * is about (w h0)^2 / 6, and the h^2 term is the distance). Entries that
 * agree are written to out, the others are marked NaN there. With terms,
 * an entry that agrees to the rounding but whose D0 is not within
 * TIME_ROUNDING of itself gets D0 in longer[i] and its size in size[i]
 * (NaN in longer[i] for the others), unless it is 0 at both steps and,
 * where f was probed further ahead (probe, may be NULL), the same bits
 * there. Returns how many do not agree. */
static int time_levels_disagree(int m, double h0, double h1, const double *plus0,
                                const double *minus0, const double *plus1, const double *minus1,
                                const double *probe, const double *terms, double *longer,
                                double *size, double *out)
{
    int count = 0;
    for (int i = 0; i < m; ++i) {
        double d0 = (plus0[i] - minus0[i]) / (2.0 * h0), d1 = (plus1[i] - minus1[i]) / (2.0 * h1);
        double extrapolated = d1 + (d1 - d0) / 15.0, distance = fabs(d1 - d0);
        double s = fmax(value_size(i, terms, plus0, minus0), value_size(i, NULL, plus1, minus1));
        longer[i] = NAN;
        if (distance <= 4.0 * DBL_EPSILON * s / h1) {
            out[i] = d0;
            size[i] = s;
            int moved = d0 != 0.0 || d1 != 0.0 || (probe && probe[i] != plus0[i]);
            if (terms && moved && DBL_EPSILON * s / h0 > TIME_ROUNDING * fabs(d0))
                longer[i] = d0;
        } else if (distance <= 1e-4 * fabs(extrapolated)) {
            out[i] = extrapolated;
        } else {
            out[i] = NAN;
            ++count;
        }
    }
    return count;
}

/* The entries with a number in longer (their D at the step h0 there, their
 * size in size) go on with steps 4 h0, 16 h0, ... (as representable at
 * t), up to CDYN__TIME_LONGER of them, into out (plus, minus: m1 doubles
 * of scratch each): while each D agrees with the one a step shorter to
 * that one's rounding (4 eps size / h, as the first two levels), it is
 * the better, and the entry stops once its rounding eps size / h is
 * within TIME_ROUNDING of it. A D that does not agree ends the entry:
 * the steps have reached the time scale of its input, or a jump. Its
 * extrapolation with the shorter one is taken when the two are within
 * 1e-4 of it (as the first two levels), else the shorter D stays. */
static cdyn_status longer_steps(int m, double t, double h0, cdyn__offset_fn f, void *ctx,
                                double *longer, double *size, double *plus, double *minus,
                                double *out)
{
    double shorter = h0, step = h0;
    for (int k = 0; k < CDYN__TIME_LONGER; ++k) {
        int going = 0;
        for (int i = 0; i < m; ++i) going |= !isnan(longer[i]);
        if (!going) break;
        step *= 4.0;
        volatile double ahead = t + step;
        double h = ahead - t;
        cdyn_status st = f(ctx, h, plus);
        if (st == CDYN_OK) st = f(ctx, -h, minus);
        if (st != CDYN_OK) return st;
        for (int i = 0; i < m; ++i) {
            if (isnan(longer[i])) continue;
            double d = (plus[i] - minus[i]) / (2.0 * h), distance = fabs(d - longer[i]);
            size[i] = value_size(i, size, plus, minus);
            if (distance <= 4.0 * DBL_EPSILON * size[i] / shorter) {
                out[i] = longer[i] = d;
                if (DBL_EPSILON * size[i] / h <= TIME_ROUNDING * fabs(d)) longer[i] = NAN;
                continue;
            }
            double extrapolated = longer[i] + (longer[i] - d) / 15.0;
            if (distance <= 1e-4 * fabs(extrapolated)) out[i] = extrapolated;
            longer[i] = NAN;
        }
        shorter = h;
    }
    return CDYN_OK;
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
                                  const double *terms, cdyn__offset_fn f, void *ctx,
                                  const cdyn__tableau_work *w, double *spare, double *out,
                                  double *best)
{
    volatile double ahead = t + c, ahead1 = t + 0.25 * c; /* as in the tableau */
    double h0 = ahead - t, h1 = ahead1 - t, *below = w->row; /* f(-h1) */
    *best = 0.0;
    cdyn_status st = f(ctx, h0, w->plus);
    if (st == CDYN_OK) st = f(ctx, -h0, w->minus);
    if (st != CDYN_OK) return st;
    /* f the same bits at t +- h0: it does not depend on t there, unless a
     * drift on large terms moved them by less than an ulp (1e-4 Pa/s on
     * 1e7 Pa: 6e-10 Pa against ulps of 1.9e-9): with terms known, f at
     * t + 256 h0 (as representable) decides, one more evaluation (drifts
     * down to about eps terms / 3e-3 s show there) */
    double *probe = NULL;
    if (memcmp(w->plus, w->minus, sizeof(double) * (size_t)m) == 0) {
        if (terms) {
            volatile double further = t + 256.0 * c;
            probe = spare + 2 * (size_t)m1;
            st = f(ctx, further - t, probe);
            if (st != CDYN_OK) return st;
        }
        if (!probe || memcmp(w->plus, probe, sizeof(double) * (size_t)m) == 0) {
            for (int i = 0; i < m; ++i) out[i] = 0.0;
            return CDYN_OK;
        }
    }
    st = f(ctx, h1, w->center);
    if (st == CDYN_OK) st = f(ctx, -h1, below);
    if (st != CDYN_OK) return st;
    /* the longer steps' D and size in w->least and w->error (the tableau
     * sets those afresh), their values in spare */
    double *longer = w->least, *size = w->error;
    int count = m;
    if (h1 > 0.0 && h1 < h0)
        count = time_levels_disagree(m, h0, h1, w->plus, w->minus, w->center, below, probe,
                                     terms, longer, size, out);
    else
        for (int i = 0; i < m; ++i) out[i] = longer[i] = NAN;
    st = longer_steps(m, t, h0, f, ctx, longer, size, spare, spare + m1, out);
    if (st != CDYN_OK || count == 0) return st;
    /* entries that vary faster than the steps, or jump near t: the tableau
     * for those alone (the others would lose accuracy to its finer steps'
     * rounding), its first two levels from these evaluations. No floor at
     * the rounding of the terms there: they disagreed beyond it, and where
     * the finest steps no longer see the input (a ramp's end at t, where
     * its second derivative jumps and its first is 0) their estimate of
     * exactly 0 is the right winner, which such a floor turned into one
     * 5e-7 of the rates off (examples/looped_network at t = 1 s) */
    marked_entries e = {f, ctx, out, spare, m};
    gather_marked(m, out, w->plus, w->plus);
    gather_marked(m, out, w->minus, w->minus);
    gather_marked(m, out, w->center, w->center);
    double *result = spare + m1;
    st = cdyn__tableau_derivative(1, count, m1, t, c, 3, levels, 1, NULL, marked_offset, &e, w,
                                  result, best);
    if (st != CDYN_OK || !isfinite(*best)) return st;
    for (int i = 0, j = 0; i < m; ++i)
        if (isnan(out[i])) out[i] = result[j++];
    return CDYN_OK;
}
