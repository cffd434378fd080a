"""Inverse kinematics: analytic two-bone, FABRIK and CCD, on points and on skeleton paths.

This module solves a path on a skeleton (:func:`solve_path_ik`: writeback as rotations, joint
limits, hinges) and gathers the point solvers, which live by family in :mod:`.ik_two_bone`,
:mod:`.ik_fabrik` and :mod:`.ik_ccd` (shared bounds and helpers in :mod:`.ik_common`).

Conventions: points are skeleton-space positions, arrays carry any leading batch shape (frames,
chains, or both) followed by the chain's points ``(..., N, 3)``: the root pivot first, the end point
last. Targets and poles are ``(..., 3)``. Everything is float64; rotations follow
:mod:`core.rig.rotations` (w-first Hamilton quaternions, active, column vectors).

Every solve returns an :class:`IKSolution` (or :class:`ChainSolve` on a skeleton) with, per batch
item, the residual (distance from end point to target, in skeleton units), the number of
iterations (FABRIK: backward+forward passes; CCD: tip-to-root sweeps; two-bone: 1, or 0 when the
chain was already there), ``converged`` (residual within tolerance) and ``reachable`` (the target
lies within the chain's reach, before any joint limit).

Defaults (docs/controls.md#ik-chains): stop within 0.001 units or after 16 passes; the two-bone triangle is
clamped just inside its reachable interval (by ``REACH_MARGIN`` of the chain length) so the chain
never becomes exactly straight or folded, where the bend direction would be lost. Segment
lengths are always those of the current pose: translation or scale animation changes them, and
the result is judged by the residual after writeback.

Three additions to the textbook solvers, each measured in the tests:

* FABRIK rescales the sideways bend of chains that run forward along the target line after a
  pass (``slack_correction``), which finishes chains near full reach, where plain FABRIK's
  passes barely change the bend.
* A FABRIK pole turns the intermediate points together about the root-end line (see
  :func:`apply_pole`); for two bones that is the usual pole plane.
* With joint limits, hinges are honoured during writeback (the parent bone is twisted so the
  hinge axis is normal to the bend) and CCD bends a hinge by distance, not by aim; both stop
  a one-way knee from stalling straight (see ``_hinge_aware_rotations``, ``_hinge_reach_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..rig.rotation_kernels import cross, quat_between_unit, quat_mul, rotate, rotation_matrices
from ..rig.rotations import FloatArray
from .chains import PathKinematics
from .ik_ccd import _ccd_rotations, ccd
from .ik_common import (
    _PLANE_EPS,
    DEFAULT_MAX_PASSES,
    DEFAULT_TOLERANCE,
    REACH_MARGIN,
    SOLVERS,
    BoolArray,
    IKSolution,
    IntArray,
    _axis_turn,
    _check_bounds,
    _dot,
    _norm,
    _signed_angle,
    _unit,
)
from .ik_fabrik import apply_pole, fabrik
from .ik_two_bone import two_bone_ik
from .joint_limits import HingeLimit, JointLimit, at_limits, project_rotations

__all__ = [
    "DEFAULT_MAX_PASSES", "DEFAULT_TOLERANCE", "REACH_MARGIN", "SOLVERS", "ChainSolve", "IKSolution", "apply_pole", "ccd",
    "fabrik", "solve_path_ik", "two_bone_ik",
]


@dataclass(frozen=True)
class ChainSolve:
    """Result of :func:`solve_path_ik`, per frame ``(T,)`` unless stated.

    ``rotations`` ``(T, n, 4)`` are the path joints' new local rotations and ``points``
    ``(T, n + 1, 3)`` the path's points under them (forward kinematics of what is written, so the
    residual is measured after writeback). ``limited`` marks frames whose target was reached
    without the joint limits but not with them: a limit made the target unreachable.
    """

    rotations: FloatArray
    points: FloatArray
    #: Placement ``(T, 4, 4)`` of the path's last joint under ``rotations``.
    tip: FloatArray
    residual: FloatArray
    iterations: IntArray
    converged: BoolArray
    reachable: BoolArray
    limited: BoolArray
    #: Frames already within tolerance, left exactly as they were.
    kept: BoolArray


def _hinge_aware_rotations(
    kin: PathKinematics, points: FloatArray, limits: tuple[JointLimit | None, ...]
) -> FloatArray:
    """Write solved points back as rotations, parent-first, like
    :meth:`PathKinematics.rotations_from_points`, but respecting hinges exactly.

    A hinged joint turns only about its axis, by the angle that best aims its segment (clamped
    to its range). Its parent, whose turn about its own bone is otherwise free, is twisted about
    that bone so the hinge axis stands normal to the plane the two segments must bend in, on the
    side whose bend angle the hinge allows. Without this the minimal rotation leaves the
    hinge plane where the animation had it, the hinge projection throws the bend away, and CCD
    cannot recover it (it never twists a bone about itself): a knee limited to bend one way
    stalls straight whenever the target lies on the other side of its animated plane.
    """
    r0 = kin.rotations
    n = r0.shape[1]
    mats = rotation_matrices(r0)
    out = np.empty_like(r0)
    parent = kin.base
    for k in range(n):
        frame = parent @ kin.pre[:, k]
        a = frame[:, :3, :3]
        pivot = frame[:, :3, 3]
        want = np.linalg.solve(a, (points[:, k + 1] - pivot)[..., None])[..., 0]
        limit = limits[k]
        if isinstance(limit, HingeLimit):
            q = limit.step_toward(r0[:, k], kin.reach[:, k], want)
        else:
            current = np.einsum("tij,tj->ti", mats[:, k], kin.reach[:, k])
            q = quat_mul(quat_between_unit(current, want), r0[:, k])
            child = limits[k + 1] if k + 1 < n else None
            if isinstance(child, HingeLimit):
                q = _twist_for_hinge(kin, k, frame, q, want, points, child)
        out[:, k] = q
        if k + 1 < n:
            m = frame.copy()
            m[:, :3, :3] = a @ rotation_matrices(q)
            if kin.post is not None:
                m = m @ kin.post[:, k]
            parent = m
    return out


def _twist_for_hinge(
    kin: PathKinematics, k: int, frame: FloatArray, q: FloatArray, want: FloatArray, points: FloatArray,
    hinge: HingeLimit,
) -> FloatArray:
    """Joint ``k``'s rotation ``q`` twisted about its (solved) bone direction ``want`` so the
    hinge of joint ``k + 1`` is normal to the bend at that joint (see ``_hinge_aware_rotations``)."""
    a = frame[:, :3, :3]
    post = np.eye(3) if kin.post is None else kin.post[:, k, :3, :3]
    # The child's hinge axis and its solved segment, in joint k's rotation spaces.
    axis_in = np.einsum("tij,tj->ti", post @ kin.pre[:, k + 1, :3, :3], np.broadcast_to(hinge.axis, want.shape))
    child_want = np.linalg.solve(a, (points[:, k + 2] - points[:, k + 1])[..., None])[..., 0]
    u = _unit(want)
    normal = cross(u, child_want)
    axis_out = rotate(q, axis_in)
    off = axis_out - _dot(axis_out, u)[..., None] * u
    usable = (_norm(normal) > _PLANE_EPS * _norm(child_want)) & (_norm(off) > 1e-6 * _norm(axis_out))
    if not usable.any():
        return q
    best = q
    best_miss = np.full(q.shape[0], np.inf)
    for side in (1.0, -1.0):
        twist = _axis_turn(u, _signed_angle(off, side * normal, u))
        candidate = quat_mul(twist, q)
        # The hinge angle the child would need with this twist, and how far outside its range.
        m = frame.copy()
        m[:, :3, :3] = a @ rotation_matrices(candidate)
        if kin.post is not None:
            m = m @ kin.post[:, k]
        child_frame = (m @ kin.pre[:, k + 1])[:, :3, :3]
        goal = np.linalg.solve(child_frame, (points[:, k + 2] - points[:, k + 1])[..., None])[..., 0]
        h = np.broadcast_to(hinge.axis, goal.shape)
        angle = _signed_angle(kin.reach[:, k + 1], goal, h)
        miss = hinge.violation(_axis_turn(h, angle))
        take = usable & (miss < best_miss)
        best = np.where(take[:, None], candidate, best)
        best_miss = np.where(take, miss, best_miss)
    return best


def solve_path_ik(
    kin: PathKinematics,
    target: ArrayLike,
    *,
    solver: str = "fabrik",
    pole: ArrayLike | None = None,
    limits: Sequence[JointLimit | None] | None = None,
    initial: ArrayLike | None = None,
    tolerance: ArrayLike = DEFAULT_TOLERANCE,
    max_passes: int = DEFAULT_MAX_PASSES,
    softness: float = 0.0,
) -> ChainSolve:
    """Solve one skeleton path toward ``target`` ``(T, 3)`` for every frame at once.

    ``two_bone`` and ``fabrik`` solve points and write them back as rotations parent-first
    (:meth:`PathKinematics.rotations_from_points`; hinge-aware when a limit is a hinge);
    ``ccd`` turns the rotations directly. With ``limits`` (one entry per path joint, ``None`` =
    free) the rotations are projected onto them and, where that leaves the end point outside
    tolerance, re-solved by CCD in the joints' own rotation spaces from the projected pose, within
    the same pass bound; the better of the two is kept. Frames whose end point is already within
    tolerance keep their rotations bit for bit. ``initial`` ``(T, n + 1, 3)`` warm-starts FABRIK;
    ``pole`` ``(T, 3)`` is used by two-bone and FABRIK; ``softness`` by two-bone only.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    n = len(kin.path)
    if solver == "two_bone" and n != 2:
        raise ValueError(f"the two_bone solver needs a path of 2 joints, got {n}")
    lim: tuple[JointLimit | None, ...] | None = None
    if limits is not None:
        lim = tuple(limits)
        if len(lim) != n:
            raise ValueError(f"limits must have one entry per path joint ({n}), got {len(lim)}")
        if all(x is None for x in lim):
            lim = None
    tol = _check_bounds(tolerance, max_passes)
    frames = kin.frames
    tgt = np.asarray(target, dtype=np.float64)
    if tgt.shape != (frames, 3):
        raise ValueError(f"target must have shape ({frames}, 3), got {tgt.shape}")
    pts, tip_now = kin.walk()
    miss = _norm(pts[:, -1] - tgt)
    keep = miss <= tol
    if keep.all():
        # Every frame already there (a leg the ground leaves on its floor): what the solve
        # below gives kept frames, without running it.
        return ChainSolve(
            rotations=kin.rotations.copy(),
            points=pts,
            tip=tip_now,
            residual=miss,
            iterations=np.zeros(frames, dtype=np.int64),
            converged=keep,
            reachable=np.ones(frames, dtype=bool),
            limited=np.zeros(frames, dtype=bool),
            kept=keep,
        )
    final: FloatArray | None = None
    tip: FloatArray | None = None
    if solver == "ccd":
        rot, iterations = _ccd_rotations(kin, kin.rotations, tgt, lim, tol, max_passes, ~keep)
        lengths = _norm(np.diff(pts, axis=1))
        d = _norm(tgt - pts[:, 0])
        reachable = (d <= lengths.sum(-1)) & (d >= np.maximum(0.0, 2.0 * lengths.max(-1) - lengths.sum(-1)))
    else:
        if solver == "two_bone":
            sol = two_bone_ik(pts, tgt, pole, softness=softness, tolerance=tol)
        else:
            sol = fabrik(pts, tgt, pole=pole, initial=initial, tolerance=tol, max_passes=max_passes)
        if lim is not None and any(isinstance(x, HingeLimit) for x in lim):
            rot = _hinge_aware_rotations(kin, sol.points, lim)
        else:
            rot, final, tip = kin.rotations_from_points(sol.points)
        iterations = sol.iterations
        reachable = sol.reachable
        if lim is not None:
            projected = project_rotations(lim, rot)
            moved = np.any(projected != rot, axis=(1, 2))
            if np.any(moved):
                rot = projected
                final = tip = None
                end = kin.points(rot)[:, -1]
                redo = moved & ~keep & (_norm(end - tgt) > tol)
                if np.any(redo):
                    resolved, extra = _ccd_rotations(kin, rot, tgt, lim, tol, max_passes, redo)
                    # CCD may stall on a worse point than the projection it started from.
                    better = _norm(kin.points(resolved)[:, -1] - tgt) < _norm(end - tgt)
                    rot = np.where(better[:, None, None], resolved, rot)
                    iterations = iterations + extra
    if final is None or tip is None:
        final, tip = kin.walk(rot)
    if keep.any():
        rot = np.where(keep[:, None, None], kin.rotations, rot)
        final = np.where(keep[:, None, None], pts, final)
        tip = np.where(keep[:, None, None], tip_now, tip)
    residual = _norm(final[:, -1] - tgt)
    converged = residual <= tol
    # A limit made the target unreachable: in reach, not reached, and some joint held at its limit.
    limited = np.zeros(frames, dtype=bool) if lim is None else (reachable & ~converged & at_limits(lim, rot))
    return ChainSolve(
        rotations=rot,
        points=final,
        tip=tip,
        residual=residual,
        iterations=np.where(keep, 0, iterations).astype(np.int64),
        converged=converged,
        reachable=reachable | keep,
        limited=limited,
        kept=keep,
    )
