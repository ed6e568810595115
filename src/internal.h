/* Internal helpers shared by the modules (never installed). */
#ifndef CDYN_INTERNAL_H
#define CDYN_INTERNAL_H

#include "cdyn/status.h"

#include <stddef.h>

/* Size of every object's last-error buffer. */
#define CDYN__MSG_LEN 256

/* Format the message into msg (CDYN__MSG_LEN bytes) and return status. */
cdyn_status cdyn__fail(char *msg, cdyn_status status, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Position (i + j*rows) of the first NaN/Inf in a rows x cols matrix, or -1. */
long cdyn__first_nonfinite(int rows, int cols, const double *A, int ld);

/* Largest of two ints. */
static inline int cdyn__max(int a, int b) { return a > b ? a : b; }

#endif /* CDYN_INTERNAL_H */
