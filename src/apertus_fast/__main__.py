"""``python -m apertus_fast ...``: the ``apertus-fast`` command line (see ``cli``)."""

import sys

from .cli import main

sys.exit(main())
