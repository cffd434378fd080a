"""A VMD motion played on a PMX rig: its keys turned into the rig's local poses, then the rig's
controls (IK with MMD's on/off switches, inheritance, fixed axes) run as MMD runs them.

Conventions. A VMD key is the bone's offset from its rest and its rotation, both in MMD model
axes (MMD bones have no rest orientation), left-handed +Y up, MMD units, quaternions
``(x, y, z, w)``. The rig (:mod:`core.formats.pmx_rig`) gave each joint a rest frame ``B`` (its
columns the joint's axes in Blender space). A model-space rotation ``Q`` (converted as a point
is: ``(w, x, y, z) -> (w, -x, -z, -y)``) becomes the joint's local rotation ``R = B^T Q B``, and an
offset ``t`` becomes the local translation ``B^T (scale * (x, z, y))``: the same relations the rig
uses for limits and fixed axes, so a key turns the bone exactly as MMD turns it.

Timing: MMD counts 30 frames per second. VMD frame ``f`` is time ``f / 30`` s; the clip records
30 fps and starts on Blender frame ``f + 1`` of its first sampled frame (frame 1 is time zero, as
every importer's clip), so a scene at another rate resamples it like any clip.

IK switches: a property key turns an IK (named by its IK bone) on or off from its frame on. A
chain switched off plays its keyed FK: frames are grouped by the switches in force and each group
runs the stack with those IK controls disabled (MMD rigs' controls carry no state from frame to
frame, so a group is the same as those frames run one by one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..controls.stack import IKControl
from ..errors import ClipError
from ..rig.clip import Clip
from ..rig.rotations import FloatArray, quat_conjugate, quat_from_matrix, quat_multiply, quat_normalize
from ..rig.skeleton import Skeleton
from .pmx_rig import PmxRig, blender_points, blender_quaternions, ik_target_positions
from .vmd import FPS, VmdMotion


@dataclass(frozen=True)
class VmdPlay:
    """A motion played on a rig: the pose as MMD shows it (:attr:`clip`), the keyed pose before
    the controls (:attr:`keyed`), which IK ran on which frame, and what did not match."""

    clip: Clip
    keyed: Clip
    #: VMD frame numbers sampled (integers from the first key to the last).
    frames: NDArray[np.int64]
    #: IK control name -> (F,) whether MMD's switch had it on.
    ik_on: Mapping[str, NDArray[np.bool_]]
    #: Tracks of the motion naming no bone of the rig (their keys are not played).
    unmatched: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def rest_frames(skeleton: Skeleton) -> FloatArray:
    """``(B, 4)`` each joint's rest orientation in skeleton space as a w-first quaternion."""
    return quat_from_matrix(skeleton.rest_placements()[:, :3, :3])


def local_rotations(skeleton: Skeleton, joints: Sequence[int], xyzw: ArrayLike) -> FloatArray:
    """VMD rotations ``(..., J, 4)`` ``(x, y, z, w)`` of ``joints`` as the joints' local rotations
    ``(..., J, 4)`` (w-first): ``R = B^T Q B`` with ``Q`` converted to Blender space."""
    q = np.asarray(xyzw, dtype=np.float64)
    q_mmd = np.concatenate([q[..., 3:4], q[..., :3]], axis=-1)
    world = blender_quaternions(quat_normalize(q_mmd))
    b = rest_frames(skeleton)[list(joints)]
    return quat_normalize(quat_multiply(quat_conjugate(b), quat_multiply(world, b)))


def local_translations(skeleton: Skeleton, joints: Sequence[int], offsets: ArrayLike, scale: float) -> FloatArray:
    """VMD offsets ``(..., J, 3)`` (MMD units and axes) as the joints' local translations."""
    p = blender_points(offsets, scale)
    b = skeleton.rest_placements()[list(joints), :3, :3]
    return np.einsum("jba,...jb->...ja", b, p)


def joints_by_name(skeleton: Skeleton, mmd_names: Sequence[str] | None = None) -> dict[str, int]:
    """Motion bone names -> joints: each joint's MMD name (``mmd_names``, as the model file has
    them), else its own name."""
    out: dict[str, int] = {}
    for j, name in enumerate(skeleton.names):
        out.setdefault(name.strip(), j)
    for j, name in enumerate(mmd_names or ()):
        if name.strip():
            out[name.strip()] = j
    return out


def keyed_pose_on(
    skeleton: Skeleton, joints: Mapping[str, int], scale: float, motion: VmdMotion, frames: ArrayLike
) -> tuple[FloatArray, FloatArray, NDArray[np.bool_], tuple[str, ...]]:
    """The local rotations ``(F, B, 4)`` and translations ``(F, B, 3)`` the motion keys at VMD
    ``frames`` (fractions allowed; Bézier-eased between keys) on a skeleton whose rests are an MMD
    model's (``scale`` metres per MMD unit, ``joints`` from :func:`joints_by_name`), bones without a
    track at rest; which joints have a track; and the tracks naming no joint."""
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    n = len(skeleton)
    rot = np.zeros((f.size, n, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((f.size, n, 3))
    keyed = np.zeros(n, dtype=bool)
    unmatched: list[str] = []
    for name, track in motion.tracks.items():
        j = joints.get(name.strip())
        if j is None:
            unmatched.append(name)
            continue
        pos, q = track.sample(f)
        rot[:, j] = local_rotations(skeleton, [j], q[:, None])[:, 0]
        tr[:, j] = local_translations(skeleton, [j], pos[:, None], scale)[:, 0]
        keyed[j] = True
    return rot, tr, keyed, tuple(unmatched)


def keyed_pose(rig: PmxRig, motion: VmdMotion, frames: ArrayLike) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
    """:func:`keyed_pose_on` the rig's skeleton: rotations, translations and unmatched tracks."""
    rot, tr, _, unmatched = keyed_pose_on(rig.skeleton, joints_by_name(rig.skeleton, rig.japanese), rig.scale, motion, frames)
    return rot, tr, unmatched


def ik_switches(rig: PmxRig, motion: VmdMotion, frames: ArrayLike) -> dict[str, NDArray[np.bool_]]:
    """Per IK control of the rig, ``(F,)`` whether the motion's property keys leave it on at each
    frame (named in the file by the IK bone's name; on where no key names it, as in MMD)."""
    return {name: switch_track(motion, rig.japanese[j], frames) for name, j in rig.ik_targets.items()}


def switch_track(motion: VmdMotion, ik_bone: str, frames: ArrayLike) -> NDArray[np.bool_]:
    """``(F,)`` whether the IK of ``ik_bone`` is on at each VMD frame (on where no key names it)."""
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    on = np.ones(f.size, dtype=bool)
    for prop in motion.properties:
        if ik_bone.strip() in prop.ik:
            on[f >= prop.frame] = prop.ik[ik_bone.strip()]
    return on


def play(rig: PmxRig, motion: VmdMotion, frames: ArrayLike | None = None, name: str | None = None) -> VmdPlay:
    """``motion`` played on ``rig`` at VMD ``frames`` (default: every frame from the first key to
    the last): keys converted, IK targets from the IK bones' keyed positions, the rig's controls
    run in MMD's order with each IK switched as the motion says."""
    if not motion.tracks:
        raise ClipError("the motion has no bone keys")
    if frames is None:
        first, last = motion.frame_range
        f = np.arange(first, last + 1, dtype=np.int64)
    else:
        f = np.asarray(frames, dtype=np.int64).reshape(-1)
        if f.size == 0 or (f.size > 1 and not np.all(np.diff(f) > 0)):
            raise ClipError("frames to play must be increasing")
    rot, tr, unmatched = keyed_pose(rig, motion, f)
    joint = joints_by_name(rig.skeleton, rig.japanese)
    if not any(name.strip() in joint for name in motion.tracks):
        raise ClipError(f"none of the motion's {len(motion.tracks)} bones is a bone of the model (the motion names {', '.join(list(motion.tracks)[:5])}, ...)")
    switches = ik_switches(rig, motion, f)
    out_rot, out_tr = rot.copy(), tr.copy()
    stack = rig.stack
    if len(stack):
        targets = ik_target_positions(rig, rot, tr)
        names = [c.name for c in stack.controls if isinstance(c, IKControl) and c.name in switches]
        states = np.stack([switches[n] for n in names], axis=1) if names else np.ones((f.size, 0), dtype=bool)
        for row in np.unique(states, axis=0):
            sel = np.flatnonzero((states == row).all(axis=1))
            instance = stack.instance()
            for k, n in enumerate(names):
                instance.set_enabled(n, bool(row[k]))
                if row[k]:
                    instance.set_target(n, targets[n][sel])
            result = instance.evaluate(rot[sel], tr[sel])
            out_rot[sel], out_tr[sel] = result.rotations, result.translations
    label = name or (motion.model_name.strip() or "VMD")
    times = (f - f[0]) / FPS
    kw = {"names": rig.skeleton.names, "times": times, "fps": FPS, "first_frame": float(f[0] + 1)}
    clip = Clip(rotations=out_rot, translations=out_tr, name=label, **kw)
    keyed = Clip(rotations=rot, translations=tr, name=label, **kw)
    notes = (f"{len(unmatched)} of the motion's bones are not in the model and are not played: {', '.join(unmatched[:8])}{', ...' if len(unmatched) > 8 else ''}",) if unmatched else ()
    return VmdPlay(clip, keyed, f, switches, unmatched, notes)
