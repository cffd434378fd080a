"""Operators of the Retarget workflow. Each is a few lines around one job of :mod:`.jobs`:
``poll()`` says why it is unavailable, ``execute()`` refuses bad input before changing anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..bridge import played_pose
from ..bridge.armature_io import linked_problem, rest_heads_tails, skeleton_from_armature
from ..bridge.file_import import scene_fps
from ..core.errors import MarionetteError
from ..core.mapping.auto_map import auto_map_skeleton
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.presets import preset_mapping, preset_names
from ..core.retarget.geometric import RetargetOptions
from ..properties.retarget_settings import fill_rows, mapping_from_rows, mappings_from_rows, methods_from_rows, pair_key
from ..usecases import jobs

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


def clip_of(settings: Any) -> Any:
    """The clip to retarget: the chosen one, else the source's active action."""
    if settings.action is not None:
        return settings.action
    ad = settings.source.animation_data if settings.source else None
    return ad.action if ad is not None else None


def options_of(settings: Any) -> RetargetOptions:
    return RetargetOptions(
        root_motion=settings.root_motion,
        horizontal_scale=None if settings.auto_scale else settings.horizontal_scale,
        vertical_scale=None if settings.auto_scale else settings.vertical_scale,
        fingers=settings.fingers,
        plant_feet=settings.plant_feet,
    )


class MARIONETTE_OT_auto_map(bpy.types.Operator):
    """Map both armatures' bones to the humanoid profile, with a confidence and a reason per bone"""

    bl_idname = "marionette.auto_map"
    bl_label = "Auto-Map Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _pair_ready(cls, context)

    def execute(self, context: Any) -> set[str]:
        s = _settings(context)
        try:
            maps = [_auto_map(s.source), _auto_map(s.target)]
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        fill_rows(s, maps[0], maps[1])
        problems = [f"{o.name}: {m.refusal_message()}" for o, m in zip((s.source, s.target), maps, strict=True) if not m.is_humanoid]
        conflicts = sum(len(m.conflicts) for m in maps)
        if problems:
            self.report({"WARNING"}, "Not retargetable as humanoid: " + "; ".join(problems))
        else:
            self.report({"INFO"}, f"Mapped {len(s.mapping)} slots ({conflicts} conflicts to review)")
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
        s = _settings(context)
        try:
            rows = mappings_from_rows(s)
            outcome = jobs.retarget_action(
                s.source,
                clip_of(s),
                s.target,
                scene_fps=scene_fps(context.scene),
                keep_frames=s.keep_frames,
                options=options_of(s),
                source_mapping=rows[0] if rows else None,
                target_mapping=rows[1] if rows else None,
                replace_existing=s.replace_action,
                methods=methods_from_rows(s),
                match_rest=s.match_rest,
                judge=not _defer_summary(),
            )
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if rows is None:
            fill_rows(s, outcome.source_mapping, outcome.target_mapping)
        done = f"Retargeted onto {s.target.name!r} as {outcome.action.name!r}"
        if outcome.judge_later is not None:
            # The Quality panel says it is measuring until the timer fills it in (warnings too).
            s.last_report = json.dumps({"action": outcome.action.name, "pending": True})
            _PENDING[context.scene.name] = (outcome, bool(s.color_bones))
            if not bpy.app.timers.is_registered(finish_pending_summaries):
                bpy.app.timers.register(finish_pending_summaries, first_interval=0.0)
            self.report({"INFO"}, f"{done}; measuring its quality (the Quality panel fills in)")
        else:
            _show_quality(s, outcome, bool(s.color_bones))
            summary = outcome.report["summary"]
            self.report({"INFO"}, f"{done}: bone direction error mean {summary['mean_direction_error']:.2f} deg")
        for level, line in played_pose.operator_lines(outcome.report):
            self.report({level}, line)
        return {"FINISHED"}


#: Measure the quality summary after Retarget Clip returns, in a timer that fills the Quality
#: panel (the click itself then costs only the retarget). ``None``: when Blender has a window;
#: in the background (command line, Blender as a module) nothing runs timers, so it is measured
#: before the operator returns.
DEFER_SUMMARY: bool | None = None

#: Per scene, the last retarget whose summary is still to measure, and whether to colour bones.
_PENDING: dict[str, tuple[jobs.RetargetOutcome, bool]] = {}
#: The summaries measured after their click, by action name (the latest few): an undo back to a
#: click's own step brings back its "measuring" state, and the panel shows these figures then.
_MEASURED: dict[str, str] = {}


def summary_pending(scene: Any) -> bool:
    """Whether a retarget's summary is still to be measured for ``scene`` (the Quality panel then
    says it is measuring)."""
    return getattr(scene, "name", None) in _PENDING


def measured_summary(action_name: str) -> dict[str, Any] | None:
    """The Quality panel's figures measured after the click that made ``action_name``, if any."""
    text = _MEASURED.get(action_name)
    return None if text is None else dict(json.loads(text))


def _defer_summary() -> bool:
    return not bpy.app.background if DEFER_SUMMARY is None else DEFER_SUMMARY


def _show_quality(settings: Any, outcome: jobs.RetargetOutcome, color_bones: bool, *, keep: bool = False) -> None:
    """The measured summary into the Quality panel's data (and the bones' colours when asked);
    ``keep`` also keeps it for :func:`measured_summary`."""
    settings.last_report = json.dumps(
        {
            "action": outcome.action.name,
            **outcome.report["summary"],
            "foot_slide": jobs.foot_slide(outcome.report),
            "hip_drop": outcome.report.get("planted_hip_drop", {}),
            **played_pose.panel_fields(outcome.report),
        }
    )
    if keep:
        if len(_MEASURED) >= 16:
            _MEASURED.pop(next(iter(_MEASURED)))
        _MEASURED[outcome.action.name] = settings.last_report
    if color_bones:
        jobs.color_bones_by_error(settings.target, outcome.binding, outcome.report)


def finish_pending_summaries() -> None:
    """Measure the retargets whose summary is pending and show it (the timer's callback; returns
    ``None`` so it runs once). A retarget undone or deleted meanwhile, or a scene whose panel now
    shows another result, is dropped."""
    pending = list(_PENDING.items())
    _PENDING.clear()
    for scene_name, (outcome, color_bones) in pending:
        scene = bpy.data.scenes.get(scene_name)
        settings = getattr(scene, "marionette", None)
        if settings is None:
            continue
        try:
            if json.loads(settings.last_report or "{}") != {"action": outcome.action.name, "pending": True}:
                continue  # the panel shows another result now
            outcome.report.update(outcome.judge_later())
            outcome.judge_later = None
            _show_quality(settings, outcome, color_bones, keep=True)
        except (ReferenceError, MarionetteError):  # the action or the target is gone (undo, deleted)
            settings.last_report = ""  # nothing to show rather than "Measuring…" for ever
    for window in getattr(bpy.context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def _side(settings: Any, side: str) -> BoneMapping:
    """A side's mapping from the rows, or auto-mapped when there are no rows for this pair."""
    rows = mapping_from_rows(settings, side)
    if rows is not None:
        return rows
    return _auto_map(settings.source if side == "SOURCE" else settings.target)


def _auto_map(obj: Any) -> BoneMapping:
    return auto_map_skeleton(skeleton_from_armature(obj), rest_heads_tails(obj)[1])


def _other_side(settings: Any, side: str) -> BoneMapping:
    return _side(settings, "TARGET" if side == "SOURCE" else "SOURCE")


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
        if not len(s.mapping) or s.mapping_pair != pair_key(s):
            cls.poll_message_set("Auto-map the pair first")
            return False
        return True

    def invoke(self, context: Any, event: Any) -> set[str]:
        self.filepath = str(Path(presets_directory()) / "mapping.json")
        return ExportHelper.invoke(self, context, event)  # type: ignore[no-any-return]

    def execute(self, context: Any) -> set[str]:
        try:
            mapping = mapping_from_rows(_settings(context), self.side)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if mapping is None:
            self.report({"ERROR"}, "No mapping to save")
            return {"CANCELLED"}
        try:
            mapping.save(self.filepath)
        except (OSError, MarionetteError) as exc:
            self.report({"ERROR"}, f"Cannot save {self.filepath}: {exc}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Saved {len(mapping)} slots to {self.filepath}")
        return {"FINISHED"}


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
        s = _settings(context)
        try:
            loaded = BoneMapping.load(self.filepath)
            obj = s.source if self.side == "SOURCE" else s.target
            absent = [mb.bone for mb in loaded.slots.values() if mb.bone not in obj.data.bones]
            if absent:
                raise MarionetteError(f"{obj.name!r} has no bones called {', '.join(repr(b) for b in absent[:6])}")
            other = _other_side(s, self.side)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        fill_rows(s, *((loaded, other) if self.side == "SOURCE" else (other, loaded)))
        self.report({"INFO"}, f"Loaded {len(loaded)} slots for {obj.name!r}")
        return {"FINISHED"}


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
        s = _settings(context)
        obj = s.source if self.side == "SOURCE" else s.target
        try:
            preset = preset_mapping(self.preset)
            current = _side(s, self.side)
            other = _other_side(s, self.side)
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        applied = 0
        for slot, mb in preset.slots.items():
            if mb.bone in obj.data.bones:
                current = current.with_bone(slot, mb.bone, reason=mb.reason)
                applied += 1
        if not applied:
            self.report({"ERROR"}, f"{obj.name!r} has none of the {self.preset} preset's bones")
            return {"CANCELLED"}
        fill_rows(s, *((current, other) if self.side == "SOURCE" else (other, current)))
        self.report({"INFO"}, f"Applied {applied} of {len(preset)} preset slots to {obj.name!r}")
        return {"FINISHED"}


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
)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()


def unregister() -> None:
    if bpy.app.timers.is_registered(finish_pending_summaries):
        bpy.app.timers.unregister(finish_pending_summaries)
    _PENDING.clear()
    _MEASURED.clear()
    _unregister()
