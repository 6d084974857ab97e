/* glibc_compat.h: keeps the library loadable on glibc >= 2.17 (RHEL 7/8, Ubuntu
 * 18.04/20.04) when it is built against a newer glibc. glibc 2.34 moved dlopen,
 * pthread_create and friends from libdl/libpthread into libc under new symbol
 * versions (GLIBC_2.34; pthread_sigmask GLIBC_2.32); a library linked against them
 * does not load on an older glibc. These directives bind each such call to the
 * version every glibc since 2.17 provides, and the Makefile links libdl.so.2 and
 * libpthread.so.0 by name so that an older glibc loads them. `make check-glibc`
 * (part of `make test`) fails if any symbol needs a version above GLIBC_2.17. */
#ifndef CX_GLIBC_COMPAT_H
#define CX_GLIBC_COMPAT_H
#include <features.h>

#if defined(__GLIBC__)
#if defined(__x86_64__)
#define CX_GLIBC_BASE "GLIBC_2.2.5"
#define CX_GLIBC_SETCLOCK "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define CX_GLIBC_BASE "GLIBC_2.17"
#define CX_GLIBC_SETCLOCK "GLIBC_2.17"
#endif
#ifdef CX_GLIBC_BASE
#define CX_SYMVER(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)
CX_SYMVER(dlopen, CX_GLIBC_BASE);
CX_SYMVER(dlsym, CX_GLIBC_BASE);
CX_SYMVER(dlerror, CX_GLIBC_BASE);
CX_SYMVER(dlclose, CX_GLIBC_BASE);
CX_SYMVER(pthread_create, CX_GLIBC_BASE);
CX_SYMVER(pthread_detach, CX_GLIBC_BASE);
CX_SYMVER(pthread_sigmask, CX_GLIBC_BASE);
CX_SYMVER(pthread_condattr_setclock, CX_GLIBC_SETCLOCK);
#endif
#endif

#endif
