"""Batch Bake: every clip of an animation pack onto one character, in parallel, losing nothing.

How the work is split, and why:

* This process holds the target in Blender and is the only one that writes to it: Blender data
  can only be changed from its main thread. It writes each baked clip as soon as it arrives
  (:func:`.armature_io.write_action`, bulk ``foreach_set``) and saves once at the end.
* Reading and retargeting, which do not need this Blender, run in *worker processes*
  (``--jobs``, one per core by default), each started once and fed file after file. A worker
  reads BVH with numpy alone (:mod:`core.bvh`) and imports ``bpy`` only when it first meets an
  FBX, glTF or .blend file (starting Blender costs about 0.5 s and 260 MB, more than a clip's
  own work). Workers keep a mapping and binding cache (:class:`core.batch.PackCache`), so a pack from one
  capture shoot maps and binds once per worker. With ``--jobs 1`` BVH files are read in this
  process (a single core gains nothing from a second process); files that need an importer
  still go to one worker, so that they are imported into an empty file whatever this file
  holds and the Action names they bring are the same as with more jobs.
* Results travel as plain messages (:mod:`core.batch`) over a local socket authenticated with a
  random key, one clip at a time. Each worker is handed two files ahead, so it never waits for
  this process to write.
* Memory: a worker holds one file's data at a time (about 50 MB for BVH, about 300 MB once it
  has imported Blender); this process holds the target and the baked Actions, i.e. the output
  itself (what opening OUT.blend costs), and nothing else per clip.

Nothing lost:

* A worker saves each baked clip as a *part* (``OUT.blend.parts/*.npz``) before sending it. If
  this process dies, ``--resume`` writes the parts into the output without computing them again.
* A killed or crashed worker costs the clip it was computing: the report names that clip (and
  any clips of the same file it had not reached), a new worker takes the remaining files, and
  the run ends with a non-zero status. Ctrl-C (or Esc in Blender) stops the workers, keeps every
  clip already written, saves, and reports what was not baked.
* ``--resume`` opens the existing output and skips every clip already in it (Actions carry their
  source file and clip id), then bakes the rest. An output older than an interrupted fresh run
  is an earlier bake's and is not continued.
* Action names are decided at the end from the clips' keys alone (:func:`core.batch.final_action_names`),
  so the same pack gives the same file whatever order the workers finished in.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from pathlib import Path
from typing import Any

import bpy
from bpy.props import CollectionProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..core import batch as cb
from ..core.batch import BakeSettings, BatchReport, ClipOutcome, Message, PackCache, PackPlan, mapping_key, plan_pack
from ..core.errors import MarionetteError, RigError
from ..core.mapping import BoneMapping
from ..core.retarget import RetargetOptions
from . import compat
from .armature_io import write_action
from .batch_worker import BOOTSTRAP, run_file, worker_environment
from .file_import import load_file, scene_fps

ADDON_ROOT = str(Path(__file__).resolve().parent.parent)
#: Scene custom properties of an output file: the target's name and each file's clip ids.
TARGET_RECORD = "marionette_batch_target"
FILES_RECORD = "marionette_batch_files"
REPORT_RECORD = "marionette_batch_report"

_START_TIMEOUT = 120.0  # seconds for a worker to connect back (a Blender binary starts slowly)
_QUEUE_DEPTH = 2  # files handed to a worker ahead of time


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def id_name_limit() -> int:
    """Bytes in an ID name: 255 from Blender 5.0, 63 before."""
    return 255 if bpy.app.version >= (5, 0, 0) else 63


# --- this process's BLAS threads -------------------------------------------------------------


def _openblas_threads() -> tuple[Any, Any] | None:
    """The ``(get, set)`` thread-count functions of the OpenBLAS that numpy uses, when it is one
    bundled with the numpy wheel (Blender's and pip's); ``None`` otherwise."""
    import ctypes

    import numpy as np

    here = Path(np.__file__).resolve().parent
    for path in (*here.parent.glob("numpy.libs/*openblas*"), *here.glob(".libs/*openblas*"), *here.glob(".dylibs/*openblas*")):
        try:
            lib = ctypes.CDLL(str(path))  # the library numpy already loaded: same handle
        except OSError:
            continue
        for suffix in ("64_", "_64_", ""):
            get = getattr(lib, "openblas_get_num_threads" + suffix, None)
            put = getattr(lib, "openblas_set_num_threads" + suffix, None)
            if get is not None and put is not None:
                return get, put
    return None


class _OneBlasThread:
    """While a run lasts, numpy's OpenBLAS in this process uses one thread.

    After a threaded call, OpenBLAS keeps its other threads spinning (``sched_yield``) for a while,
    and this process makes such calls for every clip it writes: measured, 2.9 s of system time per
    100 clips, a core taken from the workers. Workers get ``OPENBLAS_NUM_THREADS=1`` before numpy
    loads; here numpy is loaded already, so the count is set through OpenBLAS itself and restored
    afterwards. Without a bundled OpenBLAS this does nothing.
    """

    def __init__(self) -> None:
        self._controls = _openblas_threads()
        self._before: int | None = None

    def limit(self) -> None:
        if self._controls is not None and self._before is None:
            get, put = self._controls
            self._before = int(get())
            put(1)

    def restore(self) -> None:
        if self._controls is not None and self._before is not None:
            self._controls[1](self._before)
            self._before = None


# --- worker processes ------------------------------------------------------------------------


@dataclass
class _Worker:
    wid: int
    needs_blender: bool
    proc: subprocess.Popen[bytes]
    log: str
    conn: Connection | None = None
    pid: int = 0
    #: File jobs sent and not finished, in order: the first is in progress, the others wait in
    #: the worker's connection so that it never idles while this process writes.
    jobs: deque[Message] = field(default_factory=deque)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped responding"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _log_tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4000))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])


class WorkerPool:
    """Worker processes connected back over a local socket (any Python or Blender binary can
    connect; nothing is inherited but the command line and the environment)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.workers: dict[int, _Worker] = {}
        self._next_id = 0
        self._key = os.urandom(32)
        self._server: socket.socket | None = None
        self._starting: dict[int, _Worker] = {}

    def _command(self, needs_blender: bool, port: int, wid: int) -> list[str]:
        tail = ["--", ADDON_ROOT, "127.0.0.1", str(port), str(wid)]
        binary = getattr(bpy.app, "binary_path", "")
        if binary and needs_blender:
            # Inside real Blender: sys.executable is its bundled Python, which has numpy but no
            # bpy; a worker that must import files is another Blender, in the background.
            return [binary, "--background", "--factory-startup", "--python-exit-code", "1", "--python-expr", BOOTSTRAP, *tail]
        # bpy as a module: this Python imports bpy when it needs it. Real Blender: its Python.
        return [sys.executable, "-c", BOOTSTRAP, *tail]

    def spawn(self, count: int, needs_blender: bool) -> list[_Worker]:
        """Start ``count`` workers and wait until each has connected and said hello."""
        self.launch(count, needs_blender)
        return self.connect()

    def launch(self, count: int, needs_blender: bool) -> None:
        """Start ``count`` workers without waiting for them (they import while this process goes
        on with its own start); :meth:`connect` waits."""
        if self._server is None:
            self._server = socket.create_server(("127.0.0.1", 0))
            self._server.settimeout(0.1)
        port = self._server.getsockname()[1]
        for _ in range(count):
            wid = self._next_id
            self._next_id += 1
            log = os.path.join(self.log_dir, f"worker-{wid}.log")
            kwargs: dict[str, Any] = {}
            if os.name == "posix":
                kwargs["start_new_session"] = True  # Ctrl-C in the terminal is for this process only
            else:
                kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    self._command(needs_blender, port, wid),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=worker_environment(self._key),
                    **kwargs,
                )
            self._starting[wid] = _Worker(wid, needs_blender, proc, log)

    @property
    def launching(self) -> int:
        return len(self._starting)

    def connect(self) -> list[_Worker]:
        """Wait until every launched worker has connected and said hello."""
        assert self._server is not None or not self._starting
        started, self._starting = self._starting, {}
        waiting = dict(started)
        deadline = time.monotonic() + _START_TIMEOUT
        while waiting:
            for w in list(waiting.values()):
                if w.proc.poll() is not None:
                    self._kill_all(started.values())
                    raise MarionetteError(
                        f"a worker process could not start: it {_describe_exit(w.proc.returncode)} ({_log_tail(w.log)})"
                    )
            if time.monotonic() > deadline:
                self._kill_all(started.values())
                raise MarionetteError(f"worker processes did not start within {_START_TIMEOUT:.0f} s")
            try:
                sock, _addr = self._server.accept()  # type: ignore[union-attr]
            except TimeoutError:
                continue
            sock.settimeout(None)
            conn = Connection(sock.detach())
            try:
                deliver_challenge(conn, self._key)
                answer_challenge(conn, self._key)
                hello = conn.recv()
            except Exception:  # not one of ours (wrong key, not our protocol)
                conn.close()
                continue
            wid = int(hello.get("worker", -1)) if isinstance(hello, dict) else -1
            found = waiting.pop(wid) if wid in waiting else None
            if found is None:
                conn.close()
                continue
            found.conn, found.pid = conn, int(hello["pid"])
        self.workers.update(started)
        return list(started.values())

    def send(self, w: _Worker, msg: Message) -> bool:
        try:
            assert w.conn is not None
            w.conn.send(msg)
            return True
        except (OSError, ValueError):
            return False

    def receive(self, timeout: float) -> list[tuple[_Worker, Message | None]]:
        """Messages ready within ``timeout``; ``(worker, None)`` for a worker that went away."""
        live = {w.conn: w for w in self.workers.values() if w.conn is not None}
        if not live:
            time.sleep(min(timeout, 0.05))
            return []
        out: list[tuple[_Worker, Message | None]] = []
        for conn in wait(list(live), timeout):
            w = live[conn]  # type: ignore[index]
            try:
                while True:
                    out.append((w, w.conn.recv()))  # type: ignore[union-attr]
                    if not w.conn.poll():  # type: ignore[union-attr]
                        break
            except (EOFError, OSError):
                out.append((w, None))
        return out

    def retire(self, w: _Worker) -> str:
        """Forget a worker that went away; how it ended, with the end of its log."""
        if w.conn is not None:
            w.conn.close()
            w.conn = None
        try:
            code = w.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            w.proc.kill()
            code = w.proc.wait()
        self.workers.pop(w.wid, None)
        tail = _log_tail(w.log)
        return f"the worker process (pid {w.pid}) {_describe_exit(code)}" + (f"; its log ends: {tail}" if tail else "")

    def _kill_all(self, workers: Iterable[_Worker]) -> None:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
            w.proc.wait()
            if w.conn is not None:
                w.conn.close()
                w.conn = None

    def close(self, graceful: bool = True) -> None:
        self._kill_all(self._starting.values())
        self._starting.clear()
        workers = list(self.workers.values())
        if graceful:
            for w in workers:
                self.send(w, {"op": "stop"})
            deadline = time.monotonic() + 5.0
            for w in workers:
                try:
                    w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        self._kill_all(workers)
        self.workers.clear()
        if self._server is not None:
            self._server.close()
            self._server = None


# --- the run ---------------------------------------------------------------------------------


@dataclass
class _Clip:
    """A clip written in this run: its key, wanted name and file order (for final naming)."""

    key: str
    base: str
    action: Any
    order: tuple[int, int]


@dataclass
class _State:
    """What the target looked like before the run (restored at the end)."""

    action: Any = None
    slot: Any = None
    fake_user: bool = False
    taken: set[str] = field(default_factory=set)
    pose: dict[str, Any] = field(default_factory=dict)


# Pose-bone channels and their rest values (axis-angle is Blender's (angle, x, y, z)).
_POSE_CHANNELS = {
    "location": (0.0, 0.0, 0.0),
    "rotation_quaternion": (1.0, 0.0, 0.0, 0.0),
    "rotation_euler": (0.0, 0.0, 0.0),
    "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0),
    "scale": (1.0, 1.0, 1.0),
}


def _get_pose(obj: Any) -> dict[str, Any]:
    import numpy as np

    pbs = obj.pose.bones
    out = {}
    for prop, rest in _POSE_CHANNELS.items():
        buf = np.empty(len(pbs) * len(rest), dtype=np.float32)
        pbs.foreach_get(prop, buf)
        out[prop] = buf
    return out


def _set_pose(obj: Any, values: dict[str, Any] | None = None) -> None:
    """Set every pose channel of ``obj`` to ``values`` (default: the rest pose)."""
    import numpy as np

    pbs = obj.pose.bones
    for prop, rest in _POSE_CHANNELS.items():
        buf = values[prop] if values is not None else np.tile(np.asarray(rest, dtype=np.float32), len(pbs))
        pbs.foreach_set(prop, buf)


class BatchBake:
    """One batch bake onto ``target``, driven step by step (the command line loops over
    :meth:`step`; the modal operator calls it on a timer). See the module docstring."""

    def __init__(
        self,
        target: Any,
        settings: BakeSettings,
        plan: PackPlan,
        *,
        jobs: int | None = None,
        parts_dir: str | None = None,
        log_dir: str | None = None,
        resume: bool = False,
        on_file: Callable[[cb.FileOutcome, int, int], None] | None = None,
        pool: WorkerPool | None = None,
    ) -> None:
        self.target = target
        self.settings = settings
        self.plan = plan
        self.jobs = max(1, int(jobs or default_jobs()))
        self.parts_dir = parts_dir
        self.report = BatchReport(plan)
        self.on_file = on_file
        self.resume = resume
        self._log_dir = log_dir or parts_dir
        self._scratch: str | None = None  # a log folder of our own, removed unless a worker was lost
        self._pool: WorkerPool | None = pool
        self._local: PackCache | None = None
        self._pending: deque[int] = deque()
        self._clips: dict[str, _Clip] = {}
        self._done_files = 0
        self._started = False
        self._closed = False
        self._journal: Any = None
        self._t0 = time.perf_counter()
        self._state = _State()
        self._interrupt = False
        self._cache_counts: dict[int, list[int]] = {}
        self._worker_peak = 0.0
        self._blas = _OneBlasThread()

    # --- progress ---

    @property
    def total_files(self) -> int:
        return len(self.report.files)

    @property
    def files_done(self) -> int:
        return self._done_files

    @property
    def clips_baked(self) -> int:
        return sum(1 for f in self.report.files for c in f.clips if c.status in (cb.CLIP_BAKED, cb.CLIP_RECOVERED))

    @property
    def running(self) -> bool:
        return self._started and not self._closed and (bool(self._pending) or self._busy())

    def progress_text(self) -> str:
        failed = sum(1 for f in self.report.files if f.finished and f.status != cb.FILE_BAKED)
        return f"{self.files_done}/{self.total_files} files, {self.clips_baked} clips baked" + (f", {failed} failed" if failed else "")

    def _busy(self) -> bool:
        return self._pool is not None and any(w.jobs for w in self._pool.workers.values())

    def _log(self, **event: Any) -> None:
        if self._journal is not None:
            self._journal.write(json.dumps(event) + "\n")
            self._journal.flush()

    # --- start ---

    def start(self) -> None:
        """Record the target's state, recover parts of an interrupted run, skip what is already
        baked, and queue the rest."""
        t0 = time.perf_counter()
        self._blas.limit()
        ad_action, ad_slot = compat.current_action(self.target)
        fake = bool(ad_action.use_fake_user) if ad_action else False
        self._state = _State(ad_action, ad_slot, fake, pose=_get_pose(self.target))
        if self.parts_dir:
            os.makedirs(self.parts_dir, exist_ok=True)
            self._journal = open(os.path.join(self.parts_dir, "journal.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
        baked = _baked_clips() if self.resume else {}  # path -> {clip id: Action name}
        known: dict[str, list[str]] = _file_records() if self.resume else {}
        paths = {f.path: i for i, f in enumerate(self.report.files)}
        # Clips an interrupted run computed but did not get into the output.
        if self.resume and self.parts_dir:
            for msg in cb.read_parts(self.parts_dir):
                i = paths.get(msg["path"])
                if i is None or msg["clip"] in baked.get(msg["path"], {}):
                    continue
                if msg.get("file_clips"):
                    known.setdefault(msg["path"], list(msg["file_clips"]))
                self._write_clip(i, msg, cb.CLIP_RECOVERED)
                baked.setdefault(msg["path"], {})[msg["clip"]] = ""
        self._state.taken = {a.name for a in bpy.data.actions if a not in {c.action for c in self._clips.values()}}
        for i, f in enumerate(self.report.files):
            if f.finished:  # refused before anything started
                self._file_finished(i)
                continue
            pf = self.plan.files[i]
            ids = [cb.bvh_clip_id(pf.path)] if pf.is_bvh else known.get(pf.path)
            done = baked.get(pf.path, {})
            for clip_id in sorted(done):
                if f.clip(clip_id) is None:
                    f.clips.append(ClipOutcome(clip_id, cb.CLIP_ALREADY, action=done[clip_id]))
            if ids is not None and done and set(ids) <= done.keys():
                f.clip_ids = list(ids)
                f.clips.sort(key=lambda c: ids.index(c.clip) if c.clip in ids else len(ids))
                f.finished = True
                self._file_finished(i)
                continue
            self._pending.append(i)
        self.report.add_time("start", time.perf_counter() - t0)
        self._started = True
        want = min(self.jobs, len(self._pending)) if self.jobs > 1 else 0
        launched = self._pool.launching if self._pool is not None else 0
        if want or launched:
            self._spawn(max(0, want - launched), self.plan.needs_blender)

    def _spawn(self, count: int, needs_blender: bool) -> None:
        """Start ``count`` more workers, connect every launched one, send each the settings."""
        t0 = time.perf_counter()
        if self._pool is None:
            if self._log_dir is None:
                self._log_dir = self._scratch = _scratch_dir()
            self._pool = WorkerPool(self._log_dir)
        if count:
            self._pool.launch(count, needs_blender)
        started = self._pool.connect()
        for w in started:
            self._pool.send(w, {"op": "setup", "settings": self.settings.to_message(), "parts_dir": self.parts_dir})
            self._log(event="worker", worker=w.wid, pid=w.pid, blender=needs_blender)
        self.report.add_time("workers_start", time.perf_counter() - t0)
        self.report.count("workers_started", len(started))

    # --- stepping ---

    def step(self, timeout: float = 0.2) -> bool:
        """Hand out work, write what has arrived; ``True`` while the run goes on."""
        if not self._started:
            self.start()
        if self._closed:
            return False
        if self.jobs == 1:
            self._step_single(timeout)
        else:
            self._dispatch()
            self._receive(timeout)
        if not self.running:
            self.close()
        return self.running

    def _job(self, i: int) -> Message:
        f = self.report.files[i]
        skip = [c.clip for c in f.clips if c.status == cb.CLIP_ALREADY or c.status == cb.CLIP_RECOVERED]
        return {"op": "file", "file": i, "path": self.plan.files[i].path, "skip": skip}

    def _dispatch(self) -> None:
        if self._pool is None:
            return  # nothing was left to do when the run started
        # Round by round, so that with few files left each worker still gets one.
        for _depth in range(_QUEUE_DEPTH):
            for w in sorted(self._pool.workers.values(), key=lambda w: w.wid):
                if not self._pending:
                    return
                if len(w.jobs) <= _depth:
                    self._send_job(w, self._pending.popleft())

    def _send_job(self, w: _Worker, i: int) -> None:
        assert self._pool is not None
        job = self._job(i)
        if self._pool.send(w, job):
            w.jobs.append(job)
            self._log(event="dispatch", file=job["path"], worker=w.wid, pid=w.pid)
        else:
            self._pending.appendleft(i)  # its death shows up on the next receive

    def _receive(self, timeout: float) -> None:
        if self._pool is None:
            return
        for w, msg in self._pool.receive(timeout):
            if msg is None:
                self._worker_died(w)
            else:
                self._handle(msg, w)
        # Replace workers that died while files remain (one per missing slot); with one job the
        # helper worker is started again only when the next file needs it.
        if self.jobs > 1 and self._pending and self._pool is not None:
            missing = self.jobs - len(self._pool.workers)
            if missing > 0:
                self._spawn(min(missing, len(self._pending)), self.plan.needs_blender)

    def _step_single(self, timeout: float) -> None:
        """``--jobs 1``: BVH files here; files that need an importer to one helper worker."""
        if self._busy():
            self._receive(timeout)
            return
        if not self._pending:
            return
        i = self._pending[0]
        pf = self.plan.files[i]
        if pf.needs_blender:
            if self._pool is None or not self._pool.workers:
                self._spawn(1, True)
            assert self._pool is not None
            self._send_job(next(iter(self._pool.workers.values())), self._pending.popleft())
            self._receive(timeout)
            return
        self._pending.popleft()
        if self._local is None:
            self._local = PackCache(self.settings)
        for msg in run_file(self._job(i), self._local, self.parts_dir):
            self._handle(msg, None)

    # --- messages ---

    def _handle(self, msg: Message, w: _Worker | None) -> None:
        op = msg["op"]
        i = int(msg["file"])
        f = self.report.files[i]
        if op == "start":
            self._log(event="start", file=f.path, worker=w.wid if w is not None else "main", pid=w.pid if w is not None else os.getpid())
        elif op == "clips":
            ids = f.clip_ids = list(msg["clips"])
            self.report.add_time("read", msg["timings"]["read"])
            f.clips.sort(key=lambda c: ids.index(c.clip) if c.clip in ids else len(ids))
        elif op == "clip":
            msg["file_clips"] = f.clip_ids
            for stage, sec in msg["timings"].items():
                self.report.add_time(stage, sec)
            self._write_clip(i, msg, cb.CLIP_BAKED)
        elif op == "clip_failed":
            f.clips.append(ClipOutcome(msg["clip"], cb.CLIP_FAILED, reason=msg["reason"]))
        elif op == "file_failed":
            f.reason = msg["reason"]
        elif op == "file_done":
            f.finished = True
            f.seconds = float(msg["seconds"])
            self._cache_counts[w.wid if w is not None else -1] = list(msg["cache"])
            if w is not None:
                self._worker_peak = max(self._worker_peak, float(msg.get("peak_mb", 0.0)))
            if w is not None and w.jobs and int(w.jobs[0]["file"]) == i:
                w.jobs.popleft()
            self._file_finished(i)

    def _write_clip(self, i: int, msg: Message, status: str) -> None:
        f = self.report.files[i]
        pf = self.plan.files[i]
        clip_id = str(msg["clip"])
        key = cb.clip_key(pf.path, clip_id)
        base = cb.action_base_name(pf, clip_id)
        t0 = time.perf_counter()
        # write_action leaves out curves that would not change the pose it finds (a location of
        # zero where the pose has zero). Whatever pose the open file happens to show (an importer's
        # float noise, an Action evaluated after the output was reopened), every clip is written
        # against the rest pose, so a clip's keys depend on the clip alone.
        _set_pose(self.target)
        try:
            clip = cb.clip_from_message(msg, base)
            action = write_action(self.target, clip, base, frames=msg["frames"], fps=msg["fps"])
            if self.settings.options.root_motion == "OBJECT":
                from .jobs import write_object_travel

                write_object_travel(self.target, action, msg["root_motion"], msg["frames"])
        except MarionetteError as exc:
            f.clips.append(ClipOutcome(clip_id, cb.CLIP_FAILED, reason=f"writing the Action failed: {exc}"))
            return
        action.use_fake_user = True  # an Action no object plays is kept only with a fake user
        action[cb.SOURCE_PROPERTY] = pf.path
        action[cb.CLIP_PROPERTY] = clip_id
        self.report.add_time("write", time.perf_counter() - t0)
        ids = msg.get("file_clips") or [clip_id]
        self._clips[key] = _Clip(key, base, action, (i, ids.index(clip_id) if clip_id in ids else len(ids)))
        f.clips.append(
            ClipOutcome(
                clip_id,
                status,
                action=action.name,
                frames=int(len(msg["frames"])),
                source_frames=int(msg["source_frames"]),
                source_fps=float(msg["source_fps"]),
                method=str(msg.get("method", "geometric")),
                warnings=list(msg.get("warnings", [])),
            )
        )

    def _file_finished(self, i: int) -> None:
        self._done_files += 1
        f = self.report.files[i]
        self._log(event="file", file=f.path, status=f.status)
        if self.on_file is not None:
            self.on_file(f, self._done_files, self.total_files)

    def _worker_died(self, w: _Worker) -> None:
        assert self._pool is not None
        how = self._pool.retire(w)
        self.report.count("workers_lost")
        if not w.jobs:
            return
        # Files it had not started go back to the queue; the one in progress is lost.
        for job in reversed(list(w.jobs)[1:]):
            self._pending.appendleft(int(job["file"]))
        i = int(w.jobs[0]["file"])
        w.jobs.clear()
        f = self.report.files[i]
        ids, rest = self._unfinished_clips(i)
        f.finished = True
        if ids is not None and not rest:  # every clip arrived; only the closing message did not
            self._file_finished(i)
            return
        f.lost = True
        if ids is None:
            f.reason = f"lost while the file was being read (its clips are not known yet): {how}"
        else:
            f.reason = f"lost clip {rest[0]!r} while it was being baked: {how}"
            f.clips.append(ClipOutcome(rest[0], cb.CLIP_LOST, reason=f"in progress when {how}"))
            for c in rest[1:]:
                f.clips.append(ClipOutcome(c, cb.CLIP_LOST, reason="not reached: the worker baking this file was lost"))
        self._file_finished(i)

    def _unfinished_clips(self, i: int) -> tuple[list[str] | None, list[str]]:
        """The clip ids of file ``i`` (``None`` when not known yet) and those with no outcome."""
        f, pf = self.report.files[i], self.plan.files[i]
        # A BVH holds one clip named after the file, known before the file is read.
        ids = f.clip_ids if f.clip_ids is not None else ([cb.bvh_clip_id(pf.path)] if pf.is_bvh else None)
        got = {c.clip for c in f.clips}
        return ids, [c for c in (ids or []) if c not in got]

    # --- stopping ---

    def request_interrupt(self) -> None:
        self._interrupt = True

    @property
    def interrupt_requested(self) -> bool:
        return self._interrupt

    def cancel(self, reason: str) -> None:
        """Stop now: workers are killed (their clips in progress are reported, not written); every
        clip already written stays."""
        if self._closed:
            return
        self.report.interrupted = reason
        if self._pool is not None:
            for w in list(self._pool.workers.values()):
                for job in list(w.jobs)[1:]:  # not started: cancelled with the queue below
                    self._pending.append(int(job["file"]))
                if w.jobs:
                    i = int(w.jobs[0]["file"])
                    f = self.report.files[i]
                    ids, rest = self._unfinished_clips(i)
                    f.finished = True
                    if ids is None or rest:  # else every clip arrived: the file is baked
                        f.cancelled = True
                        f.reason = f"cancelled while being baked ({reason})"
                        for c in rest:
                            f.clips.append(ClipOutcome(c, cb.CLIP_CANCELLED, reason=reason))
                    self._file_finished(i)
                w.jobs.clear()
        while self._pending:
            i = self._pending.popleft()
            f = self.report.files[i]
            f.cancelled = True
            f.reason = f"not started ({reason})"
            f.finished = True
            self._file_finished(i)
        self.close(graceful=False)

    def close(self, graceful: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        self._blas.restore()
        if self._pool is not None:
            self._pool.close(graceful)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._scratch is not None and not self.report.counters.get("workers_lost"):
            shutil.rmtree(self._scratch, ignore_errors=True)

    def run(self, poll: float = 0.2) -> BatchReport:
        """Run to the end (or until :meth:`request_interrupt`), then :meth:`finish`."""
        try:
            while self.step(poll):
                if self._interrupt:
                    self.cancel("interrupted by the user (Ctrl-C)")
        finally:
            if not self._closed:
                self.cancel(self.report.interrupted or "stopped by an error")
        return self.finish()

    def finish(self) -> BatchReport:
        """Name the new Actions, restore the target's own Action, record what the output holds."""
        t0 = time.perf_counter()
        self.close()
        names = cb.final_action_names({k: c.base for k, c in self._clips.items()}, self._state.taken, id_name_limit())
        # Two passes so that a name freed by one rename is never taken by Blender's ".001" rule.
        for k, c in self._clips.items():
            c.action.name = f"marionette_batch_tmp_{cb.part_file_name(k)}"
        for k, c in self._clips.items():
            c.action.name = names[k]
        for f, pf in zip(self.report.files, self.plan.files, strict=False):
            for co in f.clips:
                key = cb.clip_key(pf.path, co.clip)
                if key in self._clips:
                    co.action = self._clips[key].action.name
        st = self._state
        if st.pose:
            _set_pose(self.target, st.pose)
        if st.action is not None:
            compat.assign_action(self.target, st.action, st.slot)
            st.action.use_fake_user = st.fake_user
        elif self._clips:
            first = min(self._clips.values(), key=lambda c: c.order)
            compat.assign_action(self.target, first.action, compat.action_slot_for(first.action, self.target))
        scene: Any = bpy.context.scene
        scene[TARGET_RECORD] = self.target.name
        record = _file_records()
        for f in self.report.files:
            if f.clip_ids is not None:
                record[f.path] = list(f.clip_ids)
        scene[FILES_RECORD] = json.dumps(record)
        self.report.add_time("finish", time.perf_counter() - t0)
        self.report.add_time("wall", time.perf_counter() - self._t0)
        hits = [sum(c[k] for c in self._cache_counts.values()) for k in range(4)]
        self.report.info["method"] = {
            "name": self.settings.method_name(),
            "table": dict(self.settings.methods),
            "match_rest": self.settings.match_rest,
        }
        self.report.info["worker_peak_mb"] = round(self._worker_peak, 1)
        self.report.info["binding_cache"] = {
            "mapping_hits": hits[0],
            "mapping_misses": hits[1],
            "binding_hits": hits[2],
            "binding_misses": hits[3],
        }
        return self.report


def _scratch_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="marionette_batch_")


def _baked_clips() -> dict[str, dict[str, str]]:
    """Source path -> {clip id: Action name} of every Action a batch bake wrote into the open file."""
    out: dict[str, dict[str, str]] = {}
    for a in bpy.data.actions:
        src, clip = a.get(cb.SOURCE_PROPERTY), a.get(cb.CLIP_PROPERTY)
        if isinstance(src, str) and isinstance(clip, str):
            out.setdefault(src, {})[clip] = a.name
    return out


def _file_records() -> dict[str, list[str]]:
    raw = bpy.context.scene.get(FILES_RECORD)
    if not isinstance(raw, str):
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return {str(k): [str(c) for c in v] for k, v in data.items() if isinstance(v, list)}


# --- settings from a target ------------------------------------------------------------------


def bake_settings(
    target: Any,
    mapping: BoneMapping | None,
    options: RetargetOptions,
    *,
    keep_frames: bool = False,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
) -> BakeSettings:
    """The run's shared settings; refuses (naming what is missing) a target that is not a humanoid,
    and a bad method table.

    The method table is the one :func:`.jobs.retarget_action` uses: the given target mapping's
    ``methods`` (saved from the sidebar), overridden by ``methods``."""
    from .jobs import rig_input

    table = {**(mapping.methods if mapping is not None else {}), **(methods or {})}
    rig, tmap = rig_input(target, mapping)
    return BakeSettings(rig, mapping_key(tmap.bones()), scene_fps(), keep_frames, options, table, bool(match_rest))


# --- the command line's job ------------------------------------------------------------------


def parts_directory(output: str | os.PathLike[str]) -> str:
    return str(Path(output).resolve()) + ".parts"


def _pick_armature(candidates: Sequence[Any], name: str | None, label: str) -> Any:
    arms = [o for o in candidates if o is not None and o.type == "ARMATURE"]
    if name is not None:
        for a in arms:
            if a.name == name or a.data.name == name:
                return a
        listed = ", ".join(repr(a.name) for a in arms) or "none"
        raise RigError(f"{label}: no armature called {name!r} (armatures: {listed})")
    if not arms:
        raise RigError(f"{label}: the file has no armature to bake onto")
    return max(arms, key=lambda a: (len(a.data.bones), a.name))


def _reopen_output(output: Path, parts: str, resume: bool) -> bool:
    """Whether a resumed run continues the existing output, and note how this run started.

    An interrupted run leaves its parts and a note; an output older than the interrupted run's
    start, when that run started afresh, is from an earlier bake and is not continued (the parts
    are written onto the target instead)."""
    note = Path(parts) / "run.json"
    reopen = resume and output.is_file()
    if reopen and note.is_file():
        try:
            earlier = json.loads(note.read_text(encoding="utf-8"))
            if not earlier.get("reopened") and output.stat().st_mtime < float(earlier["started"]):
                reopen = False
        except (OSError, ValueError, KeyError, TypeError):
            pass
    os.makedirs(parts, exist_ok=True)
    note.write_text(json.dumps({"started": time.time(), "reopened": reopen}), encoding="utf-8")
    return reopen


def _open_target(target_path: str, output: Path, reopen: bool, armature: str | None) -> tuple[Any, bool]:
    """Open what the run writes into: the existing output when it is continued, else the target
    file. Returns the target armature and whether the output was reopened."""
    if reopen:
        bpy.ops.wm.open_mainfile(filepath=str(output), load_ui=False)
        name = armature or bpy.context.scene.get(TARGET_RECORD)
        return _pick_armature(list(bpy.data.objects), name if isinstance(name, str) else None, output.name), True
    path = os.path.abspath(target_path)
    label = os.path.basename(path)
    if not os.path.isfile(path):
        raise MarionetteError(f"{label}: no such file ({path})")
    if path.lower().endswith(".blend"):
        # A .blend character is opened whole: the output is that file plus the new Actions.
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        return _pick_armature(list(bpy.context.scene.objects), armature, label), False
    bpy.ops.wm.read_factory_settings(use_empty=True)
    loaded = load_file(path)
    return _pick_armature(loaded.armatures, armature, label), False


class _CtrlC:
    """While active, the first Ctrl-C asks the run to stop at the next safe point (never in the
    middle of writing an Action); a second one interrupts at once."""

    def __init__(self, runner: BatchBake) -> None:
        self.runner = runner
        self.previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        if self.runner.interrupt_requested:
            raise KeyboardInterrupt
        self.runner.request_interrupt()

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def bake_pack(
    inputs: Sequence[str],
    target_path: str,
    output: str,
    *,
    jobs: int | None = None,
    report_path: str | None = None,
    target_armature: str | None = None,
    mapping: str | None = None,
    resume: bool = False,
    keep_frames: bool = False,
    options: RetargetOptions | None = None,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
    progress: Callable[[str], None] | None = None,
) -> BatchReport:
    """The command line's batch bake: every clip of ``inputs`` onto the target, saved to
    ``output`` (see the module docstring). The report is also written to ``report_path``.
    ``methods`` and ``match_rest`` choose the retarget method as for a single retarget (the
    table is checked before any file is read or written)."""
    from ..core.retarget_methods import check_method_table
    from .jobs import save_blend

    methods = check_method_table(methods)
    t0 = time.perf_counter()
    out = Path(output).resolve()
    parts = parts_directory(out)
    if not resume and os.path.isdir(parts):
        shutil.rmtree(parts)  # leftovers of an earlier run that nobody resumed
    plan = plan_pack(inputs, exclude=[out, parts, str(out) + ".partial.blend"])
    if not plan.files and not plan.refused:
        raise MarionetteError("no clip files (.bvh, .fbx, .glb/.gltf, .blend) in " + ", ".join(map(str, inputs)))
    reopen = _reopen_output(out, parts, resume)
    n_jobs = max(1, jobs or default_jobs())
    pool: WorkerPool | None = None
    if n_jobs > 1 and plan.files:
        # Workers start (import numpy, the add-on, maybe Blender) while this process opens the target.
        pool = WorkerPool(parts)
        pool.launch(min(n_jobs, len(plan.files)), plan.needs_blender)
    try:
        target, reopened = _open_target(target_path, out, reopen, target_armature)
        target_map = BoneMapping.load(mapping) if mapping else None
        settings = bake_settings(
            target, target_map, options or RetargetOptions(), keep_frames=keep_frames, methods=methods, match_rest=match_rest
        )
    except BaseException:
        if pool is not None:
            pool.close(graceful=False)
        raise
    opened = time.perf_counter() - t0

    def on_file(f: cb.FileOutcome, done: int, total: int) -> None:
        if progress is None:
            return
        good = sum(1 for c in f.clips if c.status in (cb.CLIP_BAKED, cb.CLIP_ALREADY, cb.CLIP_RECOVERED))
        why = f.summary_reason()
        progress(f"[{done:>{len(str(total))}}/{total}] {f.status:9s} {f.label} ({good} clip{'s' if good != 1 else ''})" + (f": {why}" if why and f.status != cb.FILE_BAKED else ""))

    runner = BatchBake(target, settings, plan, jobs=n_jobs, parts_dir=parts, resume=resume, on_file=on_file, pool=pool)
    with _CtrlC(runner):
        report = runner.run()
        t1 = time.perf_counter()
        save_blend(out)
        report.add_time("save", time.perf_counter() - t1)
    report.add_time("open", opened)
    report.info.update(
        output=str(out),
        target={"file": os.path.abspath(target_path), "armature": target.name, "reopened_output": reopened},
        jobs=runner.jobs,
        scene_fps=settings.scene_fps,
    )
    report.timings["wall"] = time.perf_counter() - t0
    # Everything is in the saved output now; the parts only mattered until it existed.
    shutil.rmtree(parts, ignore_errors=True)
    if report_path:
        write_report(report, report_path)
    return report


def write_report(report: BatchReport, path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    tmp.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    tmp.replace(p)
    return str(p)


# --- the operator ----------------------------------------------------------------------------


def _target_of(context: Any) -> Any:
    s = getattr(context.scene, "marionette", None)
    obj = s.target if s is not None and s.target is not None else context.active_object
    return obj if obj is not None and obj.type == "ARMATURE" else None


class MARIONETTE_OT_batch_bake(bpy.types.Operator, ImportHelper):
    """Bake every clip of the chosen files or folder onto the target as new Actions, in parallel
    (Esc keeps what is already baked)"""

    bl_idname = "marionette.batch_bake"
    bl_label = "Batch Bake"
    bl_options = {"REGISTER", "UNDO"}

    filter_glob: StringProperty(default="*.bvh;*.fbx;*.glb;*.gltf;*.blend", options={"HIDDEN"})  # type: ignore[valid-type]
    directory: StringProperty(subtype="DIR_PATH")  # type: ignore[valid-type]
    files: CollectionProperty(type=bpy.types.OperatorFileListElement)  # type: ignore[valid-type]
    jobs: IntProperty(name="Jobs", default=0, min=0, max=64, description="Worker processes (0: one per core)")  # type: ignore[valid-type]
    report_path: StringProperty(  # type: ignore[valid-type]
        name="Report", subtype="FILE_PATH", description="Where to save the JSON report (empty: next to the .blend, or the temp folder)"
    )

    _runner: BatchBake | None = None
    _timer: Any = None

    @classmethod
    def poll(cls, context: Any) -> bool:
        if _target_of(context) is None:
            cls.poll_message_set("Pick a target armature in the Retarget panel (or make one active)")
            return False
        if context.mode not in {"OBJECT", "POSE"}:
            cls.poll_message_set("Leave Edit Mode first")
            return False
        return True

    def _inputs(self) -> list[str]:
        names = [f.name for f in self.files if f.name]
        if names:
            return [os.path.join(self.directory, n) for n in names]
        return [self.directory or self.filepath]

    def execute(self, context: Any) -> set[str]:
        from .properties import mappings_from_rows, methods_from_rows
        from .retarget_ops import options_of

        target = _target_of(context)
        s = getattr(context.scene, "marionette", None)
        try:
            rows = mappings_from_rows(s) if s is not None else None
            options = options_of(s) if s is not None else RetargetOptions()
            # The sidebar's method column and Match Rest, as Retarget Clip takes them.
            settings = bake_settings(
                target,
                rows[1] if rows else None,
                options,
                keep_frames=bool(s and s.keep_frames),
                methods=methods_from_rows(s) if s is not None else None,
                match_rest=bool(s and s.match_rest),
            )
            plan = plan_pack([bpy.path.abspath(p) for p in self._inputs()])
        except MarionetteError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if not plan.files and not plan.refused:
            self.report({"ERROR"}, "No clip files (BVH, FBX, glTF/GLB, .blend) in the selection")
            return {"CANCELLED"}
        self._runner = BatchBake(target, settings, plan, jobs=self.jobs or None)
        try:
            self._runner.start()
        except MarionetteError as exc:
            self._runner.cancel(str(exc))
            return self._finish(context)
        if bpy.app.background or context.window is None:
            with _CtrlC(self._runner):
                while self._runner.step(0.2):
                    if self._runner.interrupt_requested:
                        self._runner.cancel("interrupted by the user (Ctrl-C)")
            return self._finish(context)
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.05, window=context.window)
        wm.progress_begin(0, max(1, self._runner.total_files))
        wm.modal_handler_add(self)
        self._status(context)
        return {"RUNNING_MODAL"}

    def _status(self, context: Any) -> None:
        assert self._runner is not None
        context.workspace.status_text_set(f"Batch Bake: {self._runner.progress_text()} (Esc to cancel)")
        context.window_manager.progress_update(self._runner.files_done)

    def modal(self, context: Any, event: Any) -> set[str]:
        assert self._runner is not None
        if event.type == "ESC" and event.value == "PRESS":
            self._runner.cancel("cancelled by the user (Esc)")
            return self._finish(context)
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        # Write what has arrived, but give the interface the rest of each tick.
        deadline = time.perf_counter() + 0.04
        while self._runner.step(0.0) and time.perf_counter() < deadline:
            pass
        self._status(context)
        if not self._runner.running:
            return self._finish(context)
        return {"RUNNING_MODAL"}

    def _finish(self, context: Any) -> set[str]:
        assert self._runner is not None
        report = self._runner.finish()
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
            wm.progress_end()
            context.workspace.status_text_set(None)
        report.info["target"] = {"armature": self._runner.target.name}
        path = self.report_path or (
            bpy.path.abspath("//marionette_batch_report.json") if bpy.data.filepath else os.path.join(bpy.app.tempdir or ".", "marionette_batch_report.json")
        )
        try:
            saved = write_report(report, bpy.path.abspath(path))
        except OSError as exc:
            saved = f"(not saved: {exc})"
        context.scene[REPORT_RECORD] = json.dumps(report.to_dict())
        lines = report.summary_lines()
        self.report({"INFO"} if report.ok else {"WARNING"}, f"Batch Bake: {lines[0]}; report {saved}")
        for line in lines[1:]:
            self.report({"WARNING"}, line.strip())
        if not bpy.app.background and context.window is not None:
            def draw(menu: Any, _context: Any) -> None:
                for line in lines[:30]:
                    menu.layout.label(text=line.strip())

            wm.popup_menu(draw, title="Batch Bake", icon="INFO" if report.ok else "ERROR")
        self._runner = None
        return {"FINISHED"}

    def cancel(self, context: Any) -> None:
        # Blender ends the operator (the file closes, the add-on unloads): stop the workers.
        if self._runner is not None:
            self._runner.cancel("the operator was stopped")
            self._runner.finish()
            self._runner = None


classes = (MARIONETTE_OT_batch_bake,)
register, unregister = bpy.utils.register_classes_factory(classes)
