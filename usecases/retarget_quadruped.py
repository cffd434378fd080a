"""Retarget between two quadrupeds (docs/pipeline.md#quadrupeds): the clip onto the target as a
new Action, measured on the pose Blender plays, with per-chain figures. The sidebar's Retarget
Clip and the ``retarget`` command come here when both rigs map as quadrupeds
(:func:`..usecases.retarget.retarget_action`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..bridge.action_write import write_action, write_object_travel
from ..bridge.clip_read import clip_from_action
from ..bridge.played_pose import played_placements, switch_to_pose_position, what_overrides
from ..core.errors import MappingError
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.quadruped_profile import is_quadruped_mapping
from ..core.measure.chains import measure_chains
from ..core.retarget.body_chains import plan_of_description
from ..core.retarget.geometric import RetargetOptions, RigInput
from ..core.retarget.quadruped import QuadrupedBinding, bind_quadrupeds, pose_of, retarget_quadruped
from ..core.retarget.quadruped_plant import plant_paws


def quadruped_binding(src: tuple[RigInput, BoneMapping], tgt: tuple[RigInput, BoneMapping], options: RetargetOptions | None) -> QuadrupedBinding:
    """The binding of two quadruped rigs, or of two bodies their mappings describe as chains;
    options they cannot honour are refused by name."""
    (src_in, src_map), (tgt_in, tgt_map) = src, tgt
    opts = options or RetargetOptions()
    if (src_map.body is None) != (tgt_map.body is None) and not (is_quadruped_mapping(src_in.slots) or is_quadruped_mapping(tgt_in.slots)):
        raise MappingError("one rig's body is described as chains and the other's is not: describe both (--source-mapping, --mapping)")
    return bind_quadrupeds(
        src_in.skeleton, plan_of_description(src_map.body, src_in.skeleton) if src_map.body else src_in.slots,
        tgt_in.skeleton, plan_of_description(tgt_map.body, tgt_in.skeleton) if tgt_map.body else tgt_in.slots,
        None if src_in.ends is None else np.asarray(src_in.ends), None if tgt_in.ends is None else np.asarray(tgt_in.ends),
        root_motion=opts.root_motion, options=opts,
    )


def retarget_quadruped_action(
    source: Any,
    action: Any,
    target: Any,
    src: tuple[RigInput, BoneMapping],
    tgt: tuple[RigInput, BoneMapping],
    *,
    scene_fps: float,
    keep_frames: bool = False,
    options: RetargetOptions | None = None,
    name: str | None = None,
    replace_existing: bool = False,
    measure_frames: int = 120,
) -> tuple[Any, QuadrupedBinding, dict[str, Any]]:
    """``action`` (played by ``source``) onto ``target``, both mapped as quadrupeds (``src``,
    ``tgt``: rig input and mapping); returns the new Action, the binding and the report.
    Everything that can fail is checked before the Action is created."""
    (src_in, src_map), (tgt_in, tgt_map) = src, tgt
    binding = quadruped_binding(src, tgt, options)
    clip = clip_from_action(source, action)
    if not keep_frames:
        clip = clip.resample(scene_fps)
    result = retarget_quadruped(binding, clip)
    planted: dict[str, dict[str, int]] = {}
    drop = 0.0
    if options is not None and options.plant_feet:
        result, planted, drop = plant_paws(binding, clip, result)
    rate = clip.fps if keep_frames else scene_fps
    frames = clip.frame_numbers(rate)
    new_action = write_action(target, result.clip, name or clip.name, frames=frames, replace=replace_existing, fps=rate)
    if binding.root_motion == "OBJECT":
        write_object_travel(target, new_action, result.root_motion, frames)
    switched = switch_to_pose_position(target)
    picks = np.unique(np.linspace(0, clip.frame_count - 1, min(clip.frame_count, measure_frames)).astype(int))
    played, notes = played_placements(target, new_action, np.asarray(frames)[picks], tgt_in.skeleton, fps=rate)
    report = measure_chains(binding, pose_of(src_in.skeleton, clip.take(picks)), played, clip.times[picks])
    report["measured_frames"] = int(picks.size)
    report["direction_error_deg"] = {}  # humanoid slots; a quadruped's figures are per chain
    driven = [n for n, d in zip(tgt_in.skeleton.names, binding.driven, strict=True) if d > 0]
    hidden = what_overrides(target, new_action, driven) + notes + list(binding.warnings)
    if hidden:
        report["warnings"] = hidden
    if planted:
        report["planted_feet"] = planted
        report["planted_hip_drop"] = {"max": drop}
    if switched:
        report["switched_to_pose_position"] = True
        report.setdefault("notes", []).append(switched)
    report["clip"] = {
        "name": clip.name, "source_fps": clip.fps, "scene_fps": scene_fps, "frames": clip.frame_count,
        "first_frame": float(frames[0]), "last_frame": float(frames[-1]),
    }
    report["mapping"] = {"source": src_map.to_dict(), "target": tgt_map.to_dict()}
    report["method"] = {"native": False, "table": "quadruped chains", "match_rest": False, "warnings": list(binding.warnings)}
    report["options"] = {"root_motion": binding.root_motion, "plant_feet": bool(planted), "fingers": False}
    report["control_rig"] = None
    return new_action, binding, report


def chain_quality(action_name: str, report: dict[str, Any]) -> dict[str, Any]:
    """What the Quality panel shows of a quadruped's or chain-described body's retarget (its
    ``report``): each chain's direction error, the pelvis, travel (and its scales) and facing figures, each paw's
    slide against the source's, the paws held, notes and warnings."""
    summary = report["summary"]
    return {
        "action": action_name,
        "body_plan": report.get("body_plan"),
        "chains": {c: [f["mean_direction_error"], f["max_direction_error"], f["bones"], f["source_bones"]] for c, f in report["chains"].items()},
        "mean_direction_error": summary["mean_direction_error"],
        "max_direction_error": summary["max_direction_error"],
        "pelvis_orientation_error": summary["pelvis_orientation_error"],
        "travel_gap": summary["travel"]["largest_gap_hip_heights"],
        "travel_scales": [report["binding"]["horizontal_scale"], report["binding"]["vertical_scale"]],
        "facing_error": summary["facing_error"],
        "paw_slide": {c: [f["slide"], f["source_slide"]] for c, f in report.get("paw_slide", {}).items()},
        "planted_feet": sorted(report.get("planted_feet", {})),
        "hip_drop": float(report.get("planted_hip_drop", {}).get("max", 0.0)),
        "notes": list(report.get("notes", [])),
        "warnings": list(report.get("warnings", [])),
    }


def color_chain_bones(target: Any, report: dict[str, Any], worst_deg: float = 5.0) -> None:
    """Colour Bones by Error after a quadruped's or chain-described body's retarget: each driven
    bone of ``target`` by its mean error on the pose Blender plays (``report["bone_errors"]``: a
    chain bone's direction, the pelvis' orientation), green (exact) to red (``worst_deg`` or
    more), as a humanoid's bones are coloured. Bones no chain drives keep their colours."""
    for bone, error in report.get("bone_errors", {}).items():
        pb = target.pose.bones.get(bone)
        if pb is None:
            continue
        u = min(1.0, max(0.0, float(error) / worst_deg))
        colour = (u, 1.0 - u, 0.1)
        pb.color.palette = "CUSTOM"
        pb.color.custom.normal = colour
        pb.color.custom.select = tuple(min(1.0, c + 0.3) for c in colour)
        pb.color.custom.active = (1.0, 1.0, 1.0)
