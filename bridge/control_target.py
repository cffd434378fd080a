"""A retarget onto a control rig (docs/control_rigs.md): the plan that says which controls are keyed
(:func:`control_target`), the retarget's result turned into those controls' keys and checked on
what Blender plays (:func:`write_controls`).

A target is a control rig when Blender does not play keys on its mapped bones as they are:
constraints or drivers on them or above them. A Rigify generated rig gets the Rigify plan (its
slots mapped onto the ``ORG-`` bones); any other gets the plan found by following the constraints,
or a refusal naming the bones it cannot key back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.control_rig.found import found_plan
from ..core.control_rig.graph import RigGraph, Unmodeled
from ..core.control_rig.plan import ControlPlan, control_clip, wanted_placements
from ..core.control_rig.rigify import is_rigify, org_bone, rigify_plan
from ..core.errors import RigError
from ..core.mapping.bone_mapping import BoneMapping, MappedBone
from ..core.mapping.humanoid import SLOT_PARENT
from ..core.rig.clip import Clip
from ..core.rig.skeleton import Skeleton
from .action_write import write_action
from .control_rig import bone_properties, key_switches, read_graph
from .evaluated_pose import evaluated_pose_matrices
from .played_pose import overridden_bones

#: ``--control-rig`` / the sidebar's Control Rig: key FK controls (IK/FK switches to FK), IK
#: controls (switches to IK), or the mapped bones themselves as on any armature.
CONTROL_RIG_MODES = ("fk", "ik", "off")

#: What Blender plays must match the solve within these (bone direction, head position as a
#: fraction of the rig's height), on sampled frames, or nothing is written.
CHECK_DEGREES = 2.0
CHECK_POSITION = 0.01
CHECK_FRAMES = 4


@dataclass(frozen=True)
class ControlTarget:
    kind: str  # "rigify" or "found"
    plan: ControlPlan
    graph: RigGraph
    mapping: BoneMapping  # the slots, onto the bones the plan reads
    anchors: dict[str, str]  # mapped bone -> the bone of its body parent (parents first)
    #: Poses Blender played at the frames checked (frame numbers -> ``(T, B, 4, 4)`` in the
    #: target skeleton's order), for the quality report that checks the same frames.
    seen: dict[tuple[float, ...], Any] = field(default_factory=dict, compare=False)

    def describe(self, travel_on_root: bool = False) -> dict[str, Any]:
        """What the report and the sidebar say of it (``travel_on_root``: the root control
        carries root motion, so it is keyed too)."""
        return {
            "kind": self.kind,
            "plan": self.plan.name,
            "controls": list(self.plan.keyed(travel_on_root)),
            "switches": [{"bone": b, "property": p, "value": v} for b, p, v in self.plan.switches],
        }


def _onto(mapping: BoneMapping, rename: Any, keep: set[str], why: str) -> BoneMapping:
    slots = {}
    for slot, mb in mapping.slots.items():
        bone = rename(mb.bone)
        if bone is not None and bone in keep and bone not in {m.bone for m in slots.values()}:
            slots[slot] = MappedBone(bone, mb.confidence, f"{mb.reason}; {why}")
    return BoneMapping(slots, mapping.conflicts, mapping.convention, mapping.refusal, mapping.methods)


def _anchors(mapping: BoneMapping, graph: RigGraph, reference: tuple[str, ...]) -> dict[str, str]:
    """Each bone the plan reads -> the bone it hangs from on the body: its armature parent when
    the plan reads that too, else the bone of its slot's parent; ordered so anchors come first."""
    bones = mapping.bones()
    slot_of = {b: s for s, b in bones.items()}
    read = set(reference)
    out = {}
    for b in reference:
        p = int(graph.parents[graph.bone(b)])
        if p >= 0 and graph.names[p] in read:
            out[b] = graph.names[p]
            continue
        parent = SLOT_PARENT.get(slot_of[b]) if b in slot_of else None
        while parent is not None and parent not in bones:
            parent = SLOT_PARENT.get(parent)
        if parent is not None:
            out[b] = bones[parent]

    def depth(b: str) -> int:
        k = 0
        while b in out and k <= len(out):
            b, k = out[b], k + 1
        return k

    return {b: out[b] for b in sorted(out, key=depth)}


def control_target(obj: Any, mapping: BoneMapping, mode: str = "fk") -> ControlTarget | None:
    """The control-rig plan for target ``obj`` with its (auto or given) ``mapping``, or ``None``
    when its mapped bones play their own keys (or ``mode`` is ``"off"``)."""
    if mode not in CONTROL_RIG_MODES:
        raise RigError(f"control rig mode must be one of {', '.join(CONTROL_RIG_MODES)}, got {mode!r}")
    if mode == "off":
        return None
    names = [b.name for b in obj.data.bones]
    props = bone_properties(obj)
    if is_rigify(names, props):
        plan = rigify_plan(names, props, mode)
        graph = read_graph(obj, plan.switches)
        reading = set(plan.played_bones)
        onto = _onto(mapping, lambda b: org_bone(b, reading), reading, "the ORG bone its controls move")
        return ControlTarget("rigify", plan, graph, onto, _anchors(onto, graph, plan.played_bones))
    bones = list(mapping.bones().values())
    if not overridden_bones(obj, bones):
        return None
    graph = read_graph(obj)
    plan = found_plan(graph, bones + _between(graph, bones))
    return ControlTarget("found", plan, graph, mapping, _anchors(mapping, graph, plan.reference_bones))


def _between(graph: RigGraph, bones: list[str]) -> list[str]:
    """Bones on the armature's path from a mapped bone up to the nearest mapped bone above it (a
    neck's second bone, a spine bone no slot takes): the retarget places them too."""
    mapped = {graph.bone(b) for b in bones}
    out: list[str] = []
    for b in bones:
        path, p = [], int(graph.parents[graph.bone(b)])
        while p >= 0 and p not in mapped:
            path.append(p)
            p = int(graph.parents[p])
        if p >= 0:  # a mapped bone above: everything on the way is in between
            out += [graph.names[k] for k in reversed(path) if graph.names[k] not in out]
    return out


def write_controls(
    target: Any, ct: ControlTarget, skeleton: Skeleton, clip: Clip, root_motion: Any, name: str, frames: Any, rate: float,
    replace: bool, travel_on_root: bool, check_at: Any = None,
) -> Any:
    """Key the plan's controls (and switches) from the retargeted ``clip`` (local transforms of
    every bone of ``skeleton``, the target skeleton the retarget ran on; bones it does not drive at rest) into a
    new action on ``target``, the plan's root control carrying ``root_motion`` ``(F, 3)`` when
    ``travel_on_root``; then check on sampled frames that Blender plays the bones the plan reads
    where the retarget put them. On failure the action is removed, the target's previous action
    given back, and a :class:`RigError` names the bones that miss. ``check_at`` (frame numbers
    among ``frames``) are the frames checked, their evaluated pose kept in ``ct.seen`` for the
    quality report that checks the same frames; by default a few evenly spread."""
    placements = wanted_placements(ct.plan, ct.graph, skeleton, clip, ct.anchors)
    try:
        keys = control_clip(ct.plan, ct.graph, placements, clip, np.asarray(root_motion, dtype=np.float64) if travel_on_root else None)
    except Unmodeled as exc:
        raise RigError(
            f"cannot key the controls of {target.name!r}: bone {exc}; nothing was written "
            "(key the mapped bones instead with --control-rig off / Control Rig: Off)"
        ) from exc
    ad = target.animation_data
    previous = (ad.action, getattr(ad, "action_slot", None)) if ad is not None else (None, None)
    action = write_action(target, keys, name, frames=frames, replace=replace, fps=rate, exact=True)
    try:
        key_switches(target, action, ct.plan.switches, frames)
        _check(target, ct, placements, skeleton, frames, check_at)
    except Exception:
        from . import compat

        compat.assign_action(target, previous[0], previous[1])
        import bpy

        bpy.data.actions.remove(action)
        raise
    return action


def predicted_placements(ct: ControlTarget, skeleton: Skeleton, clip: Any) -> tuple[Any, list[int], dict[tuple[float, ...], Any]]:
    """What the solve makes Blender play for ``clip`` (the retargeted clip, or some of its
    frames): placements ``(T, B, 4, 4)`` in ``skeleton``'s order (the plan's bones as it plays
    them, the others as the retarget left them) and the rows of the plan's bones."""
    world = skeleton.forward_kinematics(clip.rotations, clip.translations, clip.scales)
    rows = []
    for bone, m in wanted_placements(ct.plan, ct.graph, skeleton, clip, ct.anchors).items():
        world[:, skeleton.index(bone)] = m
        rows.append(skeleton.index(bone))
    return world, rows, ct.seen


def _check(target: Any, ct: ControlTarget, placements: dict[str, Any], skeleton: Skeleton, frames: Any, check_at: Any = None) -> None:
    f = np.asarray(frames, dtype=np.float64)
    bones = list(ct.plan.played_bones)
    if check_at is None:
        check_at = f[np.unique(np.linspace(0, f.size - 1, min(CHECK_FRAMES, f.size)).astype(int))]
    at = np.asarray(check_at, dtype=np.float64)
    picks = np.searchsorted(f, at)
    whole = evaluated_pose_matrices(target, at, skeleton)
    ct.seen[tuple(at.tolist())] = whole
    seen = whole[:, [skeleton.index(b) for b in bones]]
    wanted = np.stack([placements[b][picks] for b in bones], axis=1)
    # Directions (the bones' Y axes): a rig may spread twist over its bones by design (Rigify's
    # first finger segments take their roll from the palm).
    ys, yw = _unit(seen)[..., :, 1], _unit(wanted)[..., :, 1]
    angle = np.degrees(np.arccos(np.clip(np.einsum("fbi,fbi->fb", ys, yw), -1.0, 1.0))).max(axis=0)
    height = max(float(np.ptp(skeleton.rest_placements()[:, :3, 3], axis=0).max()), 1e-9)
    off = (np.linalg.norm(seen[..., :3, 3] - wanted[..., :3, 3], axis=-1) / height).max(axis=0)
    bad = [k for k in range(len(bones)) if angle[k] > CHECK_DEGREES or off[k] > CHECK_POSITION]
    if bad:
        listed = ", ".join(f"{bones[k]!r} ({angle[k]:.1f} deg, {100 * off[k]:.1f} % of the rig's height)" for k in bad[:6])
        more = f" and {len(bad) - 6} more" if len(bad) > 6 else ""
        raise RigError(
            f"the controls keyed on {target.name!r} ({ct.plan.name}) do not play the retarget: {listed}{more} away from it; "
            "nothing was written (key the mapped bones instead with --control-rig off / Control Rig: Off)"
        )


def _unit(m: Any) -> Any:
    r = np.asarray(m)[..., :3, :3]
    return r / np.linalg.norm(r, axis=-2, keepdims=True)
