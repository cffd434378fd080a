"""The files a command is about to write, checked before any work starts.

A command refuses, with one line and before it reads anything, an output that would destroy an
input (the same file, through a symbolic or hard link too), a format it does not write, and a
place it cannot write (a folder, a device, a read-only or missing location). Nothing is written
by a refused command; the probe of a folder's writability leaves no file behind. An input that
exists but is not a regular file (a named pipe, a socket, a device, a folder) is refused as such
before anything opens it: a named pipe would keep the read waiting for a writer for ever.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from .batch.pack_limits import not_regular
from .errors import FileFormatError, MarionetteError

#: What ``-o`` can name today: Blender files only.
BLEND = (".blend",)

#: Exit status of a command line that cannot be right whatever the files hold (as argparse's).
USAGE = 2


class OutputRefused(MarionetteError):
    """An output path refused before any work; ``exit_status`` is 2 for a wrong command line
    (an output naming an input, a format not written), 1 for a place that cannot be written."""

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.exit_status = exit_status


@dataclass(frozen=True)
class Output:
    """One file a command writes: the option naming it, its path, the extensions it may have
    (``None``: any) and, for a pack, whether numbered volumes ``OUT.002.blend``... go with it."""

    option: str
    path: str
    extensions: tuple[str, ...] | None = None
    volumes: bool = False


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(os.path.abspath(os.path.expanduser(path))))


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one file: the same path once links are resolved, or the same
    file on disk (a hard link)."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: str, folder: str) -> bool:
    p, f = _real(path), _real(folder)
    try:
        return os.path.commonpath([p, f]) == f and p != f
    except ValueError:  # different drives
        return False


def _written_with(path: str, out: Output) -> bool:
    """Whether writing ``out`` may also write or remove ``path``: the half-written file a .blend is
    saved to first, and for a pack its numbered volumes and parts."""
    o, p = _real(out.path), _real(path)
    if o.endswith(".blend") and p == o + ".partial.blend":
        return True
    if not out.volumes:
        return False
    if p.startswith(o + ".parts" + os.sep):
        return True
    stem = o[: -len(".blend")] if o.endswith(".blend") else o
    return os.path.dirname(p) == os.path.dirname(o) and re.fullmatch(re.escape(stem) + r"\.\d{3}\.blend", p) is not None


def folder_write_problem(folder: str) -> str | None:
    """Why files cannot be written in ``folder`` (made with its missing parents when the first
    file is written, so the nearest existing one decides), or ``None``: a file is made and removed
    there to find out."""
    nearest = os.path.abspath(folder)
    if os.path.lexists(nearest) and not os.path.isdir(nearest):
        return f"{nearest} is not a folder"
    while not os.path.exists(nearest):
        parent = os.path.dirname(nearest)
        if parent == nearest:
            break
        nearest = parent
    if not os.path.isdir(nearest):
        return f"{nearest} is not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".marionette-probe-", dir=nearest)
    except OSError as exc:
        return f"nothing can be written in {nearest} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(probe)
    return None


def _writable_place(option: str, path: str) -> None:
    """Refuse a path that exists as anything but a regular file, or whose folder cannot be made
    or written."""
    if os.path.isdir(path):
        raise OutputRefused(f"{option} {path}: is a folder; give a file name")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise OutputRefused(f"{option} {path}: exists and is not a regular file")
    problem = folder_write_problem(os.path.dirname(os.path.abspath(path)))
    if problem is not None:
        raise OutputRefused(f"{option} {path}: cannot be written, {problem}")


def check_outputs(
    outputs: Sequence[Output],
    inputs: Sequence[tuple[str, str]],
    *,
    pack_folders: Sequence[str] = (),
    pack_extensions: tuple[str, ...] = (),
    resume: bool = False,
) -> None:
    """Refuse (:class:`OutputRefused`) any output that is an input (``(role, path)`` pairs), another
    output, a file of a pack folder (an existing file with one of ``pack_extensions``, unless
    ``resume`` continues an output kept there), has an extension it may not have, or cannot be
    written. Checks every output before the first is written."""
    given = [o for o in outputs if o.path]
    for k, out in enumerate(given):
        for role, path in inputs:
            if path and (same_file(out.path, path) or _written_with(path, out)):
                raise OutputRefused(
                    f"{out.option} {out.path}: that is the {role} ({path}); writing it would destroy an input, "
                    "choose another output name",
                    USAGE,
                )
        for other in given[:k]:
            if same_file(out.path, other.path):
                raise OutputRefused(f"{out.option} {out.path}: the same file is given to {other.option}", USAGE)
        if not resume and os.path.isfile(out.path) and out.path.lower().endswith(pack_extensions):
            for folder in pack_folders:
                if _inside(out.path, folder):
                    raise OutputRefused(
                        f"{out.option} {out.path}: that is a clip file of the pack folder {folder}; "
                        "write the output outside the pack",
                        USAGE,
                    )
        if os.path.isdir(out.path):
            raise OutputRefused(f"{out.option} {out.path}: is a folder; give a file name")
        if out.extensions is not None and not out.path.lower().endswith(out.extensions):
            ext = os.path.splitext(out.path)[1] or "a name without extension"
            raise OutputRefused(
                f"{out.option} {out.path}: this command writes {' or '.join(out.extensions)} files only, not {ext}; "
                f"end the name with {out.extensions[0]}",
                USAGE,
            )
    for out in given:
        _writable_place(out.option, out.path)


def check_inputs(inputs: Sequence[tuple[str, str]]) -> None:
    """Refuse (:class:`FileFormatError`) an input (``(role, path)`` pairs) that exists but is not a
    regular file, naming what it is; never opens it. A missing input is left to its reader."""
    for _role, path in inputs:
        why = not_regular(path) if path and os.path.exists(path) else None
        if why is not None:
            raise FileFormatError(f"{path}: {why}")
