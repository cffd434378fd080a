"""A built-in humanoid and walk cycle, authored by Marionette's own code.

They give the command line a default job that needs no downloaded file, and tests rigs whose every
property is known: rest pose (T, A, arms down), bone rolls, proportions and facing can be varied
while the body stays the same.

Skeleton space follows Blender: Z up, the character faces -Y, its left is +X. Bones follow
Blender's convention: a bone's local Y axis runs from head to tail and ``roll`` turns the bone's
axes about that Y axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..mapping.humanoid import finger_slot
from .clip import Clip
from .rotations import FloatArray, matrix_from_quat, quat_from_axis_angle, quat_from_matrix, quat_multiply
from .skeleton import Skeleton


@dataclass(frozen=True)
class SampleRig:
    skeleton: Skeleton
    slots: dict[str, str]  # slot -> bone name
    tails: FloatArray  # (B, 3) skeleton-space rest tails, in the skeleton's order


# name, parent, slot, head, tail (T-pose, metres, facing -Y, left = +X)
_BODY: list[tuple[str, str | None, str | None, tuple[float, float, float], tuple[float, float, float]]] = [
    ("Hips", None, "hips", (0.0, 0.0, 0.98), (0.0, 0.0, 1.08)),
    ("Spine", "Hips", "spine", (0.0, 0.0, 1.08), (0.0, 0.01, 1.25)),
    ("Chest", "Spine", "chest", (0.0, 0.01, 1.25), (0.0, 0.0, 1.45)),
    ("Neck", "Chest", "neck", (0.0, 0.0, 1.45), (0.0, -0.01, 1.55)),
    ("Head", "Neck", "head", (0.0, -0.01, 1.55), (0.0, -0.01, 1.75)),
]
for _s, _x in (("L", 1.0), ("R", -1.0)):
    _BODY += [
        (f"Clavicle.{_s}", "Chest", f"shoulder.{_s}", (0.03 * _x, -0.02, 1.42), (0.17 * _x, 0.0, 1.43)),
        (f"UpperArm.{_s}", f"Clavicle.{_s}", f"upper_arm.{_s}", (0.17 * _x, 0.0, 1.43), (0.44 * _x, 0.01, 1.43)),
        (f"Forearm.{_s}", f"UpperArm.{_s}", f"forearm.{_s}", (0.44 * _x, 0.01, 1.43), (0.69 * _x, 0.0, 1.43)),
        (f"Hand.{_s}", f"Forearm.{_s}", f"hand.{_s}", (0.69 * _x, 0.0, 1.43), (0.78 * _x, 0.0, 1.43)),
        (f"Thigh.{_s}", "Hips", f"thigh.{_s}", (0.09 * _x, 0.0, 0.95), (0.09 * _x, -0.015, 0.52)),
        (f"Shin.{_s}", f"Thigh.{_s}", f"shin.{_s}", (0.09 * _x, -0.015, 0.52), (0.09 * _x, 0.01, 0.09)),
        (f"Foot.{_s}", f"Shin.{_s}", f"foot.{_s}", (0.09 * _x, 0.01, 0.09), (0.09 * _x, -0.11, 0.02)),
        (f"Toes.{_s}", f"Foot.{_s}", f"toes.{_s}", (0.09 * _x, -0.11, 0.02), (0.09 * _x, -0.18, 0.02)),
    ]
    # Fingers: palm down, thumb forward; three segments each.
    for _f, _y, _len in (("thumb", -0.035, 0.03), ("index", -0.03, 0.035), ("middle", -0.01, 0.038),
                         ("ring", 0.01, 0.035), ("little", 0.028, 0.028)):
        parent = f"Hand.{_s}"
        base_x = 0.72 if _f == "thumb" else 0.78
        z = 1.42 if _f == "thumb" else 1.43
        for _k in (1, 2, 3):
            head = ((base_x + (_k - 1) * _len) * _x, _y - (0.012 * (_k - 1) if _f == "thumb" else 0.0), z)
            tail = ((base_x + _k * _len) * _x, _y - (0.012 * _k if _f == "thumb" else 0.0), z)
            name = f"{_f.capitalize()}{_k}.{_s}"
            _BODY.append((name, parent, finger_slot(_f, _k, _s), head, tail))
            parent = name


def bone_matrix(head: ArrayLike, tail: ArrayLike, roll: float = 0.0) -> FloatArray:
    """Blender-style bone rest matrix: Y along head->tail, then ``roll`` about Y."""
    h = np.asarray(head, dtype=np.float64)
    y = np.asarray(tail, dtype=np.float64) - h
    y = y / np.linalg.norm(y)
    # Blender's zero roll keeps the bone's Z as close to world +Z as it can (X for vertical bones).
    ref = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.999 else np.array([0.0, -np.sign(y[2]), 0.0])
    x = np.cross(y, ref)
    x = x / np.linalg.norm(x)
    z = np.cross(x, y)
    rot = np.stack([x, y, z], axis=-1) @ matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], roll))
    m = np.eye(4)
    m[:3, :3] = rot
    m[:3, 3] = h
    return m


def _rotate_about(points: FloatArray, pivot: FloatArray, rot: FloatArray) -> FloatArray:
    return np.asarray((points - pivot) @ rot.T + pivot, dtype=np.float64)


def sample_humanoid(
    arms_down_angle: float = 0.0,
    rolls: ArrayLike | None = None,
    fingers: bool = True,
    proportions: float = 1.0,
    leg_scale: float = 1.0,
    names: dict[str, str] | None = None,
    placement: ArrayLike | None = None,
) -> SampleRig:
    """The built-in humanoid.

    ``arms_down_angle`` lowers both arms from the T-pose (radians; 0.785 is an A-pose, ~1.4 arms
    down) about the forward axis at the shoulder joint; ``rolls`` gives each bone's roll (radians,
    in the skeleton's order); ``proportions`` scales the whole body, ``leg_scale`` the legs only.
    ``names`` renames bones (default names are Marionette's own).
    """
    body = [row for row in _BODY if fingers or row[2] is None or row[2].split("_")[0] not in
            ("thumb", "index", "middle", "ring", "little")]
    heads = {n: np.array(h, dtype=np.float64) for n, _, _, h, _ in body}
    tails = {n: np.array(t, dtype=np.float64) for n, _, _, _, t in body}
    # Legs: scale lengths below the hip joints, then lift everything above so the feet stay down.
    if leg_scale != 1.0:
        hip_z = heads["Thigh.L"][2]
        lift = (hip_z - 0.02) * (leg_scale - 1.0)
        for n in heads:
            if any(n.startswith(p) for p in ("Thigh", "Shin", "Foot", "Toes")):
                for d in (heads, tails):
                    d[n] = d[n].copy()
                    d[n][2] = 0.02 + (d[n][2] - 0.02) * leg_scale
            else:
                heads[n] = heads[n] + [0.0, 0.0, lift]
                tails[n] = tails[n] + [0.0, 0.0, lift]
    if arms_down_angle:
        for side, sign in (("L", 1.0), ("R", -1.0)):
            pivot = heads[f"UpperArm.{side}"].copy()
            rot = matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], sign * arms_down_angle))
            for n in heads:
                if n.endswith(f".{side}") and not any(n.startswith(p) for p in ("Thigh", "Shin", "Foot", "Toes", "Clavicle")):
                    heads[n] = _rotate_about(heads[n], pivot, rot)
                    tails[n] = _rotate_about(tails[n], pivot, rot)
    order = [n for n, _, _, _, _ in body]
    roll = np.zeros(len(order)) if rolls is None else np.asarray(rolls, dtype=np.float64)
    rest = np.stack([bone_matrix(heads[n] * proportions, tails[n] * proportions, r) for n, r in zip(order, roll, strict=True)])
    rename = names or {}
    bone_names = [rename.get(n, n) for n in order]
    parents = [None if p is None else rename.get(p, p) for _, p, _, _, _ in body]
    sk = Skeleton.from_rest_matrices(bone_names, parents, rest, placement)
    by_name = dict(zip(bone_names, (tails[n] * proportions for n in order), strict=True))
    slots = {slot: rename.get(n, n) for n, _, slot, _, _ in body if slot is not None}
    return SampleRig(sk, slots, np.stack([by_name[n] for n in sk.names]))


def sample_walk(rig: SampleRig, frames: int = 48, fps: float = 24.0, speed: float = 1.3, name: str = "Walk") -> Clip:
    """A procedural walk cycle for :func:`sample_humanoid` rigs: legs and arms swing in opposition,
    knees and elbows bend, the pelvis bobs, sways and turns, and the body travels forward (-Y).

    Motion is authored as world-axis rotations of each bone relative to its rest, so it reads the
    same whatever the rig's rolls and rest pose."""
    sk = rig.skeleton
    t = np.arange(frames) / fps
    phase = 2.0 * np.pi * t * (speed / 1.4)  # one stride per ~1.1 m
    slot_of = {b: s for s, b in rig.slots.items()}
    rest = sk.rest_placements()
    n = len(sk)
    world_delta = np.zeros((frames, n, 4))
    world_delta[..., 0] = 1.0
    x = np.array([1.0, 0.0, 0.0])
    z = np.array([0.0, 0.0, 1.0])
    yv = np.array([0.0, 1.0, 0.0])

    def turn(axis: FloatArray, angle: FloatArray) -> FloatArray:
        return quat_from_axis_angle(axis, angle)

    for i, bone in enumerate(sk.names):
        slot = slot_of.get(bone, "")
        side = 1.0 if slot.endswith(".L") else -1.0
        ph = phase + (0.0 if side > 0 else np.pi)
        if slot == "hips":
            q = quat_multiply(turn(z, 0.08 * np.sin(phase)), turn(yv, 0.05 * np.sin(phase)))
        elif slot == "spine":
            q = turn(z, -0.06 * np.sin(phase))
        elif slot == "chest":
            q = quat_multiply(turn(z, -0.05 * np.sin(phase)), turn(x, 0.05 + 0.0 * phase))
        elif slot == "head":
            q = turn(x, 0.05 * np.sin(2 * phase))
        elif slot.startswith("thigh"):
            q = turn(x, 0.45 * np.sin(ph))
        elif slot.startswith("shin"):
            # Knees bend (the shin swings back, +X turns a hanging bone toward +Y) while the thigh
            # swings forward, that is while its angle falls (cos < 0).
            q = turn(x, 0.35 * (1.0 - np.cos(ph)) + 0.05)
        elif slot.startswith("foot"):
            q = turn(x, 0.2 * np.sin(ph + 0.5))
        elif slot.startswith("upper_arm"):
            # Arms hang (from a T-pose rest) and swing against the legs.
            q = quat_multiply(turn(x, -0.35 * np.sin(ph)), turn(yv, side * 1.25 + 0 * ph))
        elif slot.startswith("forearm"):
            # Elbows bend forward: about the rest's up axis for an arm lying along X.
            q = turn(z, -side * (0.35 + 0.15 * np.sin(ph)))
        elif slot.startswith(("index", "middle", "ring", "little")):
            q = turn(yv, -side * (0.3 + 0.1 * np.sin(ph)))
        else:
            continue
        world_delta[:, i] = q
    # A T-pose rest's arms are rotated about the forward axis (Y) by the upper-arm term; other
    # rests start lower, so remove what the rest already has.
    for i, bone in enumerate(sk.names):
        slot = slot_of.get(bone, "")
        if slot.startswith("upper_arm"):
            d = rest[sk.index(rig.slots[slot.replace("upper_arm", "forearm")])][:3, 3] - rest[i][:3, 3]
            already = np.arctan2(-d[2], abs(d[0]))
            side = 1.0 if slot.endswith(".L") else -1.0
            world_delta[:, i] = quat_multiply(world_delta[:, i], turn(yv, -side * already + 0 * phase))
    # World-axis deltas become local rotations: accumulate parents' deltas, express in rest axes.
    world_rot = np.zeros((frames, n, 4))
    local = np.zeros((frames, n, 4))
    rest_q = quat_from_matrix(rest[:, :3, :3])
    for i in range(n):
        p = int(sk.parents[i])
        parent_q = world_rot[:, p] if p >= 0 else np.array([1.0, 0.0, 0.0, 0.0])
        world_rot[:, i] = quat_multiply(parent_q, world_delta[:, i])
        # local = rest^-1 * parent_world_delta^-1 * world_delta_total * rest
        rel = quat_multiply(_conj(parent_q), world_rot[:, i])
        local[:, i] = quat_multiply(_conj(rest_q[i]), quat_multiply(rel, rest_q[i]))
    trans = np.zeros((frames, n, 3))
    hips = sk.index(rig.slots["hips"])
    hips_rest = rest[hips, :3, :3]
    # The body travels the way a walk does: the foot on the ground stays where it is. With the
    # hips held still, the travel is the opposite of the planted foot's slide, frame by frame;
    # height plants the lowest foot point on the rest's ground.
    travel = np.stack([0.02 * np.sin(phase), np.zeros(frames), np.zeros(frames)], -1)
    trans[:, hips] = travel @ hips_rest  # world offset expressed in the hips' rest axes
    sides = {side: [sk.index(rig.slots[f"{part}.{side}"]) for part in ("foot", "toes")] for side in ("L", "R")}
    feet = sides["L"] + sides["R"]
    tails_local = np.einsum("bij,bj->bi", np.linalg.inv(rest[feet]), np.c_[rig.tails[feet], np.ones(len(feet))])[:, :3]
    placed = sk.forward_kinematics(local, trans)[:, feet]
    heights = np.minimum(placed[..., 2, 3], np.einsum("tbj,bj->tb", placed[..., 2, :3], tails_local) + placed[..., 2, 3])
    ground = min(rest[feet, 2, 3].min(), rig.tails[feet, 2].min())
    low = np.stack([heights[:, :2].min(axis=1), heights[:, 2:].min(axis=1)], -1)  # (T, 2): left, right
    ankles = placed[:, [0, 2]][..., :2, 3]  # (T, 2, 2): horizontal ankle positions, hips held still
    stance = np.argmin(low, axis=1)
    for f in range(1, frames):
        k = stance[f]
        travel[f, :2] = travel[f - 1, :2] - (ankles[f, k] - ankles[f - 1, k])
    travel[:, 0] += 0.02 * np.sin(phase)
    travel[:, 2] = ground - low.min(axis=1)
    trans[:, hips] = travel @ hips_rest
    return Clip.from_frames(sk.names, local, trans, fps=fps, first_frame=1, name=name)


def _conj(q: FloatArray) -> FloatArray:
    return np.asarray(q * np.array([1.0, -1.0, -1.0, -1.0]), dtype=np.float64)
