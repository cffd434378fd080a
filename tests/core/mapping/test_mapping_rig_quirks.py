"""Humanoid bone mapping of real-rig quirks rebuilt on synthetic rigs (docs/mapping.md): helper and twist
bones, extra segments, IK feet, flat hierarchies, Biped, Rigify, props and MMD bones."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.auto_map import auto_map
from marionette.core.mapping.humanoid import MINIMUM_SLOTS
from tests.helpers.mapping_body import (
    BIPED,
    MAIN,
    MIXAMO,
    MMD,
    RIGIFY,
    UNREAL,
    _insert,
    arrays,
    body,
    expected,
    slots_of,
)

# --- real-rig quirks, rebuilt -----------------------------------------------------------------


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
