"""The runner's dispatching side: handing files (or some of a file's clips) to the workers, two
ahead; hearing their messages; splitting a file between two workers; and what a worker's death or
silence past ``--timeout`` costs. A mixin of :class:`.runner.BatchBake`, which holds the state it
uses."""

from __future__ import annotations

import os
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.batch.messages import Message
from ..core.batch.plan import PackPlan, bvh_clip_id, split_point
from ..core.batch.report import BatchReport, ClipOutcome
from ..core.batch.settings import BakeSettings
from ..core.batch.status import CLIP_FAILED, CLIP_LOST
from .worker_pool import Worker, WorkerPool

_QUEUE_DEPTH = 2  # tasks handed to a worker ahead of time
#: Seconds a worker that has not imported Blender yet needs before its first imported file
#: (importing bpy and resetting to an empty file: 0.6 to 0.9 s measured on two busy cores).
_BLENDER_START = 1.0


@dataclass
class Task:
    """Work for one worker: file ``file`` of the report, all its clips not in ``skip`` or only
    ``clips``."""

    file: int
    skip: list[str] = field(default_factory=list)
    clips: list[str] | None = None
    #: The worker that read this file ahead (it gets the task first).
    prefer: int | None = None
    #: The worker baking the file's other clips (this task goes elsewhere while others live).
    avoid: int | None = None
    #: Whether the worker asks which clips to bake once it has imported the file.
    ask: bool = False
    arrived: set[str] = field(default_factory=set)


class WorkDispatch:
    """Handing out work and hearing the workers (see the module docstring)."""

    settings: BakeSettings
    plan: PackPlan
    report: BatchReport
    jobs: int
    timeout: float | None
    parts_dir: str | None
    _pool: WorkerPool | None
    _log_dir: str | None
    _scratch: str | None
    _pending: deque[Task]
    _prefer_left: dict[int, int]
    _open_tasks: dict[int, int]
    _file_frames: dict[int, list[int]]
    _import_seconds: dict[int, float]
    _cache_counts: dict[int, list[int]]
    _worker_peak: float
    _interrupt: bool

    if TYPE_CHECKING:  # provided by the rest of :class:`.runner.BatchBake`

        def _log(self, **event: Any) -> None:
            ...

        def _busy(self) -> bool:
            ...

        def _wait(self, i: int, msg: Message) -> None:
            ...

        def _job_ended(self, i: int) -> None:
            ...

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

    def _task_message(self, task: Task) -> Message:
        m: Message = {"op": "file", "file": task.file, "path": self.plan.files[task.file].path, "skip": list(task.skip)}
        if task.clips is not None:
            m["clips"] = list(task.clips)
        if task.ask and task.clips is None:
            m["ask"] = True
        return m

    def _pick(self, w: Worker) -> Task | None:
        """The next task for ``w``: a file it read ahead, else the first one nobody read ahead,
        else (taken from the end) one another worker read ahead. A second half of a split file
        does not go to the worker baking the first half while another worker lives."""
        assert self._pool is not None
        live = self._pool.workers

        def allowed(task: Task) -> bool:
            return not (task.avoid == w.wid and len(live) > 1)

        if self._prefer_left.get(w.wid):
            for idx, task in enumerate(self._pending):
                if task.prefer == w.wid:
                    self._prefer_left[w.wid] -= 1
                    del self._pending[idx]
                    return task
        for idx, task in enumerate(self._pending):
            if allowed(task) and (task.prefer is None or task.prefer not in live):
                del self._pending[idx]
                return task
        for idx in range(len(self._pending) - 1, -1, -1):
            task = self._pending[idx]
            if allowed(task):
                if task.prefer is not None and task.prefer in self._prefer_left:
                    self._prefer_left[task.prefer] -= 1
                del self._pending[idx]
                return task
        return None

    def _dispatch(self) -> None:
        if self._pool is None:
            return  # nothing was left to do when the run started
        # Round by round, so that with few files left each worker still gets one.
        for depth in range(_QUEUE_DEPTH):
            for w in sorted(self._pool.workers.values(), key=lambda w: w.wid):
                if not self._pending:
                    return
                if len(w.tasks) <= depth:
                    task = self._pick(w)
                    if task is not None:
                        self._send_job(w, task)

    def _send_job(self, w: Worker, task: Task) -> None:
        assert self._pool is not None
        msg = self._task_message(task)
        if self._pool.send(w, msg):
            if not w.tasks:
                w.heard = time.monotonic()  # an idle worker's silence counts from now
            w.tasks.append(task)
            self._log(event="dispatch", file=msg["path"], worker=w.wid, pid=w.pid, clips=task.clips)
        else:
            task.prefer = None
            self._pending.appendleft(task)  # its death shows up on the next receive

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
                    self._dispatch()  # its next task before writing what else arrived
        self._check_timeouts()
        # Replace workers that died while files remain (one per missing worker); with ``--jobs 1`` the
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
            if w.tasks and now - w.heard > self.timeout:
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
        task = self._pending.popleft()
        self._send_job(w, task)
        if not w.tasks or self.plan.files[task.file].needs_blender:
            self._receive(timeout)  # a worker that could not take it has died: noticed here
            return
        while w.tasks and w.wid in self._pool.workers and not self._interrupt:
            self._receive(0.05)

    def _job_of(self, w: Worker | None, i: int) -> Task | None:
        if w is None:
            return None
        for task in w.tasks:
            if task.file == i:
                return task
        return None

    def _handle(self, msg: Message, w: Worker | None, task: Task | None = None) -> None:
        op = msg["op"]
        i = int(msg["file"])
        f = self.report.files[i]
        task = task or self._job_of(w, i)
        if op == "start":
            self._log(event="start", file=f.path, worker=w.wid if w is not None else "main", pid=w.pid if w is not None else os.getpid(), clips=task.clips if task else None)
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
            if task is not None:
                task.arrived.add(str(msg["clip"]))
            msg["file_clips"] = f.clip_ids
            for stage, sec in msg["timings"].items():
                self.report.add_time(stage, sec)
            self._wait(i, msg)
        elif op == "clip_failed":
            if task is not None:
                task.arrived.add(str(msg["clip"]))
            f.clips.append(ClipOutcome(msg["clip"], CLIP_FAILED, reason=msg["reason"]))
        if op in ("clip", "clip_failed") and w is not None and task is not None and task.ask and task.clips is None:
            self._answer(w, task, msg)
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
                if task is not None:
                    w.tasks.remove(task)
            self._job_ended(i)

    def _answer(self, w: Worker, task: Task, first: Message) -> None:
        """Tell the worker that imported a file and baked its first clip (``first``) which of the
        other clips to bake; give the last of them to a second worker when no other file is
        waiting and the split ends the file sooner. A clip's cost is the first clip's, in
        proportion to its frames."""
        assert self._pool is not None
        f = self.report.files[task.file]
        ids = f.clip_ids or []
        rest = [c for c in ids if c not in set(task.skip) and c != first["clip"]]
        take = rest
        others = [o for o in self._pool.workers.values() if o is not w and o.conn is not None]
        if len(rest) > 1 and others and not self._pending and first["op"] == "clip":
            frames = dict(zip(ids, self._file_frames.get(task.file, []), strict=False))
            t = first["timings"]
            seconds = sum(float(t.get(k, 0.0)) for k in ("read", "retarget", "part"))
            per_frame = seconds / max(int(first["source_frames"]), 1)
            costs = [per_frame * frames.get(c, int(first["source_frames"])) for c in rest]
            helper = min(others, key=lambda o: len(o.tasks))
            second_start = self._import_seconds.get(task.file, 0.0) + (0.0 if helper.blender else _BLENDER_START)
            k = split_point(costs, second_start)
            if k is not None:
                take = rest[:k]
                self._pending.appendleft(Task(task.file, list(task.skip), clips=rest[k:], avoid=w.wid))
                self._open_tasks[task.file] += 1
                self.report.count("files_split")
                f.split = [len(take) + 1, len(rest) - k]
                self._log(event="split", file=f.path, worker=w.wid, kept=len(take) + 1, given=len(rest) - k)
        task.clips = [first["clip"], *take]
        self._pool.send(w, {"op": "take", "file": task.file, "clips": take})

    def _job_rest(self, task: Task) -> list[str] | None:
        """The clips of ``task`` that have not arrived (``None`` when its clips are not known yet)."""
        f, pf = self.report.files[task.file], self.plan.files[task.file]
        ids = task.clips
        if ids is None:
            # A BVH holds one clip named after the file, known before the file is read.
            known = f.clip_ids if f.clip_ids is not None else ([bvh_clip_id(pf.path)] if pf.one_clip else None)
            ids = None if known is None else [c for c in known if c not in set(task.skip)]
        return None if ids is None else [c for c in ids if c not in task.arrived]

    def _worker_died(self, w: Worker, timed_out: bool = False) -> None:
        assert self._pool is not None
        how = self._pool.retire(w)
        self.report.count("workers_timed_out" if timed_out else "workers_lost")
        tasks = list(w.tasks)
        w.tasks.clear()
        if not tasks:
            return
        # Jobs it had not started go back to the queue; the one in progress is lost.
        for task in reversed(tasks[1:]):
            task.prefer = None
            self._pending.appendleft(task)
        task = tasks[0]
        f = self.report.files[task.file]
        rest = self._job_rest(task)
        if rest is not None and not rest:  # every clip arrived; only the closing message did not
            self._job_ended(task.file)
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
        self._job_ended(task.file)


def _scratch_dir() -> str:
    return tempfile.mkdtemp(prefix="marionette_batch_")

