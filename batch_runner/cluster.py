"""Batch Bake on a Dask cluster (``bake-pack --cluster tcp://HOST:8786`` or ``--cluster local:N``):
the same tasks as the local worker pool (a pack file, or some of its clips), run by the workers of
a Dask ``distributed`` scheduler instead of this machine's worker processes.

:class:`ClusterPool` offers what the runner's dispatching (:mod:`.dispatch`) uses of
:class:`.worker_pool.WorkerPool`, so everything else is the local run's: the order clips are
written in, the volumes and their names, the parts and ``--resume``, the report, Ctrl-C. Each of
the pool's *slots* stands for one thread of the cluster; a task handed to a slot is submitted to
the scheduler, which runs it on whichever worker is free, and its messages come back together when
it ends.

* A Dask worker runs :func:`.cluster_worker.cluster_file`: :func:`.batch_worker.run_file`, the
  local workers' code, in a worker process that imports ``bpy`` when it first meets an imported
  file. It keeps one mapping and binding cache per run (the settings travel once, given to every
  worker), so a pack from one capture shoot maps and binds once per worker process, as locally.
  One-clip files (BVH, VMD) travel in Dask tasks of up to :data:`GROUP_FILES`; each worker reads
  ahead the BVH files of its slots while this process loads Blender, as the local workers do.
* Parts (``OUT.blend.parts/``) are written here, as each result arrives and before its clips are
  written: the workers need no shared folder but the pack's (a local cluster's workers write them,
  on this disk).
* ``--cluster local:N`` on Linux: the scheduler and its workers run in a process forked before
  Blender loads (:mod:`.cluster_host`).
* A worker that dies while baking a file: the scheduler gives the file to another worker, and the
  report's clips say ``recomputed`` with the worker lost. A file whose task loses a second worker
  is sent again alone (the task may only have waited behind the one that killed them); when that
  task too loses two, the file is failed, "worker died twice", and the rest go on (the scheduler's ``allowed_failures`` is set to 1,
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
import importlib.util
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..core.batch.messages import Message
from ..core.batch.output_files import write_part
from ..core.batch.plan import PackPlan, bvh_clip_id
from ..core.errors import MarionetteError
from .batch_worker import READ_AHEAD_FILES
from .worker_pool import Worker

CONNECT_TIMEOUT = 5.0  # seconds to reach the scheduler
WORKERS_TIMEOUT = 20.0  # seconds for a scheduler (or a local cluster) to have a worker
DIED_TWICE = "worker died twice"
#: ``--ship-inputs``: a file larger than this is scattered to the cluster before its task is
#: submitted, rather than carried in the task itself (the scheduler holds tasks in memory).
SCATTER_BYTES = 2**20
#: Files of one clip (BVH, VMD) handed to the cluster together travel as one Dask task of up to
#: this many: each task costs the scheduler, the worker and this process some milliseconds of
#: their cores whatever it holds (measured: about 20 ms per task on two shared cores).
GROUP_FILES = 16
#: A Dask worker samples its threads' stacks every 10 ms for the dashboard's profile, holding the
#: interpreter meanwhile; a local cluster's workers are started without it (README: Many machines).
PROFILER_OFF = ("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")

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


def _side() -> Any:
    """What the cluster runs (:mod:`.cluster_worker`, which imports Dask), imported when first used."""
    from . import cluster_worker

    return cluster_worker


def _raised(result: Any) -> Any:
    """What a failed task raised, as ``as_completed`` gives it ((type, value, traceback))."""
    return result[1] if isinstance(result, tuple) and len(result) == 3 else result


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

    def __init__(self, cluster: str, *, ship: bool = False, read_ahead: Sequence[str] = (), connect_timeout: float = CONNECT_TIMEOUT) -> None:
        if importlib.util.find_spec("distributed") is None:  # not imported yet (see cluster_host)
            raise MarionetteError("--cluster needs dask and distributed: pip install 'marionette[cluster]' (or -e '.[cluster]')")
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
        #: A Dask task's future -> its files: [slot, task, shipped bytes, still wanted].
        self._futures: dict[Any, list[list[Any]]] = {}
        self._grouping: dict[str, list[list[Any]]] = {}  # worker to run them ("": any) -> files waiting to go
        self._strikes: dict[tuple[str, tuple[str, ...]], int] = {}  # a file's tasks that lost two workers
        self._deaths_before: dict[Any, int] = {}  # a file sent again alone after its group failed -> deaths so far
        #: Whether a worker has left during the run: from then on each result's task is asked for
        #: the workers it lost (before, no result can have lost any).
        self._worker_left = False
        self._unpin_due = False  # a worker left: no task is sent to a given worker any more
        self._files_total = 0
        self._files_sent = 0
        self._threads = 1
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
        self._ahead = [] if ship else list(read_ahead)
        self._slot_worker: dict[int, str] = {}  # slot -> the Dask worker that read its files ahead
        self._ahead_of: dict[int, set[str]] = {}
        self._reading: list[list[str]] = []  # per worker (in order of their names), the files it reads ahead
        if address is None:
            from .worker_pool import can_fork_workers

            self._plan_read_ahead(local * GROUP_FILES, local)  # known now: the runner prefers each slot's files
            if can_fork_workers():  # here, on this thread, before Blender loads (cluster_host)
                from .cluster_host import ForkedCluster

                # Its workers start reading as they start, before this process reaches them.
                self._local = ForkedCluster(local, {"distributed.worker.profile.enabled": False}, (self._run, self._reading))  # see PROFILER_OFF
            # Dask is imported on this thread (the local cluster's process imports it meanwhile),
            # never beside Blender's import: two threads loading extension modules at once
            # (Blender's, and the ssl module Dask imports) can deadlock.
            _side()
            # A cluster of our own cannot be unreachable: it starts while this process loads Blender.
            self._starter = threading.Thread(target=self._start_local, args=(connect_timeout,), name="cluster-start", daemon=True)
            self._starter.start()
        else:
            self._connect(address, connect_timeout)

    def _start_local(self, connect_timeout: float) -> None:
        from distributed import LocalCluster

        try:
            if self._local is not None:  # forked already
                self._connect(self._local.wait(WORKERS_TIMEOUT), connect_timeout)
                return
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
                self.client.register_plugin(_side().ReleaseOnLeave(self._run, self.client.id))
            except (OSError, TimeoutError):
                raise
            except Exception as exc:  # the scheduler cannot load Marionette's plugin
                self.close(graceful=False)
                raise MarionetteError(f"--cluster {self.address}: the scheduler cannot run Marionette's part ({type(exc).__name__}: {exc}); install Marionette on its machine too") from None
            self._holding = True
            self.client.subscribe_topic(f"marionette-{self._run}", self._on_worker_left)
            if self._local is not None:  # every worker of our own reads ahead
                self.client.wait_for_workers(self._local_n, timeout=WORKERS_TIMEOUT)
            info = self.client.scheduler_info(n_workers=-1)["workers"]
            if self._local is not None:  # in the order of their names (0, 1...), as ReadFirst reads
                workers = sorted(info, key=lambda a: str(info[a].get("name")).zfill(9))
            else:
                workers = sorted(info)
                self._plan_read_ahead(self.slots, len(workers))
            for k in self.read_ahead:  # slot k: a thread of worker k mod the workers
                self._slot_worker[k] = workers[k % len(workers)]
            reading = dict(zip(workers, self._reading, strict=False))
            # While this process loads Blender (a worker that fails it is met again by its tasks).
            threading.Thread(target=self._warm_up, args=(reading,), name="cluster-warm-up", daemon=True).start()
        except (OSError, TimeoutError) as exc:
            self.close(graceful=False)
            raise MarionetteError(f"--cluster {self.address}: the scheduler has no worker ({exc})") from None

    def _on_worker_left(self, event: Any) -> None:
        self._worker_left = True
        self._unpin_due = True

    def _plan_read_ahead(self, slots: int, workers: int) -> None:
        """The BVH files each slot prefers (split as the local pool splits them), and those each
        worker reads ahead: its slots' (slot ``k`` is a thread of worker ``k`` mod ``workers``),
        in pack order, at most :data:`READ_AHEAD_FILES`. A slot's task goes to that worker first."""
        if not self._ahead:
            self.read_ahead, self._reading = {}, []
            return
        order = {p: i for i, p in enumerate(self._ahead)}
        self.read_ahead = {k: self._ahead[k::slots] for k in range(slots)}
        self._reading = [
            sorted((p for k in range(j, slots, workers) for p in self.read_ahead[k]), key=order.__getitem__)[:READ_AHEAD_FILES] for j in range(workers)
        ]
        read = [set(r) for r in self._reading]
        self._ahead_of = {k: set(paths) & read[k % workers] for k, paths in self.read_ahead.items()}

    def _warm_up(self, reading: dict[str, list[str]]) -> None:
        """Warm every worker up, each reading ahead the files of its slots (their tasks go to it
        first)."""
        for addr, paths in reading.items():
            with contextlib.suppress(Exception):
                self.client.run(_side().warm_up, self._run, paths, workers=[addr])

    # --- size ---

    @property
    def threads(self) -> int:
        """Tasks the cluster runs at once (its workers' threads)."""
        if self._starter is not None:
            return self._local_n
        return max(1, sum(self.client.nthreads().values()))

    @property
    def planned_threads(self) -> int:
        """The worker threads the cluster had when the run was planned (:meth:`jobs_for`): what
        the report gives as its jobs."""
        return self._threads

    @property
    def slots(self) -> int:
        """Files handed to the cluster at once, two per slot (the dispatching's depth): a group
        of :data:`GROUP_FILES` for each thread to run and one to come."""
        return self.threads * GROUP_FILES

    def jobs_for(self, plan: PackPlan) -> tuple[int, str | None]:
        """Slots a run of ``plan`` uses (see :attr:`slots`), no more than its files."""
        n, threads = self.slots, self.threads
        self._files_total, self._threads = len(plan.files), threads
        if len(plan.files) < threads:
            return len(plan.files), f"using {len(plan.files)} of the cluster's {threads} worker threads: the pack has {len(plan.files)} files"
        return min(n, len(plan.files)), None

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
                self._settings = _side().RunSettings(self._run, msg["settings"])
                self.client.register_plugin(self._settings)
                self._parts_dir = msg.get("parts_dir")
            return True
        if op != "file":
            return True  # "take" and "stop" mean nothing here
        task = {k: v for k, v in msg.items() if k != "ask"}
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
        where = ""
        if w.wid in self._slot_worker and str(task["path"]) in self._ahead_of.get(w.wid, ()):
            where = self._slot_worker[w.wid]  # the worker that read it ahead
        entry = [w, task, shipped, True]
        if (shipped is not None and not isinstance(shipped, dict)) or not str(task["path"]).lower().endswith((".bvh", ".vmd")):
            self._submit([entry], where)  # scattered bytes, or a file to import: alone
            return True
        group = self._grouping.setdefault(where, [])
        group.append(entry)
        if len(group) >= self._group_size():
            self._submit(self._grouping.pop(where), where)
        return True

    def _group_size(self) -> int:
        """Files per Dask task: :data:`GROUP_FILES`, fewer towards the run's end so that the last
        tasks end together (two groups per thread for the files left)."""
        left = self._files_total - self._files_sent
        return max(1, min(GROUP_FILES, -(-left // (2 * self._threads)))) if self._files_total else GROUP_FILES

    def _flush(self) -> None:
        """Send the files waiting to be grouped (the dispatching has handed out what it had)."""
        grouping, self._grouping = self._grouping, {}
        for where, entries in grouping.items():
            self._submit(entries, where)

    def _submit(self, entries: list[list[Any]], where: str = "", died: int = 0, again: bool = False) -> None:
        tasks = [e[1] for e in entries]
        stems = "+".join(os.path.splitext(os.path.basename(str(t["path"])))[0] for t in tasks)  # the dashboard names the files
        key = f"marionette-{tasks[0]['file']}-{stems}-{uuid.uuid4().hex[:8]}"
        parts = self._parts_dir if self._local is not None else None  # a local cluster's workers share this disk
        pin: dict[str, Any] = {"workers": [where], "allow_other_workers": True} if where else {}
        if len(entries) == 1:
            fut = self.client.submit(_side().cluster_file, tasks[0], self._run, entries[0][2], parts, key=key, pure=False, retries=0, **pin)
        else:
            fut = self.client.submit(_side().cluster_files, tasks, self._run, [e[2] for e in entries], parts, key=key, pure=False, retries=0, **pin)
        self._futures[fut] = entries
        self._files_sent += 0 if again else len(entries)
        if died:
            self._deaths_before[fut] = died
        self._completed.add(fut)
        if self._t0 is None:
            self._t0 = time.perf_counter()

    def receive(self, timeout: float) -> list[tuple[Worker, Message | None]]:
        """The messages of the tasks that ended within ``timeout``. Their results were fetched
        meanwhile by the client's own thread (``as_completed`` with results), not by this one,
        which writes the clips."""
        self._flush()
        if self._unpin_due:
            self._unpin_due = False
            self._slot_worker.clear()
            with contextlib.suppress(Exception):
                self.client.run_on_scheduler(_side()._unpin, [f.key for f in self._futures])
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
        if self._worker_left:
            try:
                deaths = self.client.run_on_scheduler(_side()._deaths, [f.key for f, _ in done])
            except Exception:  # the scheduler went away: the results in hand still count
                deaths = {}
        out: list[tuple[Worker, Message | None]] = []
        for fut, result in done:
            entries = self._futures.pop(fut)  # (their bytes may go)
            died = self._deaths_before.pop(fut, 0) + deaths.get(fut.key, 0)
            wanted = [e for e in entries if e[3]]
            if fut.status == "cancelled" or not wanted:
                continue
            failed = fut.status == "error" or not isinstance(result, (dict, list))
            if failed and type(_raised(result)).__name__ == "KilledWorker":
                # Every task a dying worker held counts its death, running or queued behind the
                # one that killed it: a file is failed only when its task lost two workers a
                # second time, sent alone; until then it is sent again alone.
                retry = []
                for e in wanted:
                    key = str(e[1]["path"]), tuple(e[1].get("clips") or ())
                    self._strikes[key] = self._strikes.get(key, 0) + 1
                    if len(wanted) > 1 or self._strikes[key] < 2:
                        retry.append(e)
                for e in retry:
                    self._submit([e], died=died, again=True)
                wanted = [e for e in wanted if e not in retry]
                if not wanted:
                    continue
            if failed:
                out.extend((e[0], m) for e in wanted for m in self._failed(e[0], e[1], result))
                continue
            results = result if isinstance(result, list) else [result]
            for e, r in zip(entries, results, strict=True):
                if e[3]:
                    out.extend((e[0], m) for m in self._arrived(e[0], e[1], r, died))
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
                if self._parts_dir and self._local is None:  # else the worker saved it
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
        exc = _raised(exc)
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
        """Give up the slot's tasks (past ``--timeout``); a Dask task is cancelled once none of
        its files is wanted."""
        for where, entries in list(self._grouping.items()):
            self._grouping[where] = [e for e in entries if e[0] is not w]
        for fut, entries in list(self._futures.items()):
            for e in entries:
                if e[0] is w:
                    e[3] = False
            if not any(e[3] for e in entries):
                fut.cancel()
                del self._futures[fut]

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
        self._grouping.clear()
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
                client.run_on_scheduler(_side()._restore_settings, self._run)
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
