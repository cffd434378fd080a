"""Shared pieces of the IK solvers: bounds, the point-solve result and small vector helpers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rig.rotation_kernels import cross
from ..rig.rotations import FloatArray

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Relative margin (of the chain length) by which the two-bone distance stays inside its
#: reachable interval; small enough that any target within reach is hit to 1e-9 of the length.
REACH_MARGIN = 1e-10
DEFAULT_TOLERANCE = 1e-3
DEFAULT_MAX_PASSES = 16
SOLVERS = ("two_bone", "fabrik", "ccd")

# Batches up to this many chains take the fewest-calls route in the column kernels.
_SMALL_BATCH = 1024
# Relative size below which a perpendicular component gives no usable bend direction.
_PLANE_EPS = 1e-9
#: Up to this many two-bone chains are solved in plain floats (see _two_bone_rows).
_FEW_CHAINS = 8
_EPS = 1e-12


@dataclass(frozen=True)
class IKSolution:
    """Result of a point solve (see the module docstring for the fields)."""

    points: FloatArray
    residual: FloatArray
    iterations: IntArray
    converged: BoolArray
    reachable: BoolArray


def _norm(v: FloatArray) -> FloatArray:
    out: FloatArray = np.sqrt(np.einsum("...i,...i->...", v, v))
    return out


def _dot(a: FloatArray, b: FloatArray) -> FloatArray:
    out: FloatArray = np.einsum("...i,...i->...", a, b)
    return out


_Z = np.array([0.0, 0.0, 1.0])


def _unit(v: FloatArray, fallback: FloatArray | Callable[[], FloatArray] | None = None) -> FloatArray:
    """``v`` normalised; rows too short to have a direction take ``fallback`` (an array, or a
    function making one, evaluated only when needed; +Z by default)."""
    n = _norm(v)
    ok = n > _EPS
    if ok.all():
        out: FloatArray = v / n[..., None]
        return out
    fb = _Z if fallback is None else fallback() if callable(fallback) else fallback
    out = np.where(ok[..., None], v / np.where(ok, n, 1.0)[..., None], fb)
    return out


def _any_perpendicular(axis: FloatArray) -> FloatArray:
    helper = np.where((np.abs(axis[..., 0]) < 0.9)[..., None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    return _unit(cross(axis, helper))


def _check_points(points: ArrayLike, n: int | None, what: str = "points") -> FloatArray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim < 2 or p.shape[-1] != 3 or (n is not None and p.shape[-2] != n) or p.shape[-2] < 2:
        want = "(..., N, 3) with N >= 2" if n is None else f"(..., {n}, 3)"
        raise ValueError(f"{what} must have shape {want}, got {p.shape}")
    return p


def _check_vectors(v: ArrayLike, batch: tuple[int, ...], what: str) -> FloatArray:
    a = np.asarray(v, dtype=np.float64)
    if a.shape == batch + (3,):
        return a
    if a.shape[-1:] != (3,):
        raise ValueError(f"{what} must have shape (..., 3) broadcastable to {batch + (3,)}, got {a.shape}")
    try:
        out: FloatArray = np.broadcast_to(a, batch + (3,))
    except ValueError:
        raise ValueError(f"{what} must have shape (..., 3) broadcastable to {batch + (3,)}, got {a.shape}") from None
    return out


def _check_bounds(tolerance: ArrayLike, max_passes: int) -> FloatArray:
    tol = np.asarray(tolerance, dtype=np.float64)
    # A scalar (the usual case) is checked without numpy calls: a live frame pays per call.
    fine = math.isfinite(tol) and tol >= 0.0 if tol.ndim == 0 else bool(np.all(np.isfinite(tol) & (tol >= 0.0)))
    if not fine:
        raise ValueError(f"tolerance must be finite and >= 0 (a scalar or one per chain), got {tol!r}")
    if max_passes < 1:
        raise ValueError(f"max_passes must be >= 1, got {max_passes}")
    return tol


def _signed_angle(a: FloatArray, b: FloatArray, axis: FloatArray) -> FloatArray:
    """Signed angle from ``a`` to ``b`` about ``axis`` (their parts normal to it)."""
    out: FloatArray = np.arctan2(_dot(cross(a, b), axis), _dot(a, b) - _dot(a, axis) * _dot(b, axis))
    return out


def _axis_turn(axis: FloatArray, angle: FloatArray) -> FloatArray:
    half = 0.5 * angle
    out: FloatArray = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * axis], axis=-1)
    return out
