"""A clip onto a copy of its own armature whose bones were given other rolls in Blender's edit
mode (same heads and tails): every mapped bone must turn as the clip turns it, hands and toes
included, measured on the pose Blender evaluates after the keys are written."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

CLIPS = ["bvh/cmu/12_03_motionbuilder.bvh", "bvh/cmu/02_02_daz.bvh", "bvh/makehuman/walk1_zup.bvh"]


def _rolled_copy(bpy, source, seed):
    copy = source.copy()
    copy.data = source.data.copy()
    copy.name = f"{source.name} rolled"
    bpy.context.scene.collection.objects.link(copy)
    copy.animation_data_clear()
    rng = np.random.default_rng(seed)
    for obj in bpy.context.view_layer.objects:
        obj.select_set(False)
    bpy.context.view_layer.objects.active = copy
    copy.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for eb in copy.data.edit_bones:
        eb.roll = float(rng.uniform(-np.pi, np.pi))
    bpy.ops.object.mode_set(mode="OBJECT")
    return copy


@pytest.mark.parametrize("clip_file", CLIPS)
def test_every_mapped_bone_plays_the_clip_on_a_roll_randomised_copy(blender, clip_file):
    bpy = blender
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.bridge.file_import import load_file
    from marionette.bridge.skeleton_read import skeleton_from_armature
    from marionette.core.rig.rotations import orthonormalize, quat_angle_between, quat_from_matrix
    from marionette.usecases.retarget import retarget_action

    loaded = load_file(shared_file(clip_file))
    source = loaded.armatures[0]
    action = loaded.actions[0]
    copy = _rolled_copy(bpy, source, seed=3)
    src_sk, tgt_sk = skeleton_from_armature(source), skeleton_from_armature(copy)
    rest_s, rest_t = src_sk.rest_placements()[:, :3, :3], tgt_sk.rest_placements()[:, :3, :3]
    rolled = np.degrees(quat_angle_between(quat_from_matrix(orthonormalize(rest_s)), quat_from_matrix(orthonormalize(rest_t))))
    assert np.median(rolled) > 30.0  # the copy's bones really have other rolls
    assert np.allclose(src_sk.rest_placements()[:, :3, 3], tgt_sk.rest_placements()[:, :3, 3], atol=1e-5)

    outcome = retarget_action(source, action, copy, scene_fps=24.0, keep_frames=True, name="rolled")
    assert not outcome.report["method"]["native"]  # other rolls: converted, never copied
    first, last = outcome.report["clip"]["first_frame"], outcome.report["clip"]["last_frame"]
    frames = np.linspace(first, last, min(80, int(last - first) + 1)).round()
    ws = evaluated_pose_matrices(source, frames, src_sk)
    wt = evaluated_pose_matrices(copy, frames, tgt_sk)

    worst = {}
    for slot, name in outcome.source_mapping.bones().items():
        i, j = src_sk.index(name), tgt_sk.index(outcome.target_mapping.bones()[slot])
        assert src_sk.names[i] == tgt_sk.names[j]
        # Each bone's rotation from its rest in armature space; Blender keeps matrices in single
        # precision, so rotations are compared as quaternions of the nearest rotation matrices.
        ds = orthonormalize(ws[:, i, :3, :3]) @ orthonormalize(rest_s[i]).T
        dt = orthonormalize(wt[:, j, :3, :3]) @ orthonormalize(rest_t[j]).T
        worst[slot] = float(np.degrees(quat_angle_between(quat_from_matrix(ds), quat_from_matrix(dt))).max())
    assert max(worst.values()) < 0.1, sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    slots = outcome.source_mapping.bones()
    assert {"hand.L", "hand.R"} <= set(worst)
    if "toes.L" in slots:
        # The comparison can fail: the toes turn against the feet in this clip.
        foot, toe = src_sk.index(slots["foot.L"]), src_sk.index(slots["toes.L"])
        rel = np.swapaxes(orthonormalize(ws[:, foot, :3, :3]), -1, -2) @ orthonormalize(ws[:, toe, :3, :3])
        at_rest = orthonormalize(rest_s[foot]).T @ orthonormalize(rest_s[toe])
        bend = np.degrees(quat_angle_between(quat_from_matrix(rel), quat_from_matrix(at_rest)[None]))
        if clip_file == CLIPS[0]:
            assert bend.max() > 10.0
