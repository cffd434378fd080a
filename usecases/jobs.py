"""Jobs shared by the operators and the command line: read Blender data in bulk, make one core
call, write the result in bulk, report.

Each job refuses bad input (a :class:`~marionette.core.errors.MarionetteError`) before it changes
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

from ..bridge import compat
from ..bridge.armature_io import (
    clip_from_action,
    linked_problem,
    rest_heads_tails,
    skeleton_from_armature,
    write_action,
)
from ..bridge.clip_source import FileClip, is_long_bvh_take, read_bvh_clip
from ..bridge.played_pose import driven_bones, played_placements, switch_to_pose_position, what_overrides
from ..core.errors import MappingError, MarionetteError, RigError
from ..core.formats.bvh import CHUNK_FRAMES
from ..core.formats.reframe import onto_own_frames
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.humanoid_check import check_humanoid_skeleton
from ..core.measure.figures import measure
from ..core.retarget.binding_cache import BindingCache, native_refusal
from ..core.retarget.geometric import Binding, RetargetOptions, RigInput, bind, source_placements
from ..core.retarget.methods import retarget_with_methods

#: Bindings of the rig pairs retargeted in this session: the clips of a pack bind their pair once;
#: an edited mapping or rest gets a new binding (the key holds both).
BINDINGS = BindingCache()


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


_AUTO_MAPPINGS: dict[tuple[str, bytes, str | None], BoneMapping] = {}


def rig_input(obj: Any, mapping: BoneMapping | None = None) -> tuple[RigInput, BoneMapping]:
    """A Blender armature as the retarget sees it, auto-mapped unless a mapping is given."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError(f"{getattr(obj, 'name', obj)!r} is not an armature object")
    skeleton = skeleton_from_armature(obj)
    heads, tails = rest_heads_tails(obj)
    try:
        # A given mapping (edited in the sidebar, loaded from a preset) is checked against the
        # rig too: its bones must exist and the body it names must stand upright. The outcome
        # depends only on the rig and the mapping given, so it is kept per layout, bone ends and
        # mapping (each Retarget Clip of the sidebar's rows checks the same one).
        given = None if mapping is None else json.dumps(mapping.to_dict(), sort_keys=True)
        ends = np.round(np.concatenate([heads, tails]).astype(np.float64), 6).tobytes()
        key = (skeleton.signature(), ends, given)
        if key not in _AUTO_MAPPINGS:
            if len(_AUTO_MAPPINGS) >= 32:
                _AUTO_MAPPINGS.pop(next(iter(_AUTO_MAPPINGS)))
            _AUTO_MAPPINGS[key] = check_humanoid_skeleton(skeleton, tails, mapping)
        mapping = _AUTO_MAPPINGS[key]
    except MappingError as exc:
        raise MappingError(f"armature {obj.name!r}: {exc}") from exc
    slots = {slot: mb.bone for slot, mb in mapping.slots.items()}
    return RigInput(skeleton, slots, tails), mapping


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
) -> RetargetOutcome:
    """Retarget ``action`` (played by ``source``) onto ``target`` as a new Action.

    The clip keeps its own timing on the scene's frame rate unless ``keep_frames`` keeps the
    source's frame numbers. ``methods`` chooses the retarget method per slot (geometric frames
    where it says nothing); a clip already on the target's layout is bound natively, its keys
    unchanged. Everything that can fail is checked before the Action is created. ``judge``
    measures the result (SPEC 6) into the report; without it the report says only what was done.
    """
    problem = linked_problem(target)
    if problem is not None:
        raise RigError(problem)
    tgt_in, tgt_map = rig_input(target, target_mapping)
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
    new_action = write_action(target, result.clip, name or clip.name, frames=frames, replace=replace_existing, fps=rate)
    if opts.root_motion == "OBJECT":
        write_object_travel(target, new_action, result.root_motion, frames)
    # An armature left in Rest Position would play nothing: show the new action (same undo step).
    switched = switch_to_pose_position(target)
    judged = partial(judge_action, binding, clip, tgt_in, target, new_action, frames, rate, measure_frames, run.native)
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
    if result.planted:
        report["planted_feet"] = result.planted
        report["planted_hip_drop"] = {"max": result.hip_drop, "frames": result.lowered_frames}
    return RetargetOutcome(new_action, binding, report, src_map, tgt_map, None if judge else judged)


def judge_action(
    binding: Binding, clip: Any, tgt_in: RigInput, target: Any, action: Any, frames: Any, rate: float, measure_frames: int,
    native: bool = False,
) -> dict[str, Any]:
    """The quality report of a retarget just written: what Blender plays (the pose it evaluates
    with ``action`` assigned: constraints, NLA, drivers, Rest Position included; not the core's
    arrays) measured against the source ``clip``, with a warning naming whatever hides or
    overrides the action's keys.

    A long clip is judged on evenly spread frames (at most ``measure_frames``), so the summary
    after a retarget costs little next to the retarget itself; the measure command reads all."""
    picks = np.unique(np.linspace(0, clip.frame_count - 1, min(clip.frame_count, measure_frames)).astype(int))
    world_t, notes = played_placements(target, action, np.asarray(frames)[picks], tgt_in.skeleton, fps=rate)
    report = measure(binding, source_placements(binding, clip.take(picks)), world_t, native)
    report["measured_frames"] = int(picks.size)
    hidden = what_overrides(target, action, driven_bones(binding)) + notes
    if hidden:
        report.setdefault("warnings", []).extend(hidden)
    if report["source_stretch"] > 0.25:
        report.setdefault("warnings", []).append(
            f"the clip moves joints off their rest offsets (segments stretch by up to {100 * report['source_stretch']:.0f} %); "
            "directions follow the bones' rotations there"
        )
    return report


def write_object_travel(obj: Any, action: Any, travel: Any, frames: Any) -> None:
    """Key the object's location with the root travel (root motion on the object).

    ``travel`` is ``(T, 3)`` in the armature's own space; it becomes a world offset through the
    object's placement and then a location offset in the object's parent space.
    """
    world = np.asarray(obj.matrix_world, dtype=np.float64)[:3, :3]
    delta = np.asarray(travel, dtype=np.float64) @ world.T
    if obj.parent is not None:
        parent = np.asarray(obj.parent.matrix_world, dtype=np.float64) @ np.asarray(obj.matrix_parent_inverse, dtype=np.float64)
        delta = delta @ np.linalg.inv(parent[:3, :3]).T
    values = np.asarray(obj.location, dtype=np.float64) + delta
    bag = compat.channelbag(action, compat.action_slot_for(action, obj), create=True)
    f = np.asarray(frames, dtype=np.float32)
    for axis in range(3):
        curve = compat.new_fcurve(bag, "location", axis, "Object Transforms")
        curve.keyframe_points.add(len(f))
        curve.keyframe_points.foreach_set("co", np.column_stack([f, values[:, axis]]).astype(np.float32).ravel())
        curve.keyframe_points.foreach_set("interpolation", [1] * len(f))  # LINEAR
        curve.update()


def foot_slide(report: dict[str, Any]) -> dict[str, float]:
    """How far each foot slides while the source's is planted, and the source's own slide (in hip
    heights, summed over the contact frames): ``{"foot.L": ..., "foot.L source": ...}``."""
    skate = report.get("foot_skating", {})
    out = {}
    for side in ("L", "R"):
        foot = f"foot.{side}"
        if skate.get(f"{foot} contact frames"):
            out[foot] = float(skate[f"{foot} slide"])
            out[f"{foot} source"] = float(skate[f"{foot} source slide"])
    return out


def format_summary(report: dict[str, Any]) -> str:
    """The quality figures a person reads after a retarget."""
    s = report["summary"]
    lines = [f"  note: {note}" for note in report.get("notes", [])] + [
        f"  bone direction error   mean {s['mean_direction_error']:.3f} deg, max {s['max_direction_error']:.3f} deg",
        f"  limb direction error   mean {s['mean_limb_direction_error']:.3f} deg",
        f"  elbow/knee plane error max {s['max_limb_plane_error']:.3f} deg",
        f"  hips height error      max {100 * s['hips_height_error']:.2f} % of target hip height",
        f"  silhouette overlap     front {s['silhouette_front']:.2f}, side {s['silhouette_side']:.2f} (IoU; proportions differ)",
    ]
    turned = report.get("rotation_since_first_frame_deg", {})
    if turned:
        figures = ", ".join(
            f"{group} {g['off']:.2f}"
            # A run judged as a whole says so where its bones, one by one, would read otherwise.
            + (f" (run as a whole; bone for bone {g['per_bone_off']:.2f})" if abs(g.get("per_bone_off", g["off"]) - g["off"]) >= 0.005 else "")
            for group, g in turned.items()
        )
        lines.append(f"  rotation since first frame, off by (mean deg): {figures}")
    skate = report.get("foot_skating", {})
    for side in ("L", "R"):
        if f"foot.{side} slide" in skate and skate[f"foot.{side} contact frames"]:
            lines.append(
                f"  foot.{side} slide planted  {100 * skate[f'foot.{side} slide']:.1f} % of hip height over "
                f"{skate[f'foot.{side} contact frames']:.0f} contact frames (source: {100 * skate[f'foot.{side} source slide']:.1f} %)"
            )
    for palm, err in report.get("palm_normal_error_deg", {}).items():
        lines.append(f"  {palm} normal error   max {err:.2f} deg")
    if report.get("options", {}).get("plant_feet") and not report.get("method", {}).get("native"):
        held = report.get("planted_feet", {})
        counts = ", ".join(
            f"{foot} held on {c['held']} frames" + (f" ({c['out_of_reach']} out of the leg's reach)" if c["out_of_reach"] else "")
            for foot, c in held.items()
        )
        lines.append(f"  Plant Feet: {counts or 'no planted contacts in the clip'}")
        drop = report.get("planted_hip_drop", {})
        if drop.get("frames"):
            lines.append(
                f"  (hips lowered by up to {100 * drop['max']:.1f} % of hip height on {drop['frames']} frames "
                "to bring held feet within the legs' reach)"
            )
        lines.append("  (thighs and shins bend away from the clip's directions to hold the feet)")
    if "measured_frames" in report:
        lines.append(f"  (measured on {report['measured_frames']} evenly spread frames of the pose Blender plays)")
    for warning in report.get("warnings", []):
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def refuse_in_interactive_session(interactive: bool | None = None) -> None:
    """File jobs (retarget files, measure, demo, a pack, a PMX file) replace the open Blender
    file. They run only in Blender started for the job (background, or Blender as a Python
    module); in an interactive Blender (``interactive``, default: not background) the open file
    is never discarded: the job is refused, saying how to run it."""
    import bpy

    if (not bpy.app.background) if interactive is None else interactive:
        raise MarionetteError(
            "this job starts from an empty Blender session and would close the open file; run it from a command line "
            "(python -m marionette ..., or blender --background --command marionette ...)"
        )


def fresh_session(interactive: bool | None = None) -> None:
    """An empty Blender session for a file job (see :func:`refuse_in_interactive_session`)."""
    import bpy

    refuse_in_interactive_session(interactive)
    bpy.ops.wm.read_factory_settings(use_empty=True)


def save_blend(path: str | Path) -> None:
    """Write the current file, refusing to leave a half-written file behind."""
    import bpy

    p = Path(path).resolve()
    tmp = p.with_name(p.name + ".partial.blend")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True, compress=True)
        tmp.replace(p)
    except (OSError, RuntimeError) as exc:  # checked before the work; the disk may still fill up
        tmp.unlink(missing_ok=True)
        why = [line for line in str(exc).splitlines() if line.strip()]
        raise MarionetteError(f"{p}: cannot be written ({why[-1].strip() if why else type(exc).__name__})") from exc


def demo(output: str | Path, frames: int = 96) -> RetargetOutcome:
    """The built-in default job: Marionette's own sample walk, on its own sample humanoid, retargeted
    onto Blender's Rigify basic human metarig (an A-pose rig with different rolls, proportions and
    names), saved to ``output``."""
    import addon_utils
    import bpy

    from ..bridge.armature_io import create_armature
    from ..core.rig.samples import sample_humanoid, sample_walk

    fresh_session()
    addon_utils.enable("rigify", default_set=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 24, 1.0
    sample = sample_humanoid()
    clip = sample_walk(sample, frames=frames, fps=24.0, name="SampleWalk")
    source = create_armature(sample.skeleton, "MarionetteSample", tails=sample.tails)
    source_action = write_action(source, clip, "SampleWalk")
    bpy.ops.object.armature_basic_human_metarig_add()
    target = bpy.context.active_object
    target.name = "Metarig"
    target.location.x = 1.5
    outcome = retarget_action(
        source, source_action, target, scene_fps=24.0, name="SampleWalk_on_Metarig", options=RetargetOptions(plant_feet=True)
    )
    scene.frame_start, scene.frame_end = 1, frames
    save_blend(output)
    return outcome


def color_bones_by_error(target: Any, binding: Binding, report: dict[str, Any], worst_deg: float = 5.0) -> None:
    """Colour the target's pose bones by their mean direction error: green (exact) to red
    (``worst_deg`` or more). Bones without a measurement keep their colours."""
    errors = report["direction_error_deg"]
    for slot, figures in errors.items():
        bone = binding.target.skeleton.names[binding.target.slots[slot]]
        pb = target.pose.bones.get(bone)
        if pb is None:
            continue
        u = min(1.0, max(0.0, float(figures["mean"]) / worst_deg))
        colour = (u, 1.0 - u, 0.1)
        pb.color.palette = "CUSTOM"
        pb.color.custom.normal = colour
        pb.color.custom.select = tuple(min(1.0, c + 0.3) for c in colour)
        pb.color.custom.active = (1.0, 1.0, 1.0)


def _pick_armature(loaded: Any, name: str | None, role: str) -> Any:
    arms = loaded.armatures
    label = Path(loaded.path).name
    if name is not None:
        for a in arms:
            if a.name == name or a.data.name == name:
                return a
        raise RigError(f"{label}: no armature called {name!r} (it has {', '.join(repr(a.name) for a in arms)})")
    return character_of(arms)


def character_of(arms: Any) -> Any:
    """The character among a file's armatures, for every command that takes one unnamed: the
    largest one that maps as a humanoid (a prop, a pet or a control rig with more bones is not
    it; ties go to the name), else the largest, refused by name later."""
    if len(arms) == 1:
        return arms[0]
    humanoids = []
    for a in arms:
        try:
            rig_input(a)
        except MarionetteError:
            continue
        humanoids.append(a)
    return max(humanoids or arms, key=lambda a: (len(a.data.bones), a.name))


def _pick_action(loaded: Any, source: Any, name: str | None) -> Any:
    label = Path(loaded.path).name
    actions = loaded.actions
    if not actions:
        ad = source.animation_data
        if ad is not None and ad.action is not None:
            return ad.action
        raise MappingError(f"{label}: the file has no animation to retarget")
    if name is None:
        return actions[0]
    for a in actions:
        if a.name == name or a.name.split("|")[-1] == name:
            return a
    raise MappingError(f"{label}: no clip called {name!r} (clips: {', '.join(repr(a.name) for a in actions)})")


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
) -> RetargetOutcome:
    """The command line's retarget: both files into a fresh scene, one clip retargeted, the target
    (with its meshes and the new Action) saved to ``output``. Nothing is written on failure.
    A long BVH take is read without Blender (:mod:`.clip_source`), ``chunk_frames`` file frames at a time."""
    import bpy

    from ..bridge.file_import import load_file, scene_fps

    fresh_session()
    target_file = load_file(target_path)
    target = _pick_armature(target_file, target_armature, "target")
    target_map = BoneMapping.load(mapping) if mapping else None
    several = ""
    if is_long_bvh_take(source_path):  # a long take is not keyed into Blender first
        source_file, source = None, read_bvh_clip(source_path, clip, chunk_frames)
        action, name = None, source.name
    else:
        source_file = load_file(source_path)
        source = _pick_armature(source_file, None, "source")
        action = _pick_action(source_file, source, clip)
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
        target_mapping=target_map,
        name=name,
        methods=methods,
        match_rest=match_rest,
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
    target.animation_data.action = outcome.action
    save_blend(output)
    outcome.report["files"] = {"source": str(Path(source_path).resolve()), "target": str(Path(target_path).resolve())}
    return outcome


def measure_files(source_path: str, retargeted_path: str, *, clip: str | None = None, action: str | None = None,
                  target_armature: str | None = None) -> dict[str, Any]:
    """Measure a retarget already saved in a .blend against its source clip (SPEC 6).

    The source clip is played at the retargeted action's frame rate; both rigs are auto-mapped,
    so the figures judge the result whoever produced it."""
    import bpy

    from ..bridge.armature_io import action_fps
    from ..bridge.file_import import load_file

    fresh_session()
    result_file = load_file(retargeted_path)
    target = _pick_armature(result_file, target_armature, "target")
    if action is not None:
        result_action = bpy.data.actions.get(action)
        if result_action is None:
            raise MappingError(f"{Path(retargeted_path).name}: no action called {action!r}")
    else:
        ad = target.animation_data
        result_action = ad.action if ad is not None and ad.action is not None else None
        if result_action is None:
            raise MappingError(f"{Path(retargeted_path).name}: armature {target.name!r} plays no action to measure")
    source_file = load_file(source_path)
    source = _pick_armature(source_file, None, "source")
    source_action = _pick_action(source_file, source, clip)
    src_in, _ = rig_input(source)
    tgt_in, _ = rig_input(target)
    rate = action_fps(result_action)
    src_clip = clip_from_action(source, source_action).resample(rate)
    binding = bind(src_in, tgt_in)
    # What the file plays (an action asked for by name is played in the active one's place).
    ad = target.animation_data
    if ad is None or ad.action != result_action:
        compat.assign_action(target, result_action, compat.action_slot_for(result_action, target))
    world_t, notes = played_placements(target, result_action, src_clip.frame_numbers(rate), tgt_in.skeleton, fps=rate)
    # A clip on its own rig's layout is retargeted natively (its keys kept, on its own floor).
    native = native_refusal(src_clip, src_in.skeleton, tgt_in.skeleton) is None
    report = measure(binding, source_placements(binding, src_clip), world_t, native)
    hidden = what_overrides(target, result_action, driven_bones(binding)) + notes
    if hidden:
        report["warnings"] = hidden
    report["clip"] = {"source": source_action.name, "retargeted": result_action.name, "fps": rate, "frames": src_clip.frame_count}
    return report
