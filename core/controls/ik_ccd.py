"""CCD: on point chains, and in the joints' own rotation spaces on a skeleton path (where joint
limits apply, a hinge bending by distance rather than by aim)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..rig.rotation_kernels import cross, quat_between_unit, quat_conj, quat_mul, rotate, rotation_matrices
from ..rig.rotations import FloatArray
from .chains import PathKinematics
from .ik_common import (
    _EPS,
    _PLANE_EPS,
    DEFAULT_MAX_PASSES,
    DEFAULT_TOLERANCE,
    BoolArray,
    IKSolution,
    IntArray,
    _axis_turn,
    _check_bounds,
    _check_points,
    _check_vectors,
    _dot,
    _norm,
    _unit,
)
from .ik_fabrik import _rechain
from .joint_limits import HingeLimit, JointLimit, clamp_angle, wrap_angle


def ccd(
    points: ArrayLike,
    target: ArrayLike,
    *,
    initial: ArrayLike | None = None,
    tolerance: ArrayLike = DEFAULT_TOLERANCE,
    max_passes: int = DEFAULT_MAX_PASSES,
) -> IKSolution:
    """Cyclic coordinate descent on chains ``(..., N, 3)``: each sweep walks the joints from the
    tip to the root and turns everything below each joint so the end point points at the target.
    Same bounds, warm start and keep-if-there rule as :func:`fabrik`."""
    p0 = _check_points(points, None)
    batch = p0.shape[:-2]
    t = _check_vectors(target, batch, "target")
    tol = _check_bounds(tolerance, max_passes)
    segs = np.diff(p0, axis=-2)
    lengths = _norm(segs)
    root = p0[..., 0, :]
    total = lengths.sum(axis=-1)
    d = _norm(t - root)
    reachable = (d <= total) & (d >= np.maximum(0.0, 2.0 * lengths.max(axis=-1) - total))
    if initial is None:
        p = p0.copy()
    else:
        init = _check_points(initial, p0.shape[-2], "initial")
        fallback = _unit(segs)
        p = _rechain(np.broadcast_to(init, p0.shape), root, lengths, fallback)
    before = _norm(p0[..., -1, :] - t)
    keep = before <= tol
    n = p.shape[-2]
    active = ~keep & (_norm(p[..., -1, :] - t) > tol)
    flat_p = p.reshape(-1, n, 3).copy()
    flat_t = t.reshape(-1, 3)
    flat_tol = np.broadcast_to(tol, batch).reshape(-1)
    flat_it = np.zeros(flat_p.shape[0], dtype=np.int64)
    work = np.flatnonzero(active.reshape(-1))
    for _ in range(max_passes):
        if work.size == 0:
            break
        q = flat_p[work]
        tt = flat_t[work]
        for k in range(n - 2, -1, -1):
            pivot = q[:, k, None, :]
            turn = quat_between_unit(q[:, -1] - q[:, k], tt - q[:, k])
            q[:, k + 1 :] = pivot + rotate(turn[:, None, :], q[:, k + 1 :] - pivot)
        flat_it[work] += 1
        flat_p[work] = q
        work = work[_norm(q[:, -1] - tt) > flat_tol[work]]
    p = flat_p.reshape(p.shape)
    iterations = flat_it.reshape(batch)
    p = np.where(keep[..., None, None], p0, p)
    residual = _norm(p[..., -1, :] - t)
    return IKSolution(p, residual, iterations, residual <= tol, reachable)


def _hinge_reach_step(
    q: FloatArray, direction: FloatArray, goal: FloatArray, parent_pivot: FloatArray, hinge: HingeLimit
) -> FloatArray:
    """The hinge angle that puts the end point as far from the parent's pivot as the target is
    (the knee of a two-bone triangle), on the side the range allows, nearest the current angle.

    Aiming a hinge at the target, as plain CCD does, stalls on a straight chain pointing at a
    target inside its reach: the end already points at the target from every joint, so nothing
    bends (a straight knee under a hip never folds). Matching the distance instead leaves the
    parent, turning next, exactly the aim to make. Vectors are in the joint's rotation spaces
    relative to its pivot: ``direction`` (input space) to the end point, ``goal`` and
    ``parent_pivot`` (output space) to the target and the parent's pivot.
    """
    h = np.broadcast_to(hinge.axis, direction.shape)
    along = _dot(direction, h)[..., None] * h
    perp = direction - along
    side = cross(h, perp)
    rel_goal = goal - parent_pivot
    # |R d - P|^2 = |T - P|^2  <=>  P . R d = (|d|^2 + |P|^2 - |T - P|^2) / 2, with
    # R d = along + cos(theta) perp + sin(theta) (h x perp).
    wanted = 0.5 * (_dot(direction, direction) + _dot(parent_pivot, parent_pivot) - _dot(rel_goal, rel_goal))
    rhs = wanted - _dot(parent_pivot, along)
    alpha = _dot(parent_pivot, perp)
    beta = _dot(parent_pivot, side)
    radius = np.sqrt(alpha * alpha + beta * beta)
    base = np.arctan2(beta, alpha)
    # Out of reach: the nearest the hinge gets (fully open or fully folded toward the parent).
    spread = np.arccos(np.clip(rhs / np.maximum(radius, _EPS), -1.0, 1.0))
    current = hinge.angle(q)
    best = current
    best_cost = np.full(current.shape, np.inf)
    for theta in (base + spread, base - spread):
        clamped = clamp_angle(theta, hinge.min_angle, hinge.max_angle)
        cost = np.abs(wrap_angle(clamped - theta)) * 1e3 + np.abs(wrap_angle(clamped - current))
        take = cost < best_cost
        best = np.where(take, clamped, best)
        best_cost = np.where(take, cost, best_cost)
    usable = radius > _PLANE_EPS * np.maximum(_norm(parent_pivot), _EPS)
    out: FloatArray = np.where(usable[..., None], _axis_turn(h, best), hinge.step_toward(q, direction, goal))
    return out


def _ccd_rotations(
    kin: PathKinematics,
    rotations: FloatArray,
    target: FloatArray,
    limits: Sequence[JointLimit | None] | None,
    tolerance: FloatArray,
    max_passes: int,
    active: BoolArray,
) -> tuple[FloatArray, IntArray]:
    """CCD in the joints' own rotation spaces (so limits apply where they are defined)."""
    r = rotations.copy()
    n = r.shape[1]
    iterations = np.zeros(r.shape[0], dtype=np.int64)
    for _ in range(max_passes):
        placements = kin.placements(r)
        frames = np.empty((r.shape[0], n, 4, 4))
        frames[:, 0] = kin.base @ kin.pre[:, 0]
        if n > 1:
            parents = placements[:, :-1]
            frames[:, 1:] = parents @ kin.pre[:, 1:]
        tip_lin = frames[:, -1, :3, :3] @ rotation_matrices(r[:, -1])
        end = frames[:, -1, :3, 3] + np.einsum("tij,tj->ti", tip_lin, kin.reach[:, -1])
        active = active & (_norm(end - target) > tolerance)
        if not np.any(active):
            break
        iterations += active
        for k in range(n - 1, -1, -1):
            a = frames[:, k, :3, :3]
            pivot = frames[:, k, :3, 3]
            rel = np.linalg.solve(a, np.stack([end - pivot, target - pivot], axis=-1))
            current, goal = rel[..., 0], rel[..., 1]
            direction = rotate(quat_conj(r[:, k]), current)
            limit = None if limits is None else limits[k]
            if limit is None:
                turned = quat_mul(quat_between_unit(current, goal), r[:, k])
            elif isinstance(limit, HingeLimit) and k > 0:
                parent_pivot = np.linalg.solve(a, (frames[:, k - 1, :3, 3] - pivot)[..., None])[..., 0]
                turned = _hinge_reach_step(r[:, k], direction, goal, parent_pivot, limit)
            else:
                turned = limit.step_toward(r[:, k], direction, goal)
            turned = np.where(active[:, None], turned, r[:, k])
            r[:, k] = turned
            end = pivot + np.einsum("tij,tj->ti", a, rotate(turned, direction))
    return r, iterations
