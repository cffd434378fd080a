"""World matrices of the controls' targets and of the armature itself, now or over frames.

Targets are objects (their world matrix) or bones: of this armature (its *animated* pose, so a
control never chases its own output), or of another armature (as Blender evaluates it). Over a
frame range, an object moved only by its own keys is evaluated in numpy; anything else is read
through ``scene.frame_set`` (:func:`evaluated_tracks`), which runs the frame handlers: callers
reading over frames hold the live preview (``viewport.live_preview.held``) around it.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import bpy
import numpy as np

from ..core.controls.stack import ControlInstance
from ..core.rig.rotations import (
    FloatArray,
    orthonormalize,
    quat_from_blender_axis_angle,
    quat_from_euler,
    quat_from_matrix,
)
from . import compat
from .control_rows import BuiltControls, TargetRef
from .fcurve_eval import evaluate_fcurves

_OBJECT_PATHS = {"location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale", "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale"}


def _rotation_to_skeleton(placement: FloatArray, world: FloatArray) -> FloatArray:
    """World orientations ``(T, 3, 3)`` (possibly scaled) as skeleton-space quaternions."""
    rel = np.linalg.solve(orthonormalize(placement[:, :3, :3]), orthonormalize(world[:, :3, :3]))
    return quat_from_matrix(orthonormalize(rel))


def _object_basis(channels: dict[str, FloatArray], mode: str) -> FloatArray:
    """``(T, 4, 4)`` object matrices from location, rotation, scale and delta channels, as
    ``BKE_object_to_mat4`` composes them (rotation = delta rotation @ rotation)."""
    loc = channels["location"] + channels["delta_location"]
    scale = channels["scale"] * channels["delta_scale"]
    if mode == "QUATERNION":
        q = channels["rotation_quaternion"]
        dq = channels["delta_rotation_quaternion"]
        r = _quat_matrices(dq) @ _quat_matrices(q)
    elif mode == "AXIS_ANGLE":
        r = _quat_matrices(channels["delta_rotation_quaternion"]) @ _quat_matrices(quat_from_blender_axis_angle(channels["rotation_axis_angle"]))
    else:
        r = _quat_matrices(quat_from_euler(channels["delta_rotation_euler"], mode)) @ _quat_matrices(quat_from_euler(channels["rotation_euler"], mode))
    m = np.zeros(loc.shape[:-1] + (4, 4))
    m[..., :3, :3] = r * scale[..., None, :]
    m[..., :3, 3] = loc
    m[..., 3, 3] = 1.0
    return m


def _quat_matrices(q: FloatArray) -> FloatArray:
    from ..core.rig.rotations import matrix_from_quat

    n = np.linalg.norm(q, axis=-1, keepdims=True)
    return matrix_from_quat(np.where(n > 1e-12, q / np.where(n > 1e-12, n, 1.0), np.array([1.0, 0.0, 0.0, 0.0])))


def object_moves(o: bpy.types.Object) -> bool:
    """Whether anything but nothing could move the object's world matrix over time."""
    ad = o.animation_data
    if ad is not None and (ad.action is not None or len(ad.drivers) or any(not t.mute for t in ad.nla_tracks)):
        return True
    if any(not c.mute and c.influence > 0.0 for c in o.constraints):
        return True
    p = o.parent
    if p is not None:
        if object_moves(p):
            return True
        if o.parent_type in {"BONE", "VERTEX", "VERTEX_3"}:
            return True
    return False


def _keys_only(o: bpy.types.Object) -> bool:
    """Moved only by its own action's transform keys, under a parent that does not move."""
    ad = o.animation_data
    if ad is None or ad.action is None or len(ad.drivers) or ad.use_tweak_mode:
        return False
    if ad.use_nla and any(not t.mute and len(t.strips) for t in ad.nla_tracks):
        return False
    if ad.action_influence != 1.0 or ad.action_blend_type != "REPLACE":
        return False
    if any(not c.mute and c.influence > 0.0 for c in o.constraints):
        return False
    # Curves of other properties (bones, custom properties) leave the object's matrix alone.
    return o.parent is None or (not object_moves(o.parent) and o.parent_type == "OBJECT")


def object_world_track(o: bpy.types.Object, frames: np.ndarray) -> FloatArray | None:
    """World matrices ``(T, 4, 4)`` of ``o`` at ``frames`` when numpy can tell them without
    Blender evaluating the scene (a still object, or one moved by its own keys alone); else
    ``None``."""
    t = frames.shape[0]
    if not object_moves(o):
        return np.broadcast_to(np.array(o.matrix_world, dtype=np.float64), (t, 4, 4)).copy()
    if not _keys_only(o):
        return None
    ad = o.animation_data
    action_slot = ad.action_slot if compat.SLOTTED_ACTIONS else None
    curves = [
        fc for fc in compat.action_fcurves(ad.action, action_slot)
        if fc.data_path in _OBJECT_PATHS and not fc.mute and not (fc.group is not None and fc.group.mute)
        and (len(fc.keyframe_points) or len(fc.sampled_points))
    ]
    channels: dict[str, FloatArray] = {}
    for prop in _OBJECT_PATHS:
        value = np.array(getattr(o, prop), dtype=np.float64).reshape(-1)
        channels[prop] = np.broadcast_to(value, (t, value.shape[0])).copy()
    if curves:
        values = evaluate_fcurves(curves, frames)
        for fc, v in zip(curves, values, strict=True):
            if fc.array_index < channels[fc.data_path].shape[1]:
                channels[fc.data_path][:, fc.array_index] = v
    basis = _object_basis(channels, o.rotation_mode)
    if o.parent is None:
        return basis
    parent = np.array(o.parent.matrix_world, dtype=np.float64) @ np.array(o.matrix_parent_inverse, dtype=np.float64)
    return parent @ basis


def _world_now(ref: TargetRef, depsgraph: Any = None) -> FloatArray | None:
    """World matrix of ``ref`` now: as the view layer shows it, or as ``depsgraph`` (a render's)
    has evaluated it."""
    o = bpy.data.objects.get(ref.object_name)
    if o is None:
        return None
    if depsgraph is not None:
        o = o.evaluated_get(depsgraph)
    m = np.array(o.matrix_world, dtype=np.float64)
    if ref.bone:
        pb = o.pose.bones.get(ref.bone) if o.pose is not None else None
        if pb is None:
            return None
        m = m @ np.array(pb.matrix, dtype=np.float64)
    return m


def evaluated_tracks(refs: Sequence[TargetRef], frames: np.ndarray) -> dict[TargetRef, FloatArray]:
    """World matrices of ``refs`` at ``frames`` as Blender evaluates them (``frame_set`` per
    frame; the caller holds the live preview so nothing else runs); the scene's frame is restored."""
    scene = bpy.context.scene
    out = {r: np.full((frames.shape[0], 4, 4), np.nan) for r in refs}
    keep = (scene.frame_current, scene.frame_subframe)
    try:
        for k, f in enumerate(frames):
            i = math.floor(float(f))
            scene.frame_set(i, subframe=float(f) - i)
            for r in refs:
                m = _world_now(r)
                if m is not None:
                    out[r][k] = m
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return out


class TargetReader:
    """World matrices of every target of a stack, for the current frame or over frames."""

    def __init__(self, obj: bpy.types.Object, built: BuiltControls) -> None:
        self.obj_name = obj.name
        self.built = built
        self.refs = sorted({r for s in built.specs for r in (s.target, s.pole, s.second) if r is not None}, key=lambda r: (r.object_name, r.bone))
        self.own = any(r.object_name == obj.name and r.bone for r in self.refs)
        #: The armature's placements and the targets' matrices the last evaluation used.
        self.seen: tuple[FloatArray, dict[TargetRef, FloatArray]] | None = None

    def missing(self) -> list[str]:
        out = []
        for r in self.refs:
            o = bpy.data.objects.get(r.object_name)
            if o is None:
                out.append(f"target {r.describe()} no longer exists")
            elif r.bone and (o.type != "ARMATURE" or r.bone not in o.data.bones):
                out.append(f"target {r.describe()}: no such bone")
        return out

    def tracks(self, obj: bpy.types.Object, frames: np.ndarray | None, own_world: FloatArray | None, placement: FloatArray) -> dict[TargetRef, FloatArray]:
        """World matrices ``(T, 4, 4)`` per target. ``frames`` ``None``: the current frame
        (``T = 1``). ``own_world``: skeleton-space placements of this armature's animated pose."""
        skeleton = self.built.stack.skeleton if self.built.stack is not None else None
        t = 1 if frames is None else frames.shape[0]
        out: dict[TargetRef, FloatArray] = {}
        slow: list[TargetRef] = []
        for r in self.refs:
            if r.object_name == obj.name and r.bone and skeleton is not None and own_world is not None:
                j = skeleton.find(r.bone)
                if j is not None:
                    out[r] = placement @ own_world[:, j]
                continue
            if frames is None:
                m = _world_now(r)
                out[r] = np.full((1, 4, 4), np.nan) if m is None else m[None]
                continue
            o = bpy.data.objects.get(r.object_name)
            track = object_world_track(o, frames) if o is not None and not r.bone else None
            if track is None:
                slow.append(r)
            else:
                out[r] = track
        if slow and frames is not None:
            out.update(evaluated_tracks(slow, frames))
        for r in self.refs:
            if r not in out:
                out[r] = np.full((t, 4, 4), np.nan)
        return out


def inputs_match(obj: bpy.types.Object, seen: tuple[FloatArray, dict[TargetRef, FloatArray]], depsgraph: Any, tol: float = 1e-5) -> bool:
    """Whether the armature and its targets stand in ``depsgraph`` (a render's) where they stood
    for an evaluation of one frame that used ``seen`` (:attr:`TargetReader.seen`). Bones of the
    armature itself follow its keys and are not compared."""
    places, tracks = seen
    if not np.allclose(np.array(obj.evaluated_get(depsgraph).matrix_world, dtype=np.float64), places[0], atol=tol):
        return False
    for r, m in tracks.items():
        if r.object_name == obj.name and r.bone:
            continue
        now = _world_now(r, depsgraph)
        if now is None or not np.allclose(now, m[0], atol=tol, equal_nan=True):
            return False
    return True


def set_targets(
    instance: ControlInstance, built: BuiltControls, tracks: dict[TargetRef, FloatArray], placement: FloatArray, ray_cast: Any,
    switched: dict[str, np.ndarray] | None = None,
) -> None:
    """Give every control of ``instance`` its targets (skeleton space) and ground query.
    ``switched``: per control, ``(T,)`` frames it is on; off, its target is withheld (not a
    number), so the stack skips the control on those frames."""
    local: dict[TargetRef, FloatArray] = {}
    refs = list(tracks)
    if refs and any(s.target is not None for s in built.specs):
        # Every target point into skeleton space in one product.
        inv = _inverse_of(placement)
        world = np.array([tracks[r] for r in refs])[..., :3, 3]  # (R, T, 3)
        points = np.einsum("tij,rtj->rti", inv[:, :3, :3], world) + inv[None, :, :3, 3]
        local = dict(zip(refs, points, strict=True))
    for s in built.specs:
        if s.kind == "GROUND":
            instance.set_ground(s.name, ray_cast(s))
            continue
        if s.target is None:
            continue
        target = local[s.target]
        if switched and s.name in switched:
            target = np.where(switched[s.name][:, None], target, np.nan)
        if s.kind == "CLOSURE":
            assert s.second is not None
            instance.set_closure_targets(s.name, target, local[s.second])
            continue
        pole = None if s.pole is None else local[s.pole]
        world_m = tracks[s.target]
        orientation = _rotation_to_skeleton(placement, world_m) if s.orient and np.all(np.isfinite(world_m)) else None
        instance.set_target(s.name, target, pole=pole, orientation=orientation)


#: The last placements inverted, by their bytes (see _inverse_of).
_INVERSE: list[tuple[bytes, FloatArray]] = []


def _inverse_of(placement: FloatArray) -> FloatArray:
    """``inv(placement)``, taken again only when it changed (a character standing still keeps
    its matrix frame after frame; a 4 x 4 inverse costs as much as a few dozen small products)."""
    key = placement.tobytes()
    if not _INVERSE or _INVERSE[0][0] != key:
        _INVERSE[:] = [(key, np.linalg.inv(placement))]
    return _INVERSE[0][1]
