"""The summary judges what Blender plays, not the keys written (docs/pipeline.md#measurement).

A character saved in Rest Position plays nothing, whatever its action holds: the retarget
switches it to Pose Position and says so. Whatever else hides or overrides the new keys (a
constraint, a zero action influence, a solo NLA track) is named, and the figures, measured on the
evaluated pose, show it instead of a perfect 0.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.data import shared_file
from tests.helpers.sample_pair import sample_walk_onto_metarig

pytestmark = pytest.mark.bpy

CLIP = "bvh/cmu/02_02_daz.bvh"
VRM = "blend/vrm_addon_apose_rest.blend"


def _run(*args: str):
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=300)


def _turned(matrices, bones, first, later):
    """Angle (deg) each bone has turned between two frames of ``(T, B, 4, 4)`` placements."""
    r = matrices[:, bones, :3, :3] / np.linalg.norm(matrices[:, bones, :3, :3], axis=-2, keepdims=True)
    d = r[later] @ np.swapaxes(r[first], -1, -2)
    return np.degrees(np.arccos(np.clip((np.trace(d, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))


def _rest_position_copy(bpy, tmp_path):
    """The shared VRM character saved with its armature in Rest Position."""
    bpy.ops.wm.open_mainfile(filepath=str(shared_file(VRM)))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    arm.data.pose_position = "REST"
    path = tmp_path / "vrm_rest.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


@pytest.mark.slow
def test_command_line_switches_a_rest_position_character_to_pose_position_and_it_plays(blender, tmp_path):
    bpy = blender
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.bridge.file_import import load_file
    from marionette.core.retarget.geometric import bind
    from marionette.usecases.rigs import rig_input

    target = _rest_position_copy(bpy, tmp_path)
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    res = _run("retarget", str(shared_file(CLIP)), str(target), "-o", str(out), "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "switched it to Pose Position" in res.stdout
    data = json.loads(report.read_text())
    assert data["switched_to_pose_position"] is True
    assert any("Rest Position" in n for n in data["notes"])
    assert not any("Rest Position" in w for w in data.get("warnings", []))
    assert data["summary"]["mean_limb_direction_error"] < 3.0

    # OUT.blend, reopened, plays the new action: from the first frame to a middle one each limb
    # bone of the target turns as far as the source's (8-93 deg; a statue would not turn at all).
    bpy.ops.wm.open_mainfile(filepath=str(out))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    assert arm.data.pose_position == "POSE"
    action = arm.animation_data.action
    first, last = (int(x) for x in action.frame_range)
    mid = (first + last) // 2
    played = evaluated_pose_matrices(arm, [first, mid])
    loaded = load_file(shared_file(CLIP))
    source = loaded.armatures[0]
    binding = bind(rig_input(source)[0], rig_input(arm)[0])
    clip = clip_from_action(source, loaded.actions[0]).resample(24.0)
    src_world = binding.source.skeleton.forward_kinematics(clip.rotations, clip.translations)
    slots = ["upper_arm.L", "upper_arm.R", "forearm.L", "forearm.R", "thigh.L", "thigh.R", "shin.L", "shin.R"]
    t_bones = [binding.target.slots[s] for s in slots]
    s_bones = [binding.source.slots[s] for s in slots]
    k = mid - first
    tgt_turn = _turned(played, t_bones, 0, 1)
    src_turn = _turned(src_world[[0, k]], s_bones, 0, 1)
    assert src_turn.mean() > 10.0  # the walk moves the limbs by then
    assert np.abs(tgt_turn - src_turn).max() < 3.0, (tgt_turn, src_turn)

    # measure judges the file as it plays: as saved, close to the source; saved again in Rest
    # Position, far from it, with the reason named.
    measured = _run("measure", str(shared_file(CLIP)), str(out))
    assert measured.returncode == 0, measured.stderr[-2000:]
    good = json.loads(measured.stdout)
    assert good["summary"]["mean_limb_direction_error"] < 3.0 and not good.get("warnings")
    arm.data.pose_position = "REST"
    statue = tmp_path / "statue.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(statue), copy=True)
    measured = _run("measure", str(shared_file(CLIP)), str(statue))
    assert measured.returncode == 0, measured.stderr[-2000:]
    bad = json.loads(measured.stdout)
    assert any("Rest Position" in w for w in bad["warnings"])
    assert bad["summary"]["mean_limb_direction_error"] > 5.0


@pytest.mark.slow
def test_bake_pack_switches_a_rest_position_character_and_its_clips_play(blender, tmp_path):
    bpy = blender
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices

    target = _rest_position_copy(bpy, tmp_path)
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "walk.bvh").write_bytes(shared_file(CLIP).read_bytes())
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    res = _run("bake-pack", str(pack), str(target), "-o", str(out), "--report", str(report), "--jobs", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "switched it to Pose Position" in res.stdout
    assert any("Rest Position" in n for n in json.loads(report.read_text())["notes"])

    # The saved character plays the baked clip: its thighs turn between two frames of it.
    bpy.ops.wm.open_mainfile(filepath=str(out))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    assert arm.data.pose_position == "POSE"
    action = next(a for a in bpy.data.actions if a.name.endswith("walk"))
    arm.animation_data_create().action = action
    first, last = (int(x) for x in action.frame_range)
    played = evaluated_pose_matrices(arm, [first, (first + last) // 2])
    thighs = [arm.pose.bones.find(n) for n in ("upper_leg.L", "upper_leg.R")]
    assert min(thighs) >= 0
    assert _turned(played, thighs, 0, 1).max() > 10.0


@pytest.fixture
def vrm_pair(blender):
    """The CMU walk and the shared VRM character (in Pose Position) in one scene."""
    bpy = blender
    from marionette.bridge.file_import import load_file

    bpy.context.scene.render.fps = 24
    target = load_file(shared_file(VRM)).armatures[0]
    target.data.pose_position = "POSE"
    loaded = load_file(shared_file(CLIP))
    return bpy, loaded.armatures[0], loaded.actions[0], target


def _retarget(source, action, target, control_rig="fk"):
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.summary import format_summary

    outcome = retarget_action(
        source, action, target, scene_fps=24.0, name="walk", options=RetargetOptions(plant_feet=False), control_rig=control_rig
    )
    return outcome, format_summary(outcome.report)


def test_a_constraint_or_a_driver_on_a_mapped_bone_is_named_and_its_error_measured(vrm_pair):
    bpy, source, action, target = vrm_pair
    clean, _ = _retarget(source, action, target)
    assert clean.report["summary"]["max_direction_error"] < 1.0
    assert not clean.report.get("warnings")

    bone = clean.binding.target.skeleton.names[clean.binding.target.slots["forearm.L"]]
    holder = bpy.data.objects.new("Holder", None)
    bpy.context.scene.collection.objects.link(holder)
    c = target.pose.bones[bone].constraints.new("COPY_ROTATION")
    c.target, c.influence = holder, 1.0
    # By default a bone held by something no control moves is refused, named, and nothing is written.
    from marionette.core.errors import RigError

    actions = set(bpy.data.actions)
    with pytest.raises(RigError, match=rf"'{bone}' \(Copy Rotation 'Copy Rotation'\)"):
        _retarget(source, action, target)
    assert set(bpy.data.actions) == actions
    # Keyed as the user asks (Control Rig off): the keys are written, and the summary says what plays.
    held, text = _retarget(source, action, target, control_rig="off")
    warnings = held.report["warnings"]
    assert any(bone in w and "Copy Rotation" in w for w in warnings), warnings
    assert f"warning: bone constraints override the keys of bones {bone!r}" in text
    # The forearm held by the constraint is far from the clip; the keys alone would say 0.
    err = held.report["direction_error_deg"]
    assert err["forearm.L"]["mean"] > 10.0
    assert err["forearm.R"]["mean"] < 1.0
    assert held.report["summary"]["max_direction_error"] > 10.0

    # A driver (a plain expression) on the other forearm's rotation: named, and measured.
    target.pose.bones[bone].constraints.remove(c)
    other = clean.binding.target.skeleton.names[clean.binding.target.slots["forearm.R"]]
    mode = target.pose.bones[other].rotation_mode
    path = "rotation_quaternion" if mode == "QUATERNION" else "rotation_euler"
    fc = target.pose.bones[other].driver_add(path, 1)
    fc.driver.type, fc.driver.expression = "SCRIPTED", "0.9"
    with pytest.raises(RigError, match=rf"'{other}' \(drivers set its"):
        _retarget(source, action, target)
    driven, text = _retarget(source, action, target, control_rig="off")
    assert f"warning: drivers set the transforms of bones {other!r}" in text, driven.report.get("warnings")
    assert driven.report["direction_error_deg"]["forearm.R"]["mean"] > 10.0
    assert driven.report["direction_error_deg"]["forearm.L"]["mean"] < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("hide", ["zero influence", "solo NLA track"])
def test_an_action_hidden_by_the_animation_settings_is_named_and_not_scored_zero(vrm_pair, hide):
    bpy, source, action, target = vrm_pair
    import dataclasses

    from marionette.bridge.action_write import write_action
    from marionette.bridge.clip_read import clip_from_action

    # The character holds a still pose of its own in an NLA track (as imported glTF clips come).
    walk = clip_from_action(target, _retarget(source, action, target)[0].action)
    n = walk.frame_count
    still = dataclasses.replace(walk, rotations=np.repeat(walk.rotations[:1], n, 0), translations=np.repeat(walk.translations[:1], n, 0))
    pose = write_action(target, still, "still")
    ad = target.animation_data
    track = ad.nla_tracks.new()
    track.name = "Still"
    track.strips.new("still", 1, pose)
    outcome, _ = _retarget(source, action, target)
    assert not outcome.report.get("warnings")  # the new action replaces it on every bone it keys
    assert outcome.report["summary"]["mean_limb_direction_error"] < 1.0
    if hide == "zero influence":
        ad.action_influence = 0.0
    else:
        track.is_solo = True
    outcome, text = _retarget(source, action, target)
    assert target.animation_data.action == outcome.action
    expected = "influence 0" if hide == "zero influence" else "'Still' is solo"
    assert any(expected in w for w in outcome.report["warnings"]), outcome.report["warnings"]
    assert expected in text
    assert outcome.report["summary"]["mean_limb_direction_error"] > 5.0


def test_retarget_clip_switches_rest_position_in_its_one_undo_step(blender, capfd):
    bpy = blender
    import marionette

    marionette.register()
    try:
        scene = bpy.context.scene
        source, _walk, target = sample_walk_onto_metarig(bpy, frames=36)
        target.data.pose_position = "REST"
        s = scene.marionette
        s.source, s.target = source, target
        n_actions = len(bpy.data.actions)
        bpy.ops.ed.undo_push(message="before retarget")
        capfd.readouterr()
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        bpy.ops.ed.undo_push(message="Retarget Clip")
        said = capfd.readouterr()
        assert "switched it to Pose Position" in said.out + said.err
        assert target.data.pose_position == "POSE"
        report = json.loads(s.last_report)
        assert any("Pose Position" in n for n in report["notes"]) and not report["warnings"]
        assert report["mean_direction_error"] < 1.0  # measured on what now plays
        name, target_name = target.animation_data.action.name, target.name
        assert bpy.ops.ed.undo() == {"FINISHED"}
        restored = bpy.data.objects[target_name]
        assert restored.data.pose_position == "REST"
        assert name not in bpy.data.actions and len(bpy.data.actions) == n_actions
    finally:
        marionette.unregister()


def test_keys_stand_for_the_played_pose_only_where_blender_plays_them(blender):
    """Where nothing but the action shapes the pose, the summary reads the keys in bulk and checks
    them against Blender on a few frames: they equal Blender's evaluation at every frame. Where
    something no setting names changes the pose (here the armature's Pose Position, keyed to Rest
    Position from frame 24 on), the check sees it: every frame is evaluated, a warning says so and
    the figures show the statue."""
    bpy = blender
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.bridge.played_pose import played_placements
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.rigs import rig_input

    source, walk, target = sample_walk_onto_metarig(bpy, frames=48)
    outcome = retarget_action(source, walk, target, scene_fps=24.0, options=RetargetOptions(plant_feet=False))
    assert not outcome.report.get("warnings") and outcome.report["summary"]["max_direction_error"] < 0.1
    skeleton = rig_input(target)[0].skeleton
    frames = np.arange(1.0, 49.0)
    placements, warnings = played_placements(target, outcome.action, frames, skeleton)
    assert warnings == []
    assert np.abs(placements - evaluated_pose_matrices(target, frames, skeleton)).max() < 1e-4

    target.data.pose_position = "POSE"
    target.data.keyframe_insert("pose_position", frame=1)
    target.data.pose_position = "REST"
    target.data.keyframe_insert("pose_position", frame=24)
    bpy.context.scene.frame_set(1)
    assert target.data.pose_position == "POSE"
    statue = retarget_action(source, walk, target, scene_fps=24.0, options=RetargetOptions(plant_feet=False))
    assert any("away from the keys written" in w for w in statue.report["warnings"]), statue.report.get("warnings")
    assert statue.report["summary"]["max_direction_error"] > 10.0


def test_live_controls_on_the_target_are_named_and_measured(blender):
    """A Two-Bone IK control running live on the target's left arm holds the hand on a still
    empty: the warning names the control, and the arm's figures show it."""
    bpy = blender
    import marionette
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action

    marionette.register()
    try:
        source, walk, target = sample_walk_onto_metarig(bpy, frames=48)
        bpy.ops.object.empty_add(location=(0.6, -0.3, 1.0))
        empty = bpy.context.active_object
        bpy.context.view_layer.objects.active = target
        assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=False) == {"FINISHED"}
        row = target.marionette_controls.controls[-1]
        row.target_object = empty
        target.marionette_controls.live_preview = True
        outcome = retarget_action(source, walk, target, scene_fps=24.0, options=RetargetOptions(plant_feet=False))
        warnings = outcome.report["warnings"]
        assert any("Marionette controls" in w and row.name in w for w in warnings), warnings
        err = outcome.report["direction_error_deg"]
        side = row.bone_start.rsplit(".", 1)[-1]
        assert max(err[f"upper_arm.{side}"]["mean"], err[f"forearm.{side}"]["mean"]) > 5.0, err
        other = "R" if side == "L" else "L"
        assert err[f"forearm.{other}"]["mean"] < 0.5
    finally:
        marionette.unregister()
