"""The animated pose of an armature object: what the animation alone gives, never what the
controls wrote before (docs/controls.md#the-stack). Conventions are those of :mod:`.clip_read` and :mod:`.action_write`: skeleton space is
the armature object's space, bones are in the skeleton's order (parents first), local rotations
are w-first quaternions of ``pose_bone.matrix_basis``.

It is read in bulk: the active action's keys evaluated in numpy (:class:`KeyCache`,
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

A bake replaces the bones' curves of the action it starts from and carries the others over
(:func:`carry_other_curves`).
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import bpy
import numpy as np

from ..core.rig.rotations import FloatArray
from ..core.rig.skeleton import Skeleton
from . import compat
from .clip_read import needs_evaluation
from .fcurve_eval import evaluate_fcurves
from .pose_channels import SIZES, PoseIO, rotation_prop
from .rigid_bodies import TRACK_CONSTRAINT

_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.([A-Za-z_]+)$')
_UNESCAPE = re.compile(r"\\(.)")
LIVE_PROPERTY = "_marionette_live"
#: Frames sampled at most when the key cache is built (beyond: evaluated per request).
_CACHE_LIMIT = 200_000


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
    # A bone's track toward its rigid body acts after the controls (physics write-back): the
    # animated pose the controls read is the keys' (see usecases/bake_physics.py).
    out.extend(needs_evaluation(obj, action, ignore=frozenset({TRACK_CONSTRAINT})))
    ad = obj.animation_data
    if ad is not None:
        if ad.use_tweak_mode:
            out.append(f"{obj.name!r} is in NLA tweak mode")
        if ad.use_nla and any(not t.mute and len(t.strips) for t in ad.nla_tracks):
            out.append(f"{obj.name!r} plays NLA tracks; controls read the active action alone (mute the tracks or bake them)")
        if action is not None and (ad.action_influence != 1.0 or ad.action_blend_type != "REPLACE"):
            out.append(f"the action of {obj.name!r} is blended ({ad.action_blend_type}, influence {ad.action_influence:g})")
    return out


# --- the action's keys -----------------------------------------------------------------------


def bone_fcurves(obj: bpy.types.Object, skeleton: Skeleton) -> tuple[Any, list[tuple[Any, str, int, int]]]:
    """The active action and its live pose-bone curves as ``(fcurve, property, joint, index)``
    (muted curves, muted groups, unknown bones and empty curves skipped, as Blender skips them)."""
    action, action_slot = compat.current_action(obj)
    if action is None:
        return None, []
    if compat.SLOTTED_ACTIONS and action_slot is None:
        action_slot = compat.action_slot_for(action, obj)
    out = []
    for fc in compat.action_fcurves(action, action_slot):
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
        keyed = self.keys.keyed
        #: Per joint, whether the action keys its rotation (in its rotation mode), its location.
        self.rotation_keyed = np.array([keyed[rotation_prop(m)][j].any() for j, m in enumerate(self.io.modes)], dtype=bool)
        self.location_keyed = keyed["location"].any(axis=1)
        #: Whether a channel the controls write is also keyed: Blender's animation sets it again
        #: in every evaluation, over what was written before it.
        self.writes_keyed = bool(self.rotation_keyed[self.rot_joints].any() or self.location_keyed[self.tr_joints].any())
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
