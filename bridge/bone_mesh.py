"""The vertices of the meshes an armature deforms that are weighted to one bone, in the armature's
space at rest (what a collider on that bone is sized from, :mod:`core.controls.collider_size`)."""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ..core.rig.rotations import FloatArray

#: A vertex counts for a bone from this weight on (half: the bone moves it more than any other).
MIN_WEIGHT = 0.5


def deformed_meshes(arm: Any) -> list[Any]:
    """The mesh objects with an Armature modifier on ``arm``."""
    return [
        o for o in bpy.data.objects
        if o.type == "MESH" and any(m.type == "ARMATURE" and m.object == arm for m in o.modifiers)
    ]


def bone_vertices(arm: Any, bone: str, min_weight: float = MIN_WEIGHT) -> FloatArray:
    """Rest positions ``(N, 3)`` (armature space) of the vertices weighted at least
    ``min_weight`` to ``bone`` in the meshes ``arm`` deforms (none: ``(0, 3)``)."""
    to_arm = np.linalg.inv(np.array(arm.matrix_world))
    out: list[FloatArray] = []
    for mesh in deformed_meshes(arm):
        group = mesh.vertex_groups.get(bone)
        if group is None:
            continue
        gi = group.index
        co = [v.co[:] for v in mesh.data.vertices if any(g.group == gi and g.weight >= min_weight for g in v.groups)]
        if not co:
            continue
        m = to_arm @ np.array(mesh.matrix_world)
        pts = np.array(co, dtype=np.float64)
        out.append(pts @ m[:3, :3].T + m[:3, 3])
    return np.concatenate(out) if out else np.zeros((0, 3))
