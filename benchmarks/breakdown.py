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

Then the memory traffic: the 64-byte cache lines a render of each conversation reads
(its messages' and tools' objects) and writes (the output string), counted from the
objects' addresses and sizes (CPython 3.11-3.13, whose dict layout it reads), and the
whole corpus rendered dropping each output at once, so that the next one is written into
memory that is still cached, against keeping them as the benchmark does.

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
from test_render_bench import _template_variables, render_all  # noqa: E402
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


def _lines_of(addr: int, size: int) -> range:
    return range(addr // 64, (addr + size - 1) // 64 + 1)


def _dict_keys_span(d: dict) -> tuple[int, int]:
    """(address, bytes) of a combined dict's key table: header, indices, entries.
    CPython 3.11-3.13 layout (the one ``_render_fast`` reads directly)."""
    import ctypes

    keys = ctypes.c_void_p.from_address(id(d) + 4 * ctypes.sizeof(ctypes.c_void_p)).value
    log2_index_bytes = ctypes.c_uint8.from_address(keys + 9).value
    unicode_keys = ctypes.c_uint8.from_address(keys + 10).value != 0
    nentries = ctypes.c_ssize_t.from_address(keys + 24).value
    return keys, 32 + (1 << log2_index_bytes) + nentries * (16 if unicode_keys else 24)


def cache_lines(item: dict, output: str) -> dict[str, set] | None:
    """The 64-byte lines a render of ``item`` reads (its messages, then the lines of its
    tools not already counted) and writes (the output string), from the objects'
    addresses and sizes; None where the dict layout is unknown (not CPython 3.11-3.13)."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return None
    import ctypes

    def walk(x, acc: set, kinds: dict):
        def add(kind, r):
            new = set(r) - acc
            acc.update(new)
            kinds[kind] = kinds.get(kind, 0) + len(new)

        if isinstance(x, str):
            add("string headers", _lines_of(id(x), min(56, sys.getsizeof(x))))
            add("string characters beyond the header", _lines_of(id(x), sys.getsizeof(x)))
        elif isinstance(x, dict):
            add("dicts and their entry tables", _lines_of(id(x) - 16, 16 + 6 * ctypes.sizeof(ctypes.c_void_p)))
            add("dicts and their entry tables", _lines_of(*_dict_keys_span(x)))
            for k, v in x.items():
                add("keys (shared across a JSON document)", _lines_of(id(k), sys.getsizeof(k)))
                walk(v, acc, kinds)
        elif isinstance(x, list):
            add("lists", _lines_of(id(x) - 16, 16 + 5 * ctypes.sizeof(ctypes.c_void_p)))
            if x:
                items = ctypes.c_void_p.from_address(id(x) + 3 * ctypes.sizeof(ctypes.c_void_p)).value
                add("lists", _lines_of(items, 8 * len(x)))
            for v in x:
                walk(v, acc, kinds)
        else:
            add("numbers, booleans, None", _lines_of(id(x), sys.getsizeof(x)))

    seen: set = set()
    kinds: dict = {}
    walk(item["messages"], seen, kinds)
    messages = len(seen)
    if item["tools"]:
        walk(item["tools"], seen, kinds)
    return {"messages": messages, "tools": len(seen) - messages,
            "output": len(_lines_of(id(output), sys.getsizeof(output))), **kinds}


def _render_dropping(render, jobs, dialect) -> None:
    for _, _, _, (m, t, e, g) in jobs:
        render(m, dialect=dialect, tools=t, enable_thinking=e, add_generation_prompt=g, date=DATE)


def _args(jobs) -> list:
    return [a for _, _, _, a in jobs]


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
            a = (it["messages"], it["tools"], it["enable_thinking"], it["add_generation_prompt"])
            jobs.append((it, text, _template_variables(it, d), a))
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
            sa = _args(sl)
            ta = best(lambda: render_all(render, sa, d), args.rounds)
            tf = best(lambda: [t[1:] for _, t, _, _ in sl], args.rounds)
            kb = sum(len(t.encode()) for _, t, _, _ in sl) / len(sl) / 1e3
            us = 1e6 / len(sl)
            print(f"| {name} | {len(sl)} | {kb:.1f} | {tj * us:.1f} | {ta * us:.2f} | {tj / ta:.1f}x | "
                  f"{tf * us:.2f} | {tj / tf:.0f}x |")
        all_args = _args(jobs)
        no_tools_args = [(m, None, e, g) for m, _, e, g in all_args]
        no_tools = best(lambda: render_all(render, no_tools_args, d), args.rounds)
        walk = best(lambda: ["".join(m["content"] if isinstance(m["content"], str) else "" for m in it["messages"])
                             for it, _, _, _ in jobs], args.rounds)
        full = best(lambda: render_all(render, all_args, d), args.rounds)
        dropped = best(lambda: _render_dropping(render, jobs, d), args.rounds)
        n = len(jobs)
        print(f"\nwhole corpus: render {full / n * 1e6:.2f} µs/conv (keeping the outputs, as the benchmark "
              f"does; dropping each at once, so that its memory is reused while cached: "
              f"{dropped / n * 1e6:.2f}); with tools=None {no_tools / n * 1e6:.2f} µs/conv; "
              f"join of string contents {walk / n * 1e6:.2f} µs/conv\n")
        counts = [cache_lines(job[0], out) for job, out in zip(jobs, render_all(render, all_args, d))]
        if counts[0] is None:
            print("(cache-line counts need CPython 3.11-3.13)\n")
        else:
            print("| cache lines a render touches (64 bytes), mean per conversation | lines |")
            print("|---|---:|")
            for key in ("messages", "tools", "output"):
                what = {"messages": "read: the messages", "tools": "read: the tools (lines not shared with the messages)",
                        "output": "written: the output string"}[key]
                print(f"| {what} | {sum(c[key] for c in counts) / n:.0f} |")
            kinds = sorted({k for c in counts for k in c} - {"messages", "tools", "output"},
                           key=lambda k: -sum(c.get(k, 0) for c in counts))
            for k in kinds:
                print(f"| of which read: {k} | {sum(c.get(k, 0) for c in counts) / n:.0f} |")
            print()
        print("| working set (conversations) | input + output MB | jinja2 µs/conv | apertus-fast µs/conv | speed-up |")
        print("|---:|---:|---:|---:|---:|")
        for k in WORKING_SETS:
            sl = jobs[:k]
            if len(sl) < k:
                break
            reps = max(1, n // k)
            tj = best(lambda: [tpl.render(**v) for _, _, v, _ in sl], args.rounds)
            sa = _args(sl)
            ta = best(lambda: [render_all(render, sa, d) for _ in range(reps)], args.rounds) / reps
            mb = sum(_footprint(it) + _str_bytes(text) for it, text, _, _ in sl) / 1e6
            print(f"| {k} | {mb:.1f} | {tj / k * 1e6:.1f} | {ta / k * 1e6:.2f} | {tj / ta:.1f}x |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
