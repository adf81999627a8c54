"""Error parity, site by site: one example per ``raise_exception`` call and per
attribute / type failure of each template.

For each example and each dialect where the template fails on it:

* ``test_ours_raises``: ``render`` raises ``RenderError`` (a ``ValueError``) whose
  ``message_index`` is the offending message (``None`` for tool specs) and whose text
  names it (``"message 3"``). Runs without the oracle too.
* ``test_template_raises``: the official template fails on it as well (needs the oracle).

Template line numbers below are those of ``apertus-format-reference.jinja``
(``apertus-1.jinja`` is the same up to line 206; ``apertus-1.5.jinja`` is shifted).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import pytest

from tests.make_golden import oracle_expect, oracle_tools
from tests.oracle import ORACLE_MISSING, OracleError, oracle_render

from apertus_fast import RenderError, render

REF, V1, V15 = "apertus-format-reference", "apertus-1", "apertus-1.5"
ALL = (REF, V1, V15)
DATE = "2026-01-01"


@dataclass(frozen=True)
class Case:
    id: str
    messages: list
    index: int | None  #: offending message; None: the tool specs
    tools: list | None = None
    dialects: tuple = ALL
    flags: dict = field(default_factory=dict)


def u(text="hi"):
    return {"role": "user", "content": text}


def a(content="ok", **extra):
    return {"role": "assistant", "content": content, **extra}


def blocks(*bs, **extra):
    return {"role": "assistant", "content": {"blocks": list(bs)}, **extra}


def call(name="f", arguments="{}"):
    return {"name": name, "arguments": arguments}


def legacy(name="f", arguments="{}", **extra):
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **extra}


SYS = {"role": "system", "content": "sys"}
CALLS = {"type": "tool_calls", "calls": [call()]}


def tool(**params):
    return [{"name": "f", "description": "d",
             "parameters": {"type": "object", "properties": params}}]


CASES = [
    # --- raise_exception("Invalid system message") (L163: content not str / {"text"}) -----
    Case("system-content-null", [{"role": "system", "content": None}, u()], 0),
    Case("system-content-list", [{"role": "system", "content": [{"type": "text", "text": "s"}]}], 0),
    Case("system-content-mapping-without-text", [{"role": "system", "content": {"parts": []}}], 0),
    Case("system-content-int", [{"role": "system", "content": 7}, u()], 0),
    # --- raise_exception("Invalid system message") (L166: no content) -----------------------
    Case("system-without-content", [{"role": "system"}, u()], 0),
    # --- system text concatenation (L161: system_token + content.text + ...) ----------------
    Case("system-text-null", [{"role": "system", "content": {"text": None}}], 0),
    Case("system-text-int", [{"role": "system", "content": {"text": 3}}, u()], 0),
    Case("system-text-list", [{"role": "system", "content": {"text": ["a"]}}], 0),
    # --- raise_exception("Invalid user part: " + part.type) (L208; 1.5: L219) ----------------
    Case("user-part-unknown", [SYS, u(), a(), {"role": "user", "content": {"parts": [{"type": "video"}]}}], 3),
    Case("user-part-image-ref", [u({"parts": [{"type": "image", "image": "x"}]})], 0, dialects=(REF,)),
    Case("user-part-image-url", [u({"parts": [{"type": "text", "text": "t"}, {"type": "image_url"}]})], 0,
         dialects=(REF, V1)),
    Case("user-part-input-image", [u({"parts": [{"type": "input_image"}]})], 0, dialects=(REF, V1)),
    Case("user-part-audio", [u({"parts": [{"type": "audio"}]})], 0, dialects=(REF, V1)),
    Case("user-part-input-audio", [u({"parts": [{"type": "input_audio"}]})], 0, dialects=(REF, V1)),
    Case("user-part-without-type", [u({"parts": [{"text": "t"}]})], 0),
    Case("user-part-type-int", [u({"parts": [{"type": 3}]})], 0),
    Case("user-part-type-null", [u({"parts": [{"type": None}]})], 0),
    Case("user-part-not-a-dict", [u({"parts": ["text"]})], 0),
    # --- raise_exception("Invalid user part: " + part.type) (1.5 list content: L231) ---------
    # (reference / apertus-1 reject list content itself: "Invalid user message")
    Case("user-list-part-unknown", [u([{"type": "text", "text": "t"}, {"type": "file"}])], 0),
    Case("user-list-part-without-type", [SYS, u([{"text": "t"}])], 1),
    # --- raise_exception("Invalid user message: " + role) (L212; 1.5: L235) ------------------
    Case("user-content-null", [u(None)], 0),
    Case("user-content-int", [SYS, u(5)], 1),
    Case("user-content-mapping-without-parts", [u({"text": "t"})], 0),
    # (an empty mapping: apertus-1.5's list-content branch must not take it for an
    # empty list of parts and render an empty turn)
    Case("user-content-empty-mapping", [u({})], 0),
    Case("user-content-list", [u(), a(), u([{"type": "text", "text": "t"}])], 2, dialects=(REF, V1)),
    Case("user-content-true", [u(True)], 0),
    # --- iterating parts (L204: for part in parts) -------------------------------------------
    Case("user-parts-null", [u({"parts": None})], 0),
    Case("user-parts-int", [u({"parts": 5})], 0),
    Case("user-parts-string", [u({"parts": "text"})], 0),
    # --- raise_exception("Cannot have both tool outputs ...") (L262) --------------------------
    Case("tool-outputs-block-after-tool-message",
         [u(), blocks(CALLS), {"role": "tool", "content": "r"},
          blocks({"type": "tool_outputs", "outputs": [{"output": "r"}]})], 3),
    # --- raise_exception("Invalid assistant block type: " + block.type) (L283) ---------------
    Case("block-type-unknown", [u(), blocks({"type": "text", "text": "x"})], 1),
    Case("block-without-type", [SYS, u(), blocks({"type": "response", "text": "x"}, {"text": "x"})], 2),
    Case("block-type-int", [u(), blocks({"type": 1})], 1),
    Case("block-not-a-dict", [u(), blocks("response")], 1),
    Case("second-block-not-a-dict", [u(), blocks({"type": "response", "text": "x"}, 7)], 1),
    # --- iterating blocks (L232) ---------------------------------------------------------------
    Case("blocks-null", [u(), {"role": "assistant", "content": {"blocks": None}}], 1),
    Case("blocks-int", [u(), {"role": "assistant", "content": {"blocks": 3}}], 1),
    Case("blocks-string", [u(), {"role": "assistant", "content": {"blocks": "response"}}], 1),
    # --- one object where a list belongs: the template visits its keys (or characters) ----
    Case("blocks-mapping", [u(), {"role": "assistant",
                                  "content": {"blocks": {"type": "response", "text": "x"}}}], 1),
    Case("block-calls-mapping", [u(), blocks({"type": "tool_calls", "calls": call()})], 1),
    Case("legacy-calls-mapping", [u(), a("a", tool_calls=legacy())], 1),
    Case("tools-mapping", [u()], None, tools={"name": "f", "description": "d"}),
    # --- raise_exception("Invalid assistant content") (L287) ----------------------------------
    Case("assistant-string-then-blocks", [u(), a("s"), u(), blocks({"type": "response", "text": "b"})], 3),
    Case("assistant-blocks-then-string", [SYS, u(), blocks({"type": "response", "text": "b"}), a("s")], 3),
    Case("assistant-content-null", [u(), a(None)], 1),
    Case("assistant-content-mapping-without-blocks", [u(), a({"text": "t"})], 1),
    Case("assistant-content-list", [u(), a([{"type": "text", "text": "t"}])], 1),
    Case("assistant-content-int", [u(), a(4)], 1),
    # --- raise_exception("Invalid assistant message") (L290: no content) ---------------------
    Case("assistant-without-content", [u(), {"role": "assistant", "tool_calls": [legacy()]}], 1),
    # --- tool calls in blocks (L248-L254) ---------------------------------------------------
    Case("block-calls-int", [u(), blocks({"type": "tool_calls", "calls": 3})], 1),
    Case("block-call-without-name", [u(), blocks({"type": "tool_calls", "calls": [{"arguments": "{}"}]})], 1),
    Case("block-call-name-int", [u(), blocks({"type": "tool_calls", "calls": [call(name=7)]})], 1),
    Case("block-call-name-null", [u(), blocks({"type": "tool_calls", "calls": [call(name=None)]})], 1),
    Case("block-call-without-arguments", [u(), blocks({"type": "tool_calls", "calls": [{"name": "f"}]})], 1),
    Case("block-call-arguments-dict", [u(), blocks({"type": "tool_calls", "calls": [call(arguments={"a": 1})]})],
         1, dialects=(REF, V1)),
    Case("block-call-arguments-null", [u(), blocks({"type": "tool_calls", "calls": [call(arguments=None)]})],
         1, dialects=(REF, V1)),
    Case("block-call-openai-shape", [u(), blocks({"type": "tool_calls", "calls": [legacy()]})], 1,
         dialects=(REF, V1)),
    Case("block-call-not-a-dict", [u(), blocks({"type": "tool_calls", "calls": ["f"]})], 1),
    Case("display-answers-calls-int", [u(), blocks({"type": "thoughts", "text": "t"},
                                                   {"type": "tool_calls", "calls": 3})], 1),
    # --- tool outputs in blocks (L265) --------------------------------------------------------
    Case("block-outputs-int", [u(), blocks({"type": "tool_outputs", "outputs": 2})], 1),
    Case("block-outputs-null", [u(), blocks({"type": "tool_outputs", "outputs": None})], 1),
    # --- OpenAI tool_calls: raise_exception("Invalid tool call type: " + type) (L302) --------
    Case("legacy-call-type-other", [u(), a("x", tool_calls=[legacy(type="tool")])], 1),
    Case("legacy-call-type-null", [u(), a("x", tool_calls=[{"type": None, "function": call()}])], 1),
    Case("legacy-call-type-missing", [u(), a("x", tool_calls=[{"function": call()}])], 1, dialects=(REF, V1)),
    Case("legacy-call-second-bad", [SYS, u(), a("x", tool_calls=[legacy(), legacy(type="x")])], 2),
    Case("legacy-call-not-a-dict", [u(), a("x", tool_calls=["f"])], 1),
    # --- OpenAI tool_calls: raise_exception("Invalid tool call") (1.5: L335) -----------------
    Case("legacy-call-arguments-empty", [u(), a("x", tool_calls=[legacy(arguments="")])], 1, dialects=(V15,)),
    Case("legacy-call-arguments-empty-dict", [u(), a("x", tool_calls=[legacy(arguments={})])], 1),
    Case("legacy-call-arguments-null", [u(), a("x", tool_calls=[legacy(arguments=None)])], 1),
    Case("legacy-call-name-empty", [u(), a("x", tool_calls=[legacy(name="")])], 1, dialects=(V15,)),
    Case("legacy-call-without-name", [u(), a("x", tool_calls=[{"type": "function",
                                                                "function": {"arguments": "{}"}}])], 1),
    Case("legacy-call-without-function", [u(), a("x", tool_calls=[{"type": "function"}])], 1),
    # --- OpenAI tool_calls: concatenations (L297) --------------------------------------------
    Case("legacy-call-arguments-dict", [u(), a("x", tool_calls=[legacy(arguments={"a": 1})])], 1,
         dialects=(REF, V1)),
    Case("legacy-call-name-int", [u(), a("x", tool_calls=[legacy(name=5)])], 1),
    Case("legacy-call-flat", [u(), a("x", tool_calls=[{"type": "function", **call()}])], 1, dialects=(REF, V1)),
    Case("legacy-tool-calls-int", [u(), a("x", tool_calls=5)], 1),
    Case("legacy-tool-calls-string", [u(), a("x", tool_calls="f")], 1),
    # --- raise_exception("Tool message outside of assistant") (L309) -------------------------
    Case("tool-first", [{"role": "tool", "content": "r"}], 0),
    Case("tool-after-system", [SYS, {"role": "tool", "content": "r"}], 1),
    Case("tool-after-user", [u(), a(), u(), {"role": "tool", "content": "r"}], 3),
    # --- raise_exception("Invalid message role") (L319) ---------------------------------------
    Case("role-developer", [u(), {"role": "developer", "content": "d"}], 1),
    Case("role-late-system", [u(), a(), SYS], 2),
    Case("role-missing", [SYS, {"content": "x"}], 1),
    Case("role-null", [{"role": None, "content": "x"}], 0),
    Case("role-capitalised", [{"role": "User", "content": "x"}], 0),
    Case("message-string", [u(), "hello"], 1),
    Case("message-null", [None], 0),
    Case("message-list", [[{"role": "user", "content": "x"}]], 0),
    # --- tool specs: render_tools (L100-L121) ------------------------------------------------
    Case("tool-without-description", [u()], None, tools=[{"name": "f"}]),
    Case("tool-description-null", [u()], None, tools=[{"name": "f", "description": None}]),
    Case("tool-description-int", [u()], None, tools=[{"name": "f", "description": 1}]),
    Case("tool-without-name", [u()], None, tools=[{"description": "d"}]),
    Case("tool-name-list", [u()], None, tools=[{"name": ["f"], "description": "d"}]),
    Case("tool-not-a-dict", [u()], None, tools=["f"]),
    Case("tool-second-bad", [u()], None, tools=tool() + [{"name": "g"}]),
    Case("tool-openai-without-description", [u()], None,
         tools=[{"type": "function", "function": {"name": "f"}}]),
    # a tool with a name of its own beside a "function": not unwrapped (apertus-1.5,
    # which reads tool.function when it is defined, accepts it)
    Case("tool-named-beside-function", [u()], None,
         tools=[{"name": "x", "function": {"name": "f", "description": "d"}}], dialects=(REF, V1)),
    Case("tool-properties-list", [u()], None,
         tools=[{"name": "f", "description": "d", "parameters": {"properties": [{"type": "string"}]}}]),
    Case("tool-properties-string", [u()], None,
         tools=[{"name": "f", "description": "d", "parameters": {"properties": "a"}}]),
    Case("param-description-int", [u()], None, tools=tool(a={"type": "string", "description": 5})),
    Case("param-description-list", [u()], None, tools=tool(a={"description": ["x"]})),
    Case("param-enum-default-int", [u()], None,
         tools=tool(a={"type": "integer", "enum": [1, 2], "default": 1})),
    Case("param-enum-default-null", [u()], None,
         tools=tool(a={"type": "string", "enum": ["x"], "default": None})),
    Case("param-oneof-default-int", [u()], None,
         tools=tool(a={"oneOf": [{"type": "integer"}], "default": 1})),
    Case("param-oneof-default-dict", [u()], None,
         tools=tool(a={"oneOf": [{"type": "string"}], "default": {"x": 1}})),
    Case("required-int", [u()], None,
         tools=[{"name": "f", "description": "d",
                 "parameters": {"properties": {"a": {}}, "required": 5}}]),
    # --- tool specs: render_typescript_type (L1-L95) -------------------------------------------
    Case("nested-properties-list", [u()], None,
         tools=tool(a={"type": "object", "properties": ["x"]})),
    Case("nested-required-int", [u()], None,
         tools=tool(a={"type": "object", "properties": {"x": {}}, "required": 1})),
    Case("oneof-int", [u()], None, tools=tool(a={"oneOf": 5})),
    Case("oneof-variant-description-int", [u()], None,
         tools=tool(a={"oneOf": [{"type": "string", "description": 1}]})),
    Case("enum-int", [u()], None, tools=tool(a={"type": "string", "enum": 5})),
    Case("array-items-object-properties-list", [u()], None,
         tools=tool(a={"type": "array", "items": {"type": "object", "properties": [1]}})),
    # --- the system message is checked before the tools ------------------------------------------
    Case("system-before-tools", [{"role": "system"}, u()], 0, tools=[{"name": "f"}]),
    Case("tools-before-messages", [u(), {"role": "tool"}], None, tools=[{"name": "f"}]),
]

PAIRS = [pytest.param(c, d, id=f"{c.id}[{d}]") for c in CASES for d in c.dialects]


def _render(case, dialect):
    return render(case.messages, dialect=dialect, tools=case.tools, date=DATE, **case.flags)


@pytest.mark.parametrize("case, dialect", PAIRS)
def test_ours_raises(case, dialect):
    with pytest.raises(RenderError) as info:
        _render(case, dialect)
    exc = info.value
    assert isinstance(exc, ValueError)
    assert exc.message_index == case.index, str(exc)
    if case.index is not None:
        assert f"message {case.index}" in str(exc)
    assert "_Undefined" not in str(exc) and "_Fail" not in str(exc)  # no internals


# What the messages say: the field, and for tools which tool (by index and name).
MESSAGES = [
    ("tool-without-description", 'tools[0] (\'f\'): "description": expected a string, it is missing'),
    ("tool-without-name", 'tools[0]: "name": expected a string, it is missing'),
    ("tool-second-bad", 'tools[1] (\'g\'): "description": expected a string, it is missing'),
    ("param-enum-default-int", 'tools[0] (\'f\'): parameter \'a\' (an enum): "default": expected a string, got int 1'),
    ("block-without-type", 'message 2: blocks[1]: an assistant block\'s "type": expected a string, it is missing'),
    ("block-call-without-name", 'message 1: blocks[0]: calls[0]: a tool call\'s "name": expected a string, it is '
                                'missing'),
    ("system-text-int", 'message 0: the system content\'s "text": expected a string, got int 3'),
    ("user-part-without-type", 'message 0: a user content part\'s "type": expected a string, it is missing'),
    ("block-calls-int", 'message 1: blocks[0]: a tool_calls block\'s "calls": expected a list, got int 3'),
    ("blocks-null", 'message 1: the assistant content\'s "blocks": expected a list, got NoneType None'),
    ("blocks-mapping", 'message 1: the assistant content\'s "blocks": expected a list, got dict '
                       "{'type': 'response', 'text': 'x'} (its keys were read as the items: an "
                       'assistant block\'s "type": expected a string, it is missing)'),
    ("blocks-string", 'message 1: the assistant content\'s "blocks": expected a list, got str '
                      "'response' (its characters were read as the items: an assistant block's "
                      '"type": expected a string, it is missing)'),
    ("block-calls-mapping", 'message 1: blocks[0]: a tool_calls block\'s "calls": expected a list, got dict '
                            "{'name': 'f', 'arguments': '{}'} (its keys were read as the items: a "
                            'tool call\'s "name": expected a string, it is missing)'),
    ("user-parts-string", 'message 0: the user content\'s "parts": expected a list, got str \'text\' '
                          '(its characters were read as the items: a user content part\'s "type": '
                          'expected a string, it is missing)'),
    ("tools-mapping", "tools: expected a list, got dict {'name': 'f', 'description': 'd'} (its keys "
                      'were read as the items: tools[0]: "description": expected a string, it is '
                      "missing)"),
    ("enum-int", 'tools[0] (\'f\'): "enum": expected a list, got int 5'),
    ("tool-not-a-dict", 'tools[0]: expected a tool (a dict with "name", "description" and "parameters"), got '
                        'str \'f\' ("description": expected a string, it is missing)'),
    ("block-call-not-a-dict", "message 1: blocks[0]: calls[0]: expected a tool call (a dict), got str 'f' (a tool "
                              'call\'s "name": expected a string, it is missing)'),
    ("second-block-not-a-dict", "message 1: blocks[1]: expected a block (a dict with \"type\"), got int 7 (an "
                                'assistant block\'s "type": expected a string, it is missing)'),
    ("role-developer", "message 1: Invalid message role: 'developer' (expected system, user, assistant or tool)"),
    ("role-late-system", "message 2: Invalid message role: 'system' (only the first message may be a system message)"),
    ("role-missing", 'message 1: Invalid message role (no "role")'),
    ("message-string", 'message 1: Invalid message role (a message is a dict with "role" and "content", got str)'),
    ("assistant-content-null", 'message 1: Invalid assistant content: None (expected a string or {"blocks": [...]}; '
                               'for a turn of tool calls only, give "" with "tool_calls")'),
    ("assistant-content-int", 'message 1: Invalid assistant content: got int 4; expected a string or {"blocks": [...]}'),
    ("assistant-content-list", "message 1: Invalid assistant content: got list [{'type': 'text', 'text': 't'}]; "
                               'expected a string or {"blocks": [...]}'),
    ("assistant-content-mapping-without-blocks",
     'message 1: Invalid assistant content: a mapping without "blocks", keys [\'text\']; expected a string or '
     '{"blocks": [...]}'),
    ("assistant-string-then-blocks", "message 3: Invalid assistant content: blocks after an assistant message with "
                                     "a string (a conversation's assistant messages are all strings or all "
                                     '{"blocks": [...]})'),
    ("assistant-blocks-then-string", "message 3: Invalid assistant content: a string after an assistant message "
                                     "with blocks (a conversation's assistant messages are all strings or all "
                                     '{"blocks": [...]})'),
    ("assistant-without-content", 'message 1: Invalid assistant message: no "content" (a string, or '
                                  '{"blocks": [...]}; "" for a turn of tool calls only)'),
    ("system-without-content", 'message 0: Invalid system message (no "content"; expected a string or {"text": ...})'),
    ("system-content-int", 'message 0: Invalid system message (content: got int 7; expected a string or '
                           '{"text": ...})'),
    ("system-content-mapping-without-text", 'message 0: Invalid system message (content: a mapping without '
                                            '"text", keys [\'parts\']; expected a string or {"text": ...})'),
    ("tool-first", "message 0: Tool message outside of assistant (it is the first message; tool messages follow "
                   "the assistant message whose tool calls they answer)"),
    ("tool-after-system", "message 1: Tool message outside of assistant (it follows a 'system' message; tool "
                          "messages follow the assistant message whose tool calls they answer)"),
    ("tool-after-user", "message 3: Tool message outside of assistant (it follows a 'user' message; tool "
                        "messages follow the assistant message whose tool calls they answer)"),
]

# messages that depend on the dialect: (case id, dialect, message)
DIALECT_MESSAGES = [
    ("user-content-int", V15, 'message 1: Invalid user message: user (content: got int 5; expected a string, '
                              '{"parts": [...]} or a list of parts)'),
    ("user-content-int", REF, 'message 1: Invalid user message: user (content: got int 5; expected a string or '
                              '{"parts": [...]})'),
    ("user-content-mapping-without-parts", V1, 'message 0: Invalid user message: user (content: a mapping '
                                               'without "parts", keys [\'text\']; expected a string or '
                                               '{"parts": [...]})'),
    ("user-content-mapping-without-parts", V15, 'message 0: Invalid user message: user (content: a mapping '
                                                'without "parts", keys [\'text\']; expected a string, '
                                                '{"parts": [...]} or a list of parts)'),
    ("user-content-empty-mapping", V15, 'message 0: Invalid user message: user (content: a mapping '
                                        'without "parts", keys []; expected a string, {"parts": [...]} '
                                        'or a list of parts)'),
    ("tool-named-beside-function", V1, 'tools[0] (\'x\'): "description": expected a string, it is missing'),
    ("user-content-list", REF, "message 2: Invalid user message: user (content: got list [{'type': 'text', "
                               "'text': 't'}]; expected a string or {\"parts\": [...]})"),
    ("legacy-call-arguments-null", V15, 'message 1: tool_calls[0]: Invalid tool call ("arguments" is empty (None))'),
    ("legacy-call-name-empty", V15, 'message 1: tool_calls[0]: Invalid tool call ("name" is empty (\'\'))'),
    ("legacy-call-without-name", V15, 'message 1: tool_calls[0]: Invalid tool call ("name" is missing)'),
    # an item that is not a dict is named by its index, and said to be what it is
    ("legacy-call-not-a-dict", V15, "message 1: tool_calls[0]: expected a tool call (a dict), got str 'f' "
                                    '(Invalid tool call ("name" is missing and "arguments" is missing))'),
    ("legacy-call-not-a-dict", V1, "message 1: tool_calls[0]: expected a tool call (a dict), got str 'f' "
                                   '(a tool call\'s "type": expected a string, it is missing)'),
]


@pytest.mark.parametrize("case_id, dialect, expected", DIALECT_MESSAGES,
                         ids=[f"{m[0]}-{m[1]}" for m in DIALECT_MESSAGES])
def test_messages_say_what_was_found(case_id, dialect, expected):
    case = next(c for c in CASES if c.id == case_id)
    with pytest.raises(RenderError) as info:
        _render(case, dialect)
    assert str(info.value) == expected


@pytest.mark.parametrize("case_id, expected", MESSAGES, ids=[m[0] for m in MESSAGES])
@pytest.mark.parametrize("dialect", ALL)
def test_messages_name_the_field(case_id, expected, dialect):
    case = next(c for c in CASES if c.id == case_id)
    with pytest.raises(RenderError) as info:
        _render(case, dialect)
    assert str(info.value) == expected


@pytest.mark.parametrize("dialect", ALL)
def test_block_call_without_arguments_names_them(dialect):
    messages = [u(), blocks({"type": "tool_calls", "calls": [{"name": "f"}]})]
    with pytest.raises(RenderError, match=r'message 1: blocks\[0\]: calls\[0\]: a tool call\'s "arguments": '
                                          r'expected a string'):
        render(messages, dialect=dialect, date=DATE)


def test_render_tools_raises_render_error():
    from apertus_fast import render_tools

    with pytest.raises(RenderError) as info:
        render_tools([{"name": "f", "description": "d"}, {"name": "g"}])
    assert info.value.message_index is None
    assert str(info.value) == 'tools[1] (\'g\'): "description": expected a string, it is missing'
    with pytest.raises(RenderError, match="^tools: cannot iterate over int$"):
        render_tools(5)


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("case, dialect", PAIRS)
def test_template_raises(case, dialect):
    with pytest.raises(OracleError):
        oracle_render(case.messages, dialect=dialect, tools=oracle_tools(case.tools, dialect),
                      date=DATE, **case.flags)
    exp = oracle_expect(case.messages, dialect=dialect, tools=case.tools, date=DATE, **case.flags)
    assert exp.message_index == case.index, exp.error


# Inputs that some dialects accept: apertus-fast must render them there (and the
# template must agree), which keeps the dialect lists above honest.
ACCEPTED = [pytest.param(c, d, id=f"{c.id}[{d}]") for c in CASES for d in ALL
            if d not in c.dialects]


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("case, dialect", ACCEPTED)
def test_accepted_elsewhere(case, dialect):
    expected = oracle_render(case.messages, dialect=dialect,
                             tools=oracle_tools(case.tools, dialect), date=DATE, **case.flags)
    assert _render(case, dialect) == expected


# ---------------------------------------------------------------------------------------
# deliberate divergence: OpenAI-shaped tool specs

OPENAI_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                      "parameters": {"type": "object",
                                                     "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"name": "flat", "description": "a flat one in the same list"},
]


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("dialect", ALL)
def test_openai_tool_specs_are_unwrapped(dialect):
    messages = [u()]
    flat = [t.get("function", t) for t in OPENAI_TOOLS]
    got = render(messages, dialect=dialect, tools=OPENAI_TOOLS, date=DATE)
    assert got == oracle_render(messages, dialect=dialect, tools=flat, date=DATE)
    if dialect == V15:
        assert got == oracle_render(messages, dialect=dialect, tools=OPENAI_TOOLS, date=DATE)
    else:  # the template itself fails on them: apertus-fast is deliberately lenient
        with pytest.raises(OracleError):
            oracle_render(messages, dialect=dialect, tools=OPENAI_TOOLS, date=DATE)


# --------------------------------------------------------------------------- the date argument

BAD_DATES = ["2026-13-01", "2026-02-30", "tomorrow", "", "20260101", "2026-W01-1",
             "2026-01-01T00:00", " 2026-01-01", 20260101, 1.5, b"2026-01-01", ["2026-01-01"]]


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("system", [False, True], ids=["default system prompt", "own system prompt"])
@pytest.mark.parametrize("date", BAD_DATES, ids=repr)
def test_a_bad_date_is_an_argument_error(dialect, system, date):
    """Whether or not the conversation uses the date (a system message of its own
    replaces the dated default), a bad one is a RenderError blaming no message, on
    both paths."""
    from apertus_fast import _render

    messages = [{"role": "system", "content": "s"}] if system else []
    messages.append({"role": "user", "content": "x"})
    render(messages, dialect=dialect, date="2026-01-01")  # a good date checked just before
    for fn in (render, _render.render):
        with pytest.raises(RenderError, match=r"^date must be") as info:
            fn(messages, dialect=dialect, date=date)
        assert info.value.message_index is None


class _DateString(str):
    def __str__(self):
        return "not the date"


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("date", [_dt.date(2026, 1, 2), _dt.datetime(2026, 1, 2, 23, 59),
                                  _DateString("2026-01-02")], ids=repr)
def test_date_objects_and_string_subclasses(dialect, date):
    messages = [{"role": "user", "content": "x"}]
    assert render(messages, dialect=dialect, date=date) == render(messages, dialect=dialect,
                                                                  date="2026-01-02")


# --------------------------------------------------------------------------- deep schemas

def _nested(shape: str, depth: int) -> dict:
    spec = {"type": "string"}
    for _ in range(depth):
        if shape == "array":
            spec = {"type": "array", "items": spec}
        elif shape == "object":
            spec = {"type": "object", "properties": {"x": spec}}
        else:
            spec = {"oneOf": [spec, {"type": "number"}]}
    return {"name": "f", "description": "d",
            "parameters": {"type": "object", "properties": {"p": spec}}}


@pytest.mark.parametrize("shape", ["array", "object", "oneOf"])
@pytest.mark.parametrize("dialect", ALL)
def test_a_schema_nested_too_deeply_is_an_error_not_a_crash(shape, dialect):
    # the compiled build recursed in C and crashed the interpreter (SIGSEGV) on 60,000
    # levels; the templates fail with RecursionError from about 200-330 levels
    import threading

    from apertus_fast._render import MAX_SCHEMA_DEPTH

    for depth in (MAX_SCHEMA_DEPTH + 1, 100_000):
        with pytest.raises(RenderError) as info:
            render([u()], dialect=dialect, tools=[_nested(shape, depth)], date=DATE)
        assert info.value.message_index is None
        assert str(info.value) == ("tools[0] ('f'): the parameter schema nests more than "
                                   f"{MAX_SCHEMA_DEPTH} levels deep")
    # also on a thread's small stack, where 4,000 levels crashed
    seen = []
    deep = _nested(shape, 100_000)   # (made and freed on the main thread's stack: freeing
    #                                   it on a small one crashes CPython 3.13.0 by itself)

    def run():
        try:
            render([u()], dialect=dialect, tools=[deep], date=DATE)
        except RenderError as exc:
            seen.append(exc)

    old = threading.stack_size(512 * 1024)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    assert len(seen) == 1


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("shape", ["array", "object", "oneOf"])
@pytest.mark.parametrize("dialect", ALL)
def test_a_deep_schema_the_template_renders_renders_alike(shape, dialect):
    tools = [_nested(shape, 60)]
    assert render([u()], dialect=dialect, tools=tools, date=DATE) == \
        oracle_render([u()], dialect=dialect, tools=tools, date=DATE)


# --------------------------------------------------------------------------- the tool cache

@pytest.mark.parametrize("dialect", ALL)
def test_the_tool_cache_tells_buffers_with_the_same_bytes_apart(dialect):
    # the general path's cache key is marshal.dumps(tool), which writes every buffer as
    # the same record: array("u", "ab") and array("I", [97, 98]) shared one key, and the
    # second rendered as the first. (A tuple of tools: the hot path leaves it to the
    # general path in both builds.)
    import array
    import sys

    def tools(enum):
        return ({"name": "f", "description": "d", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "enum": enum}}}},)

    same = array.array("I", [97, 98])
    if sys.byteorder != "little" or same.itemsize != 4:
        pytest.skip("array('u') and array('I') share their bytes on little-endian, 4-byte ints")
    wide = "w" if sys.version_info >= (3, 13) else "u"   # ("u" is deprecated from 3.13)
    for enum, shown in [(array.array(wide, "ab"), '"a" | "b"'), (same, '"97" | "98"'),
                        (b"ab", '"97" | "98"'), (bytearray(b"ab"), '"97" | "98"'),
                        (["a", "b"], '"a" | "b"')]:
        got = render([u()], dialect=dialect, tools=tools(enum), date=DATE)
        assert f"a?: {shown}" in got, (enum, got)


# --------------------------------------------------------------------------- flag values

class _Ambiguous:
    """A value whose truth fails, like a NumPy array or a pandas Series."""

    def __bool__(self):
        raise ValueError("truth value is ambiguous")

    def __str__(self):
        raise ValueError("no text")


@pytest.mark.parametrize("dialect", ALL)
def test_continue_assistant_message_is_read_only_where_the_template_reads_it(dialect):
    # the templates read it only for a last assistant turn still open (apertus-1, 1.5)
    ends_with_user = [u(), a(), u()]
    assert render(ends_with_user, dialect=dialect, date=DATE,
                  continue_assistant_message=_Ambiguous()) == \
        render(ends_with_user, dialect=dialect, date=DATE)
    ends_with_assistant = [u(), a()]
    if dialect == REF:   # never reads it
        render(ends_with_assistant, dialect=dialect, date=DATE,
               continue_assistant_message=_Ambiguous())
        return
    # ... even when its calls wait for their outputs: the template asks that after it
    for messages in (ends_with_assistant, _WAITING):
        with pytest.raises(RenderError, match="^continue_assistant_message: ValueError: "
                                              "truth value is ambiguous$"):
            render(messages, dialect=dialect, date=DATE,
                   continue_assistant_message=_Ambiguous())


_WAITING = [u(), {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("dialect", ALL)
def test_the_template_reads_continue_assistant_message_alike(dialect):
    oracle_render([u(), a(), u()], dialect=dialect, date=DATE,
                  continue_assistant_message=_Ambiguous())
    if dialect == REF:
        oracle_render([u(), a()], dialect=dialect, date=DATE,
                      continue_assistant_message=_Ambiguous())
    else:
        for messages in ([u(), a()], _WAITING):
            with pytest.raises(OracleError):
                oracle_render(messages, dialect=dialect, date=DATE,
                              continue_assistant_message=_Ambiguous())


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("name", ["enable_thinking", "add_generation_prompt", "tools",
                                  "bos_token"])
def test_an_argument_whose_truth_or_text_fails_is_a_render_error(dialect, name):
    with pytest.raises(RenderError) as info:
        render([u()], dialect=dialect, date=DATE, **{name: _Ambiguous()})
    assert info.value.message_index is None
    assert str(info.value) == (f"{name}: ValueError: no text" if name == "bos_token" else
                               f"{name}: ValueError: truth value is ambiguous")


@pytest.mark.parametrize("depth", [200, 990, 995, 1200, 20_000])
@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1"])
def test_a_value_nested_too_deep_for_repr_is_shown_not_a_recursion_error(depth, dialect):
    """The message named the bad value with repr, cut after the fact: at depths near the
    recursion limit, repr raised RecursionError, whose text became the message, in one
    build sooner than in the other (parity audit: at depth 995 the compiled build named
    the value, the plain one said "RecursionError: maximum recursion depth exceeded").
    It is built only as far as it is shown (``_errors.shown``)."""
    x = 1
    for _ in range(depth):
        x = [x]
    call = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": x}}]}]
    for messages, index, named in [
            (call, 1, 'message 1: tool_calls[0]: a tool call\'s "function.arguments": expected a string, '
                      'got list '),
            ([{"role": "user", "content": x}], 0, "message 0: Invalid user message: user (content: got list ")]:
        with pytest.raises(RenderError) as info:
            render(messages, dialect=dialect, date="2024-01-01")
        assert info.value.message_index == index
        assert str(info.value).startswith(named + "[" * 20), str(info.value)[:200]
        assert "Recursion" not in str(info.value)


def test_a_value_that_holds_itself_is_shown_as_repr_shows_it():
    """A role that is a list holding itself twice: the message builder (reprlib, for a
    while) walked it 60 levels deep and wide, 2**60 steps, and never returned. In a
    fresh interpreter with a time limit, so that a regression fails instead of hanging."""
    from tests.fresh import run_python

    run = run_python(
        "import apertus_fast\n"
        "loop = []\n"
        "loop += [loop, loop]\n"
        "try:\n"
        "    apertus_fast.render([{'role': loop, 'content': 'hi'}], date='2026-01-01')\n"
        "except apertus_fast.RenderError as exc:\n"
        "    print(exc)\n", timeout=60)
    assert "[[...], [...]]" in run.stdout and "message 0" in run.stdout, run.stdout


class _LenFails(list):
    def __len__(self):
        raise RuntimeError("len boom")


class _IterFails(list):
    def __iter__(self):
        raise RuntimeError("iter boom")


class _LenIs(list):
    def __init__(self, items, n):
        super().__init__(items)
        self.n = n

    def __len__(self):
        return self.n


class _IterEmpty(list):
    def __iter__(self):
        return iter(())


class _FalseTuple(tuple):
    def __len__(self):
        return 0


@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("container, expected", [
    (lambda m: _LenFails(m), "messages: RuntimeError: len boom"),
    (lambda m: _IterFails(m), "messages: RuntimeError: iter boom"),
    (lambda m: _LenIs(m, -1), "messages: ValueError: __len__() should return >= 0"),
    (lambda m: _LenIs(m, 2**63), "messages: OverflowError: cannot fit 'int' into an "
                                 "index-sized integer"),
], ids=["len-raises", "iter-raises", "len-negative", "len-too-big"])
def test_what_the_messages_container_raises_is_a_render_error(container, expected, dialect):
    """The audit (E2): the container's own failure escaped render, render_with_spans and
    normalize as the raw exception, where the same failure in ``tools`` was a
    RenderError. The template fails on it too."""
    from apertus_fast import normalize, render_with_spans

    messages = [u(), a()]
    with pytest.raises(OracleError):
        oracle_render(container(messages), dialect=dialect, date=DATE)
    for call in (lambda m: render(m, dialect=dialect, date=DATE),
                 lambda m: render_with_spans(m, dialect=dialect, date=DATE),
                 lambda m: normalize(m, dialect=dialect)):
        with pytest.raises(RenderError) as info:
            call(container(messages))
        assert info.value.message_index is None
        assert str(info.value) == expected


@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("system", [False, True])
@pytest.mark.parametrize("container", [
    lambda m: _LenIs(m, 0), lambda m: _LenIs(m, 7), _IterEmpty, _FalseTuple, tuple,
], ids=["len-0", "len-7", "iter-empty", "false-tuple", "tuple"])
def test_a_container_is_read_as_the_template_reads_it(container, system, dialect):
    """The template tests the container's truth, reads ``messages[0]``, and iterates
    ``messages[1:]`` after a system message, else the container itself; render read
    ``len`` and indices, and rendered another conversation where those disagree (a
    ``__len__`` of 0: nothing; an ``__iter__`` yielding nothing: everything)."""
    from apertus_fast import render_with_spans

    messages = ([{"role": "system", "content": "S"}] if system else []) + [u(), a(), u("again")]
    try:
        expected = oracle_render(container(messages), dialect=dialect, date=DATE)
    except OracleError:
        with pytest.raises(RenderError):
            render(container(messages), dialect=dialect, date=DATE)
        return
    assert render(container(messages), dialect=dialect, date=DATE) == expected
    assert render_with_spans(container(messages), dialect=dialect, date=DATE).text == expected


class _Boom:
    def __str__(self):
        raise RuntimeError("boom")


class _BadBool:
    def __bool__(self):
        raise ValueError("no truth")


def test_an_error_the_callers_object_raises_is_the_render_errors_cause():
    """A RenderError made of an exception that the caller's own object raised (a
    ``__str__``, a ``__bool__``, a container's ``__len__``) was raised ``from None``:
    the object's traceback was gone, where jinja2 lets the exception through (drop-in
    audit). It is now the RenderError's ``__cause__``; the renderer's own errors have
    none."""
    from apertus_fast import ApertusFormatter, Conversation, Message, Role

    calls = {
        "a tool message": lambda: render([u(), a(), {"role": "tool", "content": _Boom()}]),
        "a flag": lambda: render([u()], enable_thinking=_BadBool()),
        "the messages": lambda: render(_LenFails([u()])),
        "the formatter": lambda: ApertusFormatter(date=DATE).format_conversation(
            Conversation([Message.user("u"), Message.assistant("a"), Message(Role.TOOL, _Boom())])),
    }
    for what, call in calls.items():
        with pytest.raises(RenderError) as info:
            call()
        assert type(info.value.__cause__) in (RuntimeError, ValueError), what
        assert str(info.value.__cause__) in str(info.value), what
    for own in ([{"role": "x", "content": "u"}], [{"role": "user", "content": 5}],
                [u(), {"role": "assistant", "content": {"blocks": [{"type": "y"}]}}]):
        with pytest.raises(RenderError) as info:
            render(own)
        assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_render_error_without_a_message_index_gets_the_messages():
    """A RenderError that names no message (the caller's ``__str__`` raised one, or a
    nested render of tool specs did) is made again with the index of the message being
    rendered; one that names a message keeps it."""
    class Raises(str):
        index = None

        def __str__(self):
            raise RenderError("boom", self.index)

    named = Raises("x")
    named.index = 7
    for dialect in ALL:
        with pytest.raises(RenderError) as info:
            render([u(), a(Raises("x"))], dialect=dialect, date=DATE)
        assert (info.value.message_index, str(info.value)) == (1, "message 1: boom"), dialect
        with pytest.raises(RenderError) as info:
            render([u(), a(named)], dialect=dialect, date=DATE)
        assert (info.value.message_index, str(info.value)) == (7, "message 7: boom"), dialect


def test_a_render_inside_a_render_leaves_the_outer_ones_rules_alone():
    """The two environments differ in what an ``AttributeError`` raised by
    ``obj["role"]`` means: undefined in the plain one (the reference dialect), an error
    in the sandbox. A render run by the caller's code inside another render (a
    ``__str__``, a finalizer, a signal handler) in the other environment left the outer
    render with its rules (thread audit): here ``message 1: AttributeError: role``
    instead of the reference template's own message."""
    class Odd:
        def __getitem__(self, key):
            raise AttributeError(key)

    class Nested(str):
        def __str__(self):
            render(({"role": "user", "content": "x"},), dialect="apertus-1.5")  # (general path)
            return "hello"

    class Plain(str):
        def __str__(self):
            return "hello"

    def outcome(first):
        with pytest.raises(RenderError) as err:
            render([{"role": "user", "content": first}, Odd()],
                   dialect="apertus-format-reference", date="2026-01-01")
        return str(err.value)

    alone = outcome(Plain("hello"))
    assert "Invalid message role" in alone
    assert outcome(Nested("hello")) == alone
