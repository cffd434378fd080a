"""Operators of the Controls workflow: add, remove and reorder controls on the active armature,
reset their state, and Bake Controls. Each refuses bad input before changing anything; the work
is in :mod:`.control_bridge` and :mod:`.live_preview`.
"""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

from typing import Any

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, IntProperty, StringProperty

from ..bridge.control_bridge import bake_controls, frames_of, rig_forward
from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from ..core.errors import MarionetteError
from ..properties.control_settings import IK_KINDS, KIND_ITEMS, KIND_LABEL
from ..viewport import control_overrides, live_preview


def _armature_ready(cls: Any, context: Any) -> bool:
    obj = context.active_object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set("Select an armature object")
        return False
    if obj.library is not None:
        cls.poll_message_set("The armature is linked from a library; make a library override first")
        return False
    if getattr(obj, "marionette_controls", None) is None:
        cls.poll_message_set("Marionette's controls are not registered")
        return False
    return True


def _list_editable(cls: Any, context: Any) -> bool:
    """Controls can be added, removed and reordered, on a library override too: there the list
    is also kept in :mod:`.control_overrides`' mirror, since Blender alone keeps added controls
    but not library controls removed or moved."""
    if not _armature_ready(cls, context):
        return False
    ol = context.active_object.override_library
    if ol is not None and ol.is_system_override:
        cls.poll_message_set("The armature's library override is not editable; make it editable first (Outliner ▸ Library Override)")
        return False
    return True


def _has_active(cls: Any, context: Any) -> bool:
    if not _armature_ready(cls, context):
        return False
    s = context.active_object.marionette_controls
    if not 0 <= s.active_index < len(s.controls):
        cls.poll_message_set("Select a control in the list")
        return False
    return True


# --- suggestions for a new control -----------------------------------------------------------


def _suggest(obj: Any, kind: str) -> dict[str, Any]:
    """Bones for a new control from the humanoid mapping (empty when the rig is not humanoid
    or every limb already has a control of this kind)."""
    from ..core.mapping.bone_mapping import auto_map_skeleton

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
        left = _ancestors(skeleton, skeleton.index(slots["thigh.L"]))
        right = set(_ancestors(skeleton, skeleton.index(slots["thigh.R"])))
        pelvis = next((skeleton.names[j] for j in left if j in right), "")
        return {
            "name": "Ground Feet",
            "bone_start": slots["thigh.L"], "bone_end": slots["foot.L"],
            "second_start": slots["thigh.R"], "second_end": slots["foot.R"],
            "pelvis_bone": pelvis, "smooth_time": 0.08,
        }
    return {}


def _ancestors(skeleton: Any, j: int) -> list[int]:
    out = []
    p = int(skeleton.parents[j])
    while p >= 0:
        out.append(p)
        p = int(skeleton.parents[p])
    return out


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


class MARIONETTE_OT_control_add(bpy.types.Operator):
    """Add a control to the active armature (bones suggested from the humanoid mapping when it finds them)"""

    bl_idname = "marionette.control_add"
    bl_label = "Add Control"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "kind"

    kind: EnumProperty(name="Type", items=KIND_ITEMS, default="TWO_BONE_IK")  # type: ignore[valid-type]
    create_target: BoolProperty(  # type: ignore[valid-type]
        name="Create Target", default=True,
        description="IK and look-at: add an empty at the reaching or looking bone to serve as the target",
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _list_editable(cls, context)

    def execute(self, context: Any) -> set[str]:
        obj = context.active_object
        settings = obj.marionette_controls
        suggestion = _suggest(obj, self.kind)
        reach = suggestion.pop("_reach", None)
        look = suggestion.pop("_look", None)
        row = settings.controls.add()
        row.kind = self.kind
        row.name = _unique(settings.controls, suggestion.pop("name", KIND_LABEL[self.kind]))
        for key, value in suggestion.items():
            setattr(row, key, value)
        if self.create_target and (reach or look):
            row.target_object = _make_target(context, obj, reach or look, row.name, ahead=look is not None)
        settings.active_index = len(settings.controls) - 1
        control_overrides.write(obj)
        live_preview.definitions_changed(obj)
        self.report({"INFO"}, f"Added {KIND_LABEL[self.kind]} {row.name!r} to {obj.name!r}")
        return {"FINISHED"}


class MARIONETTE_OT_control_remove(bpy.types.Operator):
    """Remove the selected control"""

    bl_idname = "marionette.control_remove"
    bl_label = "Remove Control"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _has_active(cls, context) and _list_editable(cls, context)

    def execute(self, context: Any) -> set[str]:
        obj = context.active_object
        settings = obj.marionette_controls
        name = settings.controls[settings.active_index].name
        if control_overrides.is_override(obj):
            control_overrides.remove(obj, settings.active_index)
        else:
            settings.controls.remove(settings.active_index)
        settings.active_index = min(settings.active_index, len(settings.controls) - 1)
        live_preview.definitions_changed(obj)
        self.report({"INFO"}, f"Removed control {name!r}")
        return {"FINISHED"}


class MARIONETTE_OT_control_move(bpy.types.Operator):
    """Move the selected control up or down the list (list order breaks ties of priority)"""

    bl_idname = "marionette.control_move"
    bl_label = "Move Control"
    bl_options = {"REGISTER", "UNDO"}

    direction: EnumProperty(name="Direction", items=[("UP", "Up", ""), ("DOWN", "Down", "")])  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _has_active(cls, context) and _list_editable(cls, context)

    def execute(self, context: Any) -> set[str]:
        obj = context.active_object
        settings = obj.marionette_controls
        i = settings.active_index
        j = i - 1 if self.direction == "UP" else i + 1
        if not 0 <= j < len(settings.controls):
            self.report({"INFO"}, "The control is already at that end of the list")
            return {"CANCELLED"}
        if control_overrides.is_override(obj):
            control_overrides.move(obj, i, j)
        else:
            settings.controls.move(i, j)
        settings.active_index = j
        live_preview.definitions_changed(obj)
        return {"FINISHED"}


class MARIONETTE_OT_controls_reset(bpy.types.Operator):
    """Forget the controls' smoothing and spring state and show the current frame afresh"""

    bl_idname = "marionette.controls_reset"
    bl_label = "Reset Controls"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _armature_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        live_preview.reset(context.active_object)
        return {"FINISHED"}


class MARIONETTE_OT_bake_controls(bpy.types.Operator):
    """Write the animation with the controls applied into a new Action (the current one is kept)"""

    bl_idname = "marionette.bake_controls"
    bl_label = "Bake Controls"
    bl_options = {"REGISTER", "UNDO"}

    use_scene_range: BoolProperty(name="Scene Range", default=True, description="Bake the scene's frame range")  # type: ignore[valid-type]
    frame_start: IntProperty(name="Start", default=1, description="First frame to bake (springs start here)")  # type: ignore[valid-type]
    frame_end: IntProperty(name="End", default=250, description="Last frame to bake")  # type: ignore[valid-type]
    action_name: StringProperty(name="Action Name", description="Name of the new Action (empty: the current one's with '_controls')")  # type: ignore[valid-type]
    disable_live: BoolProperty(  # type: ignore[valid-type]
        name="Turn Off Live Preview", default=True,
        description="The baked Action already holds the controls' result; live controls would apply them twice",
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _armature_ready(cls, context):
            return False
        if not len(context.active_object.marionette_controls.controls):
            cls.poll_message_set("Add a control first")
            return False
        return True

    def invoke(self, context: Any, event: Any) -> set[str]:
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = context.scene.frame_start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = context.scene.frame_end
        return self.execute(context)

    def execute(self, context: Any) -> set[str]:
        obj = context.active_object
        scene = context.scene
        try:
            frames = frames_of(scene, None, None) if self.use_scene_range else frames_of(scene, self.frame_start, self.frame_end)
            outcome = bake_controls(obj, frames, self.action_name or None, disable_live=self.disable_live, scene=scene)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
        worst = max((c["max_residual"] for c in outcome.controls.values() if c["residual_unit"] == "units"), default=0.0)
        self.report(
            {"INFO"},
            f"Baked {outcome.frames.shape[0]} frames of {len(outcome.controls)} controls into {outcome.action.name!r} "
            f"in {outcome.seconds:.2f} s (largest IK residual {worst:.2g})",
        )
        return {"FINISHED"}


class MARIONETTE_OT_prepare_render(bpy.types.Operator):
    """Show every frame of the scene range once, so renders from the interface (F12, Ctrl+F12),
    which run where controls cannot, show the live controls as the viewport does"""

    bl_idname = "marionette.prepare_render"
    bl_label = "Prepare Render"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _armature_ready(cls, context):
            return False
        if not context.active_object.marionette_controls.live_preview:
            cls.poll_message_set("Turn the live preview on first")
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        obj, scene, wm = context.active_object, context.scene, context.window_manager
        start, end = scene.frame_start, scene.frame_end
        wm.progress_begin(0, max(1, end - start + 1))
        try:
            live_preview.prepare_render(scene, start, end, wm.progress_update)
        finally:
            wm.progress_end()
        missing = live_preview.frames_not_kept(obj, scene, start, end)
        if missing:
            self.report({"WARNING"}, f"{len(missing)} of {end - start + 1} frames could not be prepared (see the Controls panel)")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Frames {start}–{end} prepared: renders from the interface show the controls until something changes")
        return {"FINISHED"}


classes = (
    MARIONETTE_OT_control_add,
    MARIONETTE_OT_control_remove,
    MARIONETTE_OT_control_move,
    MARIONETTE_OT_controls_reset,
    MARIONETTE_OT_bake_controls,
    MARIONETTE_OT_prepare_render,
)
register, unregister = bpy.utils.register_classes_factory(classes)
