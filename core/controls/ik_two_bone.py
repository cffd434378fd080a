"""Analytic two-bone IK on point chains (root, middle, end), batched as columns or, for a few
chains, in plain floats."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ..rig.rotation_kernels import cross
from ..rig.rotations import FloatArray
from .ik_common import (
    _EPS,
    _FEW_CHAINS,
    _PLANE_EPS,
    _SMALL_BATCH,
    DEFAULT_TOLERANCE,
    REACH_MARGIN,
    BoolArray,
    IKSolution,
    _check_bounds,
    _check_points,
    _check_vectors,
)


def two_bone_ik(
    points: ArrayLike,
    target: ArrayLike,
    pole: ArrayLike | None = None,
    *,
    softness: float = 0.0,
    tolerance: ArrayLike = DEFAULT_TOLERANCE,
) -> IKSolution:
    """Analytic two-bone solve of chains ``(..., 3, 3)`` (root, middle, end) toward ``target``.

    The triangle is built from the two current segment lengths and the target distance, clamped
    ``REACH_MARGIN`` inside ``[|a - b|, a + b]``. The middle point bends toward ``pole`` (a point,
    ``(..., 3)``): the bend plane contains the root, the target and the pole. Without a usable
    pole (none given, or on the root-target line) the chain keeps its existing bend direction;
    if that is degenerate too (a straight chain along the target line), a fixed perpendicular.

    ``softness`` (a fraction of the chain length, 0 = off) eases the distance toward full
    extension over the last ``softness * length`` so the knee does not snap straight as the
    target crosses the reach; targets in that band are then approached, not hit. Chains already
    within ``tolerance`` of the target keep their points (``iterations == 0``).
    """
    p = _check_points(points, 3)
    batch = p.shape[:-2]
    t = _check_vectors(target, batch, "target")
    if not (math.isfinite(softness) and 0.0 <= softness < 1.0):
        raise ValueError(f"softness must be in [0, 1), got {softness}")
    tol = _check_bounds(tolerance, 1)
    if tol.ndim:
        tol = np.broadcast_to(tol, batch).reshape(-1)
    count = math.prod(batch)
    if count <= _FEW_CHAINS and softness == 0.0 and tol.ndim == 0:
        rows = _two_bone_rows(
            p.reshape(count, 9).tolist(), t.reshape(count, 3).tolist(),
            None if pole is None else _check_vectors(pole, batch, "pole").reshape(count, 3).tolist(), float(tol),
        )
        if rows is not None:
            pts, res, moved, reach = rows
            residual_rows = np.array(res)
            return IKSolution(
                points=np.array(pts).reshape(p.shape),
                residual=residual_rows.reshape(batch),
                iterations=np.array(moved, dtype=np.int64).reshape(batch),
                converged=(residual_rows <= tol).reshape(batch),
                reachable=np.array(reach).reshape(batch),
            )
    # Coordinates first, chains last: (3, M) arrays are contiguous, where (M, 3) slices of the
    # points are strided with an inner length of 3, about ten times slower per operation.
    # Always copies: the solve writes into comp and tc.
    comp = p.reshape(count, 9).T.copy().reshape(3, 3, count)
    tc = t.reshape(count, 3).T.copy()
    pc = None if pole is None else _check_vectors(pole, batch, "pole").reshape(count, 3).T.copy()
    d, lo, hi, keep = _two_bone_columns(comp, tc, pc, softness, tol)
    residual = _col_norm(np.subtract(comp[2], tc, out=tc))
    out = comp.reshape(9, count).T.reshape(p.shape)
    return IKSolution(
        points=out,
        residual=residual.reshape(batch),
        iterations=(~keep).astype(np.int64).reshape(batch),
        converged=(residual <= tol).reshape(batch),
        reachable=((d >= lo) & (d <= hi)).reshape(batch),
    )


def _col_dot(a: FloatArray, b: FloatArray) -> FloatArray:
    # Rows summed in order, (a0 b0 + a1 b1) + a2 b2, whatever the batch size, so a chain solves
    # bit for bit the same alone or batched (einsum's order depends on the size). Small
    # batches: two calls (a reduction over the outer axis adds the rows in order). Large ones:
    # accumulated in place, as there every fresh (3, M) temporary costs more (allocation, page
    # faults) than the arithmetic.
    if a.shape[-1] <= _SMALL_BATCH:
        small: FloatArray = np.add.reduce(a * b, axis=0)
        return small
    out: FloatArray = a[0] * b[0]
    tmp = a[1] * b[1]
    out += tmp
    np.multiply(a[2], b[2], out=tmp)
    out += tmp
    return out


def _col_norm(a: FloatArray) -> FloatArray:
    out: FloatArray = np.sqrt(_col_dot(a, a))
    return out


def _col_perpendicular(axis: FloatArray) -> FloatArray:
    """A unit vector perpendicular to each unit column of ``axis`` ``(3, M)``."""
    helper = np.where(np.abs(axis[0]) < 0.9, np.array([[1.0], [0.0], [0.0]]), np.array([[0.0], [1.0], [0.0]]))
    c = cross(axis.T, helper.T).T
    return c / _col_norm(c)


def _two_bone_columns(
    comp: FloatArray, target: FloatArray, pole: FloatArray | None, softness: float, tol: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, BoolArray]:
    """The two-bone solve on ``(3, M)`` columns ``comp`` ``(3, 3, M)`` (root, middle, end),
    which it overwrites with the new points; chains already within ``tol`` of the target keep
    theirs. Returns the target distance and reach interval ``(M,)`` and the kept mask.

    On large batches every fresh ``(3, M)`` array costs more than the arithmetic on it (the
    allocator hands back memory that must be faulted in again), so the steps write into one
    scratch array and into ``comp`` in place, keeping the operation order (and rounding) of the
    plain formulas in the comments."""
    root, mid, end = comp[0], comp[1], comp[2]
    work = end - mid
    b = _col_norm(work)
    np.subtract(mid, root, out=work)
    a = _col_norm(work)
    np.subtract(end, target, out=work)
    keep = _col_norm(work) <= tol
    # Chains already there keep their points: set them aside before comp is overwritten.
    kept = comp[:, :, keep] if keep.any() else None
    hi = a + b
    lo = np.abs(a - b)
    to_t = target - root
    d = _col_norm(to_t)
    if (d > _EPS).all():
        axis = np.divide(to_t, d, out=to_t)
    else:
        # A target on the root has no direction: keep the chain's current one.
        current = end - root
        current = np.where(_col_norm(current) > _EPS, current, mid - root)
        current = np.where(_col_norm(current) > _EPS, current, np.array([[0.0], [0.0], [1.0]]))
        axis = np.where(d > _EPS, to_t, current)
        axis = axis / _col_norm(axis)
    d_eff = d
    if softness > 0.0:
        # Exponential ease (the usual "soft IK"): slope 1 where it starts, so the knee's angular
        # speed stays continuous, and it tends to full reach without ever arriving.
        s = softness * hi
        start = hi - s
        ease = hi - s * np.exp(-(d - start) / np.maximum(s, _EPS))
        d_eff = np.where(d > start, ease, d)
    margin = REACH_MARGIN * hi
    floor = lo + margin
    dc = np.minimum(np.maximum(d_eff, floor), np.maximum(hi - margin, floor))
    # Projection of the middle point on the axis and its height off it. h comes from a^2 - x^2,
    # so |mid - root| = a holds to rounding whatever the angle.
    x = (dc * dc + a * a - b * b) / (2.0 * np.maximum(dc, _EPS))
    h = np.sqrt(np.maximum(a * a - x * x, 0.0))
    limit = _PLANE_EPS * np.maximum(hi, _EPS)

    def existing_bend() -> FloatArray:
        # upper - (upper . axis) axis; called before comp is overwritten.
        upper = mid - root
        existing = upper - axis * _col_dot(upper, axis)
        ok = _col_norm(existing) > limit
        out: FloatArray = existing if ok.all() else np.where(ok, existing, _col_perpendicular(axis))
        return out

    if pole is None:
        bend = existing_bend()
    else:
        # to_pole - (to_pole . axis) axis
        pole_perp = pole - root
        np.multiply(axis, _col_dot(pole_perp, axis), out=work)
        pole_perp -= work
        # A non-finite pole compares False: such a pole is unusable, like one on the axis.
        pole_ok = _col_norm(pole_perp) > limit
        bend = pole_perp if pole_ok.all() else np.where(pole_ok, pole_perp, existing_bend())
    length = _col_norm(bend)
    if (length > _EPS).all():
        # bend is a fresh array here whichever branch made it.
        bend /= length
    else:
        bend = np.where(length > _EPS, bend / np.where(length > _EPS, length, 1.0), _col_perpendicular(axis))
    # mid = root + x * axis + h * bend
    np.multiply(x, axis, out=mid)
    mid += root
    np.multiply(h, bend, out=work)
    mid += work
    # end = root + dc * axis
    np.multiply(dc, axis, out=end)
    end += root
    if kept is not None:
        comp[:, :, keep] = kept
    return d, lo, hi, keep


def _two_bone_rows(
    chains: list[list[float]], targets: list[list[float]], poles: list[list[float]] | None, tol: float
) -> tuple[list[list[float]], list[float], list[int], list[bool]] | None:
    """:func:`_two_bone_columns` (without softness) on a few chains in plain floats: the same
    operations in the same order, so the same points to the bit, without the dozens of numpy
    calls that would cost more than the arithmetic on a live frame's four limbs. ``chains`` are
    ``(root, middle, end)`` flattened to nine floats each. Returns the new points, the
    residuals, 1 per chain that moved (0 kept) and whether each target was within reach; or
    ``None`` when some chain is not finite or needs a degenerate branch (a target on the root,
    no bend direction), which are left to the columns."""
    out: list[list[float]] = []
    residuals: list[float] = []
    moved: list[int] = []
    reach: list[bool] = []
    sqrt = math.sqrt
    for i, (r0, r1, r2, m0, m1, m2, e0, e1, e2) in enumerate(chains):
        t0, t1, t2 = targets[i]
        if not math.isfinite(r0 + r1 + r2 + m0 + m1 + m2 + e0 + e1 + e2 + t0 + t1 + t2):
            return None  # the columns' NaN handling (np.minimum passes NaN, min may not)
        w0, w1, w2 = e0 - m0, e1 - m1, e2 - m2
        b = sqrt((w0 * w0 + w1 * w1) + w2 * w2)
        w0, w1, w2 = m0 - r0, m1 - r1, m2 - r2
        a = sqrt((w0 * w0 + w1 * w1) + w2 * w2)
        w0, w1, w2 = e0 - t0, e1 - t1, e2 - t2
        miss = sqrt((w0 * w0 + w1 * w1) + w2 * w2)
        hi = a + b
        lo = abs(a - b)
        x0, x1, x2 = t0 - r0, t1 - r1, t2 - r2
        d = sqrt((x0 * x0 + x1 * x1) + x2 * x2)
        if not d > _EPS:
            return None
        reach.append(lo <= d <= hi)
        if miss <= tol:
            # Already there: the points stay as they are.
            out.append([r0, r1, r2, m0, m1, m2, e0, e1, e2])
            residuals.append(miss)
            moved.append(0)
            continue
        x0, x1, x2 = x0 / d, x1 / d, x2 / d
        margin = REACH_MARGIN * hi
        floor = lo + margin
        dc = min(max(d, floor), max(hi - margin, floor))
        x = (dc * dc + a * a - b * b) / (2.0 * max(dc, _EPS))
        h = sqrt(max(a * a - x * x, 0.0))
        limit = _PLANE_EPS * max(hi, _EPS)
        usable = False
        if poles is not None:
            p0, p1, p2 = poles[i]
            p0, p1, p2 = p0 - r0, p1 - r1, p2 - r2
            along = (p0 * x0 + p1 * x1) + p2 * x2
            b0, b1, b2 = p0 - x0 * along, p1 - x1 * along, p2 - x2 * along
            # A non-finite pole compares False: such a pole is unusable, like one on the axis.
            usable = sqrt((b0 * b0 + b1 * b1) + b2 * b2) > limit
        if not usable:
            u0, u1, u2 = m0 - r0, m1 - r1, m2 - r2
            along = (u0 * x0 + u1 * x1) + u2 * x2
            b0, b1, b2 = u0 - x0 * along, u1 - x1 * along, u2 - x2 * along
            if not sqrt((b0 * b0 + b1 * b1) + b2 * b2) > limit:
                return None
        length = sqrt((b0 * b0 + b1 * b1) + b2 * b2)
        if not length > _EPS:
            return None
        b0, b1, b2 = b0 / length, b1 / length, b2 / length
        m0, m1, m2 = (x * x0 + r0) + h * b0, (x * x1 + r1) + h * b1, (x * x2 + r2) + h * b2
        e0, e1, e2 = dc * x0 + r0, dc * x1 + r1, dc * x2 + r2
        w0, w1, w2 = e0 - t0, e1 - t1, e2 - t2
        out.append([r0, r1, r2, m0, m1, m2, e0, e1, e2])
        residuals.append(sqrt((w0 * w0 + w1 * w1) + w2 * w2))
        moved.append(1)
    return out, residuals, moved, reach
