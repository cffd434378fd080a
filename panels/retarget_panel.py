"""The sidebar tab "Retarget": pick the pair and the clip, review the mapping, retarget, read the
quality figures; bake a pack; export for a game engine."""

from __future__ import annotations

import json
from typing import Any

import bpy

from ..bridge.control_preview import control_rig_preview
from ..core.batch.output_files import REPORT_RECORD
from ..core.batch.status import CLIP_GOOD, FILE_BAKED
from ..core.errors import MarionetteError
from ..core.mapping.humanoid import MINIMUM_SLOTS
from ..properties.retarget_settings import clip_of
from ..usecases.export_scene import FORMAT_OF_CHOICE, clips_to_export, engines_for
from ..viewport.deferred_summary import measured_summary, summary_pending


class MarionettePanel:
    """Shared placement of every Marionette panel: 3D viewport sidebar, tab "Retarget"."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Retarget"


class MARIONETTE_UL_mapping(bpy.types.UIList):
    """One row per humanoid slot: source bone, target bone, confidence; conflicts in red."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any, active_prop: Any, index: int = 0) -> None:
        s = context.scene.marionette
        row = layout.row(align=True)
        empty = item.slot in MINIMUM_SLOTS and not (item.source_bone and item.target_bone)
        row.alert = bool(item.conflict) or empty
        row.label(text=item.slot, icon="ERROR" if item.conflict or empty else "BONE_DATA")
        if s.source is not None:
            row.prop_search(item, "source_bone", s.source.data, "bones", text="")
        if s.target is not None:
            row.prop_search(item, "target_bone", s.target.data, "bones", text="")
        row.prop(item, "method", text="")
        conf = min(item.source_confidence, item.target_confidence)
        row.label(text=f"{100 * conf:.0f}%")


#: Controls named in the sidebar before "(+N)".
SHOWN_CONTROLS = 6


def control_rig_lines(preview: dict[str, Any]) -> list[str]:
    """The sidebar's lines for a control rig target (:func:`~..bridge.control_preview.control_rig_preview`)."""
    lines = [f"Control rig: {preview['plan']}"]
    controls = preview["controls"]
    if controls:
        more = f" (+{len(controls) - SHOWN_CONTROLS})" if len(controls) > SHOWN_CONTROLS else ""
        lines.append(f"Keys {len(controls)} controls: {', '.join(controls[:SHOWN_CONTROLS])}{more}")
    by_value: dict[tuple[str, float], list[str]] = {}
    for sw in preview["switches"]:
        by_value.setdefault((sw["property"], sw["value"]), []).append(sw["bone"])
    for (prop, value), bones in by_value.items():
        more = f" (+{len(bones) - 2})" if len(bones) > 2 else ""
        lines.append(f"Sets {prop} = {value:g} on {', '.join(bones[:2])}{more}")
    return lines


class VIEW3D_PT_marionette_retarget(MarionettePanel, bpy.types.Panel):
    bl_label = "Retarget"

    def draw(self, context: Any) -> None:
        s = context.scene.marionette
        col = self.layout.column()
        col.prop(s, "source")
        col.prop(s, "target")
        preview = control_rig_preview(s.target, s.control_rig, s.root_motion) if s.target is not None else None
        if preview is not None:
            box = col.box()
            box.row().prop(s, "control_rig", expand=True)
            for k, line in enumerate(control_rig_lines(preview)):
                box.label(text=line, icon="CONSTRAINT_BONE" if k == 0 else "BLANK1")
        col.prop(s, "action")
        if s.action is None and s.source is not None:
            clip = clip_of(s)
            col.label(text=f"Using: {clip.name}" if clip else "The source has no active action", icon="ACTION")
        row = col.row(align=True)
        row.scale_y = 1.4
        row.operator("marionette.retarget_clip", icon="ARMATURE_DATA")


class VIEW3D_PT_marionette_mapping(MarionettePanel, bpy.types.Panel):
    bl_label = "Bone Mapping"
    bl_parent_id = "VIEW3D_PT_marionette_retarget"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Any) -> None:
        s = context.scene.marionette
        col = self.layout.column()
        col.operator("marionette.auto_map", icon="AUTOMERGE_ON")
        col.template_list("MARIONETTE_UL_mapping", "", s, "mapping", s, "mapping_index", rows=6)
        if 0 <= s.mapping_index < len(s.mapping):
            item = s.mapping[s.mapping_index]
            box = col.box()
            box.label(text=item.reason or "no reason recorded")
            if item.conflict:
                warn = box.row()
                warn.alert = True
                warn.label(text=item.conflict, icon="ERROR")
        for side, attr in (("Source", "source_bone"), ("Target", "target_bone")):
            missing = [r.slot for r in s.mapping if r.slot in MINIMUM_SLOTS and not getattr(r, attr)]
            if missing:
                box = col.box()
                box.alert = True
                box.label(text=f"{side} misses {', '.join(missing)}", icon="ERROR")
                box.label(text="Pick a bone in each red row (its conflict names the nearest bones), then Retarget Clip")
        conflicts = [r.conflict for r in s.mapping if r.conflict] + [c for c in s.mapping_conflicts.split("\n") if c]
        if conflicts:
            box = col.box()
            box.alert = True
            box.label(text=f"{len(conflicts)} conflict(s) to review:", icon="ERROR")
            for c in dict.fromkeys(conflicts):
                box.label(text=c)
        row = col.row(align=True)
        for side in ("SOURCE", "TARGET"):
            op = row.operator("marionette.mapping_save", text=f"Save {side.title()}", icon="EXPORT")
            op.side = side
        row = col.row(align=True)
        for side in ("SOURCE", "TARGET"):
            op = row.operator("marionette.mapping_load", text=f"Load {side.title()}", icon="IMPORT")
            op.side = side
        row = col.row(align=True)
        for side in ("SOURCE", "TARGET"):
            op = row.operator("marionette.mapping_preset", text=f"{side.title()} Preset", icon="PRESET")
            op.side = side


class VIEW3D_PT_marionette_options(MarionettePanel, bpy.types.Panel):
    bl_label = "Options"
    bl_parent_id = "VIEW3D_PT_marionette_retarget"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Any) -> None:
        s = context.scene.marionette
        col = self.layout.column()
        col.prop(s, "root_motion")
        col.prop(s, "auto_scale")
        sub = col.column(align=True)
        sub.enabled = not s.auto_scale
        sub.prop(s, "horizontal_scale")
        sub.prop(s, "vertical_scale")
        col.prop(s, "keep_frames")
        col.prop(s, "fingers")
        col.prop(s, "plant_feet")
        col.prop(s, "match_rest")
        col.prop(s, "replace_action")
        col.prop(s, "push_to_nla")
        col.prop(s, "color_bones")


class VIEW3D_PT_marionette_quality(MarionettePanel, bpy.types.Panel):
    bl_label = "Quality"
    bl_parent_id = "VIEW3D_PT_marionette_retarget"

    @classmethod
    def poll(cls, context: Any) -> bool:
        return bool(getattr(context.scene, "marionette", None) and context.scene.marionette.last_report)

    def draw(self, context: Any) -> None:
        r = json.loads(context.scene.marionette.last_report)
        col = self.layout.column(align=True)
        col.label(text=f"Action: {r['action']}", icon="ACTION")
        if r.get("pending"):
            if summary_pending(context.scene):
                col.label(text="Measuring…", icon="TIME")
                return
            # Undone back to the click's own step: the figures measured after it, if any.
            measured = measured_summary(r["action"])
            if measured is None:
                col.label(text="Not measured: retarget again to see the figures", icon="INFO")
                return
            r = measured
        col.label(text=f"Bone direction: mean {r['mean_direction_error']:.2f}°, max {r['max_direction_error']:.2f}°")
        col.label(text=f"Elbow/knee planes: max {r['max_limb_plane_error']:.2f}°")
        col.label(text=f"Hips height: max {100 * r['hips_height_error']:.1f}% of hip height")
        col.label(text=f"Silhouette overlap: front {r['silhouette_front']:.2f}, side {r['silhouette_side']:.2f}")
        slide = r.get("foot_slide", {})
        for foot in ("foot.L", "foot.R"):
            if foot in slide:
                col.label(text=f"{foot} slide while planted: {100 * slide[foot]:.1f}% of hip height (source {100 * slide[foot + ' source']:.1f}%)")
        drop = r.get("hip_drop") or {}
        if drop.get("frames"):
            col.label(text=f"Hips lowered to reach held feet: up to {100 * drop['max']:.1f}% on {drop['frames']} frames")
        turned = r.get("rotation_since_first_frame") or {}
        if turned:
            col.label(text="Rotation since first frame, off by (mean):")
            col.label(text="  " + ", ".join(f"{group} {deg:.1f}°" for group, deg in turned.items()))
        for note in r.get("notes", []):
            col.label(text=note[:1].upper() + note[1:], icon="INFO")
        for warning in r.get("warnings", []):
            row = col.row()
            row.alert = True
            row.label(text=warning[:1].upper() + warning[1:], icon="ERROR")


classes = (
    MARIONETTE_UL_mapping,
    VIEW3D_PT_marionette_retarget,
    VIEW3D_PT_marionette_mapping,
    VIEW3D_PT_marionette_options,
    VIEW3D_PT_marionette_quality,
)
register, unregister = bpy.utils.register_classes_factory(classes)


class VIEW3D_PT_marionette_batch(MarionettePanel, bpy.types.Panel):
    """Batch Bake: a whole pack onto the target; the last run's per-file outcome."""

    bl_label = "Batch Bake"
    bl_parent_id = "VIEW3D_PT_marionette_retarget"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Any) -> None:
        col = self.layout.column()
        col.operator("marionette.batch_bake", text="Batch Bake…", icon="FILE_FOLDER")
        col.prop(context.scene.marionette, "push_to_nla")
        raw = context.scene.get(REPORT_RECORD)
        if not isinstance(raw, str):
            return
        r = json.loads(raw)
        clips = r.get("clips_by_status", {})
        baked = sum(clips.get(s, 0) for s in CLIP_GOOD)
        box = col.box()
        box.label(text=f"Last run: {baked} clips, {len(r['files'])} files", icon="CHECKMARK" if r.get("ok") else "ERROR")
        for f in r["files"][:40]:
            if f["status"] != FILE_BAKED:
                row = box.row()
                row.alert = True
                row.label(text=f"{f['label']}: {f['status']} — {f.get('reason', '')}")


classes = (*classes, VIEW3D_PT_marionette_batch)
register, unregister = bpy.utils.register_classes_factory(classes)


class VIEW3D_PT_marionette_export(MarionettePanel, bpy.types.Panel):
    """Export: the new Action or the last Batch Bake's, for a game engine or the web."""

    bl_label = "Export"
    bl_parent_id = "VIEW3D_PT_marionette_retarget"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Any) -> None:
        e = context.scene.marionette.export
        col = self.layout.column()
        col.prop(e, "file_format")
        row = col.row(align=True)
        for engine in engines_for(FORMAT_OF_CHOICE[e.file_format]):  # only the engines that read the format
            row.prop_enum(e, "engine", engine.upper())
        col.prop(e, "folder")
        col.prop(e, "what", text="")
        try:
            target, names = clips_to_export(context.scene, e.what)
        except MarionetteError as exc:
            row = col.row()
            row.alert = True
            row.label(text=str(exc), icon="ERROR")
        else:
            shown = names[0] if len(names) == 1 else f"{len(names)} Actions ({names[0]}, …)"
            col.label(text=f"{shown} on {target.name}", icon="ACTION")
        col.prop(e, "replace_files")
        row = col.row(align=True)
        row.scale_y = 1.2
        row.operator("marionette.export_clips", icon="EXPORT")


classes = (*classes, VIEW3D_PT_marionette_export)
register, unregister = bpy.utils.register_classes_factory(classes)
