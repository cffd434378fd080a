"""Humanoid bone mapping conflicts and refusals (docs/mapping.md): conflicts are reported, never silently
resolved; non-humanoid rigs and bad arrays are refused naming what is missing."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.auto_map import auto_map, auto_map_skeleton
from marionette.core.mapping.bone_mapping import BoneMapping
from marionette.core.mapping.humanoid import MINIMUM_SLOTS
from marionette.core.mapping.humanoid_check import check_humanoid, check_humanoid_skeleton
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.mapping_body import MIXAMO, UNREAL, arrays, body

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
