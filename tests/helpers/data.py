"""Where the third-party rigs and clips are: ``tests/data`` (their origins and licences in
``tests/data/README.md``), or the copy ``MARIONETTE_SHARED_DATA`` points at. A missing file fails
the test that needs it, naming the file: it is never skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("MARIONETTE_SHARED_DATA") or REPO / "tests" / "data")


def shared_file(relative: str) -> Path:
    """Path of a third-party file in ``tests/data`` (``relative`` as ``"bvh/cmu/02_02_daz.bvh"``);
    fails the test, naming the file, when it is absent."""
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.fail(f"third-party test file {relative} is missing (looked in {SHARED_DATA}; see tests/data/README.md)", pytrace=False)
    return path
