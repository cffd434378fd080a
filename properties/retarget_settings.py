"""Scene settings of the Retarget workflow: ``scene.marionette``.

The mapping shown in the sidebar is a list of rows, one per slot (a humanoid's, or a quadruped's
chain bones), holding the source and target bone, the mapper's confidence and its reason. A body
no profile fits is described beside them as chains (a mapping file's ``body``,
docs/pipeline.md#other-bodies): one chain row per chain, named, with its start and end bone on
each side and whether it plants on the ground, and per side the root bone and the head chain (or,
without one, a forward axis). Rows are what the user edits; the retarget turns them back into two
:class:`~marionette.core.mapping.bone_mapping.BoneMapping` objects.
"""

from __future__ import annotations

from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core.errors import MappingError
from ..core.mapping.body_description import checked_body
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


class MarionetteChainRow(bpy.types.PropertyGroup):
    """One chain of a body described as chains: paired between the two rigs by its name."""

    name: StringProperty(name="Chain", description="The chain's name: the two rigs' chains of one name drive each other")  # type: ignore[valid-type]
    source_start: StringProperty(name="Source Start", description="The source's first bone of the chain (nearest the body)")  # type: ignore[valid-type]
    source_end: StringProperty(name="Source End", description="The source's last bone of the chain (at or below the start)")  # type: ignore[valid-type]
    target_start: StringProperty(name="Target Start", description="The target's first bone of the chain (nearest the body)")  # type: ignore[valid-type]
    target_end: StringProperty(name="Target End", description="The target's last bone of the chain (at or below the start)")  # type: ignore[valid-type]
    plants: BoolProperty(  # type: ignore[valid-type]
        name="Plants", default=False, description="The chain's end stands on the ground (a leg), on both rigs: it tells up and the pelvis height"
    )


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
    chains: CollectionProperty(type=MarionetteChainRow)  # type: ignore[valid-type]
    chain_index: IntProperty(name="Active Chain", default=0)  # type: ignore[valid-type]
    source_root: StringProperty(name="Source Root", description="The source bone its body described as chains hangs from")  # type: ignore[valid-type]
    target_root: StringProperty(name="Target Root", description="The target bone its body described as chains hangs from")  # type: ignore[valid-type]
    source_head: StringProperty(name="Source Head", description="The source's chain forward runs to from the root (empty: the forward axis)")  # type: ignore[valid-type]
    target_head: StringProperty(name="Target Head", description="The target's chain forward runs to from the root (empty: the forward axis)")  # type: ignore[valid-type]
    source_forward: FloatVectorProperty(  # type: ignore[valid-type]
        name="Source Forward", size=3, default=(0.0, 0.0, 0.0), description="The source's forward axis in armature space, without a head chain"
    )
    target_forward: FloatVectorProperty(  # type: ignore[valid-type]
        name="Target Forward", size=3, default=(0.0, 0.0, 0.0), description="The target's forward axis in armature space, without a head chain"
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
    fill_chain_rows(settings, source.body, target.body)
    settings.mapping_pair = pair_key(settings)
    settings.mapping_index = 0


def mapping_from_rows(settings: MarionetteSettings, side: str) -> BoneMapping | None:
    """One side's mapping (``"SOURCE"`` or ``"TARGET"``) as the rows describe it, or ``None`` when
    there are no rows for this pair. A bone given to two slots is refused, naming both. A side
    whose body is described by the chain rows carries that description (:func:`body_from_rows`)."""
    if settings.mapping_pair != pair_key(settings) or not (len(settings.mapping) or any(chain_bones(row) for row in settings.chains)):
        return None
    slots: dict[str, MappedBone] = {}
    for row in settings.mapping:
        bone = row.source_bone if side == "SOURCE" else row.target_bone
        if bone:
            conf = row.source_confidence if side == "SOURCE" else row.target_confidence
            slots[row.slot] = MappedBone(bone, conf, row.reason or "set by hand")
    # The method column belongs with the target: it says how each of its slots is driven.
    return BoneMapping(slots, methods=methods_from_rows(settings) if side == "TARGET" else None, body=body_from_rows(settings, side))


def chain_bones(row: MarionetteChainRow) -> list[str]:
    """The bones a chain row names, both sides."""
    return [b for b in (row.source_start, row.source_end, row.target_start, row.target_end) if b]


def fill_chain_rows(settings: MarionetteSettings, source: dict[str, Any] | None, target: dict[str, Any] | None) -> None:
    """The chain rows for both sides' bodies described as chains (``None``: that side is not): a
    row per chain either names, source's first; a chain plants when either side says it does."""
    settings.chains.clear()
    bodies = {"source": source, "target": target}
    names = list(dict.fromkeys([*(source or {}).get("chains", {}), *(target or {}).get("chains", {})]))
    for name in names:
        row = settings.chains.add()
        row.name = name
        for side, body in bodies.items():
            chain = (body or {}).get("chains", {}).get(name)
            setattr(row, f"{side}_start", chain["start"] if chain else "")
            setattr(row, f"{side}_end", chain["end"] if chain else "")
            row.plants = row.plants or bool(chain and chain["plants"])
    for side, body in bodies.items():
        setattr(settings, f"{side}_root", (body or {}).get("root") or "")
        setattr(settings, f"{side}_head", (body or {}).get("head") or "")
        setattr(settings, f"{side}_forward", (body or {}).get("forward") or (0.0, 0.0, 0.0))
    settings.chain_index = 0


def body_from_rows(settings: MarionetteSettings, side: str) -> dict[str, Any] | None:
    """One side's body as the chain rows describe it (the mapping file's ``body``), or ``None``
    when no chain row names a bone of that side. Rows that cannot make a body (a chain without a
    name or named twice, a start without an end, no root) are refused naming the row."""
    key = side.lower()
    chains: dict[str, dict[str, Any]] = {}
    for k, row in enumerate(settings.chains):
        start, end = getattr(row, f"{key}_start"), getattr(row, f"{key}_end")
        if not (start or end):
            continue  # a chain only the other rig has
        if not row.name:
            raise MappingError(f"chain row {k + 1} has no name: name it (the two rigs' chains of one name drive each other)")
        if row.name in chains:
            raise MappingError(f"two chain rows are called {row.name!r}: give each chain its own name")
        if not (start and end):
            raise MappingError(f"chain {row.name!r}: pick both its {key} start and end bone (one bone: the same in both)")
        chains[row.name] = {"start": start, "end": end, "plants": bool(row.plants)}
    if not chains:
        return None
    root = getattr(settings, f"{key}_root")
    if not root:
        raise MappingError(f"the {key}'s chains need its root: pick the bone its body hangs from ({side.title()} Root)")
    head = getattr(settings, f"{key}_head") or None
    forward = [float(v) for v in getattr(settings, f"{key}_forward")]
    try:
        return checked_body({"root": root, "chains": chains, "head": head, "forward": forward if any(forward) and head is None else None})
    except MappingError as exc:
        raise MappingError(f"the {key}'s chains: {exc}") from None


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


classes = (MarionetteMappingRow, MarionetteChainRow, MarionetteSettings)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()
    bpy.types.Scene.marionette = PointerProperty(type=MarionetteSettings)


def unregister() -> None:
    del bpy.types.Scene.marionette
    _unregister()
