"""A clip read from a file, put on the bone frames of its own rig as an armature holds it.

A BVH take read without Blender (:mod:`core.formats.bvh`) is keyed on the file's joint frames: each
joint's rest turned as the file's axes, placed at its offset. Blender's importer keys the same
motion on the bones it makes (each bone's Y along the bone, the file turned Z-up), so the take's
layout is not the armature's and native binding (:mod:`core.retarget.binding_cache`) would refuse it onto
the very armature the take was imported as. Both hold one motion: when the two rigs have the same
joints, parents and rest joint positions (one rigid motion apart), each joint's bone frame is the
file's joint frame turned by a fixed rotation ``C`` about its head, and a key ``K`` on the file's
frame is ``C^-1 K C`` on the bone's: every joint plays where it played. :func:`onto_own_frames`
makes that change when the result then binds natively, so such a take's keys are its own, as a
short clip imported by Blender has them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from ..retarget.binding_cache import native_refusal
from ..retarget.geometric import RetargetOptions, RigInput
from ..rig.clip import Clip
from ..rig.rotations import quat_conjugate, quat_from_matrix, quat_multiply
from ..rig.skeleton import Skeleton

FloatArray = NDArray[np.float64]

#: Rest joint positions agree within this fraction of the rig's size (float32 rests, exporters' noise).
TOLERANCE = 1e-5
#: Frames converted at once (bounds the temporaries of a long take).
CHUNK = 20_000


@dataclass(frozen=True)
class Reframing:
    """From a rig's joint frames to the same rig's bone frames in ``skeleton``: ``motion`` takes
    the rig's world to ``skeleton``'s space, ``turns[j]`` (a quaternion) turns joint ``j``'s frame
    (in ``skeleton``'s order) onto its bone frame."""

    skeleton: Skeleton
    motion: FloatArray
    turns: FloatArray

    def clip(self, clip: Clip) -> Clip:
        """``clip`` (keyed on the rig's joint frames) keyed on the bone frames, frame for frame."""
        cols = np.array([self.skeleton.index(nm) for nm in clip.names], dtype=np.int64)
        c = self.turns[cols]
        c_inv = quat_conjugate(c)
        turn_back = np.swapaxes(_matrices(c), -1, -2)
        rot = np.empty_like(clip.rotations)
        tr = np.empty_like(clip.translations)
        for a in range(0, clip.frame_count, CHUNK):
            part = slice(a, a + CHUNK)
            rot[part] = quat_multiply(quat_multiply(c_inv[None], clip.rotations[part]), c[None])
            tr[part] = np.einsum("bij,tbj->tbi", turn_back, clip.translations[part])
        return replace(clip, rotations=rot, translations=tr)

    def points(self, points: FloatArray) -> FloatArray:
        """Points of the rig's world, ``(B, 3)``, in ``skeleton``'s space."""
        p = np.asarray(points, dtype=np.float64)
        return np.asarray(p @ self.motion[:3, :3].T + self.motion[:3, 3], dtype=np.float64)


def _matrices(q: FloatArray) -> FloatArray:
    from ..rig.rotations import matrix_from_quat

    return np.asarray(matrix_from_quat(q), dtype=np.float64)


def reframing(layout: Skeleton, target: Skeleton, tolerance: float = TOLERANCE) -> Reframing | None:
    """How ``layout``'s joint frames become ``target``'s bone frames, or ``None`` when the two are
    not one rig: other joint names or parents, rest joint positions not one rigid motion apart,
    or frames that differ by more than a turn about each joint's head."""
    if sorted(layout.names) != sorted(target.names) or layout.child_frames is not None or target.child_frames is not None:
        return None
    idx = np.array([layout.index(nm) for nm in target.names], dtype=np.int64)
    parent_name = [None if p < 0 else layout.names[p] for p in layout.parents[idx]]
    if parent_name != [None if p < 0 else target.names[p] for p in target.parents]:
        return None
    world = (np.asarray(layout.placement) @ layout.rest_placements())[idx]
    bones = target.rest_placements()
    a, b = world[:, :3, 3], bones[:, :3, 3]
    size = max(float(np.ptp(a, axis=0).max()), float(np.ptp(b, axis=0).max()), 1e-9)
    ca, cb = a.mean(axis=0), b.mean(axis=0)
    u, _s, vt = np.linalg.svd((a - ca).T @ (b - cb))
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    turn = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    motion = np.eye(4)
    motion[:3, :3], motion[:3, 3] = turn, cb - turn @ ca
    if d < 0 or np.abs(a @ turn.T + motion[:3, 3] - b).max() > tolerance * size:
        return None
    frames = np.linalg.inv(motion @ world) @ bones
    rot = frames[:, :3, :3]
    if np.abs(frames[:, :3, 3]).max() > tolerance * size or np.abs(rot @ np.swapaxes(rot, -1, -2) - np.eye(3)).max() > 1e-4:
        return None
    skeleton = Skeleton(target.names, target.parents, target.parent_frames, None, np.eye(4))
    return Reframing(skeleton, motion, np.asarray(quat_from_matrix(rot), dtype=np.float64))


def onto_own_frames(source: RigInput, target: RigInput, clip: Clip, options: RetargetOptions | None = None) -> tuple[RigInput, Clip]:
    """``source`` and ``clip`` on ``target``'s bone frames when the two rigs are one (see
    :func:`reframing`) and the clip then binds natively; else both as given."""
    if clip.scales is not None:  # a scale key does not turn with its frame
        return source, clip
    r = reframing(source.skeleton, target.skeleton)
    if r is None:
        return source, clip
    if native_refusal(clip, r.skeleton, target.skeleton, options) is not None:  # reads the clip's names only
        return source, clip
    moved = r.clip(clip)
    ends = None if source.ends is None else r.points(np.asarray(source.ends, dtype=np.float64)[[source.skeleton.index(nm) for nm in r.skeleton.names]])
    return RigInput(r.skeleton, dict(source.slots), ends), moved
