/* Link-time wrapping (-Wl,--wrap=malloc, ...) of the C allocator: every call
 * from code linked statically into the test (libcdyn included) goes through
 * these functions, which count while counting is on and then forward to the
 * real allocator (glibc's, or the sanitizer's under ASan). */
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

void alloc_count_start(void) { calls = 0; counting = 1; }
long alloc_count_stop(void) { counting = 0; return calls; }

void *__wrap_malloc(size_t size) { if (counting) ++calls; return __real_malloc(size); }
void *__wrap_calloc(size_t count, size_t size)
{
    if (counting) ++calls;
    return __real_calloc(count, size);
}
void *__wrap_realloc(void *ptr, size_t size)
{
    if (counting) ++calls;
    return __real_realloc(ptr, size);
}
void __wrap_free(void *ptr) { if (counting && ptr) ++calls; __real_free(ptr); }
