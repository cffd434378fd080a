"""One rotation API: :class:`Rotation`, in the style of SciPy's (``from_*`` / ``as_*``).

A :class:`Rotation` holds w-first unit quaternions of any leading shape (frames first, float64),
the conventions of :mod:`core.rig.rotations`: Hamilton, active, column vectors, ``a * b`` applies
``b`` first, Blender's Euler orders. New code should use it; the function modules are its
implementation and stay as they are.

Every method delegates to the function that computes the same thing today and returns its result
unchanged, bit for bit, so a caller can switch without a single key changing. Which function:

* The general functions of :mod:`core.rig.rotations` for everything, except
* :meth:`Rotation.from_matrix` of a batch (``(..., N, 3, 3)``, at least one leading axis), which
  takes :func:`core.rig.rotation_kernels.quats_of_matrices`, as the geometric retarget does for
  its ``(B, T, 3, 3)`` local matrices: the same arithmetic and branch choice as
  :func:`~core.rig.rotations.quat_from_matrix` (the same bits), without its masked copies.
  A single matrix, or a 4x4 transform, takes ``quat_from_matrix``.

:meth:`Rotation.as_matrix` stays on :func:`~core.rig.rotations.matrix_from_quat`: the lean
``rotation_kernels.normalized_rotation_matrices`` the control solvers use agrees only to rounding,
and the batched callers of ``matrix_from_quat`` (the keys they write) would change. Likewise
composition stays on ``quat_multiply`` rather than the table-product ``quat_mul``. The per-frame
plain-float kernels (``matrix_of``, ``quat_mul_one``, ...) serve the solvers' scalar inner loops,
where building an object would cost more than the arithmetic; they are not routed through here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .rotation_kernels import quats_of_matrices
from .rotations import (
    FloatArray,
    axis_angle_from_quat,
    euler_from_quat,
    matrix_from_quat,
    quat_angle,
    quat_apply,
    quat_between_vectors,
    quat_conjugate,
    quat_from_axis_angle,
    quat_from_euler,
    quat_from_matrix,
    quat_identity,
    quat_multiply,
    quat_normalize,
    quat_slerp,
)


class Rotation:
    """Rotations of any leading shape, held as w-first unit quaternions ``(..., 4)``."""

    __slots__ = ("_q",)

    def __init__(self, quat: FloatArray) -> None:
        """Wrap quaternions as they are; use the ``from_*`` constructors instead."""
        self._q = quat

    # --- constructors ---------------------------------------------------------------------------

    @classmethod
    def from_quat(cls, q: ArrayLike, normalize: bool = True) -> Rotation:
        """From w-first quaternions ``(..., 4)``. ``normalize`` (``quat_normalize``: a zero
        quaternion becomes the identity) can be turned off for quaternions known to be unit."""
        if normalize:
            return cls(quat_normalize(q))
        a = np.array(q, dtype=np.float64)
        if a.shape[-1:] != (4,):
            raise ValueError(f"quaternion must have shape (..., 4), got {a.shape}")
        return cls(a)

    @classmethod
    def from_matrix(cls, m: ArrayLike) -> Rotation:
        """From rotation matrices ``(..., 3, 3)`` (or the 3x3 block of 4x4s); ``w >= 0``."""
        a = np.asarray(m, dtype=np.float64)
        if a.ndim > 2 and a.shape[-2:] == (3, 3):
            return cls(quats_of_matrices(a))
        return cls(quat_from_matrix(a))

    @classmethod
    def from_euler(cls, order: str, angles: ArrayLike) -> Rotation:
        """From Euler angles ``(..., 3)`` indexed by axis X, Y, Z, in Blender's ``order``."""
        return cls(quat_from_euler(angles, order))

    @classmethod
    def from_axis_angle(cls, axis: ArrayLike, angle: ArrayLike) -> Rotation:
        """Turn by ``angle`` (radians) about ``axis`` (``(..., 3)``, any length)."""
        return cls(quat_from_axis_angle(axis, angle))

    @classmethod
    def align(cls, a: ArrayLike, b: ArrayLike) -> Rotation:
        """Shortest arc taking direction ``a`` onto direction ``b`` (``quat_between_vectors``)."""
        return cls(quat_between_vectors(a, b))

    @classmethod
    def identity(cls, shape: tuple[int, ...] = ()) -> Rotation:
        return cls(quat_identity(shape))

    # --- conversions ----------------------------------------------------------------------------

    def as_quat(self) -> FloatArray:
        """The w-first quaternions ``(..., 4)`` (a copy)."""
        return self._q.copy()

    def as_matrix(self) -> FloatArray:
        return matrix_from_quat(self._q)

    def as_euler(self, order: str) -> FloatArray:
        return euler_from_quat(self._q, order)

    def as_axis_angle(self) -> tuple[FloatArray, FloatArray]:
        """``(axis, angle)``, angle in ``[0, pi]``; +X for a null rotation."""
        return axis_angle_from_quat(self._q)

    # --- algebra --------------------------------------------------------------------------------

    def inv(self) -> Rotation:
        return Rotation(quat_conjugate(self._q))

    def __mul__(self, other: Rotation) -> Rotation:
        """``self * other``: ``other`` first, then ``self`` (as ``quat_multiply``)."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation(quat_multiply(self._q, other._q))

    def apply(self, v: ArrayLike) -> FloatArray:
        """Rotate vectors ``(..., 3)`` (broadcast against the rotations)."""
        return quat_apply(self._q, v)

    def magnitude(self) -> FloatArray:
        """Rotation angle in ``[0, pi]``."""
        return quat_angle(self._q)

    def interpolate(self, other: Rotation, t: ArrayLike) -> Rotation:
        """Spherical interpolation along the shorter arc (``t`` broadcasts against the shape)."""
        return Rotation(quat_slerp(self._q, other._q, t))

    # --- shape ----------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._q.shape[:-1])

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("a single rotation has no length")
        return self.shape[0]

    def __getitem__(self, index: Any) -> Rotation:
        if not self.shape:
            raise TypeError("a single rotation cannot be indexed")
        return Rotation(self._q[_lead(index)])

    def __repr__(self) -> str:
        return f"Rotation(shape={self.shape})"


def _lead(index: Any) -> Any:
    """Index the leading axes only, never the quaternion axis."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(p is Ellipsis for p in parts):
        return parts + (slice(None),)
    return parts + (Ellipsis,)
