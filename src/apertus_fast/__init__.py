"""apertus-fast: the Apertus chat format, rendered and parsed at native speed.

Render conversations byte-identically to the official chat templates, parse rendered
text back to the exact structure, and use it as a drop-in for the reference package::

    import apertus_fast
    text = apertus_fast.render(messages, dialect="apertus-1.5", tools=tools)
    conv = apertus_fast.parse(text, dialect="apertus-1.5")

    import apertus_fast as apertus_format      # drop-in for the reference package
    apertus_fast.install_as_apertus_format()   # ... also for `from apertus_format import X`

Names are loaded on first use, so ``import apertus_fast`` is cheap.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# public name -> private module defining it
_EXPORTS = {
    # rendering
    "render": "_render",
    "render_date": "_render",
    "render_tools": "_render",
    "render_with_spans": "_spans",
    "reasoning_to_blocks": "_reasoning",
    "unrendered_reasoning": "_reasoning",
    "REASONING_FIELDS": "_reasoning",
    "Rendered": "_spans",
    # dialects
    "DIALECTS": "_dialects",
    "DEFAULT_DIALECT": "_dialects",
    "Dialect": "_dialects",
    "Kind": "_dialects",
    "get_dialect": "_dialects",
    # errors
    "ApertusError": "_errors",
    "RenderError": "_errors",
    "DialectWarning": "_errors",
    "ParseError": "_errors",
    # lexing
    "lex": "_lex",
    "Event": "_lex",
    "Lexer": "_lex",
    # parsing
    "parse": "_parse",
    "normalize": "_parse",
    "ParsedConversation": "_parse",
    # model output and streams
    "StreamParser": "_stream",
    "Delta": "_stream",
    "Completion": "_stream",
    "parse_completion": "_stream",
    # drop-in reference API
    "Role": "_models",
    "BlockType": "_models",
    "ContentFormat": "_models",
    "SectionType": "_models",
    "TextPart": "_models",
    "UserContent": "_models",
    "SystemContent": "_models",
    "AssistantBlock": "_models",
    "ToolCall": "_models",
    "ToolOutput": "_models",
    "AssistantContent": "_models",
    "Message": "_models",
    "Conversation": "_models",
    "ApertusFormatter": "_formatter",
}

__all__ = sorted(_EXPORTS) + ["BACKEND", "backends", "install_as_apertus_format", "__version__"]

if TYPE_CHECKING:  # what the names above load on first use, for type checkers
    # (`import X as X`: an explicit re-export, which strict checkers require)
    from ._dialects import DEFAULT_DIALECT as DEFAULT_DIALECT
    from ._dialects import DIALECTS as DIALECTS
    from ._dialects import Dialect as Dialect
    from ._dialects import Kind as Kind
    from ._dialects import get_dialect as get_dialect
    from ._errors import ApertusError as ApertusError
    from ._errors import DialectWarning as DialectWarning
    from ._errors import ParseError as ParseError
    from ._errors import RenderError as RenderError
    from ._formatter import ApertusFormatter as ApertusFormatter
    from ._lex import Event as Event
    from ._lex import Lexer as Lexer
    from ._lex import lex as lex
    from ._models import AssistantBlock as AssistantBlock
    from ._models import AssistantContent as AssistantContent
    from ._models import BlockType as BlockType
    from ._models import ContentFormat as ContentFormat
    from ._models import Conversation as Conversation
    from ._models import Message as Message
    from ._models import Role as Role
    from ._models import SectionType as SectionType
    from ._models import SystemContent as SystemContent
    from ._models import TextPart as TextPart
    from ._models import ToolCall as ToolCall
    from ._models import ToolOutput as ToolOutput
    from ._models import UserContent as UserContent
    from ._parse import ParsedConversation as ParsedConversation
    from ._parse import normalize as normalize
    from ._parse import parse as parse
    from ._reasoning import REASONING_FIELDS as REASONING_FIELDS
    from ._reasoning import reasoning_to_blocks as reasoning_to_blocks
    from ._reasoning import unrendered_reasoning as unrendered_reasoning
    from ._render import render as render
    from ._render import render_date as render_date
    from ._render import render_tools as render_tools
    from ._spans import Rendered as Rendered
    from ._spans import render_with_spans as render_with_spans
    from ._stream import Completion as Completion
    from ._stream import Delta as Delta
    from ._stream import StreamParser as StreamParser
    from ._stream import parse_completion as parse_completion
    from . import enums as enums
    from . import formatter as formatter
    from . import models as models

    BACKEND: str

# The reference package's modules (``apertus_format.enums``, ``.models``, ``.formatter``),
# for code that imports from them; loaded on first use like the names above.
_REFERENCE_MODULES = ("enums", "models", "formatter")

#: Modules that are compiled by Cython when the package is built with a compiler.
#: ``_render_fast`` (the renderer's hot path) exists only compiled: without it, the
#: general renderer in ``_render`` renders everything. ``_jsonl`` (the command line's
#: JSON lines) likewise: without it, the json module writes them.
_NATIVE_MODULES = ("_lexer", "_render", "_render_fast", "_parse", "_stream", "_jsonl", "_mask")


#: Compiled-only modules that the package does without when they do not load: the
#: lexer's twin ``_lexer_py``, the general renderer, the json module run instead.
_OPTIONAL_NATIVE = ("_lexer", "_render_fast", "_jsonl")


def backends() -> dict[str, str]:
    """Which implementation each accelerated module runs on: ``"cython"`` (compiled
    extension) or ``"python"`` (pure-Python source; the lexer's twin)."""
    import importlib.util

    result = {}
    for name in _NATIVE_MODULES:
        # the spec says which file an import would load, without importing it
        spec = importlib.util.find_spec(f"{__name__}.{name}")
        origin = (spec.origin or "") if spec is not None else ""
        if name in _OPTIONAL_NATIVE:
            # one that is there but does not load (built for another Python, a stale
            # or broken file) is done without, as when it is missing: ask the import
            try:
                loaded = bool(origin) and importlib.import_module(f"{__name__}.{name}") is not None
            except ImportError:
                loaded = False
            result[name] = "cython" if loaded else "python"
        else:
            result[name] = "python" if origin.endswith(".py") else "cython"
    return result


def install_as_apertus_format() -> ModuleType:
    """Make ``import apertus_format`` load apertus-fast, as ``pymysql.install_as_MySQLdb()``
    does for MySQLdb.

    ``import apertus_fast as apertus_format`` serves code in the same file. Code
    elsewhere that runs ``import apertus_format`` or ``from apertus_format import
    Message`` looks the name up in ``sys.modules``, so call this once at start-up,
    before that code is imported. ``apertus_format`` is then a module that reads every
    name from apertus-fast (the same objects) but has the reference's ``__all__``, so
    ``from apertus_format import *`` binds the reference's names only. The reference's
    modules come along: ``from apertus_format.models import Message`` (and ``.enums``,
    ``.formatter``) gives the same objects. It replaces the reference package if that is
    installed (or already imported: modules that imported it before keep their
    references). It is a module as the import system knows one, with a spec and a
    loader (a finder put first on ``sys.meta_path``): ``importlib.util.find_spec
    ("apertus_format")`` finds it and ``importlib.reload(apertus_format)`` works.
    Returns the ``apertus_fast`` module."""
    import sys

    from . import _reference

    # (a module of its own that reads everything from this one, with the reference's
    # __all__, so that `from apertus_format import *` binds the reference's names only)
    _reference.install()
    return sys.modules[__name__]


def _backend() -> str:
    kinds = set(backends().values())
    return kinds.pop() if len(kinds) == 1 else "mixed"


# (hidden from type checkers: a module __getattr__ makes every misspelt name, such as
# ``apertus_fast.rendr``, an ``Any`` they accept; they see the names in the
# TYPE_CHECKING block above instead)
if not TYPE_CHECKING:
    def __getattr__(name):
        if name == "BACKEND":
            value = _backend()
        elif name in _EXPORTS:
            module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
            value = getattr(module, name)
        elif name in _REFERENCE_MODULES:
            value = importlib.import_module(f"{__name__}.{name}")
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value


#: What this file imports for itself: not the package's names, so not in ``dir()``.
_OWN_IMPORTS = frozenset({"annotations", "importlib", "ModuleType", "TYPE_CHECKING"})


def __dir__():
    # the API (loaded or not), the reference's modules, and what is defined here; not
    # the helpers imported above, which tab completion would otherwise offer as the API
    return sorted((set(globals()) - _OWN_IMPORTS) | set(__all__) | set(_REFERENCE_MODULES))
