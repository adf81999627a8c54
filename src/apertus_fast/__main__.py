"""``python -m apertus_fast ...``: the ``apertus-fast`` command line (see ``cli``)."""

from .cli import program

program()
