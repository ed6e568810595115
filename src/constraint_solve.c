/* The formulations of cdyn_constraint (THEORY T4.3-T4.8) on the loaded
 * instant: KKT (Lagrange multipliers), reactions, pseudo-inverse, penalty
 * and the exported linear system.
 *
 * Every exact formulation solves the bordered system
 *     [ M  G^T ] [q''] = [Q]       G = Phi_q (multipliers) or C (reactions)
 *     [ Phi_q 0] [ y ]   [s]
 * the same way (docs/theory.md, "Certified solves"):
 *  1. equilibrate it symmetrically (kkt.h), so that the path taken depends
 *     on the conditioning of the problem, not on the caller's units;
 *  2. factor the scaled mass M~ by Cholesky, or M~ + Phi~^T D Phi~ (the
 *     same solution, since Phi q'' = s; it is positive definite whenever
 *     the constrained problem is well posed, even when M is singular or
 *     nearly so): M~ first unless its factor's diagonal already shows it
 *     ill-conditioned, the augmented mass when M~ fails or its result
 *     cannot be certified;
 *  3. eliminate q'' through the whitened rows X = Phi~ L^{-T} and solve for
 *     y by the Cholesky of A = X X^T, a pivoted QR of X^T, an LU of the
 *     reactions' product or the SVD (pseudo-inverse);
 *  4. certify: the componentwise backward error of (q'', y) on the
 *     caller's system must reach a few rounding errors, after up to two
 *     steps of refinement with the same factors; otherwise the status is
 *     not OK. The error of an OK result is then at most about cond(KKT)
 *     times machine epsilon, whatever path produced it. */
#include "constraint_internal.h"
#include "kkt.h"
#include "linalg.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* The equilibrated M is tried directly unless the diagonal of its
 * Cholesky factor shows a condition above MASS_COND_LIMIT (then, or when
 * its result is not certified, the augmented mass). The same for
 * A = X X^T of the multipliers, against SCHUR_COND_LIMIT (forming A
 * squares the condition of X; the alternative is the QR path of X^T).
 * The reactions' product T = X Z^T is factored only when its condition
 * estimate is below SCHUR_COND_LIMIT. All three only steer accuracy: the
 * certificate decides whether a result is OK. */
#define MASS_COND_LIMIT 1e6
#define SCHUR_COND_LIMIT 1e6

/* The default penalty form's constraint masses over the mass each
 * constraint moves (default_penalty): one solve's error is
 * O(1 / PENALTY_STIFFNESS) of the multipliers, which the refinement
 * (penalty_refine) then contracts by about that factor per solve. Stiffer
 * penalties make the right-hand side stiff near a singular pose, where the
 * refinement does not contract: the two-link arm of
 * examples/two_link_singular.c with RK4 at 1 ms runs through its fold at
 * tip speeds up to 1 m/s with 2^20 and 2^21, and broke up at 0.6 or 1 m/s
 * from 2^23 on (unrefined; docs/theory.md T4.8). */
#define PENALTY_STIFFNESS 0x1p20

/* The refinement of the default penalty form (penalty_refine, T4.8): at
 * most PENALTY_SOLVES solves with the one factor, going on while the
 * constraint residuals shrink by PENALTY_CONVERGING or more per step. The
 * contraction in a direction is 1 / (1 + mu), mu an
 * eigenvalue of alpha G (G = Phi_q M^-1 Phi_q^T); the default masses give
 * mu >= 2^20 / m except where a row's effective mass has grown past its
 * history (effective_masses): near a singular pose, where mu << 1 and the
 * direction barely moves. A result whose residual is above
 * PENALTY_ACCURACY of a row's terms is refused (CDYN_ERR_NOCONV) unless
 * the pose is near a singular one: the rank decision finds Phi_q rank
 * deficient or within PENALTY_NEAR_SINGULAR of it (its smallest kept
 * pivot over the largest), or a row's effective mass is
 * 2^PENALTY_HELD or more times its history's. There the penalty's own,
 * bounded answer is the form's purpose. */
#define PENALTY_SOLVES 8
#define PENALTY_CONVERGING 0x1p-10
#define PENALTY_ACCURACY 0x1p-20
#define PENALTY_NEAR_SINGULAR 0x1p-10
#define PENALTY_HELD 4 /* log2 of the growth of a row's effective mass past its history */

/* ---- shared steps ----------------------------------------------------- */

static cdyn_status check_loaded(cdyn_constraint *c, const char *fn)
{
    if (cdyn__constraint_check_idle(c, fn)) return CDYN_ERR_BUSY;
    if (!c->loaded)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: no instant loaded; call cdyn_constraint_load",
                          fn);
    c->reusable = 0; /* every formulation works in the prepared-system workspace */
    return c->gains_pending ? cdyn__constraint_restabilize(c, fn) : CDYN_OK;
}

/* Outputs of a formulation: qdd required, mult when m > 0, not overlapping. */
static cdyn_status check_outputs(cdyn_constraint *c, const char *fn, double *qdd, double *mult,
                                 const char *mult_name)
{
    if (!qdd || (c->m > 0 && !mult))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !qdd ? "qdd" : mult_name);
    if (c->m > 0 && cdyn__overlap(qdd, sizeof(double) * (size_t)c->n, mult,
                                  sizeof(double) * (size_t)c->m))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: qdd and %s overlap", fn, mult_name);
    return CDYN_OK;
}

/* A failure that is not about the rank of Phi_q: the rank facts are
 * cleared so that they never describe another call than the message. */
static cdyn_status cleared(cdyn_constraint *c, cdyn_status status)
{
    cdyn__constraint_clear_facts(c);
    return status;
}

/* Step 1: equilibrate [M Phi^T; Phi 0] on the active rows of Phi_q (and
 * the columns of C^T) and write the lower triangle of the scaled M into
 * c->chol (what the factor of M~ starts from), Phi~ into jac_scaled, C~
 * into coef_scaled (active rows only, gathered). The scaled M is always
 * diag(scale_q) M diag(scale_q) exactly (powers of two), so it is never
 * kept whole: each plan forms what it factors. */
static void scale_system(cdyn_constraint *c, const double *C, int ldc)
{
    int n = c->n, m = c->active, m1 = c->m1;
    const double *sq = c->scale_q, *sg = c->scale_g;
    const int *rows = c->active_rows;
    for (int j = 0; j < n; ++j) /* the active rows of Phi_q, gathered */
        for (int i = 0; i < m; ++i)
            c->jac_scaled[i + (size_t)j * m1] = c->jac[rows[i] + (size_t)j * m1];
    cdyn__kkt_equilibrate(n, m, c->mass, n, c->jac_scaled, m1, c->scale_q, c->scale_g,
                          c->kkt_work);
    for (int j = 0; j < n; ++j) {
        double *chol = c->chol + (size_t)j * n;
        const double *mass = c->mass + (size_t)j * n;
        for (int i = j; i < n; ++i) chol[i] = sq[i] * mass[i] * sq[j];
        for (int i = 0; i < m; ++i) c->jac_scaled[i + (size_t)j * m1] *= sg[i] * sq[j];
    }
    if (!C) return;
    for (int i = 0; i < m; ++i) { /* columns of C^T: rows of C */
        double largest = 0.0;
        for (int j = 0; j < n; ++j)
            largest = fmax(largest, fabs(C[rows[i] + (size_t)j * ldc] * sq[j]));
        c->scale_f[i] = cdyn__inverse_power_of_two(largest);
    }
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
            c->coef_scaled[i + (size_t)j * m1] = c->scale_f[i] * C[rows[i] + (size_t)j * ldc] * sq[j];
}

/* Scale the coordinates once more by s (n powers of two): scale_q, Phi~
 * in jac_scaled, C~ in coef_scaled (when C) and the n x n lower triangle
 * of c->chol (the scaled M, or the augmented matrix). */
static void rescale_coordinates(cdyn_constraint *c, const double *s, int with_c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    for (int j = 0; j < n; ++j) {
        double *chol = c->chol + (size_t)j * n;
        c->scale_q[j] *= s[j];
        for (int i = j; i < n; ++i) chol[i] *= s[i] * s[j];
        for (int i = 0; i < m; ++i) c->jac_scaled[i + (size_t)j * m1] *= s[j];
        for (int i = 0; with_c && i < m; ++i) c->coef_scaled[i + (size_t)j * m1] *= s[j];
    }
}

/* Does the diagonal of the Cholesky factor L (ld ldl) of an SPD matrix
 * already show a condition above limit? It bounds the extreme singular
 * values from inside: (max L_jj / min L_jj)^2 <= cond_2. */
static int diagonal_shows_ill_conditioned(int n, const double *L, int ldl, double limit)
{
    double lo = INFINITY, hi = 0.0;
    for (int j = 0; j < n; ++j) {
        double d = fabs(L[j + (size_t)j * ldl]);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    return !(hi <= lo * sqrt(limit));
}

/* factor_mass()'s answer when the mass it was asked for does not fit:
 * not a status the caller sees (the next plan is tried). */
#define MASS_UNFIT ((cdyn_status)(CDYN_ERR_BUSY + 100))

/* Step 2: the Cholesky factor L of the matrix the multipliers are
 * eliminated through, into c->chol: with augment = 0 the scaled M~, when
 * it is positive definite and the diagonal of its factor does not show it
 * ill-conditioned in the KKT's equilibrated frame (else MASS_UNFIT: the
 * Schur complement through it would not be accurate); with augment = 1
 * M~ + Phi~^T D Phi~, which is then given a unit-free diagonal
 * (cdyn__sym_equilibrate, folded into the coordinate scaling). */
static cdyn_status factor_mass(cdyn_constraint *c, const char *fn, int with_c, int augment)
{
    int n = c->n, m = c->active, m1 = c->m1;
    double *s = c->w; /* n scratch */
    c->augmented = 0;
    if (!augment) { /* c->chol's lower triangle holds M~ (scale_system) */
        int info = cdyn__potrf(n, c->chol, n);
        if (info == 0 && m == 0) return CDYN_OK; /* nothing to choose */
        if (info == 0 && !diagonal_shows_ill_conditioned(n, c->chol, n, MASS_COND_LIMIT))
            return CDYN_OK;
        if (m > 0) return MASS_UNFIT;
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: M is not positive definite (leading minor %d of the "
                                     "equilibrated matrix)",
                                     fn, info));
    }
    /* M~ + Phi~^T D Phi~ onto M~ in c->chol's lower triangle (scale_system),
     * D = 1 / (largest |entry| of each row)^2 as powers of two: every
     * constraint adds about as much to the diagonal as the equilibrated M~
     * has */
    for (int i = 0; i < m; ++i) {
        double largest = 0.0;
        for (int j = 0; j < n; ++j) largest = fmax(largest, fabs(c->jac_scaled[i + (size_t)j * m1]));
        double root = cdyn__inverse_power_of_two(largest); /* sqrt of the weight */
        c->aug_weight[i] = root * root;
        for (int j = 0; j < n; ++j) c->x_rows[i + (size_t)j * m1] = root * c->jac_scaled[i + (size_t)j * m1];
    }
    cdyn__syrk('L', 'T', n, m, 1.0, c->x_rows, m1, 1.0, c->chol, n);
    cdyn__sym_equilibrate(n, c->chol, n, s);
    rescale_coordinates(c, s, with_c);
    int info = cdyn__potrf(n, c->chol, n);
    if (info != 0)
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: M + Phi_q^T D Phi_q (equilibrated) is not positive "
                                     "definite (leading minor %d): M is indefinite, or singular "
                                     "on the motions the constraints allow",
                                     fn, info));
    c->augmented = 1;
    return CDYN_OK;
}

/* out = G~ L^{-T} (m x n, ld m1) for the scaled G~ (ld m1): kept by rows,
 * because the right-side solve passes over L once. */
static void whiten_rows(cdyn_constraint *c, const double *G, double *out)
{
    int n = c->n, m = c->active, m1 = c->m1;
    if (m == 0) return;
    memcpy(out, G, sizeof(double) * (size_t)m1 * n);
    cdyn__trsm('R', 'L', 'T', 'N', m, n, 1.0, c->chol, n, out, m1);
}

/* Intermediate results can overflow for extreme (finite) inputs; LAPACK
 * must never see NaN or Inf (its SVD may not terminate on them). */
static cdyn_status check_overflow(cdyn_constraint *c, const char *fn, const char *what,
                                  int rows, int cols, const double *A, int ld)
{
    if (rows == 0 || cols == 0 || cdyn__first_nonfinite(rows, cols, A, ld) < 0) return CDYN_OK;
    return cleared(c, cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: %s overflowed (inputs too large)",
                                 fn, what));
}

/* Steps 1-2 and the whitened rows X (and Z for the reactions' C). The
 * second equilibration (attempt = 1) first gives the scaled M~ a unit
 * diagonal: the KKT's equilibration balances M~ against Phi~ (right for a
 * nearly massless coordinate that a constraint pins), the diagonal
 * scaling balances M~ in itself (right when M is ill-conditioned in
 * directions the constraints do not touch); each fails where the other
 * succeeds. augment: factor_mass()'s choice (MASS_UNFIT passes through). */
static cdyn_status prepare(cdyn_constraint *c, const char *fn, const double *C, int ldc,
                           int attempt, int augment)
{
    int n = c->n, m = c->active;
    scale_system(c, C, ldc);
    if (attempt == 1) { /* a unit diagonal for M~ (in c->chol) */
        cdyn__sym_equilibrate(n, c->chol, n, c->w);
        rescale_coordinates(c, c->w, C != NULL);
    }
    cdyn_status st = factor_mass(c, fn, C != NULL, augment);
    if (st) return st;
    whiten_rows(c, c->jac_scaled, c->x_rows);
    st = check_overflow(c, fn, "L^-1 Phi_q^T", m, n, c->x_rows, c->m1);
    if (!st && C) {
        whiten_rows(c, c->coef_scaled, c->z_rows);
        st = check_overflow(c, fn, "L^-1 C^T", m, n, c->z_rows, c->m1);
    }
    return st;
}

/* ---- step 3: the multipliers -------------------------------------------- */

/* Lagrange, the multipliers through the pivoted QR of X^T (n x m, into
 * c->qr), never forming A = X X^T. */
static void lagrange_qr_path(cdyn_constraint *c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    c->path = CDYN__PATH_QR;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c->qr[j + (size_t)i * n] = c->x_rows[i + (size_t)j * m1];
    memset(c->jpvt, 0, sizeof(int) * (size_t)m);
    cdyn__geqp3(n, m, c->qr, n, c->jpvt, c->tau, c->work, c->lwork);
}

/* Lagrange: Cholesky of A = X X^T unless it fails or the diagonal of its
 * factor shows A ill-conditioned, else the QR path. */
static void choose_lagrange_path(cdyn_constraint *c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    c->path = CDYN__PATH_SCHUR;
    if (m == 0) return;
    cdyn__syrk('L', 'N', m, n, 1.0, c->x_rows, m1, 0.0, c->small, m1);
    if (cdyn__potrf(m, c->small, m1) == 0 &&
        !diagonal_shows_ill_conditioned(m, c->small, m1, SCHUR_COND_LIMIT))
        return;
    lagrange_qr_path(c);
}

/* Reactions: LU of T = X Z^T (m x m) when well conditioned (1), else 0. */
static int prepare_product(cdyn_constraint *c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    c->path = CDYN__PATH_PRODUCT;
    if (m == 0) return 1;
    cdyn__gemm('N', 'T', m, m, n, 1.0, c->x_rows, m1, c->z_rows, m1, 0.0, c->small, m1);
    double anorm = cdyn__norm1(m, m, c->small, m1), rcond = 0.0;
    if (!(anorm < INFINITY) || cdyn__getrf(m, c->small, m1, c->ipiv) != 0) return 0;
    cdyn__gecon(m, c->small, m1, anorm, &rcond, c->work, c->iwork);
    return rcond * SCHUR_COND_LIMIT >= 1.0;
}

/* Reactions without a product whose condition is squared: with X^T =
 * Q_Y R P^T (pivoted QR, into c->qr) the matrix is P R^T T',
 * T' = the first m rows of Q_Y^T Z^T (LU into c->small). 0 when T' is
 * numerically singular. */
static int prepare_reactions_qr(cdyn_constraint *c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    c->path = CDYN__PATH_REACTIONS;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c->qr[j + (size_t)i * n] = c->x_rows[i + (size_t)j * m1];
    memset(c->jpvt, 0, sizeof(int) * (size_t)m1);
    cdyn__geqp3(n, m, c->qr, n, c->jpvt, c->tau, c->work, c->lwork);
    memcpy(c->coef_scaled, c->z_rows, sizeof(double) * (size_t)m1 * n); /* scratch: Z Q_Y */
    cdyn__ormqr('R', 'N', m, n, m, c->qr, n, c->tau, c->coef_scaled, m1, c->work, c->lwork);
    for (int j = 0; j < m; ++j) /* T'(i, j) = (Z Q_Y)(j, i) */
        for (int i = 0; i < m; ++i) c->small[i + (size_t)j * m1] = c->coef_scaled[j + (size_t)i * m1];
    double anorm = cdyn__norm1(m, m, c->small, m1), rcond = 0.0;
    if (cdyn__getrf(m, c->small, m1, c->ipiv) != 0) return 0;
    cdyn__gecon(m, c->small, m1, anorm, &rcond, c->work, c->iwork);
    return rcond >= DBL_EPSILON * m1;
}

/* After prepare_reactions_qr() failed: is X itself (R of its pivoted QR,
 * in c->qr) singular to working accuracy, by the same test as T'? Then the
 * constrained system is, whatever C is (Phi_q M^-1 Phi_q^T = X X^T), and
 * the failure says nothing about C. Uses c->small, ipiv, work, iwork. */
static int whitened_rows_singular(cdyn_constraint *c)
{
    int n = c->n, m = c->active, m1 = c->m1;
    for (int j = 0; j < m; ++j) /* R is its own LU (no row exchanges) */
        for (int i = 0; i < m; ++i)
            c->small[i + (size_t)j * m1] = i <= j ? c->qr[i + (size_t)j * n] : 0.0;
    double anorm = cdyn__norm1(m, m, c->small, m1), rcond = 0.0;
    if (cdyn__getrf(m, c->small, m1, c->ipiv) != 0) return 1;
    cdyn__gecon(m, c->small, m1, anorm, &rcond, c->work, c->iwork);
    return !(rcond >= DBL_EPSILON * m1);
}

/* y = (prepared operator)^{-1} r in place (r, m entries), by the path. */
static void solve_multipliers(cdyn_constraint *c, double *r)
{
    int n = c->n, m = c->active, m1 = c->m1;
    double *t = c->vec_m;
    if (m == 0) return;
    switch (c->path) {
    case CDYN__PATH_SCHUR: cdyn__potrs(m, 1, c->small, m1, r, m1); break;
    case CDYN__PATH_QR: /* X^T P = Q R: A = P R^T R P^T */
        for (int i = 0; i < m; ++i) t[i] = r[c->jpvt[i] - 1];
        cdyn__trsm('L', 'U', 'T', 'N', m, 1, 1.0, c->qr, n, t, m1);
        cdyn__trsm('L', 'U', 'N', 'N', m, 1, 1.0, c->qr, n, t, m1);
        for (int i = 0; i < m; ++i) r[c->jpvt[i] - 1] = t[i];
        break;
    case CDYN__PATH_PRODUCT: cdyn__getrs('N', m, 1, c->small, m1, c->ipiv, r, m1); break;
    case CDYN__PATH_REACTIONS: /* P R^T T' f = r */
        for (int i = 0; i < m; ++i) t[i] = r[c->jpvt[i] - 1];
        cdyn__trsm('L', 'U', 'T', 'N', m, 1, 1.0, c->qr, n, t, m1);
        memcpy(r, t, sizeof(double) * (size_t)m);
        cdyn__getrs('N', m, 1, c->small, m1, c->ipiv, r, m1);
        break;
    case CDYN__PATH_DECIDED: break; /* solves by itself (constraint_decided.c) */
    }
}

/* The prepared system for scaled right-hand sides top (n) and bottom (m)
 * into c->q_scaled and c->mult_scaled: w = L^{-1} top, y solves the
 * multiplier system for X w - bottom, q'' = L^{-T} (w - Zf^T y). */
static void solve_prepared(cdyn_constraint *c, const double *top, const double *bottom)
{
    int n = c->n, m = c->active, m1 = c->m1;
    const double *zf = c->path == CDYN__PATH_PRODUCT || c->path == CDYN__PATH_REACTIONS
                           ? c->z_rows
                           : c->x_rows;
    double *w = c->w, *y = c->mult_scaled;
    memcpy(w, top, sizeof(double) * (size_t)n);
    if (c->augmented) { /* the augmented top row: Q~ + Phi~^T D s~ */
        for (int i = 0; i < m; ++i) c->vec_m[i] = c->aug_weight[i] * bottom[i];
        cdyn__gemv('T', m, n, 1.0, c->jac_scaled, m1, c->vec_m, 1.0, w);
    }
    cdyn__trsm('L', 'L', 'N', 'N', n, 1, 1.0, c->chol, n, w, n);
    memcpy(y, bottom, sizeof(double) * (size_t)m);
    cdyn__gemv('N', m, n, 1.0, c->x_rows, m1, w, -1.0, y);
    solve_multipliers(c, y);
    memcpy(c->q_scaled, w, sizeof(double) * (size_t)n);
    cdyn__gemv('T', m, n, -1.0, zf, m1, y, 1.0, c->q_scaled);
    cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, c->chol, n, c->q_scaled, n);
}

/* ---- step 4: certify ------------------------------------------------------ */

/* Solve with the prepared factors for the right-hand sides f (n) and s
 * (m, all rows; the active ones are used), refined up to two steps on the
 * caller's system [M G^T; Phi_q 0] (G = C, or Phi_q when C is NULL); rows
 * with skip[i] set are left out of the certificate (redundant rows of the
 * pseudo-inverse). The result is in c->q_result and c->mult_result; returns
 * its componentwise backward error. */
static double solve_refined(cdyn_constraint *c, const double *C, int ldc, const int *skip,
                            const double *f, const double *s)
{
    int n = c->n, m = c->m, ma = c->active;
    const int *rows = c->active_rows;
    const double *G = C ? C : c->jac, *sy = C ? c->scale_f : c->scale_g;
    int ldg = C ? ldc : c->m1;
    for (int j = 0; j < n; ++j) c->top[j] = c->scale_q[j] * f[j];
    for (int a = 0; a < ma; ++a) c->bottom[a] = c->scale_g[a] * s[rows[a]];
    solve_prepared(c, c->top, c->bottom);
    for (int j = 0; j < n; ++j) c->q_result[j] = c->scale_q[j] * c->q_scaled[j];
    for (int i = 0; i < m; ++i) { /* inactive rows carry none, and need no floor */
        c->mult_result[i] = 0.0;
        c->mult_unit[i] = DBL_MIN;
    }
    for (int a = 0; a < ma; ++a) {
        c->mult_result[rows[a]] = sy[a] * c->mult_scaled[a];
        c->mult_unit[rows[a]] = sy[a];
    }
    /* the unknowns' units of the equilibrated frame (kkt.h's floor) */
    const double *ux = c->scale_q, *uy = c->mult_unit;
    double tolerance = cdyn__kkt_backward_tolerance(n, m);
    double omega = cdyn__kkt_backward_error(n, m, c->mass, n, G, ldg, 1.0, c->jac, c->m1,
                                            c->q_result, c->mult_result, f, s, ux, uy, skip,
                                            c->residual_top, c->residual_bottom, c->kkt_work);
    for (int step = 0; step < 2 && omega > tolerance && isfinite(omega); ++step) {
        for (int j = 0; j < n; ++j) c->top[j] = c->scale_q[j] * c->residual_top[j];
        for (int a = 0; a < ma; ++a) c->bottom[a] = c->scale_g[a] * c->residual_bottom[rows[a]];
        solve_prepared(c, c->top, c->bottom);
        for (int j = 0; j < n; ++j) c->q_result[j] += c->scale_q[j] * c->q_scaled[j];
        for (int a = 0; a < ma; ++a) c->mult_result[rows[a]] += sy[a] * c->mult_scaled[a];
        omega = cdyn__kkt_backward_error(n, m, c->mass, n, G, ldg, 1.0, c->jac, c->m1,
                                         c->q_result, c->mult_result, f, s, ux, uy, skip,
                                         c->residual_top, c->residual_bottom, c->kkt_work);
    }
    return omega;
}

/* Is a non-finite result overflow, i.e. does the certified solution lie
 * beyond the double range? Only if the same factors solve the right-hand
 * sides scaled down to a largest entry of about 1 (a power of two, so the
 * same system) and that result is certified. A factor with a zero or
 * rounding-sized pivot (the system singular to working accuracy, however
 * moderate the inputs) gives NaN or an uncertified result for any scale.
 * Uses delta_q (n) and delta_mult (m), free on this path. */
static int result_overflowed(cdyn_constraint *c, const double *C, int ldc, const int *skip)
{
    int n = c->n, m = c->m;
    double largest = 0.0, *f = c->delta_q, *s = c->delta_mult;
    for (int j = 0; j < n; ++j) largest = fmax(largest, fabs(c->force[j]));
    for (int i = 0; i < m; ++i) largest = fmax(largest, fabs(c->accel_rhs[i]));
    double down = cdyn__inverse_power_of_two(largest);
    for (int j = 0; j < n; ++j) f[j] = down * c->force[j];
    for (int i = 0; i < m; ++i) s[i] = down * c->accel_rhs[i];
    double omega = solve_refined(c, C, ldc, skip, f, s);
    return omega <= cdyn__kkt_backward_tolerance(n, m);
}

/* The loaded instant's solve with the prepared factors, certified (see
 * solve_refined). A non-finite result is CDYN_ERR_NONFINITE only when it
 * is overflow (result_overflowed); otherwise the system is singular to
 * working accuracy (stop 46: moderate Phi_q entries whose KKT system has a
 * Skeel condition of 1e44 were reported as "inputs too large"). */
static cdyn_status solve_certified(cdyn_constraint *c, const char *fn, const double *C, int ldc,
                                   const int *skip)
{
    int n = c->n, m = c->m;
    double omega = solve_refined(c, C, ldc, skip, c->force, c->accel_rhs);
    double tolerance = cdyn__kkt_backward_tolerance(n, m);
    const char *what = cdyn__first_nonfinite(n, 1, c->q_result, n) >= 0 ? "q''"
                       : m > 0 && cdyn__first_nonfinite(m, 1, c->mult_result, c->m1) >= 0
                           ? "the multipliers"
                           : NULL;
    if (what && result_overflowed(c, C, ldc, skip))
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_NONFINITE,
                                     "%s: %s overflowed (inputs too large)", fn, what));
    if (what)
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: the constrained system is singular to working accuracy "
                                     "(its factors give no finite solution even for right-hand "
                                     "sides of size 1)",
                                     fn));
    if (!(omega <= tolerance))
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: the constrained system is singular to working accuracy "
                                     "(componentwise backward error %.2e > %.2e after "
                                     "refinement)",
                                     fn, omega, tolerance));
    return CDYN_OK;
}

/* Copy the result out and keep it for cdyn_constraint_force(): q'' into
 * qdd, the multipliers into mult_out (may be NULL), the generalized force
 * G^T mult. Outputs are written last. */
static cdyn_status commit(cdyn_constraint *c, const char *fn, const double *G, int ldg,
                          double *qdd, double *mult_out)
{
    int n = c->n, m = c->m;
    /* in workspace first: a failure keeps the last success's force */
    cdyn__gemv('T', m, n, 1.0, G, ldg, c->mult_result, 0.0, c->w);
    cdyn_status st = check_overflow(c, fn, "the constraint force", n, 1, c->w, n);
    if (st) return st;
    memcpy(c->gen_force, c->w, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(c->multipliers, c->mult_result, sizeof(double) * (size_t)m);
    memcpy(qdd, c->q_result, sizeof(double) * (size_t)n);
    if (mult_out && m > 0) memcpy(mult_out, c->mult_result, sizeof(double) * (size_t)m);
    c->has_result = 1;
    c->margin = c->decision.ratio;
    return CDYN_OK;
}

/* The rank of Phi_q for the loaded instant, or the LAPACK failure. */
static cdyn_status decide(cdyn_constraint *c, const char *fn, int *rank)
{
    *rank = cdyn__constraint_decide_rank(c);
    if (*rank >= 0) return CDYN_OK;
    return cleared(c, cdyn__fail(c->msg, CDYN_ERR_LAPACK, "%s: dgeqp3 failed on Phi_q", fn));
}

/* The rows the prepared system keeps: all of them, or (count < m) the
 * first `count` rows the rank decision ranked independent, ascending. */
static void activate_rows(cdyn_constraint *c, int count)
{
    int m = c->m;
    c->active = count;
    if (count == m) {
        for (int i = 0; i < m; ++i) c->active_rows[i] = i;
        return;
    }
    int k = 0;
    for (int i = 0; i < m; ++i)
        if (!c->redundant_flag[i]) c->active_rows[k++] = i;
}

/* Steps 1-4 on the active rows: the two equilibrations of prepare() in
 * turn, each with M~ and then the augmented mass; the first whose result
 * is certified wins (C is the reactions' coefficient matrix, NULL for
 * multipliers). A well-posed system with a well-conditioned M~ takes the
 * first plan, without a condition estimate of M~: its certificate is the
 * test that the plan was accurate. */
static cdyn_status solve_bordered(cdyn_constraint *c, const char *fn, const double *C, int ldc,
                                  const int *skip)
{
    cdyn_status st = CDYN_ERR_SINGULAR;
    for (int plan = 0; plan < 4; ++plan) {
        if (plan % 2 && c->active == 0) continue; /* M~ is all there is */
        st = prepare(c, fn, C, ldc, plan / 2, plan % 2);
        if (st == MASS_UNFIT) continue;
        if (st == CDYN_OK && !C) choose_lagrange_path(c);
        if (st == CDYN_OK && C && !prepare_product(c) && !prepare_reactions_qr(c))
            st = whitened_rows_singular(c)
                     ? cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                             "%s: the constrained system is singular to working "
                                             "accuracy (Phi_q M^-1 Phi_q^T is, although Phi_q "
                                             "has full rank %d by the rank policy)",
                                             fn, c->active))
                     : cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                             "%s: Phi_q M^-1 C^T is singular to working accuracy "
                                             "(Phi_q has full rank %d; C does not act on the "
                                             "constrained motions)",
                                             fn, c->active));
        if (st == CDYN_OK) st = solve_certified(c, fn, C, ldc, skip);
        if (st == CDYN_ERR_SINGULAR && c->path == CDYN__PATH_SCHUR && c->active > 0) {
            lagrange_qr_path(c); /* A's Cholesky path was not accurate enough */
            st = solve_certified(c, fn, C, ldc, skip);
        }
        if (st != CDYN_ERR_SINGULAR && st != CDYN_ERR_NONFINITE) return st;
    }
    return st;
}

/* ---- formulations ----------------------------------------------------- */

cdyn_status cdyn_constraint_lagrange(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_lagrange";
    int rank = 0;
    cdyn_status st = check_loaded(c, fn);
    if (!st) st = check_outputs(c, fn, qdd, lambda, "lambda");
    if (!st) st = decide(c, fn, &rank);
    if (st) return st;
    /* T4.4: the rank is decided on Phi_q itself (time-free, M plays no part) */
    if (rank < c->m) return cdyn__constraint_report_rank_loss(c, fn, CDYN_ERR_SINGULAR);
    if (!cdyn__constraint_lagrange_decided(c)) { /* else the general path */
        activate_rows(c, c->m);
        st = solve_bordered(c, fn, NULL, 0, NULL);
        if (st) return st;
    }
    st = commit(c, fn, c->jac, c->m1, qdd, lambda);
    c->reusable = st == CDYN_OK ? REUSE_BORDERED : 0;
    return st;
}

cdyn_status cdyn_constraint_reactions(cdyn_constraint *c, const double *C, int ldc, double *qdd,
                                      double *f)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_reactions";
    int n = c->n, m = c->m, rank = 0;
    cdyn_status st = check_loaded(c, fn);
    if (!st && m > 0 && !C) st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: C is NULL", fn);
    if (!st) st = check_outputs(c, fn, qdd, f, "f");
    if (!st && ldc < c->m1)
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldc = %d < max(1, m = %d)", fn, ldc, m);
    if (!st && m > 0 && cdyn__first_nonfinite(m, n, C, ldc) >= 0)
        st = cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: C has NaN or Inf", fn);
    if (!st) st = decide(c, fn, &rank);
    if (st) return st;
    /* T4.3: (Phi_q M^{-1} C^T) f = Phi_q M^{-1} Q - s */
    if (rank < m) return cdyn__constraint_report_rank_loss(c, fn, CDYN_ERR_SINGULAR);
    if (m == 0) C = c->jac, ldc = c->m1;
    activate_rows(c, m);
    st = solve_bordered(c, fn, C, ldc, NULL);
    if (st) return st;
    return commit(c, fn, C, ldc, qdd, f);
}

/* The row weights of the minimum-norm choice (T4.7) into w (m): the
 * Euclidean norm of each row of Phi_q with every column divided by its
 * largest entry in the row-normalized |Phi_q| (exact quotients, no powers
 * of two), 1 for a row of zeros. A row rescaled by any c gets c w_i and
 * the other rows keep theirs, to rounding: the columns' divisors do not
 * depend on the rows' units. Uses c->delta_q (n) for the divisors. */
static void row_weights(cdyn_constraint *c, double *w)
{
    int n = c->n, m = c->m, m1 = c->m1;
    double *divisor = c->delta_q;
    for (int i = 0; i < m; ++i) { /* w_i = largest |entry| of row i, for now */
        w[i] = 0.0;
        for (int j = 0; j < n; ++j) w[i] = fmax(w[i], fabs(c->jac[i + (size_t)j * m1]));
    }
    for (int j = 0; j < n; ++j) {
        divisor[j] = 0.0;
        for (int i = 0; i < m; ++i)
            if (w[i] > 0.0)
                divisor[j] = fmax(divisor[j], fabs(c->jac[i + (size_t)j * m1]) / w[i]);
    }
    for (int i = 0; i < m; ++i) {
        double sum = 0.0; /* of terms <= 1: no overflow */
        for (int j = 0; j < n && w[i] > 0.0; ++j) {
            double a = fabs(c->jac[i + (size_t)j * m1]);
            double t = divisor[j] > 0.0 ? a / w[i] / divisor[j] : 0.0;
            sum += t * t;
        }
        w[i] = w[i] > 0.0 ? w[i] * sqrt(sum) : 1.0;
    }
}

/* lambda <- the minimum-norm choice among the multipliers with the same
 * Phi_q^T lambda, measured in the frame where every row of Phi_q has
 * weight 1: lambda = W^-1 mu with |mu| minimal, W the row weights
 * (row_weights). The null space of Phi_q^T comes from the decision's
 * pivoted QR B^T P = Q [R11 R12; 0 ~0] of B = D_r Phi_q D_c: the columns
 * of P [-R11^{-1} R12; I] span that of B^T, D_r times them that of
 * Phi_q^T, and W D_r times them that of (W^-1 Phi_q)^T, orthonormalized by
 * a QR (in c->qr). Before stop 46 the weights were the decision's D_r^-1,
 * powers of two: a row written in units 3 times larger took a share 28 %
 * off (constraint.h promises none). */
static void minimum_norm_multipliers(cdyn_constraint *c, int rank)
{
    int n = c->n, m = c->m, nulls = m - rank;
    if (nulls <= 0) return;
    const cdyn__rank_ws *w = &c->ws;
    double *basis = c->qr, *mu = c->vec_m, *t = c->r, *weight = c->delta_mult;
    row_weights(c, weight);
    for (int k = 0; k < nulls; ++k) {
        double *v = basis + (size_t)k * m;
        memset(v, 0, sizeof(double) * (size_t)m);
        for (int i = 0; i < rank; ++i) t[i] = w->qr[i + (size_t)(rank + k) * n];
        cdyn__trsm('L', 'U', 'N', 'N', rank, 1, 1.0, w->qr, n, t, c->m1);
        for (int i = 0; i < rank; ++i) v[w->jpvt[i]] = -t[i];
        v[w->jpvt[rank + k]] = 1.0;
        for (int i = 0; i < m; ++i) v[i] *= weight[i] * w->row_scale[i];
    }
    memset(c->jpvt, 0, sizeof(int) * (size_t)nulls);
    cdyn__geqp3(m, nulls, basis, m, c->jpvt, c->tau, c->work, c->lwork);
    /* mu = W lambda; mu -= Q1 Q1^T mu; lambda = W^-1 mu */
    for (int i = 0; i < m; ++i) mu[i] = weight[i] * c->mult_result[i];
    memcpy(t, mu, sizeof(double) * (size_t)m);
    cdyn__ormqr('L', 'T', m, 1, nulls, basis, m, c->tau, t, m, c->work, c->lwork);
    memset(t + nulls, 0, sizeof(double) * (size_t)(m - nulls));
    cdyn__ormqr('L', 'N', m, 1, nulls, basis, m, c->tau, t, m, c->work, c->lwork);
    for (int i = 0; i < m; ++i) c->mult_result[i] = (mu[i] - t[i]) / weight[i];
}

cdyn_status cdyn_constraint_pseudoinverse(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_pseudoinverse";
    int rank = 0;
    cdyn_status st = check_loaded(c, fn);
    if (!st) st = check_outputs(c, fn, qdd, lambda, "lambda");
    if (!st) st = decide(c, fn, &rank);
    if (st) return st;
    /* T4.7: q'' is that of the independent rows alone (the rank decided on
     * Phi_q), solved and certified as for lagrange; the redundant rows
     * carry no multiplier until the minimum-norm choice spreads it over
     * them (a redundant row whose s is inconsistent is not met: no q''
     * could meet every row) */
    activate_rows(c, rank);
    st = solve_bordered(c, fn, NULL, 0, c->redundant_flag);
    if (st) return st;
    minimum_norm_multipliers(c, rank);
    st = commit(c, fn, c->jac, c->m1, qdd, lambda);
    c->reusable = st == CDYN_OK && rank == c->m ? REUSE_BORDERED : 0; /* the whole system */
    if (!st && rank < c->m) cdyn__constraint_report_rank_loss(c, fn, CDYN_OK);
    return st;
}

/* The penalty form's K q = b for the right-hand sides f (n) and s (m):
 * b = f + Phi_q^T alpha s, solved with K (c->qr) and its factor (c->chol,
 * scale c->scale_q) and refined on K (up to three solves); q into
 * c->q_result, lambda = alpha (Phi_q q - s) into c->mult_result. Returns
 * the componentwise backward error on K (kkt.h with no constraint rows). */
static double penalty_solve(cdyn_constraint *c, const double *f, const double *s)
{
    int n = c->n, m = c->m, m1 = c->m1;
    double *b = c->top, *q = c->q_result, *res = c->residual_top;
    double tolerance = cdyn__kkt_backward_tolerance(n, 0), omega = INFINITY;
    for (int i = 0; i < m; ++i) c->vec_m[i] = c->alpha[i] * s[i];
    memcpy(b, f, sizeof(double) * (size_t)n);
    cdyn__gemv('T', m, n, 1.0, c->jac, m1, c->vec_m, 1.0, b);
    memset(q, 0, sizeof(double) * (size_t)n);
    memcpy(res, b, sizeof(double) * (size_t)n);
    for (int step = 0; step < 3 && omega > tolerance; ++step) {
        for (int j = 0; j < n; ++j) c->w[j] = c->scale_q[j] * res[j];
        cdyn__potrs(n, 1, c->chol, n, c->w, n);
        for (int j = 0; j < n; ++j) q[j] += c->scale_q[j] * c->w[j];
        omega = cdyn__kkt_backward_error(n, 0, c->qr, n, NULL, 1, 1.0, NULL, 1, q, NULL, b, NULL,
                                         c->scale_q, NULL, NULL, res, NULL, c->kkt_work);
        if (!isfinite(omega)) break;
    }
    /* lambda ~ alpha (Phi_q q'' - s) */
    memcpy(c->mult_result, s, sizeof(double) * (size_t)m);
    cdyn__gemv('N', m, n, 1.0, c->jac, m1, q, -1.0, c->mult_result);
    for (int i = 0; i < m; ++i) c->mult_result[i] *= c->alpha[i];
    return omega;
}

/* One step of the refinement (penalty_refine): the correction of the
 * penalty form's bordered matrix [M Phi_q^T; Phi_q -alpha^-1] for the
 * residuals r1 (n) and r2 (m) of the exact one, K dq = r1 + Phi_q^T alpha r2
 * and dl = alpha (Phi_q dq - r2), by one solve with K's factor (the
 * refinement corrects its rounding). Uses c->w, c->vec_m. */
static void penalty_correction(cdyn_constraint *c, const double *r1, const double *r2, double *dq,
                               double *dl)
{
    int n = c->n, m = c->m, m1 = c->m1;
    const double *alpha = c->alpha;
    for (int i = 0; i < m; ++i) c->vec_m[i] = alpha[i] * r2[i];
    for (int j = 0; j < n; ++j) { /* w = D (r1 + Phi_q^T alpha r2) */
        const double *pj = c->jac + (size_t)j * m1;
        double b = r1[j];
        for (int i = 0; i < m; ++i) b += pj[i] * c->vec_m[i];
        c->w[j] = c->scale_q[j] * b;
    }
    cdyn__potrs(n, 1, c->chol, n, c->w, n);
    for (int i = 0; i < m; ++i) dl[i] = -r2[i];
    for (int j = 0; j < n; ++j) {
        const double *pj = c->jac + (size_t)j * m1;
        double x = dq[j] = c->scale_q[j] * c->w[j];
        for (int i = 0; i < m; ++i) dl[i] += pj[i] * x;
    }
    for (int i = 0; i < m; ++i) dl[i] *= alpha[i];
}

/* The residuals of (q, lambda) = (c->q_result, c->mult_result) in the
 * exact bordered system, r1 = f - M q - Phi_q^T lambda (c->residual_top;
 * M symmetric) and r2 = s - Phi_q q (c->residual_bottom), and each row's
 * terms sum_j |Phi_ij q_j| + |s_i| (c->bottom), in one pass over the
 * columns of M and Phi_q. Returns the largest |r2_i| over its terms
 * (unit-free: the componentwise backward error of row i; Inf for a
 * residual without terms). */
static double penalty_residuals(cdyn_constraint *c, const double *f, const double *s)
{
    int n = c->n, m = c->m, m1 = c->m1;
    const double *q = c->q_result, *l = c->mult_result;
    double *r1 = c->residual_top, *r2 = c->residual_bottom, *terms = c->bottom, worst = 0.0;
    for (int i = 0; i < m; ++i) {
        r2[i] = s[i];
        terms[i] = fabs(s[i]);
    }
    for (int j = 0; j < n; ++j) {
        const double *mj = c->mass + (size_t)j * n, *pj = c->jac + (size_t)j * m1;
        double qj = q[j], top = f[j];
        for (int i = 0; i < n; ++i) top -= mj[i] * q[i];
        for (int i = 0; i < m; ++i) {
            double t = pj[i] * qj;
            top -= pj[i] * l[i];
            r2[i] -= t;
            terms[i] += fabs(t);
        }
        r1[j] = top;
    }
    for (int i = 0; i < m; ++i) {
        double v = r2[i] == 0.0 ? 0.0 : fabs(r2[i]) / terms[i];
        if (!(v <= worst)) worst = v;
    }
    return worst;
}

/* The largest |r2_i| over the fixed scales scale_i (unit-free; a row
 * without one takes its present terms). */
static double penalty_size(const cdyn_constraint *c, const double *scale)
{
    double size = 0.0;
    for (int i = 0; i < c->m; ++i) {
        double r = fabs(c->residual_bottom[i]), u = scale[i] > 0.0 ? scale[i] : c->bottom[i];
        double e = r == 0.0 ? 0.0 : r / u;
        if (!(e <= size)) size = e;
    }
    return size;
}

/* The default penalty form refined towards the exact constrained solution
 * (docs/theory.md T4.8), from the penalty solve in c->q_result and
 * c->mult_result: the residuals of the exact bordered system are
 * corrected through the penalty form's own matrix (penalty_correction),
 * the augmented Lagrangian update lambda += alpha (Phi_q q - s) written
 * as iterative refinement. One penalty solve leaves the multipliers off
 * by 1 / (1 + mu) in a direction where alpha G has the eigenvalue mu
 * (G = Phi_q M^-1 Phi_q^T; mu >= 2^20 / m with the default masses away
 * from singular poses), but the accelerations of a light coordinate tied
 * to a heavy one, (Q - Phi_q^T lambda) / m_light, are a cancellation that
 * multiplies that error by the mass ratio (2^-20 1e12 for 1e6 kg beside
 * 1e-6 kg: found by review). Each step contracts the error by 1 / (1 + mu)
 * again, down to a rounding floor of about eps times that ratio. Steps go
 * on while a row is above the certificate's tolerance (kkt.h) and the
 * residuals, each row over its terms at the penalty solve (a scale that
 * does not move with the iterates), shrink by PENALTY_CONVERGING, up to
 * PENALTY_SOLVES solves. When the first step does not shrink them so, a
 * direction has mu < 2^10: a pose near a singular one, whose penalty
 * answer is kept (the step undone), since each further step would stiffen
 * that direction as a larger alpha would (the two-link arm of
 * examples/two_link_singular.c broke up at 0.84 to 0.97 m/s with them).
 * With may_undo 0 (the Jacobian's solves, cdyn__constraint_solve_again,
 * for a right-hand side that was refined) the step is kept. Sets
 * c->penalty_refined to whether the result is refined. Returns the
 * largest row residual over its terms (penalty_residuals) of the result.
 * Uses c->residual_top, c->residual_bottom, c->bottom, c->r,
 * c->delta_q, c->delta_mult, c->q_scaled, c->mult_scaled, c->w, c->vec_m. */
static double penalty_refine(cdyn_constraint *c, const double *f, const double *s, int may_undo)
{
    int n = c->n, m = c->m;
    double *q = c->q_result, *l = c->mult_result, *scale = c->r;
    double tolerance = cdyn__kkt_backward_tolerance(n, m);
    double worst = penalty_residuals(c, f, s), penalty_worst = worst;
    c->penalty_refined = 1;
    memcpy(scale, c->bottom, sizeof(double) * (size_t)m);
    memcpy(c->q_scaled, q, sizeof(double) * (size_t)n); /* the penalty's own answer */
    memcpy(c->mult_scaled, l, sizeof(double) * (size_t)m);
    double size = penalty_size(c, scale);
    for (int solves = 1; solves < PENALTY_SOLVES && !(worst <= tolerance); ++solves) {
        penalty_correction(c, c->residual_top, c->residual_bottom, c->delta_q, c->delta_mult);
        for (int j = 0; j < n; ++j) q[j] += c->delta_q[j];
        for (int i = 0; i < m; ++i) l[i] += c->delta_mult[i];
        worst = penalty_residuals(c, f, s);
        double next = penalty_size(c, scale);
        int converging = next <= PENALTY_CONVERGING * size;
        size = next;
        if (converging || worst <= tolerance) continue;
        if (solves == 1 && may_undo) { /* near a singular pose: the penalty's answer */
            memcpy(q, c->q_scaled, sizeof(double) * (size_t)n);
            memcpy(l, c->mult_scaled, sizeof(double) * (size_t)m);
            c->penalty_refined = 0;
            return penalty_worst;
        }
        break; /* at the rounding, or a direction that the first step hid */
    }
    return worst;
}

/* Is the refined default penalty form's result (largest row residual
 * worst, penalty_refine) as accurate as constraint.h says, or is the pose
 * near a singular one (see PENALTY_SOLVES), where the penalty's own answer
 * is the form's point? */
static int penalty_accepted(const cdyn_constraint *c, double worst)
{
    return worst <= PENALTY_ACCURACY || c->decision.rank < c->m ||
           c->decision.ratio <= PENALTY_NEAR_SINGULAR || c->penalty_held;
}

/* Is row i of the loaded Phi_q all zeros? */
static int row_is_zero(const cdyn_constraint *c, int i)
{
    for (int j = 0; j < c->n; ++j)
        if (c->jac[i + (size_t)j * c->m1] != 0.0) return 0;
    return 1;
}

/* For row i and the masses mass[j] (j < n, stride apart; <= 0: none):
 * E with w = sum_j Phi_ij^2 / mass[j] nearest 2^E (within a factor sqrt
 * 2), over the coordinates with a mass; INT_MIN when the row has none,
 * INT_MAX / 4 when a term overflows.
 * w is t^2 sum_j (t_j / t)^2 with t_j = |Phi_ij| / sqrt(mass[j]) and t the
 * largest: E from the exponents, no overflow. */
static int row_weight(const cdyn_constraint *c, int i, const double *mass, int stride)
{
    double t = 0.0, sum = 0.0;
    for (int j = 0; j < c->n; ++j) {
        double a = c->jac[i + (size_t)j * c->m1], mj = mass[(size_t)j * stride];
        if (a == 0.0 || !(mj > 0.0)) continue;
        double tj = fabs(a) / sqrt(mj);
        if (tj > t) {
            sum = sum * (t / tj) * (t / tj) + 1.0;
            t = tj;
        } else {
            sum += (tj / t) * (tj / t);
        }
    }
    if (t == 0.0) return INT_MIN;
    if (!(t < INFINITY)) return INT_MAX / 4; /* beyond the double range: refused */
    int et, es, eh; /* w = h 2^(2 et + es + eh), h in [1/2, 1) */
    double ft = frexp(t, &et), fs = frexp(sum, &es), h = frexp(ft * ft * fs, &eh);
    return 2 * et + es + eh - (h < 0.70710678118654752);
}

/* The default constraint masses (constraint.h, docs/theory.md T4.8):
 * alpha_i = PENALTY_STIFFNESS / w_i, w_i = sum_j Phi_ij^2 / M_jj over the
 * coordinates with M_jj > 0 (the diagonal estimate of Phi_i M^-1 Phi_i^T,
 * the inverse of the mass the constraint moves), as a power of two, with
 * w_i the largest this row has had since create or
 * cdyn_constraint_reset_scales (c->weight_exp); or PENALTY_STIFFNESS h_i
 * when that is larger, h_i the mass the row moves while the others hold
 * (effective_masses), the smallest it has had (c->mass_exp). w_i changes
 * with the units of q and of Phi_i exactly as Phi_i M^-1 Phi_i^T does (and
 * h_i as its inverse's diagonal), so every
 * constraint outweighs the mass it moves by the same factor whatever the
 * units. The history keeps a row that vanishes at a singular pose from
 * taking an ever stiffer penalty (the form's point there), and powers of
 * two keep alpha the same over a neighbourhood of states, so that the
 * Jacobian through the penalty factorization (mbs_linearize.c), which
 * holds alpha fixed, is the right-hand side's. A row without history and
 * of zeros gets 0 (no multiplier). A row whose coordinates are all
 * massless gives each of them the mass the other rows lend it,
 * sum_k alpha_k Phi_kj^2 / PENALTY_STIFFNESS (repeated while rows settle);
 * a row left without any is refused (CDYN_ERR_ARG), as is an alpha_i
 * beyond the double range (CDYN_ERR_NONFINITE). Uses c->w (n). */
static cdyn_status default_penalty(cdyn_constraint *c, const char *fn)
{
    int n = c->n, m = c->m, m1 = c->m1, pending = 0;
    int *e = c->iwork, *history = c->weight_exp; /* exponents of w_i; INT_MIN: none */
    for (int i = 0; i < m; ++i) {
        e[i] = row_weight(c, i, c->mass, n + 1);
        pending += e[i] == INT_MIN && !row_is_zero(c, i); /* massless coordinates only */
    }
    for (int settled = 1; pending > 0 && settled;) {
        double *lent = c->w; /* the masses the settled rows lend, alpha_k Phi_kj^2 / 2^20 */
        for (int j = 0; j < n; ++j) {
            double mjj = c->mass[j + (size_t)j * n], sum = 0.0;
            for (int k = 0; k < m; ++k) {
                int ek = e[k] > history[k] ? e[k] : history[k];
                double a = c->jac[k + (size_t)j * m1];
                if (e[k] != INT_MIN) sum += ldexp(a * a, -ek);
            }
            lent[j] = mjj > 0.0 ? mjj : sum;
        }
        settled = 0;
        for (int i = 0; i < m; ++i) {
            if (e[i] != INT_MIN || row_is_zero(c, i)) continue;
            e[i] = row_weight(c, i, lent, 1);
            if (e[i] != INT_MIN) --pending, settled = 1;
        }
    }
    for (int i = 0; i < m; ++i) {
        int largest = e[i] > history[i] ? e[i] : history[i];
        if (largest == INT_MIN && !row_is_zero(c, i))
            return cleared(c, cdyn__fail(c->msg, CDYN_ERR_ARG,
                                         "%s: row %d of Phi_q moves only coordinates without "
                                         "mass that no constraint on a mass reaches: it has no "
                                         "default alpha_c; give one by "
                                         "cdyn_constraint_set_penalty",
                                         fn, i));
        int held = c->mass_exp[i]; /* INT_MAX: none */
        c->alpha[i] = largest == INT_MIN ? 0.0
                      : held != INT_MAX && held > -largest ? ldexp(PENALTY_STIFFNESS, held)
                                                            : ldexp(PENALTY_STIFFNESS, -largest);
        if (largest != INT_MIN && !(c->alpha[i] >= DBL_MIN && c->alpha[i] < INFINITY))
            return cleared(c, cdyn__fail(c->msg, CDYN_ERR_NONFINITE,
                                         "%s: the default alpha_c[%d] is beyond the double "
                                         "range (Phi_q and M of scales too far apart); give "
                                         "alpha_c by cdyn_constraint_set_penalty",
                                         fn, i));
    }
    for (int i = 0; i < m; ++i) /* the history, once every alpha is formed */
        history[i] = e[i] > history[i] ? e[i] : history[i];
    return CDYN_OK;
}

/* The mass each row moves while the other rows hold, h_i = (G^-1)_ii,
 * G = Phi_q M^-1 Phi_q^T (docs/theory.md T4.8), into the history
 * c->mass_exp (per row the smallest E with h_i nearest 2^E; INT_MAX:
 * none). The diagonal estimate w_i of default_penalty ignores the other
 * rows: a light coupler between two heavy bodies, Phi_q = [1 -1 0; 0 1
 * -1], makes both rows move mostly the coupler (w ~ 1 / m_light) while the
 * bodies move together (h ~ m_heavy / 2), so that alpha G had an
 * eigenvalue of 2^20 m_light / m_heavy and the penalty lost that
 * direction (found by review). From the loaded K = M + Phi_q^T alpha
 * Phi_q and its factor (M may be singular): Y = L^-1 D (alpha^1/2
 * Phi_q)^T, T = Y^T Y = B (I + B)^-1 with B = alpha^1/2 G alpha^1/2, so
 * diag(T^-1) = 1 + h_i / alpha_i. h_i / alpha_i is about 2^-20 or more
 * (h_i w_i >= 1 for a diagonal M), so the subtraction loses about 20 of
 * the 52 bits, and T's condition, 1 + 1 / mu_min over the eigenvalues mu
 * of B, costs more only below mu_min = 2^-32; only a power of two is kept.
 * A row with alpha_i = 0 or of zeros takes no part; a T that is singular
 * to working accuracy (a singular pose, redundant rows) leaves the history
 * as it was. Sets c->penalty_held when a row's h_i is 2^PENALTY_HELD or
 * more times its history's (a pose near a singular one, penalty_accepted).
 * Returns 1 when the default alpha rises by it (K must be formed again).
 * Uses c->z_rows (Y, n x m), c->small (T). */
static int effective_masses(cdyn_constraint *c)
{
    int n = c->n, m = c->m, m1 = c->m1, rises = 0;
    c->penalty_held = 0;
    double *Y = c->z_rows, *T = c->small;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
            Y[j + (size_t)i * n] = c->scale_q[j] * c->x_rows[i + (size_t)j * m1];
    cdyn__trsm('L', 'L', 'N', 'N', n, m, 1.0, c->chol, n, Y, n);
    cdyn__syrk('L', 'T', m, n, 1.0, Y, n, 0.0, T, m);
    for (int i = 0; i < m; ++i)
        if (T[i + (size_t)i * m] == 0.0) T[i + (size_t)i * m] = 1.0; /* a row without a penalty */
    if (cdyn__potrf(m, T, m) != 0 || cdyn__trtri_lower(m, T, m) != 0) return 0;
    c->mass_history = 1;
    for (int i = 0; i < m; ++i) {
        double d = 0.0; /* (T^-1)_ii: column i of L_T^-1 */
        for (int k = i; k < m; ++k) d += T[k + (size_t)i * m] * T[k + (size_t)i * m];
        double h = (d - 1.0) * c->alpha[i];
        if (!(h > 0.0 && h < INFINITY)) continue;
        int e;
        double f = frexp(h, &e); /* h = f 2^e, f in [1/2, 1): nearest 2^E */
        e -= f < 0.70710678118654752;
        if (c->mass_exp[i] != INT_MAX && e - c->mass_exp[i] >= PENALTY_HELD) c->penalty_held = 1;
        if (e + 20 >= DBL_MAX_EXP - 1) continue; /* no alpha of that size */
        if (e < c->mass_exp[i]) {
            rises |= ldexp(PENALTY_STIFFNESS, e) > c->alpha[i];
            c->mass_exp[i] = e;
        }
    }
    return rises;
}

/* K = M + Phi_q^T alpha_c Phi_q (T4.8) formed in c->qr (both triangles)
 * and factored by the definiteness policy (symmetric equilibration,
 * Cholesky) into c->chol, c->scale_q; c->x_rows = alpha^1/2 Phi_q. */
static cdyn_status penalty_matrix(cdyn_constraint *c, const char *fn)
{
    int n = c->n, m = c->m, m1 = c->m1;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
            c->x_rows[i + (size_t)j * m1] = sqrt(c->alpha[i]) * c->jac[i + (size_t)j * m1];
    memcpy(c->qr, c->mass, sizeof(double) * (size_t)n * n);
    cdyn__syrk('L', 'T', n, m, 1.0, c->x_rows, m1, 1.0, c->qr, n);
    for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) c->qr[j + (size_t)i * n] = c->qr[i + (size_t)j * n];
    cdyn_status st = check_overflow(c, fn, "M + Phi_q^T alpha_c Phi_q", n, n, c->qr, n);
    if (st) return st;
    int info = cdyn__spd_factor(n, c->qr, n, c->chol, n, c->scale_q);
    if (info != 0)
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: M + Phi_q^T alpha_c Phi_q is not positive definite "
                                     "(leading minor %d of the equilibrated matrix): some "
                                     "motion has no mass and no constraint",
                                     fn, info));
    return CDYN_OK;
}

/* The default alpha (or the caller's) and K's factor (penalty_matrix). */
static cdyn_status penalty_factor(cdyn_constraint *c, const char *fn)
{
    cdyn_status st = c->alpha_given ? CDYN_OK : default_penalty(c, fn);
    return st ? st : penalty_matrix(c, fn);
}

/* The penalty form's solve of the loaded instant, refined for the default
 * masses: K's backward error into *omega; returns the refinement's largest
 * row residual (0 for a caller's alpha_c or a solve not certified). */
static double penalty_solution(cdyn_constraint *c, double *omega)
{
    *omega = penalty_solve(c, c->force, c->accel_rhs);
    c->penalty_refined = 0;
    if (c->alpha_given || !(*omega <= cdyn__kkt_backward_tolerance(c->n, 0))) return 0.0;
    return penalty_refine(c, c->force, c->accel_rhs, 1);
}

cdyn_status cdyn_constraint_penalty(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_penalty";
    int n = c->n, m = c->m, m1 = c->m1, rank = 0;
    cdyn_status st = check_loaded(c, fn);
    if (!st) st = check_outputs(c, fn, qdd, lambda, "lambda");
    if (!st) st = decide(c, fn, &rank); /* only for the monitor */
    if (st) return st;
    /* T4.8: K q'' = b, K = M + Phi_q^T alpha Phi_q, b = Q + Phi_q^T alpha s.
     * The rows' effective masses (effective_masses) are measured at the
     * first solve of a history and where the refinement leaves a row
     * unconverged, away from singular poses; K is formed again when they
     * raise the default alpha */
    int measure = !c->alpha_given && m > 0 && c->decision.rank == m && /* once per call */
                  c->decision.ratio > PENALTY_NEAR_SINGULAR; /* else T is singular with Phi_q */
    c->penalty_held = 0;
    st = penalty_factor(c, fn);
    if (!st && measure && !c->mass_history) {
        measure = 0; /* a fresh history's masses are measured here, once */
        if (effective_masses(c)) st = penalty_factor(c, fn);
    }
    if (st) return st;
    double omega, worst = penalty_solution(c, &omega);
    if (measure && !(worst <= PENALTY_ACCURACY) && effective_masses(c)) {
        st = penalty_factor(c, fn);
        if (st) return st;
        worst = penalty_solution(c, &omega);
    }
    double tolerance = cdyn__kkt_backward_tolerance(n, 0);
    st = check_overflow(c, fn, "q''", n, 1, c->q_result, n);
    if (st) return st;
    if (!(omega <= tolerance))
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                                     "%s: M + Phi_q^T alpha_c Phi_q is singular to working "
                                     "accuracy (componentwise backward error %.2e > %.2e)",
                                     fn, omega, tolerance));
    if (!penalty_accepted(c, worst))
        return cleared(c, cdyn__fail(c->msg, CDYN_ERR_NOCONV,
                                     "%s: the default penalty form did not reach the "
                                     "constrained solution within %d solves (a constraint "
                                     "residual %.2e of its terms, away from singular poses: "
                                     "pivot ratio of Phi_q %.2g); masses too far apart for the "
                                     "default: use cdyn_constraint_lagrange, or give alpha_c",
                                     fn, PENALTY_SOLVES, worst, c->decision.ratio));
    st = commit(c, fn, c->jac, m1, qdd, lambda);
    c->reusable = st == CDYN_OK ? REUSE_PENALTY : 0;
    return st;
}

cdyn_status cdyn_constraint_export(cdyn_constraint *c, cdyn_export_variant variant,
                                   const double *C, int ldc, const double *h, double *A, int lda,
                                   double *B)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_export";
    int n = c->n, m = c->m, size = 2 * n + m;
    int reactions = variant == CDYN_EXPORT_REACTIONS;
    cdyn_status st = check_loaded(c, fn);
    if (!st && variant != CDYN_EXPORT_MULTIPLIERS && !reactions)
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: unknown variant %d", fn, (int)variant);
    if (!st && (!h || !A || !B || (reactions && m > 0 && !C)))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                        !h ? "h" : !A ? "A" : !B ? "B" : "C");
    if (!st && lda < size)
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: lda = %d < 2n + m = %d", fn, lda, size);
    if (!st && reactions && ldc < c->m1)
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldc = %d < max(1, m = %d)", fn, ldc, m);
    if (!st && reactions && m > 0 && cdyn__first_nonfinite(m, n, C, ldc) >= 0)
        st = cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: C has NaN or Inf", fn);
    if (!st && h) {
        long bad = cdyn__first_nonfinite(n, 1, h, n);
        if (bad >= 0) st = cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: h[%ld] is not finite", fn, bad);
    }
    if (!st && cdyn__overlap(A, sizeof(double) * ((size_t)lda * (size - 1) + size), B,
                             sizeof(double) * (size_t)size))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: A and B overlap", fn);
    if (!st && (cdyn__overlap(A, sizeof(double) * ((size_t)lda * (size - 1) + size), h,
                              sizeof(double) * (size_t)n) ||
                (reactions && m > 0 &&
                 cdyn__overlap(A, sizeof(double) * ((size_t)lda * (size - 1) + size), C,
                               sizeof(double) * ((size_t)ldc * (n - 1) + m)))))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: A overlaps an input", fn);
    if (st) return st;
    /* T4.5: rows [M 0 G^T; 0 I 0; Phi_q 0 0], unknowns [q''; q'; mult]
     * (B is written after h has been read: B may alias h) */
    const double *G = reactions ? C : c->jac;
    int ldg = reactions ? ldc : c->m1;
    for (int j = 0; j < size; ++j) memset(A + (size_t)j * lda, 0, sizeof(double) * (size_t)size);
    for (int j = 0; j < n; ++j) {
        memcpy(A + (size_t)j * lda, c->mass + (size_t)j * n, sizeof(double) * (size_t)n);
        A[(n + j) + (size_t)(n + j) * lda] = 1.0;
        for (int i = 0; i < m; ++i) {
            A[(2 * n + i) + (size_t)j * lda] = c->jac[i + (size_t)j * c->m1];
            A[j + (size_t)(2 * n + i) * lda] = G[i + (size_t)j * ldg];
        }
    }
    memcpy(c->top, h, sizeof(double) * (size_t)n);
    memcpy(B, c->force, sizeof(double) * (size_t)n);
    memcpy(B + n, c->top, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(B + 2 * n, c->accel_rhs, sizeof(double) * (size_t)m);
    return CDYN_OK;
}

/* ---- the kept factors, for other right-hand sides ---------------------- */

int cdyn__constraint_solve_again(cdyn_constraint *c, const double *f, const double *s, double *q,
                                 double *lambda)
{
    int n = c->n, m = c->m, certified = 0;
    if (c->reusable == REUSE_PENALTY) /* refined where the right-hand side was */
        certified = penalty_solve(c, f, s) <= cdyn__kkt_backward_tolerance(n, 0) &&
                    (!c->penalty_refined || penalty_accepted(c, penalty_refine(c, f, s, 0)));
    else if (c->reusable == REUSE_BORDERED && c->path == CDYN__PATH_DECIDED)
        certified = cdyn__constraint_decided_solve(c, f, s, c->q_result, c->mult_result);
    else if (c->reusable == REUSE_BORDERED)
        certified = solve_refined(c, NULL, 0, NULL, f, s) <= cdyn__kkt_backward_tolerance(n, m);
    if (!certified || cdyn__first_nonfinite(n, 1, c->q_result, n) >= 0 ||
        (m > 0 && cdyn__first_nonfinite(m, 1, c->mult_result, m) >= 0))
        return 0;
    memcpy(q, c->q_result, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(lambda, c->mult_result, sizeof(double) * (size_t)m);
    return 1;
}
