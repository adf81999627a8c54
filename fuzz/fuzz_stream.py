"""atheris (libFuzzer) harness for the streaming parser of model output.

Each input becomes a dialect, a chunking and a completion: raw bytes, or a sequence of
structured pieces (token spellings and their prefixes, the punctuation of call lists
and tool outputs, JSON fragments, digits, quotes, backslashes, valid text) so that the
fuzzer reaches the tool-call reader's decisions without a dictionary. Checks:

* bytes chunks: ``ParseError`` exactly when ``bytes.decode('utf-8')`` fails, at its
  ``start``, except for a character cut off at the very end (a token limit), which is
  dropped with a warning; otherwise the same deltas as the decoded text;
* the deltas of the drawn chunking spell, kind by kind, what one ``feed`` of the whole
  text spells, and what the turn's blocks hold (thoughts, response, calls, outputs);
  no ``internal:`` warning (a delta contradicted at the end);
* ``parse_completion`` gives the stream's result; the blocks are lenient ``parse``'s
  reading of ``<|assistant_start|>`` + the text, up to where the turn ends.

Run from the repository root (see docs/streaming.md)::

    python fuzz/fuzz_stream.py -max_total_time=120
    python fuzz/fuzz_stream.py fuzz/corpus/stream -max_total_time=600   # keep a corpus

Coverage feedback comes from Python code only: point ``PYTHONPATH`` at a copy of
``src/`` without the compiled modules to guide the search through ``_stream.py``; the
checkout's compiled build is what finds crashes in the compiled module.
"""

from __future__ import annotations

import os
import sys

import atheris
from _common import chunks

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

with atheris.instrument_imports(include=["apertus_fast"]):
    from apertus_fast import ParseError, StreamParser, parse, parse_completion
    from apertus_fast._dialects import DIALECTS, TOKEN_TEXT

DIALECT_NAMES = sorted(DIALECTS)
SPELLINGS = sorted(TOKEN_TEXT.values())
PUNCTUATION = ['[{"', '{"', '": ', "}, {\"", "}, ", "}]", "}", "]", "[", ", ", ",", '"', "\\",
               '\\"', "1", "12", "-", "e", "1.5", "true", "nul", "{}", "[]", " ", "\n", "<", "<|"]
BAD_UTF8 = [b"\xc0\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xe2\x82", b"\xff", b"\x80"]


def spelled(deltas):
    thoughts = "".join(d.text for d in deltas if d.kind == "thoughts")
    response = "".join(d.text for d in deltas if d.kind == "response")
    calls, outputs = [], []
    for d in deltas:
        if d.kind == "tool_call":
            if d.name is not None:
                assert d.index == len(calls), deltas
                calls.append([d.name, d.text])
            else:
                assert d.index == len(calls) - 1, deltas
                calls[-1][1] += d.text
        elif d.kind == "tool_output":
            assert d.index == len(outputs), deltas
            outputs.append(d.text)
    return thoughts, response, calls, outputs


def structure(blocks):
    return ("".join(b["text"] for b in blocks if b["type"] == "thoughts"),
            "".join(b["text"] for b in blocks if b["type"] == "response"),
            [[c["name"], c["arguments"]] for b in blocks if b["type"] == "tool_calls"
             for c in b["calls"]],
            [o["output"] for b in blocks if b["type"] == "tool_outputs" for o in b["outputs"]])


def run(pieces, dialect):
    p = StreamParser(dialect, call_id=str)
    deltas = []
    for piece in pieces:
        deltas += p.feed(piece)
    return deltas + p.close(), p


def structured(fdp) -> bytes:
    parts = []
    while fdp.remaining_bytes() and len(parts) < 96:
        op = fdp.ConsumeIntInRange(0, 9)
        if op <= 1:
            parts.append(fdp.PickValueInList(SPELLINGS).encode())
        elif op == 2:
            s = fdp.PickValueInList(SPELLINGS)
            parts.append(s[:fdp.ConsumeIntInRange(1, len(s))].encode())
        elif op <= 6:
            parts.append(fdp.PickValueInList(PUNCTUATION).encode())
        elif op == 7:
            parts.append(fdp.PickValueInList(BAD_UTF8))
        else:
            parts.append(fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 6)).encode())
    return b"".join(parts)


def last_turn_blocks(messages):
    if messages and messages[-1] == {"role": "user"}:
        messages = messages[:-1]
    i = len(messages)
    while i and messages[i - 1]["role"] == "assistant":
        i -= 1
    return [b for m in messages[i:] for b in m["content"]["blocks"]]


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    dialect = fdp.PickValueInList(DIALECT_NAMES)
    cuts = fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 12), 0, 1 << 16)
    raw = fdp.ConsumeBytes(fdp.remaining_bytes()) if fdp.ConsumeBool() else structured(fdp)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.end == len(raw):
            # documented (docs/streaming.md): a character cut off at the very end is
            # dropped at close() with a warning, not an error
            _, p = run(chunks(raw, cuts), dialect)
            assert any("ends inside a UTF-8 character" in w for w in p.result().warnings), raw
            return
        try:
            run(chunks(raw, cuts), dialect)
        except ParseError as err:
            assert err.offset == exc.start, (raw, err.offset, exc.start)
            return
        raise AssertionError(f"invalid UTF-8 read without an error: {raw!r}")
    deltas, p = run(chunks(text, cuts), dialect)
    one, _ = run([text], dialect)
    assert spelled(deltas) == spelled(one), (text, cuts)
    assert spelled(run(chunks(raw, cuts), dialect)[0]) == spelled(one), (raw, cuts)
    result = p.result()
    assert not [w for w in result.warnings if w.startswith("internal")], (text, result.warnings)
    assert spelled(deltas) == structure(result.blocks), (text, cuts)
    once = parse_completion(text, dialect=dialect, call_id=str)
    assert (once.messages, once.warnings, once.finish_reason) == \
        (result.messages, result.warnings, result.finish_reason), text
    turn = text[:len(text) - len(result.rest)]
    if turn:
        parsed = parse("<|assistant_start|>" + turn, dialect=dialect, strict=False, format="blocks")
        assert last_turn_blocks(parsed.messages) == result.blocks, text


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
