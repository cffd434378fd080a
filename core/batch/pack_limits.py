"""What a pack may hold, and how many workers it can use.

A pack folder may hold entries that are not regular files: a named pipe (FIFO), a socket, a
device, a link to one of those. Opening a FIFO for reading waits for a writer, forever; reading
``/dev/zero`` never ends. :func:`not_regular` tells them apart from a stat alone, so such an entry
is refused with its reason before anything opens it.

:func:`useful_jobs` lowers ``--jobs`` to what the machine and the pack can use: one worker per
core, and no more workers than the pack has work for (a BVH file is one job; a file read through
an importer may be shared by two workers, never more).
"""

from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def not_regular(path: str) -> str | None:
    """Why ``path`` is not read as a clip file (``None`` for a regular file, or a link to one).
    Only stats the path: never opens it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:  # a broken link, no permission to search a folder
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"not a regular file ({kind})"


def why_unreadable(path: str) -> str | None:
    """Why ``path`` cannot be read as a file: ``"no such file"``, or what it is when it is not a
    regular file (:func:`not_regular`); ``None`` for a regular file. Only stats the path."""
    if not os.path.exists(path):
        return "no such file"
    return not_regular(path)


def useful_jobs(requested: int | None, cores: int, files: int, shared: int = 0) -> tuple[int, str | None]:
    """Workers to start for a pack of ``files`` files of which ``shared`` are read through an
    importer (two workers may share one), on ``cores`` cores, when ``requested`` were asked for
    (``None``: one per core). Returns the number and, when it is less than was asked for, one
    line saying why."""
    cores = max(1, int(cores))
    work = max(1, int(files) + int(shared))  # the most jobs the pack can ever have in flight
    asked = max(1, int(requested)) if requested else cores
    n = min(asked, cores, work)
    if requested is None or n >= asked:
        return n, None
    if n == cores and cores <= work:
        why = f"one worker per core ({cores} core{'s' if cores != 1 else ''})"
    elif shared:
        why = f"the most the pack can use ({files} file{'s' if files != 1 else ''}; a file read through an importer is shared by at most two workers)"
    else:
        why = f"one worker per file ({files} file{'s' if files != 1 else ''})"
    return n, f"--jobs {asked} lowered to {n}: {why}"
