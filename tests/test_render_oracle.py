"""Differential property tests: ``render`` against the official templates (the oracle).

For every dialect and every generated input, ``render(...)`` returns exactly the bytes
the template renders, or both fail: the template raises and ours raises
``RenderError`` (never another exception type) naming the offending message
(``message_index``; ``None`` when the tool specs are at fault). ``render`` must not
modify its input.

Examples per test: ``APERTUS_ORACLE_EXAMPLES`` (default 500; CI runs 10000 per dialect
for the realistic strategy, and half as many wild examples).
"""

from __future__ import annotations

import datetime as _dt
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import strategies as S
from tests.make_golden import oracle_expect
from tests.oracle import ORACLE_MISSING, oracle_render
from tests.test_render_errors import _Ambiguous

if ORACLE_MISSING:
    pytest.skip(ORACLE_MISSING, allow_module_level=True)

from apertus_fast import RenderError, render  # noqa: E402

pytestmark = pytest.mark.oracle

EXAMPLES = int(os.environ.get("APERTUS_ORACLE_EXAMPLES", "500"))
DIALECTS = S.DIALECTS

_settings = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                        HealthCheck.data_too_large])


def check(dialect, messages, tools=None, **flags):
    """Assert that ``render`` agrees with the template on this input."""
    before = repr((messages, tools))
    exp = oracle_expect(messages, dialect=dialect, tools=tools, **flags)
    try:
        got = render(messages, dialect=dialect, tools=tools, **flags)
    except RenderError as exc:
        assert repr((messages, tools)) == before, "render modified its input"
        assert exp.error is not None, (
            f"ours raised RenderError({exc}) but the template renders:\n{exp.text!r}")
        assert exc.message_index == exp.message_index, (
            f"ours blames message {exc.message_index} ({exc}); the template fails at "
            f"message {exp.message_index} ({exp.error})")
        if exp.message_index is not None:
            assert f"message {exp.message_index}" in str(exc), str(exc)
        return
    assert repr((messages, tools)) == before, "render modified its input"
    assert exp.error is None, f"the template fails ({exp.error}) but ours renders:\n{got!r}"
    assert type(got) is str
    assert got == exp.text


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=EXAMPLES, **_settings)
@given(data=st.data())
def test_realistic_conversations(dialect, data):
    """Realistic conversations (mostly accepted), with tools and every flag drawn."""
    check(dialect, **data.draw(S.render_inputs(dialect), label="inputs"))


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(1, EXAMPLES // 2), **_settings)
@given(data=st.data())
def test_wild_conversations(dialect, data):
    """Any field replaced by any JSON value or dropped: error parity."""
    check(dialect, **data.draw(S.wild_render_inputs(dialect), label="inputs"))


class Marked(str):
    """A string whose ``str()`` is not its characters (as a ``(str, Enum)`` member's is
    not): the template prints ``str(x)`` for ``{{ x }}`` but uses the characters when it
    concatenates, compares or serialises ``x``."""

    def __str__(self):
        return "\u00ab" + str.__str__(self) + "\u00bb"


def _marked(x, cls=Marked, draw=None):
    """``x`` with every string value (dict keys excepted) a ``cls`` (each one, or those
    ``draw`` picks)."""
    if type(x) is str:
        return cls(x) if draw is None or draw(st.booleans()) else x
    if type(x) is dict:
        return {k: _marked(v, cls, draw) for k, v in x.items()}
    if type(x) is list:
        return [_marked(v, cls, draw) for v in x]
    return x


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(1, EXAMPLES // 5), **_settings)
@given(data=st.data())
def test_string_subclasses_print_as_the_template_prints_them(dialect, data):
    """Where the template prints a value it calls ``str()``; elsewhere it uses the
    characters. Every string of a realistic input replaced by a subclass with its own
    ``__str__`` shows which is which (the compiled path leaves such inputs to the
    general one)."""
    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    inputs["messages"] = _marked(inputs["messages"])
    if inputs.get("tools") is not None:
        inputs["tools"] = _marked(inputs["tools"])
    check(dialect, **inputs)


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(1, EXAMPLES // 5), **_settings)
@given(data=st.data())
def test_strings_with_their_own_plus_concatenate_as_the_template_does(dialect, data):
    """The template's ``+`` is Python's: markupsafe's ``Markup`` (a ``str`` subclass)
    HTML-escapes the other side, so ``'{"' + name`` and ``<|system_start|>`` + a system
    ``{"text": ...}`` come out escaped. Some strings of a realistic input (drawn one by
    one) are ``Markup``."""
    from markupsafe import Markup

    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    inputs["messages"] = _marked(inputs["messages"], Markup, data.draw)
    if inputs.get("tools") is not None:
        inputs["tools"] = _marked(inputs["tools"], Markup, data.draw)
    check(dialect, **inputs)


# ---------------------------------------------------------------------------------------
# the flags, explicitly: every combination on a few fixed conversations

_FIXED = {
    "empty": [],
    "user": [{"role": "user", "content": "Hi"}],
    "assistant-last": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    "blocks-last": [
        {"role": "system", "content": {"text": "S"}},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "t"}, {"type": "response", "text": "r"}]}}],
    "awaiting-tool": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]}]}}],
    "tool-last": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "x",
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "out"}],
}
_TOOLS = [{"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"a": {"type": "string", "default": "<x>"}}}}]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("conversation", sorted(_FIXED))
@pytest.mark.parametrize("enable_thinking", [False, True])
@pytest.mark.parametrize("add_generation_prompt", [False, True])
@pytest.mark.parametrize("continue_assistant_message", [False, True])
@pytest.mark.parametrize("bos_token", ["<s>", ""])
@pytest.mark.parametrize("date", ["1999-12-31", _dt.datetime(2030, 2, 28, 23, 59)])
def test_flags(dialect, conversation, enable_thinking, add_generation_prompt,
               continue_assistant_message, bos_token, date):
    tools = _TOOLS if conversation in ("user", "awaiting-tool") else None
    check(dialect, _FIXED[conversation], tools=tools, enable_thinking=enable_thinking,
          add_generation_prompt=add_generation_prompt,
          continue_assistant_message=continue_assistant_message, bos_token=bos_token, date=date)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_date_defaults_to_today(dialect):
    messages = [{"role": "user", "content": "What day is it?"}]
    before = _dt.date.today()
    got = render(messages, dialect=dialect)
    after = _dt.date.today()
    assert got in {oracle_render(messages, dialect=dialect, date=d) for d in (before, after)}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_defaults_match_template_defaults(dialect):
    """``render``'s keyword defaults are the template callers' defaults."""
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert render(messages, dialect=dialect, date="2026-01-01") == oracle_render(
        messages, dialect=dialect, date="2026-01-01")


# str subclasses as operands of the template's "+": their own "+" and __str__ count
# (markupsafe's Markup escapes the other side with str(); a type may bring __radd__)

class _Shown(str):
    def __str__(self):
        return "M<" + str.__str__(self) + ">"


class _Loud(str):
    def __add__(self, other):
        return _Loud(str.__str__(self) + str(other).upper())

    def __radd__(self, other):
        return _Loud(str(other).upper() + str.__str__(self))


def _subclass_cases():
    from markupsafe import Markup

    user = {"role": "user", "content": "q"}
    calls = [{"type": "function", "function": {"name": Markup("f"), "arguments": _Shown("{}")}}]
    yield "markup name", [user, {"role": "assistant", "content": "", "tool_calls": calls}], None
    blocks = {"blocks": [{"type": "tool_calls", "calls": [
        {"name": _Loud("f"), "arguments": Markup("<{}>")}]}]}
    yield "loud block call", [user, {"role": "assistant", "content": blocks}], None
    yield "loud tool name", [user], [{"name": _Loud("f"), "description": _Shown("d")}]
    yield "loud system text", [{"role": "system", "content": {"text": _Loud("s")}}, user], None
    yield "shown system", [{"role": "system", "content": _Shown("s")}, user], None
    enum = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"],
                                                   "default": _Loud("x")}}}
    yield "loud enum default", [user], [{"name": "f", "description": "d", "parameters": enum}]
    # not str at all, but with a + of its own: collections.UserString
    from collections import UserString as U

    yield "userstring tool", [user], [{"name": U("f"), "description": U("d"), "parameters": {
        "type": "object", "properties": {
            "a": {"type": "string", "description": U("pd")},
            "b": {"type": "string", "enum": ["x"], "default": U("x")},
            "c": {"oneOf": [{"type": "string", "description": U("vd")}], "default": U("y")}}}}]
    blocks = {"blocks": [{"type": "tool_calls", "calls": [{"name": U("f"), "arguments": U("{}")}]}]}
    yield "userstring block call", [user, {"role": "assistant", "content": blocks}], None
    calls = [{"type": "function", "function": {"name": U("f"), "arguments": U("{}")}}]
    yield "userstring legacy call", [user, {"role": "assistant", "content": "", "tool_calls": calls}], None
    yield "userstring system text", [{"role": "system", "content": {"text": U("s")}}, user], None
    bad_block = {"blocks": [{"type": U("nonsense"), "text": "t"}]}
    yield "userstring block type", [user, {"role": "assistant", "content": bad_block}], None
    yield "userstring part type", [{"role": "user", "content": {"parts": [{"type": U("video")}]}}], None
    calls = [{"type": U("other"), "function": {"name": "f", "arguments": "{}"}}]
    yield "userstring call type", [user, {"role": "assistant", "content": "", "tool_calls": calls}], None


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", list(_subclass_cases()), ids=lambda c: c[0])
def test_string_subclasses_keep_their_own_plus(dialect, case):
    _, messages, tools = case
    check(dialect, messages, tools=tools, date="2026-01-01")


class _Broken:
    """A value whose ``str()`` and truth fail with an error of the caller's own."""

    def __str__(self):
        raise RuntimeError("boom")

    def __bool__(self):
        raise RuntimeError("boom")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_tools_function_is_read_where_the_template_reads_it(dialect):
    """A tool's ``function`` counts only where the tool has neither ``description``
    nor ``name`` (apertus-1.5: always): a ``function`` whose truth fails fails (or
    does not) as the template does. (``continue_assistant_message``: in
    test_render_errors.py.)"""
    user = {"role": "user", "content": "q"}
    for tool in ({"name": "f", "description": "d", "function": _Ambiguous()},
                 {"description": "d", "function": _Ambiguous()}):
        check(dialect, [user], tools=[tool], date="2026-01-01")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_error_of_the_callers_own_code_is_a_render_error(dialect):
    """Where the caller's own ``__str__`` or ``__bool__`` raises (here RuntimeError),
    the template fails with it; ``render`` raises RenderError naming the message and
    the error, as it does for the flags and ``bos_token``."""
    user = {"role": "user", "content": "q"}
    answer = {"role": "assistant", "content": "a"}
    for messages, tools in (
            ([user, answer, {"role": "tool", "content": _Broken()}], None),
            ([user, {"role": "assistant", "content": {"blocks": [
                {"type": "thoughts", "text": _Broken()}]}}], None),
            ([user, {"role": "assistant", "content": "a", "tool_calls": _Broken()}], None),
            ([user], [{"name": "f", "description": "d", "parameters": {
                "properties": {"a": {"description": _Broken()}}}}])):
        check(dialect, messages, tools=tools, date="2026-01-01")
        with pytest.raises(RenderError, match="RuntimeError: boom"):
            render(messages, dialect=dialect, tools=tools)


class _Properties:
    """``properties`` that is no Mapping but has ``items()``: the template calls it."""

    def __init__(self, d):
        self.d = d

    def items(self):
        return self.d.items()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_properties_with_an_items_method_render_as_the_template_renders_them(dialect):
    nested = {"type": "object", "properties": _Properties({"x": {"type": "number"}})}
    tools = [{"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": _Properties({"a": {"type": "string"}, "n": nested})}}]
    check(dialect, [{"role": "user", "content": "q"}], tools=tools, date="2026-01-01")
    # without a callable items, both fail
    check(dialect, [{"role": "user", "content": "q"}], date="2026-01-01", tools=[
        {"name": "f", "description": "d", "parameters": {"properties": object()}}])


class _Record:
    """Attributes, and item access that is getattr: an AttributeError from
    ``__getitem__`` for a missing field."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __getitem__(self, key):
        return getattr(self, key)

    def __contains__(self, key):
        return key in self.__dict__


def _record_cases():
    user = {"role": "user", "content": "q"}
    yield "block without text", [user, {"role": "assistant", "content": {
        "blocks": [_Record(type="thoughts")]}}], None
    yield "block with text", [user, {"role": "assistant", "content": {
        "blocks": [_Record(type="response", text="ok")]}}], None
    yield "message record", [user, _Record(role="assistant", content="ok")], None
    yield "tool without parameters", [user], [_Record(name="f", description="d")]
    yield "call record", [user, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [_Record(name="f", arguments="{}")]}]}}], None


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", list(_record_cases()), ids=lambda c: c[0])
def test_attribute_errors_from_getitem_as_each_environment_has_them(dialect, case):
    # jinja2's sandbox (the Hugging Face dialects) lets an AttributeError raised by
    # obj[name] through, where the plain environment (reference) reads it as undefined
    _, messages, tools = case
    check(dialect, messages, tools=tools, date="2026-01-01")


_U = {"role": "user", "content": "Hi"}
_CALL = {"type": "function", "function": {"name": "f", "arguments": "{}"}}

#: Template branches that a coverage audit found reached only by the property tests,
#: some of them not reliably at the default example count (500; CI runs 10,000):
#: here they are reached on every run, whatever the seed.
_BRANCHES = {
    "a parameter type that is a mapping": ([_U], [{"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"p": {"type": {"a": 1}}}}}]),
    "a parameter type that is not iterable": ([_U], [{"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"p": {"type": 5}}}}]),
    "an audio_url part": ([{"role": "user", "content": {"parts": [{"type": "audio_url", "audio_url": {}}]}}], None),
    "an audio_url item of list content": ([{"role": "user", "content": [{"type": "audio_url", "audio_url": {}}]}], None),
    "list content of images and audio": ([{"role": "user", "content": [
        {"type": "image"}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "input_image"},
        {"type": "input_audio", "input_audio": {}}, {"type": "text", "text": "t"}]}], None),
    "a user message after tool outputs": ([_U, {"role": "assistant", "content": "x", "tool_calls": [_CALL]},
                                           {"role": "tool", "content": "o"}, _U], None),
    "thoughts and calls after tool outputs": ([_U, {"role": "assistant", "content": {"blocks": [
                                                   {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]}]}},
                                               {"role": "tool", "content": "o"},
                                               {"role": "assistant", "content": {"blocks": [
                                                   {"type": "thoughts", "text": "t"},
                                                   {"type": "tool_calls", "calls": [{"name": "g", "arguments": "{}"}]}]}}],
                                              None),
    "display_answers first in the next assistant message": (
        [_U, {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "t"}]}},
         {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": [
             {"name": "display_answers", "arguments": "{}"}]}]}}], None),
    "empty parts, blocks, calls and outputs": (
        [{"role": "user", "content": {"parts": []}},
         {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": []},
                                                      {"type": "tool_outputs", "outputs": []},
                                                      {"type": "response", "text": "r"}]}},
         {"role": "assistant", "content": {"blocks": []}}], None),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(_BRANCHES))
@pytest.mark.parametrize("enable_thinking", [False, True])
def test_branches_the_examples_missed(dialect, case, enable_thinking):
    messages, tools = _BRANCHES[case]
    check(dialect, messages, tools, enable_thinking=enable_thinking, date="2026-01-01")
    check(dialect, messages, tools, enable_thinking=enable_thinking, date="2026-01-01",
          add_generation_prompt=True)
