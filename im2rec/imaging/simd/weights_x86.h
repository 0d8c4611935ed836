/* rs_plan's loops with AVX-512 (F and DQ), for _resample.h: the bilinear
 * weights eight output pixels at a time, the largest weight and the
 * rounding to 16 bits sixteen at a time; and the same with AVX2, four and
 * eight at a time, where the CPU has no AVX-512. Each double is made by the
 * scalar loop's own operations in its order, so the tables are the same to
 * the bit (tests/imaging/test_resample.py compares them weight for weight
 * through _tensor._plan). Made with the scalar loop, the tables were a
 * sixth of a sample's resampling.
 */
#ifndef IM2REC_PLAN_X86_H
#define IM2REC_PLAN_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* The bilinear weights of eight outputs at a time (ksize <= 8), in rs_plan's
   layout: each double made by the scalar loop's operations in its order
   (centre, window, each tap's distance, the running sum, the division), so
   the same values; masks stand for its loop bounds. */
__attribute__((target("avx512f,avx512dq"))) static void rs_bilinear_avx512(
        double *kk, int *first, int *taps, int in_size, double in0, double scale, double support,
        double ss, int out_size, int ksize) {
    const __m512d half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
    const __m512d v_in0 = _mm512_set1_pd(in0), v_scale = _mm512_set1_pd(scale);
    const __m512d v_support = _mm512_set1_pd(support), v_ss = _mm512_set1_pd(ss);
    const __m512d magnitude = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fffffffffffffffLL));
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), none = _mm256_setzero_si256();
    double w[8][8];
    int lo[8], count[8];
    for (int xx = 0; xx < out_size; xx += 8) {
        const __m256i at = _mm256_add_epi32(_mm256_set1_epi32(xx), lanes);
        /* in0 + (xx + 0.5) * scale */
        const __m512d center = _mm512_add_pd(v_in0, _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(at), half), v_scale));
        /* (int)(center - support + 0.5), at least 0; (int)(center + support +
           0.5), at most in_size, less xmin, at least 0 (truncations, as the casts) */
        __m256i xmin = _mm512_cvttpd_epi32(_mm512_add_pd(_mm512_sub_pd(center, v_support), half));
        xmin = _mm256_max_epi32(xmin, none);
        __m256i xmax = _mm512_cvttpd_epi32(_mm512_add_pd(_mm512_add_pd(center, v_support), half));
        xmax = _mm256_min_epi32(xmax, _mm256_set1_epi32(in_size));
        xmax = _mm256_max_epi32(_mm256_sub_epi32(xmax, xmin), none);
        __m512d ww = _mm512_setzero_pd(), wt[8];
        __mmask8 valid[8];
        for (int t = 0; t < ksize; t++) {
            const __m256i tap = _mm256_add_epi32(xmin, _mm256_set1_epi32(t));
            valid[t] = (__mmask8)_mm256_movemask_ps(
                _mm256_castsi256_ps(_mm256_cmpgt_epi32(xmax, _mm256_set1_epi32(t))));
            /* (x + xmin - center + 0.5) * ss, then 1 - |d| below 1, else 0 */
            __m512d d = _mm512_mul_pd(_mm512_add_pd(_mm512_sub_pd(_mm512_cvtepi32_pd(tap), center), half), v_ss);
            d = _mm512_and_pd(d, magnitude);
            const __mmask8 near = _mm512_cmp_pd_mask(d, one, _CMP_LT_OQ) & valid[t];
            wt[t] = _mm512_maskz_sub_pd(near, one, d);
            ww = _mm512_mask_add_pd(ww, valid[t], ww, wt[t]);
        }
        /* divided by the sum where it is not 0 (by 1: the same value) */
        const __mmask8 divide = _mm512_cmp_pd_mask(ww, _mm512_setzero_pd(), _CMP_NEQ_OQ);
        for (int t = 0; t < ksize; t++)
            _mm512_storeu_pd(w[t], _mm512_mask_div_pd(wt[t], divide & valid[t], wt[t], ww));
        _mm256_storeu_si256((__m256i *)lo, xmin);
        _mm256_storeu_si256((__m256i *)count, xmax);
        for (int j = 0; j < 8 && xx + j < out_size; j++) {
            double *k = &kk[(size_t)(xx + j) * (size_t)ksize];
            for (int t = 0; t < ksize; t++) k[t] = w[t][j];
            first[xx + j] = lo[j];
            taps[xx + j] = count[j];
        }
    }
}

/* The largest of n > 0 doubles (finite: the order does not matter). */
__attribute__((target("avx512f,avx512dq"))) static double rs_max_avx512(const double *kk, size_t n) {
    __m512d most = _mm512_set1_pd(kk[0]);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) most = _mm512_max_pd(most, _mm512_loadu_pd(kk + i));
    double best = _mm512_reduce_max_pd(most);
    for (; i < n; i++)
        if (best < kk[i]) best = kk[i];
    return best;
}

/* rs_plan's rounding of weights 0..n/16*16-1 to 16 bits (its loop does the
   rest): kk < 0 ? -0.5 + kk * unit : 0.5 + kk * unit, truncated as the
   casts do where it lies in (-32769, 32768), else 0; whether any did not. */
__attribute__((target("avx512f,avx512dq"))) static int rs_round_avx512(
        const double *kk, size_t n, double unit, int16_t *k) {
    const __m512d v_unit = _mm512_set1_pd(unit), up = _mm512_set1_pd(0.5), down = _mm512_set1_pd(-0.5);
    const __m512d low = _mm512_set1_pd(-32769.0), high = _mm512_set1_pd(32768.0), zero = _mm512_setzero_pd();
    __mmask8 outside = 0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        __m256i half[2];
        for (int h = 0; h < 2; h++) {
            const __m512d x = _mm512_loadu_pd(kk + i + (size_t)h * 8);
            const __m512d product = _mm512_mul_pd(x, v_unit);
            const __mmask8 negative = _mm512_cmp_pd_mask(x, zero, _CMP_LT_OQ);
            const __m512d v = _mm512_mask_add_pd(_mm512_add_pd(up, product), negative, down, product);
            const __mmask8 in = _mm512_cmp_pd_mask(v, low, _CMP_GT_OQ) & _mm512_cmp_pd_mask(v, high, _CMP_LT_OQ);
            outside |= (__mmask8)~in;
            half[h] = _mm512_cvttpd_epi32(_mm512_maskz_mov_pd(in, v));
        }
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(half[0]), half[1], 1);
        _mm256_storeu_si256((__m256i *)(k + i), _mm512_cvtepi32_epi16(both));
    }
    return outside != 0;
}

/* The same bilinear weights four outputs at a time with AVX2 (ksize <= 8):
   the masks become all-ones lanes, the masked operations blends. */
__attribute__((target("avx2"))) static void rs_bilinear_avx2(
        double *kk, int *first, int *taps, int in_size, double in0, double scale, double support,
        double ss, int out_size, int ksize) {
    const __m256d half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
    const __m256d v_in0 = _mm256_set1_pd(in0), v_scale = _mm256_set1_pd(scale);
    const __m256d v_support = _mm256_set1_pd(support), v_ss = _mm256_set1_pd(ss);
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3), none = _mm_setzero_si128();
    double w[8][4];
    int lo[4], count[4];
    for (int xx = 0; xx < out_size; xx += 4) {
        const __m128i at = _mm_add_epi32(_mm_set1_epi32(xx), lanes);
        /* in0 + (xx + 0.5) * scale */
        const __m256d center = _mm256_add_pd(v_in0, _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(at), half), v_scale));
        __m128i xmin = _mm256_cvttpd_epi32(_mm256_add_pd(_mm256_sub_pd(center, v_support), half));
        xmin = _mm_max_epi32(xmin, none);
        __m128i xmax = _mm256_cvttpd_epi32(_mm256_add_pd(_mm256_add_pd(center, v_support), half));
        xmax = _mm_min_epi32(xmax, _mm_set1_epi32(in_size));
        xmax = _mm_max_epi32(_mm_sub_epi32(xmax, xmin), none);
        __m256d ww = zero, wt[8], valid[8];
        for (int t = 0; t < ksize; t++) {
            const __m128i tap = _mm_add_epi32(xmin, _mm_set1_epi32(t));
            /* 32-bit lane masks widened to 64-bit ones */
            valid[t] = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpgt_epi32(xmax, _mm_set1_epi32(t))));
            __m256d d = _mm256_mul_pd(_mm256_add_pd(_mm256_sub_pd(_mm256_cvtepi32_pd(tap), center), half), v_ss);
            d = _mm256_and_pd(d, magnitude);
            const __m256d near = _mm256_and_pd(_mm256_cmp_pd(d, one, _CMP_LT_OQ), valid[t]);
            wt[t] = _mm256_and_pd(_mm256_sub_pd(one, d), near);
            ww = _mm256_blendv_pd(ww, _mm256_add_pd(ww, wt[t]), valid[t]);
        }
        /* divided by the sum where it is not 0 (by 1: the same value) */
        const __m256d divide = _mm256_cmp_pd(ww, zero, _CMP_NEQ_OQ);
        for (int t = 0; t < ksize; t++)
            _mm256_storeu_pd(w[t], _mm256_blendv_pd(wt[t], _mm256_div_pd(wt[t], ww),
                                                    _mm256_and_pd(divide, valid[t])));
        _mm_storeu_si128((__m128i *)lo, xmin);
        _mm_storeu_si128((__m128i *)count, xmax);
        for (int j = 0; j < 4 && xx + j < out_size; j++) {
            double *k = &kk[(size_t)(xx + j) * (size_t)ksize];
            for (int t = 0; t < ksize; t++) k[t] = w[t][j];
            first[xx + j] = lo[j];
            taps[xx + j] = count[j];
        }
    }
}

/* The largest of n > 0 doubles (finite: the order does not matter). */
__attribute__((target("avx2"))) static double rs_max_avx2(const double *kk, size_t n) {
    __m256d most = _mm256_set1_pd(kk[0]);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) most = _mm256_max_pd(most, _mm256_loadu_pd(kk + i));
    double lanes[4];
    _mm256_storeu_pd(lanes, most);
    double best = lanes[0];
    for (int j = 1; j < 4; j++)
        if (best < lanes[j]) best = lanes[j];
    for (; i < n; i++)
        if (best < kk[i]) best = kk[i];
    return best;
}

/* rs_round_avx512's rounding eight weights at a time (0..n/8*8-1). */
__attribute__((target("avx2"))) static int rs_round_avx2(const double *kk, size_t n, double unit,
                                                          int16_t *k) {
    const __m256d v_unit = _mm256_set1_pd(unit), up = _mm256_set1_pd(0.5), down = _mm256_set1_pd(-0.5);
    const __m256d low = _mm256_set1_pd(-32769.0), high = _mm256_set1_pd(32768.0), zero = _mm256_setzero_pd();
    __m256d outside = zero;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m128i half[2];
        for (int h = 0; h < 2; h++) {
            const __m256d x = _mm256_loadu_pd(kk + i + (size_t)h * 4);
            const __m256d product = _mm256_mul_pd(x, v_unit);
            const __m256d negative = _mm256_cmp_pd(x, zero, _CMP_LT_OQ);
            const __m256d v = _mm256_blendv_pd(_mm256_add_pd(up, product), _mm256_add_pd(down, product), negative);
            const __m256d in = _mm256_and_pd(_mm256_cmp_pd(v, low, _CMP_GT_OQ), _mm256_cmp_pd(v, high, _CMP_LT_OQ));
            outside = _mm256_or_pd(outside, _mm256_andnot_pd(in, _mm256_castsi256_pd(_mm256_set1_epi64x(-1))));
            half[h] = _mm256_cvttpd_epi32(_mm256_and_pd(in, v));
        }
        /* in (-32769, 32768), truncated: int16 already, the pack exact */
        _mm_storeu_si128((__m128i *)(k + i), _mm_packs_epi32(half[0], half[1]));
    }
    return _mm256_movemask_pd(outside) != 0;
}

#endif
