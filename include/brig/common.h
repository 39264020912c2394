/* brig/common.h — export macro and version shared by every public header. */
#ifndef BRIG_COMMON_H
#define BRIG_COMMON_H

#if defined(BRIG_BUILDING) && defined(__GNUC__)
#define BRIG_PUBLIC __attribute__((visibility("default")))
#else
#define BRIG_PUBLIC
#endif

#define BRIG_VERSION "0.1.0"

#endif
