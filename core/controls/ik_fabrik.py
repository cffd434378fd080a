"""FABRIK on point chains, with the pole turn and the bend rescaling that finishes chains near
full reach."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..rig.rotation_kernels import cross, quat_between_unit, rotate
from ..rig.rotations import FloatArray
from .ik_common import (
    _EPS,
    _PLANE_EPS,
    DEFAULT_MAX_PASSES,
    DEFAULT_TOLERANCE,
    BoolArray,
    IKSolution,
    _any_perpendicular,
    _check_bounds,
    _check_points,
    _check_vectors,
    _dot,
    _norm,
    _unit,
)


def _rechain(start: FloatArray, root: FloatArray, lengths: FloatArray, fallback: FloatArray) -> FloatArray:
    """Points from ``root`` along ``start``'s directions with the given segment lengths."""
    out = np.empty_like(start)
    out[..., 0, :] = root
    for k in range(lengths.shape[-1]):
        seg = _unit(start[..., k + 1, :] - start[..., k, :], fallback[..., k, :])
        out[..., k + 1, :] = out[..., k, :] + lengths[..., k, None] * seg
    return out


def apply_pole(points: ArrayLike, pole: ArrayLike) -> FloatArray:
    """Turn the intermediate points of ``(..., N, 3)`` chains together about the line through
    the chain's two end points so the chain bends toward ``pole``: the sum of the intermediate
    points' offsets from that line ends up pointing at the pole's offset from it. Segment
    lengths and both end points are unchanged; for a two-bone chain this is the pole plane.

    Turning each bend separately about the line through its own neighbours (and in sequence)
    does not give a consistent result: each turn moves the axes of the bends next to it, and
    on 6-joint chains earlier bends were left pointing up to 180 degrees away from the pole.
    A straight chain, or a pole on the line, leaves the chain as it is.
    """
    p = np.array(_check_points(points, None), dtype=np.float64)
    if p.shape[-2] < 3:
        return p
    pl = _check_vectors(pole, p.shape[:-2], "pole")
    root = p[..., 0, :]
    chord = p[..., -1, :] - root
    length = _norm(chord)
    axis = chord / np.maximum(length, _EPS)[..., None]
    rel = p[..., 1:-1, :] - root[..., None, :]
    radial = rel - _dot(rel, axis[..., None, :])[..., None] * axis[..., None, :]
    bulge = radial.sum(axis=-2)
    to_pole = pl - root
    pole_radial = to_pole - _dot(to_pole, axis)[..., None] * axis
    scale = np.maximum(_norm(np.diff(p, axis=-2)).sum(axis=-1), _EPS)
    ok = (length > _PLANE_EPS * scale) & (_norm(bulge) > _PLANE_EPS * scale) & (_norm(pole_radial) > _PLANE_EPS * scale)
    # Signed angle about the chord axis (an explicit axis, so a half turn stays about it).
    angle = np.arctan2(_dot(cross(bulge, pole_radial), axis), _dot(bulge, pole_radial))
    half = 0.5 * np.where(ok, angle, 0.0)
    turn = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * axis], axis=-1)
    p[..., 1:-1, :] = root[..., None, :] + rotate(turn[..., None, :], rel)
    return p


def _rescale_bend(
    p: FloatArray, target: FloatArray, lengths: FloatArray, distance: FloatArray
) -> tuple[FloatArray, BoolArray]:
    """Put the end point of chains that run forward along the root-target line exactly on the
    target by scaling how far the chain bends away from that line.

    FABRIK barely changes the sideways profile of a nearly straight chain, and that profile
    alone decides how much length the chain takes up, so near full reach it converges slowly
    (measured: about half of 10-joint chains miss 16 passes beyond 90 % of reach). Here the
    chain is turned about its root so its chord lies on the target line, its sideways offsets
    are scaled by ``s`` and the along-line steps re-laid from the segment lengths, with ``s``
    chosen so the chord equals the target distance. Only chains whose every segment points
    forward along the line qualify (then the chord shrinks monotonically with ``s``); a straight
    chain gets a small parabolic sideways profile to scale.
    """
    root = p[..., 0, :]
    axis = _unit(target - root, lambda: _unit(p[..., -1, :] - root))
    align = quat_between_unit(p[..., -1, :] - root, axis)
    rel = rotate(align[..., None, :], p - root[..., None, :])
    x = _dot(rel, axis[..., None, :])
    y = rel - x[..., None] * axis[..., None, :]
    total = lengths.sum(axis=-1)
    straight = _norm(y).max(axis=-1) <= _PLANE_EPS * total
    if np.any(straight):
        side = _any_perpendicular(axis)
        cum = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(lengths, axis=-1)], axis=-1)
        arc = (cum * (total[..., None] - cum) / np.maximum(total, _EPS)[..., None] ** 2)[..., None] * side[..., None, :]
        x = np.where(straight[..., None], cum, x)
        y = np.where(straight[..., None, None], 1e-3 * total[..., None, None] * arc, y)
    dx = np.diff(x, axis=-1)
    dy = np.diff(y, axis=-2)
    m2 = np.einsum("...i,...i->...", dy, dy)
    l2 = lengths * lengths
    forward = np.all(dx > 1e-6 * lengths, axis=-1)
    if not forward.any():
        return p, forward
    with np.errstate(divide="ignore", invalid="ignore"):
        u_max = np.min(np.where(m2 > 0.0, l2 / np.where(m2 > 0.0, m2, 1.0), np.inf), axis=-1)

    def chord(u: FloatArray) -> tuple[FloatArray, FloatArray]:
        r = np.sqrt(np.maximum(l2 - u[..., None] * m2, 0.0))
        slope = -0.5 * np.sum(m2 / np.maximum(r, _EPS), axis=-1)
        out: FloatArray = r.sum(axis=-1)
        return out, slope

    # Newton on u = s^2: the chord is concave and decreasing in u, so from the right of the root
    # Newton steps stay right of it and converge monotonically; a first step that overshoots
    # past the largest feasible u is pulled back inside.
    hi = np.where(np.isfinite(u_max), u_max, 1e30) * (1.0 - 1e-12)
    u = np.ones(x.shape[:-1])
    for _ in range(16):
        f, slope = chord(u)
        gap = f - distance
        # Only chains that qualify matter; the others are discarded below.
        if np.all((np.abs(gap) <= 1e-13 * total) | ~forward):
            break
        u = np.clip(u - gap / np.where(slope < 0.0, slope, -1.0), 0.0, hi)
    steps = np.sqrt(np.maximum(l2 - u[..., None] * m2, 0.0))
    new_x = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)], axis=-1)
    s = np.sqrt(u)
    out = root[..., None, :] + new_x[..., None] * axis[..., None, :] + s[..., None, None] * y
    # The caller keeps the result only where it lands closer than FABRIK's own pass did.
    ok = forward & np.isfinite(out).all(axis=(-2, -1))
    return out, ok


def fabrik(
    points: ArrayLike,
    target: ArrayLike,
    *,
    pole: ArrayLike | None = None,
    initial: ArrayLike | None = None,
    tolerance: ArrayLike = DEFAULT_TOLERANCE,
    max_passes: int = DEFAULT_MAX_PASSES,
    slack_correction: bool = True,
) -> IKSolution:
    """FABRIK on chains ``(..., N, 3)``, keeping their segment lengths and root.

    ``initial`` (same shape) is a warm start, typically the previous solution: its directions
    are re-laid from the current root with the current lengths. Chains already within
    ``tolerance`` keep their points. An unreachable target straightens the chain toward it.
    Otherwise backward and forward passes alternate until the end point is within
    ``tolerance`` or ``max_passes`` passes are done; a ``pole`` then turns the intermediate bends.
    """
    p0 = _check_points(points, None)
    batch = p0.shape[:-2]
    t = _check_vectors(target, batch, "target")
    tol = _check_bounds(tolerance, max_passes)
    segs = np.diff(p0, axis=-2)
    lengths = _norm(segs)
    fallback = _unit(segs)
    root = p0[..., 0, :]
    total = lengths.sum(axis=-1)
    longest = lengths.max(axis=-1)
    to_t = t - root
    d = _norm(to_t)
    reachable = (d <= total) & (d >= np.maximum(0.0, 2.0 * longest - total))
    if initial is None:
        p = p0.copy()
    else:
        init = _check_points(initial, p0.shape[-2], "initial")
        p = _rechain(np.broadcast_to(init, p0.shape), root, lengths, fallback)
    before = _norm(p0[..., -1, :] - t)
    keep = before <= tol
    # Out of reach: the straight chain pointing at the target is the closest it can get.
    beyond = (d > total) & ~keep
    n = p.shape[-2]
    active = ~keep & ~beyond & (_norm(p[..., -1, :] - t) > tol)
    # Passes run on the chains still working only (gathered on a flat batch axis), so a batch
    # pays for its stragglers' extra passes per straggler, not per chain.
    flat_p = p.reshape(-1, n, 3).copy()
    flat_t = t.reshape(-1, 3)
    flat_len = lengths.reshape(-1, n - 1)
    flat_fb = fallback.reshape(-1, n - 1, 3)
    flat_root = root.reshape(-1, 3)
    flat_d = d.reshape(-1)
    flat_tol = np.broadcast_to(tol, batch).reshape(-1)
    flat_it = np.zeros(flat_p.shape[0], dtype=np.int64)
    work = np.flatnonzero(active.reshape(-1))
    for _ in range(max_passes):
        if work.size == 0:
            break
        q = flat_p[work]
        tt = flat_t[work]
        ll = flat_len[work]
        fb = flat_fb[work]
        q[:, -1] = tt
        for k in range(n - 2, -1, -1):
            seg = _unit(q[:, k] - q[:, k + 1], -fb[:, k])
            q[:, k] = q[:, k + 1] + ll[:, k, None] * seg
        q[:, 0] = flat_root[work]
        for k in range(1, n):
            seg = _unit(q[:, k] - q[:, k - 1], fb[:, k - 1])
            q[:, k] = q[:, k - 1] + ll[:, k - 1, None] * seg
        flat_it[work] += 1
        miss = _norm(q[:, -1] - tt)
        out = np.flatnonzero(miss > flat_tol[work])
        if slack_correction and out.size:
            fixed, ok = _rescale_bend(q[out], tt[out], ll[out], flat_d[work][out])
            ok &= _norm(fixed[:, -1] - tt[out]) < miss[out]
            q[out[ok]] = fixed[ok]
            miss[out[ok]] = _norm(fixed[ok][:, -1] - tt[out[ok]])
        flat_p[work] = q
        work = work[miss > flat_tol[work]]
    p = flat_p.reshape(p.shape)
    iterations = flat_it.reshape(batch)
    if beyond.any():
        direction = _unit(to_t, fallback[..., 0, :])
        cumulative = np.concatenate([np.zeros(batch + (1,)), np.cumsum(lengths, axis=-1)], axis=-1)
        straight = root[..., None, :] + cumulative[..., None] * direction[..., None, :]
        p = np.where(beyond[..., None, None], straight, p)
    if pole is not None:
        p = np.where(keep[..., None, None], p, apply_pole(p, pole))
    p = np.where(keep[..., None, None], p0, p)
    residual = _norm(p[..., -1, :] - t)
    return IKSolution(p, residual, iterations, residual <= tol, reachable)
