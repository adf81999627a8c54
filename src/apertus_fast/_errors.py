"""Exception hierarchy: one base class, precise subclasses."""

from __future__ import annotations

import os
import re
import sys
import warnings
from bisect import bisect_left

__all__ = ["ApertusError", "RenderError", "ParseError", "DialectWarning"]


def _restore(cls, args):
    """Unpickle an :class:`ApertusError` without calling ``__init__`` (whose signature
    differs between subclasses); the attributes come back as pickle's state."""
    err = cls.__new__(cls)
    err.args = args
    return err


_NEWLINE = re.compile("\n")


class _Full(Exception):
    """The shown width is reached (:func:`shown`)."""


class _Shown:
    """The pieces of a repr, up to a width (:func:`shown`)."""

    __slots__ = ("parts", "room", "active")

    def __init__(self, width: int):
        self.parts: list = []
        self.room = width
        self.active: set = set()   # the containers being shown (a cycle shows "[...]")

    def add(self, piece: str) -> None:
        self.parts.append(piece)
        self.room -= len(piece)
        if self.room <= 0:
            raise _Full

    def value(self, x) -> None:
        t = type(x)
        if t is str or t is bytes:
            # repr of a prefix, with the quotes the whole value's repr chooses: it picks
            # them by whether ' and " occur, so the prefix carries one of each that does
            n = self.room + 1
            if len(x) > n:
                tail = ("'" if ("'" if t is str else b"'") in x else "") + \
                       ('"' if ('"' if t is str else b'"') in x else "")
                x = x[:n] + (tail if t is str else tail.encode())
            self.add(repr(x))
        elif t is list or t is tuple or t is dict or t is set or t is frozenset:
            if id(x) in self.active:
                self.add("[...]" if t is list else "(...)" if t is tuple else "{...}"
                         if t is dict else f"{t.__name__}(...)")
                return
            self.active.add(id(x))
            try:
                self._items(x, t)
            finally:
                self.active.discard(id(x))
        elif t is int:
            try:
                self.add(repr(x))
            except ValueError:   # more digits than int's string conversion allows
                self.add(f"<int of {x.bit_length()} bits>")
        else:
            try:
                r = repr(x)
            except Exception:    # (a failing or too deeply recursive __repr__)
                r = f"<{t.__name__} object>"
            self.add(r)

    def _items(self, x, t) -> None:
        if t is set or t is frozenset:
            if not x:
                self.add(f"{t.__name__}()")
                return
            self.add("{" if t is set else "frozenset({")
        else:
            self.add("[" if t is list else "(" if t is tuple else "{")
        first = True
        for item in (x.items() if t is dict else x):
            if not first:
                self.add(", ")
            first = False
            if t is dict:
                self.value(item[0])
                self.add(": ")
                self.value(item[1])
            else:
                self.value(item)
        if t is tuple and len(x) == 1:
            self.add(",")
        self.add("]" if t is list else ")" if t is tuple else "}" if t is not frozenset
                 else "})")


def shown(x, width: int) -> str:
    """``repr(x)`` for an error message that names a value, built only as far as it is
    shown: whole when it has at most ``width`` characters, else its first ``width - 3``
    and ``...`` (so that a reader can tell a cut value from a whole one). A value
    nested deeper than ``repr`` can go (whose repr raised RecursionError, in one build
    sooner than in the other), too big to print whole, or holding itself costs its
    first characters; a ``__repr__`` that fails gives ``<T object>``."""
    out = _Shown(width + 1)   # (one more: whether anything follows the width)
    cut = False
    try:
        out.value(x)
    except _Full:
        pass
    except RecursionError:   # (the caller's stack was nearly full: what is there so far)
        cut = True
    text = "".join(out.parts)
    if cut or len(text) > width:
        return text[:max(width - 3, 0)] + "..."
    return text


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


class DialectWarning(UserWarning):
    """Text parsed in one dialect spells a special token of another (such as
    ``<|tool_output_start|>`` in ``apertus-1``), which reads as text there: the text
    was most likely rendered in that other dialect. ``parse`` lists it in the result's
    ``warnings`` and, strict, also warns with this category (``warnings.simplefilter(
    "error", DialectWarning)`` makes it an error)."""


#: This package's directory: frames of its Python modules are not the caller's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn``, attributed to the first frame outside this package (the user's
    call of ``parse``, whether the modules between run compiled, without frames, or as
    Python)."""
    frame = sys._getframe(0)   # (this function's own: this module is never compiled)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


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
