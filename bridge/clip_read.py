"""Blender actions read as core clips, in bulk. Conventions: :mod:`.skeleton_read`.

Reading is bulk: every F-curve's keys come out with ``foreach_get`` and are evaluated in numpy
exactly as Blender does (constant, linear and Bezier segments with Blender's handle correction,
constant or linear extrapolation). A curve numpy does not model (easing modes, F-curve modifiers,
baked samples, backwards handles) is evaluated by Blender for that curve alone
(``FCurve.evaluate``). When something outside the action shapes the pose -- bone constraints,
drivers on pose bones, bones that do not fully inherit their parent's transform, a layered
action -- the clip is read from Blender's evaluated pose instead (:func:`clip_from_evaluation`).

An action is read *alone*, at its own frame numbers: NLA tracks on the object, and the
influence or blending of its active action, are not part of that action's clip (the glTF
importer, for one, stacks every animation of a file in muted NLA tracks).

Nothing here modifies the action or the object it reads.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from ..core.errors import ClipError, RigError
from ..core.rig.clip import Clip
from ..core.rig.rotations import (
    EULER_ORDERS,
    FloatArray,
    make_quat_continuous,
    parts_from_transform,
    quat_from_blender_axis_angle,
    quat_from_euler,
)
from ..core.rig.skeleton import Skeleton
from . import compat
from .evaluated_pose import _in_view_layer, evaluated_pose_matrices
from .fcurve_eval import _KEY_THRESHOLD, _check_frames, _evaluate, _Keys, _read_keys
from .file_import import FPS_PROPERTY, scene_fps
from .skeleton_read import _armature, _order, _skeleton

_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.([A-Za-z_]+)$')
_UNESCAPE = re.compile(r"\\(.)")
_CHANNEL_SIZE = {"location": 3, "rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "scale": 3}


def action_fps(action: bpy.types.Action | None) -> float:
    """The rate an action's frame numbers count at: ``marionette_fps``, else the scene's."""
    if action is not None:
        v = action.get(FPS_PROPERTY)
        if v is not None:
            try:
                fps = float(v)
            except (TypeError, ValueError):
                fps = 0.0
            if math.isfinite(fps) and fps > 0.0:
                return fps
    return scene_fps()


def _bone_curves(obj: bpy.types.Object, action: bpy.types.Action) -> tuple[Any, list[tuple[Any, str, str]]]:
    """The slot ``obj`` plays ``action`` through and its live pose-bone transform curves as
    ``(fcurve, bone, property)`` (muted curves and curves of muted groups are skipped, as
    Blender's animation system skips them)."""
    action_slot = compat.action_slot_for(action, obj)
    if compat.SLOTTED_ACTIONS and action_slot is None and len(action.slots) > 0:
        raise ClipError(
            f"action {action.name!r} has {len(action.slots)} slots and none is assigned to or named after "
            f"{obj.name!r}; assign the action to the object to choose one"
        )
    out = []
    bones = obj.pose.bones
    for fc in compat.action_fcurves(action, action_slot):
        if fc.mute or (fc.group is not None and fc.group.mute):
            continue
        m = _BONE_PATH.match(fc.data_path)
        if m is None:
            continue
        bone = m.group(1)
        if "\\" in bone:  # only an escaped name needs the substitution
            bone = _UNESCAPE.sub(r"\1", bone)
        prop = m.group(2)
        if prop not in _CHANNEL_SIZE or bone not in bones:
            continue
        if not 0 <= fc.array_index < _CHANNEL_SIZE[prop]:
            continue
        out.append((fc, bone, prop))
    return action_slot, out


def needs_evaluation(obj: bpy.types.Object, action: bpy.types.Action | None = None, ignore: frozenset[str] = frozenset()) -> list[str]:
    """Why the pose of ``obj`` cannot be read from the action's keys alone (empty: it can).

    Each reason names what shapes the pose: an active bone constraint (except those named in
    ``ignore``), a driver on a pose bone, a bone that does not fully inherit its parent's
    transform, a layered action.
    """
    obj = _armature(obj)
    reasons = []
    for pb in obj.pose.bones:
        for c in pb.constraints:
            if not c.mute and c.influence > 0.0 and c.name not in ignore:
                reasons.append(f"bone {pb.name!r} has a {c.type} constraint ({c.name!r})")
                break
    ad = obj.animation_data
    if ad is not None:
        for d in ad.drivers:
            if d.data_path.startswith("pose.bones[") and not d.mute:
                reasons.append(f"a driver sets {d.data_path}[{d.array_index}]")
    for b in obj.data.bones:
        if not b.use_inherit_rotation:
            reasons.append(f"bone {b.name!r} does not inherit rotation")
        elif b.inherit_scale != "FULL":
            reasons.append(f"bone {b.name!r} inherits scale as {b.inherit_scale}")
        elif not b.use_local_location:
            reasons.append(f"bone {b.name!r} moves in armature space (Local Location off)")
    if action is not None and compat.action_is_layered(action):
        reasons.append(f"action {action.name!r} has several layers or strips")
    return reasons


def _default_frames(action: bpy.types.Action, keys: _Keys) -> np.ndarray:
    """Integer frames of the action's range: its manual range when set, else its keys'."""
    keyed = keys.counts > 0
    if action.use_frame_range:
        lo, hi = float(action.frame_start), float(action.frame_end)
    elif not np.any(keyed):  # only baked samples: Blender knows their range
        lo, hi = float(action.frame_range[0]), float(action.frame_range[1])
    else:
        lo = float(keys.co[2 * keys.starts[keyed]].min())  # the frames as read: x unconverted
        hi = float(keys.co[2 * (keys.starts[keyed] + keys.counts[keyed] - 1)].max())
    start = math.ceil(lo - _KEY_THRESHOLD)
    stop = math.floor(hi + _KEY_THRESHOLD)
    if stop < start:  # a range narrower than a frame: take the frame it starts in
        stop = start
    return np.arange(start, stop + 1, dtype=np.float64)


def _describer(action: bpy.types.Action, entries: Sequence[tuple[Any, str, str]]) -> Any:
    def describe(c: int) -> str:
        fc, bone, prop = entries[c]
        return f"action {action.name!r}: bone {bone!r} ({prop}[{fc.array_index}])"

    return describe


def _pose_values(obj: bpy.types.Object, skeleton: Skeleton) -> dict[str, FloatArray]:
    """Current pose-bone channel values, ``(B, n)`` per channel, in skeleton order."""
    pbs = obj.pose.bones
    n = len(pbs)
    idx = _order(skeleton, [pb.name for pb in pbs])
    out = {}
    for prop, size in _CHANNEL_SIZE.items():
        buf = np.empty(n * size, dtype=np.float32)
        pbs.foreach_get(prop, buf)
        out[prop] = buf.reshape(n, size)[idx].astype(np.float64)
    return out


def clip_from_action(
    obj: bpy.types.Object,
    action: bpy.types.Action,
    frames: Any = None,
    fps: float | None = None,
) -> Clip:
    """The clip ``action`` plays on ``obj``, sampled at ``frames`` (default: every integer frame
    of the action's range), read in bulk.

    ``fps`` is the rate the action's frame numbers count at (default :func:`action_fps`). Falls
    back to :func:`clip_from_evaluation` by itself when :func:`needs_evaluation` gives a reason.
    Refuses (``ClipError``) an action with no keys on the armature's bones and non-finite keys
    (naming bone and frame); refuses (``RigError``) an armature without bones.
    """
    obj = _armature(obj)
    if action is None:
        raise ClipError(f"no action given to read on {obj.name!r}")
    skeleton = _skeleton(obj)
    _slot, found = _bone_curves(obj, action)
    modes = {pb.name: pb.rotation_mode for pb in obj.pose.bones}
    entries = []
    for fc, bone, prop in found:
        if prop.startswith("rotation_"):
            mode = modes[bone]
            wanted = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
                mode, "rotation_euler"
            )
            if prop != wanted:
                continue  # keys of another rotation mode: Blender ignores them too
        if len(fc.keyframe_points) or len(fc.sampled_points):
            entries.append((fc, bone, prop))
    if not entries:
        if not any(len(fc.keyframe_points) for fc, _, _ in found):
            raise ClipError(f"action {action.name!r} has no keys on the bones of {obj.name!r}")
        raise ClipError(f"action {action.name!r} keys no channel that {obj.name!r}'s bones use")
    keys = _read_keys([e[0] for e in entries], _describer(action, entries))
    reasons = needs_evaluation(obj, action)
    rate = float(fps) if fps is not None else action_fps(action)
    if frames is None:
        frames = _default_frames(action, keys)
    frames = _check_frames(frames, f"action {action.name!r}")
    if reasons:
        return clip_from_evaluation(obj, action, frames, rate)

    current = _pose_values(obj, skeleton)
    connected = np.array([obj.data.bones[n].use_connect for n in skeleton.names])
    # The same keys read again (Retarget Clip clicked again on the clip): the clip made last time,
    # when everything it is made of compares equal (keys, frames, channels, rotation modes, pose).
    held = (obj.session_uid, action.session_uid)
    made = [fc.array_index for fc, _, _ in entries], [(b_, p_) for _, b_, p_ in entries], modes
    arrays = (frames, keys.co, keys.counts, keys.linear_extrapolation, keys.by_blender, connected, *current.values())
    again = _READ_CLIPS.get(held)
    if (
        again is not None
        and again.skeleton is skeleton
        and again.name == action.name
        and again.rate == rate
        and again.made == made
        and _same(again.arrays, arrays)
    ):
        _READ_CLIPS[held] = _READ_CLIPS.pop(held)  # the most recently used, dropped last
        return again.clip

    values = _evaluate(keys, frames)
    t, b = frames.shape[0], len(skeleton)
    coverage = np.zeros(b)
    # Curve rows of each channel, scattered in one fancy assignment per channel.
    rows: dict[str, tuple[list[int], list[int], list[int]]] = {p: ([], [], []) for p in _CHANNEL_SIZE}
    for r, (fc, bone, prop) in enumerate(entries):
        j = skeleton.index(bone)
        rr, jj, kk = rows[prop]
        rr.append(r)
        jj.append(j)
        kk.append(fc.array_index)
        coverage[j] = 1.0

    def channel(prop: str, bones: np.ndarray | slice = slice(None)) -> FloatArray:
        """``(T, B', n)`` values of ``prop``: the keys where curves exist, the pose elsewhere."""
        size = _CHANNEL_SIZE[prop]
        arr = np.empty((t, b, size))
        arr[:] = current[prop][None]
        rr, jj, kk = rows[prop]
        if rr:
            arr[:, jj, kk] = values[rr].T
        return arr[:, bones]

    mode_of = [modes[n] for n in skeleton.names]
    kinds = set(mode_of)
    if kinds == {"QUATERNION"}:
        # The usual case, every bone in quaternions: the channel is the rotations (no copies).
        rotations = channel("rotation_quaternion")
        kinds = set()
    elif len(kinds) == 1 and mode_of[0] in EULER_ORDERS:
        # Every bone in one Euler order (a BVH import): converted whole, no selections.
        rotations = quat_from_euler(channel("rotation_euler"), mode_of[0])
        kinds = set()
    else:
        rotations = np.empty((t, b, 4))
    for mode in kinds:
        sel = np.array([m == mode for m in mode_of])
        if mode == "QUATERNION":
            rotations[:, sel] = channel("rotation_quaternion", sel)
        elif mode == "AXIS_ANGLE":
            rotations[:, sel] = quat_from_blender_axis_angle(channel("rotation_axis_angle", sel))
        elif mode in EULER_ORDERS:
            rotations[:, sel] = quat_from_euler(channel("rotation_euler", sel), mode)
        else:  # pragma: no cover - Blender has no other rotation mode
            raise RigError(f"unknown rotation mode {mode!r}")
    rotations, zero = _normalized(rotations)
    translations = channel("location")
    if np.any(connected):
        # Blender ignores the location of a connected bone (its head is pinned to the parent's tail).
        translations[:, connected] = 0.0
    scales = None
    if rows["scale"][0] or np.any(current["scale"] != 1.0):
        scales = channel("scale")
        # Scale keys that are all one carry nothing; a clip without scales writes no scale curves.
        if np.all(np.abs(scales - 1.0) < 1e-6):
            scales = None
    clip = Clip(
        names=skeleton.names,
        times=(frames - frames[0]) / rate,
        fps=rate,
        rotations=rotations,
        translations=translations,
        scales=scales,
        coverage=coverage,
        name=action.name,
        first_frame=float(frames[0]),
    )
    clip = _validated(clip, zero)
    if not keys.modes_read.any() and not keys.by_blender.any() and keys.co.size // 2 <= _READ_CLIP_KEYS:
        # Only clips whose values are the keys themselves (interpolation and handles unread) and
        # not too long are kept; the arrays are made read-only, since callers share them.
        for arr in (clip.times, clip.rotations, clip.translations, clip.scales, clip.coverage):
            while isinstance(arr, np.ndarray):  # an array and whatever it views
                arr.flags.writeable = False
                arr = arr.base
        _READ_CLIPS.pop(held, None)
        if len(_READ_CLIPS) >= 2:
            _READ_CLIPS.pop(next(iter(_READ_CLIPS)))
        _READ_CLIPS[held] = _ReadClip(skeleton, action.name, rate, made, arrays, clip)
    return clip


@dataclass(frozen=True)
class _ReadClip:
    """A clip :func:`clip_from_action` made, with everything it was made of."""

    skeleton: Skeleton
    name: str
    rate: float
    made: Any  # the curves' array indices, (bone, property) and the bones' rotation modes
    arrays: tuple[np.ndarray, ...]  # frames, keys as read, key counts, extrapolation, curves Blender evaluates, connected, pose
    clip: Clip


#: The clips read last, per (object, action), the most recently used last: a clip read again with
#: nothing changed is not made again (its keys are still read and compared). The summary after a
#: click reads the new action, so two are kept. Clips of more keys than this are not kept.
_READ_CLIPS: dict[tuple[int, int], _ReadClip] = {}
_READ_CLIP_KEYS = 1_000_000


def forget_read_clips() -> None:
    """Drop every clip kept between reads (the add-on unregistered, or memory wanted back)."""
    _READ_CLIPS.clear()


def _same(kept: Sequence[np.ndarray], now: Sequence[np.ndarray]) -> bool:
    return len(kept) == len(now) and all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(kept, now, strict=True))


def _normalized(q: FloatArray) -> tuple[FloatArray, bool]:
    """Unit quaternions (Blender normalises before use) and whether any was zero; ``q`` itself
    when it is unit already."""
    n = np.sqrt(np.einsum("...i,...i->...", q, q))
    zero = bool(np.any(n < 1e-12))
    if not zero and np.all(np.abs(n - 1.0) < 1e-12):
        return q, False
    return q / np.where(n < 1e-12, 1.0, n)[..., None], zero


def _validated(clip: Clip, suspect: bool = False) -> Clip:
    """``clip.validate()`` only when a cheap test finds something to name (it is the slow part
    of reading a clip): a non-finite value makes the sum non-finite."""
    total = clip.rotations.sum() + clip.translations.sum() + (0.0 if clip.scales is None else clip.scales.sum())
    if suspect or not np.isfinite(total):
        clip.validate()
    return clip


@dataclass
class _ObjectAnimationState:
    """What evaluating an action on an object touches, so it can be put back exactly."""

    had_animation_data: bool
    action: Any
    action_slot: Any
    use_nla: bool
    influence: float
    blend: str
    extrapolation: str
    pose_position: str
    channels: dict[str, np.ndarray]

    @classmethod
    def capture(cls, obj: bpy.types.Object) -> _ObjectAnimationState:
        ad = obj.animation_data
        pbs = obj.pose.bones
        channels = {}
        for prop, size in _CHANNEL_SIZE.items():
            buf = np.empty(len(pbs) * size, dtype=np.float32)
            pbs.foreach_get(prop, buf)
            channels[prop] = buf
        return cls(
            had_animation_data=ad is not None,
            action=ad.action if ad else None,
            action_slot=(ad.action_slot if ad and compat.SLOTTED_ACTIONS else None),
            use_nla=ad.use_nla if ad else True,
            influence=ad.action_influence if ad else 1.0,
            blend=ad.action_blend_type if ad else "REPLACE",
            extrapolation=ad.action_extrapolation if ad else "HOLD",
            pose_position=obj.data.pose_position,
            channels=channels,
        )

    def restore(self, obj: bpy.types.Object) -> None:
        if obj.data.pose_position != self.pose_position:
            obj.data.pose_position = self.pose_position
        if not self.had_animation_data:
            obj.animation_data_clear()
        else:
            ad = obj.animation_data
            if ad.action != self.action or (compat.SLOTTED_ACTIONS and ad.action_slot != self.action_slot):
                compat.assign_action(obj, self.action, self.action_slot)
            ad.use_nla = self.use_nla
            ad.action_influence = self.influence
            ad.action_blend_type = self.blend
            ad.action_extrapolation = self.extrapolation
        pbs = obj.pose.bones
        for prop, buf in self.channels.items():
            pbs.foreach_set(prop, buf)


def clip_from_evaluation(
    obj: bpy.types.Object,
    action: bpy.types.Action | None,
    frames: Any = None,
    fps: float | None = None,
) -> Clip:
    """The clip read from Blender's evaluated pose at each frame (``scene.frame_set`` and
    ``pose.bones.foreach_get('matrix')``), converted to core local transforms through the
    skeleton (:meth:`Skeleton.local_from_world`), so the core model reproduces the evaluated
    pose whatever constraints, drivers or inheritance settings made it.

    With an ``action`` it is played alone (assigned with its slot, NLA off, full influence) and
    ``frames`` default to the action's range; with ``None`` the object is evaluated as it stands
    (its action, NLA, everything) over the scene's frame range. An armature shown at its rest
    position is evaluated in pose position. The object's action, slot, NLA settings and pose
    values, the armature's pose position and the scene's current frame are restored afterwards.
    """
    obj = _armature(obj)
    _in_view_layer(obj)
    skeleton = _skeleton(obj)
    scene = bpy.context.scene
    ad = obj.animation_data
    if ad is not None and ad.use_tweak_mode:
        raise ClipError(f"{obj.name!r} is in NLA tweak mode; leave it before reading an action")
    action_slot = None
    if action is not None:
        action_slot, found = _bone_curves(obj, action)
        found = [e for e in found if len(e[0].keyframe_points) or len(e[0].sampled_points)]
        if not found:
            raise ClipError(f"action {action.name!r} has no keys on the bones of {obj.name!r}")
        keys = _read_keys([e[0] for e in found], _describer(action, found))  # refuses non-finite keys
        rate = float(fps) if fps is not None else action_fps(action)
        if frames is None:
            frames = _default_frames(action, keys)
        name = action.name
    else:
        rate = float(fps) if fps is not None else scene_fps()
        if frames is None:
            frames = np.arange(scene.frame_start, scene.frame_end + 1, dtype=np.float64)
        name = ad.action.name if ad is not None and ad.action is not None else obj.name
    frames = _check_frames(frames, f"evaluating {obj.name!r}")

    state = _ObjectAnimationState.capture(obj)
    try:
        if obj.data.pose_position != "POSE":
            obj.data.pose_position = "POSE"
        if action is not None:
            compat.assign_action(obj, action, action_slot)
            ad = obj.animation_data
            ad.use_nla = False
            ad.action_influence = 1.0
            ad.action_blend_type = "REPLACE"
            ad.action_extrapolation = "HOLD"
        pose = evaluated_pose_matrices(obj, frames, skeleton)
    finally:
        state.restore(obj)
        # Re-evaluate at the restored frame with the restored action and values.
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)

    local = skeleton.local_from_world(pose)
    rotations, translations, scales = parts_from_transform(local)
    # Drop float32 noise from the matrices read back: a pose without scale has none.
    has_scale = not np.allclose(scales, 1.0, rtol=0.0, atol=1e-5)
    clip = Clip(
        names=skeleton.names,
        times=(frames - frames[0]) / rate,
        fps=rate,
        rotations=make_quat_continuous(rotations, axis=0),
        translations=translations,
        scales=scales if has_scale else None,
        coverage=np.ones(len(skeleton)),
        name=name,
        first_frame=float(frames[0]),
    )
    return _validated(clip)

