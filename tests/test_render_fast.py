"""The compiled hot path of ``render`` (``_render_fast.pyx``) against the general path.

``render`` first tries the hot path, which returns ``None`` for anything outside the
usual case; the general path (``_render._render_general``) then renders it. The oracle
tests go through ``render`` and so check whichever path answered; these tests check the
two paths against each other directly:

* on every generated input (realistic and wild, every dialect, every flag), the hot path
  either declines or returns exactly the general path's text, and declines whenever the
  general path raises;
* it does answer on the usual case (the shipped samples, long conversations, every
  string width);
* ``render_with_spans`` through it gives the general path's text and spans (or error);
* its tool-signature cache never serves a text for a tool that would render differently
  (mutated in place, 1 / 1.0 / True, 0.0 / -0.0, key order, many variants of one name).

Skipped where the extension is not built (pure-Python install): there is one path only.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import _render
from tests import strategies as S
from tests.fresh import run_python

if _render._FAST is None:
    pytest.skip("no compiled hot path (_render_fast not built): render has one path only",
                allow_module_level=True)

from apertus_fast import _render_fast  # noqa: E402
from apertus_fast import RenderError  # noqa: E402

# a fifth of the oracle tests' count: those already run every example through the hot path
EXAMPLES = max(int(os.environ.get("APERTUS_ORACLE_EXAMPLES", "500")) // 5, 100)
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
_settings = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                        HealthCheck.data_too_large])
_DEFAULTS = dict(tools=None, enable_thinking=False, add_generation_prompt=False,
                 continue_assistant_message=False, date="2026-01-01", bos_token="<s>",
                 tools_text=None)


def _args(dialect, messages, **kw):
    a = dict(_DEFAULTS, **kw)
    return (messages, dialect, a["tools"], a["enable_thinking"], a["add_generation_prompt"],
            a["continue_assistant_message"], a["date"], a["bos_token"], a["tools_text"])


def fast(dialect, messages, **kw):
    return _render._FAST(*_args(dialect, messages, **kw))


def general(dialect, messages, **kw):
    return _render._render_general(*_args(dialect, messages, **kw))


def agree(dialect, messages, **kw):
    """The hot path declines or matches the general path; returns whether it answered."""
    before = repr((messages, kw.get("tools")))
    got = fast(dialect, messages, **kw)
    assert repr((messages, kw.get("tools"))) == before, "the hot path modified its input"
    try:
        expected = general(dialect, messages, **kw)
    except Exception as exc:  # noqa: BLE001 - any failure of the general path
        assert got is None, f"the general path raises {exc!r} but the hot path renders {got!r}"
        return False
    if got is None:
        return False
    assert type(got) is str
    assert got == expected
    return True


# --------------------------------------------------------------------------- properties

@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("strategy", [S.render_inputs, S.wild_render_inputs],
                         ids=["realistic", "wild"])
@settings(max_examples=EXAMPLES, **_settings)
@given(data=st.data())
def test_generated_inputs_agree(dialect, strategy, data):
    inputs = data.draw(strategy(dialect), label="inputs")
    agree(dialect, **inputs)
    spans_agree(dialect, **inputs)  # render_with_spans (below)


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=max(EXAMPLES // 5, 50), **_settings)
@given(data=st.data())
def test_tools_text_agrees(dialect, data):
    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    tools = inputs.pop("tools")
    text = data.draw(st.text(max_size=40), label="tools_text")
    agree(dialect, tools_text=text, **inputs)
    if tools:  # both: an error on both paths
        assert fast(dialect, tools=tools, tools_text=text, **inputs) is None


# --------------------------------------------------------------------------- coverage

def _sample_lines():
    with open(SAMPLES / "conversations.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_shipped_samples_take_the_hot_path(dialect):
    answered = 0
    for item in _sample_lines():
        if isinstance(item, list):  # a line may be a bare message list
            item = {"messages": item}
        kw = dict(tools=item.get("tools"), enable_thinking=bool(item.get("enable_thinking")))
        try:
            general(dialect, item["messages"], **kw)
        except Exception:  # noqa: BLE001 - samples of another dialect's features
            continue
        assert agree(dialect, item["messages"], **kw), f"declined: {item!r:.200}"
        answered += 1
    assert answered >= 10


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_long_conversation_grows_the_piece_buffer(dialect):
    messages = [{"role": "system", "content": "s"}]
    for i in range(300):  # far more pieces than the initial stack buffer holds
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": f"thinking {i}"},
            {"type": "tool_calls", "calls": [{"name": "f", "arguments": '{"i": %d}' % i}]},
            {"type": "tool_outputs", "outputs": [{"output": str(i)}, {"output": "x"}]},
            {"type": "response", "text": f"answer {i}"}]}})
    assert agree(dialect, messages)


WIDTHS = ["ascii", "latin-1 é", "bmp ü中文", "astral 😀", ""]


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("user", WIDTHS)
@pytest.mark.parametrize("assistant", WIDTHS)
def test_every_string_width(dialect, user, assistant):
    messages = [{"role": "user", "content": user},
                {"role": "assistant", "content": assistant},
                {"role": "user", "content": {"parts": [{"type": "text", "text": assistant},
                                                       {"type": "text", "text": user}]}}]
    assert agree(dialect, messages, bos_token=user)


def _narrow(n, width, shift):
    """n characters of one width, each position distinct from its neighbours (a piece
    copied to the wrong place, or clobbered by its neighbour's copy, shows)."""
    base = {"ascii": 0x41, "latin-1": 0xC0, "bmp": 0x4E00}[width]
    return "".join(chr(base + (i * 7 + shift) % 26) for i in range(n))


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("source,wide", [("ascii", "中"), ("ascii", "😀"), ("latin-1", "中"),
                                         ("latin-1", "😀"), ("bmp", "😀")])
def test_widening_pieces_of_every_length(dialect, source, wide):
    """Narrow pieces of 0-120 characters copied into a wider text (the widening copies
    work in overlapping 4-, 8- and 16-character steps, and from 64 characters on in
    a loop over 32-character blocks first): first piece, between tokens, next to each
    other, and next to a piece of the wide width."""
    for n in range(121):
        messages = [{"role": "user", "content": wide},
                    {"role": "assistant", "content": _narrow(n, source, 1)},
                    {"role": "user", "content": {"parts": [{"type": "text", "text": _narrow(n, source, 2)},
                                                           {"type": "text", "text": _narrow(120 - n, source, 3)},
                                                           {"type": "text", "text": wide}]}},
                    {"role": "assistant", "content": _narrow(n + 17, source, 4)}]
        assert agree(dialect, messages, bos_token=_narrow(n, source, 5)), n


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("messages", [
    ("tuple", ({"role": "user", "content": "hi"},)),
    ("str subclass", [{"role": "user", "content": type("S", (str,), {})("hi")}]),
    ("dict subclass", [type("D", (dict,), {})(role="user", content="hi")]),
    ("int content", [{"role": "user", "content": 1}]),
    ("int key", [{"role": "user", "content": "hi", 1: 2}]),
    ("tool first", [{"role": "tool", "content": "x"}]),
    ("bad role", [{"role": "robot", "content": "x"}]),
], ids=lambda p: p[0] if isinstance(p, tuple) else None)
def test_unusual_inputs_are_left_to_the_general_path(dialect, messages):
    _, msgs = messages
    assert fast(dialect, msgs) is None
    agree(dialect, msgs)


# --------------------------------------------------------------------------- object arguments

# apertus-1.5 serialises tool-call arguments given as objects with Hugging Face's tojson
# (json.dumps(ensure_ascii=False)); the hot path writes that JSON itself (push_json).
_json_text = st.one_of(st.text(max_size=8), st.sampled_from(
    ["", "Zürich", 'say "hi"', "back\\slash", "tab\there", "line\nbreak", "\x00\x1f\x7f",
     "😀 emoji", "中文", "\ud800 lone", "ok"]))
_json_leaves = st.one_of(
    st.none(), st.booleans(), _json_text,
    st.integers(-300, 300), st.integers(), st.integers(min_value=2**63 - 2, max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, -0.0, 1e300, 2.5, 1e-7]))
json_args = st.recursive(
    _json_leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_json_text, inner, max_size=4)),
    max_leaves=20)
_odd_args = st.one_of(
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.tuples(st.integers()), st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(lambda d: type("D", (dict,), {})(d), st.dictionaries(_json_text, st.integers())),
    st.builds(lambda v: type("I", (int,), {})(v), st.integers()),
    st.builds(lambda v: type("S", (str,), {})(v), st.text(max_size=4)))


def _with_arguments(args, shape):
    """A conversation whose one tool call carries ``args``, as a legacy OpenAI
    ``tool_calls`` entry or in a ``tool_calls`` block (OpenAI-shaped or flat)."""
    if shape == "legacy":
        calls = {"tool_calls": [{"type": "function", "function": {"name": "f", "arguments": args}}],
                 "content": "ok"}
    elif shape == "block-openai":
        calls = {"content": {"blocks": [{"type": "tool_calls", "calls": [
            {"type": "function", "function": {"name": "f", "arguments": args}}]}]}}
    else:
        calls = {"content": {"blocks": [{"type": "tool_calls", "calls": [
            {"name": "f", "arguments": args}]}]}}
    return [{"role": "user", "content": "hi"}, dict(role="assistant", **calls)]


def _plain_json(x, depth=0):
    """Whether the hot path writes ``x`` itself: exact JSON types, str keys, finite
    floats, under 32 levels of containers."""
    t = type(x)
    if t in (dict, list):
        return depth < 32 and all(
            (t is list or type(k) is str) and _plain_json(v, depth + 1)
            for k, v in (x.items() if t is dict else enumerate(x)))
    if t is float:
        return x == x and x not in (float("inf"), -float("inf"))
    return x is None or t in (bool, int, str)


@pytest.mark.parametrize("shape", ["legacy", "block-openai", "block-flat"])
@settings(max_examples=EXAMPLES * 2, **_settings)
@given(args=json_args)
def test_object_arguments_are_written_as_json_dumps(shape, args):
    messages = _with_arguments(args, shape)
    got = fast("apertus-1.5", messages)
    if isinstance(args, str):   # a str is printed as it is, not serialised
        assert agree("apertus-1.5", messages) == (shape != "legacy" or args != "")
        assert got is None or ('{"f": ' + args + "}") in got
        return
    answers = _plain_json(args)
    if shape == "legacy":   # the template wants non-empty arguments there, dict or list
        answers = answers and type(args) in (dict, list) and len(args) > 0
    assert agree("apertus-1.5", messages) == answers
    if got is not None:
        assert ('{"f": ' + json.dumps(args, ensure_ascii=False) + "}") in got


@pytest.mark.parametrize("shape", ["legacy", "block-openai", "block-flat"])
@settings(max_examples=EXAMPLES, **_settings)
@given(args=st.one_of(_odd_args, st.lists(_odd_args, min_size=1, max_size=2),
                      st.dictionaries(_json_text, _odd_args, min_size=1, max_size=2)))
def test_unusual_arguments_are_left_to_the_general_path(shape, args):
    messages = _with_arguments(args, shape)
    if not isinstance(args, str):
        assert fast("apertus-1.5", messages) is None
    agree("apertus-1.5", messages)


@pytest.mark.parametrize("depth", [1, 31, 32, 33, 200])
def test_deeply_nested_arguments(depth):
    args = "x"
    for i in range(depth):
        args = [args] if i % 2 else {"k": args}
    messages = _with_arguments(args, "legacy")
    assert (fast("apertus-1.5", messages) is not None) == (depth <= 32)
    agree("apertus-1.5", messages)


def test_argument_texts_made_during_a_render_are_released():
    import sys
    args = {"big": 10**40, "x": 1.5, "esc": 'a"b', "small": 7}
    messages = _with_arguments(args, "legacy")
    fast("apertus-1.5", messages)
    before = [sys.getrefcount(v) for v in args.values()]
    for _ in range(100):
        assert fast("apertus-1.5", messages) is not None
    assert [sys.getrefcount(v) for v in args.values()] == before


# --------------------------------------------------------------------------- tool cache

def _tool(default=30, props=("a", "b"), description="Do it.", name="do"):
    return {"name": name, "description": description, "parameters": {
        "type": "object",
        "properties": {p: {"type": "number", "description": p, "default": default} for p in props},
        "required": list(props[:1])}}


CONV = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _fresh_cache():
    _render_fast.clear_tool_cache()
    yield
    _render_fast.clear_tool_cache()


# --------------------------------------------------------------------------- tool writer

def _general_tool(tool, dialect):
    d = _render.get_dialect(dialect)
    return _render._render_tool(tool, d.trim_blocks, d.tojson == "jinja", d.openai_shapes)


def writer_agrees(tool, dialect):
    """The hot path's tool writer (a cache miss) declines, or writes what
    ``_render_tool`` renders, and declines whenever that raises; returns whether it
    wrote."""
    before = repr(tool)
    got = _render_fast.written_tool(tool, dialect)
    assert repr(tool) == before, "the writer modified its input"
    try:
        expected = _general_tool(tool, dialect)
    except Exception as exc:  # noqa: BLE001 - any failure of the general path
        assert got is None, f"_render_tool raises {exc!r} but the writer writes {got!r}"
        return False
    if got is not None:
        assert got == expected
    return got is not None


def _schema_tool(schema, required=None, **fields):
    params = {"type": "object", "properties": {"p": schema, "q": {"type": "string"}}}
    if required is not None:
        params["required"] = required
    return {"name": "f", "description": "d", "parameters": params, **fields}


#: Tools on each rule of the template that the writer reproduces, and on the shapes it
#: leaves to _render_tool: name -> (tool, whether it is written, or that per dialect).
_WRITER_CASES = {
    "no-parameters": ({"name": "f", "description": "d"}, True),
    "parameters-null": ({"name": "f", "description": "d", "parameters": None}, True),
    "parameters-empty": ({"name": "f", "description": "d", "parameters": {}}, True),
    "properties-empty": ({"name": "f", "description": "d", "parameters": {"properties": {}}}, True),
    "parameters-list": ({"name": "f", "description": "d", "parameters": [1]}, False),
    "parameters-string": ({"name": "f", "description": "d", "parameters": "x"}, False),
    "properties-list": ({"name": "f", "description": "d", "parameters": {"properties": ["p"]}}, False),
    "description-missing": ({"name": "f"}, False),
    "description-number": ({"name": "f", "description": 5}, False),
    "description-empty": ({"name": "f", "description": ""}, True),
    "name-missing": ({"description": "d"}, False),
    "name-number": ({"name": 1, "description": "d"}, False),
    "openai": ({"type": "function", "function": {"name": "f", "description": "d"}}, True),
    "function-only": ({"function": {"name": "f", "description": "d"}}, True),
    "function-falsy": ({"name": "f", "description": "d", "function": {}}, True),
    "function-string": ({"function": "f"}, False),
    "function-and-flat": ({"name": "o", "description": "o",
                           "function": {"name": "i", "description": "i"}}, True),
    # (apertus-1.5 unwraps a truthy "function" whatever the outer fields: a string
    # there fails the template; the others render the outer tool)
    "function-string-and-flat": ({"name": "o", "description": "o", "function": "x"},
                                 {"apertus-format-reference": True, "apertus-1": True,
                                  "apertus-1.5": False}),
    "param-description": (_schema_tool({"type": "string", "description": "said"}), True),
    "param-description-empty": (_schema_tool({"type": "string", "description": ""}), True),
    "param-description-number": (_schema_tool({"type": "string", "description": 3}), False),
    "param-description-zero": (_schema_tool({"type": "string", "description": 0}), True),
    "param-not-a-dict": (_schema_tool("string"), False),
    "required-subset": (_schema_tool({}, ["q"]), True),
    "required-all": (_schema_tool({}, ["p", "q"]), True),
    "required-mixed-types": (_schema_tool({}, [1, None, ["p"], "q"]), True),
    "required-null": (_schema_tool({}, None), True),
    "required-empty": (_schema_tool({}, []), True),
    "required-string": (_schema_tool({}, "px"), True),
    "required-dict": (_schema_tool({}, {"q": 1}), True),
    "required-number": (_schema_tool({}, 1), False),
    "required-zero": (_schema_tool({}, 0), True),
    "required-long": (_schema_tool({}, [f"r{i}" for i in range(40)] + ["p"]), False),
    "types": (_schema_tool({"type": ["string", "null"]}), True),
    "types-one": (_schema_tool({"type": ["integer"]}), True),
    "types-mixed": (_schema_tool({"type": ["string", 1, None, 1.5, True, ["x"], {"k": "v"}]}), True),
    "types-empty": (_schema_tool({"type": []}), True),
    "type-dict": (_schema_tool({"type": {"a": 1}}), True),
    "type-number": (_schema_tool({"type": 1}), True),
    "type-other": (_schema_tool({"type": "String"}), True),
    "type-null": (_schema_tool({"type": None}), True),
    "integer": (_schema_tool({"type": "integer"}), True),
    "boolean": (_schema_tool({"type": "boolean"}), True),
    "enum": (_schema_tool({"type": "string", "enum": ["a", "b"]}), True),
    "enum-mixed": (_schema_tool({"type": "string", "enum": ["a", 1, None, True, 2.5]}), True),
    "enum-empty": (_schema_tool({"type": "string", "enum": [], "nullable": True}), True),
    "enum-string": (_schema_tool({"type": "string", "enum": "ab"}), False),
    "enum-on-a-number": (_schema_tool({"type": "integer", "enum": [1, 2]}), True),
    "nullable": (_schema_tool({"type": "string", "nullable": True}), True),
    "nullable-one": (_schema_tool({"type": "string", "nullable": 1}), True),
    "nullable-false": (_schema_tool({"type": "string", "nullable": False}), True),
    "array": (_schema_tool({"type": "array", "items": {"type": "string"}}), True),
    "array-numbers": (_schema_tool({"type": "array", "items": {"type": "integer"}, "nullable": True}), True),
    "array-booleans": (_schema_tool({"type": "array", "items": {"type": "boolean"}}), True),
    "array-no-items": (_schema_tool({"type": "array"}), True),
    "array-items-null": (_schema_tool({"type": "array", "items": None}), True),
    "array-items-empty": (_schema_tool({"type": "array", "items": {}}), True),
    "array-items-list": (_schema_tool({"type": "array", "items": [{"type": "string"}]}), False),
    "array-items-string": (_schema_tool({"type": "array", "items": "string"}), False),
    "array-nested": (_schema_tool({"type": "array", "items": {"type": "array", "items": {"type": "number"}}}), True),
    "array-object-object": (_schema_tool({"type": "array", "items": {"type": ["object", "object"]}}), True),
    "array-of-a-long-type": (_schema_tool({"type": "array", "items": {"type": "object", "properties": {
        "a_long_property_name": {"type": "string"}, "another_long_one": {"type": "number"}}}}), True),
    "array-of-a-short-object": (_schema_tool({"type": "array", "items": {"type": "object", "properties": {
        "a": {"type": "string"}}}}), True),
    "object": (_schema_tool({"type": "object", "properties": {"a": {"type": "string"}, "b": {}},
                             "required": ["b"]}), True),
    "object-empty": (_schema_tool({"type": "object"}), True),
    "object-required-string": (_schema_tool({"type": "object", "properties": {"ab": {}}, "required": "abc"}), True),
    "object-required-number": (_schema_tool({"type": "object", "properties": {"ab": {}}, "required": 2}), False),
    "object-properties-list": (_schema_tool({"type": "object", "properties": [1]}), False),
    "one-of": (_schema_tool({"oneOf": [{"type": "string", "description": "s", "default": "x"},
                                       {"type": "number", "default": 1.5}, {"type": "object"}]}), True),
    "one-of-description-number": (_schema_tool({"oneOf": [{"type": "string", "description": 1}]}), False),
    "one-of-a-string": (_schema_tool({"oneOf": "ab"}), False),
    "one-of-a-dict": (_schema_tool({"oneOf": {"a": {}}}), False),
    "one-of-variant-not-a-dict": (_schema_tool({"oneOf": ["string"]}), False),
    "one-of-beside-a-type": (_schema_tool({"type": "string", "oneOf": [{"type": "number"}]}), True),
    "one-of-with-array-type": (_schema_tool({"type": "array", "oneOf": [{"type": "number"}]}), True),
    "default": (_schema_tool({"type": "number", "default": 30.0}), True),
    "default-null": (_schema_tool({"type": "string", "default": None}), True),
    "default-object": (_schema_tool({"type": "object", "default": {"b": [1, "<&>'"], "a": False}}), True),
    "default-nan": (_schema_tool({"type": "number", "default": float("nan")}), True),
    "default-of-an-enum": (_schema_tool({"type": "string", "enum": ["a"], "default": "a"}), True),
    "default-of-an-enum-number": (_schema_tool({"type": "string", "enum": ["a"], "default": 1}), False),
    "default-of-a-one-of": (_schema_tool({"oneOf": [{"type": "string"}], "default": "x"}), True),
    "default-of-a-one-of-number": (_schema_tool({"oneOf": [{"type": "string"}], "default": 2}), False),
    "default-beside-an-empty-one-of": (_schema_tool({"type": "string", "oneOf": [], "default": "x"}), True),
    "default-beside-an-empty-enum": (_schema_tool({"type": "string", "enum": [], "default": "x"}), True),
    "unicode": ({"name": "名前_🐍", "description": "Ünïcödé <&>", "parameters": {
        "properties": {"naïve": {"type": "string", "description": "ä🐍"}, "": {}}}}, True),
}


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("name", sorted(_WRITER_CASES))
def test_the_tool_writer_writes_what_the_general_path_renders(name, dialect):
    tool, written = _WRITER_CASES[name]
    if isinstance(written, dict):
        written = written[dialect]
    assert writer_agrees(tool, dialect) == written
    # nested one level down, where the rule is that of a nested schema
    if "parameters" in tool and isinstance(tool["parameters"], dict) and \
            isinstance(tool["parameters"].get("properties"), dict) and "p" in tool["parameters"]["properties"]:
        p = tool["parameters"]["properties"]["p"]
        for outer in ({"type": "object", "properties": {"x": p}}, {"type": "array", "items": p},
                      {"oneOf": [p, {"type": "string"}]}):
            writer_agrees(_schema_tool(outer), dialect)


class _Loud:
    """A value whose truth, text and equality are the caller's code, which the writer
    must never run: each use is recorded in ``calls`` (an exception would be caught by
    the writer and hidden)."""

    def __init__(self):
        self.calls = []

    def __bool__(self):
        self.calls.append("__bool__")
        return True

    def __str__(self):
        self.calls.append("__str__")
        return "loud"

    def __eq__(self, other):
        self.calls.append("__eq__")
        return False

    __hash__ = object.__hash__


def test_the_tool_writer_declines_what_it_reads_of_other_types():
    """What the writer reads must be of exact JSON types (anything else may run the
    caller's code): a tuple where the template reads an enum, a default the template
    prints with tojson. A tool that is not a dict is declined too."""
    loud = _Loud()
    for schema in ({"type": "string", "enum": ("a",)}, {"type": "string", "default": ("a",)},
                   {"type": "string", "default": [loud]}, {"type": "string", "description": loud},
                   {"type": ["string", loud]}, {"type": "string", "enum": [loud]},
                   {"type": "object", "properties": {"x": loud}}, {"oneOf": [{"type": "string"}, loud]}):
        tool = {"name": "f", "description": "d", "parameters": {"properties": {"p": schema}}}
        assert _render_fast.written_tool(tool, "apertus-1") is None, schema
    assert loud.calls == []
    assert _render_fast.written_tool(["not", "a", "dict"], "apertus-1") is None


class _Str(str):
    """A str subclass (as markupsafe's ``Markup``): equal to "string", but not what the
    writer can compare without the caller's code."""


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("schema", [
    {"type": _Str("string")}, {"type": _Str("array"), "items": {"type": "string"}},
    {"type": "array", "items": {"type": _Str("object")}},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": [_Str("x")]},
    {"type": "string", "enum": [_Str("a")]}, {"type": "string", "description": _Str("d")},
], ids=["type", "array-type", "items-type", "required", "enum", "description"])
def test_the_tool_writer_declines_str_subclasses_it_reads(schema, dialect):
    """A str subclass where the writer reads a value (``Markup`` from a web form, say)
    is declined, and the general path renders it as the template does: ``"string" ==
    Markup("string")``, and ``Markup`` in ``required`` counts. (Written unmeasured, the
    writer took such a ``"type"`` for "any" and such a name as not required; the Markup
    property test found it.)"""
    tool = _schema_tool(schema)
    for t in (tool, {"name": "f", "description": "d", "parameters": {"properties": {"p": schema}}}):
        assert _render_fast.written_tool(t, dialect) is None
        assert not writer_agrees(t, dialect)
        # (the conversation goes to the general path; agree compares the two)
        assert not agree(dialect, CONV, tools=[t])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_the_tool_writer_declines_a_str_subclass_in_required(dialect):
    tool = _schema_tool({"type": "string"}, required=[_Str("p")])
    assert _render_fast.written_tool(tool, dialect) is None
    assert not agree(dialect, CONV, tools=[tool])
    assert "p: string" in general(dialect, CONV, tools=[tool])   # required: no "?"


class _Int(int):
    pass


class _Float(float):
    pass


class _List(list):
    pass


class _Dict(dict):
    pass


def _subclassed(x):
    """``x`` as an equal value of a subclass of its type (None and bools stay)."""
    for base, sub in ((str, _Str), (bool, None), (int, _Int), (float, _Float), (list, _List), (dict, _Dict)):
        if type(x) is base:
            return x if sub is None else sub(x)
    return x


def _positions(x, path=()):
    """The paths to every value inside ``x`` (dict values and list items)."""
    items = x.items() if type(x) is dict else enumerate(x) if type(x) is list else ()
    for k, v in items:
        yield path + (k,)
        yield from _positions(v, path + (k,))


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=EXAMPLES, **_settings)
@given(data=st.data())
def test_the_tool_writer_on_tools_with_subclassed_values(dialect, data):
    """Generated tools with some values replaced by equal values of subclasses of their
    types (``Markup`` for a str, an int or a dict subclass): the template sees equal
    values, the writer must decline every one it reads, and write what the general
    path renders whatever it does not read. The tool is written unmeasured the first
    time its name is met, so every check of a type is the writer's own."""
    for tool in data.draw(S.tool_list_nonempty(dialect), label="tools") or ():
        if type(tool) is not dict:
            continue
        tool = copy.deepcopy(tool)
        paths = list(_positions(tool))
        if not paths:
            continue
        chosen = data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3), label="paths")
        for path in sorted(set(chosen), key=len, reverse=True):   # inner first
            parent = tool
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = _subclassed(parent[path[-1]])
        writer_agrees(tool, dialect)
        _render_fast.clear_tool_cache()
        agree(dialect, CONV, tools=[tool])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_the_tool_writer_ignores_what_the_template_does_not_read(dialect):
    """What the template never reads (an enum beside no "type", a key of no meaning) may
    be anything: the writer does not look at it, and writes what the general path
    renders. Such a tool cannot be taped: it is written every time and never cached."""
    loud = _Loud()
    tool = {"name": "f", "description": "d", "x-meta": loud,
            "parameters": {"properties": {"p": {"enum": ("a",), "x": loud}, "q": {"type": "string"}}}}
    assert writer_agrees(tool, dialect)
    assert all(agree(dialect, CONV, tools=[tool]) for _ in range(4))
    assert _render_fast.tool_cache_size() == (0, 0)
    assert loud.calls == []


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=EXAMPLES, **_settings)
@given(data=st.data())
def test_the_tool_writer_on_generated_tools(dialect, data):
    for tool in data.draw(S.tool_list_nonempty(dialect), label="tools") or ():
        writer_agrees(tool, dialect)


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=EXAMPLES, **_settings)
@given(data=st.data())
def test_the_tool_writer_on_wild_tools(dialect, data):
    tools = data.draw(S.tool_list_nonempty(dialect, wild=True), label="tools")
    if isinstance(tools, list):
        for tool in tools:
            writer_agrees(tool, dialect)


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("schema", [{"default": 10**5000}, {"type": ["a", 10**5000]},
                                    {"oneOf": [{"default": [10**5000]}]}],
                         ids=["default", "type-list", "one-of-default"])
def test_the_tool_writer_declines_what_the_template_fails_on(schema, dialect):
    """An int too long to print (Python's 4,300-digit limit): the writer declined by
    raising, against its contract (an audit's fuzzing); it now returns None and the
    general path says why."""
    tool = {"name": "f", "description": "d", "parameters": {"properties": {"p": schema}}}
    assert _render_fast.written_tool(tool, dialect) is None
    with pytest.raises(Exception, match=r"limit \(4300"):
        _general_tool(tool, dialect)
    with pytest.raises(RenderError, match=r"limit \(4300"):
        _render.render(CONV, dialect=dialect, tools=[tool])


_PLANTED = """
import sys
from apertus_fast import _render, _render_fast
from apertus_fast._dialects import DIALECTS
real = _render.tojson
spec_b = {"type": "string"}

class Evil:
    def __str__(self):              # empties the list the writer is reading
        spec_b["type"].clear()
        return "evil"

    def __bool__(self):             # drops the last reference to itself
        del spec_b["oneOf"]
        return True

def planted(x, jinja):              # a tojson that is Python code edits the tool
    if sys.argv[1] == "type":
        spec_b["type"] = [Evil(), "x", "y", "z"]
    elif sys.argv[1] == "oneOf":
        spec_b["oneOf"] = Evil()
    else:
        return 12345678901234567890  # not a str
    return real(x, jinja)

tool = {"name": "f", "description": "d", "parameters": {"properties": {
    "a": {"type": "number", "default": 1}, "b": spec_b,
    "c": {"type": "array", "items": {"oneOf": [{"type": "string", "default": 1}]}}}}}
_render_fast.configure(_render._render_tool, _render.render_date, DIALECTS,
                       _render._render_general, planted)
print(_render_fast.written_tool(tool, "apertus-1"))
"""


@pytest.mark.parametrize("planted", ["type", "oneOf", "not-a-str"])
def test_the_tool_writer_never_runs_what_a_tojson_hook_plants(planted):
    """A ``tojson`` that is Python code (``configure`` takes one) may put anything in
    the tool while it is written. The writer ran the ``__str__`` or ``__bool__`` of what
    it found, which emptied a list it was reading or freed an object it held (a
    segfault; an audit's ASan run found it), and read a non-str ``tojson`` result as a
    str. It now declines any value that is not of exact JSON types, and a ``tojson``
    result that is not a str. In a fresh interpreter: the old code crashed it on
    ``type`` and ``not-a-str``; the freed object of ``oneOf`` shows under ASan."""
    code = _PLANTED.replace("sys.argv[1]", repr(planted))
    assert run_python(code).stdout.split() == ["None"]


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_the_tool_writer_takes_tools_as_deep_as_the_tape_does(dialect):
    """A tool is taped (and cached) with containers up to 64 levels deep; deeper, it
    is written every time and not cached."""
    def tool(levels):
        default = []
        for _ in range(levels - 1):
            default = [default]
        # the tool 0, parameters 1, properties 2, the schema 3, the default's lists 4...
        return _schema_tool({"type": "array", "default": default})

    assert _render_fast.written_tool(tool(61), dialect) is not None      # innermost at 64
    assert writer_agrees(tool(61), dialect)
    # deeper, the writer still writes it (nothing it reads is too deep), every time,
    # and it is never cached
    assert writer_agrees(tool(62), dialect)
    assert all(agree(dialect, CONV, tools=[tool(62)]) for _ in range(4))
    assert _render_fast.tool_cache_size() == (0, 0)
    assert agree(dialect, CONV, tools=[tool(61)]) and agree(dialect, CONV, tools=[tool(61)])
    assert _render_fast.tool_cache_size()[0] == 1


def test_the_tool_writer_runs_with_the_collector_off():
    """No finalizer or gc callback may run while a tool is written (the collector is
    off, and back as the caller had it after): seen from a tojson hook, which the
    writer calls for a default."""
    import gc

    states = []

    def tojson(*args):
        states.append(gc.isenabled())
        return _render.tojson(*args)

    tool = _tool(name="collector")
    _render_fast.configure(_render._render_tool, _render.render_date, _render.DIALECTS,
                           _render._render_general, tojson)
    try:
        assert gc.isenabled()
        assert _render_fast.written_tool(tool, "apertus-1") is not None
        assert states and not any(states)
        assert gc.isenabled()
        gc.disable()
        try:
            assert fast("apertus-1", CONV, tools=[tool]) is not None   # a miss: written
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        _render_fast.configure(_render._render_tool, _render.render_date, _render.DIALECTS,
                               _render._render_general, _render.tojson)


def test_the_tool_writer_writes_the_sample_tools():
    """Misses run the writer: it must not decline the usual tool (those of the shipped
    samples)."""
    tools = []
    for path in sorted(SAMPLES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            if isinstance(item, dict) and item.get("tools"):
                tools.extend(item["tools"])
    assert len(tools) >= 10
    for dialect in S.DIALECTS:
        assert all(writer_agrees(t, dialect) for t in tools), dialect


def test_the_tool_caches_hold_a_bounded_number_of_bytes():
    """Both caches were bounded by count only (4096 names, x4 tools each on the hot
    path): a server rendering the big tools its clients send kept gigabytes (audit).
    Now the entries' bytes are bounded too (64 MiB), and a tool over 4 MiB is not kept."""
    budget = 64 * 1024 * 1024
    big = "x" * (512 * 1024)    # a tool's description and a parameter's: ~1 MiB of tape and text
    for i in range(200):        # ~200 MiB of tools
        tool = _tool(description=big + str(i), name=f"t{i}")
        tool["parameters"]["properties"]["a"]["description"] = big
        fast("apertus-1", CONV, tools=[tool])   # (a name met once is not cached)
        text = fast("apertus-1", CONV, tools=[tool])
        assert text is not None and text.count(big) == 2
        names, held = _render_fast.tool_cache_size()
        assert 0 < names <= 200 and held <= budget, (i, names, held)
        general("apertus-1", CONV, tools=[tool])
        assert _render._tool_cache_bytes <= budget
        assert len(_render._TOOL_CACHE) >= 1
    assert _render_fast.tool_cache_size()[0] < 200   # (it was cleared on the way)
    # a tool over 4 MiB is rendered, not kept
    _render_fast.clear_tool_cache()
    huge = _tool(description="y" * (5 * 1024 * 1024), name="huge")
    assert agree("apertus-1", CONV, tools=[huge])
    assert agree("apertus-1", CONV, tools=[huge])
    assert _render_fast.tool_cache_size() == (0, 0)
    before = dict(_render._TOOL_CACHE)
    general("apertus-1", CONV, tools=[huge])
    assert _render._TOOL_CACHE == before


def test_big_ints_a_cached_tool_keeps_count_towards_the_bound():
    """A tool's tape points to its ints beyond 64 bits, which the entry keeps alive; it
    counted 16 bytes for each, so tools with big ints in a key the template never reads
    ("x-meta") filled memory while the cache thought itself nearly empty (audit)."""
    _render_fast.clear_tool_cache()
    for i in range(2):   # (cached the second time the name is met)
        tool = _tool(name="meta")
        tool["x-meta"] = [1 << 80_000 for _ in range(10)]   # 10 ints of 10 kB
        assert fast("apertus-1", CONV, tools=[tool]) == general("apertus-1", CONV, tools=[tool])
    names, held = _render_fast.tool_cache_size()
    assert names == 1 and held >= 10 * (1 << 80_000).__sizeof__()
    _render_fast.clear_tool_cache()


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_cache_sees_a_tool_mutated_in_place(dialect):
    tool = _tool()
    assert agree(dialect, CONV, tools=[tool])
    assert agree(dialect, CONV, tools=[tool])
    assert _render_fast.tool_cache_size()[0] == 1
    tool["description"] = "Do something else."
    tool["parameters"]["properties"]["a"]["default"] = 31
    assert agree(dialect, CONV, tools=[tool])
    assert "Do something else." in fast(dialect, CONV, tools=[tool])
    del tool["parameters"]["properties"]["b"]
    assert agree(dialect, CONV, tools=[tool])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_cache_tells_equal_values_of_other_types_apart(dialect):
    variants = [1, 1.0, True, 0.0, -0.0, 0, False, None, "1", [1], {"1": 1}, float("nan")]
    texts = set()
    for _ in range(3):  # the second round fills the cache, the third is served from it
        for v in variants:
            tool = _tool(default=v)
            assert agree(dialect, CONV, tools=[tool])
            texts.add(fast(dialect, CONV, tools=[tool]))
    assert len(texts) == len(variants)


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_cache_keeps_key_order(dialect):
    for _ in range(3):
        for props in (("a", "b"), ("b", "a")):
            assert agree(dialect, CONV, tools=[_tool(props=props)])
    assert fast(dialect, CONV, tools=[_tool(props=("a", "b"))]) != \
        fast(dialect, CONV, tools=[_tool(props=("b", "a"))])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_cache_with_many_variants_of_one_name(dialect):
    tools = [_tool(description=f"Variant {i}.") for i in range(12)]
    for _ in range(3):
        for t in tools:
            assert agree(dialect, CONV, tools=[t, _tool(name="other")])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_cache_with_uncacheable_and_openai_tools(dialect):
    odd = _tool()
    odd["parameters"]["properties"]["a"]["enum"] = ("x", "y")  # a tuple: not cached
    wrapped = {"type": "function", "function": _tool(name="wrapped")}
    for _ in range(3):
        agree(dialect, CONV, tools=[odd])
        assert agree(dialect, CONV, tools=[wrapped, copy.deepcopy(wrapped)])


def test_a_tool_edited_while_its_cache_entry_is_made_is_never_written_past_its_tape():
    """The cache entry's tape was measured, then its object made (a cyclic collection
    may start there: finalizers, gc.callbacks, another thread), then written: a tool
    that grew in between was written past the buffer, and the heap was corrupted
    (``malloc(): invalid size``, abort; a thread audit found it with real threads too).
    Here a gc callback grows the tool at every collection, and collections are made
    frequent; each render must give the tool as it was or as it became, or the
    general path's text. In a fresh interpreter: the old code aborted it."""
    code = """if True:
        import gc, random
        import apertus_fast as af
        from apertus_fast import _render, _render_fast
        tool = {"name": "get_weather", "description": "short",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
        msgs = [{"role": "user", "content": "hi"}]
        rnd = random.Random(0)
        def grow(phase, info):
            if phase == "start":
                tool["description"] = "x" * rnd.randrange(1, 1 << 16)
        class A:
            pass
        keep = []
        gc.set_threshold(1)
        gc.callbacks.append(grow)
        texts = []
        for i in range(300):
            for _ in range(i % 3):   # moves the collection onto every allocation in turn
                keep.append(A())
            texts.append(af.render(msgs, dialect="apertus-1.5", tools=[tool], date="2026-01-01"))
        gc.callbacks.remove(grow)
        gc.set_threshold(700)
        for text in texts:
            assert text.count("Tool Capabilities:") == 1 and "get_weather" in text, text[:300]
        # once left alone, the tool renders as the general path renders it
        assert af.render(msgs, dialect="apertus-1.5", tools=[tool], date="2026-01-01") == \
            _render._render_general(msgs, "apertus-1.5", [tool], False, False, False,
                                    "2026-01-01", "<s>", None)
        print("ok")
    """
    assert run_python(code, timeout=300).stdout.strip() == "ok"


@contextlib.contextmanager
def _meanwhile(action):
    """Run ``action`` once, the first time a cache miss runs code: in ``tojson``, which
    the hot path's writer calls for a tool's defaults, or in ``_render_tool``, which
    renders the tools the writer declines. What another thread may do meanwhile."""
    real_tool, real_tojson = _render._render_tool, _render.tojson
    done = []

    def once():
        if not done:
            done.append(True)
            action()

    def render_tool(*args):
        once()
        return real_tool(*args)

    def tojson(*args):
        once()
        return real_tojson(*args)

    _render_fast.configure(render_tool, _render.render_date, _render.DIALECTS,
                           _render._render_general, tojson)
    try:
        yield done
    finally:
        _render_fast.configure(real_tool, _render.render_date, _render.DIALECTS,
                               _render._render_general, real_tojson)


def _declined(description, name):
    """A tool the writer leaves to ``_render_tool`` (a parameter's schema that is not
    a dict: the template renders it ``any``)."""
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": {"a": "number"}}}


@pytest.mark.parametrize("written", [True, False], ids=["written", "declined"])
def test_a_cache_cleared_while_a_tool_renders_keeps_its_counts(written):
    """A miss may run code (``tojson`` of a default, or ``_render_tool``), during which
    another thread may clear the cache or evict entries; the chain found before was
    then filed again, with entries the counts no longer included (``tool_cache_size()``
    said ``(0, 0)`` with four entries alive, and the byte count went negative under
    threads)."""
    def tool(description):
        if written:
            return _tool(description=description, name="get_weather")
        return _declined(description, "get_weather")

    assert (_render_fast.written_tool(tool("v"), "apertus-1.5") is not None) == written
    for k in range(5):     # a full bucket of one name (the first, met once, is not kept)
        fast("apertus-1.5", CONV, tools=[tool(f"v{k}")])
    assert _render_fast.tool_cache_size()[0] == 1
    with _meanwhile(_render_fast.clear_tool_cache) as cleared:
        assert agree("apertus-1.5", CONV, tools=[tool("new")])
    assert cleared
    names, held = _render_fast.tool_cache_size()
    assert names == 1 and held > 0, (names, held)
    # the one entry kept is the new tool's, and what the counts say is what is held
    fast("apertus-1.5", CONV, tools=[tool("new")])
    assert _render_fast.tool_cache_size() == (names, held)
    _render_fast.clear_tool_cache()
    fast("apertus-1.5", CONV, tools=[tool("new")])
    assert _render_fast.tool_cache_size() == (0, 0)   # a name met once is not cached
    fast("apertus-1.5", CONV, tools=[tool("new")])
    assert _render_fast.tool_cache_size() == (names, held)


def test_cache_is_bounded():
    for i in range(5000):
        fast("apertus-1", CONV, tools=[_tool(name=f"tool_{i}")])
        fast("apertus-1", CONV, tools=[_tool(name=f"tool_{i}")])
        assert _render_fast.tool_cache_size()[0] <= 4096
    assert agree("apertus-1", CONV, tools=[_tool(name="tool_1")])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_a_name_met_once_is_written_and_cached_from_its_second_time(dialect):
    """Taping, filing and checking a tool costs more than writing it: a tool that
    occurs once (a dataset whose conversations list their own APIs) is written and
    not cached; its name's second tool is cached, and a third render is a hit."""
    tool = _tool(name="once")
    assert agree(dialect, CONV, tools=[tool])
    assert _render_fast.tool_cache_size() == (0, 0)
    assert agree(dialect, CONV, tools=[tool])
    names, held = _render_fast.tool_cache_size()
    assert names == 1 and held > 0
    text = fast(dialect, CONV, tools=[tool])
    assert _render_fast.tool_cache_size() == (names, held)
    # a new tool of a name the cache holds is cached at once, beside the first
    other = _tool(name="once", description="Another.")
    assert agree(dialect, CONV, tools=[other])
    assert _render_fast.tool_cache_size()[0] == 1 and _render_fast.tool_cache_size()[1] > held
    assert fast(dialect, CONV, tools=[tool]) == text
    # each dialect's environment counts its own names
    _render_fast.clear_tool_cache()
    for d in S.DIALECTS:
        assert agree(d, CONV, tools=[tool])
    assert _render_fast.tool_cache_size() == (0, 0)


def test_the_names_met_once_are_not_kept_alive():
    """The names met once are remembered by their hashes: a big name is not kept (the
    set is bounded by count only)."""
    import sys

    name = "n" * 1_000_000 + "x"
    tool = _tool(name=name)
    before = sys.getrefcount(name)
    assert agree("apertus-1", CONV, tools=[tool])
    assert _render_fast.tool_cache_size() == (0, 0)
    assert sys.getrefcount(name) == before
    assert agree("apertus-1", CONV, tools=[tool])     # the second time: cached
    assert _render_fast.tool_cache_size()[0] == 1


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_texts_evicted_during_a_render_stay_alive(dialect):
    # seven variants of one name in one render: the bucket keeps four, so texts made
    # early in the render leave the cache before the output is assembled
    tools = [_tool(description=f"Variant {i} " + "x" * 50 * i) for i in range(7)]
    for _ in range(3):
        assert agree(dialect, CONV, tools=tools)
        assert agree(dialect, CONV, tools=tools[::-1])


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_texts_made_during_a_render_are_released(dialect):
    import tracemalloc

    # nine new texts per render: more than the render holds inline, so a list holds the rest
    tools = [_tool(name=f"t{i}", description=f"Tool {i}. " + "y" * 200) for i in range(9)]

    def renders(n):
        for _ in range(n):
            _render_fast.clear_tool_cache()  # every tool a miss: every text new
            fast(dialect, CONV, tools=tools)

    renders(20)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        renders(300)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes not released after 300 renders (2.7 MB if leaked)"


# --------------------------------------------------------------------------- entry point

def test_render_is_the_compiled_entry_with_the_same_signature():
    import inspect

    import apertus_fast

    assert apertus_fast.render is _render_fast.render is _render.render
    # (the compiled entry's annotations resolved: its module does not have their names)
    assert inspect.signature(_render_fast.render) == inspect.signature(_render._render_py, eval_str=True)
    assert _render_fast.render.__doc__ == _render._render_py.__doc__
    messages = [{"role": "user", "content": "hi"}]
    assert _render.render(messages, date="2026-01-01") == _render._render_py(messages, date="2026-01-01")
    with pytest.raises(TypeError):
        _render.render(messages, "apertus-1")  # keyword-only, as the plain-Python entry
    from apertus_fast import RenderError
    with pytest.raises(RenderError, match="message 0"):
        _render.render([{"role": "robot", "content": "x"}])  # declined, then the general path raises


def test_the_private_module_imported_first_configures_itself():
    """``_render_fast`` is configured by ``_render``'s import; imported on its own first,
    it used to decline every conversation (empty tables) and then fail with a TypeError
    for want of a general path. Fresh interpreters, since this one is configured."""
    import subprocess
    import sys

    calls = {
        "render": "_render_fast.render(m, date='2026-01-01')",
        "fast": "_render_fast.fast(m, 'apertus-1', None, False, False, False, '2026-01-01', '<s>', None)",
        "matches": "_render_fast.matches(text, m, 'apertus-1', None, False, False, False, '2026-01-01', '<s>', None)",
    }
    expected = {
        "render": _render.render([{"role": "user", "content": "hi"}], date="2026-01-01"),
        "fast": _render.render([{"role": "user", "content": "hi"}], dialect="apertus-1", date="2026-01-01"),
        "matches": True,
    }
    text = expected["fast"]
    for name, call in calls.items():
        code = ("import json; from apertus_fast import _render_fast; "
                f"m = [{{'role': 'user', 'content': 'hi'}}]; text = {text!r}; "
                f"print(json.dumps({call}))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == expected[name], name


# --------------------------------------------------------------------------- dict reading

@contextlib.contextmanager
def pydict_next():
    """Force the PyDict_Next reading, then restore the self-checked mode."""
    before = _render_fast.dict_reading()
    assert _render_fast._set_dict_reading(False) == "PyDict_Next"
    try:
        yield
    finally:
        assert _render_fast._set_dict_reading(before == "direct") == before


def test_direct_dict_reading_where_the_layout_is_known():
    import sys
    import sysconfig

    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13) \
            or sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("direct dict reading is only compiled for CPython 3.11-3.13 with the GIL")
    assert _render_fast.dict_reading() == "direct"


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=max(EXAMPLES // 4, 50), **_settings)
@given(data=st.data())
def test_generated_inputs_agree_with_pydict_next(dialect, data):
    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    with pydict_next():
        agree(dialect, **inputs)


class _Obj:
    def __init__(self, fields):
        for k, v in fields.items():
            setattr(self, k, v)


def _odd_dicts(d):
    """d as a dict with a deleted key, and as an instance dict (CPython: a split table,
    its values kept apart from its keys)."""
    holed = {"zz": 0, **d}
    del holed["zz"]
    cls = type("Obj", (_Obj,), {})   # a class per shape: it shares its instances' keys
    for _ in range(3):
        cls(d)
    return [holed, vars(cls(d))]


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("mode", ["direct", "PyDict_Next"])
def test_dicts_with_holes_and_split_tables(dialect, mode):
    with pydict_next() if mode == "PyDict_Next" else contextlib.nullcontext():
        _holes_and_split_tables(dialect)


def _holes_and_split_tables(dialect):
    user = {"role": "user", "content": "hi"}
    block = {"type": "response", "text": "ok"}
    for m in _odd_dicts(user):
        assert agree(dialect, [m])
    for b in _odd_dicts(block):
        for c in _odd_dicts({"blocks": [b]}):
            assert agree(dialect, [user, {"role": "assistant", "content": c}])
    for tool in _odd_dicts(_tool()):
        assert agree(dialect, CONV, tools=[tool])
        assert agree(dialect, CONV, tools=[tool])  # from the cache


# --------------------------------------------------------------------------- tool tapes

@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_tape_strings_differing_anywhere(dialect):
    """Every length up to past the word-compare and memcmp thresholds, every width, a
    difference at every position: never served the other string's text."""
    for ch, other in (("a", "b"), ("é", "è"), ("中", "文"), ("😀", "😁")):
        for n in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 70):
            base = ch * n
            texts = {fast(dialect, CONV, tools=[_tool(description=base)])}
            for i in sorted({0, n // 2, n - 1}):
                variant = base[:i] + other + base[i + 1:]
                assert agree(dialect, CONV, tools=[_tool(description=variant)])
                texts.add(fast(dialect, CONV, tools=[_tool(description=variant)]))
            assert fast(dialect, CONV, tools=[_tool(description=base)]) in texts
            assert len(texts) == len({0, n // 2, n - 1}) + 1


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_tape_ints_of_every_size(dialect):
    values = [0, 1, -1, 2**31, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**70, -2**70, 10**30]
    texts = []
    for _ in range(2):  # the second round is served from the cache
        for v in values:
            assert agree(dialect, CONV, tools=[_tool(default=v)])
            texts.append(fast(dialect, CONV, tools=[_tool(default=v)]))
    assert texts[:len(values)] == texts[len(values):]
    assert len(set(texts)) == len(values)


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_tape_nested_values(dialect):
    nested = [{"k": [1, "x", None, {"z": [True, 2.5]}]}, [], {}, "", [[[]]]]
    deep = deeper = []
    for _ in range(80):  # deeper than a tape goes: left to the general path
        deeper.append([])
        deeper = deeper[0]
    for v in [nested, nested[:-1], nested[:1], [{"k": [1, "x", None, {"z": [True, 2.25]}]}]]:
        for _ in range(2):
            assert agree(dialect, CONV, tools=[_tool(default=v)])
    assert fast(dialect, CONV, tools=[_tool(default=deep)]) is None
    assert not agree(dialect, CONV, tools=[_tool(default=deep)])


# ------------------------------------------------------------- the caller's code mid-render

# The hot path records borrowed pointers to the messages' strings. Code of the caller's
# objects that ran after the first of them was recorded (a flag's __bool__, a tool
# object's attributes) could drop the last reference to one: the output was then copied
# from freed memory (heap corruption, a crash). Such inputs go to the general path.

def _conversation():
    return [{"role": "system", "content": "".join(f"secret-{i}-" for i in range(2000))},
            {"role": "user", "content": "hi"}]


class _Meddler:
    """Frees the first message's content and reuses its memory when it runs."""

    def __init__(self, messages):
        self.messages = messages

    def meddle(self):
        self.messages[0]["content"] = "replaced"
        return ["X" * 20000 for _ in range(50)]

    def __bool__(self):
        self.meddle()
        return True


class _ToolObject(_Meddler):
    name = "f"
    parameters = None

    @property
    def description(self):
        self.meddle()
        return "d"


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("what", ["enable_thinking", "add_generation_prompt",
                                  "continue_assistant_message", "tool object", "tools tuple"])
def test_the_callers_code_runs_on_the_general_path(dialect, what):
    from apertus_fast import render

    def arguments(messages):
        if what == "tool object":
            return {"tools": [_ToolObject(messages)]}
        if what == "tools tuple":
            return {"tools": (_tool(),), "add_generation_prompt": _Meddler(messages)}
        return {what: _Meddler(messages)}

    messages = _conversation()
    assert fast(dialect, messages, **arguments(messages)) is None
    assert messages == _conversation()   # declined before running any of that code
    messages = _conversation()
    got = render(messages, dialect=dialect, date="2026-01-01", **arguments(messages))
    messages = _conversation()
    assert got == general(dialect, messages, **arguments(messages))


class _Finalizer:
    """Garbage whose __del__ (run by a cyclic collection) frees a recorded string."""

    def __init__(self, messages):
        self.messages = messages
        self.me = self   # a cycle: only the collector frees it

    def __del__(self):
        self.messages[0]["content"] = "replaced"


@pytest.mark.parametrize("entry", ["fast", "matches", "fast_with_marks"])
def test_a_collection_during_a_render_runs_no_finalizer_before_the_copy(entry):
    # argument texts made during the render (more than hold() keeps inline): it
    # allocates a list, which could start a collection, whose finalizer freed the
    # first message's content before assemble copied it (found by AddressSanitizer)
    import gc

    def conversation():
        return [{"role": "user", "content": "u" * 5000 + str(id(object()))},
                {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": [
                    {"name": "f", "arguments": {"a": list(range(1000, 1006))}}]}]}}]

    messages = conversation()
    expected = general("apertus-1.5", messages)
    args = _args("apertus-1.5", messages)   # (made first: the render's allocations start it)
    function = getattr(_render_fast, entry)
    if entry == "matches":
        args = (expected, *args)
    threshold = gc.get_threshold()
    gc.collect()
    try:
        gc.disable()
        _Finalizer(messages)
        gc.set_threshold(1)
        gc.enable()
        got = function(*args)
    finally:
        gc.set_threshold(*threshold)
        gc.enable()
    gc.collect()
    assert messages[0]["content"] == "replaced"   # the finalizer ran, after the render
    if entry == "fast_with_marks":
        got = got[0]
    assert got == (True if entry == "matches" else expected)


_TWO_THREADS = """
import gc, threading
from apertus_fast import render, render_with_spans
entry = {entry}
render([{{"role": "user", "content": "w"}}], dialect="apertus-1.5", date="2026-01-02")
a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()
drained = []
collector_on = []

class Finalizer:
    def __init__(self, msgs):
        self.msgs = msgs; self.me = self
    def __del__(self):
        self.msgs[0]["content"] = "replaced"

class DateA(str):   # thread A waits inside its render (render_date hashes the date)
    def __hash__(self):
        collector_on.append(gc.isenabled())   # Python code runs with it as it was
        a_in.set(); b_in.wait(); return str.__hash__(self)

class DateB(str):   # thread B waits until A's render is over, then leaves garbage
    def __hash__(self):
        b_in.set(); a_done.wait()
        drained.extend([] for _ in range(100))   # the render's next list: a new object
        Finalizer(msgs_b); gc.set_threshold(1)
        return str.__hash__(self)

# (4 MB: glibc maps it, and unmaps it when freed, so reading it then is a SIGSEGV)
msgs_b = [{{"role": "user", "content": "u" * (4 << 20) + str(id(object()))}},
          {{"role": "assistant", "content": {{"blocks": [{{"type": "tool_calls", "calls": [
              {{"name": "f", "arguments": {{"a": list(range(1000, 1006))}}}}]}}]}}}}]
out = {{}}
ta = threading.Thread(target=lambda: entry([{{"role": "user", "content": "a"}}],
                                           dialect="apertus-1.5", date=DateA("2026-01-02")))
tb = threading.Thread(target=lambda: out.setdefault("b", entry(
    msgs_b, dialect="apertus-1.5", date=DateB("2026-01-02"))))
ta.start(); a_in.wait(); tb.start(); b_in.wait()
ta.join(); a_done.set(); tb.join()
text = out["b"] if entry is render else out["b"].text
assert collector_on == [True], collector_on
assert text.count("u") >= 4 << 20 and msgs_b[0]["content"] == "replaced", text[:200]
print("ok")
"""


@pytest.mark.parametrize("entry", ["render", "render_with_spans"])
def test_a_render_in_another_thread_does_not_turn_the_collector_on_under_this_one(entry):
    """The collector's switch is the process's. A render turned it off before code that
    may be Python's (the date, the tools: here a date's __hash__), during which another
    thread started a render, found it off, and so did not turn it back on; the first
    turned it on while the second recorded pieces, and a finalizer freed one (SIGSEGV
    in assemble). It now goes off after that code, so no thread runs in between."""
    # (exec: run as -c, this text did not crash the old build; run from a file, it did)
    code = _TWO_THREADS.format(entry=entry)
    assert run_python(f"exec({code!r})").stdout.split() == ["ok"]


_CUSTOM_DIALECT = """
import dataclasses
from apertus_fast._dialects import DIALECTS

def conversation():
    return [{"role": "user", "content": [{"type": "text", "text": "x" * (1 << 20)},
                                         {"type": "pic"}]}]

class Part:
    def __eq__(self, other):
        msgs.clear(); return True
    __hash__ = object.__hash__

base = DIALECTS["apertus-1.5"]
DIALECTS["mine"] = dataclasses.replace(base, name="mine", image_parts=(Part(),))
DIALECTS["none-token"] = dataclasses.replace(base, name="none-token", tool_output_open=None)
from apertus_fast import render
from apertus_fast._render import _render_general
msgs = conversation()
got = render(msgs, dialect="mine", date="2026-01-01")
msgs = conversation()
print(got == _render_general(msgs, "mine", None, False, False, False, "2026-01-01", "<s>", None))
try:
    render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
            {"role": "tool", "content": "t"}], dialect="none-token")
except TypeError as exc:
    print("TypeError")
"""


def test_a_dialect_added_with_other_than_strings_renders_on_the_general_path():
    """The walk compares a user part's type with the dialect's part types, and records
    its tokens, without running code: a part type with its own __eq__ (run after pieces
    were recorded: it cleared the messages, SIGSEGV) or None as a token (read as a
    string: a wrong text) in a dialect added to DIALECTS leaves it to the general path,
    which renders (or fails) as the pure build does."""
    assert run_python(_CUSTOM_DIALECT).stdout.split() == ["True", "TypeError"]


_EDITED_WHILE_RENDERED = """
import importlib.util, pathlib, sys
sys.modules["apertus_fast._render_fast"] = None   # the general path, from its source
import apertus_fast
path = pathlib.Path(apertus_fast.__file__).with_name("_render.py")
spec = importlib.util.spec_from_file_location("apertus_fast._render", path)
r = importlib.util.module_from_spec(spec)
sys.modules["apertus_fast._render"] = r
spec.loader.exec_module(r)
render_tool = r._render_tool

def edited(tool, *args):   # another thread edits the tool while this one renders it
    tool["description"] = "v2"
    return render_tool(tool, *args)

r._render_tool = edited
r.render_tools([{"name": "f", "description": "v1"}], "apertus-1.5")
r._render_tool = render_tool
print(r.render_tools([{"name": "f", "description": "v1"}], "apertus-1.5").splitlines()[0])
"""


def test_a_tool_edited_while_it_renders_is_not_cached_under_its_old_key():
    """The tool cache's key is taken before the tool renders: a tool another thread
    edited in between filed the new version's text under the old version's key, served
    for that version from then on (the general path; the hot path: below)."""
    assert run_python(_EDITED_WHILE_RENDERED).stdout.split() == ["//", "v1"]


_EDITED_ON_THE_HOT_PATH = """
import sys
from apertus_fast import _render, _render_fast, render
from apertus_fast._dialects import DIALECTS
render_tool, tojson = _render._render_tool, _render.tojson
user = [{"role": "user", "content": "q"}]
if sys.argv[1] == "written":   # the writer calls tojson for the default
    tool = {"name": "edited_tool", "description": "OLD", "parameters": {
        "type": "object", "properties": {"a": {"type": "number", "default": 1}}}}
else:                          # the writer declines: _render_tool renders it
    tool = {"name": "edited_tool", "description": "OLD", "parameters": {
        "type": "object", "properties": {"a": "number"}}}

def edited_tool(t, *args):   # another thread edits the tool once this one has rendered it
    text = render_tool(t, *args)
    t["description"] = "NEW"
    return text

def edited_json(x, *args):   # ... or while the writer writes it
    tool["description"] = "NEW"
    return tojson(x, *args)

render(user, dialect="apertus-1.5", tools=[tool])   # met once: the next render caches
_render_fast.configure(edited_tool, _render.render_date, DIALECTS, _render._render_general, edited_json)
old = render(user, dialect="apertus-1.5", tools=[tool])
_render_fast.configure(render_tool, _render.render_date, DIALECTS, _render._render_general, tojson)
assert tool["description"] == "NEW" and "// OLD" in old
text = render(user, dialect="apertus-1.5", tools=[tool])
print(text.split("Tool Capabilities:")[1].split()[:2])
"""


@pytest.mark.parametrize("how", ["written", "declined"])
def test_a_tool_edited_while_it_renders_is_not_cached_on_the_hot_path_either(how):
    """The hot path's tool cache, too, files a text under the tape of the tool taken
    before it rendered, and only if the tool still matches it after."""
    code = _EDITED_ON_THE_HOT_PATH.replace("sys.argv[1]", repr(how))
    assert run_python(code).stdout.split() == ["['//',", "'NEW']"]


def test_the_collector_is_left_as_the_caller_had_it():
    import gc

    assert gc.isenabled()
    fast("apertus-1", CONV)
    assert gc.isenabled()
    gc.disable()
    try:
        fast("apertus-1", CONV)
        assert not gc.isenabled()
    finally:
        gc.enable()


class _CollidingKey:
    """A dict key that is not a str, hashed like a field's name: looking that field up
    runs its __eq__, which frees the first message's content."""

    def __init__(self, name, messages):
        self.name = name
        self.messages = messages
        self.armed = False

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        if self.armed:
            self.messages[0]["content"] = "replaced"
        return False


@pytest.mark.parametrize("where", ["call", "blocks", "parts", "part", "output", "first",
                                   "tool"])
def test_a_key_whose_eq_runs_code_leaves_the_dict_to_the_general_path(where):
    # the hot path looks fields up in the caller's dicts; with a key that is not an
    # exact str, the lookup could run that key's __eq__ after pieces were recorded:
    # heap-use-after-free (found by AddressSanitizer). Such dicts are declined.
    from apertus_fast import render

    def conversation():
        # (a string made at run time, a new object each call, equal in each: not one
        # spelling an object's id, which another allocator does not reuse)
        messages = [{"role": "user", "content": "u" * 5000 + "!"}]
        key = _CollidingKey({"call": "arguments", "blocks": "blocks", "parts": "parts",
                             "part": "type", "output": "output", "first": "role",
                             "tool": "name"}[where], messages)

        def keyed(**fields):
            d = {key: 0}
            d.update(fields)
            return d

        tools = None
        if where == "call":
            messages.append({"role": "assistant", "content": {"blocks": [{"type": "tool_calls",
                "calls": [keyed(name="f", arguments="{}")]}]}})
        elif where == "blocks":
            messages.append({"role": "assistant", "content": keyed(blocks=[
                {"type": "response", "text": "r"}])})
        elif where == "parts":
            messages.append({"role": "user", "content": keyed(parts=[{"type": "text", "text": "p"}])})
        elif where == "part":
            messages.append({"role": "user", "content": {"parts": [keyed(type="text", text="p")]}})
        elif where == "output":
            messages.append({"role": "assistant", "content": {"blocks": [
                {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]},
                {"type": "tool_outputs", "outputs": [keyed(output="o")]}]}})
        elif where == "first":
            messages.insert(0, keyed(role="system", content="s" * 3000))
            key.messages = messages[1:]
        else:
            tools = [keyed(name="f", description="d")]
        return messages, tools, key

    messages, tools, key = conversation()
    key.armed = True
    assert fast("apertus-1.5", messages, tools=tools) is None
    assert _render_fast.matches("", *_args("apertus-1.5", messages, tools=tools)) is None
    assert _render_fast.fast_with_marks(*_args("apertus-1.5", messages, tools=tools)) is None
    messages, tools, key = conversation()
    key.armed = True
    got = render(messages, dialect="apertus-1.5", tools=tools, date="2026-01-01")
    messages, tools, key = conversation()
    key.armed = True
    assert got == general("apertus-1.5", messages, tools=tools)


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_plain_flags_and_tools_take_the_hot_path(dialect):
    for flag in (True, False, None, 0, 1):
        assert agree(dialect, CONV, enable_thinking=flag, add_generation_prompt=flag,
                     continue_assistant_message=flag, tools=[_tool()])
    assert agree(dialect, CONV, tools=[])


# --------------------------------------------------------------------------- matches

def matches(dialect, text, messages, **kw):
    return _render_fast.matches(text, *_args(dialect, messages, **kw))


def _other_char(c):
    """A character of the same width as ``c`` (so the text keeps its kind) but not ``c``."""
    o = ord(c)
    if o < 0x80:
        return "b" if c == "a" else "a"
    if o < 0x100:
        return "é" if c != "é" else "è"
    if o < 0x10000:
        return "中" if c != "中" else "文"
    return "😀" if c != "😀" else "😁"


def check_matches(dialect, messages, positions=None, **kw):
    """``matches`` agrees with ``fast(...) == text`` on the rendered text, on that text
    with one character changed (each of ``positions``), and cut or extended."""
    text = fast(dialect, messages, **kw)
    if text is None:
        assert matches(dialect, "", messages, **kw) is None
        return False
    assert matches(dialect, text, messages, **kw) is True
    assert matches(dialect, text[:-1], messages, **kw) is False
    assert matches(dialect, text + "x", messages, **kw) is False
    n = len(text)
    for i in (range(n) if positions is None else positions(n)):
        changed = text[:i] + _other_char(text[i]) + text[i + 1:]
        assert matches(dialect, changed, messages, **kw) is False, (i, changed[max(0, i - 20):i + 20])
    return True


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=max(EXAMPLES // 5, 50), **_settings)
@given(data=st.data())
def test_matches_generated_inputs(dialect, data):
    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    at = data.draw(st.lists(st.floats(0, 1, exclude_max=True), max_size=5), label="at")
    check_matches(dialect, positions=lambda n: sorted({int(f * n) for f in at} | {0, n - 1}),
                  **inputs)


@pytest.mark.parametrize("dialect", S.DIALECTS)
@pytest.mark.parametrize("user", WIDTHS)
@pytest.mark.parametrize("assistant", WIDTHS)
def test_matches_every_width_and_position(dialect, user, assistant):
    """Each character of the text changed in turn, where pieces narrower than the text
    are compared widened (blocks of 256 characters: a long piece crosses them)."""
    long = (user or "-") * (600 // max(len(user), 1))
    messages = [{"role": "user", "content": long},
                {"role": "assistant", "content": assistant},
                {"role": "user", "content": user}]
    near = lambda n: [i for i in range(n) if i < 80 or n - i < 80 or i % 37 == 0  # noqa: E731
                      or (i - 90) % 256 in (0, 1, 254, 255)]
    assert check_matches(dialect, messages, positions=near)
    assert check_matches(dialect, messages[1:], bos_token=assistant)


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_matches_declines_what_the_hot_path_declines(dialect):
    text = fast(dialect, CONV)
    assert matches(dialect, type("S", (str,), {})(text), CONV) is None  # not an exact str
    assert matches(dialect, text, [{"role": "robot", "content": "x"}]) is None
    assert matches(dialect, text, ({"role": "user", "content": "hi"},)) is None
    # a text of another width than the render can never match, whatever its length
    wide = text[:-1] + "😀"
    assert len(wide) == len(text) and matches(dialect, wide, CONV) is False


# --------------------------------------------------------------------------- spans

def spans_agree(dialect, messages, **kw):
    """``render_with_spans`` through the hot path (``_FAST_MARKS``) gives exactly what the
    general path gives (text and spans), or the same error; returns whether the hot path
    answered."""
    from apertus_fast import RenderError, render_with_spans

    args = _args(dialect, messages, **kw)
    answered = _render._FAST_MARKS(*args) is not None
    flags = dict(_DEFAULTS, **kw)

    def outcome():
        try:
            return render_with_spans(messages, dialect=dialect, **flags)
        except RenderError as exc:
            return ("error", str(exc), exc.message_index)

    got = outcome()
    saved = _render._FAST_MARKS
    _render._FAST_MARKS = None
    try:
        want = outcome()
    finally:
        _render._FAST_MARKS = saved
    assert got == want
    if answered:
        assert isinstance(got, tuple) and got[0] != "error"
        assert got.text == fast(dialect, messages, **kw)
    return answered


@pytest.mark.parametrize("dialect", S.DIALECTS)
def test_spans_of_the_shipped_samples_take_the_hot_path(dialect):
    answered = 0
    for line in _sample_lines():
        messages = line["messages"] if isinstance(line, dict) else line
        tools = line.get("tools") if isinstance(line, dict) else None
        answered += spans_agree(dialect, messages, tools=tools, add_generation_prompt=True)
        answered += spans_agree(dialect, messages, tools=tools, continue_assistant_message=True)
    assert answered >= len(_sample_lines())
