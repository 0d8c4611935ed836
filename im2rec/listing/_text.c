/* The listing's text at the size of real datasets (docs/performance.md,
 * "Detection at scale"): large JSON annotation files (COCO's, LVIS's,
 * Objects365's) read as a stream into columns, and float32 labels written
 * as .lst text. Both are what Python does, faster; neither decides
 * anything: which sections and fields to keep, and what counts as a good
 * value, come from im2rec/listing/boxes (decisions as data).
 *
 *   Reader(spec, find=None)   spec: [(section, [(field, type), ...]), ...]
 *     .feed(data, eof) -> int   bytes consumed (the rest: an unfinished
 *                               item, fed again with more bytes after it)
 *     .take() -> {section: [(field, kinds, values, lengths|None), ...]}
 *     .sections() -> {name: (how, items)}
 *     .found -> (start, end) | None   (find=(section, k): item k's bytes)
 *   floats_text(values, starts, ends, upto) -> list[str]
 *
 * The JSON is Python's json module's (NaN, Infinity and -Infinity too; a
 * key given twice: the last), read in UTF-8. A syntax error is ValueError
 * with (offset in data, what was expected). Every length is bounded: a
 * number of at most 4,096 characters, nesting at most 512 deep.
 */
#include "../checked.h"
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif
#ifdef __APPLE__
#include <xlocale.h>
#endif

#include "_json.h"
#include "_floats.h"

/* a field's value at c->p into the field's pending row */
static int read_field(Cur *c, Field *f) {
    skip_ws(c);
    if (c->p >= c->end) return more(c, c->p, "Expecting value");
    unsigned char ch = *c->p;
    int rc, kind, falsy;
    f->pending.len = 0;
    f->i = 0;
    f->f[0] = f->f[1] = f->f[2] = f->f[3] = 0.0;
    if (ch == '"') {
        if ((rc = parse_string(c, f->type == 's' ? &f->pending : NULL)) != OK) return rc;
        f->kind = K_STRING;
        return OK;
    }
    if (ch == '[' && f->type == 'q') {
        if (++c->depth > MAX_DEPTH) return fail(c, c->p, "nested deeper than 512");
        c->p++;
        int n = 0, numbers = 1;
        skip_ws(c);
        if (c->p >= c->end) return more(c, c->p, "Expecting value");
        if (*c->p == ']') c->p++;
        else for (;;) {
            skip_ws(c);
            if (c->p >= c->end) return more(c, c->p, "Expecting value");
            ch = *c->p;
            if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 'N' || ch == 'I') {
                int64_t iv;
                double fv;
                if ((rc = scalar(c, &kind, &iv, &fv)) != OK) return rc;
                if (n < 4) f->f[n] = fv;
            } else {
                if ((rc = skip_value(c, &kind, &falsy)) != OK) return rc;
                numbers = 0;
            }
            n++;
            skip_ws(c);
            if (c->p >= c->end) return more(c, c->p, "Expecting ',' delimiter");
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == ']') { c->p++; break; }
            return fail(c, c->p, "Expecting ',' delimiter");
        }
        c->depth--;
        f->kind = numbers && n == 4 ? K_QUAD : K_ARRAY;
        if (f->kind != K_QUAD) f->f[0] = f->f[1] = f->f[2] = f->f[3] = 0.0;
        return OK;
    }
    if (ch == '[' || ch == '{') {
        if ((rc = skip_value(c, &kind, &falsy)) != OK) return rc;
        f->kind = (uint8_t)kind;
        return OK;
    }
    if ((rc = scalar(c, &kind, &f->i, &f->f[0])) != OK) return rc;
    f->kind = (uint8_t)kind;
    if (f->type == 'q') f->f[0] = 0.0; /* (four numbers, or none) */
    return OK;
}

static int commit(Reader *r, Section *s) {
    for (int k = 0; k < s->nfields; k++) {
        Field *f = &s->fields[k];
        int ok = put(&f->kinds, &f->kind, 1);
        if (f->type == 'i') ok = ok && put(&f->values, &f->i, 8);
        else if (f->type == 'f') ok = ok && put(&f->values, &f->f[0], 8);
        else if (f->type == 'q') ok = ok && put(&f->values, f->f, 32);
        else if (f->type == 'b') {
            /* 0 or 1 when the value is a number (or bool) equal to it, else 2 */
            const int number = f->kind == K_INT || f->kind == K_BIGINT || f->kind == K_FLOAT
                || f->kind == K_TRUE || f->kind == K_FALSE;
            uint8_t b = number && f->f[0] == 0.0 ? 0 : number && f->f[0] == 1.0 ? 1 : 2;
            ok = ok && put(&f->values, &b, 1);
        } else {
            int64_t n = f->kind == K_STRING ? (int64_t)f->pending.len : 0;
            ok = ok && put(&f->text, f->pending.p, f->kind == K_STRING ? f->pending.len : 0)
                && put(&f->lengths, &n, 8);
        }
        if (!ok) { r->nomem = 1; return BAD; }
    }
    s->items++;
    return OK;
}

/* one item of the list being read */
static int read_item(Cur *c, Section *s) {
    int rc, kind, falsy;
    skip_ws(c);
    if (c->p >= c->end) return more(c, c->p, "Expecting value");
    if (s == NULL || s->nfields == 0) {
        if ((rc = skip_value(c, &kind, &falsy)) != OK) return rc;
        if (s) s->items++;
        return OK;
    }
    for (int k = 0; k < s->nfields; k++) {
        Field *f = &s->fields[k];
        f->kind = K_MISSING;
        f->pending.len = 0;
        f->i = 0;
        f->f[0] = f->f[1] = f->f[2] = f->f[3] = 0.0;
    }
    if (*c->p != '{') {
        if ((rc = skip_value(c, &kind, &falsy)) != OK) return rc;
        return commit(c->r, s);
    }
    c->p++;
    skip_ws(c);
    if (c->p >= c->end) return more(c, c->p, "Expecting property name");
    if (*c->p == '}') {
        c->p++;
        return commit(c->r, s);
    }
    Buf *key = &c->r->key;
    for (;;) {
        skip_ws(c);
        if (c->p >= c->end) return more(c, c->p, "Expecting property name");
        if (*c->p != '"') return fail(c, c->p, "Expecting property name enclosed in double quotes");
        key->len = 0;
        if ((rc = parse_string(c, key)) != OK) return rc;
        skip_ws(c);
        if (c->p >= c->end) return more(c, c->p, "Expecting ':' delimiter");
        if (*c->p != ':') return fail(c, c->p, "Expecting ':' delimiter");
        c->p++;
        Field *f = NULL;
        for (int k = 0; k < s->nfields; k++)
            if (s->fields[k].name_len == key->len && memcmp(s->fields[k].name, key->p, key->len) == 0)
                f = &s->fields[k];
        if (f) rc = read_field(c, f);
        else rc = skip_value(c, &kind, &falsy);
        if (rc != OK) return rc;
        skip_ws(c);
        if (c->p >= c->end) return more(c, c->p, "Expecting ',' delimiter");
        if (*c->p == ',') { c->p++; continue; }
        if (*c->p == '}') { c->p++; break; }
        return fail(c, c->p, "Expecting ',' delimiter");
    }
    return commit(c->r, s);
}

/* the states between tokens of the top-level object */
enum { T_START, T_FIRST_KEY, T_KEY, T_VALUE, T_FIRST_ITEM, T_ITEM, T_AFTER_ITEM, T_AFTER_VALUE, T_END };

static Section *section_named(Reader *r, const char *name, size_t n) {
    for (int k = 0; k < r->nsections; k++)
        if (r->sections[k].name_len == n && memcmp(r->sections[k].name, name, n) == 0)
            return &r->sections[k];
    return NULL;
}

/* as far through data as whole tokens and items go; *used: bytes read */
static int run(Reader *r, const unsigned char *data, size_t len, int eof, size_t *used) {
    Cur c = {data, data + len, data, eof, r, 0};
    int rc = OK;
    for (;;) {
        const unsigned char *mark = c.p;
        skip_ws(&c);
        if (c.p >= c.end) {
            if (!eof) { *used = c.p - data; return OK; }
            if (r->state == T_END) { *used = c.p - data; return OK; }
            return fail(&c, c.p, r->state == T_START ? "Expecting value" : "Expecting ',' delimiter");
        }
        unsigned char ch = *c.p;
        switch (r->state) {
        case T_START:
            if (ch != '{') return fail(&c, c.p, "not a JSON object");
            c.p++;
            r->state = T_FIRST_KEY;
            break;
        case T_FIRST_KEY:
        case T_KEY:
            if (ch == '}' && r->state == T_FIRST_KEY) { c.p++; r->state = T_END; break; }
            if (ch != '"') return fail(&c, c.p, "Expecting property name enclosed in double quotes");
            r->key.len = 0;
            if ((rc = parse_string(&c, &r->key)) != OK) break;
            skip_ws(&c);
            if (c.p >= c.end) { rc = more(&c, c.p, "Expecting ':' delimiter"); break; }
            if (*c.p != ':') return fail(&c, c.p, "Expecting ':' delimiter");
            c.p++;
            {
                Section *s = section_named(r, r->key.p, r->key.len);
                if (s && s->how != S_ABSENT) return fail(&c, mark, "a section given twice");
                r->current = s ? (int)(s - r->sections) : -1;
            }
            r->state = T_VALUE;
            break;
        case T_VALUE:
            if (ch == '[') {
                c.p++;
                if (r->current >= 0) r->sections[r->current].how = S_LIST;
                r->state = T_FIRST_ITEM;
            } else {
                int kind, falsy;
                if ((rc = skip_value(&c, &kind, &falsy)) != OK) break;
                if (r->current >= 0) r->sections[r->current].how = falsy ? S_FALSY : S_TRUTHY;
                r->state = T_AFTER_VALUE;
            }
            break;
        case T_FIRST_ITEM:
        case T_ITEM:
            if (ch == ']' && r->state == T_FIRST_ITEM) { c.p++; r->state = T_AFTER_VALUE; break; }
            {
                Section *s = r->current >= 0 ? &r->sections[r->current] : NULL;
                const unsigned char *start = c.p;
                const int64_t k = s ? s->items : 0;
                c.depth = 0;
                if ((rc = read_item(&c, s)) != OK) break;
                r->state = T_AFTER_ITEM;
                if (s && r->current == r->find_section && k == r->find_item) {
                    r->found = 1;
                    r->found_start = start - data;
                    r->found_end = c.p - data;
                    *used = c.p - data;
                    return OK;
                }
            }
            break;
        case T_AFTER_ITEM:
            if (ch == ',') { c.p++; r->state = T_ITEM; break; }
            if (ch == ']') { c.p++; r->state = T_AFTER_VALUE; break; }
            return fail(&c, c.p, "Expecting ',' delimiter");
        case T_AFTER_VALUE:
            if (ch == ',') { c.p++; r->state = T_KEY; break; }
            if (ch == '}') { c.p++; r->state = T_END; break; }
            return fail(&c, c.p, "Expecting ',' delimiter");
        case T_END:
            return fail(&c, c.p, "Extra data");
        }
        if (rc == MORE) { *used = mark - data; return OK; }
        if (rc == BAD) return BAD;
    }
}

static void free_sections(Reader *r) {
    if (!r->sections) return;
    for (int k = 0; k < r->nsections; k++)
        for (int j = 0; j < r->sections[k].nfields; j++) {
            Field *f = &r->sections[k].fields[j];
            free(f->kinds.p); free(f->values.p); free(f->text.p); free(f->lengths.p); free(f->pending.p);
        }
    PyMem_Free(r->sections);
    r->sections = NULL;
}

static void reader_dealloc(Reader *r) {
    free_sections(r);
    free(r->key.p);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int copy_name(PyObject *obj, char *out, size_t *n, const char *what) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!s) return 0;
    if (len >= MAX_NAME) {
        PyErr_Format(PyExc_ValueError, "%s names are at most %d bytes", what, MAX_NAME - 1);
        return 0;
    }
    memcpy(out, s, len);
    *n = (size_t)len;
    return 1;
}

static int reader_init(Reader *r, PyObject *args, PyObject *kwds) {
    static char *names[] = {"spec", "find", NULL};
    PyObject *spec, *find = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Reader", names, &spec, &find)) return -1;
    free_sections(r);
    PyObject *seq = PySequence_Fast(spec, "spec: a list of (section, fields)");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_SECTIONS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "at most 16 sections");
        return -1;
    }
    r->sections = PyMem_Calloc(n ? n : 1, sizeof(Section));
    r->nsections = 0;
    if (!r->sections) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k < n; k++) {
        Section *s = &r->sections[k];
        PyObject *name, *fields;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "UO", &name, &fields)
            || !copy_name(name, s->name, &s->name_len, "section")) { Py_DECREF(seq); return -1; }
        r->nsections = (int)k + 1;
        PyObject *fs = PySequence_Fast(fields, "fields: a list of (name, type)");
        if (!fs) { Py_DECREF(seq); return -1; }
        Py_ssize_t m = PySequence_Fast_GET_SIZE(fs);
        if (m > MAX_FIELDS) {
            Py_DECREF(fs); Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "at most 16 fields a section");
            return -1;
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            Field *f = &s->fields[j];
            PyObject *fname;
            int type;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fs, j), "UC", &fname, &type)
                || !copy_name(fname, f->name, &f->name_len, "field")) {
                Py_DECREF(fs); Py_DECREF(seq);
                return -1;
            }
            if (!strchr("ifbqs", type) || type == 0) {
                Py_DECREF(fs); Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError, "a field's type is one of i, f, b, q, s");
                return -1;
            }
            f->type = (char)type;
            s->nfields = (int)j + 1;
        }
        Py_DECREF(fs);
    }
    Py_DECREF(seq);
    r->state = T_START;
    r->current = -1;
    r->find_section = -1;
    r->find_item = -1;
    r->found = 0;
    if (find != Py_None) {
        PyObject *fname;
        long long item;
        char buf[MAX_NAME];
        size_t len;
        if (!PyArg_ParseTuple(find, "UL", &fname, &item) || !copy_name(fname, buf, &len, "section"))
            return -1;
        Section *s = section_named(r, buf, len);
        if (!s || item < 0) {
            PyErr_SetString(PyExc_ValueError, "find: a section of the spec and an item number");
            return -1;
        }
        r->find_section = (int)(s - r->sections);
        r->find_item = item;
    }
    return 0;
}

static PyObject *reader_feed(Reader *r, PyObject *args) {
    Py_buffer data;
    int eof;
    if (!PyArg_ParseTuple(args, "y*p:feed", &data, &eof)) return NULL;
    if (!r->sections) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "feed: the reader was not set up");
        return NULL;
    }
    size_t used = 0;
    r->nomem = 0;
    r->found = 0;
    int rc = run(r, data.buf, (size_t)data.len, eof, &used);
    PyBuffer_Release(&data);
    if (r->nomem) return PyErr_NoMemory();
    if (rc == BAD) {
        r->state = T_END; /* (no more reading after an error) */
        PyObject *err = Py_BuildValue("(ns)", r->error_at, r->error);
        if (err) PyErr_SetObject(PyExc_ValueError, err);
        Py_XDECREF(err);
        return NULL;
    }
    return PyLong_FromSize_t(used);
}

static PyObject *bytes_of(Buf *b) {
    PyObject *out = PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
    b->len = 0;
    if (b->cap > (1 << 20)) { /* (a big one's memory goes back) */
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
    return out;
}

static PyObject *reader_take(Reader *r, PyObject *unused) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int k = 0; k < r->nsections; k++) {
        Section *s = &r->sections[k];
        PyObject *fields = PyList_New(s->nfields);
        if (!fields) goto error;
        for (int j = 0; j < s->nfields; j++) {
            Field *f = &s->fields[j];
            PyObject *t = f->type == 's'
                ? Py_BuildValue("(s#NNN)", f->name, (Py_ssize_t)f->name_len, bytes_of(&f->kinds),
                                bytes_of(&f->text), bytes_of(&f->lengths))
                : Py_BuildValue("(s#NNO)", f->name, (Py_ssize_t)f->name_len, bytes_of(&f->kinds),
                                bytes_of(&f->values), Py_None);
            if (!t) { Py_DECREF(fields); goto error; }
            PyList_SET_ITEM(fields, j, t);
        }
        PyObject *name = PyUnicode_FromStringAndSize(s->name, (Py_ssize_t)s->name_len);
        if (!name || PyDict_SetItem(out, name, fields) < 0) {
            Py_XDECREF(name);
            Py_DECREF(fields);
            goto error;
        }
        Py_DECREF(name);
        Py_DECREF(fields);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

static PyObject *reader_sections(Reader *r, PyObject *unused) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int k = 0; k < r->nsections; k++) {
        Section *s = &r->sections[k];
        PyObject *v = Py_BuildValue("(iL)", s->how, (long long)s->items);
        PyObject *name = PyUnicode_FromStringAndSize(s->name, (Py_ssize_t)s->name_len);
        if (!v || !name || PyDict_SetItem(out, name, v) < 0) {
            Py_XDECREF(v); Py_XDECREF(name); Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
        Py_DECREF(name);
    }
    return out;
}

static PyObject *reader_found(Reader *r, void *unused) {
    if (!r->found) Py_RETURN_NONE;
    return Py_BuildValue("(nn)", r->found_start, r->found_end);
}

static PyMethodDef reader_methods[] = {
    {"feed", (PyCFunction)reader_feed, METH_VARARGS, "read data: the bytes consumed"},
    {"take", (PyCFunction)reader_take, METH_NOARGS, "the columns read since the last take"},
    {"sections", (PyCFunction)reader_sections, METH_NOARGS, "each section: how it was, items"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef reader_getset[] = {
    {"found", (getter)reader_found, NULL, "the item asked for: (start, end) in the last data", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "im2rec.listing._text.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "JSON lists of objects into columns, fed a piece at a time",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
    .tp_getset = reader_getset,
};

static PyMethodDef methods[] = {
    {"floats_text", floats_text, METH_VARARGS, "float32 rows as numpy's str() writes them"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_text", "the listing's text: JSON to columns, float32 to text", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__text(void) {
    if (PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
