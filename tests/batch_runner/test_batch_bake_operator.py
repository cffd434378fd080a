"""Batch Bake inside Blender: the operator bakes a folder with the sidebar's settings, its modal
path runs on timer ticks, and cancelling (Esc) keeps what is already baked."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.batch_bake import CMU, DAZ, TARGET, _big_bvh, _report, _statuses
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


def _fcurves(action) -> list:
    from marionette.bridge import compat

    return [fc for slot in action.slots for fc in compat.action_fcurves(action, slot)]


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
