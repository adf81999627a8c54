"""Streaming model output: an assistant turn fed chunk by chunk.

The data (group ``stream <dialect>``): the assistant turns of the rendered corpus
(``corpus.py``; the text after each ``<|assistant_start|>`` up to the next turn), every
k-th of them so that ``STREAM_TURNS`` turns of every size are timed, cut into chunks of
1-8 characters in a fixed cycle (3.9 on average, about one token each).

* baseline: **re-reading the text so far** with ``parse_completion`` after every chunk,
  what a server without a streaming parser does to learn what the model has written
  (it would still have to diff consecutive readings to get deltas; that is not timed,
  which flatters the baseline). Its cost grows with the square of a turn's length.
* ``apertus-fast StreamParser``: ``feed`` every chunk, then ``close``; deltas as they
  become final. Gated before timing: its ``result()`` equals ``parse_completion`` of
  the whole turn, and the deltas spell it.
* for information: ``Lexer.feed`` (the public resumable lexer alone, which builds
  ``Event`` objects) over the same chunks, and ``parse_completion`` once per turn.

``extra_info``: ``turns``, ``chunks``, ``bytes`` (UTF-8 bytes of the turns);
``report.py`` turns them into rates.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.oracle import ORACLE_MISSING

if ORACLE_MISSING:  # the corpus is validated with the official templates
    pytest.skip(f"no corpus: {ORACLE_MISSING}", allow_module_level=True)

from corpus import DIALECTS, rendered

#: Turns timed per dialect (every k-th turn of the corpus).
STREAM_TURNS = 300
#: Chunk lengths, in characters, used in turn (about one token each).
CHUNK_SIZES = (3, 5, 4, 1, 6, 4, 2, 8, 3, 4, 5, 2)


def _turns(text: str, dialect: str) -> list[str]:
    """The assistant turns' bodies of one rendered conversation."""
    from apertus_fast._dialects import Kind, get_dialect
    from apertus_fast._parse import scan_str

    ev = scan_str(text, get_dialect(dialect))
    out, start = [], None
    for j in range(0, len(ev), 3):
        kind, s, e = ev[j], ev[j + 1], ev[j + 2]
        if kind == Kind.ASSISTANT_START:
            if start is not None and s > start:
                out.append(text[start:s])
            start = e
        elif kind == Kind.USER_START and start is not None:
            if s > start:
                out.append(text[start:s])
            start = None
    if start is not None and len(text) > start:
        out.append(text[start:])
    return out


def _chunks(text: str) -> list[str]:
    out, i, k = [], 0, 0
    while i < len(text):
        n = CHUNK_SIZES[k % len(CHUNK_SIZES)]
        out.append(text[i:i + n])
        i += n
        k += 1
    return out


class Turns:
    def __init__(self, dialect: str):
        self.dialect = dialect
        every = [t for text in rendered(dialect) for t in _turns(text, dialect)]
        step = max(1, len(every) // STREAM_TURNS)
        self.turns = every[::step][:STREAM_TURNS]
        self.chunks = [_chunks(t) for t in self.turns]
        self.n = len(self.turns)
        self.nchunks = sum(map(len, self.chunks))
        self.nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in self.turns)


@lru_cache(maxsize=None)
def turns(dialect: str) -> Turns:
    return Turns(dialect)


def _setup(benchmark, t: Turns, engine: str):
    benchmark.group = f"stream {t.dialect}"
    benchmark.extra_info.update(kind="stream", engine=engine, dialect=t.dialect, turns=t.n,
                                chunks=t.nchunks, bytes=t.nbytes)


def _call_id(index):
    return "call"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_reparse(benchmark, dialect):
    from apertus_fast import parse_completion

    t = turns(dialect)
    _setup(benchmark, t, "re-parse per chunk")

    def run():
        for chunks in t.chunks:
            so_far = ""
            for c in chunks:
                so_far += c
                parse_completion(so_far, dialect=dialect, call_id=_call_id)

    benchmark(run)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_lexer(benchmark, dialect):
    from apertus_fast import Lexer

    t = turns(dialect)
    _setup(benchmark, t, "Lexer.feed")

    def run():
        for chunks in t.chunks:
            lx = Lexer(dialect)
            for c in chunks:
                lx.feed(c)
            lx.close()

    benchmark(run)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_parser(benchmark, dialect):
    from apertus_fast import StreamParser, parse_completion

    t = turns(dialect)
    for turn, chunks in zip(t.turns, t.chunks):
        p = StreamParser(dialect, call_id=_call_id)
        deltas = [d for c in chunks for d in p.feed(c)] + p.close()
        got, want = p.result(), parse_completion(turn, dialect=dialect, call_id=_call_id)
        assert (got.messages, got.reasoning, got.content, got.tool_calls, got.tool_outputs) == \
            (want.messages, want.reasoning, want.content, want.tool_calls, want.tool_outputs), turn
        assert "".join(d.text for d in deltas if d.kind == "response") == want.content
    _setup(benchmark, t, "apertus-fast StreamParser")

    def run():
        for chunks in t.chunks:
            p = StreamParser(dialect, call_id=_call_id)
            for c in chunks:
                p.feed(c)
            p.close()

    benchmark(run)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_once(benchmark, dialect):
    from apertus_fast import parse_completion

    t = turns(dialect)
    _setup(benchmark, t, "parse_completion once")
    texts = t.turns
    benchmark(lambda: [parse_completion(x, dialect=dialect, call_id=_call_id) for x in texts])
