"""``bake-pack --export-dir DIR --export-format fbx|glb|gltf``: once the pack is baked and saved, every
clip written for a game engine or the web, in pack order: as a file of its own in ``DIR``, named
after its Action (the baked clip's name), with :func:`.export.export_clip`; or, with
``--export-single``, every clip in one file ``DIR/<OUT>.<ext>`` named after the output .blend, with
:func:`.export.export_clips`.

The clips are read back from the saved output (its volumes), never from the run's session. Each
volume is opened once and the character got ready once for all its clips
(:func:`..bridge.export_files.prepare_character`: for FBX its data put on the file's axes and
units), then its clips are written one after the other; after a clip whose export failed the
volume is opened afresh for the next. A clip whose export fails is reported (nothing of it is left
in ``DIR``) and the others go on. The one file of ``--export-single`` is written from the first
volume, the clips of the others appended into that session
(``bpy.data.libraries.load``) first.

A file that exists already in ``DIR`` (for a .gltf, its .bin too) is kept and reported so
(``kept``), unless ``replace`` (``--replace``) says to replace it; a file that is an input of the
run is never replaced.
"""

# The bpy stubs type context members as optional; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpy

from ..bridge.export_files import prepare_character
from ..core.batch.report import BatchReport
from ..core.batch.status import CLIP_GOOD
from ..core.errors import MarionetteError
from ..core.export.presets import FORMAT_OF_EXTENSION, preset_for
from ..core.paths import same_file
from .export import export_clip, export_clips

#: The extension each export format is written with.
EXTENSION_OF_FORMAT = {fmt: ext for ext, fmt in FORMAT_OF_EXTENSION.items()}

#: What the report and the printed lines say of a file kept because it existed.
KEPT = "exists already; kept (--replace replaces it)"


@dataclass(frozen=True)
class PackExport:
    """What ``bake-pack --export-dir`` writes: into ``folder``, files of format ``fmt`` for
    ``engine`` (the format's default when ``None``); one per clip, or with ``single`` (a file stem)
    one file ``folder/<single>.<ext>`` holding every clip; ``replace``: files that exist already
    are replaced rather than kept."""

    folder: str
    fmt: str
    engine: str | None = None
    single: str | None = None
    replace: bool = False


def file_stem(clip: str) -> str:
    """A file name for the clip ``clip``: its name, with what no file name may hold (a path
    separator, a control character, ``<>:"|?*``) replaced by ``_``."""
    stem = re.sub(r'[\x00-\x1f<>:"/\\|?*]', "_", clip).strip().rstrip(".")
    return stem or "clip"


def _clips_by_volume(report: BatchReport) -> list[tuple[str, list[str]]]:
    """Each saved volume with the baked clips it holds, in pack order."""
    order = [c.action for f in report.files for c in f.clips if c.status in CLIP_GOOD and c.action]
    out = []
    for path in report.info.get("outputs", []) or [report.info["output"]]:
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        held = set(bpy.data.actions.keys())
        out.append((path, [name for name in order if name in held]))
    return out


def existing_files(path: str) -> list[str]:
    """The files an export to ``path`` would replace: the file, and for a .gltf its .bin beside it."""
    written = [path, os.path.splitext(path)[0] + ".bin"] if path.lower().endswith(".gltf") else [path]
    return [p for p in written if os.path.isfile(p)]


def _refusal(path: str, inputs: Sequence[str], entries: Sequence[dict[str, Any]], replace: bool) -> str | None:
    """Why ``path`` is not written: :data:`KEPT` for a file that exists (:func:`existing_files`;
    unless ``replace``), or ``None``. Raises for a file that is an input or was written already by
    this run."""
    clash = next((p for p in inputs if p and os.path.exists(path) and same_file(path, p)), None)
    if clash is not None:
        raise MarionetteError(f"{path}: that is an input ({clash}); not replaced")
    if any(e.get("files", [None])[0] == path for e in entries):
        raise MarionetteError(f"{path}: written already for another clip of that name")
    if existing_files(path) and not replace:
        return KEPT
    return None


def _armature(volume: str, armature: str) -> Any:
    target = bpy.data.objects.get(armature)
    if target is None:
        raise MarionetteError(f"{os.path.basename(volume)}: no armature {armature!r} to export")
    return target


def export_pack(report: BatchReport, armature: str, request: PackExport, inputs: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Write every baked clip of ``report`` (its saved volumes) on ``armature`` as ``request`` says,
    in pack order. Returns one entry per file: what :func:`.export.export_clip` (or, for the one
    file, :func:`.export.export_clips`) says of it; or its clip(s) and ``error``; or its clip(s) and
    the file ``kept``. A file that would replace one of ``inputs`` (the pack's clip files, the
    target) is not written and reported so."""
    preset = preset_for(request.fmt, request.engine)
    os.makedirs(request.folder, exist_ok=True)
    volumes = _clips_by_volume(report)
    opened = volumes[-1][0] if volumes else None  # the listing opened each volume in turn
    if request.single is not None:
        return [_export_single(volumes, armature, request, inputs, opened)]
    ext = EXTENSION_OF_FORMAT[request.fmt]
    entries: list[dict[str, Any]] = []
    for volume, clips in volumes:
        ready = False  # the character got ready in this opening of the volume
        for clip in clips:
            path = os.path.join(os.path.abspath(request.folder), file_stem(clip) + ext)
            try:
                kept = _refusal(path, inputs, entries, request.replace)
                if kept is not None:
                    entries.append({"clip": clip, "kept": path})
                    continue
                if opened != volume:
                    bpy.ops.wm.open_mainfile(filepath=volume, load_ui=False)
                    opened, ready = volume, False
                target = _armature(volume, armature)
                action = bpy.data.actions[clip]
                if not ready:
                    prepare_character(target, [action, *(bpy.data.actions[c] for c in clips if c != clip)], preset)
                    ready = True
                entries.append(export_clip(target, action, path, preset.engine, prepared=True))
            except MarionetteError as exc:
                entries.append({"clip": clip, "error": str(exc)})
                opened = None  # what a failed export left of the session is not trusted: the next clip opens it again
    return entries


def _export_single(
    volumes: list[tuple[str, list[str]]], armature: str, request: PackExport, inputs: Sequence[str], opened: str | None,
) -> dict[str, Any]:
    """``--export-single``: every clip of ``volumes`` in one file, written from the first volume
    (``opened``: the volume this session holds already) with the other volumes' clips appended to it."""
    clips = [c for _, held in volumes for c in held]
    path = os.path.join(os.path.abspath(request.folder), file_stem(request.single or "clips") + EXTENSION_OF_FORMAT[request.fmt])
    try:
        if not clips:
            raise MarionetteError(f"{path}: no baked clip to write")
        kept = _refusal(path, inputs, [], request.replace)
        if kept is not None:
            return {"clips": clips, "kept": path}
        first = volumes[0][0]
        if opened != first:
            bpy.ops.wm.open_mainfile(filepath=first, load_ui=False)
        for volume, held in volumes[1:]:
            _append_actions(volume, held)
        target = _armature(first, armature)
        return export_clips(target, [bpy.data.actions[c] for c in clips], path, request.engine)
    except MarionetteError as exc:
        return {"clips": clips, "error": str(exc)}


def _append_actions(volume: str, names: list[str]) -> None:
    """Append the Actions ``names`` of the saved ``volume`` into this session under their own
    names (an Action of this session with one of those names is renamed out of the way first)."""
    for name in names:
        held = bpy.data.actions.get(name)
        if held is not None:
            held.name = f"{name} (volume {os.path.basename(bpy.data.filepath)})"
    with bpy.data.libraries.load(volume, link=False) as (_source, loaded):  # type: ignore[func-returns-value,attr-defined]
        loaded.actions = list(names)
    got = [a.name if a is not None else None for a in loaded.actions]
    if got != names:
        raise MarionetteError(f"{os.path.basename(volume)}: its clips could not be appended under their own names ({got} for {names})")


def export_lines(entries: Sequence[dict[str, Any]], export_dir: str) -> list[str]:
    """What the command prints of the exports: a totals line, then one line per file (with the
    clips it holds when it holds several), kept file or failure."""
    written = [e for e in entries if "files" in e]
    what = f" ({written[0]['format']} for {written[0]['engine']})" if written else ""
    folder = os.path.abspath(export_dir)
    if any("clips" in e for e in entries):  # --export-single: one file
        e = entries[0]
        n = len(e["clips"])
        state = "exported" if "files" in e else ("kept" if "kept" in e else "did not export")
        lines = [f"{state} {n} clip{'s' if n != 1 else ''} in one file to {folder}{what}"]
        if "error" in e:
            return [*lines, f"  export failed: {e['error']}"]
        name = os.path.basename(e["files"][0] if "files" in e else e["kept"])
        lines.append(f"  {name}: {KEPT}" if "kept" in e else f"  {name}")
        return [*lines, *(f"    {clip}" for clip in e["clips"])]
    kept = sum(1 for e in entries if "kept" in e)
    also = f"; {kept} kept, existing already (--replace replaces them)" if kept else ""
    lines = [f"exported {len(written)} of {len(entries)} clip{'s' if len(entries) != 1 else ''} to {folder}{what}{also}"]
    for e in entries:
        if "error" in e:
            lines.append(f"  export failed: {e['clip']}: {e['error']}")
        elif "kept" in e:
            lines.append(f"  {os.path.basename(e['kept'])}: {KEPT}")
        else:
            lines.append(f"  {os.path.basename(e['files'][0])}")
    return lines
