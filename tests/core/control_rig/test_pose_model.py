"""PoseModel against placements computed by hand from Blender's rules for each constraint kind:
two or three bones, rotations about armature axes, so every expected matrix is written out."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.control_rig.graph import Link, PoseModel, Unmodeled
from tests.helpers.control_rig_variants import graph, link, placement, rot

ATOL = 1e-9


def _basis(*rotations: np.ndarray) -> np.ndarray:
    """Local transforms over frames, one rotation per frame."""
    return np.stack([placement(r) for r in rotations])


def _two(kind: str, owner_rest: np.ndarray, influence: float = 1.0, **kw):
    """``ctrl`` (rest at (0, 0, 1), armature axes) and ``def`` (rest ``owner_rest``) held by one
    constraint of ``kind`` on ``ctrl``."""
    return graph([("ctrl", None, placement(at=(0, 0, 1))), ("def", None, owner_rest)], {"def": [link(kind, 0, influence=influence, **kw)]})


def test_copy_transforms_world_gives_the_owner_the_targets_placement_every_frame():
    g = _two("COPY_TRANSFORMS", placement(rot("x", 40), at=(1, 0, 0)))
    model = PoseModel(g, 3, {0: _basis(rot("z", 0), rot("z", 45), rot("z", 90))})
    want = np.stack([placement(rot("z", a), at=(0, 0, 1)) for a in (0, 45, 90)])
    np.testing.assert_allclose(model.world(1), want, atol=ATOL)


@pytest.mark.parametrize("influence, angle", [(0.5, 60.0), (0.25, 45.0), (0.75, 75.0)])
def test_copy_transforms_at_part_influence_is_a_slerp_of_rotations_and_a_lerp_of_locations(influence, angle):
    # The owner rests turned 30 deg about Y at (1, 0, 0); the target is turned 90 deg about Y at (0, 0, 1).
    g = _two("COPY_TRANSFORMS", placement(rot("y", 30), at=(1, 0, 0)), influence=influence)
    model = PoseModel(g, 1, {0: _basis(rot("y", 90))})
    want = placement(rot("y", angle), at=(1 - influence, 0, influence))
    np.testing.assert_allclose(model.world(1)[0], want, atol=ATOL)


def test_copy_rotation_world_keeps_the_owners_location():
    g = _two("COPY_ROTATION", placement(rot("x", 40), at=(1, 0, 0)))
    model = PoseModel(g, 1, {0: _basis(rot("z", 90))})
    np.testing.assert_allclose(model.world(1)[0], placement(rot("z", 90), at=(1, 0, 0)), atol=ATOL)


def test_copy_location_world_keeps_the_owners_rotation():
    g = _two("COPY_LOCATION", placement(rot("x", 40), at=(1, 0, 0)))
    model = PoseModel(g, 1, {0: _basis(rot("z", 90))})
    np.testing.assert_allclose(model.world(1)[0], placement(rot("x", 40), at=(0, 0, 1)), atol=ATOL)


def test_child_of_with_its_inverse_set_at_rest_carries_the_owner_about_the_targets_head():
    # Inverse set with the target at rest: the owner rests where it is, and follows the
    # target's turn about the target's head (0, 0, 1).
    inverse = np.linalg.inv(placement(at=(0, 0, 1)))
    g = _two("CHILD_OF", placement(at=(1, 0, 1)), matrix=inverse)
    model = PoseModel(g, 2, {0: _basis(rot("z", 0), rot("z", 90))})
    np.testing.assert_allclose(model.world(1)[0], placement(at=(1, 0, 1)), atol=ATOL)
    np.testing.assert_allclose(model.world(1)[1], placement(rot("z", 90), at=(0, 1, 1)), atol=ATOL)


def test_armature_constraint_on_one_bone_carries_the_owner_as_its_rest_offset_says():
    g = _two("ARMATURE", placement(rot("y", 20), at=(1, 0, 1)))
    model = PoseModel(g, 1, {0: _basis(rot("z", 90))})
    np.testing.assert_allclose(model.world(1)[0], placement(rot("z", 90) @ rot("y", 20), at=(0, 1, 1)), atol=ATOL)


def test_armature_constraint_on_two_bones_blends_their_matrices_linearly():
    # Two controls with their heads at the origin, one turned 90 deg about Z, one still; the
    # owner at (1, 0, 0) lands halfway between (0, 1, 0) and (1, 0, 0), its axes averaged (not a slerp).
    g = graph(
        [("a", None, placement()), ("b", None, placement()), ("def", None, placement(at=(1, 0, 0)))],
        {"def": [Link("ARMATURE", "Armature", 1.0, ((0, 0.5), (1, 0.5)))]},
    )
    model = PoseModel(g, 1, {0: _basis(rot("z", 90))})
    want = np.eye(4)
    want[:3, :3] = 0.5 * (rot("z", 90) + np.eye(3))
    want[:3, 3] = (0.5, 0.5, 0.0)
    np.testing.assert_allclose(model.world(2)[0], want, atol=ATOL)


def test_damped_track_turns_the_owners_y_axis_onto_the_targets_head_by_the_least_turn():
    g = graph([("owner", None, placement()), ("goal", None, placement(at=(3, 0, 0)))], {"owner": [link("DAMPED_TRACK", 1)]})
    model = PoseModel(g, 1)
    # Y onto +X is a -90 deg turn about Z: X goes to -Y, Z stays.
    np.testing.assert_allclose(model.world(0)[0], placement(rot("z", -90)), atol=ATOL)


@pytest.mark.parametrize(
    "volume, sx, sz", [("NO_VOLUME", 1.0, 1.0), ("VOLUME_XZX", np.sqrt(0.5), np.sqrt(0.5)), ("VOLUME_X", 0.5, 1.0), ("VOLUME_Z", 1.0, 0.5)]
)
def test_stretch_to_turns_y_onto_the_target_and_scales_by_distance_over_rest_length(volume, sx, sz):
    # Owner at the origin, Y along +Y, rest length 1; target head at (0, 0, 2): Y turns onto +Z
    # (90 deg about X) and doubles; X and Z by the volume rule with bulge 1.
    g = graph(
        [("owner", None, placement()), ("goal", None, placement(at=(0, 0, 2)))],
        {"owner": [link("STRETCH_TO", 1, stretch=(1.0, volume, 1.0))]},
    )
    got = PoseModel(g, 1).world(0)[0]
    want = placement(rot("x", 90) @ np.diag([sx, 2.0, sz]))
    np.testing.assert_allclose(got, want, atol=ATOL)


def test_a_child_follows_a_parent_placed_by_a_constraint():
    # def copies ctrl; its child keeps its rest offset from def ((0, 1, 0) from def's head).
    g = graph(
        [("ctrl", None, placement(at=(0, 0, 1))), ("def", None, placement(at=(0, 0, 1))), ("kid", "def", placement(at=(0, 1, 1)))],
        {"def": [link("COPY_TRANSFORMS", 0)]},
    )
    model = PoseModel(g, 1, {0: _basis(rot("z", 90))})
    np.testing.assert_allclose(model.world(2)[0], placement(rot("z", 90), at=(-1, 0, 1)), atol=ATOL)


def test_a_driver_copy_gives_the_owner_the_controls_local_transform():
    g = graph([("ctrl", None, placement(at=(0, 0, 1))), ("def", None, placement(at=(1, 0, 0)))], drivers={"def": ("ctrl", ("ctrl",), "drivers set its rotation_quaternion")})
    model = PoseModel(g, 1, {0: _basis(rot("x", 30))})
    np.testing.assert_allclose(model.world(1)[0], placement(rot("x", 30), at=(1, 0, 0)), atol=ATOL)


def test_a_driver_that_computes_from_a_keyed_bone_is_unmodeled_and_named():
    g = graph([("ctrl", None, placement()), ("def", None, placement())], drivers={"def": (None, ("ctrl",), "drivers set its rotation_euler")})
    with pytest.raises(Unmodeled) as got:
        PoseModel(g, 1, {0: _basis(rot("x", 30))}).world(1)
    assert got.value.bone == "def" and "rotation_euler" in got.value.why


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: link("IK", 0), "Ik 'Ik'"),
        (lambda: link("COPY_TRANSFORMS", 0, exact=False), "Copy Transforms"),
        (lambda: link("COPY_ROTATION", 0, space="OTHER"), "space"),
        (lambda: link("CHILD_OF", -1), "not a bone of the rig"),
        (lambda: link("COPY_ROTATION", 0, mix="ADD"), "mix mode ADD"),
    ],
)
def test_a_relation_the_model_does_not_follow_raises_unmodeled_naming_the_bone(make, words):
    g = graph([("ctrl", None, placement()), ("def", None, placement())], {"def": [make()]})
    with pytest.raises(Unmodeled) as got:
        PoseModel(g, 1, {0: _basis(rot("x", 30))}).world(1)
    assert got.value.bone == "def"
    assert words in str(got.value)
