/* Guarded buffers for the tests: GUARD sentinel elements before and after
 * every output array, so writes outside [0, count) are caught, on success
 * and on error. */
#ifndef CDYN_TEST_GUARDED_H
#define CDYN_TEST_GUARDED_H

#include <stddef.h>

enum { GUARD = 8 };
#define SENTINEL 12345.0
#define ISENTINEL (-777)

/* count elements plus guards, all SENTINEL; free with dbuf_free(). */
double *dbuf(size_t count);
void dbuf_free(double *p);
/* Nothing written at all: the whole buffer, guards included, is SENTINEL. */
int dbuf_untouched(const double *p, size_t count);
/* Only the guards are checked (the interior holds a result). */
int dbuf_guards_intact(const double *p, size_t count);
/* Everything back to SENTINEL. */
void dbuf_reset(double *p, size_t count);

int *ibuf(size_t count);
void ibuf_free(int *p);
int ibuf_untouched(const int *p, size_t count);
int ibuf_guards_intact(const int *p, size_t count);

#endif
