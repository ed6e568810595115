/**
 * @file nullspace.h
 * Null-space reduction of linear velocity constraints (THEORY T1).
 *
 * Dynamics  M v' = F + W^T lambda  with constraints  W v = 0  (W is m x n,
 * full row rank) are reduced to the minimum-order ODE  Mbar vbar' = Fbar  in
 * d = n - m independent states vbar, and the dependent rates and the
 * constraint forces lambda (junction pressures) are recovered afterwards.
 *
 * The states are split by a column-pivoted QR of the equilibrated W (rows
 * and columns scaled by powers of two: the one rank policy of cdyn): the
 * first m pivot columns (a well-conditioned square block W2) become the
 * dependent states, the other d the independent ones. Every verdict (rank,
 * OK or CDYN_ERR_SINGULAR) is the same in any units, except for a W within
 * a factor of about 4 of the rank tolerance. Which states are chosen can
 * change with the units when several choices are about equally good (a
 * 1 x 2 W = [1 1.5] may make either state dependent): every such choice
 * gives the same rates v', forces lambda and recovered states, to
 * rounding, and its own well-conditioned W2 (cdyn_nullspace_condition());
 * cdyn_nullspace_set_preferred_dependent() fixes the choice when it
 * matters. The split ("partition") is chosen by cdyn_nullspace_factor()
 * and kept by cdyn_nullspace_update() while W2 stays well conditioned.
 *
 * History: from cdyn_nullspace_factor() on, W is equilibrated as for the
 * largest magnitude each of its entries has had (every successful factor
 * and update feeds it; a failed call leaves it as it was), not as for the
 * present W, so that a row or column that shrinks along a motion shows as
 * a loss of rank or conditioning instead of being scaled back to unit
 * size; the history changes with the units exactly as W does. For a W that
 * does not change (most hydraulic networks) this is the present W.
 *
 * Lifecycle: cdyn_nullspace_create() (allocates everything), then
 * cdyn_nullspace_factor() once per constraint pattern, then per step
 * cdyn_nullspace_update() if W changes and cdyn_nullspace_reduce() /
 * cdyn_nullspace_recover() or cdyn_nullspace_solve(). No per-step call
 * allocates memory. One object must not be used from two threads at once;
 * distinct objects are independent. When the object belongs to a cdyn_dae
 * or cdyn_mbs, calls from inside that owner's callbacks return
 * CDYN_ERR_BUSY.
 *
 * Aliasing: every result is computed in the object's workspace and copied
 * out last, so outputs may alias inputs (cdyn_nullspace_expand(ns, buf,
 * buf) works in place); two outputs of one call must not overlap
 * (CDYN_ERR_ARG).
 *
 * Conventions: matrices are column-major with a leading dimension, as in
 * LAPACK; indices reported to the caller are 0-based. The constraint
 * derivative term is passed as a vector c with  W v' = -c:  c = W' v for a
 * time-varying W (THEORY T1.3), c = -xi for a mechanism (THEORY T4.10), and
 * NULL when W is constant.
 *
 * Failure semantics: on any error the output arrays are untouched and the
 * object keeps its previous factorization, so it stays usable; the message
 * is available from cdyn_nullspace_last_error().
 */
#ifndef CDYN_NULLSPACE_H
#define CDYN_NULLSPACE_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque null-space object for n states and m constraints. */
typedef struct cdyn_nullspace cdyn_nullspace;

/**
 * Allocate a null-space object for n states and m constraints,
 * 1 <= n, 0 <= m < n, and query all LAPACK workspace.
 *
 * status  out (may be NULL): CDYN_OK, CDYN_ERR_ARG for bad sizes,
 *         CDYN_ERR_NOMEM.
 * Returns the object (free with cdyn_nullspace_free()) or NULL on error.
 */
CDYN_API cdyn_nullspace *cdyn_nullspace_create(int n, int m, cdyn_status *status);

/** Free the object; NULL is allowed. */
CDYN_API void cdyn_nullspace_free(cdyn_nullspace *ns);

/** Number of states n given at create time (-1 for NULL). */
CDYN_API int cdyn_nullspace_size(const cdyn_nullspace *ns);

/** Number of constraints m given at create time (-1 for NULL). */
CDYN_API int cdyn_nullspace_rows(const cdyn_nullspace *ns);

/**
 * Relative rank tolerance for W: a pivot |R_jj| <= tol * |R_11| of the
 * pivoted QR of the equilibrated W counts as zero (THEORY T1.2). Default
 * 1e-10 (the one default of every module); tol in (0, 1).
 * Returns CDYN_ERR_ARG for NULL or a value out of range (setting unchanged).
 */
CDYN_API cdyn_status cdyn_nullspace_set_rank_tolerance(cdyn_nullspace *ns, double tol);

/**
 * Condition limit for W2 (1-norm estimate of the equilibrated W2, so
 * unit-free): when cdyn_nullspace_update() finds cond(W2) above it, the
 * partition is chosen anew. Default 1e8; limit >= 1. Returns CDYN_ERR_ARG
 * for NULL or a value out of range.
 */
CDYN_API cdyn_status cdyn_nullspace_set_condition_limit(cdyn_nullspace *ns, double limit);

/**
 * Prefer some states as dependent: prefer (n flags, 0-based states; NULL
 * clears) marks states to be made dependent first. The next partition
 * choice takes, among the marked states, the independent columns of W that
 * a pivoted QR of the marked columns ranks first (at most m), and completes
 * the dependent set from the other states by the usual pivoted QR. cdyn_dae
 * uses it to keep massless states algebraic (THEORY T3.3). Takes effect at
 * the next factor (or reselecting update). CDYN_ERR_ARG for NULL ns.
 */
CDYN_API cdyn_status cdyn_nullspace_set_preferred_dependent(cdyn_nullspace *ns,
                                                            const int *prefer);

/**
 * Choose the partition of W by column-pivoted QR (dgeqp3) and factor W2
 * (THEORY T1.2). Call once per constraint pattern, or whenever the caller
 * wants the partition chosen anew.
 *
 * W    m x n, column-major, leading dimension ldw >= max(1, m); not modified.
 *
 * Returns CDYN_OK; CDYN_ERR_ARG (NULL W with m > 0, bad ldw);
 * CDYN_ERR_NONFINITE (NaN/Inf in W, or a finite W whose beta = -W2^-1 W1
 * overflows); CDYN_ERR_SINGULAR when W is rank
 * deficient: cdyn_nullspace_rank() and cdyn_nullspace_redundant_rows() then
 * say which constraint rows are dependent. No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_factor(cdyn_nullspace *ns, const double *W, int ldw);

/**
 * Refactor for a new W of the same pattern, keeping the partition unless
 * W2 becomes singular or its condition estimate exceeds the limit, in which
 * case the partition is chosen anew as by cdyn_nullspace_factor().
 * Before the first successful factor it behaves like cdyn_nullspace_factor().
 *
 * W        m x n, leading dimension ldw >= max(1, m).
 * changed  out (may be NULL): 1 if the partition differs from the previous
 *          one, else 0. Written only on success.
 *
 * Errors as for cdyn_nullspace_factor(). No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_update(cdyn_nullspace *ns, const double *W, int ldw,
                                           int *changed);

/**
 * The current partition: independent[0..d-1] and dependent[0..m-1] receive
 * the 0-based state indices (either pointer may be NULL). The order is the
 * order of vbar and of the dependent block used throughout. Returns d (the
 * length of the independent list), or -1 (with the message) for NULL ns,
 * when nothing has been factored, or when the two lists overlap.
 */
CDYN_API int cdyn_nullspace_partition(const cdyn_nullspace *ns, int *independent,
                                      int *dependent);

/**
 * 1-norm condition estimate (dgecon) of the equilibrated W2 of the current
 * factorization (unit-free up to the power-of-two scaling: a factor of up
 * to about 16 between unit systems), 1 when m = 0, or NaN when nothing has
 * been factored or ns is NULL.
 */
CDYN_API double cdyn_nullspace_condition(const cdyn_nullspace *ns);

/**
 * Largest |entry| of W2^{-1} W1 for the current factorization with every
 * state in units of its column's size in the history (the column's largest
 * entry, each row divided by its own largest): how fast a dependent state
 * moves per change of an independent one (the sensitivities that grow
 * without bound when the partition becomes a poor choice, even where W2
 * alone stays well conditioned, e.g. m = 1). Unit-free to rounding for
 * m = 1; for m > 1 a change of the states' units can move it by a factor
 * of up to about 4. 0 when m = 0, NaN when nothing has been factored or ns
 * is NULL.
 */
CDYN_API double cdyn_nullspace_dependence(const cdyn_nullspace *ns);

/**
 * Numerical rank of W found by the last cdyn_nullspace_factor() or
 * cdyn_nullspace_update() (m after any success: a kept partition proves
 * full rank), or -1 when nothing was factored or ns is NULL.
 */
CDYN_API int cdyn_nullspace_rank(const cdyn_nullspace *ns);

/**
 * After a CDYN_ERR_SINGULAR from factor/update: the m - rank constraint rows
 * (0-based) that depend on the others, chosen by a pivoted QR of W^T, are
 * written to rows[0..m-rank-1] (rows may be NULL to ask for the count).
 * Returns the count, 0 after a success (W of full rank), -1 for NULL ns.
 */
CDYN_API int cdyn_nullspace_redundant_rows(const cdyn_nullspace *ns, int *rows);

/**
 * Null-space basis alpha = Pi [I_d; -W2^{-1} W1] (THEORY T1.2), W alpha = 0.
 *
 * alpha  out: n x d, leading dimension ldalpha >= n.
 * Returns CDYN_OK, CDYN_ERR_ARG (NULL, bad ld, not factored). No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_alpha(const cdyn_nullspace *ns, double *alpha, int ldalpha);

/**
 * Time derivative of alpha for a time-varying W (THEORY T1.3):
 * alpha' = Pi [0; -W2^{-1} (W1' - W2' W2^{-1} W1)], so W alpha' = -W' alpha.
 *
 * Wdot       m x n, the derivative W' at the factored instant, ldwdot >= max(1, m).
 * alpha_dot  out: n x d, leading dimension ldalpha_dot >= n.
 * Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE (Wdot, or an alpha' that
 * overflows; alpha_dot untouched). No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_alpha_dot(cdyn_nullspace *ns, const double *Wdot,
                                              int ldwdot, double *alpha_dot,
                                              int ldalpha_dot);

/**
 * Full state from the independent one: v = alpha vbar (THEORY T1.2).
 * vbar (d) in, v (n) out. Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE
 * (vbar, or a dependent state that overflows; v untouched).
 */
CDYN_API cdyn_status cdyn_nullspace_expand(cdyn_nullspace *ns, const double *vbar, double *v);

/**
 * Full state with a constraint right-hand side: W v = -c with the given
 * independent part, v = Pi [vbar; beta vbar - W2^{-1} c] (THEORY T1.2, T1.5;
 * for a mechanism c = Phi_t gives the speeds of Phi_q q' + Phi_t = 0,
 * T4.10). c NULL is cdyn_nullspace_expand(). vbar (d), c (m) in, v (n) out.
 * Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE (vbar, c, or a dependent
 * state that overflows; v untouched). No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_complete(cdyn_nullspace *ns, const double *vbar,
                                             const double *c, double *v);

/**
 * Independent states of v: vbar = v[independent] (exact when W v = 0).
 * v (n) in, vbar (d) out. Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE.
 */
CDYN_API cdyn_status cdyn_nullspace_independent(cdyn_nullspace *ns, const double *v,
                                                double *vbar);

/**
 * Minimum-order equations Mbar vbar' = Fbar (THEORY T1.4):
 * Mbar = alpha^T M alpha, Fbar = alpha^T (F - M alpha' vbar), where
 * alpha' vbar = -Pi [0; W2^{-1} c].
 *
 * M     n x n, symmetric (both triangles read), ldm >= n.
 * F     length n.
 * c     length m with W v' = -c (c = W' v, or -xi for mechanisms); NULL = 0.
 * Mbar  out: d x d, ldmbar >= max(1, d) (both triangles written).
 * Fbar  out: length d.
 * Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE. No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_reduce(cdyn_nullspace *ns, const double *M, int ldm,
                                           const double *F, const double *c, double *Mbar,
                                           int ldmbar, double *Fbar);

/**
 * Dependent rates and constraint forces from vbar' (THEORY T1.5):
 * vhat' = -W2^{-1} (W1 vbar' + c), v' = Pi [vbar'; vhat'],
 * lambda = W2^{-T} (M v' - F)[dependent rows], so M v' - F - W^T lambda = 0.
 *
 * M, F, c     as for cdyn_nullspace_reduce().
 * vbar_dot    length d.
 * vdot        out: length n (full rates).
 * lambda      out: length m (junction pressures / constraint forces); may be
 *             NULL when not wanted.
 * Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE. No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_recover(cdyn_nullspace *ns, const double *M, int ldm,
                                            const double *F, const double *c,
                                            const double *vbar_dot, double *vdot,
                                            double *lambda);

/**
 * One call for a right-hand side: reduce (T1.4), solve Mbar vbar' = Fbar by
 * Cholesky, recover v' and lambda (T1.5).
 *
 * M, F, c  as for cdyn_nullspace_reduce(); M symmetric positive definite
 *          on the null space of W.
 * vdot     out: length n; vdot[independent] is vbar'.
 * lambda   out: length m, or NULL.
 * The result is certified: its backward error on M v' - W^T lambda = F,
 * W v' = -c must reach a few rounding errors (with up to two refinement
 * steps through the same factors), so its error is at most about the
 * condition of that system times machine epsilon (docs/theory.md).
 * Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR (Mbar
 * not positive definite by the definiteness policy, or an eigenvalue of
 * the equilibrated Mbar at or below 1e3 eps by a step of inverse
 * iteration (a singular Mbar whose pivots pass), or the system singular
 * to working accuracy),
 * CDYN_ERR_BUSY. No allocation.
 */
CDYN_API cdyn_status cdyn_nullspace_solve(cdyn_nullspace *ns, const double *M, int ldm,
                                          const double *F, const double *c, double *vdot,
                                          double *lambda);

/**
 * The message of the last failed call on this object ("" if none; a static
 * text for NULL). The string belongs to the object and is overwritten by the
 * next failure.
 */
CDYN_API const char *cdyn_nullspace_last_error(const cdyn_nullspace *ns);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_NULLSPACE_H */
