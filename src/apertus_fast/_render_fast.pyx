# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The hot path of ``render``: hand-written Cython for well-typed conversations.

``_render.py`` is the renderer (plain Python, and what runs without a compiler); this
module renders the common case of it far faster: a list of plain ``dict`` messages whose
values are ``str`` / ``dict`` / ``list`` where the template expects them. It walks the
messages once, reading each message's and block's fields in one pass over its entries
(borrowed references, no hash lookups), records the output as borrowed pointers to the
strings it is made of (the input's own strings and the module's token constants;
nothing is concatenated on the way) and copies them once into a string of precomputed
length and width (widening with vectorised loops).

Whenever it meets anything else (another type, a value the template would print with
``str()``, a missing value, anything the template would reject) it returns ``None``,
and ``_render.render`` renders the conversation from scratch on the general path, which
owns every error message and every Jinja value rule. So this path never has to be right
about an unusual input: it only has to recognise the usual one, and on it produce the
same bytes (``tests/test_render_fast.py`` compares the two paths; the oracle tests run
through this one).

Tool signatures are cached per tool: the key is the tool's name, and a hit is confirmed
by a type-exact deep comparison with a "tape" of the tool it was rendered from (its
values in pre-order in one block, strings inline), so a cached text is only reused for a
tool that renders identically: same types (1, 1.0 and True differ), same key order,
floats bit for bit. A miss writes the signature here too (``ts_tool``: the template's
TypeScript rules on exact JSON types, faster than ``_render_tool``, which renders
what it declines), so that corpora whose tools are all different (tool-calling datasets)
stay fast.

Dict entries are read directly from the entry array where a self-check at import
confirms the CPython layout (3.11-3.13), else with PyDict_Next (``dict_reading()``).

Measured with ``python benchmarks/report.py`` and ``benchmarks/breakdown.py``; see
``docs/benchmarks.md`` for what was tried and did not help (prefetching).
"""

import json.encoder as _json_encoder

from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memcmp, memset
from libc.stdint cimport uint32_t

cdef extern from *:
    """
    #include <string.h>
    #include <math.h>
    #if PY_VERSION_HEX < 0x030C0000
    #define AF_STR_OK(o) (PyUnicode_CheckExact(o) && PyUnicode_IS_READY(o))
    #else
    #define AF_STR_OK(o) PyUnicode_CheckExact(o)
    #endif
    static CYTHON_INLINE int af_is_str(PyObject *o) { return AF_STR_OK(o); }
    static CYTHON_INLINE int af_is_list(PyObject *o) { return PyList_CheckExact(o); }
    static CYTHON_INLINE int af_is_int(PyObject *o) { return PyLong_CheckExact(o); }
    static CYTHON_INLINE int af_is_float(PyObject *o) { return PyFloat_CheckExact(o); }
    static CYTHON_INLINE Py_ssize_t af_len(PyObject *s) { return PyUnicode_GET_LENGTH(s); }
    /* s is an exact, ready str: is it the ASCII literal lit (n bytes)? */
    static CYTHON_INLINE int af_eq(PyObject *s, const char *lit, Py_ssize_t n) {
        return PyUnicode_GET_LENGTH(s) == n && PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND
            && memcmp(PyUnicode_DATA(s), lit, (size_t)n) == 0;
    }
    /* Reading a dict's entries directly. PyDict_Next is a call per entry that also
       loads each key's hash; on CPython 3.11-3.13 (not free-threaded) an exact dict
       with str keys in a combined table keeps its entries as (key, value) pairs in
       an array, which is read here instead. The layout is not public, so it is only
       used after af_dict_selfcheck() has confirmed it at import; anywhere else, and
       for split tables or other keys, PyDict_Next is used. */
    #if !defined(PYPY_VERSION) && !defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
    #define AF_DICT_DIRECT 1
    typedef struct {
        Py_ssize_t dk_refcnt;
        uint8_t dk_log2_size;
        uint8_t dk_log2_index_bytes;
        uint8_t dk_kind;
        uint32_t dk_version;
        Py_ssize_t dk_usable;
        Py_ssize_t dk_nentries;
        char dk_indices[];
    } af_keys;
    #else
    #define AF_DICT_DIRECT 0
    #endif
    typedef struct { PyObject *key; PyObject *value; } af_entry;
    static int af_direct = 0;
    /* the entry array of d (and its length, deleted slots included: value NULL), or
       NULL when d has to be read with PyDict_Next */
    static CYTHON_INLINE af_entry *af_entries(PyObject *d, Py_ssize_t *n) {
    #if AF_DICT_DIRECT
        PyDictObject *mp = (PyDictObject *)d;
        af_keys *k = (af_keys *)mp->ma_keys;
        if (!af_direct || mp->ma_values != NULL || k->dk_kind != 1) return NULL;
        *n = k->dk_nentries;
        return (af_entry *)(&k->dk_indices[(size_t)1 << k->dk_log2_index_bytes]);
    #else
        (void)d; (void)n;
        return NULL;
    #endif
    }
    /* An exact dict whose keys are all exact str: looking a str up in it runs no
       Python code. (With other keys, a key's __eq__ runs when its hash matches, and the
       caller's code must not run during a render: the pieces recorded so far are
       borrowed pointers it could free.) A table of kind DICT_KEYS_UNICODE or _SPLIT
       holds exact str keys only; elsewhere the keys are checked one by one. */
    static int af_str_keys(PyObject *o) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
    #if AF_DICT_DIRECT
        if (af_direct) return ((af_keys *)((PyDictObject *)o)->ma_keys)->dk_kind != 0;
    #endif
        while (PyDict_Next(o, &pos, &k, &v))
            if (!PyUnicode_CheckExact(k)) return 0;
        return 1;
    }
    static CYTHON_INLINE int af_is_dict(PyObject *o) {
        return PyDict_CheckExact(o) && af_str_keys(o);
    }
    typedef struct { af_entry *e; Py_ssize_t i, n; PyObject *d; } af_iter;
    static CYTHON_INLINE void af_iter_init(af_iter *it, PyObject *d) {
        it->i = 0;
        it->n = 0;
        it->d = d;
        it->e = af_entries(d, &it->n);
    }
    /* PyDict_Next's contract: borrowed key and value, 0 at the end */
    static CYTHON_INLINE int af_iter_next(af_iter *it, PyObject **k, PyObject **v) {
        if (it->e != NULL) {
            while (it->i < it->n) {
                af_entry *e = &it->e[it->i++];
                if (e->value != NULL) { *k = e->key; *v = e->value; return 1; }
            }
            return 0;
        }
        return PyDict_Next(it->d, &it->i, k, v);
    }
    /* Turn direct reading on if it gives exactly what PyDict_Next gives on dicts
       shaped as JSON decodes them (including one with a deleted key). Returns
       af_direct. */
    static int af_dict_selfcheck(PyObject *dicts) {
        Py_ssize_t j, pos;
        af_iter it;
        PyObject *k1, *v1, *k2, *v2, *d;
        int ok = AF_DICT_DIRECT;
        af_direct = ok;
        for (j = 0; ok && j < PyList_GET_SIZE(dicts); j++) {
            d = PyList_GET_ITEM(dicts, j);
            if (af_entries(d, &pos) == NULL) { ok = 0; break; }
            af_iter_init(&it, d);
            pos = 0;
            for (;;) {
                int a = af_iter_next(&it, &k1, &v1), b = PyDict_Next(d, &pos, &k2, &v2);
                if (a != b) { ok = 0; break; }
                if (!a) break;
                if (k1 != k2 || v1 != v2) { ok = 0; break; }
            }
        }
        af_direct = ok;
        return ok;
    }
    /* equal bytes (n of them), in words: loads stay within both buffers */
    static CYTHON_INLINE uint64_t af_ld8(const unsigned char *p) { uint64_t x; memcpy(&x, p, 8); return x; }
    static CYTHON_INLINE uint32_t af_ld4(const unsigned char *p) { uint32_t x; memcpy(&x, p, 4); return x; }
    static CYTHON_INLINE int af_bytes_eq(const unsigned char *x, const unsigned char *y, size_t m) {
        size_t i;
        if (m >= 8) {
            if (m > 64) return memcmp(x, y, m) == 0;
            for (i = 0; i + 8 < m; i += 8)
                if (af_ld8(x + i) != af_ld8(y + i)) return 0;
            return af_ld8(x + m - 8) == af_ld8(y + m - 8);
        }
        if (m >= 4) return af_ld4(x) == af_ld4(y) && af_ld4(x + m - 4) == af_ld4(y + m - 4);
        for (i = 0; i < m; i++) if (x[i] != y[i]) return 0;
        return 1;
    }
    /* d[key] (borrowed, NULL when missing) for an exact dict and an ASCII str key: a
       small dict with its entries at hand is scanned (its keys are exact str, so
       equal contents is what the lookup would test), anything else is looked up */
    static CYTHON_INLINE PyObject *af_get(PyObject *d, PyObject *key) {
        Py_ssize_t n = 0, i, kn;
        const unsigned char *kd;
        af_entry *e = af_entries(d, &n);
        if (e == NULL || n > 8) return PyDict_GetItemWithError(d, key);
        kn = PyUnicode_GET_LENGTH(key);
        kd = (const unsigned char *)PyUnicode_DATA(key);
        for (i = 0; i < n; i++) {
            PyObject *k = e[i].key;
            if (e[i].value == NULL) continue;
            if (k == key || (PyUnicode_GET_LENGTH(k) == kn && PyUnicode_KIND(k) == PyUnicode_1BYTE_KIND
                             && af_bytes_eq((const unsigned char *)PyUnicode_DATA(k), kd, (size_t)kn)))
                return e[i].value;
        }
        return NULL;
    }
    /* a and b exact, ready str: equal contents? (canonical representation: equal
       strings have equal kinds) */
    static CYTHON_INLINE int af_str_same(PyObject *a, PyObject *b) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(a);
        int k = PyUnicode_KIND(a);
        if (a == b) return 1;
        if (n != PyUnicode_GET_LENGTH(b) || k != PyUnicode_KIND(b)) return 0;
        return af_bytes_eq((const unsigned char *)PyUnicode_DATA(a),
                           (const unsigned char *)PyUnicode_DATA(b), (size_t)n * (size_t)k);
    }
    /* Tool tapes (see "Tool signatures" below): a tool's JSON values in pre-order,
       each an 8-byte header {tag | str kind << 8, n} and a payload; a str record
       carries its characters inline (padded to 8 bytes), so a match reads the tape
       front to back instead of a second object tree. */
    typedef struct { uint32_t tag; uint32_t n; } af_hdr;
    enum { AF_T_STR = 0, AF_T_DICT = 1, AF_T_LIST = 2, AF_T_INT = 3, AF_T_BIGINT = 4,
           AF_T_FLOAT = 5, AF_T_CONST = 6 };
    #define AF_PAD8(m) (((size_t)(m) + 7) & ~(size_t)7)
    static CYTHON_INLINE uint32_t af_tag(const unsigned char *t) { return ((const af_hdr *)t)->tag & 0xff; }
    static CYTHON_INLINE const unsigned char *af_match_str(PyObject *a, const unsigned char *t) {
        const af_hdr *h = (const af_hdr *)t;
        uint32_t kind = h->tag >> 8;
        size_t m;
        if (!AF_STR_OK(a) || (size_t)PyUnicode_GET_LENGTH(a) != h->n
            || (uint32_t)PyUnicode_KIND(a) != kind) return NULL;
        m = (size_t)h->n * kind;
        if (!af_bytes_eq((const unsigned char *)PyUnicode_DATA(a), t + 8, m)) return NULL;
        return t + 8 + AF_PAD8(m);
    }
    /* Type-exact deep equality of a JSON-like value and the tape record at t: the
       end of the record if equal, else NULL. Same types (1, 1.0 and True differ),
       same key order, floats bit for bit (0.0 and -0.0 differ). */
    static const unsigned char *af_match(PyObject *a, const unsigned char *t, int depth) {
        const af_hdr *h = (const af_hdr *)t;
        switch (h->tag & 0xff) {
        case AF_T_STR:
            return af_match_str(a, t);
        case AF_T_DICT: {
            af_iter it;
            PyObject *k, *v;
            if (!PyDict_CheckExact(a) || PyDict_GET_SIZE(a) != (Py_ssize_t)h->n || depth > 64) return NULL;
            t += 8;
            af_iter_init(&it, a);
            while (af_iter_next(&it, &k, &v)) {
                t = af_match_str(k, t);
                if (t == NULL) return NULL;
                t = af_tag(t) == AF_T_STR ? af_match_str(v, t) : af_match(v, t, depth + 1);
                if (t == NULL) return NULL;
            }
            return t;
        }
        case AF_T_LIST: {
            Py_ssize_t i, n = (Py_ssize_t)h->n;
            if (!PyList_CheckExact(a) || PyList_GET_SIZE(a) != n || depth > 64) return NULL;
            t += 8;
            for (i = 0; i < n && t != NULL; i++) {
                PyObject *x = PyList_GET_ITEM(a, i);
                t = af_tag(t) == AF_T_STR ? af_match_str(x, t) : af_match(x, t, depth + 1);
            }
            return t;
        }
        case AF_T_INT: {     /* an int in the range of long long */
            long long x, y;
            int overflow = 0;
            if (!PyLong_CheckExact(a)) return NULL;
            x = PyLong_AsLongLongAndOverflow(a, &overflow);   /* cannot fail on an exact int */
            memcpy(&y, t + 8, 8);
            return !overflow && x == y ? t + 16 : NULL;
        }
        case AF_T_BIGINT: {  /* compared with the int object kept by the tape's owner */
            PyObject *b;
            int r;
            if (!PyLong_CheckExact(a)) return NULL;
            memcpy(&b, t + 8, sizeof(PyObject *));
            r = PyObject_RichCompareBool(a, b, Py_EQ);     /* exact ints: no Python code */
            if (r < 0) { PyErr_Clear(); return NULL; }
            return r ? t + 16 : NULL;
        }
        case AF_T_FLOAT: {
            double x;
            if (!PyFloat_CheckExact(a)) return NULL;
            x = PyFloat_AS_DOUBLE(a);
            return memcmp(&x, t + 8, 8) == 0 ? t + 16 : NULL;
        }
        case AF_T_CONST: {   /* None, True, False: identity */
            PyObject *c;
            memcpy(&c, t + 8, sizeof(PyObject *));
            return a == c ? t + 16 : NULL;
        }
        }
        return NULL;
    }
    /* Bytes of the tape of x, or -1 if it cannot be taped: exact JSON types only
       (dict keys exact str), containers at most 64 deep, no str or container longer
       than a header holds. Reads the objects only: no Python code runs. */
    static Py_ssize_t af_tape_size(PyObject *x, int depth) {
        Py_ssize_t total, m, i, n;
        if (AF_STR_OK(x)) {
            if (PyUnicode_GET_LENGTH(x) > 0x7fffffff) return -1;
            return 8 + (Py_ssize_t)AF_PAD8((size_t)PyUnicode_GET_LENGTH(x) * (size_t)PyUnicode_KIND(x));
        }
        if (PyLong_CheckExact(x) || PyFloat_CheckExact(x) || x == Py_None || x == Py_True
                || x == Py_False)
            return 16;
        if (depth > 64) return -1;
        if (PyDict_CheckExact(x)) {
            af_iter it;
            PyObject *k, *v;
            if (PyDict_GET_SIZE(x) > 0x7fffffff || !af_str_keys(x)) return -1;
            total = 8;
            af_iter_init(&it, x);
            while (af_iter_next(&it, &k, &v)) {
                if (!AF_STR_OK(k) || PyUnicode_GET_LENGTH(k) > 0x7fffffff) return -1;
                m = af_tape_size(v, depth + 1);
                if (m < 0) return -1;
                total += 8 + (Py_ssize_t)AF_PAD8((size_t)PyUnicode_GET_LENGTH(k) * (size_t)PyUnicode_KIND(k)) + m;
            }
            return total;
        }
        if (PyList_CheckExact(x)) {
            n = PyList_GET_SIZE(x);
            if (n > 0x7fffffff) return -1;
            total = 8;
            for (i = 0; i < n; i++) {
                m = af_tape_size(PyList_GET_ITEM(x, i), depth + 1);
                if (m < 0) return -1;
                total += m;
            }
            return total;
        }
        return -1;
    }
    static CYTHON_INLINE double af_float_value(PyObject *a) { return PyFloat_AS_DOUBLE(a); }
    static CYTHON_INLINE Py_UCS4 af_maxchar(PyObject *s) { return PyUnicode_MAX_CHAR_VALUE(s); }
    static CYTHON_INLINE int af_kind(PyObject *s) { return PyUnicode_KIND(s); }
    static CYTHON_INLINE void *af_data(PyObject *s) { return PyUnicode_DATA(s); }
    static CYTHON_INLINE Py_ssize_t af_dict_len(PyObject *d) { return PyDict_GET_SIZE(d); }
    static CYTHON_INLINE Py_ssize_t af_list_len(PyObject *l) { return PyList_GET_SIZE(l); }
    static CYTHON_INLINE PyObject *af_list_item(PyObject *l, Py_ssize_t i) { return PyList_GET_ITEM(l, i); }
    /* The fields the walk reads of a message / block dict, in one pass over its entries
       instead of a hash lookup per field (most lookups would compare the key strings
       anyway: keys decoded from JSON are not the interned constants). Returns -1 if a
       key is not an exact str (the caller bails: a str subclass could equal a field). */
    static CYTHON_INLINE int af_is_key(PyObject *k, Py_ssize_t n, const char *lit) {
        return memcmp(PyUnicode_DATA(k), lit, (size_t)n) == 0;
    }
    static int af_message_fields(PyObject *m, PyObject **role, PyObject **content,
                                 PyObject **tool_calls) {
        Py_ssize_t n;
        PyObject *k, *v;
        af_iter it;
        af_iter_init(&it, m);
        *role = *content = *tool_calls = NULL;
        while (af_iter_next(&it, &k, &v)) {
            if (!AF_STR_OK(k)) return -1;
            if (PyUnicode_KIND(k) != PyUnicode_1BYTE_KIND) continue;
            n = PyUnicode_GET_LENGTH(k);
            if (n == 4) { if (af_is_key(k, 4, "role")) *role = v; }
            else if (n == 7) { if (af_is_key(k, 7, "content")) *content = v; }
            else if (n == 10) { if (af_is_key(k, 10, "tool_calls")) *tool_calls = v; }
        }
        return 0;
    }
    static int af_block_fields(PyObject *b, PyObject **type, PyObject **text,
                               PyObject **calls, PyObject **outputs) {
        Py_ssize_t n;
        PyObject *k, *v;
        af_iter it;
        af_iter_init(&it, b);
        *type = *text = *calls = *outputs = NULL;
        while (af_iter_next(&it, &k, &v)) {
            if (!AF_STR_OK(k)) return -1;
            if (PyUnicode_KIND(k) != PyUnicode_1BYTE_KIND) continue;
            n = PyUnicode_GET_LENGTH(k);
            if (n == 4) {
                if (af_is_key(k, 4, "type")) *type = v;
                else if (af_is_key(k, 4, "text")) *text = v;
            }
            else if (n == 5) { if (af_is_key(k, 5, "calls")) *calls = v; }
            else if (n == 7) { if (af_is_key(k, 7, "outputs")) *outputs = v; }
        }
        return 0;
    }
    /* Comparing a narrower piece with a wider text (``matches``): plain loops that the
       compiler vectorises, AVX2 when the CPU has it (chosen once at load time). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && __GNUC__ >= 6
    #define AF_WIDEN_ATTR __attribute__((target_clones("avx2", "default")))
    #else
    #define AF_WIDEN_ATTR
    #endif
    /* Widening copies (a narrower piece into a wider result) without a character
       loop, with SSE2 (in every x86-64 build): 16 characters a step, the last step
       overlapping the one before so that no scalar tail is left; a piece under 16
       characters is two overlapping 8- or 4-character steps. Every load and store
       stays inside the piece. Tokens and short texts are most of the pieces (a turn
       is 2-6 of them), and the compiler's vectorised loops finished each one
       character at a time (up to 31 of them). */
    #if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    #include <emmintrin.h>
    static CYTHON_INLINE __m128i af_ld16(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
    static CYTHON_INLINE __m128i af_ld8x(const void *p) { return _mm_loadl_epi64((const __m128i *)p); }
    static CYTHON_INLINE __m128i af_ld4x(const void *p) { uint32_t x; memcpy(&x, p, 4); return _mm_cvtsi32_si128((int)x); }
    static CYTHON_INLINE void af_st16(void *p, __m128i x) { _mm_storeu_si128((__m128i *)p, x); }
    static CYTHON_INLINE void af_st8x(void *p, __m128i x) { _mm_storel_epi64((__m128i *)p, x); }
    /* 16 UCS1 -> 16 UCS2 */
    static CYTHON_INLINE void af_w12_16(const Py_UCS1 *s, Py_UCS2 *d) {
        __m128i x = af_ld16(s), z = _mm_setzero_si128();
        af_st16(d, _mm_unpacklo_epi8(x, z));
        af_st16(d + 8, _mm_unpackhi_epi8(x, z));
    }
    /* 16 UCS1 -> 16 UCS4 */
    static CYTHON_INLINE void af_w14_16(const Py_UCS1 *s, Py_UCS4 *d) {
        __m128i x = af_ld16(s), z = _mm_setzero_si128();
        __m128i lo = _mm_unpacklo_epi8(x, z), hi = _mm_unpackhi_epi8(x, z);
        af_st16(d, _mm_unpacklo_epi16(lo, z));
        af_st16(d + 4, _mm_unpackhi_epi16(lo, z));
        af_st16(d + 8, _mm_unpacklo_epi16(hi, z));
        af_st16(d + 12, _mm_unpackhi_epi16(hi, z));
    }
    /* 8 UCS2 -> 8 UCS4 */
    static CYTHON_INLINE void af_w24_8(const Py_UCS2 *s, Py_UCS4 *d) {
        __m128i x = af_ld16(s), z = _mm_setzero_si128();
        af_st16(d, _mm_unpacklo_epi16(x, z));
        af_st16(d + 4, _mm_unpackhi_epi16(x, z));
    }
    /* The bulk of a long piece: plain loops over a multiple of 32 characters (no tail),
       vectorised with AVX2 where the CPU has it (32-byte stores: twice the widened
       bytes per store of SSE2), then the rest in overlapping SSE2 steps. */
    AF_WIDEN_ATTR static void af_widen_12_bulk(const Py_UCS1 *__restrict s, Py_UCS2 *__restrict d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    AF_WIDEN_ATTR static void af_widen_14_bulk(const Py_UCS1 *__restrict s, Py_UCS4 *__restrict d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    AF_WIDEN_ATTR static void af_widen_24_bulk(const Py_UCS2 *__restrict s, Py_UCS4 *__restrict d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    #define AF_BULK 64    /* pieces this long or longer go through the bulk loops */
    /* 8 and 4 UCS1 -> UCS2 / UCS4 */
    static CYTHON_INLINE void af_w12_8(const Py_UCS1 *s, Py_UCS2 *d) {
        af_st16(d, _mm_unpacklo_epi8(af_ld8x(s), _mm_setzero_si128()));
    }
    static CYTHON_INLINE void af_w12_4(const Py_UCS1 *s, Py_UCS2 *d) {
        af_st8x(d, _mm_unpacklo_epi8(af_ld4x(s), _mm_setzero_si128()));
    }
    static CYTHON_INLINE void af_w14_8(const Py_UCS1 *s, Py_UCS4 *d) {
        __m128i z = _mm_setzero_si128(), x = _mm_unpacklo_epi8(af_ld8x(s), z);
        af_st16(d, _mm_unpacklo_epi16(x, z));
        af_st16(d + 4, _mm_unpackhi_epi16(x, z));
    }
    static CYTHON_INLINE void af_w14_4(const Py_UCS1 *s, Py_UCS4 *d) {
        __m128i z = _mm_setzero_si128();
        af_st16(d, _mm_unpacklo_epi16(_mm_unpacklo_epi8(af_ld4x(s), z), z));
    }
    /* The widening of n UCS1 characters at s to d, in the steps above (W16, W8, W4)
       and the bulk loop BULK */
    #define AF_WIDEN_FROM_UCS1(BULK, W16, W8, W4) do {                                 \
        Py_ssize_t i;                                                                   \
        if (n >= AF_BULK) {                                                             \
            i = n & ~(Py_ssize_t)31;                                                    \
            BULK(s, d, i);                                                              \
            if (n - i > 16) W16(s + i, d + i);                                          \
            if (i < n) W16(s + n - 16, d + n - 16);                                     \
        } else if (n >= 16) {                                                           \
            for (i = 0; i + 16 <= n; i += 16) W16(s + i, d + i);                        \
            if (i < n) W16(s + n - 16, d + n - 16);                                     \
        } else if (n >= 8) {                                                            \
            W8(s, d);                                                                   \
            W8(s + n - 8, d + n - 8);                                                   \
        } else if (n >= 4) {                                                            \
            W4(s, d);                                                                   \
            W4(s + n - 4, d + n - 4);                                                   \
        } else {                                                                        \
            for (i = 0; i < n; i++) d[i] = s[i];                                        \
        }                                                                               \
    } while (0)
    static void af_widen_12(const Py_UCS1 *s, Py_UCS2 *d, Py_ssize_t n) {
        AF_WIDEN_FROM_UCS1(af_widen_12_bulk, af_w12_16, af_w12_8, af_w12_4);
    }
    static void af_widen_14(const Py_UCS1 *s, Py_UCS4 *d, Py_ssize_t n) {
        AF_WIDEN_FROM_UCS1(af_widen_14_bulk, af_w14_16, af_w14_8, af_w14_4);
    }
    static void af_widen_24(const Py_UCS2 *s, Py_UCS4 *d, Py_ssize_t n) {
        __m128i z = _mm_setzero_si128();
        Py_ssize_t i;
        if (n >= AF_BULK) {
            i = n & ~(Py_ssize_t)31;
            af_widen_24_bulk(s, d, i);
            for (; i + 8 <= n; i += 8) af_w24_8(s + i, d + i);
            if (i < n) af_w24_8(s + n - 8, d + n - 8);
        } else if (n >= 8) {
            for (i = 0; i + 8 <= n; i += 8) af_w24_8(s + i, d + i);
            if (i < n) af_w24_8(s + n - 8, d + n - 8);
        } else if (n >= 4) {
            af_st16(d, _mm_unpacklo_epi16(af_ld8x(s), z));
            af_st16(d + n - 4, _mm_unpacklo_epi16(af_ld8x(s + n - 4), z));
        } else {
            for (i = 0; i < n; i++) d[i] = s[i];
        }
    }
    #else
    /* elsewhere: plain loops, which the compiler vectorises */
    static void af_widen_12(const Py_UCS1 *s, Py_UCS2 *d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    static void af_widen_14(const Py_UCS1 *s, Py_UCS4 *d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    static void af_widen_24(const Py_UCS2 *s, Py_UCS4 *d, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    }
    #endif
    /* Copy the exact, ready str s (of a kind no wider than the result's) into the
       result's data at character position pos. */
    static CYTHON_INLINE void af_copy_into(void *dst, int kind, Py_ssize_t pos, PyObject *s) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        int sk = PyUnicode_KIND(s);
        const void *src = PyUnicode_DATA(s);
        if (sk == kind) memcpy((char *)dst + pos * kind, src, (size_t)n * (size_t)kind);
        else if (kind == 2) af_widen_12((const Py_UCS1 *)src, (Py_UCS2 *)dst + pos, n);
        else if (sk == 1) af_widen_14((const Py_UCS1 *)src, (Py_UCS4 *)dst + pos, n);
        else af_widen_24((const Py_UCS2 *)src, (Py_UCS4 *)dst + pos, n);
    }
    /* Whether the exact, ready str s (of a kind no wider than kind) equals the
       characters of the data t (of that kind) from position pos on; a narrower piece
       is compared in blocks (no early exit inside a block, so the loop vectorises). */
    #define AF_EQ_BLOCK(TD, TS) do { \
        const TD *d_ = (const TD *)t + pos; const TS *a_ = (const TS *)src; \
        Py_ssize_t i_ = 0, e_; \
        while (i_ < n) { \
            uint32_t acc_ = 0; \
            e_ = n - i_ > 256 ? i_ + 256 : n; \
            for (; i_ < e_; i_++) acc_ |= (uint32_t)d_[i_] ^ (uint32_t)a_[i_]; \
            if (acc_) return 0; \
        } \
        return 1; } while (0)
    AF_WIDEN_ATTR static int af_equal_12(const void *t, Py_ssize_t pos, const void *src, Py_ssize_t n) {
        AF_EQ_BLOCK(Py_UCS2, Py_UCS1);
    }
    AF_WIDEN_ATTR static int af_equal_14(const void *t, Py_ssize_t pos, const void *src, Py_ssize_t n) {
        AF_EQ_BLOCK(Py_UCS4, Py_UCS1);
    }
    AF_WIDEN_ATTR static int af_equal_24(const void *t, Py_ssize_t pos, const void *src, Py_ssize_t n) {
        AF_EQ_BLOCK(Py_UCS4, Py_UCS2);
    }
    /* Whether json.dumps(ensure_ascii=False) writes the exact, ready str s as it is
       between quotes: no '"', no backslash, no control character below U+0020 (the
       only characters it escapes). A loop without an early exit, which vectorises. */
    #define AF_JSON_PLAIN(T) do { \
        const T *p_ = (const T *)PyUnicode_DATA(s); unsigned bad_ = 0; \
        for (i = 0; i < n; i++) { \
            Py_UCS4 c_ = p_[i]; \
            bad_ |= (c_ < 0x20) | (c_ == 0x22) | (c_ == 0x5c); \
        } \
        return !bad_; } while (0)
    static int af_json_plain(PyObject *s) {
        Py_ssize_t i, n = PyUnicode_GET_LENGTH(s);
        switch (PyUnicode_KIND(s)) {
        case PyUnicode_1BYTE_KIND: AF_JSON_PLAIN(Py_UCS1);
        case PyUnicode_2BYTE_KIND: AF_JSON_PLAIN(Py_UCS2);
        default: AF_JSON_PLAIN(Py_UCS4);
        }
    }
    static CYTHON_INLINE int af_float_finite(PyObject *a) { return isfinite(PyFloat_AS_DOUBLE(a)); }
    static CYTHON_INLINE int af_equal_at(const void *t, int kind, Py_ssize_t pos, PyObject *s) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        int sk = PyUnicode_KIND(s);
        const void *src = PyUnicode_DATA(s);
        if (sk == kind) return memcmp((const char *)t + pos * kind, src, (size_t)n * (size_t)kind) == 0;
        if (sk > kind) return 0;
        if (kind == 2) return af_equal_12(t, pos, src, n);
        if (sk == 1) return af_equal_14(t, pos, src, n);
        return af_equal_24(t, pos, src, n);
    }
    """
    ctypedef struct af_iter:
        pass
    void af_iter_init(af_iter* it, PyObject* d)
    bint af_iter_next(af_iter* it, PyObject** k, PyObject** v)
    int af_dict_selfcheck(PyObject* dicts)
    const unsigned char* af_match(PyObject* a, const unsigned char* t, int depth)
    ctypedef struct af_hdr:
        uint32_t tag
        uint32_t n
    enum:
        AF_T_STR
        AF_T_DICT
        AF_T_LIST
        AF_T_INT
        AF_T_BIGINT
        AF_T_FLOAT
        AF_T_CONST
    int af_direct
    void af_copy_into(void* dst, int kind, Py_ssize_t pos, PyObject* s)
    bint af_equal_at(const void* t, int kind, Py_ssize_t pos, PyObject* s)
    bint af_json_plain(PyObject* s)
    bint af_float_finite(PyObject* a)
    int af_message_fields(PyObject* m, PyObject** role, PyObject** content, PyObject** tool_calls)
    int af_block_fields(PyObject* b, PyObject** type, PyObject** text, PyObject** calls,
                        PyObject** outputs)
    bint af_is_str(PyObject* o)
    bint af_is_dict(PyObject* o)
    bint af_is_list(PyObject* o)
    bint af_is_int(PyObject* o)
    bint af_is_float(PyObject* o)
    Py_ssize_t af_len(PyObject* s)
    bint af_eq(PyObject* s, const char* lit, Py_ssize_t n)
    bint af_str_same(PyObject* a, PyObject* b)
    PyObject* af_get(PyObject* d, PyObject* key)
    Py_ssize_t af_tape_size(PyObject* x, int depth)
    double af_float_value(PyObject* a)
    Py_UCS4 af_maxchar(PyObject* s)
    int af_kind(PyObject* s)
    void* af_data(PyObject* s)
    Py_ssize_t af_dict_len(PyObject* d)
    Py_ssize_t af_list_len(PyObject* l)
    PyObject* af_list_item(PyObject* l, Py_ssize_t i)

cdef extern from "Python.h":
    # (Python 3.10+) the cyclic collector off for a render: see gc_off
    int PyGC_Disable()
    int PyGC_Enable()
    # borrowed reference, NULL when missing; on an exact dict with a str key it cannot
    # fail (PyDict_GetItem would also save and restore the error state on every call)
    PyObject* PyDict_GetItemWithError(PyObject* d, PyObject* key)
    int PyObject_IsTrue(object o) except -1
    bint PyDict_CheckExact(PyObject* o)
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    bint PyDict_Next(PyObject* d, Py_ssize_t* pos, PyObject** key, PyObject** value)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    PyObject* Py_None
    PyObject* Py_True
    PyObject* Py_False

# ---------------------------------------------------------------------------
# Constants (module-level objects: their pointers stay valid)
# ---------------------------------------------------------------------------

cdef str K_ROLE = "role"
cdef str K_CONTENT = "content"
cdef str K_TEXT = "text"
cdef str K_PARTS = "parts"
cdef str K_BLOCKS = "blocks"
cdef str K_TYPE = "type"
cdef str K_OUTPUT = "output"
cdef str K_NAME = "name"
cdef str K_ARGUMENTS = "arguments"
cdef str K_FUNCTION = "function"

cdef str SYSTEM_START = "<|system_start|>"
cdef str SYSTEM_END = "<|system_end|>"
cdef str USER_START = "<|user_start|>"
cdef str USER_END = "<|user_end|>"
cdef str ASSISTANT_START = "<|assistant_start|>"
cdef str ASSISTANT_END = "<|assistant_end|>"
cdef str INNER_PREFIX = "<|inner_prefix|>"
cdef str INNER_SUFFIX = "<|inner_suffix|>"
cdef str CALLS_OPEN = "<|tools_prefix|>["
cdef str CALLS_CLOSE = "]<|tools_suffix|>"
cdef str IMAGE = "<|image|>"
cdef str AUDIO = "<|audio|>"
cdef str THINKING_ON = "<|developer_start|>Deliberation: enabled\n"
cdef str THINKING_OFF = "<|developer_start|>Deliberation: disabled\n"
cdef str NO_TOOLS = "Tool Capabilities: disabled<|developer_end|>"
cdef str TOOLS_HEAD = "Tool Capabilities:\n"
cdef str DEVELOPER_END = "<|developer_end|>"
cdef str COMMA = ", "
cdef str NEWLINE = "\n"
cdef str CALL_OPEN = '{"'
cdef str CALL_MID = '": '
cdef str CALL_CLOSE = "}"
# Pieces of JSON (push_json: tool-call arguments given as objects). Q_X is '"' + X,
# the piece X merged into a closing quote pushed just before it.
cdef str EMPTY = ""
cdef str QUOTE = '"'
cdef str OBJECT_OPEN = "{"
cdef str OBJECT_OPEN_Q = '{"'
cdef str ARRAY_OPEN = "["
cdef str ARRAY_OPEN_Q = '["'
cdef str ITEM_SEP = ", "
cdef str ITEM_SEP_Q = ', "'
cdef str Q_ITEM_SEP = '", '
cdef str Q_ITEM_SEP_Q = '", "'
cdef str KEY_SEP = ": "
cdef str KEY_SEP_Q = ': "'
cdef str Q_KEY_SEP = '": '
cdef str Q_KEY_SEP_Q = '": "'
cdef str OBJECT_CLOSE = "}"
cdef str Q_OBJECT_CLOSE = '"}'
cdef str ARRAY_CLOSE = "]"
cdef str Q_ARRAY_CLOSE = '"]'
cdef str EMPTY_OBJECT = "{}"
cdef str EMPTY_ARRAY = "[]"
cdef str JSON_TRUE = "true"
cdef str JSON_FALSE = "false"
cdef str JSON_NULL = "null"
cdef dict QUOTED = {x: QUOTE + x for x in (OBJECT_OPEN, ARRAY_OPEN, ITEM_SEP, KEY_SEP)}
cdef list _small_ints = [str(i) for i in range(257)]   # int.__repr__ of 0..256
cdef object _encode_basestring = getattr(_json_encoder, "c_encode_basestring", None) \
    or _json_encoder.encode_basestring

# Pairs of tokens that often meet, as one piece each (one copy instead of two; see
# push_joined): after a user turn, after an assistant turn, after the developer section.
cdef str USER_END_ASSISTANT_START = USER_END + ASSISTANT_START
cdef str ASSISTANT_END_USER_START = ASSISTANT_END + USER_START
cdef str DEVELOPER_END_USER_START = DEVELOPER_END + USER_START
cdef str NO_TOOLS_USER_START = NO_TOOLS + USER_START

# the general renderer's helpers, installed by _render (configure())
cdef object _render_tool = None      # _render_tool(tool, trim, jinja_json, native) -> str
cdef object _render_date = None      # render_date(date) -> "YYYY-MM-DD"
cdef object _checked_date = None     # the last date argument render_date accepted
cdef dict _dialects = {}             # name -> _Dialect
cdef dict _dialect_objects = {}      # name -> the Dialect object of _dialects.DIALECTS
cdef object _general = None          # _render._render_general (positional arguments)
cdef object _last_dialect_name = None   # the last dialect name looked up, and its table


cdef class _Dialect:
    """What the walk reads of a ``Dialect``, as C fields."""
    cdef str tout_open, tout_close, default_system
    cdef bint dated, closes_last_turn, list_user_content, openai_shapes, trim, jinja_json
    cdef tuple image_parts, audio_parts
    cdef int mode
    cdef dict systems                # date string -> the system section (dated dialects)
    cdef str system                  # the system section (undated dialects)
    cdef object last_date            # the last date string rendered, and its section
    cdef str last_system
    cdef bint usable                 # the walk may take it (see __init__)

    def __init__(self, d):
        # Only a table of exact strings may be walked: the walk compares and records
        # them without running code (an image part type with its own __eq__, run
        # after pieces are recorded, could free one; None as a token is no string).
        # A dialect added to DIALECTS with anything else renders on the general path.
        strings = (d.tool_output_open, d.tool_output_close, d.default_system)
        parts = (d.image_parts, d.audio_parts)
        self.usable = (all(type(x) is str for x in strings)
                       and all(type(p) is tuple and all(type(x) is str for x in p)
                               for p in parts)
                       and all(type(x) is bool for x in (
                           d.dated_system, d.closes_last_turn, d.list_user_content,
                           d.openai_shapes, d.trim_blocks))
                       and type(d.tojson) is str)
        if not self.usable:
            return
        self.tout_open = d.tool_output_open
        self.tout_close = d.tool_output_close
        self.default_system = d.default_system
        self.dated = d.dated_system
        self.closes_last_turn = d.closes_last_turn
        self.list_user_content = d.list_user_content
        self.openai_shapes = d.openai_shapes
        self.trim = d.trim_blocks
        self.jinja_json = d.tojson == "jinja"
        self.image_parts = tuple(d.image_parts)
        self.audio_parts = tuple(d.audio_parts)
        self.mode = (4 if self.trim else 0) | (2 if self.jinja_json else 0) | (1 if self.openai_shapes else 0)
        self.systems = {}
        self.system = SYSTEM_START + self.default_system + SYSTEM_END
        self.last_date = self   # matches no date argument
        self.last_system = None


cdef _Dialect _last_dialect = None


def _dict_selfcheck_samples():
    import json
    d = {"a": 1, "b": 2, "c": 3}
    del d["b"]
    return [{}, {"role": "user", "content": "x"}, d,
            json.loads('{"type": "object", "properties": {"x": {"type": "string"}}, "required": []}')]


cdef int _dict_selfcheck():
    cdef list samples = _dict_selfcheck_samples()
    return af_dict_selfcheck(<PyObject*>samples)


_dict_selfcheck()


def dict_reading():
    """How the hot path reads dict entries: ``"direct"`` (the entry array, CPython
    3.11-3.13, confirmed by a self-check at import) or ``"PyDict_Next"``."""
    return "direct" if af_direct else "PyDict_Next"


def _set_dict_reading(direct):
    """Tests: force ``PyDict_Next`` (``False``), or redo the self-check (``True``)."""
    global af_direct
    if direct:
        _dict_selfcheck()
    else:
        af_direct = 0
    return dict_reading()


def configure(render_tool, render_date, dialects, general, tojson=None):
    """Install the general renderer's helpers, the dialect tables and the general path
    (``_render._render_general``, which ``render`` hands the unusual conversation to);
    called once by ``_render`` when it imports this module. ``tojson``, when given,
    replaces the ``tojson`` filter that tool defaults are written with (without one, a
    tool with a default is rendered by ``render_tool``)."""
    global _render_tool, _render_date, _general, _last_dialect_name, _last_dialect, _tojson
    _render_tool = render_tool
    if tojson is not None:
        _tojson = tojson
    _render_date = render_date
    _general = general
    _dialects.clear()
    _dialect_objects.clear()
    _last_dialect_name = None
    _last_dialect = None
    for name, d in dialects.items():
        _dialects[name] = _Dialect(d)
        _dialect_objects[name] = d


# ---------------------------------------------------------------------------
# The output: borrowed pieces, copied once
# ---------------------------------------------------------------------------

cdef enum:
    HELD_INLINE = 4    # strings made during a render that Out holds without a list


cdef struct Out:
    PyObject** items
    Py_ssize_t n
    Py_ssize_t cap
    Py_ssize_t total
    Py_UCS4 maxchar
    bint heap          # items was malloc'ed (else it is the caller's stack array)
    PyObject* held[HELD_INLINE]   # the first strings made during the render (owned)
    int nheld
    PyObject* keep     # a list of the others (owned), or NULL
    Py_ssize_t* marks  # render_with_spans: where the model's text starts and stops
                       # (character offsets, alternately), or NULL: not recorded
    Py_ssize_t nmarks
    Py_ssize_t capmarks
    int gc_state       # gc_off: 0 not yet off; 1 turned off here; 2 found off


cdef inline void gc_off(Out* o):
    """The collector off from here to the copy (see gc_off below)."""
    if o.gc_state == 0:
        o.gc_state = 1 if PyGC_Disable() else 2


cdef inline void gc_restore(Out* o):
    """The collector as the render found it."""
    if o.gc_state == 1:
        PyGC_Enable()
    o.gc_state = 0


cdef inline int push(Out* o, PyObject* s) except -1:
    """Append the exact, ready str ``s`` (borrowed: it must outlive the render)."""
    cdef Py_ssize_t n = af_len(s)
    cdef PyObject** grown
    if n == 0:
        return 0
    if o.n == o.cap:
        if o.heap:
            grown = <PyObject**>realloc(o.items, <size_t>(o.cap * 2) * sizeof(PyObject*))
        else:
            grown = <PyObject**>malloc(<size_t>(o.cap * 2) * sizeof(PyObject*))
            if grown != NULL:
                memcpy(grown, o.items, <size_t>o.cap * sizeof(PyObject*))
        if grown == NULL:
            raise MemoryError()
        o.items = grown
        o.heap = True
        o.cap *= 2
    o.items[o.n] = s
    o.n += 1
    o.total += n
    cdef Py_UCS4 m = af_maxchar(s)
    if m > o.maxchar:
        o.maxchar = m
    return 0


cdef inline int push_joined(Out* o, PyObject* s, PyObject* prev, PyObject* joined) except -1:
    """``push(o, s)``, merged into the last piece when that is ``prev`` (``joined`` is
    ``prev + s``, ASCII like both): the output is the same, with one piece fewer."""
    if o.n and o.items[o.n - 1] == prev:
        o.items[o.n - 1] = joined
        o.total += af_len(s)
        return 0
    return push(o, s)


cdef int push_user_start(Out* o) except -1:
    cdef PyObject* last = o.items[o.n - 1] if o.n else NULL
    if last == <PyObject*>ASSISTANT_END:
        return push_joined(o, <PyObject*>USER_START, last, <PyObject*>ASSISTANT_END_USER_START)
    if last == <PyObject*>NO_TOOLS:
        return push_joined(o, <PyObject*>USER_START, last, <PyObject*>NO_TOOLS_USER_START)
    return push_joined(o, <PyObject*>USER_START, <PyObject*>DEVELOPER_END,
                       <PyObject*>DEVELOPER_END_USER_START)


cdef int hold(Out* o, object s) except -1:
    """Keep ``s`` (made during the render, or cached where a later miss may evict it)
    alive until the render ends."""
    cdef list keep
    if o.nheld < HELD_INLINE:
        Py_INCREF(s)
        o.held[o.nheld] = <PyObject*>s
        o.nheld += 1
    elif o.keep == NULL:
        keep = [s]
        Py_INCREF(keep)
        o.keep = <PyObject*>keep
    else:
        (<list>o.keep).append(s)
    return 0


cdef inline int model(Out* o, bint on) except -1:
    """Span bookkeeping, as the general path's ``_model``: the text pushed from now on
    is (``on``) or is not the model's own. A mark is the character offset where the
    state changes (merging a token into the last piece later does not move it)."""
    cdef Py_ssize_t* grown
    if o.marks == NULL or (o.nmarks & 1) == on:
        return 0
    if o.nmarks == o.capmarks:
        grown = <Py_ssize_t*>realloc(o.marks, <size_t>(o.capmarks * 2) * sizeof(Py_ssize_t))
        if grown == NULL:
            raise MemoryError()
        o.marks = grown
        o.capmarks *= 2
    o.marks[o.nmarks] = o.total
    o.nmarks += 1
    return 0


cdef str assemble(Out* o):
    cdef str result = PyUnicode_New(o.total, o.maxchar)
    cdef PyObject* r = <PyObject*>result
    cdef int kind = af_kind(r)
    cdef void* dst = af_data(r)
    cdef Py_ssize_t pos = 0, i
    cdef PyObject* s
    for i in range(o.n):
        s = o.items[i]
        af_copy_into(dst, kind, pos, s)
        pos += af_len(s)
    return result


# ---------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------

cdef enum:
    BAIL = -1          # not the usual case: the general path renders it
    FMT_NONE = 0
    FMT_STRING = 1
    FMT_MAPPING = 2


cdef inline PyObject* get(PyObject* d, str key):
    return af_get(d, <PyObject*>key)


cdef int push_text(Out* o, PyObject* v) except -2:
    """``{{ v }}`` of a value that is a str or missing (printed ``""``); else BAIL."""
    if v == NULL:
        return 0
    if not af_is_str(v):
        return BAIL
    push(o, v)
    return 0


cdef int user_parts(Out* o, PyObject* parts, _Dialect d) except -2:
    cdef Py_ssize_t i
    cdef PyObject* part
    cdef PyObject* ptype
    if not af_is_list(parts):
        return BAIL
    for i in range(af_list_len(parts)):
        part = af_list_item(parts, i)
        if not af_is_dict(part):
            return BAIL
        ptype = get(part, K_TYPE)
        if ptype == NULL or not af_is_str(ptype):
            return BAIL
        if af_eq(ptype, "text", 4):
            if push_text(o, get(part, K_TEXT)) == BAIL:
                return BAIL
        elif <object>ptype in d.image_parts:
            push(o, <PyObject*>IMAGE)
        elif <object>ptype in d.audio_parts:
            push(o, <PyObject*>AUDIO)
        else:
            return BAIL
    return 0


cdef int push_call(Out* o, PyObject* name, PyObject* args, bint first) except -2:
    """``{"name": arguments}`` (after ``, `` unless first); ``args`` that is not a str
    (only reached in dialects that serialise it) is written as their ``tojson`` writes
    it (``push_json``)."""
    if name == NULL or not af_is_str(name):
        return BAIL
    if not first:
        push(o, <PyObject*>COMMA)
    push(o, <PyObject*>CALL_OPEN)
    push(o, name)
    push(o, <PyObject*>CALL_MID)
    if af_is_str(args):
        push(o, args)
    else:
        if not (af_is_dict(args) or af_is_list(args) or af_is_int(args) or af_is_float(args)
                or args == Py_None or args == Py_True or args == Py_False):
            return BAIL
        if push_json(o, args, 0) == BAIL:
            return BAIL
    push(o, <PyObject*>CALL_CLOSE)
    return 0


cdef enum:
    JSON_DEPTH = 32    # deeper values go to the general path (json.dumps)
    SMALL_INTS = 257   # int.__repr__ of 0 .. SMALL_INTS - 1 is cached


cdef int push_json_str(Out* o, PyObject* s, str open_, str open_q, str open_qq) except -2:
    """``open_`` and the JSON string of ``s``: with nothing to escape, its pieces are
    ``open_`` with the opening quote (``open_q``; ``open_qq`` when merged into a
    closing quote just pushed, ``None`` where ``open_`` never follows one), ``s`` and the
    closing quote; else ``open_`` and json's own encoding of ``s``."""
    cdef object quoted
    if af_json_plain(s):
        if open_qq is None:
            push(o, <PyObject*>open_q)
        else:
            after_quote(o, open_q, open_qq)
        push(o, s)
        push(o, <PyObject*>QUOTE)
        return 0
    quoted = _encode_basestring(<object>s)
    if type(quoted) is not str:
        return BAIL
    hold(o, quoted)
    if open_ is not EMPTY:
        after_quote(o, open_, QUOTED[open_])
    push(o, <PyObject*>quoted)
    return 0


cdef int push_json_item(Out* o, PyObject* v, str sep, str sep_q, str q_sep, str q_sep_q,
                        int depth) except -2:
    """``sep`` and the JSON of ``v`` (an array item or an object's value): ``sep_q`` /
    ``q_sep_q`` open a string (see push_json_str), ``q_sep`` is ``sep`` after a closing
    quote (``None``: ``sep`` never follows one)."""
    if af_is_str(v):
        return push_json_str(o, v, sep, sep_q, q_sep_q)
    if q_sep is None:
        push(o, <PyObject*>sep)
    else:
        after_quote(o, sep, q_sep)
    return push_json(o, v, depth)


cdef inline int after_quote(Out* o, str s, str joined) except -1:
    """``push(o, s)``, where ``joined`` is ``'"' + s``: one piece with a closing quote
    just pushed."""
    if o.n and o.items[o.n - 1] == <PyObject*>QUOTE:
        o.items[o.n - 1] = <PyObject*>joined
        o.total += af_len(<PyObject*>s)
        return 0
    return push(o, <PyObject*>s)


cdef int push_json(Out* o, PyObject* x, int depth) except -2:
    """``x | tojson`` in the Hugging Face environment (``json.dumps(x,
    ensure_ascii=False)``) as pieces, for exact dict / list / str / int / float / bool
    / None values up to JSON_DEPTH deep; anything else (other types, keys that are not
    str, NaN and infinities, deeper nesting) is BAIL, and the general path serialises
    it."""
    cdef af_iter it
    cdef PyObject* k
    cdef PyObject* v
    cdef Py_ssize_t i, n
    cdef bint first = True
    cdef long long value
    cdef int overflow = 0
    cdef object text
    if af_is_str(x):
        return push_json_str(o, x, EMPTY, QUOTE, None)
    if af_is_dict(x):
        if depth >= JSON_DEPTH:
            return BAIL
        if af_dict_len(x) == 0:
            push(o, <PyObject*>EMPTY_OBJECT)
            return 0
        af_iter_init(&it, x)
        while af_iter_next(&it, &k, &v):
            if not af_is_str(k):
                return BAIL
            if first:
                if push_json_str(o, k, OBJECT_OPEN, OBJECT_OPEN_Q, None) == BAIL:
                    return BAIL
                first = False
            elif push_json_str(o, k, ITEM_SEP, ITEM_SEP_Q, Q_ITEM_SEP_Q) == BAIL:
                return BAIL
            if push_json_item(o, v, KEY_SEP, KEY_SEP_Q, Q_KEY_SEP, Q_KEY_SEP_Q, depth + 1) == BAIL:
                return BAIL
        after_quote(o, OBJECT_CLOSE, Q_OBJECT_CLOSE)
        return 0
    if af_is_list(x):
        if depth >= JSON_DEPTH:
            return BAIL
        n = af_list_len(x)
        if n == 0:
            push(o, <PyObject*>EMPTY_ARRAY)
            return 0
        for i in range(n):
            if i == 0:
                if push_json_item(o, af_list_item(x, 0), ARRAY_OPEN, ARRAY_OPEN_Q, None, None,
                                  depth + 1) == BAIL:
                    return BAIL
            elif push_json_item(o, af_list_item(x, i), ITEM_SEP, ITEM_SEP_Q, Q_ITEM_SEP, Q_ITEM_SEP_Q,
                                depth + 1) == BAIL:
                return BAIL
        after_quote(o, ARRAY_CLOSE, Q_ARRAY_CLOSE)
        return 0
    if x == Py_True:
        push(o, <PyObject*>JSON_TRUE)
    elif x == Py_False:
        push(o, <PyObject*>JSON_FALSE)
    elif x == Py_None:
        push(o, <PyObject*>JSON_NULL)
    elif af_is_int(x):
        value = PyLong_AsLongLongAndOverflow(<object>x, &overflow)   # cannot fail on an exact int
        if not overflow and 0 <= value < SMALL_INTS:
            push(o, <PyObject*>_small_ints[value])
        else:
            text = int.__repr__(<object>x)
            hold(o, text)
            push(o, <PyObject*>text)
    elif af_is_float(x):
        if not af_float_finite(x):
            return BAIL
        text = float.__repr__(<object>x)
        hold(o, text)
        push(o, <PyObject*>text)
    else:
        return BAIL
    return 0


cdef int block_calls(Out* o, PyObject* calls, bint openai_shapes) except -2:
    cdef Py_ssize_t i
    cdef PyObject* call
    cdef PyObject* fn
    cdef PyObject* args
    push(o, <PyObject*>CALLS_OPEN)
    for i in range(af_list_len(calls)):
        call = af_list_item(calls, i)
        if not af_is_dict(call):
            return BAIL
        if openai_shapes:
            fn = get(call, K_FUNCTION)
            if fn != NULL:
                if not af_is_dict(fn):
                    return BAIL
                if af_dict_len(fn):
                    call = fn
            args = get(call, K_ARGUMENTS)
        else:
            args = get(call, K_ARGUMENTS)
            if args != NULL and not af_is_str(args):
                return BAIL
        if args == NULL:
            return BAIL
        if push_call(o, get(call, K_NAME), args, i == 0) == BAIL:
            return BAIL
    push(o, <PyObject*>CALLS_CLOSE)
    return 0


cdef int legacy_calls(Out* o, PyObject* calls, bint openai_shapes) except -2:
    cdef Py_ssize_t i
    cdef PyObject* call
    cdef PyObject* ctype
    cdef PyObject* fn
    cdef PyObject* name
    cdef PyObject* args
    push(o, <PyObject*>CALLS_OPEN)
    for i in range(af_list_len(calls)):
        call = af_list_item(calls, i)
        if not af_is_dict(call):
            return BAIL
        ctype = get(call, K_TYPE)
        if openai_shapes:
            if ctype != NULL and not (af_is_str(ctype) and af_eq(ctype, "function", 8)):
                return BAIL
            fn = get(call, K_FUNCTION)
            if fn != NULL and fn != Py_None:
                if not af_is_dict(fn):
                    return BAIL
                if af_dict_len(fn):
                    call = fn
            name = get(call, K_NAME)
            args = get(call, K_ARGUMENTS)
            # the template's ``not (name and args)`` check, for the types passed on
            if name == NULL or not af_is_str(name) or af_len(name) == 0 or args == NULL:
                return BAIL
            if af_is_str(args):
                if af_len(args) == 0:
                    return BAIL
            elif af_is_dict(args):
                if af_dict_len(args) == 0:
                    return BAIL
            elif af_is_list(args):
                if af_list_len(args) == 0:
                    return BAIL
            else:
                return BAIL
        else:
            if ctype == NULL or not af_is_str(ctype) or not af_eq(ctype, "function", 8):
                return BAIL
            fn = get(call, K_FUNCTION)
            if fn == NULL or not af_is_dict(fn):
                return BAIL
            name = get(fn, K_NAME)
            args = get(fn, K_ARGUMENTS)
            if name == NULL or args == NULL or not af_is_str(args):
                return BAIL
        if push_call(o, name, args, i == 0) == BAIL:
            return BAIL
    push(o, <PyObject*>CALLS_CLOSE)
    return 0


cdef int is_display_answers(PyObject* calls) except -2:
    """``calls|length == 1 and calls[0].name == 'display_answers'`` (calls: a list)."""
    cdef PyObject* name
    if af_list_len(calls) != 1:
        return 0
    call = af_list_item(calls, 0)
    if not af_is_dict(call):
        return BAIL
    name = get(call, K_NAME)
    if name == NULL:
        return 0
    if not af_is_str(name):
        return BAIL
    return af_eq(name, "display_answers", 15)


cdef int walk(Out* o, PyObject* messages, Py_ssize_t start, _Dialect d,
              bint continue_assistant_message) except -2:
    """The template's main loop (``_render._render_messages``) over messages[start:]."""
    cdef bint in_assistant = False, in_tool = False, in_inner = False, waiting = False
    cdef bint first
    cdef int fmt = FMT_NONE
    cdef Py_ssize_t i, j, k, nblocks
    cdef PyObject* message
    cdef PyObject* role
    cdef PyObject* content
    cdef PyObject* mcontent
    cdef PyObject* btext
    cdef PyObject* blocks
    cdef PyObject* block
    cdef PyObject* btype
    cdef PyObject* calls
    cdef PyObject* outputs
    cdef PyObject* out_
    cdef PyObject* legacy
    cdef PyObject* tout_open = <PyObject*>d.tout_open
    cdef PyObject* tout_close = <PyObject*>d.tout_close
    for i in range(start, af_list_len(messages)):
        message = af_list_item(messages, i)
        if not af_is_dict(message):
            return BAIL
        if af_message_fields(message, &role, &mcontent, &legacy) < 0:
            return BAIL
        if role == NULL or not af_is_str(role):
            return BAIL
        if af_eq(role, "user", 4):
            in_inner = False
            if in_tool:
                model(o, False)
                push(o, tout_close)
                in_tool = False
            if in_assistant:
                model(o, True)
                push(o, <PyObject*>ASSISTANT_END)
                model(o, False)
                in_assistant = False
            content = mcontent
            if content != NULL:
                push_user_start(o)
                if af_is_str(content):
                    push(o, content)
                elif af_is_dict(content):
                    content = get(content, K_PARTS)
                    if content == NULL or user_parts(o, content, d) == BAIL:
                        return BAIL
                elif d.list_user_content and af_is_list(content):
                    if user_parts(o, content, d) == BAIL:
                        return BAIL
                else:
                    return BAIL
                push(o, <PyObject*>USER_END)
        elif af_eq(role, "assistant", 9):
            if not in_assistant:
                push_joined(o, <PyObject*>ASSISTANT_START, <PyObject*>USER_END,
                            <PyObject*>USER_END_ASSISTANT_START)
                in_assistant = True
            content = mcontent
            if content == NULL:
                return BAIL
            if af_is_str(content) and fmt != FMT_MAPPING:
                if in_tool:
                    model(o, False)
                    push(o, tout_close)
                    in_tool = False
                model(o, True)
                fmt = FMT_STRING
                push(o, content)
            elif af_is_dict(content) and fmt != FMT_STRING:
                blocks = get(content, K_BLOCKS)
                if blocks == NULL or not af_is_list(blocks):
                    return BAIL
                fmt = FMT_MAPPING
                first = True
                nblocks = af_list_len(blocks)
                for j in range(nblocks):
                    block = af_list_item(blocks, j)
                    if not af_is_dict(block):
                        return BAIL
                    if af_block_fields(block, &btype, &btext, &calls, &outputs) < 0:
                        return BAIL
                    if btype == NULL or not af_is_str(btype):
                        return BAIL
                    if af_eq(btype, "thoughts", 8):
                        if in_tool:
                            model(o, False)
                            push(o, tout_close)
                            in_tool = False
                        model(o, True)
                        if not in_inner:
                            in_inner = True
                            push(o, <PyObject*>INNER_PREFIX)
                        if push_text(o, btext) == BAIL:
                            return BAIL
                    elif af_eq(btype, "tool_calls", 10):
                        if in_tool:
                            model(o, False)
                            push(o, tout_close)
                            in_tool = False
                        model(o, True)
                        if calls == NULL or not af_is_list(calls):
                            return BAIL
                        if in_inner and not first:
                            k = is_display_answers(calls)
                            if k == BAIL:
                                return BAIL
                            if k:
                                in_inner = False
                                push(o, <PyObject*>INNER_SUFFIX)
                        if block_calls(o, calls, d.openai_shapes) == BAIL:
                            return BAIL
                        waiting = True
                    elif af_eq(btype, "tool_outputs", 12):
                        if in_tool:
                            return BAIL
                        if outputs == NULL or not af_is_list(outputs):
                            return BAIL
                        model(o, False)
                        push(o, tout_open)
                        for k in range(af_list_len(outputs)):
                            out_ = af_list_item(outputs, k)
                            if not af_is_dict(out_):
                                return BAIL
                            if k:
                                push(o, <PyObject*>COMMA)
                            if push_text(o, get(out_, K_OUTPUT)) == BAIL:
                                return BAIL
                        push(o, tout_close)
                        model(o, True)
                        waiting = False
                    elif af_eq(btype, "response", 8):
                        if in_tool:
                            model(o, False)
                            push(o, tout_close)
                            in_tool = False
                        model(o, True)
                        if in_inner:
                            in_inner = False
                            push(o, <PyObject*>INNER_SUFFIX)
                        if push_text(o, btext) == BAIL:
                            return BAIL
                    else:
                        return BAIL
                    first = False
            else:
                return BAIL
            if legacy != NULL and legacy != Py_None:
                if not af_is_list(legacy):
                    return BAIL
                if af_list_len(legacy):
                    model(o, True)
                    if legacy_calls(o, legacy, d.openai_shapes) == BAIL:
                        return BAIL
                    waiting = True
        elif af_eq(role, "tool", 4):
            if not in_assistant:
                return BAIL
            model(o, False)
            if not in_tool:
                push(o, tout_open)
                in_tool = True
            else:
                push(o, <PyObject*>COMMA)
            if push_text(o, mcontent) == BAIL:
                return BAIL
            waiting = False
        else:
            return BAIL
    if in_tool:
        model(o, False)
        push(o, tout_close)
    if d.closes_last_turn and in_assistant and not continue_assistant_message and not waiting:
        model(o, True)
        push(o, <PyObject*>ASSISTANT_END)
    return 0


# ---------------------------------------------------------------------------
# Tool signatures: rendered once per distinct tool
# ---------------------------------------------------------------------------

cdef list _tool_caches = [{} for _ in range(8)]   # per mode: name -> _Tool chain
# per mode: the hashes of the names met once, not cached (hashes, not the names: a name
# may be big, and the set is bounded by count only; two names of one hash only mean
# that the second is cached the first time it is met)
cdef list _tool_seen = [set() for _ in range(8)]
cdef Py_ssize_t _tool_cache_names = 0
cdef Py_ssize_t _tool_cache_bytes = 0   # what the entries hold (tapes and texts), about
cdef enum:
    TOOL_CACHE_NAMES = 4096     # names kept per mode before the cache is cleared
    TOOL_BUCKET = 4             # distinct tools kept per name
    MAX_DEPTH = 64
    # Bytes the entries may hold before the cache is cleared (a server rendering the
    # tools its clients send would otherwise keep up to 4096 names x 4 of them,
    # whatever their size), and the largest entry kept (a bigger tool is rendered
    # each time).
    TOOL_CACHE_BYTES = 64 * 1024 * 1024
    TOOL_ENTRY_BYTES = 4 * 1024 * 1024


# A tool is cached with its tape (``af_match`` above): its values in pre-order, a dict
# record followed by key, value, key, value..., a list record by its items. Only exact
# builtin JSON types are taped; any other tool is not cached. (A header holds a str's
# length or a container's size in 32 bits: longer ones are not taped.)


cdef inline Py_ssize_t tape_size(object x, int depth) noexcept:
    """Bytes of the tape of ``x``, or -1 if it cannot be taped (``af_tape_size``)."""
    return af_tape_size(<PyObject*>x, depth)


class _TapeChanged(Exception):
    """(internal) The tool no longer fits the tape that ``tape_size`` measured."""


cdef unsigned char* tape_fill(object x, unsigned char* t, unsigned char* end,
                              list objs, int depth) except NULL:
    """Write the tape of ``x`` (``tape_size`` said it can be taped) at ``t``, never
    past ``end``; returns the end of what it wrote. Big ints are compared by value with
    the object itself, kept in ``objs``. Raises ``_TapeChanged`` where ``x`` is no
    longer what was measured (a record would pass ``end``, or a value is of a type
    that cannot be taped): no Python code runs between the two here, but the check
    costs nothing beside a tool's rendering, and a write past the buffer would corrupt
    the heap."""
    cdef PyObject* p = <PyObject*>x
    cdef af_hdr* h = <af_hdr*>t
    cdef size_t m
    cdef long long ll
    cdef int overflow = 0
    cdef double f
    if end - t < 8:      # a record's header
        raise _TapeChanged()
    h.n = 0
    if af_is_str(p):
        h.tag = AF_T_STR | (<uint32_t>af_kind(p) << 8)
        h.n = <uint32_t>af_len(p)
        m = <size_t>af_len(p) * <size_t>af_kind(p)
        if <size_t>(end - t) - 8 < ((m + 7) & ~(<size_t>7)):
            raise _TapeChanged()
        memcpy(t + 8, af_data(p), m)
        memset(t + 8 + m, 0, ((m + 7) & ~(<size_t>7)) - m)
        return t + 8 + ((m + 7) & ~(<size_t>7))
    if (af_is_dict(p) or af_is_list(p)) and depth > MAX_DEPTH:   # tape_size's limit
        raise _TapeChanged()
    if af_is_dict(p):
        h.tag = AF_T_DICT
        h.n = <uint32_t>len(<dict>x)
        t += 8
        for k, v in (<dict>x).items():
            if not af_is_str(<PyObject*>k):
                raise _TapeChanged()
            t = tape_fill(k, t, end, objs, depth + 1)
            t = tape_fill(v, t, end, objs, depth + 1)
        return t
    if af_is_list(p):
        h.tag = AF_T_LIST
        h.n = <uint32_t>len(<list>x)
        t += 8
        for v in <list>x:
            t = tape_fill(v, t, end, objs, depth + 1)
        return t
    if end - t < 16:     # a number's or a constant's record
        raise _TapeChanged()
    if af_is_int(p):
        ll = PyLong_AsLongLongAndOverflow(x, &overflow)
        if overflow:
            h.tag = AF_T_BIGINT
            objs.append(x)
            memcpy(t + 8, &p, sizeof(PyObject*))
        else:
            h.tag = AF_T_INT
            memcpy(t + 8, &ll, 8)
        return t + 16
    if af_is_float(p):
        h.tag = AF_T_FLOAT
        f = af_float_value(p)
        memcpy(t + 8, &f, 8)
        return t + 16
    if not (p == Py_None or p == Py_True or p == Py_False):
        raise _TapeChanged()
    h.tag = AF_T_CONST       # None, True, False (immortal for the tape's purposes: kept)
    objs.append(x)
    memcpy(t + 8, &p, sizeof(PyObject*))
    return t + 16


cdef class _Tool:
    """A cached tool signature: the text, and the tape of the tool it was rendered
    from. Tools of one name are chained (newest first)."""
    cdef str text
    cdef unsigned char* tape
    cdef list objs          # objects the tape points to
    cdef _Tool next
    cdef Py_ssize_t size    # bytes of the tape and the text

    def __cinit__(self):
        self.tape = NULL

    def __dealloc__(self):
        free(self.tape)


cdef _Tool make_tool(object tool, str text):
    """The cache entry of ``tool``, or None if it cannot be taped.

    The objects are made first: making one may start a cyclic collection, whose
    finalizers (or another thread, which they let run) may edit the tool, so nothing
    may be made between measuring the tape and writing it. (It was: the ``_Tool``,
    and a tool that grew in that window was written past its buffer.)"""
    cdef _Tool t = _Tool.__new__(_Tool)
    cdef Py_ssize_t n
    cdef unsigned char* end
    t.text = text
    t.objs = []
    n = tape_size(tool, 0)
    if n < 0:
        return None
    t.tape = <unsigned char*>malloc(<size_t>n)
    if t.tape == NULL:
        raise MemoryError()
    t.size = n
    try:
        end = tape_fill(tool, t.tape, t.tape + n, t.objs, 0)
    except _TapeChanged:
        return None
    if end != t.tape + n:
        return None
    for x in t.objs:
        # (a big int's record points to the int, which the entry keeps alive: its
        # bytes count towards the cache's bounds too, or a tool with a 1 MB int in a
        # key the template never reads would cost 16 bytes there)
        if type(x) is int:
            t.size += (<object>x).__sizeof__()
    return t


cdef object tool_name(PyObject* tool):
    cdef PyObject* name = get(tool, K_NAME)
    cdef PyObject* fn
    if name == NULL or not af_is_str(name):
        fn = get(tool, K_FUNCTION)
        if fn == NULL or not af_is_dict(fn):
            return None
        name = get(fn, K_NAME)
        if name == NULL or not af_is_str(name):
            return None
    return <object>name



# ---------------------------------------------------------------------------
# Tool signatures written here (cache misses)
# ---------------------------------------------------------------------------
# A tool the cache does not hold is written by ``ts_tool`` below, the general path's
# ``_render_tool`` (and ``ts_type`` and its helpers) restricted to exact JSON types in
# every value it reads: dicts with str keys, lists, str, int, float, bool, None (what
# the template never reads, it never looks at). On those no lookup, truth test or
# comparison runs the caller's code, and the template's rules reduce to the ones
# below. Whatever else the template would do (print a value that is no str with ``+``,
# iterate a string or a dict's keys as a list, test membership in a number, look an
# attribute up on something that is not a dict, compare a str subclass) is declined
# with None, and ``_render_tool`` renders the tool instead, with its errors.
# ``tests/test_render_fast.py`` compares the two on every tool of the corpora, on
# generated ones, and on generated ones holding subclasses of the JSON types.

cdef str TS_COMMENT = "// "
cdef str TS_TYPE = "type "
cdef str TS_IS = " = "
cdef str TS_PARAMS_OPEN = "(_: {\n"
cdef str TS_PARAMS_CLOSE = "}) => any;"
cdef str TS_NO_PARAMS = "() => any;"
cdef str TS_OPTIONAL = "?"
cdef str TS_PARAM_SEP = ",\n"
cdef str TS_DEFAULT = ", // default: "
cdef str TS_ONE_OF_DEFAULT = "// default: "
cdef str TS_PROP_SEP = ": \n" + " " * 16
cdef str TS_UNION = " | "
cdef str TS_UNION_PLAIN = " | \n" + " " * 16
cdef str TS_UNION_TRIM = " | \n"
cdef str TS_DEFAULT_WS_PLAIN = "\n" + " " * 20
cdef str TS_DEFAULT_WS_TRIM = " " * 20
cdef str TS_ENUM_SEP = '" | "'
cdef str TS_ANY = "any"
cdef str TS_ANY_ARRAY = "any[]"
cdef str TS_STRING = "string"
cdef str TS_STRING_NULL = "string | null"
cdef str TS_STRING_ARRAY = "string[]"
cdef str TS_NUMBER = "number"
cdef str TS_NUMBER_ARRAY = "number[]"
cdef str TS_BOOLEAN = "boolean"
cdef str TS_BOOLEAN_ARRAY = "boolean[]"
cdef str TS_OBJECT = "object"
cdef str TS_OBJECT_OBJECT = "object | object"
cdef str TS_ARRAY_SUFFIX = "[]"
cdef str TS_NULL_SUFFIX = " | null"
cdef str TS_OBJECT_OPEN = "{\n"
cdef str K_DESCRIPTION = "description"
cdef str K_PARAMETERS = "parameters"
cdef str K_PROPERTIES = "properties"
cdef str K_REQUIRED = "required"
cdef str K_DEFAULT = "default"
cdef str K_ENUM = "enum"
cdef str K_ONE_OF = "oneOf"
cdef str K_NULLABLE = "nullable"
cdef str K_ITEMS = "items"
cdef object _tojson = None    # _render.tojson(value, jinja_builtin) -> str

cdef enum:
    TS_REQUIRED_SCAN = 32     # longer 'required' lists: _render's set (see _Required)


cdef int truth(PyObject* x) except -2:
    """``if x`` of an exact JSON value (missing: false): 1 or 0; BAIL for any other
    value, whose ``__bool__`` would be the caller's code. (A tool met for the first time
    is written unmeasured, and a ``tojson`` that is Python code may have put anything in
    a measured one since.)"""
    if x == NULL or x == Py_None or x == Py_False:
        return 0
    if x == Py_True:
        return 1
    if af_is_str(x):
        return af_len(x) != 0
    if af_is_list(x):
        return af_list_len(x) != 0
    if PyDict_CheckExact(x):
        return len(<dict><object>x) != 0
    if af_is_int(x) or af_is_float(x):
        return PyObject_IsTrue(<object>x) == 1
    return BAIL


cdef inline bint is_json(PyObject* x):
    """``x`` is of an exact JSON type (its items need not be): comparing it with a str
    runs no code of the caller's. (A str subclass such as markupsafe's ``Markup`` may
    equal ``"string"``; the writer declines it rather than decide.)"""
    return (x == Py_None or x == Py_True or x == Py_False or af_is_str(x) or af_is_int(x)
            or af_is_float(x) or af_is_list(x) or PyDict_CheckExact(x))


cdef inline bint is_literal(PyObject* x, const char* lit, Py_ssize_t n):
    """``x == "lit"`` of an exact JSON value (missing: false)."""
    return x != NULL and af_is_str(x) and af_eq(x, lit, n)


cdef int ts_text(list out, PyObject* x) except -2:
    """``{{ x }}`` of an exact JSON value: a str as it is, anything else its str();
    BAIL for a value whose str() could run the caller's code (one that is not of
    exact JSON types all the way down)."""
    if af_is_str(x):
        out.append(<object>x)
    elif (x == Py_None or x == Py_True or x == Py_False or af_is_int(x) or af_is_float(x)
          or ((af_is_list(x) or PyDict_CheckExact(x)) and af_tape_size(x, 0) >= 0)):
        out.append(str(<object>x))
    else:
        return BAIL
    return 0


cdef int ts_json(list out, PyObject* x, _Dialect d) except -2:
    """``tojson`` of a default, through ``_render``'s (BAIL without one, for a value not
    of exact JSON types all the way down, whose encoding could run the caller's code,
    or when what it gives is not a str)."""
    if _tojson is None or af_tape_size(x, 0) < 0:
        return BAIL
    text = _tojson(<object>x, d.jinja_json)
    if type(text) is not str:
        return BAIL
    out.append(text)
    return 0


cdef int ts_comment(list out, PyObject* x, bint newline) except -2:
    """``"// " + x`` (and a newline) of a description ``x`` that is truthy; nothing for
    a missing or falsy one; BAIL for one the template cannot add to a string."""
    cdef int b = truth(x)
    if b == BAIL:
        return BAIL
    if b:
        if not af_is_str(x):
            return BAIL
        out.append(TS_COMMENT)
        out.append(<object>x)
        if newline:
            out.append(NEWLINE)
    return 0


cdef int ts_missing(PyObject* name, PyObject* required) except -2:
    """``name not in (required or [])``: 1, 0, or BAIL (a number, a value of no JSON
    type, or a list long enough that ``_render`` tests it with a set)."""
    cdef Py_ssize_t i, n
    cdef PyObject* r
    cdef int t = truth(required)
    if t == BAIL:
        return BAIL
    if not t:
        return 1
    if af_is_list(required):
        n = af_list_len(required)
        if n > TS_REQUIRED_SCAN:
            return BAIL
        for i in range(n):
            r = af_list_item(required, i)
            if not is_json(r):
                return BAIL
            if r == name or (af_is_str(r) and <str><object>r == <str><object>name):
                return 0
        return 1
    if af_is_str(required) or af_is_dict(required):
        return 0 if <object>name in <object>required else 1
    return BAIL


cdef int ts_type(list out, PyObject* spec, _Dialect d, int depth) except -2:
    """``_render.ts_type`` of a dict ``spec``, appended to ``out``; else BAIL."""
    cdef PyObject* t
    cdef PyObject* x
    cdef Py_ssize_t i, n
    cdef int b
    if not af_is_dict(spec) or depth > MAX_DEPTH:
        return BAIL
    t = get(spec, K_TYPE)
    if t != NULL and not is_json(t):
        return BAIL
    if is_literal(t, "array", 5):
        return ts_array(out, spec, d, depth)
    if t != NULL and af_is_list(t) and af_list_len(t):
        # a list of types, printed with str() and joined
        n = af_list_len(t)
        for i in range(n):
            if i:
                out.append(TS_UNION)
            if ts_text(out, af_list_item(t, i)) == BAIL:
                return BAIL
        return 0
    x = get(spec, K_ONE_OF)
    b = truth(x)
    if b == BAIL:
        return BAIL
    if b:
        return ts_one_of(out, x, d, depth)
    if t == NULL or not af_is_str(t):
        out.append(TS_ANY)
    elif af_eq(t, "string", 6):
        x = get(spec, K_ENUM)
        b = truth(x)
        if b == BAIL:
            return BAIL
        if b:
            if not af_is_list(x):
                return BAIL       # a string's characters or a dict's keys
            out.append(QUOTE)
            n = af_list_len(x)
            for i in range(n):
                if i:
                    out.append(TS_ENUM_SEP)
                if ts_text(out, af_list_item(x, i)) == BAIL:
                    return BAIL
            out.append(QUOTE)
        else:
            b = truth(get(spec, K_NULLABLE))
            if b == BAIL:
                return BAIL
            out.append(TS_STRING_NULL if b else TS_STRING)
    elif af_eq(t, "number", 6) or af_eq(t, "integer", 7):
        out.append(TS_NUMBER)
    elif af_eq(t, "boolean", 7):
        out.append(TS_BOOLEAN)
    elif af_eq(t, "object", 6):
        return ts_object(out, spec, d, depth)
    else:
        out.append(TS_ANY)
    return 0


cdef int ts_array(list out, PyObject* spec, _Dialect d, int depth) except -2:
    cdef PyObject* items = get(spec, K_ITEMS)
    cdef object keep = <object>items if items != NULL else None
    cdef PyObject* it
    cdef Py_ssize_t mark, i, n
    cdef int b = truth(items)
    if b == BAIL:
        return BAIL
    if items == NULL or not b:
        # (spec['items'] on a dict without the key is the bound dict.items: truthy, of
        # no type, so rendered "any")
        out.append(TS_ANY_ARRAY)
    else:
        if not af_is_dict(items):
            return BAIL
        it = get(items, K_TYPE)
        if is_literal(it, "string", 6):
            out.append(TS_STRING_ARRAY)
        elif is_literal(it, "number", 6) or is_literal(it, "integer", 7):
            out.append(TS_NUMBER_ARRAY)
        elif is_literal(it, "boolean", 7):
            out.append(TS_BOOLEAN_ARRAY)
        else:
            mark = len(out)
            if ts_type(out, items, d, depth + 1) == BAIL:
                return BAIL
            n = 0
            for i in range(mark, len(out)):   # (pieces are str: ts_json checks its own)
                n += af_len(<PyObject*>out[i])
            if n > 50 or (n == 15 and "".join(out[mark:]) == TS_OBJECT_OBJECT):
                del out[mark:]
                out.append(TS_ANY_ARRAY)
            else:
                out.append(TS_ARRAY_SUFFIX)
    b = truth(get(spec, K_NULLABLE))
    if b == BAIL:
        return BAIL
    if b:
        out.append(TS_NULL_SUFFIX)
    return 0


cdef int ts_object(list out, PyObject* spec, _Dialect d, int depth) except -2:
    cdef PyObject* props = get(spec, K_PROPERTIES)
    cdef PyObject* required
    cdef object keep
    cdef Py_ssize_t i = 0, last
    cdef int missing
    cdef int b = truth(props)
    if b == BAIL:
        return BAIL
    if not b:
        out.append(TS_OBJECT)
        return 0
    if not af_is_dict(props):
        return BAIL
    required = get(spec, K_REQUIRED)
    keep = <object>required if required != NULL else None
    out.append(TS_OBJECT_OPEN)
    last = len(<dict><object>props) - 1
    for name, prop in (<dict><object>props).items():
        out.append(name)
        missing = ts_missing(<PyObject*>name, required)
        if missing == BAIL:
            return BAIL
        if missing:
            out.append(TS_OPTIONAL)
        out.append(TS_PROP_SEP)
        if ts_type(out, <PyObject*>prop, d, depth + 1) == BAIL:
            return BAIL
        if i != last:
            out.append(COMMA)
        i += 1
    out.append(OBJECT_CLOSE)
    return 0


cdef int ts_one_of(list out, PyObject* one_of, _Dialect d, int depth) except -2:
    cdef Py_ssize_t i = 0
    cdef PyObject* variant
    cdef PyObject* x
    cdef object keep = <object>one_of, keep_variant
    if not af_is_list(one_of):
        return BAIL
    # (the length is read at each step: a tojson that is Python code may edit the list)
    while i < af_list_len(one_of):
        variant = af_list_item(one_of, i)
        keep_variant = <object>variant
        if ts_type(out, variant, d, depth + 1) == BAIL:
            return BAIL
        if ts_comment(out, get(variant, K_DESCRIPTION), False) == BAIL:
            return BAIL
        x = get(variant, K_DEFAULT)
        if x != NULL:
            out.append(TS_DEFAULT_WS_TRIM if d.trim else TS_DEFAULT_WS_PLAIN)
            out.append(TS_ONE_OF_DEFAULT)
            if ts_json(out, x, d) == BAIL:
                return BAIL
        i += 1
        if i < af_list_len(one_of):
            out.append(TS_UNION_TRIM if d.trim else TS_UNION_PLAIN)
    return 0


cdef object ts_tool(PyObject* tool, _Dialect d):
    """``_render._render_tool`` of a tool made of exact JSON types, or None where it
    declines (see above)."""
    cdef list out = []
    cdef PyObject* x
    cdef PyObject* params
    cdef PyObject* props
    cdef PyObject* required
    cdef Py_ssize_t i = 0, last
    cdef int missing, b
    cdef object keep
    if not af_is_dict(tool):
        return None
    # _unwrap_tool
    if d.openai_shapes or (get(tool, K_DESCRIPTION) == NULL and get(tool, K_NAME) == NULL):
        x = get(tool, K_FUNCTION)
        b = truth(x)
        if b == BAIL:
            return None
        if b:
            if not af_is_dict(x):
                return None
            tool = x
    x = get(tool, K_DESCRIPTION)
    if x == NULL or not af_is_str(x):
        return None
    out.append(TS_COMMENT)
    out.append(<object>x)
    out.append(NEWLINE)
    x = get(tool, K_NAME)
    if x == NULL or not af_is_str(x):
        return None
    out.append(TS_TYPE)
    out.append(<object>x)
    out.append(TS_IS)
    params = get(tool, K_PARAMETERS)
    props = NULL
    b = truth(params)
    if b == BAIL:
        return None
    if b:
        if not af_is_dict(params):
            return None
        props = get(params, K_PROPERTIES)
    b = truth(props)
    if b == BAIL:
        return None
    if not b:
        out.append(TS_NO_PARAMS)
        return "".join(out)
    if not af_is_dict(props):
        return None
    required = get(params, K_REQUIRED)
    keep = <object>required if required != NULL else None
    out.append(TS_PARAMS_OPEN)
    last = len(<dict><object>props) - 1
    for name, spec in (<dict><object>props).items():
        if not af_is_dict(<PyObject*>spec):
            return None
        if ts_comment(out, get(<PyObject*>spec, K_DESCRIPTION), True) == BAIL:
            return None
        out.append(name)
        missing = ts_missing(<PyObject*>name, required)
        if missing == BAIL:
            return None
        if missing:
            out.append(TS_OPTIONAL)
        out.append(KEY_SEP)
        if ts_type(out, <PyObject*>spec, d, 0) == BAIL:
            return None
        x = get(<PyObject*>spec, K_DEFAULT)
        if x != NULL:
            # (x is held by spec until here: no code runs between)
            b = truth(get(<PyObject*>spec, K_ENUM))
            if b == BAIL:
                return None
            if not b:
                b = truth(get(<PyObject*>spec, K_ONE_OF))
                if b == BAIL:
                    return None
                b = 2 if b else 0
            if b:
                # an enum's or a oneOf's default, printed with +
                if not af_is_str(x):
                    return None
                out.append(TS_DEFAULT if b == 1 else TS_ONE_OF_DEFAULT)
                out.append(<object>x)
            else:
                out.append(TS_DEFAULT)
                if ts_json(out, x, d) == BAIL:
                    return None
        out.append(TS_PARAM_SEP if i != last else NEWLINE)
        i += 1
    out.append(TS_PARAMS_CLOSE)
    return "".join(out)


cdef object written(PyObject* tool, _Dialect d):
    """``ts_tool`` with the collector off: no finalizer or ``gc`` callback (and no
    other thread, which they could let run) can edit the tool while it is written,
    and with ``_render.tojson`` no other code runs. (The text is still only cached if
    the tool matches its tape afterwards: ``configure`` may install a ``tojson`` that
    is Python code.)"""
    cdef bint was = PyGC_Disable()
    try:
        return ts_tool(tool, d)
    except Exception:
        # what the template fails on (an int too long to print), or a tool that
        # changed under the writer: _render_tool renders it, or says why it cannot
        return None
    finally:
        if was:
            PyGC_Enable()


def written_tool(tool, dialect):
    """(For tests) The signature ``render`` writes for ``tool`` the first time it meets
    its name in ``dialect`` (a name), or None where it leaves the tool to
    ``_render_tool``. What the writer reads must be of exact JSON types; what it does
    not read (what the template ignores) may be anything."""
    cdef _Dialect d = _dialects[dialect]
    if type(tool) is not dict:
        return None
    return written(<PyObject*>tool, d)


cdef object uncached_text(object tool, _Dialect d):
    """The signature of a tool that is not to be cached (a name met for the first
    time, or no name), or None for the general path. Written without measuring the
    tape first: the writer reads only what the template reads and declines any of it
    that is not of exact JSON types (no code of the caller's runs), so the tool is read
    once. Only a tool it declines is measured: one that cannot be taped may run the
    caller's code in ``_render_tool``, and goes to the general path."""
    cdef object text = written(<PyObject*>tool, d)
    if text is None:
        if tape_size(tool, 0) < 0:
            return None
        text = _render_tool(tool, d.trim, d.jinja_json, d.openai_shapes)
    return text


cdef object tool_text(object tool, _Dialect d):
    """The signature of one tool: from the cache, else rendered by the general path
    (whose errors propagate: the caller falls back to the general path); ``None`` for
    a tool that is not made of exact JSON types (a dict of str, int, float, bool, None,
    lists and dicts): rendering that may run the caller's code (attributes, ``__str__``,
    ``__bool__``), which the general path runs in the template's order."""
    global _tool_cache_names, _tool_cache_bytes
    cdef dict cache = <dict>_tool_caches[d.mode]
    cdef object name, text
    cdef _Tool entry, head, fresh
    cdef PyObject* p = <PyObject*>tool
    cdef PyObject* found
    cdef int depth
    cdef set seen
    cdef Py_hash_t name_hash
    if not af_is_dict(p):
        return None
    name = tool_name(p)
    found = PyDict_GetItemWithError(<PyObject*>cache, <PyObject*>name) if name is not None else NULL
    head = <_Tool>found if found != NULL else None
    entry = head
    while entry is not None:
        if af_match(p, entry.tape, 0) != NULL:
            return entry.text
        entry = entry.next
    if head is None and name is not None:
        # A name met for the first time is written, not cached; from its second time
        # on, it is. A tool that occurs once (every tool of a dataset whose
        # conversations list their own APIs) would only pay for its tape: taping,
        # filing and checking it cost more than writing it.
        seen = <set>_tool_seen[d.mode]
        name_hash = hash(name)
        if name_hash not in seen:
            if len(seen) >= TOOL_CACHE_NAMES:
                seen.clear()
            seen.add(name_hash)
            return uncached_text(tool, d)
        seen.discard(name_hash)
    # The tape of the tool as it is before it renders: the text is cached only if the
    # tool still matches it after (code that ran meanwhile, a finalizer that let
    # another thread run, may have edited it; its text must not be filed under the
    # old version). A tool that cannot be taped (too deep, or holding other types
    # where the template does not look) is written every time and never cached; one
    # the writer declines as well goes to the general path (None).
    if name is None:
        return uncached_text(tool, d)
    fresh = make_tool(tool, "")
    if fresh is None:
        return written(p, d)
    text = written(p, d)
    if text is None:
        text = _render_tool(tool, d.trim, d.jinja_json, d.openai_shapes)
    if type(text) is not str or af_match(p, fresh.tape, 0) == NULL:
        return text
    fresh.text = text
    fresh.size += af_len(<PyObject*>text) * af_kind(<PyObject*>text)
    if fresh.size > TOOL_ENTRY_BYTES:
        return text
    # The name's chain as it is now: the tool rendered in Python code, during which
    # another thread may have filed, evicted or cleared entries (the chain found
    # before, filed again, would hold entries the counts no longer include).
    found = PyDict_GetItemWithError(<PyObject*>cache, <PyObject*>name)
    head = <_Tool>found if found != NULL else None
    if _tool_cache_bytes + fresh.size > TOOL_CACHE_BYTES or (
            head is None and _tool_cache_names >= TOOL_CACHE_NAMES):
        clear_tool_cache()
        head = None
    if head is None:
        _tool_cache_names += 1
    else:
        # keep the newest TOOL_BUCKET tools of a name
        entry = head
        depth = 2
        while entry.next is not None and depth < TOOL_BUCKET:
            entry = entry.next
            depth += 1
        if entry.next is not None:
            _tool_cache_bytes -= entry.next.size
            entry.next = None
        fresh.next = head
    _tool_cache_bytes += fresh.size
    cache[name] = fresh
    return text


def clear_tool_cache():
    """Forget every cached tool signature (and which names were met once)."""
    global _tool_cache_names, _tool_cache_bytes
    for c in _tool_caches:
        (<dict>c).clear()
    for c in _tool_seen:
        (<set>c).clear()
    _tool_cache_names = 0
    _tool_cache_bytes = 0


def tool_cache_size():
    """``(names, bytes)`` the hot path's tool cache holds (for tests)."""
    return _tool_cache_names, _tool_cache_bytes


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

cdef int prelude(Out* o, PyObject* messages, _Dialect d, object date, object enable_thinking,
                 object tools, object tools_text) except -2:
    """BOS is pushed by the caller; the system section, deliberation and tool sections.
    Returns the index of the first message of the main loop, or BAIL."""
    cdef PyObject* first
    cdef PyObject* role
    cdef PyObject* content
    cdef Py_ssize_t start = 0, i, n
    cdef object system, day, text
    cdef PyObject* texts[8]        # the tools' signatures (held), the first eight ...
    cdef list more = None          # ... and the others
    cdef Py_ssize_t ntools = 0
    global _checked_date
    if date is not None and date is not _checked_date:
        _render_date(date)  # a bad date raises: the general path reports it
        _checked_date = date
    # The tool signatures first: a cache miss renders one with the general path, which
    # may run the caller's code (attributes, __str__ of what the tools hold), and once a
    # piece of the messages is recorded (a borrowed pointer) no such code may run: it
    # could drop the last reference to that piece. (tool_text declines what would run
    # it; the length is read again all the same, as indexing is unchecked.)
    if tools_text is None and tools is not None:
        i = 0
        while i < len(<list>tools):
            text = tool_text((<list>tools)[i], d)
            if type(text) is not str:
                return BAIL
            hold(o, text)
            if ntools < 8:
                texts[ntools] = <PyObject*>text
            else:
                if more is None:
                    more = []
                more.append(text)
            ntools += 1
            i += 1
    content = NULL
    if af_list_len(messages):
        first = af_list_item(messages, 0)
        if not af_is_dict(first):
            return BAIL
        role = get(first, K_ROLE)
        if role != NULL and not af_is_str(role):
            return BAIL
        if role != NULL and af_eq(role, "system", 6):
            content = get(first, K_CONTENT)
            if content == NULL:
                return BAIL
            if af_is_dict(content):
                content = get(content, K_TEXT)
                if content == NULL:
                    return BAIL
            if not af_is_str(content):
                return BAIL
            start = 1
    system = d.system
    if start == 0:
        if d.dated:
            # keyed by the date argument itself when it is a string (validated by
            # render_date on the first use); None (today) and date objects go through
            # render_date each time. The strings stay referenced by d.systems (or
            # d.last_system) until a later render.
            if date is d.last_date:
                system = d.last_system
            else:
                system = d.systems.get(date) if type(date) is str else None
                if system is None:
                    day = _render_date(date)
                    system = d.systems.get(day)
                    if system is None:
                        system = SYSTEM_START + d.default_system.replace("{date}", day) + SYSTEM_END
                        if len(d.systems) > 1024:
                            d.systems.clear()
                        d.systems[day] = system
                if type(date) is str:
                    d.systems[date] = system
                    d.last_date = date
                    d.last_system = system
    # The last code that may be Python's ran above (render_date, the tool signatures:
    # code of the caller's, during which another thread may render); the messages'
    # pieces are recorded from here on, with the collector off (gc_off).
    gc_off(o)
    if start:
        push(o, <PyObject*>SYSTEM_START)
        push(o, content)
        push(o, <PyObject*>SYSTEM_END)
    else:
        push(o, <PyObject*>system)
    push(o, <PyObject*>(THINKING_ON if enable_thinking else THINKING_OFF))
    if tools_text is not None:
        if tools or type(tools_text) is not str:
            return BAIL
        push(o, <PyObject*>TOOLS_HEAD)
        push(o, <PyObject*>tools_text)
        push(o, <PyObject*>DEVELOPER_END)
    elif ntools:
        push(o, <PyObject*>TOOLS_HEAD)
        for i in range(ntools):
            if i:
                push(o, <PyObject*>NEWLINE)
            push(o, texts[i] if i < 8 else <PyObject*>(<list>more)[i - 8])
        push(o, <PyObject*>DEVELOPER_END)
    else:
        push(o, <PyObject*>NO_TOOLS)
    return start


cdef inline void out_init(Out* o, PyObject** items, Py_ssize_t cap):
    o.items = items
    o.n = 0
    o.cap = cap
    o.total = 0
    o.maxchar = 127
    o.heap = False
    o.nheld = 0
    o.keep = NULL
    o.marks = NULL
    o.nmarks = 0
    o.capmarks = 0
    o.gc_state = 0


cdef inline void out_free(Out* o):
    cdef int i
    if o.heap:
        free(o.items)
    for i in range(o.nheld):
        Py_DECREF(<object>o.held[i])
    o.nheld = 0
    if o.keep != NULL:
        Py_DECREF(<object>o.keep)
        o.keep = NULL


cdef int configure_now() except -1:
    """Importing ``_render`` configures this module (``configure``). ``apertus_fast``
    imports it on first use of ``render``; this covers code that imports the private
    module first, whose tables would otherwise be empty (every conversation declined,
    then no general path to hand it to)."""
    import apertus_fast._render
    if _general is None:
        raise ImportError("apertus_fast._render did not configure _render_fast")
    return 0


cdef inline bint plain_flag(object x):
    """None, a bool or an int: its truth runs no Python code."""
    return x is None or type(x) is bool or type(x) is int


cdef int fill(Out* o, object messages, object dialect, object tools, object enable_thinking,
              object add_generation_prompt, object continue_assistant_message,
              object date, object bos_token, object tools_text) except -2:
    """The hot path: record the pieces of the rendered text in ``o``, or return BAIL
    for anything unusual (including every input the template rejects)."""
    cdef _Dialect d
    cdef Py_ssize_t start
    global _last_dialect_name, _last_dialect
    if _general is None:
        configure_now()
    if type(messages) is not list or type(bos_token) is not str:
        return BAIL
    # Arguments whose truth or type the caller's code decides (numpy booleans, objects
    # with __bool__, a tuple of tools) go to the general path: the pieces recorded here
    # are borrowed pointers, and such code, run between two pieces, could free one.
    if not (plain_flag(enable_thinking) and plain_flag(add_generation_prompt)
            and plain_flag(continue_assistant_message)):
        return BAIL
    if (tools is not None and type(tools) is not list) or \
            (tools_text is not None and type(tools_text) is not str):
        return BAIL
    if dialect is _last_dialect_name and _last_dialect is not None:  # (None at first)
        d = _last_dialect
    elif type(dialect) is str:
        d = _dialects.get(dialect)
        if d is None:
            return BAIL
        _last_dialect_name = dialect
        _last_dialect = d
    else:
        name = getattr(dialect, "name", None)
        if type(name) is not str or _dialect_objects.get(name) is not dialect:
            return BAIL
        d = _dialects[name]
    if not d.usable:
        return BAIL
    push(o, <PyObject*>bos_token)
    try:
        start = prelude(o, <PyObject*>messages, d, date, enable_thinking, tools, tools_text)
        if start == BAIL:
            return BAIL
        if walk(o, <PyObject*>messages, start, d, bool(continue_assistant_message)) == BAIL:
            return BAIL
        model(o, False)
    except Exception:
        return BAIL   # the general path raises the right error
    if add_generation_prompt:
        push(o, <PyObject*>ASSISTANT_START)
    return 0


# gc_off: from the first recorded piece to the copy, the pieces are borrowed pointers,
# and no code of the caller's may run (fill's checks keep it from the flags and the
# tools). A cyclic collection can: an allocation of a container during the render (the
# list hold() keeps texts in, the spans) may start one, and the finalizers (__del__) it
# runs could drop the last reference to a recorded string. So the collector is off for
# that part of the render, as it was found by an AddressSanitizer run
# (heap-use-after-free in assemble); a render allocates few containers, so the count it
# defers is small. It goes off only after the last Python code the render may run
# (prelude): the collector's switch is the process's, and Python code lets another
# thread run, whose render, starting with the collector off, would not have turned it
# off, while this one turned it back on under it (a use-after-free in that thread).
# With no Python code in between, no other thread runs from gc_off to gc_restore.

cdef object fast_render(object messages, object dialect, object tools, object enable_thinking,
                        object add_generation_prompt, object continue_assistant_message,
                        object date, object bos_token, object tools_text):
    """The rendered text, or ``None`` where the general path must render it."""
    cdef Out o
    cdef PyObject* items[64]
    out_init(&o, items, 64)
    try:
        if fill(&o, messages, dialect, tools, enable_thinking, add_generation_prompt,
                continue_assistant_message, date, bos_token, tools_text) == BAIL:
            return None
        return assemble(&o)
    finally:
        gc_restore(&o)
        out_free(&o)


cdef bint equal_pieces(Out* o, PyObject* text):
    """Whether the recorded pieces spell exactly ``text`` (an exact str)."""
    cdef int kind = af_kind(text)
    cdef const void* data = af_data(text)
    cdef Py_ssize_t pos = 0, i
    cdef PyObject* s
    # equal strings have equal lengths and the same canonical width
    if o.total != af_len(text) or o.maxchar != af_maxchar(text):
        return False
    for i in range(o.n):
        s = o.items[i]
        if not af_equal_at(data, kind, pos, s):
            return False
        pos += af_len(s)
    return True


def matches(text, messages, dialect, tools, enable_thinking, add_generation_prompt,
            continue_assistant_message, date, bos_token, tools_text):
    """Whether ``render`` (arguments as ``fast``'s) gives exactly ``text``, compared piece
    by piece without building the string: ``True`` / ``False``, or ``None`` where the
    hot path does not take the conversation (or ``text`` is not an exact ``str``)."""
    cdef Out o
    cdef PyObject* items[64]
    if not af_is_str(<PyObject*>text):
        return None
    out_init(&o, items, 64)
    try:
        if fill(&o, messages, dialect, tools, enable_thinking, add_generation_prompt,
                continue_assistant_message, date, bos_token, tools_text) == BAIL:
            return None
        return equal_pieces(&o, <PyObject*>text)
    finally:
        gc_restore(&o)
        out_free(&o)


def fast_with_marks(messages, dialect, tools, enable_thinking, add_generation_prompt,
                    continue_assistant_message, date, bos_token, tools_text):
    """The hot path for ``render_with_spans`` (arguments as ``fast``'s): ``(text,
    spans)``, the spans of the model's own text as ``render_with_spans`` returns them,
    or ``None`` where the general path must render."""
    cdef Out o
    cdef PyObject* items[64]
    cdef list spans
    cdef Py_ssize_t k, k_last, start, end, last = -1
    out_init(&o, items, 64)
    o.marks = <Py_ssize_t*>malloc(16 * sizeof(Py_ssize_t))
    if o.marks == NULL:
        raise MemoryError()
    o.capmarks = 16
    try:
        if fill(&o, messages, dialect, tools, enable_thinking, add_generation_prompt,
                continue_assistant_message, date, bos_token, tools_text) == BAIL:
            return None
        spans = []
        # the spans, as _spans._add makes them: empty ones dropped, touching ones merged
        for k in range(1, o.nmarks, 2):
            start = o.marks[k - 1]
            end = o.marks[k]
            if end <= start:
                continue
            if start == last:  # (wraparound is off: no negative index)
                k_last = len(spans) - 1
                spans[k_last] = ((<tuple>spans[k_last])[0], end)
            else:
                spans.append((start, end))
            last = end
        return assemble(&o), spans
    finally:
        gc_restore(&o)
        free(o.marks)
        o.marks = NULL
        out_free(&o)


def fast(messages, dialect, tools, enable_thinking, add_generation_prompt,
         continue_assistant_message, date, bos_token, tools_text):
    """The hot path alone (arguments as ``render``'s, all positional): the text, or
    ``None`` where ``render`` hands the conversation to the general path."""
    return fast_render(messages, dialect, tools, enable_thinking, add_generation_prompt,
                       continue_assistant_message, date, bos_token, tools_text)


def render(messages, *, dialect="apertus-format-reference", tools=None, enable_thinking=False,
           add_generation_prompt=False, continue_assistant_message=False, date=None,
           bos_token="<s>", tools_text=None):
    # ``_render.render`` in the compiled build (its docstring is copied by ``configure``):
    # the hot path, else the general path.
    out = fast_render(messages, dialect, tools, enable_thinking, add_generation_prompt,
                      continue_assistant_message, date, bos_token, tools_text)
    if out is None:
        return _general(messages, dialect, tools, enable_thinking, add_generation_prompt,
                        continue_assistant_message, date, bos_token, tools_text)
    return out
