"""atheris (libFuzzer) harness for the lexer.

Each input is turned into a dialect, a chunking and a payload, either raw bytes or a
sequence of structured pieces (token spellings, token prefixes, look-alikes, random
bytes, valid text) so that the fuzzer reaches tokens without a dictionary. Checks:

* bytes: the Cython scanner and the pure-Python twin give identical events, or
  identical ``ParseError`` (offset, line, column, found); an error happens exactly when
  ``bytes.decode('utf-8')`` fails, at its ``start``;
* str (the payload decoded, and a str drawn directly, lone surrogates included):
  both scanners agree, and for encodable text agree with the bytes events after
  converting offsets;
* the events tile the input; streaming the payload in the drawn chunks (both
  scanners) gives the one-shot result.

Run from the repository root (see docs/lexer.md)::

    python fuzz/fuzz_lexer.py -max_total_time=120
    python fuzz/fuzz_lexer.py fuzz/corpus/lexer -max_total_time=600   # keep a corpus (git-ignored)

Without the compiled extension the twin is compared with itself and with Python's
decoder only (a warning says so).
"""

from __future__ import annotations

import os
import sys

import atheris
from _common import chunks

# The checkout's src/, unless PYTHONPATH says where apertus_fast is (e.g. a sanitizer build)
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

with atheris.instrument_imports(include=["apertus_fast"]):
    from apertus_fast import _lex
    from apertus_fast._dialects import DIALECTS, TOKEN_TEXT
    from apertus_fast._errors import ParseError

DIALECT_NAMES = sorted(DIALECTS)
SPELLINGS = sorted(TOKEN_TEXT.values())
LOOK_ALIKES = ["<|User_start|>", "<|user_start|", "<| user_start|>", "</s>", "< s>", "<think",
               "<|", "|>", "<<", "<|tool_output_", "<|tools_", "<|inner_", "<thinkk>", "<s"]
BAD_UTF8 = [b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98",
            b"\xe2\x82", b"\xc2", b"\xf8", b"\xff", b"\x80"]
HAVE_C = _lex._lexer_c is not None
BACKENDS = ("cython", "python") if HAVE_C else ("python",)
if not HAVE_C:
    print("fuzz_lexer: apertus_fast._lexer is not compiled; fuzzing the pure-Python twin only",
          file=sys.stderr)


def outcome(fn, *args, **kw):
    try:
        events = fn(*args, **kw)
    except ParseError as e:
        return ("error", e.offset, e.line, e.column, e.found)
    return [tuple(ev) for ev in events]


def check_tiling(events, n):
    pos = 0
    for kind, start, end in events:
        assert start == pos and end > start, events
        pos = end
    assert pos == n, (pos, n)


def stream(pieces, dialect, backend):
    whole = pieces[0][:0].join(pieces)
    lx = _lex.Lexer(dialect, backend=backend)
    events = []
    for piece in pieces:
        new = lx.feed(piece)
        for ev in new:
            assert lx.text(ev.start, ev.end) == whole[ev.start:ev.end]
        events += new
        start, end = lx.pending_span()
        assert (not events or events[-1].end == start) and end <= lx.offset
        assert lx.pending_text() == whole[start:end]
    new = lx.close()
    for ev in new:
        assert lx.text(ev.start, ev.end) == whole[ev.start:ev.end]
    return events + new


def structured(fdp) -> bytes:
    parts = []
    while fdp.remaining_bytes() and len(parts) < 64:
        op = fdp.ConsumeIntInRange(0, 7)
        if op <= 1:
            parts.append(fdp.PickValueInList(SPELLINGS).encode())
        elif op == 2:
            s = fdp.PickValueInList(SPELLINGS)
            parts.append(s[:fdp.ConsumeIntInRange(1, len(s))].encode())
        elif op == 3:
            parts.append(fdp.PickValueInList(LOOK_ALIKES).encode())
        elif op == 4:
            parts.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8)))
        elif op == 5:
            parts.append(fdp.PickValueInList(BAD_UTF8))
        else:
            parts.append(fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 8)).encode())
    return b"".join(parts)


def check_bytes(raw, dialect, cuts):
    results = [outcome(_lex.lex, raw, dialect, backend=b) for b in BACKENDS]
    assert all(r == results[0] for r in results), (raw, results)
    result = results[0]
    try:
        raw.decode("utf-8")
        py_error = None
    except UnicodeDecodeError as e:
        py_error = e
    if py_error is None:
        assert result and result[0] != "error" or not raw, (raw, result)
        check_tiling(result, len(raw))
    else:
        assert result[0] == "error" and result[1] == py_error.start, (raw, result, py_error)
        assert result[4].startswith(py_error.reason), (raw, result, py_error)
    for b in BACKENDS:
        assert outcome(stream, chunks(raw, cuts), dialect, b) == result, (raw, cuts, b)
    return result, py_error


def check_str(text, dialect, cuts, via_bytes=None):
    results = [outcome(_lex.lex, text, dialect, backend=b) for b in BACKENDS]
    assert all(r == results[0] for r in results), (text, results)
    check_tiling(results[0], len(text))
    if via_bytes is not None:
        offsets = [0]
        for ch in text:
            offsets.append(offsets[-1] + len(ch.encode()))
        assert [(k, offsets[s], offsets[e]) for k, s, e in results[0]] == via_bytes, text
    for b in BACKENDS:
        assert outcome(stream, chunks(text, cuts), dialect, b) == results[0], (text, cuts, b)


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    dialect = fdp.PickValueInList(DIALECT_NAMES)
    mode = fdp.ConsumeIntInRange(0, 2)
    cuts = fdp.ConsumeIntListInRange(fdp.ConsumeIntInRange(0, 6), 0, 1 << 16)
    if mode == 0:
        raw = fdp.ConsumeBytes(fdp.remaining_bytes())
    elif mode == 1:
        raw = structured(fdp)
    else:
        text = fdp.ConsumeUnicode(fdp.remaining_bytes())   # any code points, surrogates too
        check_str(text, dialect, cuts)
        return
    result, py_error = check_bytes(raw, dialect, cuts)
    if py_error is None:
        check_str(raw.decode("utf-8"), dialect, cuts, via_bytes=result)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
