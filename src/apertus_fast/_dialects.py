"""Dialects (format versions) as data: one table per dialect, read by the renderer,
the lexer and the parser. Nothing here executes; every behavioural difference between
the official templates is a field below.

Sources: ``apertus-format-reference.jinja`` (the reference package), ``apertus-1.jinja``
and ``apertus-1.5.jinja`` (Hugging Face chat templates of the models). See
``docs/format.md`` for the grammar and ``docs/rendering.md`` for the environments.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Kind", "Dialect", "DIALECTS", "DEFAULT_DIALECT", "get_dialect", "TOKEN_TEXT"]


class Kind(enum.IntEnum):
    """Event kinds of the lexer: ``TEXT`` for a run of ordinary text, one kind per
    special token. Values are stable (they are stored in the lexer's event buffer)."""

    TEXT = 0
    BOS = 1
    SYSTEM_START = 2
    SYSTEM_END = 3
    DEVELOPER_START = 4
    DEVELOPER_END = 5
    USER_START = 6
    USER_END = 7
    ASSISTANT_START = 8
    ASSISTANT_END = 9
    INNER_PREFIX = 10
    INNER_SUFFIX = 11
    TOOLS_PREFIX = 12
    TOOLS_SUFFIX = 13
    TOOL_OUTPUT_START = 14
    TOOL_OUTPUT_END = 15
    IMAGE = 16
    AUDIO = 17
    THINK_START = 18
    THINK_END = 19


#: The spelling of every special token kind (``TEXT`` has none).
TOKEN_TEXT: dict[Kind, str] = {
    Kind.BOS: "<s>",
    Kind.SYSTEM_START: "<|system_start|>",
    Kind.SYSTEM_END: "<|system_end|>",
    Kind.DEVELOPER_START: "<|developer_start|>",
    Kind.DEVELOPER_END: "<|developer_end|>",
    Kind.USER_START: "<|user_start|>",
    Kind.USER_END: "<|user_end|>",
    Kind.ASSISTANT_START: "<|assistant_start|>",
    Kind.ASSISTANT_END: "<|assistant_end|>",
    Kind.INNER_PREFIX: "<|inner_prefix|>",
    Kind.INNER_SUFFIX: "<|inner_suffix|>",
    Kind.TOOLS_PREFIX: "<|tools_prefix|>",
    Kind.TOOLS_SUFFIX: "<|tools_suffix|>",
    Kind.TOOL_OUTPUT_START: "<|tool_output_start|>",
    Kind.TOOL_OUTPUT_END: "<|tool_output_end|>",
    Kind.IMAGE: "<|image|>",
    Kind.AUDIO: "<|audio|>",
    Kind.THINK_START: "<think>",
    Kind.THINK_END: "</think>",
}

_CORE_KINDS = (
    Kind.BOS,
    Kind.SYSTEM_START, Kind.SYSTEM_END,
    Kind.DEVELOPER_START, Kind.DEVELOPER_END,
    Kind.USER_START, Kind.USER_END,
    Kind.ASSISTANT_START, Kind.ASSISTANT_END,
    Kind.INNER_PREFIX, Kind.INNER_SUFFIX,
    Kind.TOOLS_PREFIX, Kind.TOOLS_SUFFIX,
)

_APERTUS_1_SYSTEM = (
    "You are Apertus, a helpful assistant created by the SwissAI initiative.\n"
    "Knowledge cutoff: 2024-04\nCurrent date: {date}"
)
_APERTUS_15_SYSTEM = (
    "You are Apertus 1.5 Omni, a multimodal assistant developed by the Swiss AI "
    "Initiative. Extended from Apertus 1 via continued pretraining, you understand "
    "images and audio and respond in text."
)


@dataclass(frozen=True, slots=True)
class Dialect:
    """Everything that distinguishes one official template from another."""

    #: Public name, e.g. ``"apertus-1.5"``.
    name: str
    #: File name of the official template in ``shared/oracle/templates``.
    template: str
    #: Default system prompt when ``messages[0]`` is not a system message; ``{date}``
    #: is replaced by ``strftime_now('%Y-%m-%d')`` (today, or ``render(date=...)``).
    default_system: str
    #: Whether the default system prompt depends on the date.
    dated_system: bool
    #: Opening and closing of tool outputs (tool messages and ``tool_outputs`` blocks).
    tool_output_open: str
    tool_output_close: str
    #: Whether the last assistant turn is closed with ``<|assistant_end|>`` (unless
    #: ``continue_assistant_message`` or a tool call awaits its outputs).
    closes_last_turn: bool
    #: User part types rendered as ``<|image|>`` / ``<|audio|>``.
    image_parts: tuple[str, ...]
    audio_parts: tuple[str, ...]
    #: Whether user ``content`` may be a plain list of parts (1.5).
    list_user_content: bool
    #: Whether the template itself unwraps ``{"function": {...}}`` tools and tool calls
    #: and serialises non-string ``arguments`` with ``tojson`` (1.5). Other dialects
    #: fail on OpenAI-shaped tools in the template; apertus-fast unwraps them anyway
    #: (see docs/rendering.md), but not tool calls.
    openai_shapes: bool
    #: The ``tojson`` filter in effect: ``"jinja"`` is jinja2's built-in (sorted keys,
    #: ASCII, HTML-safe escapes; the reference package renders with a plain
    #: ``jinja2.Template``), ``"hf"`` is Hugging Face's ``json.dumps(ensure_ascii=False)``.
    tojson: str
    #: jinja2 environment has ``trim_blocks``/``lstrip_blocks`` (Hugging Face): changes
    #: the whitespace the tool-signature macro emits around ``oneOf`` variants.
    trim_blocks: bool
    #: Special tokens the lexer recognises in this dialect.
    token_kinds: tuple[Kind, ...]
    #: The jinja2 environment is sandboxed (Hugging Face's ``ImmutableSandboxedEnvironment``):
    #: there an ``AttributeError`` raised by an object's ``__getitem__`` fails the template
    #: instead of reading as undefined.
    sandboxed: bool = False

    @property
    def tokens(self) -> dict[str, Kind]:
        """Spelling -> kind for every special token of the dialect."""
        return {TOKEN_TEXT[k]: k for k in self.token_kinds}


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            name="apertus-format-reference",
            template="apertus-format-reference.jinja",
            default_system=_APERTUS_1_SYSTEM,
            dated_system=True,
            tool_output_open="[",
            tool_output_close="]",
            closes_last_turn=False,
            image_parts=(),
            audio_parts=(),
            list_user_content=False,
            openai_shapes=False,
            tojson="jinja",
            trim_blocks=False,
            token_kinds=_CORE_KINDS,
        ),
        Dialect(
            name="apertus-1",
            template="apertus-1.jinja",
            default_system=_APERTUS_1_SYSTEM,
            dated_system=True,
            tool_output_open="[",
            tool_output_close="]",
            closes_last_turn=True,
            image_parts=("image",),
            audio_parts=(),
            list_user_content=False,
            openai_shapes=False,
            tojson="hf",
            trim_blocks=True,
            token_kinds=_CORE_KINDS + (Kind.IMAGE,),
            sandboxed=True,
        ),
        Dialect(
            name="apertus-1.5",
            template="apertus-1.5.jinja",
            default_system=_APERTUS_15_SYSTEM,
            dated_system=False,
            tool_output_open="<|tool_output_start|>",
            tool_output_close="<|tool_output_end|>",
            closes_last_turn=True,
            image_parts=("image", "image_url", "input_image"),
            audio_parts=("audio", "audio_url", "input_audio"),
            list_user_content=True,
            openai_shapes=True,
            tojson="hf",
            trim_blocks=True,
            token_kinds=_CORE_KINDS
            + (Kind.TOOL_OUTPUT_START, Kind.TOOL_OUTPUT_END, Kind.IMAGE, Kind.AUDIO,
               Kind.THINK_START, Kind.THINK_END),
            sandboxed=True,
        ),
    )
}

DEFAULT_DIALECT = "apertus-format-reference"


def get_dialect(dialect: str | Dialect) -> Dialect:
    """Look a dialect up by name (or pass a :class:`Dialect` through)."""
    if isinstance(dialect, Dialect):
        return dialect
    try:
        return DIALECTS[dialect]
    except (KeyError, TypeError):
        known = ", ".join(sorted(DIALECTS))
        raise ValueError(f"unknown dialect {dialect!r}; known dialects: {known}") from None


def foreign_tokens(dialect: Dialect) -> tuple[str, ...]:
    """The ``<|...|>`` tokens of the other dialects that ``dialect`` lacks, which are
    text in it (the lexer notes where one is: a text with one was most likely rendered
    in another dialect). ``<s>``, ``<think>`` and ``</think>`` are not among them:
    they are plausible in any text (markup, other models' reasoning)."""
    own = {TOKEN_TEXT[k] for k in dialect.token_kinds}
    return tuple(sorted({TOKEN_TEXT[k] for d in DIALECTS.values() for k in d.token_kinds
                         if TOKEN_TEXT[k].startswith("<|")} - own))


def dialects_with(spelling: str) -> list[str]:
    """The names of the dialects that have ``spelling`` as a token."""
    return [name for name, d in DIALECTS.items() if spelling in d.tokens]
