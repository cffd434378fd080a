"""The Unreal Engine mannequin's bone names."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

UNREAL_MANNEQUIN = NameConvention(
    key="unreal_mannequin",
    title="Unreal Engine mannequin",
    slots={
        "hips": ("pelvis",),
        "spine": ("spine_01",),
        "chest": ("spine_02",),
        "upper_chest": ("spine_03",),
        "neck": ("neck_01",),
        "head": ("head",),
        "shoulder": ("clavicle_{s}",),
        "upper_arm": ("upperarm_{s}",),
        "forearm": ("lowerarm_{s}",),
        "hand": ("hand_{s}",),
        "thigh": ("thigh_{s}",),
        "shin": ("calf_{s}",),
        "foot": ("foot_{s}",),
        "toes": ("ball_{s}",),
        "upper_arm_twist": ("upperarm_twist_01_{s}",),
        "forearm_twist": ("lowerarm_twist_01_{s}",),
        "thigh_twist": ("thigh_twist_01_{s}",),
        "shin_twist": ("calf_twist_01_{s}",),
    },
    fingers=FingerNames(
        "{f}_0{n}_{s}", {"thumb": "thumb", "index": "index", "middle": "middle", "ring": "ring", "little": "pinky"}
    ),
    unmapped=(
        "root",
        "spine_04",
        "spine_05",
        "neck_02",
        "upperarm_twist_02_{s}",
        "lowerarm_twist_02_{s}",
        "thigh_twist_02_{s}",
        "calf_twist_02_{s}",
        "index_metacarpal_{s}",
        "middle_metacarpal_{s}",
        "ring_metacarpal_{s}",
        "pinky_metacarpal_{s}",
    ),
    presets=(("unreal_mannequin", ""),),
)
