"""Retarget: a clip played by one armature onto another as a new Action (:func:`retarget_action`,
the sidebar's Retarget Clip), and the same from two files into a saved .blend
(:func:`retarget_files`, the ``retarget`` command). Read Blender data in bulk, make one core call,
write the result in bulk, measure what Blender plays.

Each refuses bad input (a :class:`~marionette.core.errors.MarionetteError`) before it changes
anything, and never modifies the source armature or its Actions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..bridge import compat, nla_stack
from ..bridge.action_write import linked_problem, write_action, write_object_travel
from ..bridge.clip_read import clip_from_action
from ..bridge.clip_source import FileClip, is_long_bvh_take, read_bvh_clip
from ..bridge.control_target import predicted_placements, write_controls
from ..bridge.file_import import load_file, scene_fps
from ..bridge.played_pose import SPOT_FRAMES, driven_bones, played_placements, switch_to_pose_position, what_overrides
from ..bridge.session import fresh_session, save_blend
from ..core.errors import MappingError, RigError
from ..core.export.presets import export_format
from ..core.formats.bvh import CHUNK_FRAMES
from ..core.formats.reframe import onto_own_frames
from ..core.mapping.bone_mapping import BoneMapping
from ..core.measure.figures import measure
from ..core.retarget.binding_cache import BindingCache
from ..core.retarget.geometric import Binding, RetargetOptions, RigInput, source_placements
from ..core.retarget.methods import retarget_with_methods
from ..properties.retarget_settings import clip_of, fill_rows, mappings_from_rows, methods_from_rows, options_of
from ..viewport import deferred_summary
from .export import export_clip
from .retarget_quadruped import retarget_quadruped_action
from .rigs import pick_action, pick_armature, quadruped_input, rig_input, target_input

#: Bindings of the rig pairs retargeted in this session: the clips of a pack bind their pair once;
#: an edited mapping or rest gets a new binding (the key holds both).
BINDINGS = BindingCache()
#: A target segment longer or shorter than at rest by more than this (beyond what the source's own
#: segments do) is warned about: joints pulled apart, which direction figures do not see.
TARGET_STRETCH_WARNING = 0.05
#: A rest whose left and right limb segments differ by more than this (degrees) is a pose, not a
#: standing rest (docs/pipeline.md#a-rest-that-is-a-pose); the shared rigs read 1.1 at most.
REST_ASYMMETRY_WARNING = 15.0


@dataclass
class RetargetOutcome:
    action: Any  # bpy.types.Action written on the target
    binding: Binding
    report: dict[str, object]
    source_mapping: BoneMapping
    target_mapping: BoneMapping
    #: Not judged yet (``judge=False``): the call that measures the result (what ``judge`` would
    #: have put in the report), for a caller that shows it after the retarget returns.
    judge_later: Any = None


def retarget_action(
    source: Any,
    action: Any,
    target: Any,
    *,
    scene_fps: float,
    keep_frames: bool = False,
    options: RetargetOptions | None = None,
    source_mapping: BoneMapping | None = None,
    target_mapping: BoneMapping | None = None,
    name: str | None = None,
    replace_existing: bool = False,
    measure_frames: int = 120,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
    judge: bool = True,
    control_rig: str = "fk",
) -> RetargetOutcome:
    """Retarget ``action`` (played by ``source``) onto ``target`` as a new Action.

    The clip keeps its own timing on the scene's frame rate unless ``keep_frames`` keeps the
    source's frame numbers. ``methods`` chooses the retarget method per slot (geometric frames
    where it says nothing); a clip already on the target's layout is bound natively, its keys
    unchanged. Everything that can fail is checked before the Action is created. ``judge``
    measures the result (docs/pipeline.md#measurement) into the report; without it the report says only what was done.
    A target whose mapped bones follow controls is keyed on its controls as ``control_rig`` says
    (``"fk"``, ``"ik"``, or ``"off"`` for the mapped bones; docs/control_rigs.md).
    """
    problem = linked_problem(target)
    if problem is not None:
        raise RigError(problem)
    animals = None if isinstance(source, FileClip) else _quadruped_pair(source, target, source_mapping, target_mapping)
    if animals is not None:  # two quadrupeds: their chains (docs/pipeline.md#quadrupeds)
        if methods or match_rest:
            raise MappingError("retarget methods and Match Rest Poses are for humanoids; a quadruped pair takes its chains")
        new_action, qbinding, qreport = retarget_quadruped_action(
            source, action, target, *animals, scene_fps=scene_fps, keep_frames=keep_frames, options=options, name=name,
            replace_existing=replace_existing, measure_frames=measure_frames,
        )
        return RetargetOutcome(new_action, qbinding, qreport, animals[0][1], animals[1][1])  # type: ignore[arg-type]
    tgt_in, tgt_map, control = target_input(target, target_mapping, control_rig)
    if isinstance(source, FileClip):  # read without Blender (a BVH take): converted at the rate a piece at a time
        src_in, src_map = source.rig, source.mapping
        clip = source.clip(None if keep_frames else scene_fps)
        # On its own armature (the take imported by Blender): the importer's keys, bound natively.
        src_in, clip = onto_own_frames(src_in, tgt_in, clip, options)
    else:
        src_in, src_map = rig_input(source, source_mapping)
        clip = clip_from_action(source, action)
        if not keep_frames:
            clip = clip.resample(scene_fps)
    # A target mapping may carry methods per slot (saved from the sidebar); explicit ones win.
    table = {**(target_mapping.methods if target_mapping is not None else {}), **(methods or {})}
    run = retarget_with_methods(BINDINGS, src_in, tgt_in, clip, table, options, match_rest=match_rest)
    result, binding = run.result, run.result.binding
    rate = clip.fps if keep_frames else scene_fps
    frames = clip.frame_numbers(rate)
    opts = options or RetargetOptions()
    if control is not None:
        on_root = opts.root_motion == "ROOT_BONE"
        # The check plays the frames the quality report checks first (bridge/played_pose.py), once.
        picks = np.unique(np.linspace(0, clip.frame_count - 1, min(clip.frame_count, measure_frames)).astype(int))
        spots = picks[np.unique(np.linspace(0, picks.size - 1, min(SPOT_FRAMES, picks.size)).astype(int))]
        new_action = write_controls(
            target, control, tgt_in.skeleton, result.clip, result.root_motion, name or clip.name, frames, rate, replace_existing, on_root,
            check_at=np.asarray(frames, dtype=np.float64)[spots] if judge else None,
        )
        keyed = list(control.plan.keyed(on_root))
    else:
        new_action = write_action(target, result.clip, name or clip.name, frames=frames, replace=replace_existing, fps=rate)
        keyed = driven_bones(binding)
    if opts.root_motion == "OBJECT":
        write_object_travel(target, new_action, result.root_motion, frames)
    # An armature left in Rest Position would play nothing: show the new action (same undo step).
    switched = switch_to_pose_position(target)
    predict = partial(predicted_placements, control, tgt_in.skeleton) if control is not None else None
    judged = partial(
        judge_action, binding, clip, tgt_in, target, new_action, frames, rate, measure_frames, run.native,
        keyed if control is not None else None, predict, result.clip,
    )
    report = judged() if judge else {}
    if switched:
        report["switched_to_pose_position"] = True
        report.setdefault("notes", []).append(switched)
    report["clip"] = {
        "name": clip.name,
        "source_fps": clip.fps,
        "scene_fps": scene_fps,
        "frames": clip.frame_count,
        "first_frame": float(frames[0]),
        "last_frame": float(frames[-1]),
    }
    report["mapping"] = {"source": src_map.to_dict(), "target": tgt_map.to_dict()}
    report["method"] = {"native": run.native, "table": run.methods, "match_rest": match_rest, "warnings": list(run.warnings)}
    report["options"] = {"root_motion": opts.root_motion, "plant_feet": opts.plant_feet, "fingers": opts.fingers}
    report["control_rig"] = control.describe(opts.root_motion == "ROOT_BONE") if control is not None else None
    if result.planted:
        report["planted_feet"] = result.planted
        report["planted_hip_drop"] = {"max": result.hip_drop, "frames": result.lowered_frames}
    return RetargetOutcome(new_action, binding, report, src_map, tgt_map, None if judge else judged)


def _quadruped_pair(source: Any, target: Any, source_mapping: BoneMapping | None, target_mapping: BoneMapping | None) -> Any:
    """Both rigs' inputs and mappings when both are quadrupeds, else ``None`` (the humanoid path
    then retargets or refuses them); a quadruped onto a humanoid, or the reverse, is refused with
    the humanoid check's reason and what the quadruped can be retargeted onto."""
    src = quadruped_input(source, source_mapping)
    tgt = quadruped_input(target, target_mapping)
    if src is not None and tgt is not None:
        return src, tgt
    if (src is None) == (tgt is None):
        return None
    animal = source if src is not None else target
    try:
        rig_input(animal)
    except MappingError as exc:
        raise MappingError(f"{exc}; it maps as a quadruped (or its mapping describes its body as chains): retarget it from or onto another such body") from None
    return None


def judge_action(
    binding: Binding, clip: Any, tgt_in: RigInput, target: Any, action: Any, frames: Any, rate: float, measure_frames: int,
    native: bool = False,
    keyed: list[str] | None = None,
    predict: Any = None,
    result_clip: Any = None,
) -> dict[str, Any]:
    """The quality report of a retarget just written: what Blender plays (the pose it evaluates
    with ``action`` assigned: constraints, NLA, drivers, Rest Position included; not the core's
    arrays) measured against the source ``clip``, with a warning naming whatever hides or
    overrides the action's keys.

    A long clip is judged on evenly spread frames (at most ``measure_frames``), so the summary
    after a retarget costs little next to the retarget itself; the measure command reads all."""
    picks = np.unique(np.linspace(0, clip.frame_count - 1, min(clip.frame_count, measure_frames)).astype(int))
    # A control rig: what the solve makes Blender play, checked on spot frames (docs/control_rigs.md#the-check-on-what-blender-plays).
    predicted = predict(result_clip.take(picks)) if predict is not None else None
    world_t, notes = played_placements(target, action, np.asarray(frames)[picks], tgt_in.skeleton, fps=rate, predicted=predicted)
    report = measure(binding, source_placements(binding, clip.take(picks)), world_t, native)
    report["measured_frames"] = int(picks.size)
    hidden = (what_overrides(target, action, keyed, constraints=False) if keyed is not None else what_overrides(target, action, driven_bones(binding))) + notes
    if hidden:
        report.setdefault("warnings", []).extend(hidden)
    if report["source_stretch"] > 0.25:
        report.setdefault("warnings", []).append(
            f"the clip moves joints off their rest offsets (segments stretch by up to {100 * report['source_stretch']:.0f} %); "
            "directions follow the bones' rotations there"
        )
    for side in ("source", "target"):
        asymmetry = report["rest_asymmetry"][side]
        if asymmetry > REST_ASYMMETRY_WARNING:
            part = str(report["rest_asymmetry"][f"{side}_part"]).replace("_", " ")
            report.setdefault("warnings", []).append(
                f"the {side}'s rest is not a standing rest: its left and right {part}s differ by {asymmetry:.0f} deg "
                "(an FBX without a skinned mesh has no bind pose, and its pose at export is read as its rest); "
                "bone turns are measured from that rest, so the result is off by that pose: "
                "export the file with its skinned mesh, whose bind pose is the rest"
            )
    if report["target_stretch"] > TARGET_STRETCH_WARNING + report["source_stretch"]:
        report.setdefault("warnings", []).append(
            f"what plays pulls the target's joints off their bones (segments {100 * report['target_stretch']:.0f} % "
            "longer or shorter than at rest): bone directions alone do not show it"
        )
    return report


def retarget_files(
    source_path: str,
    target_path: str,
    output: str,
    *,
    clip: str | None = None,
    target_armature: str | None = None,
    mapping: str | None = None,
    keep_frames: bool = False,
    options: RetargetOptions | None = None,
    methods: Mapping[str, str] | None = None,
    match_rest: bool = False,
    chunk_frames: int = CHUNK_FRAMES,
    source_mapping: str | None = None,
    control_rig: str = "fk",
    push_to_nla: bool = False,
    engine: str | None = None,
    vmd_model: str | None = None,
) -> RetargetOutcome:
    """The command line's retarget: both files into a fresh scene, one clip retargeted, the target
    (with its meshes and the new Action) saved to ``output``: a .blend, or a file for an engine
    (.fbx, .glb, .gltf by its extension, for ``engine``: :func:`..usecases.export.export_clip`).
    Nothing is written on failure.
    A long BVH take is read without Blender (:mod:`..bridge.clip_source`), ``chunk_frames`` file frames at a time.
    ``control_rig`` (``"fk"``, ``"ik"``, ``"off"``) says what a control rig target is keyed on, as
    for :func:`retarget_action`. ``source_mapping`` (a file or preset) maps the source as
    ``mapping`` maps the target. ``push_to_nla`` keeps the new Action on a muted NLA track
    (:mod:`..bridge.nla_stack`) and the target on the Action it played. A VMD source is played
    on ``vmd_model`` (a PMX file) or on the built-in standard MMD skeleton (:mod:`..bridge.vmd_source`)."""
    import bpy

    from ..bridge.vmd_source import is_vmd, load_vmd

    fresh_session()
    target_file = load_file(target_path)
    target = pick_armature(target_file.armatures, target_armature, Path(target_file.path).name)
    target_map = BoneMapping.load(mapping) if mapping else None
    source_map = BoneMapping.load(source_mapping) if source_mapping else None
    problem = nla_stack.push_problem(target) if push_to_nla else None
    if problem is not None:
        raise RigError(problem)
    before = nla_stack.what_it_plays(target) if push_to_nla else None
    several = ""
    if is_long_bvh_take(source_path):  # a long take is not keyed into Blender first
        source_file, source = None, read_bvh_clip(source_path, clip, chunk_frames)
        action, name = None, source.name
    else:
        source_file = load_vmd(source_path, vmd_model) if is_vmd(source_path) else load_file(source_path)
        source = pick_armature(source_file.armatures, None, Path(source_file.path).name)
        action = pick_action(source_file, source, clip)
        name = action.name.split("|")[-1]
        if clip is None and len(source_file.actions) > 1:  # say which was taken, and how to take another
            others = ", ".join(repr(a.name.split("|")[-1]) for a in source_file.actions if a is not action)
            several = f"{Path(source_path).name} holds {len(source_file.actions)} clips: took {name!r}; the others ({others}) with --clip NAME"
    outcome = retarget_action(
        source,
        action,
        target,
        scene_fps=scene_fps(),
        keep_frames=keep_frames,
        options=options,
        source_mapping=source_map,
        target_mapping=target_map,
        name=name,
        methods=methods,
        match_rest=match_rest,
        control_rig=control_rig,
    )
    # The result file holds the target, not the source that was only read.
    for obj in source_file.objects if source_file else []:
        if obj.name in bpy.data.objects:
            bpy.data.objects.remove(obj, do_unlink=True)
    for a in source_file.actions if source_file else []:
        if a.name in bpy.data.actions and a != outcome.action:
            bpy.data.actions.remove(a)
    if outcome.action.name != name and name not in bpy.data.actions:
        outcome.action.name = name  # the source's action of that name is gone now
    if several:
        outcome.report.setdefault("notes", []).append(several)
    if before is not None:
        _push_clip(target, outcome, before)
    else:
        target.animation_data.action = outcome.action
    if export_format(output) is not None:  # the file holds the new clip alone, whatever the NLA holds
        outcome.report["export"] = export_clip(target, outcome.action, output, engine)
    else:
        save_blend(output)
    outcome.report["files"] = {"source": str(Path(source_path).resolve()), "target": str(Path(target_path).resolve())}
    return outcome



def retarget_clip(scene: Any) -> tuple[RetargetOutcome, str]:
    """The sidebar's Retarget Clip on ``scene``'s settings: the chosen clip onto the target with
    the rows' mappings and methods (rows filled in from the auto-mapping when there are none), its
    summary shown in the Quality panel at once or measured after the click returns
    (:mod:`..viewport.deferred_summary`). Returns the outcome and the line that says what was done."""
    s = scene.marionette
    push = bool(s.push_to_nla) and s.target is not None
    problem = nla_stack.push_problem(s.target) if push else None
    if problem is not None:
        raise RigError(problem)
    before = nla_stack.what_it_plays(s.target) if push else None
    rows = mappings_from_rows(s)
    outcome = retarget_action(
        s.source,
        clip_of(s),
        s.target,
        scene_fps=scene_fps(scene),
        keep_frames=s.keep_frames,
        options=options_of(s),
        source_mapping=rows[0] if rows else None,
        target_mapping=rows[1] if rows else None,
        replace_existing=s.replace_action,
        methods=methods_from_rows(s),
        match_rest=s.match_rest,
        judge=not deferred_summary.defer_summary(),
        control_rig=s.control_rig.lower(),
    )
    if rows is None:
        fill_rows(s, outcome.source_mapping, outcome.target_mapping)
    rig = outcome.report.get("control_rig")
    onto = f"{s.target.name!r} ({rig['plan']}, {len(rig['controls'])} controls keyed)" if rig else repr(s.target.name)
    done = f"Retargeted onto {onto} as {outcome.action.name!r}"
    if before is not None:
        done += _push_clip(s.target, outcome, before)
    if outcome.report.get("body_plan") in ("quadruped", "chains"):
        # Measured already (on what Blender plays): the Quality panel shows the per-chain figures.
        from .retarget_quadruped import chain_quality, color_chain_bones

        s.last_report = json.dumps(chain_quality(outcome.action.name, outcome.report))
        if s.color_bones:
            color_chain_bones(s.target, outcome.report)
        return outcome, f"{done}: chain direction error mean {outcome.report['summary']['mean_direction_error']:.2f} deg"
    if outcome.judge_later is not None:
        deferred_summary.defer(scene, outcome, bool(s.color_bones))
        return outcome, f"{done}; measuring its quality (the Quality panel fills in)"
    deferred_summary.show_quality(s, outcome, bool(s.color_bones))
    summary = outcome.report["summary"]
    return outcome, f"{done}: bone direction error mean {summary['mean_direction_error']:.2f} deg"


def _push_clip(target: Any, outcome: RetargetOutcome, before: nla_stack.Playing) -> str:
    """Push to NLA after Retarget Clip: the new action onto the strip of a new muted top track, the
    target back on the action it played before (``before``). Its summary is measured on the new
    action as Blender plays it when active: already measured, or (deferred) measured with it made
    active for the time of the measurement. Returns what to add to the click's line."""
    action = outcome.action
    if outcome.judge_later is not None:
        outcome.judge_later = partial(_judged_playing, target, action, compat.action_slot_for(action, target), outcome.judge_later)
    if before.action is not None and not _exists(before.action):
        # Replace Existing Action replaced what it played: it plays the replacement.
        before.action, before.action_slot = compat.current_action(target)
    track = nla_stack.push_keeping_active(target, [action], before)[0]
    strip = track.strips[0]
    outcome.report["nla"] = {"track": track.name, "strip": strip.name, "frame_start": strip.frame_start, "frame_end": strip.frame_end, "muted": track.mute}
    playing = before.action.name if before.action is not None else None
    return f", pushed to the NLA as muted track {track.name!r} (it plays {'action ' + repr(playing) if playing else 'no action'} as before)"


def _judged_playing(target: Any, action: Any, action_slot: Any, judge: Any) -> dict[str, Any]:
    with nla_stack.playing(target, action, action_slot):
        return dict(judge())


def _exists(datablock: Any) -> bool:
    try:
        _ = datablock.name
    except ReferenceError:
        return False
    return True
