/* Null-space reduction, the per-step maths (THEORY T1.2-T1.5): alpha and
 * alpha', full states, the minimum-order equations, the dependent rates and
 * the constraint forces. */
#include "linalg.h"
#include "nullspace_internal.h"

#include <string.h>

/* ---- per-step calls: validation ------------------------------------- */

static cdyn_status check_ready(cdyn_nullspace *ns, const char *fn)
{
    if (!ns->factored)
        return cdyn__fail(ns->msg, CDYN_ERR_ARG,
                          "%s: no factorization yet; call cdyn_nullspace_factor first", fn);
    return CDYN_OK;
}

static cdyn_status check_ptr(cdyn_nullspace *ns, const char *fn, const void *p,
                             const char *name)
{
    if (!p) return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    return CDYN_OK;
}

static cdyn_status check_ld(cdyn_nullspace *ns, const char *fn, int ld, int rows,
                            const char *name)
{
    if (ld < cdyn__max(rows, 1))
        return cdyn__fail(ns->msg, CDYN_ERR_ARG, "%s: %s = %d < max(1, %d)", fn, name, ld,
                          rows);
    return CDYN_OK;
}

static cdyn_status check_finite(cdyn_nullspace *ns, const char *fn, int rows, int cols,
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

cdyn_status cdyn_nullspace_alpha(cdyn_nullspace *ns, double *alpha, int ldalpha)
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
    cdyn__getrs('N', m, d, p->w2_lu, m, p->ipiv, block, m);
    for (int j = 0; j < d; ++j) {
        double *col = alpha_dot + (size_t)j * ldalpha_dot;
        memset(col, 0, sizeof(double) * (size_t)n);
        for (int i = 0; i < m; ++i) col[p->order[d + i]] = -block[i + (size_t)j * m];
    }
    return CDYN_OK;
}

/* v = Pi [vbar; beta vbar - W2^{-1} c] into v (validation done). */
static void complete_into(cdyn_nullspace *ns, const double *vbar, const double *c, double *v);

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
    complete_into(ns, vbar, c, v);
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
    for (int j = 0; j < ns->d; ++j) vbar[j] = v[ns->current.order[j]];
    return CDYN_OK;
}

/* Dependent block of alpha' vbar (T1.3): -W2^{-1} c into ns->vec_m
 * (zero when c is NULL). */
static void rate_offset(cdyn_nullspace *ns, const double *c)
{
    int m = ns->m;
    if (!c) {
        memset(ns->vec_m, 0, sizeof(double) * (size_t)cdyn__max(m, 1));
        return;
    }
    for (int i = 0; i < m; ++i) ns->vec_m[i] = -c[i];
    cdyn__getrs('N', m, 1, ns->current.w2_lu, m, ns->current.ipiv, ns->vec_m, m);
}

static void complete_into(cdyn_nullspace *ns, const double *vbar, const double *c, double *v)
{
    /* T1.2: v = Pi [vbar; beta vbar + offset], offset = -W2^{-1} c (T1.5) */
    const partition *p = &ns->current;
    rate_offset(ns, c);
    cdyn__gemv('N', ns->m, ns->d, 1.0, p->beta, cdyn__max(ns->m, 1), vbar, 1.0, ns->vec_m);
    for (int j = 0; j < ns->d; ++j) v[p->order[j]] = vbar[j];
    for (int i = 0; i < ns->m; ++i) v[p->order[ns->d + i]] = ns->vec_m[i];
}

/* Mbar = alpha^T M alpha and Fbar = alpha^T (F - M alpha' vbar) (T1.4),
 * written to caller arrays; validation done. */
static void reduce_into(cdyn_nullspace *ns, const double *M, int ldm, const double *F,
                        const double *c, double *Mbar, int ldmbar, double *Fbar)
{
    int n = ns->n, m = ns->m, d = ns->d, m1 = cdyn__max(m, 1);
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    /* M alpha = M[:, ind] + M[:, dep] beta */
    for (int j = 0; j < d; ++j)
        memcpy(ns->m_alpha + (size_t)j * n, M + (size_t)ind[j] * ldm, sizeof(double) * n);
    for (int j = 0; j < m; ++j)
        memcpy(ns->m_dep + (size_t)j * n, M + (size_t)dep[j] * ldm, sizeof(double) * n);
    cdyn__gemm('N', 'N', n, d, m, 1.0, ns->m_dep, n, p->beta, m1, 1.0, ns->m_alpha, n);
    /* alpha^T (M alpha) = (M alpha)[ind, :] + beta^T (M alpha)[dep, :] */
    for (int j = 0; j < d; ++j) {
        for (int i = 0; i < d; ++i)
            Mbar[i + (size_t)j * ldmbar] = ns->m_alpha[ind[i] + (size_t)j * n];
        for (int i = 0; i < m; ++i) ns->rates_dep[i + (size_t)j * m1] =
            ns->m_alpha[dep[i] + (size_t)j * n];
    }
    cdyn__gemm('T', 'N', d, d, m, 1.0, p->beta, m1, ns->rates_dep, m1, 1.0, Mbar, ldmbar);
    for (int j = 0; j < d; ++j) /* symmetric by construction; remove rounding skew */
        for (int i = j + 1; i < d; ++i) {
            double mean = 0.5 * (Mbar[i + (size_t)j * ldmbar] + Mbar[j + (size_t)i * ldmbar]);
            Mbar[i + (size_t)j * ldmbar] = Mbar[j + (size_t)i * ldmbar] = mean;
        }
    /* g = F - M alpha' vbar = F - M[:, dep] offset;  Fbar = g[ind] + beta^T g[dep] */
    rate_offset(ns, c);
    memcpy(ns->vec_n, F, sizeof(double) * (size_t)n);
    cdyn__gemv('N', n, m, -1.0, ns->m_dep, n, ns->vec_m, 1.0, ns->vec_n);
    for (int i = 0; i < m; ++i) ns->vec_m[i] = ns->vec_n[dep[i]];
    for (int j = 0; j < d; ++j) Fbar[j] = ns->vec_n[ind[j]];
    cdyn__gemv('T', m, d, 1.0, p->beta, m1, ns->vec_m, 1.0, Fbar);
}

/* v' and lambda from vbar' (T1.5); validation done. */
static void recover_into(cdyn_nullspace *ns, const double *M, int ldm, const double *F,
                         const double *c, const double *vbar_dot, double *vdot, double *lambda)
{
    int n = ns->n, m = ns->m, d = ns->d;
    const partition *p = &ns->current;
    const int *ind = p->order, *dep = p->order + d;
    /* vhat' = -W2^{-1}(W1 vbar' + c) = beta vbar' - W2^{-1} c */
    rate_offset(ns, c);
    cdyn__gemv('N', m, d, 1.0, p->beta, cdyn__max(m, 1), vbar_dot, 1.0, ns->vec_m);
    for (int j = 0; j < d; ++j) ns->vec_n[ind[j]] = vbar_dot[j];
    for (int i = 0; i < m; ++i) ns->vec_n[dep[i]] = ns->vec_m[i];
    if (lambda && m > 0) {
        /* lambda = W2^{-T} (M v' - F)[dep] */
        for (int i = 0; i < m; ++i) {
            const double *row = M + dep[i];
            double s = -F[dep[i]];
            for (int k = 0; k < n; ++k) s += row[(size_t)k * ldm] * ns->vec_n[k];
            ns->vec_m[i] = s;
        }
        cdyn__getrs('T', m, 1, p->w2_lu, m, p->ipiv, ns->vec_m, m);
        memcpy(lambda, ns->vec_m, sizeof(double) * (size_t)m);
    }
    memcpy(vdot, ns->vec_n, sizeof(double) * (size_t)n);
}

cdyn_status cdyn_nullspace_reduce(cdyn_nullspace *ns, const double *M, int ldm,
                                  const double *F, const double *c, double *Mbar, int ldmbar,
                                  double *Fbar)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_reduce";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, Mbar, "Mbar");
    if (!st) st = check_ptr(ns, fn, Fbar, "Fbar");
    if (!st) st = check_ld(ns, fn, ldmbar, ns->d, "ldmbar");
    if (st) return st;
    reduce_into(ns, M, ldm, F, c, Mbar, ldmbar, Fbar);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_recover(cdyn_nullspace *ns, const double *M, int ldm,
                                   const double *F, const double *c, const double *vbar_dot,
                                   double *vdot, double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_recover";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vbar_dot, "vbar_dot");
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (!st) st = check_finite(ns, fn, ns->d, 1, vbar_dot, ns->d, "vbar_dot");
    if (st) return st;
    recover_into(ns, M, ldm, F, c, vbar_dot, vdot, lambda);
    return CDYN_OK;
}

cdyn_status cdyn_nullspace_solve(cdyn_nullspace *ns, const double *M, int ldm,
                                 const double *F, const double *c, double *vdot,
                                 double *lambda)
{
    if (!ns) return CDYN_ERR_ARG;
    const char *fn = "cdyn_nullspace_solve";
    cdyn_status st = check_dynamics(ns, fn, M, ldm, F, c);
    if (!st) st = check_ptr(ns, fn, vdot, "vdot");
    if (st) return st;
    int d = ns->d;
    reduce_into(ns, M, ldm, F, c, ns->mass_reduced, d, ns->force_reduced);
    if (cdyn__first_nonfinite(d, d, ns->mass_reduced, d) >= 0 ||
        cdyn__first_nonfinite(d, 1, ns->force_reduced, d) >= 0)
        return cdyn__fail(ns->msg, CDYN_ERR_NONFINITE,
                          "%s: the reduced equations overflowed (inputs too large)", fn);
    int info = cdyn__potrf(d, ns->mass_reduced, d);
    if (info > 0)
        return cdyn__fail(ns->msg, CDYN_ERR_SINGULAR,
                          "%s: reduced mass matrix alpha^T M alpha is not positive definite "
                          "(leading minor %d)",
                          fn, info);
    cdyn__potrs(d, 1, ns->mass_reduced, d, ns->force_reduced, d);
    recover_into(ns, M, ldm, F, c, ns->force_reduced, vdot, lambda);
    return CDYN_OK;
}
