/* The DAE object shared by dae.c (mass, hidden constraints, index),
 * dae_mass.c (M(t)) and dae_rhs.c (split, consistent values, minimum-order
 * right-hand side). */
#ifndef CDYN_DAE_INTERNAL_H
#define CDYN_DAE_INTERNAL_H

#include "cdyn/dae.h"
#include "cdyn/nullspace.h"
#include "internal.h"
#include "rank.h"

#include <float.h>
#include <math.h>

/* Everything sized by the rank r of M (q = n - r algebraic states), made
 * by set_mass as one unit: a set_mass that fails leaves the previous unit,
 * and with it the previous mass, bases and split, in place. */
typedef struct cdyn__dae_part {
    int r, q;
    double *mass;           /* n x n, M at the last factored time */
    double *mass_saved;     /* n x n */
    double *beta;           /* n x q, orthonormal left null space of M (T3.1) */
    int beta_is_selection;  /* beta = signed columns of I (cdyn__dae_beta_t) */
    int *beta_rows;         /* q: the row of each column's +-1 */
    int *beta_unit;         /* q: 1 where column k of beta is a signed unit vector */
    double *beta_error;     /* n x q: the rounding of beta_ik, in eps (0: exact) */
    double *g0_noise;       /* q: the rounding of G0 at the last algebraic residual */
    double *beta_signs;     /* q */
    int *mass_rows;         /* n: the rows of M with a non-zero, n_mass_rows of them */
    int n_mass_rows;
    int range_is_selection; /* P likewise (cdyn__dae_range_t) */
    int *range_rows;        /* r */
    double *range_signs;    /* r */
    double *beta_ref;       /* n x q, basis the next beta(t) is aligned to */
    double *beta_dot;       /* n x q: beta'(t) */
    double *beta_time_work; /* CDYN__TIME_WORK n x q with M(t), for beta'(t) */
    double *align, *align_u, *align_vt, *align_sv; /* q x q, q x q, q x q, q */
    double *range;          /* n x r, P: orthonormal basis of the range of M */
    double *range_t_mass;   /* r x n, P^T M */
    int *massless;          /* n flags: column j of M is exactly zero */
    int *mass_start;        /* n + 1: column j's non-zero entries of the installed M */
    int *mass_row;          /* n x n at most: their rows (M v' of the residual form, for a
                             * constant M; with M(t) it describes M(t0) only) */
    double *constraint_jac; /* q x n, dG0/dv */
    double *ga;             /* q x q */
    double *coef;           /* q x r, A = -G_a^# G_i (when coupling_valid) */
    double *vec_q, *vec_q2; /* q */
    double *reduced;        /* r x r */
    double *reduced_rhs;    /* r */
    int *ipiv;              /* r */
    double *rate_of_multiplier; /* r x q, (P^T M_x)^-1 P^T dF/dz (index-2 form) */
    double *range_t_fz;     /* r x q, P^T dF/dz (index-2 form) */
    /* the multipliers' Jacobian H_z (q x q) of the last multiplier_jacobian
     * with the G_x (q x r, B's column order) it was formed from, and room
     * for the next P^T dF/dz (r x q): an unchanged P^T F_z and G_x (F affine
     * in the pressures, affine balances) give the same H_z and X_z */
    double *hz_last, *gx_last, *fz_next;
    int hz_valid;
    /* mixed index 1/2 (dae_index2.c): column l (n) is the direction the
     * l-th multiplier moves the state in, 1 at its own entry and the
     * shifts of the massless dependent states w that keep G0 (all zero
     * elsewhere); and the rates w' the multipliers' solve finds (q) */
    double *multiplier_dir;
    double *rate_w;
    double *multiplier_step; /* q: scratch of set_multipliers */
    double *g0_bound;        /* q: what G0 may be once the multipliers moved */
    double *w_start;         /* q: the states w before they did */
    double *multiplier_start; /* q: the multipliers' warm start, kept for a fallback */
    /* the last index-2 evaluation ended with [H_z, G_w] factored (newton_z)
     * at its solution, from part.hz_last (multipliers_by_refinement) */
    int hz_factored;
    /* the dependent states' solve of the index-2 form with dF/dv
     * (cdyn__dae_index2_dependent): g0_factored, an evaluation since the
     * split left dae->newton factored (a chord step may start from it);
     * g0_at (q), the point where constraint_data left F (force_val) and
     * G_v, which the Newton's callbacks take instead of calling the model
     * while g0_at_hand; data_at_solution, this evaluation's constraint
     * data are at the accepted solution (the rates need not redo them) */
    int g0_factored, g0_at_hand, data_at_solution;
    double *g0_at;
    /* the rates' certificate's view of P^T M (cdyn__dae_rates_backward_error):
     * its non-zeros by columns, 1 / its row maxima and each column's largest
     * |entry| / row maximum; built once for a constant M (top_valid) */
    int *top_start, *top_row;  /* n + 1, r x n */
    double *top_value;         /* r x n */
    double *top_inverse, *top_column; /* r, n */
    int top_valid;
    /* the same certificate's copy of G_v's non-zeros by columns and 1 / its
     * row maxima, rebuilt when G_v is not bit for bit the G_v they were
     * made of (bottom_source; affine balances keep it) */
    int *bottom_start, *bottom_row; /* n + 1, q x n */
    double *bottom_value;           /* q x n */
    double *bottom_inverse;         /* q */
    double *bottom_source;          /* q x n */
    int bottom_valid;
    cdyn_nullspace *split_ns; /* n states, q constraints (0 < q < n) */
    cdyn_nullspace *split_probe; /* the same: the split a pivoted QR would choose now */
    cdyn__rank_ref split_ref;    /* q x n: dG0/dv's history since set_mass_fn, shared by
                                  * both with M(t) (dae_rhs.c, prefer_massless_now) */
} cdyn__dae_part;

struct cdyn_dae {
    int n;
    int r;                  /* rank of M, -1 before set_mass */
    int q;                  /* n - r algebraic states / hidden constraints */
    double rank_tol, fd_step;
    int max_index;
    double rtol;            /* accuracy of the algebraic states (cdyn_dae_set_tolerances) */
    double *atol;           /* n, valid when has_atol */
    int has_tolerances, has_atol;
    cdyn_dae_force_fn force;
    cdyn_dae_jacobian_fn jacobian;
    cdyn_dae_time_fn time_derivative;
    void *user;
    int callback_code;
    cdyn__guard guard;

    /* T3.1: the mass matrix (constant, or M(t) by callback) */
    cdyn_dae_mass_fn mass_fn;   /* NULL: constant M */
    void *mass_user;
    cdyn__dae_part part;
    double *row_scale, *col_scale; /* n: equilibration of M (rank policy) */

    /* T3.2: result of the last analysis */
    int analyzed;
    int levels;             /* augmentation levels performed */
    int level_count[CDYN_DAE_MAX_INDEX + 1];
    int *equation_level;    /* n */
    double *equation_size;  /* n: largest |entry| of each row of [M, dF/dv] */

    /* T3.3: split, Newton, warm start */
    cdyn_newton *newton;    /* q x q; created by the first singular set_mass, kept */
    int split_done;
    int *integrated;        /* r */
    int *algebraic;         /* q */
    int index2;             /* the split is the index-2 form (dae_index2.c) */
    int hold_chord;         /* evaluations inside a Jacobian leave the chord starts alone */
    int reduced_factored;   /* part.reduced holds the LU of a matrix fixed by the split and a
                             * constant M (P^T M_i, decoupled; P^T M_x, index-2 form) */
    int reduced_diagonal;   /* that LU has L = I and a diagonal U (a diagonal M: the
                             * hydraulic inertances), and its solves swap rows and divide */
    int ny;                 /* length of y: r (index 1) or r - q (index 2) */
    int *multiplier;        /* nz (index-2 form): the massless states G0 does not see */
    int nz;                 /* number of multipliers: q in a pure index-2 network, fewer when
                             * q - nz massless states w are solved from G0 (mixed index 1/2) */
    cdyn_newton *newton_z;  /* q x q: the multipliers in the index-2 form */
    double *v_last;         /* n, last consistent state (warm start) */
    double *vdot_last;      /* n */
    double *magnitude;      /* n: largest |v_j| of any consistent state (difference steps) */
    double *resolution;     /* n: a solved state's tolerance in its last solve (0: integrated) */
    double *held_magnitudes; /* 2n: the Newton solvers' learned magnitudes at a call's start */
    cdyn_dae_counters counters; /* since create or the last reset */
    int state_valid;
    int decoupled;          /* this evaluation: P^T M_a = 0, the rates need no A */
    int coupling_valid;     /* this evaluation: part.coef holds A */
    long svd_rate_solves;
    /* the split's watch (dae_rhs.c, cdyn_dae_split_event): index 1, M(t) */
    int split_watch, split_event, split_singular;
    double split_limit, split_quality, split_best;
    double t_eval;          /* time of the Newton residual evaluations */
    double *v_trial;        /* n, state assembled for the Newton callbacks */

    /* workspace (n x n unless noted), allocated at create */
    double *force_val;      /* n */
    double *force_shift;    /* n */
    double *force_dt;       /* n */
    double *time_work;      /* CDYN__TIME_WORK n: dF/dt's differences */
    double *force_jac;      /* n x n */
    double *aug, *aug_rhs, *origin, *scratch, *u, *prod;
    cdyn__rank_ws rank_ws;  /* the rank decision on M and the augmented matrices */
    double *tau;            /* n */
    int *jpvt;              /* 2 n */
    int *row_order;         /* n: cdyn__dae_bases' rows by decreasing size */
    double *residual;       /* n, the certificate of the rates */
    double *bound;          /* n */
    double *row_max, *rate_unit; /* n, n: the rates' equilibrated frame */
    /* the residual form's own (n, n, n, n x n, n x n), so it never disturbs what
     * the last evaluation left for reuse */
    double *resid_v, *resid_f, *resid_out, *resid_mass, *resid_jac;
    /* the algebraic solve's observed rows (observe_rows in dae_rhs.c): the
     * rows of F that carry mass, their coefficients in the algebraic states
     * (n x q, ld n) and the size of their terms (n); F at f_at (n, the
     * algebraic states of the last residual; f_at_valid) */
    double *observed_coef, *observed_size, *f_at;
    int observed_count, f_at_valid;
    double *work;
    int lwork;

    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* The Newton solvers' factorizations of a committed evaluation start the
 * next evaluation's chord steps (newton_internal.h), unless hold_chord. */
void cdyn__dae_keep_factorizations(cdyn_dae *dae);

/* F(v, t) into out; CDYN_ERR_CALLBACK / CDYN_ERR_NONFINITE with a message. */
cdyn_status cdyn__dae_force(cdyn_dae *dae, const char *fn, double t, const double *v,
                            double *out);

/* dF/dv at (t, v) into dae->force_jac (callback or forward differences
 * around F(v, t), which must be in dae->force_val). v is restored. */
cdyn_status cdyn__dae_force_jacobian(cdyn_dae *dae, const char *fn, double t, double *v);

/* The same into out (n x n, leading dimension ldo), with F(v) given in base
 * (read only by the differences) and shift (n) as their workspace. */
cdyn_status cdyn__dae_force_jacobian_to(cdyn_dae *dae, const char *fn, double t, double *v,
                                        const double *base, double *shift, double *out,
                                        int ldo);

/* F at v with v_j shifted by a difference step (v is restored) into
 * shifted (n), the step taken into *h: fd_step times the state's
 * magnitude (cdyn__dae_step_scale), grown (cdyn__dae_next_step) while no
 * component of F(v + h e_j) moves from base = F(v) by 1e-8 of its size: a
 * state whose magnitude is not known (at rest) would otherwise get a step
 * that F's rounding swallows. */
cdyn_status cdyn__dae_shifted_force(cdyn_dae *dae, const char *fn, double t, double *v, int j,
                                    const double *base, double *shifted, double *h);

/* The next difference step after a trial of `step` moved F from a to b
 * (n values), or 0 to keep it: kept when some component moved by 1e-8 of
 * its size or more (about eight digits in the quotient) or after four
 * growths; else grown so that the largest relative move would be about
 * 1.5e-8 (at most 1e8 times; 1e8 when nothing moved at all: a step below
 * the rounding of every component of F, whose zero or noise column would
 * pass for dF/dv_j). cdyn__dae_shifted_force() uses it. */
static inline double cdyn__dae_next_step(int n, const double *a, const double *b, double step,
                                         int tries)
{
    double moved = 0.0;
    for (int i = 0; i < n; ++i) {
        double size = fabs(a[i]) > fabs(b[i]) ? fabs(a[i]) : fabs(b[i]);
        if (size > 0.0 && fabs(b[i] - a[i]) > moved * size) moved = fabs(b[i] - a[i]) / size;
    }
    if (moved >= 1e-8 || tries >= 4) return 0.0;
    double growth = moved > 0.0 ? 1.5e-8 / moved : 1e8;
    return step * (growth < 1e8 ? growth : 1e8);
}

/* The magnitude of state j for a difference step: |v_j| (unless it is
 * within the tolerance of the solve that gave it: rounding) or the largest
 * |v_j| the object has learned (split, consistent states); for a state
 * without either, the smallest magnitude known of any state (1 if none is
 * known). */
double cdyn__dae_step_scale(const cdyn_dae *dae, const double *v, int j);

/* dF/dt at (t, v) into dae->force_dt: the callback, or central
 * differences stepped CDYN__TIME_STEP s and a quarter of it whatever t,
 * checked against each other against the rounding of F's terms (n, or
 * NULL when unknown: cdyn__time_derivative). */
cdyn_status cdyn__dae_force_time(cdyn_dae *dae, const char *fn, double t, const double *v,
                                 const double *terms);

/* Where the size of F's terms goes for cdyn__dae_force_time (n doubles of
 * dae->time_work): NULL when dF/dt is the callback's (not needed). */
double *cdyn__dae_time_terms(cdyn_dae *dae);

/* F's terms at v from dF/dv there (jac, n x n, ld n): sum_j |dF_ij v_j|,
 * into cdyn__dae_time_terms (returned; NULL with the dF/dt callback). At
 * a consistent state an algebraic equation's F_i is its residual, about
 * 0, while its rounding is that of these terms (THEORY T3.3). */
const double *cdyn__dae_terms_of(cdyn_dae *dae, const double *jac, const double *v);

/* M(t) by the mass callback into out (n x n, ld n), with the callback and
 * finiteness checks. */
cdyn_status cdyn__dae_call_mass(cdyn_dae *dae, const char *fn, double t, double *out);

/* Rank of the n x n A by the rank policy (cdyn__rank_decide on A with the
 * rows that are exactly zero put last) and the orthogonal U (n x n, into
 * dae->u) whose columns rank..n-1 satisfy u^T D_r A = 0; factors in
 * dae->row_scale, col_scale. -1 if LAPACK fails. Uses scratch, prod,
 * jpvt. */
int cdyn__dae_row_rank(cdyn_dae *dae, const double *A);

/* From that U: an orthonormal basis of the left null space of M (n x n,
 * ld n, the matrix U is of) into null_basis (n x q) and one of its range
 * (n x r, the orthogonal complement) into range (THEORY T3.1); a zero
 * row's null vector is exactly its unit vector, and that row exactly 0 in
 * the other basis vectors; a row that is the only non-zero of a column of
 * M, also once such rows are set aside (a cascade), is exactly 0 in every
 * null vector. error (n x q, ld n): the rounding
 * of each entry of the null basis, in units of eps (0 where it is exact;
 * 1 at most). The QR that orthonormalizes D_r U(:, r:n) runs on rows
 * sorted by decreasing size, which makes it accurate row by row (a plain
 * Householder QR is accurate only normwise: it left 0 for an entry of
 * 6.75e-26 beside one of 1); the error of D_r U is then eps D_r(i) in row
 * i, and entry (i, k) of the basis about eps D_r(i) / |R_kk|, R_kk the
 * QR's k-th diagonal. Uses dae->scratch, dae->prod, dae->jpvt and
 * dae->row_order. */
void cdyn__dae_bases(cdyn_dae *dae, const double *M, int r, double *null_basis, double *range,
                     double *error);

/* With M(t) by callback: factor M(t) and set beta (aligned to beta_ref),
 * P and P^T M for time t. Nothing to do for a constant M. */
cdyn_status cdyn__dae_mass_at(cdyn_dae *dae, const char *fn, double t);

/* Record whether beta and P are signed selections of rows (every column
 * one entry +-1, the rest exactly 0: a diagonal M with massless states);
 * call whenever they change. */
void cdyn__dae_detect_selection(cdyn__dae_part *part, int n);

/* part->mass_rows and n_mass_rows from part->mass (n x n): the rows with a
 * non-zero, whose forces the rates come from (the algebraic solve's
 * observed rows, dae_rhs.c). At set-up and at every M(t). */
void cdyn__dae_find_mass_rows(cdyn__dae_part *part, int n);

/* out = alpha beta^T X (q x cols, ld ldo) for X (n x cols, ld ldx): a row
 * selection when beta is one, else a product (q n cols flops). */
void cdyn__dae_beta_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                      double *out, int ldo);

/* out = beta^T X (q x cols, ld ldo) for a Jacobian X (n x cols, ld ldx),
 * where an entry within the rounding of its own sum, |out_kj| <=
 * 2 (n + 1) eps sum_i |beta_ik X_ij|, is exactly 0; a unit column of beta
 * is exact and keeps every entry. Such a coefficient is what is left
 * where the terms of rows cancel (F2 - 8 F3 with 15.06 = 8 x 1.8825): no
 * term of that state, and the Newton solve must not take a scale from it
 * (THEORY T3.1). beta's own rounding (beta_error) is not judged here:
 * zeroing by it too, the diode ladder's rates failed their certificate
 * at its first steps (reliability.md, 2026-11-29; not traced). */
void cdyn__dae_beta_t_jacobian(const cdyn_dae *dae, int cols, const double *X, int ldx,
                               double *out, int ldo);

/* noise (q) = the rounding of G0 = beta^T F for F (n): 0 for a unit
 * column of beta, else 2 (n + 1) eps sum_i (beta_error_ik + |beta_ik|)
 * |F_i| (the bound of cdyn__dae_beta_t_jacobian, for values). */
void cdyn__dae_g0_rounding(const cdyn_dae *dae, const double *F, double *noise);

/* out = alpha P^T X (r x cols, ld ldo) for X (n x cols, ld ldx): a row
 * selection when P is one, else a product. */
void cdyn__dae_range_t(const cdyn_dae *dae, int cols, const double *X, int ldx, double alpha,
                       double *out, int ldo);

/* With M(t): beta'(t) into part.beta_dot by central differences checked
 * against each other (cdyn__time_derivative); M, beta, P at t are kept. */
cdyn_status cdyn__dae_beta_rate(cdyn_dae *dae, const char *fn, double t);

/* Make M (n x n, ld ldm; finite) the mass matrix: rank, bases, workspace,
 * all or nothing (on failure the previous mass and split are kept). */
cdyn_status cdyn__dae_install_mass(cdyn_dae *dae, const char *fn, const double *M, int ldm);

/* Argument checks shared by the per-point calls (busy, order, v finite). */
cdyn_status cdyn__dae_check_point(cdyn_dae *dae, const char *fn, double t, const double *v);

/* The minimum-order right-hand side at (t, y) without writing ydot (THEORY
 * T3.3): argument checks (except ydot), the algebraic solve, the rates
 * (certified) and, on success, the commit (v_last, vdot_last, magnitudes).
 * Afterwards the factorizations of this evaluation stay in place until the
 * next call on dae: the Newton factor of G_a, part.coef (A, when
 * coupling_valid; cdyn__dae_coupling() makes it), the LU of the
 * reduced matrix, force_val = F and force_jac = dF/dv (when q > 0) at
 * v_last. Counts the call. */
cdyn_status cdyn__dae_rhs_at(cdyn_dae *dae, const char *fn, double t, const double *y);

/* A = -G_a^# G_i into part.coef with this evaluation's factorization of
 * G_a (nothing to do when it is there already). */
void cdyn__dae_coupling(cdyn_dae *dae);

/* The LU of the r x r part.reduced in place (cdyn__getrf; its info
 * returned), noting whether L = I and U is diagonal. */
int cdyn__dae_factor_reduced(cdyn_dae *dae);

/* X (r x nrhs, ld ldx) = B^-1 X with that LU: by the row exchanges and
 * divisions when L = I and U is diagonal (the triangular solves' other
 * terms are exact zeros; a division is correctly rounded where the small
 * kernel multiplies by a reciprocal), else cdyn__getrs. */
void cdyn__dae_solve_reduced(const cdyn_dae *dae, int nrhs, double *X, int ldx);

/* With the factorizations cdyn__dae_rhs_at() leaves: the rates for given right-hand sides of the
 * two blocks of the linear system of T3.3,
 *     P^T M v' = top (r)        G_v v' = bottom (q; G_v = dG0/dv),
 * into out (n): v_a' = A v_i' + G_a^# bottom and
 * [P^T M Pi [I; A]] v_i' = top - P^T M Pi [0; G_a^# bottom]; when the
 * evaluation is decoupled (P^T M_a = 0), v_i' from P^T M_i v_i' = top and
 * v_a' = G_a^# (bottom - G_i v_i'), without A. Uses part.vec_q and
 * part.reduced_rhs. */
void cdyn__dae_solve_rates(cdyn_dae *dae, const double *top, const double *bottom, double *out);

/* Componentwise backward error of the rates vdot (n) on
 * [P^T M; G_v] v' = [ptf; -G_t] (ptf = P^T F, r; -G_t in part.vec_q2, G_v
 * in part.constraint_jac), with the residual left in dae->residual and
 * each row's bound (the denominator of its ratio) in dae->bound. */
double cdyn__dae_rates_backward_error(cdyn_dae *dae, const double *vdot, const double *ptf);

/* The index-2 form (dae_index2.c, docs/theory.md "Index-2 networks"). With
 * F and dF/dv at v in force_val / force_jac (left by the index analysis):
 * choose the multipliers z (massless states absent from the hidden
 * constraints, one per constraint) and split the other states into the
 * integrated x_i and the dependent x_d by a pivoted QR of G_x. */
cdyn_status cdyn__dae_index2_split(cdyn_dae *dae, const char *fn, double t);

/* The dependent states x_d of the index-2 form from the warm start x (q,
 * the result on return, also in v_trial), as cdyn__dae_solve_algebraic
 * finds them and with its verdict. With dF/dv and a factorization left by
 * an earlier evaluation, one chord step and one polish step come first and
 * the Newton solve starts where they end, with F and G_v there from the
 * constraint data (no model call unless it moves); without, or where
 * anything fails there, the plain solve from x. */
cdyn_status cdyn__dae_index2_dependent(cdyn_dae *dae, const char *fn, double t, double *x);

/* At the state v_trial whose x_d solves G0 = 0: the multipliers z (Newton
 * on G_x x'(z) + G_t = 0) into v_trial and the rates into vdot (n; the
 * multipliers' entries 0), certified as the index-1 rates are. */
cdyn_status cdyn__dae_index2_rates(cdyn_dae *dae, const char *fn, double t, double *vdot);

/* After a successful evaluation at (t, y) in the index-2 form: d ydot/dy
 * (ny x ny, ld ny) into J (not aliasing y). With the Jacobian callback by
 * the implicit function theorem on the evaluation's factorizations (exact
 * up to the central difference of dF/dv along the motion that the
 * constraints' second derivatives need); without it by central differences
 * of the right-hand side (2 ny evaluations). The object's state is left at
 * y. */
cdyn_status cdyn__dae_index2_jacobian(cdyn_dae *dae, const char *fn, double t, const double *y,
                                      double *J);

/* At the last evaluation (v_last, w = vdot_last): dF/dv(v + h w, t + h) -
 * dF/dv(v - h w, t - h) into diff (n x n) and 2 h into two_h, from the
 * Jacobian callback (which must be set). Uses tau; overwrites force_jac. */
cdyn_status cdyn__dae_jacobian_along_motion(cdyn_dae *dae, const char *fn, double t,
                                            double *diff, double *two_h);

/* Solve G0(v_i, v_a, t) = 0 for v_a (T3.3) starting from x (q); the
 * integrated states must be in v_trial. x holds the result (best iterate
 * on failure), also written to v_trial. Uses bound (q). */
cdyn_status cdyn__dae_solve_algebraic(cdyn_dae *dae, const char *fn, double t, double *x);

/* CDYN_ERR_BUSY when called from inside a callback of dae. */
cdyn_status cdyn__dae_check_idle(cdyn_dae *dae, const char *fn);

#endif
