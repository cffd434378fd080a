"""The VRM humanoid's bone names, as the Blender VRM add-on names them."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

VRM = NameConvention(
    key="vrm",
    title="VRM humanoid (Blender VRM add-on names)",
    slots={
        "hips": ("hips",),
        "spine": ("spine",),
        "chest": ("chest",),
        "upper_chest": ("upper_chest",),
        "neck": ("neck",),
        "head": ("head",),
        "jaw": ("jaw",),
        "eye": ("eye.{S}",),
        "shoulder": ("shoulder.{S}",),
        "upper_arm": ("upper_arm.{S}",),
        "forearm": ("lower_arm.{S}",),
        "hand": ("hand.{S}",),
        "thigh": ("upper_leg.{S}",),
        "shin": ("lower_leg.{S}",),
        "foot": ("foot.{S}",),
        "toes": ("toes.{S}",),
    },
    # VRM 0.x names; VRM 1.0 calls the thumb's segments metacarpal/proximal/distal, which the
    # finger ranking handles (segments are numbered along the chain, not by word).
    fingers=FingerNames(
        "{f}.{n}.{S}",
        {"thumb": "thumb", "index": "index", "middle": "middle", "ring": "ring", "little": "little"},
        ("proximal", "intermediate", "distal"),
    ),
    unmapped=("root",),
    presets=(("vrm", ""),),
)
