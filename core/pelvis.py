"""The hips point: where the hips' height and travel are measured and placed (SPEC 4.6).

It is the hips bone's head, unless that head lies below the thigh roots (a hips bone rising from
under the pelvis): then it is the point straight above the head at the thigh roots' height. A head
low in the pelvis would otherwise shrink the hip height the travel is scaled by (to 3 % of it for a
head at the floor) and swing the pelvis about a point below it. The point is rigid with the hips
bone (a fixed offset in its axes), so the same rule holds at rest and in motion, on both rigs.
"""

from __future__ import annotations

import numpy as np

from .canonical_pose import RigAnatomy, evaluate_point
from .rotations import FloatArray


def hips_offset(anatomy: RigAnatomy, up: FloatArray) -> FloatArray:
    """The hips point in the hips bone's own axes, from its head: zero unless the head lies below
    the middle of the thigh roots along ``up``."""
    b = anatomy.slots["hips"]
    rest = anatomy.rest[b]
    head = rest[:3, 3]
    start = anatomy.segment_start.get("hips")
    if start is None:
        return np.zeros(3)
    lift = max(0.0, float((evaluate_point(start, anatomy.rest) - head) @ up))
    rot = rest[:3, :3] / np.linalg.norm(rest[:3, :3], axis=0, keepdims=True)
    return np.asarray(rot.T @ (lift * np.asarray(up, dtype=np.float64)), dtype=np.float64)


def hips_points(anatomy: RigAnatomy, placements: FloatArray, up: FloatArray) -> FloatArray:
    """The hips point for placements ``(..., B, 4, 4)``: ``(..., 3)``."""
    m = placements[..., anatomy.slots["hips"], :, :]
    rot = m[..., :3, :3] / np.linalg.norm(m[..., :3, :3], axis=-2, keepdims=True)
    return np.asarray(rot @ hips_offset(anatomy, up) + m[..., :3, 3], dtype=np.float64)
