/* float32 labels as .lst text, as numpy's str() writes each value: its
 * shortest digits that read back (the closest of them), positional or
 * scientific as numpy chooses. Part of im2rec/listing/_text.c. */
#ifndef IM2REC_FLOATS_H
#define IM2REC_FLOATS_H

/* ---- float32 as numpy's str() writes it ---------------------------------------- */

/* the shortest digits that read back as v, by printf and strtof: the
   reference, for what the quick way cannot call */
static int shortest_slow(float v, char *d, int *exp10) {
    char text[40];
    uint32_t bits;
    memcpy(&bits, &v, 4);
    const int power_of_two = (bits & 0x7FFFFF) == 0 && (bits & 0x7F800000) != 0;
    for (int p = 1; p <= 9; p++) {
        snprintf(text, sizeof text, "%.*e", p - 1, (double)v);
        if (strtof(text, NULL) != v && power_of_two) {
            /* the narrow side is below a power of two: the next decimal up may be in */
            const double up = strtod(text, NULL);
            const double step = pow(10.0, atoi(strchr(text, 'e') + 1) - (p - 1));
            snprintf(text, sizeof text, "%.*e", p - 1, up + (v > 0 ? step : -step));
        }
        if (strtof(text, NULL) == v) {
            const char *s = text + (text[0] == '-');
            int n = 0;
            for (; *s && *s != 'e'; s++)
                if (*s >= '0' && *s <= '9') d[n++] = *s;
            while (n > 1 && d[n - 1] == '0') n--;
            d[n] = 0;
            *exp10 = atoi(s + 1);
            return n;
        }
    }
    return -1;
}

/* 10^-k, the nearest doubles: no float32 lies between one and the true power */
static const double NEG10[23] = {1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10,
                                 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19,
                                 1e-20, 1e-21, 1e-22};

static const uint64_t POW10I[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                    100000000, 1000000000};

/* the shortest digits that read back as v, the closest of them to v (as
   numpy's Dragon4 picks): digits into d, their count returned, the decimal
   exponent of the first in *exp10.
   v and its neighbours' halfway points in units of a 9-digit decimal's
   last digit (double arithmetic, exact to 1e-6 of a unit there); then v
   rounded to p digits, kept when it lies between the halfway points. Whatever falls within a margin of a tie or a
   halfway point goes to printf and strtof instead (shortest_slow). */
static int shortest(float v, char *d, int *exp10) {
    const double a = fabs((double)v);
    if (!(a >= 1e-14 && a < 1e14)) return shortest_slow(v, d, exp10);
    const float af = fabsf(v);
    uint32_t bits;
    memcpy(&bits, &af, 4);
    /* the decimal exponent: from the binary one (log10(2) = 0.30103), then
       checked against the powers of ten (exact, or the nearest doubles,
       which no float32 lies between them and the true powers) */
    int e = (int)floor(((int)(bits >> 23) - 127) * 0.30102999566398120);
    for (;;) {
        const double below = e >= 0 ? POW10[e] : NEG10[-e];
        const double above = e + 1 >= 0 ? POW10[e + 1] : NEG10[-e - 1];
        if (a < below) e--;
        else if (a >= above) e++;
        else break;
    }
    /* the halfway points to the neighbours (the largest float32 is past 1e14) */
    uint32_t down = bits - 1, up = bits + 1;
    float fdown, fup;
    memcpy(&fdown, &down, 4);
    memcpy(&fup, &up, 4);
    const int j = 8 - e;
    const double scale = j >= 0 ? POW10[j] : 1.0 / POW10[-j];
    const double x = j >= 0 ? a * scale : a / POW10[-j];
    const double lo = (j >= 0 ? (a + (double)fdown) * scale : (a + (double)fdown) / POW10[-j]) / 2;
    const double hi = (j >= 0 ? (a + (double)fup) * scale : (a + (double)fup) / POW10[-j]) / 2;
    const int power_of_two = (bits & 0x7FFFFF) == 0;
    /* the fewest digits that read back, by bisection (a closer decimal, of
       more digits, reads back whenever a farther one does), from 7: most
       float32 values need 7 to 9 */
    int low = 1, high = 9, found = 0, p = 7;
    uint64_t found_dp = 0;
    while (low <= high) {
        const uint64_t step = POW10I[9 - p];
        const double q = x * NEG10[9 - p], fq = (double)(uint64_t)q; /* (q >= 0) */
        if (fabs(q - fq - 0.5) < 1e-6) return shortest_slow(v, d, exp10);
        uint64_t dp = (uint64_t)fq + (q - fq > 0.5);
        double c = (double)(dp * step);
        if (fabs(c - lo) < 1e-5 || fabs(c - hi) < 1e-5) return shortest_slow(v, d, exp10);
        int ok = c > lo && c < hi;
        if (!ok && power_of_two && c < x) {
            dp += 1;
            c = (double)(dp * step);
            if (fabs(c - hi) < 1e-5) return shortest_slow(v, d, exp10);
            ok = c < hi;
        }
        if (ok) { found = p; found_dp = dp; high = p - 1; }
        else low = p + 1;
        p = (low + high) / 2;
    }
    if (found >= 1 && found <= 9) {
        int first = e, n = found;
        uint64_t dp = found_dp;
        if (dp == POW10I[n]) { dp = 1; n = 1; first = e + 1; } /* (9.99 -> 10.0) */
        char tmp[10];
        for (int k = n - 1; k >= 0; k--) { tmp[k] = (char)('0' + dp % 10); dp /= 10; }
        while (n > 1 && tmp[n - 1] == '0') n--;
        memcpy(d, tmp, (size_t)n);
        d[n] = 0;
        *exp10 = first;
        return n;
    }
    return shortest_slow(v, d, exp10);
}

/* v as str(numpy.float32(v)) writes it, into out (at least 48 bytes):
   positional from 1e-4 to below `upto` (numpy 2: 1e6; numpy 1: 1e16),
   scientific outside */
static int float32_text(float v, double upto, char *out) {
    if (isnan(v)) return sprintf(out, "nan");
    if (isinf(v)) return sprintf(out, v > 0 ? "inf" : "-inf");
    char *o = out;
    if (signbit(v)) *o++ = '-';
    if (v == 0) return (int)(o - out) + sprintf(o, "0.0");
    char d[16];
    int e, n;
    const double a = fabs((double)v);
    if (a < 16777216.0 && a == floor(a)) { /* a whole number: its digits */
        uint32_t w = (uint32_t)a;
        char tmp[10];
        int k = 0;
        while (w) { tmp[k++] = (char)('0' + w % 10); w /= 10; }
        e = k - 1;
        n = 0;
        for (int j = k - 1; j >= 0; j--) d[n++] = tmp[j];
        while (n > 1 && d[n - 1] == '0') n--;
    } else {
        n = shortest(v, d, &e);
        if (n < 0) return -1;
    }
    if (a >= 1e-4 && a < upto) {
        if (e >= 0) {
            for (int k = 0; k <= e; k++) *o++ = k < n ? d[k] : '0';
            *o++ = '.';
            if (n > e + 1) for (int k = e + 1; k < n; k++) *o++ = d[k];
            else *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int k = 0; k < -e - 1; k++) *o++ = '0';
            for (int k = 0; k < n; k++) *o++ = d[k];
        }
        *o = 0;
        return (int)(o - out);
    }
    *o++ = d[0];
    if (n > 1) {
        *o++ = '.';
        for (int k = 1; k < n; k++) *o++ = d[k];
    }
    return (int)(o - out) + sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

/* one share of floats_text's rows, written without the GIL */
typedef struct {
    const char *values;
    const char *starts, *ends;
    Py_ssize_t lo, hi;
    double upto;
    Buf text;    /* the rows' text, one after another */
    Buf lengths; /* each row's length (Py_ssize_t) */
    int failed;  /* 1: out of memory, 2: no shortest text */
} Share;

static void *write_share(void *arg) {
    Share *sh = arg;
    char cell[64];
    for (Py_ssize_t k = sh->lo; k < sh->hi && !sh->failed; k++) {
        int64_t s, e;
        memcpy(&s, sh->starts + 8 * k, 8);
        memcpy(&e, sh->ends + 8 * k, 8);
        const size_t before = sh->text.len;
        for (int64_t j = s; j < e; j++) {
            float v;
            memcpy(&v, sh->values + 4 * j, 4);
            int w = 0;
            if (j > s) cell[w++] = '\t';
            const int n = float32_text(v, sh->upto, cell + w);
            if (n < 0) { sh->failed = 2; break; }
            if (!put(&sh->text, cell, (size_t)(w + n))) { sh->failed = 1; break; }
        }
        const Py_ssize_t len = (Py_ssize_t)(sh->text.len - before);
        if (!put(&sh->lengths, &len, sizeof len)) sh->failed = 1;
    }
    return NULL;
}

/* floats_text(values, starts, ends, upto): for each k,
   values[starts[k]:ends[k]] (float32) as text, each value as numpy's str()
   of it (positional below upto), tab-separated. Many values are written by
   two threads, each a half of the rows, without the GIL. */
static PyObject *floats_text(PyObject *self, PyObject *args) {
    Py_buffer values, starts, ends;
    double upto;
    if (!PyArg_ParseTuple(args, "y*y*y*d:floats_text", &values, &starts, &ends, &upto)) return NULL;
    PyObject *out = NULL;
    Share shares[2];
    memset(shares, 0, sizeof shares);
    if (values.len % 4 || starts.len % 8 || starts.len != ends.len) {
        PyErr_SetString(PyExc_ValueError, "floats_text: float32 values, int64 starts and ends");
        goto done;
    }
    const Py_ssize_t count = values.len / 4, rows = starts.len / 8;
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < rows; k++) {
        int64_t s, e;
        memcpy(&s, (char *)starts.buf + 8 * k, 8);
        memcpy(&e, (char *)ends.buf + 8 * k, 8);
        if (s < 0 || e < s || e > count) {
            PyErr_SetString(PyExc_ValueError, "floats_text: a row outside the values");
            goto done;
        }
        total += e - s;
    }
    const int two = total >= (1 << 16) && rows >= 2;
    for (int t = 0; t < 2; t++) {
        shares[t] = (Share){values.buf, starts.buf, ends.buf, two ? t * (rows / 2) : t * rows,
                            two ? (t ? rows : rows / 2) : rows, upto, {0}, {0}, 0};
    }
    Py_BEGIN_ALLOW_THREADS
#ifndef _WIN32
    pthread_t helper;
    const int helped = two && pthread_create(&helper, NULL, write_share, &shares[1]) == 0;
#else
    const int helped = 0;
#endif
    write_share(&shares[0]);
    if (two && !helped) write_share(&shares[1]);
#ifndef _WIN32
    if (helped) pthread_join(helper, NULL);
#endif
    Py_END_ALLOW_THREADS
    for (int t = 0; t < 2; t++) {
        if (shares[t].failed == 1) { PyErr_NoMemory(); goto done; }
        if (shares[t].failed == 2) {
            PyErr_SetString(PyExc_ValueError, "floats_text: no shortest text");
            goto done;
        }
    }
    out = PyList_New(rows);
    if (!out) goto done;
    Py_ssize_t k = 0;
    for (int t = 0; t < 2; t++) {
        const char *text = shares[t].text.p;
        const Py_ssize_t *lengths = (const Py_ssize_t *)shares[t].lengths.p;
        const Py_ssize_t n = (Py_ssize_t)(shares[t].lengths.len / sizeof(Py_ssize_t));
        for (Py_ssize_t r = 0; r < n; r++, k++) {
            PyObject *row = PyUnicode_FromStringAndSize(text ? text : "", lengths[r]);
            if (!row) { Py_CLEAR(out); goto done; }
            PyList_SET_ITEM(out, k, row);
            text += lengths[r];
        }
    }
done:
    for (int t = 0; t < 2; t++) {
        free(shares[t].text.p);
        free(shares[t].lengths.p);
    }
    PyBuffer_Release(&values);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return out;
}

#endif
