#include "guarded.h"

#include <stdio.h>
#include <stdlib.h>

static void *checked_malloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "guarded: out of memory\n");
        abort();
    }
    return p;
}

double *dbuf(size_t count)
{
    double *base = checked_malloc(sizeof(double) * (count + 2 * GUARD));
    for (size_t i = 0; i < count + 2 * GUARD; ++i) base[i] = SENTINEL;
    return base + GUARD;
}

void dbuf_free(double *p)
{
    if (p) free(p - GUARD);
}

int dbuf_untouched(const double *p, size_t count)
{
    for (size_t i = 0; i < count + 2 * GUARD; ++i)
        if (p[(ptrdiff_t)i - GUARD] != SENTINEL) return 0;
    return 1;
}

int dbuf_guards_intact(const double *p, size_t count)
{
    for (ptrdiff_t i = 1; i <= GUARD; ++i)
        if (p[-i] != SENTINEL) return 0;
    for (size_t i = 0; i < GUARD; ++i)
        if (p[count + i] != SENTINEL) return 0;
    return 1;
}

void dbuf_reset(double *p, size_t count)
{
    for (size_t i = 0; i < count + 2 * GUARD; ++i) p[(ptrdiff_t)i - GUARD] = SENTINEL;
}

int *ibuf(size_t count)
{
    int *base = checked_malloc(sizeof(int) * (count + 2 * GUARD));
    for (size_t i = 0; i < count + 2 * GUARD; ++i) base[i] = ISENTINEL;
    return base + GUARD;
}

void ibuf_free(int *p)
{
    if (p) free(p - GUARD);
}

int ibuf_untouched(const int *p, size_t count)
{
    for (size_t i = 0; i < count + 2 * GUARD; ++i)
        if (p[(ptrdiff_t)i - GUARD] != ISENTINEL) return 0;
    return 1;
}

int ibuf_guards_intact(const int *p, size_t count)
{
    for (ptrdiff_t i = 1; i <= GUARD; ++i)
        if (p[-i] != ISENTINEL) return 0;
    for (size_t i = 0; i < GUARD; ++i)
        if (p[count + i] != ISENTINEL) return 0;
    return 1;
}
