"""Joint limits on local rotations: cones, hinges and per-axis Euler boxes.

A limit constrains the rotation ``R`` of a joint's local transform ``T = Tr @ R @ S``
(:mod:`core.rig.skeleton`), that is, the rotation in the joint's attachment frame. For a Blender bone
this is the pose rotation relative to rest, the rotation Blender's own limit constraints act on.
Axes are given in that frame, angles in radians, quaternions follow :mod:`core.rig.rotations`
(w-first Hamilton, active, column vectors).

Every limit offers three operations, all batched over any leading shape:

* ``violation(q)``: how far ``q`` lies outside the limit, in radians (0 inside);
* ``project(q)``: a rotation inside the limit close to ``q``; ``q`` itself, bit for bit, when it is
  already inside (a pose that satisfies its limits is never touched);
* ``step_toward(q, direction, goal)``: the rotation inside the limit that best turns ``direction``
  (given in the joint's rotation-input space) toward ``goal`` (rotation-output space), starting from
  ``q``; this is what a CCD pass calls at a limited joint.

Angle ranges are closed intervals on the circle; a value outside one is moved to the nearer end
measured around the circle (a hinge at -170 degrees with range [0, 150] goes to 150, not 0).
Projecting onto an Euler box clamps each angle of the better of the two equivalent Euler triples;
it is not the nearest rotation inside the box in general, which is why solvers re-solve after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..rig.rotations import (
    EULER_ORDERS,
    FloatArray,
    euler_from_quat,
    quat_angle_between,
    quat_apply,
    quat_between_vectors,
    quat_from_axis_angle,
    quat_from_euler,
    quat_multiply,
    quat_normalize,
    swing_twist,
)

_TWO_PI = 2.0 * math.pi
BoolArray = NDArray[np.bool_]
# Below this a projected direction has no usable angle about the hinge axis.
_EPS = 1e-12


def wrap_angle(angle: ArrayLike) -> FloatArray:
    """Angles wrapped into ``(-pi, pi]``."""
    a = np.asarray(angle, dtype=np.float64)
    w = np.mod(a + math.pi, _TWO_PI) - math.pi
    # mod maps +pi to -pi; keep +pi so a range ending at pi contains it. Angles already in range
    # come back untouched (the round trip through mod would cost them an ulp).
    w = np.where(w <= -math.pi, math.pi, w)
    out: FloatArray = np.where((a > -math.pi) & (a <= math.pi), a, w)
    return out


def _outside_distance(angle: FloatArray, lo: float | FloatArray, hi: float | FloatArray) -> FloatArray:
    """Circular distance from ``angle`` to the interval ``[lo, hi]`` (``-pi <= lo <= hi <= pi``;
    0 inside)."""
    a = wrap_angle(angle)
    inside = (a >= lo) & (a <= hi)
    to_ends = np.minimum(np.abs(wrap_angle(a - np.asarray(lo))), np.abs(wrap_angle(a - np.asarray(hi))))
    out: FloatArray = np.where(inside, 0.0, to_ends)
    return out


def clamp_angle(angle: ArrayLike, lo: float | FloatArray, hi: float | FloatArray) -> FloatArray:
    """Clamp angles into ``[lo, hi]`` (``-pi <= lo <= hi <= pi``) along the circle: an angle
    outside goes to the nearer end, measured around the circle."""
    a = wrap_angle(angle)
    lo_a = np.asarray(lo, dtype=np.float64)
    hi_a = np.asarray(hi, dtype=np.float64)
    inside = (a >= lo_a) & (a <= hi_a)
    to_lo = np.abs(wrap_angle(a - lo_a))
    to_hi = np.abs(wrap_angle(a - hi_a))
    return np.where(inside, a, np.where(to_lo < to_hi, lo_a, hi_a))


def signed_angle_about(q: ArrayLike, axis: ArrayLike) -> FloatArray:
    """Signed angle in ``(-pi, pi]`` of the twist of ``q`` about unit ``axis``."""
    qa = np.asarray(q, dtype=np.float64)
    ax = np.asarray(axis, dtype=np.float64)
    s = np.sum(qa[..., 1:] * ax, axis=-1)
    return wrap_angle(2.0 * np.arctan2(s, qa[..., 0]))


def _unit_axis(axis: ArrayLike, what: str) -> FloatArray:
    a = np.array(axis, dtype=np.float64).reshape(-1)
    if a.shape != (3,):
        raise RigError(f"{what} must have shape (3,), got {a.shape}")
    n = float(np.linalg.norm(a))
    if not math.isfinite(n) or n < 1e-9:
        raise RigError(f"{what} must be a finite non-zero vector, got {a.tolist()}")
    out = a / n
    out.setflags(write=False)
    return out


def _check_range(lo: float, hi: float, what: str) -> None:
    if not (math.isfinite(lo) and math.isfinite(hi)) or not (-math.pi <= lo <= hi <= math.pi):
        raise RigError(f"{what} must satisfy -pi <= min <= max <= pi, got [{lo}, {hi}]")


def _near_ends(angle: FloatArray, lo: float | FloatArray, hi: float | FloatArray, tolerance: float) -> BoolArray:
    """Is the angle (inside its range) within ``tolerance`` of an end that is a real bound?"""
    lo_a = np.asarray(lo, dtype=np.float64)
    hi_a = np.asarray(hi, dtype=np.float64)
    full = (lo_a <= -math.pi) & (hi_a >= math.pi)
    near = (np.abs(wrap_angle(angle - lo_a)) <= tolerance) | (np.abs(wrap_angle(angle - hi_a)) <= tolerance)
    out: BoolArray = near & ~full
    return out


def _keep_inside(q: ArrayLike, projected: FloatArray, violation: FloatArray) -> FloatArray:
    # Bit-identical passthrough (of the input as given, not renormalised) for rotations already
    # inside: a limit must not disturb a pose that satisfies it.
    out: FloatArray = np.where((violation <= 0.0)[..., None], np.asarray(q, dtype=np.float64), projected)
    return out


def _generic_step(limit: JointLimit, q: FloatArray, direction: FloatArray, goal: FloatArray) -> FloatArray:
    current = quat_apply(q, direction)
    turned = quat_multiply(quat_between_vectors(current, goal), q)
    return limit.project(turned)


class JointLimit(Protocol):
    """What a solver needs from a limit (see the module docstring)."""

    def violation(self, q: ArrayLike) -> FloatArray: ...

    def project(self, q: ArrayLike) -> FloatArray: ...

    def step_toward(self, q: ArrayLike, direction: ArrayLike, goal: ArrayLike) -> FloatArray: ...

    def at_limit(self, q: ArrayLike, tolerance: float = 1e-9) -> BoolArray: ...


@dataclass(frozen=True)
class ConeLimit:
    """The joint's ``axis`` (usually the bone direction) stays within ``max_swing`` of where it
    is at rest; the twist about it stays within ``[twist_min, twist_max]``."""

    axis: FloatArray
    max_swing: float
    twist_min: float = -math.pi
    twist_max: float = math.pi

    def __post_init__(self) -> None:
        object.__setattr__(self, "axis", _unit_axis(self.axis, "cone axis"))
        if not (math.isfinite(self.max_swing) and 0.0 <= self.max_swing <= math.pi):
            raise RigError(f"cone max_swing must be in [0, pi], got {self.max_swing}")
        _check_range(self.twist_min, self.twist_max, "cone twist range")

    def _parts(self, q: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        swing, twist = swing_twist(q, self.axis)
        swing_angle = 2.0 * np.arctan2(np.linalg.norm(swing[..., 1:], axis=-1), np.abs(swing[..., 0]))
        twist_angle = signed_angle_about(twist, self.axis)
        return swing, swing_angle, twist, twist_angle

    def violation(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        _, swing_angle, _, twist_angle = self._parts(qa)
        return np.maximum(swing_angle - self.max_swing, 0.0) + _outside_distance(
            twist_angle, self.twist_min, self.twist_max
        )

    def project(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        swing, swing_angle, _, twist_angle = self._parts(qa)
        # Shorten the swing along its own great circle: the direction moves straight back toward
        # the cone, the nearest point on it.
        s = np.where(swing[..., :1] < 0.0, -swing, swing)
        sin_half = np.linalg.norm(s[..., 1:], axis=-1, keepdims=True)
        swing_axis = np.where(sin_half > _EPS, s[..., 1:] / np.maximum(sin_half, _EPS), self.axis)
        swing_c = quat_from_axis_angle(swing_axis, np.minimum(swing_angle, self.max_swing))
        twist_c = quat_from_axis_angle(self.axis, clamp_angle(twist_angle, self.twist_min, self.twist_max))
        projected = quat_multiply(swing_c, twist_c)
        return _keep_inside(q, projected, self.violation(qa))

    def step_toward(self, q: ArrayLike, direction: ArrayLike, goal: ArrayLike) -> FloatArray:
        return _generic_step(self, quat_normalize(q), np.asarray(direction, np.float64), np.asarray(goal, np.float64))

    def at_limit(self, q: ArrayLike, tolerance: float = 1e-9) -> BoolArray:
        """On the cone's rim or at an end of the twist range (or outside either)."""
        _, swing_angle, _, twist_angle = self._parts(quat_normalize(q))
        out: BoolArray = (swing_angle >= self.max_swing - tolerance) | _near_ends(
            twist_angle, self.twist_min, self.twist_max, tolerance
        ) | (self.violation(q) > 0.0)
        return out


@dataclass(frozen=True)
class HingeLimit:
    """Rotation about ``axis`` only, by an angle in ``[min_angle, max_angle]`` (0 at rest)."""

    axis: FloatArray
    min_angle: float
    max_angle: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "axis", _unit_axis(self.axis, "hinge axis"))
        _check_range(self.min_angle, self.max_angle, "hinge range")

    def angle(self, q: ArrayLike) -> FloatArray:
        """Signed hinge angle of ``q`` (its twist about the axis)."""
        return signed_angle_about(quat_normalize(q), self.axis)

    def violation(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        swing, twist = swing_twist(qa, self.axis)
        off_axis: FloatArray = 2.0 * np.arctan2(np.linalg.norm(swing[..., 1:], axis=-1), np.abs(swing[..., 0]))
        return off_axis + _outside_distance(signed_angle_about(twist, self.axis), self.min_angle, self.max_angle)

    def project(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        theta = clamp_angle(self.angle(qa), self.min_angle, self.max_angle)
        return _keep_inside(q, quat_from_axis_angle(self.axis, theta), self.violation(qa))

    def step_toward(self, q: ArrayLike, direction: ArrayLike, goal: ArrayLike) -> FloatArray:
        # A hinge has one degree of freedom, so the best turn is exact: the angle between the
        # direction and the goal, both projected onto the plane normal to the axis.
        qa = quat_normalize(q)
        d = np.asarray(direction, dtype=np.float64)
        g = np.asarray(goal, dtype=np.float64)
        h = self.axis
        d_perp = d - np.sum(d * h, axis=-1, keepdims=True) * h
        g_perp = g - np.sum(g * h, axis=-1, keepdims=True) * h
        usable = (np.linalg.norm(d_perp, axis=-1) > _EPS) & (np.linalg.norm(g_perp, axis=-1) > _EPS)
        best = np.arctan2(np.sum(np.cross(d_perp, g_perp) * h, axis=-1), np.sum(d_perp * g_perp, axis=-1))
        theta = np.where(usable, best, self.angle(qa))
        return quat_from_axis_angle(h, clamp_angle(theta, self.min_angle, self.max_angle))

    def at_limit(self, q: ArrayLike, tolerance: float = 1e-9) -> BoolArray:
        """At an end of the range (or off the hinge)."""
        out: BoolArray = _near_ends(self.angle(q), self.min_angle, self.max_angle, tolerance) | (
            self.violation(q) > 0.0
        )
        return out


@dataclass(frozen=True)
class EulerBoxLimit:
    """Each Euler angle (Blender order names, angles indexed by axis X, Y, Z) stays inside
    ``[min_angles[i], max_angles[i]]`` (the PMX / MMD style of IK limit)."""

    min_angles: FloatArray
    max_angles: FloatArray
    order: str = "XYZ"
    _bounds: tuple[FloatArray, FloatArray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lo = np.array(self.min_angles, dtype=np.float64).reshape(-1)
        hi = np.array(self.max_angles, dtype=np.float64).reshape(-1)
        if lo.shape != (3,) or hi.shape != (3,):
            raise RigError(f"Euler box bounds must have shape (3,), got {lo.shape} and {hi.shape}")
        for i in range(3):
            _check_range(float(lo[i]), float(hi[i]), f"Euler box range of axis {'XYZ'[i]}")
        if self.order not in EULER_ORDERS:
            raise RigError(f"Euler order must be one of {EULER_ORDERS}, got {self.order!r}")
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "min_angles", lo)
        object.__setattr__(self, "max_angles", hi)
        object.__setattr__(self, "_bounds", (lo, hi))

    def _triples(self, q: FloatArray) -> tuple[FloatArray, FloatArray]:
        e = euler_from_quat(q, self.order)
        # The same rotation has a second Euler triple: first and last angles + pi, middle
        # pi - middle. A box may contain one and not the other.
        i, j, k = ("XYZ".index(c) for c in self.order)
        alt = e.copy()
        alt[..., i] += math.pi
        alt[..., j] = math.pi - alt[..., j]
        alt[..., k] += math.pi
        return wrap_angle(e), wrap_angle(alt)

    def _excess(self, e: FloatArray) -> FloatArray:
        lo, hi = self._bounds
        worst: FloatArray = np.max(_outside_distance(e, lo, hi), axis=-1)
        return worst

    def violation(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        e1, e2 = self._triples(qa)
        return np.minimum(self._excess(e1), self._excess(e2))

    def project(self, q: ArrayLike) -> FloatArray:
        qa = quat_normalize(q)
        lo, hi = self._bounds
        e1, e2 = self._triples(qa)
        q1 = quat_from_euler(clamp_angle(e1, lo, hi), self.order)
        q2 = quat_from_euler(clamp_angle(e2, lo, hi), self.order)
        pick2 = quat_angle_between(qa, q2) < quat_angle_between(qa, q1)
        projected = np.where(pick2[..., None], q2, q1)
        return _keep_inside(q, projected, self.violation(qa))

    def step_toward(self, q: ArrayLike, direction: ArrayLike, goal: ArrayLike) -> FloatArray:
        return _generic_step(self, quat_normalize(q), np.asarray(direction, np.float64), np.asarray(goal, np.float64))

    def at_limit(self, q: ArrayLike, tolerance: float = 1e-9) -> BoolArray:
        """Some angle at an end of its range (in the Euler triple that lies inside the box)."""
        qa = quat_normalize(q)
        lo, hi = self._bounds
        e1, e2 = self._triples(qa)
        inside2 = self._excess(e2) < self._excess(e1)
        e = np.where(inside2[..., None], e2, e1)
        out: BoolArray = np.any(_near_ends(e, lo, hi, tolerance), axis=-1) | (self.violation(qa) > 0.0)
        return out


def project_rotations(limits: tuple[JointLimit | None, ...], rotations: ArrayLike) -> FloatArray:
    """Project ``(..., n, 4)`` rotations of ``n`` joints onto their limits (``None`` = free)."""
    r = np.array(rotations, dtype=np.float64)
    if r.shape[-2:] != (len(limits), 4):
        raise ValueError(f"rotations must have shape (..., {len(limits)}, 4), got {r.shape}")
    for k, limit in enumerate(limits):
        if limit is not None:
            r[..., k, :] = limit.project(r[..., k, :])
    return r


def at_limits(limits: tuple[JointLimit | None, ...], rotations: ArrayLike, tolerance: float = 1e-9) -> BoolArray:
    """Per leading index: does any joint of ``(..., n, 4)`` rotations sit on its limit?"""
    r = np.asarray(rotations, dtype=np.float64)
    out = np.zeros(r.shape[:-2], dtype=bool)
    for k, limit in enumerate(limits):
        if limit is not None:
            out |= limit.at_limit(r[..., k, :], tolerance)
    return out


def limit_violations(limits: tuple[JointLimit | None, ...], rotations: ArrayLike) -> FloatArray:
    """Violation in radians ``(..., n)`` of each joint's rotation (0 for free joints)."""
    r = np.asarray(rotations, dtype=np.float64)
    if r.shape[-2:] != (len(limits), 4):
        raise ValueError(f"rotations must have shape (..., {len(limits)}, 4), got {r.shape}")
    out = np.zeros(r.shape[:-1])
    for k, limit in enumerate(limits):
        if limit is not None:
            out[..., k] = limit.violation(r[..., k, :])
    return out


def free_axes(lo: ArrayLike, hi: ArrayLike) -> list[int]:
    """Axes whose range is not exactly [0, 0]."""
    a = np.asarray(lo, dtype=np.float64)
    b = np.asarray(hi, dtype=np.float64)
    return [i for i in range(3) if not (a[i] == 0.0 and b[i] == 0.0)]


def link_limit(lo: ArrayLike, hi: ArrayLike, order: str = "XYZ") -> JointLimit | None:
    """The generic limit of per-axis Euler bounds in a joint's own axes: ``None`` when every axis
    is free over the whole circle, a :class:`HingeLimit` when exactly one axis may turn (the two
    others at [0, 0]), else an :class:`EulerBoxLimit`."""
    a = np.asarray(lo, dtype=np.float64)
    b = np.asarray(hi, dtype=np.float64)
    if np.all(a <= -math.pi) and np.all(b >= math.pi):
        return None
    free = free_axes(a, b)
    if len(free) == 1:
        k = free[0]
        return HingeLimit(np.eye(3)[k], float(a[k]), float(b[k]))
    return EulerBoxLimit(a, b, order)
