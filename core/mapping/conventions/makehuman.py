"""MakeHuman's skeletons: the default one and the game / BVH one."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

MAKEHUMAN = NameConvention(
    key="makehuman",
    title="MakeHuman default skeleton",
    slots={
        "hips": ("root",),
        "spine": ("spine05",),
        "chest": ("spine03",),
        "upper_chest": ("spine01",),
        "neck": ("neck01",),
        "head": ("head",),
        "jaw": ("jaw",),
        "eye": ("eye.{S}",),
        "shoulder": ("clavicle.{S}",),
        "upper_arm": ("upperarm01.{S}",),
        "upper_arm_twist": ("upperarm02.{S}",),
        "forearm": ("lowerarm01.{S}",),
        "forearm_twist": ("lowerarm02.{S}",),
        "hand": ("wrist.{S}",),
        "thigh": ("upperleg01.{S}",),
        "thigh_twist": ("upperleg02.{S}",),
        "shin": ("lowerleg01.{S}",),
        "shin_twist": ("lowerleg02.{S}",),
        "foot": ("foot.{S}",),
    },
    fingers=FingerNames("finger{f}-{n}.{S}", {"thumb": "1", "index": "2", "middle": "3", "ring": "4", "little": "5"}),
    unmapped=(
        "spine04",
        "spine02",
        "neck02",
        "neck03",
        "pelvis.{S}",
        "shoulder01.{S}",
        "metacarpal1.{S}",
        "metacarpal2.{S}",
        "metacarpal3.{S}",
        "metacarpal4.{S}",
        "breast.{S}",
    ),
    presets=(("makehuman", ""),),
)

MAKEHUMAN_GAME = NameConvention(
    key="makehuman_game",
    title="MakeHuman game / BVH skeleton",
    slots={
        # The legs hang from "Hips", a child of "Root" beside the spine: "Root" carries both.
        "hips": ("Root",),
        "spine": ("Spine1",),
        "chest": ("Spine2",),
        "upper_chest": ("Spine3",),
        "neck": ("Neck",),
        "head": ("Head",),
        "jaw": ("Jaw",),
        "eye": ("Eye_{S}",),
        "shoulder": ("Clavicle_{S}",),
        "upper_arm": ("UpArm_{S}",),
        "forearm": ("LoArm_{S}",),
        "hand": ("Hand_{S}",),
        "thigh": ("UpLeg_{S}",),
        "shin": ("LoLeg_{S}",),
        "foot": ("Foot_{S}",),
        "toes": ("Toe_{S}",),
    },
    fingers=FingerNames(
        "{f}{n}_{S}", {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Pinky"}
    ),
    unmapped=("Hips",),
    presets=(("makehuman_game", ""),),
)
