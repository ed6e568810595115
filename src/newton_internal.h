/* The internal interface of cdyn_newton for the modules that own a solver
 * (cdyn_dae, cdyn_mbs): the rank-revealing linear solve of a Newton step
 * (pivoted QR of the equilibrated matrix, SVD outer inverse when it is rank
 * deficient; THEORY T2.2-T2.3) applied to other right-hand sides with one
 * factorization, and the life-cycle hooks an owner needs. */
#ifndef CDYN_NEWTON_INTERNAL_H
#define CDYN_NEWTON_INTERNAL_H

#include "cdyn/newton.h"

/* A Jacobian its owner keeps and factors (a sparse one): cdyn_newton keeps
 * the iteration of THEORY T2 (steps, line search, the weighted convergence
 * test, the bounds, the report), the owner the matrix and its rank
 * decision. A solver made by cdyn__newton_create_linear allocates no k x k
 * buffer; its cdyn_newton_solve() ignores the jacobian argument and calls
 * these (under the guard of its callbacks); cdyn_newton_step() and
 * cdyn_newton_check_jacobian() refuse it, and cdyn__newton_factor/apply/
 * apply_many must not be called on it. A rank-deficient J is stepped
 * through with the owner's outer inverse (factor returns 1; counted as an
 * SVD step, never widened) or fails the solve (2, 3: CDYN_ERR_SINGULAR). */
typedef struct cdyn__newton_linear {
    void *ctx;
    /* J at x (k): evaluate and keep it; 0, 1 when a callback failed (its
     * code in *code), or -1 for a J that is not finite */
    int (*evaluate)(void *ctx, const double *x, int *code);
    /* column j of the kept J: the count of its entries, their rows (or NULL
     * for rows 0 .. k-1) and values */
    int (*column)(void *ctx, int j, const int **rows, const double **values);
    /* factor the kept J: 0 at full rank; 1 rank deficient by the owner's
     * test, with a rank-revealing factorization whose apply is an outer
     * inverse (X J X = X; minimum-norm on consistent right-hand sides);
     * 2 rank deficient without one, 3 when the rank could not be decided
     * (both refused); -1 failure. *rank and *rcond (a reciprocal
     * condition, NaN when none) describe it */
    int (*factor)(void *ctx, int *rank, double *rcond);
    /* x (k) = J^-1 b (k) with that factorization (the outer inverse when
     * it is rank deficient); x and b may alias */
    void (*apply)(void *ctx, const double *b, double *x);
    /* optional (NULL: none named): after factor returned 1, the equations
     * ranked dependent into rows (k), their count */
    int (*dependent)(void *ctx, int *rows);
    /* optional (NULL: never): 1 when the J kept and factored now is the one
     * the owner committed last, so that a solve may start with chord steps
     * on it (cdyn__newton_set_chord; column and apply then read it) */
    int (*kept)(void *ctx);
} cdyn__newton_linear;

/* A square k x k solver on the owner's Jacobian (ops copied). status:
 * CDYN_OK, CDYN_ERR_ARG (k < 1, a NULL operation), CDYN_ERR_NOMEM. */
cdyn_newton *cdyn__newton_create_linear(int k, const cdyn__newton_linear *ops,
                                        cdyn_status *status);

/* Factor J (k x p, ldj >= k; finite) by the rank policy. Returns 1 if J was
 * rank deficient and the SVD path was taken, else 0; -1 if LAPACK reported
 * an internal error. Leaves the solve report alone, but sets the
 * dependent-row / dropped-column diagnosis on rank deficiency. */
int cdyn__newton_factor(cdyn_newton *nt, const double *J, int ldj);

/* x (p) = J# b (k) with the last factorization; x and b may alias. */
void cdyn__newton_apply(cdyn_newton *nt, const double *b, double *x);

/* y (k) = (J J^T)^-1 b with the last factorization, when it is of a wide
 * J (k < p) at full rank on the pivoted QR path (cdyn__newton_wide):
 * two triangular solves with its R. J^T y is then J^+ b. */
void cdyn__newton_apply_gram(cdyn_newton *nt, const double *b, double *y);

/* 1 when the last factorization is the pivoted QR of a wide J. */
int cdyn__newton_wide(const cdyn_newton *nt);

/* X (p x nrhs, ldx) = J# B (k x nrhs, ldb) with the last factorization;
 * X may be B itself (same leading dimension) for square J. */
void cdyn__newton_apply_many(cdyn_newton *nt, const double *B, int ldb, int nrhs, double *X,
                             int ldx);

/* The largest singular value the last factorization dropped, relative to
 * the largest (equilibrated J; 0 at full rank): how much of a right-hand
 * side the minimum-norm solve may leave unmet, relatively. */
double cdyn__newton_dropped(const cdyn_newton *nt);

/* 1 when the last factorization is that of the Jacobian callback's J at
 * the x the last cdyn_newton_solve() returned with CDYN_OK, at full rank
 * (pivoted QR path, square or wide): cdyn__newton_apply() then applies
 * J(x)'s inverse (minimum-norm for a wide J), and an owner may use it
 * instead of factoring J(x) again. 0 otherwise (a
 * difference Jacobian, the SVD path, a failed solve, any later
 * cdyn__newton_factor()). */
int cdyn__newton_solution_factored(const cdyn_newton *nt);

/* on != 0: a solve may also end one full step after its last
 * factorization, without a Jacobian at the result, when the correction
 * that factorization gives there meets the tolerances and is at most a
 * tenth of the step (quadratic convergence, where J at the previous
 * iterate and at the result give the same correction to within that
 * tenth). Only with the caller's Jacobian callback, at full rank on the
 * pivoted QR path. Saves one Jacobian and factorization per solve for an
 * owner that needs no exact J at the solution. Off at create. */
void cdyn__newton_set_judge_near(cdyn_newton *nt, int on);

/* A rank-deficient square J's outer inverse J# gives the minimum-norm step
 * in x, the caller's coordinates, as a wide J's does (on: the projector,
 * whose m = n rows of Phi_q with a redundant one must correct along the
 * range of Phi_q^T; a column-equilibrated SVD corrected obliquely, 0.64 of
 * the speed off with CDYN_OK). Off at create: a square system's steps are
 * the same in any units of the unknowns (the DAE's algebraic solve). */
void cdyn__newton_set_min_norm(cdyn_newton *nt, int on);

/* Steps of rank at most cap (0: none, the default): a J whose decided
 * rank is higher takes the SVD step truncated to its cap largest singular
 * values, never widened beyond them. For an owner that knows the rank of
 * J at the solution: the projector of redundant constraints, whose Phi_q
 * off the manifold has a singular value of the size of the distance to
 * it, and whose full-rank steps along it amplify the redundant row's
 * O(distance^2) inconsistency into a drift along the manifold (17 times
 * the correction, with CDYN_OK). */
void cdyn__newton_set_rank_cap(cdyn_newton *nt, int cap);

/* 1 when the last cdyn_newton_solve() ended that way: the factorization
 * is of J at the iterate one full Newton step before the returned x (full
 * rank, pivoted QR). 0 otherwise. */
int cdyn__newton_near_factored(const cdyn_newton *nt);

/* Change the problem size to k x p (1 <= k <= p), growing the workspace if
 * needed: all or nothing (CDYN_ERR_NOMEM leaves the solver as it was).
 * The object and its scalar settings survive; the per-unknown and
 * per-equation tolerances and the learned magnitudes are cleared when the
 * size changes. */
cdyn_status cdyn__newton_set_size(cdyn_newton *nt, int k, int p);

/* The magnitudes learned from converged solutions (p values, newton.h),
 * copied out and put back by an owner whose call fails after one of its
 * solves converged: a call that fails leaves no scale behind (a solve
 * that converged far out inside a failed call would otherwise loosen the
 * next call's tolerances where an equation has no other term to cap them;
 * docs/reliability.md). */
void cdyn__newton_save_magnitudes(const cdyn_newton *nt, double *out);
void cdyn__newton_restore_magnitudes(cdyn_newton *nt, const double *in);

/* Forget what earlier solutions left: the magnitudes learned from them and
 * the factorization a chord start would use (the unknowns now mean
 * something else, e.g. after a new split of a DAE). */
void cdyn__newton_forget(cdyn_newton *nt);

/* For the next cdyn_newton_solve() only: terms (k values >= 0, NULL for
 * none) is the size of the terms of each equation that belong to no
 * unknown (in a DAE: the integrated states' terms, sum_j |dG0_i/dv_j v_j|).
 * The automatic tolerances (without atol) take the larger of it and what
 * the initial guess shows (|G(x0)| - sum_j |J_ij x0_j|), which is 0 when
 * such terms cancel. */
void cdyn__newton_set_known_terms(cdyn_newton *nt, const double *terms);

/* For the next solve only: noise (k doubles, the owner's) holds, after each
 * call of the owner's residual callback, the rounding of the G it returned
 * (what no x can bring G below: in a DAE, the rounding of the null basis
 * times F). The solver keeps it with each iterate's G, and no residual
 * tolerance is below it. NULL: none (the default). */
void cdyn__newton_set_residual_noise(cdyn_newton *nt, const double *noise);

/* The Jacobian callback the owner passes is itself a difference quotient
 * (a DAE without dF/dv): its rank verdicts are judged as those of a
 * solve without a callback (cdyn_newton_solve's hidden correction). */
void cdyn__newton_set_differenced(cdyn_newton *nt, int differenced);

/* For the next solve only: rows besides G that the owner computes its
 * outputs from. After each call of the owner's Jacobian callback, *count
 * (0 <= *count, the owner's) is how many there are at that x, coef
 * (*count x p, ld >= *count) their coefficients in the unknowns and size
 * (*count values >= 0) the size of each row's terms. Without atol, an
 * unknown's tolerance is then at most what moves each such row with other
 * terms by rtol of them (never below the row's rounding). count NULL: none
 * (the default). */
void cdyn__newton_set_observed_rows(cdyn_newton *nt, const int *count, const double *coef,
                                    int ld, const double *size);

/* The per-unknown tolerances of the last iteration (p values). */
const double *cdyn__newton_tolerance(const cdyn_newton *nt);

/* The residual tolerances tol_g (k) of the last iterate of the last solve
 * (the weights its residual test used). */
const double *cdyn__newton_residual_tolerance(const cdyn_newton *nt);

/* on != 0: every cdyn_newton_solve() starts with chord steps on the
 * factorization kept by cdyn__newton_keep_for_chord() (the owner's Jacobian
 * of the same equations at an earlier point, e.g. its last committed
 * solution), and takes a fresh Jacobian only to judge the result: the same
 * acceptance test, usually one factorization per solve instead of one per
 * iteration. The report's iterations count the chord steps. Off at create. */
void cdyn__newton_set_chord(cdyn_newton *nt, int on);

/* Keep the current factorization as the start of later solves' chord steps
 * (when chords are on and it is a full-rank QR of a square J; else keep
 * none). An owner calls it where it commits a result, so that a call that
 * fails leaves the next solve exactly as it would have been. */
void cdyn__newton_keep_for_chord(cdyn_newton *nt);

/* Make nt refuse calls (CDYN_ERR_BUSY) whenever *owner_in_callback > 0. */
void cdyn__newton_set_owner(cdyn_newton *nt, const int *owner_in_callback);

#endif
