/* The training crop's resampling in planes (AVX-512 F, BW, VL, VBMI, VNNI):
 * RGB rows from the JPEG decoder -> a horizontal pass whose rows are three
 * 8-bit planes (R[w] G[w] B[w]) -> the vertical pass over those bytes ->
 * float32 or uint8 planes. The RGBX path (resample_avx512.h) computes and
 * carries an X byte a pixel that nobody reads: here the horizontal pass
 * weighs three channels, not four, and the vertical pass moves 3/4 of the
 * bytes. The sums are the same integers, so the bytes are the RGBX path's
 * and Pillow-SIMD's (tests/imaging/test_resample.py compares them).
 *
 * Sixteen outputs of a row a block: their source bytes lie in one 64-byte
 * load (two, 128 bytes, when the row is shrunk a little), from which one
 * vpermb (vpermt2b) a channel and a pair of taps gathers the sixteen
 * pixels' 16-bit pairs, and one vpdpwssd weighs them.
 * A mirrored sample's plan takes the columns from the row's end, so the
 * pass itself writes the mirror image. Windows whose sixteen outputs reach
 * further (a shrink past ~2.5x) keep the RGBX path.
 */
#ifndef IM2REC_PLANAR_X86_H
#define IM2REC_PLANAR_X86_H

/* The horizontal pass's plan: for each block of sixteen outputs its first
   source byte, the masks of the (one or two) 64-byte loads that lie in the
   row, and per pair of taps 256 bytes: the vpermb index of every 16-bit
   lane for R, G and B (64 each) and the weights in the same lanes. */
typedef struct {
    int blocks, pairs, two;
    int *base;
    uint64_t *mask;  /* 2 a block: the first load's, the second's */
    unsigned char *table;
} rs_planar;

static void rs_planar_free(rs_planar *w) {
    free(w->base);
    free(w->mask);
    free(w->table);
}

/* Output column j of block b: mirrored (flip), the columns run from the
   row's end, so the pass writes the mirror image and the writers copy
   straight (the same sums, each in its mirrored place). */
static inline int rs_planar_column(int b, int j, int out_w, int flip) {
    return flip ? out_w - 1 - (b * 16 + j) : b * 16 + j;
}

/* 0, or -1 where a block's taps reach past 128 bytes (the RGBX path then)
   or memory is short. in: RGB rows of in_w pixels. */
static int rs_planar_plan(rs_planar *w, const rs_axis *a, int out_w, int in_w, int flip) {
    memset(w, 0, sizeof *w);
    if (out_w <= 0) return -1;
    const int blocks = (out_w + 15) / 16;
    int most = 0, reach = 0;
    for (int xx = 0; xx < out_w; xx++)
        if (a->taps[xx] > most) most = a->taps[xx];
    if (most * 3 > 128) return -1;  /* one output past the reach: nothing allocated */
    w->pairs = most < 2 ? 1 : (most + 1) / 2;
    w->blocks = blocks;
    w->base = calloc((size_t)blocks, sizeof *w->base);
    w->mask = calloc((size_t)blocks * 2, sizeof *w->mask);
    w->table = calloc((size_t)blocks * (size_t)w->pairs, 256);
    if (w->base == NULL || w->mask == NULL || w->table == NULL) {
        rs_planar_free(w);
        return -1;
    }
    for (int b = 0; b < blocks; b++) {  /* each block's first source pixel and its reach */
        int low = in_w, high = 0;
        for (int j = 0; j < 16 && b * 16 + j < out_w; j++) {
            const int xx = rs_planar_column(b, j, out_w, flip);
            if (a->first[xx] < low) low = a->first[xx];
            if (a->first[xx] + a->taps[xx] > high) high = a->first[xx] + a->taps[xx];
        }
        w->base[b] = low;  /* in pixels until the tables below are made */
        if (high - low > reach) reach = high - low;
    }
    if (reach * 3 > 128) {
        rs_planar_free(w);
        return -1;
    }
    w->two = reach * 3 > 64;
    for (int b = 0; b < blocks; b++) {
        const int base = w->base[b];
        const size_t avail = (size_t)(in_w - base) * 3, second = avail > 64 ? avail - 64 : 0;
        w->base[b] = base * 3;
        w->mask[2 * b] = avail >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << avail) - 1;
        w->mask[2 * b + 1] = !w->two ? 0 : second >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << second) - 1;
        for (int j = 0; j < 16 && b * 16 + j < out_w; j++) {
            const int xx = rs_planar_column(b, j, out_w, flip), taps = a->taps[xx];
            const int off = a->first[xx] - base;
            const int16_t *k = &a->k[(size_t)xx * (size_t)a->ksize];
            for (int p = 0; p < w->pairs; p++) {
                /* lane j: taps 2p and 2p + 1, source bytes (off + 2p + s) * 3
                   + c; a tap past the pixel's last weighs 0 (its index then
                   does not matter, and stays below 128 for vpermt2b) */
                unsigned char *t = w->table + ((size_t)b * (size_t)w->pairs + (size_t)p) * 256;
                const int s0 = 2 * p < taps ? off + 2 * p : 0, s1 = 2 * p + 1 < taps ? off + 2 * p + 1 : 0;
                const int16_t w0 = 2 * p < taps ? k[2 * p] : 0, w1 = 2 * p + 1 < taps ? k[2 * p + 1] : 0;
                for (int c = 0; c < 3; c++) {
                    t[c * 64 + j * 4] = (unsigned char)(s0 * 3 + c);
                    t[c * 64 + j * 4 + 2] = (unsigned char)(s1 * 3 + c);
                }
                memcpy(t + 192 + j * 4, &w0, sizeof w0);
                memcpy(t + 192 + j * 4 + 2, &w1, sizeof w1);
            }
        }
    }
    return 0;
}

#define RS_PLANAR_TARGET "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"

/* One row (pairs and two: constant where inlined, so the taps unroll). */
__attribute__((target(RS_PLANAR_TARGET))) static inline void rs_planar_row(
        const unsigned char *in, unsigned char *out, const rs_planar *w, int out_w, int precision,
        int pairs, int two) {
    const __m512i half = _mm512_set1_epi32((int32_t)1 << (precision - 1));
    const __m128i shift = _mm_cvtsi32_si128(precision);
    /* packs(R, G), packs(B, B) and packus leave, in 128-bit lane L, pixels
       4L..4L+3's R, G, B and B bytes: this gathers R 0-15 | G 0-15 | B 0-15 */
    const __m512i gather = _mm512_set_epi32(
        0, 0, 0, 0, 0x3B3A3938, 0x2B2A2928, 0x1B1A1918, 0x0B0A0908, 0x37363534, 0x27262524,
        0x17161514, 0x07060504, 0x33323130, 0x23222120, 0x13121110, 0x03020100);
    const __mmask64 pair_lanes = 0x5555555555555555ULL;
    const int *base = w->base;
    const uint64_t *mask = w->mask;
    const unsigned char *t = w->table;
    for (int b = 0; b < w->blocks; b++) {
        const unsigned char *src = in + base[b];
        const __m512i d0 = _mm512_maskz_loadu_epi8(mask[2 * b], src);
        const __m512i d1 = two ? _mm512_maskz_loadu_epi8(mask[2 * b + 1], src + 64) : d0;
        __m512i r = half, g = half, bl = half;
        for (int p = 0; p < pairs; p++, t += 256) {
            const __m512i kk = _mm512_loadu_si512((const void *)(t + 192));
            const __m512i ir = _mm512_loadu_si512((const void *)t);
            const __m512i ig = _mm512_loadu_si512((const void *)(t + 64));
            const __m512i ib = _mm512_loadu_si512((const void *)(t + 128));
            __m512i pr, pg, pb;
            if (two) {
                pr = _mm512_maskz_permutex2var_epi8(pair_lanes, d0, ir, d1);
                pg = _mm512_maskz_permutex2var_epi8(pair_lanes, d0, ig, d1);
                pb = _mm512_maskz_permutex2var_epi8(pair_lanes, d0, ib, d1);
            } else {
                pr = _mm512_maskz_permutexvar_epi8(pair_lanes, ir, d0);
                pg = _mm512_maskz_permutexvar_epi8(pair_lanes, ig, d0);
                pb = _mm512_maskz_permutexvar_epi8(pair_lanes, ib, d0);
            }
            r = _mm512_dpwssd_epi32(r, pr, kk);
            g = _mm512_dpwssd_epi32(g, pg, kk);
            bl = _mm512_dpwssd_epi32(bl, pb, kk);
        }
        r = _mm512_sra_epi32(r, shift);
        g = _mm512_sra_epi32(g, shift);
        bl = _mm512_sra_epi32(bl, shift);
        /* int32 -> int16 -> uint8, saturating: the clamp to 0..255 */
        __m512i v = _mm512_packus_epi16(_mm512_packs_epi32(r, g), _mm512_packs_epi32(bl, bl));
        v = _mm512_permutexvar_epi8(gather, v);
        const int x0 = b * 16, left = out_w - x0;
        if (left >= 16) {  /* (plain stores: Zen 4's masked stores are slow) */
            _mm_storeu_si128((__m128i *)(out + x0), _mm512_castsi512_si128(v));
            _mm_storeu_si128((__m128i *)(out + out_w + x0), _mm512_extracti32x4_epi32(v, 1));
            _mm_storeu_si128((__m128i *)(out + 2 * out_w + x0), _mm512_extracti32x4_epi32(v, 2));
        } else {
            const __mmask16 keep = (__mmask16)((1u << left) - 1);
            _mm_mask_storeu_epi8(out + x0, keep, _mm512_castsi512_si128(v));
            _mm_mask_storeu_epi8(out + out_w + x0, keep, _mm512_extracti32x4_epi32(v, 1));
            _mm_mask_storeu_epi8(out + 2 * out_w + x0, keep, _mm512_extracti32x4_epi32(v, 2));
        }
    }
}

/* The horizontal pass over rows first..first+count-1 of the window into
   tmp: count rows pitch bytes apart, each R[out_w] G[out_w] B[out_w]. */
__attribute__((target(RS_PLANAR_TARGET))) static void rs_planar_horizontal(
        const unsigned char *src, size_t row_bytes, int first, int count, const rs_planar *w,
        int out_w, int precision, unsigned char *tmp, size_t pitch) {
    for (int y = 0; y < count; y++) {
        const unsigned char *in = src + (size_t)(first + y) * row_bytes;
        unsigned char *out = tmp + (size_t)y * pitch;
        if (w->two)
            rs_planar_row(in, out, w, out_w, precision, w->pairs, 1);
        else if (w->pairs == 1)  /* enlarging: two taps */
            rs_planar_row(in, out, w, out_w, precision, 1, 0);
        else if (w->pairs == 2)  /* shrinking a little: three or four */
            rs_planar_row(in, out, w, out_w, precision, 2, 0);
        else
            rs_planar_row(in, out, w, out_w, precision, w->pairs, 0);
    }
}

/* A planar row (R[width] G[width] B[width], already mirrored where asked:
   rs_planar_plan) into three float32 planes, sixteen values a step: the
   SSE2 rgbx_row's operations (convert, multiply, subtract: the same
   values), streamed where the planes are 64-byte aligned. */
__attribute__((target(RS_PLANAR_TARGET))) static void rs_planar_floats(
        const unsigned char *row, float *const planes[3], int width, const float *k,
        const float *mk) {
    for (int c = 0; c < 3; c++) {
        const unsigned char *from = row + (size_t)c * (size_t)width;
        float *to = planes[c];
        const int stream = (uintptr_t)to % 64 == 0;
        const __m512 kc = _mm512_set1_ps(k[c]), mc = _mm512_set1_ps(mk[c]);
        int x = 0;
        for (; x + 16 <= width; x += 16) {
            const __m512i px = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(from + x)));
            const __m512 v = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(px), kc), mc);
            if (stream)
                _mm512_stream_ps(to + x, v);
            else
                _mm512_storeu_ps(to + x, v);
        }
        for (; x < width; x++) {
            const float v = (float)from[x] * k[c];
            to[x] = v - mk[c];
        }
    }
}

/* The same into uint8 planes. */
static void rs_planar_bytes(const unsigned char *row, unsigned char *const planes[3], int width) {
    for (int c = 0; c < 3; c++) memcpy(planes[c], row + (size_t)c * (size_t)width, (size_t)width);
}

#endif
