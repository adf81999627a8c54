"""``ApertusFormatter``: the reference package's formatter API over apertus-fast's
renderer and parser.

Construction only stores settings (the reference read and compiled the Jinja template
in every constructor). Rendering produces the bytes the reference's template produces;
see ``docs/dropin.md`` for the deliberate differences.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

from ._dialects import DEFAULT_DIALECT, get_dialect
from ._models import (
    AssistantContent,
    ContentFormat,
    Conversation,
    Message,
    Role,
    SystemContent,
    UserContent,
    conversation_to_template_messages,
    messages_from_dicts,
)
from . import _render as _r
from ._errors import RenderError
from ._render import _DateAsGiven, render, render_date

import datetime as _dt  # (the annotations' name, resolved at run time too)

__all__ = ["ApertusFormatter"]


def _reference_error(err: RenderError) -> RenderError:
    """``err`` as the drop-in raises it: also a ``jinja2.TemplateError`` (what the
    reference package raised where its template fails) when jinja2 is importable, so
    that ``except jinja2.TemplateError`` in code written for the reference still
    catches it; otherwise ``err`` itself."""
    try:
        cls = _template_render_error()
    except ImportError:  # no jinja2: no code can be catching its exceptions
        return err
    new = cls(err.reason, err.message_index)
    new.__dict__.update(err.__dict__)
    return new.with_traceback(err.__traceback__)


_TEMPLATE_RENDER_ERROR = None


def _template_render_error():
    """The class ``TemplateRenderError(RenderError, jinja2.TemplateError)``, built on
    first use so that jinja2 is imported only when an error is raised (never on the
    happy path; jinja2 is not a dependency). Raises ImportError without jinja2."""
    global _TEMPLATE_RENDER_ERROR
    if _TEMPLATE_RENDER_ERROR is None:
        # (one class for every thread: threads raising their first error at once each
        # built one while jinja2 was being imported, and errors of the others were
        # neither caught as the module's class nor picklable)
        with _TEMPLATE_RENDER_ERROR_LOCK:
            if _TEMPLATE_RENDER_ERROR is None:
                try:
                    from jinja2 import TemplateError
                except ImportError:
                    _TEMPLATE_RENDER_ERROR = False
                else:
                    _TEMPLATE_RENDER_ERROR = type(
                        "TemplateRenderError", (RenderError, TemplateError), {
                            "__module__": __name__,
                            "__doc__": "A :class:`RenderError` raised by "
                                       ":class:`ApertusFormatter`, also a "
                                       "``jinja2.TemplateError`` as in the reference package.",
                        })
    if _TEMPLATE_RENDER_ERROR is False:  # tried: no jinja2
        raise ImportError("jinja2 is not importable")
    return _TEMPLATE_RENDER_ERROR


_TEMPLATE_RENDER_ERROR_LOCK = threading.Lock()


def __getattr__(name):
    # PEP 562: pickle finds the class by name in a process that has not built it yet.
    if name == "TemplateRenderError":
        return _template_render_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ApertusFormatter:
    """Render conversations to the Apertus chat format, and parse them back.

    ``ApertusFormatter(enable_thinking=False, tools=None)`` as in the reference
    package, plus keyword-only extensions: ``dialect`` (which official template to
    reproduce; the default is the reference package's own) and ``date`` (fixes the
    date of the default system prompt; ``None`` is today, as in the reference).
    """

    # Special tokens (the reference's class attributes; the renderer owns the texts)
    BOS_TOKEN = "<s>"
    SYSTEM_START, SYSTEM_END = _r.SYSTEM_START, _r.SYSTEM_END
    DEVELOPER_START, DEVELOPER_END = _r.DEVELOPER_START, _r.DEVELOPER_END
    USER_START, USER_END = _r.USER_START, _r.USER_END
    ASSISTANT_START, ASSISTANT_END = _r.ASSISTANT_START, _r.ASSISTANT_END
    INNER_PREFIX, INNER_SUFFIX = _r.INNER_PREFIX, _r.INNER_SUFFIX
    TOOLS_PREFIX, TOOLS_SUFFIX = _r.TOOLS_PREFIX, _r.TOOLS_SUFFIX

    def __init__(
        self,
        enable_thinking: bool = False,
        tools: Optional[List[Dict[str, Any]]] = None,
        *,
        dialect: str = DEFAULT_DIALECT,
        date: _dt.date | str | None = None,
    ) -> None:
        get_dialect(dialect)  # unknown dialect: ValueError now, not at first use
        if date is not None:
            render_date(date)  # a bad date likewise (RenderError, a ValueError)
        self.enable_thinking = enable_thinking
        self.tools = tools or []
        self.dialect = dialect
        self.date = date

    #: A jinja2 template assigned as ``formatter.template`` (None: apertus-fast's renderer).
    _template: Any = None

    @property
    def template(self) -> Any:
        """A template assigned to this formatter (``formatter.template =
        jinja2.Template(text)``), which the format methods then render instead of
        apertus-fast's renderer, with the variables the reference package passes its
        own (``bos_token``, ``messages``, ``enable_thinking``, ``tools``,
        ``add_generation_prompt``, ``raise_exception``, ``tojson``, ``strftime_now``), as
        the reference renders a template assigned there. Unassigned, there is none
        (``AttributeError``): apertus-fast renders without jinja2. ``del
        formatter.template`` goes back to the renderer."""
        if self._template is None:
            raise AttributeError(
                "'ApertusFormatter' object has no attribute 'template': apertus-fast renders "
                "without a jinja2 template; assign one (formatter.template = "
                "jinja2.Template(text)) and the format methods render with it, as the "
                "reference package does")
        return self._template

    @template.setter
    def template(self, value: Any) -> None:
        self._template = value

    @template.deleter
    def template(self) -> None:
        if self._template is None:
            raise AttributeError("template")
        self._template = None

    def _template_vars(self, messages, bos_token: str, add_generation_prompt: bool) -> dict:
        """What the reference package renders its template with (an assigned
        ``template``). ``strftime_now`` gives ``self.date`` where it is set, else reads
        ``datetime.now()`` in ``apertus_format.formatter``, as the reference does."""
        from . import formatter

        def raise_exception(message):
            raise formatter.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return formatter.json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                                        separators=separators, sort_keys=sort_keys)

        def strftime_now(format):
            if self.date is not None:
                return _dt.date.fromisoformat(render_date(self.date)).strftime(format)
            return formatter.datetime.now().strftime(format)

        return {
            "bos_token": bos_token,
            "messages": messages,
            "enable_thinking": self.enable_thinking,
            "tools": self.tools,
            "add_generation_prompt": add_generation_prompt,
            "raise_exception": raise_exception,
            "tojson": tojson,
            "strftime_now": strftime_now,
        }

    def __repr__(self) -> str:
        return (f"ApertusFormatter(enable_thinking={self.enable_thinking!r}, "
                f"tools={self.tools!r}, dialect={self.dialect!r}, date={self.date!r})")

    # ------------------------------------------------------------ checks and prep

    def _detect_content_format(self, messages: List[Message]) -> ContentFormat:
        """The format of the first non-tool message (``STRING`` when there is none)."""
        for message in messages:
            if message.role == Role.TOOL:
                continue
            if isinstance(message.content, (SystemContent, UserContent, AssistantContent)):
                return ContentFormat.MAPPING
            if isinstance(message.content, str):
                return ContentFormat.STRING
        return ContentFormat.STRING

    def _validate_format_consistency(self, messages: List[Message]) -> None:
        """Raise ``ValueError`` unless all assistant messages use one content format
        (all strings or all :class:`AssistantContent`); the message names the index."""
        expected = None
        for i, message in enumerate(messages):
            if message.role != Role.ASSISTANT:
                continue
            content = message.content
            if expected is None:
                if isinstance(content, AssistantContent):
                    expected = ContentFormat.MAPPING
                elif isinstance(content, str):
                    expected = ContentFormat.STRING
                else:
                    raise ValueError(
                        f"Message {i}: Assistant message has invalid content type: "
                        f"{type(content).__name__}"
                    )
            elif expected is ContentFormat.STRING:
                if not isinstance(content, str):
                    raise ValueError(_inconsistent(i, "structured", "string"))
            elif not isinstance(content, AssistantContent):
                raise ValueError(_inconsistent(i, "string", "structured"))

    def _prepare_messages_for_template(self, messages: List[Message]) -> List[Dict[str, Any]]:
        """The message dicts the chat template reads (see
        :func:`conversation_to_template_messages`)."""
        return conversation_to_template_messages(messages)

    def _date(self, messages) -> Any:
        """The date of the default system prompt: ``self.date``; else, where the
        template would call ``strftime_now('%Y-%m-%d')`` (no system message first),
        the reference's call, ``datetime.now().strftime('%Y-%m-%d')``, with ``datetime``
        looked up in ``apertus_format.formatter`` (``apertus_fast.formatter``) as the
        reference looks it up: code that patches it there to fix the date (its
        ``mock.patch("apertus_format.formatter.datetime")``) keeps working. The string
        it gives is rendered as it is, as the reference's template renders it, also
        where it is no ``YYYY-MM-DD`` (a mock's ``"Jan 5, 2024"``, the year 999's
        ``"999-01-15"``); ``self.date`` and the renderer's ``date`` stay checked."""
        if self.date is not None:
            return self.date
        first = messages[0] if messages else None
        if isinstance(first, dict) and first.get("role") == "system":
            return None
        if not get_dialect(self.dialect).dated_system:
            return None
        from . import formatter

        today = formatter.datetime.now().strftime("%Y-%m-%d")
        return _DateAsGiven(today) if isinstance(today, str) else today

    # ------------------------------------------------------------------ rendering

    def format_conversation(
        self, conversation: Conversation, add_generation_prompt: bool = False
    ) -> str:
        """Render ``conversation`` with the chat template.

        Raises ``ValueError`` when assistant messages mix string and structured content
        (checked first, with the reference's messages), and
        :class:`apertus_fast.RenderError` (a ``ValueError``) wherever the template
        raises; where jinja2 is importable, that error is also a
        ``jinja2.TemplateError``, which the reference package raised there.
        """
        self._validate_format_consistency(conversation.messages)
        messages = self._prepare_messages_for_template(conversation.messages)
        return self._render_prepared(messages, add_generation_prompt, self.BOS_TOKEN)

    def _render_prepared(self, messages, add_generation_prompt: bool, bos_token: str) -> str:
        """The template's message dicts rendered: by an assigned ``template`` as the
        reference renders its own, else by apertus-fast's renderer, whose errors are
        raised as the reference's (:func:`_reference_error`)."""
        if self._template is not None:
            return self._template.render(**self._template_vars(messages, bos_token,
                                                               add_generation_prompt))
        try:
            return render(
                messages,
                dialect=self.dialect,
                tools=self.tools,
                enable_thinking=self.enable_thinking,
                add_generation_prompt=add_generation_prompt,
                date=self._date(messages),
                bos_token=bos_token,
            )
        except RenderError as exc:
            raise _reference_error(exc) from exc.__cause__

    def format_assistant_content(self, assistant_content: AssistantContent) -> str:
        """Render structured assistant content as the string the template puts in an
        assistant turn (for chat formats whose content must be a string).

        Renders the single assistant message (no BOS) and returns the text after
        ``<|assistant_start|>`` up to ``<|assistant_end|>`` or the end, stripped.
        Template errors raise :class:`apertus_fast.RenderError`, also a
        ``jinja2.TemplateError`` (the reference's error) where jinja2 is importable.
        """
        message = Message(role=Role.ASSISTANT, content=assistant_content)
        messages = self._prepare_messages_for_template([message])
        full = self._render_prepared(messages, False, "")
        start = full.find(self.ASSISTANT_START)
        if start == -1:
            return full.strip()
        start += len(self.ASSISTANT_START)
        end = full.find(self.ASSISTANT_END, start)
        return (full[start:end] if end != -1 else full[start:]).strip()

    def format_assistant_message_as_string(self, message: Message) -> str:
        """The content of an assistant message as a string: string content as it is,
        structured content via :meth:`format_assistant_content`, anything else
        ``str()``."""
        content = message.content
        if isinstance(content, str):
            return content
        if isinstance(content, AssistantContent):
            return self.format_assistant_content(content)
        return str(content)

    # -------------------------------------------------------------------- parsing

    def parse_conversation(self, formatted_text: str, *, strict: bool = True) -> Conversation:
        """Parse rendered text back into a :class:`Conversation`: every turn, in
        order, with structured assistant blocks, tool calls and tool outputs.

        Uses apertus-fast's parser for this formatter's dialect. With ``strict`` (the
        default) text that no conversation renders to raises
        :class:`apertus_fast.ParseError` (a ``ValueError``); ``strict=False`` recovers
        what it can. (The reference package's regex parser never raised, and returned
        only the system message, then all user turns, then all assistant turns as
        stripped strings.)

        The default system prompt of the dated dialects comes back as a system
        message holding its text, date included (as the reference returns it), so
        that formatting the result keeps that date instead of writing today's.
        Image and audio parts come back as ``TextPart("", type)``.
        Only the messages are returned: the developer section (deliberation, tools)
        is read but is not part of a ``Conversation``, and a user message without
        content (the parser's reading of an ``<|assistant_end|>`` with no user turn
        after it; see docs/dropin.md for the one shape ``format_conversation``
        writes) has no ``Message`` form and is left out, so that ``<|assistant_end|>``
        is not formatted back. A generation prompt (trailing
        ``<|assistant_start|>``) after a user turn comes back as an empty assistant
        message, as in the reference package, so that
        ``format_conversation(parse_conversation(text)) == text`` with this
        formatter's settings; one after an open assistant turn (or in a dialect that
        closes the last turn) cannot be a message and is dropped.
        """
        from ._parse import parse  # imported here: the parser is optional for formatting

        dialect = get_dialect(self.dialect)
        result = parse(formatted_text, dialect=self.dialect, strict=strict)
        messages = messages_from_dicts(result.messages)  # leaves content-less users out
        if result.date is not None:
            # The dated default prompt, as a system message (as the reference returns
            # it): formatting keeps its date, whatever the date is then.
            messages.insert(0, Message.system(
                dialect.default_system.replace("{date}", result.date)))
        last = result.messages[-1].get("role") if result.messages else None
        if (result.add_generation_prompt and not dialect.closes_last_turn
                and last in (None, "user", "system")):
            empty = AssistantContent([]) if result.format == "blocks" else ""
            messages.append(Message(role=Role.ASSISTANT, content=empty))
        return Conversation(messages)


def _inconsistent(index: int, uses: str, others: str) -> str:
    return (
        f"Format inconsistency: Assistant message {index} uses {uses} content "
        f"but other assistant messages use {others} content. All assistant messages "
        f"must use the same content format."
    )
