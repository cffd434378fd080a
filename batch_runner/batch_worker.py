"""Batch Bake's worker processes, the worker side: what a worker runs for each file, and its loop.

:func:`file_events` turns a pack file into the messages of :mod:`core.batch.messages` (``clips``, then one
``clip`` or ``clip_failed`` per clip). BVH files are read and retargeted with numpy alone
(:func:`core.batch.baking.bvh_file_events`); FBX, glTF and .blend files need Blender's importers, so
``bpy`` is imported the first time one comes along, never before: a worker fed only BVH files
starts in a fraction of a second and stays small.

Every non-BVH file is imported into a freshly reset, empty Blender file, so what the importers
name things (the Action names that become clip ids) depends on the file alone, not on which
files this process read before; everything the file brought is dropped afterwards.

:func:`serve` is a worker's main loop: it connects back to the main process (address and key
given on the command line and in the environment), receives the run's settings once, then task
after task (a file, or some of a file's clips; or, for the sidebar's Export, a clip to write for an
engine: :mod:`.export_worker`), and sends its messages as they exist, so the main
process writes one file while the next is computed. Messages go in batches: a BVH task's
``clips``, ``clip`` and ``file_done`` travel as one send; an imported file's ``clips`` and each
``clip`` go at once (when the main process may split the file, it answers the first ``clip``
with the clips this worker is to bake; a lost worker's report names the clip it was on). The worker
ignores Ctrl-C (the main process decides what an interrupt means) and exits when the main process
goes away, even when stuck on a file (:mod:`.worker_process`).

The main process's side (starting workers, talking to them) is :mod:`.worker_pool`; the
command line's start of a pack, :mod:`.pack_start`.
"""

# The bpy stubs type Object.data as a union of every data type; that says nothing about this code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..core.batch.baking import PackCache, bake_clip, bvh_file_events, vmd_file_events
from ..core.batch.messages import Message
from ..core.batch.output_files import write_part
from ..core.batch.settings import BakeSettings
from ..core.errors import MarionetteError
from ..core.formats.bvh import BvhData, read_bvh
from .export_worker import export_one
from .worker_process import die_with_parent, peak_memory_mb

KEY_ENVIRONMENT = "MARIONETTE_BATCH_KEY"

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

    from ..bridge.clip_read import clip_from_action
    from ..bridge.file_import import load_file
    from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature

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
    """The messages of one pack file (see :mod:`core.batch.messages`); raises :class:`MarionetteError`
    for a file that cannot be read or whose rig cannot be retargeted. ``data``: a BVH file
    already read."""
    if path.lower().endswith(".bvh"):
        return bvh_file_events(path, cache, skip, data=data)
    if path.lower().endswith(".vmd"):
        return vmd_file_events(path, cache, skip)
    return _blender_file_events(path, cache, skip, only, choose)


def run_file(
    task: Message, cache: PackCache, parts_dir: str | None, choose: Choose | None = None, data: Any = None, ahead_seconds: float = 0.0
) -> Iterator[Message]:
    """One task (a file, or the clips ``task["clips"]`` of it), each message tagged with the task's
    file id and path; a baked clip carries the run's settings record and is saved as a part before
    it is handed on. Failures become ``file_failed`` messages; ``file_done`` ends the task.
    ``data``: the BVH file read ahead (or the error reading it raised), in ``ahead_seconds``."""
    fid, path = task["file"], task["path"]
    t0 = time.perf_counter()
    yield {"op": "start", "file": fid, "path": path}
    record = cache.settings.record_text()
    try:
        if isinstance(data, BaseException):
            raise data
        for msg in file_events(path, cache, task.get("skip", ()), only=task.get("clips"), choose=choose, data=data):
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
    thread stops at the first task (from then on it would only compete with the task for the
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
            except Exception as exc:  # reported when the file's task comes
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
    working = False  # from the first task on, time spent waiting for the next one is idle time
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
            task = next_message()
            if task is None:
                return 0
            op = task.get("op")
            if op == "stop":
                return 0
            if op == "setup":
                cache = PackCache(BakeSettings.from_message(task["settings"]))
                parts_dir = task.get("parts_dir")
                continue
            if op == "export":  # the sidebar's Export: one clip written from a saved copy of the session
                conn.send([export_one(task)])
                sys.stdout.flush()
                sys.stderr.flush()
                continue
            if op != "file" or cache is None:
                continue
            if ahead is not None:
                ahead.stop()
            working = True
            fid = task["file"]
            streaming = not str(task["path"]).lower().endswith((".bvh", ".vmd"))

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

            data, seconds = ahead.take(task["path"]) if ahead is not None and not streaming else (None, 0.0)
            out: list[Message] = []
            for msg in run_file(task, cache, parts_dir, choose if task.get("ask") else None, data, seconds):
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


