"""The pelvis point: where the hips' height and travel are measured and placed (SPEC 4.6).

The hips bone's head is a free choice of the rig's author: at the thigh roots, above them at the
spine's base, or below them (a hips bone rising from under the pelvis). The point every rig agrees
on is the middle of the thigh roots, where the hips' geometric frame starts (:mod:`core.frames`).
Hip heights, the source's travel and the target's placement all use it, so a hips bone that starts
elsewhere changes neither the scale of the travel nor where the legs and spine end up; only the
hips bone's own head sits where its rest puts it relative to that point.
"""

from __future__ import annotations

import numpy as np

from .canonical_pose import Point, RigAnatomy, evaluate_point
from .rotations import FloatArray


def pelvis_point(anatomy: RigAnatomy) -> Point:
    """The middle of the thigh roots (the start of the hips' segment), or the hips bone's head on
    a rig whose thighs are not both mapped."""
    start = anatomy.segment_start.get("hips")
    return start if start is not None else ((anatomy.slots["hips"], np.zeros(3)),)


def pelvis_positions(anatomy: RigAnatomy, placements: FloatArray) -> FloatArray:
    """The pelvis point for placements ``(..., B, 4, 4)``: ``(..., 3)``."""
    return evaluate_point(pelvis_point(anatomy), placements)


def pelvis_offset(anatomy: RigAnatomy) -> FloatArray:
    """The pelvis point in the hips bone's own axes, from its head (rigid: the thigh roots move
    with the hips): the hips' head is the pelvis point less its orientation times this."""
    b = anatomy.slots["hips"]
    rest = anatomy.rest[b]
    rot = rest[:3, :3] / np.linalg.norm(rest[:3, :3], axis=0, keepdims=True)
    return np.asarray(rot.T @ (pelvis_positions(anatomy, anatomy.rest) - rest[:3, 3]), dtype=np.float64)
