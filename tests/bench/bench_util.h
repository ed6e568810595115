/* Helpers shared by the benchmarks: timing, interleaved measurement, the
 * machine description printed in every output header and CSV, and the
 * stated (approximate) flop counts of the T4 formulations. */
#ifndef CDYN_BENCH_UTIL_H
#define CDYN_BENCH_UTIL_H

#include <stdio.h>

/* Monotonic wall-clock time in seconds. */
double now_seconds(void);

/* qsort comparator for doubles (ascending). */
int compare_double(const void *a, const void *b);

/* ---- command line and CSV ------------------------------------------------- */

/* Parse [--quick] [--csv FILE] into *quick and *csv_path; on anything else
 * print the usage of program to stderr and return -1 (else 0). */
int bu_parse_args(int argc, char **argv, const char *program, int *quick,
                  const char **csv_path);

/* Open csv_path for writing (NULL path: return NULL) and write its header:
 * "# cdyn <program> (quick|full mode)", the machine description as '#'
 * lines, then the column line `columns`. Exits with a message when the
 * file cannot be opened. */
FILE *bu_open_csv(const char *csv_path, const char *program, int quick, const char *columns);

/* ---- machine description ------------------------------------------------ */

/* Print the machine description, one item per line, each line starting with
 * prefix ("" for the human table, "# " for a CSV, whose readers then skip
 * the lines as comments): uname (sysname, release, machine), CPU model from
 * /proc/cpuinfo, online CPUs, compiler (__VERSION__, optimization flag),
 * cdyn_version(), the shared objects that define dgemm_ (BLAS) and dgetrf_
 * (LAPACK) as found by dladdr() (symlinks resolved), the BLAS thread
 * variables if set, and the date (UTC). out may be NULL (nothing printed). */
void bu_print_machine(FILE *out, const char *prefix);

/* ---- interleaved measurement -------------------------------------------- */

/* A timed call: returns 0 on success, non-zero on a failed (non-OK) call. */
typedef int (*bu_fn)(void *ctx);

typedef struct { double median, min, max; } bu_timing;

enum { BU_MAX_SAMPLES = 64 };

/* One timed path; reps, failures and t are outputs of bu_measure. */
typedef struct {
    bu_fn fn;
    void *ctx;
    int reps;     /* calls per sample (calibrated) */
    long failures; /* calls that returned non-zero, warm-up and timed loops */
    bu_timing t;  /* time per call: median [min, max] over the samples */
} bu_path;

/* Warm up and calibrate every path (repetitions so that one sample lasts
 * about target seconds), then take `samples` rounds, each timing every path
 * once in turn, so that a slow phase of the machine hits all paths alike.
 * Per path: median, min and max over the samples of the mean time of one
 * call. samples is capped at BU_MAX_SAMPLES. */
void bu_measure(bu_path *paths, int count, int samples, double target);

/* ---- stated flop counts (approximations; see bench_util.c) -------------- */

double bu_flops_bordered_lu(int N);        /* dgesv of an N x N system, one rhs */
double bu_flops_kkt(int n, int m);         /* cdyn_constraint_lagrange, Schur path */
double bu_flops_reactions(int n, int m);   /* cdyn_constraint_reactions */
double bu_flops_pseudoinverse(int n, int m);
double bu_flops_penalty(int n, int m);
double bu_flops_stabilizer(int m, int full); /* s = xi - K_D Phi' - K_P Phi in load */

#endif
