/* Timing helpers shared by the benchmarks. */
#ifndef CDYN_BENCH_UTIL_H
#define CDYN_BENCH_UTIL_H

/* Monotonic wall-clock time in seconds. */
double now_seconds(void);

/* qsort comparator for doubles (ascending). */
int compare_double(const void *a, const void *b);

#endif
