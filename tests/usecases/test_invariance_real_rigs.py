"""Invariances of the retarget on Blender's own Rigify metarig and on the shared rigs (docs/methods.md#geometric-frames):
randomised bone rolls, a re-posed rest applied as the new rest, and facing read from the body
whatever the file's axes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


def _sample_source(bpy):
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    sample = sample_humanoid()
    source = create_armature(sample.skeleton, "Sample", tails=sample.tails)
    action = write_action(source, sample_walk(sample, frames=30, fps=24.0), "Walk")
    return source, action


def _metarig(bpy, name):
    bpy.ops.object.armature_basic_human_metarig_add()
    rig = bpy.context.active_object
    rig.name = name
    return rig


def _played(target, outcome, frames):
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.skeleton_read import skeleton_from_armature

    sk = skeleton_from_armature(target)
    clip = clip_from_action(target, outcome.action, frames=frames, fps=24.0)
    return sk, sk.forward_kinematics(clip.rotations, clip.translations)


def test_random_rolls_on_every_target_bone_change_nothing_but_the_rolls(blender):
    bpy = blender
    from marionette.usecases.retarget import retarget_action

    bpy.context.scene.render.fps = 24
    source, action = _sample_source(bpy)
    plain = _metarig(bpy, "Plain")
    rolled = _metarig(bpy, "Rolled")
    rng = np.random.default_rng(5)
    bpy.context.view_layer.objects.active = rolled
    bpy.ops.object.mode_set(mode="EDIT")
    for eb in rolled.data.edit_bones:
        eb.roll = float(rng.uniform(-np.pi, np.pi))
    bpy.ops.object.mode_set(mode="OBJECT")
    frames = np.arange(1, 31, dtype=float)
    results = {}
    for rig in (plain, rolled):
        outcome = retarget_action(source, action, rig, scene_fps=24.0, name="walk")
        results[rig.name] = _played(rig, outcome, frames)
    (sk_p, w_p), (sk_r, w_r) = results["Plain"], results["Rolled"]
    assert sk_p.names == sk_r.names
    height = np.ptp(w_p[..., 2, 3])
    assert np.abs(w_p[..., :3, 3] - w_r[..., :3, 3]).max() < 1e-5 * height
    # Orientation differs by each bone's own rest change only: limb direction errors vanish.
    # Blender stores rests in single precision (columns orthogonal to ~5e-6), so rotations are
    # compared as quaternions of the nearest rotation matrices, not through a trace.
    from marionette.core.rig.rotations import orthonormalize, quat_angle_between, quat_from_matrix

    def quats(m):
        return quat_from_matrix(orthonormalize(m))

    rest_delta = quats(np.swapaxes(sk_p.rest_placements()[:, :3, :3], -1, -2) @ sk_r.rest_placements()[:, :3, :3])
    played_delta = quats(np.swapaxes(w_p[..., :3, :3], -1, -2) @ w_r[..., :3, :3])
    angle = np.degrees(quat_angle_between(rest_delta[None], played_delta))
    assert angle.max() < 0.1


@pytest.mark.parametrize("lowered", [45.0, 80.0])
def test_rest_repose_applied_as_new_rest_gives_the_same_world_result(blender, lowered):
    bpy = blender
    from marionette.usecases.retarget import retarget_action

    bpy.context.scene.render.fps = 24
    source, action = _sample_source(bpy)
    plain = _metarig(bpy, "Plain")
    reposed = _metarig(bpy, "Reposed")
    bpy.context.view_layer.objects.active = reposed
    bpy.ops.object.mode_set(mode="POSE")
    from mathutils import Quaternion

    for side, sign in (("L", 1.0), ("R", -1.0)):
        pb = reposed.pose.bones[f"upper_arm.{side}"]
        pb.rotation_mode = "QUATERNION"
        # Lower (or raise) the arm about the body's forward axis, expressed in the bone's frame.
        world_axis = np.array([0.0, -1.0, 0.0]) * sign
        rest = np.array(pb.bone.matrix_local)[:3, :3]
        pb.rotation_quaternion = Quaternion(tuple(rest.T @ world_axis), np.radians(lowered - 28.0))
    bpy.ops.pose.armature_apply(selected=False)
    bpy.ops.object.mode_set(mode="OBJECT")
    frames = np.arange(1, 31, dtype=float)
    out = {}
    for rig in (plain, reposed):
        outcome = retarget_action(source, action, rig, scene_fps=24.0, name="walk")
        out[rig.name] = _played(rig, outcome, frames)[1]
    height = np.ptp(out["Plain"][..., 2, 3])
    assert np.abs(out["Plain"][..., :3, 3] - out["Reposed"][..., :3, 3]).max() < 1e-5 * height


FACING = {
    # world forward of each shared character, read off the files (the male base mesh faces +X).
    "bvh/cmu/12_03_motionbuilder.bvh": (0.0, -1.0, 0.0),
    "bvh/cmu/02_02_daz.bvh": (0.0, -1.0, 0.0),
    "bvh/makehuman/walk1_zup.bvh": (0.0, -1.0, 0.0),
    "fbx/quaternius_male_casual.fbx": (0.0, -1.0, 0.0),
    "gltf/male_base_mesh_apose.glb": (1.0, 0.0, 0.0),
    "blend/vrm_addon_apose_rest.blend": (0.0, -1.0, 0.0),
    "gltf/khronos_rigged_figure.glb": (0.0, -1.0, 0.0),
    "gltf/khronos_cesium_man.glb": (0.0, -1.0, 0.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("relative", sorted(FACING))
def test_facing_is_inferred_from_the_body_on_every_shared_humanoid(blender, relative):
    from marionette.bridge.file_import import load_file
    from marionette.core.retarget.canonical_pose import build_anatomy, rest_facing
    from marionette.usecases.rigs import rig_input

    loaded = load_file(shared_file(relative))
    arm = max(loaded.armatures, key=lambda a: len(a.data.bones))
    rig, _ = rig_input(arm)
    facing = rest_facing(build_anatomy(rig.skeleton, rig.slots, rig.ends))
    assert facing.source == "inferred"
    world = np.array(arm.matrix_world)[:3, :3]
    fwd = world @ facing.forward
    up = world @ facing.up
    assert np.degrees(np.arccos(np.clip(fwd @ FACING[relative] / np.linalg.norm(fwd), -1, 1))) < 15.0
    assert np.degrees(np.arccos(np.clip(up[2] / np.linalg.norm(up), -1, 1))) < 15.0


def test_a_z_up_file_read_without_axis_conversion_lies_down_yet_retargets_upright(blender):
    """MakeHuman's walk imported as if it were Y-up lies on its back; up still comes from the body."""
    bpy = blender
    from marionette.core.retarget.canonical_pose import build_anatomy, rest_facing
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.rigs import rig_input

    bpy.context.scene.render.fps = 24
    bpy.ops.import_anim.bvh(filepath=str(shared_file("bvh/makehuman/walk1_zup.bvh")), use_fps_scale=False)
    lying = bpy.context.active_object
    rig, _ = rig_input(lying)
    up = np.array(lying.matrix_world)[:3, :3] @ rest_facing(build_anatomy(rig.skeleton, rig.slots, rig.ends)).up
    assert abs(up[2]) < 0.3  # the file's body really lies down in Blender's world
    target = _metarig(bpy, "Upright")
    outcome = retarget_action(lying, lying.animation_data.action, target, scene_fps=24.0, name="walk")
    sk, world = _played(target, outcome, np.arange(1, outcome.report["clip"]["frames"] + 1, dtype=float))
    head = world[:, sk.index("spine.006"), 2, 3]
    feet = world[:, [sk.index("foot.L"), sk.index("foot.R")], 2, 3].min(axis=1)
    assert np.all(head > feet + 1.0)  # the metarig stands: head well above the feet every frame
    assert outcome.report["summary"]["mean_limb_direction_error"] < 1.5
