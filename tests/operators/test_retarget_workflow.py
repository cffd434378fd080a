"""The Retarget workflow driven as a user drives it: pick the pair, auto-map, Retarget Clip.

Built from Marionette's sample humanoid (source) and Blender's own Rigify basic metarig (target,
an A-pose rig with other names, rolls and proportions). Each test measures: keys, the motion
(core measurements on what Blender evaluates), the source action byte for byte, undo.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.action_keys import curves_snapshot
from tests.helpers.sample_pair import sample_walk_onto_metarig

pytestmark = pytest.mark.bpy


@pytest.fixture
def pair(blender):
    """Source sample armature playing the sample walk, the Rigify metarig as target, the add-on
    registered, the pair picked in the sidebar settings."""
    bpy = blender
    import marionette

    marionette.register()
    try:
        source, action, target = sample_walk_onto_metarig(bpy, frames=36)
        target.location.x = 2.0
        s = bpy.context.scene.marionette
        s.source, s.target = source, target
        yield bpy, source, target, action
    finally:
        marionette.unregister()


def test_auto_map_fills_rows_with_confidence_and_reason(pair):
    bpy, source, target, _ = pair
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    rows = {r.slot: r for r in bpy.context.scene.marionette.mapping}
    assert rows["upper_arm.L"].source_bone == "UpperArm.L"
    assert rows["upper_arm.L"].target_bone == "upper_arm.L"
    assert rows["thigh.R"].target_bone == "thigh.R"
    assert all(0.0 < r.target_confidence <= 1.0 for r in rows.values() if r.target_bone)
    assert all(r.reason for r in rows.values())


def test_retarget_clip_bakes_a_new_action_that_plays_the_clip(pair):
    bpy, source, target, action = pair
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.core.retarget.geometric import source_placements

    before = curves_snapshot(action)
    n_actions = len(bpy.data.actions)
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    assert len(bpy.data.actions) == n_actions + 1
    new = target.animation_data.action
    assert new is not None and new != action
    assert target.animation_data.action_slot is not None
    # Only mapped bones are keyed.
    s = bpy.context.scene.marionette
    mapped = {r.target_bone for r in s.mapping if r.target_bone and r.source_bone}
    from marionette.bridge import compat

    keyed = {fc.group.name for fc in compat.action_fcurves(new, target.animation_data.action_slot)}
    assert keyed and keyed <= mapped | {"spine.001", "spine.002", "spine.003", "spine.004", "spine.005"}
    # The source action is unchanged, byte for byte, and still on the source.
    assert curves_snapshot(action) == before
    assert source.animation_data.action == action
    # What Blender now plays on the target follows the clip (measured by the core measurements
    # on Blender's own evaluation of the new action, not on the core's output).
    report = json.loads(s.last_report)
    assert report["mean_direction_error"] < 0.5
    from marionette.bridge.clip_read import clip_from_action
    from marionette.core.measure.figures import bone_direction_errors
    from marionette.core.retarget.geometric import bind
    from marionette.usecases.rigs import rig_input

    binding = bind(rig_input(source)[0], rig_input(target)[0])
    clip = clip_from_action(source, action).resample(24.0)
    played = evaluated_pose_matrices(target, np.arange(1, clip.frame_count + 1))
    errs = bone_direction_errors(binding, source_placements(binding, clip), played)
    # Plant Feet (on by default) bends thighs and shins to hold the feet; every other segment,
    # the feet included, follows the clip's directions.
    bent = {"thigh.L", "thigh.R", "shin.L", "shin.R"}
    assert max(float(v.max()) for s, v in errs.items() if s not in bent) < 1.0


def test_plant_feet_off_carries_every_direction_and_on_stops_the_slide(pair):
    bpy, source, target, action = pair
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.core.measure.figures import bone_direction_errors
    from marionette.core.retarget.geometric import bind, source_placements
    from marionette.usecases.rigs import rig_input

    s = bpy.context.scene.marionette
    binding = bind(rig_input(source)[0], rig_input(target)[0])
    clip = clip_from_action(source, action).resample(24.0)
    slides = {}
    for plant in (False, True):
        s.plant_feet = plant
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        played = evaluated_pose_matrices(target, np.arange(1, clip.frame_count + 1))
        errs = bone_direction_errors(binding, source_placements(binding, clip), played)
        worst = max(float(v.max()) for v in errs.values())
        assert worst < 1.0 if not plant else worst > 1.0  # the legs bend only when asked
        report = json.loads(s.last_report)
        slides[plant] = report["foot_slide"]
    # The metarig's legs are longer for its hip height than the sample's: unplanted, its feet
    # slide several times as far as the source's; planted, a fraction of that.
    for foot in ("foot.L", "foot.R"):
        assert slides[False][foot] > 3.0 * slides[False][f"{foot} source"]
        assert slides[True][foot] < 0.25 * slides[False][foot]


def test_second_retarget_keeps_the_first_and_undo_restores(pair):
    bpy, source, target, action = pair
    # Blender's UI pushes an undo step after each operator with the UNDO option; operators called
    # from Python in the bpy module do not, so the test pushes as the UI would.
    bpy.ops.ed.undo_push(message="before retarget")
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Retarget Clip")
    first = target.animation_data.action.name
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Retarget Clip")
    second = target.animation_data.action.name
    assert first != second and first in bpy.data.actions and second in bpy.data.actions
    assert bpy.ops.ed.undo() == {"FINISHED"}
    assert second not in bpy.data.actions
    assert bpy.data.objects["metarig"].animation_data.action.name == first
    assert bpy.ops.ed.undo() == {"FINISHED"}
    assert first not in bpy.data.actions
    restored = bpy.data.objects["metarig"]
    assert restored.animation_data is None or restored.animation_data.action is None
    assert "Walk" in bpy.data.actions  # the source's clip is untouched by all of this


def test_refuses_a_non_humanoid_target_and_changes_nothing(pair):
    bpy, source, target, action = pair
    bpy.ops.object.armature_add()
    stick = bpy.context.active_object
    bpy.context.scene.marionette.target = stick
    n_actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match="humanoid|missing"):
        bpy.ops.marionette.retarget_clip()
    assert len(bpy.data.actions) == n_actions
    assert stick.animation_data is None


def test_poll_explains_what_is_missing(pair):
    bpy, source, target, action = pair
    bpy.context.scene.marionette.target = None
    assert not bpy.ops.marionette.retarget_clip.poll()


def test_mapping_save_load_and_presets_round_trip(pair, tmp_path):
    bpy, source, target, action = pair
    s = bpy.context.scene.marionette
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    before = {r.slot: (r.source_bone, r.target_bone) for r in s.mapping}
    path = tmp_path / "metarig.json"
    assert bpy.ops.marionette.mapping_save(filepath=str(path), side="TARGET") == {"FINISHED"}
    # Break one row by hand, then load the saved mapping back: the row is restored.
    row = next(r for r in s.mapping if r.slot == "forearm.L")
    row.target_bone = "hand.L"
    assert bpy.ops.marionette.mapping_load(filepath=str(path), side="TARGET") == {"FINISHED"}
    assert {r.slot: (r.source_bone, r.target_bone) for r in s.mapping} == before
    # The shipped Rigify metarig preset names the metarig's bones: applying it changes nothing.
    assert bpy.ops.marionette.mapping_preset(preset="rigify_metarig", side="TARGET") == {"FINISHED"}
    after = {r.slot: r.target_bone for r in s.mapping}
    assert all(after[slot] == tb for slot, (_, tb) in before.items() if tb)


def test_a_loaded_mapping_naming_missing_bones_is_refused(pair, tmp_path):
    bpy, source, target, action = pair
    from marionette.core.mapping.bone_mapping import BoneMapping, MappedBone

    path = tmp_path / "wrong.json"
    BoneMapping({"hips": MappedBone("NoSuchBone", 1.0, "test")}).save(path)
    with pytest.raises(RuntimeError, match="NoSuchBone"):
        bpy.ops.marionette.mapping_load(filepath=str(path), side="TARGET")


def test_a_bone_given_to_two_slots_is_refused_with_both_named(pair):
    bpy, source, target, action = pair
    s = bpy.context.scene.marionette
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    next(r for r in s.mapping if r.slot == "forearm.L").target_bone = "hand.L"
    n_actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match=r"hand\.L.*forearm\.L|forearm\.L.*hand\.L"):
        bpy.ops.marionette.retarget_clip()
    assert len(bpy.data.actions) == n_actions


def test_bones_coloured_by_their_error(pair):
    bpy, source, target, action = pair
    s = bpy.context.scene.marionette
    s.color_bones = True
    s.plant_feet = False
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    coloured = {pb.name: tuple(pb.color.custom.normal) for pb in target.pose.bones if pb.color.palette == "CUSTOM"}
    assert {"upper_arm.L", "thigh.R", "spine"} <= set(coloured)
    # Exact retarget: every measured bone is green (red share ~ error / 5 degrees).
    assert all(r < 0.05 and g > 0.95 for r, g, _ in coloured.values())
    assert target.pose.bones["heel.02.L"].color.palette != "CUSTOM"  # not measured, left alone
    # Planted feet bend the legs away from the clip's directions: the colours say where.
    s.plant_feet = True
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    red = {pb.name: pb.color.custom.normal[0] for pb in target.pose.bones if pb.color.palette == "CUSTOM"}
    assert min(red["thigh.L"], red["thigh.R"]) > 0.05
    assert max(red["upper_arm.L"], red["spine"], red["foot.L"]) < 0.05


def test_the_method_column_is_saved_and_loaded_with_the_target_mapping(pair, tmp_path):
    bpy, source, target, action = pair
    s = bpy.context.scene.marionette
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    next(r for r in s.mapping if r.slot == "upper_arm.L").method = "REST_SPACE"
    path = tmp_path / "with_methods.json"
    assert bpy.ops.marionette.mapping_save(filepath=str(path), side="TARGET") == {"FINISHED"}
    assert json.loads(path.read_text())["methods"] == {"upper_arm.L": "REST_SPACE"}
    s.mapping.clear()
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    assert all(r.method == "GEOMETRIC" for r in s.mapping)
    assert bpy.ops.marionette.mapping_load(filepath=str(path), side="TARGET") == {"FINISHED"}
    assert {r.slot: r.method for r in s.mapping if r.method != "GEOMETRIC"} == {"upper_arm.L": "REST_SPACE"}


def test_file_jobs_never_close_an_interactive_session(blender):
    """retarget_files and friends start from an empty session: from an interactive Blender they
    are refused (the open file and its unsaved changes stay); from a command line they run."""
    from marionette.bridge import session
    from marionette.core.errors import MarionetteError

    blender.ops.object.armature_add()
    blender.context.active_object.name = "UnsavedWork"
    with pytest.raises(MarionetteError, match="command line"):
        session.fresh_session(interactive=True)
    assert "UnsavedWork" in blender.data.objects
    session.fresh_session()  # Blender as a module runs in the background: a job's own session
    assert "UnsavedWork" not in blender.data.objects


def test_hips_lowered_for_an_out_of_reach_stride_are_reported_as_blender_plays_them(pair):
    """Hips travelling 1.5 times as far as the metarig's legs step: planted, the hips come down
    where a held spot is out of reach. The drop the report gives (and the summary prints) is the
    one measured on what Blender plays, along the up axis only; held spots are all reached."""
    bpy, source, target, action = pair
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.summary import format_summary

    frames = np.arange(1, 37)
    hips, reports = {}, {}
    for plant in (False, True):
        outcome = retarget_action(
            source, action, target, scene_fps=24.0, name=f"stride{plant}",
            options=RetargetOptions(plant_feet=plant, horizontal_scale=1.5), measure_frames=10_000,
        )
        reports[plant] = outcome.report
        hips[plant] = evaluated_pose_matrices(target, frames)[:, outcome.binding.target.slots["hips"], :3, 3]
    binding = outcome.binding
    h, up = binding.target_hip_height, binding.target_canonical.body[:, 2]
    drop = reports[True]["planted_hip_drop"]
    assert drop["frames"] > 0 and drop["max"] > 0.005
    assert all(c["out_of_reach"] == 0 for c in reports[True]["planted_feet"].values())
    moved = hips[True] - hips[False]
    down = -(moved @ up)
    assert np.abs(moved + np.outer(down, up)).max() < 1e-4 * h
    assert abs(down.max() / h - drop["max"]) < 1e-4
    assert int((down > 1e-6 * h).sum()) <= drop["frames"]
    assert f"hips lowered by up to {100 * drop['max']:.1f} % of hip height on {drop['frames']} frames" in format_summary(reports[True])
    assert "hips lowered" not in format_summary(reports[False])


def test_the_quality_panel_shows_the_hips_lowered(pair):
    """Retarget Clip from the sidebar on a stride the metarig's legs cannot reach: the Quality
    panel lists the drop the report gives; with Plant Feet off, no such line."""
    bpy, source, target, action = pair
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_quality

    class Layout:
        def __init__(self):
            self.labels = []

        def column(self, **_kw):
            return self

        def label(self, text="", **_kw):
            self.labels.append(text)

    s = bpy.context.scene.marionette
    texts = {}
    s.auto_scale, s.horizontal_scale = False, 1.5
    for plant in (False, True):
        s.plant_feet = plant
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        layout = Layout()
        VIEW3D_PT_marionette_quality.draw(type("P", (), {"layout": layout})(), bpy.context)
        texts[plant] = layout.labels
    drop = json.loads(s.last_report)["hip_drop"]
    assert drop["frames"] > 0
    assert f"Hips lowered to reach held feet: up to {100 * drop['max']:.1f}% on {drop['frames']} frames" in texts[True]
    assert not any(t.startswith("Hips lowered") for t in texts[False])
