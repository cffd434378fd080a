"""Spring colliders drawn in the 3D viewport (docs/controls.md#colliders): the active armature's
colliders, placed on its pose as shown, as wire outlines (the active collider brighter), while
its **Show Colliders** switch is on. Nothing is drawn, or registered, in background mode.

The outlines come from :func:`core.controls.colliders.outline`; a collider that cannot be built
(no bone, a bone that is not there, no size) is left out, its reason shown by the spring that
uses it.
"""

from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np

from ..core.controls.colliders import Collider, outline, place
from ..core.rig.rotations import FloatArray

_KINDS = {"SPHERE": "sphere", "CAPSULE": "capsule", "PLANE": "plane", "INSIDE_SPHERE": "inside_sphere", "INSIDE_CAPSULE": "inside_capsule"}
_handle: list[Any] = [None]


def segments_of(obj: Any) -> list[tuple[bool, FloatArray]]:
    """Per drawable collider of ``obj``: whether it is the active one, and its outline's
    segments ``(N, 2, 3)`` in world space on the pose as shown."""
    s = obj.marionette_controls
    out: list[tuple[bool, FloatArray]] = []
    world = np.array(obj.matrix_world, dtype=np.float64)
    size = max(float(obj.dimensions.length), 1e-3) * 0.25
    for i, c in enumerate(s.colliders):
        pb = obj.pose.bones.get(c.bone) if c.bone else None
        radius = float(c.radius)
        tail = tuple(float(v) for v in c.tail)
        if pb is None or not math.isfinite(radius) or (c.kind != "PLANE" and radius <= 0.0):
            continue
        if c.kind == "PLANE":
            n = math.sqrt(sum(v * v for v in tail))
            if n < 1e-9:
                continue
            tail = (tail[0] / n, tail[1] / n, tail[2] / n)
        collider = Collider(_KINDS[c.kind], 0, tuple(float(v) for v in c.offset), tail, radius)  # type: ignore[arg-type]
        m = world @ np.array(pb.matrix, dtype=np.float64)
        placed = place([collider], m[None, None])[0][0]
        out.append((i == s.active_collider, outline(placed, plane_size=size)))
    return out


def _draw() -> None:
    import gpu
    from gpu_extras.batch import batch_for_shader

    obj = bpy.context.active_object
    if obj is None or obj.type != "ARMATURE":
        return
    s = getattr(obj, "marionette_controls", None)
    if s is None or not s.show_colliders or not len(s.colliders):
        return
    shader = gpu.shader.from_builtin("UNIFORM_COLOR")
    gpu.state.blend_set("ALPHA")
    for active, segments in segments_of(obj):
        batch = batch_for_shader(shader, "LINES", {"pos": segments.reshape(-1, 3).astype(np.float32)})
        shader.uniform_float("color", (1.0, 0.75, 0.2, 1.0) if active else (0.95, 0.45, 0.1, 0.6))
        batch.draw(shader)
    gpu.state.blend_set("NONE")


def register() -> None:
    if bpy.app.background or _handle[0] is not None:
        return
    _handle[0] = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    if _handle[0] is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle[0], "WINDOW")
        _handle[0] = None
