"""Blender armatures read as core skeletons: the bone order, the rest matrices, the bones' heads and
tails, in bulk.

Conventions (those of :mod:`core.rig.skeleton`, :mod:`core.rig.clip` and :mod:`core.rig.rotations`):

* Bone order. :func:`skeleton_from_armature` orders bones parents first, depth first
  (:meth:`Skeleton.from_rest_matrices`); every per-bone array here is in that order, whatever
  order Blender lists bones in. Bones are matched by name, never by position.
* Spaces. Skeleton space is the armature object's space (``bone.matrix_local``,
  ``pose_bone.matrix``); the skeleton's ``placement`` is ``object.matrix_world`` (which carries
  any parent's scale and rotation). A local transform is ``pose_bone.matrix_basis``
  (location, rotation, scale) of a bone with default inheritance.
* Matrices read with ``foreach_get`` arrive flattened column by column: they are transposed.
* A connected bone's location is ignored by Blender (its head sits on its parent's tail), so it
  reads as zero and is never written.
* Time. An action's frame numbers count at its own rate, the ``marionette_fps`` custom property
  written by :mod:`.file_import` and :func:`.action_write.write_action` (else the scene's ``fps / fps_base``).
  A clip's ``times`` are seconds from its first sampled frame and ``first_frame`` is that frame's
  number, so ``clip.frame_numbers()`` gives back the action's frame numbers.

These conventions hold for the whole bulk bridge: :mod:`.clip_read` (actions read as clips),
:mod:`.fcurve_eval` (F-curves evaluated in numpy), :mod:`.evaluated_pose` (the pose Blender
plays) and :mod:`.action_write` (clips written as actions, skeletons as armatures).
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import bpy
import numpy as np

from ..core.errors import RigError
from ..core.rig.rotations import (
    FloatArray,
)
from ..core.rig.skeleton import Skeleton


def _armature(obj: Any) -> Any:
    """``obj`` checked to be an armature object with bones. Typed ``Any``: the stubs type
    ``Object.data`` as a union of every data type, which says nothing useful here."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        kind = getattr(obj, "type", type(obj).__name__)
        raise RigError(f"{getattr(obj, 'name', obj)!r} is not an armature object (it is {kind})")
    if len(obj.data.bones) == 0:
        raise RigError(f"armature object {obj.name!r} has no bones")
    return obj


def _matrices(buf: np.ndarray, n: int) -> FloatArray:
    """``(n, 4, 4)`` float64 from a flat column-major ``foreach_get`` buffer."""
    return buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)


def skeleton_from_armature(obj: bpy.types.Object) -> Skeleton:
    """The armature's bones as a core :class:`Skeleton`: rests from ``bone.matrix_local``,
    parents from the bone hierarchy, ``placement = obj.matrix_world``.

    The view layer is updated first when the object is in it, so a parent or transform changed
    since the last evaluation is reflected in the placement. Refuses (``RigError``, naming the
    object) anything that is not an armature with bones.
    """
    obj = _armature(obj)
    view_layer = bpy.context.view_layer
    if obj.name in view_layer.objects:
        view_layer.update()
    return _skeleton(obj)


#: Skeletons built lately, keyed by everything they are made of (names, parents, rests,
#: placement): reading a clip, retargeting it and writing the result build the same two rigs
#: several times. A Skeleton is immutable, so sharing one is safe.
_SKELETONS: dict[tuple[tuple[str, ...], tuple[str | None, ...], bytes, bytes], Skeleton] = {}


def _skeleton(obj: bpy.types.Object) -> Skeleton:
    """:func:`skeleton_from_armature` without the view-layer update (for readers and writers,
    which use the layout, not the placement)."""
    bones = obj.data.bones
    n = len(bones)
    buf = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    names = tuple(b.name for b in bones)
    parents = tuple(b.parent.name if b.parent is not None else None for b in bones)
    placement = np.array(obj.matrix_world, dtype=np.float64)
    key = (names, parents, buf.tobytes(), placement.tobytes())
    skeleton = _SKELETONS.get(key)
    if skeleton is None:
        skeleton = Skeleton.from_rest_matrices(names, list(parents), _matrices(buf, n), placement)
        if len(_SKELETONS) >= 16:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        _SKELETONS[key] = skeleton
    return skeleton


def _order(skeleton: Skeleton, names: Sequence[str]) -> np.ndarray:
    """For each skeleton joint, its index in ``names`` (a Blender collection's order)."""
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[n] for n in skeleton.names], dtype=np.int64)


def rest_heads_tails(obj: bpy.types.Object, skeleton: Skeleton | None = None) -> tuple[FloatArray, FloatArray]:
    """Skeleton-space rest heads and tails ``(B, 3)``, ``(B, 3)`` in the skeleton's bone order."""
    obj = _armature(obj)
    skeleton = skeleton or _skeleton(obj)
    bones = obj.data.bones
    n = len(bones)
    heads = np.empty(n * 3, dtype=np.float32)
    tails = np.empty(n * 3, dtype=np.float32)
    bones.foreach_get("head_local", heads)
    bones.foreach_get("tail_local", tails)
    idx = _order(skeleton, [b.name for b in bones])
    return heads.reshape(n, 3)[idx].astype(np.float64), tails.reshape(n, 3)[idx].astype(np.float64)

