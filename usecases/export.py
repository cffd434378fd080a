"""Export: a retargeted character with its new clip written for a game engine or the web
(the ``retarget`` command's ``-o OUT.fbx|.glb|.gltf``), with Blender's own exporters and an engine
preset (:mod:`..core.export.presets`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bridge.export_files import export_character
from ..core.errors import MarionetteError
from ..core.export.presets import export_format, preset_for


def export_clip(target: Any, action: Any, output: str | Path, engine: str | None = None) -> dict[str, Any]:
    """Write ``target`` (an armature object) with its skinned meshes and ``action`` to ``output``, in
    the format its extension names, for ``engine`` (the format's default engine when ``None``).
    Returns what the report says of it: format, engine, units, axes, files. Nothing is written on failure."""
    fmt = export_format(str(output))
    if fmt is None:
        raise MarionetteError(f"{output}: not a file Marionette exports (.fbx, .glb or .gltf)")
    preset = preset_for(fmt, engine)
    files = export_character(target, action, output, preset)
    return {
        "format": fmt,
        "engine": preset.engine,
        "clip": action.name,
        "metres_per_unit": preset.metres_per_unit,
        "up": preset.up,
        "forward": preset.forward,
        "files": [str(f) for f in files],
    }
