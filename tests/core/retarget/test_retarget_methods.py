"""Per-bone method choice (docs/methods.md#choosing-the-method-per-bone): the combined result keeps, bone by bone, what the chosen
method gives; local curl keeps each finger segment's turn relative to the segment above it."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import ClipError, MappingError
from marionette.core.mapping.humanoid import FINGER_SLOTS, SLOTS
from marionette.core.mapping.method_names import (
    GEOMETRIC,
    LOCAL_CURL,
    REST_SPACE,
    check_method_table,
    parse_method_table,
)
from marionette.core.measure.figures import frames_in_motion, segment_vectors
from marionette.core.retarget.binding_cache import BindingCache
from marionette.core.retarget.geometric import bind, retarget, source_placements
from marionette.core.retarget.methods import combine_methods, retarget_with_methods
from marionette.core.retarget.rest_space import bind_rest_space, retarget_rest_space
from marionette.core.rig import rotations as R
from marionette.core.rig.samples import SampleRig, bone_matrix, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.rig_inputs import rig_input

SOURCE = sample_humanoid()
CLIP = sample_walk(SOURCE, frames=24)



def both(target: SampleRig, clip=CLIP, **kw):
    g = retarget(bind(rig_input(SOURCE), rig_input(target)), clip)
    r = retarget_rest_space(bind_rest_space(rig_input(SOURCE), rig_input(target), **kw), clip)
    return g, r


def world(rig: SampleRig, clip):
    return rig.skeleton.forward_kinematics(clip.rotations, clip.translations)


def angles_deg(a, b):
    return np.degrees(R.quat_angle_between(R.quat_from_matrix(a), R.quat_from_matrix(b)))


def with_root_ik_feet_and_spine2(rig: SampleRig) -> SampleRig:
    """A root bone carrying the hips and the feet (IK-style), and an unmapped bone between the
    spine and the chest: every special case of the combining walk in one rig."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    heads = rest[:, :3, 3]
    mid = 0.5 * (heads[sk.index("Spine")] + heads[sk.index("Chest")])
    mats = {n: rest[i] for i, n in enumerate(sk.names)}
    tails = dict(zip(sk.names, rig.tails, strict=True))
    mats["Spine"], tails["Spine"] = bone_matrix(heads[sk.index("Spine")], mid), mid
    mats["Spine2"], tails["Spine2"] = bone_matrix(mid, heads[sk.index("Chest")]), heads[sk.index("Chest")]
    mats["Root"], tails["Root"] = bone_matrix([0, 0, 0], [0, 0.3, 0]), np.array([0.0, 0.3, 0.0])
    parent = {n: (None if p < 0 else sk.names[p]) for n, p in zip(sk.names, sk.parents, strict=True)}
    parent.update({"Root": None, "Hips": "Root", "Foot.L": "Root", "Foot.R": "Root", "Spine2": "Spine", "Chest": "Spine2"})
    names = ["Root", *sk.names, "Spine2"]
    out = Skeleton.from_rest_matrices(names, [parent[n] for n in names], np.stack([mats[n] for n in names]))
    return SampleRig(out, rig.slots, np.stack([tails[n] for n in out.names]))


def lowered_arms(rig: SampleRig, degrees: float) -> SampleRig:
    sk = rig.skeleton
    rest = sk.rest_placements().copy()
    tails = rig.tails.copy()
    for side, sign in (("L", 1.0), ("R", -1.0)):
        top = sk.index(f"UpperArm.{side}")
        pivot = rest[top, :3, 3].copy()
        g = R.matrix_from_quat(R.quat_from_axis_angle([0.0, 1.0, 0.0], sign * np.radians(degrees)))
        for i in [top, *sk.descendants(top)]:
            rest[i, :3, :3] = g @ rest[i, :3, :3]
            rest[i, :3, 3] = g @ (rest[i, :3, 3] - pivot) + pivot
            tails[i] = g @ (tails[i] - pivot) + pivot
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    return SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest), rig.slots, tails)


TARGET = with_root_ik_feet_and_spine2(sample_humanoid(proportions=0.9, rolls=np.random.default_rng(2).uniform(-3.0, 3.0, 51)))


def test_no_table_is_exactly_the_geometric_result():
    outcome = retarget_with_methods(BindingCache(), rig_input(SOURCE), rig_input(TARGET), CLIP)
    plain = retarget(bind(rig_input(SOURCE), rig_input(TARGET)), CLIP)
    assert not outcome.native and outcome.rest_space is None
    assert np.array_equal(outcome.result.clip.rotations, plain.clip.rotations)
    assert np.array_equal(outcome.result.clip.translations, plain.clip.translations)


@pytest.mark.parametrize("method", [GEOMETRIC, REST_SPACE])
def test_one_method_everywhere_reproduces_that_method(method):
    g, r = both(TARGET)
    combined = combine_methods(g, r, dict.fromkeys(SLOTS, method))
    expected = g.clip if method == GEOMETRIC else r.clip
    wc, we = world(TARGET, combined.result.clip), world(TARGET, expected)
    assert angles_deg(wc[..., :3, :3], we[..., :3, :3]).max() < 1e-9
    assert np.abs(wc[..., :3, 3] - we[..., :3, 3]).max() < 1e-9
    assert np.array_equal(combined.result.clip.coverage, expected.coverage)
    assert set(combined.bone_methods) == {method}


def test_mixed_table_keeps_each_bones_own_method_orientation():
    target = lowered_arms(TARGET, 40.0)  # rest-space without rest matching gets these arms wrong
    g, r = both(target)
    table = parse_method_table("geometric,arms=rest-space,legs=rest-space")
    combined = combine_methods(g, r, table)
    wc, wg, wr = world(target, combined.result.clip), world(target, g.clip), world(target, r.clip)
    sk = target.skeleton
    by_method = {GEOMETRIC: wg, REST_SPACE: wr}
    checked = {GEOMETRIC: 0, REST_SPACE: 0}
    for i, m in enumerate(combined.bone_methods):
        if combined.result.clip.coverage[i] > 0:
            assert angles_deg(wc[:, i, :3, :3], by_method[m][:, i, :3, :3]).max() < 1e-9, sk.names[i]
            checked[m] += 1
    assert checked[GEOMETRIC] >= 20 and checked[REST_SPACE] >= 14
    names = dict(zip(sk.names, combined.bone_methods, strict=True))
    assert names["UpperArm.L"] == REST_SPACE and names["Chest"] == GEOMETRIC and names["Spine2"] == GEOMETRIC
    assert names["Index2.R"] == GEOMETRIC  # a slot the table leaves out takes the default
    # The two methods really disagree on those arms (so the check above is not vacuous).
    arm = sk.index("UpperArm.L")
    assert angles_deg(wg[:, arm, :3, :3], wr[:, arm, :3, :3]).min() > 30.0
    # The feet (IK-style, on the root) are placed from the combined legs.
    foot, shin = sk.index("Foot.L"), sk.index("Shin.L")
    rest = sk.rest_placements()
    offset = (np.linalg.inv(rest[shin]) @ rest[foot])[:3, 3]
    expected = wc[:, shin, :3, :3] @ offset + wc[:, shin, :3, 3]
    assert np.abs(wc[:, foot, :3, 3] - expected).max() < 1e-9


def _angle_deg(a, b):
    """Angle between paired vectors, accurate near zero (atan2 rather than arccos)."""
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1)))


def _relative_finger_directions(binding, placements, side):
    """Each finger segment's direction in its reference slot's geometric frame, ``(T, 3)``."""
    frames = frames_in_motion(binding, placements, side)
    segs = segment_vectors(binding, placements, side)
    out = {}
    for slot in FINGER_SLOTS:
        ref = slot.replace("_2.", "_1.").replace("_3.", "_2.") if not slot.split(".")[0].endswith("_1") else "hand." + slot[-1]
        d = segs[slot] / np.linalg.norm(segs[slot], axis=-1, keepdims=True)
        out[slot] = np.einsum("tji,tj->ti", frames[ref], d)
    return out


def test_local_curl_keeps_finger_curl_relative_to_the_hand():
    # Rest-space hands on a target whose arms rest lower (no rest matching): the hands end up 40
    # degrees off. Fingers by local curl still curl exactly as the source's do relative to the
    # hand; fingers by geometric frames keep their world orientation and break at the knuckles.
    target = lowered_arms(sample_humanoid(proportions=1.1, rolls=np.random.default_rng(9).uniform(-3.0, 3.0, 51)), 40.0)
    g, r = both(target)
    curl = combine_methods(g, r, parse_method_table("arms=rest-space,fingers=local-curl"))
    stiff = combine_methods(g, r, parse_method_table("arms=rest-space"))
    binding = g.binding
    src = _relative_finger_directions(binding, source_placements(binding, CLIP), "source")
    got = _relative_finger_directions(binding, world(target, curl.result.clip), "target")
    off = _relative_finger_directions(binding, world(target, stiff.result.clip), "target")
    worst = max(float(_angle_deg(src[s], got[s]).max()) for s in FINGER_SLOTS)
    assert worst < 1e-9
    knuckles = [s for s in FINGER_SLOTS if s.split(".")[0].endswith("_1")]
    broken = min(float(_angle_deg(src[s], off[s]).min()) for s in knuckles)
    assert broken > 20.0
    sk = target.skeleton
    assert dict(zip(sk.names, curl.bone_methods, strict=True))["Middle2.L"] == LOCAL_CURL
    assert curl.result.clip.coverage[sk.index("Middle2.L")] == 1.0


def test_parse_method_table():
    assert parse_method_table("") == {}
    assert parse_method_table("geometric") == {}
    everything = parse_method_table("rest-space")
    assert set(everything) == set(SLOTS) and set(everything.values()) == {REST_SPACE}
    curl = parse_method_table("local-curl")
    assert set(curl) == set(FINGER_SLOTS) and set(curl.values()) == {LOCAL_CURL}
    mixed = parse_method_table("rest-space, trunk=geometric, fingers=local-curl, hand.L=Geometric")
    assert mixed["upper_arm.R"] == REST_SPACE and "hips" not in mixed and "hand.L" not in mixed
    assert mixed["thumb_2.L"] == LOCAL_CURL and mixed["toes.R"] == REST_SPACE
    with pytest.raises(MappingError, match="unknown retarget method"):
        parse_method_table("ik")
    with pytest.raises(MappingError, match="neither a humanoid slot nor a group"):
        parse_method_table("tail=rest-space")
    with pytest.raises(MappingError, match="finger slots"):
        parse_method_table("trunk=local-curl")


def test_refusals():
    with pytest.raises(MappingError, match="finger slots"):
        check_method_table({"hand.L": "LOCAL_CURL"})
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        check_method_table({"tail": "GEOMETRIC"})
    g, r = both(TARGET)
    short = retarget_rest_space(r.binding, CLIP.subset(CLIP.names).__class__.from_frames(CLIP.names, CLIP.rotations[:5], CLIP.translations[:5], fps=CLIP.fps))
    with pytest.raises(ClipError, match="not of one clip"):
        combine_methods(g, short, {})
    other = retarget_rest_space(bind_rest_space(rig_input(SOURCE), rig_input(SOURCE)), CLIP)
    with pytest.raises(MappingError, match="different target rigs"):
        combine_methods(g, other, {})
