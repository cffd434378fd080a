"""Unity's humanoid (Mecanim) bone names."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

UNITY_HUMANOID = NameConvention(
    key="unity_humanoid",
    title="Unity humanoid (Mecanim bone names)",
    slots={
        "hips": ("Hips",),
        "spine": ("Spine",),
        "chest": ("Chest",),
        "upper_chest": ("UpperChest",),
        "neck": ("Neck",),
        "head": ("Head",),
        "jaw": ("Jaw",),
        "eye": ("{Side}Eye",),
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}UpperArm",),
        "forearm": ("{Side}LowerArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpperLeg",),
        "shin": ("{Side}LowerLeg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}Toes",),
    },
    fingers=FingerNames(
        "{Side}{f}{n}",
        {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Little"},
        ("Proximal", "Intermediate", "Distal"),
    ),
    presets=(("unity_humanoid", ""),),
)
