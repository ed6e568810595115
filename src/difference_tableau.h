/* Derivatives by central differences refined in a Richardson tableau:
 * the time terms of a mechanism (mbs_time.c: Phi_t, xi), and a DAE's
 * dF/dt and beta'(t) (cdyn__time_derivative: two levels verified against
 * each other, the tableau only where they disagree; the tableau's 8 more
 * evaluations of F per right-hand side cost 25-42 % on bench_stiff;
 * longer steps only where the rounding of large terms hides a slow
 * drift). */
#ifndef CDYN_DIFFERENCE_TABLEAU_H
#define CDYN_DIFFERENCE_TABLEAU_H

#include "cdyn/status.h"

#include <stddef.h>

/* The most levels a tableau takes (its work is sized for them). */
#define CDYN__TABLEAU_LEVELS 12

/* out (m values) = f at the offset tau from the point; CDYN_OK or the
 * failure's status (message kept by the caller's object). */
typedef cdyn_status (*cdyn__offset_fn)(void *ctx, double tau, double *out);

/* Scratch of m1 doubles each (plus, minus, center, least, and each
 * entry's error, relative, least_error and open), and of
 * CDYN__TABLEAU_LEVELS m1 each (row, previous); distinct. */
typedef struct {
    double *plus, *minus, *center, *least, *error, *relative, *least_error, *open;
    double *row, *previous;
} cdyn__tableau_work;

/* The vectors of m1 doubles a tableau of `levels` levels works in, and
 * their layout from base (in that order). */
#define CDYN__TABLEAU_WORK(levels) (8 + 2 * (levels))
cdyn__tableau_work cdyn__tableau_layout(double *base, size_t m1, int levels);

/* The rounding of f's entries: entry i carries about
 * eps (terms[i] + |tau| rates[i]) (rates may be NULL: 0). */
typedef struct {
    const double *terms, *rates;
} cdyn__tableau_rounding;

/* The derivative of order 1 or 2 of f at tau = 0 into out (m values):
 * central differences with the steps c 4^-k, k < levels (up to `most`,
 * <= CDYN__TABLEAU_LEVELS, see below), each made representable at t,
 * extrapolated to h -> 0 in a tableau. For order 2 w->center must hold
 * f(0). With `prefetched`, w->plus and w->minus hold f(+-h0) and
 * w->center f(h1) (h0 = c, h1 = c / 4 as representable at t; order 1
 * only): the first two levels reuse them. Every entry of f is judged on
 * its own: its tableau entries' errors are estimated by their distance
 * to their two parents, and the one whose estimate is smallest relative
 * to its own size wins; the entry stops once its best estimate is within
 * 1e-4 of its value and a new diagonal entry is twice as far off
 * (rounding has taken over), unless that move contradicts the winner
 * (beyond the entry's size; by a tenth of it after an estimate of exactly
 * 0; without `noise` only the latter): the levels agreed by chance (steps
 * that are whole periods of f, or far longer than its time scale), the
 * entry's winners so far are dropped and it goes on. With `noise` no
 * estimate counts below the rounding of its step's quotients. While it is not within 1e-6 of itself after
 * `levels` levels it goes on, up to `most` (and one more after an
 * estimate of exactly 0). With `noise` (may be NULL) it also stops from
 * the fifth level on once its estimates and its last move are within 64
 * times the rounding of the quotients (a derivative of 0). An entry that
 * stopped is checked against the next level's diagonal when another entry
 * needs that level: a move that contradicts it drops its winners and it
 * goes on. The levels end when no entry goes on.
 * When none of an entry's estimates came within 1e-2 of itself (a
 * derivative of 0 within the rounding) its smallest absolute estimate
 * wins instead. *best: the largest of the winners' estimates
 * (absolute), INFINITY when an entry had no finite one (out is then
 * partly unwritten). Returns f's status. */
cdyn_status cdyn__tableau_derivative(int order, int m, int m1, double t, double c, int levels,
                                     int most, int prefetched, const cdyn__tableau_rounding *noise,
                                     cdyn__offset_fn f, void *ctx, const cdyn__tableau_work *w,
                                     double *out, double *best);

/* A DAE's time derivatives without a callback: the first step [s]
 * (eps^(1/3) of a 1 s time scale), the tableau's levels where the first
 * two disagree (down to 3.7e-10 s) and the most longer steps where they
 * agree only to the rounding of large terms (up to CDYN__TIME_STEP
 * 4^CDYN__TIME_LONGER); their work is CDYN__TIME_WORK vectors (the
 * tableau's, laid out by cdyn__tableau_layout, then
 * cdyn__time_derivative's spare three, then the caller's terms at
 * CDYN__TIME_TERMS). */
#define CDYN__TIME_STEP 6e-6
#define CDYN__TIME_LEVELS 8
#define CDYN__TIME_LONGER 9
#define CDYN__TIME_TERMS (CDYN__TABLEAU_WORK(CDYN__TIME_LEVELS) + 3)
#define CDYN__TIME_WORK (CDYN__TIME_TERMS + 1)

/* The first derivative in t of f (m values) at tau = 0 into out, where
 * cdyn cannot know f's time scale (a DAE's dF/dt and beta'(t) in G_t:
 * THEORY T3.2, T3.3): central differences D0 and D1 stepped c and c / 4
 * (as representable at t), checked against each other entry by entry,
 * against the rounding of entry i's values: eps times the larger of
 * terms[i] (the size of the terms that make up f_i, which cancel where f_i
 * is a residual; terms NULL: 0) and |f_i| at the steps. f the same bits at
 * t +- h0 (and, with terms, at t + 256 c too: a slow drift on large terms
 * can leave its bits over +- h0): 0 exactly (2 evaluations, 3 with terms;
 * f does not depend on t there). Else (4 evaluations) each entry is D0
 * where D1 - D0 is within that rounding, the extrapolation
 * E = D1 + (D1 - D0) / 15 where it is within 1e-4 |E|. With terms, an
 * entry of D0 whose rounding eps size / c is above 1e-6 |D0| (a slow drift
 * on large terms; not one the same bits at all its steps) goes on to the
 * steps 4 c, 16 c, ... (2 evaluations each, up to CDYN__TIME_LONGER) while
 * each agrees with the one before to the rounding, until its rounding is
 * within 1e-6 of it; at one that does not, the extrapolation of the two
 * where they agree within 1e-4, else the shorter. The entries that are
 * none of these (f varies faster than about 0.025 / c rad/s, or jumps
 * within c of t) come from the tableau of cdyn__tableau_derivative from
 * c, 3 to `levels` levels, on those entries alone, without a rounding
 * floor (work as there, w->row holding f(-c/4) before; the longer steps
 * use w->least and w->error too; spare: 3 m1 more doubles). *best: 0, or
 * the tableau's estimate (INFINITY when no entry was finite: out then
 * holds NaN). Returns f's status. */
cdyn_status cdyn__time_derivative(int m, int m1, double t, double c, int levels,
                                  const double *terms, cdyn__offset_fn f, void *ctx,
                                  const cdyn__tableau_work *w, double *spare, double *out,
                                  double *best);

#endif
