# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""JSON lines for the command line: written as UTF-8 in one pass, and read from it.

Reading: ``loads(data)`` is ``json.loads`` of the UTF-8 text of a JSON line, read
straight from its bytes: json.loads first decodes the whole line to a ``str``, then
scans each string character by character and copies it out again; this reader finds a
string's end 16 bytes a step, counts its characters and widest character, and writes it
once at its final width (a plain ASCII string is one ``memcpy``). UTF-8 is checked as
CPython's decoder checks it with ``"surrogatepass"``, which is what json.loads uses.
Anything it does not take (every error, which json then reports with its own message;
a BOM; nesting deeper than ``MAX_READ_DEPTH``) is handed to ``_io.loads_utf8``, which
decodes the bytes as UTF-8 and gives them to json.loads, so the value or the exception
is always json's (``tests/test_jsonl.py``, ``fuzz/fuzz_jsonl.py``), or its
``NestingError`` for a line nested deeper than ``_io.MAX_NESTING``. (json.loads of the
bytes themselves would take a line starting ``FF FE``, or with a NUL second byte, for
UTF-16 or UTF-32.) Keys are shared per document, as json shares them.

Writing:

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
``tests/test_jsonl.py`` compares the two on generated values.
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

    /* Runs of plain characters (ae_plain) in strings of each width: where the run
       starting at i ends, and the run written out as bytes. SSE2 (every x86-64 CPU
       has it) takes 16, 8 or 4 characters a step; a plain loop does the rest. */
    #if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    #include <emmintrin.h>
    #define AE_SSE2 1
    #else
    #define AE_SSE2 0
    #endif

    static CYTHON_INLINE const unsigned char *ae_run1(const unsigned char *p, const unsigned char *end) {
    #if AE_SSE2
        const __m128i quote = _mm_set1_epi8(34), bslash = _mm_set1_epi8(92), space = _mm_set1_epi8(32);
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            /* signed: bytes >= 0x80 are negative, so "< 32" also finds them */
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                     _mm_cmplt_epi8(v, space));
            int bits = _mm_movemask_epi8(m);
            if (bits) return p + __builtin_ctz((unsigned)bits);
            p += 16;
        }
    #endif
        while (p < end && ae_plain(*p)) p++;
        return p;
    }

    /* The same for 2- and 4-byte strings (LANES characters a step, SHIFT: log2 of the
       bytes per character). Signed compares: 0x8000 and above (2 bytes) are negative, so
       "< 32" finds them; 0x80 to 0x7FFF (and beyond, in 4 bytes) is "> 127". */
    #if AE_SSE2
    #define AE_RUN_WIDE(NAME, T, SET1, CMPEQ, CMPLT, CMPGT, LANES, SHIFT)                 \
    static CYTHON_INLINE Py_ssize_t NAME(const T *d, Py_ssize_t i, Py_ssize_t len) {    \
        const __m128i quote = SET1(34), bslash = SET1(92);                              \
        const __m128i space = SET1(32), del = SET1(127);                                \
        while (len - i >= LANES) {                                                      \
            __m128i v = _mm_loadu_si128((const __m128i *)(d + i));                      \
            __m128i m = _mm_or_si128(_mm_or_si128(CMPEQ(v, quote), CMPEQ(v, bslash)),   \
                                     _mm_or_si128(CMPLT(v, space), CMPGT(v, del)));     \
            int bits = _mm_movemask_epi8(m);                                            \
            if (bits) return i + (__builtin_ctz((unsigned)bits) >> SHIFT);              \
            i += LANES;                                                                 \
        }                                                                               \
        while (i < len && ae_plain(d[i])) i++;                                          \
        return i;                                                                       \
    }
    AE_RUN_WIDE(ae_run2, Py_UCS2, _mm_set1_epi16, _mm_cmpeq_epi16, _mm_cmplt_epi16, _mm_cmpgt_epi16, 8, 1)
    AE_RUN_WIDE(ae_run4, Py_UCS4, _mm_set1_epi32, _mm_cmpeq_epi32, _mm_cmplt_epi32, _mm_cmpgt_epi32, 4, 2)
    #else
    static CYTHON_INLINE Py_ssize_t ae_run2(const Py_UCS2 *d, Py_ssize_t i, Py_ssize_t len) {
        while (i < len && ae_plain(d[i])) i++;
        return i;
    }
    static CYTHON_INLINE Py_ssize_t ae_run4(const Py_UCS4 *d, Py_ssize_t i, Py_ssize_t len) {
        while (i < len && ae_plain(d[i])) i++;
        return i;
    }
    #endif

    /* n plain characters (all below 0x80) written as bytes. */
    static CYTHON_INLINE char *ae_narrow2(char *o, const Py_UCS2 *d, Py_ssize_t n) {
        Py_ssize_t k = 0;
    #if AE_SSE2
        for (; n - k >= 8; k += 8) {
            __m128i v = _mm_loadu_si128((const __m128i *)(d + k));
            _mm_storel_epi64((__m128i *)(o + k), _mm_packus_epi16(v, v));
        }
    #endif
        for (; k < n; k++) o[k] = (char)d[k];
        return o + n;
    }

    static CYTHON_INLINE char *ae_narrow4(char *o, const Py_UCS4 *d, Py_ssize_t n) {
        Py_ssize_t k = 0;
    #if AE_SSE2
        for (; n - k >= 8; k += 8) {
            __m128i a = _mm_loadu_si128((const __m128i *)(d + k));
            __m128i b = _mm_loadu_si128((const __m128i *)(d + k + 4));
            __m128i w = _mm_packs_epi32(a, b);
            _mm_storel_epi64((__m128i *)(o + k), _mm_packus_epi16(w, w));
        }
    #endif
        for (; k < n; k++) o[k] = (char)d[k];
        return o + n;
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

    /* c (not a surrogate) in UTF-8, or its escape. */
    static CYTHON_INLINE char *ae_char(char *o, Py_UCS4 c) {
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
        return o;
    }

    /* Pass 2 of ae_str for 2- and 4-byte strings: runs of plain ASCII found and
       narrowed a step at a time, and the characters between them in a loop of their
       own (one run search per run, not per character: most text in most scripts is
       runs of non-ASCII characters between spaces). */
    #define AE_WRITE_WIDE(RUN, NARROW)                                                  \\
        while (i < len) {                                                               \\
            j = RUN(d, i, len);                                                         \\
            o = NARROW(o, d + i, j - i);                                                \\
            i = j;                                                                      \\
            while (i < len && !ae_plain(d[i])) o = ae_char(o, d[i++]);                  \\
        }

    #if AE_SSE2
    /* the sum of the 32-bit lanes of v */
    static CYTHON_INLINE Py_ssize_t ae_hsum32(__m128i v) {
        v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
        v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
        return (Py_ssize_t)_mm_cvtsi128_si32(v);
    }
    #endif

    /* The UTF-8 size of a 1-byte string's characters beyond one each: 1 for each of
       U+0080-U+00FF, and those of the escapes. SSE2 counts 16 characters a step (bytes >= 0x80
       are negative: -1 a lane, summed every 255 steps); a step with a character to
       escape is counted a character at a time. */
    static Py_ssize_t ae_size1(const Py_UCS1 *d, Py_ssize_t len) {
        Py_ssize_t i = 0, size = 0;
    #if AE_SSE2
        const __m128i quote = _mm_set1_epi8(34), bslash = _mm_set1_epi8(92), zero = _mm_setzero_si128();
        const __m128i c1f = _mm_set1_epi8(31), space = _mm_set1_epi8(32);
        while (len - i >= 16) {
            __m128i acc = zero;
            Py_ssize_t stop = len - i >= 16 * 255 ? i + 16 * 255 : len - 15;
            for (; i < stop; i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
                __m128i qb = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash));
                /* signed: "< 32" also finds the bytes >= 0x80; none: plain ASCII */
                if (!_mm_movemask_epi8(_mm_or_si128(qb, _mm_cmplt_epi8(v, space))))
                    continue;
                if (_mm_movemask_epi8(_mm_or_si128(qb, _mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v)))) {
                    Py_ssize_t k;
                    for (k = i; k < i + 16; k++) size += ae_extra(d[k]);
                    continue;
                }
                acc = _mm_add_epi8(acc, _mm_cmplt_epi8(v, zero));
            }
            acc = _mm_sad_epu8(_mm_sub_epi8(zero, acc), zero);
            size += _mm_cvtsi128_si32(acc) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(acc, acc));
        }
    #endif
        for (; i < len; i++) size += ae_extra(d[i]);
        return size;
    }

    /* size += the extra bytes (ae_extra) of d[from] .. d[to - 1]; a surrogate returns
       -1 from the function */
    #define AE_ADD_EXTRA(d, from, to)                                                \\
        for (Py_ssize_t k_ = (from); k_ < (to); k_++) {                              \\
            if ((x = ae_extra((d)[k_])) < 0) return -1;                              \\
            size += x;                                                               \\
        }

    /* The UTF-8 size of a 2- or 4-byte string's characters beyond one each (escapes
       included), or -1 when it holds a surrogate. SSE2 counts a lane's extra bytes
       with compares (-1 a lane for each limit it is above: 0x7F, 0x7FF, 0xFFFF)
       summed in lanes; a step with a character to escape or a surrogate is counted a
       character at a time. */
    static Py_ssize_t ae_size2(const Py_UCS2 *d, Py_ssize_t len) {
        Py_ssize_t i = 0, size = 0, x;
    #if AE_SSE2
        const __m128i quote = _mm_set1_epi16(34), bslash = _mm_set1_epi16(92), zero = _mm_setzero_si128();
        const __m128i c1f = _mm_set1_epi16(31), c7f = _mm_set1_epi16(0x7F), c7ff = _mm_set1_epi16(0x7FF);
        const __m128i f800 = _mm_set1_epi16((short)0xF800), d800 = _mm_set1_epi16((short)0xD800);
        const __m128i one = _mm_set1_epi16(1);
        while (len - i >= 8) {
            /* 16-bit lane sums grow by at most 2 a step: flushed every 8,192 steps */
            __m128i acc = zero;
            Py_ssize_t stop = len - i >= 8 * 8192 ? i + 8 * 8192 : len - 7;
            for (; i < stop; i += 8) {
                __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
                /* unsigned v <= c: v - c saturates to 0 */
                __m128i odd = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi16(v, quote), _mm_cmpeq_epi16(v, bslash)),
                                           _mm_or_si128(_mm_cmpeq_epi16(_mm_subs_epu16(v, c1f), zero),
                                                        _mm_cmpeq_epi16(_mm_and_si128(v, f800), d800)));
                if (_mm_movemask_epi8(odd)) {
                    AE_ADD_EXTRA(d, i, i + 8)
                    continue;
                }
                acc = _mm_add_epi16(acc, _mm_andnot_si128(_mm_cmpeq_epi16(_mm_subs_epu16(v, c7f), zero), one));
                acc = _mm_add_epi16(acc, _mm_andnot_si128(_mm_cmpeq_epi16(_mm_subs_epu16(v, c7ff), zero), one));
            }
            size += ae_hsum32(_mm_madd_epi16(acc, one));
        }
    #endif
        AE_ADD_EXTRA(d, i, len)
        return size;
    }

    static Py_ssize_t ae_size4(const Py_UCS4 *d, Py_ssize_t len) {
        Py_ssize_t i = 0, size = 0, x;
    #if AE_SSE2
        /* signed compares are right: characters are at most 0x10FFFF */
        const __m128i quote = _mm_set1_epi32(34), bslash = _mm_set1_epi32(92), c20 = _mm_set1_epi32(32);
        const __m128i c7f = _mm_set1_epi32(0x7F), c7ff = _mm_set1_epi32(0x7FF), cffff = _mm_set1_epi32(0xFFFF);
        const __m128i f800 = _mm_set1_epi32(0x1FF800), d800 = _mm_set1_epi32(0xD800);
        while (len - i >= 4) {
            /* minus the count: the lanes drop by at most 3 a step, flushed every 8,192 steps */
            __m128i acc = _mm_setzero_si128();
            Py_ssize_t stop = len - i >= 4 * 8192 ? i + 4 * 8192 : len - 3;
            for (; i < stop; i += 4) {
                __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
                __m128i odd = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi32(v, quote), _mm_cmpeq_epi32(v, bslash)),
                                           _mm_or_si128(_mm_cmplt_epi32(v, c20),
                                                        _mm_cmpeq_epi32(_mm_and_si128(v, f800), d800)));
                if (_mm_movemask_epi8(odd)) {
                    AE_ADD_EXTRA(d, i, i + 4)
                    continue;
                }
                acc = _mm_add_epi32(acc, _mm_add_epi32(_mm_cmpgt_epi32(v, c7f),
                                                       _mm_add_epi32(_mm_cmpgt_epi32(v, c7ff), _mm_cmpgt_epi32(v, cffff))));
            }
            size -= ae_hsum32(acc);
        }
    #endif
        AE_ADD_EXTRA(d, i, len)
        return size;
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
            size += ae_size1((const Py_UCS1 *)data, len);
        } else if (kind == PyUnicode_2BYTE_KIND) {
            if ((x = ae_size2((const Py_UCS2 *)data, len)) < 0) return 1;
            size += x;
        } else {
            if ((x = ae_size4((const Py_UCS4 *)data, len)) < 0) return 1;
            size += x;
        }
        if (ae_reserve(b, size + 16) < 0) return -1;   /* (16: room for a whole step) */
        char *o = b->p + b->n;
        *o++ = '"';
        i = 0;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *d = (const Py_UCS1 *)data;
            while (i < len) {
                j = ae_run1(d + i, d + len) - d;
    #if AE_SSE2
                if (j - i <= 16 && len - i >= 16)   /* a short run: one step, no call */
                    _mm_storeu_si128((__m128i *)o, _mm_loadu_si128((const __m128i *)(d + i)));
                else
    #endif
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
            AE_WRITE_WIDE(ae_run2, ae_narrow2)
        } else {
            const Py_UCS4 *d = (const Py_UCS4 *)data;
            AE_WRITE_WIDE(ae_run4, ae_narrow4)
        }
        *o++ = '"';
        if (o - (b->p + b->n) != size) {  /* the two passes disagree: a bug here */
            PyErr_SetString(PyExc_SystemError, "apertus_fast._jsonl: string size miscounted");
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


# --------------------------------------------------------------------------- reading

cdef extern from *:
    """
    /* json.loads(bytes) for one line, from the UTF-8 bytes directly: no decode of the
       whole line to a str first, strings found with a byte loop and made at their final
       width in one pass. NULL means "not here": anything this reader does not take
       (an error of any kind, another encoding, deep nesting) goes back to json.loads,
       which raises its own error or decodes it. Characters are written by code so that
       no escape sequence needs escaping here: 34 '"', 92 backslash, 47 '/'. */

    #define JD_MAX_DEPTH 100

    typedef struct {
        const unsigned char *p;
        const unsigned char *end;
        PyObject *memo;   /* keys made so far: one object per distinct key, as json does */
        int depth;
    } jd_state;

    static CYTHON_INLINE void jd_ws(jd_state *s) {
        while (s->p < s->end && (*s->p == 32 || *s->p == 9 || *s->p == 10 || *s->p == 13)) s->p++;
    }

    static CYTHON_INLINE int jd_hex(unsigned char c) {
        if (c >= 48 && c <= 57) return c - 48;
        if (c >= 97 && c <= 102) return c - 87;
        if (c >= 65 && c <= 70) return c - 55;
        return -1;
    }

    /* The 4 hex digits at p (p + 4 <= end checked by the caller), or -1. */
    static CYTHON_INLINE long jd_u4(const unsigned char *p) {
        int a = jd_hex(p[0]), b = jd_hex(p[1]), c = jd_hex(p[2]), d = jd_hex(p[3]);
        if ((a | b | c | d) < 0) return -1;
        return (a << 12) | (b << 8) | (c << 4) | d;
    }

    /* One UTF-8 character at p (p < end, *p >= 0x80), as CPython's decoder reads it with
       "surrogatepass" (json.loads decodes bytes that way): its code point and length,
       or -1 for a byte sequence that decoder rejects. */
    static CYTHON_INLINE long jd_utf8(const unsigned char *p, const unsigned char *end, int *len) {
        unsigned char c = p[0];
        if (c >= 0xC2 && c <= 0xDF) {
            if (end - p < 2 || (p[1] & 0xC0) != 0x80) return -1;
            *len = 2;
            return ((long)(c & 0x1F) << 6) | (p[1] & 0x3F);
        }
        if (c >= 0xE0 && c <= 0xEF) {
            if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return -1;
            if (c == 0xE0 && p[1] < 0xA0) return -1;          /* overlong */
            *len = 3;                                          /* (ED A0-BF: surrogates, passed) */
            return ((long)(c & 0x0F) << 12) | ((long)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        }
        if (c >= 0xF0 && c <= 0xF4) {
            if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80
                || (p[3] & 0xC0) != 0x80) return -1;
            if (c == 0xF0 && p[1] < 0x90) return -1;          /* overlong */
            if (c == 0xF4 && p[1] > 0x8F) return -1;          /* above U+10FFFF */
            *len = 4;
            return ((long)(c & 0x07) << 18) | ((long)(p[1] & 0x3F) << 12)
                 | ((long)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        }
        return -1;
    }

    /* An escape at p (p[0] is the backslash): its code point and how many bytes it
       takes, as json's scanstring reads it (a \\uD8xx\\uDCxx pair is one character),
       or -1 for one json rejects. */
    static CYTHON_INLINE long jd_escape(const unsigned char *p, const unsigned char *end, int *len) {
        if (end - p < 2) return -1;
        *len = 2;
        switch (p[1]) {
        case 34: return 34;
        case 92: return 92;
        case 47: return 47;
        case 98: return 8;     /* b */
        case 102: return 12;   /* f */
        case 110: return 10;   /* n */
        case 114: return 13;   /* r */
        case 116: return 9;    /* t */
        case 117: {            /* u */
            if (end - p < 6) return -1;
            long u = jd_u4(p + 2);
            if (u < 0) return -1;
            *len = 6;
            if (u >= 0xD800 && u <= 0xDBFF && end - p >= 8 && p[6] == 92 && p[7] == 117) {
                if (end - p < 12) return -1;                  /* json: invalid \\uXXXX */
                long v = jd_u4(p + 8);
                if (v < 0) return -1;
                if (v >= 0xDC00 && v <= 0xDFFF) {
                    *len = 12;
                    return 0x10000 + (((u - 0xD800) << 10) | (v - 0xDC00));
                }
            }
            return u;
        }
        default: return -1;
        }
    }

    /* Pass 1 of jd_string over the bytes that need no work there: ASCII other than '"',
       the backslash and controls, and every byte >= 0x80 (UTF-8 is checked in pass 2).
       Counts the characters that start (a byte that is not 10xxxxxx starts one) into
       *n and keeps the largest byte in *maxb; stops at '"', the backslash, a control
       byte or the end. SSE2 takes 16 bytes a step. */
    #if AE_SSE2
    static const unsigned char jd_first_k[32] = {
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    #endif
    static CYTHON_INLINE const unsigned char *jd_scan(const unsigned char *p, const unsigned char *end,
                                                       Py_ssize_t *n, unsigned *maxb) {
        Py_ssize_t count = *n;
        unsigned top = *maxb;
    #if AE_SSE2
        const __m128i quote = _mm_set1_epi8(34), bslash = _mm_set1_epi8(92), zero = _mm_setzero_si128();
        const __m128i c1f = _mm_set1_epi8(31), c0 = _mm_set1_epi8((char)0xC0);
        /* continuation bytes counted in byte lanes (-1 each), summed every 255 steps */
        __m128i vmax = zero, conts = zero, sums = zero;
        int steps = 0;
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            /* unsigned v <= 31: min(v, 31) == v */
            __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                        _mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v));
            /* signed: 0x80-0xBF are -128..-65, below 0xC0 (-64); ASCII is not */
            __m128i cont = _mm_cmplt_epi8(v, c0);
            unsigned bits = (unsigned)_mm_movemask_epi8(stop);
            if (bits) {
                unsigned k = (unsigned)__builtin_ctz(bits);
                __m128i first = _mm_loadu_si128((const __m128i *)(jd_first_k + 16 - k));
                conts = _mm_add_epi8(conts, _mm_and_si128(cont, first));
                vmax = _mm_max_epu8(vmax, _mm_and_si128(v, first));
                count += (Py_ssize_t)k;
                p += k;
                break;
            }
            conts = _mm_add_epi8(conts, cont);
            vmax = _mm_max_epu8(vmax, v);
            count += 16;
            p += 16;
            if (++steps == 255) {
                sums = _mm_add_epi64(sums, _mm_sad_epu8(_mm_sub_epi8(zero, conts), zero));
                conts = zero;
                steps = 0;
            }
        }
        sums = _mm_add_epi64(sums, _mm_sad_epu8(_mm_sub_epi8(zero, conts), zero));
        {
            uint64_t halves[2];
            unsigned char lanes[16];
            int i;
            _mm_storeu_si128((__m128i *)halves, sums);
            count -= (Py_ssize_t)(halves[0] + halves[1]);
            _mm_storeu_si128((__m128i *)lanes, vmax);
            for (i = 0; i < 16; i++) if (lanes[i] > top) top = lanes[i];
        }
    #endif
        /* the rest (under 16 bytes), or nothing when a step stopped at a byte above */
        while (p < end) {
            unsigned b = *p;
            if (b == 34 || b == 92 || b < 32) break;
            count += (b & 0xC0) != 0x80;
            if (b > top) top = b;
            p++;
        }
        *n = count;
        *maxb = top;
        return p;
    }

    /* The widest character that UTF-8 whose largest byte is b can hold, as far as the
       string's kind goes (the lead byte bounds its character: C2-C3 Latin-1, C4-DF
       below U+0800, E0-EF below U+10000, F0-F4 beyond). Invalid bytes are found in
       pass 2, which gives the string up. */
    static CYTHON_INLINE long jd_lead_max(unsigned b) {
        return b < 0x80 ? 0 : b < 0xC4 ? 0xFF : b < 0xE0 ? 0x7FF : b < 0xF0 ? 0xFFFF : 0x10FFFF;
    }

    /* Pass 2 of jd_string for one width: the characters of [p, close) written to out,
       runs of ASCII 16 bytes a step, runs of other characters in a loop of their own;
       bad UTF-8 (-1 from jd_utf8) gives up (goto bad). */
    #if AE_SSE2
    #define JD_ASCII16(T)                                                            \
        while (close - p >= 16) {                                                    \
            __m128i v = _mm_loadu_si128((const __m128i *)p);                         \
            unsigned m = (unsigned)(_mm_movemask_epi8(v)                             \
                                    | _mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)));     \
            unsigned k = m ? (unsigned)__builtin_ctz(m) : 16u, i;                    \
            for (i = 0; i < k; i++) out[i] = (T)p[i];                                \
            out += k;                                                                \
            p += k;                                                                  \
            if (m) break;                                                            \
        }
    #define JD_BSLASH const __m128i bs = _mm_set1_epi8(92);
    #else
    #define JD_ASCII16(T)
    #define JD_BSLASH
    #endif
    #define JD_WRITE(T)                                                              \
        while (p < close) {                                                          \
            JD_ASCII16(T)                                                            \
            while (p < close && *p < 0x80 && *p != 92) *out++ = (T)*p++;             \
            if (p >= close) break;                                                   \
            if (*p == 92) {                                                          \
                c = jd_escape(p, close + 1, &len);                                   \
                *out++ = (T)c;                                                       \
                p += len;                                                            \
                continue;                                                            \
            }                                                                        \
            do {                                                                     \
                c = jd_utf8(p, close, &len);                                         \
                if (c < 0) goto bad;                                                 \
                *out++ = (T)c;                                                       \
                p += len;                                                            \
            } while (p < close && *p >= 0x80);                                       \
        }

    /* The string whose opening quote s->p is on. Pass 1 finds its end, its length in
       characters and its widest character; pass 2 writes it at that width. */
    static PyObject *jd_string(jd_state *s) {
        const unsigned char *start = s->p + 1, *p = start, *end = s->end;
        Py_ssize_t n = 0;
        long maxc = 0, c;
        unsigned maxb = 0;
        int len = 1, escapes = 0;
        for (;;) {
            p = jd_scan(p, end, &n, &maxb);
            if (p >= end) return NULL;                      /* unterminated */
            c = *p;
            if (c == 34) break;
            if (c < 32) return NULL;                        /* control character (strict) */
            c = jd_escape(p, end, &len);
            if (c < 0) return NULL;
            if (c > maxc) maxc = c;
            escapes = 1;
            p += len;
            n++;
        }
        const unsigned char *close = p;
        s->p = close + 1;
        if (jd_lead_max(maxb) > maxc) maxc = jd_lead_max(maxb);
        PyObject *r = PyUnicode_New(n, maxc < 128 ? 127 : (Py_UCS4)maxc);
        if (r == NULL) return NULL;
        if (!escapes && maxb < 0x80) {                      /* plain ASCII: one copy */
            memcpy(PyUnicode_1BYTE_DATA(r), start, (size_t)n);
            return r;
        }
        p = start;
        Py_ssize_t written;
        JD_BSLASH
        switch (PyUnicode_KIND(r)) {
        case PyUnicode_1BYTE_KIND: {
            Py_UCS1 *out = PyUnicode_1BYTE_DATA(r), *first = out;
            JD_WRITE(Py_UCS1)
            written = out - first;
            break;
        }
        case PyUnicode_2BYTE_KIND: {
            Py_UCS2 *out = PyUnicode_2BYTE_DATA(r), *first = out;
            JD_WRITE(Py_UCS2)
            written = out - first;
            break;
        }
        default: {
            Py_UCS4 *out = PyUnicode_4BYTE_DATA(r), *first = out;
            JD_WRITE(Py_UCS4)
            written = out - first;
        }
        }
        if (written != n) {  /* the two passes disagree: a bug here */
            Py_DECREF(r);
            PyErr_SetString(PyExc_SystemError, "apertus_fast._jsonl: string length miscounted");
            return NULL;
        }
        return r;
    bad:                     /* not UTF-8: json.loads reports it */
        Py_DECREF(r);
        return NULL;
    }

    static CYTHON_INLINE int jd_digit(const unsigned char *p, const unsigned char *end) {
        return p < end && *p >= 48 && *p <= 57;
    }

    /* A number as json's NUMBER_RE reads it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?,
       an int without fraction or exponent, else a float. */
    static PyObject *jd_number(jd_state *s) {
        const unsigned char *p = s->p, *end = s->end, *start = p;
        int is_float = 0;
        if (*p == 45) p++;                                   /* - */
        if (!jd_digit(p, end)) return NULL;
        if (*p == 48) p++;                                   /* 0 */
        else while (jd_digit(p, end)) p++;
        if (p < end && *p == 46) {                           /* . */
            if (!jd_digit(p + 1, end)) return NULL;
            p++;
            while (jd_digit(p, end)) p++;
            is_float = 1;
        }
        if (p < end && (*p == 101 || *p == 69)) {            /* e E */
            const unsigned char *q = p + 1;
            if (q < end && (*q == 43 || *q == 45)) q++;
            if (!jd_digit(q, end)) return NULL;
            p = q;
            while (jd_digit(p, end)) p++;
            is_float = 1;
        }
        s->p = p;
        Py_ssize_t n = p - start;
        char small[64];
        char *buf = n < 64 ? small : (char *)PyMem_Malloc((size_t)n + 1);
        if (buf == NULL) return NULL;
        memcpy(buf, start, (size_t)n);
        buf[n] = 0;
        PyObject *r;
        if (is_float) {
            double d = PyOS_string_to_double(buf, NULL, NULL);
            r = (d == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(d);
        } else if (n <= 18) {
            long long v = 0;
            const char *q = buf + (buf[0] == 45);
            while (*q) v = v * 10 + (*q++ - 48);
            r = PyLong_FromLongLong(buf[0] == 45 ? -v : v);
        } else {
            r = PyLong_FromString(buf, NULL, 10);   /* (its digit limit: json's ValueError) */
        }
        if (buf != small) PyMem_Free(buf);
        return r;
    }

    static CYTHON_INLINE int jd_word(jd_state *s, const char *w, Py_ssize_t n) {
        if (s->end - s->p < n || memcmp(s->p, w, (size_t)n) != 0) return 0;
        s->p += n;
        return 1;
    }

    static PyObject *jd_value(jd_state *s);

    static PyObject *jd_array(jd_state *s) {
        PyObject *list = PyList_New(0), *v;
        if (list == NULL) return NULL;
        s->p++;
        jd_ws(s);
        if (s->p < s->end && *s->p == 93) { s->p++; return list; }      /* ] */
        for (;;) {
            v = jd_value(s);
            if (v == NULL) goto fail;
            int rc = PyList_Append(list, v);
            Py_DECREF(v);
            if (rc < 0) goto fail;
            jd_ws(s);
            if (s->p >= s->end) goto fail;
            if (*s->p == 44) { s->p++; jd_ws(s); continue; }            /* , */
            if (*s->p == 93) { s->p++; return list; }
            goto fail;
        }
    fail:
        Py_DECREF(list);
        return NULL;
    }

    static PyObject *jd_object(jd_state *s) {
        PyObject *d = PyDict_New(), *k, *v;
        if (d == NULL) return NULL;
        s->p++;
        jd_ws(s);
        if (s->p < s->end && *s->p == 125) { s->p++; return d; }        /* } */
        for (;;) {
            if (s->p >= s->end || *s->p != 34) goto fail;
            k = jd_string(s);
            if (k == NULL) goto fail;
            PyObject *same = PyDict_SetDefault(s->memo, k, k);  /* borrowed */
            if (same == NULL) { Py_DECREF(k); goto fail; }
            Py_INCREF(same);
            Py_DECREF(k);
            k = same;
            jd_ws(s);
            if (s->p >= s->end || *s->p != 58) { Py_DECREF(k); goto fail; }  /* : */
            s->p++;
            jd_ws(s);
            v = jd_value(s);
            if (v == NULL) { Py_DECREF(k); goto fail; }
            int rc = PyDict_SetItem(d, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (rc < 0) goto fail;
            jd_ws(s);
            if (s->p >= s->end) goto fail;
            if (*s->p == 44) { s->p++; jd_ws(s); continue; }
            if (*s->p == 125) { s->p++; return d; }
            goto fail;
        }
    fail:
        Py_DECREF(d);
        return NULL;
    }

    static PyObject *jd_value(jd_state *s) {
        if (s->p >= s->end) return NULL;
        PyObject *r;
        switch (*s->p) {
        case 34: return jd_string(s);
        case 123:                                                       /* { */
        case 91:                                                        /* [ */
            if (++s->depth > JD_MAX_DEPTH) return NULL;
            r = *s->p == 123 ? jd_object(s) : jd_array(s);
            s->depth--;
            return r;
        case 116: if (jd_word(s, "true", 4)) Py_RETURN_TRUE; return NULL;
        case 102: if (jd_word(s, "false", 5)) Py_RETURN_FALSE; return NULL;
        case 110: if (jd_word(s, "null", 4)) Py_RETURN_NONE; return NULL;
        case 78: if (jd_word(s, "NaN", 3)) return PyFloat_FromDouble(Py_NAN); return NULL;
        case 73: if (jd_word(s, "Infinity", 8)) return PyFloat_FromDouble(Py_HUGE_VAL); return NULL;
        case 45:
            if (jd_word(s, "-Infinity", 9)) return PyFloat_FromDouble(-Py_HUGE_VAL);
            return jd_number(s);
        default:
            if (*s->p >= 48 && *s->p <= 57) return jd_number(s);
            return NULL;
        }
    }

    /* The value of the JSON document in b (bytes), or a new reference to `miss` to
       leave it to json.loads; NULL only for a SystemError (a bug here stays loud). */
    static PyObject *jd_loads_or(PyObject *b, PyObject *miss) {
        if (!PyBytes_CheckExact(b)) goto leave;
        Py_ssize_t n = PyBytes_GET_SIZE(b);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(b);
        /* a BOM, a non-ASCII or NUL first byte, a NUL second byte: left to loads_utf8 */
        if (n == 0 || p[0] == 0 || p[0] >= 0x80 || (n >= 2 && p[1] == 0)) goto leave;
        jd_state s;
        s.p = p;
        s.end = p + n;
        s.depth = 0;
        s.memo = PyDict_New();
        if (s.memo == NULL) { PyErr_Clear(); goto leave; }
        jd_ws(&s);
        PyObject *r = jd_value(&s);
        Py_DECREF(s.memo);
        if (r != NULL) {
            jd_ws(&s);
            if (s.p != s.end) { Py_DECREF(r); r = NULL; }        /* extra data */
        }
        if (r != NULL) return r;
        if (PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_SystemError)) return NULL;
            PyErr_Clear();
        }
    leave:
        Py_INCREF(miss);
        return miss;
    }
    """
    object jd_loads_or(object b, object miss)
    int JD_MAX_DEPTH

_MISS = object()
_loads_utf8 = None  # _io.loads_utf8, looked up at the first line left to it

#: Containers nested deeper than this are left to json.loads.
MAX_READ_DEPTH = JD_MAX_DEPTH


def loads(data):
    """``json.loads`` of the UTF-8 text of a JSON line, read directly from its bytes.

    The same value or exception as ``_io.loads_utf8`` (``json.loads`` of the bytes
    decoded as UTF-8, a leading BOM skipped) for every input (``tests/test_jsonl.py``):
    what this reader does not take (errors of any kind, which json then reports; a BOM;
    nesting deeper than ``MAX_READ_DEPTH``; ``str`` input) is handed to it. (Not to
    ``json.loads(bytes)``, which takes a line starting ``FF FE``, or with a NUL second
    byte, for UTF-16 or UTF-32.)"""
    global _loads_utf8
    value = jd_loads_or(data, _MISS)
    if value is _MISS:
        if _loads_utf8 is None:
            from ._io import loads_utf8 as _loads_utf8
        return _loads_utf8(data)
    return value


def _read(data):
    """What the reader alone makes of ``data``: the value, or ``None`` when it leaves
    it to json.loads (for tests; ``loads`` of the JSON text ``null`` is also None)."""
    value = jd_loads_or(data, _MISS)
    return None if value is _MISS else value


# --------------------------------------------------------------------------- counting lines

cdef extern from *:
    """
    /* The newlines in [p, p + n): SSE2 compares 16 bytes a step, the matches summed in
       byte lanes (-1 each) and added up every 255 steps; CPython's bytes.count(b"\\n")
       goes a byte at a time. */
    static Py_ssize_t jl_count_newlines(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t total = 0, i = 0;
    #if AE_SSE2
        const __m128i nl = _mm_set1_epi8(10), zero = _mm_setzero_si128();
        while (n - i >= 16) {
            __m128i acc = zero;
            Py_ssize_t stop = n - i >= 16 * 255 ? i + 16 * 255 : i + ((n - i) & ~(Py_ssize_t)15);
            for (; i < stop; i += 16)
                acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), nl));
            acc = _mm_sad_epu8(acc, zero);
            total += _mm_cvtsi128_si32(acc) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(acc, acc));
        }
    #endif
        for (; i < n; i++) total += p[i] == 10;
        return total;
    }
    """
    Py_ssize_t jl_count_newlines(const unsigned char *p, Py_ssize_t n) nogil


def count_newlines(const unsigned char[::1] data, Py_ssize_t start=0, end=None):
    """``data.count(b"\\n", start, end)`` for bytes-like ``data`` (start and end as
    slice bounds: negative from the end, clipped), 16 bytes a step."""
    cdef Py_ssize_t n = data.shape[0], stop = n if end is None else end
    if start < 0:
        start = max(start + n, 0)
    if stop < 0:
        stop = max(stop + n, 0)
    start = min(start, n)
    stop = min(stop, n)
    if stop <= start:
        return 0
    cdef Py_ssize_t total
    with nogil:
        total = jl_count_newlines(&data[start], stop - start)
    return total
