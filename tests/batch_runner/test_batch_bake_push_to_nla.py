"""Batch Bake with Push to NLA: every baked clip on a muted track of its own, in pack order, above
the target's own tracks; the target plays what it played before the run."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.helpers.batch_bake import DAZ, TARGET
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


@pytest.fixture
def scene_with_target(blender):
    import marionette
    from marionette.bridge.file_import import load_file

    marionette.register()
    try:
        target = load_file(shared_file(TARGET)).armatures[0]
        blender.context.scene.marionette.target = target
        yield blender, target
    finally:
        marionette.unregister()


@pytest.mark.slow
@pytest.mark.parametrize("own_action", [False, True], ids=["no-action", "own-action"])
def test_batch_bake_pushes_each_clip_in_pack_order(scene_with_target, tmp_path, own_action) -> None:
    bpy, target = scene_with_target
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices

    ad = target.animation_data or target.animation_data_create()
    mine = [(t.name, t.mute, [(s.name, s.action.name if s.action else None, s.frame_start, s.frame_end, s.mute) for s in t.strips]) for t in ad.nla_tracks]
    if own_action:
        own = bpy.data.actions.new("OwnPose")
        ad.action = own
        pb = target.pose.bones[0]
        pb.keyframe_insert("location", frame=1)
    before_action = ad.action
    frames = np.arange(1, 11)
    played_before = evaluated_pose_matrices(target, frames)
    pack = tmp_path / "pack"
    pack.mkdir()
    for name in ("b_second", "a_first", "c_third"):
        shutil.copy(shared_file(DAZ), pack / f"{name}.bvh")
    bpy.context.scene.marionette.push_to_nla = True
    result = bpy.ops.marionette.batch_bake(directory=str(pack), jobs=1, report_path=str(tmp_path / "r.json"))
    assert result == {"FINISHED"}
    tracks = list(ad.nla_tracks)
    new = tracks[len(mine) :]
    # Pack order (the planner sorts the files by name), each track muted and holding its clip.
    assert [t.name for t in new] == ["a_first", "b_second", "c_third"]
    for t in new:
        assert t.mute and len(t.strips) == 1 and t.strips[0].action == bpy.data.actions[t.name]
        assert (t.strips[0].frame_start, t.strips[0].frame_end) == tuple(t.strips[0].action.frame_range)
    assert ad.action == before_action
    assert np.abs(evaluated_pose_matrices(target, frames) - played_before).max() <= 1e-6
