/* Table-driven bad-input matrix for every public cdyn function.
 *
 * One descriptor per public function (per module table below) states:
 *   - its pointer arguments, each an input array (with its length and, for a
 *     matrix, its row count), an output array, an int array, a callback or
 *     the create status, and whether NULL is an error (CDYN_ERR_ARG) or
 *     documented as allowed;
 *   - its scalar arguments with the values the header calls bad (leading
 *     dimensions, times, tolerances, sizes, enum values) and the documented
 *     result for each;
 *   - a wrapper that makes the call from a generic argument vector.
 * A generator turns every descriptor into rows:
 *   - NULL object (the documented status or accessor value);
 *   - NULL for each pointer argument (CDYN_ERR_ARG, or success where NULL is
 *     documented as allowed: then the other outputs must equal those of the
 *     full call on a fresh object, bit for bit);
 *   - NaN, +Inf and -Inf at the first, middle and last entry of every input
 *     array (CDYN_ERR_NONFINITE; CDYN_ERR_ARG for the arrays whose own
 *     documentation says "> 0, CDYN_ERR_ARG otherwise"); where a function
 *     checks the symmetry of a matrix, an off-diagonal value is placed in
 *     both triangles so the row tests exactly one thing;
 *   - each bad scalar (leading dimension rows - 1, 0 and -1; NaN/+-Inf time;
 *     out-of-range tolerances; bad sizes of the create functions);
 *   - for every callback the call actually invokes (counted on a fresh
 *     object): failure on its k-th call, k = 1, 2, 3 (CDYN_ERR_CALLBACK, the
 *     code kept by cdyn_dae_callback_code / cdyn_mbs_callback_code / the
 *     Newton report; for a function documented to leave that report alone,
 *     cdyn_newton_check_jacobian, the report's code stays what it was and
 *     last_error() names the code) and a NaN written on its k-th call
 *     (CDYN_ERR_NONFINITE).
 * Hand-written rows (at the end of each module) add what a generator cannot
 * know: rank-deficient, singular and non-SPD matrices, calls out of order,
 * sizes m >= n, and the documented successes on singular input.
 *
 * Every row runs on a fresh object and checks:
 *   1. the documented status (or accessor value);
 *   2. on failure: last_error() is non-empty (it was "" on the fresh
 *      object), every output array is untouched including the GUARD
 *      sentinels on both sides, every input array is unchanged;
 *   3. the object is still usable and unchanged: a module "probe" (a fixed
 *      sequence of correct calls) and then the correct call of the function
 *      itself give bit-identical results to the same sequence on a fresh
 *      object (with the same setup hooks where a row has them).
 * Rows documented to succeed (NULL allowed, rank-deficient J in a Newton
 * step, ...) are replayed on the reference object too, so the "after"
 * comparison holds for them as well.
 *
 * Deliberately left out: cdyn_version() and cdyn_version_number() take no
 * arguments, so there is no bad input to give them. The void *user
 * arguments are passed through to callbacks without being read, so NULL is
 * not a bad value for them. Pure accessors get a "NULL object" row each;
 * where the header does not say what a NULL object gives, the row expects
 * the convention of the documented siblings and its name says
 * "(undocumented)".
 *
 * Problems: nullspace and constraint n = 4, m = 2; Newton x0^2 + x1^2 = 4,
 * x0 = x1; DAE x' = -x + y, 0 = cos t - y^3 - y; mbs the Cartesian pendulum
 * (mass 2, length 1.5); rigid one body with f = 2 under a carriage-like
 * motion. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>

#include "testutil.h"
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdyn.h"
#include "guarded.h"

_Static_assert(sizeof(cdyn_status) == sizeof(int), "create status is kept in an int buffer");

enum { MAXARG = 8, MAXSC = 4, MAXBAD = 8, PROBE_LEN = 96, MAXCB = 6, MAXK = 3 };
enum { RPT_LEN = (int)((sizeof(cdyn_newton_report) + sizeof(double) - 1) / sizeof(double)) };
enum { JCK_LEN = (int)((sizeof(cdyn_jacobian_check) + sizeof(double) - 1) / sizeof(double)) };
/* the counter structs are all longs: compared as raw words */
_Static_assert(sizeof(long) == sizeof(double), "counters are read as double-sized words");
enum {
    NTC_LEN = (int)(sizeof(cdyn_newton_counters) / sizeof(double)),
    DAC_LEN = (int)(sizeof(cdyn_dae_counters) / sizeof(double)),
    MBC_LEN = (int)(sizeof(cdyn_mbs_counters) / sizeof(double))
};

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_bad_input: setup failed: %s\n", what);
        abort();
    }
}

/* ======================================================================== */
/* Fault injection: the `at`-th call (1-based, counted since arming) of      */
/* callback `which` returns fault_code(which, at), or writes a NaN.          */

static struct {
    int calls[MAXCB];
    int which, at, nan;
} g_fault = {{0}, -1, 0, 0};

static void fault_disarm(void)
{
    memset(g_fault.calls, 0, sizeof g_fault.calls);
    g_fault.which = -1;
    g_fault.at = 0;
    g_fault.nan = 0;
}

static void fault_arm(int which, int at, int nan)
{
    fault_disarm();
    g_fault.which = which;
    g_fault.at = at;
    g_fault.nan = nan;
}

static int fault_code(int which, int at) { return 100 + 10 * which + at; }

static int fault_hit(int cb, int *poison)
{
    ++g_fault.calls[cb];
    *poison = 0;
    if (g_fault.which != cb || g_fault.calls[cb] != g_fault.at) return 0;
    if (g_fault.nan) {
        *poison = 1;
        return 0;
    }
    return fault_code(cb, g_fault.at);
}

/* ======================================================================== */
/* The generic machinery.                                                    */

typedef enum { K_IN, K_INOUT, K_OUT, K_IIN, K_IOUT, K_FN, K_STATUS, K_REPORT, K_JCHECK } arg_kind;
typedef enum { NUL_ERR, NUL_SAME, NUL_OK } null_rule;
typedef enum { R_STATUS, R_INT, R_DOUBLE, R_PTR, R_STR, R_VOID } ret_kind;
typedef enum { EX_STATUS, EX_VALUE, EX_NULL, EX_NONNULL, EX_NONE, EX_SAME } ex_kind;

typedef struct {
    ex_kind kind;
    cdyn_status st;   /* EX_STATUS */
    double val;       /* EX_VALUE */
    int undocumented; /* convention of the documented siblings, not the header */
} expect;

typedef struct {
    const char *name;
    arg_kind kind;
    int len;            /* elements */
    int rows;           /* > 0: a column-major matrix with this many rows */
    null_rule onnull;   /* NUL_ERR: NULL is CDYN_ERR_ARG */
    const double *data; /* valid content of K_IN / K_INOUT */
    const int *idata;   /* valid content of K_IIN */
    int sym;            /* the function checks symmetry: poison mirrored pairs */
    int positive;       /* documented "> 0, CDYN_ERR_ARG otherwise" */
    int nonneg;         /* documented ">= 0 and finite, CDYN_ERR_ARG otherwise" (0 valid) */
    int ignored;        /* documented as ignored by this variant: no value rows */
} arg_spec;

typedef struct {
    double v;
    expect ex;
} bad_value;

typedef struct {
    const char *name;
    double valid;
    int nbad;
    bad_value bad[MAXBAD];
} scalar_spec;

typedef struct {
    cdyn_status st;
    double val;
    char note[160];
} outcome;

typedef void (*call_fn)(void *obj, void *const *p, const double *sc, outcome *o);

enum {
    F_CONSUMES = 1, /* the call frees the object (cdyn_*_free) */
    F_BEST = 2,     /* an in/out array holds the best iterate after a callback failure */
    F_CB_ONLY = 4,  /* a variant descriptor: only callback rows and hand rows */
    F_KEEPS_CODE = 8 /* documented to leave the module's report alone: a failing callback's
                      * code is not kept there (the kept code must stay what it was) but
                      * named by last_error() */
};

typedef struct {
    const char *fn;
    const char *variant;
    ret_kind ret;
    int has_obj;
    expect null_obj;
    unsigned flags;
    void *(*make)(void); /* NULL: the module's maker */
    arg_spec arg[MAXARG];
    scalar_spec sc[MAXSC];
    call_fn call;
} fn_desc;

typedef struct {
    const char *fn, *variant, *name;
    expect ex;
    int writes; /* a non-status expectation that is not a failure */
    void *(*make)(void);
    void (*prep)(void *obj);
    void (*recover)(void *obj);
    int arg;                     /* 1-based argument whose content is replaced */
    const double *data;
    int sc1;                     /* 1-based scalar overrides */
    double v1;
    int sc2;
    double v2;
} hand_row;

typedef struct {
    const char *name;
    void *(*make)(void);
    void (*destroy)(void *obj);
    const char *(*last_error)(const void *obj);
    int (*callback_code)(void *obj);
    void (*probe)(void *obj, double *out);
    int ncb;
    const char *const *cb_names;
    const fn_desc *fns;
    int nfns;
    const hand_row *hand;
    int nhand;
} module;

typedef struct {
    const fn_desc *d;
    char name[128];
    expect ex;
    int fails;
    void *(*make)(void);
    void (*prep)(void *obj);
    void (*recover)(void *obj);
    int null_obj, null_arg;
    int poison_arg, npos;
    size_t pos[2];
    double pval;
    int repl_arg;
    const double *repl;
    int sc_i[2];
    double sc_v[2];
    int cb, cb_at, cb_nan;
} row;

/* expectations */
#define XS(s) {.kind = EX_STATUS, .st = (s)}
#define XOK XS(CDYN_OK)
#define XARG XS(CDYN_ERR_ARG)
#define XNF XS(CDYN_ERR_NONFINITE)
#define XSING XS(CDYN_ERR_SINGULAR)
#define XV(x) {.kind = EX_VALUE, .val = (x)}
#define XVU(x) {.kind = EX_VALUE, .val = (x), .undocumented = 1}
#define XNULL {.kind = EX_NULL}
#define XNULLU {.kind = EX_NULL, .undocumented = 1}
#define XNONNULL {.kind = EX_NONNULL}
#define XNONNULLU {.kind = EX_NONNULL, .undocumented = 1}
#define XNONE {.kind = EX_NONE}

/* arguments */
#define A_IN(nm, L, R, d) {.name = nm, .kind = K_IN, .len = (L), .rows = (R), .data = (d)}
#define A_IN_OPT(nm, L, R, d, rule) \
    {.name = nm, .kind = K_IN, .len = (L), .rows = (R), .data = (d), .onnull = (rule)}
#define A_IN_SYM(nm, L, R, d) {.name = nm, .kind = K_IN, .len = (L), .rows = (R), .data = (d), .sym = 1}
#define A_IN_POS(nm, L, d) {.name = nm, .kind = K_IN, .len = (L), .data = (d), .positive = 1}
/* optional (NULL: the documented default) arrays of positive or
 * non-negative settings */
#define A_IN_POS_OPT(nm, L, d) \
    {.name = nm, .kind = K_IN, .len = (L), .data = (d), .positive = 1, .onnull = NUL_OK}
#define A_IN_NONNEG_OPT(nm, L, d) \
    {.name = nm, .kind = K_IN, .len = (L), .data = (d), .nonneg = 1, .onnull = NUL_OK}
#define A_IN_IGNORED(nm, L, d) \
    {.name = nm, .kind = K_IN, .len = (L), .data = (d), .onnull = NUL_SAME, .ignored = 1}
#define A_INOUT(nm, L, d) {.name = nm, .kind = K_INOUT, .len = (L), .data = (d)}
#define A_OUT(nm, L) {.name = nm, .kind = K_OUT, .len = (L)}
#define A_OUT_OPT(nm, L) {.name = nm, .kind = K_OUT, .len = (L), .onnull = NUL_SAME}
#define A_IOUT(nm, L) {.name = nm, .kind = K_IOUT, .len = (L)}
#define A_IOUT_OPT(nm, L) {.name = nm, .kind = K_IOUT, .len = (L), .onnull = NUL_SAME}
#define A_IIN_OPT(nm, L, d) {.name = nm, .kind = K_IIN, .len = (L), .idata = (d), .onnull = NUL_OK}
#define A_FN(nm) {.name = nm, .kind = K_FN}
#define A_FN_OPT(nm) {.name = nm, .kind = K_FN, .onnull = NUL_OK}
#define A_STATUS {.name = "status", .kind = K_STATUS, .len = 1, .onnull = NUL_SAME}
#define A_REPORT(nm) {.name = nm, .kind = K_REPORT, .len = RPT_LEN}
/* a cdyn_jacobian_check (status.h) written only on success */
#define A_JCHECK(nm) {.name = nm, .kind = K_JCHECK, .len = JCK_LEN}

/* scalars */
#define BV(x, e) {.v = (x), .ex = e}
#define SC(nm, valid_, n_, ...) {.name = nm, .valid = (valid_), .nbad = (n_), .bad = {__VA_ARGS__}}
#define SC_LD(nm, rows) SC(nm, rows, 3, BV((rows) - 1, XARG), BV(0, XARG), BV(-1, XARG))
#define SC_T(nm, v) SC(nm, v, 3, BV(NAN, XNF), BV(INFINITY, XNF), BV(-INFINITY, XNF))
#define SC_OPEN01(nm, v)                                                                     \
    SC(nm, v, 7, BV(0.0, XARG), BV(1.0, XARG), BV(-1e-12, XARG), BV(2.0, XARG), BV(NAN, XARG), \
       BV(INFINITY, XARG), BV(-INFINITY, XARG))
/* a relative tolerance documented as "in [1e-15, 1)" */
#define SC_RTOL(nm, v)                                                                       \
    SC(nm, v, 8, BV(0.0, XARG), BV(9e-16, XARG), BV(1.0, XARG), BV(-1e-3, XARG), BV(2.0, XARG), \
       BV(NAN, XARG), BV(INFINITY, XARG), BV(-INFINITY, XARG))
#define SC_NONNEG(nm, v) \
    SC(nm, v, 4, BV(-1.0, XARG), BV(NAN, XARG), BV(INFINITY, XARG), BV(-INFINITY, XARG))

#define OBJ .ret = R_STATUS, .has_obj = 1, .null_obj = XARG
#define WRAP(name) static void name(void *obj, void *const *p, const double *sc, outcome *o)
#define USE_ALL ((void)obj, (void)p, (void)sc, (void)o)
#define SCI(j) ((int)sc[j])

static char g_fn_marker; /* a non-NULL stand-in for a callback argument */

static void create_outcome(outcome *o, int made, const cdyn_status *st)
{
    o->val = made;
    if (st) {
        o->st = *st;
        if ((*st == CDYN_OK) != (made != 0))
            snprintf(o->note, sizeof o->note, "status %d but the object is %s", (int)*st,
                     made ? "non-NULL" : "NULL");
    } else {
        o->st = made ? CDYN_OK : CDYN_ERR_ARG; /* no status pointer: judged by the result */
    }
}

/* probe writer */
typedef struct {
    double *b;
    int n;
} pw;

static void put(pw *w, double v)
{
    if (w->n < PROBE_LEN) w->b[w->n++] = v;
}
static void putv(pw *w, const double *x, int n)
{
    for (int i = 0; i < n; ++i) put(w, x[i]);
}
static void puti(pw *w, const int *x, int n)
{
    for (int i = 0; i < n; ++i) put(w, x[i]);
}

/* ======================================================================== */
/* Module: status                                                            */

WRAP(w_status_string)
{
    USE_ALL;
    o->val = cdyn_status_string((cdyn_status)SCI(0)) != NULL;
}

static const fn_desc STATUS_FNS[] = {
    {.fn = "cdyn_status_string",
     .ret = R_STR,
     .sc = {SC("status", 0, 4, BV(-1, XNONNULL), BV(9, XNONNULL), BV(1000, XNONNULL),
               BV(INT_MIN, XNONNULL))}, /* 9: first code after CDYN_ERR_BUSY */
     .call = w_status_string},
};

static const module MOD_STATUS = {
    .name = "status", .fns = STATUS_FNS, .nfns = (int)(sizeof STATUS_FNS / sizeof STATUS_FNS[0])};

/* ======================================================================== */
/* Module: nullspace (n = 4, m = 2, d = 2)                                   */

static const double NS_W[8] = {1, 0.5, 2, -1, 0, 3, -1, 1};          /* 2 x 4, rank 2 */
static const double NS_W2[8] = {1.1, 0.5, 2, -0.9, 0, 3, -1, 1.2};   /* same pattern */
static const double NS_W_RANKDEF[8] = {1, 2, 2, 4, 0, 0, -1, -2};    /* row 2 = 2 row 1 */
static const double NS_W_ZEROROW[8] = {1, 0, 2, 0, 0, 0, -1, 0};     /* row 2 = 0 */
static const double NS_M[16] = {4, 1, 0, 0.5, 1, 5, 1, 0, 0, 1, 6, 1, 0.5, 0, 1, 3}; /* SPD */
static const double NS_MNEG[16] = {-1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1};
static const double NS_MZERO[16] = {0};
static const double NS_F[4] = {1, -2, 0.5, 3};
static const double NS_C[2] = {0.3, -0.7};
static const double NS_WDOT[8] = {0.1, -0.2, 0.3, 0.0, -0.1, 0.2, 0.05, 0.4};
static const double NS_VBAR[2] = {0.7, -1.1};
static const double NS_V[4] = {0.2, -0.4, 0.9, 1.3};
static const double NS_VBAR_DOT[2] = {-0.5, 0.25};
static const int NS_PREFER[4] = {0, 0, 1, 1};

static void *ns_make_unfactored(void)
{
    cdyn_nullspace *ns = cdyn_nullspace_create(4, 2, NULL);
    must(ns != NULL, "cdyn_nullspace_create");
    return ns;
}

static void *ns_make(void)
{
    cdyn_nullspace *ns = ns_make_unfactored();
    must(cdyn_nullspace_factor(ns, NS_W, 2) == CDYN_OK, "cdyn_nullspace_factor");
    return ns;
}

static void ns_destroy(void *obj) { cdyn_nullspace_free(obj); }
static const char *ns_err(const void *obj) { return cdyn_nullspace_last_error(obj); }
static void ns_factor_valid(void *obj) { (void)cdyn_nullspace_factor(obj, NS_W, 2); }
static void ns_factor_rankdef(void *obj) { (void)cdyn_nullspace_factor(obj, NS_W_RANKDEF, 2); }

static void ns_probe(void *obj, double *out)
{
    cdyn_nullspace *ns = obj;
    pw w = {out, 0};
    int ind[2] = {-9, -9}, dep[2] = {-9, -9};
    put(&w, cdyn_nullspace_partition(ns, ind, dep));
    puti(&w, ind, 2);
    puti(&w, dep, 2);
    put(&w, cdyn_nullspace_condition(ns));
    put(&w, cdyn_nullspace_dependence(ns));
    double al[8] = {0}, vd[4] = {0}, lam[2] = {0}, v[4] = {0};
    put(&w, cdyn_nullspace_alpha(ns, al, 4));
    putv(&w, al, 8);
    put(&w, cdyn_nullspace_solve(ns, NS_M, 4, NS_F, NS_C, vd, lam));
    putv(&w, vd, 4);
    putv(&w, lam, 2);
    put(&w, cdyn_nullspace_complete(ns, NS_VBAR, NS_C, v));
    putv(&w, v, 4);
}

WRAP(w_ns_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    cdyn_nullspace *ns = cdyn_nullspace_create(SCI(0), SCI(1), st);
    create_outcome(o, ns != NULL, st);
    cdyn_nullspace_free(ns);
}
WRAP(w_ns_free) { USE_ALL; cdyn_nullspace_free(obj); }
WRAP(w_ns_states) { USE_ALL; o->val = cdyn_nullspace_size(obj); }
WRAP(w_ns_constraints) { USE_ALL; o->val = cdyn_nullspace_rows(obj); }
WRAP(w_ns_set_rank_tolerance) { USE_ALL; o->st = cdyn_nullspace_set_rank_tolerance(obj, sc[0]); }
WRAP(w_ns_set_condition_limit) { USE_ALL; o->st = cdyn_nullspace_set_condition_limit(obj, sc[0]); }
WRAP(w_ns_set_preferred) { USE_ALL; o->st = cdyn_nullspace_set_preferred_dependent(obj, p[0]); }
WRAP(w_ns_factor) { USE_ALL; o->st = cdyn_nullspace_factor(obj, p[0], SCI(0)); }
WRAP(w_ns_update) { USE_ALL; o->st = cdyn_nullspace_update(obj, p[0], SCI(0), p[1]); }
WRAP(w_ns_partition) { USE_ALL; o->val = cdyn_nullspace_partition(obj, p[0], p[1]); }
WRAP(w_ns_condition) { USE_ALL; o->val = cdyn_nullspace_condition(obj); }
WRAP(w_ns_dependence) { USE_ALL; o->val = cdyn_nullspace_dependence(obj); }
WRAP(w_ns_rank) { USE_ALL; o->val = cdyn_nullspace_rank(obj); }
WRAP(w_ns_redundant_rows) { USE_ALL; o->val = cdyn_nullspace_redundant_rows(obj, p[0]); }
WRAP(w_ns_alpha) { USE_ALL; o->st = cdyn_nullspace_alpha(obj, p[0], SCI(0)); }
WRAP(w_ns_alpha_dot)
{
    USE_ALL;
    o->st = cdyn_nullspace_alpha_dot(obj, p[0], SCI(0), p[1], SCI(1));
}
WRAP(w_ns_expand) { USE_ALL; o->st = cdyn_nullspace_expand(obj, p[0], p[1]); }
WRAP(w_ns_complete) { USE_ALL; o->st = cdyn_nullspace_complete(obj, p[0], p[1], p[2]); }
WRAP(w_ns_independent) { USE_ALL; o->st = cdyn_nullspace_independent(obj, p[0], p[1]); }
WRAP(w_ns_reduce)
{
    USE_ALL;
    o->st = cdyn_nullspace_reduce(obj, p[0], SCI(0), p[1], p[2], p[3], SCI(1), p[4]);
}
WRAP(w_ns_recover)
{
    USE_ALL;
    o->st = cdyn_nullspace_recover(obj, p[0], SCI(0), p[1], p[2], p[3], p[4], p[5]);
}
WRAP(w_ns_solve)
{
    USE_ALL;
    o->st = cdyn_nullspace_solve(obj, p[0], SCI(0), p[1], p[2], p[3], p[4]);
}
WRAP(w_ns_last_error) { USE_ALL; o->val = cdyn_nullspace_last_error(obj) != NULL; }

static const fn_desc NS_FNS[] = {
    {.fn = "cdyn_nullspace_create",
     .ret = R_STATUS,
     .arg = {A_STATUS},
     .sc = {SC("n", 4, 2, BV(0, XARG), BV(-1, XARG)),
            SC("m", 2, 3, BV(-1, XARG), BV(4, XARG), BV(5, XARG))}, /* 0 <= m < n */
     .call = w_ns_create},
    {.fn = "cdyn_nullspace_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE,
     .flags = F_CONSUMES, .call = w_ns_free},
    {.fn = "cdyn_nullspace_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .call = w_ns_states},
    {.fn = "cdyn_nullspace_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .call = w_ns_constraints},
    {.fn = "cdyn_nullspace_set_rank_tolerance", OBJ, .sc = {SC_OPEN01("tol", 1e-11)},
     .call = w_ns_set_rank_tolerance},
    {.fn = "cdyn_nullspace_set_condition_limit", OBJ,
     .sc = {SC("limit", 1e7, 5, BV(0.5, XARG), BV(0.0, XARG), BV(-1.0, XARG), BV(NAN, XARG),
               BV(-INFINITY, XARG))},
     .call = w_ns_set_condition_limit},
    {.fn = "cdyn_nullspace_set_preferred_dependent", OBJ, .arg = {A_IIN_OPT("prefer", 4, NS_PREFER)},
     .call = w_ns_set_preferred},
    {.fn = "cdyn_nullspace_factor", OBJ, .arg = {A_IN("W", 8, 2, NS_W)}, .sc = {SC_LD("ldw", 2)},
     .call = w_ns_factor},
    {.fn = "cdyn_nullspace_update", OBJ, .arg = {A_IN("W", 8, 2, NS_W2), A_IOUT_OPT("changed", 1)},
     .sc = {SC_LD("ldw", 2)}, .call = w_ns_update},
    {.fn = "cdyn_nullspace_partition", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("independent", 2), A_IOUT_OPT("dependent", 2)}, .call = w_ns_partition},
    {.fn = "cdyn_nullspace_condition", .ret = R_DOUBLE, .has_obj = 1, .null_obj = XV(NAN),
     .call = w_ns_condition},
    {.fn = "cdyn_nullspace_dependence", .ret = R_DOUBLE, .has_obj = 1, .null_obj = XV(NAN),
     .call = w_ns_dependence},
    {.fn = "cdyn_nullspace_rank", .ret = R_INT, .has_obj = 1, .null_obj = XVU(-1),
     .call = w_ns_rank},
    {.fn = "cdyn_nullspace_redundant_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("rows", 2)}, .call = w_ns_redundant_rows},
    {.fn = "cdyn_nullspace_alpha", OBJ, .arg = {A_OUT("alpha", 8)}, .sc = {SC_LD("ldalpha", 4)},
     .call = w_ns_alpha},
    {.fn = "cdyn_nullspace_alpha_dot", OBJ, .arg = {A_IN("Wdot", 8, 2, NS_WDOT), A_OUT("alpha_dot", 8)},
     .sc = {SC_LD("ldwdot", 2), SC_LD("ldalpha_dot", 4)}, .call = w_ns_alpha_dot},
    {.fn = "cdyn_nullspace_expand", OBJ, .arg = {A_IN("vbar", 2, 0, NS_VBAR), A_OUT("v", 4)},
     .call = w_ns_expand},
    {.fn = "cdyn_nullspace_complete", OBJ,
     .arg = {A_IN("vbar", 2, 0, NS_VBAR), A_IN_OPT("c", 2, 0, NS_C, NUL_OK), A_OUT("v", 4)},
     .call = w_ns_complete},
    {.fn = "cdyn_nullspace_independent", OBJ, .arg = {A_IN("v", 4, 0, NS_V), A_OUT("vbar", 2)},
     .call = w_ns_independent},
    {.fn = "cdyn_nullspace_reduce", OBJ,
     .arg = {A_IN("M", 16, 4, NS_M), A_IN("F", 4, 0, NS_F), A_IN_OPT("c", 2, 0, NS_C, NUL_OK),
             A_OUT("Mbar", 4), A_OUT("Fbar", 2)},
     .sc = {SC_LD("ldm", 4), SC_LD("ldmbar", 2)}, .call = w_ns_reduce},
    {.fn = "cdyn_nullspace_recover", OBJ,
     .arg = {A_IN("M", 16, 4, NS_M), A_IN("F", 4, 0, NS_F), A_IN_OPT("c", 2, 0, NS_C, NUL_OK),
             A_IN("vbar_dot", 2, 0, NS_VBAR_DOT), A_OUT("vdot", 4), A_OUT_OPT("lambda", 2)},
     .sc = {SC_LD("ldm", 4)}, .call = w_ns_recover},
    {.fn = "cdyn_nullspace_solve", OBJ,
     .arg = {A_IN("M", 16, 4, NS_M), A_IN("F", 4, 0, NS_F), A_IN_OPT("c", 2, 0, NS_C, NUL_OK),
             A_OUT("vdot", 4), A_OUT_OPT("lambda", 2)},
     .sc = {SC_LD("ldm", 4)}, .call = w_ns_solve},
    {.fn = "cdyn_nullspace_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULLU,
     .call = w_ns_last_error},
};

#define NS_UNFACTORED(f, e) \
    {.fn = f, .name = "before any factor", .ex = e, .make = ns_make_unfactored, \
     .recover = ns_factor_valid}
static const hand_row NS_HAND[] = {
    {.fn = "cdyn_nullspace_create", .name = "n = 1, m = 0 (smallest valid)", .ex = XOK,
     .sc1 = 1, .v1 = 1, .sc2 = 2, .v2 = 0},
    {.fn = "cdyn_nullspace_create", .name = "n = 3, m = 3 (m = n)", .ex = XARG, .sc1 = 1, .v1 = 3,
     .sc2 = 2, .v2 = 3},
    {.fn = "cdyn_nullspace_factor", .name = "W rank deficient (row 2 = 2 row 1)", .ex = XSING,
     .arg = 1, .data = NS_W_RANKDEF},
    {.fn = "cdyn_nullspace_factor", .name = "W with a zero row", .ex = XSING, .arg = 1,
     .data = NS_W_ZEROROW},
    {.fn = "cdyn_nullspace_update", .name = "W rank deficient (row 2 = 2 row 1)", .ex = XSING,
     .arg = 1, .data = NS_W_RANKDEF},
    {.fn = "cdyn_nullspace_update", .name = "before any factor (acts as factor)", .ex = XOK,
     .make = ns_make_unfactored},
    {.fn = "cdyn_nullspace_solve", .name = "M = -I (Mbar not positive definite)", .ex = XSING,
     .arg = 1, .data = NS_MNEG},
    {.fn = "cdyn_nullspace_solve", .name = "M = 0 (Mbar singular)", .ex = XSING, .arg = 1,
     .data = NS_MZERO},
    {.fn = "cdyn_nullspace_rank", .name = "after a rank-deficient factor", .ex = XV(1),
     .writes = 1, .prep = ns_factor_rankdef, .recover = ns_factor_valid},
    {.fn = "cdyn_nullspace_redundant_rows", .name = "after a rank-deficient factor", .ex = XV(1),
     .writes = 1, .prep = ns_factor_rankdef, .recover = ns_factor_valid},
    NS_UNFACTORED("cdyn_nullspace_partition", XV(-1)),
    NS_UNFACTORED("cdyn_nullspace_condition", XV(NAN)),
    NS_UNFACTORED("cdyn_nullspace_dependence", XV(NAN)),
    NS_UNFACTORED("cdyn_nullspace_rank", XV(-1)),
    NS_UNFACTORED("cdyn_nullspace_alpha", XARG),
    NS_UNFACTORED("cdyn_nullspace_alpha_dot", XARG),
    NS_UNFACTORED("cdyn_nullspace_expand", XARG),
    NS_UNFACTORED("cdyn_nullspace_complete", XARG),
    NS_UNFACTORED("cdyn_nullspace_independent", XARG),
    NS_UNFACTORED("cdyn_nullspace_reduce", XARG),
    NS_UNFACTORED("cdyn_nullspace_recover", XARG),
    NS_UNFACTORED("cdyn_nullspace_solve", XARG),
};

static const module MOD_NS = {
    .name = "nullspace", .make = ns_make, .destroy = ns_destroy, .last_error = ns_err,
    .probe = ns_probe, .fns = NS_FNS, .nfns = (int)(sizeof NS_FNS / sizeof NS_FNS[0]),
    .hand = NS_HAND, .nhand = (int)(sizeof NS_HAND / sizeof NS_HAND[0])};

/* ======================================================================== */
/* Module: newton (k = p = 2: x0^2 + x1^2 = 4, x0 = x1)                      */

enum { NCB_RESIDUAL, NCB_JACOBIAN, NCB_COUNT };
static const char *const NT_CB[NCB_COUNT] = {"residual", "jacobian"};

static int nt_residual(const double *x, double *G, void *user)
{
    int poison, rc = fault_hit(NCB_RESIDUAL, &poison);
    (void)user;
    if (rc) return rc;
    G[0] = x[0] * x[0] + x[1] * x[1] - 4.0;
    G[1] = x[0] - x[1];
    if (poison) G[0] = NAN;
    return 0;
}

/* g_nt_wrong_jacobian: dG0/dx1 5 % off (a model error the check reports
 * with CDYN_OK) */
static int g_nt_wrong_jacobian;

static int nt_jacobian(const double *x, double *J, int ldj, void *user)
{
    int poison, rc = fault_hit(NCB_JACOBIAN, &poison);
    (void)user;
    if (rc) return rc;
    J[0] = 2.0 * x[0];
    J[1] = 1.0;
    J[ldj] = 2.0 * x[1] * (g_nt_wrong_jacobian ? 1.05 : 1.0);
    J[1 + ldj] = -1.0;
    if (poison) J[ldj] = NAN;
    return 0;
}

static const double NT_X0[2] = {1.0, 0.5};
static const double NT_J[4] = {2, 1, 1, -1};
static const double NT_G[2] = {-2.75, 0.5};
static const double NT_J_RANKDEF[4] = {1, 2, 2, 4};
static const double NT_J_ZERO[4] = {0};
static const double NT_ZERO2[2] = {0.0, 0.0};
static const double NT_ATOL[2] = {1e-12, 2e-12};
static const double NT_ATOL_ZERO[2] = {0.0, 0.0}; /* valid: rtol alone */
static const double NT_GTOL[2] = {1e-11, 1e-12};

static void *nt_make(void)
{
    cdyn_newton *nt = cdyn_newton_create(2, 2, NULL);
    must(nt != NULL, "cdyn_newton_create");
    double x[2] = {NT_X0[0], NT_X0[1]};
    must(cdyn_newton_solve(nt, nt_residual, nt_jacobian, NULL, x) == CDYN_OK, "cdyn_newton_solve");
    return nt;
}

static void nt_destroy(void *obj) { cdyn_newton_free(obj); }
static const char *nt_err(const void *obj) { return cdyn_newton_last_error(obj); }
static int nt_code(void *obj)
{
    cdyn_newton_report r;
    memset(&r, 0, sizeof r);
    if (cdyn_newton_get_report(obj, &r) != CDYN_OK) return INT_MIN;
    return r.callback_code;
}
static void *nt_make_unsolved(void)
{
    cdyn_newton *nt = cdyn_newton_create(2, 2, NULL);
    must(nt != NULL, "cdyn_newton_create");
    return nt;
}
static void nt_prep_wrong_jacobian(void *obj) { (void)obj; g_nt_wrong_jacobian = 1; }
static void nt_recover_jacobian(void *obj) { (void)obj; g_nt_wrong_jacobian = 0; }
static void nt_step_rankdef(void *obj)
{
    double dx[2];
    (void)cdyn_newton_step(obj, NT_J_RANKDEF, 2, NT_G, dx);
}

static void put_report(pw *w, const cdyn_newton_report *r)
{
    put(w, r->converged);
    put(w, r->iterations);
    put(w, r->residual_evaluations);
    put(w, r->svd_steps);
    put(w, r->backtracks);
    put(w, r->residual_norm);
    put(w, r->step_norm);
    put(w, r->rank);
    put(w, r->smallest_kept);
    put(w, r->largest_dropped);
    put(w, r->callback_code);
    put(w, r->residual_ratio);
    put(w, r->error_ratio);
}

static void nt_probe(void *obj, double *out)
{
    cdyn_newton *nt = obj;
    pw w = {out, 0};
    double x[2] = {NT_X0[0], NT_X0[1]}, dx[2] = {0};
    cdyn_newton_report r;
    memset(&r, 0, sizeof r);
    put(&w, cdyn_newton_solve(nt, nt_residual, nt_jacobian, NULL, x));
    putv(&w, x, 2);
    put(&w, cdyn_newton_get_report(nt, &r));
    put_report(&w, &r);
    put(&w, cdyn_newton_dependent_rows(nt, NULL));
    put(&w, cdyn_newton_dropped_columns(nt, NULL));
    x[0] = NT_X0[0];
    x[1] = NT_X0[1];
    put(&w, cdyn_newton_solve(nt, nt_residual, NULL, NULL, x)); /* finite differences */
    putv(&w, x, 2);
    put(&w, cdyn_newton_step(nt, NT_J, 2, NT_G, dx));
    putv(&w, dx, 2);
}

WRAP(w_nt_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    cdyn_newton *nt = cdyn_newton_create(SCI(0), SCI(1), st);
    create_outcome(o, nt != NULL, st);
    cdyn_newton_free(nt);
}
WRAP(w_nt_free) { USE_ALL; cdyn_newton_free(obj); }
WRAP(w_nt_set_max_iterations) { USE_ALL; o->st = cdyn_newton_set_max_iterations(obj, SCI(0)); }
WRAP(w_nt_set_max_backtracks) { USE_ALL; o->st = cdyn_newton_set_max_backtracks(obj, SCI(0)); }
WRAP(w_nt_set_tolerances) { USE_ALL; o->st = cdyn_newton_set_tolerances(obj, sc[0], p[0]); }
WRAP(w_nt_set_residual_tolerances)
{
    USE_ALL;
    o->st = cdyn_newton_set_residual_tolerances(obj, p[0]);
}
WRAP(w_nt_set_rank_tolerance) { USE_ALL; o->st = cdyn_newton_set_rank_tolerance(obj, sc[0]); }
WRAP(w_nt_set_fd_step) { USE_ALL; o->st = cdyn_newton_set_fd_step(obj, sc[0]); }
WRAP(w_nt_solve)
{
    USE_ALL;
    o->st = cdyn_newton_solve(obj, p[0] ? nt_residual : NULL, p[1] ? nt_jacobian : NULL, NULL,
                              p[2]);
}
WRAP(w_nt_step) { USE_ALL; o->st = cdyn_newton_step(obj, p[0], SCI(0), p[1], p[2]); }
WRAP(w_nt_check_jacobian)
{
    USE_ALL;
    o->st = cdyn_newton_check_jacobian(obj, p[0] ? nt_residual : NULL, p[1] ? nt_jacobian : NULL,
                                       NULL, p[2], p[3]);
}
WRAP(w_nt_get_report) { USE_ALL; o->st = cdyn_newton_get_report(obj, p[0]); }
WRAP(w_nt_dependent_rows) { USE_ALL; o->val = cdyn_newton_dependent_rows(obj, p[0]); }
WRAP(w_nt_size) { USE_ALL; o->val = cdyn_newton_size(obj); }
WRAP(w_nt_rows) { USE_ALL; o->val = cdyn_newton_rows(obj); }
WRAP(w_nt_dropped_columns) { USE_ALL; o->val = cdyn_newton_dropped_columns(obj, p[0]); }
WRAP(w_nt_last_error) { USE_ALL; o->val = cdyn_newton_last_error(obj) != NULL; }
WRAP(w_nt_get_counters) { USE_ALL; o->st = cdyn_newton_get_counters(obj, p[0]); }
WRAP(w_nt_reset_counters) { USE_ALL; o->st = cdyn_newton_reset_counters(obj); }

static const fn_desc NT_FNS[] = {
    {.fn = "cdyn_newton_create",
     .ret = R_STATUS,
     .arg = {A_STATUS},
     .sc = {SC("k", 2, 2, BV(0, XARG), BV(-1, XARG)),
            SC("p", 2, 3, BV(1, XARG), BV(0, XARG), BV(-1, XARG))}, /* 1 <= k <= p */
     .call = w_nt_create},
    {.fn = "cdyn_newton_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE, .flags = F_CONSUMES,
     .call = w_nt_free},
    {.fn = "cdyn_newton_set_max_iterations", OBJ,
     .sc = {SC("max_iterations", 15, 3, BV(0, XARG), BV(-1, XARG), BV(INT_MIN, XARG))},
     .call = w_nt_set_max_iterations},
    {.fn = "cdyn_newton_set_max_backtracks", OBJ,
     .sc = {SC("max_backtracks", 2, 3, BV(-1, XARG), BV(61, XARG), BV(INT_MAX, XARG))},
     .call = w_nt_set_max_backtracks},
    {.fn = "cdyn_newton_set_tolerances", OBJ, .arg = {A_IN_NONNEG_OPT("atol", 2, NT_ATOL)},
     .sc = {SC_RTOL("rtol", 1e-9)}, .call = w_nt_set_tolerances},
    {.fn = "cdyn_newton_set_residual_tolerances", OBJ, .arg = {A_IN_POS_OPT("gtol", 2, NT_GTOL)},
     .call = w_nt_set_residual_tolerances},
    {.fn = "cdyn_newton_set_rank_tolerance", OBJ, .sc = {SC_OPEN01("tol", 1e-9)},
     .call = w_nt_set_rank_tolerance},
    {.fn = "cdyn_newton_set_fd_step", OBJ, .sc = {SC_OPEN01("h", 1e-7)}, .call = w_nt_set_fd_step},
    {.fn = "cdyn_newton_solve", OBJ, .flags = F_BEST,
     .arg = {A_FN("residual"), A_FN_OPT("jacobian"), A_INOUT("x", 2, NT_X0)},
     .call = w_nt_solve},
    {.fn = "cdyn_newton_step", OBJ,
     .arg = {A_IN("J", 4, 2, NT_J), A_IN("G", 2, 0, NT_G), A_OUT("dx", 2)},
     .sc = {SC_LD("ldj", 2)}, .call = w_nt_step},
    {.fn = "cdyn_newton_check_jacobian", OBJ, .flags = F_KEEPS_CODE,
     .arg = {A_FN("residual"), A_FN("jacobian"), A_IN("x", 2, 0, NT_X0), A_JCHECK("report")},
     .call = w_nt_check_jacobian},
    {.fn = "cdyn_newton_get_report", OBJ, .arg = {A_REPORT("report")}, .call = w_nt_get_report},
    {.fn = "cdyn_newton_get_counters", OBJ, .arg = {A_OUT("counters", NTC_LEN)},
     .call = w_nt_get_counters},
    {.fn = "cdyn_newton_reset_counters", OBJ, .call = w_nt_reset_counters},
    {.fn = "cdyn_newton_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_nt_size},
    {.fn = "cdyn_newton_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_nt_rows},
    {.fn = "cdyn_newton_dependent_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("rows", 2)}, .call = w_nt_dependent_rows},
    {.fn = "cdyn_newton_dropped_columns", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("cols", 2)}, .call = w_nt_dropped_columns},
    {.fn = "cdyn_newton_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULLU,
     .call = w_nt_last_error},
};

static const hand_row NT_HAND[] = {
    {.fn = "cdyn_newton_create", .name = "k = 3 > p = 2", .ex = XARG, .sc1 = 1, .v1 = 3},
    {.fn = "cdyn_newton_create", .name = "k = 1, p = 3 (wide, valid)", .ex = XOK, .sc1 = 1,
     .v1 = 1, .sc2 = 2, .v2 = 3},
    {.fn = "cdyn_newton_set_tolerances", .name = "atol all 0 (valid: rtol alone)", .ex = XOK,
     .arg = 1, .data = NT_ATOL_ZERO},
    {.fn = "cdyn_newton_set_tolerances", .name = "rtol = 1e-15 (smallest valid)", .ex = XOK,
     .sc1 = 1, .v1 = 1e-15},
    {.fn = "cdyn_newton_step", .name = "J rank deficient (OK, SVD outer inverse)", .ex = XOK,
     .arg = 1, .data = NT_J_RANKDEF},
    {.fn = "cdyn_newton_step", .name = "J = 0 (OK, rank 0)", .ex = XOK, .arg = 1,
     .data = NT_J_ZERO},
    {.fn = "cdyn_newton_dependent_rows", .name = "after a rank-deficient step", .ex = XV(1),
     .writes = 1, .prep = nt_step_rankdef},
    {.fn = "cdyn_newton_check_jacobian", .name = "before any solve (OK: needs none)", .ex = XOK,
     .make = nt_make_unsolved},
    {.fn = "cdyn_newton_check_jacobian", .name = "J 5 % off in one entry (OK: the check ran)",
     .ex = XOK, .prep = nt_prep_wrong_jacobian, .recover = nt_recover_jacobian},
    {.fn = "cdyn_newton_check_jacobian", .name = "x at the pivot (0, 0) (OK)", .ex = XOK, .arg = 3,
     .data = NT_ZERO2},
    {.fn = "cdyn_newton_dropped_columns", .name = "after a rank-deficient step", .ex = XV(1),
     .writes = 1, .prep = nt_step_rankdef},
};

static const module MOD_NT = {
    .name = "newton", .make = nt_make, .destroy = nt_destroy, .last_error = nt_err,
    .callback_code = nt_code, .probe = nt_probe, .ncb = NCB_COUNT, .cb_names = NT_CB,
    .fns = NT_FNS, .nfns = (int)(sizeof NT_FNS / sizeof NT_FNS[0]), .hand = NT_HAND,
    .nhand = (int)(sizeof NT_HAND / sizeof NT_HAND[0])};

/* ======================================================================== */
/* Module: dae (n = 2: x' = -x + y, 0 = cos t - y^3 - y; M = diag(1, 0))     */

enum { DCB_FORCE, DCB_JACOBIAN, DCB_TIME, DCB_MASS, DCB_COUNT };
static const char *const DAE_CB[DCB_COUNT] = {"force", "jacobian", "time_derivative", "mass"};

/* mode 0: the DAE above; 1: 0 = cos t - 0.5 (no state in the constraint:
 * singular DAE); 2: 0 = cos t - x (index 2). mass_drop: M(t) = 0. */
static struct {
    int mode, mass_drop;
} g_dae;

static int dae_force(double t, const double *v, double *F, void *user)
{
    int poison, rc = fault_hit(DCB_FORCE, &poison);
    (void)user;
    if (rc) return rc;
    double y = v[1];
    F[0] = -v[0] + y;
    F[1] = g_dae.mode == 1 ? cos(t) - 0.5 : g_dae.mode == 2 ? cos(t) - v[0] : cos(t) - y * y * y - y;
    if (poison) F[1] = NAN;
    return 0;
}

static int dae_jac(double t, const double *v, double *J, int ld, void *user)
{
    int poison, rc = fault_hit(DCB_JACOBIAN, &poison);
    (void)user;
    (void)t;
    if (rc) return rc;
    J[0] = -1.0;
    J[ld] = 1.0;
    J[1] = g_dae.mode == 2 ? -1.0 : 0.0;
    J[1 + ld] = g_dae.mode == 0 ? -3.0 * v[1] * v[1] - 1.0 : 0.0;
    if (poison) J[1 + ld] = NAN;
    return 0;
}

static int dae_time(double t, const double *v, double *dFdt, void *user)
{
    int poison, rc = fault_hit(DCB_TIME, &poison);
    (void)user;
    (void)v;
    if (rc) return rc;
    dFdt[0] = 0.0;
    dFdt[1] = -sin(t);
    if (poison) dFdt[1] = NAN;
    return 0;
}

static int dae_mass(double t, double *M, int ldm, void *user)
{
    int poison, rc = fault_hit(DCB_MASS, &poison);
    (void)user;
    if (rc) return rc;
    M[0] = g_dae.mass_drop ? 0.0 : 2.0 + sin(t);
    M[1] = 0.0;
    M[ldm] = 0.0;
    M[1 + ldm] = 0.0;
    if (poison) M[0] = NAN;
    return 0;
}

static const double DAE_M[4] = {1, 0, 0, 0};
static const double DAE_MREG[4] = {1, 0, 0, 1};
static const double DAE_V0[2] = {1.0, 0.7};
static const double DAE_V1[2] = {0.9, 0.6};
static const double DAE_Y1[1] = {0.9};
static const double DAE_FU[2] = {1.0, 0.5};
static const double DAE_ATOL[2] = {1e-12, 1e-11};

static cdyn_dae *dae_new(void)
{
    g_dae.mode = 0;
    g_dae.mass_drop = 0;
    cdyn_dae *dae = cdyn_dae_create(2, NULL);
    must(dae != NULL, "cdyn_dae_create");
    return dae;
}

static void dae_to_ready(cdyn_dae *dae, int massfn, int upto)
{
    int idx = -1;
    double y = 1.0, yd[2];
    if (upto < 1) return;
    must((massfn ? cdyn_dae_set_mass_fn(dae, dae_mass, NULL, 0.0) : cdyn_dae_set_mass(dae, DAE_M, 2)) ==
             CDYN_OK, "dae set mass");
    if (upto < 2) return;
    must(cdyn_dae_set_model(dae, dae_force, dae_jac, dae_time, NULL) == CDYN_OK,
         "cdyn_dae_set_model");
    if (upto < 3) return;
    must(cdyn_dae_analyze(dae, 0.0, DAE_V0, &idx) == CDYN_OK && idx == 1, "cdyn_dae_analyze");
    if (upto < 4) return;
    must(cdyn_dae_split(dae, 0.0, DAE_V0) == CDYN_OK, "cdyn_dae_split");
    if (upto < 5) return;
    must(cdyn_dae_rhs(dae, 0.0, &y, yd) == CDYN_OK, "cdyn_dae_rhs");
}

static void *dae_make(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 5);
    return dae;
}
static void *dae_make_massfn(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 1, 5);
    return dae;
}
static void *dae_make_created(void) { return dae_new(); }
static void *dae_make_massed(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 1);
    return dae;
}
static void *dae_make_unanalyzed(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 2);
    return dae;
}
static void *dae_make_unsplit(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 3);
    return dae;
}
static void *dae_make_norhs(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 4);
    return dae;
}
static void *dae_make_regular(void)
{
    cdyn_dae *dae = dae_new();
    must(cdyn_dae_set_mass(dae, DAE_MREG, 2) == CDYN_OK, "cdyn_dae_set_mass(I)");
    must(cdyn_dae_set_model(dae, dae_force, dae_jac, dae_time, NULL) == CDYN_OK,
         "cdyn_dae_set_model");
    return dae;
}

/* set_functions only (no mass): all the Jacobian check needs */
static void *dae_make_functions_only(void)
{
    cdyn_dae *dae = dae_new();
    must(cdyn_dae_set_model(dae, dae_force, dae_jac, dae_time, NULL) == CDYN_OK,
         "cdyn_dae_set_model");
    return dae;
}
/* F without derivative callbacks (differences): nothing to check */
static void *dae_make_force_only(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 1);
    must(cdyn_dae_set_model(dae, dae_force, NULL, NULL, NULL) == CDYN_OK,
         "cdyn_dae_set_model(F only)");
    return dae;
}
/* dF/dt given, dF/dv by differences: the check compares dF/dt alone */
static void *dae_make_time_only(void)
{
    cdyn_dae *dae = dae_new();
    dae_to_ready(dae, 0, 1);
    must(cdyn_dae_set_model(dae, dae_force, NULL, dae_time, NULL) == CDYN_OK,
         "cdyn_dae_set_model(F, dF/dt)");
    return dae;
}
static void dae_recover_functions(void *obj)
{
    (void)cdyn_dae_set_model(obj, dae_force, dae_jac, dae_time, NULL);
}

static void dae_destroy(void *obj) { cdyn_dae_free(obj); }
static const char *dae_err(const void *obj) { return cdyn_dae_last_error(obj); }
static int dae_code(void *obj) { return cdyn_dae_callback_code(obj); }
static void dae_recover_lifecycle(void *obj) { dae_to_ready(obj, 0, 5); }
static void dae_prep_singular(void *obj) { (void)obj; g_dae.mode = 1; }
static void dae_prep_index2(void *obj) { (void)obj; g_dae.mode = 2; }
static void dae_prep_index2_cap1(void *obj)
{
    g_dae.mode = 2;
    (void)cdyn_dae_set_max_index(obj, 1);
}
static void dae_prep_mass_drop(void *obj) { (void)obj; g_dae.mass_drop = 1; }
static void dae_recover_mode(void *obj)
{
    (void)obj;
    g_dae.mode = 0;
    g_dae.mass_drop = 0;
}
static void dae_recover_cap(void *obj)
{
    g_dae.mode = 0;
    (void)cdyn_dae_set_max_index(obj, 5);
}

static void dae_probe(void *obj, double *out)
{
    cdyn_dae *dae = obj;
    pw w = {out, 0};
    double v[2] = {0}, vd[2] = {0}, y[2] = {0.95, 0.5}, yd[2] = {0}, G0[2] = {0};
    int integ[2] = {-9, -9}, alg[2] = {-9, -9};
    put(&w, cdyn_dae_last_state(dae, v, vd));
    putv(&w, v, 2);
    putv(&w, vd, 2);
    put(&w, cdyn_dae_split_states(dae, integ, alg));
    puti(&w, integ, 2);
    puti(&w, alg, 2);
    put(&w, cdyn_dae_rank(dae));
    put(&w, cdyn_dae_rhs(dae, 0.3, y, yd));
    putv(&w, yd, 2);
    put(&w, cdyn_dae_last_state(dae, v, vd));
    putv(&w, v, 2);
    putv(&w, vd, 2);
    put(&w, cdyn_dae_hidden_constraints(dae, 0.3, DAE_V1, G0));
    putv(&w, G0, 2);
    put(&w, (double)cdyn_dae_svd_rate_solves(dae));
}

WRAP(w_dae_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    cdyn_dae *dae = cdyn_dae_create(SCI(0), st);
    create_outcome(o, dae != NULL, st);
    cdyn_dae_free(dae);
}
WRAP(w_dae_free) { USE_ALL; cdyn_dae_free(obj); }
WRAP(w_dae_set_rank_tolerance) { USE_ALL; o->st = cdyn_dae_set_rank_tolerance(obj, sc[0]); }
WRAP(w_dae_set_max_index) { USE_ALL; o->st = cdyn_dae_set_max_index(obj, SCI(0)); }
WRAP(w_dae_set_mass) { USE_ALL; o->st = cdyn_dae_set_mass(obj, p[0], SCI(0)); }
WRAP(w_dae_set_mass_fn)
{
    USE_ALL;
    o->st = cdyn_dae_set_mass_fn(obj, p[0] ? dae_mass : NULL, NULL, sc[0]);
}
WRAP(w_dae_set_functions)
{
    USE_ALL;
    o->st = cdyn_dae_set_model(obj, p[0] ? dae_force : NULL, p[1] ? dae_jac : NULL,
                                   p[2] ? dae_time : NULL, NULL);
}
WRAP(w_dae_check_jacobian) { USE_ALL; o->st = cdyn_dae_check_jacobian(obj, sc[0], p[0], p[1]); }
WRAP(w_dae_set_fd_step) { USE_ALL; o->st = cdyn_dae_set_fd_step(obj, sc[0]); }
WRAP(w_dae_set_tolerances) { USE_ALL; o->st = cdyn_dae_set_tolerances(obj, sc[0], p[0]); }
WRAP(w_dae_rank) { USE_ALL; o->val = cdyn_dae_rank(obj); }
WRAP(w_dae_size) { USE_ALL; o->val = cdyn_dae_size(obj); }
WRAP(w_dae_ode_size) { USE_ALL; o->val = cdyn_dae_ode_size(obj); }
WRAP(w_dae_index2) { USE_ALL; o->val = cdyn_dae_index2(obj); }
WRAP(w_dae_bases) { USE_ALL; o->st = cdyn_dae_bases(obj, p[0], SCI(0), p[1], SCI(1)); }
WRAP(w_dae_hidden) { USE_ALL; o->st = cdyn_dae_hidden_constraints(obj, sc[0], p[0], p[1]); }
WRAP(w_dae_analyze) { USE_ALL; o->st = cdyn_dae_analyze(obj, sc[0], p[0], p[1]); }
WRAP(w_dae_constraints_at_level) { USE_ALL; o->val = cdyn_dae_constraints_at_level(obj, SCI(0)); }
WRAP(w_dae_equation_levels) { USE_ALL; o->st = cdyn_dae_equation_levels(obj, p[0]); }
WRAP(w_dae_split) { USE_ALL; o->st = cdyn_dae_split(obj, sc[0], p[0]); }
WRAP(w_dae_states) { USE_ALL; o->val = cdyn_dae_split_states(obj, p[0], p[1]); }
WRAP(w_dae_consistent) { USE_ALL; o->st = cdyn_dae_consistent(obj, sc[0], p[0]); }
WRAP(w_dae_rhs) { USE_ALL; o->st = cdyn_dae_rhs(obj, sc[0], p[0], p[1]); }
WRAP(w_dae_rhs_jacobian)
{
    USE_ALL;
    o->st = cdyn_dae_rhs_jacobian(obj, sc[0], p[0], p[1], p[2], SCI(1));
}
WRAP(w_dae_state) { USE_ALL; o->st = cdyn_dae_last_state(obj, p[0], p[1]); }
WRAP(w_dae_residual) { USE_ALL; o->st = cdyn_dae_residual(obj, sc[0], p[0], p[1], p[2]); }
WRAP(w_dae_residual_jacobian)
{
    USE_ALL;
    o->st = cdyn_dae_residual_jacobian(obj, sc[0], sc[1], p[0], p[1], SCI(2));
}
WRAP(w_dae_input_matrix)
{
    USE_ALL;
    o->st = cdyn_dae_input_matrix(obj, sc[0], p[0], SCI(1), p[1], SCI(2), p[2], SCI(3));
}
WRAP(w_dae_newton) { USE_ALL; o->val = cdyn_dae_newton(obj) != NULL; }
WRAP(w_dae_svd_rate_solves) { USE_ALL; o->val = (double)cdyn_dae_svd_rate_solves(obj); }
WRAP(w_dae_split_event) { USE_ALL; o->val = cdyn_dae_split_event(obj); }
WRAP(w_dae_split_quality) { USE_ALL; o->st = cdyn_dae_split_quality(obj, p[0], p[1]); }
WRAP(w_dae_set_split_limit) { USE_ALL; o->st = cdyn_dae_set_split_limit(obj, sc[0]); }
WRAP(w_dae_get_counters) { USE_ALL; o->st = cdyn_dae_get_counters(obj, p[0]); }
WRAP(w_dae_reset_counters) { USE_ALL; o->st = cdyn_dae_reset_counters(obj); }
WRAP(w_dae_callback_code) { USE_ALL; o->val = cdyn_dae_callback_code(obj); }
WRAP(w_dae_last_error) { USE_ALL; o->val = cdyn_dae_last_error(obj) != NULL; }

static const fn_desc DAE_FNS[] = {
    {.fn = "cdyn_dae_create", .ret = R_STATUS, .arg = {A_STATUS},
     .sc = {SC("n", 2, 3, BV(0, XARG), BV(-1, XARG), BV(INT_MIN, XARG))}, .call = w_dae_create},
    {.fn = "cdyn_dae_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE, .flags = F_CONSUMES,
     .call = w_dae_free},
    {.fn = "cdyn_dae_set_rank_tolerance", OBJ, .sc = {SC_OPEN01("tol", 1e-11)},
     .call = w_dae_set_rank_tolerance},
    {.fn = "cdyn_dae_set_max_index", OBJ,
     .sc = {SC("max_index", 4, 3, BV(0, XARG), BV(-1, XARG), BV(CDYN_DAE_MAX_INDEX + 1, XARG))},
     .call = w_dae_set_max_index},
    {.fn = "cdyn_dae_set_mass", OBJ, .arg = {A_IN("M", 4, 2, DAE_M)}, .sc = {SC_LD("ldm", 2)},
     .call = w_dae_set_mass},
    {.fn = "cdyn_dae_set_mass_fn", OBJ, .arg = {A_FN("mass")}, .sc = {SC_T("t0", 0.2)},
     .call = w_dae_set_mass_fn},
    {.fn = "cdyn_dae_set_model", OBJ,
     .arg = {A_FN("force"), A_FN_OPT("jacobian"), A_FN_OPT("time_derivative")},
     .call = w_dae_set_functions},
    {.fn = "cdyn_dae_check_jacobian", OBJ, .arg = {A_IN("v", 2, 0, DAE_V1), A_JCHECK("report")},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_check_jacobian},
    {.fn = "cdyn_dae_check_jacobian", .variant = "dF/dt only", OBJ, .flags = F_CB_ONLY,
     .make = dae_make_time_only, .arg = {A_IN("v", 2, 0, DAE_V1), A_JCHECK("report")},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_check_jacobian},
    {.fn = "cdyn_dae_set_fd_step", OBJ, .sc = {SC_OPEN01("h", 1e-7)}, .call = w_dae_set_fd_step},
    {.fn = "cdyn_dae_set_tolerances", OBJ, .arg = {A_IN_NONNEG_OPT("atol", 2, DAE_ATOL)},
     .sc = {SC_RTOL("rtol", 1e-9)}, .call = w_dae_set_tolerances},
    {.fn = "cdyn_dae_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_dae_size},
    {.fn = "cdyn_dae_rank", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_dae_rank},
    {.fn = "cdyn_dae_ode_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .call = w_dae_ode_size},
    {.fn = "cdyn_dae_index2", .ret = R_INT, .has_obj = 1, .null_obj = XV(0), .call = w_dae_index2},
    {.fn = "cdyn_dae_bases", OBJ, .arg = {A_OUT_OPT("beta", 2), A_OUT_OPT("P", 2)},
     .sc = {SC_LD("ldbeta", 2), SC_LD("ldp", 2)}, .call = w_dae_bases},
    {.fn = "cdyn_dae_hidden_constraints", OBJ, .arg = {A_IN("v", 2, 0, DAE_V1), A_OUT("G0", 1)},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_hidden},
    {.fn = "cdyn_dae_analyze", OBJ, .arg = {A_IN("v", 2, 0, DAE_V1), A_IOUT("index", 1)},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_analyze},
    {.fn = "cdyn_dae_constraints_at_level", .ret = R_INT, .has_obj = 1, .null_obj = XVU(-1),
     .sc = {SC("level", 0, 3, BV(-1, XV(-1)), BV(CDYN_DAE_MAX_INDEX, XV(-1)), BV(INT_MAX, XV(-1)))},
     .call = w_dae_constraints_at_level},
    {.fn = "cdyn_dae_equation_levels", OBJ, .arg = {A_IOUT("level_of_equation", 2)},
     .call = w_dae_equation_levels},
    {.fn = "cdyn_dae_split", OBJ, .arg = {A_IN("v", 2, 0, DAE_V1)}, .sc = {SC_T("t", 0.3)},
     .call = w_dae_split},
    {.fn = "cdyn_dae_split", .variant = "M(t)", OBJ, .flags = F_CB_ONLY, .make = dae_make_massfn,
     .arg = {A_IN("v", 2, 0, DAE_V1)}, .sc = {SC_T("t", 0.3)}, .call = w_dae_split},
    {.fn = "cdyn_dae_split_states", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .arg = {A_IOUT_OPT("integrated", 1), A_IOUT_OPT("algebraic", 1)},
     .call = w_dae_states},
    {.fn = "cdyn_dae_consistent", OBJ, .arg = {A_INOUT("v", 2, DAE_V1)}, .sc = {SC_T("t", 0.3)},
     .call = w_dae_consistent},
    {.fn = "cdyn_dae_rhs", OBJ, .arg = {A_IN("y", 1, 0, DAE_Y1), A_OUT("ydot", 1)},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_rhs},
    {.fn = "cdyn_dae_rhs", .variant = "M(t)", OBJ, .flags = F_CB_ONLY, .make = dae_make_massfn,
     .arg = {A_IN("y", 1, 0, DAE_Y1), A_OUT("ydot", 1)}, .sc = {SC_T("t", 0.3)}, .call = w_dae_rhs},
    {.fn = "cdyn_dae_residual", OBJ,
     .arg = {A_IN("v", 2, 0, DAE_V1), A_IN("vdot", 2, 0, DAE_V1), A_OUT("r", 2)},
     .sc = {SC_T("t", 0.3)}, .call = w_dae_residual},
    {.fn = "cdyn_dae_residual_jacobian", OBJ, .arg = {A_IN("v", 2, 0, DAE_V1), A_OUT("J", 4)},
     .sc = {SC_T("t", 0.3), SC_T("c_j", 2.0), SC_LD("ldj", 2)},
     .call = w_dae_residual_jacobian},
    {.fn = "cdyn_dae_rhs_jacobian", OBJ,
     .arg = {A_IN("y", 1, 0, DAE_Y1), A_OUT_OPT("ydot", 1), A_OUT("J", 1)},
     .sc = {SC_T("t", 0.3), SC_LD("ldj", 1)}, .call = w_dae_rhs_jacobian},
    {.fn = "cdyn_dae_input_matrix", OBJ,
     .arg = {A_IN("y", 1, 0, DAE_Y1), A_IN("Fu", 2, 2, DAE_FU), A_OUT("B", 1)},
     .sc = {SC_T("t", 0.3), SC("inputs", 1, 2, BV(0, XARG), BV(-1, XARG)), SC_LD("ldfu", 2),
            SC_LD("ldb", 1)},
     .call = w_dae_input_matrix},
    {.fn = "cdyn_dae_last_state", OBJ, .arg = {A_OUT_OPT("v", 2), A_OUT_OPT("vdot", 2)},
     .call = w_dae_state},
    {.fn = "cdyn_dae_newton", .ret = R_PTR, .has_obj = 1, .null_obj = XNULLU, .call = w_dae_newton},
    {.fn = "cdyn_dae_svd_rate_solves", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .call = w_dae_svd_rate_solves},
    {.fn = "cdyn_dae_split_event", .ret = R_INT, .has_obj = 1, .null_obj = XVU(0),
     .call = w_dae_split_event},
    {.fn = "cdyn_dae_split_quality", OBJ,
     .arg = {A_OUT_OPT("current", 1), A_OUT_OPT("best", 1)}, .call = w_dae_split_quality},
    {.fn = "cdyn_dae_set_split_limit", OBJ,
     .sc = {SC("limit", 20.0, 5, BV(0.5, XARG), BV(0.0, XARG), BV(-2.0, XARG), BV(NAN, XARG),
               BV(INFINITY, XARG))},
     .call = w_dae_set_split_limit},
    {.fn = "cdyn_dae_get_counters", OBJ, .arg = {A_OUT("counters", DAC_LEN)},
     .call = w_dae_get_counters},
    {.fn = "cdyn_dae_reset_counters", OBJ, .call = w_dae_reset_counters},
    {.fn = "cdyn_dae_callback_code", .ret = R_INT, .has_obj = 1, .null_obj = XVU(0),
     .call = w_dae_callback_code},
    {.fn = "cdyn_dae_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULLU,
     .call = w_dae_last_error},
};

#define DAE_EARLY(f, mk, e, why) \
    {.fn = f, .name = why, .ex = e, .make = mk, .recover = dae_recover_lifecycle}
static const hand_row DAE_HAND[] = {
    {.fn = "cdyn_dae_analyze", .name = "singular DAE (0 = cos t - 0.5)", .ex = XSING,
     .prep = dae_prep_singular, .recover = dae_recover_mode},
    {.fn = "cdyn_dae_analyze", .name = "index 2 above max_index 1", .ex = XSING,
     .prep = dae_prep_index2_cap1, .recover = dae_recover_cap},
    {.fn = "cdyn_dae_split", .name = "singular DAE (0 = cos t - 0.5)", .ex = XSING,
     .prep = dae_prep_singular, .recover = dae_recover_mode},
    {.fn = "cdyn_dae_split", .variant = "M(t)", .name = "index 2 with M(t) (0 = cos t - x)",
     .ex = XSING, .prep = dae_prep_index2, .recover = dae_recover_mode},
    {.fn = "cdyn_dae_rhs", .variant = "M(t)", .name = "M(t) loses rank (M = 0)", .ex = XSING,
     .prep = dae_prep_mass_drop, .recover = dae_recover_mode},
    {.fn = "cdyn_dae_newton", .name = "M of full rank", .ex = XNULL, .make = dae_make_regular},
    DAE_EARLY("cdyn_dae_rank", dae_make_created, XV(-1), "before set_mass"),
    DAE_EARLY("cdyn_dae_ode_size", dae_make_created, XV(-1), "before set_mass"),
    DAE_EARLY("cdyn_dae_newton", dae_make_created, XNULL, "before set_mass"),
    DAE_EARLY("cdyn_dae_bases", dae_make_created, XARG, "before set_mass"),
    DAE_EARLY("cdyn_dae_hidden_constraints", dae_make_created, XARG, "before set_mass"),
    DAE_EARLY("cdyn_dae_rhs_jacobian", dae_make_unsplit, XARG, "before split"),
    DAE_EARLY("cdyn_dae_input_matrix", dae_make_unsplit, XARG, "before split"),
    DAE_EARLY("cdyn_dae_analyze", dae_make_created, XARG, "before set_mass"),
    DAE_EARLY("cdyn_dae_split", dae_make_created, XARG, "before set_mass"),
    DAE_EARLY("cdyn_dae_hidden_constraints", dae_make_massed, XARG, "before set_functions"),
    DAE_EARLY("cdyn_dae_analyze", dae_make_massed, XARG, "before set_functions"),
    DAE_EARLY("cdyn_dae_split", dae_make_massed, XARG, "before set_functions"),
    DAE_EARLY("cdyn_dae_equation_levels", dae_make_unanalyzed, XARG, "before analyze"),
    DAE_EARLY("cdyn_dae_split_states", dae_make_unsplit, XV(-1), "before split"),
    DAE_EARLY("cdyn_dae_split_quality", dae_make_unsplit, XARG, "before split"),
    DAE_EARLY("cdyn_dae_consistent", dae_make_unsplit, XARG, "before split"),
    DAE_EARLY("cdyn_dae_rhs", dae_make_unsplit, XARG, "before split"),
    DAE_EARLY("cdyn_dae_last_state", dae_make_norhs, XARG, "before any rhs"),
    DAE_EARLY("cdyn_dae_check_jacobian", dae_make_created, XARG, "before set_functions"),
    {.fn = "cdyn_dae_check_jacobian", .name = "after set_functions only, no mass (OK)", .ex = XOK,
     .make = dae_make_functions_only},
    {.fn = "cdyn_dae_check_jacobian", .name = "neither dF/dv nor dF/dt given", .ex = XARG,
     .make = dae_make_force_only, .recover = dae_recover_functions},
    {.fn = "cdyn_dae_check_jacobian", .name = "before analyze (OK: needs no split)", .ex = XOK,
     .make = dae_make_unanalyzed},
    {.fn = "cdyn_dae_check_jacobian", .variant = "dF/dt only", .name = "dF/dt alone (OK)",
     .ex = XOK},
};

static const module MOD_DAE = {
    .name = "dae", .make = dae_make, .destroy = dae_destroy, .last_error = dae_err,
    .callback_code = dae_code, .probe = dae_probe, .ncb = DCB_COUNT, .cb_names = DAE_CB,
    .fns = DAE_FNS, .nfns = (int)(sizeof DAE_FNS / sizeof DAE_FNS[0]), .hand = DAE_HAND,
    .nhand = (int)(sizeof DAE_HAND / sizeof DAE_HAND[0])};

/* ======================================================================== */
/* Module: constraint (n = 4, m = 2)                                         */

static const double CO_Q[4] = {0.5, -9.81, 1.0, 0.0};
static const double CO_PHI[2] = {0.01, -0.02};
static const double CO_PHID[2] = {0.1, 0.05};
static const double CO_XI[2] = {-0.3, 0.2};
static const double CO_KD[4] = {2, 0.5, 0.5, 3};
static const double CO_KP[4] = {4, 1, 1, 5};
static const double CO_NEG2[4] = {-1, 0, 0, -1};
static const double CO_ZERO2[4] = {0};
static const double CO_NONSYM[4] = {2, 0.5, 0.7, 3};
static const double CO_K[2] = {1.5, 2.0};
static const double CO_ALPHA[2] = {10.0, 20.0};
static const double CO_C[8] = {1, 0.5, 2.5, -1, 0, 3, -1, 1.5};
static const double CO_CZERO[8] = {0};
static const double CO_H[4] = {0.1, 0.2, -0.3, 0.4};

static void co_load(cdyn_constraint *c, const double *M, const double *Phi_q)
{
    (void)cdyn_constraint_load(c, M, 4, CO_Q, Phi_q, 2, CO_PHI, CO_PHID, CO_XI);
}

static void *co_make_created(void)
{
    cdyn_constraint *c = cdyn_constraint_create(4, 2, NULL);
    must(c != NULL, "cdyn_constraint_create");
    return c;
}
static void *co_make_loaded(void)
{
    cdyn_constraint *c = co_make_created();
    must(cdyn_constraint_load(c, NS_M, 4, CO_Q, NS_W, 2, CO_PHI, CO_PHID, CO_XI) == CDYN_OK,
         "cdyn_constraint_load");
    return c;
}
static void *co_make(void)
{
    cdyn_constraint *c = co_make_loaded();
    double qdd[4], lam[2];
    must(cdyn_constraint_lagrange(c, qdd, lam) == CDYN_OK, "cdyn_constraint_lagrange");
    return c;
}
static void co_destroy(void *obj) { cdyn_constraint_free(obj); }
static const char *co_err(const void *obj) { return cdyn_constraint_last_error(obj); }
static void co_recover(void *obj)
{
    double qdd[4], lam[2];
    co_load(obj, NS_M, NS_W);
    (void)cdyn_constraint_lagrange(obj, qdd, lam);
}
/* After a rank-deficient instant: its load fed the history of Phi_q that
 * later decisions are equilibrated against (constraint.h), and the solve at
 * small sizes works in that frame, so its rounding depends on the history;
 * a fresh object has none. The history is reset before the recovery. */
static void co_recover_history(void *obj)
{
    (void)cdyn_constraint_reset_scales(obj);
    co_recover(obj);
}
static void co_prep_negM(void *obj) { co_load(obj, NS_MNEG, NS_W); }
static void co_prep_rankdef(void *obj) { co_load(obj, NS_M, NS_W_RANKDEF); }
static void co_prep_zeroM(void *obj) { co_load(obj, NS_MZERO, NS_W); }
static void co_prep_zeroM_alpha(void *obj)
{
    (void)cdyn_constraint_set_penalty(obj, CO_ALPHA);
    co_load(obj, NS_MZERO, NS_W);
}
static void co_recover_default_alpha(void *obj)
{
    (void)cdyn_constraint_set_penalty(obj, NULL);
    co_recover(obj);
}
static void co_prep_rankdef_lagrange(void *obj)
{
    double qdd[4], lam[2];
    co_load(obj, NS_M, NS_W_RANKDEF);
    (void)cdyn_constraint_lagrange(obj, qdd, lam);
}

static void co_probe(void *obj, double *out)
{
    cdyn_constraint *c = obj;
    pw w = {out, 0};
    double gf[4] = {0}, mu[2] = {0}, qdd[4] = {0}, lam[2] = {0};
    put(&w, cdyn_constraint_force(c, gf, mu));
    putv(&w, gf, 4);
    putv(&w, mu, 2);
    put(&w, cdyn_constraint_lagrange(c, qdd, lam));
    putv(&w, qdd, 4);
    putv(&w, lam, 2);
    put(&w, cdyn_constraint_reactions(c, CO_C, 2, qdd, lam));
    putv(&w, qdd, 4);
    putv(&w, lam, 2);
    put(&w, cdyn_constraint_pseudoinverse(c, qdd, lam));
    putv(&w, qdd, 4);
    putv(&w, lam, 2);
    put(&w, cdyn_constraint_penalty(c, qdd, lam));
    putv(&w, qdd, 4);
    putv(&w, lam, 2);
}

WRAP(w_co_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    cdyn_constraint *c = cdyn_constraint_create(SCI(0), SCI(1), st);
    create_outcome(o, c != NULL, st);
    cdyn_constraint_free(c);
}
WRAP(w_co_free) { USE_ALL; cdyn_constraint_free(obj); }
WRAP(w_co_set_baumgarte) { USE_ALL; o->st = cdyn_constraint_set_baumgarte(obj, sc[0], sc[1]); }
WRAP(w_co_set_gains)
{
    USE_ALL;
    o->st = cdyn_constraint_set_gains(obj, p[0], SCI(0), p[1], SCI(1));
}
WRAP(w_co_set_critical_gains) { USE_ALL; o->st = cdyn_constraint_set_critical_gains(obj, p[0]); }
WRAP(w_co_set_penalty) { USE_ALL; o->st = cdyn_constraint_set_penalty(obj, p[0]); }
WRAP(w_co_set_rank_tolerance) { USE_ALL; o->st = cdyn_constraint_set_rank_tolerance(obj, sc[0]); }
WRAP(w_co_load)
{
    USE_ALL;
    o->st = cdyn_constraint_load(obj, p[0], SCI(0), p[1], p[2], SCI(1), p[3], p[4], p[5]);
}
WRAP(w_co_lagrange) { USE_ALL; o->st = cdyn_constraint_lagrange(obj, p[0], p[1]); }
WRAP(w_co_reactions) { USE_ALL; o->st = cdyn_constraint_reactions(obj, p[0], SCI(0), p[1], p[2]); }
WRAP(w_co_pseudoinverse) { USE_ALL; o->st = cdyn_constraint_pseudoinverse(obj, p[0], p[1]); }
WRAP(w_co_penalty) { USE_ALL; o->st = cdyn_constraint_penalty(obj, p[0], p[1]); }
WRAP(w_co_export)
{
    USE_ALL;
    o->st = cdyn_constraint_export(obj, (cdyn_export_variant)SCI(0), p[0], SCI(1), p[1], p[2],
                                   SCI(2), p[3]);
}
WRAP(w_co_export_mult)
{
    USE_ALL;
    o->st = cdyn_constraint_export(obj, CDYN_EXPORT_MULTIPLIERS, p[0], 2, p[1], p[2], SCI(0), p[3]);
}
WRAP(w_co_force) { USE_ALL; o->st = cdyn_constraint_force(obj, p[0], p[1]); }
WRAP(w_co_rank) { USE_ALL; o->val = cdyn_constraint_rank(obj); }
WRAP(w_co_size) { USE_ALL; o->val = cdyn_constraint_size(obj); }
WRAP(w_co_rows) { USE_ALL; o->val = cdyn_constraint_rows(obj); }
WRAP(w_co_sigma) { USE_ALL; o->val = cdyn_constraint_smallest_singular_value(obj); }
WRAP(w_co_redundant_rows) { USE_ALL; o->val = cdyn_constraint_redundant_rows(obj, p[0]); }
WRAP(w_co_margin) { USE_ALL; o->val = cdyn_constraint_margin(obj); }
WRAP(w_co_reset_scales) { USE_ALL; o->st = cdyn_constraint_reset_scales(obj); }
WRAP(w_co_last_error) { USE_ALL; o->val = cdyn_constraint_last_error(obj) != NULL; }

static const fn_desc CO_FNS[] = {
    {.fn = "cdyn_constraint_create", .ret = R_STATUS, .arg = {A_STATUS},
     .sc = {SC("n", 4, 2, BV(0, XARG), BV(-1, XARG)), SC("m", 2, 2, BV(-1, XARG), BV(INT_MIN, XARG))},
     .call = w_co_create},
    {.fn = "cdyn_constraint_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE,
     .flags = F_CONSUMES, .call = w_co_free},
    {.fn = "cdyn_constraint_set_baumgarte", OBJ, .sc = {SC_NONNEG("a", 1.0), SC_NONNEG("b", 2.0)},
     .call = w_co_set_baumgarte},
    {.fn = "cdyn_constraint_set_gains", OBJ,
     .arg = {A_IN_SYM("KD", 4, 2, CO_KD), A_IN_SYM("KP", 4, 2, CO_KP)},
     .sc = {SC_LD("ldkd", 2), SC_LD("ldkp", 2)}, .call = w_co_set_gains},
    {.fn = "cdyn_constraint_set_critical_gains", OBJ, .arg = {A_IN_POS("k", 2, CO_K)},
     .call = w_co_set_critical_gains},
    {.fn = "cdyn_constraint_set_penalty", OBJ, .arg = {A_IN_POS_OPT("alpha", 2, CO_ALPHA)},
     .call = w_co_set_penalty},
    {.fn = "cdyn_constraint_set_rank_tolerance", OBJ, .sc = {SC_OPEN01("tol", 1e-9)},
     .call = w_co_set_rank_tolerance},
    {.fn = "cdyn_constraint_load", OBJ,
     .arg = {A_IN("M", 16, 4, NS_M), A_IN("Q", 4, 0, CO_Q), A_IN("Phi_q", 8, 2, NS_W2),
             A_IN_OPT("Phi", 2, 0, CO_PHI, NUL_OK), A_IN_OPT("Phi_dot", 2, 0, CO_PHID, NUL_OK),
             A_IN_OPT("xi", 2, 0, CO_XI, NUL_OK)},
     .sc = {SC_LD("ldm", 4), SC_LD("ldphiq", 2)}, .call = w_co_load},
    {.fn = "cdyn_constraint_lagrange", OBJ, .arg = {A_OUT("qdd", 4), A_OUT("lambda", 2)},
     .call = w_co_lagrange},
    {.fn = "cdyn_constraint_reactions", OBJ,
     .arg = {A_IN("C", 8, 2, CO_C), A_OUT("qdd", 4), A_OUT("f", 2)}, .sc = {SC_LD("ldc", 2)},
     .call = w_co_reactions},
    {.fn = "cdyn_constraint_pseudoinverse", OBJ, .arg = {A_OUT("qdd", 4), A_OUT("lambda", 2)},
     .call = w_co_pseudoinverse},
    {.fn = "cdyn_constraint_penalty", OBJ, .arg = {A_OUT("qdd", 4), A_OUT("lambda", 2)},
     .call = w_co_penalty},
    {.fn = "cdyn_constraint_export", .variant = "reactions", OBJ,
     .arg = {A_IN("C", 8, 2, CO_C), A_IN("h", 4, 0, CO_H), A_OUT("A", 100), A_OUT("B", 10)},
     .sc = {SC("variant", CDYN_EXPORT_REACTIONS, 2, BV(2, XARG), BV(-1, XARG)), SC_LD("ldc", 2),
            SC_LD("lda", 10)},
     .call = w_co_export},
    {.fn = "cdyn_constraint_export", .variant = "multipliers (C ignored)", OBJ,
     .arg = {A_IN_IGNORED("C", 8, CO_C), A_IN("h", 4, 0, CO_H), A_OUT("A", 100),
             A_OUT("B", 10)},
     .sc = {SC_LD("lda", 10)}, .call = w_co_export_mult},
    {.fn = "cdyn_constraint_force", OBJ,
     .arg = {A_OUT_OPT("generalized_force", 4), A_OUT_OPT("multipliers", 2)}, .call = w_co_force},
    {.fn = "cdyn_constraint_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_co_size},
    {.fn = "cdyn_constraint_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_co_rows},
    {.fn = "cdyn_constraint_rank", .ret = R_INT, .has_obj = 1, .null_obj = XVU(-1),
     .call = w_co_rank},
    {.fn = "cdyn_constraint_smallest_singular_value", .ret = R_DOUBLE, .has_obj = 1,
     .null_obj = XV(NAN), .call = w_co_sigma},
    {.fn = "cdyn_constraint_redundant_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("rows", 2)}, .call = w_co_redundant_rows},
    {.fn = "cdyn_constraint_margin", .ret = R_DOUBLE, .has_obj = 1, .null_obj = XV(NAN),
     .call = w_co_margin},
    {.fn = "cdyn_constraint_reset_scales", OBJ, .call = w_co_reset_scales},
    {.fn = "cdyn_constraint_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULLU,
     .call = w_co_last_error},
};

#define CO_UNLOADED(f) \
    {.fn = f, .name = "before any load", .ex = XARG, .make = co_make_created, .recover = co_recover}
static const hand_row CO_HAND[] = {
    {.fn = "cdyn_constraint_create", .name = "n = 2, m = 3 (m > n allowed)", .ex = XOK, .sc1 = 1,
     .v1 = 2, .sc2 = 2, .v2 = 3},
    {.fn = "cdyn_constraint_create", .name = "n = 1, m = 0 (smallest valid)", .ex = XOK, .sc1 = 1,
     .v1 = 1, .sc2 = 2, .v2 = 0},
    {.fn = "cdyn_constraint_set_gains", .name = "K_D = -I (not positive definite)", .ex = XSING,
     .arg = 1, .data = CO_NEG2},
    {.fn = "cdyn_constraint_set_gains", .name = "K_P = -I (not positive definite)", .ex = XSING,
     .arg = 2, .data = CO_NEG2},
    {.fn = "cdyn_constraint_set_gains", .name = "K_D = 0 (singular)", .ex = XSING, .arg = 1,
     .data = CO_ZERO2},
    {.fn = "cdyn_constraint_set_gains", .name = "K_D not symmetric", .ex = XARG, .arg = 1,
     .data = CO_NONSYM},
    {.fn = "cdyn_constraint_set_gains", .name = "K_P not symmetric", .ex = XARG, .arg = 2,
     .data = CO_NONSYM},
    {.fn = "cdyn_constraint_lagrange", .name = "M = -I loaded (not SPD)", .ex = XSING,
     .prep = co_prep_negM, .recover = co_recover},
    {.fn = "cdyn_constraint_lagrange", .name = "Phi_q rank deficient loaded", .ex = XSING,
     .prep = co_prep_rankdef, .recover = co_recover_history},
    {.fn = "cdyn_constraint_reactions", .name = "C = 0 (Phi_q M^-1 C^T singular)", .ex = XSING,
     .arg = 1, .data = CO_CZERO},
    {.fn = "cdyn_constraint_reactions", .name = "M = -I loaded (not SPD)", .ex = XSING,
     .prep = co_prep_negM, .recover = co_recover},
    {.fn = "cdyn_constraint_pseudoinverse", .name = "M = -I loaded (not SPD)", .ex = XSING,
     .prep = co_prep_negM, .recover = co_recover},
    {.fn = "cdyn_constraint_pseudoinverse", .name = "Phi_q rank deficient loaded (OK)", .ex = XOK,
     .prep = co_prep_rankdef, .recover = co_recover},
    {.fn = "cdyn_constraint_penalty", .name = "M = 0, rank Phi_q = 2 < n (leading matrix singular)",
     .ex = XSING, .prep = co_prep_zeroM_alpha, .recover = co_recover_default_alpha},
    {.fn = "cdyn_constraint_penalty", .name = "M = 0, default alpha (no mass to outweigh)",
     .ex = XARG, .prep = co_prep_zeroM, .recover = co_recover},
    {.fn = "cdyn_constraint_penalty", .name = "Phi_q rank deficient loaded (OK)", .ex = XOK,
     .prep = co_prep_rankdef, .recover = co_recover},
    {.fn = "cdyn_constraint_force", .name = "after load, before any formulation", .ex = XARG,
     .make = co_make_loaded, .recover = co_recover},
    {.fn = "cdyn_constraint_force", .name = "after a rank-deficient lagrange on a new load",
     .ex = XARG, .prep = co_prep_rankdef_lagrange, .recover = co_recover},
    {.fn = "cdyn_constraint_rank", .name = "after a rank-deficient lagrange", .ex = XV(1),
     .writes = 1, .prep = co_prep_rankdef_lagrange, .recover = co_recover},
    {.fn = "cdyn_constraint_redundant_rows", .name = "after a rank-deficient lagrange", .ex = XV(1),
     .writes = 1, .prep = co_prep_rankdef_lagrange, .recover = co_recover},
    {.fn = "cdyn_constraint_rank", .name = "before any formulation", .ex = XV(-1),
     .make = co_make_created, .recover = co_recover},
    {.fn = "cdyn_constraint_margin", .name = "before any load", .ex = XV(NAN),
     .make = co_make_created, .recover = co_recover},
    {.fn = "cdyn_constraint_reset_scales", .name = "before any load (OK)", .ex = XOK,
     .make = co_make_created, .recover = co_recover},
    {.fn = "cdyn_constraint_margin", .name = "after load, before any formulation", .ex = XV(NAN),
     .make = co_make_loaded, .recover = co_recover},
    {.fn = "cdyn_constraint_smallest_singular_value", .name = "after a full-rank lagrange",
     .ex = XV(NAN), .writes = 1},
    CO_UNLOADED("cdyn_constraint_lagrange"),
    CO_UNLOADED("cdyn_constraint_reactions"),
    CO_UNLOADED("cdyn_constraint_pseudoinverse"),
    CO_UNLOADED("cdyn_constraint_penalty"),
    CO_UNLOADED("cdyn_constraint_force"),
    {.fn = "cdyn_constraint_export", .variant = "reactions", .name = "before any load", .ex = XARG,
     .make = co_make_created, .recover = co_recover},
};

static const module MOD_CO = {
    .name = "constraint", .make = co_make, .destroy = co_destroy, .last_error = co_err,
    .probe = co_probe, .fns = CO_FNS, .nfns = (int)(sizeof CO_FNS / sizeof CO_FNS[0]),
    .hand = CO_HAND, .nhand = (int)(sizeof CO_HAND / sizeof CO_HAND[0])};

/* ======================================================================== */
/* Module: mbs (Cartesian pendulum, n = 2, m = 1)                            */

enum { MCB_MASS, MCB_FORCE, MCB_PHI, MCB_JAC, MCB_PHIT, MCB_XI, MCB_COUNT };
static const char *const MBS_CB[MCB_COUNT] = {"mass", "force", "phi", "jacobian", "phi_t", "xi"};

static const double MB_PERIOD[2] = {0.0, 6.283185307179586}; /* the bob's y angle-like */
static const double MB_MASS = 2.0, MB_LEN = 1.5, MB_G = 9.81;

/* m: constraints of the model (0, 1 = the rod, 2 = the rod and x fixed);
 * neg_mass: M = -m I. */
static struct {
    int m, neg_mass;
} g_mbs;

static int mb_mass(double t, const double *q, double *M, int ldm, void *user)
{
    int poison, rc = fault_hit(MCB_MASS, &poison);
    (void)t, (void)q, (void)user;
    if (rc) return rc;
    double s = g_mbs.neg_mass ? -MB_MASS : MB_MASS;
    M[0] = s;
    M[1] = 0.0;
    M[ldm] = 0.0;
    M[1 + ldm] = s;
    if (poison) M[0] = NAN;
    return 0;
}

static int mb_force(double t, const double *q, const double *qdot, double *Q, void *user)
{
    int poison, rc = fault_hit(MCB_FORCE, &poison);
    (void)t, (void)q, (void)qdot, (void)user;
    if (rc) return rc;
    Q[0] = 0.0;
    Q[1] = -MB_MASS * MB_G;
    if (poison) Q[1] = NAN;
    return 0;
}

static int mb_phi(double t, const double *q, double *Phi, void *user)
{
    int poison, rc = fault_hit(MCB_PHI, &poison);
    (void)t, (void)user;
    if (rc) return rc;
    if (g_mbs.m >= 1) Phi[0] = q[0] * q[0] + q[1] * q[1] - MB_LEN * MB_LEN;
    if (g_mbs.m >= 2) Phi[1] = q[0] - MB_LEN * sin(0.7);
    if (poison && g_mbs.m >= 1) Phi[0] = NAN;
    return 0;
}

static int mb_jac(double t, const double *q, double *J, int ld, void *user)
{
    int poison, rc = fault_hit(MCB_JAC, &poison);
    (void)t, (void)user;
    if (rc) return rc;
    if (g_mbs.m >= 1) {
        J[0] = 2.0 * q[0];
        J[ld] = 2.0 * q[1];
    }
    if (g_mbs.m >= 2) {
        J[1] = 1.0;
        J[1 + ld] = 0.0;
    }
    /* the whole row: a call may read only the columns it needs (Newton for
     * the dependent coordinate reads the dependent one), and a NaN in an
     * entry that is never read is no error */
    if (poison && g_mbs.m >= 1) J[0] = J[ld] = NAN;
    return 0;
}

static int mb_phi_t(double t, const double *q, double *Phi_t, void *user)
{
    int poison, rc = fault_hit(MCB_PHIT, &poison);
    (void)t, (void)q, (void)user;
    if (rc) return rc;
    for (int i = 0; i < g_mbs.m; ++i) Phi_t[i] = 0.0;
    if (poison && g_mbs.m >= 1) Phi_t[0] = NAN;
    return 0;
}

static int mb_xi(double t, const double *q, const double *qdot, double *xi, void *user)
{
    int poison, rc = fault_hit(MCB_XI, &poison);
    (void)t, (void)q, (void)user;
    if (rc) return rc;
    if (g_mbs.m >= 1) xi[0] = -2.0 * (qdot[0] * qdot[0] + qdot[1] * qdot[1]);
    if (g_mbs.m >= 2) xi[1] = 0.0;
    if (poison && g_mbs.m >= 1) xi[0] = NAN;
    return 0;
}

/* states y = [q; q'] at angle th from the downward vertical, rate thd */
static double MB_Y0[4], MB_Y1[4], MB_YP[4], MB_Z0[2], MB_Z1[2];
static const double MB_PIVOT[4] = {0.0, 0.0, 1.0, 0.0};
static const double MB_SCALE4[4] = {1.0, 1.0, 2.0, 2.0}, MB_SCALE2[2] = {1.0, 2.0};
static const double MB_QU[2] = {1.0, 0.0};

static void mb_state(double th, double thd, double *y)
{
    y[0] = MB_LEN * sin(th);
    y[1] = -MB_LEN * cos(th);
    y[2] = MB_LEN * cos(th) * thd;
    y[3] = MB_LEN * sin(th) * thd;
}

static cdyn_mbs *mb_new(int n, int m)
{
    g_mbs.m = m;
    g_mbs.neg_mass = 0;
    cdyn_mbs *mbs = cdyn_mbs_create(n, m, NULL);
    must(mbs != NULL, "cdyn_mbs_create");
    return mbs;
}

static void mb_to_ready(cdyn_mbs *mbs, int upto)
{
    double zd[2], yd[4];
    if (upto < 1) return;
    must(cdyn_mbs_set_model(mbs, mb_mass, mb_force, mb_phi, mb_jac, NULL) == CDYN_OK,
         "cdyn_mbs_set_model");
    must(cdyn_mbs_set_time_terms(mbs, mb_phi_t, mb_xi) == CDYN_OK, "cdyn_mbs_set_time_terms");
    if (upto < 2) return;
    must(cdyn_mbs_partition(mbs, 0.0, MB_Y0) == CDYN_OK, "cdyn_mbs_partition");
    if (upto < 3) return;
    must(cdyn_mbs_partition_rhs(mbs, 0.0, MB_Z0, zd) == CDYN_OK, "cdyn_mbs_partition_rhs");
    must(cdyn_mbs_rhs(mbs, 0.0, MB_Y0, yd) == CDYN_OK, "cdyn_mbs_rhs");
}

static void mbs_data_init(void)
{
    mb_state(0.7, 1.3, MB_Y0);
    mb_state(0.6, 1.0, MB_Y1);
    memcpy(MB_YP, MB_Y1, sizeof MB_YP);
    MB_YP[0] += 1e-3;
    MB_YP[3] += 1e-3;
    cdyn_mbs *mbs = mb_new(2, 1);
    mb_to_ready(mbs, 2);
    must(cdyn_mbs_partition_gather(mbs, MB_Y0, MB_Z0) == CDYN_OK, "cdyn_mbs_partition_gather");
    must(cdyn_mbs_partition_gather(mbs, MB_Y1, MB_Z1) == CDYN_OK, "cdyn_mbs_partition_gather");
    cdyn_mbs_free(mbs);
}

static void *mb_make(void)
{
    cdyn_mbs *mbs = mb_new(2, 1);
    mb_to_ready(mbs, 3);
    return mbs;
}
static void *mb_make_created(void) { return mb_new(2, 1); }
static void *mb_make_modelled(void)
{
    cdyn_mbs *mbs = mb_new(2, 1);
    mb_to_ready(mbs, 1);
    return mbs;
}
static void *mb_make_partitioned(void)
{
    cdyn_mbs *mbs = mb_new(2, 1);
    mb_to_ready(mbs, 2);
    return mbs;
}
static void *mb_make_m0(void)
{
    cdyn_mbs *mbs = mb_new(2, 0);
    mb_to_ready(mbs, 1);
    return mbs;
}
static void *mb_make_m2(void)
{
    cdyn_mbs *mbs = mb_new(2, 2);
    mb_to_ready(mbs, 1);
    return mbs;
}

static void *mb_make_mass_metric(void)
{
    cdyn_mbs *mbs = mb_make();
    must(cdyn_mbs_set_projection_metric(mbs, CDYN_PROJECT_MASS) == CDYN_OK,
         "cdyn_mbs_set_projection_metric");
    return mbs;
}

/* The standard object right after a successful projection (what
 * cdyn_mbs_project_tangent needs). */
static void *mb_make_projected(void)
{
    cdyn_mbs *mbs = mb_make();
    double y[4];
    memcpy(y, MB_YP, sizeof y);
    must(cdyn_mbs_project(mbs, 0.0, y) == CDYN_OK, "cdyn_mbs_project");
    return mbs;
}

static void mb_destroy(void *obj) { cdyn_mbs_free(obj); }
static const char *mb_err(const void *obj) { return cdyn_mbs_last_error(obj); }
static int mb_code(void *obj) { return cdyn_mbs_callback_code(obj); }
static void mb_recover_lifecycle(void *obj) { mb_to_ready(obj, 3); }
static void mb_prep_penalty(void *obj) { (void)cdyn_mbs_set_formulation(obj, CDYN_MBS_PENALTY); }
static void mb_prep_pinv(void *obj) { (void)cdyn_mbs_set_formulation(obj, CDYN_MBS_PSEUDOINVERSE); }
static void mb_prep_negmass(void *obj) { (void)obj; g_mbs.neg_mass = 1; }
static void mb_recover(void *obj)
{
    g_mbs.neg_mass = 0;
    (void)cdyn_mbs_set_formulation(obj, CDYN_MBS_LAGRANGE);
}

static void mb_probe(void *obj, double *out)
{
    cdyn_mbs *mbs = obj;
    pw w = {out, 0};
    double gf[2] = {0}, mu[2] = {0}, rp = 0, rv = 0, ys[4] = {0}, yd[4] = {0}, zd[4] = {0}, yp[4];
    int ind[2] = {-9, -9}, dep[2] = {-9, -9};
    put(&w, cdyn_mbs_last_reactions(mbs, gf, mu));
    putv(&w, gf, 2);
    putv(&w, mu, 2);
    put(&w, cdyn_mbs_last_residuals(mbs, &rp, &rv));
    put(&w, rp);
    put(&w, rv);
    double qc = 0, qb = 0;
    put(&w, cdyn_mbs_partition_quality(mbs, &qc, &qb));
    put(&w, qc);
    put(&w, qb);
    put(&w, cdyn_mbs_partition_state(mbs, 0.0, MB_Z0, ys));
    putv(&w, ys, 4);
    put(&w, cdyn_mbs_partition_coordinates(mbs, ind, dep));
    puti(&w, ind, 2);
    puti(&w, dep, 2);
    put(&w, cdyn_mbs_partition_event(mbs));
    put(&w, cdyn_mbs_rhs(mbs, 0.0, MB_Y0, yd));
    putv(&w, yd, 4);
    put(&w, cdyn_mbs_last_reactions(mbs, gf, mu));
    putv(&w, gf, 2);
    putv(&w, mu, 2);
    put(&w, cdyn_mbs_partition_rhs(mbs, 0.0, MB_Z1, zd));
    putv(&w, zd, 2);
    memcpy(yp, MB_YP, sizeof yp);
    put(&w, cdyn_mbs_project(mbs, 0.0, yp));
    putv(&w, yp, 4);
}

WRAP(w_mb_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    int m = SCI(1);
    g_mbs.m = m > 0 ? m : 0;
    cdyn_mbs *mbs = cdyn_mbs_create(SCI(0), m, st);
    create_outcome(o, mbs != NULL, st);
    cdyn_mbs_free(mbs);
}
WRAP(w_mb_free) { USE_ALL; cdyn_mbs_free(obj); }
WRAP(w_mb_set_model)
{
    USE_ALL;
    o->st = cdyn_mbs_set_model(obj, p[0] ? mb_mass : NULL, p[1] ? mb_force : NULL,
                               p[2] ? mb_phi : NULL, p[3] ? mb_jac : NULL, NULL);
}
WRAP(w_mb_set_time_terms)
{
    USE_ALL;
    o->st = cdyn_mbs_set_time_terms(obj, p[0] ? mb_phi_t : NULL, p[1] ? mb_xi : NULL);
}
WRAP(w_mb_check_jacobian) { USE_ALL; o->st = cdyn_mbs_check_jacobian(obj, sc[0], p[0], p[1]); }
WRAP(w_mb_set_formulation)
{
    USE_ALL;
    o->st = cdyn_mbs_set_formulation(obj, (cdyn_mbs_formulation)SCI(0));
}
WRAP(w_mb_constraint) { USE_ALL; o->val = cdyn_mbs_constraint(obj) != NULL; }
WRAP(w_mb_newton) { USE_ALL; o->val = cdyn_mbs_newton(obj) != NULL; }
WRAP(w_mb_set_metric)
{
    USE_ALL;
    o->st = cdyn_mbs_set_projection_metric(obj, (cdyn_mbs_metric)SCI(0));
}
WRAP(w_mb_set_periods) { USE_ALL; o->st = cdyn_mbs_set_periods(obj, p[0]); }
WRAP(w_mb_rhs) { USE_ALL; o->st = cdyn_mbs_rhs(obj, sc[0], p[0], p[1]); }
WRAP(w_mb_project) { USE_ALL; o->st = cdyn_mbs_project(obj, sc[0], p[0]); }
WRAP(w_mb_project_velocities) { USE_ALL; o->st = cdyn_mbs_project_velocities(obj, sc[0], p[0]); }
WRAP(w_mb_project_tangent) { USE_ALL; o->st = cdyn_mbs_project_tangent(obj, p[0]); }
WRAP(w_mb_reactions) { USE_ALL; o->st = cdyn_mbs_last_reactions(obj, p[0], p[1]); }
WRAP(w_mb_get_counters) { USE_ALL; o->st = cdyn_mbs_get_counters(obj, p[0]); }
WRAP(w_mb_reset_counters) { USE_ALL; o->st = cdyn_mbs_reset_counters(obj); }
WRAP(w_mb_residuals) { USE_ALL; o->st = cdyn_mbs_last_residuals(obj, p[0], p[1]); }
WRAP(w_mb_residuals_at) { USE_ALL; o->st = cdyn_mbs_residuals(obj, sc[0], p[0], p[1], p[2]); }
WRAP(w_mb_partition) { USE_ALL; o->st = cdyn_mbs_partition(obj, sc[0], p[0]); }
WRAP(w_mb_partition_coordinates) { USE_ALL; o->val = cdyn_mbs_partition_coordinates(obj, p[0], p[1]); }
WRAP(w_mb_partition_gather) { USE_ALL; o->st = cdyn_mbs_partition_gather(obj, p[0], p[1]); }
WRAP(w_mb_partition_rhs) { USE_ALL; o->st = cdyn_mbs_partition_rhs(obj, sc[0], p[0], p[1]); }
WRAP(w_mb_partition_jacobian)
{
    USE_ALL;
    o->st = cdyn_mbs_partition_jacobian(obj, sc[0], p[0], p[1], p[2], SCI(1));
}
WRAP(w_mb_partition_input_matrix)
{
    USE_ALL;
    o->st = cdyn_mbs_partition_input_matrix(obj, sc[0], p[0], SCI(1), p[1], SCI(2), p[2], SCI(3));
}
WRAP(w_mb_rhs_jacobian)
{
    USE_ALL;
    o->st = cdyn_mbs_rhs_jacobian(obj, sc[0], p[0], p[1], p[2], SCI(1));
}
WRAP(w_mb_partition_state) { USE_ALL; o->st = cdyn_mbs_partition_state(obj, sc[0], p[0], p[1]); }
WRAP(w_mb_partition_quality) { USE_ALL; o->st = cdyn_mbs_partition_quality(obj, p[0], p[1]); }
WRAP(w_mb_partition_event) { USE_ALL; o->val = cdyn_mbs_partition_event(obj); }
WRAP(w_mb_set_partition_limit) { USE_ALL; o->st = cdyn_mbs_set_partition_limit(obj, sc[0]); }
WRAP(w_mb_callback_code) { USE_ALL; o->val = cdyn_mbs_callback_code(obj); }
WRAP(w_mb_size) { USE_ALL; o->val = cdyn_mbs_size(obj); }
WRAP(w_mb_rows) { USE_ALL; o->val = cdyn_mbs_rows(obj); }
WRAP(w_mb_last_error) { USE_ALL; o->val = cdyn_mbs_last_error(obj) != NULL; }

static const fn_desc MB_FNS[] = {
    {.fn = "cdyn_mbs_create", .ret = R_STATUS, .arg = {A_STATUS},
     .sc = {SC("n", 2, 2, BV(0, XARG), BV(-1, XARG)), SC("m", 1, 2, BV(-1, XARG), BV(INT_MIN, XARG))},
     .call = w_mb_create},
    {.fn = "cdyn_mbs_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE, .flags = F_CONSUMES,
     .call = w_mb_free},
    {.fn = "cdyn_mbs_set_model", OBJ,
     .arg = {A_FN("mass"), A_FN("force"), A_FN("phi"), A_FN("jacobian")}, .call = w_mb_set_model},
    {.fn = "cdyn_mbs_set_time_terms", OBJ, .arg = {A_FN_OPT("phi_t"), A_FN_OPT("xi")},
     .call = w_mb_set_time_terms},
    {.fn = "cdyn_mbs_check_jacobian", OBJ, .arg = {A_IN("q", 2, 0, MB_Y1), A_JCHECK("report")},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_check_jacobian},
    {.fn = "cdyn_mbs_set_formulation", OBJ,
     .sc = {SC("formulation", CDYN_MBS_LAGRANGE, 3, BV(3, XARG), BV(-1, XARG), BV(INT_MAX, XARG))},
     .call = w_mb_set_formulation},
    {.fn = "cdyn_mbs_constraint", .ret = R_PTR, .has_obj = 1, .null_obj = XNULLU,
     .call = w_mb_constraint},
    {.fn = "cdyn_mbs_newton", .ret = R_PTR, .has_obj = 1, .null_obj = XNULLU, .call = w_mb_newton},
    {.fn = "cdyn_mbs_set_projection_metric", OBJ,
     .sc = {SC("metric", CDYN_PROJECT_MASS, 2, BV(2, XARG), BV(-1, XARG))}, .call = w_mb_set_metric},
    {.fn = "cdyn_mbs_set_periods", OBJ, .arg = {A_IN_NONNEG_OPT("period", 2, MB_PERIOD)},
     .call = w_mb_set_periods},
    {.fn = "cdyn_mbs_rhs", OBJ, .arg = {A_IN("y", 4, 0, MB_Y1), A_OUT("ydot", 4)},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_rhs},
    {.fn = "cdyn_mbs_project", OBJ, .arg = {A_INOUT("y", 4, MB_YP)}, .sc = {SC_T("t", 0.0)},
     .call = w_mb_project},
    {.fn = "cdyn_mbs_project", .variant = "mass metric", OBJ, .flags = F_CB_ONLY,
     .make = mb_make_mass_metric, .arg = {A_INOUT("y", 4, MB_YP)}, .sc = {SC_T("t", 0.0)},
     .call = w_mb_project},
    {.fn = "cdyn_mbs_project_velocities", OBJ, .arg = {A_INOUT("y", 4, MB_YP)},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_project_velocities},
    {.fn = "cdyn_mbs_project_velocities", .variant = "mass metric", OBJ, .flags = F_CB_ONLY,
     .make = mb_make_mass_metric, .arg = {A_INOUT("y", 4, MB_YP)}, .sc = {SC_T("t", 0.0)},
     .call = w_mb_project_velocities},
    {.fn = "cdyn_mbs_project_tangent", OBJ, .make = mb_make_projected,
     .arg = {A_INOUT("w", 4, MB_Y1)}, .call = w_mb_project_tangent},
    {.fn = "cdyn_mbs_last_reactions", OBJ,
     .arg = {A_OUT_OPT("generalized_force", 2), A_OUT_OPT("multipliers", 1)},
     .call = w_mb_reactions},
    {.fn = "cdyn_mbs_last_residuals", OBJ, .arg = {A_OUT_OPT("position", 1), A_OUT_OPT("velocity", 1)},
     .call = w_mb_residuals},
    {.fn = "cdyn_mbs_residuals", OBJ,
     .arg = {A_IN("y", 4, 0, MB_Y1), A_OUT_OPT("position", 1), A_OUT_OPT("velocity", 1)},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_residuals_at},
    {.fn = "cdyn_mbs_get_counters", OBJ, .arg = {A_OUT("counters", MBC_LEN)},
     .call = w_mb_get_counters},
    {.fn = "cdyn_mbs_reset_counters", OBJ, .call = w_mb_reset_counters},
    {.fn = "cdyn_mbs_partition", OBJ, .arg = {A_IN("y", 4, 0, MB_Y1)}, .sc = {SC_T("t", 0.0)},
     .call = w_mb_partition},
    {.fn = "cdyn_mbs_partition_coordinates", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1),
     .arg = {A_IOUT_OPT("independent", 1), A_IOUT_OPT("dependent", 1)},
     .call = w_mb_partition_coordinates},
    {.fn = "cdyn_mbs_partition_gather", OBJ, .arg = {A_IN("y", 4, 0, MB_Y1), A_OUT("z", 2)},
     .call = w_mb_partition_gather},
    {.fn = "cdyn_mbs_partition_rhs", OBJ, .arg = {A_IN("z", 2, 0, MB_Z1), A_OUT("zdot", 2)},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_partition_rhs},
    {.fn = "cdyn_mbs_partition_jacobian", OBJ,
     .arg = {A_IN("z", 2, 0, MB_Z1), A_IN_POS_OPT("scale", 2, MB_SCALE2), A_OUT("A", 4)},
     .sc = {SC_T("t", 0.0), SC_LD("lda", 2)}, .call = w_mb_partition_jacobian},
    {.fn = "cdyn_mbs_partition_input_matrix", OBJ,
     .arg = {A_IN("z", 2, 0, MB_Z1), A_IN("Qu", 2, 2, MB_QU), A_OUT("B", 2)},
     .sc = {SC_T("t", 0.0), SC("inputs", 1, 2, BV(0, XARG), BV(-1, XARG)), SC_LD("ldqu", 2),
            SC_LD("ldb", 2)},
     .call = w_mb_partition_input_matrix},
    {.fn = "cdyn_mbs_rhs_jacobian", OBJ,
     .arg = {A_IN("y", 4, 0, MB_Y1), A_IN_POS_OPT("scale", 4, MB_SCALE4), A_OUT("J", 16)},
     .sc = {SC_T("t", 0.0), SC_LD("ldj", 4)}, .call = w_mb_rhs_jacobian},
    {.fn = "cdyn_mbs_partition_state", OBJ, .arg = {A_IN("z", 2, 0, MB_Z1), A_OUT("y", 4)},
     .sc = {SC_T("t", 0.0)}, .call = w_mb_partition_state},
    {.fn = "cdyn_mbs_partition_quality", OBJ,
     .arg = {A_OUT_OPT("current", 1), A_OUT_OPT("best", 1)}, .call = w_mb_partition_quality},
    {.fn = "cdyn_mbs_partition_event", .ret = R_INT, .has_obj = 1, .null_obj = XVU(0),
     .call = w_mb_partition_event},
    {.fn = "cdyn_mbs_set_partition_limit", OBJ,
     .sc = {SC("limit", 20.0, 5, BV(0.5, XARG), BV(0.0, XARG), BV(-2.0, XARG), BV(NAN, XARG),
               BV(-INFINITY, XARG))},
     .call = w_mb_set_partition_limit},
    {.fn = "cdyn_mbs_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_mb_size},
    {.fn = "cdyn_mbs_rows", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_mb_rows},
    {.fn = "cdyn_mbs_callback_code", .ret = R_INT, .has_obj = 1, .null_obj = XVU(0),
     .call = w_mb_callback_code},
    {.fn = "cdyn_mbs_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULLU,
     .call = w_mb_last_error},
};

#define MB_EARLY(f, mk, why) \
    {.fn = f, .name = why, .ex = XARG, .make = mk, .recover = mb_recover_lifecycle}
#define MB_SIZE(f, mk, why) {.fn = f, .name = why, .ex = XARG, .make = mk}
static const hand_row MB_HAND[] = {
    {.fn = "cdyn_mbs_create", .name = "n = 2, m = 2 (m = n allowed)", .ex = XOK, .sc1 = 2, .v1 = 2},
    {.fn = "cdyn_mbs_create", .name = "n = 2, m = 3 (m > n allowed)", .ex = XOK, .sc1 = 2, .v1 = 3},
    {.fn = "cdyn_mbs_create", .name = "n = 1, m = 0 (smallest valid)", .ex = XOK, .sc1 = 1,
     .v1 = 1, .sc2 = 2, .v2 = 0},
    {.fn = "cdyn_mbs_rhs", .name = "at the pivot (Phi_q = 0, Lagrange)", .ex = XSING, .arg = 1,
     .data = MB_PIVOT},
    {.fn = "cdyn_mbs_rhs", .name = "at the pivot, penalty form (OK)", .ex = XOK, .arg = 1,
     .data = MB_PIVOT, .prep = mb_prep_penalty, .recover = mb_recover},
    {.fn = "cdyn_mbs_rhs", .name = "at the pivot, pseudo-inverse form (OK)", .ex = XOK, .arg = 1,
     .data = MB_PIVOT, .prep = mb_prep_pinv, .recover = mb_recover},
    {.fn = "cdyn_mbs_rhs", .name = "M = -m I (not SPD)", .ex = XSING, .prep = mb_prep_negmass,
     .recover = mb_recover},
    {.fn = "cdyn_mbs_partition", .name = "at the pivot (Phi_q = 0)", .ex = XSING, .arg = 1,
     .data = MB_PIVOT},
    {.fn = "cdyn_mbs_newton", .name = "m = 0", .ex = XNULL, .make = mb_make_m0},
    MB_SIZE("cdyn_mbs_partition", mb_make_m0, "m = 0 (needs 0 < m < n)"),
    MB_SIZE("cdyn_mbs_partition", mb_make_m2, "m = n = 2 (needs 0 < m < n)"),
    {.fn = "cdyn_mbs_partition_coordinates", .name = "m = n = 2", .ex = XV(-1), .make = mb_make_m2},
    MB_SIZE("cdyn_mbs_partition_gather", mb_make_m2, "m = n = 2"),
    MB_SIZE("cdyn_mbs_partition_rhs", mb_make_m2, "m = n = 2"),
    MB_SIZE("cdyn_mbs_partition_jacobian", mb_make_m2, "m = n = 2"),
    MB_SIZE("cdyn_mbs_partition_input_matrix", mb_make_m2, "m = n = 2"),
    MB_SIZE("cdyn_mbs_partition_state", mb_make_m2, "m = n = 2"),
    MB_SIZE("cdyn_mbs_partition_quality", mb_make_m2, "m = n = 2"),
    MB_EARLY("cdyn_mbs_rhs", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_residuals", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_project", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_project_velocities", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_partition", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_last_reactions", mb_make_modelled, "before any rhs"),
    MB_EARLY("cdyn_mbs_project_tangent", mb_make_modelled, "before any projection"),
    MB_EARLY("cdyn_mbs_last_residuals", mb_make_modelled, "before any rhs or projection"),
    {.fn = "cdyn_mbs_partition_coordinates", .name = "before partition", .ex = XV(-1),
     .make = mb_make_modelled, .recover = mb_recover_lifecycle},
    MB_EARLY("cdyn_mbs_partition_gather", mb_make_modelled, "before partition"),
    MB_EARLY("cdyn_mbs_partition_rhs", mb_make_modelled, "before partition"),
    MB_EARLY("cdyn_mbs_partition_jacobian", mb_make_modelled, "before partition"),
    MB_EARLY("cdyn_mbs_partition_input_matrix", mb_make_modelled, "before partition"),
    MB_EARLY("cdyn_mbs_rhs_jacobian", mb_make_created, "before set_model"),
    MB_EARLY("cdyn_mbs_partition_state", mb_make_modelled, "before partition"),
    MB_EARLY("cdyn_mbs_partition_quality", mb_make_modelled, "before partition"),
    {.fn = "cdyn_mbs_partition_state", .name = "after partition, before any partition_rhs (OK)",
     .ex = XOK, .make = mb_make_partitioned},
    {.fn = "cdyn_mbs_partition_quality", .name = "after partition, before any partition_rhs (OK)",
     .ex = XOK, .make = mb_make_partitioned},
    MB_EARLY("cdyn_mbs_check_jacobian", mb_make_created, "before set_model"),
    {.fn = "cdyn_mbs_check_jacobian", .name = "after set_model only (OK)", .ex = XOK,
     .make = mb_make_modelled},
    {.fn = "cdyn_mbs_check_jacobian", .name = "m = 0 (OK, empty report)", .ex = XOK,
     .make = mb_make_m0},
    {.fn = "cdyn_mbs_check_jacobian", .name = "m = n = 2 (OK)", .ex = XOK, .make = mb_make_m2},
    {.fn = "cdyn_mbs_check_jacobian", .name = "at the pivot q = 0 (OK: Phi_q = 0)", .ex = XOK,
     .arg = 1, .data = MB_PIVOT},
};

static const module MOD_MB = {
    .name = "mbs", .make = mb_make, .destroy = mb_destroy, .last_error = mb_err,
    .callback_code = mb_code, .probe = mb_probe, .ncb = MCB_COUNT, .cb_names = MBS_CB,
    .fns = MB_FNS, .nfns = (int)(sizeof MB_FNS / sizeof MB_FNS[0]), .hand = MB_HAND,
    .nhand = (int)(sizeof MB_HAND / sizeof MB_HAND[0])};

/* ======================================================================== */
/* Module: rigid (one body, f = 2: q = (z, theta) under a carriage-like      */
/* motion; the kinematics and preset parameters are packed into arrays of    */
/* exactly the fields each call reads, the rest is NaN to prove it ignored)  */

enum { RCB_MOTION, RCB_LOADS, RCB_COUNT };
static const char *const RIGID_CB[RCB_COUNT] = {"motion", "loads"};

_Static_assert(sizeof(cdyn_rigid_kinematics) == 66 * sizeof(double),
               "cdyn_rigid_kinematics is 66 doubles without padding");
enum { RG_KLEN = 66 };

static const double RG_MASS = 2.0;
static const double RG_I[9] = {1.0, 0.1, 0.0, 0.1, 2.0, 0.2, 0.0, 0.2, 3.0};
static const double RG_I_SKEW[9] = {1.0, 0.1, 0.0, 0.2, 2.0, 0.2, 0.0, 0.2, 3.0};
static const double RG_I_INDEF[9] = {1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0};
static const double RG_I_ZERO[9] = {0};
static const double RG_RPC[3] = {0.1, -0.1, 0.2};
/* J_T (3 x 2), J_R (3 x 2), L_T, L_R, v0_dot, w0, w0_dot, rotation (3 x 3) */
static const double RG_KIN[36] = {0, 0, 1, 0, 0, 0,   0, 0, 0, -0.6, 0.8, 0,
                                  0, 0, 0.1,          0.1, -0.05, 0,
                                  0.3, 0.1, 0,        0, 0, 0.4,
                                  0, 0, -0.2,         0.6, 0.8, 0, -0.8, 0.6, 0, 0, 0, 1};
static const double RG_KIN_SING[36] = {0, 0, 1, 0, 0, 0,   0, 0, 0, 0, 0, 0,
                                       0, 0, 0.1,          0.1, -0.05, 0,
                                       0.3, 0.1, 0,        0, 0, 0.4,
                                       0, 0, -0.2,         0.6, 0.8, 0, -0.8, 0.6, 0, 0, 0, 1};
/* J_T (3 x 2), J_R (3 x 2), v0, w0 */
static const double RG_VKIN[18] = {0, 0, 1, 0, 0, 0, 0, 0, 0, -0.6, 0.8, 0,
                                   0.2, -0.1, 0, 0, 0, 0.4};
static const double RG_QD[2] = {0.5, -1.0};
static const double RG_F[6] = {0.5, -1.5, -19.6, 0.1, -0.2, 0.3};
static const double RG_Y[4] = {0.1, 0.3, -0.2, 0.4};
static const double RG_ROT[9] = {0.6, 0.8, 0, -0.8, 0.6, 0, 0, 0, 1};
static const double RG_ZXZ[3] = {0.3, 0.5, -1.2}, RG_ZXZ_RATE[3] = {0.7, -0.2, 9.0};
static const double RG_ZXZ_SING[3] = {0.3, 1.5707963267948966, 1.5707963267948966};
static const double RG_Q6[6] = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6};
static const double RG_QD6[6] = {1.0, -0.5, 0.25, 0.3, 0.2, -0.1};
static const double RG_FREE_PARAMS[9] = {0}; /* FREE reads no parameter */
static const double RG_AXIS_ORIGIN[6] = {0.0, 0.6, 0.8, 1.0, -2.0, 0.5};
static const double RG_ZERO_AXIS[6] = {0.0, 0.0, 0.0, 1.0, -2.0, 0.5};
static const double RG_Z0_THETA0[2] = {-0.5, 0.2};
static const double RG_PHI0[1] = {0.15};

static struct {
    int singular;      /* the motion callback drops the pitch column */
    int carriage_mode; /* 0: the carriage is fine, 1: it fails, 2: it writes NaN */
} g_rigid;

static int rg_carriage(double t, double *pos, double *vel, double *acc, void *user)
{
    (void)user;
    if (g_rigid.carriage_mode == 1) return 7;
    pos[0] = 0.1 * sin(t), vel[0] = 0.1 * cos(t), acc[0] = -0.1 * sin(t);
    pos[1] = 0.2 * cos(t), vel[1] = -0.2 * sin(t), acc[1] = -0.2 * cos(t);
    pos[2] = 0.3 * t, vel[2] = 0.3, acc[2] = 0.0;
    if (g_rigid.carriage_mode == 2) acc[2] = NAN;
    return 0;
}

static int rg_motion(double t, const double *q, const double *qd, cdyn_rigid_kinematics *k,
                     void *user)
{
    int poison, rc = fault_hit(RCB_MOTION, &poison);
    (void)user;
    if (rc) return rc;
    cdyn_rigid_preset_params p = {.phi0 = 0.15, .carriage = rg_carriage};
    must(cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, &p, t, q, qd, k) == CDYN_OK,
         "cdyn_rigid_preset_eval in the motion callback");
    if (g_rigid.singular) k->J_R[3] = k->J_R[4] = k->J_R[5] = 0.0;
    if (poison) k->J_T[2] = NAN;
    return 0;
}

static int rg_loads(double t, const double *q, const double *qd, const cdyn_rigid_kinematics *k,
                    double *F_i, void *user)
{
    int poison, rc = fault_hit(RCB_LOADS, &poison);
    (void)t, (void)qd, (void)k, (void)user;
    if (rc) return rc;
    F_i[2] = -RG_MASS * 9.81;
    F_i[4] = -0.5 * q[1];
    if (poison) F_i[0] = NAN;
    return 0;
}

static void rg_nan_kinematics(cdyn_rigid_kinematics *k)
{
    double *d = (double *)k;
    for (int i = 0; i < RG_KLEN; ++i) d[i] = NAN;
}

/* RG_KIN layout into a struct (NULL stays NULL); unread fields NaN. */
static const cdyn_rigid_kinematics *rg_unpack(const double *p, cdyn_rigid_kinematics *k)
{
    if (!p) return NULL;
    rg_nan_kinematics(k);
    memcpy(k->J_T, p, 6 * sizeof(double));
    memcpy(k->J_R, p + 6, 6 * sizeof(double));
    memcpy(k->L_T, p + 12, 3 * sizeof(double));
    memcpy(k->L_R, p + 15, 3 * sizeof(double));
    memcpy(k->v0_dot, p + 18, 3 * sizeof(double));
    memcpy(k->w0, p + 21, 3 * sizeof(double));
    memcpy(k->w0_dot, p + 24, 3 * sizeof(double));
    memcpy(k->rotation, p + 27, 9 * sizeof(double));
    return k;
}

/* RG_VKIN layout (what cdyn_rigid_velocities reads). */
static const cdyn_rigid_kinematics *rg_unpack_vel(const double *p, cdyn_rigid_kinematics *k)
{
    if (!p) return NULL;
    rg_nan_kinematics(k);
    memcpy(k->J_T, p, 6 * sizeof(double));
    memcpy(k->J_R, p + 6, 6 * sizeof(double));
    memcpy(k->v0, p + 12, 3 * sizeof(double));
    memcpy(k->w0, p + 15, 3 * sizeof(double));
    return k;
}

/* Preset parameters with every field NaN (unused fields are ignored). */
static void rg_nan_params(cdyn_rigid_preset_params *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 3; ++i) p->axis[i] = p->origin[i] = NAN;
    p->z0 = p->theta0 = p->phi0 = NAN;
}

static cdyn_rigid *rg_new(void)
{
    g_rigid.singular = 0;
    g_rigid.carriage_mode = 0;
    cdyn_rigid *rb = cdyn_rigid_create(2, NULL);
    must(rb != NULL, "cdyn_rigid_create");
    return rb;
}

static void rg_set_body(cdyn_rigid *rb)
{
    must(cdyn_rigid_set_body(rb, RG_MASS, RG_I, 3, RG_RPC) == CDYN_OK, "cdyn_rigid_set_body");
}

static void rg_set_model(cdyn_rigid *rb)
{
    must(cdyn_rigid_set_model(rb, rg_motion, rg_loads, NULL) == CDYN_OK, "cdyn_rigid_set_model");
}

static void *rg_make_created(void) { return rg_new(); }
static void *rg_make_body(void)
{
    cdyn_rigid *rb = rg_new();
    rg_set_body(rb);
    return rb;
}
static void *rg_make_model_only(void)
{
    cdyn_rigid *rb = rg_new();
    rg_set_model(rb);
    return rb;
}
static void *rg_make_modelled(void)
{
    cdyn_rigid *rb = rg_make_body();
    rg_set_model(rb);
    return rb;
}
static void *rg_make(void)
{
    cdyn_rigid *rb = rg_make_modelled();
    double yd[4];
    must(cdyn_rigid_rhs(rb, 0.0, RG_Y, yd) == CDYN_OK, "cdyn_rigid_rhs");
    return rb;
}

static void rg_destroy(void *obj) { cdyn_rigid_free(obj); }
static const char *rg_err(const void *obj) { return cdyn_rigid_last_error(obj); }
static int rg_code(void *obj) { return cdyn_rigid_callback_code(obj); }
static void rg_prep_singular(void *obj) { (void)obj; g_rigid.singular = 1; }
static void rg_recover(void *obj) { (void)obj; g_rigid.singular = 0; }

static void rg_probe(void *obj, double *out)
{
    cdyn_rigid *rb = obj;
    pw w = {out, 0};
    cdyn_rigid_kinematics k, kv;
    double Fq[6] = {0}, qdd[2] = {0}, v[3] = {0}, om[3] = {0}, yd[4] = {0};
    put(&w, cdyn_rigid_last_constraint_loads(rb, Fq));
    putv(&w, Fq, 6);
    put(&w, cdyn_rigid_accelerations(rb, rg_unpack(RG_KIN, &k), RG_QD, RG_F, qdd, Fq));
    putv(&w, qdd, 2);
    putv(&w, Fq, 6);
    put(&w, cdyn_rigid_velocities(rb, rg_unpack_vel(RG_VKIN, &kv), RG_QD, v, om));
    putv(&w, v, 3);
    putv(&w, om, 3);
    put(&w, cdyn_rigid_rhs(rb, 0.3, RG_Y, yd));
    putv(&w, yd, 4);
    put(&w, cdyn_rigid_last_constraint_loads(rb, Fq));
    putv(&w, Fq, 6);
}

WRAP(w_rg_create)
{
    USE_ALL;
    cdyn_status *st = p[0];
    cdyn_rigid *rb = cdyn_rigid_create(SCI(0), st);
    create_outcome(o, rb != NULL, st);
    cdyn_rigid_free(rb);
}
WRAP(w_rg_free) { USE_ALL; cdyn_rigid_free(obj); }
WRAP(w_rg_set_body) { USE_ALL; o->st = cdyn_rigid_set_body(obj, sc[0], p[0], SCI(1), p[1]); }
WRAP(w_rg_accelerations)
{
    USE_ALL;
    cdyn_rigid_kinematics k;
    o->st = cdyn_rigid_accelerations(obj, rg_unpack(p[0], &k), p[1], p[2], p[3], p[4]);
}
WRAP(w_rg_velocities)
{
    USE_ALL;
    cdyn_rigid_kinematics k;
    o->st = cdyn_rigid_velocities(obj, rg_unpack_vel(p[0], &k), p[1], p[2], p[3]);
}
WRAP(w_rg_preset_free)
{
    USE_ALL;
    cdyn_rigid_preset_params prm;
    rg_nan_params(&prm);
    o->st = cdyn_rigid_preset_eval((cdyn_rigid_preset)SCI(1), p[0] ? &prm : NULL, sc[0], p[1],
                                   p[2], p[3]);
}
static void rg_preset_axis(cdyn_rigid_preset preset, void *const *p, const double *sc,
                           outcome *o)
{
    cdyn_rigid_preset_params prm;
    rg_nan_params(&prm);
    const double *ao = p[0];
    if (ao) memcpy(prm.axis, ao, 3 * sizeof(double)), memcpy(prm.origin, ao + 3, 3 * sizeof(double));
    o->st = cdyn_rigid_preset_eval(preset, ao ? &prm : NULL, sc[0], p[1], p[2], p[3]);
}
WRAP(w_rg_preset_rotation) { USE_ALL; rg_preset_axis(CDYN_RIGID_ROTATION, p, sc, o); }
WRAP(w_rg_preset_translation) { USE_ALL; rg_preset_axis(CDYN_RIGID_TRANSLATION, p, sc, o); }
WRAP(w_rg_preset_maneuver4)
{
    USE_ALL;
    cdyn_rigid_preset_params prm;
    rg_nan_params(&prm);
    const double *zt = p[0];
    if (zt) prm.z0 = zt[0], prm.theta0 = zt[1];
    o->st = cdyn_rigid_preset_eval(CDYN_RIGID_MANEUVER4, zt ? &prm : NULL, sc[0], p[1], p[2],
                                   p[3]);
}
WRAP(w_rg_preset_carriage)
{
    USE_ALL;
    cdyn_rigid_preset_params prm;
    rg_nan_params(&prm);
    const double *ph = p[0];
    if (ph) prm.phi0 = ph[0];
    prm.carriage = p[1] ? rg_carriage : NULL;
    g_rigid.carriage_mode = SCI(1);
    o->st = cdyn_rigid_preset_eval(CDYN_RIGID_CARRIAGE, ph ? &prm : NULL, sc[0], p[2], p[3], p[4]);
    g_rigid.carriage_mode = 0;
}
WRAP(w_rg_preset_dof) { USE_ALL; o->val = cdyn_rigid_preset_dof((cdyn_rigid_preset)SCI(0)); }
WRAP(w_rg_euler_zxz) { USE_ALL; o->st = cdyn_rigid_euler_zxz(p[0], p[1], p[2], p[3]); }
WRAP(w_rg_load_about_p)
{
    USE_ALL;
    cdyn_rigid_kinematics k, *kp = NULL;
    if (p[0]) {
        rg_nan_kinematics(&k);
        memcpy(k.rotation, p[0], 9 * sizeof(double));
        kp = &k;
    }
    o->st = cdyn_rigid_load_about_p(obj, kp, p[1], p[2]);
}
WRAP(w_rg_set_model)
{
    USE_ALL;
    o->st = cdyn_rigid_set_model(obj, p[0] ? rg_motion : NULL, p[1] ? rg_loads : NULL, NULL);
}
/* the module's own motion (rg_motion) as a preset: CARRIAGE, phi0 = 0.15 */
WRAP(w_rg_set_preset)
{
    USE_ALL;
    cdyn_rigid_preset_params prm;
    rg_nan_params(&prm);
    const double *ph = p[0];
    if (ph) prm.phi0 = ph[0];
    prm.carriage = p[1] ? rg_carriage : NULL;
    o->st = cdyn_rigid_set_preset(obj, (cdyn_rigid_preset)SCI(0), ph ? &prm : NULL,
                                  p[2] ? rg_loads : NULL, NULL);
}
WRAP(w_rg_rhs) { USE_ALL; o->st = cdyn_rigid_rhs(obj, sc[0], p[0], p[1]); }
WRAP(w_rg_constraint_loads) { USE_ALL; o->st = cdyn_rigid_last_constraint_loads(obj, p[0]); }
WRAP(w_rg_callback_code) { USE_ALL; o->val = cdyn_rigid_callback_code(obj); }
WRAP(w_rg_size) { USE_ALL; o->val = cdyn_rigid_size(obj); }
WRAP(w_rg_last_error) { USE_ALL; o->val = cdyn_rigid_last_error(obj) != NULL; }

#define RG_PRESET_SC SC("preset", CDYN_RIGID_FREE, 3, BV(6, XARG), BV(-1, XARG), BV(INT_MAX, XARG))
static const fn_desc RG_FNS[] = {
    {.fn = "cdyn_rigid_create", .ret = R_STATUS, .arg = {A_STATUS},
     .sc = {SC("f", 2, 4, BV(0, XARG), BV(-1, XARG), BV(7, XARG), BV(INT_MIN, XARG))},
     .call = w_rg_create},
    {.fn = "cdyn_rigid_free", .ret = R_VOID, .has_obj = 1, .null_obj = XNONE, .flags = F_CONSUMES,
     .call = w_rg_free},
    {.fn = "cdyn_rigid_set_body", OBJ,
     .arg = {A_IN_SYM("inertia", 9, 3, RG_I), A_IN_OPT("r_pc", 3, 0, RG_RPC, NUL_OK)},
     .sc = {SC("mass", 2.0, 5, BV(0.0, XARG), BV(-1.0, XARG), BV(NAN, XNF), BV(INFINITY, XNF),
               BV(-INFINITY, XNF)),
            SC_LD("ldi", 3)},
     .call = w_rg_set_body},
    {.fn = "cdyn_rigid_accelerations", OBJ,
     .arg = {A_IN("k", 36, 0, RG_KIN), A_IN("qdot", 2, 0, RG_QD), A_IN("F_i", 6, 0, RG_F),
             A_OUT("qdd", 2), A_OUT_OPT("F_q", 6)},
     .call = w_rg_accelerations},
    {.fn = "cdyn_rigid_velocities", OBJ,
     .arg = {A_IN("k", 18, 0, RG_VKIN), A_IN("qdot", 2, 0, RG_QD), A_OUT_OPT("v_p", 3),
             A_OUT_OPT("omega", 3)},
     .call = w_rg_velocities},
    {.fn = "cdyn_rigid_preset_eval", .variant = "FREE", .ret = R_STATUS,
     .arg = {A_IN_IGNORED("params", 9, RG_FREE_PARAMS), A_IN("q", 6, 0, RG_Q6),
             A_IN("qdot", 6, 0, RG_QD6), A_OUT("k", RG_KLEN)},
     .sc = {SC_T("t", 0.4), RG_PRESET_SC}, .call = w_rg_preset_free},
    {.fn = "cdyn_rigid_preset_eval", .variant = "ROTATION", .ret = R_STATUS,
     .arg = {A_IN("params (axis, origin)", 6, 0, RG_AXIS_ORIGIN), A_IN("q", 1, 0, RG_Q6),
             A_IN("qdot", 1, 0, RG_QD6), A_OUT("k", RG_KLEN)},
     .sc = {SC_T("t", 0.4)}, .call = w_rg_preset_rotation},
    {.fn = "cdyn_rigid_preset_eval", .variant = "TRANSLATION", .ret = R_STATUS,
     .arg = {A_IN("params (axis, origin)", 6, 0, RG_AXIS_ORIGIN), A_IN("q", 1, 0, RG_Q6),
             A_IN("qdot", 1, 0, RG_QD6), A_OUT("k", RG_KLEN)},
     .sc = {SC_T("t", 0.4)}, .call = w_rg_preset_translation},
    {.fn = "cdyn_rigid_preset_eval", .variant = "MANEUVER4", .ret = R_STATUS,
     .arg = {A_IN("params (z0, theta0)", 2, 0, RG_Z0_THETA0), A_IN("q", 4, 0, RG_Q6),
             A_IN("qdot", 4, 0, RG_QD6), A_OUT("k", RG_KLEN)},
     .sc = {SC_T("t", 0.4)}, .call = w_rg_preset_maneuver4},
    {.fn = "cdyn_rigid_preset_eval", .variant = "CARRIAGE", .ret = R_STATUS,
     .arg = {A_IN("params (phi0)", 1, 0, RG_PHI0), A_FN("carriage"), A_IN("q", 2, 0, RG_Q6),
             A_IN("qdot", 2, 0, RG_QD6), A_OUT("k", RG_KLEN)},
     .sc = {SC_T("t", 0.4), {.name = "carriage behaviour (hand rows only)", .valid = 0}},
     .call = w_rg_preset_carriage},
    {.fn = "cdyn_rigid_preset_dof", .ret = R_INT,
     .sc = {SC("preset", CDYN_RIGID_FIXED_POINT, 3, BV(6, XV(-1)), BV(-1, XV(-1)),
               BV(INT_MAX, XV(-1)))},
     .call = w_rg_preset_dof},
    {.fn = "cdyn_rigid_euler_zxz", .ret = R_STATUS,
     .arg = {A_IN("zxz", 3, 0, RG_ZXZ), A_IN("zxz_rate", 3, 0, RG_ZXZ_RATE), A_OUT("q", 3),
             A_OUT("qdot", 3)},
     .call = w_rg_euler_zxz},
    {.fn = "cdyn_rigid_load_about_p", OBJ,
     .arg = {A_IN("k (rotation)", 9, 0, RG_ROT), A_IN("F", 6, 0, RG_F), A_OUT("F_p", 6)},
     .call = w_rg_load_about_p},
    {.fn = "cdyn_rigid_set_model", OBJ, .arg = {A_FN("motion"), A_FN_OPT("loads")},
     .call = w_rg_set_model},
    {.fn = "cdyn_rigid_set_preset", OBJ,
     .arg = {A_IN("params (phi0)", 1, 0, RG_PHI0), A_FN("params.carriage"), A_FN_OPT("loads")},
     .sc = {SC("preset", CDYN_RIGID_CARRIAGE, 3, BV(99, XARG), BV(-1, XARG),
               BV(CDYN_RIGID_FREE, XARG))},
     .call = w_rg_set_preset},
    {.fn = "cdyn_rigid_rhs", OBJ, .arg = {A_IN("y", 4, 0, RG_Y), A_OUT("ydot", 4)},
     .sc = {SC_T("t", 0.3)}, .call = w_rg_rhs},
    {.fn = "cdyn_rigid_last_constraint_loads", OBJ, .arg = {A_OUT("F_q", 6)},
     .call = w_rg_constraint_loads},
    {.fn = "cdyn_rigid_size", .ret = R_INT, .has_obj = 1, .null_obj = XV(-1), .call = w_rg_size},
    {.fn = "cdyn_rigid_callback_code", .ret = R_INT, .has_obj = 1, .null_obj = XV(0),
     .call = w_rg_callback_code},
    {.fn = "cdyn_rigid_last_error", .ret = R_STR, .has_obj = 1, .null_obj = XNONNULL,
     .call = w_rg_last_error},
};

#define RG_EARLY(f, mk, why) {.fn = f, .name = why, .ex = XARG, .make = mk}
static const hand_row RG_HAND[] = {
    {.fn = "cdyn_rigid_create", .name = "f = 1 (smallest)", .ex = XOK, .sc1 = 1, .v1 = 1},
    {.fn = "cdyn_rigid_create", .name = "f = 6 (largest)", .ex = XOK, .sc1 = 1, .v1 = 6},
    {.fn = "cdyn_rigid_set_body", .name = "inertia not symmetric", .ex = XSING, .arg = 1,
     .data = RG_I_SKEW},
    {.fn = "cdyn_rigid_set_body", .name = "inertia indefinite", .ex = XSING, .arg = 1,
     .data = RG_I_INDEF},
    {.fn = "cdyn_rigid_set_body", .name = "inertia zero", .ex = XSING, .arg = 1,
     .data = RG_I_ZERO},
    {.fn = "cdyn_rigid_accelerations", .name = "a coordinate that moves nothing", .ex = XSING,
     .arg = 1, .data = RG_KIN_SING},
    RG_EARLY("cdyn_rigid_accelerations", rg_make_created, "before set_body"),
    RG_EARLY("cdyn_rigid_load_about_p", rg_make_created, "before set_body"),
    {.fn = "cdyn_rigid_euler_zxz", .name = "pitch -pi/2 (z-y-x angles singular)", .ex = XSING,
     .arg = 1, .data = RG_ZXZ_SING},
    {.fn = "cdyn_rigid_velocities", .name = "before set_body (needs none)", .ex = XOK,
     .make = rg_make_created},
    {.fn = "cdyn_rigid_preset_eval", .variant = "ROTATION", .name = "zero axis", .ex = XARG,
     .arg = 1, .data = RG_ZERO_AXIS},
    {.fn = "cdyn_rigid_preset_eval", .variant = "TRANSLATION", .name = "zero axis", .ex = XARG,
     .arg = 1, .data = RG_ZERO_AXIS},
    {.fn = "cdyn_rigid_preset_eval", .variant = "CARRIAGE", .name = "carriage callback fails",
     .ex = XS(CDYN_ERR_CALLBACK), .sc1 = 2, .v1 = 1},
    {.fn = "cdyn_rigid_preset_eval", .variant = "CARRIAGE", .name = "carriage callback writes NaN",
     .ex = XNF, .sc1 = 2, .v1 = 2},
    {.fn = "cdyn_rigid_rhs", .name = "coordinates lose rank", .ex = XSING,
     .prep = rg_prep_singular, .recover = rg_recover},
    RG_EARLY("cdyn_rigid_rhs", rg_make_body, "before set_model"),
    RG_EARLY("cdyn_rigid_rhs", rg_make_model_only, "before set_body"),
    RG_EARLY("cdyn_rigid_last_constraint_loads", rg_make_modelled, "before any rhs"),
};

static const module MOD_RG = {
    .name = "rigid", .make = rg_make, .destroy = rg_destroy, .last_error = rg_err,
    .callback_code = rg_code, .probe = rg_probe, .ncb = RCB_COUNT, .cb_names = RIGID_CB,
    .fns = RG_FNS, .nfns = (int)(sizeof RG_FNS / sizeof RG_FNS[0]), .hand = RG_HAND,
    .nhand = (int)(sizeof RG_HAND / sizeof RG_HAND[0])};

static const module *const MODULES[] = {&MOD_STATUS, &MOD_NS, &MOD_NT, &MOD_DAE,
                                       &MOD_CO,     &MOD_MB, &MOD_RG};
enum { NMODULES = (int)(sizeof MODULES / sizeof MODULES[0]) };

/* ======================================================================== */
/* Row generation.                                                           */

static int nargs(const fn_desc *d)
{
    int n = 0;
    while (n < MAXARG && d->arg[n].name) ++n;
    return n;
}

static int nscal(const fn_desc *d)
{
    int n = 0;
    while (n < MAXSC && d->sc[n].name) ++n;
    return n;
}

static const char *fn_label(const fn_desc *d, char *buf, size_t n)
{
    if (d->variant)
        snprintf(buf, n, "%s [%s]", d->fn, d->variant);
    else
        snprintf(buf, n, "%s", d->fn);
    return buf;
}

typedef struct {
    row *r;
    int n, cap;
} rowlist;

static row *row_add(rowlist *L, const fn_desc *d, expect ex, const char *fmt, ...)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        L->r = realloc(L->r, sizeof(row) * (size_t)L->cap);
        must(L->r != NULL, "out of memory");
    }
    row *r = &L->r[L->n++];
    memset(r, 0, sizeof *r);
    r->d = d;
    r->ex = ex;
    r->null_arg = r->poison_arg = r->repl_arg = r->cb = -1;
    r->sc_i[0] = r->sc_i[1] = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->name, sizeof r->name, fmt, ap);
    va_end(ap);
    r->fails = ex.kind == EX_STATUS ? ex.st != CDYN_OK : ex.kind == EX_VALUE || ex.kind == EX_NULL;
    return r;
}

static const char *valname(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "NaN");
    else if (isinf(v))
        snprintf(buf, n, "%sInf", v > 0 ? "+" : "-");
    else
        snprintf(buf, n, "%.10g", v);
    return buf;
}

static void *maker_of(const module *m, const fn_desc *d, void *(*row_make)(void))
{
    if (!d->has_obj) return NULL;
    void *(*mk)(void) = row_make ? row_make : d->make ? d->make : m->make;
    return mk();
}

/* ---- argument vectors --------------------------------------------------- */

typedef struct {
    void *buf[MAXARG];
    void *p[MAXARG];
    double *snap[MAXARG];
    double sc[MAXSC];
} argset;

static int is_ikind(arg_kind k) { return k == K_IIN || k == K_IOUT || k == K_STATUS; }

static void args_build(argset *s, const fn_desc *d, const row *r)
{
    memset(s, 0, sizeof *s);
    int na = nargs(d), ns = nscal(d);
    for (int i = 0; i < na; ++i) {
        const arg_spec *a = &d->arg[i];
        size_t len = (size_t)a->len;
        if (a->kind == K_FN) {
            s->p[i] = &g_fn_marker;
        } else if (is_ikind(a->kind)) {
            int *b = ibuf(len);
            if (a->kind == K_IIN) memcpy(b, a->idata, sizeof(int) * len);
            s->buf[i] = s->p[i] = b;
        } else {
            double *b = dbuf(len);
            if (a->kind == K_IN || a->kind == K_INOUT) {
                const double *src = (r && r->repl_arg == i) ? r->repl : a->data;
                memcpy(b, src, sizeof(double) * len);
                if (r && r->poison_arg == i)
                    for (int k = 0; k < r->npos; ++k) b[r->pos[k]] = r->pval;
                s->snap[i] = malloc(sizeof(double) * len);
                must(s->snap[i] != NULL, "out of memory");
                memcpy(s->snap[i], b, sizeof(double) * len);
            }
            s->buf[i] = s->p[i] = b;
        }
        if (r && r->null_arg == i) s->p[i] = NULL;
    }
    for (int j = 0; j < ns; ++j) s->sc[j] = d->sc[j].valid;
    if (r)
        for (int k = 0; k < 2; ++k)
            if (r->sc_i[k] >= 0) s->sc[r->sc_i[k]] = r->sc_v[k];
}

static void args_free(argset *s, const fn_desc *d)
{
    int na = nargs(d);
    for (int i = 0; i < na; ++i) {
        if (d->arg[i].kind == K_FN) continue;
        if (is_ikind(d->arg[i].kind))
            ibuf_free(s->buf[i]);
        else
            dbuf_free(s->buf[i]);
        free(s->snap[i]);
    }
}

static void do_call(const fn_desc *d, void *obj, const argset *s, outcome *o)
{
    memset(o, 0, sizeof *o);
    o->st = (cdyn_status)-99;
    o->val = NAN;
    d->call(obj, s->p, s->sc, o);
}

static size_t alen(const arg_spec *a) { return (size_t)a->len; }

static int all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void addwhy(char *why, size_t n, const char *fmt, ...)
{
    size_t used = strlen(why);
    if (used + 4 >= n) return;
    if (used) {
        strcat(why, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + used, n - used, fmt, ap);
    va_end(ap);
}

/* Failure: outputs untouched (guards included), inputs unchanged. */
static void check_untouched(const fn_desc *d, const argset *s, int inout_free, char *why, size_t wn)
{
    int na = nargs(d);
    for (int i = 0; i < na; ++i) {
        const arg_spec *a = &d->arg[i];
        size_t len = alen(a);
        switch (a->kind) {
        case K_OUT:
        case K_REPORT:
        case K_JCHECK:
            if (!dbuf_untouched(s->buf[i], len)) addwhy(why, wn, "output %s written", a->name);
            break;
        case K_IOUT:
            if (!ibuf_untouched(s->buf[i], len)) addwhy(why, wn, "output %s written", a->name);
            break;
        case K_IIN:
            if (!ibuf_guards_intact(s->buf[i], len) ||
                memcmp(s->buf[i], a->idata, sizeof(int) * len) != 0)
                addwhy(why, wn, "input %s changed", a->name);
            break;
        case K_INOUT:
            if (inout_free) {
                if (!dbuf_guards_intact(s->buf[i], len) || !all_finite(s->buf[i], len))
                    addwhy(why, wn, "%s: guards hit or non-finite best iterate", a->name);
                break;
            }
            /* fall through */
        case K_IN:
            if (!dbuf_guards_intact(s->buf[i], len) ||
                memcmp(s->buf[i], s->snap[i], sizeof(double) * len) != 0)
                addwhy(why, wn, "%s %s changed", a->kind == K_IN ? "input" : "in/out", a->name);
            break;
        default:
            break;
        }
    }
}

/* Success: nothing outside the arrays, const inputs unchanged. */
static void check_guards(const fn_desc *d, const argset *s, char *why, size_t wn)
{
    int na = nargs(d);
    for (int i = 0; i < na; ++i) {
        const arg_spec *a = &d->arg[i];
        size_t len = alen(a);
        if (a->kind == K_FN) continue;
        int ok = is_ikind(a->kind) ? ibuf_guards_intact(s->buf[i], len)
                                   : dbuf_guards_intact(s->buf[i], len);
        if (!ok) addwhy(why, wn, "guard of %s overwritten", a->name);
        if (a->kind == K_IN && memcmp(s->buf[i], s->snap[i], sizeof(double) * len) != 0)
            addwhy(why, wn, "input %s changed", a->name);
    }
}

static int report_equal(const cdyn_newton_report *a, const cdyn_newton_report *b)
{
    return a->converged == b->converged && a->iterations == b->iterations &&
           a->residual_evaluations == b->residual_evaluations && a->svd_steps == b->svd_steps &&
           a->backtracks == b->backtracks && a->rank == b->rank &&
           a->callback_code == b->callback_code &&
           memcmp(&a->residual_norm, &b->residual_norm, sizeof(double)) == 0 &&
           memcmp(&a->step_norm, &b->step_norm, sizeof(double)) == 0 &&
           memcmp(&a->smallest_kept, &b->smallest_kept, sizeof(double)) == 0 &&
           memcmp(&a->largest_dropped, &b->largest_dropped, sizeof(double)) == 0 &&
           memcmp(&a->residual_ratio, &b->residual_ratio, sizeof(double)) == 0 &&
           memcmp(&a->error_ratio, &b->error_ratio, sizeof(double)) == 0;
}

static int jcheck_equal(const cdyn_jacobian_check *a, const cdyn_jacobian_check *b)
{
    return a->row == b->row && a->col == b->col && a->suspect == b->suspect &&
           memcmp(&a->worst, &b->worst, sizeof(double)) == 0 &&
           memcmp(&a->given, &b->given, sizeof(double)) == 0 &&
           memcmp(&a->estimate, &b->estimate, sizeof(double)) == 0;
}

/* Outputs (written arrays, guards included) bit for bit; arguments passed
 * as NULL in either call are skipped. */
static void compare_outputs(const fn_desc *d, const argset *x, const argset *y, const char *what,
                            char *why, size_t wn)
{
    int na = nargs(d);
    for (int i = 0; i < na; ++i) {
        const arg_spec *a = &d->arg[i];
        size_t len = alen(a);
        if (!x->p[i] || !y->p[i]) continue;
        int same = 1;
        switch (a->kind) {
        case K_OUT:
        case K_INOUT:
            same = memcmp((const double *)x->buf[i] - GUARD, (const double *)y->buf[i] - GUARD,
                          sizeof(double) * (len + 2 * GUARD)) == 0;
            break;
        case K_IOUT:
        case K_STATUS:
            same = memcmp((const int *)x->buf[i] - GUARD, (const int *)y->buf[i] - GUARD,
                          sizeof(int) * (len + 2 * GUARD)) == 0;
            break;
        case K_REPORT:
            same = report_equal(x->buf[i], y->buf[i]);
            break;
        case K_JCHECK:
            same = jcheck_equal(x->buf[i], y->buf[i]);
            break;
        default:
            break;
        }
        if (!same) addwhy(why, wn, "%s: %s differs from a fresh object's", what, a->name);
    }
}

static const char *stname(cdyn_status s)
{
    static const char *const names[] = {"OK",           "ERR_ARG",      "ERR_NONFINITE",
                                        "ERR_SINGULAR", "ERR_NOCONV",   "ERR_CALLBACK",
                                        "ERR_NOMEM",    "ERR_LAPACK",   "ERR_BUSY"};
    return ((int)s >= 0 && (int)s < 9) ? names[s] : "(not a status)";
}

static void describe_ex(const expect *e, char *buf, size_t n)
{
    switch (e->kind) {
    case EX_STATUS: snprintf(buf, n, "CDYN_%s", stname(e->st)); break;
    case EX_VALUE: snprintf(buf, n, "value %g", e->val); break;
    case EX_NULL: snprintf(buf, n, "NULL"); break;
    case EX_NONNULL: snprintf(buf, n, "non-NULL"); break;
    case EX_NONE: snprintf(buf, n, "no crash"); break;
    case EX_SAME: snprintf(buf, n, "the result of the full call"); break;
    }
}

static void describe_got(const fn_desc *d, const outcome *o, char *buf, size_t n)
{
    switch (d->ret) {
    case R_STATUS: snprintf(buf, n, "CDYN_%s (%d)", stname(o->st), (int)o->st); break;
    case R_PTR:
    case R_STR: snprintf(buf, n, "%s", o->val != 0 ? "non-NULL" : "NULL"); break;
    case R_VOID: snprintf(buf, n, "returned"); break;
    default: snprintf(buf, n, "value %g", o->val); break;
    }
}

static int ex_holds(const expect *e, const fn_desc *d, const outcome *o, const outcome *first)
{
    switch (e->kind) {
    case EX_STATUS: return o->st == e->st;
    case EX_VALUE: return o->val == e->val || (isnan(o->val) && isnan(e->val));
    case EX_NULL: return o->val == 0;
    case EX_NONNULL: return o->val == 1;
    case EX_NONE: return 1;
    case EX_SAME:
        return d->ret == R_STATUS ? o->st == first->st
                                  : memcmp(&o->val, &first->val, sizeof(double)) == 0;
    }
    return 0;
}

/* Count the calls each callback gets from the full call on a fresh object. */
static void count_calls(const module *m, const fn_desc *d, int *calls)
{
    memset(calls, 0, sizeof(int) * MAXCB);
    if (!m->ncb || !d->has_obj || d->ret != R_STATUS || (d->flags & F_CONSUMES)) return;
    void *obj = maker_of(m, d, NULL);
    argset s;
    outcome o;
    args_build(&s, d, NULL);
    fault_disarm();
    do_call(d, obj, &s, &o);
    memcpy(calls, g_fault.calls, sizeof(int) * MAXCB);
    fault_disarm();
    args_free(&s, d);
    m->destroy(obj);
}

static void gen_rows(const module *m, rowlist *L)
{
    char vb[32];
    for (int f = 0; f < m->nfns; ++f) {
        const fn_desc *d = &m->fns[f];
        int na = nargs(d), ns = nscal(d);
        if (!(d->flags & F_CB_ONLY)) {
            /* NULL object */
            if (d->has_obj) {
                row *r = row_add(L, d, d->null_obj, "NULL object%s",
                                 d->null_obj.undocumented ? " (undocumented)" : "");
                r->null_obj = 1;
                r->fails = 1;
            }
            for (int i = 0; i < na; ++i) {
                const arg_spec *a = &d->arg[i];
                /* NULL pointer argument */
                expect ex = XARG;
                if (a->onnull == NUL_SAME) {
                    ex.kind = EX_SAME;
                } else if (a->onnull == NUL_OK) {
                    expect okx = XOK;
                    ex = okx;
                }
                row *r = row_add(L, d, ex, "%s = NULL%s", a->name,
                                 a->onnull == NUL_ERR ? "" : " (allowed)");
                r->null_arg = i;
                /* non-finite (and non-positive) entries of input arrays */
                if ((a->kind != K_IN && a->kind != K_INOUT) || a->ignored) continue;
                size_t pos[3];
                int np = 0;
                pos[np++] = 0;
                if (a->len > 2) pos[np++] = (size_t)a->len / 2;
                if (a->len > 1) pos[np++] = (size_t)a->len - 1;
                /* settings (positive / nonneg arrays) are refused with
                 * CDYN_ERR_ARG, data with CDYN_ERR_NONFINITE; 0 is a bad
                 * value only for positive arrays */
                double badv[5] = {NAN, INFINITY, -INFINITY, 0.0, -1.0};
                int nb = a->positive ? 5 : a->nonneg ? 4 : 3;
                if (a->nonneg) badv[3] = -1.0;
                for (int k = 0; k < np; ++k)
                    for (int b = 0; b < nb; ++b) {
                        expect e = (a->positive || a->nonneg) ? (expect)XARG : (expect)XNF;
                        char where[48];
                        size_t p0 = pos[k], p1 = pos[k];
                        if (a->rows > 0) {
                            int ri = (int)(p0 % (size_t)a->rows), cj = (int)(p0 / (size_t)a->rows);
                            if (a->sym && ri != cj) {
                                p1 = (size_t)cj + (size_t)ri * (size_t)a->rows;
                                snprintf(where, sizeof where, "(%d,%d) and (%d,%d)", ri, cj, cj, ri);
                            } else {
                                snprintf(where, sizeof where, "(%d,%d)", ri, cj);
                            }
                        } else {
                            snprintf(where, sizeof where, "[%d]", (int)p0);
                        }
                        row *q = row_add(L, d, e, "%s%s = %s", a->name, where,
                                         valname(badv[b], vb, sizeof vb));
                        q->poison_arg = i;
                        q->npos = p1 != p0 ? 2 : 1;
                        q->pos[0] = p0;
                        q->pos[1] = p1;
                        q->pval = badv[b];
                    }
            }
            /* bad scalars */
            for (int j = 0; j < ns; ++j) {
                const scalar_spec *s = &d->sc[j];
                for (int b = 0; b < s->nbad; ++b) {
                    row *r = row_add(L, d, s->bad[b].ex, "%s = %s", s->name,
                                     valname(s->bad[b].v, vb, sizeof vb));
                    r->sc_i[0] = j;
                    r->sc_v[0] = s->bad[b].v;
                    if (s->bad[b].ex.kind == EX_NONNULL) r->fails = 0;
                }
            }
        }
        /* callbacks failing or writing NaN on their k-th call */
        int calls[MAXCB];
        count_calls(m, d, calls);
        for (int cb = 0; cb < m->ncb; ++cb)
            for (int k = 1; k <= calls[cb] && k <= MAXK; ++k)
                for (int nan = 0; nan < 2; ++nan) {
                    row *r = row_add(L, d, nan ? (expect)XNF : (expect)XS(CDYN_ERR_CALLBACK),
                                     "callback %s %s on call %d", m->cb_names[cb],
                                     nan ? "writes NaN" : "fails", k);
                    r->cb = cb;
                    r->cb_at = k;
                    r->cb_nan = nan;
                }
    }
    /* hand-written rows */
    for (int h = 0; h < m->nhand; ++h) {
        const hand_row *hr = &m->hand[h];
        const fn_desc *d = NULL;
        for (int f = 0; f < m->nfns && !d; ++f)
            if (strcmp(m->fns[f].fn, hr->fn) == 0 &&
                strcmp(m->fns[f].variant ? m->fns[f].variant : "", hr->variant ? hr->variant : "") == 0)
                d = &m->fns[f];
        must(d != NULL, hr->fn);
        row *r = row_add(L, d, hr->ex, "%s", hr->name);
        if (hr->ex.kind != EX_STATUS) r->fails = !hr->writes;
        r->make = hr->make;
        r->prep = hr->prep;
        r->recover = hr->recover;
        if (hr->arg) {
            r->repl_arg = hr->arg - 1;
            r->repl = hr->data;
        }
        if (hr->sc1) {
            r->sc_i[0] = hr->sc1 - 1;
            r->sc_v[0] = hr->v1;
        }
        if (hr->sc2) {
            r->sc_i[1] = hr->sc2 - 1;
            r->sc_v[1] = hr->v2;
        }
    }
}

/* ======================================================================== */
/* Running one row.                                                          */

static int run_row(const module *m, const row *r, char *why, size_t wn)
{
    const fn_desc *d = r->d;
    int consumes = (d->flags & F_CONSUMES) != 0;
    outcome first = {0}, o, v0, v1;
    argset sfirst, sref, srow, sv1;
    double P0[PROBE_LEN] = {0}, P1[PROBE_LEN] = {0};
    why[0] = '\0';
    fault_disarm();

    /* reference 1: the full call on a fresh object (for "NULL allowed") */
    if (r->ex.kind == EX_SAME) {
        void *a = maker_of(m, d, r->make);
        args_build(&sfirst, d, NULL);
        do_call(d, a, &sfirst, &first);
        if (a && !consumes) m->destroy(a);
    }

    /* reference 2: fresh object, the row's setup (and the row's call when it
     * is documented to succeed), then the probe and the full call */
    void *R = maker_of(m, d, r->make);
    if (R && r->prep) r->prep(R);
    if (!r->fails && !consumes) {
        argset tmp;
        outcome ot;
        args_build(&tmp, d, r);
        do_call(d, R, &tmp, &ot);
        args_free(&tmp, d);
    }
    if (R && r->recover) r->recover(R);
    fault_disarm();
    if (R && m->probe) m->probe(R, P0);
    args_build(&sref, d, NULL);
    do_call(d, R, &sref, &v0);
    if (R && !consumes) m->destroy(R);

    /* the row */
    void *O = maker_of(m, d, r->make);
    if (O && m->last_error) {
        const char *msg = m->last_error(O);
        if (!msg || msg[0]) addwhy(why, wn, "fresh object's last_error is not \"\"");
    }
    if (O && r->prep) r->prep(O);
    int keeps_code = (d->flags & F_KEEPS_CODE) != 0;
    int code_before = keeps_code && O && m->callback_code ? m->callback_code(O) : 0;
    args_build(&srow, d, r);
    if (r->cb >= 0) fault_arm(r->cb, r->cb_at, r->cb_nan);
    do_call(d, r->null_obj ? NULL : O, &srow, &o);
    int fired = r->cb >= 0 && g_fault.calls[r->cb] >= r->cb_at;
    fault_disarm();
    if (o.note[0]) addwhy(why, wn, "%s", o.note);
    if (r->cb >= 0 && !fired) addwhy(why, wn, "the armed callback call was not reached");
    if (!ex_holds(&r->ex, d, &o, &first)) {
        char e1[64], g1[64];
        describe_ex(&r->ex, e1, sizeof e1);
        if (r->ex.kind == EX_SAME) describe_got(d, &first, e1, sizeof e1);
        describe_got(d, &o, g1, sizeof g1);
        addwhy(why, wn, "expected %s, got %s", e1, g1);
    }
    if (r->fails) {
        if (O && !r->null_obj && d->ret == R_STATUS && m->last_error) {
            const char *msg = m->last_error(O);
            if (!msg || !msg[0]) addwhy(why, wn, "last_error is empty after the failure");
        }
        check_untouched(d, &srow, (d->flags & F_BEST) && r->cb >= 0, why, wn);
        if (r->cb >= 0 && !r->cb_nan && O && m->callback_code && !keeps_code) {
            int code = m->callback_code(O);
            if (code != fault_code(r->cb, r->cb_at))
                addwhy(why, wn, "callback code %d kept, expected %d", code,
                       fault_code(r->cb, r->cb_at));
        }
        if (keeps_code && O && !r->null_obj) {
            /* the report (and its kept code) as before the call, whatever failed */
            int code = m->callback_code ? m->callback_code(O) : 0;
            if (code != code_before)
                addwhy(why, wn, "kept callback code changed from %d to %d (documented to be "
                       "left alone)", code_before, code);
            if (r->cb >= 0 && !r->cb_nan && m->last_error) {
                char num[16];
                const char *msg = m->last_error(O);
                snprintf(num, sizeof num, "%d", fault_code(r->cb, r->cb_at));
                if (!msg || !strstr(msg, num))
                    addwhy(why, wn, "last_error \"%s\" does not name the callback's code %s",
                           msg ? msg : "(null)", num);
            }
        }
    } else if (!consumes || r->null_obj) {
        check_guards(d, &srow, why, wn);
        if (r->ex.kind == EX_SAME) compare_outputs(d, &srow, &sfirst, "the NULL-allowed call", why, wn);
    }

    /* afterwards: the object unchanged and usable */
    if (O && r->recover) r->recover(O);
    fault_disarm();
    if (O && m->probe) {
        m->probe(O, P1);
        if (memcmp(P0, P1, sizeof P0) != 0) {
            int k = 0;
            while (k < PROBE_LEN && memcmp(&P0[k], &P1[k], sizeof(double)) == 0) ++k;
            addwhy(why, wn, "probe after the row differs from a fresh object's (item %d: %.17g vs %.17g)",
                   k, P1[k], P0[k]);
        }
    }
    args_build(&sv1, d, NULL);
    do_call(d, O, &sv1, &v1);
    if (v1.st != v0.st || memcmp(&v1.val, &v0.val, sizeof(double)) != 0) {
        char g0[64], g1[64];
        describe_got(d, &v0, g0, sizeof g0);
        describe_got(d, &v1, g1, sizeof g1);
        addwhy(why, wn, "correct call afterwards gave %s, a fresh object %s", g1, g0);
    }
    compare_outputs(d, &sv1, &sref, "correct call afterwards", why, wn);
    if (O && !consumes) m->destroy(O);

    if (r->ex.kind == EX_SAME) args_free(&sfirst, d);
    args_free(&sref, d);
    args_free(&srow, d);
    args_free(&sv1, d);
    return why[0] == '\0';
}

/* ======================================================================== */
/* Summary and tests.                                                        */

typedef struct {
    const char *fn;
    int rows;
} fncount;

static int count_by_function(const rowlist *L, fncount *out, int max)
{
    int n = 0;
    for (int i = 0; i < L->n; ++i) {
        int k = 0;
        while (k < n && strcmp(out[k].fn, L->r[i].d->fn) != 0) ++k;
        if (k == n) {
            if (n == max) continue;
            out[n].fn = L->r[i].d->fn;
            out[n].rows = 0;
            ++n;
        }
        ++out[k].rows;
    }
    return n;
}

static void run_module(const module *m)
{
    rowlist L = {0};
    gen_rows(m, &L);
    int failed = 0;
    char why[1024], label[128];
    const char *verbose = getenv("CDYN_BAD_INPUT_VERBOSE"); /* list every row */
    for (int i = 0; i < L.n; ++i) {
        char ex[64];
        if (!run_row(m, &L.r[i], why, sizeof why)) {
            ++failed;
            printf("FAIL %s | %s | %s: %s\n", m->name, fn_label(L.r[i].d, label, sizeof label),
                   L.r[i].name, why);
        } else if (verbose && verbose[0] && verbose[0] != '0') {
            describe_ex(&L.r[i].ex, ex, sizeof ex);
            printf("ok   %s | %s | %s -> %s\n", m->name, fn_label(L.r[i].d, label, sizeof label),
                   L.r[i].name, ex);
        }
    }
    fncount fc[64];
    int nf = count_by_function(&L, fc, 64);
    printf("bad_input %s: %d rows over %d functions, %d failed\n", m->name, L.n, nf, failed);
    fflush(stdout);
    int total = L.n;
    free(L.r);
    ck_assert_msg(failed == 0, "%s: %d of %d bad-input rows failed (listed on stdout)", m->name,
                  failed, total);
}

START_TEST(status_rows) { run_module(&MOD_STATUS); }
END_TEST
START_TEST(nullspace_rows) { run_module(&MOD_NS); }
END_TEST
START_TEST(newton_rows) { run_module(&MOD_NT); }
END_TEST
START_TEST(dae_rows) { run_module(&MOD_DAE); }
END_TEST
START_TEST(constraint_rows) { run_module(&MOD_CO); }
END_TEST
START_TEST(mbs_rows) { run_module(&MOD_MB); }
END_TEST
START_TEST(rigid_rows) { run_module(&MOD_RG); }
END_TEST

/* Every CDYN_API function declared in the headers of <cdyn.h> (the core
 * library this suite links) has a descriptor, or is one of the deliberately
 * left-out ones, and every descriptor names a declared function: adding a
 * function to a core header without adding its descriptor fails here. The
 * optional adapter headers that <cdyn.h> does not include (they belong to
 * separate libraries) are outside this suite. */
static const char *const LEFT_OUT[] = {"cdyn_version", "cdyn_version_number"};

static int in_tables(const char *name)
{
    for (int k = 0; k < NMODULES; ++k)
        for (int f = 0; f < MODULES[k]->nfns; ++f)
            if (strcmp(MODULES[k]->fns[f].fn, name) == 0) return 1;
    return 0;
}

enum { MAXNAMES = 200 };

/* Append the CDYN_API function names of one header. */
static int scan_header(const char *path, char (*names)[64], int nn)
{
    char line[512];
    FILE *fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, "CDYN_API", 8) != 0) continue;
        char *paren = strchr(line, '(');
        if (!paren) continue;
        char *end = paren;
        while (end > line && end[-1] == ' ') --end;
        char *beg = end;
        while (beg > line && (beg[-1] == '_' || (beg[-1] >= 'a' && beg[-1] <= 'z') ||
                              (beg[-1] >= 'A' && beg[-1] <= 'Z') ||
                              (beg[-1] >= '0' && beg[-1] <= '9')))
            --beg;
        if (nn < MAXNAMES && end - beg > 0 && end - beg < 64) {
            memcpy(names[nn], beg, (size_t)(end - beg));
            names[nn][end - beg] = '\0';
            ++nn;
        }
    }
    fclose(fp);
    return nn;
}

START_TEST(every_public_function_has_rows)
{
    char root[1024], path[1400], line[512];
    snprintf(root, sizeof root, "%s", __FILE__); /* <root>/tests/test_bad_input.c */
    for (int up = 0; up < 2; ++up) {
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(root, sizeof root, "..");
    }
    snprintf(path, sizeof path, "%s/include/cdyn.h", root);
    FILE *umb = fopen(path, "r");
    if (!umb) {
        printf("coverage: %s not readable, header cross-check skipped\n", path);
        fflush(stdout);
        return;
    }
    static char names[MAXNAMES][64];
    int nn = 0, nheaders = 0, missing = 0;
    while (fgets(line, sizeof line, umb)) {
        char hdr[256];
        if (sscanf(line, "#include \"%255[^\"]\"", hdr) != 1) continue;
        snprintf(path, sizeof path, "%s/include/%s", root, hdr);
        nn = scan_header(path, names, nn);
        ++nheaders;
    }
    fclose(umb);
    for (int i = 0; i < nn; ++i) {
        int out = 0;
        for (size_t k = 0; k < sizeof LEFT_OUT / sizeof LEFT_OUT[0]; ++k)
            if (strcmp(names[i], LEFT_OUT[k]) == 0) out = 1;
        if (!out && !in_tables(names[i])) {
            printf("coverage: %s has no descriptor\n", names[i]);
            ++missing;
        }
    }
    for (int k = 0; k < NMODULES; ++k)
        for (int f = 0; f < MODULES[k]->nfns; ++f) {
            int found = 0;
            for (int i = 0; i < nn && !found; ++i) found = strcmp(names[i], MODULES[k]->fns[f].fn) == 0;
            if (!found) {
                printf("coverage: descriptor %s names no declared function\n",
                       MODULES[k]->fns[f].fn);
                ++missing;
            }
        }
    printf("coverage: %d public functions in the %d headers of <cdyn.h>, %d left out deliberately, "
           "%d uncovered\n",
           nn, nheaders, (int)(sizeof LEFT_OUT / sizeof LEFT_OUT[0]), missing);
    fflush(stdout);
    ck_assert_int_gt(nn, 0);
    ck_assert_int_eq(missing, 0);
}
END_TEST

static void print_summary(void)
{
    int total = 0, nfn = 0;
    printf("bad-input matrix: rows generated per function\n");
    for (int k = 0; k < NMODULES; ++k) {
        rowlist L = {0};
        gen_rows(MODULES[k], &L);
        fncount fc[64];
        int nf = count_by_function(&L, fc, 64);
        for (int i = 0; i < nf; ++i) printf("  %-42s %4d\n", fc[i].fn, fc[i].rows);
        printf("  -- %s: %d rows\n", MODULES[k]->name, L.n);
        total += L.n;
        nfn += nf;
        free(L.r);
    }
    printf("bad-input matrix: %d rows over %d functions in total\n", total, nfn);
    fflush(stdout);
}

static Suite *bad_input_suite(void)
{
    Suite *s = suite_create("bad_input");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"status", status_rows},         {"nullspace", nullspace_rows},
        {"newton", newton_rows},         {"dae", dae_rows},
        {"constraint", constraint_rows}, {"mbs", mbs_rows},
        {"rigid", rigid_rows},
        {"coverage", every_public_function_has_rows},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    mbs_data_init();
    print_summary();
    return tu_run_suite(bad_input_suite());
}
