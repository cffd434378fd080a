"""The Import PMX Rig operator (File > Import): a few lines around
:func:`~..usecases.import_pmx.import_pmx_rig`, which reads and converts the model before anything
in Blender changes."""

from __future__ import annotations

from typing import Any

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..core.errors import MarionetteError
from ..core.formats.pmx_rig import DEFAULT_SCALE
from ..usecases.import_pmx import controls_available, import_pmx_rig


class MARIONETTE_OT_import_pmx_rig(bpy.types.Operator, ImportHelper):
    """Build an armature from a PMX (MikuMikuDance) model, with its IK chains, inheritance and fixed axes as controls"""

    bl_idname = "marionette.import_pmx_rig"
    bl_label = "Import PMX Rig"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".pmx"
    filter_glob: StringProperty(default="*.pmx", options={"HIDDEN"})  # type: ignore[valid-type]
    scale: FloatProperty(  # type: ignore[valid-type]
        name="Scale", default=DEFAULT_SCALE, min=1e-6, soft_min=0.001, soft_max=1.0, precision=3,
        description="Metres per MMD unit (0.08: a 20-unit-tall model stands 1.6 m)",
    )
    bone_names: EnumProperty(  # type: ignore[valid-type]
        name="Bone Names",
        items=[
            ("JAPANESE", "Japanese", "MMD's own names, the ones motion files use (English kept as a bone property)"),
            ("ENGLISH", "English", "The model's English names where every bone has a distinct one, else the Japanese"),
        ],
        default="JAPANESE",
    )
    physics: BoolProperty(  # type: ignore[valid-type]
        name="Physics",
        default=False,
        description="Also build the model's rigid bodies and joints in the scene's rigid-body world: hair and skirts move by "
        "Blender's simulation and their bones follow their bodies",
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not controls_available():
            cls.poll_message_set("The Controls workflow is not registered")
            return False
        if context.mode != "OBJECT":
            cls.poll_message_set("Switch to Object Mode first")
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        try:
            result = import_pmx_rig(self.filepath, scale=self.scale, names=self.bone_names.lower(), physics=self.physics)
        except (MarionetteError, FileNotFoundError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        obj = result.obj
        for o in context.view_layer.objects:
            o.select_set(False)
        obj.select_set(True)
        context.view_layer.objects.active = obj
        counts = result.report()["controls"]
        self.report(
            {"INFO"},
            f"Imported {obj.name!r}: {len(result.rig.skeleton)} bones, {counts['ik']} IK chains, "
            f"{counts['inherit']} inheriting bones, {counts['fixed_axis']} fixed axes",
        )
        if result.physics is not None:
            p = result.physics_report()
            self.report({"INFO"}, f"Physics: {p['bodies']} rigid bodies ({p['dynamic'] + p['dynamic_bone_position']} simulated), {p['joints']} joints")
        for note in result.notes:
            self.report({"WARNING"}, note)
        return {"FINISHED"}


def menu_import(self: Any, _context: Any) -> None:
    self.layout.operator(MARIONETTE_OT_import_pmx_rig.bl_idname, text="PMX Rig (Marionette) (.pmx)")


classes = (MARIONETTE_OT_import_pmx_rig,)

_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()
    bpy.types.TOPBAR_MT_file_import.append(menu_import)


def unregister() -> None:
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)
    _unregister()
