/**
 * @file rigid.h
 * One rigid body whose motion is constrained to f <= 6 degrees of freedom,
 * in generalized coordinates q (THEORY T5): the generalized accelerations
 * from the projected Newton-Euler equations, and the loads the constraints
 * carry.
 *
 * Conventions (stated once, used everywhere): a fixed laboratory frame; the
 * body frame is attached at the centre of rotation P; rotation R maps body to
 * lab vectors (v_lab = R v_body). Positions are of P; r_PC goes from P to
 * the centre of mass C. Loads are 6-vectors (force; moment), in lab
 * components, the moment about C. Euler angles (FREE and the presets built
 * on it) are roll phi, pitch theta, yaw psi with R = Rz(psi) Ry(theta) Rx(phi)
 * (z-y-x order, intrinsic); they are singular at theta = +-pi/2.
 *
 * Kinematics at one instant (T5.1) are given in a cdyn_rigid_kinematics:
 * v_P = J_T q' + v0, omega = J_R q' + w0, and
 * a_P = J_T q'' + L_T + v0_dot, omega' = J_R q'' + L_R + w0_dot.
 * Ready-made motions fill it (cdyn_rigid_preset_eval), or the caller does.
 *
 * Lifecycle: cdyn_rigid_create(f) → cdyn_rigid_set_body() → per instant
 * cdyn_rigid_accelerations(), or, with callbacks (cdyn_rigid_set_model())
 * or a ready-made motion (cdyn_rigid_set_preset()), cdyn_rigid_rhs() for an
 * integrator. No call after
 * create allocates. One object must not be used from two threads at once.
 * On any error the outputs are untouched and the object stays usable.
 *
 * Callbacks may call the read-only accessors of this object
 * (cdyn_rigid_last_error(), cdyn_rigid_callback_code(), ...); any other
 * call on it from inside a callback returns CDYN_ERR_BUSY and changes
 * nothing but the message.
 */
#ifndef CDYN_RIGID_H
#define CDYN_RIGID_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque rigid-body object for f generalized coordinates. */
typedef struct cdyn_rigid cdyn_rigid;

/** Kinematics of the constrained body at one instant (THEORY T5.1). */
typedef struct cdyn_rigid_kinematics {
    double J_T[18];      /**< 3 x f (column-major, leading dimension 3): dP/dq */
    double J_R[18];      /**< 3 x f: angular-velocity Jacobian */
    double L_T[3];       /**< velocity-product part of a_P: (J_T q')_q q' + 2 (dv0/dq) q' */
    double L_R[3];       /**< velocity-product part of omega': (J_R q')_q q' + (dJ_R/dt) q' + (dw0/dq) q' */
    double v0[3];        /**< explicit-time velocity of P */
    double v0_dot[3];    /**< its partial time derivative */
    double w0[3];        /**< explicit-time angular velocity */
    double w0_dot[3];    /**< its partial time derivative */
    double rotation[9];  /**< R, body to lab, 3 x 3 column-major */
    double position[3];  /**< P in the lab frame */
} cdyn_rigid_kinematics;

/** Ready-made motions (THEORY T5.4); q and f for each are listed. */
typedef enum cdyn_rigid_preset {
    CDYN_RIGID_FREE = 0,        /**< f = 6: q = (x, y, z, phi, theta, psi) of P */
    CDYN_RIGID_ROTATION = 1,    /**< f = 1: q = angle about a fixed lab axis through P */
    CDYN_RIGID_TRANSLATION = 2, /**< f = 1: q = displacement along a fixed lab axis */
    CDYN_RIGID_MANEUVER4 = 3,   /**< f = 4: q = (x, y, phi, psi); z = z0 and theta = theta0 fixed */
    CDYN_RIGID_CARRIAGE = 4,    /**< f = 2: q = (z, theta); carriage x(t), y(t), psi(t) prescribed */
    CDYN_RIGID_FIXED_POINT = 5  /**< f = 3: q = (phi, theta, psi); P fixed at origin (a spherical
                                     joint: a top, a gyroscope, a pendulum on a ball joint) */
} cdyn_rigid_preset;

/**
 * Prescribed carriage motion for CDYN_RIGID_CARRIAGE: pos, vel, acc (3 each)
 * = (x, y, psi) of the carriage and their first and second time
 * derivatives at t. Return 0 on success.
 */
typedef int (*cdyn_rigid_carriage_fn)(double t, double *pos, double *vel, double *acc,
                                      void *user);

/** Parameters of the presets (unused fields are ignored). */
typedef struct cdyn_rigid_preset_params {
    double axis[3];      /**< ROTATION, TRANSLATION: lab-frame axis (normalized; not zero) */
    double origin[3];    /**< ROTATION: P (on the axis); TRANSLATION: P at q = 0;
                              FIXED_POINT: P, the joint */
    double z0;           /**< MANEUVER4: the fixed heave (z of P) */
    double theta0;       /**< MANEUVER4: the fixed pitch */
    double phi0;         /**< CARRIAGE: fixed roll of the body */
    cdyn_rigid_carriage_fn carriage; /**< CARRIAGE: the prescribed motion */
    void *carriage_user; /**< passed to carriage */
} cdyn_rigid_preset_params;

/**
 * Kinematics callback of the model layer: fill k at (t, q, q') (k arrives
 * zeroed). Return 0 on success.
 */
typedef int (*cdyn_rigid_motion_fn)(double t, const double *q, const double *qdot,
                                    cdyn_rigid_kinematics *k, void *user);

/**
 * Impressed loads callback: F_i (6: force; moment about C, lab frame) at
 * (t, q, q') with the kinematics k of that instant (F_i arrives zeroed).
 * Return 0 on success.
 */
typedef int (*cdyn_rigid_loads_fn)(double t, const double *q, const double *qdot,
                                   const cdyn_rigid_kinematics *k, double *F_i, void *user);

/**
 * Allocate for 1 <= f <= 6 generalized coordinates. status (may be NULL):
 * CDYN_OK, CDYN_ERR_ARG, CDYN_ERR_NOMEM. Returns NULL on error.
 */
CDYN_API cdyn_rigid *cdyn_rigid_create(int f, cdyn_status *status);

/** Free; NULL is allowed. */
CDYN_API void cdyn_rigid_free(cdyn_rigid *rb);

/**
 * The body: mass > 0, inertia about the centre of mass in the body frame
 * (3 x 3, symmetric positive definite, leading dimension ldi >= 3; both
 * triangles read) and r_PC (3, body frame; may be NULL for 0). Returns
 * CDYN_ERR_ARG, CDYN_ERR_NONFINITE, CDYN_ERR_SINGULAR (inertia not SPD or
 * not symmetric).
 */
CDYN_API cdyn_status cdyn_rigid_set_body(cdyn_rigid *rb, double mass, const double *inertia,
                                         int ldi, const double *r_pc);

/**
 * Generalized accelerations and constraint loads at one instant (T5.2,
 * T5.3): with M_g = R I R^T and r_PC,lab = R r_PC,
 *   (J^T Mbar) q'' = J^T (F_i - Nbar),  J = [J_T - [r_PC]x J_R; J_R],
 *   F_q = Mbar q'' + Nbar - F_i.
 * k: kinematics; qdot (f); F_i (6). qdd (f) out; F_q (6, may be NULL) out:
 * the load the constraints exert (force; moment about C; the moment about P
 * is n_q + r_PC x f_q). CDYN_ERR_SINGULAR when J^T Mbar is not positive
 * definite by the definiteness policy (J loses rank, e.g. Euler angles at
 * theta = +-pi/2), read from the R of a Householder QR of the mass-weighted
 * J with equilibrated columns, whose least-squares solution q'' is (docs/
 * theory.md T5.3; J^T Mbar, whose condition is J's squared, is never
 * formed): a free body is within J's condition times the rounding; with
 * constraints the least-squares problem's cond^2 eps times the
 * constraint loads' share remains (measured 7.9e-8 at 1e-6 rad from the
 * Euler singularity; test_rigid);
 * CDYN_ERR_ARG (no body set, NULL, or k->rotation not a rotation:
 * R^T R - I beyond 1e-10 in an entry, or det R <= 0); CDYN_ERR_NONFINITE.
 * No allocation.
 */
CDYN_API cdyn_status cdyn_rigid_accelerations(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                              const double *qdot, const double *F_i,
                                              double *qdd, double *F_q);

/**
 * Velocity of P and angular velocity (3 each, lab frame; either may be
 * NULL): v_P = J_T q' + v0, omega = J_R q' + w0 (T5.1). The outputs are
 * written last and may alias qdot. Returns CDYN_ERR_ARG (NULL k or qdot),
 * CDYN_ERR_NONFINITE (an input, or a velocity that overflows; outputs
 * untouched). Needs no body.
 */
CDYN_API cdyn_status cdyn_rigid_velocities(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                           const double *qdot, double *v_p, double *omega);

/**
 * Fill k for a ready-made motion at (t, q, q') (T5.4); f must match the
 * preset (see cdyn_rigid_preset); params may be NULL for FREE. Having no
 * object, it reports the status only (no message). Returns CDYN_ERR_ARG (NULL, unknown
 * preset, zero axis, missing carriage callback), CDYN_ERR_NONFINITE (an
 * input, the carriage's output, or a velocity product that overflows; k
 * untouched), CDYN_ERR_CALLBACK (carriage callback failed). Allocates nothing.
 */
CDYN_API cdyn_status cdyn_rigid_preset_eval(cdyn_rigid_preset preset,
                                            const cdyn_rigid_preset_params *params, double t,
                                            const double *q, const double *qdot,
                                            cdyn_rigid_kinematics *k);

/** Number of coordinates of a preset (6, 1, 1, 4, 2, 3), or -1 if unknown. */
CDYN_API int cdyn_rigid_preset_dof(cdyn_rigid_preset preset);

/**
 * The coordinates of FIXED_POINT (and of FREE's rotation) from classical
 * Euler angles: zxz = (precession, nutation, spin), the z-x-z rotation
 * R = Rz(precession) Rx(nutation) Rz(spin) of the heavy-top literature, and
 * zxz_rate their rates (3 each, rad and rad/s). q = (phi, theta, psi) gets
 * the same R as cdyn's z-y-x angles (R = Rz(psi) Ry(theta) Rx(phi)) and
 * qdot the same angular velocity. q and qdot (3 each) are written last and
 * may alias the inputs. Returns CDYN_ERR_ARG (NULL), CDYN_ERR_NONFINITE (an
 * input, or rates that overflow; outputs untouched),
 * CDYN_ERR_SINGULAR when that R has a pitch of +-pi/2 to within 1e-8 (the
 * z-y-x angles are singular there: choose another reference frame for the
 * body). No allocation.
 */
CDYN_API cdyn_status cdyn_rigid_euler_zxz(const double *zxz, const double *zxz_rate, double *q,
                                          double *qdot);

/**
 * A load F (6: force; moment about C, lab frame, as cdyn_rigid_accelerations()
 * and cdyn_rigid_last_constraint_loads() report it) with its moment taken about
 * P instead: F_p = (f; n + r_PC,lab x f), r_PC,lab = R r_PC with R from k.
 * For the FIXED_POINT preset the constraint moment about the joint is zero
 * (a ball joint carries a force only). F_p (6) may alias F. Returns
 * CDYN_ERR_ARG (NULL, no body set: r_PC is the body's), CDYN_ERR_NONFINITE
 * (an input, or a moment that overflows; F_p untouched), CDYN_ERR_BUSY. No
 * allocation.
 */
CDYN_API cdyn_status cdyn_rigid_load_about_p(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                             const double *F, double *F_p);

/**
 * Model layer: the kinematics and loads callbacks and their user pointer.
 * motion must not be NULL (CDYN_ERR_ARG); loads may be NULL (F_i = 0).
 */
CDYN_API cdyn_status cdyn_rigid_set_model(cdyn_rigid *rb, cdyn_rigid_motion_fn motion,
                                          cdyn_rigid_loads_fn loads, void *user);

/**
 * Model layer with a ready-made motion (T5.4) that cdyn evaluates itself:
 * cdyn_rigid_rhs() then computes what it would with a motion callback that
 * calls cdyn_rigid_preset_eval(preset, params, ...), without that callback.
 * The preset must have f coordinates (cdyn_rigid_preset_dof()); params may
 * be NULL for FREE and is copied (a CARRIAGE callback and its user pointer
 * must stay valid; the carriage callback runs under the same rules as the
 * others). For FREE the right-hand side uses the free body's own equations
 * (Euler's equations about C, the translation of C, the angle rates in
 * closed form): the same q'' to rounding, with constraint loads exactly 0,
 * and CDYN_ERR_SINGULAR where cos^2(theta) fails the definiteness policy
 * (the Euler angles' Jacobian loses rank). loads may be NULL (F_i = 0).
 * Replaces a model set by cdyn_rigid_set_model() and the reverse. Returns
 * CDYN_ERR_ARG (unknown preset, f not the preset's, NULL params for a preset
 * that reads them, a zero axis, no carriage callback), CDYN_ERR_NONFINITE
 * (params), CDYN_ERR_BUSY; the previous model stays on error. No allocation.
 */
CDYN_API cdyn_status cdyn_rigid_set_preset(cdyn_rigid *rb, cdyn_rigid_preset preset,
                                           const cdyn_rigid_preset_params *params,
                                           cdyn_rigid_loads_fn loads, void *user);

/**
 * Right-hand side for an integrator: y = [q; q'] (2f) → ydot = [q'; q''].
 * Returns the statuses of cdyn_rigid_accelerations(), CDYN_ERR_ARG (no
 * model set, NULL y or ydot, a motion callback's rotation that is none),
 * CDYN_ERR_NONFINITE (y, or a callback's or
 * the preset's output) and CDYN_ERR_CALLBACK (code in
 * cdyn_rigid_callback_code(); a preset's failed carriage callback gives 1).
 * ydot may be y. No allocation.
 */
CDYN_API cdyn_status cdyn_rigid_rhs(cdyn_rigid *rb, double t, const double *y, double *ydot);

/** Constraint loads F_q (6) of the last successful rhs. CDYN_ERR_ARG if none. */
CDYN_API cdyn_status cdyn_rigid_last_constraint_loads(const cdyn_rigid *rb, double *F_q);

/** Non-zero code of the callback that failed last (0 if none or NULL). */
CDYN_API int cdyn_rigid_callback_code(const cdyn_rigid *rb);

/** Number of degrees of freedom f given at create time (-1 for NULL); y of
 * cdyn_rigid_rhs() has 2f entries. */
CDYN_API int cdyn_rigid_size(const cdyn_rigid *rb);

/** Message of the last failure ("" if none; a static text for NULL). */
CDYN_API const char *cdyn_rigid_last_error(const cdyn_rigid *rb);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_RIGID_H */
