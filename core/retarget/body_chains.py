"""A quadruped's body as the retarget reads it: body axes, chains as points, the canonical
standing pose and arc-length correspondence between chains (docs/pipeline.md#quadrupeds).

Everything here comes from rest positions and the mapping's chains (:mod:`..mapping.quadruped_profile`),
never from authored bone axes:

* **facing** of a horizontal body: up is the normal of the ground the four paws stand on (towards
  the body), forward runs from the pelvis to the head, left = up x forward;
* a **chain** is a polyline of points, each a bone's head or a bone-local point (the last bone's
  tail): a spine ends at the neck's first joint, a neck at the head's, every other chain at its
  last bone's tail;
* the **canonical standing pose**: spine, neck, head and jaw forward, tail backward, legs straight
  down, ears up; each bone's rest segment is turned onto its chain's canonical direction by the
  least rotation, and the canonical frame (X along the chain, Y the body's left) turned back by it
  is the bone's **geometric frame**, the same for two rigs of one shape whatever their rolls;
* chains of different segment counts are paired **by arc length**: a target bone spanning the
  fractions ``[a, b]`` of its chain's rest length takes the direction of the source chain's chord
  between the same fractions, so a 3-segment leg drives a 4-segment leg and a 12-bone tail
  follows a 5-bone one; chains of one count pair bone with bone (the elbow stays the elbow
  however the two rigs share the leg's length between their bones).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import MappingError, RigError
from ..mapping.quadruped_profile import LEG_CHAINS, QUADRUPED_MINIMUM, chain_slots
from ..rig.rotations import FloatArray, matrix_between_vectors
from ..rig.skeleton import Skeleton
from .facing import snap_to_axis

#: Canonical direction of each chain in body coordinates (forward, left, up).
CANONICAL = {
    "pelvis": (1.0, 0.0, 0.0),
    "spine": (1.0, 0.0, 0.0),
    "neck": (1.0, 0.0, 0.0),
    "head": (1.0, 0.0, 0.0),
    "jaw": (1.0, 0.0, 0.0),
    "tail": (-1.0, 0.0, 0.0),
    "front_leg.L": (0.0, 0.0, -1.0),
    "front_leg.R": (0.0, 0.0, -1.0),
    "hind_leg.L": (0.0, 0.0, -1.0),
    "hind_leg.R": (0.0, 0.0, -1.0),
    "ear.L": (0.0, 0.0, 1.0),
    "ear.R": (0.0, 0.0, 1.0),
}


def _unit(v: FloatArray) -> FloatArray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.zeros(3)


@dataclass(frozen=True)
class BodyAxes:
    """A horizontal body's axes in skeleton space, and how high its pelvis stands."""

    forward: FloatArray
    left: FloatArray
    up: FloatArray
    #: The pelvis head's height above the plane the paws stand on.
    height: float
    #: The point of that plane straight below the pelvis head.
    ground: FloatArray

    def basis(self) -> FloatArray:
        """3x3 matrix whose columns are forward, left, up."""
        return np.stack([self.forward, self.left, self.up], axis=-1)

    def describe(self) -> dict[str, object]:
        return {
            "forward": [round(float(v), 4) for v in self.forward],
            "up": [round(float(v), 4) for v in self.up],
            "hip_height": round(self.height, 6),
            "source": "inferred",
        }


@dataclass(frozen=True)
class ChainPoints:
    """A chain's points: point ``m`` is ``placement(bones[m]) @ offsets[m]`` (a head where the
    offset is zero), with the fractions of the chain's rest length each lies at."""

    bones: tuple[int, ...]  # the chain's own bones, from the body outwards
    point_bones: tuple[int, ...]
    offsets: FloatArray  # (M, 3) bone-local points
    fractions: FloatArray  # (M,) 0 .. 1

    def positions(self, lin: FloatArray, pos: FloatArray) -> FloatArray:
        """Points ``(T, M, 3)`` for linear parts ``(T, B, 3, 3)`` and positions ``(T, B, 3)``."""
        idx = list(self.point_bones)
        return pos[:, idx] + np.einsum("tmij,mj->tmi", lin[:, idx], self.offsets)


@dataclass(frozen=True)
class BodyPlan:
    """A body described as chains (docs/pipeline.md#other-bodies): its root bone, its chains
    (name -> bone names from the body outwards), the chains whose ends stand on the ground, and
    what tells forward: the ``head`` chain (forward runs from the root to its first joint) or an
    explicit skeleton-space ``forward``. ``follows`` ends a chain at another chain's first joint
    (a spine at the neck) instead of its last bone's tail. A quadruped's mapping is one plan
    (:func:`quadruped_plan`); a mapping file may describe any other."""

    root: str
    chains: dict[str, tuple[str, ...]]
    plants: tuple[str, ...]
    head: str | None = None
    forward: tuple[float, float, float] | None = None
    follows: dict[str, str] = field(default_factory=dict)
    #: ``"quadruped"`` for the profile's chains, ``"chains"`` for a body a mapping file describes.
    kind: str = "chains"

    def __post_init__(self) -> None:
        unknown = [c for c in (*self.plants, *([self.head] if self.head else [])) if c not in self.chains]
        if unknown:
            raise MappingError(f"the body names chains it does not describe: {', '.join(unknown)}")
        if not self.plants:
            raise MappingError("the body needs at least one chain that stands on the ground (\"plants\": true)")
        if self.head is None and self.forward is None:
            raise MappingError("the body needs a \"head\" chain or a \"forward\" axis to tell which way it faces")


def quadruped_plan(slots: dict[str, str]) -> BodyPlan:
    """The body plan of a quadruped mapping (slot -> bone name, :mod:`..mapping.quadruped_profile`)."""
    missing = [s for s in QUADRUPED_MINIMUM if s not in slots]
    if missing:
        raise MappingError(f"not a usable quadruped: no bone for {', '.join(missing)}")
    chains = {c: tuple(bones) for c, bones in chain_slots(slots).items() if c != "pelvis"}
    follows = {"spine": "neck" if "neck" in chains else "head"}
    if "neck" in chains:
        follows["neck"] = "head"
    return BodyPlan(slots["pelvis"], chains, tuple(c for c in LEG_CHAINS if c in chains), "head", None, follows, "quadruped")


def plan_of_description(body: dict[str, Any], skeleton: Skeleton) -> BodyPlan:
    """The body plan a mapping file describes (:mod:`..mapping.body_description`) on
    ``skeleton``: each chain the bones from its start down to its end. A bone not in the rig, or
    an end that does not hang below its start, is refused naming the chain."""

    def index(name: str, what: str) -> int:
        i = skeleton.find(name)
        if i is None:
            raise MappingError(f"the body's {what} names bone {name!r}, which is not in the rig")
        return i

    index(body["root"], "root")
    chains: dict[str, tuple[str, ...]] = {}
    for name, chain in body["chains"].items():
        start, end = index(chain["start"], f"chain {name!r}"), index(chain["end"], f"chain {name!r}")
        path = [end]
        while path[-1] != start:
            p = int(skeleton.parents[path[-1]])
            if p < 0:
                raise MappingError(f"body chain {name!r}: {chain['end']!r} does not hang below {chain['start']!r}")
            path.append(p)
        chains[name] = tuple(skeleton.names[i] for i in reversed(path))
    forward = None if body["forward"] is None else (float(body["forward"][0]), float(body["forward"][1]), float(body["forward"][2]))
    plants = tuple(n for n, c in body["chains"].items() if c["plants"])
    return BodyPlan(body["root"], chains, plants, body["head"], forward)


@dataclass(frozen=True)
class ChainBody:
    """One rig read as chains: its skeleton, chains (name -> bone indices), chain points, body
    axes, rest placements, its root (``pelvis``) and the first bone of its head chain (-1 without)."""

    skeleton: Skeleton
    chains: dict[str, tuple[int, ...]]
    points: dict[str, ChainPoints]
    axes: BodyAxes
    rest: FloatArray  # (B, 4, 4)
    pelvis: int
    head: int
    plants: tuple[str, ...] = ()
    kind: str = "chains"

    @property
    def hip_height(self) -> float:
        return self.axes.height


def read_body(skeleton: Skeleton, plan: BodyPlan | dict[str, str], ends: ArrayLike | None = None) -> ChainBody:
    """``skeleton`` read as the chains of ``plan`` (or of a quadruped mapping, slot -> bone
    name), with rest tails ``ends`` (skeleton order; without them a bone ends at its first
    child's head)."""
    if not isinstance(plan, BodyPlan):
        plan = quadruped_plan(plan)
    rest = skeleton.rest_placements()
    heads = rest[:, :3, 3]
    if ends is None:
        tails = heads.copy()
        for i, p in enumerate(skeleton.parents):
            if p >= 0 and np.allclose(tails[p], heads[p]):
                tails[p] = heads[i]
    else:
        tails = np.asarray(ends, dtype=np.float64)

    def index(name: str) -> int:
        i = skeleton.find(name)
        if i is None:
            raise MappingError(f"the body names bone {name!r}, which is not in the rig")
        return i

    chains = {c: tuple(index(b) for b in bones) for c, bones in plan.chains.items() if bones}
    points: dict[str, ChainPoints] = {}
    for c, bones in chains.items():
        follow = chains.get(plan.follows[c]) if c in plan.follows else None
        pts: list[tuple[int, FloatArray]] = [(b, np.zeros(3)) for b in bones]
        if follow is not None:
            pts.append((follow[0], np.zeros(3)))
        else:
            last = bones[-1]
            pts.append((last, (np.linalg.inv(rest[last]) @ np.append(tails[last], 1.0))[:3]))
        at = np.stack([(rest[b] @ np.append(off, 1.0))[:3] for b, off in pts])
        steps = np.linalg.norm(np.diff(at, axis=0), axis=1)
        if steps.sum() <= 1e-9:
            raise RigError(f"the {c} chain of the rig has no length")
        frac = np.concatenate([[0.0], np.cumsum(steps) / steps.sum()])
        points[c] = ChainPoints(bones, tuple(b for b, _ in pts), np.stack([o for _, o in pts]), frac)
    pelvis = index(plan.root)
    head = chains[plan.head][0] if plan.head is not None and plan.head in chains else -1
    axes = _body_axes(plan, rest, points, pelvis, head)
    return ChainBody(skeleton, chains, points, axes, rest, pelvis, head, tuple(c for c in plan.plants if c in points), plan.kind)


def _body_axes(plan: BodyPlan, rest: FloatArray, points: dict[str, ChainPoints], pelvis: int, head: int) -> BodyAxes:
    """Up away from the ground the planted chains' ends stand on (the normal of the plane they
    span, with three or more not in a line; else from their ends up to their roots), forward from
    the root to the head (or the plan's own axis), both snapped to a skeleton axis within 12°."""
    heads = rest[:, :3, 3]
    tips = np.stack([(rest[points[c].point_bones[-1]] @ np.append(points[c].offsets[-1], 1.0))[:3] for c in plan.plants])
    roots = np.stack([heads[points[c].bones[0]] for c in plan.plants])
    normal = np.zeros(3)
    if len(tips) >= 3:
        sv = np.linalg.svd(tips - tips.mean(axis=0))
        if sv[1][1] > 0.05 * max(sv[1][0], 1e-12):  # the ends span a plane, not a line
            normal = sv[2][-1]
    if not normal.any():
        normal = _unit((roots - tips).mean(axis=0))
    if normal @ (heads[pelvis] - tips.mean(axis=0)) < 0:
        normal = -normal
    if not normal.any():
        raise RigError("cannot tell which way is up: the chains on the ground end where they start")
    # Axes within a few degrees of a skeleton axis are that axis (paws resting a little unevenly).
    up = snap_to_axis(_unit(normal))
    run = np.asarray(plan.forward, dtype=np.float64) if head < 0 else heads[head] - heads[pelvis]
    forward = _unit(run - (run @ up) * up)
    if not forward.any():
        raise RigError("cannot tell which way the body faces: its head stands straight above its root")
    forward = snap_to_axis(forward)
    forward = _unit(forward - (forward @ up) * up)
    height = float((heads[pelvis] - tips.mean(axis=0)) @ up)
    return BodyAxes(forward, np.cross(up, forward), up, height, heads[pelvis] - height * up)


def canonical_direction(source: ChainBody, target: ChainBody, chain: str) -> FloatArray:
    """The canonical direction of ``chain`` in body coordinates (forward, left, up): the
    quadruped profile's (:data:`CANONICAL`), else the mean of both rigs' rest directions of the
    chain (its first point to its last), so both rigs share it."""
    if chain in CANONICAL:
        return np.asarray(CANONICAL[chain], dtype=np.float64)
    both = [b.axes.basis().T @ _unit(rest_points(b, chain)[-1] - rest_points(b, chain)[0]) for b in (source, target)]
    mean = _unit(both[0] + both[1])
    return mean if mean.any() else both[1]


def canonical_frame(body: ChainBody, chain: str, direction: FloatArray, canonical: FloatArray | None = None) -> FloatArray:
    """The geometric frame (columns X, Y, Z) of a segment of ``chain`` running along ``direction``
    at rest: the canonical frame (X the chain's canonical direction, body coordinates
    ``canonical`` or the profile's; Y the body's left) turned by the least rotation taking the
    canonical direction onto ``direction``."""
    c = body.axes.basis() @ (np.asarray(CANONICAL[chain]) if canonical is None else canonical)
    left = body.axes.left - (body.axes.left @ c) * c
    if np.linalg.norm(left) < 1e-6:
        left = body.axes.forward - (body.axes.forward @ c) * c
    y = _unit(left)
    frame = np.stack([c, y, np.cross(c, y)], axis=-1)
    return np.asarray(matrix_between_vectors(c, _unit(direction)) @ frame, dtype=np.float64)


def arc_chord(fractions: FloatArray, a: float, b: float) -> tuple[FloatArray, int]:
    """Coefficients ``(M,)`` over a chain's points giving the chord between the arc fractions
    ``a`` and ``b``, and the segment holding the chord's middle (the bone that carries its turn)."""
    coef = np.zeros(fractions.size)
    for f, sign in ((b, 1.0), (a, -1.0)):
        j = int(np.clip(np.searchsorted(fractions, f, side="right") - 1, 0, fractions.size - 2))
        span = fractions[j + 1] - fractions[j]
        w = 0.0 if span <= 0 else float(np.clip((f - fractions[j]) / span, 0.0, 1.0))
        coef[j] += sign * (1.0 - w)
        coef[j + 1] += sign * w
    mid = (a + b) / 2
    seg = int(np.clip(np.searchsorted(fractions, mid, side="right") - 1, 0, fractions.size - 2))
    return coef, seg


def rest_points(body: ChainBody, chain: str) -> FloatArray:
    """The chain's points at rest ``(M, 3)``."""
    lin = body.rest[None, :, :3, :3]
    return body.points[chain].positions(lin, body.rest[None, :, :3, 3])[0]
