/* Null-space reduction, the per-step maths (THEORY T1.2-T1.5): alpha and
 * alpha', full states, the minimum-order equations, the dependent rates and
 * the constraint forces. Every result is computed in the object's
 * workspace and copied out last, so outputs may alias inputs. */
#include "kkt.h"
#include "linalg.h"
#include "nullspace_internal.h"
#include "rank.h"

#include <math.h>
#include <string.h>

/* ---- per-step calls: validation ------------------------------------- */

static cdyn_status check_ready(const cdyn_nullspace *ns, const char *fn)
{
    if (cdyn__nullspace_check_idle(ns, fn)) return CDYN_ERR_BUSY;
    if (!ns->factored)
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "%s: no factorization yet; call cdyn_nullspace_factor first", fn);
    return CDYN_OK;
}

static cdyn_status check_ptr(const cdyn_nullspace *ns, const char *fn, const void *p,
                             const char *name)
{
    if (!p) return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    return CDYN_OK;
}

static cdyn_status check_ld(const cdyn_nullspace *ns, const char *fn, int ld, int rows,
                            const char *name)
{
    if (ld < cdyn__max(rows, 1))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s = %d < max(1, %d)", fn, name, ld,
                          rows);
    return CDYN_OK;
}

static cdyn_status check_finite(const cdyn_nullspace *ns, const char *fn, int rows, int cols,
                                const double *A, int ld, const char *name)
{
    if (!A || rows == 0) return CDYN_OK;
    long bad = cdyn__first_nonfinite(rows, cols, A, ld);
    if (bad < 0) return CDYN_OK;
    if (cols == 1)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] is not finite", fn, name,
                          bad);
    return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: %s(%ld, %ld) is not finite", fn, name,
                      bad % rows, bad / rows);
}

/* Two outputs of one call must not overlap. */
static cdyn_status check_apart(cdyn_nullspace *ns, const char *fn, const void *a, size_t a_bytes,
                               const char *a_name, const void *b, size_t b_bytes,
                               const char *b_name)
{
    if (!cdyn__overlap(a, a_bytes, b, b_bytes)) return CDYN_OK;
    return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: outputs %s and %s overlap", fn, a_name,
                      b_name);
}

/* The M, F, c inputs shared by reduce, recover and solve. */
static cdyn_status check_dynamics(cdyn_nullspace *ns, const char *fn, const double *M, int ldm,
                                  const double *F, const double *c)
{
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, M, "M");
    if (!st) st = check_ptr(ns, fn, F, "F");
    if (!st) st = check_ld(ns, fn, ldm, ns->n, "ldm");
    if (!st) st = check_finite(ns, fn, ns->n, ns->n, M, ldm, "M");
    if (!st) st = check_finite(ns, fn, ns->n, 1, F, ns->n, "F");
    if (!st) st = check_finite(ns, fn, ns->m, 1, c, ns->m, "c");
    return st;
}

/* ---- per-step calls: the maths --------------------------------------- */

cdyn_status cdyn_nullspace_alpha(const cdyn_nullspace *ns, double *alpha, int ldalpha)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_alpha";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, alpha, "alpha");
    if (!st) st = check_ld(ns, fn, ldalpha, ns->n, "ldalpha");
    if (st) return st;
    /* T1.2: alpha = Pi [I_d; beta] */
    const partition *p = &ns->current;
    for (int j = 0; j < ns->d; ++j) {
        double *col = alpha + (size_t)j * ldalpha;
        memset(col, 0, sizeof(double) * (size_t)ns->n);
        col[p->order[j]] = 1.0;
        for (int i = 0; i < ns->m; ++i) col[p->order[ns->d + i]] = p->beta[i + (size_t)j * ns->m];
    }
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_alpha_dot(cdyn_nullspace *ns, const double *Wdot, int ldwdot,
                                     double *alpha_dot, int ldalpha_dot)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_alpha_dot";
    int n = ns->n, m = ns->m, d = ns->d;
    cdyn_status st = check_ready(ns, fn);
    if (!st && m > 0) st = check_ptr(ns, fn, Wdot, "Wdot");
    if (!st) st = check_ptr(ns, fn, alpha_dot, "alpha_dot");
    if (!st) st = check_ld(ns, fn, ldwdot, m, "ldwdot");
    if (!st) st = check_ld(ns, fn, ldalpha_dot, n, "ldalpha_dot");
    if (!st) st = check_finite(ns, fn, m, n, Wdot, ldwdot, "Wdot");
    if (st) return st;
    /* T1.3: lower block = -W2^{-1} (W1' + W2' beta), beta = -W2^{-1} W1 */
    const partition *p = &ns->current;
    double *block = ns->rates_dep; /* m x d */
    for (int j = 0; j < d; ++j)
        memcpy(block + (size_t)j * m, Wdot + (size_t)p->order[j] * ldwdot, sizeof(double) * m);
    for (int k = 0; k < m; ++k) { /* block += W2'(:, k) beta(k, :) */
        const double *w2dot_col = Wdot + (size_t)p->order[d + k] * ldwdot;
        for (int j = 0; j < d; ++j) {
            double b = p->beta[k + (size_t)j * m];
            for (int i = 0; i < m; ++i) block[i + (size_t)j * m] += w2dot_col[i] * b;
        }
    }
    for (int j = 0; j < d; ++j) cdyn__nullspace_w2_solve(ns, 'N', block + (size_t)j * m);
    long bad = cdyn__first_nonfinite(m, d, block, m);
    if (bad >= 0) /* finite inputs, but alpha' overflows */
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: alpha_dot(%d, %ld) overflows", fn, p->order[d + bad % m], bad / m);
    for (int j = 0; j < d; ++j) { /* written last: alpha_dot may alias Wdot */
        double *col = alpha_dot + (size_t)j * ldalpha_dot;
        memset(col, 0, sizeof(double) * (size_t)n);
        for (int i = 0; i < m; ++i) col[p->order[d + i]] = -block[i + (size_t)j * m];
    }
    return CDYN_OK;
}

/* Dependent block of alpha' vbar (T1.3): -W2^{-1} c into out (m; zero when
 * c is NULL). */
static void rate_offset(cdyn_nullspace *ns, const double *c, double *out)
{
    int m = ns->m;
    if (!c) {
        memset(out, 0, sizeof(double) * (size_t)cdyn__max(m, 1));
        return;
    }
    for (int i = 0; i < m; ++i) out[i] = -c[i];
    cdyn__nullspace_w2_solve(ns, 'N', out);
}

/* v = Pi [vbar; beta vbar - W2^{-1} c] into out (n) (T1.2, T1.5). */
static void complete_into(cdyn_nullspace *ns, const double *vbar, const double *c, double *out)
{
    const partition *p = &ns->current;
    rate_offset(ns, c, ns->vec_m);
    cdyn__gemv('N', ns->m, ns->d, 1.0, p->beta, cdyn__max(ns->m, 1), vbar, 1.0, ns->vec_m);
    for (int j = 0; j < ns->d; ++j) out[p->order[j]] = vbar[j];
    for (int i = 0; i < ns->m; ++i) out[p->order[ns->d + i]] = ns->vec_m[i];
}

cdyn_status cdyn_nullspace_expand(cdyn_nullspace *ns, const double *vbar, double *v)
{
    return cdyn_nullspace_complete(ns, vbar, NULL, v);
}

cdyn_status cdyn_nullspace_complete(cdyn_nullspace *ns, const double *vbar, const double *c,
                                    double *v)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = c ? "cdyn_nullspace_complete" : "cdyn_nullspace_expand";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, vbar, "vbar");
    if (!st) st = check_ptr(ns, fn, v, "v");
    if (!st) st = check_finite(ns, fn, ns->d, 1, vbar, ns->d, "vbar");
    if (!st) st = check_finite(ns, fn, ns->m, 1, c, ns->m, "c");
    if (st) return st;
    complete_into(ns, vbar, c, ns->vec_n3);
    long bad = cdyn__first_nonfinite(ns->n, 1, ns->vec_n3, ns->n);
    if (bad >= 0) /* finite inputs, but a dependent state overflows */
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: v[%ld] overflows (the dependent states exceed the range of "
                          "double)", fn, bad);
    memcpy(v, ns->vec_n3, sizeof(double) * (size_t)ns->n);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_independent(cdyn_nullspace *ns, const double *v, double *vbar)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_independent";
    cdyn_status st = check_ready(ns, fn);
    if (!st) st = check_ptr(ns, fn, v, "v");
    if (!st) st = check_ptr(ns, fn, vbar, "vbar");
    if (!st) st = check_finite(ns, fn, ns->n, 1, v, ns->n, "v");
    if (st) return st;
    for (int j = 0; j < ns->d; ++j) ns->vec_n3[j] = v[ns->current.order[j]];
    memcpy(vbar, ns->vec_n3, sizeof(double) * (size_t)ns->d);
    return CDYN_OK;
}

/* Mbar = alpha^T M alpha (T1.4) into ns->mass_reduced (d x d), with M alpha
 * and M[:, dep] left in ns->m_alpha and ns->m_dep. */
static void reduce_mass(cdyn_nullspace *ns, const double *M, int ldm)
{
    int n = ns->n, m = ns->m, d = ns->d, m1 = cdyn__max(m, 1);
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    double *Mbar = ns->mass_reduced;
    /* M alpha = M[:, ind] + M[:, dep] beta */
    for (int j = 0; j < d; ++j)
        memcpy(ns->m_alpha + (size_t)j * n, M + (size_t)ind[j] * ldm, sizeof(double) * n);
    for (int j = 0; j < m; ++j)
        memcpy(ns->m_dep + (size_t)j * n, M + (size_t)dep[j] * ldm, sizeof(double) * n);
    cdyn__gemm('N', 'N', n, d, m, 1.0, ns->m_dep, n, p->beta, m1, 1.0, ns->m_alpha, n);
    /* alpha^T (M alpha) = (M alpha)[ind, :] + beta^T (M alpha)[dep, :] */
    for (int j = 0; j < d; ++j) {
        for (int i = 0; i < d; ++i) Mbar[i + (size_t)j * d] = ns->m_alpha[ind[i] + (size_t)j * n];
        for (int i = 0; i < m; ++i)
            ns->rates_dep[i + (size_t)j * m1] = ns->m_alpha[dep[i] + (size_t)j * n];
    }
    cdyn__gemm('T', 'N', d, d, m, 1.0, p->beta, m1, ns->rates_dep, m1, 1.0, Mbar, d);
    for (int j = 0; j < d; ++j) /* symmetric by construction; remove rounding skew */
        for (int i = j + 1; i < d; ++i) {
            double mean = 0.5 * (Mbar[i + (size_t)j * d] + Mbar[j + (size_t)i * d]);
            Mbar[i + (size_t)j * d] = Mbar[j + (size_t)i * d] = mean;
        }
}

/* Fbar = alpha^T (F - M alpha' vbar) (T1.4) into Fbar (d), M[:, dep] in
 * ns->m_dep: g = F - M[:, dep] offset, Fbar = g[ind] + beta^T g[dep]. */
static void reduce_force(cdyn_nullspace *ns, const double *F, const double *c, double *Fbar)
{
    int n = ns->n, m = ns->m, d = ns->d, m1 = cdyn__max(m, 1);
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    rate_offset(ns, c, ns->vec_m);
    memcpy(ns->vec_n, F, sizeof(double) * (size_t)n);
    cdyn__gemv('N', n, m, -1.0, ns->m_dep, n, ns->vec_m, 1.0, ns->vec_n);
    for (int i = 0; i < m; ++i) ns->vec_m[i] = ns->vec_n[dep[i]];
    for (int j = 0; j < d; ++j) Fbar[j] = ns->vec_n[ind[j]];
    cdyn__gemv('T', m, d, 1.0, p->beta, m1, ns->vec_m, 1.0, Fbar);
}

/* v' (into vdot, n) and lambda (into lambda, m) from vbar' (T1.5). */
static void recover_into(cdyn_nullspace *ns, const double *M, int ldm, const double *F,
                         const double *c, const double *vbar_dot, double *vdot, double *lambda)
{
    int n = ns->n, m = ns->m, d = ns->d;
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    /* vhat' = -W2^{-1}(W1 vbar' + c) = beta vbar' - W2^{-1} c */
    rate_offset(ns, c, ns->vec_m);
    cdyn__gemv('N', m, d, 1.0, p->beta, cdyn__max(m, 1), vbar_dot, 1.0, ns->vec_m);
    for (int j = 0; j < d; ++j) vdot[ind[j]] = vbar_dot[j];
    for (int i = 0; i < m; ++i) vdot[dep[i]] = ns->vec_m[i];
    /* lambda = W2^{-T} (M v' - F)[dep] */
    for (int i = 0; i < m; ++i) {
        const double *row = M + dep[i];
        double s = -F[dep[i]];
        for (int k = 0; k < n; ++k) s += row[(size_t)k * ldm] * vdot[k];
        lambda[i] = s;
    }
    if (m > 0) cdyn__nullspace_w2_solve(ns, 'T', lambda);
}

cdyn_status cdyn_nullspace_reduce(cdyn_nullspace *ns, const double *M, int ldm,
                                  const double *F, const double *c, double *Mbar, int ldmbar,
                                  double *Fbar)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_reduce";
    int d = ns->d;
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, Mbar, "Mbar");
    if (!st) st = check_ptr(ns, fn, Fbar, "Fbar");
    if (!st) st = check_ld(ns, fn, ldmbar, d, "ldmbar");
    if (!st)
        st = check_apart(ns, fn, Mbar, sizeof(double) * ((size_t)ldmbar * (d - 1) + d), "Mbar",
                         Fbar, sizeof(double) * (size_t)d, "Fbar");
    if (st) return st;
    reduce_mass(ns, M, ldm);
    reduce_force(ns, F, c, ns->force_reduced);
    if (cdyn__first_nonfinite(d, d, ns->mass_reduced, d) >= 0 ||
        cdyn__first_nonfinite(d, 1, ns->force_reduced, d) >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: the reduced equations overflowed (inputs too large)", fn);
    for (int j = 0; j < d; ++j)
        memcpy(Mbar + (size_t)j * ldmbar, ns->mass_reduced + (size_t)j * d, sizeof(double) * d);
    memcpy(Fbar, ns->force_reduced, sizeof(double) * (size_t)d);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_recover(cdyn_nullspace *ns, const double *M, int ldm,
                                   const double *F, const double *c, const double *vbar_dot,
                                   double *vdot, double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_recover";
    int n = ns->n, m = ns->m;
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vbar_dot, "vbar_dot");
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (!st) st = check_finite(ns, fn, ns->d, 1, vbar_dot, ns->d, "vbar_dot");
    if (!st && lambda)
        st = check_apart(ns, fn, vdot, sizeof(double) * (size_t)n, "vdot", lambda,
                         sizeof(double) * (size_t)m, "lambda");
    if (st) return st;
    recover_into(ns, M, ldm, F, c, vbar_dot, ns->vec_n2, ns->vec_m2);
    if (cdyn__first_nonfinite(n, 1, ns->vec_n2, n) >= 0 ||
        cdyn__first_nonfinite(m, 1, ns->vec_m2, m) >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: v' or lambda overflowed", fn);
    if (lambda) memcpy(lambda, ns->vec_m2, sizeof(double) * (size_t)m);
    memcpy(vdot, ns->vec_n2, sizeof(double) * (size_t)n);
    return CDYN_OK;
}

/* Mbar x = b (d) with the factor of the symmetrically equilibrated Mbar:
 * x = S (S Mbar S)^{-1} S b, in place. */
static void reduced_solve(cdyn_nullspace *ns, double *b)
{
    int d = ns->d;
    for (int j = 0; j < d; ++j) b[j] *= ns->mass_scale[j];
    cdyn__potrs(d, 1, ns->mass_reduced, d, b, d);
    for (int j = 0; j < d; ++j) b[j] *= ns->mass_scale[j];
}

cdyn_status cdyn_nullspace_solve(cdyn_nullspace *ns, const double *M, int ldm,
                                 const double *F, const double *c, double *vdot,
                                 double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_solve";
    int n = ns->n, m = ns->m, d = ns->d;
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (!st && lambda)
        st = check_apart(ns, fn, vdot, sizeof(double) * (size_t)n, "vdot", lambda,
                         sizeof(double) * (size_t)m, "lambda");
    if (st) return st;
    reduce_mass(ns, M, ldm);
    reduce_force(ns, F, c, ns->force_reduced);
    if (cdyn__first_nonfinite(d, d, ns->mass_reduced, d) >= 0 ||
        cdyn__first_nonfinite(d, 1, ns->force_reduced, d) >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: the reduced equations overflowed (inputs too large)", fn);
    /* the definiteness policy: Cholesky of the equilibrated Mbar (in place) */
    int info = cdyn__spd_factor(d, ns->mass_reduced, d, ns->mass_reduced, d, ns->mass_scale);
    if (info > 0)
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: reduced mass matrix alpha^T M alpha is not positive definite "
                          "(leading minor %d of the equilibrated matrix)",
                          fn, info);
    /* pivots can hide a singular Mbar (a ring of masses 1, 1e-8 and 1e-12
     * coupled through off-diagonal terms passed them: v' along the ring's
     * null vector arbitrary, with CDYN_OK) */
    info = cdyn__spd_nearly_singular(d, ns->mass_reduced, d, ns->vec_n3, ns->vec_n2);
    if (info > 0)
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: reduced mass matrix alpha^T M alpha is singular to working "
                          "accuracy (an eigenvalue at or below 1e3 eps of the equilibrated "
                          "matrix; independent unknown %d leads its null vector)",
                          fn, info - 1);
    double *v = ns->vec_n2, *lam = ns->vec_m2;
    reduced_solve(ns, ns->force_reduced);
    recover_into(ns, M, ldm, F, c, ns->force_reduced, v, lam);
    /* certificate (kkt.h): M v' - W^T lambda = F, W v' = -c in the
     * caller's units, with up to two steps of refinement through the same
     * factorizations (the correction solves the system for the residual) */
    const double *W = ns->current.w;
    double *rf = ns->residual_top, *rg = ns->residual_bottom;
    for (int i = 0; i < m; ++i) ns->neg_c[i] = c ? -c[i] : 0.0;
    double tolerance = cdyn__kkt_backward_tolerance(n, m);
    /* the unknowns' units: W's frame; a state W does not touch (all of
     * them when m = 0; always an independent one) takes that of the
     * equilibrated Mbar instead of W's factor 1 */
    double *ux = ns->vec_n3;
    const double *uy = ns->current.row_scale;
    for (int k = 0; k < d; ++k) {
        int j = ns->current.order[k];
        int touched = 0;
        for (int i = 0; i < m && !touched; ++i) touched = W[i + (size_t)j * m] != 0.0;
        ux[j] = touched ? ns->current.col_scale[j] : ns->mass_scale[k];
    }
    for (int i = 0; i < m; ++i) {
        int j = ns->current.order[d + i];
        ux[j] = ns->current.col_scale[j];
    }
    double omega = cdyn__kkt_backward_error(n, m, M, ldm, W, m, -1.0, W, m, v, lam, F, ns->neg_c,
                                            ux, uy, NULL, rf, rg, ns->kkt_work);
    for (int step = 0; step < 2 && omega > tolerance && isfinite(omega); ++step) {
        for (int i = 0; i < m; ++i) rg[i] = -rg[i]; /* the correction's c */
        reduce_force(ns, rf, rg, ns->force_reduced);
        reduced_solve(ns, ns->force_reduced);
        recover_into(ns, M, ldm, rf, rg, ns->force_reduced, ns->delta_v, ns->delta_lambda);
        for (int i = 0; i < n; ++i) v[i] += ns->delta_v[i];
        for (int i = 0; i < m; ++i) lam[i] += ns->delta_lambda[i];
        omega = cdyn__kkt_backward_error(n, m, M, ldm, W, m, -1.0, W, m, v, lam, F, ns->neg_c, ux,
                                         uy, NULL, rf, rg, ns->kkt_work);
    }
    if (cdyn__first_nonfinite(n, 1, v, n) >= 0 || cdyn__first_nonfinite(m, 1, lam, m) >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE, "%s: v' or lambda overflowed", fn);
    if (!(omega <= tolerance))
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: the constrained system is singular to working accuracy "
                          "(componentwise backward error %.2e > %.2e after refinement)",
                          fn, omega, tolerance);
    if (lambda) memcpy(lambda, lam, sizeof(double) * (size_t)m);
    memcpy(vdot, v, sizeof(double) * (size_t)n);
    return CDYN_OK;
}
