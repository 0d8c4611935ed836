/* Which vector kernels may run: the one place that decides (see README.md
 * in this folder). Each level's test is the CPU's features, asked once,
 * and the cap IM2REC_SIMD sets when _tensor is imported:
 *
 *   portable  the C loops only (any CPU, and what the others must equal)
 *   avx2      AVX2 kernels where the CPU has AVX2
 *   avx512    AVX-512 kernels too, where the CPU has each one's extensions
 *             (the default: no cap)
 *
 * A kernel asks simd_avx2(), simd_avx512() (F, BW, VBMI, VNNI: the
 * resampler's byte permutes), simd_avx512_planar() (those and VL) or
 * simd_avx512_weights() (F, DQ: the weight tables); each is false above the
 * cap, so capping never needs a change in a kernel.
 */
#ifndef IM2REC_SIMD_LEVEL_H
#define IM2REC_SIMD_LEVEL_H

#include <string.h>

enum { SIMD_PORTABLE = 0, SIMD_AVX2 = 1, SIMD_AVX512 = 2 };

static const char *const simd_names[] = {"portable", "avx2", "avx512"};

/* The cap: IM2REC_SIMD's level, set when _tensor is imported (PyInit__tensor). */
static int simd_cap = SIMD_AVX512;

/* The level named by s (IM2REC_SIMD's words), or -1. */
static int simd_parse(const char *s) {
    for (int level = SIMD_PORTABLE; level <= SIMD_AVX512; level++)
        if (strcmp(s, simd_names[level]) == 0) return level;
    return -1;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* What the CPU has, asked once: -1 not yet, else 0 or 1. */
static int simd_cpu(int *known, int (*ask)(void)) {
    if (*known < 0) {
        __builtin_cpu_init();
        *known = ask();
    }
    return *known;
}

static int simd_ask_avx2(void) { return __builtin_cpu_supports("avx2") != 0; }
static int simd_ask_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
}
static int simd_ask_planar(void) { return simd_ask_avx512() && __builtin_cpu_supports("avx512vl"); }
static int simd_ask_weights(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

static int simd_avx2(void) {
    static int known = -1;
    return simd_cap >= SIMD_AVX2 && simd_cpu(&known, simd_ask_avx2);
}
static int simd_avx512(void) {
    static int known = -1;
    return simd_cap >= SIMD_AVX512 && simd_cpu(&known, simd_ask_avx512);
}
static int simd_avx512_planar(void) {
    static int known = -1;
    return simd_cap >= SIMD_AVX512 && simd_cpu(&known, simd_ask_planar);
}
static int simd_avx512_weights(void) {
    static int known = -1;
    return simd_cap >= SIMD_AVX512 && simd_cpu(&known, simd_ask_weights);
}

/* The best level this CPU has, whatever the cap (for rec --version). */
static int simd_cpu_level(void) {
    static int a = -1, b = -1;
    return simd_cpu(&b, simd_ask_avx512) ? SIMD_AVX512 : simd_cpu(&a, simd_ask_avx2) ? SIMD_AVX2
                                                                                      : SIMD_PORTABLE;
}
#else
static int simd_cpu_level(void) { return SIMD_PORTABLE; }
#endif

/* The level the kernels run at: the CPU's best under the cap. */
static int simd_level(void) {
    const int cpu = simd_cpu_level();
    return cpu < simd_cap ? cpu : simd_cap;
}

#endif
