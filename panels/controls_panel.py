"""The sidebar tab "Controls": the active armature's control stack, its live preview with each
control's diagnostics, and Bake Controls.

A tab of its own rather than a panel under "Retarget": controls belong to the active armature
object (any armature, retargeted or not), while the Retarget tab works on the scene's
source/target pair; and a control's settings are long enough to push the retarget panels out of
view.
"""

from __future__ import annotations

from typing import Any

import bpy

from ..properties.control_settings import COLLIDER_ICON, IK_KINDS, KIND_ICON, LOOK_AT_BONES
from ..viewport import live_preview
from .retarget_panel import MarionettePanel


class ControlsPanel(MarionettePanel):
    bl_category = "Controls"

    @classmethod
    def poll(cls, context: Any) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE" and getattr(obj, "marionette_controls", None) is not None


class MARIONETTE_UL_controls(bpy.types.UIList):
    """One row per control: enabled, name, type, weight; a warning icon when it cannot run."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any, active_prop: Any, index: int = 0) -> None:
        obj = data.id_data
        errors = live_preview.validation(obj)
        row = layout.row(align=True)
        row.prop(item, "enabled", text="")
        sub = row.row(align=True)
        sub.alert = index in errors
        sub.prop(item, "name", text="", emboss=False, icon="ERROR" if index in errors else KIND_ICON[item.kind])
        row.prop(item, "weight", text="", slider=True)


class VIEW3D_PT_marionette_controls(ControlsPanel, bpy.types.Panel):
    bl_label = "Controls"

    def draw(self, context: Any) -> None:
        obj = context.active_object
        s = obj.marionette_controls
        col = self.layout.column()
        row = col.row(align=True)
        row.prop(s, "live_preview", toggle=True, icon="PLAY" if not s.live_preview else "PAUSE")
        row.operator("marionette.controls_reset", text="", icon="FILE_REFRESH")
        rt = live_preview.runtime(obj)
        if s.live_preview and rt is not None:
            for problem in rt.problems:
                warn = col.row()
                warn.alert = True
                warn.label(text=problem, icon="ERROR")
            if rt.error:
                warn = col.row()
                warn.alert = True
                warn.label(text=rt.error, icon="ERROR")
            if not rt.problems and not rt.error and rt.built is not None:
                col.label(text=f"Frame {rt.frame:g}: {1000 * rt.seconds:.2f} ms", icon="TIME")
        if s.live_preview:
            # F12 renders on a render thread, where controls never run: it is given the frames
            # the viewport showed since the last change (see live_preview); Prepare Render shows
            # the whole range once.
            scene = context.scene
            missing = live_preview.frames_not_kept(obj, scene, scene.frame_start, scene.frame_end)
            row = col.row(align=True)
            if missing:
                row.label(text=f"F12: {len(missing)} frames of the range not ready", icon="RENDER_STILL")
            else:
                row.label(text="F12: the scene range is ready", icon="CHECKMARK")
            row.operator("marionette.prepare_render", text="", icon="RENDER_ANIMATION")
        row = col.row()
        row.template_list("MARIONETTE_UL_controls", "", s, "controls", s, "active_index", rows=4)
        side = row.column(align=True)
        side.operator_menu_enum("marionette.control_add", "kind", text="", icon="ADD")
        side.operator("marionette.control_remove", text="", icon="REMOVE")
        side.separator()
        side.operator("marionette.control_move", text="", icon="TRIA_UP").direction = "UP"
        side.operator("marionette.control_move", text="", icon="TRIA_DOWN").direction = "DOWN"


class VIEW3D_PT_marionette_control_settings(ControlsPanel, bpy.types.Panel):
    bl_label = "Settings"
    bl_parent_id = "VIEW3D_PT_marionette_controls"

    @classmethod
    def poll(cls, context: Any) -> bool:
        if not super().poll(context):
            return False
        s = context.active_object.marionette_controls
        return 0 <= s.active_index < len(s.controls)

    def draw(self, context: Any) -> None:
        obj = context.active_object
        s = obj.marionette_controls
        c = s.controls[s.active_index]
        bones = obj.data
        col = self.layout.column()
        col.use_property_split = True
        col.use_property_decorate = False
        col.prop(c, "kind")
        error = live_preview.validation(obj).get(s.active_index)
        if error:
            box = col.box()
            box.alert = True
            for k, line in enumerate(_wrap(error, 60)):
                box.label(text=line, icon="ERROR" if k == 0 else "BLANK1")
        sub = col.column(align=True)
        sub.prop(c, "weight", slider=True)
        sub.prop(c, "priority")
        kind = c.kind
        first, second = _chain_labels(kind)
        box = col.column(align=True)
        box.prop_search(c, "bone_start", bones, "bones", text=first[0])
        box.prop_search(c, "bone_end", bones, "bones", text=first[1])
        if kind in IK_KINDS:
            col.prop_search(c, "end_bone", bones, "bones")
        if second:
            box = col.column(align=True)
            box.prop_search(c, "second_start", bones, "bones", text=second[0])
            box.prop_search(c, "second_end", bones, "bones", text=second[1])
        if kind in (*IK_KINDS, "LOOK_AT", "CLOSURE"):
            _target(col, c, "target_object", "target_bone", "Target" if kind != "CLOSURE" else "First Target")
        if kind == "CLOSURE":
            _target(col, c, "second_object", "second_bone", "Second Target")
        if kind in IK_KINDS:
            _target(col, c, "pole_object", "pole_bone", "Pole")
            col.prop(c, "orient_end")
            if kind != "TWO_BONE_IK":
                col.prop(c, "tolerance")
                col.prop(c, "max_passes")
            _limits(col, c)
        if kind in (*IK_KINDS, "LOOK_AT", "CLOSURE", "GROUND"):
            col.prop(c, "smooth_time")
        if kind == "LOOK_AT":
            col.prop(c, "facing_axis")
            col.prop(c, "up_axis")
            col.prop_search(c, "space_bone", bones, "bones")
            sub = col.column(align=True)
            sub.prop(c, "yaw_min")
            sub.prop(c, "yaw_max")
            sub = col.column(align=True)
            sub.prop(c, "pitch_min")
            sub.prop(c, "pitch_max")
            col.prop(c, "look_ease_behind")
            _turn_weights(col, c, bones)
        elif kind == "GROUND":
            col.prop_search(c, "pelvis_bone", bones, "bones")
            col.prop(c, "ground_collection")
            col.prop(c, "floor_height")
            col.prop(c, "probe_height")
            col.prop(c, "max_offset")
            col.prop(c, "max_tilt")
            col.prop(c, "pelvis_smooth_time")
        elif kind == "SPRING":
            col.prop(c, "stiffness")
            col.prop(c, "damping")
            col.prop(c, "gravity")
            sub = col.column(heading="Colliders")
            sub.prop(c, "collider_groups", text="Groups")
            sub.prop(c, "point_radius")
            sub = col.column(align=True)
            sub.prop(c, "wind_strength")
            if c.wind_strength > 0.0:
                sub.prop(c, "wind_direction", text="Direction")
                sub.prop(c, "wind_gust")
                sub.prop(c, "wind_frequency")
                sub.prop(c, "wind_seed")
            else:  # no wind of its own: the scene's
                _scene_wind(col, context.scene)
            col.prop_search(c, "center_bone", bones, "bones")
        elif kind == "INHERIT":
            col.prop_search(c, "source_bone", bones, "bones")
            col.prop(c, "rotation_fraction")
            col.prop(c, "translation_fraction")
        elif kind == "FIXED_AXIS":
            col.prop(c, "twist_axis")
        elif kind == "CLOSURE":
            col.prop(c, "closure_solver")
            col.prop(c, "tolerance")
            col.prop(c, "max_iterations")
            col.prop(c, "max_passes")
            _limits(col, c)


def _limits(layout: Any, c: Any) -> None:
    """Joint limits of a chain (or of each closure branch): Blender's bone IK limits, a cone on
    the first bone, a hinge on the bones after it."""
    col = layout.column(heading="Limits")
    col.prop(c, "use_bone_limits")
    col.prop(c, "use_cone_limit")
    if c.use_cone_limit:
        sub = col.column(align=True)
        sub.prop(c, "cone_angle", text="Angle")
        sub.prop(c, "cone_twist", text="Twist")
    col.prop(c, "use_hinge_limit")
    if c.use_hinge_limit:
        col.prop(c, "hinge_axis")
        sub = col.column(align=True)
        sub.prop(c, "hinge_min", text="Min")
        sub.prop(c, "hinge_max", text="Max")


def _scene_wind(layout: Any, scene: Any) -> None:
    """The scene's wind, which springs without a wind of their own blow with."""
    wind = getattr(scene, "marionette_wind", None)
    if wind is None:
        return
    sub = layout.column(align=True)
    sub.prop(wind, "strength")
    if wind.strength > 0.0:
        sub.prop(wind, "direction", text="Direction")
        sub.prop(wind, "gust")
        sub.prop(wind, "frequency")
        sub.prop(wind, "seed")


def _turn_weights(layout: Any, c: Any, armature: Any) -> None:
    """One weight per bone of the look-at chain, with the share of the turn it gives."""
    names = _chain_names(armature, c.bone_start, c.bone_end)[:LOOK_AT_BONES]
    if not names:
        return
    weights = [float(c.look_weights[k]) for k in range(len(names))]
    total = sum(weights)
    col = layout.column(align=True, heading="Turn Weights")
    for k, name in enumerate(names):
        share = 100.0 * weights[k] / total if total > 0.0 else 0.0
        col.prop(c, "look_weights", index=k, text=f"{name} ({share:.0f} %)")


def _chain_names(armature: Any, start: str, end: str) -> list[str]:
    """Bone names from ``start`` down to ``end`` through parents (empty if they are not)."""
    bone = armature.bones.get(end or start)
    out = []
    while bone is not None:
        out.append(bone.name)
        if bone.name == start:
            return out[::-1]
        bone = bone.parent
    return []


def _target(layout: Any, c: Any, obj_prop: str, bone_prop: str, label: str) -> None:
    col = layout.column(align=True)
    col.prop(c, obj_prop, text=label)
    target = getattr(c, obj_prop)
    if target is not None and target.type == "ARMATURE":
        col.prop_search(c, bone_prop, target.data, "bones", text="Bone")


def _chain_labels(kind: str) -> tuple[tuple[str, str], tuple[str, str] | None]:
    if kind == "GROUND":
        return ("Left Thigh", "Left Foot"), ("Right Thigh", "Right Foot")
    if kind == "CLOSURE":
        return ("First Branch From", "To"), ("Second Branch From", "To")
    if kind in ("INHERIT", "FIXED_AXIS"):
        return ("Bones From", "To"), None
    if kind == "LOOK_AT":
        return ("From (Neck)", "To (Head)"), None
    return ("First Bone", "Last Bone"), None


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    if line:
        lines.append(line)
    return lines or [""]


class VIEW3D_PT_marionette_control_status(ControlsPanel, bpy.types.Panel):
    """What each control did at the frame shown: residual, converged, limit hits, resets."""

    bl_label = "Diagnostics"
    bl_parent_id = "VIEW3D_PT_marionette_controls"

    @classmethod
    def poll(cls, context: Any) -> bool:
        return super().poll(context) and context.active_object.marionette_controls.live_preview

    def draw(self, context: Any) -> None:
        obj = context.active_object
        rows = obj.marionette_controls.controls
        figures = live_preview.summary(obj)
        col = self.layout.column(align=True)
        if not figures:
            col.label(text="No control ran at this frame")
            return
        for name, f in figures.items():
            kind = rows[f["row"]].kind if f["row"] < len(rows) else ""
            unit = "°" if kind == "LOOK_AT" else ""
            residual = f["residual"] * (57.29577951308232 if kind == "LOOK_AT" else 1.0)
            state = "skipped" if f["skipped"] else ("converged" if f["converged"] else ("idle" if not f["ran"] else "not converged"))
            line = f"{name}: {state}, residual {residual:.3g}{unit}"
            if f["limited"]:
                line += ", at a limit"
            if f["reset"]:
                line += f", reset ({f['reset']})"
            if f["stop"] and f["stop"] != "satisfied":
                line += f", stopped ({f['stop']})"
            if f.get("penetration") is not None and rows[f["row"]].collider_groups.strip():
                line += f", deepest {1000 * f['penetration']:.2f} mm in a collider"
            row = col.row()
            row.alert = f["skipped"] or (f["ran"] and not f["converged"] and kind in (*IK_KINDS, "CLOSURE"))
            row.label(text=line, icon=KIND_ICON.get(kind, "DOT"))


class MARIONETTE_UL_colliders(bpy.types.UIList):
    """One row per collider: name, shape, group and bone."""

    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any, active_prop: Any, index: int = 0) -> None:
        row = layout.row(align=True)
        row.prop(item, "name", text="", emboss=False, icon=COLLIDER_ICON[item.kind])
        row.label(text=f"{item.group} · {item.bone or '?'}")


class VIEW3D_PT_marionette_colliders(ControlsPanel, bpy.types.Panel):
    """The armature's spring colliders (docs/controls.md#colliders): spring chains collide
    with the groups they name."""

    bl_label = "Colliders"
    bl_parent_id = "VIEW3D_PT_marionette_controls"
    bl_options = {"DEFAULT_CLOSED"}

    def draw_header(self, context: Any) -> None:
        self.layout.prop(context.active_object.marionette_controls, "show_colliders", text="", icon="HIDE_OFF")

    def draw(self, context: Any) -> None:
        obj = context.active_object
        s = obj.marionette_controls
        col = self.layout.column()
        row = col.row()
        row.template_list("MARIONETTE_UL_colliders", "", s, "colliders", s, "active_collider", rows=3)
        side = row.column(align=True)
        side.operator_menu_enum("marionette.collider_add", "kind", text="", icon="ADD")
        side.operator("marionette.collider_remove", text="", icon="REMOVE")
        if not 0 <= s.active_collider < len(s.colliders):
            return
        c = s.colliders[s.active_collider]
        col.use_property_split = True
        col.use_property_decorate = False
        col.prop(c, "kind")
        col.prop(c, "group")
        col.prop_search(c, "bone", obj.data, "bones")
        col.prop(c, "offset")
        if c.kind in ("CAPSULE", "INSIDE_CAPSULE"):
            col.prop(c, "tail")
        elif c.kind == "PLANE":
            col.prop(c, "tail", text="Normal")
        col.prop(c, "radius", text="Thickness" if c.kind == "PLANE" else "Radius")


class VIEW3D_PT_marionette_control_bake(ControlsPanel, bpy.types.Panel):
    bl_label = "Bake"
    bl_parent_id = "VIEW3D_PT_marionette_controls"

    def draw(self, context: Any) -> None:
        scene = context.scene
        col = self.layout.column()
        col.label(text=f"Scene range {scene.frame_start}–{scene.frame_end}", icon="PREVIEW_RANGE")
        col.operator("marionette.bake_controls", icon="ACTION")
        col.operator("marionette.prepare_render", icon="RENDER_ANIMATION")


classes = (
    MARIONETTE_UL_controls,
    VIEW3D_PT_marionette_controls,
    VIEW3D_PT_marionette_control_settings,
    VIEW3D_PT_marionette_control_status,
    MARIONETTE_UL_colliders,
    VIEW3D_PT_marionette_colliders,
    VIEW3D_PT_marionette_control_bake,
)
register, unregister = bpy.utils.register_classes_factory(classes)

