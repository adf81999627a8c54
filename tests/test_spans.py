"""Loss-mask spans: ``render_with_spans`` and ``Rendered.token_mask``.

* the text and the errors are exactly ``render``'s, for realistic and wild inputs;
* painting law: with every string the model writes made of one marker character and
  every string the environment writes (system, user, tool outputs) of another, every
  model character is inside a span and every environment character outside; so is
  every special token, by who writes it (``<|assistant_end|>``, ``<|inner_prefix|>``,
  ... the model; ``<|assistant_start|>``, ``<|tool_output_start|>``, ... the prompt);
* edge law: a span begins right after ``<|assistant_start|>`` or a tool output's close,
  and ends after ``<|assistant_end|>`` or ``<|tools_suffix|>``, before a tool output's
  opening, or where the text (or the generation prompt) begins;
* exact spans for readable examples of every dialect (docs/rendering.md, "Loss masks").

Examples per dialect: half of ``APERTUS_LAW_EXAMPLES`` (CI sets 10000) for each law,
a tenth for the wild inputs (whose errors the oracle tests also compare).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import Kind, RenderError, Rendered, get_dialect, lex, render, render_with_spans
from apertus_fast._dialects import TOKEN_TEXT

from .strategies import DIALECTS, render_flags, render_inputs, conversations, wild_render_inputs
from .fresh import source_module
from .test_laws import calls_inside_tool_group

EXAMPLES = int(os.environ.get("APERTUS_LAW_EXAMPLES", "300"))
SPAN_SETTINGS = settings(max_examples=max(100, EXAMPLES // 2), deadline=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
WILD_SETTINGS = settings(SPAN_SETTINGS, max_examples=max(100, EXAMPLES // 10))

DATE = "2026-01-01"
MODEL, ENV = "\u2460", "\u2461"  # ① the model wrote it, ② the environment did

#: tokens the model writes (everything else the prompt or the environment writes)
MODEL_TOKENS = {Kind.ASSISTANT_END, Kind.INNER_PREFIX, Kind.INNER_SUFFIX, Kind.TOOLS_PREFIX,
                Kind.TOOLS_SUFFIX}


def _same_as_render(dialect, kwargs):
    """Render with both functions and check that they agree: the same error, or the same
    text with well-formed spans. Returns the ``Rendered``, or None after an error."""
    results = []
    for fn in (render, render_with_spans):
        try:
            results.append(fn(dialect=dialect, **kwargs))
        except RenderError as exc:
            results.append(exc)
    plain, spanned = results
    if isinstance(plain, RenderError):
        assert type(spanned) is type(plain) and str(spanned) == str(plain)
        assert spanned.message_index == plain.message_index
        return None
    assert isinstance(spanned, Rendered)
    assert spanned.text == plain
    _check_spans(spanned)
    return spanned


def _check_spans(r: Rendered):
    assert isinstance(r.spans, list)
    last_end = -1
    for span in r.spans:
        assert type(span) is tuple and len(span) == 2
        start, end = span
        assert 0 <= start < end <= len(r.text)
        assert start > last_end, f"spans overlap or touch: {r.spans}"
        last_end = end


def _inside(spans, start, end):
    """Whether [start, end) lies inside one span (True), outside all (False), or across."""
    for s, e in spans:
        if s <= start and end <= e:
            return True
        if start < e and s < end:
            return None
    return False


# --------------------------------------------------------------------------- same text, edges

@pytest.mark.parametrize("dialect", DIALECTS)
@SPAN_SETTINGS
@given(data=render_inputs())
def test_same_text_as_render_and_edge_law(dialect, data):
    spanned = _same_as_render(dialect, data)
    # (calls written inside an open tool output make a span start after "[out")
    if spanned is not None and not calls_inside_tool_group(data["messages"]):
        _check_edges(spanned, get_dialect(dialect))
    if spanned is not None:
        _check_byte_spans(spanned)


def _check_byte_spans(r: Rendered):
    """The byte spans cut the same text out of the UTF-8 encoding."""
    try:
        data = r.text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8, and byte_spans says so
        with pytest.raises(UnicodeEncodeError):
            r.byte_spans()
        return
    byte_spans = r.byte_spans()
    assert [data[s:e].decode("utf-8") for s, e in byte_spans] == r.segments()


def _check_edges(r: Rendered, d):
    """A span begins after the prompt's ``<|assistant_start|>`` or a tool output's close,
    and ends after a stop token, before a tool output, or at the end of the text (or of
    the text before the generation prompt)."""
    start_token = TOKEN_TEXT[Kind.ASSISTANT_START]
    end_tokens = (TOKEN_TEXT[Kind.ASSISTANT_END], TOKEN_TEXT[Kind.TOOLS_SUFFIX])
    text = r.text
    for s, e in r.spans:
        assert text.endswith(start_token, 0, s) or text.endswith(d.tool_output_close, 0, s), \
            f"span {s}:{e} begins after {text[max(0, s - 30):s]!r}"
        rest = text[e:]
        assert (text.endswith(end_tokens, 0, e) or rest.startswith(d.tool_output_open)
                or rest in ("", start_token)), \
            f"span {s}:{e} ends before {text[e:e + 30]!r}"


@pytest.mark.parametrize("dialect", DIALECTS)
@WILD_SETTINGS
@given(data=wild_render_inputs())
def test_same_errors_as_render(dialect, data):
    _same_as_render(dialect, data)


# --------------------------------------------------------------------------- painting law

_STRUCTURE = frozenset({"role", "content", "type", "blocks", "text", "calls", "outputs",
                        "output", "parts", "name", "arguments", "function", "tool_calls"})


def _paint(value, mark):
    """``value`` with every string made of ``mark`` (empty strings stay empty; the
    ``"type"`` and ``"role"`` values and the keys of the message structure stay)."""
    if isinstance(value, str):
        if value == "display_answers":  # the name changes the rendering; keep it
            return value
        return mark * (1 + len(value) % 3) if value else value
    if isinstance(value, dict):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            key = k if k in _STRUCTURE or not isinstance(k, str) else f"{mark}{i}"
            out[key] = v if k in ("role", "type") else _paint(v, mark)
        return out
    if isinstance(value, list):
        return [_paint(v, mark) for v in value]
    return value


def _paint_assistant(content):
    """An assistant's content: the model's, except the tool outputs of its blocks."""
    if isinstance(content, dict) and isinstance(content.get("blocks"), list):
        blocks = []
        for block in content["blocks"]:
            if isinstance(block, dict) and block.get("type") == "tool_outputs":
                blocks.append({k: (_paint(v, ENV) if k == "outputs" else v)
                               for k, v in block.items()})
            else:
                blocks.append(_paint(block, MODEL))
        return {**{k: _paint(v, MODEL) for k, v in content.items() if k != "blocks"},
                "blocks": blocks}
    return _paint(content, MODEL)


def _painted(messages):
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
        elif m.get("role") == "assistant":
            out.append({k: (_paint_assistant(v) if k == "content"
                            else v if k == "role" else _paint(v, MODEL))
                        for k, v in m.items()})
        else:
            out.append(_paint(m, ENV))
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
@SPAN_SETTINGS
@given(messages=conversations(), flags=render_flags())
def test_painting_law(dialect, messages, flags):
    messages = _painted(messages)
    flags = dict(flags, bos_token="<s>")
    try:
        r = render_with_spans(messages, dialect=dialect, **flags)
    except RenderError:
        return
    _check_spans(r)
    text, spans = r
    inside = bytearray(len(text))
    for s, e in spans:
        inside[s:e] = b"\1" * (e - s)
    for i, ch in enumerate(text):
        if ch == MODEL:
            assert inside[i], f"model text at {i} outside the spans: {text[max(0, i - 40):i + 40]!r}"
        elif ch == ENV:
            assert not inside[i], f"environment text at {i} in a span: {text[max(0, i - 40):i + 40]!r}"
    # Every special token, by who writes it. Only the default system prompt, the
    # date and the painted strings are text here, so every token is a real one.
    for event in lex(text, dialect=dialect):
        if event.kind == Kind.TEXT:
            continue
        where = _inside(spans, event.start, event.end)
        if event.kind in MODEL_TOKENS:
            assert where is True, f"{event.kind.name} at {event.start} outside the spans"
        else:
            assert where is False, f"{event.kind.name} at {event.start} in a span"


# --------------------------------------------------------------------------- examples

WEATHER = [
    {"role": "user", "content": "Weather in Bern?"},
    {"role": "assistant", "content": {"blocks": [
        {"type": "thoughts", "text": "Look it up."},
        {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]},
        {"type": "tool_outputs", "outputs": [{"output": '{"temp_c": 21}'}]},
        {"type": "response", "text": "21 °C."},
    ]}},
    {"role": "user", "content": "And Zurich?"},
    {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Zurich"}'}]},
    ]}},
    {"role": "tool", "content": '{"temp_c": 19}'},
    {"role": "tool", "content": "(cached)"},
    {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "19 °C."}]}},
]

CALL_1 = '<|tools_prefix|>[{"get_weather": {"city": "Bern"}}]<|tools_suffix|>'
CALL_2 = '<|tools_prefix|>[{"get_weather": {"city": "Zurich"}}]<|tools_suffix|>'


@pytest.mark.parametrize("dialect, last, output_1, outputs_2", [
    # the reference template never closes the last turn
    ("apertus-format-reference", "19 °C.", '[{"temp_c": 21}]', '[{"temp_c": 19}, (cached)]'),
    ("apertus-1", "19 °C.<|assistant_end|>", '[{"temp_c": 21}]', '[{"temp_c": 19}, (cached)]'),
    ("apertus-1.5", "19 °C.<|assistant_end|>",
     '<|tool_output_start|>{"temp_c": 21}<|tool_output_end|>',
     '<|tool_output_start|>{"temp_c": 19}, (cached)<|tool_output_end|>'),
])
def test_blocks_and_tool_messages(dialect, last, output_1, outputs_2):
    r = render_with_spans(WEATHER, dialect=dialect, date=DATE, enable_thinking=True)
    assert r.text == render(WEATHER, dialect=dialect, date=DATE, enable_thinking=True)
    assert r.segments() == [
        "<|inner_prefix|>Look it up." + CALL_1,
        "<|inner_suffix|>21 °C.<|assistant_end|>",
        CALL_2,
        last,
    ]
    # what lies between the spans is the prompt and the environment's text
    gaps = [r.text[e:s] for (_, e), (s, _) in zip(r.spans, r.spans[1:])]
    assert gaps == [output_1, "<|user_start|>And Zurich?<|user_end|><|assistant_start|>",
                    outputs_2]
    assert r.text[:r.spans[0][0]].endswith("<|user_start|>Weather in Bern?<|user_end|>"
                                           "<|assistant_start|>")
    assert r.text[r.spans[-1][1]:] == ""


def test_string_assistants_legacy_calls_and_generation_prompt():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "content": "12:00"},
        {"role": "assistant", "content": "Noon."},
        {"role": "user", "content": "Thanks"},
    ]
    r = render_with_spans(messages, dialect="apertus-1", add_generation_prompt=True)
    assert r.segments() == ["Hello!<|assistant_end|>",
                            'Checking.<|tools_prefix|>[{"now": {}}]<|tools_suffix|>',
                            "Noon.<|assistant_end|>"]
    assert r.text.endswith("<|user_start|>Thanks<|user_end|><|assistant_start|>")
    assert r.text[r.spans[1][1]:r.spans[2][0]] == "[12:00]"


def test_continued_and_waiting_turns_stay_open():
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}]
    r = render_with_spans(messages, dialect="apertus-1.5", continue_assistant_message=True)
    assert r.segments() == ["Hel"] and r.text.endswith("<|assistant_start|>Hel")
    calls = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]}]}}]
    r = render_with_spans(calls, dialect="apertus-1.5")
    assert r.segments() == ['<|tools_prefix|>[{"f": {}}]<|tools_suffix|>']
    assert r.spans[-1][1] == len(r.text)  # waiting for the tool's output: no end token


def test_prompt_only_conversations_have_no_spans():
    r = render_with_spans([{"role": "user", "content": "Hi"}], dialect="apertus-1",
                          add_generation_prompt=True, tools=[{"name": "f", "description": "F"}])
    assert r.spans == [] and r.segments() == []
    empty = render_with_spans([{"role": "user", "content": "Hi"},
                               {"role": "assistant", "content": ""}], dialect="apertus-1")
    assert empty.segments() == ["<|assistant_end|>"]


def test_dataclasses_and_unpacking():
    from apertus_fast import Conversation, Message

    conv = Conversation.from_messages([Message.user("Hi"), Message.assistant("Hello")])
    text, spans = render_with_spans(conv.messages, dialect="apertus-1", date=DATE)
    assert text == render(conv.messages, dialect="apertus-1", date=DATE)
    assert [text[s:e] for s, e in spans] == ["Hello<|assistant_end|>"]


def test_errors_are_renders_errors():
    with pytest.raises(RenderError, match="message 1") as info:
        render_with_spans([{"role": "user", "content": "Hi"}, {"role": "tool", "content": "x"}])
    assert info.value.message_index == 1
    with pytest.raises(ValueError, match="unknown dialect"):
        render_with_spans([], dialect="apertus-2")


def test_parsed_conversations_render_with_spans():
    """A corpus kept only as text: parse, then the parsed conversation's spans."""
    from apertus_fast import parse

    for dialect in DIALECTS:
        direct = render_with_spans(WEATHER, dialect=dialect, date=DATE, enable_thinking=True)
        again = parse(direct.text, dialect=dialect).render_with_spans()
        assert again == direct and isinstance(again, Rendered)


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
def test_a_second_output_group_in_a_row_is_read_back_as_text(dialect):
    """rendering.md, "From rendered text alone": in the bracket dialects only a group
    right after <|tools_suffix|> is read as outputs; a second one right after it is the
    assistant's text, so its spans, re-rendered from the text, cover it."""
    from apertus_fast import parse

    calls = {"type": "tool_calls", "calls": [{"name": "w", "arguments": '{"c": "Bern"}'}]}
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": {
        "blocks": [calls, {"type": "tool_outputs", "outputs": [{"output": '{"t": 21}'}]},
                   {"type": "tool_outputs", "outputs": [{"output": '{"t": 19}'}]},
                   {"type": "response", "text": "21 and 19."}]}}]
    direct = render_with_spans(messages, dialect=dialect, date=DATE)
    again = parse(direct.text, dialect=dialect).render_with_spans()
    assert again.text == direct.text
    assert direct.segments()[-1].startswith("21 and 19.")
    assert again.segments()[-1].startswith('[{"t": 19}]21 and 19.')


# --------------------------------------------------------------------------- token_mask

def test_token_mask_overlap_rule():
    r = Rendered("abcdefghij", [(2, 4), (6, 8)])
    offsets = [(0, 0), (0, 2), (1, 3), (2, 4), (3, 6), (4, 6), (5, 7), (7, 9), (8, 10), (9, 9)]
    assert r.token_mask(offsets) == [False, False, True, True, True, False, True, True,
                                     False, False]
    assert r.token_mask([]) == []
    assert Rendered("abc", []).token_mask([(0, 1), (1, 3)]) == [False, False]
    # lists of lists and out-of-order offsets work too (a tokenizer's offset_mapping)
    assert r.token_mask([[7, 8], [0, 1], [3, 4]]) == [True, False, True]


def test_byte_spans_and_utf8_token_masks():
    r = Rendered("aé😀bc€d", [(1, 3), (4, 6)])  # "é😀" and "c€"
    assert r.byte_spans() == [(1, 7), (8, 12)]
    data = r.text.encode()
    assert [data[s:e].decode() for s, e in r.byte_spans()] == r.segments() == ["é😀", "c€"]
    # one token per byte: the same membership as by characters
    assert r.token_mask([(i, i + 1) for i in range(len(data))], utf8=True) == [
        False, True, True, True, True, True, True, False, True, True, True, True, False]
    ascii_r = Rendered("abcdef", [(1, 2), (4, 6)])
    assert ascii_r.byte_spans() == ascii_r.spans and ascii_r.byte_spans() is not ascii_r.spans
    assert Rendered("x", []).byte_spans() == []
    # the error says where the text has no UTF-8, as text.encode() does (not where in
    # a slice), whether the surrogate is before, in or after a span
    for text, spans in (("a\ud800b", [(0, 1)]), ("aé\ud800b", [(2, 4)]),
                        ("é\ud800bcd", [(3, 4)])):
        at = text.index("\ud800")
        with pytest.raises(UnicodeEncodeError) as caught:
            Rendered(text, spans).byte_spans()
        assert (caught.value.start, caught.value.end) == (at, at + 1)
        with pytest.raises(UnicodeEncodeError, match=f"in position {at}:"):
            Rendered(text, spans).token_mask([(0, 1)], utf8=True)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_token_mask_of_characters_is_the_span_membership(dialect):
    r = render_with_spans(WEATHER, dialect=dialect, date=DATE)
    mask = r.token_mask([(i, i + 1) for i in range(len(r.text))])
    expected = [any(s <= i < e for s, e in r.spans) for i in range(len(r.text))]
    assert mask == expected
    assert "".join(ch for ch, m in zip(r.text, mask) if m) == "".join(r.segments())


# The mask loop (_mask.py) is plain Python compiled by Cython: the compiled module and
# its source (loaded from the .py file, as a pure-Python install runs it) must agree
# with the definition on every input.

_MASKS = {"package": __import__("apertus_fast._mask", fromlist=["token_mask"]).token_mask,
          "source": source_module("_mask").token_mask}


#: Bounds beyond a C ssize_t, on both sides and at its edges, with small ones
_HUGE = st.sampled_from([-2 ** 80, -2 ** 70, -2 ** 63 - 1, -2 ** 63, -2 ** 63 + 1, -1, 0, 1, 5,
                         2 ** 63 - 2, 2 ** 63 - 1, 2 ** 63, 2 ** 64, 2 ** 70, 2 ** 80])


@st.composite
def _spans_and_offsets(draw, values=st.integers(0, 64)):
    bounds = sorted(set(draw(st.lists(values, max_size=10))))
    spans = [(a, b) for a, b in zip(bounds[::2], bounds[1::2])]
    pairs = st.tuples(values, values)
    offsets = draw(st.lists(pairs, max_size=40))
    if draw(st.booleans()):  # a tokenizer's order: sorted, end >= start
        offsets = sorted((s, max(s, e)) for s, e in offsets)
    return spans, offsets


class _Array:
    """Stands in for a numpy array of shape (n, 2): only tolist()."""

    def __init__(self, pairs):
        self._pairs = pairs

    def tolist(self):
        return [list(p) for p in self._pairs]


class _Scalar:
    """Stands in for a numpy scalar or 0-d array: its tolist() is a number."""

    def __init__(self, value):
        self._value = value

    def tolist(self):
        return self._value


@pytest.mark.parametrize("impl", list(_MASKS))
@settings(max_examples=1000, deadline=None)
@given(case=_spans_and_offsets(), shape=st.sampled_from(["tuples", "lists", "tuple", "array", "iterator"]))
def test_token_mask_is_overlap_with_a_span(impl, case, shape):
    spans, offsets = case
    expected = [e > s and any(a < e and s < b for a, b in spans) for s, e in offsets]
    given_offsets = {"tuples": offsets, "lists": [list(p) for p in offsets], "tuple": tuple(offsets),
                     "array": _Array(offsets), "iterator": iter(offsets)}[shape]
    assert _MASKS[impl](spans, given_offsets) == expected
    assert Rendered("x" * 70, spans).token_mask(list(offsets)) == expected


@pytest.mark.parametrize("impl", list(_MASKS))
@settings(max_examples=1000, deadline=None)
@given(case=_spans_and_offsets(_HUGE))
def test_token_mask_is_overlap_with_a_span_beyond_a_ssize_t(impl, case):
    """Bounds beyond a C ssize_t: the compiled loop clamped them, which made distinct
    bounds equal ((2**70, 2**71) an empty token inside the span (-2**80, 2**80))."""
    spans, offsets = case
    expected = [e > s and any(a < e and s < b for a, b in spans) for s, e in offsets]
    assert _MASKS[impl](spans, offsets) == expected


def test_tokens_out_of_order_cost_no_walk_over_the_spans():
    """After a token that goes back (a bisection), the next one forward walked the
    spans one at a time: tokens jumping back and forth cost tokens x spans (524,000
    tokens over 13,000 spans: 8.6 s compiled). Counted in lines run by the source."""
    import sys as _sys

    token_mask = source_module("_mask").token_mask
    spans = [(10 * i, 10 * i + 5) for i in range(400)]
    ahead = [(i, i + 3) for i in range(0, 4000, 3)]
    half = len(ahead) // 2
    offsets = [t for pair in zip(ahead[:half], ahead[half:]) for t in pair]
    lines = [0]

    def tracer(frame, event, arg):
        if frame.f_code is token_mask.__code__:
            if event == "line":
                lines[0] += 1
            return tracer
        return None

    _sys.settrace(tracer)
    try:
        mask = token_mask(spans, offsets)
    finally:
        _sys.settrace(None)
    assert mask == [e > s and any(a < e and s < b for a, b in spans) for s, e in offsets]
    assert lines[0] < 40 * len(offsets), (lines[0], len(offsets))


def test_token_mask_is_compiled_where_the_package_is():
    import apertus_fast
    assert apertus_fast.backends()["_mask"] in ("cython", "python")
    if apertus_fast.backends()["_render"] == "cython":
        assert apertus_fast.backends()["_mask"] == "cython"


@pytest.mark.parametrize("impl", list(_MASKS))
@pytest.mark.parametrize("offsets, names", [
    ([(0, 1, 2)], "offsets[0] = (0, 1, 2)"),
    ([(0, 1), None], "offsets[1] = None"),
    ([(0.0, 3.0)], "offsets[0] = (0.0, 3.0)"),       # floats: neither build truncates them
    ([(0, 1), ("0", "1")], "offsets[1] = ('0', '1')"),
    ([0, 5], "offsets[0] = 0"),
    (_Array([[(0, 3), (5, 8)]]), "got a list of pairs (a batch's offset_mapping has shape"),
    ([[(0, 3), (5, 8), (8, 9)]], "pass one example's, e.g. offset_mapping[0]"),
    ({(0, 3): 1}, "offsets: expected (start, end) pairs, got dict"),
    ("0123", "offsets: expected (start, end) pairs, got str"),
    (5, "offsets: expected (start, end) pairs, got int"),
    (_Scalar(5), "offsets: expected (start, end) pairs, got _Scalar"),   # numpy.int64(5)
    # two items that iterate as no pair (audit): a set in hash order ({7, 9} was read
    # as (9, 7), an empty token), a dict's keys, bytes or characters; also where an
    # offset beyond a C ssize_t sends the compiled loop to its fallback
    ([(0, 1), {7, 9}], "offsets[1] = {"),
    ([frozenset({0, 3})], "offsets[0] = frozenset("),
    ([{0: "a", 3: "b"}], "offsets[0] = {0: 'a', 3: 'b'}"),
    ([b"\x00\x03"], "offsets[0] = b'\\x00\\x03'"),
    ([bytearray(b"\x00\x03")], "offsets[0] = bytearray("),
    (["03"], "offsets[0] = '03'"),
    ([(0, 2**70), {7, 9}], "offsets[1] = {"),
])
def test_token_mask_rejects_what_is_not_a_pair_of_integers(impl, offsets, names):
    """The compiled loop and its plain source reject the same offsets with one
    TypeError that names the first bad item, not an error from inside the loop."""
    with pytest.raises(TypeError) as info:
        _MASKS[impl]([(0, 2)], offsets)
    assert names in str(info.value)
    assert "expected" in str(info.value)


@pytest.mark.parametrize("impl", list(_MASKS))
def test_token_mask_takes_integers_of_any_size_and_kind(impl):
    """Offsets beyond a C ssize_t are integers too (the compiled loop ranks them);
    numpy-like integers (``__index__``) and bools are read as the ints they are."""

    class Index:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    spans = [(2, 5), (7, 9)]
    huge = 2 ** 70
    assert _MASKS[impl](spans, [(0, huge), (-huge, 1), (8, huge), (huge, huge + 1)]) == [
        True, False, True, False]
    assert _MASKS[impl](spans, [(Index(1), Index(3)), (True, 2), (Index(5), 7)]) == [
        True, False, False]
    with pytest.raises(TypeError, match=r"offsets\[1\] = \(1, 2, 3\)"):
        _MASKS[impl](spans, [(0, huge), (1, 2, 3)])
    # spans too: a bound beyond a ssize_t made the compiled loop clamp (now: rank) the
    # offsets and call itself again, forever (a stack overflow: the interpreter crashed)
    assert _MASKS[impl]([(0, 5), (10, 2 ** 63)], [(0, 1), (11, 12), (4, 11)]) == [
        True, True, True]
    assert _MASKS[impl]([(huge, huge + 5)], [(0, 1), (11, 12)]) == [False, False]
    assert _MASKS[impl]([(-huge, 3)], [(0, 1), (5, 6)]) == [True, False]
    # spans given as an iterator are read once (the ranks were made from the spans
    # read again: none, a mask of False in the compiled build only)
    assert _MASKS[impl](iter([(0, huge)]), [(1, 2)]) == [True]
    assert _MASKS[impl](iter([(0, 5)]), iter([(1, 2), (6, 7)])) == [True, False]


@pytest.mark.parametrize("impl", list(_MASKS))
@pytest.mark.parametrize("spans, error, names", [
    ([(1.5, 2)], TypeError, "spans[0] = (1.5, 2): expected a (start, end) pair of integers"),
    ([(0, 2), (None, 5)], TypeError, "spans[1] = (None, 5)"),
    ([(0, 2 ** 70), ("x", 3)], TypeError, "spans[1] = ('x', 3)"),
    ([(1,)], TypeError, "spans[0] = (1,)"),
    ([(3, 3)], ValueError, "spans[0] = (3, 3) is empty"),
    ([(5, 9), (1, 3)], ValueError, "spans[1] = (1, 3) starts before spans[0] ends (9)"),
    ([(0, 5), (4, 8)], ValueError, "spans[1] = (4, 8) starts before spans[0] ends (5)"),
])
def test_token_mask_rejects_spans_that_are_not_sorted_disjoint_pairs_of_integers(impl, spans, error, names):
    """A Rendered built by hand may hold any spans. Unchecked, the two builds differed
    on them (compiled: a bare IndexError, or the offsets blamed for a bad span; plain:
    an answer), and spans out of order gave a wrong mask in both (parity audit)."""
    for offsets in ([], [(1, 2)]):
        with pytest.raises(error) as info:
            _MASKS[impl](spans, offsets)
        assert names in str(info.value)
    # touching spans are disjoint (half-open)
    assert _MASKS[impl]([(0, 2), (2, 4)], [(1, 2), (3, 5), (4, 6)]) == [True, True, False]


@pytest.mark.parametrize("spans, error, names", [
    ([(0, 5), (3, 8)], ValueError, "spans[1] = (3, 8) starts before spans[0] ends (5)"),
    ([(-3, 2)], ValueError, "spans[0] = (-3, 2) starts before the text"),
    ([(0.0, 2.0)], TypeError, "spans[0] = (0.0, 2.0): expected a (start, end) pair of integers"),
    (["ab"], TypeError, "spans[0] = 'ab': expected a (start, end) pair of integers"),
    ([(2, 2)], ValueError, "spans[0] = (2, 2) is empty"),
    ([(0, 2), (4, 8)], ValueError, "spans[1] = (4, 8) ends after the text (6 characters)"),
])
@pytest.mark.parametrize("text", ["abcdéf", "abcdef"])
def test_byte_spans_check_the_spans_as_the_character_mask_does(spans, error, names, text):
    """``byte_spans()`` (and so ``token_mask(..., utf8=True)``) converted whatever spans
    a hand-built Rendered held: overlapping ones and ones past the text became other
    byte spans and a mask, a negative one was reported as the span it became, a float
    one raised "slice indices must be integers" (odd-input audit). They are checked
    as the character mask checks them, and must lie within the text."""
    rendered = Rendered(text, spans)
    for call in (rendered.byte_spans, lambda: rendered.token_mask([(0, 1)], utf8=True)):
        with pytest.raises(error) as info:
            call()
        assert names in str(info.value)
    if "the text" not in names:   # the character mask says the same
        with pytest.raises(error) as info:
            rendered.token_mask([(0, 1)])
        assert names in str(info.value)
    # spans as lists are pairs too, and come back as tuples
    assert Rendered(text, [[1, 2], [4, 6]]).byte_spans() == \
        ([(1, 2), (4, 7)] if not text.isascii() else [(1, 2), (4, 6)])


@settings(max_examples=1000, deadline=None)
@given(spans=st.lists(st.tuples(_HUGE, _HUGE), max_size=6),
       offsets=st.lists(st.tuples(_HUGE, _HUGE), max_size=12))
def test_token_mask_builds_agree_on_any_spans(spans, offsets):
    """Whatever the spans (unsorted, empty, beyond a ssize_t): the compiled loop and its
    source give the same mask or the same error."""
    def run(impl):
        try:
            return _MASKS[impl](spans, offsets)
        except (TypeError, ValueError) as exc:
            return type(exc), str(exc)

    assert run("package") == run("source")


@pytest.mark.parametrize("impl", list(_MASKS))
def test_pairs_that_can_be_read_once_are_read_once(impl):
    """Offset pairs given as iterators: the compiled loop, falling back to ranks for a
    bound beyond a ssize_t, read every pair again and found the used-up ones empty (a
    TypeError naming a good pair; parity fuzz). Such pairs are read once, and kept."""
    huge = 2 ** 63
    assert _MASKS[impl]([(0, 3)], [iter((0, 2))]) == [True]
    assert _MASKS[impl]([(0, 3)], [iter((0, 2)), (0, huge)]) == [True, True]
    assert _MASKS[impl]([(0, 3)], [(0, huge), iter((0, 2)), map(int, "45")]) == [True, True, False]
    with pytest.raises(TypeError, match=r"offsets\[1\] = \(9, '11'\)"):
        _MASKS[impl]([], [iter((2 ** 64, 3)), (9, "11")])

    class Refuses:
        def __iter__(self):
            raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):   # (the caller's own error, as unpacking gives it)
        _MASKS[impl]([], [Refuses(), (0, huge)])


def test_spans_that_would_touch_are_merged_in_a_dialect_with_bare_outputs():
    """A custom dialect without tool-output tokens cuts an empty output out of the turn
    as nothing: the model's text on both sides of it is one span, never two that touch
    (which ``_check_spans`` rejects)."""
    import dataclasses

    bare = dataclasses.replace(get_dialect("apertus-1.5"), name="bare-outputs",
                               tool_output_open="", tool_output_close="")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]},
        {"type": "tool_outputs", "outputs": [{"output": ""}]},
        {"type": "response", "text": "ok"}]}}]
    r = _same_as_render(bare, dict(messages=messages, date="2026-01-01"))
    assert len(r.spans) == 1
    assert r.segments() == ['<|tools_prefix|>[{"f": {}}]<|tools_suffix|>ok<|assistant_end|>']
