/**
 * @file status.h
 * Status codes, messages and version information shared by every module.
 */
#ifndef CDYN_STATUS_H
#define CDYN_STATUS_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Major version: changes that break the API or ABI (cdyn_version() reports the version linked). */
#define CDYN_VERSION_MAJOR 0
/** Minor version: additions that keep the API and ABI. */
#define CDYN_VERSION_MINOR 2
/** Patch version: fixes only. */
#define CDYN_VERSION_PATCH 0
/** The version as one integer, 10000*major + 100*minor + patch. */
#define CDYN_VERSION_NUMBER \
    (10000 * CDYN_VERSION_MAJOR + 100 * CDYN_VERSION_MINOR + CDYN_VERSION_PATCH)

/**
 * Result of every fallible cdyn call. CDYN_OK is 0; every error is distinct
 * so a caller can branch on it. The detailed message of the last failure is
 * kept by the object that failed (cdyn_<module>_last_error()).
 */
typedef enum cdyn_status {
    CDYN_OK = 0,              /**< success */
    CDYN_ERR_ARG = 1,         /**< invalid argument: NULL pointer, bad size or leading dimension, call out of order */
    CDYN_ERR_NONFINITE = 2,   /**< an input array holds NaN or +-Inf */
    CDYN_ERR_SINGULAR = 3,    /**< a matrix is singular, rank deficient or not positive definite */
    CDYN_ERR_NOCONV = 4,      /**< an iteration did not converge within its bound */
    CDYN_ERR_CALLBACK = 5,    /**< a user callback returned non-zero */
    CDYN_ERR_NOMEM = 6,       /**< memory allocation failed (only in create functions) */
    CDYN_ERR_LAPACK = 7,      /**< LAPACK reported an internal error (a bug: please report) */
    CDYN_ERR_BUSY = 8         /**< the object is inside one of its own calls: a callback tried to re-enter it */
} cdyn_status;

/**
 * What a Jacobian check found (cdyn_newton_check_jacobian(),
 * cdyn_dae_check_jacobian(), cdyn_mbs_check_jacobian()): the caller's
 * derivative callback against central differences of the function it
 * differentiates, two steps extrapolated (their difference estimates the
 * estimate's own error). Each entry's error is relative to the larger of
 * the two values and of 1e-8 times its row's largest |entry| x the
 * unknown's magnitude (unit-free); an entry counts only where the
 * discrepancy exceeds 10 times the estimate's own error (the two steps'
 * disagreement plus the rounding of the function, 4 eps |f| / h), so an
 * entry below what the function's rounding can resolve is never flagged.
 * The first step is eps^(1/3) of the unknown's scale: its magnitude, or,
 * where a row it enters says it moves that row by the row's size over a
 * longer change (the row's largest term over the entry), that change, up
 * to the largest magnitude of any unknown (what an unknown at exactly 0
 * takes); the same scale stands for "the unknown's magnitude" above. An
 * unknown near 0 (1e-10 beside terms of 1) was stepped by 6e-16, and a
 * wrong sign went unnamed. Where the rounding of f still keeps a given
 * non-zero entry (above 1e-8 of its row, terms of no unknown included)
 * from being judged at 1e-6, the first step is widened once to the step
 * that resolves it. Where the two steps' disagreement, not the rounding,
 * keeps an entry from being judged, a column's steps are shortened by 16
 * (up to 6 times), since a magnitude need not be the scale the function
 * varies on (an angle of many turns), and so are they where the slopes of
 * the outer intervals [x + h, x + 2h] and [x - 2h, x - h] differ by more
 * than 1e-2 of the entry and that bend does not shrink with the step (a
 * kink inside the steps, which both central differences average over; a
 * smooth function's curvature shrinks with h). A column with no
 * representable step (t = 1e300) is not judged; one whose wider step
 * leaves f's domain (NaN, or the callback's failure) is stepped from the
 * unknown's own magnitude instead.
 */
typedef struct cdyn_jacobian_check {
    double worst;    /**< largest such relative error (0 when every entry agrees) */
    int row;         /**< its equation (0-based), -1 when none counts */
    int col;         /**< its unknown (0-based); the number of unknowns for a time derivative */
    double given;    /**< the callback's value there */
    double estimate; /**< the difference estimate there */
    int suspect;     /**< 1 when worst exceeds 1e-6: the callback is most likely wrong there */
} cdyn_jacobian_check;

/** Static, never-NULL description of a status code (also for unknown codes). */
CDYN_API const char *cdyn_status_string(cdyn_status status);

/** Version of the linked library as "major.minor.patch" (static string). */
CDYN_API const char *cdyn_version(void);

/** Version of the linked library as CDYN_VERSION_NUMBER would give it. */
CDYN_API int cdyn_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* CDYN_STATUS_H */
