"""Write a character with one clip for a game engine or the web, with Blender's own exporters
(``export_scene.fbx``, ``export_scene.gltf``) and the options of an engine preset
(:mod:`..core.export.presets`): the armature and its skinned meshes only, the one Action as the one
clip, named after the Action.

The file is written whole or not at all: the exporter writes into a hidden folder beside the output,
whose files replace the output's only once the exporter has finished; on any failure the folder
is removed and nothing is left behind. Run in a file job's session (it selects, unhides, renames
the scene after the clip and sets its frame range to the clip's: the FBX exporter names its one
take after the scene and keys the scene's frames).
"""

# The bpy stubs type Object.data as a union of every data type and many RNA functions as
# returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import bpy
from bpy_extras.io_utils import axis_conversion
from mathutils import Matrix

from ..core.errors import MarionetteError
from ..core.export.presets import EnginePreset
from .compat import action_fcurves, action_slot_for


def skinned_meshes(armature: bpy.types.Object) -> list[bpy.types.Object]:
    """The meshes ``armature`` deforms (an Armature modifier on it) or carries (parented to it)."""
    out = []
    for obj in bpy.data.objects:
        if obj.type != "MESH":
            continue
        deformed = any(m.type == "ARMATURE" and getattr(m, "object", None) == armature for m in obj.modifiers)
        if deformed or obj.parent == armature:
            out.append(obj)
    return out


def _select_only(objects: list[bpy.types.Object]) -> None:
    view_layer = bpy.context.view_layer
    for obj in view_layer.objects:
        obj.select_set(False)
    for obj in objects:
        if obj.name not in view_layer.objects:
            bpy.context.scene.collection.objects.link(obj)
        obj.hide_viewport = False
        obj.hide_select = False
        obj.hide_set(False)
        obj.select_set(True)
    view_layer.objects.active = objects[0]


def _play_only(armature: bpy.types.Object, action: bpy.types.Action) -> None:
    """``action`` the one thing ``armature`` plays, the scene named after it over its frames."""
    anim = armature.animation_data or armature.animation_data_create()
    anim.action = action
    for track in anim.nla_tracks:
        track.mute = True
    scene = bpy.context.scene
    first, last = float(action.frame_range[0]), float(action.frame_range[1])
    scene.frame_start, scene.frame_end = math.floor(first), max(math.ceil(last), math.floor(first) + 1)
    scene.frame_set(scene.frame_start)  # the pose the FBX exporter writes on the nodes: the clip's first
    if scene.name != action.name:
        scene.name = action.name


def _onto_file_axes(objects: list[bpy.types.Object], action: bpy.types.Action, preset: EnginePreset) -> None:
    """Put the character's data in the FBX file's units and axes, so the file's nodes carry neither a
    scale nor the axis change (Blender's exporter puts both on the top nodes: a 100 on the armature,
    -90 degrees about X for Y up). The character is turned and scaled about the origin onto the file's
    axes and units and that is applied to its data (armature rest, meshes), its location keys
    (bones' and the object's) scaled alike; then its top objects are given the inverse of the
    exporter's axis change, so that Blender shows it as before and the exporter's change cancels
    on them. The scene's unit is the file's (one Blender unit a centimetre for Unreal), so the
    exporter declares the lengths as they are. Only in a file job's session."""
    factor = 1.0 / preset.metres_per_unit
    forward, up = preset.options.get("axis_forward", "Y"), preset.options.get("axis_up", "Z")
    turn: Matrix = axis_conversion(to_forward=forward, to_up=up).to_4x4()  # type: ignore[attr-defined]
    keyed = {fc.data_path for fc in action_fcurves(action, action_slot_for(action, objects[0]))}
    if any(path.startswith("rotation_") for path in keyed):  # an object turning on its own keys: left to the exporter
        turn = Matrix.Identity(4)
    if abs(factor - 1.0) < 1e-12 and turn == Matrix.Identity(4):
        return
    bpy.context.scene.unit_settings.scale_length = preset.metres_per_unit
    for obj in objects:  # data shared with another object is given its own copy: only the character changes
        if obj.data is not None and obj.data.users > 1:
            obj.data = obj.data.copy()
    tops = [obj for obj in objects if obj.parent not in objects]
    change = turn @ Matrix.Scale(factor, 4)
    for obj in tops:  # a parent that is not exported (glTF's Z_UP empty) leaves its place to the object
        world = obj.matrix_world.copy()
        obj.parent = None
        obj.matrix_world = change @ world
    bpy.context.view_layer.update()
    bpy.ops.object.transform_apply(location=False, rotation=True, scale=True)
    back = turn.inverted()
    for obj in tops:
        obj.matrix_world = back @ obj.matrix_world
    bpy.context.view_layer.update()
    for obj in objects:  # a bone's pose off its rest without keys is a length too (an IK pole's place)
        if obj.pose is not None:
            for pb in obj.pose.bones:
                pb.location = pb.location * factor
    for fc in action_fcurves(action, action_slot_for(action, objects[0])):
        if fc.data_path == "location" or fc.data_path.endswith(".location"):
            for key in fc.keyframe_points:
                key.co.y *= factor
                key.handle_left.y *= factor
                key.handle_right.y *= factor
            fc.update()


def _exporter_message(exc: BaseException) -> str:
    """The exporter's own error line out of the traceback Blender wraps it in, paths shortened to file names."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^\w*(Error|Exception)\b", line)]
    line = errors[-1] if errors else (lines[-1] if lines else type(exc).__name__)
    return re.sub(r"'[^']*/([^'/]*)'", r"'\1'", line)


def export_character(armature: bpy.types.Object, action: bpy.types.Action, path: str | Path, preset: EnginePreset) -> list[Path]:
    """Write ``armature`` with its skinned meshes playing ``action`` to ``path`` as ``preset`` says;
    returns the files written (a .gltf brings its .bin and images). Raises
    :class:`~marionette.core.errors.MarionetteError` naming the clip when the exporter fails, with
    nothing written."""
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    objects = [armature, *skinned_meshes(armature)]
    _select_only(objects)
    _play_only(armature, action)
    work = Path(tempfile.mkdtemp(prefix=".marionette-export-", dir=target.parent))
    try:
        if preset.family == "fbx":
            _onto_file_axes(objects, action, preset)
        written = work / target.name
        options = dict(preset.options)
        if preset.family == "gltf":  # the one animation of the active actions is named as this option says
            options["export_nla_strips_merged_animation_name"] = action.name
            if options.get("export_format") == "GLTF_SEPARATE":  # images in a folder of their own, never over the user's
                options["export_texture_dir"] = f"{target.stem}_textures"
        if preset.family == "fbx":
            result = bpy.ops.export_scene.fbx(filepath=str(written), check_existing=False, **options)
        else:
            result = bpy.ops.export_scene.gltf(filepath=str(written), check_existing=False, **options)
        if "FINISHED" not in set(result or ()) or not written.is_file():
            raise MarionetteError(f"{target}: Blender's {preset.family.upper()} exporter did not write clip {action.name!r}")
        files = sorted(p for p in work.rglob("*") if p.is_file())
        moved = []
        for f in files:  # the main file last: it appears only once what it refers to is there
            if f == written:
                continue
            dest = target.parent / f.relative_to(work)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dest)
            moved.append(dest)
        os.replace(written, target)
        return [target, *moved]
    except (OSError, RuntimeError) as exc:
        raise MarionetteError(f"{target}: exporting clip {action.name!r} failed ({_exporter_message(exc)}); nothing written") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
