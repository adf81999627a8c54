"""Where the rendering time goes: jinja2 vs apertus-fast per slice of the corpus.

    PYTHONPATH=src python benchmarks/breakdown.py [--rounds 5] [--dialect apertus-1.5]

Splits each dialect's corpus into slices (by rendered size, with / without tools,
string / block assistants), times each slice as a whole (best of ``--rounds``) with the
jinja2 baseline, with ``apertus_fast.render`` and with the copy floor (copying each
rendered string once), and prints a Markdown table of microseconds per conversation, the
speed-up, and the ceiling (jinja2 / floor: the best speed-up any renderer could show) per
slice. Also times two references for
the whole corpus: ``render`` with ``tools=None`` (what the tool-signature section costs)
and a plain ``"".join`` of the message contents (the cost of merely walking the messages
and building strings of that size from Python).

Then the working set: ``render`` over the first k conversations, repeated so that every
round renders as many conversations as the whole corpus, for growing k. jinja2 spends its
time computing, apertus-fast mostly waiting for memory, so apertus-fast's time per
conversation grows once the conversations it cycles through no longer fit in the cache
(docs/benchmarks.md, "Where the rendering time goes").

A diagnostic for whoever tunes the renderer; the numbers of record come from
``report.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from corpus import DATE, DIALECTS, corpus, rendered  # noqa: E402
from test_render_bench import _template_variables  # noqa: E402
from tests.oracle import compiled  # noqa: E402


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _size_slice(n: int) -> str:
    for limit, name in ((1_000, "< 1 KB"), (4_000, "1-4 KB"), (16_000, "4-16 KB")):
        if n < limit:
            return name
    return "≥ 16 KB"


def _blocks(item) -> bool:
    return any(isinstance(m.get("content"), dict) and "blocks" in m["content"] for m in item["messages"])


#: Sizes of the working-set table (first k conversations of the corpus).
WORKING_SETS = (100, 250, 500, 1000, 2000)


def _str_bytes(s: str) -> int:
    return sys.getsizeof(s)


def _footprint(x) -> int:
    """Bytes of the objects of a JSON-like value (what a render reads)."""
    if isinstance(x, dict):
        return sys.getsizeof(x) + sum(_footprint(k) + _footprint(v) for k, v in x.items())
    if isinstance(x, list):
        return sys.getsizeof(x) + sum(_footprint(v) for v in x)
    return sys.getsizeof(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dialect", action="append", choices=DIALECTS)
    args = ap.parse_args(argv)

    import apertus_fast
    from apertus_fast import render

    print(f"apertus_fast backend: {getattr(apertus_fast, 'BACKEND', '?')}\n")
    for d in args.dialect or DIALECTS:
        items, texts = corpus(d), rendered(d)
        tpl = compiled(d)
        jobs = []
        for it, text in zip(items, texts):
            kw = dict(dialect=d, tools=it["tools"], enable_thinking=it["enable_thinking"],
                      add_generation_prompt=it["add_generation_prompt"], date=DATE)
            jobs.append((it, text, _template_variables(it, d), kw))
        slices: dict[str, list] = {"all": jobs}
        for job in jobs:
            it, text = job[0], job[1]
            keys = [f"size {_size_slice(len(text.encode()))}",
                    "with tools" if it["tools"] else "without tools",
                    "block assistants" if _blocks(it) else "string assistants"]
            for k in keys:
                slices.setdefault(k, []).append(job)
        print(f"### {d}\n")
        print("| slice | conversations | mean KB | jinja2 µs/conv | apertus-fast µs/conv | speed-up | "
              "copy floor µs/conv | ceiling (jinja2 / floor) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        order = ["all", "size < 1 KB", "size 1-4 KB", "size 4-16 KB", "size ≥ 16 KB", "without tools", "with tools",
                 "string assistants", "block assistants"]
        for name in order:
            sl = slices.get(name)
            if not sl:
                continue
            tj = best(lambda: [tpl.render(**v) for _, _, v, _ in sl], args.rounds)
            ta = best(lambda: [render(it["messages"], **kw) for it, _, _, kw in sl], args.rounds)
            tf = best(lambda: [t[1:] for _, t, _, _ in sl], args.rounds)
            kb = sum(len(t.encode()) for _, t, _, _ in sl) / len(sl) / 1e3
            us = 1e6 / len(sl)
            print(f"| {name} | {len(sl)} | {kb:.1f} | {tj * us:.1f} | {ta * us:.2f} | {tj / ta:.1f}x | "
                  f"{tf * us:.2f} | {tj / tf:.0f}x |")
        no_tools = best(lambda: [render(it["messages"], **dict(kw, tools=None)) for it, _, _, kw in jobs], args.rounds)
        walk = best(lambda: ["".join(m["content"] if isinstance(m["content"], str) else "" for m in it["messages"])
                             for it, _, _, _ in jobs], args.rounds)
        full = best(lambda: [render(it["messages"], **kw) for it, _, _, kw in jobs], args.rounds)
        n = len(jobs)
        print(f"\nwhole corpus: render {full / n * 1e6:.2f} µs/conv; with tools=None {no_tools / n * 1e6:.2f} µs/conv; "
              f"join of string contents {walk / n * 1e6:.2f} µs/conv\n")
        print("| working set (conversations) | input + output MB | jinja2 µs/conv | apertus-fast µs/conv | speed-up |")
        print("|---:|---:|---:|---:|---:|")
        for k in WORKING_SETS:
            sl = jobs[:k]
            if len(sl) < k:
                break
            reps = max(1, n // k)
            tj = best(lambda: [tpl.render(**v) for _, _, v, _ in sl], args.rounds)
            ta = best(lambda: [[render(it["messages"], **kw) for it, _, _, kw in sl] for _ in range(reps)],
                      args.rounds) / reps
            mb = sum(_footprint(it) + _str_bytes(text) for it, text, _, _ in sl) / 1e6
            print(f"| {k} | {mb:.1f} | {tj / k * 1e6:.1f} | {ta / k * 1e6:.2f} | {tj / ta:.1f}x |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
