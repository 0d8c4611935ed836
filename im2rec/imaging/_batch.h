/* A batch of training crops (included by _jpeg.c after _crop.h). The
 * payloads are image bytes in one buffer; what they are records of is the
 * caller's business (recordio reads and checks the records, in Python).
 *
 *   sizes(data, starts, lengths, max_pixels, out) -> count
 *       each payload data[starts[j]:starts[j] + lengths[j]] (int64 arrays)
 *       that this decoder takes (crop's tests: a JPEG ending in EOI whose
 *       header libjpeg reads, a colour space and orientation it takes,
 *       within the pixel limit) gets its width and height in out[j]
 *       (int64, n x 2); count is the first it does not take (n: all).
 *   render(plan, data, starts, lengths, regions, out, max_pixels[, vector])
 *       -> (next, outcome)
 *       each payload decoded and resampled into the j-th sample of out as
 *       regions[j] (float64, n x REGION_COLUMNS: _crop.h's Region) says, by
 *       this thread and the process's idle-time helper (_helper.h); next is
 *       the first sample not done (n: all done), and outcome says why:
 *       False (the resampler left it to Pillow: a weight table past its
 *       bound) or the decoder's message (a str).
 *
 * A region row that is not whole numbers, a scale, a region of at least one
 * pixel, a finite box, is a ValueError for the call (it is the caller's
 * bug); a region outside its image is that sample's failure. Every size is
 * checked before it is used; libjpeg runs without the GIL.
 */
#include "_helper.h"

/* An array argument: C-contiguous, count items of item bytes. */
static int batch_array(PyObject *obj, Py_buffer *view, int writable, size_t item, size_t count,
                       const char *what) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if ((size_t)view->len != count * item) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s has the wrong size", what);
        return -1;
    }
    return 0;
}

static int64_t item64(const void *array, size_t j) {  /* (any alignment) */
    int64_t v;
    memcpy(&v, (const char *)array + j * sizeof v, sizeof v);
    return v;
}

/* The payloads: data, and starts and lengths of n items each. */
typedef struct {
    Py_buffer data, starts, lengths;
    size_t n;
} Payloads;

static int payloads_get(PyObject *data, PyObject *starts, PyObject *lengths, Payloads *p) {
    if (PyObject_GetBuffer(data, &p->data, PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(starts, &p->starts, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&p->data);
        return -1;
    }
    p->n = (size_t)p->starts.len / sizeof(int64_t);
    if ((size_t)p->starts.len % sizeof(int64_t) != 0 ||
        batch_array(lengths, &p->lengths, 0, sizeof(int64_t), p->n, "lengths") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "starts has the wrong size");
        PyBuffer_Release(&p->starts);
        PyBuffer_Release(&p->data);
        return -1;
    }
    return 0;
}

static void payloads_release(Payloads *p) {
    PyBuffer_Release(&p->lengths);
    PyBuffer_Release(&p->starts);
    PyBuffer_Release(&p->data);
}

/* The j-th payload, or NULL where its span is not inside the data. */
static const unsigned char *payload(const Payloads *p, size_t j, size_t *n) {
    const int64_t at = item64(p->starts.buf, j), len = item64(p->lengths.buf, j);
    if (at < 0 || len < 0 || !within((size_t)at, (size_t)len, (size_t)p->data.len)) return NULL;
    *n = (size_t)len;
    return (const unsigned char *)p->data.buf + at;
}

static PyObject *sizes(PyObject *self, PyObject *args) {
    PyObject *data_obj, *starts_obj, *lengths_obj, *out_obj;
    long long max_pixels;
    if (!PyArg_ParseTuple(args, "OOOLO:sizes", &data_obj, &starts_obj, &lengths_obj, &max_pixels,
                          &out_obj))
        return NULL;
    if (!in_range(max_pixels, 0, LLONG_MAX, "max_pixels")) return NULL;
    Payloads p;
    Py_buffer out;
    if (payloads_get(data_obj, starts_obj, lengths_obj, &p) < 0) return NULL;
    if (batch_array(out_obj, &out, 1, 2 * sizeof(int64_t), p.n, "out") < 0) {
        payloads_release(&p);
        return NULL;
    }
    size_t j = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; j < p.n; j++) {
        size_t n;
        const unsigned char *bytes = payload(&p, j, &n);
        Job job;
        int width, height;
        if (bytes == NULL || !sample_header(&job, bytes, n, max_pixels, &width, &height)) break;
        job_end(&job);
        const int64_t wh[2] = {width, height};
        memcpy((char *)out.buf + j * sizeof wh, wh, sizeof wh);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    payloads_release(&p);
    return PyLong_FromSize_t(j);
}

/* The samples of a render call, for work_all. */
typedef struct {
    Work work;  /* (first: work_all's callback gets this struct) */
    const CropPlan *p;
    Sample *samples;
    int vector;
} Render;

static void render_one(Work *w, int k) {
    Render *r = (Render *)w;
    Sample *s = &r->samples[k];
    if (!s->failed) sample_render(r->p, s, r->vector);
}

static PyObject *render(PyObject *self, PyObject *args) {
    PyObject *plan_obj, *data_obj, *starts_obj, *lengths_obj, *regions_obj, *out_obj;
    long long max_pixels;
    int vector = 2;
    if (!PyArg_ParseTuple(args, "OOOOOOL|i:render", &plan_obj, &data_obj, &starts_obj,
                          &lengths_obj, &regions_obj, &out_obj, &max_pixels, &vector))
        return NULL;
    const CropPlan *plan = PyCapsule_GetPointer(plan_obj, PLAN_NAME);
    if (plan == NULL || !in_range(max_pixels, 0, LLONG_MAX, "max_pixels")) return NULL;
    Payloads p;
    Py_buffer regions, out;
    if (payloads_get(data_obj, starts_obj, lengths_obj, &p) < 0) return NULL;
    if (p.n > INT_MAX / 2 ||
        batch_array(regions_obj, &regions, 0, REGION_COLUMNS * sizeof(double), p.n, "regions") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "too many samples");
        payloads_release(&p);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&regions);
        payloads_release(&p);
        return NULL;
    }
    /* each sample's share of out: the whole divided by the count, which
       must hold the plan's planes */
    const size_t share = p.n ? (size_t)out.len / p.n : 0, item = plan->normalised ? sizeof(float) : 1;
    size_t need = 0;
    PyObject *result = NULL;
    Sample *samples = NULL;
    if (p.n && (!checked_mul3((size_t)plan->out_w * (size_t)plan->out_h, (size_t)plan->channels,
                              item, &need) ||
                share < need || (uintptr_t)out.buf % item != 0 || share % item != 0)) {
        PyErr_SetString(PyExc_TypeError, "render: the output does not fit the plan");
        goto done;
    }
    if (p.n && (samples = calloc(p.n, sizeof *samples)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t j = 0; j < p.n; j++) {
        double row[REGION_COLUMNS];
        memcpy(row, (const char *)regions.buf + j * sizeof row, sizeof row);
        if (region_from(row, &samples[j].r) < 0) {
            PyErr_Format(PyExc_ValueError, "render: region %zu is not a region", j);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (size_t j = 0; j < p.n; j++) {  /* the headers, then the work */
        Sample *s = &samples[j];
        size_t n;
        int width, height;
        const unsigned char *bytes = payload(&p, j, &n);
        if (bytes == NULL || !sample_header(&s->job, bytes, n, max_pixels, &width, &height)) {
            strcpy(s->job.err.message, "not an image this decoder takes");
            s->failed = -3;
            continue;
        }
        const int space_gray = s->job.cinfo.jpeg_color_space == JCS_GRAYSCALE;
        /* A resampled crop is decoded as RGB, which libjpeg-turbo writes 3 %
           faster than RGBX (its colour conversion and upsampling), and
           becomes RGBX in the horizontal pass; a plain cut is handed on as
           RGBX. */
        s->gray = plan->channels == 1 || space_gray;
        s->bpp = s->gray ? 1 : s->r.exact ? 4 : 3;
        s->out = (char *)out.buf + j * share;
        s->limit = (unsigned long long)max_pixels;
    }
    Render work = {{(int)p.n, 0, render_one, NULL}, plan, samples, vector};
    work_all(&work.work);
    Py_END_ALLOW_THREADS
    size_t j = 0;
    while (j < p.n && !samples[j].failed && samples[j].done == 1) j++;
    if (j < p.n && !samples[j].failed && samples[j].done < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (j == p.n) result = Py_BuildValue("(nO)", (Py_ssize_t)j, Py_None);
    else if (samples[j].failed) result = Py_BuildValue("(ns)", (Py_ssize_t)j, samples[j].job.err.message);
    else result = Py_BuildValue("(nO)", (Py_ssize_t)j, Py_False);
done:
    free(samples);
    PyBuffer_Release(&out);
    PyBuffer_Release(&regions);
    payloads_release(&p);
    return result;
}

/* Whether this process runs an idle-time helper (for the tests). */
static PyObject *helper_running(PyObject *self, PyObject *args) {
    return PyBool_FromLong(helper_ready());
}
