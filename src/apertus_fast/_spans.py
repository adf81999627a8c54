"""Loss masks: which characters of a rendered conversation are the model's own text.

A training pipeline renders a conversation and trains the model only on what the model
produced in it, not on the prompt, the user's turns or the tool outputs that the
environment inserted. Only the renderer knows where each piece of the text came from
(in the bracket dialects a tool output is plain ``[a, b]`` text that no parser can tell
apart reliably), so the spans come from the renderer itself: ``render_with_spans``
renders exactly the text of ``render`` and records the model's spans on the way.

The conventions (``docs/rendering.md``, "Loss masks") in short: the spans cover each
assistant turn from just after ``<|assistant_start|>`` to its ``<|assistant_end|>``
inclusive, and leave out every tool-output region (from ``[`` or
``<|tool_output_start|>`` to ``]`` or ``<|tool_output_end|>``, inclusive).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from . import _render
from ._dialects import DEFAULT_DIALECT
from ._mask import span_bounds as _span_bounds
from ._mask import token_mask as _token_mask
from ._render import _render_pieces

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._dialects import Dialect
    from ._render import DateArg, Messages, Tools

__all__ = ["Rendered", "render_with_spans"]


class Rendered(NamedTuple):
    """A rendered conversation and the spans of it that the model produced.

    ``spans`` are half-open ``(start, end)`` character (code point) offsets into
    ``text``, sorted, non-empty, and neither overlapping nor touching (touching ones
    are merged). ``text[start:end]`` for each is what the model generated there.
    """

    text: str
    spans: list[tuple[int, int]]

    def segments(self) -> list[str]:
        """The model's text, span by span."""
        text = self.text
        return [text[start:end] for start, end in self.spans]

    def byte_spans(self) -> list[tuple[int, int]]:
        """:attr:`spans` as offsets into ``text.encode("utf-8")``, for tools that count
        bytes (tokenizers outside Python, memory-mapped token files):
        ``data[bs:be].decode() == text[s:e]`` for each pair. Raises
        ``UnicodeEncodeError`` if the text holds a lone surrogate (it has no UTF-8).
        The spans are checked as :meth:`token_mask` checks them, and must lie within
        the text (``ValueError`` naming the first that does not)."""
        text = self.text
        starts, ends = _span_bounds(self.spans)
        if starts and starts[0] < 0:
            raise ValueError(f"spans[0] = ({starts[0]}, {ends[0]}) starts before the text")
        if ends and ends[-1] > len(text):
            i = next(i for i, end in enumerate(ends) if end > len(text))
            raise ValueError(f"spans[{i}] = ({starts[i]}, {ends[i]}) ends after the text "
                             f"({len(text)} characters)")
        if text.isascii():
            return list(zip(starts, ends))
        out = []
        char = byte = 0  # a boundary and its byte offset, walking forwards
        try:
            for start, end in zip(starts, ends):
                byte += len(text[char:start].encode("utf-8"))
                first = byte
                byte += len(text[start:end].encode("utf-8"))
                char = end
                out.append((first, byte))
            text[char:].encode("utf-8")  # the rest, too, must have a UTF-8 encoding
        except UnicodeEncodeError:
            text.encode("utf-8")  # the error with its position in the text, not a slice
            raise
        return out

    def token_mask(self, offsets: Iterable[Sequence[int]], *, utf8: bool = False) -> list[bool]:
        """One bool per token: whether the token is (partly) the model's text.

        ``offsets`` are the tokens' ``(start, end)`` character offsets into ``text``, as
        a Hugging Face fast tokenizer returns them with ``return_offsets_mapping=True``
        (a list of pairs, or an array of shape ``(n, 2)``); with ``utf8=True``, byte
        offsets into ``text.encode("utf-8")`` instead (:meth:`byte_spans`). A token
        counts when it overlaps a span, so a token that straddles a span's edge is
        trained on, as in ``transformers``' ``return_assistant_tokens_mask``. Tokens
        that cover nothing (``(0, 0)``: special tokens the tokenizer added) never count.
        """
        return _token_mask(self.byte_spans() if utf8 else self.spans, offsets)


def render_with_spans(
    messages: Messages,
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Tools = None,
    enable_thinking: bool = False,
    add_generation_prompt: bool = False,
    continue_assistant_message: bool = False,
    date: DateArg = None,
    bos_token: str | None = "<s>",
    tools_text: str | None = None,
) -> Rendered:
    """Render as :func:`render` does (the same arguments, the same text, the same
    errors) and return the text with the character spans the model produced: the loss
    mask of a training example.

    Each assistant turn's span starts after ``<|assistant_start|>`` (the prompt ends
    with it, as ``add_generation_prompt`` leaves it) and ends after its
    ``<|assistant_end|>`` (the model learns to stop), or where the text ends if the
    template leaves the turn open. Tool outputs inside a turn are the environment's and
    are cut out of it, with the tokens or brackets around them; ``<|tools_suffix|>``,
    after which the model stops to wait for them, stays in. System, developer and user
    sections are never in a span.
    """
    fast = _render._FAST_MARKS
    if fast is not None:  # the compiled hot path: the text and its spans, or None
        done = fast(messages, dialect, tools, enable_thinking, add_generation_prompt,
                    continue_assistant_message, date, bos_token, tools_text)
        if done is not None:
            return Rendered(*done)
    spans = []
    marks = []
    pieces = _render_pieces(messages, dialect, tools, enable_thinking, add_generation_prompt,
                            continue_assistant_message, date, bos_token, tools_text, marks)
    position = 0
    previous = 0
    start = 0
    for k, index in enumerate(marks):  # piece indices, ascending: begin, end, begin, ...
        position += sum(map(len, pieces[previous:index]))
        previous = index
        if k & 1:
            _add(spans, start, position)
        else:
            start = position
    return Rendered("".join(pieces), spans)


def _add(spans: list, start: int, end: int) -> None:
    """Append ``(start, end)``, dropping it if empty and merging it with the last span
    if the two touch."""
    if end <= start:
        return
    if spans and spans[-1][1] == start:
        spans[-1] = (spans[-1][0], end)
    else:
        spans.append((start, end))


# The annotations' names at run time (typing.get_type_hints; see _render)
from collections.abc import Iterable, Sequence  # noqa: E402

from ._dialects import Dialect  # noqa: E402
from ._render import DateArg, Messages, Tools  # noqa: E402
