/* What _tensor gives the other extensions in C (_jpeg's one-call training
 * path, _crop.c): resample, normalise and split without Python objects, on
 * buffers the caller has already checked against the geometry. Reached
 * through the capsule TENSOR_API_NAME; callable without the GIL.
 */
#ifndef IM2REC_TENSOR_API_H
#define IM2REC_TENSOR_API_H

#include <stddef.h>

#define TENSOR_API_NAME "im2rec.imaging._tensor._C_API"

typedef struct {
    /* The window (width x height pixels of pixel_bytes, rows row_bytes
       apart) resampled from box to out (channels x out_h x out_w: float32
       pixel * k - mk, or uint8 with k NULL), mirrored when flip: 1 done, 0
       left to Pillow (a weight table or a pass past its bound), -1 no
       memory. vector 0 portable, 1 AVX2 at most, 2 the best. */
    int (*resample)(const unsigned char *src, size_t row_bytes, int pixel_bytes, int width,
                    int height, const float box[4], int filter, int channels, int out_w,
                    int out_h, void *out, const float *k, const float *mk, int flip, int vector);
    /* Pixels left..left+width, top..top+height to out as they are
       (normalised with k, or uint8 with k NULL), mirrored when flip. */
    void (*window)(const unsigned char *src, size_t row_bytes, int pixel_bytes, int left,
                   int top, int width, int height, int channels, void *out, const float *k,
                   const float *mk, int flip);
} tensor_api;

#endif
