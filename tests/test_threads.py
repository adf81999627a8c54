"""Many threads at once: render, render_with_spans, parse (short and long texts, valid
and not), a StreamParser each, and tool-cache misses and clears, with the interpreter
switching threads as often as it can. Every result must equal the one-thread result,
and the cycle collector must be as the caller left it. (A thread audit ran this mix for
minutes with inputs edited meanwhile; what it found has tests of its own, in
test_render_fast.py, test_parse.py and test_render_errors.py. This guards the rest.)"""

from __future__ import annotations

import copy
import gc
import json
import random
import sys
import threading
from pathlib import Path

import pytest

import apertus_fast as af
from apertus_fast import _render
from tests.strategies import tool_turns

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DATE = "2026-01-01"


def _cases():
    cases = []
    for line in (SAMPLES / "conversations.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if isinstance(item, list):   # (a line may be the messages alone)
            item = {"messages": item}
        for dialect in ("apertus-format-reference", "apertus-1", "apertus-1.5"):
            kw = dict(dialect=dialect, tools=item.get("tools"),
                      enable_thinking=item.get("enable_thinking", False), date=DATE)
            cases.append((item["messages"], kw, af.render(item["messages"], **kw)))
    return cases


def _long_text():
    text = af.render(tool_turns(1500), dialect="apertus-1.5", date=DATE)
    assert len(text) >= 1 << 16   # the parse that may switch the collector off
    return text


def _clear_tool_caches():
    try:
        from apertus_fast import _render_fast
    except ImportError:   # (the pure-Python build has the general path's memo only)
        return
    _render_fast.clear_tool_cache()


@pytest.mark.parametrize("collector", ["on", "off"])
def test_many_threads_get_the_one_thread_results(collector):
    cases = _cases()
    spans = [af.render_with_spans(m, **kw) for m, kw, _ in cases]
    parsed = [af.parse(text, dialect=kw["dialect"]).messages for _, kw, text in cases]
    long_text = _long_text()
    long_parsed = af.parse(long_text, dialect="apertus-1.5").messages
    broken = long_text.replace("<|user_end|>", "", 1)
    completion = cases[0][2][len("<s>"):]   # a text to stream: any rendered one
    streamed = af.parse_completion(completion, dialect="apertus-1.5").to_dict()
    problems = []
    rounds = 150

    def worker(seed):
        rnd = random.Random(seed)
        try:
            for _ in range(rounds):
                op = rnd.random()
                i = rnd.randrange(len(cases))
                messages, kw, text = cases[i]
                if op < 0.3:
                    if kw["tools"] and rnd.random() < 0.4:   # a tool the caches have not seen
                        tools = copy.deepcopy(kw["tools"])
                        tools[0]["description"] = f"{tools[0].get('description', '')} {rnd.random()}"
                        want = _render._render_general(messages, kw["dialect"], tools, kw["enable_thinking"],
                                                       False, False, DATE, "<s>", None)
                        got = af.render(messages, **dict(kw, tools=tools))
                    else:
                        want, got = text, af.render(messages, **kw)
                    if got != want:
                        problems.append(("render", i))
                elif op < 0.45:
                    r = af.render_with_spans(messages, **kw)
                    if (r.text, r.spans) != (spans[i].text, spans[i].spans):
                        problems.append(("render_with_spans", i))
                elif op < 0.65:
                    if af.parse(text, dialect=kw["dialect"]).messages != parsed[i]:
                        problems.append(("parse", i))
                elif op < 0.72:
                    if af.parse(long_text, dialect="apertus-1.5").messages != long_parsed:
                        problems.append(("long parse",))
                elif op < 0.77:
                    try:
                        af.parse(broken, dialect="apertus-1.5")
                        problems.append(("no error",))
                    except af.ParseError:
                        pass
                elif op < 0.95:
                    stream = af.StreamParser("apertus-1.5")
                    pos = 0
                    while pos < len(completion):
                        n = rnd.randint(1, 9)
                        stream.feed(completion[pos:pos + n])
                        pos += n
                    stream.close()
                    if stream.result().to_dict() != streamed:
                        problems.append(("stream",))
                else:
                    _clear_tool_caches()
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            problems.append((type(exc).__name__, str(exc)[:200]))

    interval = sys.getswitchinterval()
    if collector == "off":
        gc.disable()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert gc.isenabled() == (collector == "on")
    finally:
        sys.setswitchinterval(interval)
        gc.enable()
    assert not problems, problems[:10]
