"""The parser's JSON skipper (``_parse._json_skip``) against the json module.

The builder splits ``[a, b]`` tool outputs and ``{"name": arguments}`` tool calls where a
JSON value ends. The plain-Python module asks ``json.JSONDecoder().raw_decode``; compiled,
a skipper finds the same end without building the value. Both builds must read every
text the same way, so the skipper must accept exactly what the json module accepts
(strict strings, its escapes, NaN / Infinity, its number grammar, the int digit limit)
and end where it ends; it also goes deeper than the json module's recursion limit.
"""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import _parse

from .fresh import source_module

_DECODER = json.JSONDecoder()
_settings = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(s, pos):
    """``raw_decode``'s end, -1 where it raises ``ValueError``; ``None`` on
    ``RecursionError`` (no answer to compare with)."""
    try:
        return _DECODER.raw_decode(s, pos)[1]
    except ValueError:
        return -1
    except RecursionError:
        return None


def agree(s, pos=0):
    expected = reference(s, pos)
    if expected is None:
        return
    assert _parse._skip_json_value(s, pos) == expected, (s, pos)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)

# characters that matter to the grammar, and some that do not
ALPHABET = list('{}[]",:\\/ \t\n\r0123456789.eE+-abfnrtulsINy') + ["\x00", "\x1f", "é", "😀", "\ud800"]


@st.composite
def json_texts(draw):
    value = draw(json_values)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), allow_nan=True,
                      indent=draw(st.sampled_from([None, 0, 2, "\t"])),
                      separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])))
    for _ in range(draw(st.integers(0, 3))):  # mutations: insert, delete, replace, cut
        op = draw(st.sampled_from(["insert", "delete", "replace", "cut", "append"]))
        i = draw(st.integers(0, len(text)))
        c = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            text = text[:i] + c + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + 1:]
        elif op == "replace":
            text = text[:i] + c + text[i + 1:]
        elif op == "cut":
            text = text[:i]
        else:
            text += draw(st.sampled_from([", 1", "}", "]", " ", '"', "x", ", {\"a\": 1}"]))
    return text


@settings(max_examples=3000, **_settings)
@given(text=json_texts(), data=st.data())
def test_generated_json_and_mutations(text, data):
    agree(text)
    if text:
        agree(text, data.draw(st.integers(0, len(text)), label="pos"))


@settings(max_examples=2000, **_settings)
@given(text=st.text(st.sampled_from(ALPHABET), max_size=30))
def test_any_text_over_the_grammar_alphabet(text):
    agree(text)


@settings(max_examples=1500, **_settings)
@given(text=st.one_of(json_texts(), st.lists(st.sampled_from(ALPHABET + ['}, {"', '": ']),
                                             max_size=30).map("".join)),
       data=st.data())
def test_a_memo_changes_no_answer(text, data):
    """The call-list readers keep a memo of the containers found not to be JSON
    (``{start: -1}``) and ask the skipper from many positions of one text: with the
    memo every answer is the one without it, whatever the order of the questions."""
    memo, plain_memo = {}, {}
    for pos in data.draw(st.permutations(range(len(text) + 1)), label="positions"):
        expected = _parse._skip_json_value(text, pos)
        assert _parse._skip_json_value(text, pos, memo) == expected, (text, pos)
        # the plain-Python build: the json module first, the skipper where it fails
        assert _SOURCE._json_end(text, pos, plain_memo) == expected, (text, pos)


_SOURCE = source_module("_parse")


@pytest.mark.parametrize("text", [
    "", "-", "-0", "0", "00", "01", "1.", "1.5", "1.e5", "1e", "1e+", "1e5", "1E-5", "-1.5e+10x",
    ".5", "+1", "0x10", "1_000", "NaN", "Infinity", "-Infinity", "-Inf", "nan", "infinity",
    "null", "nul", "true", "tru", "false", "fals", "nullx", "truex",
    '""', '"', '"\\"', '"\\""', '"\\u00e9"', '"\\u00E9"', '"\\u00g9"', '"\\u00e"', '"\\ud83d\\ude00"',
    '"\\ud83d\\uZZZZ"', '"\\ud800"', '"\\x"', '"\\/"', '"a\tb"', '"a\x1fb"', '"a\x7fb"', '"é😀"',
    "[]", "[ ]", "[1,]", "[,1]", "[1 2]", "[1, 2]", "[\n1\r\n,\t2]", "{}", "{ }", '{"a":1}',
    '{"a" : 1 , "b" : [ ] }', '{"a":1,}', '{a:1}', "{1:2}", '{"a"}', '{"a":}', '{"a" 1}', "[[[]]]",
    '{"a": {"b": [1, {"c": null}]}}', '["a", "b"] tail', "  1", "[\x0c]", "[\u00a0]",
])
def test_edge_cases(text):
    agree(text)
    for pos in range(len(text)):
        agree(text, pos)


def test_deeper_than_the_json_module_goes():
    deep = "[" * 50_000 + "]" * 50_000
    assert reference(deep, 0) is None  # the json module gives up
    assert _parse._skip_json_value(deep, 0) == len(deep)
    assert _parse._skip_json_value(deep[:-1], 0) == -1
    objects = '{"a": ' * 50_000 + "1" + "}" * 50_000
    assert _parse._skip_json_value(objects, 0) == len(objects)
    # the splitters (json module first in the plain-Python build) read them whole
    for value in (deep, objects):
        assert _parse.split_tool_outputs(value + ", x, " + value) == [value, "x, " + value]


@pytest.mark.skipif(not hasattr(sys, "set_int_max_str_digits"), reason="no int digit limit")
@pytest.mark.parametrize("limit", [0, 640, 700, 4300])
def test_the_int_digit_limit(limit):
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        for digits in (1, 640, 641, 699, 700, 701, 4300, 4301, 9000):
            for text in ("7" * digits, "-" + "7" * digits, "7" * digits + ".5",
                         "7" * digits + "e1", "[" + "7" * digits + "]"):
                agree(text)
    finally:
        sys.set_int_max_str_digits(old)


# --------------------------------------------------------------------------- output groups

def _find_output_group(run):
    """The closing "]" of a leading ``[a, b]`` group (the specification the parser's
    one-pass ``_output_group`` must meet, with ``split_tool_outputs`` for the items)."""
    pos, n = 1, len(run)
    while True:
        if pos < n and run[pos] == "]":
            return pos
        end = reference(run, pos)
        if end is not None and end > 0 and end < n and run[end] == "]":
            return end
        if end is not None and end > 0 and run.startswith(", ", end):
            pos = end + 2
            continue
        close = run.rfind("]")
        return close if close >= pos else -1


_items = st.one_of(json_values.map(json.dumps), st.text(st.sampled_from(ALPHABET), max_size=6),
                   st.sampled_from(["", "]", ", ", "x], 1", "[1]", '"a]"', "1, ]"]))


@settings(max_examples=3000, **_settings)
@given(items=st.lists(_items, max_size=5), tail=st.text(st.sampled_from(ALPHABET), max_size=6),
       sep=st.sampled_from([", ", ",", "]"]))
def test_leading_output_groups(items, tail, sep):
    run = "[" + sep.join(items) + tail
    close = _find_output_group(run)
    expected = (None, run) if close < 0 else (_parse.split_tool_outputs(run[1:close]), run[close + 1:])
    assert _parse._leading_outputs(run, True) == expected
    assert _parse._leading_outputs(run, False) == (None, run)


# --------------------------------------------------------------------------- call lists

#: Call lists not of the written form whose every call starts its arguments inside the
#: previous call's unfinished arguments, one container further in: the reader tries
#: each call's arguments as JSON, and each try read the text to its end again.
_NESTED_CALLS = [
    '[{"f": ' + '{"k": "}, {", "abc": ' * 3000 + '}]',      # the separator inside a string
    '[{"f": ' + '[{"k": "v"}, {"x": ' * 3000 + '}]',        # a separator of the lenient reading
    '[{"f": ' + '[{"a": "}, {", "b": ' * 3000 + ']}]',
]


@pytest.mark.parametrize("body", _NESTED_CALLS, ids=["in-strings", "lenient", "arrays"])
def test_nested_call_lists_are_read_in_linear_time(body):
    """``_read_calls`` and ``_salvage`` (strict and lenient ``parse``,
    ``parse_completion``, the stream's last word on a list) keep a memo of the
    containers they have read, so no text is read again per call: 3,000 calls took
    0.4 s compiled (8,000: 5 s), fourfold per doubling. Counted in the plain-Python
    module running the compiled build's reader (the skipper, not the json module)."""
    source = source_module("_parse")
    source._COMPILED = True
    read = [0]
    string_end, ws = source._json_string_end, source._json_ws

    def counted_string_end(s, i, n):
        end = string_end(s, i, n)
        read[0] += (end if end > 0 else n) - i
        return end

    def counted_ws(s, i, n):
        end = ws(s, i, n)
        read[0] += end - i
        return end

    source._json_string_end, source._json_ws = counted_string_end, counted_ws
    exact = source.split_tool_calls_at(body)
    salvaged = source._salvage(body)
    found = source.lenient_calls_at(body)
    assert read[0] < 20 * len(body), (read[0], len(body))
    assert len(exact) > 1000 and len(salvaged[0]) >= 1
    # the package's own module (compiled where it is) answers the same
    assert (exact, found) == (_parse.split_tool_calls_at(body), _parse.lenient_calls_at(body))
