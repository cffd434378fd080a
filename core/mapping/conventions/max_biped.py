"""3ds Max Biped's bone names (``Bip01 ...``; ``Bip001`` reads the same)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

MAX_BIPED = NameConvention(
    key="3dsmax_biped",
    title="3ds Max Biped",
    slots={
        "hips": ("Bip01 Pelvis",),
        "spine": ("Bip01 Spine",),
        "chest": ("Bip01 Spine1",),
        "upper_chest": ("Bip01 Spine2",),
        "neck": ("Bip01 Neck",),
        "head": ("Bip01 Head",),
        "shoulder": ("Bip01 {S} Clavicle",),
        "upper_arm": ("Bip01 {S} UpperArm",),
        "forearm": ("Bip01 {S} Forearm",),
        "hand": ("Bip01 {S} Hand",),
        "thigh": ("Bip01 {S} Thigh",),
        "shin": ("Bip01 {S} Calf",),
        "foot": ("Bip01 {S} Foot",),
        "toes": ("Bip01 {S} Toe0",),
        "upper_arm_twist": ("Bip01 {S}UpArmTwist",),
        "forearm_twist": ("Bip01 {S} ForeTwist",),
    },
    fingers=FingerNames(
        "Bip01 {S} Finger{f}{n}",
        {"thumb": "0", "index": "1", "middle": "2", "ring": "3", "little": "4"},
        ("", "1", "2"),
    ),
    unmapped=("Bip01", "Bip01 Spine3", "Bip01 Neck1", "Bip01 HeadNub"),
    presets=(("3dsmax_biped", ""),),
)
