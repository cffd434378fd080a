"""What a Dask cluster runs for ``bake-pack --cluster`` (:mod:`.cluster` is the client's side):
on each worker, :func:`cluster_file` (a pack file, or some of its clips: the local workers' code,
:func:`.batch_worker.run_file`) and :func:`cluster_files` (several one-clip files in one Dask
task), with the run's settings given once (:class:`RunSettings`) and the BVH files read ahead
(:class:`ReadFirst`, :func:`warm_up`); on the scheduler, the settings a run holds changed and
restores (:class:`ReleaseOnLeave`), and the workers each task lost (:func:`_deaths`).

This module imports Dask: the command line imports it on its main thread before it loads Blender
(never beside Blender's import), once its own local cluster (:mod:`.cluster_host`) is forked.
The workers and the scheduler import it by name, so Marionette must be installed where they run.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from distributed import SchedulerPlugin as _SchedulerPlugin
from distributed import WorkerPlugin as _Plugin

from ..core.batch.messages import Message
from ..core.batch.output_files import write_part

# --- the worker's side ----------------------------------------------------------------------

_SETTINGS: dict[str, Message] = {}  # run id -> the run's settings, in each worker process
_CACHES: dict[str, Any] = {}  # run id -> PackCache, in each worker process
_AHEAD: dict[str, Any] = {}  # run id -> the BVH files this worker reads ahead (batch_worker.ReadAhead)
_WORKING: set[str] = set()  # runs whose tasks have started here (nothing is read ahead from then on)
_AHEAD_LOCK = threading.Lock()


class RunSettings(_Plugin):  # type: ignore[misc,valid-type]
    """The run's settings, given once to every worker of the cluster (and to each one that joins
    or is restarted) rather than with every task: a task that depends on nothing is sent to a
    worker only when one of its threads is free."""

    def __init__(self, run: str, settings: Message) -> None:
        self.run = run
        self.settings = settings
        self.name = f"marionette-{run}"

    def setup(self, worker: Any) -> None:
        _SETTINGS[self.run] = self.settings

    def teardown(self, worker: Any) -> None:
        _SETTINGS.pop(self.run, None)
        _CACHES.pop(self.run, None)
        _WORKING.discard(self.run)
        ahead = _AHEAD.pop(self.run, None)
        if ahead is not None:
            ahead.stop()


class ReadFirst(_Plugin):  # type: ignore[misc,valid-type]
    """Given to the workers of a local cluster as they start: worker ``i`` (its name) reads the
    BVH files ``reading[i]`` ahead (:func:`warm_up`) from its start on, while the main process
    loads Blender."""

    def __init__(self, run: str, reading: list[list[str]]) -> None:
        self.run = run
        self.reading = reading
        self.name = f"marionette-read-{run}"

    def setup(self, worker: Any) -> None:
        name = worker.name
        if isinstance(name, int) and self.reading:
            paths = self.reading[name % len(self.reading)]
            threading.Thread(target=self._read_once_running, args=(worker, paths), name="read-first", daemon=True).start()

    def _read_once_running(self, worker: Any, paths: list[str]) -> None:
        """Start reading once the worker has joined its scheduler: the reading holds the
        interpreter most of the time, and would hold up the worker's start (it is set up first)."""
        deadline = time.monotonic() + 30.0
        while worker.status.name != "running" and time.monotonic() < deadline:
            time.sleep(0.005)
        warm_up(self.run, paths)


def _without_blender_paths() -> None:
    """Before this worker first imports ``bpy``: drop the folders of Blender's scripts from the
    search path. A worker process started by a process that had loaded Blender (a local cluster's
    nanny restarting a worker, a test's cluster) is given that process's search path, which Blender
    extended with its ``scripts/modules``; there ``bpy`` is Blender's Python half, and importing it
    before the ``bpy`` module itself fails (``No module named '_bpy'``)."""
    if "bpy" in sys.modules:
        return
    mark = f"{os.sep}bpy{os.sep}"
    sys.path[:] = [p for p in sys.path if not (mark in p and f"{os.sep}scripts" in p)]


def warm_up(run: str = "", paths: Sequence[str] = ()) -> int:
    """In each worker, while the main process loads Blender: import what a task runs (numpy, the
    retarget, the BVH reader), so the first task's time is its own, and start reading ``paths``
    (BVH files its tasks will bake, as the local workers do: :class:`.batch_worker.ReadAhead`,
    which stops at the first task)."""
    _without_blender_paths()
    from .batch_worker import ReadAhead
    from .worker_process import openblas_threads

    blas = openblas_threads()  # one task per worker thread already
    if blas is not None:
        blas[1](1)
    with _AHEAD_LOCK:  # one reader per run (two could start at once: ReadFirst, and the client's call)
        if paths and run not in _AHEAD and run not in _WORKING:
            _AHEAD[run] = ReadAhead(paths)
    return os.getpid()


def _unpack(shipped: dict[str, bytes], path: str) -> tuple[str, str]:
    """Write a shipped file (and its companions) into a private temporary folder; returns the
    file's path there and the folder."""
    folder = tempfile.mkdtemp(prefix="marionette_shipped_")
    for name, data in shipped.items():
        dest = os.path.join(folder, name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)
    return os.path.join(folder, os.path.basename(path)), folder


def _as_shipped_from(messages: list[Message], path: str, here: str, folder: str) -> None:
    """Name the file by the client's ``path`` in ``messages`` made from its copy ``here``."""
    for msg in messages:
        msg["path"] = path
        if isinstance(msg.get("reason"), str):
            msg["reason"] = msg["reason"].replace(here, path).replace(folder, os.path.dirname(path))


def cluster_file(task: Message, run: str, shipped: dict[str, bytes] | None = None, parts_dir: str | None = None) -> dict[str, Any]:
    """Run one task in a Dask worker: its messages (as :func:`.batch_worker.run_file` makes them),
    where it ran and the cache counts it added. ``shipped``: the file's bytes (``--ship-inputs``),
    by name, baked from a private copy removed afterwards. ``parts_dir``: the run's parts folder,
    when this worker shares the client's disk (a local cluster), where it saves each baked clip
    (else the client does, as results arrive)."""
    _without_blender_paths()
    from ..core.batch.baking import PackCache
    from ..core.batch.settings import BakeSettings
    from .batch_worker import run_file

    cache = _CACHES.get(run)
    if cache is None:
        settings = _SETTINGS[run]
        warm_up()
        cache = _CACHES[run] = PackCache(BakeSettings.from_message(settings))
    s = cache.stats
    before = [s.mapping_hits, s.mapping_misses, s.binding_hits, s.binding_misses]
    if shipped is None:
        data: Any = None
        seconds = 0.0
        with _AHEAD_LOCK:
            _WORKING.add(run)
            ahead = _AHEAD.get(run)
        if ahead is not None:
            ahead.stop()  # from the first task on it would only compete with the tasks
            if str(task["path"]).lower().endswith(".bvh"):
                data, seconds = ahead.take(str(task["path"]))
        messages = list(run_file(task, cache, None, None, data, seconds))
    else:
        path = str(task["path"])
        here, folder = _unpack(shipped, path)
        try:
            messages = list(run_file({**task, "path": here}, cache, None))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        _as_shipped_from(messages, path, here, folder)
    if parts_dir:
        for msg in messages:
            if msg["op"] == "clip":
                t = time.perf_counter()
                write_part(parts_dir, msg)
                msg["timings"]["part"] = time.perf_counter() - t
    done = messages[-1]
    done["cache"] = [a - b for a, b in zip(done["cache"], before, strict=True)]
    try:
        from distributed import get_worker

        address = str(get_worker().address)
    except (ImportError, ValueError):
        address = "here"
    return {"messages": messages, "worker": address, "host": socket.gethostname(), "pid": os.getpid()}


def cluster_files(tasks: list[Message], run: str, shipped: list[dict[str, bytes] | None], parts_dir: str | None = None) -> list[dict[str, Any]]:
    """Several tasks in one Dask task, one after the other (:func:`cluster_file` each)."""
    return [cluster_file(t, run, b, parts_dir) for t, b in zip(tasks, shipped, strict=True)]



#: (their ids) holding them changed. Several runs may share a scheduler; the last to end restores.
_HELD: dict[int, dict[str, Any]] = {}


def _hold_settings(run: str, dask_scheduler: Any = None) -> None:
    """On the scheduler, for run ``run``: a task whose worker died is given to another one once; a
    second death fails it (KilledWorker). A worker is sent only what its threads run (worker
    saturation 1): every task held by a worker that dies counts that death, so a task queued
    behind a clip that kills its worker would otherwise be blamed with it."""
    held = _HELD.setdefault(
        id(dask_scheduler),
        {"allowed_failures": dask_scheduler.allowed_failures, "worker_saturation": dask_scheduler.WORKER_SATURATION, "runs": set()},
    )
    held["runs"].add(run)
    dask_scheduler.allowed_failures = 1
    dask_scheduler.WORKER_SATURATION = 1.0


def _restore_settings(run: str, dask_scheduler: Any = None) -> None:
    """On the scheduler, when run ``run`` ends: its settings as they were before the first run
    still going changed them, once no other run holds them."""
    dask_scheduler.plugins.pop(f"marionette-release-{run}", None)
    held = _HELD.get(id(dask_scheduler))
    if held is None or run not in held["runs"]:
        return
    held["runs"].discard(run)
    if not held["runs"]:
        dask_scheduler.allowed_failures = held["allowed_failures"]
        dask_scheduler.WORKER_SATURATION = held["worker_saturation"]
        del _HELD[id(dask_scheduler)]


class ReleaseOnLeave(_SchedulerPlugin):  # type: ignore[misc,valid-type]
    """On the scheduler: holds the run's settings from its start (:func:`_hold_settings`) and
    restores them when the client that started the run leaves without saying so (killed, its
    machine gone); a run that ends as it should restores them itself."""

    def __init__(self, run: str, client: str) -> None:
        self.run = run
        self.client = client
        self.name = f"marionette-release-{run}"

    def start(self, scheduler: Any) -> None:
        _hold_settings(self.run, scheduler)

    def remove_client(self, scheduler: Any, client: str) -> None:
        if client == self.client:
            _restore_settings(self.run, scheduler)

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        """Tell the run's client that a worker left (it then asks which of its files it was running)."""
        scheduler.log_event(f"marionette-{self.run}", {"worker_left": worker})


def _deaths(keys: Sequence[str], dask_scheduler: Any = None) -> dict[str, int]:
    """On the scheduler: how many workers died while running each of ``keys``."""
    out: dict[str, int] = {}
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        if ts is not None and ts.suspicious:
            out[k] = int(ts.suspicious)
    return out


def _unpin(keys: Sequence[str], dask_scheduler: Any = None) -> int:
    """On the scheduler, once a worker has left: let ``keys`` (tasks sent first to the worker that
    read their files ahead) run on any worker. A task whose worker left waits otherwise for a worker
    of that address, which never comes back (a restarted worker has another), even with
    ``allow_other_workers``. Returns how many were waiting so."""
    waiting = {}
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        if ts is None or ts.worker_restrictions is None:
            continue
        ts.worker_restrictions = None
        ts.loose_restrictions = False
        if ts.state == "no-worker":
            waiting[k] = "processing"
    if waiting:
        dask_scheduler.transitions(waiting, stimulus_id=f"marionette-unpin-{time.time()}")
    return len(waiting)

