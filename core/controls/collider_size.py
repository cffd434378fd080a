"""A collider's size from the mesh a bone deforms (docs/controls.md#colliders): the median distance
of the vertices weighted to the bone from the bone's axis (the segment from its head to its
tail), so a head sphere or a limb capsule comes out about as wide as the body part it stands for;
stray vertices far out (a hand in an arm's group) or on the axis (a neck ring) do not move it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..rig.rotations import FloatArray

#: Fewer vertices than this say too little about a shape: the caller keeps its length-based size.
MIN_VERTICES = 8


def axis_distances(points: ArrayLike, head: ArrayLike, tail: ArrayLike) -> FloatArray:
    """Distances ``(N,)`` of ``points`` ``(N, 3)`` from the segment ``head``-``tail``."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    a = np.asarray(head, dtype=np.float64)
    e = np.asarray(tail, dtype=np.float64) - a
    ee = float(e @ e)
    t = np.zeros(len(p)) if ee < 1e-24 else np.clip((p - a) @ e / ee, 0.0, 1.0)
    out: FloatArray = np.linalg.norm(p - (a + t[:, None] * e), axis=1)
    return out


def radius_from_points(points: ArrayLike, head: ArrayLike, tail: ArrayLike) -> float | None:
    """The median distance of ``points`` from the bone's axis, or ``None`` when there are fewer
    than :data:`MIN_VERTICES` finite points or they lie on the axis (no width to take)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    p = p[np.isfinite(p).all(axis=1)]
    if len(p) < MIN_VERTICES:
        return None
    r = float(np.median(axis_distances(p, head, tail)))
    return r if r > 1e-9 else None
