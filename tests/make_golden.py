"""Golden files: readable conversations rendered by the official templates.

    python -m tests.make_golden          # (re)write tests/golden/ from the oracle

For every case below it writes ``tests/golden/<case>.json`` (the input: ``messages``,
``tools`` and the flags of ``render``) and, per dialect, either
``<case>.<dialect>.txt`` (the exact rendering, UTF-8, no trailing newline added) or
``<case>.<dialect>.error.txt`` (the template rejects the input: the index of the
offending message, or ``none`` for tool specs, and the template's own error).
``tests/test_golden.py`` checks apertus-fast against these files, with or without
the oracle.

This module also holds the oracle-side expectations shared by the differential tests
(:func:`oracle_tools`, :func:`oracle_expect`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.oracle import ORACLE_MISSING, OracleError, oracle_render

GOLDEN = Path(__file__).resolve().parent / "golden"
DIALECTS = ("apertus-format-reference", "apertus-1", "apertus-1.5")
FLAGS = ("enable_thinking", "add_generation_prompt", "continue_assistant_message", "date",
         "bos_token")
DEFAULT_FLAGS = dict(enable_thinking=False, add_generation_prompt=False,
                     continue_assistant_message=False, date="2026-01-01", bos_token="<s>")


# ---------------------------------------------------------------------------------------
# what the oracle expects


def oracle_tools(tools, dialect):
    """The tools to give the template so that its output is what apertus-fast must
    produce. apertus-fast accepts OpenAI-shaped tool specs (``{"type": "function",
    "function": {...}}``) in every dialect. apertus-1.5 unwraps them itself
    (``{% if tool.function %}{% set tool = tool.function %}``); the reference and
    apertus-1 templates fail on them (``tool.description`` is undefined), and there
    apertus-fast unwraps a truthy ``function`` only when the spec has neither
    ``name`` nor ``description`` (so every spec those templates accept renders
    unchanged): the expectation is the template's rendering of the unwrapped spec."""
    if dialect == "apertus-1.5" or not isinstance(tools, list):
        return tools
    return [t["function"] if isinstance(t, dict) and "name" not in t
            and "description" not in t and t.get("function") else t for t in tools]


@dataclass(frozen=True)
class Expected:
    text: str | None  #: the rendering, or None when the template fails
    error: str | None = None  #: the template's error (``OracleError`` text)
    message_index: int | None = None  #: offending message (None: tool specs)


def _fails(messages, dialect, tools, flags) -> bool:
    try:
        oracle_render(messages, dialect=dialect, tools=tools, **flags)
    except OracleError:
        return True
    return False


def error_index(messages, *, dialect, tools, **flags):
    """Index of the message at which the template fails, or None when it fails in the
    tool specs. The template processes ``messages[0]`` (system) first, then the tools,
    then the messages in order, so failure is monotone in the prefix of ``messages``."""
    tools = oracle_tools(tools, dialect)
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") == "system" and _fails(
            messages[:1], dialect, None, flags):
        return 0
    if _fails([], dialect, tools, flags):
        return None
    lo, hi = 0, len(messages) - 1  # the smallest k such that messages[:k + 1] fails
    if not _fails(messages, dialect, None, flags):
        raise AssertionError("the template fails on this input only with these tools "
                             "and these messages together")
    while lo < hi:
        mid = (lo + hi) // 2
        if _fails(messages[:mid + 1], dialect, None, flags):
            hi = mid
        else:
            lo = mid + 1
    return lo


def oracle_expect(messages, *, dialect, tools=None, **flags) -> Expected:
    """What apertus-fast must do with this input in ``dialect``: render ``text``, or
    raise ``RenderError`` with ``message_index``."""
    try:
        return Expected(oracle_render(messages, dialect=dialect,
                                      tools=oracle_tools(tools, dialect), **flags))
    except OracleError as exc:
        index = error_index(messages, dialect=dialect, tools=tools, **flags)
        return Expected(None, str(exc), index)


# ---------------------------------------------------------------------------------------
# the cases

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        },
        "required": ["city"],
    },
}
SEARCH = {
    "name": "search",
    "description": "Search the web",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer", "default": 5},
        },
        "required": ["query"],
    },
}


def _call(name, args):
    return {"name": name, "arguments": json.dumps(args)}


def _legacy(name, args, **extra):
    return {"id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}, **extra}


U = {"role": "user", "content": "What is the weather in Zürich?"}

CASES = {
    "01-empty": dict(messages=[]),
    "02-user-assistant": dict(messages=[
        {"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"}]),
    "03-system-string": dict(messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"}]),
    "04-system-text-mapping": dict(messages=[
        {"role": "system", "content": {"text": "You are a research assistant."}},
        {"role": "user", "content": "Hello"}]),
    "05-user-parts": dict(messages=[
        {"role": "user", "content": {"parts": [{"type": "text", "text": "Please explain "},
                                               {"type": "text", "text": "machine learning"}]}},
        {"role": "assistant", "content": "Machine learning is..."}]),
    "06-user-image-part": dict(messages=[
        {"role": "user", "content": {"parts": [
            {"type": "image", "image": "data:image/png;base64,AAAA"},
            {"type": "text", "text": "What is in this picture?"}]}}]),
    "07-user-image-url-audio-parts": dict(messages=[
        {"role": "user", "content": {"parts": [
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "text", "text": "Describe both."}]}}]),
    "08-user-list-content": dict(messages=[
        {"role": "user", "content": [{"type": "text", "text": "Listen: "},
                                     {"type": "audio", "audio": "clip.wav"},
                                     {"type": "input_image", "image": "x.png"}]}]),
    "09-user-without-content": dict(messages=[
        {"role": "user"}, {"role": "assistant", "content": "Anything else?"}]),
    "10-blocks-thoughts-response": dict(enable_thinking=True, messages=[
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "Rayleigh scattering..."},
            {"type": "response", "text": "Because of Rayleigh scattering."}]}}]),
    "11-blocks-full-tool-use": dict(enable_thinking=True, tools=[SEARCH], messages=[
        {"role": "system", "content": {"text": "You are a research assistant."}},
        {"role": "user", "content": {"parts": [{"type": "text", "text": "Research machine learning for me"}]}},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "I need to search."},
            {"type": "tool_calls", "calls": [_call("search", {"query": "machine learning overview"})]},
            {"type": "tool_outputs", "outputs": [{"output": "Machine learning is a subset of AI..."}]},
            {"type": "response", "text": "Based on my research, ..."}]}}]),
    "12-tool-messages-between-blocks": dict(tools=[SEARCH], messages=[
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": {"parts": [{"type": "text", "text": "Hi"}]}},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "I should search for greeting info."},
            {"type": "tool_calls", "calls": [_call("search", {"query": "greetings"})]}]}},
        {"role": "tool", "content": "Greeting information found..."},
        {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "Hello! Nice to meet you."}]}}]),
    "13-merged-tool-messages": dict(tools=[WEATHER], messages=[
        U,
        {"role": "assistant", "content": {"blocks": [
            {"type": "tool_calls", "calls": [_call("get_weather", {"city": "Zürich"}),
                                             _call("get_weather", {"city": "Bern"})]}]}},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "{\"temp\": 19}"},
        {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "21 °C and 19 °C."}]}}]),
    "14-display-answers-after-thoughts": dict(enable_thinking=True, messages=[
        {"role": "user", "content": "Pick an answer"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "B is right."},
            {"type": "tool_calls", "calls": [_call("display_answers", {"answers": ["B"]})]}]}}]),
    "15-display-answers-first-block": dict(messages=[
        {"role": "user", "content": "Pick an answer"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "tool_calls", "calls": [_call("display_answers", {"answers": ["A"]})]},
            {"type": "tool_outputs", "outputs": [{"output": "shown"}]}]}}]),
    "16-consecutive-thoughts": dict(enable_thinking=True, messages=[
        {"role": "user", "content": "Think twice"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "First, "}, {"type": "thoughts", "text": "second."},
            {"type": "tool_calls", "calls": [_call("calc", {"x": 1}), _call("display_answers", {})]},
            {"type": "thoughts", "text": "Still thinking."},
            {"type": "response", "text": "Done."}]}}]),
    "17-response-after-tool-outputs": dict(tools=[SEARCH], messages=[
        {"role": "user", "content": "Search"},
        {"role": "assistant", "content": {"blocks": [
            {"type": "tool_calls", "calls": [_call("search", {"query": "q"})]},
            {"type": "tool_outputs", "outputs": [{"output": "r1"}, {"output": "r2"}]},
            {"type": "response", "text": "Found two results."}]}}]),
    "18-openai-tool-calls": dict(tools=[WEATHER], messages=[
        U,
        {"role": "assistant", "content": "Let me check.", "tool_calls": [_legacy("get_weather", {"city": "Zürich"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 °C, sunny"},
        {"role": "assistant", "content": "It is 21 °C and sunny in Zürich."}]),
    "19-openai-tool-calls-dict-arguments": dict(messages=[
        U, {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]}]),
    "20-openai-tool-calls-without-type": dict(messages=[
        U, {"role": "assistant", "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"Bern\"}"}}]}]),
    "21-consecutive-assistant-messages": dict(messages=[
        {"role": "user", "content": "Tell me two things"},
        {"role": "assistant", "content": "First thing. "},
        {"role": "assistant", "content": "Second thing."}]),
    "22-multi-turn-thinking": dict(enable_thinking=True, messages=[
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": {"blocks": [{"type": "thoughts", "text": "Greet."},
                                                     {"type": "response", "text": "Hello!"}]}},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "Now what?"}]}},
        {"role": "user", "content": "Bye"}]),
    "23-add-generation-prompt": dict(add_generation_prompt=True, messages=[
        {"role": "user", "content": "Continue please"}]),
    "24-continue-assistant-message": dict(continue_assistant_message=True, messages=[
        {"role": "user", "content": "Write a haiku"},
        {"role": "assistant", "content": "An old silent pond"}]),
    "25-awaiting-tool-outputs": dict(tools=[WEATHER], messages=[
        U, {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": "Call the tool."},
            {"type": "tool_calls", "calls": [_call("get_weather", {"city": "Zürich"})]}]}}]),
    "26-tools-flat": dict(tools=[WEATHER, SEARCH], messages=[U]),
    "27-tools-openai-shaped": dict(tools=[{"type": "function", "function": WEATHER},
                                          {"type": "function", "function": SEARCH}], messages=[U]),
    "28-tools-nested-objects-and-arrays": dict(tools=[{
        "name": "plan_trip", "description": "Plan a trip",
        "parameters": {"type": "object", "properties": {
            "traveller": {"type": "object", "properties": {
                "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]},
            "stops": {"type": "array", "items": {"type": "object", "properties": {
                "city": {"type": "string"}, "nights": {"type": "integer"}, "hotel": {"type": "string"}}}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "legs": {"type": "array", "items": {"type": "object", "properties": {"km": {"type": "number"}}}},
            "anything": {"type": "array", "items": {"type": ["object", "object"]}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "free": {"type": "array"},
            "blob": {"type": "object"},
        }, "required": ["traveller", "stops"]}}], messages=[U]),
    "29-tools-oneof": dict(tools=[{
        "name": "set_timer", "description": "Set a timer",
        "parameters": {"type": "object", "properties": {
            "duration": {"oneOf": [
                {"type": "integer", "description": "seconds", "default": 60},
                {"type": "string", "description": "ISO 8601 duration"},
                {"type": "object", "properties": {"minutes": {"type": "number"}}}],
                "default": "PT1M", "description": "How long"},
            "label": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        }}}], messages=[U]),
    "30-tools-enum-nullable-type-lists": dict(tools=[{
        "name": "query", "description": "Query a table",
        "parameters": {"type": "object", "properties": {
            "order": {"type": "string", "enum": ["asc", "desc"], "default": "asc"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "note": {"type": "string", "nullable": True},
            "ids": {"type": "array", "items": {"type": "integer"}, "nullable": True},
            "maybe": {"type": ["string", "null"]},
            "union": {"type": ["object", "object"]},
            "single": {"type": ["boolean"]},
        }, "required": ["order"]}}], messages=[U]),
    "31-tools-defaults-every-json-type": dict(tools=[{
        "name": "configure", "description": "Defaults of every JSON type",
        "parameters": {"type": "object", "properties": {
            "s": {"type": "string", "default": "<b>Grüezi & 'hi'</b> 😀"},
            "i": {"type": "integer", "default": -7},
            "f": {"type": "number", "default": 0.1},
            "t": {"type": "boolean", "default": True},
            "n": {"type": "string", "default": None},
            "l": {"type": "array", "default": [1, "two", None]},
            "o": {"type": "object", "default": {"z": 1, "a": ["<>"], "é": False}},
        }}}], messages=[U]),
    "32-tools-without-parameters": dict(tools=[
        {"name": "now", "description": "The time"},
        {"name": "ping", "description": "Ping", "parameters": {"type": "object", "properties": {}}},
        {"name": "noop", "description": "", "parameters": None}], messages=[U]),
    "33-tools-dict-method-names": dict(tools=[{
        "name": "lookup", "description": "Properties named like dict methods",
        "parameters": {"type": "object", "properties": {
            "items": {"type": "array", "description": "the items"},
            "keys": {"type": "array", "items": {"type": "string"}},
            "values": {"type": "object", "properties": {"get": {"type": "boolean"}}}},
            "required": ["items"]}}], messages=[U]),
    "34-unicode-everywhere": dict(messages=[
        {"role": "system", "content": "Système: ünïcödé, 日本語, 𝔘𝔫𝔦, emoji 😀🇨🇭"},
        {"role": "user", "content": "Backslash \\ quotes \" ' <tag> & amp\nnew line\ttab"},
        {"role": "assistant", "content": "Réponse: « ok » — 👍"}]),
    "35-non-string-leaves": dict(messages=[
        {"role": "user", "content": {"parts": [{"type": "text", "text": 42}, {"type": "text", "text": None},
                                               {"type": "text"}]}},
        {"role": "assistant", "content": {"blocks": [
            {"type": "thoughts", "text": True},
            {"type": "tool_calls", "calls": [_call("calc", {"x": 1})]},
            {"type": "tool_outputs", "outputs": [{"output": {"result": 1.5}}, {"output": [1, "a"]}]},
            {"type": "response", "text": 3.25}]}},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": [_call("calc", {})]}]}},
        {"role": "tool", "content": None},
        {"role": "tool"}]),
    "36-special-tokens-in-text": dict(messages=[
        {"role": "user", "content": "<|assistant_start|>not really<|assistant_end|><s>"},
        {"role": "assistant", "content": "<|inner_prefix|>{{ x }}{% if %}"}]),
    "37-bos-and-date": dict(bos_token="", date="1999-12-31", messages=[{"role": "user", "content": "When?"}]),
    "38-block-calls-openai-shape": dict(messages=[
        U, {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]}]}}]),
    "39-error-mixed-assistant-formats": dict(messages=[
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "string"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": {"blocks": [{"type": "response", "text": "blocks"}]}}]),
    "40-error-tool-outside-assistant": dict(messages=[
        {"role": "user", "content": "a"}, {"role": "tool", "content": "orphan"}]),
    "41-error-invalid-role": dict(messages=[
        {"role": "system", "content": "s"}, {"role": "user", "content": "a"},
        {"role": "developer", "content": "d"}]),
    "42-error-tool-outputs-after-tool-message": dict(messages=[
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": {"blocks": [{"type": "tool_calls", "calls": [_call("f", {})]}]}},
        {"role": "tool", "content": "r"},
        {"role": "assistant", "content": {"blocks": [{"type": "tool_outputs", "outputs": [{"output": "r"}]}]}}]),
    "43-error-tool-without-description": dict(tools=[{"name": "f", "parameters": {}}], messages=[U]),
}


def case_document(name: str) -> dict:
    """The JSON document of a case: messages, tools (if any) and every flag."""
    case = CASES[name]
    full = {"messages": case["messages"]}
    if "tools" in case:
        full["tools"] = case["tools"]
    full.update({k: case.get(k, DEFAULT_FLAGS[k]) for k in FLAGS})
    return full


def case_inputs(case: dict) -> tuple[list, object, dict]:
    """(messages, tools, flags) of a case (as stored in its JSON file)."""
    flags = {k: case.get(k, DEFAULT_FLAGS[k]) for k in FLAGS}
    return case["messages"], case.get("tools"), flags


def expected_files(name: str, dialect: str) -> tuple[Path, Path]:
    return GOLDEN / f"{name}.{dialect}.txt", GOLDEN / f"{name}.{dialect}.error.txt"


def error_file_text(exp: Expected) -> str:
    index = "none" if exp.message_index is None else str(exp.message_index)
    return f"message_index: {index}\ntemplate: {exp.error}\n"


def parse_error_file(text: str) -> int | None:
    first = text.splitlines()[0]
    assert first.startswith("message_index: "), first
    value = first.split(": ", 1)[1]
    return None if value == "none" else int(value)


def main() -> int:
    if ORACLE_MISSING:
        print(f"cannot generate golden files: {ORACLE_MISSING}", file=sys.stderr)
        return 1
    GOLDEN.mkdir(exist_ok=True)
    for old in GOLDEN.iterdir():
        if old.suffix in (".json", ".txt"):
            old.unlink()
    for name in CASES:
        full = case_document(name)
        (GOLDEN / f"{name}.json").write_text(
            json.dumps(full, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        messages, tools, flags = case_inputs(full)
        for dialect in DIALECTS:
            exp = oracle_expect(messages, dialect=dialect, tools=tools, **flags)
            ok_path, err_path = expected_files(name, dialect)
            if exp.error is None:
                ok_path.write_bytes(exp.text.encode("utf-8"))
            else:
                err_path.write_bytes(error_file_text(exp).encode("utf-8"))
    print(f"wrote {len(CASES)} cases x {len(DIALECTS)} dialects to {GOLDEN.name}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
