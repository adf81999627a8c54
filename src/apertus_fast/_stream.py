# cython: boundscheck=True, wraparound=True, annotation_typing=False
# (plain Python compiled by Cython: keep Python's index semantics and checks, and its
# acceptance of str subclasses: annotations are for readers and type checkers only)
"""Model output, read as it streams: an assistant turn, chunk by chunk, as deltas.

An inference server renders the prompt with ``add_generation_prompt=True`` (it ends in
``<|assistant_start|>``) and streams what the model writes after it: reasoning,
response text, tool calls. :class:`StreamParser` is fed those chunks as they arrive and
returns :class:`Delta` objects: new reasoning text, new response text, a tool call's
name and pieces of its arguments, tool outputs. :func:`parse_completion` reads a whole
completion at once.

The contract (``docs/streaming.md``; property-tested in ``tests/test_stream.py``):

* **Final.** A delta is never taken back or changed: the parser emits text only once
  no continuation of the stream can read it differently. A token split across chunks
  (``"<|inner_"`` + ``"suffix|>"``) is held back by the lexer; tool-call arguments
  are held back where the call list could still end or split there.
* **Any chunking, same deltas.** The text of the deltas of each kind, concatenated, does
  not depend on how the stream was cut into chunks.
* **Same as one shot.** The structure of the turn (:attr:`Completion.messages`) is what
  lenient :func:`~apertus_fast.parse` reads from the same text, and the deltas agree
  with it: the reasoning deltas spell the turn's ``thoughts``, the response deltas its
  ``response`` blocks, the tool-call deltas its calls (names, and arguments exactly as
  written), the tool-output deltas its outputs.

The builder (``_parse``) decides the structure; this module only follows the text as it
arrives, with the builder's own tests (``json_end``, ``lenient_calls_at``,
``output_group``, ``split_tool_outputs``) at each decision.
"""

from __future__ import annotations

import codecs
import copy
import re
import uuid
from array import array
from typing import TYPE_CHECKING, NamedTuple

from ._dialects import DEFAULT_DIALECT, DIALECTS, Dialect, Kind, get_dialect
from ._errors import ParseError, shown
from ._lex import _core_for, utf8_found
from ._parse import (_NEED_BLOCKS, _Builder, _NeedBlocks, _max_str_digits, json_end, output_group,
                     OPENAI_CALL_KEYS, default_table, dialect_of, lenient_calls_at, plain_str,
                     scan_str, slot_state, split_tool_outputs, state_dict)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = ["Delta", "StreamParser", "Completion", "parse_completion"]

THOUGHTS = "thoughts"
RESPONSE = "response"
TOOL_CALL = "tool_call"
TOOL_OUTPUT = "tool_output"

_TEXT = int(Kind.TEXT)
_BOS = int(Kind.BOS)
_IMAGE = int(Kind.IMAGE)
_AUDIO = int(Kind.AUDIO)
_USER_START = int(Kind.USER_START)
_ASSISTANT_START = int(Kind.ASSISTANT_START)
_ASSISTANT_END = int(Kind.ASSISTANT_END)
_INNER_PREFIX = int(Kind.INNER_PREFIX)
_INNER_SUFFIX = int(Kind.INNER_SUFFIX)
_TOOLS_PREFIX = int(Kind.TOOLS_PREFIX)
_TOOLS_SUFFIX = int(Kind.TOOLS_SUFFIX)
_TOOL_OUTPUT_START = int(Kind.TOOL_OUTPUT_START)
_TOOL_OUTPUT_END = int(Kind.TOOL_OUTPUT_END)
_THINK_START = int(Kind.THINK_START)
_THINK_END = int(Kind.THINK_END)
#: Tokens that are text inside an assistant turn: ``<s>`` (a token only at the very
#: start of a whole conversation) and the media tokens (only in user turns).
_TEXTUAL = frozenset((_TEXT, _BOS, _IMAGE, _AUDIO))


class Delta(NamedTuple):
    """What one piece of model output added.

    ``kind`` is ``"thoughts"`` (reasoning text), ``"response"`` (text for the user),
    ``"tool_call"`` or ``"tool_output"``. ``text`` is the new text: reasoning or
    response text, a piece of a call's arguments (exactly as written), or a whole tool
    output. ``index`` numbers the tool calls (and, separately, the tool outputs) of the
    completion from 0; it is -1 for text. ``name`` is the call's name on the first
    delta of each call (its ``text`` may be empty), ``None`` otherwise.
    """

    kind: str
    text: str
    index: int = -1
    name: str | None = None


# ---------------------------------------------------------------------------
# Following a JSON value as it arrives
# ---------------------------------------------------------------------------

_IN_STRING = re.compile(r'["\\]')
_STRUCTURAL = re.compile(r'["\[\]{}]')
_JSON_START = frozenset('{["-0123456789tfnNI')
_NUMBER_START = frozenset("-0123456789")
#: The longest JSON word (``-Infinity``): a scalar that ``json_end`` still rejects
#: at this length can no longer become one.
_LONGEST_WORD = 9


#: A number as the json module reads it, ``-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?``,
#: as a state machine over its characters (``_Number``): the states, and for each the
#: state a character class leads to (absent: the number cannot go on).
_N_START, _N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_ESIGN, _N_EXP, _N_DEAD = range(10)
_N_NEXT = {
    _N_START: {"-": _N_MINUS, "0": _N_ZERO, "1": _N_INT},
    _N_MINUS: {"0": _N_ZERO, "1": _N_INT},
    _N_ZERO: {".": _N_DOT, "e": _N_E},
    _N_INT: {"0": _N_INT, "1": _N_INT, ".": _N_DOT, "e": _N_E},
    _N_DOT: {"0": _N_FRAC, "1": _N_FRAC},
    _N_FRAC: {"0": _N_FRAC, "1": _N_FRAC, "e": _N_E},
    _N_E: {"-": _N_ESIGN, "+": _N_ESIGN, "0": _N_EXP, "1": _N_EXP},
    _N_ESIGN: {"0": _N_EXP, "1": _N_EXP},
    _N_EXP: {"0": _N_EXP, "1": _N_EXP},
}
#: the character classes: "1" for 1-9, "e" for e and E
_N_CLASS = {c: "1" for c in "123456789"}
_N_CLASS.update({"0": "0", ".": ".", "e": "e", "E": "e", "-": "-", "+": "+"})
_N_ACCEPT = frozenset((_N_ZERO, _N_INT, _N_FRAC, _N_EXP))
_N_DIGIT_LOOP = frozenset((_N_INT, _N_FRAC, _N_EXP))
_DIGITS = re.compile(r"[0-9]*")


def _new(cls):
    """An instance of ``cls`` without ``__init__``, for unpickling (its state follows)."""
    return cls.__new__(cls)


class _Number:
    """``json_end`` of a number as its characters arrive, without reading them again:
    the longest prefix that is a number (the json module's reading), kept up to date by
    a state machine (runs of digits taken by one regex match)."""

    __slots__ = ("state", "size", "accepted", "is_float", "minus", "word")

    def __reduce__(self):   # (every pickle protocol: 0 and 1 refuse __slots__ otherwise)
        return _new, (type(self),), (None, {name: getattr(self, name) for name in self.__slots__})

    def __init__(self):
        self.state = _N_START
        self.size = 0          # characters read
        self.accepted = 0      # the longest number prefix so far (0: none)
        self.is_float = False  # whether that prefix has a fraction or an exponent
        self.minus = False
        self.word = False      # "-I": not a number but maybe -Infinity

    def feed(self, s: str, i: int = 0) -> None:
        st = self.state
        n = len(s)
        while i < n and st != _N_DEAD:
            if st in _N_DIGIT_LOOP and "0" <= s[i] <= "9":
                j = _DIGITS.match(s, i).end()
                self.size += j - i
                i = j
                self.accepted = self.size
                continue
            c = s[i]
            if st == _N_START and c == "-":
                self.minus = True
            elif st == _N_MINUS and c == "I":
                self.word = True
            st = _N_NEXT[st].get(_N_CLASS.get(c, ""), _N_DEAD)
            if st == _N_DEAD:
                break
            i += 1
            self.size += 1
            if st in _N_ACCEPT:
                self.accepted = self.size
                self.is_float = st == _N_FRAC or st == _N_EXP
        self.state = st

    def end(self) -> int:
        """``json_end`` of the characters read: the number's end, or -1."""
        if not self.accepted:
            return -1
        digits = self.accepted - self.minus
        if not self.is_float and digits > 640:
            limit = _max_str_digits()
            if 0 < limit < digits:
                return -1
        return self.accepted


class _JsonWatch:
    """Follows the text of one JSON value (from its first character) as it arrives and
    says when the exact test, ``json_end``, is worth running: once a container or
    string closes (brackets and quotes balanced again), or every time for a scalar.
    For text that is a valid JSON value this tracking is exact, so it never misses the
    end of one; on anything else ``json_end`` has the last word. A number's end is
    kept by a ``_Number`` (``number``), which answers for ``json_end`` on it."""

    __slots__ = ("first", "depth", "in_str", "esc", "closed", "number", "seen", "stop")
    __reduce__ = _Number.__reduce__

    def __init__(self):
        self.first = ""        # the value's first character, "" until it arrives
        self.depth = 0
        self.in_str = False
        self.esc = False
        self.closed = False    # a container or a string has closed ...
        self.stop = 0          # ... this many characters from the value's start
        self.seen = 0          # characters fed (while not closed)
        self.number = None     # a _Number while the value reads as a number

    @property
    def dead(self) -> bool:
        """The text cannot start a JSON value."""
        return self.first != "" and self.first not in _JSON_START

    @property
    def scalar(self) -> bool:
        return self.first != "" and self.first not in '"[{'

    def check(self) -> bool:
        """Whether ``json_end`` may now find the value's end."""
        return self.closed or (self.scalar and not self.dead)

    @property
    def hungry(self) -> bool:
        """Whether more text can still change what the watch says (a scalar other than
        a number is decided by its first character; ``json_end`` reads the rest)."""
        if self.closed:
            return False
        if not self.first or self.first in '"[{':
            return True
        return self.number is not None and self.number.state != _N_DEAD

    def feed(self, s: str) -> None:
        if self.closed or not s:
            return
        self._scan(s)
        if not self.closed:
            self.seen += len(s)

    def _scan(self, s: str) -> None:
        i = 0
        n = len(s)
        if not self.first:
            c = self.first = s[0]
            if c == '"':
                self.in_str = True
            elif c == "[" or c == "{":
                self.depth = 1
            else:
                if c in _NUMBER_START:
                    self.number = _Number()
                    self._feed_number(s)
                return   # a scalar (or not JSON)
            i = 1
        elif self.first not in '"[{':
            if self.number is not None:
                self._feed_number(s)
            return
        while i < n:
            if self.esc:
                self.esc = False
                i += 1
                continue
            if self.in_str:
                m = _IN_STRING.search(s, i)
                if m is None:
                    return
                j = m.start()
                if s[j] == "\\":
                    self.esc = True
                    i = j + 1
                    continue
                self.in_str = False
                i = j + 1
                if self.depth == 0:
                    self.closed = True
                    self.stop = self.seen + i
                    return
                continue
            m = _STRUCTURAL.search(s, i)
            if m is None:
                return
            j = m.start()
            c = s[j]
            i = j + 1
            if c == '"':
                self.in_str = True
            elif c == "[" or c == "{":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    self.closed = True
                    self.stop = self.seen + i
                    return

    def _feed_number(self, s: str) -> None:
        self.number.feed(s)
        if self.number.word:   # json_end reads the word (9 characters at most)
            self.number = None


def _number_end(watch: _JsonWatch, size: int) -> int:
    """The end of a number that ``watch`` follows (``size`` characters of it are there),
    relative to its start, once no further text can change it; -1 if it can never be a
    JSON value, -2 if not decided yet. From the watch's count: the text is not read
    again."""
    number = watch.number
    end = number.end()
    if number.state == _N_DEAD:
        # a character that cannot go on the number has arrived ("1]", "1e,"): no
        # further text changes the longest number prefix, json_end's reading
        return end
    if end < 0:
        return -1 if size >= _LONGEST_WORD else -2
    return -2 if end > size - 3 else end


# ---------------------------------------------------------------------------
# A tool-call list as it arrives
# ---------------------------------------------------------------------------

_FIRST, _HEAD, _NAME, _ARGS, _STOPPED = range(5)
#: A call name longer than this (without its closing ``": ``) is read at the end only.
_MAX_NAME = 256
_CALL_SEP = '}, {"'


#: A _Calls' attributes, its pickled state.
_CALLS_STATE = ("parts", "starts", "n", "phase", "k", "opened", "call_start", "args_start",
                "scanned", "sep", "sep_from", "end", "part", "watch", "events", "finished",
                "mismatch")


class _Calls:
    """The text between ``<|tools_prefix|>`` and ``<|tools_suffix|>`` as it arrives.

    At the end, the builder's reading decides the calls (``lenient_calls_at``: the
    written form, else the lenient reading). Before that, this reader emits what every possible
    end of the body agrees on:

    * a call's name once its ``{"NAME": `` is complete (a name holding ``"`` or a
      newline waits for the end: the two readings differ there; so does a first call
      named as a key of an OpenAI-style call object, ``name``, ``type``, ...);
    * its arguments up to the first position where the reading of some continuation
      could end them: the first ``}, {"`` after them, the end of their JSON value once
      that is complete, and the last 4 characters (a ``}, {"`` or the final ``}]``
      may be arriving);
    * the next call once this one's end is certain in both readings: its JSON value
      followed by ``}, {"``, or (arguments that are not JSON) the first ``}, {"``.

    Anything else waits for the end of the body. ``events`` collects
    ``("name", k, name, pos)`` and ``("args", k, text, pos)`` (body offsets).
    """

    def __getstate__(self) -> dict:
        # (the same state in both builds, so that a stream pickled by one continues in
        # the other: the compiled class would pickle its own way)
        return {name: getattr(self, name) for name in _CALLS_STATE}

    def __reduce__(self):
        return _new, (type(self),), self.__getstate__()

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def __init__(self):
        self.parts: list[str] = []
        self.starts: list[int] = []
        self.n = 0
        self.phase = _FIRST
        self.k = -1              # the open call
        self.opened: list = []   # per call: [name, args start, characters of args emitted]
        self.call_start = 0
        self.args_start = 0
        self.scanned = 0         # body text fed to the watch so far
        self.sep = -1            # first "}, {" + '"' at or after args_start
        self.sep_from = 0
        self.end = -2            # the arguments' JSON end (>0), -1 never, -2 undecided
        self.part = -1           # a number's end so far (it may still grow)
        self.watch = None
        self.events: list = []
        self.finished = False
        self.mismatch = ""       # set if the final reading contradicts an emitted delta

    # -- the body's text ----------------------------------------------------
    def _slice(self, a: int, b: int) -> str:
        """body[a:b] for 0 <= a <= b <= n, joining only the pieces it spans."""
        if a >= b:
            return ""
        parts, starts = self.parts, self.starts
        lo = 0
        hi = len(parts) - 1
        while lo < hi:   # the last piece starting at or before a
            mid = (lo + hi + 1) // 2
            if starts[mid] <= a:
                lo = mid
            else:
                hi = mid - 1
        out = []
        i = lo
        while i < len(parts) and starts[i] < b:
            p, at = parts[i], starts[i]
            out.append(p[max(0, a - at): b - at])
            i += 1
        return out[0] if len(out) == 1 else "".join(out)

    def body(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
            self.starts = [0]
        return self.parts[0] if self.parts else ""

    # -- reading ------------------------------------------------------------
    def feed(self, s: str) -> None:
        self.starts.append(self.n)
        _keep(self.parts, s, self.starts)
        self.n += len(s)
        self._advance()

    def _advance(self) -> None:
        n = self.n
        while True:
            phase = self.phase
            if phase == _FIRST:
                if n == 0:
                    return
                c = self._slice(0, 1)
                if c == "[" or c == "{":   # "{": only the lenient reading, from 0
                    self.call_start = 1 if c == "[" else 0
                    self.phase = _HEAD
                else:
                    self.phase = _STOPPED
            elif phase == _HEAD:
                if n < self.call_start + 2:
                    return
                if self._slice(self.call_start, self.call_start + 2) != '{"':
                    self.phase = _STOPPED
                    return
                self.phase = _NAME
            elif phase == _NAME:
                at = self.call_start + 2
                # (a name is short: read in windows that double, up to the longest
                # name streamed, not the rest of a long chunk)
                step = 32
                while True:
                    hi = min(n, at + min(step, _MAX_NAME + 4))
                    head = self._slice(at, hi)
                    q = -1
                    for i, c in enumerate(head[:_MAX_NAME + 1]):
                        if c == '"' or c == "\n":
                            q = i
                            break
                    if q >= 0 or hi == n or hi == at + _MAX_NAME + 4:
                        break
                    step *= 2
                if q >= 0 and len(head) < q + 3 and hi < n:
                    head = self._slice(at, min(n, at + q + 3))
                if q < 0:
                    if len(head) > _MAX_NAME:
                        self.phase = _STOPPED
                    return
                if head[q] == '"' and len(head) < q + 3:
                    return
                if head[q:q + 3] != '": ':   # a newline or a quote inside the name
                    self.phase = _STOPPED
                    return
                if self.k < 0 and head[:q] in OPENAI_CALL_KEYS:
                    # '[{"name": ' may begin a list of OpenAI-style call objects, which
                    # the builder reads as such: only the end of the list decides
                    self.phase = _STOPPED
                    return
                self.k += 1
                self.args_start = at + q + 3
                self.opened.append([head[:q], self.args_start, 0])
                self.events.append(("name", self.k, head[:q], self.call_start))
                self.scanned = self.sep_from = self.args_start
                self.sep = -1
                self.end = -2
                self.part = -1
                self.watch = _JsonWatch()
                self.phase = _ARGS
            elif phase == _ARGS:
                if not self._args(n):
                    return
            else:
                return

    def _args(self, n: int) -> bool:
        """Read the open call's arguments; True when the next call begins."""
        a = self.args_start
        # Many calls may arrive in one chunk (parse_completion reads a completion as
        # one): the text after this call's end is read in windows that double, and
        # only as far as needed, never copied whole once per call (quadratic).
        w = self.watch
        if self.scanned < n:
            if self.end == -2:
                pos, step = self.scanned, 32
                while pos < n and w.hungry:
                    hi = min(n, pos + step)
                    w.feed(self._slice(pos, hi))
                    pos, step = hi, 2 * step
            self.scanned = n
        if self.sep < 0 and self.sep_from < n:
            lo = max(a, self.sep_from - (len(_CALL_SEP) - 1))
            step = 32
            while True:
                hi = min(n, lo + step)
                i = self._slice(lo, hi).find(_CALL_SEP)
                if i >= 0:
                    self.sep = lo + i
                    break
                if hi == n:
                    break
                lo, step = hi - (len(_CALL_SEP) - 1), 2 * step
            self.sep_from = n
        if self.end == -2:
            if w.dead:
                self.end = -1
            elif w.check():
                size = n - a
                # (a number's end is counted as it arrives: no text is read again; a
                # closed value is read to its close, a word to its longest spelling)
                if w.number is not None:
                    e = w.number.end()
                else:
                    e = json_end(self._slice(a, a + w.stop if w.closed
                                             else min(n, a + _LONGEST_WORD + 1)), 0)
                if e > 0:
                    self.part = a + e
                    # a number may still grow ("1" -> "12", "1e" -> "1e5"): its end is
                    # final once the grammar's look-ahead (3 characters) is there
                    if w.first not in _NUMBER_START or e <= size - 3:
                        self.end = a + e
                elif w.closed or size >= _LONGEST_WORD:
                    self.end = -1
        # the arguments are certain up to: the first "}, {" + '"', the end of their
        # JSON value (a number's end only grows), and a tail that may begin a "}, {"
        # + '"' or be the final "}]"
        bound = n - self._tail_hold(n)
        if self.sep >= 0 and self.sep < bound:
            bound = self.sep
        end = self.end if self.end > 0 else self.part
        if end > 0 and end < bound:
            bound = end
        self._emit_args(bound)
        # where both readings agree that this call ends
        if self.end > 0:
            stop = self.end
            if n < stop + 5:
                return False
            if self._slice(stop, stop + 5) != _CALL_SEP:
                self.phase = _STOPPED
                return False
        elif self.end == -1 and self.sep >= 0:
            stop = self.sep
        else:
            return False
        self._emit_args(stop)
        self.call_start = stop + 3
        self.phase = _HEAD
        return True

    def _tail_hold(self, n: int) -> int:
        """Characters at the end of the arguments that may begin a ``}, {"`` or be the
        final ``}]``: the longest such suffix, starting with ``}``."""
        tail = self._slice(max(self.args_start, n - 4), n)
        for i, c in enumerate(tail):
            if c == "}" and (_CALL_SEP.startswith(tail[i:]) or tail[i:] == "}]"):
                return len(tail) - i
        return 0

    def _emit_args(self, bound: int) -> None:
        call = self.opened[self.k]
        done = call[1] + call[2]
        if bound > done:
            self.events.append(("args", self.k, self._slice(done, bound), done))
            call[2] = bound - call[1]

    def finish(self) -> None:
        """The body is complete: the builder's reading decides the rest."""
        if self.finished:
            return
        self.finished = True
        body = self.body()
        calls = lenient_calls_at(body)[0]
        opened = self.opened
        if len(calls) < len(opened):
            self.mismatch = (f"{len(opened)} tool call(s) were streamed, the call list "
                             f"holds {len(calls)}")
        for k, (name, args, at, head) in enumerate(calls):
            if k < len(opened):
                o_name, o_at, emitted = opened[k]
                if name != o_name or at != o_at or len(args) < emitted:
                    self.mismatch = f"tool call {k} was streamed as {o_name!r}, reads {name!r}"
                    continue
                if len(args) > emitted:
                    self.events.append(("args", k, args[emitted:], at + emitted))
            else:
                self.events.append(("name", k, name, head))
                self.events.append(("args", k, args, at))


# ---------------------------------------------------------------------------
# The stream
# ---------------------------------------------------------------------------

_M_TEXT, _M_CALLS, _M_GROUP, _M_HELD, _M_DONE = range(5)


#: Pieces of a stream's text kept in a list (_keep) before the short ones are joined.
_KEEP_EVERY = 256
#: Pieces this long stay as they are.
_KEEP_LONG = 4096


def _keep(pieces: list, s: str, starts: list | None = None) -> None:
    """``pieces.append(s)``, for a list that is only ever joined whole, or read by
    offset through ``starts`` (where each piece starts, which the caller appends before):
    every ``_KEEP_EVERY`` pieces, the short ones at its end are joined into one, which
    starts where the first of them did. A model streams a few characters a chunk, and a
    str object and a list slot cost about 60 bytes beside them: a long stream's text
    took about 25 bytes a character in each list that keeps it (leak audit). Each
    character is copied a few times at most (until its piece is ``_KEEP_LONG`` long);
    the order and the joined text are unchanged."""
    pieces.append(s)
    n = len(pieces)
    if n % _KEEP_EVERY == 0:
        k = n - 1
        while k > n - _KEEP_EVERY and len(pieces[k - 1]) < _KEEP_LONG:
            k -= 1
        if k < n - 1:
            pieces[k:] = ["".join(pieces[k:])]
            if starts is not None:
                del starts[k + 1:]


def _default_call_id(index: int) -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _turn_body(prompt: str, d: Dialect) -> str:
    """The text of the assistant turn the prompt ends in, after the
    ``<|assistant_start|>`` that opened it (as the builder reads turns: another
    ``<|assistant_start|>`` inside a turn is a stray token, not a new turn)."""
    events = scan_str(prompt, d)
    body_at = -1
    for j in range(0, len(events), 3):
        k = events[j]
        if k == _ASSISTANT_START:
            if body_at < 0:
                body_at = events[j + 2]
        elif k == _ASSISTANT_END or k == _USER_START:
            body_at = -1
    if body_at < 0:
        raise ValueError("the prompt does not end inside an assistant turn: render it with "
                         "add_generation_prompt=True (or continue_assistant_message=True)")
    return prompt[body_at:]


#: What a StreamParser's state is (``__getstate__``): every attribute but the scanner's
#: module and table, which are rebuilt.
_STATE = (
    "dialect", "format", "_brackets", "_tail", "_base", "_run", "_chunks", "_at",
    "_emit_from", "_type", "_decoder", "_bytes_in", "_closed", "_call_id", "_mode", "_inner",
    "_after_calls", "_waiting", "_astart", "_ended", "_calls", "_calls_at", "_calls_no",
    "_group", "_group_at", "_held", "_held_at", "_held_n", "_held_items", "_held_pos",
    "_held_watch", "_held_wait", "_prompt_closed_group", "_out", "_reasoning", "_content",
    "_tool_calls", "_call_index", "_names", "_outputs", "_warnings", "_closed_inner",
)


class StreamParser:
    # The docstring's first line is the signature in the form CPython reads from a
    # compiled class's docstring ("Name(...)\n--\n\n": type.__text_signature__), so that
    # inspect.signature and help() show it for the cdef class of the compiled build too,
    # whose __init__ is a slot wrapper without one. Keep it in step with __init__
    # (tests/test_stream.py compares the two). The pure build drops it from __doc__ below.
    """StreamParser(dialect='apertus-format-reference', *, prompt=None, format='auto', call_id=None)\n--\n\nReads an assistant turn as it streams (a model's completion), one chunk at a time.

    ::

        parser = StreamParser("apertus-1.5")
        for chunk in model_output:             # str (or UTF-8 bytes) pieces
            for delta in parser.feed(chunk):
                ...                            # delta.kind, delta.text, delta.index, delta.name
        parser.close()
        completion = parser.result()           # reasoning, content, tool_calls, messages...

    ``prompt``: the text the completion continues (what the server sent to the model),
    when it ends inside a turn that already has content: a turn continued after tool
    outputs, or prefilled reasoning (``continue_assistant_message=True``). Its part of
    the turn decides how the completion is read (inside reasoning or not, ...) and
    appears in :attr:`Completion.messages`, but produces no deltas. Without it (``None``
    or ``""``) the stream starts at the beginning of a turn, as after the generation
    prompt. Anything but a ``str`` or ``None`` is a ``TypeError``.

    ``format``: of :attr:`Completion.messages`, as :func:`~apertus_fast.parse` takes it.
    ``call_id``: ``call_id(index) -> str``, the OpenAI id given to each tool call
    (default ``"call_"`` and 24 random hex digits), called once per call when its id is
    first asked for (:meth:`openai_delta`, :meth:`Completion.openai`); what it returns
    must be a ``str`` (``TypeError`` there otherwise).

    Model output is read leniently: what :func:`~apertus_fast.parse` with
    ``strict=False`` recovers from is recovered here, and listed in
    :attr:`Completion.warnings`. Only invalid UTF-8 (bytes chunks) raises
    :class:`ParseError`. Text after the end of the turn (after ``<|assistant_end|>``)
    produces no deltas; it is kept in :attr:`Completion.rest`.
    """

    def __init__(self, dialect: str | Dialect = DEFAULT_DIALECT, *, prompt: str | None = None,
                 format: str = "auto", call_id: Callable[[int], str] | None = None):
        if format not in ("auto", "string", "blocks"):
            raise ValueError(f"format must be 'auto', 'string' or 'blocks', got {format!r}")
        self.dialect = d = dialect_of(dialect)
        self.format = format
        self._brackets = d.tool_output_open == "["
        # the lexer's resumable core (what _lex.Lexer wraps, without its bookkeeping:
        # this parser keeps the text itself)
        self._core = _core_for(None)
        self._table = default_table(d)
        self._tail = ""                 # text the scanner holds back (a token may begin there)
        self._base = 0                  # absolute offset of _tail
        self._run = 0                   # absolute start of the open text run
        self._chunks: list[str] = []    # the turn's text: the prompt's part, then the completion
        self._at = 0                    # the text is read up to here
        self._emit_from = 0             # where the completion begins
        self._type = None               # str or bytes, fixed by the first chunk
        self._decoder = None
        self._bytes_in = 0
        self._closed = False
        if call_id is not None and not callable(call_id):
            raise TypeError(f"call_id must be a callable (index -> str) or None, not "
                            f"{type(call_id).__name__}")
        self._call_id = call_id if call_id is not None else _default_call_id
        # the builder's state machine (_parse._Builder.blocks_body), as the text arrives
        self._mode = _M_TEXT
        self._inner = False
        self._closed_inner = False      # the completion closed reasoning
        self._after_calls = False
        self._waiting = False
        self._astart = False            # an <|assistant_start|> is the last event so far
        self._ended = False
        self._calls: _Calls | None = None
        self._calls_at = 0              # absolute offset of the open call list's text
        self._calls_no = 0              # calls groups opened
        self._group: list[str] = []     # a <|tool_output_start|> group's text
        self._group_at = 0
        self._held: list[str] = []      # a text run after the calls that may be "[a, b]"
        self._held_at = 0
        self._held_n = 0
        self._held_items: list[str] = []
        self._held_pos = 1
        self._held_watch: _JsonWatch | None = None
        self._held_wait = False         # decided only where the run ends
        self._prompt_closed_group = False   # the prompt's end closed a [...] group
        # the completion so far
        self._out: list[list] = []      # this feed's deltas: [kind, [pieces], index, name]
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._tool_calls: list[list] = []   # [name, [argument pieces], id]
        self._call_index: dict = {}         # (calls group, k) -> index
        self._names: dict = {}              # (calls group, k) -> name
        self._outputs: list[list[str]] = []
        self._warnings: list[str] = []
        if prompt is not None:
            # (the type first: b"" or [] is a wrong type, not "no prompt")
            if not isinstance(prompt, str):
                raise TypeError(f"prompt must be a str or None, not {type(prompt).__name__}")
            prompt = plain_str(prompt)
        if prompt:   # ("" is no prompt, as None is)
            body = _turn_body(prompt, d)
            self._emit_from = len(body)
            if body:
                self._feed_text(body)
                if self._mode == _M_HELD and not self._tail:
                    self._prompt_group()   # (a tail: the prompt goes on after the run)
                self._out = []
                self._closed_inner = False   # (the completion's, not the prompt's)

    def __getstate__(self) -> dict:
        # copy.copy / copy.deepcopy / pickle mid-stream (one parser per candidate
        # continuation, or a stream handed to another process): the scanner module and
        # its table are rebuilt, a built-in dialect is looked up by name
        self._ids()
        state = dict(getattr(self, "__dict__"))   # (compiled: only what a subclass adds)
        state.pop("_core", None)
        state.pop("_table", None)
        for name in _STATE:
            state[name] = getattr(self, name)
        # a built-in dialect by its name; one of your own as itself (by its name it
        # was unknown, or another dialect's, where the stream was unpickled)
        d = self.dialect
        state["dialect"] = d.name if DIALECTS.get(d.name) == d else d
        return state

    def __setstate__(self, state: dict) -> None:
        if "_closed_inner" not in state:   # (a pickle of an earlier version)
            state = {**state, "_closed_inner": bool(state["_reasoning"])}
        for name, value in state.items():
            setattr(self, name, value)
        self.dialect = get_dialect(state["dialect"])
        self._core = _core_for(None)
        self._table = default_table(self.dialect)

    def __reduce__(self):
        # (every pickle protocol, both builds: the compiled class is no heap type,
        # which protocols 0 and 1 cannot pickle by default)
        return _new, (type(self),), self.__getstate__()

    def __copy__(self) -> "StreamParser":
        # a copy shares nothing with the original (the id function excepted)
        return copy.deepcopy(self, {id(self._call_id): self._call_id})

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("done" if self._ended else "open")
        return (f"<StreamParser {self.dialect.name!r} {state} read={self._at} "
                f"calls={len(self._tool_calls)}>")

    # -- input --------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether the turn has ended (``<|assistant_end|>``, or a ``<|user_start|>``):
        the server can stop generating; later text only lands in ``rest``."""
        return self._ended

    @property
    def closed(self) -> bool:
        return self._closed

    def feed(self, chunk: str | bytes) -> list[Delta]:
        """Read the next chunk of model output; return the deltas it completes."""
        if self._closed:
            raise ValueError("StreamParser.feed() after close()")
        self._feed_text(self._decode(chunk, final=False))
        return self._flush()

    def _feed_text(self, text: str) -> None:
        _keep(self._chunks, text)
        self._scan(self._tail + text if self._tail else text, False)

    def _scan(self, data: str, final: bool) -> None:
        """Lex data (the held-back tail and the new text, at absolute offset _base) and
        read its events, then the text known to be plain text so far."""
        base = self._base
        buf, stop, self._run, _err, _code, _foreign = self._core.scan_chunk(
            self._table, data, 0, base, self._run, final)
        at = self._at
        for j in range(0, len(buf), 3):
            k = buf[j]
            end = buf[j + 2]
            if k in _TEXTUAL:
                if end > at:
                    self._text(data[at - base:end - base], at)
                    at = self._at = end
            else:
                at = self._at = end
                self._token(k)
        # the open run: plain text up to where the held-back tail begins
        if base + stop > at:
            self._text(data[at - base:stop], at)
            self._at = base + stop
        self._tail = data[stop:]
        self._base = base + stop

    def close(self) -> list[Delta]:
        """The end of the completion: decide what was held back; return the last deltas.
        Bytes that end inside a character are dropped, with a warning. After a
        ParseError for invalid UTF-8 (which closed the parser), the deltas of the text
        decoded before the bad byte; then, and after a close, ``[]``."""
        if self._closed:
            return self._flush()
        if self._decoder is not None:
            held = self._decoder.getstate()[0]
            if held:
                # the bytes end inside a character (a token limit cut it): read without
                # them, as parse(strict=False) reads such text
                self._decoder.reset()
                text = "".join(self._chunks)
                err = ParseError.at(text, len(text), "")
                self._warnings.append(
                    f"line {err.line}, column {err.column}: the completion ends inside a "
                    f"UTF-8 character: its {len(held)} byte(s) dropped")
        self._finish()
        return self._flush()

    def _finish(self) -> None:
        """The text has ended: decide what was held back, and close."""
        self._scan(self._tail, True)
        self._end_run()
        if self._astart:
            self._astart = False
            self._ended = True
        self._closed = True

    def _decode(self, chunk, final: bool) -> str:
        kind = str if isinstance(chunk, str) else bytes
        if kind is bytes and not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError(f"feed() takes str or UTF-8 bytes, not {type(chunk).__name__}")
        if kind is not self._type and \
                not (plain_str(chunk) if kind is str else memoryview(chunk).nbytes):
            # an empty chunk carries no data: it neither fixes the stream's type (a
            # server's first delta is often "") nor mixes another into it
            return ""
        if self._type is None:
            self._type = kind
            if kind is bytes:
                self._decoder = codecs.getincrementaldecoder("utf-8")()
        elif kind is not self._type:
            raise TypeError(f"StreamParser was fed {self._type.__name__} chunks; cannot mix "
                            f"{type(chunk).__name__} into one stream")
        if kind is str:
            return plain_str(chunk)
        data = bytes(chunk)
        held = self._decoder.getstate()[0]
        try:
            text = self._decoder.decode(data, final)
        except UnicodeDecodeError as exc:
            error = self._utf8_error(held + data, exc, self._bytes_in - len(held))
            # the stream ends at the bad byte: what decoded before it is read, and the
            # reading finished as close() does, so that result() is the reading of
            # text (its fields agree with its messages; nothing held back is lost)
            self._decoder = None
            good = (held + data)[:exc.start].decode("utf-8")
            if good:
                self._feed_text(good)
            self._finish()   # (its deltas wait for close(), which returns them)
            raise error from None
        self._bytes_in += len(data)
        return text

    def _utf8_error(self, data: bytes, exc: UnicodeDecodeError, base: int) -> ParseError:
        """The error at ``exc.start`` of ``data`` (the decoder's held bytes and the new
        chunk, at byte ``base`` of the completion): offset, line and column in bytes of
        the completion (the prompt's part of the turn is not counted)."""
        completion = "".join(self._chunks)[self._emit_from:]
        seen = completion.encode("utf-8")[:base] + data[:exc.start]
        offset = len(seen)
        last = seen.rfind(b"\n")
        excerpt = (seen[-30:] + data[exc.start:exc.start + 30]).decode("utf-8", "replace")
        return ParseError("invalid UTF-8", offset=offset, line=seen.count(b"\n") + 1,
                          column=offset - last, expected="valid UTF-8",
                          found=utf8_found(data, exc),
                          excerpt=excerpt)

    # -- events -------------------------------------------------------------
    def _token(self, k: int) -> None:
        mode = self._mode
        if mode == _M_DONE:
            return
        self._astart = False    # (one was not the last event: an unexpected token)
        if mode == _M_GROUP and (k == _THINK_START or k == _THINK_END):
            # text of the tool outputs, as the builder reads it (docs/format.md, 15)
            self._group.append("<think>" if k == _THINK_START else "</think>")
            return
        if k == _THINK_START:
            k = _INNER_PREFIX
        elif k == _THINK_END:
            k = _INNER_SUFFIX
        if mode == _M_CALLS:
            self._end_calls()
            if k == _TOOLS_SUFFIX:
                # a complete call list waits for its outputs: the completion's
                # finish_reason is "tool_calls" if the list made a call in it (not
                # a list of none, nor the prompt's calls: the last call made is
                # the last entry of the ordered _call_index, keyed by list)
                last = next(reversed(self._call_index), None)
                self._waiting = last is not None and last[0] == self._calls_no
                return
        elif mode == _M_GROUP:
            self._end_group()
            if k == _TOOL_OUTPUT_END:
                return
        elif mode == _M_HELD:
            self._end_held()
        self._after_calls = False
        if k == _ASSISTANT_END or k == _USER_START:
            self._mode = _M_DONE
            self._ended = True
        elif k == _ASSISTANT_START:
            self._astart = True
        elif k == _INNER_PREFIX:
            self._inner = True
        elif k == _INNER_SUFFIX:
            if self._inner:     # (reasoning closed: an answer, if an empty one, began)
                self._closed_inner = True
            self._inner = False
        elif k == _TOOLS_PREFIX:
            self._waiting = False
            self._mode = _M_CALLS
            self._calls = _Calls()
            self._calls_at = self._at
            self._calls_no += 1
        elif k == _TOOL_OUTPUT_START and not self._brackets:
            self._mode = _M_GROUP
            self._group = []
            self._waiting = False   # (outputs follow the calls, if cut off: not waiting)
            self._group_at = self._at
        # any other token is skipped (the builder warns about it)

    def _text(self, s: str, at: int) -> None:
        if not s:
            return
        self._astart = False
        mode = self._mode
        if mode == _M_TEXT:
            if self._after_calls:
                self._after_calls = False
                if self._brackets and s[0] == "[":
                    self._mode = _M_HELD
                    self._held = []
                    self._held_at = at
                    self._held_n = 0
                    self._held_items = []
                    self._held_pos = 1
                    self._held_watch = None
                    self._held_wait = False
                    self._held_feed(s)
                    return
            self._say(RESPONSE if not self._inner else THOUGHTS, s, at)
        elif mode == _M_CALLS:
            self._calls.feed(s)
            self._drain()
        elif mode == _M_GROUP:
            _keep(self._group, s)
        elif mode == _M_HELD:
            self._held_feed(s)
        # _M_DONE: text after the turn (Completion.rest)

    def _end_run(self) -> None:
        """The stream ended: decide the open calls / outputs / held run."""
        if self._mode == _M_CALLS:
            self._end_calls()
            self._after_calls = False   # (cut off inside the list: not closed)
        elif self._mode == _M_GROUP:
            self._end_group()
        elif self._mode == _M_HELD:
            self._end_held()

    # -- deltas -------------------------------------------------------------
    def _clip(self, s: str, at: int):
        """The part of s (at offset at) that lies in the completion, or None."""
        start = self._emit_from
        if at >= start:
            return s
        if at + len(s) <= start:
            return None
        return s[start - at:]

    def _say(self, kind: str, s: str, at: int) -> None:
        s = self._clip(s, at)
        if not s:
            return
        _keep(self._reasoning if kind == THOUGHTS else self._content, s)
        out = self._out
        if out and out[-1][0] == kind:
            out[-1][1].append(s)
        else:
            out.append([kind, [s], -1, None])

    def _flush(self) -> list[Delta]:
        out = self._out
        self._out = []
        return [Delta(kind, parts[0] if len(parts) == 1 else "".join(parts), index, name)
                for kind, parts, index, name in out]

    def _drain(self) -> None:
        calls = self._calls
        base = self._calls_at
        group = self._calls_no
        for what, k, value, pos in calls.events:
            key = (group, k)
            if what == "name":
                self._names[key] = value
                if base + pos >= self._emit_from:
                    self._call_delta(key, "")
                continue
            text = self._clip(value, base + pos)
            if text is None or (not text and base + pos < self._emit_from):
                continue
            self._call_delta(key, text)
        calls.events.clear()
        if calls.mismatch:
            self._warnings.append(f"internal: the streamed tool calls differ from the call "
                                  f"list's reading ({calls.mismatch})")
            calls.mismatch = ""

    def _id(self, index: int) -> str:
        """The call's OpenAI id, made on first use: ``uuid4`` (the default) reads the OS's
        random source, which a reading that never asks for ids need not pay for."""
        return _call_id_of(self._tool_calls, self._call_id, index)

    def _ids(self) -> None:
        """Give every call so far its id (before a copy: the copies keep the same ids)."""
        for index in range(len(self._tool_calls)):
            self._id(index)

    def _call_delta(self, key, text: str) -> None:
        index = self._call_index.get(key)
        name = None
        if index is None:
            index = self._call_index[key] = len(self._tool_calls)
            name = self._names[key]
            self._tool_calls.append([name, [], None])   # (its id: made when asked, _id)
        if text:
            _keep(self._tool_calls[index][1], text)
        elif name is None:
            return
        out = self._out
        if out and out[-1][0] == TOOL_CALL and out[-1][2] == index:
            out[-1][1].append(text)
        else:
            out.append([TOOL_CALL, [text], index, name])

    def _output(self, s: str, at: int) -> None:
        text = self._clip(s, at)
        if text is None or (not text and at < self._emit_from):
            return
        index = len(self._outputs)
        self._outputs.append([text])
        self._out.append([TOOL_OUTPUT, [text], index, None])

    # -- tool calls ---------------------------------------------------------
    def _end_calls(self) -> None:
        self._calls.finish()
        self._drain()
        self._calls = None
        self._mode = _M_TEXT
        self._after_calls = True

    # -- tool outputs (<|tool_output_start|> ... <|tool_output_end|>) -------
    def _end_group(self) -> None:
        pos = self._group_at
        for o in split_tool_outputs("".join(self._group)):
            self._output(o, pos)
            pos += len(o) + 2
        self._group = []
        self._mode = _M_TEXT
        self._waiting = False

    # -- tool outputs written as "[a, b]" right after the calls --------------
    def _held_feed(self, s: str) -> None:
        self._held.append(s)
        self._held_n += len(s)
        if self._held_wait:
            return
        w = self._held_watch
        if w is not None:
            w.feed(s)
        self._held_check()

    def _held_run(self) -> str:
        if len(self._held) > 1:
            self._held = ["".join(self._held)]
        return self._held[0]

    def _held_slice(self, a: int, b: int) -> str:
        """run[a:b] for 0 <= a <= b <= _held_n, joining only the pieces it spans. They
        are found from the run's end: the reader works at its end, and the run is
        joined whole only once, where the group is decided."""
        held = self._held
        i = len(held)
        if i == 1:   # (one chunk, as parse_completion reads it)
            return held[0][a:b]
        end = self._held_n
        out = []
        while i > 0 and end > a:
            i -= 1
            p = held[i]
            start = end - len(p)
            if start < b:
                out.append(p[max(0, a - start): b - start])
            end = start
        if len(out) == 1:
            return out[0]
        out.reverse()
        return "".join(out)

    def _held_end(self, w: _JsonWatch, pos: int, n: int) -> int:
        """The end of the item at ``pos`` that ``w`` follows (``n`` characters of
        the run are there) once no further text can change it (> pos), -1 if it can
        never be a JSON value, -2 if not decided yet. It reads only the item: a
        closed value to its close, a word to its longest spelling, a number not at all
        (its end is counted as it arrives)."""
        if w.number is not None:
            end = _number_end(w, n - pos)
            return end if end < 0 else pos + end
        end = json_end(self._held_slice(pos, pos + w.stop if w.closed
                                        else min(n, pos + _LONGEST_WORD + 1)), 0)
        if end < 0:
            return -1 if w.closed or n - pos >= _LONGEST_WORD else -2
        # a number may go on ("1" -> "12", "1e" -> "1e5"): decided once three more
        # characters are there, the longest look-ahead of the number grammar
        if w.first in _NUMBER_START and end > n - pos - 3:
            return -2
        return pos + end

    def _held_check(self) -> None:
        """Decide the group as soon as ``output_group`` on any longer run would give
        the same answer: JSON items, each followed by ``", "``, the last by ``"]"``.
        Anything else is decided where the run ends. (Many items may arrive in one
        chunk, or an item in many: each is read in windows that double, as far as it
        needs, never the rest of the run once per item, which was quadratic.)"""
        while True:
            pos = self._held_pos
            n = self._held_n
            if pos >= n:
                return
            w = self._held_watch
            if w is None:
                if self._held_slice(pos, pos + 1) == "]":
                    self._held_decide(self._held_items + [""], pos)
                    return
                w = self._held_watch = _JsonWatch()
                at, step = pos, 32
                while at < n and w.hungry:
                    hi = min(n, at + step)
                    w.feed(self._held_slice(at, hi))
                    at, step = hi, 2 * step
            if w.dead:
                self._held_wait = True
                return
            if not w.check():
                return
            end = self._held_end(w, pos, n)
            if end == -2:
                return
            if end < 0 or end >= n:
                if end < 0:
                    self._held_wait = True
                return
            after = self._held_slice(end, min(n, end + 2))
            if after[0] == "]":
                self._held_decide(self._held_items + [self._held_slice(pos, end)], end)
                return
            if after == ",":    # (the run's last character: ", " may be arriving)
                return
            if after != ", ":
                self._held_wait = True
                return
            self._held_items.append(self._held_slice(pos, end))
            self._held_pos = end + 2
            self._held_watch = None

    def _held_decide(self, outputs: list[str], close: int) -> None:
        run = self._held_run()
        at = self._held_at
        pos = 1
        for o in outputs:
            self._output(o, at + pos)
            pos += len(o) + 2
        self._waiting = False
        self._held = []
        self._mode = _M_TEXT
        rest = run[close + 1:]
        if rest:
            self._say(THOUGHTS if self._inner else RESPONSE, rest, at + close + 1)

    def _prompt_group(self) -> None:
        """The prompt ends in a ``[...]`` run after the calls (bracket dialects). If the
        run is a whole group there (its closing ``]`` is the prompt's last character),
        the server wrote it: the group ends with the prompt, and the completion is read
        after it, not as more of the run (whose reading would take the run's last
        ``]``: a model's ``[link](url)`` would become part of the tool output)."""
        run = self._held_run()
        outputs, close = output_group(run)
        if outputs is not None and close == len(run) - 1:
            self._held_decide(outputs, close)
            self._prompt_closed_group = True

    def _end_held(self) -> None:
        run = self._held_run()
        outputs, close = output_group(run)
        if outputs is None:
            self._mode = _M_TEXT
            self._held = []
            self._say(THOUGHTS if self._inner else RESPONSE, run, self._held_at)
        else:
            self._held_decide(outputs, close)

    # -- results ------------------------------------------------------------
    @property
    def finish_reason(self) -> str | None:
        """``"tool_calls"`` (the last tool-call list was closed by
        ``<|tools_suffix|>``, made at least one call in the completion, and no outputs
        followed: the calls wait for their outputs), ``"stop"`` (the turn has ended, or
        the text ends with a ``<|tools_suffix|>`` whose list made no call in the
        completion: ``[]``, malformed, or the prompt's own), or ``None`` (the completion stops inside the turn: cut
        off by a token limit, or inside a call list). Final after :meth:`close`."""
        if self._waiting:
            return "tool_calls"
        # (_after_calls: the text so far ends with the <|tools_suffix|> of a list that
        # made no call in the completion, where a server stops: _end_run clears it
        # for a list that was cut off instead)
        return "stop" if self._ended or self._after_calls else None

    def openai_delta(self, deltas: Iterable[Delta]) -> dict[str, Any]:
        """The deltas (of one :meth:`feed`) as the ``delta`` of an OpenAI
        ``chat.completion.chunk``: ``reasoning_content``, ``content`` and
        ``tool_calls`` (``index``, and on a call's first delta its ``id``, ``type`` and
        ``function.name``; ``function.arguments`` pieces), each only when present.
        Tool outputs are not part of an assistant message and are left out."""
        if type(deltas) is not list:
            deltas = list(deltas)   # (read three times below: a generator only once)
        for d in deltas:
            if type(d) is not Delta and not isinstance(d, Delta):
                raise TypeError(f"openai_delta takes the Delta objects that feed() or "
                                f"close() returned, got {type(d).__name__} {shown(d, 60)}")
            if d.kind == TOOL_CALL and not (type(d.index) is int
                                            and 0 <= d.index < len(self._tool_calls)):
                # (a Delta of another parser, or made by hand: no call of this one)
                raise TypeError(f"openai_delta takes the Delta objects that this parser's "
                                f"feed() or close() returned; it has made no call "
                                f"{shown(d.index, 20)} ({shown(d, 60)})")
        reasoning = [d.text for d in deltas if d.kind == THOUGHTS]
        content = [d.text for d in deltas if d.kind == RESPONSE]
        out = {}
        if reasoning:
            out["reasoning_content"] = "".join(reasoning)
        if content:
            out["content"] = "".join(content)
        calls = []
        for d in deltas:
            if d.kind != TOOL_CALL:
                continue
            if calls and calls[-1]["index"] == d.index and d.name is None:
                calls[-1]["function"]["arguments"] += d.text
                continue
            entry = {"index": d.index}
            if d.name is not None:
                entry["id"] = self._id(d.index)
                entry["type"] = "function"
                entry["function"] = {"name": d.name, "arguments": d.text}
            else:
                entry["function"] = {"arguments": d.text}
            calls.append(entry)
        if calls:
            out["tool_calls"] = calls
        return out

    def result(self) -> "Completion":
        """The completion read so far: after :meth:`close` the final one, before it the
        reading the text so far would get if it ended here (a copy of the parser is
        closed; this one goes on). With bytes chunks, the text so far is what has been
        decoded: a character whose bytes are still arriving is not part of it yet."""
        if not self._closed:
            snapshot = self.__copy__()   # (the calls' ids are made first: shared)
            if snapshot._decoder is not None:
                snapshot._decoder.reset()   # (those bytes are no error: more may come)
            snapshot.close()
            return snapshot.result()
        text = "".join(self._chunks)
        return Completion._build(self, text)


if (StreamParser.__doc__ or "").startswith("StreamParser("):
    # the pure build: CPython strips the signature line from a compiled class's __doc__,
    # not from a Python class's (whose __init__ gives inspect the signature)
    StreamParser.__doc__ = StreamParser.__doc__.partition("\n--\n\n")[2]


def _turn_format(events, fmt: str) -> tuple[str, int, bool]:
    """The messages' format for the turn, the index of its last event, and whether
    reasoning delimiters appear before the turn ends (then "blocks" under "auto")."""
    n = len(events) // 3
    end = n
    reasoning = False
    group = False   # in a tool-output group, whose <think> is text (the builder's reading)
    for j in range(n):
        k = events[3 * j]
        if group:
            if k in _TEXTUAL or k == _THINK_START or k == _THINK_END:
                continue
            group = False
            if k == _TOOL_OUTPUT_END:
                continue
        if k == _ASSISTANT_END or k == _USER_START or (k == _ASSISTANT_START and j == n - 1):
            end = j
            break
        if k in (_INNER_PREFIX, _INNER_SUFFIX, _THINK_START, _THINK_END):
            reasoning = True
        elif k == _TOOL_OUTPUT_START:
            group = True
    if fmt == "auto":
        fmt = "blocks" if reasoning else "string"
    return fmt, end, reasoning


def _call_id_of(calls: list, call_id, index: int) -> str:
    """The id of call ``index`` of ``calls`` (a parser's ``[name, args, id]`` entries,
    which its completions share: one id, whoever asks first), made by ``call_id`` on
    first use."""
    entry = calls[index]
    if entry[2] is None:
        made = call_id(index)
        if not isinstance(made, str):
            raise TypeError(f"call_id({index}) must return a str (the OpenAI id), "
                            f"returned {type(made).__name__} {shown(made, 60)}")
        entry[2] = made
    return entry[2]


class Completion:
    """A model's completion, read (:func:`parse_completion`, :meth:`StreamParser.result`).

    The completion itself (what the deltas spelled): ``reasoning`` (its thoughts text),
    ``content`` (its response text), ``tool_calls`` (``{"name", "arguments"}`` dicts,
    arguments exactly as written), ``tool_outputs`` (strings: tool outputs inside the
    completion, as when a whole agent transcript is read).

    The turn: ``messages``, the assistant turn as message dicts in the shape
    :func:`~apertus_fast.render` takes (``format`` as :func:`~apertus_fast.parse`
    reads it: blocks when the turn has reasoning, else strings), including the part of
    the turn that was in the prompt; :attr:`blocks`, the turn as one list of blocks.

    And: ``finish_reason`` (``"tool_calls"``, ``"stop"`` or ``None``, see
    :attr:`StreamParser.finish_reason`); ``closed`` (``<|assistant_end|>`` ended the
    turn); ``rest`` (text after the end of the turn, normally ``""``); ``warnings``
    (what lenient reading recovered from, ``"line L, column C: what"`` with positions in
    the turn's text); ``text`` (the turn's text: the prompt's part, then the completion).
    """

    __slots__ = ("dialect", "text", "reasoning", "content", "tool_calls", "tool_outputs",
                 "finish_reason", "closed", "rest", "warnings", "messages", "format",
                 "_calls", "_call_id", "_events", "_blocks", "_group_end", "_answered",
                 "_dialect")

    dialect: str
    text: str
    reasoning: str
    content: str
    tool_calls: list[dict[str, str]]
    tool_outputs: list[str]
    finish_reason: str | None
    closed: bool
    rest: str
    warnings: list[str]
    messages: list[dict]
    format: str

    @classmethod
    def _build(cls, parser: StreamParser, text: str) -> Completion:
        self = cls.__new__(cls)
        d = parser.dialect
        self._dialect = d
        self.dialect = d.name
        self.text = text
        self.reasoning = "".join(parser._reasoning)
        self.content = "".join(parser._content)
        self.tool_calls = [{"name": name, "arguments": "".join(args)}
                           for name, args, _id in parser._tool_calls]
        # the parser's calls, whose ids openai() makes when it asks (shared with the
        # parser: one id for a call, whoever asks first), and its id maker; not the
        # parser itself, which a kept result kept alive
        self._calls = parser._tool_calls
        self._call_id = parser._call_id

        self.tool_outputs = ["".join(o) for o in parser._outputs]
        events = scan_str(text, d)
        if len(events) and events[0] == _BOS:   # "<s>" is a token only at a conversation's start
            events = array("q", events)
            events[0] = _TEXT
        # the completion closed reasoning (its own, or the prompt's): an answer began,
        # if an empty one (the reasoning it closed may be empty or the prompt's)
        self._answered = parser._closed_inner and not parser._inner
        self._events = events
        self._blocks = None
        fmt, _end, reasoning = _turn_format(events, parser.format)
        group_end = parser._emit_from if parser._prompt_closed_group else -1
        self._group_end = group_end
        builder = _Builder(text, events, d, False, fmt, True)
        builder.group_end = group_end
        try:
            closed, rest = builder.build_turn()
        except _NeedBlocks:
            if parser.format != "auto":
                raise ValueError(_NEED_BLOCKS) from None
            fmt = "blocks"
            builder = _Builder(text, events, d, False, fmt, True)
            builder.group_end = group_end
            closed, rest = builder.build_turn()
        if fmt == "string" and parser.format == "string":
            if reasoning:
                raise ValueError("format='string' cannot represent reasoning; use 'blocks' "
                                 "or 'auto'")
        self.format = fmt
        self.messages = builder.messages
        self.closed = closed
        self.rest = text[rest:]
        self.warnings = list(builder.warnings) + parser._warnings
        if self.rest:
            err = ParseError.at(text, rest, "")
            self.warnings.append(f"line {err.line}, column {err.column}: text after the end "
                                 f"of the assistant turn")
        self.finish_reason = parser.finish_reason
        return self

    def _the_dialect(self) -> Dialect:
        """The Dialect read with (one of your own too), unless ``dialect`` was set to
        another name since."""
        d = self._dialect
        return d if d.name == self.dialect else get_dialect(self.dialect)

    def _id(self, index: int) -> str:
        return _call_id_of(self._calls, self._call_id, index)

    def __getstate__(self) -> dict:
        # (every pickle protocol: the default for a class with __slots__ needs 2) The
        # ids are made now and kept, and the id maker is left behind: a lambda cannot
        # be pickled, and the result needs it no more.
        for index in range(len(self._calls)):
            self._id(index)
        state = slot_state(self)
        state["_calls"] = [[None, None, entry[2]] for entry in self._calls]
        state["_call_id"] = None
        if DIALECTS.get(self._dialect.name) is self._dialect:
            state["_dialect"] = None    # (a built-in one by its name, as a parser's)
        return state

    def __setstate__(self, state) -> None:
        state = state_dict(state)
        made = state.pop("_id", None)   # (which was the parser's bound method)
        if made is not None:
            state["_calls"] = made.__self__._tool_calls
            state["_call_id"] = made.__self__._call_id
        for name, value in state.items():
            setattr(self, name, value)
        if state.get("_dialect") is None:
            self._dialect = get_dialect(self.dialect)

    def __eq__(self, other):
        if not isinstance(other, Completion):
            return NotImplemented
        # (and whether it closed reasoning: one turn's text, cut into prompt and
        # completion at two places, can give two openai() contents)
        return (self.dialect, self.text, self.format, self._answered, self.to_dict()) == \
            (other.dialect, other.text, other.format, other._answered, other.to_dict())

    __hash__ = None

    @property
    def blocks(self) -> list:
        """The whole turn as one list of blocks (``thoughts``, ``tool_calls``,
        ``tool_outputs``, ``response``), whatever :attr:`format` the messages use."""
        if self._blocks is None:
            builder = _Builder(self.text, self._events, self._the_dialect(), False,
                               "blocks", True)
            builder.group_end = self._group_end
            builder.build_turn()
            self._blocks = [block for m in builder.messages if m["role"] == "assistant"
                            for block in m["content"]["blocks"]]
        return self._blocks

    def to_dict(self) -> dict:
        """A JSON-able dict (what ``apertus-fast completions`` writes a line):
        ``content``, ``reasoning``, ``tool_calls``, ``tool_outputs``, ``finish_reason``,
        ``closed``, ``messages``, and ``warnings`` and ``rest`` when not empty."""
        out = {"content": self.content, "reasoning": self.reasoning,
               "tool_calls": self.tool_calls, "tool_outputs": self.tool_outputs,
               "finish_reason": self.finish_reason, "closed": self.closed,
               "messages": self.messages}
        if self.warnings:
            out["warnings"] = self.warnings
        if self.rest:
            out["rest"] = self.rest
        return out

    def openai(self) -> dict[str, object]:
        """The completion as an OpenAI chat ``message``: ``role``, ``content``,
        ``reasoning_content`` (when there is reasoning) and ``tool_calls`` (``id``,
        ``type``, ``function``; the ids a :class:`StreamParser` streamed).

        ``content`` is the answer; when there is none it is ``""`` if the completion
        closed its reasoning (``<|inner_suffix|>``: the answer began, empty) and ``None``
        if not (no reasoning, or calls made inside it), so that
        :func:`~apertus_fast.reasoning_to_blocks` can tell the two apart."""
        content = self.content or ("" if self._answered else None)
        message = {"role": "assistant", "content": content}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": self._id(index), "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for index, c in enumerate(self.tool_calls)]
        return message

    def __repr__(self) -> str:
        return (f"Completion(dialect={self.dialect!r}, reasoning={self.reasoning!r}, "
                f"content={self.content!r}, tool_calls={self.tool_calls!r}, "
                f"finish_reason={self.finish_reason!r}, warnings={self.warnings!r})")


def parse_completion(text: str | bytes, *, dialect: str | Dialect = DEFAULT_DIALECT,
                     prompt: str | None = None, format: str = "auto",
                     call_id: Callable[[int], str] | None = None) -> Completion:
    """Read a model's whole completion (the text after the prompt's
    ``<|assistant_start|>``): reasoning, response, tool calls, how it ended.

    The same reading as feeding it to a :class:`StreamParser` in any chunks;
    ``prompt``, ``format`` and ``call_id`` as there. ``text`` is a ``str`` or UTF-8
    bytes (invalid UTF-8 raises :class:`ParseError`).
    """
    parser = StreamParser(dialect, prompt=prompt, format=format, call_id=call_id)
    if isinstance(text, (bytes, bytearray, memoryview)):
        parser.feed(bytes(text))
    elif isinstance(text, str):
        parser.feed(text)
    else:
        raise TypeError(f"parse_completion() takes str or UTF-8 bytes, not {type(text).__name__}")
    parser.close()
    return parser.result()


# The annotations' names at run time (typing.get_type_hints; see _render)
from collections.abc import Callable, Iterable  # noqa: E402
from typing import Any  # noqa: E402
