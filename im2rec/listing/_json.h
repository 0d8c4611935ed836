/* The JSON tokens of im2rec/listing/_text.c's Reader: strings (UTF-8,
 * escapes), numbers (exact where Python's are), literals, and whole
 * values read past; the buffers and the reader's state they fill. Each
 * returns OK, MORE (the data ran out: fed again with more) or BAD (a
 * syntax error, recorded in the reader). */
#ifndef IM2REC_JSON_H
#define IM2REC_JSON_H

/* value kinds, as coco.py reads them */
enum { K_MISSING, K_NULL, K_FALSE, K_TRUE, K_INT, K_BIGINT, K_FLOAT, K_STRING, K_ARRAY, K_OBJECT, K_QUAD };
/* how a section's value was: absent, a list, another falsy value, another value */
enum { S_ABSENT, S_LIST, S_FALSY, S_TRUTHY };
enum { OK, MORE, BAD };
#define MAX_DEPTH 512
#define MAX_NUMBER 4096
#define MAX_NAME 64
#define MAX_FIELDS 16
#define MAX_SECTIONS 16

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* the "C" locale, for strtod_l: numbers read the same whatever the process's */
static locale_t c_locale(void) {
    static locale_t c = (locale_t)0;
    if (!c) c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return c;
}

typedef struct { char *p; size_t len, cap; } Buf;

static int put(Buf *b, const void *src, size_t n) {
    size_t need;
    if (!checked_add(b->len, n, &need)) return 0;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) {
            if (!checked_mul(cap, 2, &cap)) return 0;
        }
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len = need;
    return 1;
}

typedef struct {
    char name[MAX_NAME];
    size_t name_len;
    char type; /* 'i' int64, 'f' float64, 'b' 0/1/other, 'q' four float64, 's' UTF-8 text */
    Buf kinds, values, text, lengths;
    /* the item being read: committed at its end */
    uint8_t kind;
    int64_t i;
    double f[4];
    Buf pending;
} Field;

typedef struct {
    char name[MAX_NAME];
    size_t name_len;
    int nfields;
    Field fields[MAX_FIELDS];
    int how;
    int64_t items;
} Section;

typedef struct {
    PyObject_HEAD
    int nsections;
    Section *sections;
    int state;
    int current; /* the section whose list is being read, or -1 */
    int find_section;
    int64_t find_item;
    Py_ssize_t found_start, found_end;
    int found;
    /* a syntax error: where and what */
    Py_ssize_t error_at;
    const char *error;
    Buf key;
    int nomem;
} Reader;

typedef struct {
    const unsigned char *p, *end, *start;
    int eof;
    Reader *r;
    int depth;
} Cur;

static int fail(Cur *c, const unsigned char *at, const char *what) {
    c->r->error_at = at - c->start;
    c->r->error = what;
    return BAD;
}

static int more(Cur *c, const unsigned char *at, const char *what) {
    return c->eof ? fail(c, at, what) : MORE;
}

static void skip_ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* code point cp as UTF-8 (a lone surrogate as its three bytes, as
   Python's "surrogatepass" writes it) */
static int put_utf8(Buf *b, uint32_t cp) {
    unsigned char s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { s[0] = 0xC0 | (cp >> 6); s[1] = 0x80 | (cp & 0x3F); n = 2; }
    else if (cp < 0x10000) {
        s[0] = 0xE0 | (cp >> 12); s[1] = 0x80 | ((cp >> 6) & 0x3F); s[2] = 0x80 | (cp & 0x3F); n = 3;
    } else {
        s[0] = 0xF0 | (cp >> 18); s[1] = 0x80 | ((cp >> 12) & 0x3F);
        s[2] = 0x80 | ((cp >> 6) & 0x3F); s[3] = 0x80 | (cp & 0x3F); n = 4;
    }
    return put(b, s, n);
}

/* the length of the UTF-8 sequence at p (strict, as Python decodes), 0
   when it is not one, -1 when it runs past end */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c0 = p[0];
    int n;
    uint32_t lo = 0x80, hi = 0xBF;
    if (c0 >= 0xC2 && c0 <= 0xDF) n = 2;
    else if (c0 >= 0xE0 && c0 <= 0xEF) {
        n = 3;
        if (c0 == 0xE0) lo = 0xA0;
        if (c0 == 0xED) hi = 0x9F; /* no encoded surrogates */
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        n = 4;
        if (c0 == 0xF0) lo = 0x90;
        if (c0 == 0xF4) hi = 0x8F;
    } else return 0;
    for (int k = 1; k < n; k++) {
        if (p + k >= end) return -1;
        uint32_t ck = p[k];
        if (ck < (k == 1 ? lo : 0x80) || ck > (k == 1 ? hi : 0xBF)) return 0;
    }
    return n;
}

static int read_hex4(const unsigned char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p[k]);
        if (h < 0) return 0;
        v = v * 16 + (uint32_t)h;
    }
    *out = v;
    return 1;
}

/* a string at c->p ('"'), its text appended to out (when not NULL) */
static int parse_string(Cur *c, Buf *out) {
    const unsigned char *p = c->p + 1;
    for (;;) {
        const unsigned char *run = p;
        while (p < c->end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
        if (out && !put(out, run, p - run)) { c->r->nomem = 1; return BAD; }
        if (p >= c->end) return more(c, p, "Unterminated string");
        unsigned char ch = *p;
        if (ch == '"') { c->p = p + 1; return OK; }
        if (ch < 0x20) return fail(c, p, "Invalid control character in a string");
        if (ch >= 0x80) {
            int n = utf8_len(p, c->end);
            if (n < 0) return more(c, p, "not UTF-8 text");
            if (n == 0) return fail(c, p, "not UTF-8 text");
            if (out && !put(out, p, n)) { c->r->nomem = 1; return BAD; }
            p += n;
            continue;
        }
        /* an escape */
        if (p + 1 >= c->end) return more(c, p, "Unterminated string");
        unsigned char e = p[1];
        const char *simple = NULL;
        switch (e) {
            case '"': simple = "\""; break;
            case '\\': simple = "\\"; break;
            case '/': simple = "/"; break;
            case 'b': simple = "\b"; break;
            case 'f': simple = "\f"; break;
            case 'n': simple = "\n"; break;
            case 'r': simple = "\r"; break;
            case 't': simple = "\t"; break;
        }
        if (simple) {
            if (out && !put(out, simple, 1)) { c->r->nomem = 1; return BAD; }
            p += 2;
            continue;
        }
        if (e != 'u') return fail(c, p, "Invalid \\escape");
        if (p + 6 > c->end) return more(c, p, "Unterminated string");
        uint32_t cp;
        if (!read_hex4(p + 2, &cp)) return fail(c, p, "Invalid \\uXXXX escape");
        p += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a pair when a low surrogate follows */
            if (p + 1 < c->end && p[0] == '\\' && p[1] == 'u') {
                if (p + 6 > c->end) return more(c, p, "Unterminated string");
                uint32_t lo;
                if (!read_hex4(p + 2, &lo)) return fail(c, p, "Invalid \\uXXXX escape");
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            } else if (p + 1 >= c->end && !c->eof) {
                return MORE;
            }
        }
        if (out && !put_utf8(out, cp)) { c->r->nomem = 1; return BAD; }
    }
}

/* a number at c->p: its kind (K_INT, K_BIGINT, K_FLOAT) and, when
   value is set, its value (else *fv is 0 for zero, 1 for any other) */
static int parse_number(Cur *c, int *kind, int64_t *iv, double *fv, int value) {
    const unsigned char *p = c->p, *s = c->p;
    int is_float = 0, nonzero = 0, exponent = 0;
    if (p < c->end && *p == '-') p++;
    if (p >= c->end) return more(c, s, "Expecting value");
    if (*p == 'I') { /* -Infinity */
        if (c->end - p < 8) {
            if (memcmp(p, "Infinity", c->end - p) == 0) return more(c, s, "Expecting value");
            return fail(c, s, "Expecting value");
        }
        if (memcmp(p, "Infinity", 8) != 0) return fail(c, s, "Expecting value");
        c->p = p + 8;
        *kind = K_FLOAT;
        *iv = 0;
        *fv = -INFINITY;
        return OK;
    }
    const int negative = s[0] == '-';
    uint64_t whole = 0, mantissa = 0;
    int overflow = 0, digits = 0, scale = 0; /* value = mantissa x 10^scale while digits <= 19 */
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') {
        while (p < c->end && *p >= '0' && *p <= '9') {
            const uint64_t digit = (uint64_t)(*p - '0');
            if (++digits <= 19) whole = whole * 10 + digit; /* (19 digits never overflow) */
            else if (!overflow && whole <= (UINT64_MAX - digit) / 10 && digits == 20)
                whole = whole * 10 + digit;
            else overflow = 1;
            if (digits > 19) scale++;
            p++;
        }
        nonzero = 1;
    } else return fail(c, s, "Expecting value");
    mantissa = whole;
    if (p < c->end && *p == '.' && p + 1 < c->end && p[1] >= '0' && p[1] <= '9') {
        is_float = 1;
        p++;
        while (p < c->end && *p >= '0' && *p <= '9') {
            nonzero |= *p != '0';
            if ((mantissa || *p != '0') && digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits++;
                scale--;
            } else if (!mantissa) {
                scale--; /* (leading zeros of the fraction) */
            } else {
                digits++; /* (past 19 digits: not exact, read by strtod) */
            }
            p++;
        }
    } else if (p + 1 >= c->end && p < c->end && *p == '.' && !c->eof) return MORE;
    int exp10 = 0;
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        const unsigned char *q = p + 1;
        int sign = 1;
        if (q < c->end && (*q == '+' || *q == '-')) sign = *q++ == '-' ? -1 : 1;
        if (q < c->end && *q >= '0' && *q <= '9') {
            is_float = exponent = 1;
            p = q;
            while (p < c->end && *p >= '0' && *p <= '9') {
                if (exp10 < 100000) exp10 = exp10 * 10 + (*p - '0');
                p++;
            }
            exp10 *= sign;
        } else if (q >= c->end && !c->eof) return MORE;
    }
    if (p >= c->end && !c->eof) return MORE; /* (more digits may follow) */
    const size_t n = p - s;
    if (n > MAX_NUMBER) return fail(c, s, "a number of more than 4,096 characters");
    c->p = p;
    *iv = 0;
    if (!is_float && !overflow && whole <= (uint64_t)INT64_MAX + negative) {
        *kind = K_INT;
        *iv = negative ? (int64_t)(0 - whole) : (int64_t)whole;
        *fv = (double)*iv;
        return OK;
    }
    *kind = is_float ? K_FLOAT : K_BIGINT;
    if (!value && !(exponent && nonzero)) { /* (1e-400 is 0.0: a value to read) */
        *fv = nonzero;
        return OK;
    }
    /* Clinger's exact case: a mantissa below 2^53 and a power of ten a
       double holds exactly make one correctly rounded operation */
    const int e = scale + exp10;
    if (digits <= 19 && mantissa < (1ULL << 53) && e >= -22 && e <= 22) {
        double x = (double)mantissa;
        x = e >= 0 ? x * POW10[e] : x / POW10[-e];
        *fv = negative ? -x : x;
        return OK;
    }
    /* else C's strtod in the "C" locale: correctly rounded, inf past the
       largest double (as float() of a huge int is not: it raises) */
    char text[MAX_NUMBER + 1];
    memcpy(text, s, n);
    text[n] = 0;
    const locale_t c_numbers = c_locale();
    *fv = c_numbers ? strtod_l(text, NULL, c_numbers) : strtod(text, NULL);
    return OK;
}

static int literal(Cur *c, const char *word, size_t n) {
    size_t have = c->end - c->p;
    if (have < n) {
        if (memcmp(c->p, word, have) == 0) return more(c, c->p, "Expecting value");
        return fail(c, c->p, "Expecting value");
    }
    if (memcmp(c->p, word, n) != 0) return fail(c, c->p, "Expecting value");
    c->p += n;
    return OK;
}

/* a whole value at c->p, read past; *kind what it was, *falsy whether
   Python takes it for false */
static int skip_value(Cur *c, int *kind, int *falsy) {
    skip_ws(c);
    if (c->p >= c->end) return more(c, c->p, "Expecting value");
    unsigned char ch = *c->p;
    int k = K_NULL, f = 0, rc;
    if (ch == '"') {
        const unsigned char *s = c->p;
        if ((rc = parse_string(c, NULL)) != OK) return rc;
        k = K_STRING;
        f = c->p - s == 2;
    } else if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        if (++c->depth > MAX_DEPTH) return fail(c, c->p, "nested deeper than 512");
        c->p++;
        skip_ws(c);
        if (c->p >= c->end) return more(c, c->p, "Expecting value");
        int n = 0;
        if (*c->p == close) c->p++;
        else for (;;) {
            if (ch == '{') {
                skip_ws(c);
                if (c->p >= c->end) return more(c, c->p, "Expecting property name");
                if (*c->p != '"') return fail(c, c->p, "Expecting property name enclosed in double quotes");
                if ((rc = parse_string(c, NULL)) != OK) return rc;
                skip_ws(c);
                if (c->p >= c->end) return more(c, c->p, "Expecting ':' delimiter");
                if (*c->p != ':') return fail(c, c->p, "Expecting ':' delimiter");
                c->p++;
            }
            int ik, ifalsy;
            if ((rc = skip_value(c, &ik, &ifalsy)) != OK) return rc;
            n++;
            skip_ws(c);
            if (c->p >= c->end) return more(c, c->p, "Expecting ',' delimiter");
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == close) { c->p++; break; }
            return fail(c, c->p, "Expecting ',' delimiter");
        }
        c->depth--;
        k = ch == '{' ? K_OBJECT : K_ARRAY;
        f = n == 0;
    } else if (ch == 't') {
        if ((rc = literal(c, "true", 4)) != OK) return rc;
        k = K_TRUE;
    } else if (ch == 'f') {
        if ((rc = literal(c, "false", 5)) != OK) return rc;
        k = K_FALSE;
        f = 1;
    } else if (ch == 'n') {
        if ((rc = literal(c, "null", 4)) != OK) return rc;
        k = K_NULL;
        f = 1;
    } else if (ch == 'N') {
        if ((rc = literal(c, "NaN", 3)) != OK) return rc;
        k = K_FLOAT;
    } else if (ch == 'I') {
        if ((rc = literal(c, "Infinity", 8)) != OK) return rc;
        k = K_FLOAT;
    } else {
        int64_t iv;
        double fv;
        if ((rc = parse_number(c, &k, &iv, &fv, 0)) != OK) return rc;
        f = fv == 0.0;
    }
    *kind = k;
    *falsy = f;
    return OK;
}

/* a scalar value (not an array, object or string) at c->p: kind and value */
static int scalar(Cur *c, int *kind, int64_t *iv, double *fv) {
    unsigned char ch = *c->p;
    int rc, falsy;
    *iv = 0;
    *fv = 0.0;
    if (ch == 'N' || ch == 'I') {
        if ((rc = skip_value(c, kind, &falsy)) != OK) return rc;
        *fv = ch == 'N' ? NAN : INFINITY;
        return OK;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return parse_number(c, kind, iv, fv, 1);
    if ((rc = skip_value(c, kind, &falsy)) != OK) return rc;
    if (*kind == K_TRUE) *fv = 1.0;
    return OK;
}

#endif
