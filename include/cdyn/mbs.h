/**
 * @file mbs.h
 * Model layer for mechanisms with holonomic constraints (THEORY T4): the
 * caller registers callbacks for M(q, t), Q(q, q', t), Phi(q, t) and
 * Phi_q(q, t), picks a formulation and stabilizer, and gets the right-hand
 * side y' = f(t, y) of y = [q; q'] for any integrator, a projection onto
 * the constraint manifold after each step (T4.9), the constraint forces and
 * residuals, and coordinate partitioning (T4.10).
 *
 * Lifecycle: cdyn_mbs_create(n, m) → cdyn_mbs_set_model() (and optionally
 * cdyn_mbs_set_time_terms(), formulation, stabilizer via
 * cdyn_mbs_constraint()) → per step cdyn_mbs_rhs() / cdyn_mbs_project()
 * (no allocation) → cdyn_mbs_free(). One object must not be used from two
 * threads at once.
 *
 * Callbacks return 0 on success; any other value stops the call with
 * CDYN_ERR_CALLBACK, the code kept for cdyn_mbs_callback_code(). A
 * callback may call the read-only accessors of this object and of the
 * objects it owns (cdyn_mbs_last_error(), cdyn_constraint_margin(),
 * cdyn_newton_get_report(), ...); every other call on them from inside a
 * callback returns CDYN_ERR_BUSY and changes nothing but the message. The handles
 * cdyn_mbs_constraint() and cdyn_mbs_newton() stay valid, with the
 * settings made on them, for the life of mbs.
 *
 * Aliasing: outputs are written after every input has been read, so an
 * output may alias an input (ydot may be y). On any error the output
 * arrays are untouched and the object stays usable; a failed projection
 * or partition call also leaves no magnitude learned by its Newton solve
 * (newton.h), so the next call's default tolerances are what they would
 * have been without it.
 */
#ifndef CDYN_MBS_H
#define CDYN_MBS_H

#include "constraint.h"
#include "newton.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque multibody model for n coordinates and m constraints. */
typedef struct cdyn_mbs cdyn_mbs;

/** M (n x n, leading dimension ldm) at (t, q): symmetric. */
typedef int (*cdyn_mbs_mass_fn)(double t, const double *q, double *M, int ldm, void *user);
/** Q (n): generalized applied forces at (t, q, q'). */
typedef int (*cdyn_mbs_force_fn)(double t, const double *q, const double *qdot, double *Q,
                                 void *user);
/** Phi (m): constraint values at (t, q). */
typedef int (*cdyn_mbs_phi_fn)(double t, const double *q, double *Phi, void *user);
/** Phi_q (m x n, leading dimension ld) at (t, q). */
typedef int (*cdyn_mbs_jacobian_fn)(double t, const double *q, double *Phi_q, int ld,
                                    void *user);
/** Phi_t (m): partial time derivative of Phi at (t, q). */
typedef int (*cdyn_mbs_phi_t_fn)(double t, const double *q, double *Phi_t, void *user);
/** xi (m): right-hand side of Phi_q q'' = xi (T4.1) at (t, q, q'). */
typedef int (*cdyn_mbs_xi_fn)(double t, const double *q, const double *qdot, double *xi,
                              void *user);

/** Formulation used by cdyn_mbs_rhs(). */
typedef enum cdyn_mbs_formulation {
    CDYN_MBS_LAGRANGE = 0,      /**< KKT with multipliers (T4.4), stabilized by the gains */
    CDYN_MBS_PSEUDOINVERSE = 1, /**< Udwadia-Kalaba, redundant constraints allowed (T4.7) */
    CDYN_MBS_PENALTY = 2        /**< modified Lagrange (T4.8), runs through singular poses */
} cdyn_mbs_formulation;

/** Metric of the projection (T4.9). */
typedef enum cdyn_mbs_metric {
    CDYN_PROJECT_MIN_NORM = 0, /**< smallest |dq| */
    CDYN_PROJECT_MASS = 1      /**< smallest dq^T M dq (M at the unprojected q) */
} cdyn_mbs_metric;

/**
 * Allocate for n >= 1 coordinates, 0 <= m constraints (for the partitioned
 * form m < n is needed). status (may be NULL): CDYN_OK, CDYN_ERR_ARG,
 * CDYN_ERR_NOMEM. Returns NULL on error.
 */
CDYN_API cdyn_mbs *cdyn_mbs_create(int n, int m, cdyn_status *status);

/** Free; NULL is allowed. */
CDYN_API void cdyn_mbs_free(cdyn_mbs *mbs);

/**
 * The model callbacks (all four required) and the user pointer passed to
 * every callback. A new model starts new histories: the kernel's scales
 * (cdyn_constraint_reset_scales()) and those of the partition quality.
 * CDYN_ERR_ARG for NULL.
 */
CDYN_API cdyn_status cdyn_mbs_set_model(cdyn_mbs *mbs, cdyn_mbs_mass_fn mass,
                                        cdyn_mbs_force_fn force, cdyn_mbs_phi_fn phi,
                                        cdyn_mbs_jacobian_fn jacobian, void *user);

/**
 * Optional time terms (THEORY T4.1); either may be NULL, and then comes
 * from central differences along the motion, with steps h_k = c T 4^-k
 * extrapolated to h -> 0 (Richardson) until rounding takes over: c =
 * 7.4e-4 for first derivatives, 2.4e-3 for second ones; along the motion
 * T is the larger of 1 s and the motion's own time scale |q|_inf /
 * |q'|_inf (capped at 1e4 s; and 1 s whenever Phi depends on t explicitly,
 * found by Phi(q, t) at three times: a prescribed motion's time scale is
 * not the mechanism's), with 4 levels and more (up to 12) to reach down to
 * c min(1 s, |q|_inf / |q'|_inf) / 64, so for scleronomic constraints the
 * steps follow the motion whatever the units of length and time; for
 * Phi_t alone T = 1 s and 4 levels. While no entry is within 1e-6 of
 * itself, more levels follow (up to 12); where none is within 1e-2 of
 * itself (a derivative of 0) the smallest absolute estimate wins; levels
 * that agree exactly and are contradicted by the next (steps that are
 * whole periods of a prescribed motion) are dropped, an estimate of
 * exactly 0 taking one level more (docs/theory.md T4.1). A prescribed
 * motion A sin(w t) of 10 Hz to 100 kHz: q'' and Phi_t within 1.1e-7 of
 * their amplitudes at t ~ 1 s, 1.2e-6 at 400 kHz and 2 MHz (test_mbs; before,
 * up to 500 times off at a zero of the acceleration, with CDYN_OK); late
 * in a run the model's own sin(w t) rounds its phase (5.3e-5 at 1e4 s and
 * 100 kHz). Each row is judged on its own (its winner and its last
 * level), so the result does not depend on the rows' units: a 10 Hz to
 * 100 kHz prescribed row beside a slow scleronomic one, each in units
 * 1e-8 to 1e8, satisfies Phi_q q'' = xi within 1.7e-7 of each row's scale
 * (test_mbs; before, up to 1.0 off with CDYN_OK). A row whose xi is 0 (a
 * linear constraint) stops at its rounding, from the fifth level on; the
 * others stop when they converge, the levels when none goes on; no
 * estimate counts below the rounding of its step's quotients (from
 * Phi_q's terms), so a small prescribed motion about a large offset
 * (a / X0 = 1e-8) keeps 6.4e-4 of its acceleration amplitude; at 1e-9,
 * 2.5e-2, the rounding of X0 at the first step (docs/reliability.md).
 * Each level costs two Phi (or Phi_q) evaluations:
 * - phi_t NULL: Phi_t by differences of Phi in t; the first three
 *   evaluations (t - c, t + c, t + c/4) come first, and when Phi gives the
 *   same bits at all three (a scleronomic constraint) Phi_t = 0 exactly
 *   after those three (not at a t so large that the steps round away:
 *   the differences then report CDYN_ERR_NONFINITE);
 * - xi NULL with phi_t given: xi = -d/dtau (Phi_q q' + Phi_t) along the
 *   path (q + tau q', t + tau): tests show relative errors <= 1e-9 on
 *   smooth constraints;
 * - both NULL: xi = -d^2/dtau^2 Phi along that path: tests show <= 1e-8.
 * This covers (Phi_q q')_q q', 2 Phi_qt q' and Phi_tt. CDYN_ERR_BUSY from
 * a callback.
 */
CDYN_API cdyn_status cdyn_mbs_set_time_terms(cdyn_mbs *mbs, cdyn_mbs_phi_t_fn phi_t,
                                             cdyn_mbs_xi_fn xi);

/**
 * Check the model's Jacobian callback, and the phi_t callback when one was
 * given, at (t, q): Phi_q (m x n) and Phi_t against central differences
 * of Phi (each coordinate moved by eps^(1/3) |q_j|, or the largest |q| for
 * a zero coordinate; a coordinate with a period P, cdyn_mbs_set_periods,
 * by at most eps^(1/3) P / (2 pi); t by eps^(1/3) s whatever t). The worst
 * disagreement goes to report (status.h, cdyn_jacobian_check; col = n for
 * Phi_t; suspect = 1 above 1e-6 relative): a 5 % error in one entry is
 * named. An entry is judged only where the differences resolve it: at an
 * angle of many turns without its period (a crank at 1.2e5 rad) the first
 * steps, 0.7 rad, are too long for that and a 5 % error went unnamed; the
 * column's steps are now shortened until they resolve it (status.h), and
 * it is named with or without the period (test_mbs).
 * A coordinate near 0 is stepped on its rows' scale (status.h): a
 * pendulum's angle at 1e-9 rad hid a 5 % error, now named (test_check).
 * For use when writing a model: Phi is called 4n times (4(n + 1) with
 * phi_t; 4 more per column each time a step is shortened or widened); needs
 * cdyn_mbs_set_model(). CDYN_OK when the check ran (whatever it found; an
 * empty report for m = 0); CDYN_ERR_ARG, CDYN_ERR_NONFINITE,
 * CDYN_ERR_CALLBACK, CDYN_ERR_BUSY; report is written only on CDYN_OK.
 * No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_check_jacobian(cdyn_mbs *mbs, double t, const double *q,
                                             cdyn_jacobian_check *report);

/** Formulation of cdyn_mbs_rhs() (default CDYN_MBS_LAGRANGE). */
CDYN_API cdyn_status cdyn_mbs_set_formulation(cdyn_mbs *mbs, cdyn_mbs_formulation formulation);

/**
 * The method-layer object the model uses (owned by mbs; NULL for a NULL
 * mbs): set the stabilizer
 * (cdyn_constraint_set_baumgarte / _gains / _critical_gains), the penalty
 * and the rank tolerance on it.
 */
CDYN_API cdyn_constraint *cdyn_mbs_constraint(cdyn_mbs *mbs);

/**
 * The Newton solver of the projection (m equations in n unknowns; NULL when
 * m = 0, m > n or mbs is NULL), owned by mbs: cap and tolerances (defaults:
 * 10 iterations, rtol 1e-12 with newton.h's default absolute parts), report
 * of the last projection. Its unknowns are q in the minimum-norm metric and
 * L^T q (M = L L^T at the unprojected q) in the mass metric; the magnitudes
 * it learns of them (newton.h) are forgotten when the metric changes. Its
 * tolerances are relative to those unknowns, so in the mass metric to a
 * mass-weighted size: a light coordinate coupled to a far heavier one is
 * resolved only to the rounding of the heavy one's term in L^T q. So too
 * an angle that grows without bound (a crank turning for minutes): at
 * 1.2e5 rad (3000 rpm for 6.7 minutes) its tolerance is 1.2e-7 rad, and
 * a projection may leave Phi at that times the crank's length (7.5e-8 m
 * for a 0.375 m crank, test_mbs; the bound: |Phi_i| within 4 rtol
 * sum_j |Phi_q,ij q_j|). Give such a coordinate its period
 * (cdyn_mbs_set_periods: 4e-12 m), reduce the angle modulo 2 pi between
 * steps where the model allows (the same positions then meet Phi to
 * 1e-14 of the lengths), or set the projector's tolerances
 * (cdyn_newton_set_tolerances: rtol 1e-15 with atol 1e-12 gave 1.1e-12 m).
 */
CDYN_API cdyn_newton *cdyn_mbs_newton(cdyn_mbs *mbs);

/**
 * Periods of the coordinates (n entries, in the coordinates' units; NULL:
 * none, the default): a period > 0 says that the model's Phi, Phi_q and
 * M repeat when that coordinate moves by it, as they do for an angle and
 * 2 pi; 0 leaves a coordinate as it is. cdyn_mbs_project() then solves
 * for the positions with each such coordinate less its whole periods
 * (exactly): its Newton calls phi and jacobian at those reduced
 * coordinates, so its tolerances are those of an angle within its period
 * rather than rtol of the angle's whole value. The periods are then added
 * back, and phi is called once more there: Phi must meet what the solve
 * met within the rounding that adding them back leaves (8 eps sum_j
 * |Phi_q,ij q_j|), else the model does not repeat with these periods (a
 * driving constraint theta - w t does not) and the projection returns
 * CDYN_ERR_ARG with y untouched. A crank at 1.2e5 rad (3000 rpm for 6.7
 * minutes) is projected to |Phi| of 4e-12 m instead of 7.5e-8 m (test_mbs,
 * both metrics): the rounding of the crank angle's coordinate. Where no
 * coordinate holds a whole period the projection is the same, bit for
 * bit, as without periods (test_mbs). cdyn_mbs_rhs_jacobian(),
 * cdyn_mbs_partition_jacobian() and cdyn_mbs_check_jacobian() take a
 * periodic coordinate's difference step on at most P / (2 pi); other
 * calls (the right-hand sides, the partition's dependent coordinates) do
 * not use the periods.
 * CDYN_ERR_ARG for a NULL mbs or a period < 0, NaN or Inf (the periods
 * then unchanged); CDYN_ERR_BUSY inside a callback. Copies the array; no
 * allocation. THEORY T4.9.
 */
CDYN_API cdyn_status cdyn_mbs_set_periods(cdyn_mbs *mbs, const double *period);

/** Metric of cdyn_mbs_project() (default CDYN_PROJECT_MIN_NORM). */
CDYN_API cdyn_status cdyn_mbs_set_projection_metric(cdyn_mbs *mbs, cdyn_mbs_metric metric);

/**
 * Right-hand side for an integrator: y = [q; q'] (2n) → ydot = [q'; q'']
 * (2n). Evaluates M, Q, Phi_q and xi, and Phi and Phi' = Phi_q q' + Phi_t
 * when a stabilizer's gains use them (with none, the default, the phi and
 * phi_t callbacks are not called: cdyn_mbs_last_residuals() evaluates them
 * when asked), loads them into the constraint object and runs the
 * formulation. Returns
 * CDYN_OK; CDYN_ERR_SINGULAR (rank loss of Phi_q in KKT, non-SPD matrix: the
 * facts are on cdyn_mbs_constraint()); CDYN_ERR_NOCONV (the default penalty
 * form away from singular poses with masses too far apart:
 * cdyn_constraint_set_penalty); CDYN_ERR_CALLBACK; CDYN_ERR_NONFINITE;
 * CDYN_ERR_ARG. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_rhs(cdyn_mbs *mbs, double t, const double *y, double *ydot);

/**
 * Project y = [q; q'] onto the manifold after a step (T4.9): q onto
 * Phi(q, t) = 0 by Newton with minimum-norm (or mass-weighted) corrections,
 * then q' onto Phi_q q' + Phi_t = 0 in one linear step (its correction in
 * W Phi_q^T's range at the projected q, to rounding). The Newton may end
 * one full step after its last factorization when the correction that
 * factorization gives there is within tolerance and at most a tenth of
 * the step; the speed step then solves with Phi_q at the projected q by
 * iterations preconditioned with that factorization (two, typically),
 * factoring Phi_q there only if they fall short: one factorization per
 * projection where there were two. Redundant constraints (Phi_q of rank
 * r < m at the solution): a position solve that ends at rank r is done
 * again from the start with steps of rank r at most (full-rank steps
 * along the singular value that only the distance to the manifold makes
 * non-zero drifted along it, 17 times the correction, test_mbs), and the
 * next projections start with that cap; a capped solve that fails is done
 * again without it. In the minimum-norm metric the result is then the
 * closest point to second order in the distance (test_mbs). y is updated in
 * place on success and on CDYN_ERR_NOCONV (best iterate; the Newton report
 * tells). CDYN_ERR_SINGULAR, y untouched, when the velocity constraints
 * are left unmet beyond the rounding of their terms (Phi_q rank deficient
 * and its rows asking for inconsistent speeds). No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_project(cdyn_mbs *mbs, double t, double *y);

/**
 * Project the speeds only (T4.9): q' onto Phi_q q' + Phi_t = 0 at the
 * given q, in one linear step in the projection metric, q untouched (for
 * positions that are right as they are, e.g. published initial positions
 * that a position projection would move by their own rounding). q' in y
 * (2n) is updated on success; CDYN_ERR_SINGULAR, y untouched, when the
 * velocity constraints cannot be met (as for cdyn_mbs_project()), and the
 * errors of cdyn_mbs_project(). cdyn_mbs_last_residuals() then reports ||Phi(q)||
 * (evaluated when asked for) and the velocity residual. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_project_velocities(cdyn_mbs *mbs, double t, double *y);

/**
 * Tangent projection for an integrator's error estimate (CVODE's err in
 * its CVProjFn): right after a successful cdyn_mbs_project() or
 * cdyn_mbs_project_velocities() (no other call on mbs in between), replace
 * each half of w (2n: a position half and a speed half) by its projection
 * onto the tangent space of the constraints at the projected q, in the
 * projection metric: h <- h - W Phi_q^T (Phi_q W Phi_q^T)^+ Phi_q h, W = I
 * (minimum norm) or M^-1 (mass metric, M at the unprojected q). Uses that
 * projection's Phi_q and factorization (a matrix-vector product and a
 * solve per half, the solve preconditioned as in cdyn_mbs_project() when
 * the factorization is of the Newton's last iterate before the result),
 * no model callback (THEORY T4.9). w may be any vector; on error it is
 * untouched. Returns CDYN_OK (also for m = 0: w unchanged); CDYN_ERR_ARG
 * (NULL, no such projection just before); CDYN_ERR_NONFINITE (NaN/Inf in
 * w, or an intermediate Phi_q w that overflows); CDYN_ERR_LAPACK (the
 * factorization of Phi_q that a preconditioned solve falling short needs
 * failed); CDYN_ERR_BUSY. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_project_tangent(cdyn_mbs *mbs, double *w);

/**
 * Constraint force of the last successful rhs or partition_rhs (a failed
 * one leaves it unchanged): generalized force (n) and
 * multipliers (m); either may be NULL. With the pseudo-inverse form the
 * multipliers are the minimum-norm choice; with the penalty form they are
 * its estimate alpha_c (Phi_q q'' - s). CDYN_ERR_ARG if there is none.
 */
CDYN_API cdyn_status cdyn_mbs_last_reactions(const cdyn_mbs *mbs, double *generalized_force,
                                        double *multipliers);

/**
 * Constraint residuals ||Phi||_inf and ||Phi_q q' + Phi_t||_inf at the state
 * (t, y) of the last successful rhs or projection. Either pointer may be
 * NULL. What that call did not need itself (both after an rhs without
 * stabilizer gains, the position residual after cdyn_mbs_project_velocities)
 * is evaluated here, once, from the model's callbacks at the stored (t, y),
 * and counts in the counters; the model must still give the same Phi there.
 * Errors: CDYN_ERR_ARG (NULL mbs, no successful call yet), and for an
 * evaluation CDYN_ERR_CALLBACK, CDYN_ERR_NONFINITE and CDYN_ERR_BUSY (called
 * from inside one of this object's callbacks); a failed evaluation is tried
 * again at the next call. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_last_residuals(cdyn_mbs *mbs, double *position, double *velocity);

/**
 * Constraint residuals at a state the caller holds (T4.1): ||Phi(q, t)||_inf
 * and ||Phi_q(q, t) q' + Phi_t(q, t)||_inf at y = (q, q') (2n) and t, from
 * the model's callbacks (Phi_t by the set time terms, or differenced as in
 * cdyn_mbs_rhs()). Either output may be NULL; both are 0 for m = 0. Does not
 * change what cdyn_mbs_last_residuals() and cdyn_mbs_last_reactions() report (the
 * last rhs or projection); counts as phi and jacobian evaluations in the
 * counters. No allocation. Errors: CDYN_ERR_ARG (NULL mbs or y, no model),
 * CDYN_ERR_NONFINITE (t or y, or a callback's output), CDYN_ERR_CALLBACK,
 * CDYN_ERR_BUSY (called from inside one of this object's callbacks).
 */
CDYN_API cdyn_status cdyn_mbs_residuals(cdyn_mbs *mbs, double t, const double *y,
                                           double *position, double *velocity);

/**
 * Coordinate partitioning (T4.10): choose d = n - m independent
 * coordinates at y = [q; q'] and keep y as the warm start of the dependent
 * ones. Requires 0 < m < n. The rank of Phi_q is decided as everywhere
 * (cdyn_nullspace); the coordinates are chosen in the chart frame of
 * cdyn_mbs_partition_quality(): a pivoted QR of Phi_q with every
 * coordinate in its frame unit, then exchanges of a dependent and an
 * independent coordinate while some |d q_dep / d q_ind| in those units
 * exceeds 1 + 1/16 (each raises the chosen block's volume in the frame by
 * that factor; at most 4 (m + 1) of them), so the chosen partition's
 * quality is at most 1 + 1/16 (unless that many do not reach it).
 * Evaluates M at y once (a mass evaluation in the counters) for the
 * frame. Returns CDYN_ERR_SINGULAR when Phi_q is rank deficient (the
 * redundant rows are named in the message).
 */
CDYN_API cdyn_status cdyn_mbs_partition(cdyn_mbs *mbs, double t, const double *y);

/**
 * The independent (d) and dependent (m) coordinate indices of the current
 * partition; either may be NULL. Returns d, or -1 (with the message) for
 * NULL mbs, before cdyn_mbs_partition(), or when the two lists overlap.
 */
CDYN_API int cdyn_mbs_partition_coordinates(const cdyn_mbs *mbs, int *independent,
                                            int *dependent);

/** z = [q_ind; q'_ind] (2d) from y = [q; q'] (2n). */
CDYN_API cdyn_status cdyn_mbs_partition_gather(cdyn_mbs *mbs, const double *y, double *z);

/**
 * Right-hand side of the partitioned ODE z' = f(t, z), z = [q_ind; q'_ind]:
 * the dependent coordinates by Newton on Phi(q, t) = 0 (warm start), the
 * dependent speeds from Phi_q q' = -Phi_t (T1.2), the accelerations from the
 * null-space reduction with W = Phi_q and W q'' = xi (T4.10). When the
 * partition becomes a poor choice (cdyn_mbs_partition_event(): more than
 * `limit` times worse than the best at this configuration) the result is
 * still computed with the current partition and the event turns 1 after a
 * successful call: repartition between steps (cdyn_mbs_partition_state(),
 * cdyn_mbs_partition(), cdyn_mbs_partition_gather()). Every call, an
 * integrator's trial stages included, feeds the history the quality is
 * measured against. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_partition_rhs(cdyn_mbs *mbs, double t, const double *z,
                                            double *zdot);

/**
 * The full consistent state y = [q; q'] (2n) at an accepted (t, z), z =
 * [q_ind; q'_ind] (2d) of the current partition: the dependent coordinates
 * by Newton on Phi(q, t) = 0 (warm start: the last consistent state), the
 * dependent speeds from Phi_q q' = -Phi_t. Call it with the integrator's
 * accepted step (not the state of its last rhs call, which may be a
 * corrector iterate), e.g. before repartitioning. y may alias z. Returns
 * CDYN_OK, CDYN_ERR_NOCONV (Newton), CDYN_ERR_SINGULAR, CDYN_ERR_ARG,
 * CDYN_ERR_NONFINITE, CDYN_ERR_CALLBACK, CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_mbs_partition_state(cdyn_mbs *mbs, double t, const double *z,
                                              double *y);

/**
 * Linearization in minimal coordinates (THEORY T4.10): the state matrix
 * A = df/dz (2d x 2d, lda >= 2d) of the partitioned ODE z' = f(t, z) of
 * cdyn_mbs_partition_rhs() at (t, z), z = [q_ind; q'_ind] of the current
 * partition. At an equilibrium its eigenvalues are the linear modes of the
 * mechanism: for an undamped one, +-i omega with the natural frequencies
 * omega (examples/linearize.c).
 *
 * Through the chain rule (THEORY T4.10): one cdyn_mbs_partition_rhs() at
 * z, then per column the direction in which z_j moves the consistent
 * state (a coordinate also moves the dependent coordinates, along the
 * null space of Phi_q, and the dependent speeds, from differences of
 * Phi_q q' + Phi_t along it: 6 Phi_q and Phi_t evaluations), extrapolated
 * central differences of M, Phi_q, Q and xi along it (6 evaluations each;
 * a speed moves only Q and xi) and a null-space solve with the
 * partition's factors at z. Steps 1e-3 of each entry's magnitude, from
 * scale (2d values > 0, may be NULL): NULL takes the largest of |z_j| and
 * the |q| (for a speed |q'|) of the consistent state, and a speed half
 * that is all zero takes the coordinates' magnitude per second; a
 * coordinate with a period P (cdyn_mbs_set_periods) at most P / (2 pi).
 * That broad step is tried first: an entry near 0 says no more of the
 * scale the model varies on than 0 does (an arm held 1e-6 rad from
 * straight, stepped by 1e-9 rad, lost its stiffness column to rounding
 * with CDYN_OK); where it does not settle at once (agreement and an
 * extrapolation within 1e-9), the column starts again from 1e-3 of |z_j|
 * (a film 1e-6 m thick beside a crank at 1.2e5 rad; test_linearize).
 *
 * Verified steps: a state's size says nothing of the scale the model
 * varies on (an angle of many turns, a road profile under a car 100 km
 * along, friction regularized over 1e-4 m/s at rest). Each column's
 * extrapolated difference (steps h and 2h) is compared with a central
 * difference at h / 16.6, entry by entry, within 1e-4 of the largest
 * size its parts have had, plus the finer one's truncation and the
 * rounding of both (the time terms' error estimate where they are
 * differenced); the second differences of the same evaluations must
 * agree the same way, so that a disagreement that merely crosses zero
 * does not pass. Where they disagree the step falls by 16.6 (at most 7
 * times); a step that agrees but whose extrapolation is not yet within
 * 1e-9 of its size, or that had to fall, is confirmed one level finer
 * (the last level too, unless its error bound is within 1e-6).
 * 2 evaluations more per column when the first step fits; a column that
 * agrees on no step gives CDYN_ERR_NOCONV naming it (a force without a
 * derivative there, such as dry friction at rest; quadratic drag at rest
 * has one, 0, and gets it). Measured (test_mbs, test_linearize): a crank
 * at 1.2e5 rad without periods, whose steps of 120 rad gave both
 * Jacobians off by their whole size with CDYN_OK, within 2.6e-10
 * (cdyn_mbs_rhs_jacobian) and 6.6e-10 (this one) of the largest entry at
 * the angle reduced modulo 2 pi; with its period, 9e-12; friction
 * regularized over 1e-4 m/s and a road at 100 km, which gave d v'/d v 8.6
 * times too small and d v'/d x of the wrong sign, within 5e-10 of the hand
 * Jacobians in length units of 1e-8, 1 and 1e8 m; a road of wavelength
 * 2 pi m at 300 000 positions from 1 m to 5000 km, within 3.4e-9. The
 * checks can be fooled only where both orders' disagreements vanish at
 * once; give an angle of many turns its period.
 * The first d rows
 * are [0 I] exactly. Accuracy (test_linearize, against hand derivations
 * and a quad-precision reference): 2e-13 relative with Phi_t and xi given
 * (cdyn_mbs_set_time_terms()), also for pendulums of 1.3e-6 m and 1.3e6 m,
 * 1e-12 of each column for a double pendulum in motion; with xi left to
 * differences its error adds: 3e-8 for a 1.3 m pendulum, 7e-9 for the
 * 1.3e6 m one, 7e-8 for the double pendulum in motion (the same one at
 * rest: its frequencies to 1e-16). When a column's solve is not certified
 * (or its differences overflow: forces of 1e307 N on masses of 1e300 kg),
 * the partitioned right-hand side itself is differenced instead (12 d + 2
 * evaluations when no step is refined, each with a Newton solve of the
 * dependent coordinates; test_linearize, against the hand matrix to
 * 1e-10), with its steps verified the same way (the rounding allowed for
 * is 1e-10 of the right-hand side, its Newton solve's tolerance).
 * The evaluation at z commits, so warm start, reactions and the partition
 * event are those of (t, z); a failed call gives back those of before the
 * call (the rank histories keep what the evaluations added).
 *
 * A is written last (it may alias z) and only on success. Returns the
 * statuses of cdyn_mbs_partition_rhs(); CDYN_ERR_ARG for NULL, a bad lda,
 * a scale not finite and > 0, or no partition yet; CDYN_ERR_NOCONV for a
 * column whose differences settle on no step. No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_partition_jacobian(cdyn_mbs *mbs, double t, const double *z,
                                                 const double *scale, double *A, int lda);

/**
 * Input matrix of the same linearization: B = dz'/du (2d x inputs,
 * ldb >= 2d) at (t, z) for generalized forces Q(q, q', t, u) that depend
 * on inputs u, given Qu = dQ/du at the point (n x inputs, ldqu >= n; the
 * model's force callback keeps its form: it evaluates Q at the operating
 * input). The first d rows of B are 0 (q_ind' does not depend on u); the
 * others are d q''_ind / du, exact to rounding: q'' is linear in Q, so
 * column k is the null-space solve with F = dQ/du_k and c = 0 (T1.4-T1.5)
 * with the evaluation's factorization. With A from
 * cdyn_mbs_partition_jacobian(), dz = A dz + B du is the linear model.
 *
 * Evaluates cdyn_mbs_partition_rhs() at (t, z) first (committed like it).
 * B must not overlap z or Qu. Returns the statuses of
 * cdyn_mbs_partition_rhs(); CDYN_ERR_ARG for NULL, inputs < 1, a bad
 * leading dimension, overlapping B, or no partition yet;
 * CDYN_ERR_NONFINITE for a non-finite Qu, and the status of a failing
 * solve. B is written only when every column's solve succeeds (each runs
 * twice: once to look, once to write); on error it is untouched. No
 * allocation.
 */
CDYN_API cdyn_status cdyn_mbs_partition_input_matrix(cdyn_mbs *mbs, double t, const double *z,
                                                     int inputs, const double *Qu, int ldqu,
                                                     double *B, int ldb);

/**
 * The Jacobian J = d ydot / d y (2n x 2n, ldj >= 2n) of cdyn_mbs_rhs() at
 * (t, y), y = [q; q'], in the formulation and stabilizer set on mbs
 * (THEORY T4.3-T4.8): [0 I; dq''/dq dq''/dq'].
 *
 * Lagrange form (any gains), the pseudo-inverse where Phi_q has full rank,
 * and the penalty form: one evaluation of cdyn_mbs_rhs at y, whose
 * factorization then serves every column. Differentiating
 * K [q''; lambda] = [Q; s], K = [M Phi_q^T; Phi_q 0], gives
 * K d[q''; lambda] = db - dK [q''; lambda]; the penalty form, whose
 * M q'' + Phi_q^T lambda = Q has lambda = alpha (Phi_q q'' - s), solves
 * (M + Phi_q^T alpha Phi_q) dq'' = top + Phi_q^T alpha bottom with the
 * same [top; bottom] = db - dK [q''; lambda]. dK and db (M, Phi_q, Q and
 * s = xi - K_D Phi' - K_P Phi) come from extrapolated central differences
 * of the model's callbacks (steps as below, verified and refined as there;
 * a speed moves only Q, xi and Phi'), and each column's solve is refined
 * and certified like the evaluation's. Cost: the callbacks at 6 moved
 * states per column and one solve, measured 7.5-7.8, 12.9-13 and 16.4-17.1
 * right-hand sides at n = 2, 3 and 12 (4.1, 7.9 and 9.2 before the steps were
 * verified), against 2n + 1 for forward differences
 * (tests/bench/bench_projection). Accuracy (test_linearize, against hand
 * derivations and independent differences of the right-hand side), with
 * Phi_t and xi given, relative per column: 1e-10 for pendulums of 1.3e-6 m
 * to 1.3e6 m and masses of 2e-8 to 2e8 kg, a bead on a turning rod, an
 * unconstrained oscillator and a cart with M(q) and generalized Baumgarte
 * gains, 1e-9 for an 18-coordinate chain; with the time terms left to
 * differences, their own error divided by the step (2e-5 asserted on the
 * cart, 4.9e-6 measured; 1e-6 on the bead). Penalty form against a
 * quad-precision reference: 1e-9 up to alpha = 1e6, and at 1e9 the form's
 * own conditioning (about alpha |Phi_q|^2 / m) times eps (1.1e-7 measured,
 * where differences of the right-hand side were 5e-4 off). The default
 * alpha (cdyn_constraint_set_penalty) is a power of two, the same over a
 * neighbourhood of states, and each column's solve is refined where the
 * right-hand side was (towards the exact form away from singular poses),
 * so the Jacobian is the right-hand side's: 1.4e-13 of the exact form's
 * measured for pendulums of 1 g to 1 t in length units 1e-4 to 1e4 m.
 *
 * The pseudo-inverse below full rank, or a column whose solve is not
 * certified: the same extrapolated central differences of cdyn_mbs_rhs
 * itself as cdyn_mbs_partition_jacobian(), verified the same way (12 n + 2
 * evaluations when no step is refined; after the one that found the
 * factors unusable; friction regularized over 1e-4 m/s at rest on a
 * redundantly constrained body, test_linearize: 1.2e-11 off the hand
 * Jacobian).
 *
 * scale: 2n values > 0, or NULL, as for cdyn_mbs_partition_jacobian().
 * The last evaluation of cdyn_mbs_rhs is at y (warm start, reactions and
 * residuals are those of y); a failed call leaves them as before the call.
 * J is written last (may alias y) and only on success. Returns the
 * statuses of cdyn_mbs_rhs() (a callback's failure at a moved state
 * too); CDYN_ERR_ARG for NULL, a bad ldj or a bad scale; CDYN_ERR_NOCONV
 * for a column whose differences settle on no step (as for
 * cdyn_mbs_partition_jacobian()). No allocation.
 */
CDYN_API cdyn_status cdyn_mbs_rhs_jacobian(cdyn_mbs *mbs, double t, const double *y,
                                           const double *scale, double *J, int ldj);

/**
 * 1 when the last successful partition_rhs found the quality measure of
 * the current partition more than `limit` (cdyn_mbs_set_partition_limit())
 * times that of the partition cdyn_mbs_partition() would choose at the
 * same configuration, or a partition_rhs failed because the dependent
 * block became singular (that 1 stays until the next cdyn_mbs_partition()).
 * The caller should then repartition: cdyn_mbs_partition_state(),
 * cdyn_mbs_partition(), cdyn_mbs_partition_gather(). Evaluate
 * partition_rhs at the integrator's accepted (t, z) before asking: a value
 * from a trial stage says nothing of the accepted state. 0 otherwise (also
 * for NULL). When no partition beats the current one by that factor there
 * is no event, however large the measure: repartitioning could not help.
 */
CDYN_API int cdyn_mbs_partition_event(const cdyn_mbs *mbs);

/**
 * The event's values at the last partition_rhs: current (may be NULL) the
 * quality measure of the current partition, its largest sensitivity
 * |d q_dep / d q_ind| with every coordinate in its unit of the chart
 * frame, at least 1; best (may be NULL) the smaller of current and that
 * of the partition cdyn_mbs_partition() would choose there (equal to
 * current while current is within the limit). Near a fold of the chart
 * (the pendulum's x at the horizontal, where |dy/dx| = |x / y|) the
 * sensitivity grows without bound, and a fixed-step integrator's error
 * with it: the chart's k-th derivative grows like its power 2k - 1.
 *
 * The chart frame gives each coordinate a unit of the mechanism's own,
 * from two sources weighed alike: Phi_q's history since
 * cdyn_mbs_set_model() (the largest magnitude each entry has had: how far
 * a unit of q_j moves constraint i) and the inertia, sqrt of the largest
 * M_jj each coordinate has had (the kinetic metric, which ties what the
 * history has not seen yet, such as a coordinate that has not moved). The
 * units are the least-squares balance of the logarithms of both (each
 * history entry weighted down by its own balanced size, so that an entry
 * at rounding level, cos(pi/2) beside 1, does not pull it). Scaling a
 * coordinate's unit or a constraint's scales M and Phi_q's rows and
 * columns, which the balance follows exactly: the choice, the quality and
 * the event do not depend on the units (test_mbs: a slider crank with
 * lengths in units of 1e-8 to 1e8 m, M scaled accordingly, the same
 * partitions and qualities to 1e-9 and the same RK4 run; before, lengths in
 * km chose the rod angle at th = 1.5 with quality 1.43 where metres chose
 * the slider with 4.0).
 * CDYN_ERR_ARG before the first cdyn_mbs_partition().
 */
CDYN_API cdyn_status cdyn_mbs_partition_quality(const cdyn_mbs *mbs, double *current, double *best);

/**
 * How many times worse than the best partition at the same configuration
 * the current one may become (in the measure of
 * cdyn_mbs_partition_quality()) before cdyn_mbs_partition_event() asks for
 * a new one (default 1.1, >= 1: a 10 % hysteresis, above the 1 + 1/16 a
 * new partition may have, so the event's probe, a partition choice, runs
 * only on the steps that end in an event or nearly). The measure is
 * unit-free, so the limit does not depend on the units of the
 * coordinates.
 *
 * The limit decides how near its fold a chart is kept, and so the error
 * of a fixed-step integrator there (the documented loop with RK4 at h =
 * 10 ms; test_mbs asserts the default's): the pendulum in Cartesian
 * coordinates over the top at 8 rad/s, th(5 s) 3.3e-4 rad off with the
 * default (1.5e-3 with 1.5, 5.4e-3 with 2, 1.25 rad with the former
 * default 10, all CDYN_OK), in a swing of 86 deg 1.4e-6 after 10 s
 * (8.6e-2 with 10); the slider crank of a = 1.2 m, b = 2.5 m at 10 rad/s,
 * th(2 s) 1.6e-3 rad off, 1.6 times the error of RK4 on its minimal ODE
 * in th (0.59 rad with 10). No chart of the pendulum's x or y matches RK4
 * on th (4.7e-7 over the top): switched where |dx/dy| = 1, the best one is
 * still about 5 steps from its fold at 8 rad/s, and ends 1.2e-4 rad off.
 * Control the error near folds with the step (an adaptive integrator
 * does), or integrate minimal coordinates of your own. Events cost a
 * partition each (a QR and its exchanges): 20 in those 5 s of the
 * pendulum, 16 in the 2 s of the crank (1 with 10: that crank kept its
 * slider chart to its dead centre).
 */
CDYN_API cdyn_status cdyn_mbs_set_partition_limit(cdyn_mbs *mbs, double limit);

/**
 * Work done since cdyn_mbs_create() or cdyn_mbs_reset_counters() (in the
 * manner of CVODE's CVodeGetNum*): calls that ran (past their argument
 * checks) and the model's callbacks by kind, differences and Jacobian
 * checks included. The projection's and the dependent coordinates' Newton
 * iterations are counted by their solvers (cdyn_newton_get_counters() of
 * cdyn_mbs_newton(); the partition's solver is internal).
 */
typedef struct cdyn_mbs_counters {
    long rhs;                  /**< cdyn_mbs_rhs() calls that ran */
    long rhs_failures;         /**< of those, the ones that did not return CDYN_OK */
    long projections;          /**< cdyn_mbs_project() calls that ran */
    long velocity_projections; /**< cdyn_mbs_project_velocities() calls that ran */
    long partition_rhs;        /**< cdyn_mbs_partition_rhs() calls that ran */
    long partitions;           /**< successful cdyn_mbs_partition() calls (repartitions) */
    long mass_evaluations;     /**< M callbacks */
    long force_evaluations;    /**< Q callbacks */
    long phi_evaluations;      /**< Phi callbacks */
    long jacobian_evaluations; /**< Phi_q callbacks */
    long phi_t_evaluations;    /**< Phi_t callbacks */
    long xi_evaluations;       /**< xi callbacks */
} cdyn_mbs_counters;

/** Copy the counters. CDYN_ERR_ARG for NULL. Allowed from inside a callback. */
CDYN_API cdyn_status cdyn_mbs_get_counters(const cdyn_mbs *mbs, cdyn_mbs_counters *counters);

/** Set every counter to 0. CDYN_ERR_ARG for NULL, CDYN_ERR_BUSY inside a callback. */
CDYN_API cdyn_status cdyn_mbs_reset_counters(cdyn_mbs *mbs);

/** Non-zero code of the callback that failed last (0 if none or NULL). */
CDYN_API int cdyn_mbs_callback_code(const cdyn_mbs *mbs);

/** Message of the last failure ("" if none; a static text for NULL). */
CDYN_API const char *cdyn_mbs_last_error(const cdyn_mbs *mbs);

/** Number of coordinates n given at create time (-1 for NULL); y of
 * cdyn_mbs_rhs() has 2n entries. */
CDYN_API int cdyn_mbs_size(const cdyn_mbs *mbs);

/** Number of constraint rows m given at create time (-1 for NULL). */
CDYN_API int cdyn_mbs_rows(const cdyn_mbs *mbs);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_MBS_H */
