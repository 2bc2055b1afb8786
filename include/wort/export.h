/* wort/export.h - what libwort.so exports.
 *
 * The library's objects are compiled with -fvisibility=hidden and -fvisibility-inlines-hidden
 * (CMakeLists.txt): a symbol is in libwort.so's dynamic symbol table only when the public
 * headers (wort.h and the headers in wort/) mark it WORT_EXPORT - their classes, their functions and the
 * few variables the inline persistence primitives of wort/pm.h read. Everything else (the index
 * kinds, the allocator's and the epochs' internals, the registry's helpers) is local to the
 * library, and calls to it bind inside the library instead of through the PLT.
 * cmake/libwort.map then puts the exported symbols in the version node WORT_<major.minor>.
 * WORT_NO_EXPORT keeps a nested class of an exported class (Allocator::Impl) local.
 * The header is C as well as C++: wort.h (C99) uses WORT_EXPORT too. */
#ifndef WORT_EXPORT_H
#define WORT_EXPORT_H

#if defined(__GNUC__) && defined(__cplusplus)
#define WORT_EXPORT [[gnu::visibility("default")]]
#define WORT_NO_EXPORT [[gnu::visibility("hidden")]]
#elif defined(__GNUC__)
#define WORT_EXPORT __attribute__((visibility("default")))
#define WORT_NO_EXPORT __attribute__((visibility("hidden")))
#else
#define WORT_EXPORT
#define WORT_NO_EXPORT
#endif

#endif /* WORT_EXPORT_H */
