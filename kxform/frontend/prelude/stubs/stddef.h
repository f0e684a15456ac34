/* kxform: <stddef.h> for libclang, whose wheel ships no compiler headers. */
#pragma once
typedef long ptrdiff_t;
typedef long double max_align_t;
#ifndef NULL
#define NULL 0
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
