"""The lexer against its floor on inputs of different shapes (docs/lexer.md, "Performance").

    python benchmarks/lexer_inputs.py [--mb 10] [--rounds 5] [--dialect D]

Each input is one rendered conversation (or a variant of it) repeated to about ``--mb``
MB. For each, ``apertus_fast._lex.scan`` and the floor ``count("<|")`` are timed on the
same data (best of ``--rounds``), as ``str`` and as UTF-8 ``bytes`` where the table of
docs/lexer.md has both, and the ratio scan / floor is printed as a Markdown table with
the events per kB. The goal is a ratio within 1.5.

The conversations are rendered with ``apertus_fast.render`` (no template or corpus is
needed), so the script runs on any checkout. Before timing, each scan is checked to find
exactly the dialect's special tokens in the input (a fast scanner that skips tokens
would otherwise look good).

The corpus benchmarks (``report.py``, group ``lex``) are the numbers of record; this
script shows how the ratio moves with the shape of the text.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
try:
    import apertus_fast
except ImportError:  # a checkout without an install: the sources beside
    sys.path.insert(0, str(HERE.parent / "src"))
    import apertus_fast
from apertus_fast._dialects import get_dialect  # noqa: E402
from apertus_fast._lex import scan  # noqa: E402

DATE = "2026-01-01"

PROSE = ("The Aare flows through Bern in a wide loop; the old town sits on the peninsula it "
         "makes. Trains to Zurich leave every half hour and take 56 minutes. ")


def _conversation(text: str, dialect: str) -> str:
    """A conversation of 16 special tokens per kB or so: a system prompt, two user
    turns, a block assistant with reasoning, a tool call and its output, and a reply."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant. " + text},
        {"role": "user", "content": "What should I see in Bern? " + text * 2},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "The user asks about Bern. " + text},
            {"type": "tool_calls", "calls": [
                {"name": "search", "arguments": '{"query": "Bern sights"}'}]},
            {"type": "tool_outputs", "outputs": [{"output": '{"results": ["Zytglogge"]}'}]},
            {"type": "response", "text": "Start at the Zytglogge. " + text * 2},
        ]}},
        {"role": "user", "content": "And in the evening? " + text},
        {"role": "assistant", "content": {"blocks": [
            {"type": "response", "text": "Walk along the Aare. " + text * 2}]}},
    ]
    return apertus_fast.render(messages, dialect=dialect, date=DATE, enable_thinking=True)


def _dense(dialect: str) -> str:
    """Two-letter turns: nearly all of the text is tokens."""
    messages = [{"role": "system", "content": "hi"}]
    for i in range(40):
        messages.append({"role": "user", "content": "hi"})
        messages.append({"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "yo"}, {"type": "response", "text": "yo"}]}})
    return apertus_fast.render(messages, dialect=dialect, date=DATE, enable_thinking=True)


def inputs(dialect: str) -> list[tuple[str, str]]:
    """``(name, text)`` of each input shape."""
    html = ('<div class="card"><p>See <a href="/x">this</a> &lt;b&gt;</p><br/>'
            '<span>a < b</span></div> ')
    look = "<|user_star|> <|assistant_en|> <|inner_|> <|tools_prefix| <| |> <<|> "
    return [
        ("ASCII", _conversation(PROSE, dialect)),
        ("1-byte kind (`ü`, `°`)", _conversation(PROSE + "Grüezi, 21 °C. ", dialect)),
        ("2-byte kind (one `€`)", _conversation(PROSE.replace("56 minutes", "56 minutes, 51 €", 1),
                                                dialect)),
        ("4-byte kind (one emoji)", _conversation(PROSE.replace("Trains", "Trains 🚆", 1), dialect)),
        ("CJK-heavy", _conversation("伯尔尼的老城位于阿勒河形成的半岛上。去苏黎世的火车每半小时一班。", dialect)),
        ("dense tokens (`hi`/`yo` turns)", _dense(dialect)),
        ("HTML-heavy (many `<` that are not tokens)", _conversation(html * 2, dialect)),
        ("token look-alikes (`<|user_star|>`...)", _conversation(look * 2, dialect)),
    ]


def best(fn, arg, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t)
    return min(times)


def special_tokens(text: str, dialect: str) -> int:
    toks = [t for t in get_dialect(dialect).tokens if t != "<s>"]
    return sum(text.count(t) for t in toks) + text.startswith("<s>")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=10.0, help="size of each input (default 10)")
    ap.add_argument("--rounds", type=int, default=5, help="best of N (default 5)")
    ap.add_argument("--dialect", default="apertus-1.5")
    args = ap.parse_args(argv)
    d = args.dialect
    print(f"lexer: {apertus_fast.backends()['_lexer']}; Python {platform.python_version()}; "
          f"{platform.machine()}; dialect {d}; ~{args.mb:g} MB per input, best of {args.rounds}\n")
    print("| input | events per kB | `str` scan / floor | `bytes` scan / floor |")
    print("|---|---:|---:|---:|")
    for name, one in inputs(d):
        size = len(one.encode("utf-8"))
        text = one * max(1, int(args.mb * 1e6 / size))
        ratios = []
        for payload, floor in ((text, lambda s: s.count("<|")),
                               (text.encode("utf-8"), lambda b: b.count(b"<|"))):
            buf = scan(payload, d)
            found = sum(1 for k in buf[0::3] if k != 0)
            want = special_tokens(text, d)
            if found != want or buf[-1] != len(payload):
                raise SystemExit(f"{name}: scan found {found} tokens, the text has {want}")
            ratios.append(best(lambda p: scan(p, d), payload, args.rounds)
                          / best(floor, payload, args.rounds))
        events = len(scan(one, d)) // 3
        print(f"| {name} | {events / (size / 1000):.0f} | {ratios[0]:.2f} | {ratios[1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
