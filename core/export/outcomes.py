"""What an export of several clips did, clip by clip, and the lines a person reads of it (the
sidebar's Export): each clip written (its files), failed (why) or not started (the run was
stopped first). Plain data, no Blender."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

EXPORTED = "exported"
FAILED = "failed"
NOT_STARTED = "not started"


@dataclass
class ClipExport:
    """One clip of an export: the Action ``clip``, the file it is written to, what became of it."""

    clip: str
    path: str
    status: str = NOT_STARTED
    files: list[str] = field(default_factory=list)
    reason: str | None = None


@dataclass
class ExportOutcome:
    """Every clip of an export, in the order they were asked for; ``stopped``: why the run ended
    before its last clip (Esc, a process that could not start), ``None`` when it did not."""

    clips: list[ClipExport]
    folder: str
    description: str
    stopped: str | None = None

    @property
    def written(self) -> list[ClipExport]:
        return [c for c in self.clips if c.status == EXPORTED]

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(c.status == EXPORTED for c in self.clips)

    def lines(self) -> list[str]:
        """A totals line, then one line per clip that was not written (failed, then not started)."""
        n = len(self.clips)
        head = f"exported {len(self.written)} of {n} clip{'s' if n != 1 else ''} to {self.folder} ({self.description})"
        if self.stopped is not None:
            head += f"; stopped: {self.stopped}"
        lines = [head]
        lines += [f"{c.clip}: {c.reason}" for c in self.clips if c.status == FAILED]
        waiting = [c.clip for c in self.clips if c.status == NOT_STARTED]
        if waiting:
            lines.append(f"not started ({len(waiting)}): {', '.join(waiting[:10])}" + (f" and {len(waiting) - 10} more" if len(waiting) > 10 else ""))
        return lines

    def file_names(self) -> list[str]:
        """The main file of every clip written, by name."""
        return [os.path.basename(c.files[0]) for c in self.written if c.files]


def same_stem_clashes(stems: Sequence[str]) -> dict[int, int]:
    """For each clip (by index) whose file name another clip before it has already, that clip's
    index: two clips would be written to one file. Names compare without case (the file systems
    of Windows and macOS do)."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for k, stem in enumerate(stems):
        key = stem.casefold()
        if key in first:
            out[k] = first[key]
        else:
            first[key] = k
    return out
