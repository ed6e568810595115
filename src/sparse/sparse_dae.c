/* A large index-1 DAE with a diagonal mass and a sparse Jacobian
 * (include/cdyn/sparse_dae.h; THEORY T3.3 with beta and P the selections of
 * the massless and the massive states, T2 for the algebraic states): the
 * algebraic block dF_A/dv_A is factored by KLU, the iteration is
 * cdyn_newton's (cdyn__newton_create_linear), the rank decision the core's
 * tolerance on KLU's condition estimate of the equilibrated block. A block
 * that fails it is factored again by the rank-revealing sparse QR of
 * rank_qr.h, whose minimum-norm outer inverse takes the Newton steps and
 * the rates through it (T2.3) when its rank is decided cleanly. */
#include "cdyn/sparse_dae.h"

#include "difference_tableau.h"
#include "internal.h"
#include "kkt.h"
#include "newton_internal.h"
#include "rank.h"
#include "rank_qr.h"

#include <suitesparse/klu.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct cdyn_sparse_dae {
    int n, nnz;
    int nd, q;               /* states with mass (integrated), massless (algebraic) */
    double *mass;            /* n */
    int *colptr, *rowind;    /* the pattern of dF/dv (n + 1, nnz) */
    int *integrated, *algebraic; /* nd, q: state indices */
    int *position;           /* n: index in integrated or algebraic */
    /* the algebraic block A = dF_A/dv_A (q x q) and the coupling
     * C = dF_A/dv_D (q x nd), by columns: rows in block numbering and the
     * index of each entry in the full values */
    int *a_start, *a_row, *a_src;
    int *c_start, *c_row, *c_src;
    double *a_value, *a_scaled; /* the block as evaluated, and equilibrated */
    double *row_scale, *col_scale; /* q each: powers of two */
    klu_common klu;
    klu_symbolic *symbolic;
    klu_numeric *numeric;
    long pivotings;
    cdyn__rank_qr rank_qr;   /* the singular block's factorization (rank_qr.h) */
    int deficient;           /* the block factored now is rank deficient: rank_qr applies */
    int kept;                /* the block evaluated and factored now is the committed one */
    int longest_row;         /* the most entries in a row of A, for the certificate */
    cdyn_newton *newton;     /* q x q on the owner's block (NULL when q = 0) */
    /* the model */
    cdyn_sparse_dae_force_fn force;
    cdyn_sparse_dae_jacobian_fn jacobian;
    cdyn_sparse_dae_time_fn time_derivative;
    void *user;
    int callback_code;
    cdyn__guard guard;
    double t_eval;
    /* state */
    double *v_trial, *v_last, *vdot_last, *vdot_trial; /* n */
    int has_last, has_rates;
    /* workspace */
    double *values;          /* nnz: dF/dv */
    double *f, *f_shift;     /* n */
    double *b, *x, *res, *bound, *scratch; /* q, q, q, q, max(q, 1) */
    double *time_work;                     /* CDYN__TIME_WORK max(q, 1): dF_A/dt */
    char *msg;               /* the message record after the object (cdyn__object_alloc) */
};

/* ---- the algebraic block for cdyn_newton (cdyn__newton_linear) ---------- */

/* F at v_trial into out; its callback code (0: OK). */
static int call_force(cdyn_sparse_dae *sd, double t, double *out)
{
    sd->guard.in_callback++;
    int code = sd->force(t, sd->v_trial, out, sd->user);
    sd->guard.in_callback--;
    if (code != 0) sd->callback_code = code;
    return code;
}

/* Newton residual: G(x) = F_A(v) with v_A = x. */
static int algebraic_residual(const double *x, double *G, void *user)
{
    cdyn_sparse_dae *sd = user;
    for (int k = 0; k < sd->q; ++k) sd->v_trial[sd->algebraic[k]] = x[k];
    int code = call_force(sd, sd->t_eval, sd->f);
    if (code != 0) return code;
    for (int k = 0; k < sd->q; ++k) G[k] = sd->f[sd->algebraic[k]];
    return 0;
}

/* dF/dv at v_trial (v_A = x) into values, the block gathered: 0, 1 when
 * the callback failed (its code in *code), or -1 for a value that is not
 * finite. */
static int evaluate(void *ctx, const double *x, int *code)
{
    cdyn_sparse_dae *sd = ctx;
    sd->kept = 0; /* the committed block is overwritten from here on */
    for (int k = 0; k < sd->q; ++k) sd->v_trial[sd->algebraic[k]] = x[k];
    sd->guard.in_callback++;
    *code = sd->jacobian(sd->t_eval, sd->v_trial, sd->values, sd->user);
    sd->guard.in_callback--;
    if (*code != 0) {
        sd->callback_code = *code;
        return 1;
    }
    if (cdyn__first_nonfinite(sd->nnz, 1, sd->values, sd->nnz) >= 0) return -1;
    int na = sd->a_start[sd->q];
    for (int e = 0; e < na; ++e) sd->a_value[e] = sd->values[sd->a_src[e]];
    return 0;
}

/* The chord steps run on KLU's factors only. */
static int kept(void *ctx)
{
    const cdyn_sparse_dae *sd = ctx;
    return sd->kept && !sd->deficient;
}

static int column(void *ctx, int j, const int **rows, const double **values)
{
    cdyn_sparse_dae *sd = ctx;
    *rows = sd->a_row + sd->a_start[j];
    *values = sd->a_value + sd->a_start[j];
    return sd->a_start[j + 1] - sd->a_start[j];
}

/* 2^-e for |a| = m 2^e, m in [1/2, 1): a power of two that brings a to
 * [1, 2), within 2^+-1000 (a subnormal maximum must not make it Inf); 1
 * for a = 0. */
static double inverse_power(double a)
{
    if (!(a > 0.0)) return 1.0;
    int e;
    frexp(a, &e);
    int shift = 1 - e;
    return ldexp(1.0, shift > 1000 ? 1000 : shift < -1000 ? -1000 : shift);
}

/* The block equilibrated by powers of two (row maxima, then column maxima
 * of the row-scaled block), so that its rank decision does not depend on
 * the units of the states or the equations. */
static void equilibrate(cdyn_sparse_dae *sd)
{
    int q = sd->q;
    double *rs = sd->row_scale, *cs = sd->col_scale;
    memset(rs, 0, sizeof(double) * (size_t)q);
    for (int j = 0; j < q; ++j)
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            rs[sd->a_row[e]] = fmax(rs[sd->a_row[e]], fabs(sd->a_value[e]));
    for (int i = 0; i < q; ++i) rs[i] = inverse_power(rs[i]);
    for (int j = 0; j < q; ++j) {
        double largest = 0.0;
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            largest = fmax(largest, fabs(sd->a_value[e]) * rs[sd->a_row[e]]);
        cs[j] = inverse_power(largest);
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            sd->a_scaled[e] = rs[sd->a_row[e]] * sd->a_value[e] * cs[j];
    }
}

/* The rank screen on the factored, equilibrated block, at every Newton
 * iterate: the ratio of its smallest to its largest pivot (klu_rcond), an
 * upper bound of its reciprocal condition, against the core's rank
 * tolerance. */
static int passes_screen(cdyn_sparse_dae *sd, double *rcond)
{
    *rcond = 0.0;
    if (!sd->numeric || sd->klu.status == KLU_SINGULAR) return 0;
    if (!klu_rcond(sd->symbolic, sd->numeric, &sd->klu)) return 0;
    *rcond = sd->klu.rcond;
    return *rcond > CDYN__RANK_TOL;
}

/* The rank verdict on the factorization at the solution: KLU's estimate of
 * the 1-norm condition of the equilibrated block (klu_condest) against the
 * core's rank tolerance. */
static int full_rank(cdyn_sparse_dae *sd, double *rcond)
{
    *rcond = 0.0;
    if (!sd->numeric || sd->klu.status == KLU_SINGULAR) return 0;
    if (!klu_condest(sd->a_start, sd->a_scaled, sd->symbolic, sd->numeric, &sd->klu)) return 0;
    *rcond = sd->klu.condest > 0.0 ? 1.0 / sd->klu.condest : 0.0;
    return *rcond > CDYN__RANK_TOL;
}

/* KLU pivots afresh (allocates its numeric object). */
static int pivot(cdyn_sparse_dae *sd)
{
    if (sd->numeric) klu_free_numeric(&sd->numeric, &sd->klu);
    sd->numeric = klu_factor(sd->a_start, sd->a_row, sd->a_scaled, sd->symbolic, &sd->klu);
    sd->pivotings++;
    return sd->numeric != NULL;
}

/* The block (equilibrated) that KLU found singular, by the rank-revealing
 * QR: 1 when its rank r < q is decided cleanly (the kept triangle's
 * reciprocal condition above the rank tolerance; the applies then use its
 * outer inverse), 3 when it is not (no dependent row found, an
 * ill-conditioned triangle, or SuiteSparseQR failed), -1 out of memory. */
static int factor_deficient(cdyn_sparse_dae *sd, int *rank, double *rcond)
{
    int r = cdyn__rank_qr_factor(&sd->rank_qr, sd->a_scaled, CDYN__RANK_TOL, rcond);
    if (r == -1) return -1;
    if (r < 0) return 3; /* SuiteSparseQR failed: no decision */
    *rank = r;
    if (r == sd->q || !(*rcond > CDYN__RANK_TOL)) return 3;
    sd->deficient = 1;
    return 1;
}

/* Factor the evaluated block: the kept pivot order first (no allocation),
 * KLU's own pivoting when that order fails the rank screen, the
 * rank-revealing QR when that fails too (factor_deficient); 0 when KLU's
 * pivots pass, 1 rank deficient with a decided rank, 3 undecided, -1
 * failure. The verdict on a full-rank factorization at the solution is
 * full_rank's (cdyn_sparse_dae_consistent, rates). */
static int factor(void *ctx, int *rank, double *rcond)
{
    cdyn_sparse_dae *sd = ctx;
    equilibrate(sd);
    sd->deficient = 0;
    *rank = sd->q;
    int ok = sd->numeric
                 ? klu_refactor(sd->a_start, sd->a_row, sd->a_scaled, sd->symbolic, sd->numeric,
                                &sd->klu)
                 : pivot(sd);
    if (ok && passes_screen(sd, rcond)) return 0;
    if (!pivot(sd) && sd->klu.status == KLU_OUT_OF_MEMORY) return -1;
    if (passes_screen(sd, rcond)) return 0;
    return factor_deficient(sd, rank, rcond);
}

static int dependent(void *ctx, int *rows)
{
    return cdyn__rank_qr_dependent(&((cdyn_sparse_dae *)ctx)->rank_qr, rows);
}

/* The verdict at the solution (v_trial): the block evaluated and factored
 * there (again, when the Newton solve took no step or ended on a
 * rank-deficient step), then full_rank; a block that fails it takes the
 * rank-revealing QR, which passes it when it decides a rank < q cleanly
 * (the rates then use its outer inverse and must pass their certificate). */
static cdyn_status certify_rank(cdyn_sparse_dae *sd, const char *fn, double t)
{
    int rank, r = 0;
    double rcond;
    if (!cdyn__newton_solution_factored(sd->newton)) { /* no step, or a deficient one */
        int code = 0, failed = evaluate(sd, sd->x, &code);
        if (failed > 0)
            return cdyn__fail(sd->msg, CDYN_ERR_CALLBACK, "%s: Jacobian callback returned %d",
                              fn, code);
        if (failed < 0)
            return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: dF/dv is not finite at t = %g",
                              fn, t);
        r = factor(sd, &rank, &rcond);
    }
    if (r == 0 && full_rank(sd, &rcond)) return CDYN_OK;
    if (r == 0) r = factor_deficient(sd, &rank, &rcond); /* the pivots passed, condest not */
    if (r < 0)
        return cdyn__fail(sd->msg, CDYN_ERR_NOMEM, "%s: out of memory (KLU or SuiteSparseQR)",
                          fn);
    if (r == 1) return CDYN_OK;
    return cdyn__fail(sd->msg, CDYN_ERR_SINGULAR,
                      "%s: dF_A/dv_A at t = %g is singular to the rank tolerance and its rank "
                      "could not be decided (estimated reciprocal condition %.3g)",
                      fn, t, rcond);
}

/* x = A^-1 b = D_c (D_r A D_c)^-1 D_r b (the outer inverse of the
 * equilibrated block for a rank-deficient one: its minimum-norm solution
 * in the equilibrated unknowns); x and b may alias. */
static void apply(void *ctx, const double *b, double *x)
{
    cdyn_sparse_dae *sd = ctx;
    double *w = sd->scratch;
    for (int i = 0; i < sd->q; ++i) w[i] = sd->row_scale[i] * b[i];
    if (sd->deficient) cdyn__rank_qr_apply(&sd->rank_qr, w, w);
    else klu_solve(sd->symbolic, sd->numeric, sd->q, 1, w, &sd->klu);
    for (int j = 0; j < sd->q; ++j) x[j] = sd->col_scale[j] * w[j];
}

/* ---- create ---------------------------------------------------------------- */

void cdyn_sparse_dae_free(cdyn_sparse_dae *sd)
{
    if (!sd) return;
    if (sd->numeric) klu_free_numeric(&sd->numeric, &sd->klu);
    if (sd->symbolic) klu_free_symbolic(&sd->symbolic, &sd->klu);
    cdyn__rank_qr_free(&sd->rank_qr);
    cdyn_newton_free(sd->newton);
    void *arrays[] = {sd->mass,     sd->colptr,   sd->rowind,   sd->integrated, sd->algebraic,
                      sd->position, sd->a_start,  sd->a_row,    sd->a_src,      sd->c_start,
                      sd->c_row,    sd->c_src,    sd->a_value,  sd->a_scaled,   sd->row_scale,
                      sd->col_scale, sd->v_trial, sd->v_last,   sd->vdot_last,  sd->vdot_trial,
                      sd->values,
                      sd->f,        sd->f_shift,  sd->b,        sd->x,          sd->res,
                      sd->time_work,
                      sd->bound,    sd->scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(sd);
}

/* The pattern's checks: CDYN_OK or CDYN_ERR_ARG with a message in msg
 * (seen: n marks per row, reset after each column). */
static cdyn_status check_pattern(char *msg, int n, const int *colptr, const int *rowind,
                                 int *seen)
{
    const char *fn = "cdyn_sparse_dae_create";
    if (colptr[0] != 0)
        return cdyn__fail(msg, CDYN_ERR_ARG, "%s: colptr[0] = %d, not 0", fn, colptr[0]);
    for (int j = 0; j < n; ++j) {
        if (colptr[j + 1] < colptr[j])
            return cdyn__fail(msg, CDYN_ERR_ARG, "%s: colptr decreases at column %d", fn, j);
        for (int e = colptr[j]; e < colptr[j + 1]; ++e) {
            int i = rowind[e];
            if (i < 0 || i >= n)
                return cdyn__fail(msg, CDYN_ERR_ARG, "%s: row %d out of range in column %d", fn,
                                  i, j);
            if (seen[i] == j + 1)
                return cdyn__fail(msg, CDYN_ERR_ARG, "%s: row %d repeated in column %d", fn, i,
                                  j);
            seen[i] = j + 1;
        }
    }
    return CDYN_OK;
}

/* Split the pattern into the algebraic block and the coupling (sd's lists
 * and positions set); 0 when out of memory. */
static int split_pattern(cdyn_sparse_dae *sd)
{
    int n = sd->n, q = sd->q, nd = sd->nd, na = 0, nc = 0;
    for (int j = 0; j < n; ++j)
        for (int e = sd->colptr[j]; e < sd->colptr[j + 1]; ++e) {
            if (sd->mass[sd->rowind[e]] != 0.0) continue; /* a differential equation */
            if (sd->mass[j] == 0.0) ++na;
            else ++nc;
        }
    sd->a_start = malloc(sizeof(int) * ((size_t)q + 1));
    sd->a_row = malloc(sizeof(int) * (size_t)(na > 0 ? na : 1));
    sd->a_src = malloc(sizeof(int) * (size_t)(na > 0 ? na : 1));
    sd->c_start = malloc(sizeof(int) * ((size_t)nd + 1));
    sd->c_row = malloc(sizeof(int) * (size_t)(nc > 0 ? nc : 1));
    sd->c_src = malloc(sizeof(int) * (size_t)(nc > 0 ? nc : 1));
    sd->a_value = calloc((size_t)(na > 0 ? na : 1), sizeof(double));
    sd->a_scaled = calloc((size_t)(na > 0 ? na : 1), sizeof(double));
    if (!sd->a_start || !sd->a_row || !sd->a_src || !sd->c_start || !sd->c_row || !sd->c_src ||
        !sd->a_value || !sd->a_scaled)
        return 0;
    int ka = 0, kc = 0;
    sd->a_start[0] = sd->c_start[0] = 0;
    for (int j = 0; j < n; ++j) {
        int is_algebraic = sd->mass[j] == 0.0;
        for (int e = sd->colptr[j]; e < sd->colptr[j + 1]; ++e) {
            int i = sd->rowind[e];
            if (sd->mass[i] != 0.0) continue;
            if (is_algebraic) {
                sd->a_row[ka] = sd->position[i];
                sd->a_src[ka++] = e;
            } else {
                sd->c_row[kc] = sd->position[i];
                sd->c_src[kc++] = e;
            }
        }
        if (is_algebraic) sd->a_start[sd->position[j] + 1] = ka;
        else sd->c_start[sd->position[j] + 1] = kc;
    }
    /* the longest row of A: the rounding of a componentwise backward error
     * grows with the terms of a row, not with q */
    int *per_row = calloc((size_t)(q > 0 ? q : 1), sizeof(int));
    if (!per_row) return 0;
    for (int e = 0; e < ka; ++e) per_row[sd->a_row[e]]++;
    for (int i = 0; i < q; ++i) sd->longest_row = cdyn__max(sd->longest_row, per_row[i]);
    free(per_row);
    return 1;
}

cdyn_sparse_dae *cdyn_sparse_dae_create(int n, const double *mass, const int *colptr,
                                        const int *rowind, cdyn_status *status)
{
    cdyn_status dummy;
    if (!status) status = &dummy;
    *status = CDYN_ERR_ARG;
    if (n < 1 || n > INT_MAX / 8 || !mass || !colptr || (!rowind && colptr[n] > 0)) return NULL;
    for (int j = 0; j < n; ++j) {
        if (!isfinite(mass[j])) {
            *status = CDYN_ERR_NONFINITE;
            return NULL;
        }
        if (mass[j] < 0.0) return NULL;
    }
    cdyn_sparse_dae *sd = cdyn__object_alloc(sizeof *sd, offsetof(cdyn_sparse_dae, msg));
    *status = CDYN_ERR_NOMEM;
    if (!sd) return NULL;
    int nnz = colptr[n] > 0 ? colptr[n] : 0;
    size_t nn = (size_t)n;
    sd->n = n;
    sd->nnz = nnz;
    sd->colptr = malloc(sizeof(int) * (nn + 1));
    sd->rowind = malloc(sizeof(int) * (size_t)(nnz > 0 ? nnz : 1));
    sd->position = calloc(nn, sizeof(int)); /* the pattern check's marks first */
    sd->mass = malloc(sizeof(double) * nn);
    if (!sd->colptr || !sd->rowind || !sd->position || !sd->mass) goto nomem;
    *status = check_pattern(sd->msg, n, colptr, rowind, sd->position);
    if (*status != CDYN_OK) goto fail;
    memcpy(sd->colptr, colptr, sizeof(int) * (nn + 1));
    if (nnz > 0) memcpy(sd->rowind, rowind, sizeof(int) * (size_t)nnz);
    memcpy(sd->mass, mass, sizeof(double) * nn);
    for (int j = 0; j < n; ++j) sd->q += mass[j] == 0.0;
    sd->nd = n - sd->q;
    int q = sd->q, q1 = q > 0 ? q : 1;
    sd->integrated = malloc(sizeof(int) * (size_t)(sd->nd > 0 ? sd->nd : 1));
    sd->algebraic = malloc(sizeof(int) * (size_t)q1);
    sd->v_trial = calloc(nn, sizeof(double));
    sd->v_last = calloc(nn, sizeof(double));
    sd->vdot_last = calloc(nn, sizeof(double));
    sd->vdot_trial = calloc(nn, sizeof(double));
    sd->values = calloc((size_t)(nnz > 0 ? nnz : 1), sizeof(double));
    sd->f = calloc(nn, sizeof(double));
    sd->f_shift = calloc(nn, sizeof(double));
    sd->row_scale = calloc((size_t)q1, sizeof(double));
    sd->col_scale = calloc((size_t)q1, sizeof(double));
    sd->b = calloc((size_t)q1, sizeof(double));
    sd->x = calloc((size_t)q1, sizeof(double));
    sd->res = calloc((size_t)q1, sizeof(double));
    sd->bound = calloc((size_t)q1, sizeof(double));
    sd->scratch = calloc((size_t)q1, sizeof(double));
    sd->time_work = calloc(CDYN__TIME_WORK * (size_t)q1, sizeof(double));
    if (!sd->time_work ||
        !sd->integrated || !sd->algebraic || !sd->v_trial || !sd->v_last || !sd->vdot_last ||
        !sd->vdot_trial ||
        !sd->values || !sd->f || !sd->f_shift || !sd->row_scale || !sd->col_scale || !sd->b ||
        !sd->x || !sd->res || !sd->bound || !sd->scratch)
        goto nomem;
    for (int j = 0, ki = 0, ka = 0; j < n; ++j) {
        if (mass[j] == 0.0) {
            sd->position[j] = ka;
            sd->algebraic[ka++] = j;
        } else {
            sd->position[j] = ki;
            sd->integrated[ki++] = j;
        }
    }
    if (!split_pattern(sd)) goto nomem;
    if (q > 0) {
        klu_defaults(&sd->klu);
        sd->klu.scale = 0;            /* the block arrives equilibrated */
        sd->klu.halt_if_singular = 0; /* a zero pivot is reported, not fatal */
        sd->symbolic = klu_analyze(q, sd->a_start, sd->a_row, &sd->klu);
        if (!sd->symbolic) {
            if (sd->klu.status == KLU_OUT_OF_MEMORY) goto nomem;
            *status = cdyn__fail(sd->msg, CDYN_ERR_ARG, "cdyn_sparse_dae_create: KLU could "
                                                        "not analyse the algebraic block");
            goto fail;
        }
        if (sd->klu.structural_rank < q) {
            *status = cdyn__fail(sd->msg, CDYN_ERR_SINGULAR,
                                 "cdyn_sparse_dae_create: the algebraic block dF_A/dv_A is "
                                 "structurally singular (structural rank %d < %d): index 2 or "
                                 "higher (a junction without storage: cdyn_network)",
                                 sd->klu.structural_rank, q);
            goto fail;
        }
        if (!cdyn__rank_qr_init(&sd->rank_qr, q, sd->a_start, sd->a_row)) goto nomem;
        cdyn__newton_linear ops = {.ctx = sd,
                                   .evaluate = evaluate,
                                   .column = column,
                                   .factor = factor,
                                   .apply = apply,
                                   .dependent = dependent,
                                   .kept = kept};
        sd->newton = cdyn__newton_create_linear(q, &ops, status);
        if (!sd->newton) goto fail;
        cdyn__newton_set_owner(sd->newton, &sd->guard.in_callback);
        /* consecutive right-hand sides solve nearby systems: start each
         * from the committed factorization (newton_internal.h) */
        cdyn__newton_set_chord(sd->newton, 1);
    }
    *status = CDYN_OK;
    return sd;
nomem:
    *status = CDYN_ERR_NOMEM;
fail:
    cdyn_sparse_dae_free(sd);
    return NULL;
}

/* ---- settings and accessors --------------------------------------------------- */

static cdyn_status check_idle(cdyn_sparse_dae *sd, const char *fn)
{
    return cdyn__guard_busy(&sd->guard) ? cdyn__busy(sd->msg, fn) : CDYN_OK;
}

cdyn_status cdyn_sparse_dae_set_model(cdyn_sparse_dae *sd, cdyn_sparse_dae_force_fn force,
                                      cdyn_sparse_dae_jacobian_fn jacobian,
                                      cdyn_sparse_dae_time_fn time_derivative, void *user)
{
    if (!sd) return CDYN_ERR_ARG;
    const char *fn = "cdyn_sparse_dae_set_model";
    if (check_idle(sd, fn)) return CDYN_ERR_BUSY;
    if (!force || !jacobian)
        return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn,
                          !force ? "force" : "jacobian");
    sd->force = force;
    sd->jacobian = jacobian;
    sd->time_derivative = time_derivative;
    sd->user = user;
    return CDYN_OK;
}

cdyn_status cdyn_sparse_dae_set_tolerances(cdyn_sparse_dae *sd, double rtol, const double *atol)
{
    if (!sd) return CDYN_ERR_ARG;
    const char *fn = "cdyn_sparse_dae_set_tolerances";
    if (check_idle(sd, fn)) return CDYN_ERR_BUSY;
    cdyn_status st = cdyn__check_tolerances(sd->msg, fn, rtol, atol, sd->n);
    if (st != CDYN_OK) return st;
    if (sd->q == 0) return CDYN_OK;
    double *a = sd->scratch;
    for (int k = 0; atol && k < sd->q; ++k) a[k] = atol[sd->algebraic[k]];
    st = cdyn_newton_set_tolerances(sd->newton, rtol, atol ? a : NULL);
    if (st != CDYN_OK)
        return cdyn__fail(sd->msg, st, "%s: %s", fn, cdyn_newton_last_error(sd->newton));
    return CDYN_OK;
}

int cdyn_sparse_dae_size(const cdyn_sparse_dae *sd) { return sd ? sd->n : -1; }

int cdyn_sparse_dae_ode_size(const cdyn_sparse_dae *sd) { return sd ? sd->nd : -1; }

long cdyn_sparse_dae_pivotings(const cdyn_sparse_dae *sd) { return sd ? sd->pivotings : -1; }

long cdyn_sparse_dae_rank_factorizations(const cdyn_sparse_dae *sd)
{
    return sd ? sd->rank_qr.factorizations : -1;
}

const cdyn_newton *cdyn_sparse_dae_newton(const cdyn_sparse_dae *sd)
{
    return sd ? sd->newton : NULL;
}

int cdyn_sparse_dae_callback_code(const cdyn_sparse_dae *sd) { return sd ? sd->callback_code : 0; }

const char *cdyn_sparse_dae_last_error(const cdyn_sparse_dae *sd)
{
    return sd ? sd->msg : "cdyn_sparse_dae: NULL object";
}

int cdyn_sparse_dae_split_states(const cdyn_sparse_dae *sd, int *integrated, int *algebraic)
{
    if (!sd) return -1;
    if (integrated) memcpy(integrated, sd->integrated, sizeof(int) * (size_t)sd->nd);
    if (algebraic) memcpy(algebraic, sd->algebraic, sizeof(int) * (size_t)sd->q);
    return sd->nd;
}

cdyn_status cdyn_sparse_dae_last_state(const cdyn_sparse_dae *sd, double *v, double *vdot)
{
    if (!sd) return CDYN_ERR_ARG;
    const char *fn = "cdyn_sparse_dae_last_state";
    if (!sd->has_rates)
        return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: no successful cdyn_sparse_dae_rhs yet", fn);
    size_t bytes = sizeof(double) * (size_t)sd->n;
    if (v && vdot && cdyn__overlap(v, bytes, vdot, bytes))
        return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: v and vdot overlap", fn);
    if (v) memcpy(v, sd->v_last, bytes);
    if (vdot) memcpy(vdot, sd->vdot_last, bytes);
    return CDYN_OK;
}

/* ---- evaluations ------------------------------------------------------------ */

/* The checks every evaluation makes. */
static cdyn_status check_call(cdyn_sparse_dae *sd, const char *fn, double t, const double *y,
                              int len, const char *name)
{
    if (check_idle(sd, fn)) return CDYN_ERR_BUSY;
    if (!sd->force)
        return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: no model; call cdyn_sparse_dae_set_model",
                          fn);
    if (!y && len > 0) return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: %s is NULL", fn, name);
    if (!isfinite(t)) return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: t is not finite", fn);
    long bad = len > 0 ? cdyn__first_nonfinite(len, 1, y, len) : -1;
    if (bad >= 0)
        return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: %s[%ld] is not finite", fn, name, bad);
    return CDYN_OK;
}

/* Solve F_A = 0 for the algebraic states of v_trial (from x, their start):
 * v_trial holds the result (the best iterate on failure). */
static cdyn_status solve_algebraic(cdyn_sparse_dae *sd, const char *fn, double t)
{
    if (sd->q == 0) return CDYN_OK;
    double *x = sd->x;
    for (int k = 0; k < sd->q; ++k) x[k] = sd->v_trial[sd->algebraic[k]];
    sd->t_eval = t;
    cdyn_status st = cdyn_newton_solve(sd->newton, algebraic_residual, NULL, sd, x);
    for (int k = 0; k < sd->q; ++k) sd->v_trial[sd->algebraic[k]] = x[k];
    if (st != CDYN_OK)
        return cdyn__fail(sd->msg, st, "%s: algebraic states at t = %g: %s", fn, t,
                          cdyn_newton_last_error(sd->newton));
    return CDYN_OK;
}

cdyn_status cdyn_sparse_dae_consistent(cdyn_sparse_dae *sd, double t, double *v)
{
    if (!sd) return CDYN_ERR_ARG;
    const char *fn = "cdyn_sparse_dae_consistent";
    cdyn_status st = check_call(sd, fn, t, v, sd->n, "v");
    if (st != CDYN_OK) return st;
    memcpy(sd->v_trial, v, sizeof(double) * (size_t)sd->n);
    st = solve_algebraic(sd, fn, t);
    if (st == CDYN_OK && sd->q > 0) st = certify_rank(sd, fn, t);
    if (st == CDYN_OK || st == CDYN_ERR_NOCONV)
        for (int k = 0; k < sd->q; ++k) v[sd->algebraic[k]] = sd->v_trial[sd->algebraic[k]];
    if (st != CDYN_OK) return st;
    memcpy(sd->v_last, sd->v_trial, sizeof(double) * (size_t)sd->n);
    sd->has_last = 1;
    sd->kept = sd->q > 0; /* certify_rank left the block factored at v */
    return CDYN_OK;
}

/* F_A at (t + tau, v_trial) for dF_A/dt's differences. */
typedef struct {
    cdyn_sparse_dae *sd;
    double t;
} force_in_time;

static cdyn_status algebraic_force_offset(void *ctx, double tau, double *out)
{
    const force_in_time *at = ctx;
    cdyn_sparse_dae *sd = at->sd;
    if (call_force(sd, at->t + tau, sd->f_shift) != 0) return CDYN_ERR_CALLBACK;
    for (int k = 0; k < sd->q; ++k) out[k] = sd->f_shift[sd->algebraic[k]];
    return CDYN_OK;
}

/* The size of the algebraic equations' terms at v_trial into terms (q):
 * sum_j |dF_Aj v_j| over their row of dF/dv (values, at v_trial: the
 * block and the coupling). Their values are residuals, about 0, while
 * their rounding is that of these terms (THEORY T3.3). */
static void algebraic_terms(const cdyn_sparse_dae *sd, double *terms)
{
    memset(terms, 0, sizeof(double) * (size_t)sd->q);
    for (int j = 0; j < sd->q; ++j) {
        double size = fabs(sd->v_trial[sd->algebraic[j]]);
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            terms[sd->a_row[e]] += fabs(sd->values[sd->a_src[e]]) * size;
    }
    for (int l = 0; l < sd->nd; ++l) {
        double size = fabs(sd->v_trial[sd->integrated[l]]);
        for (int e = sd->c_start[l]; e < sd->c_start[l + 1]; ++e)
            terms[sd->c_row[e]] += fabs(sd->values[sd->c_src[e]]) * size;
    }
}

/* dF_A/dt at v_trial into b: the callback, or differences stepped
 * CDYN__TIME_STEP seconds and a quarter of it whatever t, checked against
 * each other (as cdyn_dae's, dae.h: the size of t says nothing of the time
 * scale of the inputs; steps of 6e-6 |t|, before, crossed whole periods
 * of a 50 Hz pump late in a run, and one difference alone was 2.4e-4 off
 * at 1 kHz), against the rounding of the equations' terms (their values
 * are residuals: a reservoir of 1e7 Pa drawn down by 1e-3 Pa/s had its
 * orifice's rate come back 0, with CDYN_OK). */
static cdyn_status time_rates(cdyn_sparse_dae *sd, const char *fn, double t)
{
    if (sd->time_derivative) {
        sd->guard.in_callback++;
        int code = sd->time_derivative(t, sd->v_trial, sd->f_shift, sd->user);
        sd->guard.in_callback--;
        if (code != 0) {
            sd->callback_code = code;
            return cdyn__fail(sd->msg, CDYN_ERR_CALLBACK, "%s: dF/dt callback returned %d", fn,
                              code);
        }
        for (int k = 0; k < sd->q; ++k) sd->b[k] = sd->f_shift[sd->algebraic[k]];
    } else {
        size_t q1 = sd->q > 0 ? (size_t)sd->q : 1;
        double *w = sd->time_work, best = 0.0;
        cdyn__tableau_work work = cdyn__tableau_layout(w, q1, CDYN__TIME_LEVELS);
        force_in_time at = {sd, t};
        double *spare = w + (size_t)CDYN__TABLEAU_WORK(CDYN__TIME_LEVELS) * q1;
        double *terms = w + (size_t)CDYN__TIME_TERMS * q1;
        algebraic_terms(sd, terms);
        cdyn_status st = cdyn__time_derivative(sd->q, (int)q1, t, CDYN__TIME_STEP,
                                               CDYN__TIME_LEVELS, terms, algebraic_force_offset,
                                               &at, &work, spare, sd->b, &best);
        if (st != CDYN_OK)
            return cdyn__fail(sd->msg, CDYN_ERR_CALLBACK, "%s: force callback returned %d", fn,
                              sd->callback_code);
        if (!isfinite(best))
            return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE,
                              "%s: the difference quotients of dF/dt are not finite at t = %g",
                              fn, t);
    }
    if (cdyn__first_nonfinite(sd->q, 1, sd->b, sd->q) >= 0)
        return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: dF/dt is not finite at t = %g", fn, t);
    return CDYN_OK;
}

/* The backward error of A x = rhs (res = rhs - A x): componentwise, with a
 * floor that lets an unknown carry the rounding of its neighbours (the
 * unknowns that share a non-zero row entry with it), in the units u of the
 * equilibrated block (col_scale of the factorization at this state):
 * |x_j| + u_j eps max { |x_k| / u_k : A_ik != 0 != A_ij }. A closed valve's
 * flow rate, the only term of its row, gets the rounding of the flows at
 * its junctions, which the elimination puts into it; a decoupled part of
 * the network with large rates loosens nothing else (a floor over every
 * unknown, as kkt.h's, would let it hide inconsistent rates elsewhere). */
static double backward_error(cdyn_sparse_dae *sd, const double *x, const double *rhs)
{
    int q = sd->q;
    const double *unit = sd->col_scale;
    double *row_size = sd->scratch; /* max |x_k| / u_k over each row's non-zeros */
    memset(row_size, 0, sizeof(double) * (size_t)q);
    for (int j = 0; j < q; ++j) {
        double size = fabs(x[j]) / unit[j];
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            if (sd->a_value[e] != 0.0 && size > row_size[sd->a_row[e]])
                row_size[sd->a_row[e]] = size;
    }
    for (int i = 0; i < q; ++i) {
        sd->res[i] = rhs[i];
        sd->bound[i] = fabs(rhs[i]);
    }
    for (int j = 0; j < q; ++j) {
        double neighbours = 0.0;
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e)
            if (sd->a_value[e] != 0.0) neighbours = fmax(neighbours, row_size[sd->a_row[e]]);
        double floor = fabs(x[j]) + unit[j] * DBL_EPSILON * neighbours;
        for (int e = sd->a_start[j]; e < sd->a_start[j + 1]; ++e) {
            int i = sd->a_row[e];
            sd->res[i] -= sd->a_value[e] * x[j];
            sd->bound[i] += fabs(sd->a_value[e]) * floor;
        }
    }
    double worst = 0.0;
    for (int i = 0; i < q; ++i) {
        double w = sd->bound[i] > 0.0 ? fabs(sd->res[i]) / sd->bound[i]
                                      : (sd->res[i] == 0.0 ? 0.0 : INFINITY);
        worst = w > worst || isnan(w) ? w : worst;
    }
    return worst;
}

/* v' (n, into vdot) at the consistent v_trial: v_D' = F_D / m_D, then
 * A v_A' = -(C v_D' + dF_A/dt), certified with up to two refinements. The
 * Newton solve left A evaluated and factored at v_trial. */
static cdyn_status rates(cdyn_sparse_dae *sd, const char *fn, double t, double *vdot)
{
    int code = call_force(sd, t, sd->f);
    if (code != 0)
        return cdyn__fail(sd->msg, CDYN_ERR_CALLBACK, "%s: force callback returned %d", fn, code);
    long bad = cdyn__first_nonfinite(sd->n, 1, sd->f, sd->n);
    if (bad >= 0)
        return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: F[%ld] is not finite at t = %g", fn,
                          bad, t);
    for (int l = 0; l < sd->nd; ++l) {
        int j = sd->integrated[l];
        vdot[j] = sd->f[j] / sd->mass[j];
    }
    if (cdyn__first_nonfinite(sd->n, 1, vdot, sd->n) >= 0) /* F / m beyond the range */
        return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: v' overflowed at t = %g", fn, t);
    if (sd->q == 0) return CDYN_OK;
    cdyn_status st = certify_rank(sd, fn, t);
    if (st != CDYN_OK) return st;
    st = time_rates(sd, fn, t);
    if (st != CDYN_OK) return st;
    double *rhs = sd->b, *x = sd->x; /* rhs = -(dF_A/dt + C v_D') */
    for (int l = 0; l < sd->nd; ++l) {
        double vd = vdot[sd->integrated[l]];
        for (int e = sd->c_start[l]; e < sd->c_start[l + 1]; ++e)
            rhs[sd->c_row[e]] += sd->values[sd->c_src[e]] * vd;
    }
    for (int k = 0; k < sd->q; ++k) rhs[k] = -rhs[k];
    apply(sd, rhs, x);
    /* kkt.h's tolerance 8 (r + 2) eps with r the longest row */
    double tolerance = cdyn__kkt_backward_tolerance(sd->longest_row, 0);
    double omega = backward_error(sd, x, rhs);
    for (int step = 0; step < 2 && omega > tolerance && isfinite(omega); ++step) {
        apply(sd, sd->res, sd->res);
        for (int k = 0; k < sd->q; ++k) x[k] += sd->res[k];
        omega = backward_error(sd, x, rhs);
    }
    if (cdyn__first_nonfinite(sd->q, 1, x, sd->q) >= 0) /* v_D' was checked above */
        return cdyn__fail(sd->msg, CDYN_ERR_NONFINITE, "%s: v_A' overflowed at t = %g", fn, t);
    if (!(omega <= tolerance))
        return cdyn__fail(sd->msg, CDYN_ERR_SINGULAR,
                          "%s: the algebraic rates at t = %g are not determined to working "
                          "accuracy (componentwise backward error %.2e > %.2e)",
                          fn, t, omega, tolerance);
    for (int k = 0; k < sd->q; ++k) vdot[sd->algebraic[k]] = x[k];
    return CDYN_OK;
}

cdyn_status cdyn_sparse_dae_rhs(cdyn_sparse_dae *sd, double t, const double *y, double *ydot)
{
    if (!sd) return CDYN_ERR_ARG;
    const char *fn = "cdyn_sparse_dae_rhs";
    cdyn_status st = check_call(sd, fn, t, y, sd->nd, "y");
    if (st != CDYN_OK) return st;
    if (!ydot && sd->nd > 0) return cdyn__fail(sd->msg, CDYN_ERR_ARG, "%s: ydot is NULL", fn);
    memcpy(sd->v_trial, sd->v_last, sizeof(double) * (size_t)sd->n);
    for (int l = 0; l < sd->nd; ++l) sd->v_trial[sd->integrated[l]] = y[l];
    st = solve_algebraic(sd, fn, t);
    if (st == CDYN_OK) st = rates(sd, fn, t, sd->vdot_trial);
    if (st != CDYN_OK) return st;
    /* commit; ydot last (it may be y) */
    memcpy(sd->v_last, sd->v_trial, sizeof(double) * (size_t)sd->n);
    memcpy(sd->vdot_last, sd->vdot_trial, sizeof(double) * (size_t)sd->n);
    sd->has_last = sd->has_rates = 1;
    sd->kept = sd->q > 0; /* the Newton solve left the block factored at v */
    for (int l = 0; l < sd->nd; ++l) ydot[l] = sd->vdot_last[sd->integrated[l]];
    return CDYN_OK;
}
