"""Reallusion Character Creator's and iClone's bone names (``CC_Base_``)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

CHARACTER_CREATOR = NameConvention(
    key="character_creator",
    title="Reallusion Character Creator / iClone (CC_Base_)",
    slots={
        # CC_Base_Hip carries CC_Base_Pelvis (the legs) and CC_Base_Waist (the spine).
        "hips": ("CC_Base_Hip",),
        "spine": ("CC_Base_Waist",),
        "chest": ("CC_Base_Spine01",),
        "upper_chest": ("CC_Base_Spine02",),
        "neck": ("CC_Base_NeckTwist01",),
        "head": ("CC_Base_Head",),
        "jaw": ("CC_Base_JawRoot",),
        "eye": ("CC_Base_{S}_Eye",),
        "shoulder": ("CC_Base_{S}_Clavicle",),
        "upper_arm": ("CC_Base_{S}_Upperarm",),
        "forearm": ("CC_Base_{S}_Forearm",),
        "hand": ("CC_Base_{S}_Hand",),
        "thigh": ("CC_Base_{S}_Thigh",),
        "shin": ("CC_Base_{S}_Calf",),
        "foot": ("CC_Base_{S}_Foot",),
        "toes": ("CC_Base_{S}_ToeBase",),
        "upper_arm_twist": ("CC_Base_{S}_UpperarmTwist01",),
        "forearm_twist": ("CC_Base_{S}_ForearmTwist01",),
        "thigh_twist": ("CC_Base_{S}_ThighTwist01",),
        "shin_twist": ("CC_Base_{S}_CalfTwist01",),
    },
    fingers=FingerNames(
        "CC_Base_{S}_{f}{n}",
        {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"},
    ),
    unmapped=(
        "CC_Base_BoneRoot",
        "CC_Base_Pelvis",
        "CC_Base_NeckTwist02",
        "CC_Base_{S}_UpperarmTwist02",
        "CC_Base_{S}_ForearmTwist02",
        "CC_Base_{S}_ThighTwist02",
        "CC_Base_{S}_CalfTwist02",
    ),
    presets=(("character_creator", ""),),
)
