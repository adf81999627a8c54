"""atheris (libFuzzer) harness for the compiled hot path of ``render`` (``_render_fast``).

Each input becomes a render call: a dialect, flags, a BOS token, tools and messages, all
drawn from a generator seeded with the input bytes. Three calls in four are well formed
(the hot path's usual case); the fourth may hold every kind of wrong value at every
place: other roles and types, missing fields, blocks of unknown types, fields of another
block type. Tool calls come in both shapes with str or object arguments (nested JSON
values of every type, as deep as 40 levels, with what tojson escapes), tools from a
small catalogue and variants of it. Texts are runs of one character of every width
(ASCII, Latin-1, BMP, astral, a lone surrogate) with a few others mixed in, 0-120
characters long, so that the copies into the result (same width, or widened 1->2, 1->4,
2->4 in 4-, 8- and 16-character steps, from 64 characters on after a loop over
32-character blocks) meet every length and neighbour. Checks, against
the general path (``_render._render_general``):

* the hot path either declines (``None``) or gives exactly the general path's text, and
  declines whenever the general path raises;
* it does not modify its input; a second call (tool signatures now cached) agrees with
  the first, and so does one after a cached tool was changed in place;
* ``matches`` says ``True`` for the general path's text wherever the hot path answered,
  and ``False`` for that text changed by one character;
* ``render_with_spans`` on the hot path gives the general path's text and spans;
* where the official templates are at hand (``../shared/oracle``, or
  ``APERTUS_ORACLE_DIR``) and the call holds only JSON values: the general path renders
  exactly what the template renders, or both fail, and ours with ``RenderError`` naming
  the message the template fails at (as ``tests/test_render_oracle.py``; the
  ``tools_text`` extension has no template counterpart and is not compared).

Run from the repository root, with the package built (``make install``)::

    python fuzz/fuzz_render.py -max_total_time=600

Both paths are compiled code that atheris does not instrument, so the search is not
guided by coverage (libFuzzer reports "no interesting inputs"; every input still draws
a full call): what it is for is crashes, memory errors and disagreements on inputs
nobody wrote down.
"""

from __future__ import annotations

import os
import random
import sys

import atheris

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from apertus_fast import RenderError, _render, render_with_spans  # noqa: E402
from apertus_fast._dialects import DIALECTS  # noqa: E402
from tests.make_golden import oracle_expect  # noqa: E402
from tests.oracle import ORACLE_MISSING  # noqa: E402

if _render._FAST is None:
    sys.exit("fuzz_render.py needs the compiled hot path (_render_fast): run `make install`")

DIALECT_NAMES = sorted(DIALECTS)
#: one character of each width, and the characters the format and JSON care about
CHARS = ["a", "Z", " ", "\n", "é", "\xff", "\u0100", "中", "\uffff", "😀", "\U0010ffff",
         "\udc80", "<", "|", "{", '"', "\\", "\x00"]
ROLES = ["system", "user", "assistant", "tool", "user", "assistant", "assistant", "tool"]
WRONG_ROLES = ["robot", "", "User"]
BLOCK_TYPES = ["thoughts", "tool_calls", "tool_outputs", "response", "response", "thoughts",
               "other", ""]
TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string", "description": "City name"},
         "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
         "days": {"type": ["integer", "null"], "default": 1}},
         "required": ["city"]}},
    {"name": "search", "description": "Search the index.", "parameters": {
        "type": "object", "properties": {
            "q": {"type": "string"},
            "filters": {"type": "array", "items": {"type": "object", "properties": {
                "field": {"type": "string"},
                "value": {"oneOf": [{"type": "string"}, {"type": "number"}]}}}},
            "limit": {"type": "number", "default": 10.0}}}},
    {"type": "function", "function": {"name": "now", "description": "The time.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"name": "noop", "description": ""},
]


class Draw:
    """Values drawn from a generator seeded with the fuzzer's bytes: without coverage
    from the compiled code, libFuzzer keeps its corpus at a few bytes, which drawn
    directly would give empty conversations; seeded, every input gives a full call (and
    the same call again when it is replayed)."""

    def __init__(self, data: bytes):
        self.r = random.Random(data)
        # most calls are well formed (the hot path's case); the others may hold a wrong
        # value anywhere
        self.wild = self.int(0, 3) == 0

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, in_256: int) -> bool:
        return self.int(0, 255) < in_256

    def text(self) -> str:
        n = self.int(0, 120)
        chars = [self.pick(CHARS)] * n
        for _ in range(self.int(0, 3) if n else 0):
            chars[self.int(0, n - 1)] = self.pick(CHARS)
        return "".join(chars)

    def odd(self):
        """A value of a type the template does not expect there."""
        return self.pick([None, 0, 1.5, True, ["x"], {"text": "x"}, ("t",), b"b"])

    def maybe(self, value, in_256: int = 12):
        return self.odd() if self.wild and self.chance(in_256) else value


def json_value(d: Draw, depth: int = 0):
    """An object argument: what apertus-1.5 serialises with tojson (the hot path writes
    it itself: every JSON type, escapes, numbers of every size, nesting past its
    32-level limit, and values it must decline)."""
    k = d.int(0, 11 if depth < 40 else 7)
    if k == 0:
        return d.pick([None, True, False])
    if k == 1:
        return d.pick([0, -1, 256, 257, -(2**63), 2**63, 2**64 + 1, 10**30, d.int(-10**6, 10**6)])
    if k == 2:
        return d.pick([0.0, -0.0, 1.5, 1e300, 5e-324, float("nan"), float("inf"), -float("inf")])
    if k in (3, 4, 5, 6):
        return d.text()
    if k == 7:
        return d.odd() if d.wild else d.text()
    if k in (8, 9):
        return [json_value(d, depth + 1) for _ in range(d.int(0, 3))]
    keys = [d.text() if not (d.wild and d.chance(20)) else d.pick([1, None, 2.5]) for _ in range(d.int(0, 3))]
    return {key: json_value(d, depth + 1) for key in keys}


def tool_call(d: Draw):
    args = d.pick([lambda: d.text(), lambda: {"city": d.text()}, lambda: {}, lambda: [1, d.text()],
                   lambda: d.odd(), lambda: json_value(d), lambda: json_value(d)])()
    name = d.maybe(d.pick(["get_weather", "search", d.text()]))
    if d.chance(100):
        return {"type": "function", "function": {"name": name, "arguments": args}}
    call = {"name": name, "arguments": args}
    if d.wild and d.chance(10):
        del call[d.pick(["name", "arguments"])]
    return call


def block(d: Draw):
    kind = d.pick(BLOCK_TYPES[:-2] if not d.wild else BLOCK_TYPES)
    b = {"type": d.maybe(kind)}
    if kind in ("thoughts", "response", "other"):
        b["text"] = d.maybe(d.text())
    elif kind == "tool_calls":
        b["calls"] = d.maybe([tool_call(d) for _ in range(d.int(0, 3))])
    elif kind == "tool_outputs":
        b["outputs"] = d.maybe([d.maybe({"output": d.maybe(d.text())}) for _ in range(d.int(0, 3))])
    if d.wild and d.chance(8):  # a field of another block type
        b[d.pick(["text", "calls", "outputs"])] = d.text()
    return b


def user_content(d: Draw):
    how = d.int(0, 5)
    if how <= 2:
        return d.text()
    parts = []
    for _ in range(d.int(0, 4)):
        t = d.pick(["text", "text", "image", "audio", "video"] if d.wild
                   else ["text", "text", "image", "audio"] if d.media else ["text"])
        parts.append({"type": t, "text": d.maybe(d.text())} if t == "text" else {"type": t})
    return {"parts": parts} if how <= 4 or not (d.wild or d.media) else parts


def message(d: Draw, i: int, after_assistant: bool):
    role = d.pick(WRONG_ROLES) if d.wild and d.chance(6) else d.pick(ROLES)
    if not d.wild:  # where the templates take each role
        if role == "system" and i:
            role = "user"
        if role == "tool" and not after_assistant:
            role = "assistant"
    m = {"role": d.maybe(role, 6)}
    if role == "system":
        m["content"] = d.text() if d.chance(200) else {"text": d.maybe(d.text())}
    elif role == "user":
        m["content"] = d.maybe(user_content(d))
    elif role == "assistant":
        if d.strings:
            m["content"] = d.maybe(d.text())
        else:
            m["content"] = d.maybe({"blocks": [block(d) for _ in range(d.int(0, 5))]})
        if d.chance(40):
            m["tool_calls"] = d.maybe([tool_call(d) for _ in range(d.int(0, 3))])
    else:
        m["content"] = d.maybe(d.text())
    if d.wild and d.chance(8):
        del m[d.pick(list(m))]
    if d.chance(8):
        m[d.pick(["name", "tool_call_id", "extra"])] = d.text()
    return m


def tools(d: Draw):
    if d.chance(120):
        return None
    out = []
    for _ in range(d.int(0, 3)):
        t = d.pick(TOOLS)
        if d.chance(60):  # a variant: same name, another description or default
            x = {"type": d.pick(["string", "integer", "boolean"]),
                 "default": d.pick([1, 1.0, True, "1", None])}
            t = (dict(t, description=d.text()) if d.chance(128)
                 else dict(t, parameters={"type": "object", "properties": {"x": x}}))
        out.append(t)
    return d.maybe(out, 6)


def call(d: Draw) -> tuple:
    dialect = d.pick(DIALECT_NAMES)
    d.media = dialect == "apertus-1.5"          # image/audio parts, plain part lists
    d.strings = d.chance(128)                   # string or block assistants (one format)
    messages, after_assistant = [], False
    for i in range(d.int(0, 8)):
        m = message(d, i, after_assistant)
        after_assistant = m.get("role") in ("assistant", "tool")
        messages.append(m)
    tools_ = tools(d)
    tools_text = d.text() if (d.wild or tools_ is None) and d.chance(8) else None
    return (d.maybe(messages, 4), dialect, tools_, d.chance(128), d.chance(64), d.chance(32),
            d.pick(["2026-01-01", "2025-12-31"]), d.pick(["<s>", "", d.text()]), tools_text)


def json_only(x) -> bool:
    """Whether ``x`` holds only what ``json.loads`` makes (the oracle tests' domain)."""
    if type(x) is dict:
        return all(type(k) is str and json_only(v) for k, v in x.items())
    if type(x) is list:
        return all(map(json_only, x))
    return x is None or type(x) in (str, int, float, bool)


def against_oracle(args, want) -> None:
    messages, dialect, tools_, thinking, gen, cont, date, bos, tools_text = args
    if (ORACLE_MISSING or tools_text is not None or type(messages) is not list
            or not json_only([messages, tools_])):
        return
    exp = oracle_expect(messages, dialect=dialect, tools=tools_, enable_thinking=thinking,
                        add_generation_prompt=gen, continue_assistant_message=cont, date=date,
                        bos_token=bos)
    if exp.error is None:
        assert want == exp.text, (args, want, exp.text)
    else:
        assert isinstance(want, RenderError), (args, exp.error, want)
        assert want.message_index == exp.message_index, (args, exp.error, want)


def spans_on_the_general_path(args) -> tuple:
    messages, dialect, tools_, thinking, gen, cont, date, bos, tools_text = args
    saved = _render._FAST_MARKS
    _render._FAST_MARKS = None
    try:
        return tuple(render_with_spans(
            messages, dialect=dialect, tools=tools_, enable_thinking=thinking,
            add_generation_prompt=gen,
            continue_assistant_message=cont, date=date, bos_token=bos, tools_text=tools_text))
    finally:
        _render._FAST_MARKS = saved


def general(args):
    try:
        return _render._render_general(*args)
    except Exception as exc:  # noqa: BLE001 - every error the general path raises
        return exc


def test_one(data: bytes) -> None:
    d = Draw(data)
    args = call(d)
    before = repr(args)
    got = _render._FAST(*args)
    assert repr(args) == before, "the hot path modified its input"
    want = general(args)
    against_oracle(args, want)
    if isinstance(want, Exception):
        assert got is None, (args, want, got)
        return
    assert got is None or got == want, (args, want, got)
    assert _render._FAST(*args) == got, args          # again, with the tools cached
    same = _render._MATCHES(want, *args)
    assert same is (None if got is None else True), (args, same)
    if got is not None and want:
        k = d.int(0, len(want) - 1)
        other = want[:k] + ("b" if want[k] == "a" else "a") + want[k + 1:]
        assert _render._MATCHES(other, *args) is False, (args, k)
    if got is not None:  # the spans the hot path records are the general path's
        spans = _render._FAST_MARKS(*args)
        assert spans is not None and spans[0] == got, args
        assert tuple(spans) == spans_on_the_general_path(args), (args, spans)
    tools_ = args[2]
    if got is not None and type(tools_) is list and tools_ and type(tools_[0]) is dict:
        tools_[0]["description"] = d.text()            # a cached tool changed in place
        assert _render._FAST(*args) in (None, general(args)), args


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()
