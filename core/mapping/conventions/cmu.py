"""The CMU motion-capture database's BVH conversions: the MotionBuilder-friendly names, and the
3ds Max-friendly ones (Biovision's)."""

from __future__ import annotations

from ..naming_convention import NameConvention

CMU_MOTIONBUILDER = NameConvention(
    key="cmu_motionbuilder",
    title="CMU BVH (MotionBuilder-friendly)",
    slots={
        "hips": ("Hips",),
        "spine": ("LowerBack",),
        "chest": ("Spine",),
        "upper_chest": ("Spine1",),
        "neck": ("Neck",),
        "head": ("Head",),
        # Here "Shoulder" is the clavicle and "Arm" the upper arm.
        "shoulder": ("{Side}Shoulder",),
        "upper_arm": ("{Side}Arm",),
        "forearm": ("{Side}ForeArm",),
        "hand": ("{Side}Hand",),
        "thigh": ("{Side}UpLeg",),
        "shin": ("{Side}Leg",),
        "foot": ("{Side}Foot",),
        "toes": ("{Side}ToeBase",),
        "thumb_1": ("{S}Thumb",),
        "index_1": ("{Side}HandIndex1",),
    },
    # LHipJoint runs from the hip centre to the hip joint; FingerBase is the palm; Neck1 is an
    # upper neck segment between two mapped bones.
    unmapped=("{S}HipJoint", "{Side}FingerBase", "Neck1"),
    presets=(("cmu_motionbuilder", ""),),
)

BIOVISION = NameConvention(
    key="cmu_3dsmax",
    title="CMU BVH (3ds Max-friendly) / Biovision",
    slots={
        "hips": ("Hips",),
        "spine": ("Chest",),
        "chest": ("Chest2",),
        "upper_chest": ("Chest3",),
        "neck": ("Neck",),
        "head": ("Head",),
        # Here "Shoulder" is the upper arm and "Collar" the clavicle.
        "shoulder": ("{Side}Collar",),
        "upper_arm": ("{Side}Shoulder", "{Side}UpArm"),
        "forearm": ("{Side}Elbow", "{Side}LowArm"),
        "hand": ("{Side}Wrist", "{Side}Hand"),
        "thigh": ("{Side}Hip", "{Side}UpLeg"),
        "shin": ("{Side}Knee", "{Side}LowLeg"),
        "foot": ("{Side}Ankle", "{Side}Foot"),
        "toes": ("{Side}Toe",),
    },
    unmapped=("{S}HipJoint", "Chest4"),
    presets=(("cmu_3dsmax", ""),),
)
