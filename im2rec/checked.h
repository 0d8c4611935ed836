/* Overflow-safe arithmetic and argument checks shared by im2rec's C
 * extensions (see docs/security.md, "Native code").
 *
 * Every length, offset, stride and product that comes from a file or from
 * Python goes through these before it is used: each returns 0 when the
 * result does not fit (the caller raises), never a wrapped value. The
 * builtins are GCC's and Clang's; both compile them to one instruction and
 * a branch on the carry flag.
 */
#ifndef IM2REC_CHECKED_H
#define IM2REC_CHECKED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* *out = a + b, or 0 if it does not fit in a size_t */
static inline int checked_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* *out = a * b, or 0 if it does not fit in a size_t */
static inline int checked_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* *out = a * b * c, or 0 if it does not fit in a size_t */
static inline int checked_mul3(size_t a, size_t b, size_t c, size_t *out) {
    size_t ab;
    return checked_mul(a, b, &ab) && checked_mul(ab, c, out);
}

/* Whether [offset, offset + length) lies inside a buffer of size bytes
   (offset + length is never computed where it could wrap). */
static inline int within(size_t offset, size_t length, size_t size) {
    return offset <= size && length <= size - offset;
}

/* A Python int argument that must be in [lo, hi]: Python's "I", "k" and
   "K" formats wrap negative and large values silently, so every unsigned
   argument is parsed as Py_ssize_t ("n") or long long ("L") and checked
   here. Sets ValueError naming the argument and returns 0 when outside. */
static inline int in_range(long long value, long long lo, long long hi, const char *what) {
    if (value < lo || value > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in [%lld, %lld], not %lld", what, lo, hi,
                     value);
        return 0;
    }
    return 1;
}

#endif
