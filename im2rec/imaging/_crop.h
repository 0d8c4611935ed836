/* A training crop rendered from a plan made in Python (included by
 * _jpeg.c): decode the JPEG region the crop needs and resample it into the
 * output planes through _tensor's C table (_tensor_api.h).
 *
 *   crop_plan(channels, out_w, out_h, filter, k, mk) -> plan
 *
 * The plan holds the output side only (its shape, filter and normaliser).
 * Every decision about a sample is made in Python and arrives as data
 * (docs/format.md's training path; im2rec/training/augment/fused.py): the
 * crop box and the mirror are drawn by augment/geometry.py, and the DCT
 * scale, the region and the box at that scale are imaging/jpeg.py's
 * regions(). This file checks that data against the image and the output
 * and executes it; it draws nothing and computes no geometry of its own.
 */
#include "_tensor_api.h"
#include <math.h>
#include <stdint.h>

#define PLAN_NAME "im2rec.imaging._jpeg.crop_plan"

typedef struct {
    int channels, out_w, out_h, filter, normalised;
    float k[3], mk[3];
} CropPlan;

static const tensor_api *tensor;  /* _tensor's table, taken at the first crop_plan */

static void plan_free(PyObject *capsule) {
    PyMem_Free(PyCapsule_GetPointer(capsule, PLAN_NAME));
}

static PyObject *crop_plan(PyObject *self, PyObject *args) {
    CropPlan p;
    PyObject *k_obj, *mk_obj;
    if (!PyArg_ParseTuple(args, "iiiiOO:crop_plan", &p.channels, &p.out_w, &p.out_h, &p.filter,
                          &k_obj, &mk_obj))
        return NULL;
    /* a bad plan must not reach the resampler */
    if (!(p.channels == 1 || p.channels == 3) || p.out_w <= 0 || p.out_h <= 0 ||
        p.out_w > 1 << 16 || p.out_h > 1 << 16 ||
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

/* A sample's decisions, one row of the regions array (float64): the mirror,
   the DCT scale, a plain cut or not, the region at that scale and the box
   in it (imaging/jpeg.py Regions). */
enum { R_FLIP, R_SCALE, R_EXACT, R_LEFT, R_TOP, R_RIGHT, R_BOTTOM, R_BOX, REGION_COLUMNS = R_BOX + 4 };

typedef struct {
    int flip, scale, exact;
    long long left, top, right, bottom;
    double fbox[4];
} Region;

/* A row as a Region, checked as far as it can be without the image:
   whole numbers where they must be, a scale libjpeg takes, a region of at
   least one pixel below 2**31, a finite box. 0, or -1 (bad data). */
static int region_from(const double *row, Region *r) {
    for (int i = 0; i < REGION_COLUMNS; i++)
        if (!isfinite(row[i])) return -1;
    for (int i = R_FLIP; i <= R_BOTTOM; i++)
        if (row[i] != floor(row[i]) || row[i] < 0 || row[i] > 2147483647.0) return -1;
    r->flip = row[R_FLIP] != 0, r->scale = (int)row[R_SCALE], r->exact = row[R_EXACT] != 0;
    r->left = (long long)row[R_LEFT], r->top = (long long)row[R_TOP];
    r->right = (long long)row[R_RIGHT], r->bottom = (long long)row[R_BOTTOM];
    for (int i = 0; i < 4; i++) r->fbox[i] = row[R_BOX + i];
    if (!(r->scale == 1 || r->scale == 2 || r->scale == 4 || r->scale == 8) ||
        r->right <= r->left || r->bottom <= r->top)
        return -1;
    return 0;
}

/* One sample between its header and its planes. */
typedef struct {
    Job job;  /* the header read; decoding not started */
    Region r;
    int gray, bpp;
    unsigned long long limit;  /* the pixel limit, checked again by job_begin */
    void *out;
    /* the outcome: failed (libjpeg's or the data's, message in
       job.err.message), done (1 planes written, 0 left to Pillow, -1 no
       memory) */
    int failed, done;
} Sample;

/* Whether this decoder takes the n bytes at bytes as a training sample:
   jpeg.window's own tests, in its order (a JPEG ending in EOI, a header
   libjpeg reads, a colour space and orientation it takes, the pixel
   limit). 1 with the header read into job (and *width, *height set), 0
   with the job ended. Needs no GIL. */
static int sample_header(Job *job, const unsigned char *bytes, size_t n, long long max_pixels,
                         int *width, int *height) {
    if (n < 5 || (unsigned long long)n > ULONG_MAX || memcmp(bytes, "\xff\xd8\xff", 3) != 0 ||
        bytes[n - 2] != 0xff || bytes[n - 1] != 0xd9)
        return 0;
    job_init(job, bytes, n);
    int orientation = 0;
    const int failed = job_header(job, 1);
    if (!failed) orientation = saved_orientation(&job->cinfo);
    *width = (int)job->cinfo.image_width, *height = (int)job->cinfo.image_height;
    const J_COLOR_SPACE space = job->cinfo.jpeg_color_space;
    if (failed || !(space == JCS_GRAYSCALE || space == JCS_RGB || space == JCS_YCbCr) ||
        orientation > 1 || *width <= 0 || *height <= 0 ||
        (long long)*width * *height > max_pixels) {
        job_end(job);
        return 0;
    }
    return 1;
}

/* Decode the sample's region and resample it into its planes. No Python
   and no GIL needed; ends the job. */
static void sample_render(const CropPlan *p, Sample *s, int vector) {
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
                       p->channels, s->out, p->normalised ? p->k : NULL, p->mk, r->flip);
        s->done = 1;
    } else if (!failed) {
        s->done = tensor->resample(pixels, stride, bpp, (int)w, (int)rows, box, p->filter,
                                   p->channels, p->out_w, p->out_h, s->out,
                                   p->normalised ? p->k : NULL, p->mk, r->flip, vector);
    }
    free(pixels);
    s->failed = failed;
}
