"""Batch Bake on a Dask cluster (``bake-pack --cluster tcp://HOST:8786`` or ``--cluster local:N``):
the same tasks as the local worker pool (a pack file, or some of its clips), run by the workers of
a Dask ``distributed`` scheduler instead of this machine's worker processes.

:class:`ClusterPool` offers what the runner's dispatching (:mod:`.dispatch`) uses of
:class:`.worker_pool.WorkerPool`, so everything else is the local run's: the order clips are
written in, the volumes and their names, the parts and ``--resume``, the report, Ctrl-C. Each of
the pool's *slots* stands for one thread of the cluster; a task handed to a slot is submitted to
the scheduler, which runs it on whichever worker is free, and its messages come back together when
it ends.

* A Dask worker runs :func:`cluster_file`: :func:`.batch_worker.run_file`, the local workers'
  code, in a worker process that imports ``bpy`` when it first meets an imported file. It keeps one
  mapping and binding cache per run (the settings travel once, scattered to every worker), so a
  pack from one capture shoot maps and binds once per worker process, as locally.
* Parts (``OUT.blend.parts/``) are written here, as each result arrives and before its clips are
  written: the workers need no shared folder but the pack's.
* A worker that dies while baking a file: the scheduler gives the file to another worker, and the
  report's clips say ``recomputed`` with the worker lost. A file that kills a second worker is
  failed, "worker died twice", and the rest go on (the scheduler's ``allowed_failures`` is set to 1,
  and its worker saturation to 1, for the run: both are restored when it ends, or when its client
  leaves without ending it, once no other run on that scheduler holds them).
* A scheduler that cannot be reached (or has no worker) refuses the run before anything is written.
* ``--ship-inputs``: the workers need no shared path. This process reads each pack file (with a
  ``.gltf``'s buffers and images) when it hands the file to the cluster, and the bytes travel with
  the task (scattered to the cluster first past :data:`SCATTER_BYTES`); the worker writes them under
  the file's own name in a private temporary folder, bakes from there and removes the folder. The
  messages name the file by this machine's path, so the output and ``--resume`` are the shared
  path's. The target is never read by a worker (its rig travels in the run's settings).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..core.batch.messages import Message
from ..core.batch.output_files import write_part
from ..core.batch.plan import PackPlan, bvh_clip_id
from ..core.errors import MarionetteError
from .worker_pool import Worker

CONNECT_TIMEOUT = 5.0  # seconds to reach the scheduler
WORKERS_TIMEOUT = 20.0  # seconds for a scheduler (or a local cluster) to have a worker
DIED_TWICE = "worker died twice"
#: ``--ship-inputs``: a file larger than this is scattered to the cluster before its task is
#: submitted, rather than carried in the task itself (the scheduler holds tasks in memory).
SCATTER_BYTES = 2**20
#: A Dask worker samples its threads' stacks every 10 ms for the dashboard's profile, holding the
#: interpreter meanwhile; a local cluster's workers are started without it (README: Many machines).
PROFILER_OFF = ("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")

# --- the worker's side ----------------------------------------------------------------------

try:
    from distributed import SchedulerPlugin as _SchedulerPlugin
    from distributed import WorkerPlugin as _Plugin
except ImportError:  # the module still loads (and refuses --cluster) without the extra
    _Plugin = _SchedulerPlugin = object  # type: ignore[assignment,misc]

_SETTINGS: dict[str, Message] = {}  # run id -> the run's settings, in each worker process
_CACHES: dict[str, Any] = {}  # run id -> PackCache, in each worker process


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


def warm_up() -> int:
    """In each worker, while the main process loads Blender: import what a task runs (numpy, the
    retarget, the BVH reader), so the first task's time is its own."""
    _without_blender_paths()
    from . import batch_worker  # noqa: F401
    from .worker_process import openblas_threads

    blas = openblas_threads()  # one task per worker thread already
    if blas is not None:
        blas[1](1)
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


def cluster_file(task: Message, run: str, shipped: dict[str, bytes] | None = None) -> dict[str, Any]:
    """Run one task in a Dask worker: its messages (as :func:`.batch_worker.run_file` makes them,
    without parts), where it ran and the cache counts it added. ``shipped``: the file's bytes
    (``--ship-inputs``), by name, baked from a private copy removed afterwards."""
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
        messages = list(run_file(task, cache, None))
    else:
        path = str(task["path"])
        here, folder = _unpack(shipped, path)
        try:
            messages = list(run_file({**task, "path": here}, cache, None))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        _as_shipped_from(messages, path, here, folder)
    done = messages[-1]
    done["cache"] = [a - b for a, b in zip(done["cache"], before, strict=True)]
    try:
        from distributed import get_worker

        address = str(get_worker().address)
    except (ImportError, ValueError):
        address = "here"
    return {"messages": messages, "worker": address, "host": socket.gethostname(), "pid": os.getpid()}


# --- the client's side ----------------------------------------------------------------------


class _Slot:
    """What the dispatching uses of a worker's process, for a slot (there is none to end)."""

    pid = 0
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode or 0

    def kill(self) -> None:
        self.returncode = -9


#: On a scheduler: per scheduler, its own settings before the first run changed them, and the runs
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


def _deaths(keys: Sequence[str], dask_scheduler: Any = None) -> dict[str, int]:
    """On the scheduler: how many workers died while running each of ``keys``."""
    out: dict[str, int] = {}
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        if ts is not None and ts.suspicious:
            out[k] = int(ts.suspicious)
    return out


def _gltf_companions(text: bytes) -> list[str]:
    """The files a ``.gltf`` names by a relative path (buffers, images)."""
    from urllib.parse import unquote

    try:
        doc = json.loads(text)
    except ValueError:
        return []  # the import says what is wrong with it, as it would on this machine
    if not isinstance(doc, dict):
        return []
    out: list[str] = []
    for kind in ("buffers", "images"):
        for entry in doc.get(kind) or []:
            uri = entry.get("uri") if isinstance(entry, dict) else None
            if not isinstance(uri, str) or ":" in uri.split("/", 1)[0]:
                continue  # embedded (data:) or elsewhere (a URL)
            rel = os.path.normpath(unquote(uri))
            if not os.path.isabs(rel) and not rel.startswith(".."):
                out.append(rel)
    return out


def shipped_files(path: str) -> dict[str, bytes]:
    """``--ship-inputs``: the bytes of a pack file, by name, with those of the files a ``.gltf``
    names beside it (one it names and this machine lacks is left to the import to report).
    Raises :class:`OSError` when the file cannot be read here."""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        out = {name: f.read()}
    if name.lower().endswith(".gltf"):
        for rel in _gltf_companions(out[name]):
            with contextlib.suppress(OSError):
                with open(os.path.join(os.path.dirname(path), rel), "rb") as f:
                    out[rel] = f.read()
    return out


def parse_cluster(text: str) -> tuple[str | None, int]:
    """``--cluster``: ``(scheduler address, 0)`` or ``(None, N)`` for ``local:N``; refuses the rest."""
    if text.startswith("local:"):
        n = text[len("local:") :]
        if not n.isdigit() or int(n) < 1:
            raise MarionetteError(f"--cluster {text}: give local:N with N worker processes, at least 1")
        return None, int(n)
    if "://" not in text or text.endswith("://"):
        raise MarionetteError(f"--cluster {text}: give a scheduler address such as tcp://HOST:8786, or local:N")
    return text, 0


class ClusterPool:
    """Slots on a Dask cluster, offering what :mod:`.dispatch` uses of a worker pool (see the
    module docstring). Connects at once: an unreachable scheduler raises :class:`MarionetteError`."""

    #: The dispatching cannot answer a task while it runs (the local workers' ``ask``).
    answers = False

    def __init__(self, cluster: str, *, ship: bool = False, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise MarionetteError("--cluster needs dask and distributed: pip install 'marionette[cluster]' (or -e '.[cluster]')") from None
        address, local = parse_cluster(cluster)
        self.address = cluster
        #: ``--ship-inputs``: each task carries its file's bytes (see the module docstring).
        self.ship = ship
        self.client: Any = None
        self.workers: dict[int, Worker] = {}
        self.read_ahead: dict[int, list[str]] = {}
        #: Called with one line per baked clip (progress), when set.
        self.say: Callable[[str], None] | None = None
        self._starting: dict[int, Worker] = {}
        self._next_id = 0
        self._run = uuid.uuid4().hex
        self._settings: Any = None
        self._parts_dir: str | None = None
        self._futures: dict[Any, tuple[Worker, Message]] = {}
        self._scattered: dict[Any, Any] = {}  # a task's future -> its file's scattered bytes
        self._unread: list[tuple[Worker, Message]] = []  # --ship-inputs: files this machine could not read
        self._slot_cache: dict[int, list[int]] = {}
        self._local: Any = None
        self._holding = False  # whether the scheduler's settings are this run's (see _hold_settings)
        self._t0: float | None = None
        self._clips_done = 0
        #: Per Dask worker: host, pid, files, clips and seconds of work.
        self.per_worker: dict[str, dict[str, Any]] = {}
        #: Files recomputed after their worker died: (path, workers lost).
        self.recomputed: list[tuple[str, int]] = []
        self.died_twice: list[str] = []
        self._local_n = local
        self._start_error: BaseException | None = None
        self._starter: threading.Thread | None = None
        if address is None:
            # A cluster of our own cannot be unreachable: it starts while this process loads Blender.
            self._starter = threading.Thread(target=self._start_local, args=(connect_timeout,), name="cluster-start", daemon=True)
            self._starter.start()
        else:
            self._connect(address, connect_timeout)

    def _start_local(self, connect_timeout: float) -> None:
        from distributed import LocalCluster

        try:
            import dask

            env = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
            env[PROFILER_OFF[0]] = PROFILER_OFF[1]
            with dask.config.set({"distributed.worker.profile.enabled": False}):  # see PROFILER_OFF
                self._local = LocalCluster(
                    n_workers=self._local_n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40, env=env
                )
            self._connect(self._local.scheduler_address, connect_timeout)
        except BaseException as exc:  # said by _ready, on this process's thread
            self._start_error = exc

    def _ready(self) -> None:
        """Wait for a local cluster started in the background; raise what stopped it."""
        if self._starter is not None:
            self._starter.join()
            self._starter = None
            if self._start_error is not None:
                self.close(graceful=False)
                raise MarionetteError(f"--cluster {self.address}: the local Dask cluster did not start ({self._start_error})")

    def _connect(self, address: str, connect_timeout: float) -> None:
        from distributed import Client, as_completed

        try:
            if address.startswith("tcp://"):  # a refused connection is known at once
                host, _, port = address[len("tcp://") :].rpartition(":")
                socket.create_connection((host.strip("[]"), int(port or 8786)), timeout=connect_timeout).close()
            self.client = Client(address, timeout=connect_timeout, set_as_default=False)
            self._completed = as_completed(loop=self.client.loop, with_results=True, raise_errors=False)
        except (OSError, TimeoutError, ValueError) as exc:
            self._close_local()
            raise MarionetteError(f"--cluster {self.address}: cannot reach the Dask scheduler within {connect_timeout:g} s ({exc})") from None
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
            try:
                self.client.register_plugin(ReleaseOnLeave(self._run, self.client.id))
            except (OSError, TimeoutError):
                raise
            except Exception as exc:  # the scheduler cannot load Marionette's plugin
                self.close(graceful=False)
                raise MarionetteError(f"--cluster {self.address}: the scheduler cannot run Marionette's part ({type(exc).__name__}: {exc}); install Marionette on its machine too") from None
            self._holding = True
            # While this process loads Blender (a worker that fails it is met again by its tasks).
            threading.Thread(target=self._warm_up, name="cluster-warm-up", daemon=True).start()
        except (OSError, TimeoutError) as exc:
            self.close(graceful=False)
            raise MarionetteError(f"--cluster {self.address}: the scheduler has no worker ({exc})") from None

    def _warm_up(self) -> None:
        with contextlib.suppress(Exception):
            self.client.run(warm_up)

    # --- size ---

    @property
    def slots(self) -> int:
        """Tasks the cluster runs at once (its workers' threads)."""
        if self._starter is not None:
            return self._local_n
        return max(1, sum(self.client.nthreads().values()))

    def jobs_for(self, plan: PackPlan) -> tuple[int, str | None]:
        """Slots a run of ``plan`` uses: one per thread of the cluster, no more than its files."""
        n = self.slots
        if len(plan.files) < n:
            return len(plan.files), f"using {len(plan.files)} of the cluster's {n} worker threads: the pack has {len(plan.files)} files"
        return n, None

    # --- what the dispatching uses ---

    @property
    def launching(self) -> int:
        return len(self._starting)

    def launch(self, count: int, needs_blender: bool, read_ahead: Sequence[Sequence[str]] = (), fork: bool = False) -> None:
        for _ in range(count):
            wid = self._next_id
            self._next_id += 1
            self._starting[wid] = Worker(wid, needs_blender, _Slot(), "")

    def connect(self) -> list[Worker]:
        started, self._starting = self._starting, {}
        self.workers.update(started)
        return list(started.values())

    def send(self, w: Worker, msg: Message) -> bool:
        self._ready()
        op = msg.get("op")
        if op == "setup":
            if self._settings is None:
                self._settings = RunSettings(self._run, msg["settings"])
                self.client.register_plugin(self._settings)
                self._parts_dir = msg.get("parts_dir")
            return True
        if op != "file":
            return True  # "take" and "stop" mean nothing here
        task = {k: v for k, v in msg.items() if k != "ask"}
        stem = os.path.splitext(os.path.basename(str(task["path"])))[0]  # the dashboard names the file
        key = f"marionette-{task['file']}-{stem}-{uuid.uuid4().hex[:8]}"
        shipped: Any = None
        if self.ship:
            try:
                shipped = shipped_files(str(task["path"]))
            except OSError as exc:
                why = f"--ship-inputs: cannot read it on this machine to send it to the workers ({exc.strerror or exc}: {task['path']})"
                self._unread.append((w, {**task, "why": why}))
                return True
            if sum(len(b) for b in shipped.values()) > SCATTER_BYTES:
                shipped = self.client.scatter([shipped], hash=False)[0]  # one object (a dict would be scattered per entry)
        fut = self.client.submit(cluster_file, task, self._run, shipped, key=key, pure=False, retries=0)
        if shipped is not None and not isinstance(shipped, dict):
            self._scattered[fut] = shipped
        self._futures[fut] = (w, task)
        self._completed.add(fut)
        if self._t0 is None:
            self._t0 = time.perf_counter()
        return True

    def receive(self, timeout: float) -> list[tuple[Worker, Message | None]]:
        """The messages of the tasks that ended within ``timeout``. Their results were fetched
        meanwhile by the client's own thread (``as_completed`` with results), not by this one,
        which writes the clips."""
        if self._unread:
            unread, self._unread = self._unread, []
            return [(w, m) for w, task in unread for m in self._failed(w, task, task["why"])]
        if not self._futures:
            time.sleep(min(timeout, 0.05))
            return []
        deadline = time.monotonic() + timeout
        while not self._completed.has_ready() and time.monotonic() < deadline:
            time.sleep(min(0.002, max(0.0, deadline - time.monotonic())))
        done = [(f, r) for f, r in self._completed.next_batch(block=False) if f in self._futures]
        if not done:
            return []
        deaths: dict[str, int] = {}
        try:
            deaths = self.client.run_on_scheduler(_deaths, [f.key for f, _ in done])
        except Exception:  # the scheduler went away: the results in hand still count
            deaths = {}
        out: list[tuple[Worker, Message | None]] = []
        for fut, result in done:
            w, task = self._futures.pop(fut)
            self._scattered.pop(fut, None)  # the cluster may forget the file's bytes
            if fut.status == "cancelled":
                continue
            if fut.status == "error" or not isinstance(result, dict):
                out.extend((w, m) for m in self._failed(w, task, result))
                continue
            out.extend((w, m) for m in self._arrived(w, task, result, deaths.get(fut.key, 0)))
        return out

    def _arrived(self, w: Worker, task: Message, result: dict[str, Any], died: int) -> list[Message]:
        where = f"{result['host']} {result['worker']} (pid {result['pid']})"
        stats = self.per_worker.setdefault(result["worker"], {"host": result["host"], "pid": result["pid"], "files": 0, "clips": 0, "seconds": 0.0})
        stats["pid"] = result["pid"]
        if died:
            self.recomputed.append((str(task["path"]), died))
        for msg in result["messages"]:
            msg["worker"] = result["worker"]
            if msg["op"] == "clip":
                if died:
                    msg.setdefault("warnings", []).append(f"recomputed: the worker baking it died ({died} lost), baked again on {result['worker']}")
                if self._parts_dir:
                    t = time.perf_counter()
                    write_part(self._parts_dir, msg)
                    msg["timings"]["part"] = time.perf_counter() - t
                stats["clips"] += 1
                self._clips_done += 1
                if self.say is not None:
                    rate = self._clips_done / max(time.perf_counter() - (self._t0 or 0.0), 1e-9)
                    name = os.path.basename(str(msg["path"])) + ("" if str(msg["path"]).lower().endswith(".bvh") else f"|{msg['clip']}")
                    self.say(f"  clip {self._clips_done}: {name} on {where}, {rate:.1f} clips/s")
            elif msg["op"] == "file_done":
                stats["files"] += 1
                stats["seconds"] += float(msg["seconds"])
                cum = self._slot_cache.setdefault(w.wid, [0, 0, 0, 0])
                cum[:] = [a + int(b) for a, b in zip(cum, msg["cache"], strict=True)]
                msg["cache"] = list(cum)
        return list(result["messages"])

    def _failed(self, w: Worker, task: Message, exc: Any) -> list[Message]:
        """The messages of a task the cluster gave up on (``exc``, what it raised): a worker died
        twice running it (or the task could not run at all)."""
        if isinstance(exc, tuple) and len(exc) == 3:  # (type, value, traceback), as as_completed gives it
            exc = exc[1]
        fid, path = task["file"], str(task["path"])
        if type(exc).__name__ == "KilledWorker":
            reason = f"{DIED_TWICE} while baking it (a clip that kills its worker: {exc})"
            self.died_twice.append(path)
        elif isinstance(exc, str):
            reason = exc
        else:
            reason = f"the cluster could not run it: {type(exc).__name__}: {exc}"
        out: list[Message] = [{"op": "start", "file": fid, "path": path}]
        clips = task.get("clips") or ([bvh_clip_id(path)] if path.lower().endswith((".bvh", ".vmd")) else [])
        out += [{"op": "clip_failed", "file": fid, "path": path, "clip": c, "reason": reason} for c in clips]
        out.append({"op": "file_failed", "file": fid, "path": path, "reason": reason})
        cum = self._slot_cache.setdefault(w.wid, [0, 0, 0, 0])
        out.append({"op": "file_done", "file": fid, "path": path, "seconds": 0.0, "cache": list(cum), "peak_mb": 0.0, "blender": False})
        return out

    def kill(self, w: Worker) -> None:
        """Give up the slot's tasks (past ``--timeout``)."""
        for fut, (slot, _task) in list(self._futures.items()):
            if slot is w:
                fut.cancel()
                del self._futures[fut]
                self._scattered.pop(fut, None)

    def retire(self, w: Worker) -> str:
        self.kill(w)
        self.workers.pop(w.wid, None)
        return f"its task was given up on the cluster {self.address}"

    def stop(self) -> None:
        self.workers.clear()

    def close(self, graceful: bool = True) -> None:
        if self._starter is not None:
            self._starter.join()
            self._starter = None
        self._starting.clear()
        self.workers.clear()
        if self._futures:
            self.client.cancel(list(self._futures))
            self._futures.clear()
        self._scattered.clear()
        self._unread.clear()
        client = getattr(self, "client", None)
        if client is not None and self._settings is not None and self._local is None:
            try:  # a shared scheduler's workers forget the run
                client.unregister_worker_plugin(self._settings.name)
            except Exception:  # the scheduler went away meanwhile: nothing to forget
                pass
        if client is not None and self._holding:
            self._holding = False
            try:  # a shared scheduler's settings as they were before the run
                client.run_on_scheduler(_restore_settings, self._run)
            except Exception:  # the scheduler went away meanwhile: nothing to restore
                pass
        if client is not None:
            client.close()
            self.client = None
        self._close_local()

    def _close_local(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None

    def describe(self) -> dict[str, Any]:
        """The report's ``cluster`` entry: the scheduler, and per worker its files, clips and time."""
        return {
            "scheduler": self.address,
            "workers": {a: {**s, "seconds": round(s["seconds"], 3)} for a, s in sorted(self.per_worker.items())},
            "files_recomputed": [{"path": p, "workers_lost": n} for p, n in self.recomputed],
            "files_killing_workers": list(self.died_twice),
        }
