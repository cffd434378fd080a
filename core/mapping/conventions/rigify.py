"""Rigify's bone names: the metarig, and the rig Rigify generates from it (its DEF- bones)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

RIGIFY_METARIG = NameConvention(
    key="rigify_metarig",
    title="Rigify metarig",
    slots={
        "hips": ("spine",),
        "spine": ("spine.001",),
        "chest": ("spine.002",),
        "upper_chest": ("spine.003",),
        "neck": ("spine.004",),
        "head": ("spine.006",),
        "jaw": ("jaw",),
        "eye": ("eye.{S}",),
        "shoulder": ("shoulder.{S}",),
        "upper_arm": ("upper_arm.{S}",),
        "forearm": ("forearm.{S}",),
        "hand": ("hand.{S}",),
        "thigh": ("thigh.{S}",),
        "shin": ("shin.{S}",),
        "foot": ("foot.{S}",),
        "toes": ("toe.{S}",),
    },
    fingers=FingerNames(
        "{f}.0{n}.{S}",
        {"thumb": "thumb", "index": "f_index", "middle": "f_middle", "ring": "f_ring", "little": "f_pinky"},
    ),
    unmapped=(
        "spine.005",
        "pelvis.{S}",
        "heel.02.{S}",
        "breast.{S}",
        "palm.01.{S}",
        "palm.02.{S}",
        "palm.03.{S}",
        "palm.04.{S}",
        "face",
    ),
    presets=(("rigify_metarig", ""),),
)

# A generated Rigify rig deforms with DEF- copies of the metarig bones (no eye or jaw among them);
# its limb bones are split in two (``DEF-upper_arm.L`` + ``DEF-upper_arm.L.001``), the second half
# being the twist.
RIGIFY_GENERATED = NameConvention(
    key="rigify_generated",
    title="Rigify generated rig (DEF- bones)",
    slots={
        "hips": ("DEF-spine",),
        "spine": ("DEF-spine.001",),
        "chest": ("DEF-spine.002",),
        "upper_chest": ("DEF-spine.003",),
        "neck": ("DEF-spine.004",),
        "head": ("DEF-spine.006",),
        "shoulder": ("DEF-shoulder.{S}",),
        "upper_arm": ("DEF-upper_arm.{S}",),
        "forearm": ("DEF-forearm.{S}",),
        "hand": ("DEF-hand.{S}",),
        "thigh": ("DEF-thigh.{S}",),
        "shin": ("DEF-shin.{S}",),
        "foot": ("DEF-foot.{S}",),
        "toes": ("DEF-toe.{S}",),
        "upper_arm_twist": ("DEF-upper_arm.{S}.001",),
        "forearm_twist": ("DEF-forearm.{S}.001",),
        "thigh_twist": ("DEF-thigh.{S}.001",),
        "shin_twist": ("DEF-shin.{S}.001",),
    },
    fingers=FingerNames(
        "DEF-{f}.0{n}.{S}",
        {"thumb": "thumb", "index": "f_index", "middle": "f_middle", "ring": "f_ring", "little": "f_pinky"},
    ),
    unmapped=(
        "DEF-spine.005",
        "DEF-pelvis.{S}",
        "DEF-heel.02.{S}",
        "DEF-breast.{S}",
        "DEF-palm.01.{S}",
        "DEF-palm.02.{S}",
        "DEF-palm.03.{S}",
        "DEF-palm.04.{S}",
        "DEF-face",
    ),
    presets=(("rigify_generated", ""),),
)
