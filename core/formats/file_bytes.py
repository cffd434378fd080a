"""A model or motion file's bytes, or the reason they cannot be read."""

from __future__ import annotations

import os

from ..errors import FileFormatError


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole file at ``path``; :class:`FileFormatError` naming it when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise FileFormatError(f"{os.fspath(path)}: cannot read the file ({exc.strerror or exc})") from exc
