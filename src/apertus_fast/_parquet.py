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
* A **string or binary column** (or one of an extension type stored as such, as
  ``extension<arrow.json>`` is) named ``messages`` or ``tools`` holds **JSON text**, one
  value a row, and is decoded: that is how heterogeneous conversations are stored
  (content as a string in one message and as blocks in the next cannot share one Arrow
  type), and how ``apertus-fast parse`` writes them. The JSON text ``null`` is a null value, as a
  null cell is.
* A ``date`` column of Arrow type ``date32``/``date64`` becomes ``"YYYY-MM-DD"``.
* Everything else is what ``pyarrow`` gives (``to_pylist``), but a nanosecond
  timestamp, time or duration that is not a whole microsecond (which pyarrow refuses to
  give, Python's types stopping at microseconds) is a :class:`Nanoseconds`: the int
  stored, with its ISO text. A null top-level value is a missing key.

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
from ._io import InputError, InputFile, Nanoseconds, json_error_reason, json_safe, loads_utf8

__all__ = ["MAGIC", "KINDS", "is_parquet_path", "pyarrow_modules", "ParquetInput",
           "ParquetOutput", "UnreadableRows", "Nanoseconds", "column_names", "read_parquet"]

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
        return _map_converter(_converter(t.item_type))
    if (at.is_list(t) or at.is_large_list(t) or at.is_fixed_size_list(t)
            or at.is_list_view(t) or at.is_large_list_view(t)):
        child = _converter(t.value_type)
        if child is None:
            return None
        return lambda items: [None if v is None else child(v) for v in items]
    return None


def _map_converter(child):
    """A converter for a map: its dict, values converted. A key that a dict cannot hold
    (a list or struct key: Arrow allows any type) is a ValueError, which fails its row."""
    def convert(pairs):
        try:
            if child is None:
                return dict(pairs)
            return {k: (None if v is None else child(v)) for k, v in pairs}
        except TypeError:
            for k, _ in pairs:
                try:
                    hash(k)
                except TypeError:
                    kind = {list: "a list", dict: "a struct"}.get(type(k), type(k).__name__)
                    raise ValueError(f"a map key is {kind}, which an object cannot have "
                                     "as a key") from None
            raise
    return convert


def _pylist_errors():
    """What ``to_pylist`` of a column may raise for values it cannot give (a struct
    with two fields of one name, a date out of Python's range)."""
    pa, _ = pyarrow_modules()
    return (pa.ArrowException, ValueError, TypeError, OverflowError, NotImplementedError)


def _column_values(column, errors) -> tuple[list, dict]:
    """``(values, {index: reason})``: a column's ``to_pylist``, or when that fails, its
    values one at a time, None (and the reason, on one line) for each that fails. A
    nanosecond timestamp, time or duration that Python's types cannot hold (which
    ``to_pylist`` refuses) is a :class:`Nanoseconds`."""
    try:
        return column.to_pylist(), {}
    except errors:
        pass
    exact = _nanos_reader(column.type)
    if exact is not None:
        as_int, convert = exact
        try:
            return [None if v is None else convert(v)
                    for v in column.cast(as_int).to_pylist()], {}
        except errors:
            pass
    values, failed = [], {}
    for i in range(len(column)):
        try:
            if exact is None:
                values.append(column[i].as_py())
            else:
                v = column.slice(i, 1).cast(as_int).to_pylist()[0]
                values.append(None if v is None else convert(v))
        except errors as exc:
            values.append(None)
            if isinstance(exc, UnicodeDecodeError):   # (a string column that is not UTF-8)
                failed[i] = f"invalid UTF-8 at byte {exc.start + 1}: {exc.reason}"
            else:
                failed[i] = _one_line(str(exc)) or type(exc).__name__
    return values, failed


def _is_nanos(t) -> bool:
    import pyarrow.types as at

    return (at.is_timestamp(t) or at.is_time64(t) or at.is_duration(t)) and t.unit == "ns"


def _is_list(t) -> bool:
    import pyarrow.types as at

    return (at.is_list(t) or at.is_large_list(t) or at.is_fixed_size_list(t)
            or at.is_list_view(t) or at.is_large_list_view(t))


def _nanos_reader(t):
    """``(type, converter)`` for a column of type ``t`` that holds nanosecond
    timestamps, times or durations (None when it holds none): ``t`` with each of them
    as int64, which the column is cast to, and what makes the ``to_pylist`` values of
    that cast (not None) into those pyarrow gives for ``t``, a :class:`Nanoseconds`
    where they have no Python value."""
    import pyarrow as pa
    import pyarrow.types as at

    if _is_nanos(t):
        return pa.int64(), _nanos_leaf(t)
    if at.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        inner = [_nanos_reader(f.type) for f in fields]
        if all(x is None for x in inner):
            return None
        convs = [(f.name, x[1]) for f, x in zip(fields, inner) if x is not None]

        def struct(d):
            for name, conv in convs:
                v = d[name]
                if v is not None:
                    d[name] = conv(v)
            return d
        return pa.struct([f if x is None else f.with_type(x[0])
                          for f, x in zip(fields, inner)]), struct
    if at.is_map(t):
        k, v = _nanos_reader(t.key_type), _nanos_reader(t.item_type)
        if k is None and v is None:
            return None
        kc = (lambda x: x) if k is None else k[1]
        vc = (lambda x: x) if v is None else v[1]
        as_int = pa.map_(t.key_field if k is None else t.key_field.with_type(k[0]),
                         t.item_field if v is None else t.item_field.with_type(v[0]),
                         keys_sorted=t.keys_sorted)
        return as_int, lambda pairs: [(kc(a), None if b is None else vc(b)) for a, b in pairs]
    if _is_list(t):
        inner = _nanos_reader(t.value_type)
        if inner is None:
            return None
        field = t.value_field.with_type(inner[0])
        if at.is_fixed_size_list(t):
            as_int = pa.list_(field, t.list_size)
        else:
            as_int = {"list": pa.list_, "large_list": pa.large_list, "list_view": pa.list_view,
                      "large_list_view": pa.large_list_view}[_list_kind(t)](field)
        conv = inner[1]
        return as_int, lambda items: [None if v is None else conv(v) for v in items]
    return None


def _list_kind(t) -> str:
    import pyarrow.types as at

    if at.is_large_list(t):
        return "large_list"
    if at.is_list_view(t):
        return "list_view"
    if at.is_large_list_view(t):
        return "large_list_view"
    return "list"


def _nanos_leaf(t):
    """What makes a nanosecond value of type ``t`` (an int) the value pyarrow gives
    (a whole number of microseconds), or a :class:`Nanoseconds`."""
    import pyarrow as pa
    import pyarrow.types as at

    if at.is_timestamp(t):
        micro = pa.timestamp("us", t.tz)
    elif at.is_time64(t):
        micro = pa.time64("us")
    else:
        micro = pa.duration("us")
    duration = at.is_duration(t)

    def convert(v):
        whole, nanos = divmod(v, 1000)
        value = pa.scalar(whole, micro).as_py()
        if not nanos:
            return value
        if duration:  # str of a timedelta: "[-D day[s], ]H:MM:SS[.ffffff]"
            text = str(value) + ("" if value.microseconds else ".000000") + f"{nanos:03d}"
        else:
            text = value.isoformat(timespec="microseconds")
            cut = text.index(".") + 7
            text = f"{text[:cut]}{nanos:03d}{text[cut:]}"
        return Nanoseconds(v, text)
    return convert


def _stored_type(t):
    """The type whose values a column of type ``t`` holds: a dictionary's values, an
    extension type's storage (pyarrow 19 and later read a string column annotated as
    JSON as ``extension<arrow.json>``, whose values are its JSON text)."""
    import pyarrow as pa
    import pyarrow.types as at

    while True:
        if at.is_dictionary(t):
            t = t.value_type
        elif isinstance(t, pa.BaseExtensionType):
            t = t.storage_type
        else:
            return t


def _is_binary(t) -> bool:
    import pyarrow.types as at

    t = _stored_type(t)
    return at.is_binary(t) or at.is_large_binary(t) or at.is_binary_view(t)


def _is_text(t) -> bool:
    import pyarrow.types as at

    t = _stored_type(t)
    return at.is_string(t) or at.is_large_string(t) or at.is_string_view(t) or _is_binary(t)


def _json_text(value):
    """A JSON column's value decoded (binary as UTF-8, as a JSONL line); raises
    ValueError with a one-line reason."""
    try:
        return loads_utf8(value)
    except (ValueError, RecursionError) as exc:
        raise ValueError(json_error_reason(exc, value)) from None


def _iso_date(value):
    # (a timestamp, a time or a duration too, whose text the date check then names,
    # the same for a whole column; one in nanoseconds is a Nanoseconds, an int, which
    # that check would call a number)
    if isinstance(value, (_dt.date, _dt.time)) or type(value) is Nanoseconds:
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    return value


def _utf8(value):
    """A binary column's value as str; raises ValueError if not UTF-8."""
    if type(value) is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"invalid UTF-8 at byte {exc.start + 1}: {exc.reason}") from None
    return value


def _one_line(message: str) -> str:
    """pyarrow's message on one line: whitespace runs as one space, other control
    characters (a damaged page's bytes quoted in it) as escapes."""
    text = " ".join(message.split())
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class UnreadableRows(InputError):
    """Rows of a Parquet file that cannot be read (a damaged page): ``row`` is the
    first of them (1-based), ``reason`` pyarrow's message (on one line)."""

    def __init__(self, name: str, row: int, reason: str):
        self.name = name
        self.row = row
        self.reason = reason
        super().__init__(f"cannot read {name} (row {row}): {reason}")

    def __reduce__(self):
        return type(self), (self.name, self.row, self.reason)


class ParquetInput:
    """A Parquet file (or stdin holding one) read row by row.

    ``inp`` is an :class:`~apertus_fast._io.InputFile` whose content starts with
    :data:`MAGIC`. A regular file is read in place (Parquet needs its footer first);
    a gzipped one is decompressed into an unnamed temporary file (in ``TMPDIR``, gone
    when it is closed or the process ends); anything else (a pipe) is read into
    memory. Raises :class:`InputError` when it is not a valid Parquet file.
    """

    def __init__(self, inp: InputFile):
        pa, pq = pyarrow_modules()
        self.name = inp.name
        self._errors = (pa.ArrowException, OSError)
        raw = inp.raw
        #: a gzipped file's decompressed copy (InputError if it cannot be made)
        self._temp = _decompressed(inp) if inp.compressed else None
        try:
            if self._temp is not None:
                source = self._temp
            elif inp.size is not None and raw.seekable():
                source = raw
            else:
                source = pa.BufferReader(raw.read())
            self._file = pq.ParquetFile(source)
            self.schema = self._file.schema_arrow
        except self._errors as exc:
            raise InputError(f"cannot read {inp.name} as Parquet: {exc}") from exc
        self.columns: list[str] = list(self.schema.names)
        self.num_rows: int = self._file.metadata.num_rows
        #: Rows handed out so far (for a progress bar).
        self.rows_done = 0
        self._groups: list[tuple[int, int]] | None = None

    def require(self, *alternatives: str) -> None:
        """Raise :class:`InputError` unless one of these columns exists."""
        if not any(c in self.columns for c in alternatives):
            wanted = " or ".join(f'"{c}"' for c in alternatives)
            have = ", ".join(self.columns) or "none"
            raise InputError(f"{self.name} has no {wanted} column (its columns: {have})")

    def rows(self, columns, on_error: Callable[[int, str], None]) -> Iterator[tuple[int, dict]]:
        """``(row number, dict)`` for each row (numbers from 1), holding those of
        ``columns`` that the file has and that are not null in the row. A value that
        cannot be converted (bad JSON text) is reported with ``on_error(row, reason)``
        and its row skipped."""
        for row, value, _ in self.rows_keeping(columns, (), on_error):
            yield row, value

    def rows_keeping(self, columns, keep, on_error: Callable[[int, str], None]
                     ) -> Iterator[tuple[int, dict, tuple]]:
        """:meth:`rows` with a third item: the values of the ``keep`` columns as pyarrow
        gives them, unconverted (``ParquetOutput`` writes them back with their Arrow
        types). Every ``keep`` column must exist (:meth:`require_all`)."""
        decoder = self.decoder(columns, keep)
        for first, batch in self.batches(decoder):
            yield from decoder.rows(first, batch, on_error)

    def decoder(self, columns, keep=()) -> "BatchDecoder":
        """What turns this file's record batches into the rows of :meth:`rows_keeping`
        (picklable: ``--jobs`` sends it to the workers with the batches)."""
        present = [c for c in dict.fromkeys(columns) if c in self.columns]
        read = list(dict.fromkeys(present + list(keep)))
        self.check_unique(read)
        return BatchDecoder(read, present, list(keep), [self.schema.field(c).type for c in present])

    def row_groups(self) -> list[tuple[int, int]]:
        """``(number of its first row, rows)`` of each row group, from the footer (read
        once: a worker asks for it with every row group it is handed)."""
        if self._groups is None:
            out, first = [], 1
            meta = self._file.metadata
            for i in range(meta.num_row_groups):
                n = meta.row_group(i).num_rows
                out.append((first, n))
                first += n
            self._groups = out
        return self._groups

    def runs(self) -> list[list[int]]:
        """The file's row groups as runs of consecutive ones (indices) of at least
        BATCH_ROWS rows each (but the last): how :meth:`batches` reads them, and what
        one ``--jobs`` task is when the workers read the file themselves."""
        out, run, rows = [], [], 0
        groups = self.row_groups()
        for i, (_first, n) in enumerate(groups):
            run.append(i)
            rows += n
            if rows >= BATCH_ROWS or i == len(groups) - 1:
                out.append(run)
                run, rows = [], 0
        return out

    def batches(self, decoder: "BatchDecoder", row_groups=None) -> Iterator[tuple[int, Any]]:
        """``(number of its first row, pyarrow.RecordBatch)`` for the file's rows (or
        those of the run ``row_groups``, indices as :meth:`runs` gives them), in
        batches of up to BATCH_ROWS rows, holding ``decoder``'s columns; a run at a
        time, so that reading the whole file and reading it a run a task (``--jobs``)
        give the same batches.

        A run that cannot be read through (a damaged page) is read again from its first
        row group not yet read through, one row group at a time, so that every row
        before the damage that can be read is given, in one process and with
        ``--jobs`` alike; then :class:`UnreadableRows` names the first row not given."""
        for run in (self.runs() if row_groups is None else [list(row_groups)]):
            yield from self._run_batches(decoder, run)

    def _run_batches(self, decoder, run) -> Iterator[tuple[int, Any]]:
        groups = self.row_groups()
        row = groups[run[0]][0] - 1  # the last row given
        try:
            for batch in self._file.iter_batches(batch_size=BATCH_ROWS, columns=decoder.read,
                                                 row_groups=run, use_threads=False):
                yield row + 1, batch
                row += batch.num_rows
                self.rows_done = row
            return
        except self._errors:
            pass
        for i in run:
            at, n = groups[i]  # (the number of the first row of the next batch)
            if at + n - 1 <= row:
                continue
            try:
                for batch in self._file.iter_batches(batch_size=BATCH_ROWS, columns=decoder.read,
                                                     row_groups=[i], use_threads=False):
                    end = at + batch.num_rows
                    if end - 1 > row:
                        yield row + 1, batch.slice(row + 1 - at) if at <= row else batch
                        row = end - 1
                        self.rows_done = row
                    at = end
            except self._errors as exc:
                raise UnreadableRows(self.name, row + 1, _one_line(str(exc))) from exc

    def check_unique(self, columns) -> None:
        """Raise :class:`InputError` if one of these columns has a name the file uses
        twice (which one is meant cannot be told)."""
        for c in columns:
            n = self.columns.count(c)
            if n > 1:
                raise InputError(f'{self.name} has {n} columns named "{c}": which one is '
                                 "meant cannot be told")

    def require_all(self, columns) -> None:
        """Raise :class:`InputError` unless every one of these columns exists."""
        missing = [c for c in columns if c not in self.columns]
        if missing:
            have = ", ".join(self.columns) or "none"
            raise InputError(f"{self.name} has no column " + ", ".join(f'"{c}"' for c in missing)
                             + f" to keep (its columns: {have})")

    def field_types(self, columns) -> list:
        """The Arrow types of these columns."""
        return [self.schema.field(c).type for c in columns]


def _decompressed(inp: InputFile):
    """A gzipped input decompressed into an unnamed temporary file (Parquet is read
    from its end, which a gzip stream cannot seek to), at its start. Raises
    :class:`InputError` for a corrupt stream or a temporary file that cannot be
    written (a full ``TMPDIR``)."""
    import tempfile

    try:
        temp = tempfile.TemporaryFile(prefix="apertus-fast-")
    except OSError as exc:
        raise InputError(f"cannot read {inp.name}: cannot make a temporary file to "
                         f"decompress it into: {exc.strerror or exc}") from exc
    try:
        while True:
            data = inp.read_block(1 << 20)  # (InputError for a corrupt gzip stream)
            if not data:
                break
            try:
                temp.write(data)
            except OSError as exc:
                raise InputError(f"cannot read {inp.name}: cannot decompress it into a "
                                 f"temporary file: {exc.strerror or exc}") from exc
        temp.seek(0)
    except BaseException:
        temp.close()
        raise
    return temp


def _column_converter(name: str, t):
    """How a column's ``to_pylist`` values become what the commands read (None: as
    they are): JSON text decoded, binary as UTF-8 text (every column a command reads
    as a string: ``text``, ``completion``, ``prompt``, ``tools_text``, ...), dates as
    ISO text."""
    if name in JSON_COLUMNS and _is_text(t):
        return _json_text
    if _is_binary(t):
        return _utf8
    if name == "date":
        return _iso_date
    return _converter(t)


class BatchDecoder:
    """Turns a record batch of the ``read`` columns into rows: ``(row number, dict of
    the ``present`` columns that are not null, converted; tuple of the ``keep`` columns'
    values as pyarrow gives them)``. Picklable (the Arrow types are; the converters are
    made again where it is used), so that ``--jobs`` workers decode their own batches."""

    def __init__(self, read: list, present: list, keep: list, types: list):
        self.read = read
        self.present = present
        self.keep = keep
        self.types = types
        self._convert = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_convert"}

    def __setstate__(self, state):
        self.__dict__.update(state, _convert=None)

    def rows(self, first: int, batch, on_error: Callable[[int, str], None]
             ) -> Iterator[tuple[int, dict, tuple]]:
        """The rows of ``batch``, numbered from ``first``. A value that cannot be
        converted (bad JSON text) is reported with ``on_error(row, reason)`` and its
        row skipped."""
        if self._convert is None:
            self._convert = [_column_converter(c, t) for c, t in zip(self.present, self.types)]
        at = {c: i for i, c in enumerate(self.read)}
        present = [(c, at[c], conv) for c, conv in zip(self.present, self._convert)]
        kept = [at[c] for c in self.keep]
        errors = _pylist_errors()
        values, failed = [], {}
        for j, name in enumerate(self.read):
            column, bad = _column_values(batch.column(j), errors)
            values.append(column)
            for i, reason in bad.items():  # (the first column that fails, for each row)
                failed.setdefault(i, f'column "{name}": {reason}')
        row = first - 1
        for i in range(batch.num_rows):
            row += 1
            if failed and i in failed:
                on_error(row, failed[i])
                continue
            out = {}
            try:
                for name, j, conv in present:
                    v = values[j][i]
                    if v is not None:
                        if conv is not None:
                            v = conv(v)
                            if v is None:  # JSON text "null": a null value, as a null cell
                                continue
                        out[name] = v
            except ValueError as exc:
                on_error(row, f'column "{name}": {exc}')
                continue
            yield row, out, tuple(values[j][i] for j in kept)


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

#: The columns each kind of output table starts with, and their types (``"messages"``
#: is JSON text).
_KIND_COLUMNS = {
    "render": (("text", "string"),),
    "spans": (("text", "string"), ("spans", "spans")),
    "parse": (("messages", "json"), ("dialect", "string"), ("enable_thinking", "bool"),
              ("add_generation_prompt", "bool"), ("continue_assistant_message", "bool"),
              ("tools_text", "string"), ("tool_names", "strings"), ("bos_token", "string"),
              ("date", "string"), ("format", "string"), ("warnings", "strings")),
    "completions": (("content", "string"), ("reasoning", "string"), ("tool_calls", "calls"),
                    ("tool_outputs", "strings"), ("finish_reason", "string"), ("closed", "bool"),
                    ("messages", "json"), ("warnings", "strings"), ("rest", "string")),
    "openai": (("message", "json"), ("finish_reason", "string")),
}
KINDS = tuple(_KIND_COLUMNS)


def _arrow_type(pa, name: str):
    """The Arrow type of a column type name ("json": JSON text in a string column)."""
    return {"string": pa.string, "json": pa.string, "bool": pa.bool_,
            "strings": lambda: pa.list_(pa.string()),
            "spans": lambda: pa.list_(pa.list_(pa.int64())),
            "calls": lambda: pa.list_(pa.struct([("name", pa.string()),
                                                 ("arguments", pa.string())]))}[name]()


def column_names(kind: str) -> list[str]:
    """The column names of a ``kind`` table, in order."""
    return [name for name, _ in _KIND_COLUMNS[kind]]


#: A row group of ParquetOutput ends after this many rows, or once its rows hold this
#: many characters of text (:func:`_text_size`), whichever comes first.
GROUP_ROWS = 10_000
GROUP_CHARS = 16 << 20


def _text_size(values) -> int:
    """The characters of text that these values hold: their strings (bytes count one a
    byte), also inside lists and dicts (kept values), keys left out."""
    n = 0
    stack = list(values)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str or t is bytes:
            n += len(v)
        elif t is list or t is tuple:
            stack.extend(v)
        elif t is dict:
            stack.extend(v.values())
    return n


def _holds(value, stored) -> bool:
    """Whether ``stored`` (what Arrow gives back) is the JSON value ``value``: pyarrow
    converts without a word a fraction to an integer column (1.5 becomes 1), ``true``
    to a double, a string to a list column (its characters), and a struct column drops
    the keys it has no field for. Numbers compare by value (an integer in a double
    column is that double), and a struct's fields that the value lacks are null."""
    stack = [(value, stored)]
    while stack:
        a, b = stack.pop()
        ta, tb = type(a), type(b)
        if a is None or ta is bool or tb is bool:
            if a is not b:
                return False
        elif ta is int or ta is float:
            if not (tb is int or tb is float) or (a != b and not (a != a and b != b)):
                return False
        elif ta is str:
            if tb is not str or a != b:
                return False
        elif ta is list:
            if tb is not list or len(a) != len(b):
                return False
            stack.extend(zip(a, b))
        elif ta is dict:
            if tb is not dict or any(k not in b for k in a):
                return False
            if any(v is not None for k, v in b.items() if k not in a):
                return False  # (no such key can come back)
            stack.extend((v, b[k]) for k, v in a.items())
        elif a != b:  # (values from Python callers: whatever they compare as)
            return False
    return True


def _excerpt(value) -> str:
    """A value as JSON, cut to about 40 characters, for a message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _without_surrogates(value):
    """A JSON value with every lone surrogate replaced (by ``?``), to infer its type:
    a string that holds one has no UTF-8, and fails its own row."""
    t = type(value)
    if t is str:
        return value.encode("utf-8", "replace").decode("utf-8")
    if t is list:
        return [_without_surrogates(v) for v in value]
    if t is dict:
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _holds_nothing(t) -> bool:
    """Whether an inferred type has a part that can hold no value: a list of nulls or a
    struct without fields (values that were all ``[]`` or ``{}``)."""
    import pyarrow.types as at

    if at.is_null(t) or (at.is_struct(t) and t.num_fields == 0):
        return True
    if at.is_struct(t):
        return any(_holds_nothing(t.field(i).type) for i in range(t.num_fields))
    if at.is_list(t) or at.is_large_list(t):
        return _holds_nothing(t.value_type)
    return False


#: Levels of schema (the root counts one) that pyarrow reads a Parquet file with at most:
#: it refuses a deeper one ("Parquet schema too deeply nested"). A column of 49 nested
#: lists, or of 98 nested structs, is the deepest it reads (:func:`_schema_depth`).
PARQUET_MAX_DEPTH = 100


def _schema_depth(t) -> int:
    """The levels of Parquet schema a column of Arrow type ``t`` takes below the root:
    one for a value or a struct, two for a list or a map (its repeated group)."""
    import pyarrow.types as at

    deepest = 0
    stack = [(t, 1)]
    while stack:
        t, depth = stack.pop()
        if at.is_struct(t):
            stack.extend((t.field(i).type, depth + 1) for i in range(t.num_fields))
        elif at.is_map(t):
            stack.extend(((t.key_type, depth + 2), (t.item_type, depth + 2)))
        elif (at.is_list(t) or at.is_large_list(t) or at.is_fixed_size_list(t)
              or at.is_list_view(t) or at.is_large_list_view(t)):
            stack.append((t.value_type, depth + 2))
        deepest = max(deepest, depth)
    return deepest


class _Unfit(ValueError):
    """A value that Arrow would store as another value (:func:`_holds`)."""


#: JSON text as json.dumps writes it (json.dumps makes an encoder a call), but for NaN
#: and ±Infinity, which it writes as bare ``NaN`` / ``Infinity`` (not JSON): a value
#: holding one is written as :func:`~apertus_fast._io.json_safe` makes it, with null
#: there, as in a JSONL output (:func:`_json_dumps`).
_ENCODE_UNICODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_ENCODE_ASCII = json.JSONEncoder(allow_nan=False).encode


def _json_dumps(value, encode) -> str:
    try:
        return encode(value)
    except ValueError:  # ("Out of range float values are not JSON compliant")
        return encode(json_safe(value))


def _row_values(names: list, d: dict, kept: tuple) -> tuple:
    """A row given as a dict keyed by the leading column names (a missing key is null),
    then the ``keep`` values, as the tuple of its columns."""
    n = len(names) - len(kept)
    return tuple(d.get(name) for name in names[:n]) + tuple(kept)


class RowEncoder:
    """Rows to a record batch of known column types: JSON-text columns encoded, every
    value converted by pyarrow. A row that cannot be written as it is is tried with its
    JSON text ASCII-escaped (a lone surrogate becomes ``\\ud800``, losslessly), and
    otherwise fails alone; the other rows are written as they are. Picklable, so that
    ``--jobs`` workers prepare their rows (:meth:`prepare`) for
    :meth:`ParquetOutput.add_prepared`."""

    def __init__(self, names: list, types: list, json_columns, exact=()):
        self.names = list(names)
        self.types = list(types)
        self.json = frozenset(json_columns)
        #: columns whose type was inferred from JSON values: a value must come back as
        #: it was (_holds); a string column need not be checked (pyarrow refuses
        #: anything but text there)
        pa, _ = pyarrow_modules()
        self.exact = frozenset(i for i in exact if i not in self.json
                               and not pa.types.is_string(self.types[i]))

    def encoded(self, values: tuple, ascii: bool = False, columns=None) -> tuple:
        """``values`` with those of the JSON-text columns (or of ``columns``) as JSON
        text, ASCII-escaped with ``ascii``."""
        columns = self.json if columns is None else columns
        if not columns:
            return values
        encode = _ENCODE_ASCII if ascii else _ENCODE_UNICODE
        out = list(values)
        for i in columns:
            if out[i] is not None:
                out[i] = _json_dumps(out[i], encode)
        return tuple(out)

    def sized(self, values: tuple) -> tuple:
        """``(values encoded, characters of text they hold)``: the JSON-text columns'
        JSON text (the encoding :meth:`encode` needs anyway) counted by its length, the
        strings of the other columns also in lists and dicts (:func:`_text_size`).
        What bounds a row group besides its rows: the memory it holds until it is
        written."""
        encoded = self.encoded(values)
        n = 0
        for v in encoded:
            t = type(v)
            if t is str or t is bytes:
                n += len(v)
            elif v and (t is list or t is dict or t is tuple):
                n += _text_size((v,))
        return encoded, n

    def batch(self, rows: list):
        """The rows as a record batch; raises what pyarrow raises, or :class:`_Unfit`
        when a value of an inferred column would be stored as another."""
        pa, _ = pyarrow_modules()
        arrays = []
        for i, t in enumerate(self.types):
            values = [r[i] for r in rows]
            array = pa.array(values, type=t)
            if i in self.exact and not _holds(values, array.to_pylist()):
                raise _Unfit(self.names[i])
            arrays.append(array)
        return pa.record_batch(arrays, names=self.names)

    def why(self, values: tuple) -> str:
        """Why one row cannot be written: the first column that fails, and how."""
        pa, _ = pyarrow_modules()
        for i, (name, t, v) in enumerate(zip(self.names, self.types, values)):
            try:
                array = pa.array([v], type=t)
            except UnicodeEncodeError:
                return (f'cannot write "{name}" to Parquet: it holds a lone surrogate '
                        "(Parquet strings are UTF-8)")
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                return f'cannot write "{name}" to Parquet as {t}: {exc}'
            stored = array.to_pylist()[0]
            if i in self.exact and not _holds(v, stored):
                return (f'cannot write "{name}" to Parquet as {t}: {_excerpt(v)} would be '
                        f"stored as {_excerpt(stored)}")
        return "cannot write the row to Parquet"  # pragma: no cover - every column passed

    def encode(self, rows: list, done=frozenset()) -> tuple:
        """``(record batch of the rows that can be written or None, [(row, reason)]
        for those that cannot, in order)`` for ``rows`` of ``(row, values, encoded)``:
        ``encoded`` is ``values`` with the JSON-text columns ``done`` encoded already
        (:meth:`sized`)."""
        pa, _ = pyarrow_modules()
        failures = (UnicodeEncodeError, pa.ArrowException, TypeError, ValueError, OverflowError)
        rest = self.json - done
        if rest:
            rows = [(row, values, self.encoded(encoded, columns=rest))
                    for row, values, encoded in rows]
        try:
            return self.batch([encoded for _, _, encoded in rows]), []
        except failures:
            pass
        kept, failed = [], []
        for row, values, encoded in rows:
            for ascii in (False, True):
                if ascii:
                    encoded = self.encoded(values, ascii=True)
                try:
                    self.batch([encoded])
                except failures:
                    continue
                kept.append(encoded)
                break
            else:
                failed.append((row, self.why(encoded)))
        return (self.batch(kept) if kept else None), failed

    def prepare(self, rows: list) -> tuple:
        """In a worker: the rows a handler added (``(row, values)`` or ``(row, dict,
        kept)``) as ``(record batch or None, [(row, characters of text it holds,
        None or why it fails)])`` for :meth:`ParquetOutput.add_prepared`."""
        rows = [(r[0], r[1] if len(r) == 2 else _row_values(self.names, r[1], r[2])) for r in rows]
        sized = [(row, values, *self.sized(values)) for row, values in rows]
        batch, failed = self.encode([r[:3] for r in sized], self.json)
        reasons = dict(failed)
        return batch, [(row, n, reasons.get(row)) for row, _, _, n in sized]


class ParquetOutput:
    """Rows written to a Parquet file, one row group per ``group_rows`` rows or
    ``group_chars`` characters of text (the strings the rows hold, the JSON text of
    JSON-text columns: :meth:`RowEncoder.sized`), whichever comes first: the queued
    rows, their Arrow copy and the writer's pages are what the output holds in memory.

    ``kind`` picks the columns: ``"render"`` (``text``), ``"spans"`` (``text``,
    ``spans`` as ``[[start, end], ...]``), ``"parse"`` (the fields of
    ``ParsedConversation.to_dict()``, with ``messages`` as JSON text),
    ``"completions"`` (a ``Completion``'s fields: ``tool_calls`` as a list of
    ``{name, arguments}`` structs, ``messages`` as JSON text) or ``"openai"``
    (``message`` as JSON text, ``finish_reason``). ``keep`` adds
    columns after those: ``(name, Arrow type)`` pairs, the type ``None`` when it is not
    known (values from JSONL): it is then inferred from the first row group (the type
    that holds each value as it is; string when the column is null in all of it, JSON
    text when its values have no common type, are all empty or nest deeper than
    Parquet readers read, :data:`PARQUET_MAX_DEPTH`), and later values that
    do not fit it fail their row, also those that pyarrow would store as another value
    (1.5 in an int64 column, a key a struct has no field for).

    ``f`` is a binary file (from ``atomic_output``). A row that cannot be written fails
    alone and is reported with ``on_error(row, reason)``: Parquet strings are UTF-8,
    which cannot hold lone surrogates (a JSON-text column escapes them, ``\\ud800``,
    losslessly; another string column with one fails its row). :attr:`written` counts
    the rows written. Use it as a context manager (which closes it, or aborts it on an
    exception), or call :meth:`close` to finish the file.
    """

    def __init__(self, f, kind: str, on_error: Callable[[int, str], None],
                 group_rows: int | None = None, group_chars: int | None = None, *, keep=()):
        pa, pq = pyarrow_modules()
        self._pa, self._pq = pa, pq
        if kind not in _KIND_COLUMNS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        columns = [(n, _arrow_type(pa, t)) for n, t in _KIND_COLUMNS[kind]] + list(keep)
        self._names = [name for name, _ in columns]
        if len(set(self._names)) != len(self._names):
            raise ValueError(f"duplicate column names: {self._names}")
        self._types = [t for _, t in columns]
        self._json = {i for i, (_n, t) in enumerate(_KIND_COLUMNS[kind]) if t == "json"}
        #: the columns whose type is inferred from the first row group
        self._inferred = {i for i, t in enumerate(self._types) if t is None}
        #: encodes the kind's JSON-text columns as rows come, and counts their text
        self._sizer = RowEncoder(self._names, self._types, frozenset(self._json))
        self._f = f
        self._writer = None  # made at the first write, when every type is known
        self._on_error = on_error
        self._group_rows = GROUP_ROWS if group_rows is None else group_rows
        self._group_chars = GROUP_CHARS if group_chars is None else group_chars
        self._rows: list[tuple[int, tuple, tuple]] = []  # (row, values, encoded)
        self._chars = 0
        # rows prepared by --jobs workers (add_prepared): slices of their record
        # batches, the rows that failed, and how many rows the group has so far
        self._slices: list = []
        self._failed: list[tuple[int, str]] = []
        self._count = 0
        self.written = 0

    def add(self, row: int, values: tuple) -> None:
        """Queue one row: ``values`` in column order (JSON-text columns as the Python
        values, encoded here)."""
        encoded, size = self._sizer.sized(values)
        self._rows.append((row, values, encoded))
        self._chars += size
        if len(self._rows) >= self._group_rows or self._chars >= self._group_chars:
            self.flush()

    def add_dict(self, row: int, d: dict, kept: tuple = ()) -> None:
        """Queue one row given as a dict keyed by the ``kind``'s column names (a missing
        key is null), then the ``keep`` values."""
        self.add(row, _row_values(self._names, d, kept))

    def row_encoder(self) -> "RowEncoder | None":
        """What turns rows into record batches, for ``--jobs`` workers to do it (see
        :meth:`add_prepared`); None when a column's type is inferred from the first
        row group (kept JSONL values: those rows come back as they are, and are
        counted and encoded here)."""
        if self._inferred:
            return None
        return RowEncoder(self._names, self._types, self._json)

    def add_prepared(self, prepared: tuple, before_row=None) -> None:
        """Queue rows that a worker's :meth:`RowEncoder.prepare` made into a record
        batch: the row groups end at the same rows, and the rows that fail are reported
        at the same flush, as if each row had come through :meth:`add`.
        ``before_row(row)``, if given, is called before a row completes a group (what
        the caller has to say about the lines up to it comes first)."""
        batch, infos = prepared
        start = taken = 0
        for row, chars, reason in infos:
            if reason is None:
                taken += 1
            else:
                self._failed.append((row, reason))
            self._count += 1
            self._chars += chars
            if self._count >= self._group_rows or self._chars >= self._group_chars:
                if before_row is not None:
                    before_row(row)
                if taken > start:
                    self._slices.append(batch.slice(start, taken - start))
                    start = taken
                self.flush()
        if taken > start:
            self._slices.append(batch.slice(start, taken - start))

    def _infer(self, rows) -> None:
        """Fix the types that are not known yet from the first rows."""
        pa = self._pa
        for i, t in enumerate(self._types):
            if t is not None:
                continue
            t = self._common_type([v[i] for _, v, _ in rows if v[i] is not None])
            if t is None:
                self._json.add(i)  # no common Arrow type: keep the values as JSON text
                t = pa.string()
            self._types[i] = t

    def _common_type(self, values: list):
        """The Arrow type that holds each of these JSON values as it is (string when
        there are none); None when there is none."""
        pa = self._pa
        failures = (pa.ArrowException, TypeError, ValueError, OverflowError)
        if not values:
            return pa.string()
        try:
            array = pa.array(values)
        except UnicodeEncodeError:
            # a lone surrogate ("\udc00" in the input) has no UTF-8: that row fails,
            # as it would in a later row group, and the others decide the type
            values = _without_surrogates(values)
            try:
                array = pa.array(values)
            except failures:
                return None
        except failures:
            return None
        if _holds_nothing(array.type) or not _holds(values, array.to_pylist()):
            return None  # (Arrow would change a value, or hold nothing more)
        if 1 + _schema_depth(array.type) > PARQUET_MAX_DEPTH:
            return None  # (the file could not be read back)
        return array.type

    def flush(self) -> None:
        """Write the queued rows as one row group."""
        if self._slices or self._failed:  # rows prepared by the workers
            slices, self._slices = self._slices, []
            failed, self._failed = self._failed, []
            self._count = self._chars = 0
            for row, reason in failed:
                self._on_error(row, reason)
            if slices:  # one row group, its columns contiguous as in a batch made here
                self._write(self._pa.Table.from_batches(slices).combine_chunks().to_batches()[0])
            return
        rows, self._rows, self._chars = self._rows, [], 0
        if not rows:
            return
        if self._writer is None:
            self._infer(rows)
        encoder = RowEncoder(self._names, self._types, self._json, self._inferred)
        batch, failed = encoder.encode(rows, self._sizer.json)
        for row, reason in failed:
            self._on_error(row, reason)
        if batch is not None:
            self._write(batch)

    def _write(self, batch) -> None:
        if self._writer is None:
            self._writer = self._pq.ParquetWriter(self._f, self._schema())
        self._writer.write_batch(batch)
        self.written += batch.num_rows

    def _schema(self):
        """The file's schema, from the column types this process holds, not from a
        batch's: a batch prepared by a ``--jobs`` worker comes back pickled, and pyarrow
        pickles a map or fixed-size list type without the names of its fields (a kept
        column's ``fixed_size_list<element: int32>`` came back as ``<item: int32>``),
        which changed the Arrow schema in the footer."""
        pa = self._pa
        return pa.schema([pa.field(name, t) for name, t in zip(self._names, self._types)])

    def close(self) -> None:
        """Write what is queued and the file's footer (an empty table if no row came)."""
        self.flush()
        if self._writer is None:
            self._types = [self._pa.string() if t is None else t for t in self._types]
            self._writer = self._pq.ParquetWriter(self._f, self._schema())
        self._writer.close()

    def abort(self) -> None:
        """Stop without writing what is queued. The writer is closed while its file is
        still open (pyarrow would otherwise close it when collected, writing to a
        closed file); what it leaves in the file is for the caller to throw away."""
        self._rows, self._slices, self._failed = [], [], []
        if self._writer is not None:
            with suppress(Exception):
                self._writer.close()

    def __enter__(self) -> "ParquetOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
