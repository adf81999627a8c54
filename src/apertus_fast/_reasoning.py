"""Reasoning kept next to an assistant message's content, as OpenAI-style APIs return it.

Servers that split reasoning from the answer (vLLM's and SGLang's reasoning parsers,
OpenAI-compatible APIs, ``Completion.openai()`` here) return an assistant message as
``{"content": ..., "reasoning_content": ..., "tool_calls": [...]}``. None of the Apertus
templates reads ``reasoning_content``: rendered as it is, the reasoning is dropped from
the text without an error. In the Apertus format reasoning is a ``thoughts`` block.

* :func:`unrendered_reasoning` finds the reasoning a render would drop
  (``apertus-fast validate`` warns about it);
* :func:`reasoning_to_blocks` moves it into ``thoughts`` blocks, so that it is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from itertools import chain

from ._errors import RenderError, shown

#: The fields that carry an assistant message's reasoning beside its content, in the
#: order they are looked up: ``reasoning_content`` (vLLM, SGLang, DeepSeek, this
#: package's ``Completion.openai()``), ``reasoning`` (OpenRouter, Ollama), ``thinking``.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


def _is_mapping(x) -> bool:
    """A dict, or another mapping (``UserDict``, ``MappingProxyType``, ...), which
    ``render`` reads as it reads a dict."""
    return type(x) is dict or isinstance(x, Mapping)


def _is_assistant(m) -> bool:
    return _is_mapping(m) and m.get("role") == "assistant"


def _reasoning_of(m: dict, index: int) -> str | None:
    """The message's reasoning text (``None`` if it has none); a field that is not a
    string, or two fields with different texts, raise :class:`RenderError`."""
    found = None
    for field in REASONING_FIELDS:
        value = m.get(field)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise RenderError(f'"{field}": expected a string, got {type(value).__name__}', index)
        if found is not None and value != found[1]:
            raise RenderError(f'"{found[0]}" and "{field}" hold different reasoning; keep one', index)
        found = (field, value)
    return None if found is None else found[1]


_FIELDS = frozenset(REASONING_FIELDS)


def unrendered_reasoning(messages: Iterable[Any]) -> list[tuple[int, str]]:
    """``(message index, field)`` of every assistant message's reasoning that ``render``
    would drop: any value but ``None`` and ``""`` in one of :data:`REASONING_FIELDS` (no
    template reads them; :func:`reasoning_to_blocks` moves strings and rejects other
    values). Empty when there is none, or when ``messages`` is not a list."""
    if not isinstance(messages, (list, tuple)):
        return []
    # the command line asks for every line: the usual answer (no message has any of
    # the fields) comes from one pass over all the messages' keys in C, where the
    # messages are dicts (another mapping's iteration need not show every key)
    if all(type(m) is dict for m in messages) and \
            _FIELDS.isdisjoint(chain.from_iterable(messages)):
        return []
    out = []
    for i, m in enumerate(messages):
        if _is_assistant(m):
            for field in REASONING_FIELDS:
                value = m.get(field)
                if value is not None and not (isinstance(value, str) and not value):
                    out.append((i, field))
    return out


def _text_of(content, index: int) -> str:
    """An OpenAI assistant ``content``: a string, ``None``, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        texts = []
        for part in content:
            if not (_is_mapping(part) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RenderError(f"an assistant content part: expected {{\"type\": \"text\", \"text\": ...}}, "
                                  f"got {shown(part, 60)}", index)
            texts.append(part["text"])
        return "".join(texts)
    raise RenderError(f"assistant content: expected a string, a list of text parts or null, got "
                      f"{type(content).__name__}", index)


def _call(call, index: int) -> dict:
    """A tool call as a ``tool_calls`` block holds it: ``{"name", "arguments"}`` (from the
    OpenAI shape ``{"id", "type": "function", "function": {"name", "arguments"}}``)."""
    if _is_mapping(call):
        kind = call.get("type", "function")
        if kind != "function":
            # (the templates render function calls only, and refuse the others)
            raise RenderError(f'a tool call of "type" {shown(kind, 40)}: only "function" '
                              f'calls can be written in the format', index)
        fn = call.get("function")
        source = fn if _is_mapping(fn) and "name" not in call else call
        if "name" in source and "arguments" in source:
            return {"name": source["name"], "arguments": source["arguments"]}
    raise RenderError(f'a tool call: expected {{"name", "arguments"}} or {{"function": {{"name", '
                      f'"arguments"}}}}, got {shown(call, 80)}', index)


def _blocks(m: dict, index: int, reasoning: str | None) -> list:
    content = m.get("content")
    if _is_mapping(content):
        blocks = content.get("blocks")
        if not isinstance(blocks, (list, tuple)):   # (a tuple renders as a list does)
            raise RenderError('assistant content: a mapping without a "blocks" list', index)
        blocks = list(blocks)
        if reasoning is not None:
            if any(_is_mapping(b) and b.get("type") == "thoughts" for b in blocks):
                raise RenderError("both a thoughts block and a reasoning field; keep one", index)
            blocks.insert(0, {"type": "thoughts", "text": reasoning})
    else:
        text = _text_of(content, index)
        blocks = [{"type": "thoughts", "text": reasoning}] if reasoning is not None else []
        if text or (reasoning is not None and content is not None):
            # after reasoning, content "" (not null) is an answer that began, empty:
            # its response block closes the reasoning (<|inner_suffix|>), as
            # Completion.openai() says a completion did
            blocks.append({"type": "response", "text": text})
    calls = m.get("tool_calls")
    if calls:
        if not isinstance(calls, (list, tuple)):   # (a tuple renders as a list does)
            raise RenderError(f'"tool_calls": expected a list, got {type(calls).__name__}', index)
        blocks.append({"type": "tool_calls", "calls": [_call(c, index) for c in calls]})
    return blocks


def reasoning_to_blocks(messages: Iterable[Any]) -> list[Any]:
    """``messages`` with each assistant message's reasoning field (:data:`REASONING_FIELDS`)
    moved into a ``thoughts`` block, so that ``render`` renders it.

    If no assistant message has reasoning, a copy of the list is returned, unchanged but
    for assistant messages with null or no content (OpenAI's shape of a message with
    only tool calls), which get ``""``. Otherwise every assistant message becomes block
    content (a conversation's assistant messages share one format), in the order a model
    writes them and ``parse_completion`` reads them: ``thoughts`` (the reasoning),
    ``response`` (the content: a string, or a list of text parts, joined; after
    reasoning, also an empty one, which closes the reasoning, where the content is
    ``""`` rather than null), ``tool_calls`` (the message's ``tool_calls``, as
    ``{"name", "arguments"}``; ids are dropped, the format has none). Assistant messages
    that already hold blocks keep them, after the reasoning. The reasoning fields are
    removed; other keys, and all other messages, are kept as they are. The input is not
    modified.

    So ``Completion.openai()`` converts back: ``reasoning_to_blocks([c.openai()])`` holds
    the same blocks as ``c.messages`` when the turn was reasoning, then the answer, then
    tool calls. Raises :class:`RenderError` (naming the message) for a reasoning field that
    is not a string, two fields that disagree, a reasoning field beside a thoughts block,
    or content or tool calls it cannot read.
    """
    if not isinstance(messages, (list, tuple)):
        raise RenderError(f"messages: expected a list, got {type(messages).__name__}")
    reasoning = {i: _reasoning_of(m, i) for i, m in enumerate(messages) if _is_assistant(m)}
    if all(r is None for r in reasoning.values()):
        # only OpenAI's null content (a message with only tool calls) changes: to the
        # empty string the templates take
        return [{**m, "content": ""} if i in reasoning and m.get("content") is None else m
                for i, m in enumerate(messages)]
    out = []
    for i, m in enumerate(messages):
        if i not in reasoning:
            out.append(m)
            continue
        converted = {k: v for k, v in m.items() if k not in REASONING_FIELDS and k != "tool_calls"}
        converted["content"] = {"blocks": _blocks(m, i, reasoning[i])}
        out.append(converted)
    return out
