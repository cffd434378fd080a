"""Batch Bake of the shared-data pack through the command line: every good clip baked, every bad
file named with its reason, the same keys with one worker or two, per-slot retarget methods, and
clips already on the target's own rig bound natively."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.batch_bake import CMU, DAZ, TARGET, _bake, _read_output, _report, _statuses
from tests.helpers.data import SHARED_DATA, shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


def _planted():
    from marionette.core.retarget.geometric import RetargetOptions

    return RetargetOptions(plant_feet=True)  # bake-pack plants feet unless told not to


# --- the shared-data pack ------------------------------------------------------------------


EXPECTED_FAILURES = {
    "extra/truncated": r"truncated\.bvh, line 264: truncated",
    "extra/no_frames": r"no frames of motion",
    "shared/fbx/quaternius_dog_quadruped": r"not a humanoid rig: its spine runs",
    "shared/fbx/assimp_huesitos_with_light": r"not a humanoid rig",
    "shared/gltf/kenney_character_no_armature": r"the file has no armature",
    "shared/gltf/khronos_fox_quadruped": r"not a humanoid rig: its spine runs",
    "shared/gltf/khronos_simple_skin": r"not a humanoid rig",
    "shared/gltf/male_base_mesh_apose": r"no animation",
    "shared/blend/vrm_addon_apose_rest": r"no animation",
    "shared/vmd/babylon_mmd_physics_toggle_test_v2_yyb10th": r"none of the motion's 1 bones is a bone of the model",
}
EXPECTED_CLIPS = {  # label -> clips baked
    "shared/bvh/cmu/02_02_daz": 1,
    "shared/bvh/cmu/12_03_motionbuilder": 1,
    "shared/bvh/makehuman/tpose_zup": 1,
    "shared/bvh/makehuman/walk1_zup": 1,
    "shared/fbx/quaternius_male_casual": 11,
    "shared/gltf/khronos_cesium_man": 1,
    "shared/gltf/khronos_rigged_figure": 1,
    # MMD motions, played on the built-in standard MMD skeleton.
    "shared/vmd/babylon_mmd_physics_toggle_test_v3_yyb10th": 1,
    "shared/vmd/babylon_mmd_physics_toggle_test_yyb10th": 1,
}


@pytest.fixture(scope="module")
def shared_pack(tmp_path_factory) -> Path:
    """tests/data as it is (as the pack's folder ``shared``), plus a truncated BVH and a BVH without frames."""
    root = tmp_path_factory.mktemp("pack")
    shutil.copytree(SHARED_DATA, root / "shared")
    (root / "extra").mkdir()
    raw = shared_file(CMU).read_bytes()
    (root / "extra" / "truncated.bvh").write_bytes(raw[:60000])
    text = raw.decode()
    (root / "extra" / "no_frames.bvh").write_text(text[: text.index("Frames:")] + "Frames: 0\nFrame Time: 0.008333\n")
    return root


@pytest.fixture(scope="module")
def baked_pack(shared_pack, tmp_path_factory) -> dict[int, tuple[subprocess.CompletedProcess[str], Path, dict]]:
    """The pack baked with --jobs 2 and with --jobs 1: process, output, report."""
    out = tmp_path_factory.mktemp("out")
    target = str(shared_file(TARGET))
    runs = {}
    for jobs in (2, 1):
        blend, report = out / f"jobs{jobs}.blend", out / f"jobs{jobs}.json"
        t0 = time.perf_counter()
        proc = _bake(str(shared_pack), target, "-o", str(blend), "--jobs", str(jobs), "--report", str(report))
        print(f"--jobs {jobs}: {time.perf_counter() - t0:.2f} s")
        runs[jobs] = (proc, blend, _report(report))
    return runs


@pytest.mark.slow
def test_pack_bakes_every_good_clip_and_names_every_bad_file(blender, baked_pack) -> None:
    proc, blend, report = baked_pack[2]
    assert proc.returncode == 1, proc.stderr[-2000:]  # some files did not bake
    assert not report["ok"] and report["interrupted"] is None
    statuses = _statuses(report)
    assert {k: v for k, v in statuses.items() if v == "baked"} == dict.fromkeys(EXPECTED_CLIPS, "baked")
    assert {k: v for k, v in statuses.items() if v != "baked"} == dict.fromkeys(EXPECTED_FAILURES, "failed")
    by_label = {f["label"]: f for f in report["files"]}
    for label, pattern in EXPECTED_FAILURES.items():
        import re

        assert re.search(pattern, by_label[label]["reason"]), (label, by_label[label]["reason"])
    assert {k: len(by_label[k]["clips"]) for k in EXPECTED_CLIPS} == EXPECTED_CLIPS
    assert report["clips_by_status"] == {"baked": 19, "failed": 2}  # the BVH without frames, the VMD of no standard bone
    ignored = sorted(os.path.basename(i["path"]) for i in report["ignored"])
    assert ignored == [  # tests/data's notes and licence texts and its PMX models
        "BSD-3-Clause-assimp.txt",
        "CMU_README.txt",
        "MIT-VRM-Addon-for-Blender.txt",
        "MIT-babylon-mmd.txt",
        "README.md",
        "bone_flag_test.pmx",
        "bone_hierarchy_test.pmx",
        "constraint_test.pmx",
    ]
    # Every clip is in the saved file, under the name the report gives, with its frames.
    assert not Path(str(blend) + ".parts").exists()
    saved = _read_output(blender, blend)
    assert len(saved) == 19
    for f in report["files"]:
        for c in f["clips"]:
            if c["status"] == "baked":
                src, clip, curves = saved[c["action"]]
                assert (src, clip) == (f["path"], c["clip"])
                assert curves and all(len(b) == 8 * c["frames"] for b in curves.values())
    men = sorted(n for n in saved if n.startswith("shared/fbx/quaternius_male_casual|"))
    assert [n.split("|")[1] for n in men] == sorted(
        ["Man_Clapping", "Man_Death", "Man_Idle", "Man_Jump", "Man_Punch", "Man_Run", "Man_RunningJump", "Man_Sitting", "Man_Standing", "Man_SwordSlash", "Man_Walk"]
    )
    # 120 fps CMU keeps its timing on the 24 fps scene: 566 frames -> 114.
    cmu = next(c for f in report["files"] if f["label"].endswith("12_03_motionbuilder") for c in f["clips"])
    assert (cmu["source_frames"], cmu["source_fps"], cmu["frames"]) == (566, 120.0, 114)
    # The target still plays: the first baked clip is assigned, through its slot.
    target = blender.data.objects[report["target"]["armature"]]
    assert target.animation_data.action.name in saved and target.animation_data.action_slot is not None


@pytest.mark.slow
def test_jobs_1_and_jobs_2_write_the_same_keys(blender, baked_pack) -> None:
    (p2, blend2, r2), (p1, blend1, r1) = baked_pack[2], baked_pack[1]
    assert p1.returncode == p2.returncode == 1
    assert _statuses(r1) == _statuses(r2)
    a2 = _read_output(blender, blend2)
    a1 = _read_output(blender, blend1)
    assert sorted(a1) == sorted(a2) and len(a1) == 19
    for name in a1:
        assert a1[name][:2] == a2[name][:2]
        assert a1[name][2].keys() == a2[name][2].keys()
        assert a1[name][2] == a2[name][2], name  # byte-identical keys


@pytest.mark.slow
def test_bvh_read_without_blender_agrees_with_blenders_importer(blender, baked_pack) -> None:
    """The numpy BVH path (tails, mapping, retarget) against the single retarget of the same file
    imported by Blender, onto the same target."""
    from marionette.bridge import compat, skeleton_read
    from marionette.bridge.file_import import load_file
    from marionette.core.batch.baking import bvh_rest_tails
    from marionette.core.formats.bvh import detect_up_axis, read_bvh
    from marionette.core.mapping.auto_map import auto_map_skeleton
    from marionette.usecases import retarget

    _, blend, _ = baked_pack[2]
    batch = {src: curves for src, _clip, curves in _read_output(blender, blend).values()}
    blender.ops.wm.read_factory_settings(use_empty=True)
    target = load_file(shared_file(TARGET)).armatures[0]
    y_up_to_z_up = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    for rel in (CMU, DAZ, "bvh/makehuman/walk1_zup.bvh", "bvh/makehuman/tpose_zup.bvh"):
        path = shared_file(rel)
        bvh = read_bvh(path)
        obj = load_file(path).armatures[0]
        skeleton = skeleton_read.skeleton_from_armature(obj)
        _, tails = skeleton_read.rest_heads_tails(obj, skeleton)
        order = [bvh.names.index(n) for n in skeleton.names]
        mine = bvh_rest_tails(bvh)[order]
        if detect_up_axis(bvh) == "Y":  # Blender's importer turns Y-up files to Z-up
            mine = mine @ y_up_to_z_up.T
        height = float(np.ptp(tails, axis=0).max())
        assert np.abs(mine - tails).max() <= 1e-5 * height, rel
        assert auto_map_skeleton(bvh.skeleton(), bvh_rest_tails(bvh)).bones() == auto_map_skeleton(skeleton, tails).bones(), rel
        if rel.endswith("tpose_zup.bvh"):
            # Its one frame puts thigh and shin heads on the same point (the file's position
            # channels): the measured segment has no direction, so neither path means anything there.
            continue
        outcome = retarget.retarget_action(obj, obj.animation_data.action, target, scene_fps=24.0, options=_planted())  # as bake-pack
        mine_keys = next(c for src, c in batch.items() if src.endswith(os.sep + os.path.basename(rel)))
        theirs = {}
        for fc in compat.action_fcurves(outcome.action, outcome.action.slots[0]):
            buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", buf)
            theirs[(fc.data_path, fc.array_index)] = buf
        mine_arr = {(k[1], k[2]): np.frombuffer(b, np.float32) for k, b in mine_keys.items()}
        # The same rotation curves; location curves may differ in number only where they are
        # all zero (write_action keys a zero location when the target's pose holds float noise
        # there, as the glTF importer leaves it, and the two processes' poses differ).
        assert {k for k in mine_arr if "location" not in k[0]} == {k for k in theirs if "location" not in k[0]}, rel
        for k in set(mine_arr) ^ set(theirs):
            assert np.all((mine_arr.get(k, theirs.get(k)))[1::2] == 0.0), (rel, k)
        worst = max(float(np.abs(mine_arr[k] - theirs[k]).max()) for k in set(mine_arr) & set(theirs))
        assert worst <= 1e-5, (rel, worst)


# --- retarget methods ----------------------------------------------------------------------


#: Files Blender imports in the worker and in a single retarget alike (a BVH is read with numpy in
#: a batch, so its keys agree with Blender's importer only to 1e-5; see the test above).
METHOD_PACK = ("gltf/khronos_cesium_man.glb", "gltf/khronos_rigged_figure.glb", "fbx/quaternius_male_casual.fbx")


@pytest.fixture(scope="module")
def method_runs(tmp_path_factory) -> dict[int, tuple[subprocess.CompletedProcess[str], Path, dict]]:
    """Three imported files (13 clips) baked with ``--method rest-space``, with --jobs 2 and 1."""
    pack = tmp_path_factory.mktemp("method_pack")
    for rel in METHOD_PACK:
        shutil.copy(shared_file(rel), pack / Path(rel).name)
    out = tmp_path_factory.mktemp("method_out")
    runs = {}
    for jobs in (2, 1):
        blend, report = out / f"jobs{jobs}.blend", out / f"jobs{jobs}.json"
        t0 = time.perf_counter()
        proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(blend), "--jobs", str(jobs), "--method", "rest-space", "--report", str(report))
        print(f"--method rest-space --jobs {jobs}: {time.perf_counter() - t0:.2f} s")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        runs[jobs] = (proc, blend, _report(report))
    return runs


@pytest.mark.slow
def test_a_method_pack_has_the_keys_of_single_retargets_with_that_method(blender, method_runs) -> None:
    from marionette.bridge import compat
    from marionette.bridge.file_import import load_file
    from marionette.core.mapping.method_names import parse_method_table
    from marionette.usecases import retarget

    _, blend, report = method_runs[2]
    table = parse_method_table("rest-space")
    fps = report["scene_fps"]
    assert report["ok"] and report["clips_by_status"] == {"baked": 13}
    assert report["method"] == {"name": "rest-space", "table": table, "match_rest": False}
    methods = {(f["path"], c["clip"]): c["method"] for f in report["files"] for c in f["clips"]}
    assert set(methods.values()) == {"rest-space"}  # no clip is on the target's layout
    batch = {(src, clip): curves for src, clip, curves in _read_output(blender, blend).values()}
    assert len(batch) == 13
    worst, compared = 0.0, 0
    for path in sorted({p for p, _ in batch}):
        # As the worker does: the file imported into an empty scene (so its Actions get the same
        # names), then the target beside it.
        blender.ops.wm.read_factory_settings(use_empty=True)
        loaded = load_file(path)
        source = max(loaded.armatures, key=lambda a: len(a.data.bones))
        actions = list(loaded.actions)
        target = load_file(shared_file(TARGET)).armatures[0]
        for action in actions:
            outcome = retarget.retarget_action(
                source, action, target, scene_fps=fps, methods=table, name=f"single_{action.name}", options=_planted()
            )
            assert outcome.report["method"]["native"] is False and outcome.report["method"]["table"] == table
            single = {}
            for fc in compat.action_fcurves(outcome.action, outcome.action.slots[0]):
                buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
                fc.keyframe_points.foreach_get("co", buf)
                single[(fc.data_path, fc.array_index)] = buf
            mine = {(k[1], k[2]): np.frombuffer(b, np.float32) for k, b in batch[(path, action.name)].items()}
            # The same rotation curves; a location curve may be missing on one side only where it
            # is all zero (write_action leaves out keys that would not change the pose it finds).
            assert {k for k in mine if "location" not in k[0]} == {k for k in single if "location" not in k[0]}, action.name
            for k in set(mine) ^ set(single):
                assert np.all((mine.get(k, single.get(k)))[1::2] == 0.0), (action.name, k)
            for k in set(mine) & set(single):
                assert mine[k].shape == single[k].shape, (action.name, k)
                worst = max(worst, float(np.abs(mine[k].astype(np.float64) - single[k]).max()))
                compared += 1
    print(f"{compared} curves of 13 clips compared; largest key difference {worst:.3g}")
    assert compared > 13 * 50 and worst <= 1e-9


@pytest.mark.slow
def test_a_method_pack_is_the_same_with_jobs_1_and_jobs_2(blender, method_runs) -> None:
    (_, blend2, r2), (_, blend1, r1) = method_runs[2], method_runs[1]
    assert _statuses(r1) == _statuses(r2)
    assert r1["method"] == r2["method"]
    assert [[c.get("method") for c in f["clips"]] for f in r1["files"]] == [[c.get("method") for c in f["clips"]] for f in r2["files"]]
    a2 = _read_output(blender, blend2)
    a1 = _read_output(blender, blend1)
    assert sorted(a1) == sorted(a2) and len(a1) == 13
    for name in a1:
        assert a1[name] == a2[name], name  # byte-identical keys


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sideways", "trunk=local-curl", "tail=rest-space"])
def test_a_bad_method_is_refused_before_anything_is_read_or_written(tmp_path, method) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(shared_file(DAZ), pack / "clip.bvh")
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    proc = _bake(str(pack), str(tmp_path / "missing_target.glb"), "-o", str(out), "--method", method, "--report", str(report))
    assert proc.returncode in (1, 2), proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("marionette: error: "), proc.stderr
    assert "missing_target" not in proc.stderr  # refused before the target was looked at
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]  # no output, parts or report


def test_bake_settings_take_the_target_mappings_methods_and_let_explicit_ones_win(blender) -> None:
    from marionette.bridge.file_import import load_file
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.bake_pack import bake_settings
    from marionette.usecases.rigs import rig_input

    target = load_file(shared_file(TARGET)).armatures[0]
    _, auto = rig_input(target)
    saved = type(auto)(auto.slots, auto.conflicts, auto.convention, auto.refusal, {"hips": "REST_SPACE", "upper_arm.L": "REST_SPACE"})
    s = bake_settings(target, saved, RetargetOptions(), methods={"upper_arm.L": "geometric", "index_1.L": "local-curl"}, match_rest=True)
    assert s.methods == {"hips": "REST_SPACE", "upper_arm.L": "GEOMETRIC", "index_1.L": "LOCAL_CURL"}
    assert s.match_rest and s.uses_methods
    assert bake_settings(target, None, RetargetOptions()).methods == {}


# --- clips on the target's own layout ------------------------------------------------------


@pytest.mark.slow
def test_a_pack_on_the_targets_own_rig_is_bound_natively_without_a_method(blender, tmp_path) -> None:
    """The Quaternius man's clips baked onto the Quaternius man: keys carried unchanged (as a
    single retarget binds them), not converted through the geometric frames."""
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.file_import import load_file

    men = shared_file("fbx/quaternius_male_casual.fbx")
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    proc = _bake(str(men), str(men), "-o", str(out), "--jobs", "1", "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _report(report)
    assert r["method"]["table"] == {} and r["clips_by_status"] == {"baked": 11}
    assert {c["method"] for c in r["files"][0]["clips"]} == {"native"}
    blender.ops.wm.read_factory_settings(use_empty=True)
    loaded = load_file(men)
    source = {a.name: clip_from_action(loaded.armatures[0], a) for a in loaded.actions}
    blender.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    arm = blender.data.objects[r["target"]["armature"]]
    worst = 0.0
    for c in r["files"][0]["clips"]:
        baked = clip_from_action(arm, blender.data.actions[c["action"]])
        want = source[c["clip"]]
        cols = [want.names.index(n) for n in baked.names]
        dots = np.abs(np.einsum("tbi,tbi->tb", baked.rotations, want.rotations[:, cols]))
        worst = max(worst, float(1.0 - dots.min()))
    assert worst < 1e-6
