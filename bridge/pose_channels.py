"""An armature object's pose channels read and written in bulk, in skeleton order (see
:mod:`.animated_pose`): location, scale and each bone's rotation channel in its own mode,
converted to and from w-first quaternions continuously with what the channel holds."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ..core.rig.rotations import (
    FloatArray,
    blender_axis_angle_from_quat,
    euler_from_quat,
    make_euler_continuous,
    quat_from_blender_axis_angle,
    quat_from_euler,
)
from ..core.rig.skeleton import Skeleton

SIZES = {"rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "location": 3, "scale": 3}
_ROTATION_PROP = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}


def rotation_prop(mode: str) -> str:
    return _ROTATION_PROP.get(mode, "rotation_euler")


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
                q = quat_from_blender_axis_angle(channels["rotation_axis_angle"][..., sel, :].astype(np.float64))
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
                arr[sel] = blender_axis_angle_from_quat(qs, cur[:, 1:])
            else:
                e = euler_from_quat(qs, mode)
                arr[sel] = make_euler_continuous(np.stack([cur, e]), mode, axis=0)[1]
        return out
