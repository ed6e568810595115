/* cdyn — symbol visibility for the public API. */
#ifndef CDYN_EXPORT_H
#define CDYN_EXPORT_H

/* The shared library is built with hidden visibility; only declarations
 * marked CDYN_API are exported (and versioned, src/cdyn.map). On Windows a
 * consumer of the DLL imports them; a consumer of the static library
 * defines CDYN_STATIC (the CMake target cdyn::static does it). */
#if defined(_WIN32) && defined(CDYN_BUILDING_SHARED)
#define CDYN_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(CDYN_STATIC)
#define CDYN_API __declspec(dllimport)
#elif defined(_WIN32)
#define CDYN_API
#elif defined(__GNUC__) || defined(__clang__)
#define CDYN_API __attribute__((visibility("default")))
#else
#define CDYN_API
#endif

#endif /* CDYN_EXPORT_H */
