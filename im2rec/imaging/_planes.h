/* Rows of 8-bit pixels (gray, RGB or RGBX) into planes (C, H, W): float32
 * pixel * k[c] - mk[c] (numpy's float32 operations in numpy's order, so the
 * values are identical), or uint8 as they are; mirrored left-right when
 * asked. _tensor.c's normalise, split and resample write every row through
 * plane_row, so each row is written while it is still in cache. RGBX rows
 * use SSE2 (and AVX-512 from simd/resample_avx512.h when the planes are 64-byte
 * aligned), with streaming stores into aligned planes: a sample is 600 kB
 * of a batch nobody reads before it is done.
 *
 * Plain C on checked buffers: the callers (_tensor.c) check every size.
 */
#ifndef IM2REC_PLANES_H
#define IM2REC_PLANES_H

#include "_resample.h"
#include <stdint.h>

/* One row of a gray window: the mirror is a separate loop so that both
   compile to straight vector code. */
static void gray_row(const unsigned char *restrict row, float *restrict line, Py_ssize_t width,
                     float k, float mk, int flip) {
    if (flip) {
        for (Py_ssize_t x = 0; x < width; x++) {
            float v = (float)row[width - 1 - x] * k;
            line[x] = v - mk;
        }
    } else {
        for (Py_ssize_t x = 0; x < width; x++) {
            float v = (float)row[x] * k;
            line[x] = v - mk;
        }
    }
}

/* One row of a colour window into the three planes, reading each pixel once
   (gray pixels, one byte, give the same value to the three). */
static inline __attribute__((always_inline)) void colour_row(
        const unsigned char *restrict row, const int step, float *restrict line, size_t plane,
        Py_ssize_t width, const float *k, const float *mk, int flip) {
    float *restrict r = line, *restrict g = line + plane, *restrict b = line + 2 * plane;
    const float k0 = k[0], k1 = k[1], k2 = k[2], m0 = mk[0], m1 = mk[1], m2 = mk[2];
    const int at1 = step == 1 ? 0 : 1, at2 = step == 1 ? 0 : 2;
    if (flip) {  /* reading forward, writing backward: both vectorise */
        for (Py_ssize_t x = 0; x < width; x++) {
            const unsigned char *p = row + (size_t)x * (size_t)step;
            float v0 = (float)p[0] * k0, v1 = (float)p[at1] * k1, v2 = (float)p[at2] * k2;
            r[width - 1 - x] = v0 - m0;
            g[width - 1 - x] = v1 - m1;
            b[width - 1 - x] = v2 - m2;
        }
        return;
    }
    for (Py_ssize_t x = 0; x < width; x++) {
        const unsigned char *p = row + (size_t)x * (size_t)step;
        float v0 = (float)p[0] * k0, v1 = (float)p[at1] * k1, v2 = (float)p[at2] * k2;
        r[x] = v0 - m0;
        g[x] = v1 - m1;
        b[x] = v2 - m2;
    }
}

#if defined(__SSE2__)
#include <emmintrin.h>
#include <stdint.h>

/* RGBX rows with SSE2, four pixels at a time: the mirror is a shuffle of the
   four pixels read from the other end, and aligned planes are written with
   streaming stores (a sample is 600 kB of a batch nobody reads before the
   batch is done: not worth the cache, nor the read for ownership). Multiply
   then subtract, as the scalar loop and numpy do: the same float32 values. */
static int rgbx_row(const unsigned char *restrict row, float *restrict line, size_t plane,
                    Py_ssize_t width, const float *k, const float *mk, int flip) {
    float *restrict r = line, *restrict g = line + plane, *restrict b = line + 2 * plane;
    const int stream = ((uintptr_t)r | (uintptr_t)g | (uintptr_t)b) % 16 == 0;
    const __m128 k0 = _mm_set1_ps(k[0]), k1 = _mm_set1_ps(k[1]), k2 = _mm_set1_ps(k[2]);
    const __m128 m0 = _mm_set1_ps(mk[0]), m1 = _mm_set1_ps(mk[1]), m2 = _mm_set1_ps(mk[2]);
    const __m128i low = _mm_set1_epi32(0xff);
    Py_ssize_t x = 0;
    for (; x + 4 <= width; x += 4) {
        __m128i px;
        if (flip) {  /* output x..x+3 are input width-1-x down to width-4-x */
            px = _mm_loadu_si128((const __m128i *)(row + (size_t)(width - 4 - x) * 4));
            px = _mm_shuffle_epi32(px, _MM_SHUFFLE(0, 1, 2, 3));
        } else {
            px = _mm_loadu_si128((const __m128i *)(row + (size_t)x * 4));
        }
        __m128 v0 = _mm_cvtepi32_ps(_mm_and_si128(px, low));
        __m128 v1 = _mm_cvtepi32_ps(_mm_and_si128(_mm_srli_epi32(px, 8), low));
        __m128 v2 = _mm_cvtepi32_ps(_mm_and_si128(_mm_srli_epi32(px, 16), low));
        v0 = _mm_sub_ps(_mm_mul_ps(v0, k0), m0);
        v1 = _mm_sub_ps(_mm_mul_ps(v1, k1), m1);
        v2 = _mm_sub_ps(_mm_mul_ps(v2, k2), m2);
        if (stream) {
            _mm_stream_ps(r + x, v0);
            _mm_stream_ps(g + x, v1);
            _mm_stream_ps(b + x, v2);
        } else {
            _mm_storeu_ps(r + x, v0);
            _mm_storeu_ps(g + x, v1);
            _mm_storeu_ps(b + x, v2);
        }
    }
    return (int)x;  /* the scalar loop does the rest */
}
#define HAVE_RGBX_ROW 1
#endif

/* One row of pixels into row y of uint8 planes (C, H, W), each pixel read
   once (RGBX rows sixteen pixels a step with AVX-512). */
static void split_row(const unsigned char *restrict row, size_t step, unsigned char *dst,
                      size_t plane, Py_ssize_t y, Py_ssize_t width, Py_ssize_t channels, int flip) {
    unsigned char *restrict r = dst + (size_t)y * (size_t)width;
    if (channels == 1) {
        for (Py_ssize_t x = 0; x < width; x++) r[x] = row[(size_t)(flip ? width - 1 - x : x) * step];
        return;
    }
    unsigned char *restrict g = r + plane, *restrict b = r + 2 * plane;
    const size_t at1 = step == 1 ? 0 : 1, at2 = step == 1 ? 0 : 2;
    Py_ssize_t x = 0;
#ifdef RS_X86
    if (step == 4 && simd_avx512()) x = rs_split_rgbx_avx512(row, r, g, b, width, flip);
#endif
    for (; x < width; x++) {  /* mirrored, output x is input width - 1 - x */
        const unsigned char *p = row + (size_t)(flip ? width - 1 - x : x) * step;
        r[x] = p[0];
        g[x] = p[at1];
        b[x] = p[at2];
    }
}

/* One row of pixels into row y of float32 planes, as normalise does it. */
static void normalise_row(const unsigned char *row, Py_ssize_t pixel_bytes, float *dst,
                          size_t plane, Py_ssize_t y, Py_ssize_t width, Py_ssize_t channels,
                          const float *k, const float *mk, int flip) {
    float *line = dst + (size_t)y * (size_t)width;
    if (channels == 1)
        gray_row(row, line, width, k[0], mk[0], flip);
    else if (pixel_bytes == 4) {
        Py_ssize_t done = 0;
#ifdef RS_X86
        float *g = line + plane, *b = line + 2 * plane;
        if (((uintptr_t)line | (uintptr_t)g | (uintptr_t)b) % 64 == 0 && simd_avx512())
            done = rs_rgbx_row_avx512(row, line, g, b, width, k, mk, flip);
#endif
#ifdef HAVE_RGBX_ROW
        if (done < width)  /* mirrored, outputs done.. are inputs 0..width-done-1 */
            done += rgbx_row(flip ? row : row + (size_t)done * 4, line + done, plane, width - done,
                             k, mk, flip);
#endif
        /* the last 0-3 outputs: mirrored, they are inputs 0..rest-1 */
        if (done < width)
            colour_row(flip ? row : row + (size_t)done * 4, 4, line + done, plane, width - done, k,
                       mk, flip);
    }
    else if (pixel_bytes == 3)
        colour_row(row, 3, line, plane, width, k, mk, flip);
    else
        colour_row(row, 1, line, plane, width, k, mk, flip);
}

/* Row y of the planes from one row of pixels: float32 (k, mk) or, with k
   NULL, uint8. */
static inline void plane_row(const unsigned char *row, int pixel_bytes, void *out, size_t plane,
                             int y, int width, int channels, const float *k, const float *mk,
                             int flip) {
    if (k != NULL)
        normalise_row(row, pixel_bytes, (float *)out, plane, y, width, channels, k, mk, flip);
    else
        split_row(row, (size_t)pixel_bytes, (unsigned char *)out, plane, y, width, channels, flip);
}

/* The streamed planes visible before the batch is handed on. */
static inline void planes_done(void) {
#ifdef HAVE_RGBX_ROW
    _mm_sfence();
#endif
}

#endif
