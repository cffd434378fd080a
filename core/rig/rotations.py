"""Rotation conventions and batched rotation maths.

The one convention used everywhere in Marionette (the same as Blender's):

* Quaternions are Hamilton, scalar first: ``(w, x, y, z)``.
* Rotations are *active* and act on *column* vectors: ``v' = R @ v``; a 4x4 transform keeps its
  translation in the last column.
* ``quat_multiply(a, b)`` rotates by ``b`` first, then by ``a`` (same order as ``R_a @ R_b``).
* Euler orders use Blender's names: order ``"XYZ"`` applies X first, then Y, then Z, so the matrix
  is ``Rz @ Ry @ Rx``.

All functions take arrays of any leading shape (``(..., 4)`` quaternions, ``(..., 3, 3)`` or
``(..., 4, 4)`` matrices, ``(..., 3)`` vectors), broadcast them, and compute in float64. Frames
come first in the arrays the rest of the code passes around (``(T, B, 4)``), but nothing here
depends on that.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

# Below this norm a vector has no usable direction.
_EPS = 1e-12


def _as_float(a: ArrayLike) -> FloatArray:
    return np.asarray(a, dtype=np.float64)


def _norm(a: FloatArray) -> FloatArray:
    """Length of vectors along the last axis, kept as a size-1 axis. ``np.linalg.norm`` with
    ``keepdims`` is several times slower on the millions of short vectors a clip makes."""
    return np.sqrt(np.einsum("...i,...i->...", a, a))[..., None]


def _check_last(a: FloatArray, n: int, what: str) -> None:
    if a.shape[-1:] != (n,):
        raise ValueError(f"{what} must have shape (..., {n}), got {a.shape}")


def _check_matrix(m: FloatArray, n: int, what: str) -> None:
    if m.shape[-2:] != (n, n):
        raise ValueError(f"{what} must have shape (..., {n}, {n}), got {m.shape}")


# --- quaternions -----------------------------------------------------------------------------


def quat_identity(shape: tuple[int, ...] = ()) -> FloatArray:
    q = np.zeros(shape + (4,))
    q[..., 0] = 1.0
    return q


def quat_normalize(q: ArrayLike) -> FloatArray:
    q = _as_float(q)
    _check_last(q, 4, "quaternion")
    n = _norm(q)
    if np.all(n > _EPS):  # the usual case: no identity fill-in (or its array) needed
        return q / n
    # A zero quaternion carries no rotation; return identity rather than NaN.
    out = np.where(n > _EPS, q / np.where(n > _EPS, n, 1.0), quat_identity(q.shape[:-1]))
    return out


def quat_conjugate(q: ArrayLike) -> FloatArray:
    q = _as_float(q)
    _check_last(q, 4, "quaternion")
    return q * np.array([1.0, -1.0, -1.0, -1.0])


quat_inverse = quat_conjugate  # for unit quaternions


def quat_multiply(a: ArrayLike, b: ArrayLike) -> FloatArray:
    a = _as_float(a)
    b = _as_float(b)
    _check_last(a, 4, "quaternion a")
    _check_last(b, 4, "quaternion b")
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_apply(q: ArrayLike, v: ArrayLike) -> FloatArray:
    """Rotate vectors ``v`` by unit quaternions ``q``."""
    q = _as_float(q)
    v = _as_float(v)
    _check_last(q, 4, "quaternion")
    _check_last(v, 3, "vector")
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> FloatArray:
    axis = _as_float(axis)
    _check_last(axis, 3, "axis")
    angle = _as_float(angle)
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    unit = axis / np.where(n > _EPS, n, 1.0)
    half = 0.5 * angle[..., None]
    return np.concatenate([np.cos(half), np.sin(half) * unit], axis=-1)


def axis_angle_from_quat(q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Return ``(axis, angle)`` with angle in ``[0, pi]``; the axis is +X for a null rotation."""
    q = quat_normalize(q)
    q = np.where(q[..., :1] < 0.0, -q, q)
    s = np.linalg.norm(q[..., 1:], axis=-1)
    angle = 2.0 * np.arctan2(s, q[..., 0])
    axis = np.where(
        (s > _EPS)[..., None], q[..., 1:] / np.where(s > _EPS, s, 1.0)[..., None], [1.0, 0.0, 0.0]
    )
    return axis, angle


def quat_from_blender_axis_angle(aa: ArrayLike) -> FloatArray:
    """Quaternions ``(..., 4)`` from axis-angle in Blender's layout ``(..., 4)`` = ``(angle, x, y,
    z)``, the axis of any length; a zero axis is no rotation (where
    :func:`quat_from_axis_angle` keeps the angle's scalar part)."""
    aa = _as_float(aa)
    _check_last(aa, 4, "axis-angle")
    axis = aa[..., 1:]
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    unit = np.where(n > 0.0, axis / np.where(n > 0.0, n, 1.0), 0.0)
    half = 0.5 * aa[..., :1]
    q = np.concatenate([np.cos(half), np.sin(half) * unit], axis=-1)
    out: FloatArray = np.where(n > 0.0, q, np.array([1.0, 0.0, 0.0, 0.0]))
    return out


def blender_axis_angle_from_quat(q: ArrayLike, fallback: ArrayLike = (0.0, 1.0, 0.0), *, carry: bool = False) -> FloatArray:
    """Axis-angle in Blender's layout ``(..., 4)`` = ``(angle, x, y, z)`` from quaternions
    ``(..., 4)``, the angle over ``[0, 2 pi)`` as the quaternion's sign gives it (no folding
    into ``[0, pi]``, unlike :func:`axis_angle_from_quat`, so a continuous quaternion curve
    gives a continuous angle curve).

    A null rotation (vector part of length <= 1e-9) has no axis of its own: it takes
    ``fallback`` (``(3,)``, or one axis per row, e.g. the value a channel holds now; Blender's
    default +Y unless given). With ``carry``, ``q`` is ``(T, 4)`` in frame order and a null
    rotation keeps the last axis defined before it (``fallback`` before the first), so the
    axis curves stay continuous through it.
    """
    q = _as_float(q)
    _check_last(q, 4, "quaternion")
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1)
    angle = 2.0 * np.arctan2(s, q[..., 0])
    ok = s > 1e-9
    axis = np.where(ok[..., None], v / np.where(ok, s, 1.0)[..., None], fallback)
    if carry and not np.all(ok):
        idx = np.maximum.accumulate(np.where(ok, np.arange(ok.shape[0]), -1))
        axis = np.where(idx[:, None] >= 0, axis[np.maximum(idx, 0)], fallback)
    return np.concatenate([angle[..., None], axis], axis=-1)


def quat_angle(q: ArrayLike) -> FloatArray:
    """Rotation angle of unit quaternions, in ``[0, pi]``."""
    q = _as_float(q)
    _check_last(q, 4, "quaternion")
    return 2.0 * np.arctan2(np.linalg.norm(q[..., 1:], axis=-1), np.abs(q[..., 0]))


def quat_angle_between(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Angle of the rotation that takes ``a`` to ``b``."""
    return quat_angle(quat_multiply(b, quat_conjugate(a)))


def quat_from_matrix(m: ArrayLike) -> FloatArray:
    """Unit quaternion from rotation matrices ``(..., 3, 3)`` (or the 3x3 block of 4x4s).

    Uses the largest-diagonal branch (Shepperd) for each matrix, so it stays accurate near
    180 degree rotations. The result has ``w >= 0``.
    """
    m = _as_float(m)
    if m.shape[-2:] == (4, 4):
        m = m[..., :3, :3]
    _check_matrix(m, 3, "rotation matrix")
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    trace = m00 + m11 + m22
    # Most rotations have a clearly positive w branch (trace > -0.5 means less than ~140 degrees):
    # compute those directly; only the rest pick their largest-diagonal branch.
    easy = trace > -0.5
    if np.all(easy):  # the usual case: no masked copies, and w = 1 + trace > 0 needs no flip
        q = np.empty(m.shape[:-2] + (4,))
        np.add(trace, 1.0, out=q[..., 0])
        np.subtract(m[..., 2, 1], m[..., 1, 2], out=q[..., 1])
        np.subtract(m[..., 0, 2], m[..., 2, 0], out=q[..., 2])
        np.subtract(m[..., 1, 0], m[..., 0, 1], out=q[..., 3])
        q /= _norm(q)
        return q
    q = np.empty(m.shape[:-2] + (4,))
    if np.any(easy):
        q[easy, 0] = 1.0 + trace[easy]
        q[easy, 1] = m[easy, 2, 1] - m[easy, 1, 2]
        q[easy, 2] = m[easy, 0, 2] - m[easy, 2, 0]
        q[easy, 3] = m[easy, 1, 0] - m[easy, 0, 1]
    hard = ~easy
    if np.any(hard):
        h = m[hard]
        d0, d1, d2 = h[:, 0, 0], h[:, 1, 1], h[:, 2, 2]
        t = d0 + d1 + d2
        cand = np.stack(
            [
                np.stack([1 + t, h[:, 2, 1] - h[:, 1, 2], h[:, 0, 2] - h[:, 2, 0], h[:, 1, 0] - h[:, 0, 1]], -1),
                np.stack([h[:, 2, 1] - h[:, 1, 2], 1 + d0 - d1 - d2, h[:, 0, 1] + h[:, 1, 0], h[:, 0, 2] + h[:, 2, 0]], -1),
                np.stack([h[:, 0, 2] - h[:, 2, 0], h[:, 0, 1] + h[:, 1, 0], 1 - d0 + d1 - d2, h[:, 1, 2] + h[:, 2, 1]], -1),
                np.stack([h[:, 1, 0] - h[:, 0, 1], h[:, 0, 2] + h[:, 2, 0], h[:, 1, 2] + h[:, 2, 1], 1 - d0 - d1 + d2], -1),
            ],
            axis=-2,
        )
        choice = np.argmax(np.stack([t, d0, d1, d2], -1), axis=-1)
        q[hard] = np.take_along_axis(cand, choice[:, None, None], axis=-2)[:, 0, :]
    q /= _norm(q)
    return np.where(q[..., :1] < 0.0, -q, q)


def matrix_from_quat(q: ArrayLike) -> FloatArray:
    """3x3 rotation matrices from (not necessarily unit) quaternions."""
    q = quat_normalize(q)
    w, x, y, z = (q[..., i] for i in range(4))
    out = np.empty(q.shape[:-1] + (3, 3))
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    out[..., 0, 0] = 1 - 2 * (yy + zz)
    out[..., 0, 1] = 2 * (xy - wz)
    out[..., 0, 2] = 2 * (xz + wy)
    out[..., 1, 0] = 2 * (xy + wz)
    out[..., 1, 1] = 1 - 2 * (xx + zz)
    out[..., 1, 2] = 2 * (yz - wx)
    out[..., 2, 0] = 2 * (xz - wy)
    out[..., 2, 1] = 2 * (yz + wx)
    out[..., 2, 2] = 1 - 2 * (xx + yy)
    return out


def _unit_pair(a: ArrayLike, b: ArrayLike) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """Two broadcast direction arrays made unit length, and where both had a length at all."""
    a = _as_float(a)
    b = _as_float(b)
    _check_last(a, 3, "vector a")
    _check_last(b, 3, "vector b")
    a, b = np.broadcast_arrays(a, b)
    na = _norm(a)
    nb = _norm(b)
    valid = (na[..., 0] > _EPS) & (nb[..., 0] > _EPS)
    if np.all(valid):  # the usual case: divide without guarding the zero lengths
        return a / na, b / nb, valid
    return a / np.where(na > _EPS, na, 1.0), b / np.where(nb > _EPS, nb, 1.0), valid


def quat_between_vectors(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Minimal rotation taking direction ``a`` onto direction ``b``.

    For opposite directions the rotation is 180 degrees about an axis perpendicular to ``a``
    (chosen deterministically); a zero-length input gives the identity.
    """
    ua, ub, valid = _unit_pair(a, b)
    d = np.sum(ua * ub, axis=-1)
    w = 1.0 + d
    xyz = np.cross(ua, ub)
    # Opposite directions: any perpendicular axis works; take the one least aligned with a.
    opposite = w < 1e-10
    helper = np.where(
        (np.abs(ua[..., 0]) < 0.9)[..., None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    )
    perp = np.cross(ua, helper)
    perp = perp / np.maximum(np.linalg.norm(perp, axis=-1, keepdims=True), _EPS)
    q = np.concatenate([w[..., None], xyz], axis=-1)
    q = np.where(opposite[..., None], np.concatenate([np.zeros_like(w)[..., None], perp], -1), q)
    q = np.where(valid[..., None], q, quat_identity(q.shape[:-1]))
    return quat_normalize(q)


def matrix_between_vectors(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Rotation matrices ``(..., 3, 3)`` of the minimal rotation taking direction ``a`` onto ``b``.

    Rodrigues' formula directly (no quaternion round trip); nearly opposite directions take the
    quaternion path of :func:`quat_between_vectors`, zero-length inputs give the identity.
    """
    ua, ub, valid = _unit_pair(a, b)
    # v = ua x ub by components (what np.cross computes, without its temporaries).
    vx = ua[..., 1] * ub[..., 2] - ua[..., 2] * ub[..., 1]
    vy = ua[..., 2] * ub[..., 0] - ua[..., 0] * ub[..., 2]
    vz = ua[..., 0] * ub[..., 1] - ua[..., 1] * ub[..., 0]
    c = np.einsum("...i,...i->...", ua, ub)
    near_opposite = c < -1.0 + 1e-6
    # R = c I + [v]x + v v^T / (1 + c), written out element by element (no matrix products).
    h = 1.0 / np.where(near_opposite, 1.0, 1.0 + c)
    hx, hy, hz = h * vx, h * vy, h * vz
    out = np.empty(c.shape + (3, 3))
    out[..., 0, 0] = c + hx * vx
    out[..., 0, 1] = hx * vy - vz
    out[..., 0, 2] = hx * vz + vy
    out[..., 1, 0] = hy * vx + vz
    out[..., 1, 1] = c + hy * vy
    out[..., 1, 2] = hy * vz - vx
    out[..., 2, 0] = hz * vx - vy
    out[..., 2, 1] = hz * vy + vx
    out[..., 2, 2] = c + hz * vz
    degenerate = ~valid
    if np.any(degenerate):
        out[degenerate] = np.eye(3)
    if np.any(near_opposite & ~degenerate):
        sel = near_opposite & ~degenerate
        out[sel] = matrix_from_quat(quat_between_vectors(ua[sel], ub[sel]))
    return out


def swing_twist(q: ArrayLike, axis: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Split ``q = swing * twist`` where ``twist`` turns about ``axis`` and ``swing`` is
    perpendicular to it. A 180 degree swing leaves the twist undefined; identity is returned."""
    q = _as_float(q)
    axis = _as_float(axis)
    _check_last(q, 4, "quaternion")
    _check_last(axis, 3, "axis")
    unit = axis / np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), _EPS)
    proj = np.sum(q[..., 1:] * unit, axis=-1, keepdims=True) * unit
    twist = np.concatenate([q[..., :1], proj], axis=-1)
    twist = quat_normalize(twist)
    swing = quat_multiply(q, quat_conjugate(twist))
    return swing, twist


def quat_slerp(a: ArrayLike, b: ArrayLike, t: ArrayLike) -> FloatArray:
    """Spherical interpolation along the shorter arc; ``t`` broadcasts against ``a[..., 0]``."""
    a = quat_normalize(a)
    b = quat_normalize(b)
    t = _as_float(t)[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0.0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-6
    safe = np.where(small, 1.0, s)
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(small, t, np.sin(t * theta) / safe)
    return quat_normalize(wa * a + wb * b)


def make_quat_continuous(q: ArrayLike, axis: int = 0, *, copy: bool = True) -> FloatArray:
    """Flip signs along ``axis`` (time) so consecutive quaternions lie in one hemisphere.

    ``q`` and ``-q`` are the same rotation, but interpolating keys between them takes the long
    way round; Blender interpolates quaternion channels component-wise, so keys must be continuous.
    With ``copy=False`` a float64 array ``q`` is flipped in place (for a caller's own buffer).
    """
    q = np.array(q, dtype=np.float64, copy=True) if copy else np.asarray(q, dtype=np.float64)
    _check_last(q, 4, "quaternion")
    t = np.moveaxis(q, axis, 0)  # a view: flipping it flips q
    if t.shape[0] > 1:
        d = np.einsum("...i,...i->...", t[1:], t[:-1])
        flips = np.cumsum(d < 0.0, axis=0) % 2
        if flips.any():
            t[1:] *= (1.0 - 2.0 * flips)[..., None]  # times +-1: exact
    return q


# --- Euler angles ----------------------------------------------------------------------------

_AXIS = {"X": 0, "Y": 1, "Z": 2}
EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def _check_order(order: str) -> str:
    if order not in EULER_ORDERS:
        raise ValueError(f"Euler order must be one of {EULER_ORDERS}, got {order!r}")
    return order


def quat_from_euler(angles: ArrayLike, order: str = "XYZ") -> FloatArray:
    """Quaternions from Euler angles in Blender's convention (``order[0]`` is applied first).

    The product ``q_k q_j q_i`` of the three axis turns, written out: ``p`` is +1 when the axes
    ``i, j, k`` (first applied to last) turn X to Y to Z, else -1."""
    angles = _as_float(angles)
    _check_last(angles, 3, "Euler angles")
    _check_order(order)
    i, j, k = (_AXIS[ch] for ch in order)
    p = 1.0 if (j - i) % 3 == 1 else -1.0
    half = 0.5 * angles
    c, s = np.cos(half), np.sin(half)
    ci, cj, ck = c[..., i], c[..., j], c[..., k]
    si, sj, sk = s[..., i], s[..., j], s[..., k]
    cc, ss = ci * cj, si * sj
    q = np.empty(angles.shape[:-1] + (4,))
    q[..., 0] = ck * cc + p * sk * ss
    q[..., 1 + i] = ck * cj * si - p * sk * ci * sj
    q[..., 1 + j] = ck * ci * sj + p * sk * cj * si
    q[..., 1 + k] = sk * cc - p * ck * ss
    return q


def euler_from_matrix(m: ArrayLike, order: str = "XYZ") -> FloatArray:
    """Euler angles ``(..., 3)`` (indexed by axis X, Y, Z) from rotation matrices."""
    m = _as_float(m)
    if m.shape[-2:] == (4, 4):
        m = m[..., :3, :3]
    _check_matrix(m, 3, "rotation matrix")
    _check_order(order)
    i, j, k = (_AXIS[c] for c in order)
    # Parity of the permutation decides the signs (classic Shoemake formulation, specialised to
    # Tait-Bryan orders applied first-to-last, R = R_k R_j R_i).
    sign = 1.0 if (j - i) % 3 == 1 else -1.0
    sy = -sign * m[..., k, i]
    sy = np.clip(sy, -1.0, 1.0)
    cy = np.sqrt(np.maximum(0.0, 1.0 - sy * sy))
    regular = cy > 1e-9
    ai = np.where(regular, np.arctan2(sign * m[..., k, j], m[..., k, k]), np.arctan2(-sign * m[..., j, k], m[..., j, j]))
    aj = np.arcsin(sy)
    ak = np.where(regular, np.arctan2(sign * m[..., j, i], m[..., i, i]), 0.0)
    out = np.zeros(m.shape[:-2] + (3,))
    out[..., i] = ai
    out[..., j] = aj
    out[..., k] = ak
    return out


def euler_from_quat(q: ArrayLike, order: str = "XYZ") -> FloatArray:
    return euler_from_matrix(matrix_from_quat(q), order)


def make_euler_continuous(angles: ArrayLike, order: str = "XYZ", axis: int = 0) -> FloatArray:
    """Choose, per frame, the Euler triple (of the two equivalent ones, each shifted by 2*pi)
    closest to the previous frame's, so F-curves do not jump by 2*pi."""
    e = np.array(angles, dtype=np.float64, copy=True)
    _check_last(e, 3, "Euler angles")
    _check_order(order)
    e = np.moveaxis(e, axis, 0)
    i, j, k = (_AXIS[c] for c in order)
    two_pi = 2.0 * np.pi
    if e.shape[0] < 2:
        return np.moveaxis(e, 0, axis)
    alt = e.copy()
    alt[..., i] += np.pi
    alt[..., j] = np.pi - alt[..., j]
    alt[..., k] += np.pi
    forms = np.stack([e, alt])  # (2, T, ..., 3): the triple as given, and its twin

    def apart(a: FloatArray, b: FloatArray) -> FloatArray:
        x = a - b
        return np.asarray(np.sum(np.abs(x - two_pi * np.round(x / two_pi)), axis=-1))

    # How far each form of a frame is from each form of the one before (2*pi turns aside): the
    # only choice that carries from frame to frame is the form, a flag per frame.
    d = [[apart(forms[now, 1:], forms[before, :-1]) for now in (0, 1)] for before in (0, 1)]
    chosen = np.zeros(e.shape[:-1], dtype=np.int64)
    for t in range(1, e.shape[0]):
        before = chosen[t - 1]
        chosen[t] = np.where(before == 0, d[0][1][t - 1] < d[0][0][t - 1], d[1][1][t - 1] < d[1][0][t - 1])
    picked = np.where(chosen[..., None] == 1, alt, e)
    # Then whole turns: each frame as near the one before as 2*pi steps allow, summed along.
    steps = np.round((picked[:-1] - picked[1:]) / two_pi)
    picked[1:] += two_pi * np.cumsum(steps, axis=0)
    e = picked
    return np.moveaxis(e, 0, axis)


# --- 4x4 transforms --------------------------------------------------------------------------


def transform_from_parts(
    rotation: ArrayLike, translation: ArrayLike, scale: ArrayLike | None = None
) -> FloatArray:
    """4x4 matrices ``T @ R @ S`` from quaternions, translations and optional scales."""
    rotation = _as_float(rotation)
    translation = _as_float(translation)
    r = matrix_from_quat(rotation)
    if scale is not None:
        r = r * _as_float(scale)[..., None, :]
    shape = np.broadcast_shapes(r.shape[:-2], translation.shape[:-1])
    out = np.zeros(shape + (4, 4))
    out[..., :3, :3] = r
    out[..., :3, 3] = translation
    out[..., 3, 3] = 1.0
    return out


def parts_from_transform(m: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Split 4x4 matrices into ``(quaternion, translation, scale)``; assumes no shear.

    A negative determinant is folded into a negative X scale so the rotation stays proper.
    """
    m = _as_float(m)
    _check_matrix(m, 4, "transform")
    basis = m[..., :3, :3]
    scale = np.linalg.norm(basis, axis=-2)
    det = np.linalg.det(basis)
    scale[..., 0] = np.where(det < 0.0, -scale[..., 0], scale[..., 0])
    rot = basis / np.where(np.abs(scale) > _EPS, scale, 1.0)[..., None, :]
    return quat_from_matrix(rot), m[..., :3, 3].copy(), scale


def invert_transform(m: ArrayLike) -> FloatArray:
    m = _as_float(m)
    _check_matrix(m, 4, "transform")
    return np.linalg.inv(m)


def invert_rigid(m: ArrayLike) -> FloatArray:
    """Inverse of rotation + translation 4x4s (no scale), exact and cheaper than ``inv``."""
    m = _as_float(m)
    _check_matrix(m, 4, "transform")
    out = np.zeros_like(m)
    rt = np.swapaxes(m[..., :3, :3], -1, -2)
    out[..., :3, :3] = rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", rt, m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def invert_affine(m: ArrayLike) -> FloatArray:
    """Inverse of 4x4 affine matrices (any invertible 3x3 part, last row ``0 0 0 1``) in closed
    form (cofactors), much cheaper than a general inverse over many matrices."""
    m = _as_float(m)
    _check_matrix(m, 4, "transform")
    if m.ndim == 2:
        return np.asarray(np.linalg.inv(m), dtype=np.float64)
    a = m[..., :3, :3]
    c0, c1, c2 = a[..., :, 0], a[..., :, 1], a[..., :, 2]

    def cross(u: FloatArray, v: FloatArray) -> FloatArray:
        return np.stack(
            [u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1], u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2], u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]],
            axis=-1,
        )

    rows = np.stack([cross(c1, c2), cross(c2, c0), cross(c0, c1)], axis=-2)
    det = np.sum(c0 * rows[..., 0, :], axis=-1)
    inv = rows / det[..., None, None]
    out = np.zeros_like(m)
    out[..., :3, :3] = inv
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", inv, m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def orthonormalize(m: ArrayLike) -> FloatArray:
    """Nearest rotation matrix (polar decomposition via SVD) of ``(..., 3, 3)`` matrices."""
    m = _as_float(m)
    _check_matrix(m, 3, "matrix")
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    det = np.linalg.det(r)
    u[..., :, 2] *= np.where(det < 0.0, -1.0, 1.0)[..., None]
    return u @ vt
