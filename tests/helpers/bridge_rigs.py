"""Shared by the bridge tests: the tolerance, bone heads and tails, rig height and bone lengths,
forward kinematics in the world, and small rigs and clips built in place."""

from __future__ import annotations

import numpy as np

from marionette.core.rig.clip import Clip
from marionette.core.rig.rotations import quat_from_axis_angle

TOL = 1e-4  # of the rig's height


def _points(world: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Heads and tails ``(T, 2B, 3)`` of bones placed at ``world`` ``(T, B, 4, 4)``: a tail is
    the head plus the bone's Y axis times its length, so it also sees a leaf bone's rotation."""
    heads = world[..., :3, 3]
    tails = heads + world[..., :3, 1] * lengths[None, :, None]
    return np.concatenate([heads, tails], axis=1)


def _rig_height(obj, skeleton) -> float:
    from marionette.bridge import skeleton_read

    heads, tails = skeleton_read.rest_heads_tails(obj, skeleton)
    pts = np.concatenate([heads, tails])
    w = (skeleton.placement[:3, :3] @ pts.T).T + skeleton.placement[:3, 3]
    return float((w.max(axis=0) - w.min(axis=0)).max())


def _lengths(obj, skeleton) -> np.ndarray:
    return np.array([obj.data.bones[n].length for n in skeleton.names])


def _fk_world(skeleton, clip: Clip) -> np.ndarray:
    return skeleton.world_from_skeleton(skeleton.forward_kinematics(clip.rotations, clip.translations, clip.scales))


def _small_rig(blender, name: str = "Rig", bones: int = 5):
    """A chain of bones along +Z built through create_armature."""
    from marionette.bridge import action_write
    from marionette.core.rig.skeleton import Skeleton

    rest = np.broadcast_to(np.eye(4), (bones, 4, 4)).copy()
    # Bones along +Z: the rest rotation turns Blender's bone axis (+Y) onto +Z.
    rest[:, :3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]
    rest[:, 2, 3] = np.arange(bones) * 0.5
    skeleton = Skeleton.from_rest_matrices([f"b{i}" for i in range(bones)], [None] + list(range(bones - 1)), rest)
    return action_write.create_armature(skeleton, name), skeleton


def _keys_of(action, obj) -> list[np.ndarray]:
    from marionette.bridge import compat

    out = []
    for fc in compat.action_fcurves(action, compat.action_slot_for(action, obj)):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out.append(co)
    return out


def _simple_clip(skeleton, frames: int = 12, seed: int = 3) -> Clip:
    rng = np.random.default_rng(seed)
    b = len(skeleton)
    axes = rng.normal(size=(frames, b, 3))
    angles = np.linspace(0.0, 1.2, frames)[:, None] * rng.uniform(0.5, 1.5, size=(1, b))
    rot = quat_from_axis_angle(axes, angles)
    tr = np.zeros((frames, b, 3))
    tr[:, 0] = rng.normal(size=(frames, 3)) * 0.1
    return Clip.from_frames(skeleton.names, rot, tr, fps=24.0, first_frame=1.0, name="simple")
