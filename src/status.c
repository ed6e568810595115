/* Status strings, version, and the small helpers every module uses to
 * validate input and record its last error. */
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>

#define CDYN_STR2(x) #x
#define CDYN_STR(x) CDYN_STR2(x)

const char *cdyn_status_string(cdyn_status status)
{
    switch (status) {
    case CDYN_OK: return "success";
    case CDYN_ERR_ARG: return "invalid argument (NULL pointer, bad size or leading dimension)";
    case CDYN_ERR_NONFINITE: return "non-finite input (NaN or Inf)";
    case CDYN_ERR_SINGULAR: return "singular, rank-deficient or not positive definite matrix";
    case CDYN_ERR_NOCONV: return "no convergence within the iteration bound";
    case CDYN_ERR_CALLBACK: return "a user callback reported failure";
    case CDYN_ERR_NOMEM: return "out of memory";
    case CDYN_ERR_LAPACK: return "internal LAPACK error";
    case CDYN_ERR_BUSY: return "object busy: a callback called back into the object that runs it";
    }
    return "unknown status code";
}

const char *cdyn_version(void)
{
    return CDYN_STR(CDYN_VERSION_MAJOR) "." CDYN_STR(CDYN_VERSION_MINOR) "." CDYN_STR(
        CDYN_VERSION_PATCH);
}

int cdyn_version_number(void) { return CDYN_VERSION_NUMBER; }

void *cdyn__object_alloc(size_t size, size_t msg_member)
{
    char *p = calloc(1, size + CDYN__MSG_LEN);
    if (p) *(char **)(p + msg_member) = p + size;
    return p;
}

cdyn_status cdyn__fail(char *msg, cdyn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, CDYN__MSG_LEN, fmt, ap);
    va_end(ap);
    return status;
}

int cdyn__overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    if (!a || !b || a_bytes == 0 || b_bytes == 0) return 0;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

cdyn_status cdyn__busy(char *msg, const char *fn)
{
    return cdyn__fail(msg, CDYN_ERR_BUSY,
                      "%s: refused: called from inside a callback of the same object (or of "
                      "the object that owns it); only the read-only accessors may be called "
                      "there",
                      fn);
}

/* Non-finite <=> all exponent bits set, and then adding one to the
 * exponent carries into the sign bit: a branch-free scan of each column that
 * the compiler vectorizes (it runs on every input of every per-step call),
 * then the index. */
static int column_has_nonfinite(size_t rows, const double *a)
{
    const uint64_t exponent = UINT64_C(0x7ff0000000000000), one = UINT64_C(0x0010000000000000);
    uint64_t any = 0;
    for (size_t i = 0; i < rows; ++i) {
        uint64_t bits;
        memcpy(&bits, a + i, sizeof bits);
        any |= (bits & exponent) + one;
    }
    return (any >> 63) != 0;
}

cdyn_status cdyn__check_tolerances(char *msg, const char *fn, double rtol, const double *atol,
                                   int n)
{
    if (!(rtol >= 1e-15 && rtol < 1.0))
        return cdyn__fail(msg, CDYN_ERR_ARG, "%s: rtol = %g is not in [1e-15, 1)", fn, rtol);
    for (int j = 0; atol && j < n; ++j)
        if (!(atol[j] >= 0.0) || isinf(atol[j]))
            return cdyn__fail(msg, CDYN_ERR_ARG, "%s: atol[%d] = %g is not finite and >= 0", fn,
                              j, atol[j]);
    return CDYN_OK;
}

int cdyn__copy_finite(int len, const double *src, double *dst)
{
    const uint64_t exponent = UINT64_C(0x7ff0000000000000), one = UINT64_C(0x0010000000000000);
    uint64_t any = 0;
    for (int i = 0; i < len; ++i) {
        uint64_t bits;
        memcpy(&bits, src + i, sizeof bits);
        any |= (bits & exponent) + one; /* the top bit only for Inf and NaN */
        memcpy(dst + i, &bits, sizeof bits);
    }
    return (any >> 63) == 0;
}

long cdyn__first_nonfinite_scan(int rows, int cols, const double *A, int ld)
{
    size_t total = (size_t)rows * (size_t)cols;
    if (total <= 16 && (ld == rows || cols == 1)) { /* short and contiguous: no set-up */
        for (size_t i = 0; i < total; ++i)
            if (!isfinite(A[i])) return (long)i;
        return -1;
    }
    if (ld == rows && cols > 1) { /* contiguous: one scan, then the index */
        if (!column_has_nonfinite((size_t)rows * (size_t)cols, A)) return -1;
    }
    for (int j = 0; j < cols; ++j) {
        const double *a = A + (size_t)j * ld;
        if (!column_has_nonfinite((size_t)rows, a)) continue;
        for (int i = 0; i < rows; ++i)
            if (!isfinite(a[i])) return i + (long)j * rows;
    }
    return -1;
}
