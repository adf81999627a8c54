"""The command line's JSON lines (``_io.json_line``, ``_io.json_loads``) against the
json module.

Reading: ``_jsonl.loads`` must give ``json.loads``'s value (types, float bits, key
order) or its exception (type and message) for the UTF-8 text of every input (a leading
BOM skipped: ``_io.loads_utf8``): generated documents, the same mutated byte by byte,
and a list of edge cases; the reader alone either gives that value or leaves the input
to json. (``json.loads(bytes)`` itself guesses UTF-16 or UTF-32 from the first bytes;
a JSON line is UTF-8.)

Writing:

Compiled, ``_jsonl.json_line`` writes the usual values as UTF-8 in one pass and leaves
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
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import _io

from .json_compare import outcome, same

try:
    from apertus_fast import _jsonl
except ImportError:  # pure-Python install
    _jsonl = None

needs_compiled = pytest.mark.skipif(
    _jsonl is None, reason="_jsonl is not compiled (pure-Python install): json writes every line")

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
    line = _jsonl.json_line(obj)
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
    assert _jsonl.json_line(text) == expected(text)
    assert _jsonl.json_line([text, {text: text}]) == expected([text, {text: text}])


@needs_compiled
@pytest.mark.parametrize("obj", [
    "lone \ud800", ["x", "😀\udfff"], {"k\udc00": 1},        # no UTF-8
    {1: "a"}, {None: 1}, {True: 1}, {1.5: 2},                  # keys json converts
    b"bytes", bytearray(b"x"), {1, 2}, object(),               # json rejects these
])
def test_values_it_leaves_to_the_json_module(obj):
    assert _jsonl.json_line(obj) is None


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


@pytest.mark.parametrize("obj", [
    Color.RED, [Color.RED], Name("x"), {"k": Name("v")}, {Name("k"): 1},
    {1: "a", None: 2, True: 3, 1.5: 4}, ["lone \ud800"],
])
def test_subclasses_and_odd_keys_as_json_writes_them(obj):
    if _jsonl is not None:
        assert _jsonl.json_line(obj) is None
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
    depth = (_jsonl.MAX_DEPTH if _jsonl is not None else 100) + 5
    obj: object = "leaf"
    for i in range(depth):
        obj = [obj] if i % 2 else {"k": obj}
    if _jsonl is not None:
        assert _jsonl.json_line(obj) is None
    assert _io.json_line(obj) == expected(obj)


def test_floats_as_repr_writes_them():
    for x in (0.1, 1 / 3, 1e22, 1e-5, 123456789012345680.0, -0.0, math.pi, 2.0**-1074):
        assert _io.json_line(x) == (repr(x) + "\n").encode()
    assert _io.json_line([math.inf, -math.inf, math.nan]) == b"[Infinity, -Infinity, NaN]\n"


# --------------------------------------------------------------------------- reading

needs_reader = pytest.mark.skipif(
    _jsonl is None, reason="_jsonl is not compiled (pure-Python install): json.loads reads every line")


def agrees(data: bytes) -> None:
    """``_jsonl.loads`` gives what ``json.loads`` gives for the UTF-8 text of ``data``
    (value or error) and the reader alone either gives the same value or leaves the
    input to json."""
    want = outcome(_io.loads_utf8, data)
    got = outcome(_jsonl.loads, data)
    if want[0] == "value":
        assert got[0] == "value" and same(got[1], want[1]), (data, got, want)
        alone = _jsonl._read(data)
        if alone is not None:
            assert same(alone, want[1]), (data, alone, want)
    else:
        assert got == want, (data, got, want)
        assert _jsonl._read(data) is None, data


@st.composite
def json_documents(draw) -> bytes:
    value = draw(values)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 0, 2])),
                      separators=draw(st.sampled_from([None, (",", ":"), (" , ", " :\t")])))
    pad = draw(st.sampled_from(["", " ", "\n", "\r\n", "\t \n"]))
    return (pad + text + pad).encode("utf-8", "surrogatepass")


@needs_reader
@given(json_documents())
@settings(max_examples=3000, **_settings)
def test_reader_reads_what_json_reads(data):
    agrees(data)
    assert _jsonl._read(data) is not None or b"null" == data.strip() or \
        data.strip().count(b"[") + data.strip().count(b"{") > _jsonl.MAX_READ_DEPTH


# bytes that matter to the grammar and to UTF-8, and some that do not
_BYTES = [bytes([b]) for b in b'{}[]",:\\/ \t\n\r0123456789.eE+-abfnrtuINaly'] + [
    b"\x00", b"\x1f", b"\x7f", b"\x80", b"\xbf", b"\xc0", b"\xc2", b"\xe0", b"\xed", b"\xa0",
    b"\xf0", b"\xf4", b"\x90", b"\xf5", b"\xff", b"\xef\xbb\xbf", "é".encode(), "😀".encode(),
    b"\\u", b"\\ud83d", b"\\ude00", b"\\ud800", b"\\u00e9",
]


@needs_reader
@given(json_documents(), st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(_BYTES),
                                            st.integers(0, 2)), min_size=1, max_size=4))
@settings(max_examples=3000, **_settings)
def test_reader_on_mutated_documents(data, edits):
    buf = bytearray(data)
    for pos, piece, how in edits:
        pos %= len(buf) + 1
        if how == 0:
            buf[pos:pos] = piece                       # insert
        elif how == 1:
            buf[pos:pos + len(piece)] = piece          # overwrite
        else:
            del buf[pos:pos + 1]                       # delete
    agrees(bytes(buf))


@needs_reader
@pytest.mark.parametrize("data", [
    b"", b" ", b"\n", b"null", b"true", b"false", b"NaN", b"Infinity", b"-Infinity", b"-",
    b"0", b"-0", b"01", b"1.", b".5", b"1e", b"1e+", b"1E-5", b"1.5e308", b"1e400", b"-1e400",
    b"123456789012345678", b"1234567890123456789", b"-9223372036854775808",
    b"9" * 4300, b"9" * 4301, b"0." + b"1" * 400, b"1" * 500 + b".5",
    b'""', b'"\\"', b'"\\x"', b'"\\u12"', b'"\\u12G4"', b'"\\uD83D\\uDE00"', b'"\\ud83d\\ude00"',
    b'"\\ud800"', b'"\\ud800\\u0041"', b'"\\ud800\\ud800"', b'"\\udc00\\ud800"', b'"\\ud800\\u"',
    b'"\\ud800\\uzzzz"', b'"\\ud800\\', b'"a\x00b"', b'"a\x1fb"', b'"a\x7fb"', b'"\t"', b'"\\/"',
    b'"\xc3\xa9"', b'"\xc3"', b'"\xc3\x28"', b'"\xc0\xaf"', b'"\xe0\x80\xaf"', b'"\xe0\xa0\x80"',
    b'"\xed\xa0\x80"', b'"\xed\xbf\xbf"', b'"\xed\xa0\xbd\xed\xb8\x80"', b'"\xef\xbf\xbf"',
    b'"\xf0\x8f\xbf\xbf"', b'"\xf0\x90\x80\x80"', b'"\xf4\x8f\xbf\xbf"', b'"\xf4\x90\x80\x80"',
    b'"\xf5\x80\x80\x80"', b'"\xff"', b'"\x80"', b'"\xe2\x82"', b'"\xf0\x9f\x98"',
    b"\xef\xbb\xbf{}", b'\xef\xbb\xbf"x"', b"\xff\xfe{\x00}\x00", b"{\x00}\x00", b'"\x00x\x00"',
    b"[1,]", b"[,1]", b"[1 2]", b'{"a" 1}', b'{"a":1,}', b'{1: 2}', b'{"a":1 "b":2}',
    b"[] []", b"[]x", b"[1]\x0b", b"\x0c[1]", b"[\xa0]", b"tru", b"nul", b"nan", b"infinity",
    b'{"a": 1, "a": 2}', b'{"k": {"k": {"k": 1}}}', b"[" * 99 + b"]" * 99, b"[" * 100 + b"]" * 100,
    b"[" * 101 + b"]" * 101, b"[" * 1500 + b"]" * 1500, b'{"a":' * 120 + b"1" + b"}" * 120,
])
def test_reader_edge_cases(data):
    agrees(data)


@needs_reader
def test_reader_shares_key_objects_as_json_does():
    value = _jsonl.loads(b'[{"role": "user", "content": "a"}, {"role": "x", "content": "b"}]')
    (k1, k2), (k3, k4) = value[0], value[1]
    assert k1 is k3 and k2 is k4
    assert _jsonl.loads("[1]") == [1]          # str input: json.loads
    assert _jsonl.loads(bytearray(b"[1]")) == [1]


def test_json_loads_of_io_is_json_loads():
    assert _io.json_loads(b'{"a": [1, "\\u00e9"]}') == {"a": [1, "é"]}
    with pytest.raises(json.JSONDecodeError) as info:
        _io.json_loads(b'{"a": }')
    assert info.value.colno == 7


@given(json_documents())
@settings(max_examples=500, **_settings)
def test_loads_utf8_is_json_loads_of_utf8(data):
    """On UTF-8 (what the generated documents are) the reference is json.loads itself."""
    want = outcome(json.loads, data)
    for got in (outcome(_io.loads_utf8, data), outcome(_io.loads_utf8, b"\xef\xbb\xbf" + data)):
        assert got[0] == want[0] == "value" and same(got[1], want[1]), (data, got, want)


@pytest.mark.parametrize("loads", [_io.json_loads, _io.loads_utf8])
@pytest.mark.parametrize("data, error", [
    # json.loads(bytes) took these for UTF-16/32: "truncated data" at byte 13, or an
    # "Unterminated string" for the NUL, instead of the UTF-8 error at its byte
    (b'\xff\xfe"bad utf8"\n', "invalid UTF-8 at byte 1: invalid start byte"),
    (b'\xfe\xff"x"', "invalid UTF-8 at byte 1: invalid start byte"),
    (b'"\x00"\n', "invalid JSON at column 2: Invalid control character '\\x00' in a string"),
    (b'{\x00}', "invalid JSON at column 2: Expecting property name enclosed in double quotes"),
    (b'\x00\x00\x00[', "invalid JSON at column 1: Expecting value"),
    # a BOM counts in the byte position
    (b'\xef\xbb\xbf"x\xff"', "invalid UTF-8 at byte 6: invalid start byte"),
])
def test_a_line_is_utf8_whatever_its_first_bytes(loads, data, error):
    with pytest.raises(ValueError) as info:
        loads(data)
    assert _io.json_error_reason(info.value) == error


def _at_depth(frames, f):
    """``f()`` called from ``frames`` more frames down the stack."""
    return f() if frames == 0 else _at_depth(frames - 1, f)


@pytest.mark.parametrize("loads", [_io.json_loads, _io.loads_utf8])
def test_nesting_limit_whatever_the_callers_stack(loads):
    """Lines are read to MAX_NESTING levels and no deeper, however deep the caller's
    stack is (json.loads alone reads as deep as the recursion limit lets it from where
    it is called, which made ``--jobs`` workers reject lines one process read)."""
    limit = _io.MAX_NESTING
    ok = b'{"x": ' + b"[" * (limit - 1) + b"]" * (limit - 1) + b"}"
    deep = b"\xef\xbb\xbf [" + b"[" * limit + b"]" * limit + b"]"
    recursion_limit = sys.getrecursionlimit()
    for frames in (0, 300, 800):  # (800 frames and 256 levels: past the default limit)
        assert same(_at_depth(frames, lambda: loads(ok)), json.loads(ok))
        with pytest.raises(_io.NestingError) as info:
            _at_depth(frames, lambda: loads(deep))
        assert _io.json_error_reason(info.value) == (
            f"invalid JSON at column {limit + 2}: nested deeper than {limit} levels")
    assert sys.getrecursionlimit() == recursion_limit  # (raised for a moment, then restored)
    # json's own error when it comes first; brackets in strings and side by side are no nesting
    with pytest.raises(json.JSONDecodeError) as info:
        loads(b'[1 2, ' + deep)
    assert _io.json_error_reason(info.value) == "invalid JSON at column 4: Expecting ',' delimiter"
    with pytest.raises(_io.NestingError):
        loads(b"[" * (limit + 1) + b"1 2")  # (json's error comes after the depth)
    for text in (b'["' + b"[" * 1000 + b'"]', b'["\\\\"' + b", []" * 1000 + b"]",
                 b"[" + b"[[]], " * 1000 + b"[]]"):
        assert same(loads(text), json.loads(text))
    with pytest.raises(json.JSONDecodeError):
        loads(b'["\\' + b"[" * 1000)  # (a string: a bad escape, then cut off)


@pytest.mark.parametrize("wide", ["", "é", "€", "😀"])
@pytest.mark.parametrize("special", ['"', "\\", "\n", "\x01", "é", "€", "😀", "\x7f"])
def test_every_position_of_a_special_character(wide, special):
    """The 16/8/4-characters-a-step runs end exactly at the character that needs work,
    wherever it falls in a step, in strings of every width, written and read back."""
    for n in range(0, 41):
        for k in range(n + 1):
            text = wide + "a" * k + special + "b" * (n - k)
            line = _io.json_line(text)
            assert line == expected(text), (wide, special, n, k)
            assert _io.json_loads(line) == text


# Text the way most of the world writes it: runs of 2-, 3- and 4-byte UTF-8 characters
# between spaces and punctuation, which the reader's and writer's SIMD steps take 16
# bytes (8 or 4 characters) at a time; runs long enough to cross several steps.
_SCRIPTS = {
    "latin-1": "Grüße aus Zürich, schöne Bücher über Käse. ",
    "cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
    "cjk": "我能吞下玻璃而不伤身体。这是一个测试句子。",
    "devanagari": "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती। ",
    "emoji": "Hello 😀 world 🎉 party 🇨🇭 ",
}
_ODD = ['"', "\\", "\n", "\x01", "\x1f", "/", "\x7f", "\u2028", "é", "Ā", "€", "😀", "\ud800", "\udfff",
        # the limits of the UTF-8 lengths
        "\x80", "\xff", "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff"]


@pytest.mark.parametrize("script", sorted(_SCRIPTS))
def test_text_of_every_script_with_a_special_character_anywhere(script):
    """Each character that needs work (an escape, a lone surrogate, a wider character)
    at every position of 0-70 characters of a script, written and read back; and the
    string followed, within the same 16 bytes, by a string of another width, whose
    bytes must not decide the first one's width."""
    base = (_SCRIPTS[script] * 3)[:70]
    for special in _ODD:
        for k in range(0, 71, 1 if special in '"\\\n\ud800' else 3):
            text = base[:k] + special + base[k:]
            line = _io.json_line(text)
            assert line == expected(text), (script, special, k)
            if _jsonl is not None:
                agrees(line)
                agrees(_io.json_line([text[:k], "😀", text[k:], "a"]))
                agrees(_io.json_line({text[:k]: "é", "k": base[:k % 17]}))


@pytest.mark.parametrize("script", sorted(_SCRIPTS))
def test_long_text_of_every_script(script):
    """Strings of 0.1 M characters: past the writer's lane counters' flush (every
    65,536 characters for 2 bytes, 32,768 for 4) and many read steps."""
    text = (_SCRIPTS[script] * (100_000 // len(_SCRIPTS[script]) + 1))[:100_000]
    for t in (text, text + "\n", "\t" + text, text + "\ud800", "😀" + text):
        line = _io.json_line({"content": t})
        assert line == expected({"content": t})
        if _jsonl is not None:
            agrees(line)


@needs_reader
@pytest.mark.parametrize("script", sorted(_SCRIPTS))
def test_broken_utf8_anywhere_in_text_of_every_script(script):
    """A truncated sequence, a stray continuation byte, an overlong form or a byte that
    is never UTF-8, at every byte of a string of a script: json.loads's error."""
    raw = ('"' + (_SCRIPTS[script] * 2)[:40] + '"').encode()
    for bad in (b"\x80", b"\xbf", b"\xc0\xaf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xf5", b"\xff",
                b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xed\xa0\x80"):
        for k in range(1, len(raw)):
            agrees(raw[:k] + bad + raw[k:])
            agrees(b"[" + raw[:k] + bad + raw[k:] + b', "\xc3\xa9"]')


@given(st.text(st.sampled_from("".join(_SCRIPTS.values()) + "".join(_ODD)), max_size=300))
@settings(max_examples=1500, **_settings)
def test_mixed_script_text_both_ways(text):
    line = _io.json_line({"role": "user", "content": text})
    assert line == expected({"role": "user", "content": text})
    if _jsonl is not None:
        agrees(line)
        agrees(line.rstrip(b"\n") + b" ")


@pytest.mark.skipif(not hasattr(sys, "get_int_max_str_digits"), reason="no int digit limit")
@pytest.mark.parametrize("loads", [_io.json_loads, _io.loads_utf8])
def test_an_integer_over_the_digit_limit_is_located(loads):
    """A valid line whose integer has more digits than Python's int() converts: the
    reason says so, where (the column json's own errors would count), and how to lift
    the limit (a shell user cannot call sys.set_int_max_str_digits). Digits in a
    string, in a fraction or with an exponent are not that integer."""
    limit = sys.get_int_max_str_digits()
    big = "9" * (limit + 1)
    text = '{"s": "' + big + '", "f": ' + big + '.5, "e": ' + big + 'e1, "n": [-' + big + "]}"
    column = text.index("[-") + 2
    for line in (text, text.encode(), b"\xef\xbb\xbf" + text.encode() + b"\n"):
        with pytest.raises(ValueError) as info:
            loads(line)
        assert _io.json_error_reason(info.value, line) == (
            f"unreadable JSON at column {column}: an integer of {limit + 1} digits, more than "
            f"the {limit} Python converts (PYTHONINTMAXSTRDIGITS=0 in the environment, or "
            f"sys.set_int_max_str_digits(0), lifts the limit)")
    # without the line: no column, the same advice
    assert _io.json_error_reason(info.value) == (
        f"unreadable JSON: an integer of more than the {limit} digits Python converts "
        f"(PYTHONINTMAXSTRDIGITS=0 in the environment, or sys.set_int_max_str_digits(0), "
        f"lifts the limit)")
    assert loads(text.replace("[-" + big, "[-" + big[1:])) is not None   # (at the limit: read)
