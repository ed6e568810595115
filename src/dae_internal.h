/* The DAE object shared by dae.c (mass, hidden constraints, index) and
 * dae_rhs.c (split, consistent values, minimum-order right-hand side). */
#ifndef CDYN_DAE_INTERNAL_H
#define CDYN_DAE_INTERNAL_H

#include "cdyn/dae.h"
#include "cdyn/nullspace.h"
#include "internal.h"

struct cdyn_dae {
    int n;
    int r;                  /* rank of M, -1 before set_mass */
    int q;                  /* n - r algebraic states / hidden constraints */
    double rank_tol, fd_step;
    int max_index;
    cdyn_dae_force_fn force;
    cdyn_dae_jacobian_fn jacobian;
    cdyn_dae_time_fn time_derivative;
    void *user;
    int callback_code;

    /* T3.1: the mass matrix and its bases */
    cdyn_dae_mass_fn mass_fn;   /* NULL: constant M */
    void *mass_user;
    double *mass;           /* n x n, M at the last factored time */
    double *mass_saved;     /* n x n */
    double *beta_ref;       /* n x q, basis the next beta(t) is aligned to */
    double *beta_plus, *beta_minus, *beta_dot; /* n x q, for beta'(t) */
    double *align, *align_u, *align_vt, *align_sv; /* q x q, q x q, q x q, q */
    double *beta;           /* n x q, left null space */
    int beta_is_selection;  /* beta = signed columns of I (cdyn__dae_beta_t) */
    int *beta_rows;         /* q: the row of each column's +-1 */
    double *beta_signs;     /* q */
    double *range;          /* n x r, P */
    double *range_t_mass;   /* r x n, P^T M */
    int *massless;          /* n flags: column j of M is zero */

    /* T3.2: result of the last analysis */
    int analyzed;
    int levels;             /* augmentation levels performed */
    int level_count[CDYN_DAE_MAX_INDEX + 1];
    int *equation_level;    /* n */

    /* T3.3: split, Newton, warm start */
    cdyn_nullspace *split_ns;   /* n states, q constraints (0 < q < n) */
    cdyn_newton *newton;        /* q x q (q > 0) */
    int split_done;
    int *integrated;        /* r */
    int *algebraic;         /* q */
    double *v_last;         /* n, last consistent state (warm start) */
    double *vdot_last;      /* n */
    int state_valid;
    long svd_rate_solves;
    double t_eval;          /* time of the Newton residual evaluations */
    double *v_trial;        /* n, state assembled for the Newton callbacks */

    /* workspace (n x n unless noted) */
    double *force_val;      /* n */
    double *force_shift;    /* n */
    double *force_dt;       /* n */
    double *force_jac;      /* n x n */
    double *aug, *aug_rhs, *origin, *svd_copy, *u, *vt, *prod;
    double *sv;             /* n */
    double *work;
    int lwork;
    double *constraint_jac; /* q x n, dG0/dv */
    double *ga;             /* q x q */
    double *coef;           /* q x r, A = -G_a^# G_i */
    double *offset;         /* q, b = -G_a^# G_t */
    double *vec_q, *vec_q2; /* q */
    double *mass_alpha;     /* n x r */
    double *reduced;        /* r x r */
    double *reduced_rhs;    /* r */
    int *ipiv;              /* r */

    char msg[CDYN__MSG_LEN];
};

/* F(v, t) into out; CDYN_ERR_CALLBACK / CDYN_ERR_NONFINITE with a message. */
cdyn_status cdyn__dae_force(cdyn_dae *dae, const char *fn, double t, const double *v,
                            double *out);

/* dF/dv at (t, v) into dae->force_jac (callback or forward differences
 * around F(v, t), which must be in dae->force_val). v is restored. */
cdyn_status cdyn__dae_force_jacobian(cdyn_dae *dae, const char *fn, double t, double *v);

/* dF/dt at (t, v) into dae->force_dt (callback or forward difference around
 * dae->force_val). */
cdyn_status cdyn__dae_force_time(cdyn_dae *dae, const char *fn, double t, const double *v);

/* SVD of dae->mass into dae->u, dae->sv, dae->vt; returns the rank. */
int cdyn__dae_mass_svd(cdyn_dae *dae);

/* With M(t) by callback: factor M(t) and set beta (aligned to beta_ref),
 * P and P^T M for time t. Nothing to do for a constant M. */
cdyn_status cdyn__dae_mass_at(cdyn_dae *dae, const char *fn, double t);

/* Record whether beta is a signed selection of rows (every column one
 * entry +-1, the rest exactly 0: a diagonal or block-diagonal M with
 * massless states); call whenever beta changes. */
void cdyn__dae_detect_selection(cdyn_dae *dae);

/* out = alpha beta^T X (q x cols, ld ldo) for X (n x cols, ld ldx): a row
 * selection when beta is one, else a product (q n cols flops). */
void cdyn__dae_beta_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                      double *out, int ldo);

/* With M(t): beta'(t) into dae->beta_dot by central differences (M, beta,
 * P at t are kept). */
cdyn_status cdyn__dae_beta_rate(cdyn_dae *dae, const char *fn, double t);

/* Factor dae->mass (already filled) at set-up: rank, bases, workspace. */
cdyn_status cdyn__dae_install_mass(cdyn_dae *dae, const char *fn);

/* Argument checks shared by the per-point calls. */
cdyn_status cdyn__dae_check_point(cdyn_dae *dae, const char *fn, double t, const double *v);

#endif
