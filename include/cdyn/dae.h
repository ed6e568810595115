/**
 * @file dae.h
 * Quasi-linear DAEs M v' = F(v, t) with a singular M (constant, or M(t) by
 * callback): hidden
 * constraints, DAE index, and the minimum-order ODE of an index-1 system
 * whose algebraic states come from a bounded Newton solve (THEORY T3) — or
 * of an index-2 network whose junctions have no storage, with the
 * pressures as the balances' multipliers (cdyn_dae_split(), THEORY T1.7).
 *
 * Typical use: a hydraulic network in which the inertance of short orifice
 * branches is set to zero (THEORY T6.3). With r = rank M < n:
 *
 * - beta (n x (n-r)) spans the left null space of M, P (n x r) its range;
 *   the hidden constraints are G0(v, t) = beta^T F(v, t) = 0 (T3.1).
 * - cdyn_dae_analyze() finds the index at a point by repeated augmentation
 *   of M with the constraint Jacobians (T3.2).
 * - cdyn_dae_split() chooses r integrated states v_i and n-r algebraic
 *   states v_a (pivoted QR of dG0/dv, states without mass preferred as
 *   algebraic), and cdyn_dae_rhs() is the right-hand side y' = f(t, y) of
 *   the r x r minimum-order ODE in y = v_i (T3.3): each evaluation solves
 *   G0(v_i, v_a, t) = 0 for v_a with cdyn_newton (warm-started from the
 *   previous evaluation, bounded iterations, SVD fallback where dG0/dv_a is
 *   singular, e.g. at a closed valve).
 *
 * Units: every rank decision (rank of M, the index, the number of
 * algebraic states) is made on equilibrated matrices (rows and columns
 * scaled by powers of two), and the algebraic states are solved to
 * weighted tolerances, so a model written in SI units (pressures ~1e5 Pa
 * beside flows ~1e-4 m^3/s) gets the same verdicts and the same accuracy
 * as one written in bar and L/s. Which states become algebraic is a choice
 * among equally valid ones when several are (as for cdyn_nullspace, whose
 * split it uses) and can then change with the units; the consistent state
 * and the rates are the same either way, to the tolerances. The algebraic
 * states are solved accurately enough for the rates as well as for G0:
 * each row of F that carries mass (where the rates come from) bounds the
 * tolerance of every algebraic state in it, as rtol of the row's other
 * terms over the state's coefficient (never below the row's rounding).
 *
 * Lifecycle: cdyn_dae_create(n) → cdyn_dae_set_mass() (factors M and
 * allocates the parts that depend on its rank) → cdyn_dae_set_model() →
 * cdyn_dae_split() → cdyn_dae_consistent() → per step cdyn_dae_rhs()
 * (no allocation). One object must not be used from two threads at once.
 *
 * Callbacks return 0 on success; any other value stops the call with
 * CDYN_ERR_CALLBACK and is kept (cdyn_dae_callback_code()). A callback may
 * call the read-only accessors of this object and of its Newton solver
 * (cdyn_dae_rank(), cdyn_dae_last_error(), cdyn_newton_get_report(), ...);
 * every other call on them from inside a callback returns CDYN_ERR_BUSY and
 * changes nothing but the message.
 *
 * Aliasing: outputs are written after every input has been read, so an
 * output may alias an input (ydot may be y); two outputs of one call must
 * not overlap (CDYN_ERR_ARG).
 *
 * Failure semantics: on error, output arrays are untouched; the object
 * keeps its mass, split and last consistent algebraic states, so it stays
 * usable. A failed cdyn_dae_rhs() or cdyn_dae_consistent() also leaves
 * no magnitude learned by its solves (cdyn_dae_newton(), newton.h): the
 * next call's default tolerances are what they would have been without it.
 */
#ifndef CDYN_DAE_H
#define CDYN_DAE_H

#include "newton.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque DAE object for n states. */
typedef struct cdyn_dae cdyn_dae;

/** F (length n) = F(v, t). */
typedef int (*cdyn_dae_force_fn)(double t, const double *v, double *F, void *user);
/** dFdv (n x n, leading dimension ld) = dF/dv at (v, t). */
typedef int (*cdyn_dae_jacobian_fn)(double t, const double *v, double *dFdv, int ld,
                                    void *user);
/** dFdt (length n) = dF/dt at (v, t) (partial derivative, v fixed). */
typedef int (*cdyn_dae_time_fn)(double t, const double *v, double *dFdt, void *user);

/**
 * Mass matrix callback for a time-varying M(t): M (n x n, leading dimension
 * ldm) at time t.
 */
typedef int (*cdyn_dae_mass_fn)(double t, double *M, int ldm, void *user);

/** Most augmentation levels cdyn_dae_analyze() tries (index bound). */
#define CDYN_DAE_MAX_INDEX 8

/**
 * Allocate a DAE object for n >= 1 states. status (may be NULL):
 * CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NOMEM. Returns NULL on error.
 */
CDYN_API cdyn_dae *cdyn_dae_create(int n, cdyn_status *status);

/** Free the object; NULL is allowed. */
CDYN_API void cdyn_dae_free(cdyn_dae *dae);

/**
 * Relative rank tolerance for M and for the augmented matrices of the
 * index analysis (pivots of the pivoted QR of the equilibrated matrix
 * <= tol * largest count as zero: the rank policy, docs/theory.md). Default 1e-10 (the one default of every module);
 * tol in (0, 1). Applies from the next set_mass / analyze.
 */
CDYN_API cdyn_status cdyn_dae_set_rank_tolerance(cdyn_dae *dae, double tol);

/**
 * Highest index cdyn_dae_analyze() looks for, 1..CDYN_DAE_MAX_INDEX
 * (default 5). A DAE not resolved by then is reported as singular.
 */
CDYN_API cdyn_status cdyn_dae_set_max_index(cdyn_dae *dae, int max_index);

/**
 * Set the constant mass matrix M (n x n, ldm >= n, any structure) and factor
 * it: rank r by a pivoted QR of the equilibrated M (the rows that are
 * exactly zero kept last, so that beta picks their equations exactly),
 * orthonormal beta and P (THEORY T3.1; beta is exactly 0 in a row that
 * is the only non-zero of a column of M, also once such rows are set
 * aside, accurate row by row where rows
 * of M differ in size by many orders (its QR runs on the rows sorted by
 * size), and the algebraic states' Newton solve asks for no residual
 * below the rounding beta leaves in G0, estimated entry by entry).
 * Allocates what depends on the rank (the Newton solver of
 * the n - r algebraic states is created by the first singular M and kept,
 * with its settings, for the life of dae: cdyn_dae_newton()). Clears any
 * previous split. Returns CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NONFINITE,
 * CDYN_ERR_NOMEM (the previous mass, split and states are then kept),
 * CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_dae_set_mass(cdyn_dae *dae, const double *M, int ldm);

/**
 * Set a time-varying mass matrix M(t) by callback (THEORY T3.1-T3.3 with
 * M(t)): M(t0) is factored as by cdyn_dae_set_mass() and fixes the rank r,
 * which must stay the same. At every later evaluation M(t) is factored
 * again (pivoted QR, no allocation) and the left null space is taken as the basis
 * beta(t) closest to the previous one (orthogonal Procrustes alignment), so
 * that it varies smoothly; its derivative, needed in dG0/dt = beta'^T F +
 * beta^T dF/dt, comes from central differences in t as dF/dt's do
 * (cdyn_dae_set_fd_step(): two or four more mass evaluations per
 * right-hand side, more where M(t) varies faster than those steps resolve;
 * test_dae_mass: within 1.2e-9 of the rate for a mass turning at 1 kHz to
 * 100 kHz). A rank change
 * returns CDYN_ERR_SINGULAR.
 * user is passed to mass. Errors as cdyn_dae_set_mass(), plus
 * CDYN_ERR_CALLBACK.
 */
CDYN_API cdyn_status cdyn_dae_set_mass_fn(cdyn_dae *dae, cdyn_dae_mass_fn mass, void *user,
                                          double t0);

/**
 * The model: force (required), its Jacobian dF/dv and time derivative dF/dt
 * (either may be NULL: differences, see cdyn_dae_set_fd_step()), and the
 * user pointer passed to all three.
 */
CDYN_API cdyn_status cdyn_dae_set_model(cdyn_dae *dae, cdyn_dae_force_fn force,
                                            cdyn_dae_jacobian_fn jacobian,
                                            cdyn_dae_time_fn time_derivative, void *user);

/**
 * Check the model's derivative callbacks at (t, v): dF/dv (n x n) and
 * dF/dt, whichever were given, against central differences of F (each
 * state moved by eps^(1/3) times its magnitude as cdyn_dae_set_fd_step()
 * describes, or on its rows' scale near 0: status.h; t by eps^(1/3) s
 * whatever t). The worst disagreement goes to
 * report (status.h, cdyn_jacobian_check; col = n for dF/dt; suspect = 1
 * above 1e-6 relative). For use when writing a model: F is called 4n
 * times for dF/dv and 4 for dF/dt (4 more per column whose step is
 * shortened or widened, status.h; n + 1 more for dF/dt without dF/dv,
 * whose forward differences size the states' terms of F for the
 * rounding of the time differences); needs cdyn_dae_set_model() only.
 * CDYN_OK when the check ran (whatever it found); CDYN_ERR_ARG (NULL, no
 * derivative callback given), CDYN_ERR_NONFINITE, CDYN_ERR_CALLBACK,
 * CDYN_ERR_BUSY; report is written only on CDYN_OK. Leaves the split and
 * the last state as they were. No allocation.
 */
CDYN_API cdyn_status cdyn_dae_check_jacobian(cdyn_dae *dae, double t, const double *v,
                                             cdyn_jacobian_check *report);

/**
 * Relative finite-difference step of dF/dv when no Jacobian is given
 * (default 1.5e-8, in (0, 1)), for the analysis, the rates and the Newton
 * solve of the algebraic states alike: state j moves by h times the larger
 * of |v_j| and the largest |v_j| of any state given to cdyn_dae_split() or
 * found consistent so far (for a state never seen non-zero, the smallest
 * such magnitude of any state), so that a state converging to a root at 0
 * keeps a step above the rounding of F. A solved state's value within its
 * Newton tolerance of 0 counts as 0 (it is rounding), and only values the
 * solve tells apart from 0 are learned as magnitudes. A step that moves no
 * component of F by 1e-8 of its size (F's rounding would swallow it: a
 * circuit at rest) is grown until one does, up to four times (at most 1e8
 * each). dF/dt, when not given, comes from central differences stepped
 * h = 6e-6 s and h / 4 whatever t, checked against each other entry by
 * entry against the rounding of F's terms (sum_j |dF_ij/dv_j v_j| at v,
 * dF/dv the callback's or its differences; at a consistent state an
 * algebraic equation's value is its residual, about 0, while its rounding
 * is that of terms as large as its inputs): F the same bits at t +- h and
 * at t + 256 h gives 0 exactly (three F evaluations); else (four) an
 * entry is the longer difference where the two agree to that rounding,
 * their Richardson extrapolation where they agree within 1e-4 (its error
 * then about 5e-11 of the entry for a smooth input), and the others from
 * a tableau of finer steps (down to 3.7e-10 s) on those entries alone:
 * inputs faster than about 700 Hz, or a jump within 6e-6 s of t.
 * Measured (test_dae_index2, test_sparse_dae): pumps of 50 Hz to 100 kHz
 * within 1.4e-9 of their rate amplitude at t = 1 s (one difference,
 * before: 9e-5 at 1 kHz, 0.9 % at 10 kHz, 20 % at 100 kHz, with CDYN_OK).
 * Where the rounding of the terms is above 1e-6 of the longer difference
 * (a slow drift on large terms), the steps go on to 4 h, 16 h, ... up to
 * 1.6 s (two F evaluations each, at most 18) while each agrees with the
 * one before to its rounding, until that is within 1e-6 of the difference
 * (test_dae, test_sparse_dae: a reservoir of 1e7 Pa drawn down by 0.1 to
 * 1e-4 Pa/s, in any units, within 6e-6 of its orifice's hand rate;
 * before, 6.6e-3 off and 0, with CDYN_OK); slower drifts are within about
 * eps |terms| / 1.6 s, and one that leaves F's bits as they are at
 * t + 256 h (below about eps |terms| / 3e-3 s) reads 0.
 * Late in a run the inputs' own rounding sets the limit: sin(w t) in F
 * rounds its phase by about eps w t, which the differences turn into
 * about eps t / h of the rate (4e-6 at t = 1e4 s and 100 kHz). The size
 * of t says nothing of the time scale of the inputs: steps of 6e-6 |t|
 * (before) made a network with a 50 Hz inflow have its rates wrong in
 * sign at t = 1e4 s. A jump exactly at t has no derivative; the tableau's
 * best entry is returned (give dF/dt, or stop the integrator there).
 */
CDYN_API cdyn_status cdyn_dae_set_fd_step(cdyn_dae *dae, double h);

/**
 * Accuracy of the algebraic states that cdyn_dae_consistent() and
 * cdyn_dae_rhs() solve for: each is accepted when Newton's predicted
 * correction is within rtol |v_j| + atol_j and the residual test holds
 * (cdyn_newton's weighted tests, newton.h). atol: n values >= 0 in the
 * units of the states (only the algebraic ones are used), or NULL for
 * cdyn_newton's automatic default. rtol in [1e-15, 1); default 1e-10.
 *
 * Relation to the integrator: an error e in v_a reaches the right-hand
 * side through G_a^{-1} G_i and P^T M, so the rhs carries a relative error
 * of about rtol times the condition of the minimum-order system. With
 * rtol at 1e-3 of the integrator's relative tolerance (and atol likewise),
 * the algebraic solve stays below the integrator's error test; the default
 * suits integrator tolerances down to about 1e-7. Takes effect at the next
 * cdyn_dae_split(), where it sets the tolerances of cdyn_dae_newton().
 * CDYN_ERR_ARG for bad values (settings unchanged), CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_dae_set_tolerances(cdyn_dae *dae, double rtol, const double *atol);

/** Rank r of M after cdyn_dae_set_mass() (-1 before, or for NULL). */
CDYN_API int cdyn_dae_rank(const cdyn_dae *dae);

/** Number of states n given at create time (-1 for NULL). */
CDYN_API int cdyn_dae_size(const cdyn_dae *dae);

/**
 * Length of y, the state of the minimum-order ODE: after cdyn_dae_split()
 * r for index 1 and r - q in the index-2 form (q = n - r constraints);
 * before a split, r. -1 for NULL. Size the integrator's vector with this,
 * not with cdyn_dae_rank().
 */
CDYN_API int cdyn_dae_ode_size(const cdyn_dae *dae);

/** 1 when the current split is the index-2 form (cdyn_dae_split()), else 0 (also for NULL). */
CDYN_API int cdyn_dae_index2(const cdyn_dae *dae);

/**
 * beta (n x (n-r), ldbeta >= n), orthonormal, beta^T M = 0 and P (n x r,
 * ldp >= n), orthonormal basis of the range of M. Either output may be NULL.
 * CDYN_ERR_ARG before set_mass, for NULL dae or bad leading dimensions.
 */
CDYN_API cdyn_status cdyn_dae_bases(const cdyn_dae *dae, double *beta, int ldbeta, double *P,
                                    int ldp);

/**
 * Hidden constraints G0 = beta^T F(v, t) (length n - r) at (t, v) (T3.1).
 * G0 is written last and may alias v. Returns CDYN_OK, CDYN_ERR_ARG,
 * CDYN_ERR_NONFINITE (v, F, or a G0 that overflows; G0 untouched),
 * CDYN_ERR_CALLBACK.
 */
CDYN_API cdyn_status cdyn_dae_hidden_constraints(cdyn_dae *dae, double t, const double *v,
                                                 double *G0);

/**
 * DAE index at (t, v) by repeated augmentation (T3.2): start from M with
 * the Jacobian dF/dv; at each level the rows of the augmented matrix that
 * the rank decision finds dependent are replaced by the Jacobians of the constraints they
 * carry, until the matrix has full rank n. Each level's rank decision uses
 * the rank tolerance. This is the index of the DAE linearised at the point.
 *
 * index  out: 0 (M regular: an ODE), 1, 2, ... Written on success only.
 * Returns CDYN_OK; CDYN_ERR_SINGULAR if no full rank is reached within the
 * maximum index (singular DAE, or index above the bound: the message says);
 * CDYN_ERR_ARG, CDYN_ERR_NONFINITE, CDYN_ERR_CALLBACK. No allocation.
 */
CDYN_API cdyn_status cdyn_dae_analyze(cdyn_dae *dae, double t, const double *v, int *index);

/**
 * After cdyn_dae_analyze(): the number of hidden constraints found at
 * augmentation level `level` (0 = the n - r constraints beta^T F, 1 = those
 * from differentiating them once, ...), or -1 if level is out of range,
 * nothing was analyzed or dae is NULL.
 */
CDYN_API int cdyn_dae_constraints_at_level(const cdyn_dae *dae, int level);

/**
 * After cdyn_dae_analyze(): for each of the n equations, the first level
 * at which it takes part in a hidden constraint (-1 if never): level 0
 * marks the purely algebraic equations. level_of_equation has n entries.
 */
CDYN_API cdyn_status cdyn_dae_equation_levels(const cdyn_dae *dae, int *level_of_equation);

/**
 * Split the states at (t, v) into r integrated and n - r algebraic ones
 * (T3.3): the algebraic states are chosen by pivoted QR of dG0/dv, taking
 * states whose column of M is zero first. An M of full rank needs no
 * split (all states integrated, always succeeds).
 *
 * Index 2 (hydraulic networks whose junctions have no storage,
 * docs/theory.md "Index-2 networks"): when the analysis finds index 2 and
 * M has exactly q zero columns, the split is the index-2 form. The
 * massless states the hidden constraints G0 do not see (the junction
 * pressures, absent from the junction balances) are the constraints'
 * multipliers z; massless states G0 does see (an orifice's flow and the
 * pressure difference across it: a mixed index-1/2 network) are solved
 * from G0 with the states with mass x_d that complete the set, and where
 * G0 sees only a combination of pressures, the rest of it (the pressure
 * level of two junctions joined by an orifice) is a multiplier too. The
 * states are split by a pivoted QR of dG0/dv (cdyn_nullspace, as for
 * linear velocity constraints) into the integrated states y and the
 * dependent ones, solved from G0 = 0 at every evaluation (so the balances
 * hold to the Newton tolerance, without drift), and z comes from the rates
 * (P^T M x' = P^T F, dG0/dv v' + dG0/dt = 0) by a second Newton solve. y
 * has r - n_z entries (cdyn_dae_ode_size(), n_z multipliers). This form
 * needs a constant M (cdyn_dae_set_mass()).
 *
 * Refuses (CDYN_ERR_SINGULAR, the index in the message) a DAE whose index
 * at (t, v) is above 2, or 2 without that form (fewer than q massless
 * states; a multiplier that G0 sees along every choice of the others).
 * Stores v as the warm start of the algebraic states.
 */
CDYN_API cdyn_status cdyn_dae_split(cdyn_dae *dae, double t, const double *v);

/**
 * The current split: integrated (cdyn_dae_ode_size() entries, in the order
 * of y) and algebraic (the other n - cdyn_dae_ode_size() entries) state
 * indices, 0-based. For index 1 the algebraic list is v_a (q entries); in
 * the index-2 form it is the q dependent states (those with mass first),
 * then the n_z multipliers (n - cdyn_dae_ode_size() - q).
 * Either may be NULL. Returns the length of the integrated list, or -1
 * (with the message) for NULL dae, before cdyn_dae_split(), or when the
 * two lists overlap.
 */
CDYN_API int cdyn_dae_split_states(const cdyn_dae *dae, int *integrated, int *algebraic);

/**
 * Consistent initialisation: keep the integrated states of v, solve
 * G0(v_i, v_a, t) = 0 for v_a (from v's algebraic entries as the guess)
 * and write the consistent v back. In the index-2 form this is one
 * evaluation of the right-hand side from v, which also gives the
 * multipliers (and commits like cdyn_dae_rhs()). Returns CDYN_OK; CDYN_ERR_NOCONV when no
 * consistent v_a was found — the iteration cap was reached, or the
 * equations have no solution near the guess (v then holds the best iterate,
 * and the Newton report has the residual); CDYN_ERR_ARG (no split),
 * CDYN_ERR_NONFINITE, CDYN_ERR_CALLBACK, CDYN_ERR_BUSY.
 */
CDYN_API cdyn_status cdyn_dae_consistent(cdyn_dae *dae, double t, double *v);

/**
 * The right-hand side of the minimum-order ODE (T3.3): y = v_i (length
 * cdyn_dae_ode_size(): r, or r - q in the index-2 form of cdyn_dae_split(),
 * where the multipliers are solved after v_a and the rates are certified
 * the same way; with dF/dv, where their Jacobian is bit for bit the last
 * evaluation's, the rates' refinement through its kept factorization moves
 * them instead of a Newton solve, under the same certificate and the check
 * that G0 still holds, the Newton solve taking over where either fails:
 * docs/theory.md, "Index-2 networks") → ydot = v_i'. Solves G0 = 0 for v_a (warm start from the last
 * successful evaluation, the Newton cap applies; the solve starts with up
 * to four chord steps on the factorization of G_a that the last successful
 * evaluation left, and a fresh Jacobian and factorization at the end judge
 * the result with the unchanged convergence test: the Newton report's
 * iterations count the chord steps, and a failed call leaves the next one
 * as it would have been; in the index-2 form with dF/dv the solve instead
 * starts where one chord step and one further step on that factorization
 * end, with F and dF/dv there (which the rates need anyway) as its first
 * residual and Jacobian and no chord steps: the same convergence test, at
 * one dF/dv per evaluation; where anything fails there, the solve from the
 * warm start), then
 *   [P^T M Pi [I; A]] v_i' = P^T (F - M Pi [0; b]),
 *   A = -G_a^# G_i,  b = -G_a^# G_t,  v_a' = A v_i' + b,
 * with G_a^# the rank-revealing inverse of cdyn_newton (SVD outer inverse
 * where G_a is singular). The rates are certified: their componentwise
 * backward error on the linear system P^T M v' = P^T F, dG0/dv v' = -G_t
 * must reach a few rounding errors (after up to two steps of refinement),
 * so their error is at most about the condition of that system times
 * machine epsilon and the error of its data. Without a Jacobian callback
 * dG0/dv in that system is a forward difference (relative error about
 * 1e-8), which reaches v_i' when the algebraic states carry mass
 * (P^T M_a != 0; not for massless ones, as in hydraulics): give dF/dv for
 * tighter rates there. Returns CDYN_OK; CDYN_ERR_NOCONV (Newton cap reached or
 * no solution of G0 = 0 near the warm start: ydot untouched, state not
 * updated); CDYN_ERR_SINGULAR (the r x r matrix is singular, or the rates
 * are not determined to working accuracy); CDYN_ERR_ARG;
 * CDYN_ERR_NONFINITE; CDYN_ERR_CALLBACK; CDYN_ERR_BUSY. No allocation.
 */
CDYN_API cdyn_status cdyn_dae_rhs(cdyn_dae *dae, double t, const double *y, double *ydot);

/**
 * The right-hand side and its Jacobian J = d ydot / d y (ny x ny with
 * ny = cdyn_dae_ode_size(), leading dimension ldj >= max(ny, 1)) at
 * (t, y), for implicit integrators (the
 * iteration matrix I - gamma J of a BDF method; CVODE's CVLsJacFn is
 * cdyn_cvode_dae_jacobian() in sundials.h). THEORY T3.3 differentiated:
 * the algebraic states follow y by the implicit function theorem,
 * dv_a/dy = A = -G_a^# G_i with the factorization of G_a that this
 * evaluation's Newton solve left, and the rates' linear system is
 * differentiated with dF/dv (the Jacobian callback, or differences as
 * cdyn_dae_set_fd_step() describes). When the algebraic states have mass
 * coupling into the range of M (P^T M_a != 0, e.g. M = [m m; 0 0]), J also
 * needs the second derivatives of G0 along the motion: central differences
 * of the Jacobian callback along (v', 1) (2 more calls), or without one a
 * mixed second difference of F (4 r more F calls). For a massless
 * algebraic state (the hydraulic case) they are not needed.
 *
 * Accuracy (test_dae_jacobian, against analytic Jacobians): with the
 * Jacobian callback, J is exact to rounding when no second derivatives
 * are needed and within about 1e-9 relative when they are; without it,
 * within about 1e-7 (forward differences of F) and 1e-6 respectively.
 * The second derivatives step time by up to 6e-6 s (callback) or 1.2e-4 s
 * (without), unchecked: an input of w rad/s inside dF/dv adds about
 * (w h)^2 / 6 of that term (2.4e-4 at 1 kHz with the callback), unlike
 * the right-hand side's dF/dt, whose steps are checked (above).
 *
 * The evaluation is that of cdyn_dae_rhs() and is committed like one (warm
 * start, cdyn_dae_last_state()); ydot (r, may be NULL) receives its result.
 * Cost: one right-hand side plus r solves with its factorizations (no new
 * factorization) and the dF/dv for q = 0. Outputs are written last and may
 * alias y; ydot and J must not overlap.
 *
 * In the index-2 form (cdyn_dae_split()) with the Jacobian callback, J
 * also follows from the implicit function theorem on the evaluation's
 * factorizations (the dependent states' G_d, the multipliers' H_z, B's LU),
 * with the balances' second derivatives along the motion from central
 * differences of the callback (3 callback calls in all, no new
 * factorization): exact to rounding for affine balances (test_dae_index2's
 * network: 1e-12), within the states' Newton tolerance (7e-12 measured) on
 * a curved constraint. Without the callback J is a central difference of
 * the right-hand side (2 ny more evaluations, counted as right-hand sides;
 * steps 6e-6 of each state's magnitude): 3e-11 on the network, whose
 * balances the solves meet to rounding, but 4e-6 on the curved constraint,
 * whose solved states carry the Newton tolerance into the quotient. The
 * object's state is left at y.
 *
 * Returns the statuses of
 * cdyn_dae_rhs() and CDYN_ERR_ARG for a NULL J (when ny > 0) or a bad ldj;
 * on error J and ydot are untouched (the state is committed if the
 * evaluation itself succeeded). No allocation.
 */
CDYN_API cdyn_status cdyn_dae_rhs_jacobian(cdyn_dae *dae, double t, const double *y,
                                           double *ydot, double *J, int ldj);

/**
 * Input matrix of the linearized minimum-order system: B = d ydot / du
 * (ny x inputs, ldb >= max(ny, 1), ny = cdyn_dae_ode_size()) at (t, y)
 * for a force F(v, t, u) that depends on inputs u, given Fu = dF/du at the
 * point (n x inputs, ldfu >= n; the force callback keeps its form and
 * evaluates F at the operating input). At fixed y the algebraic states
 * move by dv_a = -G_a^# beta^T Fu du (the evaluation's factorization of
 * G_a) and P^T M_i dv_i' = P^T (Fu + dF/dv(:, a) dv_a) du: exact to the
 * accuracy of dF/dv (callback: rounding; differences: about 1e-8). With
 * J from cdyn_dae_rhs_jacobian(), dy' = J dy + B du is the linear model
 * (docs/theory.md "Linearization").
 *
 * Only for massless algebraic states (P^T M_a = 0, the hydraulic case) or
 * a regular M: otherwise the response of the constraint rows to u needs
 * second derivatives of F in u, and the call returns CDYN_ERR_ARG after
 * its evaluation; the index-2 form is refused likewise (before it).
 * Evaluates the right-hand side at (t, y) first (committed like
 * cdyn_dae_rhs()). B must not overlap y or Fu. Returns the statuses of
 * cdyn_dae_rhs(); CDYN_ERR_ARG for NULL, inputs < 1, a bad leading
 * dimension, overlapping B, no split, or the cases above;
 * CDYN_ERR_NONFINITE for a non-finite Fu or a column of B that overflows
 * (B is written only when every column is finite: each response is solved
 * twice, once to look and once to write). No allocation.
 */
CDYN_API cdyn_status cdyn_dae_input_matrix(cdyn_dae *dae, double t, const double *y, int inputs,
                                           const double *Fu, int ldfu, double *B, int ldb);

/**
 * The DAE in residual form for an implicit integrator of its own (IDA,
 * DASSL-type codes; THEORY T3.1): r = M(t) v' - F(t, v) at any v, v' (n
 * each) and t the caller holds, with M the constant mass or the mass
 * callback's M(t). Needs cdyn_dae_set_mass() (or _set_mass_fn()) and
 * cdyn_dae_set_model(); no split. r (n) may alias v or vdot; on error it
 * is untouched. It neither uses nor changes what the last cdyn_dae_rhs()
 * reports (cdyn_dae_last_state()). One force (and, with M(t), one mass)
 * evaluation, counted. No allocation.
 * Errors: CDYN_ERR_ARG (NULL pointer, no mass or model), CDYN_ERR_NONFINITE
 * (t, v, vdot or a callback's output, or an r that overflows), CDYN_ERR_CALLBACK (code in
 * cdyn_dae_callback_code()), CDYN_ERR_BUSY (from inside a callback).
 */
CDYN_API cdyn_status cdyn_dae_residual(cdyn_dae *dae, double t, const double *v,
                                       const double *vdot, double *r);

/**
 * The iteration matrix of the residual form: J = dr/dv + c_j dr/dv' =
 * c_j M(t) - dF/dv (n x n, leading dimension ldj >= n) at (t, v), with
 * dF/dv from the model's jacobian callback or, without one, forward
 * differences (the step of cdyn_dae_set_fd_step()). J must not overlap v;
 * on error it is untouched. Same requirements, counters and
 * errors as cdyn_dae_residual(), plus CDYN_ERR_ARG for ldj < n and
 * CDYN_ERR_NONFINITE for c_j or a J that overflows. No allocation.
 */
CDYN_API cdyn_status cdyn_dae_residual_jacobian(cdyn_dae *dae, double t, double c_j,
                                                const double *v, double *J, int ldj);

/**
 * Full state v and rate v' (length n each; either may be NULL) of the last
 * successful cdyn_dae_rhs(). In the index-2 form the rates of the
 * multipliers (junction pressures), and of the massless dependent states
 * that move with them (the other pressure across an orifice), are not
 * computed and are written as 0 (their columns of M are zero, so M v' is
 * exact). CDYN_ERR_ARG if there was none.
 */
CDYN_API cdyn_status cdyn_dae_last_state(const cdyn_dae *dae, double *v, double *vdot);

/**
 * The Newton solver for the algebraic states: set its iteration cap and
 * tolerances, read its report after each cdyn_dae_rhs(). NULL until the
 * first cdyn_dae_set_mass() (or _fn) that finds M singular; from then on
 * the same object, with the settings made on it, for the life of dae (a
 * later set_mass resizes it; per-unknown tolerances are cleared when the
 * number of algebraic states changes). Owned by the DAE object; NULL for a
 * NULL dae.
 */
CDYN_API cdyn_newton *cdyn_dae_newton(cdyn_dae *dae);

/**
 * Work done since cdyn_dae_create() or cdyn_dae_reset_counters() (in the
 * manner of CVODE's CVodeGetNum*): right-hand sides that ran (past their
 * argument checks) and how many failed, and the model's callbacks by kind,
 * differences and Jacobian checks included. The algebraic solves' Newton
 * iterations, SVD steps and line-search halvings are counted by the
 * solver: cdyn_newton_get_counters(cdyn_dae_newton(dae), ...).
 */
typedef struct cdyn_dae_counters {
    long rhs;                  /**< cdyn_dae_rhs() calls that ran */
    long rhs_failures;         /**< of those, the ones that did not return CDYN_OK */
    long force_evaluations;    /**< F callbacks */
    long jacobian_evaluations; /**< dF/dv callbacks */
    long time_evaluations;     /**< dF/dt callbacks */
    long mass_evaluations;     /**< M(t) callbacks */
    long rhs_jacobians;        /**< cdyn_dae_rhs_jacobian() calls that got past their evaluation */
} cdyn_dae_counters;

/** Copy the counters. CDYN_ERR_ARG for NULL. Allowed from inside a callback. */
CDYN_API cdyn_status cdyn_dae_get_counters(const cdyn_dae *dae, cdyn_dae_counters *counters);

/** Set every counter to 0. CDYN_ERR_ARG for NULL, CDYN_ERR_BUSY inside a callback. */
CDYN_API cdyn_status cdyn_dae_reset_counters(cdyn_dae *dae);

/**
 * How many rate solves (G_a^# of cdyn_dae_rhs) took the SVD path since the
 * last split (-1 for NULL); Newton iterations report their own count.
 */
CDYN_API long cdyn_dae_svd_rate_solves(const cdyn_dae *dae);

/**
 * 1 when the last successful cdyn_dae_rhs() found the split a poor chart:
 * the quality measure of its algebraic block (cdyn_dae_split_quality())
 * more than `limit` (cdyn_dae_set_split_limit()) times that of the split a
 * pivoted QR of dG0/dv would choose at that state, or the block singular
 * (that 1 stays until the next cdyn_dae_split()). 0 otherwise, and for
 * NULL. Watched at index 1 with M(t) (cdyn_dae_set_mass_fn()), whose
 * null space turns under the split. With a constant M nothing is watched
 * (the event stays 0): a split there can go bad only through a nonlinear
 * F, which was not seen, and the watch (a factorization of dG0/dv per
 * call) cost 15 % of the right-hand side of a stiff circuit ladder
 * (bench_stiff). A split stays right while the DAE is
 * index 1, but its block of dG0/dv can become singular along the way
 * while another choice is regular: with M(t) = p p^T, p = (cos t, sin t),
 * and G0 = sin t a - k cos t b, b chosen at t = 0 gets rates that grow as
 * 1 / (t - pi/2), and an integrator's error test on a no longer controls
 * the solution (b at pi/2 came back 5.9e8 where it is 0.29, every call
 * CDYN_OK; test_dae_mass). The caller then splits again between steps:
 * cdyn_dae_last_state() at the accepted step, cdyn_dae_split() there,
 * the new y from cdyn_dae_split_states(), and the integrator restarted.
 * Evaluate the right-hand side at the accepted (t, y) before asking: a
 * trial stage's value says nothing of the accepted state. When no split
 * beats the current one by that factor there is no event, however large
 * the measure: splitting again could not help.
 */
CDYN_API int cdyn_dae_split_event(const cdyn_dae *dae);

/**
 * The event's values at the last successful cdyn_dae_rhs() (or the split
 * itself before any): current (may be NULL) the quality measure of the
 * split, the larger of the condition estimate of its algebraic block of
 * dG0/dv and its largest sensitivity |d v_a / d v_i| with each state in
 * units of its column's largest size since cdyn_dae_set_mass_fn()
 * (unit-free for one constraint, within a factor of about 4 for several;
 * a mechanism's partition has a chart frame instead, mbs.h); >= 1,
 * INFINITY once the block is
 * singular. best (may be NULL) the measure of the split a pivoted QR
 * would choose at that state, computed only when current passes the
 * limit (else equal to current). 1 for both where nothing is watched.
 * CDYN_ERR_ARG for NULL or before cdyn_dae_split().
 */
CDYN_API cdyn_status cdyn_dae_split_quality(const cdyn_dae *dae, double *current, double *best);

/**
 * The factor by which the split's quality measure may exceed the best
 * one's (cdyn_dae_split_quality()) before cdyn_dae_split_event() asks for
 * a new split (default 10, >= 1). CDYN_ERR_ARG for NULL, a limit below 1,
 * NaN or Inf; CDYN_ERR_BUSY from a callback.
 */
CDYN_API cdyn_status cdyn_dae_set_split_limit(cdyn_dae *dae, double limit);

/** Non-zero code of the callback that failed last (0 if none or NULL). */
CDYN_API int cdyn_dae_callback_code(const cdyn_dae *dae);

/** Message of the last failure on this object ("" if none; a static text for NULL). */
CDYN_API const char *cdyn_dae_last_error(const cdyn_dae *dae);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_DAE_H */
