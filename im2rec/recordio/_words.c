/* MXNet's magic word in a buffer, at offsets that are multiples of 4: the
 * scan that tells whether an image's record must be split, run on every
 * image by rec import and the writers. What numpy's
 * (words == MAGIC).any() does, without a temporary array and without
 * importing numpy (0.1 s, a third of rec import's start-up).
 *
 *   has_word(data, word) -> bool   (word: 4 bytes; data: any contiguous buffer)
 *   frame(data) -> bytes | None     (one whole record holding data, or None)
 *   whole_frames(data, start, out[, fields]) -> (count, stop)
 *                                   (the heads of the whole records in a block,
 *                                   and a copy of their header fields)
 *   gather(data, first, counts, out) -> total (runs of words, one after another)
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

/* scan over a whole buffer, a large one without the GIL */
static int scan_buffer(const Py_buffer *data, uint32_t needle) {
    int found;
    if (data->len >= (1 << 16)) {
        Py_BEGIN_ALLOW_THREADS
        found = scan(data->buf, data->len / 4, needle);
        Py_END_ALLOW_THREADS
    } else {
        found = scan(data->buf, data->len / 4, needle);
    }
    return found;
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
    const int found = scan_buffer(&data, needle);
    PyBuffer_Release(&data);
    PyBuffer_Release(&word);
    return PyBool_FromLong(found);
}

#define MAX_WHOLE (1u << 29) /* lrec's 29 length bits (docs/format.md, "Records on disk") */

/* framing.frame's common case in one allocation: the bytes of one whole
   record (magic, cflag 0 and the length, data, zeros to a multiple of 4),
   or None where data holds the magic word at a multiple of 4 (the record
   must be split) or is too long for one record: framing.py then does it
   and says why. It is the per-record path of the writers' small records
   (the drop-in write_idx's), a quarter of the time Python takes. */
static PyObject *frame(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_C_CONTIGUOUS) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError)) return NULL;
        PyErr_Clear();  /* a strided view: framing.py copies it first */
        Py_RETURN_NONE;
    }
    static const unsigned char magic[4] = {0x0a, 0x23, 0xd7, 0xce};  /* 0xced7230a, little-endian */
    uint32_t needle;
    memcpy(&needle, magic, 4);
    const size_t n = (size_t)data.len;
    if (n >= MAX_WHOLE || scan_buffer(&data, needle)) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    const size_t padded = (n + 3) & ~(size_t)3;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 + padded));
    if (out != NULL) {
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
        memcpy(p, magic, 4);
        for (int i = 0; i < 4; i++) p[4 + i] = (unsigned char)(n >> (8 * i));  /* cflag 0 */
        memcpy(p + 8, data.buf, n);
        memset(p + 8 + n, 0, padded - n);
    }
    PyBuffer_Release(&data);
    return out;
}

#define FIELDS 32 /* a frame's head and the image header after it: blocks.HEADER_FIELDS */

/* The heads of the whole records that lie one after another in data from
   start, written to out (int64, as many as fit): the block walk of rec info
   and rec verify (im2rec/recordio/blocks.py, which states the same walk in
   Python and handles every frame this one stops at). It stops at the first
   frame that is not a whole record lying inside data: a head cut by the
   end, a word that is not the magic, a part of a split record, a payload
   past the end. With fields (a writable buffer of FIELDS bytes for each
   int64 of out), the FIELDS bytes from each head are copied there as well
   (zeros past the end of data), while they are in the cache. Returns
   (count, the offset where it stopped). */
static PyObject *whole_frames(PyObject *self, PyObject *args) {
    Py_buffer data, out, fields = {0};
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*nw*|w*:whole_frames", &data, &start, &out, &fields)) {
        return NULL;
    }
    const Py_ssize_t room = out.len / 8;
    if (start < 0 || start > data.len || (start & 3) || out.len % 8
        || (fields.buf != NULL && fields.len / FIELDS < room)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        if (fields.buf != NULL) PyBuffer_Release(&fields);
        PyErr_SetString(PyExc_ValueError,
                        "whole_frames: start must be a multiple of 4 inside the data, out int64 "
                        "and fields 32 bytes for each of out's");
        return NULL;
    }
    static const unsigned char magic[4] = {0x0a, 0x23, 0xd7, 0xce};
    const unsigned char *p = data.buf;
    const Py_ssize_t len = data.len;
    int64_t *heads = out.buf;
    unsigned char *copy = fields.buf;
    Py_ssize_t count = 0, pos = start;
    Py_BEGIN_ALLOW_THREADS
    while (count < room && pos <= len - 8) {
        const unsigned char *h = p + pos;
        const uint32_t lrec = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16
                              | (uint32_t)h[7] << 24;
        if (memcmp(h, magic, 4) != 0 || (lrec >> 29) != 0) break;  /* cflag 0: whole */
        const Py_ssize_t next = pos + 8 + (Py_ssize_t)((lrec + 3) & ~(uint32_t)3);
        if (next > len) break;
        if (copy != NULL) {
            const Py_ssize_t have = len - pos < FIELDS ? len - pos : FIELDS;
            unsigned char *to = copy + (size_t)count * FIELDS;
            memcpy(to, h, (size_t)have);
            memset(to + have, 0, (size_t)(FIELDS - have));
        }
        heads[count++] = pos;
        pos = next;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (fields.buf != NULL) PyBuffer_Release(&fields);
    return Py_BuildValue("nn", count, pos);
}

/* gather(data, first, counts, out) -> total: the runs of 4-byte words
   data[first[i] : first[i] + 4 * counts[i]] copied one after another into
   out (the labels of a block's records, im2rec/recordio/blocks.py, which
   does the same with numpy where this is not built). first and counts are
   int64 arrays of one length; every run must lie inside data and all of
   them fit in out (ValueError otherwise, before anything is copied). */
static PyObject *gather(PyObject *self, PyObject *args) {
    Py_buffer data, first, counts, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*:gather", &data, &first, &counts, &out)) return NULL;
    const Py_ssize_t n = first.len / 8;
    const int64_t *at = first.buf, *count = counts.buf;
    int ok = first.len % 8 == 0 && counts.len == first.len;
    int64_t total = 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ok = at[i] >= 0 && count[i] >= 0 && count[i] <= data.len / 4
             && at[i] <= data.len - 4 * count[i] && total <= out.len / 4 - count[i];
        total += ok ? count[i] : 0;
    }
    if (!ok) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&first);
        PyBuffer_Release(&counts);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "gather: a run outside the data, or more than out holds");
        return NULL;
    }
    const unsigned char *src = data.buf;
    unsigned char *dst = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(dst, src + at[i], (size_t)(4 * count[i]));
        dst += 4 * count[i];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&first);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&out);
    return PyLong_FromLongLong(total);
}

static PyMethodDef methods[] = {
    {"has_word", has_word, METH_VARARGS, "whether a 4-byte word is at a multiple of 4 in a buffer"},
    {"frame", frame, METH_O, "one whole record holding a buffer, or None where it must be split"},
    {"whole_frames", whole_frames, METH_VARARGS, "the heads of the whole records in a block"},
    {"gather", gather, METH_VARARGS, "runs of 4-byte words of a buffer, one after another"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_words", "aligned word scans", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
