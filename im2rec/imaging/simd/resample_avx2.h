/* The AVX2 kernels of ../_resample.h (included by resample_avx512.h): the
 * horizontal pass four rows at a time, one output pixel a step (Pillow-
 * SIMD's way), over RGBX or RGB pixels, and the vertical pass 32 bytes a
 * step. Integer sums: the same bytes as the portable loops (tested against
 * each other). RGB rows the planar pass (planar_avx2.h) takes where it can.
 */
#ifndef IM2REC_RESAMPLE_AVX2_H
#define IM2REC_RESAMPLE_AVX2_H

static inline int32_t rs_pair(const int16_t *k) {  /* two weights as madd takes them */
    int32_t v;
    memcpy(&v, k, sizeof v);
    return v;
}

/* Four rows at once, one output pixel at a time, its taps two by two: each
   pair of source pixels spread to 16-bit lanes (R R' G G' B B' X X') and
   multiplied-added with (k, k') into four 32-bit sums. The source pixels
   are RGBX (in_bpp 4) or RGB (in_bpp 3, the loaders' decoded rows; X comes
   out 0, as from the portable loops): a pair is then six bytes of an
   eight-byte load.

   Most output pixels take the row's most taps, a number fixed for the
   row: the weights past a pixel's own taps are 0 (rs_plan fills its ksize
   slots), so the sums are the same, and the loop, the same length for
   every pixel, is predicted (a count varying from pixel to pixel cost a
   mispredicted branch every few pixels); an odd last tap is then a pair
   whose second weight is 0. The pixels near the row's end, where those
   loads would pass it (width pixels; the last row may end its buffer),
   take their own taps and copy what passes the end. */
static inline __attribute__((always_inline, target("avx2"))) __m128i rs_pair_bytes(
        const unsigned char *p, int in_bpp, int whole) {
    if (in_bpp == 4 || whole) return _mm_loadl_epi64((const __m128i *)p);
    int64_t v = 0;
    memcpy(&v, p, 6);
    return _mm_cvtsi64_si128(v);
}

static inline __attribute__((always_inline, target("avx2"))) __m256i rs_rows_pair(
        const unsigned char *p0, const unsigned char *p1, int in_bpp, int whole, __m256i spread) {
    const __m256i p = _mm256_inserti128_si256(_mm256_castsi128_si256(rs_pair_bytes(p0, in_bpp, whole)),
                                              rs_pair_bytes(p1, in_bpp, whole), 1);
    return _mm256_shuffle_epi8(p, spread);
}

/* a lone last tap of two rows, its pixel's bytes copied (the careful way) */
static inline __attribute__((always_inline, target("avx2"))) __m256i rs_odd_tap(
        const unsigned char *p0, const unsigned char *p1, int in_bpp) {
    int32_t w0 = 0, w1 = 0;
    memcpy(&w0, p0, (size_t)in_bpp);
    memcpy(&w1, p1, (size_t)in_bpp);
    const __m256i p = _mm256_cvtepu8_epi32(_mm_setr_epi32(w0, 0, 0, 0));
    return _mm256_permute2x128_si256(p, _mm256_cvtepu8_epi32(_mm_setr_epi32(w1, 0, 0, 0)), 0x20);
}

/* One output pixel of four rows: taps weights from k, source pixels from
   byte at. whole: every eight-byte load of a pair (and of an odd last
   tap, then weighed as a pair with 0) stays inside the rows. */
static inline __attribute__((always_inline, target("avx2"))) void rs_pixel4(
        const unsigned char *const in[4], size_t at, const int16_t *k, int taps, int in_bpp,
        int whole, __m256i spread, __m256i *s01, __m256i *s23) {
    int t = 0;
    for (; t + 1 < taps; t += 2) {
        const __m256i kk = _mm256_set1_epi32(rs_pair(k + t));
        const size_t o = at + (size_t)t * (size_t)in_bpp;
        *s01 = _mm256_add_epi32(*s01, _mm256_madd_epi16(rs_rows_pair(in[0] + o, in[1] + o, in_bpp, whole, spread), kk));
        *s23 = _mm256_add_epi32(*s23, _mm256_madd_epi16(rs_rows_pair(in[2] + o, in[3] + o, in_bpp, whole, spread), kk));
    }
    if (t < taps) {
        const __m256i kk = _mm256_set1_epi32((int32_t)(uint16_t)k[t]);
        const size_t o = at + (size_t)t * (size_t)in_bpp;
        if (whole) {
            *s01 = _mm256_add_epi32(*s01, _mm256_madd_epi16(rs_rows_pair(in[0] + o, in[1] + o, in_bpp, 1, spread), kk));
            *s23 = _mm256_add_epi32(*s23, _mm256_madd_epi16(rs_rows_pair(in[2] + o, in[3] + o, in_bpp, 1, spread), kk));
        } else {
            *s01 = _mm256_add_epi32(*s01, _mm256_madd_epi16(rs_odd_tap(in[0] + o, in[1] + o, in_bpp), kk));
            *s23 = _mm256_add_epi32(*s23, _mm256_madd_epi16(rs_odd_tap(in[2] + o, in[3] + o, in_bpp), kk));
        }
    }
}

/* The row's pixels with most taps each (a constant where the caller
   dispatches on it, so the loop unrolls). */
static inline __attribute__((always_inline, target("avx2"))) void rs_horizontal4(
        const unsigned char *const in[4], unsigned char *const out[4], const rs_axis *a,
        int out_w, int width, int in_bpp, int most) {
    const __m256i spread = in_bpp == 4
        ? _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1,
                           0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1)
        : _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                           0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (a->precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(a->precision);
    /* how far past first the fixed loads reach, in pixels (RGB: the two
       bytes past the last pair's six need one pixel more) */
    const int reach = (most + 1) / 2 * 2 + (in_bpp == 3);
    for (int xx = 0; xx < out_w; xx++) {
        const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
        const int first = a->first[xx];
        const size_t at = (size_t)first * (size_t)in_bpp;
        __m256i s01 = half, s23 = half;
        if (first + reach <= width)
            rs_pixel4(in, at, k, most, in_bpp, 1, spread, &s01, &s23);
        else
            rs_pixel4(in, at, k, a->taps[xx], in_bpp, 0, spread, &s01, &s23);
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

/* The four rows through rs_horizontal4 with the row's most taps a constant
   for the common counts. */
static inline __attribute__((always_inline, target("avx2"))) void rs_horizontal4_by_taps(
        const unsigned char *const in[4], unsigned char *const out[4], const rs_axis *a,
        int out_w, int width, int in_bpp, int most) {
    switch (most) {
    case 2: rs_horizontal4(in, out, a, out_w, width, in_bpp, 2); break;
    case 3: rs_horizontal4(in, out, a, out_w, width, in_bpp, 3); break;
    case 4: rs_horizontal4(in, out, a, out_w, width, in_bpp, 4); break;
    case 5: rs_horizontal4(in, out, a, out_w, width, in_bpp, 5); break;
    case 6: rs_horizontal4(in, out, a, out_w, width, in_bpp, 6); break;
    default: rs_horizontal4(in, out, a, out_w, width, in_bpp, most); break;
    }
}

__attribute__((target("avx2"))) static void rs_horizontal4_avx2(
        const unsigned char *const in[4], unsigned char *const out[4], const rs_axis *a,
        int out_w, int width, int most) {
    rs_horizontal4_by_taps(in, out, a, out_w, width, 4, most);
}

__attribute__((target("avx2"))) static void rs_horizontal4_rgb_avx2(
        const unsigned char *const in[4], unsigned char *const out[4], const rs_axis *a,
        int out_w, int width, int most) {
    rs_horizontal4_by_taps(in, out, a, out_w, width, 3, most);
}

/* rs_vertical_pairs_avx2 takes up to this many pairs of taps (16 taps);
   longer filters the step's own loop */
#define RS_VERTICAL_PAIRS 8

/* One pair of taps over 32 bytes: rows a and b interleaved byte by byte and
   widened, so madd weighs both at once (kk: the two weights, 16 bits each). */
static inline __attribute__((always_inline, target("avx2"))) void rs_vertical_pair(
        __m256i a, __m256i b, __m256i kk, __m256i *s) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
    s[0] = _mm256_add_epi32(s[0], _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), kk));
    s[1] = _mm256_add_epi32(s[1], _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), kk));
    s[2] = _mm256_add_epi32(s[2], _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), kk));
    s[3] = _mm256_add_epi32(s[3], _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), kk));
}

/* The 32 sums shifted, clamped to 0..255 and stored (the unpacks and packs
   all stay within 128-bit lanes: bytes in order). */
static inline __attribute__((always_inline, target("avx2"))) void rs_vertical_store(
        const __m256i *s, __m128i shift, unsigned char *out) {
    const __m256i v = _mm256_packus_epi16(
        _mm256_packs_epi32(_mm256_sra_epi32(s[0], shift), _mm256_sra_epi32(s[1], shift)),
        _mm256_packs_epi32(_mm256_sra_epi32(s[2], shift), _mm256_sra_epi32(s[3], shift)));
    _mm256_storeu_si256((__m256i *)out, v);
}

/* One output row, 32 bytes at a time. The pairs' weights and rows are taken
   once a row, not once a step (an odd last tap pairs its row with itself,
   weighed 0), and with pairs a constant where the caller dispatches on it
   the taps unroll: the step's loop of taps, its length varying from row to
   row, was a third of this pass's time. */
static inline __attribute__((always_inline, target("avx2"))) void rs_vertical_pairs_avx2(
        const unsigned char *const *rows, const int16_t *k, int taps, int precision,
        unsigned char *out, size_t bytes, int pairs) {
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(precision);
    __m256i kk[RS_VERTICAL_PAIRS];
    const unsigned char *ra[RS_VERTICAL_PAIRS], *rb[RS_VERTICAL_PAIRS];
    for (int p = 0; p < pairs; p++) {
        const int second = 2 * p + 1 < taps;
        kk[p] = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)k[2 * p] |
                                            (second ? (uint32_t)(uint16_t)k[2 * p + 1] << 16 : 0)));
        ra[p] = rows[2 * p];
        rb[p] = second ? rows[2 * p + 1] : rows[2 * p];
    }
    size_t x = 0;
    for (; x + 32 <= bytes; x += 32) {
        __m256i s[4] = {half, half, half, half};
        for (int p = 0; p < pairs; p++)
            rs_vertical_pair(_mm256_loadu_si256((const __m256i *)(ra[p] + x)),
                             _mm256_loadu_si256((const __m256i *)(rb[p] + x)), kk[p], s);
        rs_vertical_store(s, shift, out + x);
    }
    rs_vertical_row(rows, k, taps, precision, out, x, bytes);
}

__attribute__((target("avx2"))) static void rs_vertical_row_avx2(
        const unsigned char *const *rows, const int16_t *k, int taps, int precision,
        unsigned char *out, size_t bytes) {
    switch ((taps + 1) / 2) {  /* enlarging: 2 taps; shrinking a little: 3 or 4 */
    case 1: rs_vertical_pairs_avx2(rows, k, taps, precision, out, bytes, 1); return;
    case 2: rs_vertical_pairs_avx2(rows, k, taps, precision, out, bytes, 2); return;
    case 3: rs_vertical_pairs_avx2(rows, k, taps, precision, out, bytes, 3); return;
    default:
        if (taps <= 2 * RS_VERTICAL_PAIRS) {
            rs_vertical_pairs_avx2(rows, k, taps, precision, out, bytes, (taps + 1) / 2);
            return;
        }
    }
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(precision);
    size_t x = 0;
    for (; x + 32 <= bytes; x += 32) {
        __m256i s[4] = {half, half, half, half};
        for (int t = 0; t < taps; t += 2) {
            const int second = t + 1 < taps;
            const __m256i kk = _mm256_set1_epi32(
                (int32_t)((uint32_t)(uint16_t)k[t] | (second ? (uint32_t)(uint16_t)k[t + 1] << 16 : 0)));
            rs_vertical_pair(_mm256_loadu_si256((const __m256i *)(rows[t] + x)),
                             _mm256_loadu_si256((const __m256i *)(rows[second ? t + 1 : t] + x)), kk, s);
        }
        rs_vertical_store(s, shift, out + x);
    }
    rs_vertical_row(rows, k, taps, precision, out, x, bytes);
}

#endif
