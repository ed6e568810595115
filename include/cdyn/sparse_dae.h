/**
 * @file sparse_dae.h
 * The minimum-order right-hand side of a large index-1 DAE with a diagonal
 * mass matrix and a sparse Jacobian (THEORY T3 with T2): m_j v_j' = F_j(v, t),
 * m_j >= 0. The states with mass are integrated (y = v_D); the massless
 * ones are algebraic (v_A), fixed by their equations F_A(v, t) = 0 through
 * cdyn_newton's iteration with a sparse LU of dF_A/dv_A (KLU, on the
 * power-of-two equilibrated block). Hydraulic networks with storage at the
 * junctions and massless orifices, circuits with resistive nodes.
 *
 * Part of the optional cdyn_sparse library (built when SuiteSparse is
 * found, like network.h). Junctions without storage (index 2) are
 * cdyn_network's (network.h: the balances as constraints W q = b, the
 * pressures as multipliers).
 *
 * Rank policy: dF_A/dv_A is equilibrated by powers of two; at every Newton
 * iterate its pivot ratio (klu_rcond) must exceed the core's rank
 * tolerance (1e-10), and at the solution KLU's estimate of its reciprocal
 * 1-norm condition (klu_condest) must. A block that fails (a valve closed
 * on a massless branch) is factored by a rank-revealing sparse QR
 * (SuiteSparseQR of its transpose, rows whose remaining 2-norm is below
 * 1e-10 of the largest row's ranked dependent). When that decides a rank
 * r < q cleanly (the reciprocal condition of the kept r x r triangle above
 * 1e-10), the Newton steps and the algebraic rates use its outer inverse:
 * the minimum-norm solution of the independent equations in the
 * equilibrated unknowns, as the dense cdyn_dae's SVD step (THEORY T2.3).
 * Such steps count as SVD steps in the Newton report and counters, and
 * cdyn_newton_dependent_rows() on cdyn_sparse_dae_newton() names the
 * dependent equations of the last such step (indices into the algebraic
 * states of cdyn_sparse_dae_split_states()); a deficiency first found at
 * the solution (the rates' factorization) is not reported there. The
 * rates must then pass the same
 * backward-error certificate, which a right-hand side outside the range of
 * the block fails (CDYN_ERR_SINGULAR). A block whose rank is not decided
 * cleanly is refused (CDYN_ERR_SINGULAR), never stepped through.
 *
 * Lifecycle: cdyn_sparse_dae_create(n, mass, pattern) analyses the pattern
 * once; cdyn_sparse_dae_set_model(); cdyn_sparse_dae_consistent() for
 * consistent initial values; then cdyn_sparse_dae_rhs() per integrator
 * stage. The first evaluation allocates KLU's numeric factorization; later
 * ones refactor in place with its pivot order and allocate nothing, unless
 * that pivot order fails the rank test, when KLU pivots afresh (allocation;
 * counted in cdyn_sparse_dae_pivotings()); a rank-deficient block
 * allocates SuiteSparseQR's factors at each of its factorizations
 * (cdyn_sparse_dae_rank_factorizations()). Each solve starts with chord
 * steps on the factorization of the last committed evaluation, as the
 * dense cdyn_dae's (a fresh Jacobian and the unchanged convergence test
 * judge the result); after a call that failed past its first Jacobian the
 * next solve starts without them, so its result may differ from an
 * untroubled object's within the Newton tolerance. One object must not be
 * used from two threads at once. On any error the outputs are untouched and
 * the object keeps its last committed state.
 *
 * Callbacks may call the read-only accessors of this object; any other call
 * on it from inside a callback returns CDYN_ERR_BUSY.
 */
#ifndef CDYN_SPARSE_DAE_H
#define CDYN_SPARSE_DAE_H

#include "newton.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque sparse index-1 DAE. */
typedef struct cdyn_sparse_dae cdyn_sparse_dae;

/** F(v, t) into F (n). Return 0 on success. */
typedef int (*cdyn_sparse_dae_force_fn)(double t, const double *v, double *F, void *user);

/** dF/dv at (t, v): its nnz values in the order of the pattern given at
 * create. Return 0 on success. */
typedef int (*cdyn_sparse_dae_jacobian_fn)(double t, const double *v, double *values,
                                           void *user);

/** dF/dt at fixed v into dFdt (n). Return 0 on success. */
typedef int (*cdyn_sparse_dae_time_fn)(double t, const double *v, double *dFdt, void *user);

/**
 * Analyse the DAE: n >= 1 states, mass (n values, finite, >= 0; 0 marks an
 * algebraic state and its equation), and the pattern of dF/dv in
 * compressed sparse columns (colptr: n + 1 entries from 0, non-decreasing;
 * rowind: colptr[n] row indices in [0, n), no repeats within a column;
 * both copied). status (may be NULL): CDYN_OK, CDYN_ERR_ARG (sizes, NULL,
 * a malformed pattern), CDYN_ERR_NONFINITE (mass), CDYN_ERR_SINGULAR (the
 * algebraic block dF_A/dv_A is structurally singular: index 2 or higher,
 * e.g. a junction without storage), CDYN_ERR_NOMEM. Returns NULL on error.
 */
CDYN_API cdyn_sparse_dae *cdyn_sparse_dae_create(int n, const double *mass,
                                                 const int *colptr, const int *rowind,
                                                 cdyn_status *status);

/** Free; NULL is allowed. */
CDYN_API void cdyn_sparse_dae_free(cdyn_sparse_dae *sd);

/**
 * The model: F and dF/dv are required; dF/dt may be NULL: central
 * differences in t stepped 6e-6 s and 1.5e-6 s whatever t, checked
 * against each other as cdyn_dae's are (dae.h, cdyn_dae_set_fd_step()),
 * against the rounding of the algebraic equations' terms
 * (sum_j |dF_ij/dv_j v_j| from dF/dv; their values are residuals, about
 * 0): three more F calls per evaluation when F does not depend on t, four
 * when it does, more for inputs faster than about 700 Hz (test_sparse_dae:
 * pumps of 1 kHz to 100 kHz within 1.4e-9 of their rate amplitude; one
 * difference, before, was 2.4e-4 to 116 % off with CDYN_OK) and for slow
 * drifts on large terms (up to 18 more: a reservoir of 1e7 Pa drawn down
 * by 0.1 to 1e-4 Pa/s, in any units, within 6e-6 of its orifice's hand
 * rate; before, 6.6e-3 off and 0, with CDYN_OK). Steps of 6e-6 |t|,
 * before, crossed whole periods of a 50 Hz pump late in a run (within
 * 1e-6 of its rate amplitude up to t = 1e5 s now).
 * Returns CDYN_ERR_ARG (NULL force or jacobian), CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_sparse_dae_set_model(cdyn_sparse_dae *sd,
                                               cdyn_sparse_dae_force_fn force,
                                               cdyn_sparse_dae_jacobian_fn jacobian,
                                               cdyn_sparse_dae_time_fn time_derivative,
                                               void *user);

/**
 * Accuracy of the algebraic states, the rule of cdyn_newton_set_tolerances():
 * rtol in [1e-15, 1) and atol (n values, finite and >= 0; only the algebraic
 * states' are used; NULL for cdyn_newton's automatic absolute tolerances).
 * Default: rtol 1e-10, automatic. Returns CDYN_ERR_ARG (also for NaN or
 * Inf), CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_sparse_dae_set_tolerances(cdyn_sparse_dae *sd, double rtol,
                                                    const double *atol);

/**
 * Consistent values: keep the integrated states of v (n), solve
 * F_A(v, t) = 0 for the algebraic ones from v's entries, write them back,
 * and commit v as the warm start of the next evaluation. Returns CDYN_OK;
 * CDYN_ERR_NOCONV (v then holds the best iterate; also when the
 * equations have no solution near v because the block is rank deficient
 * there); CDYN_ERR_SINGULAR (dF_A/dv_A singular and its rank not decided
 * cleanly, see the rank policy); CDYN_ERR_ARG (no model, NULL);
 * CDYN_ERR_NONFINITE; CDYN_ERR_CALLBACK; CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_sparse_dae_consistent(cdyn_sparse_dae *sd, double t, double *v);

/**
 * The right-hand side for an integrator: y = v_D (cdyn_sparse_dae_ode_size()
 * entries, in the order of cdyn_sparse_dae_split_states()) → ydot = v_D'.
 * Solves F_A = 0 for v_A (warm start: the last committed state), then
 * v_D' = F_D / m_D and v_A' from dF_A/dv_A v_A' = -(dF_A/dv_D v_D' + dF_A/dt),
 * certified: the componentwise backward error of that solve must reach a
 * few rounding errors after at most two refinement steps, or
 * CDYN_ERR_SINGULAR. (Each rate may carry the rounding of its neighbours,
 * the rates that share a non-zero entry of a row of dF_A/dv_A with it,
 * measured in the units of the equilibrated block: a closed valve's flow
 * rate is zero only to that rounding.) ydot may be y. Returns CDYN_OK; CDYN_ERR_NOCONV;
 * CDYN_ERR_SINGULAR; CDYN_ERR_ARG; CDYN_ERR_NONFINITE; CDYN_ERR_CALLBACK;
 * CDYN_ERR_BUSY. No allocation after the first evaluation, unless the
 * block is singular or its pivots must change (see above).
 */
CDYN_API cdyn_status cdyn_sparse_dae_rhs(cdyn_sparse_dae *sd, double t, const double *y,
                                         double *ydot);

/**
 * The full v and v' (n each; either may be NULL; they must not overlap) of
 * the last successful cdyn_sparse_dae_rhs(). CDYN_ERR_ARG before one.
 */
CDYN_API cdyn_status cdyn_sparse_dae_last_state(const cdyn_sparse_dae *sd, double *v,
                                                double *vdot);

/**
 * The integrated states (ode_size entries, the order of y) and the
 * algebraic ones (n - ode_size); either list may be NULL. Returns the
 * number of integrated states, -1 for NULL sd.
 */
CDYN_API int cdyn_sparse_dae_split_states(const cdyn_sparse_dae *sd, int *integrated,
                                          int *algebraic);

/** n given at create (-1 for NULL). */
CDYN_API int cdyn_sparse_dae_size(const cdyn_sparse_dae *sd);

/** The length of y: the number of states with mass (-1 for NULL). */
CDYN_API int cdyn_sparse_dae_ode_size(const cdyn_sparse_dae *sd);

/** How often KLU chose its pivots afresh (allocating) since create (-1 for
 * NULL): the first factorization, and each refactorization whose kept pivot
 * order failed the rank test. */
CDYN_API long cdyn_sparse_dae_pivotings(const cdyn_sparse_dae *sd);

/** How many rank-revealing QR factorizations of a singular algebraic block
 * ran since create (each allocates; see the rank policy above); -1 for
 * NULL. */
CDYN_API long cdyn_sparse_dae_rank_factorizations(const cdyn_sparse_dae *sd);

/**
 * The Newton solver of the algebraic states, for its report and counters
 * (cdyn_newton_get_report(), cdyn_newton_get_counters()); it lives as long
 * as sd. NULL for NULL sd or without algebraic states.
 */
CDYN_API const cdyn_newton *cdyn_sparse_dae_newton(const cdyn_sparse_dae *sd);

/** Non-zero code of the callback that failed last (0 if none or NULL). */
CDYN_API int cdyn_sparse_dae_callback_code(const cdyn_sparse_dae *sd);

/** Message of the last failure ("" if none; a static text for NULL). */
CDYN_API const char *cdyn_sparse_dae_last_error(const cdyn_sparse_dae *sd);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_SPARSE_DAE_H */
