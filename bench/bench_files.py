"""The third-party files the benchmarks read: the repository's ``tests/data`` (origins and licences
in ``tests/data/README.md``), or the copy ``MARIONETTE_SHARED_DATA`` points at, as for the tests."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ.get("MARIONETTE_SHARED_DATA") or Path(__file__).resolve().parents[1] / "tests" / "data")
