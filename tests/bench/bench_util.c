#define _GNU_SOURCE /* dladdr, RTLD_NEXT; implies clock_gettime, uname, sysconf */
#include "bench_util.h"

#include <cdyn.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* The two routines whose defining shared objects name the BLAS and the
 * LAPACK actually loaded (prototypes as the benchmarks call them). */
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- machine description ------------------------------------------------ */

typedef void (*any_fn)(void);

/* ISO C has no conversion from a function pointer to void *; POSIX
 * guarantees that the representations agree (dlsym relies on it). */
static void *fn_address(any_fn f)
{
    union { any_fn f; void *p; } u;
    u.f = f;
    return u.p;
}

/* The CPU model ("model name" of /proc/cpuinfo) into buf; "unknown" if absent. */
static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        ++colon;
        while (*colon == ' ' || *colon == '\t') ++colon;
        snprintf(buf, size, "%s", colon);
        size_t len = strlen(buf);
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = '\0';
        break;
    }
    fclose(f);
}

/* "path (-> resolved path)" of the object defining the symbol at addr, or a
 * note when the address lies in the executable itself: in a non-PIE program
 * the address of an imported function is its PLT stub in the executable, so
 * the next definition (RTLD_NEXT) is asked for instead. */
static void object_of(const char *symbol, void *addr, char *buf, size_t size)
{
    Dl_info self, info;
    int have_self = dladdr(fn_address((any_fn)bu_print_machine), &self);
    int have = addr && dladdr(addr, &info) && info.dli_fname;
    if (have && have_self && info.dli_fbase == self.dli_fbase) {
        void *next = dlsym(RTLD_NEXT, symbol);
        Dl_info ninfo;
        if (next && dladdr(next, &ninfo) && ninfo.dli_fname && ninfo.dli_fbase != self.dli_fbase)
            info = ninfo;
        else {
            snprintf(buf, size, "linked statically into the executable (%s)",
                     self.dli_fname ? self.dli_fname : "?");
            return;
        }
    }
    if (!have) {
        snprintf(buf, size, "unknown (dladdr failed)");
        return;
    }
    char resolved[PATH_MAX];
    if (realpath(info.dli_fname, resolved) && strcmp(resolved, info.dli_fname) != 0)
        snprintf(buf, size, "%s -> %s", info.dli_fname, resolved);
    else
        snprintf(buf, size, "%s", info.dli_fname);
}

void bu_print_machine(FILE *out, const char *prefix)
{
    if (!out) return;
    if (!prefix) prefix = "";
    struct utsname u;
    if (uname(&u) == 0)
        fprintf(out, "%smachine: %s %s %s\n", prefix, u.sysname, u.release, u.machine);
    else
        fprintf(out, "%smachine: unknown (uname failed)\n", prefix);
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    fprintf(out, "%scpu: %s; online cpus: %ld\n", prefix, cpu, sysconf(_SC_NPROCESSORS_ONLN));
#if defined(__clang__)
    const char *family = "clang ";
#elif defined(__GNUC__)
    const char *family = "gcc ";
#else
    const char *family = "";
#endif
#if defined(__VERSION__)
    const char *compiler = __VERSION__;
#else
    const char *compiler = "unknown";
#endif
#if defined(__OPTIMIZE__)
    const char *optimized = "optimized (__OPTIMIZE__)";
#else
    const char *optimized = "NOT optimized (no __OPTIMIZE__): timings are meaningless";
#endif
    fprintf(out, "%scompiler: %s%s (__VERSION__), C %ld; %s\n", prefix, family, compiler,
            (long)__STDC_VERSION__, optimized);
    fprintf(out, "%scdyn: %s\n", prefix, cdyn_version());
    char obj[2 * PATH_MAX + 64];
    object_of("dgemm_", fn_address((any_fn)dgemm_), obj, sizeof obj);
    fprintf(out, "%sblas (dgemm_): %s\n", prefix, obj);
    object_of("dgetrf_", fn_address((any_fn)dgetrf_), obj, sizeof obj);
    fprintf(out, "%slapack (dgetrf_): %s\n", prefix, obj);
    const char *vars[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; ++i) {
        const char *v = getenv(vars[i]);
        if (v) fprintf(out, "%s%s=%s\n", prefix, vars[i], v);
    }
    time_t now = time(NULL);
    struct tm tm;
    char date[64] = "unknown";
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "%sdate: %s\n", prefix, date);
}

/* ---- interleaved measurement -------------------------------------------- */

void bu_measure(bu_path *p, int count, int samples, double target)
{
    static double t[BU_MAX_SAMPLES];
    if (samples > BU_MAX_SAMPLES) samples = BU_MAX_SAMPLES;
    if (samples < 1) samples = 1;
    for (int k = 0; k < count; ++k) {
        p[k].failures = 0;
        if (p[k].fn(p[k].ctx)) ++p[k].failures; /* warm-up */
        double t0 = now_seconds();
        if (p[k].fn(p[k].ctx)) ++p[k].failures;
        double once = now_seconds() - t0;
        double reps = target / (once > 1e-8 ? once : 1e-8);
        p[k].reps = reps < 1.0 ? 1 : reps > 1e7 ? 10000000 : (int)reps;
    }
    /* samples[k][s] kept in one heap block: count is not bounded */
    double *all = malloc(sizeof(double) * (size_t)samples * (size_t)(count > 0 ? count : 1));
    if (!all) {
        fprintf(stderr, "bu_measure: out of memory\n");
        exit(EXIT_FAILURE);
    }
    for (int s = 0; s < samples; ++s)
        for (int k = 0; k < count; ++k) {
            long failed = 0;
            double t0 = now_seconds();
            for (int r = 0; r < p[k].reps; ++r) failed += p[k].fn(p[k].ctx) != 0;
            all[(size_t)k * samples + s] = (now_seconds() - t0) / p[k].reps;
            p[k].failures += failed;
        }
    for (int k = 0; k < count; ++k) {
        memcpy(t, all + (size_t)k * samples, sizeof(double) * (size_t)samples);
        qsort(t, (size_t)samples, sizeof(double), compare_double);
        p[k].t.median = samples % 2 ? t[samples / 2] : 0.5 * (t[samples / 2 - 1] + t[samples / 2]);
        p[k].t.min = t[0];
        p[k].t.max = t[samples - 1];
    }
    free(all);
}

/* ---- stated flop counts --------------------------------------------------
 *
 * Approximations: leading terms of the textbook counts of each LAPACK/BLAS
 * step the library runs (src/constraint.c as of this benchmark), plus the
 * O(n^2) and O(nm) terms of the vector steps; copies, NaN scans and
 * pivoting are not counted. Condition estimates (dpocon, dgecon) are
 * counted as about two triangular solve pairs (4 k^2). SVDs (dgesvd with
 * jobs "S", "S", a QR first when one side is much longer) as the R-SVD
 * count of Golub & Van Loan (3rd ed., Fig. 5.4.1) for Sigma, U1 and V of a
 * p x k matrix, p >= k: 6 p k^2 + 20 k^3. Householder QR of p x k:
 * 2 p k^2 - 2 k^3 / 3; applying its k reflectors to a p x k block:
 * 4 p k^2 - 2 k^3. These are the numbers divided by the measured time to
 * give the "GFLOP/s" columns: a rate of useful work, not a hardware
 * counter. */

static double cube(double x) { return x * x * x; }

/* LU with partial pivoting (2N^3/3) and the two triangular solves (2N^2). */
double bu_flops_bordered_lu(int N)
{
    double d = N;
    return 2.0 * cube(d) / 3.0 + 2.0 * d * d;
}

/* s = xi - K_D Phi' - K_P Phi: two m x m gemv in cdyn_constraint_load when
 * Phi and Phi' are given (the gains are stored as full matrices even for
 * Baumgarte), none when they are NULL. */
double bu_flops_stabilizer(int m, int full)
{
    return full ? 4.0 * (double)m * m : 0.0;
}

/* cdyn_constraint_lagrange on its Schur-Cholesky path (taken when full rank
 * is certain and A is well conditioned, as for the random problems here):
 * Cholesky of M n^3/3, cond(M) ~4n^2 (+ n^2 norm), Y = L^-1 Phi_q^T n^2 m,
 * w = L^-1 Q n^2, r = Y^T w - s 2nm, A = Y^T Y (syrk) n m^2, Cholesky of A
 * m^3/3, cond(A) ~4m^2, solve 2m^2, q'' = L^-T (w - Y lambda) 2nm + n^2,
 * generalized force 2nm. (The rank-revealing fallback adds two pivoted QRs,
 * 2 (2nm^2 - 2m^3/3), instead of syrk + Cholesky of A.) */
double bu_flops_kkt(int n, int m)
{
    double dn = n, dm = m;
    return cube(dn) / 3.0 + dn * dn * dm + dn * dm * dm + cube(dm) / 3.0 + 7.0 * dn * dn +
           6.0 * dn * dm + 6.0 * dm * dm;
}

/* cdyn_constraint_reactions: Cholesky n^3/3; rank of Phi_q by a pivoted QR
 * of Phi_q^T (2nm^2 - 2m^3/3); L^-1 Phi_q^T and L^-1 C^T 2 n^2 m; pivoted QR
 * of L^-1 Phi_q^T (2nm^2 - 2m^3/3); its Q^T applied to L^-1 C^T
 * (4nm^2 - 2m^3); LU of the m x m block 2m^3/3 and dgecon ~4m^2;
 * Phi_q M^-1 Q - s 2n^2 + 2nm; R^T and LU solves 3m^2; q'' 2nm + 2n^2. */
double bu_flops_reactions(int n, int m)
{
    double dn = n, dm = m;
    return cube(dn) / 3.0 + 2.0 * dn * dn * dm + 8.0 * dn * dm * dm - 8.0 * cube(dm) / 3.0 +
           4.0 * dn * dn + 4.0 * dn * dm + 7.0 * dm * dm;
}

/* cdyn_constraint_pseudoinverse: Cholesky n^3/3; pivoted QR of Phi_q^T
 * (2nm^2 - 2m^3/3); SVD of Phi_q for its smallest singular value and SVD
 * of Y = L^-1 Phi_q^T, each 6nm^2 + 20m^3 (see above); Y n^2 m;
 * Phi_q M^-1 Q - s 2n^2 + 2nm; S^-2 V^T r and V (..) 4m^2; q'' 2nm + 2n^2. */
double bu_flops_pseudoinverse(int n, int m)
{
    double dn = n, dm = m;
    return cube(dn) / 3.0 + dn * dn * dm + 14.0 * dn * dm * dm + (40.0 - 2.0 / 3.0) * cube(dm) +
           4.0 * dn * dn + 4.0 * dn * dm + 4.0 * dm * dm;
}

/* cdyn_constraint_penalty: S = sqrt(alpha) Phi_q nm; M + S^T S (syrk)
 * n^2 m; Cholesky n^3/3; right-hand side 2nm; solve 2n^2; multiplier
 * estimate and generalized force 4nm. */
double bu_flops_penalty(int n, int m)
{
    double dn = n, dm = m;
    return cube(dn) / 3.0 + dn * dn * dm + 2.0 * dn * dn + 7.0 * dn * dm;
}

int bu_parse_args(int argc, char **argv, const char *program, int *quick,
                  const char **csv_path)
{
    *quick = 0;
    *csv_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) *quick = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) *csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--csv FILE]\n", program);
            return -1;
        }
    }
    return 0;
}

FILE *bu_open_csv(const char *csv_path, const char *program, int quick, const char *columns)
{
    if (!csv_path) return NULL;
    FILE *csv = fopen(csv_path, "w");
    if (!csv) {
        fprintf(stderr, "%s: cannot open %s\n", program, csv_path);
        exit(EXIT_FAILURE);
    }
    fprintf(csv, "# cdyn %s (%s mode)\n", program, quick ? "quick" : "full");
    bu_print_machine(csv, "# ");
    fprintf(csv, "%s\n", columns);
    return csv;
}
