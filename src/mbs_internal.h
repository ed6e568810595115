/* The multibody model object shared by mbs.c (rhs, projection) and
 * mbs_partition.c (coordinate partitioning). */
#ifndef CDYN_MBS_INTERNAL_H
#define CDYN_MBS_INTERNAL_H

#include "cdyn/mbs.h"
#include "cdyn/nullspace.h"
#include "difference_tableau.h"
#include "internal.h"
#include "rank.h"

/* Most step sizes a difference quotient of the time terms tries. */
#define CDYN__FD_LEVELS CDYN__TABLEAU_LEVELS
/* fd_work's vectors: the tableau's and the rounding's terms and rates */
#define CDYN__FD_WORK (CDYN__TABLEAU_WORK(CDYN__FD_LEVELS) + 2)

struct cdyn_mbs {
    int n, m, m1;
    cdyn_mbs_mass_fn mass;
    cdyn_mbs_force_fn force;
    cdyn_mbs_phi_fn phi;
    cdyn_mbs_jacobian_fn jacobian;
    cdyn_mbs_phi_t_fn phi_t;
    cdyn_mbs_xi_fn xi;
    void *user;
    int callback_code;
    cdyn_mbs_formulation formulation;
    cdyn_mbs_metric metric;
    double t_eval;                /* time of the Newton callbacks */
    cdyn__guard guard;

    cdyn_constraint *kernel;      /* T4.3-T4.8 */
    cdyn_newton *projector;       /* m x n, T4.9 */
    int has_residuals;
    double residual_position, residual_velocity;
    /* a residual the last call did not need is evaluated when it is asked
     * for (cdyn_mbs_last_residuals), at that call's state: */
    int position_pending, velocity_pending;
    double report_t, *report_y;   /* 2n */
    double *report_saved;         /* 2n: report_y kept by mbs_linearize.c */

    /* T4.10 */
    cdyn_nullspace *partition;    /* n states, m constraints */
    cdyn_nullspace *probe;        /* the best partition at the current Phi_q (events) */
    cdyn_mbs_counters counters;   /* since create or the last reset */
    cdyn__rank_ref partition_ref; /* m1 x n: the history both judge Phi_q by (rank.h) */
    double *partition_inertia;    /* n: sqrt of the largest M_jj so far (the chart frame's) */
    double *inertia_saved;        /* n: that before a cdyn_mbs_partition() */
    cdyn_newton *dependent;       /* m x m */
    int partitioned, event;
    double partition_limit;
    double quality, best_quality; /* of the current and of the best partition */
    double *y_part;               /* 2n, last consistent state (warm start) */
    int *ind_index, *dep_index;   /* d, m */
    double *reaction_force, *reaction_mult; /* n, m: of the last successful rhs */
    int has_reactions;

    /* evaluation buffers */
    double *M, *Q, *Phi, *Phi_q, *Phi_t, *Phi_dot, *xi_val; /* n x n, n, m, m x n, m, m, m */
    double *q_work, *qdot_work, *vec_n, *vec_m, *vec_m2;   /* n, n, n, m, m */
    double *fd_work;              /* CDYN__FD_WORK m: difference quotients */
    double *chol;                 /* n x n, for the mass metric */
    double *mass_scale;           /* n, its symmetric equilibration */
    double *jac_work;             /* m x n */
    double *q_base;               /* n, projection origin */
    double *held_magnitudes;      /* n: a Newton solver's learned magnitudes at a call's start */
    double *period;               /* n: cdyn_mbs_set_periods (0: not periodic) */
    double *origin;               /* n: the whole periods the projection's Newton works without */
    int has_periods, shifted;     /* any period set; the current projection has an origin */
    int tangent_valid;            /* the last call was a successful projection (cdyn_mbs_project_tangent) */
    int projector_near;           /* its factorization is of Phi_q one Newton iterate before (mbs.c) */
    int projector_rank_cap;       /* Phi_q's rank at the last projection's solution if < m, else 0 */
    double *lin_work;             /* 6n^2 + n m1 + 15n + 7 m1: mbs_linearize.c; the projection origin (2n, mbs.c) */
    double *lin_rates;            /* 3 (n^2 + n m1 + n + m1) + 15 (n + max(n, m1)): mbs_linearize.c's verified steps */
    double time_error;            /* the largest error estimate of the time terms' differences since reset (mbs_time.c) */
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* Model evaluations with the callback / non-finite checks (fn names the
 * public caller in messages). */
cdyn_status cdyn__mbs_mass(cdyn_mbs *mbs, const char *fn, double t, const double *q);
cdyn_status cdyn__mbs_force(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                            const double *qdot);
cdyn_status cdyn__mbs_phi(cdyn_mbs *mbs, const char *fn, double t, const double *q, double *out);
cdyn_status cdyn__mbs_jacobian(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                               double *out);
/* Phi_t (m) at (t, q) into out (callback or central differences; jac,
 * Phi_q at or near (t, q), sizes their rounding). */
cdyn_status cdyn__mbs_phi_t(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                            const double *jac, double *out);
/* xi (m) at (t, q, qdot) into mbs->xi_val (callback or central
 * differences, whose rounding mbs->Phi_q, at or near (t, q), sizes). */
cdyn_status cdyn__mbs_xi(cdyn_mbs *mbs, const char *fn, double t, const double *q,
                         const double *qdot);
/* Check that the model is set and y (2n) is finite (and not busy). */
cdyn_status cdyn__mbs_check_state(cdyn_mbs *mbs, const char *fn, double t, const double *y);

/* CDYN_ERR_BUSY when called from inside one of the model's callbacks. */
cdyn_status cdyn__mbs_check_idle(cdyn_mbs *mbs, const char *fn);

/* The residuals cdyn_mbs_last_residuals reports, as the last call
 * evaluated them (none left to evaluate). */
void cdyn__mbs_set_residuals(cdyn_mbs *mbs, double position, double velocity);

/* The size on which the model varies in coordinate j, for difference
 * steps: P / (2 pi) for a coordinate with a period P (cdyn_mbs_set_periods;
 * one radian for an angle, whose value says nothing of that scale: a
 * crank at 1.2e5 rad took difference steps of 120 rad), else INFINITY
 * (its value decides). */
static inline double cdyn__mbs_variation_scale(const cdyn_mbs *mbs, int j)
{
    return mbs->period[j] > 0.0 ? mbs->period[j] / 6.283185307179586 : INFINITY;
}

/* CDYN_ERR_BUSY (with the message) inside a callback, for calls that only
 * read the object (they leave the tangent projection valid). */
cdyn_status cdyn__mbs_check_busy(const cdyn_mbs *mbs, const char *fn);

/* A callback's return code and output checked: CDYN_ERR_CALLBACK or
 * CDYN_ERR_NONFINITE with the message, else CDYN_OK. */
cdyn_status cdyn__mbs_callback_result(cdyn_mbs *mbs, const char *fn, const char *which, int code,
                                      int rows, int cols, const double *out, int ld);

/* Phi' = Phi_q(q, t) q' + Phi_t(q, t) into out (m), with Phi_q into jac
 * (mbs_time.c). */
cdyn_status cdyn__mbs_velocity_constraint(cdyn_mbs *mbs, const char *fn, double t,
                                          const double *q, const double *qdot, double *jac,
                                          double *out);

#endif
