"""The reference package's ``apertus_format.formatter`` module: ``ApertusFormatter``.

``from apertus_format.formatter import ApertusFormatter`` keeps working after
:func:`apertus_fast.install_as_apertus_format` (the class is ``apertus_fast.ApertusFormatter``).
The module also holds the names the reference's holds, for code that imports or
patches them here: the models and enums it uses, ``json``, ``re``, ``os``, ``datetime``
(the formatter reads today's date through ``datetime.now()`` looked up here, so
``mock.patch("apertus_format.formatter.datetime")`` fixes it as it does for the
reference), and jinja2's ``Template`` and ``TemplateError`` (loaded on first use: jinja2
is not a dependency; errors the formatter raises are ``TemplateError`` instances
wherever jinja2 is importable).
"""

import json  # noqa: F401  (the reference's module namespace)
import os  # noqa: F401
import re  # noqa: F401
from datetime import datetime  # noqa: F401
from typing import TYPE_CHECKING, Any, Dict, List, Optional  # noqa: F401

from ._formatter import ApertusFormatter
# (as the reference's formatter imports them)
from .enums import ContentFormat, Role  # noqa: F401
from .models import AssistantContent, Conversation, Message, SystemContent, UserContent  # noqa: F401

__all__ = ["ApertusFormatter"]


if TYPE_CHECKING:
    from jinja2 import Template as Template, TemplateError as TemplateError
else:
    # (hidden from type checkers, to which a module __getattr__ makes every misspelt
    # name of this module an Any)
    def __getattr__(name):
        # jinja2's names, imported only when asked for (PEP 562)
        if name in ("Template", "TemplateError"):
            try:
                import jinja2
            except ImportError:
                raise AttributeError(f"{__name__}.{name} is jinja2's {name}: pip install jinja2") from None
            return getattr(jinja2, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
