"""Batch Bake: every clip of an animation pack onto one character, in parallel, losing nothing.

How the work is split, and why:

* This process holds the target in Blender and is the only one that writes to it: Blender data
  can only be changed from its main thread. It writes the baked clips file by file in pack order
  (:func:`.armature_io.write_action`, bulk ``foreach_set``), whatever order they arrive in, so
  the output does not depend on which worker finished first.
* Reading and retargeting, which do not need this Blender, run in *worker processes*
  (``--jobs``, one per core by default; :mod:`.batch_worker`), each started once and fed job
  after job. A worker reads BVH with numpy alone (:mod:`core.formats.bvh`) and imports ``bpy`` only when
  it first meets an FBX, glTF or .blend file (starting Blender costs about 0.5 s and 260 MB, more
  than a clip's own work). Workers keep a mapping and binding cache (:class:`core.batch.plan.PackCache`),
  so a pack from one capture shoot maps and binds once per worker. The command line starts the
  workers before it loads Blender, and each reads its first BVH files while this process loads
  Blender and the target. ``--jobs`` is lowered to what can be used: one worker per core, and
  no more than the pack has work for (:func:`core.batch.pack_limits.useful_jobs`). With ``--jobs 1``
  the files go to one worker as well, one at a time (a step of the run is one BVH file, as
  if it were read here): a file that hangs its reader is stopped by ``--timeout`` like with
  more jobs, imported files are imported into an empty file whatever this file holds, and the
  keys are those of any other ``--jobs``.
* Results travel as plain messages (:mod:`core.batch.plan`) over a local socket authenticated with a
  random key. Each worker is handed two jobs ahead, so it never waits for this process to write.
  A file with several long clips is split between two workers when that ends it sooner than one
  worker would (:func:`core.batch.plan.split_point`: the second worker imports the file too).
* A worker that stays silent for ``--timeout`` seconds on one file (a hanging importer) is killed;
  the file is reported failed, "timed out after N s", and the rest go on with a new worker.
* Memory: a worker holds one file's data at a time (about 50 MB for BVH, about 300 MB once it has
  imported Blender). This process holds the target and the Actions of the output file it is
  writing. When those pass a budget (``--max-file-mb``, estimated from the keys written, or
  ``--max-clips-per-file``), it saves them as one *volume* (``OUT.blend``, then ``OUT.002.blend``,
  ...: each the target plus the next clips in pack order) and frees them, so its memory does not
  grow with the pack. Clips that arrive before their turn wait as messages, and past a limit only
  as their parts on disk.

Nothing lost:

* A worker saves each baked clip as a *part* (``OUT.blend.parts/*.npz``) before sending it. If
  this process dies, ``--resume`` writes the parts into the output without computing them again.
* A killed or crashed worker costs the clip it was computing: the report names that clip (and
  any clips of the same job it had not reached), a new worker takes the remaining files, and
  the run ends with a non-zero status. Ctrl-C (or Esc in Blender) stops the workers, keeps every
  clip already computed, saves, and reports what was not baked.
* ``--resume`` continues the existing output (every volume) and skips every clip already in it
  (Actions carry their source file, clip id and the settings they were baked with), then bakes
  the rest. A clip baked under other settings (another ``--method``, ``--keep-frames``...) is
  baked again, and the report says why. An output older than an interrupted fresh run is an
  earlier bake's and is not continued.
* Action names are decided per output file from the clips' keys alone
  (:func:`core.batch.plan.final_action_names`), so the same pack gives the same files whatever order
  the workers finished in.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bpy
from bpy.props import CollectionProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..batch_runner.pack_start import PackStart, pack_jobs, parts_directory, start_pack
from ..batch_runner.worker_pool import Worker, WorkerPool, default_jobs
from ..batch_runner.worker_process import openblas_threads, peak_memory_mb
from ..bridge import compat
from ..bridge.armature_io import write_action
from ..bridge.file_import import load_file, scene_fps
from ..bridge.played_pose import switch_to_pose_position
from ..core.batch.messages import Message, clip_from_message, drop_arrays, message_bytes
from ..core.batch.output_files import (
    CLIP_PROPERTY,
    SETTINGS_PROPERTY,
    SOURCE_PROPERTY,
    existing_volumes,
    part_file_name,
    read_part,
    read_parts,
    stray_volumes,
    volume_path,
)
from ..core.batch.pack_limits import why_unreadable
from ..core.batch.plan import (
    PackPlan,
    action_base_name,
    bvh_clip_id,
    clip_key,
    final_action_names,
    plan_pack,
    split_point,
)
from ..core.batch.report import BatchReport, ClipOutcome, FileOutcome
from ..core.batch.settings import BakeSettings, mapping_key, record_difference
from ..core.batch.status import (
    CLIP_ALREADY,
    CLIP_BAKED,
    CLIP_CANCELLED,
    CLIP_FAILED,
    CLIP_LOST,
    CLIP_RECOVERED,
    FILE_BAKED,
)
from ..core.errors import MarionetteError, RigError
from ..core.mapping.bone_mapping import BoneMapping
from ..core.retarget.geometric import RetargetOptions

__all__ = ["BatchBake", "ModalDriver", "bake_pack", "bake_settings", "default_jobs", "parts_directory", "write_report"]

#: Scene custom properties of an output file: the target's name and each file's clip ids.
TARGET_RECORD = "marionette_batch_target"
FILES_RECORD = "marionette_batch_files"
REPORT_RECORD = "marionette_batch_report"

_QUEUE_DEPTH = 2  # jobs handed to a worker ahead of time
DEFAULT_TIMEOUT = 600.0  # seconds a worker may stay silent on one file
DEFAULT_FILE_MB = 1024.0  # Actions held before a volume is saved and freed
#: Blender's memory per key of a baked Action, measured with bpy 5.0.1: 200 CMU clips of 114
#: frames x 122 curves took 194 MB (73 bytes a key, the F-curves' own overhead included).
ACTION_BYTES_PER_KEY = 73.0
#: Baked clips waiting for their turn to be written are held as messages up to this many bytes;
#: past it, their arrays are dropped and read back from their parts when their turn comes.
_WAITING_BYTES = 256 * 2**20
#: Seconds a worker that has not imported Blender yet needs before its first imported file
#: (importing bpy and resetting to an empty file: 0.6 to 0.9 s measured on two busy cores).
_BLENDER_START = 1.0


def id_name_limit() -> int:
    """Bytes in an ID name: 255 from Blender 5.0, 63 before."""
    return 255 if bpy.app.version >= (5, 0, 0) else 63


# --- this process's BLAS threads -------------------------------------------------------------


class _OneBlasThread:
    """While a run lasts, numpy's OpenBLAS in this process uses one thread.

    After a threaded call, OpenBLAS keeps its other threads spinning (``sched_yield``) for a while,
    and this process makes such calls for every clip it writes: measured, 2.9 s of system time per
    100 clips, a core taken from the workers. Workers get ``OPENBLAS_NUM_THREADS=1`` before numpy
    loads; here numpy is loaded already, so the count is set through OpenBLAS itself and restored
    afterwards. Without a bundled OpenBLAS this does nothing.
    """

    def __init__(self) -> None:
        self._controls = openblas_threads()
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


# --- the run ---------------------------------------------------------------------------------


@dataclass
class _Job:
    """Work for one worker: file ``file`` of the report, all its clips not in ``skip`` or only
    ``clips``."""

    file: int
    skip: list[str] = field(default_factory=list)
    clips: list[str] | None = None
    #: The worker that read this file ahead (it gets the job first).
    prefer: int | None = None
    #: The worker baking the file's other clips (this job goes elsewhere while others live).
    avoid: int | None = None
    #: Whether the worker asks which clips to bake once it has imported the file.
    ask: bool = False
    arrived: set[str] = field(default_factory=set)


@dataclass
class _Clip:
    """A clip written in this run into the output file being filled: its key, wanted name and
    pack order (for naming and for which clip the target plays)."""

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


@dataclass
class EarlierOutput:
    """What ``--resume`` found in the output's volumes other than the one it continues: clips kept
    (source path -> clip id -> (Action name, file name)), each file's clip ids, and the clips
    removed because they were baked with other settings (clip key -> why)."""

    baked: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    known: dict[str, list[str]] = field(default_factory=dict)
    stale: dict[str, str] = field(default_factory=dict)


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


def _action_keys(action: Any) -> int:
    """Keys in every F-curve of ``action`` (what its memory grows with)."""
    return sum(len(fc.keyframe_points) for slot in action.slots for fc in compat.action_fcurves(action, slot))


def _batch_actions() -> list[tuple[Any, str, str, Any]]:
    """``(action, source path, clip id, settings record)`` of every Action a batch bake wrote into
    the open file."""
    out = []
    for a in bpy.data.actions:
        src, clip = a.get(SOURCE_PROPERTY), a.get(CLIP_PROPERTY)
        if isinstance(src, str) and isinstance(clip, str):
            out.append((a, src, clip, a.get(SETTINGS_PROPERTY)))
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


class ModalDriver:
    """What the operator does with each event while a run goes on, without the operator: a timer
    tick writes what has arrived for at most ``budget`` seconds (the interface keeps the rest of
    the tick), Esc cancels keeping what is baked, anything else passes through. :meth:`event`
    returns the operator's answer (``RUNNING_MODAL``, ``PASS_THROUGH`` or ``FINISHED``)."""

    def __init__(self, runner: BatchBake, budget: float = 0.04) -> None:
        self.runner = runner
        self.budget = budget
        self.ticks = 0

    def event(self, kind: str, value: str) -> str:
        if kind == "ESC" and value == "PRESS":
            self.runner.cancel("cancelled by the user (Esc)")
            return "FINISHED"
        if kind != "TIMER":
            return "PASS_THROUGH"
        self.ticks += 1
        deadline = time.perf_counter() + self.budget
        while self.runner.step(0.0) and time.perf_counter() < deadline:
            pass
        return "RUNNING_MODAL" if self.runner.running else "FINISHED"


class BatchBake:
    """One batch bake onto ``target``, driven step by step (the command line loops over
    :meth:`step`; the modal operator calls it on a timer). See the module docstring.

    With ``output`` the Actions are saved into volumes of that file as they pass the budget
    (``max_clips`` per file, ``max_mb`` of estimated Action memory) and the last one at
    :meth:`finish`; without it they stay in the open file (the operator). Baked clips waiting for
    their turn are held up to ``waiting_mb``, then only as their parts (with ``parts_dir``)."""

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
        on_file: Callable[[FileOutcome, int, int], None] | None = None,
        pool: WorkerPool | None = None,
        output: str | None = None,
        volume: int = 0,
        max_clips: int | None = None,
        max_mb: float | None = DEFAULT_FILE_MB,
        timeout: float | None = DEFAULT_TIMEOUT,
        earlier: EarlierOutput | None = None,
        waiting_mb: float = _WAITING_BYTES / 2**20,
    ) -> None:
        self.target = target
        self.settings = settings
        self.plan = plan
        #: Workers used, and why fewer than ``jobs`` (``None``: as asked).
        self.jobs, self.jobs_note = pack_jobs(jobs, plan)
        self.jobs_requested = jobs
        self.parts_dir = parts_dir
        self.report = BatchReport(plan)
        self.on_file = on_file
        self.resume = resume
        self.output = output
        self.timeout = float(timeout) if timeout else None
        self._max_clips = int(max_clips) if max_clips else None
        self._max_bytes = float(max_mb) * 2**20 if (max_mb and output) else None
        self._earlier = earlier or EarlierOutput()
        self._record = settings.record()
        self._record_text = settings.record_text()
        self._log_dir = log_dir or parts_dir
        self._scratch: str | None = None  # a log folder of our own, removed unless a worker was lost
        self._pool: WorkerPool | None = pool
        self._pending: deque[_Job] = deque()
        self._prefer_left: dict[int, int] = {}
        self._pose_note: str | None = None
        self._open_jobs: dict[int, int] = {}
        self._waiting: dict[int, list[Message]] = {}  # file -> baked clips waiting for their turn
        self._waiting_bytes = 0
        self._waiting_limit = float(waiting_mb) * 2**20
        self._cursor = 0  # files before it are written
        self._file_frames: dict[int, list[int]] = {}  # file -> frames of each of its clips
        self._import_seconds: dict[int, float] = {}
        self._clips: dict[str, _Clip] = {}  # this run's clips in the output file being filled
        self._outcomes: dict[str, ClipOutcome] = {}
        self._stale: dict[str, str] = dict(self._earlier.stale)
        self._volume = int(volume)
        self._volume_clips = 0
        self._volume_keys = 0
        self._outputs: list[str] = []  # volumes saved by this run
        self._volumes_total = int(volume)  # volumes the output has (saved now or by the run continued)
        self._records: dict[str, list[str]] = {}
        self._held_max = 0
        self._started = False
        self._closed = False
        self._finished = False
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
        return self._cursor

    @property
    def clips_baked(self) -> int:
        return sum(1 for f in self.report.files for c in f.clips if c.status in (CLIP_BAKED, CLIP_RECOVERED))

    @property
    def actions_held_max(self) -> int:
        """The most Actions the open file held at once during the run (measured after each write)."""
        return self._held_max

    @property
    def running(self) -> bool:
        return self._started and not self._closed and (bool(self._pending) or self._busy())

    def progress_text(self) -> str:
        failed = sum(1 for f in self.report.files[: self._cursor] if f.status != FILE_BAKED)
        return f"{self.files_done}/{self.total_files} files, {self.clips_baked} clips baked" + (f", {failed} failed" if failed else "")

    def _busy(self) -> bool:
        return self._pool is not None and any(w.jobs for w in self._pool.workers.values())

    def _log(self, **event: Any) -> None:
        if self._journal is not None:
            event["t"] = round(time.time(), 4)
            self._journal.write(json.dumps(event) + "\n")
            self._journal.flush()

    # --- start ---

    def start(self) -> None:
        """Record the target's state, drop clips baked under other settings, recover parts of an
        interrupted run, skip what is already baked, and queue the rest."""
        t0 = time.perf_counter()
        self._blas.limit()
        ad_action, ad_slot = compat.current_action(self.target)
        if ad_action is not None and ad_action.get(SOURCE_PROPERTY) is not None:
            ad_action, ad_slot = None, None  # a continued output's clip, not the target's own Action
        fake = bool(ad_action.use_fake_user) if ad_action else False
        self._state = _State(ad_action, ad_slot, fake, pose=_get_pose(self.target))
        if self.parts_dir:
            os.makedirs(self.parts_dir, exist_ok=True)
            self._journal = open(os.path.join(self.parts_dir, "journal.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
        here = os.path.basename(volume_path(self.output, self._volume)) if self.output else ""
        baked: dict[str, dict[str, tuple[str, str]]] = {p: dict(c) for p, c in self._earlier.baked.items()} if self.resume else {}
        known: dict[str, list[str]] = dict(self._earlier.known) if self.resume else {}
        if self.resume:
            known.update(_file_records())
            for action, src, clip, record in _batch_actions():
                why = record_difference(record, self._record)
                if why is not None:
                    self._stale[clip_key(src, clip)] = why
                    bpy.data.actions.remove(action)
                    continue
                baked.setdefault(src, {})[clip] = (action.name, here)
                self._volume_clips += 1
                self._volume_keys += _action_keys(action)
        self._records = known
        paths = {f.path: i for i, f in enumerate(self.report.files)}
        self._state.taken = {a.name for a in bpy.data.actions}
        # Clips an interrupted run computed but did not get into the output.
        if self.resume and self.parts_dir:
            for msg in read_parts(self.parts_dir):
                i = paths.get(msg["path"])
                if i is None or msg["clip"] in baked.get(msg["path"], {}):
                    continue
                why = record_difference(msg.get("settings"), self._record)
                if why is not None:
                    self._stale.setdefault(clip_key(msg["path"], msg["clip"]), why)
                    continue
                if msg.get("file_clips"):
                    known.setdefault(msg["path"], list(msg["file_clips"]))
                self._write_clip(i, msg, CLIP_RECOVERED)
                baked.setdefault(msg["path"], {})[msg["clip"]] = ("", "")
        ahead = {p: wid for wid, ps in (self._pool.read_ahead.items() if self._pool is not None else ()) for p in ps}
        for i, f in enumerate(self.report.files):
            if f.finished:  # refused before anything started
                continue
            pf = self.plan.files[i]
            ids = [bvh_clip_id(pf.path)] if pf.is_bvh else known.get(pf.path)
            done = baked.get(pf.path, {})
            for clip_id in sorted(done):
                if f.clip(clip_id) is None:
                    name, where = done[clip_id]
                    f.clips.append(ClipOutcome(clip_id, CLIP_ALREADY, action=name, output=where or None))
            if ids is not None and done and set(ids) <= done.keys():
                f.clip_ids = list(ids)
                f.finished = True
                continue
            prefer = ahead.get(pf.path)
            if prefer is not None:
                self._prefer_left[prefer] = self._prefer_left.get(prefer, 0) + 1
            skip = [c.clip for c in f.clips if c.status in (CLIP_ALREADY, CLIP_RECOVERED)]
            self._pending.append(_Job(i, skip, prefer=prefer, ask=self.jobs > 1 and not pf.is_bvh))
            self._open_jobs[i] = 1
        self._flush()
        self.report.add_time("start", time.perf_counter() - t0)
        self._started = True
        shareable = any(self.plan.files[j.file].needs_blender for j in self._pending)  # clips a second worker can share
        want = self.jobs if shareable else min(self.jobs, len(self._pending))
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

    def _job_message(self, job: _Job) -> Message:
        m: Message = {"op": "file", "file": job.file, "path": self.plan.files[job.file].path, "skip": list(job.skip)}
        if job.clips is not None:
            m["clips"] = list(job.clips)
        if job.ask and job.clips is None:
            m["ask"] = True
        return m

    def _pick(self, w: Worker) -> _Job | None:
        """The next job for ``w``: a file it read ahead, else the first one nobody read ahead,
        else (taken from the end) one another worker read ahead. A second half of a split file
        does not go to the worker baking the first half while another worker lives."""
        assert self._pool is not None
        live = self._pool.workers

        def allowed(job: _Job) -> bool:
            return not (job.avoid == w.wid and len(live) > 1)

        if self._prefer_left.get(w.wid):
            for idx, job in enumerate(self._pending):
                if job.prefer == w.wid:
                    self._prefer_left[w.wid] -= 1
                    del self._pending[idx]
                    return job
        for idx, job in enumerate(self._pending):
            if allowed(job) and (job.prefer is None or job.prefer not in live):
                del self._pending[idx]
                return job
        for idx in range(len(self._pending) - 1, -1, -1):
            job = self._pending[idx]
            if allowed(job):
                if job.prefer is not None and job.prefer in self._prefer_left:
                    self._prefer_left[job.prefer] -= 1
                del self._pending[idx]
                return job
        return None

    def _dispatch(self) -> None:
        if self._pool is None:
            return  # nothing was left to do when the run started
        # Round by round, so that with few files left each worker still gets one.
        for depth in range(_QUEUE_DEPTH):
            for w in sorted(self._pool.workers.values(), key=lambda w: w.wid):
                if not self._pending:
                    return
                if len(w.jobs) <= depth:
                    job = self._pick(w)
                    if job is not None:
                        self._send_job(w, job)

    def _send_job(self, w: Worker, job: _Job) -> None:
        assert self._pool is not None
        msg = self._job_message(job)
        if self._pool.send(w, msg):
            if not w.jobs:
                w.heard = time.monotonic()  # an idle worker's silence counts from now
            w.jobs.append(job)
            self._log(event="dispatch", file=msg["path"], worker=w.wid, pid=w.pid, clips=job.clips)
        else:
            job.prefer = None
            self._pending.appendleft(job)  # its death shows up on the next receive

    def _receive(self, timeout: float) -> None:
        if self._pool is None:
            return
        for w, msg in self._pool.receive(timeout):
            if w.wid not in self._pool.workers:
                continue  # retired in this batch (its end was handled)
            if msg is None:
                self._worker_died(w)
            else:
                w.heard = time.monotonic()
                self._handle(msg, w)
                if msg["op"] == "file_done" and self.jobs > 1:
                    self._dispatch()  # its next job before writing what else arrived
        self._check_timeouts()
        # Replace workers that died while files remain (one per missing slot); with one job the
        # helper worker is started again only when the next file needs it.
        if self.jobs > 1 and self._pending and self._pool is not None:
            missing = self.jobs - len(self._pool.workers)
            if missing > 0:
                self._spawn(min(missing, len(self._pending)), self.plan.needs_blender)

    def _check_timeouts(self) -> None:
        if self.timeout is None or self._pool is None:
            return
        now = time.monotonic()
        for w in list(self._pool.workers.values()):
            if w.jobs and now - w.heard > self.timeout:
                self._pool.kill(w)
                self._worker_died(w, timed_out=True)

    def _step_single(self, timeout: float) -> None:
        """``--jobs 1``: one file at a time to one worker (started again after a loss). A BVH
        file is finished within the step, as if it were read here, unless ``--timeout`` stops it;
        an imported file is received step by step."""
        if self._busy():
            self._receive(timeout)
            return
        if not self._pending:
            return
        if self._pool is None or not self._pool.workers:
            self._spawn(1, self.plan.needs_blender)
        assert self._pool is not None
        w = next(iter(self._pool.workers.values()))
        job = self._pending.popleft()
        self._send_job(w, job)
        if not w.jobs or self.plan.files[job.file].needs_blender:
            self._receive(timeout)  # a worker that could not take it has died: noticed here
            return
        while w.jobs and w.wid in self._pool.workers and not self._interrupt:
            self._receive(0.05)

    # --- messages ---

    def _job_of(self, w: Worker | None, i: int) -> _Job | None:
        if w is None:
            return None
        for job in w.jobs:
            if job.file == i:
                return job
        return None

    def _handle(self, msg: Message, w: Worker | None, job: _Job | None = None) -> None:
        op = msg["op"]
        i = int(msg["file"])
        f = self.report.files[i]
        job = job or self._job_of(w, i)
        if op == "start":
            self._log(event="start", file=f.path, worker=w.wid if w is not None else "main", pid=w.pid if w is not None else os.getpid(), clips=job.clips if job else None)
        elif op == "clips":
            if f.clip_ids is None:
                f.clip_ids = list(msg["clips"])
            self.report.add_time("read", msg["timings"]["read"])
            if msg.get("read_ahead"):
                self.report.count("files_read_ahead")
            if "frames" in msg:
                self._file_frames[i] = [int(n) for n in msg["frames"]]
                self._import_seconds[i] = float(msg["timings"]["read"])
        elif op == "clip":
            if job is not None:
                job.arrived.add(str(msg["clip"]))
            msg["file_clips"] = f.clip_ids
            for stage, sec in msg["timings"].items():
                self.report.add_time(stage, sec)
            self._wait(i, msg)
        elif op == "clip_failed":
            if job is not None:
                job.arrived.add(str(msg["clip"]))
            f.clips.append(ClipOutcome(msg["clip"], CLIP_FAILED, reason=msg["reason"]))
        if op in ("clip", "clip_failed") and w is not None and job is not None and job.ask and job.clips is None:
            self._answer(w, job, msg)
        elif op == "file_failed":
            if f.reason is None:
                f.reason = msg["reason"]
        elif op == "file_done":
            f.seconds += float(msg["seconds"])
            self.report.add_time("worker_idle", float(msg.get("idle", 0.0)))
            self._cache_counts[w.wid if w is not None else -1] = list(msg["cache"])
            if w is not None:
                self._worker_peak = max(self._worker_peak, float(msg.get("peak_mb", 0.0)))
                w.blender = bool(msg.get("blender", w.blender))
                if job is not None:
                    w.jobs.remove(job)
            self._job_ended(i)

    def _answer(self, w: Worker, job: _Job, first: Message) -> None:
        """Tell the worker that imported a file and baked its first clip (``first``) which of the
        other clips to bake; give the last of them to a second worker when no other file is
        waiting and the split ends the file sooner. A clip's cost is the first clip's, in
        proportion to its frames."""
        assert self._pool is not None
        f = self.report.files[job.file]
        ids = f.clip_ids or []
        rest = [c for c in ids if c not in set(job.skip) and c != first["clip"]]
        take = rest
        others = [o for o in self._pool.workers.values() if o is not w and o.conn is not None]
        if len(rest) > 1 and others and not self._pending and first["op"] == "clip":
            frames = dict(zip(ids, self._file_frames.get(job.file, []), strict=False))
            t = first["timings"]
            seconds = sum(float(t.get(k, 0.0)) for k in ("read", "retarget", "part"))
            per_frame = seconds / max(int(first["source_frames"]), 1)
            costs = [per_frame * frames.get(c, int(first["source_frames"])) for c in rest]
            helper = min(others, key=lambda o: len(o.jobs))
            second_start = self._import_seconds.get(job.file, 0.0) + (0.0 if helper.blender else _BLENDER_START)
            k = split_point(costs, second_start)
            if k is not None:
                take = rest[:k]
                self._pending.appendleft(_Job(job.file, list(job.skip), clips=rest[k:], avoid=w.wid))
                self._open_jobs[job.file] += 1
                self.report.count("files_split")
                f.split = [len(take) + 1, len(rest) - k]
                self._log(event="split", file=f.path, worker=w.wid, kept=len(take) + 1, given=len(rest) - k)
        job.clips = [first["clip"], *take]
        self._pool.send(w, {"op": "take", "file": job.file, "clips": take})

    def _wait(self, i: int, msg: Message) -> None:
        """Keep a baked clip until its file's turn to be written; past the budget for waiting
        clips, keep only its part on disk."""
        self._waiting.setdefault(i, []).append(msg)
        self._waiting_bytes += message_bytes(msg)
        if self._waiting_bytes > self._waiting_limit and self.parts_dir:
            for j in sorted(self._waiting, reverse=True):  # the latest turns first
                for m in self._waiting[j]:
                    if "rotations" in m:
                        self._waiting_bytes -= message_bytes(m)
                        drop_arrays(m)
                        self.report.count("clips_reloaded")
                if self._waiting_bytes <= self._waiting_limit / 2:
                    break

    def _job_ended(self, i: int) -> None:
        self._open_jobs[i] = self._open_jobs.get(i, 1) - 1
        if self._open_jobs[i] <= 0:
            self.report.files[i].finished = True
            self._flush()

    def _flush(self) -> None:
        """Write the files whose jobs have all ended, in pack order, up to the first unfinished."""
        files = self.report.files
        while self._cursor < len(files) and files[self._cursor].finished:
            i = self._cursor
            f = files[i]
            ids = f.clip_ids or []
            rank = {c: k for k, c in enumerate(ids)}
            for msg in sorted(self._waiting.pop(i, []), key=lambda m: rank.get(m["clip"], len(ids))):
                if "rotations" not in msg:
                    assert self.parts_dir is not None
                    back = read_part(os.path.join(self.parts_dir, part_file_name(clip_key(f.path, msg["clip"]))))
                    if back is None:
                        f.clips.append(ClipOutcome(msg["clip"], CLIP_LOST, reason="its part could not be read back"))
                        continue
                    msg = {**back, **{k: v for k, v in msg.items() if k not in back}}
                else:
                    self._waiting_bytes -= message_bytes(msg)
                self._write_clip(i, msg, CLIP_BAKED)
            f.clips.sort(key=lambda c: rank.get(c.clip, len(ids)))
            if f.clip_ids is not None:
                self._records[f.path] = list(f.clip_ids)
            self._cursor += 1
            self._file_finished(i)

    def _write_clip(self, i: int, msg: Message, status: str) -> None:
        f = self.report.files[i]
        pf = self.plan.files[i]
        clip_id = str(msg["clip"])
        key = clip_key(pf.path, clip_id)
        base = action_base_name(pf, clip_id)
        t0 = time.perf_counter()
        # write_action leaves out curves that would not change the pose it finds (a location of
        # zero where the pose has zero). Whatever pose the open file happens to show (an importer's
        # float noise, an Action evaluated after the output was reopened), every clip is written
        # against the rest pose, so a clip's keys depend on the clip alone.
        _set_pose(self.target)
        # A target shown in Rest Position would play none of the clips (a reopened volume too).
        switched = switch_to_pose_position(self.target)
        if switched:
            self._pose_note = switched
        try:
            clip = clip_from_message(msg, base)
            action = write_action(self.target, clip, base, frames=msg["frames"], fps=msg["fps"])
            if self.settings.options.root_motion == "OBJECT":
                from ..usecases.jobs import write_object_travel

                write_object_travel(self.target, action, msg["root_motion"], msg["frames"])
        except MarionetteError as exc:
            f.clips.append(ClipOutcome(clip_id, CLIP_FAILED, reason=f"writing the Action failed: {exc}"))
            return
        action.use_fake_user = True  # an Action no object plays is kept only with a fake user
        action[SOURCE_PROPERTY] = pf.path
        action[CLIP_PROPERTY] = clip_id
        action[SETTINGS_PROPERTY] = str(msg.get("settings") or self._record_text)
        self.report.add_time("write", time.perf_counter() - t0)
        ids = msg.get("file_clips") or [clip_id]
        self._clips[key] = _Clip(key, base, action, (i, ids.index(clip_id) if clip_id in ids else len(ids)))
        outcome = ClipOutcome(
            clip_id,
            status,
            action=action.name,
            frames=int(len(msg["frames"])),
            source_frames=int(msg["source_frames"]),
            source_fps=float(msg["source_fps"]),
            method=str(msg.get("method", "geometric")),
            warnings=list(msg.get("warnings", [])),
            rebaked=self._stale.get(key),
        )
        f.clips.append(outcome)
        self._outcomes[key] = outcome
        if outcome.rebaked:
            self.report.count("clips_rebaked")
        self._held_max = max(self._held_max, len(bpy.data.actions))
        self._volume_clips += 1
        bags = (compat.channelbag(action, slot) for slot in action.slots)
        self._volume_keys += len(msg["frames"]) * sum(len(bag.fcurves) for bag in bags if bag is not None)
        full = (self._max_clips is not None and self._volume_clips >= self._max_clips) or (
            self._max_bytes is not None and self._volume_keys * ACTION_BYTES_PER_KEY >= self._max_bytes
        )
        if full and self.output is not None:
            self._close_volume(final=False)

    def _file_finished(self, i: int) -> None:
        f = self.report.files[i]
        self._log(event="file", file=f.path, status=f.status)
        if self.on_file is not None:
            self.on_file(f, self._cursor, self.total_files)

    def _job_rest(self, job: _Job) -> list[str] | None:
        """The clips of ``job`` that have not arrived (``None`` when its clips are not known yet)."""
        f, pf = self.report.files[job.file], self.plan.files[job.file]
        ids = job.clips
        if ids is None:
            # A BVH holds one clip named after the file, known before the file is read.
            known = f.clip_ids if f.clip_ids is not None else ([bvh_clip_id(pf.path)] if pf.is_bvh else None)
            ids = None if known is None else [c for c in known if c not in set(job.skip)]
        return None if ids is None else [c for c in ids if c not in job.arrived]

    def _worker_died(self, w: Worker, timed_out: bool = False) -> None:
        assert self._pool is not None
        how = self._pool.retire(w)
        self.report.count("workers_timed_out" if timed_out else "workers_lost")
        jobs = list(w.jobs)
        w.jobs.clear()
        if not jobs:
            return
        # Jobs it had not started go back to the queue; the one in progress is lost.
        for job in reversed(jobs[1:]):
            job.prefer = None
            self._pending.appendleft(job)
        job = jobs[0]
        f = self.report.files[job.file]
        rest = self._job_rest(job)
        if rest is not None and not rest:  # every clip arrived; only the closing message did not
            self._job_ended(job.file)
            return
        if timed_out:
            assert self.timeout is not None
            if rest is None:
                doing = "reading the file"
            elif f.clip_ids is None:  # a BVH file: the worker answers once it is read and retargeted
                doing = "reading and retargeting the file"
            else:
                doing = f"baking clip {rest[0]!r}"
            why = f"timed out after {self.timeout:g} s (no answer from the worker while {doing}; it was stopped)"
            f.reason = f.reason or why
            for c in rest or []:
                f.clips.append(ClipOutcome(c, CLIP_FAILED, reason=why))
        else:
            f.lost = True
            if rest is None:
                f.reason = f"lost while the file was being read (its clips are not known yet): {how}"
            else:
                f.reason = f"lost clip {rest[0]!r} while it was being baked: {how}"
                f.clips.append(ClipOutcome(rest[0], CLIP_LOST, reason=f"in progress when {how}"))
                for c in rest[1:]:
                    f.clips.append(ClipOutcome(c, CLIP_LOST, reason="not reached: the worker baking it was lost"))
        self._log(event="timeout" if timed_out else "lost", file=f.path, worker=w.wid, pid=w.pid)
        self._job_ended(job.file)

    # --- output volumes ---

    def _close_volume(self, final: bool) -> None:
        """Name the Actions of the output file being filled, make the target play the first of
        them (or its own Action), record what the file holds and, with an output, save it; unless
        ``final``, free those Actions and go on with the next volume."""
        t0 = time.perf_counter()
        path = volume_path(self.output, self._volume) if self.output else None
        clips = dict(self._clips)
        names = final_action_names({k: c.base for k, c in clips.items()}, self._state.taken, id_name_limit())
        # Two passes so that a name freed by one rename is never taken by Blender's ".001" rule.
        for k, c in clips.items():
            c.action.name = f"marionette_batch_tmp_{part_file_name(k)}"
        for k, c in clips.items():
            c.action.name = names[k]
            self._outcomes[k].action = c.action.name
            if path is not None:
                self._outcomes[k].output = os.path.basename(path)
        st = self._state
        if st.pose:
            _set_pose(self.target, st.pose)
        if st.action is not None:
            compat.assign_action(self.target, st.action, st.slot)
            st.action.use_fake_user = st.fake_user
        elif clips:
            first = min(clips.values(), key=lambda c: c.order)
            compat.assign_action(self.target, first.action, compat.action_slot_for(first.action, self.target))
        scene: Any = bpy.context.scene
        scene[TARGET_RECORD] = self.target.name
        record = {**_file_records(), **self._records}
        scene[FILES_RECORD] = json.dumps(record)
        if path is not None and (self._volume == 0 or self._volume_clips > 0):
            from ..usecases.jobs import save_blend

            save_blend(path)
            self._outputs.append(path)
            self._volumes_total = self._volume + 1
        if not final:
            if st.action is None:
                compat.assign_action(self.target, None, None)
            # Every clip the file holds goes: this run's and, in a continued output, earlier ones.
            bpy.data.batch_remove([a for a, *_ in _batch_actions()])
            self._state.taken = {a.name for a in bpy.data.actions}
            _set_pose(self.target)
            if self.parts_dir:
                for k in clips:  # in the saved file now
                    try:
                        os.remove(os.path.join(self.parts_dir, part_file_name(k)))
                    except OSError:
                        pass
            self._log(event="volume", path=path, clips=len(clips))
            self._clips = {}
            self._volume += 1
            self._volume_clips = 0
            self._volume_keys = 0
        self.report.add_time("save", time.perf_counter() - t0)

    # --- stopping ---

    def request_interrupt(self) -> None:
        self._interrupt = True

    @property
    def interrupt_requested(self) -> bool:
        return self._interrupt

    def cancel(self, reason: str) -> None:
        """Stop now: workers are killed (their clips in progress are reported, not written); every
        clip already computed is written."""
        if self._closed:
            return
        self.report.interrupted = reason
        if self._pool is not None:
            for w in list(self._pool.workers.values()):
                for job in list(w.jobs)[1:]:  # not started: cancelled with the queue below
                    self._pending.append(job)
                if w.jobs:
                    job = w.jobs[0]
                    f = self.report.files[job.file]
                    rest = self._job_rest(job)
                    if rest is None or rest:  # else every clip arrived: the job is done
                        f.cancelled = True
                        f.reason = f"cancelled while being baked ({reason})"
                        for c in rest or []:
                            f.clips.append(ClipOutcome(c, CLIP_CANCELLED, reason=reason))
                    w.jobs.clear()
                    self._open_jobs[job.file] -= 1
        while self._pending:
            job = self._pending.popleft()
            f = self.report.files[job.file]
            f.cancelled = True
            if f.reason is None:
                f.reason = f"not started ({reason})"
            for c in job.clips or []:
                f.clips.append(ClipOutcome(c, CLIP_CANCELLED, reason=reason))
            self._open_jobs[job.file] -= 1
        for i, n in self._open_jobs.items():
            if n <= 0:
                self.report.files[i].finished = True
        self.close(graceful=False)
        self._flush()

    def close(self, graceful: bool = True) -> None:
        """Stop the workers (when ``graceful``, they are asked to and reaped at :meth:`finish`,
        after the save)."""
        if self._closed:
            return
        self._closed = True
        self._blas.restore()
        if self._pool is not None:
            if graceful:
                self._pool.stop()
            else:
                self._pool.close(graceful=False)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._scratch is not None and not (self.report.counters.get("workers_lost") or self.report.counters.get("workers_timed_out")):
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
        """Write what is left, name the new Actions, restore the target's own Action, record what
        the output holds and save its last volume."""
        if self._finished:
            return self.report
        self._finished = True
        t0 = time.perf_counter()
        self.close()
        self._flush()
        self._close_volume(final=True)
        if self._pool is not None:
            self._pool.close()  # reap the workers asked to stop (they have exited by now)
        st = self._state
        if st.pose:
            _set_pose(self.target, st.pose)
        self.report.add_time("finish", time.perf_counter() - t0)
        self.report.add_time("wall", time.perf_counter() - self._t0)
        hits = [sum(c[k] for c in self._cache_counts.values()) for k in range(4)]
        self.report.info["method"] = {
            "name": self.settings.method_name(),
            "table": dict(self.settings.methods),
            "match_rest": self.settings.match_rest,
        }
        if self.output is not None:
            self.report.info["outputs"] = [volume_path(self.output, k) for k in range(self._volumes_total)]
            self.report.info["volume_budget"] = {
                "max_clips_per_file": self._max_clips,
                "max_file_mb": None if self._max_bytes is None else round(self._max_bytes / 2**20, 1),
            }
        self.report.info["timeout"] = self.timeout
        if self._pose_note is not None:
            self.report.info["notes"] = [self._pose_note]
        if self.jobs_note is not None:
            self.report.info["jobs_requested"] = self.jobs_requested
            self.report.info["jobs_note"] = self.jobs_note
        self.report.info["actions_held_max"] = self._held_max
        self.report.info["main_peak_mb"] = round(peak_memory_mb(), 1)
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
    from ..usecases.jobs import rig_input

    table = {**(mapping.methods if mapping is not None else {}), **(methods or {})}
    rig, tmap = rig_input(target, mapping)
    return BakeSettings(rig, mapping_key(tmap.bones()), scene_fps(), keep_frames, options, table, bool(match_rest))


# --- the command line's job ------------------------------------------------------------------


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
    from ..usecases.jobs import character_of

    return character_of(arms)  # the armature a single retarget of this file would take


def _continued_volumes(output: str, resume: bool, earlier_start: float | None) -> list[str]:
    """The output's volumes a resumed run continues: every volume on disk, but when the
    interrupted run started afresh, only those it saved (not older than its start)."""
    if not resume:
        return []
    volumes = existing_volumes(output)
    if earlier_start is None:
        return volumes
    kept = []
    for v in volumes:
        if os.stat(v).st_mtime < earlier_start:
            break  # an earlier bake's file, and every one after it
        kept.append(v)
    return kept


def _open_target(target_path: str, volume: str | None, armature: str | None) -> Any:
    """Open what the run writes into: the output volume it continues, else the target file.
    Returns the target armature."""
    from ..usecases.jobs import fresh_session, refuse_in_interactive_session

    refuse_in_interactive_session()
    if volume is not None:
        bpy.ops.wm.open_mainfile(filepath=volume, load_ui=False)
        name = armature or bpy.context.scene.get(TARGET_RECORD)
        return _pick_armature(list(bpy.data.objects), name if isinstance(name, str) else None, os.path.basename(volume))
    path = os.path.abspath(target_path)
    label = os.path.basename(path)
    why = why_unreadable(path)
    if why is not None:
        raise MarionetteError(f"{label}: {why} ({path})")
    if path.lower().endswith(".blend"):
        # A .blend character is opened whole: the output is that file plus the new Actions.
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        return _pick_armature(list(bpy.context.scene.objects), armature, label)
    fresh_session()
    loaded = load_file(path)
    return _pick_armature(loaded.armatures, armature, label)


def _scan_volumes(volumes: Sequence[str], record: Mapping[str, Any]) -> EarlierOutput:
    """Open each volume in turn: the clips it holds, its files' clip ids, and the clips baked
    with other settings, which are removed from it (and it is saved again)."""
    from ..usecases.jobs import save_blend

    found = EarlierOutput()
    for path in volumes:
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        found.known.update(_file_records())
        removed = 0
        for action, src, clip, text in _batch_actions():
            why = record_difference(text, record)
            if why is None:
                found.baked.setdefault(src, {})[clip] = (action.name, os.path.basename(path))
                continue
            found.stale[clip_key(src, clip)] = why
            for obj in bpy.data.objects:
                if obj.animation_data is not None and obj.animation_data.action == action:
                    obj.animation_data.action = None
            bpy.data.actions.remove(action)
            removed += 1
        if removed:
            save_blend(path)
    return found


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
    max_clips_per_file: int | None = None,
    max_file_mb: float | None = DEFAULT_FILE_MB,
    timeout: float | None = DEFAULT_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    start: PackStart | None = None,
) -> BatchReport:
    """The command line's batch bake: every clip of ``inputs`` onto the target, saved to
    ``output`` (in volumes past the budget; see the module docstring). The report is also written
    to ``report_path``. ``methods`` and ``match_rest`` choose the retarget method as for a single
    retarget (the table is checked before any file is read or written). ``start``: the pack
    planned and its workers started already (:func:`.pack_start.start_pack`)."""
    from ..core.retarget.methods import check_method_table

    t0 = time.perf_counter()
    if start is None:
        methods = check_method_table(methods)
        start = start_pack(inputs, output, jobs=jobs, resume=resume)
    out = start.output
    try:
        methods = check_method_table(methods)
        volumes = _continued_volumes(out, resume, start.earlier_start)
        target_map = BoneMapping.load(mapping) if mapping else None

        def open_and_settle() -> tuple[Any, BakeSettings]:
            target = _open_target(target_path, volumes[-1] if volumes else None, target_armature)
            settings = bake_settings(
                target, target_map, options or RetargetOptions(), keep_frames=keep_frames, methods=methods, match_rest=match_rest
            )
            return target, settings

        target, settings = open_and_settle()
        earlier = None
        if len(volumes) > 1:
            earlier = _scan_volumes(volumes[:-1], settings.record())
            target, settings = open_and_settle()
    except BaseException:
        start.refused()  # nothing of a refused run is left behind (no parts folder, no workers)
        raise
    opened = time.perf_counter() - t0

    def on_file(f: FileOutcome, done: int, total: int) -> None:
        if progress is None:
            return
        good = sum(1 for c in f.clips if c.status in (CLIP_BAKED, CLIP_ALREADY, CLIP_RECOVERED))
        why = f.summary_reason()
        progress(f"[{done:>{len(str(total))}}/{total}] {f.status:9s} {f.label} ({good} clip{'s' if good != 1 else ''})" + (f": {why}" if why and f.status != FILE_BAKED else ""))

    runner = BatchBake(
        target,
        settings,
        start.plan,
        jobs=start.requested,
        parts_dir=start.parts,
        resume=resume,
        on_file=on_file,
        pool=start.pool,
        output=out,
        volume=max(0, len(volumes) - 1),
        max_clips=max_clips_per_file,
        max_mb=max_file_mb,
        timeout=timeout,
        earlier=earlier,
    )
    with _CtrlC(runner):
        report = runner.run()
    report.add_time("open", opened)
    report.info.update(
        output=out,
        target={"file": os.path.abspath(target_path), "armature": target.name, "reopened_output": bool(volumes)},
        jobs=runner.jobs,
        scene_fps=settings.scene_fps,
    )
    report.timings["wall"] = time.perf_counter() - t0
    # Everything is in the saved output now; the parts only mattered until it existed. Volumes
    # numbered past this output's are an earlier, larger run's.
    shutil.rmtree(start.parts, ignore_errors=True)
    for stray in stray_volumes(out, len(report.info.get("outputs", [])) or 1):
        os.remove(stray)
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
    timeout: FloatProperty(  # type: ignore[valid-type]
        name="Timeout",
        default=DEFAULT_TIMEOUT,
        min=0.0,
        unit="TIME_ABSOLUTE",
        description="Seconds a worker may stay silent on one file before it is stopped and the file reported failed (0: no limit)",
    )

    _runner: BatchBake | None = None
    _driver: ModalDriver | None = None
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
        from ..properties.retarget_settings import mappings_from_rows, methods_from_rows
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
        if not plan.files:
            said = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in plan.refused[:3])
            self.report({"ERROR"}, f"No clip files to bake ({said})" if said else "No clip files (BVH, FBX, glTF/GLB, .blend) in the selection")
            return {"CANCELLED"}
        self._runner = BatchBake(target, settings, plan, jobs=self.jobs or None, timeout=self.timeout or None)
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
        self._driver = ModalDriver(self._runner)
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
        assert self._runner is not None and self._driver is not None
        answer = self._driver.event(event.type, event.value)
        if answer == "FINISHED":
            return self._finish(context)
        if answer == "RUNNING_MODAL":
            self._status(context)
        return {answer}

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
        self._driver = None
        return {"FINISHED"}

    def cancel(self, context: Any) -> None:
        # Blender ends the operator (the file closes, the add-on unloads): stop the workers.
        if self._runner is not None:
            self._runner.cancel("the operator was stopped")
            self._runner.finish()
            self._runner = None


classes = (MARIONETTE_OT_batch_bake,)
register, unregister = bpy.utils.register_classes_factory(classes)
