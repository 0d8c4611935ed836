/* The training recipe's sample in one C call (included by _jpeg.c): draw
 * the random-resized crop and the mirror from numpy's generator, decode the
 * JPEG region the crop needs, and resample it into the output planes
 * through _tensor's C table (_tensor_api.h).
 *
 *   crop_plan(channels, out_w, out_h, resize, area_lo, area_hi,
 *             ratio_lo, ratio_hi, rand_mirror, mirror, filter, k, mk) -> plan
 *   crop(plan, data, out, bit_generator, max_pixels[, vector])
 *       -> True (done), None (not taken: nothing drawn), or (flip, box)
 *
 * It is Augmenter.write's one-pass path (im2rec/training/augment/fused.py)
 * without the Python between the calls (an eighth of a sample's time). The
 * contract is that path's
 * output and its random stream, draw for draw:
 * - the draws are numpy's own: the generator's next_double and next_uint32
 *   through its public bitgen_t (numpy/random/bitgen.h), uniform as
 *   low + (high - low) * next_double, integers(0, n) by Lemire's bounded
 *   method as numpy's random_bounded_uint64 does for ranges below 2**32;
 * - the geometry is the Python code's, operation for operation in double
 *   precision (augment/geometry.py final_crop, jpeg.py window, _draft_scale);
 * - the tests compare both paths' planes and generator states over random
 *   images, options and seeds (tests/training/test_crop_native.py).
 * None is returned before anything is drawn wherever the Python path does
 * something else (not a JPEG this decoder takes, over the pixel limit), so
 * the caller's Python path then draws as it always did. (flip, box) means
 * the draws are made but the resampler left the work to Pillow (a weight
 * table past its bound): the caller finishes that sample with this box.
 */
#include "_tensor_api.h"
#include <math.h>
#include <stdint.h>

/* numpy's bitgen_t (numpy/random/bitgen.h, public and unchanged since
   numpy 1.17), the struct behind BitGenerator.capsule */
typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t;

#define PLAN_NAME "im2rec.imaging._jpeg.crop_plan"

typedef struct {
    int channels, out_w, out_h, resize, rand_mirror, mirror, filter, normalised;
    double area[2], ratio[2];
    float k[3], mk[3];
} CropPlan;

static const tensor_api *tensor;  /* _tensor's table, taken at the first crop_plan */

#include "_draw.h" /* the draws, the region and the generator they come from */

static void plan_free(PyObject *capsule) {
    PyMem_Free(PyCapsule_GetPointer(capsule, PLAN_NAME));
}

static PyObject *crop_plan(PyObject *self, PyObject *args) {
    CropPlan p;
    PyObject *k_obj, *mk_obj;
    if (!PyArg_ParseTuple(args, "iiiiddddppiOO:crop_plan", &p.channels, &p.out_w, &p.out_h,
                          &p.resize, &p.area[0], &p.area[1], &p.ratio[0], &p.ratio[1],
                          &p.rand_mirror, &p.mirror, &p.filter, &k_obj, &mk_obj))
        return NULL;
    /* the Augmenter checked these; the plan checks them again (a bad plan
       must not reach the resampler) */
    if (!(p.channels == 1 || p.channels == 3) || p.out_w <= 0 || p.out_h <= 0 ||
        p.out_w > 1 << 16 || p.out_h > 1 << 16 || p.resize > 1 << 15 ||
        !(p.area[0] > 0 && p.area[0] <= p.area[1] && p.ratio[0] > 0 && p.ratio[0] <= p.ratio[1]) ||
        p.area[1] > 1e6 || p.ratio[0] < 1e-9 || p.ratio[1] > 1e9 ||
        !(p.filter == 1 || p.filter == 2 || p.filter == 3 || p.filter == 5)) {
        PyErr_SetString(PyExc_ValueError, "crop_plan: bad options");
        return NULL;
    }
    p.normalised = k_obj != Py_None;
    for (int c = 0; c < 3; c++) p.k[c] = p.mk[c] = 0.0f;
    for (int c = 0; p.normalised && c < p.channels; c++) {
        PyObject *kv = PySequence_GetItem(k_obj, c), *mv = PySequence_GetItem(mk_obj, c);
        double kd = kv ? PyFloat_AsDouble(kv) : -1.0, md = mv ? PyFloat_AsDouble(mv) : -1.0;
        Py_XDECREF(kv);
        Py_XDECREF(mv);
        if (PyErr_Occurred()) return NULL;
        p.k[c] = (float)kd;
        p.mk[c] = (float)md;
    }
    if (tensor == NULL) {
        /* (PyCapsule_Import only imports the package, then looks up attributes) */
        PyObject *module = PyImport_ImportModule("im2rec.imaging._tensor");
        Py_XDECREF(module);
        tensor = module ? PyCapsule_Import(TENSOR_API_NAME, 0) : NULL;
        if (tensor == NULL) return NULL;
    }
    CropPlan *held = PyMem_Malloc(sizeof *held);
    if (held == NULL) return PyErr_NoMemory();
    *held = p;
    PyObject *capsule = PyCapsule_New(held, PLAN_NAME, plan_free);
    if (capsule == NULL) PyMem_Free(held);
    return capsule;
}

/* One sample between its draws and its planes: what crop_draw leaves for
   crop_render (which needs no Python, so it can run on any thread). */
typedef struct {
    Job job;  /* the header read; decoding not started */
    Drawn d;
    Region r;
    int gray, bpp;
    unsigned long long limit;  /* the pixel limit, checked again by job_begin */
    void *out;
    /* crop_render's outcome: failed (libjpeg's or the geometry's, message
       in job.err.message), done (1 planes written, 0 left to Pillow, -1
       no memory) */
    int failed, done;
} Sample;

/* crop's first half, with the GIL: the header, the checks, the draws and
   the region. 1: declined with nothing drawn (crop's None); 0: drawn, s
   ready for crop_render; -1: an exception set (a ValueError only after the
   draws). The job is ended unless 0 is returned. */
static int crop_draw(const CropPlan *p, const unsigned char *bytes, size_t n, void *out,
                     size_t out_len, Bits *bits, long long max_pixels, Sample *s) {
    /* jpeg.window's own tests, in its order: a JPEG ending in EOI, a header
       libjpeg reads, a colour space and orientation it takes, the pixel
       limit (the Python path raises that one) */
    if (n < 5 || (unsigned long long)n > ULONG_MAX || memcmp(bytes, "\xff\xd8\xff", 3) != 0 ||
        bytes[n - 2] != 0xff || bytes[n - 1] != 0xd9)
        return 1;
    Job *job = &s->job;
    int orientation = 0;
    job_init(job, bytes, n);
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = job_header(job, 1);
    if (!failed) orientation = saved_orientation(&job->cinfo);
    Py_END_ALLOW_THREADS
    const int width = (int)job->cinfo.image_width, height = (int)job->cinfo.image_height;
    const J_COLOR_SPACE space = job->cinfo.jpeg_color_space;
    if (failed || !(space == JCS_GRAYSCALE || space == JCS_RGB || space == JCS_YCbCr) ||
        orientation > 1 || width <= 0 || height <= 0 ||
        (long long)width * height > max_pixels) {
        job_end(job);
        return 1;
    }
    /* the planes, against the plan's shape */
    const size_t item = p->normalised ? sizeof(float) : 1;
    size_t need;
    if (!checked_mul3((size_t)p->out_w * (size_t)p->out_h, (size_t)p->channels, item, &need) ||
        out_len < need || (uintptr_t)out % item != 0) {
        job_end(job);
        PyErr_SetString(PyExc_TypeError, "crop: the output does not fit the plan");
        return -1;
    }
    if (bits_ready(bits) < 0 || with_lock(bits->lock, "acquire") < 0) {
        failed = -1;
    } else {
        draw(p, bits->gen, width, height, &s->d);
        failed = with_lock(bits->lock, "release");
    }
    if (failed) {
        job_end(job);
        return -1;
    }
    region_of(p, width, height, &s->d, &s->r);
    if (s->r.right <= s->r.left || s->r.bottom <= s->r.top) {  /* (not met: a drawn box lies in the image) */
        job_end(job);
        PyErr_SetString(PyExc_ValueError, "the region is outside the image");
        return -1;
    }
    /* A resampled crop is decoded as RGB, which libjpeg-turbo writes 3 %
       faster than RGBX (its colour conversion and upsampling), and becomes
       RGBX in the horizontal pass; a plain cut is handed on as RGBX. */
    s->gray = p->channels == 1 || space == JCS_GRAYSCALE;
    s->bpp = s->gray ? 1 : s->r.exact ? 4 : 3;
    s->out = out;
    s->limit = (unsigned long long)max_pixels;
    return 0;
}

/* crop's second half: decode the region and resample it into the planes.
   No Python and no GIL needed; ends the job. */
static void crop_render(const CropPlan *p, Sample *s, int vector) {
    Job *job = &s->job;
    const Region *r = &s->r;
    const int bpp = s->bpp;
    unsigned char *pixels = NULL;
    JDIMENSION x = (JDIMENSION)r->left, w = (JDIMENSION)(r->right - r->left);
    const JDIMENSION rows = (JDIMENSION)(r->bottom - r->top);
    int failed = job_begin(job, r->scale, s->gray, bpp == 4, s->limit, &x, &w);
    s->done = 0;
    if (!failed && (size_t)r->bottom > job->cinfo.output_height) {
        strcpy(job->err.message, "the region is outside the image");
        failed = -3;
    }
    size_t stride = (size_t)w * (size_t)bpp, total;
    if (!failed && !(checked_mul(stride, rows, &total) && (pixels = malloc(total)) != NULL)) {
        strcpy(job->err.message, "no memory for the region");
        failed = -3;
    }
    if (!failed) failed = job_rows(job, (JDIMENSION)r->top, rows, pixels, stride);
    job_end(job);
    const float box[4] = {(float)(r->fbox[0] - x), (float)(r->fbox[1] - r->top),
                          (float)(r->fbox[2] - x), (float)(r->fbox[3] - r->top)};
    /* _tensor.resample's own checks of the box and the window, which the
       Python path runs (and raises on) */
    if (!failed && !(r->exact ? (size_t)(r->left - x) + (size_t)p->out_w <= (size_t)w &&
                                    rows == (JDIMENSION)p->out_h
                              : box[0] >= 0 && box[1] >= 0 && box[2] <= (float)w &&
                                    box[3] <= (float)rows && box[2] - box[0] >= 0 &&
                                    box[3] - box[1] >= 0)) {
        strcpy(job->err.message, "resample: bad geometry");
        failed = -3;
    }
    if (!failed && r->exact) {
        tensor->window(pixels, stride, bpp, (int)(r->left - x), 0, p->out_w, p->out_h,
                       p->channels, s->out, p->normalised ? p->k : NULL, p->mk, s->d.flip);
        s->done = 1;
    } else if (!failed) {
        s->done = tensor->resample(pixels, stride, bpp, (int)w, (int)rows, box, p->filter,
                                   p->channels, p->out_w, p->out_h, s->out,
                                   p->normalised ? p->k : NULL, p->mk, s->d.flip, vector);
    }
    free(pixels);
    s->failed = failed;
}

/* crop's value for a rendered sample (a new reference), or NULL with the
   exception set: ValueError where the decoder failed. */
static PyObject *crop_result(const Sample *s) {
    if (s->failed) return PyErr_Format(PyExc_ValueError, "%s", s->job.err.message);
    if (s->done < 0) return PyErr_NoMemory();
    if (s->done) Py_RETURN_TRUE;
    const double *b = s->d.box;
    return Py_BuildValue("(O(dddd))", s->d.flip ? Py_True : Py_False, b[0], b[1], b[2], b[3]);
}

/* One sample: crop's work on n bytes at data into out (out_len bytes).
   Returns crop's values (new references), or NULL with an exception set:
   ValueError where the decoder failed after the draws. */
static PyObject *crop_sample(const CropPlan *p, const unsigned char *bytes, size_t n, void *out,
                             size_t out_len, Bits *bits, long long max_pixels, int vector) {
    Sample s;
    const int drawn = crop_draw(p, bytes, n, out, out_len, bits, max_pixels, &s);
    if (drawn == 1) Py_RETURN_NONE;
    if (drawn < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    crop_render(p, &s, vector);
    Py_END_ALLOW_THREADS
    return crop_result(&s);
}

static PyObject *crop(PyObject *self, PyObject *args) {
    PyObject *plan_obj, *data_obj, *out_obj, *gen_obj;
    long long max_pixels;
    int vector = 2;
    if (!PyArg_ParseTuple(args, "OOOOL|i:crop", &plan_obj, &data_obj, &out_obj, &gen_obj,
                          &max_pixels, &vector))
        return NULL;
    const CropPlan *p = PyCapsule_GetPointer(plan_obj, PLAN_NAME);
    if (p == NULL) return NULL;
    Py_buffer data, out;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Bits bits = {gen_obj, NULL, NULL};
    PyObject *got = crop_sample(p, data.buf, (size_t)data.len, out.buf, (size_t)out.len, &bits,
                                max_pixels, vector);
    bits_done(&bits);
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    return got;
}
