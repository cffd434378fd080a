"""Planning a pack: which files it holds (:func:`plan_pack`), what their clips and Actions are
called, and where a file's clips are split between two workers (:func:`split_point`).
See :mod:`core.batch` for the words used."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .pack_limits import not_regular

CLIP_EXTENSIONS = (".bvh", ".fbx", ".glb", ".gltf", ".blend", ".vmd")
#: Ends the reason of a pack entry refused from a stat alone.
SKIPPED_UNOPENED = "; skipped without opening it"
BVH_EXTENSION = ".bvh"
#: MikuMikuDance motions: read without Blender and played on the standard MMD skeleton.
VMD_EXTENSION = ".vmd"
KEY_SEPARATOR = "::"


def clip_key(path: str, clip: str) -> str:
    return f"{path}{KEY_SEPARATOR}{clip}"


# --- planning a pack -------------------------------------------------------------------------


@dataclass(frozen=True)
class PackFile:
    """One file of the pack: absolute path, label (names its Actions) and whether Blender's
    importers are needed to read it (everything but BVH and VMD, which hold one clip each, named
    after the file, and are read with numpy)."""

    path: str
    label: str

    @property
    def is_bvh(self) -> bool:
        return self.path.lower().endswith(BVH_EXTENSION)

    @property
    def is_vmd(self) -> bool:
        return self.path.lower().endswith(VMD_EXTENSION)

    @property
    def one_clip(self) -> bool:
        """A file read without Blender, holding one clip named after the file (BVH, VMD)."""
        return self.is_bvh or self.is_vmd

    @property
    def needs_blender(self) -> bool:
        return not self.one_clip


@dataclass(frozen=True)
class PackPlan:
    files: tuple[PackFile, ...]
    #: Inputs that cannot be baked at all: ``(path, reason)``; they count as failed files.
    refused: tuple[tuple[str, str], ...] = ()
    #: Folder entries that are not clip files (a README, textures): ``(path, reason)``; listed in
    #: the report, not failures.
    ignored: tuple[tuple[str, str], ...] = ()

    @property
    def needs_blender(self) -> bool:
        return any(f.needs_blender for f in self.files)


def file_label(relative: str) -> str:
    stem, _ext = os.path.splitext(relative)
    return stem.replace(os.sep, "/")


def plan_pack(inputs: Sequence[str | os.PathLike[str]], exclude: Iterable[str | os.PathLike[str]] = ()) -> PackPlan:
    """The pack's files in a stable order (sorted absolute paths, each file once).

    Folders are searched recursively; their entries that are not clip files are ignored (and
    listed). A file named directly that is missing or of another type is refused, and so is a
    clip-named entry that is not a regular file (a FIFO, a socket, a device: never opened). Paths in
    ``exclude`` (the output file, its parts folder) are never part of the pack, so an output
    written inside the pack folder is not read back as a clip file.
    """
    excluded = [os.path.abspath(os.fspath(e)) for e in exclude]

    def is_excluded(p: str) -> bool:
        return any(p == e or p.startswith(e + os.sep) for e in excluded)

    found: dict[str, PackFile] = {}
    refused: list[tuple[str, str]] = []
    ignored: list[tuple[str, str]] = []
    for raw in inputs:
        path = os.path.abspath(os.fspath(raw))
        if os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not is_excluded(os.path.join(dirpath, d)))
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    if name.startswith(".") or is_excluded(full) or name.endswith(".partial.blend"):
                        continue
                    ext = os.path.splitext(name)[1].lower()
                    if ext not in CLIP_EXTENSIONS:
                        ignored.append((full, f"not a clip file ({ext or 'no extension'})"))
                        continue
                    why = not_regular(full)
                    if why is not None:
                        refused.append((full, why + SKIPPED_UNOPENED))
                        continue
                    found.setdefault(full, PackFile(full, file_label(os.path.relpath(full, path))))
        elif os.path.lexists(path):
            ext = os.path.splitext(path)[1].lower()
            why = not_regular(path)
            if ext not in CLIP_EXTENSIONS:
                refused.append((path, f"unsupported file type {ext or '(no extension)'!r}; clip files are " + ", ".join(CLIP_EXTENSIONS)))
            elif why is not None:
                refused.append((path, why + SKIPPED_UNOPENED))
            elif not is_excluded(path):
                found.setdefault(path, PackFile(path, file_label(os.path.basename(path))))
        else:
            refused.append((path, "no such file or folder"))
    files = tuple(found[p] for p in sorted(found))
    return PackPlan(files, tuple(refused), tuple(sorted(ignored)))


# --- naming ----------------------------------------------------------------------------------


def bvh_clip_id(path: str) -> str:
    """A BVH (or VMD) file holds one clip, named after the file (known before the file is read)."""
    return os.path.splitext(os.path.basename(path))[0]


def clip_display_name(clip_id: str) -> str:
    """The clip's own name: the last ``|`` part of an importer's ``Armature|Armature|Walk``."""
    return clip_id.rsplit("|", 1)[-1] or clip_id


def action_base_name(file: PackFile, clip_id: str) -> str:
    """``label`` for a BVH or VMD (its one clip is the file), ``label|clip`` otherwise."""
    return file.label if file.one_clip else f"{file.label}|{clip_display_name(clip_id)}"


def _fit(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` UTF-8 bytes without splitting a character."""
    raw = name.encode("utf-8")
    if len(raw) <= limit:
        return name
    return raw[:limit].decode("utf-8", errors="ignore")


def final_action_names(wanted: Mapping[str, str], taken: Iterable[str], limit: int = 63) -> dict[str, str]:
    """Clip key -> Action name, the same whatever order the clips were baked in.

    Each clip gets its base name (cut to ``limit`` bytes) unless a name already in the file
    (``taken``) or another clip of the run wants it: of the clips sharing a base, the one with
    the smallest key keeps it and the others get ``base~hash`` (six hex digits of their key).
    """
    used = set(taken)
    out: dict[str, str] = {}
    by_base: dict[str, list[str]] = {}
    for key, base in wanted.items():
        by_base.setdefault(_fit(base, limit), []).append(key)
    for base in sorted(by_base):
        keys = sorted(by_base[base])
        for k, key in enumerate(keys):
            name = base
            if k > 0 or name in used:
                suffix = "~" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:6]
                name = _fit(base, limit - len(suffix)) + suffix
            out[key] = name
    # A suffixed name could, in theory, equal another clip's base; keep names unique regardless.
    seen: set[str] = set(used)
    for key in sorted(out):
        name = out[key]
        n = 2
        while name in seen:
            suffix = f"~{hashlib.sha1(f'{key}{n}'.encode()).hexdigest()[:6]}"
            name = _fit(out[key], limit - len(suffix)) + suffix
            n += 1
        seen.add(name)
        out[key] = name
    return out


# --- splitting a file's clips between two workers --------------------------------------------

def split_point(costs: Sequence[float], second_start: float, min_saving: float = 0.5) -> int | None:
    """Where a second worker should take over a file's remaining clips, or ``None`` if that does
    not pay.

    ``costs`` are the estimated seconds of each remaining clip (in order); ``second_start`` the
    seconds the second worker needs before its first clip (importing the file, and starting
    Blender if it has not yet). The first worker keeps clips ``[:k]``, the second takes
    ``[k:]``: ``k`` makes the two finish as close together as the clips allow, and the split is
    only made when it ends the file at least ``min_saving`` seconds sooner.
    """
    c = np.asarray(costs, dtype=np.float64)
    if c.size < 2:
        return None
    total = float(c.sum())
    done_first = np.cumsum(c)[:-1]  # the first worker's time for k = 1 .. n-1
    finish = np.maximum(done_first, second_start + (total - done_first))
    k = int(np.argmin(finish))
    if total - float(finish[k]) < min_saving:
        return None
    return k + 1

