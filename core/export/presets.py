"""Engine presets of an export: for each engine the file format it reads, its units, its axes, where
root motion goes and the exporter options that give them, as plain data (no Blender here; the
bridge hands the options to Blender's own exporters, :mod:`marionette.bridge.export_files`).

Right by construction:

- glTF (Godot, the web): Y up, the character facing +Z (its front), metres, as the glTF spec says;
  Blender's glTF exporter converts from Z up itself (``export_yup``).
- FBX for Unity: metres (``UnitScaleFactor`` 100), Y up (the exporter's ``axis_up="Y"``,
  ``axis_forward="-Z"``, Unity's own Blender settings), written into the file's axis settings.
- FBX for Unreal: centimetres (``UnitScaleFactor`` 1, the unit Unreal imports without converting),
  Z up as Blender's (no axis change).
- Both FBX: the character's data is put on the file's axes and units before the exporter runs
  (:func:`marionette.bridge.export_files.export_character`), so no node carries a scale of 100 or a
  -90 degree turn for the engine to fix up.

Every preset: no helper leaf bones, only the new Action (as one clip named after it, without the
``Armature|`` prefix), the armature and its skinned meshes only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import MarionetteError

#: Extensions an export can have, by format.
FORMAT_OF_EXTENSION = MappingProxyType({".fbx": "fbx", ".glb": "glb", ".gltf": "gltf"})

#: The extensions an export is written with.
EXPORTED = tuple(FORMAT_OF_EXTENSION)

#: The engine a file is for when none is given, by format.
DEFAULT_ENGINE = MappingProxyType({"fbx": "unity", "glb": "godot", "gltf": "web"})

ENGINES = ("unity", "unreal", "godot", "web")


@dataclass(frozen=True)
class EnginePreset:
    """How a file for ``engine`` is written: its ``family`` (``"fbx"`` or ``"gltf"``), the units and
    axes it holds (``metres_per_unit``: the length one file unit stands for; ``up`` and ``forward``:
    the file's axes, the character's front along ``forward``), where the engine wants root motion
    and the options given to Blender's exporter."""

    engine: str
    family: str
    metres_per_unit: float
    up: str
    forward: str
    root_motion: str
    options: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))


_FBX_COMMON: dict[str, Any] = {
    "use_selection": True,
    "object_types": {"ARMATURE", "MESH"},
    "add_leaf_bones": False,
    "primary_bone_axis": "Y",
    "secondary_bone_axis": "X",
    "armature_nodetype": "NULL",
    "use_armature_deform_only": False,
    "bake_anim": True,
    "bake_anim_use_all_bones": True,
    "bake_anim_use_nla_strips": False,
    "bake_anim_use_all_actions": False,
    "bake_anim_force_startend_keying": True,
    "bake_anim_step": 1.0,
    "bake_anim_simplify_factor": 0.0,
    "use_mesh_modifiers": False,
    "bake_space_transform": False,
    "path_mode": "AUTO",
    "use_custom_props": False,
}

_GLTF_COMMON: dict[str, Any] = {
    "use_selection": True,
    "export_yup": True,
    "export_apply": False,
    "export_animations": True,
    "export_animation_mode": "ACTIVE_ACTIONS",
    "export_anim_single_armature": True,
    "export_anim_slide_to_zero": True,
    "export_force_sampling": True,
    "export_frame_step": 1,
    "export_def_bones": False,
    "export_leaf_bone": False,
    "export_optimize_animation_size": False,
    "export_reset_pose_bones": True,
    "export_rest_position_armature": True,
    "export_skins": True,
    "export_cameras": False,
    "export_lights": False,
    "export_extras": False,
}


def _frozen(*parts: dict[str, Any]) -> MappingProxyType[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        out.update(p)
    return MappingProxyType(out)


PRESETS: MappingProxyType[tuple[str, str], EnginePreset] = MappingProxyType({
    ("fbx", "unity"): EnginePreset(
        "unity", "fbx", 1.0, "Y", "-Z", "HIPS",
        _frozen(_FBX_COMMON, {"global_scale": 1.0, "apply_unit_scale": True, "apply_scale_options": "FBX_SCALE_ALL",
                              "axis_forward": "-Z", "axis_up": "Y"}),
    ),
    ("fbx", "unreal"): EnginePreset(
        "unreal", "fbx", 0.01, "Z", "Y", "ROOT_BONE",
        _frozen(_FBX_COMMON, {"global_scale": 1.0, "apply_unit_scale": True, "apply_scale_options": "FBX_SCALE_ALL",
                              "axis_forward": "Y", "axis_up": "Z"}),
    ),
    **{
        (fmt, engine): EnginePreset(
            engine, "gltf", 1.0, "Y", "Z", "HIPS",
            _frozen(_GLTF_COMMON, {"export_format": "GLB" if fmt == "glb" else "GLTF_SEPARATE"}),
        )
        for fmt in ("glb", "gltf")
        for engine in ("godot", "web")
    },
})


def export_format(path: str) -> str | None:
    """The format an output path names by its extension (``"fbx"``, ``"glb"``, ``"gltf"``), or
    ``None`` for any other (a .blend)."""
    lower = path.lower()
    return next((fmt for ext, fmt in FORMAT_OF_EXTENSION.items() if lower.endswith(ext)), None)


def preset_for(fmt: str, engine: str | None) -> EnginePreset:
    """The preset of ``engine`` (its format's default when ``None``) for format ``fmt``; refuses an
    engine that does not read that format, saying which format it reads."""
    name = engine or DEFAULT_ENGINE[fmt]
    preset = PRESETS.get((fmt, name))
    if preset is None:
        if name not in ENGINES:
            raise MarionetteError(f"--engine {name}: not an engine Marionette writes for ({', '.join(ENGINES)})")
        reads = sorted({f for f, e in PRESETS if e == name})
        raise MarionetteError(f"--engine {name}: writes {' or '.join('.' + f for f in reads)} files, not .{fmt}; "
                              f"end the output name with .{reads[0]} or choose another engine")
    return preset
