"""The control stack: order, weights, coverage, smoothing, state ownership (docs/controls.md#the-stack, docs/controls.md#definitions-and-instances)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.chains import JointPath, PathKinematics, PoseBuffers
from marionette.core.controls.ik import solve_path_ik
from marionette.core.controls.stack import ControlStack, IKControl
from marionette.core.errors import RigError
from marionette.core.rig.rotations import quat_angle_between
from tests.helpers.control_rigs import humanoid_65, humanoid_stack, small_quats

SKELETON, _ = humanoid_65()
B = len(SKELETON)


def animation(frames: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rot = small_quats(np.random.default_rng(seed), (frames, B), 0.06)
    tr = np.zeros((frames, B, 3))
    return rot, tr


def world_of(rot: np.ndarray, tr: np.ndarray, name: str) -> np.ndarray:
    return SKELETON.forward_kinematics(rot, tr)[:, SKELETON.index(name)]


def aimed_instance(stack: ControlStack, rot: np.ndarray, tr: np.ndarray):
    """An instance with reachable targets for every control (from the first frame's pose)."""
    inst = stack.instance()
    for side in ("L", "R"):
        foot = world_of(rot[:1], tr[:1], f"foot.{side}")[0, :3, 3]
        inst.set_target(f"leg.{side}", foot + [0.02, -0.08, 0.12], pole=foot + [0.0, -1.0, 0.6], orientation=[1.0, 0.0, 0.0, 0.0])
        hand = world_of(rot[:1], tr[:1], f"hand.{side}")[0, :3, 3]
        inst.set_target(f"arm.{side}", hand + [0.0, -0.15, -0.1], pole=hand + [0.0, 1.0, 0.0])
    inst.set_target("look", [0.4, -2.0, 1.8])
    return inst


def test_weight_zero_leaves_the_input_bit_identical_and_untouched() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(30)
    rot.setflags(write=False)
    tr.setflags(write=False)
    snapshot = rot.copy()
    inst = aimed_instance(stack, rot, tr)
    for c in stack.controls:
        inst.set_weight(c.name, 0.0)
    out = inst.evaluate(rot, tr, dt=1 / 30)
    np.testing.assert_array_equal(out.rotations, rot)
    np.testing.assert_array_equal(out.translations, tr)
    assert not any(r.ran.any() for r in out.reports.values())
    # Full weight: the input arrays are still exactly what they were (read-only even).
    for c in stack.controls:
        inst.set_weight(c.name, 1.0)
    out = inst.evaluate(rot, tr, dt=1 / 30)
    np.testing.assert_array_equal(rot, snapshot)
    assert not np.array_equal(out.rotations, rot)


def test_weight_one_gives_the_full_solve() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(40)
    inst = aimed_instance(stack, rot, tr)
    for name in ("leg.R", "arm.L", "arm.R", "look"):
        inst.set_enabled(name, False)
    out = inst.evaluate(rot, tr)
    control = stack.control("leg.L")
    assert isinstance(control, IKControl)
    pose = PoseBuffers(SKELETON, rot, tr)
    kin = PathKinematics(SKELETON, control.path, pose)
    foot = world_of(rot[:1], tr[:1], "foot.L")[0, :3, 3]
    direct = solve_path_ik(
        kin, np.broadcast_to(foot + [0.02, -0.08, 0.12], (40, 3)), solver="two_bone",
        pole=np.broadcast_to(foot + [0.0, -1.0, 0.6], (40, 3)),
    )
    np.testing.assert_array_equal(out.rotations[:, list(control.path.joints)], direct.rotations)
    report = out.reports["leg.L"]
    assert report.converged.all() and report.residual.max() <= 1e-12


def test_partial_weight_blends_changed_joints_by_slerp() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(20)
    inst = aimed_instance(stack, rot, tr)
    full = inst.evaluate(rot, tr).rotations
    inst.set_weight("arm.L", 0.25)
    part = inst.evaluate(rot, tr)
    joints = list(stack.control("arm.L").written)
    whole = quat_angle_between(rot[:, joints], full[:, joints])
    quarter = quat_angle_between(rot[:, joints], part.rotations[:, joints])
    np.testing.assert_allclose(quarter, 0.25 * whole, rtol=1e-9, atol=1e-12)
    assert np.all(part.coverage[:, joints] >= 0.25) and np.all(part.coverage[:, joints] < 1.0)


def test_disabling_then_re_enabling_starts_from_a_clean_state() -> None:
    stack = humanoid_stack(SKELETON, smooth_time=0.3)
    rot, tr = animation(1)
    inst = aimed_instance(stack, rot, tr)
    base = world_of(rot, tr, "foot.L")[0, :3, 3]
    for k in range(12):
        inst.set_target("leg.L", base + [0.0, -0.01 * k, 0.1], pole=base + [0.0, -1.0, 0.6])
        inst.evaluate(rot, tr, dt=1 / 30)
    assert inst.status("leg.L").smoothed_target is not None
    inst.set_enabled("leg.L", False)
    status = inst.status("leg.L")
    assert status.smoothed_target is None and status.report is None and not status.has_warm_start
    inst.set_enabled("leg.L", True)
    again = inst.evaluate(rot, tr, dt=1 / 30)
    fresh = aimed_instance(stack, rot, tr)
    fresh.set_target("leg.L", base + [0.0, -0.11, 0.1], pole=base + [0.0, -1.0, 0.6])
    first = fresh.evaluate(rot, tr, dt=1 / 30)
    joints = list(stack.control("leg.L").written)
    np.testing.assert_array_equal(again.rotations[:, joints], first.rotations[:, joints])


def test_nan_target_changes_nothing_and_leaves_no_trace() -> None:
    stack = humanoid_stack(SKELETON, smooth_time=0.2)
    rot, tr = animation(1)
    inst = aimed_instance(stack, rot, tr)
    witness = aimed_instance(stack, rot, tr)
    for i in (inst, witness):
        i.evaluate(rot, tr, dt=1 / 30)
    for c in stack.controls:
        inst.set_target(c.name, [np.nan, 0.0, 0.0])
    out = inst.evaluate(rot, tr, dt=1 / 30)
    np.testing.assert_array_equal(out.rotations, rot)
    assert all(r.skipped.all() and not r.ran.any() for r in out.reports.values())
    # The NaN frame neither moved nor poisoned the smoothing memory.
    restored = aimed_instance(stack, rot, tr)
    for c in stack.controls:
        st = restored._state(c.name)
        inst.set_target(c.name, st.target, pole=st.pole, orientation=st.orientation)
    a = inst.evaluate(rot, tr, dt=1 / 30)
    b = witness.evaluate(rot, tr, dt=1 / 30)
    np.testing.assert_array_equal(a.rotations, b.rotations)


def test_non_finite_candidate_is_skipped_for_its_frame_only() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(4)
    inst = aimed_instance(stack, rot, tr)
    bad = rot.copy()
    knee = SKELETON.index("shin.L")
    bad[2, knee] = np.nan
    out = inst.evaluate(bad, tr)
    report = out.reports["leg.L"]
    assert list(report.skipped) == [False, False, True, False]
    joints = list(stack.control("leg.L").written)
    np.testing.assert_array_equal(out.rotations[2, joints], bad[2, joints])
    assert out.reports["leg.R"].ran.all()


def test_controls_run_in_priority_order_each_reading_the_previous_pose() -> None:
    leg = JointPath.between(SKELETON, "thigh.L", "shin.L", end="foot.L")
    first = IKControl("first", leg, priority=5)
    second = IKControl("second", leg, priority=1)
    stack = ControlStack(SKELETON, [first, second])
    assert [c.name for c in stack.controls] == ["second", "first"]
    rot, tr = animation(3)
    inst = stack.instance()
    foot = world_of(rot[:1], tr[:1], "foot.L")[0, :3, 3]
    inst.set_target("second", foot + [0.0, -0.1, 0.1])
    inst.set_target("first", foot + [0.05, 0.0, 0.15])
    out = inst.evaluate(rot, tr)
    # The later control (higher priority number) decides, starting from the earlier's pose.
    end = world_of(out.rotations, tr, "foot.L")[:, :3, 3]
    np.testing.assert_allclose(end, np.broadcast_to(foot + [0.05, 0.0, 0.15], end.shape), atol=1e-12)
    assert out.reports["second"].ran.all() and out.reports["first"].ran.all()


def test_coverage_rises_to_the_weight_on_changed_joints_only() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(5)
    inst = aimed_instance(stack, rot, tr)
    inst.set_weight("leg.R", 0.6)
    out = inst.evaluate(rot, tr, coverage=np.full(B, 0.3))
    written = set()
    for c in stack.controls:
        written |= set(c.written)
    untouched = [j for j in range(B) if j not in written]
    assert np.all(out.coverage[:, untouched] == 0.3)
    right = list(stack.control("leg.R").path.joints)
    assert np.allclose(out.coverage[:, right], 0.6)
    left = list(stack.control("leg.L").path.joints)
    assert np.allclose(out.coverage[:, left], 1.0)


def test_target_smoothing_follows_one_minus_exp() -> None:
    leg = JointPath.between(SKELETON, "thigh.L", "shin.L", end="foot.L")
    stack = ControlStack(SKELETON, [IKControl("leg", leg, smooth_time=0.25)])
    rot, tr = animation(1)
    inst = stack.instance()
    a = np.array([0.1, -0.1, 0.2])
    b = np.array([0.1, -0.3, 0.3])
    inst.set_target("leg", a)
    inst.evaluate(rot, tr, dt=1 / 30)
    inst.set_target("leg", b)
    expected = a.copy()
    for dt in (1 / 30, 1 / 24, 0.1, 1 / 60):
        inst.evaluate(rot, tr, dt=dt)
        expected = expected + (1 - math.exp(-dt / 0.25)) * (b - expected)
        np.testing.assert_allclose(inst.status("leg").smoothed_target, expected, rtol=0, atol=1e-15)
    # Scrubbing backwards snaps to the target instead of smoothing toward it.
    inst.evaluate(rot, tr, dt=-1 / 30)
    np.testing.assert_array_equal(inst.status("leg").smoothed_target, b)
    # A batch of frames smooths frame after frame, the same as one call per frame.
    batch = stack.instance()
    single = stack.instance()
    path = a + np.linspace(0, 1, 8)[:, None] * (b - a)
    batch.set_target("leg", path)
    got = batch.evaluate(np.repeat(rot, 8, axis=0), np.repeat(tr, 8, axis=0), dt=1 / 30).rotations
    for k in range(8):
        single.set_target("leg", path[k])
        want = single.evaluate(rot, tr, dt=1 / 30).rotations
        np.testing.assert_allclose(got[k], want[0], atol=1e-12)


def test_instances_share_the_definition_but_not_state() -> None:
    stack = humanoid_stack(SKELETON, smooth_time=0.2)
    rot, tr = animation(1)
    one = aimed_instance(stack, rot, tr)
    two = aimed_instance(stack, rot, tr)
    two.set_target("look", [-1.0, -2.0, 1.5])
    solo = aimed_instance(stack, rot, tr)
    for _ in range(5):
        a = one.evaluate(rot, tr, dt=1 / 30)
        two.evaluate(rot, tr, dt=1 / 30)
        s = solo.evaluate(rot, tr, dt=1 / 30)
        np.testing.assert_array_equal(a.rotations, s.rotations)
    assert one.stack is two.stack


def test_definitions_are_immutable_and_the_joint_table_is_prebuilt() -> None:
    stack = humanoid_stack(SKELETON)
    with pytest.raises(AttributeError):
        stack.controls = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        stack.joint_controls[0] = ("x",)  # type: ignore[index]
    control = stack.control("leg.L")
    with pytest.raises(AttributeError):
        control.weight = 0.5  # type: ignore[misc]
    assert isinstance(control, IKControl)
    with pytest.raises(ValueError):
        control.path.end_offset[0] = 1.0
    assert stack.controls_of_joint("shin.L") == ("leg.L",)
    assert stack.controls_of_joint("foot.L") == ("leg.L",)  # end orientation
    assert stack.controls_of_joint("head") == ("look",)
    assert stack.controls_of_joint("toe.L") == ()
    with pytest.raises(RigError):
        ControlStack(SKELETON, [control, control])


def test_independent_limbs_are_solved_in_one_batched_call() -> None:
    stack = humanoid_stack(SKELETON)
    assert stack.groups[0] == (0, 1, 2, 3)
    rot, tr = animation(6)
    inst = aimed_instance(stack, rot, tr)
    grouped = inst.evaluate(rot, tr).rotations
    # The same controls one by one (separate stacks run in sequence) give the same pose.
    rot_seq = rot
    for c in stack.controls:
        single = ControlStack(SKELETON, [c]).instance()
        st = inst._state(c.name)
        single.set_target(c.name, st.target, pole=st.pole, orientation=st.orientation)
        rot_seq = single.evaluate(rot_seq, tr).rotations
    np.testing.assert_allclose(grouped, rot_seq, atol=1e-12)


def test_full_stack_on_a_65_bone_rig_reaches_its_targets() -> None:
    stack = humanoid_stack(SKELETON)
    rot, tr = animation(50)
    inst = aimed_instance(stack, rot, tr)
    out = inst.evaluate(rot, tr, dt=1 / 30)
    for name in ("leg.L", "leg.R", "look"):
        r = out.reports[name]
        assert r.converged.all(), name
    # Feet end where they were asked to, with the asked orientation.
    for side in ("L", "R"):
        foot = world_of(out.rotations, tr, f"foot.{side}")
        want = world_of(rot[:1], tr[:1], f"foot.{side}")[0, :3, 3] + [0.02, -0.08, 0.12]
        np.testing.assert_allclose(foot[:, :3, 3], np.broadcast_to(want, (50, 3)), atol=1e-9)
        np.testing.assert_allclose(foot[:, :3, :3], np.broadcast_to(np.eye(3), (50, 3, 3)), atol=1e-9)
    # Batched over frames equals one frame at a time.
    single = aimed_instance(stack, rot, tr)
    for k in (0, 17, 49):
        one = single.evaluate(rot[k : k + 1], tr[k : k + 1]).rotations[0]
        np.testing.assert_allclose(out.rotations[k], one, atol=1e-12)


def test_fabrik_control_warm_starts_from_its_previous_solution() -> None:
    spine = JointPath.between(SKELETON, "spine", "neck", end="head")
    stack = ControlStack(SKELETON, [IKControl("spine", spine, solver="fabrik", tolerance=1e-6)])
    inst = stack.instance()
    rot, tr = animation(1, seed=3)
    # The character moves between frames: the warm start is kept in the path's parent frame.
    tr[0, 0] = [0.0, 0.0, 0.0]
    head = world_of(rot, tr, "head")[0, :3, 3]
    previous = None
    for k in range(60):
        angle = 2 * math.pi * k / 60
        tr_k = tr.copy()
        tr_k[0, 0] = [0.01 * k, 0.0, 0.0]
        target = head + [0.01 * k + 0.1 * math.sin(angle), -0.15 + 0.05 * math.cos(angle), -0.1]
        inst.set_target("spine", target)
        out = inst.evaluate(rot, tr_k, dt=1 / 30)
        # The same solve by hand, seeded with the previous solution carried along with the root.
        kin = PathKinematics(SKELETON, spine, PoseBuffers(SKELETON, rot, tr_k))
        initial = None if previous is None else previous + [0.01, 0.0, 0.0]
        direct = solve_path_ik(kin, target[None], solver="fabrik", initial=initial, tolerance=1e-6)
        previous = direct.points
        np.testing.assert_allclose(out.rotations[:, list(spine.joints)], direct.rotations, atol=1e-12)
        assert out.reports["spine"].converged.all()
    assert inst.status("spine").has_warm_start


def test_limits_in_the_stack_report_blocked_targets() -> None:
    from marionette.core.controls.joint_limits import HingeLimit

    leg = JointPath.between(SKELETON, "thigh.L", "shin.L", end="foot.L")
    knee = HingeLimit(axis=[1.0, 0.0, 0.0], min_angle=-math.radians(150), max_angle=math.radians(150))
    tight = HingeLimit(axis=[1.0, 0.0, 0.0], min_angle=-0.2, max_angle=0.2)
    rot, tr = animation(1)
    hip = world_of(rot, tr, "thigh.L")[0, :3, 3]
    for limit, blocked in ((knee, False), (tight, True)):
        stack = ControlStack(SKELETON, [IKControl("leg", leg, solver="fabrik", limits=(None, limit))])
        inst = stack.instance()
        inst.set_target("leg", hip + [0.0, -0.3, -0.5])  # needs a deep knee bend
        report = inst.evaluate(rot, tr).reports["leg"]
        assert bool(report.limited[0]) == blocked
        assert bool(report.converged[0]) != blocked


def test_translations_blend_by_the_weight_and_moved_joints_gain_coverage() -> None:
    from marionette.core.controls.ground import GroundRig
    from marionette.core.controls.stack import GroundControl

    rig = GroundRig.build(SKELETON, [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"], pelvis="hips")
    stack = ControlStack(SKELETON, [GroundControl("ground", rig)])
    rot, tr = animation(3)
    rot[:] = [1.0, 0.0, 0.0, 0.0]

    def lower_ground(origins, directions, distances):
        n = len(origins)
        pts = origins.copy()
        pts[:, 2] = -0.2  # 20 cm below the floor: the pelvis must come down
        return np.ones(n, dtype=bool), pts, np.tile([0.0, 0.0, 1.0], (n, 1))

    full, half = stack.instance(), stack.instance()
    for inst in (full, half):
        inst.set_ground("ground", lower_ground)
    half.set_weight("ground", 0.5)
    a = full.evaluate(rot, tr, coverage=np.full(B, 0.2))
    b = half.evaluate(rot, tr, coverage=np.full(B, 0.2))
    hips = SKELETON.index("hips")
    np.testing.assert_allclose(b.translations[:, hips], 0.5 * (tr[:, hips] + a.translations[:, hips]), atol=1e-15)
    assert np.linalg.norm(a.translations[:, hips] - tr[:, hips], axis=1).min() > 0.1
    assert np.all(a.coverage[:, hips] == 1.0) and np.all(b.coverage[:, hips] == 0.5)
    assert stack.controls_of_joint("hips") == ("ground",)


def test_scene_time_drives_smoothing_like_dt() -> None:
    leg = JointPath.between(SKELETON, "thigh.L", "shin.L", end="foot.L")
    stack = ControlStack(SKELETON, [IKControl("leg", leg, smooth_time=0.25)])
    rot, tr = animation(1)
    by_dt, by_time = stack.instance(), stack.instance()
    for k in range(6):
        target = [0.1, -0.1 - 0.03 * k, 0.2]
        by_dt.set_target("leg", target)
        by_time.set_target("leg", target)
        a = by_dt.evaluate(rot, tr, dt=None if k == 0 else 1 / 24)
        b = by_time.evaluate(rot, tr, time=10.0 + k / 24)
        np.testing.assert_allclose(a.rotations, b.rotations, atol=1e-12)


def test_controls_refuse_inputs_of_another_kind() -> None:
    from marionette.core.controls.springs import SpringChain
    from marionette.core.controls.stack import SpringControl

    tail = JointPath.between(SKELETON, "spine", "neck", end="head")
    stack = ControlStack(SKELETON, [SpringControl("tail", SpringChain.build(tail))])
    inst = stack.instance()
    with pytest.raises(RigError):
        inst.set_target("tail", [0.0, 0.0, 1.0])
    with pytest.raises(RigError):
        inst.set_ground("tail", lambda o, d, m: (None, None, None))
    with pytest.raises(RigError):
        inst.set_closure_targets("tail", [0.0, 0.0, 1.0], [0.0, 0.0, 1.0])


def test_placements_kept_across_writes_are_those_of_a_fresh_forward_kinematics() -> None:
    """The working pose keeps each placement until a write changes it (a write to an arm keeps
    the spine's): after writes to scattered joints, every placement it gives equals the forward
    kinematics of the pose as it now stands (to rounding; a stale one would be off by the
    writes' turns, tenths of a unit)."""
    from marionette.core.controls.chains import Lineage

    rng = np.random.default_rng(5)
    rot, tr = animation(3)
    pose = PoseBuffers(SKELETON, rot, tr, lineage=Lineage.of(SKELETON))
    for _ in range(6):
        for j in rng.choice(B, size=12, replace=False):
            pose.world(int(j))
        joints = sorted(int(j) for j in rng.choice(B, size=4, replace=False))
        pose.set_rotations(joints, small_quats(rng, (3, 4), 0.3))
        if rng.random() < 0.5:
            pose.set_translations(joints[:1], rng.normal(scale=0.01, size=(3, 1, 3)))
        fresh = SKELETON.forward_kinematics(pose.rotations, pose.translations)
        kept = np.stack([pose.world(j) for j in range(B)], axis=1)
        np.testing.assert_allclose(kept, fresh, rtol=0.0, atol=1e-14)


def test_a_live_frame_blends_as_the_batched_arrays_do() -> None:
    """A single frame (the live case) is blended into the pose in plain floats: the same
    rotations, translations and coverage as a batch of the same frames gives, to 1e-12, with
    IK, look-at and ground (which moves the pelvis) at full weight, coverage given, and one
    control whose target misses some frames."""
    from marionette.core.controls.ground import GroundRig
    from marionette.core.controls.stack import GroundControl

    base = humanoid_stack(SKELETON)
    rig = GroundRig.build(SKELETON, [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"], pelvis="hips")
    stack = ControlStack(SKELETON, [*base.controls, GroundControl("ground", rig, priority=3)])
    frames = 40
    rot, tr = animation(frames, seed=5)

    def ground(origins, directions, distances):
        n = len(origins)
        pts = origins.copy()
        pts[:, 2] = -0.05 + 0.01 * np.sin(origins[:, 0] * 10.0)
        return np.ones(n, dtype=bool), pts, np.tile([0.0, 0.0, 1.0], (n, 1))

    coverage = np.zeros(B)
    coverage[::3] = 0.4
    coverage[SKELETON.index("hips")] = 1.0
    insts = []
    for _ in range(2):
        inst = aimed_instance(stack, rot, tr)
        inst.set_ground("ground", ground)
        hand = world_of(rot[:1], tr[:1], "hand.L")[0, :3, 3]
        targets = np.tile(hand + [0.0, -0.15, -0.1], (frames, 1))
        targets[::7] = np.nan
        inst.set_target("arm.L", targets)
        insts.append(inst)
    batch = insts[0].evaluate(rot, tr, coverage=coverage)
    live = insts[1]
    changed = 0
    for f in range(frames):
        live.set_target("arm.L", targets[f])
        one = live.evaluate(rot[f : f + 1], tr[f : f + 1], coverage=coverage)
        np.testing.assert_allclose(one.rotations[0], batch.rotations[f], rtol=0, atol=1e-12)
        np.testing.assert_allclose(one.translations[0], batch.translations[f], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(one.coverage[0], batch.coverage[f])
        for name, report in one.reports.items():
            assert report.ran.tolist() == batch.reports[name].ran[f : f + 1].tolist()
        changed += int((one.coverage[0] != coverage).sum())
    assert changed > 10 * frames
    assert not batch.reports["arm.L"].ran[0] and batch.reports["arm.L"].ran[1]
