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

from dataclasses import dataclass

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
class QuadrupedBody:
    """One rig read as a quadruped: its skeleton, chains (name -> bone indices), chain points,
    body axes, rest placements and every bone's geometric frame at rest (``(3, 3)`` columns X, Y, Z)."""

    skeleton: Skeleton
    chains: dict[str, tuple[int, ...]]
    points: dict[str, ChainPoints]
    axes: BodyAxes
    rest: FloatArray  # (B, 4, 4)
    pelvis: int
    head: int

    @property
    def hip_height(self) -> float:
        return self.axes.height


def read_body(skeleton: Skeleton, slots: dict[str, str], ends: ArrayLike | None = None) -> QuadrupedBody:
    """``skeleton`` read as a quadruped from its mapping ``slots`` (slot -> bone name) and rest
    tails ``ends`` (skeleton order; without them a bone ends at its first child's head)."""
    missing = [s for s in QUADRUPED_MINIMUM if s not in slots]
    if missing:
        raise MappingError(f"not a usable quadruped: no bone for {', '.join(missing)}")
    rest = skeleton.rest_placements()
    heads = rest[:, :3, 3]
    if ends is None:
        tails = heads.copy()
        for i, p in enumerate(skeleton.parents):
            if p >= 0 and np.allclose(tails[p], heads[p]):
                tails[p] = heads[i]
    else:
        tails = np.asarray(ends, dtype=np.float64)
    chains = {c: tuple(skeleton.index(b) for b in bones) for c, bones in chain_slots(slots).items()}
    points: dict[str, ChainPoints] = {}
    for c, bones in chains.items():
        if c == "pelvis":
            continue
        follow = chains.get("neck", chains["head"]) if c == "spine" else chains["head"] if c == "neck" else None
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
    pelvis, head = chains["pelvis"][0], chains["head"][0]
    # Up: the normal of the plane the paws stand on, towards the body; forward: pelvis to head.
    tips = np.stack([(rest[points[c].point_bones[-1]] @ np.append(points[c].offsets[-1], 1.0))[:3] for c in LEG_CHAINS])
    normal = np.linalg.svd(tips - tips.mean(axis=0))[2][-1]
    if normal @ (heads[pelvis] - tips.mean(axis=0)) < 0:
        normal = -normal
    # Axes within a few degrees of a skeleton axis are that axis (paws resting a little unevenly).
    up = snap_to_axis(_unit(normal))
    run = heads[head] - heads[pelvis]
    forward = _unit(run - (run @ up) * up)
    if not forward.any():
        raise RigError("cannot tell which way the quadruped faces: its head stands straight above its pelvis")
    forward = snap_to_axis(forward)
    forward = _unit(forward - (forward @ up) * up)
    height = float((heads[pelvis] - tips.mean(axis=0)) @ up)
    axes = BodyAxes(forward, np.cross(up, forward), up, height, heads[pelvis] - height * up)
    return QuadrupedBody(skeleton, chains, points, axes, rest, pelvis, head)


def canonical_frame(body: QuadrupedBody, chain: str, direction: FloatArray) -> FloatArray:
    """The geometric frame (columns X, Y, Z) of a segment of ``chain`` running along ``direction``
    at rest: the canonical frame (X the chain's canonical direction, Y the body's left) turned by
    the least rotation taking the canonical direction onto ``direction``."""
    c = body.axes.basis() @ np.asarray(CANONICAL[chain.split(".")[0] if chain not in CANONICAL else chain])
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


def rest_points(body: QuadrupedBody, chain: str) -> FloatArray:
    """The chain's points at rest ``(M, 3)``."""
    lin = body.rest[None, :, :3, :3]
    return body.points[chain].positions(lin, body.rest[None, :, :3, 3])[0]
