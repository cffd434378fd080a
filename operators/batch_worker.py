"""Reading and retargeting the clips of one pack file, in a worker process or in this one.

:func:`file_events` turns a pack file into the messages of :mod:`core.batch` (``clips``, then one
``clip`` or ``clip_failed`` per clip). BVH files are read and retargeted with numpy alone
(:func:`core.batch.bvh_file_events`); FBX, glTF and .blend files need Blender's importers, so
``bpy`` is imported the first time one comes along, never before: a worker fed only BVH files
starts in a fraction of a second and stays small.

Every non-BVH file is imported into a freshly reset, empty Blender file, so what the importers
name things (the Action names that become clip ids) depends on the file alone, not on which
files this process read before; everything the file brought is dropped afterwards.

:func:`serve` is a worker's main loop: it connects back to the main process (address and key
given on the command line and in the environment), receives the run's settings once, then file
after file, and sends each message as soon as it exists, so the main process writes each clip
while the next one is computed. The worker ignores Ctrl-C (the main process decides what an
interrupt means) and exits when the main process goes away.

Nothing here imports ``bpy`` at module level.
"""

# The bpy stubs type Object.data as a union of every data type; that says nothing about this code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.batch import BakeSettings, Message, PackCache, bake_clip, bvh_file_events, write_part
from ..core.errors import MarionetteError

KEY_ENVIRONMENT = "MARIONETTE_BATCH_KEY"


def _blender_file_events(path: str, cache: PackCache, skip: Iterable[str]) -> Iterator[Message]:
    """FBX, glTF/GLB or .blend: import into an empty file, map the armature once, then read
    and retarget each of its Actions."""
    import bpy

    from .armature_io import clip_from_action, rest_heads_tails, skeleton_from_armature
    from .file_import import load_file

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
    yield {"op": "clips", "clips": clip_ids, "timings": {"read": time.perf_counter() - t0}}
    todo = [a for a in actions if a.name not in set(skip)]
    if not todo:
        return
    t1 = time.perf_counter()
    skeleton = skeleton_from_armature(source)
    _, tails = rest_heads_tails(source, skeleton)
    rig, layout = cache.source(skeleton, tails)
    map_time = time.perf_counter() - t1
    for action in todo:
        t2 = time.perf_counter()
        try:
            clip = clip_from_action(source, action)
            t3 = time.perf_counter()
            msg = bake_clip(cache, rig, layout, clip)
        except MarionetteError as exc:
            yield {"op": "clip_failed", "clip": action.name, "reason": str(exc)}
            continue
        msg["clip"] = action.name
        msg["timings"].update(read=t3 - t2, map=map_time)
        map_time = 0.0
        yield msg


def file_events(path: str, cache: PackCache, skip: Iterable[str] = ()) -> Iterator[Message]:
    """The messages of one pack file (see :mod:`core.batch`); raises :class:`MarionetteError`
    for a file that cannot be read or whose rig cannot be retargeted."""
    if path.lower().endswith(".bvh"):
        return bvh_file_events(path, cache, skip)
    return _blender_file_events(path, cache, skip)


def run_file(job: Message, cache: PackCache, parts_dir: str | None) -> Iterator[Message]:
    """One file job, each message tagged with the job's file id and path; a baked clip is saved as
    a part before it is handed on. Failures become ``file_failed`` messages; ``file_done`` ends."""
    fid, path = job["file"], job["path"]
    t0 = time.perf_counter()
    yield {"op": "start", "file": fid, "path": path}
    try:
        for msg in file_events(path, cache, job.get("skip", ())):
            msg["file"], msg["path"] = fid, path
            if msg["op"] == "clip" and parts_dir:
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
    }


def peak_memory_mb() -> float:
    """This process's peak resident memory (0 where the platform does not say).

    On Linux the kernel's high-water mark of this program (``VmHWM``): ``ru_maxrss`` would also
    count the parent's memory at the fork that started this process."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (2**20 if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB elsewhere


def serve(argv: list[str]) -> int:
    """A worker's main loop: ``argv`` is ``[host, port, worker id]``; the key is in the
    environment."""
    import signal
    from multiprocessing.connection import Client

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host, port, wid = argv[0], int(argv[1]), int(argv[2])
    key = bytes.fromhex(os.environ.pop(KEY_ENVIRONMENT))
    conn = Client((host, port), authkey=key)
    conn.send({"op": "hello", "worker": wid, "pid": os.getpid()})
    cache: PackCache | None = None
    parts_dir: str | None = None
    try:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                return 0  # the main process is gone: nothing left to do
            op = job.get("op")
            if op == "stop":
                return 0
            if op == "setup":
                cache = PackCache(BakeSettings.from_message(job["settings"]))
                parts_dir = job.get("parts_dir")
                continue
            if op == "file" and cache is not None:
                for msg in run_file(job, cache, parts_dir):
                    conn.send(msg)
                sys.stdout.flush()
                sys.stderr.flush()
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
sys.exit(importlib.import_module(name + ".operators.batch_worker").serve(args[1:]))
"""
"""Started as ``python -c BOOTSTRAP -- <add-on folder> <host> <port> <worker id>`` (or through
``blender --python-expr``): loads the add-on from its folder under a private package name, so
the worker needs neither an installed package nor a change to its search path."""


def worker_environment(key: bytes) -> dict[str, Any]:
    env = dict(os.environ)
    env[KEY_ENVIRONMENT] = key.hex()
    # One process per core already; threaded BLAS inside each would only fight over the cores.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env
