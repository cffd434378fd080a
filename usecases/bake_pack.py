"""Batch Bake as a use case: every clip of an animation pack onto one character, in parallel
(:class:`.batch_runner.runner.BatchBake` does the run; its module docstring says how).

:func:`bake_pack` is the command line's ``bake-pack``: it opens the target (or the output it
continues), bakes, saves the output and writes the report. :func:`start_scene_bake`,
:func:`bake_here` and :func:`finish_scene_bake` are the Batch Bake operator's: the pack onto the
target in the open file, with the sidebar's settings.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import bpy

from ..batch_runner.driving import CtrlC
from ..batch_runner.outputs import continued_volumes, scan_volumes, write_report
from ..batch_runner.pack_start import PackStart, start_pack
from ..batch_runner.runner import DEFAULT_FILE_MB, DEFAULT_TIMEOUT, BatchBake
from ..bridge import nla_stack
from ..bridge.file_import import load_file, scene_fps
from ..core.batch.output_files import REPORT_RECORD, TARGET_RECORD, stray_volumes
from ..core.batch.pack_limits import why_unreadable
from ..core.batch.plan import plan_pack
from ..core.batch.report import BatchReport, FileOutcome
from ..core.batch.settings import BakeSettings, mapping_key
from ..core.batch.status import CLIP_GOOD, FILE_BAKED
from ..core.errors import MappingError, MarionetteError
from ..core.mapping.bone_mapping import BoneMapping
from ..core.retarget.geometric import RetargetOptions
from .rigs import pick_armature

if TYPE_CHECKING:
    from .export_pack import PackExport


def bake_settings(
    target: Any,
    mapping: BoneMapping | None,
    options: RetargetOptions,
    *,
    keep_frames: bool = False,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
    control_rig: str = "fk",
    source_mapping: BoneMapping | None = None,
) -> BakeSettings:
    """The run's shared settings; refuses (naming what is missing) a target that is neither a
    humanoid nor a quadruped nor a body its mapping describes as chains, and a bad method table.

    The method table is the one :func:`.retarget.retarget_action` uses: the given target mapping's
    ``methods`` (saved from the sidebar), overridden by ``methods``. A target whose mapped bones
    follow controls is keyed on its controls as ``control_rig`` says (``"fk"``, ``"ik"``, ``"off"``
    for the mapped bones; docs/control_rigs.md): its plan is found here, once for the run, and the
    workers retarget onto the bones it reads (a Rigify rig's ``ORG-`` bones).

    A quadruped target (mapped by shape or by a quadruped mapping) or one whose ``mapping``
    describes its body as chains is baked chain by chain as a single retarget does it
    (:mod:`.retarget_quadruped`); ``source_mapping`` describes every source's body as chains (a
    chain-described target needs one; a quadruped target maps each source by shape)."""
    from .retarget_quadruped import quadruped_binding
    from .rigs import quadruped_input, target_input

    if source_mapping is not None and source_mapping.body is None:
        raise MappingError("a pack's source mapping describes the sources' body as chains; this one names slots (each source is mapped by shape)")
    table = {**(mapping.methods if mapping is not None else {}), **(methods or {})}
    try:
        rig, tmap, control = target_input(target, mapping, control_rig)  # as a single retarget
    except MappingError as refused:
        chains = quadruped_input(target, mapping)
        if chains is None:
            raise
        if table or match_rest:
            raise MappingError("retarget methods (--method, --match-rest) are for humanoids: a quadruped is carried chain by chain") from None
        rig, tmap = chains
        if tmap.body is not None and source_mapping is None:
            raise MappingError(f"{refused}; its mapping describes the body as chains: describe the sources' too (--source-mapping)") from None
        quadruped_binding((rig, tmap), (rig, tmap), options)  # options it cannot honour, refused now
        return BakeSettings(
            rig, mapping_key(tmap.bones()), scene_fps(), keep_frames, options, {}, False,
            body=tmap.body, source_body=None if source_mapping is None else source_mapping.body,
        )
    if source_mapping is not None:
        raise MappingError("a source mapping describing chains needs a target described as chains or a quadruped")
    return BakeSettings(
        rig, mapping_key(tmap.bones()), scene_fps(), keep_frames, options, table, bool(match_rest),
        control_rig=control.plan.name if control is not None else None, control=control,
    )


# --- the command line's run ------------------------------------------------------------------


def _open_target(target_path: str, volume: str | None, armature: str | None) -> Any:
    """Open what the run writes into: the output volume it continues, else the target file.
    Returns the target armature."""
    from ..bridge.session import fresh_session, refuse_in_interactive_session

    refuse_in_interactive_session()
    if volume is not None:
        bpy.ops.wm.open_mainfile(filepath=volume, load_ui=False)
        name = armature or bpy.context.scene.get(TARGET_RECORD)
        return pick_armature(list(bpy.data.objects), name if isinstance(name, str) else None, os.path.basename(volume), "to bake onto")
    path = os.path.abspath(target_path)
    label = os.path.basename(path)
    why = why_unreadable(path)
    if why is not None:
        raise MarionetteError(f"{label}: {why} ({path})")
    if path.lower().endswith(".blend"):
        # A .blend character is opened whole: the output is that file plus the new Actions.
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        return pick_armature(list(bpy.context.scene.objects), armature, label, "to bake onto")
    fresh_session()
    loaded = load_file(path)
    return pick_armature(loaded.armatures, armature, label, "to bake onto")


def bake_pack(
    inputs: Sequence[str],
    target_path: str,
    output: str,
    *,
    jobs: int | None = None,
    report_path: str | None = None,
    target_armature: str | None = None,
    mapping: str | None = None,
    source_mapping: str | None = None,
    resume: bool = False,
    keep_frames: bool = False,
    options: RetargetOptions | None = None,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
    control_rig: str = "fk",
    max_clips_per_file: int | None = None,
    max_file_mb: float | None = DEFAULT_FILE_MB,
    timeout: float | None = DEFAULT_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    start: PackStart | None = None,
    push_to_nla: bool = False,
    export: PackExport | None = None,
) -> BatchReport:
    """The command line's batch bake: every clip of ``inputs`` onto the target, saved to
    ``output`` (in volumes past the budget; see the module docstring). The report is also written
    to ``report_path``. ``methods`` and ``match_rest`` choose the retarget method as for a single
    retarget (the table is checked before any file is read or written); ``control_rig`` how a
    control rig is keyed (:func:`bake_settings`). ``start``: the pack
    planned and its workers started already (:func:`.batch_runner.pack_start.start_pack`).
    ``push_to_nla``: each saved volume also holds its clips on muted NLA tracks of the target
    (:func:`push_saved_volumes`). ``export``: every baked clip also written for an engine, a file
    per clip or every clip in one file, as it says (:func:`.export_pack.export_pack`), listed in the
    report's ``exports``."""
    from ..core.mapping.method_names import check_method_table

    t0 = time.perf_counter()
    if start is None:
        methods = check_method_table(methods)
        start = start_pack(inputs, output, jobs=jobs, resume=resume)
    out = start.output
    try:
        methods = check_method_table(methods)
        volumes = continued_volumes(out, resume, start.earlier_start)
        target_map = BoneMapping.load(mapping) if mapping else None
        source_map = BoneMapping.load(source_mapping) if source_mapping else None

        def open_and_settle() -> tuple[Any, BakeSettings]:
            target = _open_target(target_path, volumes[-1] if volumes else None, target_armature)
            settings = bake_settings(
                target, target_map, options or RetargetOptions(), keep_frames=keep_frames, methods=methods, match_rest=match_rest,
                control_rig=control_rig, source_mapping=source_map,
            )
            problem = nla_stack.push_problem(target) if push_to_nla else None
            if problem is not None:
                raise MarionetteError(problem)
            return target, settings

        target, settings = open_and_settle()
        earlier = None
        if len(volumes) > 1:
            earlier = scan_volumes(volumes[:-1], settings.record())
            target, settings = open_and_settle()
    except BaseException:
        start.refused()  # nothing of a refused run is left behind (no parts folder, no workers)
        raise
    opened = time.perf_counter() - t0

    def on_file(f: FileOutcome, done: int, total: int) -> None:
        if progress is None:
            return
        good = sum(1 for c in f.clips if c.status in CLIP_GOOD)
        why = f.summary_reason()
        progress(f"[{done:>{len(str(total))}}/{total}] {f.status:9s} {f.label} ({good} clip{'s' if good != 1 else ''})" + (f": {why}" if why and f.status != FILE_BAKED else ""))

    if progress is not None and hasattr(start.pool, "say"):  # a Dask cluster's: one line per clip
        start.pool.say = progress
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
    with CtrlC(runner):
        report = runner.run()
    report.add_time("open", opened)
    report.info.update(
        output=out,
        target={"file": os.path.abspath(target_path), "armature": target.name, "reopened_output": bool(volumes)},
        # A cluster's worker threads, not the files it holds at once (runner.jobs there).
        jobs=getattr(start.pool, "planned_threads", runner.jobs),
        scene_fps=settings.scene_fps,
    )
    if push_to_nla:
        t_push = time.perf_counter()
        report.info["nla_tracks"] = push_saved_volumes(report, target.name)
        report.add_time("push_to_nla", time.perf_counter() - t_push)
    if export is not None:
        from .export_pack import export_pack

        t_export = time.perf_counter()
        inputs = [f.path for f in report.files] + [os.path.abspath(target_path)]
        report.info["exports"] = export_pack(report, report.info["target"]["armature"], export, inputs=inputs)
        report.add_time("export", time.perf_counter() - t_export)
    report.timings["wall"] = time.perf_counter() - t0
    # Everything is in the saved output now; the parts only mattered until it existed. Volumes
    # numbered past this output's are an earlier, larger run's.
    shutil.rmtree(start.parts, ignore_errors=True)
    for stray in stray_volumes(out, len(report.info.get("outputs", [])) or 1):
        os.remove(stray)
    if report_path:
        write_report(report, report_path)
    return report


def push_saved_volumes(report: BatchReport, armature: str) -> list[str]:
    """``bake-pack --push-to-nla``: each saved volume reopened, its clips pushed onto muted NLA
    tracks of ``armature`` in pack order (those a continued output has there already are not
    pushed again), the armature back on its own Action (or none), and saved. Returns the tracks'
    names, all volumes together."""
    from ..bridge.session import save_blend
    from ..core.batch.output_files import SOURCE_PROPERTY

    order = [c.action for f in report.files for c in f.clips if c.status in CLIP_GOOD and c.action]
    rank = {name: k for k, name in enumerate(order)}
    names: list[str] = []
    for path in report.info.get("outputs", []):
        bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
        target = bpy.data.objects[armature]
        nla_stack.drop_emptied_tracks(target)
        ad = target.animation_data
        stacked = {s.action for t in ad.nla_tracks for s in t.strips} if ad is not None else set()
        clips = [a for a in bpy.data.actions if a.get(SOURCE_PROPERTY) is not None and a not in stacked]
        clips.sort(key=lambda a: (rank.get(a.name, len(rank)), a.name))
        before = nla_stack.what_it_plays(target)
        if before.action is not None and before.action.get(SOURCE_PROPERTY) is not None:
            before.action, before.action_slot = None, None  # the run shows a clip on a target without an Action
        names += [t.name for t in nla_stack.push_keeping_active(target, clips, before)]
        save_blend(path)
    return names


# --- the Batch Bake operator's run -----------------------------------------------------------


def start_scene_bake(target: Any, scene_settings: Any, inputs: Sequence[str], *, jobs: int | None, timeout: float | None) -> BatchBake:
    """Plan the pack ``inputs`` and start baking it onto ``target`` in the open file, with the
    sidebar's settings (``scene_settings``: its options, mappings, method column, Keep Frames and
    Match Rest and Control Rig, as Retarget Clip takes them; ``None``: the defaults). Refuses (:class:`MarionetteError`)
    a target that is neither a humanoid nor a quadruped nor described as chains, a bad method table and a selection without clip files. A run
    whose workers could not start is returned cancelled (:attr:`.BatchBake.closed`): its report
    says why."""
    from ..properties.retarget_settings import mappings_from_rows, methods_from_rows, options_of

    s = scene_settings
    problem = nla_stack.push_problem(target) if getattr(s, "push_to_nla", False) else None
    if problem is not None:
        raise MarionetteError(problem)
    rows = mappings_from_rows(s) if s is not None else None
    options = options_of(s) if s is not None else RetargetOptions()
    settings = bake_settings(
        target,
        rows[1] if rows else None,
        options,
        keep_frames=bool(s and s.keep_frames),
        methods=methods_from_rows(s) if s is not None else None,
        match_rest=bool(s and s.match_rest),
        # The sidebar's Control Rig (FK, IK, Off); FK where the property is not there.
        control_rig=str(getattr(s, "control_rig", "FK")).lower() if s is not None else "fk",
        # The sidebar's source rows describing chains describe every clip's body.
        source_mapping=rows[0] if rows and rows[0].body is not None else None,
    )
    plan = plan_pack([bpy.path.abspath(p) for p in inputs])
    if not plan.files:
        said = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in plan.refused[:3])
        raise MarionetteError(f"No clip files to bake ({said})" if said else "No clip files (BVH, FBX, glTF/GLB, .blend) in the selection")
    runner = BatchBake(target, settings, plan, jobs=jobs, timeout=timeout)
    try:
        runner.start()
    except MarionetteError as exc:
        runner.cancel(str(exc))
    return runner


def bake_here(runner: BatchBake) -> None:
    """Run to the end within this call (Blender in the background, or no window to go modal in);
    Ctrl-C stops the run, keeping what is baked."""
    with CtrlC(runner):
        while runner.step(0.2):
            if runner.interrupt_requested:
                runner.cancel("interrupted by the user (Ctrl-C)")


def finish_scene_bake(runner: BatchBake, report_path: str, scene: Any) -> tuple[BatchReport, str]:
    """End the run (what is left is written, the target's own Action restored), save the JSON
    report (``report_path``; empty: next to the .blend, or in the temp folder) and keep it on the
    scene for the sidebar. Returns the report and where it was saved (or why not)."""
    report = runner.finish()
    report.info["target"] = {"armature": runner.target.name}
    if getattr(getattr(scene, "marionette", None), "push_to_nla", False):
        report.info["nla_tracks"] = push_baked_clips(runner.target, report)
    path = report_path or (
        bpy.path.abspath("//marionette_batch_report.json") if bpy.data.filepath else os.path.join(bpy.app.tempdir or ".", "marionette_batch_report.json")
    )
    try:
        saved = write_report(report, bpy.path.abspath(path))
    except OSError as exc:
        saved = f"(not saved: {exc})"
    scene[REPORT_RECORD] = json.dumps(report.to_dict())
    return report, saved


def push_baked_clips(target: Any, report: BatchReport) -> list[str]:
    """Push to NLA after Batch Bake: the run's Actions, in pack order, each onto a muted track of
    its own above the target's tracks (:mod:`..bridge.nla_stack`); the target then plays what it
    played before the run (the run itself makes a target without an Action play the first clip).
    Returns the tracks' names."""
    names = [c.action for f in report.files for c in f.clips if c.status in CLIP_GOOD and c.action]
    actions = [bpy.data.actions[n] for n in names if n in bpy.data.actions]
    before = nla_stack.what_it_plays(target)  # the run restored the target's pose and own Action
    if before.action in actions:
        before.action, before.action_slot = None, None
    return [t.name for t in nla_stack.push_keeping_active(target, actions, before)]
