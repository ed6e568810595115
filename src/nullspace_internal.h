/* The null-space object shared by nullspace.c (partition and
 * factorization, THEORY T1.2) and nullspace_reduce.c (per-step maths,
 * T1.2-T1.5). */
#ifndef CDYN_NULLSPACE_INTERNAL_H
#define CDYN_NULLSPACE_INTERNAL_H

#include "cdyn/nullspace.h"
#include "internal.h"

/* One factorization of W for a given partition. Two of them live in the
 * object: the committed one and a scratch one that becomes committed (by a
 * swap) only when a factor/update succeeds, so a failure never disturbs the
 * object. */
typedef struct partition {
    int *order;     /* n state indices: order[0..d-1] independent, order[d..n-1] dependent */
    double *w2_lu;  /* m x m LU of W2 = W[:, dependent] (dgetrf) */
    int *ipiv;      /* m pivots of that LU */
    double *beta;   /* m x d, -W2^{-1} W1: the lower block of alpha (T1.2) */
    double cond;    /* 1-norm condition estimate of W2 */
} partition;

struct cdyn_nullspace {
    int n, m, d;
    double rank_tol;
    double cond_limit;
    int factored;
    int rank;           /* rank of W found by the last selection, -1 before */
    int n_redundant;    /* after a rank-deficient W: rows named in redundant */
    partition current, scratch;
    int *redundant;     /* m */
    /* workspace, all sized at create time */
    double *qr;         /* max(m*n, n*m) for dgeqp3 of W or W^T */
    double *tau;        /* min(m, n) = m */
    int *jpvt;          /* n */
    int *mark;          /* n, for sort_indices and choose_preferred */
    int *prefer;        /* n flags: states preferred as dependent */
    int has_preference;
    double *lwork_buf;  /* lwork doubles: dgeqp3 and dgecon */
    int lwork;
    int *iwork;         /* m, dgecon */
    double *m_alpha;    /* n x d: M alpha */
    double *m_dep;      /* n x m: M[:, dependent] */
    double *rates_dep;  /* m x max(d, 1): alpha' block, dependent offsets */
    double *mass_reduced;   /* d x d for cdyn_nullspace_solve */
    double *force_reduced;  /* d */
    double *vec_n;      /* n */
    double *vec_m;      /* m */
    char msg[CDYN__MSG_LEN];
};

#endif
