"""Whether a rig's rest is a standing rest at all (docs/pipeline.md#a-rest-that-is-a-pose).

Retargeting measures each bone's turn from its rig's rest, carried through the canonical pose. A
file can hold a *pose* where the rest should be: an FBX without a skinned mesh has no bind pose,
and Blender's importer then takes the armature's pose at export (a walking stance) as its rest.
Every figure of the summary still reads well (source and target agree with each other), yet the
result is off by the pose. A standing rest (T-, A- or arms-down) is left-right symmetric; a pose
rarely is. :func:`rest_asymmetry` measures how far it is from that: the largest angle between a
left limb segment and its right twin mirrored across the body's mid-plane.
"""

from __future__ import annotations

import numpy as np

from ..mapping.humanoid import sided
from ..rig.rotations import FloatArray
from .canonical_pose import RigAnatomy, evaluate_point

#: The limb segments compared, left against mirrored right.
PARTS = ("upper_arm", "forearm", "thigh", "shin")


def _segment(anatomy: RigAnatomy, slot: str) -> FloatArray:
    s = anatomy.slots
    start = evaluate_point(anatomy.segment_start[slot], anatomy.rest) if slot in anatomy.segment_start else anatomy.rest[s[slot], :3, 3]
    end = evaluate_point(anatomy.segment_end[slot], anatomy.rest) if slot in anatomy.segment_end else anatomy.ends[s[slot]]
    return np.asarray(end - start, dtype=np.float64)


def rest_asymmetry(anatomy: RigAnatomy, body: FloatArray) -> tuple[float, str | None]:
    """The largest angle (degrees) between a left limb segment's rest direction and its right
    twin's mirrored across the mid-plane of ``body`` (3x3, columns forward, left, up), with the
    part it is found on; ``(0.0, None)`` when no pair is mapped."""
    left = np.asarray(body[:, 1], dtype=np.float64)
    left = left / max(float(np.linalg.norm(left)), 1e-12)
    mirror = np.eye(3) - 2.0 * np.outer(left, left)
    worst, part = 0.0, None
    for p in PARTS:
        lk, rk = sided(p, "L"), sided(p, "R")
        if lk not in anatomy.slots or rk not in anatomy.slots:
            continue
        a, b = _segment(anatomy, lk), mirror @ _segment(anatomy, rk)
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        if na < 1e-12 or nb < 1e-12:
            continue
        angle = float(np.degrees(np.arccos(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))))
        if angle > worst:
            worst, part = angle, p
    return worst, part
