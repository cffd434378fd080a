"""Operators of the Retarget workflow. Each is a few lines around one entry function of
:mod:`..usecases` (:func:`~..usecases.retarget.retarget_clip`, :mod:`..usecases.mapping_rows`):
``poll()`` says why it is unavailable, ``execute()`` refuses bad input before changing anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..bridge import played_pose
from ..bridge.action_write import linked_problem
from ..core.errors import MarionetteError
from ..core.mapping.presets import preset_names
from ..properties.retarget_settings import clip_of, pair_key
from ..usecases import mapping_rows
from ..usecases.retarget import retarget_clip
from ..viewport import deferred_summary
from .reporting import report_step

SIDE_ITEMS = [("SOURCE", "Source", "The source armature's mapping"), ("TARGET", "Target", "The target armature's mapping")]


def _settings(context: Any) -> Any:
    return context.scene.marionette


def _pair_ready(cls: Any, context: Any) -> bool:
    s = getattr(context.scene, "marionette", None)
    if s is None:
        return False
    if s.source is None or s.target is None:
        cls.poll_message_set("Pick a source and a target armature first")
        return False
    if s.source == s.target:
        cls.poll_message_set("Source and target must be different armatures")
        return False
    return True


class MARIONETTE_OT_auto_map(bpy.types.Operator):
    """Map both armatures' bones to the humanoid profile, with a confidence and a reason per bone"""

    bl_idname = "marionette.auto_map"
    bl_label = "Auto-Map Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _pair_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        try:
            level, line = mapping_rows.auto_map_pair(_settings(context))
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({level}, line)
        return {"FINISHED"}


class MARIONETTE_OT_retarget_clip(bpy.types.Operator):
    """Bake the clip onto the target as a new Action (the source and existing Actions are left as they are)"""

    bl_idname = "marionette.retarget_clip"
    bl_label = "Retarget Clip"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _pair_ready(cls, context):
            return False
        if clip_of(_settings(context)) is None:
            cls.poll_message_set("The source has no active action; pick a clip")
            return False
        problem = linked_problem(_settings(context).target)
        if problem is not None:
            cls.poll_message_set(problem[0].upper() + problem[1:])
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        try:
            outcome, done = retarget_clip(context.scene)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, done)
        for level, line in played_pose.operator_lines(outcome.report):
            self.report({level}, line)
        return {"FINISHED"}


class MARIONETTE_OT_mapping_save(bpy.types.Operator, ExportHelper):
    """Save one armature's bone mapping as a JSON preset"""

    bl_idname = "marionette.mapping_save"
    bl_label = "Save Mapping"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})  # type: ignore[valid-type]
    side: EnumProperty(name="Side", items=SIDE_ITEMS, default="TARGET")  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not _pair_ready(cls, context):
            return False
        s = _settings(context)
        if not (len(s.mapping) or len(s.chains)) or s.mapping_pair != pair_key(s):
            cls.poll_message_set("Auto-map the pair (or add chains) first")
            return False
        return True

    def invoke(self, context: Any, event: Any) -> set[str]:
        self.filepath = str(Path(presets_directory()) / "mapping.json")
        return ExportHelper.invoke(self, context, event)  # type: ignore[no-any-return]

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: mapping_rows.save_mapping(_settings(context), self.side, self.filepath))


class MARIONETTE_OT_mapping_load(bpy.types.Operator, ImportHelper):
    """Load a JSON mapping preset onto one side of the pair (bones the armature lacks are refused)"""

    bl_idname = "marionette.mapping_load"
    bl_label = "Load Mapping"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})  # type: ignore[valid-type]
    side: EnumProperty(name="Side", items=SIDE_ITEMS, default="TARGET")  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _pair_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: mapping_rows.load_mapping(_settings(context), self.side, self.filepath))


class MARIONETTE_OT_chain_add(bpy.types.Operator):
    """Add a chain row: describe a body no profile fits (a bird, a spider, a tentacle) as chains, each from a start bone down to an end bone on both rigs"""

    bl_idname = "marionette.chain_add"
    bl_label = "Add Chain"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _pair_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: mapping_rows.add_chain(_settings(context)))


class MARIONETTE_OT_chain_remove(bpy.types.Operator):
    """Remove the selected chain row"""

    bl_idname = "marionette.chain_remove"
    bl_label = "Remove Chain"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        s = getattr(context.scene, "marionette", None)
        if s is None or not len(s.chains):
            cls.poll_message_set("No chain rows to remove")
            return False
        return True

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: mapping_rows.remove_chain(_settings(context)))


def _preset_items(_self: Any, _context: Any) -> list[tuple[str, str, str]]:
    return [(n, n.replace("_", " ").title(), f"Shipped mapping for the {n} naming") for n in preset_names()]


class MARIONETTE_OT_mapping_preset(bpy.types.Operator):
    """Apply a shipped naming preset to one side of the pair (slots whose bone the armature lacks are left as they are)"""

    bl_idname = "marionette.mapping_preset"
    bl_label = "Apply Mapping Preset"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "preset"
    preset: EnumProperty(name="Preset", items=_preset_items)  # type: ignore[valid-type]
    side: EnumProperty(name="Side", items=SIDE_ITEMS, default="TARGET")  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _pair_ready(cls, context)

    def invoke(self, context: Any, event: Any) -> set[str]:
        context.window_manager.invoke_search_popup(self)
        return {"RUNNING_MODAL"}

    def execute(self, context: Any) -> set[str]:
        return report_step(self, lambda: mapping_rows.apply_preset(_settings(context), self.side, self.preset))


def presets_directory() -> str:
    """Where users' mapping presets live: the extension's user directory when installed as an
    extension, else the current directory."""
    package = __package__.rsplit(".", 1)[0] if __package__ else ""
    try:
        return str(bpy.utils.extension_path_user(package, path="presets", create=True))
    except (ValueError, KeyError):
        return str(Path.cwd())


classes = (
    MARIONETTE_OT_auto_map,
    MARIONETTE_OT_retarget_clip,
    MARIONETTE_OT_mapping_save,
    MARIONETTE_OT_mapping_load,
    MARIONETTE_OT_mapping_preset,
    MARIONETTE_OT_chain_add,
    MARIONETTE_OT_chain_remove,
)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()


def unregister() -> None:
    deferred_summary.clear()
    _unregister()
