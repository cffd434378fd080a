"""Variants of one humanoid rig, built from its rest alone, for the rig mutation suite.

Each variant changes what a mapper must not depend on -- importer leaf bones, where the hierarchy
hangs the feet and hands, names, the object's placement, bone lengths, extra helper bones, the
facing -- and keeps what it must depend on: the body's joints. A :class:`RigSpec` is plain numpy
(names, parents, armature-space rest matrices, tails); the test builds it in Blender. Every variant
carries ``rename`` (original bone name -> its name in the variant) so that mappings compare slot by
slot, and ``turn`` (the rotation applied to the whole rest, armature space) so that poses compare
in the body's own frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from marionette.core.mapping.humanoid import SIDES


@dataclass(frozen=True)
class RigSpec:
    names: tuple[str, ...]
    parents: tuple[str | None, ...]
    rests: np.ndarray  # (B, 4, 4) armature-space rest matrices (Blender's matrix_local)
    tails: np.ndarray  # (B, 3) armature-space tails
    rename: dict[str, str] = field(default_factory=dict)  # original name -> name here
    turn: np.ndarray = field(default_factory=lambda: np.eye(3))  # rotation applied to the rest
    scale: float = 1.0  # armature-space scale applied to the rest
    placement: np.ndarray = field(default_factory=lambda: np.eye(4))  # object's matrix_world
    parent_placement: np.ndarray | None = None  # an Empty the object hangs from, if any
    rest_position: bool = False  # the armature shows its Rest Position, as a file saved so opens

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def heads(self) -> np.ndarray:
        return self.rests[:, :3, 3]

    def lengths(self) -> np.ndarray:
        return np.linalg.norm(self.tails - self.heads, axis=1)


def _with(spec: RigSpec, **kw) -> RigSpec:
    return replace(spec, **kw)


def _matrix(head, y_dir, z_hint) -> np.ndarray:
    y = np.asarray(y_dir, dtype=float)
    y = y / np.linalg.norm(y)
    z = np.asarray(z_hint, dtype=float) - (np.asarray(z_hint, dtype=float) @ y) * y
    if np.linalg.norm(z) < 1e-6:
        z = np.cross(y, [1.0, 0.0, 0.0]) if abs(y[0]) < 0.9 else np.cross(y, [0.0, 1.0, 0.0])
    z = z / np.linalg.norm(z)
    m = np.eye(4)
    m[:3, :3] = np.stack([np.cross(y, z), y, z], axis=-1)
    m[:3, 3] = head
    return m


def _add(spec: RigSpec, bones: list[tuple[str, str | None, np.ndarray, np.ndarray]]) -> RigSpec:
    """``bones``: (name, parent, rest matrix, tail)."""
    if not bones:
        return spec
    return _with(
        spec,
        names=spec.names + tuple(b[0] for b in bones),
        parents=spec.parents + tuple(b[1] for b in bones),
        rests=np.concatenate([spec.rests, np.stack([b[2] for b in bones])]),
        tails=np.concatenate([spec.tails, np.stack([b[3] for b in bones])]),
    )


def _drop(spec: RigSpec, gone: set[str]) -> RigSpec:
    keep = [i for i, n in enumerate(spec.names) if n not in gone]
    parents = []
    for i in keep:
        p = spec.parents[i]
        while p is not None and p in gone:
            p = spec.parents[spec.index(p)]
        parents.append(p)
    rename = {k: v for k, v in spec.rename.items() if v not in gone}
    return _with(
        spec,
        names=tuple(spec.names[i] for i in keep),
        parents=tuple(parents),
        rests=spec.rests[keep],
        tails=spec.tails[keep],
        rename=rename,
    )


def _size(spec: RigSpec) -> float:
    pts = np.concatenate([spec.heads, spec.tails])
    return float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0)))


def _up(spec: RigSpec, slots: dict[str, str]) -> np.ndarray:
    hips = spec.heads[spec.index(slots["hips"])]
    head = spec.heads[spec.index(slots["head"])]
    return (head - hips) / np.linalg.norm(head - hips)


# --- the variants ----------------------------------------------------------------------------


def is_end_marker(spec: RigSpec, i: int) -> bool:
    """An importer's end leaf: a leaf named ``*_end``."""
    children = {p for p in spec.parents if p is not None}
    return spec.names[i] not in children and spec.names[i].lower().endswith("_end")


def leaves_stripped(spec: RigSpec) -> RigSpec | None:
    gone = {spec.names[i] for i in range(len(spec.names)) if is_end_marker(spec, i)}
    return _drop(spec, gone) if gone else None


def leaves_added(spec: RigSpec) -> RigSpec:
    """An ``*_end`` leaf on every leaf, continuing it from its tail (as the FBX importer adds)."""
    children = {p for p in spec.parents if p is not None}
    added = []
    for i, n in enumerate(spec.names):
        if n in children or is_end_marker(spec, i):
            continue
        m = spec.rests[i].copy()
        vec = spec.tails[i] - spec.heads[i]
        m[:3, 3] = spec.tails[i]
        added.append((f"{n}_end", n, m, spec.tails[i] + vec))
    return _add(spec, added)


def ik_limbs(spec: RigSpec, slots: dict[str, str]) -> RigSpec:
    """Feet and hands hung from a new root bone on the floor, with IK targets and pole bones
    beside them (none deforming), as game rigs with IK controls are laid out."""
    up = _up(spec, slots)
    size = _size(spec)
    heads = spec.heads
    hips = heads[spec.index(slots["hips"])]
    lowest = min(float(h @ up) for h in heads)
    floor = hips + (lowest - float(hips @ up)) * up
    forward = np.cross(up, heads[spec.index(slots["thigh.L"])] - heads[spec.index(slots["thigh.R"])])
    forward /= np.linalg.norm(forward)
    root = "ik_root"
    new = [(root, None, _matrix(floor, forward, up), floor + 0.1 * size * forward)]
    parents = list(spec.parents)
    old_roots = [i for i, p in enumerate(parents) if p is None]
    for i in old_roots:
        parents[i] = root
    for limb, pole_side in (("foot", 1.0), ("hand", -1.0)):
        mid = "shin" if limb == "foot" else "forearm"
        for s in SIDES:
            b = spec.index(slots[f"{limb}.{s}"])
            parents[b] = root
            knee = heads[spec.index(slots[f"{mid}.{s}"])]
            pole = knee + pole_side * 0.3 * size * forward
            new.append((f"pole_{mid}.{s}", root, _matrix(pole, forward, up), pole + 0.05 * size * forward))
            target = spec.rests[b].copy()
            new.append((f"ik_{limb}.{s}", root, target, spec.tails[b] + 0.0))
    out = _with(spec, parents=tuple(parents))
    return _add(out, new)


def anonymous(spec: RigSpec) -> RigSpec:
    """Every bone renamed ``Bone``, ``Bone.001``, ... so that structure alone decides."""
    names = ["Bone" if k == 0 else f"Bone.{k:03d}" for k in range(len(spec.names))]
    return _renamed(spec, dict(zip(spec.names, names, strict=True)))


def convention(spec: RigSpec, slots: dict[str, str], preset: dict[str, str]) -> RigSpec:
    """Mapped bones named as ``preset`` names their slots; every other bone a neutral name."""
    by_bone = {b: s for s, b in slots.items()}
    names = {}
    used = set()
    for k, n in enumerate(spec.names):
        slot = by_bone.get(n)
        new = preset.get(slot) if slot is not None else None
        if new is None or new in used:
            new = f"extra_{k:03d}"
        used.add(new)
        names[n] = new
    return _renamed(spec, names)


def _renamed(spec: RigSpec, names: dict[str, str]) -> RigSpec:
    return _with(
        spec,
        names=tuple(names[n] for n in spec.names),
        parents=tuple(None if p is None else names[p] for p in spec.parents),
        rename={k: names[v] for k, v in spec.rename.items()},
    )


def scaled_under_rotated_parent(spec: RigSpec) -> RigSpec:
    """Bones a hundredth of their size, the object scaled x100 and hung from an Empty turned -90
    degrees about X and 30 about Z, far from the origin (a glTF exported in centimetres)."""
    s = 0.01
    rests = spec.rests.copy()
    rests[:, :3, 3] *= s
    tails = spec.tails * s
    place = np.diag([100.0, 100.0, 100.0, 1.0])
    place[:3, 3] = [3.0, -2.0, 0.5]
    ang_x, ang_z = np.radians(-90.0), np.radians(30.0)
    rx = np.array([[1, 0, 0], [0, np.cos(ang_x), -np.sin(ang_x)], [0, np.sin(ang_x), np.cos(ang_x)]])
    rz = np.array([[np.cos(ang_z), -np.sin(ang_z), 0], [np.sin(ang_z), np.cos(ang_z), 0], [0, 0, 1]])
    parent = np.eye(4)
    parent[:3, :3] = rz @ rx
    parent[:3, 3] = [-5.0, 7.0, 1.0]
    return _with(spec, rests=rests, tails=tails, scale=s, placement=place, parent_placement=parent)


def near_zero_lengths(spec: RigSpec) -> RigSpec:
    """Every bone 1/1000 of the rig's size long, pointing where it did (glTF joints: a bone's
    length and tail say nothing)."""
    tiny = 1e-3 * _size(spec)
    lengths = spec.lengths()
    direction = (spec.tails - spec.heads) / np.maximum(lengths, 1e-12)[:, None]
    return _with(spec, tails=spec.heads + tiny * direction)


def helper_bones(spec: RigSpec, slots: dict[str, str]) -> RigSpec:
    """Twist splits along the upper arms and thighs, corrective bones at knees and elbows, a
    sword in the right hand, a prop bone at the origin, a camera-like bone above the head, none
    with a telling name."""
    up = _up(spec, slots)
    size = _size(spec)
    new = []
    k = 0

    def name() -> str:
        nonlocal k
        k += 1
        return f"helper_{k:02d}"

    for s in SIDES:
        for limb in ("upper_arm", "thigh"):
            b = spec.index(slots[f"{limb}.{s}"])
            m = spec.rests[b].copy()
            mid = 0.5 * (spec.heads[b] + spec.tails[b])
            m[:3, 3] = mid
            new.append((name(), spec.names[b], m, spec.tails[b].copy()))
        for joint in ("shin", "forearm"):
            b = spec.index(slots[f"{joint}.{s}"])
            parent = spec.parents[b]
            head = spec.heads[b]
            new.append((name(), parent, _matrix(head, up, spec.tails[b] - head), head + 0.03 * size * up))
    hand = spec.index(slots["hand.R"])
    fore = spec.index(slots["forearm.R"])
    blade = spec.heads[hand] - spec.heads[fore]
    blade = blade / np.linalg.norm(blade)
    start = spec.heads[hand]
    new.append((name(), spec.names[hand], _matrix(start, blade, up), start + 0.6 * size * blade))
    new.append((name(), None, _matrix(np.zeros(3), up, [1.0, 0.0, 0.0]), 0.2 * size * up))
    top = spec.heads[spec.index(slots["head"])] + 0.3 * size * up
    new.append((name(), None, _matrix(top, -up, [1.0, 0.0, 0.0]), top - 0.05 * size * up))
    return _add(spec, new)


def turned(spec: RigSpec, degrees: float) -> RigSpec:
    """The whole rest turned about the armature's Z axis (the character faces elsewhere)."""
    a = np.radians(degrees)
    r = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    rests = spec.rests.copy()
    rests[:, :3, :3] = r @ rests[:, :3, :3]
    rests[:, :3, 3] = spec.heads @ r.T
    return _with(spec, rests=rests, tails=spec.tails @ r.T, turn=r @ spec.turn)


def in_rest_position(spec: RigSpec) -> RigSpec:
    """The armature left showing its Rest Position (``pose_position = "REST"``)."""
    return _with(spec, rest_position=True)


def facing_turn(forward: np.ndarray, wanted: np.ndarray) -> float:
    """Degrees about Z that turn ``forward`` (horizontal) onto ``wanted``."""
    a = np.arctan2(forward[1], forward[0])
    b = np.arctan2(wanted[1], wanted[0])
    return float(np.degrees(b - a))
