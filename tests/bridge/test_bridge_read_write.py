"""The bridge reading and writing poses on real Blender: reading changes nothing, constraints,
every rotation mode and F-curve evaluation agree with Blender, and written Actions keep their
layout, timing, inheritance and continuity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.formats.bvh import read_bvh
from marionette.core.rig.clip import Clip
from marionette.core.rig.rotations import quat_angle_between, quat_from_axis_angle, quat_normalize
from tests.helpers.bridge_rigs import TOL, _fk_world, _keys_of, _lengths, _points, _rig_height, _simple_clip, _small_rig
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


# --- reading ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_reading_changes_neither_action_nor_object(blender) -> None:
    from marionette.bridge import clip_read, compat, file_import

    loaded = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    obj = loaded.armatures[0]
    current, slot = compat.current_action(obj)
    other = [a for a in loaded.actions if a != current][0]
    scene = blender.context.scene
    scene.frame_set(7)
    pose = [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_quaternion) for pb in obj.pose.bones]
    keys = _keys_of(other, obj)
    clip_read.clip_from_action(obj, other)
    clip_read.clip_from_evaluation(obj, other)
    assert compat.current_action(obj) == (current, slot)
    assert scene.frame_current == 7
    assert [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_quaternion) for pb in obj.pose.bones] == pose
    assert all(np.array_equal(a, b) for a, b in zip(keys, _keys_of(other, obj), strict=True))
    assert obj.animation_data.use_nla is True


@pytest.mark.slow
def test_a_constraint_switches_to_evaluation_and_is_honoured(blender) -> None:
    from marionette.bridge import clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/02_02_daz.bvh")).armatures[0]
    action = obj.animation_data.action
    c = obj.pose.bones["lForeArm"].constraints.new("LIMIT_ROTATION")
    c.use_limit_x = c.use_limit_y = c.use_limit_z = True  # locks the forearm at rest
    assert any("LIMIT_ROTATION" in r for r in clip_read.needs_evaluation(obj, action))
    frames = np.arange(1, 120, dtype=float)
    clip = clip_read.clip_from_action(obj, action, frames)
    skeleton = skeleton_read.skeleton_from_armature(obj)
    lengths = _lengths(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    height = _rig_height(obj, skeleton)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height
    # The constraint matters: the keys alone put the hand elsewhere.
    c.mute = True
    keys_only = clip_read.clip_from_action(obj, action, frames)
    assert np.abs(_points(_fk_world(skeleton, keys_only), lengths) - ref).max() > 100 * TOL * height


def test_fcurve_evaluation_matches_blender(blender) -> None:
    """Constant, linear and Bezier keys (handles too long for their segment included), easing,
    linear extrapolation and a modifier, sampled off and on the keys and outside the range."""
    from marionette.bridge import fcurve_eval

    action = blender.data.actions.new("Curves")
    slot = action.slots.new(id_type="OBJECT", name="X")
    from marionette.bridge import compat

    bag = compat.channelbag(action, slot, create=True)
    rng = np.random.default_rng(5)
    curves = []
    kinds = ["BEZIER", "LINEAR", "CONSTANT", "MIXED", "LONG_HANDLES", "SINE", "EXTRAPOLATED", "MODIFIER", "SINGLE"]
    for i, kind in enumerate(kinds):
        fc = bag.fcurves.new("location", index=i % 3) if i < 3 else bag.fcurves.new(f'["p{i}"]', index=0)
        n = 1 if kind == "SINGLE" else 9
        xs = np.cumsum(rng.uniform(0.7, 4.0, size=n)) - 3.0
        for x in xs:
            fc.keyframe_points.insert(float(x), float(rng.normal()), options={"FAST"})
        fc.update()
        for j, kp in enumerate(fc.keyframe_points):
            kp.interpolation = {
                "MIXED": ("CONSTANT", "LINEAR", "BEZIER")[j % 3],
                "SINE": "SINE",
                "LONG_HANDLES": "BEZIER",
            }.get(kind, kind if kind in ("BEZIER", "LINEAR", "CONSTANT") else "BEZIER")
            if kind == "LONG_HANDLES":
                kp.handle_left_type = kp.handle_right_type = "FREE"
                kp.handle_left = (kp.co[0] - 5.0, kp.co[1] + 2.0)
                kp.handle_right = (kp.co[0] + 6.0, kp.co[1] - 1.5)
        if kind == "EXTRAPOLATED":
            fc.extrapolation = "LINEAR"
        if kind == "MODIFIER":
            fc.modifiers.new("NOISE")
        curves.append(fc)
    frames = np.linspace(-6.0, 45.0, 1021)
    mine = fcurve_eval.evaluate_fcurves(curves, frames)
    theirs = np.array([[fc.evaluate(float(f)) for f in frames] for fc in curves])
    assert np.abs(mine - theirs).max() < 1e-5
    # Sampled on some of one curve's keys (a result read back at a few of the frames keyed):
    # that curve is read off its keys, the others evaluated; all as Blender plays them.
    for fc in curves:
        on_keys = np.array([kp.co[0] for kp in fc.keyframe_points])[::2].astype(np.float64)
        mine = fcurve_eval.evaluate_fcurves(curves, on_keys)
        theirs = np.array([[c.evaluate(float(f)) for f in on_keys] for c in curves])
        assert np.abs(mine - theirs).max() < 1e-5


def test_every_rotation_mode_reads_and_writes(blender) -> None:
    """Bones in each Euler order, axis-angle and quaternion, with Bezier keys, read in bulk and
    written back in their own modes."""
    from marionette.bridge import action_write, clip_read, compat, evaluated_pose, skeleton_read

    modes = ["QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE", "QUATERNION"]
    obj, _ = _small_rig(blender, bones=len(modes))
    rng = np.random.default_rng(9)
    for pb, mode in zip(obj.pose.bones, modes, strict=True):
        pb.rotation_mode = mode
        for f in (1, 5, 9, 14):
            if mode == "QUATERNION":
                pb.rotation_quaternion = quat_normalize(rng.normal(size=4))
                pb.keyframe_insert("rotation_quaternion", frame=f)
            elif mode == "AXIS_ANGLE":
                pb.rotation_axis_angle = (rng.uniform(-3, 3), *rng.normal(size=3))
                pb.keyframe_insert("rotation_axis_angle", frame=f)
            else:
                pb.rotation_euler = rng.uniform(-2.5, 2.5, size=3)
                pb.keyframe_insert("rotation_euler", frame=f)
            pb.location = rng.normal(size=3) * 0.1
            pb.scale = rng.uniform(0.8, 1.2, size=3)
            pb.keyframe_insert("location", frame=f)
            pb.keyframe_insert("scale", frame=f)
    action = obj.animation_data.action
    skeleton = skeleton_read.skeleton_from_armature(obj)
    lengths = _lengths(obj, skeleton)
    height = _rig_height(obj, skeleton)
    frames = np.arange(1, 15, dtype=float)
    assert clip_read.needs_evaluation(obj, action) == []
    clip = clip_read.clip_from_action(obj, action)
    assert clip.frame_count == 14 and clip.scales is not None
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height

    copy = obj.copy()
    blender.context.scene.collection.objects.link(copy)
    written = action_write.write_action(copy, clip, "Modes", fps=clip.fps)
    got = _points(evaluated_pose.evaluated_world_matrices(copy, frames, skeleton), lengths)
    assert np.abs(got - ref).max() <= TOL * height
    props = {}
    for fc in compat.action_fcurves(written, written.slots[0]):
        props.setdefault(fc.group.name, set()).add(fc.data_path.rsplit(".", 1)[1])
    for pb, mode in zip(obj.pose.bones, modes, strict=True):
        want = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
        assert want in props[pb.name] and "scale" in props[pb.name]
        assert not ({"rotation_quaternion", "rotation_axis_angle", "rotation_euler"} - {want}) & props[pb.name]


# --- writing ---------------------------------------------------------------------------------


def test_written_action_layout(blender) -> None:
    from marionette.bridge import action_write, compat

    obj, skeleton = _small_rig(blender)
    base = _simple_clip(skeleton, frames=30)
    # Flip every other quaternion's sign: the same rotations, stored discontinuously.
    rot = base.rotations.copy()
    rot[1::2] *= -1.0
    coverage = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    clip = Clip(base.names, base.times, base.fps, rot, base.translations, coverage=coverage, name="x", first_frame=1.0)
    first = action_write.write_action(obj, clip, "Take")
    second = action_write.write_action(obj, clip, "Take")
    assert (first.name, second.name) == ("Take", "Take.001")
    # The object's previous action would have had no user left: it is kept with a fake user.
    assert first.use_fake_user and obj.animation_data.action == second
    assert obj.animation_data.action_slot == second.slots[0] and second.slots[0].identifier == "OB" + obj.name
    curves = compat.action_fcurves(second, second.slots[0])
    groups = {fc.group.name for fc in curves}
    assert groups == {"b0", "b1", "b3", "b4"}  # b2 has no coverage
    assert {fc.data_path for fc in curves if fc.data_path.endswith("location")} == {'pose.bones["b0"].location'}
    assert not any(fc.data_path.endswith("scale") for fc in curves)  # the clip has no scales
    assert all(fc.keyframe_points[0].interpolation == "LINEAR" and len(fc.keyframe_points) == 30 for fc in curves)
    assert second["marionette_fps"] == blender.context.scene.render.fps
    # Every curve (however it is made) has the settings of one made key by key, with no helper
    # curve left behind.
    scratch = blender.data.actions.new("scratch")
    bag = compat.channelbag(scratch, compat.new_action_slot(scratch, obj), create=True)
    ref = compat.new_fcurve(bag, 'pose.bones["b0"].location', 0, "b0")
    ref.keyframe_points.add(30)
    ref.keyframe_points.foreach_set("co", np.stack([np.arange(1.0, 31.0), np.zeros(30)], axis=-1).ravel())
    for kp in ref.keyframe_points:
        kp.interpolation = "LINEAR"
    curve_keys = ("extrapolation", "color_mode", "auto_smoothing", "mute", "hide", "lock", "select")
    key_keys = ("interpolation", "easing", "handle_left_type", "handle_right_type", "type", "select_control_point")
    want = [getattr(ref, k) for k in curve_keys], [[getattr(kp, k) for k in key_keys] for kp in ref.keyframe_points]
    for fc in curves:
        got = [getattr(fc, k) for k in curve_keys], [[getattr(kp, k) for k in key_keys] for kp in fc.keyframe_points]
        assert got == want, fc.data_path
        assert fc.group is not None and fc.data_path.startswith(f'pose.bones["{fc.group.name}"].')
    assert len(curves) == len({(fc.data_path, fc.array_index) for fc in curves})
    blender.data.actions.remove(scratch)
    # Quaternion keys were made continuous: consecutive keys in one hemisphere.
    for bone in ("b0", "b1", "b3", "b4"):
        q = np.stack(
            [
                np.array([kp.co[1] for kp in fc.keyframe_points])
                for fc in curves
                if fc.group.name == bone and "rotation_quaternion" in fc.data_path
            ],
            axis=-1,
        )
        assert np.all(np.sum(q[1:] * q[:-1], axis=-1) > 0.0)
    # replace=True takes the name and the users of the old action, which is removed.
    third = action_write.write_action(obj, clip, "Take.001", replace=True)
    assert third.name == "Take.001" and obj.animation_data.action == third
    assert (
        blender.data.actions.get("Take.001") == third
        and len([a for a in blender.data.actions if a.name.startswith("Take")]) == 2
    )


@pytest.mark.slow
def test_writing_keeps_source_timing_on_the_scene_rate(blender) -> None:
    """A 120 fps clip written with the default rate lands on the 24 fps scene five keys per
    scene frame from frame 1 (frame 1 is time zero at any rate), and plays the same motion at
    the same times."""
    from marionette.bridge import action_write, clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/12_03_motionbuilder.bvh")).armatures[0]
    action = obj.animation_data.action
    clip = clip_read.clip_from_action(obj, action, np.arange(1, 121, dtype=float))
    skeleton = skeleton_read.skeleton_from_armature(obj)
    copy = obj.copy()
    blender.context.scene.collection.objects.link(copy)
    written = action_write.write_action(copy, clip, "At 24")
    assert written["marionette_fps"] == 24.0
    assert tuple(written.frame_range) == pytest.approx((1.0, 1.0 + 119 / 5), abs=1e-5)
    ref = evaluated_pose.evaluated_world_positions(obj, clip.frame_numbers(), skeleton)
    got = evaluated_pose.evaluated_world_positions(copy, clip.frame_numbers(24.0), skeleton)
    assert np.abs(got - ref).max() <= TOL * _rig_height(obj, skeleton)


def test_bones_that_do_not_fully_inherit(blender) -> None:
    """Inherit Rotation off, Inherit Scale none, Local Location off: the writer converts the
    clip's (fully inheriting) locals so Blender places the bones where core FK does, and the
    reader goes through evaluation for such rigs."""
    from marionette.bridge import action_write, clip_read, evaluated_pose

    obj, skeleton = _small_rig(blender, bones=6)
    clip = _simple_clip(skeleton, frames=10)
    scales = np.ones((10, 6, 3))
    scales[:, 1] = np.linspace(1.0, 1.5, 10)[:, None]
    clip = Clip(
        clip.names, clip.times, clip.fps, clip.rotations, clip.translations + 0.05, scales=scales, name="inherit"
    )
    bones = obj.data.bones
    bones["b2"].use_inherit_rotation = False
    bones["b3"].inherit_scale = "NONE"
    bones["b4"].use_local_location = False
    assert len(clip_read.needs_evaluation(obj)) == 3
    action_write.write_action(obj, clip, "Inherit", fps=24.0)
    frames = clip.frame_numbers()
    lengths = _lengths(obj, skeleton)
    height = _rig_height(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height
    back = clip_read.clip_from_action(obj, obj.animation_data.action)
    assert np.abs(_points(_fk_world(skeleton, back), lengths) - ref).max() <= TOL * height


@pytest.mark.slow
def test_scaled_and_rotated_parent_is_honoured(blender) -> None:
    from marionette.bridge import clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/02_02_daz.bvh")).armatures[0]
    parent = blender.data.objects.new("Scaler", None)
    blender.context.scene.collection.objects.link(parent)
    parent.scale = (100.0, 100.0, 100.0)
    parent.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    obj.parent = parent
    skeleton = skeleton_read.skeleton_from_armature(obj)
    assert np.allclose(skeleton.placement[:3, :3], 100.0 * np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]]), atol=1e-3)
    frames = np.arange(1, 100, dtype=float)
    clip = clip_read.clip_from_action(obj, obj.animation_data.action, frames)
    lengths = _lengths(obj, skeleton)  # the world Y axis already carries the parent's scale
    height = _rig_height(obj, skeleton)
    assert height > 10_000.0  # the parent's x100 counts
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height


@pytest.mark.slow
def test_world_to_local_to_world_on_a_real_rig(blender) -> None:
    from marionette.bridge import file_import, skeleton_read

    obj = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx")).armatures[0]
    skeleton = skeleton_read.skeleton_from_armature(obj)
    rng = np.random.default_rng(1)
    t, b = 50, len(skeleton)
    rot = quat_normalize(rng.normal(size=(t, b, 4)))
    tr = rng.normal(size=(t, b, 3))
    local = skeleton.local_transforms(rot, tr)
    world = skeleton.forward_kinematics_from_locals(local)
    back = skeleton.local_from_world(world)
    assert np.abs(back - local).max() <= 1e-9
    assert np.abs(skeleton.forward_kinematics_from_locals(back) - world).max() <= 1e-9


def test_create_armature_reproduces_a_skeleton(blender) -> None:
    from marionette.bridge import action_write, evaluated_pose, skeleton_read

    bvh = read_bvh(shared_file("bvh/cmu/02_02_daz.bvh"))
    skeleton = bvh.skeleton()
    obj = action_write.create_armature(skeleton, "FromCore")
    back = skeleton_read.skeleton_from_armature(obj)
    order = [back.index(n) for n in skeleton.names]
    assert sorted(back.names) == sorted(skeleton.names)
    assert [back.names[p] if p >= 0 else None for p in back.parents[order]] == [
        skeleton.names[p] if p >= 0 else None for p in skeleton.parents
    ]
    size = float(np.ptp(bvh.rest_positions(), axis=0).max())
    assert np.abs(back.rest_placements()[order] - skeleton.rest_placements()).max() <= 1e-5 * size
    assert all(b.length > 0.0 for b in obj.data.bones)
    # The core clip of the file, written onto the new armature, moves it as core FK says.
    clip = bvh.clip()
    action_write.write_action(obj, clip, "daz", fps=clip.fps)
    frames = clip.frame_numbers()[:60]
    got = evaluated_pose.evaluated_world_positions(obj, frames, back)[:, order]
    want = skeleton.forward_kinematics(clip.rotations[:60], clip.translations[:60])[..., :3, 3]
    assert np.abs(got - want).max() <= TOL * size


def test_euler_keys_stay_continuous_through_full_turns(blender) -> None:
    from marionette.bridge import action_write, clip_read, compat

    obj, skeleton = _small_rig(blender, bones=3)
    obj.pose.bones["b1"].rotation_mode = "XYZ"
    frames = 41
    angle = np.linspace(0.0, 4.0 * np.pi, frames)  # two full turns about the bone's Y axis
    rot = np.zeros((frames, 3, 4))
    rot[..., 0] = 1.0
    rot[:, 1] = quat_from_axis_angle(np.array([0.2, 1.0, 0.1]), angle)
    clip = Clip.from_frames(skeleton.names, rot, np.zeros((frames, 3, 3)), fps=24.0)
    action = action_write.write_action(obj, clip, "Turns", fps=24.0)
    euler = np.stack(
        [
            np.array([kp.co[1] for kp in fc.keyframe_points])
            for fc in compat.action_fcurves(action, action.slots[0])
            if fc.data_path == 'pose.bones["b1"].rotation_euler'
        ],
        axis=-1,
    )
    assert euler.shape == (frames, 3)
    # Near gimbal lock a component may move fast, but never by the 2-pi of a wrap.
    assert np.abs(np.diff(euler, axis=0)).max() < 2.0
    assert np.ptp(euler, axis=0).max() > 3.0 * np.pi  # the turns accumulate instead of wrapping
    back = clip_read.clip_from_action(obj, action)
    assert np.degrees(quat_angle_between(back.rotations, clip.rotations).max()) < 1e-3


def test_evaluating_an_object_as_it_stands_includes_nla(blender) -> None:
    from marionette.bridge import action_write, clip_read, evaluated_pose

    obj, skeleton = _small_rig(blender)
    clip = _simple_clip(skeleton, frames=20)
    action = action_write.write_action(obj, clip, "Stashed", fps=24.0)
    track = obj.animation_data.nla_tracks.new()
    track.strips.new("Stashed", 11, action)  # plays the action ten frames later
    obj.animation_data.action = None
    frames = np.arange(11, 31, dtype=float)
    as_is = clip_read.clip_from_evaluation(obj, None, frames)
    lengths = _lengths(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, as_is), lengths) - ref).max() <= TOL * _rig_height(obj, skeleton)
    # The NLA strip shifts time: frame 11 of the scene is the clip's first frame.
    want = _points(_fk_world(skeleton, clip), lengths)
    assert np.abs(ref - want).max() <= TOL * _rig_height(obj, skeleton)
    assert obj.animation_data.action is None and len(obj.animation_data.nla_tracks) == 1


def test_create_armature_takes_bone_lengths_from_tails(blender) -> None:
    from marionette.bridge import action_write, skeleton_read

    _, skeleton = _small_rig(blender, "First", bones=4)
    heads = skeleton.rest_placements()[:, :3, 3]
    tails = heads + np.array([0.3, 0.0, 0.4])  # only the distance (0.5) counts
    obj = action_write.create_armature(skeleton, "WithTails", tails=tails)
    assert [round(b.length, 5) for b in obj.data.bones] == [0.5] * 4
    back = skeleton_read.skeleton_from_armature(obj)
    assert np.abs(back.rest_placements() - skeleton.rest_placements()).max() < 1e-6


def test_replace_existing_action_never_replaces_the_clip_another_object_plays(blender):
    """Retarget Clip with Replace Existing Action names the new action after the clip, which is
    the source's own action's name: the source keeps its clip, the new action gets its own name,
    and a second run replaces only that earlier result."""
    bpy = blender
    from marionette.usecases.retarget import retarget_action
    from tests.helpers.sample_pair import sample_walk_onto_metarig

    source, action, target = sample_walk_onto_metarig(bpy, frames=12)
    keys = [tuple(k.co) for fc in action.layers[0].strips[0].channelbags[0].fcurves for k in fc.keyframe_points]
    first = retarget_action(source, action, target, scene_fps=24.0, name="Walk", replace_existing=True)
    assert source.animation_data.action == action and action.name == "Walk"
    assert first.action != action and first.action.name != "Walk"
    assert [tuple(k.co) for fc in action.layers[0].strips[0].channelbags[0].fcurves for k in fc.keyframe_points] == keys
    result = first.action.name
    again = retarget_action(source, action, target, scene_fps=24.0, name=result, replace_existing=True)
    assert again.action.name == result and sorted(a.name for a in bpy.data.actions) == sorted(["Walk", result])
    assert source.animation_data.action == action and target.animation_data.action == again.action
