/* The null-space object shared by nullspace.c (partition and
 * factorization, THEORY T1.2) and nullspace_reduce.c (per-step maths,
 * T1.2-T1.5). */
#ifndef CDYN_NULLSPACE_INTERNAL_H
#define CDYN_NULLSPACE_INTERNAL_H

#include "cdyn/nullspace.h"
#include "internal.h"
#include "rank.h"

/* One factorization of W for a given partition. Two of them live in the
 * object: the committed one and a scratch one that becomes committed (by a
 * swap) only when a factor/update succeeds, so a failure never disturbs the
 * object. W is used through its equilibrated form D_r W D_c (rank policy,
 * against the references): W2^{-1} = D_dep (D_r W2 D_dep)^{-1} D_r. */
typedef struct partition {
    int *order;       /* n state indices: order[0..d-1] independent, order[d..n-1] dependent */
    double *w;        /* m x n: W itself (for the certificate of a solve) */
    double *row_scale; /* m: D_r */
    double *col_scale; /* n: D_c, by state */
    double *w2_lu;    /* m x m LU of the equilibrated W2 = D_r W[:, dependent] D_dep */
    int *ipiv;        /* m pivots of that LU */
    double *beta;     /* m x d, -W2^{-1} W1: the lower block of alpha (T1.2) */
    double cond;      /* 1-norm condition estimate of the equilibrated W2 */
    double dependence; /* largest |entry| of -W2^{-1} W1 in reference units */
    int worst_dep, worst_ind; /* chart frame: where that entry is (dependent row, independent column) */
} partition;

/* The chart frame (THEORY T4.10, a mechanism's partition): row and column
 * factors exp(rho), exp(gamma) that balance log H in the least-squares
 * sense, H the history of W with one more row, the inertia (sqrt of the
 * largest M_jj each coordinate has had), each entry weighted down by its
 * own balanced size; a pure function of H and the inertia (recomputed
 * when either changes). */
typedef struct chart_frame {
    const double *inertia; /* n, the owner's (cdyn__nullspace_use_chart_frame) */
    double *rho;     /* m + 1: log row factors (the last one the inertia's) */
    double *gamma;   /* n: log column factors (a coordinate's unit is exp(gamma)) */
    double *at;      /* m x n, then n: the history and inertia the frame belongs to */
    double *logh;    /* (m + 1) x n: their logs where > 0 */
    double *weight;  /* (m + 1) x n: 0 where not > 0 */
    double *scaled;  /* (m + 1) x n: the weights over sqrt of their column sums */
    double *system;  /* (m + 1) x (m + 1): the rows' normal equations */
    int *root;       /* m + 1: the rows' connected components (one free factor each) */
    int valid;
} chart_frame;

struct cdyn_nullspace {
    int n, m, d;
    double rank_tol;
    double cond_limit;
    int factored;
    int rank;           /* rank of W found by the last selection, -1 before */
    int n_redundant;    /* after a rank-deficient W: rows named in redundant */
    partition current, scratch;
    int *redundant;     /* m */
    /* the history W is equilibrated against (rank.h): the largest |entries|
     * it has had since the last factor, or, when shared, since the owner
     * reset it */
    cdyn__rank_ref ref; /* own or the owner's array */
    cdyn__rank_ref own_ref; /* m x n */
    cdyn__rank_ref saved_ref; /* m x n: the history before the current call */
    cdyn__rank_ws ws;   /* rank decisions on W and W^T */
    chart_frame *chart; /* NULL, or the frame the partition is chosen and judged in */
    cdyn__guard guard;
    /* workspace, all sized at create time */
    int *mark;          /* n, for sort_indices and choose_preferred */
    int *prefer;        /* n flags: states preferred as dependent */
    int has_preference;
    double *sub;        /* m x n: the preferred columns */
    double *gecon_work; /* 4 m */
    int *iwork;         /* m, dgecon */
    double *m_alpha;    /* n x d: M alpha */
    double *m_dep;      /* n x m: M[:, dependent] */
    double *rates_dep;  /* m x max(d, 1): alpha' block, dependent offsets */
    double *mass_reduced;   /* d x d */
    double *mass_scale;     /* d: symmetric equilibration of Mbar */
    double *force_reduced;  /* d */
    double *vec_n, *vec_n2, *vec_n3; /* n */
    double *vec_m, *vec_m2; /* m */
    double *residual_top, *delta_v;       /* n: certificate and refinement of a solve */
    double *residual_bottom, *delta_lambda, *neg_c; /* m */
    double *kkt_work;   /* n + m */
    char *msg; /* the message record after the object (cdyn__object_alloc) */
};

/* Make ns refuse calls (CDYN_ERR_BUSY) whenever *owner_in_callback > 0
 * (the split object of a cdyn_dae, the partition of a cdyn_mbs). */
void cdyn__nullspace_set_owner(cdyn_nullspace *ns, const int *owner_in_callback);

/* CDYN_ERR_BUSY (with the message) when ns is inside an owner's callback. */
cdyn_status cdyn__nullspace_check_idle(const cdyn_nullspace *ns, const char *fn);

/* Equilibrate against ref (an m x n history, owned by the caller and kept
 * alive as long as ns) instead of the object's own, which
 * cdyn_nullspace_factor() then no longer resets: for two objects that
 * must judge partitions of the same moving W in one frame (the partition
 * and the probe of a cdyn_mbs). */
void cdyn__nullspace_share_references(cdyn_nullspace *ns, cdyn__rank_ref ref);

/* Choose and judge the partition in the chart frame (THEORY T4.10, for a
 * mechanism's coordinates): the dependence is the largest |d q_dep /
 * d q_ind| with every coordinate in its frame unit, and the choice, a
 * pivoted QR in that frame, is improved by exchanges until no entry
 * exceeds 1 + 1/16. inertia (n, the owner's, kept alive as long as ns):
 * sqrt of the largest M_jj each coordinate has had, 0 where unknown; the
 * owner updates it. Allocates the frame (at create time of the owner);
 * returns 0 on allocation failure. */
int cdyn__nullspace_use_chart_frame(cdyn_nullspace *ns, const double *inertia);

/* x <- W2^{-1} x (trans 'N') or W2^{-T} x (trans 'T') for the committed
 * partition, x of length m. */
void cdyn__nullspace_w2_solve(cdyn_nullspace *ns, char trans, double *x);

#endif
