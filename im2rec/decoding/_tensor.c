/* Pixels to a training tensor in one pass: a window of 8-bit pixels
 * (gray, RGB or RGBX rows) -> float32 planes (C, H, W), each value
 * pixel * k[c] - mk[c], mirrored left-right when asked. What numpy does in
 * three passes over a strided view (cast, multiply, subtract), with the same
 * float32 operations in the same order, so the results are identical.
 *
 *   normalise(out, pixels, row_bytes, pixel_bytes, left, top, width, height,
 *             channels, k, mk, flip)
 *
 * Every size and offset is checked against the buffers before anything is
 * read or written. Runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyObject *normalise(PyObject *self, PyObject *args) {
    PyObject *out_obj, *pix_obj, *k_obj, *mk_obj;
    Py_ssize_t row_bytes, pixel_bytes, left, top, width, height, channels;
    int flip;
    if (!PyArg_ParseTuple(args, "OOnnnnnnnOOp:normalise", &out_obj, &pix_obj, &row_bytes,
                          &pixel_bytes, &left, &top, &width, &height, &channels, &k_obj, &mk_obj,
                          &flip))
        return NULL;
    if (!(pixel_bytes == 1 || pixel_bytes == 3 || pixel_bytes == 4) ||
        !(channels == 1 || channels == 3) || (channels == 1 && pixel_bytes != 1) || left < 0 ||
        top < 0 || width <= 0 || height <= 0 || row_bytes < (left + width) * pixel_bytes) {
        PyErr_SetString(PyExc_ValueError, "normalise: bad geometry");
        return NULL;
    }
    float k[3], mk[3];
    if (as_floats(k_obj, (int)channels, k, "k") < 0 || as_floats(mk_obj, (int)channels, mk, "mk") < 0)
        return NULL;
    Py_buffer out, pix;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(pix_obj, &pix, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    size_t plane = (size_t)width * (size_t)height;
    if ((size_t)out.len < plane * (size_t)channels * sizeof(float) ||
        (size_t)pix.len < (size_t)(top + height - 1) * (size_t)row_bytes + (size_t)(left + width) * (size_t)pixel_bytes) {
        PyBuffer_Release(&out);
        PyBuffer_Release(&pix);
        PyErr_SetString(PyExc_ValueError, "normalise: a buffer is smaller than the geometry");
        return NULL;
    }
    float *dst = (float *)out.buf;
    const unsigned char *src = (const unsigned char *)pix.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < height; y++) {
        const unsigned char *row = src + (size_t)(top + y) * (size_t)row_bytes + (size_t)left * (size_t)pixel_bytes;
        float *line = dst + (size_t)y * (size_t)width;
        if (channels == 1)
            gray_row(row, line, width, k[0], mk[0], flip);
        else if (pixel_bytes == 4)  /* a constant step: the loop vectorises */
            colour_row(row, 4, line, plane, width, k, mk, flip);
        else if (pixel_bytes == 3)
            colour_row(row, 3, line, plane, width, k, mk, flip);
        else
            colour_row(row, 1, line, plane, width, k, mk, flip);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&pix);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalise", normalise, METH_VARARGS, "8-bit pixels -> normalised float32 planes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tensor", "pixels to training tensors", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tensor(void) { return PyModule_Create(&module); }
