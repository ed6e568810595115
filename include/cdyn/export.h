/* cdyn — symbol visibility for the public API. */
#ifndef CDYN_EXPORT_H
#define CDYN_EXPORT_H

/* The shared library is built with hidden visibility; only declarations
 * marked CDYN_API are exported. Static builds need no decoration. */
#if defined(_WIN32) && defined(CDYN_BUILDING_SHARED)
#define CDYN_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define CDYN_API __attribute__((visibility("default")))
#else
#define CDYN_API
#endif

#endif /* CDYN_EXPORT_H */
