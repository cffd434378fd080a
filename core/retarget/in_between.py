"""Target bones between two mapped bones, and twist bones (docs/pipeline.md#bones-in-between-toes-and-fingers).

* An axial slot whose target segment crosses bones in between (a spine of five bones mapped onto
  three slots) spreads its bend along the run instead of pivoting at its first joint.
* The target's forearm and shin twist bones turn about the limb by a share of the wrist's (ankle's)
  twist: how far along the limb they lie.

Arrays are bone-major: slot motions ``(K, T, 3, 3)``, world orientations ``(Bt, T, 3, 3)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..mapping.humanoid import SIDES, sided
from ..rig.rotation import Rotation
from ..rig.rotations import FloatArray, matrix_between_vectors, quat_from_matrix
from ..rig.skeleton import Skeleton
from .canonical_pose import CanonicalPose, RigAnatomy, evaluate_point

_SPREAD_SLOTS = ("spine", "chest", "upper_chest", "neck")


#: Twist slots that share the twist of the joint at the far end of their limb.
_DISTAL_TWISTS = (("forearm_twist", "forearm", "hand"), ("shin_twist", "shin", "foot"))


def twist_shares(
    target: Skeleton, target_slots: dict[str, str], tgt: RigAnatomy, canonical: CanonicalPose, framed: tuple[str, ...]
) -> tuple[tuple[int, str, str, float], ...]:
    """The target's forearm and shin twist bones (mapped by the target's mapping, whatever the
    source has) and the share of the wrist's (ankle's) twist each takes: how far along the limb
    its middle lies, so a twist bone next to the wrist turns almost with the hand and one at the
    elbow hardly at all. A twist bone must hang from its limb bone."""
    sk = target
    placed = canonical.placements
    out = []
    for side in SIDES:
        for part, limb, distal in _DISTAL_TWISTS:
            slot, limb_s, distal_s = sided(part, side), sided(limb, side), sided(distal, side)
            name = target_slots.get(slot)
            b = None if name is None else sk.find(name)
            if b is None or limb_s not in framed or distal_s not in framed:
                continue
            limb_b, distal_b = tgt.slots[limb_s], tgt.slots[distal_s]
            p = int(sk.parents[b])
            while p >= 0 and p not in (limb_b, distal_b):
                p = int(sk.parents[p])
            if p != limb_b or int(tgt.owner[b]) != limb_b:
                continue
            start = placed[limb_b, :3, 3]
            axis = evaluate_point(tgt.segment_end[limb_s], placed[None])[0] - start
            length = float(np.linalg.norm(axis))
            if length <= 0.0:
                continue
            tail = placed[b] @ np.linalg.inv(tgt.rest[b]) @ np.append(tgt.ends[b], 1.0)
            middle = 0.5 * (placed[b, :3, 3] + tail[:3])
            share = float(np.clip((middle - start) @ axis / (length * length), 0.0, 1.0))
            out.append((b, limb_s, distal_s, share))
    return tuple(out)


def twist(motion: FloatArray, twists: tuple[tuple[int, int, int, FloatArray, float, FloatArray], ...],
           canonical_rot: FloatArray, w_r: FloatArray) -> None:
    """Turn each twist bone about its limb's axis by its share of the distal joint's twist
    relative to the limb, counted from their relation at rest (``motion`` ``(K, T, 3, 3)``,
    ``w_r`` ``(Bt, T, 3, 3)``, bone-major)."""
    for b, k, k2, axis, share, at_rest in twists:
        limb = motion[k]
        # The distal bone seen from the limb, less the turn their rest relation already holds.
        q = quat_from_matrix(times_each((np.swapaxes(limb, -1, -2) @ motion[k2])[None], at_rest[None])[0])
        angle = 2.0 * np.arctan2(q[:, 1:] @ axis, q[:, 0])
        angle = (angle + np.pi) % (2.0 * np.pi) - np.pi  # the short way round
        turn = Rotation.from_axis_angle(axis[None], share * angle).as_matrix()
        w_r[b] = limb @ turn @ canonical_rot[b]


def twist_entry(
    tgt: RigAnatomy, canonical: CanonicalPose, canonical_rot: FloatArray, framed: tuple[str, ...],
    b: int, limb: str, distal: str, share: float,
) -> tuple[int, int, int, FloatArray, float, FloatArray]:
    """What :func:`twist` needs of one twist bone: the limb's and distal joint's slot indices, the
    limb's canonical axis, the share, and the distal joint's rest relation to the limb."""
    c = canonical_rot
    rest = tgt.rest[:, :3, :3] / np.linalg.norm(tgt.rest[:, :3, :3], axis=-2, keepdims=True)
    lb, db = tgt.slots[limb], tgt.slots[distal]
    at_rest = c[db] @ rest[db].T @ rest[lb] @ c[lb].T
    axis = canonical.frames[limb][:, 0]
    return (b, framed.index(limb), framed.index(distal), axis, share, at_rest)


def spread_runs(
    tgt: RigAnatomy, canonical: CanonicalPose, framed: tuple[str, ...], slot_index: dict[int, int]
) -> tuple[tuple[int, int, NDArray[np.int64], FloatArray, FloatArray], ...]:
    """Axial slots whose target segment crosses in-between bones (a spine of five bones mapped
    onto three slots): their bend is spread along the run instead of pivoting at its first joint."""
    sk = tgt.skeleton
    placed = canonical.placements
    runs = []
    for slot in _SPREAD_SLOTS:
        if slot not in framed:
            continue
        end = tgt.segment_end[slot]
        if len(end) != 1 or end[0][1].any():
            continue  # the segment ends on the bone's own tail: nothing in between
        b, e = tgt.slots[slot], end[0][0]
        path = [e]
        while path[-1] != b and path[-1] >= 0:
            path.append(int(sk.parents[path[-1]]))
        if path[-1] != b or len(path) < 3:
            continue  # not a plain chain, or no bone in between
        chain = np.array(path[::-1][:-1], dtype=np.int64)  # slot bone and the bones in between
        parent_owner = int(tgt.owner[int(tgt.anatomical_parents[b])])
        if parent_owner < 0 or parent_owner not in slot_index:
            continue
        heads = placed[np.append(chain, e), :3, 3]
        vectors = np.diff(heads, axis=0)
        lengths = np.linalg.norm(vectors, axis=-1)
        fractions = np.cumsum(lengths) / max(float(lengths.sum()), 1e-300)
        runs.append((framed.index(slot), slot_index[parent_owner], chain, fractions, vectors))
    return tuple(runs)


def spread(motion: FloatArray, runs: tuple[tuple[int, int, NDArray[np.int64], FloatArray, FloatArray], ...],
            canonical_rot: FloatArray, w_r: FloatArray) -> None:
    """Give each bone of a run a growing share of the turn from the parent slot's frame to the
    slot's own, then turn the whole run about its first joint so its end lands where the rigid
    run would put it (the segment direction stays exact). Arrays are bone-major: ``motion`` is
    ``(K, T, 3, 3)``, ``w_r`` ``(Bt, T, 3, 3)``."""
    for k, kp, chain, fractions, vectors in runs:
        parent, own = motion[kp], motion[k]
        axis, angle = Rotation.from_matrix(own @ np.swapaxes(parent, -1, -2)).as_axis_angle()
        shares = Rotation.from_axis_angle(axis[None], fractions[:, None] * angle[None]).as_matrix()
        turns = shares @ parent[None]  # (J, T, 3, 3)
        reached = (turns @ vectors[:, None, :, None])[..., 0].sum(axis=0)
        wanted = own @ vectors.sum(axis=0)
        fix = matrix_between_vectors(reached, wanted)
        w_r[chain] = fix[None] @ turns @ canonical_rot[chain][:, None]


def times_each(x: FloatArray, c: FloatArray) -> FloatArray:
    """``x[k, t] @ c[k]`` for ``x`` ``(K, T, 3, 3)`` and ``c`` ``(K, 3, 3)``: each block of ``T``
    matrices times its one constant is a single ``(3T, 3) @ (3, 3)`` product (its rows are all the
    rows of the block), several times faster than ``T`` separate 3x3 products."""
    k, t = x.shape[:2]
    out = np.matmul(np.ascontiguousarray(x).reshape(k, 3 * t, 3), c)
    return np.asarray(out.reshape(x.shape), dtype=np.float64)
