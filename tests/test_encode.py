"""The command line's JSON lines (``_io.json_line``) against the json module.

Compiled, ``_encode.json_line`` writes the usual values as UTF-8 in one pass and leaves
the rest (other types, subclasses, non-str keys, lone surrogates, deep nesting) to the
json module. Either way a line must be exactly ``json.dumps(obj, ensure_ascii=False)``
plus a newline in UTF-8, or, for a string with a lone surrogate (no UTF-8), the ASCII
escaped ``json.dumps(obj)``: the lines of the compiled and the pure-Python builds are
byte-identical.
"""

from __future__ import annotations

import enum
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import _io

try:
    from apertus_fast import _encode
except ImportError:  # pure-Python install
    _encode = None

needs_compiled = pytest.mark.skipif(
    _encode is None, reason="_encode is not compiled (pure-Python install): json writes every line")

_settings = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expected(obj) -> bytes:
    try:
        return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(obj) + "\n").encode("ascii")


# every kind of string storage (1, 2, 4 bytes a character), the escapes, and surrogates
characters = st.one_of(
    st.characters(max_codepoint=0x7F),
    st.characters(min_codepoint=0x80, max_codepoint=0xFF),
    st.characters(min_codepoint=0x100, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000),
    st.sampled_from(list('"\\/\b\f\n\r\t\x00\x01\x1f\x7f\x80\xff\u2028\ud800\udfff\uffff')),
)
texts = st.text(characters, max_size=40)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e16, 1e-7, 1.5e300, 5e-324]),
)
scalars = st.none() | st.booleans() | numbers | texts
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.lists(children, max_size=3).map(tuple)
    | st.dictionaries(texts, children, max_size=4),
    max_leaves=25,
)


@given(values)
@settings(max_examples=3000, **_settings)
def test_json_line_is_json_dumps(obj):
    assert _io.json_line(obj) == expected(obj)


@needs_compiled
@given(values)
@settings(max_examples=3000, **_settings)
def test_compiled_writer_writes_exactly_or_leaves_it(obj):
    line = _encode.json_line(obj)
    if line is None:  # only for a lone surrogate among these values
        assert "\\ud" in json.dumps(obj)
    else:
        assert line == (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


@needs_compiled
@pytest.mark.parametrize("text", [
    "", "plain ascii", "quote \" backslash \\ slash /", "\b\f\n\r\t\x00\x1f\x7f",
    "é à ÿ \x80", "€ 中文 \u2028 \uffff", "😀 emoji \U0010ffff", "mixed \x01 é € 😀 \"",
    "a" * 5000, "é" * 5000 + "\n", "中" * 3000 + "\\", "😀" * 3000 + "\x02",
])
def test_strings_of_every_width(text):
    assert _encode.json_line(text) == expected(text)
    assert _encode.json_line([text, {text: text}]) == expected([text, {text: text}])


@needs_compiled
@pytest.mark.parametrize("obj", [
    "lone \ud800", ["x", "😀\udfff"], {"k\udc00": 1},        # no UTF-8
    {1: "a"}, {None: 1}, {True: 1}, {1.5: 2},                  # keys json converts
    b"bytes", bytearray(b"x"), {1, 2}, object(),               # json rejects these
])
def test_values_it_leaves_to_the_json_module(obj):
    assert _encode.json_line(obj) is None


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


@pytest.mark.parametrize("obj", [
    Color.RED, [Color.RED], Name("x"), {"k": Name("v")}, {Name("k"): 1},
    {1: "a", None: 2, True: 3, 1.5: 4}, ["lone \ud800"],
])
def test_subclasses_and_odd_keys_as_json_writes_them(obj):
    if _encode is not None:
        assert _encode.json_line(obj) is None
    assert _io.json_line(obj) == expected(obj)


def test_errors_are_json_errors():
    with pytest.raises(TypeError):
        _io.json_line({"k": b"x"})
    circular = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        _io.json_line(circular)
    with pytest.raises(ValueError, match="integer string conversion"):
        _io.json_line([10**5000])  # the same limit as int.__repr__


def test_nesting_deeper_than_the_writer_goes():
    depth = (_encode.MAX_DEPTH if _encode is not None else 100) + 5
    obj: object = "leaf"
    for i in range(depth):
        obj = [obj] if i % 2 else {"k": obj}
    if _encode is not None:
        assert _encode.json_line(obj) is None
    assert _io.json_line(obj) == expected(obj)


def test_floats_as_repr_writes_them():
    for x in (0.1, 1 / 3, 1e22, 1e-5, 123456789012345680.0, -0.0, math.pi, 2.0**-1074):
        assert _io.json_line(x) == (repr(x) + "\n").encode()
    assert _io.json_line([math.inf, -math.inf, math.nan]) == b"[Infinity, -Infinity, NaN]\n"
