"""Quadrupeds built in numpy for the core tests: chains of any length, bones in Blender's
conventions (Y along the bone) with any roll, and clips carried onto rolled copies."""

from __future__ import annotations

import numpy as np

from marionette.core.rig.clip import Clip
from marionette.core.rig.rotations import matrix_from_quat, quat_from_axis_angle, quat_from_matrix
from marionette.core.rig.skeleton import Skeleton


def bone_matrix(head: np.ndarray, tail: np.ndarray, roll: float = 0.0) -> np.ndarray:
    """A Blender bone's rest matrix: Y from head to tail, turned by ``roll`` radians about Y."""
    y = (tail - head) / np.linalg.norm(tail - head)
    hint = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(y, hint)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, z, head
    turn = np.eye(4)
    turn[:3, :3] = matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], roll))
    return m @ turn


class Quadruped:
    """A quadruped facing +X, Z up (units: the pelvis stands ``height`` above the ground):
    names, parents, heads, tails, and its skeleton with bones rolled by ``rolls`` (radians, per
    bone; zero when not given)."""

    def __init__(self, spine: int = 2, neck: int = 1, tail: int = 3, front: int = 3, hind: int = 3,
                 length: float = 1.0, height: float = 0.8, rolls: np.ndarray | None = None, face: bool = False,
                 root: bool = False) -> None:
        names: list[str] = []
        parents: list[int] = []
        heads: list[np.ndarray] = []
        tails: list[np.ndarray] = []

        def add(name: str, parent: int, head: np.ndarray, tail: np.ndarray) -> int:
            names.append(name)
            parents.append(parent)
            heads.append(np.asarray(head, dtype=float))
            tails.append(np.asarray(tail, dtype=float))
            return len(names) - 1

        top = np.array([0.0, 0.0, height])
        base = add("root", -1, np.zeros(3), np.array([0.0, 0.2 * length, 0.0])) if root else -1  # a game engine's root bone
        pelvis = add("pelvis", base, top, top + [0.1 * length, 0.0, 0.05 * length])
        prev, at = pelvis, top.copy()
        step = length / spine
        for k in range(spine):
            nxt = at + [step, 0.0, 0.0]
            prev = add(f"spine{k}", prev, at, nxt)
            at = nxt
        chest, chest_at = prev, at
        for k in range(neck):
            nxt = at + [0.1 * length, 0.0, 0.15 * length / neck]
            prev = add(f"neck{k}", prev, at, nxt)
            at = nxt
        head = add("head", prev, at, at + [0.25 * length, 0.0, -0.05 * length])
        if face:  # two-bone ears rising from the back of the head, a jaw running forward and down
            for side, y in (("L", 0.05), ("R", -0.05)):
                ear = add(f"ear0.{side}", head, at + [0.05 * length, y * length, 0.03 * length], at + [0.03 * length, 1.4 * y * length, 0.1 * length])
                add(f"ear1.{side}", ear, at + [0.03 * length, 1.4 * y * length, 0.1 * length], at + [0.01 * length, 1.6 * y * length, 0.16 * length])
            add("jaw", head, at + [0.04 * length, 0.0, -0.03 * length], at + [0.22 * length, 0.0, -0.08 * length])
        prev, at = pelvis, top.copy()
        for k in range(tail):
            nxt = at + [-0.6 * length / tail, 0.0, -0.2 * length / tail]
            prev = add(f"tail{k}", prev, at, nxt)
            at = nxt
        for side, y in (("L", 0.2), ("R", -0.2)):
            for chain, parent, root, count in (("front", chest, chest_at, front), ("hind", pelvis, top, hind)):
                start = root + [0.0, y * length, -0.05 * height]
                foot = np.array([start[0] + 0.05 * length, start[1], 0.0])
                prev, at = parent, start
                # The leg zigzags a little (knee and hock), its last segment a paw lying forward.
                for k in range(count - 1):
                    f = (k + 1) / (count - 1)
                    nxt = start + f * (foot + [0.0, 0.0, 0.04 * height] - start) + [(-0.04 if k % 2 else 0.04) * length * (k < count - 2), 0.0, 0.0]
                    prev = add(f"{chain}{k}.{side}", prev, at, nxt)
                    at = nxt
                add(f"{chain}{count - 1}.{side}", prev, at, np.array([at[0] + 0.1 * length, at[1], 0.0]))
        self.names, self.parents = names, np.array(parents)
        self.heads, self.tails = np.stack(heads), np.stack(tails)
        self.rolls = np.zeros(len(names)) if rolls is None else np.asarray(rolls, dtype=float)
        rests = np.stack([bone_matrix(h, t, r) for h, t, r in zip(self.heads, self.tails, self.rolls, strict=True)])
        self.skeleton = Skeleton.from_rest_matrices(names, list(parents), rests)
        order = [names.index(n) for n in self.skeleton.names]
        self.ends = self.tails[order]

    def slots(self, spine: int, neck: int, tail: int, front: int, hind: int, face: bool = False) -> dict[str, str]:
        out = {"pelvis": "pelvis", "head": "head"}
        if face:
            out.update({"jaw": "jaw", "ear_1.L": "ear0.L", "ear_2.L": "ear1.L", "ear_1.R": "ear0.R", "ear_2.R": "ear1.R"})
        out.update({f"spine_{k + 1}": f"spine{k}" for k in range(spine)})
        out.update({f"neck_{k + 1}": f"neck{k}" for k in range(neck)})
        out.update({f"tail_{k + 1}": f"tail{k}" for k in range(tail)})
        for side in ("L", "R"):
            out.update({f"front_leg_{k + 1}.{side}": f"front{k}.{side}" for k in range(front)})
            out.update({f"hind_leg_{k + 1}.{side}": f"hind{k}.{side}" for k in range(hind)})
        return out


def rolled_clip(clip: Clip, skeleton: Skeleton, rolls: dict[str, float]) -> Clip:
    """``clip`` as the same motion on a copy of its rig whose bones are rolled by ``rolls``
    (radians about each bone's Y): local rotation R -> Ry^T R Ry, translation t -> Ry^T t."""
    rot = clip.rotations.copy()
    tr = clip.translations.copy()
    for i, name in enumerate(clip.names):
        r = rolls.get(name, 0.0)
        if r == 0.0:
            continue
        ry = matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], r))
        rot[:, i] = quat_from_matrix(ry.T @ matrix_from_quat(clip.rotations[:, i]) @ ry)
        tr[:, i] = clip.translations[:, i] @ ry
    return Clip(clip.names, clip.times, clip.fps, rot, tr, clip.scales, clip.coverage, clip.name, clip.first_frame)


def rolled_skeleton(skeleton: Skeleton, rolls: dict[str, float]) -> Skeleton:
    """A copy of a Blender skeleton with each bone rolled by ``rolls`` radians about its Y."""
    rest = skeleton.rest_placements().copy()
    for i, name in enumerate(skeleton.names):
        r = rolls.get(name, 0.0)
        turn = np.eye(4)
        turn[:3, :3] = matrix_from_quat(quat_from_axis_angle([0.0, 1.0, 0.0], r))
        rest[i] = rest[i] @ turn
    return Skeleton.from_rest_matrices(skeleton.names, list(skeleton.parents), rest, skeleton.placement)


def bend_clip(skeleton: Skeleton, bends: dict[str, tuple[tuple[float, float, float], float]], frames: int = 5, travel: float = 0.0) -> Clip:
    """A clip that turns each named bone (local, about a skeleton-space axis given at rest) by an
    angle growing from 0 to the given radians; the root travels ``travel`` along +X."""
    n = len(skeleton)
    rot = np.zeros((frames, n, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((frames, n, 3))
    rest = skeleton.rest_placements()
    for name, (axis, angle) in bends.items():
        i = skeleton.index(name)
        local_axis = np.linalg.inv(rest[i][:3, :3]) @ np.asarray(axis, dtype=float)
        for f in range(frames):
            rot[f, i] = quat_from_axis_angle(local_axis, angle * f / max(frames - 1, 1))
    root = 0
    for f in range(frames):
        tr[f, root] = np.linalg.inv(rest[root][:3, :3]) @ np.array([travel * f / max(frames - 1, 1), 0.0, 0.0])
    return Clip(skeleton.names, np.arange(frames) / 24.0, 24.0, rot, tr, name="bend")


class ChainRig:
    """A rig built from ``(name, parent, head, tail)`` rows (parents first), facing +X with Z up;
    its skeleton rolled by ``rolls`` (radians per bone name) when given."""

    def __init__(self, rows: list[tuple[str, str | None, tuple[float, float, float], tuple[float, float, float]]],
                 rolls: dict[str, float] | None = None) -> None:
        self.names = [r[0] for r in rows]
        self.parents = np.array([-1 if r[1] is None else self.names.index(r[1]) for r in rows])
        self.heads = np.array([r[2] for r in rows], dtype=float)
        self.tails = np.array([r[3] for r in rows], dtype=float)
        rests = np.stack([bone_matrix(h, t, (rolls or {}).get(n, 0.0)) for n, h, t in zip(self.names, self.heads, self.tails, strict=True)])
        self.skeleton = Skeleton.from_rest_matrices(self.names, list(self.parents), rests)
        self.ends = self.tails[[self.names.index(n) for n in self.skeleton.names]]


def _limb(rows: list, name: str, parent: str, start: np.ndarray, steps: list[np.ndarray]) -> None:
    at, prev = np.asarray(start, dtype=float), parent
    for k, step in enumerate(steps):
        nxt = at + step
        rows.append((f"{name}{k}", prev, tuple(at), tuple(nxt)))
        at, prev = nxt, f"{name}{k}"


def bird(wing: float = 1.0, leg: float = 1.0, wing_bones: int = 3, leg_bones: int = 3) -> ChainRig:
    """A made-up bird: pelvis, a two-bone spine, a neck, a head, a tail, two wings of
    ``wing_bones`` bones spread sideways, two legs of ``leg_bones`` bones standing on the ground."""
    hip = np.array([0.0, 0.0, leg])
    rows: list = [("pelvis", None, tuple(hip), tuple(hip + [0.1, 0.0, 0.05]))]
    _limb(rows, "spine", "pelvis", hip, [np.array([0.25, 0.0, 0.1])] * 2)
    chest = hip + [0.5, 0.0, 0.2]
    _limb(rows, "neck", "spine1", chest, [np.array([0.1, 0.0, 0.2])])
    _limb(rows, "head", "neck0", chest + [0.1, 0.0, 0.2], [np.array([0.15, 0.0, 0.0])])
    _limb(rows, "tail", "pelvis", hip, [np.array([-0.2, 0.0, 0.0]), np.array([-0.2, 0.0, 0.02])])
    for side, y in (("L", 1.0), ("R", -1.0)):
        _limb(rows, f"wing.{side}.", "spine1", chest + [0.0, 0.1 * y, 0.0],
              [np.array([-0.05 * k, y * wing / wing_bones, 0.02]) for k in range(wing_bones)])
        start = hip + [0.0, 0.12 * y, -0.05]
        down = (start[2]) / leg_bones
        _limb(rows, f"leg.{side}.", "pelvis", start,
              [np.array([(0.06 if k % 2 else -0.06) * (k < leg_bones - 1) + (0.1 if k == leg_bones - 1 else 0.0), 0.0, -down]) for k in range(leg_bones)])
    return ChainRig(rows)


def bird_body(rig: ChainRig, wing_bones: int, leg_bones: int) -> dict:
    """The mapping file's description of :func:`bird`'s body."""
    chains = {"spine": {"start": "spine0", "end": "spine1"}, "neck": {"start": "neck0", "end": "neck0"},
              "head": {"start": "head0", "end": "head0"}, "tail": {"start": "tail0", "end": "tail1"}}
    for side in ("L", "R"):
        chains[f"wing.{side}"] = {"start": f"wing.{side}.0", "end": f"wing.{side}.{wing_bones - 1}"}
        chains[f"leg.{side}"] = {"start": f"leg.{side}.0", "end": f"leg.{side}.{leg_bones - 1}", "plants": True}
    return {"root": "pelvis", "head": "head", "chains": chains}


def spider(leg: float = 1.0, leg_bones: int = 3) -> ChainRig:
    """A made-up spider: a body bone, a head bone in front, eight legs of ``leg_bones`` bones
    rising out of the body and coming down to the ground."""
    top = np.array([0.0, 0.0, 0.4 * leg])
    rows: list = [("body", None, tuple(top), tuple(top + [0.3, 0.0, 0.0]))]
    _limb(rows, "head", "body", top + [0.3, 0.0, 0.0], [np.array([0.2, 0.0, 0.0])])
    for k, angle in enumerate(np.radians([30, 70, 110, 150])):
        for side, y in (("L", 1.0), ("R", -1.0)):
            out = np.array([np.cos(angle), y * np.sin(angle), 0.0])
            start = top + [0.15, 0.0, 0.0] + 0.1 * out
            first = out * 0.5 * leg + [0.0, 0.0, 0.2 * leg]
            rest = [(out * 0.5 * leg + [0.0, 0.0, -(0.6 * leg) / (leg_bones - 1)]) / 1.0 for _ in range(leg_bones - 1)]
            _limb(rows, f"leg{k}.{side}.", "body", start, [first, *rest])
    return ChainRig(rows)


def spider_body(leg_bones: int) -> dict:
    chains = {"head": {"start": "head0", "end": "head0"}}
    for k in range(4):
        for side in ("L", "R"):
            chains[f"leg{k}.{side}"] = {"start": f"leg{k}.{side}.0", "end": f"leg{k}.{side}.{leg_bones - 1}", "plants": True}
    return {"root": "body", "head": "head", "chains": chains}
