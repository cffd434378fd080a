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


@pytest.mark.slow
def test_bake_pack_push_to_nla_stacks_each_volumes_clips(blender, tmp_path) -> None:
    """``bake-pack --push-to-nla`` in two volumes: each saved file holds its clips on muted tracks
    of the target in pack order, the target playing no clip; ``--resume`` pushes nothing twice."""
    from tests.helpers.batch_bake import _bake, _report

    bpy = blender
    pack = tmp_path / "pack"
    pack.mkdir()
    for name in ("c1", "c0", "c2"):
        shutil.copy(shared_file(DAZ), pack / f"{name}.bvh")
    out, rj = tmp_path / "out.blend", tmp_path / "r.json"
    args = (str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "1", "--max-clips-per-file", "2", "--report", str(rj), "--push-to-nla")
    proc = _bake(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _report(rj)
    assert [p.rsplit("/", 1)[-1] for p in r["outputs"]] == ["out.blend", "out.002.blend"]
    assert r["nla_tracks"] == ["c0", "c1", "c2"]
    held = []
    for path in r["outputs"]:
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        arm = bpy.data.objects[r["target"]["armature"]]
        ad = arm.animation_data
        assert ad.action is None  # the target had no Action: it plays none (not its first clip)
        tracks = list(ad.nla_tracks)
        assert all(t.mute and len(t.strips) == 1 and t.strips[0].action.name == t.name for t in tracks)
        held.append([t.name for t in tracks])
    assert held == [["c0", "c1"], ["c2"]]
    # Resumed with every clip baked already: the tracks are there once.
    again = _bake(*args, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    assert [t.name for t in bpy.data.objects[r["target"]["armature"]].animation_data.nla_tracks] == ["c0", "c1"]
