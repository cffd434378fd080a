"""Humanoid bone mapping on synthetic rigs built here (SPEC 3).

One body (a 1.8-unit humanoid, Z up, facing -Y, left = +X) is written out in many namings and
then moved about: mirrored, rotated, lying on its back, facing +X, rescaled, with the bone order
shuffled, with meaningless names, in A-pose and arms-down rests, with helper and zero-length
joints, twist bones, an IK foot parented to the root. The expected mapping is always the body's
own anatomy, so every assertion compares against what the rig *is*, not against the mapper.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.auto_map import auto_map, auto_map_skeleton
from marionette.core.mapping.bone_mapping import FORMAT_VERSION, BoneMapping, MappedBone
from marionette.core.mapping.conventions import CONVENTIONS
from marionette.core.mapping.humanoid import FINGER_SLOTS, FINGERS, MINIMUM_SLOTS, SLOTS, finger_slot, mirror_slot
from marionette.core.mapping.humanoid_check import check_humanoid, check_humanoid_skeleton
from marionette.core.mapping.name_hints import detect_convention, name_key
from marionette.core.mapping.presets import preset_mapping, preset_names, write_presets
from marionette.core.rig.skeleton import Skeleton

REPO = Path(__file__).resolve().parents[2]

# --- the synthetic body -----------------------------------------------------------------------
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


# --- namings (written by hand from each convention's documentation and real files) ----------

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


# --- mapping per naming -----------------------------------------------------------------------


@pytest.mark.parametrize("convention", sorted(NAMINGS))
def test_each_naming_maps_the_body_and_is_recognised(convention):
    names = NAMINGS[convention]
    bones = body(fingers="thumb_1.L" in names)
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)
    assert m.convention == convention
    assert m.conflicts == []
    assert m.refusal is None
    m.require_humanoid()
    for s in MINIMUM_SLOTS:
        assert m.slots[s].confidence >= 0.9, (s, m.slots[s])
        assert "name rule" in m.slots[s].reason


def test_meaningless_names_map_by_structure_alone():
    bones = body()
    names = {b[0]: f"joint{k:02d}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert m.convention is None
    assert slots_of(m) == expected(bones, names)
    for s in MINIMUM_SLOTS:
        assert m.slots[s].reason.startswith("structure:"), m.slots[s]
        assert 0.5 <= m.slots[s].confidence < 0.9


@pytest.mark.parametrize(
    "label, transform",
    [
        ("rotated", rotation((1, 2, 3), 73.0)),
        ("z-up file lying on its back", rotation((1, 0, 0), -90.0)),
        ("upside down", rotation((1, 0, 0), 180.0)),
        ("facing +X", rotation((0, 0, 1), 90.0)),
        ("rescaled x100", 100.0 * np.eye(3)),
    ],
)
def test_mapping_ignores_placement_and_facing(label, transform):
    bones = body()
    names = {b[0]: f"j{k}" for k, b in enumerate(bones)}
    n, p, h, t = arrays(bones, names)
    offset = np.array([3.0, -7.0, 11.0])
    m = auto_map(n, p, h @ transform.T + offset, t @ transform.T + offset)
    assert slots_of(m) == expected(bones, names), label


def test_mirrored_geometry_swaps_sides_and_reports_the_letters():
    # The same rig mirrored (x -> -x): the bone called "LeftArm" now lies on the character's
    # right. Sides follow the positions; the contradicting letters are reported, not obeyed.
    bones = body(fingers=False)
    n, p, h, t = arrays(bones, CMU_MOTIONBUILDER)
    flip = np.diag([-1.0, 1.0, 1.0])
    m = auto_map(n, p, h @ flip, t @ flip)
    assert m.bone_for("upper_arm.R") == "LeftArm"
    assert m.bone_for("upper_arm.L") == "RightArm"
    assert m.bone_for("thigh.R") == "LeftUpLeg"
    assert m.bone_for("foot.L") == "RightFoot"
    side_conflicts = [c for c in m.conflicts if "named left but lies on the character's right" in c]
    assert len(side_conflicts) == 2  # the left arm and the left leg
    assert any("'LeftUpLeg'" in c for c in side_conflicts)


def _randomised_body(rng):
    """The body with random limb proportions, rest pose, a little asymmetry and optional helper
    joints, ready to be placed anywhere."""
    bones = body(fingers=bool(rng.integers(0, 2)), arms=str(rng.choice(["T", "A", "down"])))
    scale = {
        p: rng.uniform(0.75, 1.3)
        for p in ("upper_arm", "forearm", "thigh", "shin", "spine", "neck", "shoulder", "foot")
    }
    parent = {b[0]: b[1] for b in bones}
    heads = {b[0]: b[2].copy() for b in bones}
    tails = {b[0]: b[3].copy() for b in bones}
    kids: dict[str | None, list[str]] = {}
    for i in parent:
        kids.setdefault(parent[i], []).append(i)

    def shift(i, d):
        heads[i] += d
        tails[i] += d
        for c in kids.get(i, []):
            shift(c, d)

    for i in parent:
        if i.split(".")[0] in scale:
            old_tail = tails[i].copy()
            tails[i] = heads[i] + (tails[i] - heads[i]) * scale[i.split(".")[0]]
            for c in kids.get(i, []):
                if np.linalg.norm(heads[c] - old_tail) < 1e-9:
                    shift(c, tails[i] - old_tail)
    for i in parent:
        jitter = rng.normal(scale=0.003, size=3)
        heads[i] += jitter
        tails[i] += jitter
    bones = [(i, parent[i], heads[i], tails[i]) for i in parent]
    if rng.random() < 0.3:
        for s in "LR":
            bones = _insert(bones, f"hipjoint.{s}", "hips", heads["hips"], heads[f"thigh.{s}"], {f"thigh.{s}"})
    if rng.random() < 0.3:
        bones = _insert(bones, "root", None, np.zeros(3), np.array([0.0, 0.2, 0.0]), {"hips"})
    return bones


def test_structure_recovers_the_anatomy_of_randomised_bodies():
    rng = np.random.default_rng(2024)
    for trial in range(40):
        bones = _randomised_body(rng)
        names = {b[0]: f"z{k}" for k, b in enumerate(bones)}
        n, p, h, t = arrays(bones, names)
        place = rotation(rng.normal(size=3), rng.uniform(0.0, 360.0)) * rng.uniform(0.01, 100.0)
        mirrored = rng.random() < 0.3
        if mirrored:
            place = place @ np.diag([-1.0, 1.0, 1.0])
        m = auto_map(n, p, h @ place.T, t @ place.T)
        exp = expected(bones, names)
        if mirrored:  # the character's left is now the original right
            exp = {mirror_slot(s): b for s, b in exp.items()}
        checked = [s for s in exp if s in MAIN or s.startswith("thumb_")]
        assert {s: m.bone_for(s) for s in checked} == {s: exp[s] for s in checked}, f"trial {trial}"


def test_shuffled_bone_order_gives_the_same_mapping():
    bones = body()
    rng = np.random.default_rng(7)
    order = rng.permutation(len(bones))
    shuffled = [bones[k] for k in order]
    assert slots_of(auto_map(*arrays(shuffled, MIXAMO))) == slots_of(auto_map(*arrays(bones, MIXAMO)))
    names = {b[0]: f"n{k}" for k, b in enumerate(bones)}
    assert slots_of(auto_map(*arrays(shuffled, names))) == expected(bones, names)


@pytest.mark.parametrize("arms", ["A", "down"])
def test_a_pose_and_arms_down_rests_map_like_the_t_pose(arms):
    bones = body(arms=arms)
    names = {b[0]: f"x{k}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)


def test_without_tails_the_mapping_uses_children():
    bones = body()
    n, p, h, _ = arrays(bones, UNREAL)
    m = auto_map(n, p, h)
    exp = expected(bones, UNREAL)
    # Leaf bones (finger tips, toes, head) end half a parent-length beyond their head.
    assert slots_of(m, MAIN) == {s: b for s, b in exp.items() if s in MAIN}


def test_auto_map_skeleton_agrees_with_the_arrays():
    bones = body()
    n, p, h, t = arrays(bones, VROID)
    rest = np.tile(np.eye(4), (len(n), 1, 1))
    rest[:, :3, 3] = h
    sk = Skeleton.from_rest_matrices(n, [int(x) for x in p], rest)
    order = [n.index(x) for x in sk.names]
    m = auto_map_skeleton(sk, t[order])
    assert slots_of(m) == slots_of(auto_map(n, p, h, t))


# --- the shoulder question: clavicle or upper arm? ---------------------------------------------


def test_leftshoulder_is_the_clavicle_in_motionbuilder_and_the_upper_arm_in_3dsmax():
    bones = body(fingers=False)
    mb = auto_map(*arrays(bones, CMU_MOTIONBUILDER))
    mx = auto_map(*arrays(bones, CMU_3DSMAX))
    assert mb.bone_for("shoulder.L") == "LeftShoulder" and mb.bone_for("upper_arm.L") == "LeftArm"
    assert mx.bone_for("shoulder.L") == "LeftCollar" and mx.bone_for("upper_arm.L") == "LeftShoulder"
    assert mb.convention == "cmu_motionbuilder" and mx.convention == "cmu_3dsmax"


def test_a_shoulder_bone_is_judged_by_the_hierarchy_when_the_convention_is_unknown():
    # "shoulder" alone is ambiguous. With a collar bone before it, it is the upper arm; without
    # one, the bone between the spine and the long arm bone is the clavicle.
    bones = body(fingers=False)
    with_collar = {f"{p}.{s}": f"{s}_{w}" for s in "LR" for p, w in (
        ("shoulder", "collar"), ("upper_arm", "shoulder"), ("forearm", "elbow"), ("hand", "wrist"))}  # fmt: skip
    m = auto_map(*arrays(bones, with_collar))
    assert m.bone_for("upper_arm.L") == "L_shoulder" and m.bone_for("shoulder.L") == "L_collar"
    plain = {f"{p}.{s}": f"{s}_{w}" for s in "LR" for p, w in (
        ("shoulder", "shoulder"), ("upper_arm", "arm"), ("forearm", "forearm"), ("hand", "hand"))}  # fmt: skip
    m = auto_map(*arrays(bones, plain))
    assert m.bone_for("shoulder.L") == "L_shoulder" and m.bone_for("upper_arm.L") == "L_arm"


def test_an_arm_without_clavicle_starts_at_the_upper_arm():
    bones = [b for b in body(fingers=False) if not b[0].startswith("shoulder.")]
    bones = [(i, ("upper_chest" if p and p.startswith("shoulder.") else p), h, t) for i, p, h, t in bones]
    names = {b[0]: f"q{k}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)
    assert m.bone_for("shoulder.L") is None


# --- real-rig quirks, rebuilt -----------------------------------------------------------------


def _insert(bones, ident, parent, head, tail, children):
    """Insert a bone between ``parent`` and ``children``."""
    out = []
    for i, p, h, t in bones:
        out.append((i, ident if i in children else p, h, t))
    out.append((ident, parent, np.array(head, float), np.array(tail, float)))
    return out


def test_zero_length_hip_joints_and_helpers_never_take_a_real_bones_slot():
    bones = body(fingers=False)
    hips = bones[0][2]
    for s, x in (("L", 0.10), ("R", -0.10)):
        # CMU's LHipJoint: from the hips' head to the hip joint.
        bones = _insert(bones, f"hipjoint.{s}", "hips", hips, (x, 0.0, 0.95), {f"thigh.{s}"})
        # MakeHuman's "__" helper before the clavicle, starting on the spine.
        bones = _insert(bones, f"__clav.{s}", "upper_chest", (0.0, 0.0, 1.45), (0.02, -0.02, 1.46), {f"shoulder.{s}"})
    # A zero-length joint at the wrist (CMU's LeftHand) with the hand after it.
    bones = _insert(bones, "wrist_zero.L", "forearm.L", (0.70, 0.0, 1.47), (0.70, 0.0, 1.47), {"hand.L"})
    names = {b[0]: f"b{k}" for k, b in enumerate(bones)}
    names.update({f"__clav.{s}": f"__Clavicle_{s}" for s in "LR"})
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)
    mapped = set(m.bones().values())
    assert not any(names[f"hipjoint.{s}"] in mapped for s in "LR")
    assert "__Clavicle_L" not in mapped and names["wrist_zero.L"] not in mapped


def test_extra_spine_and_neck_segments_stay_unmapped_between_mapped_bones():
    bones = body(fingers=False)
    bones = _insert(bones, "spine_extra", "chest", (0, 0.01, 1.33), (0, 0.01, 1.40), {"upper_chest"})
    bones = [
        (i, p, (np.array((0, 0.01, 1.25)) if i == "chest" else h), (np.array((0, 0.01, 1.33)) if i == "chest" else t))
        for i, p, h, t in bones
    ]
    bones = _insert(bones, "neck_upper", "neck", (0, -0.01, 1.55), (0, -0.01, 1.60), {"head"})
    bones = [(i, p, h, (np.array((0, -0.01, 1.55)) if i == "neck" else t)) for i, p, h, t in bones]
    m = auto_map(*arrays(bones, UNREAL | {"spine_extra": "spine_04", "neck_upper": "neck_02"}))
    assert m.bone_for("neck") == "neck_01" and m.bone_for("head") == "head"
    assert m.slot_for("neck_02") is None and m.slot_for("spine_04") is None
    assert m.conflicts == []


def test_twist_bones_named_so_fill_the_twist_slots():
    bones = body(fingers=False)
    extra = {}
    for s in "LR":
        ua = [b for b in bones if b[0] == f"upper_arm.{s}"][0]
        bones.append((f"upper_arm_twist.{s}", f"upper_arm.{s}", (ua[2] + ua[3]) / 2, ua[3].copy()))
        th = [b for b in bones if b[0] == f"thigh.{s}"][0]
        bones.append((f"thigh_twist.{s}", f"thigh.{s}", (th[2] + th[3]) / 2, th[3].copy()))
        extra[f"upper_arm_twist.{s}"] = f"upperarm_twist_01_{s.lower()}"
        extra[f"thigh_twist.{s}"] = f"thigh_twist_01_{s.lower()}"
    m = auto_map(*arrays(bones, UNREAL | extra))
    assert slots_of(m) == expected(bones, UNREAL | extra)
    # Without names, a twist leaf lying along the upper arm is not mistaken for the forearm.
    names = {b[0]: f"t{k}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m, MAIN) == {s: b for s, b in expected(bones, names).items() if s in MAIN}


def test_an_ik_foot_parented_to_the_root_is_found_where_the_shin_ends():
    bones = [("root", None, np.zeros(3), np.array([0.0, 0.0, 0.2]))]
    for i, p, h, t in body(fingers=False):
        parent = p
        if i == "hips":
            parent = "root"
        if i.startswith("foot."):
            parent = "root"  # Quaternius: the feet hang from the root bone, not from the shins
        bones.append((i, parent, h, t))
    bones.append(("pole.L", "root", np.array([0.1, -1.0, 0.5]), np.array([0.1, -1.0, 0.7])))
    bones.append(("pole.R", "root", np.array([-0.1, -1.0, 0.5]), np.array([-0.1, -1.0, 0.7])))
    names = {b[0]: f"bone{k}" for k, b in enumerate(bones)}
    names.update({"pole.L": "PoleTarget.L", "pole.R": "PoleTarget.R"})
    m = auto_map(*arrays(bones, names))
    exp = expected(bones, names)
    assert slots_of(m) == exp
    assert "parented elsewhere" in m.slots["foot.L"].reason


def test_clavicles_hanging_from_different_spine_bones():
    bones = [(i, "chest" if i == "shoulder.R" else p, h, t) for i, p, h, t in body(fingers=False)]
    names = {b[0]: f"s{k}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)


def test_a_flat_hierarchy_falls_back_to_names_and_says_so():
    # Every bone parented to one root: no chain to read, so names alone decide.
    bones = [("root", None, np.zeros(3), np.array([0.0, 0.0, 0.1]))]
    bones += [(i, "root", h, t) for i, _, h, t in body(fingers=False)]
    names = MIXAMO | {"root": "Armature"}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m, MINIMUM_SLOTS) == {s: MIXAMO[s] for s in MINIMUM_SLOTS}
    assert all("structure not recognised" in m.slots[s].reason for s in MINIMUM_SLOTS)
    assert all(m.slots[s].confidence <= 0.5 for s in MINIMUM_SLOTS)
    assert m.refusal is None
    # With meaningless names there is nothing to go on: refused, naming the missing slots.
    blank = auto_map(*arrays(bones, {b[0]: f"f{k}" for k, b in enumerate(bones)}))
    with pytest.raises(MappingError, match="missing hips, spine, head"):
        blank.require_humanoid()


def test_hips_named_bone_that_carries_only_the_spine_is_reported():
    # Quaternius-like: "Body" carries the legs and "Hips"; "Hips" carries only the spine.
    bones = []
    for i, p, h, t in body(fingers=False):
        if i == "hips":
            bones.append(("body", None, h, t))
            bones.append(("hips_upper", "body", h + [0, 0, 0.02], h + [0, 0, 0.10]))
            continue
        bones.append((i, "hips_upper" if i == "spine" else ("body" if p == "hips" else p), h, t))
    names = {b[0]: f"c{k}" for k, b in enumerate(bones)} | {"body": "Body", "hips_upper": "Hips"}
    m = auto_map(*arrays(bones, names))
    assert m.bone_for("hips") == "Body"
    assert m.slot_for("Hips") != "hips"
    assert any("'Hips' is named like the hips" in c for c in m.conflicts)


def test_biped_hangs_thighs_from_the_spine_and_clavicles_from_the_neck():
    bones = []
    for i, p, h, t in body(fingers=False):
        if i == "hips":
            bones.append(("bip", None, h - [0, 0, 0.05], h))
        parent = {
            "hips": "bip",
            "thigh.L": "spine",
            "thigh.R": "spine",
            "shoulder.L": "neck",
            "shoulder.R": "neck",
        }.get(i, p)
        bones.append((i, parent, h, t))
    names = BIPED | {"bip": "Bip01"}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)


def test_a_rigify_generated_rig_maps_its_deform_bones():
    # DEF- bones hang from ORG- bones; the deform hierarchy is recovered through the ORG twins.
    bones = body(fingers=False)
    out = [("root", None, np.zeros(3), np.array([0, 0.3, 0.0]))]
    for i, p, h, t in bones:
        out.append((f"ORG-{i}", "ORG-" + p if p else "root", h, t))
        out.append((f"DEF-{i}", "ORG-" + p if p else "root", h, t))
        out.append((f"{i}_fk", ("ORG-" + p) if p else "root", h, t))  # FK controls
    names = {o[0]: o[0].replace("ORG-" + k, "ORG-" + v).replace("DEF-" + k, "DEF-" + v).replace(k + "_fk", v + "_fk")
             for o in out for k, v in RIGIFY.items() if k in o[0]}  # fmt: skip
    m = auto_map(*arrays(out, names))
    assert m.convention == "rigify_generated"
    assert slots_of(m, MINIMUM_SLOTS) == {s: "DEF-" + RIGIFY[s] for s in MINIMUM_SLOTS}


def test_a_prop_in_one_hand_and_hair_and_skirt_chains_do_not_disturb_the_body():
    bones = body()
    hand = [b for b in bones if b[0] == "hand.R"][0]
    bones.append(("sword", "hand.R", hand[3].copy(), hand[3] + [0.0, -1.2, 0.0]))
    for s in (1.0, -1.0):
        parent = "head"
        for k in range(4):  # mirrored hair strands hanging from the head
            h = np.array([0.06 * s, 0.05, 1.75 - 0.1 * k])
            bones.append((f"hair{s}{k}", parent, h, h + [0.01 * s, 0.01, -0.1]))
            parent = f"hair{s}{k}"
        parent = "hips"
        for k in range(3):  # skirt panels hanging from the hips beside the thighs
            h = np.array([0.15 * s, -0.05, 0.95 - 0.12 * k])
            bones.append((f"skirt{s}{k}", parent, h, h + [0.03 * s, -0.01, -0.12]))
            parent = f"skirt{s}{k}"
    names = {b[0]: f"bone{k}" for k, b in enumerate(bones)}
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)


def test_mmd_split_pelvis_with_d_bones_and_ik_maps_the_animated_chain():
    # MMD: センター carries 上半身 (upper body) and 下半身 (lower body, the legs); each leg also has
    # a D-bone twin chain, and IK targets hang from the root.
    bones = [("root", None, np.zeros(3), np.array([0.0, 0.0, 0.1]))]
    for i, p, h, t in body(fingers=False):
        if i == "hips":
            bones.append(("hips", "root", h, h + [0.0, 0.0, 0.05]))
            bones.append(("lower", "hips", h, h - [0.0, 0.0, 0.08]))
            for s, x in (("L", 0.1), ("R", -0.1)):
                bones.append((f"cancel.{s}", "lower", np.array([x, 0.0, 0.95]), np.array([x, 0.0, 0.9])))
            continue
        bones.append((i, f"cancel.{i[-1]}" if i.startswith("thigh.") else p, h, t))
    names = dict(MMD) | {
        "root": "全ての親",
        "lower": "下半身",
        "cancel.L": "腰キャンセル左",
        "cancel.R": "腰キャンセル右",
    }
    for s, j in (("L", "左"), ("R", "右")):
        chain = [b for b in bones if b[0] in (f"thigh.{s}", f"shin.{s}", f"foot.{s}")]
        parent = f"cancel.{s}"
        for (i, _, h, t), word in zip(chain, ("足D", "ひざD", "足首D"), strict=True):
            bones.append((f"{i}.D", parent, h.copy(), t.copy()))
            names[f"{i}.D"] = j + word
            parent = f"{i}.D"
        foot = chain[-1]
        bones.append((f"ik.{s}", "root", foot[2].copy(), foot[2] + [0.0, -0.1, 0.0]))
        names[f"ik.{s}"] = j + "足ＩＫ"
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)
    assert m.convention == "mmd" and m.conflicts == []


def test_gltf_generic_names_place_bones_in_limbs_and_structure_orders_them():
    # Khronos CesiumMan: the left arm is numbered from the hand ("__2_") to the shoulder ("__4_").
    bones = [b for b in body(fingers=False) if not b[0].startswith(("shoulder.", "toes."))]
    bones = [(i, "upper_chest" if p and p.startswith("shoulder.") else p, h, t) for i, p, h, t in bones]
    names = {
        "hips": "Skeleton_torso_joint_1", "spine": "Skeleton_torso_joint_2", "chest": "torso_joint_3",
        "upper_chest": "torso_joint_4", "neck": "Skeleton_neck_joint_1", "head": "Skeleton_neck_joint_2",
        "upper_arm.L": "Skeleton_arm_joint_L__4_", "forearm.L": "Skeleton_arm_joint_L__3_",
        "hand.L": "Skeleton_arm_joint_L__2_", "upper_arm.R": "Skeleton_arm_joint_R",
        "forearm.R": "Skeleton_arm_joint_R__2_", "hand.R": "Skeleton_arm_joint_R__3_",
        **{f"{p}.{s}": f"leg_joint_{s}_{k}" for s in "LR" for k, p in enumerate(("thigh", "shin", "foot"), start=1)},
    }  # fmt: skip
    m = auto_map(*arrays(bones, names))
    assert slots_of(m) == expected(bones, names)
    assert "name places it in the arm" in m.slots["hand.L"].reason
    assert m.slots["hand.L"].confidence == pytest.approx(0.8)


# --- conflicts are reported, never silently resolved -----------------------------------------


def test_two_bones_claiming_one_slot_is_a_conflict():
    bones = body(fingers=False)
    bones.append(("dup", "forearm.L", np.array([0.6, 0.0, 1.47]), np.array([0.62, 0.0, 1.47])))
    # Bone names are unique in a rig; these two differ only by namespace, so both claim hand.L.
    m = auto_map(*arrays(bones, MIXAMO | {"dup": "mixamorig1:LeftHand"}))
    assert m.bone_for("hand.L") == "mixamorig:LeftHand"  # the one at the end of the forearm
    assert any("'mixamorig:LeftHand' and 'mixamorig1:LeftHand' all claim hand.L" in c for c in m.conflicts)


def test_names_out_of_anatomical_order_are_reported_and_structure_wins():
    bones = body(fingers=False)
    swapped = dict(MIXAMO)
    swapped["upper_arm.L"], swapped["forearm.L"] = MIXAMO["forearm.L"], MIXAMO["upper_arm.L"]
    m = auto_map(*arrays(bones, swapped))
    # The long bone leaving the clavicle is the upper arm whatever it is called.
    assert m.bone_for("upper_arm.L") == "mixamorig:LeftForeArm"
    assert m.bone_for("forearm.L") == "mixamorig:LeftArm"
    assert any("out of anatomical order" in c for c in m.conflicts)
    assert m.slots["upper_arm.L"].confidence < 0.9


def test_duplicate_claims_are_listed():
    bones = body(fingers=False)
    bones.append(("extra_head", "neck", np.array([0.0, -0.01, 1.62]), np.array([0.0, -0.01, 1.70])))
    m = auto_map(*arrays(bones, UNREAL | {"extra_head": "Head"}))
    assert m.bone_for("head") in ("head", "Head")
    assert any("all claim head by name" in c for c in m.conflicts)


# --- refusals -----------------------------------------------------------------------------------


def quadruped(names):
    """A four-legged animal: spine horizontal, four legs straight down, a tail."""
    bones = [
        ("hips", None, (0, 0.5, 0.6), (0, 0.4, 0.62)),
        ("spine", "hips", (0, 0.4, 0.62), (0, 0.0, 0.64)),
        ("chest", "spine", (0, 0.0, 0.64), (0, -0.4, 0.66)),
        ("neck", "chest", (0, -0.4, 0.66), (0, -0.55, 0.85)),
        ("head", "neck", (0, -0.55, 0.85), (0, -0.75, 0.85)),
        ("tail", "hips", (0, 0.5, 0.6), (0, 0.9, 0.7)),
    ]
    for s, x in (("L", 0.12), ("R", -0.12)):
        bones += [
            (f"thigh.{s}", "hips", (x, 0.5, 0.55), (x, 0.48, 0.3)),
            (f"shin.{s}", f"thigh.{s}", (x, 0.48, 0.3), (x, 0.52, 0.05)),
            (f"foot.{s}", f"shin.{s}", (x, 0.52, 0.05), (x, 0.45, 0.0)),
            (f"upper_arm.{s}", "chest", (x, -0.4, 0.6), (x, -0.4, 0.33)),
            (f"forearm.{s}", f"upper_arm.{s}", (x, -0.4, 0.33), (x, -0.41, 0.06)),
            (f"hand.{s}", f"forearm.{s}", (x, -0.41, 0.06), (x, -0.47, 0.0)),
        ]
    bones = [(i, p, np.array(h, float), np.array(t, float)) for i, p, h, t in bones]
    return arrays(bones, names)


def test_a_quadruped_is_refused_even_with_humanoid_names():
    fox_like = {
        "hips": "b_Hip_01", "spine": "b_Spine01_02", "chest": "b_Spine02_03", "neck": "b_Neck_04",
        "head": "b_Head_05", "upper_arm.L": "b_LeftUpperArm_09", "forearm.L": "b_LeftForeArm_010",
        "hand.L": "b_LeftHand_011", "upper_arm.R": "b_RightUpperArm_06", "forearm.R": "b_RightForeArm_07",
        "hand.R": "b_RightHand_08", "thigh.L": "b_LeftLeg01_015", "shin.L": "b_LeftLeg02_016",
        "foot.L": "b_LeftFoot01_017", "thigh.R": "b_RightLeg01_019", "shin.R": "b_RightLeg02_020",
        "foot.R": "b_RightFoot01_021",
    }  # fmt: skip
    for names in (fox_like, {}):
        m = auto_map(*quadruped(names))
        assert m.refusal is not None and "quadruped" in m.refusal
        assert not m.is_humanoid
        with pytest.raises(MappingError, match="upright spine"):
            m.require_humanoid()
        with pytest.raises(MappingError, match="quadruped"):
            check_humanoid(*quadruped(names))


def test_a_two_bone_rig_is_refused_naming_every_missing_slot():
    names = ["Node_1", "Node_2"]
    m = auto_map(names, [-1, 0], [[0, 0, 1], [0, 0, 1]], [[0, 1, 1], [0, 1, 1]])
    with pytest.raises(MappingError) as err:
        m.require_humanoid()
    msg = str(err.value)
    for slot in MINIMUM_SLOTS:
        assert slot in msg
    assert "2 bones" in msg


def test_a_rig_without_arms_is_refused_naming_the_arm_slots():
    bones = [b for b in body(fingers=False) if b[0].split(".")[0] not in ("shoulder", "upper_arm", "forearm", "hand")]
    with pytest.raises(MappingError) as err:
        check_humanoid(*arrays(bones, MIXAMO))
    msg = str(err.value)
    for slot in ("upper_arm.L", "forearm.L", "hand.L", "hand.R"):
        assert slot in msg
    assert "thigh.L, " not in msg.split("found:")[0]  # legs are not reported missing


def test_a_rig_with_no_bones_is_refused():
    m = auto_map([], np.zeros(0, int), np.zeros((0, 3)))
    with pytest.raises(MappingError, match="no bones"):
        m.require_humanoid()


def test_bad_arrays_are_refused_with_the_expected_shape():
    with pytest.raises(MappingError, match=r"heads must have shape \(2, 3\)"):
        auto_map(["a", "b"], [-1, 0], np.zeros((3, 3)))
    with pytest.raises(MappingError, match=r"parents must have shape \(2,\)"):
        auto_map(["a", "b"], [-1], np.zeros((2, 3)))
    with pytest.raises(MappingError, match="cycle"):
        auto_map(["a", "b"], [1, 0], np.zeros((2, 3)))
    with pytest.raises(MappingError, match="finite"):
        auto_map(["a", "b"], [-1, 0], [[0, 0, 0], [0, np.nan, 0]])


def test_check_humanoid_accepts_an_edited_mapping_and_checks_its_geometry():
    bones = body(fingers=False)
    n, p, h, t = arrays(bones, MIXAMO)
    m = check_humanoid(n, p, h, t)
    assert m.is_humanoid
    edited = m.with_bone("hand.L", None)
    with pytest.raises(MappingError, match=r"hand\.L"):
        check_humanoid(n, p, h, t, mapping=edited)
    with pytest.raises(MappingError, match="not in the rig"):
        check_humanoid(n, p, h, t, mapping=m.with_bone("head", "NoSuchBone"))
    qn, qp, qh, qt = quadruped({})
    forced = auto_map(*quadruped({}))
    forced = BoneMapping(forced.slots)  # drop the recorded refusal: geometry still refuses it
    with pytest.raises(MappingError, match="quadruped"):
        check_humanoid(qn, qp, qh, qt, mapping=forced)
    rest = np.tile(np.eye(4), (len(n), 1, 1))
    rest[:, :3, 3] = h
    sk = Skeleton.from_rest_matrices(n, [int(x) for x in p], rest)
    assert check_humanoid_skeleton(sk).bones() == auto_map_skeleton(sk).bones()


# --- the mapping as data ----------------------------------------------------------------------


def test_mapping_round_trips_through_json_and_files(tmp_path):
    m = auto_map(*arrays(body(), MIXAMO))
    again = BoneMapping.from_json(m.to_json())
    assert again == m
    data = json.loads(m.to_json())
    assert data["version"] == FORMAT_VERSION and data["format"] == "marionette.bone_mapping"
    path = tmp_path / "rig.json"
    m.save(path)
    assert BoneMapping.load(path) == m
    assert not list(tmp_path.glob("*.partial"))


def test_mapping_queries_and_edits():
    m = auto_map(*arrays(body(), MIXAMO))
    assert m.bone_for("hand.L") == "mixamorig:LeftHand"
    assert m.slot_for("mixamorig:LeftHand") == "hand.L"
    assert m.slot_for("nothing") is None
    assert m.missing() == []
    assert m.missing(["eye.L", "hips"]) == ["eye.L"]
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        m.bone_for("tail")
    edited = m.with_bone("hand.L", "mixamorig:LeftHandIndex1")
    assert edited.bone_for("hand.L") == "mixamorig:LeftHandIndex1"
    assert edited.bone_for("index_1.L") is None  # a bone fills one slot only
    assert edited.slots["hand.L"] == MappedBone("mixamorig:LeftHandIndex1", 1.0, "set by hand")
    assert edited != m and m.bone_for("hand.L") == "mixamorig:LeftHand"
    assert edited.missing() == []


def test_mapping_data_is_validated():
    with pytest.raises(MappingError, match="both"):
        BoneMapping({"hips": MappedBone("a", 1, ""), "spine": MappedBone("a", 1, "")})
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        BoneMapping({"tail": MappedBone("a", 1, "")})
    with pytest.raises(MappingError, match=r"\[0, 1\]"):
        MappedBone("a", 1.5, "")
    with pytest.raises(MappingError, match="newer"):
        BoneMapping.from_dict({"format": "marionette.bone_mapping", "version": FORMAT_VERSION + 1, "slots": {}})
    with pytest.raises(MappingError, match="not a Marionette"):
        BoneMapping.from_dict({"format": "something else"})
    with pytest.raises(MappingError, match="not valid JSON"):
        BoneMapping.from_json("{")
    # A hand-written preset may give bare bone names.
    m = BoneMapping.from_json('{"slots": {"hips": "pelvis", "head": "head"}}')
    assert m.bone_for("hips") == "pelvis" and m.slots["hips"].confidence == 1.0


# --- name rules and presets are one set of data ------------------------------------------------


def test_presets_are_written_from_the_name_rules(tmp_path):
    written = write_presets(tmp_path)
    assert {p.stem for p in written} == set(preset_names())
    shipped = REPO / "presets"
    for p in written:
        # The presets in the repository are exactly what the name tables produce.
        assert (shipped / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8"), p.name


@pytest.mark.parametrize("preset", ["mixamo", "rigify_metarig", "unreal_mannequin", "cmu_motionbuilder"])
def test_a_preset_matches_what_auto_mapping_finds_on_that_naming(preset):
    naming = {
        "mixamo": MIXAMO,
        "rigify_metarig": RIGIFY,
        "unreal_mannequin": UNREAL,
        "cmu_motionbuilder": CMU_MOTIONBUILDER,
    }[preset]
    bones = body(fingers="thumb_1.L" in naming)
    m = auto_map(*arrays(bones, naming))
    p = preset_mapping(preset)
    assert p.convention == m.convention
    for slot, bone in slots_of(m).items():
        assert p.bone_for(slot) == bone, slot


def test_every_convention_is_detected_from_its_own_preset():
    for conv in CONVENTIONS:
        for preset, _ in conv.presets:
            names = list(preset_mapping(preset).bones().values())
            found, count = detect_convention(names)
            assert found is conv, (preset, found)
            assert count == len(names)


def test_name_keys_fold_spelling_variants():
    assert name_key("upper_arm.L") == name_key("Upper Arm L") == name_key("upperarm_l")
    assert name_key("mixamorig:LeftArm") == name_key("mixamorig1:LeftArm") == name_key("LeftArm")
    assert name_key("左親指１") == name_key("左親指1")
    assert name_key("Bip001 L UpperArm") == name_key("Bip01 L UpperArm")


def test_methods_per_slot_travel_with_the_mapping_json(tmp_path):
    from marionette.core.mapping.bone_mapping import BoneMapping, MappedBone

    m = BoneMapping(
        {"hips": MappedBone("Hips", 1.0, "test"), "index_1.L": MappedBone("Index1.L", 0.9, "test")},
        methods={"hips": "rest-space", "index_1.L": "LOCAL_CURL", "thumb_1.L": "geometric"},
    )
    assert m.methods == {"hips": "REST_SPACE", "index_1.L": "LOCAL_CURL"}  # the default needs no entry
    path = tmp_path / "m.json"
    m.save(path)
    back = BoneMapping.load(path)
    assert back == m and back.methods == m.methods
    assert m.with_bone("hips", "Pelvis").methods == m.methods
    assert "methods" not in BoneMapping({"hips": MappedBone("Hips", 1.0, "t")}).to_dict()  # old files unchanged
    with pytest.raises(MappingError, match="unknown retarget method"):
        BoneMapping({}, methods={"hips": "magic"})


def test_a_mapping_file_reads_method_names_as_the_command_line_does():
    from marionette.core.mapping.bone_mapping import BoneMapping
    from marionette.core.mapping.method_names import parse_method_table

    # One spelling rule: what ``--methods`` accepts, a mapping file's ``methods`` accepts too.
    for spelling in ("rest", "Rest Space", "restspace", "REST-SPACE"):
        assert BoneMapping({}, methods={"hips": spelling}).methods == parse_method_table(f"hips={spelling}") == {"hips": "REST_SPACE"}
    with pytest.raises(MappingError, match="local curl is for finger slots"):
        BoneMapping({}, methods={"hips": "local-curl"})
