"""Push to NLA, driven as a user drives it: Retarget Clip with the option on keeps each new Action
as the strip of a muted track of its own above the user's, the target playing what it played before
(the pose Blender evaluates, unchanged); the user's tracks, strips and Actions untouched; one undo
step; the summary measured on the clip.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.action_keys import curves_snapshot
from tests.helpers.sample_pair import sample_walk_onto_metarig

pytestmark = pytest.mark.bpy

#: The Quality panel's figures compared between runs with and without the option.
FIGURES = ("mean_direction_error", "max_direction_error", "max_limb_plane_error", "hips_height_error", "silhouette_front", "silhouette_side")


def _nla(obj):
    """Every track and strip of ``obj``'s NLA, in stack order, as plain values."""
    ad = obj.animation_data
    if ad is None:
        return []
    return [
        (
            t.name,
            t.mute,
            t.is_solo,
            [(s.name, s.action.name if s.action else None, s.frame_start, s.frame_end, s.mute, s.blend_type, s.influence) for s in t.strips],
        )
        for t in ad.nla_tracks
    ]


@pytest.fixture
def pair(blender):
    """The sample armature playing "Walk" and holding a second clip "Jog"; the Rigify metarig as
    target with the user's own NLA track ("User Layer", one strip of "UserLayer") and active
    action ("UserPose"); the add-on registered and the pair picked in the sidebar settings."""
    bpy = blender
    import marionette
    from marionette.bridge.action_write import write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    marionette.register()
    try:
        source, walk, target = sample_walk_onto_metarig(bpy, frames=36)
        jog = write_action(source, sample_walk(sample_humanoid(), frames=20, fps=24.0, name="Jog"), "Jog")
        source.animation_data.action = walk
        target.location.x = 2.0
        s = bpy.context.scene.marionette
        s.source, s.target = source, target
        yield bpy, source, target, walk, jog
    finally:
        marionette.unregister()


def _user_animation(bpy, target):
    """The user's own animation on the target: an active action and an NLA track with a strip."""
    target.animation_data_create()
    pb = target.pose.bones["spine"]
    layer = bpy.data.actions.new("UserLayer")
    target.animation_data.action = layer
    pb.rotation_mode = "QUATERNION"
    for frame, w in ((1, 1.0), (30, 0.9)):
        pb.rotation_quaternion = (w, 0.1, 0.0, 0.0)
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    target.animation_data.action = None
    track = target.animation_data.nla_tracks.new()
    track.name = "User Layer"
    track.mute = True  # the user's layer is off while reviewing; its state must survive
    track.strips.new("UserLayer", 1, layer)
    pose = bpy.data.actions.new("UserPose")
    target.animation_data.action = pose
    pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    pb.keyframe_insert("rotation_quaternion", frame=1)
    pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    # Unused while no NLA track plays; a live track (even holding only muted strips) would halve it.
    target.animation_data.action_influence = 0.5
    return pose


@pytest.mark.parametrize("user_animation", [False, True], ids=["no-active-action", "user-action-and-track"])
def test_two_clips_land_as_muted_strips_above_the_users_tracks(pair, user_animation):
    bpy, source, target, walk, jog = pair
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices

    s = bpy.context.scene.marionette
    pose = _user_animation(bpy, target) if user_animation else None
    ad = target.animation_data
    active_before = (ad.action, ad.action_slot) if ad is not None else (None, None)
    nla_before = _nla(target)
    curves_before = {a.name: curves_snapshot(a) for a in bpy.data.actions}
    frames = np.arange(1, 37)
    played_before = evaluated_pose_matrices(target, frames)
    s.push_to_nla = True
    made = []
    for clip in (walk, jog):
        s.action = clip
        n = len(bpy.data.actions)
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        assert len(bpy.data.actions) == n + 1
        made.append(json.loads(s.last_report)["action"])
    ad = target.animation_data
    # The target plays what it played before (nothing, or the user's action through its slot).
    assert (ad.action, ad.action_slot) == active_before
    assert ad.action == pose
    # ... and Blender plays the same pose as before, frame for frame: the pushed clips stay silent.
    played_after = evaluated_pose_matrices(target, frames)
    assert np.abs(played_after - played_before).max() <= 1e-6
    # The user's tracks first, as they were; then one track per clip, in order, named after it.
    tracks = _nla(target)
    assert tracks[: len(nla_before)] == nla_before
    assert [t[0] for t in tracks[len(nla_before) :]] == made
    assert made[0].startswith("Walk") and made[1].startswith("Jog")
    for (name, track_mute, solo, strips), clip in zip(tracks[len(nla_before) :], (walk, jog), strict=True):
        new = bpy.data.actions[name]
        assert len(strips) == 1 and track_mute and not solo
        strip_name, strip_action, start, end, strip_mute, blend, influence = strips[0]
        assert strip_name == name and strip_action == name and not strip_mute  # one click (the track's) plays it
        assert (start, end) == tuple(new.frame_range)
        assert end - start == clip.frame_range[1] - clip.frame_range[0]  # 24 fps both: the clip's length
        strip = ad.nla_tracks[name].strips[0]
        assert strip.action_slot is not None and strip.action_slot.identifier == "OB" + target.name
    # The user's Actions and the source's clips, key for key.
    assert {n: curves_snapshot(bpy.data.actions[n]) for n in curves_before} == curves_before
    assert source.animation_data.action == walk


def test_the_summary_is_measured_on_the_new_clip(pair, monkeypatch):
    """With the option the target plays its earlier action after the click, yet the Quality panel's
    figures are the new clip's: equal to those of the same retarget without the option, measured at
    once (in the background) and after the click (the timer of an interactive session)."""
    bpy, source, target, walk, jog = pair
    from marionette.viewport import deferred_summary

    s = bpy.context.scene.marionette
    _user_animation(bpy, target)
    s.action = walk
    runs = {}
    for name, push, defer in (("push", True, False), ("push, measured after", True, True), ("plain", False, False)):
        s.push_to_nla = push
        monkeypatch.setattr(deferred_summary, "DEFER_SUMMARY", defer)
        assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
        if defer:
            assert json.loads(s.last_report).get("pending") is True
            deferred_summary.finish_pending_summaries()
        runs[name] = json.loads(s.last_report)
        assert target.animation_data.action.name == ("UserPose" if push else runs[name]["action"])
    for name in ("push", "push, measured after"):
        for key in FIGURES:
            assert abs(runs[name][key] - runs["plain"][key]) <= 1e-6, (name, key, runs[name][key], runs["plain"][key])
        for foot, slide in runs["plain"]["foot_slide"].items():
            assert abs(runs[name]["foot_slide"][foot] - slide) <= 1e-6, (name, foot)
    # Not the figures of what the target plays after the push (its own pose action): the clip is measured.
    assert runs["plain"]["mean_direction_error"] < 0.5


def test_one_undo_takes_the_push_back(pair):
    bpy, source, target, walk, jog = pair
    s = bpy.context.scene.marionette
    _user_animation(bpy, target)
    nla_before = _nla(target)
    s.push_to_nla = True
    # Blender's UI pushes an undo step after each operator with the UNDO option; operators called
    # from Python in the bpy module do not, so the test pushes as the UI would.
    bpy.ops.ed.undo_push(message="before retarget")
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Retarget Clip")
    made = json.loads(s.last_report)["action"]
    assert len(_nla(bpy.data.objects["metarig"])) == len(nla_before) + 1
    assert bpy.ops.ed.undo() == {"FINISHED"}
    restored = bpy.data.objects["metarig"]
    assert made not in bpy.data.actions
    assert _nla(restored) == nla_before
    assert restored.animation_data.action.name == "UserPose"


def test_tweak_mode_is_refused_before_anything_is_written(pair):
    bpy, source, target, walk, jog = pair
    s = bpy.context.scene.marionette
    _user_animation(bpy, target)
    ad = target.animation_data
    ad.action = None
    ad.nla_tracks["User Layer"].strips[0].select = True
    ad.nla_tracks.active = ad.nla_tracks["User Layer"]
    ad.use_tweak_mode = True
    assert ad.use_tweak_mode
    s.push_to_nla = True
    n, nla_before = len(bpy.data.actions), _nla(target)
    with pytest.raises(RuntimeError, match="tweak mode"):
        bpy.ops.marionette.retarget_clip()
    assert len(bpy.data.actions) == n and _nla(target) == nla_before
