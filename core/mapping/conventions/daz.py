"""Daz Studio's figures: Genesis 1-2 (the Poser names, also CMU's Daz-friendly BVH) and Genesis 3 / 8."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

DAZ_POSER = NameConvention(
    key="daz_poser",
    title="Daz Genesis 1-2 / Poser / CMU Daz-friendly BVH",
    slots={
        "hips": ("hip",),
        "spine": ("abdomen",),
        "chest": ("chest",),
        "neck": ("neck",),
        "head": ("head",),
        "eye": ("{side}Eye", "{s}Eye"),
        "shoulder": ("{s}Collar",),
        "upper_arm": ("{s}Shldr",),
        "forearm": ("{s}ForeArm",),
        "hand": ("{s}Hand",),
        "thigh": ("{s}Thigh",),
        "shin": ("{s}Shin",),
        "foot": ("{s}Foot",),
        "toes": ("{s}Toe",),
    },
    fingers=FingerNames(
        "{s}{f}{n}", {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"}
    ),
    unmapped=("abdomen2", "{s}Buttock", "pelvis"),
    presets=(("daz_poser", ""),),
)

DAZ_GENESIS = NameConvention(
    key="daz_genesis",
    title="Daz Genesis 3 / 8",
    slots={
        "hips": ("hip",),
        "spine": ("abdomenLower",),
        "chest": ("chestLower",),
        "upper_chest": ("chestUpper",),
        "neck": ("neckLower",),
        "head": ("head",),
        "jaw": ("lowerJaw",),
        "eye": ("{s}Eye",),
        "shoulder": ("{s}Collar",),
        "upper_arm": ("{s}ShldrBend",),
        "upper_arm_twist": ("{s}ShldrTwist",),
        "forearm": ("{s}ForearmBend",),
        "forearm_twist": ("{s}ForearmTwist",),
        "hand": ("{s}Hand",),
        "thigh": ("{s}ThighBend",),
        "thigh_twist": ("{s}ThighTwist",),
        "shin": ("{s}Shin",),
        "foot": ("{s}Foot",),
        "toes": ("{s}Toe",),
    },
    fingers=FingerNames(
        "{s}{f}{n}", {"thumb": "Thumb", "index": "Index", "middle": "Mid", "ring": "Ring", "little": "Pinky"}
    ),
    # Genesis hangs the legs from "pelvis", a sibling of the spine under "hip".
    unmapped=(
        "pelvis",
        "abdomenUpper",
        "neckUpper",
        "{s}Metatarsals",
        "{s}Carpal1",
        "{s}Carpal2",
        "{s}Carpal3",
        "{s}Carpal4",
    ),
    presets=(("daz_genesis", ""),),
)
