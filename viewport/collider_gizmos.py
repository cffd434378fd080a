"""Handles on the active spring collider in the 3D viewport (docs/controls.md#colliders): a move
handle on its centre (a capsule's first end, a point of a plane), one on a capsule's second end,
and an arrow on its surface that drags the radius (a plane's thickness), while the armature's
**Show Colliders** switch is on. Dragging them edits the collider's own settings, so the panel,
undo and the live preview see the same values as when they are typed in.

The handles sit in the collider's bone's axes on the pose as shown: a move handle's offset is
the very ``offset`` (or ``tail``) setting, the arrow's offset the ``radius``, each scaled by the
bone's placement as :func:`core.controls.colliders.place` scales the collider.
"""

from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix

from ..core.rig.rotations import FloatArray


def _unit(v: FloatArray) -> FloatArray | None:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-9 and math.isfinite(n) else None


def _radius_axis(kind: str, offset: FloatArray, tail: FloatArray) -> FloatArray:
    """The direction, in the bone's axes, the radius arrow points along: a plane's normal, square
    to a capsule's axis, the bone's X axis for a sphere."""
    if kind == "PLANE":
        n = _unit(tail)
        return n if n is not None else np.array([0.0, 1.0, 0.0])
    if kind in ("CAPSULE", "INSIDE_CAPSULE"):
        axis = _unit(tail - offset)
        if axis is not None:
            side = np.cross(axis, [0.0, 0.0, 1.0] if abs(axis[2]) < 0.9 else [1.0, 0.0, 0.0])
            return side / np.linalg.norm(side)
    return np.array([1.0, 0.0, 0.0])


def handle_matrices(obj: Any, index: int) -> dict[str, FloatArray] | None:
    """The placements of the handles of ``obj``'s collider ``index`` on the pose as shown, by the
    setting each one drags: ``offset`` and ``tail`` (the bone's placement in world space; the
    setting is the handle's offset in it) and ``radius`` (at the collider's centre, its Z axis
    along :func:`_radius_axis`, scaled by the bone's uniform scale; the radius is the arrow's
    offset along Z). ``None`` when the collider has no bone that is there."""
    s = obj.marionette_controls
    if not 0 <= index < len(s.colliders):
        return None
    c = s.colliders[index]
    pb = obj.pose.bones.get(c.bone) if c.bone else None
    if pb is None:
        return None
    bone = np.array(obj.matrix_world, dtype=np.float64) @ np.array(pb.matrix, dtype=np.float64)
    lin = bone[:3, :3]
    scale = float(np.cbrt(abs(np.linalg.det(lin))))
    if not (scale > 1e-12 and math.isfinite(scale)):
        return None
    offset = np.array(c.offset, dtype=np.float64)
    tail = np.array(c.tail, dtype=np.float64)
    z = _unit(lin @ _radius_axis(c.kind, offset, tail))
    if z is None:
        return None
    x = np.cross([0.0, 0.0, 1.0] if abs(z[2]) < 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    radius = np.eye(4)
    radius[:3, :3] = scale * np.column_stack([x, np.cross(z, x), z])
    radius[:3, 3] = bone[:3, :3] @ offset + bone[:3, 3]
    out = {"offset": bone, "radius": radius}
    if c.kind in ("CAPSULE", "INSIDE_CAPSULE"):
        out["tail"] = bone
    return out


class MARIONETTE_GGT_collider(bpy.types.GizmoGroup):
    """Drag the active collider's centre, second end and radius in the viewport."""

    bl_idname = "MARIONETTE_GGT_collider"
    bl_label = "Marionette Collider"
    bl_space_type = "VIEW_3D"
    bl_region_type = "WINDOW"
    bl_options = {"3D", "PERSISTENT"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        obj = context.active_object
        if obj is None or obj.type != "ARMATURE":
            return False
        s = getattr(obj, "marionette_controls", None)
        return bool(s is not None and s.show_colliders and handle_matrices(obj, s.active_collider) is not None)

    def setup(self, context: Any) -> None:
        self.handles: dict[str, Any] = {}
        for name, kind in (("offset", "GIZMO_GT_move_3d"), ("tail", "GIZMO_GT_move_3d"), ("radius", "GIZMO_GT_arrow_3d")):
            gz = self.gizmos.new(kind)
            gz.color = (1.0, 0.75, 0.2)
            gz.alpha = 0.6
            gz.color_highlight = (1.0, 0.9, 0.5)
            gz.alpha_highlight = 1.0
            if kind == "GIZMO_GT_move_3d":
                gz.draw_options = {"FILL", "ALIGN_VIEW"}
                gz.draw_style = "RING_2D"
                gz.scale_basis = 0.15
            else:
                gz.draw_style = "BOX"
                gz.scale_basis = 0.5
            self.handles[name] = gz
        self.refresh(context)

    def refresh(self, context: Any) -> None:
        obj = context.active_object
        s = obj.marionette_controls
        mats = handle_matrices(obj, s.active_collider) or {}
        c = s.colliders[s.active_collider] if 0 <= s.active_collider < len(s.colliders) else None
        for name, gz in self.handles.items():
            m = mats.get(name)
            gz.hide = m is None or c is None
            if gz.hide:
                continue
            gz.matrix_basis = Matrix(m.tolist())
            gz.target_set_prop("offset", c, name)

    def draw_prepare(self, context: Any) -> None:
        self.refresh(context)


classes = (MARIONETTE_GGT_collider,)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
