/* Pixels read in place from a Pillow image's Arrow export, for _tensor.c. */
#ifndef IM2REC_ARROW_H
#define IM2REC_ARROW_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

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

#endif
