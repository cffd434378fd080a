"""Batch Bake loses nothing: a killed worker, Ctrl-C, a dead main process or a hanging importer
costs only the clips named in the report, and resume completes the pack, rebaking only clips
baked with other settings."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers.batch_bake import (
    CMU,
    DAZ,
    TARGET,
    _bake,
    _bake_command,
    _big_bvh,
    _journal,
    _pid_alive,
    _read_output,
    _report,
    _statuses,
    _wait_for,
)
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


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
