"""Look-at: aim, rig-space limits, distribution along the chain, no flips (docs/controls.md#look-at)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.chains import PathKinematics, PoseBuffers
from marionette.core.controls.look_at import LookAtChain, look_at, yaw_pitch
from marionette.core.errors import RigError
from marionette.core.rig.rotations import quat_angle_between, quat_from_axis_angle, quat_multiply
from tests.helpers.control_rigs import humanoid_65, humanoid_stack, rest_axis, small_quats

SKELETON, _ = humanoid_65()
CHAIN = humanoid_stack(SKELETON).control("look").chain  # type: ignore[union-attr]
YAW = math.radians(80)
PITCH = (math.radians(-45), math.radians(60))


def posed(frames: int, seed: int, spread: float = 0.08) -> PoseBuffers:
    rot = small_quats(np.random.default_rng(seed), (frames, len(SKELETON)), spread)
    return PoseBuffers(SKELETON, rot)


def head_frame(pose: PoseBuffers, rotations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Facing direction of the head and the hips' rotation, after writing ``rotations``."""
    full = pose.rotations.copy()
    full[:, list(CHAIN.path.joints)] = rotations
    world = SKELETON.forward_kinematics(full)
    head = world[:, SKELETON.index("head")]
    facing = head[:, :3, :3] @ CHAIN.facing_axis
    return facing, world[:, SKELETON.index("hips"), :3, :3]


def eye_and_space(pose: PoseBuffers) -> tuple[np.ndarray, np.ndarray]:
    world = pose.forward_kinematics()
    return world[:, SKELETON.index("head"), :3, 3], world[:, SKELETON.index("hips"), :3, :3]


def directions_in_space(space: np.ndarray, yaw: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    f, u, s = CHAIN.rest_frame
    local = np.cos(pitch)[:, None] * (np.cos(yaw)[:, None] * f + np.sin(yaw)[:, None] * s) + np.sin(pitch)[:, None] * u
    return np.einsum("tij,tj->ti", space, local)


def test_aim_error_within_1e_6_rad_inside_the_limits() -> None:
    rng = np.random.default_rng(1)
    frames = 2000
    pose = posed(frames, 2)
    eye, space = eye_and_space(pose)
    yaw = rng.uniform(-0.85, 0.85, frames) * YAW
    pitch = rng.uniform(PITCH[0] * 0.85, PITCH[1] * 0.85, frames)
    target = eye + directions_in_space(space, yaw, pitch) * rng.uniform(0.5, 5.0, frames)[:, None]
    sol = look_at(SKELETON, CHAIN, pose, target)
    inside = ~sol.limited
    facing, _ = head_frame(pose, sol.rotations)
    # Measured independently: from the head where forward kinematics puts it, to the target.
    full = pose.rotations.copy()
    full[:, list(CHAIN.path.joints)] = sol.rotations
    eye_after = SKELETON.forward_kinematics(full)[:, SKELETON.index("head"), :3, 3]
    to_target = target - eye_after
    err = np.arctan2(np.linalg.norm(np.cross(facing, to_target), axis=1), np.sum(facing * to_target, axis=1))
    print(f"\nlook-at inside limits ({inside.sum()} of {frames} frames): max aim error {err[inside].max():.1e} rad")
    assert inside.mean() > 0.95
    assert err[inside].max() <= 1e-6
    assert sol.aim_error[inside].max() <= 1e-6


def turned_pose(pose: PoseBuffers, angle: float) -> PoseBuffers:
    """The same pose with the whole character (its root bone) turned about world up."""
    rot = pose.rotations.copy()
    rot[:, 0] = quat_multiply(quat_from_axis_angle([0.0, 0.0, 1.0], angle), rot[:, 0])
    return PoseBuffers(SKELETON, rot)


def test_limits_hold_in_rig_space_after_turning_the_character_90_degrees() -> None:
    rng = np.random.default_rng(3)
    frames = 3000
    pose = posed(frames, 4)
    eye, _ = eye_and_space(pose)
    # Targets everywhere, most of them outside the limits.
    target = eye + rng.normal(size=(frames, 3)) * 2.0
    turn = quat_from_axis_angle([0.0, 0.0, 1.0], math.pi / 2)
    from marionette.core.rig.rotations import quat_apply

    turned = turned_pose(pose, math.pi / 2)
    turned_target = quat_apply(turn, target)  # the root bone sits at the origin
    plain = look_at(SKELETON, CHAIN, pose, target)
    rotated = look_at(SKELETON, CHAIN, turned, turned_target)
    worst = 0.0
    for p, sol in ((pose, plain), (turned, rotated)):
        facing, space = head_frame(p, sol.rotations)
        yaw, pitch = yaw_pitch(np.einsum("tji,tj->ti", space, facing), CHAIN.rest_frame)
        over = np.maximum.reduce([np.abs(yaw) - YAW, PITCH[0] - pitch, pitch - PITCH[1], np.zeros(frames)])
        worst = max(worst, float(over.max()))
    same = quat_angle_between(plain.rotations, rotated.rotations).max()
    print(f"\nlook-at limits after a 90 deg turn: worst overshoot {worst:.1e} rad; local turn differs by {same:.1e} rad")
    assert plain.limited.mean() > 0.3
    assert worst <= 1e-9
    assert same <= 1e-9


def test_turn_is_distributed_by_the_weights_within_1_percent() -> None:
    rng = np.random.default_rng(5)
    frames = 1000
    pose = posed(frames, 6, spread=0.05)
    eye, space = eye_and_space(pose)
    yaw = rng.uniform(-0.8, 0.8, frames) * YAW
    pitch = rng.uniform(PITCH[0] * 0.8, PITCH[1] * 0.8, frames)
    # Far targets: a turn of the chest moves the eye, which changes the direction to a near
    # target; the distribution is a statement about the turn, not about parallax.
    target = eye + directions_in_space(space, yaw, pitch) * 200.0
    sol = look_at(SKELETON, CHAIN, pose, target)
    before = pose.rotations[:, list(CHAIN.path.joints)]
    turns = quat_angle_between(before, sol.rotations)
    total = turns.sum(axis=1)
    moving = total > math.radians(5)
    share = turns[moving] / total[moving, None]
    expected = CHAIN.weights / CHAIN.weights.sum()
    dev = np.abs(share - expected).max()
    print(f"\nlook-at distribution over {moving.sum()} turns: weights {expected}, largest share deviation {dev:.2e}")
    assert dev <= 0.01


def orbit(frames: int, vertical: bool) -> tuple[PoseBuffers, np.ndarray]:
    pose = posed(1, 7, spread=0.0)
    pose = PoseBuffers(SKELETON, np.repeat(pose.rotations, frames, axis=0))
    eye, space = eye_and_space(pose)
    angle = np.linspace(0.0, 4 * math.pi, frames)
    if vertical:
        # Up over the head and down behind it, slightly off the mid-plane.
        yaw = np.where(np.cos(angle) >= 0.0, 0.02, math.pi - 0.02)
        pitch = np.arcsin(np.clip(np.sin(angle), -1, 1))
        dirs = directions_in_space(space, yaw, pitch)
    else:
        dirs = directions_in_space(space, angle, np.full(frames, 0.2))
    return pose, eye + 1.5 * dirs


@pytest.mark.parametrize("vertical", [False, True])
def test_no_flips_when_the_target_orbits_the_head(vertical: bool) -> None:
    frames = 1440
    pose, target = orbit(frames, vertical)
    sol = look_at(SKELETON, CHAIN, pose, target)
    facing, _ = head_frame(pose, sol.rotations)
    step = np.degrees(np.arctan2(np.linalg.norm(np.cross(facing[1:], facing[:-1]), axis=1), np.sum(facing[1:] * facing[:-1], axis=1)))
    target_step = 720.0 / (frames - 1)
    hard = LookAtChain.build(
        SKELETON, ["spine2", "neck", "head"], weights=[0.2, 0.3, 0.5],
        facing_axis=CHAIN.facing_axis, up_axis=CHAIN.up_axis, space_joint="hips",
        yaw_limits=(-YAW, YAW), pitch_limits=PITCH, behind_falloff=False,
    )
    hard_sol = look_at(SKELETON, hard, pose, target)
    hard_facing, _ = head_frame(pose, hard_sol.rotations)
    hard_step = np.degrees(np.arctan2(np.linalg.norm(np.cross(hard_facing[1:], hard_facing[:-1]), axis=1), np.sum(hard_facing[1:] * hard_facing[:-1], axis=1)))
    kind = "vertical" if vertical else "horizontal"
    print(f"\n{kind} orbit, target moves {target_step:.2f} deg/frame: largest head step {step.max():.2f} deg (hard clamp: {hard_step.max():.1f} deg)")
    assert step.max() <= 3 * target_step
    if not vertical:
        assert hard_step.max() > 90.0  # without the fall-off behind, the head does flip


def test_nan_and_degenerate_targets_change_nothing() -> None:
    pose = posed(3, 8)
    eye, _ = eye_and_space(pose)
    target = np.array([[np.nan, 0.0, 0.0], eye[1], [0.0, -3.0, 1.7]])
    sol = look_at(SKELETON, CHAIN, pose, target)
    before = pose.rotations[:, list(CHAIN.path.joints)]
    np.testing.assert_array_equal(sol.rotations[:2], before[:2])
    assert list(sol.valid) == [False, False, True]


def test_space_joint_inside_the_chain_is_refused() -> None:
    with pytest.raises(RigError):
        LookAtChain.build(
            SKELETON, ["neck", "head"], facing_axis=rest_axis(SKELETON, "head", (0, -1, 0)),
            up_axis=rest_axis(SKELETON, "head", (0, 0, 1)), space_joint="head",
        )


def test_path_kinematics_of_the_look_chain_match_forward_kinematics() -> None:
    pose = posed(10, 9)
    kin = PathKinematics(SKELETON, CHAIN.path, pose)
    world = pose.forward_kinematics()
    np.testing.assert_allclose(kin.points()[:, :-1], world[:, list(CHAIN.path.joints)][:, :, :3, 3], atol=1e-12)


@pytest.mark.parametrize(
    ("weights", "eye_offset", "space_joint"),
    [(None, None, "hips"), ([0.2, 0.3, 1.0], (0.0, -0.1, 0.08), "hips"), ([0.5, 0.0, 1.0], (0.0, -0.1, 0.08), None)],
)
def test_a_single_frame_matches_the_batched_solve(weights, eye_offset, space_joint) -> None:
    """A single frame (the live case) is solved in plain floats: the same rotations, aim error
    and limit flags as the batched arrays give that frame, to 1e-12, inside and beyond the limits,
    with the eye on or off the pivot and with or without a root space."""
    kwargs = {} if eye_offset is None else {"eye_offset": eye_offset}
    chain = LookAtChain.build(
        SKELETON, ["spine2", "neck", "head"], weights=weights, facing_axis=rest_axis(SKELETON, "head", (0, -1, 0)),
        up_axis=rest_axis(SKELETON, "head", (0, 0, 1)), space_joint=space_joint,
        yaw_limits=(-YAW, YAW), pitch_limits=PITCH, **kwargs,
    )
    rng = np.random.default_rng(11)
    limited = 0
    for seed in range(60):
        pose = posed(1, 100 + seed, spread=0.3)
        target = rng.normal(size=(1, 3)) * 3.0
        one = look_at(SKELETON, chain, pose, target)
        twice = look_at(SKELETON, chain, PoseBuffers(SKELETON, np.repeat(pose.rotations, 2, axis=0)), np.repeat(target, 2, axis=0))
        np.testing.assert_allclose(one.rotations[0], twice.rotations[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(one.aim_error, twice.aim_error[:1], rtol=0, atol=1e-12)
        assert one.limited[0] == twice.limited[0] and one.valid[0] == twice.valid[0]
        limited += int(one.limited[0])
    assert 5 < limited < 55
