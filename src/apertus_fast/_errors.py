"""Exception hierarchy: one base class, precise subclasses."""

from __future__ import annotations

import re
import reprlib
from bisect import bisect_left
from itertools import islice

__all__ = ["ApertusError", "RenderError", "ParseError"]


def _restore(cls, args):
    """Unpickle an :class:`ApertusError` without calling ``__init__`` (whose signature
    differs between subclasses); the attributes come back as pickle's state."""
    err = cls.__new__(cls)
    err.args = args
    return err


_NEWLINE = re.compile("\n")


class _Shown(reprlib.Repr):
    """``repr`` built only as far as an error message shows it (see :func:`shown`)."""

    def __init__(self, width: int):
        super().__init__()
        # limits that never cut inside the first ``width`` characters: each level,
        # item or key adds at least one; a string (or a number, or another object's
        # repr) longer than 4 * width keeps its first 2 * width characters
        self.maxlevel = width
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = width
        self.maxset = self.maxfrozenset = self.maxdeque = width
        self.maxstring = self.maxlong = self.maxother = 4 * width

    # (reprlib sorts sets and a dict's keys; repr, and so the message, keeps their order)
    def repr_set(self, x, level):
        return self._repr_iterable(x, level, "{", "}", self.maxset) if x else "set()"

    def repr_frozenset(self, x, level):
        return (self._repr_iterable(x, level, "frozenset({", "})", self.maxfrozenset) if x
                else "frozenset()")

    def repr_dict(self, x, level):
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                  for k, v in islice(x.items(), self.maxdict)]
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"

    def repr_int(self, x, level):
        try:
            return super().repr_int(x, level)
        except ValueError:   # more digits than int's string conversion allows
            return f"<int of {x.bit_length()} bits>"


_SHOWN: dict = {}


def shown(x, width: int) -> str:
    """``repr(x)`` cut to ``width`` characters, for an error message that names a value.
    The same text as ``f"{x!r:.{width}}"`` for the values people pass, but built only
    as far as it is shown: a value nested deeper than ``repr`` can go (whose repr
    raised RecursionError, in one build sooner than in the other) or too big to print
    whole costs its first characters; a ``__repr__`` that fails gives the type and the
    address (``<T instance at 0x...>``, as reprlib shows it)."""
    r = _SHOWN.get(width)
    if r is None:
        r = _SHOWN[width] = _Shown(width)
    try:
        return r.repr(x)[:width]
    except Exception:   # (a last resort: reprlib catches a failing __repr__ itself)
        return f"<{type(x).__name__} object>"[:width]


class ApertusError(Exception):
    """Base class of every error apertus-fast raises on bad input.

    Errors pickle and copy with all their attributes, so that they cross process
    boundaries (``multiprocessing``, ``concurrent.futures``) intact: a worker's
    :class:`ParseError` reaches the parent as a :class:`ParseError`.
    """

    def __reduce__(self):
        # BaseException.__reduce__ would call cls(*self.args): a TypeError for
        # ParseError's keyword-only arguments, raised in the process that unpickles
        # (multiprocessing.Pool then hangs waiting for a result that never arrives).
        return _restore, (type(self), self.args), self.__dict__ or None


class RenderError(ApertusError, ValueError):
    """A conversation the chat template rejects (where it would ``raise_exception``
    or fail on a missing or ill-typed attribute).

    ``message_index`` is the index in ``messages`` of the offending message, or
    ``None`` when the problem is not in a message (tools, arguments).
    """

    def __init__(self, reason: str, message_index: int | None = None):
        self.reason = reason
        self.message_index = message_index
        where = f"message {message_index}: " if message_index is not None else ""
        super().__init__(where + reason)


class ParseError(ApertusError, ValueError):
    """Text that no conversation renders to (strict parsing), or undecodable input.

    Carries where (``offset`` in characters of a ``str``, in bytes of UTF-8 input;
    1-based ``line`` and ``column``, counted the same way), what
    was ``expected``, what was ``found``, and a short ``excerpt`` around the offset.
    """

    def __init__(
        self,
        reason: str,
        *,
        offset: int,
        line: int,
        column: int,
        expected: str = "",
        found: str = "",
        excerpt: str = "",
    ):
        self.reason = reason
        self.offset = offset
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
        self.excerpt = excerpt
        parts = [f"{reason} at line {line}, column {column} (offset {offset})"]
        if expected:
            parts.append(f"expected {expected}")
        if found:
            parts.append(f"found {found}")
        msg = "; ".join(parts)
        if excerpt:
            msg += f"\n    {excerpt!r}"
        super().__init__(msg)

    @classmethod
    def at(cls, text, offset: int, reason: str, *, expected: str = "", found: str = "",
           radius: int = 30, lines: "Lines | None" = None) -> "ParseError":
        """Build a ParseError for ``text`` (str or bytes) at character/byte ``offset``,
        computing line, column and excerpt (with ``lines``, a :class:`Lines` of
        ``text``, without counting the text before the offset again)."""
        offset = max(0, min(offset, len(text)))
        if lines is not None:
            line, column = lines.where(offset)
        else:
            nl = b"\n" if isinstance(text, (bytes, bytearray, memoryview)) else "\n"
            head = bytes(text[:offset]) if isinstance(text, memoryview) else text[:offset]
            line = head.count(nl) + 1
            column = offset - head.rfind(nl)  # 1-based (rfind gives -1 on the first line)
        chunk = text[max(0, offset - radius): offset + radius]
        if isinstance(chunk, memoryview):
            chunk = bytes(chunk)
        if isinstance(chunk, (bytes, bytearray)):
            chunk = bytes(chunk).decode("utf-8", "replace")
        return cls(reason, offset=offset, line=line, column=column,
                   expected=expected, found=found, excerpt=chunk)


class Lines:
    """Line and column of offsets in one ``str``, for many lookups: one pass over the
    text's newlines when first asked, then a binary search each (a lenient parse that
    warns at every turn of a long text would otherwise count the text before each
    warning again)."""

    __slots__ = ("text", "newlines")

    def __init__(self, text: str):
        self.text = text
        self.newlines = None

    def where(self, offset: int) -> tuple:
        """``(line, column)``, 1-based, of ``offset`` (``0 <= offset <= len(text)``)."""
        newlines = self.newlines
        if newlines is None:
            newlines = self.newlines = [m.start() for m in _NEWLINE.finditer(self.text)]
        k = bisect_left(newlines, offset)   # the newlines before the offset
        return k + 1, offset - (newlines[k - 1] if k else -1)
