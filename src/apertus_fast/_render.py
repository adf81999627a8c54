# cython: boundscheck=True, wraparound=True, annotation_typing=False
# (plain Python compiled by Cython: keep Python's index semantics and checks)
"""Rendering: message dicts -> the exact text of the official chat templates.

Three sections, in the order data flows:

1. *Jinja value semantics* the templates depend on, for JSON-like values: a missing
   key is ``Undefined`` (prints ``""``, is falsy, iterates empty, but fails when
   concatenated or dereferenced); ``{{ x }}`` prints ``str(x)``; ``a + b`` needs strings.
2. *Tool signatures*: the developer block's TypeScript rendering of tool JSON schemas
   (the templates' ``render_tools`` / ``render_typescript_type`` macros).
3. *Messages*: one hand-written string builder following the template's state machine
   (``in_assistant``, ``in_tool``, ``in_inner``, ``waiting_for_tool_outputs``,
   ``assistant_format``) message by message.

A dialect table (``_dialects.py``) supplies everything that differs between templates;
``docs/rendering.md`` maps each branch here to its template lines and lists every quirk.

This module is plain Python. When a C compiler is available, Cython compiles it as it
is, with the C types and inlining declared beside it in ``_render.pxd``
(``apertus_fast.backends()`` tells which one runs). Keep the two in step.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
from marshal import dumps as _marshal_dumps
import threading as _threading
import sys as _sys
import time as _time
import types as _types
from collections.abc import Mapping as _Mapping

import typing as _typing
from typing import TYPE_CHECKING, Any

from ._dialects import DEFAULT_DIALECT, DIALECTS, TOKEN_TEXT, Kind, get_dialect
from ._errors import RenderError, shown

if TYPE_CHECKING:  # (the annotations only: the header keeps Cython from typing by them)
    from collections.abc import Callable, Mapping, Sequence

    from ._dialects import Dialect
    from ._models import Conversation, Message

    # The argument types of render, shared by the functions that take its arguments
    # (render_with_spans): written once, here.
    Messages = Sequence[Mapping[str, Any] | Message] | Conversation
    Tools = Sequence[Mapping[str, Any] | Callable[..., Any]] | None
    DateArg = _dt.date | str | None

__all__ = ["render", "render_tools", "render_date", "UNDEFINED"]


# ---------------------------------------------------------------------------
# 1. Jinja value semantics
# ---------------------------------------------------------------------------

class _Undefined:
    """Jinja's default ``Undefined``: a missing attribute or key."""

    __slots__ = ()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __str__(self):
        return ""

    def __repr__(self):
        return "Undefined"


UNDEFINED = _Undefined()
_MISSING = object()

# Whether the render under way (in this thread) is in a sandboxed environment
# (Dialect.sandboxed): the one difference between the two environments' attribute
# lookups is what an AttributeError raised by ``obj[name]`` does. Set by each render on
# the general path; read only when an object's ``__getitem__`` raises AttributeError.
_STATE = _threading.local()


def _sandboxed():
    return getattr(_STATE, "sandboxed", False)
# Builtin types whose ``obj["name"]`` always fails: skip trying (exceptions are slow).
_NO_STRING_KEYS = frozenset([list, tuple, str, int, float, bool, type(None),
                             type({}.items), type(len)])


class _Fail(Exception):
    """A ``raise_exception(...)`` of the template, or a failure Jinja would raise
    (internal; becomes a RenderError naming the message)."""


def attr(obj, name):
    """``obj.name`` in a template (``name`` is never a ``dict`` method name here):
    Jinja tries ``getattr`` first, then ``obj[name]``; a missing value is Undefined;
    dereferencing Undefined itself fails."""
    if type(obj) is dict:
        d = obj
        return d.get(name, UNDEFINED)
    return _attr_slow(obj, name)


def _attr_slow(obj, name):
    if obj is UNDEFINED:
        raise _Fail(f"'{name}' of an undefined value")
    value = getattr(obj, name, _MISSING)
    if value is not _MISSING:
        return value
    if type(obj) in _NO_STRING_KEYS:
        return UNDEFINED
    try:
        return obj[name]
    except (TypeError, LookupError):
        return UNDEFINED
    except AttributeError:
        if _sandboxed():   # (jinja2's sandbox catches only the two above)
            raise
        return UNDEFINED


def item(obj, key):
    """``obj['key']`` in a template: the item first, then the attribute (so
    ``spec['items']`` on a dict without that key is the bound ``dict.items``)."""
    if type(obj) is dict:
        d = obj
        value = d.get(key, _MISSING)
        if value is not _MISSING:
            return value
        return getattr(d, key, UNDEFINED)
    if obj is UNDEFINED:
        raise _Fail(f"'{key}' of an undefined value")
    if type(obj) in _NO_STRING_KEYS:
        return getattr(obj, key, UNDEFINED)
    try:
        return obj[key]
    except (TypeError, LookupError):
        pass
    except AttributeError:
        if _sandboxed():
            raise
    try:
        return getattr(obj, key)
    except AttributeError:
        return UNDEFINED


def item0(obj):
    """``obj[0]`` in a template (an integer key: no attribute fallback)."""
    if type(obj) is list:
        seq_ = obj
        return seq_[0] if len(seq_) else UNDEFINED
    if obj is UNDEFINED:
        raise _Fail("index of an undefined value")
    try:
        return obj[0]
    except (TypeError, LookupError):
        return UNDEFINED
    except AttributeError:
        if _sandboxed():
            raise
        return UNDEFINED


def text(x):
    """``{{ x }}``: ``str(x)``, and ``""`` for Undefined. (Also the output of a ``+``
    of strings: a ``str`` subclass keeps its own ``+`` and ``__str__``.)"""
    if type(x) is str:
        return x
    if x is UNDEFINED:
        return ""
    x = str(x)
    return x if type(x) is str else str.__str__(x)


def cat(left, x, field):
    """The template's ``left + x``, ``x`` a value of the input and ``left`` a string
    literal or the sum so far: Python's ``+`` decides, as in the template. A string
    takes part as itself, a ``str`` subclass or any type with its own ``__add__`` /
    ``__radd__`` too (markupsafe's ``Markup`` escapes the other side with its ``str()``;
    ``collections.UserString`` joins it). Where ``+`` fails (Undefined, ``str + int``),
    the error names ``field``. The caller prints the sum with :func:`text`."""
    if type(x) is str and type(left) is str:
        return left + x
    try:
        if x is not UNDEFINED:
            return left + x
    except TypeError:
        pass
    got = "it is missing" if x is UNDEFINED else f"got {type(x).__name__} {shown(x, 60)}"
    raise _Fail(f"{field}: expected a string, {got}")


def seq(x, field=None):
    """What ``{% for %}`` visits, as a list (``loop.last`` needs the length):
    Undefined is empty, a string yields characters, a dict its keys. ``field`` names
    it in the error."""
    if type(x) is list:
        return x
    try:
        return list(x)
    except TypeError:
        if field:
            raise _Fail(f"{field}: expected a list, got {type(x).__name__} {shown(x, 60)}") from None
        raise _Fail(f"cannot iterate over {type(x).__name__}") from None


def _not_a_list(exc, x, field):
    """``exc``, raised while visiting the items of ``x``; or, where ``x`` is a mapping or
    a string (which ``{% for %}`` visits as its keys or its characters, so that the
    template fails on an item, not on ``x``), the error that says what ``x`` should be."""
    if isinstance(x, str) or is_mapping(x):
        what = "characters" if isinstance(x, str) else "keys"
        return _Fail(f"{field}: expected a list, got {type(x).__name__} {shown(x, 60)} (its "
                     f"{what} were read as the items: {_reason(exc)})")
    return exc


def _at_item(exc, items, where, j, item, expected):
    """``exc``, raised on the item ``j`` of the list ``items``, named by its place
    (``where[j]: ...``) and, for an item that is not a mapping, with what it is instead
    of ``expected``. (An ``items`` that is a string or a mapping: ``exc`` as it is, which
    :func:`_not_a_list` has made say what ``items`` should be.)"""
    if isinstance(items, str) or is_mapping(items):
        return exc
    reason = _reason(exc)
    if is_mapping(item):
        return _Fail(f"{where}[{j}]: {reason}")
    return _Fail(f"{where}[{j}]: expected {expected}, got {type(item).__name__} "
                 f"{shown(item, 60)} ({reason})")


def is_mapping(x):
    """``x is mapping``."""
    return type(x) is dict or isinstance(x, _Mapping)


def is_iterable(x):
    """``x is iterable``."""
    try:
        iter(x)
    except TypeError:
        return False
    return True


# json.dumps(x, **kwargs) builds a new encoder per call; what it would build, built once:
# scalars are encoded directly (as json.dumps does them), containers by the C encoder.
_HF_JSON = _json.JSONEncoder(ensure_ascii=False)
_JINJA_JSON = _json.JSONEncoder(sort_keys=True)
_enc_str = getattr(_json.encoder, "c_encode_basestring", None) or _json.encoder.encode_basestring
_enc_ascii = (getattr(_json.encoder, "c_encode_basestring_ascii", None)
              or _json.encoder.encode_basestring_ascii)
_c_make_encoder = getattr(_json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # markers=None: no circular-reference bookkeeping (a cycle ends in RecursionError)
    _HF_C = _c_make_encoder(None, _HF_JSON.default, _enc_str, None, ": ", ", ",
                            False, False, True)
    _JINJA_C = _c_make_encoder(None, _JINJA_JSON.default, _enc_ascii, None, ": ", ", ",
                               True, False, True)
else:  # pragma: no cover - CPython always has the C accelerator
    _HF_C = _JINJA_C = None


def _float_json(x):
    if x != x:
        return "NaN"
    if x == _INF:
        return "Infinity"
    if x == -_INF:
        return "-Infinity"
    return float.__repr__(x)


_INF = float("inf")


def tojson(x, jinja_builtin):
    """The ``tojson`` filter: jinja2's built-in in the reference package's environment
    (sorted keys, ASCII, ``< > & '`` escaped for HTML), else Hugging Face's
    ``json.dumps(ensure_ascii=False)``."""
    tx = type(x)
    if tx is str:
        out = _enc_ascii(x) if jinja_builtin else _enc_str(x)
    elif tx is bool:
        return "true" if x else "false"
    elif x is None:
        return "null"
    elif tx is int:
        return int.__repr__(x)
    elif tx is float:
        return _float_json(x)
    else:
        try:
            if (tx is dict or tx is list) and _HF_C is not None:
                out = "".join((_JINJA_C if jinja_builtin else _HF_C)(x, 0))
            else:
                out = (_JINJA_JSON if jinja_builtin else _HF_JSON).encode(x)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _Fail(f"tojson: {exc}") from None
    if not jinja_builtin:
        return out
    return (out.replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026").replace("'", "\\u0027"))


def not_in(name, container):
    """``name not in container`` (Python semantics: a string is a substring test)."""
    try:
        return name not in container
    except TypeError:
        raise _Fail(f"'required' must be a list, got {type(container).__name__}") from None


class _Required:
    """``not_in(name, required)`` for each property of a schema, as the template tests
    it against the list, one property after the other: quadratic in the properties
    (8,000 required properties: 0.66 s). Where the answer is the same, a set: a list
    of exact strings asked about names that are exact strings (their equality is the
    set's), and only for a long list (more than 32), so that schemas of the usual size
    take the template's test itself. (The set is made once per list object: a list
    that the caller's own code changes in place while the tool renders would not be
    seen; no such code runs for exact strings and dicts.)"""

    __slots__ = ("required", "members")

    def __init__(self, required):
        self.required = required
        self.members = None
        if type(required) is list and len(required) > 32:
            for r in required:
                if type(r) is not str:
                    return
            self.members = frozenset(required)

    def missing(self, name) -> bool:
        if self.members is not None and type(name) is str:
            return name not in self.members
        return not_in(name, self.required)


# ---------------------------------------------------------------------------
# 2. Tool signatures
# ---------------------------------------------------------------------------
# Whitespace: the macros are the one place where the jinja2 environment changes the
# output. Around ``oneOf`` variants the default environment (reference package) keeps
# the newline and indentation after ``{% if %}`` tags; Hugging Face's trim_blocks /
# lstrip_blocks drop the newline after a block tag and the indentation before one.

_DEFAULT_WS_PLAIN = "\n" + " " * 20   # before "// default:" of a oneOf variant
_DEFAULT_WS_TRIM = " " * 20
_UNION_PLAIN = " | \n" + " " * 16      # between oneOf variants
_UNION_TRIM = " | \n"
_PROP_SEP = ": \n" + " " * 16          # between a nested property's name and its type


#: How deeply a parameter's schema may nest (arrays, objects, oneOf variants). The
#: templates recurse once per level and fail with RecursionError from about 200 levels
#: (Hugging Face's environment) or 330 (the reference package's) at Python's default
#: recursion limit; the compiled build recurses in C, where running out of stack would
#: crash the interpreter, so both builds stop at this depth with a RenderError.
MAX_SCHEMA_DEPTH = 400


def ts_type(spec, trim, jinja_json, depth=0):
    """``render_typescript_type(param_spec, ...)`` (its ``required_params`` argument
    is only passed on, never read, so it is dropped). ``depth``: how many schemas
    enclose this one."""
    if depth >= MAX_SCHEMA_DEPTH:
        raise _Fail(f"the parameter schema nests more than {MAX_SCHEMA_DEPTH} levels deep")
    t = attr(spec, "type")
    if t == "array":
        return _ts_array(spec, trim, jinja_json, depth)
    if (t is not UNDEFINED and not isinstance(t, str) and not is_mapping(t)
            and is_iterable(t) and item0(t) is not UNDEFINED):
        # a list of types like ["object", "object"] (Union[dict, list]); ``join`` and
        # ``{{ }}`` print members with str()
        if len(t) > 1:
            return " | ".join([text(x) for x in seq(t)])
        return text(item0(t))
    one_of = attr(spec, "oneOf")
    if one_of:
        return _ts_one_of(one_of, trim, jinja_json, depth)
    if t == "string":
        enum = attr(spec, "enum")
        if enum:
            return '"' + '" | "'.join([text(x) for x in seq(enum, '"enum"')]) + '"'
        if attr(spec, "nullable"):
            return "string | null"
        return "string"
    if t == "number" or t == "integer":
        return "number"
    if t == "boolean":
        return "boolean"
    if t == "object":
        return _ts_object(spec, trim, jinja_json, depth)
    return "any"


def _ts_array(spec, trim, jinja_json, depth):
    items = item(spec, "items")
    if items:
        it = item(items, "type")
        if it == "string":
            out = "string[]"
        elif it == "number" or it == "integer":
            out = "number[]"
        elif it == "boolean":
            out = "boolean[]"
        else:
            inner = ts_type(items, trim, jinja_json, depth + 1)
            if inner == "object | object" or len(inner) > 50:
                out = "any[]"
            else:
                out = inner + "[]"
    else:
        out = "any[]"
    if attr(spec, "nullable"):
        out += " | null"
    return out


def _ts_object(spec, trim, jinja_json, depth):
    props = attr(spec, "properties")
    if not props:
        return "object"
    required = _Required(attr(spec, "required") or [])
    entries = _items(props)
    parts = ["{\n"]
    last = len(entries) - 1
    i = 0
    for name, prop in entries:
        parts.append(text(name))
        if required.missing(name):
            parts.append("?")
        parts.append(_PROP_SEP)
        parts.append(ts_type(prop, trim, jinja_json, depth + 1))
        if i != last:
            parts.append(", ")
        i += 1
    parts.append("}")
    return "".join(parts)


def _ts_one_of(one_of, trim, jinja_json, depth):
    # ``has_object_variants`` is set inside the template's loop and so never leaves
    # it (Jinja scoping): every variant is rendered, objects included.
    variants = seq(one_of, '"oneOf"')
    parts = []
    last = len(variants) - 1
    i = 0
    for variant in variants:
        parts.append(ts_type(variant, trim, jinja_json, depth + 1))
        desc = attr(variant, "description")
        if desc:
            parts.append(text(cat("// ", desc, '"description" of a oneOf variant')))
        default = attr(variant, "default")
        if default is not UNDEFINED:
            parts.append(_DEFAULT_WS_TRIM if trim else _DEFAULT_WS_PLAIN)
            parts.append("// default: " + tojson(default, jinja_json))
        if i != last:
            parts.append(_UNION_TRIM if trim else _UNION_PLAIN)
        i += 1
    return "".join(parts)


def _items(x):
    """``x.items()`` in a template: any object with a callable ``items`` attribute (or
    item) will do, as for Jinja."""
    if type(x) is dict or isinstance(x, _Mapping):
        return list(x.items())
    method = attr(x, "items")
    if method is UNDEFINED or not callable(method):
        raise _Fail(f"expected a mapping with .items(), got {type(x).__name__}")
    return list(method())


def _unwrap_tool(tool, native):
    """OpenAI-shaped tool specs ``{"type": "function", "function": {...}}``.

    apertus-1.5 unwraps ``tool.function`` whenever it is truthy. The other templates
    fail on such tools (``tool.description`` is undefined); apertus-fast unwraps them
    too, but only then, so that every tool those templates accept renders unchanged.
    """
    if not native and (attr(tool, "description") is not UNDEFINED
                       or attr(tool, "name") is not UNDEFINED):
        return tool   # (the template reads no "function" here: not even its truth)
    fn = attr(tool, "function")
    return fn if fn else tool


def render_tools(tools: Tools, dialect: str | Dialect = DEFAULT_DIALECT) -> str | None:
    """The tool section ``render`` writes for ``tools``, as ``render(...,
    tools_text=...)`` takes it: the text after ``Tool Capabilities:\\n`` (the
    template's ``render_tools(tools)`` macro), or ``None`` when ``tools`` holds no tool
    (``None``, ``[]``: the section then says ``Tool Capabilities: disabled``, which no
    ``tools_text`` string gives). So ``render(m, tools_text=render_tools(tools))`` is
    ``render(m, tools=tools)`` for every ``tools``, and the result is what
    ``parse(...).tools_text`` reads from that text."""
    d = get_dialect(dialect)
    if not _truth(tools, "tools"):
        return None
    outer = getattr(_STATE, "sandboxed", False)   # (as _render_pieces)
    _STATE.sandboxed = d.sandboxed
    try:
        return _render_tools(tools, d.trim_blocks, d.tojson == "jinja", d.openai_shapes)
    except _ERRORS as exc:
        raise _tools_error(exc) from _cause(exc)
    finally:
        _STATE.sandboxed = outer


# Rendered signatures of single tools, keyed by the environment and ``marshal.dumps`` of
# the tool: for exact JSON types (dict, list, str, int, float, bool, None) marshal tells
# 1, 1.0, True and "1" apart and keeps key order, so equal keys mean tools that render
# identically. Only such tools are cached (``_cacheable``): marshal also accepts other
# builtins, and writes every buffer (bytes, bytearray, array.array, a NumPy array) as the
# same record, so array("u", "ab") and array("I", [97, 98]) would share a key. Corpora and
# servers reuse a catalogue of tools; any other tool is simply rendered each time.
_TOOL_CACHE = {}
_TOOL_CACHE_MAX = 4096
#: Bytes of keys and texts the cache may hold before it is cleared, and the most one
#: entry may hold (a bigger tool is rendered each time): as the hot path's cache.
_TOOL_CACHE_BYTES = 64 * 1024 * 1024
_TOOL_ENTRY_BYTES = 4 * 1024 * 1024
_tool_cache_bytes = 0      # what the entries hold, about


def _cacheable(x, depth):
    """Whether ``x`` is made of exact JSON types only (dict keys str), at most 64 deep."""
    t = type(x)
    if t is str or t is int or t is float or t is bool or x is None:
        return True
    if depth >= 64:
        return False
    if t is dict:
        for k, v in x.items():
            if type(k) is not str or not _cacheable(v, depth + 1):
                return False
        return True
    if t is list:
        for v in x:
            if not _cacheable(v, depth + 1):
                return False
        return True
    return False


def _render_tools(tools, trim, jinja_json, native):
    global _tool_cache_bytes
    tool_list = seq(tools)
    out = []
    last_tool = len(tool_list) - 1
    ti = 0
    mode = (4 if trim else 0) | (2 if jinja_json else 0) | (1 if native else 0)
    for tool in tool_list:
        key = None
        if isinstance(tool, _FUNCTIONS):
            tool = _function_tool(tool, ti)
        if type(tool) is dict and _cacheable(tool, 0):
            try:
                key = (mode, _marshal_dumps(tool))
            except (ValueError, RecursionError):
                key = None
            else:
                cached = _TOOL_CACHE.get(key)
                if cached is not None:
                    out.append(cached)
                    if ti != last_tool:
                        out.append("\n")
                    ti += 1
                    continue
        try:
            text_ = _render_tool(tool, trim, jinja_json, native)
        except _ERRORS as exc:
            if is_mapping(tool) or isinstance(tools, str) or is_mapping(tools):
                failed = _Fail(f"tools[{ti}]{_tool_label(tool)}: {_reason(exc)}")
            else:
                failed = _at_item(exc, tool_list, "tools", ti, tool,
                                  'a tool (a dict with "name", "description" and "parameters")')
            raise _not_a_list(failed, tools, "tools") from _cause(exc)
        # (cached only if the tool is still what the key says: another thread may have
        # edited it while it rendered, and the text of the new version would then be
        # served for the old one)
        if key is not None and _same_key(tool, key):
            # (in bytes: a text of wide characters takes 2 or 4 a character)
            size = len(key[1]) + _sys.getsizeof(text_)
            if size <= _TOOL_ENTRY_BYTES:
                if len(_TOOL_CACHE) >= _TOOL_CACHE_MAX or \
                        _tool_cache_bytes + size > _TOOL_CACHE_BYTES:
                    _TOOL_CACHE.clear()
                    _tool_cache_bytes = 0
                if key not in _TOOL_CACHE:
                    _tool_cache_bytes += size
                _TOOL_CACHE[key] = text_
        out.append(text_)
        if ti != last_tool:
            out.append("\n")
        ti += 1
    return "".join(out)


def _same_key(tool, key):
    """Whether ``tool`` still has the cache ``key`` it had before it was rendered."""
    try:
        return _marshal_dumps(tool) == key[1]
    except (ValueError, RecursionError):
        return False


def _tool_label(tool):
    """`` ('name')`` (the repr, after a space) of a tool whose name can be read, or
    ``""``: for error messages."""
    try:
        name = attr(tool, "name")
        if not isinstance(name, str):
            name = attr(attr(tool, "function"), "name")
    except MemoryError:
        raise
    except _ERRORS:
        return ""
    return f" ({name!r})" if isinstance(name, str) else ""


#: What Hugging Face's ``apply_chat_template`` turns into a tool's JSON schema.
_FUNCTIONS = (_types.FunctionType, _types.MethodType)


def _function_tool(fn, i):
    """A Python function (or bound method) given as a tool: its JSON schema, made as
    Hugging Face's ``apply_chat_template`` makes it, by ``transformers``' own
    ``get_json_schema`` (the type hints and the Google-style docstring), so that both
    render the same text. Without ``transformers`` installed, an error that says so."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        from transformers.utils import get_json_schema
    except ImportError as exc:
        raise _Fail(
            f"tools[{i}]: got function {name}: a Python function is described to the model "
            "by its JSON schema, which transformers.utils.get_json_schema makes from its "
            "type hints and docstring (as apply_chat_template does); transformers is not "
            f"installed ({exc}): install it, or pass the schema (a dict)") from None
    try:
        return get_json_schema(fn)
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises on it
        raise _Fail(f"tools[{i}]: function {name}: transformers.utils.get_json_schema "
                    f"cannot describe it: {type(exc).__name__}: {exc}") from exc


def _render_tool(tool, trim, jinja_json, native):
    """One tool's signature (one iteration of ``render_tools``' loop)."""
    out = []
    tool = _unwrap_tool(tool, native)
    out.append(text(cat("// ", attr(tool, "description"), '"description"') + "\n"))
    out.append(text(cat("type ", attr(tool, "name"), '"name"') + " = "))
    params = attr(tool, "parameters")
    props = attr(params, "properties") if params else UNDEFINED
    if props:
        out.append("(_: {\n")
        entries = _items(props)
        last = len(entries) - 1
        i = 0
        required = None
        for name, spec in entries:
            desc = attr(spec, "description")
            if desc:
                out.append(text(cat("// ", desc, f'parameter {text(name)!r}: "description"') + "\n"))
            out.append(text(name))
            # (read for each property, where and as the template reads it; its set is
            # made once for the same list)
            listed = attr(params, "required") or []
            if required is None or required.required is not listed:
                required = _Required(listed)
            if required.missing(name):
                out.append("?")
            out.append(": ")
            out.append(ts_type(spec, trim, jinja_json))
            default = attr(spec, "default")
            if default is not UNDEFINED:
                if attr(spec, "enum"):  # the template prints these defaults with +
                    out.append(text(cat(", // default: ", default, f'parameter {text(name)!r} (an enum): "default"')))
                elif attr(spec, "oneOf"):
                    out.append(text(cat("// default: ", default, f'parameter {text(name)!r} (a oneOf): "default"')))
                else:
                    out.append(", // default: " + tojson(default, jinja_json))
            out.append(",\n" if i != last else "\n")
            i += 1
        out.append("}) => any;")
    else:
        out.append("() => any;")
    return "".join(out)


# ---------------------------------------------------------------------------
# 3. Messages
# ---------------------------------------------------------------------------

SYSTEM_START = TOKEN_TEXT[Kind.SYSTEM_START]
SYSTEM_END = TOKEN_TEXT[Kind.SYSTEM_END]
DEVELOPER_START = TOKEN_TEXT[Kind.DEVELOPER_START]
DEVELOPER_END = TOKEN_TEXT[Kind.DEVELOPER_END]
USER_START = TOKEN_TEXT[Kind.USER_START]
USER_END = TOKEN_TEXT[Kind.USER_END]
ASSISTANT_START = TOKEN_TEXT[Kind.ASSISTANT_START]
ASSISTANT_END = TOKEN_TEXT[Kind.ASSISTANT_END]
INNER_PREFIX = TOKEN_TEXT[Kind.INNER_PREFIX]
INNER_SUFFIX = TOKEN_TEXT[Kind.INNER_SUFFIX]
TOOLS_PREFIX = TOKEN_TEXT[Kind.TOOLS_PREFIX]
TOOLS_SUFFIX = TOKEN_TEXT[Kind.TOOLS_SUFFIX]
IMAGE = TOKEN_TEXT[Kind.IMAGE]
AUDIO = TOKEN_TEXT[Kind.AUDIO]

_THINKING_ON = DEVELOPER_START + "Deliberation: enabled\n"
_THINKING_OFF = DEVELOPER_START + "Deliberation: disabled\n"
_NO_TOOLS = "Tool Capabilities: disabled" + DEVELOPER_END
_TOOLS_HEAD = "Tool Capabilities:\n"

_FMT_NONE = 0
_FMT_STRING = 1
_FMT_MAPPING = 2

#: What a render reports as a RenderError: whatever the template fails on, the
#: caller's own code included (a ``__str__``, ``__bool__``, ``__eq__`` or ``__iter__``
#: of an object in the messages or tools that raises), as for the flags and
#: ``bos_token``. Not ``MemoryError``, which is not the input's fault: ``_reason``
#: lets it through.
_ERRORS = (Exception,)

# ``strftime_now('%Y-%m-%d')`` of today, recomputed at most once a second: (the
# second, its date), one object, so that threads that update it at once (at
# midnight) never leave one second's date filed under another second
_today = (-1, "")
_date_cache = {}


class _DateAsGiven(str):
    """A date string rendered as it is, unchecked: what ``ApertusFormatter`` read from
    ``datetime.now().strftime("%Y-%m-%d")``, which the reference's template puts into
    the system prompt whatever it is (a patched ``datetime`` that gives ``"Jan 5,
    2024"``, a year before 1000 that gives ``"999-01-15"``). The formatter's own; the
    ``date`` argument of the public functions is checked."""

    __slots__ = ()


def render_date(date: DateArg = None) -> str:
    """The ``YYYY-MM-DD`` string ``strftime_now('%Y-%m-%d')`` gives: ``None`` is today
    (local time, as the templates' callers do); a ``datetime.date``/``datetime`` or an
    ISO ``"YYYY-MM-DD"`` string fixes it."""
    global _today
    if date is None:
        now = int(_time.time())
        today = _today
        if now != today[0]:
            today = _today = (now, _time.strftime("%Y-%m-%d", _time.localtime(now)))
        return today[1]
    if type(date) is str or isinstance(date, str):
        if type(date) is _DateAsGiven:
            return str(date)  # (an exact str: the formatter's date, as it gave it)
        cached = _date_cache.get(date)
        if cached is not None:
            return cached
        try:
            # fromisoformat alone would take "20260101" and "2026-W01-1" on 3.11+ only
            if len(date) != 10 or date[4] != "-" or date[7] != "-":
                raise ValueError
            value = _iso(_dt.date.fromisoformat(date))
        except ValueError:
            raise RenderError(f"date must be 'YYYY-MM-DD', got {date!r}") from None
        if len(_date_cache) > 4096:
            _date_cache.clear()
        _date_cache[date] = value
        return value
    if isinstance(date, _dt.date):
        return _iso(date)
    raise RenderError(f"date must be a datetime.date or a 'YYYY-MM-DD' string, got {date!r}")


def _iso(date):
    """``YYYY-MM-DD``, the year in four digits also before 1000 (where glibc's
    ``strftime("%Y")`` writes ``999``, which no parser reads as the default prompt's
    date)."""
    return f"{date.year:04d}-{date.month:02d}-{date.day:02d}"


def _system_prompt(messages, d, date, look):
    """The system section, and the index of the first message of the main loop.
    ``look``: whether the template looks at the first message (see ``_template_view``)."""
    if look and messages and attr(messages[0], "role") == "system":
        first = messages[0]
        if "content" in first:
            content = attr(first, "content")
            if isinstance(content, str):
                return text(SYSTEM_START + content + SYSTEM_END), 1
            if is_mapping(content) and "text" in content:
                return text(cat(SYSTEM_START, attr(content, "text"), 'the system content\'s "text"') + SYSTEM_END), 1
        raise _Fail("Invalid system message" + _why_system(first))
    if d.dated_system:
        return SYSTEM_START + d.default_system.replace("{date}", render_date(date)) + SYSTEM_END, 0
    return SYSTEM_START + d.default_system + SYSTEM_END, 0


def render(
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
) -> str:
    """Render a conversation (a list of message dicts) to the exact text the official
    chat template of ``dialect`` produces.

    The drop-in dataclasses are accepted too: ``Message`` objects in the list (or a
    ``Conversation``) render as ``ApertusFormatter.format_conversation`` renders them.

    ``tools`` are JSON-schema tool specs (flat ``{"name", "description", "parameters"}``
    or OpenAI-shaped ``{"type": "function", "function": {...}}``), or Python functions,
    described as Hugging Face's ``apply_chat_template`` describes them (by
    ``transformers.utils.get_json_schema``, which must be installed); ``bos_token=None``
    renders no BOS, as Hugging Face does for a tokenizer without one; ``date`` (a
    ``datetime.date`` or ``"YYYY-MM-DD"``) fixes the default system prompt's date
    (``None``: today), and a bad one raises ``RenderError`` whether or not the
    conversation uses it; ``continue_assistant_message``
    leaves the last assistant turn open (read by ``apertus-1`` and ``apertus-1.5``).
    ``tools_text`` is an already rendered tool section (``render_tools(tools,
    dialect)``, or ``parse(...).tools_text``) used verbatim instead of ``tools``: render
    the tools of a corpus once, or re-render parsed text whose schemas are not known.

    Raises :class:`RenderError` (with ``message_index``) wherever the template raises
    or fails.
    """
    return _render_general(messages, dialect, tools, enable_thinking, add_generation_prompt,
                           continue_assistant_message, date, bos_token, tools_text)


def _render_general(messages, dialect, tools, enable_thinking, add_generation_prompt,
                    continue_assistant_message, date, bos_token, tools_text):
    """``render`` on the general path: every input, every Jinja value rule, every error."""
    return "".join(_render_pieces(messages, dialect, tools, enable_thinking,
                                  add_generation_prompt, continue_assistant_message, date,
                                  bos_token, tools_text, None))


def _render_pieces(messages, dialect, tools, enable_thinking, add_generation_prompt,
                   continue_assistant_message, date, bos_token, tools_text, marks):
    """The rendered text as a list of pieces. ``marks`` (a list, or ``None``) receives
    the piece indices where the model's text begins and ends (see ``_model``)."""
    d = DIALECTS.get(dialect) if type(dialect) is str else None
    if d is None:
        d = get_dialect(dialect)
    # The environment's rules for this render, and back to the ones found after it: a
    # render may run inside another (from the caller's __str__, a finalizer, a signal
    # handler), which goes on with its own rules.
    outer = getattr(_STATE, "sandboxed", False)
    _STATE.sandboxed = d.sandboxed
    try:
        return _render_pieces_now(messages, d, tools, enable_thinking, add_generation_prompt,
                                  continue_assistant_message, date, bos_token, tools_text,
                                  marks)
    finally:
        _STATE.sandboxed = outer


def _render_pieces_now(messages, d, tools, enable_thinking, add_generation_prompt,
                       continue_assistant_message, date, bos_token, tools_text, marks):
    look = True
    if type(messages) is not list:
        messages, look = _template_view(messages)
    for m in messages:
        if type(m) is not dict:  # the drop-in dataclasses: the dicts the formatter renders
            messages = _template_messages(messages)
            break
    if date is not None:
        # Checked whether or not the conversation uses it (one with its own system prompt
        # does not), so that a bad date fails a corpus's first conversation, not some
        # later one, and is not blamed on a message.
        render_date(date)
    try:
        system, start = _system_prompt(messages, d, date, look)
    except _ERRORS as exc:
        raise _render_error(exc, 0 if messages else None) from _cause(exc)
    if bos_token is None:
        # (what Hugging Face renders for a tokenizer without a BOS token, whose
        # bos_token is None: it leaves the variable undefined, which renders "")
        bos_token = ""
    elif type(bos_token) is not str:
        try:
            bos_token = text(bos_token)
        except Exception as exc:  # noqa: BLE001 - whatever its __str__ raises
            raise RenderError(f"bos_token: {_reason(exc)}") from _cause(exc)
    out = [bos_token, system,
           _THINKING_ON if _truth(enable_thinking, "enable_thinking") else _THINKING_OFF]
    if tools_text is not None:
        if _truth(tools, "tools"):
            raise RenderError("pass either tools or tools_text, not both")
        if type(tools_text) is not str:
            raise RenderError(f"tools_text must be a string, got {type(tools_text).__name__}")
        out.append(_TOOLS_HEAD + tools_text + DEVELOPER_END)
    elif _truth(tools, "tools"):
        try:
            out.append(_TOOLS_HEAD + _render_tools(tools, d.trim_blocks, d.tojson == "jinja",
                                                   d.openai_shapes) + DEVELOPER_END)
        except _ERRORS as exc:
            raise _tools_error(exc) from _cause(exc)
    else:
        out.append(_NO_TOOLS)
    _render_messages(messages, start, d, out, continue_assistant_message, marks)
    _model(out, marks, False)
    if _truth(add_generation_prompt, "add_generation_prompt"):
        out.append(ASSISTANT_START)
    return out


def _truth(flag, name):
    """``{% if flag %}``: its truth; a RenderError naming the argument where that fails
    (a NumPy array, a pandas Series)."""
    if flag is True or flag is False or flag is None:
        return flag is True
    try:
        return bool(flag)
    except Exception as exc:  # noqa: BLE001 - whatever its __bool__ raises
        raise RenderError(f"{name}: {_reason(exc)}") from _cause(exc)


def _reason(exc):
    """What an error of ``_ERRORS`` says, without a message index. (Re-raises a
    ``MemoryError``: every conversion of an error to a RenderError asks here.)"""
    if isinstance(exc, MemoryError):
        raise exc
    if isinstance(exc, RenderError):
        return exc.reason
    if isinstance(exc, _Fail):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _conversation_messages(conversation):
    """The messages of a drop-in ``Conversation``; anything else that is not a list is
    an error."""
    from ._models import Conversation

    if isinstance(conversation, Conversation):
        return conversation.messages
    raise RenderError(f"messages must be a list of message dicts, got {type(conversation).__name__}")


def _template_view(messages):
    """A messages container other than an exact list (a tuple, a subclass, a drop-in
    ``Conversation``) as an exact list, read as the template reads it: its truth, its
    first item, then ``messages[1:]`` after a system message or else the container
    itself, iterated (so a subclass whose ``__len__`` or ``__iter__`` disagrees with its
    items renders what the template renders). Returns the list and whether the template
    looks at its first message for the system prompt (not where the container is
    false: its messages are then all the loop's). What the container itself raises is a
    RenderError with no message index."""
    if not isinstance(messages, (list, tuple)):
        messages = _conversation_messages(messages)
        if type(messages) is list:
            return messages, True
    try:
        if not messages:
            return [*messages], False
        first = messages[0]
    except Exception as exc:  # noqa: BLE001 - whatever the container raises
        raise RenderError(f"messages: {_reason(exc)}") from _cause(exc)
    if type(first) is not dict:
        first = _template_messages([first])[0]
    try:
        system = attr(first, "role") == "system"
    except _ERRORS as exc:
        raise _render_error(exc, 0) from _cause(exc)
    try:
        return ([first, *messages[1:]], True) if system else ([*messages], False)
    except Exception as exc:  # noqa: BLE001 - whatever the container raises
        raise RenderError(f"messages: {_reason(exc)}") from _cause(exc)


def _template_messages(messages):
    """``messages`` with each drop-in ``Message`` replaced by the dict that
    ``ApertusFormatter.format_conversation`` renders for it; other items stay."""
    from ._models import Message, conversation_to_template_messages

    return [conversation_to_template_messages([m])[0] if isinstance(m, Message) else m
            for m in messages]


def _tools_error(exc):
    """A RenderError (no message index) for a failure in the tool signatures: one
    tool's error names it (``tools[i] ('name'): ...``); others are about the list."""
    reason = _reason(exc)
    return RenderError(reason if reason.startswith(("tools[", "tools:")) else "tools: " + reason,
                       None)


def _why_content(content):
    """What is wrong with an assistant message's content the template rejects with
    "Invalid assistant content": what it is, and what was expected."""
    if isinstance(content, str):
        return ("a string after an assistant message with blocks (a conversation's "
                "assistant messages are all strings or all {\"blocks\": [...]})")
    if is_mapping(content) and "blocks" in content:
        return ("blocks after an assistant message with a string (a conversation's "
                "assistant messages are all strings or all {\"blocks\": [...]})")
    if content is None:
        return ('None (expected a string or {"blocks": [...]}; for a turn of tool calls '
                'only, give "" with "tool_calls")')
    return _found(content, "blocks", 'a string or {"blocks": [...]}')


def _found(x, key, expected):
    """What ``x`` is, for an error message (a mapping without ``key``, and its keys; or
    its type and value), and what was ``expected``."""
    if is_mapping(x):
        return f'a mapping without "{key}", keys {shown(list(x)[:5], 80)}; expected {expected}'
    return f"got {type(x).__name__} {shown(x, 60)}; expected {expected}"


def _cause(exc):
    """What a RenderError made of ``exc`` is chained to (``raise ... from``): ``exc``
    itself when the renderer did not raise it (the caller's object did: a ``__str__``
    that raises, say; its traceback stays in view, as jinja2 lets such an error
    through), else what ``exc`` was chained to, so that a wrapped error keeps its cause
    (nothing, for the renderer's own errors)."""
    if isinstance(exc, (_Fail, RenderError)):
        return exc.__cause__
    return exc


def _render_error(exc, index):
    """Whatever failed (a template ``raise_exception``, a missing value, a Python type
    error on ill-typed data) as a RenderError naming the message."""
    if isinstance(exc, RenderError) and exc.message_index is not None:
        return exc
    return RenderError(_reason(exc), index)


def _model(out, marks, on):
    """Span bookkeeping for ``render_with_spans``: the pieces appended from now on are
    (``on``) or are not the model's own text. ``marks`` holds the piece indices where
    the state changed, starting in the prompt's state; ``None`` keeps no record."""
    if marks is not None and (len(marks) & 1) != on:
        marks.append(len(out))


def _render_messages(messages, start, d, out, continue_assistant_message, marks):
    tout_open = d.tool_output_open
    tout_close = d.tool_output_close
    openai_shapes = d.openai_shapes
    in_assistant = False
    in_tool = False
    in_inner = False
    waiting = False
    fmt = _FMT_NONE
    n = len(messages)
    i = start
    try:
        while i < n:
            message = messages[i]
            role = attr(message, "role")
            if role == "user":
                in_inner = False
                if in_tool:
                    _model(out, marks, False)
                    out.append(tout_close)
                    in_tool = False
                if in_assistant:
                    _model(out, marks, True)
                    out.append(ASSISTANT_END)
                    _model(out, marks, False)
                    in_assistant = False
                if "content" in message:
                    _user(attr(message, "content"), d, out)
            elif role == "assistant":
                if not in_assistant:
                    out.append(ASSISTANT_START)
                    in_assistant = True
                if "content" not in message:
                    raise _Fail('Invalid assistant message: no "content" (a string, or '
                                '{"blocks": [...]}; "" for a turn of tool calls only)')
                content = attr(message, "content")
                if isinstance(content, str) and fmt != _FMT_MAPPING:
                    if in_tool:
                        _model(out, marks, False)
                        out.append(tout_close)
                        in_tool = False
                    _model(out, marks, True)
                    fmt = _FMT_STRING
                    out.append(text(content))  # {{ message.content }}: str(), as for a subclass
                elif is_mapping(content) and "blocks" in content and fmt != _FMT_STRING:
                    fmt = _FMT_MAPPING
                    first = True
                    blocks = attr(content, "blocks")
                    j = -1
                    block = None
                    try:
                        for block in seq(blocks, 'the assistant content\'s "blocks"'):
                            j += 1
                            btype = attr(block, "type")
                            if btype == "thoughts":
                                if in_tool:
                                    _model(out, marks, False)
                                    out.append(tout_close)
                                    in_tool = False
                                _model(out, marks, True)
                                if not in_inner:
                                    in_inner = True
                                    out.append(INNER_PREFIX)
                                out.append(text(attr(block, "text")))
                            elif btype == "tool_calls":
                                if in_tool:
                                    _model(out, marks, False)
                                    out.append(tout_close)
                                    in_tool = False
                                _model(out, marks, True)
                                calls = attr(block, "calls")
                                if in_inner and not first and _is_display_answers(calls):
                                    in_inner = False
                                    out.append(INNER_SUFFIX)
                                out.append(_block_calls(calls, openai_shapes))
                                waiting = True
                            elif btype == "tool_outputs":
                                if in_tool:
                                    raise _Fail("Cannot have both tool outputs as separate "
                                                "messages and tool outputs as blocks")
                                _model(out, marks, False)
                                out.append(tout_open)
                                out.append(", ".join([text(attr(o, "output"))
                                                      for o in seq(attr(block, "outputs"),
                                                                   'a tool_outputs block\'s "outputs"')]))
                                out.append(tout_close)
                                _model(out, marks, True)
                                waiting = False
                            elif btype == "response":
                                if in_tool:
                                    _model(out, marks, False)
                                    out.append(tout_close)
                                    in_tool = False
                                _model(out, marks, True)
                                # the template's (not loop.first and in_inner) or
                                # (in_assistant and in_inner): in_assistant always holds here
                                if in_inner:
                                    in_inner = False
                                    out.append(INNER_SUFFIX)
                                out.append(text(attr(block, "text")))
                            else:
                                try:
                                    raise _Fail(text(cat("Invalid assistant block type: ", btype,
                                                         'an assistant block\'s "type"')))
                                except _Fail as exc:
                                    raise _not_a_list(exc, blocks,
                                                      'the assistant content\'s "blocks"') from _cause(exc)
                            first = False
                    except _ERRORS as exc:
                        if j < 0:
                            raise
                        raise _at_item(exc, blocks, "blocks", j, block,
                                       'a block (a dict with "type")') from _cause(exc)
                else:
                    raise _Fail("Invalid assistant content: " + _why_content(content))
                if "tool_calls" in message:
                    legacy = attr(message, "tool_calls")
                    if legacy:
                        _model(out, marks, True)
                        out.append(_legacy_calls(legacy, openai_shapes))
                        waiting = True
            elif role == "tool":
                if not in_assistant:
                    raise _Fail("Tool message outside of assistant" + _tool_outside(messages, i))
                _model(out, marks, False)
                if not in_tool:
                    out.append(tout_open)
                    in_tool = True
                else:
                    out.append(", ")
                out.append(text(attr(message, "content")))
                waiting = False
            else:
                raise _Fail("Invalid message role" + _role_found(message, role))
            i += 1
    except _ERRORS as exc:
        raise _render_error(exc, i) from _cause(exc)
    if in_tool:
        _model(out, marks, False)
        out.append(tout_close)
    # (read only here, as the template reads it: an argument whose truth fails fails
    # only where the template would fail on it)
    if d.closes_last_turn and in_assistant and \
            not _truth(continue_assistant_message, "continue_assistant_message") and \
            not waiting:
        _model(out, marks, True)
        out.append(ASSISTANT_END)


def _role_found(message, role):
    """What was there instead of a known role, for the error message."""
    if not is_mapping(message):
        return f" (a message is a dict with \"role\" and \"content\", got {type(message).__name__})"
    if role is UNDEFINED:
        return " (no \"role\")"
    if role == "system":
        return ": 'system' (only the first message may be a system message)"
    return f": {shown(role, 60)} (expected system, user, assistant or tool)"


def _tool_outside(messages, i):
    """Where a tool message that is not in an assistant turn stands."""
    where = ("it is the first message" if i == 0 else
             f"it follows a {shown(attr(messages[i - 1], 'role'), 30)} message")
    return f" ({where}; tool messages follow the assistant message whose tool calls they answer)"


def _why_system(message):
    """What is wrong with a first message whose role is system."""
    if "content" not in message:
        return ' (no "content"; expected a string or {"text": ...})'
    expected = 'a string or {"text": ...}'
    return f" (content: {_found(attr(message, 'content'), 'text', expected)})"


def _why_user(content, d):
    """What is wrong with a user message's content."""
    expected = ('a string, {"parts": [...]} or a list of parts' if d.list_user_content
                else 'a string or {"parts": [...]}')
    return f" (content: {_found(content, 'parts', expected)})"


def _why_call(name, args):
    """Which of a tool call's name and arguments is missing or empty."""
    bad = [f"{field} {'is missing' if v is UNDEFINED else f'is empty ({shown(v, 20)})'}"
           for field, v in (('"name"', name), ('"arguments"', args)) if not v]
    return " (" + " and ".join(bad) + ")"


def _user(content, d, out):
    """A user message that has ``content``."""
    out.append(USER_START)
    if isinstance(content, str):
        out.append(text(content))  # {{ message.content }}: str(), as for a subclass
    elif is_mapping(content) and "parts" in content:
        _user_parts(attr(content, "parts"), d, out)
    elif d.list_user_content and not is_mapping(content) and is_iterable(content):
        _user_parts(content, d, out)
    else:
        raise _Fail("Invalid user message: user" + _why_user(content, d))
    out.append(USER_END)


def _user_parts(parts, d, out):
    image_parts = d.image_parts
    audio_parts = d.audio_parts
    for part in seq(parts, 'the user content\'s "parts"'):
        ptype = attr(part, "type")
        if ptype == "text":
            out.append(text(attr(part, "text")))
        elif ptype in image_parts:
            out.append(IMAGE)
        elif ptype in audio_parts:
            out.append(AUDIO)
        else:
            try:
                raise _Fail(text(cat("Invalid user part: ", ptype, 'a user content part\'s "type"')))
            except _Fail as exc:
                raise _not_a_list(exc, parts, 'the user content\'s "parts"') from _cause(exc)


def _is_display_answers(calls):
    """``block.calls|length == 1 and block.calls[0].name == 'display_answers'``."""
    if type(calls) is list:
        if len(calls) != 1:
            return False
    else:
        try:
            if len(calls) != 1:
                return False
        except TypeError:
            raise _Fail(f"a tool_calls block's \"calls\": expected a list, got {type(calls).__name__} "
                        f"{shown(calls, 60)}") from None
    return attr(item0(calls), "name") == "display_answers"


def _block_calls(calls, openai_shapes):
    """``<|tools_prefix|>[{"name": arguments}, ...]<|tools_suffix|>`` of a block."""
    return _call_list(calls, openai_shapes, _block_call, 'a tool_calls block\'s "calls"', "calls")


def _call_list(calls, openai_shapes, one, field, where):
    """The tool-call list of ``calls``, each call written by ``one``. An error names the
    call by its index (``where[j]: ...``), or says that ``calls`` (``field``) is no list."""
    parts = []
    j = -1
    call = None
    try:
        for call in seq(calls, field):
            j += 1
            parts.append(one(call, openai_shapes))
    except _ERRORS as exc:
        failed = exc if j < 0 else _at_item(exc, calls, where, j, call, "a tool call (a dict)")
        raise _not_a_list(failed, calls, field) from _cause(exc)
    return TOOLS_PREFIX + "[" + ", ".join(parts) + "]" + TOOLS_SUFFIX


def _block_call(call, openai_shapes):
    """``{"name": arguments}`` of one call of a tool_calls block."""
    if openai_shapes:
        fn = attr(call, "function")
        if fn:
            call = fn
        head = cat('{"', attr(call, "name"), 'a tool call\'s "name"') + '": '
        args = attr(call, "arguments")
        if args is UNDEFINED:  # |tojson fails on it
            raise _Fail('a tool call\'s "arguments": expected a string or a JSON value, it is missing')
        if not isinstance(args, str):
            args = tojson(args, False)
        return text(cat(head, args, 'a tool call\'s "arguments"') + "}")
    head = cat('{"', attr(call, "name"), 'a tool call\'s "name"') + '": '
    return text(cat(head, attr(call, "arguments"), 'a tool call\'s "arguments"') + "}")


def _legacy_calls(calls, openai_shapes):
    """The same for an OpenAI-style ``message.tool_calls`` list."""
    return _call_list(calls, openai_shapes, _legacy_call, 'the message\'s "tool_calls"', "tool_calls")


def _legacy_call(call, openai_shapes):
    """``{"name": arguments}`` of one call of a message's ``tool_calls``."""
    ctype = attr(call, "type")
    if openai_shapes:
        if ctype is not UNDEFINED and ctype != "function":
            raise _Fail(text(cat("Invalid tool call type: ", ctype, 'a tool call\'s "type"')))
        fn = attr(call, "function")
        if fn:
            call = fn
        name = attr(call, "name")
        args = attr(call, "arguments")
        if not (name and args):
            raise _Fail("Invalid tool call" + _why_call(name, args))
        head = cat('{"', name, 'a tool call\'s "name"') + '": '
        if not isinstance(args, str):
            args = tojson(args, False)
        return text(cat(head, args, 'a tool call\'s "arguments"') + "}")
    if ctype != "function":
        raise _Fail(text(cat("Invalid tool call type: ", ctype, 'a tool call\'s "type"')))
    fn = attr(call, "function")
    if fn is UNDEFINED:  # the template reads function.name
        raise _Fail('a tool call\'s "function": it is missing (expected {"name": ..., "arguments": ...})')
    head = cat('{"', attr(fn, "name"), 'a tool call\'s "function.name"') + '": '
    return text(cat(head, attr(fn, "arguments"), 'a tool call\'s "function.arguments"') + "}")


def renders_to(text, messages, dialect, tools, enable_thinking, add_generation_prompt,
               continue_assistant_message, date, bos_token, tools_text):
    """Whether :func:`render` (these arguments, all positional) gives exactly ``text``.
    Compiled, the hot path compares its pieces with ``text`` without building the
    string; ``RenderError`` for a conversation the template rejects."""
    if _MATCHES is not None:
        same = _MATCHES(text, messages, dialect, tools, enable_thinking, add_generation_prompt,
                        continue_assistant_message, date, bos_token, tools_text)
        if same is not None:
            return same
    return render(messages, dialect=dialect, tools=tools, enable_thinking=enable_thinking,
                  add_generation_prompt=add_generation_prompt,
                  continue_assistant_message=continue_assistant_message, date=date,
                  bos_token=bos_token, tools_text=tools_text) == text


# The compiled hot path (``_render_fast.pyx``) renders the usual conversation and hands
# anything else back to ``_render_general``; without a compiler there is none. Compiled,
# ``render`` is ``_render_fast.render`` (same signature; the hot path, then the general
# path), which saves a call layer per conversation.
# The annotations' names at run time, for typing.get_type_hints and
# inspect.signature(eval_str=True) (jsonargparse, pydantic's validate_call): defined
# after the functions, as the header's TYPE_CHECKING block keeps Cython from typing by them.
from collections.abc import Callable, Mapping, Sequence  # noqa: E402

from ._dialects import Dialect  # noqa: E402
from ._models import Conversation, Message  # noqa: E402

Messages = Sequence[Mapping[str, Any] | Message] | Conversation
Tools = Sequence[Mapping[str, Any] | Callable[..., Any]] | None
DateArg = _dt.date | str | None

try:
    from . import _render_fast
except ImportError:
    _FAST = _MATCHES = _FAST_MARKS = None
else:
    _render_fast.configure(_render_tool, render_date, DIALECTS, _render_general, tojson)
    _FAST = _render_fast.fast
    _MATCHES = _render_fast.matches
    _FAST_MARKS = _render_fast.fast_with_marks
    _render_py = render   # the plain-Python entry (what runs without a compiler)
    _render_fast.render.__doc__ = render.__doc__
    # (the annotations too, for inspect.signature and help(); type checkers read them here)
    # (resolved here: the compiled function's own namespace does not have their names)
    _render_fast.render.__annotations__ = _typing.get_type_hints(render)
    render = _render_fast.render
