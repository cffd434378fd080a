"""Per-bone method choice and native binding through the sidebar and the command line: the method
column and ``--method`` reach the core, what Blender plays is what the core computed, and bad
tables are refused before anything changes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from marionette.core.rig import rotations as R
from tests.helpers.data import shared_file
from tests.helpers.sample_pair import sample_walk_onto_metarig

pytestmark = pytest.mark.bpy


def run(*args: str, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "marionette", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def pair(blender):
    bpy = blender
    import marionette

    marionette.register()
    try:
        source, action, target = sample_walk_onto_metarig(bpy, frames=24)
        s = bpy.context.scene.marionette
        s.source, s.target = source, target
        yield bpy, source, target, action
    finally:
        marionette.unregister()


def test_method_column_drives_the_retarget_and_survives_auto_map(pair):
    bpy, source, target, action = pair
    from marionette.bridge.clip_read import clip_from_action
    from marionette.core.retarget.binding_cache import BindingCache
    from marionette.core.retarget.methods import retarget_with_methods
    from marionette.usecases.rigs import rig_input

    s = bpy.context.scene.marionette
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    rows = {r.slot: r for r in s.mapping}
    rows["hand.L"].method = "LOCAL_CURL"  # not a finger: refused, nothing written
    before = set(bpy.data.actions)
    with pytest.raises(RuntimeError, match="finger slots"):
        bpy.ops.marionette.retarget_clip()
    assert set(bpy.data.actions) == before
    rows["hand.L"].method = "GEOMETRIC"
    for slot in ("upper_arm.L", "forearm.L", "thigh.R"):
        rows[slot].method = "REST_SPACE"
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}  # re-mapping keeps the chosen methods
    assert {r.slot: r.method for r in s.mapping if r.method != "GEOMETRIC"} == dict.fromkeys(("upper_arm.L", "forearm.L", "thigh.R"), "REST_SPACE")
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    written = target.animation_data.action
    # What Blender plays is what the core computes for the same table.
    src_in, _ = rig_input(source)
    tgt_in, _ = rig_input(target)
    clip = clip_from_action(source, action)
    from marionette.properties.retarget_settings import options_of

    table = {"upper_arm.L": "REST_SPACE", "forearm.L": "REST_SPACE", "thigh.R": "REST_SPACE"}
    core = retarget_with_methods(BindingCache(), src_in, tgt_in, clip, table, options_of(s))  # the sidebar's options
    played = clip_from_action(target, written, frames=clip.frame_numbers(24.0), fps=24.0)
    sk = tgt_in.skeleton
    w_core = sk.forward_kinematics(core.result.clip.rotations, core.result.clip.translations)
    w_played = sk.forward_kinematics(played.rotations, played.translations)
    bones = [sk.index(tgt_in.slots[slot]) for slot in ("upper_arm.L", "forearm.L", "thigh.R", "spine", "hand.R")]
    angle = np.degrees(R.quat_angle_between(R.quat_from_matrix(w_core[:, bones, :3, :3]), R.quat_from_matrix(w_played[:, bones, :3, :3])))
    assert angle.max() < 0.01


def test_cli_refuses_a_bad_method_table_before_reading_anything(tmp_path):
    out = tmp_path / "out.blend"
    res = run("retarget", str(tmp_path / "missing.bvh"), str(tmp_path / "missing.glb"), "-o", str(out), "--method", "trunk=local-curl")
    assert res.returncode != 0
    assert "local curl is for finger slots" in res.stderr and "missing" not in res.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.data
def test_cli_same_rig_binds_natively_and_method_table_reaches_the_report(tmp_path):
    fbx = str(shared_file("fbx/quaternius_male_casual.fbx"))
    report = tmp_path / "native.json"
    res = run("retarget", fbx, fbx, "--clip", "Man_Run", "-o", str(tmp_path / "native.blend"), "--method", "rest-space", "--report", str(report))
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["method"]["native"] is True
    assert data["summary"]["max_direction_error"] < 1e-3

    report2 = tmp_path / "mixed.json"
    res = run(
        "retarget", str(shared_file("bvh/cmu/02_02_daz.bvh")), str(shared_file("gltf/male_base_mesh_apose.glb")),
        "-o", str(tmp_path / "mixed.blend"), "--method", "geometric,arms=rest-space,fingers=local-curl", "--match-rest",
        "--report", str(report2),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(report2.read_text())
    assert data["method"]["native"] is False and data["method"]["match_rest"] is True
    assert data["method"]["table"]["upper_arm.L"] == "REST_SPACE" and data["method"]["table"]["index_2.R"] == "LOCAL_CURL"
    assert "hips" not in data["method"]["table"]
    # Rest matching lines the arms' directions up across an A-pose target (docs/methods.md#rest-matching).
    arms = [data["direction_error_deg"][s]["max"] for s in ("upper_arm.L", "forearm.L", "upper_arm.R", "forearm.R")]
    assert max(arms) < 1.0
