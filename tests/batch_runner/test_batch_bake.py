"""Batch Bake on real Blender: a pack built from tests/data plus broken files, baked through the
command line (real worker processes, real signals, real exit statuses) and through the operator.

Every test measures: clips counted in the saved file, keys compared byte for byte, bad files named
with their reason, lost and cancelled clips named in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.data import SHARED_DATA, shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

TARGET = "gltf/male_base_mesh_apose.glb"  # 56 bones, A-pose, Rigify-style names
CMU = "bvh/cmu/12_03_motionbuilder.bvh"
DAZ = "bvh/cmu/02_02_daz.bvh"


def _planted():
    from marionette.core.retarget.geometric import RetargetOptions

    return RetargetOptions(plant_feet=True)  # bake-pack plants feet unless told not to


def _bake_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "marionette", "bake-pack", *args]


def _bake(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_bake_command(*args), capture_output=True, text=True, timeout=timeout)


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def _statuses(report: dict) -> dict[str, str]:
    return {f["label"]: f["status"] for f in report["files"]}


def _read_output(bpy, path: Path) -> dict[str, tuple[str, str, dict]]:
    """Action name -> (source file, clip id, {(slot, data path, index): key bytes}) of every
    Action a batch bake wrote into ``path``."""
    from marionette.bridge import compat

    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    out = {}
    for a in bpy.data.actions:
        src = a.get("marionette_batch_source")
        if src is None:
            continue
        curves = {}
        for slot in a.slots:
            for fc in compat.action_fcurves(a, slot):
                buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
                fc.keyframe_points.foreach_get("co", buf)
                curves[(slot.identifier, fc.data_path, fc.array_index)] = buf.tobytes()
        out[a.name] = (src, a["marionette_batch_clip"], curves)
    return out


def _fcurves(action) -> list:
    from marionette.bridge import compat

    return [fc for slot in action.slots for fc in compat.action_fcurves(action, slot)]


def _journal(parts: Path) -> list[dict]:
    try:
        text = (parts / "journal.jsonl").read_text()
    except OSError:
        return []
    return [json.loads(ln) for ln in text.splitlines() if ln.endswith("}")]


def _wait_for(predicate, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _big_bvh(path: Path, repeat: int = 40) -> None:
    """A long clip (the CMU walk 40 times over: 22640 frames) that keeps a worker busy for about a second."""
    text = shared_file(CMU).read_text()
    i = text.index("Frames:")
    lines = text[i:].splitlines()
    frames = [ln for ln in lines[2:] if ln.strip()]
    path.write_text(text[:i] + f"Frames: {len(frames) * repeat}\n{lines[1]}\n" + "\n".join(frames * repeat) + "\n")


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
}
EXPECTED_CLIPS = {  # label -> clips baked
    "shared/bvh/cmu/02_02_daz": 1,
    "shared/bvh/cmu/12_03_motionbuilder": 1,
    "shared/bvh/makehuman/tpose_zup": 1,
    "shared/bvh/makehuman/walk1_zup": 1,
    "shared/fbx/quaternius_male_casual": 11,
    "shared/gltf/khronos_cesium_man": 1,
    "shared/gltf/khronos_rigged_figure": 1,
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
    assert report["clips_by_status"] == {"baked": 17, "failed": 1}  # the BVH without frames
    ignored = sorted(os.path.basename(i["path"]) for i in report["ignored"])
    assert ignored == [  # tests/data's notes and licence texts, its PMX models and VMD motions
        "BSD-3-Clause-assimp.txt",
        "CMU_README.txt",
        "MIT-VRM-Addon-for-Blender.txt",
        "MIT-babylon-mmd.txt",
        "README.md",
        "babylon_mmd_physics_toggle_test_v2_yyb10th.vmd",
        "babylon_mmd_physics_toggle_test_v3_yyb10th.vmd",
        "babylon_mmd_physics_toggle_test_yyb10th.vmd",
        "bone_flag_test.pmx",
        "bone_hierarchy_test.pmx",
        "constraint_test.pmx",
    ]
    # Every clip is in the saved file, under the name the report gives, with its frames.
    assert not Path(str(blend) + ".parts").exists()
    saved = _read_output(blender, blend)
    assert len(saved) == 17
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
    assert sorted(a1) == sorted(a2) and len(a1) == 17
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


# --- losing nothing ------------------------------------------------------------------------


@pytest.fixture
def small_pack(tmp_path) -> Path:
    """Ten short clips and one long one (``m_big.bvh``, in the middle of the order)."""
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(5):
        shutil.copy(shared_file(CMU), pack / f"a{k}.bvh")
        shutil.copy(shared_file(DAZ), pack / f"z{k}.bvh")
    _big_bvh(pack / "m_big.bvh")
    return pack


def _clean_run(pack: Path, tmp_path: Path) -> Path:
    out = tmp_path / "clean.blend"
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "1")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


@pytest.mark.slow
def test_a_killed_worker_loses_one_named_clip_and_resume_completes(blender, small_pack, tmp_path) -> None:
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    parts = Path(str(out) + ".parts")
    target = str(shared_file(TARGET))
    proc = subprocess.Popen(_bake_command(str(small_pack), target, "-o", str(out), "--jobs", "2", "--report", str(report)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def big_started():
        return [e for e in _journal(parts) if e.get("event") == "start" and e["file"].endswith("m_big.bvh")]

    _wait_for(big_started, what="a worker to start on the long clip")
    victim = big_started()[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, output[-3000:]
    r = _report(report)
    statuses = _statuses(r)
    assert statuses.pop("m_big") == "lost"
    assert set(statuses.values()) == {"baked"} and len(statuses) == 10
    big = next(f for f in r["files"] if f["label"] == "m_big")
    assert big["clips"] == [{"clip": "m_big", "status": "lost", "reason": big["clips"][0]["reason"]}]
    assert f"pid {victim}" in big["reason"] and "SIGKILL" in big["reason"] and "'m_big'" in big["reason"]
    assert r["counters"]["workers_lost"] == 1
    saved = _read_output(blender, out)
    assert len(saved) == 10 and "m_big" not in saved

    # --resume bakes only what is missing.
    proc = _bake(str(small_pack), target, "-o", str(out), "--jobs", "2", "--resume", "--report", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    r = _report(report)
    assert r["ok"] and r["clips_by_status"] == {"already baked": 10, "baked": 1}
    resumed = _read_output(blender, out)
    clean = _read_output(blender, _clean_run(small_pack, tmp_path))
    assert sorted(resumed) == sorted(clean) and len(clean) == 11
    for n in clean:
        assert resumed[n][:2] == clean[n][:2]
        assert resumed[n][2].keys() == clean[n][2].keys(), (n, set(resumed[n][2]) ^ set(clean[n][2]))
        assert resumed[n][2] == clean[n][2], n  # same keys as a run that was never interrupted

    # Resuming a complete output reads nothing and changes nothing.
    proc = _bake(str(small_pack), target, "-o", str(out), "--resume", "--report", str(report))
    assert proc.returncode == 0
    r = _report(report)
    assert r["clips_by_status"] == {"already baked": 11} and "read" not in r["timings"]
    assert _read_output(blender, out) == clean


@pytest.mark.slow
def test_ctrl_c_saves_every_finished_clip_and_resume_completes(blender, small_pack, tmp_path) -> None:
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    parts = Path(str(out) + ".parts")
    target = str(shared_file(TARGET))
    proc = subprocess.Popen(_bake_command(str(small_pack), target, "-o", str(out), "--jobs", "2", "--report", str(report)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(lambda: any(e.get("event") == "start" and e["file"].endswith("m_big.bvh") for e in _journal(parts)), what="the long clip")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 130, output[-3000:]
    r = _report(report)
    assert r["interrupted"] == "interrupted by the user (Ctrl-C)"
    statuses = _statuses(r)
    assert statuses["m_big"] == "cancelled"
    baked = sorted(k for k, v in statuses.items() if v == "baked")
    assert set(statuses.values()) <= {"baked", "cancelled"} and len(baked) >= 3  # a0..a4 come first
    saved = _read_output(blender, out)
    assert sorted(saved) == baked  # exactly what the report says was baked is in the file
    assert not parts.exists()

    proc = _bake(str(small_pack), target, "-o", str(out), "--jobs", "2", "--resume", "--report", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:]
    r = _report(report)
    assert r["clips_by_status"] == {"already baked": len(baked), "baked": 11 - len(baked)}
    clean = _read_output(blender, _clean_run(small_pack, tmp_path))
    assert _read_output(blender, out) == clean


@pytest.mark.slow
def test_resume_after_the_main_process_died_writes_its_parts(blender, small_pack, tmp_path) -> None:
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    parts = Path(str(out) + ".parts")
    target = str(shared_file(TARGET))
    proc = subprocess.Popen(_bake_command(str(small_pack), target, "-o", str(out), "--jobs", "2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: sum(e.get("event") == "file" for e in _journal(parts)) >= 4, what="four files")
    proc.kill()  # no chance to save anything
    proc.wait()
    workers = [e["pid"] for e in _journal(parts) if e.get("event") == "worker"]
    _wait_for(lambda: not any(_pid_alive(p) for p in workers), what="workers to notice")
    assert not out.exists()
    computed = len([p for p in os.listdir(parts) if p.endswith(".npz") and not p.endswith(".partial.npz")])
    assert computed >= 4

    proc2 = _bake(str(small_pack), target, "-o", str(out), "--jobs", "2", "--resume", "--report", str(report))
    assert proc2.returncode == 0, proc2.stdout[-3000:] + proc2.stderr[-2000:]
    r = _report(report)
    clips = r["clips_by_status"]
    assert clips.get("recovered") == computed and clips.get("baked", 0) == 11 - computed
    clean = _read_output(blender, _clean_run(small_pack, tmp_path))
    assert _read_output(blender, out) == clean


@pytest.mark.slow
def test_resume_never_continues_an_older_unrelated_output(blender, small_pack, tmp_path) -> None:
    """OUT.blend from an earlier bake, then a fresh run onto the same path dies: the resume starts
    from the target and the parts, not from the old file."""
    out = tmp_path / "out.blend"
    parts = Path(str(out) + ".parts")
    target = str(shared_file(TARGET))
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(shared_file(DAZ), old / "old_clip.bvh")
    assert _bake(str(old), target, "-o", str(out)).returncode == 0
    proc = subprocess.Popen(_bake_command(str(small_pack), target, "-o", str(out), "--jobs", "2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: sum(e.get("event") == "file" for e in _journal(parts)) >= 2, what="two files")
    proc.kill()
    proc.wait()
    workers = [e["pid"] for e in _journal(parts) if e.get("event") == "worker"]
    _wait_for(lambda: not any(_pid_alive(p) for p in workers), what="workers to notice")
    assert _bake(str(small_pack), target, "-o", str(out), "--resume").returncode == 0
    saved = _read_output(blender, out)
    assert "old_clip" not in saved and len(saved) == 11


def test_an_empty_pack_is_an_error_and_writes_nothing(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no clips here")
    out = tmp_path / "out.blend"
    proc = _bake(str(tmp_path / "empty"), str(shared_file(TARGET)), "-o", str(out))
    assert proc.returncode == 1 and "no clip files" in proc.stderr
    assert not out.exists()


# --- inside Blender ------------------------------------------------------------------------


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
def test_operator_bakes_a_folder_and_saves_its_report(scene_with_target, tmp_path) -> None:
    bpy, target = scene_with_target
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(3):
        shutil.copy(shared_file(DAZ), pack / f"clip{k}.bvh")
    (pack / "broken.bvh").write_text("HIERARCHY\nROOT Hips\n{\n")
    report = tmp_path / "ui_report.json"
    before = len(bpy.data.actions)
    result = bpy.ops.marionette.batch_bake(directory=str(pack), jobs=2, report_path=str(report))
    assert result == {"FINISHED"}
    new = [a for a in bpy.data.actions if a.get("marionette_batch_source")]
    assert len(bpy.data.actions) == before + 3 and sorted(a.name for a in new) == ["clip0", "clip1", "clip2"]
    assert all(a.use_fake_user for a in new)
    r = _report(report)
    assert _statuses(r) == {"broken": "failed", "clip0": "baked", "clip1": "baked", "clip2": "baked"}
    assert "truncated" in next(f["reason"] for f in r["files"] if f["label"] == "broken")
    assert json.loads(bpy.context.scene["marionette_batch_report"])["files_by_status"] == {"baked": 3, "failed": 1}


@pytest.mark.slow
def test_operator_takes_the_sidebars_method_column_and_match_rest(scene_with_target, tmp_path) -> None:
    from marionette.bridge.clip_read import clip_from_action
    from marionette.core.batch.baking import bvh_rest_tails
    from marionette.core.formats.bvh import read_bvh
    from marionette.core.mapping.auto_map import auto_map_skeleton
    from marionette.core.retarget.binding_cache import BindingCache
    from marionette.core.retarget.geometric import RigInput
    from marionette.core.retarget.methods import retarget_with_methods
    from marionette.properties.retarget_settings import fill_rows, options_of
    from marionette.usecases.rigs import rig_input

    bpy, target = scene_with_target
    s = bpy.context.scene.marionette
    tgt_in, tmap = rig_input(target)
    fill_rows(s, tmap, tmap)
    chosen = {"upper_arm.L": "REST_SPACE", "forearm.L": "REST_SPACE", "thigh.R": "REST_SPACE", "index_2.L": "LOCAL_CURL"}
    chosen = {k: v for k, v in chosen.items() if k in tmap.slots}
    for row in s.mapping:
        if row.slot in chosen:
            row.method = chosen[row.slot]
    s.match_rest = True
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(shared_file(DAZ), pack / "daz.bvh")
    report = tmp_path / "ui_report.json"
    assert bpy.ops.marionette.batch_bake(directory=str(pack), jobs=1, report_path=str(report)) == {"FINISHED"}
    r = _report(report)
    assert r["ok"] and r["method"] == {"name": "geometric+rest-space+local-curl", "table": chosen, "match_rest": True}
    assert [c["method"] for f in r["files"] for c in f["clips"]] == ["geometric+rest-space+local-curl"]
    # Blender plays what the core computes for the sidebar's table and Match Rest.
    baked = next(a for a in bpy.data.actions if a.get("marionette_batch_source"))
    bvh = read_bvh(str(pack / "daz.bvh"))
    tails = bvh_rest_tails(bvh)
    src = RigInput(bvh.skeleton(), auto_map_skeleton(bvh.skeleton(), tails).bones(), tails)
    clip = bvh.clip().resample(24.0)
    frames = clip.frame_numbers(24.0)
    played = clip_from_action(target, baked, frames=frames, fps=24.0)
    options = options_of(s)  # the sidebar's options (Plant Feet...) apply to the batch as to one clip
    want = retarget_with_methods(BindingCache(), src, tgt_in, clip, chosen, options, match_rest=True).result.clip
    plain = retarget_with_methods(BindingCache(), src, tgt_in, clip, None, options).result.clip
    bones = [tgt_in.skeleton.index(tgt_in.slots[k]) for k in chosen]
    cols = [played.names.index(tgt_in.skeleton.names[b]) for b in bones]
    dots = np.abs(np.einsum("tbi,tbi->tb", played.rotations[:, cols], want.rotations[:, bones]))
    assert float(1.0 - dots.min()) < 1e-6
    moved = np.abs(np.einsum("tbi,tbi->tb", want.rotations[:, bones], plain.rotations[:, bones]))
    assert float(1.0 - moved.min()) > 1e-4  # the table changed those bones


def _copies(tmp_path, source: str, count: int, stem: str = "clip") -> Path:
    """A pack folder of ``count`` copies of a shared clip."""
    pack = tmp_path / "pack"
    pack.mkdir(exist_ok=True)
    for k in range(count):
        shutil.copy(shared_file(source), pack / f"{stem}{k}.bvh")
    return pack


def _runner(target, pack: Path, jobs: int):
    """The operator's runner for ``pack`` onto ``target`` with default settings, started."""
    from marionette.batch_runner.runner import BatchBake
    from marionette.core.batch.plan import plan_pack
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.bake_pack import bake_settings

    runner = BatchBake(target, bake_settings(target, None, RetargetOptions()), plan_pack([pack]), jobs=jobs)
    runner.start()
    return runner


def test_cancel_keeps_what_is_already_baked(scene_with_target, tmp_path) -> None:
    bpy, target = scene_with_target
    runner = _runner(target, _copies(tmp_path, DAZ, 4), jobs=1)
    assert runner.step() and runner.clips_baked == 1
    runner.cancel("cancelled by the user (Esc)")
    report = runner.finish()
    assert [f.status for f in report.files] == ["baked", "cancelled", "cancelled", "cancelled"]
    assert report.files[1].reason == "not started (cancelled by the user (Esc))"
    kept = [a for a in bpy.data.actions if a.get("marionette_batch_source")]
    assert [a.name for a in kept] == ["clip0"] and kept[0].use_fake_user
    assert target.animation_data.action == kept[0]


# --- memory: the output in volumes ---------------------------------------------------------


def _outputs(report: dict) -> list[Path]:
    return [Path(p) for p in report["outputs"]]


def _read_volumes(bpy, report: dict) -> dict[str, tuple[str, str, dict]]:
    out = {}
    for path in _outputs(report):
        part = _read_output(bpy, path)
        assert not set(part) & set(out), "a clip is in two volumes"
        out.update(part)
    return out


@pytest.fixture(scope="module")
def volume_pack(tmp_path_factory) -> Path:
    pack = tmp_path_factory.mktemp("volume_pack")
    for k in range(7):
        shutil.copy(shared_file(CMU if k % 2 else DAZ), pack / f"c{k}.bvh")
    shutil.copy(shared_file("fbx/quaternius_male_casual.fbx"), pack / "men.fbx")  # 11 clips
    return pack


@pytest.mark.slow
def test_an_output_past_its_budget_is_saved_in_volumes_holding_few_actions_at_once(blender, volume_pack, tmp_path) -> None:
    """18 clips, four per file: the main process never holds more than four Actions, each volume
    is the target plus the next clips in pack order, and together they hold exactly the keys of a
    single-file bake."""
    target = str(shared_file(TARGET))
    whole, split = tmp_path / "whole.blend", tmp_path / "split.blend"
    rw, rs = tmp_path / "whole.json", tmp_path / "split.json"
    assert _bake(str(volume_pack), target, "-o", str(whole), "--jobs", "2", "--report", str(rw)).returncode == 0
    (tmp_path / "split.009.blend").write_text("left by an earlier, larger run")
    proc = _bake(str(volume_pack), target, "-o", str(split), "--jobs", "2", "--max-clips-per-file", "4", "--report", str(rs))
    assert proc.returncode == 0, proc.stderr[-2000:]
    one, many = _report(rw), _report(rs)
    assert one["clips_by_status"] == many["clips_by_status"] == {"baked": 18}
    assert _outputs(one) == [whole]
    assert [p.name for p in _outputs(many)] == ["split.blend", "split.002.blend", "split.003.blend", "split.004.blend", "split.005.blend"]
    assert not (tmp_path / "split.009.blend").exists()  # a stray volume of this output name is gone
    # Measured in the main process after each write: the Actions the open file held.
    assert one["actions_held_max"] == 18 and many["actions_held_max"] == 4
    # Each volume: the target, playing its first clip, and its share in pack order.
    order = [(f["label"], c["clip"]) for f in many["files"] for c in f["clips"]]
    where = [c["output"] for f in many["files"] for c in f["clips"]]
    assert where == sorted(where, key=lambda n: [p.name for p in _outputs(many)].index(n))
    assert [where.count(p.name) for p in _outputs(many)] == [4, 4, 4, 4, 2]
    for path in _outputs(many):
        blender.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
        arm = blender.data.objects[many["target"]["armature"]]
        mine = [a for a in blender.data.actions if a.get("marionette_batch_source")]
        assert arm.animation_data.action in mine and len(mine) == where.count(path.name)
    assert len(order) == 18
    # Together the volumes hold the single file's Actions, key for key.
    assert _read_volumes(blender, many) == _read_output(blender, whole)


@pytest.mark.slow
def test_main_process_memory_does_not_grow_with_the_pack_when_split(blender, tmp_path) -> None:
    """Peak memory of the main process (the kernel's high-water mark) for 8 and for 32 clips,
    four per file, against one file: what one file grows by per clip, volumes do not."""
    target = str(shared_file(TARGET))
    peaks = {}
    for n in (8, 32):
        pack = tmp_path / f"p{n}"
        pack.mkdir()
        for k in range(n):
            shutil.copy(shared_file(CMU), pack / f"c{k:02d}.bvh")
        for budget in ("0", "4"):
            rep = tmp_path / f"r{n}_{budget}.json"
            args = [str(pack), target, "-o", str(tmp_path / f"o{n}_{budget}.blend"), "--jobs", "1", "--report", str(rep)]
            assert _bake(*args, "--max-clips-per-file", budget).returncode == 0
            r = _report(rep)
            peaks[(n, budget)] = r["main_peak_mb"]
            assert r["actions_held_max"] == (n if budget == "0" else 4)
    print(f"main process peak MB (clips, clips per file): {peaks}")
    grow_whole = peaks[(32, "0")] - peaks[(8, "0")]
    grow_split = peaks[(32, "4")] - peaks[(8, "4")]
    # 24 more CMU clips held at once are about 24 x 1.5 MB (114 frames, ~120 curves).
    assert grow_whole > 15.0, peaks
    assert grow_split < 0.25 * grow_whole, peaks


# --- a hanging importer --------------------------------------------------------------------


@pytest.mark.slow
def test_a_file_that_takes_longer_than_the_timeout_fails_and_the_rest_bake(blender, tmp_path) -> None:
    """The FBX is imported by a worker that has not loaded Blender yet (about a second of silence
    for Blender's start and the import); 0.4 s is far longer than any BVH here takes."""
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(shared_file("fbx/quaternius_male_casual.fbx"), pack / "men.fbx")
    for k in range(3):
        shutil.copy(shared_file(DAZ), pack / f"z{k}.bvh")
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "2", "--timeout", "0.4", "--report", str(report))
    assert proc.returncode == 1, proc.stderr[-2000:]
    r = _report(report)
    assert _statuses(r) == {"men": "failed", "z0": "baked", "z1": "baked", "z2": "baked"}
    men = next(f for f in r["files"] if f["label"] == "men")
    assert men["reason"].startswith("timed out after 0.4 s (no answer from the worker while reading the file")
    assert r["counters"]["workers_timed_out"] == 1 and r["timeout"] == 0.4
    assert sorted(_read_output(blender, out)) == ["z0", "z1", "z2"]
    # Without the limit the same file bakes.
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "2", "--report", str(report))
    assert proc.returncode == 0 and _report(report)["clips_by_status"] == {"baked": 14}


# --- one file's clips on two workers -------------------------------------------------------


@pytest.fixture
def long_clips_blend(blender, tmp_path) -> Path:
    """A .blend holding the Quaternius man and twelve 1500-frame clips (his walk and run, repeated
    and shifted), with a constraint on his root bone, as production rigs have: each clip is then
    read by evaluating the rig frame by frame, about half a second a clip."""
    from marionette.bridge.action_write import write_action
    from marionette.bridge.clip_read import clip_from_action, needs_evaluation
    from marionette.bridge.file_import import load_file
    from marionette.core.rig.clip import Clip

    blender.ops.wm.read_factory_settings(use_empty=True)
    loaded = load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    man = loaded.armatures[0]
    walks = [clip_from_action(man, a) for a in loaded.actions if a.name.endswith(("Man_Walk", "Man_Run"))]
    for a in list(blender.data.actions):
        blender.data.actions.remove(a)
    n = 1500
    for k in range(12):
        c = walks[k % 2]
        reps = n // c.frame_count + 1
        rot = np.roll(np.tile(c.rotations, (reps, 1, 1))[:n], 3 * k, axis=0)
        tr = np.roll(np.tile(c.translations, (reps, 1, 1))[:n], 3 * k, axis=0)
        long = Clip(c.names, np.arange(n) / c.fps, c.fps, rot, tr, coverage=c.coverage, name=f"Long{k:02d}")
        write_action(man, long, f"Long{k:02d}", fps=c.fps).use_fake_user = True
    man.pose.bones[0].constraints.new("LIMIT_SCALE")  # limits nothing, but the pose is evaluated
    assert needs_evaluation(man)
    (tmp_path / "long").mkdir()
    path = tmp_path / "long" / "long_clips.blend"
    blender.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


@pytest.mark.slow
def test_a_file_of_long_clips_is_shared_by_two_workers_with_the_keys_of_one(blender, long_clips_blend, tmp_path) -> None:
    target = str(shared_file(TARGET))
    runs = {}
    for jobs in (2, 1):
        out, report = tmp_path / f"j{jobs}.blend", tmp_path / f"j{jobs}.json"
        t0 = time.perf_counter()
        proc = _bake(str(long_clips_blend), target, "-o", str(out), "--jobs", str(jobs), "--max-clips-per-file", "4", "--report", str(report))
        print(f"twelve 1500-frame clips in one file, --jobs {jobs}: {time.perf_counter() - t0:.2f} s")
        assert proc.returncode == 0, proc.stderr[-2000:]
        r = _report(report)
        runs[jobs] = (r, _read_volumes(blender, r))
    r2, r1 = runs[2][0], runs[1][0]
    assert r2["counters"].get("files_split") == 1 and "files_split" not in r1["counters"]
    assert r2["clips_by_status"] == r1["clips_by_status"] == {"baked": 12}
    # Two worker processes each started the file, the second with the last of its clips.
    kept, given = r2["files"][0]["split"]
    assert kept + given == 12 and given >= 2 and "split" not in r1["files"][0]
    clips = [c["clip"] for c in r2["files"][0]["clips"]]
    assert sorted(clips) == [f"Long{k:02d}" for k in range(12)]
    assert clips == [c["clip"] for c in r1["files"][0]["clips"]]  # the file's order, whoever baked them
    # The volumes are what one worker writes, byte for byte.
    assert [Path(p).name for p in r2["outputs"]] == ["j2.blend", "j2.002.blend", "j2.003.blend"]
    assert runs[2][1] == runs[1][1]


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


# --- resuming under other settings ---------------------------------------------------------


@pytest.mark.slow
def test_resume_rebakes_clips_baked_with_other_settings_and_says_why(blender, tmp_path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(3):
        shutil.copy(shared_file(DAZ if k else CMU), pack / f"c{k}.bvh")
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    target = str(shared_file(TARGET))
    assert _bake(str(pack), target, "-o", str(out), "--jobs", "1").returncode == 0
    geometric = _read_output(blender, out)
    proc = _bake(str(pack), target, "-o", str(out), "--jobs", "1", "--resume", "--method", "rest-space", "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _report(report)
    assert r["clips_by_status"] == {"baked": 3} and r["counters"]["clips_rebaked"] == 3
    assert {c["rebaked"] for f in r["files"] for c in f["clips"]} == {"baked with other settings: method geometric -> rest-space"}
    rest_space = _read_output(blender, out)
    assert sorted(rest_space) == sorted(geometric) and all(rest_space[n][2] != geometric[n][2] for n in geometric)
    for a in blender.data.actions:
        if a.get("marionette_batch_source"):
            assert json.loads(a["marionette_batch_settings"])["method"] == "rest-space"
    # Resumed again with the same settings, nothing is baked again.
    proc = _bake(str(pack), target, "-o", str(out), "--jobs", "1", "--resume", "--method", "rest-space", "--report", str(report))
    assert proc.returncode == 0 and _report(report)["clips_by_status"] == {"already baked": 3}
    assert _read_output(blender, out) == rest_space


@pytest.mark.slow
def test_resume_continues_every_volume_and_rebakes_only_changed_clips(blender, volume_pack, tmp_path) -> None:
    """A run in volumes killed after its first volumes were saved; the resume keeps what those
    volumes hold, and the whole equals an uninterrupted bake."""
    target = str(shared_file(TARGET))
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    parts = Path(str(out) + ".parts")
    proc = subprocess.Popen(
        _bake_command(str(volume_pack), target, "-o", str(out), "--jobs", "2", "--max-clips-per-file", "3"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(lambda: sum(e.get("event") == "volume" for e in _journal(parts)) >= 2, what="two volumes")
    proc.kill()
    proc.wait()
    workers = [e["pid"] for e in _journal(parts) if e.get("event") == "worker"]
    _wait_for(lambda: not any(_pid_alive(p) for p in workers), what="workers to notice")
    assert (tmp_path / "out.002.blend").exists()
    proc = _bake(str(volume_pack), target, "-o", str(out), "--jobs", "2", "--max-clips-per-file", "3", "--resume", "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _report(report)
    counts = r["clips_by_status"]
    assert counts.get("already baked", 0) >= 6 and sum(counts.values()) == 18
    assert "clips_rebaked" not in r["counters"]
    # The report says which file holds each clip, kept or new.
    held = {p.name: set(_read_output(blender, p)) for p in _outputs(r)}
    assert all(c["action"] in held[c["output"]] for f in r["files"] for c in f["clips"])
    clean_report = tmp_path / "clean.json"
    assert _bake(str(volume_pack), target, "-o", str(tmp_path / "clean.blend"), "--jobs", "1", "--max-clips-per-file", "3", "--report", str(clean_report)).returncode == 0
    assert _read_volumes(blender, r) == _read_volumes(blender, _report(clean_report))


# --- the operator's modal path -------------------------------------------------------------


@pytest.mark.slow
def test_the_modal_path_bakes_on_timer_ticks_and_esc_keeps_what_is_baked(scene_with_target, tmp_path) -> None:
    """The operator's event handling (ModalDriver) driven with the events Blender sends it: timer
    ticks write what arrived within the tick's budget, other events pass through, Esc cancels."""
    from marionette.batch_runner.driving import ModalDriver
    from marionette.batch_runner.runner import BatchBake
    from marionette.core.batch.plan import plan_pack
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.bake_pack import bake_settings

    bpy, target = scene_with_target
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(4):
        shutil.copy(shared_file(DAZ), pack / f"clip{k}.bvh")
    _big_bvh(pack / "m_big.bvh", repeat=100)  # sorted between clip3 and the rest: keeps a worker busy
    for k in range(4):
        shutil.copy(shared_file(DAZ), pack / f"x{k}.bvh")
    settings = bake_settings(target, None, RetargetOptions())
    runner = BatchBake(target, settings, plan_pack([pack]), jobs=2)
    runner.start()
    driver = ModalDriver(runner, budget=0.04)
    assert driver.event("MOUSEMOVE", "NOTHING") == "PASS_THROUGH"
    assert driver.event("ESC", "RELEASE") != "FINISHED"
    answers = []
    deadline = time.monotonic() + 120
    while runner.clips_baked < 4 and time.monotonic() < deadline:
        answers.append(driver.event("TIMER", "NOTHING"))
        time.sleep(0.01)
    assert set(answers) == {"RUNNING_MODAL"} and runner.clips_baked >= 4
    assert runner.progress_text().startswith(f"{runner.files_done}/9 files, {runner.clips_baked} clips baked")
    assert driver.event("ESC", "PRESS") == "FINISHED"
    report = runner.finish()
    statuses = {f.label: f.status for f in report.files}
    assert statuses["m_big"] == "cancelled" and report.interrupted == "cancelled by the user (Esc)"
    kept = sorted(a.name for a in bpy.data.actions if a.get("marionette_batch_source"))
    assert kept == sorted(k for k, s in statuses.items() if s == "baked") and len(kept) >= 4
    assert all(s in ("baked", "cancelled") for s in statuses.values())


@pytest.mark.slow
def test_the_modal_path_runs_to_the_end_on_timer_ticks(scene_with_target, tmp_path) -> None:
    from marionette.batch_runner.driving import ModalDriver

    bpy, target = scene_with_target
    runner = _runner(target, _copies(tmp_path, CMU, 3), jobs=2)
    driver = ModalDriver(runner)
    answer = "RUNNING_MODAL"
    deadline = time.monotonic() + 120
    while answer == "RUNNING_MODAL" and time.monotonic() < deadline:
        answer = driver.event("TIMER", "NOTHING")
        time.sleep(0.01)
    assert answer == "FINISHED" and driver.ticks >= 1
    report = runner.finish()
    assert report.ok and [f.status for f in report.files] == ["baked"] * 3
    assert sorted(a.name for a in bpy.data.actions if a.get("marionette_batch_source")) == ["clip0", "clip1", "clip2"]


@pytest.mark.slow
def test_clips_waiting_for_their_turn_past_the_limit_are_read_back_from_their_parts(scene_with_target, tmp_path) -> None:
    """With no room for waiting clips, every clip is dropped from memory on arrival and written
    from its part: the same Actions, key for key, as when they wait in memory."""
    from marionette.batch_runner.runner import BatchBake
    from marionette.core.batch.plan import plan_pack
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.bake_pack import bake_settings

    bpy, target = scene_with_target
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(4):
        shutil.copy(shared_file(CMU if k % 2 else DAZ), pack / f"clip{k}.bvh")
    settings = bake_settings(target, None, RetargetOptions())
    keys = {}
    for limit in (0.0, 256.0):
        for a in [a for a in bpy.data.actions if a.get("marionette_batch_source")]:
            bpy.data.actions.remove(a)
        parts = tmp_path / f"parts{limit}"
        report = BatchBake(target, settings, plan_pack([pack]), jobs=2, parts_dir=str(parts), waiting_mb=limit).run()
        assert report.ok and report.clip_counts() == {"baked": 4}
        assert report.counters.get("clips_reloaded", 0) == (4 if limit == 0.0 else 0)
        got = {}
        for a in bpy.data.actions:
            if a.get("marionette_batch_source"):
                for fc in _fcurves(a):
                    buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
                    fc.keyframe_points.foreach_get("co", buf)
                    got[(a.name, fc.data_path, fc.array_index)] = buf.tobytes()
        keys[limit] = got
    assert keys[0.0] and keys[0.0] == keys[256.0]
