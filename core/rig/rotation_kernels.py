"""Lean rotation kernels for the solvers' inner loops.

Same convention as :mod:`core.rig.rotations` (w-first Hamilton quaternions, active, column vectors,
``quat_mul(a, b)`` applies ``b`` first) and the same results to rounding; these only trade the
general helpers' flexibility for fewer numpy calls. A control stack evaluates a few hundred tiny
``(1, 4)`` operations per frame, where numpy's per-call overhead, not arithmetic, sets the cost:
each kernel here is an outer product and one matrix product against a constant table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .rotations import FloatArray

_EPS = 1e-12


def _quat_mul_table() -> FloatArray:
    # out_k = sum_ij a_i b_j T[i*4 + j, k] for the Hamilton product, w first.
    t = np.zeros((16, 4))
    rows = {
        0: [(0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, -1)],
        1: [(0, 1, 1), (1, 0, 1), (2, 3, 1), (3, 2, -1)],
        2: [(0, 2, 1), (1, 3, -1), (2, 0, 1), (3, 1, 1)],
        3: [(0, 3, 1), (1, 2, 1), (2, 1, -1), (3, 0, 1)],
    }
    for k, terms in rows.items():
        for i, j, s in terms:
            t[i * 4 + j, k] = s
    return t


def _matrix_table() -> FloatArray:
    # Entries of the rotation matrix as quadratic forms in (w, x, y, z); exact for unit q and
    # scaled by |q|^2 otherwise (divided out by the caller).
    t = np.zeros((16, 9))

    def add(r: int, c: int, i: int, j: int, s: float) -> None:
        t[i * 4 + j, r * 3 + c] += s

    w, x, y, z = 0, 1, 2, 3
    for i, s in ((w, 1), (x, 1), (y, -1), (z, -1)):
        add(0, 0, i, i, s)
    for i, s in ((w, 1), (x, -1), (y, 1), (z, -1)):
        add(1, 1, i, i, s)
    for i, s in ((w, 1), (x, -1), (y, -1), (z, 1)):
        add(2, 2, i, i, s)
    for r, c, i, j, s in (
        (0, 1, x, y, 2), (0, 1, w, z, -2), (1, 0, x, y, 2), (1, 0, w, z, 2),
        (0, 2, x, z, 2), (0, 2, w, y, 2), (2, 0, x, z, 2), (2, 0, w, y, -2),
        (1, 2, y, z, 2), (1, 2, w, x, -2), (2, 1, y, z, 2), (2, 1, w, x, 2),
    ):
        add(r, c, i, j, s)
    return t


def _cross_table() -> FloatArray:
    t = np.zeros((9, 3))
    for i, j, k in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):
        t[i * 3 + j, k] = 1.0
        t[j * 3 + i, k] = -1.0
    return t


_QUAT_MUL = _quat_mul_table()
_MATRIX = _matrix_table()
_CROSS = _cross_table()
_CONJ = np.array([1.0, -1.0, -1.0, -1.0])


def quat_mul(a: FloatArray, b: FloatArray) -> FloatArray:
    """Hamilton product ``a * b`` of ``(..., 4)`` quaternions (broadcast)."""
    outer = a[..., :, None] * b[..., None, :]
    out: FloatArray = outer.reshape(outer.shape[:-2] + (16,)) @ _QUAT_MUL
    return out


def quat_conj(q: FloatArray) -> FloatArray:
    out: FloatArray = q * _CONJ
    return out


def rotation_matrices(q: FloatArray, unit: bool = False) -> FloatArray:
    """``(..., 3, 3)`` rotation matrices of quaternions ``(..., 4)``; pass ``unit=True`` only
    for quaternions already of unit length (it skips the normalisation)."""
    lead = q.shape[:-1]
    m = (q[..., :, None] * q[..., None, :]).reshape(lead + (16,)) @ _MATRIX
    if not unit:
        norm2 = np.einsum("...i,...i->...", q, q)
        # In place on the fresh arrays (the same arithmetic as a masked copy, fewer calls: this
        # runs a few dozen times per live frame). Not above _EPS, NaN included: divide by 1.
        if lead:
            norm2[~(norm2 > _EPS)] = 1.0
            m /= norm2[..., None]
        else:
            m = m / (norm2 if norm2 > _EPS else 1.0)
    out: FloatArray = m.reshape(lead + (3, 3))
    return out


def unit_quats(q: FloatArray) -> FloatArray:
    """``q`` scaled to unit length (identity for a zero quaternion)."""
    n = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    out: FloatArray = np.where(n > _EPS, q / np.where(n > _EPS, n, 1.0), [1.0, 0.0, 0.0, 0.0])
    return out


def cross(a: FloatArray, b: FloatArray) -> FloatArray:
    """Cross product of ``(..., 3)`` vectors (broadcast)."""
    outer = a[..., :, None] * b[..., None, :]
    out: FloatArray = outer.reshape(outer.shape[:-2] + (9,)) @ _CROSS
    return out


def rotate(q: FloatArray, v: FloatArray) -> FloatArray:
    """Rotate ``(..., 3)`` vectors by ``(..., 4)`` quaternions."""
    out: FloatArray = (rotation_matrices(q) @ v[..., None])[..., 0]
    return out


def _between_table() -> FloatArray:
    # For u = (a, b) (six entries), the outer products u_i u_j (index 6 i + j) give in one
    # matrix product: a.a, b.b, a.b and the three components of a x b.
    t = np.zeros((36, 6))
    for i in range(3):
        t[6 * i + i, 0] = 1.0
        t[6 * (3 + i) + 3 + i, 1] = 1.0
        t[6 * i + 3 + i, 2] = 1.0
    for i, j, k in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):
        t[6 * i + 3 + j, 3 + k] = 1.0
        t[6 * j + 3 + i, 3 + k] = -1.0
    return t


_BETWEEN = _between_table()


def pair_terms(a: FloatArray, b: FloatArray) -> FloatArray:
    """``(..., 6)``: ``|a|^2``, ``|b|^2``, ``a . b`` and ``a x b`` of same-shape ``(..., 3)``
    vectors, from one outer product and one table product: on the tiny arrays of a live frame
    each numpy call, not the arithmetic, is the cost."""
    u = np.concatenate([a, b], axis=-1)
    outer = u[..., :, None] * u[..., None, :]
    out: FloatArray = outer.reshape(outer.shape[:-2] + (36,)) @ _BETWEEN
    return out


def quat_between_unit(a: FloatArray, b: FloatArray) -> FloatArray:
    """Minimal rotation from direction ``a`` to direction ``b`` (``(..., 3)``, any length).

    Same conventions and degenerate cases as :func:`core.rig.rotations.quat_between_vectors`:
    opposite directions turn 180 degrees about an axis perpendicular to ``a``, a zero-length
    input gives the identity. The result has ``w >= 0``.
    """
    if a.shape != b.shape:
        a, b = np.broadcast_arrays(a, b)
    f = pair_terms(a, b)
    scale = np.sqrt(f[..., 0] * f[..., 1])
    q = f[..., 2:]
    q[..., 0] += scale
    n = np.sqrt(np.einsum("...i,...i->...", q, q))
    # Zero for opposite directions (and for a zero-length input, where scale is 0 as well).
    good = n > 1e-10 * scale
    if good.all():
        out: FloatArray = q / n[..., None]
        return out
    na = np.sqrt(f[..., 0])
    nb = np.sqrt(f[..., 1])
    # Opposite (or zero) directions: 180 degrees about the axis least aligned with a.
    helper = np.where((np.abs(a[..., 0]) < 0.9 * np.maximum(na, _EPS))[..., None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    perp = cross(a, helper)
    perp = perp / np.maximum(np.linalg.norm(perp, axis=-1, keepdims=True), _EPS)
    flip = np.concatenate([np.zeros(perp.shape[:-1] + (1,)), perp], axis=-1)
    identity = np.zeros(q.shape)
    identity[..., 0] = 1.0
    zero = (na <= _EPS) | (nb <= _EPS)
    fallback = np.where(zero[..., None], identity, flip)
    out = np.where(good[..., None], q / np.where(good, n, 1.0)[..., None], fallback)
    return out


def _from_matrix_table() -> tuple[FloatArray, FloatArray]:
    # Rows of the four Shepperd candidates (each proportional to the quaternion), as linear
    # forms in the nine matrix entries m[r, c] (index 3 r + c) plus a constant.
    lin = np.zeros((9, 16))
    const = np.zeros(16)

    def put(row: int, comp: int, terms: tuple[tuple[int, int, float], ...], one: float = 0.0) -> None:
        for r, c, s in terms:
            lin[3 * r + c, 4 * row + comp] += s
        const[4 * row + comp] = one

    diag_signs = ((1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1))
    for row, signs in enumerate(diag_signs):
        put(row, row, tuple((i, i, float(s)) for i, s in enumerate(signs)), 1.0)
    skew = {1: ((2, 1, 1.0), (1, 2, -1.0)), 2: ((0, 2, 1.0), (2, 0, -1.0)), 3: ((1, 0, 1.0), (0, 1, -1.0))}
    sym = {(1, 2): ((0, 1, 1.0), (1, 0, 1.0)), (1, 3): ((0, 2, 1.0), (2, 0, 1.0)), (2, 3): ((1, 2, 1.0), (2, 1, 1.0))}
    for k, terms in skew.items():
        put(0, k, terms)
        put(k, 0, terms)
    for (a, b), terms in sym.items():
        put(a, b, terms)
        put(b, a, terms)
    return lin, const


_FROM_MATRIX, _FROM_MATRIX_CONST = _from_matrix_table()


def quat_from_rotation_matrix(m: FloatArray) -> FloatArray:
    """Unit quaternions (``w >= 0``) of rotation matrices ``(..., 3, 3)``; the largest-diagonal
    (Shepperd) candidate is used for each, so it stays accurate near 180 degrees."""
    flat = m.reshape(m.shape[:-2] + (9,))
    cand = (flat @ _FROM_MATRIX + _FROM_MATRIX_CONST).reshape(m.shape[:-2] + (4, 4))
    diag = np.einsum("...ii->...i", cand)
    pick = np.argmax(diag, axis=-1).reshape(-1)
    # Plain fancy indexing on the flattened batch (take_along_axis costs more per call).
    rows = cand.reshape(-1, 4, 4)
    q = rows[np.arange(rows.shape[0]), pick].reshape(m.shape[:-2] + (4,))
    q = q / np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    out: FloatArray = np.where(q[..., :1] < 0.0, -q, q)
    return out


def quats_of_matrices(m: FloatArray) -> FloatArray:
    """:func:`core.rig.rotations.quat_from_matrix` of many rotation matrices ``(..., 3, 3)``, the
    same arithmetic and branch choice (the ``w`` candidate where the trace is above -0.5, else the
    largest of trace and diagonal; ``w >= 0``), for less: every matrix takes the ``w`` formula
    unmasked and only the few large turns are redone, gathered by index rather than by mask."""
    lead = m.shape[:-2]
    flat = np.ascontiguousarray(m).reshape(-1, 9)
    trace = flat[:, 0] + flat[:, 4] + flat[:, 8]
    q = np.empty((flat.shape[0], 4))
    np.add(trace, 1.0, out=q[:, 0])
    np.subtract(flat[:, 7], flat[:, 5], out=q[:, 1])
    np.subtract(flat[:, 2], flat[:, 6], out=q[:, 2])
    np.subtract(flat[:, 3], flat[:, 1], out=q[:, 3])
    hard = np.flatnonzero(~(trace > -0.5))
    if hard.size:
        h = flat[hard]
        d0, d1, d2 = h[:, 0], h[:, 4], h[:, 8]
        t = d0 + d1 + d2
        s21, s02, s10 = h[:, 7] - h[:, 5], h[:, 2] - h[:, 6], h[:, 3] - h[:, 1]
        p01, p02, p12 = h[:, 1] + h[:, 3], h[:, 2] + h[:, 6], h[:, 5] + h[:, 7]
        cand = np.stack(
            [
                np.stack([1 + t, s21, s02, s10], -1),
                np.stack([s21, 1 + d0 - d1 - d2, p01, p02], -1),
                np.stack([s02, p01, 1 - d0 + d1 - d2, p12], -1),
                np.stack([s10, p02, p12, 1 - d0 - d1 + d2], -1),
            ],
            axis=-2,
        )
        choice = np.argmax(np.stack([t, d0, d1, d2], -1), axis=-1)
        q[hard] = cand[np.arange(hard.size), choice]
    q /= np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    if hard.size:
        q[hard] = np.where(q[hard, :1] < 0.0, -q[hard], q[hard])
    out: FloatArray = q.reshape(lead + (4,))
    return out


# The matrix table with a tenth column, the squared norm (the diagonal of the outer product).
_MATRIX_AND_NORM = np.concatenate([_MATRIX, np.eye(4).reshape(16, 1)], axis=1)


def normalized_rotation_matrices(q: FloatArray) -> FloatArray:
    """:func:`rotation_matrices` of quaternions of any length (one whose squared length is not
    above ``_EPS`` is divided by 1, as there), with the squared length taken from the same table
    product as the matrix entries rather than from a product of its own."""
    lead = q.shape[:-1]
    m = (q[..., :, None] * q[..., None, :]).reshape(lead + (16,)) @ _MATRIX_AND_NORM
    norm2 = m[..., 9:]
    out: FloatArray = (m[..., :9] / np.where(norm2 > _EPS, norm2, 1.0)).reshape(lead + (3, 3))
    return out


def _mul_and_matrix_table() -> FloatArray:
    # For u = (a, b) (eight entries), the outer products a_i u_j (index 8 i + j) give in one
    # matrix product the rotation matrix of a (from a_i a_j) and the Hamilton product a * b
    # (from a_i b_j).
    t = np.zeros((32, 13))
    for i in range(4):
        for j in range(4):
            t[8 * i + j, :9] = _MATRIX[4 * i + j]
            t[8 * i + 4 + j, 9:] = _QUAT_MUL[4 * i + j]
    return t


_MUL_AND_MATRIX = _mul_and_matrix_table()


def quat_mul_and_matrix(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``quat_mul(a, b)`` and ``rotation_matrices(a, unit=True)`` of same-shape ``(..., 4)``
    quaternions (``a`` of unit length), from one outer product and one table product: a solver
    turning a joint by ``a`` needs both, and on a live frame each numpy call is the cost."""
    lead = a.shape[:-1]
    u = np.concatenate([a, b], axis=-1)
    m = (a[..., :, None] * u[..., None, :]).reshape(lead + (32,)) @ _MUL_AND_MATRIX
    return m[..., 9:], m[..., :9].reshape(lead + (3, 3))


# --- plain-float forms for a single frame ------------------------------------------------------
#
# On a live frame the arrays are a handful of numbers and every numpy call costs more than its
# arithmetic; these take and give plain Python floats (nested lists, rows first) and do the same
# arithmetic as the table products above, up to the order of the sums.

Mat = list[list[float]]
Quat = tuple[float, float, float, float]


def matrix_of(q: Sequence[float], unit: bool = False) -> Mat:
    """:func:`rotation_matrices` (``unit``) or :func:`normalized_rotation_matrices` of one
    quaternion, as a 3 x 3 list."""
    w, x, y, z = q
    ww, xx, yy, zz = w * w, x * x, y * y, z * z
    xy, wz, xz, wy, yz, wx = x * y, w * z, x * z, w * y, y * z, w * x
    m = [
        [ww + xx - yy - zz, 2.0 * xy - 2.0 * wz, 2.0 * xz + 2.0 * wy],
        [2.0 * xy + 2.0 * wz, ww - xx + yy - zz, 2.0 * yz - 2.0 * wx],
        [2.0 * xz - 2.0 * wy, 2.0 * yz + 2.0 * wx, ww - xx - yy + zz],
    ]
    if unit:
        return m
    n2 = ww + xx + yy + zz
    d = n2 if n2 > _EPS else 1.0
    return [[v / d for v in row] for row in m]


def quat_mul_one(a: Sequence[float], b: Sequence[float]) -> Quat:
    """The Hamilton product ``a * b`` of two quaternions (w first)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def mat_mul(a: Mat, b: Mat) -> Mat:
    """``a @ b`` of two matrices given as lists of rows: ``(r, 3) @ (3, 3)``, ``(r, 3) @ (3, 4)`` or
    ``(r, 4) @ (4, 4)`` (unrolled: a live frame takes a few dozen)."""
    if len(b) == 4:
        (b00, b01, b02, b03), (b10, b11, b12, b13), (b20, b21, b22, b23), (b30, b31, b32, b33) = b
        return [
            [
                x0 * b00 + x1 * b10 + x2 * b20 + x3 * b30,
                x0 * b01 + x1 * b11 + x2 * b21 + x3 * b31,
                x0 * b02 + x1 * b12 + x2 * b22 + x3 * b32,
                x0 * b03 + x1 * b13 + x2 * b23 + x3 * b33,
            ]
            for x0, x1, x2, x3 in a
        ]
    if len(b[0]) == 4:
        (b00, b01, b02, b03), (b10, b11, b12, b13), (b20, b21, b22, b23) = b
        return [
            [
                x0 * b00 + x1 * b10 + x2 * b20,
                x0 * b01 + x1 * b11 + x2 * b21,
                x0 * b02 + x1 * b12 + x2 * b22,
                x0 * b03 + x1 * b13 + x2 * b23,
            ]
            for x0, x1, x2 in a
        ]
    (c00, c01, c02), (c10, c11, c12), (c20, c21, c22) = b
    return [
        [x0 * c00 + x1 * c10 + x2 * c20, x0 * c01 + x1 * c11 + x2 * c21, x0 * c02 + x1 * c12 + x2 * c22]
        for x0, x1, x2 in a
    ]


def mat_vec(a: Mat | Sequence[Sequence[float]], v: Sequence[float]) -> list[float]:
    """``a[:, :3] @ v`` for a matrix given as rows and a 3-vector."""
    v0, v1, v2 = v
    return [row[0] * v0 + row[1] * v1 + row[2] * v2 for row in a]


def solve3(a: Mat | Sequence[Sequence[float]], b: Sequence[float]) -> list[float] | None:
    """``solve(a[:3, :3], b)`` by Cramer's rule (``None`` for a singular or non-finite ``a``)."""
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = (row[:3] for row in a[:3])
    c00 = a11 * a22 - a12 * a21
    c01 = a12 * a20 - a10 * a22
    c02 = a10 * a21 - a11 * a20
    det = a00 * c00 + a01 * c01 + a02 * c02
    if not (math.isfinite(det) and abs(det) > 1e-300):
        return None
    b0, b1, b2 = b
    x0 = (b0 * c00 + b1 * (a02 * a21 - a01 * a22) + b2 * (a01 * a12 - a02 * a11)) / det
    x1 = (b0 * c01 + b1 * (a00 * a22 - a02 * a20) + b2 * (a02 * a10 - a00 * a12)) / det
    x2 = (b0 * c02 + b1 * (a01 * a20 - a00 * a21) + b2 * (a00 * a11 - a01 * a10)) / det
    return [x0, x1, x2]


def between_unit_one(a: Sequence[float], b: Sequence[float]) -> Quat | None:
    """:func:`quat_between_unit` of one pair of 3-vectors (``None`` for opposite or zero-length
    directions, which take the general route there)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    scale = math.sqrt((a0 * a0 + a1 * a1 + a2 * a2) * (b0 * b0 + b1 * b1 + b2 * b2))
    w = a0 * b0 + a1 * b1 + a2 * b2 + scale
    x, y, z = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if not n > 1e-10 * scale:
        return None
    return (w / n, x / n, y / n, z / n)


def affine_mul(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Mat:
    """``(a @ b)[:3]`` of two affine 4 x 4 matrices given by their top three rows (the last row
    of both is ``0, 0, 0, 1``)."""
    (b00, b01, b02, b03), (b10, b11, b12, b13), (b20, b21, b22, b23) = b[0], b[1], b[2]
    return [
        [
            x0 * b00 + x1 * b10 + x2 * b20,
            x0 * b01 + x1 * b11 + x2 * b21,
            x0 * b02 + x1 * b12 + x2 * b22,
            x0 * b03 + x1 * b13 + x2 * b23 + x3,
        ]
        for x0, x1, x2, x3 in (a[0], a[1], a[2])
    ]


def lin_mul(a: Sequence[Sequence[float]], b: Mat) -> Mat:
    """``a[:3, :3] @ b`` for ``b`` 3 x 3 (``a`` given by rows of three or more)."""
    (c00, c01, c02), (c10, c11, c12), (c20, c21, c22) = b
    return [
        [x[0] * c00 + x[1] * c10 + x[2] * c20, x[0] * c01 + x[1] * c11 + x[2] * c21, x[0] * c02 + x[1] * c12 + x[2] * c22]
        for x in (a[0], a[1], a[2])
    ]
