"""Shared by the tests of controls in Blender: a walking body built in place, the control rigs,
world heads and pose matrices of a posed armature, keyed target paths, and frames played back."""

from __future__ import annotations

import numpy as np


def _assign(obj, action):
    from marionette.bridge import compat

    compat.assign_action(obj, action, compat.action_slot_for(action, obj))


def _world_heads(obj, bones):
    m = np.array(obj.matrix_world)
    return np.array([m[:3, :3] @ np.array(obj.pose.bones[b].head) + m[:3, 3] for b in bones])


def _pose_matrices(obj):
    pbs = obj.pose.bones
    buf = np.empty(len(pbs) * 16, dtype=np.float32)
    pbs.foreach_get("matrix", buf)
    return buf.reshape(-1, 4, 4).transpose(0, 2, 1).astype(np.float64)


def _key_path(bpy, obj, frames, points):
    """Key ``obj``'s location at ``frames`` (bulk, linear), in the action it plays (a new one if
    it has none)."""
    from marionette.bridge import compat

    action, slot = compat.current_action(obj)
    if action is None:
        action = bpy.data.actions.new(f"{obj.name}_path")
        slot = compat.new_action_slot(action, obj)
    bag = compat.channelbag(action, slot, create=True)
    for k in range(3):
        fc = compat.new_fcurve(bag, "location", k, "Object Transforms")
        fc.keyframe_points.add(len(frames))
        co = np.empty(2 * len(frames), dtype=np.float32)
        co[0::2] = frames
        co[1::2] = points[:, k]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", [1] * len(frames))
    compat.assign_action(obj, action, slot)


def _arm_ik(bpy, arm, side="L"):
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=False) == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    return row


def _walking_body(bpy, name: str, frames: int, fps: float = 24.0):
    """The 65-bone humanoid of the core control tests as an armature ``name`` playing its walk
    over ``frames`` frames at ``fps`` (the scene's range and rate set to match). Returns the
    object, the skeleton and the clip's local rotations and translations."""
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.clip import Clip

    rigs = _control_rigs()
    skeleton, bones = rigs.humanoid_65()
    scene = bpy.context.scene
    scene.render.fps = int(fps)
    times = np.arange(frames) / fps
    rot, tr = rigs.walk_cycle(skeleton, times)
    arm = create_armature(skeleton, name, tails=np.array([bones[n][1] for n in skeleton.names]))
    write_action(arm, Clip(skeleton.names, times, fps, rot, tr, name="Walk"), "Walk", fps=fps)
    scene.frame_start, scene.frame_end = 1, frames
    return arm, skeleton, rot, tr


def _control_rigs():
    """The synthetic rigs of the core control tests."""
    from tests.helpers import control_rigs

    return control_rigs


def _play(bpy, obj, frames):
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        out.append(_pose_matrices(obj))
    return np.array(out)
