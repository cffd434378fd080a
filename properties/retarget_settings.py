"""Scene settings of the Retarget workflow: ``scene.marionette``.

The mapping shown in the sidebar is a list of rows, one per slot (a humanoid's, or a quadruped's
chain bones), holding the source and target bone, the mapper's confidence and its reason; a body
described as chains (a mapping file's ``body``) is kept beside them, per side, as JSON. Rows are what the user edits; the retarget
turns them back into two :class:`~marionette.core.mapping.bone_mapping.BoneMapping` objects.
"""

from __future__ import annotations

import json
from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core.mapping.bone_mapping import BoneMapping, MappedBone
from ..core.mapping.humanoid import MINIMUM_SLOTS
from ..core.mapping.quadruped_profile import QUADRUPED_MINIMUM, is_quadruped_mapping
from ..core.retarget.geometric import RetargetOptions
from .export_settings import MarionetteExportSettings

ROOT_MOTION_ITEMS = [
    ("HIPS", "On the Hips", "Keep the clip's travel on the hips bone"),
    ("ROOT_BONE", "On the Root Bone", "Move the horizontal travel to the bone above the hips"),
    ("OBJECT", "On the Object", "Move the horizontal travel to the armature object's location"),
    ("IN_PLACE", "In Place", "Drop the horizontal travel; keep the vertical motion"),
]

CONTROL_RIG_ITEMS = [
    ("FK", "FK", "Key the FK controls of a control rig (Rigify: IK/FK switches set to FK)"),
    ("IK", "IK", "Key the IK controls of a control rig (Rigify: IK/FK switches set to IK)"),
    ("OFF", "Off", "Key the mapped bones themselves, even when constraints override them"),
]

METHOD_ITEMS = [
    ("GEOMETRIC", "Geometric Frames", "Rebuild the bone's frame from joint positions: right for any two rigs"),
    ("REST_SPACE", "Rest Space", "Carry the bone's turn from its rest: rigs of one family (same joint axes)"),
    ("LOCAL_CURL", "Local Curl", "Fingers only: keep each segment's curl relative to the segment above it"),
]


def _is_armature(_self: Any, obj: bpy.types.Object) -> bool:
    return obj.type == "ARMATURE"


class MarionetteMappingRow(bpy.types.PropertyGroup):
    slot: StringProperty(name="Slot")  # type: ignore[valid-type]
    source_bone: StringProperty(name="Source Bone")  # type: ignore[valid-type]
    target_bone: StringProperty(name="Target Bone")  # type: ignore[valid-type]
    source_confidence: FloatProperty(name="Source Confidence", min=0.0, max=1.0)  # type: ignore[valid-type]
    target_confidence: FloatProperty(name="Target Confidence", min=0.0, max=1.0)  # type: ignore[valid-type]
    reason: StringProperty(name="Reason")  # type: ignore[valid-type]
    conflict: StringProperty(name="Conflict")  # type: ignore[valid-type]
    method: EnumProperty(name="Method", items=METHOD_ITEMS, default="GEOMETRIC")  # type: ignore[valid-type]


class MarionetteSettings(bpy.types.PropertyGroup):
    source: PointerProperty(  # type: ignore[valid-type]
        name="Source", type=bpy.types.Object, poll=_is_armature, description="Armature that plays the clip"
    )
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", type=bpy.types.Object, poll=_is_armature, description="Armature that receives the clip"
    )
    action: PointerProperty(  # type: ignore[valid-type]
        name="Clip", type=bpy.types.Action, description="Clip to retarget (empty: the source's active action)"
    )
    root_motion: EnumProperty(name="Root Motion", items=ROOT_MOTION_ITEMS, default="HIPS")  # type: ignore[valid-type]
    control_rig: EnumProperty(  # type: ignore[valid-type]
        name="Control Rig",
        items=CONTROL_RIG_ITEMS,
        default="FK",
        description="What a target whose mapped bones follow controls (constraints, drivers) is keyed on: "
        "FK keys the FK controls (Rigify: IK/FK switches set to FK), IK the IK controls, "
        "Off the mapped bones themselves even when constraints override them",
    )
    auto_scale: BoolProperty(  # type: ignore[valid-type]
        name="Scale by Hip Height",
        default=True,
        description="Scale the travel by target hip height over source hip height, both measured from the feet",
    )
    horizontal_scale: FloatProperty(name="Horizontal Scale", default=1.0, min=0.0001, soft_max=100.0)  # type: ignore[valid-type]
    vertical_scale: FloatProperty(name="Vertical Scale", default=1.0, min=0.0001, soft_max=100.0)  # type: ignore[valid-type]
    keep_frames: BoolProperty(  # type: ignore[valid-type]
        name="Keep Frame Numbers",
        default=False,
        description="Key the source's frame numbers as they are instead of keeping its timing at the scene's frame rate",
    )
    fingers: BoolProperty(name="Fingers", default=True, description="Retarget fingers when both rigs have them")  # type: ignore[valid-type]
    plant_feet: BoolProperty(  # type: ignore[valid-type]
        name="Plant Feet",
        default=True,
        description="Hold each foot still where the source foot is planted, bending the legs to reach. "
        "Off: every bone's direction is carried exactly, and feet slide on legs proportioned unlike the source's",
    )
    match_rest: BoolProperty(  # type: ignore[valid-type]
        name="Match Rest Poses",
        default=False,
        description="Rest-space rows: turn the target's rest onto the source's bone directions (an A-pose clip onto a T-pose rig of one family)",
    )
    replace_action: BoolProperty(  # type: ignore[valid-type]
        name="Replace Existing Action",
        default=False,
        description="Give the new action the clip's name even if an action of that name exists (it is replaced)",
    )
    push_to_nla: BoolProperty(  # type: ignore[valid-type]
        name="Push to NLA",
        default=False,
        description="Put each new action on the target's NLA, on a muted track of its own stacked above the "
        "existing tracks (unmute a track to review its clip), and keep the action the target plays now",
    )
    color_bones: BoolProperty(  # type: ignore[valid-type]
        name="Colour Bones by Error",
        default=False,
        description="After a retarget, colour the target's bones from green (exact) to red (5 degrees or more off)",
    )
    mapping: CollectionProperty(type=MarionetteMappingRow)  # type: ignore[valid-type]
    mapping_index: IntProperty(name="Active Row", default=0)  # type: ignore[valid-type]
    mapping_conflicts: StringProperty(  # type: ignore[valid-type]
        name="Mapping Conflicts", description="Conflicts found while mapping that name no single slot, one per line"
    )
    mapping_pair: StringProperty(name="Mapped Pair", description="Source and target the rows were made for")  # type: ignore[valid-type]
    source_body: StringProperty(  # type: ignore[valid-type]
        name="Source Body", description="The source's body described as chains (JSON; empty: mapped by slots)"
    )
    target_body: StringProperty(  # type: ignore[valid-type]
        name="Target Body", description="The target's body described as chains (JSON; empty: mapped by slots)"
    )
    last_report: StringProperty(name="Last Report", description="Summary of the last retarget (JSON)")  # type: ignore[valid-type]
    export: PointerProperty(type=MarionetteExportSettings)  # type: ignore[valid-type]


def pair_key(settings: MarionetteSettings) -> str:
    s, t = settings.source, settings.target
    return f"{s.name if s else ''}\n{t.name if t else ''}"  # Blender strings end at NUL


def fill_rows(settings: MarionetteSettings, source: BoneMapping, target: BoneMapping) -> None:
    """Rows for every slot either rig fills, conflicts attached to the rows they name; a slot keeps
    the method chosen for it before."""
    methods = {row.slot: row.method for row in settings.mapping}
    settings.mapping.clear()
    conflicts = [("source", c) for c in source.conflicts] + [("target", c) for c in target.conflicts]
    slots = [s for s in source.slots] + [s for s in target.slots if s not in source.slots]
    # A slot the retarget needs that either rig left empty gets its row, to be filled by hand: a
    # quadruped's (its chains' first bones) or a humanoid's; a body described as chains has its
    # chains beside the rows, not in them.
    described = source.body is not None or target.body is not None
    needed = () if described else QUADRUPED_MINIMUM if is_quadruped_mapping(slots) else MINIMUM_SLOTS
    slots += [s for s in needed if s not in slots]
    for slot in slots:
        row = settings.mapping.add()
        row.slot = slot
        sm, tm = source.slots.get(slot), target.slots.get(slot)
        row.source_bone = sm.bone if sm else ""
        row.target_bone = tm.bone if tm else ""
        row.source_confidence = sm.confidence if sm else 0.0
        row.target_confidence = tm.confidence if tm else 0.0
        row.reason = " | ".join(x for x in (sm.reason if sm else "", tm.reason if tm else "") if x)
        row.conflict = "; ".join(f"{side}: {c}" for side, c in conflicts if slot in c)
        row.method = target.methods.get(slot) or methods.get(slot, "GEOMETRIC")
    settings.mapping_conflicts = "\n".join(
        f"{side}: {c}" for side, c in conflicts if not any(row.slot in c for row in settings.mapping)
    )
    settings.source_body = json.dumps(source.body) if source.body is not None else ""
    settings.target_body = json.dumps(target.body) if target.body is not None else ""
    settings.mapping_pair = pair_key(settings)
    settings.mapping_index = 0


def mapping_from_rows(settings: MarionetteSettings, side: str) -> BoneMapping | None:
    """One side's mapping (``"SOURCE"`` or ``"TARGET"``) as the rows describe it, or ``None`` when
    there are no rows for this pair. A bone given to two slots is refused, naming both. A side
    whose body is described as chains (loaded from a mapping file) keeps its description."""
    body = settings.source_body if side == "SOURCE" else settings.target_body
    if settings.mapping_pair != pair_key(settings) or not (len(settings.mapping) or settings.source_body or settings.target_body):
        return None
    slots: dict[str, MappedBone] = {}
    for row in settings.mapping:
        bone = row.source_bone if side == "SOURCE" else row.target_bone
        if bone:
            conf = row.source_confidence if side == "SOURCE" else row.target_confidence
            slots[row.slot] = MappedBone(bone, conf, row.reason or "set by hand")
    # The method column belongs with the target: it says how each of its slots is driven.
    return BoneMapping(slots, methods=methods_from_rows(settings) if side == "TARGET" else None, body=json.loads(body) if body else None)


def mappings_from_rows(settings: MarionetteSettings) -> tuple[BoneMapping, BoneMapping] | None:
    """Both mappings the rows describe, or ``None`` when there are no rows for this pair."""
    src = mapping_from_rows(settings, "SOURCE")
    tgt = mapping_from_rows(settings, "TARGET")
    return None if src is None or tgt is None else (src, tgt)


def methods_from_rows(settings: MarionetteSettings) -> dict[str, str]:
    """Slot -> retarget method for the rows that do not use geometric frames."""
    return {row.slot: row.method for row in settings.mapping if row.method != "GEOMETRIC"}


def clip_of(settings: Any) -> Any:
    """The clip to retarget: the chosen one, else the source's active action."""
    if settings.action is not None:
        return settings.action
    ad = settings.source.animation_data if settings.source else None
    return ad.action if ad is not None else None


def options_of(settings: Any) -> RetargetOptions:
    """The retarget options the settings choose (Retarget Clip and Batch Bake)."""
    return RetargetOptions(
        root_motion=settings.root_motion,
        horizontal_scale=None if settings.auto_scale else settings.horizontal_scale,
        vertical_scale=None if settings.auto_scale else settings.vertical_scale,
        fingers=settings.fingers,
        plant_feet=settings.plant_feet,
    )


classes = (MarionetteMappingRow, MarionetteSettings)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()
    bpy.types.Scene.marionette = PointerProperty(type=MarionetteSettings)


def unregister() -> None:
    del bpy.types.Scene.marionette
    _unregister()
