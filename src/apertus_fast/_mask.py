# cython: boundscheck=True, wraparound=True
# (plain Python compiled by Cython: keep Python's index semantics and checks)
"""Token masks: one bool per token, from the tokens' offsets and the model's spans.

``Rendered.token_mask`` calls :func:`token_mask` once per training example, on as many
tokens as the example has (thousands), after the tokenizer. It is plain Python that
Cython compiles with the types in ``_mask.pxd``: a loop of C integers, 14-19 ns a token,
against about 100 ns for this source interpreted (67-70 ns before it checked that the
offsets are integers, as the C integers do) and 99 ns for the bisection per token it
replaced (``benchmarks/test_render_bench.py``, group ``mask``). Without a compiler this
source runs as it is, with the same results and the same errors.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from operator import index

from ._errors import shown

__all__ = ["token_mask"]

#: Compiled, the offsets go into C integers, which take only integers; the plain
#: module checks them itself, so that both accept and reject the same offsets.
_COMPILED = not __file__.endswith(".py")


#: Iterables of two items that are no (start, end) pair.
_NOT_PAIRS = (str, bytes, bytearray, memoryview, set, frozenset, Mapping)


def token_mask(spans, offsets):
    """For each ``(start, end)`` of ``offsets``: whether the token overlaps one of
    ``spans`` (sorted, disjoint, non-empty half-open ranges, as ``render_with_spans``
    makes them; others raise ``TypeError`` or ``ValueError`` naming the first span at
    fault, where they gave a wrong mask). A token that covers nothing
    (``end <= start``) never does.

    ``offsets`` is a list or tuple of pairs of ints, or anything with ``tolist()`` (a
    numpy array of shape ``(n, 2)``), or another iterable of pairs. Tokens in order (as
    a tokenizer returns them) are matched with the spans in one pass; a token that
    starts before the one before it is looked up by bisection.

    Offsets are integers (``int``, numpy's, anything with ``__index__``) of any size.
    Raises ``TypeError`` naming the first item that is not a pair of them (a batch's
    offsets, of shape ``(batch, n, 2)``, among them; a set, a mapping, a string or bytes
    of two items too, which iterate as no pair), in the compiled build and the plain one
    alike."""
    if type(offsets) is not list:
        if isinstance(offsets, (str, bytes, Mapping)):
            raise TypeError(f"offsets: expected (start, end) pairs, got {type(offsets).__name__}")
        tolist = getattr(offsets, "tolist", None)
        try:
            items = tolist() if tolist is not None else list(offsets)
        except TypeError:
            items = None
        if not isinstance(items, list):   # (a numpy scalar's tolist() is a scalar)
            raise TypeError(f"offsets: expected (start, end) pairs, got {type(offsets).__name__}")
        offsets = items
    starts, ends = _span_bounds(spans)
    n = len(starts)
    count = len(offsets)
    mask = [False] * count
    k = 0           # the first span that ends after the last token's start ...
    k_start = k_end = 0
    last = 0        # the last token's start
    check = not _COMPILED  # compiled, the C integers check the type themselves
    read = None     # pairs that are neither tuples nor lists, read into tuples, by index
    i = 0
    try:
        if n:       # ... and its bounds
            k_start = starts[0]
            k_end = ends[0]
        for i in range(count):
            pair = offsets[i]
            if type(pair) is not tuple and type(pair) is not list:
                if isinstance(pair, _NOT_PAIRS):
                    # (they iterate, but as no (start, end): a set in hash order, a
                    # dict's keys, characters or bytes)
                    raise TypeError
                # (read once, and kept: the fallback below reads the pairs again, and
                # an iterator can be read only once)
                if read is None:
                    read = {}
                pair = read[i] = tuple(pair)
            start, end = pair
            if check and (type(start) is not int or type(end) is not int):
                start = index(start)
                end = index(end)
            if end <= start:
                continue
            if start < last:
                k = bisect_right(ends, start)
                if k < n:
                    k_start = starts[k]
                    k_end = ends[k]
            elif k < n and k_end <= start:
                k += 1
                # far ahead (after a token that went back): a bisection, not a walk
                # span by span, which made shuffled tokens cost tokens x spans
                if k < n and ends[k] <= start:
                    k = bisect_right(ends, start, k)
                if k < n:
                    k_start = starts[k]
                    k_end = ends[k]
            last = start
            if k < n and k_start < end:
                mask[i] = True
    except OverflowError:
        # compiled only: an offset or a span's bound beyond a C ssize_t. The loop only
        # compares bounds, so each is replaced by its rank among them all: the same
        # answer, in integers that fit (so this recursion goes one level deep).
        # (from the bounds and the pairs read: an iterator is used up)
        if read is not None:
            offsets = [read.get(j, pair) for j, pair in enumerate(offsets)]
        return token_mask(*_ranked(list(zip(starts, ends)), offsets))
    except (TypeError, ValueError):
        raise _offset_error(offsets, i) from None
    return mask


def span_bounds(spans):
    """The starts and the ends of ``spans``, checked: pairs of integers, each span
    non-empty and starting at or after the end of the one before."""
    return _span_bounds(spans)


def _span_bounds(spans):
    """:func:`span_bounds`."""
    starts = []
    ends = []
    before = None
    for i, pair in enumerate(spans):
        try:
            start, end = pair
            start = index(start)
            end = index(end)
        except (TypeError, ValueError):
            raise TypeError(f"spans[{i}] = {shown(pair, 80)}: expected a (start, end) pair of "
                            "integers") from None
        if end <= start:
            raise ValueError(f"spans[{i}] = ({start}, {end}) is empty: spans are non-empty "
                             "(start < end), sorted and disjoint")
        if before is not None and start < before:
            raise ValueError(f"spans[{i}] = ({start}, {end}) starts before spans[{i - 1}] "
                             f"ends ({before}): spans are sorted and disjoint")
        starts.append(start)
        ends.append(end)
        before = end
    return starts, ends


def _ranked(spans, offsets):
    """``(spans, offsets)`` with every bound replaced by its rank among all of them,
    which keeps every comparison between two bounds, and so every answer (clamping
    them to a ``ssize_t`` did not: ``(2**70, 2**71)`` became empty). (The loop's
    first comparison, with 0, may change: for spans that are sorted and disjoint,
    which ``_span_bounds`` checked, it does not change the answer.) ``spans``: the
    checked pairs of ints; ``offsets``: as the caller gave them."""
    offsets = _pairs(offsets)
    rank = {v: r for r, v in enumerate(sorted({v for pair in spans + offsets for v in pair}))}
    return ([(rank[a], rank[b]) for a, b in spans],
            [(rank[a], rank[b]) for a, b in offsets])


def _pairs(offsets):
    """``offsets`` as a list of pairs of ints, or the TypeError that names the first
    that is not one."""
    out = []
    for i, pair in enumerate(offsets):
        try:
            if isinstance(pair, _NOT_PAIRS):
                raise TypeError
            start, end = pair
            out.append((index(start), index(end)))
        except (TypeError, ValueError):
            raise _offset_error(offsets, i) from None
    return out


def _offset_error(offsets, i):
    """The error for ``offsets[i]``, which the loop could not read as two integers."""
    pair = offsets[i]
    named = f"offsets[{i}] = {shown(pair, 80)}"
    if isinstance(pair, (list, tuple)) and pair and isinstance(pair[0], (list, tuple)):
        return TypeError(f"{named}: expected a (start, end) pair of integers, got a list "
                         "of pairs (a batch's offset_mapping has shape (batch, n, 2): "
                         "pass one example's, e.g. offset_mapping[0])")
    return TypeError(f"{named}: expected a (start, end) pair of integers")
