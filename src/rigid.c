/* One rigid body constrained to f <= 6 degrees of freedom: the projected
 * Newton-Euler equations with an offset centre of rotation (THEORY T5.1-T5.3)
 * and the model layer (callbacks → right-hand side). The ready-made motions
 * of T5.4 are in rigid_preset.c. */
#include "cdyn/rigid.h"

#include "internal.h"
#include "linalg.h"
#include "rank.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>


/* Relative tolerance of the inertia's symmetry check. */
#define SYMMETRY_TOL 1e-12

struct cdyn_rigid {
    int f;
    /* the body */
    int has_body;
    double mass;
    double inertia[9]; /* about C, body frame, symmetrized */
    double r_pc[3];    /* P to C, body frame */
    /* the model layer */
    cdyn_rigid_motion_fn motion;
    cdyn_rigid_loads_fn loads;
    void *user;
    int callback_code;
    cdyn__guard guard;
    int has_loads;
    double last_fq[6]; /* F_q of the last successful rhs */
    /* workspace: f <= 6, so everything has a fixed size */
    cdyn_rigid_kinematics kin;
    double F_i[6], qdd[6], F_q[6];
    double Mbar[36], Nbar[6], J[36]; /* 6 x f, leading dimension 6 */
    double A[36], b[6];              /* f x f, leading dimension 6 */
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

cdyn_rigid *cdyn_rigid_create(int f, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    if (f < 1 || f > 6) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_rigid *rb = cdyn__object_alloc(sizeof *rb, offsetof(cdyn_rigid, msg));
    if (!rb) {
        *status = CDYN_ERR_NOMEM;
        return NULL;
    }
    rb->f = f;
    *status = CDYN_OK;
    return rb;
}

void cdyn_rigid_free(cdyn_rigid *rb) { free(rb); }

int cdyn_rigid_size(const cdyn_rigid *rb) { return rb ? rb->f : -1; }

int cdyn_rigid_callback_code(const cdyn_rigid *rb) { return rb ? rb->callback_code : 0; }

const char *cdyn_rigid_last_error(const cdyn_rigid *rb)
{
    return rb ? rb->msg : "cdyn_rigid: NULL object";
}

/* ---- small 3-vector algebra ----------------------------------------- */

static void cross(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* y = A x for a 3 x 3 column-major A. */
static void mat3_vec(const double *A, const double *x, double *y)
{
    for (int i = 0; i < 3; ++i) y[i] = A[i] * x[0] + A[i + 3] * x[1] + A[i + 6] * x[2];
}

static double dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* ---- the body --------------------------------------------------------- */

cdyn_status cdyn_rigid_set_body(cdyn_rigid *rb, double mass, const double *inertia, int ldi,
                                const double *r_pc)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_set_body";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    if (!inertia) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: inertia is NULL", fn);
    if (ldi < 3) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: ldi = %d < 3", fn, ldi);
    if (!isfinite(mass))
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: mass = %g is not finite", fn, mass);
    if (!(mass > 0.0))
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: mass = %g is not > 0", fn, mass);
    long bad = cdyn__first_nonfinite(3, 3, inertia, ldi);
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: inertia(%ld, %ld) is not finite", fn,
                          bad % 3, bad / 3);
    bad = r_pc ? cdyn__first_nonfinite(3, 1, r_pc, 3) : -1;
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: r_pc[%ld] is not finite", fn, bad);
    double scale = 0.0, sym[9];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) scale = fmax(scale, fabs(inertia[i + (size_t)j * ldi]));
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i) {
            double a = inertia[i + (size_t)j * ldi], b = inertia[j + (size_t)i * ldi];
            if (fabs(a - b) > SYMMETRY_TOL * scale)
                return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                                  "%s: inertia is not symmetric (entries (%d, %d) = %g and "
                                  "(%d, %d) = %g)",
                                  fn, i, j, a, j, i, b);
            sym[i + 3 * j] = 0.5 * (a + b);
        }
    double chol[9], scale3[3];
    int info = cdyn__spd_factor(3, sym, 3, chol, 3, scale3);
    if (info != 0)
        return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                          "%s: inertia is not positive definite (leading minor %d)", fn, info);
    rb->mass = mass;
    memcpy(rb->inertia, sym, sizeof sym);
    for (int i = 0; i < 3; ++i) rb->r_pc[i] = r_pc ? r_pc[i] : 0.0;
    rb->has_body = 1;
    return CDYN_OK;
}

/* ---- checks ----------------------------------------------------------- */

/* name is printed after prefix ("" or the callback that produced it). */
static cdyn_status check_vec(cdyn_rigid *rb, const char *fn, const char *prefix,
                             const char *name, int len, const double *x)
{
    long bad = cdyn__first_nonfinite(len, 1, x, len);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s%s[%ld] is not finite", fn, prefix,
                      name, bad);
}

static cdyn_status check_mat(cdyn_rigid *rb, const char *fn, const char *prefix,
                             const char *name, int cols, const double *A)
{
    long bad = cdyn__first_nonfinite(3, cols, A, 3);
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s%s(%ld, %ld) is not finite", fn,
                      prefix, name, bad % 3, bad / 3);
}

/* The fields of k the accelerations use. */
static cdyn_status check_kinematics(cdyn_rigid *rb, const char *fn, const char *prefix,
                                    const cdyn_rigid_kinematics *k)
{
    int f = rb->f;
    cdyn_status st = check_mat(rb, fn, prefix, "k->J_T", f, k->J_T);
    if (!st) st = check_mat(rb, fn, prefix, "k->J_R", f, k->J_R);
    if (!st) st = check_mat(rb, fn, prefix, "k->rotation", 3, k->rotation);
    if (!st) st = check_vec(rb, fn, prefix, "k->L_T", 3, k->L_T);
    if (!st) st = check_vec(rb, fn, prefix, "k->L_R", 3, k->L_R);
    if (!st) st = check_vec(rb, fn, prefix, "k->v0_dot", 3, k->v0_dot);
    if (!st) st = check_vec(rb, fn, prefix, "k->w0", 3, k->w0);
    if (!st) st = check_vec(rb, fn, prefix, "k->w0_dot", 3, k->w0_dot);
    return st;
}

static cdyn_status check_body(cdyn_rigid *rb, const char *fn)
{
    if (rb->has_body) return CDYN_OK;
    return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: no body set; call cdyn_rigid_set_body", fn);
}

/* ---- T5.2, T5.3 --------------------------------------------------------- */

/* q'' into rb->qdd and F_q into rb->F_q; inputs already checked. */
static cdyn_status solve(cdyn_rigid *rb, const char *fn, const cdyn_rigid_kinematics *k,
                         const double *qdot, const double *F_i)
{
    const int f = rb->f;
    const double m = rb->mass, *R = k->rotation;
    double RI[9], Mg[9], r[3], w[3], arot[3], tmp[3], tmp2[3];
    /* M_g = R I R^T (symmetric by construction), r_PC in the lab frame */
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 3; ++i)
            RI[i + 3 * j] = R[i] * rb->inertia[3 * j] + R[i + 3] * rb->inertia[1 + 3 * j] +
                            R[i + 6] * rb->inertia[2 + 3 * j];
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i <= j; ++i) {
            double s = RI[i] * R[j] + RI[i + 3] * R[j + 3] + RI[i + 6] * R[j + 6];
            Mg[i + 3 * j] = s;
            Mg[j + 3 * i] = s;
        }
    mat3_vec(R, rb->r_pc, r);
    /* omega = J_R q' + w0, a_rot = L_R + w0' (the angular acceleration at q'' = 0) */
    for (int i = 0; i < 3; ++i) {
        double s = k->w0[i];
        for (int c = 0; c < f; ++c) s += k->J_R[i + 3 * c] * qdot[c];
        w[i] = s;
        arot[i] = k->L_R[i] + k->w0_dot[i];
    }
    /* J = [J_T - [r]x J_R; J_R], Mbar = [m (J_T - [r]x J_R); M_g J_R] */
    for (int c = 0; c < f; ++c) {
        const double *jt = k->J_T + 3 * c, *jr = k->J_R + 3 * c;
        double *Jc = rb->J + 6 * c, *Mc = rb->Mbar + 6 * c;
        cross(r, jr, tmp);
        for (int i = 0; i < 3; ++i) {
            Jc[i] = jt[i] - tmp[i];
            Jc[3 + i] = jr[i];
            Mc[i] = m * Jc[i];
        }
        mat3_vec(Mg, jr, Mc + 3);
    }
    /* Nbar = [m (L_T + v0' + a_rot x r + w x (w x r)); M_g a_rot + w x (M_g w)] */
    double axr[3], wxr[3], wxwxr[3];
    cross(arot, r, axr);
    cross(w, r, wxr);
    cross(w, wxr, wxwxr);
    for (int i = 0; i < 3; ++i)
        rb->Nbar[i] = m * (k->L_T[i] + k->v0_dot[i] + axr[i] + wxwxr[i]);
    mat3_vec(Mg, arot, rb->Nbar + 3);
    mat3_vec(Mg, w, tmp);
    cross(w, tmp, tmp2);
    for (int i = 0; i < 3; ++i) rb->Nbar[3 + i] += tmp2[i];
    /* A = J^T Mbar = J^T diag(m I, M_g) J (lower triangle), b = J^T (F_i - Nbar) */
    for (int j = 0; j < f; ++j) {
        const double *Jj = rb->J + 6 * j;
        mat3_vec(Mg, Jj + 3, tmp);
        for (int i = j; i < f; ++i) {
            const double *Ji = rb->J + 6 * i;
            rb->A[i + 6 * j] = m * dot3(Ji, Jj) + dot3(Ji + 3, tmp);
        }
        double s = 0.0;
        for (int i = 0; i < 6; ++i) s += Jj[i] * (F_i[i] - rb->Nbar[i]);
        rb->b[j] = s;
    }
    /* the definiteness policy (equilibrated Cholesky, relative pivot test) */
    double scale[6];
    int info = cdyn__spd_factor(f, rb->A, 6, rb->A, 6, scale);
    if (info != 0)
        return cdyn__fail(rb->msg, CDYN_ERR_SINGULAR,
                          "%s: J^T Mbar is not positive definite (leading minor %d): the "
                          "coordinates are singular here (J loses rank, e.g. Euler angles at "
                          "theta = +-pi/2)",
                          fn, info);
    for (int j = 0; j < f; ++j) rb->qdd[j] = scale[j] * rb->b[j];
    cdyn__potrs(f, 1, rb->A, 6, rb->qdd, 6);
    for (int j = 0; j < f; ++j) rb->qdd[j] *= scale[j];
    /* F_q = Mbar q'' + Nbar - F_i */
    for (int i = 0; i < 6; ++i) {
        double s = rb->Nbar[i] - F_i[i];
        for (int c = 0; c < f; ++c) s += rb->Mbar[i + 6 * c] * rb->qdd[c];
        rb->F_q[i] = s;
    }
    long bad = cdyn__first_nonfinite(f, 1, rb->qdd, f);
    if (bad < 0) bad = cdyn__first_nonfinite(6, 1, rb->F_q, 6);
    if (bad >= 0)
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE,
                          "%s: the result overflowed (inputs too large)", fn);
    return CDYN_OK;
}

cdyn_status cdyn_rigid_accelerations(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                     const double *qdot, const double *F_i, double *qdd,
                                     double *F_q)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_accelerations";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    cdyn_status st = check_body(rb, fn);
    if (st) return st;
    if (!k || !qdot || !F_i || !qdd)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !k ? "k" : !qdot ? "qdot" : !F_i ? "F_i" : "qdd");
    st = check_kinematics(rb, fn, "", k);
    if (!st) st = check_vec(rb, fn, "", "qdot", rb->f, qdot);
    if (!st) st = check_vec(rb, fn, "", "F_i", 6, F_i);
    if (!st) st = solve(rb, fn, k, qdot, F_i);
    if (st) return st;
    memcpy(qdd, rb->qdd, sizeof(double) * (size_t)rb->f);
    if (F_q) memcpy(F_q, rb->F_q, sizeof rb->F_q);
    return CDYN_OK;
}

cdyn_status cdyn_rigid_load_about_p(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                    const double *F, double *F_p)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_load_about_p";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    if (!k || !F || !F_p)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !k ? "k" : !F ? "F" : "F_p");
    if (!rb->has_body)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: call cdyn_rigid_set_body first", fn);
    cdyn_status st = check_vec(rb, fn, "", "k->rotation", 9, k->rotation);
    if (!st) st = check_vec(rb, fn, "", "F", 6, F);
    if (st) return st;
    double r[3], m[3];
    mat3_vec(k->rotation, rb->r_pc, r);
    cross(r, F, m);
    double out[6] = {F[0], F[1], F[2], F[3] + m[0], F[4] + m[1], F[5] + m[2]};
    long bad = cdyn__first_nonfinite(6, 1, out, 6);
    if (bad >= 0) /* finite inputs, but the moment overflows */
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: F_p[%ld] overflows", fn, bad);
    memcpy(F_p, out, sizeof out); /* last: F_p may alias F */
    return CDYN_OK;
}

cdyn_status cdyn_rigid_velocities(cdyn_rigid *rb, const cdyn_rigid_kinematics *k,
                                  const double *qdot, double *v_p, double *omega)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_velocities";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    int f = rb->f;
    if (!k || !qdot)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !k ? "k" : "qdot");
    cdyn_status st = check_mat(rb, fn, "", "k->J_T", f, k->J_T);
    if (!st) st = check_mat(rb, fn, "", "k->J_R", f, k->J_R);
    if (!st) st = check_vec(rb, fn, "", "k->v0", 3, k->v0);
    if (!st) st = check_vec(rb, fn, "", "k->w0", 3, k->w0);
    if (!st) st = check_vec(rb, fn, "", "qdot", f, qdot);
    if (st) return st;
    double out[6]; /* v_P, omega */
    for (int i = 0; i < 3; ++i) {
        double v = k->v0[i], w = k->w0[i];
        for (int c = 0; c < f; ++c) {
            v += k->J_T[i + 3 * c] * qdot[c];
            w += k->J_R[i + 3 * c] * qdot[c];
        }
        out[i] = v;
        out[3 + i] = w;
    }
    long bad = cdyn__first_nonfinite(6, 1, out, 6);
    if (bad >= 0) /* finite inputs, but a velocity overflows */
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] overflows", fn,
                          bad < 3 ? "v_p" : "omega", bad % 3);
    if (v_p) memcpy(v_p, out, sizeof(double) * 3); /* last: may alias the inputs */
    if (omega) memcpy(omega, out + 3, sizeof(double) * 3);
    return CDYN_OK;
}

/* ---- model layer ------------------------------------------------------ */

cdyn_status cdyn_rigid_set_model(cdyn_rigid *rb, cdyn_rigid_motion_fn motion,
                                 cdyn_rigid_loads_fn loads, void *user)
{
    if (!rb) return CDYN_ERR_ARG;
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, "cdyn_rigid_set_model");
    if (!motion)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "cdyn_rigid_set_model: motion callback is NULL");
    rb->motion = motion;
    rb->loads = loads;
    rb->user = user;
    return CDYN_OK;
}

static cdyn_status callback_failed(cdyn_rigid *rb, const char *fn, const char *which, int code,
                                   double t)
{
    rb->callback_code = code;
    return cdyn__fail(rb->msg, CDYN_ERR_CALLBACK, "%s: %s callback returned %d at t = %g", fn,
                      which, code, t);
}

cdyn_status cdyn_rigid_rhs(cdyn_rigid *rb, double t, const double *y, double *ydot)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_rhs";
    if (cdyn__guard_busy(&rb->guard)) return cdyn__busy(rb->msg, fn);
    const int f = rb->f;
    if (!rb->motion)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: no model set; call cdyn_rigid_set_model",
                          fn);
    cdyn_status st = check_body(rb, fn);
    if (st) return st;
    if (!y || !ydot)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !y ? "y" : "ydot");
    if (!isfinite(t))
        return cdyn__fail(rb->msg, CDYN_ERR_NONFINITE, "%s: t = %g is not finite", fn, t);
    st = check_vec(rb, fn, "", "y", 2 * f, y);
    if (st) return st;
    const double *q = y, *qdot = y + f;
    memset(&rb->kin, 0, sizeof rb->kin);
    rb->guard.in_callback++;
    int code = rb->motion(t, q, qdot, &rb->kin, rb->user);
    rb->guard.in_callback--;
    if (code != 0) return callback_failed(rb, fn, "motion", code, t);
    st = check_kinematics(rb, fn, "motion callback gave NaN/Inf: ", &rb->kin);
    if (st) return st;
    memset(rb->F_i, 0, sizeof rb->F_i);
    if (rb->loads) {
        rb->guard.in_callback++;
        code = rb->loads(t, q, qdot, &rb->kin, rb->F_i, rb->user);
        rb->guard.in_callback--;
        if (code != 0) return callback_failed(rb, fn, "loads", code, t);
        st = check_vec(rb, fn, "loads callback gave NaN/Inf: ", "F_i", 6, rb->F_i);
        if (st) return st;
    }
    st = solve(rb, fn, &rb->kin, qdot, rb->F_i);
    if (st) return st;
    for (int i = 0; i < f; ++i) ydot[i] = y[f + i]; /* forward: ydot may be y */
    memcpy(ydot + f, rb->qdd, sizeof(double) * (size_t)f);
    memcpy(rb->last_fq, rb->F_q, sizeof rb->F_q);
    rb->has_loads = 1;
    return CDYN_OK;
}

cdyn_status cdyn_rigid_last_constraint_loads(const cdyn_rigid *rb, double *F_q)
{
    if (!rb) return CDYN_ERR_ARG;
    const char *fn = "cdyn_rigid_last_constraint_loads";
    if (!F_q) return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: F_q is NULL", fn);
    if (!rb->has_loads)
        return cdyn__fail(rb->msg, CDYN_ERR_ARG, "%s: no successful cdyn_rigid_rhs yet", fn);
    memcpy(F_q, rb->last_fq, sizeof rb->last_fq);
    return CDYN_OK;
}
