# cython: boundscheck=True, wraparound=True
# (plain Python compiled by Cython: keep Python's index semantics and checks)
"""Token masks: one bool per token, from the tokens' offsets and the model's spans.

``Rendered.token_mask`` calls :func:`token_mask` once per training example, on as many
tokens as the example has (thousands), after the tokenizer. It is plain Python that
Cython compiles with the types in ``_mask.pxd``: a loop of C integers, 14-19 ns a token,
against 67-70 ns for this source interpreted and 99 ns for the bisection per token it
replaced (``benchmarks/test_render_bench.py``, group ``mask``). Without a compiler this
source runs as it is, with the same results.
"""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["token_mask"]


def token_mask(spans, offsets):
    """For each ``(start, end)`` of ``offsets``: whether the token overlaps one of
    ``spans`` (sorted, disjoint, non-empty half-open ranges). A token that covers
    nothing (``end <= start``) never does.

    ``offsets`` is a list or tuple of pairs of ints, or anything with ``tolist()`` (a
    numpy array of shape ``(n, 2)``), or another iterable of pairs. Tokens in order (as
    a tokenizer returns them) are matched with the spans in one pass; a token that
    starts before the one before it is looked up by bisection."""
    if type(offsets) is not list:
        tolist = getattr(offsets, "tolist", None)
        offsets = tolist() if tolist is not None else list(offsets)
    n = len(spans)
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    count = len(offsets)
    mask = [False] * count
    k = 0           # the first span that ends after the last token's start ...
    k_start = k_end = 0
    if n:           # ... and its bounds
        k_start = starts[0]
        k_end = ends[0]
    last = 0        # the last token's start
    for i in range(count):
        start, end = offsets[i]
        if end <= start:
            continue
        if start < last:
            k = bisect_right(ends, start)
            if k < n:
                k_start = starts[k]
                k_end = ends[k]
        else:
            while k < n and k_end <= start:
                k += 1
                if k < n:
                    k_start = starts[k]
                    k_end = ends[k]
        last = start
        if k < n and k_start < end:
            mask[i] = True
    return mask
