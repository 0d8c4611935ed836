/* A batch of training crops read straight from the .rec (included by
 * _jpeg.c after _crop.h):
 *
 *   crop_batch(plan, fd, offsets, stops, out, bit_generator, max_pixels,
 *              labels, ids, start, span_limit, classes, together[, vector])
 *       -> (next, outcome)
 *
 * For samples start, start + 1, ... of a batch: read the bytes from
 * offsets[j] to stops[j] (int64 arrays) of the open file fd with one pread,
 * which must be exactly one whole record (docs/format.md, "Records on disk") with a
 * single label (with classes, a whole number from 0 to 2**53: a class
 * index); store that label in labels[j] (float32) and its id in ids[j]
 * (uint64; ids may be None) and run crop's work on its image into the j-th
 * sample of out. It is RecordDataset.__getitems__'s loop (and
 * ImageRecordIter's workers', filling.fill_batch) without the Python between the samples
 * (reading, unpacking, the call). The draws are crop's, in the
 * same order, so the planes and the generator's state are the per-sample
 * path's (tests/training/test_batch_native.py).
 *
 * It stops at the first sample it does not finish and says why, so the
 * caller's per-sample path takes that one sample and calls again from the
 * next:
 *   (j, None)        nothing drawn for sample j: its span is not one whole
 *                    record, it has several labels (or, with classes, one
 *                    that is not a class index), the read failed, or
 *                    crop declines the image (the Python path reads it again,
 *                    and fails with its own message where it is damaged);
 *   (j, (flip, box)) drawn, left to Pillow, as crop returns it;
 *   (j, "message")   drawn, and the decoder failed (crop's ValueError).
 * (count, None) when every sample is done. Every size is checked before it
 * is used; a span longer than span_limit is not read here.
 *
 * With together, the samples are drawn in order a run of TOGETHER at a
 * time, and each run is then decoded and resampled by this thread and the
 * process's idle-time helper (_helper.h). A sample that does not finish
 * may then have others drawn after it, which the sample-at-a-time path
 * would not have drawn yet: the answer is then (j, Ellipsis), and the
 * caller puts the generator back as it was before the call and calls again
 * without together, which stops where the sample-at-a-time path would.
 */
#include <errno.h>
#include <unistd.h>

#include "_helper.h"

#define RECORD_MAGIC 0xced7230aU
#define RECORD_HEAD 8    /* magic, lrec */
#define IR_HEADER 24     /* flag, label, id, id2 */

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* n bytes at offset of fd into buf; 0, or -1 (an error or the file's end). */
static int read_exactly(int fd, long long offset, unsigned char *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, buf + done, n - done, (off_t)(offset + (long long)done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        done += (size_t)got;
    }
    return 0;
}

/* The image bytes of the record read into buf (size bytes), its label in
   *label; NULL where it is not one whole single-label record (with
   classes: whose label is a class index, as RecordDataset._class_index
   requires, so that the Python path raises before anything is drawn). */
static const unsigned char *record_image(const unsigned char *buf, size_t size, int classes,
                                         size_t *n, float *label, uint64_t *id) {
    const uint32_t magic = le32(buf), lrec = le32(buf + 4);
    /* cflag 0 (a whole record, lrec its length), the span exactly the
       record and its padding to 4 bytes, room for the header */
    if (magic != RECORD_MAGIC || lrec >> 29 != 0 ||
        RECORD_HEAD + (((size_t)lrec + 3) & ~(size_t)3) != size || lrec < IR_HEADER ||
        le32(buf + RECORD_HEAD) != 0)  /* flag 0: one label, in the header */
        return NULL;
    uint32_t bits = le32(buf + RECORD_HEAD + 4);
    memcpy(label, &bits, sizeof *label);
    *id = (uint64_t)le32(buf + RECORD_HEAD + 8) | (uint64_t)le32(buf + RECORD_HEAD + 12) << 32;
    const double v = *label;  /* (NaN fails every comparison) */
    if (classes && !(v >= 0 && v < 9007199254740992.0 && v == floor(v))) return NULL;
    *n = (size_t)lrec - IR_HEADER;
    return buf + RECORD_HEAD + IR_HEADER;
}

/* The buffers crop_batch takes as arrays: C-contiguous, whole items. */
static int batch_array(PyObject *obj, Py_buffer *view, int writable, size_t item, size_t count,
                       const char *what) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if ((size_t)view->len != count * item) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "crop_batch: %s has the wrong size", what);
        return -1;
    }
    return 0;
}

/* The samples drawn together, rendered by work_all. */
typedef struct {
    Work work;  /* (first: work_all's callback gets this struct) */
    const CropPlan *p;
    Sample *samples;
    int vector;
} Render;

static void render_one(Work *w, int k) {
    Render *r = (Render *)w;
    crop_render(r->p, &r->samples[k], r->vector);
}

/* A ValueError's message as crop_batch's outcome (a new reference); NULL
   with any other exception left set. */
static PyObject *value_error_message(void) {
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *message = value != NULL ? PyObject_Str(value) : PyUnicode_FromString("");
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    return message;
}

/* One span into *buf (grown to hold it; *held its size), and its record's
   image; NULL where it is not one whole single-label record (or cannot be
   read, or no memory: the caller's Python path then says what it is). */
static const unsigned char *read_image(int fd, int64_t at, int64_t stop, long long span_limit,
                                       int classes, unsigned char **buf, size_t *held, size_t *n,
                                       float *label, uint64_t *id) {
    if (at < 0 || stop < at || stop - at < RECORD_HEAD + IR_HEADER || stop - at > span_limit)
        return NULL;
    const size_t size = (size_t)(stop - at);
    if (size > *held) {
        unsigned char *bigger = realloc(*buf, size);
        if (bigger == NULL) return NULL;
        *buf = bigger, *held = size;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = read_exactly(fd, (long long)at, *buf, size);
    Py_END_ALLOW_THREADS
    return failed ? NULL : record_image(*buf, size, classes, n, label, id);
}

static int64_t item64(const void *array, size_t j) {  /* (any alignment) */
    int64_t v;
    memcpy(&v, (const char *)array + j * sizeof v, sizeof v);
    return v;
}

/* Samples drawn together, then decoded by this thread and the helper: a
   run this long at a time, so that the records read for the draws are
   still in cache when they are decoded. */
#define TOGETHER 8

/* crop_batch with together: (next, outcome) as a new reference, or NULL. */
static PyObject *batch_together(const CropPlan *p, int fd, const void *offsets, const void *stops,
                                char *out, size_t share, size_t count, size_t start, Bits *bits,
                                long long max_pixels, void *labels, void *ids,
                                long long span_limit, int classes, int vector) {
    Sample samples[TOGETHER];
    unsigned char *bufs[TOGETHER] = {NULL};
    size_t held[TOGETHER] = {0};
    PyObject *result = NULL, *outcome = NULL;
    size_t j = start;
    while (j < count) {
        size_t k = 0;
        int stopped = 0, drawn_error = 0;
        for (; k < TOGETHER && j + k < count; k++) {  /* the draws, in order */
            const size_t at = j + k;
            size_t n = 0;
            float label;
            uint64_t id;
            const unsigned char *image =
                read_image(fd, item64(offsets, at), item64(stops, at), span_limit, classes,
                           &bufs[k], &held[k], &n, &label, &id);
            const int drawn = image == NULL ? 1 : crop_draw(p, image, n, out + at * share, share,
                                                            bits, max_pixels, &samples[k]);
            if (drawn == 1) {
                stopped = 1;  /* nothing drawn for it */
                break;
            }
            if (drawn < 0) {
                if ((outcome = value_error_message()) == NULL) goto done;
                stopped = drawn_error = 1;  /* drawn, and failed before its decode */
                break;
            }
            memcpy((char *)labels + at * sizeof label, &label, sizeof label);
            if (ids != NULL) memcpy((char *)ids + at * sizeof id, &id, sizeof id);
        }
        Render render = {{(int)k, 0, render_one, NULL}, p, samples, vector};
        Py_BEGIN_ALLOW_THREADS
        work_all(&render.work);
        Py_END_ALLOW_THREADS
        size_t first = 0;
        while (first < k && !samples[first].failed && samples[first].done == 1) first++;
        if (first < k) {  /* a sample not done */
            Py_CLEAR(outcome);
            if (first + 1 < k || drawn_error) {  /* others drawn after it */
                result = Py_BuildValue("(nO)", (Py_ssize_t)(j + first), Py_Ellipsis);
                goto done;
            }
            outcome = crop_result(&samples[first]);
            if (outcome == NULL && (outcome = value_error_message()) == NULL) goto done;
            j += first;
            break;
        }
        j += k;
        if (stopped) break;
    }
    result = Py_BuildValue("(nO)", (Py_ssize_t)j, outcome != NULL ? outcome : Py_None);
done:
    Py_XDECREF(outcome);
    for (size_t i = 0; i < TOGETHER; i++) free(bufs[i]);
    return result;
}

static PyObject *crop_batch(PyObject *self, PyObject *args) {
    PyObject *plan_obj, *offsets_obj, *stops_obj, *out_obj, *gen_obj, *labels_obj, *ids_obj;
    int fd, classes, together, vector = 2;
    long long max_pixels, span_limit;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "OiOOOOLOOnLpp|i:crop_batch", &plan_obj, &fd, &offsets_obj,
                          &stops_obj, &out_obj, &gen_obj, &max_pixels, &labels_obj, &ids_obj,
                          &start, &span_limit, &classes, &together, &vector))
        return NULL;
    const CropPlan *p = PyCapsule_GetPointer(plan_obj, PLAN_NAME);
    if (p == NULL) return NULL;
    if (!in_range(span_limit, IR_HEADER + RECORD_HEAD, 1LL << 30, "span_limit")) return NULL;
    Py_buffer offsets, stops, out, labels, ids = {0};
    if (PyObject_GetBuffer(offsets_obj, &offsets, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const size_t count = (size_t)offsets.len / sizeof(int64_t);
    if ((size_t)offsets.len % sizeof(int64_t) != 0) {
        PyBuffer_Release(&offsets);
        return PyErr_Format(PyExc_ValueError, "crop_batch: offsets has the wrong size");
    }
    if (batch_array(stops_obj, &stops, 0, sizeof(int64_t), count, "stops") < 0) {
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (batch_array(labels_obj, &labels, 1, sizeof(float), count, "labels") < 0) {
        PyBuffer_Release(&stops);
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (ids_obj != Py_None && batch_array(ids_obj, &ids, 1, sizeof(uint64_t), count, "ids") < 0) {
        PyBuffer_Release(&labels);
        PyBuffer_Release(&stops);
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        if (ids.obj != NULL) PyBuffer_Release(&ids);
        PyBuffer_Release(&labels);
        PyBuffer_Release(&stops);
        PyBuffer_Release(&offsets);
        return NULL;
    }
    /* each sample's share of out: the whole divided by the count (crop
       checks that it holds the plan's planes) */
    const size_t share = count ? (size_t)out.len / count : 0;
    PyObject *result = NULL, *outcome = NULL;
    Bits bits = {gen_obj, NULL, NULL};
    unsigned char *buf = NULL;
    size_t held = 0, j = (size_t)start;
    if (start < 0 || (size_t)start > count) {
        PyErr_SetString(PyExc_ValueError, "crop_batch: start is outside the batch");
        goto done;
    }
    if (together) {
        result = batch_together(p, fd, offsets.buf, stops.buf, out.buf, share, count, j, &bits,
                                max_pixels, labels.buf, ids.obj != NULL ? ids.buf : NULL,
                                span_limit, classes, vector);
        goto done;
    }
    for (; j < count; j++) {
        size_t n = 0;
        float label;
        uint64_t id;
        const unsigned char *image = read_image(fd, item64(offsets.buf, j), item64(stops.buf, j),
                                                span_limit, classes, &buf, &held, &n, &label, &id);
        if (image == NULL) break;
        PyObject *got = crop_sample(p, image, n, (char *)out.buf + j * share, share, &bits,
                                    max_pixels, vector);
        if (got == Py_True) {
            Py_DECREF(got);
            memcpy((char *)labels.buf + j * sizeof label, &label, sizeof label);
            if (ids.obj != NULL) memcpy((char *)ids.buf + j * sizeof id, &id, sizeof id);
            continue;
        }
        /* None or (flip, box), or the decoder's message: the caller goes on
           from here; another error (memory, the output's size) is raised */
        if ((outcome = got != NULL ? got : value_error_message()) == NULL) goto done;
        break;
    }
    result = Py_BuildValue("(nO)", (Py_ssize_t)j, outcome != NULL ? outcome : Py_None);
done:
    Py_XDECREF(outcome);
    free(buf);
    bits_done(&bits);
    PyBuffer_Release(&out);
    if (ids.obj != NULL) PyBuffer_Release(&ids);
    PyBuffer_Release(&labels);
    PyBuffer_Release(&stops);
    PyBuffer_Release(&offsets);
    return result;
}

/* Whether this process runs an idle-time helper (for the tests). */
static PyObject *helper_running(PyObject *self, PyObject *args) {
    return PyBool_FromLong(helper_ready());
}
