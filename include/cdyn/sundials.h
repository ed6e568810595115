/**
 * @file sundials.h
 * Optional adapters from cdyn model objects to SUNDIALS' CVODE and IDA
 * (library cdyn_sundials, CMake target cdyn::sundials, pkg-config
 * cdyn_sundials; built only when SUNDIALS >= 6 with CVODE, IDA, the serial
 * N_Vector and the dense matrix and linear solver was found). The core
 * library does not depend on SUNDIALS; this header is the only one that
 * includes SUNDIALS headers, and it is not part of <cdyn.h>. Usage and
 * measured results: docs/integrators.md.
 *
 * What is here:
 *
 * - CVODE, multibody (THEORY T4): cdyn_cvode_mbs_rhs() is a CVRhsFn for
 *   y = [q; q'] through cdyn_mbs_rhs(); cdyn_cvode_mbs_project() is a
 *   CVProjFn through cdyn_mbs_project() (T4.9), so CVODE projects every step
 *   onto Phi = 0 and Phi_q q' + Phi_t = 0; cdyn_cvode_attach_mbs() sets
 *   both user data and projection in one call; cdyn_cvode_mbs_jacobian()
 *   is a CVLsJacFn through cdyn_mbs_rhs_jacobian().
 * - CVODE, quasi-linear DAE (THEORY T3): cdyn_cvode_dae_rhs() is a CVRhsFn
 *   for the minimum-order ODE of an index-1 DAE or of the index-2 form of
 *   cdyn_dae_split(), y = v_i, through cdyn_dae_rhs(), and
 *   cdyn_cvode_dae_jacobian() its CVLsJacFn through
 *   cdyn_dae_rhs_jacobian(); cdyn_cvode_attach_dae() installs the latter.
 * - IDA, quasi-linear DAE: a cdyn_ida_dae adapter object gives the residual
 *   M v' - F(v, t) (IDAResFn), its Jacobian c_j M - dF/dv (IDALsJacFn, dense
 *   matrix), the differential/algebraic id vector (IDASetId) from cdyn's
 *   split, and consistent v, v' from cdyn's consistent initialisation
 *   (index 1 only).
 * - IDA, multibody: cdyn_ida_mbs_residual() writes the stabilized ODE
 *   y' = f(t, y) of cdyn_mbs_rhs() as an implicit residual y' - f(t, y)
 *   (every component differential); cdyn_ida_mbs_jacobian() is its
 *   IDALsJacFn.
 *
 * Vectors: every N_Vector passed to these functions must give its data by
 * N_VGetArrayPointer() — the serial N_Vector (N_VNew_Serial), or the OpenMP
 * and Pthreads ones — and have the length stated at each function. The
 * functions read and write that contiguous array; nothing is kept pointing
 * to it.
 *
 * Return values of the SUNDIALS callbacks (rhs, projection, residual,
 * Jacobian) follow SUNDIALS: 0 on success; a positive value for a failure
 * the integrator may recover from by a smaller step: +CDYN_ERR_NONFINITE,
 * +CDYN_ERR_NOCONV, and +CDYN_ERR_CALLBACK when the model callback returned
 * a positive code; a negative value stops the integrator: -CDYN_ERR_ARG
 * (wrong vector length, NULL user data, a call out of order),
 * -CDYN_ERR_CALLBACK when the model callback returned a negative code,
 * -CDYN_ERR_LAPACK, and -CDYN_ERR_SINGULAR: a singular configuration (a
 * kinematic fold, a rank-deficient Phi_q, an index change) belongs to the
 * state the integrator has reached, which a smaller step only approaches
 * (CVODE would shrink the step to nothing and end with CV_TOO_MUCH_WORK,
 * the diagnosis lost). So |value| is always the cdyn_status, and the model
 * object's last_error() holds the message.
 *
 * Threads: the user data (cdyn_mbs, cdyn_dae, cdyn_ida_dae) is used by the
 * integrator's thread; one model object per integrator.
 *
 * Precision: cdyn computes in double, so SUNDIALS must be built with
 * double precision (sunrealtype = realtype = double); this header refuses
 * anything else at compile time.
 */
#ifndef CDYN_SUNDIALS_H
#define CDYN_SUNDIALS_H

#include "dae.h"
#include "mbs.h"
#include "status.h"

#include <sundials/sundials_config.h>
#include <sundials/sundials_matrix.h>
#include <sundials/sundials_nvector.h>
#include <sundials/sundials_types.h>

#if !defined(SUNDIALS_DOUBLE_PRECISION)
#error "cdyn/sundials.h needs SUNDIALS built with double precision (sunrealtype = double)"
#endif
#if SUNDIALS_VERSION_MAJOR < 6
#error "cdyn/sundials.h needs SUNDIALS 6 or newer"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CVODE: multibody ---------------------------------------------------- */

/**
 * CVRhsFn for y = [q; q'] (serial vectors of length 2n, n the coordinates
 * of the model): ydot = [q'; q''] = cdyn_mbs_rhs(mbs, t, y). user_data is
 * the cdyn_mbs (CVodeSetUserData, or cdyn_cvode_attach_mbs()). The
 * formulation and stabilizer are those set on the cdyn_mbs. Returns as
 * described at the top; ydot is untouched on failure. No allocation.
 */
CDYN_API int cdyn_cvode_mbs_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user_data);

/**
 * CVLsJacFn (CVodeSetJacFn) for cdyn_cvode_mbs_rhs(), user_data the
 * cdyn_mbs: J = d ydot / d y (2n x 2n) by cdyn_mbs_rhs_jacobian() at
 * (t, y), into a dense SUNMatrix (SUNDenseMatrix(2n, 2n)), in the
 * formulation and stabilizer set on the cdyn_mbs (KKT, Baumgarte,
 * generalized Baumgarte, penalty, pseudo-inverse). One factorization
 * serves every column (mbs.h): measured at or below the cost of CVODE's
 * own difference quotients (2n + 1 right-hand sides) for the Lagrange form,
 * and far more accurate; only the pseudo-inverse below full rank takes
 * 8n + 2 right-hand sides (tests/bench/bench_projection, test_sundials).
 * The last evaluation is at y (the warm start and reactions are those of
 * y). fy and tmp1..tmp3 are not used. Returns as described at the top;
 * -CDYN_ERR_ARG for NULL user data, an odd length or a matrix that is not
 * dense 2n x 2n. No allocation.
 */
CDYN_API int cdyn_cvode_mbs_jacobian(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix J,
                                     void *user_data, N_Vector tmp1, N_Vector tmp2,
                                     N_Vector tmp3);

/**
 * CVProjFn (CVodeSetProjFn) with user_data the cdyn_mbs: projects
 * ycur = [q; q'] (length 2n, read only) with cdyn_mbs_project() — Newton on
 * Phi(q, t) = 0, then the linear step onto Phi_q q' + Phi_t = 0, in the
 * metric set by cdyn_mbs_set_projection_metric() — and returns the
 * correction corr = projected - ycur (length 2n). epsProj, CVODE's
 * tolerance for the projection's iteration (WRMS norm), is not used: the
 * projection's own Newton tolerances apply (cdyn_mbs_newton(); default
 * residual 1e-12), which are tighter than any error weight CVODE uses in
 * practice.
 *
 * err (length 2n; NULL when CVODE's error projection is off,
 * CVodeSetProjErrEst): CVODE's local error estimate on input, replaced by
 * its projection onto the tangent space of the manifold at the projected
 * point by cdyn_mbs_project_tangent(): err <- P err with
 * P = I - W Phi_q^T (Phi_q W Phi_q^T)^+ Phi_q applied to the position half
 * and the velocity half of err separately (W = I for the minimum-norm
 * metric, M^{-1} for the mass metric): the component of the error that the
 * projection removes is taken out of the estimate. The coupling of the
 * velocity constraint to positions ((Phi_q q')_q) is left out of P, as in
 * SUNDIALS' own pendulum example. P reuses the projection's factorization
 * (two matrix-vector products and two solves), so error projection costs
 * little; keep it on with the mass metric (docs/integrators.md: without it
 * CVODE's step collapsed on the slider crank at rtol 1e-10).
 *
 * Returns as described at the top: CDYN_ERR_NOCONV (Newton cap reached)
 * is recoverable (CVODE retries with a smaller step), CDYN_ERR_SINGULAR
 * stops it. On failure corr and err are unspecified (CVODE discards them).
 * After the call, cdyn_mbs_newton()'s report describes the projection of
 * ycur (the last call).
 */
CDYN_API int cdyn_cvode_mbs_project(sunrealtype t, N_Vector ycur, N_Vector corr,
                                    sunrealtype epsProj, N_Vector err, void *user_data);

/**
 * One call for projection in CVODE: CVodeSetUserData(cvode_mem, mbs) and
 * CVodeSetProjFn(cvode_mem, cdyn_cvode_mbs_project). Call after CVodeInit()
 * (with cdyn_cvode_mbs_rhs as the right-hand side) and before CVode().
 * Returns CV_SUCCESS or the flag of the CVODE call that failed:
 * CV_MEM_NULL, or CV_ILL_INPUT when CVODE was created with CV_ADAMS
 * (CVODE supports projection with CV_BDF only); CV_ILL_INPUT for a NULL
 * mbs. Projection frequency, error projection and the maximum
 * number of projection failures stay CVODE's (CVodeSetProjFrequency(),
 * CVodeSetProjErrEst(), CVodeSetMaxNumProjFails()).
 */
CDYN_API int cdyn_cvode_attach_mbs(void *cvode_mem, cdyn_mbs *mbs);

/* ---- CVODE: quasi-linear DAE, minimum-order ODE -------------------------- */

/**
 * CVRhsFn for the minimum-order ODE of an index-1 DAE (THEORY T3.3) or
 * of the index-2 form (cdyn_dae_split()):
 * y = v_i (length cdyn_dae_ode_size(), in the order of cdyn_dae_split_states()'
 * integrated states) → ydot = v_i' by cdyn_dae_rhs(). user_data is the
 * cdyn_dae, after cdyn_dae_split() and cdyn_dae_consistent(). The
 * algebraic states are solved inside every evaluation (warm-started from
 * the last successful one); to get the full v at an output (t, y), call
 * cdyn_dae_rhs() there and then cdyn_dae_last_state(). CDYN_ERR_NOCONV (Newton
 * cap) is recoverable, CDYN_ERR_SINGULAR stops the integrator. The split
 * is the caller's: where it can go bad (M(t), dae.h), evaluate at each
 * accepted step (CVodeGetCurrentTime, CVodeGetDky or the output) and ask
 * cdyn_dae_split_event(); on 1 split again there and restart CVODE
 * (CVodeReInit) with the new y. No allocation.
 */
CDYN_API int cdyn_cvode_dae_rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user_data);

/**
 * CVLsJacFn (CVodeSetJacFn) for the minimum-order ODE of
 * cdyn_cvode_dae_rhs(), user_data the cdyn_dae: J = d ydot / d y
 * (ny x ny, ny = cdyn_dae_ode_size()) by cdyn_dae_rhs_jacobian() at
 * (t, y), into a dense SUNMatrix (SUNDenseMatrix(ny, ny)). Without it
 * CVODE builds the Jacobian from ny + 1 right-hand sides, each a Newton
 * solve of the algebraic states; with it, from one evaluation and ny
 * solves with that evaluation's factorizations (index 1, and the index-2
 * form when the model has a Jacobian callback; the index-2 form without
 * one: central differences of the right-hand side; accuracy and cost in
 * dae.h). fy is not used (the evaluation is repeated, which
 * also makes the warm start that of (t, y)); tmp1..tmp3 are not used.
 * Returns as described at the top: -CDYN_ERR_ARG for NULL user data, a
 * wrong vector length or a matrix that is not dense ny x ny. No allocation.
 */
CDYN_API int cdyn_cvode_dae_jacobian(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix J,
                                     void *user_data, N_Vector tmp1, N_Vector tmp2,
                                     N_Vector tmp3);

/**
 * One call for the DAE in CVODE: CVodeSetUserData(cvode_mem, dae) and
 * CVodeSetJacFn(cvode_mem, cdyn_cvode_dae_jacobian). Call after
 * CVodeInit() (with cdyn_cvode_dae_rhs) and CVodeSetLinearSolver() with a
 * dense matrix and linear solver (SUNDenseMatrix, SUNLinSol_Dense), since
 * CVodeSetJacFn needs the linear solver. Returns CV_SUCCESS or the flag of
 * the CVODE call that failed (CV_MEM_NULL; CVLS_LMEM_NULL when no linear
 * solver is attached); CV_ILL_INPUT for a NULL dae.
 */
CDYN_API int cdyn_cvode_attach_dae(void *cvode_mem, cdyn_dae *dae);

/* ---- IDA: quasi-linear DAE ------------------------------------------------ */

/** Opaque IDA adapter for a cdyn_dae M v' = F(v, t) (does not own the cdyn_dae). */
typedef struct cdyn_ida_dae cdyn_ida_dae;

/**
 * Allocate the IDA adapter for `dae`: n, the mass (constant or M(t)), the
 * force and the jacobian callbacks all come from the cdyn_dae object
 * (cdyn_dae_size(), cdyn_dae_residual(), cdyn_dae_residual_jacobian()),
 * which must outlive the adapter. Needs cdyn_dae_set_mass() (or
 * _set_mass_fn()) done. A split in the index-2 form is not supported
 * (cdyn_ida_dae_id() and cdyn_ida_dae_consistent() return CDYN_ERR_ARG: use
 * the minimum-order ODE with CVODE).
 * status (may be NULL): CDYN_OK, CDYN_ERR_ARG (NULL dae or no mass yet),
 * CDYN_ERR_NOMEM. Returns NULL on error.
 */
CDYN_API cdyn_ida_dae *cdyn_ida_dae_create(cdyn_dae *dae, cdyn_status *status);

/** Number of states n of the adapter's DAE (-1 for NULL). */
CDYN_API int cdyn_ida_dae_size(const cdyn_ida_dae *ida_dae);

/** Free the adapter (not the cdyn_dae); NULL is allowed. */
CDYN_API void cdyn_ida_dae_free(cdyn_ida_dae *ida_dae);

/**
 * IDAResFn with user_data the cdyn_ida_dae: r = M(t) v' - F(v, t) for v,
 * v', r of length n (cdyn_dae_residual()). Returns as described at the top
 * (a callback's non-zero code decides the sign; the message is in
 * cdyn_ida_dae_last_error()); a non-finite F is recoverable. No allocation.
 */
CDYN_API int cdyn_ida_dae_residual(sunrealtype t, N_Vector v, N_Vector vdot, N_Vector r,
                                   void *user_data);

/**
 * IDALsJacFn with user_data the cdyn_ida_dae, for a dense SUNMatrix
 * (SUNDenseMatrix(n, n)): J = dr/dv + c_j dr/dv' = c_j M(t) - dF/dv
 * (cdyn_dae_residual_jacobian(): the jacobian callback, or forward
 * differences without one). -CDYN_ERR_ARG if J is not a dense n x n
 * matrix. tmp1..tmp3 are not used. No allocation.
 */
CDYN_API int cdyn_ida_dae_jacobian(sunrealtype t, sunrealtype c_j, N_Vector v, N_Vector vdot,
                                   N_Vector r, SUNMatrix J, void *user_data, N_Vector tmp1,
                                   N_Vector tmp2, N_Vector tmp3);

/**
 * The id vector for IDASetId (length n): 1 for the states cdyn integrates
 * (cdyn_dae_split_states() after cdyn_dae_split()), 0 for its algebraic states.
 * IDA uses it in IDACalcIC (IDA_YA_YDP_INIT) and, with
 * IDASetSuppressAlg(), to leave the algebraic states out of the error
 * test. When the algebraic states' columns of M are zero (e.g. a diagonal
 * M, as in THEORY T6.3) this is exactly IDA's differential/algebraic
 * split; an algebraic state whose column of M is not zero is marked 0
 * although its derivative enters the equations — use the consistent values
 * of cdyn_ida_dae_consistent() rather than IDACalcIC then. Returns
 * CDYN_OK, CDYN_ERR_ARG (no split, NULL, wrong length).
 */
CDYN_API cdyn_status cdyn_ida_dae_id(cdyn_ida_dae *ida_dae, N_Vector id);

/**
 * Consistent initial values at t0 for IDAInit (v, v' of length n): v in:
 * integrated states kept, algebraic ones the guess; v out: consistent
 * (cdyn_dae_consistent(), G0 = 0 to the Newton tolerance); v' out: the
 * rates of the minimum-order ODE at that point (cdyn_dae_rhs(), then
 * cdyn_dae_last_state()), so M v' = F(v, t0) holds to rounding and the
 * algebraic rates satisfy d/dt G0 = 0 (also with M = 0, where every rate
 * comes from that). Returns the cdyn_dae's status
 * (CDYN_ERR_NOCONV: no consistent v found, v holds the best iterate and
 * v' is untouched); CDYN_ERR_ARG for NULL or wrong lengths.
 */
CDYN_API cdyn_status cdyn_ida_dae_consistent(cdyn_ida_dae *ida_dae, sunrealtype t0, N_Vector v,
                                             N_Vector vdot);

/**
 * One call after IDAInit(ida_mem, cdyn_ida_dae_residual, ...) and
 * IDASetLinearSolver() (dense): IDASetUserData(ida_dae), IDASetId() with
 * the id vector of cdyn_ida_dae_id() (built in a clone of `like`, a vector
 * of length n, and freed again: IDA keeps its own copy), and
 * IDASetJacFn(cdyn_ida_dae_jacobian). Returns IDA_SUCCESS, the flag of the IDA call that failed, or
 * IDA_ILL_INPUT when the id vector could not be built (NULL arguments, no
 * split) and IDA_MEM_FAIL when the clone failed.
 */
CDYN_API int cdyn_ida_attach_dae(void *ida_mem, cdyn_ida_dae *ida_dae, N_Vector like);

/** Message of the adapter's last failure ("" if none; static text for NULL). */
CDYN_API const char *cdyn_ida_dae_last_error(const cdyn_ida_dae *ida_dae);

/* ---- IDA: multibody, stabilized ODE as an implicit residual --------------- */

/**
 * IDAResFn with user_data the cdyn_mbs: r = y' - f(t, y), y = [q; q']
 * (length 2n), f = cdyn_mbs_rhs() — the constrained equations in the
 * formulation and stabilizer set on the cdyn_mbs (Baumgarte, generalized
 * Baumgarte or penalty keep the drift bounded; IDA has no projection), an
 * ODE written as a residual: every component is differential (id = 1, no
 * IDASetId needed), dr/dy' = I. This lets a multibody model share an IDA
 * set-up with DAE parts; it is not an index-3 formulation in q and lambda.
 * No allocation.
 */
CDYN_API int cdyn_ida_mbs_residual(sunrealtype t, N_Vector y, N_Vector ydot, N_Vector r,
                                   void *user_data);

/**
 * IDALsJacFn (IDASetJacFn) matching cdyn_ida_mbs_residual(), user_data the
 * cdyn_mbs: J = dr/dy + c_j dr/dy' = c_j I - df/dy (2n x 2n, dense
 * SUNMatrix), df/dy by cdyn_mbs_rhs_jacobian() (cost and accuracy as for
 * cdyn_cvode_mbs_jacobian()). ydot, r and tmp1..tmp3 are not used.
 * Returns as described at the top; -CDYN_ERR_ARG for NULL user data, an
 * odd length or a matrix that is not dense 2n x 2n. No allocation.
 */
CDYN_API int cdyn_ida_mbs_jacobian(sunrealtype t, sunrealtype c_j, N_Vector y, N_Vector ydot,
                                   N_Vector r, SUNMatrix J, void *user_data, N_Vector tmp1,
                                   N_Vector tmp2, N_Vector tmp3);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_SUNDIALS_H */
