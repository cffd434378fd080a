"""Batch Bake: every clip of an animation pack onto one character, in parallel, losing nothing.

How the work is split, and why:

* This process holds the target in Blender and is the only one that writes to it: Blender data
  can only be changed from its main thread. It writes the baked clips file by file in pack order
  (:func:`.bridge.action_write.write_action`, bulk ``foreach_set``), whatever order they arrive in, so
  the output does not depend on which worker finished first.
* Reading and retargeting, which do not need this Blender, run in *worker processes*
  (``--jobs``, one per core by default; :mod:`.batch_worker`), each started once and fed task
  after task. A worker reads BVH with numpy alone (:mod:`core.formats.bvh`) and imports ``bpy`` only when
  it first meets an FBX, glTF or .blend file (starting Blender costs about 0.5 s and 260 MB, more
  than a clip's own work). Workers keep a mapping and binding cache (:class:`core.batch.baking.PackCache`),
  so a pack from one capture shoot maps and binds once per worker. The command line starts the
  workers before it loads Blender, and each reads its first BVH files while this process loads
  Blender and the target. ``--jobs`` is lowered to what can be used: one worker per core, and
  no more than the pack has work for (:func:`core.batch.pack_limits.useful_jobs`). With ``--jobs 1``
  the files go to one worker as well, one at a time (a step of the run is one BVH file, as
  if it were read here): a file that hangs its reader is stopped by ``--timeout`` like with
  more jobs, imported files are imported into an empty file whatever this file holds, and the
  keys are those of any other ``--jobs``.
* Results travel as plain messages (:mod:`core.batch.messages`) over a local socket authenticated with a
  random key. Each worker is handed two tasks ahead, so it never waits for this process to write.
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
  any clips of the same task it had not reached), a new worker takes the remaining files, and
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
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import bpy

from ..bridge import compat
from ..core.batch.messages import Message
from ..core.batch.output_files import SOURCE_PROPERTY, read_parts, volume_path
from ..core.batch.plan import PackPlan, bvh_clip_id, clip_key
from ..core.batch.report import BatchReport, ClipOutcome, FileOutcome
from ..core.batch.settings import BakeSettings, record_difference
from ..core.batch.status import CLIP_ALREADY, CLIP_BAKED, CLIP_CANCELLED, CLIP_RECOVERED, FILE_BAKED
from .dispatch import Task, WorkDispatch
from .outputs import EarlierOutput, action_keys, batch_actions, file_records
from .pack_start import pack_jobs
from .worker_pool import WorkerPool
from .worker_process import openblas_threads, peak_memory_mb
from .writing import WAITING_BYTES, OutputWriting, TargetState, WrittenClip, get_pose, set_pose

DEFAULT_TIMEOUT = 600.0  # seconds a worker may stay silent on one file
DEFAULT_FILE_MB = 1024.0  # Actions held before a volume is saved and freed


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


class BatchBake(WorkDispatch, OutputWriting):
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
        waiting_mb: float = WAITING_BYTES / 2**20,
    ) -> None:
        self.target = target
        self.settings = settings
        self.plan = plan
        #: Workers used (on a cluster: the files it holds at once), and why fewer than ``jobs``
        #: (``None``: as asked).
        self.jobs, self.jobs_note = pool.jobs_for(plan) if hasattr(pool, "jobs_for") else pack_jobs(jobs, plan)
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
        self._pending: deque[Task] = deque()
        self._prefer_left: dict[int, int] = {}
        self._pose_note: str | None = None
        self._open_tasks: dict[int, int] = {}
        self._waiting: dict[int, list[Message]] = {}  # file -> baked clips waiting for their turn
        self._waiting_bytes = 0
        self._waiting_limit = float(waiting_mb) * 2**20
        self._cursor = 0  # files before it are written
        self._file_frames: dict[int, list[int]] = {}  # file -> frames of each of its clips
        self._import_seconds: dict[int, float] = {}
        self._clips: dict[str, WrittenClip] = {}  # this run's clips in the output file being filled
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
        self._state = TargetState()
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

    @property
    def closed(self) -> bool:
        """Whether the run has stopped handing out work: it ended, or was cancelled (see
        :meth:`cancel`)."""
        return self._closed

    def progress_text(self) -> str:
        failed = sum(1 for f in self.report.files[: self._cursor] if f.status != FILE_BAKED)
        return f"{self.files_done}/{self.total_files} files, {self.clips_baked} clips baked" + (f", {failed} failed" if failed else "")

    def _busy(self) -> bool:
        return self._pool is not None and any(w.tasks for w in self._pool.workers.values())

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
        self._state = TargetState(ad_action, ad_slot, fake, pose=get_pose(self.target))
        if self.parts_dir:
            os.makedirs(self.parts_dir, exist_ok=True)
            self._journal = open(os.path.join(self.parts_dir, "journal.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
        here = os.path.basename(volume_path(self.output, self._volume)) if self.output else ""
        baked: dict[str, dict[str, tuple[str, str]]] = {p: dict(c) for p, c in self._earlier.baked.items()} if self.resume else {}
        known: dict[str, list[str]] = dict(self._earlier.known) if self.resume else {}
        if self.resume:
            known.update(file_records())
            for action, src, clip, record in batch_actions():
                why = record_difference(record, self._record)
                if why is not None:
                    self._stale[clip_key(src, clip)] = why
                    bpy.data.actions.remove(action)
                    continue
                baked.setdefault(src, {})[clip] = (action.name, here)
                self._volume_clips += 1
                self._volume_keys += action_keys(action)
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
            ids = [bvh_clip_id(pf.path)] if pf.one_clip else known.get(pf.path)
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
            self._pending.append(Task(i, skip, prefer=prefer, ask=self.jobs > 1 and not pf.one_clip and getattr(self._pool, "answers", True)))
            self._open_tasks[i] = 1
        self._flush()
        self.report.add_time("start", time.perf_counter() - t0)
        self._started = True
        shareable = any(self.plan.files[j.file].needs_blender for j in self._pending)  # clips a second worker can share
        want = self.jobs if shareable else min(self.jobs, len(self._pending))
        launched = self._pool.launching if self._pool is not None else 0
        if want or launched:
            self._spawn(max(0, want - launched), self.plan.needs_blender)

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
                for task in list(w.tasks)[1:]:  # not started: cancelled with the queue below
                    self._pending.append(task)
                if w.tasks:
                    task = w.tasks[0]
                    f = self.report.files[task.file]
                    rest = self._job_rest(task)
                    if rest is None or rest:  # else every clip arrived: the task is done
                        f.cancelled = True
                        f.reason = f"cancelled while being baked ({reason})"
                        for c in rest or []:
                            f.clips.append(ClipOutcome(c, CLIP_CANCELLED, reason=reason))
                    w.tasks.clear()
                    self._open_tasks[task.file] -= 1
        while self._pending:
            task = self._pending.popleft()
            f = self.report.files[task.file]
            f.cancelled = True
            if f.reason is None:
                f.reason = f"not started ({reason})"
            for c in task.clips or []:
                f.clips.append(ClipOutcome(c, CLIP_CANCELLED, reason=reason))
            self._open_tasks[task.file] -= 1
        for i, n in self._open_tasks.items():
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
            if hasattr(self._pool, "describe"):  # a Dask cluster's (.cluster.ClusterPool)
                self.report.info["cluster"] = self._pool.describe()
                self.report.count("files_recomputed", len(self.report.info["cluster"]["files_recomputed"]))
            self._pool.close()  # reap the workers asked to stop (they have exited by now)
        st = self._state
        if st.pose:
            set_pose(self.target, st.pose)
        self.report.add_time("finish", time.perf_counter() - t0)
        self.report.add_time("wall", time.perf_counter() - self._t0)
        hits = [sum(c[k] for c in self._cache_counts.values()) for k in range(4)]
        self.report.info["method"] = {
            "name": self.settings.method_name(),
            "table": dict(self.settings.methods),
            "match_rest": self.settings.match_rest,
        }
        if self.settings.control is not None:  # said once for the run, not per clip
            self.report.info["control_rig"] = self.settings.control.describe(self.settings.options.root_motion == "ROOT_BONE")
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

