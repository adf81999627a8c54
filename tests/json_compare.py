"""Comparing JSON values and outcomes exactly (``test_jsonl.py``, ``fuzz/fuzz_jsonl.py``)."""

from __future__ import annotations


def same(a, b) -> bool:
    """Exactly the same JSON value: types, float bits (NaN and -0.0 included), key order,
    and strings stored alike (``==`` compares the storage width; ``isascii`` tells a
    1-byte ASCII string from a Latin-1 one that holds only ASCII, which a reader
    choosing the width from the wrong bytes could make).

    Iterative (a stack of pairs), so that values nested deeper than Python's recursion
    limit compare too: json.loads reads 1,500 levels on CPython 3.12+ (its limit there
    is the C stack's), where a recursive comparison would raise RecursionError."""
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            return False
        if type(a) is str:
            if not (a == b and a.isascii() == b.isascii()):
                return False
        elif type(a) is float:
            if repr(a) != repr(b):
                return False
        elif type(a) is list:
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b))
        elif type(a) is dict:
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b))                    # the keys, in order
            stack.extend((a[k], b[k]) for k in a)      # the values
        elif a != b:
            return False
    return True


def outcome(f, data):
    """``("value", f(data))``, or ``("error", type, message)`` if it raises."""
    try:
        return ("value", f(data))
    except Exception as exc:  # noqa: BLE001 - compared with the json module's
        return ("error", type(exc), str(exc))
