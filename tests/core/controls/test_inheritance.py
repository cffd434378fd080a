"""Bone inheritance ("append"/"grant") and fixed axes (docs/controls.md#inheritance-and-fixed-axes), and their place in the stack."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.chains import JointPath
from marionette.core.controls.inheritance import (
    FixedAxes,
    Grant,
    Inheritance,
    inherit,
    quat_power,
    rotation_frames,
    twist_about,
)
from marionette.core.controls.stack import ControlStack, FixedAxisControl, IKControl, InheritControl
from marionette.core.errors import RigError
from marionette.core.rig.rotations import (
    axis_angle_from_quat,
    matrix_from_quat,
    quat_angle_between,
    quat_from_axis_angle,
    quat_multiply,
)
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.control_rigs import random_chain, random_quats


def aligned_rig() -> Skeleton:
    """Five joints whose attachment frames carry no rotation (MMD-style: all local frames are
    the model's axes): root, A, B, C side by side under the root, and D under C."""
    names = ["root", "A", "B", "C", "D"]
    parents = [-1, 0, 0, 0, 3]
    c0 = np.broadcast_to(np.eye(4), (5, 4, 4)).copy()
    c0[1:, :3, 3] = [[0.2, 0.0, 1.0], [0.4, 0.0, 1.0], [0.6, 0.0, 1.0], [0.0, 0.3, 0.0]]
    return Skeleton(names, parents, c0)


def power(q: np.ndarray, f: float) -> np.ndarray:
    """``q ** f`` from axis and angle (independent of the code under test)."""
    axis, angle = axis_angle_from_quat(q)
    if angle > math.pi:
        angle = 2 * math.pi - angle
        axis = -axis
    return quat_from_axis_angle(axis, f * angle)


def pose(sk: Skeleton, frames: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return random_quats(rng, (frames, len(sk))), rng.normal(scale=0.1, size=(frames, len(sk), 3))


def test_chained_inheritance_gives_the_exact_expected_rotations() -> None:
    sk = aligned_rig()
    grants = Inheritance(
        (
            # Given out of order on purpose: C's grant reads B after B's own grant.
            Grant.build(sk, "C", "B", rotation=0.5, translation=0.25),
            Grant.build(sk, "B", "A", rotation=0.3, translation=1.0),
        )
    )
    assert [sk.names[g.target] for g in grants.grants] == ["B", "C"]
    stack = ControlStack(sk, [InheritControl("grant", grants)])
    rot, tr = pose(sk, 6, 2)
    out = stack.instance().evaluate(rot, tr)
    worst = 0.0
    for t in range(6):
        a, b0, c0 = rot[t, 1], rot[t, 2], rot[t, 3]
        b = quat_multiply(b0, power(a, 0.3))
        c = quat_multiply(c0, power(b, 0.5))
        worst = max(worst, float(quat_angle_between(out.rotations[t, 2], b)), float(quat_angle_between(out.rotations[t, 3], c)))
        np.testing.assert_allclose(out.translations[t, 2], tr[t, 2] + tr[t, 1], atol=1e-15)
        np.testing.assert_allclose(out.translations[t, 3], tr[t, 3] + 0.25 * (tr[t, 2] + tr[t, 1]), atol=1e-15)
    print(f"\nA -> B (0.3) -> C (0.5): largest angle from the expected rotations {worst:.1e} rad")
    assert worst <= 1e-12
    np.testing.assert_array_equal(out.rotations[:, [0, 1, 4]], rot[:, [0, 1, 4]])
    assert out.coverage[:, 2].min() == 1.0 and out.coverage[:, 1].max() == 0.0


def test_fractions_beyond_one_and_negative_turn_by_that_multiple() -> None:
    q = quat_from_axis_angle([0.0, 0.6, 0.8], 0.9)
    for f in (-1.0, -0.5, 0.0, 2.0, 1.5):
        np.testing.assert_allclose(quat_power(q, f), quat_from_axis_angle([0.0, 0.6, 0.8], 0.9 * f), atol=1e-15)
    # The shorter arc of q and -q is the same rotation: a half turn of -q is not a 3/2 turn.
    np.testing.assert_allclose(quat_power(-q, 0.5), quat_from_axis_angle([0.0, 0.6, 0.8], 0.45), atol=1e-15)
    tiny = quat_from_axis_angle([1.0, 0.0, 0.0], 1e-12)
    np.testing.assert_allclose(quat_power(tiny, 0.5), quat_from_axis_angle([1.0, 0.0, 0.0], 0.5e-12), atol=1e-20)


def test_a_grant_between_differently_rolled_bones_is_the_same_turn_in_the_rig() -> None:
    rng = np.random.default_rng(8)
    sk, _, _ = random_chain(rng, 5, child_frames=True)
    grant = Grant.build(sk, 4, 1, rotation=1.0)
    frames = rotation_frames(sk)
    rot = np.zeros((3, 5, 4))
    rot[..., 0] = 1.0
    rot[:, 1] = random_quats(rng, (3,))
    new, _ = inherit(Inheritance((grant,)), rot, np.zeros((3, 5, 3)))
    # The turn seen at rest in armature space: F R F^-1, for the source and for the target.
    def seen(j: int, q: np.ndarray) -> np.ndarray:
        f = frames[j] / np.linalg.norm(frames[j], axis=0)
        return f @ matrix_from_quat(q) @ f.T

    for t in range(3):
        np.testing.assert_allclose(seen(4, new[t, 0]), seen(1, rot[t, 1]), atol=1e-12)
    raw = Grant.build(sk, 4, 1, rotation=1.0, align_frames=False)
    new_raw, _ = inherit(Inheritance((raw,)), rot, np.zeros((3, 5, 3)))
    np.testing.assert_allclose(new_raw[:, 0], rot[:, 1], atol=1e-15)


def test_an_inherited_bone_runs_after_its_source_ik_included() -> None:
    from tests.helpers.control_rigs import humanoid_65

    sk, _ = humanoid_65()
    leg = JointPath.between(sk, "thigh.L", "shin.L", end="foot.L")
    # The twist bone takes half the knee's rotation; it is listed first and even asks to run
    # first, but the knee's IK writes its source, so it must wait for it.
    grant = InheritControl("twist", Inheritance((Grant.build(sk, "thigh_twist.L", "shin.L", rotation=0.5),)), priority=-5)
    ik = IKControl("leg", leg, priority=3)
    stack = ControlStack(sk, [grant, ik])
    assert [c.name for c in stack.controls] == ["leg", "twist"]
    rot = np.zeros((2, len(sk), 4))
    rot[..., 0] = 1.0
    inst = stack.instance()
    foot = sk.forward_kinematics(rot[:1])[0, sk.index("foot.L"), :3, 3]
    inst.set_target("leg", foot + [0.0, -0.2, 0.25])
    out = inst.evaluate(rot)
    knee = out.rotations[:, sk.index("shin.L")]
    assert quat_angle_between(knee, rot[:, sk.index("shin.L")]).min() > 0.3  # the IK bent it
    expected = Grant.build(sk, "thigh_twist.L", "shin.L", rotation=0.5)

    # The grant applied to the pose as the IK left it (the twist bone still animated).
    after_ik = out.rotations.copy()
    twist = sk.index("thigh_twist.L")
    after_ik[:, twist] = rot[:, twist]
    want, _ = inherit(Inheritance((expected,)), after_ik, out.translations)
    np.testing.assert_allclose(out.rotations[:, twist], want[:, 0], atol=1e-15)
    np.testing.assert_allclose(quat_angle_between(out.rotations[:, twist], rot[:, twist]), 0.5 * quat_angle_between(knee, rot[:, sk.index("shin.L")]), atol=1e-12)


def test_inheritance_cycles_and_self_grants_are_refused() -> None:
    sk = aligned_rig()
    with pytest.raises(RigError, match="itself"):
        Grant.build(sk, "A", "A")
    with pytest.raises(RigError, match="cycle"):
        Inheritance((Grant.build(sk, "A", "B"), Grant.build(sk, "B", "A")))
    one = InheritControl("one", Inheritance((Grant.build(sk, "A", "B"),)))
    two = InheritControl("two", Inheritance((Grant.build(sk, "B", "A"),)))
    with pytest.raises(RigError, match="cycle"):
        ControlStack(sk, [one, two])


def test_fixed_axis_keeps_exactly_the_twist() -> None:
    rng = np.random.default_rng(4)
    axis = np.array([0.0, 1.0, 0.0])
    twist = quat_from_axis_angle(axis, rng.uniform(-3.0, 3.0, 50)[:, None] * np.ones((1, 1)))
    swing_axes = rng.normal(size=(50, 3))
    swing_axes -= (swing_axes @ axis)[:, None] * axis
    swing = quat_from_axis_angle(swing_axes / np.linalg.norm(swing_axes, axis=1, keepdims=True), rng.uniform(-2.5, 2.5, 50))
    q = quat_multiply(swing, twist.reshape(50, 4))
    got = twist_about(q, np.broadcast_to(axis, (50, 3)))
    err = quat_angle_between(got, twist.reshape(50, 4))
    print(f"\nfixed axis: largest angle from the exact twist {err.max():.1e} rad over 50 swing*twist rotations")
    assert err.max() <= 1e-12
    # A half-turn swing has no twist: the identity, not a NaN.
    half = quat_from_axis_angle([1.0, 0.0, 0.0], math.pi)
    np.testing.assert_allclose(twist_about(half, axis), [1.0, 0.0, 0.0, 0.0], atol=1e-12)


def test_fixed_axis_in_the_stack_on_a_rest_direction() -> None:
    from tests.helpers.control_rigs import humanoid_65

    sk, parts = humanoid_65()
    head, tail = parts["forearm_twist.L"]
    control = FixedAxisControl("roll", FixedAxes.build(sk, ["forearm_twist.L"], tail - head, frame="rest"))
    # The rest direction of a bone along its own length is its local Y axis.
    np.testing.assert_allclose(control.axes.axes[0], [0.0, 1.0, 0.0], atol=1e-12)
    rng = np.random.default_rng(1)
    rot = random_quats(rng, (4, len(sk)))
    out = ControlStack(sk, [control]).instance().evaluate(rot)
    j = sk.index("forearm_twist.L")
    np.testing.assert_allclose(out.rotations[:, j, [1, 3]], 0.0, atol=1e-15)
    with pytest.raises(RigError):
        FixedAxes.build(sk, ["forearm_twist.L"], [0.0, 0.0, 0.0])
