"""The rig as the control solve sees it, and a pose evaluator for the constraints it knows.

A :class:`RigGraph` holds, per bone (any order, parents listed by index): the parent, the rest
``matrix_local``, the pose Blender evaluates with every control at rest (``posed_rest``, the
rig's own switches set), the active constraints as :class:`Link` records, and what drives the
bone's channels. :class:`PoseModel` evaluates armature-space placements of any bone for all
frames at once, given local transforms of some bones, by the rules Blender applies for the
constraint kinds listed in :data:`MODELED` (docs/control_rigs.md#the-pose-model); a bone whose
placement needs anything else raises :class:`Unmodeled` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..rig.rotations import (
    FloatArray,
    invert_affine,
    matrix_from_quat,
    parts_from_transform,
    quat_between_vectors,
    quat_slerp,
)

#: Constraint kinds the model evaluates (Blender's type names).
MODELED = (
    "COPY_TRANSFORMS", "COPY_ROTATION", "COPY_LOCATION", "COPY_SCALE", "ARMATURE", "CHILD_OF", "DAMPED_TRACK", "STRETCH_TO", "LIMIT_DISTANCE",
)


#: Constraint kinds that change nothing the retarget keys (it keys no scale).
NEUTRAL = ("COPY_SCALE",)


class Unmodeled(Exception):
    """A bone's placement depends on something the model does not evaluate."""

    def __init__(self, bone: str, why: str) -> None:
        super().__init__(f"{bone!r}: {why}")
        self.bone = bone
        self.why = why


@dataclass(frozen=True)
class Link:
    """One active constraint of a bone, as Blender evaluated its settings.

    ``targets`` are ``(bone index, weight)`` pairs (index -1: a target that is not a bone of the
    rig); ``space`` is ``"WORLD"`` or ``"LOCAL"`` (owner and target spaces equal) or ``"OTHER"``;
    ``exact`` is False when the constraint uses options the model does not follow (an offset,
    inverted or unticked axes, a head/tail blend...). ``matrix`` is Child Of's inverse matrix.
    """

    kind: str
    name: str
    influence: float
    targets: tuple[tuple[int, float], ...] = ()
    space: str = "WORLD"
    mix: str = "REPLACE"
    exact: bool = True
    matrix: FloatArray | None = None
    #: Stretch To: ``(rest length, volume mode, bulge)``.
    stretch: tuple[float, str, float] | None = None

    def describe(self) -> str:
        return f"{self.kind.replace('_', ' ').title()} {self.name!r}"


@dataclass(frozen=True)
class RigGraph:
    names: tuple[str, ...]
    parents: NDArray[np.int64]  # (B,) int, -1 for none
    rest: FloatArray  # (B, 4, 4) armature-space rest (bone.matrix_local)
    posed_rest: FloatArray  # (B, 4, 4) the evaluated pose with every control at rest
    rest_basis: FloatArray  # (B, 4, 4) each bone's local transform in that pose (drivers included)
    links: tuple[tuple[Link, ...], ...]  # active constraints per bone, in stack order
    #: Per bone: ``None`` when no driver sets its transform channels, else ``(copy_of, reads,
    #: why)``: the bone whose same channels the drivers copy one to one (-1: they compute
    #: something else), the bones the drivers read, and a sentence saying what they set.
    drivers: tuple[tuple[int, tuple[int, ...], str] | None, ...]
    #: Bones an animator edits: a widget (custom shape) or no deform, no constraint, no driver.
    controls: NDArray[np.bool_]  # (B,) bool
    deform: NDArray[np.bool_]  # (B,) bool
    index: dict[str, int] = field(default_factory=dict)
    #: Per bone, Blender's Local Location (``None``: all on). Off, a bone's location channels
    #: are read along its parent's axes, not its own rest's.
    local_location: NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {n: i for i, n in enumerate(self.names)})

    def bone(self, name: str) -> int:
        return self.index[name]

    def channel_location(self, i: int, location: FloatArray) -> FloatArray:
        """The location channels that move bone ``i`` by ``location`` (``(F, 3)``, along its own
        rest axes): the same, or turned onto its parent's axes when Local Location is off."""
        if self.local_location is None or self.local_location[i]:
            return location
        p = int(self.parents[i])
        turn = (self.rest[i] if p < 0 else invert_affine(self.rest[p]) @ self.rest[i])[:3, :3]
        return np.asarray(location) @ turn.T


def copy_link(graph: RigGraph, i: int) -> Link | None:
    """The constraint through which bone ``i``'s placement follows one other bone's whole: its
    last full world-space Copy Transforms with nothing after it, or its only constraint when that
    is a full Child Of or an Armature constraint with one bone at full weight; else ``None``."""
    links = [k for k in graph.links[i] if k.kind not in NEUTRAL]
    if not links:
        return None
    last = links[-1]
    full = last.exact and last.influence >= 1.0 - 1e-9
    bones = [t for t, w in last.targets if w != 0.0]
    if not full or len(bones) != 1 or bones[0] < 0:
        return None
    if last.kind == "COPY_TRANSFORMS" and last.space == "WORLD" and last.mix == "REPLACE":
        return last
    if len(links) == 1 and last.kind == "CHILD_OF":
        return last
    if len(links) == 1 and last.kind == "ARMATURE" and last.targets[0][1] >= 1.0 - 1e-9:
        return last
    return None


def blend(a: FloatArray, b: FloatArray, w: float) -> FloatArray:
    """Blender's blend of two placements by a constraint's influence: locations and scales
    linearly, rotations by slerp."""
    if w >= 1.0 - 1e-9:
        return b
    if w <= 1e-9:
        return a
    qa, la, sa = parts_from_transform(a)
    qb, lb, sb = parts_from_transform(b)
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape))
    out[..., :3, :3] = matrix_from_quat(quat_slerp(qa, qb, w)) * ((1 - w) * sa + w * sb)[..., None, :]
    out[..., :3, 3] = (1 - w) * la + w * lb
    out[..., 3, 3] = 1.0
    return out


def _rotation_only(m: FloatArray) -> FloatArray:
    q, _, _ = parts_from_transform(m)
    return matrix_from_quat(q)


class PoseModel:
    """Armature-space placements ``(F, 4, 4)`` of a rig's bones over ``frames`` frames, given the
    local transforms of the bones in ``bases`` (others keep ``graph.rest_basis``)."""

    def __init__(self, graph: RigGraph, frames: int, bases: Mapping[int, FloatArray] | None = None) -> None:
        self.graph = graph
        self.frames = frames
        self.bases: dict[int, FloatArray] = dict(bases or {})
        self._memo: dict[int, FloatArray] = {}
        # Which evaluated bones used each bone (its placement or its local transform), so a new
        # local transform forgets only what depends on it.
        self._users: dict[int, set[int]] = {}
        self._evaluating: list[int] = []
        self._rest_rel: dict[int, FloatArray] = {}

    def _uses(self, j: int) -> None:
        if self._evaluating:
            self._users.setdefault(j, set()).add(self._evaluating[-1])

    def set_basis(self, i: int, basis: FloatArray) -> None:
        self.bases[i] = basis
        self._memo.pop(i, None)
        todo = [i]
        while todo:
            for k in self._users.pop(todo.pop(), ()):
                self._memo.pop(k, None)
                todo.append(k)

    def basis(self, i: int) -> FloatArray:
        g = self.graph
        self._uses(i)
        if i in self.bases:
            return self.bases[i]
        d = g.drivers[i]
        if d is not None:
            copy_of, reads, why = d
            for r in (copy_of, *reads):
                if r >= 0:
                    self._uses(r)
            if copy_of >= 0 and copy_of in self.bases:  # a copy of another bone's channels
                return self.bases[copy_of]
            if any(r in self.bases for r in reads):
                raise Unmodeled(g.names[i], f"{why} from bones that get keys")
        return np.broadcast_to(g.rest_basis[i], (self.frames, 4, 4))

    def attached(self, i: int) -> FloatArray:
        """Where the parent and the bone's own local transform put bone ``i``, before its constraints."""
        return self.frame(i) @ self.basis(i)

    def world(self, i: int) -> FloatArray:
        self._uses(i)
        got = self._memo.get(i)
        if got is None:
            self._evaluating.append(i)
            try:
                got = self._memo[i] = self._evaluate(i)
            finally:
                self._evaluating.pop()
        return got

    def _static(self, link: Link) -> bool:
        """Whether ``link`` does to its owner what it does at rest: a copy of scale (the retarget
        keys none), or a local-space copy from bones that keep their rest local transforms."""
        if link.kind == "COPY_SCALE":
            return True
        g = self.graph
        for t, _ in link.targets:
            if t >= 0:
                self._uses(t)
        return link.space == "LOCAL" and all(
            t >= 0 and t not in self.bases and not g.links[t] and g.drivers[t] is None for t, _ in link.targets
        )

    def _evaluate(self, i: int) -> FloatArray:
        g = self.graph
        links = g.links[i]
        if links and i not in self.bases and all(self._static(k) for k in links):
            # Constraints that act as at rest keep the bone where the rest pose has it, under its parent.
            p = int(g.parents[i])
            at_rest = g.posed_rest[i] if p < 0 else self.world(p) @ (invert_affine(g.posed_rest[p]) @ g.posed_rest[i])
            return np.broadcast_to(at_rest, (self.frames, 4, 4))
        # A full world-space Copy Transforms replaces everything before it, the parent too.
        start, m = 0, None
        for k, link in enumerate(links):
            if link.kind == "COPY_TRANSFORMS" and link.space == "WORLD" and link.mix == "REPLACE" and link.influence >= 1.0 - 1e-9:
                start = k
        if not any(
            link.kind == "COPY_TRANSFORMS" and link.space == "WORLD" and link.mix == "REPLACE" and link.influence >= 1.0 - 1e-9
            for link in links
        ):
            m = self.attached(i)
        for link in links[start:]:
            m = self._apply(i, link, m)
        assert m is not None
        return np.broadcast_to(m, (self.frames, 4, 4)) if m.ndim == 2 else m

    def frame(self, i: int) -> FloatArray:
        """Where bone ``i`` sits with an identity local transform, before its constraints."""
        g = self.graph
        p = int(g.parents[i])
        if p < 0:
            return g.rest[i]
        rel = self._rest_rel.get(i)
        if rel is None:
            rel = self._rest_rel[i] = invert_affine(g.rest[p]) @ g.rest[i]
        return self.world(p) @ rel

    def _target(self, i: int, link: Link) -> FloatArray:
        t = link.targets[0][0] if link.targets else -1
        if t < 0:
            raise Unmodeled(self.graph.names[i], f"{link.describe()} has a target that is not a bone of the rig")
        return self.world(t)

    def _apply(self, i: int, link: Link, m: FloatArray | None) -> FloatArray:
        g = self.graph
        name = g.names[i]
        if link.kind not in MODELED or not link.exact:
            raise Unmodeled(name, f"{link.describe()} (not followed by the solve)")
        if link.kind == "LIMIT_DISTANCE" and link.mix == "LIMITDIST_INSIDE":
            # Keeps a point within reach: the retarget keeps bone lengths, so what it places is in reach.
            assert m is not None
            return m
        if link.kind == "COPY_SCALE" and link.space == "WORLD":
            assert m is not None
            t = self._target(i, link)
            new = np.array(np.broadcast_to(m, np.broadcast_shapes(m.shape, t.shape)))
            new[..., :3, :3] = _rotation_only(new)[..., :3, :3] * np.linalg.norm(t[..., :3, :3], axis=-2)[..., None, :]
            return blend(m, new, link.influence)
        if link.kind == "COPY_TRANSFORMS" and link.space == "WORLD" and link.mix == "REPLACE":
            t = self._target(i, link)
            return t if m is None else blend(m, t, link.influence)
        assert m is not None
        if link.space == "LOCAL" and link.kind in ("COPY_TRANSFORMS", "COPY_ROTATION") and link.mix == "REPLACE":
            # Local to local: the owner's local transform takes the target's.
            src = link.targets[0][0] if link.targets else -1
            if src < 0:
                raise Unmodeled(name, f"{link.describe()} has a target that is not a bone of the rig")
            frame = self.frame(i)
            ours = invert_affine(frame) @ m
            theirs = invert_affine(self.frame(src)) @ self.world(src)
            if link.kind == "COPY_ROTATION":
                theirs_r = np.array(np.broadcast_to(ours, np.broadcast_shapes(ours.shape, theirs.shape)))
                theirs_r[..., :3, :3] = _rotation_only(theirs)[..., :3, :3]
                theirs = theirs_r
            return frame @ blend(ours, theirs, link.influence)
        if link.space != "WORLD":
            raise Unmodeled(name, f"{link.describe()} works in a space the solve does not follow")
        if link.kind == "COPY_ROTATION" and link.mix == "REPLACE":
            t = self._target(i, link)
            new = np.array(np.broadcast_to(m, np.broadcast_shapes(m.shape, t.shape)))
            scale = np.linalg.norm(new[..., :3, :3], axis=-2)
            new[..., :3, :3] = _rotation_only(t)[..., :3, :3] * scale[..., None, :]
            return blend(m, new, link.influence)
        if link.kind == "COPY_LOCATION":
            t = self._target(i, link)
            new = np.array(np.broadcast_to(m, np.broadcast_shapes(m.shape, t.shape)))
            new[..., :3, 3] = t[..., :3, 3]
            return blend(m, new, link.influence)
        if link.kind == "ARMATURE":
            total = np.zeros((self.frames, 4, 4))
            for bone, w in link.targets:
                if w == 0.0:
                    continue
                if bone < 0:
                    raise Unmodeled(name, f"{link.describe()} has a target that is not a bone of the rig")
                total = total + w * (self.world(bone) @ invert_affine(g.rest[bone]))
            return blend(m, total @ m, link.influence)
        if link.kind == "CHILD_OF":
            t = self._target(i, link)
            inverse = np.eye(4) if link.matrix is None else link.matrix
            return blend(m, t @ inverse @ m, link.influence)
        if link.kind == "DAMPED_TRACK":
            t = self._target(i, link)
            mm = np.array(np.broadcast_to(m, np.broadcast_shapes(m.shape, t.shape)))
            y = mm[..., :3, 1]
            to = t[..., :3, 3] - mm[..., :3, 3]
            turn = matrix_from_quat(quat_between_vectors(y, to))
            new = mm.copy()
            new[..., :3, :3] = turn @ mm[..., :3, :3]
            return blend(m, new, link.influence)
        if link.kind == "STRETCH_TO" and link.stretch is not None:
            # Blender's Stretch To with Swing Y: the least turn of Y onto the target's head, Y
            # scaled by distance over rest length, X and Z by the volume rule.
            t = self._target(i, link)
            mm = np.array(np.broadcast_to(m, np.broadcast_shapes(m.shape, t.shape)))
            size = np.linalg.norm(mm[..., :3, :3], axis=-2)
            unit = mm[..., :3, :3] / size[..., None, :]
            to = t[..., :3, 3] - mm[..., :3, 3]
            dist = np.linalg.norm(to, axis=-1)
            rest_length, volume, bulge_power = link.stretch
            sy = dist / rest_length
            bulge = (rest_length / np.maximum(dist, 1e-12)) ** bulge_power
            sx = {"VOLUME_XZX": np.sqrt(bulge), "VOLUME_X": bulge}.get(volume, np.ones_like(dist))
            sz = {"VOLUME_XZX": np.sqrt(bulge), "VOLUME_Z": bulge}.get(volume, np.ones_like(dist))
            turned = matrix_from_quat(quat_between_vectors(unit[..., :, 1], to)) @ unit
            new = mm.copy()
            new[..., :3, :3] = turned * (size * np.stack([sx, sy, sz], axis=-1))[..., None, :]
            return blend(m, new, link.influence)
        raise Unmodeled(name, f"{link.describe()} with mix mode {link.mix} (not followed by the solve)")
