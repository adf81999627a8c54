"""atheris (libFuzzer) harness for the compiled JSON-line reader and writer (``_jsonl``).

Each input is raw bytes, or a sequence of structured pieces (JSON punctuation,
literals, numbers, escapes, UTF-8 of every length, invalid UTF-8, encoded surrogates,
BOMs, control bytes) so that random search reaches the reader's branches without a
dictionary. Checks:

* ``_jsonl.loads(data)`` is ``json.loads`` of the UTF-8 text of ``data``
  (``_io.loads_utf8``): the same value (types, float bits, key order) or the same
  exception (type and message); the reader alone either gives that value or leaves the
  input to json;
* for a decoded value, ``_jsonl.json_line(value)`` is ``json.dumps(value,
  ensure_ascii=False) + "\\n"`` in UTF-8, or ``None`` when it holds a lone surrogate.

Run from the repository root, with the package built (``make install``)::

    python fuzz/fuzz_jsonl.py -max_total_time=120

The reader is C code that atheris does not instrument, so the search is guided only by
the structure of the inputs; what it is for is crashes and disagreements on inputs
nobody wrote down.
"""

from __future__ import annotations

import json
import os
import sys

import atheris

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from apertus_fast import _io, _jsonl  # noqa: E402
from tests.json_compare import outcome, same  # noqa: E402

PIECES = [b"{", b"}", b"[", b"]", b'"', b":", b",", b" ", b"\n", b"\t", b"\r", b"\\",
          b'"k": ', b'"role"', b'"content"', b"true", b"false", b"null", b"NaN", b"Infinity",
          b"-Infinity", b"-", b"0", b"7", b"12", b"1.5", b"e", b"E+", b"-3", b".", b"1e400",
          b"12345678901234567890", b"\\n", b"\\u", b"\\u00e9", b"\\ud83d", b"\\ude00",
          b"\\ud800", b"\\/", b"\\x", b"a", b"Gr\xc3\xbcezi", "中文".encode(), "😀".encode(),
          b"\xc0\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x9f\x98", b"\xe2\x82", b"\xff",
          b"\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf", b"\x00", b"\x1f", b"\x7f"]


def depth(v) -> int:
    if type(v) is list:
        return 1 + max(map(depth, v), default=0)
    if type(v) is dict:
        return 1 + max(map(depth, v.values()), default=0)
    return 0


def _seeds() -> list[bytes]:
    """The lines of the shipped samples: real JSON lines to mutate."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "samples")
    out = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".jsonl"):
            with open(os.path.join(root, name), "rb") as f:
                out += [line for line in f if line.strip()]
    return out


SEEDS = _seeds()


def document(fdp: atheris.FuzzedDataProvider) -> bytes:
    """Raw bytes, pieces in a row, or a sample line with a few pieces inserted,
    overwritten or deleted: without coverage from the C reader, the input bytes
    drive these choices."""
    how = fdp.ConsumeIntInRange(0, 2)
    if how == 0:
        return fdp.ConsumeBytes(fdp.remaining_bytes())
    if how == 1:
        out = []
        while fdp.remaining_bytes() > 0 and len(out) < 200:
            out.append(PIECES[fdp.ConsumeIntInRange(0, len(PIECES) - 1)])
        return b"".join(out)
    buf = bytearray(SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)])
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        pos = fdp.ConsumeIntInRange(0, len(buf))
        piece = PIECES[fdp.ConsumeIntInRange(0, len(PIECES) - 1)]
        edit = fdp.ConsumeIntInRange(0, 2)
        if edit == 0:
            buf[pos:pos] = piece
        elif edit == 1:
            buf[pos:pos + len(piece)] = piece
        else:
            del buf[pos:pos + fdp.ConsumeIntInRange(1, 8)]
    return bytes(buf)


def test_one(data: bytes) -> None:
    doc = document(atheris.FuzzedDataProvider(data))
    want = outcome(_io.loads_utf8, doc)
    got = outcome(_jsonl.loads, doc)
    if want[0] == "value":
        assert got[0] == "value" and same(got[1], want[1]), (doc, got, want)
        alone = _jsonl._read(doc)
        assert alone is None or same(alone, want[1]), (doc, alone, want)
        line = _jsonl.json_line(want[1])
        if line is not None:
            assert line == (json.dumps(want[1], ensure_ascii=False) + "\n").encode(), doc
        else:  # a lone surrogate (no UTF-8), or deeper than the writer goes
            assert "\\ud" in json.dumps(want[1]) or depth(want[1]) > _jsonl.MAX_DEPTH, doc
    else:
        assert got == want, (doc, got, want)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()
