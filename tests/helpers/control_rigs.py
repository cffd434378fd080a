"""Synthetic rigs for the control tests and the controls benchmark.

Blender conventions: armature space is Z up, the character faces -Y, every bone's Y axis runs
from its head to its tail. Random chains carry random attachment frames (C0 rotations, and C1
frames when asked) so nothing in the solvers can rely on Blender's special case.
"""

from __future__ import annotations

import math

import numpy as np

from marionette.core.controls.chains import JointPath
from marionette.core.controls.look_at import LookAtChain
from marionette.core.controls.stack import ControlStack, IKControl, LookAtControl
from marionette.core.rig.rotations import matrix_from_quat, quat_from_matrix, quat_normalize
from marionette.core.rig.skeleton import Skeleton


def random_quats(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return quat_normalize(rng.normal(size=shape + (4,)))


def small_quats(rng: np.random.Generator, shape: tuple[int, ...], spread: float) -> np.ndarray:
    q = np.zeros(shape + (4,))
    q[..., 0] = 1.0
    q[..., 1:] = rng.normal(scale=spread, size=shape + (3,))
    return quat_normalize(q)


def random_chain(
    rng: np.random.Generator, joints: int, *, child_frames: bool = False, lengths: np.ndarray | None = None
) -> tuple[Skeleton, JointPath, np.ndarray]:
    """A single chain of ``joints`` joints with random attachment frames. ``C0`` of joint
    ``k + 1`` puts its pivot at ``(0, spacing[k], 0)`` in joint ``k``'s placement frame, and the
    end point sits at ``(0, spacing[-1], 0)`` in the last one; with ``child_frames`` every joint
    also gets a random ``C1``. Returns the skeleton, the path and the segment lengths (pivot to
    next point), which a ``C1`` translation changes from the spacing."""
    spacing = rng.uniform(0.3, 1.2, joints) if lengths is None else np.asarray(lengths, dtype=float)
    c0 = np.zeros((joints, 4, 4))
    c1 = np.broadcast_to(np.eye(4), (joints, 4, 4)).copy()
    for i in range(joints):
        m = np.eye(4)
        m[:3, :3] = matrix_from_quat(random_quats(rng, ()))
        if i > 0:
            m[:3, 3] = [0.0, spacing[i - 1], 0.0]
        c0[i] = m
        if child_frames:
            c1[i, :3, :3] = matrix_from_quat(random_quats(rng, ()))
            c1[i, :3, 3] = rng.normal(scale=0.05, size=3)
    names = [f"j{i}" for i in range(joints)]
    sk = Skeleton(names, np.arange(joints) - 1, c0, c1 if child_frames else None)
    path = JointPath.between(sk, 0, joints - 1, end_offset=[0.0, spacing[-1], 0.0])
    # The segment of joint k runs from its pivot to inv(C1_k) applied to the next point.
    seg = np.stack([np.zeros(joints), spacing, np.zeros(joints)], axis=1) - c1[:, :3, 3]
    return sk, path, np.linalg.norm(seg, axis=1)


def _bone_matrix(head: np.ndarray, tail: np.ndarray, z_hint: np.ndarray) -> np.ndarray:
    y = tail - head
    y = y / np.linalg.norm(y)
    z = z_hint - np.dot(z_hint, y) * y
    if np.linalg.norm(z) < 1e-6:
        z = np.array([0.0, -1.0, 0.0]) - np.dot([0.0, -1.0, 0.0], y) * y
    z = z / np.linalg.norm(z)
    x = np.cross(y, z)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, z, head
    return m


def humanoid_65() -> tuple[Skeleton, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """A 65-bone humanoid (1.8 units tall) in Blender's conventions; also returns each bone's
    rest head and tail in armature space."""
    bones: list[tuple[str, str | None, tuple[float, float, float], tuple[float, float, float]]] = [
        ("root", None, (0, 0, 0), (0, 0.3, 0)),
        ("hips", "root", (0, 0, 1.0), (0, 0, 1.1)),
        ("spine", "hips", (0, 0, 1.1), (0, 0, 1.25)),
        ("spine1", "spine", (0, 0, 1.25), (0, 0, 1.38)),
        ("spine2", "spine1", (0, 0, 1.38), (0, 0, 1.5)),
        ("neck", "spine2", (0, 0, 1.5), (0, -0.01, 1.6)),
        ("head", "neck", (0, -0.01, 1.6), (0, -0.01, 1.8)),
        ("jaw", "head", (0, -0.03, 1.63), (0, -0.1, 1.6)),
        ("tongue", "jaw", (0, -0.05, 1.61), (0, -0.08, 1.61)),
    ]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        bones += [
            (f"eye.{side}", "head", (0.03 * sx, -0.08, 1.7), (0.03 * sx, -0.1, 1.7)),
            (f"shoulder.{side}", "spine2", (0.02 * sx, -0.02, 1.47), (0.17 * sx, 0.0, 1.47)),
            (f"upper_arm.{side}", f"shoulder.{side}", (0.17 * sx, 0.0, 1.47), (0.45 * sx, 0.02, 1.47)),
            (f"upper_arm_twist.{side}", f"upper_arm.{side}", (0.31 * sx, 0.01, 1.47), (0.45 * sx, 0.02, 1.47)),
            (f"forearm.{side}", f"upper_arm.{side}", (0.45 * sx, 0.02, 1.47), (0.71 * sx, 0.0, 1.47)),
            (f"forearm_twist.{side}", f"forearm.{side}", (0.58 * sx, 0.01, 1.47), (0.71 * sx, 0.0, 1.47)),
            (f"hand.{side}", f"forearm.{side}", (0.71 * sx, 0.0, 1.47), (0.79 * sx, 0.0, 1.47)),
        ]
        for f, (dy, dz) in enumerate([(-0.03, -0.02), (-0.02, 0.0), (0.0, 0.0), (0.02, 0.0), (0.035, 0.0)]):
            prev = f"hand.{side}"
            x0 = 0.79
            for seg in range(3):
                name = f"finger{f}_{seg}.{side}"
                bones.append((name, prev, (x0 * sx, dy, 1.47 + dz), ((x0 + 0.03) * sx, dy, 1.47 + dz)))
                prev = name
                x0 += 0.03
        bones += [
            (f"thigh.{side}", "hips", (0.1 * sx, 0.0, 1.0), (0.1 * sx, -0.01, 0.55)),
            (f"thigh_twist.{side}", f"thigh.{side}", (0.1 * sx, -0.005, 0.77), (0.1 * sx, -0.01, 0.55)),
            (f"shin.{side}", f"thigh.{side}", (0.1 * sx, -0.01, 0.55), (0.1 * sx, 0.02, 0.1)),
            (f"foot.{side}", f"shin.{side}", (0.1 * sx, 0.02, 0.1), (0.1 * sx, -0.1, 0.03)),
            (f"toe.{side}", f"foot.{side}", (0.1 * sx, -0.1, 0.03), (0.1 * sx, -0.17, 0.03)),
            (f"foot_ik.{side}", "root", (0.1 * sx, 0.02, 0.1), (0.1 * sx, -0.1, 0.1)),
        ]
    names = [b[0] for b in bones]
    parents = [b[1] for b in bones]
    heads = {b[0]: np.array(b[2], dtype=float) for b in bones}
    tails = {b[0]: np.array(b[3], dtype=float) for b in bones}
    rest = np.array([_bone_matrix(heads[n], tails[n], np.array([0.0, -1.0, 0.3])) for n in names])
    sk = Skeleton.from_rest_matrices(names, parents, rest)
    assert len(sk) == 65, len(sk)
    return sk, {n: (heads[n], tails[n]) for n in names}


def rest_axis(skeleton: Skeleton, joint: str, direction: tuple[float, float, float]) -> np.ndarray:
    """An armature-space rest direction expressed in ``joint``'s placement frame."""
    rest = skeleton.rest_placements()[skeleton.index(joint)]
    return np.linalg.solve(rest[:3, :3], np.asarray(direction, dtype=float))


def humanoid_stack(skeleton: Skeleton, *, smooth_time: float = 0.0) -> ControlStack:
    """Four two-bone limbs with end orientation on the feet, plus a three-joint look-at."""
    controls: list[IKControl | LookAtControl] = []
    for side in ("L", "R"):
        controls.append(
            IKControl(
                name=f"leg.{side}",
                path=JointPath.between(skeleton, f"thigh.{side}", f"shin.{side}", end=f"foot.{side}"),
                solver="two_bone",
                priority=0,
                smooth_time=smooth_time,
                orient_end=True,
            )
        )
        controls.append(
            IKControl(
                name=f"arm.{side}",
                path=JointPath.between(skeleton, f"upper_arm.{side}", f"forearm.{side}", end=f"hand.{side}"),
                solver="two_bone",
                priority=1,
                smooth_time=smooth_time,
            )
        )
    chain = LookAtChain.build(
        skeleton,
        ["spine2", "neck", "head"],
        weights=[0.2, 0.3, 0.5],
        facing_axis=rest_axis(skeleton, "head", (0.0, -1.0, 0.0)),
        up_axis=rest_axis(skeleton, "head", (0.0, 0.0, 1.0)),
        space_joint="hips",
        yaw_limits=(-math.radians(80), math.radians(80)),
        pitch_limits=(-math.radians(45), math.radians(60)),
    )
    controls.append(LookAtControl(name="look", chain=chain, priority=2, smooth_time=smooth_time))
    return ControlStack(skeleton, controls)


def hanging_chain(segments: int = 4, length: float = 1.0) -> tuple[Skeleton, JointPath]:
    """A carrier bone ``base`` (head at (0, 0, 2), rest axes = armature axes, so its local
    translation is an armature-space offset) and a chain of ``segments`` equal bones hanging
    straight down from its head, ``length`` long in all. Returns the skeleton and the chain's
    path (its end point is the last bone's tail)."""
    seg = length / segments
    names = ["base"] + [f"s{k}" for k in range(segments)]
    parents: list[str | None] = [None, "base"] + [f"s{k}" for k in range(segments - 1)]
    rest = [_bone_matrix(np.array([0.0, 0.0, 2.0]), np.array([0.0, 0.1, 2.0]), np.array([0.0, 0.0, 1.0]))]
    for k in range(segments):
        head = np.array([0.0, 0.0, 2.0 - seg * k])
        rest.append(_bone_matrix(head, head - [0.0, 0.0, seg], np.array([0.0, -1.0, 0.0])))
    sk = Skeleton.from_rest_matrices(names, parents, np.array(rest))
    path = JointPath.between(sk, "s0", f"s{segments - 1}", end_offset=[0.0, seg, 0.0])
    return sk, path


def walk_cycle(
    skeleton: Skeleton,
    times: np.ndarray,
    *,
    speed: float = 1.0,
    period: float = 1.0,
    lift: float = 0.08,
    stance: float = 0.55,
    bob: float = 0.02,
) -> tuple[np.ndarray, np.ndarray]:
    """A flat-ground walk for :func:`humanoid_65` toward -Y: the hips travel at ``speed`` with a
    ``bob`` (2 cm), each foot stays planted (flat, on z = 0) for ``stance`` of the cycle and swings
    one stride forward with an arc ``lift`` high. Made with the stack's own two-bone legs, so
    feet are exactly where they are meant to be. Returns rotations and translations."""
    t = np.asarray(times, dtype=float)
    frames, bones = len(t), len(skeleton)
    rest = skeleton.rest_placements()
    rot = np.zeros((frames, bones, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((frames, bones, 3))
    hips = skeleton.index("hips")
    offset = np.zeros((frames, 3))
    offset[:, 1] = -speed * t
    offset[:, 2] = -0.08 + bob * np.cos(4 * np.pi * t / period)
    # The hips' local translation lives in its rest frame (a root child with C1 = I).
    tr[:, hips] = offset @ rest[hips, :3, :3]
    legs = []
    targets = {}
    for side, phase in (("L", 0.0), ("R", 0.5)):
        ankle = rest[skeleton.index(f"foot.{side}"), :3, 3]
        cycle = np.floor(t / period + phase)
        ph = t / period + phase - cycle

        def plant(k: np.ndarray, phase: float = phase) -> np.ndarray:
            # Planted under the hips at mid-stance.
            return -speed * (k + stance / 2 - phase) * period

        swing = np.clip((ph - stance) / (1 - stance), 0.0, 1.0)
        y = plant(cycle) + (plant(cycle + 1) - plant(cycle)) * (0.5 - 0.5 * np.cos(np.pi * swing))
        z = np.where(ph < stance, 0.0, lift * np.sin(np.pi * swing))
        targets[side] = np.stack([np.full(frames, ankle[0]), y + ankle[1], z + ankle[2]], axis=1)
        legs.append(
            IKControl(f"leg.{side}", JointPath.between(skeleton, f"thigh.{side}", f"shin.{side}", end=f"foot.{side}"), orient_end=True)
        )
    inst = ControlStack(skeleton, legs).instance()
    for side in ("L", "R"):
        flat = quat_from_matrix(rest[skeleton.index(f"foot.{side}"), :3, :3])
        inst.set_target(f"leg.{side}", targets[side], pole=targets[side] + [0.0, -1.0, 0.5], orientation=flat)
    out = inst.evaluate(rot, tr)
    return out.rotations, out.translations
