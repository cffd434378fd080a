"""Measure: a retarget already saved in a .blend judged against its source clip (the ``measure``
command), on the pose Blender plays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bridge import compat
from ..bridge.clip_read import clip_from_action
from ..bridge.control_preview import control_rig_preview
from ..bridge.played_pose import driven_bones, played_placements, what_overrides
from ..bridge.session import fresh_session
from ..core.errors import MappingError
from ..core.mapping.bone_mapping import BoneMapping
from ..core.measure.figures import measure
from ..core.retarget.binding_cache import native_refusal
from ..core.retarget.geometric import bind, source_placements
from .rigs import pick_action, pick_armature, quadruped_input, rig_input


def measure_files(source_path: str, retargeted_path: str, *, clip: str | None = None, action: str | None = None,
                  target_armature: str | None = None, vmd_model: str | None = None, mapping: str | None = None,
                  source_mapping: str | None = None, root_motion: str = "HIPS") -> dict[str, Any]:
    """Measure a retarget already saved in a .blend against its source clip (docs/pipeline.md#measurement).

    The source clip is played at the retargeted action's frame rate; both rigs are auto-mapped,
    so the figures judge the result whoever produced it. A VMD source is played on ``vmd_model``
    (a PMX file) or the built-in standard MMD skeleton, as the retarget played it.

    Two quadrupeds (mapped by shape), or two bodies ``mapping`` (the target's) and
    ``source_mapping`` describe as chains, get the per-chain figures of a quadruped retarget
    (:func:`..core.measure.chains.measure_chains`); ``root_motion`` says where the retarget put
    the travel (the pelvis by default), which the travel figures judge."""
    import bpy

    from ..bridge.clip_read import action_fps
    from ..bridge.file_import import load_file
    from ..bridge.vmd_source import is_vmd, load_vmd

    fresh_session()
    result_file = load_file(retargeted_path)
    target = pick_armature(result_file.armatures, target_armature, Path(result_file.path).name)
    if action is not None:
        result_action = bpy.data.actions.get(action)
        if result_action is None:
            raise MappingError(f"{Path(retargeted_path).name}: no action called {action!r}")
    else:
        ad = target.animation_data
        result_action = ad.action if ad is not None and ad.action is not None else None
        if result_action is None:
            raise MappingError(f"{Path(retargeted_path).name}: armature {target.name!r} plays no action to measure")
    source_file = load_vmd(source_path, vmd_model) if is_vmd(source_path) else load_file(source_path)
    source = pick_armature(source_file.armatures, None, Path(source_file.path).name)
    source_action = pick_action(source_file, source, clip)
    rate = action_fps(result_action)
    tmap = BoneMapping.load(mapping) if mapping else None
    smap = BoneMapping.load(source_mapping) if source_mapping else None
    src_chains, tgt_chains = quadruped_input(source, smap), quadruped_input(target, tmap)
    if src_chains is not None and tgt_chains is not None:
        return _measure_chains(source, source_action, target, result_action, (src_chains, tgt_chains), rate, root_motion)
    src_in, _ = rig_input(source, smap)
    tgt_in, _ = rig_input(target, tmap)
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
    # A control rig's deform bones follow its controls by design: what overrides keys on them is
    # not a warning there (what plays is measured all the same).
    rig = control_rig_preview(target, "fk")
    hidden = what_overrides(target, result_action, driven_bones(binding), constraints=rig is None) + notes
    if hidden:
        report["warnings"] = hidden
    if rig is not None:
        report["control_rig"] = {"kind": rig["kind"]}
    report["clip"] = {"source": source_action.name, "retargeted": result_action.name, "fps": rate, "frames": src_clip.frame_count}
    return report



def _measure_chains(source: Any, source_action: Any, target: Any, result_action: Any, chains: Any, rate: float, root_motion: str) -> dict[str, Any]:
    """The per-chain figures of ``result_action`` on ``target`` against ``source_action`` on
    ``source``, on every frame of the source clip at ``rate``, as Blender plays them."""
    import numpy as np

    from ..core.measure.chains import measure_chains
    from ..core.retarget.geometric import RetargetOptions
    from ..core.retarget.quadruped import pose_of
    from .retarget_quadruped import quadruped_binding

    (src_in, src_map), (tgt_in, tgt_map) = chains
    binding = quadruped_binding((src_in, src_map), (tgt_in, tgt_map), RetargetOptions(root_motion=root_motion))
    src_clip = clip_from_action(source, source_action).resample(rate)
    ad = target.animation_data
    if ad is None or ad.action != result_action:
        compat.assign_action(target, result_action, compat.action_slot_for(result_action, target))
    played, notes = played_placements(target, result_action, src_clip.frame_numbers(rate), tgt_in.skeleton, fps=rate)
    report = measure_chains(binding, pose_of(src_in.skeleton, src_clip), played, np.asarray(src_clip.times))
    report["measured_frames"] = int(src_clip.frame_count)
    driven = [n for n, d in zip(tgt_in.skeleton.names, binding.driven, strict=True) if d > 0]
    hidden = what_overrides(target, result_action, driven) + notes + list(binding.warnings)
    if hidden:
        report["warnings"] = hidden
    report["options"] = {"root_motion": root_motion}
    report["clip"] = {"source": source_action.name, "retargeted": result_action.name, "fps": rate, "frames": src_clip.frame_count}
    return report
