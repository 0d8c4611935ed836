/* Region decoding of JPEG images with libjpeg(-turbo): only the rows and
 * columns a crop keeps, at a reduced DCT scale when that is still large
 * enough. See im2rec/imaging/jpeg.py for the contract; this file is the
 * smallest C that reaches libjpeg's calls Pillow does not expose.
 *
 *   header(data) -> (width, height, components, color_space, orientation)
 *   decode(data, denom, left, top, right, bottom, gray, max_pixels, rgbx=False)
 *       -> (pixels, left, top, width, height), or None for CMYK/YCCK
 *
 * Pixels are gray (one byte) for gray output or a gray image, else RGB, or
 * RGBX (four bytes, Pillow's own layout) when asked.
 *
 * decode returns the rows top..bottom of the image decoded at 1/denom scale,
 * and the columns libjpeg can deliver around left..right (it widens them to
 * whole iMCU columns; the returned left says where they start). The pixels
 * of rows top..bottom and columns left..right are exactly a full decode's
 * at that scale. Errors are
 * ValueError with libjpeg's message; libjpeg's errors longjmp back here, and
 * data that ends early is an error (libjpeg would pad it with grey).
 * libjpeg runs without the GIL.
 */
#include "../checked.h"
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

/* jpeg_crop_scanline and jpeg_skip_scanlines are libjpeg-turbo's (>= 1.5):
   against another libjpeg this does not build, and im2rec uses Pillow. */

/* libjpeg's "fancy" upsampling of 2x-subsampled chroma makes the outer
   columns of a cropped scanline differ from a full decode's: each output
   pixel blends its chroma sample with the next one, which a crop may have
   left out. Two more columns each side (one chroma sample) keep the asked
   ones exact; tests/imaging/test_decoding.py checks it down to one-pixel regions. */
#define WIDEN 2

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} ErrorManager;

static void on_error(j_common_ptr cinfo) {
    ErrorManager *err = (ErrorManager *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
    /* Warnings about damaged data are ignored, as Pillow ignores them;
       data that ends early is not (libjpeg would make up grey rows). */
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        on_error(cinfo);
    }
}

typedef struct {
    struct jpeg_decompress_struct cinfo;
    ErrorManager err;
    const unsigned char *data;
    size_t size;
    int created;
} Job;

static void job_init(Job *job, const unsigned char *data, size_t size) {
    memset(job, 0, sizeof(*job));
    job->data = data;
    job->size = size;
    job->cinfo.err = jpeg_std_error(&job->err.pub);
    job->err.pub.error_exit = on_error;
    job->err.pub.emit_message = on_message;
}

static void job_end(Job *job) {
    if (job->created) {
        jpeg_destroy_decompress(&job->cinfo);
        job->created = 0;
    }
}

static unsigned read16(const unsigned char *p, int big) {
    return big ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]);
}

static unsigned long read32(const unsigned char *p, int big) {
    return big ? ((unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 | p[3])
               : ((unsigned long)p[3] << 24 | (unsigned long)p[2] << 16 | (unsigned long)p[1] << 8 | p[0]);
}

/* The EXIF orientation in an APP1 marker's data, or 0 when it has none.
   Every offset is read from the file: each is checked against the bytes
   left before anything is read at it (never as "offset > n - k", which
   wraps when n < k). */
static int exif_orientation(const unsigned char *p, size_t n) {
    if (n < 6 || memcmp(p, "Exif\0\0", 6) != 0) return 0;
    p += 6;
    n -= 6;
    if (n < 8) return 0;  /* the TIFF header: byte order, 42, first IFD */
    int big;
    if (p[0] == 'M' && p[1] == 'M') big = 1;
    else if (p[0] == 'I' && p[1] == 'I') big = 0;
    else return 0;
    if (read16(p + 2, big) != 42) return 0;
    size_t at = read32(p + 4, big);
    if (!within(at, 2, n)) return 0;
    unsigned count = read16(p + at, big);
    at += 2;  /* (at <= n: checked above) */
    for (unsigned i = 0; i < count; i++, at += 12) {
        if (!within(at, 12, n)) return 0;  /* (then at + 12 <= n: no wrap) */
        if (read16(p + at, big) == 0x0112) {
            unsigned type = read16(p + at + 2, big);
            if (type == 3) return (int)read16(p + at + 8, big);  /* SHORT */
            if (type == 4) return (int)(read32(p + at + 8, big) & 0xffff);  /* LONG */
            return 0;
        }
    }
    return 0;
}

static int job_header(Job *job, int save_app1) {
    if (setjmp(job->err.jump)) return -1;
    jpeg_create_decompress(&job->cinfo);
    job->created = 1;
    jpeg_mem_src(&job->cinfo, job->data, (unsigned long)job->size);
    if (save_app1) jpeg_save_markers(&job->cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&job->cinfo, TRUE);
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    if (view->len < 2) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "not a JPEG image (too short)");
        return -1;
    }
    if ((unsigned long long)view->len > ULONG_MAX) {  /* jpeg_mem_src takes an unsigned long */
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "the JPEG data is too large");
        return -1;
    }
    return 0;
}

/* The EXIF orientation among the markers job_header saved (0: none). */
static int saved_orientation(j_decompress_ptr cinfo) {
    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m != NULL; m = m->next) {
        if (m->marker == JPEG_APP0 + 1) {
            int orientation = exif_orientation(m->data, m->data_length);
            if (orientation) return orientation;
        }
    }
    return 0;
}

static PyObject *header(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_buffer view;
    Job job;
    int failed, orientation = 0;
    if (!PyArg_ParseTuple(args, "O:header", &obj)) return NULL;
    if (get_buffer(obj, &view) < 0) return NULL;
    job_init(&job, view.buf, (size_t)view.len);
    Py_BEGIN_ALLOW_THREADS
    failed = job_header(&job, 1);
    if (!failed) orientation = saved_orientation(&job.cinfo);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (failed) {
        job_end(&job);
        return PyErr_Format(PyExc_ValueError, "%s", job.err.message);
    }
    PyObject *out = Py_BuildValue(
        "(IIiii)", job.cinfo.image_width, job.cinfo.image_height, job.cinfo.num_components,
        (int)job.cinfo.jpeg_color_space, orientation);
    job_end(&job);
    return out;
}

/* Whether jpeg_crop_scanline gives exactly a full decode's columns for
   this image at this scale (tests/imaging/test_native_safety.py checks every
   sampling combination libjpeg can write, at every scale):
   - libjpeg-turbo implements 4x2 and 2x4 chroma upsampling partly by a
     larger IDCT for that component when the output is scaled, and before
     3.0 its crop miscomputed such a component's width (libjpeg-turbo issue
     #669): wrong pixels, read from memory the upsampler never wrote;
   - with components at three horizontal resolutions (factors 1, 2 and 4 in
     one image), the columns at a crop's edge differ (seen on 2.1.5; no fix
     is known upstream).
   Which library runs is only known at build time, so such images are
   decoded full width on every version. No common encoder writes them:
   4:4:4, 4:2:2, 4:2:0, 4:4:0 and 4:1:1 are cropped. */
static int crop_is_exact(j_decompress_ptr cinfo) {
    for (int c = 0; c < cinfo->num_components; c++) {
        const jpeg_component_info *comp = &cinfo->comp_info[c];
#if JPEG_LIB_VERSION >= 70
        if (comp->DCT_h_scaled_size != cinfo->min_DCT_h_scaled_size) return 0;
#else
        if (comp->DCT_scaled_size != cinfo->min_DCT_scaled_size) return 0;
#endif
        if (comp->h_samp_factor != 1 && comp->h_samp_factor != cinfo->max_h_samp_factor) return 0;
    }
    return 1;
}

static int job_begin(Job *job, int denom, int gray, int rgbx, unsigned long long max_pixels,
                     JDIMENSION *left, JDIMENSION *width);

/* Up to the first output row: header, scale, start, column crop, skipped rows. */
static int job_start(Job *job, int denom, int gray, int rgbx, unsigned long long max_pixels,
                     JDIMENSION *left, JDIMENSION *width) {
    if (job_header(job, 0) < 0) return -1;
    return job_begin(job, denom, gray, rgbx, max_pixels, left, width);
}

/* job_start after the header is read (job_header): the scale, the start of
   decompression and the column crop. */
static int job_begin(Job *job, int denom, int gray, int rgbx, unsigned long long max_pixels,
                     JDIMENSION *left, JDIMENSION *width) {
    if (setjmp(job->err.jump)) return -1;
    /* Before libjpeg allocates for the image (a progressive one's
       coefficients take 6 bytes a pixel): the caller's pixel limit. Both
       sides are below 2**32, so their product fits in 64 bits. */
    if ((unsigned long long)job->cinfo.image_width * job->cinfo.image_height > max_pixels) {
        strcpy(job->err.message, "the image has more pixels than the limit");
        return -1;
    }
    J_COLOR_SPACE cs = job->cinfo.jpeg_color_space;
    if (cs != JCS_GRAYSCALE && cs != JCS_YCbCr && cs != JCS_RGB) {
        strcpy(job->err.message, "unsupported colour space");
        return -2;
    }
    job->cinfo.scale_num = 1;
    job->cinfo.scale_denom = (unsigned)denom;
    job->cinfo.out_color_space =
        (gray || cs == JCS_GRAYSCALE) ? JCS_GRAYSCALE : rgbx ? JCS_EXT_RGBX : JCS_RGB;
    jpeg_start_decompress(&job->cinfo);
    const JDIMENSION full = job->cinfo.output_width;
    if (*left > full || *width > full - *left) {
        strcpy(job->err.message, "the region is outside the image");
        return -3;
    }
    if (*width < full && crop_is_exact(&job->cinfo)) {
        /* (left + width <= full, checked above; full < 2**16 for a JPEG) */
        JDIMENSION right = *left + *width;
        *left = *left > WIDEN ? *left - WIDEN : 0;
        right = full - right > WIDEN ? right + WIDEN : full;
        *width = right - *left;
        jpeg_crop_scanline(&job->cinfo, left, width);
    } else {
        *left = 0;
        *width = full;
    }
    return 0;
}

static int job_rows(Job *job, JDIMENSION top, JDIMENSION rows, unsigned char *out, size_t stride) {
    if (setjmp(job->err.jump)) return -1;
    if (top > 0 && jpeg_skip_scanlines(&job->cinfo, top) != top) {
        strcpy(job->err.message, "the image ends before the region");
        return -1;
    }
    JSAMPROW pointers[16];
    JDIMENSION done = 0;
    while (done < rows) {
        JDIMENSION n = rows - done < 16 ? rows - done : 16;
        for (JDIMENSION i = 0; i < n; i++) pointers[i] = out + (size_t)(done + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(&job->cinfo, pointers, n);
        if (got == 0) {
            strcpy(job->err.message, "the image ends before the region");
            return -1;
        }
        done += got;
    }
    jpeg_abort_decompress(&job->cinfo);
    return 0;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_buffer view;
    Job job;
    int denom, gray, rgbx = 0, failed;
    Py_ssize_t left, top, right, bottom;
    long long max_pixels;
    /* "n" and "L", never "I"/"K": those wrap a negative int silently */
    if (!PyArg_ParseTuple(args, "OinnnnpL|p:decode", &obj, &denom, &left, &top, &right, &bottom,
                          &gray, &max_pixels, &rgbx))
        return NULL;
    if (!(denom == 1 || denom == 2 || denom == 4 || denom == 8)) {
        PyErr_SetString(PyExc_ValueError, "decode: the scale must be 1, 2, 4 or 8");
        return NULL;
    }
    if (!in_range(left, 0, UINT_MAX - 1, "left") || !in_range(top, 0, UINT_MAX - 1, "top") ||
        !in_range(right, left + 1, UINT_MAX, "right") ||
        !in_range(bottom, top + 1, UINT_MAX, "bottom") ||
        !in_range(max_pixels, 0, LLONG_MAX, "max_pixels"))
        return NULL;
    if (get_buffer(obj, &view) < 0) return NULL;
    job_init(&job, view.buf, (size_t)view.len);
    JDIMENSION x = (JDIMENSION)left, width = (JDIMENSION)(right - left);
    Py_BEGIN_ALLOW_THREADS
    failed = job_start(&job, denom, gray, rgbx, (unsigned long long)max_pixels, &x, &width);
    Py_END_ALLOW_THREADS
    if (!failed && (size_t)bottom > job.cinfo.output_height) {
        strcpy(job.err.message, "the region is outside the image");
        failed = -3;
    }
    PyObject *pixels = NULL;
    size_t rows = (size_t)(bottom - top), stride = 0, total = 0;
    if (!failed && !(checked_mul(width, (size_t)job.cinfo.output_components, &stride) &&
                     checked_mul(stride, rows, &total) && total <= PY_SSIZE_T_MAX)) {
        strcpy(job.err.message, "the region is too large");
        failed = -3;
    }
    if (!failed) {
        pixels = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (pixels == NULL) {
            job_end(&job);
            PyBuffer_Release(&view);
            return NULL;
        }
        unsigned char *out = (unsigned char *)PyBytes_AS_STRING(pixels);
        Py_BEGIN_ALLOW_THREADS
        failed = job_rows(&job, (JDIMENSION)top, (JDIMENSION)rows, out, stride);
        Py_END_ALLOW_THREADS
    }
    job_end(&job);
    PyBuffer_Release(&view);
    if (failed) {
        Py_XDECREF(pixels);
        if (failed == -2) Py_RETURN_NONE;  /* not ours to decode: the caller falls back */
        return PyErr_Format(PyExc_ValueError, "%s", job.err.message);
    }
    return Py_BuildValue("(NIIII)", pixels, x, (unsigned)top, width, (unsigned)rows);
}

#include "_crop.h"
#include "_batch.h"

static PyMethodDef methods[] = {
    {"crop_plan", crop_plan, METH_VARARGS, "a training crop's output side, checked, as a capsule"},
    {"sizes", sizes, METH_VARARGS, "the sizes of the payloads this decoder takes, up to the first not"},
    {"render", render, METH_VARARGS, "a batch of payloads decoded and resampled as planned"},
    {"_helper", helper_running, METH_NOARGS, "whether this process has its idle-time helper"},
    {"header", header, METH_VARARGS, "(width, height, components, colour space, EXIF orientation)"},
    {"decode", decode, METH_VARARGS, "(pixels, left, top, width, height) of a region"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jpeg", "JPEG region decoding with libjpeg-turbo", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jpeg(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
    PyModule_AddIntConstant(m, "LIBJPEG_TURBO_VERSION", LIBJPEG_TURBO_VERSION_NUMBER);
#else
    PyModule_AddIntConstant(m, "LIBJPEG_TURBO_VERSION", 0);
#endif
    return m;
}
