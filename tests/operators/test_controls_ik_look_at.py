"""IK and look-at controls in Blender, driven as a user drives them: the hand follows a moving
Empty live and baked, the live preview never reads its own output, a posed armature is put back
exactly, and look-at stays within its limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.controls_scenes import _arm_ik, _assign, _key_path, _play, _pose_matrices, _world_heads
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


CHARACTER = "fbx/quaternius_male_casual.fbx"
WALK = "HumanArmature|HumanArmature|Man_Walk"


@pytest.fixture
def walker(addon):
    """The Quaternius character (31 bones and their leaf markers, skinned) playing its walk."""
    bpy = addon
    from marionette.bridge.file_import import load_file

    loaded = load_file(shared_file(CHARACTER))
    arm = loaded.armatures[0]
    _assign(arm, bpy.data.actions[WALK])
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 26
    bpy.context.view_layer.objects.active = arm
    return bpy, arm


# --- IK on a real character ------------------------------------------------------------------


def test_hand_follows_a_moving_empty_live_and_baked(walker):
    bpy, arm = walker
    scene = bpy.context.scene
    frames = np.arange(1, 27)
    row = _arm_ik(bpy, arm)
    assert (row.bone_start, row.bone_end, row.end_bone) == ("UpperArm.L", "LowerArm.L", "Palm.L")
    # The empty circles in front of the shoulder as the character walks, always within reach:
    # 0.55 to 0.85 of the arm's length from the shoulder, sampled from the animation itself.
    shoulder, elbow, wrist = (np.empty((len(frames), 3)) for _ in range(3))
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        shoulder[k], elbow[k], wrist[k] = _world_heads(arm, ["UpperArm.L", "LowerArm.L", "Palm.L"])
    arm_length = float(np.mean(np.linalg.norm(elbow - shoulder, axis=1) + np.linalg.norm(wrist - elbow, axis=1)))
    angle = np.linspace(0.0, 2.0 * math.pi, len(frames))
    offset = arm_length * np.stack([0.35 + 0.15 * np.cos(angle), -0.55 + 0.1 * np.sin(angle), -0.2 + 0.25 * np.sin(angle)], axis=1)
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    empty = bpy.context.active_object
    _key_path(bpy, empty, frames, shoulder + offset)
    bpy.context.view_layer.objects.active = arm
    row.target_object = empty
    arm.marionette_controls.live_preview = True

    live_err, live_pose = [], []
    for f in frames:
        scene.frame_set(int(f))
        hand = _world_heads(arm, ["Palm.L"])[0]
        live_err.append(float(np.linalg.norm(hand - np.array(empty.matrix_world.translation))))
        live_pose.append(_pose_matrices(arm))
    live_err = np.array(live_err) / arm_length
    before = arm.animation_data.action
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = arm.animation_data.action
    assert baked != before and before.name == WALK and not arm.marionette_controls.live_preview
    baked_err, pose_diff = [], []
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        hand = _world_heads(arm, ["Palm.L"])[0]
        baked_err.append(float(np.linalg.norm(hand - np.array(empty.matrix_world.translation))))
        pose_diff.append(float(np.abs(_pose_matrices(arm) - live_pose[k]).max()))
    baked_err = np.array(baked_err) / arm_length
    print(
        f"\nhand to empty / arm length ({arm_length:.3f}), {len(frames)} frames: live max {live_err.max():.1e}, "
        f"baked max {baked_err.max():.1e}; live vs baked pose matrices max {max(pose_diff):.1e}"
    )
    assert live_err.max() <= 1e-4
    assert baked_err.max() <= 1e-4
    assert max(pose_diff) <= 1e-5


def test_live_preview_never_reads_its_own_output(sample):
    """An unkeyed driven bone (the neck, keys removed) keeps its own value as the base: visiting
    frames in any order gives the same pose, and turning the preview off puts the base back."""
    bpy, arm = sample
    from marionette.bridge import compat

    scene = bpy.context.scene
    action, slot = compat.current_action(arm)
    bag = compat.channelbag(action, slot)
    for fc in [fc for fc in bag.fcurves if fc.data_path.startswith('pose.bones["Neck"]')]:
        bag.fcurves.remove(fc)
    neck = arm.pose.bones["Neck"]
    neck.rotation_quaternion = (0.9659, 0.2588, 0.0, 0.0)  # the user's pose for the unkeyed neck
    base = np.array(neck.rotation_quaternion)
    assert bpy.ops.marionette.control_add(kind="LOOK_AT", create_target=True) == {"FINISHED"}
    arm.marionette_controls.live_preview = True
    first = {}
    for f in (10, 11, 12, 30, 10, 5, 10, 10):
        scene.frame_set(f)
        q = np.array(neck.rotation_quaternion)
        if f in first:
            assert np.abs(q - first[f]).max() == 0.0, f"frame {f} changed on a revisit"
        first[f] = q
    assert np.abs(first[10] - base).max() > 1e-3  # the control does turn the neck
    # An undo step holds the neck as the preview wrote it: after undoing, the preview still
    # knows the user's value underneath.
    bpy.ops.ed.undo_push(message="at frame 10")
    scene.frame_set(30)
    bpy.ops.ed.undo_push(message="at frame 30")
    assert bpy.ops.ed.undo() == {"FINISHED"}
    arm = bpy.data.objects["Sample"]
    neck = arm.pose.bones["Neck"]
    for f in (12, 10):
        bpy.context.scene.frame_set(f)
        assert np.abs(np.array(neck.rotation_quaternion) - first[f]).max() == 0.0
    arm.marionette_controls.live_preview = False
    assert np.abs(np.array(neck.rotation_quaternion) - base).max() < 1e-6
    assert "_marionette_live" not in arm.keys()


def test_a_posed_armature_without_action_is_put_back_exactly(sample):
    bpy, arm = sample
    arm.animation_data_clear()
    arm.pose.bones["UpperArm.L"].rotation_quaternion = (0.9, 0.1, 0.3, 0.0)
    bpy.context.view_layer.update()
    before = _pose_matrices(arm)
    channels = [tuple(pb.rotation_quaternion) for pb in arm.pose.bones]
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.4, -0.4, 1.2)
    arm.marionette_controls.live_preview = True
    for f in (1, 2, 3, 2):
        bpy.context.scene.frame_set(f)
        assert np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target.location)) < 1e-5
    arm.marionette_controls.live_preview = False
    bpy.context.view_layer.update()
    assert [tuple(pb.rotation_quaternion) for pb in arm.pose.bones] == channels
    assert np.abs(_pose_matrices(arm) - before).max() < 1e-6


def test_a_scaled_and_turned_armature_reaches_world_targets(sample):
    bpy, arm = sample
    arm.scale = (2.0, 2.0, 2.0)
    arm.rotation_euler = (0.0, 0.0, math.radians(90.0))
    arm.location = (1.0, 2.0, 0.5)
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    bpy.context.view_layer.update()
    shoulder = _world_heads(arm, ["UpperArm.L"])[0]
    target.location = shoulder + np.array([0.3, 0.5, -0.4])  # within the doubled arm's reach
    arm.marionette_controls.live_preview = True
    worst = 0.0
    for f in (1, 2, 3, 2):  # the walk carries the shoulder away from the still target later on
        bpy.context.scene.frame_set(f)
        worst = max(worst, float(np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target.location))))
    assert worst < 2e-5


def test_euler_bones_of_a_motion_capture_file(addon):
    """A CMU BVH (Euler channels in the file's order, 120 fps): the hand reaches a still empty,
    keys written in each bone's own rotation mode, live and baked."""
    bpy = addon
    from marionette.bridge.file_import import load_file

    loaded = load_file(shared_file("bvh/cmu/12_03_motionbuilder.bvh"))
    arm = loaded.armatures[0]
    modes = {pb.rotation_mode for pb in arm.pose.bones}
    assert "QUATERNION" not in modes
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 60
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    row = arm.marionette_controls.controls[0]
    shoulder = _world_heads(arm, [row.bone_start])[0]
    elbow, wrist = _world_heads(arm, [row.bone_end, row.end_bone])
    reach = np.linalg.norm(elbow - shoulder) + np.linalg.norm(wrist - elbow)
    row.target_object.location = shoulder + reach * np.array([0.3, -0.5, -0.3])
    arm.marionette_controls.live_preview = True
    errors, live = [], _play(bpy, arm, range(1, 61))
    for f in range(1, 61, 7):
        scene.frame_set(f)
        hand = _world_heads(arm, [row.end_bone])[0]
        errors.append(float(np.linalg.norm(hand - np.array(row.target_object.location))) / reach)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, range(1, 61))
    modes_after = {pb.rotation_mode for pb in arm.pose.bones}
    diff = float(np.abs(baked - live).max())
    print(f"\nBVH (Euler {sorted(modes)}): hand to still target / reach max {max(errors):.1e}; live vs baked {diff:.1e}")
    assert modes_after == modes
    assert max(errors) <= 1e-4
    assert diff <= 1e-4 * reach


def test_moving_a_target_or_editing_keys_updates_the_pose_without_a_frame_change(sample):
    bpy, arm = sample
    from marionette.bridge import compat

    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.45, -0.35, 1.25)
    arm.marionette_controls.live_preview = True
    scene.frame_set(6)
    target.location = (0.5, -0.25, 1.1)
    bpy.context.view_layer.update()  # what the interface does after a drag
    assert np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target.location)) < 1e-5
    # Editing the walk's keys (the clavicle's, above the chain) is followed too.
    action, slot = compat.current_action(arm)
    curve = next(fc for fc in compat.channelbag(action, slot).fcurves if fc.data_path == 'pose.bones["Clavicle.L"].rotation_quaternion' and fc.array_index == 3)
    before = _world_heads(arm, ["Forearm.L"])[0]
    for k in curve.keyframe_points:
        k.co.y += 0.2
    curve.update()
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()
    moved_elbow = float(np.linalg.norm(_world_heads(arm, ["Forearm.L"])[0] - before))
    assert moved_elbow > 1e-3
    assert np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target.location)) < 1e-5


# --- look-at ---------------------------------------------------------------------------------


def test_look_at_stays_within_its_limits(sample):
    bpy, arm = sample
    from marionette.core.controls.look_at import yaw_pitch
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="LOOK_AT", create_target=False) == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    assert (row.bone_start, row.bone_end, row.space_bone) == ("Neck", "Head", "Hips")
    yaw_lim, pitch_lim = math.radians(60.0), math.radians(30.0)
    row.yaw_min, row.yaw_max, row.pitch_min, row.pitch_max = -yaw_lim, yaw_lim, -pitch_lim, pitch_lim
    # The empty goes once round the walking head, rising and falling: inside the limits in
    # front, beyond them at the sides and behind.
    frames = np.arange(1, 49)
    heads = []
    for f in frames:
        scene.frame_set(int(f))
        heads.append(_world_heads(arm, ["Head"])[0])
    angle = np.linspace(0.0, 2.0 * math.pi, len(frames))
    points = np.array(heads) + np.stack([1.5 * np.sin(angle), -1.5 * np.cos(angle), 0.5 * np.sin(2 * angle)], axis=1)
    bpy.ops.object.empty_add()
    empty = bpy.context.active_object
    _key_path(bpy, empty, frames, points)
    bpy.context.view_layer.objects.active = arm
    row.target_object = empty
    arm.marionette_controls.live_preview = True
    rt = live_preview.runtime(arm)
    scene.frame_set(1)
    chain = rt.built.stack.controls[0].chain
    facing_local = chain.facing_axis
    over, aim_inside, limited_frames, live_pose = [], [], 0, []
    for f in frames:
        scene.frame_set(int(f))
        m = _pose_matrices(arm)
        names = [pb.name for pb in arm.pose.bones]
        head, hips = m[names.index("Head")], m[names.index("Hips")]
        facing = head[:3, :3] @ facing_local
        space = hips[:3, :3] / np.linalg.norm(hips[:3, :3], axis=0)
        yaw, pitch = yaw_pitch((space.T @ facing)[None], chain.rest_frame)
        over.append(max(abs(float(yaw[0])) - yaw_lim, abs(float(pitch[0])) - pitch_lim))
        report = rt.reports[row.name]
        if report.limited[0]:
            limited_frames += 1
        else:
            to_target = np.linalg.inv(np.array(arm.matrix_world)) @ np.append(np.array(empty.matrix_world.translation), 1.0)
            d = to_target[:3] - head[:3, 3]
            aim_inside.append(math.acos(min(1.0, float(facing @ d) / (np.linalg.norm(facing) * np.linalg.norm(d)))))
        live_pose.append(m)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    diff = 0.0
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        diff = max(diff, float(np.abs(_pose_matrices(arm) - live_pose[k]).max()))
    print(
        f"\nlook-at over {len(frames)} frames: {limited_frames} at a limit, overshoot {max(max(over), 0.0):.1e} rad, "
        f"aim error inside {max(aim_inside):.1e} rad; live vs baked {diff:.1e}"
    )
    assert 5 <= limited_frames <= len(frames) - 5
    assert max(over) <= 1e-5
    assert max(aim_inside) <= 1e-4
    assert diff <= 1e-5
