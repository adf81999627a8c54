"""``apertus_format`` as :func:`apertus_fast.install_as_apertus_format` registers it.

A module object under the reference package's name that reads every attribute from
``apertus_fast`` (the same objects: ``apertus_format.Message is apertus_fast.Message``)
but keeps the reference's ``__all__``: ``from apertus_format import *`` binds the
reference's fifteen names only, not apertus-fast's own ``parse``, ``render``, ``lex``, ...,
which would replace names of the same spelling in the importing module.

It is a module as the import system knows one: :class:`Finder`, first on
``sys.meta_path``, finds ``apertus_format`` and its modules ``enums``, ``models`` and
``formatter`` (apertus-fast's), so that ``importlib.util.find_spec("apertus_format")``
returns its spec (optional-dependency checks), ``importlib.reload(apertus_format)`` works,
and an installed reference package is not found in its place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

#: The reference package's modules, served by apertus-fast's of the same name (the
#: package's list, which its lazy attributes use too)
from . import _REFERENCE_MODULES as REFERENCE_MODULES

#: The reference package's ``__all__``, in its order.
REFERENCE_ALL = (
    "Message", "Conversation", "ApertusFormatter",
    "SystemContent", "UserContent", "AssistantContent", "TextPart", "AssistantBlock",
    "ToolCall", "ToolOutput",
    "Role", "BlockType", "ContentFormat", "SectionType",
    "__version__",
)

NAME = "apertus_format"


class ReferencePackage(types.ModuleType):
    """apertus-fast under the name ``apertus_format`` (see the module docstring).
    Attributes set on it stay on it, as on any module; reading falls through to
    ``apertus_fast``."""

    def __init__(self, fast: types.ModuleType):
        super().__init__(NAME, fast.__doc__)
        self._setup(fast)

    def _setup(self, fast: types.ModuleType):
        self.__all__ = list(REFERENCE_ALL)
        self.__version__ = fast.__version__
        # a package whose only modules are the reference's (found by Finder): not
        # apertus-fast's directory, whose private modules would load a second time as
        # apertus_format._models, ... with classes of their own
        self.__path__ = []
        self._fast = fast

    def __getattr__(self, name):
        return getattr(self.__dict__["_fast"], name)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(dir(self.__dict__["_fast"])))

    def __repr__(self):
        return f"<module 'apertus_format' (apertus-fast, {self._fast.__file__!r})>"


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads ``apertus_format`` (a :class:`ReferencePackage`) and
    ``apertus_format.enums`` / ``.models`` / ``.formatter`` (apertus-fast's modules
    themselves), for the import system: ``import``, ``importlib.util.find_spec`` and
    ``importlib.reload``. Installed first on ``sys.meta_path`` by
    :func:`apertus_fast.install_as_apertus_format`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == NAME:
            return importlib.machinery.ModuleSpec(
                NAME, self, origin=_fast().__file__, is_package=True)
        package, _, module = fullname.partition(".")
        if package == NAME and module in REFERENCE_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self, origin=_fast_module(module).__file__)
        return None

    def create_module(self, spec):
        if spec.name == NAME:
            return ReferencePackage(_fast())
        # apertus-fast's module itself (the same objects); the import system sets its
        # __spec__ to this spec, which exec_module gives back
        module = _fast_module(spec.name.partition(".")[2])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        if isinstance(module, ReferencePackage):
            module._setup(_fast())  # (a reload: the same module, set up again)
        else:
            spec = module.__spec__
            if spec is not None and spec.loader is self and spec.loader_state is not None:
                module.__spec__ = spec.loader_state

    def __repr__(self):
        return "<apertus_fast's finder for apertus_format>"


def _fast() -> types.ModuleType:
    return importlib.import_module("apertus_fast")


def _fast_module(name: str) -> types.ModuleType:
    return importlib.import_module(f"apertus_fast.{name}")


def install() -> types.ModuleType:
    """Put :class:`Finder` first on ``sys.meta_path`` (once) and register
    ``apertus_format`` and its modules in ``sys.modules``, replacing whatever is there
    (the reference package, imported before). Returns the ``apertus_format`` module."""
    finder = next((f for f in sys.meta_path if isinstance(f, Finder)), None)
    if finder is None:
        finder = Finder()
    if not sys.meta_path or sys.meta_path[0] is not finder:
        # (first, before the path finder, which would find an installed reference)
        try:
            sys.meta_path.remove(finder)
        except ValueError:
            pass
        sys.meta_path.insert(0, finder)
    spec = finder.find_spec(NAME)
    package = importlib.util.module_from_spec(spec)
    finder.exec_module(package)
    sys.modules[NAME] = package
    for name in REFERENCE_MODULES:
        sys.modules[f"{NAME}.{name}"] = _fast_module(name)
    return package
