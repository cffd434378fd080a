"""The Controls workflow's entry functions, shared by the operators: add, remove and reorder an
armature object's controls, forget their state, prepare a render; and the registration of the
controls' properties and the live preview's handlers (what the command line needs to bake).
Each refuses bad input before changing anything."""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import bpy
import numpy as np

from ..bridge.bone_mesh import bone_vertices
from ..bridge.control_kinds import IK_KINDS
from ..bridge.control_rows import rig_forward
from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from ..core.controls.collider_size import radius_from_points
from ..core.errors import MarionetteError
from ..core.mapping.auto_map import auto_map_skeleton
from ..properties import control_settings
from ..properties.control_settings import KIND_LABEL
from ..viewport import collider_gizmos, collider_overlay, control_overrides, live_preview, physics_playback

# --- suggestions for a new control -----------------------------------------------------------


def _suggest(obj: Any, kind: str) -> dict[str, Any]:
    """Bones for a new control from the humanoid mapping (empty when the rig is not humanoid
    or every limb already has a control of this kind)."""
    try:
        skeleton = skeleton_from_armature(obj)
        heads, tails = rest_heads_tails(obj, skeleton)
        slots = {k: v.bone for k, v in auto_map_skeleton(skeleton, tails).slots.items()}
    except MarionetteError:
        return {}
    rows = obj.marionette_controls.controls
    used = {r.bone_start for r in rows if r.kind == kind}
    if kind in IK_KINDS:
        for limb, upper, lower, end in (("Arm", "upper_arm", "forearm", "hand"), ("Leg", "thigh", "shin", "foot")):
            for side in ("L", "R"):
                names = [slots.get(f"{p}.{side}") for p in (upper, lower, end)]
                if all(names) and names[0] not in used:
                    a, b = skeleton.index(names[0]), skeleton.index(names[1])
                    if kind == "TWO_BONE_IK" and int(skeleton.parents[b]) != a:
                        continue
                    if int(skeleton.parents[skeleton.index(names[2])]) != b:
                        continue
                    return {"name": f"{limb} IK.{side}", "bone_start": names[0], "bone_end": names[1], "end_bone": names[2], "_reach": names[2]}
        return {}
    if kind == "LOOK_AT" and "head" in slots:
        start = slots.get("neck", slots["head"])
        return {"name": "Look At", "bone_start": start, "bone_end": slots["head"], "space_bone": slots.get("hips", ""), "_look": slots["head"]}
    if kind == "GROUND" and all(f"{p}.{s}" in slots for p in ("thigh", "foot") for s in ("L", "R")):
        # The pelvis is the bone both legs hang from (whatever the mapper calls the hips).
        left = skeleton.ancestors(skeleton.index(slots["thigh.L"]))
        right = set(skeleton.ancestors(skeleton.index(slots["thigh.R"])))
        pelvis = next((skeleton.names[j] for j in left if j in right), "")
        return {
            "name": "Ground Feet",
            "bone_start": slots["thigh.L"], "bone_end": slots["foot.L"],
            "second_start": slots["thigh.R"], "second_end": slots["foot.R"],
            "pelvis_bone": pelvis, "smooth_time": 0.08,
        }
    return {}


def _unique(rows: Any, name: str) -> str:
    taken = {r.name for r in rows}
    if name not in taken:
        return name
    k = 2
    while f"{name} {k}" in taken:
        k += 1
    return f"{name} {k}"


def _make_target(context: Any, obj: Any, bone: str, label: str, ahead: bool) -> Any:
    """An empty where the bone's head is now (or a little in front of it, for a look-at)."""
    pb = obj.pose.bones[bone]
    world = np.array(obj.matrix_world, dtype=np.float64)
    head = world[:3, :3] @ np.array(pb.head) + world[:3, 3]
    if ahead:
        # One armature unit in front of the face.
        skeleton = skeleton_from_armature(obj)
        _heads, tails = rest_heads_tails(obj, skeleton)
        head = head + world[:3, :3] @ rig_forward(skeleton, tails)
    empty = bpy.data.objects.new(f"{obj.name} {label} target", None)
    empty.empty_display_type = "SPHERE" if ahead else "PLAIN_AXES"
    empty.empty_display_size = 0.05 * max(obj.dimensions.length, 1e-3)
    empty.location = head
    (context.collection or context.scene.collection).objects.link(empty)
    return empty


# --- the list of controls --------------------------------------------------------------------


def add_control(context: Any, obj: Any, kind: str, create_target: bool) -> str:
    """Add a control of ``kind`` to ``obj`` (bones suggested from the humanoid mapping, and with
    ``create_target`` an empty for it to reach or look at); it becomes the active row. Returns
    its name."""
    settings = obj.marionette_controls
    suggestion = _suggest(obj, kind)
    reach = suggestion.pop("_reach", None)
    look = suggestion.pop("_look", None)
    row = settings.controls.add()
    row.kind = kind
    row.name = _unique(settings.controls, suggestion.pop("name", KIND_LABEL[kind]))
    for key, value in suggestion.items():
        setattr(row, key, value)
    if create_target and (reach or look):
        row.target_object = _make_target(context, obj, reach or look, row.name, ahead=look is not None)
    settings.active_index = len(settings.controls) - 1
    control_overrides.write(obj)
    live_preview.definitions_changed(obj)
    return str(row.name)


def remove_control(obj: Any) -> str:
    """Remove the active control of ``obj`` (on a library override too). Returns its name."""
    settings = obj.marionette_controls
    name = str(settings.controls[settings.active_index].name)
    if control_overrides.is_override(obj):
        control_overrides.remove(obj, settings.active_index)
    else:
        settings.controls.remove(settings.active_index)
    settings.active_index = min(settings.active_index, len(settings.controls) - 1)
    live_preview.definitions_changed(obj)
    return name


def move_control(obj: Any, up: bool) -> bool:
    """Move the active control of ``obj`` one place up or down; False (nothing changed) when it
    is already at that end of the list."""
    settings = obj.marionette_controls
    i = settings.active_index
    j = i - 1 if up else i + 1
    if not 0 <= j < len(settings.controls):
        return False
    if control_overrides.is_override(obj):
        control_overrides.move(obj, i, j)
    else:
        settings.controls.move(i, j)
    settings.active_index = j
    live_preview.definitions_changed(obj)
    return True


# --- spring colliders (docs/controls.md#colliders) -------------------------------------------

#: A new collider on a bone of length L: (offset, tail or normal, radius), each in L.
_COLLIDER_SIZES = {
    "SPHERE": ((0.0, 0.5, 0.0), (0.0, 1.0, 0.0), 0.5),
    "CAPSULE": ((0.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.25),
    "PLANE": ((0.0, 0.0, 0.0), None, 0.0),
    "INSIDE_SPHERE": ((0.0, 0.5, 0.0), (0.0, 1.0, 0.0), 1.0),
    "INSIDE_CAPSULE": ((0.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.5),
}


def add_collider(obj: Any, kind: str, bone: str, group: str = "Body") -> str:
    """Add a collider of ``kind`` on ``bone``, sized from the mesh the bone deforms: a sphere
    about its middle or a capsule from head to tail as wide as the median distance of the
    vertices weighted to it from its axis (:mod:`core.controls.collider_size`); without such a
    mesh from the bone's length (a sphere half as wide as the bone is long, a capsule a quarter
    as wide); a plane through its head facing along it, the inner shapes from the length. It
    becomes the active collider. Returns its name."""
    if not bone or bone not in obj.data.bones:
        raise MarionetteError(f"pick a bone of {obj.name!r} to put the collider on" if not bone else f"{bone!r} is not a bone of {obj.name!r}")
    b = obj.data.bones[bone]
    length = float(b.length)
    offset, tail, radius = _COLLIDER_SIZES[kind]
    if kind in ("SPHERE", "CAPSULE") and length > 0.0:
        fitted = radius_from_points(bone_vertices(obj, bone), b.head_local[:], b.tail_local[:])
        if fitted is not None:
            radius = fitted / length
    settings = obj.marionette_controls
    c = settings.colliders.add()
    c.name = _unique(settings.colliders, f"{bone} {kind.replace('_', ' ').title()}")
    c.kind, c.group, c.bone = kind, group, bone
    c.offset = [v * length for v in offset]
    c.tail = (0.0, 1.0, 0.0) if tail is None else [v * length for v in tail]
    c.radius = radius * length
    settings.active_collider = len(settings.colliders) - 1
    live_preview.definitions_changed(obj)
    return str(c.name)


def remove_collider(obj: Any) -> str:
    """Remove the active collider of ``obj``. Returns its name. On a library override only a
    collider added there can go (Blender keeps no removal of a library's item), which is said."""
    settings = obj.marionette_controls
    name = str(settings.colliders[settings.active_collider].name)
    try:
        settings.colliders.remove(settings.active_collider)
    except TypeError as exc:
        raise MarionetteError(
            f"collider {name!r} comes from the library file and cannot be removed on its override; remove it there, "
            "or take its group out of the springs' Collider Groups"
        ) from exc
    settings.active_collider = max(0, min(settings.active_collider, len(settings.colliders) - 1))
    live_preview.definitions_changed(obj)
    return name


def reset_controls(obj: Any) -> None:
    """Forget the controls' smoothing and spring state; the current frame is shown afresh."""
    live_preview.reset(obj)


def prepare_render(obj: Any, scene: Any, progress: Callable[[int], None] | None = None) -> list[int]:
    """Show every frame of the scene's range once (see :func:`.live_preview.prepare_render`);
    returns the frames still not kept for a render on another thread."""
    start, end = scene.frame_start, scene.frame_end
    live_preview.prepare_render(scene, start, end, progress)
    return live_preview.frames_not_kept(obj, scene, start, end)


# --- registration ----------------------------------------------------------------------------


def register() -> None:
    """The controls' properties and the live preview's and overrides' handlers."""
    control_settings.register()
    live_preview.register()
    control_overrides.register()
    collider_overlay.register()
    collider_gizmos.register()
    physics_playback.register()


def unregister() -> None:
    physics_playback.unregister()
    collider_gizmos.unregister()
    collider_overlay.unregister()
    control_overrides.unregister()
    live_preview.unregister()
    control_settings.unregister()


@contextlib.contextmanager
def registered() -> Iterator[None]:
    """The controls' properties and handlers registered for the block (for the command line,
    where the add-on itself is not), unless they already are."""
    if hasattr(bpy.types.Object, "marionette_controls"):
        yield
        return
    register()
    try:
        yield
    finally:
        unregister()
