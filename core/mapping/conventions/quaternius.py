"""Quaternius's characters: mitten hands (a thumb and one block for the other four fingers)."""

from __future__ import annotations

from ..naming_convention import NameConvention

QUATERNIUS = NameConvention(
    key="quaternius",
    title="Quaternius characters",
    slots={
        # "Body" carries legs and spine; "Hips" (its child) carries only the spine.
        "hips": ("Body",),
        "spine": ("Abdomen",),
        "chest": ("Torso",),
        "neck": ("Neck",),
        "head": ("Head",),
        "shoulder": ("Shoulder.{S}",),
        "upper_arm": ("UpperArm.{S}",),
        "forearm": ("LowerArm.{S}",),
        "hand": ("Palm.{S}",),
        "thumb_1": ("Thumb1.{S}",),
        "thumb_2": ("Thumb2.{S}",),
        # One mitten for the four fingers beside the thumb: the index, as any lone finger
        # beside the thumb reads by shape ("MiddleHand" is the metacarpus, Mittelhand).
        "index_1": ("MiddleHand.{S}",),
        "index_2": ("Fingers.{S}",),
        "thigh": ("UpperLeg.{S}",),
        "shin": ("LowerLeg.{S}",),
        "foot": ("Foot.{S}",),
    },
    unmapped=("Hips", "Bone"),
    presets=(("quaternius", ""),),
)
