"""The sidebar panel "MMD" (tab "Controls"): import a PMX rig, key a VMD motion onto it, switch
its physics on or off and bake it. Each button is an operator of :mod:`..operators`."""

from __future__ import annotations

from typing import Any

import bpy

from ..bridge.rigid_bodies import physics_enabled, physics_objects
from ..usecases.import_pmx import SCALE_PROPERTY
from .retarget_panel import MarionettePanel


class VIEW3D_PT_marionette_mmd(MarionettePanel, bpy.types.Panel):
    bl_category = "Controls"
    bl_label = "MMD"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Any) -> None:
        col = self.layout.column()
        col.operator("marionette.import_pmx_rig", text="Import PMX Rig", icon="IMPORT")
        obj = context.active_object
        if obj is None or obj.type != "ARMATURE" or obj.get(SCALE_PROPERTY) is None:
            col.label(text="Select a PMX rig for motions and physics", icon="INFO")
            return
        col.operator("marionette.apply_vmd", icon="ACTION")
        bodies = physics_objects(obj)
        if not bodies:
            col.label(text="No rigid bodies (import with Physics on)", icon="INFO")
            return
        on = physics_enabled(obj, context.scene)
        row = col.row(align=True)
        row.label(text=f"{len(bodies)} rigid bodies", icon="PHYSICS")
        op = row.operator("marionette.mmd_physics", text="On" if not on else "Off", icon="PLAY" if not on else "PAUSE")
        op.enable = not on
        col.operator("marionette.bake_physics", icon="REC")


classes = (VIEW3D_PT_marionette_mmd,)
register, unregister = bpy.utils.register_classes_factory(classes)
