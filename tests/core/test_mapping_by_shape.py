"""Feet and hands found by shape wherever the hierarchy hangs them, and the refusal that helps
when one cannot be found (core.limb_ends, core.mapping)."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.auto_map import auto_map
from marionette.core.mapping.bone_mapping import FIX_ADVICE
from marionette.core.mapping.humanoid_check import check_humanoid
from marionette.core.rig.samples import sample_humanoid


def _arrays():
    sample = sample_humanoid()
    sk = sample.skeleton
    heads = sk.rest_placements()[:, :3, 3].copy()
    return list(sk.names), sk.parents.copy(), heads, sample.tails.copy()


def _detach(names, parents, heads, tails, bone, new_parent, offset):
    """``bone`` hung from ``new_parent`` and moved, with what hangs from it, by ``offset``."""
    i = names.index(bone)
    parents[i] = names.index(new_parent)
    moved = [i]
    for j in range(len(names)):
        k = j
        while k >= 0 and k != i:
            k = int(parents[k])
        if k == i and j != i:
            moved.append(j)
    heads[moved] += offset
    tails[moved] += offset


def _shin(names, heads):
    knee, ankle = heads[names.index("Shin.L")], heads[names.index("Foot.L")]
    return knee, ankle, float(np.linalg.norm(ankle - knee))


@pytest.mark.parametrize("share", [0.0, 0.11, 0.52])
def test_a_foot_under_the_root_is_found_where_the_shin_ends(share):
    # The two refused glTF characters had their IK feet 11 % and 52 % of the shin's length away.
    names, parents, heads, tails = _arrays()
    _, _, shin = _shin(names, heads)
    for side in "LR":
        _detach(names, parents, heads, tails, f"Foot.{side}", "Hips", np.array([0.0, -share * shin, 0.0]))
    m = auto_map(names, parents, heads, tails)
    assert m.bone_for("foot.L") == "Foot.L" and m.bone_for("foot.R") == "Foot.R"
    assert m.bone_for("toes.L") == "Toes.L" and m.bone_for("toes.R") == "Toes.R"
    assert "parented elsewhere" in m.slots["foot.L"].reason


def test_a_hand_under_the_root_with_a_pole_beside_the_elbow_is_found():
    names, parents, heads, tails = _arrays()
    for side in "LR":
        _detach(names, parents, heads, tails, f"Hand.{side}", "Hips", np.zeros(3))
    elbow = heads[names.index("Forearm.L")]
    names.append("Bone.pole")
    parents = np.append(parents, names.index("Hips"))
    heads = np.vstack([heads, elbow + [0.0, 0.4, 0.0]])
    tails = np.vstack([tails, elbow + [0.0, 0.5, 0.0]])
    m = auto_map(names, parents, heads, tails)
    assert m.bone_for("hand.L") == "Hand.L" and m.bone_for("hand.R") == "Hand.R"
    assert m.bone_for("forearm.L") == "Forearm.L"
    assert m.bone_for("index_1.L") == "Index1.L"


def test_near_zero_bone_lengths_map_as_the_joints_say():
    names, parents, heads, tails = _arrays()
    plain = auto_map(names, parents, heads, tails)
    direction = tails - heads
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    tiny = auto_map(names, parents, heads, heads + 1e-4 * direction)
    assert tiny.bones() == plain.bones()


def _unrecognisable_foot():
    """The left foot hung from the hips with its head a fifth of the way down the shin."""
    names, parents, heads, tails = _arrays()
    knee, ankle, _ = _shin(names, heads)
    _detach(names, parents, heads, tails, "Foot.L", "Hips", 0.2 * (ankle - knee) - (ankle - knee))
    return names, parents, heads, tails


def test_a_refusal_names_the_missing_slot_the_nearest_bones_why_and_the_fix():
    names, parents, heads, tails = _unrecognisable_foot()
    m = auto_map(names, parents, heads, tails)
    assert m.missing() == ["foot.L"]
    with pytest.raises(MappingError) as info:
        m.require_humanoid()
    text = str(info.value)
    assert "missing foot.L" in text
    assert "foot.L not found: nearest 'Foot.L' (its head is not past the knee)" in text
    assert FIX_ADVICE in text and "Bone Mapping list" in text and "--mapping FILE" in text
    # Picking the bone by hand, as the message says, makes the rig retargetable.
    fixed = check_humanoid(names, parents, heads, tails, m.with_bone("foot.L", "Foot.L"))
    assert fixed.bone_for("foot.L") == "Foot.L"


def _anonymous(names):
    return ["Bone" if k == 0 else f"Bone.{k:03d}" for k in range(len(names))]


def test_a_sword_that_is_the_hands_only_child_is_neither_arm_nor_finger():
    sample = sample_humanoid(fingers=False)
    sk = sample.skeleton
    names, parents = list(sk.names), sk.parents.copy()
    heads, tails = sk.rest_placements()[:, :3, 3].copy(), sample.tails.copy()
    plain = auto_map(_anonymous(names), parents, heads, tails)
    hand = names.index("Hand.R")
    grip = heads[hand]
    names.append("Sword")
    parents = np.append(parents, hand)
    heads = np.vstack([heads, grip])
    tails = np.vstack([tails, grip + [0.0, -1.1, 0.0]])  # a blade longer than the arm, held forward
    armed = auto_map(_anonymous(names), parents, heads, tails)
    assert armed.bones() == plain.bones()
    assert plain.bone_for("hand.R") == _anonymous(names)[hand]


def test_a_pelvis_bone_starting_below_the_hip_joints_is_not_the_spine():
    names, parents, heads, tails = _arrays()
    plain = auto_map(_anonymous(names), parents, heads, tails)
    hips, spine = names.index("Hips"), names.index("Spine")
    # A bone from under the pelvis up to the spine's start, between the hips and the spine.
    low = heads[hips] - [0.0, 0.0, 0.15]
    names.append("Pelvis")
    parents = np.append(parents, hips)
    heads = np.vstack([heads, low])
    tails = np.vstack([tails, heads[spine]])
    parents[spine] = len(names) - 1
    assert heads[-1][2] < heads[names.index("Thigh.L")][2]
    got = auto_map(_anonymous(names), parents, heads, tails)
    anon = _anonymous(names)
    assert got.bone_for("spine") == plain.bone_for("spine") == anon[spine]
    assert got.slot_for(anon[-1]) is None


def test_a_foot_under_the_root_is_found_when_the_shins_tail_points_elsewhere():
    # An importer's guess at a leaf's tail: the shin, its foot hung elsewhere, ends up pointing
    # forward from the knee instead of down to the ankle.
    names, parents, heads, tails = _arrays()
    for side in "LR":
        _detach(names, parents, heads, tails, f"Foot.{side}", "Hips", np.zeros(3))
        shin = names.index(f"Shin.{side}")
        length = float(np.linalg.norm(tails[shin] - heads[shin]))
        tails[shin] = heads[shin] + length * np.array([0.0, -0.8, -0.6])
    m = auto_map(names, parents, heads, tails)
    assert m.bone_for("foot.L") == "Foot.L" and m.bone_for("foot.R") == "Foot.R"


def test_a_thumb_hung_from_a_fingers_first_bone_leaves_the_fingers_as_they_were():
    names, parents, heads, tails = _arrays()
    plain = auto_map(_anonymous(names), parents, heads, tails)
    parents[names.index("Thumb1.R")] = names.index("Index1.R")
    moved = auto_map(_anonymous(names), parents, heads, tails)
    assert moved.bones() == plain.bones()
    assert plain.bone_for("index_1.R") == _anonymous(names)[names.index("Index1.R")]


def _grow(names, parents, heads, tails, bones):
    """``bones`` (name, parent name, head, tail) added to the rig's arrays."""
    for name, parent, head, tail in bones:
        names.append(name)
        parents = np.append(parents, names.index(parent))
        heads = np.vstack([heads, head])
        tails = np.vstack([tails, tail])
    return names, parents, heads, tails


def test_a_lone_finger_beside_the_thumb_is_the_index_without_names():
    # CMU's skeleton and mitten hands keep the thumb and one finger.
    sample = sample_humanoid(fingers=False)
    sk = sample.skeleton
    names, parents = list(sk.names), sk.parents.copy()
    heads, tails = sk.rest_placements()[:, :3, 3].copy(), sample.tails.copy()
    bones = []
    for side, sx in (("L", 1.0), ("R", -1.0)):
        wrist = heads[names.index(f"Hand.{side}")]
        bones += [
            (f"Thumb.{side}", f"Hand.{side}", wrist + [0.03 * sx, -0.035, -0.01], wrist + [0.06 * sx, -0.05, -0.01]),
            (f"Finger.{side}", f"Hand.{side}", wrist + [0.09 * sx, -0.01, 0.0], wrist + [0.13 * sx, -0.01, 0.0]),
            (f"Finger1.{side}", f"Finger.{side}", wrist + [0.13 * sx, -0.01, 0.0], wrist + [0.17 * sx, -0.01, 0.0]),
        ]
    names, parents, heads, tails = _grow(names, parents, heads, tails, bones)
    anon = _anonymous(names)
    m = auto_map(anon, parents, heads, tails)
    for side in "LR":
        assert m.bone_for(f"thumb_1.{side}") == anon[names.index(f"Thumb.{side}")]
        assert m.bone_for(f"index_1.{side}") == anon[names.index(f"Finger.{side}")]
        assert m.bone_for(f"index_2.{side}") == anon[names.index(f"Finger1.{side}")]
        assert m.bone_for(f"middle_1.{side}") is None


def test_the_eyes_and_jaw_of_a_face_rig_are_found_among_brows_lids_and_cheeks_without_names():
    # Rigify's face metarig, in outline: every face part below comes in a mirrored pair beside the eyes.
    names, parents, heads, tails = _arrays()
    o = heads[names.index("Head")]
    half = [  # (name, parent, head, tail) for the left side, relative to the head joint
        ("eye", "face", (0.052, -0.096, 0.113), (0.052, -0.12, 0.113)),
        ("lid", "face", (0.077, -0.097, 0.114), (0.068, -0.111, 0.119)),
        ("lid.001", "lid", (0.068, -0.111, 0.119), (0.055, -0.119, 0.121)),
        ("brow", "face", (0.079, -0.099, 0.121), (0.07, -0.11, 0.127)),
        ("brow.001", "brow", (0.07, -0.11, 0.127), (0.058, -0.118, 0.128)),
        ("cheek", "face", (0.085, -0.069, 0.106), (0.056, -0.118, 0.071)),
        ("cheek.001", "cheek", (0.056, -0.118, 0.071), (0.019, -0.12, 0.101)),
        ("nostril", "cheek.001", (0.019, -0.12, 0.101), (0.018, -0.138, 0.062)),
        ("nostril.001", "nostril", (0.018, -0.138, 0.062), (0.0, -0.172, 0.064)),
        ("temple", "face", (0.087, -0.035, 0.171), (0.093, -0.037, 0.093)),
    ]
    middle = [
        ("face", "Head", (0.0, 0.0, 0.0), (0.0, 0.0, 0.091)),
        ("nose", "face", (0.0, -0.129, 0.117), (0.0, -0.158, 0.078)),
        ("nose.001", "nose", (0.0, -0.158, 0.078), (0.0, -0.172, 0.064)),
        ("jaw", "face", (0.0, -0.069, -0.037), (0.0, -0.127, -0.042)),
        ("chin", "jaw", (0.0, -0.127, -0.042), (0.0, -0.138, -0.012)),
        ("teeth", "face", (0.0, -0.132, 0.04), (0.0, -0.086, 0.04)),
        ("tongue", "face", (0.0, -0.11, 0.014), (0.0, -0.085, 0.019)),
    ]
    bones = [(n, p, o + h, o + t) for n, p, h, t in middle]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        flip = np.array([sx, 1.0, 1.0])
        for n, p, h, t in half:
            parent = p if p == "face" else f"{p}.{side}"
            bones.append((f"{n}.{side}", parent, o + flip * h, o + flip * t))
    names, parents, heads, tails = _grow(names, parents, heads, tails, bones)
    anon = _anonymous(names)
    m = auto_map(anon, parents, heads, tails)
    assert m.bone_for("eye.L") == anon[names.index("eye.L")]
    assert m.bone_for("eye.R") == anon[names.index("eye.R")]
    assert m.bone_for("jaw") == anon[names.index("jaw")]
