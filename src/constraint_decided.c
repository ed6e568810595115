/* The Lagrange form (THEORY T4.4) at small sizes through the factorization
 * the rank decision has already made (docs/theory.md, "Certified solves").
 *
 * The decision factors B = D_r Phi_q D_c (powers of two, against the
 * history of Phi_q: rank.h) as B^T P = Q [R; 0], Q = [Q_c Q_z]: Q_c spans
 * the motions the constraints fix, Q_z the free ones. With Y_c = D_c Q_c,
 * Y_z = D_c Q_z and q'' = Y_c u + Y_z w, lambda = D_r mu, the bordered
 * system [M Phi_q^T; Phi_q 0] [q''; lambda] = [Q; s] is triangular by
 * blocks:
 *     R^T u = P^T D_r s                          (Phi_q q'' = s)
 *     (Y_z^T M Y_z) w = Y_z^T (Q - M Y_c u)      (the free motions)
 *     R P^T mu = Y_c^T (Q - M q'').
 * It is taken only where its accuracy is plain: M positive definite (the
 * definiteness policy, rank.h, on Y^T M Y, which is congruent to M), the
 * decision's smallest kept pivot above 1/CONDITION_LIMIT of the largest,
 * and C_ZZ = Y_z^T M Y_z conditioned below CONDITION_LIMIT in its
 * equilibrated frame (a rigorous bound at these sizes). Everything else (a
 * massless coordinate, an indefinite M, constraints near a fold, a result
 * that does not certify) goes to the general path and gets its verdict.
 *
 * This costs one small Cholesky besides the decision's QR, against the
 * general path's equilibration of the whole bordered matrix, two Cholesky
 * factors, the whitening and two condition tests. Its result is certified
 * as the general path's is, by the componentwise backward error on the
 * caller's system (kkt.h) after up to two steps of refinement, but without
 * the floor of an equilibrated frame: the strict measure is unit-free by
 * itself. Because the frame is the decision's, the result's rounding (not
 * its certificate) depends on the history of Phi_q the object has seen. */
#include "constraint_internal.h"
#include "kkt.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

/* The conditioning up to which this path is taken (the tests above). */
#define CONDITION_LIMIT 1e6

/* C = Y^T M Y (lower triangle, into C, ld n) for Y (n x n). */
CDYN__SIZED void congruence_sized(const cdyn_constraint *c, int n, const double *Y, double *C)
{
    double *t = c->top;
    for (int b = 0; b < n; ++b) {
        const double *yb = Y + (size_t)b * n;
        for (int i = 0; i < n; ++i) t[i] = 0.0;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) t[i] += c->mass[i + (size_t)j * n] * yb[j];
        for (int a = b; a < n; ++a) {
            const double *ya = Y + (size_t)a * n;
            double sum = 0.0;
            for (int i = 0; i < n; ++i) sum += ya[i] * t[i];
            C[a + (size_t)b * n] = sum;
        }
    }
}

/* When the path applies (the tests above): Y = D_c Q E (n x n, E putting
 * the free motions first: Y = D_c [Q_Z Q_Y]) into c->chol, and the
 * Cholesky factor of S C S, C = Y^T M Y (the mass in the decision's frame,
 * free motions first), by the definiteness policy into the lower triangle
 * of c->qr (its scale S in c->delta_q). C is congruent to M, so this also
 * tests M; its leading block is the factor of C_ZZ. 0 when it does not
 * apply. */
static int prepare(cdyn_constraint *c)
{
    int n = c->n, m = c->m, free_motions = n - m;
    const cdyn__rank_ws *w = &c->ws;
    if (c->decision.ratio * CONDITION_LIMIT < 1.0) return 0;
    double *Y = c->chol, *C = c->qr;
    for (int j = 0; j < n; ++j) {
        memset(Y + (size_t)j * n, 0, sizeof(double) * (size_t)n);
        Y[(j < free_motions ? m + j : j - free_motions) + (size_t)j * n] = 1.0;
    }
    cdyn__small_ormqr('L', 'N', n, n, m, w->qr, n, w->tau, Y, n);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) Y[i + (size_t)j * n] *= w->col_scale[i];
#define CONGRUENCE(N) congruence_sized(c, N, Y, C)
    CDYN__FIXED_SIZE(n, CONGRUENCE);
#undef CONGRUENCE
    if (cdyn__spd_factor(n, C, n, C, n, c->delta_q) != 0) return 0;
    /* the triangular solves' divisions, taken out of their dependency
     * chains: 1 / R_kk, then 1 / L_aa of C_ZZ's factor */
    for (int k = 0; k < m; ++k) c->pivot_inv[k] = 1.0 / w->qr[k + (size_t)k * n];
    for (int a = 0; a < free_motions; ++a) c->pivot_inv[m + a] = 1.0 / C[a + (size_t)a * n];
    return free_motions == 0 ||
           cdyn__small_spd_cond(free_motions, C, n, c->kkt_work) <= CONDITION_LIMIT;
}

/* r = f - M q (n). */
CDYN__SIZED void force_residual(const cdyn_constraint *c, int n, const double *f,
                                const double *q, double *r)
{
    for (int i = 0; i < n; ++i) r[i] = f[i];
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) r[i] -= c->mass[i + (size_t)j * n] * q[j];
}

/* (q, lambda) of the bordered system for right-hand sides (f, s), in the
 * caller's units, with the prepared factors. */
CDYN__SIZED void solve_sized(cdyn_constraint *c, int n, const double *f, const double *s,
                             double *q, double *lambda)
{
    int m = c->m, free_motions = n - m;
    const cdyn__rank_ws *w = &c->ws;
    const double *R = w->qr, *Y = c->chol, *L = c->qr, *sc = c->delta_q, *dr = w->row_scale;
    const double *Yz = Y, *Yc = Y + (size_t)free_motions * n; /* free, constrained motions */
    const int *p = w->jpvt;
    const double *r_inv = c->pivot_inv, *l_inv = c->pivot_inv + m;
    double *u = c->vec_m, *r = c->top, *z = c->scale_q, *v = c->r;
    for (int k = 0; k < m; ++k) { /* R^T u = P^T D_r s */
        double sum = dr[p[k]] * s[p[k]];
        for (int i = 0; i < k; ++i) sum -= R[i + (size_t)k * n] * u[i];
        u[k] = sum * r_inv[k];
    }
    for (int i = 0; i < n; ++i) q[i] = 0.0; /* q = Y_c u */
    for (int k = 0; k < m; ++k)
        for (int i = 0; i < n; ++i) q[i] += Yc[i + (size_t)k * n] * u[k];
    if (free_motions > 0) { /* C_ZZ w = Y_z^T (f - M q), through S C_ZZ S = L L^T */
        force_residual(c, n, f, q, r);
        for (int a = 0; a < free_motions; ++a) {
            double sum = 0.0;
            for (int i = 0; i < n; ++i) sum += Yz[i + (size_t)a * n] * r[i];
            z[a] = sc[a] * sum;
        }
        for (int a = 0; a < free_motions; ++a) {
            double sum = z[a];
            for (int b = 0; b < a; ++b) sum -= L[a + (size_t)b * n] * z[b];
            z[a] = sum * l_inv[a];
        }
        for (int a = free_motions - 1; a >= 0; --a) {
            double sum = z[a];
            for (int b = a + 1; b < free_motions; ++b) sum -= L[b + (size_t)a * n] * z[b];
            z[a] = sum * l_inv[a];
        }
        for (int a = 0; a < free_motions; ++a)
            for (int i = 0; i < n; ++i) q[i] += Yz[i + (size_t)a * n] * (sc[a] * z[a]);
    }
    force_residual(c, n, f, q, r); /* R P^T mu = Y_c^T (f - M q), lambda = D_r mu */
    for (int k = 0; k < m; ++k) {
        double sum = 0.0;
        for (int i = 0; i < n; ++i) sum += Yc[i + (size_t)k * n] * r[i];
        v[k] = sum;
    }
    for (int k = m - 1; k >= 0; --k) {
        double sum = v[k];
        for (int i = k + 1; i < m; ++i) sum -= R[k + (size_t)i * n] * v[i];
        v[k] = sum * r_inv[k];
    }
    for (int k = 0; k < m; ++k) lambda[p[k]] = dr[p[k]] * v[k];
}

static void solve(cdyn_constraint *c, const double *f, const double *s, double *q, double *lambda)
{
#define SOLVE(N) solve_sized(c, N, f, s, q, lambda)
    CDYN__FIXED_SIZE(c->n, SOLVE);
#undef SOLVE
}

int cdyn__constraint_decided_solve(cdyn_constraint *c, const double *f, const double *s,
                                   double *q, double *lambda)
{
    int n = c->n, m = c->m;
    double *dq = c->q_scaled, *dl = c->delta_mult;
    solve(c, f, s, q, lambda);
    double tolerance = cdyn__kkt_backward_tolerance(n, m);
    double omega = cdyn__kkt_backward_error(n, m, c->mass, n, c->jac, c->m1, 1.0, c->jac, c->m1,
                                            q, lambda, f, s, NULL, NULL, NULL, c->residual_top,
                                            c->residual_bottom, c->kkt_work);
    for (int step = 0; step < 2 && omega > tolerance && omega < INFINITY; ++step) {
        solve(c, c->residual_top, c->residual_bottom, dq, dl);
        for (int j = 0; j < n; ++j) q[j] += dq[j];
        for (int i = 0; i < m; ++i) lambda[i] += dl[i];
        omega = cdyn__kkt_backward_error(n, m, c->mass, n, c->jac, c->m1, 1.0, c->jac, c->m1, q,
                                         lambda, f, s, NULL, NULL, NULL, c->residual_top,
                                         c->residual_bottom, c->kkt_work);
    }
    return omega <= tolerance;
}

int cdyn__constraint_lagrange_decided(cdyn_constraint *c)
{
    if (c->m == 0 || c->n > CDYN__SMALL || c->decision.rank != c->m) return 0;
    if (!prepare(c)) return 0;
    c->path = CDYN__PATH_DECIDED;
    return cdyn__constraint_decided_solve(c, c->force, c->accel_rhs, c->q_result, c->mult_result);
}
