"""The canonical humanoid profile: the slots a mapping fills, and how they hang together.

Slot names are fixed strings used in mappings, presets and reports. Sides are suffixed ``.L`` /
``.R`` and mean the *character's* left and right (decided from positions, not from letters in
bone names).
"""

from __future__ import annotations

AXIAL = ("hips", "spine", "chest", "upper_chest", "neck", "head")
LIMB_PARTS = ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toes")
FINGERS = ("thumb", "index", "middle", "ring", "little")
TWIST_PARTS = ("upper_arm_twist", "forearm_twist", "thigh_twist", "shin_twist")
SIDES = ("L", "R")


def sided(part: str, side: str) -> str:
    return f"{part}.{side}"


def finger_slot(finger: str, segment: int, side: str) -> str:
    return f"{finger}_{segment}.{side}"


LIMB_SLOTS = tuple(sided(p, s) for s in SIDES for p in LIMB_PARTS)
FINGER_SLOTS = tuple(finger_slot(f, k, s) for s in SIDES for f in FINGERS for k in (1, 2, 3))
TWIST_SLOTS = tuple(sided(p, s) for s in SIDES for p in TWIST_PARTS)
EXTRA_SLOTS = ("eye.L", "eye.R", "jaw")

#: Every slot of the profile, in parents-first order.
SLOTS: tuple[str, ...] = AXIAL + LIMB_SLOTS + FINGER_SLOTS + TWIST_SLOTS + EXTRA_SLOTS

#: Slots a rig must supply to be retargeted at all (docs/mapping.md#conflicts-and-refusal). The spine chain between hips and
#: head may be one bone or several; ``spine`` itself stands for "at least one bone between hips
#: and neck or head".
MINIMUM_SLOTS: tuple[str, ...] = (
    "hips",
    "spine",
    "head",
    *(sided(p, s) for s in SIDES for p in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot")),
)

#: Optional slots: a rig without them still retargets.
OPTIONAL_SLOTS: tuple[str, ...] = tuple(s for s in SLOTS if s not in MINIMUM_SLOTS)

#: The 20 slots that go through the geometric frame map (docs/pipeline.md#geometric-frames).
FRAME_SLOTS: tuple[str, ...] = (
    "hips",
    "spine",
    "chest",
    "upper_chest",
    "neck",
    "head",
    *(sided(p, s) for s in SIDES for p in ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot")),
)

#: Anatomical parent of each slot (the nearest slot above it that a full rig would have).
SLOT_PARENT: dict[str, str | None] = {
    "hips": None,
    "spine": "hips",
    "chest": "spine",
    "upper_chest": "chest",
    "neck": "upper_chest",
    "head": "neck",
    "eye.L": "head",
    "eye.R": "head",
    "jaw": "head",
}
for _s in SIDES:
    SLOT_PARENT.update(
        {
            sided("shoulder", _s): "upper_chest",
            sided("upper_arm", _s): sided("shoulder", _s),
            sided("forearm", _s): sided("upper_arm", _s),
            sided("hand", _s): sided("forearm", _s),
            sided("thigh", _s): "hips",
            sided("shin", _s): sided("thigh", _s),
            sided("foot", _s): sided("shin", _s),
            sided("toes", _s): sided("foot", _s),
            sided("upper_arm_twist", _s): sided("upper_arm", _s),
            sided("forearm_twist", _s): sided("forearm", _s),
            sided("thigh_twist", _s): sided("thigh", _s),
            sided("shin_twist", _s): sided("shin", _s),
        }
    )
    for _f in FINGERS:
        SLOT_PARENT[finger_slot(_f, 1, _s)] = sided("hand", _s)
        SLOT_PARENT[finger_slot(_f, 2, _s)] = finger_slot(_f, 1, _s)
        SLOT_PARENT[finger_slot(_f, 3, _s)] = finger_slot(_f, 2, _s)


def mirror_slot(slot: str) -> str:
    """The same slot on the other side (``upper_arm.L`` -> ``upper_arm.R``); axial slots map to
    themselves."""
    if slot.endswith(".L"):
        return slot[:-2] + ".R"
    if slot.endswith(".R"):
        return slot[:-2] + ".L"
    return slot
