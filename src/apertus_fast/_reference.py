"""``apertus_format`` as :func:`apertus_fast.install_as_apertus_format` registers it.

A module object under the reference package's name that reads every attribute from
``apertus_fast`` (the same objects: ``apertus_format.Message is apertus_fast.Message``)
but keeps the reference's ``__all__``: ``from apertus_format import *`` binds the
reference's fifteen names only, not apertus-fast's own ``parse``, ``render``, ``lex``, ...,
which would replace names of the same spelling in the importing module.
"""

from __future__ import annotations

import types

#: The reference package's ``__all__``, in its order.
REFERENCE_ALL = (
    "Message", "Conversation", "ApertusFormatter",
    "SystemContent", "UserContent", "AssistantContent", "TextPart", "AssistantBlock",
    "ToolCall", "ToolOutput",
    "Role", "BlockType", "ContentFormat", "SectionType",
    "__version__",
)


class ReferencePackage(types.ModuleType):
    """apertus-fast under the name ``apertus_format`` (see the module docstring).
    Attributes set on it stay on it, as on any module; reading falls through to
    ``apertus_fast``."""

    def __init__(self, fast: types.ModuleType):
        super().__init__("apertus_format", fast.__doc__)
        self.__all__ = list(REFERENCE_ALL)
        self.__version__ = fast.__version__
        self._fast = fast

    def __getattr__(self, name):
        return getattr(self.__dict__["_fast"], name)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(dir(self.__dict__["_fast"])))

    def __repr__(self):
        return f"<module 'apertus_format' (apertus-fast, {self._fast.__file__!r})>"
