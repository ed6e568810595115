/**
 * @file newton.h
 * Newton's method for algebraic equations G(x) = 0 with a column-pivoted QR
 * step and an SVD outer-inverse fallback where the Jacobian loses rank
 * (THEORY T2). The one solver every algebraic solve in cdyn uses: algebraic
 * states of a DAE (T3), dependent coordinates and projection (T4.9, T4.10).
 *
 * k equations in p unknowns, 1 <= k <= p. Square systems (k = p) step by a
 * pivoted QR of the equilibrated Jacobian (rows and columns scaled by
 * powers of two, so that the step and every decision are the same in any
 * units); wide systems (k < p) have their rank decided the same way and
 * take the minimum-norm step (in the caller's coordinates: the one choice
 * that depends on them) from a pivoted QR of J^T with equilibrated rows.
 * A square J with one non-zero per column, all in distinct rows (a scaled
 * permutation, such as the diagonal Jacobian of junctions that each leak
 * through their own orifice), is its own R once equilibrated and reordered:
 * it is solved by divisions, with the QR's rank verdict and ratio (the
 * exact ratio; LAPACK's QR, used above 64 unknowns, may differ from it in
 * the last bits).
 * When J is rank deficient (|R_jj| <= tol |R_00| of the equilibrated
 * matrix: the one rank policy of cdyn), that step uses the SVD of the
 * equilibrated J and its outer inverse J# (T2.3); the SVD is used only on
 * those steps.
 *
 * Convergence (in the manner of SUNDIALS' error weights): each unknown has
 * the tolerance tol_j = rtol |x_j| + atol_j and each equation the tolerance
 * gtol_i = sum_j |J_ij| tol_j (the residual a change of x within its
 * tolerance can make) unless the caller gives equation tolerances. At every
 * iterate the Newton correction dx = -J# G is computed; the solve has
 * converged when both
 *     max_j |dx_j| / tol_j <= 1     (the predicted error of x is within tolerance)
 *     max_i |G_i| / gtol_i <= 1     (the residual test)
 * hold at the returned x, so "converged" always means the residual test
 * holds there; a warm start is accepted only if it passes both. One
 * exception: when x meets the residual test, every |G_i| is within 64 eps
 * of its equation's terms (sum_j |J_ij x_j| and the part no unknown
 * accounts for), and either no step along the correction lowers the
 * residual any further, or the previous iterate met the residual test too
 * and the correction shrank by less than 30 % since (a root approached
 * linearly shrinks it so too, which is why G's size is checked:
 * test_newton), G is at its
 * rounding level and so is the correction (an ill-conditioned J amplifies
 * that rounding beyond tol): x is then as accurate as G can be evaluated,
 * the solve ends converged, and the report's error_ratio (> 1) tells how
 * far that is from the requested tolerance. Where no step lowers a
 * residual above that rounding, the Jacobian does not fit G (by
 * differences, in its noise): CDYN_ERR_NOCONV. All of this judges x by G as the callback
 * evaluates it: where the caller's own rounding hides the residual (a G
 * computed with cancellation that returns exactly 0 near the root), the
 * tests pass wherever G does, and x is as accurate as that evaluation. Defaults:
 * rtol = 1e-10; atol_j = rtol times the largest |x_j| of any converged
 * solution of this object so far (a value counts only when it exceeds its
 * tolerance: a flow converged to 1e-25 at a closed valve is zero), but
 * never more than the widest scale the equations at hand give x_j (their
 * other terms over its coefficient, below): one solution far out (1e20
 * where 3 is due next) would otherwise loosen every later solve until a
 * wrong root passed. Where no equation at the iterate gives x_j such a
 * scale (each has x_j's term alone, as far as that iterate shows) and the
 * correction still moves x_j by more than rtol |x_j|, the solve does not
 * end there but takes one more iterate, so that the fit over two iterates
 * (below) can find a constant hidden behind x_j's own stale term: an
 * orifice's flow warm-started at 100 times its root, beside a pressure
 * drop 1e-4 of that stale term, was otherwise returned as it was, within
 * the learned tolerance (test_newton; through a compliance of 1e-9 the
 * rate derived from it was 1e2 times too large, test_sparse_dae). A closed
 * valve's flow costs that one iterate too, and then keeps its learned
 * tolerance. For an unknown never seen non-zero, tol_j is at
 * least the change that moves each equation it enters by rtol of that
 * equation's other terms: those of the
 * other unknowns, and the part of |G| at the initial guess that no
 * unknown's term |J_il x_l| accounts for (beyond the rounding of |G| and
 * those terms: far from the root that rounding is no constant of the
 * equation), or, at any iterate where the
 * equation nearly holds (|G_i| below half of it), the affine part
 * |G_i - sum_l J_il x_l| there: a constant the unknowns' terms cancel
 * (the present iterate's, not the largest any iterate showed: the affine
 * part of k Q|Q| is that term itself, and one kept from an early iterate
 * passed a fresh solve with Q 10 % off, test_newton); or, from
 * the second iterate on, the constant c of G_i = c + s sum_l J_il x_l
 * fitted over two iterates (s = 1/p for a term a x^p; counted for
 * 1/8 <= s <= 1, beyond the error a Jacobian accurate to 1e-6 leaves in
 * it, and at most sum_l |J_il x_l|): 0.9 sin t behind -2 v|v| far from
 * the root, where G - J x is c + 2 v|v|. (So a flow heading for a root at
 * 0, seen from the junction equation it shares with other flows, is judged
 * against those flows. An equation made only of the unknown's own term,
 * a closed valve's k Q|Q|, says nothing of its scale and is skipped; one
 * where another unknown with a coefficient sits at exactly 0 is not such
 * an equation: a rod angle at 0 with a coefficient of 3e25 beside a crank
 * angle's term gives the crank angle its relative tolerance there, not a
 * scale from an equation it barely enters, test_newton.) And never below
 * 8 eps times the unknown's scale in
 * the largest equation it enters (that equation's other terms over its
 * coefficient): an equation whose terms all vanish at the solution (a
 * junction on a path without flow) would ask for an accuracy below the
 * rounding of the equations that determine the unknown. Both rules take
 * only coefficients that held over the solve's last step (changed by at
 * most half of themselves since the Jacobian at the iterate before): a
 * slope that vanishes at the root (a crank angle in r cos(angle) at dead
 * centre) gives the unknown no scale. Both rules also pass
 * over an equation that the unknown moves less than 1e-6 as much, for the
 * size of that equation's terms, as the equation with other terms it moves
 * most (among those whose terms are at least 1e-12 of the largest such,
 * the sizes compared in the rows of the equilibrated Jacobian D_r J D_c
 * of its factorization, where rescaling an equation does not change
 * them; in a row where an unknown at exactly 0 has a coefficient, against
 * the coefficients of the unknowns not at 0 only, so that an idle
 * unknown's large coefficient does not make the row's terms look like
 * rounding); such a coefficient may be a difference quotient's noise, and its
 * equation would set the unknown's scale at the equation's size over that
 * noise (a tolerance of 0.75 on a state of 0.05 was seen). And a scale
 * 1e32 times every non-zero value the unknown has taken in the solve is
 * replaced by rtol times those values (an equation it barely enters, 1e-303
 * x beside terms of 10, would say 1e303). A scale beyond the double range
 * (other terms over a coefficient that overflow) is no scale: that
 * equation is passed over too. A caller who knows
 * the magnitudes gives atol (cdyn_newton_set_tolerances).
 *
 * Iteration: starting from the caller's x (warm start), x <- x + dx, at
 * most max_iterations steps (real-time bound, T2.4), each halved while it
 * does not lower the weighted residual (cdyn_newton_set_max_backtracks()).
 * When two successive full corrections shrink by a factor near 2 (a double
 * root, e.g. the flow through a valve closing to zero, T2.5), the doubled
 * step is tried first and kept when it meets the residual test, unless it
 * puts an unknown exactly on 0 where G is not at its rounding (there J
 * may vanish: an orifice with a pressure drop of 1e-17 Pa, from a guess
 * of 1e-3 m^3/s, ended CDYN_ERR_NOCONV with "rank 0"). When the
 * bound is reached, x holds the iterate with the smallest weighted residual
 * (each iterate compared with the best so far under its own weights, which
 * both then share) and
 * the status is CDYN_ERR_NOCONV. On the SVD path, a truncated step too small to reduce a
 * residual above tolerance is retried with every numerically non-zero
 * singular value and kept only if the residual falls; if that fails too,
 * the equations have no solution near x (the residual lies where the
 * Jacobian cannot reach): CDYN_ERR_NOCONV at the minimum-norm-type point of
 * T2.3, with its residual in the report.
 *
 * Lifecycle: cdyn_newton_create() allocates everything (LAPACK workspace
 * queried there); cdyn_newton_solve() and cdyn_newton_step() allocate
 * nothing. One object must not be used from two threads at once.
 *
 * Callbacks may call the read-only accessors of this object
 * (cdyn_newton_get_report(), cdyn_newton_last_error(), ...); any other call
 * on it (or, for the solver of a cdyn_dae or cdyn_mbs, on its owner) from
 * inside a callback returns CDYN_ERR_BUSY and changes nothing but the
 * message (cdyn_newton_last_error()).
 *
 * Aliasing: outputs are written after every input has been read, so any
 * input may alias an output.
 *
 * Failure semantics: on CDYN_ERR_ARG / CDYN_ERR_NONFINITE from argument
 * checks, outputs are untouched. On CDYN_ERR_NOCONV, CDYN_ERR_CALLBACK or a
 * non-finite residual met during the iteration, x holds the best iterate
 * found (at worst the initial guess) and the report describes the run.
 */
#ifndef CDYN_NEWTON_H
#define CDYN_NEWTON_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque Newton solver for k equations in p unknowns. */
typedef struct cdyn_newton cdyn_newton;

/**
 * Residual callback: G (length k) = G(x) for x (length p). Return 0 on
 * success, any other value to stop the solve (kept in the report).
 */
typedef int (*cdyn_residual_fn)(const double *x, double *G, void *user);

/**
 * Jacobian callback: J (k x p, column-major, leading dimension ldj) =
 * dG/dx at x. Return 0 on success, non-zero to stop the solve.
 */
typedef int (*cdyn_jacobian_fn)(const double *x, double *J, int ldj, void *user);

/** What the last solve or step did (THEORY T2.4). */
typedef struct cdyn_newton_report {
    int converged;              /**< 1 if a tolerance was met */
    int iterations;             /**< Newton steps taken */
    int residual_evaluations;   /**< residual callbacks, finite differences included */
    int svd_steps;              /**< steps that took the SVD outer-inverse path */
    int backtracks;             /**< step halvings of the line search */
    double residual_norm;       /**< ||G||_inf at the returned x */
    double step_norm;           /**< ||dx||_inf of the last step */
    int rank;                   /**< numerical rank of J at the last factorization */
    double smallest_kept;       /**< smallest kept singular value (SVD steps) or |R_rr| (QR steps) of
                                     the equilibrated J, relative to the largest (unit-free) */
    double largest_dropped;     /**< largest dropped one, relative likewise (0 when full rank) */
    int callback_code;          /**< non-zero return of the failing callback, else 0 */
    double residual_ratio;      /**< max_i |G_i| / gtol_i at the returned x (<= 1 when converged;
                                     -1 after cdyn_newton_step) */
    double error_ratio;         /**< max_j |dx_j| / tol_j of the correction predicted at the
                                     returned x (<= 1 when converged; -1 after cdyn_newton_step
                                     or when a failure left no correction computed there) */
} cdyn_newton_report;

/**
 * Allocate a solver for k equations in p unknowns, 1 <= k <= p.
 * status out (may be NULL): CDYN_OK, CDYN_ERR_ARG (bad sizes), CDYN_ERR_NOMEM.
 * Returns the object, or NULL on error. Free with cdyn_newton_free().
 */
CDYN_API cdyn_newton *cdyn_newton_create(int k, int p, cdyn_status *status);

/** Free the solver; NULL is allowed. */
CDYN_API void cdyn_newton_free(cdyn_newton *nt);

/** Iteration cap (>= 1; default 20). CDYN_ERR_ARG for NULL or < 1. */
CDYN_API cdyn_status cdyn_newton_set_max_iterations(cdyn_newton *nt, int max_iterations);

/**
 * Line search: halve a step whose weighted residual does not fall below the
 * current one, at most max_backtracks times (0..60; default 40). With 0 the
 * solve is plain Newton (T2.1), every full step taken. The halvings are
 * what carries Newton from a poor warm start (e.g. a valve reopening from
 * zero flow, where the linearization asks for a huge step) to the root's
 * neighbourhood; a full step that lowers the residual costs nothing extra.
 * Where no halving of the full step does, the halvings start once more
 * from the step at which no unknown moves by more than 16 times the larger
 * of its value and its learned magnitude (from a drained tank's flow of
 * 3e-22 m^3/s toward 3e-3, the correction was 5e15 and 40 halvings never
 * came back below the root). A direction along which still no halving
 * lowers the residual ends the solve with CDYN_ERR_NOCONV. Each halving
 * costs one residual evaluation.
 * CDYN_ERR_ARG for NULL or out of range, CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_newton_set_max_backtracks(cdyn_newton *nt, int max_backtracks);

/**
 * Tolerances of the unknowns: tol_j = rtol |x_j| + atol_j (see the file
 * comment). rtol in [1e-15, 1) (default 1e-10); atol: p values >= 0 and
 * finite in the units of the unknowns, copied, or NULL for the automatic
 * default. CDYN_ERR_ARG otherwise (settings unchanged).
 */
CDYN_API cdyn_status cdyn_newton_set_tolerances(cdyn_newton *nt, double rtol,
                                                const double *atol);

/**
 * Absolute tolerances of the equations, gtol (k values > 0 and finite, in
 * the units of the residuals, copied), replacing the default
 * gtol_i = sum_j |J_ij| tol_j; NULL restores the default. CDYN_ERR_ARG
 * otherwise (settings unchanged).
 */
CDYN_API cdyn_status cdyn_newton_set_residual_tolerances(cdyn_newton *nt, const double *gtol);

/**
 * Relative rank tolerance (THEORY T2.2): a QR pivot |R_jj| or singular value
 * s_j of the equilibrated J at or below tol * (largest) counts as zero.
 * Default 1e-10 (the one default of every module), tol in (0, 1).
 */
CDYN_API cdyn_status cdyn_newton_set_rank_tolerance(cdyn_newton *nt, double tol);

/**
 * Relative step for the forward-difference Jacobian used when the solve is
 * given no Jacobian callback: h_j = h * s_j with s_j the larger of |x_j| and
 * the unknown's magnitude known from atol or earlier solutions (when both
 * are 0, the largest such magnitude of any unknown, else 1). Default 1.5e-8
 * (about the square root of machine epsilon); h in (0, 1).
 */
CDYN_API cdyn_status cdyn_newton_set_fd_step(cdyn_newton *nt, double h);

/**
 * Solve G(x) = 0 (THEORY T2.1-T2.4).
 *
 * residual  required. jacobian: NULL for forward differences (p extra
 *           residual evaluations per step). Their entries carry about
 *           sqrt(eps) of their size, so a singular value of J below that
 *           (relative) is not seen: where the rank tolerance drops one
 *           that is not 0 to working accuracy and x would move along it by
 *           more than its tolerance, the solve fails (CDYN_ERR_NOCONV,
 *           "give the Jacobian callback"); one the quotients make exactly
 *           0 is invisible (a linear system of condition 4e9 was taken
 *           0.1 from its root, G within its tolerance): for such systems
 *           give the Jacobian.
 * user      passed to both callbacks.
 * x         in: initial guess (warm start), length p; out: the solution,
 *           or the best iterate on failure.
 *
 * Returns CDYN_OK (converged: both tests of the file comment hold at x);
 * CDYN_ERR_NOCONV (cap reached, or no solution near x; best iterate
 * returned, the message says which); CDYN_ERR_CALLBACK (a callback returned
 * non-zero: its code is in the report); CDYN_ERR_NONFINITE (x has NaN/Inf,
 * or a callback produced NaN/Inf); CDYN_ERR_ARG (NULL); CDYN_ERR_BUSY
 * (called from one of this solve's own callbacks). No allocation.
 */
CDYN_API cdyn_status cdyn_newton_solve(cdyn_newton *nt, cdyn_residual_fn residual,
                                       cdyn_jacobian_fn jacobian, void *user, double *x);

/**
 * One Newton step for a caller that holds J and G already (no callbacks):
 * dx = -J# G with J# the QR solution, or the SVD outer inverse when J is
 * rank deficient (THEORY T2.2, T2.3). For k < p, dx is the minimum-norm step.
 *
 * J   k x p, leading dimension ldj >= k (not modified).  G length k.
 * dx  out: length p.
 * Returns CDYN_OK (also for a rank-deficient J: see the report's rank);
 * CDYN_ERR_ARG; CDYN_ERR_NONFINITE (J or G, or a step that overflows; dx
 * untouched). The report is updated (iterations = 1).
 */
CDYN_API cdyn_status cdyn_newton_step(cdyn_newton *nt, const double *J, int ldj,
                                      const double *G, double *dx);

/**
 * Check a Jacobian callback: J(x) (k x p) against central differences of
 * G around x, each unknown moved by eps^(1/3) times its magnitude (as the
 * solver's own difference steps; near 0 on its rows' scale, status.h), and
 * the worst disagreement into report
 * (status.h, cdyn_jacobian_check: row, column, both values; suspect = 1
 * when it exceeds 1e-6 relative). For use when writing a model: it calls
 * G 4p times (4 more per column whose step is shortened or widened).
 * CDYN_OK when the check ran (whatever it found);
 * CDYN_ERR_ARG (NULL), CDYN_ERR_NONFINITE (x, G or J), CDYN_ERR_CALLBACK,
 * CDYN_ERR_BUSY; report is written only on CDYN_OK. The report of the last
 * solve and every setting are left as they were. No allocation.
 */
CDYN_API cdyn_status cdyn_newton_check_jacobian(cdyn_newton *nt, cdyn_residual_fn residual,
                                                cdyn_jacobian_fn jacobian, void *user,
                                                const double *x, cdyn_jacobian_check *report);

/**
 * Work done since cdyn_newton_create() or cdyn_newton_reset_counters(), in
 * the manner of CVODE's CVodeGetNum* counters: solves (that got past their
 * argument checks) and how many of them failed, Newton iterations, steps
 * by cdyn_newton_step(), residual evaluations (line search and difference
 * Jacobians included), Jacobian evaluations (callback or differences), SVD
 * steps and line-search halvings. For the solver of a cdyn_dae or cdyn_mbs
 * (cdyn_dae_newton(), cdyn_mbs_newton()) these are the owner's algebraic
 * solves or projections.
 */
typedef struct cdyn_newton_counters {
    long solves;                /**< cdyn_newton_solve() calls that ran */
    long failures;              /**< of those, the ones that did not return CDYN_OK */
    long iterations;            /**< Newton iterations of all solves */
    long steps;                 /**< cdyn_newton_step() calls */
    long residual_evaluations;  /**< residual callbacks */
    long jacobian_evaluations;  /**< Jacobian callbacks or difference Jacobians */
    long svd_steps;             /**< iterations that took the SVD outer-inverse path */
    long backtracks;            /**< line-search halvings */
} cdyn_newton_counters;

/**
 * Copy the counters (cdyn_newton_counters). CDYN_ERR_ARG for NULL. A
 * read-only accessor: allowed from inside a callback.
 */
CDYN_API cdyn_status cdyn_newton_get_counters(const cdyn_newton *nt, cdyn_newton_counters *counters);

/** Set every counter to 0. CDYN_ERR_ARG for NULL, CDYN_ERR_BUSY inside a callback. */
CDYN_API cdyn_status cdyn_newton_reset_counters(cdyn_newton *nt);

/** Copy the report of the last solve or step. CDYN_ERR_ARG for NULL nt or report. */
CDYN_API cdyn_status cdyn_newton_get_report(const cdyn_newton *nt, cdyn_newton_report *report);

/**
 * Why J was singular at the last rank-deficient step: rows (may be NULL)
 * receives the k - rank equations (0-based) that depend on the others, as
 * ranked by a pivoted QR of J^T; returns their count (0 if the last step had
 * full rank, -1 for NULL nt). Rows needs room for k entries. For the solver
 * of a cdyn_dae or cdyn_mbs, the owner's own factorizations of the same
 * Jacobian after a solve (the rates) count as steps.
 */
CDYN_API int cdyn_newton_dependent_rows(const cdyn_newton *nt, int *rows);

/**
 * The p - rank unknowns (0-based) that the pivoted QR of J ranked last at
 * the last rank-deficient step (the ones the equations do not determine);
 * returns their count (0 after a full-rank step, -1 for NULL nt). Cols
 * needs room for p entries.
 */
CDYN_API int cdyn_newton_dropped_columns(const cdyn_newton *nt, int *cols);

/** Message of the last failure on this object ("" if none; a static text for NULL). */
CDYN_API const char *cdyn_newton_last_error(const cdyn_newton *nt);

/** Number of unknowns p given at create time (-1 for NULL). */
CDYN_API int cdyn_newton_size(const cdyn_newton *nt);

/** Number of equations k given at create time (-1 for NULL). */
CDYN_API int cdyn_newton_rows(const cdyn_newton *nt);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_NEWTON_H */
