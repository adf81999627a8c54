"""Lexer properties on generated input (hypothesis): Cython scanner == pure-Python
twin == naive specification; str lexing == bytes lexing after converting offsets;
UTF-8 strictness == ``bytes.decode('utf-8')``; random chunkings == one-shot lexing.

``APERTUS_LEXER_EXAMPLES`` sets the number of examples per property (default 300;
CI can raise it). The atheris harness ``fuzz/fuzz_lexer.py`` covers the same ground
for longer runs.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apertus_fast import _lex
from apertus_fast._dialects import DIALECTS, TOKEN_TEXT, foreign_tokens
from apertus_fast._errors import ParseError
from apertus_fast._lex import Lexer, lex

from .test_lexer import NOT_COMPILED, check_tiling, naive_lex

EXAMPLES = int(os.environ.get("APERTUS_LEXER_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HAVE_C = _lex._lexer_c is not None
needs_c = pytest.mark.skipif(not HAVE_C, reason=NOT_COMPILED)
BACKENDS = [pytest.param("cython", marks=needs_c), "python"]

SPELLINGS = sorted(TOKEN_TEXT.values())
LOOK_ALIKES = ["<|User_start|>", "<|user_start|", "<| user_start|>", "<|user_start |>", "<s >",
               "< s>", "</s>", "<think", "</think", "<|", "|>", "<<", "<|>", "<||>", "<|image",
               "<|tool_output_", "<|tools_", "<|inner_", "<|assistant_end|", "<thinkk>"]

dialects = st.sampled_from(sorted(DIALECTS))
token_prefix = st.sampled_from(SPELLINGS).flatmap(
    lambda s: st.integers(1, len(s)).map(lambda i: s[:i]))
token_suffix = st.sampled_from(SPELLINGS).flatmap(
    lambda s: st.integers(0, len(s) - 1).map(lambda i: s[i:]))
# text from each PEP 393 kind: ASCII/latin-1, BMP, astral (no surrogates: they must
# encode to UTF-8 for the str-vs-bytes comparison; lone surrogates get their own test)
latin1 = st.text(st.characters(max_codepoint=0xFF), max_size=8)
bmp = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=8)
astral = st.text(st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF), max_size=3)
fragment = st.one_of(
    st.sampled_from(SPELLINGS), token_prefix, token_suffix, st.sampled_from(LOOK_ALIKES),
    latin1, bmp, astral, st.sampled_from(["<", "|", ">", "s", "\n", "<s>", "é", "€", "😀"]))
texts = st.lists(fragment, max_size=25).map("".join)
any_text = st.one_of(texts, st.text(max_size=60), st.lists(st.one_of(fragment, st.text(max_size=5)),
                                                           max_size=15).map("".join))


def tuples(events):
    return [tuple(e) for e in events]


def outcome(fn, *args, **kw):
    """Events, or the (offset, line, column, found) of the ParseError."""
    try:
        return tuples(fn(*args, **kw))
    except ParseError as e:
        return ("error", e.offset, e.line, e.column, e.found)


def char_to_byte_offsets(text):
    out = [0]
    for ch in text:
        out.append(out[-1] + len(ch.encode("utf-8", "surrogatepass")))
    return out


def chunked(data, cuts):
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for c in cuts + [len(data)]:
        pieces.append(data[last:c])
        last = c
    return pieces


# --------------------------------------------------------------------------- str

@SETTINGS
@given(text=any_text, dialect=dialects)
def test_str_matches_spec_and_both_backends(text, dialect):
    expected = naive_lex(text, dialect)
    for backend in (["cython"] if HAVE_C else []) + ["python"]:
        events = lex(text, dialect, backend=backend)
        assert tuples(events) == expected
        check_tiling(events, len(text))


@needs_c
@SETTINGS
@given(text=st.text(max_size=80), data=st.data(), dialect=dialects)
def test_cython_equals_python_on_any_str(text, data, dialect):
    # including lone surrogates and every kind of code point
    if text and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(text)))
        text = text[:i] + data.draw(st.sampled_from(SPELLINGS + LOOK_ALIKES)) + text[i:]
    assert tuples(lex(text, dialect, backend="cython")) == tuples(lex(text, dialect, backend="python"))


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(text=any_text, dialect=dialects, as_bytes=st.booleans(), final=st.booleans())
def test_foreign_tokens_are_text_and_the_first_is_located(backend, text, dialect, as_bytes, final):
    """With a dialect's table that notes the other dialects' tokens (``parse`` scans
    with it), the events are those of the plain table, the compiled scanner and the
    twin agree, and ``foreign_at`` is where the first foreign spelling starts: no
    spelling contains a ``<`` after its first character, so none hides in another."""
    core = _lex._core_for(backend)
    d = DIALECTS[dialect]
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    got = core.scan_chunk(_lex._table(core, d, True), data, 0, 0, None, final)
    want = core.scan_chunk(_lex._table(core, d), data, 0, 0, None, final)
    foreign = foreign_tokens(d)
    places = [data.find(f.encode() if as_bytes else f) for f in foreign]
    first = min((p for p in places if p >= 0), default=-1)
    if got[3] >= 0:   # (invalid UTF-8: no events, nothing located)
        assert got[:5] == want[:5] and got[5] == -1
        return
    assert list(got[0]) == list(want[0]) and got[2:5] == want[2:5] and got[5] == first
    if final:
        assert got[1] == want[1]
    else:   # a foreign spelling's prefix at the end is held back as a token's is
        assert got[1] <= want[1]
    if HAVE_C and backend == "python":
        other = _lex._core_for("cython")
        assert tuple(other.scan_chunk(_lex._table(other, d, True), data, 0, 0, None, final))[1:] \
            == tuple(got[1:])
        assert list(other.scan_chunk(_lex._table(other, d, True), data, 0, 0, None, final)[0]) \
            == list(got[0])


@SETTINGS
@given(text=texts, dialect=dialects)
def test_str_and_bytes_agree(text, dialect):
    offsets = char_to_byte_offsets(text)
    raw = text.encode()
    for backend in (["cython"] if HAVE_C else []) + ["python"]:
        via_str = [(k, offsets[s], offsets[e]) for k, s, e in tuples(lex(text, dialect, backend=backend))]
        assert tuples(lex(raw, dialect, backend=backend)) == via_str
        assert tuples(lex(bytearray(raw), dialect, backend=backend)) == via_str
        assert tuples(lex(memoryview(raw), dialect, backend=backend)) == via_str


# --------------------------------------------------------------------------- bytes

def utf8_outcome_matches_python(raw, dialect, backend):
    try:
        raw.decode("utf-8")
        py_error = None
    except UnicodeDecodeError as e:
        py_error = e
    try:
        events = lex(raw, dialect, backend=backend)
    except ParseError as e:
        assert py_error is not None, "valid UTF-8 rejected"
        assert e.offset == py_error.start
        assert e.found.startswith(py_error.reason + ":")
        assert e.line == raw[:e.offset].count(b"\n") + 1
        return ("error", e.offset, e.found)
    assert py_error is None, f"invalid UTF-8 accepted: {py_error}"
    assert tuples(events) == naive_lex(raw, dialect)
    return tuples(events)


# bytes mixing raw garbage with token spellings and valid UTF-8 (so that errors can
# come after tokens, inside text runs, at the end, across validation blocks...)
byte_fragment = st.one_of(
    st.binary(max_size=6), st.sampled_from([s.encode() for s in SPELLINGS + LOOK_ALIKES]),
    fragment.map(lambda s: s.encode()),
    st.sampled_from([b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                     b"\xf0\x9f\x98", b"\xe2\x82", b"\xc2", b"\xf8", b"\xff", b"\x80"]))
mixed_bytes = st.lists(byte_fragment, max_size=20).map(b"".join)


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(raw=st.one_of(st.binary(max_size=64), mixed_bytes), dialect=dialects)
def test_bytes_strictness_like_python(backend, raw, dialect):
    utf8_outcome_matches_python(raw, dialect, backend)


@needs_c
@SETTINGS
@given(raw=st.one_of(st.binary(max_size=64), mixed_bytes), dialect=dialects)
def test_bytes_cython_equals_python(raw, dialect):
    assert outcome(lex, raw, dialect, backend="cython") == outcome(lex, raw, dialect, backend="python")


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(text=texts, dialect=dialects, edits=st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
    min_size=1, max_size=4), pad=st.integers(0, 9000))
def test_mutated_valid_bytes(backend, text, dialect, edits, pad):
    raw = bytearray(("x" * pad + text).encode())
    for where, value, op in edits:
        where %= len(raw) + 1
        if op == "insert":
            raw[where:where] = bytes([value])
        elif where < len(raw):
            if op == "set":
                raw[where] = value
            else:
                del raw[where]
    utf8_outcome_matches_python(bytes(raw), dialect, backend)
    if HAVE_C:
        assert outcome(lex, bytes(raw), dialect, backend="cython") == \
            outcome(lex, bytes(raw), dialect, backend="python")


# --------------------------------------------------------------------------- streaming

def stream(pieces, dialect, backend):
    """Feed the pieces; check the streaming invariants on the way; all events."""
    whole = pieces[0][:0].join(pieces) if pieces else ""
    lx = Lexer(dialect, backend=backend)
    events = []
    emitted_to = 0

    def take(new):
        nonlocal emitted_to
        for ev in new:
            assert ev.start == emitted_to
            emitted_to = ev.end
            assert lx.text(ev.start, ev.end) == whole[ev.start:ev.end]
        return new

    for piece in pieces:
        events += take(lx.feed(piece))
        start, end = lx.pending_span()
        # pending text starts where emitted events end and lies within what was fed
        assert start == emitted_to and start <= end <= lx.offset
        assert lx.offset - end <= 32  # only a short tail is ever held back
        assert lx.pending_text() == whole[start:end]
    events += take(lx.close())
    return events


def stream_pending_texts(pieces, dialect, backend, whole):
    lx = Lexer(dialect, backend=backend)
    for piece in pieces:
        lx.feed(piece)
        start, end = lx.pending_span()
        assert lx.pending_text() == whole[start:end]
        mid = (start + end) // 2
        assert lx.pending_text(mid) == whole[mid:end]


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(text=texts, dialect=dialects, cuts=st.lists(st.integers(0, 10**6), max_size=12),
       as_bytes=st.booleans())
def test_random_chunking_equals_one_shot(backend, text, dialect, cuts, as_bytes):
    data = text.encode() if as_bytes else text
    pieces = chunked(data, cuts)
    assert tuples(stream(pieces, dialect, backend)) == tuples(lex(data, dialect, backend=backend))
    stream_pending_texts(pieces, dialect, backend, data)


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(text=texts, dialect=dialects, as_bytes=st.booleans())
def test_one_item_chunks_equal_one_shot(backend, text, dialect, as_bytes):
    data = text.encode() if as_bytes else text
    pieces = [data[i:i + 1] for i in range(len(data))]
    assert tuples(stream(pieces, dialect, backend)) == tuples(lex(data, dialect, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(raw=mixed_bytes, dialect=dialects, cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_chunked_bytes_errors_equal_one_shot(backend, raw, dialect, cuts):
    # the same events, or the same error (offset, line, column, what was found)
    assert outcome(stream, chunked(raw, cuts), dialect, backend) == \
        outcome(lex, raw, dialect, backend=backend)


@needs_c
@SETTINGS
@given(text=st.text(max_size=40), dialect=dialects, cuts=st.lists(st.integers(0, 10**6), max_size=6))
def test_chunked_str_cython_equals_python(text, dialect, cuts):
    pieces = chunked(text, cuts)
    assert tuples(stream(pieces, dialect, "cython")) == tuples(stream(pieces, dialect, "python"))
