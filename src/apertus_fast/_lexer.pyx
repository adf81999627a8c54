# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython core of the lexer: a resumable scanner over ``str`` (in place, any PEP 393
kind) and UTF-8 bytes-like input.

This module only knows "token spellings" and "kinds" as small integers; the public
layer (``_lex.py``) builds a :class:`Table` per dialect and turns the flat event buffer
into :class:`~apertus_fast._lex.Event` objects. ``_lexer_py.py`` is the pure-Python twin
with the same API and the same results; see ``docs/lexer.md``.

Algorithm: jump to the next ``<`` (a short inline look, then ``memchr`` for bytes and
1-byte strings, 16 characters a step with SSE2 for 2- and 4-byte strings), pick the
candidate tokens by a hash of the two characters after ``<``, compare them (8-byte
words for bytes), and emit ``TEXT`` for the gap before a token. For bytes, UTF-8 is
validated in blocks ahead of the ``<`` search (16 ASCII bytes per step on the fast
path) with exactly the strictness of ``bytes.decode``. The scan runs without the GIL
for large inputs and without Python objects; events are written straight into the
``array('q')`` that is returned.
"""

from libc.string cimport memchr, memcmp, memcpy, memset
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int64_t, uint64_t
from cpython.ref cimport PyObject
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH
from cpython cimport array
import array as _pyarray
from ._lexer_py import _check_tokens as _check_token_rules
from ._lexer_py import MAX_TOKEN_LEN as _PY_MAX_TOKEN_LEN, _MAX_TOKENS as _PY_MAX_TOKENS
_check_limits = (_PY_MAX_TOKEN_LEN, _PY_MAX_TOKENS)

cdef extern from *:
    """
    static int apertus_lexer_ready(PyObject *o) {
    #if PY_VERSION_HEX < 0x030C0000
        return PyUnicode_READY(o);
    #else
        (void)o;
        return 0;
    #endif
    }
    /* Index of the first '<' in s[j:limit] of a 2- or 4-byte string (limit if there
       is none): 16 characters a step with SSE2 (every x86-64 CPU has it), a plain loop
       elsewhere. 1-byte data uses memchr. */
    #if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    #include <emmintrin.h>
    static Py_ssize_t lx_find_lt_2(const uint16_t *s, Py_ssize_t j, Py_ssize_t limit) {
        const __m128i lt = _mm_set1_epi16(0x3C);
        for (; j + 16 <= limit; j += 16) {
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(s + j)), lt))
                | ((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(s + j + 8)), lt)) << 16);
            if (m) return j + (__builtin_ctz(m) >> 1);
        }
        while (j < limit && s[j] != 0x3C) j++;
        return j;
    }
    static Py_ssize_t lx_find_lt_4(const uint32_t *s, Py_ssize_t j, Py_ssize_t limit) {
        const __m128i lt = _mm_set1_epi32(0x3C);
        for (; j + 16 <= limit; j += 16) {
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(s + j)), lt))
                | ((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(s + j + 4)), lt)) << 16);
            unsigned m2 = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(s + j + 8)), lt))
                | ((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(s + j + 12)), lt)) << 16);
            if (m) return j + (__builtin_ctz(m) >> 2);
            if (m2) return j + 8 + (__builtin_ctz(m2) >> 2);
        }
        while (j < limit && s[j] != 0x3C) j++;
        return j;
    }
    #else
    static Py_ssize_t lx_find_lt_2(const uint16_t *s, Py_ssize_t j, Py_ssize_t limit) {
        while (j < limit && s[j] != 0x3C) j++;
        return j;
    }
    static Py_ssize_t lx_find_lt_4(const uint32_t *s, Py_ssize_t j, Py_ssize_t limit) {
        while (j < limit && s[j] != 0x3C) j++;
        return j;
    }
    #endif
    """
    int apertus_lexer_ready(object o) except -1
    Py_ssize_t lx_find_lt_2(const uint16_t* s, Py_ssize_t j, Py_ssize_t limit) noexcept nogil
    Py_ssize_t lx_find_lt_4(const uint32_t* s, Py_ssize_t j, Py_ssize_t limit) noexcept nogil

__all__ = ["Table", "scan_chunk", "MAX_TOKEN_LEN", "ERR_INVALID_START",
           "ERR_INVALID_CONTINUATION", "ERR_UNEXPECTED_END", "ERROR_REASONS"]

cdef enum:
    _MAX_TOKENS = 32
    _MAX_TOKEN_LEN = 32
    _MAX_WORDS = 4   # _MAX_TOKEN_LEN / 8
    _NOGIL_THRESHOLD = 65536
    _VALIDATE_BLOCK = 4096
    _NBUCKETS = 256
    _INLINE_SEARCH = 16

#: Longest token spelling a :class:`Table` accepts.
MAX_TOKEN_LEN = _MAX_TOKEN_LEN

# UTF-8 error codes; the reasons are the words ``bytes.decode('utf-8')`` uses.
ERR_INVALID_START = 1
ERR_INVALID_CONTINUATION = 2
ERR_UNEXPECTED_END = 3
ERROR_REASONS = {1: "invalid start byte", 2: "invalid continuation byte",
                 3: "unexpected end of data"}

# Results of _match besides a kind >= 0.
cdef enum:
    _NO_MATCH = -1
    _NEED_MORE = -2
    _FOREIGN = -3     # the spelling of a token of another dialect: text, but noted

# Results of _scan besides a stop index >= 0.
cdef enum:
    _SCAN_UTF8_ERROR = -1
    _SCAN_NO_MEMORY = -2


ctypedef struct tok_t:
    unsigned char text[_MAX_TOKEN_LEN]   # zero-padded
    Py_ssize_t length
    int64_t kind
    bint start_only
    # text as 8-byte words with masks (bytes past the end masked out), for comparing
    # byte input a word at a time when 8 * nwords bytes are available
    int nwords
    uint64_t word[_MAX_WORDS]
    uint64_t mask[_MAX_WORDS]

ctypedef struct table_t:
    int ntok
    tok_t tok[_MAX_TOKENS]
    # Tokens are sorted by _hash2(second char, third char) (all are ASCII and at
    # least 3 long); the candidates for hash h are tok[bucket[h]:bucket[h + 1]].
    int bucket[_NBUCKETS + 1]

ctypedef struct evbuf_t:
    # The events are written straight into an array('q') (borrowed reference; the
    # caller owns it), grown with the GIL re-acquired (log n times) and trimmed once.
    PyObject *arr
    int64_t *data
    Py_ssize_t len
    Py_ssize_t cap
    # absolute offset of the first foreign spelling scanned (-1: none)
    int64_t foreign_at

ctypedef fused char_t:
    uint8_t
    uint16_t
    uint32_t


def _check_tokens(tokens, start_only, foreign=()):
    """Validate a token table with the pure-Python twin's rules (one definition of
    them); the core wants the tokens ordered by their third character."""
    items, start_only = _check_token_rules(tokens, start_only, foreign)
    if _check_limits[0] != _MAX_TOKEN_LEN or _check_limits[1] != _MAX_TOKENS:
        raise RuntimeError("the token limits of _lexer and _lexer_py differ")
    items.sort(key=lambda it: (it[0][2], it[0]))
    return items, start_only


cdef class Table:
    """The special tokens of one dialect, compiled for the scanner.

    ``tokens`` maps spelling -> kind (an int >= 0; 0 is reserved for text by the
    public layer but not here). Spellings are ASCII, 3 to ``MAX_TOKEN_LEN`` long,
    start with ``<``, contain no other ``<``, and none is a prefix of another (so at
    most one token matches at a position). Spellings in ``start_only`` are tokens
    only at absolute offset 0 of the stream (``<s>``).

    ``foreign``: spellings that are text here but tokens of another dialect (the same
    rules; none a prefix of another or of a token). They are matched like tokens and
    left in their text run; ``scan_chunk`` reports where the first one was.
    """

    cdef table_t t
    cdef readonly object tokens
    cdef readonly frozenset start_only
    cdef readonly frozenset foreign

    def __init__(self, tokens, start_only=(), foreign=()):
        cdef int i, h, w
        cdef bytes raw
        cdef unsigned char ones[_MAX_TOKEN_LEN]
        foreign = tuple(foreign)
        items, start_only = _check_tokens(tokens, start_only, foreign)
        self.foreign = frozenset(foreign)
        self.tokens = {s: k for s, k in items if s not in self.foreign}
        self.start_only = start_only
        items.sort(key=lambda it: (_hash2(ord(it[0][1]), ord(it[0][2])), it[0]))
        self.t.ntok = len(items)
        for i, (spelling, kind) in enumerate(items):
            raw = spelling.encode("ascii")
            memset(&self.t.tok[i], 0, sizeof(tok_t))
            memcpy(self.t.tok[i].text, <const char*>raw, len(raw))
            self.t.tok[i].length = len(raw)
            self.t.tok[i].kind = _FOREIGN if spelling in self.foreign else kind
            self.t.tok[i].start_only = spelling in start_only
            self.t.tok[i].nwords = (len(raw) + 7) // 8
            for w in range(_MAX_TOKEN_LEN):
                ones[w] = 0xFF if w < len(raw) else 0
            for w in range(self.t.tok[i].nwords):
                memcpy(&self.t.tok[i].word[w], self.t.tok[i].text + 8 * w, 8)
                memcpy(&self.t.tok[i].mask[w], ones + 8 * w, 8)
        # bucket[h] = first token whose hash is >= h
        i = 0
        for h in range(_NBUCKETS + 1):
            while i < self.t.ntok and _hash2(self.t.tok[i].text[1], self.t.tok[i].text[2]) < h:
                i += 1
            self.t.bucket[h] = i

    def __repr__(self):
        return (f"Table({self.tokens!r}, start_only={set(self.start_only)!r}"
                + (f", foreign={sorted(self.foreign)!r})" if self.foreign else ")"))


cdef inline int _hash2(uint32_t c1, uint32_t c2) noexcept nogil:
    """Bucket of a token by its 2nd and 3rd characters (ASCII)."""
    return <int>((c1 * 37u + c2) & (_NBUCKETS - 1))


cdef inline int64_t _match(const char_t *s, Py_ssize_t j, Py_ssize_t n, bint at0,
                           const table_t *t, Py_ssize_t *tlen) noexcept nogil:
    """Token at s[j] (which is '<')? Returns its kind (length in *tlen), _FOREIGN
    (length in *tlen) for a foreign spelling, _NO_MATCH, or _NEED_MORE when s[j:n] is
    a proper prefix of a token or a foreign spelling."""
    cdef Py_ssize_t avail = n - j
    cdef Py_ssize_t m, k
    cdef int a, b, x, h, w
    cdef uint32_t c1, c2
    cdef uint64_t word
    cdef const tok_t *tk
    if avail >= 3:
        c1 = s[j + 1]
        c2 = s[j + 2]
        if c1 >= 128 or c2 >= 128:
            return _NO_MATCH
        h = _hash2(c1, c2)
        a = t.bucket[h]
        b = t.bucket[h + 1]
    else:
        a = 0
        b = t.ntok
    for x in range(a, b):
        tk = &t.tok[x]
        if tk.start_only and not at0:
            continue
        m = tk.length if tk.length <= avail else avail
        if char_t is uint8_t:
            if j + 8 * tk.nwords <= n:   # whole words available: m == tk.length
                k = m
                for w in range(tk.nwords):
                    memcpy(&word, s + j + 8 * w, 8)
                    if (word & tk.mask[w]) != tk.word[w]:
                        k = 0
                        break
            elif memcmp(s + j + 1, tk.text + 1, <size_t>(m - 1)) == 0:
                k = m
            else:
                k = 0
        else:
            k = 1
            while k < m and s[j + k] == tk.text[k]:
                k += 1
        if k == m:
            if m == tk.length:
                tlen[0] = m
                return tk.kind
            return _NEED_MORE   # prefix-free table: no other token can match fully
    return _NO_MATCH


cdef inline Py_ssize_t _utf8_check(const uint8_t *s, Py_ssize_t i, Py_ssize_t stop,
                                   Py_ssize_t n, int *code, Py_ssize_t *end) noexcept nogil:
    """Validate the UTF-8 sequences whose lead byte lies in s[i:stop]; continuation
    bytes are read up to n. Returns -1 if valid (*end = the index after the last
    sequence, >= stop), else the index of the lead byte of the first bad sequence
    (what ``UnicodeDecodeError.start`` says) with *code set."""
    cdef uint64_t w0, w1
    cdef uint8_t c, lo, hi
    cdef Py_ssize_t need, k
    while i < stop:
        while i + 16 <= stop:
            memcpy(&w0, s + i, 8)
            memcpy(&w1, s + i + 8, 8)
            if (w0 | w1) & 0x8080808080808080ULL:
                break
            i += 16
        if i >= stop:
            break
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            code[0] = 1
            return i
        elif c < 0xE0:
            need = 1
            lo = 0x80
            hi = 0xBF
        elif c < 0xF0:
            need = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif c < 0xF5:
            need = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            code[0] = 1
            return i
        if i + 1 >= n:
            code[0] = 3
            return i
        c = s[i + 1]
        if c < lo or c > hi:
            code[0] = 2
            return i
        for k in range(2, need + 1):
            if i + k >= n:
                code[0] = 3
                return i
            if (s[i + k] & 0xC0) != 0x80:
                code[0] = 2
                return i
        i += need + 1
    end[0] = i
    return -1


cdef bint _grow(evbuf_t *b) noexcept with gil:
    cdef array.array arr = <array.array>b.arr
    cdef Py_ssize_t cap = b.cap * 2 if b.cap > 96 else 192
    try:
        array.resize(arr, cap)
    except MemoryError:
        return False
    b.data = <int64_t*>arr.data.as_voidptr
    b.cap = cap
    return True


cdef inline bint _emit(evbuf_t *b, int64_t kind, int64_t start, int64_t end) noexcept nogil:
    if b.len + 3 > b.cap:
        if not _grow(b):
            return False
    b.data[b.len] = kind
    b.data[b.len + 1] = start
    b.data[b.len + 2] = end
    b.len += 3
    return True


cdef Py_ssize_t _scan(const char_t *s, Py_ssize_t n, Py_ssize_t pos, int64_t base,
                      int64_t *run_start, bint final, bint validate, const table_t *t,
                      evbuf_t *out, Py_ssize_t *err_at, int *err_code) noexcept nogil:
    """Scan s[pos:n]. Returns the stop index (s[stop:] is held back: a possible
    token prefix or an incomplete UTF-8 sequence, only when not final), or
    _SCAN_UTF8_ERROR (*err_at, *err_code set) or _SCAN_NO_MEMORY.

    With ``validate`` (bytes), UTF-8 is checked in blocks of up to _VALIDATE_BLOCK
    bytes ahead of the '<' search: any invalid byte aborts the whole scan, so checking
    ahead changes nothing but the number of calls."""
    cdef Py_ssize_t i = pos, j, e, tlen = 0
    cdef Py_ssize_t limit = n      # end of what can be decided (before an incomplete tail)
    cdef Py_ssize_t vend = pos     # s[pos:vend] is valid UTF-8
    cdef Py_ssize_t vstop
    cdef const void *hit
    cdef int64_t kind
    if not validate:
        vend = n
    while True:
        # next '<' at or after i
        # (a short inline look first: '<' often follows closely, e.g. token after token)
        j = i
        e = i + _INLINE_SEARCH if i + _INLINE_SEARCH < limit else limit
        while j < e and s[j] != 0x3C:
            j += 1
        if j == e and j < limit:
            if char_t is uint8_t:
                hit = memchr(s + j, 0x3C, <size_t>(limit - j))
                j = (<const uint8_t*>hit - s) if hit != NULL else limit
            elif char_t is uint16_t:
                j = lx_find_lt_2(s, j, limit)
            else:
                j = lx_find_lt_4(s, j, limit)
        if char_t is uint8_t:
            if j >= vend and vend < limit:
                vstop = j + 1 if j + 1 > vend + _VALIDATE_BLOCK else vend + _VALIDATE_BLOCK
                if vstop > limit:
                    vstop = limit
                e = _utf8_check(s, vend, vstop, n, err_code, &vend)
                if e >= 0:
                    if err_code[0] == 3 and not final:
                        limit = e   # incomplete sequence at the very end: hold it back
                        vend = e
                        if j > limit:
                            j = limit
                    else:
                        err_at[0] = e
                        return _SCAN_UTF8_ERROR
        if j >= limit:
            break
        kind = _match(s, j, n, base + j == 0, t, &tlen)
        if kind >= 0:
            if run_start[0] < base + j:
                if not _emit(out, 0, run_start[0], base + j):
                    return _SCAN_NO_MEMORY
            if not _emit(out, kind, base + j, base + j + tlen):
                return _SCAN_NO_MEMORY
            i = j + tlen
            run_start[0] = base + i
        elif kind == _FOREIGN:
            if out.foreign_at < 0:
                out.foreign_at = base + j
            i = j + tlen     # (text: the run goes on)
        elif kind == _NEED_MORE and not final:
            return j
        else:
            i = j + 1
    if final and run_start[0] < base + limit:
        if not _emit(out, 0, run_start[0], base + limit):
            return _SCAN_NO_MEMORY
        run_start[0] = base + limit
    return limit


cdef Py_ssize_t _scan_dispatch(const void *ptr, int ukind, Py_ssize_t n, Py_ssize_t pos,
                               int64_t base, int64_t *rs, bint final, bint validate,
                               const table_t *t, evbuf_t *out, Py_ssize_t *err_at,
                               int *err_code) noexcept nogil:
    if ukind == 1:
        return _scan(<const uint8_t*>ptr, n, pos, base, rs, final, validate, t, out,
                     err_at, err_code)
    elif ukind == 2:
        return _scan(<const uint16_t*>ptr, n, pos, base, rs, final, False, t, out,
                     err_at, err_code)
    else:
        return _scan(<const uint32_t*>ptr, n, pos, base, rs, final, False, t, out,
                     err_at, err_code)


cdef array.array _INT64 = _pyarray.array("q")


def scan_chunk(Table table not None, data, Py_ssize_t pos=0, int64_t base=0,
               run_start=None, bint final=True):
    """Scan ``data[pos:]`` (``str``, or ``bytes``/``bytearray``/contiguous byte
    ``memoryview`` holding UTF-8) whose index 0 is at absolute offset ``base``.

    ``run_start`` is the absolute offset where the currently open text run began
    (default ``base + pos``: none open). Returns ``(events, stop, run_start, err_at,
    err_code, foreign_at)``: ``events`` is an ``array('q')`` of flat ``kind, start,
    end`` triples (absolute offsets, kind 0 = text); ``data[stop:]`` was not consumed (a possible
    token prefix or incomplete UTF-8 sequence; always empty when ``final``);
    ``run_start`` is the updated start of the open text run (``== base + stop`` when
    none); ``err_at`` is -1, or the index in ``data`` of the first invalid UTF-8
    sequence with ``err_code`` one of the ``ERR_*`` constants (the events are then
    empty). When ``final``, the trailing text run is emitted and token prefixes at
    the end are text.

    ``foreign_at`` is the absolute offset of the first of the table's ``foreign``
    spellings scanned by this call, or -1.
    """
    cdef Py_buffer view
    cdef bint have_view = False
    cdef const void *ptr
    cdef Py_ssize_t n
    cdef int ukind = 1
    cdef bint validate
    cdef int64_t rs
    cdef evbuf_t out
    cdef Py_ssize_t stop = 0, err_at = -1
    cdef int err_code = 0
    cdef array.array res

    if isinstance(data, str):
        apertus_lexer_ready(data)
        ptr = PyUnicode_DATA(data)
        n = PyUnicode_GET_LENGTH(data)
        ukind = PyUnicode_KIND(data)
        validate = False
    elif isinstance(data, (bytes, bytearray, memoryview)):
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        have_view = True
        ptr = view.buf
        n = view.len
        validate = True
    else:
        raise TypeError(f"expected str or UTF-8 bytes, not {type(data).__name__}")
    try:
        if pos < 0 or pos > n:
            raise ValueError(f"pos {pos} out of range for data of length {n}")
        if base < 0 or base > (<int64_t>1 << 62) - n:
            raise ValueError(f"base {base} out of range")
        rs = base + pos if run_start is None else <int64_t>run_start
        if rs < 0 or rs > base + pos:
            raise ValueError(f"run_start {rs} must be in [0, base + pos]")
        res = array.clone(_INT64, 0, False)
        out.arr = <PyObject*>res
        out.data = NULL
        out.len = 0
        out.cap = 0
        out.foreign_at = -1
        if n - pos >= _NOGIL_THRESHOLD:
            with nogil:
                stop = _scan_dispatch(ptr, ukind, n, pos, base, &rs, final, validate,
                                      &table.t, &out, &err_at, &err_code)
        else:
            stop = _scan_dispatch(ptr, ukind, n, pos, base, &rs, final, validate,
                                  &table.t, &out, &err_at, &err_code)
        if stop == _SCAN_NO_MEMORY:
            raise MemoryError()
        if stop == _SCAN_UTF8_ERROR:
            return array.clone(_INT64, 0, False), pos, base + pos, err_at, err_code, -1
        array.resize(res, out.len)
        return res, stop, rs, -1, 0, out.foreign_at
    finally:
        if have_view:
            PyBuffer_Release(&view)


