"""What the atheris harnesses share (``fuzz_lexer.py``, ``fuzz_stream.py``)."""

from __future__ import annotations


def chunks(data, cuts):
    """``data`` cut at the drawn offsets (taken modulo its length + 1), in order."""
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for c in cuts + [len(data)]:
        out.append(data[last:c])
        last = c
    return out
