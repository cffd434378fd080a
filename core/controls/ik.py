"""Inverse kinematics: analytic two-bone, FABRIK and CCD, on points and on skeleton paths.

Conventions: points are skeleton-space positions, arrays carry any leading batch shape (frames,
chains, or both) followed by the chain's points ``(..., N, 3)``: the root pivot first, the end point
last. Targets and poles are ``(..., 3)``. Everything is float64; rotations follow
:mod:`core.rig.rotations` (w-first Hamilton quaternions, active, column vectors).

Every solve returns an :class:`IKSolution` (or :class:`ChainSolve` on a skeleton) with, per batch
item, the residual (distance from end point to target, in skeleton units), the number of
iterations (FABRIK: backward+forward passes; CCD: tip-to-root sweeps; two-bone: 1, or 0 when the
chain was already there), ``converged`` (residual within tolerance) and ``reachable`` (the target
lies within the chain's reach, before any joint limit).

Defaults follow SPEC 7.2: stop within 0.001 units or after 16 passes; the two-bone triangle is
clamped just inside its reachable interval (by ``REACH_MARGIN`` of the chain length) so the chain
never becomes exactly straight or folded, where the bend direction would be lost. Segment
lengths are always those of the current pose: translation or scale animation changes them, and
the result is judged by the residual after writeback.

Three additions to the textbook solvers, each measured in the tests:

* FABRIK rescales the sideways bend of chains that run forward along the target line after a
  pass (``slack_correction``); plain FABRIK misses 16 passes on a quarter of 10-joint chains
  started straight, nearly all near full reach, where its passes barely change the bend.
* A FABRIK pole turns the intermediate points together about the root-end line (see
  :func:`apply_pole`); for two bones that is the usual pole plane.
* With joint limits, hinges are honoured during writeback (the parent bone is twisted so the
  hinge axis is normal to the bend) and CCD bends a hinge by distance, not by aim; both stop
  a one-way knee from stalling straight (see ``_hinge_aware_rotations``, ``_hinge_reach_step``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rig.rotation_kernels import cross, quat_between_unit, quat_conj, quat_mul, rotate, rotation_matrices
from ..rig.rotations import FloatArray
from .chains import PathKinematics
from .joint_limits import HingeLimit, JointLimit, at_limits, clamp_angle, project_rotations, wrap_angle

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


# --- two-bone --------------------------------------------------------------------------------


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


# --- FABRIK ----------------------------------------------------------------------------------


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


# --- CCD -------------------------------------------------------------------------------------


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


# --- solving a path on a skeleton ------------------------------------------------------------


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


def _signed_angle(a: FloatArray, b: FloatArray, axis: FloatArray) -> FloatArray:
    """Signed angle from ``a`` to ``b`` about ``axis`` (their parts normal to it)."""
    out: FloatArray = np.arctan2(_dot(cross(a, b), axis), _dot(a, b) - _dot(a, axis) * _dot(b, axis))
    return out


def _axis_turn(axis: FloatArray, angle: FloatArray) -> FloatArray:
    half = 0.5 * angle
    out: FloatArray = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * axis], axis=-1)
    return out


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
