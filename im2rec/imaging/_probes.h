/* _tensor's windows onto the resampler's plans, for the tests: _plan (one
 * direction's weights, portable and AVX-512 loops) and _planar (how the
 * planar horizontal pass takes a row), so that tests/imaging can compare
 * the tables weight for weight and know that each kernel ran. Included by
 * _tensor.c only.
 */
#ifndef IM2REC_PROBES_H
#define IM2REC_PROBES_H

/* A probe's sizes, as rs_plan's callers check them: 1, or 0 with
   ValueError set (a test hook, but a C entry point all the same). */
static int probe_sizes(const char *name, int in_size, float in0, float in1, int out_size) {
    if (in_size < 1 || in_size > (1 << 20) || out_size < 1 || out_size > (1 << 20) ||
        !(in0 >= 0.0f) || !(in1 >= in0) || in1 > (float)in_size) {
        PyErr_Format(PyExc_ValueError, "%s: sizes out of range", name);
        return 0;
    }
    return 1;
}

/* One direction's weights, for the tests: (first, taps, weights as int16
   bytes, precision), or None where rs_plan declines (Pillow's case then).
   fast 2 takes the AVX-512 loops where the CPU has them, 1 AVX2's at most,
   0 the portable ones: all must agree to the bit. */
static PyObject *plan(PyObject *self, PyObject *args) {
    int in_size, out_size, filter, fast;
    float in0, in1;
    if (!PyArg_ParseTuple(args, "iffiii:_plan", &in_size, &in0, &in1, &out_size, &filter, &fast))
        return NULL;
    if (!probe_sizes("_plan", in_size, in0, in1, out_size)) return NULL;
    rs_axis a;
    if (rs_plan(&a, in_size, in0, in1, out_size, filter, fast) < 0) Py_RETURN_NONE;
    PyObject *first = PyList_New(out_size), *taps = PyList_New(out_size), *result = NULL;
    if (first != NULL && taps != NULL) {
        for (int i = 0; i < out_size; i++) {
            PyList_SET_ITEM(first, i, PyLong_FromLong(a.first[i]));
            PyList_SET_ITEM(taps, i, PyLong_FromLong(a.taps[i]));
        }
        result = Py_BuildValue("(OOy#i)", first, taps, (const char *)a.k,
                               (Py_ssize_t)((size_t)out_size * (size_t)a.ksize * sizeof(int16_t)),
                               a.precision);
    }
    Py_XDECREF(first);
    Py_XDECREF(taps);
    rs_free(&a);
    return result;
}

/* How the planar horizontal pass would take a row of RGB pixels, for the
   tests (which must know that each of its kernels ran): (loads, pairs) --
   one or two loads a block (AVX-512: 64 bytes a block of sixteen outputs;
   avx2 true, the AVX2 kernel: 16 bytes a lane of four), pairs of taps --
   or None where it does not (the CPU lacks the instructions, or the taps
   reach too far: the RGBX path then). */
static PyObject *planar(PyObject *self, PyObject *args) {
    int in_size, out_size, filter, avx2 = 0;
    float in0, in1;
    if (!PyArg_ParseTuple(args, "iffii|p:_planar", &in_size, &in0, &in1, &out_size, &filter, &avx2))
        return NULL;
    if (!probe_sizes("_planar", in_size, in0, in1, out_size)) return NULL;
#ifdef RS_X86
    rs_axis a;
    if (!(avx2 ? simd_avx2() : simd_avx512_planar()) ||
        rs_plan(&a, in_size, in0, in1, out_size, filter, 2) < 0)
        Py_RETURN_NONE;
    int loads = 0, pairs = 0;
    if (avx2) {
        rs_planar2 w;
        if (rs_planar2_plan(&w, &a, out_size, in_size, 0) == 0) {
            loads = w.two ? 2 : 1, pairs = w.pairs;
            rs_planar2_free(&w);
        }
    } else {
        rs_planar w;
        if (rs_planar_plan(&w, &a, out_size, in_size, 0) == 0) {
            loads = w.two ? 2 : 1, pairs = w.pairs;
            rs_planar_free(&w);
        }
    }
    rs_free(&a);
    if (loads == 0) Py_RETURN_NONE;
    return Py_BuildValue("(ii)", loads, pairs);
#else
    (void)filter;
    (void)avx2;
    Py_RETURN_NONE;
#endif
}

#endif
