"""Bone inheritance ("append" / "grant") and fixed axes (docs/controls.md#inheritance-and-fixed-axes), on any skeleton.

Conventions: local rotations ``(T, B, 4)`` are w-first Hamilton unit quaternions (active, column
vectors, :mod:`core.rig.rotations`), the rotation ``R`` of a joint's local transform in the
attachment-frame model of :mod:`core.rig.skeleton` (``M = P @ C0 @ Tr @ R @ S @ inv(C1)``); local
translations ``(T, B, 3)`` are ``Tr``. Both live in the joint's *rotation frame* ``P @ C0``.

A grant gives a *target* joint a fraction of its *source* joint's current local rotation and/or
translation, as the source stands when the grant runs (after its own grants and any IK
correction that ran before it: the stack orders an inheriting control after every control that
writes its source)::

    R_target <- R_target * (c * R_source * c^-1) ** f_rot
    Tr_target <- Tr_target + f_tr * A @ Tr_source

``q ** f`` scales the rotation angle about its axis (the shorter arc; negative fractions turn
the other way, as MMD's negative grant ratios do). The grant is applied on the target's own side
(right-multiplied), the order MMD runtimes use. ``c`` and ``A`` carry the source's rotation frame
into the target's at rest, so the granted turn is the same turn in the rig whatever the two
joints' attachment frames (bone rolls); for rigs whose local frames coincide (MMD bones, whose
frames are all aligned with the model) they are the identity and the raw values are copied. Pass
``align_frames=False`` to copy raw local values regardless.

A fixed axis keeps only the twist of a joint's local rotation about an axis (swing-twist split);
a rotation whose swing is a half turn has no defined twist and becomes the identity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError
from ..rig.rotation_kernels import quat_conj, quat_from_rotation_matrix, quat_mul
from ..rig.rotations import FloatArray, orthonormalize
from ..rig.skeleton import Skeleton

_EPS = 1e-12


def _readonly(a: FloatArray) -> FloatArray:
    a.setflags(write=False)
    return a


def rotation_frames(skeleton: Skeleton) -> FloatArray:
    """Linear part ``(B, 3, 3)`` of each joint's rotation frame ``P @ C0`` at rest (it may carry
    scale; translations live in it as they are)."""
    rest = skeleton.rest_placements()
    parents = skeleton.parents
    out = np.empty((len(skeleton), 3, 3))
    for i in range(len(skeleton)):
        p = int(parents[i])
        c0 = skeleton.parent_frames[i, :3, :3]
        out[i] = c0 if p < 0 else rest[p, :3, :3] @ c0
    return out


def quat_power(q: ArrayLike, fraction: ArrayLike) -> FloatArray:
    """``q ** f``: the rotation of ``q`` (taken along its shorter arc) with its angle scaled by
    ``f`` about the same axis; ``(..., 4)`` quaternions, ``f`` broadcast against ``q[..., 0]``."""
    a = np.asarray(q, dtype=np.float64)
    f = np.asarray(fraction, dtype=np.float64)
    a = a / np.sqrt(np.einsum("...i,...i->...", a, a))[..., None]
    a = np.where(a[..., :1] < 0.0, -a, a)
    s = np.sqrt(np.einsum("...i,...i->...", a[..., 1:], a[..., 1:]))
    half = np.arctan2(s, a[..., 0]) * f
    # Near the identity sin(f x) / sin(x) -> f: use it directly so tiny turns keep their axis.
    ratio = np.where(s > 1e-9, np.sin(half) / np.where(s > 1e-9, s, 1.0), f)
    out = np.empty(np.broadcast_shapes(a.shape, f.shape + (4,)))
    out[..., 0] = np.cos(half)
    out[..., 1:] = ratio[..., None] * a[..., 1:]
    n = np.sqrt(np.einsum("...i,...i->...", out, out))
    result: FloatArray = out / n[..., None]
    return result


@dataclass(frozen=True)
class Grant:
    """One inheritance: ``target`` takes fractions of ``source``'s current local rotation and
    translation (see the module docstring). Build it with :meth:`build`."""

    target: int
    source: int
    rotation: float
    translation: float
    #: Source rotation frame -> target rotation frame at rest, as a quaternion ``(4,)``.
    carry: FloatArray
    #: The same for translations, a linear map ``(3, 3)`` (it keeps the frames' scale).
    carry_translation: FloatArray

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        target: int | str,
        source: int | str,
        *,
        rotation: float = 1.0,
        translation: float = 0.0,
        align_frames: bool = True,
    ) -> Grant:
        t = target if isinstance(target, int) else skeleton.index(target)
        s = source if isinstance(source, int) else skeleton.index(source)
        for j in (t, s):
            if not 0 <= j < len(skeleton):
                raise RigError(f"joint index {j} is not in the skeleton")
        if t == s:
            raise RigError(f"joint {skeleton.names[t]!r} cannot inherit from itself")
        for value, what in ((rotation, "rotation"), (translation, "translation")):
            if not math.isfinite(value):
                raise RigError(f"the {what} fraction of {skeleton.names[t]!r} must be finite, got {value}")
        carry = np.array([1.0, 0.0, 0.0, 0.0])
        carry_tr = np.eye(3)
        if align_frames:
            frames = rotation_frames(skeleton)
            if abs(np.linalg.det(frames[t])) < _EPS or abs(np.linalg.det(frames[s])) < _EPS:
                raise RigError(
                    f"the rest frame of {skeleton.names[t]!r} or {skeleton.names[s]!r} is degenerate (zero scale)"
                )
            rt = orthonormalize(frames[t])
            rs = orthonormalize(frames[s])
            carry = quat_from_rotation_matrix(rt.T @ rs)
            carry_tr = np.linalg.solve(frames[t], frames[s])
        return cls(t, s, float(rotation), float(translation), _readonly(carry), _readonly(carry_tr))


@dataclass(frozen=True)
class Inheritance:
    """Grants evaluated together, each after any grant of the same set that writes its source."""

    grants: tuple[Grant, ...]

    def __post_init__(self) -> None:
        grants = tuple(self.grants)
        if not grants:
            raise RigError("an inheritance needs at least one grant")
        targets = [g.target for g in grants]
        if len(set(targets)) != len(targets):
            raise RigError("a joint may inherit only once within one inheritance control")
        object.__setattr__(self, "grants", _grant_order(grants))

    @property
    def rotated(self) -> tuple[int, ...]:
        """Joints whose rotation may change."""
        return tuple(g.target for g in self.grants if g.rotation != 0.0)

    @property
    def moved(self) -> tuple[int, ...]:
        """Joints whose translation may change."""
        return tuple(g.target for g in self.grants if g.translation != 0.0)

    @property
    def sources(self) -> tuple[int, ...]:
        """Joints read from outside the set (what other controls must have finished first)."""
        targets = {g.target for g in self.grants}
        return tuple(sorted({g.source for g in self.grants} - targets))


def _grant_order(grants: tuple[Grant, ...]) -> tuple[Grant, ...]:
    """Grants ordered so each comes after the grant that writes its source (A -> B -> C in that
    order whatever order they were given in); a cycle is refused."""
    by_target = {g.target: g for g in grants}
    done: list[Grant] = []
    placed: set[int] = set()
    visiting: set[int] = set()

    def visit(g: Grant) -> None:
        if g.target in placed:
            return
        if g.target in visiting:
            raise RigError(f"inheritance loops back to joint {g.target}; grants must form chains, not cycles")
        visiting.add(g.target)
        upstream = by_target.get(g.source)
        if upstream is not None:
            visit(upstream)
        visiting.discard(g.target)
        placed.add(g.target)
        done.append(g)

    for g in grants:
        visit(g)
    return tuple(done)


def inherit(
    inheritance: Inheritance, rotations: FloatArray, translations: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Apply the grants to a pose; returns the targets' new rotations ``(T, len(rotated), 4)``
    and translations ``(T, len(moved), 3)``, in the order of :attr:`Inheritance.rotated` and
    :attr:`Inheritance.moved`. The input arrays are not written."""
    rot: dict[int, FloatArray] = {}
    tr: dict[int, FloatArray] = {}
    for g in inheritance.grants:
        src_rot = rot.get(g.source, rotations[:, g.source])
        src_tr = tr.get(g.source, translations[:, g.source])
        if g.rotation != 0.0:
            carried = quat_mul(quat_mul(g.carry, src_rot), quat_conj(g.carry))
            own = rotations[:, g.target]
            rot[g.target] = quat_mul(own, quat_power(carried, g.rotation))
        if g.translation != 0.0:
            tr[g.target] = translations[:, g.target] + g.translation * (src_tr @ g.carry_translation.T)
    frames = rotations.shape[0]
    out_rot = np.stack([rot[j] for j in inheritance.rotated], axis=1) if inheritance.rotated else np.empty((frames, 0, 4))
    out_tr = np.stack([tr[j] for j in inheritance.moved], axis=1) if inheritance.moved else np.empty((frames, 0, 3))
    return out_rot, out_tr


@dataclass(frozen=True)
class FixedAxes:
    """Joints that keep only the twist of their local rotation about an axis each (given in the
    joint's rotation frame; :meth:`build` also takes skeleton-space rest directions)."""

    joints: tuple[int, ...]
    #: Unit axes ``(n, 3)`` in the joints' rotation frames.
    axes: FloatArray

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        joints: Sequence[int | str],
        axes: ArrayLike,
        *,
        frame: str = "local",
    ) -> FixedAxes:
        """``axes`` ``(n, 3)`` (or one ``(3,)`` for all) in each joint's rotation frame
        (``frame="local"``) or as skeleton-space directions at rest (``frame="rest"``)."""
        idx = tuple(j if isinstance(j, int) else skeleton.index(j) for j in joints)
        if not idx:
            raise RigError("a fixed-axis control needs at least one joint")
        if len(set(idx)) != len(idx):
            raise RigError("a joint is listed twice in a fixed-axis control")
        a = np.array(axes, dtype=np.float64)
        if a.shape == (3,):
            a = np.broadcast_to(a, (len(idx), 3)).copy()
        if a.shape != (len(idx), 3):
            raise RigError(f"axes must have shape (3,) or ({len(idx)}, 3), got {a.shape}")
        if frame == "rest":
            frames = rotation_frames(skeleton)
            a = np.stack([orthonormalize(frames[j]).T @ a[k] for k, j in enumerate(idx)])
        elif frame != "local":
            raise RigError(f"frame must be 'local' or 'rest', got {frame!r}")
        n = np.linalg.norm(a, axis=1)
        if not np.all(np.isfinite(n)) or np.any(n < 1e-9):
            bad = [skeleton.names[j] for j, v in zip(idx, n, strict=True) if not (math.isfinite(v) and v >= 1e-9)]
            raise RigError(f"the fixed axis of {bad} must be a finite non-zero vector")
        return cls(idx, _readonly(a / n[:, None]))


def twist_about(q: ArrayLike, axes: ArrayLike) -> FloatArray:
    """The twist part of ``q`` ``(..., 4)`` about unit ``axes`` ``(..., 3)``; identity where the
    swing is a half turn (no twist is defined there)."""
    a = np.asarray(q, dtype=np.float64)
    ax = np.asarray(axes, dtype=np.float64)
    along = np.einsum("...i,...i->...", a[..., 1:], ax)
    out = np.empty(np.broadcast_shapes(a.shape, ax.shape[:-1] + (4,)))
    out[..., 0] = a[..., 0]
    out[..., 1:] = along[..., None] * ax
    n = np.sqrt(out[..., 0] ** 2 + along**2)
    ok = n > 1e-9
    result: FloatArray = np.where(ok[..., None], out / np.where(ok, n, 1.0)[..., None], [1.0, 0.0, 0.0, 0.0])
    return result
