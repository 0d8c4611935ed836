/* Records whose bodies are still in other files, written in one call
 * without the GIL: rec import hands over a batch of records (about 1 MB),
 * each some bytes made here (the record's magic and length words, its
 * header, the last one's padding) then a range of a shard, and goes on
 * parsing the next samples while the kernel copies these.
 *
 *   copy_records(out_fd, items) -> int
 *
 * items: a list of (glue, src_fd, offset, length): glue (bytes) is written
 * to out_fd at its position, then length bytes of src_fd from offset are
 * copied after it: sendfile on Linux (in the kernel, page cache to page
 * cache), else, or where sendfile cannot (EINVAL, ENOSYS, ...), pread and
 * write through one 1 MB buffer. Returns -1 when every item is done, or the
 * index of the item whose source ended before its length (the file shrank);
 * a failing call raises OSError with its errno. Interrupted calls (EINTR)
 * are restarted; a pending Ctrl-C is handled by Python after the batch.
 */
#include "../checked.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/sendfile.h>
#endif

#define PIECE (1 << 20)

typedef struct {
    Py_buffer glue;
    int src;
    long long offset;
    long long length;
} item_t;

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* 0: copied; 1: the source ended first; -1: errno says why */
static int copy_range(int out, int src, off_t off, long long n, char **buf, int *kernel) {
    while (n > 0) {
#ifdef __linux__
        if (*kernel) {
            ssize_t k = sendfile(out, src, &off, (size_t)(n < (1 << 30) ? n : (1 << 30)));
            if (k < 0) {
                if (errno == EINTR) continue;
                if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EXDEV) {
                    *kernel = 0; /* not between these files: read and write */
                    continue;
                }
                return -1;
            }
            if (k == 0) return 1;
            n -= k;
            continue;
        }
#endif
        if (*buf == NULL && (*buf = malloc(PIECE)) == NULL) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t k = pread(src, *buf, (size_t)(n < PIECE ? n : PIECE), off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) return 1;
        if (write_all(out, *buf, (size_t)k) < 0) return -1;
        off += k;
        n -= k;
    }
    return 0;
}

/* Whether v is an off_t (a 32-bit off_t where large files are not enabled) */
static int fits_off_t(long long v) {
    off_t o = (off_t)v;
    return (long long)o == v;
}

static PyObject *copy_records(PyObject *self, PyObject *args) {
    int out;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "iO!:copy_records", &out, &PyList_Type, &list)) return NULL;
    /* A tuple of the items: parsing one may run Python code (__index__)
       that changes the list under us; the tuple cannot change. */
    PyObject *tuple = PyList_AsTuple(list);
    if (tuple == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple), ready = 0;
    item_t *items = PyMem_Calloc(n ? (size_t)n : 1, sizeof(item_t));
    if (items == NULL) {
        Py_DECREF(tuple);
        return PyErr_NoMemory();
    }
    for (; ready < n; ready++) {
        item_t *it = &items[ready];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(tuple, ready), "y*iLL:copy_records item",
                              &it->glue, &it->src, &it->offset, &it->length))
            break;
        /* offset + length is an off_t the copy loop counts up to: never past it */
        if (it->offset < 0 || it->length < 0 || it->offset > LLONG_MAX - it->length ||
            !fits_off_t(it->offset + it->length)) {
            PyBuffer_Release(&it->glue);
            PyErr_SetString(PyExc_ValueError, "copy_records: a negative or overflowing range");
            break;
        }
    }
    Py_DECREF(tuple);
    long long failed = -1;
    int status = 0, kernel = 1, err = 0;
    if (ready == n) {
        char *buf = NULL;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n && status == 0; i++) {
            status = write_all(out, items[i].glue.buf, (size_t)items[i].glue.len);
            if (status == 0 && items[i].length)
                status = copy_range(out, items[i].src, (off_t)items[i].offset, items[i].length,
                                    &buf, &kernel);
            if (status != 0) failed = i;
        }
        err = errno;
        free(buf);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t i = 0; i < ready; i++) PyBuffer_Release(&items[i].glue);
    PyMem_Free(items);
    if (ready != n) return NULL;
    if (status < 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(status == 1 ? failed : -1);
}

static PyMethodDef methods[] = {
    {"copy_records", copy_records, METH_VARARGS, "write records whose bodies are in other files"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_copies", "records copied file to file", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__copies(void) { return PyModule_Create(&module); }
