"""Reasoning beside an assistant message's content (``reasoning_content``, as OpenAI-style
servers return it): found by ``unrendered_reasoning``, moved into ``thoughts`` blocks by
``reasoning_to_blocks``, warned about or converted by the command line.

Laws: ``reasoning_to_blocks([c.openai()])`` holds the blocks ``c.messages`` holds for a
completion ``c`` that reasons, then answers, then calls tools; rendering the converted
OpenAI message gives the text the completion was read from; the input is never modified.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import apertus_fast
from apertus_fast import RenderError, cli, parse_completion, reasoning_to_blocks, render, unrendered_reasoning
from tests import strategies as S

DATE = "2026-01-01"
USER = {"role": "user", "content": "Weather in Bern?"}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'}}


def test_exported():
    assert apertus_fast.REASONING_FIELDS == ("reasoning_content", "reasoning", "thinking")
    assert "reasoning_to_blocks" in apertus_fast.__all__ and "unrendered_reasoning" in apertus_fast.__all__


def test_unrendered_reasoning_finds_what_render_drops():
    messages = [USER,
                {"role": "assistant", "content": "Sunny.", "reasoning_content": "Check."},
                {"role": "user", "content": "And Zug?", "reasoning_content": "not an assistant"},
                {"role": "assistant", "content": "Rain.", "reasoning": "", "thinking": "Hm."},
                {"role": "assistant", "content": "x", "reasoning_content": None, "reasoning": 3}]
    assert unrendered_reasoning(messages) == [(1, "reasoning_content"), (3, "thinking"), (4, "reasoning")]
    # reasoning that is not a string is dropped too (reasoning_to_blocks rejects it)
    listed = [USER, {"role": "assistant", "content": "x", "thinking": [{"type": "text", "text": "Hm."}]}]
    assert unrendered_reasoning(listed) == [(1, "thinking")]
    with pytest.raises(RenderError, match='"thinking": expected a string'):
        reasoning_to_blocks(listed)
    assert unrendered_reasoning("not a list") == []
    # it is dropped: the text is the same without it
    kept = render(messages[:2], date=DATE)
    assert "Check." not in kept
    assert kept == render([USER, {"role": "assistant", "content": "Sunny."}], date=DATE)


def test_messages_that_are_other_mappings():
    """``render`` reads any mapping as it reads a dict; the helpers looked at dicts
    only, so the reasoning of a ``UserDict`` or ``MappingProxyType`` message was not
    found, not moved, and dropped by the render (odd-input audit). And a dict whose
    iteration hides a key: the shortcut over the keys missed its reasoning, which
    ``reasoning_to_blocks`` moved."""
    from collections import UserDict
    from types import MappingProxyType

    class Hidden(dict):
        def __iter__(self):
            return iter([k for k in dict.keys(self) if k != "reasoning_content"])

    for wrap in (UserDict, MappingProxyType, Hidden):
        messages = [USER, wrap({"role": "assistant", "content": "Sunny.", "reasoning_content": "Check.",
                                "tool_calls": [MappingProxyType(CALL)]})]
        assert unrendered_reasoning(messages) == [(1, "reasoning_content")], wrap
        moved = reasoning_to_blocks(messages)
        assert moved[1]["content"] == {"blocks": [
            {"type": "thoughts", "text": "Check."}, {"type": "response", "text": "Sunny."},
            {"type": "tool_calls", "calls": [{"name": CALL["function"]["name"],
                                              "arguments": CALL["function"]["arguments"]}]}]}
        assert "Check." in render(moved, date=DATE)
    # tuples where render takes them (calls, blocks), as lists (review)
    moved = reasoning_to_blocks([USER, {"role": "assistant", "content": "Sunny.", "reasoning": "Check.",
                                        "tool_calls": (CALL,)}])
    assert moved[1]["content"]["blocks"][-1]["type"] == "tool_calls"
    moved = reasoning_to_blocks([USER, {"role": "assistant", "reasoning": "Check.",
                                        "content": {"blocks": ({"type": "response", "text": "Sunny."},)}}])
    assert [b["type"] for b in moved[1]["content"]["blocks"]] == ["thoughts", "response"]
    moved = reasoning_to_blocks([USER, {"role": "assistant", "reasoning": "Check.",
                                        "content": ({"type": "text", "text": "Sunny."},)}])
    assert moved[1]["content"]["blocks"][-1] == {"type": "response", "text": "Sunny."}
    # block content given as another mapping keeps its blocks, after the reasoning
    blocks = UserDict({"blocks": [{"type": "response", "text": "Sunny."}]})
    moved = reasoning_to_blocks([USER, UserDict({"role": "assistant", "content": blocks,
                                                 "reasoning": "Check."})])
    assert moved[1]["content"]["blocks"] == [{"type": "thoughts", "text": "Check."},
                                             {"type": "response", "text": "Sunny."}]


def test_without_reasoning_the_messages_come_back_as_they_are():
    messages = [USER, {"role": "assistant", "content": "Sunny.", "tool_calls": [CALL]},
                {"role": "tool", "content": "21"}]
    out = reasoning_to_blocks(messages)
    assert out == messages and out is not messages
    assert all(a is b for a, b in zip(out, messages))
    assert reasoning_to_blocks(tuple(messages)) == messages


def test_without_reasoning_null_content_becomes_the_empty_string():
    """OpenAI's message with only tool calls has ``content: null`` (or none); the
    templates need a string, so the conversion renders whether or not another
    message in the conversation has reasoning."""
    for calls_only in ({"role": "assistant", "content": None, "tool_calls": [CALL]},
                       {"role": "assistant", "tool_calls": [CALL]}):
        before = copy.deepcopy(calls_only)
        out = reasoning_to_blocks([USER, calls_only])
        assert calls_only == before
        assert out == [USER, {**calls_only, "content": ""}]
        for dialect in S.DIALECTS:
            assert '[{"get_weather": {"city": "Bern"}}]' in render(out, dialect=dialect, date=DATE)


def test_only_assistant_null_content_becomes_the_empty_string():
    # (a user or tool message's null content is the caller's to fix or to have
    # rejected by render: it is left as it is)
    messages = [{"role": "user", "content": None}, {"role": "assistant", "content": None},
                {"role": "tool", "content": None}]
    assert reasoning_to_blocks(messages) == [messages[0], {"role": "assistant", "content": ""},
                                             messages[2]]


def test_an_empty_reasoning_field_is_no_reasoning():
    # servers send "reasoning_content": "" for a turn without thinking: no thoughts
    # block, and no disagreement with another field that has the reasoning
    message = {"role": "assistant", "content": "Hi.", "reasoning_content": ""}
    assert reasoning_to_blocks([message]) == [message]
    (out,) = reasoning_to_blocks([{**message, "reasoning": "Greet."}])
    assert out["content"]["blocks"] == [{"type": "thoughts", "text": "Greet."},
                                        {"type": "response", "text": "Hi."}]


def test_a_call_with_a_name_of_its_own_is_read_as_it_is():
    # only a call without "name" is read from its OpenAI "function" object
    call = {"name": "a", "arguments": "1", "function": {"name": "b", "arguments": "2"}}
    (out,) = reasoning_to_blocks([{"role": "assistant", "content": "", "reasoning": "R.",
                                   "tool_calls": [call]}])
    assert out["content"]["blocks"][-1] == {"type": "tool_calls",
                                           "calls": [{"name": "a", "arguments": "1"}]}


@pytest.mark.parametrize("message, blocks", [
    ({"role": "assistant", "content": "4.", "reasoning_content": "2+2."},
     [{"type": "thoughts", "text": "2+2."}, {"type": "response", "text": "4."}]),
    ({"role": "assistant", "content": None, "reasoning_content": "Need data.", "tool_calls": [CALL]},
     [{"type": "thoughts", "text": "Need data."},
      {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]}]),
    ({"role": "assistant", "content": "Checking.", "reasoning": "Hm.",
      "tool_calls": [CALL, {"name": "now", "arguments": {}}]},
     [{"type": "thoughts", "text": "Hm."}, {"type": "response", "text": "Checking."},
      {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'},
                                        {"name": "now", "arguments": {}}]}]),
    ({"role": "assistant", "content": [{"type": "text", "text": "Sun"}, {"type": "text", "text": "ny."}],
      "thinking": "Look."},
     [{"type": "thoughts", "text": "Look."}, {"type": "response", "text": "Sunny."}]),
    ({"role": "assistant", "content": {"blocks": [{"type": "response", "text": "Sunny."}]},
      "reasoning_content": "Look."},
     [{"type": "thoughts", "text": "Look."}, {"type": "response", "text": "Sunny."}]),
    ({"role": "assistant", "content": "", "reasoning_content": "Only thinking."},
     [{"type": "thoughts", "text": "Only thinking."}, {"type": "response", "text": ""}]),
    ({"role": "assistant", "content": None, "reasoning_content": "Still thinking."},
     [{"type": "thoughts", "text": "Still thinking."}]),
    ({"role": "assistant", "reasoning_content": "Still thinking."},
     [{"type": "thoughts", "text": "Still thinking."}]),
    ({"role": "assistant", "content": "", "reasoning_content": "Done.", "tool_calls": [CALL]},
     [{"type": "thoughts", "text": "Done."}, {"type": "response", "text": ""},
      {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]}]),
    ({"role": "assistant", "content": "Same.", "reasoning_content": "R.", "reasoning": "R."},
     [{"type": "thoughts", "text": "R."}, {"type": "response", "text": "Same."}]),
], ids=["answer", "calls", "answer-and-calls", "text-parts", "blocks", "empty-answer",
        "null-answer", "no-content", "empty-answer-and-calls", "two-equal-fields"])
def test_openai_messages(message, blocks):
    before = copy.deepcopy(message)
    (out,) = reasoning_to_blocks([message])
    assert message == before
    assert out == {"role": "assistant", "content": {"blocks": blocks}}


def test_every_assistant_message_gets_blocks_and_other_keys_stay():
    messages = [{"role": "system", "content": "Be brief."}, USER,
                {"role": "assistant", "content": None, "reasoning_content": "Look it up.",
                 "tool_calls": [CALL], "name": "bot"},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"t": 21}'},
                {"role": "assistant", "content": "21 degrees."}]
    out = reasoning_to_blocks(messages)
    assert out[:2] == messages[:2] and out[3] is messages[3]
    assert out[2] == {"role": "assistant", "name": "bot", "content": {"blocks": [
        {"type": "thoughts", "text": "Look it up."},
        {"type": "tool_calls", "calls": [{"name": "get_weather", "arguments": '{"city": "Bern"}'}]}]}}
    assert out[4] == {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "21 degrees."}]}}
    for dialect in S.DIALECTS:
        text = render(out, dialect=dialect, date=DATE)
        assert "<|inner_prefix|>Look it up.<|tools_prefix|>" in text, dialect


@pytest.mark.parametrize("messages, index, words", [
    ([USER, {"role": "assistant", "content": "x", "reasoning_content": 3}], 1, '"reasoning_content": expected a string'),
    ([USER, {"role": "assistant", "content": "x", "reasoning_content": "a", "thinking": "b"}], 1,
     'hold different reasoning'),
    ([USER, {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "t"}]},
             "reasoning": "r"}], 1, "both a thoughts block and a reasoning field"),
    ([USER, {"role": "assistant", "content": 5, "reasoning": "r"}], 1, "assistant content: expected"),
    ([USER, {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "reasoning": "r"}], 1,
     "an assistant content part"),
    ([USER, {"role": "assistant", "content": {"parts": []}, "reasoning": "r"}], 1, 'without a "blocks" list'),
    ([USER, {"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": {"name": "x"}}], 1,
     '"tool_calls": expected a list'),
    ([USER, {"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": [{"function": "x"}]}], 1,
     "a tool call: expected"),
    ([USER, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b", "reasoning": "r",
                                                    "tool_calls": ["x"]}], 2, "a tool call"),
    # a call that is not a function call: the templates refuse it ("Invalid tool call
    # type"); it was turned into a function call (audit)
    ([USER, {"role": "assistant", "content": None, "reasoning": "r", "tool_calls": [
        {"id": "c", "type": "retrieval", "function": {"name": "f", "arguments": "{}"}}]}], 1,
     'a tool call of "type" \'retrieval\': only "function" calls'),
    ([USER, {"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": [
        {"type": None, "name": "f", "arguments": "{}"}]}], 1, 'a tool call of "type" None'),
])
def test_errors_name_the_message(messages, index, words):
    with pytest.raises(RenderError) as info:
        reasoning_to_blocks(messages)
    assert info.value.message_index == index
    assert f"message {index}: " in str(info.value) and words in str(info.value)


def test_messages_must_be_a_list():
    with pytest.raises(RenderError, match="messages: expected a list, got dict"):
        reasoning_to_blocks({"role": "user"})


# --- laws -------------------------------------------------------------------------------

_plain = st.text(st.characters(codec="utf-8", exclude_characters="<>\\\"[]{}"), min_size=1, max_size=30)


@st.composite
def canonical_turns(draw):
    """An assistant turn as blocks in the order a model writes them: reasoning (or
    not), then an answer (or not; after reasoning, maybe an empty one: the reasoning
    closed, then calls or the end), then tool calls (or not); at least one of the last
    two."""
    blocks = [{"type": "thoughts", "text": draw(_plain)}] if draw(st.booleans()) else []
    if draw(st.booleans()):
        empty = bool(blocks) and draw(st.booleans())
        blocks.append({"type": "response", "text": "" if empty else draw(_plain)})
    n = draw(st.integers(0 if blocks and blocks[-1]["type"] == "response" else 1, 2))
    if n:
        calls = [{"name": draw(st.sampled_from(["get_weather", "search", "now"])),
                  "arguments": json.dumps({"q": draw(_plain)}, ensure_ascii=False)} for _ in range(n)]
        blocks.append({"type": "tool_calls", "calls": calls})
    return blocks


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=150, deadline=None)
@given(blocks=canonical_turns())
def test_completion_openai_converts_back(dialect, blocks):
    conversation = [USER, {"role": "assistant", "content": {"blocks": blocks}}]
    text = render(conversation, dialect=dialect, date=DATE)
    prompt, sep, completion = text.rpartition("<|assistant_start|>")
    c = parse_completion(completion, dialect=dialect)
    assert c.blocks == blocks
    message = c.openai()
    before = copy.deepcopy(message)
    (back,) = reasoning_to_blocks([message])
    assert message == before
    if blocks[0]["type"] == "thoughts":
        assert back == c.messages[0]
    assert render([USER, back], dialect=dialect, date=DATE) == text


@pytest.mark.parametrize("dialect", S.DIALECTS)
@settings(max_examples=100, deadline=None)
@given(data=st.data(), reasoning=st.lists(st.one_of(st.none(), _plain), min_size=1, max_size=4))
def test_generated_conversations(dialect, data, reasoning):
    """On generated conversations with reasoning added to assistant messages: the input
    is not modified, the reasoning ends up in the first block of its message, and the
    result renders or fails with RenderError (never another exception)."""
    inputs = data.draw(S.render_inputs(dialect), label="inputs")
    messages = copy.deepcopy(inputs["messages"])
    k = 0
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant":
            if reasoning[k % len(reasoning)] is not None:
                m["reasoning_content"] = reasoning[k % len(reasoning)]
            k += 1
    before = copy.deepcopy(messages)
    try:
        out = reasoning_to_blocks(messages)
    except RenderError as exc:
        assert messages == before
        assert exc.message_index is not None
        return
    assert messages == before
    assert unrendered_reasoning(out) == []
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("reasoning_content"):
            assert out[i]["content"]["blocks"][0] == {"type": "thoughts", "text": m["reasoning_content"]}
    try:
        render(out, dialect=dialect, tools=inputs.get("tools"), date=DATE)
    except RenderError:
        pass


# --- command line -----------------------------------------------------------------------

def test_cli_warns_and_converts(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    lines = [{"messages": [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Look."}]},
             {"messages": [USER, {"role": "assistant", "content": "Sunny."}]}]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli.main(["render", str(src), "--date", DATE, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f'{src}:1: warning: message 1: "reasoning_content" is not rendered' in err
    assert "rendered 2 (1 warning), failed 0" in err
    texts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert "Look." not in texts[0]

    assert cli.main(["render", str(src), "--date", DATE, "-o", str(out), "--reasoning-blocks"]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err
    texts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert "<|inner_prefix|>Look.<|inner_suffix|>Sunny." in texts[0]
    assert texts[1] == render(lines[1]["messages"], date=DATE)

    assert cli.main(["validate", str(src)]) == 0
    assert 'warning: message 1: "reasoning_content" is not rendered' in capsys.readouterr().out
    assert cli.main(["validate", str(src), "--reasoning-blocks"]) == 0
    assert "warning" not in capsys.readouterr().out


def test_cli_conversion_errors_are_line_errors(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps([USER, {"role": "assistant", "content": "x", "thinking": ["no"]}]) + "\n",
                   encoding="utf-8")
    assert cli.main(["render", str(src), "--reasoning-blocks", "-o", str(tmp_path / "o.jsonl")]) == 1
    assert f'{src}:1: message 1: "thinking": expected a string, got list' in capsys.readouterr().err
