"""The reference package's ``apertus_format.enums`` module: the drop-in enums.

``from apertus_format.enums import Role`` keeps working after
:func:`apertus_fast.install_as_apertus_format` (the objects are ``apertus_fast.Role``, ...).
"""

from enum import Enum, auto  # noqa: F401  (the reference's enums module imports them)

from ._models import BlockType, ContentFormat, Role, SectionType

__all__ = ["Role", "BlockType", "ContentFormat", "SectionType"]
