"""Which controls are keyed from which bones, and the solve from the retarget's bone placements
to the controls' local transforms (docs/control_rigs.md#the-solve).

A :class:`ControlPlan` lists steps in order; each gives one control a wanted armature-space
placement, for all frames at once:

* :class:`Match`: the control keeps the offset it has from a bone in the rig's evaluated rest,
  so that bone lands where the retarget puts it (a copy, a Child Of, an FK control).
* :class:`Copy`: drivers copy the control's channels onto a bone; the control gets the bone's.
* :class:`Aim`: the control stays where its parent puts it and turns so a point it carries (the
  head of ``point`` at rest) lands on ``point``'s head, rolled as ``roll`` (a spine of FK controls
  fanning out from a pivot, a neck that stretches to the head).

:func:`solve` turns each wanted placement into the control's local transform under the placement
its parent has by then (:class:`~.graph.PoseModel`: the controls solved before it, the rig's
constraints), parents first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..rig.clip import Clip
from ..rig.rotations import (
    FloatArray,
    invert_affine,
    make_quat_continuous,
    matrix_from_quat,
    parts_from_transform,
    quat_between_vectors,
)
from ..rig.skeleton import Skeleton
from .graph import PoseModel, RigGraph, copy_link


@dataclass(frozen=True)
class Match:
    control: str
    bone: str
    #: Only the control's rotation: it stays where its parent puts it (a toe IK control hangs
    #: from the foot roll, which places it).
    turn_only: bool = False


@dataclass(frozen=True)
class Pole:
    """An IK chain's pole target: placed in the plane of ``root``, ``middle`` and ``end`` on the
    side the middle bends to, as far from the middle joint as at rest (carried by ``root`` as at
    rest where the chain is straight); its rotation stays the parent's."""

    control: str
    root: str
    middle: str
    end: str


@dataclass(frozen=True)
class Follow:
    """``bone`` follows ``control`` through the bones ``hops`` (the last is the control), each
    copying the next through a Copy Transforms, a Child Of or a one-bone Armature constraint
    (:func:`~.graph.copy_link`): each relation is turned back, from ``bone``'s wanted placement to
    the control's."""

    control: str
    bone: str
    hops: tuple[str, ...]


@dataclass(frozen=True)
class Copy:
    """Drivers copy ``control``'s channels onto ``bone``: the control gets the local transform
    that puts ``bone`` where the retarget wants it."""

    control: str
    bone: str


@dataclass(frozen=True)
class Aim:
    control: str
    point: str
    roll: str


Step = Match | Follow | Copy | Aim | Pole


@dataclass(frozen=True)
class ControlPlan:
    """How a control rig is keyed: a readable ``name`` ("Rigify, FK"), the steps in order, the
    rig's switches as ``(bone, property, value)`` keyed over the clip, and the control that carries
    root motion on its own (``root``)."""

    name: str
    steps: tuple[Step, ...]
    switches: tuple[tuple[str, str, float], ...] = ()
    root: str | None = None
    #: Bones no step reads that the plan still plays where the retarget puts them (an IK chain's
    #: middle bones): mapped, and checked on what Blender plays.
    checked: tuple[str, ...] = ()

    @property
    def controls(self) -> tuple[str, ...]:
        """The controls the steps key, in order (the root control, keyed only when it carries
        root motion, is :attr:`root`)."""
        return tuple(s.control for s in self.steps)

    def keyed(self, travel_on_root: bool) -> tuple[str, ...]:
        """Every control keyed: the root control first when it carries root motion."""
        return ((self.root,) if self.root and travel_on_root else ()) + self.controls

    @property
    def reference_bones(self) -> tuple[str, ...]:
        """Bones whose retargeted placement the steps read."""
        out: list[str] = []
        for s in self.steps:
            if isinstance(s, Aim):
                out += [s.point, s.roll]
            elif isinstance(s, Pole):
                out += [s.root, s.middle, s.end]
            else:
                out += [s.bone]
        return tuple(dict.fromkeys(out))

    @property
    def played_bones(self) -> tuple[str, ...]:
        """Bones the plan plays where the retarget puts them: those it reads, and ``checked``."""
        return tuple(dict.fromkeys(self.reference_bones + self.checked))


def _local(model: PoseModel, c: int, wanted: FloatArray) -> FloatArray:
    """The local transform that puts control ``c`` at ``wanted`` under its parent's placement."""
    return invert_affine(model.frame(c)) @ wanted


def solve(
    plan: ControlPlan,
    graph: RigGraph,
    placements: Mapping[str, FloatArray],
    travel: FloatArray | None = None,
) -> dict[str, FloatArray]:
    """Local transforms ``(F, 4, 4)`` of every keyed control, from the retargeted armature-space
    ``placements`` ``(F, 4, 4)`` of the plan's reference bones. ``travel`` ``(F, 3)`` is the root
    motion the plan's root control carries (when the user's root motion option puts it on a root
    bone): the root control moves by it and every other control is solved under it."""
    frames = next(iter(placements.values())).shape[0]
    model = PoseModel(graph, frames)
    E = graph.posed_rest
    out: dict[str, FloatArray] = {}
    if plan.root is not None and travel is not None:
        r = graph.bone(plan.root)
        wanted = np.broadcast_to(E[r], (frames, 4, 4)).copy()
        wanted[:, :3, 3] += np.asarray(travel, dtype=np.float64)
        out[plan.root] = _local(model, r, wanted)
        model.set_basis(r, out[plan.root])
    for step in plan.steps:
        c = graph.bone(step.control)
        if isinstance(step, Copy):
            local = invert_affine(model.frame(graph.bone(step.bone))) @ placements[step.bone]
            out[step.control] = local
            model.set_basis(c, local)
            continue
        if isinstance(step, Match):
            b = graph.bone(step.bone)
            wanted = placements[step.bone] @ (invert_affine(E[b]) @ E[c])
            if step.turn_only:
                model.set_basis(c, np.broadcast_to(np.eye(4), (frames, 4, 4)))
                wanted = wanted.copy()
                wanted[:, :3, 3] = model.world(c)[:, :3, 3]
        elif isinstance(step, Follow):
            wanted = _followed(model, graph, placements[step.bone], (step.bone, *step.hops))
        elif isinstance(step, Pole):
            model.set_basis(c, np.broadcast_to(np.eye(4), (frames, 4, 4)))
            wanted = np.array(model.world(c))
            wanted[:, :3, 3] = _pole_position(graph, placements, step)
        else:
            model.set_basis(c, np.broadcast_to(np.eye(4), (frames, 4, 4)))
            here = model.world(c)
            r = graph.bone(step.roll)
            rolled = placements[step.roll] @ (invert_affine(E[r]) @ E[c])
            p = graph.bone(step.point)
            carried = (invert_affine(E[c]) @ E[p])[:3, 3]  # the point in the control's rest frame
            now = np.einsum("fij,j->fi", rolled[:, :3, :3], carried)
            to = placements[step.point][:, :3, 3] - here[:, :3, 3]
            turn = matrix_from_quat(quat_between_vectors(now, to))
            wanted = np.zeros((frames, 4, 4))
            wanted[:, :3, :3] = turn @ rolled[:, :3, :3]
            wanted[:, :3, 3] = here[:, :3, 3]
            wanted[:, 3, 3] = 1.0
        local = _local(model, c, wanted)
        out[step.control] = local
        model.set_basis(c, local)
    return out


def _followed(model: PoseModel, graph: RigGraph, wanted: FloatArray, chain: tuple[str, ...]) -> FloatArray:
    """The placement of ``chain[-1]`` that puts ``chain[0]`` at ``wanted``, each bone of the chain
    copying the next (:func:`~.graph.copy_link`)."""
    for here, there in zip(chain[:-1], chain[1:], strict=True):
        x = graph.bone(here)
        link = copy_link(graph, x)
        if link is None or link.kind == "COPY_TRANSFORMS":
            continue  # a copy: the same placement
        before = model.attached(x)
        if link.kind == "CHILD_OF":
            inverse = np.eye(4) if link.matrix is None else link.matrix
            wanted = wanted @ invert_affine(before) @ invert_affine(inverse)
        else:  # a one-bone Armature constraint
            wanted = wanted @ invert_affine(before) @ graph.rest[graph.bone(there)]
    return wanted


def _pole_position(graph: RigGraph, placements: Mapping[str, FloatArray], step: Pole) -> FloatArray:
    E = graph.posed_rest
    root, middle, end = (placements[b][:, :3, 3] for b in (step.root, step.middle, step.end))
    c, m = graph.bone(step.control), graph.bone(step.middle)
    reach = float(np.linalg.norm(E[c][:3, 3] - E[m][:3, 3]))
    axis = end - root
    closest = root + (np.sum((middle - root) * axis, -1) / np.maximum(np.sum(axis * axis, -1), 1e-12))[:, None] * axis
    out = middle - closest
    size = np.linalg.norm(out, axis=-1)
    r = graph.bone(step.root)
    carried = (placements[step.root] @ (invert_affine(E[r]) @ E[c]))[:, :3, 3]
    bent = size > 1e-4 * np.linalg.norm(axis, axis=-1)
    return np.where(bent[:, None], middle + out / np.maximum(size, 1e-12)[:, None] * reach, carried)


def as_parts(locals_: Mapping[str, FloatArray]) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Each control's local transforms as ``(quaternions (F, 4), locations (F, 3))``; scale is
    dropped (the solve keys none; it stays one up to rounding)."""
    out = {}
    for name, m in locals_.items():
        q, loc, _ = parts_from_transform(m)
        out[name] = (q, loc)
    return out


def wanted_placements(
    plan: ControlPlan, graph: RigGraph, skeleton: Skeleton, clip: Clip, anchors: Mapping[str, str] | None = None
) -> dict[str, FloatArray]:
    """Armature-space placements ``(F, 4, 4)`` of the plan's reference bones in the retargeted
    ``clip`` (on ``skeleton``, the whole target armature).

    ``anchors`` (bone -> the bone of its body parent, parents first) puts each such bone's head
    where its body parent carries it at rest: a mapped bone that hangs in the armature from a
    bone the retarget does not move (Rigify's neck hangs from the FK spine) is placed on the body,
    not where that bone left it."""
    # Only the bones read and their ancestors, bone-major (Skeleton.bone_placements).
    wanted = {skeleton.index(b) for b in plan.played_bones}
    closed = sorted(wanted.union(*(skeleton.ancestors(i) for i in wanted)))
    scales = None if clip.scales is None else np.swapaxes(clip.scales[:, closed], 0, 1)
    lin, pos = skeleton.bone_placements(
        closed, np.swapaxes(clip.rotations[:, closed], 0, 1), np.swapaxes(clip.translations[:, closed], 0, 1), scales
    )
    row = {b: r for r, b in enumerate(closed)}
    placements: dict[str, FloatArray] = {}
    for name in plan.played_bones:
        m = np.zeros((clip.frame_count, 4, 4))
        m[:, :3, :3] = lin[row[skeleton.index(name)]]
        m[:, :3, 3] = pos[row[skeleton.index(name)]]
        m[:, 3, 3] = 1.0
        placements[name] = m
    rest = graph.rest
    for bone, parent in (anchors or {}).items():
        if bone in placements and parent in placements:
            carried = placements[parent] @ (invert_affine(rest[graph.bone(parent)]) @ rest[graph.bone(bone)])
            placements[bone] = placements[bone].copy()
            placements[bone][:, :3, 3] = carried[:, :3, 3]
    # The retarget moves bones from their rests; Blender plays them from the pose the rig's own
    # constraints give them with every control at rest (a bone that copies a rolled control has
    # that control's roll): each placement is moved onto that pose.
    E = graph.posed_rest
    for bone in placements:
        k = graph.bone(bone)
        placements[bone] = placements[bone] @ (invert_affine(rest[k]) @ E[k])
    return placements


def control_clip(
    plan: ControlPlan, graph: RigGraph, placements: Mapping[str, FloatArray], clip: Clip, travel: FloatArray | None = None
) -> Clip:
    """The plan's controls keyed from ``placements`` (:func:`wanted_placements` of ``clip``) as a
    clip: their local transforms (rotation and location; no scale) on ``clip``'s timing."""
    parts = as_parts(solve(plan, graph, placements, travel))
    names = list(parts)
    rot = np.stack([parts[n][0] for n in names], axis=1)
    loc = np.stack([graph.channel_location(graph.bone(n), parts[n][1]) for n in names], axis=1)
    return Clip(tuple(names), clip.times, clip.fps, make_quat_continuous(rot, axis=0), loc, name=clip.name, first_frame=clip.first_frame)
