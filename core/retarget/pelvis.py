"""Where the body meets the ground, and the hips point where the hips' height and travel are
measured and placed (docs/pipeline.md#hips-height-and-travel).

The hips point is the hips bone's head, unless that head lies more than :data:`HIPS_MARGIN` of
the hip height below the thigh roots (a hips bone rising from under the pelvis): then it is the
point straight above the head at that depth, so a low head neither shrinks the hip height the
travel is scaled by nor swings the pelvis about a point below it. The point is rigid with the
hips bone (a fixed offset in its axes), so the same rule holds at rest and in motion, on both
rigs.

:func:`hips_path` then carries the source hips point's motion onto the target: heights from each
rig's own ground, the travel turned through the alignment of the two bodies and scaled (by hip
height, or by explicit horizontal and vertical scales).
"""

from __future__ import annotations

import numpy as np

from ..mapping.humanoid import SIDES, sided
from ..rig.rotations import FloatArray
from .canonical_pose import RigAnatomy, evaluate_point

#: How far below the thigh roots (in hip heights, measured there) the hips point may lie.
HIPS_MARGIN = 0.15


def ground_points(anatomy: RigAnatomy) -> list[tuple[int, FloatArray]]:
    """Points on the feet used to find the ground: ankle and toe heads and their ends."""
    cached: list[tuple[int, FloatArray]] | None = anatomy.__dict__.get("_ground_points")
    if cached is not None:  # kept on the (immutable) anatomy: the summary asks for them often
        return list(cached)
    pts: list[tuple[int, FloatArray]] = []
    for side in SIDES:
        for part in ("foot", "toes"):
            slot = sided(part, side)
            if slot in anatomy.slots:
                b = anatomy.slots[slot]
                pts.append((b, np.zeros(3)))
                # The inverse of these few rests only: each matrix inverted is a LAPACK solve,
                # which a threaded BLAS hands to its threads (they then spin for a while).
                pts.append((b, (np.linalg.inv(anatomy.rest[b]) @ np.append(anatomy.ends[b], 1.0))[:3]))
    for _, off in pts:
        off.flags.writeable = False
    object.__setattr__(anatomy, "_ground_points", pts)
    return list(pts)


def heights_along(points: list[tuple[int, FloatArray]], placements: FloatArray, up: FloatArray) -> FloatArray:
    """Height along ``up`` of each ground point, ``(..., P)``."""
    return np.stack([evaluate_point(((b, off),), placements) @ up for b, off in points], axis=-1)


def hips_offset(anatomy: RigAnatomy, up: FloatArray) -> FloatArray:
    """The hips point in the hips bone's own axes, from its head: zero unless the head lies more
    than :data:`HIPS_MARGIN` hip heights below the middle of the thigh roots along ``up``."""
    b = anatomy.slots["hips"]
    rest = anatomy.rest[b]
    head = rest[:3, 3]
    start = anatomy.segment_start.get("hips")
    points = ground_points(anatomy)
    if start is None or not points:
        return np.zeros(3)
    roots = float(evaluate_point(start, anatomy.rest) @ up)
    ground = float(heights_along(points, anatomy.rest, up).min())
    lowest = roots - HIPS_MARGIN * max(roots - ground, 0.0)
    lift = max(0.0, lowest - float(head @ up))
    rot = rest[:3, :3] / np.linalg.norm(rest[:3, :3], axis=0, keepdims=True)
    return np.asarray(rot.T @ (lift * np.asarray(up, dtype=np.float64)), dtype=np.float64)


def hips_points(anatomy: RigAnatomy, placements: FloatArray, up: FloatArray) -> FloatArray:
    """The hips point for placements ``(..., B, 4, 4)``: ``(..., 3)``."""
    m = placements[..., anatomy.slots["hips"], :, :]
    rot = m[..., :3, :3] / np.linalg.norm(m[..., :3, :3], axis=-2, keepdims=True)
    return np.asarray(rot @ hips_offset(anatomy, up) + m[..., :3, 3], dtype=np.float64)


def hips_path(
    src: RigAnatomy,
    tgt: RigAnatomy,
    source: FloatArray,
    up_s: FloatArray,
    up_t: FloatArray,
    align: FloatArray,
    horizontal_scale: float,
    vertical_scale: float,
    target_ground: float,
) -> tuple[FloatArray, FloatArray]:
    """The target hips point's path (:mod:`.pelvis`) for source placements ``(T, Bs, 4, 4)``:
    ``(travel, grounded)``, both ``(T, 3)`` in target skeleton space. ``grounded`` is the hips at
    the source's height above its ground (a low percentile of the feet over the clip, so a jump
    stays a jump), scaled, over the target's rest spot; ``travel`` is the source's horizontal
    travel from its rest, aligned and scaled. The hips play ``grounded + travel`` when travel
    stays on them."""
    hips_s = hips_points(src, source, up_s)
    heights = heights_along(ground_points(src), source, up_s)
    return hips_path_from_points(src, tgt, hips_s, heights, up_s, up_t, align, horizontal_scale, vertical_scale, target_ground)


def hips_path_from_points(
    src: RigAnatomy,
    tgt: RigAnatomy,
    hips_s: FloatArray,
    heights: FloatArray,
    up_s: FloatArray,
    up_t: FloatArray,
    align: FloatArray,
    horizontal_scale: float,
    vertical_scale: float,
    target_ground: float,
    rest_hips: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """:func:`hips_path` from the source hips point's positions ``(T, 3)`` and its ground
    points' heights ``(T, P)``, for callers that hold positions rather than 4x4 placements.
    ``rest_hips`` are both rigs' hips points at rest, when the caller holds them already."""
    ground_s = float(np.percentile(heights.min(axis=-1), 5))
    rest_s, rest_t = rest_hips if rest_hips is not None else (hips_points(src, src.rest, up_s), hips_points(tgt, tgt.rest, up_t))
    travel_s = hips_s - rest_s
    travel_s = travel_s - np.outer(travel_s @ up_s, up_s)
    base = rest_t - (rest_t @ up_t) * up_t
    height = target_ground + vertical_scale * (hips_s @ up_s - ground_s)
    travel = np.asarray((travel_s @ align.T) * horizontal_scale, dtype=np.float64)
    grounded = np.asarray(base + np.outer(height, up_t), dtype=np.float64)
    return travel, grounded
