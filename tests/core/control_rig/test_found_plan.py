"""The plan found by following constraints, on small hand-made rigs: which control each mapped
bone is keyed through, and the refusals that name the bone and the relation."""

from __future__ import annotations

import pytest

from marionette.core.control_rig.found import found_plan
from marionette.core.control_rig.graph import Link
from marionette.core.control_rig.plan import Copy, Follow, Match
from marionette.core.errors import RigError
from tests.helpers.control_rig_variants import graph, link, placement


def _rig(links=None, drivers=None, extra=()):
    """``ctrl`` (a control) -> ``org`` -> ``def``, each a root bone, plus ``extra`` bones."""
    bones = [("ctrl", None, placement(at=(0, 0, 1))), ("org", None, placement(at=(0, 0, 1))), ("def", None, placement(at=(0, 0, 1)))]
    return graph(bones + list(extra), links, drivers, controls={"ctrl"})


def test_a_chain_of_copies_is_followed_to_the_control():
    g = _rig({"def": [link("COPY_TRANSFORMS", 1)], "org": [link("CHILD_OF", 0)]})
    # A copy then a Child Of: the Child Of is turned back on the way, through the bones walked.
    assert found_plan(g, ["def"]).steps == (Follow("ctrl", "def", ("org", "ctrl")),)


def test_an_armature_constraint_on_one_bone_at_full_weight_is_followed_to_that_bone():
    g = _rig({"def": [link("ARMATURE", 0)]})
    assert found_plan(g, ["def"]).steps == (Follow("ctrl", "def", ("ctrl",)),)


def test_the_last_full_copy_transforms_wins_and_a_copy_of_scale_changes_nothing():
    g = _rig({"def": [link("COPY_TRANSFORMS", 1), link("COPY_TRANSFORMS", 0), link("COPY_SCALE", 1)]})
    assert found_plan(g, ["def"]).steps == (Match("ctrl", "def"),)


def test_a_bone_whose_channels_drivers_copy_is_keyed_through_the_copied_control():
    g = _rig(drivers={"def": ("ctrl", ("ctrl",), "drivers set its rotation_quaternion")})
    assert found_plan(g, ["def"]).steps == (Copy("ctrl", "def"),)


def test_a_free_bone_is_keyed_itself_and_two_bones_on_one_control_key_it_once():
    extra = [("def2", None, placement(at=(1, 0, 1)))]
    g = _rig({"def": [link("COPY_TRANSFORMS", 0)], "def2": [link("CHILD_OF", 0)]}, extra=extra)
    assert found_plan(g, ["def", "def2", "org"]).steps == (Match("ctrl", "def"), Match("org", "org"))


def test_controls_are_keyed_parents_first_whatever_order_the_bones_are_mapped_in():
    bones = [
        ("hand_ctl", "arm_ctl", placement(at=(2, 0, 1))),
        ("arm_ctl", None, placement(at=(1, 0, 1))),
        ("hand", None, placement(at=(2, 0, 1))),
        ("arm", None, placement(at=(1, 0, 1))),
    ]
    g = graph(bones, {"hand": [link("COPY_TRANSFORMS", 0)], "arm": [link("COPY_TRANSFORMS", 1)]}, controls={"hand_ctl", "arm_ctl"})
    assert found_plan(g, ["hand", "arm"]).steps == (Match("arm_ctl", "arm"), Match("hand_ctl", "hand"))


@pytest.mark.parametrize(
    "links, drivers, words",
    [
        ({"def": [link("IK", 0)]}, None, "'def' (Ik 'Ik')"),
        ({"def": [link("DAMPED_TRACK", -1)]}, None, "'def' (Damped Track 'Damped Track')"),
        ({"def": [link("COPY_TRANSFORMS", 0, influence=0.5)]}, None, "'def' (Copy Transforms 'Copy Transforms')"),
        ({"def": [link("COPY_TRANSFORMS", 0, space="LOCAL")]}, None, "'def' (Copy Transforms"),
        ({"def": [link("COPY_TRANSFORMS", 0), link("COPY_ROTATION", 1)]}, None, "'def' (Copy Rotation 'Copy Rotation')"),
        ({"def": [Link("ARMATURE", "Armature", 1.0, ((0, 0.5), (1, 0.5)))]}, None, "'def' (Armature 'Armature')"),
        ({"def": [link("COPY_TRANSFORMS", 1)], "org": [link("IK", 0)]}, None, "'def' (Ik 'Ik' on 'org')"),
        (None, {"def": (None, ("ctrl",), "drivers set its rotation_euler")}, "'def' (drivers set its rotation_euler)"),
        ({"def": [link("COPY_TRANSFORMS", 1)], "org": [link("COPY_TRANSFORMS", 2)]}, None, "'def' (its constraints loop back to 'def')"),
    ],
)
def test_a_relation_that_is_not_a_copy_is_refused_naming_the_bone_and_the_relation(links, drivers, words):
    g = _rig(links, drivers)
    with pytest.raises(RigError) as got:
        found_plan(g, ["def"])
    assert words in str(got.value)
    assert "nothing was written" in str(got.value)


def test_a_refusal_names_every_bone_it_cannot_key():
    extra = [(f"b{k}", None, placement()) for k in range(8)]
    g = _rig({f"b{k}": [link("DAMPED_TRACK", 0)] for k in range(8)}, extra=extra)
    with pytest.raises(RigError) as got:
        found_plan(g, [f"b{k}" for k in range(8)])
    text = str(got.value)
    assert all(f"'b{k}' (Damped Track" in text for k in range(6)) and "and 2 more" in text
