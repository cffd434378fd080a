"""Batch Bake never hangs on a pack entry, never leaves a worker behind, and a refused run leaves
nothing behind: real processes, real named pipes, real signals.

Every command-line run is bounded (``timeout=`` on the subprocess), so a regression to a hang
fails the test instead of stopping the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.data import shared_file

TARGET = "gltf/male_base_mesh_apose.glb"  # 56 bones, A-pose, Rigify-style names
CMU = "bvh/cmu/12_03_motionbuilder.bvh"
BOUND = 300  # seconds: far above any run here; only a hang reaches it


def _bake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marionette", "bake-pack", *args], capture_output=True, text=True, timeout=BOUND)


def _pack(tmp_path: Path, count: int = 2) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(count):
        shutil.copy(shared_file(CMU), pack / f"clip{k}.bvh")
    return pack


def _statuses(report: dict) -> dict[str, str]:
    return {f["label"]: f["status"] for f in report["files"]}


def _reason(report: dict, label: str) -> str:
    return next(f.get("reason", "") for f in report["files"] if f["label"] == label)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _release(fifo: Path) -> None:
    """Let a reader blocked on ``fifo`` go (a writer opens and closes it: the reader sees the end)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waits


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (``None``: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")  # a zombie has ended; only its parent has not reaped it


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid``, from a scan of /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.add(int(entry))
    return found


# --- entries that are not regular files ------------------------------------------------------


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes (os.mkfifo) exist on POSIX only")


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
@needs_fifo
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_fifo_and_a_device_in_the_pack_are_skipped_unopened_and_the_rest_bakes(tmp_path, jobs) -> None:
    pack = _pack(tmp_path)
    os.mkfifo(pack / "pipe.bvh")  # opening it for reading would wait for a writer forever
    os.symlink(os.devnull, pack / "null.bvh")  # a character device behind a clip's name
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", str(jobs), "--timeout", "20", "--report", str(report))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    r = json.loads(report.read_text())
    assert _statuses(r) == {"clip0": "baked", "clip1": "baked", "pipe": "failed", "null": "failed"}
    assert _reason(r, "pipe") == "not a regular file (a named pipe (FIFO)); skipped without opening it"
    assert _reason(r, "null") == "not a regular file (a character device); skipped without opening it"
    assert "timeout" not in json.dumps(r["counters"])  # skipped, not stopped by --timeout
    assert "pipe.bvh: not a regular file (a named pipe (FIFO))" in proc.stdout
    assert out.exists() and not Path(str(out) + ".parts").exists()


@needs_fifo
def test_planning_refuses_what_is_not_a_regular_file_named_directly_or_in_a_folder(tmp_path) -> None:
    import socket

    from marionette.core.batch.plan import plan_pack

    folder = tmp_path / "pack"
    folder.mkdir()
    (folder / "good.bvh").write_text("HIERARCHY\n")  # a regular file: planned, read later
    os.mkfifo(folder / "pipe.bvh")
    os.mkfifo(tmp_path / "named.bvh")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "sock.fbx"))
        os.symlink(folder / "gone.bvh", folder / "broken.bvh")
        guard = threading.Timer(BOUND, lambda: [_release(f) for f in (folder / "pipe.bvh", tmp_path / "named.bvh")])
        guard.start()  # should planning open a pipe, it is let go and the test fails below
        try:
            plan = plan_pack([folder, tmp_path / "named.bvh", tmp_path / "missing.bvh"])
        finally:
            guard.cancel()
    finally:
        sock.close()
    assert [f.label for f in plan.files] == ["good"]
    assert {os.path.basename(p): why for p, why in plan.refused} == {
        "broken.bvh": "cannot be read (No such file or directory); skipped without opening it",
        "pipe.bvh": "not a regular file (a named pipe (FIFO)); skipped without opening it",
        "sock.fbx": "not a regular file (a socket); skipped without opening it",
        "named.bvh": "not a regular file (a named pipe (FIFO)); skipped without opening it",
        "missing.bvh": "no such file or folder",
    }


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
@needs_fifo
def test_a_file_that_hangs_its_reader_is_stopped_by_the_timeout_with_one_worker(blender, tmp_path) -> None:
    """A file that turned into a named pipe after the pack was planned (the one case the planning
    cannot see): with ``jobs=1`` the read hangs in the worker, ``--timeout`` stops it, and the
    next file bakes in a new worker."""
    from marionette.batch_runner.runner import BatchBake
    from marionette.bridge.file_import import load_file
    from marionette.core.batch.plan import PackFile, PackPlan
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.bake_pack import bake_settings

    pack = _pack(tmp_path, 1)
    fifo = pack / "late.bvh"
    os.mkfifo(fifo)
    target = load_file(shared_file(TARGET)).armatures[0]
    plan = PackPlan((PackFile(str(fifo), "late"), PackFile(str(pack / "clip0.bvh"), "clip0")))
    # Should the timeout not work, the reader is let go after BOUND s: the test then fails on the
    # reason below instead of hanging.
    guard = threading.Timer(BOUND, _release, (fifo,))
    guard.start()
    try:
        report = BatchBake(target, bake_settings(target, None, RetargetOptions()), plan, jobs=1, timeout=1.0).run()
    finally:
        guard.cancel()
    statuses = {f.label: f.status for f in report.files}
    assert statuses == {"late": "failed", "clip0": "baked"}
    assert report.files[0].reason == "timed out after 1 s (no answer from the worker while reading and retargeting the file; it was stopped)"
    assert report.counters["workers_timed_out"] == 1 and report.counters["workers_started"] == 2


# --- workers end with the main process -------------------------------------------------------

_DRIVER = r"""
import json, sys, time
from marionette.core.batch.baking import bvh_rest_tails
from marionette.core.batch.settings import BakeSettings
from marionette.core.formats.bvh import read_bvh
from marionette.core.mapping.auto_map import auto_map_skeleton
from marionette.core.retarget.geometric import RigInput
from marionette.batch_runner.worker_pool import WorkerPool

bvh, fifo, logs = sys.argv[1:4]
data = read_bvh(bvh)
tails = bvh_rest_tails(data)
sk = data.skeleton()
settings = BakeSettings(RigInput(sk, auto_map_skeleton(sk, tails).bones(), tails), "test", 24.0)
pool = WorkerPool(logs)
pool.launch(1, False, fork=True)  # forked from this process, as the command line starts them
pool.launch(1, False)  # started as a new program, as inside Blender
workers = pool.connect()
for k, w in enumerate(workers):
    pool.send(w, {"op": "setup", "settings": settings.to_message(), "parts_dir": None})
    pool.send(w, {"op": "file", "file": k, "path": fifo, "skip": []})
started = 0
while started < len(workers):
    started += sum(m is not None and m["op"] == "start" for _, m in pool.receive(1.0))
print(json.dumps([w.pid for w in workers]), flush=True)
time.sleep(3600)
"""


@pytest.mark.slow
@pytest.mark.data
@needs_fifo
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table from /proc (Linux)")
def test_kill_9_of_the_main_process_leaves_no_worker_stuck_on_a_file(tmp_path) -> None:
    """Two workers (one forked, one a new program) stuck reading a named pipe, which they never
    finish; the process that started them is killed with SIGKILL. Both end."""
    fifo = tmp_path / "stuck.bvh"
    os.mkfifo(fifo)
    logs = tmp_path / "logs"
    logs.mkdir()
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(shared_file(CMU)), str(fifo), str(logs)], stdout=subprocess.PIPE, text=True)
    guard = threading.Timer(BOUND, driver.kill)
    guard.start()
    pids: list[int] = []
    try:
        line = driver.stdout.readline()  # type: ignore[union-attr]
        assert line, "the driver ended before its workers started"
        pids = json.loads(line)
        children = _children(driver.pid)  # recorded before the kill
        assert set(pids) <= children and len(pids) == 2
        deadline = time.monotonic() + 30.0  # each is on its way to the pipe: wait until it sleeps there
        while not all(_state(p) == "S" for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(_state(p) == "S" for p in pids)  # asleep: waiting for a writer that never comes
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 30.0
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in children if _alive(p)]
        assert not left, f"workers left running after their parent was killed: {left}"
    finally:
        guard.cancel()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)  # a failed run must not leave them behind either
        _release(fifo)


# --- --jobs lowered to what can be used ------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "cores", "files", "shared", "want", "note"),
    [
        (500, 2, 1, 1, 2, "--jobs 500 lowered to 2: one worker per core (2 cores)"),
        (500, 8, 1, 1, 2, "--jobs 500 lowered to 2: the most the pack can use (1 file; a file read through an importer is shared by at most two workers)"),
        (500, 8, 3, 0, 3, "--jobs 500 lowered to 3: one worker per file (3 files)"),
        (4, 1, 10, 0, 1, "--jobs 4 lowered to 1: one worker per core (1 core)"),
        (2, 8, 5, 0, 2, None),
        (1, 8, 5, 5, 1, None),
        (None, 8, 3, 0, 3, None),  # not asked: nothing to say
        (None, 2, 40, 0, 2, None),
    ],
)
def test_jobs_are_lowered_to_the_cores_and_the_packs_work(requested, cores, files, shared, want, note) -> None:
    from marionette.core.batch.pack_limits import useful_jobs

    assert useful_jobs(requested, cores, files, shared) == (want, note)


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
def test_jobs_500_is_lowered_and_says_so(tmp_path) -> None:
    pack = _pack(tmp_path)
    out, report = tmp_path / "out.blend", tmp_path / "report.json"
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "500", "--report", str(report))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    n = min(_cores(), 2)
    said = [ln for ln in proc.stderr.splitlines() if "--jobs 500 lowered" in ln]
    assert len(said) == 1 and said[0].startswith(f"marionette: --jobs 500 lowered to {n}: ")
    r = json.loads(report.read_text())
    assert r["jobs"] == n and r["jobs_requested"] == 500 and r["jobs_note"] == said[0].removeprefix("marionette: ")
    assert r["counters"]["workers_started"] == n
    assert _statuses(r) == {"clip0": "baked", "clip1": "baked"}
    assert _tree(tmp_path) == {"pack", "pack/clip0.bvh", "pack/clip1.bvh", "out.blend", "report.json"}


# --- refused runs leave nothing --------------------------------------------------------------


def _no_armature() -> str:
    return str(shared_file("gltf/kenney_character_no_armature.glb"))


def _no_body() -> str:
    """A rig that is neither a humanoid nor a quadruped (two bones)."""
    return str(shared_file("gltf/khronos_simple_skin.gltf"))


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing target", "nothere.glb: no such file"),
        ("bad mapping", "mapping"),
        ("no armature", "the file has no armature"),
        ("target of no body Marionette reads", "not a humanoid rig"),
    ],
)
def test_a_refused_run_leaves_no_parts_folder_and_no_output(tmp_path, case, message) -> None:
    pack = _pack(tmp_path)
    bad_mapping = tmp_path / "mapping.json"
    bad_mapping.write_text("{not json")
    target, extra = str(shared_file(TARGET)), []
    if case == "missing target":
        target = str(tmp_path / "nothere.glb")
    elif case == "bad mapping":
        extra = ["--mapping", str(bad_mapping)]
    elif case == "no armature":
        target = _no_armature()
    else:
        target = _no_body()
    before = _tree(tmp_path)
    proc = _bake(str(pack), target, "-o", str(tmp_path / "out.blend"), "--jobs", "2", *extra)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("marionette: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr[-2000:]
    assert proc.stdout == ""
    assert _tree(tmp_path) == before  # no out.blend, no out.blend.parts/, nothing else


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
def test_a_refused_resume_keeps_the_interrupted_runs_parts(tmp_path) -> None:
    pack = _pack(tmp_path)
    parts = tmp_path / "out.blend.parts"
    parts.mkdir()
    kept = parts / "clip-from-the-interrupted-run.npz"
    kept.write_bytes(b"computed before the interruption")
    proc = _bake(str(pack), _no_body(), "-o", str(tmp_path / "out.blend"), "--resume")
    assert proc.returncode == 1 and "not a humanoid rig" in proc.stderr
    assert kept.read_bytes() == b"computed before the interruption"
    assert not (tmp_path / "out.blend").exists()


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("case", ["misspelled folder", "only a fifo"])
def test_a_pack_with_nothing_to_bake_is_refused_and_writes_nothing(tmp_path, case) -> None:
    _pack(tmp_path)  # the real pack, beside the name given
    if case == "misspelled folder":
        given = tmp_path / "pakc"
        line = f"{given}: no such file or folder (no clip files to bake)"
    else:
        if not hasattr(os, "mkfifo"):
            pytest.skip("named pipes (os.mkfifo) exist on POSIX only")
        given = tmp_path / "pipes"
        given.mkdir()
        os.mkfifo(given / "pipe.bvh")
        line = f"{given / 'pipe.bvh'}: not a regular file (a named pipe (FIFO)); skipped without opening it (no clip files to bake)"
    before = _tree(tmp_path)
    proc = _bake(str(given), str(shared_file(TARGET)), "-o", str(tmp_path / "out.blend"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"marionette: error: {line}"] and proc.stdout == ""
    assert _tree(tmp_path) == before


@pytest.mark.data
@needs_fifo
def test_a_named_pipe_given_as_the_mapping_is_refused_unopened(tmp_path) -> None:
    pack = _pack(tmp_path)
    fifo = tmp_path / "mapping.json"
    os.mkfifo(fifo)
    before = _tree(tmp_path)
    guard = threading.Timer(BOUND - 10, _release, (fifo,))  # should it be opened, it is let go
    guard.start()
    try:
        proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(tmp_path / "out.blend"), "--mapping", str(fifo))
    finally:
        guard.cancel()
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"marionette: error: cannot read bone mapping {fifo}: not a regular file (a named pipe (FIFO))"]
    assert _tree(tmp_path) == before


@pytest.mark.slow
@pytest.mark.bpy
@pytest.mark.data
def test_humanoid_clips_onto_a_quadruped_say_so(tmp_path) -> None:
    """A quadruped is a target of its own now: a pack of humanoid clips onto the shared Fox fails
    clip by clip, each saying the clip is a humanoid's and the target a quadruped."""
    pack = _pack(tmp_path)
    proc = _bake(str(pack), str(shared_file("gltf/khronos_fox_quadruped.glb")), "-o", str(tmp_path / "out.blend"), "--jobs", "1")
    assert proc.returncode == 1, proc.stderr[-2000:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("failed")]
    assert failed and all("a humanoid's clip, and the target is a quadruped" in ln for ln in failed), proc.stdout[-2000:]
