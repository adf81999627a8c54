"""parse(): examples of every canonical choice, the result object, strict errors and
lenient recovery. The laws over generated conversations are in test_laws.py."""

from __future__ import annotations

import re
import warnings

import pytest

from apertus_fast import (Conversation, DialectWarning, Message, ParseError, StreamParser, normalize,
                          parse, render)
from apertus_fast._parse import split_tool_calls, split_tool_outputs
from tests.fresh import run_python
from tests.strategies import tool_turns

DATE = "2026-01-01"


def roundtrip(messages, dialect="apertus-1", **kw):
    text = render(messages, dialect=dialect, date=DATE, **kw)
    parsed = parse(text, dialect=dialect)
    assert parsed.render() == text
    return parsed


def test_string_conversation_stays_string_with_legacy_calls_and_tool_messages():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Bern?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "weather", "arguments": '{"city": "Bern"}'}}]},
        {"role": "tool", "content": '{"temp_c": 21}'},
        {"role": "assistant", "content": "21 °C."},
    ]
    parsed = roundtrip(messages)
    assert parsed.format == "string"
    assert parsed.messages == messages


def test_reasoning_makes_blocks_and_turns_merge():
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "Add."},
            {"type": "thoughts", "text": " Easy."},
            {"type": "tool_calls", "calls": [{"name": "calc", "arguments": '{"e": "2+2"}'}]},
        ]}},
        {"role": "tool", "content": "4"},
        {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "4"}]}},
    ]
    parsed = roundtrip(messages, dialect="apertus-1.5")
    assert parsed.format == "blocks"
    assert parsed.messages == [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "Add. Easy."},
            {"type": "tool_calls", "calls": [{"name": "calc", "arguments": '{"e": "2+2"}'}]},
            {"type": "tool_outputs", "outputs": [{"output": "4"}]},
            {"type": "response", "text": "4"},
        ]}},
    ]
    assert normalize(messages, dialect="apertus-1.5") == parsed.messages


def test_display_answers_closes_reasoning_itself():
    blocks = [{"type": "thoughts", "text": "t"},
              {"type": "tool_calls", "calls": [{"name": "display_answers", "arguments": "{}"}]}]
    parsed = roundtrip([{"role": "user", "content": "q"},
                        {"role": "assistant", "content": {"blocks": blocks}}])
    assert parsed.messages[1]["content"]["blocks"] == blocks


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
def test_bracketed_outputs_split_json_aware(dialect):
    calls = [{"name": "a", "arguments": "{}"}, {"name": "b", "arguments": "{}"}]
    outputs = [{"output": '{"x": [1, 2], "s": "a, b]"}'}, {"output": "Sunny, 20 °C"}]
    blocks = [{"type": "thoughts", "text": "t"}, {"type": "tool_calls", "calls": calls},
              {"type": "tool_outputs", "outputs": outputs}, {"type": "response", "text": "[ok]"}]
    parsed = roundtrip([{"role": "user", "content": "q"},
                        {"role": "assistant", "content": {"blocks": blocks}}], dialect=dialect)
    assert parsed.messages[1]["content"]["blocks"] == blocks


def test_splitters():
    assert split_tool_outputs('{"a": 1}, [2], plain, text') == ['{"a": 1}', "[2]", "plain, text"]
    assert split_tool_outputs("") == [""]
    assert split_tool_calls('[{"f": {"a": "}, {\\"x"}}, {"g": not json}]') == [
        ("f", '{"a": "}, {\\"x"}'), ("g", "not json")]
    assert split_tool_calls("[]") == []
    assert split_tool_calls("nope") is None


def test_default_system_prompt_and_date_and_flags():
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1", date="2025-03-04",
                  enable_thinking=True, add_generation_prompt=True, bos_token="")
    parsed = parse(text, dialect="apertus-1")
    assert parsed.messages == [{"role": "user", "content": "hi"}]
    assert (parsed.date, parsed.enable_thinking, parsed.add_generation_prompt,
            parsed.bos_token) == ("2025-03-04", True, True, "")
    assert parsed.render() == text


def test_tools_text_and_names_and_to_dict():
    tools = [{"name": "get_weather", "description": "d",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
             {"type": "function", "function": {"name": "now", "description": "t"}}]
    text = render([{"role": "user", "content": "x"}], dialect="apertus-1.5", tools=tools)
    parsed = parse(text, dialect="apertus-1.5")
    assert parsed.tool_names == ["get_weather", "now"]
    assert parsed.tools_text.startswith("// d\ntype get_weather = (_: {")
    d = parsed.to_dict()
    assert d["tool_names"] == ["get_weather", "now"] and d["dialect"] == "apertus-1.5"
    assert render(d["messages"], dialect="apertus-1.5", tools_text=d["tools_text"]) == text


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_tool_names_skip_declaration_shaped_lines_inside_parameter_blocks(dialect):
    """Descriptions are written raw, so their later lines may look like declarations;
    inside a tool's parameter block such a line is a description, not a tool."""
    param = {"type": "string", "description": "query\ntype alsofake = (_: {\n}) => any;x"}
    tools = [{"name": "real", "description": "Does X.\nSecond line.",
              "parameters": {"type": "object", "properties": {
                  "q": param, "r": {**param, "description": "type fake2 = () => any;"}}}},
             {"name": "two", "description": "d\n", "parameters": {"type": "object", "properties": {}}},
             {"name": "three", "description": "e", "parameters": {
                 "type": "object", "properties": {"o": {"type": "object", "properties": {
                     "p": {"type": "string", "description": "type fake3 = (_: {"}}}}}}]
    text = render([{"role": "user", "content": "hi"}], tools=tools, dialect=dialect, date=DATE)
    assert parse(text, dialect=dialect).tool_names == ["real", "two", "three"]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_tool_names_include_an_empty_name(dialect):
    """The templates render a tool named "" (``type  = () => any;``); its name was left
    out of tool_names (audit), so the names no longer lined up with the tools."""
    tools = [{"name": "", "description": "d"}, {"name": "g", "description": "d"},
             {"name": "", "description": "e", "parameters": {"type": "object", "properties": {
                 "a": {"type": "string"}}}}]
    text = render([{"role": "user", "content": "x"}], tools=tools, dialect=dialect, date=DATE)
    assert parse(text, dialect=dialect).tool_names == ["", "g", ""]


def test_multimodal_parts_and_bytes_input():
    messages = [{"role": "user", "content": [{"type": "text", "text": "Look: "},
                                             {"type": "image_url"}, {"type": "input_audio"}]}]
    text = render(messages, dialect="apertus-1.5")
    parsed = parse(text.encode("utf-8"), dialect="apertus-1.5")
    assert parsed.messages == [{"role": "user", "content": {"parts": [
        {"type": "text", "text": "Look: "}, {"type": "image"}, {"type": "audio"}]}}]
    assert parsed.render() == text


def test_format_override():
    text = render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                  dialect="apertus-1")
    blocks = parse(text, dialect="apertus-1", format="blocks")
    assert blocks.messages[1] == {"role": "assistant",
                                  "content": {"blocks": [{"type": "response", "text": "a"}]}}
    assert blocks.render() == text
    reasoning = render([{"role": "assistant", "content": {"blocks": [
        {"type": "thoughts", "text": "t"}]}}], dialect="apertus-1")
    with pytest.raises(ValueError):
        parse(reasoning, dialect="apertus-1", format="string")


def test_strict_error_says_where_and_what():
    good = render([{"role": "user", "content": "a\nb"}], dialect="apertus-1", date=DATE)
    bad = good.replace("<|user_end|>", "<|user_end|>junk")
    with pytest.raises(ParseError) as info:
        parse(bad, dialect="apertus-1")
    err = info.value
    assert err.offset == bad.index("junk")
    assert err.line == bad[:err.offset].count("\n") + 1
    assert err.column == err.offset - bad.rindex("\n", 0, err.offset)
    assert "<|user_start|>" in err.expected and "junk" in err.found
    assert "junk" in err.excerpt
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("cut, reason, found", [
    (lambda t: re.sub(r"<\|developer_start\|>.*<\|developer_end\|>", "", t, flags=re.S),
     "unexpected token", "<|user_start|>"),
    (lambda t: re.sub(r"<\|developer_start\|>.*<\|developer_end\|>", "hi", t, flags=re.S),
     "unexpected text", "text 'hi'"),
    (lambda t: t[:t.index("<|system_end|>")], "text ends too early", "end of text"),
])
def test_a_missing_token_is_named_once(cut, reason, found):
    """The reason says what is wrong where the token is missing; ``expected`` names
    the token, and the message does not say it twice."""
    bad = cut(render([{"role": "user", "content": "q"}], dialect="apertus-1", date=DATE))
    with pytest.raises(ParseError) as info:
        parse(bad, dialect="apertus-1")
    err = info.value
    assert (err.reason, err.found) == (reason, found)
    assert err.expected in ("<|developer_start|>", "<|system_end|>")
    assert str(err).count(err.expected) == 1
    first = parse(bad, dialect="apertus-1", strict=False).warnings[0]
    assert first == f"line {err.line}, column {err.column}: {reason} (expected {err.expected})"


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("after", ["x", "<|assistant_start|>", "<|assistant_end|>"])
def test_what_follows_a_generation_prompt_after_an_open_turn_is_the_error(dialect, after):
    """<|assistant_start|> inside an open turn is the generation prompt, which ends the
    text: the error is at what follows it (it was at the token)."""
    prompt = render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                    dialect=dialect, date=DATE, continue_assistant_message=True,
                    add_generation_prompt=True)
    assert parse(prompt, dialect=dialect).render() == prompt
    with pytest.raises(ParseError) as info:
        parse(prompt + after, dialect=dialect)
    assert (info.value.reason, info.value.offset) == ("text after the generation prompt",
                                                      len(prompt))
    assert info.value.expected.startswith("end of text")
    # an error in the turn before the prompt comes first, as it does in the text
    for turn, reason in (('<|tools_prefix|>[{"f": 1}', "tool calls not closed"),
                         ("<|inner_prefix|>a<|inner_prefix|>b", "reasoning opened twice")):
        with pytest.raises(ParseError) as info:
            parse(prompt[:-len("<|assistant_start|>")] + turn + "<|assistant_start|>" + after,
                  dialect=dialect)
        assert info.value.reason == reason


@pytest.mark.parametrize("text, offset, found", [
    ("<s>hello<|user_start|>q<|user_end|>", 8, "<|user_start|>"),
    ("hello<|user_start|>q", 5, "<|user_start|>"),
    ("<", 1, "end of text"),
    ("<s><|user_start|>x", 3, "<|user_start|>"),
])
def test_a_missing_system_block_is_reported_after_what_could_be_a_bos_token(text, offset, found):
    """Text before <|system_start|> is a custom bos_token ("<s>hello" + a header
    parses): the text stops being valid where that text ends, not where it starts."""
    with pytest.raises(ParseError) as info:
        parse(text)
    err = info.value
    assert (err.reason, err.offset, err.found, err.expected) == (
        "missing system block", offset, found, "<|system_start|>")


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("old, new, found", [
    ("Deliberation: disabled", "Deliberation: maybe", "text 'maybe\\n"),
    ("Deliberation: disabled", "Deliberation disabled", "text ' disabled\\n"),
    ("Tool Capabilities: disabled", "Tool Capabilities disabled", "text ' disabled'"),
    ("Tool Capabilities: disabled", "Tool Cap", "<|developer_end|>"),
    ("Deliberation: disabled\nTool Capabilities: disabled", "", "<|developer_end|>"),
])
def test_a_malformed_developer_block_is_reported_where_it_differs(dialect, old, new, found):
    """The error (and lenient mode's warning) points at the first character that
    neither form of the line could have, not at the block's start."""
    good = render([{"role": "user", "content": "q"}], dialect=dialect, date=DATE)
    bad = good.replace(old, new)
    at = next(i for i, (a, b) in enumerate(zip(good, bad)) if a != b)
    with pytest.raises(ParseError) as info:
        parse(bad, dialect=dialect)
    err = info.value
    assert err.reason == "malformed developer block"
    assert err.offset == at
    assert (err.line, err.column) == (bad[:err.offset].count("\n") + 1,
                                      err.offset - bad.rfind("\n", 0, err.offset))
    assert err.found.startswith(found)
    assert parse(bad, dialect=dialect, strict=False).warnings == [
        f"line {err.line}, column {err.column}: malformed developer block (expected {err.expected})"]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("after, found", [("X", "text 'X'"), ("\n", "text '\\n'")])
def test_text_after_a_complete_tool_capabilities_line_expects_the_blocks_end(dialect, after, found):
    """After "Tool Capabilities: disabled" only <|developer_end|> may come: the error
    asked for the line that was already there (audit)."""
    good = render([{"role": "user", "content": "q"}], dialect=dialect, date=DATE)
    bad = good.replace("Tool Capabilities: disabled", "Tool Capabilities: disabled" + after)
    with pytest.raises(ParseError) as info:
        parse(bad, dialect=dialect)
    err = info.value
    at = good.index("Tool Capabilities: disabled") + len("Tool Capabilities: disabled")
    assert (err.reason, err.offset, err.expected) == ("unexpected text", at, "<|developer_end|>")
    assert err.found.startswith(found)
    assert parse(bad, dialect=dialect, strict=False).warnings == [
        f"line {err.line}, column {err.column}: unexpected text (expected <|developer_end|>)"]
    # cut inside the end token: the text ends too early, where the token begins
    cut = good[:good.index("<|developer_end|>") + len("<|developer_")]
    with pytest.raises(ParseError) as info:
        parse(cut, dialect=dialect)
    assert (info.value.offset, info.value.expected) == (at, "<|developer_end|>")


def test_strict_rejects_text_no_conversation_renders_to():
    good = render([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
                  dialect="apertus-1", date=DATE)
    # apertus-1 closes the last turn: an extra close is not renderer output
    with pytest.raises(ParseError):
        parse(good + "<|assistant_end|>", dialect="apertus-1")
    with pytest.raises(ParseError):
        parse(good.replace("Deliberation: disabled", "Deliberation: maybe"), dialect="apertus-1")


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_renders_to_is_render_equality(dialect):
    """Strict mode's check (piece by piece where compiled, else render and compare)."""
    from apertus_fast._errors import RenderError
    from apertus_fast._render import renders_to

    msgs = [{"role": "user", "content": "Grüezi 😀"}, {"role": "assistant", "content": "Hoi"}]
    args = (msgs, dialect, None, False, False, False, DATE, "<s>", None)
    text = render(msgs, dialect=dialect, date=DATE)
    assert renders_to(text, *args) is True
    for wrong in (text[:-1], text + " ", text.replace("Hoi", "Hoy"), text.replace("😀", "😁"),
                  text.replace("Grüezi", "Gruezi")):
        assert renders_to(wrong, *args) is False
    with pytest.raises(RenderError):
        renders_to(text, [{"role": "robot", "content": "x"}], *args[1:])


@pytest.mark.parametrize("old, new, where, expected", [
    ('[{"f"', '{"f"', '{"f"', '"[" opening the call list'),
    ('}}]<', '}}<', "<|tools_suffix|>", '"]" closing the call list'),
    ('[{"f"', '[ {"f"', ' {"f"', '{"name": arguments}, a call'),
    ('[{"f"', '[{f"', 'f"', '\'"\' opening the call\'s name'),   # (the "{" is right)
    ('{"f": {"a": 1}}', '{"f" {"a" 1}}', 'f" {"a" 1}', '": after the call\'s name'),
    ('{"a": 1}}]', '{"a": 1]', '{"a": 1]', '"}" after the call\'s arguments'),
    ('{"a": 1}}]', '{"a": 1}}x]', 'x]', '", " and the next call'),
    # closed, then more: at the "]" that follows, not at the closing "]" (which the
    # error asked for: "expected ... "]"; found text ']]'", audit)
    ('{"a": 1}}]', '{"a": 1}}]]', ']<|tools_suffix|>', '<|tools_suffix|>: the call list was closed'),
    ('{"a": 1}}]', '{"a": 1}}]x]', 'x]<|tools_suffix|>', '<|tools_suffix|>: the call list was closed'),
    ('[{"f": {"a": 1}}]', "", "<|tools_suffix|>", '"[" opening the call list'),
])
def test_malformed_tool_calls_are_reported_where_the_list_breaks(old, new, where, expected):
    """Not at the list's "[", but where the text stops being [{"NAME": ARGS}, ...]
    (arguments that are not JSON reach to the next '}, {"' or the final '}]', as the
    renderer writes them raw)."""
    good = render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}],
        dialect="apertus-1", date=DATE)
    bad = good.replace(old, new, 1)
    assert bad != good
    with pytest.raises(ParseError) as info:
        parse(bad, dialect="apertus-1")
    err = info.value
    assert err.reason == "malformed tool calls"
    assert bad.startswith(where, err.offset), (bad[err.offset:], where)
    assert err.expected.startswith(expected)
    if err.found.startswith("text "):
        found = err.found[len("text '"):-1]
        assert found.startswith(where) or where.startswith(found), (found, where)
    else:
        assert err.found == where


@pytest.mark.parametrize("bad", [b"\xff", b"\xe2(", b"\xe2\x82(", b"\xc0\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98"])
def test_every_reader_says_alike_what_invalid_utf8_it_found(bad):
    """parse, lex, parse_completion and StreamParser report invalid UTF-8 with the same
    offset and the same words and bytes (the lexer's: Python's reason, then the bad
    sequence up to the offending byte)."""
    from apertus_fast import StreamParser, lex, parse_completion

    head = b"<s><|system_start|>ab\nc"
    data = head + bad + b"<|system_end|>"
    errors = []
    for read in (lambda: parse(data, dialect="apertus-1"),
                 lambda: lex(data, dialect="apertus-1"),
                 lambda: parse_completion(data, dialect="apertus-1"),
                 lambda: StreamParser("apertus-1").feed(data)):
        with pytest.raises(ParseError) as info:
            read()
        errors.append(info.value)
    assert {(e.offset, e.line, e.column, e.found) for e in errors} == {
        (len(head), 2, 2, errors[1].found)}
    assert errors[1].found.split(": ")[1].startswith(bad[:1].hex())


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_errors_in_utf8_input_count_bytes(kind):
    # the ParseError contract: offsets in bytes of UTF-8 input, for a malformed
    # structure as for invalid UTF-8 (the structural one counted characters)
    text = "<s><|system_start|>été\n€<|system_end|>X"
    with pytest.raises(ParseError) as as_str:
        parse(text, dialect="apertus-1")
    with pytest.raises(ParseError) as as_bytes:
        parse(kind(text.encode("utf-8")), dialect="apertus-1")
    s, b = as_str.value, as_bytes.value
    assert (s.offset, s.line, s.column) == (len(text) - 1, 2, 16)
    assert (b.offset, b.line, b.column) == (len(text.encode("utf-8")) - 1, 2, 18)
    assert (b.reason, b.expected, b.found) == (s.reason, s.expected, s.found)
    assert b.excerpt.endswith("<|system_end|>X")
    # lenient warnings count characters of the decoded text, in both
    assert parse(kind(text.encode("utf-8")), dialect="apertus-1", strict=False).warnings == \
        parse(text, dialect="apertus-1", strict=False).warnings


def test_an_unclosed_user_message_names_where_it_opened_in_bytes_of_bytes():
    """The reason names the offset of the user message's <|user_start|>: a byte offset
    for bytes input, as every other offset of the error is (it said the character's)."""
    head = render([{"role": "system", "content": "ü😀"}], dialect="apertus-1.5", date=DATE)
    text = head + "<|user_start|>q<|assistant_start|>a"
    opened = text.index("<|user_start|>")
    with pytest.raises(ParseError) as as_str:
        parse(text, dialect="apertus-1.5")
    with pytest.raises(ParseError) as as_bytes:
        parse(text.encode(), dialect="apertus-1.5")
    assert as_str.value.reason == f"user message opened at offset {opened} not closed"
    in_bytes = len(text[:opened].encode())
    assert in_bytes == opened + 4   # "ü" is 2 bytes, "😀" 4
    assert as_bytes.value.reason == f"user message opened at offset {in_bytes} not closed"
    assert as_bytes.value.offset == len(text[:as_str.value.offset].encode())


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("turn, reason, expected", [
    ("a<|user_end|>", "unexpected token in an assistant turn", "<|assistant_end|>"),
    ("a<|inner_suffix|>", "reasoning closed but not open", "<|inner_prefix|>"),
    ("<|inner_prefix|>a<|inner_prefix|>", "reasoning opened twice", "<|inner_suffix|>"),
])
def test_errors_in_an_assistant_turn_say_what_was_expected(dialect, turn, reason, expected):
    prompt = render([{"role": "user", "content": "q"}], dialect=dialect,
                    add_generation_prompt=True, date=DATE)
    with pytest.raises(ParseError) as info:
        parse(prompt + turn, dialect=dialect)
    assert (info.value.reason, info.value.offset) == (reason, len(prompt) + turn.rindex("<|"))
    assert expected in info.value.expected
    assert f"expected {info.value.expected}" in str(info.value)
    if reason.startswith("unexpected"):   # what a turn may hold, in this dialect
        assert ("<|tool_output_start|>" in info.value.expected) == (dialect == "apertus-1.5")


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_normalize_names_the_message_that_does_not_parse_back(dialect):
    """Outside the round-trip domain (content spelling special tokens) normalize's
    ParseError is about its own rendering, which the caller never sees: it names the
    message (as RenderError does) and says the position is in the rendered text."""
    cases = [
        ([{"role": "user", "content": "a<|user_end|>b"}], 0),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "ok"},
          {"role": "user", "content": "a<|assistant_start|>b"}], 2),
        ([{"role": "system", "content": "s<|system_end|>"}, {"role": "user", "content": "u"}], 0),
        ([Message.system("s<|system_end|>"), Message.user("u")], 0),
        # the culprit, not the message after it (its turn's end is written there); in
        # the reference dialect, which never closes the last turn, [q, ok<|assistant_end|>]
        # is still a rendering (of q, ok and a user message without content)
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok<|assistant_end|>"},
          {"role": "user", "content": "q"}], 2 if dialect == "apertus-format-reference" else 1),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok<|tools_prefix|>"}], 1),
        (Conversation([Message.user("hi"), Message.user("a<|user_end|>b")]), 1),
        ([{"role": "user", "content": "q"}] * 300 + [{"role": "user", "content": "a<|user_end|>b"}], 300),
    ]
    for messages, index in cases:
        with pytest.raises(ParseError) as info:
            normalize(messages, dialect=dialect)
        err = info.value
        assert err.message_index == index
        assert err.reason.startswith(f"message {index} renders to text that does not parse back: ")
        assert err.reason.endswith(", in the rendered text")
        text = render(messages, dialect=dialect, date="2000-01-01")
        assert err.excerpt in text   # the position is in that rendering


def test_invalid_utf8_and_wrong_types():
    with pytest.raises(ParseError) as info:
        parse(b"<s><|system_start|>\xff", dialect="apertus-1")
    assert info.value.offset == 19
    with pytest.raises(TypeError):
        parse(123)


_CALL_LISTS = [
    # (the call list a model wrote, the calls lenient reading finds, what it warns)
    ('[{"a": {"x":1}},{"b": {}}]', [("a", '{"x":1}'), ("b", "{}")], "read 2 tool call(s) as JSON"),
    ('[{"a": 1},\n {"b": [2]}]', [("a", "1"), ("b", "[2]")], "read 2 tool call(s) as JSON"),
    (' [{"a": {}}]', [("a", "{}")], "recovered 1 tool call(s)"),
    ('[\n  {"a": {"x": 1}},\n  {"b": {}}\n]', [("a", '{"x": 1}'), ("b", "{}")],
     "recovered 2 tool call(s)"),
    ('[ { "a" : "s" } , { "b":null } ]', [("a", '"s"'), ("b", "null")], "recovered 2 tool call(s)"),
    ('{"a": 1}, {"b": 2}', [("a", "1"), ("b", "2")], "recovered 2 tool call(s)"),
    # as the template writes them: no warning
    ('[{"a": {"x": 1}}, {"b": {}}]', [("a", '{"x": 1}'), ("b", "{}")], ""),
    # ... read as written, arguments that are not JSON too, each with a warning (a client
    # that json.loads them fails) at the column where they start
    ('[{"a": not json}, {"b": {}}]', [("a", "not json"), ("b", "{}")],
     "column 24: the arguments of tool call 'a' are not JSON: 'not json'"),
    # the compact list with an argument that is not JSON is not JSON either: as written
    ('[{"a": x},{"b": {}}]', [("a", 'x},{"b": {}')],
     "column 24: the arguments of tool call 'a' are not JSON: 'x},{\"b\": {}'"),
    ('[{"a": {}}{"b": {}}]', [("a", '{}}{"b": {}')],
     "column 24: the arguments of tool call 'a' are not JSON: '{}}{\"b\": {}'"),
]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("written, calls, warning", _CALL_LISTS)
def test_lenient_reads_call_lists_written_with_other_json_whitespace(dialect, written, calls,
                                                                     warning):
    from apertus_fast import parse_completion
    r = parse_completion("<|tools_prefix|>" + written + "<|tools_suffix|>", dialect=dialect)
    assert [(c["name"], c["arguments"]) for c in r.tool_calls] == calls
    if warning.startswith("read"):
        assert r.warnings == [f"line 1, column 17: {warning} from a list not written as the "
                              f"template writes it {written!r}"]
    elif warning.startswith("column"):
        assert r.warnings == [f"line 1, {warning}"]
    elif warning:
        assert r.warnings == [f"line 1, column 17: {warning} from malformed text {written!r}"]
    else:
        assert r.warnings == []


_OPENAI_LISTS = [
    # (the call list a model wrote in OpenAI's shape, the calls lenient reading finds)
    ('[{"name": "f", "arguments": {"city": "Bern"}}]', [("f", '{"city": "Bern"}')]),
    # arguments as OpenAI's API writes them, a JSON string: the string decoded
    ('[{"name": "f", "arguments": "{\\"a\\": 1}"}, {"name": "g", "arguments": {}}]',
     [("f", '{"a": 1}'), ("g", "{}")]),
    ('[{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": [1, 2]}}]',
     [("f", "[1, 2]")]),
    ('[{"type": "function", "function": {"arguments": {}, "name": "f\\u00e9"}}]', [("f\u00e9", "{}")]),
    ('[ {"arguments": {"x": 1},\n "name": "h"} ,{"name": "i", "arguments": null}]',
     [("h", '{"x": 1}'), ("i", "null")]),
]

#: Lists that are not all OpenAI-style call objects: read as before (the written form,
#: whose reading of a two-key object is a call named after its first key).
_NOT_OPENAI_LISTS = [
    '[{"f": {}}, {"name": "g", "arguments": {}}]',         # one call of each kind
    '[{"name": "g"}]',                                      # no arguments: a call "name"
    '[{"function": {"name": "f", "arguments": {}}}]',       # one key: a call "function"
    '[{"name": "f", "arguments": {}, "extra": 1}]',          # a key of neither shape
    '[{"type": "tool", "name": "f", "arguments": {}}]',     # a type that is not "function"
    '[{"name": 5, "arguments": {}}]',                       # a name that is not a string
    '[{"name": "f", "name": "g", "arguments": {}}]',        # a repeated key
    '[{"name": "f", "arguments": {}}] x',                   # text after the list
]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("written, calls", _OPENAI_LISTS)
def test_lenient_reads_a_list_of_openai_style_call_objects(dialect, written, calls):
    from apertus_fast import parse_completion
    text = "<|tools_prefix|>" + written + "<|tools_suffix|>"
    r = parse_completion(text, dialect=dialect)
    assert [(c["name"], c["arguments"]) for c in r.tool_calls] == calls
    assert r.warnings == [f'line 1, column 17: read {len(calls)} tool call(s) from OpenAI-style '
                          f'objects {{"name": ..., "arguments": ...}} {written[:60]!r}']
    assert r.finish_reason == "tool_calls"
    # the same reading by the builder (lenient parse) and by a stream fed a character
    # at a time, which holds the first call back: its name may be a key, not a tool
    turn = parse("<|assistant_start|>" + text, dialect=dialect, strict=False).messages[-1]
    got = [(c["function"]["name"], c["function"]["arguments"]) for c in turn["tool_calls"]] \
        if "tool_calls" in turn else [(c["name"], c["arguments"]) for b in turn["content"]["blocks"]
                                      if b["type"] == "tool_calls" for c in b["calls"]]
    assert got == calls
    stream = StreamParser(dialect)
    deltas = [d for ch in text for d in stream.feed(ch)] + stream.close()
    assert [(d.name, d.text) for d in deltas if d.name is not None] == \
        [(name, args) for name, args in calls]
    assert stream.result().tool_calls == r.tool_calls


@pytest.mark.parametrize("written", _NOT_OPENAI_LISTS)
def test_lenient_reads_openai_style_objects_only_as_a_whole_list(written):
    from apertus_fast import parse_completion
    r = parse_completion("<|tools_prefix|>" + written + "<|tools_suffix|>", dialect="apertus-1.5")
    assert not any("OpenAI" in w for w in r.warnings)
    assert r.tool_calls[0]["name"] != "f" or written.startswith('[{"f"')


def _one_call(name, arguments):
    """A conversation whose assistant makes one (legacy) call, and its apertus-1 text."""
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": name, "arguments": arguments}}]}]
    return messages, render(messages, dialect="apertus-1", date="2026-01-01")


def test_strict_reads_a_call_named_name_as_written():
    messages, text = _one_call("name", '"f", "arguments": {}')
    assert text.endswith('<|tools_prefix|>[{"name": "f", "arguments": {}}]<|tools_suffix|>')
    assert parse(text, dialect="apertus-1").messages == messages


def test_strict_keeps_the_written_reading_of_a_list_that_is_also_json():
    # arguments that are not JSON may make the list look like compact JSON; strict
    # parsing reads what renders back, lenient parsing what a model meant (with a warning)
    messages, text = _one_call("a", '{"x":1}},{"b": {}')
    assert text.endswith('<|tools_prefix|>[{"a": {"x":1}},{"b": {}}]<|tools_suffix|>')
    assert parse(text, dialect="apertus-1").messages == messages
    lenient = parse(text, dialect="apertus-1", strict=False)
    assert [c["function"] for c in lenient.messages[-1]["tool_calls"]] == [
        {"name": "a", "arguments": '{"x":1}'}, {"name": "b", "arguments": "{}"}]
    assert len(lenient.warnings) == 1 and "read 2 tool call(s) as JSON" in lenient.warnings[0]


@pytest.mark.parametrize("dialect", ["apertus-1", "apertus-1.5"])
def test_lenient_recovers_truncated_model_output(dialect):
    prompt = render([{"role": "user", "content": "Weather?"}], dialect=dialect,
                    add_generation_prompt=True, enable_thinking=True)
    completion = ('<|inner_prefix|>Need the tool.<|inner_suffix|>'
                  '<|tools_prefix|>[{"weather": {"city": "Bern"}}, {"news": {"topic": "Sw')
    with pytest.raises(ParseError):
        parse(prompt + completion, dialect=dialect)
    out = parse(prompt + completion, dialect=dialect, strict=False)
    blocks = out.messages[-1]["content"]["blocks"]
    assert blocks[0] == {"type": "thoughts", "text": "Need the tool."}
    assert blocks[-1] == {"type": "tool_calls", "calls": [
        {"name": "weather", "arguments": '{"city": "Bern"}'},
        {"name": "news", "arguments": '{"topic": "Sw'}]}
    line = prompt.count("\n") + 1
    column = len(prompt) - prompt.rfind("\n")   # 1-based column of the completion
    assert out.warnings == [   # each once (the look-ahead after </inner_suffix> kept none),
        # in text order
        f"line {line}, column {column + completion.index('[')}: recovered 2 tool call(s) "
        "from malformed text '[{\"weather\": {\"city\": \"Bern\"}}, {\"news\": {\"topic\": \"Sw'",
        f"line {line}, column {column + len(completion)}: tool calls not closed "
        "(expected <|tools_suffix|>)",
    ]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_lenient_unclosed_turn_before_a_user_message_is_one_warning(dialect):
    # a model that skips <|assistant_end|> and writes the next user turn itself
    prompt = render([{"role": "user", "content": "q"}], dialect=dialect,
                    add_generation_prompt=True, date="2026-01-01")
    text = prompt + "a<|user_start|>more"
    out = parse(text, dialect=dialect, strict=False)
    assert out.messages[-2:] == [{"role": "assistant", "content": "a"},
                                 {"role": "user", "content": "more"}]
    line = text.count("\n") + 1
    column = len(prompt) - prompt.rfind("\n") + 1        # at <|user_start|>
    assert out.warnings == [
        f"line {line}, column {column}: assistant turn not closed before a user message "
        "(expected <|assistant_end|>)",
        f"line {line}, column {column + len('<|user_start|>more')}: user message opened at "
        f"offset {len(prompt) + 1} not closed (expected <|user_end|>)",
    ]


def test_lenient_bare_completion_and_think_tags():
    out = parse("<think>hmm</think>Hello!", dialect="apertus-1.5", strict=False)
    assert out.messages == [{"role": "assistant", "content": {"blocks": [
        {"type": "thoughts", "text": "hmm"}, {"type": "response", "text": "Hello!"}]}}]
    assert out.warnings
    # strict mode reads <think> as text: content containing it round-trips
    messages = [{"role": "user", "content": "what is <think>?"}]
    assert roundtrip(messages, dialect="apertus-1.5").messages == messages
    # lenient mode reads them so inside assistant turns only: in system, user and
    # tool-output text they are text, as strict mode reads them (parse audit: a system
    # prompt "use <think> tags" lost its text, the header and enable_thinking)
    messages = [{"role": "system", "content": "use <think> tags"},
                {"role": "user", "content": "what is <think>? and </think>"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "content": "<think>x</think>"},
                {"role": "assistant", "content": "<think>hm</think>ok"}]
    text = render(messages, dialect="apertus-1.5", date="2026-01-01")
    assert parse(text, dialect="apertus-1.5").messages == messages
    lenient = parse(text, dialect="apertus-1.5", strict=False, format="blocks")
    assert lenient.messages[:2] == messages[:2]
    assert lenient.messages[2]["content"]["blocks"][1:] == [
        {"type": "tool_outputs", "outputs": [{"output": "<think>x</think>"}]},
        {"type": "thoughts", "text": "hm"}, {"type": "response", "text": "ok"}]
    assert [w.split(": ", 1)[1] for w in lenient.warnings] == [
        "<think> read as <|inner_prefix|>", "</think> read as <|inner_suffix|>"]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_lenient_bare_completion_keeps_the_bos_it_starts_with(dialect):
    # "<s>" is a token only at the start; without a header after it, it is still the
    # BOS (it was dropped: bos_token "", and rendering the result lost it)
    out = parse("<s>Hello", dialect=dialect, strict=False)
    assert out.messages == [{"role": "assistant", "content": "Hello"}]
    assert out.bos_token == "<s>" and out.render().startswith("<s><|system_start|>")
    assert parse("Hello", dialect=dialect, strict=False).bos_token == ""
    assert parse("x<|user_start|>y", dialect=dialect, strict=False).bos_token == ""


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("bos", ["<s>x", "<s><s>", "<s> ", "x<s>"])
def test_a_bos_token_that_starts_with_the_bos_comes_back(dialect, bos):
    # the grammar: "<s>" at offset 0, and any text after it before the system block
    # is the rest of a custom bos_token ("<s>x" was a ParseError, "x<s>" was not)
    messages = [{"role": "user", "content": "hi"}]
    text = render(messages, dialect=dialect, bos_token=bos, date="2026-01-01")
    out = parse(text, dialect=dialect)
    assert (out.bos_token, out.messages) == (bos, messages)
    assert out.render() == text


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
@pytest.mark.parametrize("date", ["0999-01-01", __import__("datetime").date(12, 3, 4)])
def test_dates_before_the_year_1000_keep_four_digits(dialect, date):
    # (strftime's %Y wrote "999", which the parser did not read as the default
    # prompt's date: the prompt came back as an explicit system message)
    from apertus_fast import normalize, render_date

    messages = [{"role": "user", "content": "hi"}]
    text = render(messages, dialect=dialect, date=date)
    assert f"Current date: {render_date(date)}<" in text and len(render_date(date)) == 10
    out = parse(text, dialect=dialect)
    assert out.messages == normalize(messages, dialect=dialect) == messages
    assert out.date == render_date(date)


def test_lenient_never_raises_on_garbage():
    for junk in ["", "<|", "<|user_start|>", "<|assistant_end|><|inner_suffix|>x",
                 "<s><|system_start|>", "]]]<|tools_prefix|>[{", "<|tool_output_start|>a, b"]:
        for dialect in ["apertus-format-reference", "apertus-1", "apertus-1.5"]:
            parse(junk, dialect=dialect, strict=False)


def test_unclosed_reasoning_is_not_an_error():
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "..."}]}}]
    assert roundtrip(messages, continue_assistant_message=True).messages == messages


def test_lenient_think_tags_are_read_as_reasoning_with_a_warning():
    """Lenient parsing reads apertus-1.5's <think> / </think> as the reasoning
    delimiters; the reading re-renders with the Apertus tokens, so each is a warning.
    Strict parsing keeps them as the text they are."""
    text = render([{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "<think>hmm</think>Answer"}],
                  dialect="apertus-1.5", date=DATE)
    assert parse(text, dialect="apertus-1.5").render() == text
    lenient = parse(text, dialect="apertus-1.5", strict=False)
    assert lenient.messages[-1]["content"]["blocks"] == [
        {"type": "thoughts", "text": "hmm"}, {"type": "response", "text": "Answer"}]
    at = text.index("<think>")
    line, column = text[:at].count("\n") + 1, at - text.rfind("\n", 0, at)
    assert lenient.warnings == [
        f"line {line}, column {column}: <think> read as <|inner_prefix|>",
        f"line {line}, column {column + 10}: </think> read as <|inner_suffix|>"]


@pytest.mark.parametrize("closer", ["<|inner_suffix|>", "</think>"])
def test_lenient_closer_that_closes_nothing_leaves_the_response_whole(closer):
    """A reasoning closer with no opener is a warning and no block boundary: the text
    around it is one response, as parse_completion (and so the streams) read it; two
    response blocks in a row would render as one."""
    from apertus_fast import parse_completion

    prompt = render([{"role": "user", "content": "q"}], dialect="apertus-1.5", date=DATE,
                    add_generation_prompt=True)
    completion = f"let me think{closer}The answer"
    out = parse(prompt + completion + "<|assistant_end|>", dialect="apertus-1.5", strict=False)
    assert out.messages[-1]["content"]["blocks"] == [{"type": "response", "text": "let me thinkThe answer"}]
    assert out.warnings[-1].endswith("reasoning closed but not open (expected <|inner_prefix|> "
                                     "opening it first)")
    assert parse_completion(completion, dialect="apertus-1.5").content == "let me thinkThe answer"
    # a closer after real reasoning still ends it, and a second one is the warning
    out = parse(prompt + "a<|inner_prefix|>b<|inner_suffix|>c<|inner_suffix|>d", dialect="apertus-1.5",
                strict=False)
    assert out.messages[-1]["content"]["blocks"] == [
        {"type": "response", "text": "a"}, {"type": "thoughts", "text": "b"},
        {"type": "response", "text": "cd"}]


def test_lenient_warnings_are_in_text_order():
    """The <think> tags are mapped (and warned about) before the turns are read, and the
    other dialect's token after: the warnings still come in the order of the text."""
    text = render([{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                   {"role": "user", "content": "q2 <|audio|>"},
                   {"role": "assistant", "content": "<think>h</think>b"}],
                  dialect="apertus-1.5", date=DATE).replace("a1", "a<|tools_suffix|>1")
    for dialect, count in [("apertus-1.5", 3), ("apertus-1", 2)]:
        warnings = parse(text, dialect=dialect, strict=False).warnings
        places = [tuple(map(int, re.match(r"line (\d+), column (\d+): ", w).groups())) for w in warnings]
        assert len(warnings) == count and places == sorted(places), warnings
    assert "<|audio|> is a token of apertus-1.5" in warnings[1]


_TOOL_TURN = [
    {"role": "user", "content": {"parts": [{"type": "text", "text": "look"}, {"type": "image"}]}},
    {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]},
        {"type": "tool_outputs", "outputs": [{"output": "42"}]},
        {"type": "response", "text": "ok"}]}}]


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
@pytest.mark.parametrize("as_bytes", [False, True])
def test_text_of_another_dialect_is_parsed_with_a_warning(dialect, as_bytes):
    """apertus-1.5 text is valid text of the other dialects, with its tool-output
    tokens as text (which loss masks would then train on): parsing says so, in the
    result's warnings and, strict, as a DialectWarning attributed to the caller."""
    text = render(_TOOL_TURN, dialect="apertus-1.5", date=DATE)
    first = min(i for i in (text.find("<|tool_output_start|>"), text.find("<|image|>")
                            if dialect == "apertus-format-reference" else -1) if i >= 0)
    token = text[first:text.index("|>", first) + 2]
    line, column = text[:first].count("\n") + 1, first - text.rfind("\n", 0, first)
    expected = (f"line {line}, column {column}: {token} is a token of "
                f"{'apertus-1 and apertus-1.5' if token == '<|image|>' else 'apertus-1.5'}, "
                f"not of {dialect}, and was read as text; if it was rendered in "
                f"{'apertus-1 or apertus-1.5' if token == '<|image|>' else 'apertus-1.5'}, "
                "parse it as that")
    data = text.encode() if as_bytes else text
    with pytest.warns(DialectWarning) as caught:
        result = parse(data, dialect=dialect)
    assert [str(w.message) for w in caught] == [expected] and result.warnings == [expected]
    assert caught[0].filename == __file__
    assert result.render() == text   # (as text of this dialect, it renders back)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse(data, dialect=dialect, strict=False).warnings[-1] == expected
        assert parse(data, dialect="apertus-1.5").warnings == []


def test_no_dialect_warning_for_the_tokens_of_any_dialect():
    """<s>, <think> and </think> are plausible text anywhere (markup, other models'
    reasoning): no warning; nor for a dialect's own tokens."""
    for dialect in ["apertus-format-reference", "apertus-1", "apertus-1.5"]:
        text = render([{"role": "user", "content": "x <s> <think>a</think> <|image"},
                       {"role": "assistant", "content": "y"}], dialect=dialect, date=DATE)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert parse(text, dialect=dialect).warnings == []
    text = render(_TOOL_TURN, dialect="apertus-1", date=DATE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse(text, dialect="apertus-1").warnings == []
        assert parse(text, dialect="apertus-1.5").warnings == []   # (1.5 has <|image|>)


def test_content_that_spells_another_dialects_token_is_warned_about_once():
    """A user message that quotes another dialect's tokens reads as it should (text)
    and is warned about: the warning names the first, once per parse."""
    messages = [{"role": "user", "content": "What do <|audio|> and <|tool_output_end|> do?"},
                {"role": "assistant", "content": "They mark audio and tool outputs."}]
    text = render(messages, dialect="apertus-1", date=DATE)
    with pytest.warns(DialectWarning, match=r"<\|audio\|> is a token of apertus-1\.5, not of apertus-1"):
        result = parse(text, dialect="apertus-1")
    assert result.messages[-2:] == messages and len(result.warnings) == 1


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
def test_format_string_names_the_empty_call_list_it_cannot_hold(dialect):
    text = render([{"role": "user", "content": "q"},
                   {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": []}]}}],
                  dialect=dialect, date=DATE)
    with pytest.raises(ValueError, match=r"cannot represent an empty call list \(\[\]\)"):
        parse(text, dialect=dialect, format="string")
    assert parse(text, dialect=dialect).format == "blocks"


class _Text(str):
    """A str subclass, as numpy.str_ and markupsafe.Markup are."""


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_str_subclasses_are_read_as_their_text(dialect):
    # (the compiled build typed these arguments as exact str and raised TypeError)
    from apertus_fast import parse_completion
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    text = render(messages, dialect=dialect, date="2026-01-01")
    assert parse(_Text(text), dialect=dialect).messages == messages
    assert parse(_Text(text), dialect=dialect, strict=False, format=_Text("string")).messages \
        == messages
    assert parse(_Text("hi"), dialect=dialect, strict=False).messages == \
        [{"role": "assistant", "content": "hi"}]
    completion = _Text("<|inner_prefix|>r<|inner_suffix|>x<|assistant_end|>")
    got = parse_completion(completion, dialect=dialect, prompt=_Text("<|assistant_start|>"),
                           format=_Text("blocks"))
    assert (got.reasoning, got.content, got.format) == ("r", "x", "blocks")
    stream = StreamParser(dialect, prompt=_Text("<|assistant_start|>"), format=_Text("auto"))
    assert [(d.kind, d.text) for d in stream.feed(_Text("ab"))] == [("response", "ab")]
    for bad in (None, "Blocks", 1):
        with pytest.raises(ValueError, match="format must be"):
            parse("x", strict=False, format=bad)
        with pytest.raises(ValueError, match="format must be"):
            parse_completion("x", format=bad)


def test_non_json_arguments_holding_the_call_separator_are_outside_the_domain():
    # docs/format.md, the domain of the laws: the split ends such arguments at "}, {\""
    # and the rest is no call; strict parsing rejects the text, lenient salvages it
    text = render([{"role": "user", "content": "q"}, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": 'x}, {"y'}]}]}}],
        dialect="apertus-1.5")
    with pytest.raises(ParseError, match="malformed tool calls"):
        parse(text, dialect="apertus-1.5")
    lenient = parse(text, dialect="apertus-1.5", strict=False)
    assert lenient.warnings and lenient.render() == text


@pytest.mark.parametrize("dialect", ["apertus-1", "apertus-1.5"])
def test_an_error_before_invalid_utf8_comes_first(dialect):
    """The whole input was decoded before reading, so a bad byte anywhere hid an earlier
    structural error (parse audit): strict errors are in document order."""
    text = render([{"role": "user", "content": "hi"}], dialect=dialect, date="2026-01-01").encode()
    broken = text.replace(b"<|user_end|>", b"<|assistant_end|>")
    with pytest.raises(ParseError) as first:
        parse(broken, dialect=dialect)
    with pytest.raises(ParseError) as info:
        parse(broken + b"\xff", dialect=dialect)
    assert (info.value.offset, info.value.reason) == (first.value.offset, first.value.reason)
    assert "not closed" in info.value.reason
    with pytest.raises(ParseError) as info:     # a byte offset, in the text before the bad byte
        parse("é<|user_end|>".encode() + b"\xff", dialect=dialect)
    assert (info.value.offset, info.value.column, info.value.reason) == (2, 3, "missing system block")
    # an end too early is no error before the bad byte: the bad byte is the error
    with pytest.raises(ParseError) as info:
        parse(text[:-5] + b"\xff", dialect=dialect)
    assert (info.value.offset, info.value.reason) == (len(text) - 5, "invalid UTF-8")


def test_lenient_parse_drops_a_character_cut_at_the_end():
    """Bytes cut inside a character at the very end (a token limit) are read without
    it, with a warning; lenient reading raised ParseError there, though it recovers
    from every other truncation. Strict reading, and a bad byte elsewhere, still raise."""
    d = "apertus-1.5"
    text = render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "Grüezi 😀"}],
                  dialect=d, date="2026-01-01", continue_assistant_message=True).encode()
    for cut, dropped in ((text[:-1], 3), (text[:text.index("ü".encode()) + 1], 1)):
        r = parse(cut, dialect=d, strict=False)
        assert r.messages[-1]["content"] in ("Grüezi ", "Gr")
        assert r.warnings[-1].endswith(f"the text ends inside a UTF-8 character: its {dropped} byte(s) dropped")
        with pytest.raises(ParseError, match="invalid UTF-8"):
            parse(cut, dialect=d)
    with pytest.raises(ParseError, match="invalid UTF-8"):
        parse(text[:-1] + b"!", dialect=d, strict=False)


@pytest.mark.parametrize("dialect", ["apertus-1", "apertus-1.5"])
@pytest.mark.parametrize("thinking", [False, True])
def test_a_developer_block_cut_off_expects_the_rest_of_its_lines(dialect, thinking):
    """Cut inside the developer block's fixed lines, the text expected the rest of
    them, not <|developer_end|> (which there would not make it valid: parse audit);
    a block that stops being one is reported there, before a missing end after it."""
    for tools in (None, [{"name": "f", "description": "d"}]):
        text = render([], dialect=dialect, tools=tools, enable_thinking=thinking, date="2026-01-01")
        start = text.index("<|developer_start|>") + len("<|developer_start|>")
        end = text.index("<|developer_end|>")
        fixed = end if tools is None else text.index("Tool Capabilities:\n") + len("Tool Capabilities:\n")
        for cut in range(start, end + 1):
            with pytest.raises(ParseError) as info:
                parse(text[:cut], dialect=dialect)
            err = info.value
            assert (err.offset, err.reason, err.found) == (cut, "text ends too early", "end of text")
            if cut < fixed:
                assert "Deliberation" in err.expected or "Tool Capabilities" in err.expected, (cut, err)
            else:
                assert err.expected == "<|developer_end|>", (cut, err)
    with pytest.raises(ParseError) as info:
        parse(text[:start] + "Deliberation: x", dialect=dialect)
    assert (info.value.offset, info.value.reason) == (start + len("Deliberation: "), "malformed developer block")


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_a_bad_byte_anywhere_in_a_valid_text_is_the_error(dialect):
    """The text before a bad byte is the start of a valid text: the error is the bad
    byte, wherever it is, also right after the start of a token ("<|de" then the byte
    was 'unexpected text' at the "<": review finding, 66 of 403 positions)."""
    outputs = [{"output": "o"}] if dialect == "apertus-1.5" else ["o"]
    messages = [{"role": "user", "content": "Hi é"}, {"role": "assistant", "content": {"blocks": [
        {"type": "thoughts", "text": "t"},
        {"type": "tool_calls", "calls": [{"name": "f", "arguments": '{"a": 1}'}]},
        {"type": "tool_outputs", "outputs": outputs}, {"type": "response", "text": "r"}]}}]
    tools = [{"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}}}}]
    text = render(messages, dialect=dialect, date="2026-01-01", enable_thinking=True,
                  tools=tools).encode()
    inside = text.index("é".encode()) + 1   # (there the bad sequence starts a byte earlier)
    for at in range(len(text) + 1):
        with pytest.raises(ParseError) as info:
            parse(text[:at] + b"\xff" + text[at:], dialect=dialect)
        assert (info.value.offset, info.value.reason) == (at - (at == inside), "invalid UTF-8"), at


# --------------------------------------------------------------------------- the result

def test_a_dialect_of_your_own_is_used_not_looked_up_by_its_name():
    """``dialect`` takes a Dialect; the result kept only its name and looked it up
    again to check and re-render: a dialect of your own (``dataclasses.replace`` of a
    built-in one) was unknown, and one that kept a built-in name with another default
    prompt was checked against the built-in's (a ParseError that blamed the text), as
    was the date read from it (result-objects audit)."""
    import dataclasses
    import pickle

    from apertus_fast import get_dialect

    messages = [{"role": "user", "content": "hi"}]
    renamed = dataclasses.replace(get_dialect("apertus-1.5"), name="mine-1.5")
    same_name = dataclasses.replace(get_dialect("apertus-1.5"), default_system="Be terse.")
    dated = dataclasses.replace(get_dialect("apertus-1"), default_system="Be terse. Today: {date}")
    for d in (renamed, same_name, dated):
        text = render(messages, dialect=d, date="2026-01-02")
        parsed = parse(text, dialect=d)
        assert parsed.dialect == d.name and parsed.render() == text
        assert parsed.render_with_spans().text == text
        assert pickle.loads(pickle.dumps(parsed)).render() == text
        assert normalize(messages, dialect=d) == messages
    assert parse(render(messages, dialect=dated, date="2026-01-02"), dialect=dated).date == "2026-01-02"
    # a dialect set by name since is that one
    parsed = parse(render(messages, dialect=renamed), dialect=renamed)
    parsed.dialect = "apertus-1.5"
    assert parsed.render() == render(messages, dialect="apertus-1.5")


def test_tool_names_follow_tools_text():
    """``tool_names`` was read once and kept: after ``tools_text`` was set anew it,
    ``to_dict()``, ``repr`` and ``==`` went on naming the old tools (audit)."""
    from apertus_fast import render_tools

    parsed = parse(render([{"role": "user", "content": "hi"}], tools=[{"name": "f", "description": "d"}]))
    assert parsed.tool_names == ["f"]
    parsed.tools_text = render_tools([{"name": "g", "description": "d"}])
    assert parsed.tool_names == ["g"] and parsed.to_dict()["tool_names"] == ["g"]
    assert "tool_names=['g']" in repr(parsed)
    parsed.tools_text = None
    assert parsed.tool_names == []


def test_changing_the_tool_names_given_out_changes_nothing():
    """``to_dict()["tool_names"]`` and ``tool_names`` were the cached list itself: a
    caller's append changed the result's names, and its ``==`` (audit)."""
    text = render([{"role": "user", "content": "hi"}], tools=[{"name": "f", "description": "d"}])
    parsed, again = parse(text), parse(text)
    parsed.to_dict()["tool_names"].append("zzz")
    parsed.tool_names.append("yyy")
    assert parsed.tool_names == ["f"] and parsed.to_dict()["tool_names"] == ["f"]
    assert parsed == again


@pytest.mark.parametrize("protocol", range(6))
def test_the_result_pickles_at_every_protocol(protocol):
    """Protocols 0 and 1 raised TypeError (a class with __slots__ and no
    __getstate__), though every other object of the package pickles at any protocol."""
    import copy
    import pickle

    text = render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                  tools=[{"name": "f", "description": "d"}], date="2026-01-02")
    for parsed in (parse(text), parse(text + "<|user_start|>x", strict=False)):
        again = pickle.loads(pickle.dumps(parsed, protocol=protocol))
        assert again == parsed and again.warnings == parsed.warnings
        assert again.tool_names == ["f"] and again.render() == parsed.render()
        assert copy.deepcopy(parsed) == parsed and copy.copy(parsed) == parsed


@pytest.mark.parametrize("args", ["0 ", '{"a": 1} ', "\n[1]\t", ' "s"'])
def test_arguments_with_json_whitespace_read_the_same_leniently(args):
    """Arguments that are JSON with whitespace around it (``"0 "``, which
    ``json.loads`` takes) were not JSON to the lenient reading, whose JSON reading of
    the list won and dropped the space: lenient parsing of a text the renderer wrote
    differed from strict parsing (found by the drop-in property test, now and then)."""
    from apertus_fast import parse_completion

    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "display_answers", "arguments": args}}]}]
    for dialect in ("apertus-format-reference", "apertus-1", "apertus-1.5"):
        text = render(messages, dialect=dialect, date="2026-01-01")
        strict = parse(text, dialect=dialect)
        lenient = parse(text, dialect=dialect, strict=False)
        assert lenient.messages == strict.messages == messages and not lenient.warnings
    body = '<|tools_prefix|>[{"f": ' + args + '}]<|tools_suffix|>'
    assert parse_completion(body).tool_calls == [{"name": "f", "arguments": args}]


class _Tagged(__import__("apertus_fast").ParsedConversation):
    pass


class _WithSource(__import__("apertus_fast").ParsedConversation):
    __slots__ = ("source",)

    def __init__(self, messages, source, **kw):
        super().__init__(messages, **kw)
        self.source = source


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_subclasses_of_the_result_pickle_with_what_they_add(protocol):
    """A ``__reduce__`` that called the class with the base's arguments lost a
    subclass's ``__dict__`` and failed on one with its own ``__init__`` (review)."""
    import pickle

    tagged = _Tagged([{"role": "user", "content": "hi"}])
    tagged.source = "a.jsonl"
    again = pickle.loads(pickle.dumps(tagged, protocol=protocol))
    assert type(again) is _Tagged and again.source == "a.jsonl" and again == tagged
    slotted = pickle.loads(pickle.dumps(_WithSource([], "b.jsonl"), protocol=protocol))
    assert type(slotted) is _WithSource and slotted.source == "b.jsonl"


def test_a_copy_of_a_built_in_dialect_is_that_dialect():
    """The result kept the Dialect object it was given; an unpickled or copied result
    held an equal copy of the built-in one, which the render hot path (it knows the
    built-in objects) did not take: 2.5 times slower (review). A built-in dialect, or
    a copy of it, renders by its name; equality counts the dialect rendered with."""
    import copy
    import dataclasses
    import pickle

    from apertus_fast import ParsedConversation, get_dialect

    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1.5")
    parsed = parse(text, dialect="apertus-1.5")
    for again in (pickle.loads(pickle.dumps(parsed)), copy.deepcopy(parsed),
                  ParsedConversation(parsed.messages, copy.deepcopy(get_dialect("apertus-1.5")))):
        assert again._dialect_arg() == "apertus-1.5"
    same_name = dataclasses.replace(get_dialect("apertus-1.5"), default_system="Be terse.")
    other = parse(render(parsed.messages, dialect=same_name), dialect=same_name)
    twin = ParsedConversation(other.messages, "apertus-1.5", date=other.date,
                              tools_text=other.tools_text, format=other.format)
    assert other.to_dict() == twin.to_dict() and other != twin and other.render() != twin.render()


def test_a_long_text_is_parsed_with_the_collector_off_and_left_as_found():
    """A long text's result is thousands of new dicts and lists with no cycle among
    them: the collector ran hundreds of times over them during one parse (audit)."""
    import gc

    text = render(tool_turns(3000), dialect="apertus-1.5", date=DATE)
    assert len(text) > 1 << 16
    assert gc.isenabled()
    runs = []
    gc.callbacks.append(lambda phase, info: runs.append(phase))
    try:
        parsed = parse(text, dialect="apertus-1.5")
        during = len(runs)
    finally:
        gc.callbacks.pop()
    assert during == 0    # (hundreds before: 339 gen-0 and 31 gen-1 runs for 4.4 MB)
    assert gc.isenabled() and parsed.render() == text
    with pytest.raises(ParseError):             # on again after an error too
        parse(text.replace("<|user_end|>", "", 1), dialect="apertus-1.5")
    assert gc.isenabled()
    gc.disable()                                 # and off if it was off
    try:
        parse(text, dialect="apertus-1.5")
        assert not gc.isenabled()
    finally:
        gc.enable()


_LONG_TEXT = """if True:
    import gc, os, threading
    import apertus_fast as af
    from apertus_fast import _parse
    msgs = []
    for i in range(3000):
        msgs += [{"role": "user", "content": f"q{i} " + "y" * 20}, {"role": "assistant", "content": "ok"}]
    text = af.render(msgs, dialect="apertus-1.5", date="2026-01-01")
    assert len(text) > 1 << 16
    class Switch:   # the gc module as _parse sees it, counting what it is asked
        def __init__(self):
            self.calls = []
        def isenabled(self):
            return gc.isenabled()
        def disable(self):
            self.calls.append("disable")
            gc.disable()
        def enable(self):
            self.calls.append("enable")
            gc.enable()
    switch = Switch()
    _parse.gc = switch
"""


def test_a_long_parse_leaves_the_collector_alone_while_other_threads_run():
    """The collector's switch is the process's: a long parse that turned it off and on
    again undid a ``gc.disable()`` that another thread made meanwhile, and a child that
    another thread forked meanwhile started with it off for good (thread audit). It is
    only switched when the parsing thread is the only one."""
    code = _LONG_TEXT + """if True:
    af.parse(text, dialect="apertus-1.5")
    assert switch.calls == ["disable", "enable"], switch.calls   # alone: switched
    switch.calls.clear()
    go, done = threading.Event(), threading.Event()
    other = threading.Thread(target=lambda: (go.set(), done.wait()))
    other.start()
    go.wait()
    try:
        assert af.parse(text, dialect="apertus-1.5").render() == text
    finally:
        done.set()
        other.join()
    assert switch.calls == [] and gc.isenabled(), switch.calls
    print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def test_an_exception_right_after_the_collector_goes_off_turns_it_on_again():
    """(A KeyboardInterrupt from a signal handler, say.) ``gc.disable()`` came before
    the ``try`` whose ``finally`` turns the collector on again."""
    code = _LONG_TEXT + """if True:
    def interrupted():
        gc.disable()
        raise KeyboardInterrupt
    switch.disable = interrupted
    try:
        af.parse(text, dialect="apertus-1.5")
    except KeyboardInterrupt:
        pass
    assert gc.isenabled() and not _parse._gc_switched_off
    print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def test_a_child_forked_while_a_parse_has_the_collector_off_turns_it_on():
    """A process forked during such a parse (from a signal handler) starts with the
    collector on: nothing in the child would turn it on again."""
    code = _LONG_TEXT + """if True:
    _parse._gc_switched_off = True   # as during a long parse
    gc.disable()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if gc.isenabled() and not _parse._gc_switched_off else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's collector is off"
    assert not gc.isenabled() and _parse._gc_switched_off   # the parent's parse goes on
    _parse._gc_switched_off = False
    gc.enable()
    print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def test_custom_dated_dialects_do_not_grow_a_cache_without_bound():
    """parse keeps the split of each dated default prompt it meets; a server that makes
    a Dialect per tenant kept every prompt for good (audit). The cache is bounded."""
    import dataclasses

    from apertus_fast import _parse, get_dialect

    base = get_dialect("apertus-format-reference")
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    for i in range(200):
        d = dataclasses.replace(base, default_system=f"Tenant {i}. Today is {{date}}.")
        text = render(msgs, dialect=d, date=DATE)
        assert parse(text, dialect=d).messages == msgs
        assert len(_parse._DATED) <= 64
