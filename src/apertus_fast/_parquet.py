"""Parquet in and out for the command line (optional: needs ``pyarrow``).

Training corpora are often kept as Parquet (Hugging Face datasets, Spark, Polars). The
commands read a Parquet file wherever they read JSONL: each row is what a JSONL line
would be, an object whose keys are the column names. They write Parquet when the output
path ends with ``.parquet``. See docs/cli.md, "Parquet".

How Arrow values become the dicts the renderer reads:

* A **struct** becomes a dict **without its null fields**. Arrow stores every field of a
  column's struct type in every row (a user message of a column whose messages may carry
  ``tool_calls`` has ``tool_calls: null``), so a null field cannot be told from an absent
  one, and absent is what it nearly always means. (axolotl does the same with the
  messages of Hugging Face datasets.) An explicit JSON ``null`` therefore needs a JSON
  column, below.
* A **map** becomes a dict (keys in stored order; a null value stays ``None``: a map
  stores only the keys it has).
* A **string or binary column** named ``messages`` or ``tools`` holds **JSON text**, one
  value a row, and is decoded: that is how heterogeneous conversations are stored
  (content as a string in one message and as blocks in the next cannot share one Arrow
  type), and how ``apertus-fast parse`` writes them.
* A ``date`` column of Arrow type ``date32``/``date64`` becomes ``"YYYY-MM-DD"``.
* Everything else is what ``pyarrow`` gives (``to_pylist``); a null top-level value is
  a missing key.

Only the columns a command uses are read (Parquet is columnar, so the others cost nothing).

Example::

    from apertus_fast import render
    from apertus_fast._parquet import read_parquet

    for row, conv in read_parquet("train.parquet"):
        text = render(conv["messages"], tools=conv.get("tools"))
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from contextlib import suppress
from typing import Any, Callable, Iterator

from ._io import PARQUET_MAGIC as MAGIC
from ._io import InputError, InputFile, json_error_reason

__all__ = ["MAGIC", "is_parquet_path", "pyarrow_modules", "ParquetInput", "ParquetOutput",
           "read_parquet", "RENDER_SCHEMA", "SPANS_SCHEMA", "PARSE_SCHEMA"]

#: Columns whose string values are JSON text.
JSON_COLUMNS = frozenset({"messages", "tools"})
#: Rows converted at a time (the batches pyarrow hands over).
BATCH_ROWS = 1024
_INSTALL = "pip install 'apertus-fast[parquet]'"


def is_parquet_path(path) -> bool:
    """Whether an output path asks for Parquet (it ends with ``.parquet``)."""
    return path not in (None, "-") and os.fspath(path).lower().endswith(".parquet")


def pyarrow_modules():
    """``(pyarrow, pyarrow.parquet)``; raises ImportError saying how to install them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ImportError(f"Parquet needs pyarrow, which is not installed ({exc}); "
                          f"install it with: {_INSTALL}") from None
    return pyarrow, pyarrow.parquet


# --------------------------------------------------------------------------- reading


def _drop_nulls(fields):
    """A converter for a struct: its dict without null fields, children converted."""
    def convert(d):
        out = {}
        for name, child in fields:
            v = d[name]
            if v is not None:
                out[name] = v if child is None else child(v)
        return out
    return convert


def _converter(t) -> Callable[[Any], Any] | None:
    """How to turn ``to_pylist`` values of Arrow type ``t`` into what a JSON decoder
    would give; ``None`` when they are that already. Never called with ``None``."""
    import pyarrow.types as at

    if at.is_dictionary(t):
        return _converter(t.value_type)
    if at.is_struct(t):
        return _drop_nulls([(t.field(i).name, _converter(t.field(i).type))
                            for i in range(t.num_fields)])
    if at.is_map(t):
        child = _converter(t.item_type)
        if child is None:
            return lambda pairs: dict(pairs)
        return lambda pairs: {k: (None if v is None else child(v)) for k, v in pairs}
    if (at.is_list(t) or at.is_large_list(t) or at.is_fixed_size_list(t)
            or at.is_list_view(t) or at.is_large_list_view(t)):
        child = _converter(t.value_type)
        if child is None:
            return None
        return lambda items: [None if v is None else child(v) for v in items]
    return None


def _is_text(t) -> bool:
    import pyarrow.types as at

    if at.is_dictionary(t):
        t = t.value_type
    return (at.is_string(t) or at.is_large_string(t) or at.is_string_view(t)
            or at.is_binary(t) or at.is_large_binary(t) or at.is_binary_view(t))


def _json_text(value):
    """A JSON column's value decoded; raises ValueError with a one-line reason."""
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise ValueError(json_error_reason(exc)) from None


def _iso_date(value):
    return value.isoformat() if isinstance(value, _dt.date) else value


def _utf8(value):
    """A binary ``text`` column's value as str; raises ValueError if not UTF-8."""
    if type(value) is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"invalid UTF-8 at byte {exc.start + 1}: {exc.reason}") from None
    return value


class ParquetInput:
    """A Parquet file (or stdin holding one) read row by row.

    ``inp`` is an :class:`~apertus_fast._io.InputFile` whose content starts with
    :data:`MAGIC`. A regular file is read in place (Parquet needs its footer first);
    anything else (a pipe) is read into memory. Raises :class:`InputError` when it is
    not a valid Parquet file.
    """

    def __init__(self, inp: InputFile):
        pa, pq = pyarrow_modules()
        self.name = inp.name
        self._errors = (pa.ArrowException, OSError)
        raw = inp.raw
        try:
            source = raw if inp.size is not None and raw.seekable() else pa.BufferReader(raw.read())
            self._file = pq.ParquetFile(source)
            self.schema = self._file.schema_arrow
        except self._errors as exc:
            raise InputError(f"cannot read {inp.name} as Parquet: {exc}") from exc
        self.columns: list[str] = list(self.schema.names)
        self.num_rows: int = self._file.metadata.num_rows
        #: Rows handed out so far (for a progress bar).
        self.rows_done = 0

    def require(self, *alternatives: str) -> None:
        """Raise :class:`InputError` unless one of these columns exists."""
        if not any(c in self.columns for c in alternatives):
            wanted = " or ".join(f'"{c}"' for c in alternatives)
            have = ", ".join(self.columns) or "none"
            raise InputError(f"{self.name} has no {wanted} column (its columns: {have})")

    def _column_converter(self, name: str, t):
        if name in JSON_COLUMNS and _is_text(t):
            return _json_text
        if name == "text" and _is_text(t):
            return _utf8
        if name == "date":
            return _iso_date
        return _converter(t)

    def rows(self, columns, on_error: Callable[[int, str], None]) -> Iterator[tuple[int, dict]]:
        """``(row number, dict)`` for each row (numbers from 1), holding those of
        ``columns`` that the file has and that are not null in the row. A value that
        cannot be converted (bad JSON text) is reported with ``on_error(row, reason)``
        and its row skipped."""
        present = [c for c in dict.fromkeys(columns) if c in self.columns]
        convert = [self._column_converter(c, self.schema.field(c).type) for c in present]
        row = 0
        try:
            for batch in self._file.iter_batches(batch_size=BATCH_ROWS, columns=present,
                                                 use_threads=False):
                values = [batch.column(i).to_pylist() for i in range(len(present))]
                for i in range(batch.num_rows):
                    row += 1
                    self.rows_done = row
                    out = {}
                    try:
                        for name, column, conv in zip(present, values, convert):
                            v = column[i]
                            if v is not None:
                                out[name] = v if conv is None else conv(v)
                    except ValueError as exc:
                        on_error(row, f'column "{name}": {exc}')
                        continue
                    yield row, out
        except self._errors as exc:
            raise InputError(f"cannot read {self.name} (row {row + 1}): {exc}") from exc


def read_parquet(path, columns=None) -> Iterator[tuple[int, dict]]:
    """Yield ``(row number, dict)`` for each row of a Parquet file, converted as this
    module describes (``columns``: the columns to read, default all). Raises
    :class:`InputError` if it cannot be read and ``ValueError`` at the first row whose
    JSON column is not valid JSON."""
    def fail(row, reason):
        raise ValueError(f"{os.fspath(path)}: row {row}: {reason}")

    with InputFile(path) as f:
        src = ParquetInput(f)
        yield from src.rows(src.columns if columns is None else columns, fail)


# --------------------------------------------------------------------------- writing


def _schema(pa, kind: str):
    if kind == "render":
        return pa.schema([("text", pa.string())])
    if kind == "spans":
        return pa.schema([("text", pa.string()), ("spans", pa.list_(pa.list_(pa.int64())))])
    if kind == "parse":
        return pa.schema([
            ("messages", pa.string()), ("dialect", pa.string()),
            ("enable_thinking", pa.bool_()), ("add_generation_prompt", pa.bool_()),
            ("continue_assistant_message", pa.bool_()), ("tools_text", pa.string()),
            ("tool_names", pa.list_(pa.string())), ("bos_token", pa.string()),
            ("date", pa.string()), ("format", pa.string()), ("warnings", pa.list_(pa.string())),
        ])
    raise ValueError(kind)


RENDER_SCHEMA, SPANS_SCHEMA, PARSE_SCHEMA = "render", "spans", "parse"


def _encodable(value) -> bool:
    """Whether every string in a row value can be written as UTF-8."""
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if type(value) is list:
        return all(_encodable(v) for v in value)
    return True


class ParquetOutput:
    """Rows written to a Parquet file, one row group per ``group_rows`` rows or
    ``group_bytes`` characters of text, whichever comes first.

    ``kind`` picks the columns: ``"render"`` (``text``), ``"spans"`` (``text``,
    ``spans`` as ``[[start, end], ...]``) or ``"parse"`` (the fields of
    ``ParsedConversation.to_dict()``, with ``messages`` as JSON text). ``f`` is a binary
    file (from ``atomic_output``). Parquet strings are UTF-8, which cannot hold lone
    surrogates: a JSON column escapes them (``\\ud800``, lossless); any other string
    column with one makes its row fail, reported with ``on_error(row, reason)``.
    :attr:`written` counts the rows written. Use it as a context manager (which closes
    it, or aborts it on an exception), or call :meth:`close` to finish the file.
    """

    def __init__(self, f, kind: str, on_error: Callable[[int, str], None],
                 group_rows: int = 10_000, group_bytes: int = 64 << 20):
        pa, pq = pyarrow_modules()
        self._pa = pa
        self.schema = _schema(pa, kind)
        self._names = self.schema.names
        self._json = {i for i, n in enumerate(self._names) if n == "messages"}
        self._writer = pq.ParquetWriter(f, self.schema)
        self._on_error = on_error
        self._group_rows = group_rows
        self._group_bytes = group_bytes
        self._rows: list[tuple[int, tuple]] = []
        self._chars = 0
        self.written = 0

    def add(self, row: int, values: tuple) -> None:
        """Queue one row: ``values`` in the schema's column order (a ``"parse"`` row's
        ``messages`` as the Python value, encoded here)."""
        if self._json:
            values = tuple(json.dumps(v, ensure_ascii=False) if i in self._json else v
                           for i, v in enumerate(values))
        self._rows.append((row, values))
        self._chars += len(values[0]) if type(values[0]) is str else 0
        if len(self._rows) >= self._group_rows or self._chars >= self._group_bytes:
            self.flush()

    def add_dict(self, row: int, d: dict) -> None:
        """Queue one row given as a dict keyed by column name (missing keys: null)."""
        self.add(row, tuple(d.get(n) for n in self._names))

    def flush(self) -> None:
        rows, self._rows, self._chars = self._rows, [], 0
        if not rows:
            return
        pa = self._pa
        try:
            batch = self._batch([v for _, v in rows])
        except (UnicodeEncodeError, pa.ArrowInvalid):
            kept = []
            for row, values in rows:
                values = tuple(json.dumps(json.loads(v)) if i in self._json else v
                               for i, v in enumerate(values))  # ASCII escapes: lossless
                bad = [n for n, v in zip(self._names, values) if not _encodable(v)]
                if bad:
                    self._on_error(row, f'cannot write "{bad[0]}" to Parquet: it holds a lone '
                                        "surrogate (Parquet strings are UTF-8)")
                else:
                    kept.append(values)
            if not kept:
                return
            batch = self._batch(kept)
        self._writer.write_batch(batch)
        self.written += batch.num_rows

    def _batch(self, rows):
        pa = self._pa
        arrays = [pa.array([r[i] for r in rows], type=field.type)
                  for i, field in enumerate(self.schema)]
        return pa.record_batch(arrays, schema=self.schema)

    def close(self) -> None:
        """Write what is queued and the file's footer."""
        self.flush()
        self._writer.close()

    def abort(self) -> None:
        """Stop without writing what is queued. The writer is closed while its file is
        still open (pyarrow would otherwise close it when collected, writing to a
        closed file); what it leaves in the file is for the caller to throw away."""
        self._rows = []
        with suppress(Exception):
            self._writer.close()

    def __enter__(self) -> "ParquetOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
