"""Comparing JSON values and outcomes exactly (``test_jsonl.py``, ``fuzz/fuzz_jsonl.py``)."""

from __future__ import annotations


def same(a, b) -> bool:
    """Exactly the same JSON value: types, float bits (NaN and -0.0 included), key order,
    and strings stored alike (``==`` compares the storage width; ``isascii`` tells a
    1-byte ASCII string from a Latin-1 one that holds only ASCII, which a reader
    choosing the width from the wrong bytes could make)."""
    if type(a) is not type(b):
        return False
    if type(a) is str:
        return a == b and a.isascii() == b.isascii()
    if type(a) is float:
        return repr(a) == repr(b)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return (len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
                and all(same(a[k], b[k]) for k in a))
    return a == b


def outcome(f, data):
    """``("value", f(data))``, or ``("error", type, message)`` if it raises."""
    try:
        return ("value", f(data))
    except Exception as exc:  # noqa: BLE001 - compared with the json module's
        return ("error", type(exc), str(exc))
