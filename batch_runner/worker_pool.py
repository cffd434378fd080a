"""Batch Bake's worker processes, the main process's side: starting workers and talking to them.

Workers connect back over a local socket authenticated with a random key (:class:`WorkerPool`).
On Linux, before the main process imports Blender, they are forked from the command line's
process, which has the add-on imported already (:class:`ForkedWorker`); elsewhere (and inside
Blender, and for workers started later) they start as new programs (:data:`BOOTSTRAP`) that load
the add-on from its folder. What a worker runs is :mod:`.batch_worker`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from pathlib import Path
from typing import Any

from ..core.batch.messages import Message
from ..core.errors import MarionetteError
from .batch_worker import KEY_ENVIRONMENT, serve
from .worker_process import PARENT_ENVIRONMENT, openblas_threads

ADDON_ROOT = str(Path(__file__).resolve().parent.parent)

START_TIMEOUT = 120.0  # seconds for a worker to connect back (a Blender binary starts slowly)


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
    tasks: deque[Any] = field(default_factory=deque)
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


def fork_child(run: Callable[[], int]) -> int:
    """Fork; the child runs ``run`` and exits with its status (1 and the traceback on stderr if it
    raised), never returning into the caller. Returns the child's pid to the parent."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = run()
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _fork_worker(argv: list[str], log: str, key: bytes) -> ForkedWorker:
    """Fork a worker running :func:`serve` with ``argv``, its output to ``log``."""
    parent = os.getpid()

    def child() -> int:
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
        return serve(argv)

    return ForkedWorker(fork_child(child))


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
