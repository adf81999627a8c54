"""The ``apertus_format`` data model: enums and dataclasses, drop-in compatible.

Same class names, fields (in the same order), defaults, validation messages and
``to_dict`` / ``from_dict`` shapes as the reference package, so that
``import apertus_fast as apertus_format`` keeps existing code and data working.
See ``docs/dropin.md`` for the few deliberate differences.

Two helpers connect the model to the rest of the library:

* :func:`conversation_to_template_messages` turns :class:`Message` objects into the
  message dicts the chat template (and :func:`apertus_fast.render`) reads, exactly as
  the reference formatter prepares them;
* :func:`messages_from_dicts` goes the other way (used for parser output).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Union

__all__ = [
    "Role",
    "BlockType",
    "ContentFormat",
    "SectionType",
    "TextPart",
    "SystemContent",
    "UserContent",
    "ToolCall",
    "ToolOutput",
    "AssistantBlock",
    "AssistantContent",
    "Message",
    "Conversation",
    "conversation_to_template_messages",
    "messages_from_dicts",
]


# --------------------------------------------------------------------------- enums


class Role(enum.Enum):
    """The author of a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class BlockType(enum.Enum):
    """The kinds of block in a structured assistant message."""

    THOUGHTS = "thoughts"  # reasoning, always in the inner section
    TOOL_CALLS = "tool_calls"  # parallel tool calls, inner or outer
    TOOL_OUTPUTS = "tool_outputs"  # parallel tool outputs, inner or outer
    RESPONSE = "response"  # the answer, always in the outer section


class ContentFormat(enum.Enum):
    """Plain string content or structured (mapping) content."""

    STRING = enum.auto()
    MAPPING = enum.auto()


class SectionType(enum.Enum):
    """The two sections of an assistant message."""

    INNER = enum.auto()
    OUTER = enum.auto()


# --------------------------------------------------------------------- dataclasses


@dataclass
class TextPart:
    """A text part of structured user content (``{"type": "text", "text": ...}``).

    Note the field order: ``TextPart(text, type="text")``.
    """

    text: str
    type: str = "text"

    def to_dict(self) -> Dict[str, str]:
        return {"type": self.type, "text": self.text}

    @classmethod
    def from_dict(cls, data: Dict[str, str]) -> TextPart:
        return cls(text=data["text"], type=data.get("type", "text"))


@dataclass
class SystemContent:
    """Structured system content (``{"text": ...}``)."""

    text: str

    def to_dict(self) -> Dict[str, str]:
        return {"text": self.text}

    @classmethod
    def from_dict(cls, data: Dict[str, str]) -> SystemContent:
        return cls(text=data["text"])


@dataclass
class UserContent:
    """Structured user content (``{"parts": [...]}``)."""

    parts: List[TextPart]

    def to_dict(self) -> Dict[str, List[Dict[str, str]]]:
        return {"parts": [part.to_dict() for part in self.parts]}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> UserContent:
        return cls(parts=[TextPart.from_dict(p) for p in data["parts"]])


@dataclass
class ToolCall:
    """One tool call: a function name and its JSON-encoded arguments."""

    name: str
    arguments: str

    def to_dict(self) -> Dict[str, str]:
        return {"name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Dict[str, str]) -> ToolCall:
        return cls(name=data["name"], arguments=data["arguments"])


@dataclass
class ToolOutput:
    """The output of one tool call."""

    output: str

    def to_dict(self) -> Dict[str, str]:
        return {"output": self.output}

    @classmethod
    def from_dict(cls, data: Dict[str, str]) -> ToolOutput:
        return cls(output=data["output"])


# Which field each block type requires; the other two must be None.
_BLOCK_FIELD = {
    BlockType.THOUGHTS: "text",
    BlockType.RESPONSE: "text",
    BlockType.TOOL_CALLS: "calls",
    BlockType.TOOL_OUTPUTS: "outputs",
}
_FIELD_NAMES = ("text", "calls", "outputs")


@dataclass
class AssistantBlock:
    """One block of a structured assistant message.

    ``thoughts`` and ``response`` blocks carry ``text``, ``tool_calls`` blocks ``calls``,
    ``tool_outputs`` blocks ``outputs``; construction raises ``ValueError`` when the
    block's field is missing (``None``) or another type's field is set.
    """

    type: BlockType
    text: Optional[str] = None
    calls: Optional[List[ToolCall]] = None
    outputs: Optional[List[ToolOutput]] = None

    def __post_init__(self):
        try:
            field = _BLOCK_FIELD.get(self.type)
        except TypeError:  # unhashable type: not a BlockType, nothing to check
            field = None
        if field is None:
            return
        name = self.type.value
        if getattr(self, field) is None:
            raise ValueError(f"{name} block requires {field}")
        others = [f for f in _FIELD_NAMES if f != field]
        if any(getattr(self, f) is not None for f in others):
            raise ValueError(f"{name} block cannot have {others[0]} or {others[1]}")

    def to_dict(self) -> Dict[str, Any]:
        result: Dict[str, Any] = {"type": self.type.value}
        if self.text is not None:
            result["text"] = self.text
        if self.calls is not None:
            result["calls"] = [call.to_dict() for call in self.calls]
        if self.outputs is not None:
            result["outputs"] = [output.to_dict() for output in self.outputs]
        return result

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> AssistantBlock:
        # In the reference's order (the type first, then text, calls, outputs), so that
        # bad data raises the reference's first error: an unknown type is a ValueError
        # ("'bogus' is not a valid BlockType") whatever its calls or outputs hold.
        block_type = BlockType(data["type"])
        text = data.get("text")
        calls = None
        outputs = None
        if "calls" in data:
            calls = [ToolCall.from_dict(c) for c in data["calls"]]
        if "outputs" in data:
            outputs = [ToolOutput.from_dict(o) for o in data["outputs"]]
        return cls(type=block_type, text=text, calls=calls, outputs=outputs)


@dataclass
class AssistantContent:
    """Structured assistant content (``{"blocks": [...]}``)."""

    blocks: List[AssistantBlock]

    def to_dict(self) -> Dict[str, List[Dict[str, Any]]]:
        return {"blocks": [block.to_dict() for block in self.blocks]}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> AssistantContent:
        return cls(blocks=[AssistantBlock.from_dict(b) for b in data["blocks"]])


def _openai_tool_calls(calls: Iterable[ToolCall]) -> List[Dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


@dataclass
class Message:
    """One chat message. ``content`` is a string, a structured content object, or (for
    mappings :meth:`from_dict` does not recognise) the raw value. ``tool_calls`` are
    legacy OpenAI-style calls of an assistant message."""

    role: Role
    content: Union[str, SystemContent, UserContent, AssistantContent]
    tool_calls: Optional[List[ToolCall]] = None

    def to_dict(self) -> Dict[str, Any]:
        """``{"role", "content"[, "tool_calls"]}``; ``tool_calls`` in OpenAI shape, only
        when non-empty. Raw content is written back as it is."""
        result: Dict[str, Any] = {"role": self.role.value}
        content = self.content
        if isinstance(content, str):
            result["content"] = content
        else:
            to_dict = getattr(content, "to_dict", None)
            # Raw content (kept by from_dict) goes back unchanged; the reference
            # package raised AttributeError here.
            result["content"] = to_dict() if to_dict is not None else content
        if self.tool_calls:
            result["tool_calls"] = _openai_tool_calls(self.tool_calls)
        return result

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> Message:
        """Read a message dict. Structured content is recognised by role and key
        (system ``text``, user ``parts``, assistant ``blocks``); any other content is
        kept raw. ``tool_calls`` entries of type ``"function"`` become :class:`ToolCall`
        (others are skipped)."""
        role = Role(data["role"])
        content = data["content"]
        if isinstance(content, str):
            pass
        elif role is Role.SYSTEM and "text" in content:
            content = SystemContent.from_dict(content)
        elif role is Role.USER and "parts" in content:
            content = UserContent.from_dict(content)
        elif role is Role.ASSISTANT and "blocks" in content:
            content = AssistantContent.from_dict(content)
        tool_calls = None
        if "tool_calls" in data:
            tool_calls = []
            for entry in data["tool_calls"]:
                if entry.get("type") == "function":
                    fn = entry["function"]
                    tool_calls.append(ToolCall(name=fn["name"], arguments=fn["arguments"]))
        return cls(role=role, content=content, tool_calls=tool_calls)

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message with string content."""
        return cls(role=Role.SYSTEM, content=text)

    @classmethod
    def system_with_mapping(cls, text: str) -> Message:
        """A system message with structured (``{"text": ...}``) content."""
        return cls(role=Role.SYSTEM, content=SystemContent(text))

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with string content."""
        return cls(role=Role.USER, content=text)

    @classmethod
    def user_with_parts(cls, parts: List[TextPart]) -> Message:
        """A user message with structured parts."""
        return cls(role=Role.USER, content=UserContent(parts))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message with string content."""
        return cls(role=Role.ASSISTANT, content=text)

    @classmethod
    def assistant_with_blocks(cls, blocks: List[AssistantBlock]) -> Message:
        """An assistant message with structured blocks."""
        return cls(role=Role.ASSISTANT, content=AssistantContent(blocks))

    @classmethod
    def tool(cls, content: str) -> Message:
        """A tool message (the output of a legacy tool call)."""
        return cls(role=Role.TOOL, content=content)


@dataclass
class Conversation:
    """A sequence of messages."""

    messages: List[Message]

    def to_dict(self) -> Dict[str, List[Dict[str, Any]]]:
        return {"messages": [m.to_dict() for m in self.messages]}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> Conversation:
        return cls(messages=[Message.from_dict(m) for m in data["messages"]])

    def to_json(self, indent: Optional[int] = None) -> str:
        """``json.dumps(self.to_dict(), indent=indent)`` (non-ASCII escaped, as the
        reference package writes it)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, json_str: str) -> Conversation:
        return cls.from_dict(json.loads(json_str))

    @classmethod
    def from_messages(cls, messages: List[Message]) -> Conversation:
        return cls(messages=messages)


# ------------------------------------------------------------------------- helpers


def _block_template_dict(block: AssistantBlock) -> Dict[str, Any]:
    # Fields are included only when truthy (an empty text or list is left out, which
    # the template then reads as undefined), as the reference formatter does.
    d: Dict[str, Any] = {"type": block.type.value}
    if block.text:
        d["text"] = block.text
    if block.calls:
        d["calls"] = [{"name": c.name, "arguments": c.arguments} for c in block.calls]
    if block.outputs:
        d["outputs"] = [{"output": o.output} for o in block.outputs]
    return d


def conversation_to_template_messages(messages: Iterable[Message]) -> List[Dict[str, Any]]:
    """The message dicts the chat template reads, built from :class:`Message` objects
    exactly as the reference ``ApertusFormatter`` builds them: structured content as
    ``{"text"}`` / ``{"parts"}`` / ``{"blocks"}``, unknown content passed as it is,
    legacy ``tool_calls`` in OpenAI shape when non-empty."""
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            pass
        elif isinstance(content, SystemContent):
            content = {"text": content.text}
        elif isinstance(content, UserContent):
            content = {"parts": [{"type": p.type, "text": p.text} for p in content.parts]}
        elif isinstance(content, AssistantContent):
            content = {"blocks": [_block_template_dict(b) for b in content.blocks]}
        d: Dict[str, Any] = {"role": message.role.value, "content": content}
        if message.tool_calls:
            d["tool_calls"] = _openai_tool_calls(message.tool_calls)
        out.append(d)
    return out


def messages_from_dicts(dicts: Iterable[Dict[str, Any]]) -> List[Message]:
    """:class:`Message` objects for the message dicts :func:`apertus_fast.parse`
    returns, as :meth:`Message.from_dict` reads them, except that

    * an image or audio part of a user message (``{"type": "image"}``, which has no
      ``text``) becomes ``TextPart("", type)``: it renders its token again in the
      dialects that have one (where ``TextPart.from_dict`` would raise ``KeyError``);
    * a message without ``content`` (the user message that only closes an assistant
      turn, docs/format.md #11) is left out: no :class:`Message` renders like it."""
    return [_message_from_parsed(d) for d in dicts if "content" in d]


def _message_from_parsed(data: Dict[str, Any]) -> Message:
    content = data.get("content")
    if data.get("role") == "user" and isinstance(content, dict) and "parts" in content:
        parts = [TextPart(text=p.get("text", ""), type=p.get("type", "text"))
                 for p in content["parts"]]
        return Message(role=Role.USER, content=UserContent(parts))
    return Message.from_dict(data)
