"""``python -m marionette``: the command line (see :mod:`marionette.cli.main`)."""

import sys

from .cli.main import main

sys.exit(main())
