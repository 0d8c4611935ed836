/* The x86 kernels of ../_resample.h, chosen at run time by what the CPU has:
 * AVX2 (resample_avx2.h) and AVX-512 with VBMI (one row at a time, sixteen
 * output pixels a step: each group of four gathers its source bytes from
 * one 64-byte load with a byte permutation, so a tap pair costs one vpermb
 * and one madd for four pixels). Integer sums: the same bytes as the
 * portable loops (tested against each other).
 */
#ifndef IM2REC_RESAMPLE_X86_H
#define IM2REC_RESAMPLE_X86_H

#include "resample_avx2.h"

/* ---- AVX-512 (F, BW, VBMI) ---- */

/* The horizontal pass's AVX-512 plan: outputs in groups of four, groups in
   blocks of four (sixteen pixels, one 64-byte store); for each group the
   first source pixel, the mask of its 64 bytes that lie in the row, and
   per pair of taps 128 bytes: the byte index of every 16-bit lane (vpermb)
   and the weights in the same lanes (madd). */
typedef struct {
    int groups, pairs;
    int *base;
    uint64_t *mask;
    unsigned char *table;
} rs_wide;

static void rs_wide_free(rs_wide *w) {
    free(w->base);
    free(w->mask);
    free(w->table);
}

/* 0, or -1 where a group's taps reach past its 64 bytes (long filters:
   the AVX2 kernel then) or memory is short. The source pixels are RGBX
   (in_bpp 4) or RGB (3: the JPEG decoder's cheaper output, 21 pixels to
   the 64 bytes); either way the output is RGBX, its X lanes weighed 0 from
   RGB. base holds each group's first source byte. */
static int rs_wide_plan(rs_wide *w, const rs_axis *a, int out_w, int in_w, int in_bpp) {
    memset(w, 0, sizeof *w);
    int most = 0;
    for (int xx = 0; xx < out_w; xx++)
        if (a->taps[xx] > most) most = a->taps[xx];
    if (most * in_bpp > 64) return -1;
    w->pairs = most < 2 ? 1 : (most + 1) / 2;
    w->groups = (out_w + 15) / 16 * 4;
    w->base = calloc((size_t)w->groups, sizeof *w->base);
    w->mask = calloc((size_t)w->groups, sizeof *w->mask);
    w->table = calloc((size_t)w->groups * (size_t)w->pairs, 128);
    if (w->base == NULL || w->mask == NULL || w->table == NULL) {
        rs_wide_free(w);
        return -1;
    }
    /* byte 4c + 2s: s * in_bpp + c; weights kept for the channels read */
    const __m128i pattern = _mm_setr_epi8(0, 0, (char)in_bpp, 0, 1, 0, (char)(in_bpp + 1), 0, 2, 0,
                                          (char)(in_bpp + 2), 0, 3, 0, (char)(in_bpp + 3), 0);
    const __m128i keep = in_bpp == 4 ? _mm_set1_epi32(-1) : _mm_setr_epi32(-1, -1, -1, 0);
    for (int g = 0; g < w->groups && g * 4 < out_w; g++) {
        const int base = a->first[g * 4];
        const size_t avail = (size_t)(in_w - base) * (size_t)in_bpp;
        w->base[g] = base * in_bpp;
        w->mask[g] = avail >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << avail) - 1;
        for (int j = 0; j < 4 && g * 4 + j < out_w; j++) {
            const int xx = g * 4 + j, off = a->first[xx] - base;
            if (off < 0 || (off + a->taps[xx]) * in_bpp > 64) {
                rs_wide_free(w);
                return -1;
            }
            /* Pixel j's sixteen bytes of each pair's block: 16-bit lane
               c * 2 + s (channel c, tap 2p + s) takes source byte
               (off + 2p + s) * in_bpp + c and weight k[2p + s]. A tap past
               the pixel's last, and RGB's X lanes, weigh 0 (their index
               bytes then do not matter). */
            const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
            const int taps = a->taps[xx];
            for (int p = 0; p < w->pairs; p++) {
                unsigned char *index = w->table + ((size_t)g * (size_t)w->pairs + (size_t)p) * 128 +
                                       (size_t)j * 16;
                const uint16_t w0 = 2 * p < taps ? (uint16_t)k[2 * p] : 0;
                const uint16_t w1 = 2 * p + 1 < taps ? (uint16_t)k[2 * p + 1] : 0;
                const char at = (char)((off + 2 * p) * in_bpp);
                _mm_storeu_si128((__m128i *)index, _mm_add_epi8(pattern, _mm_set1_epi8(at)));
                _mm_storeu_si128((__m128i *)(index + 64),
                                 _mm_and_si128(_mm_set1_epi32((int)((uint32_t)w0 | (uint32_t)w1 << 16)), keep));
            }
        }
    }
    return 0;
}

/* One group's four pixels, its sums shifted down (pairs: constant where
   inlined, so the loop over the taps unrolls). The plan's arrays come as
   locals: read through rs_wide, every byte stored to the output row could
   alias them, and each group reloaded them. The load is always masked (a
   full mask costs what a plain load does), so no branch either. */
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) static inline __m512i rs_group_avx512(
        const unsigned char *in, const int *base, const uint64_t *mask, const unsigned char *table,
        int g, int pairs, __m512i half, __m128i shift) {
    const __m512i data = _mm512_maskz_loadu_epi8(mask[g], in + base[g]);
    const unsigned char *t = table + (size_t)g * (size_t)pairs * 128;
    __m512i acc = half;
    for (int p = 0; p < pairs; p++, t += 128) {
        const __m512i px = _mm512_maskz_permutexvar_epi8(0x5555555555555555ULL,
                                                         _mm512_loadu_si512((const void *)t), data);
        acc = _mm512_dpwssd_epi32(acc, px, _mm512_loadu_si512((const void *)(t + 64)));
    }
    return _mm512_sra_epi32(acc, shift);
}

__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) static inline void rs_row_avx512(
        const unsigned char *in, unsigned char *out, const rs_wide *w, int out_w, int precision,
        int pairs) {
    const __m512i half = _mm512_set1_epi32((int32_t)1 << (precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(precision);
    const int *base = w->base, groups = w->groups;
    const uint64_t *mask = w->mask;
    const unsigned char *table = w->table;
    /* packs and packus work within 128-bit lanes: dword l*4+g holds group
       g's pixel l; this puts pixel g*4+l there */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int block = 0; block < groups; block += 4) {
        const __m512i s0 = rs_group_avx512(in, base, mask, table, block, pairs, half, shift);
        const __m512i s1 = rs_group_avx512(in, base, mask, table, block + 1, pairs, half, shift);
        const __m512i s2 = rs_group_avx512(in, base, mask, table, block + 2, pairs, half, shift);
        const __m512i s3 = rs_group_avx512(in, base, mask, table, block + 3, pairs, half, shift);
        __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(s0, s1), _mm512_packs_epi32(s2, s3));
        b = _mm512_permutexvar_epi32(order, b);
        const int left = out_w - block * 4;
        if (left >= 16)
            _mm512_storeu_si512((void *)(out + (size_t)block * 16), b);
        else
            _mm512_mask_storeu_epi32(out + (size_t)block * 16, (__mmask16)((1u << left) - 1), b);
    }
}

__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) static void rs_horizontal_row_avx512(
        const unsigned char *in, unsigned char *out, const rs_wide *w, int out_w, int precision) {
    switch (w->pairs) {  /* the usual filters: 2 taps (enlarging), 3-4 (shrinking a little) */
    case 1: rs_row_avx512(in, out, w, out_w, precision, 1); break;
    case 2: rs_row_avx512(in, out, w, out_w, precision, 2); break;
    default: rs_row_avx512(in, out, w, out_w, precision, w->pairs); break;
    }
}

/* One output row, 64 bytes at a time: the AVX2 kernel's steps, twice as
   wide; a last part under 64 bytes (the planar rows': 3 x 224) masked. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void rs_vertical_row_avx512(
        const unsigned char *const *rows, const int16_t *k, int taps, int precision,
        unsigned char *out, size_t bytes) {
    const __m512i half = _mm512_set1_epi32((int32_t)1 << (precision - 1)), zero = _mm512_setzero_si512();
    const __m128i shift = _mm_cvtsi32_si128(precision);
    for (size_t x = 0; x < bytes; x += 64) {
        /* (a mask only where needed: Zen 4's masked stores are slow) */
        const int whole = bytes - x >= 64;
        const __mmask64 m = whole ? ~(__mmask64)0 : ((__mmask64)1 << (bytes - x)) - 1;
        __m512i s0 = half, s1 = half, s2 = half, s3 = half;
        for (int t = 0; t < taps; t += 2) {
            const __m512i a = whole ? _mm512_loadu_si512((const void *)(rows[t] + x))
                                    : _mm512_maskz_loadu_epi8(m, rows[t] + x);
            const __m512i b = t + 1 >= taps ? zero
                              : whole ? _mm512_loadu_si512((const void *)(rows[t + 1] + x))
                                      : _mm512_maskz_loadu_epi8(m, rows[t + 1] + x);
            const __m512i kk = _mm512_set1_epi32(
                (int32_t)((uint32_t)(uint16_t)k[t] | (t + 1 < taps ? (uint32_t)(uint16_t)k[t + 1] << 16 : 0)));
            const __m512i lo = _mm512_unpacklo_epi8(a, b), hi = _mm512_unpackhi_epi8(a, b);
            s0 = _mm512_dpwssd_epi32(s0, _mm512_unpacklo_epi8(lo, zero), kk);
            s1 = _mm512_dpwssd_epi32(s1, _mm512_unpackhi_epi8(lo, zero), kk);
            s2 = _mm512_dpwssd_epi32(s2, _mm512_unpacklo_epi8(hi, zero), kk);
            s3 = _mm512_dpwssd_epi32(s3, _mm512_unpackhi_epi8(hi, zero), kk);
        }
        s0 = _mm512_sra_epi32(s0, shift);
        s1 = _mm512_sra_epi32(s1, shift);
        s2 = _mm512_sra_epi32(s2, shift);
        s3 = _mm512_sra_epi32(s3, shift);
        const __m512i v = _mm512_packus_epi16(_mm512_packs_epi32(s0, s1), _mm512_packs_epi32(s2, s3));
        if (whole)
            _mm512_storeu_si512((void *)(out + x), v);
        else
            _mm512_mask_storeu_epi8(out + x, m, v);
    }
}

/* An RGBX row into three float32 planes, sixteen pixels a step, for
   _tensor.c's rows: SSE2 rgbx_row's operations (mask, convert, multiply,
   subtract: the same values), with streaming stores, so the planes must be
   64-byte aligned (the caller checks). The pixels done (a multiple of 16). */
__attribute__((target("avx512f"))) static ptrdiff_t rs_rgbx_row_avx512(
        const unsigned char *row, float *r, float *g, float *b, ptrdiff_t width, const float *k,
        const float *mk, int flip) {
    const __m512 k0 = _mm512_set1_ps(k[0]), k1 = _mm512_set1_ps(k[1]), k2 = _mm512_set1_ps(k[2]);
    const __m512 m0 = _mm512_set1_ps(mk[0]), m1 = _mm512_set1_ps(mk[1]), m2 = _mm512_set1_ps(mk[2]);
    const __m512i low = _mm512_set1_epi32(0xff);
    const __m512i back = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    ptrdiff_t x = 0;
    for (; x + 16 <= width; x += 16) {
        __m512i px;
        if (flip) {  /* output x..x+15 are input width-1-x down to width-16-x */
            px = _mm512_loadu_si512((const void *)(row + (size_t)(width - 16 - x) * 4));
            px = _mm512_permutexvar_epi32(back, px);
        } else {
            px = _mm512_loadu_si512((const void *)(row + (size_t)x * 4));
        }
        __m512 v0 = _mm512_cvtepi32_ps(_mm512_and_si512(px, low));
        __m512 v1 = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(px, 8), low));
        __m512 v2 = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(px, 16), low));
        _mm512_stream_ps(r + x, _mm512_sub_ps(_mm512_mul_ps(v0, k0), m0));
        _mm512_stream_ps(g + x, _mm512_sub_ps(_mm512_mul_ps(v1, k1), m1));
        _mm512_stream_ps(b + x, _mm512_sub_ps(_mm512_mul_ps(v2, k2), m2));
    }
    return x;
}

/* An RGBX row into three uint8 planes, sixteen pixels a step: one vpermb
   gathers a channel's sixteen bytes from the pixels' 64 (in reverse for the
   mirror). The pixels done (a multiple of 16). */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static ptrdiff_t rs_split_rgbx_avx512(
        const unsigned char *row, unsigned char *r, unsigned char *g, unsigned char *b,
        ptrdiff_t width, int flip) {
    /* byte i of the low 16 = pixel i's red (0, 4, 8, ...), or pixel 15 - i's */
    const __m512i red = flip ? _mm512_setr_epi32(0x3034383C, 0x2024282C, 0x1014181C, 0x0004080C,
                                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                             : _mm512_setr_epi32(0x0C080400, 0x1C181410, 0x2C282420, 0x3C383430,
                                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i green = _mm512_add_epi8(red, _mm512_set1_epi8(1));
    const __m512i blue = _mm512_add_epi8(red, _mm512_set1_epi8(2));
    ptrdiff_t x = 0;
    for (; x + 16 <= width; x += 16) {
        const __m512i px = _mm512_loadu_si512((const void *)(row + (size_t)(flip ? width - 16 - x : x) * 4));
        _mm_storeu_si128((__m128i *)(r + x), _mm512_castsi512_si128(_mm512_permutexvar_epi8(red, px)));
        _mm_storeu_si128((__m128i *)(g + x), _mm512_castsi512_si128(_mm512_permutexvar_epi8(green, px)));
        _mm_storeu_si128((__m128i *)(b + x), _mm512_castsi512_si128(_mm512_permutexvar_epi8(blue, px)));
    }
    return x;
}

#endif
