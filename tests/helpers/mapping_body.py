"""The synthetic humanoid body of the mapping tests (docs/mapping.md) and the bone names of each naming
convention, written by hand from each convention's documentation and real files."""

from __future__ import annotations

import math

import numpy as np

from marionette.core.mapping.humanoid import FINGER_SLOTS, FINGERS, SLOTS, finger_slot

#
# Canonical joint ids are slot names (plus a few extras); every id is a bone with a parent id, a
# head and a tail. Left side only; the right side is the mirror image (x -> -x).
_AXIAL = [
    # id, parent, head, tail
    ("hips", None, (0.0, 0.0, 1.00), (0.0, 0.0, 1.10)),
    ("spine", "hips", (0.0, 0.0, 1.10), (0.0, 0.01, 1.25)),
    ("chest", "spine", (0.0, 0.01, 1.25), (0.0, 0.01, 1.40)),
    ("upper_chest", "chest", (0.0, 0.01, 1.40), (0.0, 0.0, 1.50)),
    ("neck", "upper_chest", (0.0, 0.0, 1.50), (0.0, -0.01, 1.60)),
    ("head", "neck", (0.0, -0.01, 1.60), (0.0, -0.01, 1.80)),
]
_LEFT = [
    ("shoulder.L", "upper_chest", (0.02, -0.02, 1.46), (0.17, 0.0, 1.47)),
    ("upper_arm.L", "shoulder.L", (0.17, 0.0, 1.47), (0.45, 0.0, 1.47)),
    ("forearm.L", "upper_arm.L", (0.45, 0.0, 1.47), (0.70, 0.0, 1.47)),
    ("hand.L", "forearm.L", (0.70, 0.0, 1.47), (0.79, 0.0, 1.47)),
    ("thigh.L", "hips", (0.10, 0.0, 0.95), (0.10, -0.01, 0.52)),
    ("shin.L", "thigh.L", (0.10, -0.01, 0.52), (0.10, 0.01, 0.09)),
    ("foot.L", "shin.L", (0.10, 0.01, 0.09), (0.10, -0.11, 0.02)),
    ("toes.L", "foot.L", (0.10, -0.11, 0.02), (0.10, -0.17, 0.02)),
]


def _fingers_left() -> list[tuple[str, str, tuple[float, ...], tuple[float, ...]]]:
    out = []
    # Thumb: from the wrist, forward and out.
    p = np.array([0.72, -0.03, 1.46])
    d = np.array([0.6, -0.7, -0.2]) / np.linalg.norm([0.6, -0.7, -0.2])
    parent = "hand.L"
    for k, seg in enumerate((0.035, 0.03, 0.025), start=1):
        slot = finger_slot("thumb", k, "L")
        out.append((slot, parent, tuple(p), tuple(p + seg * d)))
        p, parent = p + seg * d, slot
    for y, finger in zip((-0.03, -0.01, 0.01, 0.03), FINGERS[1:], strict=True):
        p = np.array([0.79, y, 1.47])
        parent = "hand.L"
        for k, seg in enumerate((0.04, 0.03, 0.022), start=1):
            slot = finger_slot(finger, k, "L")
            out.append((slot, parent, tuple(p), tuple(p + [seg, 0.0, -0.002])))
            p, parent = p + [seg, 0.0, -0.002], slot
    return out


def _mirror(entry):
    ident, parent, head, tail = entry

    def flip(s):
        return None if s is None else (s[:-2] + ".R" if s.endswith(".L") else s)

    return flip(ident), flip(parent), (-head[0], *head[1:]), (-tail[0], *tail[1:])


def body(fingers: bool = True, arms: str = "T") -> list[tuple[str, str | None, np.ndarray, np.ndarray]]:
    """The synthetic humanoid as (id, parent id, head, tail), ids being profile slots.

    ``arms``: "T" (straight out), "A" (45 degrees down) or "down" (80 degrees down, near the
    thighs) -- applied as a rotation of each arm about its shoulder joint, as a rest pose would be.
    """
    left = _LEFT + (_fingers_left() if fingers else [])
    bones = [(i, p, np.array(h, float), np.array(t, float)) for i, p, h, t in _AXIAL]
    for e in left:
        for i, p, h, t in (e, _mirror(e)):
            bones.append((i, p, np.array(h, float), np.array(t, float)))
    drop = {"T": 0.0, "A": 45.0, "down": 80.0}[arms]
    if drop:
        a = math.radians(drop)
        for k, (i, p, h, t) in enumerate(bones):
            side = i[-1] if i[-2:] in (".L", ".R") else None
            arm_part = i.split(".")[0] in ("upper_arm", "forearm", "hand") or i.split("_")[0] in FINGERS
            if side is None or not arm_part:
                continue
            s = 1.0 if side == "L" else -1.0
            pivot = np.array([0.17 * s, 0.0, 1.47])
            # Rotate about the forward axis so the arm swings down in the body's side plane.
            rot = np.array([[math.cos(a), 0.0, s * math.sin(a)], [0.0, 1.0, 0.0], [-s * math.sin(a), 0.0, math.cos(a)]])
            bones[k] = (i, p, pivot + rot @ (h - pivot), pivot + rot @ (t - pivot))
    return bones


def arrays(bones, names=None):
    """names, parents, heads, tails for a body; ``names`` maps ids to bone names."""
    ids = [b[0] for b in bones]
    index = {i: k for k, i in enumerate(ids)}
    out_names = [names.get(i, i) if names else i for i in ids]
    parents = np.array([-1 if b[1] is None else index[b[1]] for b in bones])
    heads = np.array([b[2] for b in bones])
    tails = np.array([b[3] for b in bones])
    return out_names, parents, heads, tails


def rotation(axis, degrees):
    a = math.radians(degrees)
    x, y, z = np.asarray(axis, float) / np.linalg.norm(axis)
    c, s, C = math.cos(a), math.sin(a), 1 - math.cos(a)
    return np.array(
        [
            [c + x * x * C, x * y * C - z * s, x * z * C + y * s],
            [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
            [z * x * C - y * s, z * y * C + x * s, c + z * z * C],
        ]
    )


def expected(bones, names=None, fingers=True):
    """The body's own anatomy: slot -> bone name (ids are slots)."""
    out = {}
    for i, *_ in bones:
        if i in SLOTS and (fingers or i not in FINGER_SLOTS):
            out[i] = names.get(i, i) if names else i
    return out


def slots_of(mapping, include=None):
    return {s: mb.bone for s, mb in mapping.slots.items() if include is None or s in include}


MIXAMO = {
    "hips": "mixamorig:Hips", "spine": "mixamorig:Spine", "chest": "mixamorig:Spine1",
    "upper_chest": "mixamorig:Spine2", "neck": "mixamorig:Neck", "head": "mixamorig:Head",
    **{f"{p}.{s}": f"mixamorig:{side}{n}" for s, side in (("L", "Left"), ("R", "Right")) for p, n in (
        ("shoulder", "Shoulder"), ("upper_arm", "Arm"), ("forearm", "ForeArm"), ("hand", "Hand"),
        ("thigh", "UpLeg"), ("shin", "Leg"), ("foot", "Foot"), ("toes", "ToeBase"))},
    **{finger_slot(f, k, s): f"mixamorig:{side}Hand{w}{k}" for s, side in (("L", "Left"), ("R", "Right"))
       for f, w in zip(FINGERS, ("Thumb", "Index", "Middle", "Ring", "Pinky"), strict=True) for k in (1, 2, 3)},
}  # fmt: skip

UNREAL = {
    "hips": "pelvis", "spine": "spine_01", "chest": "spine_02", "upper_chest": "spine_03",
    "neck": "neck_01", "head": "head",
    **{f"{p}.{s}": f"{n}_{s.lower()}" for s in "LR" for p, n in (
        ("shoulder", "clavicle"), ("upper_arm", "upperarm"), ("forearm", "lowerarm"), ("hand", "hand"),
        ("thigh", "thigh"), ("shin", "calf"), ("foot", "foot"), ("toes", "ball"))},
    **{finger_slot(f, k, s): f"{w}_0{k}_{s.lower()}" for s in "LR"
       for f, w in zip(FINGERS, ("thumb", "index", "middle", "ring", "pinky"), strict=True) for k in (1, 2, 3)},
}  # fmt: skip

VROID = {
    "hips": "J_Bip_C_Hips", "spine": "J_Bip_C_Spine", "chest": "J_Bip_C_Chest",
    "upper_chest": "J_Bip_C_UpperChest", "neck": "J_Bip_C_Neck", "head": "J_Bip_C_Head",
    **{f"{p}.{s}": f"J_Bip_{s}_{n}" for s in "LR" for p, n in (
        ("shoulder", "Shoulder"), ("upper_arm", "UpperArm"), ("forearm", "LowerArm"), ("hand", "Hand"),
        ("thigh", "UpperLeg"), ("shin", "LowerLeg"), ("foot", "Foot"), ("toes", "ToeBase"))},
    **{finger_slot(f, k, s): f"J_Bip_{s}_{w}{k}" for s in "LR"
       for f, w in zip(FINGERS, ("Thumb", "Index", "Middle", "Ring", "Little"), strict=True) for k in (1, 2, 3)},
}  # fmt: skip

DAZ_GENESIS = {
    "hips": "hip", "spine": "abdomenLower", "chest": "chestLower", "upper_chest": "chestUpper",
    "neck": "neckLower", "head": "head",
    **{f"{p}.{s}": f"{s.lower()}{n}" for s in "LR" for p, n in (
        ("shoulder", "Collar"), ("upper_arm", "ShldrBend"), ("forearm", "ForearmBend"), ("hand", "Hand"),
        ("thigh", "ThighBend"), ("shin", "Shin"), ("foot", "Foot"), ("toes", "Toe"))},
}  # fmt: skip

BIPED = {
    "hips": "Bip01 Pelvis", "spine": "Bip01 Spine", "chest": "Bip01 Spine1", "upper_chest": "Bip01 Spine2",
    "neck": "Bip01 Neck", "head": "Bip01 Head",
    **{f"{p}.{s}": f"Bip01 {s} {n}" for s in "LR" for p, n in (
        ("shoulder", "Clavicle"), ("upper_arm", "UpperArm"), ("forearm", "Forearm"), ("hand", "Hand"),
        ("thigh", "Thigh"), ("shin", "Calf"), ("foot", "Foot"), ("toes", "Toe0"))},
}  # fmt: skip

MMD = {
    "hips": "センター", "spine": "上半身", "chest": "上半身2", "upper_chest": "上半身3", "neck": "首", "head": "頭",
    **{f"{p}.{s}": f"{j}{n}" for s, j in (("L", "左"), ("R", "右")) for p, n in (
        ("shoulder", "肩"), ("upper_arm", "腕"), ("forearm", "ひじ"), ("hand", "手首"),
        ("thigh", "足"), ("shin", "ひざ"), ("foot", "足首"), ("toes", "つま先"))},
}  # fmt: skip

CMU_MOTIONBUILDER = {
    "hips": "Hips", "spine": "LowerBack", "chest": "Spine", "upper_chest": "Spine1", "neck": "Neck", "head": "Head",
    **{f"{p}.{s}": f"{side}{n}" for s, side in (("L", "Left"), ("R", "Right")) for p, n in (
        ("shoulder", "Shoulder"), ("upper_arm", "Arm"), ("forearm", "ForeArm"), ("hand", "Hand"),
        ("thigh", "UpLeg"), ("shin", "Leg"), ("foot", "Foot"), ("toes", "ToeBase"))},
}  # fmt: skip

CMU_3DSMAX = {
    "hips": "Hips", "spine": "Chest", "chest": "Chest2", "upper_chest": "Chest3", "neck": "Neck", "head": "Head",
    **{f"{p}.{s}": f"{side}{n}" for s, side in (("L", "Left"), ("R", "Right")) for p, n in (
        ("shoulder", "Collar"), ("upper_arm", "Shoulder"), ("forearm", "Elbow"), ("hand", "Wrist"),
        ("thigh", "Hip"), ("shin", "Knee"), ("foot", "Ankle"), ("toes", "Toe"))},
}  # fmt: skip

RIGIFY = {
    "hips": "spine", "spine": "spine.001", "chest": "spine.002", "upper_chest": "spine.003",
    "neck": "spine.004", "head": "spine.006",
    **{f"{p}.{s}": f"{n}.{s}" for s in "LR" for p, n in (
        ("shoulder", "shoulder"), ("upper_arm", "upper_arm"), ("forearm", "forearm"), ("hand", "hand"),
        ("thigh", "thigh"), ("shin", "shin"), ("foot", "foot"), ("toes", "toe"))},
    **{finger_slot(f, k, s): f"{w}.0{k}.{s}" for s in "LR"
       for f, w in zip(FINGERS, ("thumb", "f_index", "f_middle", "f_ring", "f_pinky"), strict=True) for k in (1, 2, 3)},
}  # fmt: skip

NAMINGS = {
    "mixamo": MIXAMO,
    "unreal_mannequin": UNREAL,
    "vroid": VROID,
    "daz_genesis": DAZ_GENESIS,
    "3dsmax_biped": BIPED,
    "mmd": MMD,
    "cmu_motionbuilder": CMU_MOTIONBUILDER,
    "cmu_3dsmax": CMU_3DSMAX,
    "rigify_metarig": RIGIFY,
}

MAIN = [s for s in SLOTS if s not in FINGER_SLOTS and s in {b[0] for b in body(fingers=False)}]


def _insert(bones, ident, parent, head, tail, children):
    """Insert a bone between ``parent`` and ``children``."""
    out = []
    for i, p, h, t in bones:
        out.append((i, ident if i in children else p, h, t))
    out.append((ident, parent, np.array(head, float), np.array(tail, float)))
    return out
