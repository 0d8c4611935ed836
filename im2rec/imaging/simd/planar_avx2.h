/* The training crop's resampling in planes on AVX2 (no AVX-512: Zen 2 and
 * 3, Intel's client cores): the same shape as planar_avx512.h's -- RGB rows
 * from the JPEG decoder -> a horizontal pass whose rows are three 8-bit
 * planes (R[w] G[w] B[w]) -> the vertical pass over those bytes -> float32
 * or uint8 planes -- with AVX2's in-lane byte shuffle for AVX-512's vpermb.
 *
 * Eight outputs of a row a block, four in each 128-bit lane: a lane's
 * source bytes lie in one 16-byte load (five RGB pixels: enlarging, two
 * taps an output) or two (ten: a shrink to ~1.6x), from which one vpshufb
 * a channel and a pair of taps (two, or'ed, from two loads) gathers the
 * four outputs' 16-bit pairs, and one vpmaddwd weighs them. The RGBX
 * kernel it replaces (rs_horizontal4_avx2) weighed four rows' pixels one
 * output at a time, an X byte with every pixel, each pair of taps from
 * eight-byte loads. The sums are the same integers, so the bytes are
 * the RGBX path's and Pillow-SIMD's (tests/imaging/test_resample.py).
 * A mirrored sample's plan takes the columns from the row's end. Windows
 * whose lanes reach further keep the RGBX path.
 */
#ifndef IM2REC_PLANAR_AVX2_H
#define IM2REC_PLANAR_AVX2_H

/* The plan: per block of eight outputs each lane's first source byte and
   whether its loads stay in the row, and per pair of taps the vpshufb
   index of every 16-bit lane for R, G and B (32 bytes each; two such, for
   the first load and the second, with two loads) and the weights (32). */
typedef struct {
    int blocks, pairs, two;
    size_t stride;       /* bytes of table a pair of taps */
    int *base;           /* 2 a block: lane 0's first source byte, lane 1's */
    unsigned char *edge; /* a block: 1 where a lane's load would pass the row's end */
    unsigned char *table;
} rs_planar2;

static void rs_planar2_free(rs_planar2 *w) {
    free(w->base);
    free(w->edge);
    free(w->table);
}

/* The first output of lane l (two a block, four outputs each). The row is
   made two blocks (sixteen outputs) a step, and so that each channel's
   sixteen bytes then leave the packs in two 8-byte halves, with no
   permute across lanes, the pair's lanes take outputs 0-3 and 8-11 (the
   first block) and 4-7 and 12-15 (the second); a last odd or partial
   block takes 0-3 and 4-7 of its eight. */
static inline int rs_planar2_lane(int l, int out_w) {
    const int b = l / 2, half = l % 2, paired = out_w / 16 * 2;
    if (b < paired) return (b / 2) * 16 + (b % 2) * 4 + half * 8;
    return b * 8 + half * 4;
}

/* Output column i of the row: mirrored, the plan takes it from the row's
   end (the writers then copy straight). */
static inline int rs_planar2_column(int i, int out_w, int flip) {
    return flip ? out_w - 1 - i : i;
}

/* 0, or -1 where a lane's taps reach past 32 bytes (the RGBX path then) or
   memory is short. in: RGB rows of in_w pixels. */
static int rs_planar2_plan(rs_planar2 *w, const rs_axis *a, int out_w, int in_w, int flip) {
    memset(w, 0, sizeof *w);
    if (out_w <= 0) return -1;
    int most = 0, reach = 0;
    for (int xx = 0; xx < out_w; xx++)
        if (a->taps[xx] > most) most = a->taps[xx];
    if (most * 3 > 32) return -1;  /* one output past the reach: nothing allocated */
    const int blocks = (out_w + 7) / 8;
    w->base = malloc((size_t)blocks * 2 * sizeof *w->base);
    if (w->base == NULL) return -1;
    for (int l = 0; l < blocks * 2; l++) {  /* each lane's first source pixel and its reach */
        int low = in_w, high = 0;
        const int start = rs_planar2_lane(l, out_w);
        for (int j = 0; j < 4 && start + j < out_w; j++) {
            const int xx = rs_planar2_column(start + j, out_w, flip);
            if (a->first[xx] < low) low = a->first[xx];
            if (a->first[xx] + a->taps[xx] > high) high = a->first[xx] + a->taps[xx];
        }
        if (high < low) low = high = 0;  /* a lane past the row's outputs: loads nothing used */
        w->base[l] = low;  /* in pixels until the tables below are made */
        if (high - low > reach) reach = high - low;
    }
    if (reach * 3 > 32) {
        free(w->base);
        w->base = NULL;
        return -1;
    }
    w->two = reach * 3 > 16;
    w->pairs = most < 2 ? 1 : (most + 1) / 2;
    w->blocks = blocks;
    w->stride = w->two ? 224 : 128;
    w->edge = calloc((size_t)blocks, 1);
    w->table = malloc((size_t)blocks * (size_t)w->pairs * w->stride);  /* all written below */
    if (w->edge == NULL || w->table == NULL) {
        rs_planar2_free(w);
        return -1;
    }
    /* Every lane's four 16-bit pairs a channel and a pair of taps, written
       whole, a 32-bit word each (an output past the row's end, or a tap
       past an output's last, has index 0x80, vpshufb's zero, and weight 0) */
    const int load = w->two ? 32 : 16;
    for (int l = 0; l < blocks * 2; l++) {
        const int base = w->base[l], b = l / 2, half = l % 2;
        if ((size_t)base * 3 + (size_t)load > (size_t)in_w * 3) w->edge[b] = 1;
        w->base[l] = base * 3;
        const int start = rs_planar2_lane(l, out_w);
        for (int j = 0; j < 4; j++) {
            const int real = start + j < out_w;
            const int xx = real ? rs_planar2_column(start + j, out_w, flip) : 0;
            const int taps = real ? a->taps[xx] : 0, off = real ? a->first[xx] - base : 0;
            const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
            const int at = half * 16 + j * 4;  /* this output's 16-bit pair in its lane */
            for (int p = 0; p < w->pairs; p++) {
                unsigned char *t = w->table + ((size_t)b * (size_t)w->pairs + (size_t)p) * w->stride;
                const int has0 = 2 * p < taps, has1 = 2 * p + 1 < taps;
                const uint32_t weights = (uint32_t)(uint16_t)(has0 ? k[2 * p] : 0) |
                                         (uint32_t)(uint16_t)(has1 ? k[2 * p + 1] : 0) << 16;
                memcpy(t + w->stride - 32 + at, &weights, 4);
                for (int c = 0; c < 3; c++) {
                    /* source bytes < 32: the reach above; 0x80 where none */
                    const uint32_t i0 = has0 ? (uint32_t)((off + 2 * p) * 3 + c) : 0x80;
                    const uint32_t i1 = has1 ? (uint32_t)((off + 2 * p + 1) * 3 + c) : 0x80;
                    if (!w->two) {
                        const uint32_t word = i0 | 0x8000u | i1 << 16 | 0x80000000u;
                        memcpy(t + c * 32 + at, &word, 4);
                        continue;
                    }
                    /* R: the first load's indices at 0, the second's at 32; G at 64 ... */
                    const uint32_t lo0 = i0 < 16 ? i0 : 0x80, hi0 = i0 >= 16 && i0 < 32 ? i0 - 16 : 0x80;
                    const uint32_t lo1 = i1 < 16 ? i1 : 0x80, hi1 = i1 >= 16 && i1 < 32 ? i1 - 16 : 0x80;
                    const uint32_t first = lo0 | 0x8000u | lo1 << 16 | 0x80000000u;
                    const uint32_t second = hi0 | 0x8000u | hi1 << 16 | 0x80000000u;
                    memcpy(t + c * 64 + at, &first, 4);
                    memcpy(t + c * 64 + 32 + at, &second, 4);
                }
            }
        }
    }
    return 0;
}

/* A block's source bytes: lane 0's 16 (or 32) from base[0], lane 1's from
   base[1]; lo holds each lane's first 16, hi the next. At the row's end
   (edge), what lies in the row is copied and the rest is 0. */
__attribute__((target("avx2"))) static inline void rs_planar2_load(
        const unsigned char *in, const int *base, int edge, int two, size_t row_end, __m256i *lo,
        __m256i *hi) {
    if (!edge) {
        *lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(in + base[0]))),
                                      _mm_loadu_si128((const __m128i *)(in + base[1])), 1);
        if (two)
            *hi = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(in + base[0] + 16))),
                _mm_loadu_si128((const __m128i *)(in + base[1] + 16)), 1);
        return;
    }
    unsigned char bytes[2][32];
    memset(bytes, 0, sizeof bytes);
    for (int l = 0; l < 2; l++) {
        const size_t from = (size_t)base[l], want = two ? 32 : 16;
        const size_t have = from < row_end ? row_end - from : 0;
        memcpy(bytes[l], in + from, have < want ? have : want);
    }
    *lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)bytes[0])),
                                  _mm_loadu_si128((const __m128i *)bytes[1]), 1);
    *hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(bytes[0] + 16))),
                                  _mm_loadu_si128((const __m128i *)(bytes[1] + 16)), 1);
}

/* One channel's pair of taps: the lanes' 16-bit pairs gathered */
__attribute__((target("avx2"))) static inline __m256i rs_planar2_pick(
        __m256i lo, __m256i hi, const unsigned char *index, int two) {
    const __m256i first = _mm256_shuffle_epi8(lo, _mm256_loadu_si256((const __m256i *)index));
    if (!two) return first;
    return _mm256_or_si256(first, _mm256_shuffle_epi8(hi, _mm256_loadu_si256((const __m256i *)(index + 32))));
}

/* One block's sums, shifted: R, G and B of its eight outputs (lane L:
   outputs 4L..4L+3), t: its table. */
__attribute__((target("avx2"))) static inline void rs_planar2_block(
        const unsigned char *in, const int *base, int edge, size_t row_end, const unsigned char *t,
        int pairs, int two, __m256i half, __m128i shift, __m256i *r, __m256i *g, __m256i *bl) {
    const size_t stride = two ? 224 : 128, kat = stride - 32, step = two ? 64 : 32;
    __m256i lo, hi = _mm256_setzero_si256();
    rs_planar2_load(in, base, edge, two, row_end, &lo, &hi);
    __m256i sr = half, sg = half, sb = half;
    for (int p = 0; p < pairs; p++, t += stride) {
        const __m256i kk = _mm256_loadu_si256((const __m256i *)(t + kat));
        sr = _mm256_add_epi32(sr, _mm256_madd_epi16(rs_planar2_pick(lo, hi, t, two), kk));
        sg = _mm256_add_epi32(sg, _mm256_madd_epi16(rs_planar2_pick(lo, hi, t + step, two), kk));
        sb = _mm256_add_epi32(sb, _mm256_madd_epi16(rs_planar2_pick(lo, hi, t + 2 * step, two), kk));
    }
    *r = _mm256_sra_epi32(sr, shift);
    *g = _mm256_sra_epi32(sg, shift);
    *bl = _mm256_sra_epi32(sb, shift);
}

/* One row (pairs and two: constant where inlined, so the taps unroll),
   two blocks a step (rs_planar2_lane), a last odd block alone. row_end:
   the row's bytes. */
__attribute__((target("avx2"))) static inline void rs_planar2_row(
        const unsigned char *in, size_t row_end, unsigned char *out, const rs_planar2 *w, int out_w,
        int precision, int pairs, int two) {
    const __m256i half = _mm256_set1_epi32((int32_t)1 << (precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(precision);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const size_t stride = two ? 224 : 128, block = stride * (size_t)pairs;
    const unsigned char *t = w->table, *edge = w->edge;
    const int *base = w->base;
    unsigned char *const red = out, *const green = out + out_w, *const blue = out + 2 * out_w;
    const int blocks = w->blocks, paired = out_w / 16 * 2;
    int b = 0;
    for (; b < paired; b += 2, t += 2 * block) {
        __m256i r0, g0, b0, r1, g1, b1;
        rs_planar2_block(in, base + 2 * b, edge[b], row_end, t, pairs, two, half, shift, &r0, &g0, &b0);
        rs_planar2_block(in, base + 2 * b + 2, edge[b + 1], row_end, t + block, pairs, two, half,
                         shift, &r1, &g1, &b1);
        /* int32 -> int16 -> uint8, saturating (the clamp to 0..255): lane 0
           holds R 0-7 then G 0-7, lane 1 R 8-15 then G 8-15 */
        const __m256i rg = _mm256_packus_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(g0, g1));
        const __m256i bb = _mm256_packus_epi16(_mm256_packs_epi32(b0, b1), _mm256_packs_epi32(b0, b1));
        const __m128i rg0 = _mm256_castsi256_si128(rg), rg1 = _mm256_extracti128_si256(rg, 1);
        const int x0 = b * 8;
        _mm_storel_epi64((__m128i *)(red + x0), rg0);
        _mm_storel_epi64((__m128i *)(red + x0 + 8), rg1);
        /* (the high halves moved down and stored as bytes: _mm_storeh_pd
           would store a double through an unaligned pointer, undefined) */
        _mm_storel_epi64((__m128i *)(green + x0), _mm_unpackhi_epi64(rg0, rg0));
        _mm_storel_epi64((__m128i *)(green + x0 + 8), _mm_unpackhi_epi64(rg1, rg1));
        _mm_storel_epi64((__m128i *)(blue + x0), _mm256_castsi256_si128(bb));
        _mm_storel_epi64((__m128i *)(blue + x0 + 8), _mm256_extracti128_si256(bb, 1));
    }
    for (; b < blocks; b++, t += block) {  /* an odd last block, or a partial one */
        __m256i r, g, bl;
        rs_planar2_block(in, base + 2 * b, edge[b], row_end, t, pairs, two, half, shift, &r, &g, &bl);
        /* packs(R, G), packs(B, B) and packus leave in lane L outputs
           4L..4L+3's R, G, B and B: this puts R 0-7 | G 0-7 | B 0-7 */
        __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(r, g), _mm256_packs_epi32(bl, bl));
        v = _mm256_permutevar8x32_epi32(v, order);
        unsigned char part[32];
        _mm256_storeu_si256((__m256i *)part, v);
        const int x0 = b * 8, left = out_w - x0 < 8 ? out_w - x0 : 8;
        memcpy(red + x0, part, (size_t)left);
        memcpy(green + x0, part + 8, (size_t)left);
        memcpy(blue + x0, part + 16, (size_t)left);
    }
}

/* The horizontal pass over rows first..first+count-1 of the window (rows
   of in_w RGB pixels) into tmp: count rows pitch bytes apart, each
   R[out_w] G[out_w] B[out_w]. */
__attribute__((target("avx2"))) static void rs_planar2_horizontal(
        const unsigned char *src, size_t row_bytes, int in_w, int first, int count,
        const rs_planar2 *w, int out_w, int precision, unsigned char *tmp, size_t pitch) {
    const size_t row_end = (size_t)in_w * 3;
    for (int y = 0; y < count; y++) {
        const unsigned char *in = src + (size_t)(first + y) * row_bytes;
        unsigned char *out = tmp + (size_t)y * pitch;
        if (!w->two && w->pairs == 1)  /* enlarging: two taps */
            rs_planar2_row(in, row_end, out, w, out_w, precision, 1, 0);
        else if (!w->two && w->pairs == 2)  /* shrinking a little: three or four */
            rs_planar2_row(in, row_end, out, w, out_w, precision, 2, 0);
        else if (w->two && w->pairs == 2)
            rs_planar2_row(in, row_end, out, w, out_w, precision, 2, 1);
        else if (w->two && w->pairs == 3)
            rs_planar2_row(in, row_end, out, w, out_w, precision, 3, 1);
        else
            rs_planar2_row(in, row_end, out, w, out_w, precision, w->pairs, w->two);
    }
}

/* A planar row (R[width] G[width] B[width], already mirrored where asked)
   into three float32 planes, eight values a step: the SSE2 rgbx_row's
   operations (convert, multiply, subtract: the same values), streamed
   where the planes are 32-byte aligned. */
__attribute__((target("avx2"))) static void rs_planar2_floats(
        const unsigned char *row, float *const planes[3], int width, const float *k,
        const float *mk) {
    for (int c = 0; c < 3; c++) {
        const unsigned char *from = row + (size_t)c * (size_t)width;
        float *to = planes[c];
        const int stream = (uintptr_t)to % 32 == 0;
        const __m256 kc = _mm256_set1_ps(k[c]), mc = _mm256_set1_ps(mk[c]);
        int x = 0;
        for (; x + 8 <= width; x += 8) {
            const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(from + x)));
            const __m256 v = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(px), kc), mc);
            if (stream)
                _mm256_stream_ps(to + x, v);
            else
                _mm256_storeu_ps(to + x, v);
        }
        for (; x < width; x++) {
            const float v = (float)from[x] * k[c];
            to[x] = v - mk[c];
        }
    }
}

#endif
