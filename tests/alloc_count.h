/* Counting allocator for the tests: proves per-step calls allocate nothing,
 * and injects allocation failures. */
#ifndef CDYN_TEST_ALLOC_COUNT_H
#define CDYN_TEST_ALLOC_COUNT_H

/* Start counting heap calls (malloc, calloc, realloc; free is counted too). */
void alloc_count_start(void);
/* Stop counting and return the number of heap calls since the start. */
long alloc_count_stop(void);

/* Failure injection: with k >= 1, the k-th allocation call (malloc, calloc
 * or realloc, counted from this call on, whether or not counting is on)
 * returns NULL, once; k <= 0 switches injection off. Independent of
 * alloc_count_start/stop. */
void alloc_fail_after(long k);
/* 1 if the failure armed by the last alloc_fail_after() has happened. */
int alloc_fail_fired(void);

#endif
