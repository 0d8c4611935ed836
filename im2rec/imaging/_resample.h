/* Resampling a window of 8-bit pixels (gray or RGBX rows) to the output
 * size, with Pillow-SIMD's arithmetic, so that the results are Pillow-SIMD's
 * to the bit: the filter
 * weights of Pillow's precompute_coeffs in double precision, turned into
 * 16-bit integers at the largest precision that keeps the biggest weight
 * below 2**15; a horizontal pass into 8-bit rows, then a vertical one, each
 * sum started at half a unit, shifted down and clamped to 0..255. Integer
 * sums are exact in any order, so the AVX2 kernels and the portable loops
 * give the same bytes (tested against each other and against Pillow).
 *
 * Why our own: Pillow's resize makes an image object, a temporary and an
 * output image for every sample, and its output then needs a pass of its
 * own to become float planes; here the vertical pass hands each output row,
 * still in L1, straight to the normaliser (_tensor.c), and nothing is
 * allocated but the coefficients and the horizontal pass's rows.
 *
 * Plain C, no Python: the fuzz and sanitizer builds reach it through
 * _tensor.resample. Every size is checked by the caller (_tensor.c) before
 * rs_plan is called; rs_plan bounds the filter's length itself.
 */
#ifndef IM2REC_RESAMPLE_H
#define IM2REC_RESAMPLE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RS_X86 1
#endif
#include "simd/level.h" /* which vector kernels may run */

/* Pillow's filter numbers (Image.Resampling) */
enum { RS_LANCZOS = 1, RS_BILINEAR = 2, RS_BICUBIC = 3, RS_BOX = 4, RS_HAMMING = 5 };

/* At most this many weights a sample: a filter reaching further means a
   shrink by more than ~1,000 in one step, which the planner never asks. */
#define RS_MAX_TAPS 2048
/* and at most this many in a direction's table (32 MB while it is made) */
#define RS_MAX_WEIGHTS ((size_t)1 << 22)
/* nor a horizontal pass's rows larger than this */
#define RS_MAX_PASS ((size_t)1 << 28)

#define RS_PI 3.14159265358979323846 /* M_PI, which strict C99 does not define */

static double rs_sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * RS_PI;
    return sin(x) / x;
}

/* Pillow's filters, operation for operation (the weights must round alike). */
static double rs_filter(int filter, double x) {
    if (filter == RS_LANCZOS)  /* unfolded: Pillow takes -3 but not 3 */
        return -3.0 <= x && x < 3.0 ? rs_sinc(x) * rs_sinc(x / 3) : 0.0;
    if (x < 0.0) x = -x;
    switch (filter) {
    case RS_BILINEAR:
        return x < 1.0 ? 1.0 - x : 0.0;
    case RS_HAMMING:
        if (x == 0.0) return 1.0;
        if (x >= 1.0) return 0.0;
        x = x * RS_PI;
        return sin(x) / x * (0.54f + 0.46f * cos(x));
    case RS_BICUBIC:
        if (x < 1.0) return ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1;
        if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * -0.5;
        return 0.0;
    default:
        return 0.0;
    }
}

/* The filter's reach at scale 1; 0 for filters taken elsewhere. */
static double rs_support(int filter) {
    switch (filter) {
    case RS_BILINEAR: case RS_HAMMING: return 1.0;
    case RS_BICUBIC: return 2.0;
    case RS_LANCZOS: return 3.0;
    default: return 0.0;
    }
}

/* One direction's weights: for output sample i, taps[i] source samples from
   first[i], weights k[i * ksize ...] at 2**precision. */
typedef struct {
    int ksize, precision;
    int *first, *taps;
    int16_t *k;
} rs_axis;

static void rs_free(rs_axis *a) {
    free(a->first);
    free(a->k);
    a->first = a->taps = NULL;
    a->k = NULL;
}

#ifdef RS_X86
#include "simd/weights_x86.h" /* rs_plan's loops eight and sixteen weights at a time */
#endif

/* Pillow's precompute_coeffs and normalize_coeffs_8bpc (Pillow-SIMD's): in0
   and in1 are float as Pillow takes them, their difference taken in float.
   0, or -1: no memory, a filter longer than RS_MAX_TAPS, or weights that
   16 bits cannot hold (the caller lets Pillow resample then). fast: 0 the
   scalar loops, 1 AVX2's at most, 2 AVX-512's where the CPU has them (the
   same doubles, operation for operation, and the same weights: the tests
   compare them). */
static int rs_plan(rs_axis *a, int in_size, float in0, float in1, int out_size, int filter,
                   int fast) {
    memset(a, 0, sizeof *a);
    double scale = (double)(in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = rs_support(filter) * filterscale;
    if (!(support > 0.0) || support > RS_MAX_TAPS / 2 - 1) return -1;
    int ksize = (int)ceil(support) * 2 + 1;
    if ((size_t)out_size * (size_t)ksize > RS_MAX_WEIGHTS) return -1;
    double *kk = malloc((size_t)out_size * (size_t)ksize * sizeof(double));
    a->first = malloc((size_t)out_size * 2 * sizeof(int));
    a->k = malloc((size_t)out_size * (size_t)ksize * sizeof(int16_t));
    if (kk == NULL || a->first == NULL || a->k == NULL) {
        free(kk);
        rs_free(a);
        return -1;
    }
    a->taps = a->first + out_size;
    a->ksize = ksize;
    const size_t n = (size_t)out_size * (size_t)ksize;
#ifdef RS_X86
    /* 2: AVX-512, 1: AVX2, 0: neither */
    fast = fast >= 2 && simd_avx512_weights() ? 2 : fast >= 1 && simd_avx2() ? 1 : 0;
    if (fast == 2 && filter == RS_BILINEAR && ksize <= 8)
        rs_bilinear_avx512(kk, a->first, a->taps, in_size, (double)in0, scale, support,
                           1.0 / filterscale, out_size, ksize);
    else if (fast == 1 && filter == RS_BILINEAR && ksize <= 8)
        rs_bilinear_avx2(kk, a->first, a->taps, in_size, (double)in0, scale, support,
                         1.0 / filterscale, out_size, ksize);
    else
#else
    (void)fast;
#endif
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax;
        if (xmin < 0) xmin = 0;
        xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        if (xmax < 0) xmax = 0;
        double *k = &kk[(size_t)xx * (size_t)ksize];
        int x = 0;
        for (; x < xmax; x++) {
            double w = rs_filter(filter, (x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0 && ww != 1.0)  /* (dividing by 1 changes nothing: skipped, it is slow) */
            for (x = 0; x < xmax; x++) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        a->first[xx] = xmin;
        a->taps[xx] = xmax;
    }
    /* The largest weight: four running maxima, as one serial chain of
       compares was a third of this function's time (the same value: the
       weights are finite, and a maximum does not depend on the order). */
    double maxkk;
    size_t i = 0;
#ifdef RS_X86
    if (fast) {
        maxkk = fast == 2 ? rs_max_avx512(kk, n) : rs_max_avx2(kk, n);
    } else
#endif
    {
        double most[4] = {kk[0], kk[0], kk[0], kk[0]};
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                if (most[j] < kk[i + (size_t)j]) most[j] = kk[i + (size_t)j];
        for (; i < n; i++)
            if (most[0] < kk[i]) most[0] = kk[i];
        maxkk = most[0];
        for (int j = 1; j < 4; j++)
            if (maxkk < most[j]) maxkk = most[j];
    }
    int p = 0;
    for (; p < 32 - 8 - 2; p++)
        if ((int)(0.5 + maxkk * (1 << (p + 1))) >= (1 << 15)) break;
    /* Pillow's rounding to 16 bits, without an early exit so that the
       compiler can vectorise it: one weight out of range fails them all. */
    int fits = p > 0, outside = 0;
    const double unit = (double)(1 << p);
    i = 0;
#ifdef RS_X86
    if (fast == 2) {
        outside = rs_round_avx512(kk, n, unit, a->k);
        i = n / 16 * 16;  /* the rest as below */
    } else if (fast == 1) {
        outside = rs_round_avx2(kk, n, unit, a->k);
        i = n / 8 * 8;
    }
#endif
    for (; i < n; i++) {
        const double v = kk[i] < 0 ? -0.5 + kk[i] * unit : 0.5 + kk[i] * unit;
        const int in = v > -32769.0 && v < 32768.0;
        outside |= !in;
        a->k[i] = (int16_t)(int)(in ? v : 0.0);
    }
    fits = fits && !outside;
    free(kk);
    if (!fits) {
        rs_free(a);
        return -1;
    }
    a->precision = p;
    return 0;
}

static inline unsigned char rs_clamp(int32_t v, int p) {
    v >>= p;  /* arithmetic, as Pillow-SIMD's srai */
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* ---- portable loops: any pixel size (1 or 4 bytes), any filter ---- */

/* in_bpp 3 (RGB) reads into RGBX output (bpp 4), its X 0. */
static void rs_horizontal_row(const unsigned char *in, unsigned char *out, int in_bpp, int bpp,
                              const rs_axis *a, int out_w) {
    const int32_t half = (int32_t)1 << (a->precision - 1);
    for (int xx = 0; xx < out_w; xx++) {
        const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
        const unsigned char *p = in + (size_t)a->first[xx] * (size_t)in_bpp;
        for (int c = 0; c < bpp; c++) {
            int32_t ss = half;
            if (c < in_bpp)
                for (int t = 0; t < a->taps[xx]; t++)
                    ss += p[(size_t)t * (size_t)in_bpp + (size_t)c] * k[t];
            out[(size_t)xx * (size_t)bpp + (size_t)c] = rs_clamp(ss, a->precision);
        }
    }
}

/* bytes from..bytes-1 of an output row of the vertical pass: rows[t] are
   its taps' source rows */
static void rs_vertical_row(const unsigned char *const *rows, const int16_t *k, int taps,
                            int precision, unsigned char *out, size_t from, size_t bytes) {
    const int32_t half = (int32_t)1 << (precision - 1);
    for (size_t x = from; x < bytes; x++) {
        int32_t ss = half;
        for (int t = 0; t < taps; t++) ss += rows[t][x] * k[t];
        out[x] = rs_clamp(ss, precision);
    }
}

#ifdef RS_X86
#include "simd/resample_avx512.h"
#endif

/* The horizontal pass over rows first..first+count-1 of the window (rows
   of width pixels) into tmp (count rows of out_w pixels, bpp bytes each:
   RGB source rows, in_bpp 3, become RGBX). vector: 0 the portable loops, 1
   AVX2 at most, 2 the best the CPU has (wide: the AVX-512 plan, or NULL). */
static void rs_horizontal(const unsigned char *src, size_t row_bytes, int in_bpp, int bpp,
                          int width, int first, int count, const rs_axis *a, int out_w,
                          unsigned char *tmp, int vector, const void *wide) {
    const size_t tmp_row = (size_t)out_w * (size_t)bpp;
    int y = 0;
#ifdef RS_X86
    if (wide != NULL) {
        for (; y < count; y++)
            rs_horizontal_row_avx512(src + (size_t)(first + y) * row_bytes, tmp + (size_t)y * tmp_row,
                                     (const rs_wide *)wide, out_w, a->precision);
        return;
    }
    if (vector && (in_bpp == 4 || in_bpp == 3) && bpp == 4 && simd_avx2()) {
        /* four rows a step; the last step, short of rows, makes its last
           row again in the places left (the same bytes to the same place) */
        int most = 0;
        for (int x = 0; x < out_w; x++) most = a->taps[x] > most ? a->taps[x] : most;
        for (; y < count; y += 4) {
            const unsigned char *in[4];
            unsigned char *out[4];
            for (int r = 0; r < 4; r++) {
                const int at = y + r < count ? y + r : count - 1;
                in[r] = src + (size_t)(first + at) * row_bytes;
                out[r] = tmp + (size_t)at * tmp_row;
            }
            if (in_bpp == 4)
                rs_horizontal4_avx2(in, out, a, out_w, width, most);
            else
                rs_horizontal4_rgb_avx2(in, out, a, out_w, width, most);
        }
    }
#else
    (void)wide;
    (void)width;
#endif
    for (; y < count; y++)
        rs_horizontal_row(src + (size_t)(first + y) * row_bytes, tmp + (size_t)y * tmp_row, in_bpp,
                          bpp, a, out_w);
}

static void rs_vertical(const unsigned char *const *rows, const int16_t *k, int taps, int precision,
                        unsigned char *out, size_t bytes, int vector) {
#ifdef RS_X86
    if (vector >= 2 && simd_avx512()) {
        rs_vertical_row_avx512(rows, k, taps, precision, out, bytes);
        return;
    }
    if (vector && simd_avx2()) {
        rs_vertical_row_avx2(rows, k, taps, precision, out, bytes);
        return;
    }
#endif
    rs_vertical_row(rows, k, taps, precision, out, 0, bytes);
}

#endif
