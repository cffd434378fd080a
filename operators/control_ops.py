"""Operators of the Controls workflow: add, remove and reorder controls on the active armature,
reset their state, Bake Controls and Prepare Render. Each is a few lines around one entry
function of :mod:`..usecases.controls` or :mod:`..usecases.bake_controls`.
"""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

from typing import Any

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, StringProperty

from ..core.errors import MarionetteError
from ..properties.control_settings import COLLIDER_KIND_ITEMS, KIND_ITEMS, KIND_LABEL
from ..usecases import controls
from ..usecases.bake_controls import bake_controls, frames_of
from .reporting import report_step


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
        name = controls.add_control(context, obj, self.kind, self.create_target)
        self.report({"INFO"}, f"Added {KIND_LABEL[self.kind]} {name!r} to {obj.name!r}")
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
        name = controls.remove_control(context.active_object)
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
        if not controls.move_control(context.active_object, up=self.direction == "UP"):
            self.report({"INFO"}, "The control is already at that end of the list")
            return {"CANCELLED"}
        return {"FINISHED"}


class MARIONETTE_OT_collider_add(bpy.types.Operator):
    """Add a spring collider on the active bone, sized from the mesh it deforms (or its length)"""

    bl_idname = "marionette.collider_add"
    bl_label = "Add Collider"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "kind"

    kind: EnumProperty(name="Shape", items=COLLIDER_KIND_ITEMS, default="SPHERE")  # type: ignore[valid-type]
    bone: StringProperty(name="Bone", description="Bone to put it on (empty: the active bone)")  # type: ignore[valid-type]
    group: StringProperty(name="Group", default="Body", description="Collider group (spring chains choose groups)")  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _list_editable(cls, context):
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        obj = context.active_object
        active = obj.data.bones.active
        bone = self.bone or (active.name if active is not None else "")
        return report_step(self, lambda: f"Added collider {controls.add_collider(obj, self.kind, bone, self.group)!r} on {bone!r} (group {self.group!r})")


class MARIONETTE_OT_collider_remove(bpy.types.Operator):
    """Remove the selected spring collider"""

    bl_idname = "marionette.collider_remove"
    bl_label = "Remove Collider"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _list_editable(cls, context):
            return False
        s = context.active_object.marionette_controls
        if not 0 <= s.active_collider < len(s.colliders):
            cls.poll_message_set("Select a collider in the list")
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: f"Removed collider {controls.remove_collider(context.active_object)!r}")


class MARIONETTE_OT_controls_reset(bpy.types.Operator):
    """Forget the controls' smoothing and spring state and show the current frame afresh"""

    bl_idname = "marionette.controls_reset"
    bl_label = "Reset Controls"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _armature_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        controls.reset_controls(context.active_object)
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
        first_last = (None, None) if self.use_scene_range else (self.frame_start, self.frame_end)
        try:
            frames = frames_of(scene, *first_last)
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
            missing = controls.prepare_render(obj, scene, wm.progress_update)
        finally:
            wm.progress_end()
        if missing:
            self.report({"WARNING"}, f"{len(missing)} of {end - start + 1} frames could not be prepared (see the Controls panel)")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Frames {start}–{end} prepared: renders from the interface show the controls until something changes")
        return {"FINISHED"}


classes = (
    MARIONETTE_OT_control_add,
    MARIONETTE_OT_control_remove,
    MARIONETTE_OT_control_move,
    MARIONETTE_OT_collider_add,
    MARIONETTE_OT_collider_remove,
    MARIONETTE_OT_controls_reset,
    MARIONETTE_OT_bake_controls,
    MARIONETTE_OT_prepare_render,
)
register, unregister = bpy.utils.register_classes_factory(classes)
