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
#define CDYN_VERSION_MINOR 1
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
