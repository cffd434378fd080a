"""MMD operators of the sidebar's MMD panel: key a VMD motion onto a PMX rig
(:func:`~..usecases.vmd_apply.apply_vmd`), switch the rig's physics on or off
(:func:`~..bridge.rigid_bodies.set_physics`) and bake it (:func:`~..usecases.bake_physics.bake_physics`)."""

from __future__ import annotations

from typing import Any

import bpy
from bpy.props import BoolProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..bridge.rigid_bodies import physics_objects, set_physics
from ..core.errors import MarionetteError
from ..usecases.import_pmx import SCALE_PROPERTY


def _pmx_rig(context: Any) -> Any:
    obj = context.active_object
    return obj if obj is not None and obj.type == "ARMATURE" and obj.get(SCALE_PROPERTY) is not None else None


def _poll_rig(cls: Any, context: Any, physics: bool) -> bool:
    obj = _pmx_rig(context)
    if obj is None:
        cls.poll_message_set("Select an armature imported from a PMX model")
        return False
    if context.mode != "OBJECT":
        cls.poll_message_set("Switch to Object Mode first")
        return False
    if physics and not physics_objects(obj):
        cls.poll_message_set("The rig has no rigid bodies (import it with Physics on)")
        return False
    return True


class MARIONETTE_OT_apply_vmd(bpy.types.Operator, ImportHelper):
    """Key a MikuMikuDance motion (.vmd) onto the active PMX rig as a new Action"""

    bl_idname = "marionette.apply_vmd"
    bl_label = "Load VMD Motion"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".vmd"
    filter_glob: StringProperty(default="*.vmd", options={"HIDDEN"})  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _poll_rig(cls, context, physics=False)

    def execute(self, context: Any) -> set[str]:
        from ..usecases.vmd_apply import apply_vmd

        try:
            done = apply_vmd(_pmx_rig(context), self.filepath)
        except (MarionetteError, FileNotFoundError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Keyed {len(done.get('keyed', []))} bones, frames {done['frames'][0]:g}-{done['frames'][1]:g}")
        return {"FINISHED"}


class MARIONETTE_OT_mmd_physics(bpy.types.Operator):
    """Switch the active PMX rig's physics (the scene's rigid-body world and its bones following their bodies) on or off"""

    bl_idname = "marionette.mmd_physics"
    bl_label = "MMD Physics"
    bl_options = {"REGISTER", "UNDO"}
    enable: BoolProperty(name="Enable", default=True)  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _poll_rig(cls, context, physics=True)

    def execute(self, context: Any) -> set[str]:
        set_physics(_pmx_rig(context), context.scene, self.enable)
        return {"FINISHED"}


class MARIONETTE_OT_bake_physics(bpy.types.Operator):
    """Bake the active PMX rig's controls and rigid-body simulation over the scene's range into a new Action"""

    bl_idname = "marionette.bake_physics"
    bl_label = "Bake Physics"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _poll_rig(cls, context, physics=True)

    def execute(self, context: Any) -> set[str]:
        from ..usecases.bake_physics import bake_physics

        try:
            baked = bake_physics(_pmx_rig(context), scene=context.scene)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        r = baked.report
        self.report({"INFO"}, f"Baked {r['frame_count']} frames into {r['action']!r}: {len(r['bones_written_back'])} bones follow their bodies")
        return {"FINISHED"}


classes = (MARIONETTE_OT_apply_vmd, MARIONETTE_OT_mmd_physics, MARIONETTE_OT_bake_physics)
register, unregister = bpy.utils.register_classes_factory(classes)
