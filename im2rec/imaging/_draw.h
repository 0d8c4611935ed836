/* The training crop's draws (included by _crop.h, after CropPlan and
 * bitgen_t): numpy's own draws through the generator's bitgen_t, the
 * random-resized crop and mirror Augmenter._plan draws, the DCT scale and
 * the region the decoder then reads, operation for operation as the Python
 * plan (see _crop.h for the contract); and the generator with its lock.
 */
#ifndef IM2REC_DRAW_H
#define IM2REC_DRAW_H
/* numpy's Generator.integers(0, n) for 1 <= n <= 2**32 - 1 */
static uint64_t draw_below(bitgen_t *g, uint64_t n) {
    const uint32_t rng = (uint32_t)(n - 1), excl = rng + 1;
    if (rng == 0) return 0;  /* numpy draws nothing for a range of one */
    uint64_t m = (uint64_t)g->next_uint32(g->state) * excl;
    uint32_t leftover = (uint32_t)m;
    if (leftover < excl) {
        const uint32_t threshold = (UINT32_MAX - rng) % excl;
        while (leftover < threshold) {
            m = (uint64_t)g->next_uint32(g->state) * excl;
            leftover = (uint32_t)m;
        }
    }
    return m >> 32;
}

static double draw_uniform(bitgen_t *g, const double range[2]) {
    return range[0] + (range[1] - range[0]) * g->next_double(g->state);
}

/* The crop's box in the image (the Python plan's return value). */
typedef struct {
    double box[4];
    int flip;
} Drawn;

/* Augmenter._plan's draws for a width x height image: the mirror, then
   geometry.final_crop's random-resized crop on the resized size (ten tries,
   else the whole image enlarged to the output and its centre window),
   scaled back to the image. */
static void draw(const CropPlan *p, bitgen_t *g, int width, int height, Drawn *d) {
    d->flip = p->mirror || (p->rand_mirror && g->next_double(g->state) < 0.5);
    long long vw = width, vh = height;  /* geometry.resized */
    if (p->resize > 0) {
        if (height > width) vw = p->resize, vh = (long long)p->resize * height / width;
        else vw = (long long)p->resize * width / height, vh = p->resize;
    }
    double box[4];
    int cropped = 0;
    for (int attempt = 0; attempt < 10 && !cropped; attempt++) {
        double target = (double)(vw * vh) * draw_uniform(g, p->area);
        double aspect = draw_uniform(g, p->ratio);
        long long h = (long long)floor(sqrt(target / aspect) + 0.5);
        long long w = (long long)floor(sqrt(target * aspect) + 0.5);
        if (g->next_double(g->state) > 0.5) {
            long long t = w;
            w = h;
            h = t;
        }
        if (0 < h && h <= vh && 0 < w && w <= vw) {
            long long y = (long long)draw_below(g, (uint64_t)(vh - h + 1));
            long long x = (long long)draw_below(g, (uint64_t)(vw - w + 1));
            box[0] = (double)x, box[1] = (double)y, box[2] = (double)(x + w), box[3] = (double)(y + h);
            cropped = 1;
        }
    }
    if (!cropped) {  /* geometry.enlarged (float32, truncated) and centre_window */
        long long sw = vw, sh = vh;
        if (sh < p->out_h) sw = (long long)((float)p->out_h / (float)sh * (float)sw), sh = p->out_h;
        if (sw < p->out_w) sh = (long long)((float)p->out_w / (float)sw * (float)sh), sw = p->out_w;
        long long x = (sw - p->out_w) / 2, y = (sh - p->out_h) / 2;
        double ex = (double)sw / (double)vw, ey = (double)sh / (double)vh;
        box[0] = (double)x / ex, box[1] = (double)y / ey;
        box[2] = (double)(x + p->out_w) / ex, box[3] = (double)(y + p->out_h) / ey;
    }
    double sx = (double)vw / (double)width, sy = (double)vh / (double)height;
    d->box[0] = box[0] / sx, d->box[1] = box[1] / sy, d->box[2] = box[2] / sx, d->box[3] = box[3] / sy;
}

/* jpeg.py's _draft_scale: the DCT scale Pillow's draft picks for the crop */
static int draft_scale(int width, int height, const double box[4], int out_w, int out_h) {
    double cw = box[2] - box[0], ch = box[3] - box[1];
    if (out_w * 2.0 > cw || out_h * 2.0 > ch) return 1;
    double nw = ceil((double)((long long)width * out_w) / cw);
    double nh = ceil((double)((long long)height * out_h) / ch);
    if (!(nw >= 1 && nh >= 1)) return 1;
    long long fw = width / (long long)nw, fh = height / (long long)nh, fits = fw < fh ? fw : fh;
    return fits >= 8 ? 8 : fits >= 4 ? 4 : fits >= 2 ? 2 : 1;
}

/* What the sample's decode and resample need, from the drawn box (jpeg.py
   window): the scale, the region, the box in it, a plain cut or not. */
typedef struct {
    int scale, exact;
    long long left, top, right, bottom;
    double fbox[4];
} Region;

static void region_of(const CropPlan *p, int width, int height, const Drawn *d, Region *r) {
    const double *box = d->box;
    r->scale = draft_scale(width, height, box, p->out_w, p->out_h);
    long long sw = (width + r->scale - 1) / r->scale, sh = (height + r->scale - 1) / r->scale;
    double fx = (double)sw / (double)width, fy = (double)sh / (double)height;
    r->fbox[0] = box[0] * fx, r->fbox[1] = box[1] * fy, r->fbox[2] = box[2] * fx, r->fbox[3] = box[3] * fy;
    long long cut[4];
    for (int i = 0; i < 4; i++) cut[i] = (long long)box[i];  /* Python's int(): toward zero */
    r->exact = r->scale == 1 && (double)cut[0] == box[0] && (double)cut[1] == box[1] &&
               (double)cut[2] == box[2] && (double)cut[3] == box[3] &&
               cut[2] - cut[0] == p->out_w && cut[3] - cut[1] == p->out_h;
    if (r->exact) {
        r->left = cut[0], r->top = cut[1], r->right = cut[2], r->bottom = cut[3];
        return;
    }
    const double reach = p->filter == 1 ? 3.0 : p->filter == 3 ? 2.0 : 1.0;  /* jpeg._SUPPORT */
    double gx = (r->fbox[2] - r->fbox[0]) / p->out_w, gy = (r->fbox[3] - r->fbox[1]) / p->out_h;
    long long mx = (long long)ceil(reach * (gx > 1.0 ? gx : 1.0)) + 1;
    long long my = (long long)ceil(reach * (gy > 1.0 ? gy : 1.0)) + 1;
    long long left = (long long)floor(r->fbox[0]) - mx, top = (long long)floor(r->fbox[1]) - my;
    long long right = (long long)ceil(r->fbox[2]) + mx, bottom = (long long)ceil(r->fbox[3]) + my;
    r->left = left > 0 ? left : 0, r->top = top > 0 ? top : 0;
    r->right = right < sw ? right : sw, r->bottom = bottom < sh ? bottom : sh;
}

/* The generator's lock held around the draws, as numpy's own methods hold it. */
static int with_lock(PyObject *lock, const char *how) {
    PyObject *got = PyObject_CallMethod(lock, how, NULL);
    Py_XDECREF(got);
    return got == NULL ? -1 : 0;
}

/* The generator behind a crop's draws, looked up at its first draw (so
   that data crop declines costs no lookup) and kept for a batch. */
typedef struct {
    PyObject *owner;  /* the BitGenerator */
    bitgen_t *gen;
    PyObject *lock;
} Bits;

static int bits_ready(Bits *b) {
    if (b->gen != NULL) return 0;
    PyObject *capsule = PyObject_GetAttrString(b->owner, "capsule");
    b->lock = capsule ? PyObject_GetAttrString(b->owner, "lock") : NULL;
    if (b->lock != NULL) b->gen = PyCapsule_GetPointer(capsule, "BitGenerator");
    Py_XDECREF(capsule);  /* (the BitGenerator keeps it, and the caller keeps that) */
    return b->gen == NULL ? -1 : 0;
}

static void bits_done(Bits *b) {
    Py_CLEAR(b->lock);
    b->gen = NULL;
}

#endif
