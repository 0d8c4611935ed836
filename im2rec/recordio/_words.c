/* MXNet's magic word in a buffer, at offsets that are multiples of 4: the
 * scan that tells whether an image's record must be split, run on every
 * image by rec import and the writers. What numpy's
 * (words == MAGIC).any() does, without a temporary array and without
 * importing numpy (0.1 s, a third of rec import's start-up).
 *
 *   has_word(data, word) -> bool   (word: 4 bytes; data: any contiguous buffer)
 *
 * Words are loaded with memcpy (the buffer may start anywhere) and compared
 * in blocks the compiler vectorises. Large buffers are scanned without the
 * GIL.
 */
#include "../checked.h"
#include <stdint.h>
#include <string.h>

#define BLOCK 64

static int scan(const unsigned char *p, Py_ssize_t words, uint32_t needle) {
    Py_ssize_t i = 0;
    for (; i + BLOCK <= words; i += BLOCK) {
        uint32_t hit = 0;
        for (int j = 0; j < BLOCK; j++) {
            uint32_t w;
            memcpy(&w, p + 4 * (i + j), 4);
            hit |= (w == needle);
        }
        if (hit) return 1;
    }
    for (; i < words; i++) {
        uint32_t w;
        memcpy(&w, p + 4 * i, 4);
        if (w == needle) return 1;
    }
    return 0;
}

static PyObject *has_word(PyObject *self, PyObject *args) {
    Py_buffer data, word;
    if (!PyArg_ParseTuple(args, "y*y*:has_word", &data, &word)) return NULL;
    if (word.len != 4) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&word);
        PyErr_SetString(PyExc_ValueError, "has_word: the word must be 4 bytes");
        return NULL;
    }
    uint32_t needle;
    memcpy(&needle, word.buf, 4);
    Py_ssize_t words = data.len / 4;
    int found;
    if (data.len >= (1 << 16)) {
        Py_BEGIN_ALLOW_THREADS
        found = scan(data.buf, words, needle);
        Py_END_ALLOW_THREADS
    } else {
        found = scan(data.buf, words, needle);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&word);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"has_word", has_word, METH_VARARGS, "whether a 4-byte word is at a multiple of 4 in a buffer"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_words", "aligned word scans", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
