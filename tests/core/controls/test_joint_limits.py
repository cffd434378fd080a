"""Joint limits: projection properties and limited IK solves (docs/controls.md#ik-chains)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.chains import JointPath, PathKinematics, PoseBuffers
from marionette.core.controls.ik import solve_path_ik
from marionette.core.controls.joint_limits import (
    ConeLimit,
    EulerBoxLimit,
    HingeLimit,
    clamp_angle,
    limit_violations,
)
from marionette.core.errors import RigError
from marionette.core.rig.rotations import quat_angle_between, quat_from_axis_angle, swing_twist
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.control_rigs import random_quats, small_quats

LIMITS = {
    "cone": ConeLimit(axis=[0.0, 1.0, 0.0], max_swing=math.radians(50)),
    "cone+twist": ConeLimit(axis=[0.2, 1.0, 0.1], max_swing=math.radians(70), twist_min=-0.4, twist_max=0.6),
    "hinge": HingeLimit(axis=[1.0, 0.0, 0.0], min_angle=0.0, max_angle=math.radians(150)),
    "hinge-narrow": HingeLimit(axis=[0.3, 0.2, 0.9], min_angle=-0.2, max_angle=0.5),
    "box-XYZ": EulerBoxLimit([-0.5, -0.2, -1.0], [0.8, 0.3, 0.1], "XYZ"),
    "box-ZXY": EulerBoxLimit([-1.5, -0.1, -0.3], [0.2, 1.2, 0.3], "ZXY"),
    "box-YZX": EulerBoxLimit([-0.1, -math.pi, -0.2], [0.1, math.pi, 0.2], "YZX"),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_projection_leaves_zero_violations_and_is_idempotent(name: str) -> None:
    limit = LIMITS[name]
    q = random_quats(np.random.default_rng(1), (20000,))
    p = limit.project(q)
    v = limit.violation(p)
    outside = limit.violation(q) > 0.0
    print(f"\n{name}: {outside.mean():.1%} of random rotations outside; after projection max violation {v.max():.1e} rad")
    assert v.max() <= 1e-9
    assert quat_angle_between(limit.project(p), p).max() <= 1e-9
    # Rotations already inside are returned bit for bit.
    np.testing.assert_array_equal(p[~outside], q[~outside])


def test_cone_projection_moves_by_exactly_the_excess_swing() -> None:
    limit = LIMITS["cone"]
    q = random_quats(np.random.default_rng(2), (20000,))
    swing, _ = swing_twist(q, limit.axis)
    swing_angle = 2 * np.arctan2(np.linalg.norm(swing[:, 1:], axis=1), np.abs(swing[:, 0]))
    moved = quat_angle_between(q, limit.project(q))
    excess = np.maximum(swing_angle - limit.max_swing, 0.0)
    assert np.abs(moved - excess).max() <= 1e-9


def test_hinge_projection_is_a_pure_turn_about_its_axis_inside_the_range() -> None:
    limit = LIMITS["hinge-narrow"]
    p = limit.project(random_quats(np.random.default_rng(3), (5000,)))
    swing, _ = swing_twist(p, limit.axis)
    assert np.abs(swing[:, 1:]).max() <= 1e-12
    angle = limit.angle(p)
    assert angle.min() >= limit.min_angle - 1e-12 and angle.max() <= limit.max_angle + 1e-12


def test_clamp_angle_goes_to_the_nearer_end_around_the_circle() -> None:
    assert clamp_angle(math.radians(-170), 0.0, math.radians(150)) == pytest.approx(math.radians(150))
    assert clamp_angle(math.radians(-10), 0.0, math.radians(150)) == pytest.approx(0.0)
    assert clamp_angle(0.3, -0.5, 0.5) == 0.3


def test_bad_limits_are_refused() -> None:
    with pytest.raises(RigError):
        HingeLimit(axis=[0.0, 0.0, 0.0], min_angle=0.0, max_angle=1.0)
    with pytest.raises(RigError):
        ConeLimit(axis=[0.0, 1.0, 0.0], max_swing=4.0)
    with pytest.raises(RigError):
        EulerBoxLimit([0.5, 0.0, 0.0], [0.1, 0.0, 0.0])


# --- limited solves --------------------------------------------------------------------------


def leg() -> tuple[Skeleton, JointPath]:
    """Thigh and shin along their own +Y, the knee hinge about +X; the end point is the ankle."""
    c0 = np.broadcast_to(np.eye(4), (2, 4, 4)).copy()
    c0[1, :3, 3] = [0.0, 0.45, 0.0]
    sk = Skeleton(["thigh", "shin"], [-1, 0], c0)
    return sk, JointPath.between(sk, 0, 1, end_offset=[0.0, 0.42, 0.0])


KNEE = HingeLimit(axis=[1.0, 0.0, 0.0], min_angle=0.0, max_angle=math.radians(100))
HIP = ConeLimit(axis=[0.0, 1.0, 0.0], max_swing=math.radians(120))


def leg_pose(frames: int, bend: float = 0.35) -> np.ndarray:
    rot = np.zeros((frames, 2, 4))
    rot[:, 0] = [1.0, 0.0, 0.0, 0.0]
    rot[:, 1] = quat_from_axis_angle([1.0, 0.0, 0.0], bend)
    return rot


def knee_bend_for(distance: np.ndarray) -> np.ndarray:
    a, b = 0.45, 0.42
    return math.pi - np.arccos(np.clip((a * a + b * b - distance**2) / (2 * a * b), -1.0, 1.0))


@pytest.mark.parametrize("solver", ["two_bone", "fabrik", "ccd"])
def test_limited_solves_end_with_zero_violations_and_report_blocked_targets(solver: str) -> None:
    sk, path = leg()
    rng = np.random.default_rng(4)
    frames = 2000
    pose = PoseBuffers(sk, leg_pose(frames))
    kin = PathKinematics(sk, path, pose)
    direction = rng.normal(size=(frames, 3))
    direction[:, 1] = np.abs(direction[:, 1]) + 0.5  # inside the hip cone, like a leg target
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    distance = rng.uniform(0.1, 0.86, frames)
    target = distance[:, None] * direction
    limits = (HIP, KNEE)
    sol = solve_path_ik(kin, target, solver=solver, limits=limits, tolerance=1e-6)
    v = limit_violations(limits, sol.rotations)
    needs = knee_bend_for(distance)
    blocked = needs > KNEE.max_angle + 1e-3
    easy = needs < KNEE.max_angle - 1e-3
    print(
        f"\n{solver} with hip cone + knee hinge: max violation {v.max():.1e} rad; "
        f"{blocked.sum()} targets need more knee than allowed, reported limited {sol.limited[blocked].mean():.1%}; "
        f"others converged {sol.converged[easy].mean():.1%}"
    )
    assert v.max() <= 1e-9
    assert sol.limited[blocked].all() and not sol.converged[blocked].any()
    assert sol.converged[easy].mean() >= 0.99
    # A target the limits allow is reported limited only if the solver stopped short at a limit.
    assert not (sol.limited & sol.converged).any()
    assert sol.limited[easy].mean() <= 1.0 - sol.converged[easy].mean()


@pytest.mark.slow
def test_limited_solve_projection_is_the_final_word_for_euler_boxes() -> None:
    rng = np.random.default_rng(5)
    c0 = np.broadcast_to(np.eye(4), (4, 4, 4)).copy()
    c0[1:, :3, 3] = [0.0, 0.5, 0.0]
    sk = Skeleton(["a", "b", "c", "d"], [-1, 0, 1, 2], c0)
    path = JointPath.between(sk, 0, 3, end_offset=[0.0, 0.5, 0.0])
    limits = (
        EulerBoxLimit([-1.0, -0.5, -1.0], [1.0, 0.5, 1.0], "XYZ"),
        EulerBoxLimit([-0.2, -0.2, -1.5], [1.5, 0.2, 0.2], "ZXY"),
        EulerBoxLimit([-1.2, -0.3, -0.3], [0.3, 0.3, 0.3], "XYZ"),
        None,
    )
    pose = PoseBuffers(sk, small_quats(rng, (1000, 4), 0.2))
    kin = PathKinematics(sk, path, pose)
    target = rng.normal(size=(1000, 3)) * 0.8 + [0.0, 1.0, 0.0]
    for solver in ("fabrik", "ccd"):
        sol = solve_path_ik(kin, target, solver=solver, limits=limits, tolerance=1e-4)
        v = limit_violations(limits, sol.rotations)[~sol.kept]
        print(f"\n{solver} with Euler boxes: max violation {v.max():.1e} rad, converged {sol.converged.mean():.1%}, limited {sol.limited.mean():.1%}")
        assert v.max() <= 1e-9


def hinge_sweep(solver: str, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The target runs out to near full reach and back in toward the hip along a bent path that
    leaves the knee's plane; returns the measured knee angle and the ideal (clamped) one."""
    sk, path = leg()
    s = np.linspace(0.0, 1.0, frames)
    distance = 0.2 + 0.64 * np.sin(np.pi * s) ** 2
    heading = np.stack([0.4 * np.sin(2 * np.pi * s), np.ones(frames), 0.6 * np.cos(np.pi * s)], axis=1)
    target = distance[:, None] * heading / np.linalg.norm(heading, axis=1, keepdims=True)
    pose = PoseBuffers(sk, leg_pose(frames))
    kin = PathKinematics(sk, path, pose)
    sol = solve_path_ik(kin, target, solver=solver, limits=(HIP, KNEE), tolerance=1e-6)
    knee = KNEE.angle(sol.rotations[:, 1])
    ideal = np.minimum(knee_bend_for(distance), KNEE.max_angle)
    return knee, ideal


def reversals(x: np.ndarray, eps: float = 1e-6) -> int:
    dx = np.diff(x)
    dx = dx[np.abs(dx) > eps]
    return int(np.sum(np.sign(dx[1:]) != np.sign(dx[:-1])))


@pytest.mark.parametrize("solver", ["two_bone", "fabrik", "ccd"])
def test_hinge_does_not_oscillate_on_a_sweep(solver: str) -> None:
    knee, ideal = hinge_sweep(solver, 1500)
    extra = reversals(knee) - reversals(ideal)
    print(
        f"\n{solver} knee-hinge sweep: {reversals(knee)} direction reversals (ideal path has {reversals(ideal)}), "
        f"max deviation from the ideal knee angle {np.degrees(np.abs(knee - ideal).max()):.2e} deg"
    )
    assert extra == 0
    assert np.abs(knee - ideal).max() <= 1e-3
