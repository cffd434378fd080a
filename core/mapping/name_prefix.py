"""A prefix every bone name of a rig shares (``Character1_``, ``Armature_``, ``rig.``), or a
copy number every one carries (``.001`` on a joined or appended armature): it says nothing about
which bone is which, and read as part of each name it hides the words that do. Plain Python; no
Blender."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SEPARATOR = re.compile(r"[_:|.\- ]")
_COPY_NUMBER = re.compile(r"\.\d{3}$")


def shared_prefix(names: Sequence[str], share: float = 0.9) -> str:
    """The longest prefix ending in a separator that at least ``share`` of ``names`` start with
    and that leaves a word after it in each of them ("" when there is none)."""
    if len(names) < 4:
        return ""
    counts: dict[str, int] = {}
    for name in names:
        for m in _SEPARATOR.finditer(name):
            counts[name[: m.end()]] = counts.get(name[: m.end()], 0) + 1
    need = share * len(names)
    best = ""
    for prefix, n in counts.items():
        if n >= need and len(prefix) > len(best):
            best = prefix
    return best


def without_prefix(names: Sequence[str], prefix: str) -> list[str]:
    """``names`` with ``prefix`` taken off those that start with it (and keep a word after it)."""
    return [n[len(prefix) :] if prefix and n.startswith(prefix) and len(n) > len(prefix) else n for n in names]


def without_copy_numbers(names: Sequence[str], share: float = 0.9) -> list[str]:
    """``names`` without Blender's ``.NNN`` copy number when at least ``share`` of them carry one
    (a rig whose every bone is a copy) and the names stay distinct; unchanged otherwise."""
    marked = [bool(_COPY_NUMBER.search(n)) for n in names]
    if len(names) < 4 or sum(marked) < share * len(names):
        return list(names)
    bare = [_COPY_NUMBER.sub("", n) if m else n for n, m in zip(names, marked, strict=True)]
    # Numbers that tell bones apart (``Bone``, ``Bone.001``, ...) are names, not copy numbers.
    return bare if len(set(bare)) == len(bare) else list(names)
