"""Lexer: examples, the event model, UTF-8 strictness, streaming, and exhaustive
checks of partial tokens. Properties on random input are in ``test_lexer_fuzz.py``.

Every check runs on both scanners (``backend="cython"`` and ``"python"``) where the
extension is compiled; without it the Cython runs are skipped with a reason.
"""

from __future__ import annotations

import array
import itertools

import pytest

from apertus_fast import _lex
from apertus_fast._dialects import DIALECTS, TOKEN_TEXT, Kind, get_dialect
from apertus_fast._errors import ParseError
from apertus_fast._lex import LEXER_BACKEND, Event, Lexer, lex, scan

from .oracle import ORACLE_MISSING, oracle_render

NOT_COMPILED = ("apertus_fast._lexer is not compiled (cythonize -i -3 src/apertus_fast/_lexer.pyx); "
                "Cython scanner not tested")
BACKENDS = [
    pytest.param("cython", marks=pytest.mark.skipif(_lex._lexer_c is None, reason=NOT_COMPILED)),
    "python",
]
DIALECT_NAMES = sorted(DIALECTS)
T = Kind.TEXT


def naive_lex(data, dialect="apertus-format-reference"):
    """The specification, as directly as possible (a third implementation)."""
    d = get_dialect(dialect)
    if not isinstance(data, str):
        data = bytes(data)
        data.decode("utf-8")  # raises where the lexer must
        tokens = [(s.encode(), k) for s, k in d.tokens.items()]
    else:
        tokens = list(d.tokens.items())
    out, run, i = [], 0, 0
    while i < len(data):
        for spelling, kind in tokens:
            if (kind != Kind.BOS or i == 0) and data.startswith(spelling, i):
                if run < i:
                    out.append((T, run, i))
                out.append((kind, i, i + len(spelling)))
                i = run = i + len(spelling)
                break
        else:
            i += 1
    if run < len(data):
        out.append((T, run, len(data)))
    return out


def check_tiling(events, n):
    pos = 0
    for ev in events:
        assert isinstance(ev, Event) and isinstance(ev.kind, Kind)
        assert ev.start == pos and ev.end > ev.start
        pos = ev.end
    assert pos == n
    for a, b in zip(events, events[1:]):
        assert not (a.kind == T and b.kind == T), "text runs must be maximal"


def kinds(events):
    return [e.kind for e in events]


# --------------------------------------------------------------------------- examples

@pytest.mark.parametrize("backend", BACKENDS)
def test_example_reference(backend):
    text = "<s><|system_start|>Be brief.<|system_end|><|user_start|>Hi <b>x</b><|user_end|>"
    events = lex(text, backend=backend)
    assert events == [
        Event(Kind.BOS, 0, 3),
        Event(Kind.SYSTEM_START, 3, 19),
        Event(T, 19, 28),
        Event(Kind.SYSTEM_END, 28, 42),
        Event(Kind.USER_START, 42, 56),
        Event(T, 56, 67),
        Event(Kind.USER_END, 67, 79),
    ]
    assert [text[e.start:e.end] for e in events][5] == "Hi <b>x</b>"
    assert lex(text.encode(), backend=backend) == events  # ASCII: same offsets


@pytest.mark.parametrize("backend", BACKENDS)
def test_bos_only_at_offset_zero(backend):
    assert lex("<s>a<s>b</s>", backend=backend) == [Event(Kind.BOS, 0, 3), Event(T, 3, 12)]
    assert lex("x<s>", backend=backend) == [Event(T, 0, 4)]
    assert lex("<s><s>", backend=backend) == [Event(Kind.BOS, 0, 3), Event(T, 3, 6)]
    assert lex("<s", backend=backend) == [Event(T, 0, 2)]
    assert lex("", backend=backend) == []
    assert lex(b"", backend=backend) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_every_token_of_every_dialect(backend, dialect):
    d = get_dialect(dialect)
    for kind, spelling in TOKEN_TEXT.items():
        text = "a" + spelling + "b" if kind != Kind.BOS else spelling + "b"
        for data in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
            events = lex(data, dialect, backend=backend)
            if kind in d.token_kinds:
                assert kind in kinds(events), (dialect, spelling)
                tok = next(e for e in events if e.kind == kind)
                assert text[tok.start:tok.end] == spelling
            else:  # another dialect's spelling is plain text here
                assert kinds(events) == [T], (dialect, spelling)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dialect_specific_tokens(backend):
    text = "<|image|><|audio|><think>t</think><|tool_output_start|>o<|tool_output_end|>"
    assert kinds(lex(text, "apertus-format-reference", backend=backend)) == [T]
    assert kinds(lex(text, "apertus-1", backend=backend)) == [Kind.IMAGE, T]
    assert kinds(lex(text, "apertus-1.5", backend=backend)) == [
        Kind.IMAGE, Kind.AUDIO, Kind.THINK_START, T, Kind.THINK_END,
        Kind.TOOL_OUTPUT_START, T, Kind.TOOL_OUTPUT_END]


@pytest.mark.parametrize("backend", BACKENDS)
def test_look_alikes_are_text(backend):
    for text in ["<|User_start|>", "<|user_start|", "<| user_start|>", "<|user_start |>",
                 "<||user_start|>", "|user_start|>", "<|user_startt|>", "< |user_start|>",
                 "<|user_end|\n>", "<|assistant|>", "<|user_start\u00e9|>", "<|user_start|\u200b>",
                 "＜|user_start|>", "<|user_ｓtart|>", "<think >", "<THINK>", "< s>", "<S>"]:
        assert kinds(lex(text, "apertus-1.5", backend=backend)) == [T], text
        assert kinds(lex(text.encode(), "apertus-1.5", backend=backend)) == [T], text


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_starts(backend):
    text = "<|<|user_start|><<|user_end|>|>"
    assert lex(text, backend=backend) == [
        Event(T, 0, 2), Event(Kind.USER_START, 2, 16), Event(T, 16, 17),
        Event(Kind.USER_END, 17, 29), Event(T, 29, 31)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unicode_kinds_offsets_are_code_points(backend):
    for filler in ["é", "€", "😀", "\x00", "\ud800"]:  # latin-1, BMP, astral, NUL, lone surrogate
        text = filler + "<|user_start|>" + filler * 3 + "<|user_end|>" + filler
        events = lex(text, backend=backend)
        assert events == [Event(T, 0, 1), Event(Kind.USER_START, 1, 15), Event(T, 15, 18),
                          Event(Kind.USER_END, 18, 30), Event(T, 30, 31)]
        if filler != "\ud800":
            raw = text.encode()
            w = len(filler.encode())
            assert lex(raw, backend=backend) == [
                Event(T, 0, w), Event(Kind.USER_START, w, w + 14), Event(T, w + 14, 4 * w + 14),
                Event(Kind.USER_END, 4 * w + 14, 4 * w + 26), Event(T, 4 * w + 26, 5 * w + 26)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_wide_chars_that_truncate_to_ascii_are_not_tokens(backend):
    # U+013C ('ļ') and U+0F3C have low byte 0x3C ('<'); U+017C has low byte '|'.
    for text in ["\u013c|user_start|>", "\u0f3c|user_start|>", "<\u017cuser_start|>",
                 "<|user_start\u017c>", "\U0001003c|user_start|>", "<|\U00010075ser_start|>"]:
        assert kinds(lex(text, backend=backend)) == [T], ascii(text)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("filler", ["a", "é", "€", "😀", "\u013c", "\U0001003c"],
                         ids=["ascii", "latin-1", "bmp", "astral", "bmp-low-3c", "astral-low-3c"])
def test_next_lt_found_at_every_position(backend, filler):
    # the search for '<' steps over blocks of characters (16 at a time for 2- and
    # 4-byte strings): a token, a lone '<' or both at every offset around the block
    # edges, up to the end of the text (a search that stops early only costs a failed
    # match; one that stops late or skips loses a token)
    for n in (0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 64):
        for p in range(n + 1):
            for piece in ("<|user_end|>", "<", "<<|user_end|>"):
                text = filler * p + piece + filler * (n - p)
                assert lex(text, backend=backend) == [Event(*e) for e in naive_lex(text)], \
                    (ascii(filler), n, p, piece)


@pytest.mark.parametrize("backend", BACKENDS)
def test_str_subclass_and_memoryview_formats(backend):
    class S(str):
        pass

    assert lex(S("<s>x"), backend=backend) == [Event(Kind.BOS, 0, 3), Event(T, 3, 4)]
    raw = "<s>ab<|user_end|>cd".encode()   # 19 bytes; as uint8 array and as a 2-D view
    mv = memoryview(array.array("B", raw))
    assert lex(mv, backend=backend) == lex(raw, backend=backend)
    even = raw + b" "  # 20 bytes: view as 10 uint16 items; offsets stay in bytes
    assert lex(memoryview(even).cast("H"), backend=backend) == lex(even, backend=backend)
    assert lex(memoryview(raw * 2)[::2], backend=backend) == lex((raw * 2)[::2], backend=backend)
    # empty views of any shape are empty input (cast("B") refuses a zero in the shape)
    import ctypes

    for empty in (memoryview((ctypes.c_uint8 * 0 * 3)()), memoryview((ctypes.c_uint16 * 5 * 0)()),
                  memoryview(array.array("H"))):
        assert lex(empty, backend=backend) == []
        lx = Lexer(backend=backend)
        assert lx.feed(empty) == [] and lx.close() == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("length", [0, 1, 10**6])
def test_a_str_subclass_is_lexed_by_its_characters(backend, length):
    """The audit (E7): a str subclass with its own ``__len__`` was lexed to that length
    by the pure-Python scanner (one event, or none) and broke ``Lexer.feed`` (an
    internal ValueError), where the compiled one read the characters, as parse does."""
    class S(str):
        def __len__(self):
            return length

    text = "<s><|user_start|>hi<|user_end|><|assistant_start|>ok<|assistant_end|>"
    expected = lex(text, backend=backend)
    assert len(expected) == 7
    assert lex(S(text), backend=backend) == expected
    lx = Lexer(backend=backend)
    events = lx.feed(S(text[:20]))
    events += lx.feed(S(text[20:]))
    assert type(lx.pending_text()) is str
    assert events + lx.close() == expected


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [None, 1, 1.0, ["<s>"], array.array("b", b"ab"), object()])
def test_type_errors(backend, bad):
    with pytest.raises(TypeError):
        lex(bad, backend=backend)
    with pytest.raises(TypeError):
        scan(bad, backend=backend)
    with pytest.raises(TypeError):
        Lexer(backend=backend).feed(bad)


def test_unknown_dialect_and_backend():
    with pytest.raises(ValueError):
        lex("x", "apertus-2")
    with pytest.raises(ValueError):
        lex("x", backend="rust")


def test_backend_flag():
    assert LEXER_BACKEND == ("cython" if _lex._lexer_c is not None else "python")
    if LEXER_BACKEND == "python":
        pytest.skip(NOT_COMPILED)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_buffer(backend):
    buf = scan("<s>hi<|user_end|>", backend=backend)
    assert isinstance(buf, array.array) and buf.typecode == "q"
    assert list(buf) == [1, 0, 3, 0, 3, 5, int(Kind.USER_END), 5, 17]


@pytest.mark.skipif(ORACLE_MISSING is not None, reason=str(ORACLE_MISSING))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_rendered_conversation(backend, dialect):
    messages = [{"role": "user", "content": "2 < 3 and <s>old</s>"},
                {"role": "assistant", "content": "Yes."}]
    text = oracle_render(messages, dialect=dialect, add_generation_prompt=False)
    events = lex(text, dialect, backend=backend)
    check_tiling(events, len(text))
    toks = [k for k in kinds(events) if k != T]
    expected = [Kind.BOS, Kind.SYSTEM_START, Kind.SYSTEM_END, Kind.DEVELOPER_START,
                Kind.DEVELOPER_END, Kind.USER_START, Kind.USER_END, Kind.ASSISTANT_START]
    if get_dialect(dialect).closes_last_turn:
        expected.append(Kind.ASSISTANT_END)
    assert toks == expected
    user = events[kinds(events).index(Kind.USER_START) + 1]
    assert text[user.start:user.end] == "2 < 3 and <s>old</s>"


# --------------------------------------------------------------------------- UTF-8

UTF8_CASES = [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xc2\x41", b"\xc2\xc2",
    b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xe0\xa0", b"\xe0\xa0\x7f", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xed\x9f", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
    b"\xf0\x90\x80", b"\xf0\x90", b"\xf0", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf",
    b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xe2<|user_start|>",
    b"\xf0\x9f\x98<", b"\xe2\x82\xac\x80",
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", UTF8_CASES, ids=lambda b: b.hex())
@pytest.mark.parametrize("prefix", [b"", b"<s>ok\n<|user_start|>\xc3\xa9", b"x" * 5000])
def test_invalid_utf8_like_python(backend, bad, prefix):
    for tail in (b" tail", b""):
        data = prefix + bad + tail
        with pytest.raises(UnicodeDecodeError) as py:
            data.decode("utf-8")
        with pytest.raises(ParseError) as err:
            lex(data, backend=backend)
        e = err.value
        assert e.offset == py.value.start
        assert py.value.reason in e.found
        assert e.expected == "valid UTF-8"
        assert e.line == data[:e.offset].count(b"\n") + 1
        assert e.column == e.offset - data.rfind(b"\n", 0, e.offset)
        assert isinstance(e, ValueError)


@pytest.mark.parametrize("backend", BACKENDS)
def test_valid_utf8_edges(backend):
    for ch in ["\x7f", "\x80", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff",
               "\U00010000", "\U0010ffff"]:
        data = ("a" + ch * 3 + "<|user_end|>" + ch).encode()
        assert kinds(lex(data, backend=backend)) == [T, Kind.USER_END, T]


@pytest.mark.parametrize("backend", BACKENDS)
def test_invalid_utf8_far_into_large_input(backend):
    # > 64 KiB takes the scanner's GIL-free path; errors sit around validation blocks
    base = ("héllo <|user_start|>wörld<|user_end|>\n" * 3000).encode()
    for where in [0, 4095, 4096, 4097, 65535, 65536, len(base) - 1, len(base)]:
        data = base[:where] + b"\xff" + base[where:]
        with pytest.raises(ParseError) as err:
            lex(data, backend=backend)
        assert err.value.offset == where
        assert err.value.line == base[:where].count(b"\n") + 1
    assert len(lex(base, backend=backend)) == len(lex(base.decode(), backend=backend))


# --------------------------------------------------------------------------- exhaustive

def _fragments(dialect):
    """Token spellings, all their proper prefixes, and some text."""
    frags = {"a", "é", "€", "😀", "<", "|", ">", "<<"}
    for spelling in TOKEN_TEXT.values():
        n = len(spelling)
        frags.update(spelling[:i] for i in {1, 2, 3, 4, n // 2, n - 2, n - 1, n})
        frags.update((spelling[1:], spelling[n // 2:], spelling[-1:]))
    return sorted(frags)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_all_pairs_of_fragments(backend, dialect):
    """Every fragment pair (tokens, their prefixes and suffixes, text): one-shot lexing
    equals the naive specification, for str and bytes; streaming split at every
    offset equals one-shot."""
    frags = _fragments(dialect)
    for a, b in itertools.product(frags, repeat=2):
        text = a + b
        expected = naive_lex(text, dialect)
        events = lex(text, dialect, backend=backend)
        assert [tuple(e) for e in events] == expected, text
        raw = text.encode()
        assert [tuple(e) for e in lex(raw, dialect, backend=backend)] == naive_lex(raw, dialect)
        if len(text) < 30 and ("<" in a or "<" in b):
            for cut in range(len(text) + 1):
                lx = Lexer(dialect, backend=backend)
                got = lx.feed(text[:cut]) + lx.feed(text[cut:]) + lx.close()
                assert got == events, (text, cut)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_partial_tokens_at_end(backend, dialect):
    d = get_dialect(dialect)
    for spelling, kind in d.tokens.items():
        for i in range(1, len(spelling)):
            part = spelling[:i]
            for lead in ("", "x", "\n", "é"):
                if kind == Kind.BOS and lead:
                    continue
                text = lead + part
                # one-shot: a token prefix at the end is text
                assert kinds(lex(text, dialect, backend=backend)) == [T], text
                for data in (text, text.encode()):
                    lx = Lexer(dialect, backend=backend)
                    events = lx.feed(data)
                    assert events == []  # the lead text run is still open
                    start, end = lx.pending_span()
                    assert (start, end) == (0, len(data) - len(part)), (text, start, end)
                    assert lx.pending_text() == data[:end]
                    rest = spelling[i:] if isinstance(data, str) else spelling[i:].encode()
                    events = lx.feed(rest)
                    assert [e.kind for e in events] == ([T] if lead else []) + [kind]
                    assert lx.pending_span() == (len(data) + len(rest),) * 2
                    assert lx.close() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_bos_split_across_chunks(backend):
    for chunks in (["<", "s>x"], ["<s", ">x"], ["", "<", "", "s", ">", "x"]):
        lx = Lexer(backend=backend)
        got = [e for c in chunks for e in lx.feed(c)] + lx.close()
        assert got == [Event(Kind.BOS, 0, 3), Event(T, 3, 4)]
    lx = Lexer(backend=backend)
    assert lx.feed("x") == []
    assert lx.feed("<s>") == []
    assert lx.close() == [Event(T, 0, 4)]


# --------------------------------------------------------------------------- streaming

@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_example(backend):
    lx = Lexer("apertus-1.5", backend=backend)
    assert lx.feed("<|assistant_start|><th") == [Event(Kind.ASSISTANT_START, 0, 19)]
    assert lx.pending_span() == (19, 19) and lx.pending_text() == ""
    assert lx.feed("ink>Let me ") == [Event(Kind.THINK_START, 19, 26)]
    assert lx.pending_text() == "Let me "
    assert lx.feed("think.</thi") == []
    assert lx.pending_span() == (26, 39)
    assert lx.pending_text() == "Let me think."
    assert lx.pending_text(33) == "think."   # a delta since offset 33
    assert lx.pending_text(100) == "" and lx.pending_text(0) == "Let me think."
    assert lx.feed("nk>Hi") == [Event(T, 26, 39), Event(Kind.THINK_END, 39, 47)]
    assert lx.text(26, 39) == "Let me think." and lx.text(39, 47) == "</think>"
    assert lx.text(30, 49) == "me think.</think>Hi" and lx.text(40, 40) == ""
    for bad in [(0, 19), (25, 30), (30, 50), (31, 30)]:   # older than the latest events
        with pytest.raises(ValueError):
            lx.text(*bad)
    for bad in [(30.0, 40), (30, 40.5), ("30", 40)]:   # offsets are integers
        with pytest.raises(TypeError):
            lx.text(*bad)
    with pytest.raises(TypeError):
        lx.pending_text(1.5)
    assert lx.offset == 49
    assert lx.close() == [Event(T, 47, 49)]
    assert lx.text(47, 49) == "Hi" and lx.pending_text() == ""
    assert lx.closed and lx.close() == []
    with pytest.raises(ValueError):
        lx.feed("more")
    assert "closed" in repr(lx)


class _CountedList(list):
    """A list that counts the deletions made from it."""
    deletions = 0

    def __delitem__(self, index):
        type(self).deletions += 1
        super().__delitem__(index)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_run_fed_a_character_at_a_time_is_dropped_at_once(backend):
    """The lexer keeps one piece per chunk of the open text run. When the run closed,
    it dropped them one ``del pieces[0]`` at a time: quadratic for a run a model
    streamed a character at a time (200,000 characters: 4.7 s for the next feed)."""
    lx = Lexer("apertus-1.5", backend=backend)
    run = "".join(chr(ord("a") + i % 26) for i in range(3000))
    for ch in run:
        assert lx.feed(ch) == []
    assert len(lx._pieces) == len(run)   # what there is to drop
    _CountedList.deletions = 0
    lx._pieces, lx._piece_starts = _CountedList(lx._pieces), _CountedList(lx._piece_starts)
    assert lx.feed("<|user_end|>x") == [Event(T, 0, 3000), Event(Kind.USER_END, 3000, 3012)]
    assert lx.text(0, 3000) == run and lx.text(2990, 3012) == run[-10:] + "<|user_end|>"
    assert lx.feed("y") == []            # the run and its pieces are dropped now
    assert _CountedList.deletions <= 2, _CountedList.deletions
    assert lx.close() == [Event(T, 3012, 3014)] and lx.text(3012, 3014) == "xy"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [str, bytes])
def test_a_big_chunk_is_not_kept_for_a_short_open_run(backend, kind):
    """A chunk that ends in an open text run was kept whole until the run closed,
    though only the run can still be asked for (``text()`` refuses what lies before
    it): a 50 MB chunk for a run of a few characters (lexer audit). The lexer keeps
    at most twice what it must."""
    lx = Lexer("apertus-1.5", backend=backend)
    big = "x" * 200_000 + "<|user_start|>" + "tail"
    enc = (lambda t: t) if kind is str else str.encode
    assert lx.feed(enc(big)) == [Event(T, 0, 200_000), Event(Kind.USER_START, 200_000, 200_014)]
    for _ in range(3):
        assert lx.feed(enc("y")) == []
        assert sum(len(p) for p in lx._pieces) <= 2 * (lx.offset - 200_014)
        assert lx.pending_text() == enc("tail" + "y" * (_ + 1))
    assert lx.feed(enc("<|user_end|>")) == [Event(T, 200_014, 200_021),
                                            Event(Kind.USER_END, 200_021, 200_033)]
    assert lx.text(200_014, 200_033) == enc("tailyyy<|user_end|>")


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_refuses_empty_spans_outside_what_it_keeps(backend):
    """``text(a, a)`` was ``""`` for any ``a``, also far outside the stream, while a
    non-empty span there is a ValueError (lexer audit)."""
    lx = Lexer(backend=backend)
    lx.feed("hello <|user_start|>ab")
    lx.feed("<|user_end|>")
    assert lx.text(20, 20) == "" and lx.text(34, 34) == ""
    for a in (-5, 0, 19, 35, 10 ** 9):
        with pytest.raises(ValueError, match="not available"):
            lx.text(a, a)
    with pytest.raises(ValueError, match="reversed"):
        lx.text(25, 21)
    assert Lexer(backend=backend).text(0, 0) == ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_bytes_split_utf8(backend):
    text = "é€😀<|user_end|>😀"
    raw = text.encode()
    for size in range(1, 6):
        lx = Lexer(backend=backend)
        got = []
        for i in range(0, len(raw), size):
            got += lx.feed(memoryview(raw)[i:i + size])
            pend = lx.pending_text()
            pend.decode("utf-8")     # always complete characters
            start, end = lx.pending_span()
            assert pend == raw[start:end]
        got += lx.close()
        assert got == lex(raw, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_type_mixing(backend):
    lx = Lexer(backend=backend)
    lx.feed("abc")
    with pytest.raises(TypeError):
        lx.feed(b"abc")
    lx = Lexer(backend=backend)
    lx.feed(bytearray(b"abc"))
    lx.feed(memoryview(b"d"))
    with pytest.raises(TypeError):
        lx.feed("abc")
    assert lx.pending_text() == b"abcd"


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_does_not_keep_callers_buffer(backend):
    buf = bytearray(b"hello <|user_")
    lx = Lexer(backend=backend)
    lx.feed(buf)
    buf[:] = b"XXXXXXXXXXXXX"
    assert lx.feed(b"start|>") == [Event(T, 0, 6), Event(Kind.USER_START, 6, 20)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [b"\xff", b"\xe2\x28", b"\xed\xa0\x80", b"\xf0\x9f\x98"])
def test_streaming_errors_match_one_shot(backend, bad):
    data = b"<s>line one\nline <|user_start|>two\n\xc3\xa9\xc3\xa9" + bad + b"\nrest"
    with pytest.raises(ParseError) as one:
        lex(data, backend=backend)
    if bad == b"\xf0\x9f\x98":   # truncated, then "\n": invalid continuation
        assert "invalid continuation byte" in one.value.found
    for size in (1, 2, 3, 7, len(data)):
        lx = Lexer(backend=backend)
        with pytest.raises(ParseError) as err:
            for i in range(0, len(data), size):
                lx.feed(data[i:i + size])
            lx.close()
        e, o = err.value, one.value
        assert (e.offset, e.line, e.column, e.found) == (o.offset, o.line, o.column, o.found)
        assert lx.closed
        with pytest.raises(ValueError):
            lx.feed(b"x")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("second", [0xA0, 0xBF])
def test_streaming_raises_where_the_bytes_cannot_become_valid(backend, second):
    """A chunk that ends in ED A0..BF (the start of a UTF-16 surrogate) is invalid
    whatever follows: the feed that sees it raises, in both scanners. (Python's
    incremental decoder holds those two bytes back as incomplete; the twin used to
    raise only at the next feed.)"""
    lx = Lexer(backend=backend)
    assert lx.feed(b"ab\xed") == [] and lx.pending_span() == (0, 2)
    with pytest.raises(ParseError) as err:
        lx.feed(bytes([second]))
    assert (err.value.offset, err.value.found) == (2, f"invalid continuation byte: ed {second:02x}")
    assert lx.closed
    lx = Lexer(backend=backend)
    assert lx.feed(b"ab\xed\x9f") == [] and lx.pending_span() == (0, 2)   # (may still be valid)


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_truncated_at_close(backend):
    lx = Lexer(backend=backend)
    assert lx.feed(b"ab\xf0\x9f\x98") == []
    assert lx.pending_text() == b"ab" and lx.offset == 5
    with pytest.raises(ParseError) as err:
        lx.close()
    assert err.value.offset == 2 and "unexpected end of data" in err.value.found


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
@pytest.mark.parametrize("data", [
    "<s><|system_start|>sys<|system_end|><|user_start|>é😀 q<|user_end|><|assistant_start|>"
    "<|inner_prefix|>think<|inner_suffix|>answer<|assistant_end|>",
    "<s><|system_start|>sys<|system_end|><|user_start|>é😀 q<|user_end|>".encode(),
])
def test_copies_continue_independently(backend, how, data):
    # e.g. one lexer per candidate continuation of a completion (beam search)
    import copy
    import pickle

    clone = {"copy": copy.copy, "deepcopy": copy.deepcopy,
             "pickle": lambda lx: pickle.loads(pickle.dumps(lx))}[how]
    whole = lex(data, backend=backend)
    for cut in range(len(data) + 1):
        for split in (cut // 2, cut):  # feed the prefix in one or two chunks
            lx = Lexer(backend=backend)
            head = lx.feed(data[:split]) + lx.feed(data[split:cut])
            twin = clone(lx)
            assert twin._core is lx._core and repr(twin) == repr(lx)
            assert twin.pending_text() == lx.pending_text()
            # the original takes a different continuation (invalid UTF-8 after a cut
            # inside a character), the twin the real one
            try:
                lx.feed(b"x" if isinstance(data, bytes) else "x")
                lx.close()
            except ParseError:
                pass
            assert twin.pending_text() == data[slice(*twin.pending_span())]
            rest = twin.feed(data[cut:])
            assert all(twin.text(e.start, e.end) == data[e.start:e.end] for e in rest)
            rest += twin.close()
            assert head + rest == whole, (cut, split)


def test_pickled_lexer_falls_back_to_the_twin(monkeypatch):
    import pickle

    lx = Lexer("apertus-1", backend="cython" if _lex._lexer_c is not None else "python")
    lx.feed("<s><|system_start|>ab")
    blob = pickle.dumps(lx)
    monkeypatch.setattr(_lex, "_lexer_c", None)   # an install without the extension
    twin = pickle.loads(blob)
    assert twin._core is _lex._lexer_py
    assert twin.feed("c<|system_end|>") + twin.close() == lex(
        "<s><|system_start|>abc<|system_end|>", "apertus-1", backend="python")[2:]


def test_empty_lexer():
    lx = Lexer()
    assert lx.pending_text() == "" and lx.pending_span() == (0, 0) and lx.offset == 0
    assert lx.close() == []


# --------------------------------------------------------------------------- the cores

@pytest.mark.parametrize("core", [
    pytest.param("cython", marks=pytest.mark.skipif(_lex._lexer_c is None, reason=NOT_COMPILED)),
    "python"])
def test_table_validation(core):
    mod = _lex._core_for(core)
    for bad in [{"abc": 1}, {"<a": 1}, {"<a<b>": 1}, {"<é>": 1}, {"<" + "x" * 40: 1},
                {"<ab>": 1, "<ab>c": 2}, {"<ab>": -1}, {1: 1}]:
        with pytest.raises(ValueError):
            mod.Table(bad)
    with pytest.raises(ValueError):
        mod.Table({"<ab>": 1}, start_only=["<cd>"])
    with pytest.raises(ValueError):
        mod.Table({f"<t{i:02d}>": i for i in range(40)})
    table = mod.Table({"<ab>": 5, "<abc|": 6}, start_only=["<ab>"])
    assert "Table" in repr(table)
    buf, stop, rs, err, code, foreign = mod.scan_chunk(table, "<ab><ab><abc|", 0, 0, None, True)
    assert list(buf) == [5, 0, 4, 0, 4, 8, 6, 8, 13] and (stop, rs, err, foreign) == (13, 13, -1, -1)


@pytest.mark.parametrize("core", [
    pytest.param("cython", marks=pytest.mark.skipif(_lex._lexer_c is None, reason=NOT_COMPILED)),
    "python"])
def test_foreign_table_validation(core):
    """Foreign spellings follow the tokens' rules, and are none of the tokens, none a
    prefix of a token or of each other, and no start-only token."""
    mod = _lex._core_for(core)
    tokens = {"<|a|>": 2, "<s>": 1}
    for foreign in (["<|a|>"], ["<|a"], ["<|a|>x"], ["abc"], ["<|b|>", "<|b|>"], ["<|b", "<|b|>"],
                    ["<|" + "x" * 40 + "|>"], [f"<|f{i:02d}|>" for i in range(31)]):
        with pytest.raises(ValueError):
            mod.Table(tokens, ["<s>"], foreign)
    with pytest.raises(ValueError):
        mod.Table(tokens, ["<|b|>"], ["<|b|>"])
    table = mod.Table(tokens, ["<s>"], iter(["<|b|>", "<|c|>"]))
    assert table.tokens == tokens and table.foreign == {"<|b|>", "<|c|>"}
    assert "foreign=['<|b|>', '<|c|>']" in repr(table)


@pytest.mark.parametrize("core", [
    pytest.param("cython", marks=pytest.mark.skipif(_lex._lexer_c is None, reason=NOT_COMPILED)),
    "python"])
@pytest.mark.parametrize("as_bytes", [False, True])
def test_foreign_spellings_stay_text_and_are_located(core, as_bytes):
    """A foreign spelling is left in its text run (the events are those of the table
    without it) and ``scan_chunk`` gives the absolute offset of the first one; a
    prefix of one at the end is held back like a token's, until it is decided."""
    mod = _lex._core_for(core)
    plain = mod.Table({"<|a|>": 2, "<s>": 1}, ["<s>"])
    noting = mod.Table({"<|a|>": 2, "<s>": 1}, ["<s>"], ["<|b|>"])
    conv = (lambda t: t.encode()) if as_bytes else (lambda t: t)
    for text, first in [("x<|b|>y<|a|>z<|b|>", 1), ("<|b|><|b|>", 0), ("<|a|>é<|b", -1),
                        ("<|b|", -1), ("no tokens", -1), ("<s><|b|><|a|>", 3)]:
        got = mod.scan_chunk(noting, conv(text), 0, 0, None, True)
        want = mod.scan_chunk(plain, conv(text), 0, 0, None, True)
        at = first if first < 0 or not as_bytes else len(text[:first].encode())
        assert list(got[0]) == list(want[0]) and got[1:5] == want[1:5] and got[5] == at
        assert want[5] == -1
    # absolute offsets (base), and a prefix held back when not final
    buf, stop, rs, _err, _code, foreign = mod.scan_chunk(noting, conv("ab<|b|>c<|b"), 1, 100, None, False)
    assert (stop, rs, foreign) == (8, 101, 102) and list(buf) == []
    buf, stop, rs, _err, _code, foreign = mod.scan_chunk(plain, conv("ab<|b|>c<|b"), 1, 100, None, False)
    assert (stop, foreign) == (11, -1)


@pytest.mark.parametrize("core", [
    pytest.param("cython", marks=pytest.mark.skipif(_lex._lexer_c is None, reason=NOT_COMPILED)),
    "python"])
def test_scan_chunk_argument_checks(core):
    mod = _lex._core_for(core)
    table = _lex._table(mod, get_dialect("apertus-1"))
    for args in [("abc", -1, 0, None), ("abc", 4, 0, None), ("abc", 0, -1, None),
                 ("abc", 1, 0, 2), ("abc", 0, 0, -1), ("abc", 0, 1 << 62, None)]:
        with pytest.raises(ValueError):
            mod.scan_chunk(table, *args, True)
    with pytest.raises(TypeError):
        mod.scan_chunk(table, 3, 0, 0, None, True)
    with pytest.raises(TypeError):
        mod.scan_chunk(object(), "abc", 0, 0, None, True)
    with pytest.raises(BufferError):
        mod.scan_chunk(table, memoryview(b"abcd")[::2], 0, 0, None, True)
    # a scan from the middle, continuing an open text run
    buf, stop, rs, err, code, _foreign = mod.scan_chunk(table, "xx<|image|>yy<|ima", 1, 10, 5, False)
    assert list(buf) == [0, 5, 12, int(Kind.IMAGE), 12, 21]
    assert (stop, rs, err, code) == (13, 21, -1, 0)


def test_the_input_shapes_script_measures_what_lexer_md_says(capsys):
    """``benchmarks/lexer_inputs.py`` (docs/lexer.md, "Performance"): every input shape
    it times is of the kind its row names, and the script's check that the scan finds
    exactly the dialect's tokens passes on each (a tiny size, one round: not a timing)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "lexer_inputs.py"
    spec = importlib.util.spec_from_file_location("lexer_inputs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kinds = {name: (text.isascii(), max(map(ord, text)))
             for name, text in mod.inputs("apertus-format-reference")}
    assert kinds["ASCII"][0] and kinds["dense tokens (`hi`/`yo` turns)"][0]
    assert 128 <= kinds["1-byte kind (`ü`, `°`)"][1] < 256
    assert 256 <= kinds["2-byte kind (one `€`)"][1] < 0x10000
    assert kinds["4-byte kind (one emoji)"][1] >= 0x10000
    assert mod.main(["--mb", "0.02", "--rounds", "1", "--dialect", "apertus-1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(kinds)
    dense = next(r for r in rows if r.startswith("| dense"))
    assert int(dense.split("|")[2]) > 80   # events per kB: nearly all tokens
