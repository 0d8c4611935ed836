/* Pixels to a training tensor in one pass: a window of 8-bit pixels
 * (gray, RGB or RGBX rows) -> float32 planes (C, H, W), each value
 * pixel * k[c] - mk[c], mirrored left-right when asked. What numpy does in
 * three passes over a strided view (cast, multiply, subtract), with the same
 * float32 operations in the same order, so the results are identical.
 *
 *   normalise(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
 *             channels, k, mk, flip)
 *   split(out, pixels, row_bytes, pixel_bytes, left, top, width, height, channels, flip)
 *   resample(out, pixels, row_bytes, pixel_bytes, width, height, box, filter, channels,
 *            k, mk, flip[, vector])   (vector: 0 portable, 1 AVX2 at most, 2 the best)
 *
 * split is the uint8 counterpart: the pixels themselves into planes. pixels is
 * a buffer, or a Pillow image's Arrow export (the pair of capsules
 * Image.__arrow_c_array__() returns), read in place. resample first resizes
 * the window's box to the output's size (_resample.h: Pillow-SIMD's
 * arithmetic), each output row going to the planes as it is made; k None
 * gives uint8 planes (split), else float32 (normalise).
 *
 * The row writers are in _planes.h, the resampler in _resample.h (RGB
 * rows in planes: simd/planar_avx512.h, simd/planar_avx2.h), the tests' probes in _probes.h; the C
 * table other extensions call (_tensor_api.h) is at the end. Every size and
 * offset is checked against the buffers before anything is read or
 * written. Runs without the GIL.
 */
#include "../checked.h"
#include "_resample.h"
#include "_planes.h"
#ifdef RS_X86
#include "simd/planar_avx512.h"
#include "simd/planar_avx2.h"
#endif
#include "_tensor_api.h"
#include <stdint.h>
#include <stdlib.h>
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

#include "_arrow.h"

static int take_buffers(const char *name, PyObject *out_obj, PyObject *pix_obj, size_t out_need,
                        size_t out_item, size_t pix_need, Py_buffer *out, Py_buffer *pix);

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
    return take_buffers(name, out_obj, pix_obj, out_need, out_item, pix_need, out, pix);
}

/* out (writable, C-contiguous, out_need bytes aligned for out_item) and the
   pixels (pix_need bytes): 0 with both held, or -1 with an exception set. */
static int take_buffers(const char *name, PyObject *out_obj, PyObject *pix_obj, size_t out_need,
                        size_t out_item, size_t pix_need, Py_buffer *out, Py_buffer *pix) {
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

/* The window's pixels to out as they are: float32 planes (k, mk) or,
   with k NULL, uint8 ones. */
static void window_into(const unsigned char *src, size_t row_bytes, int pixel_bytes, int left,
                        int top, int width, int height, int channels, void *out, const float *k,
                        const float *mk, int flip) {
    const size_t plane = (size_t)width * (size_t)height;
    for (int y = 0; y < height; y++) {
        const unsigned char *row =
            src + (size_t)(top + y) * row_bytes + (size_t)left * (size_t)pixel_bytes;
        plane_row(row, pixel_bytes, out, plane, y, width, channels, k, mk, flip);
    }
    planes_done();
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
    Py_BEGIN_ALLOW_THREADS
    window_into(pix.buf, (size_t)row_bytes, (int)pixel_bytes, (int)left, (int)top, (int)width,
                (int)height, (int)channels, out.buf, k, mk, flip);
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
    Py_BEGIN_ALLOW_THREADS
    window_into(pix.buf, (size_t)row_bytes, (int)pixel_bytes, (int)left, (int)top, (int)width,
                (int)height, (int)channels, out.buf, NULL, NULL, flip);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&pix);
    Py_RETURN_NONE;
}

/* The resampling itself, on checked buffers (tensor_api.resample). */
static int resample_into(const unsigned char *src, size_t row_bytes, int pixel_bytes, int width,
                         int height, const float box[4], int filter, int channels, int out_w,
                         int out_h, void *out, const float *k, const float *mk, int flip,
                         int vector) {
    /* From here one exit: 0 where Pillow is left to do it (a weight table
       or a horizontal pass past its bound), 1 when done, -1 no memory. */
    int result = 0;
    const size_t plane = (size_t)out_w * (size_t)out_h;
    rs_axis h = {0}, v = {0};
    unsigned char *tmp = NULL, *row = NULL;
    const unsigned char **rows = NULL;
    const void *wide = NULL;
    int planar = 0;  /* 1: AVX-512's planar pass, 2: AVX2's */
#ifdef RS_X86
    rs_wide plan;
    rs_planar planes;
    rs_planar2 planes2;
#endif
    if (rs_plan(&h, width, box[0], box[2], out_w, filter, vector) < 0 ||
        rs_plan(&v, height, box[1], box[3], out_h, filter, vector) < 0)
        goto done;
    /* Pillow skips a pass that would change nothing; so do we (same bytes).
       RGB rows (pixel_bytes 3, the training crop's) go through the
       horizontal pass into planar rows (simd/planar_avx512.h, simd/planar_avx2.h) where the CPU and
       the plan allow, else become RGBX on the way: through the horizontal
       pass, or where there is none, copied out. */
    const int across = out_w != width || box[0] != 0 || box[2] != (float)out_w;
    const int down = out_h != height || box[1] != 0 || box[3] != (float)out_h;
    const int first = v.first[0], count = v.first[out_h - 1] + v.taps[out_h - 1] - first;
#ifdef RS_X86
    if (across && pixel_bytes == 3 && channels == 3) {
        if (vector >= 2 && simd_avx512_planar() &&
            rs_planar_plan(&planes, &h, out_w, width, flip) == 0)
            planar = 1;
        else if (vector >= 1 && simd_avx2() &&
                 rs_planar2_plan(&planes2, &h, out_w, width, flip) == 0)
            planar = 2;
    }
#endif
    const int bpp = planar ? 3 : pixel_bytes == 3 ? 4 : pixel_bytes;
    const int widen = pixel_bytes == 3 && !across;
    const size_t line = (size_t)out_w * (size_t)bpp;
    /* Rows whole 64-byte lines apart in 64-byte aligned blocks (planar
       rows of 3 x 224 bytes are not a whole number of lines), so that no
       64-byte load of the vertical pass or the writers splits a line. */
    const size_t pitch = planar ? (line + 63) / 64 * 64 : line;
    if ((across || widen) && (size_t)count * pitch > RS_MAX_PASS) goto done;
    tmp = across || widen ? aligned_alloc(64, ((size_t)(count > 0 ? count : 1) * pitch + 63) / 64 * 64)
                          : NULL;
    row = aligned_alloc(64, (line + 63) / 64 * 64);
    rows = malloc((size_t)v.ksize * sizeof *rows);
    if (row == NULL || rows == NULL || ((across || widen) && tmp == NULL)) {
        result = -1;
        goto done;
    }
#ifdef RS_X86
    if (planar == 1)
        rs_planar_horizontal(src, row_bytes, first, count, &planes, out_w, h.precision, tmp, pitch);
    else if (planar == 2)
        rs_planar2_horizontal(src, row_bytes, width, first, count, &planes2, out_w, h.precision,
                              tmp, pitch);
    else if (across && pixel_bytes > 1 && vector >= 2 && simd_avx512() &&
             rs_wide_plan(&plan, &h, out_w, width, pixel_bytes) == 0)
        wide = &plan;
#endif
    if (across && !planar)
        rs_horizontal(src, row_bytes, pixel_bytes, bpp, width, first, count, &h, out_w, tmp, vector,
                      wide);
    for (int y = 0; widen && y < count; y++)
        for (int x = 0; x < out_w; x++) {
            const unsigned char *from = src + (size_t)(first + y) * row_bytes + (size_t)x * 3;
            unsigned char *to = tmp + (size_t)y * line + (size_t)x * 4;
            to[0] = from[0], to[1] = from[1], to[2] = from[2], to[3] = 0;
        }
    /* the horizontal pass's rows, or (no such pass) the window's own */
    const unsigned char *base = across || widen ? tmp : src + (size_t)first * row_bytes;
    const size_t stride = across || widen ? pitch : row_bytes;
    for (int y = 0; y < out_h; y++) {
        const unsigned char *made;
        if (down) {
            for (int t = 0; t < v.taps[y]; t++)
                rows[t] = base + (size_t)(v.first[y] - first + t) * stride;
            rs_vertical(rows, &v.k[(size_t)y * (size_t)v.ksize], v.taps[y], v.precision, row, line,
                        vector);
            made = row;
        } else {
            made = base + (size_t)(y - first) * stride;  /* first is 0 here */
        }
#ifdef RS_X86
        if (planar) {
            const size_t at = (size_t)y * (size_t)out_w;
            if (k != NULL) {
                float *const to[3] = {(float *)out + at, (float *)out + plane + at,
                                      (float *)out + 2 * plane + at};
                if (planar == 1)
                    rs_planar_floats(made, to, out_w, k, mk);
                else
                    rs_planar2_floats(made, to, out_w, k, mk);
            } else {
                unsigned char *const to[3] = {(unsigned char *)out + at,
                                              (unsigned char *)out + plane + at,
                                              (unsigned char *)out + 2 * plane + at};
                rs_planar_bytes(made, to, out_w);
            }
            continue;
        }
#endif
        plane_row(made, bpp, out, plane, y, out_w, channels, k, mk, flip);
    }
    planes_done();
    result = 1;
done:
#ifdef RS_X86
    if (wide != NULL) rs_wide_free(&plan);
    if (planar == 1) rs_planar_free(&planes);
    if (planar == 2) rs_planar2_free(&planes2);
#endif
    free(tmp);
    free(row);
    free(rows);
    rs_free(&h);
    rs_free(&v);
    return result;
}

/* The window (width x height pixels) resampled from box to the planes'
   size (out: channels x out_h x out_w, float32 with k and mk, else uint8),
   mirrored when asked. vector 0 takes the portable loops, 1 AVX2 at most,
   2 (the default) the best the CPU has: the tests compare all three. */
static PyObject *resample(PyObject *self, PyObject *args) {
    PyObject *out_obj, *pix_obj, *k_obj, *mk_obj;
    Py_ssize_t row_bytes, pixel_bytes, width, height, channels, out_w, out_h;
    float box[4];
    int filter, flip, vector = 2;
    if (!PyArg_ParseTuple(args, "OOnnnn(ffff)innnOOp|i:resample", &out_obj, &pix_obj, &row_bytes,
                          &pixel_bytes, &width, &height, &box[0], &box[1], &box[2], &box[3],
                          &filter, &channels, &out_w, &out_h, &k_obj, &mk_obj, &flip, &vector))
        return NULL;
    const int normalised = k_obj != Py_None;
    float k[3] = {0}, mk[3] = {0};
    if (normalised && channels >= 1 && channels <= 3 &&
        (as_floats(k_obj, (int)channels, k, "k") < 0 || as_floats(mk_obj, (int)channels, mk, "mk") < 0))
        return NULL;
    /* Pillow's rules for the box (inside the window, not reversed), and
       output sides a 16-bit weight table can index. */
    if (!(pixel_bytes == 1 || pixel_bytes == 3 || pixel_bytes == 4) ||
        !(channels == 1 || channels == 3) || (channels == 1 && pixel_bytes != 1) || width <= 0 ||
        height <= 0 || width > INT32_MAX / 4 || height > INT32_MAX || out_w <= 0 || out_h <= 0 ||
        out_w > 1 << 16 || out_h > 1 << 16 ||
        !(box[0] >= 0 && box[1] >= 0 && box[2] <= (float)width && box[3] <= (float)height &&
          box[2] - box[0] >= 0 && box[3] - box[1] >= 0) ||
        rs_support(filter) == 0.0) {
        PyErr_SetString(PyExc_ValueError, "resample: bad geometry");
        return NULL;
    }
    /* the window's rows against pixels, the planes against out */
    const size_t plane = (size_t)out_w * (size_t)out_h, item = normalised ? sizeof(float) : 1;
    size_t row_end, pix_need, out_need;
    if (!(checked_mul((size_t)width, (size_t)pixel_bytes, &row_end) && row_end <= (size_t)row_bytes &&
          checked_mul((size_t)height - 1, (size_t)row_bytes, &pix_need) &&
          checked_add(pix_need, row_end, &pix_need) &&
          checked_mul3(plane, (size_t)channels, item, &out_need))) {
        PyErr_SetString(PyExc_ValueError, "resample: bad geometry (sizes overflow)");
        return NULL;
    }
    Py_buffer out, pix;
    if (take_buffers("resample", out_obj, pix_obj, out_need, item, pix_need, &out, &pix) < 0)
        return NULL;
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = resample_into(pix.buf, (size_t)row_bytes, (int)pixel_bytes, (int)width, (int)height,
                         box, filter, (int)channels, (int)out_w, (int)out_h, out.buf,
                         normalised ? k : NULL, mk, flip, vector);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&pix);
    if (done < 0) return PyErr_NoMemory();
    return PyBool_FromLong(done);
}

static const tensor_api api = {resample_into, window_into};

#include "_probes.h"

/* (the level in use, the CPU's best and the cap, by name: rec --version) */
static PyObject *simd(PyObject *self, PyObject *args) {
    return Py_BuildValue("(sss)", simd_names[simd_level()], simd_names[simd_cpu_level()],
                         simd_names[simd_cap]);
}

static PyMethodDef methods[] = {
    {"simd", simd, METH_NOARGS, "(level in use, the CPU's best, the cap IM2REC_SIMD set)"},
    {"normalise", normalise, METH_VARARGS, "8-bit pixels -> normalised float32 planes"},
    {"split", split, METH_VARARGS, "8-bit pixels -> uint8 planes"},
    {"resample", resample, METH_VARARGS, "8-bit pixels resized -> float32 or uint8 planes"},
    {"_plan", plan, METH_VARARGS, "one direction's resampling weights (for the tests)"},
    {"_planar", planar, METH_VARARGS, "the planar horizontal pass's shape (for the tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tensor", "pixels to training tensors", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tensor(void) {
    const char *cap = getenv("IM2REC_SIMD");
    if (cap != NULL && cap[0] != '\0') {  /* (im2rec.native checks the word first) */
        if (simd_parse(cap) < 0) {
            PyErr_SetString(PyExc_ImportError, "IM2REC_SIMD must be portable, avx2 or avx512");
            return NULL;
        }
        simd_cap = simd_parse(cap);
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* (the table is static and read-only: the capsule owns nothing) */
    PyObject *capsule = PyCapsule_New((void *)&api, TENSOR_API_NAME, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
