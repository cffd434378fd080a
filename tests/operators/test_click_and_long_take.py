"""Retarget Clip as clicked (its quality summary measured after it returns) and the long-take path
of the ``retarget`` command (a BVH read without Blender, converted a piece at a time)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.data import shared_file
from tests.helpers.sample_pair import sample_walk_onto_metarig

pytestmark = pytest.mark.bpy

CMU = "bvh/cmu/12_03_motionbuilder.bvh"


@pytest.fixture
def pair(blender):
    """The sample walk on the sample humanoid, the Rigify metarig as target, the add-on registered
    (unregistered whatever the test does), the pair picked in the sidebar, Plant Feet on."""
    bpy = blender
    import marionette

    marionette.register()
    try:
        source, action, target = sample_walk_onto_metarig(bpy, frames=48)
        target.location.x = 2.0
        s = bpy.context.scene.marionette
        s.source, s.target = source, target
        s.plant_feet = True
        yield bpy, source, target, action
    finally:
        marionette.unregister()


def _keys(action) -> dict[tuple[str, int], np.ndarray]:
    from marionette.bridge import compat

    out = {}
    for fc in compat.action_fcurves(action, action.slots[0]):
        buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", buf)
        out[(fc.data_path, fc.array_index)] = buf
    return out


def test_the_summary_measured_after_the_click_fills_the_quality_panel(pair, monkeypatch):
    bpy, _source, target, _action = pair
    from marionette.viewport import deferred_summary

    s = bpy.context.scene.marionette
    monkeypatch.setattr(deferred_summary, "DEFER_SUMMARY", False)
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    at_once = json.loads(s.last_report)
    assert "mean_direction_error" in at_once

    monkeypatch.setattr(deferred_summary, "DEFER_SUMMARY", True)  # as in Blender with a window
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    new = target.animation_data.action
    assert json.loads(s.last_report) == {"action": new.name, "pending": True}  # the panel says "Measuring…"
    assert bpy.app.timers.is_registered(deferred_summary.finish_pending_summaries)
    assert deferred_summary.summary_pending(bpy.context.scene)
    deferred_summary.finish_pending_summaries()  # what the timer runs once the click has returned
    assert not deferred_summary.summary_pending(bpy.context.scene)
    later = json.loads(s.last_report)
    # The same retarget measured later gives the figures measured at once, for the new action.
    assert later["action"] == new.name != at_once["action"]
    assert {k: v for k, v in later.items() if k != "action"} == {k: v for k, v in at_once.items() if k != "action"}
    assert later["foot_slide"] and later["hip_drop"] is not None


def test_a_retarget_deleted_before_its_summary_leaves_an_empty_panel(pair, monkeypatch):
    bpy, _source, target, _action = pair
    from marionette.viewport import deferred_summary

    s = bpy.context.scene.marionette
    monkeypatch.setattr(deferred_summary, "DEFER_SUMMARY", True)
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    bpy.data.actions.remove(target.animation_data.action)
    deferred_summary.finish_pending_summaries()
    assert s.last_report == ""  # nothing to show, rather than "Measuring…" for ever


@pytest.mark.slow
@pytest.mark.parametrize("keep_frames", [False, True])
def test_a_take_converted_in_pieces_gives_the_keys_of_one_piece(blender, keep_frames):
    """With pieces of 7 file frames (one or two output frames each at 24 fps), every foot contact
    crosses piece borders; Plant Feet still holds the feet where the whole take does."""
    bpy = blender
    from marionette.bridge.clip_source import read_bvh_clip
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases import retarget

    path = str(shared_file(CMU))
    bpy.context.scene.render.fps = 24
    bpy.ops.object.armature_basic_human_metarig_add()
    target = bpy.context.active_object
    runs = {}
    for chunk in (7, 10**9):
        outcome = retarget.retarget_action(
            read_bvh_clip(path, chunk_frames=chunk), None, target, scene_fps=24.0, keep_frames=keep_frames,
            options=RetargetOptions(plant_feet=True), name=f"piece{chunk}",
        )
        runs[chunk] = (_keys(outcome.action), outcome.report)
    (pieces, r_pieces), (whole, r_whole) = runs[7], runs[10**9]
    assert pieces.keys() == whole.keys() and len(whole) > 30
    for k in whole:
        assert np.array_equal(pieces[k], whole[k]), k
    assert r_pieces["planted_feet"] == r_whole["planted_feet"]
    assert all(c["held"] > 20 for c in r_whole["planted_feet"].values())  # contacts over many pieces
    assert r_whole["clip"]["frames"] == (566 if keep_frames else 114)


def test_only_long_takes_skip_blenders_importer(tmp_path):
    from marionette.bridge.clip_source import LONG_TAKE_FRAMES, is_long_bvh_take

    text = shared_file(CMU).read_text()
    head, _, _ = text.partition("Frames:")
    for frames, long in ((LONG_TAKE_FRAMES - 1, False), (LONG_TAKE_FRAMES, True)):
        p = tmp_path / f"take{frames}.bvh"
        p.write_text(head + f"Frames: {frames}\nFrame Time: 0.0083333\n")
        assert is_long_bvh_take(str(p)) is long
    assert not is_long_bvh_take(str(tmp_path / "missing.bvh"))
    assert not is_long_bvh_take(str(shared_file(CMU)))


def test_undo_back_to_the_click_shows_the_figures_measured_after_it(pair, monkeypatch):
    bpy, _source, _target, _action = pair
    from marionette.viewport import deferred_summary

    monkeypatch.setattr(deferred_summary, "DEFER_SUMMARY", True)
    # Blender's UI pushes an undo step after each operator with the UNDO option; operators called
    # from Python in the bpy module do not, so the test pushes as the UI would.
    bpy.ops.ed.undo_push(message="before retarget")
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Retarget Clip")  # its step holds the "measuring" state
    deferred_summary.finish_pending_summaries()
    shown = json.loads(bpy.context.scene.marionette.last_report)
    assert "mean_direction_error" in shown
    bpy.context.scene.frame_current += 1
    bpy.ops.ed.undo_push(message="something else")
    assert bpy.ops.ed.undo() == {"FINISHED"}
    restored = json.loads(bpy.context.scene.marionette.last_report)
    assert restored == {"action": shown["action"], "pending": True}
    assert not deferred_summary.summary_pending(bpy.context.scene)
    assert deferred_summary.measured_summary(restored["action"]) == shown  # what the panel draws then


@pytest.mark.slow
def test_a_long_take_onto_its_own_import_gets_the_importers_keys(blender, tmp_path):
    """Read without the importer and retarget onto the armature the importer makes of it, a long
    take is bound natively: its keys are those the importer wrote, joint for joint."""
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.clip_source import LONG_TAKE_FRAMES, read_bvh_clip
    from marionette.bridge.file_import import load_file
    from marionette.usecases import retarget
    from tests.helpers.tiny_bvh import bvh_text

    path = tmp_path / "long.bvh"
    path.write_text(bvh_text(LONG_TAKE_FRAMES + 3))
    loaded = load_file(str(path))
    target, imported = loaded.armatures[0], loaded.actions[0]
    outcome = retarget.retarget_action(read_bvh_clip(str(path)), None, target, scene_fps=30.0, keep_frames=True, name="own")
    assert outcome.report["method"]["native"] is True
    got, want = clip_from_action(target, outcome.action), clip_from_action(target, imported)
    assert got.names == want.names and got.frame_count == want.frame_count == LONG_TAKE_FRAMES + 3
    dots = np.abs(np.einsum("tbi,tbi->tb", got.rotations, want.rotations))
    assert float(np.degrees(2 * np.arccos(np.clip(dots.min(), -1, 1)))) < 1e-3  # float32 keys
    # Within float32 rounding of each key: the importer turns a translation thousands of units
    # long (the hips' travel) by a float32 rest, which moves its other components by ~1e-7 of it.
    off = np.linalg.norm(got.translations - want.translations, axis=-1)
    assert np.all(off <= 1e-6 * np.linalg.norm(want.translations, axis=-1) + 1e-4)


def test_a_clip_clicked_again_is_read_anew_when_its_keys_or_pose_change(pair):
    """Retarget Clip keeps the source clip it read, and a click on the same unchanged clip takes
    it; an edited key (through the key as in the Graph Editor, or in bulk, which tells Blender
    nothing), a rotation mode or the pose of an unkeyed channel changed between clicks gives the
    keys a first read of the edited clip gives."""
    bpy, source, target, action = pair
    from marionette.bridge import clip_read, compat

    def click(fresh: bool = False) -> dict[tuple[str, int], np.ndarray]:
        if fresh:
            clip_read._READ_CLIPS.clear()
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        return _keys(target.animation_data.action)

    def same(a, b) -> bool:
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

    first = click(fresh=True)
    assert clip_read._READ_CLIPS  # the clip read is kept
    assert same(click(), first)  # and taken again: the same keys
    curves = {(fc.data_path, fc.array_index): fc for fc in compat.action_fcurves(action, action.slots[0])}
    thigh = curves[('pose.bones["Thigh.L"].rotation_quaternion', 1)]
    thigh.keyframe_points[10].co[1] += 0.3  # one key, through the key
    edited = click()
    assert not same(edited, first)
    assert same(edited, click(fresh=True))
    shin = curves[('pose.bones["Shin.R"].rotation_quaternion', 2)]
    co = np.empty(2 * len(shin.keyframe_points), dtype=np.float32)
    shin.keyframe_points.foreach_get("co", co)
    co[1::2] += 0.2  # every key of a curve, in bulk
    shin.keyframe_points.foreach_set("co", co)
    bulk = click()
    assert not same(bulk, edited)
    assert same(bulk, click(fresh=True))
    # The rotation mode (the quaternion keys are no longer played) and an unkeyed channel's pose.
    source.pose.bones["Shin.R"].rotation_mode = "XYZ"
    source.pose.bones["Shin.R"].rotation_euler = (0.4, 0.0, 0.0)
    posed = click()
    assert not same(posed, bulk)
    assert same(posed, click(fresh=True))


def test_unregistering_drops_the_clips_and_poses_kept_between_clicks(pair):
    bpy = pair[0]
    import marionette
    from marionette.bridge import clip_read
    from marionette.core.retarget import pose_memo

    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    assert clip_read._READ_CLIPS and pose_memo._POSES
    marionette.unregister()
    try:
        assert not clip_read._READ_CLIPS and not pose_memo._POSES
    finally:
        marionette.register()
