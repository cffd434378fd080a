"""IK and look-at on a real rig and clip: the CMU 12_03 BVH (31 joints, 566 frames, 120 fps),
read without Blender. Legs and arms are solved over the whole clip in one vectorised call.

The clip is in ``tests/data``; synthetic rigs cover the same properties in the other control
tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shared_file

from marionette.core.controls.chains import JointPath, PathKinematics, PoseBuffers
from marionette.core.controls.ik import solve_path_ik
from marionette.core.controls.ik_fabrik import fabrik
from marionette.core.controls.look_at import LookAtChain, look_at, yaw_pitch
from marionette.core.formats.bvh import read_bvh

pytestmark = pytest.mark.data

CLIP = "bvh/cmu/12_03_motionbuilder.bvh"


@pytest.fixture(scope="module")
def rig():
    bvh = read_bvh(shared_file(CLIP))
    skeleton = bvh.skeleton()
    clip = bvh.clip()
    pose = PoseBuffers(skeleton, clip.rotations, clip.translations)
    return skeleton, pose


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def perpendicular(v: np.ndarray, axis: np.ndarray) -> np.ndarray:
    a = unit(axis)
    return v - np.sum(v * a, axis=-1, keepdims=True) * a


@pytest.mark.parametrize(("upper", "lower", "end"), [("LeftUpLeg", "LeftLeg", "LeftFoot"), ("RightArm", "RightForeArm", "RightHand")])
def test_two_bone_over_the_whole_clip_in_one_call(rig, upper: str, lower: str, end: str) -> None:
    skeleton, pose = rig
    path = JointPath.between(skeleton, upper, lower, end=end)
    kin = PathKinematics(skeleton, path, pose)
    points = kin.points()
    frames = points.shape[0]
    lengths = np.linalg.norm(np.diff(points, axis=1), axis=-1)
    reach = lengths.sum(axis=1)
    # Pull each end point 15 % of the limb toward the root and sideways: always within reach,
    # never where it was. The pole follows the character's facing (the hips): knees forward,
    # elbows back, as a rig's pole targets do.
    target = points[:, 2] + 0.15 * reach[:, None] * unit(points[:, 0] - points[:, 2] + [0.3, 0.0, 0.4])
    hips = pose.world(skeleton.index("Hips"))[:, :3, :3]
    forward = hips @ np.array([0.0, 0.0, 1.0 if upper.endswith("UpLeg") else -1.0])
    pole = points[:, 1] + reach[:, None] * forward
    sol = solve_path_ik(kin, target, solver="two_bone", pole=pole, tolerance=1e-9 * reach)
    rel = sol.residual / reach
    new_lengths = np.linalg.norm(np.diff(sol.points, axis=1), axis=-1)
    solved_bend = perpendicular(sol.points[:, 1] - sol.points[:, 0], sol.points[:, 2] - sol.points[:, 0])
    pole_dir = perpendicular(pole - sol.points[:, 0], target - sol.points[:, 0])
    plane = np.arctan2(np.linalg.norm(np.cross(solved_bend, pole_dir), axis=1), np.sum(solved_bend * pole_dir, axis=1))
    flips = int(np.sum(np.sum(unit(solved_bend[1:]) * unit(solved_bend[:-1]), axis=1) < 0.0))
    print(
        f"\n{upper}-{lower} on {CLIP}, {frames} frames in one call: residual/length max {rel.max():.1e}, "
        f"length change max {np.abs(new_lengths / lengths - 1).max():.1e}, bend plane max {plane.max():.1e} rad, {flips} flips"
    )
    assert rel.max() <= 1e-9
    assert np.abs(new_lengths / lengths - 1).max() <= 1e-12
    assert plane.max() <= 1e-6
    assert flips == 0


def test_fabrik_spine_on_the_clip(rig) -> None:
    skeleton, pose = rig
    path = JointPath.between(skeleton, "LowerBack", "Neck1", end="Head")
    kin = PathKinematics(skeleton, path, pose)
    points = kin.points()
    total = np.linalg.norm(np.diff(points, axis=1), axis=-1).sum(axis=1)
    sway = np.stack([np.sin(np.linspace(0, 6 * math.pi, len(total))), np.zeros(len(total)), np.cos(np.linspace(0, 4 * math.pi, len(total)))], axis=1)
    target = points[:, -1] + 0.12 * total[:, None] * sway - [0.0, 0.05, 0.0] * total[:, None]
    sol = solve_path_ik(kin, target, solver="fabrik", tolerance=1e-3 * total)
    full = pose.rotations.copy()
    full[:, list(path.joints)] = sol.rotations
    world = skeleton.forward_kinematics(full, pose.translations)
    fk_end = world[:, skeleton.index("Head"), :3, 3]
    err = np.abs(fk_end - sol.points[:, -1]).max() / total.max()
    print(f"\nspine FABRIK on {CLIP}: converged {sol.converged.mean():.1%}, |FK - solved| / length {err:.1e}")
    assert sol.converged.mean() >= 0.99
    assert err <= 1e-9
    assert fabrik(points, target, tolerance=1e-3 * total).converged.mean() >= 0.99


def test_look_at_limits_on_the_clip(rig) -> None:
    skeleton, pose = rig
    # The BVH rest pose is a T-pose facing +Z with Y up; joints carry no rest rotation.
    chain = LookAtChain.build(
        skeleton, ["Spine1", "Neck", "Head"], weights=[0.25, 0.25, 0.5],
        facing_axis=[0.0, 0.0, 1.0], up_axis=[0.0, 1.0, 0.0], space_joint="Hips",
        yaw_limits=(-math.radians(70), math.radians(70)), pitch_limits=(-math.radians(40), math.radians(50)),
    )
    world = pose.forward_kinematics()
    head = world[:, skeleton.index("Head"), :3, 3]
    frames = len(head)
    angle = np.linspace(0.0, 8 * math.pi, frames)
    target = head + 40.0 * np.stack([np.sin(angle), 0.3 * np.cos(3 * angle), np.cos(angle)], axis=1)
    sol = look_at(skeleton, chain, pose, target)
    full = pose.rotations.copy()
    full[:, list(chain.path.joints)] = sol.rotations
    after = skeleton.forward_kinematics(full, pose.translations)
    facing = after[:, skeleton.index("Head"), :3, :3] @ chain.facing_axis
    space = after[:, skeleton.index("Hips"), :3, :3]
    yaw, pitch = yaw_pitch(np.einsum("tji,tj->ti", space, facing), chain.rest_frame)
    over = np.max([np.abs(yaw) - math.radians(70), math.radians(-40) - pitch, pitch - math.radians(50)], axis=0)
    step = np.degrees(np.arctan2(np.linalg.norm(np.cross(facing[1:], facing[:-1]), axis=1), np.sum(facing[1:] * facing[:-1], axis=1)))
    print(
        f"\nlook-at on {CLIP}: {sol.limited.mean():.0%} of frames limited, overshoot {max(over.max(), 0):.1e} rad, "
        f"aim error inside {sol.aim_error[~sol.limited].max():.1e} rad, largest head step {step.max():.2f} deg/frame"
    )
    assert over.max() <= 1e-9
    assert sol.aim_error[~sol.limited].max() <= 1e-6
