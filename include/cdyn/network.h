/**
 * @file network.h
 * Large sparse networks: linear velocity constraints with a sparse W and a
 * block-diagonal M (THEORY T1.1, T1.5, T1.6), in the optional library
 * cdyn_sparse (built when CHOLMOD is found; target cdyn::sparse).
 *
 * Dynamics  M v' = F + W^T lambda  with  W v' = g  (W m x n, sparse; M n x n
 * block diagonal, symmetric positive definite blocks). For a hydraulic
 * network v are the pipe flows, W the node-pipe incidence (areas or +-1),
 * lambda the junction pressures and g = b'(t) - W' v (0 for fixed
 * junctions). The rates and the pressures come from the range-space form
 * (docs/theory.md, "Sparse networks"):
 *
 *     S lambda = g - W M^{-1} F,   S = W M^{-1} W^T,   v' = M^{-1} (F + W^T lambda)
 *
 * with S (m x m, the weighted graph Laplacian of a network) factored by
 * CHOLMOD's sparse Cholesky. Its pattern is fixed by W's at create (fill-
 * reducing ordering and symbolic analysis once); cdyn_network_load() takes
 * the values of M and W and factors, cdyn_network_solve() is the per-step
 * call (two triangular solves and products with W and the M blocks).
 *
 * Rank policy (the one of cdyn, src/rank.h): S is equilibrated by powers
 * of two and is positive definite when every Cholesky pivot keeps
 * L_jj^2 > 1e3 eps (relative) and, since pivots alone can hide a
 * dependent row (a closed ring of inertances 1, 1e8 and 1e12 passed
 * them), a step of inverse iteration with the factor finds no
 * eigenvalue at or below 1e3 eps; otherwise the constraint rows that
 * depend on the others are named (cdyn_network_redundant_rows(); the
 * largest entry of the near null vector for the second test) and the load
 * fails with CDYN_ERR_SINGULAR. The iteration starts from a vector
 * oriented by the signs of W (along every pipe of two entries), so each
 * junction balance may be written "in - out" or "out - in": the verdict
 * is the same either way. S does not change when states are
 * rescaled and changes only by the equilibration when equations are, so
 * the verdict is the same in any units. The message tells a W that is
 * rank deficient (a part not joined to the ambient, a duplicated
 * balance) from a W of full rank whose S is singular to working accuracy
 * because the conductances it combines are too far apart (a supply line
 * 1e13 times the inertance of the dead-end stub after it). Every solve is certified by the
 * backward error of its result (up to 4 refinement steps if needed): CDYN_OK
 * means M v' - F - W^T lambda and W v' - g vanish to a few rounding errors
 * of their own terms.
 *
 * Minimum-order ODE (THEORY T1.6): when W has the pattern of an incidence
 * matrix (at most two entries per column; a pipe with one entry joins the
 * ambient) and every junction is connected to the ambient,
 * cdyn_network_partition() gives a spanning tree: its m pipes are the
 * dependent states, the other n - m (one per loop) the independent ones.
 * cdyn_network_complete() fills the dependent flows from the independent
 * ones so that W v = b exactly (O(n), no factorization): a caller
 * integrates the loop flows vbar, completes v, evaluates F(v) and takes
 * vbar' from cdyn_network_solve()'s v'.
 *
 * Lifecycle: cdyn_network_create() (pattern; allocates), cdyn_network_load()
 * when M or W change (the factor's storage is reused),
 * cdyn_network_solve() per step.
 * Allocation per call: cdyn_network_solve() and cdyn_network_complete()
 * allocate nothing (CHOLMOD's allocations included: the triangular solves
 * with its factor are cdyn's own); cdyn_network_load() allocates nothing
 * when CHOLMOD chose a simplicial factor, and CHOLMOD's supernodal update
 * buffer (allocated and freed inside, the same 2 allocations at every
 * load) when it chose a supernodal one (large networks). The object calls no user code. One
 * object must not be used from two threads at once; distinct objects are
 * independent.
 *
 * Aliasing: results are computed in the object's workspace and copied out
 * last, so outputs may alias inputs; the two outputs of
 * cdyn_network_solve() must not overlap each other (CDYN_ERR_ARG).
 *
 * Failure semantics: a failed call leaves its outputs untouched and sets
 * the message (cdyn_network_last_error()). A cdyn_network_load() refused
 * for its arguments (NULL, NaN/Inf) keeps the previous load; one that fails
 * on the values (CDYN_ERR_SINGULAR, CDYN_ERR_NOMEM) leaves the object
 * without a factorization: cdyn_network_solve() and
 * cdyn_network_complete() then return CDYN_ERR_ARG until a load succeeds
 * (the object stays usable).
 *
 * Conventions: W in compressed sparse column form (colptr n + 1 entries,
 * 0-based rowind sorted within each column, no duplicates), its values in
 * the same order; indices reported to the caller are 0-based.
 */
#ifndef CDYN_NETWORK_H
#define CDYN_NETWORK_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque sparse network object (n states, m constraints). */
typedef struct cdyn_network cdyn_network;

/**
 * Analyse a network: W's pattern (m x n, compressed sparse columns) and the
 * block structure of M, then order and symbolically factor S = W M^-1 W^T.
 *
 * n, m     1 <= n, 0 <= m <= n.
 * colptr   n + 1 column pointers (colptr[0] = 0, non-decreasing).
 * rowind   colptr[n] row indices in [0, m), strictly increasing in a column.
 * blocks   nblocks block sizes (each >= 1, summing to n) of the block-
 *          diagonal M, in state order; NULL (nblocks ignored) for a
 *          diagonal M.
 * status   out (may be NULL): CDYN_OK, CDYN_ERR_ARG (sizes, a malformed
 *          pattern; no message is kept, the reason is in the status only),
 *          CDYN_ERR_NOMEM.
 * The pattern is copied. Returns the object (free with
 * cdyn_network_free()) or NULL.
 */
CDYN_API cdyn_network *cdyn_network_create(int n, int m, const int *colptr, const int *rowind,
                                           const int *blocks, int nblocks, cdyn_status *status);

/** Free the object; NULL is allowed. */
CDYN_API void cdyn_network_free(cdyn_network *net);

/** Number of states n (-1 for NULL). */
CDYN_API int cdyn_network_size(const cdyn_network *net);

/** Number of constraint rows m (-1 for NULL). */
CDYN_API int cdyn_network_rows(const cdyn_network *net);

/** Number of values of M that cdyn_network_load() reads: n for a diagonal M,
 * the sum of the squared block sizes otherwise (-1 for NULL). */
CDYN_API long cdyn_network_mass_values(const cdyn_network *net);

/** Number of stored entries of W, colptr[n] (-1 for NULL). */
CDYN_API long cdyn_network_nonzeros(const cdyn_network *net);

/**
 * Load the values of M and W and factor S (THEORY T1.5; docs/theory.md
 * "Sparse networks").
 *
 * M   cdyn_network_mass_values() numbers: the diagonal (diagonal M) or the
 *     blocks one after another, each column-major and full (only the lower
 *     triangle is used; every value must be finite, CDYN_ERR_NONFINITE).
 *     A block is positive definite by the definiteness policy, checked
 *     also by inverse iteration (a singular block whose pivots pass, the
 *     Laplacian of a ring of weights 1, 1e-8 and 1e-12, is refused).
 * W   cdyn_network_nonzeros() values in the pattern's order.
 * Errors: CDYN_ERR_ARG (NULL), CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR (a
 * block of M not positive definite, named in the message; or S rank
 * deficient: the redundant rows are named by cdyn_network_redundant_rows()
 * and in the message), CDYN_ERR_NOMEM (CHOLMOD ran out of memory).
 */
CDYN_API cdyn_status cdyn_network_load(cdyn_network *net, const double *M, const double *W);

/**
 * Whether a load may keep redundant rows out instead of failing (default
 * 0: it fails with CDYN_ERR_SINGULAR). With allow != 0 a load that finds
 * rows dependent on the others names them (cdyn_network_redundant_rows())
 * and succeeds; their multipliers are then 0 (for a network without an
 * ambient connection, the junction whose pressure becomes the reference),
 * the rates satisfy the other rows, and a solve is CDYN_OK only if the
 * kept-out rows hold too (their residuals are in the certificate):
 * inconsistent right-hand sides g fail with CDYN_ERR_SINGULAR. The
 * mechanism counterpart is a redundant joint (THEORY T4.7). Takes effect
 * at the next load. Errors: CDYN_ERR_ARG (NULL).
 */
CDYN_API cdyn_status cdyn_network_set_allow_redundant(cdyn_network *net, int allow);

/**
 * The constraint rows the last load found dependent on the others (each a
 * junction balance implied by the rest, e.g. one per part of a network not
 * joined to the ambient), in the order found. Writes them to rows (may be
 * NULL; room for cdyn_network_rows() entries) and returns their
 * count: after a failed load, the rows that made it fail; after a
 * successful one, 0, or the rows kept out under
 * cdyn_network_set_allow_redundant(). -1 for NULL net.
 */
CDYN_API int cdyn_network_redundant_rows(const cdyn_network *net, int *rows);

/**
 * min L_jj^2 / max L_jj^2 of the factor of the equilibrated S from the last
 * successful load: 1 / cond is at most this ratio (a cheap indicator, not
 * an estimate); NaN without a successful load.
 */
CDYN_API double cdyn_network_pivot_ratio(const cdyn_network *net);

/**
 * Rates and multipliers: solve M v' = F + W^T lambda, W v' = g with the
 * loaded factorization (THEORY T1.5, range-space form), certified by the
 * backward error (up to 4 refinement steps with the same factor when the
 * first solve misses it: an ill-conditioned S costs more per call).
 *
 * F       n forces.
 * g       m constraint right-hand sides, or NULL for 0.
 * vdot    out: n rates; lambda out: m multipliers (may be NULL when not
 *         wanted). Outputs may alias inputs but not each other.
 * Errors: CDYN_ERR_ARG (NULL, overlapping outputs, no successful load),
 * CDYN_ERR_NONFINITE (F or g, or a solution that overflows), CDYN_ERR_SINGULAR (the backward error stays above
 * its tolerance: S too ill-conditioned for the answer to be trusted).
 */
CDYN_API cdyn_status cdyn_network_solve(cdyn_network *net, const double *F, const double *g,
                                        double *vdot, double *lambda);

/** Componentwise backward error of the last successful solve (see
 * docs/theory.md); NaN before one. */
CDYN_API double cdyn_network_backward_error(const cdyn_network *net);

/**
 * The spanning-tree partition (THEORY T1.6), from the pattern: the
 * independent states (n - m, the co-tree: one per loop, in increasing
 * order) and the dependent ones (m, the tree; dependent[i] is the pipe that
 * joins junction i to its parent, or to the ambient). Either output may be
 * NULL. Returns n - m (the length of the independent list), or -1 for NULL
 * net and, with the message, when the rows have no spanning tree (a column
 * of W has more than two entries, or a junction is not connected to the
 * ambient; the message names the first such column or row).
 */
CDYN_API int cdyn_network_partition(cdyn_network *net, int *independent, int *dependent);

/**
 * Complete a state: overwrite the dependent entries of v (n; the tree
 * pipes of cdyn_network_partition()) so that W v = b, from the independent
 * entries, with the loaded W, leaves to root along the tree: O(n), no
 * factorization (THEORY T1.6, T1.7).
 *
 * b   m right-hand sides (prescribed inflows), or NULL for 0.
 * Errors: CDYN_ERR_ARG (NULL v, no successful load), CDYN_ERR_NONFINITE
 * (v's independent entries or b, or a dependent flow that overflows),
 * CDYN_ERR_SINGULAR (no spanning tree, as
 * for cdyn_network_partition(); or a tree entry of W is 0). v is untouched
 * on error.
 */
CDYN_API cdyn_status cdyn_network_complete(cdyn_network *net, double *v, const double *b);

/** Message of the last failed call on this object ("" if none); lives
 * until the next call on the object. */
CDYN_API const char *cdyn_network_last_error(const cdyn_network *net);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_NETWORK_H */
