"""Export: a retargeted character with its new clip written for a game engine or the web
(the ``retarget`` command's ``-o OUT.fbx|.glb|.gltf``), or with several clips in one file
(``bake-pack --export-single``), with Blender's own exporters and an engine preset
(:mod:`..core.export.presets`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bridge.export_files import export_character, export_character_clips, write_clip
from ..core.errors import MarionetteError
from ..core.export.presets import EnginePreset, export_format, preset_for


def _format_and_preset(output: str | Path, engine: str | None) -> tuple[str, EnginePreset]:
    fmt = export_format(str(output))
    if fmt is None:
        raise MarionetteError(f"{output}: not a file Marionette exports (.fbx, .glb or .gltf)")
    return fmt, preset_for(fmt, engine)


def export_clip(target: Any, action: Any, output: str | Path, engine: str | None = None, *, prepared: bool = False) -> dict[str, Any]:
    """Write ``target`` (an armature object) with its skinned meshes and ``action`` to ``output``, in
    the format its extension names, for ``engine`` (the format's default engine when ``None``).
    Returns what the report says of it: format, engine, units, axes, files. Nothing is written on failure.
    ``prepared``: the session was got ready for this clip already
    (:func:`..bridge.export_files.prepare_character`, once for every clip of a session)."""
    fmt, preset = _format_and_preset(output, engine)
    files = write_clip(target, action, output, preset) if prepared else export_character(target, action, output, preset)
    return {
        "format": fmt,
        "engine": preset.engine,
        "clip": action.name,
        "metres_per_unit": preset.metres_per_unit,
        "up": preset.up,
        "forward": preset.forward,
        "files": [str(f) for f in files],
    }


def export_clips(target: Any, actions: list[Any], output: str | Path, engine: str | None = None) -> dict[str, Any]:
    """Write ``target`` with its skinned meshes and every one of ``actions`` as a clip of its own
    (named after its Action, in that order) to the one file ``output``, as :func:`export_clip` does
    for one. Returns what the report says of it, the clips listed under ``clips``."""
    fmt, preset = _format_and_preset(output, engine)
    files = export_character_clips(target, actions, output, preset)
    return {
        "format": fmt,
        "engine": preset.engine,
        "clips": [a.name for a in actions],
        "metres_per_unit": preset.metres_per_unit,
        "up": preset.up,
        "forward": preset.forward,
        "files": [str(f) for f in files],
    }
