"""Batch Bake memory: an output past its budget is saved in volumes, the main process does not
grow with the pack, resume continues every volume, and a file of long clips is shared by two
workers with the keys of one."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.batch_bake import (
    CMU,
    DAZ,
    TARGET,
    _bake,
    _bake_command,
    _journal,
    _pid_alive,
    _read_output,
    _report,
    _wait_for,
)
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


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


# --- resuming under other settings ---------------------------------------------------------


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
