"""Controls on Blender armatures: the animated pose in, the core control stack, the pose out.

Shared by the live preview (:mod:`.live_preview`), the Bake Controls operator and the
``bake-controls`` command. Conventions are those of :mod:`.armature_io`: skeleton space is the
armature object's space, bones are in the skeleton's order (parents first), local rotations are
w-first quaternions of ``pose_bone.matrix_basis``.

*The animated pose* is what the animation alone gives, never what the controls wrote before
(SPEC 7.1). It is read in bulk: the active action's keys evaluated in numpy (:class:`KeyCache`,
sampled once over the scene's and the action's frame range) over the pose channels the action
does not key. Channels that a control drives and the action does not key would hold the
controls' previous output once written; :class:`TrackedChannels` remembers what was there before
(the *base*) and what was written, so the next read takes the base unless the user has changed
the channel since (then the change becomes the new base). Both are also kept in the object's ID
property ``_marionette_live``, so an undo step or a saved file restores them together with the
channels.

What live evaluation cannot read from keys is refused with the reason (:func:`pose_problems`):
bone constraints, drivers on bones, bones that do not fully inherit, active NLA tracks, an
action blended or weighted, a linked armature.

Targets are objects (their world matrix) or bones: of this armature (its *animated* pose, so a
control never chases its own output), or of another armature (as Blender evaluates it). Over a
frame range, an object moved only by its own keys is evaluated in numpy; anything else is read
through ``scene.frame_set`` with the live preview held.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix, Vector

from ..core.controls.chains import JointPath
from ..core.controls.joint_limits import ConeLimit, HingeLimit, JointLimit, link_limit
from ..core.controls.look_at import LookAtChain
from ..core.controls.stack import (
    Control,
    ControlInstance,
    ControlReport,
    ControlStack,
    IKControl,
    LookAtControl,
    StackResult,
)
from ..core.errors import ClipError, MarionetteError, RigError
from ..core.rig.clip import Clip
from ..core.rig.rotations import (
    FloatArray,
    euler_from_quat,
    make_euler_continuous,
    orthonormalize,
    quat_from_euler,
    quat_from_matrix,
)
from ..core.rig.skeleton import Skeleton
from ..properties.control_settings import AXIS_VECTORS, CLOSURE_SOLVERS, IK_KINDS, LOOK_AT_BONES
from . import compat
from .action_write import write_action
from .clip_read import needs_evaluation
from .fcurve_eval import evaluate_fcurves
from .file_import import FPS_PROPERTY, scene_fps
from .skeleton_read import rest_heads_tails

SIZES = {"rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "location": 3, "scale": 3}
_ROTATION_PROP = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}
_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.([A-Za-z_]+)$')
_UNESCAPE = re.compile(r"\\(.)")
_OBJECT_PATHS = {"location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale", "delta_location", "delta_rotation_euler", "delta_rotation_quaternion", "delta_scale"}
LIVE_PROPERTY = "_marionette_live"
#: Frames sampled at most when the key cache is built (beyond: evaluated per request).
_CACHE_LIMIT = 200_000


def rotation_prop(mode: str) -> str:
    return _ROTATION_PROP.get(mode, "rotation_euler")


# --- what can be read ------------------------------------------------------------------------


def rest_skeleton(obj: bpy.types.Object) -> Skeleton:
    """The armature's bones as a core skeleton (rests from ``bone.matrix_local``, placement the
    object's world matrix as it stands), without updating the view layer: safe while drawing."""
    bones = obj.data.bones
    n = len(bones)
    buf = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    rest = buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)
    parents: list[int | str | None] = [b.parent.name if b.parent is not None else None for b in bones]
    return Skeleton.from_rest_matrices([b.name for b in bones], parents, rest, np.array(obj.matrix_world, dtype=np.float64))


def pose_problems(obj: bpy.types.Object) -> list[str]:
    """Why the animated pose of ``obj`` cannot be read from its action's keys (empty: it can)."""
    if obj is None or obj.type != "ARMATURE":
        return [f"{getattr(obj, 'name', obj)!r} is not an armature object"]
    if len(obj.data.bones) == 0:
        return [f"armature {obj.name!r} has no bones"]
    out = []
    if obj.library is not None:
        out.append(f"{obj.name!r} is linked from a library: make a library override to give it controls")
    action, _slot = compat.current_action(obj)
    out.extend(needs_evaluation(obj, action))
    ad = obj.animation_data
    if ad is not None:
        if ad.use_tweak_mode:
            out.append(f"{obj.name!r} is in NLA tweak mode")
        if ad.use_nla and any(not t.mute and len(t.strips) for t in ad.nla_tracks):
            out.append(f"{obj.name!r} plays NLA tracks; controls read the active action alone (mute the tracks or bake them)")
        if action is not None and (ad.action_influence != 1.0 or ad.action_blend_type != "REPLACE"):
            out.append(f"the action of {obj.name!r} is blended ({ad.action_blend_type}, influence {ad.action_influence:g})")
    return out


# --- pose channels ---------------------------------------------------------------------------


class PoseIO:
    """Bulk access to an armature object's pose channels, in skeleton order."""

    def __init__(self, obj: bpy.types.Object, skeleton: Skeleton) -> None:
        pbs = obj.pose.bones
        pos = {pb.name: i for i, pb in enumerate(pbs)}
        self.names = skeleton.names
        self.count = len(pbs)
        #: For each skeleton joint, its index in ``pose.bones``; and back.
        self.perm = np.array([pos[n] for n in skeleton.names], dtype=np.int64)
        self.back = np.argsort(self.perm)
        self.modes = [pbs[n].rotation_mode for n in skeleton.names]
        by_mode: dict[str, list[int]] = {}
        for j, m in enumerate(self.modes):
            by_mode.setdefault(m, []).append(j)
        #: Joints per rotation mode (each mode converts its own channel).
        self.groups = {m: np.array(v, dtype=np.int64) for m, v in by_mode.items()}
        self.props = ("location", "scale", *sorted({rotation_prop(m) for m in self.modes}))
        bones = obj.data.bones
        self.connected = np.array([bones[n].use_connect for n in skeleton.names])
        self.any_connected = bool(self.connected.any())
        self.mode_signature = self._mode_codes(obj)
        #: Per set of driven joints, which of them each rotation mode writes (see rotation_channels).
        self._plans: dict[bytes, list[tuple[str, np.ndarray, np.ndarray]]] = {}

    def _mode_codes(self, obj: bpy.types.Object) -> bytes:
        buf = np.empty(self.count, dtype=np.int32)
        obj.pose.bones.foreach_get("rotation_mode", buf)
        return buf.tobytes()

    def modes_changed(self, obj: bpy.types.Object) -> bool:
        return len(obj.pose.bones) != self.count or self._mode_codes(obj) != self.mode_signature

    def read(self, obj: bpy.types.Object) -> dict[str, np.ndarray]:
        """Current channel values ``(B, size)`` float32 per property, skeleton order."""
        pbs = obj.pose.bones
        out = {}
        for prop in self.props:
            buf = np.empty(self.count * SIZES[prop], dtype=np.float32)
            pbs.foreach_get(prop, buf)
            out[prop] = buf.reshape(self.count, SIZES[prop])[self.perm]
        return out

    def write(self, obj: bpy.types.Object, values: dict[str, np.ndarray]) -> None:
        pbs = obj.pose.bones
        for prop, v in values.items():
            pbs.foreach_set(prop, np.ascontiguousarray(v[self.back], dtype=np.float32).reshape(-1))

    def quats(self, channels: dict[str, np.ndarray]) -> FloatArray:
        """``(..., B, 4)`` unit quaternions from ``(..., B, size)`` channels, per rotation mode."""
        lead = channels["location"].shape[:-2]
        out = np.empty(lead + (len(self.names), 4))
        for mode, js in self.groups.items():
            # One mode for every bone (the usual rig) needs no gathering.
            sel: Any = slice(None) if len(self.groups) == 1 else js
            if mode == "QUATERNION":
                q = channels["rotation_quaternion"][..., sel, :].astype(np.float64)
            elif mode == "AXIS_ANGLE":
                q = _quat_from_axis_angle(channels["rotation_axis_angle"][..., sel, :].astype(np.float64))
            else:
                q = quat_from_euler(channels["rotation_euler"][..., sel, :].astype(np.float64), mode)
            n = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
            # Blender normalises before use; a zero quaternion is no rotation.
            ok = n > 1e-12
            out[..., sel, :] = q / n if ok.all() else np.where(ok, q / np.where(ok, n, 1.0), np.array([1.0, 0.0, 0.0, 0.0]))
        return out

    def rotation_channels(self, q: FloatArray, joints: np.ndarray, current: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Channel arrays (copies of ``current``) with ``joints`` set to rotations ``q`` ``(J, 4)``,
        each in its bone's mode and continuous with the current value (no sign or 2-pi jumps)."""
        out: dict[str, np.ndarray] = {}
        key = joints.tobytes()
        plan = self._plans.get(key)
        if plan is None:
            pos = {int(j): k for k, j in enumerate(joints)}
            plan = []
            for mode, js in self.groups.items():
                sel = [int(j) for j in js if int(j) in pos]
                if sel:
                    plan.append((mode, np.array(sel, dtype=np.int64), np.array([pos[j] for j in sel], dtype=np.int64)))
            self._plans[key] = plan
        for mode, sel, rows in plan:
            prop = rotation_prop(mode)
            arr = out.setdefault(prop, current[prop].copy())
            qs = q[rows]
            cur = current[prop][sel].astype(np.float64)
            if mode == "QUATERNION":
                flip = np.einsum("ji,ji->j", qs, cur) < 0.0
                arr[sel] = np.where(flip[:, None], -qs, qs)
            elif mode == "AXIS_ANGLE":
                arr[sel] = _axis_angle_from_quat(qs, cur)
            else:
                e = euler_from_quat(qs, mode)
                arr[sel] = make_euler_continuous(np.stack([cur, e]), mode, axis=0)[1]
        return out


def _quat_from_axis_angle(aa: FloatArray) -> FloatArray:
    """Blender's axis-angle ``(angle, x, y, z)``; a zero axis is no rotation."""
    axis = aa[..., 1:]
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    unit = np.where(n > 0.0, axis / np.where(n > 0.0, n, 1.0), 0.0)
    half = 0.5 * aa[..., :1]
    q = np.concatenate([np.cos(half), np.sin(half) * unit], axis=-1)
    return np.where(n > 0.0, q, np.array([1.0, 0.0, 0.0, 0.0]))


def _axis_angle_from_quat(q: FloatArray, current: FloatArray) -> FloatArray:
    v = q[:, 1:]
    s = np.linalg.norm(v, axis=-1)
    ok = s > 1e-9
    axis = np.where(ok[:, None], v / np.where(ok, s, 1.0)[:, None], current[:, 1:])
    angle = 2.0 * np.arctan2(s, q[:, 0])
    return np.concatenate([angle[:, None], axis], axis=1)


# --- the action's keys -----------------------------------------------------------------------


def bone_fcurves(obj: bpy.types.Object, skeleton: Skeleton) -> tuple[Any, list[tuple[Any, str, int, int]]]:
    """The active action and its live pose-bone curves as ``(fcurve, property, joint, index)``
    (muted curves, muted groups, unknown bones and empty curves skipped, as Blender skips them)."""
    action, slot = compat.current_action(obj)
    if action is None:
        return None, []
    if compat.SLOTTED_ACTIONS and slot is None:
        slot = compat.action_slot_for(action, obj)
    out = []
    for fc in compat.action_fcurves(action, slot):
        if fc.mute or (fc.group is not None and fc.group.mute):
            continue
        m = _BONE_PATH.match(fc.data_path)
        if m is None or m.group(2) not in SIZES:
            continue
        j = skeleton.find(_UNESCAPE.sub(r"\1", m.group(1)))
        if j is None or not 0 <= fc.array_index < SIZES[m.group(2)]:
            continue
        if len(fc.keyframe_points) or len(fc.sampled_points):
            out.append((fc, m.group(2), j, int(fc.array_index)))
    return action, out


class KeyCache:
    """The active action's bone curves sampled at every integer frame of the scene's and the
    action's range (``(C, T)``), and which channel components they key."""

    def __init__(self, obj: bpy.types.Object, skeleton: Skeleton, scene: bpy.types.Scene) -> None:
        action, curves = bone_fcurves(obj, skeleton)
        self.action_pointer = action.as_pointer() if action is not None else 0
        self.slot_key = _slot_key(obj)
        n = len(skeleton)
        self.keyed = {p: np.zeros((n, s), dtype=bool) for p, s in SIZES.items()}
        rows: dict[str, tuple[list[int], list[int], list[int]]] = {p: ([], [], []) for p in SIZES}
        for r, (_fc, prop, j, k) in enumerate(curves):
            self.keyed[prop][j, k] = True
            rows[prop][0].append(r)
            rows[prop][1].append(j)
            rows[prop][2].append(k)
        self.rows = {p: tuple(np.array(x, dtype=np.int64) for x in v) for p, v in rows.items() if v[0]}
        self.curve_count = len(curves)
        #: Joints with at least one keyed channel.
        self.keyed_joints = np.zeros(n, dtype=bool)
        for p in SIZES:
            self.keyed_joints |= self.keyed[p].any(axis=1)
        lo, hi = int(scene.frame_start), int(scene.frame_end)
        if action is not None:
            a0, a1 = action.frame_range
            lo, hi = min(lo, math.floor(a0)), max(hi, math.ceil(a1))
        hi = min(hi, lo + _CACHE_LIMIT)
        self.first = lo
        self.values = evaluate_fcurves([c[0] for c in curves], np.arange(lo, hi + 1, dtype=np.float64)) if curves else np.empty((0, hi - lo + 1))

    def stale(self, obj: bpy.types.Object) -> bool:
        action, _slot = compat.current_action(obj)
        return (action.as_pointer() if action is not None else 0) != self.action_pointer or _slot_key(obj) != self.slot_key

    def at(self, obj: bpy.types.Object, skeleton: Skeleton, frames: np.ndarray) -> FloatArray:
        """Curve values ``(C, T)`` at ``frames``: from the samples, or evaluated for frames
        between or beyond them (a subframe, a frame outside the range)."""
        if self.curve_count == 0:
            return np.empty((0, frames.shape[0]))
        if frames.shape[0] == 1:
            # The live frame: one index, checked in plain floats.
            at = float(frames[0]) - self.first
            k = round(at)
            if abs(at - k) < 1e-6 and 0 <= k < self.values.shape[1]:
                return self.values[:, k : k + 1]
        idx = frames - self.first
        whole = np.round(idx)
        if np.all(np.abs(idx - whole) < 1e-6) and whole.min() >= 0 and whole.max() < self.values.shape[1]:
            return self.values[:, whole.astype(np.int64)]
        _action, curves = bone_fcurves(obj, skeleton)
        return evaluate_fcurves([c[0] for c in curves], frames)


def _slot_key(obj: bpy.types.Object) -> str:
    ad = obj.animation_data
    if ad is None or not compat.SLOTTED_ACTIONS or ad.action_slot is None:
        return ""
    return str(ad.action_slot.identifier)


# --- channels the controls drive and no key sets ---------------------------------------------


class TrackedChannels:
    """Driven channel components the action does not key: their base (the value before the
    controls wrote) and what was last written, kept in step with the object's ID property."""

    def __init__(self, io: PoseIO, keys: KeyCache, rot_joints: Sequence[int], tr_joints: Sequence[int]) -> None:
        self.entries: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for prop in io.props:
            size = SIZES[prop]
            want = np.zeros((len(io.names), size), dtype=bool)
            if prop == "location":
                want[list(tr_joints)] = True
                want[io.connected] = False
            elif prop != "scale":
                js = [j for j in rot_joints if rotation_prop(io.modes[j]) == prop]
                want[js] = True
            want &= ~keys.keyed[prop]
            j, k = np.nonzero(want)
            if j.size:
                self.entries[prop] = (j, k)
        self.base: dict[str, np.ndarray] = {}
        self.written: dict[str, np.ndarray] = {}
        self.names = io.names

    def load(self, obj: bpy.types.Object) -> None:
        """Base and written values saved with the object (after an undo, a reload)."""
        saved = obj.get(LIVE_PROPERTY)
        if saved is None:
            return
        try:
            lines = str(saved["channels"]).split("\n") if saved["channels"] else []
            base = np.asarray(saved["base"], dtype=np.float64)
            written = np.asarray(saved["written"], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            return
        if len(lines) != base.shape[0] or base.shape != written.shape:
            return
        lookup = {(p, self.names[j], int(k)): (p, n) for p, (js, ks) in self.entries.items() for n, (j, k) in enumerate(zip(js, ks, strict=True))}
        for prop, (js, _ks) in self.entries.items():
            self.base[prop] = np.full(js.shape[0], np.nan)
            self.written[prop] = np.full(js.shape[0], np.nan)
        for i, line in enumerate(lines):
            parts = line.split("\t")
            if len(parts) != 3:
                continue
            hit = lookup.get((parts[0], parts[1], int(parts[2])))
            if hit is not None:
                self.base[hit[0]][hit[1]] = base[i]
                self.written[hit[0]][hit[1]] = written[i]

    def animated(self, current: dict[str, np.ndarray]) -> None:
        """Put the base back into ``current`` (in place) where the channel still holds what was
        written; a channel changed since then (by the user) becomes the new base."""
        for prop, (js, ks) in self.entries.items():
            now = current[prop][js, ks].astype(np.float64)
            base = self.base.get(prop)
            written = self.written.get(prop)
            if base is None or written is None:
                self.base[prop] = now
                continue
            keep = (now == written) & np.isfinite(base)
            base = np.where(keep, base, now)
            self.base[prop] = base
            current[prop][js, ks] = base

    def wrote(self, obj: bpy.types.Object, values: dict[str, np.ndarray], save: bool = True) -> None:
        """Note what was written; ``save`` also keeps it in the object's ID property (a render
        thread leaves that to the next write on the main thread)."""
        lines: list[str] = []
        base: list[np.ndarray] = []
        written: list[np.ndarray] = []
        for prop, (js, ks) in self.entries.items():
            if prop in values:
                self.written[prop] = values[prop][js, ks].astype(np.float32).astype(np.float64)
            if not save or prop not in self.base or prop not in self.written:
                continue
            lines.extend(f"{prop}\t{self.names[j]}\t{k}" for j, k in zip(js, ks, strict=True))
            base.append(self.base[prop])
            written.append(self.written[prop])
        if lines:
            obj[LIVE_PROPERTY] = {
                "channels": "\n".join(lines),
                "base": np.concatenate(base).tolist(),
                "written": np.concatenate(written).tolist(),
            }

    def restore(self, current: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Channel arrays with the base put back (for leaving the live preview)."""
        out = {}
        for prop, (js, ks) in self.entries.items():
            base = self.base.get(prop)
            if base is None:
                continue
            arr = current[prop].copy()
            arr[js, ks] = np.where(np.isfinite(base), base, arr[js, ks])
            out[prop] = arr
        return out


def forget_live_property(obj: bpy.types.Object) -> None:
    if obj.get(LIVE_PROPERTY) is not None:
        del obj[LIVE_PROPERTY]


class AnimatedPose:
    """The animated pose of one armature object, read in bulk (see the module docstring)."""

    def __init__(
        self, obj: bpy.types.Object, skeleton: Skeleton, scene: bpy.types.Scene, rot_joints: Sequence[int] = (), tr_joints: Sequence[int] = ()
    ) -> None:
        self.skeleton = skeleton
        self.io = PoseIO(obj, skeleton)
        self.keys = KeyCache(obj, skeleton, scene)
        self.rot_joints = np.array(sorted(set(rot_joints)), dtype=np.int64)
        self.tr_joints = np.array(sorted(set(tr_joints) - {j for j in range(len(skeleton)) if self.io.connected[j]}), dtype=np.int64)
        self.tracked = TrackedChannels(self.io, self.keys, self.rot_joints.tolist(), self.tr_joints.tolist())
        self.tracked.load(obj)
        self._last: dict[str, np.ndarray] = {}

    def stale(self, obj: bpy.types.Object) -> bool:
        return self.keys.stale(obj) or self.io.modes_changed(obj)

    def channels(self, obj: bpy.types.Object, frames: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Animated channels ``(T, B, size)`` at ``frames``, and the current ones ``(B, size)``."""
        current = self.io.read(obj)
        # In double precision from here (a copy: the current channels stay as read); the base
        # values put back are single-precision values, so nothing rounds differently.
        clean = {p: v.astype(np.float64) for p, v in current.items()}
        self.tracked.animated(clean)
        t = frames.shape[0]
        if t == 1:
            out = {p: v[None] for p, v in clean.items()}
        else:
            out = {p: np.broadcast_to(v, (t,) + v.shape).copy() for p, v in clean.items()}
        values = self.keys.at(obj, self.skeleton, frames)
        for prop, (rows, js, ks) in self.keys.rows.items():
            if prop in out:
                out[prop][:, js, ks] = values[rows].T
        # The last frame's animated channels (a render writes them all; see :meth:`write`),
        # kept as they are and converted only when a render asks for them.
        self._last = out
        return out, current

    @property
    def last(self) -> dict[str, np.ndarray]:
        """The animated channels ``(B, size)`` (float32) of the last frame read."""
        return {p: v[-1].astype(np.float32) for p, v in self._last.items()}

    def at(self, obj: bpy.types.Object, frames: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray | None, dict[str, np.ndarray]]:
        """Animated rotations ``(T, B, 4)``, translations, scales (``None`` when all one) at
        ``frames``, and the current channels (for :meth:`write`)."""
        ch, current = self.channels(obj, frames)
        rot = self.io.quats(ch)
        tr = ch["location"]
        if self.io.any_connected:
            tr = tr.copy()  # the channels as read stay as they are (see last)
            tr[:, self.io.connected] = 0.0  # Blender ignores a connected bone's location
        sc = ch["scale"]
        return rot, tr, (None if np.all(sc == 1.0) else sc), current

    def write(
        self,
        obj: bpy.types.Object,
        rotations: FloatArray,
        translations: FloatArray,
        current: dict[str, np.ndarray],
        over: dict[str, np.ndarray] | None = None,
        save: bool = True,
    ) -> None:
        """Write one frame ``(B, 4)``, ``(B, 3)`` of the driven joints in bulk and tag the object.
        ``over``: also write every other channel, as given (for a render, whose own animation
        pass does not run again after this write: the animated channels of the rendered frame).
        ``save`` False: leave the object's ID properties alone (on a render thread)."""
        if over is not None:
            current = over
        values = self.io.rotation_channels(rotations[self.rot_joints], self.rot_joints, current) if self.rot_joints.size else {}
        if over is not None:
            values = {**current, **values}
        if self.tr_joints.size:
            loc = current["location"].copy()
            loc[self.tr_joints] = translations[self.tr_joints]
            values["location"] = loc
        if not values:
            return
        self.io.write(obj, values)
        self.tracked.wrote(obj, values, save)
        # A transform tag has the pose evaluated again, and with it what the pose deforms or
        # carries; a data tag (what Blender's own pose edits send) does too but rebuilds more of
        # the armature besides: about 0.05 ms a frame more on a 65-bone rig.
        obj.update_tag(refresh={"OBJECT"})

    def restore(self, obj: bpy.types.Object) -> None:
        """Leave the pose as the animation alone makes it (the controls' output removed)."""
        current = self.io.read(obj)
        values = self.tracked.restore(current)
        if values:
            self.io.write(obj, values)
            obj.update_tag(refresh={"OBJECT"})
        forget_live_property(obj)


# --- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetRef:
    """An object, or a bone of an armature object, by name."""

    object_name: str
    bone: str = ""

    def describe(self) -> str:
        return f"{self.object_name!r}" + (f" bone {self.bone!r}" if self.bone else "")


@dataclass
class ControlSpec:
    """How the Blender layer feeds one core control: its targets and ground settings."""

    name: str
    row: int
    kind: str
    target: TargetRef | None = None
    pole: TargetRef | None = None
    second: TargetRef | None = None
    orient: bool = False
    ground_collection: str = ""


@dataclass
class BuiltControls:
    """The core stack built from an object's control rows; rows that could not be built are in
    ``errors`` (row index -> reason) and left out of the stack."""

    stack: ControlStack | None
    specs: list[ControlSpec]
    errors: dict[int, str]
    #: Every joint some control may rotate / move.
    rot_joints: tuple[int, ...] = ()
    tr_joints: tuple[int, ...] = ()
    #: Objects whose geometry ground rays pass through (the character's own meshes).
    own_meshes: frozenset[str] = field(default_factory=frozenset)

    def spec_of_row(self, row: int) -> ControlSpec | None:
        return next((s for s in self.specs if s.row == row), None)


def _ref(obj: Any, bone: str) -> TargetRef | None:
    return None if obj is None else TargetRef(obj.name, bone if obj.type == "ARMATURE" else "")


def own_meshes(arm: bpy.types.Object) -> frozenset[str]:
    """Objects deformed by or parented (at any depth) to the armature: the character itself."""
    out = set()
    for o in bpy.data.objects:
        if o == arm:
            continue
        p = o.parent
        while p is not None and p != arm:
            p = p.parent
        if p == arm or any(m.type == "ARMATURE" and m.object == arm for m in getattr(o, "modifiers", ())):
            out.add(o.name)
    out.add(arm.name)
    return frozenset(out)


def _unique_names(rows: Sequence[Any]) -> list[str]:
    seen: dict[str, int] = {}
    for r in rows:
        seen[r.name] = seen.get(r.name, 0) + 1
    return [r.name if seen[r.name] == 1 and r.name else f"{r.name or 'Control'} #{i + 1}" for i, r in enumerate(rows)]


class _RowError(MarionetteError):
    pass


def _bone(skeleton: Skeleton, name: str, what: str) -> int:
    if not name:
        raise _RowError(f"pick the {what}")
    j = skeleton.find(name)
    if j is None:
        raise _RowError(f"the {what} {name!r} is not a bone of this armature")
    return j


def _chain(skeleton: Skeleton, start: str, end: str, what: str = "chain") -> list[int]:
    a = _bone(skeleton, start, f"first bone of the {what}")
    b = _bone(skeleton, end or start, f"last bone of the {what}")
    try:
        return skeleton.chain(a, b)
    except RigError as exc:
        raise _RowError(f"the {what} must run down through parents: {exc}") from exc


def _tail_path(skeleton: Skeleton, lengths: FloatArray, joints: list[int]) -> JointPath:
    """Path over ``joints`` whose end point is the last bone's tail (Blender bones: +Y)."""
    return JointPath.between(skeleton, joints[0], joints[-1], end_offset=[0.0, float(lengths[joints[-1]]), 0.0])


def _ik_limits(obj: bpy.types.Object, skeleton: Skeleton, joints: list[int]) -> tuple[JointLimit | None, ...] | None:
    """Each bone's Blender IK locks and limits as an Euler box on its local rotation."""
    out: list[JointLimit | None] = []
    for j in joints:
        pb = obj.pose.bones[skeleton.names[j]]
        lo, hi = np.full(3, -math.pi), np.full(3, math.pi)
        any_limit = False
        for i, axis in enumerate("xyz"):
            if getattr(pb, f"lock_ik_{axis}"):
                lo[i] = hi[i] = 0.0
                any_limit = True
            elif getattr(pb, f"use_ik_limit_{axis}"):
                # Blender stores 180 degrees as a float32 just above pi: clamp into the circle.
                lo[i] = max(-math.pi, getattr(pb, f"ik_min_{axis}"))
                hi[i] = min(math.pi, getattr(pb, f"ik_max_{axis}"))
                any_limit = True
        # One free axis (a knee) is a hinge, which the solvers honour far better than a box.
        out.append(link_limit(lo, hi) if any_limit else None)
    return tuple(out) if any(x is not None for x in out) else None


def _row_limits(obj: bpy.types.Object, skeleton: Skeleton, joints: list[int], row: Any) -> tuple[JointLimit | None, ...] | None:
    """The limits of a chain's joints from a control row: the Bone IK Limits when asked for,
    replaced by the cone on the first bone and the hinge on the bones after it when those are on."""
    limits: list[JointLimit | None] = [None] * len(joints)
    if row.use_bone_limits:
        limits = list(_ik_limits(obj, skeleton, joints) or limits)
    if row.use_cone_limit:
        twist = float(row.cone_twist)
        limits[0] = ConeLimit(np.array([0.0, 1.0, 0.0]), float(row.cone_angle), -twist, twist)
    if row.use_hinge_limit:
        if row.hinge_min > row.hinge_max:
            raise _RowError("the hinge's minimum must not exceed its maximum")
        for k in range(1, len(joints)):
            limits[k] = HingeLimit(np.array(AXIS_VECTORS[row.hinge_axis], dtype=np.float64), float(row.hinge_min), float(row.hinge_max))
    return tuple(limits) if any(x is not None for x in limits) else None


def rig_forward(skeleton: Skeleton, tails: FloatArray) -> FloatArray:
    """The rig's rest forward in armature space: from the legs' knees and feet when the
    humanoid mapper finds them, else Blender's convention (-Y)."""
    from ..core.mapping.bone_mapping import auto_map_skeleton
    from ..core.retarget.facing import Leg, infer_facing

    heads = skeleton.rest_placements()[:, :3, 3]
    try:
        mapping = auto_map_skeleton(skeleton, tails)
        s = {k: skeleton.index(v.bone) for k, v in mapping.slots.items()}
        legs = [
            Leg(heads[s[f"thigh.{x}"]], heads[s[f"shin.{x}"]], heads[s[f"foot.{x}"]], heads[s[f"toes.{x}"]] if f"toes.{x}" in s else None)
            for x in ("L", "R")
            if all(f"{p}.{x}" in s for p in ("thigh", "shin", "foot"))
        ]
        if "hips" in s and "head" in s and legs:
            facing = infer_facing(heads[s["hips"]], heads[s["head"]], legs)
            if facing.forward is not None:
                f = np.asarray(facing.forward, dtype=np.float64)
                f = f - f[2] * np.array([0.0, 0.0, 1.0])
                if np.linalg.norm(f) > 1e-6:
                    return f / np.linalg.norm(f)
    except MarionetteError:
        pass
    return np.array([0.0, -1.0, 0.0])


def _build_row(
    obj: bpy.types.Object, skeleton: Skeleton, lengths: FloatArray, row: Any, name: str, index: int, forward: Callable[[], FloatArray]
) -> tuple[Control, ControlSpec]:
    kind = row.kind
    spec = ControlSpec(name=name, row=index, kind=kind)
    common = {"name": name, "priority": int(row.priority), "weight": float(row.weight)}
    if kind in IK_KINDS:
        joints = _chain(skeleton, row.bone_start, row.bone_end)
        if kind == "TWO_BONE_IK" and len(joints) != 2:
            raise _RowError(f"a two-bone chain has 2 bones; {row.bone_start!r} to {row.bone_end!r} has {len(joints)} (use FABRIK or CCD)")
        if row.end_bone:
            end = _bone(skeleton, row.end_bone, "end bone")
            if int(skeleton.parents[end]) != joints[-1]:
                raise _RowError(f"the end bone {row.end_bone!r} must be a child of {skeleton.names[joints[-1]]!r}")
            path = JointPath.between(skeleton, joints[0], joints[-1], end=end)
        else:
            if row.orient_end:
                raise _RowError("Match Target Rotation needs an End Bone (the bone that takes the rotation)")
            path = _tail_path(skeleton, lengths, joints)
        if row.target_object is None:
            raise _RowError("pick a target (an object, or an armature and a bone)")
        limits = _row_limits(obj, skeleton, joints, row)
        control: Control = IKControl(
            path=path,
            solver={"TWO_BONE_IK": "two_bone", "FABRIK": "fabrik", "CCD": "ccd"}[kind],
            smooth_time=float(row.smooth_time),
            tolerance=float(row.tolerance),
            max_passes=int(row.max_passes),
            limits=limits,
            orient_end=bool(row.orient_end),
            **common,
        )
        spec.target = _ref(row.target_object, row.target_bone)
        spec.pole = _ref(row.pole_object, row.pole_bone)
        spec.orient = bool(row.orient_end)
        return control, spec
    if kind == "LOOK_AT":
        joints = _chain(skeleton, row.bone_start, row.bone_end)
        if row.target_object is None:
            raise _RowError("pick a target to look at")
        head = skeleton.rest_placements()[joints[-1], :3, :3]
        facing = AXIS_VECTORS.get(row.facing_axis) or tuple(np.linalg.solve(head, forward()))
        up = AXIS_VECTORS.get(row.up_axis) or tuple(np.linalg.solve(head, np.array([0.0, 0.0, 1.0])))
        space: int | None
        if row.space_bone:
            space = _bone(skeleton, row.space_bone, "limits space bone")
        else:
            p = int(skeleton.parents[joints[0]])
            space = p if p >= 0 else None
        if len(joints) > LOOK_AT_BONES:
            raise _RowError(f"a look-at chain has at most {LOOK_AT_BONES} bones; {row.bone_start!r} to {row.bone_end!r} has {len(joints)}")
        # Each bone's share of the turn, first bone first (by default the head takes the
        # largest share, the bones above it less and less).
        weights = np.array(row.look_weights[: len(joints)], dtype=np.float64)
        try:
            chain = LookAtChain.build(
                skeleton, joints, weights=weights, facing_axis=facing, up_axis=up, space_joint=space,
                yaw_limits=(float(row.yaw_min), float(row.yaw_max)), pitch_limits=(float(row.pitch_min), float(row.pitch_max)),
                behind_falloff=bool(row.look_ease_behind),
            )
        except RigError as exc:
            raise _RowError(str(exc)) from exc
        control = LookAtControl(chain=chain, smooth_time=float(row.smooth_time), **common)
        spec.target = _ref(row.target_object, row.target_bone)
        return control, spec
    return _build_secondary(obj, skeleton, lengths, row, spec, common, forward)


def _build_secondary(
    obj: bpy.types.Object, skeleton: Skeleton, lengths: FloatArray, row: Any, spec: ControlSpec, common: dict[str, Any],
    forward: Callable[[], FloatArray],
) -> tuple[Control, ControlSpec]:
    """Ground feet, springs, inheritance, fixed axes and closures (SPEC 7.4-7.7)."""
    from ..core.controls import stack as cc

    kind = row.kind
    if kind == "GROUND":
        from ..core.controls.ground import GroundRig

        legs = []
        for start, end, side in ((row.bone_start, row.bone_end, "left leg"), (row.second_start, row.second_end, "right leg")):
            if not start and not end:
                continue
            joints = _chain(skeleton, start, end, side)
            if len(joints) != 3:
                raise _RowError(f"the {side} runs from the thigh down to the foot (3 bones); it has {len(joints)}")
            legs.append(tuple(joints))
        if not legs:
            raise _RowError("pick the leg bones (thigh to foot)")
        pelvis = _bone(skeleton, row.pelvis_bone, "pelvis") if row.pelvis_bone else None
        settings = {
            "pelvis": pelvis, "up": (0.0, 0.0, 1.0), "floor": float(row.floor_height), "probe_height": float(row.probe_height),
            "max_offset": float(row.max_offset), "max_tilt": float(row.max_tilt),
        }
        try:  # the facing from the feet and knees, as the core infers it ...
            rig = GroundRig.build(skeleton, legs, **settings)
        except RigError:  # ... or, when they do not tell, from the whole rig
            rig = GroundRig.build(skeleton, legs, forward=forward(), **settings)
        spec.ground_collection = row.ground_collection.name if row.ground_collection is not None else ""
        return cc.GroundControl(rig=rig, smooth_time=float(row.smooth_time), pelvis_smooth_time=float(row.pelvis_smooth_time), **common), spec
    if kind == "SPRING":
        from ..core.controls.springs import SpringChain

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        chain = SpringChain.build(_tail_path(skeleton, lengths, joints), stiffness=float(row.stiffness), damping=float(row.damping), gravity=tuple(row.gravity))
        return cc.SpringControl(chain=chain, **common), spec
    if kind == "INHERIT":
        from ..core.controls.inheritance import Grant, Inheritance

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        source = _bone(skeleton, row.source_bone, "source bone")
        grants = tuple(
            Grant.build(skeleton, j, source, rotation=float(row.rotation_fraction), translation=float(row.translation_fraction)) for j in joints
        )
        return cc.InheritControl(inheritance=Inheritance(grants), **common), spec
    if kind == "FIXED_AXIS":
        from ..core.controls.inheritance import FixedAxes

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        return cc.FixedAxisControl(axes=FixedAxes.build(skeleton, joints, AXIS_VECTORS[row.twist_axis]), **common), spec
    if kind == "CLOSURE":
        from ..core.controls.closure import DiamondClosure

        left_joints = _chain(skeleton, row.bone_start, row.bone_end, "first branch")
        right_joints = _chain(skeleton, row.second_start, row.second_end, "second branch")
        left = _tail_path(skeleton, lengths, left_joints)
        right = _tail_path(skeleton, lengths, right_joints)
        if row.target_object is None or row.second_object is None:
            raise _RowError("pick both branches' targets")
        try:
            closure = DiamondClosure.build(
                skeleton, left, right, solver=CLOSURE_SOLVERS[row.closure_solver],
                limits_left=_row_limits(obj, skeleton, left_joints, row), limits_right=_row_limits(obj, skeleton, right_joints, row),
            )
        except RigError as exc:
            raise _RowError(str(exc)) from exc
        spec.target = _ref(row.target_object, row.target_bone)
        spec.second = _ref(row.second_object, row.second_bone)
        control = cc.ClosureControl(
            closure=closure, smooth_time=float(row.smooth_time), tolerance=max(float(row.tolerance), 1e-9),
            max_iterations=int(row.max_iterations), max_passes=int(row.max_passes), **common,
        )
        return control, spec
    raise _RowError(f"unknown control type {kind!r}")


def build_controls(obj: bpy.types.Object, skeleton: Skeleton | None = None) -> BuiltControls:
    """The object's control rows as one core stack. A row that cannot be built (a missing bone,
    a chain that is not a parent chain, branches sharing bones...) is reported, not run."""
    skeleton = skeleton or rest_skeleton(obj)
    heads, tails = rest_heads_tails(obj, skeleton)
    lengths = np.linalg.norm(tails - heads, axis=1)
    rows = list(obj.marionette_controls.controls)
    names = _unique_names(rows)
    forward_cache: list[FloatArray] = []

    def forward() -> FloatArray:
        if not forward_cache:
            forward_cache.append(rig_forward(skeleton, tails))
        return forward_cache[0]

    controls: list[Control] = []
    specs: list[ControlSpec] = []
    errors: dict[int, str] = {}
    for i, row in enumerate(rows):
        try:
            control, spec = _build_row(obj, skeleton, lengths, row, names[i], i, forward)
        except (MarionetteError, ValueError, TypeError, AttributeError, ImportError) as exc:
            errors[i] = str(exc)
            continue
        controls.append(control)
        specs.append(spec)
    stack = None
    if controls:
        try:
            stack = ControlStack(skeleton, controls)
        except RigError as exc:
            # A stack-level refusal (inheritance cycle...) disables every row it names.
            for s in specs:
                errors[s.row] = str(exc)
            specs = []
    rot: set[int] = set()
    tr: set[int] = set()
    if stack is not None:
        for c in stack.controls:
            rot.update(c.written)
            tr.update(c.moved)
    ground = any(s.kind == "GROUND" for s in specs)
    return BuiltControls(stack, specs, errors, tuple(sorted(rot)), tuple(sorted(tr)), own_meshes(obj) if ground else frozenset())


# --- evaluating targets ----------------------------------------------------------------------


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
        r = _quat_matrices(channels["delta_rotation_quaternion"]) @ _quat_matrices(_quat_from_axis_angle(channels["rotation_axis_angle"]))
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


def _moves(o: bpy.types.Object) -> bool:
    """Whether anything but nothing could move the object's world matrix over time."""
    ad = o.animation_data
    if ad is not None and (ad.action is not None or len(ad.drivers) or any(not t.mute for t in ad.nla_tracks)):
        return True
    if any(not c.mute and c.influence > 0.0 for c in o.constraints):
        return True
    p = o.parent
    if p is not None:
        if _moves(p):
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
    return o.parent is None or (not _moves(o.parent) and o.parent_type == "OBJECT")


def object_world_track(o: bpy.types.Object, frames: np.ndarray) -> FloatArray | None:
    """World matrices ``(T, 4, 4)`` of ``o`` at ``frames`` when numpy can tell them without
    Blender evaluating the scene (a still object, or one moved by its own keys alone); else
    ``None``."""
    t = frames.shape[0]
    if not _moves(o):
        return np.broadcast_to(np.array(o.matrix_world, dtype=np.float64), (t, 4, 4)).copy()
    if not _keys_only(o):
        return None
    ad = o.animation_data
    slot = ad.action_slot if compat.SLOTTED_ACTIONS else None
    curves = [
        fc for fc in compat.action_fcurves(ad.action, slot)
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


@contextlib.contextmanager
def _held_live() -> Iterator[None]:
    from ..viewport import live_preview

    with live_preview.held():
        yield


def _evaluated_tracks(refs: Sequence[TargetRef], frames: np.ndarray) -> dict[TargetRef, FloatArray]:
    """World matrices of ``refs`` at ``frames`` as Blender evaluates them (``frame_set`` per
    frame, the live preview held so nothing else runs); the scene's frame is restored."""
    scene = bpy.context.scene
    out = {r: np.full((frames.shape[0], 4, 4), np.nan) for r in refs}
    keep = (scene.frame_current, scene.frame_subframe)
    with _held_live():
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
            out.update(_evaluated_tracks(slow, frames))
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
    instance: ControlInstance, built: BuiltControls, tracks: dict[TargetRef, FloatArray], placement: FloatArray, ray_cast: Any
) -> None:
    """Give every control of ``instance`` its targets (skeleton space) and ground query."""
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


# --- ground rays -----------------------------------------------------------------------------
#
# Ground rays hit what ``scene.ray_cast`` hits (the evaluated geometry of the view layer's visible
# mesh objects and mesh instances) except the character's own meshes, but they are cast object
# by object (``Object.ray_cast`` in the object's space), not through ``scene.ray_cast``. A ray
# down from a sole starts inside the character's own bounds, so ``scene.ray_cast`` tests its
# deforming body every frame, and the body's ray-cast tree, which Blender rebuilds whenever the
# mesh deforms, costs about 10 ms a frame for a 17k-vertex body, all for a hit that is then skipped.
# ``Object.ray_cast`` on an evaluated object uses the tree Blender keeps with the evaluated mesh
# (built once for a still or merely moving ground, rebuilt only when its geometry changes), so
# the character's meshes are never touched; each call costs a few microseconds. A
# ``mathutils.bvhtree.BVHTree`` kept here would cast a little faster (about 1 against 2-9
# microseconds) but needs 10 ms to build for a 45k-triangle ground and cannot tell cheaply when
# the evaluated geometry changed.


@dataclass
class _Ground:
    """One object ground rays may hit: its evaluated object and its world matrices (one, or one
    per frame of a bake), with their inverses, linear parts and the normals' matrices."""

    evaluated: Any
    worlds: list[Matrix]
    inverses: list[Matrix] = field(default_factory=list)
    turns: list[Matrix] = field(default_factory=list)
    normals: list[Matrix] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inverses = [m.inverted_safe() for m in self.worlds]
        self.turns = [m.to_3x3() for m in self.inverses]
        self.normals = [m.transposed() for m in self.turns]


class GroundRays:
    """For each ground control of one evaluation, a world-space ray cast in the form
    :mod:`core.controls.ground` expects: against the scene's visible meshes but the character's own (see
    above), or the mesh objects of the control's ground collection. Over the frames of a bake,
    grounds moved by their keys, a constraint or a parent follow their motion frame by frame
    (the geometry itself is taken as it stands at the current frame)."""

    def __init__(self, scene: bpy.types.Scene, depsgraph: Any, built: BuiltControls, frames: np.ndarray | None = None) -> None:
        self.depsgraph = depsgraph
        self.built = built
        self.view_layer = getattr(depsgraph, "view_layer", None) or bpy.context.view_layer
        #: Frames of a bake (``None``: the current frame), and the world tracks of the objects
        #: that move over them (by name), read before any ray is cast (reading some may set frames).
        self.frames = frames if frames is not None and frames.shape[0] > 1 else None
        self.tracks: dict[str, FloatArray] = {}
        if self.frames is not None and any(s.kind == "GROUND" for s in built.specs):
            self._read_tracks(self.frames)

    def for_spec(self, spec: ControlSpec) -> Callable[[FloatArray, FloatArray, FloatArray], tuple[Any, Any, Any]]:
        def cast(origins: FloatArray, directions: FloatArray, distances: FloatArray) -> tuple[Any, Any, Any]:
            return _cast(self._grounds(spec), origins, directions, distances, 1 if self.frames is None else self.frames.shape[0])

        return cast

    # -- which objects

    def _placed(self, spec: ControlSpec) -> list[tuple[Any, Matrix, Any]]:
        """``(evaluated object, world matrix now, the object whose motion it follows)``."""
        ignore = self.built.own_meshes
        collection = bpy.data.collections.get(spec.ground_collection) if spec.ground_collection else None
        if collection is not None:
            out = []
            for o in collection.all_objects:
                if o.type == "MESH" and o.name not in ignore:
                    ev = o.evaluated_get(self.depsgraph)
                    out.append((ev, ev.matrix_world.copy(), o))
            return out
        out = []
        for inst in self.depsgraph.object_instances:
            ob = inst.object
            if ob.type != "MESH" or not inst.show_self:
                continue
            if inst.is_instance:
                owner = inst.parent
                owner = owner.original if owner is not None else None
                if ob.original.name in ignore or owner is None or owner.name in ignore:
                    continue
            else:
                owner = ob.original
                # The depsgraph also holds objects of hidden layer collections.
                if owner.name in ignore or not owner.visible_get(view_layer=self.view_layer):
                    continue
            out.append((ob, inst.matrix_world.copy(), owner))
        return out

    def _read_tracks(self, frames: np.ndarray) -> None:
        owners = {}
        for spec in self.built.specs:
            if spec.kind == "GROUND":
                for _ob, _m, owner in self._placed(spec):
                    if owner.name not in owners and _moves(owner):
                        owners[owner.name] = owner
        slow = []
        for name, owner in owners.items():
            track = object_world_track(owner, frames)
            if track is None:
                slow.append(TargetRef(name))
            else:
                self.tracks[name] = track
        if slow:
            self.tracks.update({r.object_name: t for r, t in _evaluated_tracks(slow, frames).items()})

    def _grounds(self, spec: ControlSpec) -> list[_Ground]:
        out = []
        for ob, now, owner in self._placed(spec):
            track = self.tracks.get(owner.name)
            if track is None:
                out.append(_Ground(ob, [now]))
                continue
            # An instance keeps its place relative to its instancer.
            rel = np.array(owner.matrix_world.inverted_safe() @ now, dtype=np.float64) if ob.original != owner else np.eye(4)
            out.append(_Ground(ob, [Matrix(m) for m in (track @ rel).tolist()]))
        return out


def make_ray_cast(scene: bpy.types.Scene, depsgraph: Any, built: BuiltControls, frames: np.ndarray | None = None) -> Callable[[ControlSpec], Any]:
    """The ray cast of each ground control (see :class:`GroundRays`)."""
    return GroundRays(scene, depsgraph, built, frames).for_spec


def _cast(grounds: Sequence[_Ground], origins: Any, directions: Any, distances: Any, frames: int) -> tuple[Any, Any, Any]:
    """The nearest hit of each ray on ``grounds``. Over ``frames`` frames the rays come leg by
    leg, each over the frames in order (ray ``i`` is at frame ``i % frames``; see
    :func:`core.controls.ground.adapt_to_ground`)."""
    starts = [Vector(p) for p in np.asarray(origins, dtype=np.float64).reshape(-1, 3).tolist()]
    n = len(starts)
    hit = [False] * n
    points = [(0.0, 0.0, 0.0)] * n
    normals = [(0.0, 0.0, 0.0)] * n
    if not grounds or n == 0:
        return np.array(hit, dtype=bool), np.array(points, dtype=np.float64), np.array(normals, dtype=np.float64)
    # Per ray in mathutils: for a live frame's few rays, numpy calls on 3-vectors would cost
    # more than the ray casts themselves. A zero direction stays zero and is skipped below.
    units = [Vector(d).normalized() for d in np.asarray(directions, dtype=np.float64).reshape(-1, 3).tolist()]
    reach = np.asarray(distances, dtype=np.float64).reshape(-1).tolist()
    if len(reach) != n:
        reach = reach[:1] * n
    best = [math.inf] * n
    for g in grounds:
        per_frame = len(g.worlds) > 1
        for i in range(n):
            k = i % frames if per_frame else 0
            start = g.inverses[k] @ starts[i]
            direction = g.turns[k] @ units[i]
            scale = direction.length
            if scale < 1e-12:
                continue
            try:
                ok, loc, normal, _index = g.evaluated.ray_cast(start, direction / scale, distance=reach[i] * scale)
            except RuntimeError:  # an object with no geometry to cast on
                break
            if not ok:
                continue
            along = (loc - start).length / scale
            if along < best[i]:
                best[i] = along
                hit[i] = True
                points[i] = (g.worlds[k] @ loc).to_tuple()
                normals[i] = (g.normals[k] @ normal).normalized().to_tuple()
    return np.array(hit, dtype=bool), np.array(points, dtype=np.float64), np.array(normals, dtype=np.float64)


# --- one evaluation --------------------------------------------------------------------------


def evaluate(
    obj: bpy.types.Object,
    built: BuiltControls,
    instance: ControlInstance,
    pose: AnimatedPose,
    reader: TargetReader,
    frames: np.ndarray | None,
    scene: bpy.types.Scene,
    depsgraph: Any,
) -> tuple[StackResult, dict[str, np.ndarray], FloatArray]:
    """Read the animated pose and the targets in bulk, run the stack once. ``frames`` ``None``:
    the scene's current frame. Returns the result, the current channels and the frames."""
    assert built.stack is not None
    f = np.array([scene.frame_current_final], dtype=np.float64) if frames is None else frames
    rot, tr, sc, current = pose.at(obj, f)
    places = np.array(obj.matrix_world, dtype=np.float64)[None] if frames is None else object_world_track(obj, f)
    if places is None:  # moved by constraints, drivers or a moving parent: as Blender evaluates it
        places = _evaluated_tracks([TargetRef(obj.name)], f)[TargetRef(obj.name)]
    own_world = built.stack.skeleton.forward_kinematics(rot, tr, sc) if reader.own else None
    tracks = reader.tracks(obj, frames, own_world, places)
    reader.seen = (places, tracks)
    set_targets(instance, built, tracks, places, make_ray_cast(scene, depsgraph, built, frames))
    fps = scene_fps(scene)
    result = instance.evaluate(rot, tr, sc, time=f / fps, placement=places)
    return result, current, f


# --- reports ---------------------------------------------------------------------------------


def report_summary(report: ControlReport, kind: str) -> dict[str, Any]:
    """Figures of one control over the frames it ran on, for the panel and the command line."""
    ran = np.asarray(report.ran)
    residual = np.asarray(report.residual, dtype=np.float64)
    out: dict[str, Any] = {
        "frames": int(ran.shape[0]),
        "ran": int(ran.sum()),
        "skipped": int(np.asarray(report.skipped).sum()),
        "converged": int(np.asarray(report.converged).sum()),
        "limited": int(np.asarray(report.limited).sum()),
        "max_residual": float(residual[ran].max()) if ran.any() else 0.0,
        "residual_unit": "rad" if kind == "LOOK_AT" else "units",
    }
    reset = report.details.get("reset") if report.details else None
    if reset is not None:
        reasons = [str(r) for r in np.asarray(reset) if str(r)]
        out["resets"] = {r: reasons.count(r) for r in sorted(set(reasons))}
    stop = report.details.get("stop") if report.details else None
    if stop is not None:
        stops = [str(s) for s in np.asarray(stop)]
        out["stops"] = {s: stops.count(s) for s in sorted(set(stops))}
    return out


# --- bake ------------------------------------------------------------------------------------


@dataclass
class BakeOutcome:
    action: bpy.types.Action
    frames: FloatArray
    seconds: float
    controls: dict[str, dict[str, Any]]

    def as_dict(self, obj_name: str) -> dict[str, Any]:
        return {
            "object": obj_name,
            "action": self.action.name,
            "frames": [float(self.frames[0]), float(self.frames[-1])],
            "frame_count": int(self.frames.shape[0]),
            "seconds": round(self.seconds, 4),
            "controls": self.controls,
        }


def check_bakeable(obj: bpy.types.Object) -> BuiltControls:
    """The object's stack, or :class:`RigError` naming what is wrong (nothing is changed)."""
    problems = pose_problems(obj)
    if problems:
        raise RigError("; ".join(problems))
    built = build_controls(obj)
    if built.errors:
        rows = obj.marionette_controls.controls
        raise RigError("; ".join(f"control {rows[i].name!r}: {e}" for i, e in sorted(built.errors.items())))
    if built.stack is None:
        raise RigError(f"{obj.name!r} has no controls to bake")
    missing = TargetReader(obj, built).missing()
    if missing:
        raise RigError("; ".join(missing))
    return built


def bake_controls(
    obj: bpy.types.Object,
    frames: Sequence[float] | np.ndarray | None = None,
    name: str | None = None,
    *,
    disable_live: bool = True,
    scene: bpy.types.Scene | None = None,
) -> BakeOutcome:
    """Write the controlled motion over ``frames`` (default: the scene's range) into a new
    Action on ``obj`` in bulk, springs and smoothing run from the first frame; the object's
    previous action is kept (with a fake user if nothing else uses it). Refuses (``RigError``,
    ``ClipError``) before changing anything. With ``disable_live`` the live preview is turned off
    (its output would otherwise be applied a second time over the baked keys)."""
    t0 = time.perf_counter()
    scene = scene or bpy.context.scene
    built = check_bakeable(obj)
    assert built.stack is not None
    f = np.arange(scene.frame_start, scene.frame_end + 1, dtype=np.float64) if frames is None else np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.size == 0 or not np.all(np.isfinite(f)) or (f.size > 1 and not np.all(np.diff(f) > 0.0)):
        raise ClipError("frames to bake must be finite and increasing")
    skeleton = built.stack.skeleton
    pose = AnimatedPose(obj, skeleton, scene, built.rot_joints, built.tr_joints)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    result, _current, _ = evaluate(obj, built, built.stack.instance(), pose, TargetReader(obj, built), f, scene, depsgraph)
    coverage = (pose.keys.keyed_joints | (result.coverage.max(axis=0) > 0.0)).astype(np.float64)
    if not coverage.any():
        coverage[list(built.rot_joints)] = 1.0
    fps = scene_fps(scene)
    action, _slot = compat.current_action(obj)
    base_name = name or f"{action.name if action is not None else obj.name}_controls"
    clip = Clip(
        names=skeleton.names,
        times=(f - f[0]) / fps,
        fps=fps,
        rotations=result.rotations,
        translations=result.translations,
        scales=result.scales,
        coverage=coverage,
        name=base_name,
        first_frame=float(f[0]),
    )
    reports = {n: report_summary(r, next(s.kind for s in built.specs if s.name == n)) for n, r in result.reports.items()}
    previous = compat.current_action(obj)
    if disable_live:
        from ..viewport import live_preview

        live_preview.stop(obj, restore=True)
    new = write_action(obj, clip, base_name, frames=f, fps=fps)
    new[FPS_PROPERTY] = fps
    if previous[0] is not None:
        carry_other_curves(previous[0], previous[1] or compat.action_slot_for(previous[0], obj), new, compat.current_action(obj)[1])
    return BakeOutcome(new, f, time.perf_counter() - t0, reports)


_KEY_FLOAT_PAIRS = ("co", "handle_left", "handle_right")
_KEY_ENUMS = ("interpolation", "handle_left_type", "handle_right_type", "easing")


def carry_other_curves(source: Any, source_slot: Any, target: Any, target_slot: Any) -> int:
    """Copy the curves of ``source`` that are not bone transforms (the object's own transform,
    custom properties...) into ``target``, keys and handles in bulk: a bake replaces the bones'
    curves, not the rest of what the action animated. Returns how many were copied."""
    bag = compat.channelbag(target, target_slot, create=True)
    copied = 0
    for fc in compat.action_fcurves(source, source_slot):
        m = _BONE_PATH.match(fc.data_path)
        if m is not None and m.group(2) in SIZES:
            continue
        group = fc.group.name if fc.group is not None else ""
        new = compat.new_fcurve(bag, fc.data_path, fc.array_index, group)
        n = len(fc.keyframe_points)
        new.keyframe_points.add(n)
        for prop in _KEY_FLOAT_PAIRS:
            buf = np.empty(2 * n, dtype=np.float32)
            fc.keyframe_points.foreach_get(prop, buf)
            new.keyframe_points.foreach_set(prop, buf)
        for prop in _KEY_ENUMS:
            codes = np.empty(n, dtype=np.int32)
            fc.keyframe_points.foreach_get(prop, codes)
            new.keyframe_points.foreach_set(prop, codes.tolist())
        new.extrapolation = fc.extrapolation
        new.mute = fc.mute
        new.update()
        copied += 1
    return copied


def bake_file(path: str, object_name: str, output: str, frames: Sequence[int] | None = None, action_name: str | None = None) -> dict[str, Any]:
    """The ``bake-controls`` job: open ``path``, bake ``object_name``'s controls over ``frames``
    (``(first, last)``, default the scene's range), save everything to ``output`` (``path``
    itself is not written). Returns the report."""
    from pathlib import Path

    from ..usecases.session import save_blend

    src = Path(path)
    if not src.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    bpy.ops.wm.open_mainfile(filepath=str(src), load_ui=False)
    obj = bpy.data.objects.get(object_name)
    if obj is None:
        armatures = sorted(o.name for o in bpy.data.objects if o.type == "ARMATURE")
        raise RigError(f"{path} has no object called {object_name!r} (armatures: {', '.join(armatures) or 'none'})")
    if obj.type != "ARMATURE":
        raise RigError(f"{object_name!r} is a {obj.type.lower()} object, not an armature")
    scene = bpy.context.scene
    if scene.objects.get(obj.name) is None:
        raise RigError(f"{object_name!r} is not in the file's active scene {scene.name!r}")
    f = frames_of(scene, *(frames if frames is not None else (None, None)))
    outcome = bake_controls(obj, f, action_name, disable_live=True, scene=scene)
    save_blend(output)
    report = outcome.as_dict(obj.name)
    report["output"] = str(Path(output).resolve())
    return report


def frames_of(scene: bpy.types.Scene, start: int | None, end: int | None) -> np.ndarray:
    a = scene.frame_start if start is None else start
    b = scene.frame_end if end is None else end
    if b < a:
        raise ClipError(f"the frame range {a}..{b} is empty")
    return np.arange(a, b + 1, dtype=np.float64)

