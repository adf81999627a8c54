"""StreamParser / parse_completion: model output read as it streams.

The laws (docs/streaming.md), property-tested per dialect on completions cut out of
rendered conversations (also mutated and truncated) and on generated model-like
completions (tool calls with arguments of every JSON shape, and malformed ones):

* final and chunking-independent: the deltas of any chunking spell, kind by kind, the
  same text as those of one feed, and never contradict the end result;
* the deltas agree with the structure: reasoning deltas spell the turn's thoughts,
  response deltas its response blocks, tool-call deltas its calls (names; arguments as
  written), tool-output deltas its outputs;
* the structure is lenient ``parse``'s reading of the same text (the last turn of
  ``parse(prompt + completion, strict=False)``), and a prompt's part of the turn only
  changes what the deltas start from;
* ``parse_completion`` is the stream fed at once; ``result()`` mid-stream is
  ``parse_completion`` of the text so far; bytes chunks read like the decoded text.

Examples per dialect: ``APERTUS_LAW_EXAMPLES`` // 2 (CI sets 10000).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import apertus_fast
from apertus_fast import Delta, ParseError, RenderError, StreamParser, parse, parse_completion, render
from apertus_fast._dialects import TOKEN_TEXT, Kind, get_dialect
from apertus_fast import _lex
from apertus_fast._parse import scan_str
from apertus_fast._stream import RESPONSE, THOUGHTS, TOOL_OUTPUT

from .fresh import source_module
from .strategies import DIALECTS, NAMES, SNIPPETS, json_values, render_inputs, texts

EXAMPLES = max(50, int(os.environ.get("APERTUS_LAW_EXAMPLES", "300")) // 2)
LAWS = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])

# ---------------------------------------------------------------------------------------
# helpers


def chunked(text: str, cuts) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    return [text[a:b] for a, b in zip([0] + points, points + [len(text)])]


def stream(chunks, dialect, prompt=None, fmt="auto"):
    """Feed the chunks; return (deltas, parser) after close."""
    p = StreamParser(dialect, prompt=prompt, format=fmt, call_id=lambda i: f"call_{i}")
    deltas = []
    for c in chunks:
        got = p.feed(c)
        assert all(isinstance(d, Delta) for d in got)
        deltas += got
    deltas += p.close()
    return deltas, p


def spelled(deltas):
    """What the deltas spell, kind by kind: thoughts text, response text, the calls as
    [name, arguments] lists, the outputs."""
    thoughts = "".join(d.text for d in deltas if d.kind == "thoughts")
    response = "".join(d.text for d in deltas if d.kind == "response")
    calls, outputs = [], []
    for d in deltas:
        assert d.kind in ("thoughts", "response", "tool_call", "tool_output"), d
        if d.kind == "tool_call":
            if d.name is not None:
                assert d.index == len(calls), (d, calls)
                calls.append([d.name, d.text])
            else:
                assert 0 <= d.index < len(calls), (d, calls)
                assert d.index == len(calls) - 1, "arguments of an earlier call after a later one"
                calls[d.index][1] += d.text
        elif d.kind == "tool_output":
            assert d.index == len(outputs)
            outputs.append(d.text)
        else:
            assert d.index == -1 and d.name is None
    return thoughts, response, calls, outputs


def structure(blocks):
    """The same four things, read from a turn's blocks."""
    thoughts = "".join(b["text"] for b in blocks if b["type"] == "thoughts")
    response = "".join(b["text"] for b in blocks if b["type"] == "response")
    calls = [[c["name"], c["arguments"]] for b in blocks if b["type"] == "tool_calls"
             for c in b["calls"]]
    outputs = [o["output"] for b in blocks if b["type"] == "tool_outputs" for o in b["outputs"]]
    return thoughts, response, calls, outputs


def last_turn(messages, blocks: bool):
    """The messages of the last assistant turn of a lenient parse: the trailing run of
    assistant (and, in string format, tool) messages, without the content-less user
    message the builder adds after a turn closed at the end."""
    messages = list(messages)
    if messages and messages[-1] == {"role": "user"}:
        messages.pop()
    roles = ("assistant",) if blocks else ("assistant", "tool")
    i = len(messages)
    while i and messages[i - 1]["role"] in roles:
        i -= 1
    return messages[i:]


def turn_spans(text, dialect):
    """(body start, body end) of every assistant turn in text: from just after an
    <|assistant_start|> to the next <|assistant_start|>, <|user_start|> or the end."""
    ev = scan_str(text, get_dialect(dialect))
    spans, start = [], None
    for j in range(0, len(ev), 3):
        kind, s, e = ev[j], ev[j + 1], ev[j + 2]
        if kind == Kind.ASSISTANT_START:
            if start is not None:
                spans.append((start, s))
            start = e
        elif kind == Kind.USER_START and start is not None:
            spans.append((start, s))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return spans


def turn_end(body, dialect):
    """Offset in body of the token that ends its turn (<|assistant_end|> or
    <|user_start|>), or len(body): a prompt may end anywhere before it."""
    ev = scan_str(body, get_dialect(dialect))
    for j in range(0, len(ev), 3):
        if ev[j] in (Kind.ASSISTANT_END, Kind.USER_START):
            return ev[j + 1]
    return len(body)


def check_laws(dialect, prompt_text, body, cut, chunk_cuts, data=None):
    """Every law for one turn: body is the turn's text after its <|assistant_start|>
    (prompt_text is what precedes that), cut splits it into the prompt's part and the
    completion, chunk_cuts cut the completion into chunks."""
    completion = body[cut:]
    prompt = prompt_text + body[:cut]
    one_deltas, one = stream([completion], dialect, prompt=prompt)
    deltas, p = stream(chunked(completion, chunk_cuts), dialect, prompt=prompt)
    result = p.result()
    # final, chunking-independent
    assert spelled(deltas) == spelled(one_deltas)
    assert not [w for w in result.warnings if w.startswith("internal")], result.warnings
    # the result is what the deltas spelled
    thoughts, response, calls, outputs = spelled(deltas)
    assert result.reasoning == thoughts and result.content == response
    assert [[c["name"], c["arguments"]] for c in result.tool_calls] == calls
    assert result.tool_outputs == outputs
    # parse_completion is the stream fed at once
    once = parse_completion(completion, dialect=dialect, prompt=prompt,
                            call_id=lambda i: f"call_{i}")
    for attr in ("messages", "reasoning", "content", "tool_calls", "tool_outputs",
                 "finish_reason", "closed", "rest", "warnings", "format", "text"):
        assert getattr(once, attr) == getattr(result, attr), attr
    assert once.openai() == result.openai()
    assert p.finish_reason == result.finish_reason
    # "tool_calls" only where the completion made calls (an OpenAI client runs them)
    assert result.finish_reason != "tool_calls" or result.tool_calls
    assert p.done == (result.closed or bool(result.rest))
    if p._prompt_closed_group:
        # The prompt's part ends with a whole "[a, b]" group (bracket dialects): the
        # prompt's end closes it, where the whole text read at once would take the run's
        # last "]" (docs/streaming.md). Laws 2 and 3 compare with that whole-text
        # reading; this case has its own test (test_a_group_the_prompt_ends_...).
        alone = StreamParser(dialect, prompt=prompt).result()   # the prompt's part alone
        assert alone.blocks[-1]["type"] == "tool_outputs"
        assert result.blocks[:len(alone.blocks)] == alone.blocks
        if TOOL_OUTPUT in {d.kind for d in deltas[:1]}:
            # not the prompt's group going on: a group of the completion's own, after
            # a call list of it that streamed nothing ("[]")
            rest = result.blocks[len(alone.blocks):]
            assert [b["type"] for b in rest[:2]] == ["tool_calls", "tool_outputs"], rest
            assert rest[0]["calls"] == []
        return
    # the deltas agree with the structure: the completion's share of the turn (the
    # turn's text is the prompt's part of it, then the completion)
    assert result.text.endswith(completion)
    full_deltas, full = stream([result.text], dialect)
    assert spelled(full_deltas) == structure(full.result().blocks)
    f_thoughts, f_response, f_calls, f_outputs = spelled(full_deltas)
    assert f_thoughts.endswith(thoughts) and f_response.endswith(response)
    assert len(calls) <= len(f_calls) and len(outputs) <= len(f_outputs)
    for (name, args), (f_name, f_args) in zip(calls[::-1], f_calls[::-1]):
        assert name == f_name and f_args.endswith(args)
    for o, f_o in zip(outputs[::-1], f_outputs[::-1]):
        assert f_o.endswith(o)
    if result.text == completion:
        assert spelled(deltas) == structure(result.blocks)
    assert result.blocks == full.result().blocks
    # the structure is lenient parse's reading of the last turn (of the text up to
    # where the turn ends; an empty turn there is the generation prompt)
    whole = prompt_text + body[:len(body) - len(result.rest)]
    for fmt in ("blocks", "string"):
        if not body[:len(body) - len(result.rest)]:
            break
        try:
            parsed = parse(whole, dialect=dialect, strict=False, format=fmt)
        except ValueError:   # string format cannot hold reasoning / empty calls
            continue
        if parsed.format != fmt:
            continue
        c = parse_completion(completion, dialect=dialect, prompt=prompt, format="auto")
        if fmt == "blocks":
            expected = [b for m in last_turn(parsed.messages, True) for b in m["content"]["blocks"]]
            assert c.blocks == expected
        elif c.format == "string":
            assert c.messages == last_turn(parsed.messages, False)
    # result() mid-stream is parse_completion of the text so far
    if data is not None and completion:
        k = data.draw(st.integers(0, len(completion)), label="snapshot at")
        q = StreamParser(dialect, prompt=prompt, call_id=lambda i: f"call_{i}")
        q.feed(completion[:k])
        snap = q.result()
        ref = parse_completion(completion[:k], dialect=dialect, prompt=prompt,
                               call_id=lambda i: f"call_{i}")
        assert (snap.messages, snap.reasoning, snap.content, snap.tool_calls, snap.warnings) == \
            (ref.messages, ref.reasoning, ref.content, ref.tool_calls, ref.warnings)
        q.feed(completion[k:])
        q.close()
        assert spelled_result(q.result()) == spelled_result(result)
    # bytes chunks read like the text
    try:
        raw = completion.encode("utf-8")
    except UnicodeEncodeError:
        return
    b_deltas, _ = stream([raw[a:b] for a, b in zip([0] + sorted(set(chunk_cuts)),
                                                   sorted(set(chunk_cuts)) + [len(raw)])
                          if a < b], dialect, prompt=prompt)
    assert spelled(b_deltas) == spelled(deltas)
    # result() mid-stream on bytes reads the characters decoded so far: a character
    # whose bytes are still arriving is no error, and not read yet
    if data is not None and raw:
        k = data.draw(st.integers(0, len(raw)), label="bytes snapshot at")
        q = StreamParser(dialect, prompt=prompt, call_id=lambda i: f"call_{i}")
        q.feed(raw[:k])
        snap = q.result()
        ref = parse_completion(raw[:k].decode("utf-8", "ignore"), dialect=dialect,
                               prompt=prompt, call_id=lambda i: f"call_{i}")
        assert (snap.messages, snap.reasoning, snap.content, snap.tool_calls) == \
            (ref.messages, ref.reasoning, ref.content, ref.tool_calls)


def spelled_result(r):
    return r.reasoning, r.content, r.tool_calls, r.tool_outputs, r.messages


# ---------------------------------------------------------------------------------------
# examples


def feed_chars(text, dialect="apertus-1.5", **kw):
    p = StreamParser(dialect, call_id=lambda i: f"call_{i}", **kw)
    out = []
    for ch in text:
        out.append(p.feed(ch))
    out.append(p.close())
    return out, p


def test_brackets_after_the_calls_are_text_where_outputs_have_tokens():
    # apertus-1.5 wraps tool outputs in tokens: "[1]" after the calls is the response,
    # not an output group as in the dialects that write outputs as "[a, b]"
    text = '<|tools_prefix|>[{"f": {}}]<|tools_suffix|>[1] after'
    r = parse_completion(text, dialect="apertus-1.5")
    assert (r.content, r.tool_outputs) == ("[1] after", [])
    deltas, _ = stream(list(text), "apertus-1.5")
    assert spelled(deltas) == ("", "[1] after", [["f", "{}"]], [])
    r = parse_completion(text, dialect="apertus-1")
    assert (r.content, r.tool_outputs) == (" after", ["1"])


def test_a_prompt_that_ends_inside_an_output_group_streams_the_rest_of_it():
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}, {"name": "g", "arguments": "{}"}]},
        {"type": "tool_outputs", "outputs": [{"output": '"a"'}, {"output": '"b"'}]},
        {"type": "response", "text": "ok"}]}}]
    text = render(messages, dialect="apertus-1.5", date="2026-01-01")
    cut = text.index('"a", ') + len('"a", ')
    for k in range(cut, len(text) + 1):
        deltas, _ = stream(chunked(text[cut:], [k - cut]), "apertus-1.5", prompt=text[:cut])
        assert spelled(deltas) == ("", "ok", [], ['"b"']), k


def test_a_number_in_call_arguments_streams_as_far_as_it_is_a_number():
    # "1e" and "1e+" are no number yet, so "e+" is held back until the "5" makes one.
    # Every other character is sent as it arrives, and nothing waits for close().
    text = '<|tools_prefix|>[{"f": 1e+5}, {"g": 2}]<|tools_suffix|>'
    p = StreamParser("apertus-1", call_id=lambda i: f"call_{i}")
    seen = [(i, d.index, d.name, d.text) for i, ch in enumerate(text) for d in p.feed(ch)]
    assert seen == [(22, 0, "f", ""), (23, 0, None, "1"), (26, 0, None, "e+5"),
                    (35, 1, "g", ""), (36, 1, None, "2")]
    assert p.close() == []


def test_reasoning_then_response_streams_as_it_arrives():
    text = "<|inner_prefix|>Add two and two.<|inner_suffix|>It is 4.<|assistant_end|>"
    per_char, p = feed_chars(text)
    flat = [d for ds in per_char for d in ds]
    assert spelled(flat) == ("Add two and two.", "It is 4.", [], [])
    # each character of text is out as soon as it is fed (the tokens are held back
    # only while they could still be tokens)
    at = text.index("two.") + 2
    assert per_char[at] == [Delta("thoughts", "o")]
    assert per_char[text.index("It is") + 1] == [Delta("response", "t")]
    assert p.done and p.finish_reason == "stop"
    r = p.result()
    assert r.messages == [{"role": "assistant", "content": {"blocks": [
        {"type": "thoughts", "text": "Add two and two."},
        {"type": "response", "text": "It is 4."}]}}]
    assert r.openai() == {"role": "assistant", "content": "It is 4.",
                          "reasoning_content": "Add two and two."}
    assert r.closed and r.rest == "" and r.warnings == []


def test_token_split_across_chunks_is_held_back_not_leaked():
    p = StreamParser("apertus-1")
    assert p.feed("<|inner_prefix|>Think<|inner_") == [Delta("thoughts", "Think")]
    assert p.feed("suffix|>Say") == [Delta("response", "Say")]
    assert p.feed("<|assist") == []
    assert p.feed("ant_end|>") == [] and p.done
    assert p.close() == []


def test_tool_calls_stream_names_first_then_arguments_as_written():
    text = ('<|inner_prefix|>Look it up.<|tools_prefix|>[{"get_weather": {"city": "Bern", '
            '"days": [1, 2]}}, {"time": {"tz": "CET"}}]<|tools_suffix|>')
    per_char, p = feed_chars(text)
    flat = [d for ds in per_char for d in ds]
    assert spelled(flat)[2] == [["get_weather", '{"city": "Bern", "days": [1, 2]}'],
                                ["time", '{"tz": "CET"}']]
    # the name is out once '": ' follows it; then the arguments, character by character
    name_at = text.index('": {"city"') + 2
    assert per_char[name_at] == [Delta("tool_call", "", 0, "get_weather")]
    assert per_char[name_at + 1] == [Delta("tool_call", "{", 0)]
    assert per_char[text.index("Bern") + 2] == [Delta("tool_call", "r", 0)]
    assert p.finish_reason == "tool_calls" and not p.done
    r = p.result()
    assert r.openai()["tool_calls"] == [
        {"id": "call_0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Bern", "days": [1, 2]}'}},
        {"id": "call_1", "type": "function", "function": {"name": "time", "arguments": '{"tz": "CET"}'}}]


def test_the_feed_that_closes_the_calls_says_stop_generating():
    p = StreamParser("apertus-1.5")
    p.feed('<|tools_prefix|>[{"f": {}}]<|tools_')
    assert p.finish_reason is None
    p.feed("suffix|>")
    assert p.finish_reason == "tool_calls" and not p.done   # the server runs the tools now
    p = StreamParser("apertus-1.5")
    p.feed("Done.<|assistant_end|>")
    assert p.done and p.finish_reason == "stop"


def test_completion_to_dict():
    c = parse_completion('<|inner_prefix|>a<|tools_prefix|>[{"f": 1}]<|tools_suffix|>',
                         dialect="apertus-1")
    assert c.to_dict() == {
        "content": "", "reasoning": "a", "tool_calls": [{"name": "f", "arguments": "1"}],
        "tool_outputs": [], "finish_reason": "tool_calls", "closed": False,
        "messages": [{"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "a"},
            {"type": "tool_calls", "calls": [{"name": "f", "arguments": "1"}]}]}}]}
    d = parse_completion("x<|assistant_end|>y", dialect="apertus-1").to_dict()
    assert d["rest"] == "y" and d["warnings"] == [
        "line 1, column 19: text after the end of the assistant turn"]
    assert json.loads(json.dumps(d)) == d


def test_openai_delta_merges_a_feed():
    p = StreamParser("apertus-1.5", call_id=lambda i: f"call_{i}")
    d1 = p.feed('<|inner_prefix|>Hm.<|inner_suffix|>Sure.<|tools_prefix|>[{"f": {"a": 1')
    assert p.openai_delta(d1) == {
        "reasoning_content": "Hm.", "content": "Sure.",
        "tool_calls": [{"index": 0, "id": "call_0", "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1'}}]}
    d2 = p.feed('}}, {"g": "x"}]<|tools_suffix|>')
    assert p.openai_delta(d2) == {"tool_calls": [
        {"index": 0, "function": {"arguments": "}"}},
        {"index": 1, "id": "call_1", "type": "function", "function": {"name": "g", "arguments": '"x"'}}]}
    assert p.openai_delta(p.close()) == {}


def test_default_call_ids_are_openai_like_and_stable_per_call():
    p = StreamParser("apertus-1.5")
    p.feed('<|tools_prefix|>[{"f": {}}, {"g": {}}]<|tools_suffix|>')
    p.close()
    ids = [c["id"] for c in p.result().openai()["tool_calls"]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") and len(i) == 29 for i in ids)
    assert [c["id"] for c in p.result().openai()["tool_calls"]] == ids


def test_call_ids_are_made_once_when_first_asked_for():
    asked = []

    def call_id(index):
        asked.append(index)
        return f"id{len(asked)}"

    text = '<|tools_prefix|>[{"f": {}}, {"g": {}}]<|tools_suffix|>'
    r = parse_completion(text, dialect="apertus-1.5", call_id=call_id)
    assert asked == []   # reading a completion does not make ids (uuid4 reads os.urandom)
    assert [c["id"] for c in r.openai()["tool_calls"]] == ["id1", "id2"]
    assert [c["id"] for c in r.openai()["tool_calls"]] == ["id1", "id2"] and asked == [0, 1]
    # streamed: the chunk's delta, a result mid-stream and the final result agree
    asked.clear()
    p = StreamParser("apertus-1.5", call_id=call_id)
    first = p.openai_delta(p.feed(text[:24]))["tool_calls"][0]["id"]
    mid = p.result().openai()["tool_calls"]
    p.feed(text[24:])
    p.close()
    final = [c["id"] for c in p.result().openai()["tool_calls"]]
    assert first == "id1" and [c["id"] for c in mid] == ["id1"] and final == ["id1", "id2"]
    assert asked == [0, 1]


@pytest.mark.parametrize("chunks, held", [
    # arguments holding "}, {" + '"' (an array of objects): from there on they wait
    # until the call's end is certain, since a call list "[{"f": [{"a": 1" could
    # also end there
    (['<|tools_prefix|>[{"f": [{"a": 1}, {"b": 2}]', '}, {"g": 3}]<|tools_suffix|>'],
     '[{"a": 1'),
    # a tail that may be the list's end is held
    (['<|tools_prefix|>[{"f": {"a": 1}}', ']<|tools_suffix|>'], '{"a": 1}'),
    (['<|tools_prefix|>[{"f": "x}', ']<|tools_suffix|>'], '"x'),
    # a number may go on, but only grow: its digits are out
    (['<|tools_prefix|>[{"f": 12', '3}]<|tools_suffix|>'], "12"),
    # ... unless they may be followed by junk that ends the arguments for the lenient
    # reading ("1 x}" is "1 x" for split_tool_calls, "1" for a cut-off list)
    (['<|tools_prefix|>[{"f": 1 x', '}]<|tools_suffix|>'], "1"),
])
def test_arguments_wait_where_the_call_could_still_end(chunks, held):
    p = StreamParser("apertus-1.5")
    first = p.feed(chunks[0])
    assert "".join(d.text for d in first if d.kind == "tool_call") == held
    rest = p.feed(chunks[1]) + p.close()
    calls = spelled(first + rest)[2]
    assert calls == [[c["name"], c["arguments"]] for c in p.result().tool_calls]


_NUMBER_TEXTS = st.text(st.sampled_from("0123456789.eE+-I}x "), min_size=1, max_size=14)


@given(text=_NUMBER_TEXTS.filter(lambda t: t[0] in "-0123456789"), cuts=st.lists(st.integers(1, 13)))
@settings(max_examples=EXAMPLES, deadline=None)
def test_a_number_is_counted_as_json_end_reads_it(text, cuts):
    """_Number follows a number a chunk at a time; its end is json_end's on the
    characters so far, whatever the chunking (ints past the digit limit included)."""
    from apertus_fast._parse import json_end
    from apertus_fast._stream import _Number

    for text in (text, "1" * 4295 + text, "-" + "1" * 4295 + text):
        number = _Number()
        at = 0
        for cut in sorted(set(c for c in cuts if c < len(text))) + [len(text)]:
            number.feed(text[at:cut])
            at = cut
            if not number.word:
                assert number.end() == json_end(text[:cut], 0), text[:cut]


@pytest.mark.parametrize("args", ['{"city": "Bern"}', "x y", '"s"', "12", "true", "[1, [2]]"])
def test_many_calls_in_one_chunk_are_not_copied_once_per_call(args):
    """A completion read at once (parse_completion, the completions command) holds its
    whole call list in one chunk: the reader copied the rest of the list for every
    call (40,000 calls: 3.3 s, growing fourfold per doubling). It reads in windows
    that double, as far as each call needs."""
    source = source_module("_stream")
    copied = [0]
    sliced = source._Calls._slice

    def counted_slice(self, a, b):
        copied[0] += max(0, b - a)
        return sliced(self, a, b)

    source._Calls._slice = counted_slice
    body = "[" + ", ".join(f'{{"f{i}": {args}}}' for i in range(2000)) + "]"
    p = source.StreamParser("apertus-1.5")
    deltas = p.feed("<|tools_prefix|>" + body + "<|tools_suffix|>") + p.close()
    assert [c["name"] for c in p.result().tool_calls] == [f"f{i}" for i in range(2000)]
    assert copied[0] < 20 * len(body), (copied[0], len(body))
    whole = StreamParser("apertus-1.5")
    assert spelled(deltas) == spelled(whole.feed("<|tools_prefix|>" + body + "<|tools_suffix|>")
                                      + whole.close())


@pytest.mark.parametrize("chunked", ["one chunk", "a character at a time"])
def test_many_bracket_outputs_are_read_in_linear_time(chunked):
    """A ``[a, b]`` group of tool outputs (apertus-1) with thousands of items: the reader
    fed the rest of the run to an item's watch for every item when they arrived in one
    chunk (parse_completion), and joined the whole run at every item when they arrived
    a character at a time; both quadratic (80,000 outputs: 1.7 s and 7 s). It reads each
    item in windows that double and joins the run once."""
    source = source_module("_stream")
    read = [0]
    watch_feed, json_end, held_run = source._JsonWatch.feed, source.json_end, source.StreamParser._held_run

    def counted_feed(self, s):
        read[0] += len(s)
        return watch_feed(self, s)

    def counted_json_end(s, pos):
        read[0] += len(s) - pos
        return json_end(s, pos)

    def counted_held_run(self):
        run = held_run(self)
        read[0] += len(run)
        return run

    source._JsonWatch.feed = counted_feed
    source.json_end = counted_json_end
    source.StreamParser._held_run = counted_held_run
    items = [('{"r": %d}', '"s%d"', "%d", "true", "[%d, null]", '"a, b]"')[i % 6].replace("%d", str(i))
             for i in range(3000)]
    run = "[" + ", ".join(items) + "] done"
    completion = '<|tools_prefix|>[{"f": 1}]<|tools_suffix|>' + run
    p = source.StreamParser("apertus-1")
    chunks = [completion] if chunked == "one chunk" else list(completion)
    deltas = [d for c in chunks for d in p.feed(c)] + p.close()
    assert p.result().tool_outputs == items
    assert read[0] < 20 * len(run), (read[0], len(run))
    whole = StreamParser("apertus-1")
    assert spelled(deltas) == spelled(whole.feed(completion) + whole.close())


@pytest.mark.parametrize("dialect, completion", [
    ("apertus-1.5", '<|tools_prefix|>[{"f": -1.' + "5" * 3000 + "e+" + "7" * 3000 + '}]<|tools_suffix|>'),
    ("apertus-1", '<|tools_prefix|>[{"f": 1}]<|tools_suffix|>[1.' + "5" * 3000 + ", 2" + "0" * 3000 + "]ok"),
])
def test_a_long_number_is_not_read_again_for_every_chunk(dialect, completion):
    """A number's end is counted as its characters arrive: fed a character at a time,
    the stream does not run json_end over the text so far (nor join it) per chunk,
    which made long numbers quadratic (20,000 digits: 16 s)."""
    source = source_module("_stream")
    calls = {"json_end": 0, "join": 0}
    json_end, held_run = source.json_end, source.StreamParser._held_run

    def counted_json_end(s, pos):
        calls["json_end"] += 1
        return json_end(s, pos)

    def counted_held_run(self):
        calls["join"] += 1
        return held_run(self)

    source.json_end = counted_json_end
    source.StreamParser._held_run = counted_held_run
    p = source.StreamParser(dialect)
    deltas = [d for ch in completion for d in p.feed(ch)] + p.close()
    assert calls["json_end"] + calls["join"] < 50, calls
    whole = StreamParser(dialect)
    assert spelled(deltas) == spelled(whole.feed(completion) + whole.close())
    want = parse_completion(completion, dialect=dialect)
    got = p.result()
    assert (got.tool_calls, got.tool_outputs, got.content) == \
        (want.tool_calls, want.tool_outputs, want.content)


def test_calls_stream_as_early_as_is_certain():
    p = StreamParser("apertus-1.5")
    assert p.feed('<|tools_prefix|>[{"f": 1') == [Delta("tool_call", "1", 0, "f")]
    # "12" followed by "}, {" + '"' ends the call: the next one streams at once
    assert p.feed('2}, {"g": [3') == [Delta("tool_call", "2", 0), Delta("tool_call", "[3", 1, "g")]
    # a "}" that may be followed by the list's "]" waits: '[{"f": {"a": "b"}]' reads
    # as arguments '{"a": "b"' (split_tool_calls' final "}]"); the call's own "}"
    # settles it, and "}, {" + '"' starts the next call
    p = StreamParser("apertus-1.5")
    assert p.feed('<|tools_prefix|>[{"f": {"a": "b"') == [Delta("tool_call", '{"a": "b"', 0, "f")]
    assert p.feed("}") == []
    assert p.feed("}") == [Delta("tool_call", "}", 0)]
    assert p.feed(",") == [] and p.feed(' {"') == []
    assert p.feed('h": ') == [Delta("tool_call", "", 1, "h")]
    # names with a quote or a newline wait for the end of the list
    p = StreamParser("apertus-1.5")
    assert p.feed('<|tools_prefix|>[{"a\nb": 1}, {"c": 2}') == []
    assert p.feed("]<|tools_suffix|>") == [Delta("tool_call", "1", 0, "a\nb"),
                                             Delta("tool_call", "2", 1, "c")]


def test_malformed_and_cut_off_calls_read_as_lenient_parse_reads_them():
    for text in ['<|tools_prefix|>[{"f": {"a": 1 x}, {"g": 2}]<|tools_suffix|>',
                 '<|tools_prefix|>[{"f": {"a": 1 x}, {"g": 2',
                 '<|tools_prefix|>[{"f": {"city": "Be',
                 '<|tools_prefix|>{"f": 1}, {"g": 2}<|tools_suffix|>Done.',
                 '<|tools_prefix|>[{"a"b": 1}]<|tools_suffix|>',
                 '<|tools_prefix|>[]<|tools_suffix|>',
                 '<|tools_prefix|>not json<|inner_suffix|>ok',
                 # JSON written otherwise than the template writes it (docs/format.md, 7)
                 '<|tools_prefix|>[{"f": {"a": 1}},{"g": [2]}]<|tools_suffix|>',
                 '<|tools_prefix|> [\n {"f": 1},\n {"g": 2}\n]<|tools_suffix|>',
                 '<|tools_prefix|>[{ "f" : 1 }, {"g": 2}]']:
        for dialect in DIALECTS:
            check_laws(dialect, "<|assistant_start|>", text, 0, range(len(text)))
            check_laws(dialect, "<|assistant_start|>", text, 0, [])


def test_a_compact_call_list_streams_its_first_call_at_once_and_the_rest_at_the_end():
    p = StreamParser("apertus-1.5")
    # (a "}" at the end may begin the final "}]": held back)
    assert p.feed('<|tools_prefix|>[{"f": {"a": 1}') == [Delta("tool_call", '{"a": 1', 0, "f")]
    # the arguments' JSON value is complete; '},{"g"' could still be more of them (the
    # written form reads arguments that are not JSON up to '}, {"'): the rest waits
    assert p.feed('},{"g": [2]}]') == [Delta("tool_call", "}", 0)]
    assert p.feed("<|tools_suffix|>") == [Delta("tool_call", "[2]", 1, "g")]
    assert p.result().tool_calls == [{"name": "f", "arguments": '{"a": 1}'},
                                     {"name": "g", "arguments": "[2]"}]
    assert p.result().warnings == [
        "line 1, column 17: read 2 tool call(s) as JSON from a list not written as the "
        "template writes it '[{\"f\": {\"a\": 1}},{\"g\": [2]}]'"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_finish_reason_is_tool_calls_only_for_calls_the_completion_made(dialect):
    """A call list of none ("[]", or text no reading takes for calls) and the calls
    of the prompt are no calls of the completion: an OpenAI-compatible server would
    send finish_reason "tool_calls" with no tool_calls (stream audit)."""
    for completion, reason in [("<|tools_prefix|>[]<|tools_suffix|>Done.<|assistant_end|>", "stop"),
                               # (a list of none ends where a server stops: "stop")
                               ("<|tools_prefix|>oops<|tools_suffix|>", "stop"),
                               ("<|tools_prefix|>[]<|tools_suffix|>", "stop"),
                               ("<|tools_prefix|>[]<|tools_suffix|>Do", None),
                               ("<|tools_prefix|>[]", None),
                               ('<|tools_prefix|>[{"f": 1}]<|tools_suffix|>', "tool_calls"),
                               ('<|tools_prefix|>[{"f": 1}]<|tools_suffix|>Done.<|assistant_end|>',
                                "tool_calls"),
                               ('<|tools_prefix|>[{"f": 1}]<|tools_suffix|><|tools_prefix|>[]'
                                "<|tools_suffix|>", "stop")]:
        r = parse_completion(completion, dialect=dialect)
        assert r.finish_reason == reason, completion
        p = StreamParser(dialect)
        for ch in completion:
            p.feed(ch)
        assert p.finish_reason == reason
    if dialect == "apertus-1.5":
        # outputs opened after the calls, cut off: no longer waiting, before close()
        # as after it, in one chunk as in many (it said "tool_calls" until close, audit)
        completion = '<|tools_prefix|>[{"f": {}}]<|tools_suffix|><|tool_output_start|>sunny'
        assert parse_completion(completion, dialect=dialect).finish_reason is None
        for chunks in ([completion], list(completion), [completion[:-5], "sunny"]):
            p = StreamParser(dialect)
            for chunk in chunks:
                p.feed(chunk)
            assert (p.finish_reason, p.result().finish_reason) == (None, None)
            p.close()
            assert p.finish_reason is None
    msgs = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": {"blocks": [
                {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": "{}"}]}]}}]
    prompt = render(msgs, dialect=dialect, continue_assistant_message=True)
    assert StreamParser(dialect, prompt=prompt).finish_reason == "stop"
    # a list the prompt began and the completion closed, with no call of its own
    p = StreamParser(dialect, prompt="<|assistant_start|><|tools_prefix|>[{\"f\": {}}")
    p.feed("]<|tools_suffix|>")
    p.close()
    assert (p.finish_reason, p.result().tool_calls) == ("stop", [])
    r = parse_completion("I could not check.<|assistant_end|>", dialect=dialect, prompt=prompt)
    assert (r.finish_reason, r.tool_calls, r.closed) == ("stop", [], True)


def test_a_completion_cut_inside_a_character_is_read_without_it():
    """Bytes cut inside a character at the end (a token limit): read without them, with
    a warning, as parse(strict=False) reads them (close() raised, parse_completion
    too, where lenient reading recovers from any other truncation: parse audit)."""
    head = '<|tools_prefix|>[{"f": 1}]<|tools_suffix|>[sunny] Gr'
    for partial in (b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98"):
        cut = head.encode() + partial
        p = StreamParser("apertus-1")
        deltas = p.feed(cut) + p.close()
        r = p.result()
        assert (r.tool_outputs, r.content, r.finish_reason) == (["sunny"], " Gr", None)
        assert spelled(deltas)[1] == " Gr"
        assert r.warnings == [f"line 1, column {len(head) + 1}: the completion ends inside "
                              f"a UTF-8 character: its {len(partial)} byte(s) dropped"]
        once = parse_completion(cut, dialect="apertus-1")
        assert (once.content, once.warnings) == (r.content, r.warnings)
        lenient = parse(cut, dialect="apertus-1", strict=False)
        assert lenient.messages[-1] == {"role": "assistant", "content": " Gr"}
        assert lenient.warnings[-1].endswith("byte(s) dropped")


def test_invalid_utf8_ends_the_stream_with_what_decoded_before_it():
    """A byte stream holding a bad byte: the error closes the parser, and result() is
    the reading of the text decoded before the bad byte, the held-back text included,
    as close() would finish it. Its fields lacked what the parser held back while its
    messages had it (stream audit)."""
    p = StreamParser("apertus-1")
    p.feed(b'<|tools_prefix|>[{"f": 1}]<|tools_suffix|>[sunny] ok \xc3')
    with pytest.raises(ParseError):
        p.feed(b"(")
    r = p.result()
    assert (r.tool_outputs, r.content, r.finish_reason) == (["sunny"], " ok ", None)
    assert r.messages[1:] == [{"role": "tool", "content": "sunny"},
                              {"role": "assistant", "content": " ok "}]
    p = StreamParser("apertus-1.5")
    p.feed(b"abc <|inn")
    with pytest.raises(ParseError) as info:
        p.feed(b"er\xffmore")
    assert info.value.offset == 11
    # the deltas of the finished reading: close() returns them (the deltas spell the
    # result, law 2), then nothing
    assert p.closed and p.close() == [Delta("response", "<|inner")] and p.close() == []
    r = p.result()
    assert r.content == "abc <|inner" == r.messages[0]["content"] and r.text == "abc <|inner"
    p = StreamParser("apertus-1.5")
    p.feed(b"<|inner_prefix|>Hm<|inner_suffix|>Yes")
    with pytest.raises(ParseError):
        p.feed(b"\xe2\x82!<|assistant_end|>")
    r = p.result()
    assert (r.reasoning, r.content, r.closed, r.finish_reason) == ("Hm", "Yes", False, None)


def test_cut_off_completion_has_no_finish_reason_and_keeps_what_there_is():
    r = parse_completion('<|inner_prefix|>Let me<|tools_prefix|>[{"search": {"q": "Ber',
                         dialect="apertus-1")
    assert r.finish_reason is None and not r.closed
    assert r.reasoning == "Let me"
    assert r.tool_calls == [{"name": "search", "arguments": '{"q": "Ber'}]
    assert any("not closed" in w for w in r.warnings)


def test_bracket_outputs_after_calls_are_outputs_then_text():
    body = ('<|tools_prefix|>[{"f": {}}]<|tools_suffix|>[{"t": 21}, "ok"]'
            'It is 21.<|assistant_end|>')
    per_char, p = feed_chars(body, dialect="apertus-1")
    flat = [d for ds in per_char for d in ds]
    assert spelled(flat) == ("", "It is 21.", [["f", "{}"]], ['{"t": 21}', '"ok"'])
    # decided at the "]" that closes the JSON items, not at the end of the run
    close = body.index("]It is")
    assert [d.kind for d in per_char[close]] == ["tool_output", "tool_output"]
    assert p.finish_reason == "stop"
    # a number as the last item is decided at the "]" too: no character after it can
    # make the number longer (it waited for the next chunk, or close())
    calls = '<|tools_prefix|>[{"f": {}}]<|tools_suffix|>'
    for run, outputs in (("[1]", ["1"]), ("[1, -2.5e+3]", ["1", "-2.5e+3"]), ('["a", 0]', ['"a"', "0"])):
        p = StreamParser("apertus-1")
        p.feed(calls)
        assert p.feed(run) == [Delta("tool_output", o, i) for i, o in enumerate(outputs)]
    # ... while a number that may still grow waits for what follows it
    p = StreamParser("apertus-1")
    p.feed(calls)
    assert p.feed("[1, 2e") == []
    assert p.feed("5]") == [Delta("tool_output", "1", 0), Delta("tool_output", "2e5", 1)]
    # a non-JSON item reaches to the run's last "]" (docs/format.md, 6): decided only
    # where the run ends; a run without "]" is text
    p = StreamParser("apertus-1")
    assert p.feed('<|tools_prefix|>[{"f": {}}]<|tools_suffix|>[note] see [1] ') == \
        [Delta("tool_call", "{}", 0, "f")]
    assert p.feed("above<|assistant_end|>") == [Delta("tool_output", "note] see [1", 0),
                                                 Delta("response", " above")]
    r = parse_completion('<|tools_prefix|>[{"f": {}}]<|tools_suffix|>[note see above',
                         dialect="apertus-1")
    assert r.content == "[note see above" and r.tool_outputs == []


def test_tool_output_tokens_in_apertus_1_5():
    r = parse_completion('<|tools_prefix|>[{"f": {}}]<|tools_suffix|><|tool_output_start|>'
                         '{"t": 21}, sunny, warm<|tool_output_end|>Warm.', dialect="apertus-1.5")
    assert r.tool_outputs == ['{"t": 21}', "sunny, warm"]
    assert r.content == "Warm." and r.finish_reason is None


def test_think_tags_are_reasoning_in_apertus_1_5_only():
    r = parse_completion("<think>hmm</think>Yes.", dialect="apertus-1.5")
    assert (r.reasoning, r.content) == ("hmm", "Yes.")
    r = parse_completion("<think>hmm</think>Yes.", dialect="apertus-1")
    assert (r.reasoning, r.content) == ("", "<think>hmm</think>Yes.")


def test_text_after_the_turn_is_rest_not_deltas():
    p = StreamParser("apertus-1")
    d = p.feed("Hi.<|assistant_end|><|user_start|>more")
    assert d == [Delta("response", "Hi.")] and p.done
    assert p.feed(" text") == [] and p.close() == []
    r = p.result()
    assert r.rest == "<|user_start|>more text" and r.closed
    assert r.warnings == ["line 1, column 21: text after the end of the assistant turn"]
    # a user turn the model starts without closing its own
    r = parse_completion("Hi.<|user_start|>Q", dialect="apertus-1")
    assert r.content == "Hi." and r.rest == "<|user_start|>Q" and not r.closed
    assert r.finish_reason == "stop"


def test_prompt_ending_inside_reasoning_continues_it():
    messages = [
        {"role": "user", "content": "Weather in Bern?"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "Look it up."},
            {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]},
            {"type": "tool_outputs", "outputs": [{"output": '{"temp_c": 21}'}]}]}},
    ]
    for dialect in DIALECTS:
        prompt = render(messages, dialect=dialect, continue_assistant_message=True,
                        date="2026-01-01")
        r = parse_completion(" It is warm.<|inner_suffix|>21 °C in Bern.<|assistant_end|>",
                             dialect=dialect, prompt=prompt)
        assert (r.reasoning, r.content, r.tool_calls) == (" It is warm.", "21 °C in Bern.", [])
        # the turn includes the prompt's part
        assert r.blocks == [
            {"type": "thoughts", "text": "Look it up."},
            {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]},
            {"type": "tool_outputs", "outputs": [{"output": '{"temp_c": 21}'}]},
            {"type": "thoughts", "text": " It is warm."},
            {"type": "response", "text": "21 °C in Bern."}]
        # without the prompt the same text is read as a response
        assert parse_completion(" It is warm.<|inner_suffix|>21", dialect=dialect).content == \
            " It is warm.21"


_PLAIN = st.lists(st.sampled_from(list("ab ]['(),.\né") + ["[link](url)"]),
                  max_size=12).map("".join)


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(50, EXAMPLES // 4), deadline=None)
@given(outputs=st.lists(_PLAIN, min_size=1, max_size=3), answer=_PLAIN,
       thinking=st.booleans(), cuts=st.lists(st.integers(0, 40), max_size=6))
@example(outputs=["sunny"], answer="See [MeteoSwiss](https://x).", thinking=False, cuts=[])
@example(outputs=["sunny"], answer="See [MeteoSwiss](https://x).", thinking=True, cuts=[3])
def test_a_group_the_prompt_ends_with_is_closed_by_the_prompt(dialect, outputs, answer,
                                                              thinking, cuts):
    """After tool outputs the server continues the turn with the outputs at the end of
    the prompt. In the bracket dialects those are plain ``[a, b]`` text, and a
    non-JSON output may hold ``]``: the prompt's end closes the group, so the model's
    answer (``[link](url)`` included) is the answer, streamed as it comes, and the
    outputs are the tool messages'."""
    head = [{"type": "thoughts", "text": "Look."}] if thinking else []
    messages = [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": {"blocks": head + [
                    {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]},
                    {"type": "tool_outputs", "outputs": [{"output": o} for o in outputs]}]}}]
    prompt = render(messages, dialect=dialect, continue_assistant_message=True,
                    date="2026-01-01")
    completion = answer + "<|assistant_end|>"
    deltas, p = stream(chunked(completion, cuts), dialect, prompt=prompt)
    r = p.result()
    assert {d.kind for d in deltas} == ({THOUGHTS if thinking else RESPONSE} if answer else set())
    assert "".join(d.text for d in deltas) == answer
    assert (r.reasoning if thinking else r.content) == answer and r.tool_outputs == []
    # the outputs are the prompt's reading of them (non-JSON items are themselves
    # ambiguous, docs/format.md ambiguity 6), not more of the run
    prompt_turn = parse(prompt, dialect=dialect, strict=False, format="blocks").messages[-1]
    assert [b for b in r.blocks if b["type"] == "tool_outputs"] == [
        b for b in prompt_turn["content"]["blocks"] if b["type"] == "tool_outputs"]
    assert r.closed and r.finish_reason == "stop"
    said = [b["text"] for b in r.blocks if b["type"] == ("thoughts" if thinking else "response")]
    assert not answer or said[-1].endswith(answer)
    last = r.messages[-1]["content"]   # the messages read the turn the same way
    assert not answer or (last if isinstance(last, str) else last["blocks"][-1]["text"]).endswith(answer)
    once = parse_completion(completion, dialect=dialect, prompt=prompt)
    assert (once.messages, once.blocks) == (r.messages, r.blocks)
    # each character is streamed when it comes, not held back to the end of the turn
    q = StreamParser(dialect, prompt=prompt)
    assert "".join(d.text for ch in answer for d in q.feed(ch)) == answer


def test_prompt_with_generation_prompt_is_the_same_as_none():
    prompt = render([{"role": "user", "content": "Hi"}], dialect="apertus-1.5",
                    add_generation_prompt=True, date="2026-01-01")
    a = parse_completion("<|inner_prefix|>x<|inner_suffix|>Hello!", dialect="apertus-1.5", prompt=prompt)
    b = parse_completion("<|inner_prefix|>x<|inner_suffix|>Hello!", dialect="apertus-1.5")
    assert (a.messages, a.reasoning, a.content) == (b.messages, b.reasoning, b.content)


def test_prompt_must_end_inside_an_assistant_turn():
    prompt = render([{"role": "user", "content": "Hi"}], dialect="apertus-1", date="2026-01-01")
    with pytest.raises(ValueError, match="does not end inside an assistant turn"):
        StreamParser("apertus-1", prompt=prompt)
    with pytest.raises(TypeError):
        StreamParser("apertus-1", prompt=b"<|assistant_start|>")


def test_bytes_chunks_may_split_characters():
    text = "<|inner_prefix|>Grüezi 😀<|inner_suffix|>日本語".encode()
    p = StreamParser("apertus-1.5")
    deltas = []
    for i in range(len(text)):
        deltas += p.feed(text[i:i + 1])
    deltas += p.close()
    assert spelled(deltas)[:2] == ("Grüezi 😀", "日本語")
    assert parse_completion(text, dialect="apertus-1.5").content == "日本語"


def test_result_mid_stream_waits_for_a_character_still_arriving():
    """A snapshot taken while a character's bytes are split between chunks reads the
    text before it; the stream goes on and reads the character when it is complete."""
    p = StreamParser("apertus-1.5")
    p.feed("<|inner_prefix|>caf".encode() + "é".encode()[:1])
    assert p.result().reasoning == "caf"
    p.feed("é".encode()[1:] + "😀".encode()[:3])
    assert p.result().reasoning == "café"
    p.feed("😀".encode()[3:])
    assert p.result().reasoning == "café😀"
    p.feed(b"\xe2\x82")
    # at the end, a cut character is dropped with a warning (lenient reading)
    assert p.close() == [] and p.result().reasoning == "café😀"
    assert p.result().warnings[-1].endswith("its 2 byte(s) dropped")


def test_invalid_utf8_is_a_parse_error_that_says_where():
    p = StreamParser("apertus-1")
    p.feed(b"Hello\nw")
    with pytest.raises(ParseError) as info:
        p.feed(b"or\xffld")
    err = info.value
    assert (err.offset, err.line, err.column, err.expected) == (9, 2, 4, "valid UTF-8")
    assert "invalid start byte: ff" in err.found
    assert p.closed
    p = StreamParser("apertus-1")
    p.feed(b"ok \xe2\x82")
    with pytest.raises(ParseError) as info:
        p.feed(b"!")
    assert info.value.offset == 3
    with pytest.raises(ParseError):
        parse_completion(b"\xc0\x80", dialect="apertus-1")


def test_invalid_utf8_after_a_prompt_counts_the_completion_only():
    prompt = "<|user_start|>Hi<|user_end|><|assistant_start|><|inner_prefix|>Long\nthoughts"
    p = StreamParser("apertus-1", prompt=prompt)
    assert p.feed("é\n".encode()) == [Delta("thoughts", "é\n")]
    with pytest.raises(ParseError) as info:
        p.feed(b"ok\xe2(")
    assert (info.value.offset, info.value.line, info.value.column) == (5, 2, 3)


def test_misuse_is_a_clear_error():
    p = StreamParser("apertus-1")
    p.feed("a")
    with pytest.raises(TypeError, match="cannot mix"):
        p.feed(b"b")
    with pytest.raises(TypeError):
        p.feed(3)
    p.close()
    assert p.close() == []
    with pytest.raises(ValueError, match="after close"):
        p.feed("c")
    with pytest.raises(TypeError):
        parse_completion(None, dialect="apertus-1")
    with pytest.raises(ValueError, match="format"):
        StreamParser("apertus-1", format="json")
    with pytest.raises(ValueError, match="cannot represent reasoning"):
        parse_completion("<|inner_prefix|>x", dialect="apertus-1", format="string")


@pytest.mark.parametrize("prompt", [b"", 0, [], b"<|assistant_start|>", bytearray()])
def test_a_prompt_that_is_not_a_str_is_a_type_error_even_when_empty(prompt):
    """The audit (N2): ``if prompt:`` came before the type check, so an empty b"", 0 or
    [] was silently no prompt while a non-empty bytes prompt was a TypeError."""
    with pytest.raises(TypeError, match="prompt must be a str or None, not "):
        parse_completion("x", dialect="apertus-1.5", prompt=prompt)
    with pytest.raises(TypeError, match="prompt must be a str or None, not "):
        StreamParser("apertus-1.5", prompt=prompt)


def test_an_empty_str_prompt_is_no_prompt():
    assert parse_completion("x", dialect="apertus-1.5", prompt="").to_dict() == \
        parse_completion("x", dialect="apertus-1.5", prompt=None).to_dict()

    class Empty(str):   # (a subclass's truth is its characters', as for parse)
        def __len__(self):
            return 1

    assert parse_completion("x", dialect="apertus-1.5", prompt=Empty()).content == "x"


@pytest.mark.parametrize("bad", [("response", "x", -1, None), {"kind": "response", "text": "x"},
                                 "response", None])
def test_openai_delta_takes_deltas_and_says_so(bad):
    """The audit (N3): a tuple or dict raised ``AttributeError: 'tuple' object has no
    attribute 'kind'``, with no word of what was expected."""
    p = StreamParser("apertus-1.5")
    good = p.feed("Hi")
    with pytest.raises(TypeError, match="openai_delta takes the Delta objects"):
        p.openai_delta([*good, bad])


@pytest.mark.parametrize("index", [3, -1, 0])
def test_openai_delta_refuses_a_call_delta_of_no_call_of_this_parser(index):
    """A call's Delta from another parser (or made by hand) raised a bare IndexError
    from looking its id up (audit)."""
    p = StreamParser("apertus-1.5")
    p.feed("Hi")
    with pytest.raises(TypeError, match="it has made no call"):
        p.openai_delta([Delta("tool_call", "{}", index, "f")])


def test_openai_delta_reads_a_generator_of_deltas_whole():
    p = StreamParser("apertus-1.5", call_id=lambda i: f"c{i}")
    deltas = p.feed('<|inner_prefix|>Hm.<|inner_suffix|>Hi<|tools_prefix|>[{"f": {}}]<|tools_suffix|>')
    assert p.openai_delta(iter(deltas)) == p.openai_delta(deltas) == {
        "reasoning_content": "Hm.", "content": "Hi", "tool_calls": [
            {"index": 0, "id": "c0", "type": "function",
             "function": {"name": "f", "arguments": "{}"}}]}


@pytest.mark.parametrize("made", [0, None, b"call_0", ["call_0"]])
def test_a_call_id_that_is_not_a_str_is_a_type_error(made):
    """The audit (N4): what ``call_id`` returned became the OpenAI id whatever it was
    (an int, None, bytes), breaking the client that reads it."""
    completion = '<|tools_prefix|>[{"f": {}}]<|tools_suffix|>'
    p = StreamParser("apertus-1.5", call_id=lambda i: made)
    deltas = p.feed(completion)
    with pytest.raises(TypeError, match=r"call_id\(0\) must return a str .*, returned "
                                        + type(made).__name__):
        p.openai_delta(deltas)
    with pytest.raises(TypeError, match=r"call_id\(0\) must return a str"):
        parse_completion(completion, dialect="apertus-1.5", call_id=lambda i: made).openai()
    with pytest.raises(TypeError, match="call_id must be a callable"):
        StreamParser("apertus-1.5", call_id="call_0")


@pytest.mark.parametrize("empty", ["", b"", bytearray(), memoryview(b"")])
@pytest.mark.parametrize("then", ["<|inner_prefix|>é<|inner_suffix|>ok", b"<|inner_prefix|>\xc3\xa9<|inner_suffix|>ok"])
def test_an_empty_chunk_does_not_fix_the_streams_type(empty, then):
    """The audit (N8): ``feed("")`` (a server's usual first delta) fixed the stream as
    str, so the bytes chunks that followed were a TypeError. An empty chunk carries no
    data: it fixes nothing and mixes nothing, before or after the data."""
    p = StreamParser("apertus-1.5")
    assert p.feed(empty) == []
    deltas = p.feed(then)
    deltas += p.feed(empty)
    deltas += p.close()
    assert [(d.kind, d.text) for d in deltas] == [("thoughts", "é"), ("response", "ok")]
    lx = _lex.Lexer("apertus-1.5")
    assert lx.feed(empty) == []
    assert lx.pending_text() == type(bytes(empty) if isinstance(empty, memoryview) else empty)()
    events = lx.feed(then)
    events += lx.feed(empty)
    assert events + lx.close() == _lex.lex(then, "apertus-1.5")


def test_result_mid_stream_leaves_the_stream_going():
    p = StreamParser("apertus-1.5", call_id=lambda i: f"call_{i}")
    p.feed('<|inner_prefix|>a<|tools_prefix|>[{"f": {"x": ')
    snap = p.result()
    assert snap.tool_calls == [{"name": "f", "arguments": '{"x": '}]
    assert snap.finish_reason is None
    p.feed('1}}]<|tools_suffix|>')
    p.close()
    assert p.result().tool_calls == [{"name": "f", "arguments": '{"x": 1}'}]


def test_copies_and_pickles_continue_independently():
    import copy
    import pickle

    p = StreamParser("apertus-1.5", call_id=str)
    p.feed('<|inner_prefix|>a<|tools_prefix|>[{"f": {"x": ')
    twins = [copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))]
    out = p.feed('1}}]<|tools_suffix|>') + p.close()
    assert p.result().tool_calls == [{"name": "f", "arguments": '{"x": 1}'}]
    for q in twins:
        assert q.dialect is p.dialect and not q.closed
        # another continuation of the same stream: the original is untouched by it
        got = q.feed('2}}, {"g": 3}]<|tools_suffix|>Hi') + q.close()
        assert got != out
        assert q.result().tool_calls == [{"name": "f", "arguments": '{"x": 2}'},
                                         {"name": "g", "arguments": "3"}]
        assert q.result().text.endswith("Hi") and not p.result().text.endswith("Hi")
    assert p.result().tool_calls == [{"name": "f", "arguments": '{"x": 1}'}]


def test_the_pickled_state_is_every_attribute():
    """``_STATE`` names what ``__getstate__`` keeps (the compiled StreamParser has no
    ``__dict__``): every attribute of a parser, mid-stream, but the scanner's module and
    table; and the compiled class declares each (``_stream.pxd``)."""
    import pickle

    source = source_module("_stream")
    p = source.StreamParser("apertus-1", prompt="<|assistant_start|>x", call_id=str)
    p.feed('<|tools_prefix|>[{"f": 1')
    assert set(vars(p)) == set(source._STATE) | {"_core", "_table"}
    compiled = StreamParser("apertus-1", prompt="<|assistant_start|>x", call_id=str)
    compiled.feed('<|tools_prefix|>[{"f": 1')
    assert set(p.__getstate__()) == set(compiled.__getstate__()) == set(source._STATE)
    state = compiled.__getstate__()
    again = pickle.loads(pickle.dumps(compiled)).__getstate__()
    assert {k: v for k, v in again.items() if k != "_calls"} == \
        {k: v for k, v in state.items() if k != "_calls"}


class _Tagged(StreamParser):
    """A subclass with its own attribute and a close() that reads it."""

    def __init__(self, *args, request_id, **kwargs):
        super().__init__(*args, **kwargs)
        self.request_id = request_id

    def close(self):
        assert self.request_id == "r7"
        return super().close()


def test_subclasses_keep_their_attributes_and_parsers_are_like_plain_objects():
    # (the compiled class is a cdef class: it has an instance dict and weak references
    # all the same, and every pickle protocol works)
    import copy
    import pickle
    import weakref

    p = _Tagged("apertus-1.5", request_id="r7")
    p.feed("Hello")
    assert p.result().content == "Hello"   # (result() closes a copy)
    for q in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(q) is _Tagged and q.request_id == "r7"
    plain = StreamParser("apertus-1.5")
    plain.note = 1
    assert weakref.ref(plain)() is plain and plain.note == 1
    plain.feed('<|tools_prefix|>[{"f": {"a": 1')
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(plain, protocol))
        assert again.note == 1
        assert again.feed("}}]<|tools_suffix|>") + again.close() == [Delta("tool_call", "}", 0, None)]


def test_a_stream_pickled_by_one_build_continues_in_the_other(tmp_path):
    """A parser in the middle of a call list, pickled by this build, is read back by the
    other (the pure one from a copy of the sources; the compiled one, where it is, from
    the package itself), and the other's pickle here."""
    import pickle
    import shutil

    import apertus_fast

    pure = tmp_path / "pure"
    shutil.copytree(pathlib.Path(apertus_fast.__file__).parent, pure / "apertus_fast",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    p = StreamParser("apertus-1.5")
    p.feed('<|inner_prefix|>r<|tools_prefix|>[{"f": {"a": 1')
    (tmp_path / "here.pkl").write_bytes(pickle.dumps(p))
    code = (
        "import pickle, sys\n"
        f"sys.path.insert(0, {str(pure)!r})\n"
        "import apertus_fast\n"
        "assert apertus_fast.BACKEND == 'python', apertus_fast.BACKEND\n"
        f"q = pickle.loads(open({str(tmp_path / 'here.pkl')!r}, 'rb').read())\n"
        "q.feed('}}]<|tools_suffix|>'); q.close()\n"
        "print(q.result().tool_calls)\n"
        "r = apertus_fast.StreamParser('apertus-1.5')\n"
        "r.feed('<|tools_prefix|>[{\"g\": [1')\n"
        f"open({str(tmp_path / 'there.pkl')!r}, 'wb').write(pickle.dumps(r))\n")
    env = dict(os.environ, PYTHONPATH="")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[{'name': 'f', 'arguments': '{\"a\": 1}'}]"
    r = pickle.loads((tmp_path / "there.pkl").read_bytes())
    r.feed("]}]<|tools_suffix|>")
    r.close()
    assert r.result().tool_calls == [{"name": "g", "arguments": "[1]"}]


def test_str_subclass_chunks_are_read_as_their_characters():
    # markupsafe's Markup escapes the other side of a +: chunks and prompts are taken
    # as plain str, so that joining them does not change the text
    class Escaping(str):
        def __add__(self, other):
            return Escaping(str.__add__(self, other.replace("<", "&lt;")))

        def __radd__(self, other):
            return Escaping(str.__add__(other.replace("<", "&lt;"), self))

    p = StreamParser("apertus-1.5", prompt=Escaping("<|assistant_start|>a <"))
    deltas = p.feed(Escaping("b & c<|assist")) + p.feed(Escaping("ant_end|>")) + p.close()
    assert [(d.kind, d.text, type(d.text)) for d in deltas] == [("response", "b & c", str)]
    assert p.done


def test_exported_and_documented():
    for name in ("StreamParser", "Delta", "Completion", "parse_completion"):
        assert name in apertus_fast.__all__ and getattr(apertus_fast, name).__doc__


# ---------------------------------------------------------------------------------------
# laws on rendered conversations


def rendered_turn(data, dialect):
    kwargs = data.draw(render_inputs(dialect), label="conversation")
    try:
        text = render(dialect=dialect, **kwargs)
    except RenderError:
        assume(False)
    spans = turn_spans(text, dialect)
    assume(spans)
    start, end = data.draw(st.sampled_from(spans), label="turn")
    return text[:start], text[start:end]


@pytest.mark.parametrize("dialect", DIALECTS)
@LAWS
@given(data=st.data())
def test_laws_on_rendered_turns(dialect, data):
    prompt_text, body = rendered_turn(data, dialect)
    cut = data.draw(st.integers(0, turn_end(body, dialect)), label="prompt's part")
    completion = len(body) - cut
    cuts = data.draw(st.lists(st.integers(0, completion), max_size=12), label="chunks")
    check_laws(dialect, prompt_text, body, cut, cuts, data)


#: Text a model (or a corrupted corpus) may put anywhere.
_GARBAGE = ["", "x", "[", "]", "}", "{", '{"', '": ', "}, {", '}, {"', ", ", "}]", '"', "\\",
            "1", "-", "e", "<", "<|", "\n"]


@pytest.mark.parametrize("dialect", DIALECTS)
@LAWS
@given(data=st.data())
def test_laws_on_mutated_and_cut_off_turns(dialect, data):
    prompt_text, body = rendered_turn(data, dialect)
    spellings = [t for k, t in TOKEN_TEXT.items() if k in get_dialect(dialect).token_kinds]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        at = data.draw(st.integers(0, len(body)), label="at")
        drop = data.draw(st.integers(0, 8), label="drop")
        insert = data.draw(st.sampled_from(_GARBAGE + spellings), label="insert")
        body = body[:at] + insert + body[at + drop:]
    body = body[:data.draw(st.integers(0, len(body)), label="cut off at")]
    cut = data.draw(st.integers(0, turn_end(body, dialect)), label="prompt's part")
    cuts = data.draw(st.lists(st.integers(0, len(body) - cut), max_size=12), label="chunks")
    check_laws(dialect, prompt_text, body, cut, cuts, data)


# ---------------------------------------------------------------------------------------
# laws on generated model-like completions


@st.composite
def call_texts(draw):
    """One call as a model writes it: '{"NAME": ARGUMENTS}' with JSON arguments of any
    shape (arrays of objects, strings holding separators, numbers at the end), or
    something malformed."""
    name = draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(["f", "a\"b", "x\ny", "q"])))
    args = draw(st.one_of(
        json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
        json_values.map(json.dumps),
        st.sampled_from(['[{"a": 1}, {"b": 2}]', '{"s": "}, {\\"x\\": 1"}', "12", "-1e5",
                         "true", '"x"', "{}", "[]", '{"a": [{"b": {}}, {"c": []}]}',
                         "1 x", '{"a": 1} junk', "", "{", '{"a": "b', "nul"]),
        texts))
    # mostly as the template writes it; sometimes with the whitespace JSON allows
    head = draw(st.sampled_from(['{"%s": ', '{"%s": ', '{"%s": ', '{ "%s" : ', '{\n  "%s":']))
    return head % name + args + draw(st.sampled_from(["}", "}", "}", " }", "\n}"]))


@st.composite
def openai_call_texts(draw):
    """One call in OpenAI's shape, as a model of another format may write it:
    ``{"name": NAME, "arguments": ARGUMENTS}`` (arguments a JSON value, or JSON text in a
    JSON string as OpenAI's API writes it), ``{"type": "function", "function": {...}}``,
    keys in either order, with an id; or a near miss (a key too many or too few)."""
    name = json.dumps(draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(["name", "é\"x"]))))
    args = draw(st.one_of(json_values.map(json.dumps),
                          json_values.map(lambda v: json.dumps(json.dumps(v))),
                          st.sampled_from(["{}", '"}, {\\"x\\": 1"', "[1, 2]", "x"])))
    members = [f'"name": {name}', f'"arguments": {args}']
    if draw(st.booleans()):
        members.reverse()
    shape = draw(st.integers(0, 5))
    if shape == 1:
        members = ['"type": "function"', '"function": {' + ", ".join(members) + "}"]
    elif shape == 2:
        members.insert(0, '"id": "call_1"')
    elif shape == 3:
        members.pop(draw(st.integers(0, 1)))
    elif shape == 4:
        members.append('"extra": 1')
    sep = draw(st.sampled_from([", ", ", ", ",", ",\n "]))
    return "{" + sep.join(members) + "}"


@st.composite
def completions(draw, dialect):
    d = get_dialect(dialect)
    brackets = d.tool_output_open == "["
    pieces = []
    for _ in range(draw(st.integers(0, 8))):
        what = draw(st.integers(0, 9))
        if what <= 2:
            pieces.append(draw(st.one_of(texts, st.sampled_from(SNIPPETS))))
        elif what == 3:
            pieces.append(draw(st.sampled_from(["<|inner_prefix|>", "<|inner_suffix|>",
                                                "<think>", "</think>"])))
        elif what <= 5:
            calls = draw(st.lists(call_texts(), max_size=3) | st.lists(openai_call_texts(),
                                                                        max_size=3))
            sep = draw(st.sampled_from([", ", ", ", ",", ",\n", " , "]))
            ws = draw(st.sampled_from(["", "", "", " ", "\n"]))
            pieces.append("<|tools_prefix|>" + draw(st.sampled_from(["", "", " "])) + "["
                          + ws + sep.join(calls) + ws + "]"
                          + draw(st.sampled_from(["<|tools_suffix|>", "<|tools_suffix|>", ""])))
        elif what == 6:
            outs = draw(st.lists(st.one_of(json_values.map(json.dumps), texts), max_size=3))
            if brackets:
                pieces.append("[" + ", ".join(outs) + "]")
            else:
                pieces.append("<|tool_output_start|>" + ", ".join(outs) + "<|tool_output_end|>")
        elif what == 7:
            pieces.append(draw(st.sampled_from(_GARBAGE)))
        elif what == 8:
            pieces.append(draw(st.sampled_from(
                [t for k, t in TOKEN_TEXT.items() if k in d.token_kinds])))
        else:
            pieces.append("<|assistant_end|>")
    text = "".join(pieces)
    return text[:draw(st.integers(0, len(text)))] if draw(st.booleans()) else text


@pytest.mark.parametrize("dialect", DIALECTS)
@LAWS
@given(data=st.data())
@example(data=None)
def test_laws_on_generated_completions(dialect, data):
    if data is None:   # (an explicit example: the tool-call reader's trickiest case)
        text = '<|tools_prefix|>[{"f": [{"a": 1}, {"b": 2}] x}, {"g": 1}]<|tools_suffix|>'
        check_laws(dialect, "<|assistant_start|>", text, 0, range(len(text)))
        return
    body = data.draw(completions(dialect), label="completion")
    cut = data.draw(st.integers(0, turn_end(body, dialect)), label="prompt's part")
    cuts = data.draw(st.one_of(st.lists(st.integers(0, len(body) - cut), max_size=16),
                               st.just(range(len(body) - cut + 1))), label="chunks")
    check_laws(dialect, "<|assistant_start|>", body, cut, cuts, data)


def test_think_inside_tool_outputs_is_output_text_in_the_stream_too():
    """Lenient reading keeps <think> inside a <|tool_output_start|> group as text of the
    outputs (docs/format.md, 15); the stream read it as reasoning, so its deltas and
    fields contradicted its own messages (review finding; the law tests found
    '<|tool_output_start|><think>')."""
    for text, output in [("<|tool_output_start|><think>why</think>sunny<|tool_output_end|>ok",
                          "<think>why</think>sunny"),
                         ("<|tool_output_start|><think>", "<think>")]:
        per_char, p = feed_chars(text, dialect="apertus-1.5")
        deltas = [d for ds in per_char for d in ds]
        r = p.result()
        assert spelled(deltas)[3] == r.tool_outputs == [output]
        assert r.reasoning == "" and r.format == "string"
        assert {"role": "tool", "content": output} in r.messages
        once = parse_completion(text, dialect="apertus-1.5")
        assert (once.tool_outputs, once.messages) == (r.tool_outputs, r.messages)


# --------------------------------------------------------------------------- the result

_TURN = '<|inner_prefix|>t<|inner_suffix|><|tools_prefix|>[{"f": {}}, {"g": 1}]<|tools_suffix|>'


@pytest.mark.parametrize("protocol", range(6))
def test_a_completion_pickles_at_every_protocol_without_its_parser(protocol):
    """A Completion held its parser's bound ``_id`` method: it kept the whole parser
    alive, a ``call_id=lambda ...`` made it unpicklable even after every id was made,
    and protocols 0 and 1 raised (slots without __getstate__) (audit). Pickling makes
    the ids that are not made yet, and keeps them."""
    import copy
    import gc
    import pickle
    import weakref

    p = StreamParser("apertus-1.5", call_id=lambda i: f"call_{i}")
    p.feed(_TURN)
    p.close()
    c = p.result()
    alive = weakref.ref(p)
    del p
    gc.collect()
    assert alive() is None
    again = pickle.loads(pickle.dumps(c, protocol=protocol))
    assert again == c and again.openai() == c.openai() and again.blocks == c.blocks
    assert [t["id"] for t in again.openai()["tool_calls"]] == ["call_0", "call_1"]
    assert again._dialect is get_dialect("apertus-1.5")   # (a built-in one by its name)
    assert copy.deepcopy(c).openai() == c.openai()
    # the default ids too: made once, the same in the copy
    c = parse_completion(_TURN, dialect="apertus-1.5")
    assert pickle.loads(pickle.dumps(c, protocol=protocol)).openai() == c.openai()
    # a subclass's own attributes come along
    tagged = _TaggedCompletion.__new__(_TaggedCompletion)
    tagged.__setstate__(c.__getstate__())
    tagged.source = "a.jsonl"
    again = pickle.loads(pickle.dumps(tagged, protocol=protocol))
    assert type(again) is _TaggedCompletion and again.source == "a.jsonl" and again == c


class _TaggedCompletion(__import__("apertus_fast").Completion):
    pass


def test_the_ids_are_the_parsers_whoever_asks_first():
    p = StreamParser("apertus-1.5")
    deltas = p.feed(_TURN)
    first = p.result().openai()["tool_calls"][0]["id"]       # the result asks first
    merged = p.openai_delta(deltas + p.close())
    assert merged["tool_calls"][0]["id"] == first
    assert p.result().openai()["tool_calls"][1]["id"] == merged["tool_calls"][1]["id"]


def test_completions_compare_by_value():
    """No ``__eq__``: two readings of one text were unequal (audit)."""
    a, b = (parse_completion(_TURN, dialect="apertus-1.5") for _ in range(2))
    assert a == b and a != parse_completion(_TURN, dialect="apertus-1")
    assert a != parse_completion(_TURN + "x", dialect="apertus-1.5")
    # one turn cut at two places: the same text, two openai() contents (review)
    prompt = render([{"role": "user", "content": "q"},
                     {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "hm"}]}}],
                    dialect="apertus-1.5", continue_assistant_message=True)
    early = parse_completion("<|inner_suffix|>", dialect="apertus-1.5", prompt=prompt)
    late = parse_completion("", dialect="apertus-1.5", prompt=prompt + "<|inner_suffix|>")
    assert early.text == late.text and early.openai() != late.openai() and early != late


def test_closing_the_prompts_reasoning_is_an_answer_that_began():
    """``openai()["content"]`` is ``""`` where the completion closed its reasoning; it
    was ``None`` where the reasoning it closed was the prompt's (the completion's own
    was empty), so ``reasoning_to_blocks`` put no empty response, no ``<|inner_suffix|>``
    (audit)."""
    prompt = render([{"role": "user", "content": "q"},
                     {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "hm"}]}}],
                    dialect="apertus-1.5", continue_assistant_message=True)
    closed = parse_completion("<|inner_suffix|><|assistant_end|>", dialect="apertus-1.5", prompt=prompt)
    assert closed.openai()["content"] == ""
    assert parse_completion("more<|assistant_end|>", dialect="apertus-1.5",
                            prompt=prompt).openai()["content"] is None
    assert parse_completion("<|inner_prefix|>a<|inner_suffix|>", dialect="apertus-1.5").openai() == \
        {"role": "assistant", "content": "", "reasoning_content": "a"}
    assert parse_completion("hi", dialect="apertus-1.5").openai()["content"] == "hi"
    assert parse_completion("<|tools_prefix|>[]<|tools_suffix|>",
                            dialect="apertus-1.5").openai()["content"] is None
    # tokens that close no reasoning of the turn are none (review): a </think> that is
    # a tool output's text, a token after the turn's end, one that closed nothing
    calls = '<|tools_prefix|>[{"f": {}}]<|tools_suffix|>'
    for dialect, text in [("apertus-1.5", calls + "<|tool_output_start|>a</think>b<|tool_output_end|>"),
                          ("apertus-1", calls + "<|assistant_end|><|user_start|>x<|inner_suffix|>"),
                          ("apertus-1.5", "<|assistant_end|><|inner_prefix|>a<|inner_suffix|>"),
                          ("apertus-1", calls + "<|inner_suffix|>")]:
        assert parse_completion(text, dialect=dialect).openai()["content"] is None, text
    # a stream pickled before the parser kept this (its reasoning tells, as it did)
    p = StreamParser("apertus-1.5")
    p.feed("<|inner_prefix|>a<|inner_suffix|>")
    state = p.__getstate__()
    del state["_closed_inner"]
    again = StreamParser.__new__(StreamParser)
    again.__setstate__(state)
    again.close()
    assert again.result().openai()["content"] == ""


def test_a_completion_reads_its_blocks_with_a_dialect_of_your_own():
    """``blocks`` looked the dialect up by its name: one of your own was unknown."""
    import dataclasses

    mine = dataclasses.replace(get_dialect("apertus-1.5"), name="mine-1.5")
    c = parse_completion("<|inner_prefix|>t<|inner_suffix|>yo<|assistant_end|>", dialect=mine)
    assert c.dialect == "mine-1.5"
    assert c.blocks == [{"type": "thoughts", "text": "t"}, {"type": "response", "text": "yo"}]
    # a stream pickled mid-way goes on with it (it was looked up by its name: unknown)
    import pickle

    prompt = "You are terse."
    other = dataclasses.replace(get_dialect("apertus-1.5"), default_system=prompt)
    for d in (mine, other):
        p = StreamParser(d)
        p.feed("<|inner_prefix|>t<|inner")
        again = pickle.loads(pickle.dumps(p))
        assert again.dialect == d
        again.feed("_suffix|>yo<|assistant_end|>")
        again.close()
        assert again.result().blocks == c.blocks
    assert pickle.loads(pickle.dumps(StreamParser("apertus-1"))).dialect is get_dialect("apertus-1")


def test_results_pickled_by_the_version_before_load():
    """Pickles of the earlier results (their slots as the default pickling wrote them;
    a Completion's ``_id``, its parser's bound method) still load."""
    from apertus_fast import ParsedConversation
    from apertus_fast._stream import Completion

    p = StreamParser("apertus-1.5")
    p.feed(_TURN)
    p.close()
    now = p.result()
    old = {name: getattr(now, name) for name in ("dialect", "text", "reasoning", "content",
           "tool_calls", "tool_outputs", "finish_reason", "closed", "rest", "warnings",
           "messages", "format", "_events", "_blocks", "_group_end", "_answered")}
    old["_id"] = p._id
    c = Completion.__new__(Completion)
    c.__setstate__((None, old))
    assert c == now and c.openai() == now.openai() and c.blocks == now.blocks
    parsed = parse(render([{"role": "user", "content": "hi"}], tools=[{"name": "f", "description": "d"}]))
    old = {name: getattr(parsed, name) for name in ("messages", "dialect", "enable_thinking",
           "add_generation_prompt", "continue_assistant_message", "tools_text", "bos_token",
           "date", "format", "warnings")}
    old["_tool_names"] = []
    back = ParsedConversation.__new__(ParsedConversation)
    back.__setstate__((None, old))
    assert back == parsed and back.tool_names == ["f"] and back.render() == parsed.render()


def _plain(sig):
    """A signature's parameters without annotations (a text signature has none)."""
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("build", ["installed", "source"])
def test_stream_parser_has_its_signature_and_doc_in_both_builds(build):
    """inspect.signature and help() show StreamParser's arguments in the compiled build
    too (a cdef class: its __init__ is a slot wrapper, the signature comes from the
    docstring's first line), and they are __init__'s; __doc__ starts with the prose."""
    import inspect

    source = source_module("_stream").StreamParser
    cls = StreamParser if build == "installed" else source
    init = inspect.signature(source.__init__)
    expected = _plain(init)[1:]   # (without self)
    assert _plain(inspect.signature(cls)) == expected
    assert [name for name, _, _ in expected] == ["dialect", "prompt", "format", "call_id"]
    assert cls.__doc__.startswith("Reads an assistant turn as it streams")
    assert "\n--\n" not in cls.__doc__


@pytest.mark.parametrize("head", ["", "<|inner_prefix|>", '<|tools_prefix|>[{"f": {}}]<|tools_suffix|><|tool_output_start|>',
                                  "done<|assistant_end|>", '<|tools_prefix|>[{"f": {"x": "'])
def test_many_small_chunks_are_kept_in_few_pieces(head):
    """A model streams a few characters a chunk; the parser keeps the text (for the
    result) in lists that are only joined whole, and kept each chunk as its own str:
    about 25 bytes a character in each list (leak audit). The short pieces are now
    joined as they come: few pieces, the same text."""
    p = StreamParser("apertus-1.5")
    p.feed(head)
    pieces = []
    for i in range(20_000):
        piece = f"{i % 10}bc "
        pieces.append(piece)
        p.feed(piece)
    text = head + "".join(pieces)
    assert len(p._chunks) < 300 and "".join(p._chunks) == text
    calls = (p._calls.parts, p._calls.starts) if p._calls is not None else ()
    for kept in (p._reasoning, p._content, p._group, *calls,
                 *(args for _name, args, _id in p._tool_calls)):
        assert len(kept) < 300
    p.close()
    result = p.result()
    c = parse_completion(text, dialect="apertus-1.5")
    assert result.tool_calls == c.tool_calls
    assert (result.reasoning, result.content, result.tool_outputs, result.rest) == \
        (c.reasoning, c.content, c.tool_outputs, c.rest)
