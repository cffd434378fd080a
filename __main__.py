"""``python -m marionette``: the command line (see :mod:`marionette.cli`)."""

import sys

from .cli import main

sys.exit(main())
