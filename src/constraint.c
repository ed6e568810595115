/* Constrained accelerations of a mechanism at one instant: KKT, reactions,
 * pseudo-inverse, penalty and the exported linear system (THEORY T4.3-T4.8). */
#include "cdyn/constraint.h"

#include "internal.h"
#include "linalg.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cdyn_constraint {
    int n, m, m1, k;        /* m1 = max(m, 1), k = min(n, m) */
    double rank_tol;
    double *kd, *kp;        /* m x m gains (T4.5, T4.6) */
    double *alpha;          /* m, penalty (T4.8) */
    /* the loaded instant */
    int loaded;
    double *mass;           /* n x n */
    double *force;          /* n, Q */
    double *jac;            /* m x n, Phi_q */
    double *accel_rhs;      /* m, s = xi - K_D Phi' - K_P Phi */
    /* last result */
    int has_result;
    double *gen_force;      /* n */
    double *multipliers;    /* m */
    /* rank facts of Phi_q */
    int rank, n_redundant;
    double sigma_min;
    int *redundant;         /* m */
    /* workspace */
    double *chol;           /* n x n */
    double *y;              /* m x n (ld m1), X = Phi_q L^{-T} = Y^T */
    double *y2;             /* m x n (ld m1), C L^{-T} */
    double *qr;             /* max(n, m) x max(n, m) */
    double *tau;            /* max(n, m) */
    int *jpvt;              /* max(n, m) */
    double *sv;             /* min(n, m) */
    double *u_svd;          /* m1 x k, left singular vectors of X */
    double *small;          /* m x m */
    double *gram;           /* m x m, Phi_q Phi_q^T */
    int *ipiv;              /* m */
    int *iwork;             /* m */
    double *vec_n, *vec_n2; /* n */
    double *vec_m, *vec_m2; /* m */
    double *work;
    int lwork;
    char msg[CDYN__MSG_LEN];
};

cdyn_constraint *cdyn_constraint_create(int n, int m, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    int big = n > m ? n : m;
    if (n < 1 || m < 0 || (size_t)big * (size_t)big > (size_t)INT_MAX / 8) {
        *status = CDYN_ERR_ARG;
        return NULL;
    }
    cdyn_constraint *c = calloc(1, sizeof *c);
    if (!c) goto fail;
    int m1 = cdyn__max(m, 1), k = n < m1 ? n : m1;
    size_t nn = (size_t)n * n, nm = (size_t)n * m1, mm = (size_t)m1 * m1;
    c->n = n;
    c->m = m;
    c->m1 = m1;
    c->k = k;
    c->rank_tol = 1e-10;
    c->rank = -1;
    c->sigma_min = -1.0;
    int lwork = cdyn__max(cdyn__geqp3_lwork(n, m1), cdyn__geqp3_lwork(m1, n));
    lwork = cdyn__max(lwork, cdyn__gesvd_jobs_lwork('S', 'N', m1, n)); /* pseudo-inverse */
    lwork = cdyn__max(lwork, cdyn__ormqr_lwork('R', 'N', m1, n, k));   /* reactions */
    lwork = cdyn__max(lwork, cdyn__gesvd_jobs_lwork('N', 'N', m1, n)); /* sigma_min */
    lwork = cdyn__max(lwork, 4 * m1);
    lwork = cdyn__max(lwork, 3 * big); /* dpocon in the rank certificate */
    c->lwork = lwork;
    c->work = malloc(sizeof(double) * (size_t)lwork);
    c->kd = calloc(mm, sizeof(double));
    c->kp = calloc(mm, sizeof(double));
    c->alpha = malloc(sizeof(double) * (size_t)m1);
    c->mass = malloc(sizeof(double) * nn);
    c->force = malloc(sizeof(double) * (size_t)n);
    c->jac = malloc(sizeof(double) * nm);
    c->accel_rhs = malloc(sizeof(double) * (size_t)m1);
    c->gen_force = malloc(sizeof(double) * (size_t)n);
    c->multipliers = malloc(sizeof(double) * (size_t)m1);
    c->redundant = malloc(sizeof(int) * (size_t)m1);
    c->chol = malloc(sizeof(double) * nn);
    c->y = malloc(sizeof(double) * nm);
    c->y2 = malloc(sizeof(double) * nm);
    c->qr = malloc(sizeof(double) * (size_t)big * big);
    c->tau = malloc(sizeof(double) * (size_t)big);
    c->jpvt = malloc(sizeof(int) * (size_t)big);
    c->sv = malloc(sizeof(double) * (size_t)k);
    c->u_svd = malloc(sizeof(double) * (size_t)m1 * k);
    c->small = malloc(sizeof(double) * mm);
    c->gram = malloc(sizeof(double) * mm);
    c->ipiv = malloc(sizeof(int) * (size_t)m1);
    c->iwork = malloc(sizeof(int) * (size_t)m1);
    c->vec_n = malloc(sizeof(double) * (size_t)n);
    c->vec_n2 = malloc(sizeof(double) * (size_t)n);
    c->vec_m = malloc(sizeof(double) * (size_t)m1);
    c->vec_m2 = malloc(sizeof(double) * (size_t)m1);
    if (!c->work || !c->kd || !c->kp || !c->alpha || !c->mass || !c->force || !c->jac ||
        !c->accel_rhs || !c->gen_force || !c->multipliers || !c->redundant || !c->chol ||
        !c->y || !c->y2 || !c->qr || !c->tau || !c->jpvt || !c->sv || !c->u_svd ||
        !c->small || !c->gram || !c->ipiv || !c->iwork || !c->vec_n || !c->vec_n2 || !c->vec_m ||
        !c->vec_m2)
        goto fail;
    for (int i = 0; i < m; ++i) c->alpha[i] = 10.0;
    *status = CDYN_OK;
    return c;
fail:
    cdyn_constraint_free(c);
    *status = CDYN_ERR_NOMEM;
    return NULL;
}

void cdyn_constraint_free(cdyn_constraint *c)
{
    if (!c) return;
    double *arrays[] = {c->work,  c->kd,     c->kp,     c->alpha,  c->mass,        c->force,
                        c->jac,   c->accel_rhs, c->gen_force, c->multipliers, c->chol, c->y,
                        c->y2,    c->qr,     c->tau,    c->sv,     c->u_svd,
                        c->small, c->gram,  c->vec_n,  c->vec_n2, c->vec_m,  c->vec_m2};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(c->redundant);
    free(c->jpvt);
    free(c->ipiv);
    free(c->iwork);
    free(c);
}

/* ---- settings --------------------------------------------------------- */

/* K_D = kd I, K_P = kp I (T4.6). */
static void set_diagonal_gains(cdyn_constraint *c, double kd, double kp)
{
    int m = c->m;
    memset(c->kd, 0, sizeof(double) * (size_t)c->m1 * c->m1);
    memset(c->kp, 0, sizeof(double) * (size_t)c->m1 * c->m1);
    for (int i = 0; i < m; ++i) {
        c->kd[i + (size_t)i * m] = kd;
        c->kp[i + (size_t)i * m] = kp;
    }
}

/* CDYN_OK when every x[i] (m of them) is finite and > 0; NULL only if m = 0. */
static cdyn_status check_positive(cdyn_constraint *c, const char *fn, const char *name,
                                  const double *x)
{
    if (c->m > 0 && !x) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    for (int i = 0; i < c->m; ++i)
        if (!(x[i] > 0.0) || isinf(x[i]))
            return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s[%d] = %g is not > 0", fn, name, i,
                              x[i]);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_baumgarte(cdyn_constraint *c, double a, double b)
{
    if (!c) return CDYN_ERR_ARG;
    if (!(a >= 0.0 && b >= 0.0) || isinf(a) || isinf(b))
        return cdyn__fail(c->msg, CDYN_ERR_ARG,
                          "cdyn_constraint_set_baumgarte: a = %g, b = %g (need finite >= 0)", a, b);
    set_diagonal_gains(c, 2.0 * a, b * b);
    return CDYN_OK;
}

/* Is the m x m symmetric A positive definite? (Cholesky of a copy) */
static int is_spd(cdyn_constraint *c, const double *A, int lda)
{
    int m = c->m;
    for (int j = 0; j < m; ++j)
        memcpy(c->small + (size_t)j * m, A + (size_t)j * lda, sizeof(double) * (size_t)m);
    return cdyn__potrf(m, c->small, m) == 0;
}

cdyn_status cdyn_constraint_set_gains(cdyn_constraint *c, const double *KD, int ldkd,
                                      const double *KP, int ldkp)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_set_gains";
    int m = c->m;
    if (m == 0) return CDYN_OK;
    if (!KD || !KP) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !KD ? "KD" : "KP");
    if (ldkd < m || ldkp < m)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: leading dimension < m = %d", fn, m);
    if (cdyn__first_nonfinite(m, m, KD, ldkd) >= 0 || cdyn__first_nonfinite(m, m, KP, ldkp) >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: NaN or Inf in the gains", fn);
    for (int j = 0; j < m; ++j)
        for (int i = j + 1; i < m; ++i) {
            double kd_skew = fabs(KD[i + (size_t)j * ldkd] - KD[j + (size_t)i * ldkd]);
            double kp_skew = fabs(KP[i + (size_t)j * ldkp] - KP[j + (size_t)i * ldkp]);
            double scale = fabs(KD[i + (size_t)j * ldkd]) + fabs(KD[j + (size_t)i * ldkd]) +
                           fabs(KP[i + (size_t)j * ldkp]) + fabs(KP[j + (size_t)i * ldkp]);
            if (kd_skew > 1e-12 * scale || kp_skew > 1e-12 * scale)
                return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is not symmetric (entry %d, %d)",
                                  fn, kd_skew > 1e-12 * scale ? "K_D" : "K_P", i, j);
        }
    if (!is_spd(c, KD, ldkd) || !is_spd(c, KP, ldkp))
        return cdyn__fail(c->msg, CDYN_ERR_SINGULAR, "%s: %s is not symmetric positive definite",
                          fn, !is_spd(c, KD, ldkd) ? "K_D" : "K_P");
    for (int j = 0; j < m; ++j) {
        memcpy(c->kd + (size_t)j * m, KD + (size_t)j * ldkd, sizeof(double) * (size_t)m);
        memcpy(c->kp + (size_t)j * m, KP + (size_t)j * ldkp, sizeof(double) * (size_t)m);
    }
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_critical_gains(cdyn_constraint *c, const double *k)
{
    if (!c) return CDYN_ERR_ARG;
    cdyn_status st = check_positive(c, "cdyn_constraint_set_critical_gains", "k", k);
    if (st) return st;
    set_diagonal_gains(c, 0.0, 0.0);
    for (int i = 0; i < c->m; ++i) { /* T4.6: critically damped per constraint */
        c->kd[i + (size_t)i * c->m] = 2.0 * k[i];
        c->kp[i + (size_t)i * c->m] = k[i] * k[i];
    }
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_penalty(cdyn_constraint *c, const double *alpha)
{
    if (!c) return CDYN_ERR_ARG;
    cdyn_status st = check_positive(c, "cdyn_constraint_set_penalty", "alpha", alpha);
    if (st) return st;
    if (c->m > 0) memcpy(c->alpha, alpha, sizeof(double) * (size_t)c->m);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_set_rank_tolerance(cdyn_constraint *c, double tol)
{
    if (!c) return CDYN_ERR_ARG;
    if (!(tol > 0.0 && tol < 1.0))
        return cdyn__fail(c->msg, CDYN_ERR_ARG,
                          "cdyn_constraint_set_rank_tolerance: tol = %g is not in (0, 1)", tol);
    c->rank_tol = tol;
    return CDYN_OK;
}

/* ---- the instant ------------------------------------------------------ */

static cdyn_status check_vector(cdyn_constraint *c, const char *fn, const char *name, int len,
                                const double *x)
{
    long bad = x && len > 0 ? cdyn__first_nonfinite(len, 1, x, len) : -1;
    if (bad < 0) return CDYN_OK;
    return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] is not finite", fn, name, bad);
}

cdyn_status cdyn_constraint_load(cdyn_constraint *c, const double *M, int ldm, const double *Q,
                                 const double *Phi_q, int ldphiq, const double *Phi,
                                 const double *Phi_dot, const double *xi)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_load";
    int n = c->n, m = c->m;
    if (!M || !Q || (m > 0 && !Phi_q))
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !M ? "M" : !Q ? "Q" : "Phi_q");
    if (ldm < n) return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldm = %d < n = %d", fn, ldm, n);
    if (ldphiq < c->m1)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldphiq = %d < max(1, m = %d)", fn, ldphiq, m);
    long bad = cdyn__first_nonfinite(n, n, M, ldm);
    if (bad >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: M(%ld, %ld) is not finite", fn,
                          bad % n, bad / n);
    bad = m > 0 ? cdyn__first_nonfinite(m, n, Phi_q, ldphiq) : -1;
    if (bad >= 0)
        return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: Phi_q(%ld, %ld) is not finite", fn,
                          bad % m, bad / m);
    cdyn_status st = check_vector(c, fn, "Q", n, Q);
    if (!st) st = check_vector(c, fn, "Phi", m, Phi);
    if (!st) st = check_vector(c, fn, "Phi_dot", m, Phi_dot);
    if (!st) st = check_vector(c, fn, "xi", m, xi);
    if (st) return st;
    for (int j = 0; j < n; ++j) {
        memcpy(c->mass + (size_t)j * n, M + (size_t)j * ldm, sizeof(double) * (size_t)n);
        if (m > 0)
            memcpy(c->jac + (size_t)j * m, Phi_q + (size_t)j * ldphiq, sizeof(double) * (size_t)m);
    }
    memcpy(c->force, Q, sizeof(double) * (size_t)n);
    /* T4.6: s = xi - K_D Phi' - K_P Phi */
    for (int i = 0; i < m; ++i) c->accel_rhs[i] = xi ? xi[i] : 0.0;
    if (Phi_dot) cdyn__gemv('N', m, m, -1.0, c->kd, m, Phi_dot, 1.0, c->accel_rhs);
    if (Phi) cdyn__gemv('N', m, m, -1.0, c->kp, m, Phi, 1.0, c->accel_rhs);
    c->loaded = 1;
    c->has_result = 0;
    return CDYN_OK;
}

/* ---- shared steps ----------------------------------------------------- */

static cdyn_status check_loaded(cdyn_constraint *c, const char *fn)
{
    if (!c->loaded)
        return cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: no instant loaded; call cdyn_constraint_load",
                          fn);
    return CDYN_OK;
}

/* M = L L^T into c->chol. */
static cdyn_status factor_mass(cdyn_constraint *c, const char *fn)
{
    int n = c->n;
    memcpy(c->chol, c->mass, sizeof(double) * (size_t)n * n);
    int info = cdyn__potrf(n, c->chol, n);
    if (info != 0)
        return cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                          "%s: M is not positive definite (leading minor %d); the modified "
                          "Lagrange form accepts a singular M",
                          fn, info);
    return CDYN_OK;
}

/* out = G L^{-T} (m x n, ld m1) for G (m x n, ld ldg): the transpose of
 * Y = L^{-1} G^T, kept by rows because the right-side solve passes over L
 * once (the left-side one streams L once per column of Y). */
static void whiten_rows(cdyn_constraint *c, const double *G, int ldg, double *out)
{
    int n = c->n, m = c->m, m1 = c->m1;
    if (m == 0) return;
    for (int j = 0; j < n; ++j)
        memcpy(out + (size_t)j * m1, G + (size_t)j * ldg, sizeof(double) * (size_t)m);
    cdyn__trsm('R', 'L', 'T', 'N', m, n, 1.0, c->chol, n, out, m1);
}

/* The n x m matrix Y = X^T into dst (ld n), from X (m x n, ld m1). */
static void transpose_rows(cdyn_constraint *c, const double *X, double *dst)
{
    int n = c->n, m = c->m;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) dst[j + (size_t)i * n] = X[i + (size_t)j * c->m1];
}

/* Intermediate results can overflow for extreme (finite) inputs; LAPACK
 * must never see NaN or Inf (its SVD may not terminate on them). */
static cdyn_status check_overflow(cdyn_constraint *c, const char *fn, const char *what,
                                  int rows, int cols, const double *A, int ld)
{
    if (rows == 0 || cols == 0 || cdyn__first_nonfinite(rows, cols, A, ld) < 0) return CDYN_OK;
    return cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: %s overflowed (inputs too large)", fn,
                      what);
}

/* Rank of Phi_q (the time-free fact every rank decision uses): pivoted QR
 * of Phi_q^T ranks the rows; those past the rank are the redundant ones. */
static int rank_of_jacobian(cdyn_constraint *c)
{
    int n = c->n, m = c->m, k = c->k;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c->qr[j + (size_t)i * n] = c->jac[i + (size_t)j * c->m1];
    memset(c->jpvt, 0, sizeof(int) * (size_t)c->m1);
    if (m > 0) cdyn__geqp3(n, m, c->qr, n, c->jpvt, c->tau, c->work, c->lwork);
    double r11 = m > 0 ? fabs(c->qr[0]) : 0.0;
    int rank = 0;
    while (rank < k && r11 > 0.0 && fabs(c->qr[rank + (size_t)rank * n]) > c->rank_tol * r11)
        ++rank;
    c->rank = rank;
    c->n_redundant = m - rank;
    for (int i = 0; i < c->n_redundant; ++i) c->redundant[i] = c->jpvt[rank + i] - 1;
    for (int i = 1; i < c->n_redundant; ++i) /* ascending; few entries */
        for (int j = i; j > 0 && c->redundant[j - 1] > c->redundant[j]; --j) {
            int tmp = c->redundant[j];
            c->redundant[j] = c->redundant[j - 1];
            c->redundant[j - 1] = tmp;
        }
    c->sigma_min = -1.0; /* not computed yet */
    return rank;
}

/* Smallest singular value of Phi_q (SVD), for the report. */
static void record_smallest_singular_value(cdyn_constraint *c)
{
    int n = c->n, m = c->m, k = c->k;
    if (m == 0) {
        c->sigma_min = 0.0;
        return;
    }
    for (int j = 0; j < n; ++j)
        memcpy(c->qr + (size_t)j * m, c->jac + (size_t)j * c->m1, sizeof(double) * (size_t)m);
    cdyn__gesvd_jobs('N', 'N', m, n, c->qr, m, c->sv, NULL, 1, NULL, 1, c->work, c->lwork);
    c->sigma_min = m > n ? 0.0 : c->sv[k - 1];
}

static cdyn_status rank_loss(cdyn_constraint *c, const char *fn)
{
    record_smallest_singular_value(c);
    return cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                      "%s: Phi_q is rank deficient (rank %d < m = %d, smallest singular value "
                      "%.3e); dependent constraint row%s %d%s",
                      fn, c->rank, c->m, c->sigma_min, c->n_redundant > 1 ? "s" : "",
                      c->n_redundant > 0 ? c->redundant[0] : -1,
                      c->n_redundant > 1 ? " ..." : "");
}

/* Copy the result out and keep it for cdyn_constraint_force(); a result
 * that overflowed is an error, never passed on. */
static cdyn_status commit(cdyn_constraint *c, const char *fn, const double *mult, double *qdd,
                          double *mult_out)
{
    cdyn_status st = check_overflow(c, fn, "q''", c->n, 1, c->vec_n, c->n);
    if (!st) st = check_overflow(c, fn, "the multipliers", c->m, 1, mult, c->m1);
    if (!st) st = check_overflow(c, fn, "the constraint force", c->n, 1, c->vec_n2, c->n);
    if (st) return st;
    if (c->m > 0) memcpy(c->multipliers, mult, sizeof(double) * (size_t)c->m);
    memcpy(c->gen_force, c->vec_n2, sizeof(double) * (size_t)c->n);
    memcpy(qdd, c->vec_n, sizeof(double) * (size_t)c->n);
    if (mult_out && c->m > 0) memcpy(mult_out, mult, sizeof(double) * (size_t)c->m);
    c->has_result = 1;
    return CDYN_OK;
}

/* ---- formulations ----------------------------------------------------- */

/* Limits of the Schur-Cholesky path: a margin between its condition bound
 * and the rank tolerance (cond(Phi_q) <= 1e-2 / rank_tol there), the
 * largest condition of the Schur complement it accepts (its q'' error grows
 * like cond(A) eps, the QR path's like sqrt(cond(A)) eps: 1e6 keeps it
 * near 1e-10 relative), and the largest condition of the Gram matrix
 * Phi_q Phi_q^T trusted as a certificate (it is formed, so its computed
 * condition is reliable only well below 1 / (n m eps)). */
#define SCHUR_MARGIN 1e-4
#define SCHUR_COND_LIMIT 1e6
#define GRAM_COND_LIMIT 1e12

/* Upper bound of cond_2(Phi_q)^2 (uses c->gram): for few rows (m <=
 * CDYN__SMALL) the condition of the Gram matrix Phi_q Phi_q^T itself (n m^2 flops; capped at GRAM_COND_LIMIT, Inf above); otherwise
 * cond(M) cond(A) >= cond(Phi_q)^2 (since x^T A x = |L^{-1} Phi_q^T x|^2 lies
 * between |Phi_q^T x|^2 / lambda_max(M) and / lambda_min(M)) with cond(A) =
 * cond_schur, which costs only a condition estimate of M. */
static double jacobian_condition_squared(cdyn_constraint *c, double cond_schur)
{
    int n = c->n, m = c->m, m1 = c->m1;
    if (m <= CDYN__SMALL) {
        cdyn__syrk('L', 'N', m, n, 1.0, c->jac, m1, 0.0, c->gram, m1);
        if (cdyn__potrf(m, c->gram, m1) != 0) return INFINITY;
        /* forming G perturbs it by about n m eps |G|: trust its condition
         * only well below the inverse of that */
        double trust = fmin(GRAM_COND_LIMIT, 1e-2 / ((double)n * m * DBL_EPSILON));
        double cond = cdyn__spd_cond(m, NULL, m1, c->gram, m1, c->work, c->jpvt);
        return cond <= trust ? cond : INFINITY;
    }
    double cond_mass = cdyn__spd_cond(n, c->mass, n, c->chol, n, c->work, c->jpvt);
    return cond_mass * cond_schur;
}

/* Is the rank decision on Phi_q certain to find full rank, with the Schur
 * complement A = Y^T Y (Y = L^{-1} Phi_q^T, its transpose X in c->y) well
 * enough conditioned to be used directly? The pivoted QR of Phi_q^T keeps
 * every |R_kk| >= sigma_min >= |R_11| / cond(Phi_q), so a bound
 * cond(Phi_q)^2 <= SCHUR_MARGIN / rank_tol^2 settles it (rigorously below
 * size 17; above, the factor 1e4 covers LAPACK's condition estimate,
 * which can be low but rarely by more than a factor 10). Forming A
 * costs accuracy (q'' error cond(A) eps against sqrt(cond(A)) eps through
 * the QR of Y), so A must also be well conditioned (SCHUR_COND_LIMIT); near
 * a singular pose the rank-revealing paths run. On 1 the Cholesky factor of
 * A is in c->small and the rank facts are recorded. */
static int full_rank_certain(cdyn_constraint *c)
{
    int n = c->n, m = c->m, m1 = c->m1;
    if (m > 0) {
        /* A into c->qr (kept for the condition estimate), its factor into c->small */
        cdyn__syrk('L', 'N', m, n, 1.0, c->y, m1, 0.0, c->qr, m1);
        for (int j = 0; j < m; ++j)
            memcpy(c->small + (size_t)j * m1 + j, c->qr + (size_t)j * m1 + j,
                   sizeof(double) * (size_t)(m - j));
        if (cdyn__potrf(m, c->small, m1) != 0) return 0;
        double cond = cdyn__spd_cond(m, c->qr, m1, c->small, m1, c->work, c->jpvt);
        if (!(cond <= SCHUR_COND_LIMIT) ||
            !(jacobian_condition_squared(c, cond) <=
              SCHUR_MARGIN / (c->rank_tol * c->rank_tol)))
            return 0;
    }
    c->rank = m;
    c->n_redundant = 0;
    c->sigma_min = -1.0;
    return 1;
}

/* w = L^{-1} Q into c->vec_n and r = Y^T w - s = Phi_q M^{-1} Q - s into
 * c->vec_m (X = Y^T in c->y). */
static void whitened_rhs(cdyn_constraint *c)
{
    int n = c->n, m = c->m;
    memcpy(c->vec_n, c->force, sizeof(double) * (size_t)n);
    cdyn__trsm('L', 'L', 'N', 'N', n, 1, 1.0, c->chol, n, c->vec_n, n);
    memcpy(c->vec_m, c->accel_rhs, sizeof(double) * (size_t)m);
    cdyn__gemv('N', m, n, 1.0, c->y, c->m1, c->vec_n, -1.0, c->vec_m);
}

/* q'' = M^{-1} (Q - G^T mult) = L^{-T} (w - Z^T mult) into c->vec_n (w
 * there on entry, Z = G L^{-T} by rows, ld m1) and the force G^T mult into
 * c->vec_n2. */
static void whitened_accelerations(cdyn_constraint *c, const double *Z, const double *G,
                                   int ldg, const double *mult)
{
    int n = c->n, m = c->m;
    cdyn__gemv('T', m, n, -1.0, Z, c->m1, mult, 1.0, c->vec_n);
    cdyn__trsm('L', 'L', 'T', 'N', n, 1, 1.0, c->chol, n, c->vec_n, n);
    cdyn__gemv('T', m, n, 1.0, G, ldg, mult, 0.0, c->vec_n2);
}

/* T4.4 through a pivoted QR Y P = Q_Y R, after the rank of Phi_q is
 * decided by its own pivoted QR: the path for nearly dependent rows.
 * r in c->vec_m is replaced by the multipliers; CDYN_ERR_SINGULAR on rank
 * loss. */
static cdyn_status rank_revealing_lagrange(cdyn_constraint *c, const char *fn)
{
    int n = c->n, m = c->m;
    if (rank_of_jacobian(c) < m) return rank_loss(c, fn);
    transpose_rows(c, c->y, c->qr);
    memset(c->jpvt, 0, sizeof(int) * (size_t)cdyn__max(m, 1));
    if (m > 0) cdyn__geqp3(n, m, c->qr, n, c->jpvt, c->tau, c->work, c->lwork);
    for (int i = 0; i < m; ++i) c->vec_m2[i] = c->vec_m[c->jpvt[i] - 1];
    cdyn__trsm('L', 'U', 'T', 'N', m, 1, 1.0, c->qr, n, c->vec_m2, c->m1);
    cdyn__trsm('L', 'U', 'N', 'N', m, 1, 1.0, c->qr, n, c->vec_m2, c->m1);
    for (int i = 0; i < m; ++i) c->vec_m[c->jpvt[i] - 1] = c->vec_m2[i];
    return CDYN_OK;
}

cdyn_status cdyn_constraint_lagrange(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_lagrange";
    int n = c->n, m = c->m;
    cdyn_status st = check_loaded(c, fn);
    if (!st && (!qdd || (m > 0 && !lambda)))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !qdd ? "qdd" : "lambda");
    if (!st) st = factor_mass(c, fn);
    if (st) return st;
    /* T4.4 by the Schur complement A = Phi_q M^{-1} Phi_q^T = Y^T Y with
     * Y = L^{-1} Phi_q^T; the rank is decided on Phi_q itself (time-free,
     * independent of M) whenever it is in doubt. */
    whiten_rows(c, c->jac, c->m1, c->y);
    st = check_overflow(c, fn, "L^-1 Phi_q^T", m, n, c->y, c->m1);
    if (st) return st;
    whitened_rhs(c);
    if (full_rank_certain(c)) {
        cdyn__potrs(m, 1, c->small, c->m1, c->vec_m, c->m1); /* A lambda = r */
    } else {
        st = rank_revealing_lagrange(c, fn);
        if (st) return st;
    }
    whitened_accelerations(c, c->y, c->jac, c->m1, c->vec_m);
    return commit(c, fn, c->vec_m, qdd, lambda);
}

/* T4.3 with the m x m product T = Y^T Z = Phi_q M^{-1} C^T formed (Y, Z the
 * whitened Phi_q^T, C^T, kept by rows in c->y, c->y2) and solved by LU,
 * when T is well conditioned (SCHUR_COND_LIMIT). r in c->vec_m becomes f;
 * 0 (vec_m untouched) sends the caller to the rank-revealing path. */
static int reactions_by_product(cdyn_constraint *c)
{
    int n = c->n, m = c->m, m1 = c->m1;
    if (m == 0) return 1;
    cdyn__gemm('N', 'T', m, m, n, 1.0, c->y, m1, c->y2, m1, 0.0, c->qr, m1);
    double anorm = cdyn__norm1(m, m, c->qr, m1), rcond = 0.0;
    if (!(anorm < INFINITY) || cdyn__getrf(m, c->qr, m1, c->ipiv) != 0) return 0;
    cdyn__gecon(m, c->qr, m1, anorm, &rcond, c->work, c->iwork);
    if (!(rcond * SCHUR_COND_LIMIT >= 1.0)) return 0;
    cdyn__getrs('N', m, 1, c->qr, m1, c->ipiv, c->vec_m, m1);
    return 1;
}

/* T4.3 without forming a product whose condition is squared: with Y =
 * Q_Y R P^T (pivoted QR) the matrix is P R^T T', T' = (Q_Y^T Z) restricted
 * to its first m rows (the first m columns of Z^T Q_Y = Z Q_Y by rows):
 * solve R^T z = P^T r, then T' f = z by LU. The rank of Phi_q is decided
 * first. r in c->vec_m becomes f (c->y2 is clobbered). */
static cdyn_status rank_revealing_reactions(cdyn_constraint *c, const char *fn)
{
    int n = c->n, m = c->m;
    if (rank_of_jacobian(c) < m) return rank_loss(c, fn);
    transpose_rows(c, c->y, c->qr);
    memset(c->jpvt, 0, sizeof(int) * (size_t)c->m1);
    cdyn__geqp3(n, m, c->qr, n, c->jpvt, c->tau, c->work, c->lwork);
    cdyn__ormqr('R', 'N', m, n, m, c->qr, n, c->tau, c->y2, c->m1, c->work, c->lwork);
    for (int j = 0; j < m; ++j) /* T'(i, j) = (Z Q_Y)(j, i) */
        for (int i = 0; i < m; ++i)
            c->small[i + (size_t)j * c->m1] = c->y2[j + (size_t)i * c->m1];
    double anorm = cdyn__norm1(m, m, c->small, c->m1), rcond = 1.0;
    int info = m > 0 ? cdyn__getrf(m, c->small, c->m1, c->ipiv) : 0;
    if (info == 0 && m > 0) cdyn__gecon(m, c->small, c->m1, anorm, &rcond, c->work, c->iwork);
    if (info != 0 || rcond < DBL_EPSILON * c->m1) { /* numerically singular */
        record_smallest_singular_value(c);
        return cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                          "%s: Phi_q M^-1 C^T is singular (reciprocal condition %.3e of its C "
                          "factor; Phi_q has full rank %d)",
                          fn, info != 0 ? 0.0 : rcond, m);
    }
    for (int i = 0; i < m; ++i) c->vec_m2[i] = c->vec_m[c->jpvt[i] - 1];
    cdyn__trsm('L', 'U', 'T', 'N', m, 1, 1.0, c->qr, n, c->vec_m2, c->m1);
    memcpy(c->vec_m, c->vec_m2, sizeof(double) * (size_t)m);
    cdyn__getrs('N', m, 1, c->small, c->m1, c->ipiv, c->vec_m, c->m1);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_reactions(cdyn_constraint *c, const double *C, int ldc, double *qdd,
                                      double *f)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_reactions";
    int n = c->n, m = c->m;
    cdyn_status st = check_loaded(c, fn);
    if (!st && (!qdd || (m > 0 && (!f || !C))))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                        !qdd ? "qdd" : !f ? "f" : "C");
    if (!st && ldc < c->m1)
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: ldc = %d < max(1, m = %d)", fn, ldc, m);
    if (!st && m > 0 && cdyn__first_nonfinite(m, n, C, ldc) >= 0)
        st = cdyn__fail(c->msg, CDYN_ERR_NONFINITE, "%s: C has NaN or Inf", fn);
    if (!st) st = factor_mass(c, fn);
    if (st) return st;
    /* T4.3: (Phi_q M^{-1} C^T) f = Phi_q M^{-1} Q - s = r, with Y = L^{-1}
     * Phi_q^T and Z = L^{-1} C^T: (Y^T Z) f = r. */
    whiten_rows(c, c->jac, c->m1, c->y);
    whiten_rows(c, C, ldc, c->y2);
    st = check_overflow(c, fn, "L^-1 Phi_q^T", m, n, c->y, c->m1);
    if (!st) st = check_overflow(c, fn, "L^-1 C^T", m, n, c->y2, c->m1);
    if (st) return st;
    whitened_rhs(c);
    if (!full_rank_certain(c) || !reactions_by_product(c)) {
        st = rank_revealing_reactions(c, fn);
        if (st) return st;
        whiten_rows(c, C, ldc, c->y2); /* Z again (the QR path used it) */
    }
    whitened_accelerations(c, c->y2, C, ldc, c->vec_m);
    return commit(c, fn, c->vec_m, qdd, f);
}

cdyn_status cdyn_constraint_pseudoinverse(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_pseudoinverse";
    int n = c->n, m = c->m;
    cdyn_status st = check_loaded(c, fn);
    if (!st && (!qdd || (m > 0 && !lambda)))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !qdd ? "qdd" : "lambda");
    if (!st) st = factor_mass(c, fn);
    if (st) return st;
    int rank = rank_of_jacobian(c);
    record_smallest_singular_value(c);
    /* T4.7: Y = L^{-1} Phi_q^T = V S U^T (the SVD of its transpose X = U S
     * V^T), A = Y^T Y = U S^2 U^T, lambda = U_r S_r^{-2} U_r^T r (minimum
     * norm), r = rank Phi_q = rank Y */
    whiten_rows(c, c->jac, c->m1, c->y);
    st = check_overflow(c, fn, "L^-1 Phi_q^T", m, n, c->y, c->m1);
    if (st) return st;
    whitened_rhs(c);
    if (m > 0) {
        double *U = c->u_svd; /* m x k, ld m1; V is not needed */
        memcpy(c->y2, c->y, sizeof(double) * (size_t)c->m1 * n); /* the SVD destroys it */
        cdyn__gesvd_jobs('S', 'N', m, n, c->y2, c->m1, c->sv, U, c->m1, NULL, 1, c->work,
                         c->lwork);
        int kept = rank;
        while (kept > 0 && !(c->sv[kept - 1] > 0.0)) --kept; /* never divide by zero */
        cdyn__gemv('T', m, kept, 1.0, U, c->m1, c->vec_m, 0.0, c->vec_m2); /* U^T r */
        for (int i = 0; i < kept; ++i) /* twice by s: s^2 may overflow or underflow */
            c->vec_m2[i] = c->vec_m2[i] / c->sv[i] / c->sv[i];
        cdyn__gemv('N', m, kept, 1.0, U, c->m1, c->vec_m2, 0.0, c->vec_m);
    }
    whitened_accelerations(c, c->y, c->jac, c->m1, c->vec_m);
    return commit(c, fn, c->vec_m, qdd, lambda);
}

cdyn_status cdyn_constraint_penalty(cdyn_constraint *c, double *qdd, double *lambda)
{
    if (!c) return CDYN_ERR_ARG;
    const char *fn = "cdyn_constraint_penalty";
    int n = c->n, m = c->m;
    cdyn_status st = check_loaded(c, fn);
    if (!st && (!qdd || (m > 0 && !lambda)))
        st = cdyn__fail(c->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, !qdd ? "qdd" : "lambda");
    if (st) return st;
    /* T4.8: (M + Phi_q^T alpha Phi_q) q'' = Q + Phi_q^T alpha s; the
     * leading matrix as M + S^T S with S = diag(sqrt(alpha)) Phi_q */
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
            c->y2[i + (size_t)j * c->m1] = sqrt(c->alpha[i]) * c->jac[i + (size_t)j * c->m1];
    memcpy(c->chol, c->mass, sizeof(double) * (size_t)n * n);
    cdyn__syrk('L', 'T', n, m, 1.0, c->y2, c->m1, 1.0, c->chol, n);
    st = check_overflow(c, fn, "M + Phi_q^T alpha_c Phi_q", n, n, c->chol, n);
    if (st) return st;
    int info = cdyn__potrf(n, c->chol, n);
    if (info != 0)
        return cdyn__fail(c->msg, CDYN_ERR_SINGULAR,
                          "%s: M + Phi_q^T alpha_c Phi_q is not positive definite (leading "
                          "minor %d): some motion has no mass and no constraint",
                          fn, info);
    for (int i = 0; i < m; ++i) c->vec_m[i] = c->alpha[i] * c->accel_rhs[i];
    memcpy(c->vec_n, c->force, sizeof(double) * (size_t)n);
    cdyn__gemv('T', m, n, 1.0, c->jac, c->m1, c->vec_m, 1.0, c->vec_n);
    cdyn__potrs(n, 1, c->chol, n, c->vec_n, n);
    /* lambda ~ alpha (Phi_q q'' - s) */
    memcpy(c->vec_m, c->accel_rhs, sizeof(double) * (size_t)m);
    cdyn__gemv('N', m, n, 1.0, c->jac, c->m1, c->vec_n, -1.0, c->vec_m);
    for (int i = 0; i < m; ++i) c->vec_m[i] *= c->alpha[i];
    cdyn__gemv('T', m, n, 1.0, c->jac, c->m1, c->vec_m, 0.0, c->vec_n2);
    return commit(c, fn, c->vec_m, qdd, lambda);
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
    if (!st) st = check_vector(c, fn, "h", n, h);
    if (st) return st;
    /* T4.5: rows [M 0 G^T; 0 I 0; Phi_q 0 0], unknowns [q''; q'; mult] */
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
    memcpy(B, c->force, sizeof(double) * (size_t)n);
    memcpy(B + n, h, sizeof(double) * (size_t)n);
    if (m > 0) memcpy(B + 2 * n, c->accel_rhs, sizeof(double) * (size_t)m);
    return CDYN_OK;
}

cdyn_status cdyn_constraint_force(cdyn_constraint *c, double *generalized_force,
                                  double *multipliers)
{
    if (!c) return CDYN_ERR_ARG;
    if (!c->has_result)
        return cdyn__fail(c->msg, CDYN_ERR_ARG,
                          "cdyn_constraint_force: no formulation has succeeded since the last load");
    if (generalized_force)
        memcpy(generalized_force, c->gen_force, sizeof(double) * (size_t)c->n);
    if (multipliers && c->m > 0)
        memcpy(multipliers, c->multipliers, sizeof(double) * (size_t)c->m);
    return CDYN_OK;
}

int cdyn_constraint_rank(const cdyn_constraint *c) { return c ? c->rank : -1; }

double cdyn_constraint_smallest_singular_value(const cdyn_constraint *c)
{
    return c ? c->sigma_min : -1.0;
}

int cdyn_constraint_redundant_rows(const cdyn_constraint *c, int *rows)
{
    if (!c) return -1;
    if (rows && c->n_redundant > 0)
        memcpy(rows, c->redundant, sizeof(int) * (size_t)c->n_redundant);
    return c->n_redundant;
}

const char *cdyn_constraint_last_error(const cdyn_constraint *c)
{
    return c ? c->msg : "cdyn_constraint: NULL object";
}
