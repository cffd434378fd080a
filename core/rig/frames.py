"""Geometric frames: orthonormal bone frames built from positions and body axes (docs/pipeline.md#geometric-frames).

A geometric frame is a 3x3 rotation whose columns are ``X, Y, Z`` in skeleton space:

* ``X`` is the bone's *segment* direction: from the bone's head to the head of the next mapped
  bone down the chain (so extra spine segments or twist splits in between do not change it), or to
  the bone's own end for the last bone of a chain. In the canonical pose it is a body axis.
* ``Y`` is a body reference made perpendicular to ``X``: up for the clavicles, arms, hands and
  fingers; forward for the thighs, shins and the axial column; up for the feet (forward would be
  nearly parallel to a foot).
* ``Z = X x Y``.

Authored bone axes (roll) never enter a frame: two rigs of the same shape get the same frames
whatever their exporters chose.

Body axes are given as a basis matrix whose columns are forward, left, up (:mod:`core.retarget.facing`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..mapping.humanoid import FINGERS, SIDES, finger_slot, sided
from .rotation import Rotation
from .rotations import FloatArray, matrix_between_vectors

# Body-axis coordinates: (forward, left, up).
_F = np.array([1.0, 0.0, 0.0])
_L = np.array([0.0, 1.0, 0.0])
_U = np.array([0.0, 0.0, 1.0])
_SQ = np.sqrt(0.5)

#: Canonical (X, Y) of each framed slot in body coordinates.
CANONICAL_AXES: dict[str, tuple[FloatArray, FloatArray]] = {
    "hips": (_U, _F),
    "spine": (_U, _F),
    "chest": (_U, _F),
    "upper_chest": (_U, _F),
    "neck": (_U, _F),
    "head": (_U, _F),
}
for _side, _sign in zip(SIDES, (1.0, -1.0), strict=True):
    CANONICAL_AXES[sided("shoulder", _side)] = (_sign * _L, _U)
    CANONICAL_AXES[sided("upper_arm", _side)] = (_sign * _L, _U)
    CANONICAL_AXES[sided("forearm", _side)] = (_sign * _L, _U)
    CANONICAL_AXES[sided("hand", _side)] = (_sign * _L, _U)
    CANONICAL_AXES[sided("thigh", _side)] = (-_U, _F)
    CANONICAL_AXES[sided("shin", _side)] = (-_U, _F)
    CANONICAL_AXES[sided("foot", _side)] = (_F, _U)
    for _finger in FINGERS:
        # Thumbs sit at 45 degrees from the hand's axis, toward forward-down.
        x = _SQ * _sign * _L + 0.5 * _F - 0.5 * _U if _finger == "thumb" else _sign * _L
        for _k in (1, 2, 3):
            CANONICAL_AXES[finger_slot(_finger, _k, _side)] = (x, _U)

#: The body axis rests differ about, per framed slot (body coordinates): arms are raised or lowered
#: about the forward axis (T-, A- and arms-down rests), legs spread about it too, the spine and
#: neck lean and the feet pitch about the lateral axis. Canonicalisation first turns a segment
#: about this axis, then the rest of the way: undoing exactly the turn a rest was made with.
TURN_AXIS: dict[str, FloatArray] = {s: (_L if s in ("hips", "spine", "chest", "upper_chest", "neck", "head") else _F) for s in CANONICAL_AXES}
for _side in SIDES:
    TURN_AXIS[sided("foot", _side)] = _L

#: Where each framed slot's segment ends: the head of the first of these slots that is mapped
#: (and lies below it); otherwise the bone's own end point.
SEGMENT_END: dict[str, tuple[str, ...]] = {
    "hips": ("spine", "chest", "upper_chest", "neck", "head"),
    "spine": ("chest", "upper_chest", "neck", "head"),
    "chest": ("upper_chest", "neck", "head"),
    "upper_chest": ("neck", "head"),
    "neck": ("head",),
    "head": (),
}
for _side in SIDES:
    SEGMENT_END[sided("shoulder", _side)] = (sided("upper_arm", _side),)
    SEGMENT_END[sided("upper_arm", _side)] = (sided("forearm", _side),)
    SEGMENT_END[sided("forearm", _side)] = (sided("hand", _side),)
    SEGMENT_END[sided("hand", _side)] = (finger_slot("middle", 1, _side), finger_slot("ring", 1, _side))
    SEGMENT_END[sided("thigh", _side)] = (sided("shin", _side),)
    SEGMENT_END[sided("shin", _side)] = (sided("foot", _side),)
    SEGMENT_END[sided("foot", _side)] = (sided("toes", _side),)
    for _finger in FINGERS:
        SEGMENT_END[finger_slot(_finger, 1, _side)] = (finger_slot(_finger, 2, _side),)
        SEGMENT_END[finger_slot(_finger, 2, _side)] = (finger_slot(_finger, 3, _side),)
        SEGMENT_END[finger_slot(_finger, 3, _side)] = ()


def canonical_axes(slot: str, body: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Canonical ``X`` and ``Y`` of ``slot`` in the space of ``body`` (columns forward, left, up)."""
    b = np.asarray(body, dtype=np.float64)
    x, y = CANONICAL_AXES[slot]
    return b @ x, b @ y


def canonical_turn(segment: ArrayLike, slot: str, body: ArrayLike, carried: ArrayLike | None = None) -> FloatArray:
    """The rotation (3x3) taking ``segment`` onto the slot's canonical X in two steps: about the
    slot's turn axis until the segment leaves the plane it is raised in, then the least rotation
    the rest of the way. A rest made by turning a limb about that axis (an A-pose from a T-pose)
    is undone exactly, twist included, which a single least rotation would not do once the limb
    also points a little forward.

    ``carried`` is the rotation the slot's bone has already received from the slots above it: a
    rest turn made about a body axis at rest is about that axis carried along."""
    b = np.asarray(body, dtype=np.float64)
    x_c, _ = canonical_axes(slot, b)
    p = b @ TURN_AXIS[slot]
    if carried is not None:
        p = np.asarray(carried, dtype=np.float64) @ p
    seg = np.asarray(segment, dtype=np.float64)
    flat = seg - np.dot(seg, p) * p
    first = np.eye(3)
    if np.linalg.norm(flat) > 1e-9 * max(float(np.linalg.norm(seg)), 1e-300):
        angle = np.arctan2(np.dot(np.cross(flat, x_c), p), np.dot(flat, x_c))
        first = Rotation.from_axis_angle(p, angle).as_matrix()
    return np.asarray(matrix_between_vectors(first @ seg, x_c) @ first, dtype=np.float64)


def geometric_frames_from_positions(x_dirs: ArrayLike, y_refs: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Orthonormal frames ``(..., 3, 3)`` (columns X, Y, Z) from direction and reference vectors.

    Returns ``(frames, ok)``; ``ok`` is False where ``X`` has no length or ``Y`` is (nearly)
    parallel to ``X``, and those frames are identity.
    """
    x = np.asarray(x_dirs, dtype=np.float64)
    y = np.asarray(y_refs, dtype=np.float64)
    x, y = np.broadcast_arrays(x, y)
    nx = np.linalg.norm(x, axis=-1, keepdims=True)
    ux = x / np.where(nx > 1e-12, nx, 1.0)
    yp = y - np.sum(y * ux, axis=-1, keepdims=True) * ux
    ny = np.linalg.norm(yp, axis=-1, keepdims=True)
    ny_ref = np.linalg.norm(y, axis=-1, keepdims=True)
    # A reference within ~2.5 degrees of X leaves the frame's roll to noise.
    ok = (nx[..., 0] > 1e-12) & (ny[..., 0] > 0.04 * np.maximum(ny_ref[..., 0], 1e-300))
    uy = yp / np.where(ny > 1e-12, ny, 1.0)
    frames = np.stack([ux, uy, np.cross(ux, uy)], axis=-1)
    frames = np.where(ok[..., None, None], frames, np.eye(3))
    return frames, ok
