/* Pixels to a training tensor in one pass: a window of 8-bit pixels
 * (gray, RGB or RGBX rows) -> float32 planes (C, H, W), each value
 * pixel * k[c] - mk[c], mirrored left-right when asked. What numpy does in
 * three passes over a strided view (cast, multiply, subtract), with the same
 * float32 operations in the same order, so the results are identical.
 *
 *   normalise(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
 *             channels, k, mk, flip)
 *   split(out, pixels, row_bytes, pixel_bytes, left, top, width, height, channels, flip)
 *
 * split is the uint8 counterpart: the pixels themselves into planes. pixels is
 * a buffer, or a Pillow image's Arrow export (the pair of capsules
 * Image.__arrow_c_array__() returns), read in place.
 *
 * Every size and offset is checked against the buffers before anything is
 * read or written. Runs without the GIL.
 */
#include "../checked.h"
#include <stdint.h>
#include <string.h>

static int as_floats(PyObject *seq, int n, float *out, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(fast) < n) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: fewer than %d values", what, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (float)v;
    }
    Py_DECREF(fast);
    return 0;
}

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

/* The Arrow C data interface (a stable ABI, arrow.apache.org/docs/format/
   CDataInterface.html): Pillow 11.2 and later export an image's pixels
   through it without a copy, where tobytes() copies them twice. */
struct ArrowSchema {
    const char *format, *name, *metadata;
    int64_t flags, n_children;
    struct ArrowSchema **children, *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length, null_count, offset, n_buffers, n_children;
    const void **buffers;
    struct ArrowArray **children, *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* pixels given as Image.__arrow_c_array__()'s (schema, array) capsules: the
   bytes of an "L" image (format "C": uint8) or of a four-byte one ("+w:4" of
   "C"). 1 with view filled (its obj NULL: the caller's tuple keeps the
   capsules, which keep the image), 0 if pix is no such pair, -1 on error. */
static int arrow_pixels(PyObject *pix, Py_buffer *view) {
    if (!PyTuple_Check(pix) || PyTuple_GET_SIZE(pix) != 2) return 0;
    struct ArrowSchema *schema = PyCapsule_GetPointer(PyTuple_GET_ITEM(pix, 0), "arrow_schema");
    struct ArrowArray *array =
        schema ? PyCapsule_GetPointer(PyTuple_GET_ITEM(pix, 1), "arrow_array") : NULL;
    if (array == NULL) return -1;
    const struct ArrowArray *values = array;
    int64_t width = 1;
    if (schema->format && strcmp(schema->format, "+w:4") == 0 && schema->n_children == 1 &&
        schema->children && schema->children[0]->format &&
        strcmp(schema->children[0]->format, "C") == 0 && array->n_children == 1 &&
        array->children && array->offset == 0 && array->null_count == 0) {
        values = array->children[0];
        width = 4;
    } else if (!(schema->format && strcmp(schema->format, "C") == 0)) {
        PyErr_SetString(PyExc_ValueError, "pixels: an Arrow array that is not 8-bit pixels");
        return -1;
    }
    if (values->n_buffers != 2 || values->buffers == NULL || values->buffers[1] == NULL ||
        values->null_count != 0 || values->offset < 0 || values->length < 0 ||
        values->length > PY_SSIZE_T_MAX - values->offset ||
        (width == 4 && values->length != array->length * 4)) {
        PyErr_SetString(PyExc_ValueError, "pixels: an Arrow array this does not take");
        return -1;
    }
    memset(view, 0, sizeof *view);
    view->buf = (char *)values->buffers[1] + values->offset;
    view->len = (Py_ssize_t)values->length;
    return 1;
}

/* The window's geometry against both buffers, for normalise and split:
   0 with the buffers held (release both), or -1 with an exception set. */
static int window_buffers(const char *name, PyObject *out_obj, PyObject *pix_obj,
                          Py_ssize_t row_bytes, Py_ssize_t pixel_bytes, Py_ssize_t left,
                          Py_ssize_t top, Py_ssize_t width, Py_ssize_t height,
                          Py_ssize_t channels, size_t out_item, Py_buffer *out, Py_buffer *pix) {
    if (!(pixel_bytes == 1 || pixel_bytes == 3 || pixel_bytes == 4) ||
        !(channels == 1 || channels == 3) || (channels == 1 && pixel_bytes != 1) || left < 0 ||
        top < 0 || width <= 0 || height <= 0 || row_bytes <= 0) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry", name);
        return -1;
    }
    /* Every size below is checked for overflow before it is compared: a
       huge left, width or row length must not wrap into a small one. */
    size_t row_end, last_row, pix_need, plane, out_need;
    if (!(checked_add((size_t)left, (size_t)width, &row_end) &&
          checked_mul(row_end, (size_t)pixel_bytes, &row_end) && row_end <= (size_t)row_bytes &&
          checked_add((size_t)top, (size_t)height - 1, &last_row) &&
          checked_mul(last_row, (size_t)row_bytes, &pix_need) &&
          checked_add(pix_need, row_end, &pix_need) &&
          checked_mul((size_t)width, (size_t)height, &plane) &&
          checked_mul3(plane, (size_t)channels, out_item, &out_need))) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry (sizes overflow)", name);
        return -1;
    }
    if (PyObject_GetBuffer(out_obj, out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    int arrow = arrow_pixels(pix_obj, pix);
    if (arrow < 0 || (arrow == 0 && PyObject_GetBuffer(pix_obj, pix, PyBUF_SIMPLE) < 0)) {
        PyBuffer_Release(out);
        return -1;
    }
    const char *why = NULL;
    if ((uintptr_t)out->buf % out_item != 0)  /* float stores need float alignment */
        why = "the output buffer is not aligned for its type";
    else if ((size_t)out->len < out_need || (size_t)pix->len < pix_need)
        why = "a buffer is smaller than the geometry";
    if (why != NULL) {
        PyBuffer_Release(out);
        PyBuffer_Release(pix);
        PyErr_Format(PyExc_ValueError, "%s: %s", name, why);
        return -1;
    }
    return 0;
}

static PyObject *normalise(PyObject *self, PyObject *args) {
    PyObject *out_obj, *pix_obj, *k_obj, *mk_obj;
    Py_ssize_t row_bytes, pixel_bytes, left, top, width, height, channels;
    int flip;
    if (!PyArg_ParseTuple(args, "OOnnnnnnnOOp:normalise", &out_obj, &pix_obj, &row_bytes,
                          &pixel_bytes, &left, &top, &width, &height, &channels, &k_obj, &mk_obj,
                          &flip))
        return NULL;
    float k[3], mk[3];
    if (channels >= 1 && channels <= 3 &&
        (as_floats(k_obj, (int)channels, k, "k") < 0 || as_floats(mk_obj, (int)channels, mk, "mk") < 0))
        return NULL;
    Py_buffer out, pix;
    if (window_buffers("normalise", out_obj, pix_obj, row_bytes, pixel_bytes, left, top, width,
                       height, channels, sizeof(float), &out, &pix) < 0)
        return NULL;
    const size_t plane = (size_t)width * (size_t)height;
    float *dst = (float *)out.buf;
    const unsigned char *src = (const unsigned char *)pix.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < height; y++) {
        const unsigned char *row = src + (size_t)(top + y) * (size_t)row_bytes + (size_t)left * (size_t)pixel_bytes;
        float *line = dst + (size_t)y * (size_t)width;
        if (channels == 1)
            gray_row(row, line, width, k[0], mk[0], flip);
        else if (pixel_bytes == 4) {
            Py_ssize_t done = 0;
#ifdef HAVE_RGBX_ROW
            done = rgbx_row(row, line, plane, width, k, mk, flip);
#endif
            /* the last 0-3 outputs: mirrored, they are inputs 0..rest-1 */
            if (done < width)
                colour_row(flip ? row : row + (size_t)done * 4, 4, line + done, plane,
                           width - done, k, mk, flip);
        }
        else if (pixel_bytes == 3)
            colour_row(row, 3, line, plane, width, k, mk, flip);
        else
            colour_row(row, 1, line, plane, width, k, mk, flip);
    }
#ifdef HAVE_RGBX_ROW
    _mm_sfence();  /* the streamed planes are visible before the batch is handed on */
#endif
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&pix);
    Py_RETURN_NONE;
}

/* The same window split into uint8 planes (C, H, W), mirrored when asked:
   output kept as pixels, for normalisation on the device. */
static PyObject *split(PyObject *self, PyObject *args) {
    PyObject *out_obj, *pix_obj;
    Py_ssize_t row_bytes, pixel_bytes, left, top, width, height, channels;
    int flip;
    if (!PyArg_ParseTuple(args, "OOnnnnnnnp:split", &out_obj, &pix_obj, &row_bytes, &pixel_bytes,
                          &left, &top, &width, &height, &channels, &flip))
        return NULL;
    Py_buffer out, pix;
    if (window_buffers("split", out_obj, pix_obj, row_bytes, pixel_bytes, left, top, width, height,
                       channels, 1, &out, &pix) < 0)
        return NULL;
    unsigned char *dst = (unsigned char *)out.buf;
    const unsigned char *src = (const unsigned char *)pix.buf;
    const size_t plane = (size_t)width * (size_t)height;
    const size_t step = (size_t)pixel_bytes;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < height; y++) {
        const unsigned char *restrict row =
            src + (size_t)(top + y) * (size_t)row_bytes + (size_t)left * step;
        for (Py_ssize_t c = 0; c < channels; c++) {
            unsigned char *restrict line = dst + (size_t)c * plane + (size_t)y * (size_t)width;
            const unsigned char *restrict p = row + (step == 1 ? 0 : (size_t)c);
            if (flip)
                for (Py_ssize_t x = 0; x < width; x++) line[width - 1 - x] = p[(size_t)x * step];
            else
                for (Py_ssize_t x = 0; x < width; x++) line[x] = p[(size_t)x * step];
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&pix);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalise", normalise, METH_VARARGS, "8-bit pixels -> normalised float32 planes"},
    {"split", split, METH_VARARGS, "8-bit pixels -> uint8 planes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tensor", "pixels to training tensors", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tensor(void) { return PyModule_Create(&module); }
