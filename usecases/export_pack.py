"""``bake-pack --export-dir DIR --export-format fbx|glb|gltf``: once the pack is baked and saved, every
clip written for a game engine or the web as a file of its own in ``DIR``, named after its Action
(the baked clip's name), in pack order, with :func:`.export.export_clip`.

The clips are read back from the saved output (its volumes), never from the run's session. An FBX
export changes its session (the character's data is put on the file's axes and units,
:func:`..bridge.export_files.export_character`), so the volume is opened afresh for every FBX clip;
a glTF export only chooses what plays, so its clips are written one after the other in one opening.
A clip whose export fails is reported (nothing of it is left in ``DIR``) and the others go on.
"""

# The bpy stubs type context members as optional; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import bpy

from ..core.batch.report import BatchReport
from ..core.batch.status import CLIP_GOOD
from ..core.errors import MarionetteError
from ..core.export.presets import FORMAT_OF_EXTENSION, preset_for
from ..core.paths import same_file
from .export import export_clip

#: The extension each export format is written with.
EXTENSION_OF_FORMAT = {fmt: ext for ext, fmt in FORMAT_OF_EXTENSION.items()}


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


def export_pack(
    report: BatchReport, armature: str, export_dir: str, fmt: str, engine: str | None, inputs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Write every baked clip of ``report`` (its saved volumes) on ``armature`` to
    ``export_dir/<clip>.<ext>`` in the format ``fmt`` for ``engine``, in pack order. Returns one
    entry per clip: what :func:`.export.export_clip` says of its file, or the clip and its
    ``error``. A file that would replace one of ``inputs`` (the pack's clip files, the target) is
    not written and reported so."""
    preset = preset_for(fmt, engine)
    ext = EXTENSION_OF_FORMAT[fmt]
    os.makedirs(export_dir, exist_ok=True)
    entries: list[dict[str, Any]] = []
    volumes = _clips_by_volume(report)
    opened = volumes[-1][0] if volumes else None  # the listing opened each volume in turn
    for volume, clips in volumes:
        fresh = opened == volume
        for clip in clips:
            path = os.path.join(os.path.abspath(export_dir), file_stem(clip) + ext)
            try:
                clash = next((p for p in inputs if p and os.path.exists(path) and same_file(path, p)), None)
                if clash is not None:
                    raise MarionetteError(f"{path}: that is an input ({clash}); not replaced")
                if any(e.get("files", [None])[0] == path for e in entries):
                    raise MarionetteError(f"{path}: written already for another clip of that name")
                if not fresh:
                    bpy.ops.wm.open_mainfile(filepath=volume, load_ui=False)
                    opened = volume
                fresh = preset.family != "fbx"  # an FBX export changed the session: the next clip opens it again
                target = bpy.data.objects.get(armature)
                if target is None:
                    raise MarionetteError(f"{os.path.basename(volume)}: no armature {armature!r} to export")
                entries.append(export_clip(target, bpy.data.actions[clip], path, preset.engine))
            except MarionetteError as exc:
                entries.append({"clip": clip, "error": str(exc)})
    return entries


def export_lines(entries: Sequence[dict[str, Any]], export_dir: str) -> list[str]:
    """What the command prints of the exports: a totals line, then one line per file or failure."""
    written = [e for e in entries if "error" not in e]
    what = f" ({written[0]['format']} for {written[0]['engine']})" if written else ""
    lines = [f"exported {len(written)} of {len(entries)} clip{'s' if len(entries) != 1 else ''} to {os.path.abspath(export_dir)}{what}"]
    for e in entries:
        lines.append(f"  export failed: {e['clip']}: {e['error']}" if "error" in e else f"  {os.path.basename(e['files'][0])}")
    return lines
