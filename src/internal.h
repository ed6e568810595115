/* Internal helpers shared by the modules (never installed). */
#ifndef CDYN_INTERNAL_H
#define CDYN_INTERNAL_H

#include "cdyn/status.h"

#include <math.h>
#include <stddef.h>

/* Size of every object's last-error buffer. */
#define CDYN__MSG_LEN 512

/* A zeroed object of `size` bytes followed by its message record of
 * CDYN__MSG_LEN bytes; the char * member at byte offset `msg_member` is set
 * to point at the record. The message is not part of the object's state:
 * reached through that pointer, it can be written by accessors that take a
 * const object and fail. One free() releases both. NULL when out of memory. */
void *cdyn__object_alloc(size_t size, size_t msg_member);

/* Format the message into msg (CDYN__MSG_LEN bytes) and return status. */
cdyn_status cdyn__fail(char *msg, cdyn_status status, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Size-specialized kernels: a body declared CDYN__SIZED takes its size n
 * as an argument; CDYN__FIXED_SIZE(n, CALL) expands CALL(N) in a switch
 * over n = 2..8 (CALL(n) otherwise), and GCC and clang inline the body into
 * each case, where N is a constant and its loops unroll. Other compilers
 * just call it. */
#if defined(__GNUC__) || defined(__clang__)
#define CDYN__SIZED static inline __attribute__((always_inline))
#define CDYN__COLD static __attribute__((noinline, cold)) /* a rare slow path */
#else
#define CDYN__SIZED static inline
#define CDYN__COLD static
#endif
#define CDYN__FIXED_SIZE(n, CALL)                                                                 \
    do {                                                                                          \
        switch (n) {                                                                              \
        case 2: CALL(2); break;                                                                   \
        case 3: CALL(3); break;                                                                   \
        case 4: CALL(4); break;                                                                   \
        case 5: CALL(5); break;                                                                   \
        case 6: CALL(6); break;                                                                   \
        case 7: CALL(7); break;                                                                   \
        case 8: CALL(8); break;                                                                   \
        default: CALL(n); break;                                                                  \
        }                                                                                         \
    } while (0)

/* Position (i + j*rows) of the first NaN/Inf in a rows x cols matrix, or -1.
 * Short contiguous arrays (the vectors of the per-step calls, checked
 * several times per call at small sizes) are scanned inline, without the
 * call; the rest by cdyn__first_nonfinite_scan. */
long cdyn__first_nonfinite_scan(int rows, int cols, const double *A, int ld);
static inline long cdyn__first_nonfinite(int rows, int cols, const double *A, int ld)
{
    if (rows > 8 || cols > 8 || rows * cols > 8 || (ld != rows && cols != 1))
        return cdyn__first_nonfinite_scan(rows, cols, A, ld);
    for (int i = 0; i < rows * cols; ++i)
        if (!isfinite(A[i])) return i;
    return -1;
}

/* dst[0..len) = src[0..len) (they must not overlap); 1 when every value
 * copied is finite, else 0 (one pass: a check fused with the copy it
 * precedes). */
int cdyn__copy_finite(int len, const double *src, double *dst);

/* The one rule for the accuracy settings of the Newton solvers and their
 * owners: rtol in [1e-15, 1), atol (n values, may be NULL) finite and >= 0.
 * CDYN_OK, or CDYN_ERR_ARG with the message in msg (fn names the caller). */
cdyn_status cdyn__check_tolerances(char *msg, const char *fn, double rtol, const double *atol,
                                   int n);

/* Do the byte ranges [a, a + a_bytes) and [b, b + b_bytes) overlap?
 * (Arguments that must not alias are refused with CDYN_ERR_ARG.) */
int cdyn__overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes);

/* Re-entry guard ("re-entry is refused, never a hang"). An object that runs
 * user callbacks counts how deep it is inside them; an object owned by
 * another (the Newton solver of a DAE, the constraint kernel of a
 * mechanism) also sees its owner's count. While either is non-zero, every
 * call on the object except the read-only accessors returns CDYN_ERR_BUSY. */
typedef struct cdyn__guard {
    int in_callback;
    const int *owner; /* the owner's in_callback, or NULL */
} cdyn__guard;

static inline int cdyn__guard_busy(const cdyn__guard *g)
{
    return g->in_callback > 0 || (g->owner && *g->owner > 0);
}

/* The CDYN_ERR_BUSY message for the public function fn. */
cdyn_status cdyn__busy(char *msg, const char *fn);

/* Largest of two ints. */
static inline int cdyn__max(int a, int b) { return a > b ? a : b; }

/* max(a, b) for a running maximum a that is never NaN: a NaN b leaves a
 * (as fmax does), without fmax's library call in the hot loops. */
static inline double cdyn__larger(double a, double b) { return b > a ? b : a; }

/* The largest |x_i| of n values; a NaN propagates (fmax would drop it). */
static inline double cdyn__largest_magnitude(int n, const double *x)
{
    double v = 0.0;
    for (int i = 0; i < n; ++i)
        if (!(fabs(x[i]) <= v)) v = fabs(x[i]);
    return v;
}

#endif /* CDYN_INTERNAL_H */
