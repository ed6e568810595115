/**
 * @file constraint.h
 * Constrained accelerations of a mechanism at one instant (THEORY T4.3-T4.8):
 * matrices in, accelerations and constraint forces out; no callbacks.
 *
 * Coordinates q (n), constraints Phi(q, t) = 0 (m) with Jacobian Phi_q
 * (m x n), velocity constraint Phi' = Phi_q q' + Phi_t, acceleration
 * constraint Phi_q q'' = xi (T4.1). The equations of motion are
 *     M q'' + Phi_q^T lambda = Q      (T4.4; C^T f in place of Phi_q^T lambda, T4.3)
 * and the acceleration constraint is replaced by the stabilized one
 *     Phi_q q'' = s,   s = xi - K_D Phi' - K_P Phi          (T4.5, T4.6)
 * with K_D = K_P = 0 (no stabilization) by default, K_D = 2a I, K_P = b^2 I
 * for Baumgarte, or any SPD K_D, K_P (generalized Baumgarte).
 *
 * Use: cdyn_constraint_create(n, m) (allocates everything) → stabilizer and
 * tolerance setters → per instant cdyn_constraint_load(M, Q, Phi_q, Phi,
 * Phi', xi) then one formulation: cdyn_constraint_lagrange() (KKT),
 * cdyn_constraint_reactions(), cdyn_constraint_pseudoinverse(),
 * cdyn_constraint_penalty(), or cdyn_constraint_export() for a caller with its
 * own solver. cdyn_constraint_force() returns the constraint force of
 * whichever formulation ran last. No call after create allocates. One object
 * must not be used from two threads at once.
 *
 * Exact formulations (lagrange, reactions, pseudoinverse) solve the
 * bordered system [M G^T; Phi_q 0] [q''; y] = [Q; s] the same way
 * (docs/theory.md, "Certified solves"): equilibrated, eliminated through a
 * Cholesky factor of M (or of M + Phi_q^T D Phi_q when M is singular or
 * badly conditioned: the same solution, since Phi_q q'' = s), and an OK
 * result is certified: its componentwise backward error on the caller's
 * system is a few rounding errors (after at most two refinement steps),
 * else CDYN_ERR_SINGULAR. The error of an OK result is then about
 * cond(KKT) times machine epsilon, in any units. A result beyond the
 * double range is CDYN_ERR_NONFINITE only when it is overflow (the same
 * factors solve the right-hand sides scaled to size 1, certified); factors
 * that give Inf or NaN for those too mean a system singular to working
 * accuracy, CDYN_ERR_SINGULAR, however moderate the inputs. At n <= 16,
 * lagrange first tries the blocks of the system in the rank decision's own
 * QR of Phi_q (docs/theory.md, "Small sizes"), taken only for M positive definite,
 * Phi_q and the mass on the free motions conditioned within 1e6, and a
 * result certified as above; everything else takes the general path and
 * gets its verdict. That frame is equilibrated against the history below,
 * so the last bits of such a result (not its status) depend on the
 * history; cdyn_constraint_reset_scales() makes them those of a fresh
 * object.
 *
 * The rank of Phi_q is decided once per load by a pivoted QR of the
 * equilibrated Phi_q^T (the rank policy, docs/theory.md), with rows and
 * columns scaled as for the largest magnitude each entry of Phi_q has had
 * since create (or cdyn_constraint_reset_scales()), not as for the present
 * Phi_q: a constraint gradient that shrinks towards zero along a motion (a
 * fold, THEORY T6.2) then shows as nearly dependent, while a change of
 * units cancels out (the history changes with the units exactly as Phi_q
 * does). Every successful load feeds the history, integrator trial states
 * included. An object reused for an unrelated mechanism should be reset;
 * a fresh object has no history, so a pose loaded first at (or within
 * rounding of) a fold is judged, and solved, on its own.
 *
 * Rank loss: a formulation that needs Phi_q (or M) of full rank returns
 * CDYN_ERR_SINGULAR, leaves its outputs untouched and records the facts of
 * Phi_q — rank, smallest singular value, dependent rows — for
 * cdyn_constraint_rank(), cdyn_constraint_smallest_singular_value() and
 * cdyn_constraint_redundant_rows(); never NaN.
 *
 * Aliasing: outputs must not overlap each other (CDYN_ERR_ARG); inputs are
 * copied by cdyn_constraint_load(), so later changes to the caller's
 * arrays do not affect the loaded instant.
 *
 * Failure semantics: on any error the output arrays are untouched and the
 * object keeps its loaded instant and settings.
 */
#ifndef CDYN_CONSTRAINT_H
#define CDYN_CONSTRAINT_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque constrained-acceleration kernel for n coordinates, m constraints. */
typedef struct cdyn_constraint cdyn_constraint;

/** Which system cdyn_constraint_export() writes (THEORY T4.5). */
typedef enum cdyn_export_variant {
    CDYN_EXPORT_MULTIPLIERS = 0, /**< Y = [q''; q'; lambda], constraint force Phi_q^T lambda */
    CDYN_EXPORT_REACTIONS = 1    /**< Y = [q''; q'; f], constraint force C^T f */
} cdyn_export_variant;

/**
 * Allocate for n >= 1 coordinates and m >= 0 constraints (m may exceed n:
 * redundant sets are allowed for the pseudo-inverse and penalty forms).
 * status (may be NULL): CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NOMEM.
 */
CDYN_API cdyn_constraint *cdyn_constraint_create(int n, int m, cdyn_status *status);

/** Free; NULL is allowed. */
CDYN_API void cdyn_constraint_free(cdyn_constraint *c);

/**
 * Baumgarte stabilization (T4.5): K_D = 2a I, K_P = b^2 I; a = b = 0 (the
 * default) is no stabilization. a, b >= 0 and finite, else CDYN_ERR_ARG.
 * Gains (this and the two setters below) apply to the loaded instant too:
 * the next formulation or export forms its s = xi - K_D Phi' - K_P Phi
 * again from the Phi, Phi', xi of the load (CDYN_ERR_NONFINITE there if s
 * overflows; CDYN_ERR_ARG for an instant that cdyn_mbs_rhs() loaded
 * without gains, which leaves Phi and Phi' out: the next right-hand side
 * loads again).
 */
CDYN_API cdyn_status cdyn_constraint_set_baumgarte(cdyn_constraint *c, double a, double b);

/**
 * Generalized Baumgarte (T4.6): K_D, K_P (m x m, symmetric positive definite,
 * leading dimensions >= m; both triangles read). CDYN_ERR_ARG if either is
 * not symmetric (to 1e-12 relative) or for bad arguments, CDYN_ERR_SINGULAR
 * if either is not positive definite (Cholesky), CDYN_ERR_NONFINITE.
 */
CDYN_API cdyn_status cdyn_constraint_set_gains(cdyn_constraint *c, const double *KD, int ldkd,
                                               const double *KP, int ldkp);

/**
 * Critically damped gains per constraint (T4.6): K_D = diag(2 k_i),
 * K_P = diag(k_i^2), k (m entries) > 0 and finite. CDYN_ERR_ARG otherwise
 * (NaN and Inf included: a setting, not data).
 */
CDYN_API cdyn_status cdyn_constraint_set_critical_gains(cdyn_constraint *c, const double *k);

/**
 * Constraint masses for the modified Lagrange (penalty) form (T4.8):
 * alpha_c = diag(alpha), alpha (m entries) > 0 and finite (else
 * CDYN_ERR_ARG, NaN and Inf included); they keep their meaning in the
 * caller's units. alpha = NULL restores the default (CDYN_OK).
 *
 * Default (docs/theory.md T4.8): chosen at each cdyn_constraint_penalty
 * from the loaded M and Phi_q so that every constraint outweighs the mass
 * it moves by 2^20 in any units: alpha_i = 2^20 / w_i rounded to the
 * nearest power of two, w_i = sum_j Phi_ij^2 / M_jj over the coordinates
 * with M_jj > 0, and w_i the largest the row has had since create or
 * cdyn_constraint_reset_scales() (so that a row that vanishes at a
 * singular pose does not take an ever stiffer penalty; reset when the
 * object is reused for other units or another mechanism); or 2^20 h_i
 * when that is larger, h_i = (G^-1)_ii (G = Phi_q M^-1 Phi_q^T) the mass
 * the row moves while the other rows hold, the smallest measured since
 * then (at the first solve, and where the refinement below does not
 * converge; not within 2^-10 of rank loss). A row of zeros
 * without such a history gets 0 (no multiplier). A row whose coordinates
 * are all massless takes, for each of them, the mass the other rows lend
 * it (sum_k alpha_k Phi_kj^2 / 2^20); one that no row on a mass reaches
 * has no default (cdyn_constraint_penalty then returns CDYN_ERR_ARG
 * naming it).
 *
 * The default form is then refined towards the exact one with the same
 * factor (augmented Lagrangian steps, at most 8 solves in all), because
 * one penalty solve leaves lambda 2^-20 off and a light coordinate tied
 * to a heavy one turns that into an error of q'' times the mass ratio.
 * Away from singular poses the result is the exact forms' up to about eps
 * times the largest mass ratio a constraint ties over 2^20 (tests: 5e-16
 * of the largest q'' and lambda on random instants, 1.0e-10 for 1e6 kg
 * tied to 1e-6 kg, in units 1e+-8 apart against a quad-precision KKT
 * solve); a result whose constraint residual stays above 2^-20 of a
 * row's terms there is refused with CDYN_ERR_NOCONV (masses some 1e20 to
 * 1e30 apart and beyond; the message says so: use cdyn_constraint_lagrange
 * or give alpha). Near a singular pose (the rank decision finds Phi_q rank
 * deficient or within 2^-10 of it, or a row's effective mass h_i is 16 or
 * more times its history's), where a direction of alpha G is small and
 * the first step does not contract it, the penalty solve's own answer is
 * kept: further steps would stiffen that direction as a larger alpha
 * does. That keeps the right-hand side bounded through the pose:
 * examples/two_link_singular.c runs through its fold with RK4 at 1 ms at
 * tip speeds 0.02 to 1 m/s (every 0.01), ending within 1.1e-9 rad of the
 * exact pose (unrefined: 1.1e-6; 2^23 unrefined broke up at 0.6 or 1 m/s).
 * A caller's alpha is used as given, unrefined: the penalty form of
 * those masses. The former default, 10 in any units, left a pendulum bob
 * of 1 t with 96 % of its tension missing.
 */
CDYN_API cdyn_status cdyn_constraint_set_penalty(cdyn_constraint *c, const double *alpha);

/**
 * Relative rank tolerance for Phi_q: a pivot of the equilibrated Phi_q^T
 * at or below tol times the largest is a dependent row (for every
 * formulation; the pseudo-inverse drops those rows). Default 1e-10; tol in
 * (0, 1), else CDYN_ERR_ARG. The loaded instant is decided again.
 */
CDYN_API cdyn_status cdyn_constraint_set_rank_tolerance(cdyn_constraint *c, double tol);

/**
 * Forget the history of Phi_q that rank decisions are measured against
 * (see the file comment), and the one of the default constraint masses
 * (cdyn_constraint_set_penalty): the next decision and the next default
 * start a new history from the loaded instant. For an object reused for
 * another mechanism or other units; cdyn_mbs_set_model() does it for its
 * own kernel.
 * CDYN_ERR_ARG for NULL, CDYN_ERR_BUSY from inside a callback of an owner.
 */
CDYN_API cdyn_status cdyn_constraint_reset_scales(cdyn_constraint *c);

/**
 * Load one instant (copies; nothing is kept pointing to caller memory).
 *
 * M        n x n, symmetric (both triangles read), ldm >= n.
 * Q        n, generalized forces.
 * Phi_q    m x n, ldphiq >= max(1, m).
 * Phi      m, constraint values, or NULL (zero).
 * Phi_dot  m, Phi' = Phi_q q' + Phi_t, or NULL (zero).
 * xi       m, right-hand side of Phi_q q'' = xi (T4.1), or NULL (zero).
 * Computes s = xi - K_D Phi' - K_P Phi, and keeps Phi, Phi', xi for gains
 * set before the next load. Returns CDYN_OK, CDYN_ERR_ARG,
 * CDYN_ERR_NONFINITE. No allocation.
 */
CDYN_API cdyn_status cdyn_constraint_load(cdyn_constraint *c, const double *M, int ldm,
                                          const double *Q, const double *Phi_q, int ldphiq,
                                          const double *Phi, const double *Phi_dot,
                                          const double *xi);

/**
 * Lagrange multipliers (KKT, T4.4, stabilized by s): with M~ = L L^T (the
 * equilibrated M, or M + Phi_q^T D Phi_q) and X = Phi_q L^{-T}, lambda
 * solves (X X^T) lambda = X L^{-1} Q - s, by Cholesky of X X^T when it is
 * well conditioned (cond <= 1e6), else through a pivoted QR of X^T without
 * forming the product; q'' = M~^{-1} (Q - Phi_q^T lambda). No bordered LU.
 * qdd (n) and lambda (m) out. M must be positive semidefinite (a mass
 * matrix). CDYN_ERR_SINGULAR when Phi_q is rank deficient (facts
 * recorded), when M + Phi_q^T D Phi_q is not positive definite (M
 * indefinite, or singular on the motions the constraints allow), or when
 * the result cannot be certified (the message says which); CDYN_ERR_ARG
 * before a load.
 */
CDYN_API cdyn_status cdyn_constraint_lagrange(cdyn_constraint *c, double *qdd, double *lambda);

/**
 * Reactions with their own coefficient matrix C (m x n, ldc >= max(1, m);
 * T4.3): M q'' + C^T f = Q, Phi_q q'' = s, so (Phi_q M~^{-1} C^T) f =
 * Phi_q M~^{-1} Q - s: the m x m product by LU when its condition is
 * <= 1e6, otherwise through the pivoted QR of L^{-1} Phi_q^T without
 * forming it; certified as for lagrange. qdd (n), f (m) out.
 * CDYN_ERR_SINGULAR as for lagrange, and when Phi_q M^{-1} C^T is
 * numerically singular: the message says whether Phi_q M^{-1} Phi_q^T is
 * too (the constrained system singular to working accuracy, whatever C
 * is) or C does not act on the constrained motions.
 */
CDYN_API cdyn_status cdyn_constraint_reactions(cdyn_constraint *c, const double *C, int ldc,
                                               double *qdd, double *f);

/**
 * Pseudo-inverse (Udwadia-Kalaba) form for redundant constraints (T4.7):
 * q'' is that of the independent rows of Phi_q (the rank decision's; the
 * dependent rows, being combinations of them, are met too when their s is
 * consistent), solved and certified as for lagrange; lambda is then the
 * minimum-norm choice among all multipliers with the same Phi_q^T lambda,
 * the norm taken with every row of Phi_q scaled to weight 1 (its
 * Euclidean norm once each column is divided by its largest entry in the
 * row-normalized |Phi_q|), so a row rescaled by any c takes lambda / c
 * and the others are unchanged, to rounding: the choice does not depend on
 * the units of the constraints (a row and its copy in other units share
 * the multiplier equally). On rank
 * loss the facts are recorded and cdyn_constraint_last_error() describes
 * the dropped rows, with CDYN_OK. CDYN_ERR_SINGULAR as for lagrange
 * except for the rank of Phi_q.
 */
CDYN_API cdyn_status cdyn_constraint_pseudoinverse(cdyn_constraint *c, double *qdd,
                                                   double *lambda);

/**
 * Modified Lagrange (penalty) form (T4.8):
 * (M + Phi_q^T alpha_c Phi_q) q'' = Q + Phi_q^T alpha_c s, and the multiplier
 * estimate lambda = alpha_c (Phi_q q'' - s). Needs only M + Phi_q^T alpha_c
 * Phi_q positive definite: M may be singular and Phi_q rank deficient.
 * With a caller's alpha_c it is a penalty form: q'' meets Phi_q q'' = s
 * only up to O(1/alpha_c), and lambda, alpha_c times a difference that
 * cancels to that, carries alpha_c eps of the terms' rounding. The
 * default alpha_c is refined to the exact forms' answer away from
 * singular poses (cdyn_constraint_set_penalty: the default's accuracy).
 * CDYN_ERR_SINGULAR when the leading matrix is not positive definite;
 * CDYN_ERR_NOCONV when the default form's refinement does not reach the
 * stated accuracy away from a singular pose (outputs untouched);
 * CDYN_ERR_ARG when the default alpha_c cannot be formed (a row that
 * moves only massless coordinates no other row reaches),
 * CDYN_ERR_NONFINITE when a default alpha_c is beyond the double range.
 */
CDYN_API cdyn_status cdyn_constraint_penalty(cdyn_constraint *c, double *qdd, double *lambda);

/**
 * Export the square system A Y = B of size 2n + m (T4.5) for a caller's own
 * linear solver, with p = q' as speeds:
 *     [ M     0   G^T ] [ q''    ]   [ Q ]
 *     [ 0     I   0   ] [ q'     ] = [ h ]
 *     [ Phi_q 0   0   ] [ lambda ]   [ s ]
 * G = Phi_q (CDYN_EXPORT_MULTIPLIERS) or C (CDYN_EXPORT_REACTIONS; C m x n,
 * ldc >= max(1, m); ignored otherwise). h (n) is the right-hand side of
 * q' = h, i.e. the current speeds. A out: (2n+m) x (2n+m), lda >= 2n+m;
 * B out: 2n+m. Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE.
 */
CDYN_API cdyn_status cdyn_constraint_export(cdyn_constraint *c, cdyn_export_variant variant,
                                            const double *C, int ldc, const double *h,
                                            double *A, int lda, double *B);

/**
 * The constraint force of the last successful formulation: generalized
 * force (n; Phi_q^T lambda, or C^T f after cdyn_constraint_reactions()) and
 * the multipliers (m; lambda or f). Either may be NULL. After the
 * pseudo-inverse form lambda is the minimum-norm choice. CDYN_ERR_ARG if no
 * formulation has succeeded since the last load.
 */
CDYN_API cdyn_status cdyn_constraint_force(const cdyn_constraint *c, double *generalized_force,
                                           double *multipliers);

/**
 * Rank of Phi_q at the last rank-loss report (a CDYN_ERR_SINGULAR for rank
 * loss, or a pseudo-inverse that dropped rows), -1 if none: the count of
 * pivots above tol times the largest, a fact of the constraints alone (M
 * plays no part). Kept with cdyn_constraint_last_error() until the next
 * report or a failure of a formulation for another reason (which clears
 * it); a success changes neither, and an argument error (CDYN_ERR_ARG,
 * CDYN_ERR_BUSY) leaves it while replacing the message. -1 for NULL.
 */
CDYN_API int cdyn_constraint_rank(const cdyn_constraint *c);

/** Number of coordinates n given at create time (-1 for NULL). */
CDYN_API int cdyn_constraint_size(const cdyn_constraint *c);

/** Number of constraint rows m given at create time (-1 for NULL). */
CDYN_API int cdyn_constraint_rows(const cdyn_constraint *c);

/**
 * Smallest singular value of Phi_q in the caller's units (0 when m > n)
 * recorded with the last rank-loss report, kept as cdyn_constraint_rank()
 * is; NaN when there was none, after a failure of a formulation for another
 * reason, or for NULL.
 */
CDYN_API double cdyn_constraint_smallest_singular_value(const cdyn_constraint *c);

/**
 * The m - rank constraint rows (0-based, ascending) found dependent at the
 * last rank-loss report (ranked by the pivoted QR of the rank decision);
 * rows (m entries) may be NULL. Returns the count (0 when there was no
 * report, -1 for NULL c).
 */
CDYN_API int cdyn_constraint_redundant_rows(const cdyn_constraint *c, int *rows);

/**
 * Monitor of the distance to a singular pose at the last successful
 * formulation: the smallest kept pivot of the rank decision over the
 * largest, an estimate of sigma_min / sigma_max of Phi_q equilibrated as
 * for its history (unit-free; a pivoted QR's pivot ratio tracks the
 * singular value ratio within a modest factor in practice, 2^m at worst).
 * NaN before any success or for NULL. Of order 1 far from any
 * singularity, it falls towards 0 as one approaches (in proportion to the
 * distance in time when a constraint gradient vanishes at a fold passed
 * at constant speed), and the decision declares rank loss when it reaches
 * the rank tolerance. With more than 16 constraints (and m <= n) the
 * pivoted QR is skipped when a Gram-matrix certificate already proves full
 * rank (docs/theory.md, "A certificate of full rank"); the margin is then
 * that certificate's lower bound of sigma_min over the largest row norm,
 * never above the QR's pivot ratio. The certificate holds only while that
 * ratio stays well above the rounding of the Gram matrix (about 1e-5 at
 * n = 300; the tests see it certify every gap of 1e-3 or more); closer to
 * rank loss the QR decides and the margin is its pivot ratio again. After the pseudo-inverse it is that of the
 * independent rows it kept (the rows it dropped count as handled). A
 * caller can stop or switch formulation at a threshold of its own
 * (examples/two_link_singular.c).
 */
CDYN_API double cdyn_constraint_margin(const cdyn_constraint *c);

/**
 * Message of the last failure, or of the last rank loss the pseudo-inverse
 * form handled ("" if none; a static text for NULL). It is kept, with the
 * rank facts it describes (cdyn_constraint_rank() ...), until the next
 * failure or rank-loss report: a successful call changes neither.
 */
CDYN_API const char *cdyn_constraint_last_error(const cdyn_constraint *c);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_CONSTRAINT_H */
