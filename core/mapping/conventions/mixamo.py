"""Mixamo's bone names (``mixamorig:`` namespace on every bone of a downloaded character)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

MIXAMO = NameConvention(
    key="mixamo",
    title="Mixamo",
    slots={
        "hips": ("Hips",),
        "spine": ("Spine",),
        "chest": ("Spine1",),
        "upper_chest": ("Spine2",),
        "neck": ("Neck",),
        "head": ("Head",),
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}Arm",),
        "forearm": ("{Side}ForeArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpLeg",),
        "shin": ("{Side}Leg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}ToeBase",),
        "eye": ("{Side}Eye",),
    },
    fingers=FingerNames(
        "{Side}Hand{f}{n}",
        {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Pinky"},
    ),
    unmapped=(
        "HeadTop_End",
        "{Side}Toe_End",
        "{Side}HandThumb4",
        "{Side}HandIndex4",
        "{Side}HandMiddle4",
        "{Side}HandRing4",
        "{Side}HandPinky4",
    ),
    presets=(("mixamo", "mixamorig:"),),
)
