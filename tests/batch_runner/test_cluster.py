"""bake-pack on a Dask cluster (``--cluster``): the same keys as ``--jobs 1``, a worker killed
mid-clip costing nothing, a clip that kills its workers reported, an unreachable scheduler refused
before anything is written. The clusters are real: ``local:2``, and a scheduler with two workers
started on 127.0.0.1 by these tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.batch_bake import CMU, DAZ, TARGET, _bake, _bake_command, _big_bvh, _read_output, _report, _statuses
from tests.helpers.data import shared_file

distributed = pytest.importorskip("distributed", reason="bake-pack --cluster needs the cluster extra (dask, distributed)")

pytestmark = [pytest.mark.bpy, pytest.mark.data]

WALK = "bvh/makehuman/walk1_zup.bvh"
FBX = "fbx/quaternius_male_casual.fbx"  # 11 clips


def _pack(root: Path, files: list[str]) -> Path:
    root.mkdir()
    for rel in files:
        shutil.copy(shared_file(rel), root / Path(rel).name)
    return root


def _two_workers():
    """A scheduler and two single-thread worker processes (with nannies) on 127.0.0.1."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, silence_logs=40
    )
    client = Client(cluster, set_as_default=False)
    try:
        yield cluster, client
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def dask_cluster():
    """Two workers shared by the tests that kill none."""
    yield from _two_workers()


@pytest.fixture
def dask_cluster_to_kill():
    """Two workers of the test's own, for a test that kills them: after such a test a shared
    cluster was once left with one nanny (two suites running side by side on two cores), and the
    tests after it waited for two workers in vain."""
    yield from _two_workers()


def test_parse_cluster_refuses_what_is_no_address() -> None:
    from marionette.batch_runner.cluster import parse_cluster
    from marionette.core.errors import MarionetteError

    assert parse_cluster("local:3") == (None, 3)
    assert parse_cluster("tcp://10.0.0.5:8786") == ("tcp://10.0.0.5:8786", 0)
    for bad in ("local:0", "local:x", "10.0.0.5:8786", "tcp://"):
        with pytest.raises(MarionetteError, match="--cluster"):
            parse_cluster(bad)


def test_unreachable_scheduler_is_refused_and_nothing_written(tmp_path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pack = _pack(tmp_path / "pack", [CMU])
    out = tmp_path / "out.blend"
    t0 = time.perf_counter()
    proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--cluster", f"tcp://127.0.0.1:{port}", "--report", str(tmp_path / "r.json"))
    seconds = time.perf_counter() - t0
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "cannot reach the Dask scheduler" in proc.stderr and str(port) in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]  # no output, no parts, no report
    print(f"refused in {seconds:.1f} s")


@pytest.mark.slow
def test_local_cluster_writes_the_keys_of_jobs_1_and_resumes_a_local_run(blender, tmp_path) -> None:
    pack = _pack(tmp_path / "pack", [CMU, DAZ, WALK, FBX])
    target = str(shared_file(TARGET))
    runs = {}
    for name, how in (("jobs1", ["--jobs", "1"]), ("local2", ["--cluster", "local:2"])):
        blend, report = tmp_path / f"{name}.blend", tmp_path / f"{name}.json"
        proc = _bake(str(pack), target, "-o", str(blend), *how, "--report", str(report))
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = (proc, blend, _report(report))
    (_, b1, r1), (p2, b2, r2) = runs["jobs1"], runs["local2"]
    assert _statuses(r1) == _statuses(r2)
    a1, a2 = _read_output(blender, b1), _read_output(blender, b2)
    assert sorted(a1) == sorted(a2) and len(a1) == 14
    for name in a1:
        assert a1[name][:2] == a2[name][:2]
        assert a1[name][2] == a2[name][2], name  # byte-identical keys
    # The report says which worker baked what; progress named them per clip.
    workers = r2["cluster"]["workers"]
    assert r2["jobs"] == 2  # the cluster's worker threads
    assert len(workers) >= 1 and sum(w["clips"] for w in workers.values()) == 14
    assert sum(w["files"] for w in workers.values()) == 4
    assert all(w["seconds"] > 0 for w in workers.values())
    lines = [ln for ln in (p2.stdout + p2.stderr).splitlines() if ln.startswith("  clip ")]
    assert len(lines) == 14 and all(" on " in ln and "(pid " in ln and "clips/s" in ln for ln in lines), lines[:3]
    assert r2["cluster"]["files_recomputed"] == [] and r2["binding_cache"]["binding_misses"] >= 1
    # A cluster run continues a local run's output: everything is there already.
    shutil.copy(b1, tmp_path / "cont.blend")
    proc = _bake(str(pack), target, "-o", str(tmp_path / "cont.blend"), "--cluster", "local:2", "--resume", "--report", str(tmp_path / "cont.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    cont = _report(tmp_path / "cont.json")
    assert cont["clips_by_status"] == {"already baked": 14}


@pytest.mark.slow
def test_worker_killed_mid_clip_the_clip_is_recomputed_elsewhere(blender, tmp_path, dask_cluster_to_kill) -> None:
    cluster, client = dask_cluster_to_kill
    client.wait_for_workers(2, timeout=60)
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(4):
        _big_bvh(pack / f"long_{k}.bvh", repeat=30)
    pids = dict(client.run(os.getpid))
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    proc = subprocess.Popen(
        _bake_command(str(pack), str(shared_file(TARGET)), "-o", str(out), "--cluster", cluster.scheduler_address, "--report", str(report)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        for addr, keys in client.processing().items():
            if any(str(k).startswith("marionette-") for k in keys) and addr in pids:
                time.sleep(0.3)  # well into the clip
                os.kill(pids[addr], signal.SIGKILL)
                killed = (addr, [str(k) for k in keys])
                break
        time.sleep(0.02)
    stdout, stderr = proc.communicate(timeout=300)
    assert killed is not None, "no task was seen running"
    assert proc.returncode == 0, stderr[-3000:]
    r = _report(report)
    assert set(_statuses(r).values()) == {"baked"} and r["clips_by_status"] == {"baked": 4}
    recomputed = r["cluster"]["files_recomputed"]
    assert len(recomputed) >= 1 and all(x["workers_lost"] == 1 for x in recomputed)
    lost = {os.path.basename(x["path"]) for x in recomputed}
    assert any(name.removesuffix(".bvh") in k for name in lost for k in killed[1])
    warned = [c for f in r["files"] for c in f["clips"] if any("recomputed" in w for w in c.get("warnings", []))]
    assert {c["clip"] + ".bvh" for c in warned} == lost
    assert len(_read_output(blender, out)) == 4


def _bake_killing_on_poison(cluster, client, pack, tmp_path) -> tuple[dict, Path]:
    """bake-pack of ``pack`` on ``cluster``, each worker dying as it starts a file named
    ``poison``; the run's exit status 1 checked, its report and output returned."""
    from tests.helpers.dask_cluster import KillOnFile

    client.register_plugin(KillOnFile("poison"))
    try:
        out, report = tmp_path / "out.blend", tmp_path / "r.json"
        proc = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--cluster", cluster.scheduler_address, "--report", str(report))
    finally:
        client.unregister_worker_plugin("kill-on-file")
    assert proc.returncode == 1, proc.stderr[-3000:]
    return _report(report), out


@pytest.mark.slow
def test_a_clip_that_kills_two_workers_is_reported_and_the_rest_bake(blender, tmp_path, dask_cluster_to_kill) -> None:

    cluster, client = dask_cluster_to_kill
    client.wait_for_workers(2, timeout=60)
    # The FBX is imported by workers started from this process, which has loaded Blender.
    pack = _pack(tmp_path / "pack", [CMU, DAZ, FBX])
    shutil.copy(shared_file(WALK), pack / "poison_walk.bvh")
    r, out = _bake_killing_on_poison(cluster, client, pack, tmp_path)
    expected = {"02_02_daz": "baked", "12_03_motionbuilder": "baked", "quaternius_male_casual": "baked", "poison_walk": "failed"}
    assert _statuses(r) == expected, r["files"]
    poison = next(f for f in r["files"] if f["label"] == "poison_walk")
    assert "worker died twice" in poison["reason"]
    assert [c["status"] for c in poison["clips"]] == ["failed"] and "worker died twice" in poison["clips"][0]["reason"]
    assert [os.path.basename(p) for p in r["cluster"]["files_killing_workers"]] == ["poison_walk.bvh"]
    assert len(_read_output(blender, out)) == 2 + 11


@pytest.mark.slow
def test_ctrl_c_keeps_what_the_cluster_baked_and_a_local_run_resumes_it(blender, tmp_path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(40):
        shutil.copy(shared_file((CMU, DAZ)[k % 2]), pack / f"{k:03d}.bvh")
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    proc = subprocess.Popen(
        _bake_command(str(pack), str(shared_file(TARGET)), "-o", str(out), "--cluster", "local:2", "--report", str(report)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("  clip 5:"):
            proc.send_signal(signal.SIGINT)
            break
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    first = _report(report)
    kept = first["clips_by_status"]["baked"]
    assert 5 <= kept < 40 and first["interrupted"]
    assert len(_read_output(blender, out)) == kept
    proc2 = _bake(str(pack), str(shared_file(TARGET)), "-o", str(out), "--jobs", "2", "--resume", "--report", str(report))
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert _report(report)["clips_by_status"] == {"already baked": kept, "baked": 40 - kept}


def test_jobs_with_cluster_and_ship_inputs_without_cluster_are_refused(tmp_path) -> None:
    pack = _pack(tmp_path / "pack", [CMU])
    out = tmp_path / "out.blend"
    target = str(shared_file(TARGET))
    proc = _bake(str(pack), target, "-o", str(out), "--cluster", "local:2", "--jobs", "2")
    assert proc.returncode == 2 and "--jobs and --cluster" in proc.stderr, proc.stderr[-2000:]
    proc = _bake(str(pack), target, "-o", str(out), "--ship-inputs")
    assert proc.returncode == 2 and "--ship-inputs" in proc.stderr and "--cluster" in proc.stderr, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]


@pytest.mark.slow
def test_ship_inputs_workers_bake_files_they_cannot_read_with_the_keys_of_jobs_1(blender, tmp_path, dask_cluster) -> None:
    from tests.helpers.dask_cluster import RemoveOnStart, shipped_leftovers

    cluster, client = dask_cluster
    client.wait_for_workers(2, timeout=60)
    # The FBX (1.9 MB) is scattered to the cluster before its task; the BVH files travel in theirs.
    pack = _pack(tmp_path / "pack", [CMU, DAZ, WALK, FBX])
    target = str(shared_file(TARGET))
    ref, ref_report = tmp_path / "jobs1.blend", tmp_path / "jobs1.json"
    proc = _bake(str(pack), target, "-o", str(ref), "--jobs", "1", "--report", str(ref_report))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Each worker removes a file from the pack as its task starts: read by its path, it is gone.
    client.register_plugin(RemoveOnStart(str(pack)))
    try:
        out, report = tmp_path / "shipped.blend", tmp_path / "shipped.json"
        proc = _bake(str(pack), target, "-o", str(out), "--cluster", cluster.scheduler_address, "--ship-inputs", "--report", str(report))
    finally:
        client.unregister_worker_plugin("remove-on-start")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(pack.iterdir()) == []  # every file was removed before a worker baked it
    r1, r2 = _report(ref_report), _report(report)
    assert _statuses(r1) == _statuses(r2) and set(_statuses(r2).values()) == {"baked"}
    a1, a2 = _read_output(blender, ref), _read_output(blender, out)
    assert sorted(a1) == sorted(a2) and len(a1) == 14
    for name in a1:
        assert a1[name][:2] == a2[name][:2]  # named by the pack's path here, not the workers' copies
        assert a1[name][2] == a2[name][2], name  # byte-identical keys
    assert all(not left for left in client.run(shipped_leftovers).values())  # the copies are removed


@pytest.mark.slow
def test_ship_inputs_a_file_this_machine_cannot_read_fails_alone(tmp_path, dask_cluster) -> None:
    from marionette.batch_runner.cluster import ClusterPool

    cluster, client = dask_cluster
    client.wait_for_workers(2, timeout=60)
    pool = ClusterPool(cluster.scheduler_address, ship=True)
    try:
        pool.launch(1, False)
        (w,) = pool.connect()
        missing = tmp_path / "gone.bvh"
        assert pool.send(w, {"op": "file", "file": 0, "path": str(missing), "skip": []})
        got = []
        deadline = time.monotonic() + 30
        while not any(m["op"] == "file_done" for _, m in got) and time.monotonic() < deadline:
            got += pool.receive(0.1)
    finally:
        pool.close()
    ops = [m["op"] for _, m in got]
    assert ops == ["start", "clip_failed", "file_failed", "file_done"], ops
    failed = got[2][1]
    assert "--ship-inputs: cannot read it on this machine" in failed["reason"] and str(missing) in failed["reason"]
    assert got[1][1]["clip"] == "gone" and got[1][1]["reason"] == failed["reason"]


@pytest.mark.slow
def test_the_schedulers_settings_are_restored_when_a_run_ends_or_its_client_dies(tmp_path, dask_cluster) -> None:
    cluster, client = dask_cluster
    client.wait_for_workers(2, timeout=60)
    scheduler = cluster.scheduler  # this process's: its settings are read here
    own = (5, 2.5)  # not Dask's defaults, nor what a run sets
    scheduler.allowed_failures, scheduler.WORKER_SATURATION = own
    pack = tmp_path / "pack"
    pack.mkdir()
    for k in range(30):
        shutil.copy(shared_file((CMU, DAZ)[k % 2]), pack / f"{k:03d}.bvh")
    target = str(shared_file(TARGET))
    try:
        for kill in (False, True):
            out = tmp_path / f"out_{kill}.blend"
            proc = subprocess.Popen(
                _bake_command(str(pack), target, "-o", str(out), "--cluster", cluster.scheduler_address),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            assert proc.stdout is not None
            during = None
            for line in proc.stdout:
                if line.startswith("  clip 3:"):  # the run is going: the settings are the run's
                    during = (scheduler.allowed_failures, scheduler.WORKER_SATURATION)
                    if kill:
                        proc.kill()
                    break
            proc.communicate(timeout=300)
            assert during == (1, 1.0)
            if kill:
                assert proc.returncode == -signal.SIGKILL
                deadline = time.monotonic() + 30  # until the scheduler notices the client gone
                while (scheduler.allowed_failures, scheduler.WORKER_SATURATION) != own and time.monotonic() < deadline:
                    time.sleep(0.1)
            else:
                assert proc.returncode == 0
            assert (scheduler.allowed_failures, scheduler.WORKER_SATURATION) == own, f"after the run (client killed: {kill})"
    finally:
        scheduler.allowed_failures, scheduler.WORKER_SATURATION = 3, 1.1


@pytest.mark.slow
def test_a_group_of_files_holding_a_killer_is_sent_again_file_by_file(blender, tmp_path, dask_cluster_to_kill) -> None:
    """One-clip files travel several to a Dask task: a task that kills two workers is split, so
    only the file that kills its workers fails and the files sent with it bake."""

    cluster, client = dask_cluster_to_kill
    client.wait_for_workers(2, timeout=60)
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(shared_file(WALK), pack / "a_poison.bvh")  # first in pack order: in the first group
    for k in range(12):
        shutil.copy(shared_file((CMU, DAZ)[k % 2]), pack / f"k_{k:02d}.bvh")
    r, out = _bake_killing_on_poison(cluster, client, pack, tmp_path)
    statuses = _statuses(r)
    assert statuses.pop("a_poison") == "failed" and set(statuses.values()) == {"baked"} and len(statuses) == 12
    assert [os.path.basename(p) for p in r["cluster"]["files_killing_workers"]] == ["a_poison.bvh"]
    # Files that lost workers with it (its group-mates, files waiting behind it) were baked again.
    mates = [x for x in r["cluster"]["files_recomputed"] if os.path.basename(x["path"]).startswith("k_")]
    assert mates and all(x["workers_lost"] >= 1 for x in mates)
    assert len(_read_output(blender, out)) == 12
