"""The ``apertus-fast`` command line: render, parse and validate JSONL (or Parquet)
corpora, and read model completions.

``main(argv)`` is the entry point (also ``python -m apertus_fast``); it returns the exit
status: 0 success, 1 some line failed, 2 usage error or unreadable input/unwritable
output, 130 interrupted. See ``docs/cli.md``.

Each command streams its input line by line (a Parquet file: row by row, ``_parquet``),
in constant memory (with ``--jobs``, in blocks handled by worker processes: "line work,
--jobs" below), reports every bad line on stderr as ``INPUT:LINE: reason``
(``INPUT:row N: reason``) and carries on, writes the output file atomically, and ends
with a one-line summary on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import errno
import io
import json
import os
import signal
import stat
import sys
import threading
import time
import zlib

from . import _io, _parquet
from ._dialects import DEFAULT_DIALECT, DIALECTS
from ._errors import ParseError, RenderError
from ._reasoning import REASONING_FIELDS, reasoning_to_blocks, unrendered_reasoning
from ._render import render, render_date

__all__ = ["main", "build_parser"]

PROG = "apertus-fast"

#: One line per dialect for ``apertus-fast dialects`` (a dialect missing here is listed
#: with a description derived from its table).
DIALECT_DESCRIPTIONS = {
    "apertus-format-reference": (
        "the reference apertus_format package (plain jinja2): tool outputs in [...], "
        "last assistant turn left open, text-only user parts"
    ),
    "apertus-1": (
        "Apertus 1 models (Hugging Face / vLLM chat template): closes the last "
        "assistant turn, <|image|> user parts"
    ),
    "apertus-1.5": (
        "Apertus 1.5 models: <|tool_output_start|>/<|tool_output_end|>, image and audio "
        "parts, OpenAI-shaped tools and tool calls"
    ),
}

_RENDER_EXAMPLES = """\
input lines (JSONL, one conversation a line; other keys such as "id" are ignored;
a Parquet file's rows are read the same way, docs/cli.md "Parquet"):
  {"messages": [...], "tools": [...], "enable_thinking": true, "add_generation_prompt": false}
  [{"role": "user", "content": "Grüezi!"}, ...]          (a bare list of messages)
per-line keys override the command line: tools, tools_text, enable_thinking,
add_generation_prompt, continue_assistant_message, date, bos_token (null = not set),
and "dialect" when --dialect is not given. `apertus-fast parse` output is valid input.

output: one JSON string a line (the rendered text), in input order; a bad line is
reported on stderr as INPUT:LINE: reason and produces no output line. With --spans,
one object a line instead: {"text": "...", "spans": [[start, end], ...]}, the
character ranges of the text the model produced (the loss mask; docs/rendering.md).
With --keep id: {"id": ..., "text": ...}, to join the output back to the input.

examples:
  apertus-fast render samples/conversations.jsonl -o rendered.jsonl --date 2026-01-01
  apertus-fast render corpus.jsonl.gz --dialect apertus-1.5 -o rendered.jsonl.gz
  apertus-fast render corpus.jsonl.gz --dialect apertus-1.5 -o rendered.jsonl.gz -j 0
  cat corpus.jsonl | apertus-fast render - --skip-errors > rendered.jsonl
  apertus-fast render samples/conversations.jsonl --spans -o train.jsonl
  apertus-fast render train.parquet --dialect apertus-1.5 -o rendered.parquet
  apertus-fast render samples/conversations.jsonl --text | less     (for eyes only)
"""

_PARSE_EXAMPLES = """\
input: raw rendered text (the whole file is one conversation, taken byte for byte:
no trailing newline is stripped), or JSONL with one rendered text a line (a JSON
string, or an object with a "text" key). --format auto picks JSONL when the first
non-blank line is valid JSON.

output: one JSON object a line, the conversation in render's input shape
({"messages": [...], "enable_thinking": ..., "add_generation_prompt": ..., ...}),
so `apertus-fast render` reads it back.

Parquet: rows of a "text" column in; -o NAME.parquet writes the same fields as
columns ("messages" as JSON text). See docs/cli.md, "Parquet".

Give the --dialect the text was rendered in: text of another dialect can read as
valid (the tokens this one lacks, such as apertus-1.5's <|tool_output_start|>, as
text), into other turns and so other loss-mask spans.

examples:
  apertus-fast parse samples/rendered-apertus-1.5.txt --dialect apertus-1.5
  apertus-fast parse rendered.jsonl --dialect apertus-1 -o conversations.jsonl
  apertus-fast parse model-outputs.jsonl --lenient --skip-errors -o recovered.jsonl
"""

_COMPLETIONS_EXAMPLES = """\
input: JSONL, one model completion a line (the text the model wrote after the
generation prompt, special tokens kept): a JSON string, or an object with a
"completion" string and, when the prompt ends inside a turn (continued after tool
outputs, prefilled reasoning), the "prompt" it continues. Parquet: a "completion"
column (and "prompt"). Other keys are ignored (--keep copies them).

output: one JSON object a line, in input order:
  {"content": ..., "reasoning": ..., "tool_calls": [{"name": ..., "arguments": ...}],
   "tool_outputs": [...], "finish_reason": "stop" | "tool_calls" | null,
   "closed": true | false, "messages": [...], "warnings": [...], "rest": "..."}
(warnings and rest only when not empty; messages: the turn in render's shape).
With --openai: {"message": {...}, "finish_reason": ...}, the OpenAI chat message
(content, reasoning_content, tool_calls with the ids call_LINE_N). What lenient
reading recovered from is also reported on stderr as warnings. docs/streaming.md.

examples:
  apertus-fast completions outputs.jsonl --dialect apertus-1.5 -o read.jsonl
  apertus-fast completions outputs.parquet --dialect apertus-1.5 --keep id -o read.parquet
  apertus-fast completions outputs.jsonl --dialect apertus-1 --openai --keep id
"""

_VALIDATE_EXAMPLES = """\
input: what parse reads (raw text or JSONL of rendered texts), and JSONL
conversations (objects with "messages", or bare lists of messages), which are
checked by rendering them. Lines may mix both kinds.

output: one line per problem on stdout (INPUT:LINE: ...), a summary on stderr;
exit status 1 if anything failed.

examples:
  apertus-fast validate samples/conversations.jsonl --dialect apertus-1
  apertus-fast validate rendered.jsonl --dialect apertus-1.5
"""

_MAIN_EPILOG = """\
examples:
  apertus-fast render samples/conversations.jsonl --date 2026-01-01 -o rendered.jsonl
  apertus-fast parse rendered.jsonl -o parsed.jsonl
  apertus-fast completions model-outputs.jsonl --dialect apertus-1.5 -o read.jsonl
  apertus-fast validate corpus.jsonl.gz --dialect apertus-1.5
  apertus-fast dialects

exit status: 0 ok; 1 some line failed; 2 usage error, unreadable input or unwritable
output; 130 interrupted (143 SIGTERM, 129 SIGHUP, 131 SIGQUIT, 141 stdout closed early).
Run `apertus-fast COMMAND --help` for the options and examples of each command.
"""


# --------------------------------------------------------------------------- helpers


def _version() -> str:
    pkg = sys.modules.get(__package__ or "apertus_fast")
    version = getattr(pkg, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as _meta_version

            version = _meta_version("apertus-fast")
        except Exception:  # noqa: BLE001 - not installed: running from a source tree
            version = "unknown"
    backend = getattr(pkg, "BACKEND", None)
    return f"{PROG} {version}" + (f" (backend: {backend})" if backend else "")


def _date_arg(value: str) -> str:
    """``--date``: the rule of ``render``'s ``date`` (exactly ``YYYY-MM-DD``)."""
    try:
        return render_date(value)
    except RenderError:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return n


def _output_path(value: str) -> str:
    if not value:  # (an empty name would be written as a temp file in the parent folder)
        raise argparse.ArgumentTypeError("expected a file name, or - for stdout; got an empty string")
    return value


def _gzip_level(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 9:
        raise argparse.ArgumentTypeError(f"expected a gzip level from 1 to 9, got {value!r}")
    return n


def _key_list(value: str) -> list[str]:
    """``--keep``: comma-separated keys, none empty."""
    keys = [k.strip() for k in value.split(",")]
    if not all(keys):
        raise argparse.ArgumentTypeError(f"expected comma-separated keys, got {value!r}")
    return keys


def _one_line(reason: str) -> str:
    """Keep a reported reason on one line (reasons may quote user text)."""
    if "\n" in reason or "\r" in reason:
        reason = reason.replace("\r", "\\r").replace("\n", "\\n")
    return reason


def _parse_error_reason(exc: ParseError, line_offset: int = 0) -> str:
    """``line L, column C (offset O): reason; expected X; found Y; near '...'``."""
    parts = [f"line {exc.line + line_offset}, column {exc.column} (offset {exc.offset}): {exc.reason}"]
    if exc.expected:
        parts.append(f"expected {exc.expected}")
    if exc.found:
        parts.append(f"found {exc.found}")
    if exc.excerpt:
        parts.append(f"near {exc.excerpt!r}")
    return "; ".join(parts)


def _warning_line(warning: str) -> int:
    """The line of the text a lenient parse warning is about (``line L, column C: ...``,
    as its ParseError would say), for a raw input, whose lines are the file's; 1 for a
    warning about the whole text."""
    if warning.startswith("line "):
        number = warning[5:].partition(",")[0]
        if number.isascii() and number.isdigit():
            return int(number)
    return 1


def _rate(n: int, nbytes: int | None, seconds: float, unit: str = "lines") -> str:
    """``in S s (R lines/s, M MB/s)``; without MB/s when ``nbytes`` is None."""
    seconds = max(seconds, 1e-9)
    mb = "" if nbytes is None else f", {nbytes / seconds / 1e6:,.1f} MB/s"
    return f"in {seconds:.{2 if seconds >= 1 else 3}f} s ({n / seconds:,.0f} {unit}/s{mb})"


class _Reporter:
    """Counts and prints problems as ``INPUT:LINE: reason`` (at most ``max_errors``)."""

    def __init__(self, name: str, stream, progress: _io.Progress | None, max_errors: int | None,
                 unit: str = ""):
        self.name = name
        self.unit = unit  # "row " for the rows of a Parquet file
        self.stream = stream
        self.progress = progress
        self.max_errors = max_errors
        self.failed = 0
        self.shown = 0
        self.warnings = 0

    def _write(self, line: str) -> None:
        if self.progress is not None:
            self.progress.clear()
        self.stream.write(line)

    def error(self, lineno: int, reason: str) -> None:
        self.failed += 1
        if self.max_errors is None or self.shown < self.max_errors:
            self.shown += 1
            self._write(f"{self.name}:{self.unit}{lineno}: {_one_line(reason)}\n")

    def warning(self, lineno: int, reason: str) -> None:
        self.warnings += 1
        if self.max_errors is None or self.shown < self.max_errors:
            self.shown += 1
            self._write(f"{self.name}:{self.unit}{lineno}: warning: {_one_line(reason)}\n")

    def hidden_note(self) -> str:
        hidden = self.failed + self.warnings - self.shown
        return f" ({hidden:,} more problems not shown)" if hidden > 0 else ""


def _output_on_the_progress_terminal(output) -> bool:
    """Whether the output (``-``: stdout) is the terminal that stderr, and so the progress
    bar, is on: the bar's redraws would land in the middle of the output there."""
    try:
        err = os.fstat(sys.stderr.fileno())
        out = os.fstat(sys.stdout.fileno()) if output in (None, "-") else os.stat(output)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return stat.S_ISCHR(out.st_mode) and stat.S_ISCHR(err.st_mode) and out.st_rdev == err.st_rdev


def _make_progress(args, inp: _io.InputFile) -> _io.Progress | None:
    if args.quiet or args.no_progress:
        return None
    if hasattr(args, "output") and _output_on_the_progress_terminal(args.output):
        return None
    progress = _io.Progress(sys.stderr, total=inp.size, position=inp.position)
    return progress if progress.enabled else None


def _summary(args, text: str) -> None:
    if not args.quiet:
        sys.stderr.write(text + "\n")


def _plural(n: int, noun: str) -> str:
    """``1 warning``, ``2 warnings``, ``1,000 warnings`` (it was ``1 warnings``)."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _finish(args, done: str, n: int, report, counts, t0: float) -> int:
    """The summary of a command that writes one output per good line (``done``: what
    it did, e.g. ``"parsed 10"``), and its exit status."""
    warned = f" ({_plural(report.warnings, 'warning')})" if report.warnings else ""
    _summary(args, f"{done}{warned}, failed {report.failed:,}"
                   f"{counts.summary(n + report.failed, t0)}{report.hidden_note()}")
    return 1 if report.failed and not args.skip_errors else 0


class _Usage(Exception):
    """Options that cannot go together (exit 2, like argparse's usage errors)."""


class _Shape(Exception):
    """A JSONL line (or Parquet row) of the wrong shape (internal)."""


_BOOL_KEYS = ("enable_thinking", "add_generation_prompt", "continue_assistant_message")
_STR_KEYS = ("date", "bos_token", "tools_text")


class _LineOptions:
    """Turns one JSONL conversation into ``(messages, render keyword arguments)``.

    Per-line keys override the command-line defaults: ``tools``, ``tools_text``,
    ``enable_thinking``, ``add_generation_prompt``, ``continue_assistant_message``,
    ``date``, ``bos_token`` (``null`` = not set). A line's ``"dialect"`` is used only
    when ``--dialect`` was not given (so parse output can be re-rendered in another
    dialect). Other keys are ignored.
    """

    def __init__(self, dialect: str, dialect_explicit: bool, date: str,
                 thinking: bool = False, gen_prompt: bool = False, reasoning_blocks: bool = False):
        self.dialect_explicit = dialect_explicit
        self.defaults = {"dialect": dialect, "enable_thinking": thinking,
                         "add_generation_prompt": gen_prompt, "date": date}
        self.reasoning_blocks = reasoning_blocks

    def __call__(self, obj):
        messages, kw = self.read(obj)
        if self.reasoning_blocks and type(messages) is list:
            messages = reasoning_to_blocks(messages)
        return messages, kw

    def warn_unrendered(self, lineno: int, messages, sink) -> None:
        """Warn about reasoning that was rendered away (without --reasoning-blocks)."""
        if not self.reasoning_blocks:
            for i, field in unrendered_reasoning(messages):
                sink.warning(lineno, f'message {i}: "{field}" is not rendered (no template reads '
                                     f"it); --reasoning-blocks renders it as a thoughts block")

    def read(self, obj):
        if type(obj) is dict:
            messages = obj.get("messages")
            if messages is None:
                if "messages" in obj:  # (as a null column of a Parquet row is)
                    raise _Shape('"messages" is null in this line')
                raise _Shape('expected an object with a "messages" key (or a list of messages)')
            if len(obj) == 1:  # the common case: only "messages", no per-line options
                return messages, self.defaults
            kw = dict(self.defaults)
            tools = obj.get("tools")
            if tools is not None:
                kw["tools"] = tools
            for key in _BOOL_KEYS:
                value = obj.get(key)
                if value is not None:
                    if value is not True and value is not False:
                        raise _Shape(f'"{key}" must be true or false, got '
                                     f'{json.dumps(value, ensure_ascii=False)[:40]}')
                    kw[key] = value
            for key in _STR_KEYS:
                value = obj.get(key)
                if value is not None:
                    if type(value) is not str:
                        raise _Shape(f'"{key}" must be a string, got {_json_type(value)}')
                    kw[key] = value
            dialect = obj.get("dialect")
            if dialect is not None and not self.dialect_explicit:
                if type(dialect) is not str:   # (a list or an object cannot be looked up)
                    raise _Shape(f'"dialect" must be a string, got {_json_type(dialect)}')
                if dialect not in DIALECTS:
                    raise _Shape(f'unknown "dialect" {json.dumps(dialect, ensure_ascii=False)[:40]}; '
                                 f"known: {', '.join(DIALECTS)}")
                kw["dialect"] = dialect
            return messages, kw
        if type(obj) is list:
            return obj, self.defaults
        raise _Shape(f"expected an object with a \"messages\" key or a list of messages, "
                     f"got {_json_type(obj)}")


def _json_type(obj) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "a boolean"
    if isinstance(obj, (int, float)):
        return "a number"
    if isinstance(obj, str):
        return "a string"
    if isinstance(obj, list):
        return "a list"
    return "an object"


def _load_render_with_spans():
    """The library's ``render_with_spans`` (imported lazily, like ``parse``)."""
    from ._spans import render_with_spans

    return render_with_spans


def _load_parse():
    """The library's ``parse`` (imported lazily: render-only runs never load it),
    without its :class:`DialectWarning`: the command reports the result's warnings,
    that one among them, at their lines."""
    from ._parse import parse_text

    def parse(text, *, dialect, strict):
        return parse_text(text, dialect, strict, "auto", False)

    return parse


def _dialect(args) -> str:
    return args.dialect or DEFAULT_DIALECT


def _fixed_date(args) -> str:
    # Fixed once per run: a run crossing midnight renders every line with one date.
    return args.date or _dt.date.today().isoformat()


# --------------------------------------------------------------------------- line work, --jobs
#
# Each command's work on one line is a picklable handler, ``handler(lineno, value, kept,
# sink) -> bool`` (True when it produced an output record), that reports and writes only
# through ``sink``. Run in this process, the sink is the reporter and the output itself
# (_Sink). With --jobs N, worker processes split, decode and handle blocks of the input
# and record what the handler did (_Recorder): the output bytes (gzipped there when the
# output is .gz), the problems, the Parquet rows. This process reads the input, keeps
# the blocks in order and hands each block's record to the real sink, so the output,
# the problems reported and their order are those of a run in one process. On Linux a
# block's output bytes come back as a file (a "part", _Parts) that this process copies
# into the output with sendfile, in the kernel, instead of through the result pipe,
# pickle and a write: that was half of this process's work, and with many workers this
# process is the limit.

#: A block of JSONL input sent to a worker is about this many bytes (whole lines);
#: Parquet goes in record batches of ``_parquet.BATCH_ROWS`` rows, or in row groups.
BATCH_BYTES = 1 << 20
#: Blocks in flight per worker: enough to keep every worker busy while this process
#: writes, and what bounds the memory held for --jobs.
BATCHES_PER_WORKER = 2
#: The default of --gzip-level (the workers' gzip members and the single-process
#: output alike).
GZIP_LEVEL = _io.GZIP_LEVEL
#: A Parquet file whose row groups hold at most this many rows each (and that has
#: more than one) is read by the workers a row group each; others are read here and
#: sent in record batches. (A worker holds a row group's output until it is done.)
ROW_GROUP_ROWS = 1 << 16
#: A worker hands a block's output of at least this many bytes over as a part file
#: (Linux, where sendfile writes into any file, pipe or device); smaller outputs, and
#: every output elsewhere, go back through the result pipe.
HANDOFF_BYTES = 64 << 10


class _Sink:
    """Where a handler's results go in this process: the reporter and the output file or
    Parquet table."""

    __slots__ = ("error", "warning", "write", "write_part", "add", "add_dict", "add_prepared",
                 "encoder")

    def __init__(self, report, out=None, table=None):
        self.error = report.error
        self.warning = report.warning
        self.write = out.write if out is not None else None
        self.write_part = None
        if out is not None:
            self.write_part = getattr(out, "write_part", None) or (lambda part: _copy_part(out, part))
        self.add = table.add if table is not None else None
        self.add_dict = table.add_dict if table is not None else None
        self.add_prepared = table.add_prepared if table is not None else None
        #: for --jobs workers: what makes their Parquet rows into record batches (None:
        #: the rows come back as they are)
        self.encoder = table.row_encoder() if table is not None else None


class _Parts:
    """The directory where --jobs workers leave their blocks' output as part files, for
    this process to copy into the output in order (``_copy_part``). A part is removed
    as soon as it is opened; the directory at the end, however the run ends, after the
    workers have stopped. (A killed process leaves it behind, as it does the output's
    temp file.)"""

    def __init__(self):
        import tempfile

        self.path = tempfile.mkdtemp(prefix="apertus-fast-parts-")

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)


#: Part files written by this worker process (their names: pid and this count).
_PART_NUMBERS = iter(range(1 << 62))


def _write_part(directory: str, data: bytes):
    """``data`` as a new part file in ``directory``: ``(name, size)``, or None when it
    cannot be written (a full disk, say), and the data goes back through the pipe."""
    name = os.path.join(directory, f"{os.getpid()}-{next(_PART_NUMBERS)}")
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
        return None
    os.close(fd)
    return name, len(data)


def _copy_part(out, part) -> None:
    """Append the part file ``part`` (``(name, size)``) to ``out`` and remove it:
    ``out``'s buffer is flushed, then sendfile copies the part into its descriptor in
    the kernel; a read and ``out.write`` where sendfile cannot (no descriptor, or one
    it does not write to)."""
    name, size = part
    fd = os.open(name, os.O_RDONLY)
    try:
        os.unlink(name)
        sent = 0
        target = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            out.flush()
            target = out.fileno()
        if target is not None:
            try:
                while sent < size:
                    n = os.sendfile(target, fd, sent, size - sent)
                    if n == 0:
                        break
                    sent += n
            except OSError as exc:
                if sent or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP,
                                             errno.EBADF, errno.ENOTSOCK):
                    raise
        while sent < size:
            data = os.pread(fd, min(size - sent, 1 << 20), sent)
            if not data:
                raise _io.InputError(f"a --jobs part file became shorter ({sent} of {size} bytes)")
            out.write(data)
            sent += len(data)
    finally:
        os.close(fd)


class _Recorder:
    """A sink in a worker. Each of the three streams keeps its own order: the output
    bytes (``chunks``), the problems for stderr (``problems``: ``(is_error, lineno,
    reason)``) and the Parquet rows (``rows``: ``(row, values)`` for ``add``, ``(row, d,
    kept)`` for ``add_dict``); how they interleave does not matter, since they go to
    different places."""

    __slots__ = ("chunks", "problems", "rows", "write")

    def __init__(self):
        self.chunks = []
        self.problems = []
        self.rows = []
        self.write = self.chunks.append

    def error(self, lineno: int, reason: str) -> None:
        self.problems.append((True, lineno, reason))

    def warning(self, lineno: int, reason: str) -> None:
        self.problems.append((False, lineno, reason))

    def add(self, row: int, values: tuple) -> None:
        self.rows.append((row, values))

    def add_dict(self, row: int, d: dict, kept: tuple) -> None:
        self.rows.append((row, d, kept))

    def record(self, compress: int, parts: tuple | None = None, encoder=None) -> tuple:
        """(output, problems, rows); the output is bytes (gzipped at level ``compress``
        unless it is 0), or a part file's ``(name, size)`` when ``parts`` (directory,
        least size) says to hand it over so; the Parquet rows are a list, or, with an
        ``encoder`` (a _parquet.RowEncoder), a record batch prepared here (a tuple)."""
        rows = self.rows
        if encoder is not None and rows:
            rows = encoder.prepare(rows)
        data = b"".join(self.chunks)
        if compress and data:  # one gzip member; concatenated members are one gzip stream
            z = zlib.compressobj(compress, zlib.DEFLATED, 31)
            data = z.compress(data) + z.flush()
        if parts is not None and data and len(data) >= parts[1]:
            part = _write_part(parts[0], data)
            if part is not None:
                return part, self.problems, rows
        return data, self.problems, rows


def _replay(record: tuple, sink: _Sink) -> None:
    """Hand a worker's record to the sink as if its lines had been handled here. With
    Parquet output the rows a row group cannot hold are reported when the group is
    written, so the block's problems are reported in line order around those writes
    (each before the group that a row of a later line completes), as one process
    reports them."""
    data, problems, rows = record
    if type(data) is tuple:
        sink.write_part(data)
    elif data:
        sink.write(data)
    done = 0

    def report_through(lineno) -> None:  # the problems of the lines up to lineno
        nonlocal done
        while done < len(problems) and problems[done][1] <= lineno:
            is_error, at, reason = problems[done]
            (sink.error if is_error else sink.warning)(at, reason)
            done += 1

    if type(rows) is tuple:  # a record batch prepared by the worker
        sink.add_prepared(rows, report_through)
    else:
        for row in rows:
            report_through(row[0])
            if len(row) == 2:
                sink.add(*row)
            else:
                sink.add_dict(*row)
    report_through(float("inf"))


_WORKER: tuple | None = None  # (handler, keep, compress, parts, encoder) in a worker


def _worker_start(handler, keep, compress, parts=None, encoder=None, parent=None) -> None:
    """A worker's initializer: Ctrl-C, SIGHUP and SIGQUIT are the parent's to handle (it
    stops the workers), and SIGTERM (how it stops them) ends a worker quietly, without
    the handler a forked worker inherits from the command. ``parts``: (directory, least size) for outputs
    handed over as part files, or None; ``encoder``: a _parquet.RowEncoder for Parquet
    rows, or None; ``parent``: the pid of the process that forked the workers (the
    command's, with the ``fork`` start method), or None where another process does."""
    global _WORKER
    with contextlib.suppress(ValueError, OSError, AttributeError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for name in ("SIGHUP", "SIGQUIT"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    with contextlib.suppress(ValueError, OSError, AttributeError):
        # (started while the parent held them back, _signals_held: now they are handled
        # as above)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)
    _end_with_the_parent(parent)
    _WORKER = (handler, keep, compress, parts, encoder)


def _end_with_the_parent(parent=None) -> None:
    """On Linux, have the kernel send this worker SIGTERM when its parent dies (killed
    with SIGKILL, say): the pool's pipes stay open in the sibling workers, so without
    it they would wait for work forever. Best effort elsewhere. ``parent``: the pid the
    parent had when it forked this worker. (Read here, it could already be the reaper's,
    if the parent was killed between the fork and this line: the worker then lived on,
    parented by init, waiting on its pipe.)"""
    if not sys.platform.startswith("linux"):
        return
    if parent is None:
        parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - no libc prctl: the worker lives on until its pipe closes
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


#: In a worker: path -> descriptor of the JSONL input it reads ranges of, or the
#: ParquetInput it reads row groups of.
_FILES: dict = {}


def _worker_range(lineno: int, path: str, offset: int, length: int):
    """_worker_block on bytes ``offset`` to ``offset + length`` of the file ``path``,
    read here: the parent read them too (to count lines), but then need not send them,
    which was a third of its time."""
    fd = _FILES.get(path)
    if fd is None:
        fd = _FILES[path] = os.open(path, os.O_RDONLY)
    parts = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            raise _io.InputError(f"cannot read {path}: it became shorter while being read")
        parts.append(data)
        offset += len(data)
        length -= len(data)
    return _worker_block(lineno, b"".join(parts) if len(parts) != 1 else parts[0])


def _worker_block(lineno: int, block: bytes):
    """Handle a block of JSONL lines in a worker (``lineno``: its first line's number),
    as _nonblank_lines and _decoded_lines would. Returns (the record, the number of
    outputs, blank lines, non-blank lines)."""
    handler, keep, compress, parts, encoder = _WORKER
    rec = _Recorder()
    done = blank = lines = 0
    loads = _io.json_loads
    # (lines with their newline, as the file gives them: a JSON error's column and a
    # UTF-8 error's byte are then counted as in one process)
    for lineno, line in enumerate(io.BytesIO(block), lineno):
        if _io.blank_line(line, lineno):
            blank += 1
            continue
        lines += 1
        try:
            value = loads(line)
        except (ValueError, RecursionError) as exc:
            rec.error(lineno, _io.json_error_reason(exc, line))
            continue
        if handler(lineno, value, _kept_values(value, keep) if keep else (), rec):
            done += 1
    return rec.record(compress, parts, encoder), done, blank, lines


def _worker_row_group(path: str, indices: list, rows):
    """Handle the consecutive row groups ``indices`` of the Parquet file ``path`` in a
    worker, read here (the parent sends no rows at all) and decoded by ``rows`` (a
    _ParquetRows)."""
    handler, _keep, compress, parts, encoder = _WORKER
    src = _FILES.get(path)
    if src is None:
        inp = _io.open_input(path)
        src = _FILES[path] = _parquet.ParquetInput(inp)
    rec = _Recorder()
    done = 0
    unreadable = None
    try:
        for first, batch in src.batches(rows.decoder, indices):
            for row, value, kept in rows(first, batch, rec.error):
                if handler(row, value, kept, rec):
                    done += 1
    except _parquet.UnreadableRows as exc:
        # the rows before it are handled as in one process; the parent reports it
        # (with the input's name as given: this process opened it by its absolute path)
        unreadable = (exc.row, exc.reason)
    return rec.record(compress, parts, encoder), done, 0, 0, unreadable


def _worker_batch(first: int, batch, rows):
    """Handle a record batch of a Parquet input in a worker (``first``: the number of
    its first row), decoded here by ``rows`` (a _ParquetRows) as the single process
    decodes it. Returns what _worker_block returns (no blank lines; the source counts
    the rows)."""
    handler, _keep, compress, parts, encoder = _WORKER
    rec = _Recorder()
    done = 0
    for row, value, kept in rows(first, batch, rec.error):
        if handler(row, value, kept, rec):
            done += 1
    return rec.record(compress, parts, encoder), done, 0, 0


def _usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _jobs(args) -> int:
    """Worker processes for ``--jobs`` (0: one per CPU this process may use), at most
    twice the usable CPUs: more would only take turns on them, each with its blocks in
    memory (a -j copied from a big machine's job onto a small one). _run starts fewer
    still when the input has fewer blocks."""
    jobs = getattr(args, "jobs", 1)
    cpus = _usable_cpus()
    if jobs == 0:
        jobs = cpus
    return max(min(jobs, 2 * cpus), 1)


def _tasks(src: _Source, counts: _Counts):
    """The source's items as (worker function, arguments) tasks: blocks of JSONL lines,
    or record batches of a Parquet input, which the workers decode (see _worker_block,
    _worker_range, _worker_batch)."""
    if src.blocks is not None:
        path = src.path
        for lineno, block, offset, length in src.blocks:
            counts.nbytes += length
            if block is None:
                yield _worker_range, (lineno, path, offset, length)
            else:
                yield _worker_block, (lineno, block)
        return
    if src.row_groups is not None:
        for indices in src.row_groups:
            yield _worker_row_group, (src.path, indices, src.decode)
        return
    for first, batch in src.batches:
        yield _worker_batch, (first, batch, src.decode)


class _WorkerDied(Exception):
    """A worker process ended without returning its block (killed, out of memory), or
    could not be started."""


def _flush_stdout() -> None:
    """``sys.stdout.flush()`` as multiprocessing does it before a fork (no stdout, or a
    closed one, is no error there); an OSError is raised."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError):
        pass


def _not_started(exc: OSError) -> _WorkerDied:
    """An OSError of making the workers or their pipes: the system's, not the output's
    (a fork that fails says EAGAIN, as a full non-blocking stdout does, and was reported
    as ``cannot write OUTPUT``)."""
    return _WorkerDied(f"cannot start the --jobs worker processes: {exc.strerror or exc}")


def _mp_context():
    """The workers' start method: on Linux, ``fork`` while this process has one thread
    (the command line does: the workers start at once, with the modules loaded and no
    lock another thread could hold), else ``forkserver``; elsewhere the platform's
    default (``spawn`` on macOS and Windows)."""
    import multiprocessing

    if sys.platform.startswith("linux"):
        method = "fork" if _one_thread() else "forkserver"
        return multiprocessing.get_context(method)
    return multiprocessing.get_context()


def _one_thread() -> bool:
    """Whether this process runs a single thread, counting those ``threading`` does
    not know of (pyarrow starts some once it is imported, to read Parquet): Linux lists
    them all in /proc. A fork copies only the calling thread, and a lock another one
    held stays locked in the child (Python 3.12 warns about forking then)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return threading.active_count() == 1


def _widen_pipes(pool) -> None:
    """Give the pool's task and result pipes 1 MiB buffers (Linux; 64 KiB by default):
    blocks of about 1 MiB then cross in one write instead of 16 context switches,
    which cut this process's system time by 40 %. Best effort: the pool works as it
    is anywhere this fails."""
    set_size = 1031  # F_SETPIPE_SZ (not named in fcntl before Python 3.10 on all builds)
    try:
        import fcntl

        ends = (pool._call_queue._writer, pool._result_queue._reader)
        for end in ends:
            fcntl.fcntl(end.fileno(), getattr(fcntl, "F_SETPIPE_SZ", set_size), BATCH_BYTES)
    except Exception:  # noqa: BLE001 - not Linux, a limit, or another pool layout
        pass


def _stop_workers(pool) -> None:
    """Stop a pool's workers now (Ctrl-C, SIGTERM, an error in this process) instead of
    letting them finish their blocks."""
    # (taken before shutdown, which forgets them) The pool's manager thread is waited
    # for too: a command run in-process after one that failed (an input unreadable
    # partway) would otherwise find it still running, and start its workers with
    # forkserver, not fork (_mp_context).
    manager = getattr(pool, "_executor_manager_thread", None)
    result_queue = getattr(pool, "_result_queue", None)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        with contextlib.suppress(Exception):
            terminate()
    else:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            with contextlib.suppress(Exception):
                proc.terminate()
        for proc in processes:
            with contextlib.suppress(Exception):
                proc.join(5)
    # This process holds both ends of the results pipe, so with the workers gone the
    # manager thread could wait forever inside reading a result that a worker was
    # killed while sending. Closing the end only the workers wrote to ends that read at
    # EOF: the manager then finds the pool broken and closes down (it closes the tasks
    # pipe's read end itself, which lets the call queue's feeder thread end too).
    writer = getattr(result_queue, "_writer", None)
    if writer is not None:
        with contextlib.suppress(Exception):
            writer.close()
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(5)


def _run(args, src: _Source, handler, sink: _Sink, counts: _Counts, keep=(),
         compress: int = 0) -> int:
    """Run ``handler`` over every item of ``src`` into ``sink``, in this process or,
    with ``--jobs`` > 1, in worker processes; returns the number of outputs.
    ``compress``: the workers gzip their output at this level, unless it is 0
    (``sink.write`` takes the members)."""
    jobs = _jobs(args)
    if jobs == 1:
        done = 0
        for lineno, value, kept in src.rows:
            if handler(lineno, value, kept, sink):
                done += 1
        return done

    import collections
    import concurrent.futures as cf

    done = 0
    pending: collections.deque = collections.deque()
    parts = pool = None

    def take() -> None:
        nonlocal done
        record, n, blank, lines, *unreadable = pending.popleft().result()
        _replay(record, sink)
        done += n
        counts.blank += blank
        counts.lines += lines
        if unreadable and unreadable[0] is not None:  # (rows of a Parquet file)
            raise _parquet.UnreadableRows(src.report.name, *unreadable[0])

    try:
        if (sink.write is not None and sink.add is None  # bytes out, not a Parquet table
                and sys.platform.startswith("linux") and hasattr(os, "sendfile")):
            # (a signal held back until ``parts`` is set: then the finally removes it)
            with _signals_held(), contextlib.suppress(OSError):
                parts = _Parts()
        # The first blocks are read before the workers start, so that no more start
        # than there is work for: with fork, the pool starts all of them at once (a
        # -j 300 forked 300 processes for a one-line input, and -j 10000 on a 5 MB file
        # ran out of memory).
        tasks = _tasks(src, counts)
        first: list = []
        unreadable = None
        while len(first) < jobs:
            try:
                first.append(next(tasks))
            except StopIteration:
                break
            except _io.InputError as exc:
                unreadable = exc
                break
        if not first:
            if unreadable is not None:
                raise unreadable
            return 0
        workers = len(first)
        try:
            context = _mp_context()
            pool = cf.ProcessPoolExecutor(
                workers, mp_context=context, initializer=_worker_start,
                initargs=(handler, keep, compress, None if parts is None else (parts.path, HANDOFF_BYTES),
                          sink.encoder,
                          os.getpid() if context.get_start_method() == "fork" else None))
        except OSError as exc:   # (its queues' pipes)
            raise _not_started(exc) from exc
        _widen_pipes(pool)
        try:
            while True:
                if first:
                    fn, task = first.pop(0)
                elif unreadable is not None:
                    # the input cannot be read on: what was read before it is handled
                    # and reported first, as in one process
                    while pending:
                        take()
                    raise unreadable
                else:
                    try:
                        fn, task = next(tasks)
                    except StopIteration:
                        break
                    except _io.InputError:
                        while pending:
                            take()
                        raise
                # multiprocessing flushes stdout before it forks; flushed here first,
                # an error of stdout's is the output's, and any other error of the
                # submit is the workers'. (Before the signals are held: a flush into a
                # pipe nobody reads blocks, and Ctrl-C must still stop it.)
                _flush_stdout()
                with _signals_held():   # (a submit may fork the workers)
                    try:
                        pending.append(pool.submit(fn, *task))
                    except OSError as exc:
                        raise _not_started(exc) from exc
                _check_terminated()
                while len(pending) >= workers * BATCHES_PER_WORKER:
                    take()
            while pending:
                take()
        except cf.process.BrokenProcessPool:  # (from a result, or from the next submit)
            raise _WorkerDied("a worker process died (killed, or out of memory?); "
                              "the output was not written") from None
        pool.shutdown(wait=True)
    except BaseException:
        if pool is not None:
            _stop_workers(pool)
        raise
    finally:
        # however the run ends, a signal during the shutdown included; held back while
        # the directory goes, so that it goes whole (the signal is raised right after)
        if parts is not None:
            with _signals_held():
                parts.remove()
    return done


class _Handler:
    """Base of the per-line handlers: picklable (for --jobs); functions looked up on
    first use are not pickled but looked up again in the worker."""

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)


# --------------------------------------------------------------------------- render


class _RenderLine(_Handler):
    """``render``'s work on one line: render the conversation, write the text (or the
    text and spans) as a JSON line, a raw text line, a record with kept values, or a
    Parquet row."""

    _render = None  # looked up on first use (tests monkeypatch cli.render)

    def __init__(self, conversation: _LineOptions, spans: bool, text: bool, keep: list,
                 table: bool):
        self.conversation = conversation
        self.spans = spans
        self.text = text
        self.keep = keep
        self.table = table

    def __call__(self, lineno, obj, kept, sink) -> bool:
        render_fn = self._render
        if render_fn is None:
            render_fn = self._render = _load_render_with_spans() if self.spans else render
        try:
            messages, kw = self.conversation(obj)
            result = render_fn(messages, **kw)
        except (RenderError, _Shape) as exc:
            sink.error(lineno, str(exc))
            return False
        self.conversation.warn_unrendered(lineno, messages, sink)
        if self.table:
            sink.add(lineno, (*result, *kept) if self.spans else (result, *kept))
        elif self.text:
            sink.write((result + "\n").encode("utf-8", "backslashreplace"))
        elif self.keep:
            record = _kept_dict(self.keep, kept)
            if self.spans:
                record["text"], record["spans"] = result
            else:
                record["text"] = result
            sink.write(_kept_line(record))
        elif self.spans:  # (lone surrogates, which have no UTF-8, come out as \ud800)
            sink.write(_io.json_line({"text": result[0], "spans": result[1]}))
        else:
            sink.write(_io.json_line(result))
        return True


def _cmd_render(args) -> int:
    keep = _keep_list(args, ("text", "spans"))
    parquet_out = _parquet.is_parquet_path(args.output)
    if parquet_out and args.text:
        raise _Usage("--text writes raw text, not Parquet: without --text the texts go to "
                     'a Parquet "text" column')
    conversation = _LineOptions(_dialect(args), args.dialect is not None, _fixed_date(args),
                                args.thinking, args.generation_prompt, args.reasoning_blocks)
    handler = _RenderLine(conversation, args.spans, args.text, keep, parquet_out)
    return _records(args, "spans" if args.spans else "render", handler, keep,
                    _CONVERSATION_COLUMNS, ("messages",), lambda n: f"rendered {n:,}")


def _records(args, kind: str, handler, keep, columns, required, done) -> int:
    """What render and completions share: JSONL (or Parquet rows with ``columns``, of
    which one of ``required`` must be set) in, one output record of ``kind`` per good
    line, the summary (what ``done`` makes of the count) and the exit status."""
    t0 = time.perf_counter()
    counts = _Counts()

    with _io.open_input(args.input) as inp:
        if inp.parquet:
            src = _parquet_source(args, inp, counts, columns, required, keep)
        else:
            src = _jsonl_source(args, inp, counts, keep=keep)
        report, progress = src.report, src.progress
        with _output(args, kind, report, keep, src.keep_types) as (out, table):
            try:
                n = _run(args, src, handler, _Sink(report, out, table), counts, keep,
                         getattr(out, "members", 0))
            finally:
                if progress is not None:
                    progress.close()
        if table is not None:
            n = table.written

    return _finish(args, done(n), n, report, counts, t0)


# --------------------------------------------------------------------------- parse / validate


def _detect_format(inp: _io.InputFile, forced: str):
    """Read up to the first non-blank line; return ``(format, head, rest, first_value)``:
    the format (``"jsonl"`` or ``"raw"``; ``"parquet"``, and nothing read, for a Parquet
    file), the lines read so far, the iterator over the
    remaining lines, and the decoded JSON of the first non-blank line (``_NOT_JSON`` if
    it is not JSON), so that line is not decoded twice."""
    if forced == "parquet" or (forced == "auto" and inp.parquet):
        return "parquet", [], None, _NOT_JSON
    head: list[bytes] = []
    it = iter(inp)
    first = None
    for lineno, line in enumerate(it, 1):
        head.append(line)
        if not _io.blank_line(line, lineno):
            first = line
            break
    value = _NOT_JSON
    if first is not None and forced != "raw":
        try:
            value = _io.json_loads(first)
        except (ValueError, RecursionError):
            value = _NOT_JSON
    if forced == "auto":
        # raw: a first line that is not JSON and does not begin as JSON does (a rendered
        # text begins with its BOS, "<s>", or "<|system_start|>"); a JSON line that is
        # broken (a corpus whose first line is cut off) is one bad line of a JSONL file
        looks_json = first is not None and first.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[", b'"')
        fmt = "raw" if value is _NOT_JSON and first is not None and not looks_json else "jsonl"
    else:
        fmt = forced
    return fmt, head, it, value


_NOT_JSON = object()


def _read_raw(head: list[bytes], rest) -> bytes:
    """The whole input of a raw file: the lines read for detection and the rest."""
    return b"".join(head) + b"".join(rest)


def _raw_text(data: bytes) -> bytes:
    """The UTF-8 text of a raw file, as the bytes parse() reads (a leading BOM is no
    text: errors count from the byte after it). Given bytes, parse() counts every
    error in bytes, invalid UTF-8 as a malformed structure (which counted characters
    when the file was decoded first), and reports the first in the file."""
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data


def _text_of(value) -> str:
    """The rendered text a JSONL line carries (a string, or an object's "text")."""
    if type(value) is str:
        return value
    if type(value) is dict:
        text = value.get("text")
        if type(text) is str:
            return text
        if text is None:
            if "text" in value:
                raise _Shape('"text" is null in this line')
            raise _Shape('expected a JSON string or an object with a "text" key')
        raise _Shape(f'"text" must be a string, got {_json_type(text)}')
    raise _Shape(f'expected a JSON string or an object with a "text" key, got {_json_type(value)}')


def _iter_jsonl(head, rest, first_value, lineno_start=1):
    """(lineno, line bytes, decoded value or _NOT_JSON) over the head lines and the rest;
    the first non-blank line's value is passed in already decoded."""
    lineno = lineno_start - 1
    for line in head:
        lineno += 1
        yield lineno, line, (first_value if not _io.blank_line(line, lineno) else None)
    for line in rest:
        lineno += 1
        yield lineno, line, _NOT_JSON


class _Counts:
    """What the input held: bytes, blank lines, non-blank lines (or Parquet rows)."""

    __slots__ = ("nbytes", "blank", "lines", "rows")

    def __init__(self):
        self.nbytes = self.blank = self.lines = 0
        self.rows = False  # a Parquet input: rows, and no blank lines

    def summary(self, n: int, t0: float) -> str:
        """``, skipped blank B in S s (R lines/s, M MB/s)`` for ``n`` items since ``t0``
        (without the blank lines for Parquet rows)."""
        if self.rows:  # (compressed columns: their bytes say little about the work)
            return " " + _rate(n, None, time.perf_counter() - t0, "rows")
        return f", skipped blank {self.blank:,} {_rate(n, self.nbytes, time.perf_counter() - t0)}"


def _nonblank_lines(numbered, progress, counts):
    """(lineno, line, value or _NOT_JSON) for each non-blank line of ``numbered`` (as
    _iter_jsonl yields them): counts bytes and blank lines and advances the progress bar."""
    for lineno, line, value in numbered:
        counts.nbytes += len(line)
        if progress is not None:
            progress.update(lineno)
        if _io.blank_line(line, lineno):
            counts.blank += 1
            continue
        counts.lines += 1
        yield lineno, line, value


def _decoded_lines(lines, error):
    """(lineno, JSON value) for each of ``lines`` (as _nonblank_lines yields them),
    reporting with ``error(lineno, reason)`` those that are not JSON."""
    loads = _io.json_loads
    for lineno, line, value in lines:
        if value is _NOT_JSON:
            try:
                value = loads(line)
            except (ValueError, RecursionError) as exc:
                error(lineno, _io.json_error_reason(exc, line))
                continue
        yield lineno, value


def _kept_values(value, keep) -> tuple:
    """The ``--keep`` values of a JSONL line: null for a key it lacks, or for every key
    when it is not an object."""
    if type(value) is dict:
        return tuple(value.get(k) for k in keep)
    return (None,) * len(keep)


#: The columns of a Parquet row that ``_LineOptions`` reads.
_CONVERSATION_COLUMNS = ("messages", "tools", *_BOOL_KEYS, *_STR_KEYS, "dialect")


class _Source:
    """Where a command's items come from: ``rows`` yields ``(line or row number, value,
    kept values)``; ``report`` counts and prints problems; ``progress`` is the bar (or
    None); ``keep_types`` are the Arrow types of the ``--keep`` columns (None each when
    unknown: JSONL). ``blocks``, for JSONL, yields the undecoded input instead, as
    ``(number of its first line, bytes of whole lines)``, which ``--jobs`` hands to its
    workers to split, count and decode; only one of the two is consumed."""

    def __init__(self, rows, report, progress, keep_types, blocks=None, path=None,
                 batches=None, decode=None, row_groups=None):
        self.rows = rows
        self.report = report
        self.progress = progress
        self.keep_types = keep_types
        self.blocks = blocks
        #: the input's path when the workers can read its blocks themselves (a regular,
        #: uncompressed file whose offsets are those of the blocks)
        self.path = path
        #: for Parquet, ``(number of the first row, record batch)`` undecoded, and
        #: ``decode(first, batch, error)``, which yields the batch's rows as ``rows`` does
        self.batches = batches
        self.decode = decode
        #: for a Parquet file the workers read themselves (``path``), lists of the
        #: indices of consecutive row groups, one a task, instead of ``batches``
        self.row_groups = row_groups


def _jsonl_source(args, inp: _io.InputFile, counts, head=(), rest=None,
                  first_value=None, *, keep=(), output=True) -> _Source:
    """The non-blank lines of a JSONL input, decoded (``head``/``rest``/``first_value``
    as ``_detect_format`` returns them; by default the whole input). A kept key that a
    line lacks (or a line that is not an object) gives null."""
    progress = _make_progress(args, inp)
    report = _Reporter(inp.name, sys.stderr if output else sys.stdout, progress,
                       args.max_errors)
    lines = _nonblank_lines(_iter_jsonl(head, inp if rest is None else rest, first_value),
                            progress, counts)

    def rows():
        for lineno, value in _decoded_lines(lines, report.error):
            yield lineno, value, _kept_values(value, keep) if keep else ()

    return _Source(rows(), report, progress, [None] * len(keep),
                   _line_blocks(head, inp, progress), inp.seekable_path())


def _line_blocks(head, inp: _io.InputFile, progress, size: int = 0):
    """The input after ``head`` (the lines already read) in blocks of whole lines of
    about ``size`` bytes (default BATCH_BYTES): ``(number of the first line, bytes,
    offset in the input, length)``. A line longer than a block makes a longer block.
    For a file the workers read themselves (``inp.seekable_path()``) the bytes are
    ``None``: the block is only counted here, never copied out of what was read."""
    size = size or BATCH_BYTES
    ranges = inp.seekable_path() is not None
    count = _io.count_newlines
    lineno = 1
    offset = inp.start
    parts = [] if ranges else list(head)
    held = sum(map(len, head))      # bytes read and not yet in a block
    held_lines = sum(map(count, head))
    held_whole = sum(len(line) for line in head if line.endswith(b"\n"))  # (to its last newline)
    while True:
        try:
            data = inp.read_block(size)
        except _io.InputError:
            # the input cannot be read on: its whole lines read before are a last block
            # (one process handles them before it reports the error; the start of a line
            # cut off is dropped there too)
            if held_lines:
                yield lineno, None if ranges else b"".join(parts)[:held_whole], offset, held_whole
            raise
        if data:
            cut = data.rfind(b"\n") + 1
            if cut == 0 or held + cut < size // 2:  # no line ends here, or too little yet
                if not ranges:
                    parts.append(data)
                if cut:
                    held_whole = held + cut
                held += len(data)
                held_lines += count(data)
                continue
            length = held + cut
            lines = held_lines + count(data, 0, cut)
            block = None
            if not ranges:
                parts.append(data[:cut])
                block = b"".join(parts)
            rest = len(data) - cut      # (after the last newline: no line ends in it)
        elif not held:
            return
        else:
            length, lines, rest = held, held_lines, 0
            block = None if ranges else b"".join(parts)
        yield lineno, block, offset, length
        offset += length
        lineno += lines
        if progress is not None:
            progress.update(lineno - 1)
        if not data:
            return
        held, held_lines, held_whole = rest, 0, 0
        if not ranges:
            parts = [data[cut:]] if rest else []


def _parquet_source(args, inp: _io.InputFile, counts, columns, required, keep=(), *,
                    output=True) -> _Source:
    """The rows of a Parquet input, holding those of ``columns`` that the file has and
    that are not null in the row, with the ``keep`` columns' values as they are stored.
    A row in which every ``required`` column is null is reported. Raises InputError
    (exit 2) when the file has none of ``required`` or lacks a ``keep`` column, before
    any output is made."""
    src = _parquet.ParquetInput(inp)
    src.require(*required)
    src.require_all(keep)
    src.check_unique([*columns, *keep])
    counts.rows = True
    progress = None
    if not (args.quiet or args.no_progress) and not (
            output and _output_on_the_progress_terminal(args.output)):
        progress = _io.Progress(sys.stderr, total=src.num_rows,
                                position=lambda: src.rows_done, unit="rows")
        progress = progress if progress.enabled else None
    report = _Reporter(inp.name, sys.stderr if output else sys.stdout, progress,
                       args.max_errors, unit="row ")
    decode = _ParquetRows(src.decoder(columns, keep), [c for c in required if c in src.columns])

    def batches():
        for first, batch in src.batches(decode.decoder):
            yield first, batch
            if progress is not None:
                progress.update(src.rows_done)
        counts.lines = src.rows_done

    def rows():
        for first, batch in batches():
            yield from decode(first, batch, report.error)

    # A plain file with several row groups, none too big, is read by the workers
    # themselves, a row group each: this process then only numbers the rows.
    path, groups = inp.seekable_path(), src.row_groups()
    row_groups = None
    if path is not None and len(groups) > 1 and max(n for _, n in groups) <= ROW_GROUP_ROWS:
        def row_groups():  # a run of consecutive row groups (src.runs) a task
            for task in src.runs():
                yield task
                first, n = groups[task[-1]]
                src.rows_done = first + n - 1
                if progress is not None:
                    progress.update(src.rows_done)
            counts.lines = src.rows_done

        row_groups = row_groups()
    return _Source(rows(), report, progress, src.field_types(keep), path=path,
                   batches=batches(), decode=decode, row_groups=row_groups)


class _ParquetRows:
    """A Parquet record batch's rows as the commands take them, ``(row, value, kept)``:
    the decoder's rows, with a row in which every required column (those of
    ``present``) is null reported instead. Picklable: the --jobs workers decode their
    own batches with it, so the rows and problems are those of one process."""

    def __init__(self, decoder: _parquet.BatchDecoder, present: list):
        self.decoder = decoder
        self.present = present
        self.missing = " and ".join(f'"{c}"' for c in present) + (" are" if len(present) > 1 else " is")

    def __call__(self, first: int, batch, error):
        present = self.present
        for row, value, kept in self.decoder.rows(first, batch, error):
            for c in present:
                if c in value:
                    yield row, value, kept
                    break
            else:
                error(row, f"{self.missing} null in this row")


@contextlib.contextmanager
def _output(args, kind: str, report, keep=(), keep_types=()):
    """``(out, table)`` for ``-o``: the atomic output file, and a ParquetOutput of
    ``kind`` into it when the name ends with .parquet (else None). The table is closed
    (its last rows written, reported failures included) before the file is committed,
    and aborted on an exception."""
    if not _parquet.is_parquet_path(args.output):
        path = args.output
        level = getattr(args, "gzip_level", GZIP_LEVEL)
        if _jobs(args) > 1 and _io.is_gzip_path(path):
            # the workers gzip their blocks: this process only joins the members
            with _io.atomic_output(path, compress=False, on_commit=_committing) as f:
                members = _GzipMembers(f, level)
                yield members, None
                members.close()
            return
        with _io.atomic_output(path, gzip_level=level, on_commit=_committing) as out:
            yield out, None
        return
    with _io.atomic_output(args.output, compress=False, on_commit=_committing) as out, \
            _parquet.ParquetOutput(out, kind, report.error,
                                   keep=list(zip(keep, keep_types))) as table:
        yield out, table


class _GzipMembers:
    """A .gz output written as gzip members made by the --jobs workers, one per block
    (a gzip reader reads concatenated members as one stream, as pigz and bgzip
    output is read). ``close`` writes an empty member if there was none, so that an
    empty output is a valid gzip file too. ``members``: the workers' gzip level."""

    def __init__(self, f, level: int = GZIP_LEVEL):
        self._f = f
        self._empty = True
        self.members = level

    def write(self, data: bytes) -> int:
        self._empty = False
        return self._f.write(data)

    def write_part(self, part) -> None:
        self._empty = False
        _copy_part(self._f, part)

    def close(self) -> None:
        if self._empty:
            z = zlib.compressobj(self.members, zlib.DEFLATED, 31)
            self._f.write(z.compress(b"") + z.flush())
            self._empty = False


def _keep_list(args, taken) -> list[str]:
    """The ``--keep`` keys, in order, without repeats; a key the output already has is
    a usage error, and so is ``--keep`` with ``--text``."""
    keep = list(dict.fromkeys(k for group in (args.keep or ()) for k in group))
    clash = [k for k in keep if k in taken]
    if clash:
        raise _Usage(f'--keep {clash[0]}: the output has its own "{clash[0]}"')
    if keep and getattr(args, "text", False):
        raise _Usage("--keep needs records: it cannot go with --text")
    return keep


def _plain(value):
    """JSON for the values a Parquet column may keep that JSON has no type for."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if hasattr(value, "isoformat"):  # dates, times, timestamps
        return value.isoformat()
    return str(value)  # decimals, durations


def _kept_dict(keep, kept) -> dict:
    """The ``--keep`` values of a line as the start of its JSON record."""
    try:
        return {k: _io.json_safe(v) for k, v in zip(keep, kept)}
    except RecursionError:  # (nested too deeply to look into: as it is)
        return dict(zip(keep, kept))


_KEPT_UNICODE = json.JSONEncoder(ensure_ascii=False, default=_plain).encode
_KEPT_ASCII = json.JSONEncoder(default=_plain).encode


def _kept_line(record: dict) -> bytes:
    """One JSON line for a record with kept values (lone surrogates escaped)."""
    if _io._json_line_fast is not None:  # plain values (JSONL input): the compiled writer
        line = _io._json_line_fast(record)
        if line is not None:
            return line
    try:
        return (_KEPT_UNICODE(record) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_KEPT_ASCII(record) + "\n").encode("ascii")


class _ParseLine(_Handler):
    """``parse``'s work on one line: parse its text, write the conversation."""

    _parse = None  # looked up on first use (render-only runs never import the parser)

    def __init__(self, dialect: str, strict: bool, keep: list, table: bool):
        self.dialect = dialect
        self.strict = strict
        self.keep = keep
        self.table = table

    def __call__(self, lineno, value, kept, sink) -> bool:
        parse_fn = self._parse
        if parse_fn is None:
            parse_fn = self._parse = _load_parse()
        try:
            result = parse_fn(_text_of(value), dialect=self.dialect, strict=self.strict)
        except ParseError as exc:
            sink.error(lineno, _parse_error_reason(exc))
            return False
        except _Shape as exc:
            sink.error(lineno, str(exc))
            return False
        for w in result.warnings:
            sink.warning(lineno, w)
        self.emit(lineno, result, kept, sink)
        return True

    def emit(self, lineno, result, kept, sink) -> None:
        d = result.to_dict()
        if self.table:
            sink.add_dict(lineno, d, kept)
        elif self.keep:
            sink.write(_kept_line({**_kept_dict(self.keep, kept), **d}))
        else:
            sink.write(_io.json_line(d))


def _cmd_parse(args) -> int:
    keep = _keep_list(args, _parquet.column_names("parse"))
    dialect = _dialect(args)
    handler = _ParseLine(dialect, not args.lenient, keep, _parquet.is_parquet_path(args.output))
    t0 = time.perf_counter()
    parsed = 0
    counts = _Counts()

    with _io.open_input(args.input) as inp:
        fmt, head, rest, first_value = _detect_format(inp, args.format)
        if fmt == "parquet":
            src = _parquet_source(args, inp, counts, ("text",), ("text",), keep)
        elif fmt == "jsonl":
            src = _jsonl_source(args, inp, counts, head, rest, first_value, keep=keep)
        else:  # raw: the whole file is one text (no progress bar, nothing to keep)
            src = _Source((), _Reporter(inp.name, sys.stderr, None, args.max_errors), None,
                          [None] * len(keep))
        report, progress = src.report, src.progress
        with _output(args, "parse", report, keep, src.keep_types) as (out, table):
            sink = _Sink(report, out, table)
            try:
                if fmt == "raw":
                    data = _read_raw(head, rest)
                    counts.nbytes = len(data)
                    try:
                        result = _load_parse()(_raw_text(data), dialect=dialect,
                                               strict=handler.strict)
                    except ParseError as exc:
                        report.error(exc.line, _parse_error_reason(exc))
                    else:
                        for w in result.warnings:
                            report.warning(_warning_line(w), w)
                        handler.emit(1, result, (None,) * len(keep), sink)
                        parsed += 1
                else:
                    parsed = _run(args, src, handler, sink, counts, keep,
                                  getattr(out, "members", 0))
            finally:
                if progress is not None:
                    progress.close()
        if table is not None:
            parsed = table.written

    return _finish(args, f"parsed {parsed:,}", parsed, report, counts, t0)


def _completion_of(value) -> tuple[str, str | None]:
    """(completion, prompt or None) of one input line: a string, or an object with a
    "completion" (and a "prompt")."""
    if type(value) is str:
        return value, None
    if type(value) is not dict:
        raise _Shape(f'expected a JSON string or an object with a "completion" key, got '
                     f"{_json_type(value)}")
    completion = value.get("completion")
    if type(completion) is not str:
        if completion is None:
            if "completion" in value:
                raise _Shape('"completion" is null in this line')
            raise _Shape('expected a JSON string or an object with a "completion" key')
        raise _Shape(f'"completion" must be a string, got {_json_type(completion)}')
    prompt = value.get("prompt")
    if prompt is not None and type(prompt) is not str:
        raise _Shape(f'"prompt" must be a string, got {_json_type(prompt)}')
    return completion, prompt


class _CompletionLine(_Handler):
    """``completions``' work on one line: read the completion, write its record."""

    def __init__(self, dialect: str, openai: bool, keep: list, table: bool):
        self.dialect = dialect
        self.openai = openai
        self.keep = keep
        self.table = table

    def __call__(self, lineno, value, kept, sink) -> bool:
        from ._stream import parse_completion

        try:
            completion, prompt = _completion_of(value)
            c = parse_completion(completion, dialect=self.dialect, prompt=prompt,
                                 call_id=lambda i, n=lineno: f"call_{n}_{i}")
        except _Shape as exc:
            sink.error(lineno, str(exc))
            return False
        except ValueError as exc:   # a prompt that ends outside a turn
            sink.error(lineno, str(exc))
            return False
        for w in c.warnings:
            sink.warning(lineno, w)
        if self.openai:
            record = {"message": c.openai(), "finish_reason": c.finish_reason}
        else:
            record = c.to_dict()
        if self.table:
            sink.add_dict(lineno, record, kept)
        else:
            sink.write(_kept_line({**_kept_dict(self.keep, kept), **record}))
        return True


def _cmd_completions(args) -> int:
    kind = "openai" if args.openai else "completions"
    keep = _keep_list(args, _parquet.column_names(kind))
    handler = _CompletionLine(_dialect(args), args.openai, keep,
                              _parquet.is_parquet_path(args.output))
    return _records(args, kind, handler, keep, ("completion", "prompt"), ("completion",),
                    lambda n: f"read {_plural(n, 'completion')}")


#: a dialect's special tokens, which a tokenizer reads as tokens wherever text spells
#: them (not BOS, a token only at the start; not <think> and </think>, which a
#: conversation's text reads back as text)
_SPELLABLE: dict = {}


def _spellable_tokens(dialect) -> tuple:
    name = getattr(dialect, "name", dialect)
    tokens = _SPELLABLE.get(name)
    if tokens is None:
        from ._dialects import TOKEN_TEXT, Kind, get_dialect

        tokens = _SPELLABLE[name] = tuple(
            TOKEN_TEXT[k] for k in get_dialect(dialect).token_kinds
            if k not in (Kind.BOS, Kind.THINK_START, Kind.THINK_END))
    return tokens


def _spelt_token(value, tokens, depth=0):
    """The first special token that a string in ``value`` (a message's values, nested
    dicts and lists) spells, or None."""
    if type(value) is str:
        if "<" in value:
            for token in tokens:
                if token in value:
                    return token
        return None
    if depth < 300:
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, (list, tuple)):
            return None
        for item in value:
            found = _spelt_token(item, tokens, depth + 1)
            if found is not None:
                return found
    return None


def _close_to_content(key) -> bool:
    import difflib

    return (isinstance(key, str) and key != "content"
            and difflib.SequenceMatcher(None, key.lower(), "content").ratio() >= 0.8)


def suspicious(messages, tools, dialect) -> list[str]:
    """What ``validate`` warns about in a conversation that renders, because the
    training text is then not what its author meant (the template accepts both):
    a user or tool message without ``"content"`` (rendered as nothing, or as an empty
    output; a key such as ``"contents"`` is named as a likely misspelling), and text
    that spells a special token of the dialect (a tokenizer reads it as that token: the
    model trains on a turn boundary, say, that the conversation did not have)."""
    out = []
    if not isinstance(messages, (list, tuple)):
        return out
    tokens = _spellable_tokens(dialect)
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("user", "tool") and "content" not in message:
            near = next((k for k in message if _close_to_content(k)), None)
            out.append(f'message {i}: a {role} message without "content" renders as '
                       f'{"nothing" if role == "user" else "an empty output"}'
                       + (f" (it has {near!r}: misspelt?)" if near is not None else ""))
        found = _spelt_token({k: v for k, v in message.items() if k != "role"}, tokens)
        if found is not None:
            out.append(f"message {i}: its text spells {found}, a special token of "
                       f"{getattr(dialect, 'name', dialect)}: a tokenizer reads it as that token, "
                       f"not as text")
    if isinstance(tools, (list, tuple)):
        for i, tool in enumerate(tools):
            found = _spelt_token(tool, tokens)
            if found is not None:
                out.append(f"tools[{i}]: its text spells {found}, a special token of "
                           f"{getattr(dialect, 'name', dialect)}: a tokenizer reads it as that token, "
                           f"not as text")
    return out


class _ValidateLine(_Handler):
    """``validate``'s work on one line: render a conversation or parse a text, and
    report what fails (no output)."""

    _parse = None

    def __init__(self, conversation: _LineOptions, dialect: str, strict: bool):
        self.conversation = conversation
        self.dialect = dialect
        self.strict = strict

    def __call__(self, lineno, value, kept, sink) -> bool:
        try:
            # (a null "messages" or "text" is not set, as in a Parquet row)
            if type(value) is list or (type(value) is dict and value.get("messages") is not None):
                messages, kw = self.conversation(value)
                render(messages, **kw)
                self.conversation.warn_unrendered(lineno, messages, sink)
                for warning in suspicious(messages, kw.get("tools"), kw["dialect"]):
                    sink.warning(lineno, warning)
            elif type(value) is str or (type(value) is dict and value.get("text") is not None):
                self.check_text(_text_of(value), lineno, sink)
            elif type(value) is dict and ("messages" in value or "text" in value):
                null = [k for k in ("messages", "text") if k in value]
                raise _Shape(" and ".join(f'"{k}"' for k in null)
                             + (" are" if len(null) > 1 else " is") + " null in this line")
            else:
                raise _Shape('expected an object with "messages" or "text", a list '
                             f'of messages or a JSON string, got {_json_type(value)}')
        except (RenderError, _Shape) as exc:
            sink.error(lineno, str(exc))
        return False

    def check_text(self, text: str, lineno: int, sink) -> None:
        parse_fn = self._parse
        if parse_fn is None:
            parse_fn = self._parse = _load_parse()
        try:
            result = parse_fn(text, dialect=self.dialect, strict=self.strict)
        except ParseError as exc:
            sink.error(lineno, _parse_error_reason(exc))
            return
        for w in result.warnings:
            sink.warning(lineno, w)


def _cmd_validate(args) -> int:
    dialect = _dialect(args)
    handler = _ValidateLine(_LineOptions(dialect, args.dialect is not None, _fixed_date(args),
                                         reasoning_blocks=args.reasoning_blocks),
                            dialect, not args.lenient)
    t0 = time.perf_counter()
    counts = _Counts()

    with _io.open_input(args.input) as inp:
        fmt, head, rest, first_value = _detect_format(inp, args.format)
        if fmt == "parquet":
            src = _parquet_source(args, inp, counts, ("messages", "text", *_CONVERSATION_COLUMNS[1:]),
                                  ("messages", "text"), output=False)
        elif fmt == "jsonl":
            src = _jsonl_source(args, inp, counts, head, rest, first_value, output=False)
        else:
            src = _Source((), _Reporter(inp.name, sys.stdout, None, args.max_errors), None, [])
        report, progress = src.report, src.progress
        sink = _Sink(report)
        try:
            if fmt == "raw":
                data = _read_raw(head, rest)
                counts.nbytes = len(data)
                counts.lines = 1
                try:
                    result = _load_parse()(_raw_text(data), dialect=dialect,
                                           strict=handler.strict)
                except ParseError as exc:  # (reported at its line in the file)
                    report.error(exc.line, _parse_error_reason(exc))
                else:
                    for w in result.warnings:
                        report.warning(_warning_line(w), w)
            else:
                _run(args, src, handler, sink, counts)
        finally:
            if progress is not None:
                progress.close()
    sys.stdout.flush()
    warned = f", {_plural(report.warnings, 'warning')}" if report.warnings else ""
    checked = counts.lines
    _summary(args, f"checked {checked:,}, ok {checked - report.failed:,}, failed {report.failed:,}"
                   f"{warned}{counts.summary(checked, t0)}"
                   f"{report.hidden_note()}")
    return 1 if report.failed else 0


# --------------------------------------------------------------------------- dialects


def _cmd_dialects(args) -> int:
    width = max(len(name) for name in DIALECTS)
    for name, d in DIALECTS.items():
        desc = DIALECT_DESCRIPTIONS.get(name) or f"template {d.template}"
        mark = " (default)" if name == DEFAULT_DIALECT else ""
        sys.stdout.write(f"{name:<{width}}  {desc}{mark}\n")
    return 0


# --------------------------------------------------------------------------- argparse


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog):
        super().__init__(prog, max_help_position=30)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Render, parse and validate conversations in the Apertus chat format, "
                    "and read model completions.",
        epilog=_MAIN_EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p, *, output=True, skip=True, conv_lines=True):
        p.add_argument("input", metavar="INPUT",
                       help="input file, '-' for stdin (gzip is decompressed transparently; "
                            "Parquet files are recognised and read by rows)")
        if output:
            p.add_argument("-o", "--output", metavar="OUTPUT", default="-", type=_output_path,
                           help="output file, '-' for stdout (default); written atomically, "
                                "gzipped if it ends with .gz, Parquet if it ends with .parquet")
            p.add_argument("--gzip-level", type=_gzip_level, metavar="N", default=GZIP_LEVEL,
                           help=f"compression level of a .gz output, 1 (fastest) to 9 (smallest; "
                                f"default {GZIP_LEVEL}, as gzip's)")
        p.add_argument("--dialect", choices=list(DIALECTS), default=None, metavar="D",
                       help=f"format version: {', '.join(DIALECTS)} (default: {DEFAULT_DIALECT}"
                            + ("; if not given, a line's \"dialect\" key is used)" if conv_lines else ")"))
        if skip:
            p.add_argument("--skip-errors", action="store_true",
                           help="exit 0 even if some lines failed (they are still reported)")
        p.add_argument("--max-errors", type=_positive_int, metavar="N", default=None,
                       help="print at most N problems (all are still counted)")
        p.add_argument("-j", "--jobs", type=_positive_int, metavar="N", default=1,
                       help="worker processes (default 1: this process alone; 0: one per "
                            "CPU; at most twice the CPUs, and no more than the input has "
                            "blocks of about 1 MiB); the output is the same, in input order")
        p.add_argument("-q", "--quiet", action="store_true",
                       help="no summary line and no progress bar")
        p.add_argument("--no-progress", action="store_true",
                       help="no progress bar (it is only shown when stderr is a terminal)")

    def reasoning_option(p):
        p.add_argument("--reasoning-blocks", action="store_true",
                       help="move assistant reasoning kept beside the content (" +
                            ", ".join(f'"{f}"' for f in REASONING_FIELDS) + ", as OpenAI-style "
                            "servers return it) into thoughts blocks, so that it is rendered; "
                            "without it, such reasoning is not rendered and each line that has "
                            "it gets a warning")

    p = sub.add_parser("render", help="render JSONL conversations to text",
                       description="Render JSONL conversations with the chat template of a "
                                   "dialect, one output line per input line.",
                       epilog=_RENDER_EXAMPLES, formatter_class=_Formatter)
    common(p)
    p.add_argument("--date", type=_date_arg, metavar="YYYY-MM-DD",
                   help="date in the default system prompt, for lines without a \"date\" key "
                        "(default: today, fixed at start)")
    p.add_argument("--thinking", action="store_true",
                   help="enable_thinking for lines that do not set it")
    p.add_argument("--generation-prompt", action="store_true",
                   help="add_generation_prompt for lines that do not set it")
    reasoning_option(p)
    p.add_argument("--keep", type=_key_list, action="append", metavar="KEYS",
                   help="copy these keys (comma-separated; Parquet: columns) of each input "
                        'line into its output record: {"id": ..., "text": ...}')
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--text", action="store_true",
                       help="write the raw texts, each followed by a newline (to read or "
                            "grep; not lossless, since texts contain newlines)")
    shape.add_argument("--spans", action="store_true",
                       help='write {"text": ..., "spans": [[start, end], ...]} a line: the '
                            "text and the character ranges the model produced (loss masks)")
    p.set_defaults(func=_cmd_render)

    formats = ("auto", "jsonl", "raw", "parquet")
    p = sub.add_parser("parse", help="parse rendered text back to JSONL conversations",
                       description="Parse rendered conversations back to messages.",
                       epilog=_PARSE_EXAMPLES, formatter_class=_Formatter)
    common(p, conv_lines=False)
    p.add_argument("--lenient", action="store_true",
                   help="recover from malformed or truncated text (model output); what was "
                        "recovered from is reported as warnings")
    p.add_argument("--keep", type=_key_list, action="append", metavar="KEYS",
                   help="copy these keys (comma-separated; Parquet: columns) of each input "
                        "line into its output record, before the conversation's keys")
    p.add_argument("--format", choices=formats, default="auto",
                   help="input format (default: auto: Parquet by its magic bytes, else JSONL "
                        "if the first non-blank line is JSON, else raw)")
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("completions", help="read model completions: reasoning, content, tool calls",
                       description="Read model completions (what a model wrote after the "
                                   "generation prompt) into reasoning, content, tool calls and "
                                   "how they ended, one output record per input line.",
                       epilog=_COMPLETIONS_EXAMPLES, formatter_class=_Formatter)
    common(p, conv_lines=False)
    p.add_argument("--openai", action="store_true",
                   help='write {"message": ..., "finish_reason": ...}: OpenAI chat messages')
    p.add_argument("--keep", type=_key_list, action="append", metavar="KEYS",
                   help="copy these keys (comma-separated; Parquet: columns) of each input "
                        "line into its output record, before the completion's keys")
    p.set_defaults(func=_cmd_completions)

    p = sub.add_parser("validate", help="check conversations or rendered texts",
                       description="Check every line and report each problem; exit 1 if any.",
                       epilog=_VALIDATE_EXAMPLES, formatter_class=_Formatter)
    common(p, output=False, skip=False)
    p.add_argument("--lenient", action="store_true",
                   help="parse rendered text leniently (recoveries become warnings)")
    reasoning_option(p)
    p.add_argument("--format", choices=formats, default="auto",
                   help="input format (default: auto)")
    p.set_defaults(func=_cmd_validate, date=None)

    p = sub.add_parser("dialects", help="list the dialects",
                       description="List the dialects (format versions) with a description.")
    p.set_defaults(func=_cmd_dialects)
    return parser


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _Terminated(BaseException):
    """SIGTERM (a job scheduler stopping us), SIGHUP (the terminal or the ssh session
    went away) or SIGQUIT (Ctrl-\\) arrived: unwind like Ctrl-C, so the temp output
    file and the workers' parts are removed; exit 128 + the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: The signals that stop a command as Ctrl-C does, and what the command then says.
_STOP_SIGNALS = {"SIGTERM": "terminated", "SIGHUP": "hung up", "SIGQUIT": "quit"}


#: The last stop signal ``_raise_terminated`` turned into ``_Terminated`` during this
#: command (0: none), in case something swallowed the exception (``_check_terminated``).
_caught = 0

#: Whether this command's output file is being renamed into place or was: from then on
#: a stop signal no longer changes the outcome (``_committing``).
_committed = False


def _committing() -> None:
    """Called by ``atomic_output`` right before it renames the output into place: the
    command is as good as done, and a Ctrl-C or stop signal that comes from now on is
    ignored (it used to be reported as an interruption, exit 130/143, with the output
    replaced all the same). A signal handled before this call still stops the command,
    with the output untouched."""
    global _committed
    _committed = True


def _raise_terminated(signum, frame):
    global _caught
    if _committed:
        return
    _caught = signum
    raise _Terminated(signum)


def _raise_interrupt(signum, frame):
    """Ctrl-C while a command runs: ``KeyboardInterrupt``, as Python's own handler
    raises it, unless the output is being committed (``_committing``)."""
    if _committed:
        return
    raise KeyboardInterrupt


def _check_terminated() -> None:
    """Raise ``_Terminated`` again for a stop signal whose exception was swallowed:
    CPython reports and drops an exception raised in an after-fork hook, where a
    signal that other threads let through (``_signals_held`` holds it back only in
    this one) may be handled while a submit forks the workers."""
    if _caught:
        raise _Terminated(_caught)


#: What _signals_held holds back: Ctrl-C and the stop signals.
_HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", *_STOP_SIGNALS)
                      if hasattr(signal, name))


@contextlib.contextmanager
def _signals_held():
    """Hold Ctrl-C and the stop signals back while the block runs (where the platform
    can): a ``pool.submit`` that forks the workers runs the after-fork hooks of this
    process (logging's, for one), and CPython reports and drops an exception raised in
    them, so a signal handled there was lost and the command ran on. Held back, it
    arrives right after, in this code. (The workers inherit the mask: ``_worker_start``
    lets the signals through again.)"""
    if not hasattr(signal, "pthread_sigmask") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _catch_stop_signals() -> dict:
    """Turn the stop signals into :class:`_Terminated` while a command runs, and Ctrl-C
    into ``KeyboardInterrupt`` as Python does, both ignored once the output is being
    committed (only from the main thread, and only those nobody else handles). Returns
    the handlers to restore, by signal."""
    global _caught, _committed
    if threading.current_thread() is not threading.main_thread():
        return {}
    _caught = 0
    _committed = False
    previous = {}
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
    for name in _STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:  # (not on Windows)
            continue
        try:
            if signal.getsignal(signum) is signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise_terminated)
        except (ValueError, OSError):
            pass
    return previous


class _Messages:
    """``sys.stderr`` while a command runs: the problems, warnings, progress bar and
    summary go to the real stream until a write to it fails: whoever read it stopped
    (``2>&1 | head``), or it cannot be written at all (a descriptor open for reading
    only, as a shell script run with ``2>&-`` has its own file there; a full disk, an
    I/O error). From then on they go nowhere, as with a closed stderr, and the command
    goes on to its own end and status. (The broken pipe used to stop it with 141, the
    output not written; any other error writing stderr stopped it with a traceback,
    the output not written.) The descriptor is pointed at /dev/null then, so that
    nothing else that writes there (the exit flush of what the stream still holds, a
    warning from C code) fails, or prints "Exception ignored"."""

    def __init__(self, stream):
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except OSError:
                self._broke()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except OSError:
                self._broke()

    def _broke(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # (what it held goes to /dev/null now)

    def __getattr__(self, name):  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)


class _ClosedStdout:
    """``sys.stdout`` for a process started with its stdout closed: writing to it is
    the error every other unwritable output is (exit status 2)."""

    def _closed(self, *args):
        raise OSError(errno.EBADF, "standard output is closed")

    write = flush = fileno = _closed


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.
    ``exiting``: the process exits with that status next (:func:`program`), so once the
    output file is committed the stop signals stay ignored to the end (restored, a
    signal after ``main`` would still kill the process, with the new output in place).
    An error writing stderr (a broken pipe, a read-only descriptor) only silences
    stderr (``_Messages``); a broken pipe on stdout ends
    the command with 141."""
    err = sys.stderr
    if err is None or isinstance(err, _Messages):
        return _main(argv, exiting)
    sys.stderr = _Messages(err)
    try:
        return _main(argv, exiting)
    finally:
        sys.stderr = err


#: Errors of the system's resources, not of writing an output: too many open files,
#: no memory for a process. (Not EAGAIN: a full non-blocking stdout says it too.)
_NOT_WRITING = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM))


def _main(argv: list[str] | None, exiting: bool) -> int:
    global _committed
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    previous = _catch_stop_signals()
    # started with a standard stream closed (`<&-`, `>&-`, `2>&-`): stdin is reported
    # where it is read, stdout where it is written, and messages go nowhere
    closed_out, closed_err = sys.stdout is None, sys.stderr is None
    if closed_out:
        sys.stdout = _ClosedStdout()
    if closed_err:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        return args.func(args)
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return 130
    except _Terminated as exc:
        name = signal.Signals(exc.signum).name
        sys.stderr.write(f"\n{PROG}: {_STOP_SIGNALS.get(name, name)}\n")
        return 128 + exc.signum
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except (_io.InputError, _Usage, _WorkerDied) as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except ImportError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except OSError as exc:
        target = getattr(args, "output", None)
        if exc.filename is None and exc.errno in _NOT_WRITING:
            # (no output's error: a pipe or a process for a --jobs worker that could
            # not be made; it used to say "cannot write <stdout>" with -o -)
            sys.stderr.write(f"{PROG}: error: {exc.strerror or exc}\n")
            return 2
        # (stdout is named as stdin is: "cannot write <stdout>", not "cannot write")
        where = exc.filename or target if target not in (None, "-") else "<stdout>"
        sys.stderr.write(f"{PROG}: error: cannot write {where}: {exc.strerror or exc}\n")
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if exiting and _committed else handler)
        if threading.current_thread() is threading.main_thread():
            _committed = False  # (the command is over: the handlers are not its own)
        if closed_out:
            sys.stdout = None
        if closed_err:
            sys.stderr.close()
            sys.stderr = None


def program() -> None:
    """The ``apertus-fast`` program (the console script, ``python -m apertus_fast``):
    :func:`main`, then exit with its status."""
    sys.exit(main(exiting=True))


if __name__ == "__main__":  # pragma: no cover
    program()
