"""Scene settings of the sidebar's Export (``scene.marionette.export``): the file format, the engine
the file is for (each format's engines and defaults are :mod:`..core.export.presets`'), the folder,
and what is exported."""

from __future__ import annotations

from typing import Any

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty

from ..core.export.presets import DEFAULT_ENGINE, PRESETS

FORMAT_ITEMS = [
    ("FBX", "FBX", "One .fbx file per clip (Unity, Unreal)"),
    ("GLB", "glTF Binary", "One .glb file per clip (Godot, the web)"),
    ("GLTF", "glTF Separate", "A .gltf file per clip with its .bin beside it and its images in a folder of its own (the web, Godot)"),
]

ENGINE_ITEMS = [
    ("UNITY", "Unity", "FBX in metres, Y up, root motion on the hips (where Unity's Humanoid reads it)"),
    ("UNREAL", "Unreal", "FBX in centimetres, Z up, root motion on the root bone above the hips"),
    ("GODOT", "Godot", "glTF: metres, Y up, facing +Z"),
    ("WEB", "Web", "glTF for three.js and other web viewers: metres, Y up, facing +Z"),
]

WHAT_ITEMS = [
    ("ACTION", "The New Action", "The Action the last Retarget Clip made, on the target"),
    ("BATCH", "Every Action of the Last Batch Bake", "Every clip the last Batch Bake baked, in pack order, one file each"),
]

_FORMAT = {"FBX": "fbx", "GLB": "glb", "GLTF": "gltf"}


def engine_fits(file_format: str, engine: str) -> bool:
    """Whether ``engine`` (an :data:`ENGINE_ITEMS` identifier) reads ``file_format`` (a :data:`FORMAT_ITEMS` one)."""
    return (_FORMAT[file_format], engine.lower()) in PRESETS


def _format_changed(self: Any, _context: Any) -> None:
    # An engine that does not read the new format gives way to the format's default one.
    if not engine_fits(self.file_format, self.engine):
        self.engine = DEFAULT_ENGINE[_FORMAT[self.file_format]].upper()


class MarionetteExportSettings(bpy.types.PropertyGroup):
    file_format: EnumProperty(  # type: ignore[valid-type]
        name="Format", items=FORMAT_ITEMS, default="FBX", update=_format_changed, description="The file format written"
    )
    engine: EnumProperty(  # type: ignore[valid-type]
        name="Engine", items=ENGINE_ITEMS, default="UNITY",
        description="The engine the file is for: its units, axes and where root motion goes",
    )
    folder: StringProperty(  # type: ignore[valid-type]
        name="Folder", subtype="DIR_PATH", default="//export/", options={"PATH_SUPPORTS_BLEND_RELATIVE"},
        description="Where the files are written, one per clip, named after the clip",
    )
    what: EnumProperty(name="Export", items=WHAT_ITEMS, default="ACTION")  # type: ignore[valid-type]
    replace_files: BoolProperty(  # type: ignore[valid-type]
        name="Replace Existing Files",
        default=False,
        description="Write over a file of the clip's name in the folder (off: such a clip is not exported and the report says so)",
    )


classes = (MarionetteExportSettings,)
register, unregister = bpy.utils.register_classes_factory(classes)
