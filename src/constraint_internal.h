/* The constraint kernel shared by constraint.c (object, settings, the
 * loaded instant, the rank of Phi_q and the diagnosis) and
 * constraint_solve.c (the formulations of THEORY T4.3-T4.8). */
#ifndef CDYN_CONSTRAINT_INTERNAL_H
#define CDYN_CONSTRAINT_INTERNAL_H

#include "cdyn/constraint.h"
#include "internal.h"
#include "rank.h"

/* What cdyn__constraint_solve_again() can solve with the kept factors. */
enum { REUSE_BORDERED = 1, REUSE_PENALTY = 2 };

/* How the prepared (equilibrated) system is solved for the multipliers. */
enum cdyn__kkt_path {
    CDYN__PATH_SCHUR,     /* Cholesky of A = X X^T (well conditioned) */
    CDYN__PATH_QR,        /* pivoted QR of X^T, A never formed */
    CDYN__PATH_PRODUCT,   /* reactions: LU of T = X Z^T */
    CDYN__PATH_REACTIONS, /* reactions: QR of X^T, then LU of Q^T-projected Z */
    CDYN__PATH_DECIDED    /* Lagrange at small sizes: the decision's QR (constraint_decided.c) */
};

struct cdyn_constraint {
    int n, m, m1, k;        /* m1 = max(m, 1), k = min(n, m) */
    double rank_tol;
    double *kd, *kp;        /* m x m gains (T4.5, T4.6) */
    int gains_full;         /* from cdyn_constraint_set_gains; else kd, kp are diagonal */
    int stabilized;         /* some gain is not 0: s depends on Phi and Phi' */
    double *alpha;          /* m, penalty (T4.8): the caller's, or the default's of the last solve */
    int alpha_given;        /* cdyn_constraint_set_penalty with alpha; else the default */
    int *weight_exp;        /* m: per row, the largest E (w_i ~ 2^E) of the default alpha so far */
    int *mass_exp;          /* m: per row, the smallest E (h_i ~ 2^E, the mass it moves while
                               the others hold) of the default alpha so far; INT_MAX: none */
    int mass_history;       /* effective masses measured since create or reset_scales */
    int penalty_refined;    /* the last penalty solve's result is refined (default alpha) */
    int penalty_held;       /* the last default penalty solve found a row's effective mass past
                               its history (near a singular pose; constraint_solve.c) */
    cdyn__guard guard;

    /* the loaded instant, in the caller's units */
    int loaded;
    double *mass;           /* n x n */
    double *force;          /* n, Q */
    double *jac;            /* m x n (ld m1), Phi_q */
    double *mass_next, *jac_next; /* load()'s staging copies, swapped in on success */
    double *accel_rhs;      /* m, s = xi - K_D Phi' - K_P Phi */
    double *phi, *phi_dot, *xi; /* m each: the loaded Phi, Phi', xi (0 for NULL), so that
                                 * gains set after the load apply to it */
    int terms_known;        /* the load gave Phi and Phi' (or NULL meaning 0) */
    int gains_pending;      /* gains set since the load: s is formed again before use */

    /* the rank of Phi_q by the rank policy, decided once per load */
    int decided;
    cdyn__rank decision;
    cdyn__rank_ref ref;     /* m x n: largest |entries| of Phi_q so far (rank.h) */
    int *row_order;         /* m: rows ranked by the decision, independent first */
    int *redundant_flag;    /* m: 1 for the rows past the rank */
    cdyn__rank_ws ws;

    /* last result and the monitor */
    int has_result;
    double *gen_force;      /* n */
    double *multipliers;    /* m */
    double margin;          /* ratio of the decision at the last success, -1 if none */

    /* the last rank-loss report, kept with msg until the next one */
    int rank, n_redundant;
    double sigma_min;
    int *redundant;         /* m */

    /* the prepared system, on the active rows of Phi_q (all of them, or the
     * independent ones for the pseudo-inverse): KKT equilibration and
     * factorizations */
    int reusable;           /* what the factors of the last success solve again
                             * (cdyn__constraint_solve_again): 0, REUSE_* */
    int active;             /* number of active rows */
    int *active_rows;       /* m: their indices, ascending */
    enum cdyn__kkt_path path;
    int augmented;          /* M + Phi^T D Phi used in place of M */
    double *aug_weight;     /* m: D, powers of two */
    double *mult_unit;      /* m: the multipliers' units in the equilibrated frame */
    double *scale_q;        /* n: column (and row) factors of the coordinates */
    double *scale_g;        /* m: factors of the constraint rows */
    double *scale_f;        /* m: factors of the reactions (columns of C^T) */
    double *chol;           /* n x n: factor of the scaled (augmented) mass */
    double *jac_scaled;     /* m x n (ld m1): scaled Phi_q */
    double *coef_scaled;    /* m x n (ld m1): scaled C (reactions) */
    double *x_rows;         /* m x n (ld m1): X = Phi~ L^{-T} */
    double *z_rows;         /* m x n (ld m1): Z = C~ L^{-T} */
    double *small;          /* m x m: factor of A or T */
    double *qr;             /* max(n, m)^2 */
    double *tau;            /* max(n, m) */
    int *jpvt;              /* max(n, m) */
    double *sv;             /* min(n, m) */
    int *ipiv;              /* m */
    int *iwork;             /* max(n, m) */
    /* vectors */
    double *top, *w, *q_scaled, *q_result, *residual_top, *delta_q; /* n */
    double *pivot_inv;      /* n: the decided path's 1 / R_kk (m), 1 / L_aa (n - m) */
    double *bottom, *r, *mult_scaled, *mult_result, *residual_bottom, *delta_mult, *vec_m; /* m */
    double *kkt_work;       /* n + m */
    double *work;
    int lwork;
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* CDYN_ERR_BUSY when c is used from inside an owner's callback. */
cdyn_status cdyn__constraint_check_idle(cdyn_constraint *c, const char *fn);

/* Make c refuse calls whenever *owner_in_callback > 0 (the kernel of a
 * cdyn_mbs). */
void cdyn__constraint_set_owner(cdyn_constraint *c, const int *owner_in_callback);

/* Does s (T4.6) depend on Phi and Phi', i.e. is some gain not 0? When it
 * does not (the default), a load may pass NULL for both. */
int cdyn__constraint_stabilized(const cdyn_constraint *c);

/* cdyn_constraint_load for an owner that has already checked every input
 * for NaN/Inf (the callbacks' results of cdyn_mbs_rhs): M (n x n, ld n) and
 * Phi_q (m x n, ld m) contiguous, M, Q, Phi_q and xi not NULL, Phi and
 * Phi_dot NULL only when !cdyn__constraint_stabilized(c). The same
 * copies, s and overflow check, without the second scan. */
cdyn_status cdyn__constraint_load_finite(cdyn_constraint *c, const double *M, const double *Q,
                                         const double *Phi_q, const double *Phi,
                                         const double *Phi_dot, const double *xi);

/* The rank of Phi_q for the loaded instant (rank policy, cached per load).
 * Returns the rank, -1 if LAPACK failed. */
int cdyn__constraint_decide_rank(cdyn_constraint *c);

/* Record a rank loss of Phi_q (rank, smallest singular value in the
 * caller's units, redundant rows) with its message; returns status. */
cdyn_status cdyn__constraint_report_rank_loss(cdyn_constraint *c, const char *fn,
                                              cdyn_status status);

/* The Lagrange form at full rank through the rank decision's QR
 * (constraint_decided.c), for 1 <= m <= n <= CDYN__SMALL: 1 when its result
 * (q'' in q_result, the multipliers in mult_result) is certified, else 0
 * and the general path must solve. Uses the prepared-system workspace. */
int cdyn__constraint_lagrange_decided(cdyn_constraint *c);

/* The decided path's solve for right-hand sides (f n, s m, the caller's
 * units) with its prepared factors, refined up to two steps on the
 * caller's system: 1 when the result (into q n and lambda m) is
 * certified, else 0. */
int cdyn__constraint_decided_solve(cdyn_constraint *c, const double *f, const double *s,
                                   double *q, double *lambda);

/* The last successful formulation's system of the loaded instant for
 * other right-hand sides (f n, s m, the caller's units), with its kept
 * factors, refined and certified as that call's result was: the bordered
 * [M Phi_q^T; Phi_q 0] [q; lambda] = [f; s] after
 * cdyn_constraint_lagrange() (or cdyn_constraint_pseudoinverse() at full
 * rank), or the penalty form's (M + Phi_q^T alpha Phi_q) q =
 * f + Phi_q^T alpha s, lambda = alpha (Phi_q q - s) after
 * cdyn_constraint_penalty(). 1 with the result in q (n) and lambda (m), 0
 * (q, lambda untouched) when it is not certified or no such factors are
 * kept (a load, a setting that changes them, or another formulation
 * since). Leaves the last result (cdyn_constraint_force()) as it was. No
 * allocation. */
int cdyn__constraint_solve_again(cdyn_constraint *c, const double *f, const double *s, double *q,
                                 double *lambda);

/* s = xi - K_D Phi' - K_P Phi (m) with the gains of c (T4.6); any input
 * may be NULL (zero). s must not alias the inputs. */
void cdyn__constraint_accel_rhs(const cdyn_constraint *c, const double *Phi, const double *Phi_dot,
                                const double *xi, double *s);

/* s of the loaded instant formed again with the gains set since its load
 * (call when c->gains_pending): CDYN_ERR_NONFINITE when it overflows,
 * CDYN_ERR_ARG when the load left Phi and Phi' out (cdyn_mbs_rhs without
 * gains); the instant is kept, and the next call tries again. */
cdyn_status cdyn__constraint_restabilize(cdyn_constraint *c, const char *fn);

/* Record a failure that is not about the rank: the rank facts are cleared
 * so that they never describe another call than last_error does. */
void cdyn__constraint_clear_facts(cdyn_constraint *c);

#endif
