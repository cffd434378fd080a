"""Controls in Blender, driven as a user drives them: add controls in the sidebar, scrub the live
preview, render, bake, undo, unregister.

Each test measures on what Blender itself evaluates (``pose_bone.matrix`` after
``scene.frame_set``, the render's own depsgraph), not on the core's output: a hand's distance to a
moving empty, a head's yaw and pitch against its limits, live pose against baked keys.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import shared_file

pytestmark = pytest.mark.bpy

CHARACTER = "fbx/quaternius_male_casual.fbx"
WALK = "HumanArmature|HumanArmature|Man_Walk"


@pytest.fixture
def addon(blender):
    """The add-on registered, the controls' pieces too (they register themselves through the
    add-on once it lists them; until then the test registers them), unregistered afterwards."""
    bpy = blender
    import marionette
    from marionette.operators import controls_register
    from marionette.panels import controls_panel

    with contextlib.ExitStack() as registered:  # unregisters in reverse order, whatever happens
        marionette.register()
        registered.callback(marionette.unregister)
        if not hasattr(bpy.types.Object, "marionette_controls"):
            controls_register.register()
            registered.callback(controls_register.unregister)
            controls_panel.register()
            registered.callback(controls_panel.unregister)
        bpy.context.scene.render.fps = 24
        yield bpy


def _assign(obj, action):
    from marionette.bridge import compat

    compat.assign_action(obj, action, compat.action_slot_for(action, obj))


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


@pytest.fixture
def sample(addon):
    """Marionette's sample humanoid (synthetic, 54 bones) playing its sample walk."""
    bpy = addon
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    rig = sample_humanoid()
    arm = create_armature(rig.skeleton, "Sample", tails=rig.tails)
    write_action(arm, sample_walk(rig, frames=48, fps=24.0), "Walk")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    return bpy, arm


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


# --- springs and ground (SPEC 7.4, 7.5) ------------------------------------------------------


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


def _soles(skeleton):
    """Each foot joint with the point under its ankle at ground height, in the foot's own space."""
    rest = skeleton.rest_placements()
    out = []
    for side in "LR":
        f = skeleton.index(f"foot.{side}")
        ankle = rest[f, :3, 3]
        out.append((f, np.linalg.solve(rest[f], [ankle[0], ankle[1], 0.0, 1.0])))
    return out


def _control_rigs():
    """The synthetic rigs of the core control tests (they live with those tests)."""
    from pathlib import Path

    here = str(Path(__file__).resolve().parents[1] / "core")
    if here not in sys.path:
        sys.path.insert(0, here)
    import control_rigs

    return control_rigs


@pytest.fixture
def tail(addon):
    """A carrier bone swaying sideways (0.3 units at 1 Hz) with a 4-bone, 1-unit tail hanging
    from it, a spring on the tail."""
    bpy = addon
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.clip import Clip

    skeleton, _path = _control_rigs().hanging_chain(4, 1.0)
    rest = skeleton.rest_placements()
    tails = rest[:, :3, 3] + rest[:, :3, 1] * np.array([0.1, 0.25, 0.25, 0.25, 0.25])[:, None]
    arm = create_armature(skeleton, "Tail", tails=tails)
    t = np.arange(48) / 24.0
    rot = np.zeros((48, len(skeleton), 4))
    rot[..., 0] = 1.0
    tr = np.zeros((48, len(skeleton), 3))
    tr[:, 0] = np.stack([0.3 * np.sin(2 * math.pi * t), np.zeros_like(t), np.zeros_like(t)], axis=1) @ rest[0, :3, :3]
    write_action(arm, Clip(skeleton.names, t, 24.0, rot, tr, name="Sway"), "Sway")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="SPRING") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    row.bone_start, row.bone_end = "s0", "s3"
    return bpy, arm


def _tip(obj):
    m = np.array(obj.matrix_world) @ np.array(obj.pose.bones["s3"].matrix)
    return m[:3, 3] + m[:3, 1] * obj.data.bones["s3"].length


def _play(bpy, obj, frames):
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        out.append(_pose_matrices(obj))
    return np.array(out)


def test_spring_tail_live_scrubbed_and_baked(tail):
    bpy, arm = tail
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    frames = np.arange(1, 49)
    animated = []
    for f in frames:
        scene.frame_set(int(f))
        animated.append(_tip(arm))
    arm.marionette_controls.live_preview = True
    first = _play(bpy, arm, frames)
    lag = []
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        lag.append(float(np.linalg.norm(_tip(arm) - animated[k])))
    # Scrub back to frame 20 and play on: the same poses, bit for bit; jump ahead and back too.
    again = _play(bpy, arm, [20, 30, 10, 40, 25])
    replay = _play(bpy, arm, frames[19:])
    resets = live_preview.summary(arm)[arm.marionette_controls.controls[0].name]["reset"]
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, frames)
    scrub_diff = max(float(np.abs(replay - first[19:]).max()), float(np.abs(again - first[[19, 29, 9, 39, 24]]).max()))
    bake_diff = float(np.abs(baked - first).max())
    print(
        f"\nspring tail (1 unit, 4 bones) under a 0.3-unit sway: tip lag max {max(lag):.3f}; scrubbed vs played "
        f"{scrub_diff:.1e}; live vs baked {bake_diff:.1e}; last reset reason {resets!r}"
    )
    assert max(lag) > 0.05  # the tail does swing behind
    assert lag[0] < 1e-6  # the first frame starts at the animation
    assert scrub_diff == 0.0
    assert bake_diff <= 1e-5


def test_objects_sharing_an_armature_keep_their_own_spring_state(tail):
    bpy, arm = tail
    scene = bpy.context.scene
    frames = np.arange(1, 49)
    arm.marionette_controls.live_preview = True
    alone = _play(bpy, arm, frames)
    bpy.ops.marionette.controls_reset()
    twin = arm.copy()
    scene.collection.objects.link(twin)
    twin.location.x = 3.0
    assert twin.data == arm.data and twin.marionette_controls.controls[0].kind == "SPRING"
    twin.marionette_controls.live_preview = False
    together, twin_tips = [], []
    for f in frames:
        if f == 24:
            twin.marionette_controls.live_preview = True  # the twin starts its own simulation here
        scene.frame_set(int(f))
        together.append(_pose_matrices(arm))
        twin_tips.append(_tip(twin) - np.array([3.0, 0.0, 0.0]))
    together = np.array(together)
    arm_tips = [(np.array(arm.matrix_world) @ np.append(p[-1][:3, 3], 1.0))[:3] for p in together]
    print(
        f"\ntwo objects, one Armature: arm's poses with the twin running vs alone {np.abs(together - alone).max():.1e}; "
        f"tips apart when the twin starts {np.linalg.norm(twin_tips[23] - _tip_of(arm, together[23])):.3f}"
    )
    assert np.abs(together - alone).max() == 0.0
    assert np.linalg.norm(twin_tips[23] - _tip_of(arm, together[23])) > 0.02
    del arm_tips


def _tip_of(obj, pose):
    names = [pb.name for pb in obj.pose.bones]
    m = np.array(obj.matrix_world) @ pose[names.index("s3")]
    return m[:3, 3] + m[:3, 1] * obj.data.bones["s3"].length


def test_feet_on_a_sloped_plane_live_and_baked(addon):
    bpy = addon
    arm, skeleton, rot, tr = _walking_body(bpy, "Walker", 61, fps=30.0)
    scene = bpy.context.scene
    degrees = 10.0
    rise = math.tan(math.radians(degrees))  # uphill toward -Y, where the character walks
    # The object is carried at the slope's height under the hips, as a character controller does.
    hips = skeleton.forward_kinematics(rot, tr)[:, skeleton.index("hips"), :3, 3]
    _key_path(bpy, arm, np.arange(1, 62), np.stack([np.zeros(61), np.zeros(61), -rise * hips[:, 1]], axis=1))
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(-math.radians(degrees), 0.0, 0.0))
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="GROUND") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    assert (row.bone_start, row.bone_end, row.second_start, row.second_end, row.pelvis_bone) == ("thigh.L", "foot.L", "thigh.R", "foot.R", "hips")
    rest = skeleton.rest_placements()
    soles = _soles(skeleton)
    animated_world = skeleton.forward_kinematics(rot, tr)

    def measure(pose_by_frame):
        names = [pb.name for pb in arm.pose.bones]
        gaps, below, tilts = [], [], []
        for k in range(61):
            scene.frame_set(k + 1)
            world = np.array(arm.matrix_world)
            for f, p in soles:
                m = world @ pose_by_frame[k][names.index(skeleton.names[f])]
                point = (m @ p)[:3]
                height = -rise * point[1]
                below.append(height - point[2])
                if (animated_world[k, f] @ p)[2] < 1e-6:  # planted in the animation
                    gaps.append(abs(point[2] - height))
                    up = m[:3, :3] @ np.linalg.solve(rest[f, :3, :3], [0.0, 0.0, 1.0])
                    tilts.append(math.degrees(math.acos(min(1.0, up[2] / np.linalg.norm(up)))))
        return max(below), max(gaps), len(gaps), (min(tilts), max(tilts))

    arm.marionette_controls.live_preview = True
    live = _play(bpy, arm, np.arange(1, 62))
    penetration, gap, planted, tilt = measure(live)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, np.arange(1, 62))
    diff = float(np.abs(baked - live).max())
    print(
        f"\nfeet on a {degrees:.0f} deg slope, 61 frames: penetration {1e3 * penetration:.4f} mm, planted gap "
        f"{1e3 * gap:.4f} mm over {planted} planted foot-frames, planted tilt {tilt[0]:.2f}-{tilt[1]:.2f} deg; live vs baked {diff:.1e}"
    )
    # The object's own path came along into the baked action.
    scene.frame_set(61)
    assert abs(arm.matrix_world.translation.z + rise * hips[60, 1]) < 1e-5
    assert planted > 40
    assert penetration <= 1e-3 and gap <= 1e-3
    assert abs(tilt[0] - degrees) <= 0.05 and abs(tilt[1] - degrees) <= 0.05
    assert diff <= 1e-5


def _slab(bpy, name, center, size):
    """A flat box mesh object (``size`` along x, y, z) centred on ``center``."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=1.0)
    for v in bm.verts:
        v.co = type(v.co)([c * s + o for c, s, o in zip(v.co, size, center, strict=True)])
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def test_feet_ignore_the_characters_own_meshes_and_follow_a_moving_ground(addon):
    """Under the feet: the character's skinned body (deformed by the armature, not parented), a
    prop parented to it (both of which Blender's scene ray cast hits first) and a hidden mesh;
    below them a sloped plane that rises as the clip plays. Planted soles sit on the plane where
    it is at each frame, live and baked."""
    bpy = addon
    count = 31
    arm, skeleton, rot, tr = _walking_body(bpy, "Walker", count, fps=30.0)
    scene = bpy.context.scene
    degrees, climb = 8.0, 0.004  # the plane rises 4 mm a frame
    rise = math.tan(math.radians(degrees))
    hips = skeleton.forward_kinematics(rot, tr)[:, skeleton.index("hips"), :3, 3]
    _key_path(bpy, arm, np.arange(1, count + 1), np.stack([np.zeros(count), np.zeros(count), -rise * hips[:, 1]], axis=1))
    body = _slab(bpy, "Body", (0.0, -0.5, 0.25), (1.0, 2.5, 0.02))
    body.vertex_groups.new(name="root").add(list(range(len(body.data.vertices))), 1.0, "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = arm
    prop = _slab(bpy, "Crate", (0.0, -0.5, 0.35), (1.0, 2.5, 0.02))
    prop.parent = arm
    # Hidden in the viewport (its collection is): no ground, for Blender's ray casts either.
    hidden = _slab(bpy, "Hidden", (0.0, -0.5, 0.3), (1.0, 2.5, 0.02))
    props = bpy.data.collections.new("Props")
    scene.collection.children.link(props)
    props.objects.link(hidden)
    scene.collection.objects.unlink(hidden)
    bpy.context.view_layer.layer_collection.children["Props"].hide_viewport = True
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(-math.radians(degrees), 0.0, 0.0))
    ground = bpy.context.active_object
    _key_path(bpy, ground, np.arange(1, count + 1), np.stack([np.zeros(count), np.zeros(count), climb * np.arange(count)], axis=1))
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="GROUND") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    row.smooth_time = row.pelvis_smooth_time = 0.0  # follow the ground without easing in
    soles = _soles(skeleton)
    animated_world = skeleton.forward_kinematics(rot, tr)
    names = [pb.name for pb in arm.pose.bones]
    from mathutils import Vector

    def measure(poses):
        gaps, own_first = [], set()
        for k in range(count):
            scene.frame_set(k + 1)
            world = np.array(arm.matrix_world)
            for f, p in soles:
                if (animated_world[k, f] @ p)[2] >= 1e-6:
                    continue  # planted in the animation only
                point = (world @ poses[k][names.index(skeleton.names[f])] @ p)[:3]
                gaps.append(abs(point[2] - (-rise * point[1] + climb * k)))
                hit = scene.ray_cast(bpy.context.evaluated_depsgraph_get(), Vector(point + [0.0, 0.0, 0.5]), Vector((0.0, 0.0, -1.0)), distance=1.0)
                own_first.add(hit[4].original.name if hit[0] else "")
        return max(gaps), len(gaps), own_first

    arm.marionette_controls.live_preview = True
    live = _play(bpy, arm, np.arange(1, count + 1))
    gap, planted, first = measure(live)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, np.arange(1, count + 1))
    diff = float(np.abs(baked - live).max())
    print(f"\nown meshes under the feet, ground rising {1e3 * climb * (count - 1):.0f} mm: planted gap {1e3 * gap:.4f} mm over {planted} foot-frames; live vs baked {diff:.1e}")
    # Blender's own ray from above each planted sole meets the character's meshes first.
    assert first <= {"Body", "Crate"} and first
    assert planted > 20
    assert gap <= 1e-3
    assert diff <= 1e-5


def test_inheritance_fixed_axis_and_closure_live_and_baked(addon):
    """A twist bone taking half the knee's turn, a shin kept to its twist, and both arms closing
    on one point: measured on Blender's pose, live and baked."""
    bpy = addon
    from marionette.core.rig.rotations import quat_angle, quat_from_matrix, swing_twist
    from marionette.viewport import live_preview

    arm, skeleton, rot, tr = _walking_body(bpy, "Body", 24)
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = arm
    rows = arm.marionette_controls.controls
    for kind in ("INHERIT", "FIXED_AXIS", "CLOSURE"):
        assert bpy.ops.marionette.control_add(kind=kind) == {"FINISHED"}
    grant, fixed, closure = rows
    grant.bone_start = grant.bone_end = "thigh_twist.L"
    grant.source_bone, grant.rotation_fraction = "shin.L", 0.5
    fixed.bone_start = fixed.bone_end = "shin.R"
    fixed.twist_axis = "POS_Y"
    closure.bone_start, closure.bone_end = "upper_arm.L", "forearm.L"
    closure.second_start, closure.second_end = "upper_arm.R", "forearm.R"
    bpy.ops.object.empty_add(location=(0.0, -0.35, 1.25))
    meet = bpy.context.active_object
    closure.target_object = closure.second_object = meet
    bpy.context.view_layer.objects.active = arm
    assert live_preview.validation(arm) == {}
    arm.marionette_controls.live_preview = True
    names = [pb.name for pb in arm.pose.bones]
    grant_err = swing = gap = 0.0
    live = []
    for f in range(1, 25):
        scene.frame_set(f)
        basis = {n: quat_from_matrix(np.array(arm.pose.bones[n].matrix_basis)[:3, :3]) for n in ("thigh_twist.L", "shin.L", "shin.R")}
        grant_err = max(grant_err, abs(float(quat_angle(basis["thigh_twist.L"])) - 0.5 * float(quat_angle(basis["shin.L"]))))
        sw, _tw = swing_twist(basis["shin.R"], [0.0, 1.0, 0.0])
        swing = max(swing, float(quat_angle(sw)))
        m = _pose_matrices(arm)
        tips = [m[names.index(b)][:3, 3] + m[names.index(b)][:3, 1] * arm.data.bones[b].length for b in ("forearm.L", "forearm.R")]
        gap = max(gap, float(np.linalg.norm(tips[0] - tips[1])))
        live.append(m)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    diff = float(np.abs(_play(bpy, arm, range(1, 25)) - np.array(live)).max())
    print(
        f"\ngrant error {grant_err:.1e} rad, fixed-axis swing left {swing:.1e} rad, closure gap {gap:.1e}; "
        f"live vs baked {diff:.1e}"
    )
    assert grant_err <= 1e-5
    assert swing <= 1e-5
    assert gap <= 1e-3
    assert diff <= 1e-5


# --- settings of the Controls panel: joint limits, look-at weights, closure solver ------------


def _local_quat(obj, bone):
    from marionette.core.rig.rotations import quat_from_matrix

    return quat_from_matrix(np.array(obj.pose.bones[bone].matrix_basis)[:3, :3])


def test_cone_and_hinge_limits_hold_an_arm_within_them(sample):
    """An arm reaching for a point in front of the chest: with the panel's hinge the forearm
    turns only about its X axis, within the range; with the cone the upper arm stays within its
    swing and twist. Measured on Blender's pose; without the limits the same reach leaves both."""
    bpy, arm = sample
    from marionette.core.controls.joint_limits import signed_angle_about
    from marionette.core.rig.rotations import quat_angle, swing_twist
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    row = _arm_ik(bpy, arm)
    row.bone_start, row.bone_end, row.end_bone = "UpperArm.L", "Forearm.L", "Hand.L"
    frames = range(1, 48, 4)
    chest = []
    for f in frames:
        scene.frame_set(f)
        chest.append(_world_heads(arm, ["Chest"])[0])
    # A point in front of the chest, carried along with the walk.
    bpy.ops.object.empty_add()
    empty = bpy.context.active_object
    _key_path(bpy, empty, np.array(list(frames), dtype=float), np.array(chest) + np.array([0.05, -0.3, 0.0]))
    row.target_object = empty
    bpy.context.view_layer.objects.active = arm

    def measure():
        off_hinge, hinge, swing, twist, residual = [], [], [], [], []
        for f in frames:
            scene.frame_set(f)
            sw, tw = swing_twist(_local_quat(arm, "Forearm.L"), [1.0, 0.0, 0.0])
            off_hinge.append(float(quat_angle(sw)))
            hinge.append(float(signed_angle_about(tw, [1.0, 0.0, 0.0])))
            sw, tw = swing_twist(_local_quat(arm, "UpperArm.L"), [0.0, 1.0, 0.0])
            swing.append(float(quat_angle(sw)))
            twist.append(abs(float(signed_angle_about(tw, [0.0, 1.0, 0.0]))))
            residual.append(live_preview.summary(arm)[row.name]["residual"])
        return {k: np.array(v) for k, v in zip(("off", "hinge", "swing", "twist", "residual"), (off_hinge, hinge, swing, twist, residual), strict=True)}

    arm.marionette_controls.live_preview = True
    free = measure()
    lo, hi = math.radians(-20.0), math.radians(20.0)
    cone, cone_twist = math.radians(30.0), math.radians(10.0)
    row.use_hinge_limit, row.hinge_axis, row.hinge_min, row.hinge_max = True, "POS_X", lo, hi
    row.use_cone_limit, row.cone_angle, row.cone_twist = True, cone, cone_twist
    assert live_preview.validation(arm) == {}
    held = measure()
    print(
        f"\nforearm off its hinge axis: free {math.degrees(free['off'].max()):.1f} deg, limited {held['off'].max():.1e} rad; "
        f"hinge angle limited {math.degrees(held['hinge'].min()):.2f}..{math.degrees(held['hinge'].max()):.2f} deg "
        f"(free {math.degrees(np.abs(free['hinge']).max()):.1f}); upper arm swing free {math.degrees(free['swing'].max()):.1f}, "
        f"limited {math.degrees(held['swing'].max()):.3f} deg, twist {math.degrees(held['twist'].max()):.3f} deg; "
        f"residual free {free['residual'].max():.1e}, limited {held['residual'].min():.3f}"
    )
    # Free, the reach bends the elbow beyond the range (or off one axis) and swings the upper
    # arm beyond the cone; held, both stay inside, and the target is out of reach.
    assert max(free["off"].max(), np.abs(free["hinge"]).max() - hi) > math.radians(5.0)
    assert max(free["swing"].max() - cone, free["twist"].max() - cone_twist) > math.radians(5.0)
    assert held["off"].max() <= 1e-4
    assert held["hinge"].min() >= lo - 1e-4 and held["hinge"].max() <= hi + 1e-4
    assert held["swing"].max() <= cone + 1e-4 and held["twist"].max() <= cone_twist + 1e-4
    assert free["residual"].max() <= 1e-3 < held["residual"].min()


def test_look_at_turn_weights_share_the_turn(sample):
    """The panel's turn weights of a neck-to-head look-at: each bone's turn (its pose against the
    animation's, measured on Blender's pose) takes its weight over their sum of the whole turn."""
    bpy, arm = sample
    from marionette.core.rig.rotations import quat_angle_between

    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="LOOK_AT", create_target=False) == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    assert (row.bone_start, row.bone_end) == ("Neck", "Head")
    assert tuple(row.look_weights[:2]) == (1.0, 2.0)  # the head takes two thirds by default
    row.yaw_min, row.yaw_max = -math.radians(170.0), math.radians(170.0)
    scene.frame_set(10)
    head = _world_heads(arm, ["Head"])[0]
    # Far away (so the neck's turn barely moves the eye against it), to the side and a little up.
    bpy.ops.object.empty_add(location=tuple(head + np.array([8.0, -3.0, 1.5])))
    row.target_object = bpy.context.active_object
    bpy.context.view_layer.objects.active = arm
    animated = {b: _local_quat(arm, b) for b in ("Neck", "Head")}
    arm.marionette_controls.live_preview = True
    shares = {}
    for weights in ((1.0, 2.0), (1.0, 1.0), (1.0, 3.0), (0.0, 1.0)):
        row.look_weights[0], row.look_weights[1] = weights
        scene.frame_set(10)
        neck, head_turn = (float(quat_angle_between(_local_quat(arm, b), animated[b])) for b in ("Neck", "Head"))
        shares[weights] = (neck / (neck + head_turn), neck + head_turn)
    print("\nneck's share of the turn by weights: " + ", ".join(f"{w}: {s:.3f} of {math.degrees(t):.1f} deg" for w, (s, t) in shares.items()))
    for (w_neck, w_head), (share, total) in shares.items():
        assert total > math.radians(30.0)
        assert abs(share - w_neck / (w_neck + w_head)) <= 0.02
    assert shares[(0.0, 1.0)][0] <= 1e-5


def test_closure_solver_choice_reaches_the_core(addon):
    """Both arms closing on one point with each solver of the panel: every one closes the loop,
    CCD (which turns the bones in their own axes) lands on another pose than FABRIK, and the
    two-bone solver refuses branches of three bones."""
    bpy = addon
    from marionette.viewport import live_preview

    arm, skeleton, rot, tr = _walking_body(bpy, "Body", 12)
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="CLOSURE") == {"FINISHED"}
    closure = arm.marionette_controls.controls[-1]
    closure.bone_start, closure.bone_end = "upper_arm.L", "forearm.L"
    closure.second_start, closure.second_end = "upper_arm.R", "forearm.R"
    bpy.ops.object.empty_add(location=(0.0, -0.35, 1.25))
    closure.target_object = closure.second_object = bpy.context.active_object
    bpy.context.view_layer.objects.active = arm
    arm.marionette_controls.live_preview = True
    names = [pb.name for pb in arm.pose.bones]
    poses, gaps = {}, {}
    for solver in ("FABRIK", "CCD", "TWO_BONE"):
        closure.closure_solver = solver
        assert live_preview.validation(arm) == {}
        out, gap = [], 0.0
        for f in range(1, 13):
            scene.frame_set(f)
            m = _pose_matrices(arm)
            tips = [m[names.index(b)][:3, 3] + m[names.index(b)][:3, 1] * arm.data.bones[b].length for b in ("forearm.L", "forearm.R")]
            gap = max(gap, float(np.linalg.norm(tips[0] - tips[1])))
            out.append(m)
        poses[solver], gaps[solver] = np.array(out), gap
    apart = float(np.abs(poses["CCD"] - poses["FABRIK"]).max())
    closure.closure_solver = "TWO_BONE"
    closure.bone_start = closure.second_start = ""
    closure.bone_start, closure.second_start = "shoulder.L", "shoulder.R"
    error = live_preview.validation(arm).get(0, "")
    print(f"\nclosure gaps by solver: {gaps}; CCD vs FABRIK poses {apart:.1e}; three-bone branches with two-bone: {error!r}")
    assert all(g <= 1e-3 for g in gaps.values())
    assert apart > 1e-3
    assert "two_bone" in error


# --- objects sharing one Armature ------------------------------------------------------------


def test_two_objects_sharing_an_armature_keep_their_own_controls(sample):
    bpy, arm = sample
    scene = bpy.context.scene
    twin = arm.copy()  # shares arm.data
    scene.collection.objects.link(twin)
    twin.location.x = 1.5
    assert twin.data == arm.data
    _assign(twin, arm.animation_data.action)
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target_a = arm.marionette_controls.controls[0].target_object
    target_a.location = (0.45, -0.35, 1.25)
    arm.marionette_controls.live_preview = True
    twin.marionette_controls.controls.clear()
    scene.frame_set(3)
    hand_a = _world_heads(arm, ["Hand.L"])[0]
    hand_twin = _world_heads(twin, ["Hand.L"])[0] - np.array([1.5, 0.0, 0.0])
    # The twin has no controls: its hand is where the walk puts it, far from arm's target.
    assert np.linalg.norm(hand_a - np.array(target_a.location)) < 1e-5
    assert np.linalg.norm(hand_twin - np.array(target_a.location)) > 0.05
    # Now the twin reaches its own target; arm keeps reaching its own.
    bpy.context.view_layer.objects.active = twin
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target_b = twin.marionette_controls.controls[0].target_object
    target_b.location = (1.5 + 0.4, -0.3, 1.1)
    twin.marionette_controls.live_preview = True
    for f in (4, 5, 6):
        scene.frame_set(f)
        assert np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target_a.location)) < 1e-5
        assert np.linalg.norm(_world_heads(twin, ["Hand.L"])[0] - np.array(target_b.location)) < 1e-5


# --- rendering -------------------------------------------------------------------------------


def _render_scene(bpy, arm):
    """An IK control on the left hand, a glowing cube the hand carries, a camera that sees it, and
    Cycles at 1 sample, 8x8 pixels; the live preview on."""
    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.35, -0.45, 1.05)
    bpy.ops.mesh.primitive_cube_add(size=0.2)
    cube = bpy.context.active_object
    cube.parent, cube.parent_type, cube.parent_bone = arm, "BONE", "Hand.L"
    cube.matrix_parent_inverse.identity()
    glow = bpy.data.materials.new("Glow")
    nodes = glow.node_tree.nodes
    nodes.clear()
    emit = nodes.new("ShaderNodeEmission")
    emit.inputs["Strength"].default_value = 20.0
    glow.node_tree.links.new(emit.outputs[0], nodes.new("ShaderNodeOutputMaterial").inputs[0])
    cube.data.materials.append(glow)
    bpy.ops.object.camera_add(location=(0.6, -3.0, 1.3), rotation=(math.radians(90), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 1
    scene.cycles.device = "CPU"
    scene.render.resolution_x = scene.render.resolution_y = 8
    scene.render.resolution_percentage = 100
    bpy.context.view_layer.objects.active = arm
    arm.marionette_controls.live_preview = True
    return target


@contextlib.contextmanager
def _rendered_poses(bpy, arm):
    """Yields, per rendered frame, ``arm``'s pose bone by bone as the render's own depsgraph
    ended it (read after the frame; persistent data keeps that depsgraph alive until then)."""
    scene = bpy.context.scene
    depsgraphs, poses = [], {}

    def keep(scene_, depsgraph):
        if depsgraph.mode == "RENDER":
            depsgraphs[:] = [depsgraph]

    def read(scene_, *_args):
        poses[scene_.frame_current] = _pose_matrices(arm.evaluated_get(depsgraphs[0]))

    scene.render.use_persistent_data = True
    bpy.app.handlers.frame_change_post.append(keep)
    bpy.app.handlers.render_post.append(read)
    try:
        yield poses
    finally:
        bpy.app.handlers.frame_change_post.remove(keep)
        bpy.app.handlers.render_post.remove(read)
        scene.render.use_persistent_data = False


def test_render_shows_the_viewport_pose(sample):
    """A Cycles render (1 sample, 8x8) on the main thread shows the pose the viewport shows: for
    frames the viewport showed (kept) and for frames it did not (computed for the render), bone
    by bone in the render's own depsgraph; and pixel by pixel as a render of the baked keys."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    _render_scene(bpy, arm)
    for f in (7, 8):
        scene.frame_set(f)
    scene.frame_set(7)
    with _rendered_poses(bpy, arm) as poses:
        live_pixels = _render_pixels(bpy)
        still = live_preview.last_render[arm.name]
        _render_frames(bpy, 8, 10)
        animation = live_preview.last_render[arm.name]
    assert still["kept"] == [7.0], still
    assert animation["kept"] == [8.0] and animation["computed"] == [9.0, 10.0], animation
    assert arm.animation_data.action.name == "Walk"
    viewport = {}
    for f in (7, 8, 9, 10):
        scene.frame_set(f)
        viewport[f] = _pose_matrices(arm)
    diffs = {f: float(np.abs(poses[f] - viewport[f]).max()) for f in viewport}
    # Without the controls the hand (and the cube) is elsewhere: the comparison can see it.
    arm.marionette_controls.live_preview = False
    scene.frame_set(7)
    plain_pixels = _render_pixels(bpy)
    arm.marionette_controls.live_preview = True
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    scene.frame_set(7)
    baked_pixels = _render_pixels(bpy)
    print(
        f"\nrender vs viewport pose, max matrix difference per frame {diffs}; pixels live vs baked "
        f"{np.abs(live_pixels - baked_pixels).max():.1e}, live vs no controls {np.abs(live_pixels - plain_pixels).max():.2f}"
    )
    assert max(diffs.values()) <= 1e-6
    assert np.abs(live_pixels - baked_pixels).max() <= 1e-3
    assert np.abs(live_pixels - plain_pixels).max() > 0.05


@pytest.mark.parametrize(
    ("engine", "steps", "position"),
    [("CYCLES", 1, "CENTER"), ("CYCLES", 2, "CENTER"), ("CYCLES", 2, "END"), ("BLENDER_EEVEE", 2, "START")],
)
def test_shutter_steps_are_the_times_a_render_evaluates(addon, engine, steps, position):
    """Prepare Render keeps the times a motion-blurred render asks for: the subframes Blender's
    render evaluates (recorded from its frame changes) are the ones render_times predicts."""
    from marionette.viewport import live_preview

    bpy = addon
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_cube_add(size=0.2)
    cube = bpy.context.active_object
    cube.keyframe_insert("location", frame=1)
    cube.location.x = 1.0
    cube.keyframe_insert("location", frame=10)
    bpy.ops.object.camera_add(location=(0.0, -3.0, 0.0), rotation=(math.radians(90), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.render.engine = engine
    scene.cycles.samples = 1
    scene.eevee.taa_render_samples = 1
    scene.render.resolution_x = scene.render.resolution_y = 8
    scene.render.use_motion_blur = True
    scene.render.motion_blur_shutter = 0.5
    scene.render.motion_blur_position = position
    cube.cycles.motion_steps = steps
    scene.eevee.motion_blur_steps = steps
    scene.frame_set(5)
    asked = set()

    def record(scene_, depsgraph):
        if depsgraph.mode == "RENDER":
            asked.add(round(scene_.frame_current_final, 4))

    bpy.app.handlers.frame_change_post.append(record)
    try:
        bpy.ops.render.render()
    finally:
        bpy.app.handlers.frame_change_post.remove(record)
    assert sorted(asked) == live_preview.render_times(scene, 5)


def test_motion_blur_renders_the_controls_between_frames(sample, monkeypatch):
    """With motion blur a render evaluates subframes. On the main thread each is computed; on a
    render thread each is taken as kept by Prepare Render (the same image), or, not kept, blended
    from the two kept frames around it (an approximation: the IK's answer between two frames is
    not their blend). The hand follows a moving target, so the subframes show."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    target = _render_scene(bpy, arm)
    _key_path(bpy, target, np.array([6.0, 8.0]), np.array([[0.6, -0.45, 0.8], [0.0, -0.45, 1.3]]))
    scene.render.motion_blur_shutter = 1.0
    for f in (6, 7, 8):
        scene.frame_set(f)
    scene.frame_set(7)
    sharp = _render_pixels(bpy)
    scene.render.use_motion_blur = True
    assert live_preview.render_times(scene, 7) == [6.5, 7.0, 7.5]
    assert live_preview.frames_not_kept(arm, scene, 6, 8) == [6, 7, 8]
    with _on_render_thread(monkeypatch):
        blended = _render_pixels(bpy)
    on_thread = live_preview.last_render[arm.name]
    computed = _render_pixels(bpy)
    on_main = live_preview.last_render[arm.name]
    # Forget what the main thread kept; Prepare Render keeps the frame and its shutter steps.
    assert bpy.ops.marionette.controls_reset() == {"FINISHED"}
    scene.frame_start, scene.frame_end = 7, 7
    assert bpy.ops.marionette.prepare_render() == {"FINISHED"}
    with _on_render_thread(monkeypatch):
        prepared = _render_pixels(bpy)
    on_thread_prepared = live_preview.last_render[arm.name]
    figures = {
        "blurred vs sharp": float(np.abs(computed - sharp).max()),
        "prepared vs computed": float(np.abs(prepared - computed).max()),
        "blended vs computed": float(np.abs(blended - computed).max()),
    }
    print(f"\nmotion blur: {on_main} / {on_thread} / {on_thread_prepared}; pixels {figures}")
    assert on_main["computed"] == [6.5, 7.5] and not on_main["missed"]
    assert on_thread["blended"] == [6.5, 7.5] and not on_thread["missed"]
    assert sorted(on_thread_prepared["kept"]) == [6.5, 7.0, 7.0, 7.5] and not on_thread_prepared["missed"]
    assert figures["blurred vs sharp"] > 0.05
    assert figures["prepared vs computed"] <= 1e-3


def _tmp_dir():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="marionette_render_"))


def _render_pixels(bpy):
    path = _tmp_dir() / "still.exr"
    scene = bpy.context.scene
    scene.render.image_settings.file_format = "OPEN_EXR"
    bpy.ops.render.render()
    bpy.data.images["Render Result"].save_render(str(path))
    img = bpy.data.images.load(str(path))
    px = np.array(img.pixels[:])
    bpy.data.images.remove(img)
    return px



@contextlib.contextmanager
def _on_render_thread(monkeypatch):
    """Renders inside run as they run from the interface (F12, Ctrl+F12): the handlers are told
    they are off the main thread."""
    from marionette.viewport import live_preview

    monkeypatch.setattr(live_preview, "_main_thread", lambda: False)
    try:
        yield
    finally:
        monkeypatch.undo()


def _render_frames(bpy, start, end):
    """Pixels of each frame of an animation render of ``start``..``end``."""
    scene = bpy.context.scene
    folder = _tmp_dir()
    scene.frame_start, scene.frame_end = start, end
    scene.render.image_settings.file_format = "OPEN_EXR"
    scene.render.filepath = str(folder / "frame_")
    bpy.ops.render.render(animation=True)
    out = {}
    for f in range(start, end + 1):
        img = bpy.data.images.load(str(folder / f"frame_{f:04d}.exr"))
        out[f] = np.array(img.pixels[:])
        bpy.data.images.remove(img)
    return out


def _rendered_on_main_thread(bpy, frames):
    """Pixels of stills of ``frames`` rendered on the main thread (where the controls run for the
    render itself: the reference a render from the interface must match)."""
    scene = bpy.context.scene
    keep = scene.frame_current
    out = {}
    for f in frames:
        scene.frame_set(f)
        out[f] = _render_pixels(bpy)
    scene.frame_set(keep)
    return out


def test_render_on_another_thread_shows_the_frames_the_viewport_showed(sample, monkeypatch):
    """F12 / Ctrl+F12 render on a render thread, where no control runs: the frames the main
    thread showed are written as it computed them (the same pixels as a render that runs the
    controls itself); a frame never shown, or shown before its target moved, renders without
    the controls and is reported; Prepare Render fills a whole range."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    target = _render_scene(bpy, arm)
    for f in (7, 8, 9):
        scene.frame_set(f)
    scene.frame_set(7)
    with _on_render_thread(monkeypatch):
        shown = {7: _render_pixels(bpy)}
        still = live_preview.last_render[arm.name]
        shown.update(_render_frames(bpy, 8, 10))
        animation = live_preview.last_render[arm.name]
    assert still["kept"] == [7.0] and not still["missed"]
    assert animation["kept"] == [8.0, 9.0] and animation["missed"] == [10.0]
    reference = _rendered_on_main_thread(bpy, (7, 8, 9, 10))
    diffs = {f: float(np.abs(shown[f] - reference[f]).max()) for f in reference}
    print(f"\npixels rendered off the main thread vs on it, per frame: {diffs}")
    assert max(diffs[f] for f in (7, 8, 9)) <= 1e-3
    # Frame 10 was never shown: rendered without the controls, the carried cube is elsewhere.
    assert diffs[10] > 0.05

    # The target moved since frames 7-10 were shown: only the frames shown after the move (the
    # current one, 7, shown again at once, and 8) are kept.
    assert scene.frame_current == 7
    target.location.z += 0.1
    bpy.context.view_layer.update()
    scene.frame_set(8)
    with _on_render_thread(monkeypatch):
        _render_frames(bpy, 8, 9)
    log = live_preview.last_render[arm.name]
    assert log["kept"] == [8.0] and log["missed"] == [9.0], log

    # Prepare Render shows the range once: every frame is then kept and rendered as shown.
    scene.frame_start, scene.frame_end = 1, 12
    assert live_preview.frames_not_kept(arm, scene, 1, 12) == [1, 2, 3, 4, 5, 6, 9, 10, 11, 12]
    assert bpy.ops.marionette.prepare_render() == {"FINISHED"}
    assert live_preview.frames_not_kept(arm, scene, 1, 12) == [] and scene.frame_current == 8
    with _on_render_thread(monkeypatch):
        shown = _render_frames(bpy, 3, 4)
        scene.frame_set(11)
        shown[11] = _render_pixels(bpy)
    log = live_preview.last_render[arm.name]
    assert log["kept"] == [11.0] and not log["missed"], log
    reference = _rendered_on_main_thread(bpy, (3, 4, 11))
    assert max(float(np.abs(shown[f] - reference[f]).max()) for f in reference) <= 1e-3

# --- bake, undo, validation, command line ----------------------------------------------------


def test_undo_restores_after_bake(sample):
    bpy, arm = sample
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    arm.marionette_controls.live_preview = True
    bpy.context.scene.frame_set(5)
    n_actions = len(bpy.data.actions)
    bpy.ops.ed.undo_push(message="before bake")
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Bake Controls")
    assert len(bpy.data.actions) == n_actions + 1
    assert bpy.data.objects["Sample"].animation_data.action.name == "Walk_controls"
    assert bpy.ops.ed.undo() == {"FINISHED"}
    restored = bpy.data.objects["Sample"]
    assert restored.animation_data.action.name == "Walk"
    assert "Walk_controls" not in bpy.data.actions
    assert restored.marionette_controls.live_preview
    assert len(restored.marionette_controls.controls) == 1


def test_bad_chain_is_shown_and_bake_refused_with_nothing_changed(sample):
    bpy, arm = sample
    from marionette.viewport import live_preview

    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    row = arm.marionette_controls.controls[0]
    row.bone_end = "Forearm.R"  # not below UpperArm.L
    errors = live_preview.validation(arm)
    assert "parents" in errors[0]
    n_actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match="Arm IK.L.*parents"):
        bpy.ops.marionette.bake_controls()
    assert len(bpy.data.actions) == n_actions and arm.animation_data.action.name == "Walk"
    # A closure whose branches share a driver bone is refused when it is built.
    row.bone_end = "Forearm.L"
    assert bpy.ops.marionette.control_add(kind="CLOSURE", create_target=False) == {"FINISHED"}
    loop = arm.marionette_controls.controls[1]
    loop.bone_start, loop.bone_end = "UpperArm.L", "Forearm.L"
    loop.second_start, loop.second_end = "Forearm.L", "Hand.L"
    loop.target_object = loop.second_object = row.target_object
    errors = live_preview.validation(arm)
    assert 0 not in errors and "share" in errors[1] and "Forearm.L" in errors[1]


def test_bake_controls_command_line(sample, tmp_path):
    bpy, arm = sample
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.45, -0.35, 1.25)
    target_name = target.name
    src = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(src), copy=True)
    out = tmp_path / "out.blend"
    run = subprocess.run(
        [sys.executable, "-m", "marionette", "bake-controls", str(src), "--object", "Sample", "-o", str(out), "--frames", "3", "12"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["action"] == "Walk_controls" and report["frames"] == [3.0, 12.0]
    assert report["controls"]["Arm IK.L"]["max_residual"] < 1e-6
    bpy.ops.wm.open_mainfile(filepath=str(out))
    baked = bpy.data.objects["Sample"]
    assert baked.animation_data.action.name == "Walk_controls"
    bpy.context.scene.frame_set(7)
    assert np.linalg.norm(_world_heads(baked, ["Hand.L"])[0] - np.array(bpy.data.objects[target_name].location)) < 1e-5
    missing = subprocess.run(
        [sys.executable, "-m", "marionette", "bake-controls", str(src), "--object", "Nobody", "-o", str(tmp_path / "no.blend")],
        capture_output=True, text=True, timeout=300,
    )
    assert missing.returncode == 1 and "Nobody" in missing.stderr
    assert not (tmp_path / "no.blend").exists()


class _Layout:
    """Stands in for a UILayout: every call returns another one; ``prop`` and ``prop_search``
    check that the property (and the searched collection) exist."""

    def __init__(self):
        self.labels = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if name == "label":
                self.labels.append(kwargs.get("text", ""))
            if name in ("prop", "prop_search"):
                data, prop = args[0], args[1]
                assert prop in data.bl_rna.properties, f"{type(data).__name__} has no property {prop!r}"
                if name == "prop_search":
                    assert args[3] in args[2].bl_rna.properties
            return self

        return call

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


def test_panels_draw_every_kind(sample):
    bpy, arm = sample
    from marionette.panels import controls_panel as cp
    from marionette.properties.control_settings import KIND_ITEMS

    context = bpy.context
    for kind, *_ in KIND_ITEMS:
        assert bpy.ops.marionette.control_add(kind=kind, create_target=False) == {"FINISHED"}
    arm.marionette_controls.live_preview = True
    context.scene.frame_set(3)
    settings = arm.marionette_controls
    for row in settings.controls:
        # The optional settings drawn too.
        row.use_cone_limit = row.use_hinge_limit = True
    for i in range(len(settings.controls)):
        settings.active_index = i
        for panel in (cp.VIEW3D_PT_marionette_controls, cp.VIEW3D_PT_marionette_control_settings, cp.VIEW3D_PT_marionette_control_status, cp.VIEW3D_PT_marionette_control_bake):
            assert panel.poll(context)
            fake = type("P", (), {"layout": _Layout()})()
            panel.draw(fake, context)
        layout = _Layout()
        cp.MARIONETTE_UL_controls.draw_item(None, context, layout, settings, settings.controls[i], 0, settings, "active_index", i)


# --- registration ----------------------------------------------------------------------------


def test_unregister_leaves_nothing_behind(blender):
    bpy = blender
    from marionette.operators import controls_register
    from marionette.panels import controls_panel
    from marionette.viewport import live_preview

    def ours():
        found = []
        for name in dir(bpy.app.handlers):
            handlers = getattr(bpy.app.handlers, name)
            if isinstance(handlers, list):
                found += [f"{name}:{h.__name__}" for h in handlers if getattr(h, "__module__", "") == live_preview.__name__]
        found += [n for n in ("MARIONETTE_OT_bake_controls", "MARIONETTE_OT_control_add", "MARIONETTE_UL_controls", "VIEW3D_PT_marionette_controls", "MarionetteControl") if hasattr(bpy.types, n)]
        if hasattr(bpy.types.Object, "marionette_controls"):
            found.append("Object.marionette_controls")
        return found

    assert ours() == []
    for _ in range(2):
        controls_register.register()
        try:
            controls_panel.register()
            try:
                assert len(ours()) >= 9
            finally:
                controls_panel.unregister()
        finally:
            controls_register.unregister()
        assert ours() == []
