"""Batch Bake's worker processes: what they run, and how the main process starts and talks to them.

:func:`file_events` turns a pack file into the messages of :mod:`core.batch.plan` (``clips``, then one
``clip`` or ``clip_failed`` per clip). BVH files are read and retargeted with numpy alone
(:func:`core.batch.plan.bvh_file_events`); FBX, glTF and .blend files need Blender's importers, so
``bpy`` is imported the first time one comes along, never before: a worker fed only BVH files
starts in a fraction of a second and stays small.

Every non-BVH file is imported into a freshly reset, empty Blender file, so what the importers
name things (the Action names that become clip ids) depends on the file alone, not on which
files this process read before; everything the file brought is dropped afterwards.

:func:`serve` is a worker's main loop: it connects back to the main process (address and key
given on the command line and in the environment), receives the run's settings once, then job
after job (a file, or some of a file's clips), and sends its messages as they exist, so the main
process writes one file while the next is computed. Messages go in batches: a BVH job's
``clips``, ``clip`` and ``file_done`` travel as one send; an imported file's ``clips`` and each
``clip`` go at once (when the main process may split the file, it answers the first ``clip``
with the clips this worker is to bake; a lost worker's report names the clip it was on). The worker
ignores Ctrl-C (the main process decides what an interrupt means) and exits when the main process
goes away, even when stuck on a file (:mod:`.worker_process`).

Start-up: :func:`start_pack` plans the pack and starts the workers *before* the main process
imports Blender (nothing here imports ``bpy`` at module level): on Linux by forking the command
line's process, which has the add-on imported already (:class:`ForkedWorker`), elsewhere (and
inside Blender, and for workers started later) as new programs (:data:`BOOTSTRAP`). Each worker
gets a list of BVH files to read ahead (:class:`ReadAhead`) while the main process loads Blender
and the target, and the main process hands it those files first.
"""

# The bpy stubs type Object.data as a union of every data type; that says nothing about this code.
# mypy: disable-error-code="union-attr"
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
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from pathlib import Path
from typing import Any

from ..core.batch.baking import PackCache, bake_clip, bvh_file_events
from ..core.batch.messages import Message
from ..core.batch.output_files import existing_volumes, stray_volumes, write_part
from ..core.batch.pack_limits import useful_jobs
from ..core.batch.plan import PackPlan, plan_pack
from ..core.batch.settings import BakeSettings
from ..core.errors import MarionetteError
from ..core.formats.bvh import BvhData, read_bvh
from .worker_process import PARENT_ENVIRONMENT, die_with_parent, openblas_threads, peak_memory_mb

KEY_ENVIRONMENT = "MARIONETTE_BATCH_KEY"
ADDON_ROOT = str(Path(__file__).resolve().parent.parent)

START_TIMEOUT = 120.0  # seconds for a worker to connect back (a Blender binary starts slowly)
#: Read ahead at most this many files, and this many bytes of motion, per worker.
READ_AHEAD_FILES = 256
READ_AHEAD_BYTES = 64 * 2**20

Choose = Callable[[list[str]], list[str]]


# --- one file ----------------------------------------------------------------------------


def _blender_file_events(path: str, cache: PackCache, skip: Iterable[str], only: Sequence[str] | None, choose: Choose | None) -> Iterator[Message]:
    """FBX, glTF/GLB or .blend: import into an empty file, map the armature once, then read
    and retarget each of its Actions: those in ``only`` when given; else those not in ``skip``,
    of which, with ``choose``, the first and then those ``choose`` picks from the rest (it is
    called once the first clip's message is out, so the main process knows what one of this
    file's clips costs before it splits the file)."""
    import bpy

    from ..bridge.armature_io import clip_from_action, rest_heads_tails, skeleton_from_armature
    from ..bridge.file_import import load_file

    bpy.ops.wm.read_factory_settings(use_empty=True)
    t0 = time.perf_counter()
    loaded = load_file(path)
    # The armature with the most bones is the character (as for the retarget command).
    source = max(loaded.armatures, key=lambda a: len(a.data.bones))
    actions = list(loaded.actions)
    if not actions:
        ad = source.animation_data
        if ad is not None and ad.action is not None:
            actions = [ad.action]
    clip_ids = [a.name for a in actions]
    frames = [max(1, round(a.frame_range[1] - a.frame_range[0]) + 1) for a in actions]
    yield {"op": "clips", "clips": clip_ids, "frames": frames, "timings": {"read": time.perf_counter() - t0}}
    skipped = set(skip)
    todo = [a for a in actions if a.name not in skipped]
    if only is not None:
        wanted = set(only)
        todo = [a for a in todo if a.name in wanted]
    if not todo:
        return
    t1 = time.perf_counter()
    skeleton = skeleton_from_armature(source)
    _, tails = rest_heads_tails(source, skeleton)
    rig, layout = cache.source(skeleton, tails)
    map_time = time.perf_counter() - t1
    ask = choose is not None and only is None and len(todo) > 1
    k = 0
    while k < len(todo):
        action = todo[k]
        k += 1
        t2 = time.perf_counter()
        try:
            clip = clip_from_action(source, action)
            t3 = time.perf_counter()
            msg = bake_clip(cache, rig, layout, clip)
        except MarionetteError as exc:
            msg = {"op": "clip_failed", "clip": action.name, "reason": str(exc)}
        else:
            msg["clip"] = action.name
            msg["timings"].update(read=t3 - t2, map=map_time)
            map_time = 0.0
        yield msg
        if ask and choose is not None:
            ask = False
            wanted = set(choose([a.name for a in todo[k:]]))
            todo = todo[:k] + [a for a in todo[k:] if a.name in wanted]


def file_events(
    path: str,
    cache: PackCache,
    skip: Iterable[str] = (),
    *,
    only: Sequence[str] | None = None,
    choose: Choose | None = None,
    data: BvhData | None = None,
) -> Iterator[Message]:
    """The messages of one pack file (see :mod:`core.batch.plan`); raises :class:`MarionetteError`
    for a file that cannot be read or whose rig cannot be retargeted. ``data``: a BVH file
    already read."""
    if path.lower().endswith(".bvh"):
        return bvh_file_events(path, cache, skip, data=data)
    return _blender_file_events(path, cache, skip, only, choose)


def run_file(
    job: Message, cache: PackCache, parts_dir: str | None, choose: Choose | None = None, data: Any = None, ahead_seconds: float = 0.0
) -> Iterator[Message]:
    """One job (a file, or the clips ``job["clips"]`` of it), each message tagged with the job's
    file id and path; a baked clip carries the run's settings record and is saved as a part before
    it is handed on. Failures become ``file_failed`` messages; ``file_done`` ends the job.
    ``data``: the BVH file read ahead (or the error reading it raised), in ``ahead_seconds``."""
    fid, path = job["file"], job["path"]
    t0 = time.perf_counter()
    yield {"op": "start", "file": fid, "path": path}
    record = cache.settings.record_text()
    try:
        if isinstance(data, BaseException):
            raise data
        for msg in file_events(path, cache, job.get("skip", ()), only=job.get("clips"), choose=choose, data=data):
            msg["file"], msg["path"] = fid, path
            if msg["op"] == "clips" and data is not None:
                msg["timings"]["read"] += ahead_seconds
                msg["read_ahead"] = True
            if msg["op"] == "clip":
                msg["settings"] = record
                if parts_dir:
                    t = time.perf_counter()
                    write_part(parts_dir, msg)
                    msg["timings"]["part"] = time.perf_counter() - t
            yield msg
    except MarionetteError as exc:
        yield {"op": "file_failed", "file": fid, "path": path, "reason": str(exc)}
    except Exception as exc:  # a bug or an importer crash must cost this file only
        traceback.print_exc()
        yield {"op": "file_failed", "file": fid, "path": path, "reason": f"internal error: {type(exc).__name__}: {exc}"}
    stats = cache.stats
    yield {
        "op": "file_done",
        "file": fid,
        "path": path,
        "seconds": time.perf_counter() - t0,
        "cache": [stats.mapping_hits, stats.mapping_misses, stats.binding_hits, stats.binding_misses],
        "peak_mb": peak_memory_mb(),
        "blender": "bpy" in sys.modules,
    }


# --- the worker's loop -------------------------------------------------------------------


class ReadAhead:
    """Reads BVH files in a thread while the worker waits for the main process to start (import
    Blender, open the target): the main process hands this worker those files first.

    At most :data:`READ_AHEAD_FILES` files and :data:`READ_AHEAD_BYTES` of motion are held; the
    thread stops at the first job (from then on it would only compete with the job for the
    core)."""

    def __init__(self, paths: Sequence[str]) -> None:
        # The worker's own thread must answer the main process's handshake while this one reads:
        # hand the interpreter over every 0.5 ms rather than 5 (measured: 60 ms less to connect).
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._interval, 0.0005))
        self._paths = list(paths)[:READ_AHEAD_FILES]
        self._done: dict[str, tuple[BvhData | BaseException, float]] = {}
        self._current: str | None = None
        self._stop = False
        self._held = 0
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="read-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for path in self._paths:
            with self._cv:
                if self._stop or self._held > READ_AHEAD_BYTES:
                    break
                self._current = path
            data: BvhData | BaseException
            t0 = time.perf_counter()
            try:
                data = read_bvh(path)
            except Exception as exc:  # reported when the file's job comes
                data = exc
            with self._cv:
                self._done[path] = (data, time.perf_counter() - t0)
                if isinstance(data, BvhData):
                    self._held += int(data.motion.nbytes)
                self._current = None
                self._cv.notify_all()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
        sys.setswitchinterval(self._interval)

    def take(self, path: str) -> tuple[BvhData | BaseException | None, float]:
        """The file read ahead (or the error reading it raised) and the seconds reading took;
        ``(None, 0)`` when it was not read ahead."""
        with self._cv:
            while self._current == path:
                self._cv.wait()
            data, seconds = self._done.pop(path, (None, 0.0))
            if isinstance(data, BvhData):
                self._held -= int(data.motion.nbytes)
            return data, seconds

    @property
    def count(self) -> int:
        with self._cv:
            return len(self._done)


def serve(argv: list[str]) -> int:
    """A worker's main loop: ``argv`` is ``[host, port, worker id, read-ahead list or ""]``; the
    key is in the environment."""
    from multiprocessing.connection import Client

    die_with_parent()  # a worker stuck on a file must not outlive the main process
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host, port, wid = argv[0], int(argv[1]), int(argv[2])
    ahead: ReadAhead | None = None
    if len(argv) > 3 and argv[3]:
        with open(argv[3], encoding="utf-8") as f:
            ahead = ReadAhead(json.load(f))
    key = bytes.fromhex(os.environ.pop(KEY_ENVIRONMENT))
    conn = Client((host, port), authkey=key)
    conn.send([{"op": "hello", "worker": wid, "pid": os.getpid()}])
    cache: PackCache | None = None
    parts_dir: str | None = None
    backlog: deque[Message] = deque()
    stopping = False
    working = False  # from the first job on, time spent waiting for the next one is idle time
    idle = 0.0

    def next_message() -> Message | None:
        nonlocal idle
        if backlog:
            return backlog.popleft()
        t = time.perf_counter()
        try:
            got: Message = conn.recv()
        except (EOFError, OSError):
            return None  # the main process is gone
        if working:
            idle += time.perf_counter() - t
        return got

    try:
        while not stopping:
            job = next_message()
            if job is None:
                return 0
            op = job.get("op")
            if op == "stop":
                return 0
            if op == "setup":
                cache = PackCache(BakeSettings.from_message(job["settings"]))
                parts_dir = job.get("parts_dir")
                continue
            if op != "file" or cache is None:
                continue
            if ahead is not None:
                ahead.stop()
            working = True
            fid = job["file"]
            streaming = not str(job["path"]).lower().endswith(".bvh")

            def choose(ids: list[str], fid: Any = fid) -> list[str]:
                # The main process answers this file's clips message with the clips to bake here.
                nonlocal stopping
                while True:
                    try:
                        m: Message = conn.recv()
                    except (EOFError, OSError):
                        stopping = True
                        return []
                    if m.get("op") == "take" and m.get("file") == fid:
                        return [str(c) for c in m["clips"]]
                    if m.get("op") == "stop":
                        stopping = True
                        return []
                    backlog.append(m)

            data, seconds = ahead.take(job["path"]) if ahead is not None and not streaming else (None, 0.0)
            out: list[Message] = []
            for msg in run_file(job, cache, parts_dir, choose if job.get("ask") else None, data, seconds):
                if msg["op"] == "file_done":
                    msg["idle"], idle = idle, 0.0
                out.append(msg)
                if msg["op"] in ("start", "file_done") or (streaming and msg["op"] in ("clips", "clip", "clip_failed")):
                    conn.send(out)
                    out = []
            sys.stdout.flush()
            sys.stderr.flush()
        return 0
    finally:
        conn.close()


BOOTSTRAP = r"""
import importlib, importlib.util, os, sys
args = sys.argv[sys.argv.index("--") + 1:]
root, name = args[0], "_marionette_batch_worker"
spec = importlib.util.spec_from_file_location(
    name, os.path.join(root, "__init__.py"), submodule_search_locations=[root])
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
sys.exit(importlib.import_module(name + ".batch_runner.batch_worker").serve(args[1:]))
"""
"""Started as ``python -c BOOTSTRAP -- <add-on folder> <host> <port> <worker id> <read-ahead>``
(or through ``blender --python-expr``): loads the add-on from its folder under a private package
name, so the worker needs neither an installed package nor a change to its search path."""


def worker_environment(key: bytes) -> dict[str, Any]:
    env = dict(os.environ)
    env[KEY_ENVIRONMENT] = key.hex()
    env[PARENT_ENVIRONMENT] = str(os.getpid())
    # One process per core already; threaded BLAS inside each would only fight over the cores.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


# --- the main process's side -------------------------------------------------------------


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class Worker:
    wid: int
    needs_blender: bool
    proc: subprocess.Popen[bytes] | ForkedWorker
    log: str
    conn: Connection | None = None
    pid: int = 0
    #: Jobs sent and not finished, in order: the first is in progress, the others wait in the
    #: worker's connection so that it never idles while the main process writes.
    jobs: deque[Any] = field(default_factory=deque)
    #: When the worker last said anything (or was given work while idle): the per-file timeout
    #: counts from here.
    heard: float = 0.0
    #: Whether it has imported Blender (a second import of a file it splits costs less then).
    blender: bool = False


def describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped responding"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def log_tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4000))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])


class ForkedWorker:
    """A worker forked from the command line's process before it loaded Blender: it starts in a
    few milliseconds with the add-on already imported (a fresh Python takes 0.1 to 0.3 s to import
    numpy and the add-on, more where no bytecode is cached). Offers what the pool uses of
    :class:`subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -int(signal.SIGKILL)  # reaped elsewhere; gone either way
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def can_fork_workers() -> bool:
    """Whether workers can be forked from this process: on Linux, before Blender is loaded here
    (Blender's own threads and state must never be forked)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and "bpy" not in sys.modules


def _fork_worker(argv: list[str], log: str, key: bytes) -> ForkedWorker:
    """Fork a worker running :func:`serve` with ``argv``, its output to ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return ForkedWorker(pid)
    code = 1
    try:  # the child: never returns into the caller
        os.setsid()  # Ctrl-C in the terminal is for the main process only
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        blas = openblas_threads()  # one process per core already, as the environment says for others
        if blas is not None:
            blas[1](1)
        os.environ[KEY_ENVIRONMENT] = key.hex()
        os.environ[PARENT_ENVIRONMENT] = str(parent)
        code = serve(argv)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _blender_binary() -> str:
    """Inside real Blender, the Blender program (its Python has numpy but no bpy module);
    ``""`` with Blender as a Python module (imported or not yet)."""
    bpy = sys.modules.get("bpy")
    return str(getattr(getattr(bpy, "app", None), "binary_path", "") or "") if bpy is not None else ""


class WorkerPool:
    """Worker processes connected back over a local socket (any Python or Blender binary can
    connect; nothing is inherited but the command line and the environment)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.workers: dict[int, Worker] = {}
        self._next_id = 0
        self._key = os.urandom(32)
        self._server: socket.socket | None = None
        self._starting: dict[int, Worker] = {}
        self._stopping: list[Worker] = []
        #: Worker id -> the BVH files it was asked to read ahead.
        self.read_ahead: dict[int, list[str]] = {}

    def _command(self, needs_blender: bool, port: int, wid: int, ahead: str) -> list[str]:
        tail = ["--", ADDON_ROOT, "127.0.0.1", str(port), str(wid), ahead]
        binary = _blender_binary()
        if binary and needs_blender:
            # Inside real Blender: sys.executable is its bundled Python, which has numpy but no
            # bpy; a worker that must import files is another Blender, in the background.
            return [binary, "--background", "--factory-startup", "--python-exit-code", "1", "--python-expr", BOOTSTRAP, *tail]
        # bpy as a module: this Python imports bpy when it needs it. Real Blender: its Python.
        return [sys.executable, "-c", BOOTSTRAP, *tail]

    def spawn(self, count: int, needs_blender: bool) -> list[Worker]:
        """Start ``count`` workers and wait until each has connected and said hello."""
        self.launch(count, needs_blender)
        return self.connect()

    def launch(self, count: int, needs_blender: bool, read_ahead: Sequence[Sequence[str]] = (), fork: bool = False) -> None:
        """Start ``count`` workers without waiting for them (they start while this process goes
        on with its own start); :meth:`connect` waits. ``read_ahead[k]``: BVH files the ``k``-th
        of them reads while it waits for work. ``fork``: fork them from this process (see
        :func:`can_fork_workers`) rather than start new programs."""
        if self._server is None:
            self._server = socket.create_server(("127.0.0.1", 0))
            self._server.settimeout(0.1)
        port = self._server.getsockname()[1]
        for k in range(count):
            wid = self._next_id
            self._next_id += 1
            log = os.path.join(self.log_dir, f"worker-{wid}.log")
            ahead = ""
            if k < len(read_ahead) and read_ahead[k]:
                ahead = os.path.join(self.log_dir, f"read-ahead-{wid}.json")
                with open(ahead, "w", encoding="utf-8") as f:
                    json.dump(list(read_ahead[k]), f)
                self.read_ahead[wid] = list(read_ahead[k])
            if fork and can_fork_workers():
                self._starting[wid] = Worker(wid, needs_blender, _fork_worker(["127.0.0.1", str(port), str(wid), ahead], log, self._key), log)
                continue
            kwargs: dict[str, Any] = {}
            if os.name == "posix":
                kwargs["start_new_session"] = True  # Ctrl-C in the terminal is for this process only
            else:
                kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    self._command(needs_blender, port, wid, ahead),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=worker_environment(self._key),
                    **kwargs,
                )
            self._starting[wid] = Worker(wid, needs_blender, proc, log)

    @property
    def launching(self) -> int:
        return len(self._starting)

    def connect(self) -> list[Worker]:
        """Wait until every launched worker has connected and said hello."""
        assert self._server is not None or not self._starting
        started, self._starting = self._starting, {}
        waiting = dict(started)
        deadline = time.monotonic() + START_TIMEOUT
        while waiting:
            for w in list(waiting.values()):
                if w.proc.poll() is not None:
                    self._kill_all(started.values())
                    raise MarionetteError(f"a worker process could not start: it {describe_exit(w.proc.returncode)} ({log_tail(w.log)})")
            if time.monotonic() > deadline:
                self._kill_all(started.values())
                raise MarionetteError(f"worker processes did not start within {START_TIMEOUT:.0f} s")
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
                hello = hello[0] if isinstance(hello, list) and hello else hello
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

    def send(self, w: Worker, msg: Message) -> bool:
        try:
            assert w.conn is not None
            w.conn.send(msg)
            return True
        except (OSError, ValueError):
            return False

    def receive(self, timeout: float) -> list[tuple[Worker, Message | None]]:
        """Messages ready within ``timeout``; ``(worker, None)`` for a worker that went away."""
        live = {w.conn: w for w in self.workers.values() if w.conn is not None}
        if not live:
            time.sleep(min(timeout, 0.05))
            return []
        out: list[tuple[Worker, Message | None]] = []
        for conn in wait(list(live), timeout):
            w = live[conn]  # type: ignore[index]
            try:
                while True:
                    got = w.conn.recv()  # type: ignore[union-attr]
                    out.extend((w, m) for m in (got if isinstance(got, list) else [got]))
                    if not w.conn.poll():  # type: ignore[union-attr]
                        break
            except (EOFError, OSError):
                out.append((w, None))
        return out

    def kill(self, w: Worker) -> None:
        """End a worker at once (it stopped answering)."""
        if w.proc.poll() is None:
            w.proc.kill()

    def retire(self, w: Worker) -> str:
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
        tail = log_tail(w.log)
        return f"the worker process (pid {w.pid}) {describe_exit(code)}" + (f"; its log ends: {tail}" if tail else "")

    def _kill_all(self, workers: Iterable[Worker]) -> None:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
            w.proc.wait()
            if w.conn is not None:
                w.conn.close()
                w.conn = None

    def stop(self) -> None:
        """Ask every worker to exit, without waiting for it (:meth:`close` waits): the main
        process saves its output meanwhile."""
        for w in self.workers.values():
            if w.conn is not None:
                self.send(w, {"op": "stop"})
                self._stopping.append(w)
        self.workers.clear()

    def close(self, graceful: bool = True) -> None:
        self._kill_all(self._starting.values())
        self._starting.clear()
        if graceful:
            self.stop()
        workers = [*self._stopping, *self.workers.values()]
        if graceful:
            deadline = time.monotonic() + 5.0
            for w in workers:
                try:
                    w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        self._kill_all(workers)
        self._stopping.clear()
        self.workers.clear()
        if self._server is not None:
            self._server.close()
            self._server = None


# --- the command line's start, before Blender is loaded ----------------------------------


def parts_directory(output: str | os.PathLike[str]) -> str:
    return str(Path(output).resolve()) + ".parts"


@dataclass
class PackStart:
    """What the command line prepares before it loads Blender: the plan, the parts folder, the
    interrupted run being continued (if any) and the workers already starting."""

    output: str
    parts: str
    plan: PackPlan
    #: Workers the run uses (``--jobs`` lowered to what the machine and the pack can use).
    jobs: int
    resume: bool
    #: When an interrupted run that started afresh began (``None``: no such run): volumes saved
    #: before then are an earlier bake's, not that run's.
    earlier_start: float | None
    pool: WorkerPool | None
    #: ``--jobs`` as given (``None``: one per core), and why fewer workers run (``None``: as asked).
    requested: int | None = None
    jobs_note: str | None = None
    #: Whether this run made the parts folder (a refused run removes it again).
    made_parts: bool = False

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close(graceful=False)
            self.pool = None

    def refused(self) -> None:
        """The run was refused after its start (bad target, bad mapping...): stop the workers and
        remove what the start wrote, so that nothing is left behind."""
        self.close()
        if self.made_parts:
            shutil.rmtree(self.parts, ignore_errors=True)


def pack_jobs(requested: int | None, plan: PackPlan) -> tuple[int, str | None]:
    """The workers a run of ``plan`` uses when ``requested`` were asked for, and why fewer (see
    :func:`core.batch.pack_limits.useful_jobs`)."""
    shared = sum(1 for f in plan.files if f.needs_blender)
    return useful_jobs(requested, default_jobs(), len(plan.files), shared)


def _note_run(parts: str, resume: bool) -> float | None:
    """Record when this run starts (and whether it continues an earlier one); return when the
    interrupted run being continued started, if that run started afresh."""
    note = Path(parts) / "run.json"
    earlier: float | None = None
    if resume and note.is_file():
        try:
            data = json.loads(note.read_text(encoding="utf-8"))
            if not data.get("continued"):
                earlier = float(data["started"])
            elif data.get("earlier_start") is not None:
                earlier = float(data["earlier_start"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    os.makedirs(parts, exist_ok=True)
    note.write_text(json.dumps({"started": time.time(), "continued": resume, "earlier_start": earlier}), encoding="utf-8")
    return earlier


def start_pack(inputs: Sequence[str], output: str, *, jobs: int | None = None, resume: bool = False, read_ahead: bool = True) -> PackStart:
    """Plan the pack and start its workers (with files to read ahead on a fresh run) without
    importing Blender; refuses a pack without clip files (an empty or missing folder, only
    entries that cannot be read) before anything is written."""
    out = str(Path(output).resolve())
    parts = parts_directory(out)
    own = [out, parts, out + ".partial.blend", *existing_volumes(out), *stray_volumes(out, 0)]
    plan = plan_pack(inputs, exclude=own)
    if not plan.files:
        said = "; ".join(f"{p}: {why}" for p, why in plan.refused[:3])
        raise MarionetteError((said + " (no clip files to bake)") if said else "no clip files (.bvh, .fbx, .glb/.gltf, .blend) in " + ", ".join(map(str, inputs)))
    if not resume and os.path.isdir(parts):
        shutil.rmtree(parts)  # leftovers of an earlier run that nobody resumed
    made = not os.path.isdir(parts)
    earlier = _note_run(parts, resume)
    count, note = pack_jobs(jobs, plan)
    pool = WorkerPool(parts)
    try:
        ahead: list[list[str]] = []
        if read_ahead and not resume:  # a resumed run does not know yet which files are done
            bvh = [f.path for f in plan.files if f.is_bvh]
            ahead = [bvh[k::count][:READ_AHEAD_FILES] for k in range(count)]
        # Even one worker: a file that hangs its reader is then stopped by --timeout.
        pool.launch(count, plan.needs_blender, ahead, fork=True)
    except BaseException:
        pool.close(graceful=False)
        if made:
            shutil.rmtree(parts, ignore_errors=True)
        raise
    return PackStart(out, parts, plan, count, resume, earlier, pool, requested=jobs, jobs_note=note, made_parts=made)
