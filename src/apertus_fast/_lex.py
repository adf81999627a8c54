"""The lexer: ``str`` or UTF-8 bytes -> a flat stream of events.

An event is ``(kind, start, end)``: one per special token of the dialect, and one
``Kind.TEXT`` event per maximal run of text between tokens. Events tile the input
exactly (no gaps, no empty events); offsets are code points for ``str`` and bytes for
bytes-like input. ``<s>`` is a token only at offset 0. See ``docs/lexer.md``.

Entry points:

* :func:`lex` -- one shot, returns a list of :class:`Event`.
* :func:`scan` -- one shot, returns the events as a flat ``array('q')`` of
  ``kind, start, end`` triples (for the parser: no Python object per event).
* :class:`Lexer` -- resumable: ``feed()`` chunks, then ``close()``.

The scanner is the Cython extension ``_lexer`` when it is compiled, else the
pure-Python twin ``_lexer_py`` (:data:`LEXER_BACKEND` says which).
"""

from __future__ import annotations

import bisect
import operator
from array import array
from itertools import repeat
from typing import NamedTuple, Union

from ._dialects import DEFAULT_DIALECT, TOKEN_TEXT, Dialect, Kind, foreign_tokens, get_dialect
from ._errors import ParseError
from . import _lexer_py

try:
    from . import _lexer as _lexer_c
except ImportError:  # not compiled: pure-Python twin
    _lexer_c = None

__all__ = ["Event", "lex", "scan", "Lexer", "LEXER_BACKEND"]

#: ``"cython"`` when the compiled scanner is in use, else ``"python"``.
LEXER_BACKEND = "cython" if _lexer_c is not None else "python"
_DEFAULT_CORE = _lexer_c if _lexer_c is not None else _lexer_py

Data = Union[str, bytes, bytearray, memoryview]


class Event(NamedTuple):
    """One lexer event: ``data[start:end]`` is a special token of kind ``kind``, or
    (``kind is Kind.TEXT``) a maximal run of text between tokens.

    ``start``/``end`` are absolute offsets into the whole input (or the whole stream,
    for :class:`Lexer`): code points for ``str`` input, bytes for bytes-like input.
    """

    kind: Kind
    start: int
    end: int


# Kind by its int value (values are contiguous from 0).
_KIND_BY_VALUE: tuple[Kind, ...] = tuple(sorted(Kind, key=int))
assert [int(k) for k in _KIND_BY_VALUE] == list(range(len(_KIND_BY_VALUE)))
_new_tuple = tuple.__new__
_TABLES: dict = {}


def _core_for(backend):
    if backend is None:
        return _DEFAULT_CORE
    if backend == "cython":
        if _lexer_c is None:
            raise ImportError("the Cython lexer (apertus_fast._lexer) is not compiled")
        return _lexer_c
    if backend == "python":
        return _lexer_py
    raise ValueError(f"unknown lexer backend {backend!r}; use 'cython' or 'python'")


def _table(core, dialect: Dialect, foreign: bool = False):
    """``core``'s table of ``dialect``'s tokens; with ``foreign``, one that also notes
    the other dialects' tokens (``foreign_tokens``), for ``parse``."""
    key = (core.__name__, dialect.token_kinds, foreign)
    table = _TABLES.get(key)
    if table is None:
        start_only = (TOKEN_TEXT[Kind.BOS],) if Kind.BOS in dialect.token_kinds else ()
        tokens = {spelling: int(kind) for spelling, kind in dialect.tokens.items()}
        table = _TABLES[key] = core.Table(tokens, start_only,
                                          foreign_tokens(dialect) if foreign else ())
    return table


def _prepare(data) -> Data:
    """Check the input type; give memoryviews a flat byte layout (offsets in bytes).
    A ``str`` subclass is read by its characters, as an exact ``str`` (the pure-Python
    scanner calls ``len``, which such a class may define otherwise; the compiled one
    reads the characters)."""
    if type(data) is str:
        return data
    if isinstance(data, str):
        return str.__str__(data)
    if isinstance(data, (bytes, bytearray)):
        return data
    if isinstance(data, memoryview):
        if not data.c_contiguous or not data.nbytes:
            return data.tobytes()   # (cast refuses a shape with a zero in it)
        if data.format != "B" or data.ndim != 1:
            return data.cast("B")
        return data
    raise TypeError(f"expected str or UTF-8 bytes (bytes, bytearray, memoryview), "
                    f"not {type(data).__name__}")


def _utf8_found(data, index: int, code: int) -> str:
    """``"<reason>: <bytes>"``: Python's reason, and the bytes of the bad sequence up
    to the offending one (all of them were seen by the scanner, so streaming and
    one-shot lexing say the same)."""
    why = _lexer_py.ERROR_REASONS.get(code, "invalid UTF-8")
    chunk = bytes(data[index:index + 4])
    try:
        chunk.decode("utf-8")
        end = len(chunk)
    except UnicodeDecodeError as exc:
        end = exc.end + (1 if code == _lexer_py.ERR_INVALID_CONTINUATION else 0)
    return f"{why}: {chunk[:end].hex(' ')}"


def utf8_found(data: bytes, exc: UnicodeDecodeError) -> str:
    """``found`` of a ParseError for ``exc`` (``data.decode`` failed): the same words
    and bytes the lexer reports, so that every reader says alike what it found."""
    return _utf8_found(data, exc.start, _lexer_py._REASON_CODES.get(exc.reason, 0))


def _utf8_error(data, index: int, code: int) -> ParseError:
    return ParseError.at(data, index, "invalid UTF-8", expected="valid UTF-8",
                         found=_utf8_found(data, index, code))


def _to_events(buf) -> list[Event]:
    kinds = map(_KIND_BY_VALUE.__getitem__, buf[0::3])
    return list(map(_new_tuple, repeat(Event), zip(kinds, buf[1::3], buf[2::3])))


def scan(data: Data, dialect: str | Dialect = DEFAULT_DIALECT, *, backend: str | None = None) -> array:
    """Lex ``data`` in one shot; return the events as a flat ``array('q')``:
    ``[kind0, start0, end0, kind1, start1, end1, ...]`` (kind as ``int(Kind)``).

    The fast entry point for the parser. Raises :class:`ParseError` on invalid UTF-8
    and ``TypeError`` for anything but ``str``/``bytes``/``bytearray``/``memoryview``.
    """
    data = _prepare(data)
    core = _core_for(backend)
    table = _table(core, get_dialect(dialect))
    buf, _stop, _rs, err, code, _foreign = core.scan_chunk(table, data, 0, 0, None, True)
    if err >= 0:
        raise _utf8_error(data, err, code)
    return buf


def lex(data: Data, dialect: str | Dialect = DEFAULT_DIALECT, *, backend: str | None = None) -> list[Event]:
    """Lex ``data`` (``str``, or UTF-8 ``bytes``/``bytearray``/``memoryview``) with
    the tokens of ``dialect``; return the list of :class:`Event`.

    ``backend`` (``"cython"``/``"python"``) forces one implementation (for tests);
    by default the compiled one is used when available.
    """
    return _to_events(scan(data, dialect, backend=backend))


class Lexer:
    """Resumable lexer: ``feed()`` chunks of one stream, then ``close()``.

    The events returned by all ``feed()`` calls followed by ``close()``, concatenated,
    equal ``lex(whole_stream)`` exactly, with absolute offsets. A chunk may end in
    the middle of a token (``"<|user_"``) or, for bytes, of a UTF-8 sequence; such a
    tail is held back until the next chunk decides it. A ``TEXT`` event is returned
    only once its run is closed (by a token or by ``close()``); the text already known
    to be plain text is available earlier through :meth:`pending_span` and
    :meth:`pending_text`. :meth:`text` slices the stream for the events just returned,
    so a consumer needs no buffer of its own.

    All chunks must be ``str``, or all bytes-like (``TypeError`` otherwise; an empty
    chunk of either type is no data and fits either stream). Invalid
    UTF-8 raises :class:`ParseError` (absolute offset, line, column) from the
    ``feed()``/``close()`` that sees it; the lexer is then closed. ``feed()`` after
    ``close()`` raises ``ValueError``; ``close()`` again returns ``[]``.

    A lexer can be copied (``copy.copy``/``copy.deepcopy``) or pickled mid-stream;
    the copy continues independently of the original.
    """

    def __init__(self, dialect: str | Dialect = DEFAULT_DIALECT, *, backend: str | None = None) -> None:
        self.dialect = get_dialect(dialect)
        self._core = _core_for(backend)
        self._table = _table(self._core, self.dialect)
        self._type = None        # str or bytes, fixed by the first chunk
        self._tail = None        # held-back input at absolute offset self._base
        self._base = 0           # absolute offset of the first unconsumed item
        self._run_start = 0      # absolute start of the open text run (== _base: none)
        # The consumed text from the first event returned by the latest call (or the
        # open run) up to _base, as pieces with their absolute starts.
        self._pieces: list = []
        self._piece_starts: list[int] = []
        self._keep_from = 0      # text() serves [_keep_from, _base)
        self._lines = 0          # newlines in [0, _base)
        self._line_start = 0     # offset just after the last newline in [0, _base)
        self._closed = False

    def __getstate__(self) -> dict:
        # Copies (copy.copy, copy.deepcopy) and pickles of a lexer mid-stream continue
        # independently: e.g. one copy per candidate continuation of a completion.
        # The scanner module is stored by backend name and its token table rebuilt.
        state = self.__dict__.copy()
        state["_core"] = "python" if self._core is _lexer_py else "cython"
        del state["_table"]
        state["_pieces"] = list(self._pieces)
        state["_piece_starts"] = list(self._piece_starts)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        backend = state.pop("_core")
        # A lexer pickled with the compiled scanner continues on the pure-Python twin
        # where the extension is not compiled (the two give identical events).
        core = _lexer_py if backend == "python" or _lexer_c is None else _lexer_c
        self.__dict__.update(state)
        self._core = core
        self._table = _table(core, self.dialect)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (f"<Lexer {self.dialect.name!r} {state} offset={self.offset} "
                f"pending={self.pending_span()}>")

    @property
    def offset(self) -> int:
        """Total length fed so far (code points or bytes); after a ``feed()`` that
        raised, the length before that chunk."""
        return self._base + (len(self._tail) if self._tail is not None else 0)

    @property
    def closed(self) -> bool:
        return self._closed

    def pending_span(self) -> tuple[int, int]:
        """``(start, end)``: absolute span of text already known to be plain text but
        not yet returned as a ``TEXT`` event (``start == end`` when there is none).
        ``start`` stays fixed while the run grows; the event that eventually closes
        the run starts there."""
        if self._closed:
            return (self._base, self._base)
        return (self._run_start, self._base)

    def pending_text(self, start: int | None = None) -> str | bytes:
        """The text of :meth:`pending_span`, from absolute offset ``start`` (default:
        the start of the run; clamped into the span). Streaming consumers can show
        deltas early with ``pending_text(shown_up_to)``. For bytes input this is
        always complete, valid UTF-8 (incomplete sequences are held back)."""
        lo, hi = self.pending_span()
        if start is not None:
            lo = min(max(operator.index(start), lo), hi)
        return self.text(lo, hi)

    def text(self, start: int, end: int) -> str | bytes:
        """The stream's text ``[start, end)`` (absolute offsets), for a span inside
        the events returned by the latest ``feed()``/``close()`` or inside the pending
        span. Older text is not kept: ``ValueError`` for spans outside."""
        empty = self._type() if self._type is not None else ""
        # (offsets are integers: 1.5 or "3" is a TypeError, not a truncated offset)
        start, end = operator.index(start), operator.index(end)
        if start > end:
            raise ValueError(f"reversed span [{start}, {end})")
        if start < self._keep_from or end > self._base:
            # (an empty span too: it was "" anywhere, also far outside the stream)
            raise ValueError(f"span [{start}, {end}) is not available; the lexer keeps "
                             f"[{self._keep_from}, {self._base}) (the latest events and "
                             f"the pending text)")
        if start == end:
            return empty
        idx = bisect.bisect_right(self._piece_starts, start) - 1
        parts = []
        while idx < len(self._pieces) and self._piece_starts[idx] < end:
            piece, at = self._pieces[idx], self._piece_starts[idx]
            parts.append(piece[max(0, start - at): end - at])
            idx += 1
        return parts[0] if len(parts) == 1 else empty.join(parts)

    def feed(self, chunk: Data) -> list[Event]:
        """Lex the next chunk; return the events that are now complete."""
        if self._closed:
            raise ValueError("Lexer.feed() after close()")
        kind = str if isinstance(chunk, str) else bytes
        chunk = _prepare(chunk)
        if self._type is None:
            self._type = kind
            self._tail = kind()
        elif kind is not self._type:
            # an empty chunk carries no data: it neither fixes the stream's type (one
            # fed before any data gives way to the data's) nor mixes another into it
            if not len(chunk):
                kind, chunk = self._type, self._type()
            elif not self.offset:
                self._type = kind
                self._tail = kind()
            else:
                raise TypeError(f"Lexer was fed {self._type.__name__} chunks; cannot mix "
                                f"{type(chunk).__name__} into one stream")
        if kind is bytes and not isinstance(chunk, bytes):
            chunk = bytes(chunk)   # we keep slices; the caller may reuse its buffer
        data = self._tail + chunk if self._tail else chunk
        return self._scan(data, final=False)

    def close(self) -> list[Event]:
        """End of stream: decide the held-back tail, return the last events."""
        if self._closed:
            return []
        if self._type is None:
            self._closed = True
            return []
        events = self._scan(self._tail, final=True)
        self._closed = True
        return events

    def _scan(self, data, final: bool) -> list[Event]:
        base = self._base
        buf, stop, rs, err, code, _foreign = self._core.scan_chunk(
            self._table, data, 0, base, self._run_start, final)
        if err >= 0:
            self._closed = True
            raise self._error(data, err, code)
        # Keep the text from the open run's start (where this call's events begin)
        # to the new _base; drop what lies before it.
        keep = self._keep_from = self._run_start
        # (all at once: one piece at a time was quadratic after a long run fed in
        # one-character chunks, as a model streams it)
        drop = bisect.bisect_right(self._piece_starts, keep) - 1
        if drop > 0:
            del self._pieces[:drop], self._piece_starts[:drop]
        if self._piece_starts and self._piece_starts[0] + len(self._pieces[0]) <= keep:
            self._pieces, self._piece_starts = [], []
        elif self._piece_starts and self._piece_starts[0] < keep:
            # the first piece holds the run's start: drop what lies before it once that
            # is most of the piece (a chunk of 50 MB that ended in an open run of a
            # few characters was kept whole until the run closed)
            first, at = self._pieces[0], self._piece_starts[0]
            if 2 * (keep - at) > len(first):
                self._pieces[0] = first[keep - at:]
                self._piece_starts[0] = keep
        if stop:
            self._pieces.append(data[:stop] if stop < len(data) else data)
            self._piece_starts.append(base)
        nl = "\n" if self._type is str else b"\n"
        count = data.count(nl, 0, stop)
        if count:
            self._lines += count
            self._line_start = base + data.rfind(nl, 0, stop) + 1
        self._tail = data[stop:]
        self._base = base + stop
        self._run_start = rs
        return _to_events(buf)

    def _error(self, data, index: int, code: int) -> ParseError:
        nl = b"\n"
        offset = self._base + index
        line = self._lines + data.count(nl, 0, index) + 1
        last = data.rfind(nl, 0, index)
        column = index - last if last >= 0 else offset - self._line_start + 1
        excerpt = bytes(data[max(0, index - 30): index + 30]).decode("utf-8", "replace")
        return ParseError("invalid UTF-8", offset=offset, line=line, column=column,
                          expected="valid UTF-8", found=_utf8_found(data, index, code),
                          excerpt=excerpt)
