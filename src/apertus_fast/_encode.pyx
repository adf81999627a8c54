# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""JSON lines for the command line's output, written as UTF-8 in one pass.

``json_line(obj)`` returns exactly ``(json.dumps(obj, ensure_ascii=False) + "\\n")
.encode("utf-8")`` for the plain values the commands write (exact ``dict`` with ``str``
keys, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None``), or ``None``
for anything else: another type or a subclass, a key that is not a ``str``, a string
with a lone surrogate (which has no UTF-8), nesting deeper than ``MAX_DEPTH`` (a cycle
ends there too). The caller then encodes the value with the json module, which owns
every rule for those cases (``_io.json_line``), so this module only has to be right on
the usual values.

Why: the standard encoder escapes a string character by character through the
generic ``PyUnicode_READ`` (about 180 MB/s on the corpus, whose texts are mostly 2- and
4-byte strings) and then builds a ``str`` that is encoded to UTF-8 again. This writes
the UTF-8 bytes directly, copying runs of characters that need no escape, and was
the largest cost of ``apertus-fast render`` and ``parse`` (docs/cli.md, "Speed").

The escapes are those of ``json.dumps(ensure_ascii=False)``: ``\\"``, ``\\\\``, ``\\b``,
``\\f``, ``\\n``, ``\\r``, ``\\t``, and ``\\u00XX`` (lower-case hex) for the other
characters below U+0020; everything else is written as it is. Floats are written as
``float.__repr__`` writes them (``NaN``, ``Infinity``, ``-Infinity`` for the others),
ints as ``int.__repr__`` (with its limit on digits, whose ``ValueError`` propagates as
json's does), separators ``", "`` and ``": "``, keys in insertion order.
``tests/test_encode.py`` compares the two on generated values.
"""

cdef extern from *:
    """
    #include <string.h>
    #include <math.h>

    #define AE_MAX_DEPTH 100
    #define AE_SMALL 4096

    typedef struct {
        char *p;
        Py_ssize_t n;
        Py_ssize_t cap;
        char small[AE_SMALL];
    } ae_buf;

    /* Room for `extra` more bytes. -1 with MemoryError set on failure. */
    static int ae_reserve(ae_buf *b, Py_ssize_t extra) {
        if (extra <= b->cap - b->n) return 0;
        if (extra > PY_SSIZE_T_MAX / 2 - b->n) { PyErr_NoMemory(); return -1; }
        Py_ssize_t cap = b->cap * 2;
        if (cap < b->n + extra) cap = b->n + extra;
        char *p;
        if (b->p == b->small) {
            p = (char *)PyMem_Malloc((size_t)cap);
            if (p != NULL) memcpy(p, b->small, (size_t)b->n);
        } else {
            p = (char *)PyMem_Realloc(b->p, (size_t)cap);
        }
        if (p == NULL) { PyErr_NoMemory(); return -1; }
        b->p = p;
        b->cap = cap;
        return 0;
    }

    static void ae_release(ae_buf *b) {
        if (b->p != b->small) PyMem_Free(b->p);
        b->p = b->small;
        b->n = 0;
        b->cap = AE_SMALL;
    }

    static int ae_lit(ae_buf *b, const char *s, Py_ssize_t n) {
        if (ae_reserve(b, n) < 0) return -1;
        memcpy(b->p + b->n, s, (size_t)n);
        b->n += n;
        return 0;
    }

    static const char ae_hex[] = "0123456789abcdef";

    /* The escape of an ASCII character that json.dumps escapes ('"', '\\\\', < 0x20). */
    static CYTHON_INLINE char *ae_escape(char *o, Py_UCS4 c) {
        *o++ = '\\\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\\\': *o++ = '\\\\'; break;
        case '\\b': *o++ = 'b'; break;
        case '\\f': *o++ = 'f'; break;
        case '\\n': *o++ = 'n'; break;
        case '\\r': *o++ = 'r'; break;
        case '\\t': *o++ = 't'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = ae_hex[(c >> 4) & 0xf];
            *o++ = ae_hex[c & 0xf];
        }
        return o;
    }

    /* 1 for the ASCII characters that pass as they are. */
    static CYTHON_INLINE int ae_plain(Py_UCS4 c) {
        return c >= 0x20 && c < 0x80 && c != '"' && c != '\\\\';
    }

    /* The extra bytes of character c beyond one: its UTF-8 length - 1, or the length of
       its escape - 1; -1 for a surrogate (no UTF-8). */
    static CYTHON_INLINE Py_ssize_t ae_extra(Py_UCS4 c) {
        if (c < 0x80) {
            if (c >= 0x20) return (c == '"' || c == '\\\\');
            return (c == '\\b' || c == '\\f' || c == '\\n' || c == '\\r' || c == '\\t') ? 1 : 5;
        }
        if (c < 0x800) return 1;
        if (c < 0x10000) return (c >= 0xD800 && c <= 0xDFFF) ? -1 : 2;
        return 3;
    }

    /* s (an exact str) as a JSON string in UTF-8. 1: it holds a lone surrogate
       (nothing written); -1: error set. A first pass counts the bytes (so the buffer
       grows to the exact size: a reservation of the worst case, 6 bytes a character,
       made glibc hand large strings to mmap and back, a page fault per page), a
       second writes them. */
    static int ae_str(ae_buf *b, PyObject *s) {
    #if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(s) < 0) return -1;
    #endif
        Py_ssize_t len = PyUnicode_GET_LENGTH(s), i = 0, j, size = len + 2, x;
        int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *d = (const Py_UCS1 *)data;
            for (i = 0; i < len; i++) size += !ae_plain(d[i]) ? ae_extra(d[i]) : 0;
        } else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *d = (const Py_UCS2 *)data;
            for (i = 0; i < len; i++) {
                if (ae_plain(d[i])) continue;
                if ((x = ae_extra(d[i])) < 0) return 1;
                size += x;
            }
        } else {
            const Py_UCS4 *d = (const Py_UCS4 *)data;
            for (i = 0; i < len; i++) {
                if (ae_plain(d[i])) continue;
                if ((x = ae_extra(d[i])) < 0) return 1;
                size += x;
            }
        }
        if (ae_reserve(b, size) < 0) return -1;
        char *o = b->p + b->n;
        *o++ = '"';
        i = 0;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *d = (const Py_UCS1 *)data;
            while (i < len) {
                j = i;
                while (j < len && ae_plain(d[j])) j++;
                memcpy(o, d + i, (size_t)(j - i));
                o += j - i;
                if (j == len) break;
                Py_UCS4 c = d[j];
                i = j + 1;
                if (c >= 0x80) { *o++ = (char)(0xC0 | (c >> 6)); *o++ = (char)(0x80 | (c & 0x3F)); }
                else o = ae_escape(o, c);
            }
        } else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *d = (const Py_UCS2 *)data;
            for (; i < len; i++) {
                Py_UCS4 c = d[i];
                if (c < 0x80) {
                    if (ae_plain(c)) *o++ = (char)c; else o = ae_escape(o, c);
                } else if (c < 0x800) {
                    *o++ = (char)(0xC0 | (c >> 6)); *o++ = (char)(0x80 | (c & 0x3F));
                } else {
                    *o++ = (char)(0xE0 | (c >> 12)); *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (c & 0x3F));
                }
            }
        } else {
            const Py_UCS4 *d = (const Py_UCS4 *)data;
            for (; i < len; i++) {
                Py_UCS4 c = d[i];
                if (c < 0x80) {
                    if (ae_plain(c)) *o++ = (char)c; else o = ae_escape(o, c);
                } else if (c < 0x800) {
                    *o++ = (char)(0xC0 | (c >> 6)); *o++ = (char)(0x80 | (c & 0x3F));
                } else if (c < 0x10000) {
                    *o++ = (char)(0xE0 | (c >> 12)); *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (c & 0x3F));
                } else {
                    *o++ = (char)(0xF0 | (c >> 18)); *o++ = (char)(0x80 | ((c >> 12) & 0x3F));
                    *o++ = (char)(0x80 | ((c >> 6) & 0x3F)); *o++ = (char)(0x80 | (c & 0x3F));
                }
            }
        }
        *o++ = '"';
        if (o - (b->p + b->n) != size) {  /* the two passes disagree: a bug here */
            PyErr_SetString(PyExc_SystemError, "apertus_fast._encode: string size miscounted");
            return -1;
        }
        b->n = o - b->p;
        return 0;
    }

    /* The ASCII str r (a repr) written as it is, then released. */
    static int ae_repr(ae_buf *b, PyObject *r) {
        if (r == NULL) return -1;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(r, &n);
        int rc = s == NULL ? -1 : ae_lit(b, s, n);
        Py_DECREF(r);
        return rc;
    }

    static int ae_int(ae_buf *b, PyObject *o) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) return ae_repr(b, PyObject_Repr(o));  /* json: int.__repr__ */
        if (v == -1 && PyErr_Occurred()) return -1;
        char tmp[24];
        char *e = tmp + sizeof(tmp), *p = e;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do { *--p = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
        if (v < 0) *--p = '-';
        return ae_lit(b, p, e - p);
    }

    static int ae_float(ae_buf *b, PyObject *o) {
        double v = PyFloat_AS_DOUBLE(o);
        if (isnan(v)) return ae_lit(b, "NaN", 3);
        if (isinf(v)) return v > 0 ? ae_lit(b, "Infinity", 8) : ae_lit(b, "-Infinity", 9);
        char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (s == NULL) return -1;
        int rc = ae_lit(b, s, (Py_ssize_t)strlen(s));
        PyMem_Free(s);
        return rc;
    }

    /* 0 written; 1 not a value this encoder writes (nothing useful written); -1 error. */
    static int ae_value(ae_buf *b, PyObject *o, int depth) {
        int rc;
        if (PyUnicode_CheckExact(o)) return ae_str(b, o);
        if (o == Py_None) return ae_lit(b, "null", 4);
        if (o == Py_True) return ae_lit(b, "true", 4);
        if (o == Py_False) return ae_lit(b, "false", 5);
        if (PyLong_CheckExact(o)) return ae_int(b, o);
        if (PyFloat_CheckExact(o)) return ae_float(b, o);
        if (depth >= AE_MAX_DEPTH) return 1;
        if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
            PyObject **items = PySequence_Fast_ITEMS(o);
            Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
            if (ae_lit(b, "[", 1) < 0) return -1;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (i && ae_lit(b, ", ", 2) < 0) return -1;
                /* no Python code runs while encoding, so the list cannot change */
                if ((rc = ae_value(b, items[i], depth + 1)) != 0) return rc;
            }
            return ae_lit(b, "]", 1);
        }
        if (PyDict_CheckExact(o)) {
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            int first = 1;
            if (ae_lit(b, "{", 1) < 0) return -1;
            while (PyDict_Next(o, &pos, &k, &v)) {
                if (!PyUnicode_CheckExact(k)) return 1;
                if (!first && ae_lit(b, ", ", 2) < 0) return -1;
                first = 0;
                if ((rc = ae_str(b, k)) != 0) return rc;
                if (ae_lit(b, ": ", 2) < 0) return -1;
                if ((rc = ae_value(b, v, depth + 1)) != 0) return rc;
            }
            return ae_lit(b, "}", 1);
        }
        return 1;
    }

    /* json.dumps(o, ensure_ascii=False) + "\\n" as UTF-8 bytes; None when this encoder
       does not write o; NULL with an error set. */
    static PyObject *ae_json_line(PyObject *o) {
        ae_buf b;
        b.p = b.small;
        b.n = 0;
        b.cap = AE_SMALL;
        int rc = ae_value(&b, o, 0);
        PyObject *result;
        if (rc == 0 && ae_lit(&b, "\\n", 1) == 0) {
            result = PyBytes_FromStringAndSize(b.p, b.n);
        } else if (rc == 1) {
            Py_INCREF(Py_None);
            result = Py_None;
        } else {
            result = NULL;
        }
        ae_release(&b);
        return result;
    }
    """
    object ae_json_line(object o)
    int AE_MAX_DEPTH

#: Containers nested deeper than this are left to the json module.
MAX_DEPTH = AE_MAX_DEPTH


def json_line(obj):
    """``(json.dumps(obj, ensure_ascii=False) + "\\n").encode("utf-8")``, or ``None``
    when ``obj`` holds anything but exact dicts with str keys, lists, tuples, strs
    without lone surrogates, ints, floats, bools and None, or nests deeper than
    ``MAX_DEPTH``."""
    return ae_json_line(obj)
