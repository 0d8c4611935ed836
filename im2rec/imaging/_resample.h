/* Resampling a window of 8-bit pixels (gray or RGBX rows) to the output
 * size, with Pillow-SIMD's arithmetic, so that the results are Pillow-SIMD's
 * to the bit (docs/performance.md, "The loader's resampler"): the filter
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

/* Pillow's precompute_coeffs and normalize_coeffs_8bpc (Pillow-SIMD's): in0
   and in1 are float as Pillow takes them, their difference taken in float.
   0, or -1: no memory, a filter longer than RS_MAX_TAPS, or weights that
   16 bits cannot hold (the caller lets Pillow resample then). */
static int rs_plan(rs_axis *a, int in_size, float in0, float in1, int out_size, int filter) {
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
    double maxkk = 0.0;
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
    maxkk = kk[0];
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        if (maxkk < kk[i]) maxkk = kk[i];
    int p = 0;
    for (; p < 32 - 8 - 2; p++)
        if ((int)(0.5 + maxkk * (1 << (p + 1))) >= (1 << 15)) break;
    int fits = p > 0;
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize && fits; i++) {
        double v = kk[i] < 0 ? -0.5 + kk[i] * (1 << p) : 0.5 + kk[i] * (1 << p);
        fits = v > -32769.0 && v < 32768.0;
        a->k[i] = fits ? (int16_t)(int)v : 0;
    }
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

static void rs_horizontal_row(const unsigned char *in, unsigned char *out, int bpp,
                              const rs_axis *a, int out_w) {
    const int32_t half = (int32_t)1 << (a->precision - 1);
    for (int xx = 0; xx < out_w; xx++) {
        const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
        const unsigned char *p = in + (size_t)a->first[xx] * (size_t)bpp;
        for (int c = 0; c < bpp; c++) {
            int32_t ss = half;
            for (int t = 0; t < a->taps[xx]; t++) ss += p[(size_t)t * (size_t)bpp + (size_t)c] * k[t];
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
/* ---- AVX2 kernels for RGBX rows (the colour training path) ---- */

static inline int32_t rs_pair(const int16_t *k) {  /* two weights as madd takes them */
    int32_t v;
    memcpy(&v, k, sizeof v);
    return v;
}

/* Four rows at once, one output pixel at a time, its taps two by two: each
   pair of source pixels spread to 16-bit lanes (R R' G G' B B' X X') and
   multiplied-added with (k, k') into four 32-bit sums. */
__attribute__((target("avx2"))) static void rs_horizontal4_avx2(
        const unsigned char *const in[4], unsigned char *const out[4], const rs_axis *a,
        int out_w) {
    const __m256i spread = _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1,
                                            0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1);
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (a->precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(a->precision);
    for (int xx = 0; xx < out_w; xx++) {
        const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
        const size_t at = (size_t)a->first[xx] * 4;
        const int taps = a->taps[xx];
        __m256i s01 = half, s23 = half;
        int t = 0;
        for (; t + 1 < taps; t += 2) {
            const __m256i kk = _mm256_set1_epi32(rs_pair(k + t));
            const size_t o = at + (size_t)t * 4;
            __m256i p01 = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(in[0] + o))),
                _mm_loadl_epi64((const __m128i *)(in[1] + o)), 1);
            __m256i p23 = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(in[2] + o))),
                _mm_loadl_epi64((const __m128i *)(in[3] + o)), 1);
            s01 = _mm256_add_epi32(s01, _mm256_madd_epi16(_mm256_shuffle_epi8(p01, spread), kk));
            s23 = _mm256_add_epi32(s23, _mm256_madd_epi16(_mm256_shuffle_epi8(p23, spread), kk));
        }
        if (t < taps) {  /* an odd last tap: its pixel alone, widened */
            const __m256i kk = _mm256_set1_epi32((int32_t)(uint16_t)k[t]);
            const size_t o = at + (size_t)t * 4;
            int32_t w0, w1, w2, w3;
            memcpy(&w0, in[0] + o, 4);
            memcpy(&w1, in[1] + o, 4);
            memcpy(&w2, in[2] + o, 4);
            memcpy(&w3, in[3] + o, 4);
            __m256i p01 = _mm256_cvtepu8_epi32(_mm_setr_epi32(w0, 0, 0, 0));
            p01 = _mm256_permute2x128_si256(p01, _mm256_cvtepu8_epi32(_mm_setr_epi32(w1, 0, 0, 0)), 0x20);
            __m256i p23 = _mm256_cvtepu8_epi32(_mm_setr_epi32(w2, 0, 0, 0));
            p23 = _mm256_permute2x128_si256(p23, _mm256_cvtepu8_epi32(_mm_setr_epi32(w3, 0, 0, 0)), 0x20);
            s01 = _mm256_add_epi32(s01, _mm256_madd_epi16(p01, kk));
            s23 = _mm256_add_epi32(s23, _mm256_madd_epi16(p23, kk));
        }
        s01 = _mm256_sra_epi32(s01, shift);
        s23 = _mm256_sra_epi32(s23, shift);
        /* int32 -> int16 -> uint8, saturating: the clamp to 0..255 */
        __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(s01, s23), _mm256_setzero_si256());
        /* lane 0: rows 0, 2; lane 1: rows 1, 3 (4 bytes each) */
        __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
        int32_t v;
        v = _mm_cvtsi128_si32(lo); memcpy(out[0] + (size_t)xx * 4, &v, 4);
        v = _mm_cvtsi128_si32(hi); memcpy(out[1] + (size_t)xx * 4, &v, 4);
        v = _mm_extract_epi32(lo, 1); memcpy(out[2] + (size_t)xx * 4, &v, 4);
        v = _mm_extract_epi32(hi, 1); memcpy(out[3] + (size_t)xx * 4, &v, 4);
    }
}

/* One output row: 32 bytes (8 RGBX pixels) at a time, source rows two by
   two interleaved byte by byte and widened, so madd weighs both at once. */
__attribute__((target("avx2"))) static void rs_vertical_row_avx2(
        const unsigned char *const *rows, const int16_t *k, int taps, int precision,
        unsigned char *out, size_t bytes) {
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (precision - 1)), zero = _mm256_setzero_si256();
    const __m128i shift = _mm_cvtsi32_si128(precision);
    size_t x = 0;
    for (; x + 32 <= bytes; x += 32) {
        __m256i s0 = half, s1 = half, s2 = half, s3 = half;
        int t = 0;
        for (; t < taps; t += 2) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(rows[t] + x));
            const __m256i b = t + 1 < taps ? _mm256_loadu_si256((const __m256i *)(rows[t + 1] + x)) : zero;
            const __m256i kk = _mm256_set1_epi32(
                (int32_t)((uint32_t)(uint16_t)k[t] | (t + 1 < taps ? (uint32_t)(uint16_t)k[t + 1] << 16 : 0)));
            const __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), kk));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), kk));
            s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), kk));
            s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), kk));
        }
        s0 = _mm256_sra_epi32(s0, shift);
        s1 = _mm256_sra_epi32(s1, shift);
        s2 = _mm256_sra_epi32(s2, shift);
        s3 = _mm256_sra_epi32(s3, shift);
        /* the unpacks and packs all stay within 128-bit lanes: bytes in order */
        const __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));
        _mm256_storeu_si256((__m256i *)(out + x), v);
    }
    rs_vertical_row(rows, k, taps, precision, out, x, bytes);
}

static int rs_have_avx2(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return known;
}
#endif

/* The horizontal pass over rows first..first+count-1 of the window into
   tmp (count rows of out_w pixels). */
static void rs_horizontal(const unsigned char *src, size_t row_bytes, int bpp, int first, int count,
                          const rs_axis *a, int out_w, unsigned char *tmp, int vector) {
    const size_t tmp_row = (size_t)out_w * (size_t)bpp;
    int y = 0;
#ifdef RS_X86
    if (vector && bpp == 4 && rs_have_avx2()) {
        for (; y + 4 <= count; y += 4) {
            const unsigned char *in[4];
            unsigned char *out[4];
            for (int r = 0; r < 4; r++) {
                in[r] = src + (size_t)(first + y + r) * row_bytes;
                out[r] = tmp + (size_t)(y + r) * tmp_row;
            }
            rs_horizontal4_avx2(in, out, a, out_w);
        }
    }
#endif
    for (; y < count; y++)
        rs_horizontal_row(src + (size_t)(first + y) * row_bytes, tmp + (size_t)y * tmp_row, bpp, a, out_w);
}

static void rs_vertical(const unsigned char *const *rows, const int16_t *k, int taps, int precision,
                        unsigned char *out, size_t bytes, int vector) {
#ifdef RS_X86
    if (vector && rs_have_avx2()) {
        rs_vertical_row_avx2(rows, k, taps, precision, out, bytes);
        return;
    }
#endif
    rs_vertical_row(rows, k, taps, precision, out, 0, bytes);
}

#endif
