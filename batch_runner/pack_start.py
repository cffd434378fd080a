"""The command line's start of a pack, before Blender is loaded: plan the pack, prepare its
parts folder and start the workers (:func:`start_pack`), each with a list of BVH files to read
ahead (:class:`.batch_worker.ReadAhead`) while the main process loads Blender and the target; the
main process hands it those files first."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.batch.output_files import existing_volumes, stray_volumes
from ..core.batch.pack_limits import useful_jobs
from ..core.batch.plan import PackPlan, plan_pack
from ..core.errors import MarionetteError
from .batch_worker import READ_AHEAD_FILES
from .worker_pool import WorkerPool, default_jobs


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


def start_pack(
    inputs: Sequence[str],
    output: str,
    *,
    jobs: int | None = None,
    resume: bool = False,
    read_ahead: bool = True,
    cluster: str | None = None,
    ship_inputs: bool = False,
) -> PackStart:
    """Plan the pack and start its workers (with files to read ahead on a fresh run) without
    importing Blender; refuses a pack without clip files (an empty or missing folder, only
    entries that cannot be read) before anything is written. ``cluster``: the tasks go to a Dask
    cluster instead (:class:`.cluster.ClusterPool`, connected here: an unreachable scheduler
    refuses the run before anything is written); ``ship_inputs``: its workers are sent the pack's
    files rather than reading them by path."""
    out = str(Path(output).resolve())
    parts = parts_directory(out)
    own = [out, parts, out + ".partial.blend", *existing_volumes(out), *stray_volumes(out, 0)]
    plan = plan_pack(inputs, exclude=own)
    if not plan.files:
        said = "; ".join(f"{p}: {why}" for p, why in plan.refused[:3])
        raise MarionetteError((said + " (no clip files to bake)") if said else "no clip files (.bvh, .fbx, .glb/.gltf, .blend, .vmd) in " + ", ".join(map(str, inputs)))
    if cluster is not None:
        from .cluster import ClusterPool

        ahead = [f.path for f in plan.files if f.is_bvh] if read_ahead and not resume else []
        cpool = ClusterPool(cluster, ship=ship_inputs, read_ahead=ahead)
        try:
            made = not os.path.isdir(parts)
            if not resume and not made:
                shutil.rmtree(parts)
                made = True
            earlier = _note_run(parts, resume)
        except BaseException:
            cpool.close(graceful=False)
            raise
        count, note = cpool.jobs_for(plan)
        return PackStart(out, parts, plan, count, resume, earlier, cpool, requested=jobs, jobs_note=note, made_parts=made)  # type: ignore[arg-type]
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
