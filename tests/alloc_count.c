/* Link-time wrapping (-Wl,--wrap=malloc, ...) of the C allocator: every call
 * from code linked statically into the test (libcdyn included) goes through
 * these functions, which count while counting is on and then forward to the
 * real allocator (glibc's, or the sanitizer's under ASan). An armed
 * failure (alloc_fail_after) makes one chosen allocation return NULL. */
#include "alloc_count.h"

#include <stddef.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *ptr, size_t size);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void __wrap_free(void *ptr);

static int counting;
static long calls;
static long fail_countdown; /* 0: no failure armed */
static int fail_fired;

void alloc_count_start(void) { calls = 0; counting = 1; }
long alloc_count_stop(void) { counting = 0; return calls; }

void alloc_fail_after(long k)
{
    fail_countdown = k > 0 ? k : 0;
    fail_fired = 0;
}

int alloc_fail_fired(void) { return fail_fired; }

/* Called once per allocation: 1 if this one must fail. */
static int fail_now(void)
{
    if (fail_countdown <= 0 || --fail_countdown > 0) return 0;
    fail_fired = 1;
    return 1;
}

void *__wrap_malloc(size_t size)
{
    if (counting) ++calls;
    if (fail_now()) return NULL;
    return __real_malloc(size);
}
void *__wrap_calloc(size_t count, size_t size)
{
    if (counting) ++calls;
    if (fail_now()) return NULL;
    return __real_calloc(count, size);
}
void *__wrap_realloc(void *ptr, size_t size)
{
    if (counting) ++calls;
    if (fail_now()) return NULL;
    return __real_realloc(ptr, size);
}
void __wrap_free(void *ptr) { if (counting && ptr) ++calls; __real_free(ptr); }
