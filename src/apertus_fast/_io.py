"""I/O helpers for JSONL corpora, used by the command line and usable from Python.

* :class:`InputFile` / :func:`open_input`: a path (or ``"-"`` for stdin) read as bytes,
  line by line or whole, gunzipped transparently (recognised by its magic bytes, so
  ``.jsonl.gz`` works whatever its name), with its size and read position for progress.
* :func:`atomic_output`: a binary file that replaces ``path`` only on success (temp file
  in the same directory, fsync, ``os.replace``); ``"-"`` streams to stdout instead.
* :func:`read_jsonl` / :func:`write_jsonl` / :func:`json_line`: JSON Lines in and out.
* :class:`Progress`: a dependency-free progress line on a terminal's stderr.

Example::

    from apertus_fast import render
    from apertus_fast._io import read_jsonl, write_jsonl

    texts = (render(**rec) for _, rec in read_jsonl("corpus.jsonl.gz"))
    write_jsonl("rendered.jsonl", texts)
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import shutil
import stat
import sys
import threading
import time
import zlib
from contextlib import contextmanager, suppress
from itertools import accumulate
from typing import IO, Any, BinaryIO, Callable, Iterable, Iterator

from ._errors import ApertusError

__all__ = [
    "InputError",
    "JsonlError",
    "InputFile",
    "open_input",
    "atomic_output",
    "stdout_binary",
    "json_line",
    "json_loads",
    "MAX_NESTING",
    "NestingError",
    "read_jsonl",
    "write_jsonl",
    "Progress",
]

_GZIP_MAGIC = b"\x1f\x8b"
#: The first four bytes of a Parquet file (read by ``_parquet``, which needs pyarrow).
PARQUET_MAGIC = b"PAR1"
#: Default seconds between two redraws of a :class:`Progress` line.
PROGRESS_INTERVAL = 0.1
# json.dumps(obj, ensure_ascii=False) builds a JSONEncoder per call; reuse one (same output).
_ENCODE_UNICODE = json.JSONEncoder(ensure_ascii=False).encode
_ENCODE_ASCII = json.JSONEncoder().encode
_BOM = b"\xef\xbb\xbf"


#: How deeply a JSON line may nest arrays and objects: a line nested deeper is invalid
#: (:class:`NestingError`), whichever build reads it, wherever it is read from.
#: json.loads itself stops where Python's recursion limit does, which counts the frames
#: of its caller too: a line it read in one process failed in a ``--jobs`` worker, whose
#: stack is deeper. What is read must also survive what is done with it: pickling (a
#: ``--jobs`` worker sends kept values back) takes two levels of the recursion limit
#: per level of nesting, and failed from about 490 levels in a worker. 256 levels leave
#: room for that and for any caller at the default limit (1000); no conversation nests
#: that deep.
MAX_NESTING = 256


class NestingError(ValueError):
    """A JSON text nested deeper than :data:`MAX_NESTING`; ``pos`` is the index of the
    ``[`` or ``{`` that opens the level too many, ``colno`` its 1-based column."""

    def __init__(self, doc: str, pos: int):
        self.pos = pos
        self.colno = pos - doc.rfind("\n", 0, pos)
        super().__init__(f"nested deeper than {MAX_NESTING} levels at column {self.colno}")


# a JSON string (or what is left of one that is cut off), and what nests outside them
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.S)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_deep_lock = threading.Lock()


def _too_deep_at(text: str) -> int:
    """Where ``text`` opens a level of arrays and objects deeper than MAX_NESTING
    (outside strings), or -1."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(brackets) <= MAX_NESTING or max(accumulate(map(_STEP.__getitem__, brackets))) <= MAX_NESTING:
        return -1
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        step = _STEP.get(m.group())
        if step is not None:
            depth += step
            if depth > MAX_NESTING:
                return m.start()
    return -1  # pragma: no cover - the count above found one


def _deeper_than_the_limit(value) -> bool:
    """Whether a decoded JSON value nests deeper than MAX_NESTING (a walk over its
    arrays and objects, cheaper than looking through the text for them)."""
    if type(value) is not list and type(value) is not dict:
        return False
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        if depth > MAX_NESTING:
            return True
        depth += 1
        for child in (v.values() if type(v) is dict else v):
            t = type(child)
            if t is list or t is dict:
                push((child, depth))
    return False


def _json_loads(text: str):
    """``json.loads(text)`` of a text nested at most MAX_NESTING levels, whatever the
    caller's stack: on a RecursionError (a caller deep in its own recursion) it is
    read again with the recursion limit raised by that much."""
    try:
        return json.loads(text)
    except RecursionError:
        pass
    with _deep_lock:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + MAX_NESTING + 100)
        try:
            return json.loads(text)
        finally:
            sys.setrecursionlimit(limit)


def _loads_bracketed(text: str):
    """:func:`loads_text` of a text with more than MAX_NESTING brackets, which may nest
    deeper: what a reader that stops at MAX_NESTING levels gives, the first problem in
    the text winning (json's error, or the bracket that goes too deep)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        at = _too_deep_at(text[:exc.pos])
        if at >= 0:
            raise NestingError(text, at) from None
        raise
    except RecursionError:  # (too deep, or a caller deep in its own recursion)
        at = _too_deep_at(text)
        if at < 0:
            return _json_loads(text)
        try:
            _json_loads(text[:at])  # (nested MAX_NESTING deep at most)
        except json.JSONDecodeError as exc:
            if exc.pos < at:  # json's error comes first
                raise json.JSONDecodeError(exc.msg, text, exc.pos) from None
        raise NestingError(text, at) from None
    if _deeper_than_the_limit(value):
        raise NestingError(text, _too_deep_at(text))
    return value


def loads_text(text: str):
    """``json.loads(text)`` with a fixed limit on nesting: a text nested deeper than
    :data:`MAX_NESTING` raises :class:`NestingError` at the bracket that goes too deep,
    unless json finds an error before it (which is then raised). The same outcome
    whatever the caller's stack (json.loads alone reads as deep as the recursion limit
    lets it from where it is called). The nesting is only looked into for a text with
    more than MAX_NESTING brackets."""
    if len(text) > MAX_NESTING and text.count("[") + text.count("{") > MAX_NESTING:
        return _loads_bracketed(text)
    try:
        return json.loads(text)
    except RecursionError:  # (a caller deep in its own recursion)
        return _json_loads(text)


def loads_utf8(data):
    """``json.loads`` of a JSON line given as UTF-8 bytes (a ``str`` as it is), nested
    at most :data:`MAX_NESTING` levels deep (:func:`loads_text`).

    JSON Lines are UTF-8. ``json.loads(bytes)`` would guess UTF-16 or UTF-32 from the
    first bytes (a line starting ``FF FE``, or with a NUL as its second byte), and then
    report a wrong reason at a wrong place; here the bytes are decoded as UTF-8 (with
    ``"surrogatepass"``, as json.loads decodes them) and a leading UTF-8 BOM is skipped,
    as json.loads skips it. A ``UnicodeDecodeError``'s ``start`` counts the line's bytes
    from its first one, the BOM included."""
    if isinstance(data, str):
        text = data
    else:
        data = bytes(data)
        skip = 3 if data.startswith(_BOM) else 0
        try:
            text = data[skip:].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise UnicodeDecodeError("utf-8", data, exc.start + skip, exc.end + skip,
                                     exc.reason) from None
    # (loads_text, inline: this is every line's json.loads in a pure-Python install)
    if len(text) > MAX_NESTING and text.count("[") + text.count("{") > MAX_NESTING:
        return _loads_bracketed(text)
    try:
        return json.loads(text)
    except RecursionError:
        return _json_loads(text)


try:  # the compiled writer of the usual values (None for the rest), and the reader
    from ._jsonl import json_line as _json_line_fast
    from ._jsonl import loads as json_loads
except ImportError:  # pure-Python install: the json module writes and reads every line
    _json_line_fast = None
    json_loads = loads_utf8


def _count_newlines(data, start: int = 0, end: int | None = None) -> int:
    """``data.count(b"\\n", start, end)``: the newlines of (part of) bytes read."""
    return data.count(b"\n", start, len(data) if end is None else end)


try:  # 16 bytes a step (bytes.count goes a byte at a time): --jobs counts every line
    from ._jsonl import count_newlines
except ImportError:
    count_newlines = _count_newlines
#: What a corrupt or truncated gzip stream raises besides OSError.
_READ_ERRORS = (OSError, EOFError, zlib.error)


class InputError(OSError):
    """The input could not be read (missing file, permissions, corrupt gzip stream)."""


class JsonlError(ApertusError, ValueError):
    """A JSONL line that is not valid JSON; ``name`` and ``lineno`` (1-based) say where."""

    def __init__(self, name: str, lineno: int, reason: str):
        self.name = name
        self.lineno = lineno
        self.reason = reason
        super().__init__(f"{name}:{lineno}: {reason}")


class InputFile:
    """A binary input read line by line (iterate: ``bytes`` lines with their ``\\n``)
    or whole (:meth:`read`).

    ``path`` is a file path or ``"-"``/``None`` for stdin (``stdin`` overrides which
    stream). Gzip input is decompressed transparently. ``name`` is what to print in
    messages (``"<stdin>"`` for stdin); ``size`` is the size in bytes on disk when known
    (a regular file; compressed size for gzip), else ``None``; :meth:`position` is how
    many of those bytes have been consumed so far (for a progress bar). ``parquet`` says
    whether the content is a Parquet file (its magic bytes, gzipped or not), which
    ``_parquet`` reads from :attr:`raw` (or decompressed) instead of line by line.
    """

    def __init__(self, path: str | os.PathLike | None = "-", *, stdin: IO | None = None):
        self._owned = False
        self._error: InputError | None = None  # (read_block's, raised by its next call)
        if path is None or path == "-":
            stream = stdin if stdin is not None else sys.stdin
            if stream is None:  # the process was started with its stdin closed
                raise InputError("cannot read <stdin>: standard input is closed")
            raw = getattr(stream, "buffer", stream)
            self.name = "<stdin>"
        else:
            self.name = os.fspath(path)
            try:
                raw = open(path, "rb")  # noqa: SIM115 - closed in close()
            except OSError as exc:
                raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from exc
            self._owned = True
        self._raw = raw
        self._start = 0
        self.size: int | None = None
        try:
            st = os.fstat(raw.fileno())
            if stat.S_ISREG(st.st_mode):
                self._start = raw.tell()
                self.size = max(0, st.st_size - self._start)
        except (OSError, AttributeError, ValueError):
            pass
        head = _peek(raw, 4)
        self.compressed = head[:2] == _GZIP_MAGIC
        self._file: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if self.compressed else raw
        if self.compressed:  # (a gzipped Parquet file: the magic bytes inside)
            try:
                head = self._file.peek(4)[:4]
            except _READ_ERRORS as exc:
                # a header cut off or corrupt: said now, since the peek has consumed
                # the header's bytes, and a read after it would see only an empty file
                self.close()
                raise InputError(f"cannot read {self.name}: {exc}") from exc
        self.parquet = head == PARQUET_MAGIC

    @property
    def raw(self):
        """The underlying binary stream (not decompressed)."""
        return self._raw

    @property
    def start(self) -> int:
        """Where in the file reading began (0 for a path; stdin may have been read
        before)."""
        return self._start

    def seekable_path(self) -> str | None:
        """The path of a regular, uncompressed file opened by name, which other
        processes can read at the same offsets; else ``None``."""
        if self._owned and not self.compressed and self.size is not None:
            return os.path.abspath(self.name)
        return None

    def position(self) -> int | None:
        """Bytes of :attr:`size` consumed so far (``None`` if unknown)."""
        if self.size is None:
            return None
        try:
            return self._raw.tell() - self._start
        except (OSError, ValueError, AttributeError):
            return None

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._file
        except _READ_ERRORS as exc:
            raise InputError(f"cannot read {self.name}: {exc}") from exc

    def read_block(self, n: int) -> bytes:
        """Up to ``n`` more (decompressed) bytes; ``b""`` at the end. Lines already
        taken by iterating are not read again. The bytes read before an error (a gzip
        stream cut off) are returned first and the error is raised by the next call,
        as iterating gives the lines before it (a single ``read`` dropped them)."""
        error, self._error = self._error, None
        if error is not None:
            raise error
        read = getattr(self._file, "read1", self._file.read)
        parts = []
        got = 0
        try:
            while got < n:
                data = read(n - got)
                if not data:
                    break
                parts.append(data)
                got += len(data)
        except _READ_ERRORS as exc:
            error = InputError(f"cannot read {self.name}: {exc}")
            error.__cause__ = exc
            if not parts:
                raise error from exc
            self._error = error
        return b"".join(parts)

    def read(self) -> bytes:
        """The whole (remaining, decompressed) content."""
        try:
            return self._file.read()
        except _READ_ERRORS as exc:
            raise InputError(f"cannot read {self.name}: {exc}") from exc

    def close(self) -> None:
        if self._file is not self._raw:
            with suppress(*_READ_ERRORS):
                self._file.close()
        if self._owned:
            self._raw.close()

    def __enter__(self) -> "InputFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_input(path: str | os.PathLike | None = "-", *, stdin: IO | None = None) -> InputFile:
    """Open ``path`` (``"-"`` for stdin) for reading; raises :class:`InputError`."""
    return InputFile(path, stdin=stdin)


def _peek(raw, n: int) -> bytes:
    """The first ``n`` bytes of ``raw`` without consuming them (``b""`` if impossible)."""
    try:
        peek = getattr(raw, "peek", None)
        if peek is not None:
            return peek(n)[:n]
        if raw.seekable():
            pos = raw.tell()
            head = raw.read(n)
            raw.seek(pos)
            return head
    except (OSError, ValueError):
        pass
    return b""


class _TextSink:
    """A binary ``write`` on top of a text stream that has no ``.buffer``."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, data: bytes) -> int:
        self._stream.write(data.decode("utf-8", "surrogateescape"))
        return len(data)

    def flush(self) -> None:
        self._stream.flush()


def stdout_binary():
    """A binary view of the current ``sys.stdout`` (its ``.buffer``, after flushing
    whatever text is pending), or an adapter when it has none."""
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    if buf is None:
        return _TextSink(out)
    out.flush()
    return buf


#: Names tried before :func:`atomic_output` gives up (each has 48 random bits).
_TEMP_ATTEMPTS = 100


def _owner_only(name: str, flags: int) -> int:
    """``open`` opener for the temp file: readable by the owner only until the final
    ``chmod``, and never through a symlink planted under its name."""
    return os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)


def _new_file_mode(path: str) -> int:
    """Permissions for the replacement: those of the existing file, else 0666 & ~umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _writes_in_place(path: str) -> bool:
    """Whether ``path`` must be written where it is instead of replaced: a device, FIFO
    or socket (``/dev/null``, a named pipe), or a name that leads into ``/proc`` (such
    as ``/dev/stdout`` or ``/dev/fd/1``, whose target is whatever the descriptor is
    open on). Replacing those would put a regular file in their place."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on a chain of symbolic links
        p = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
        if p.startswith("/proc/"):
            return True
        if not os.path.islink(p):
            break
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # not there (or a dangling link): a new file is made


#: /proc/PID/fd/N (or /proc/PID/task/TID/fd/N) once /proc/self or /proc/thread-self is
#: resolved: the descriptor N of process PID.
_PROC_FD = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd/(\d+)")


def _own_descriptor(path) -> int | None:
    """The descriptor of this process that ``path`` names, when it is open for writing:
    ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``,
    ``/proc/<this pid>/fd/N``, or a symbolic link that leads to one; else ``None``.

    Opening such a name opens the descriptor's target anew (with ``"wb"``: truncated,
    at offset 0), so the output of ``-o /dev/stdout >> log`` wiped the log; written
    through a duplicate of the descriptor, the data goes where the descriptor is open,
    with its mode (``O_APPEND``) and offset, as it does without ``-o``."""
    p = os.path.abspath(path)
    pid = str(os.getpid())
    for _ in range(40):  # the kernel's limit on a chain of symbolic links
        p = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
        m = _PROC_FD.fullmatch(p)
        if m is not None:
            if m.group(1) != pid:
                return None  # another process's descriptor: its target is opened
            fd = int(m.group(2))
            break
        if not os.path.islink(p):
            if os.path.dirname(p) != "/dev/fd":  # (not a link where /dev/fd is a device: BSD, macOS)
                return None
            try:
                fd = int(os.path.basename(p))
            except ValueError:
                return None
            break
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    else:
        return None
    try:
        import fcntl

        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except (ImportError, OSError, ValueError):
        return None  # not open (the name is then as unwritable as it was)
    return fd if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) else None


def _open_in_place(path: str, buffer_size: int) -> BinaryIO:
    """``path``, which :func:`_writes_in_place`, opened for writing: through a duplicate
    of the descriptor it names, if it names one of this process (:func:`_own_descriptor`),
    else by its name."""
    fd = _own_descriptor(path)
    if fd is None:
        return open(path, "wb", buffering=buffer_size)  # noqa: SIM115 - the caller closes it
    for stream in (sys.stdout, sys.stderr):  # what is pending there comes first
        with suppress(AttributeError, OSError, ValueError):
            if stream.fileno() == fd:
                stream.flush()
    dup = os.dup(fd)
    try:
        return open(dup, "wb", buffering=buffer_size)  # noqa: SIM115 - closes the duplicate
    except BaseException:
        os.close(dup)
        raise


#: gzip output's compression level: gzip(1)'s, pigz's and zlib's default. (Python's
#: gzip module defaults to 9, which compresses JSON lines 1-2 % smaller at about 0.7x
#: the speed.)
GZIP_LEVEL = 6


@contextmanager
def _gzipped(f: BinaryIO, compress: bool, level: int = GZIP_LEVEL) -> Iterator[BinaryIO]:
    """``f``, or a gzip stream into it at ``level`` (mtime=0 and no name: the same
    input gives the same bytes)."""
    if compress:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=level) as gz:
            yield gz  # type: ignore[misc]
    else:
        yield f


def is_gzip_path(path) -> bool:
    """Whether an output named ``path`` is gzipped: its name ends with ``.gz``, in any
    case (as a name ending with ``.parquet`` in any case is Parquet). An input is
    recognised by its content instead, whatever its name."""
    return path not in (None, "-") and os.fspath(path).lower().endswith(".gz")


@contextmanager
def atomic_output(path: str | os.PathLike | None, *, compress: bool | None = None,
                  fsync: bool = True, buffer_size: int = 1 << 20,
                  gzip_level: int = GZIP_LEVEL,
                  on_commit: Callable[[], None] | None = None) -> Iterator[BinaryIO]:
    """Yield a binary file to write; ``path`` is only replaced when the block succeeds.

    The data goes to a temp file in the same directory, which is flushed, fsynced and
    renamed over ``path`` (``os.replace``) at the end. On any exception (including
    ``KeyboardInterrupt``) the temp file is removed and an existing ``path`` stays as it
    was. ``path`` ``"-"`` or ``None`` streams to stdout (not atomic, not closed).
    A symbolic link stays: the file it points to is replaced. Devices, FIFOs and
    names that lead into ``/proc`` (``/dev/stdout``) are written in place, not atomically
    (they cannot be replaced); a name of one of this process's descriptors
    (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) is written through a duplicate
    of that descriptor, with its mode and offset (appending after ``>>``), not opened
    anew (which truncated the file it is open on). ``compress`` gzips the output (default: when ``path``
    ends with ``.gz``, in any case: ``.GZ`` too), at ``gzip_level`` (1-9).
    ``on_commit`` is called right before the rename (the command line makes a stop
    signal that comes from there on no longer an interruption).
    """
    if path is None or path == "-":
        out = stdout_binary()
        yield out
        out.flush()
        return
    path = os.fspath(path)
    if compress is None:
        compress = is_gzip_path(path)
    if _writes_in_place(path):
        with _open_in_place(path, buffer_size) as f, _gzipped(f, compress, gzip_level) as out:
            yield out
        return
    named = path
    try:  # a loop of symbolic links is no file to replace (cp refuses it too)
        os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), named) from None
    path = os.path.realpath(path)  # through symbolic links: the link itself stays
    directory = os.path.dirname(path)
    mode = _new_file_mode(path)
    prefix = os.path.join(directory, "." + os.path.basename(path) + ".")
    # The temp file is created inside the ``try``, under a name chosen before it exists,
    # so a Ctrl-C or SIGTERM raised the instant the file appears (a pending signal is
    # raised as soon as ``open`` returns) still removes it. ``tempfile.mkstemp`` cannot
    # promise that: its name is only known once it has returned, and a signal raised in
    # between left the file behind (seen in CI under load).
    tmp = ""
    try:
        for _ in range(_TEMP_ATTEMPTS):
            tmp = f"{prefix}{os.urandom(6).hex()}.tmp"
            try:
                f = open(tmp, "xb", buffering=buffer_size, opener=_owner_only)
            except FileExistsError:
                tmp = ""  # somebody else's file: never remove it
                continue
            except OSError as exc:  # report the output, not the temp name nobody asked for
                tmp = ""
                exc.filename = named
                raise
            break
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary file name", prefix + "*.tmp")
        with f:
            with _gzipped(f, compress, gzip_level) as out:
                yield out
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if on_commit is not None:
            on_commit()
        os.replace(tmp, path)
    except BaseException:
        if tmp:
            with suppress(OSError):
                os.unlink(tmp)
        raise


class Nanoseconds(int):
    """A value of a nanosecond timestamp, time or duration column whose nanoseconds
    are not 0, which Python's ``datetime``, ``time`` and ``timedelta`` cannot hold
    (they stop at microseconds). The int is the value as stored (Arrow's int64, which
    pyarrow writes back as the column's type: a Parquet output keeps it exactly);
    :attr:`text` is its ISO text with nine digits of fraction, as ``isoformat`` of the
    value at microseconds would give it with three more (``2023-11-14T22:13:20.123456789+00:00``,
    ``12:00:00.000000001``; a duration as ``str`` of a ``timedelta``,
    ``0:00:01.000000500``): what a JSONL output writes."""

    def __new__(cls, value: int, text: str):
        self = super().__new__(cls, value)
        self.text = text
        return self

    def __reduce__(self):
        return type(self), (int(self), self.text)

    def isoformat(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Nanoseconds({int(self)}, {self.text!r})"


def json_safe(value):
    """``value`` as JSON can hold it: NaN and ±Infinity (a Parquet double, or a ``NaN``
    that json.loads read from a line) as None, since JSON has no such numbers
    (json.dumps writes ``NaN``, which jq, JavaScript and most readers reject) and
    ``null`` is what JavaScript's ``JSON.stringify``, orjson and pandas' ``to_json``
    write for them; a :class:`Nanoseconds` as its ISO text. The value itself when it
    holds neither. (How ``--keep`` values are written as JSON, into a JSONL output or a
    Parquet output's JSON-text column.)"""
    t = type(value)
    if t is float:
        return value if value - value == 0.0 else None  # (inf - inf and nan - x are nan)
    if t is list or t is tuple:  # (a Parquet map is a list of (key, value) tuples)
        items = [json_safe(v) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            return items if t is list else tuple(items)
        return value
    if t is dict:
        items = {k: json_safe(v) for k, v in value.items()}
        if any(items[k] is not v for k, v in value.items()):
            return items
        return value
    if isinstance(value, float):  # (a subclass)
        return json_safe(float(value))
    if t is Nanoseconds:  # (an int to write back to Parquet; ISO text in JSON)
        return value.text
    return value


def json_line(obj: Any) -> bytes:
    """``obj`` as one line of UTF-8 JSON (``ensure_ascii=False``) ending in ``\\n``.
    Strings with lone surrogates (valid JSON ``"\\ud800"`` escapes, not encodable as
    UTF-8) fall back to ASCII escapes, so the line stays valid and lossless.

    The compiled ``_jsonl.json_line`` writes the usual values (the same bytes, several
    times faster); the json module writes whatever it leaves."""
    if _json_line_fast is not None:
        line = _json_line_fast(obj)
        if line is not None:
            return line
    s = _ENCODE_UNICODE(obj)
    try:
        return (s + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_ENCODE_ASCII(obj) + "\n").encode("ascii")


def blank_line(line: bytes, lineno: int) -> bool:
    """Whether line ``lineno`` (1-based) of a JSONL file is blank: whitespace only. A
    UTF-8 byte order mark at the start of the file is no content (editors write one,
    also into a file that is otherwise empty)."""
    if line.isspace():
        return True
    return lineno == 1 and line.startswith(_BOM) and (len(line) == 3 or line[3:].isspace())


def read_jsonl(path: str | os.PathLike | None = "-") -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSONL file (gzip
    or not; ``"-"`` for stdin). Raises :class:`JsonlError` at the first invalid line
    and :class:`InputError` if the file cannot be read."""
    loads = json_loads
    with InputFile(path) as f:
        for lineno, line in enumerate(f, 1):
            if blank_line(line, lineno):
                continue
            try:
                yield lineno, loads(line)
            except (ValueError, RecursionError) as exc:
                raise JsonlError(f.name, lineno, json_error_reason(exc, line)) from None


def write_jsonl(path: str | os.PathLike | None, values: Iterable[Any]) -> int:
    """Write each value as a JSON line to ``path`` atomically (``"-"``: stdout;
    gzipped when it ends with ``.gz``). Returns the number of lines written."""
    n = 0
    with atomic_output(path) as out:
        write = out.write
        for value in values:
            write(json_line(value))
            n += 1
    return n


def json_error_reason(exc: BaseException, line: str | bytes | None = None) -> str:
    """A one-line reason for a failed ``json.loads`` of one ``line`` (given, it lets
    a number over Python's digit limit be located)."""
    if isinstance(exc, json.JSONDecodeError):
        msg = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg  # ("Invalid control character at")
        text = exc.doc.rstrip("\r\n") if isinstance(exc.doc, str) else None
        if text is not None and msg == "Unterminated string starting":
            # (json reached the end of the text inside a string: a last line without
            # its newline, cut off; it reports where the string starts)
            return (f"invalid JSON at column {len(text) + 1}: the line ends inside a string "
                    f"(Unterminated string starting at column {exc.colno})")
        if text is not None and exc.pos >= len(text):
            # cut off: json stops at the line's own newline (line 2, column 1 to it)
            inside = msg.startswith(("Invalid control character", "Unterminated string"))
            return (f"invalid JSON at column {len(text) + 1}: the line ends "
                    f"{'inside a string' if inside else 'before its JSON value does'} ({msg})")
        if msg == "Invalid control character":
            msg = f"Invalid control character {exc.doc[exc.pos]!r} in a string"
        return f"invalid JSON at column {exc.colno}: {msg}"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start + 1}: {exc.reason}"
    if isinstance(exc, NestingError):
        return f"invalid JSON at column {exc.colno}: nested deeper than {MAX_NESTING} levels"
    if isinstance(exc, RecursionError):
        return "invalid JSON: nested too deeply"
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return _digit_limit_reason(line)
    return f"invalid JSON: {exc}"


#: a JSON string, or a JSON number (json converts one without fraction or exponent
#: with int(), which Python limits in digits)
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?(\d+)(\.\d+)?([eE][-+]?\d+)?')


def _digit_limit_reason(line: str | bytes | None) -> str:
    """The reason for a valid JSON line whose integer has more digits than Python's
    ``int`` converts (``sys.get_int_max_str_digits``), with its column (counted in
    characters, as json's own errors are) where the line is given."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    where, digits = "", None
    if isinstance(line, (bytes, bytearray, memoryview)):   # (as loads_utf8 reads it)
        line = bytes(line)
        line = line[3 if line.startswith(_BOM) else 0:].decode("utf-8", "replace")
    if isinstance(line, str):
        for m in _STRING_OR_NUMBER.finditer(line):
            number = m.group(1)
            if number is not None and m.group(2) is None and m.group(3) is None \
                    and 0 < limit < len(number):
                where, digits = f" at column {m.start() + 1}", len(number)
                break
    what = (f"an integer of {digits} digits, more than the {limit}" if digits else
            f"an integer of more than the {limit} digits")
    return (f"unreadable JSON{where}: {what} Python converts (PYTHONINTMAXSTRDIGITS=0 in "
            f"the environment, or sys.set_int_max_str_digits(0), lifts the limit)")


class Progress:
    """A one-line progress display: items done, rate, and percent of bytes when the
    total is known. Redrawn at most once per ``interval`` seconds, cleared by
    :meth:`close`. Disabled (every method a no-op) unless ``stream`` is a terminal.

    ``position`` is a callable returning bytes consumed (``None`` if unknown) and
    ``total`` the byte count it goes to; both are optional. Call :meth:`update` as
    often as you like (it only reads the clock), and :meth:`clear` before writing
    other lines to ``stream``.
    """

    def __init__(self, stream: IO[str] | None = None, *, total: int | None = None,
                 position: Callable[[], int | None] | None = None, unit: str = "lines",
                 interval: float | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            try:
                enabled = bool(self.stream.isatty())
            except (AttributeError, ValueError, OSError):
                enabled = False
        self.enabled = enabled
        self.total = total if total else None
        self._position = position
        self.unit = unit
        self.interval = PROGRESS_INTERVAL if interval is None else interval
        self._clock = clock
        self._start = clock()
        self._next = self._start + self.interval if enabled else float("inf")
        self._shown = False
        self.redraws = 0

    def update(self, done: int) -> None:
        """Note that ``done`` items are done; redraws if the interval has passed."""
        now = self._clock()
        if now >= self._next:
            self._next = now + self.interval
            self.draw(done, now)

    def draw(self, done: int, now: float | None = None) -> None:
        if not self.enabled:
            return
        if now is None:
            now = self._clock()
        elapsed = max(now - self._start, 1e-9)
        parts = [f"{done:,} {self.unit}", f"{done / elapsed:,.0f} {self.unit}/s"]
        pos = self._position() if self._position is not None else None
        if self.total and pos is not None:
            frac = min(max(pos / self.total, 0.0), 1.0)
            width = 20
            filled = int(frac * width)
            parts.insert(0, f"[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}%")
        line = "  ".join(parts)
        columns = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r" + line[: max(columns - 1, 10)] + "\x1b[K")
        self.stream.flush()
        self._shown = True
        self.redraws += 1

    def clear(self) -> None:
        """Erase the progress line (it comes back at the next redraw)."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def close(self) -> None:
        self.clear()
        self.enabled = False
        self._next = float("inf")

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
