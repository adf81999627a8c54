# cython: boundscheck=True, wraparound=True, annotation_typing=False
# (plain Python compiled by Cython: keep Python's index semantics and checks, and its
# acceptance of str subclasses: annotations are for readers and type checkers only)
"""Parsing: rendered Apertus text -> the conversation that renders to it.

The lexer (``_lex``) turns text into events ``(kind, start, end)``; this builder walks
them with the renderer's own state machine (``in_inner``, ``waiting_for_tool_outputs``,
open turns) and rebuilds message dicts in exactly the shape :func:`render` takes.

Where several conversations render to the same text, the builder picks one canonical
form (``docs/format.md`` lists every ambiguity and the choice made, with the reason);
:func:`normalize` maps any conversation to that form. The laws, property-tested in
``tests/test_laws.py``:

* lossless: ``parse(render(c)).render() == render(c)``;
* canonical: ``parse(render(c)).messages == normalize(c)`` and
  ``render(normalize(c)) == render(c)``.
"""

from __future__ import annotations

import copyreg
import datetime
import gc
import json
import os as _os
import re
import sys
import threading as _threading
from array import array
from typing import TYPE_CHECKING

from ._dialects import DEFAULT_DIALECT, Dialect, Kind, dialects_with, get_dialect
from ._dialects import DIALECTS as _BUILT_IN
from ._errors import ApertusError, DialectWarning, Lines, ParseError, RenderError, shown, warn_caller
from ._lex import _DEFAULT_CORE, _table, _utf8_error, utf8_found
from ._render import render, renders_to

if TYPE_CHECKING:
    from typing import Any

    from ._render import Messages
    from ._spans import Rendered

__all__ = ["parse", "normalize", "ParsedConversation", "split_tool_outputs", "split_tool_calls"]

_K_TEXT = int(Kind.TEXT)
_K_BOS = int(Kind.BOS)
_K_SYSTEM_START = int(Kind.SYSTEM_START)
_K_SYSTEM_END = int(Kind.SYSTEM_END)
_K_DEVELOPER_START = int(Kind.DEVELOPER_START)
_K_DEVELOPER_END = int(Kind.DEVELOPER_END)
_K_USER_START = int(Kind.USER_START)
_K_USER_END = int(Kind.USER_END)
_K_ASSISTANT_START = int(Kind.ASSISTANT_START)
_K_ASSISTANT_END = int(Kind.ASSISTANT_END)
_K_INNER_PREFIX = int(Kind.INNER_PREFIX)
_K_INNER_SUFFIX = int(Kind.INNER_SUFFIX)
_K_TOOLS_PREFIX = int(Kind.TOOLS_PREFIX)
_K_TOOLS_SUFFIX = int(Kind.TOOLS_SUFFIX)
_K_TOOL_OUTPUT_START = int(Kind.TOOL_OUTPUT_START)
_K_TOOL_OUTPUT_END = int(Kind.TOOL_OUTPUT_END)
_K_IMAGE = int(Kind.IMAGE)
_K_AUDIO = int(Kind.AUDIO)
_K_THINK_START = int(Kind.THINK_START)
_K_THINK_END = int(Kind.THINK_END)

_TOKEN_NAMES = {int(k): t for k, t in __import__("apertus_fast._dialects", fromlist=["TOKEN_TEXT"]).TOKEN_TEXT.items()}

_DELIB_ON = "Deliberation: enabled\n"
_DELIB_OFF = "Deliberation: disabled\n"
_TOOLS_OFF = "Tool Capabilities: disabled"
_TOOLS_ON = "Tool Capabilities:\n"
_TOOL_DECL_RE = re.compile(r"type (.*?) = (?:(\(_: \{)|\(\) => any;)")  # (a name may be empty)


def _tool_names(tools_text):
    """The names declared in a tool section, in order: ``type NAME = (_: {`` (whose
    parameters end at the line ``}) => any;``) or ``type NAME = () => any;`` lines at
    its top level. A line shaped like a declaration inside a parameter block (a
    parameter's description) is not one; at the top level, a description line shaped
    like one cannot be told from one."""
    names = []
    in_params = False
    for line in tools_text.split("\n"):
        if in_params:
            in_params = line != "}) => any;"
            continue
        m = _TOOL_DECL_RE.fullmatch(line)
        if m is not None:
            names.append(m.group(1))
            in_params = m.group(2) is not None
    return names
_JSON = json.JSONDecoder()
_JSON_START = frozenset('{["-0123456789tfnNI')


def slot_state(obj) -> dict:
    """A pickle's state of ``obj``, an instance of a class with ``__slots__`` (the
    results, :class:`ParsedConversation` and ``Completion``): every slot that is set,
    a subclass's own slots and ``__dict__`` too. (Their own ``__getstate__``: the
    default one for a class with slots needs pickle protocol 2.)"""
    state = dict(getattr(obj, "__dict__", ()))
    for name in copyreg._slotnames(type(obj)):
        if hasattr(obj, name):
            state[name] = getattr(obj, name)
    return state


def state_dict(state) -> dict:
    """A pickled state as :func:`slot_state` makes it, also from a pickle of an earlier
    version, which the default pickling wrote as ``(__dict__, slots)``."""
    if isinstance(state, tuple):
        return {**(state[0] or {}), **state[1]}
    return dict(state)


class ParsedConversation:
    """A parsed conversation: ``messages`` in the shape :func:`render` takes, and the
    settings that re-render the text exactly (:meth:`render`).

    Attributes: ``messages``; ``dialect``; ``enable_thinking``;
    ``add_generation_prompt``; ``continue_assistant_message``; ``tools_text`` (the
    developer block's tool section as rendered, ``None`` when tools are disabled: the
    JSON schemas cannot be recovered from it, :meth:`render` uses it verbatim);
    ``tool_names`` (the tools it declares); ``bos_token`` (the text before
    ``<|system_start|>``: ``"<s>"``, ``""`` or a custom BOS); ``date`` (of the default
    system prompt in the dated dialects, ``"YYYY-MM-DD"``); ``format`` (``"string"`` or
    ``"blocks"``); ``warnings`` (lenient mode: what was recovered from).
    """

    __slots__ = ("messages", "dialect", "enable_thinking", "add_generation_prompt",
                 "continue_assistant_message", "tools_text", "bos_token", "date", "format",
                 "warnings", "_tool_names", "_dialect")

    messages: list[dict[str, Any]]
    dialect: str
    enable_thinking: bool
    add_generation_prompt: bool
    continue_assistant_message: bool
    tools_text: str | None
    bos_token: str
    date: str | None
    format: str
    warnings: list[str]

    def __init__(self, messages: list[dict], dialect: str | Dialect = DEFAULT_DIALECT,
                 enable_thinking: bool = False, add_generation_prompt: bool = False,
                 continue_assistant_message: bool = False, tools_text: str | None = None,
                 bos_token: str = "<s>", date: str | None = None, format: str = "string",
                 warnings: list[str] | None = None):
        self.messages = messages
        # the name (what to_dict() writes); a Dialect of your own (dataclasses.replace
        # of a built-in one) is kept too, and renders as long as the name is its own:
        # it was looked up by its name, unknown or another dialect's. A built-in one,
        # or a copy of it (unpickled), renders by its name: the hot path knows it.
        if isinstance(dialect, Dialect):
            built_in = _BUILT_IN.get(dialect.name)
            self._dialect = None if built_in is dialect or built_in == dialect else dialect
            self.dialect = dialect.name
        else:
            self._dialect = None
            self.dialect = dialect
        self.enable_thinking = enable_thinking
        self.add_generation_prompt = add_generation_prompt
        self.continue_assistant_message = continue_assistant_message
        self.tools_text = tools_text
        self.bos_token = bos_token
        self.date = date
        self.format = format
        self.warnings = [] if warnings is None else warnings
        self._tool_names = None     # (the tools_text they were read from, the names)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools declared in ``tools_text``, in order (a description's
        line shaped like a declaration counts only outside a parameter block). A new
        list each time: changing it (or ``to_dict()``'s) changes nothing here."""
        cached = self._tool_names
        if cached is None or cached[0] is not self.tools_text:
            # (read again when tools_text was set anew: the names went stale)
            cached = self._tool_names = (
                self.tools_text, tuple(_tool_names(self.tools_text)) if self.tools_text else ())
        return list(cached[1])

    def __getstate__(self) -> dict:
        state = slot_state(self)
        state.pop("_tool_names", None)
        return state

    def __setstate__(self, state):
        state = state_dict(state)
        self._dialect = self._tool_names = None
        for name, value in state.items():
            if name != "_tool_names":   # (an earlier version's, a bare list: read again)
                setattr(self, name, value)

    def _dialect_arg(self):
        """The dialect to render with: the Dialect given, unless ``dialect`` was set to
        another name since."""
        d = self._dialect
        return d if d is not None and d.name == self.dialect else self.dialect

    def __eq__(self, other):
        if not isinstance(other, ParsedConversation):
            return NotImplemented
        # (and the dialect they render with: one of your own may keep a built-in name)
        return self.to_dict() == other.to_dict() and \
            self._dialect_arg() == other._dialect_arg()

    __hash__ = None

    def __repr__(self):
        return (f"ParsedConversation(dialect={self.dialect!r}, format={self.format!r}, "
                f"messages={self.messages!r}, enable_thinking={self.enable_thinking!r}, "
                f"add_generation_prompt={self.add_generation_prompt!r}, "
                f"continue_assistant_message={self.continue_assistant_message!r}, "
                f"tool_names={self.tool_names!r}, date={self.date!r}, "
                f"warnings={self.warnings!r})")

    def _render_kwargs(self) -> dict:
        return {"dialect": self._dialect_arg(), "tools_text": self.tools_text,
                "enable_thinking": self.enable_thinking,
                "add_generation_prompt": self.add_generation_prompt,
                "continue_assistant_message": self.continue_assistant_message,
                "date": self.date, "bos_token": self.bos_token}

    def render(self) -> str:
        """Re-render through the normal renderer (equal to the parsed text for every
        text the renderer produces)."""
        return render(self.messages, **self._render_kwargs())

    def render_with_spans(self) -> Rendered:
        """:meth:`render` with the model's spans: a ``Rendered(text, spans)``, the loss
        mask of a conversation kept only as text (``apertus_fast.render_with_spans``)."""
        from ._spans import render_with_spans

        return render_with_spans(self.messages, **self._render_kwargs())

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict; ``apertus-fast render`` reads it back (``tools_text``)."""
        out = {
            "messages": self.messages,
            "dialect": self.dialect,
            "enable_thinking": self.enable_thinking,
            "add_generation_prompt": self.add_generation_prompt,
            "continue_assistant_message": self.continue_assistant_message,
            "tools_text": self.tools_text,
            "tool_names": self.tool_names,
            "bos_token": self.bos_token,
            "date": self.date,
            "format": self.format,
        }
        if self.warnings:
            out["warnings"] = self.warnings
        return out


# ---------------------------------------------------------------------------
# Splitting the bracketed lists that the format writes as plain text
# ---------------------------------------------------------------------------

#: Compiled, the builder finds JSON ends with ``_json_skip``; the plain-Python module
#: asks the json module's C scanner (faster there than a loop in Python).
_COMPILED = not __file__.endswith(".py")


def _json_end(s, pos, memo=None):
    """End of the JSON value starting exactly at ``pos``, or -1 (where
    ``json.JSONDecoder().raw_decode(s, pos)`` raises). ``memo``: a dict kept for one
    ``s`` (see :func:`_json_skip`), or None."""
    if _COMPILED:
        return _json_skip(s, pos, memo)
    if pos >= len(s) or s[pos] not in _JSON_START:
        return -1
    if memo is not None and pos in memo:
        return -1
    try:
        return _JSON.raw_decode(s, pos)[1]
    except ValueError:
        if memo is not None:    # (the skipper notes where it failed, for the next try)
            _json_skip(s, pos, memo)
        return -1
    except RecursionError:  # the scanner recurses; the skipper does not
        return _json_skip(s, pos, memo)


def _json_ws(s, i, n):
    """The first index from ``i`` that is not JSON whitespace (or ``n``)."""
    while i < n:
        c = s[i]
        if c != " " and c != "\n" and c != "\r" and c != "\t":
            return i
        i += 1
    return n


def _json_string_end(s, i, n):
    """After the opening quote at ``i - 1``: the index after the closing quote, or -1.
    The json module's rules (strict): no control characters, only its escapes."""
    while i < n:
        c = s[i]
        if c == '"':
            return i + 1
        if c == "\\":
            if i + 1 >= n:
                return -1
            c = s[i + 1]
            if c == "u":
                if i + 6 > n:
                    return -1
                for j in range(i + 2, i + 6):
                    c = s[j]
                    if not ("0" <= c <= "9" or "a" <= c <= "f" or "A" <= c <= "F"):
                        return -1
                i += 6
                continue
            if c not in '"\\/bfnrt':
                return -1
            i += 2
            continue
        if c < " ":
            return -1
        i += 1
    return -1


def _json_number_end(s, i, n):
    """A number at ``i`` as the json module reads it: the longest prefix of
    ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?``; -1 if there is none, or if it is
    an int with more digits than ``int()`` converts (``sys.get_int_max_str_digits``)."""
    start = i
    if i < n and s[i] == "-":
        i += 1
    if i >= n:
        return -1
    c = s[i]
    if "1" <= c <= "9":
        i += 1
        while i < n and "0" <= s[i] <= "9":
            i += 1
    elif c == "0":
        i += 1
    else:
        return -1
    digits = i - start - (s[start] == "-")
    is_float = False
    if i + 1 < n and s[i] == "." and "0" <= s[i + 1] <= "9":
        is_float = True
        i += 2
        while i < n and "0" <= s[i] <= "9":
            i += 1
    if i + 1 < n and (s[i] == "e" or s[i] == "E"):
        e = i
        i += 1
        if i + 1 < n and (s[i] == "-" or s[i] == "+"):
            i += 1
        while i < n and "0" <= s[i] <= "9":
            i += 1
        if "0" <= s[i - 1] <= "9":
            is_float = True
        else:
            i = e
    if not is_float and digits > 640:
        limit = _max_str_digits()
        if 0 < limit < digits:
            return -1
    return i


def _max_str_digits():
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0


def _json_word(c):
    """The json module's named value that starts with ``c`` (one of ``ntfNI``). Not a
    dict lookup: compiled, ``c`` is a ``Py_UCS4``, which Cython 3.0 would look up as an
    int."""
    if c == "n":
        return "null"
    if c == "t":
        return "true"
    if c == "f":
        return "false"
    if c == "N":
        return "NaN"
    return "Infinity"


def _json_skip(s, pos, memo=None):
    """End of the JSON value starting exactly at ``pos``, or -1: what
    ``json.JSONDecoder().raw_decode(s, pos)`` answers (-1 where it raises), found
    without building the value and without recursion (so at any depth).

    ``memo`` (a dict, or None) remembers for ``s`` the containers the skipper found
    not to be JSON, ``{start: -1}``: those still open where a reading failed (each
    holds the spot where it failed). A value's reading does not depend on what
    surrounds it, so a later call that meets one of them fails at once. The call-list
    readers try the arguments of every call, and text that is not of the written form
    can start them inside an earlier call's unfinished arguments, each time one
    container further in; without the memo every try read the text to its end again
    (quadratic). (Containers that are JSON are not noted: each would cost a dict entry,
    and a reading that starts at one is read through once more, not once per call.)"""
    if memo is None:
        return _json_scan(s, pos, None, None)
    starts = []
    end = _json_scan(s, pos, memo, starts)
    if end < 0:     # every container still open holds the spot where it failed
        for start in starts:
            memo[start] = -1
    return end


def _json_scan(s, pos, memo, starts):
    """:func:`_json_skip`'s reading; with a memo, ``starts`` holds where each open
    container starts (the stack's ``{`` and ``[``)."""
    n = len(s)
    stack = []      # the open containers: True for an object, False for an array
    i = pos
    while True:
        # a value at i
        if i >= n:
            return -1
        c = s[i]
        if c == '"':
            i = _json_string_end(s, i + 1, n)
            if i < 0:
                return -1
        elif (c == "{" or c == "[") and memo is not None and i in memo:
            return -1   # (a container found not to be JSON)
        elif c == "{":
            start = i
            i = _json_ws(s, i + 1, n)
            if i < n and s[i] == "}":
                i += 1
            else:
                if memo is not None:
                    starts.append(start)
                i = _json_key(s, i, n)
                if i < 0:
                    return -1
                stack.append(True)
                continue
        elif c == "[":
            start = i
            i = _json_ws(s, i + 1, n)
            if i < n and s[i] == "]":
                i += 1
            else:
                if memo is not None:
                    starts.append(start)
                stack.append(False)
                continue
        elif c in "ntfNI" and s.startswith(_json_word(c), i):
            i += len(_json_word(c))
        elif c == "-" and s.startswith("-Infinity", i):
            i += 9
        else:
            i = _json_number_end(s, i, n)
            if i < 0:
                return -1
        # after a value: close what ends here, or go on to the next item
        while True:
            if not stack:
                return i
            i = _json_ws(s, i, n)
            if i >= n:
                return -1
            c = s[i]
            if stack[-1]:
                if c == "}":
                    stack.pop()
                    i += 1
                    if memo is not None:
                        starts.pop()
                    continue
                if c != ",":
                    return -1
                i = _json_key(s, _json_ws(s, i + 1, n), n)
                if i < 0:
                    return -1
                break
            if c == "]":
                stack.pop()
                i += 1
                if memo is not None:
                    starts.pop()
                continue
            if c != ",":
                return -1
            i = _json_ws(s, i + 1, n)
            break


def _json_key(s, i, n):
    """An object key at ``i`` (a string, ``:``, whitespace): the index of its value."""
    if i >= n or s[i] != '"':
        return -1
    i = _json_string_end(s, i + 1, n)
    if i < 0:
        return -1
    i = _json_ws(s, i, n)
    if i >= n or s[i] != ":":
        return -1
    return _json_ws(s, i + 1, n)


def _skip_json_value(s, pos=0, memo=None):
    """Tests: ``_json_skip`` (compiled or not), which ``_json_end`` uses compiled."""
    return _json_skip(s, pos, memo)


def split_tool_outputs(inner: str) -> list:
    """Split the text between the brackets of ``[a, b]`` into tool outputs.

    Outputs are joined with ``", "`` and may contain it, so the split is JSON-aware:
    each output that is a JSON value followed by ``", "`` is one item; the first
    non-JSON output takes the rest of the text. ``""`` is one empty output.
    """
    items = []
    pos = 0
    n = len(inner)
    while True:
        end = _json_end(inner, pos)
        if end == n:
            items.append(inner[pos:])
            return items
        if end > 0 and inner.startswith(", ", end):
            items.append(inner[pos:end])
            pos = end + 2
            continue
        items.append(inner[pos:])
        return items


def _output_group(run):
    """In a text run starting with ``[`` right after ``<|tools_suffix|>`` (dialects
    that write tool outputs as ``[a, b]``): ``(outputs, index of the closing "]")``,
    or ``(None, -1)`` when the run holds no output group. JSON items are taken whole
    (each JSON value followed by ``", "`` is one output); the first non-JSON item
    extends to the last ``]`` of the run. The outputs are what
    :func:`split_tool_outputs` makes of the text between the brackets."""
    items = []
    pos = 1
    n = len(run)
    while True:
        if pos < n and run[pos] == "]":
            items.append("")
            return items, pos
        end = _json_end(run, pos)
        if end > 0 and end < n and run[end] == "]":
            items.append(run[pos:end])
            return items, end
        if end > 0 and run.startswith(", ", end):
            items.append(run[pos:end])
            pos = end + 2
            continue
        close = run.rfind("]")
        if close < pos:
            return None, -1
        items.append(run[pos:close])
        return items, close


def _leading_outputs(run, possible):
    """A text run right after ``<|tools_suffix|>`` in the ``[a, b]`` dialects may start
    with the tool outputs: ``(outputs, rest)``, or ``(None, run)`` when it does not."""
    if possible and run.startswith("["):
        outputs, close = _output_group(run)
        if outputs is not None:
            return outputs, run[close + 1:]
    return None, run


def split_tool_calls(body: str):
    """Split the text between ``<|tools_prefix|>`` and ``<|tools_suffix|>``
    (``[{"name": arguments}, ...]``) into ``(name, arguments)`` pairs, arguments
    exactly as written. Returns ``None`` when the text is not of that form.

    Names are written raw, so a name ends at the first ``": ``; arguments are
    JSON-aware: a JSON value followed by ``}`` and then ``, {"`` or the final ``]``,
    else the text up to the next ``}, {"`` (or the final ``}]``).
    """
    calls = _read_calls(body)[0]
    if calls is None:
        return None
    return [(name, args) for name, args, _at in calls]


def split_tool_calls_at(body: str):
    """:func:`split_tool_calls` with where each call's arguments start in ``body``:
    ``(name, arguments, start)`` triples, or ``None``."""
    return _read_calls(body)[0]


#: What a call list that is not of the form lacks where it stops being of it
#: (``_read_calls``'s second answer), for the strict error.
_CALLS_EXPECTED = (
    '"[" opening the call list',
    '"]" closing the call list',
    '{"name": arguments}, a call',
    '": after the call\'s name',
    '"}" after the call\'s arguments, then ", " or "]"',
    '", " and the next call, or "]" closing the call list',
    '\'"\' opening the call\'s name',
    '<|tools_suffix|>: the call list was closed',
)


def _read_calls(body):
    """``(calls, -1, 0)``: the calls of a call-list body; ``(None, at, what)`` where it is
    not of the form: the offset in ``body`` where the form breaks, and what
    (``_CALLS_EXPECTED[what]``) was expected there."""
    if not body.startswith("["):
        return None, 0, 0
    if not body.endswith("]"):
        return None, len(body), 1
    if body == "[]":
        return [], -1, 0
    calls = []
    pos = 1
    last = len(body) - 1  # index of the final "]"
    memo = None     # from the first arguments not read as JSON on (see _json_skip)
    while True:
        if not body.startswith('{"', pos):
            if body.startswith("{", pos):   # (the "{" is right; what follows is not)
                return None, pos + 1, 6
            return None, pos, 2
        colon = body.find('": ', pos + 2)
        if colon < 0:
            return None, pos + 2, 3
        name = body[pos + 2:colon]
        args_start = colon + 3
        end = _json_end(body, args_start, memo)
        if end > 0 and body.startswith("}", end) and (
                end + 1 == last or body.startswith(', {"', end + 1)):
            args_end = end
        else:
            if memo is None:
                memo = {}
            nxt = body.find('}, {"', args_start)
            if nxt >= 0:
                args_end = nxt
            elif body.endswith("}]") and last - 1 >= args_start:
                args_end = last - 1
            elif end > 0 and body.startswith("}", end):
                if body.startswith("]", end + 1):   # (closed, and more after it)
                    return None, end + 2, 7
                return None, end + 1, 5
            else:
                return None, (end if end > 0 else args_start), 4
        calls.append((name, body[args_start:args_end], args_start))
        pos = args_end + 1
        if pos == last:
            return calls, -1, 0
        if not body.startswith(", ", pos):
            return None, pos, 5
        pos += 2


def json_end(s: str, pos: int) -> int:
    """End of the JSON value starting exactly at ``pos`` in ``s``, or -1: what
    ``json.JSONDecoder().raw_decode(s, pos)`` answers (-1 where it raises). The
    builder's own test, for the streaming reader (``_stream``)."""
    return _json_end(s, pos)


def output_group(run: str):
    """``_output_group`` for the streaming reader: a text run starting with ``[``
    right after ``<|tools_suffix|>`` -> ``(outputs, index of the closing "]")``, or
    ``(None, -1)``."""
    return _output_group(run)


# ---------------------------------------------------------------------------
# The builder
# ---------------------------------------------------------------------------

def _shared_prefix(s, a, b):
    """The length of the longest prefix ``s`` shares with ``a`` or with ``b``."""
    best = 0
    for t in (a, b):
        m = min(len(s), len(t))
        k = 0
        while k < m and s[k] == t[k]:
            k += 1
        if k > best:
            best = k
    return best


def dialect_of(dialect):
    """:func:`get_dialect`, with a built-in dialect's name looked up here, compiled (the
    parser and the stream parser are called once per text: get_dialect is plain
    Python, 0.1 µs of interpreter a call)."""
    d = _BUILT_IN.get(dialect) if type(dialect) is str else None
    return d if d is not None else get_dialect(dialect)


#: id(dialect) -> (dialect, table, noting table) of the default core
_TABLE_BY_DIALECT: dict = {}


def _tables(dialect):
    entry = _TABLE_BY_DIALECT.get(id(dialect))
    if entry is None or entry[0] is not dialect:
        if len(_TABLE_BY_DIALECT) > 64:
            _TABLE_BY_DIALECT.clear()
        entry = _TABLE_BY_DIALECT[id(dialect)] = (
            dialect, _table(_DEFAULT_CORE, dialect), _table(_DEFAULT_CORE, dialect, True))
    return entry


def default_table(dialect):
    """The default lexer core's table for a :class:`Dialect` object, looked up by the
    object's identity (``_lex._table`` hashes the dialect's token kinds: 0.5 µs of
    interpreter a call)."""
    return _tables(dialect)[1]


def scan_str(text, dialect):
    """The lexer's events for the parser: the flat ``array('q')`` of ``kind, start,
    end`` triples of a ``str`` (``_lex.scan`` without its checks: the default backend,
    a :class:`Dialect` object). Here, in a compiled module, rather than in ``_lex``:
    the call costs 0.5 µs less, a tenth of parsing a short conversation."""
    buf, _stop, _rs, err, code, _foreign = _DEFAULT_CORE.scan_chunk(
        default_table(dialect), text, 0, 0, None, True)
    if err >= 0:  # (only bytes can hold invalid UTF-8)
        raise _utf8_error(text, err, code)
    return buf


def scan_noting(text, dialect):
    """:func:`scan_str`, and the offset of the first token of another dialect that the
    text spells (text in this one; -1 when there is none)."""
    buf, _stop, _rs, _err, _code, foreign = _DEFAULT_CORE.scan_chunk(
        _tables(dialect)[2], text, 0, 0, None, True)
    return buf, foreign


def plain_str(s):
    """``s``, a ``str``, as an exact ``str``: a subclass (``numpy.str_``,
    markupsafe's ``Markup``, whose ``+`` escapes the other side) by its characters."""
    return s if type(s) is str else str.__str__(s)


class _NeedBlocks(Exception):
    """The string format cannot represent this turn (an empty legacy ``tool_calls``
    list renders nothing; apertus-1.5 rejects legacy calls with empty names or
    arguments): read the conversation as blocks."""


_NEED_BLOCKS = ("format='string' cannot represent an empty call list ([]), nor, in "
                "apertus-1.5, tool calls with empty names or arguments; use 'blocks' or 'auto'")


class _Builder:
    def __init__(self, text, events, d, strict, fmt, turn=False):
        """``turn``: the text is read as one assistant turn (``build_turn``), not as a
        conversation (``build``)."""
        text = plain_str(text)
        self.text = text
        self.d = d
        self.strict = strict
        self.format = ""
        mapped = []
        if not strict:
            # Apertus 1.5 output may spell the reasoning delimiters <think> / </think>:
            # inside assistant turns (a bare completion is one), not in system, user
            # or tool-output text, where they are text (as strict reading has them)
            events = array("q", events)
            inside = True    # in an assistant turn (a bare completion is one) ...
            if not turn:     # ... unless the text starts with the header (header())
                for j in range(0, len(events), 3):
                    k = events[j]
                    if k == _K_SYSTEM_START:
                        inside = False
                    if not (k == _K_TEXT or k == _K_BOS or k == _K_THINK_START
                            or k == _K_THINK_END or k == _K_IMAGE or k == _K_AUDIO):
                        break
            group = False    # in a tool-output group there (output_group's extent)
            for j in range(0, len(events), 3):
                k = events[j]
                if group:
                    if k == _K_TEXT or k == _K_THINK_START or k == _K_THINK_END or \
                            k == _K_IMAGE or k == _K_AUDIO:
                        continue   # text of the outputs
                    group = False
                    if k == _K_TOOL_OUTPUT_END:
                        continue
                if k == _K_THINK_START or k == _K_THINK_END:
                    if inside:
                        events[j] = _K_INNER_PREFIX if k == _K_THINK_START else _K_INNER_SUFFIX
                        mapped.append(j)
                elif k == _K_TOOL_OUTPUT_START:
                    group = inside and d.tool_output_open != "["
                elif k == _K_ASSISTANT_START:
                    inside = True
                elif k == _K_ASSISTANT_END or k == _K_USER_START:
                    inside = False
                # (any other token in a turn is skipped, with a warning: it ends none)
        self.ev = events
        self.n = len(events) // 3
        self.i = 0
        self.warnings = []
        self.lines = None   # (made when an error or a warning needs it: _lines())
        for j in mapped:   # the text now re-renders with the <|...|> tokens: say so
            err = ParseError.at(text, events[j + 1], "", lines=self._lines())
            self.warnings.append(
                f"line {err.line}, column {err.column}: "
                + ("<think> read as <|inner_prefix|>" if events[j] == _K_INNER_PREFIX
                   else "</think> read as <|inner_suffix|>"))
        self.waiting = False
        self.no_header = False
        self.messages = []
        # where a prompt ended a "[a, b]" tool-output group (StreamParser, prompt=):
        # a text run is cut there, not read to its last "]" (-1: no such place)
        self.group_end = -1
        if not isinstance(fmt, str) or fmt not in ("auto", "string", "blocks"):
            raise ValueError(f"format must be 'auto', 'string' or 'blocks', got {fmt!r}")
        if fmt == "auto":
            fmt = "blocks" if self._has_reasoning() else "string"
        self.format = "string" if fmt == "string" else "blocks"

    # -- helpers ------------------------------------------------------------
    def _lines(self):
        """The text's line index (for the line and column of errors and warnings)."""
        if self.lines is None:
            self.lines = Lines(self.text)
        return self.lines

    def kind(self, j):
        return self.ev[3 * j]

    def start(self, j):
        return self.ev[3 * j + 1]

    def end(self, j):
        return self.ev[3 * j + 2]

    def _has_reasoning(self):
        # (lenient mode already mapped <think> / </think> in assistant turns)
        for j in range(self.n):
            k = self.ev[3 * j]
            if k == _K_INNER_PREFIX or k == _K_INNER_SUFFIX:
                return True
        return False

    def error(self, j, reason, expected="", at=-1):
        """The ParseError at event ``j``; or, with ``at`` (an offset inside the text
        events before ``j``), at that character of the text."""
        if at >= 0:
            stop = self.start(j) if j < self.n else len(self.text)
            if at < stop:
                found = "text " + repr(self.text[at:min(stop, at + 30)])
                return ParseError.at(self.text, at, reason, expected=expected, found=found,
                                     lines=self._lines())
        if j < self.n:
            k = self.kind(j)
            offset = self.start(j)
            if k == _K_TEXT:
                found = "text " + repr(self.text[offset:min(self.end(j), offset + 30)])
            else:
                found = _TOKEN_NAMES.get(k, "token")
        else:
            offset = len(self.text)
            found = "end of text"
        return ParseError.at(self.text, offset, reason, expected=expected, found=found,
                             lines=self._lines())

    def recover(self, j, reason, expected="", at=-1):
        """Lenient mode: note the problem and go on; strict mode: raise."""
        err = self.error(j, reason, expected, at)
        if self.strict:
            raise err
        self.warnings.append(f"line {err.line}, column {err.column}: {reason}"
                             + (f" (expected {expected})" if expected else ""))

    def textual(self, j, in_user=False):
        """Whether event ``j`` is plain text here: text runs, and token spellings the
        renderer only ever writes as content here (``<think>`` in strict mode, image /
        audio tokens outside user turns)."""
        k = self.kind(j)
        # <think> tokens are still here in strict mode, and outside assistant turns
        # in lenient mode (which mapped those inside them)
        return (k == _K_TEXT or k == _K_THINK_START or k == _K_THINK_END
                or (not in_user and (k == _K_IMAGE or k == _K_AUDIO)))

    def take_text(self, j, limit=None):
        """Concatenate consecutive textual events from ``j``; return (text, next j)."""
        limit = self.n if limit is None else limit
        start = j
        while j < limit and self.textual(j):
            j += 1
        if j == start:
            return "", j
        return self.text[self.start(start):self.end(j - 1)], j

    def expect(self, kind, what):
        if self.i < self.n and self.kind(self.i) == kind:
            self.i += 1
            return True
        # the reason says what is wrong here; `expected` (printed after it) says what
        # would have been right, so the reason does not repeat it
        if self.i >= self.n:
            reason = "text ends too early"
        elif self.kind(self.i) == _K_TEXT:
            reason = "unexpected text"
        else:
            reason = "unexpected token"
        self.recover(self.i, reason, what)
        return False

    # -- the conversation ---------------------------------------------------
    def build(self):
        result = ParsedConversation(self.messages, self.d)
        result.format = self.format
        self.header(result)
        self.turns(result)
        if len(self.warnings) > 1:
            self.warnings.sort(key=warning_place)
        result.warnings = self.warnings
        return result

    def build_turn(self):
        """Read the text as the body of one assistant turn (what follows its
        ``<|assistant_start|>``: a model's completion) into ``self.messages``, up to
        where the turn ends. Returns ``(closed, rest)``: whether ``<|assistant_end|>``
        closed it, and the offset where the text after the turn begins (``len(text)``
        if none)."""
        closed = self.assistant_turn()
        rest = self.start(self.i) if self.i < self.n else len(self.text)
        if len(self.warnings) > 1:
            self.warnings.sort(key=warning_place)
        return closed, rest

    def header(self, result):
        n = self.n
        # BOS: "<s>" at offset 0, or any text before <|system_start|> (custom bos_token)
        if self.i < n and self.kind(self.i) == _K_BOS:
            result.bos_token = "<s>"
            self.i += 1
            if self.i < n and self.textual(self.i):   # a bos_token "<s>..." ("<s><s>")
                more, j = self.take_text(self.i)
                if j < n and self.kind(j) == _K_SYSTEM_START:
                    result.bos_token = "<s>" + more
                    self.i = j
        elif self.i < n and self.textual(self.i):
            bos, j = self.take_text(self.i)
            if j < n and self.kind(j) == _K_SYSTEM_START:
                result.bos_token = bos
                self.i = j
            else:
                result.bos_token = ""
        else:
            result.bos_token = ""
        if not (self.i < n and self.kind(self.i) == _K_SYSTEM_START):
            # A bare completion or a fragment: no header to read (a "<s>" read above
            # stays the BOS: rendering the result writes it again). Strict, the text
            # here could still be a bos_token: the text stops being valid after it.
            at = self.i
            if self.strict:
                while at < n and self.textual(at):
                    at += 1
            self.recover(at, "missing system block", "<|system_start|>")
            result.date = None
            self.no_header = True
            return
        self.i += 1
        system, self.i = self.take_text(self.i)
        self.expect(_K_SYSTEM_END, "<|system_end|>")
        self.system(system, result)
        if not self.expect(_K_DEVELOPER_START, "<|developer_start|>"):
            return
        dev_at = self.i
        developer, self.i = self.take_text(self.i)
        dev_end = self.i
        # (its text first: where it stops being a developer block comes before a
        # missing <|developer_end|> after it, and a block cut off inside its fixed
        # lines expects the rest of them, not <|developer_end|>)
        self.developer(developer, dev_at, dev_end, result)
        self.expect(_K_DEVELOPER_END, "<|developer_end|>")

    def system(self, system, result):
        d = self.d
        if d.dated_system:
            head, _, tail = _dated_parts(d)
            if system.startswith(head) and system.endswith(tail) and \
                    len(system) == len(head) + 10 + len(tail):
                date = system[len(head):len(head) + 10]
                if _valid_date(date):
                    result.date = date
                    return
        elif system == d.default_system:
            return
        self.messages.append({"role": "system", "content": system})

    def developer(self, dev, first, stop, result):
        """Read the developer block's text ``dev`` (events ``first`` up to ``stop``);
        a malformed one is reported at its first character that differs from both
        forms it could take."""
        base = self.start(first) if first < self.n else len(self.text)
        if dev.startswith(_DELIB_ON):
            result.enable_thinking = True
            rest = dev[len(_DELIB_ON):]
        elif dev.startswith(_DELIB_OFF):
            rest = dev[len(_DELIB_OFF):]
        else:
            at = base + _shared_prefix(dev, _DELIB_ON, _DELIB_OFF)
            self.recover(stop, self._malformed(at), "'Deliberation: enabled' or "
                         "'Deliberation: disabled'", at)
            return
        if rest == _TOOLS_OFF:
            result.tools_text = None
        elif rest.startswith(_TOOLS_ON):
            result.tools_text = rest[len(_TOOLS_ON):]
        elif rest.startswith(_TOOLS_OFF):
            # the block is complete: only its end token may follow
            at = base + len(dev) - len(rest) + len(_TOOLS_OFF)
            self.recover(stop, "unexpected text", "<|developer_end|>", at)
        else:
            at = base + len(dev) - len(rest) + _shared_prefix(rest, _TOOLS_OFF, _TOOLS_ON)
            self.recover(stop, self._malformed(at), "'Tool Capabilities: disabled' or "
                         "'Tool Capabilities:' and the tools", at)

    def _malformed(self, at):
        """The reason for a developer block that stops being one at ``at``."""
        return "text ends too early" if at >= len(self.text) else "malformed developer block"

    # -- turns --------------------------------------------------------------
    def turns(self, result):
        n = self.n
        if self.no_header and self.i < n and \
                self.kind(self.i) not in (_K_USER_START, _K_ASSISTANT_START):
            # lenient: a bare completion is the body of an open assistant turn
            self.warnings.append("no <|assistant_start|>: read the text as an assistant turn")
            closed = self.assistant_turn()
            self.after_turn(closed, result)
        while self.i < n:
            k = self.kind(self.i)
            if k == _K_USER_START:
                self.user_turn()
            elif k == _K_ASSISTANT_START:
                if self.i == n - 1:
                    result.add_generation_prompt = True
                    self.i += 1
                    break
                self.i += 1
                closed = self.assistant_turn()
                self.after_turn(closed, result)
            else:
                if self.strict:
                    raise self.error(self.i, "unexpected content between messages",
                                     "<|user_start|> or <|assistant_start|>")
                self.recover(self.i, "skipped content between messages")
                self.i += 1

    def after_turn(self, closed, result):
        """Decide what ended an assistant turn: a user message, the template's final
        <|assistant_end|>, a content-less user message, or nothing (open turn)."""
        n = self.n
        d = self.d
        at_end = self.i == n or (self.i == n - 1 and self.kind(self.i) == _K_ASSISTANT_START)
        if closed:
            if self.i < n and self.kind(self.i) == _K_USER_START:
                return  # the user message closed the turn
            if at_end and d.closes_last_turn and not self.waiting:
                return  # the final close
            # only a user message closes a turn mid-conversation; without content it
            # renders nothing else
            self.messages.append({"role": "user"})
            return
        # open turn
        if self.i < n and not at_end:
            if self.kind(self.i) != _K_USER_START:  # (that one assistant_turn reported)
                self.recover(self.i, "assistant turn not closed", "<|assistant_end|>")
            return
        if d.closes_last_turn and not self.waiting:
            result.continue_assistant_message = True

    def user_turn(self):
        start_j = self.i
        self.i += 1
        n = self.n
        parts = []
        has_media = False
        while self.i < n:
            k = self.kind(self.i)
            if k == _K_USER_END:
                break
            if k == _K_IMAGE or k == _K_AUDIO:
                parts.append({"type": "image" if k == _K_IMAGE else "audio"})
                has_media = True
                self.i += 1
            elif self.textual(self.i, in_user=True):
                t, self.i = self._user_text(self.i)
                parts.append({"type": "text", "text": t})
            else:
                break
        if self.i < n and self.kind(self.i) == _K_USER_END:
            self.i += 1
        else:
            self.recover(self.i, _OPENED_AT.format(self.start(start_j)), "<|user_end|>")
        if has_media:
            content = {"parts": parts}
        else:
            content = "".join(p["text"] for p in parts)
        self.messages.append({"role": "user", "content": content})

    def _user_text(self, j):
        start = j
        while j < self.n and self.textual(j, in_user=True):
            j += 1
        return self.text[self.start(start):self.end(j - 1)], j

    def assistant_turn(self):
        """Read a turn body (after <|assistant_start|>); return whether it was closed
        by <|assistant_end|>."""
        n = self.n
        a = self.i
        b = a
        prompt = -1
        while b < n:
            k = self.kind(b)
            if k == _K_ASSISTANT_END or k == _K_USER_START:
                break
            if k == _K_ASSISTANT_START:
                if b == n - 1:
                    break  # the generation prompt after an open turn
                if self.strict:   # the prompt, which nothing follows: the body ends here
                    prompt = b
                    break
            b += 1
        if self.format == "blocks":
            self.blocks_body(a, b)
        else:
            self.string_body(a, b)
        if prompt >= 0:   # (after the body's own errors, which come first in the text)
            raise self.error(prompt + 1, "text after the generation prompt",
                             "end of text (<|assistant_start|> after an open turn is the "
                             "generation prompt)")
        self.i = b
        if b < n and self.kind(b) == _K_ASSISTANT_END:
            self.i += 1
            return True
        if b < n and self.kind(b) == _K_USER_START:
            self.recover(b, "assistant turn not closed before a user message",
                         "<|assistant_end|>")
        return False

    def tool_calls(self, j, b):
        """``<|tools_prefix|>[...]<|tools_suffix|>`` at ``j``: (calls, next j)."""
        body_start = j + 1
        raw, k = self.take_text(body_start, b)
        if k < b and self.kind(k) == _K_TOOLS_SUFFIX:
            nxt = k + 1
            suffix_ok = True
        else:
            nxt = k
            suffix_ok = False
            self.recover(k, "tool calls not closed", "<|tools_suffix|>")
        if self.strict:
            calls, at, what = _read_calls(raw)
            if calls is None:
                # where the list stops being of the form [{"NAME": ARGS}, ...]
                base = self.start(body_start) if body_start < self.n else len(self.text)
                raise self.error(k, "malformed tool calls", _CALLS_EXPECTED[what], base + at)
            return [(name, args) for name, args, _at in calls], nxt
        found, note = lenient_calls_at(raw)
        if note:
            self.recover(body_start if body_start < b else j, note)
        elif not _all_json(found):
            # read as written, but a client that json.loads the arguments fails on these
            base = self.start(body_start) if body_start < self.n else len(self.text)
            for name, args, at, _head in found:
                if not _all_json([(name, args)]):
                    self.recover(k, f"the arguments of tool call {shown(name, 40)} are "
                                    f"not JSON: {shown(args, 40)}", "", base + at)
        return [(name, args) for name, args, _at, _head in found], nxt

    def output_group(self, j, b):
        """``<|tool_output_start|>...<|tool_output_end|>`` at ``j``: (outputs, next j)."""
        inner, k = self.take_text(j + 1, b)
        if k < b and self.kind(k) == _K_TOOL_OUTPUT_END:
            k += 1
        else:
            self.recover(k, "tool outputs not closed", "<|tool_output_end|>")
        return split_tool_outputs(inner), k

    def leading_outputs(self, run, at, possible):
        """``_leading_outputs`` of the run at offset ``at``; but where a prompt ended a
        whole group inside the run (``group_end``), the group ends there: the server
        wrote it, and what follows is the model's."""
        if possible and self.group_end > at and run.startswith("["):
            cut = self.group_end - at
            if cut < len(run):
                outputs, close = _output_group(run[:cut])
                if outputs is not None and close == cut - 1:
                    return outputs, run[cut:]
        return _leading_outputs(run, possible)

    def in_turn(self):
        """What may stand in an assistant turn (the ``expected`` of an error there)."""
        outputs = "" if self.d.tool_output_open == "[" else ", <|tool_output_start|>"
        return (f"text, <|inner_prefix|>, <|inner_suffix|>, <|tools_prefix|>{outputs} "
                "or <|assistant_end|>")

    def blocks_body(self, a, b):
        brackets = self.d.tool_output_open == "["
        msgs = []
        blocks = []
        cur = None          # the open thoughts/response block text continues
        in_inner = False
        after_calls = False
        j = a
        while j < b:
            k = self.kind(j)
            if self.textual(j):
                at = self.start(j)
                run, j = self.take_text(j, b)
                outputs, run = self.leading_outputs(run, at, after_calls and brackets)
                if outputs is not None:
                    blocks.append({"type": "tool_outputs",
                                   "outputs": [{"output": o} for o in outputs]})
                    self.waiting = False
                    cur = None
                after_calls = False
                if run:
                    want = "thoughts" if in_inner else "response"
                    if cur is not None and cur["type"] == want:
                        cur["text"] += run
                    else:
                        cur = {"type": want, "text": run}
                        blocks.append(cur)
                continue
            after_calls = False
            if k == _K_INNER_PREFIX:
                if in_inner:
                    self.recover(j, "reasoning opened twice",
                                 "<|inner_suffix|> closing the reasoning first")
                in_inner = True
                cur = {"type": "thoughts", "text": ""}
                blocks.append(cur)
                j += 1
            elif k == _K_INNER_SUFFIX:
                lone = not in_inner
                if lone:
                    self.recover(j, "reasoning closed but not open",
                                 "<|inner_prefix|> opening it first")
                in_inner = False
                j += 1
                if j < b and self.kind(j) == _K_TOOLS_PREFIX and blocks:
                    noted = len(self.warnings)
                    calls, nxt = self.tool_calls(j, b)
                    if len(calls) == 1 and calls[0][0] == "display_answers":
                        # the call block closed the reasoning itself
                        blocks.append(_calls_block(calls))
                        self.waiting = True
                        cur = None
                        after_calls = True
                        j = nxt
                        continue
                    # only a look ahead: the calls are read (and warned about) again
                    # as the outer section's, in the next round
                    del self.warnings[noted:]
                if not (lone and cur is not None and cur["type"] == "response"):
                    # (a closer that closed nothing leaves the response it stands in
                    # whole: two response blocks in a row render as one, which is how
                    # parse_completion and the streams read it too)
                    cur = {"type": "response", "text": ""}
                    blocks.append(cur)
            elif k == _K_TOOLS_PREFIX:
                calls, nxt = self.tool_calls(j, b)
                if in_inner and blocks and len(calls) == 1 and calls[0][0] == "display_answers":
                    # inside a message this call would have closed the reasoning: it
                    # starts the next assistant message
                    msgs.append(blocks)
                    blocks = []
                blocks.append(_calls_block(calls))
                self.waiting = True
                cur = None
                after_calls = True
                j = nxt
            elif k == _K_TOOL_OUTPUT_START and not brackets:
                outputs, j = self.output_group(j, b)
                blocks.append({"type": "tool_outputs",
                               "outputs": [{"output": o} for o in outputs]})
                self.waiting = False
                cur = None
            else:
                self.recover(j, "unexpected token in an assistant turn", self.in_turn())
                j += 1
        msgs.append(blocks)
        for blk in msgs:
            self.messages.append({"role": "assistant", "content": {"blocks": blk}})

    def string_body(self, a, b):
        brackets = self.d.tool_output_open == "["
        out = []
        cur = None          # the assistant message legacy tool calls attach to
        after_calls = False
        j = a
        while j < b:
            k = self.kind(j)
            if self.textual(j):
                at = self.start(j)
                run, j = self.take_text(j, b)
                outputs, run = self.leading_outputs(run, at, after_calls and brackets)
                if outputs is not None:
                    out.extend([{"role": "tool", "content": o} for o in outputs])
                    self.waiting = False
                    cur = None
                after_calls = False
                if run:
                    cur = {"role": "assistant", "content": run}
                    out.append(cur)
                continue
            after_calls = False
            if k == _K_TOOLS_PREFIX:
                calls, j = self.tool_calls(j, b)
                if not calls or (self.d.openai_shapes
                                 and not all(nm and ar for nm, ar in calls)):
                    raise _NeedBlocks()
                legacy = [{"type": "function", "function": {"name": nm, "arguments": ar}}
                          for nm, ar in calls]
                if cur is None or "tool_calls" in cur:
                    cur = {"role": "assistant", "content": ""}
                    out.append(cur)
                cur["tool_calls"] = legacy
                self.waiting = True
                after_calls = True
            elif k == _K_TOOL_OUTPUT_START and not brackets:
                outputs, j = self.output_group(j, b)
                if not out or out[-1]["role"] == "tool":
                    # tool messages need an open turn, and a new group needs an
                    # assistant message between it and the previous one
                    out.append({"role": "assistant", "content": ""})
                for o in outputs:
                    out.append({"role": "tool", "content": o})
                self.waiting = False
                cur = None
            else:
                self.recover(j, "unexpected token in an assistant turn", self.in_turn())
                j += 1
        if not out or out[0]["role"] != "assistant":
            out.insert(0, {"role": "assistant", "content": ""})
        # a legacy call with empty arguments is rejected by apertus-1.5's template
        self.messages.extend(out)


def _calls_block(calls):
    return {"type": "tool_calls",
            "calls": [{"name": name, "arguments": args} for name, args in calls]}


#: A call's head in the lenient reading: ``{"NAME":`` with JSON whitespace around the
#: name and before the colon, and at most one space after it (where the written form has
#: its one space, so that the arguments start where the exact reading starts them).
_CALL_HEAD = re.compile(r'\{[ \t\n\r]*"([^"\n]*)"[ \t\n\r]*: ?')


def _salvage(raw):
    """The lenient reading of a call list: ``(calls, whole)``, calls as ``(name,
    arguments, start, head)`` (``head``: where the call's ``{`` is), ``whole`` true when
    the reading reached the list's ``]`` and nothing but whitespace follows it.

    Around the calls and between them any JSON whitespace is allowed (``[ {...} ]``,
    ``},{`` and ``},\\n{``, a list that starts after a space or without its ``[``); a
    call's arguments are a JSON value, else (as the exact reading has it) the text up to
    the next ``}, {"`` that a call's head follows, or the final ``}]``, or to the end of
    a cut-off list."""
    calls = []
    n = len(raw)
    pos = _json_ws(raw, 0, n)
    if pos < n and raw[pos] == "[":
        pos = _json_ws(raw, pos + 1, n)
    memo = None     # from the first arguments not read as JSON on (see _json_skip)
    while True:
        m = _CALL_HEAD.match(raw, pos)
        if m is None:
            return calls, False
        start = m.end()
        end = _json_end(raw, start, memo)
        if end < 0:
            if memo is None:
                memo = {}
            nxt = raw.find('}, {"', start)
            # (a separator that no call follows is part of these arguments: "x}, {\"y")
            while nxt >= 0 and _CALL_HEAD.match(raw, nxt + 3) is None:
                nxt = raw.find('}, {"', nxt + 1)
            if nxt < 0:
                rest = raw[start:]
                whole = rest.endswith("}]")
                if whole:
                    rest = rest[:-2]
                calls.append((m.group(1), rest, start, m.start()))
                return calls, whole
            calls.append((m.group(1), raw[start:nxt], start, m.start()))
            pos = nxt + 3
            continue
        calls.append((m.group(1), raw[start:end], start, m.start()))
        pos = _json_ws(raw, end, n)
        if pos >= n or raw[pos] != "}":
            return calls, False
        pos = _json_ws(raw, pos + 1, n)
        if pos < n and raw[pos] == ",":
            pos = _json_ws(raw, pos + 1, n)
            continue
        if pos < n and raw[pos] == "]":
            return calls, _json_ws(raw, pos + 1, n) == n
        return calls, False


def _all_json(calls):
    """Whether every call's arguments (its second item) are a JSON text: one value,
    with JSON whitespace around it as ``json.loads`` allows (``"0 "`` too: a call the
    template writes ``{"f": 0 }`` is of the written form, and the lenient reading,
    which would drop the space, must not win over it)."""
    for call in calls:
        args = call[1]
        n = len(args)
        end = _json_end(args, _json_ws(args, 0, n))
        if end < 0 or _json_ws(args, end, n) != n:
            return False
    return True


#: The keys of an OpenAI-style call object (``{"name": ..., "arguments": ...}``, or
#: ``{"type": "function", "function": {...}}``, each perhaps with an ``"id"``).
OPENAI_CALL_KEYS = frozenset(("name", "arguments", "id", "type", "function"))


def _json_members(s, pos):
    """The object at ``pos`` (``{`` there): ``(members, end)``, members as ``{key:
    (start, end)}`` of each value in ``s``; ``(None, -1)`` unless it is one JSON object
    without repeated keys."""
    n = len(s)
    i = _json_ws(s, pos + 1, n)
    members = {}
    if i < n and s[i] == "}":
        return members, i + 1
    while True:
        v = _json_key(s, i, n)
        if v < 0:
            return None, -1
        key = _JSON.decode(s[i:_json_string_end(s, i + 1, n)])
        end = _json_end(s, v)
        if end < 0 or key in members:
            return None, -1
        members[key] = (v, end)
        i = _json_ws(s, end, n)
        if i < n and s[i] == ",":
            i = _json_ws(s, i + 1, n)
            continue
        if i < n and s[i] == "}":
            return members, i + 1
        return None, -1


def _openai_call(s, pos):
    """The OpenAI-style call object at ``pos``: ``(name, arguments, start, end)``
    (``start``: where the arguments are in ``s``), or ``None``. Arguments written as
    a JSON string are that string decoded (OpenAI's own shape); any other JSON value
    is its text as written."""
    members, end = _json_members(s, pos)
    if members is None or not members.keys() <= OPENAI_CALL_KEYS:
        return None
    if "id" in members and s[members["id"][0]] != '"':
        return None
    if "type" in members and s[members["type"][0]:members["type"][1]] != '"function"':
        return None
    if "function" in members:   # {"type": "function", "function": {"name", "arguments"}}
        if "name" in members or "arguments" in members:
            return None
        a, b = members["function"]
        members = _json_members(s, a)[0] if s[a] == "{" else None
        if members is None or members.keys() != {"name", "arguments"}:
            return None
    elif "name" not in members or "arguments" not in members:
        return None
    a, b = members["name"]
    if s[a] != '"':
        return None
    name = _JSON.decode(s[a:b])
    a, b = members["arguments"]
    if s[a] == '"':
        return name, _JSON.decode(s[a:b]), a + 1, end
    return name, s[a:b], a, end


def _openai_calls(raw):
    """``raw`` as a JSON list of OpenAI-style call objects only: the calls as
    ``(name, arguments, start, head)``, or ``None``."""
    n = len(raw)
    pos = _json_ws(raw, 0, n)
    if pos >= n or raw[pos] != "[":
        return None
    # the first key as the written form's reading (and the stream) sees it: a call
    # named "name" (or another key of the shape) is what the stream holds back
    m = _FIRST_KEY.match(raw, pos)
    if m is None or m.group(1) not in OPENAI_CALL_KEYS:
        return None
    calls = []
    pos = _json_ws(raw, pos + 1, n)
    while True:
        if pos >= n or raw[pos] != "{":
            return None
        call = _openai_call(raw, pos)
        if call is None:
            return None
        calls.append((call[0], call[1], call[2], pos))
        pos = _json_ws(raw, call[3], n)
        if pos < n and raw[pos] == ",":
            pos = _json_ws(raw, pos + 1, n)
            continue
        if pos < n and raw[pos] == "]" and _json_ws(raw, pos + 1, n) == n:
            return calls
        return None


_FIRST_KEY = re.compile(r'\[[ \t\n\r]*\{[ \t\n\r]*"([a-z]*)"')


def lenient_calls_at(raw: str):
    """The calls of a call-list body as model output is read (lenient ``parse``,
    ``parse_completion``, ``StreamParser``): ``(calls, note)``, calls as ``(name,
    arguments, start, head)``, ``note`` what to warn about (``""`` when the list is of
    the written form and read as such).

    The written form (:func:`split_tool_calls_at`) comes first. When it reads some
    call's arguments as text that is not JSON but the lenient reading reads the whole
    list with JSON arguments only, the lenient reading wins: ``[{"f": {"a": 1}},{"g":
    {}}]`` is two calls, not ``f`` with the arguments ``{"a": 1}},{"g": {}``
    (docs/format.md, 7). Before either, when the written form does not read the list
    with JSON arguments, a JSON list of OpenAI-style call objects only
    (``[{"name": "f", "arguments": {...}}]``, or ``{"type": "function", "function":
    {...}}``) is read as those calls: ``f``, not a call named ``name``."""
    exact = _read_calls(raw)[0]
    if exact is None or not _all_json(exact):
        openai = _openai_calls(raw)
        if openai is not None:
            return openai, (f"read {len(openai)} tool call(s) from OpenAI-style objects "
                            f"{{\"name\": ..., \"arguments\": ...}} {raw[:60]!r}")
    if exact is not None:
        if not _all_json(exact):
            calls, whole = _salvage(raw)
            if whole and _all_json(calls):
                return calls, (f"read {len(calls)} tool call(s) as JSON from a list not "
                               f"written as the template writes it {raw[:60]!r}")
        # (a call's head, '{"' NAME '": ', begins 5 characters before its arguments)
        return [(name, args, at, at - len(name) - 5) for name, args, at in exact], ""
    calls = _salvage(raw)[0]
    return calls, f"recovered {len(calls)} tool call(s) from malformed text {raw[:60]!r}"


_DATED = {}


def _dated_parts(d):
    # (by the prompt, not the dialect's name: a Dialect of your own may keep a name;
    # bounded, as _VALID_DATES: a server may make a Dialect per tenant or request)
    parts = _DATED.get(d.default_system)
    if parts is None:
        if len(_DATED) >= 64:
            _DATED.clear()
        parts = _DATED[d.default_system] = d.default_system.partition("{date}")
    return parts


_VALID_DATES = {}


def _valid_date(s):
    """``YYYY-MM-DD`` (ASCII digits) naming a real day (remembered: corpora repeat dates)."""
    ok = _VALID_DATES.get(s)
    if ok is None:
        ok = (len(s) == 10 and s[4] == "-" and s[7] == "-"
              and all("0" <= c <= "9" for i, c in enumerate(s) if i != 4 and i != 7))
        if ok:
            try:
                datetime.date.fromisoformat(s)
            except ValueError:
                ok = False
        if len(_VALID_DATES) > 4096:
            _VALID_DATES.clear()
        _VALID_DATES[s] = ok
    return ok


def _as_text(data):
    """``(text, raw, error)``: the text, the bytes it came from (``None`` for a str),
    and for invalid UTF-8 the decoding error, the text then being what decodes before
    the bad byte."""
    if isinstance(data, str):
        return plain_str(data), None, None
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        try:
            return raw.decode("utf-8"), raw, None
        except UnicodeDecodeError as exc:
            return raw[:exc.start].decode("utf-8"), raw, exc
    raise TypeError(f"parse() takes str or UTF-8 bytes, not {type(data).__name__}")


def _token_start_at_end(s, d):
    """The length of the longest end of ``s`` that a special token of ``d`` (or
    ``<s>``) begins with, but is not."""
    spellings = [*d.tokens, "<s>"]
    longest = max(len(t) for t in spellings) - 1
    for k in range(min(len(s), longest), 0, -1):
        end = s[len(s) - k:]
        if any(t.startswith(end) and t != end for t in spellings):
            return k
    return 0


def parse(text: str | bytes, *, dialect: str | Dialect = DEFAULT_DIALECT, strict: bool = True,
          format: str = "auto") -> ParsedConversation:
    """Parse rendered Apertus text back into the conversation that renders to it.

    ``strict`` (default): text that no conversation renders to raises
    :class:`ParseError` (offset, line, column, expected, found, excerpt). Lenient
    (``strict=False``): for model output (truncated, malformed): recovers the best
    structure and lists what it recovered from in ``.warnings``; also reads
    ``<think>``/``</think>`` as the reasoning delimiters.

    ``format``: ``"auto"`` (blocks when any assistant turn has reasoning delimiters,
    else strings with legacy ``tool_calls`` and tool messages), ``"blocks"`` or
    ``"string"`` (which fails on reasoning).

    ``text`` as UTF-8 bytes: a :class:`ParseError`'s offset, line and column count
    bytes; the warnings' lines and columns count characters of the decoded text.
    Invalid UTF-8 raises :class:`ParseError` (after any error in the text before it,
    strict), except in lenient mode bytes cut inside a character at the very end (a
    token limit), which are dropped with a warning.

    Text that spells a special token of another dialect (``<|tool_output_start|>``
    parsed as ``apertus-1``, say) reads as text of this one, as the template would
    render it; a warning in ``.warnings`` names the first such token and the dialects
    that have it, and strict parsing also warns with :class:`DialectWarning`.
    """
    return parse_text(text, dialect, strict, format, True)


def parse_text(text, dialect, strict, format, warn):
    """:func:`parse`; ``warn``: whether a strict parse also warns with
    :class:`DialectWarning` (the command line reports the result's warnings itself)."""
    d = dialect_of(dialect)
    s, raw, bad = _as_text(text)
    if bad is not None:
        if not strict and bad.end == len(raw) and bad.reason == "unexpected end of data":
            # cut inside a character (a token limit): read without its bytes
            result = _parse_text(s, d, strict, format, warn)
            err = ParseError.at(s, len(s), "")
            result.warnings.append(
                f"line {err.line}, column {err.column}: the text ends inside a UTF-8 "
                f"character: its {len(raw) - bad.start} byte(s) dropped")
            return result
        error = ParseError.at(raw, bad.start, "invalid UTF-8", expected="valid UTF-8",
                              found=utf8_found(raw, bad))
        if strict:
            # an error in the text before the bad byte comes first: strict errors are
            # where the text stops being the start of any valid text, which the text
            # before the bad byte tells, without its end that may begin a token
            # ("<|de" before the bad byte is no error yet); an end too early is none
            head = s[:len(s) - _token_start_at_end(s, d)]
            try:
                _parse_text(head, d, True, format, False)
            except ParseError as exc:
                if exc.offset < len(head):
                    raise _in_bytes(exc, head, raw[:len(head.encode("utf-8"))]) from None
        raise error
    if strict and raw is not None:
        try:
            return _parse_text(s, d, strict, format, warn)
        except ParseError as exc:   # (where in the bytes, as for invalid UTF-8)
            raise _in_bytes(exc, s, raw) from None
    return _parse_text(s, d, strict, format, warn)


#: Texts from this many characters on are parsed with the cycle collector off: the
#: result is made of new dicts and lists, which no cycle joins, and a long text makes
#: so many that the collector ran again and again over them (a 57 MB text parsed in
#: 2.5 s with it, 1.1 s without). A short one makes too few to matter.
_GC_OFF_FROM = 1 << 16
#: Whether a parse turned the collector off, and turns it back on when it ends.
_gc_switched_off = False


def _parse_text(s, d, strict, format, warn):
    """``_parse_text_now``, with the collector off for a long text.

    The collector's switch is the process's, so it is only touched where nothing else
    can see it: when this is the only Python thread (another could turn the collector
    off meanwhile and find it turned on again after, or fork a child that would start
    with it off for good) and no parse already has it off."""
    global _gc_switched_off
    if (len(s) < _GC_OFF_FROM or _gc_switched_off or not gc.isenabled()
            or _threading.active_count() > 1):
        return _parse_text_now(s, d, strict, format, warn)
    try:
        _gc_switched_off = True   # (first: an exception between the two lines finds it)
        gc.disable()
        return _parse_text_now(s, d, strict, format, warn)
    finally:
        if _gc_switched_off:
            _gc_switched_off = False
            gc.enable()


def _gc_on_in_a_child():
    """A child forked during such a parse (from a signal handler, say) starts with the
    collector on: nothing in it would turn it back on."""
    global _gc_switched_off
    if _gc_switched_off:
        _gc_switched_off = False
        gc.enable()


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_gc_on_in_a_child)


def _parse_text_now(s, d, strict, format, warn):
    events, foreign = scan_noting(s, d)
    builder = _Builder(s, events, d, strict, format)
    if builder.format == "string" and builder._has_reasoning():
        raise ValueError("format='string' cannot represent reasoning (<|inner_prefix|>); "
                         "use 'blocks' or 'auto'")
    try:
        result = builder.build()
    except _NeedBlocks:
        if format != "auto":
            raise ValueError(_NEED_BLOCKS) from None
        result = _Builder(s, events, d, strict, "blocks").build()
    if strict:
        _verify(s, result)
    if foreign >= 0:
        _note_foreign(s, d, foreign, result, strict and warn)
        result.warnings.sort(key=warning_place)
    return result


_PLACE = re.compile(r"line (\d+), column (\d+): ")


def warning_place(warning):
    """Where in the text a warning is (its ``line L, column C: `` prefix), to list the
    warnings in text order: they are found in another (the ``<think>`` tags first, the
    other dialect's token last). A warning about the whole text, with no place, first."""
    m = _PLACE.match(warning)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _note_foreign(s, d, at, result, warn):
    """Say that ``s[at:]`` starts with another dialect's token: in ``result.warnings``,
    and, with ``warn`` (strict parsing, whose warnings are otherwise empty), as a
    :class:`DialectWarning`."""
    token = s[at:s.index("|>", at) + 2]
    err = ParseError.at(s, at, "")
    others = [name for name in dialects_with(token) if name != d.name]
    hint = f"; if it was rendered in {' or '.join(others)}, parse it as that" if others else ""
    message = (f"line {err.line}, column {err.column}: {token} is a token of "
               f"{' and '.join(others) or 'another dialect'}, not of {d.name}, and was "
               f"read as text{hint}")
    result.warnings.append(message)
    if warn:
        warn_caller(message, DialectWarning)


#: The reason of an unclosed user message, which names where it opened (an offset,
#: counted in bytes for bytes input: ``_in_bytes`` converts it).
_OPENED_AT = "user message opened at offset {} not closed"
_OPENED_AT_RE = re.compile(r"^user message opened at offset (\d+) not closed$")


def _in_bytes(exc, text, raw):
    """``exc`` (at a character of ``text``) at the same place in ``raw``, the UTF-8
    bytes ``text`` was decoded from; an offset its reason names, too."""
    at = len(text[:exc.offset].encode("utf-8"))
    reason = exc.reason
    m = _OPENED_AT_RE.match(reason)
    if m:
        reason = _OPENED_AT.format(len(text[:int(m.group(1))].encode("utf-8")))
    return ParseError.at(raw, at, reason, expected=exc.expected, found=exc.found)


def _verify(text, result):
    """Strict mode: the text must be exactly what the parsed conversation renders to;
    otherwise no conversation renders to it (the builder takes the canonical reading
    of every ambiguity), and the first difference is reported."""

    try:
        if renders_to(text, result.messages, result._dialect_arg(), None, result.enable_thinking,
                      result.add_generation_prompt, result.continue_assistant_message,
                      result.date, result.bos_token, result.tools_text):
            return
        again = result.render()
    except RenderError as exc:
        raise ParseError.at(text, 0, f"no conversation renders to this text ({exc})") from None
    if again == text:   # (only if the default date changed between the two renders)
        return
    at = _first_difference(text, again)
    expected = repr(again[at:at + 25]) if at < len(again) else "end of text"
    found = repr(text[at:at + 25]) if at < len(text) else "end of text"
    raise ParseError.at(text, at, "no conversation renders to this text",
                        expected=expected, found=found)


def _first_difference(a, b):
    n = min(len(a), len(b))
    lo = 0
    # compare in chunks first: the common prefix is usually long
    step = 4096
    while lo + step <= n and a[lo:lo + step] == b[lo:lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def normalize(messages: Messages, *, dialect: str | Dialect = DEFAULT_DIALECT,
              add_generation_prompt: bool = False,
              continue_assistant_message: bool = False) -> list[dict[str, Any]]:
    """The canonical form of a conversation: the messages :func:`parse` returns for its
    rendering with these settings (``docs/format.md`` lists the rules: merged turns and
    thoughts, tool outputs as blocks or tool messages, the default system prompt
    dropped, ...). ``render(normalize(m, **kw), **kw2) == render(m, **kw)`` with ``kw2``
    the flags :func:`parse` reports for that rendering, which are ``kw`` except where the
    text cannot tell (an empty open last turn reads as the generation prompt; see
    docs/format.md, 12), and with the same ``date``.

    Raises :class:`RenderError` for a conversation the template rejects, and
    :class:`ParseError` for one outside the round-trip domain (content spelling special
    tokens; tool-call arguments that are not JSON and hold ``}, {"``: docs/format.md).
    That error names the message with which the conversation stops parsing back (``message
    1 renders to ...``, and ``.message_index``: the leading run of messages that ends
    with it does not parse back, the run before it does; found by bisection, so where a
    later message makes a failing run parse again it need not be the first such
    message); its offset, line and column are in the conversation's rendering (dated
    2000-01-01), which its excerpt quotes.
    """
    d = get_dialect(dialect)
    text = render(messages, dialect=d, date=_NORMALIZE_DATE,
                  add_generation_prompt=add_generation_prompt,
                  continue_assistant_message=continue_assistant_message)
    try:
        return parse(text, dialect=d).messages
    except ParseError as exc:
        flags = dict(add_generation_prompt=add_generation_prompt,
                     continue_assistant_message=continue_assistant_message)
        index = _message_at(messages, d, flags)
        where = f"message {index}" if index is not None else "the conversation"
        err = ParseError.at(text, exc.offset,
                            f"{where} renders to text that does not parse back: "
                            f"{exc.reason}, in the rendered text",
                            expected=exc.expected, found=exc.found)
        err.message_index = index
        raise err from None


_NORMALIZE_DATE = "2000-01-01"


def _message_at(messages, d, flags):
    """The index of a message with which the conversation stops parsing back: the
    leading run that ends with it does not, the run before it does (a bisection: the
    runs are rendered and parsed about log2(n) times; if a later message makes a
    failing run parse again, not always the first such message); ``None`` if no run of
    them fails alone."""
    if not isinstance(messages, (list, tuple)):
        messages = getattr(messages, "messages", None)   # a drop-in Conversation
        if not isinstance(messages, (list, tuple)):
            return None

    def fails(k):
        try:
            parse(render(messages[:k], dialect=d, date=_NORMALIZE_DATE, **flags), dialect=d)
        except ApertusError:
            return True
        return False

    lo, hi = 0, len(messages)   # messages[:lo] parses back (none: the header alone)
    if hi == 0 or not fails(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid
    return hi - 1


# The annotations' names at run time (typing.get_type_hints; see _render)
from typing import Any  # noqa: E402

from ._render import Messages  # noqa: E402
from ._spans import Rendered  # noqa: E402
