"""Humanoid bone mapping per naming on synthetic rigs (docs/mapping.md): each naming maps the body and is
recognised, meaningless names map by structure alone, and the shoulder bone is judged as clavicle
or upper arm."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.mapping.auto_map import auto_map, auto_map_skeleton
from marionette.core.mapping.humanoid import MINIMUM_SLOTS, mirror_slot
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.mapping_body import (
    CMU_3DSMAX,
    CMU_MOTIONBUILDER,
    MAIN,
    MIXAMO,
    NAMINGS,
    UNREAL,
    VROID,
    _insert,
    arrays,
    body,
    expected,
    rotation,
    slots_of,
)

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
