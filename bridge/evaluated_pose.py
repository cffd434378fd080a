"""The pose Blender evaluates (constraints, drivers, NLA and inheritance included), read in bulk per
frame: pose-space or world matrices of every bone in the skeleton's order. Conventions:
:mod:`.skeleton_read`.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np

from ..core.errors import RigError
from ..core.rig.rotations import (
    FloatArray,
)
from ..core.rig.skeleton import Skeleton
from .fcurve_eval import _check_frames
from .skeleton_read import _armature, _matrices, _order, _skeleton


def _in_view_layer(obj: bpy.types.Object) -> None:
    view_layer = bpy.context.view_layer
    if obj.name not in view_layer.objects:
        view_layer.update()  # objects linked since the last update are not listed until a sync
    if obj.name not in view_layer.objects:
        raise RigError(f"armature {obj.name!r} is not in the current view layer, so Blender cannot evaluate it")


def _frame_of(f: float) -> tuple[int, float]:
    i = math.floor(f)
    return int(i), float(f - i)


def evaluated_pose_matrices(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """Blender's evaluated skeleton-space bone matrices ``(T, B, 4, 4)`` (``pose_bone.matrix``:
    constraints, drivers, IK and NLA included) at ``frames``, in skeleton order. The scene's
    current frame is restored afterwards."""
    return _evaluate_frames(obj, frames, skeleton, world=False)


def evaluated_world_matrices(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """Like :func:`evaluated_pose_matrices` but in world space (``matrix_world @ matrix``, with
    the object's world matrix of each frame)."""
    return _evaluate_frames(obj, frames, skeleton, world=True)


def evaluated_world_positions(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None = None) -> FloatArray:
    """World positions ``(T, B, 3)`` of every bone's head at ``frames``, as Blender evaluates
    them (reference for tests), in skeleton order."""
    return evaluated_world_matrices(obj, frames, skeleton)[..., :3, 3]


def _evaluate_frames(obj: bpy.types.Object, frames: Any, skeleton: Skeleton | None, world: bool) -> FloatArray:
    obj = _armature(obj)
    _in_view_layer(obj)
    skeleton = skeleton or _skeleton(obj)
    f = _check_frames(frames, f"evaluating {obj.name!r}")
    scene = bpy.context.scene
    pbs = obj.pose.bones
    n = len(pbs)
    idx = _order(skeleton, [pb.name for pb in pbs])
    buf = np.empty(n * 16, dtype=np.float32)
    out = np.empty((f.shape[0], n, 4, 4))
    keep = (scene.frame_current, scene.frame_subframe)
    try:
        for k, fr in enumerate(f):
            i, sub = _frame_of(float(fr))
            scene.frame_set(i, subframe=sub)
            pbs.foreach_get("matrix", buf)
            m = _matrices(buf, n)
            if world:
                m = np.array(obj.matrix_world, dtype=np.float64) @ m
            out[k] = m
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return out[:, idx]

