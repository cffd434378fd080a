"""Which way a body faces, inferred from joint positions (docs/pipeline.md#facing).

A skeleton carries no "forward". Up runs from the hips toward the neck/head; forward is a vote
between two cues that survive most rest poses:

* the foot -> toe direction (feet point forward), and
* the knee's displacement forward of the hip -> ankle line (a bent knee points forward, whatever
  the stance).

When the cues cancel (or there are none) the answer is *unknown*, never a normalised vector built
from noise; the caller then falls back to an explicit setting and says so.

Body axes follow Blender's right-handed convention: ``forward x left = up`` (a character facing
-Y with +Z up has its left along +X).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError
from ..rig.rotations import FloatArray

#: A cue whose horizontal part is shorter than this fraction of the leg carries no vote.
_KNEE_NOISE = 0.01
#: Below this total (in units of one fully confident cue) the vote is "unknown".
_MIN_VOTE = 0.35
#: Body axes within this many degrees of a skeleton axis are taken to be that axis.
_SNAP_DEG = 12.0


@dataclass(frozen=True)
class FacingCue:
    name: str
    direction: FloatArray  # unit horizontal direction the cue points to, or zeros
    strength: float  # 0 (no information) .. 1 (fully confident)
    agrees: bool | None = None  # whether it agrees with the outcome (None when unknown)


@dataclass(frozen=True)
class Facing:
    up: FloatArray
    forward: FloatArray | None
    cues: tuple[FacingCue, ...] = field(default=())
    #: "inferred" from the body, "fallback" from an explicit setting, or "unknown".
    source: str = "inferred"

    @property
    def known(self) -> bool:
        return self.forward is not None

    @property
    def left(self) -> FloatArray:
        if self.forward is None:
            raise RigError("the facing of this rig is unknown; set its forward axis explicitly")
        return np.cross(self.up, self.forward)

    def basis(self) -> FloatArray:
        """3x3 matrix whose columns are forward, left, up (world directions)."""
        if self.forward is None:
            raise RigError("the facing of this rig is unknown; set its forward axis explicitly")
        return np.stack([self.forward, self.left, self.up], axis=-1)

    def describe(self) -> dict[str, object]:
        return {
            "source": self.source,
            "up": [round(float(v), 4) for v in self.up],
            "forward": None if self.forward is None else [round(float(v), 4) for v in self.forward],
            "cues": [
                {
                    "name": c.name,
                    "direction": [round(float(v), 4) for v in c.direction],
                    "strength": round(c.strength, 3),
                    "agrees": c.agrees,
                }
                for c in self.cues
            ],
        }


def _unit(v: FloatArray) -> FloatArray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.zeros(3)


def _horizontal(v: FloatArray, up: FloatArray) -> FloatArray:
    return np.asarray(v - np.dot(v, up) * up, dtype=np.float64)


@dataclass(frozen=True)
class Leg:
    """Positions of one leg: hip joint (thigh head), knee (shin head), ankle (foot head) and the
    toe point (toes head, or the foot's end when there is no toe bone)."""

    hip: ArrayLike
    knee: ArrayLike
    ankle: ArrayLike
    toe: ArrayLike | None = None


def infer_facing(hips: ArrayLike, head: ArrayLike, legs: list[Leg]) -> Facing:
    """Infer up and forward from one pose's world positions.

    ``hips`` is the pelvis position, ``head`` the top of the axial column (neck or head); ``legs``
    usually holds both legs. Returns a :class:`Facing` whose ``forward`` is ``None`` when the cues
    cancel or are absent.
    """
    up = _unit(np.asarray(head, dtype=np.float64) - np.asarray(hips, dtype=np.float64))
    if not np.any(up):
        raise RigError("the hips and the head are at the same place; cannot tell which way is up")
    cues: list[FacingCue] = []
    for k, leg in enumerate(legs):
        side = f"leg {k + 1}"
        hip = np.asarray(leg.hip, dtype=np.float64)
        knee = np.asarray(leg.knee, dtype=np.float64)
        ankle = np.asarray(leg.ankle, dtype=np.float64)
        leg_len = float(np.linalg.norm(knee - hip) + np.linalg.norm(ankle - knee))
        if leg_len < 1e-9:
            continue
        if leg.toe is not None:
            toe_h = _horizontal(np.asarray(leg.toe, dtype=np.float64) - ankle, up)
            foot_len = float(np.linalg.norm(np.asarray(leg.toe, dtype=np.float64) - ankle))
            strength = float(np.linalg.norm(toe_h)) / foot_len if foot_len > 1e-9 else 0.0
            cues.append(FacingCue(f"{side}: foot to toe", _unit(toe_h), min(1.0, strength)))
        # Knee offset from the hip-ankle line, measured horizontally.
        axis = ankle - hip
        denom = float(np.dot(axis, axis))
        closest = hip + (float(np.dot(knee - hip, axis)) / denom) * axis if denom > 1e-18 else hip
        off_h = _horizontal(knee - closest, up)
        rel = float(np.linalg.norm(off_h)) / leg_len
        strength = 0.0 if rel < _KNEE_NOISE else min(1.0, rel / (4 * _KNEE_NOISE))
        cues.append(FacingCue(f"{side}: knee ahead of hip-ankle line", _unit(off_h) if strength else np.zeros(3), strength))

    up = snap_to_axis(up)
    vote = np.sum([c.direction * c.strength for c in cues], axis=0) if cues else np.zeros(3)
    vote = _horizontal(vote, up)
    total = float(np.linalg.norm(vote))
    if total < _MIN_VOTE:
        return Facing(up=up, forward=None, cues=tuple(cues), source="unknown")
    forward = snap_to_axis(vote / total)
    forward = _unit(_horizontal(forward, up))
    judged = tuple(
        FacingCue(c.name, c.direction, c.strength, None if c.strength == 0 else bool(np.dot(c.direction, forward) > 0))
        for c in cues
    )
    return Facing(up=up, forward=forward, cues=judged, source="inferred")


def snap_to_axis(v: FloatArray, tolerance_deg: float = _SNAP_DEG) -> FloatArray:
    """The nearest skeleton-space axis when ``v`` lies within ``tolerance_deg`` of it.

    Rigs are authored axis-aligned; a spine that leans a degree or two, or feet that splay, should
    not tilt the ground plane or turn the body frame. A body clearly between axes keeps its own.
    """
    k = int(np.argmax(np.abs(v)))
    axis = np.zeros(3)
    axis[k] = np.sign(v[k])
    return axis if float(np.dot(v, axis)) >= np.cos(np.radians(tolerance_deg)) else v


def facing_from_axes(up: ArrayLike, forward: ArrayLike, source: str = "fallback") -> Facing:
    """An explicit facing (the caller's fallback); ``forward`` is made perpendicular to ``up``."""
    u = _unit(np.asarray(up, dtype=np.float64))
    f = _unit(_horizontal(np.asarray(forward, dtype=np.float64), u))
    if not np.any(u) or not np.any(f):
        raise RigError("an explicit facing needs non-zero, non-parallel up and forward axes")
    return Facing(up=u, forward=f, cues=(), source=source)
