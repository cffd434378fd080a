"""Write a character with its clips for a game engine or the web, with Blender's own exporters
(``export_scene.fbx``, ``export_scene.gltf``) and the options of an engine preset
(:mod:`..core.export.presets`): the armature and its skinned meshes only, and either one Action as
the one clip (:func:`export_character`, :func:`write_clip`) or several Actions as as many clips
(:func:`export_character_clips`), each named after its Action.

Clip names are the Actions' own, without the ``Armature|`` prefix the exporters add in their
all-actions modes (the FBX exporter names such a take ``Object|Action``, and the glTF exporter's
ACTIONS mode orders animations by name): one clip plays as the object's one active Action (the
FBX take is named after the scene, renamed after the clip; the glTF animation as the
``export_nla_strips_merged_animation_name`` option says); several clips play as NLA tracks, one per
Action, track and strip named after it, in the order given, written with the FBX exporter's
NLA-strip mode (one take per strip, named after the strip) and the glTF exporter's NLA_TRACKS mode
(one animation per track, named after the track, in track order).

A file is written whole or not at all: the exporter writes into a hidden folder beside the output,
whose files replace the output's only once the exporter has finished; on any failure the folder
is removed and nothing is left behind. Run in a file job's session (it selects, unhides, renames
the scene after the clip and sets its frame range to the clip's: the FBX exporter names its one
take after the scene and keys the scene's frames; for several clips it replaces the armature's
NLA tracks with the clips').
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
from typing import Any

import bpy
from bpy_extras.io_utils import axis_conversion
from mathutils import Matrix

from ..core.errors import MarionetteError
from ..core.export.presets import EnginePreset
from . import nla_stack
from .compat import action_fcurves, action_slot_for, assign_action


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


def _onto_file_axes(objects: list[bpy.types.Object], actions: list[bpy.types.Action], preset: EnginePreset) -> None:
    """Put the character's data in the FBX file's units and axes, so the file's nodes carry neither a
    scale nor the axis change (Blender's exporter puts both on the top nodes: a 100 on the armature,
    -90 degrees about X for Y up). The character is turned and scaled about the origin onto the file's
    axes and units and that is applied to its data (armature rest, meshes), its location keys
    (bones' and the object's, in every Action given) scaled alike; then its top objects are given the inverse of the
    exporter's axis change, so that Blender shows it as before and the exporter's change cancels
    on them. The scene's unit is the file's (one Blender unit a centimetre for Unreal), so the
    exporter declares the lengths as they are. Once per session: only in a file job's session."""
    factor = 1.0 / preset.metres_per_unit
    forward, up = preset.options.get("axis_forward", "Y"), preset.options.get("axis_up", "Z")
    turn: Matrix = axis_conversion(to_forward=forward, to_up=up).to_4x4()  # type: ignore[attr-defined]
    keyed = {fc.data_path for action in actions for fc in action_fcurves(action, action_slot_for(action, objects[0]))}
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
    curves = [fc for action in actions for fc in action_fcurves(action, action_slot_for(action, objects[0]))]
    for fc in curves:
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


def prepare_character(armature: bpy.types.Object, actions: list[bpy.types.Action], preset: EnginePreset) -> list[bpy.types.Object]:
    """Get this session ready to write ``armature`` with any of ``actions`` as ``preset`` says:
    Object Mode, the character (the armature and its skinned meshes, returned) the only thing
    selected, playing the first of ``actions``, and for FBX its data put on the file's axes and
    units with the location keys of every one of ``actions`` (:func:`_onto_file_axes`). Once per
    session: a second call would turn and scale again."""
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    objects = [armature, *skinned_meshes(armature)]
    _select_only(objects)
    _play_only(armature, actions[0])
    if preset.family == "fbx":
        _onto_file_axes(objects, actions, preset)
    return objects


def _write(target: Path, preset: EnginePreset, options: dict[str, Any], what: str) -> list[Path]:
    """Run the exporter into a hidden folder beside ``target``, then move its files into place
    (the main file last); nothing is left on failure. ``what`` names the clips in a message."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".marionette-export-", dir=target.parent))
    try:
        written = work / target.name
        if preset.family == "gltf" and options.get("export_format") == "GLTF_SEPARATE":  # images in a folder of their own, never over the user's
            options = {**options, "export_texture_dir": f"{target.stem}_textures"}
        if preset.family == "fbx":
            result = bpy.ops.export_scene.fbx(filepath=str(written), check_existing=False, **options)
        else:
            result = bpy.ops.export_scene.gltf(filepath=str(written), check_existing=False, **options)
        if "FINISHED" not in set(result or ()) or not written.is_file():
            raise MarionetteError(f"{target}: Blender's {preset.family.upper()} exporter did not write {what}")
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
        raise MarionetteError(f"{target}: exporting {what} failed ({_exporter_message(exc)}); nothing written") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_clip(armature: bpy.types.Object, action: bpy.types.Action, path: str | Path, preset: EnginePreset) -> list[Path]:
    """Write ``armature`` with its skinned meshes playing ``action`` to ``path``, in a session
    :func:`prepare_character` got ready for ``action``; returns the files written. Several clips
    of one session may be written one after the other."""
    _play_only(armature, action)
    options = dict(preset.options)
    if preset.family == "gltf":  # the one animation of the active actions is named as this option says
        options["export_nla_strips_merged_animation_name"] = action.name
    return _write(Path(path).resolve(), preset, options, f"clip {action.name!r}")


def export_character(armature: bpy.types.Object, action: bpy.types.Action, path: str | Path, preset: EnginePreset) -> list[Path]:
    """Write ``armature`` with its skinned meshes playing ``action`` to ``path`` as ``preset`` says;
    returns the files written (a .gltf brings its .bin and images). Raises
    :class:`~marionette.core.errors.MarionetteError` naming the clip when the exporter fails, with
    nothing written."""
    prepare_character(armature, [action], preset)
    return write_clip(armature, action, path, preset)


def _stack_clips(objects: list[bpy.types.Object], actions: list[bpy.types.Action]) -> None:
    """The character's NLA replaced by one live track per Action, in order (the first lowest), each
    holding one strip; track and strip named after the Action; the armature playing no active
    Action, its scene on the first clip's first frame (the pose the FBX nodes are written in)."""
    armature = objects[0]
    for obj in objects:  # any other track would be written as a clip too
        ad = obj.animation_data
        for track in list(ad.nla_tracks) if ad is not None else ():
            ad.nla_tracks.remove(track)
    assign_action(armature, None, None)
    for action in actions:
        track = nla_stack.push_action(armature, action)
        track.mute = False
        if track.name != action.name or track.strips[0].name != action.name:
            raise MarionetteError(
                f"clip {action.name!r}: its name is longer than the {len(track.name.encode())} bytes an NLA track's name holds, "
                "and the file would name it otherwise; give the Action a shorter name"
            )
    scene = bpy.context.scene
    scene.frame_set(math.floor(float(actions[0].frame_range[0])))


def export_character_clips(armature: bpy.types.Object, actions: list[bpy.types.Action], path: str | Path, preset: EnginePreset) -> list[Path]:
    """Write ``armature`` with its skinned meshes and every one of ``actions`` as a clip of its own,
    named after it, in that order, to the one file ``path`` as ``preset`` says (the module
    docstring says how); returns the files written. Raises
    :class:`~marionette.core.errors.MarionetteError` when the exporter fails, with nothing written."""
    if not actions:
        raise MarionetteError(f"{path}: no clip to write")
    objects = prepare_character(armature, actions, preset)
    _stack_clips(objects, actions)
    options = dict(preset.options)
    if preset.family == "fbx":
        options.update(bake_anim_use_nla_strips=True, bake_anim_use_all_actions=False)
    else:
        # Not reset before each track: a channel no clip keys (a thumb's location) keeps the pose the
        # character holds, as in the file of one clip and as Blender plays the clip.
        options.update(export_animation_mode="NLA_TRACKS", export_reset_pose_bones=False)
    what = f"{len(actions)} clip{'s' if len(actions) != 1 else ''}"
    return _write(Path(path).resolve(), preset, options, what)
