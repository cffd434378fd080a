"""Diamond closure (docs/controls.md#closure): residual, iterations, satisfied vs stopped, construction refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.controls.chains import JointPath, PoseBuffers
from marionette.core.controls.closure import STOP_REASONS, DiamondClosure, solve_closure
from marionette.core.controls.joint_limits import HingeLimit
from marionette.core.controls.stack import ClosureControl, ControlStack
from marionette.core.errors import RigError
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.control_rigs import _bone_matrix

TOL = 1e-3


def diamond(left=(0.5, 0.5), right=(0.5, 0.5), right_base=0.0):
    """A pivot with two two-bone branches in the XZ plane: the left one goes up-left then
    up-right, the right one mirrored; with the default lengths both end at (0, 0, 1). Segment
    lengths are in units of sqrt(2) (0.5 -> a 0.707 bone). ``right_base`` moves the right
    branch's first joint along +X away from the pivot."""
    s2 = math.sqrt(2.0)
    hint = np.array([0.0, -1.0, 0.0])
    l_mid = np.array([-left[0], 0.0, left[0]])
    l_end = l_mid + [left[1], 0.0, left[1]]
    r_base = np.array([right_base, 0.0, 0.0])
    r_mid = r_base + [right[0], 0.0, right[0]]
    r_end = r_mid + [-right[1], 0.0, right[1]]
    bones = [
        ("pivot", None, np.zeros(3), np.array([0.0, 0.0, -0.2])),
        ("l0", "pivot", np.zeros(3), l_mid),
        ("l1", "l0", l_mid, l_end),
        ("r0", "pivot", r_base, r_mid),
        ("r1", "r0", r_mid, r_end),
        ("tip", "r1", r_end, r_end + [0.0, 0.0, 0.1]),
    ]
    rest = np.array([_bone_matrix(h, t, hint) for _, _, h, t in bones])
    sk = Skeleton.from_rest_matrices([b[0] for b in bones], [b[1] for b in bones], rest)
    lp = JointPath.between(sk, "l0", "l1", end_offset=[0.0, left[1] * s2, 0.0])
    rp = JointPath.between(sk, "r0", "r1", end_offset=[0.0, right[1] * s2, 0.0])
    return sk, lp, rp


def rest_pose(sk: Skeleton, frames: int = 1) -> PoseBuffers:
    rot = np.zeros((frames, len(sk), 4))
    rot[..., 0] = 1.0
    return PoseBuffers(sk, rot)


def ends(sk, lp, rp, solve, pose) -> tuple[np.ndarray, np.ndarray]:
    """End points after writing the solve back (forward kinematics of the written pose)."""
    from marionette.core.controls.chains import PathKinematics

    rot = pose.rotations.copy()
    rot[:, list(lp.joints)] = solve.left
    rot[:, list(rp.joints)] = solve.right
    written = PoseBuffers(sk, rot)
    return PathKinematics(sk, lp, written).points()[:, -1], PathKinematics(sk, rp, written).points()[:, -1]


def test_reachable_targets_close_the_diamond() -> None:
    sk, lp, rp = diamond()
    closure = DiamondClosure.build(sk, lp, rp)
    pose = rest_pose(sk, 3)
    left = np.array([[0.2, 0.0, 1.1], [-0.3, 0.1, 0.8], [0.0, 0.0, 1.0]])
    right = np.array([[0.3, 0.0, 1.1], [-0.1, 0.1, 0.9], [0.0, 0.0, 1.0]])
    solve = solve_closure(sk, closure, pose, left, right, tolerance=TOL)
    el, er = ends(sk, lp, rp, solve, pose)
    print(f"\nreachable: residual {solve.residual}, iterations {solve.iterations}, stop {[STOP_REASONS[s] for s in solve.stop]}")
    assert solve.satisfied.all()
    assert np.all(solve.residual <= TOL)
    np.testing.assert_allclose(np.linalg.norm(el - er, axis=1), solve.endpoint_gap, atol=1e-12)
    # They meet at the midpoint of the controller targets (it is in reach of both).
    assert np.linalg.norm(el - 0.5 * (left + right), axis=1).max() <= TOL
    assert solve.iterations.max() <= 2
    # Already closed at the shared target: nothing moves.
    np.testing.assert_array_equal(solve.left[2], pose.rotations[2, list(lp.joints)])


def test_an_unreachable_target_with_unequal_branches_closes_at_the_shorter_reach() -> None:
    sk, lp, rp = diamond(left=(0.5, 0.5), right=(0.4, 0.4))
    closure = DiamondClosure.build(sk, lp, rp)
    pose = rest_pose(sk)
    far = np.array([0.0, 0.0, 3.0])
    solve = solve_closure(sk, closure, pose, far, far, tolerance=TOL, max_iterations=16)
    el, er = ends(sk, lp, rp, solve, pose)
    print(f"\nfar target, reaches 1.41 / 1.13: residual {solve.residual[0]:.2e}, iterations {solve.iterations[0]}")
    assert solve.satisfied[0] and solve.residual[0] <= TOL
    # The shorter branch is straight toward the target; the longer one bends to meet it.
    assert abs(np.linalg.norm(er[0]) - 0.8 * math.sqrt(2.0)) <= 2 * TOL
    assert solve.iterations[0] > 2
    # With too few iterations the same frame stops without being satisfied.
    short = solve_closure(sk, closure, pose, far, far, tolerance=TOL, max_iterations=2)
    assert not short.satisfied[0] and STOP_REASONS[short.stop[0]] == "max_iterations"
    assert short.residual[0] > TOL and short.iterations[0] == 2


def test_apart_bases_are_never_satisfied_and_the_residual_counts_them() -> None:
    sk, lp, rp = diamond(right_base=0.05)
    closure = DiamondClosure.build(sk, lp, rp)
    pose = rest_pose(sk)
    target = np.array([0.1, 0.0, 1.1])
    solve = solve_closure(sk, closure, pose, target, target, tolerance=TOL)
    print(
        f"\nbases 5 cm apart: base gap {solve.base_gap[0]:.3f}, end gap {solve.endpoint_gap[0]:.1e},"
        f" residual {solve.residual[0]:.3f}, stop {STOP_REASONS[solve.stop[0]]}"
    )
    assert abs(solve.base_gap[0] - 0.05) <= 1e-12
    assert solve.endpoint_gap[0] <= TOL
    assert solve.residual[0] == pytest.approx(solve.base_gap[0] + solve.endpoint_gap[0])
    assert not solve.satisfied[0] and STOP_REASONS[solve.stop[0]] == "stalled"


def test_limits_that_keep_the_ends_apart_leave_it_unsatisfied() -> None:
    # The left branch may hardly move (its end stays near (0, 0, 1), 1 from the pivot); the
    # right one reaches 0.85 at most: no point is reachable by both.
    sk, lp, rp = diamond(left=(0.5, 0.5), right=(0.3, 0.3))
    stiff = HingeLimit(axis=[0.0, 0.0, 1.0], min_angle=-math.radians(2.0), max_angle=math.radians(2.0))
    closure = DiamondClosure.build(sk, lp, rp, limits_left=(stiff, stiff))
    pose = rest_pose(sk)
    target = np.array([0.0, 0.0, 0.7])
    solve = solve_closure(sk, closure, pose, target, target, tolerance=TOL, max_iterations=16)
    print(
        f"\nblocked by limits: residual {solve.residual[0]:.3f}, iterations {solve.iterations[0]},"
        f" stop {STOP_REASONS[solve.stop[0]]}, limited {bool(solve.limited[0])}"
    )
    assert not solve.satisfied[0]
    assert solve.residual[0] >= 0.1
    assert STOP_REASONS[solve.stop[0]] in ("stalled", "max_iterations")


def test_shared_driver_bones_and_nested_branches_are_refused_naming_the_bones() -> None:
    sk, lp, rp = diamond()
    with pytest.raises(RigError, match="'l1'"):
        DiamondClosure.build(sk, lp, JointPath.between(sk, "l1", "l1", end_offset=[0.0, 0.5, 0.0]))
    # The right branch hanging below the left one's end joint.
    nested_sk = Skeleton.from_rest_matrices(
        list(sk.names) + ["sub"], [None if p < 0 else sk.names[p] for p in sk.parents] + ["l1"],
        np.concatenate([sk.rest_placements(), sk.rest_placements()[-1:]]),
    )
    lp2 = JointPath.between(nested_sk, "l0", "l1", end_offset=[0.0, 0.7, 0.0])
    sub = JointPath.between(nested_sk, "sub", "sub", end_offset=[0.0, 0.1, 0.0])
    with pytest.raises(RigError, match="'sub' hangs below the left branch's bone 'l1'"):
        DiamondClosure.build(nested_sk, lp2, sub)
    with pytest.raises(RigError, match="hangs below"):
        DiamondClosure.build(nested_sk, sub, lp2)


def test_the_closure_in_the_stack() -> None:
    sk, lp, rp = diamond()
    closure = DiamondClosure.build(sk, lp, rp)
    stack = ControlStack(sk, [ClosureControl("loop", closure, smooth_time=0.1)])
    rot = np.zeros((1, len(sk), 4))
    rot[..., 0] = 1.0
    one, two, solo = stack.instance(), stack.instance(), stack.instance()
    for inst in (one, solo):
        inst.set_closure_targets("loop", [0.2, 0.0, 1.1], [0.3, 0.0, 1.1])
    two.set_closure_targets("loop", [-0.3, 0.0, 0.9], [-0.2, 0.0, 0.9])
    for _ in range(5):
        a = one.evaluate(rot, dt=1 / 30)
        two.evaluate(rot, dt=1 / 30)
        s = solo.evaluate(rot, dt=1 / 30)
        np.testing.assert_array_equal(a.rotations, s.rotations)
    report = a.reports["loop"]
    assert report.converged[0] and report.details["satisfied"][0]
    assert report.details["stop"][0] == "satisfied" and report.residual[0] <= TOL
    with pytest.raises(RigError):
        one.set_target("loop", [0.0, 0.0, 1.0])
    # NaN targets skip the frame and leave the pose.
    one.set_closure_targets("loop", [np.nan, 0.0, 1.0], [0.0, 0.0, 1.0])
    out = one.evaluate(rot, dt=1 / 30)
    assert out.reports["loop"].skipped[0]
    np.testing.assert_array_equal(out.rotations, rot)
