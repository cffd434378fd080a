"""VRoid Studio's and UniVRM's bone names (``J_Bip_`` for the body, ``J_Adj_`` for adjusters)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

VROID = NameConvention(
    key="vroid",
    title="VRoid / UniVRM (J_Bip_ names)",
    slots={
        "hips": ("J_Bip_C_Hips",),
        "spine": ("J_Bip_C_Spine",),
        "chest": ("J_Bip_C_Chest",),
        "upper_chest": ("J_Bip_C_UpperChest",),
        "neck": ("J_Bip_C_Neck",),
        "head": ("J_Bip_C_Head",),
        "eye": ("J_Adj_{S}_FaceEye",),
        "shoulder": ("J_Bip_{S}_Shoulder",),
        "upper_arm": ("J_Bip_{S}_UpperArm",),
        "forearm": ("J_Bip_{S}_LowerArm",),
        "hand": ("J_Bip_{S}_Hand",),
        "thigh": ("J_Bip_{S}_UpperLeg",),
        "shin": ("J_Bip_{S}_LowerLeg",),
        "foot": ("J_Bip_{S}_Foot",),
        "toes": ("J_Bip_{S}_ToeBase",),
    },
    fingers=FingerNames(
        "J_Bip_{S}_{f}{n}",
        {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "little": "Little"},
    ),
    unmapped=("Root",),
    presets=(("vroid", ""),),
)
