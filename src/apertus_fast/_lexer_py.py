"""Pure-Python twin of ``_lexer.pyx``: the same API and exactly the same results.

Used when the extension is not compiled, and as the second opinion in the
differential tests and the fuzzer. It is deliberately a different implementation:
tokens are found by one compiled regular expression (an alternation of the escaped
spellings), UTF-8 is validated by Python's own decoder (``codecs.utf_8_decode``, whose
``final=False`` mode holds back an incomplete sequence at the end, as the scanner
must), and partial tokens at the end are found by a set of token prefixes.
"""

from __future__ import annotations

import codecs
import re
from array import array

__all__ = ["Table", "scan_chunk", "MAX_TOKEN_LEN", "ERR_INVALID_START",
           "ERR_INVALID_CONTINUATION", "ERR_UNEXPECTED_END", "ERROR_REASONS"]

#: Longest token spelling a :class:`Table` accepts.
MAX_TOKEN_LEN = 32
_MAX_TOKENS = 32

ERR_INVALID_START = 1
ERR_INVALID_CONTINUATION = 2
ERR_UNEXPECTED_END = 3
ERROR_REASONS = {1: "invalid start byte", 2: "invalid continuation byte",
                 3: "unexpected end of data"}
_REASON_CODES = {v: k for k, v in ERROR_REASONS.items()}


def _check_tokens(tokens, start_only, foreign=()):
    """Validate a token table (the same rules as the Cython core). ``foreign``
    spellings come back among the items, with kind 0."""
    items = []
    tokens = dict(tokens)
    foreign = list(foreign)
    for spelling in foreign:
        if spelling in tokens:
            raise ValueError(f"foreign spelling {spelling!r} is a token of the table")
    for spelling, kind in list(tokens.items()) + [(f, 0) for f in foreign]:
        if not isinstance(spelling, str) or not spelling.isascii():
            raise ValueError(f"token spelling must be an ASCII str: {spelling!r}")
        if not (3 <= len(spelling) <= MAX_TOKEN_LEN):
            raise ValueError(f"token spelling must have 3..{MAX_TOKEN_LEN} characters: {spelling!r}")
        if spelling[0] != "<" or "<" in spelling[1:]:
            raise ValueError(f"token spelling must start with '<' and contain no other '<': {spelling!r}")
        kind = int(kind)
        if kind < 0:
            raise ValueError(f"token kind must be >= 0: {kind}")
        items.append((spelling, kind))
    if len(items) > _MAX_TOKENS:
        raise ValueError(f"at most {_MAX_TOKENS} tokens")
    for a, _ in items:
        for b, _ in items:
            if a != b and b.startswith(a):
                raise ValueError(f"token {a!r} is a prefix of {b!r}")
    if len({s for s, _ in items}) != len(items):
        raise ValueError("a foreign spelling is given twice")
    start_only = frozenset(start_only)
    unknown = start_only - {s for s, _ in items if s not in foreign}
    if unknown:
        raise ValueError(f"start_only names unknown tokens: {sorted(unknown)}")
    items.sort()
    return items, start_only


class _Forms:
    """The table in one string type (str or bytes)."""

    def __init__(self, items, start_only, foreign, conv):
        # (a foreign spelling's kind is None: text, whose first place is reported)
        anywhere = [(conv(s), None if s in foreign else k) for s, k in items
                    if s not in start_only]
        self.kinds = dict(anywhere)   # spelling -> kind
        # No capturing groups: they would disable the regex engine's literal-prefix
        # search ("<"), which makes this ~10x faster.
        alternation = b"|".join if conv is _to_bytes else "|".join
        self.regex = re.compile(alternation([re.escape(s) for s, _ in anywhere])) \
            if anywhere else None
        self.start = [(conv(s), k) for s, k in items if s in start_only]
        self.prefixes = {s[:i] for s, _ in anywhere for i in range(1, len(s))}
        self.start_prefixes = {s[:i] for s, _ in self.start for i in range(1, len(s))}
        self.lt = conv("<")


def _to_bytes(s):
    return s.encode("ascii")


def _to_str(s):
    return s


class Table:
    """The special tokens of one dialect (see ``_lexer.pyx``'s ``Table``)."""

    def __init__(self, tokens, start_only=(), foreign=()):
        foreign = tuple(foreign)
        items, start_only = _check_tokens(tokens, start_only, foreign)
        self.foreign = frozenset(foreign)
        self.tokens = {s: k for s, k in items if s not in self.foreign}
        self.start_only = start_only
        self._str = _Forms(items, start_only, self.foreign, _to_str)
        self._bytes = _Forms(items, start_only, self.foreign, _to_bytes)

    def __repr__(self):
        return (f"Table({self.tokens!r}, start_only={set(self.start_only)!r}"
                + (f", foreign={sorted(self.foreign)!r})" if self.foreign else ")"))


def scan_chunk(table, data, pos=0, base=0, run_start=None, final=True):
    """Same contract as ``_lexer.scan_chunk`` (see there)."""
    if not isinstance(table, Table):
        raise TypeError("table must be a _lexer_py.Table")
    if isinstance(data, str):
        forms = table._str
        is_bytes = False
    elif isinstance(data, (bytes, bytearray, memoryview)):
        forms = table._bytes
        is_bytes = True
        if isinstance(data, memoryview):
            if not data.c_contiguous:
                raise BufferError("memoryview is not C-contiguous")
            data = data.tobytes()   # the twin trades a copy for simplicity
    else:
        raise TypeError(f"expected str or UTF-8 bytes, not {type(data).__name__}")
    n = len(data)
    pos = int(pos)
    base = int(base)
    if pos < 0 or pos > n:
        raise ValueError(f"pos {pos} out of range for data of length {n}")
    if base < 0 or base > (1 << 62) - n:
        raise ValueError(f"base {base} out of range")
    rs = base + pos if run_start is None else int(run_start)
    if rs < 0 or rs > base + pos:
        raise ValueError(f"run_start {rs} must be in [0, base + pos]")

    limit = n   # data[limit:] is an incomplete UTF-8 sequence (bytes, not final)
    if is_bytes:
        try:
            _, consumed = codecs.utf_8_decode(memoryview(data)[pos:], "strict", bool(final))
        except UnicodeDecodeError as exc:
            return array("q"), pos, base + pos, pos + exc.start, _REASON_CODES[exc.reason], -1
        limit = pos + consumed
        if limit + 1 < n and data[limit] == 0xED and data[limit + 1] >= 0xA0:
            # ED A0..BF begins a UTF-16 surrogate, which no later byte makes valid, but
            # the incremental decoder holds it back as incomplete; the compiled scanner
            # reports it here, and so does the twin (the final decode says why)
            try:
                codecs.utf_8_decode(bytes(data[limit:limit + 2]), "strict", True)
            except UnicodeDecodeError as exc:
                return array("q"), pos, base + pos, limit + exc.start, _REASON_CODES[exc.reason], -1

    out = array("q")
    foreign_at = -1
    i = pos
    if base + i == 0:
        for spelling, kind in forms.start:
            if data[:len(spelling)] == spelling:
                out.extend((kind, 0, len(spelling)))
                i = len(spelling)
                rs = i
                break
    if forms.regex is not None:
        kinds = forms.kinds
        for m in forms.regex.finditer(data, i, limit):
            j, e = m.span()
            kind = kinds[m.group()]
            if kind is None:   # another dialect's token: text
                if foreign_at < 0:
                    foreign_at = base + j
                i = e
                continue
            if rs < base + j:
                out.extend((0, rs, base + j))
            out.extend((kind, base + j, base + e))
            i = e
            rs = base + e
    stop = limit
    if not final and limit == n:
        k = data.rfind(forms.lt, max(i, n - MAX_TOKEN_LEN), n) if n - i else -1
        if k != -1:
            tail = bytes(data[k:]) if is_bytes else data[k:]   # at most 32 items
            if tail in forms.prefixes or (base + k == 0 and tail in forms.start_prefixes):
                stop = k
    if final and rs < base + n:
        out.extend((0, rs, base + n))
        rs = base + n
    return out, stop, rs, -1, 0, foreign_at
