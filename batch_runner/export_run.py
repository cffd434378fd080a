"""The sidebar's Export, the main process's side: clips written one after the other by a worker
process (:mod:`.export_worker`, started by :class:`.worker_pool.WorkerPool` as Batch Bake's are)
from a copy of the session saved for the run, so that nothing of the export reaches the session.

One clip is handed out at a time, so stopping (Esc) lets the clip being written finish (its file
is whole, or not there at all) and starts no other. A worker that dies costs the clip it was
writing (reported with the end of its log); a new one takes the rest. :class:`ExportRun` offers
what :class:`.driving.ModalDriver` drives (:meth:`~ExportRun.step`, :meth:`~ExportRun.cancel`,
:attr:`~ExportRun.running`).
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections import deque
from collections.abc import Sequence

from ..core.errors import MarionetteError
from ..core.export.outcomes import EXPORTED, FAILED, NOT_STARTED, ClipExport, ExportOutcome
from .worker_pool import Worker, WorkerPool

#: Seconds :meth:`ExportRun.finish` waits for the clip being written before it stops the worker.
FINISH_WAIT = 600.0
#: Workers started for one run at most (each lost worker costs the clip it was on).
MAX_WORKERS = 4


def _hidden_folders(path: str) -> list[str]:
    """The exporter's hidden work folders beside ``path`` (:func:`..bridge.export_files.export_character`)."""
    return glob.glob(os.path.join(glob.escape(os.path.dirname(path)), ".marionette-export-*"))


class ExportRun:
    """Write ``clips`` (Actions of the saved copy ``blend``; each :class:`ClipExport` names its
    file) on the armature ``armature`` in format ``fmt`` for ``engine``. ``work_dir``: the run's own
    folder (the copy, the workers' logs), removed by :meth:`finish`."""

    def __init__(
        self, blend: str, armature: str, clips: Sequence[ClipExport], fmt: str, engine: str, work_dir: str, *,
        folder: str, description: str,
    ) -> None:
        self.blend = blend
        self.armature = armature
        self.fmt = fmt
        self.engine = engine
        self.work_dir = work_dir
        self.outcome = ExportOutcome(list(clips), folder, description)
        self._pending: deque[ClipExport] = deque(c for c in clips if c.status == NOT_STARTED)
        self._current: ClipExport | None = None
        self._pool: WorkerPool | None = None
        self._worker: Worker | None = None
        self._started_workers = 0
        self._finished = False
        self._hidden_before: set[str] = set()
        self._interrupt = False

    # --- what the operator shows ---

    @property
    def total(self) -> int:
        return len(self.outcome.clips)

    @property
    def done(self) -> int:
        """Clips written or failed so far (one progress step each)."""
        return sum(1 for c in self.outcome.clips if c.status != NOT_STARTED)

    @property
    def running(self) -> bool:
        return self._current is not None or (bool(self._pending) and self.outcome.stopped is None)

    def progress_text(self) -> str:
        failed = sum(1 for c in self.outcome.clips if c.status == FAILED)
        now = f", writing {self._current.clip}" if self._current is not None else ""
        return f"{self.done}/{self.total} clips" + (f", {failed} failed" if failed else "") + now

    # --- the run ---

    def start(self) -> None:
        """Start the worker and hand it the first clip; a worker that cannot start stops the run
        (the outcome says why)."""
        if self._pending:
            self._hand_out()

    def _ensure_worker(self) -> bool:
        if self._worker is not None:
            return True
        if self._started_workers >= MAX_WORKERS:
            self.cancel(f"{MAX_WORKERS} export processes were lost")
            return False
        self._started_workers += 1
        if self._pool is None:
            self._pool = WorkerPool(self.work_dir)
        try:
            self._worker = self._pool.spawn(1, needs_blender=True)[0]
        except MarionetteError as exc:
            self.cancel(f"the export process could not start ({exc})")
            return False
        return True

    def _hand_out(self) -> None:
        self._current = None
        while self._pending and self.outcome.stopped is None:
            if not self._ensure_worker():
                return
            assert self._pool is not None and self._worker is not None
            clip = self._pending.popleft()
            task = {"op": "export", "blend": self.blend, "armature": self.armature, "clip": clip.clip,
                    "path": clip.path, "format": self.fmt, "engine": self.engine}
            self._current = clip
            self._hidden_before = set(_hidden_folders(clip.path))
            if self._pool.send(self._worker, task):
                return
            self._lose_worker(self._worker)

    def _lose_worker(self, worker: Worker) -> None:
        """The worker went away (or was stopped): the clip it was writing is failed, and the hidden
        folder the exporter was writing it into (nothing reached the clip's file) is removed."""
        assert self._pool is not None
        why = self._pool.retire(worker)
        self._worker = None
        if self._current is not None:
            self._current.status, self._current.reason = FAILED, f"not written: {why}"
            for left in set(_hidden_folders(self._current.path)) - self._hidden_before:
                shutil.rmtree(left, ignore_errors=True)
            self._current = None

    def step(self, timeout: float = 0.2) -> bool:
        """Take the worker's answer if it has come within ``timeout`` and hand out the next clip;
        ``True`` while the run goes on."""
        if self._current is None:
            if self._pending and self.outcome.stopped is None:
                self._hand_out()
            return self.running
        assert self._pool is not None
        for worker, msg in self._pool.receive(timeout):
            if msg is None:
                self._lose_worker(worker)
                self._hand_out()
                break
            current = self._current
            if current is None or msg.get("clip") != current.clip or msg.get("op") not in ("exported", "export_failed"):
                continue
            if msg["op"] == "exported":
                current.status, current.files = EXPORTED, [str(f) for f in msg.get("files", [])]
            else:
                current.status, current.reason = FAILED, str(msg.get("reason", "failed"))
            self._hand_out()
        return self.running

    def request_interrupt(self) -> None:
        self._interrupt = True

    @property
    def interrupt_requested(self) -> bool:
        return self._interrupt

    def cancel(self, reason: str) -> None:
        """Start no other clip (the one being written finishes: :meth:`finish` waits for it)."""
        if self.outcome.stopped is None:
            self.outcome.stopped = reason
        self._pending.clear()

    def finish(self, wait: float = FINISH_WAIT) -> ExportOutcome:
        """Run to the end (after :meth:`cancel`: only the clip being written), for at most ``wait``
        seconds, after which the worker is stopped and its clip reported; stop the worker, remove
        the run's folder; the outcome."""
        if self._finished:
            return self.outcome
        self._finished = True
        deadline = time.monotonic() + wait
        while self._current is not None and time.monotonic() < deadline:
            self.step(min(0.2, max(0.0, deadline - time.monotonic())))
        if self._current is not None and self._worker is not None and self._pool is not None:
            self._pool.kill(self._worker)
            self._lose_worker(self._worker)
        if self._pending:
            self.cancel(f"not finished within {wait:.0f} s")
        if self._pool is not None:
            self._pool.close()
        if self.work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return self.outcome
