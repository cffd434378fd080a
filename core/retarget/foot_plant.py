"""Planted feet: where the source foot stands still, the target's foot stands still too.

Carrying every bone's direction keeps the pose but not the contacts: when the target's legs are
not a scaled copy of the source's (another thigh-to-shin ratio, legs longer than hip height
suggests), a foot that the source plants slides on the target while the hips travel. This pass
finds the frames where the source ankle rests near its ground and barely moves, picks one spot on
the target's ground plane per contact (where the target ankle is on average during it), and bends
each leg with a two-bone solve (hip, knee, ankle; the knee keeps its plane) so the ankle stays on
that spot; the foot keeps its orientation. Over a short ramp before and after each contact the
hold eases in and out, so the leg never pops.

Where a held spot is out of the leg's reach (legs shorter than the stride asks), the hips come
down first, as an animator would lower them: on each frame with a spot out of reach, the smallest
drop along the up axis that brings those spots within :data:`REACH` of their leg's length (a knee
not locked straight), widened and eased over time so the hips never change height faster than
:data:`DROP_SPEED`, and never by more than :data:`MAX_DROP`. The legs are then solved from the
lowered hips to the ankles' own heights (held or not), so a foot in the air does not come down
with the hips. Frames far from any such spot keep the hips exactly as they were.

Everything here works on plain arrays (skeleton-space positions, local rotations) so the retarget
and the measurements share the contact rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..controls.ik_two_bone import two_bone_ik
from ..rig.rotations import FloatArray, matrix_between_vectors, quat_from_matrix
from ..rig.skeleton import Skeleton

#: A source ankle closer to its ground than this (in source hip heights) may be planted ...
CONTACT_HEIGHT = 0.35
#: ... when it moves slower than this over the ground (hip heights per second).
CONTACT_SPEED = 0.5
#: Contacts shorter than this (seconds) are passing touches, not steps.
MIN_CONTACT = 0.08
#: Before the first contact and after the last, the hold eases in and out over this long (seconds).
LEAD = 0.25
#: A held spot is within reach up to this share of the leg's full length (thigh plus shin): the
#: hips come down so the knee keeps a little bend rather than locking straight.
REACH = 0.995
#: The hips come down (and back up) no faster than this (target hip heights per second): about
#: the speed of a walk's own vertical bob, so the drop reads as part of the motion.
DROP_SPEED = 0.3
#: A drop is held this long (seconds) either side of the frames that need it, then eased by a
#: smooth average over as long again: the hips settle and rise without a kink.
DROP_EASE = 0.1
#: The hips come down by at most this much (target hip heights); a spot further than that is
#: left out of reach (the straight leg points at it and the foot falls short).
MAX_DROP = 0.2


def planted_frames(ankle: FloatArray, ground: float, up: FloatArray, hip_height: float, times: FloatArray) -> NDArray[np.bool_]:
    """Frames ``(T,)`` where an ankle ``(T, 3)`` is planted: within :data:`CONTACT_HEIGHT` hip
    heights of ``ground`` (a height along ``up``) and, towards the frame before or after, slower
    than :data:`CONTACT_SPEED` hip heights per second along the ground; in runs of at least
    :data:`MIN_CONTACT` seconds."""
    t = ankle.shape[0]
    if t < 2 or not hip_height > 0.0:
        return np.zeros(t, dtype=bool)
    height = ankle @ up
    flat = ankle - np.outer(height, up)
    # A frame is still when the foot rests on either side of it: the frame it lands on and the
    # frame it lifts off from belong to the contact.
    step = np.linalg.norm(np.diff(flat, axis=0), axis=-1) / np.maximum(np.diff(times), 1e-12) / hip_height
    speed = np.minimum(np.concatenate([[np.inf], step]), np.concatenate([step, [np.inf]]))
    planted = ((height - ground) / hip_height < CONTACT_HEIGHT) & (speed < CONTACT_SPEED)
    # Drop runs too short to be a step.
    for start, stop in _runs(planted):
        if times[stop - 1] - times[start] < MIN_CONTACT:
            planted[start:stop] = False
    return planted


def _runs(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """``(start, stop)`` of every run of ``True``."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))


@dataclass(frozen=True)
class Leg:
    """A target leg as skeleton joints: the thigh (hip joint at its head), the shin (knee at its
    head) and the foot (ankle at its head)."""

    thigh: int
    shin: int
    foot: int


@dataclass(frozen=True)
class PlantReport:
    contact_frames: dict[int, int]  # per leg (its foot joint): frames held
    unreachable_frames: dict[int, int]  # per leg: held frames whose spot was out of reach, hips lowered
    hip_drop: float = 0.0  # the largest drop of the hips (target hip heights)
    lowered_frames: int = 0  # frames on which the hips were lowered


def needed_drop(hip: FloatArray, goal: FloatArray, reach: FloatArray, up: FloatArray) -> FloatArray:
    """The smallest drop ``(T,)`` of hip joints ``(T, 3)`` along ``up`` that brings ``goal``
    ``(T, 3)`` within ``reach`` ``(T,)`` of them (zero when it already is). A goal further along
    the ground than ``reach`` cannot be brought in: the drop is then the one that comes closest,
    down to the goal's height."""
    v = goal - hip
    h = v @ up  # negative: the goal lies below the hip
    across = np.sum(v * v, axis=-1) - h * h
    # Within reach once (h + d)^2 <= reach^2 - across, i.e. d >= -h - sqrt(reach^2 - across).
    room = np.sqrt(np.maximum(reach * reach - across, 0.0))
    return np.asarray(np.maximum(-h - room, 0.0), dtype=np.float64)


def smooth_drop(need: FloatArray, times: FloatArray, speed: float, ease: float = DROP_EASE) -> FloatArray:
    """A drop ``(T,)`` at least ``need`` ``(T,)`` on every frame, changing by no more than
    ``speed`` per second, eased: exactly zero on frames further than ``need / speed`` plus twice
    ``ease`` seconds from every frame that needs one.

    Three steps, each keeping the one before's bounds: the need widened into cones of slope
    ``speed`` (a running maximum, so a single frame's need ramps in and out instead of popping),
    then held over ``ease`` seconds either side (a sliding maximum), then averaged over the same
    window with a raised-cosine weight, which rounds the cones' corners. The average never falls
    below a frame's need, since every value it averages near that frame is held at or above it.
    Windows count frames at the clip's typical frame step."""
    t = need.shape[0]
    if t == 0 or not np.any(need > 0.0):
        return np.zeros(t)
    rise = speed * times
    before = np.maximum.accumulate(need + rise) - rise
    after = (np.maximum.accumulate((need - rise)[::-1]) + rise[::-1])[::-1]
    cone = np.maximum(np.maximum(before, after), 0.0)
    step = float(np.median(np.diff(times))) if t > 1 else 1.0
    k = int(round(ease / step)) if step > 0.0 else 0
    if k < 1:
        return cone
    pad = np.pad(cone, k, mode="edge")  # the clip's ends hold their value: no drop is cut short there
    windows = np.lib.stride_tricks.sliding_window_view(pad, 2 * k + 1)
    held = np.pad(windows.max(axis=-1), k, mode="edge")
    weight = 1.0 + np.cos(np.pi * np.arange(-k, k + 1) / (k + 1))
    # Far from any need every value averaged is an exact zero, and so is their weighted sum.
    return np.asarray(np.lib.stride_tricks.sliding_window_view(held, 2 * k + 1) @ (weight / weight.sum()), dtype=np.float64)


def hold_offsets(planted: NDArray[np.bool_], times: FloatArray, ankle: FloatArray, up: FloatArray, lead: float = LEAD) -> FloatArray:
    """How far ``(T, 3)``, along the ground, each frame moves an ankle ``(T, 3)`` so it stays put
    over every contact (run of ``planted``).

    Inside a contact the ankle goes to the contact's spot, its average place over the contact.
    Between two contacts the shift blends smoothly from the one the foot leaves to the one it
    lands with (the swing is bent gradually rather than snapped back to the unheld path); before
    the first contact and after the last it eases in and out over ``lead`` seconds. Frames far
    from any contact are not moved (zero)."""
    t = planted.shape[0]
    offset = np.zeros((t, 3))
    runs = _runs(planted)
    if not runs:
        return offset
    flat_up = np.outer(ankle @ up, up)
    ground = ankle - flat_up
    bounds = np.array(runs, dtype=np.int64)
    sums = np.concatenate([np.zeros((1, 3)), np.cumsum(ground, axis=0)])
    spots = (sums[bounds[:, 1]] - sums[bounds[:, 0]]) / (bounds[:, 1] - bounds[:, 0])[:, None]
    # Every frame of a run goes to its run's spot: the runs are the planted frames, and a frame's
    # run is the last one starting at or before it.
    held = np.flatnonzero(planted)
    offset[held] = spots[np.searchsorted(bounds[:, 0], held, side="right") - 1] - ground[held]

    # The blends, all at once: frames lo:hi of each go from shift a at time t0 to b at t1
    # (smoothstep); before the first contact and after the last they ease in and out over
    # ``lead``, in between they go from the contact the foot leaves to the one it lands on.
    zero = np.zeros(3)
    first, last = runs[0][0], runs[-1][1] - 1
    lo = int(np.searchsorted(times, times[first] - lead, side="left"))
    hi = int(np.searchsorted(times, times[last] + lead, side="right"))
    stops, starts = bounds[:-1, 1], bounds[1:, 0]
    spans = np.concatenate([[[lo, first]], np.stack([stops, starts], axis=-1), [[last + 1, hi]]])
    a = np.concatenate([zero[None], offset[stops - 1], offset[last][None]])
    b = np.concatenate([offset[first][None], offset[starts], zero[None]])
    t0 = np.concatenate([[times[first] - lead], times[stops - 1], [times[last]]])
    t1 = np.concatenate([[times[first]], times[starts], [times[last] + lead]])
    sizes = np.maximum(spans[:, 1] - spans[:, 0], 0)
    gap = np.repeat(np.arange(spans.shape[0]), sizes)  # the blend each frame belongs to
    if gap.size:
        frames = np.arange(gap.size) - np.repeat(np.cumsum(sizes) - sizes, sizes) + spans[gap, 0]
        u = np.clip((times[frames] - t0[gap]) / np.maximum(t1 - t0, 1e-12)[gap], 0.0, 1.0)
        w = u * u * (3.0 - 2.0 * u)
        offset[frames] = (1.0 - w)[:, None] * a[gap] + w[:, None] * b[gap]
    return offset


def plant_legs(
    skeleton: Skeleton,
    legs: list[Leg],
    planted: list[NDArray[np.bool_]],
    rotations: FloatArray,
    translations: FloatArray,
    up: FloatArray,
    times: FloatArray,
    drift: FloatArray | None = None,
    *,
    pelvis: int = -1,
    hip_height: float = 0.0,
    in_place: bool = False,
) -> tuple[FloatArray, FloatArray, PlantReport]:
    """Local rotations ``(T, B, 4)`` and translations ``(T, B, 3)`` with each leg's ankle held on
    its contact spot over the frames ``planted[leg]`` (see :func:`hold_offsets`). The inputs are
    not modified; bones other than the legs' keep their locals.

    ``drift`` ``(T, 3)`` is travel the armature does not carry itself (root motion moved to the
    object, or dropped to play in place): the ground moves by it under the skeleton, so a held
    foot moves back by it in skeleton space.

    With a ``pelvis`` joint above every thigh and the target's ``hip_height``, held spots out of
    reach lower the pelvis first (its local translation, along ``up``; see :func:`needed_drop`
    and :func:`smooth_drop`); every leg is then solved back to its ankle's own height on the
    frames the pelvis is lowered. ``in_place`` writes into ``rotations`` and ``translations``
    themselves (and returns them), for a caller that owns them and needs them no more.

    On the frames it changes, the original values are read before they are overwritten: the
    legs' placements are all taken before the first write."""
    rot_out, tr_out = (rotations, translations) if in_place else (rotations.copy(), translations.copy())
    parents = skeleton.parents
    parts = [_parts(skeleton, leg) for leg in legs]
    # Only the joints that get new locals (where a part starts below a joint moving otherwise)
    # and their parents need placements, besides hip, knee and ankle: walk just those.
    roots = [[j for j, kind in part.items() if parents[j] < 0 or part.get(int(parents[j])) != kind] for part in parts]
    lowers = pelvis >= 0 and hip_height > 0.0 and bool(legs) and all(_descends(skeleton, leg.thigh, pelvis) for leg in legs)
    wanted = {j for leg in legs for j in (leg.thigh, leg.shin, leg.foot)} | ({pelvis} if lowers else set())
    wanted |= {j for rs in roots for j in rs} | {int(parents[j]) for rs in roots for j in rs if parents[j] >= 0}
    bones = _with_ancestors(skeleton, wanted)
    row = {j: r for r, j in enumerate(bones)}
    lin, pos = skeleton.bone_placements(
        bones, np.swapaxes(rotations[:, bones], 0, 1), np.swapaxes(translations[:, bones], 0, 1)
    )
    shifts = [hold_offsets(mask, times, pos[row[leg.foot]] + (0.0 if drift is None else drift), up) for leg, mask in zip(legs, planted, strict=True)]
    # Hip, knee and ankle before the pelvis comes down: the goals keep the ankles' heights.
    chains = [tuple(pos[row[j]].copy() for j in (leg.thigh, leg.shin, leg.foot)) for leg in legs]
    drop = np.zeros(times.shape[0])
    if lowers:
        need = np.zeros(times.shape[0])
        for mask, shift, (hip, knee, ankle) in zip(planted, shifts, chains, strict=True):
            length = np.linalg.norm(knee - hip, axis=-1) + np.linalg.norm(ankle - knee, axis=-1)
            # Only spots out of reach call for a drop (a spot the straight leg reaches is held as
            # it is); then the drop leaves the knee a little bend.
            out = mask & (needed_drop(hip, ankle + shift, length, up) > 0.0)
            need = np.maximum(need, np.where(out, needed_drop(hip, ankle + shift, REACH * length, up), 0.0))
        drop = smooth_drop(np.minimum(need, MAX_DROP * hip_height), times, DROP_SPEED * hip_height)
    lowered = np.flatnonzero(drop > 0.0)
    if lowered.size:
        # Everything below the pelvis comes down with it, turning nothing: placements shift.
        below = np.array([_descends(skeleton, int(j), pelvis) for j in bones])
        pos[below] -= drop[:, None] * up
        # The pelvis's local translation moves by the drop seen from its parent (inv(P) then inv(C0)).
        dw = -drop[lowered, None] * up
        p = int(parents[pelvis])
        rel = dw if p < 0 else np.einsum("tji,tj->ti", lin[row[p], lowered], dw)
        tr_out[lowered, pelvis] = translations[lowered, pelvis] + rel @ skeleton.inverse_parent_frames[pelvis, :3, :3].T
    held: dict[int, int] = {}
    unreachable: dict[int, int] = {}
    # Joints whose local translation is keyed anywhere: theirs is rewritten with the rotation.
    carries = dict.fromkeys([j for rs in roots for j in rs], False)
    for j in carries:
        carries[j] = bool(np.any(translations[:, j] != 0.0))
    for leg, mask, part, leg_roots, shift, chain in zip(legs, planted, parts, roots, shifts, chains, strict=True):
        held[leg.foot] = int(mask.sum())
        unreachable[leg.foot] = 0
        moving = np.flatnonzero(np.any(shift != 0.0, axis=1) | (drop > 0.0))
        if moving.size == 0:
            continue
        # Usually one run of frames (a walk bends the leg from its first contact to its last):
        # then a slice, whose selections below are views rather than copies.
        frames: slice | NDArray[np.int64] = (
            slice(int(moving[0]), int(moving[-1]) + 1) if moving[-1] - moving[0] + 1 == moving.size else moving
        )
        # The chain as the lowered pelvis carries it, rigidly (a foot parented elsewhere, as IK
        # rigs do, stays behind, but its ankle is where the shin ends).
        hip, knee, ankle = (c[frames] - drop[frames, None] * up for c in chain)
        goal = chain[2][frames] + shift[frames]
        # No tolerance: a leg a hair off its spot is still solved (the hold is exact).
        solve = two_bone_ik(np.stack([hip, knee, ankle], axis=1), goal, tolerance=0.0)
        unreachable[leg.foot] = int((~solve.reachable & mask[frames]).sum())  # held frames the leg cannot reach
        new_knee, new_ankle = solve.points[:, 1], solve.points[:, 2]
        r1 = matrix_between_vectors(knee - hip, new_knee - hip)
        r21 = matrix_between_vectors(np.einsum("tij,tj->ti", r1, ankle - knee), new_ankle - new_knee) @ r1

        turn = _Turn(hip, knee, pos[row[leg.foot], frames], new_knee, new_ankle, r1, r21)

        placed: dict[int, tuple[FloatArray, FloatArray]] = {}

        def moved(
            j: int, turn: _Turn = turn, part: dict[int, str] = part, frames: slice | NDArray[np.int64] = frames,
            placed: dict[int, tuple[FloatArray, FloatArray]] = placed,
        ) -> tuple[FloatArray, FloatArray]:
            if j not in placed:  # a thigh is a root and the shin's parent: placed once
                placed[j] = turn.place(part.get(j), lin[row[j], frames], pos[row[j], frames])
            return placed[j]

        for j in leg_roots:
            p = int(parents[j])
            w_r, w_p = moved(j)
            if p >= 0:
                p_r, p_p = moved(p)
                rel_r = np.swapaxes(p_r, -1, -2) @ w_r
                rel_p = np.einsum("tji,tj->ti", p_r, w_p - p_p)
            else:
                rel_r, rel_p = w_r, w_p
            local_r, local_p = _local_from_relative(skeleton, j, rel_r, rel_p)
            q = quat_from_matrix(local_r)
            old = rot_out[frames, j]
            rot_out[frames, j] = np.where(np.sum(q * old, axis=-1, keepdims=True) < 0.0, -q, q)  # stay continuous
            if carries[j]:
                tr_out[frames, j] = local_p
    report = PlantReport(held, unreachable, float(drop.max(initial=0.0)) / hip_height if lowers else 0.0, int(lowered.size))
    return rot_out, tr_out, report


@dataclass(frozen=True)
class _Turn:
    """How a leg moves over the held frames: the thigh turns by ``r1`` about the hip, the shin by
    ``r21`` (r2 after r1) about its new knee, the foot (now at ``foot``) is carried to the new
    ankle."""

    hip: FloatArray
    knee: FloatArray
    foot: FloatArray
    new_knee: FloatArray
    new_ankle: FloatArray
    r1: FloatArray
    r21: FloatArray

    def place(self, kind: str | None, m_r: FloatArray, m_p: FloatArray) -> tuple[FloatArray, FloatArray]:
        """A joint's new placement (linear part, position) given the part it moves with: the
        foot's part keeps its orientation, joints outside the leg stay."""
        if kind == "foot":
            return m_r, m_p + (self.new_ankle - self.foot)
        if kind == "shin":
            return self.r21 @ m_r, np.einsum("tij,tj->ti", self.r21, m_p - self.knee) + self.new_knee
        if kind == "thigh":
            return self.r1 @ m_r, np.einsum("tij,tj->ti", self.r1, m_p - self.hip) + self.hip
        return m_r, m_p


def _local_from_relative(skeleton: Skeleton, j: int, rel_r: FloatArray, rel_p: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Local rotation and translation of joint ``j`` from its placement relative to its parent
    (``inv(P) @ M``): ``T = inv(C0) @ rel @ C1``, by parts."""
    c0 = skeleton.inverse_parent_frames[j]
    if skeleton.child_frames is None:  # C1 is the identity: nothing to apply on the right
        c = c0[None, :3, :3, None]
        r = c[:, :, 0] * rel_r[:, None, 0] + c[:, :, 1] * rel_r[:, None, 1] + c[:, :, 2] * rel_r[:, None, 2]
        return r, rel_p @ c0[:3, :3].T + c0[:3, 3]
    c1 = skeleton.child_frames[j]
    t = rel_r.shape[0]
    # A constant on the right of a block of frames is one (3T, 3) @ (3, 3) product.
    right = (np.ascontiguousarray(rel_r).reshape(3 * t, 3) @ c1[:3, :3]).reshape(t, 3, 3)
    # The constant on the left, row by row of it: the same sums as an einsum, in half the time.
    c = c0[None, :3, :3, None]
    r = c[:, :, 0] * right[:, None, 0] + c[:, :, 1] * right[:, None, 1] + c[:, :, 2] * right[:, None, 2]
    p = (np.einsum("tij,j->ti", rel_r, c1[:3, 3]) + rel_p) @ c0[:3, :3].T + c0[:3, 3]
    return r, p


def _descends(skeleton: Skeleton, j: int, ancestor: int) -> bool:
    """Whether joint ``j`` is ``ancestor`` or below it."""
    return j >= 0 and (j == ancestor or ancestor in skeleton.ancestors(j))


def _with_ancestors(skeleton: Skeleton, joints: set[int]) -> NDArray[np.int64]:
    out: set[int] = set()
    for j in joints:
        if j >= 0:
            out.update((j, *skeleton.ancestors(j)))
    return np.array(sorted(out), dtype=np.int64)


def _parts(skeleton: Skeleton, leg: Leg) -> dict[int, str]:
    """Joints that move with the thigh, shin or foot: each joint with its nearest of the three
    among itself and its ancestors (a foot parented elsewhere, as IK rigs do, is its own part)."""
    out: dict[int, str] = {}
    names = {leg.foot: "foot", leg.shin: "shin", leg.thigh: "thigh"}
    # Parents come first in a skeleton: a joint's part is its own name, else its parent's part.
    for j, p in enumerate(skeleton.parents.tolist()):
        kind = names.get(j) or out.get(p)
        if kind is not None:
            out[j] = kind
    return out
