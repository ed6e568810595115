/* Counting allocator for the tests: proves per-step calls allocate nothing. */
#ifndef CDYN_TEST_ALLOC_COUNT_H
#define CDYN_TEST_ALLOC_COUNT_H

/* Start counting heap calls (malloc, calloc, realloc; free is counted too). */
void alloc_count_start(void);
/* Stop counting and return the number of heap calls since the start. */
long alloc_count_stop(void);

#endif
