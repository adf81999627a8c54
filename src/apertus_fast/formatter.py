"""The reference package's ``apertus_format.formatter`` module: ``ApertusFormatter``.

``from apertus_format.formatter import ApertusFormatter`` keeps working after
:func:`apertus_fast.install_as_apertus_format` (the class is ``apertus_fast.ApertusFormatter``).
"""

from ._formatter import ApertusFormatter

__all__ = ["ApertusFormatter"]
