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
from ..core.mapping.quadruped_profile import QUADRUPED_MINIMUM
from ..properties.retarget_settings import clip_of
from ..usecases.export_scene import FORMAT_OF_CHOICE, clips_to_export, engines_for
from ..viewport.deferred_summary import measured_summary, summary_pending


class MarionettePanel:
    """Shared placement of every Marionette panel: 3D viewport sidebar, tab "Retarget"."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Retarget"


class MARIONETTE_UL_mapping(bpy.types.UIList):
    """One row per slot (humanoid, or a quadruped's chain bone): source bone, target bone,
    confidence; conflicts and empty needed slots in red."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any, active_prop: Any, index: int = 0) -> None:
        s = context.scene.marionette
        row = layout.row(align=True)
        empty = item.slot in NEEDED_SLOTS and not (item.source_bone and item.target_bone)
        row.alert = bool(item.conflict) or empty
        row.label(text=item.slot, icon="ERROR" if item.conflict or empty else "BONE_DATA")
        if s.source is not None:
            row.prop_search(item, "source_bone", s.source.data, "bones", text="")
        if s.target is not None:
            row.prop_search(item, "target_bone", s.target.data, "bones", text="")
        row.prop(item, "method", text="")
        conf = min(item.source_confidence, item.target_confidence)
        row.label(text=f"{100 * conf:.0f}%")


class MARIONETTE_UL_chains(bpy.types.UIList):
    """One row per chain of a body described as chains: its name, the source's and the target's
    start and end bone, whether it plants on the ground; a row naming a bone on one side only
    in red."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any, active_prop: Any, index: int = 0) -> None:
        s = context.scene.marionette
        row = layout.row(align=True)
        row.alert = chain_row_problem(item) is not None
        row.prop(item, "name", text="", emboss=False, icon="LINKED")
        for side, rig in (("source", s.source), ("target", s.target)):
            if rig is not None:
                row.prop_search(item, f"{side}_start", rig.data, "bones", text="")
                row.prop_search(item, f"{side}_end", rig.data, "bones", text="")
        row.prop(item, "plants", text="", icon="TRIA_DOWN_BAR")


def chain_row_problem(row: Any) -> str | None:
    """What a chain row lacks to describe its chain on a side it names (``None``: nothing)."""
    for side in ("source", "target"):
        start, end = getattr(row, f"{side}_start"), getattr(row, f"{side}_end")
        if bool(start) != bool(end):
            return f"{row.name or 'a chain'}: pick its {side} {'end' if start else 'start'} bone"
    return None


def draw_chain_rows(col: Any, s: Any) -> None:
    """The Bone Mapping panel's chain rows (a body described as chains) and each side's root and
    head chain (or forward axis)."""
    box = col.box()
    head = box.row(align=True)
    head.label(text=f"Body as chains ({len(s.chains)})" if len(s.chains) else "Body as chains (a bird, a spider...)", icon="LINKED")
    head.operator("marionette.chain_add", text="", icon="ADD")
    head.operator("marionette.chain_remove", text="", icon="REMOVE")
    if not len(s.chains):
        return
    box.template_list("MARIONETTE_UL_chains", "", s, "chains", s, "chain_index", rows=4)
    for side, rig in (("source", s.source), ("target", s.target)):
        row = box.row(align=True)
        if rig is not None:
            row.prop_search(s, f"{side}_root", rig.data, "bones", text=f"{side.title()} Root")
        row.prop_search(s, f"{side}_head", s, "chains", text="Head")
        if not getattr(s, f"{side}_head"):
            box.row().prop(s, f"{side}_forward", text=f"{side.title()} Forward")
    problems = [p for p in (chain_row_problem(r) for r in s.chains) if p]
    for side in ("source", "target"):
        named = any(getattr(r, f"{side}_start") for r in s.chains)
        if named and not getattr(s, f"{side}_root"):
            problems.append(f"{side.title()} Root: pick the bone the {side}'s body hangs from")
        if named and not any(r.plants and getattr(r, f"{side}_start") for r in s.chains):
            problems.append(f"the {side}'s chains: tick Plants on those that stand on the ground")
    for p in problems:
        warn = box.row()
        warn.alert = True
        warn.label(text=p, icon="ERROR")


#: The slots a retarget needs filled on both sides: a humanoid's and a quadruped's (a row of the
#: other profile is never there).
NEEDED_SLOTS = frozenset(MINIMUM_SLOTS) | frozenset(QUADRUPED_MINIMUM)

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
            missing = [r.slot for r in s.mapping if r.slot in NEEDED_SLOTS and not getattr(r, attr)]
            # A side its chain rows describe is retargeted through them, not through its slots.
            if missing and not any(getattr(r, f"{side.lower()}_start") for r in s.chains):
                box = col.box()
                box.alert = True
                box.label(text=f"{side} misses {', '.join(missing)}", icon="ERROR")
                box.label(text="Pick a bone in each red row (its conflict names the nearest bones), then Retarget Clip")
        draw_chain_rows(col, s)
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
        if r.get("body_plan") in ("quadruped", "chains"):
            lines = chain_quality_lines(r)
        else:
            lines = humanoid_quality_lines(r)
        for line in lines:
            col.label(text=line)
        for note in r.get("notes", []):
            col.label(text=note[:1].upper() + note[1:], icon="INFO")
        for warning in r.get("warnings", []):
            row = col.row()
            row.alert = True
            row.label(text=warning[:1].upper() + warning[1:], icon="ERROR")


def humanoid_quality_lines(r: dict[str, Any]) -> list[str]:
    """The Quality panel's figures of a humanoid retarget (its summary ``r``)."""
    out = [
        f"Bone direction: mean {r['mean_direction_error']:.2f}°, max {r['max_direction_error']:.2f}°",
        f"Elbow/knee planes: max {r['max_limb_plane_error']:.2f}°",
        f"Hips height: max {100 * r['hips_height_error']:.1f}% of hip height",
        f"Silhouette overlap: front {r['silhouette_front']:.2f}, side {r['silhouette_side']:.2f}",
    ]
    slide = r.get("foot_slide", {})
    for foot in ("foot.L", "foot.R"):
        if foot in slide:
            out.append(f"{foot} slide while planted: {100 * slide[foot]:.1f}% of hip height (source {100 * slide[foot + ' source']:.1f}%)")
    drop = r.get("hip_drop") or {}
    if drop.get("frames"):
        out.append(f"Hips lowered to reach held feet: up to {100 * drop['max']:.1f}% on {drop['frames']} frames")
    turned = r.get("rotation_since_first_frame") or {}
    if turned:
        out.append("Rotation since first frame, off by (mean):")
        out.append("  " + ", ".join(f"{group} {deg:.1f}°" for group, deg in turned.items()))
    return out


def chain_quality_lines(r: dict[str, Any]) -> list[str]:
    """The Quality panel's figures of a quadruped's or chain-described body's retarget (the data
    :func:`..usecases.retarget_quadruped.chain_quality` keeps): every chain's direction error,
    then the pelvis, travel, facing and each paw's slide against the source's."""
    out = [f"Chain direction: mean {r['mean_direction_error']:.2f}°, max {r['max_direction_error']:.2f}°"]
    for chain, (mean, top, bones, source_bones) in r["chains"].items():
        counts = f"{bones} bones" if bones == source_bones else f"{bones} bones from {source_bones}"
        out.append(f"  {chain} ({counts}): mean {mean:.2f}°, max {top:.2f}°")
    out.append(f"Pelvis orientation: mean {r['pelvis_orientation_error']:.2f}°")
    out.append(f"Travel: off by up to {100 * r['travel_gap']:.1f}% of pelvis height")
    out.append(f"Facing: mean {r['facing_error']['mean']:.2f}°, max {r['facing_error']['max']:.2f}°")
    for paw, (slide, source) in r.get("paw_slide", {}).items():
        out.append(f"{paw} paw slide while planted: {100 * slide:.1f}% of pelvis height (source {100 * source:.1f}%)")
    if r.get("planted_feet"):
        out.append(f"Paws held: {', '.join(r['planted_feet'])}" + (f"; pelvis lowered up to {100 * r['hip_drop']:.1f}%" if r.get("hip_drop") else ""))
    return out


classes = (
    MARIONETTE_UL_mapping,
    MARIONETTE_UL_chains,
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
        chains = [c["figures"]["summary"] for f in r["files"] for c in f["clips"] if c.get("figures")]
        if chains:  # a quadruped or chain-described target: the clips' per-chain figures, in short
            mean = sum(c["mean_direction_error"] for c in chains) / len(chains)
            box.label(text=f"Chain direction: mean {mean:.2f}°, max {max(c['max_direction_error'] for c in chains):.2f}° over {len(chains)} clips")
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
