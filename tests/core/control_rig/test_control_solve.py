"""The control solve: the controls' local transforms it returns, played through the rig's
constraints, put the mapped bones where the retarget wants them (the wanted placements are the
test's own random input, the check is the pose model of the rig played forward); the Rigify plan's
names and switches; the keyed clip's layout."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.control_rig.graph import PoseModel
from marionette.core.control_rig.plan import Aim, ControlPlan, Copy, Match, control_clip, solve
from marionette.core.control_rig.rigify import is_rigify, org_bone, rigify_plan
from marionette.core.rig.clip import Clip
from marionette.core.rig.rotations import matrix_from_quat, quat_normalize
from tests.helpers.control_rig_variants import graph, link, placement, rot

FRAMES = 7


def _random_placements(rng, frames: int, near) -> np.ndarray:
    m = np.broadcast_to(np.eye(4), (frames, 4, 4)).copy()
    m[:, :3, :3] = matrix_from_quat(quat_normalize(rng.normal(size=(frames, 4))))
    m[:, :3, 3] = np.asarray(near) + rng.normal(scale=0.2, size=(frames, 3))
    return m


def _random_rest(rng, at) -> np.ndarray:
    return placement(matrix_from_quat(quat_normalize(rng.normal(size=4))), at=at)


def _played(g, plan, locals_) -> PoseModel:
    model = PoseModel(g, FRAMES)
    for name, m in locals_.items():
        model.set_basis(g.bone(name), m)
    return model


@pytest.mark.parametrize("seed", range(4))
def test_solved_controls_put_deform_bones_where_wanted_through_copies_child_of_armature_and_drivers(seed):
    rng = np.random.default_rng(seed)
    # Controls in a hierarchy with random rest frames; deform bones with other rest frames,
    # each held by another relation.
    at = {"root_c": (0, 0, 0), "hip_c": (0, 0, 1), "leg_c": (0.1, 0, 1), "arm_c": (0.2, 0, 1.4), "spin_c": (0, 0, 1.2)}
    bones = [
        ("root_c", None, _random_rest(rng, at["root_c"])),
        ("hip_c", "root_c", _random_rest(rng, at["hip_c"])),
        ("leg_c", "hip_c", _random_rest(rng, at["leg_c"])),
        ("arm_c", "hip_c", _random_rest(rng, at["arm_c"])),
        ("spin_c", "hip_c", _random_rest(rng, at["spin_c"])),
        ("hips", None, _random_rest(rng, at["hip_c"])),
        ("leg", None, _random_rest(rng, at["leg_c"])),
        ("arm", None, _random_rest(rng, at["arm_c"])),
        ("spine", "hips", _random_rest(rng, at["spin_c"])),
    ]
    rests = {n: r for n, _, r in bones}
    inverse = np.linalg.inv(rests["leg_c"])  # Child Of's inverse set at rest
    links = {
        "hips": [link("COPY_TRANSFORMS", 1)],
        "leg": [link("CHILD_OF", 2, matrix=inverse)],
        "arm": [link("ARMATURE", 3)],
    }
    # Drivers copy spin_c's channels onto spine: spine's local transform is spin_c's. Both rest
    # as children of their parents with their own rest frames, so the evaluated rest differs.
    drivers = {"spine": ("spin_c", ("spin_c",), "drivers set its rotation_quaternion")}
    g = graph(bones, links, drivers, controls={"root_c", "hip_c", "leg_c", "arm_c", "spin_c"})
    # At rest the held bones sit where their controls put them (the copies' rest poses).
    posed = {"hips": rests["hip_c"], "leg": rests["leg"], "arm": rests["arm"]}
    posed["spine"] = posed["hips"] @ np.linalg.inv(rests["hips"]) @ rests["spine"]
    g = graph(bones, links, drivers, controls={"root_c", "hip_c", "leg_c", "arm_c", "spin_c"}, posed_rest=posed)
    plan = ControlPlan("test", (Match("hip_c", "hips"), Match("leg_c", "leg"), Match("arm_c", "arm"), Copy("spin_c", "spine")))
    wanted = {b: _random_placements(rng, FRAMES, at[c]) for b, c in (("hips", "hip_c"), ("leg", "leg_c"), ("arm", "arm_c"), ("spine", "spin_c"))}
    locals_ = solve(plan, g, wanted)
    assert set(locals_) == {"hip_c", "leg_c", "arm_c", "spin_c"}
    model = _played(g, plan, locals_)
    for bone, want in wanted.items():
        np.testing.assert_allclose(model.world(g.bone(bone)), want, atol=1e-9, err_msg=bone)


def test_root_motion_moves_the_root_control_and_the_others_are_solved_under_it():
    rng = np.random.default_rng(5)
    bones = [
        ("root", None, placement()),
        ("torso", "root", placement(rot("x", 90), at=(0, 0, 1))),
        ("hips", None, placement(rot("x", 90), at=(0, 0, 1))),
    ]
    g = graph(bones, {"hips": [link("COPY_TRANSFORMS", 1)]}, controls={"root", "torso"})
    plan = ControlPlan("test", (Match("torso", "hips"),), root="root")
    travel = np.stack([np.linspace(0, 2, FRAMES), np.zeros(FRAMES), np.zeros(FRAMES)], axis=1)
    want = _random_placements(rng, FRAMES, (0, 0, 1))
    locals_ = solve(plan, g, {"hips": want}, travel)
    np.testing.assert_allclose(locals_["root"][:, :3, 3], travel, atol=1e-12)
    np.testing.assert_allclose(locals_["root"][:, :3, :3], np.broadcast_to(np.eye(3), (FRAMES, 3, 3)), atol=1e-12)
    model = _played(g, plan, locals_)
    np.testing.assert_allclose(model.world(g.bone("hips")), want, atol=1e-9)


def test_an_aimed_control_turns_so_the_point_it_carries_lands_and_keeps_the_roll():
    # A spine control pivoting at (0, 0, 1) carries the chest's head 0.5 above; the chest wanted
    # turned by a random rotation about the pivot: the control turns by exactly that rotation.
    rng = np.random.default_rng(9)
    bones = [("pivot", None, placement(at=(0, 0, 1))), ("chest", "pivot", placement(rot("z", 30), at=(0, 0, 1.5)))]
    g = graph(bones, controls={"pivot"})
    turns = matrix_from_quat(quat_normalize(rng.normal(size=(FRAMES, 4))))
    want = np.broadcast_to(np.eye(4), (FRAMES, 4, 4)).copy()
    want[:, :3, :3] = turns @ rot("z", 30)
    want[:, :3, 3] = np.array([0, 0, 1]) + turns @ np.array([0, 0, 0.5])
    plan = ControlPlan("test", (Aim("pivot", "chest", "chest"),))
    locals_ = solve(plan, g, {"chest": want})
    np.testing.assert_allclose(locals_["pivot"][:, :3, :3], turns, atol=1e-9)
    np.testing.assert_allclose(_played(g, plan, locals_).world(1), want, atol=1e-9)


def test_control_clip_keys_the_plans_controls_root_first_with_continuous_quaternions():
    rng = np.random.default_rng(2)
    bones = [("root", None, placement()), ("ctl", "root", placement(at=(0, 0, 1))), ("def", None, placement(at=(0, 0, 1)))]
    g = graph(bones, {"def": [link("COPY_TRANSFORMS", 1)]}, controls={"root", "ctl"})
    plan = ControlPlan("test", (Match("ctl", "def"),), root="root")
    # A slow turn about Z through 350 deg: consecutive keys must stay in one hemisphere.
    angles = np.linspace(0, 350, 36)
    want = np.stack([placement(rot("z", a), at=(0, 0, 1)) for a in angles])
    frames = len(angles)
    clip = Clip(("def",), np.arange(frames) / 24.0, 24.0, np.tile([1.0, 0, 0, 0], (frames, 1, 1)), np.zeros((frames, 1, 3)), name="turn")
    travel = np.c_[rng.normal(size=(frames, 2)), np.zeros(frames)]
    keyed = control_clip(plan, g, {"def": want}, clip, travel)
    assert keyed.names == ("root", "ctl") == plan.keyed(True)
    q = keyed.rotations[:, 1]
    assert np.all(np.sum(q[1:] * q[:-1], axis=-1) > 0.9)
    np.testing.assert_allclose(2 * np.degrees(np.arccos(np.clip(np.abs(q[:, 0]), 0, 1))), np.minimum(angles, 360 - angles), atol=1e-6)
    np.testing.assert_allclose(keyed.translations[:, 0], travel, atol=1e-12)


def _rigify_names(fingers: bool = True) -> set[str]:
    names = {"root", "torso", "neck", "head", "ORG-spine", "ORG-spine.001", "ORG-spine.002", "ORG-spine.003", "ORG-spine.004"}
    names |= {"ORG-spine.005", "ORG-spine.006", "spine_fk", "spine_fk.001", "spine_fk.002", "spine_fk.003", "DEF-spine"}
    for s in (".L", ".R"):
        for part in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe"):
            names |= {f"ORG-{part}{s}", f"DEF-{part}{s}", f"{part}_fk{s}"}
        names |= {f"hand_ik{s}", f"upper_arm_ik{s}", f"foot_ik{s}", f"thigh_ik{s}", f"toe_ik{s}", f"shoulder{s}", f"ORG-shoulder{s}"}
        names |= {f"upper_arm_parent{s}", f"thigh_parent{s}"}
        if fingers:
            names |= {f"{f}.0{k}{s}" for f in ("thumb", "f_index") for k in (1, 2, 3)}
            names |= {f"ORG-{f}.0{k}{s}" for f in ("thumb", "f_index") for k in (1, 2, 3)}
    return names


SWITCHES = {b: {"IK_FK"} for b in ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")}


@pytest.mark.parametrize("mode, value", [("fk", 1.0), ("ik", 0.0)])
def test_rigify_plan_names_the_controls_of_its_mode_and_sets_the_switches(mode, value):
    names = _rigify_names()
    plan = rigify_plan(names, SWITCHES, mode)
    assert is_rigify(names, SWITCHES)
    assert sorted(s for s in plan.switches if s[1] == "IK_FK") == sorted((b, "IK_FK", value) for b in SWITCHES)
    steps = set(plan.steps)
    for s in (".L", ".R"):
        fk = {Match(f"{p}_fk{s}", f"ORG-{p}{s}") for p in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe")}
        ik = {Match(f"hand_ik{s}", f"ORG-hand{s}"), Match(f"foot_ik{s}", f"ORG-foot{s}"), Match(f"upper_arm_ik{s}", f"ORG-upper_arm{s}")}
        assert (fk <= steps) == (mode == "fk") and (ik <= steps) == (mode == "ik")
        assert Match(f"thumb.02{s}", f"ORG-thumb.02{s}") in steps
    assert plan.root == "root" and plan.keyed(True)[0] == "root" and "root" not in plan.keyed(False)
    assert all(not c.startswith(("DEF-", "ORG-", "MCH-")) for c in plan.controls)
    assert Match("torso", "ORG-spine.002") in steps and Aim("neck", "ORG-spine.006", "ORG-spine.004") in steps


def test_rigify_plan_leaves_out_what_the_rig_does_not_have():
    names = _rigify_names(fingers=False) - {"hand_fk.R", "ORG-hand.R"}
    plan = rigify_plan(names, SWITCHES, "fk")
    assert not any("thumb" in c or "f_index" in c for c in plan.controls)
    assert "hand_fk.R" not in plan.controls and "hand_fk.L" in plan.controls
    assert set(plan.reference_bones) <= names


def test_rigify_is_recognised_by_its_switches_torso_and_mechanism_bones():
    names = _rigify_names()
    assert not is_rigify(names - {"torso"}, SWITCHES)
    assert not is_rigify(names, {})
    assert not is_rigify({n for n in names if not n.startswith("DEF-")}, SWITCHES)
    assert org_bone("DEF-forearm.L", names) == "ORG-forearm.L"
    assert org_bone("ORG-forearm.L", names) == "ORG-forearm.L"
    assert org_bone("DEF-upper_arm.L.001", names) is None
    assert org_bone("hand_fk.L", names) is None


@pytest.mark.parametrize("kind", ["CHILD_OF", "ARMATURE"])
def test_a_held_bone_whose_parent_moves_is_solved_or_refused(kind):
    """A deform chain kept as a hierarchy, each bone held by its own control: hips copies hip_c,
    leg (a child of hips) is held by leg_c through ``kind``. Either the plan found puts leg where
    the retarget wants it, or it is refused; it must not be accepted and miss."""
    from marionette.core.control_rig.found import found_plan
    from marionette.core.errors import RigError

    rng = np.random.default_rng(11)
    bones = [
        ("hip_c", None, _random_rest(rng, (0, 0, 1))),
        ("leg_c", None, _random_rest(rng, (0.1, 0, 1))),
        ("hips", None, _random_rest(rng, (0, 0, 1))),
        ("leg", "hips", _random_rest(rng, (0.1, 0, 1))),
    ]
    rests = {n: r for n, _, r in bones}
    held = link("CHILD_OF", 1, matrix=np.linalg.inv(rests["leg_c"])) if kind == "CHILD_OF" else link("ARMATURE", 1)
    posed = {"hips": rests["hip_c"], "leg": rests["hip_c"] @ np.linalg.inv(rests["hips"]) @ rests["leg"]}
    g = graph(bones, {"hips": [link("COPY_TRANSFORMS", 0)], "leg": [held]}, controls={"hip_c", "leg_c"}, posed_rest=posed)
    wanted = {"hips": _random_placements(rng, FRAMES, (0, 0, 1)), "leg": _random_placements(rng, FRAMES, (0.1, 0, 1))}
    try:
        plan = found_plan(g, ["hips", "leg"])
    except RigError as exc:
        assert "'leg'" in str(exc)
        return
    model = _played(g, plan, solve(plan, g, wanted))
    np.testing.assert_allclose(model.world(g.bone("leg")), wanted["leg"], atol=1e-6)
