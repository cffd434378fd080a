"""A rig's anatomy and its canonical T-pose, from positions only (docs/pipeline.md#canonical-pose, docs/pipeline.md#rigs-as-they-really-are).

:class:`RigAnatomy` ties a :class:`~core.rig.skeleton.Skeleton` to its humanoid slots:

* the *anatomical* parent of every bone. It is the skeleton's parent, except for a mapped bone whose
  skeleton parent is not below its anatomical parent slot (an IK-style foot parented to a root
  bone): that bone hangs from the mapped bone of its anatomical parent slot instead;
* for each framed slot, the segment that defines its direction (see :mod:`core.rig.frames`), as
  points rigidly attached to bones;
* the *intermediate* bones between a mapped bone and the next mapped bone (extra spine or neck
  segments, twist splits, zero-length helper joints), which move with the slot above them.

:func:`canonical_pose` rotates the rest pose, slot by slot from the hips outwards, until every
segment lies along its canonical body axis: spine up, legs straight down, feet forward, arms
straight out sideways, hands palm-down, thumbs 45 degrees forward-down. Rests in T-pose, A-pose or
arms-down of one body all give the same canonical pose. The skeleton is not modified.

Everything is in skeleton space (Blender's armature space); the skeleton's placement never
enters, so a rig under a scaled, rotated parent retargets like the same rig without one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..mapping.humanoid import FINGERS, SIDES, SLOT_PARENT, SLOTS, finger_slot, sided
from ..rig.frames import CANONICAL_AXES, SEGMENT_END, canonical_axes, canonical_turn, geometric_frames_from_positions
from ..rig.rotations import FloatArray, matrix_from_quat, quat_from_axis_angle
from ..rig.skeleton import Skeleton
from .facing import Facing, Leg, facing_from_axes, infer_facing

Point = tuple[tuple[int, FloatArray], ...]
"""A point as the mean of points rigidly attached to bones: ``((bone, local_offset), ...)``."""


@dataclass(frozen=True)
class RigAnatomy:
    skeleton: Skeleton
    slots: dict[str, int]  # slot -> bone index
    ends: FloatArray  # (B, 3) skeleton-space rest end point of each bone
    anatomical_parents: NDArray[np.int64]  # (B,)
    detached: frozenset[int]  # mapped bones hung from their anatomical (not skeleton) parent
    order: tuple[int, ...]  # bones with skeleton and anatomical parents before them
    segment_start: dict[str, Point]
    segment_end: dict[str, Point]
    owner: NDArray[np.int64]  # (B,) the framed slot bone each bone moves with, -1 for none
    rest: FloatArray  # (B, 4, 4) skeleton-space rest placements

    @property
    def bone_slots(self) -> dict[int, str]:
        return {b: s for s, b in self.slots.items()}


def default_ends(skeleton: Skeleton, rest: FloatArray) -> FloatArray:
    """End points for skeletons without tails: the mean of the children's heads, or for a leaf a
    point continuing its parent's direction by half the parent's length."""
    heads = rest[:, :3, 3]
    ends = heads.copy()
    for i in range(len(skeleton)):
        kids = skeleton.children(i)
        if kids:
            ends[i] = heads[kids].mean(axis=0)
        else:
            p = int(skeleton.parents[i])
            if p >= 0:
                ends[i] = heads[i] + 0.5 * (heads[i] - heads[p])
    # A bone whose children all sit at its head (zero length) keeps a zero segment; callers use
    # the next mapped head instead, which is why segment ends prefer mapped slots.
    return ends


def build_anatomy(skeleton: Skeleton, slots: dict[str, str], ends: ArrayLike | None = None) -> RigAnatomy:
    """Tie a skeleton to its mapped slots. ``slots`` maps slot names to bone names."""
    rest = skeleton.rest_placements()
    n = len(skeleton)
    end_pts = default_ends(skeleton, rest) if ends is None else np.asarray(ends, dtype=np.float64)
    if end_pts.shape != (n, 3):
        raise RigError(f"bone end points must have shape ({n}, 3), got {end_pts.shape}")
    idx: dict[str, int] = {}
    for slot, bone in slots.items():
        if slot not in SLOT_PARENT:
            raise RigError(f"unknown humanoid slot {slot!r}")
        idx[slot] = skeleton.index(bone)
    if len(set(idx.values())) != len(idx):
        seen: dict[int, str] = {}
        for slot, b in idx.items():
            if b in seen:
                raise RigError(f"bone {skeleton.names[b]!r} is mapped to both {seen[b]!r} and {slot!r}")
            seen[b] = slot

    def mapped_parent_slot(slot: str) -> str | None:
        p = SLOT_PARENT[slot]
        while p is not None and p not in idx:
            p = SLOT_PARENT[p]
        return p

    anat = skeleton.parents.copy()
    detached: set[int] = set()
    for slot in SLOTS:
        if slot not in idx:
            continue
        ps = mapped_parent_slot(slot)
        if ps is None:
            continue
        b, a = idx[slot], idx[ps]
        if a not in skeleton.ancestors(b):
            if b in skeleton.ancestors(a):
                raise RigError(
                    f"bone {skeleton.names[b]!r} ({slot}) is above {skeleton.names[a]!r} ({ps}) in the hierarchy; "
                    "the mapping contradicts the rig's structure"
                )
            anat[b] = a
            detached.add(b)

    order = _dependency_order(skeleton.parents, anat)

    # Owners: every bone moves with the nearest framed slot bone above it (anatomically).
    bone_slot = {b: s for s, b in idx.items()}
    owner = np.full(n, -1, dtype=np.int64)
    for i in order:
        if i in bone_slot and bone_slot[i] in CANONICAL_AXES:
            owner[i] = i
        elif anat[i] >= 0:
            owner[i] = owner[anat[i]]

    inv_rest = np.linalg.inv(rest)

    def head(b: int) -> tuple[int, FloatArray]:
        return (b, np.zeros(3))

    def tail(b: int) -> tuple[int, FloatArray]:
        return (b, (inv_rest[b] @ np.append(end_pts[b], 1.0))[:3])

    def anat_descends(b: int, a: int) -> bool:
        p = int(anat[b])
        while p >= 0:
            if p == a:
                return True
            p = int(anat[p])
        return False

    heads = rest[:, :3, 3]
    size = float(np.linalg.norm(heads.max(axis=0) - heads.min(axis=0))) if n > 1 else 1.0
    # A segment shorter than this has no direction worth measuring (zero-length BVH joints such
    # as CMU's Spine1 or LHipJoint, whose children start where they start).
    min_len = 1e-3 * max(size, 1e-12)
    seg_start: dict[str, Point] = {}
    seg_end: dict[str, Point] = {}
    unframed: list[str] = []
    for slot in SLOTS:
        if slot not in idx or slot not in CANONICAL_AXES:
            continue
        b = idx[slot]
        if slot == "hips" and sided("thigh", "L") in idx and sided("thigh", "R") in idx:
            # The pelvis segment runs from between the hip joints up to the spine: roll-free and
            # non-degenerate even where the hips bone has no length (BVH roots).
            start: Point = (head(idx["thigh.L"]), head(idx["thigh.R"]))
        else:
            start = (head(b),)
        origin = evaluate_point(start, rest)
        ends_here = [idx[s] for s in SEGMENT_END[slot] if s in idx and anat_descends(idx[s], b)]
        if slot.startswith("hand."):
            side = slot[-1]
            bases = ends_here or [
                idx[finger_slot(f, 1, side)] for f in FINGERS if finger_slot(f, 1, side) in idx and f != "thumb"
            ]
            candidates: list[Point] = [tuple(head(e) for e in bases)] if bases else []
        else:
            candidates = [(head(e),) for e in ends_here]
        candidates.append((tail(b),))
        # The first candidate far enough from the start defines the direction; a slot with none
        # is not framed and moves with the slot above it.
        chosen = next((c for c in candidates if np.linalg.norm(evaluate_point(c, rest) - origin) > min_len), None)
        if chosen is None:
            unframed.append(slot)
            continue
        seg_start[slot] = start
        seg_end[slot] = chosen
    # Owners were assigned assuming every framed slot has a segment; re-own the unframed ones.
    if unframed:
        dropped = {idx[s] for s in unframed}
        for i in order:
            if owner[i] in dropped or i in dropped:
                owner[i] = owner[anat[i]] if anat[i] >= 0 else -1

    return RigAnatomy(
        skeleton=skeleton,
        slots=idx,
        ends=end_pts,
        anatomical_parents=anat,
        detached=frozenset(detached),
        order=order,
        segment_start=seg_start,
        segment_end=seg_end,
        owner=owner,
        rest=rest,
    )


def _dependency_order(parents: NDArray[np.int64], anat: NDArray[np.int64]) -> tuple[int, ...]:
    n = len(parents)
    deps = [{int(p) for p in (parents[i], anat[i]) if p >= 0} for i in range(n)]
    done: list[int] = []
    placed = np.zeros(n, dtype=bool)
    remaining = list(range(n))
    while remaining:
        nxt = [i for i in remaining if all(placed[d] for d in deps[i])]
        if not nxt:
            raise RigError("the mapped bones form a loop between the rig's hierarchy and its anatomy")
        for i in nxt:
            placed[i] = True
        done.extend(nxt)
        remaining = [i for i in remaining if not placed[i]]
    return tuple(done)


def evaluate_point(point: Point, placements: FloatArray) -> FloatArray:
    """Position of ``point`` for placements ``(..., B, 4, 4)``; returns ``(..., 3)``."""
    acc: FloatArray | float = 0.0
    for b, off in point:
        m = placements[..., b, :, :]
        acc = acc + m[..., :3, :3] @ off + m[..., :3, 3]
    return np.asarray(acc, dtype=np.float64) / len(point)


def rest_facing(anatomy: RigAnatomy, forward: ArrayLike | None = None) -> Facing:
    """Facing of the rig's rest pose, inferred from the body (docs/pipeline.md#facing).

    ``forward`` is the explicit fallback used when the cues cancel; without one, the side labels
    of the mapping decide (left minus right, crossed with up) and the facing says so.
    """
    s = anatomy.slots
    heads = anatomy.rest[:, :3, 3]
    top = next((s[k] for k in ("head", "neck", "upper_chest", "chest") if k in s), None)
    if "hips" not in s or top is None:
        raise RigError("facing needs the hips and a neck or head bone")
    legs = []
    for side in SIDES:
        need = [sided(p, side) for p in ("thigh", "shin", "foot")]
        if not all(k in s for k in need):
            continue
        toe_slot = sided("toes", side)
        toe = heads[s[toe_slot]] if toe_slot in s else anatomy.ends[s[sided("foot", side)]]
        legs.append(Leg(heads[s[need[0]]], heads[s[need[1]]], heads[s[need[2]]], toe))
    hips_pt = evaluate_point(anatomy.segment_start["hips"], anatomy.rest) if "hips" in anatomy.segment_start else heads[s["hips"]]
    facing = infer_facing(hips_pt, heads[top], legs)
    if facing.known:
        return facing
    if forward is not None:
        return facing_from_axes(facing.up, forward, source="fallback: explicit forward")
    left = np.zeros(3)
    for part in ("upper_arm", "thigh", "shoulder", "hand", "foot"):
        lk, rk = sided(part, "L"), sided(part, "R")
        if lk in s and rk in s:
            left = left + heads[s[lk]] - heads[s[rk]]
    fwd = np.cross(left, facing.up)
    if np.linalg.norm(fwd) < 1e-9:
        return facing
    f = facing_from_axes(facing.up, fwd, source="fallback: left/right labels")
    return Facing(up=f.up, forward=f.forward, cues=facing.cues, source=f.source)


@dataclass(frozen=True)
class CanonicalPose:
    placements: FloatArray  # (B, 4, 4) skeleton-space placements in the canonical pose
    frames: dict[str, FloatArray]  # framed slot -> 3x3 geometric frame in the canonical pose
    body: FloatArray  # 3x3 columns forward, left, up


def canonical_pose(anatomy: RigAnatomy, facing: Facing) -> CanonicalPose:
    """Rotate the rest pose segment by segment into the canonical T-pose (see module doc)."""
    body = facing.basis()
    w = anatomy.rest.copy()
    anat = anatomy.anatomical_parents
    n = len(anat)
    # Anatomical subtrees, computed once: which bones move when a slot bone turns.
    below = np.zeros((n, n), dtype=bool)
    for i in anatomy.order:
        p = int(anat[i])
        if p >= 0:
            below[i] = below[p]
            below[i, p] = True
    frames: dict[str, FloatArray] = {}
    # Parents before children in the rig's own anatomy (a thumb may hang below a palm bone that
    # is itself a finger slot), so no slot moves after it was put in place.
    rank = {bone: k for k, bone in enumerate(anatomy.order)}
    for slot in sorted((s for s in SLOTS if s in anatomy.segment_start), key=lambda s: rank[anatomy.slots[s]]):
        b = anatomy.slots[slot]
        x_c, y_c = canonical_axes(slot, body)
        start = evaluate_point(anatomy.segment_start[slot], w)
        end = evaluate_point(anatomy.segment_end[slot], w)
        seg = end - start
        if np.linalg.norm(seg) < 1e-9 * max(1.0, float(np.abs(w[:, :3, 3]).max())):
            raise RigError(
                f"bone {anatomy.skeleton.names[b]!r} ({slot}) has no length and nothing below it to aim at; "
                "its direction cannot be measured"
            )
        carried = w[b, :3, :3] @ anatomy.rest[b, :3, :3].T  # what the slots above turned it by
        rot = canonical_turn(seg, slot, body, carried)
        if slot.startswith("hand."):
            rot = _palm_down(anatomy, slot, w, rot, x_c, body[:, 0]) @ rot
        pivot = w[b, :3, 3].copy()
        moving = np.flatnonzero(below[:, b])
        moving = np.append(moving, b)
        w[moving, :3, :3] = rot @ w[moving, :3, :3]
        w[moving, :3, 3] = (w[moving, :3, 3] - pivot) @ rot.T + pivot
        frames[slot] = geometric_frames_from_positions(x_c, y_c)[0]
    return CanonicalPose(placements=w, frames=frames, body=body)


def _palm_down(
    anatomy: RigAnatomy, slot: str, w: FloatArray, rot: FloatArray, x_c: FloatArray, forward: FloatArray
) -> FloatArray:
    """Twist about the hand's axis so the palm faces down: the index side of the hand points
    forward. Without both index and little finger bases the hand keeps its twist."""
    side = slot[-1]
    s = anatomy.slots
    first, last = finger_slot("index", 1, side), finger_slot("little", 1, side)
    if last not in s:
        last = finger_slot("ring", 1, side)
    if first not in s or last not in s:
        return np.eye(3)
    across = rot @ (w[s[first], :3, 3] - w[s[last], :3, 3])
    across = across - np.dot(across, x_c) * x_c
    fwd = forward - np.dot(forward, x_c) * x_c
    if np.linalg.norm(across) < 1e-9 or np.linalg.norm(fwd) < 1e-9:
        return np.eye(3)
    a = across / np.linalg.norm(across)
    f = fwd / np.linalg.norm(fwd)
    angle = np.arctan2(np.dot(np.cross(a, f), x_c), np.dot(a, f))
    return matrix_from_quat(quat_from_axis_angle(x_c, angle))
