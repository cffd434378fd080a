"""IK solvers: measured properties on seeded random chains (docs/controls.md#ik-chains).

Every test states its tolerance. Convergence histograms are printed (run with ``-s`` to see
them); the issue asks for them to be recorded next to the asserted rates.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.controls.chains import JointPath, PathKinematics, PoseBuffers
from marionette.core.controls.ik import solve_path_ik
from marionette.core.controls.ik_ccd import ccd
from marionette.core.controls.ik_common import REACH_MARGIN
from marionette.core.controls.ik_fabrik import fabrik
from marionette.core.controls.ik_two_bone import two_bone_ik
from marionette.core.rig.rotations import quat_conjugate, quat_multiply, swing_twist
from tests.helpers.control_rigs import random_chain, random_quats, small_quats


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def perpendicular(v: np.ndarray, axis: np.ndarray) -> np.ndarray:
    a = unit(axis)
    return v - np.sum(v * a, axis=-1, keepdims=True) * a


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between directions, accurate near 0 and pi (arccos of a dot product is not)."""
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


def histogram(iterations: np.ndarray, converged: np.ndarray, passes: int = 16) -> str:
    counts = np.bincount(iterations[converged], minlength=passes + 1)[1 : passes + 1]
    return " ".join(f"{k + 1}:{c}" for k, c in enumerate(counts)) + f" | missed:{int((~converged).sum())}"


# --- two-bone ----------------------------------------------------------------------------------


def random_triangles(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Chains (root, middle, end), reachable targets, poles and chain lengths."""
    a = rng.uniform(0.2, 1.0, n)
    b = rng.uniform(0.2, 1.0, n)
    root = rng.normal(size=(n, 3))
    mid = root + a[:, None] * unit(rng.normal(size=(n, 3)))
    end = mid + b[:, None] * unit(rng.normal(size=(n, 3)))
    d = rng.uniform(np.abs(a - b), a + b)
    target = root + d[:, None] * unit(rng.normal(size=(n, 3)))
    pole = root + rng.normal(size=(n, 3)) * (a + b)[:, None]
    return np.stack([root, mid, end], axis=1), target, pole, a + b


def test_two_bone_hits_reachable_targets_within_1e_9_of_length() -> None:
    rng = np.random.default_rng(11)
    points, target, pole, length = random_triangles(rng, 5000)
    sol = two_bone_ik(points, target, pole, tolerance=1e-9 * length)
    rel = sol.residual / length
    print(f"\ntwo-bone residual / length: max {rel.max():.2e}, median {np.median(rel):.2e}")
    assert sol.reachable.all()
    assert rel.max() <= 1e-9
    assert sol.converged.all()
    assert REACH_MARGIN <= 1e-9  # the clamp itself must stay inside the promised accuracy


def test_two_bone_preserves_segment_lengths_to_1e_12() -> None:
    rng = np.random.default_rng(12)
    points, target, pole, _ = random_triangles(rng, 5000)
    # Unreachable and folded targets too: lengths must hold whatever the clamp does.
    target = np.concatenate([target, points[:, 0] + 5 * rng.normal(size=(5000, 3))])
    points = np.concatenate([points, points])
    pole = np.concatenate([pole, pole])
    sol = two_bone_ik(points, target, pole, tolerance=0.0)
    before = np.linalg.norm(np.diff(points, axis=1), axis=-1)
    after = np.linalg.norm(np.diff(sol.points, axis=1), axis=-1)
    rel = np.abs(after - before) / before
    print(f"\ntwo-bone segment length change: max {rel.max():.2e} (relative)")
    assert rel.max() <= 1e-12


def test_two_bone_bend_plane_is_the_pole_plane_within_1e_6_rad() -> None:
    rng = np.random.default_rng(13)
    points, target, pole, length = random_triangles(rng, 5000)
    sol = two_bone_ik(points, target, pole, tolerance=0.0)
    root, mid, end = sol.points[:, 0], sol.points[:, 1], sol.points[:, 2]
    bend = perpendicular(mid - root, end - root)
    wanted = perpendicular(pole - root, target - root)
    # Both directions are defined only off the line; the measurement itself needs some height.
    usable = (np.linalg.norm(bend, axis=-1) > 1e-6 * length) & (np.linalg.norm(wanted, axis=-1) > 1e-3 * length)
    angle = angle_between(bend[usable], wanted[usable])
    print(f"\nbend plane vs pole plane over {usable.sum()} chains: max {angle.max():.2e} rad")
    assert usable.sum() > 4900
    assert angle.max() <= 1e-6  # same plane and same side (the angle would be ~pi otherwise)


def scripted_collinear_path(frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Targets that run along the root-pole line (pole unusable) for most of the path, leave
    it and come back; the pole sits on that line."""
    line = unit(np.array([0.3, -1.0, -0.8]))
    s = np.linspace(0.0, 1.0, frames)
    dist = 0.55 + 0.35 * np.sin(6 * np.pi * s)
    off = np.where((s > 0.4) & (s < 0.6), np.sin((s - 0.4) / 0.2 * np.pi), 0.0)
    side = unit(np.cross(line, [0.0, 0.0, 1.0]))
    targets = dist[:, None] * line + 0.3 * off[:, None] * side
    pole = 2.0 * line
    return targets, np.broadcast_to(pole, targets.shape)


def test_two_bone_collinear_pole_keeps_previous_bend_side() -> None:
    targets, poles = scripted_collinear_path(600)
    chain = np.array([[0.0, 0.0, 0.0], [0.3, 0.1, -0.35], [0.1, 0.0, -0.8]])
    flips = 0
    collinear_frames = 0
    prev_bend = None
    for t, p in zip(targets, poles, strict=True):
        sol = two_bone_ik(chain[None], t[None], p[None], tolerance=0.0)
        chain = sol.points[0]  # the solved chain is the next frame's current pose
        bend = unit(perpendicular(chain[1] - chain[0], chain[2] - chain[0]))
        if np.linalg.norm(perpendicular(p - chain[0], t - chain[0])) < 1e-9:
            collinear_frames += 1
        if prev_bend is not None and np.dot(bend, prev_bend) < 0.0:
            flips += 1
        prev_bend = bend
    print(f"\ncollinear pole path: {collinear_frames} collinear frames of {len(targets)}, {flips} flips")
    assert collinear_frames > 300
    assert flips == 0


def test_two_bone_collinear_pole_without_feedback_keeps_the_animated_bend() -> None:
    targets, poles = scripted_collinear_path(600)
    animated = np.array([[0.0, 0.0, 0.0], [0.3, 0.1, -0.35], [0.1, 0.0, -0.8]])
    sol = two_bone_ik(np.broadcast_to(animated, (len(targets), 3, 3)), targets, poles, tolerance=0.0)
    axis = targets - animated[0]
    bend = perpendicular(sol.points[:, 1] - animated[0], axis)
    animated_bend = perpendicular(np.broadcast_to(animated[1] - animated[0], axis.shape), axis)
    collinear = np.linalg.norm(perpendicular(poles - animated[0], axis), axis=-1) < 1e-9
    assert np.all(np.sum(unit(bend[collinear]) * unit(animated_bend[collinear]), axis=-1) > 0.999999)


def knee_speed_peak(softness: float, samples: int) -> tuple[float, float]:
    """Peak knee angular speed (rad per unit time) as the target crosses 0.95-1.05 of reach in
    one unit of time along a straight line, and the speed at 0.95 of reach."""
    a, b = 0.45, 0.42
    reach = a + b
    chain = np.array([[0.0, 0.0, 0.0], [0.05, -0.2, -0.4], [0.0, 0.0, -reach * 0.9]])
    direction = unit(np.array([0.1, -0.2, -1.0]))
    d = np.linspace(0.95, 1.05, samples) * reach
    sol = two_bone_ik(
        np.broadcast_to(chain, (samples, 3, 3)), d[:, None] * direction, np.array([0.0, -2.0, -0.4]),
        softness=softness, tolerance=0.0,
    )
    upper = unit(sol.points[:, 1] - sol.points[:, 0])
    lower = unit(sol.points[:, 2] - sol.points[:, 1])
    knee = np.arctan2(np.linalg.norm(np.cross(upper, lower), axis=-1), np.sum(upper * lower, axis=-1))
    speed = np.abs(np.diff(knee)) * (samples - 1)
    return float(speed.max()), float(speed[0])


def test_two_bone_soft_reach_bounds_knee_speed_across_full_extension() -> None:
    # Bounded means: refining the sampling does not raise the peak (a finite derivative). With a
    # hard clamp the peak grows like the square root of the sampling rate: the knee "pops".
    soft = [knee_speed_peak(0.05, n) for n in (1_000, 10_000, 100_000)]
    hard = [knee_speed_peak(0.0, n) for n in (1_000, 10_000, 100_000)]
    print(
        f"\nknee peak speed over the 0.95-1.05 reach sweep (rad per sweep), 1e3/1e4/1e5 samples: "
        f"soft 5% {[f'{p:.3f}' for p, _ in soft]} (at 0.95: {soft[2][1]:.3f}); "
        f"hard clamp {[f'{p:.1f}' for p, _ in hard]}"
    )
    # The continuous bound: speed = v * dtheta/dd_eff * dd_eff/dd with the law of cosines and
    # the exponential ease, evaluated in closed form on a fine grid (no solver involved).
    a, b, s = 0.45, 0.42, 0.05 * 0.87
    reach = a + b
    d = np.linspace(0.95, 1.05, 2_000_001) * reach
    start = reach - s
    d_eff = np.where(d > start, reach - s * np.exp(-(d - start) / s), d)
    slope = np.where(d > start, np.exp(-(d - start) / s), 1.0)
    cos_inner = (a * a + b * b - d_eff**2) / (2 * a * b)
    bound = float(np.max(0.1 * reach * d_eff / (a * b * np.sqrt(1 - cos_inner**2)) * slope))
    print(f"  continuous bound for the soft solve: {bound:.3f} rad per sweep")
    assert soft[2][0] <= soft[0][0] * 1.02
    assert soft[2][0] <= bound * 1.001
    assert hard[2][0] > 3 * hard[0][0]  # the measurement does see a pop when there is one


def test_two_bone_batched_over_frames_equals_one_call_per_frame() -> None:
    rng = np.random.default_rng(14)
    points, target, pole, _ = random_triangles(rng, 64)
    batched = two_bone_ik(points, target, pole, tolerance=0.0)
    for i in range(64):
        single = two_bone_ik(points[i : i + 1], target[i : i + 1], pole[i : i + 1], tolerance=0.0)
        np.testing.assert_array_equal(single.points[0], batched.points[i])


def test_two_bone_few_chains_equal_the_batched_solve_bit_for_bit() -> None:
    """A live frame's few limbs are solved in plain floats, a bake's frames in numpy columns:
    every field agrees to the bit, for reachable, too far and too near targets, chains already
    there, unusable poles (on the axis, NaN) and no pole."""
    rng = np.random.default_rng(21)
    n = 512
    points, target, pole, length = random_triangles(rng, n)
    scale = rng.choice([0.5, 1.0, 3.0], n)  # too near (sometimes), within, too far
    target = points[:, 0] + (target - points[:, 0]) * scale[:, None]
    target[::17] = points[::17, 2]  # already there
    pole[1::13] = points[1::13, 0] + (target[1::13] - points[1::13, 0]) * 0.5  # on the axis
    pole[2::29] = np.nan
    for poles in (pole, None):
        batched = two_bone_ik(points, target, poles)
        for start in range(0, n, 4):
            rows = slice(start, start + 4)
            few = two_bone_ik(points[rows], target[rows], None if poles is None else poles[rows])
            for field in ("points", "residual", "iterations", "converged", "reachable"):
                np.testing.assert_array_equal(getattr(few, field), getattr(batched, field)[rows], err_msg=field)
    assert (batched.iterations == 0).sum() >= n // 17


def test_two_bone_degenerate_inputs_stay_finite() -> None:
    root = np.zeros(3)
    chains = np.array(
        [
            [root, [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]],  # straight, target on its line
            [root, [0.0, 0.0, 1.0], [0.0, 0.0, 2.0]],  # straight, target at the root
            [root, [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],  # folded
        ]
    )
    targets = np.array([[0.0, 0.0, 1.5], [0.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    sol = two_bone_ik(chains, targets, np.array([[0.0, 0.0, 5.0]] * 3))
    assert np.isfinite(sol.points).all()
    lengths = np.linalg.norm(np.diff(sol.points, axis=1), axis=-1)
    np.testing.assert_allclose(lengths, 1.0, rtol=1e-12)


# --- FABRIK and CCD convergence ----------------------------------------------------------------


def random_chains(rng: np.random.Generator, n: int, joints: int = 10) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.uniform(0.5, 1.5, (n, joints))
    directions = unit(rng.normal(size=(n, 3)))
    cum = np.concatenate([np.zeros((n, 1)), np.cumsum(lengths, axis=1)], axis=1)
    straight = cum[..., None] * directions[:, None, :]
    return straight, lengths


def reachable_targets(rng: np.random.Generator, lengths: np.ndarray) -> np.ndarray:
    # Uniform in the ball of reach (every 10-joint chain here reaches its root: no segment is
    # longer than the others together).
    total = lengths.sum(axis=1)
    r = total * np.cbrt(rng.uniform(0.0, 1.0, len(total)))
    return unit(rng.normal(size=(len(total), 3))) * r[:, None]


def warm_start_runs(
    solver, rng: np.random.Generator, chains: int, frames: int, step: float, **kw: object
) -> tuple[np.ndarray, np.ndarray]:
    """Each chain follows a random target walk (steps up to ``step`` of its length per frame),
    every frame starting from the previous frame's solution."""
    straight, lengths = random_chains(rng, chains)
    total = lengths.sum(axis=1)
    target = reachable_targets(rng, lengths) * 0.9
    current = fabrik(straight, target, tolerance=1e-9 * total, max_passes=500).points
    iterations, converged = [], []
    for _ in range(frames):
        move = unit(rng.normal(size=(chains, 3))) * (rng.uniform(0.0, step, chains) * total)[:, None]
        nxt = target + move
        # Keep the walk inside the reach, like an animated target would be.
        r = np.linalg.norm(nxt, axis=1)
        nxt = np.where((r > 0.999 * total)[:, None], nxt / r[:, None] * 0.999 * total[:, None], nxt)
        target = nxt
        sol = solver(current, target, tolerance=1e-3 * total, **kw)
        iterations.append(sol.iterations)
        converged.append(sol.converged)
        current = sol.points
    return np.concatenate(iterations), np.concatenate(converged)


def test_fabrik_convergence_from_straight_and_warm_starts() -> None:
    rng = np.random.default_rng(21)
    straight, lengths = random_chains(rng, 4000)
    total = lengths.sum(axis=1)
    target = reachable_targets(rng, lengths)
    cold = fabrik(straight, target, tolerance=1e-3 * total)
    plain_cold = fabrik(straight, target, tolerance=1e-3 * total, slack_correction=False)
    warm_it, warm_ok = warm_start_runs(fabrik, np.random.default_rng(22), 200, 20, 0.05)
    plain_it, plain_ok = warm_start_runs(fabrik, np.random.default_rng(22), 200, 20, 0.05, slack_correction=False)
    print("\nFABRIK, 10 joints, tolerance 1e-3 x length, 16 passes (converged per pass count):")
    print(f"  straight start {cold.converged.mean():.2%}: {histogram(cold.iterations, cold.converged)}")
    print(f"  warm start     {warm_ok.mean():.2%}: {histogram(warm_it, warm_ok)}")
    print(f"  plain FABRIK without the bend rescale: straight {plain_cold.converged.mean():.2%}, warm {plain_ok.mean():.2%}")
    assert cold.reachable.all()
    assert cold.converged.mean() >= 0.95
    assert warm_ok.mean() >= 0.99


def test_ccd_convergence_reported_next_to_fabrik() -> None:
    rng = np.random.default_rng(21)
    straight, lengths = random_chains(rng, 4000)
    total = lengths.sum(axis=1)
    target = reachable_targets(rng, lengths)
    cold = ccd(straight, target, tolerance=1e-3 * total)
    warm_it, warm_ok = warm_start_runs(ccd, np.random.default_rng(22), 200, 20, 0.05)
    f_cold = fabrik(straight, target, tolerance=1e-3 * total)
    print("\nCCD, same chains, targets and bounds as FABRIK:")
    print(f"  straight start CCD {cold.converged.mean():.2%} vs FABRIK {f_cold.converged.mean():.2%}: {histogram(cold.iterations, cold.converged)}")
    print(f"  warm start     CCD {warm_ok.mean():.2%}: {histogram(warm_it, warm_ok)}")
    # CCD is not held to FABRIK's rates (it needs many more sweeps near full reach); what it
    # must do is keep its lengths and never move away from the target.
    lengths_after = np.linalg.norm(np.diff(cold.points, axis=1), axis=-1)
    assert np.max(np.abs(lengths_after - lengths) / lengths) <= 1e-12
    assert cold.iterations.max() <= 16


def test_ccd_residual_never_increases_from_pass_to_pass() -> None:
    rng = np.random.default_rng(23)
    straight, lengths = random_chains(rng, 500)
    target = reachable_targets(rng, lengths)
    previous = np.linalg.norm(straight[:, -1] - target, axis=1)
    for passes in range(1, 17):
        res = ccd(straight, target, tolerance=0.0, max_passes=passes).residual
        assert np.all(res <= previous + 1e-12)
        previous = res


def test_fabrik_keeps_lengths_and_straightens_toward_unreachable_targets() -> None:
    rng = np.random.default_rng(24)
    straight, lengths = random_chains(rng, 500)
    bent = fabrik(straight, reachable_targets(rng, lengths) * 0.5, tolerance=1e-6).points
    total = lengths.sum(axis=1)
    far = unit(rng.normal(size=(500, 3))) * (total * rng.uniform(1.01, 3.0, 500))[:, None]
    sol = fabrik(bent, far)
    assert not sol.reachable.any() and not sol.converged.any()
    direction = unit(far)
    offsets = sol.points - sol.points[:, :1]
    # Every point on the ray from the root to the target, at its cumulative length.
    along = np.einsum("nki,ni->nk", offsets, direction)
    np.testing.assert_allclose(along[:, 1:], np.cumsum(lengths, axis=1), rtol=1e-12)
    assert np.abs(perpendicular(offsets, direction[:, None, :])).max() <= 1e-12 * total.max()
    np.testing.assert_allclose(sol.residual, np.linalg.norm(far, axis=1) - total, rtol=1e-12)


def test_fabrik_pole_sets_the_bend_toward_it_keeping_lengths_and_reach() -> None:
    rng = np.random.default_rng(25)
    straight, lengths = random_chains(rng, 500, joints=6)
    total = lengths.sum(axis=1)
    target = reachable_targets(rng, lengths) * 0.7
    pole = rng.normal(size=(500, 3)) * 10
    free = fabrik(straight, target, tolerance=1e-6 * total)
    sol = fabrik(straight, target, pole=pole, tolerance=1e-6 * total)
    p = sol.points
    axis = p[:, -1] - p[:, 0]
    bulge = perpendicular(p[:, 1:-1] - p[:, :1], axis[:, None, :]).sum(axis=1)
    toward = perpendicular(pole - p[:, 0], axis)
    angle = angle_between(bulge, toward)
    print(f"\nFABRIK pole: chain bend vs pole direction, max {angle.max():.1e} rad over 500 chains")
    assert angle.max() <= 1e-9
    np.testing.assert_allclose(np.linalg.norm(np.diff(p, axis=1), axis=-1), lengths, rtol=1e-12)
    np.testing.assert_allclose(sol.residual, free.residual, atol=1e-12)
    # A three-point chain gets exactly the two-bone pole plane.
    three = fabrik(straight[:, :3], target * 0.3, pole=pole, tolerance=1e-9)
    bend = perpendicular(three.points[:, 1] - three.points[:, 0], three.points[:, 2] - three.points[:, 0])
    want = perpendicular(pole - three.points[:, 0], three.points[:, 2] - three.points[:, 0])
    assert np.min(np.sum(unit(bend) * unit(want), axis=1)) >= 1 - 1e-12


# --- on skeleton paths: writeback, keep-if-there, twist ------------------------------------


def posed_chain(seed: int, joints: int, frames: int, child_frames: bool = True):
    rng = np.random.default_rng(seed)
    sk, path, lengths = random_chain(rng, joints, child_frames=child_frames)
    rot = random_quats(rng, (frames, joints))
    tr = np.zeros((frames, joints, 3))
    pose = PoseBuffers(sk, rot, tr)
    return rng, sk, path, lengths, pose


def test_written_rotations_reproduce_solved_points_within_1e_9() -> None:
    for solver, joints in (("fabrik", 10), ("two_bone", 2)):
        rng, sk, path, lengths, pose = posed_chain(31, joints, 300)
        kin = PathKinematics(sk, path, pose)
        total = lengths.sum()
        target = kin.points()[:, 0] + reachable_targets(rng, np.broadcast_to(lengths, (300, joints))) * 0.95
        sol = solve_path_ik(kin, target, solver=solver, tolerance=1e-6 * total)
        # Forward kinematics of what is written, through the full skeleton.
        rot = pose.rotations.copy()
        rot[:, list(path.joints)] = sol.rotations
        world = sk.forward_kinematics(rot)
        # A joint turns about origin(P @ C0): its pivot, not its placement's origin when its C1
        # frame is offset.
        parents = np.concatenate([np.broadcast_to(np.eye(4), (300, 1, 4, 4)), world[:, :-1]], axis=1)
        pivots = (parents @ sk.parent_frames)[:, :, :3, 3]
        end = (world[:, -1] @ np.append(path.end_offset, 1.0))[:, :3]
        fk_points = np.concatenate([pivots, end[:, None]], axis=1)
        err = np.abs(fk_points - sol.points).max() / total
        seg = np.linalg.norm(np.diff(fk_points, axis=1), axis=-1)
        print(f"\n{solver}: |FK(written) - solved points| / length = {err:.2e}")
        assert err <= 1e-9
        np.testing.assert_allclose(seg, np.broadcast_to(lengths, seg.shape), rtol=1e-12)


def test_chain_already_at_target_keeps_its_pose_bit_for_bit() -> None:
    for solver, joints in (("two_bone", 2), ("fabrik", 6), ("ccd", 6)):
        rng, sk, path, lengths, pose = posed_chain(32, joints, 50)
        kin = PathKinematics(sk, path, pose)
        end = kin.points()[:, -1]
        target = end + unit(rng.normal(size=(50, 3))) * 0.4e-3
        sol = solve_path_ik(kin, target, solver=solver, tolerance=1e-3)
        np.testing.assert_array_equal(sol.rotations, kin.rotations)
        assert sol.kept.all() and (sol.iterations == 0).all() and sol.converged.all()


def test_ccd_on_rotations_matches_ccd_on_points() -> None:
    rng, sk, path, lengths, pose = posed_chain(33, 8, 100)
    kin = PathKinematics(sk, path, pose)
    pts = kin.points()
    target = pts[:, 0] + reachable_targets(rng, np.broadcast_to(lengths, (100, 8))) * 0.8
    on_points = ccd(pts, target, tolerance=1e-4)
    on_rotations = solve_path_ik(kin, target, solver="ccd", tolerance=1e-4)
    assert np.abs(on_points.points - on_rotations.points).max() <= 1e-9
    np.testing.assert_array_equal(on_points.iterations, on_rotations.iterations)


@pytest.mark.slow
def test_no_twist_drift_when_only_the_target_moves() -> None:
    """A target loop solved frame after frame with FABRIK warm starts: the written rotations
    depend on the animated pose and the solved points only, every correction is a pure swing
    (no turn about the bone), so nothing can accumulate about the bone axes. Feeding the output
    back as the next input (what the stack never does) is measured for contrast."""
    rng, sk, path, lengths, pose = posed_chain(34, 10, 1, child_frames=True)
    kin = PathKinematics(sk, path, pose)
    start = kin.points()
    total = lengths.sum()
    centre = start[0, 0] + 0.5 * (start[0, -1] - start[0, 0])
    angles = np.linspace(0.0, 6 * np.pi, 600)
    loop = centre + 0.25 * total * np.stack([np.cos(angles), np.sin(angles), 0.3 * np.sin(2 * angles)], axis=1)
    warm = None
    feedback = pose.rotations[:, list(path.joints)].copy()
    max_twist = 0.0
    for t in loop:
        sol = solve_path_ik(kin, t[None], solver="fabrik", initial=warm, tolerance=1e-6 * total)
        warm = sol.points
        # Pure swing: the correction of each joint has no twist about the joint's bone axis.
        delta = quat_multiply(sol.rotations, quat_conjugate(kin.rotations))
        bone = np.einsum("tkij,tkj->tki", _rotation_matrices(kin.rotations), kin.reach)
        _, twist = swing_twist(delta, bone)
        max_twist = max(max_twist, float(np.max(2 * np.arccos(np.clip(np.abs(twist[..., 0]), 0.0, 1.0)))))
        # The naive alternative: the previous output is the next input.
        fed = PoseBuffers(sk, np.concatenate([feedback], axis=1))
        fed_sol = solve_path_ik(PathKinematics(sk, path, fed), t[None], solver="fabrik", initial=warm, tolerance=1e-6 * total)
        feedback = fed_sol.rotations
    # The same points written fresh from the animated pose give the same rotations: the
    # output carries no history. (``warm`` is the forward kinematics of what was written, so
    # it matches the solved points to rounding, hence the 1e-12.)
    fresh = kin.rotations_from_points(warm)[0]
    np.testing.assert_allclose(fresh, sol.rotations, rtol=0.0, atol=1e-12)
    # The fed-back chain reaches the same points but has rolled about its bones.
    fed_twist = []
    for k in range(10):
        rel = quat_multiply(feedback[0, k], quat_conjugate(sol.rotations[0, k]))
        axis = _rotation_matrices(sol.rotations[0, k]) @ kin.reach[0, k]
        _, tw = swing_twist(rel, axis)
        fed_twist.append(np.degrees(2 * np.arccos(min(1.0, abs(tw[0])))))
    print(f"\ntwist of corrections about bone axes: max {max_twist:.1e} rad; with output fed back: up to {max(fed_twist):.1f} deg after 3 loops")
    assert max_twist <= 1e-9


def _rotation_matrices(q: np.ndarray) -> np.ndarray:
    from marionette.core.rig.rotations import matrix_from_quat

    return matrix_from_quat(q)


def test_end_orientation_is_exact_in_skeleton_space() -> None:
    from marionette.core.controls.chains import end_rotations
    from marionette.core.rig.skeleton import Skeleton

    rng = np.random.default_rng(35)
    sk0, _, lengths = random_chain(rng, 3, child_frames=True)
    # Make joint 2 the end joint (the foot) of the path 0-1.
    sk = Skeleton(sk0.names, sk0.parents, sk0.parent_frames, sk0.child_frames)
    path = JointPath.between(sk, 0, 1, end=2)
    rot = small_quats(rng, (40, 3), 0.4)
    pose = PoseBuffers(sk, rot)
    kin = PathKinematics(sk, path, pose)
    target = kin.points()[:, 0] + unit(rng.normal(size=(40, 3))) * (0.8 * lengths[:2].sum())
    sol = solve_path_ik(kin, target, solver="two_bone", tolerance=0.0)
    wanted = random_quats(rng, (40,))
    foot = end_rotations(sk, [2], sol.tip, wanted)
    full = rot.copy()
    full[:, :2] = sol.rotations
    full[:, 2] = foot
    world = sk.forward_kinematics(full)
    from marionette.core.rig.rotations import quat_angle_between, quat_from_matrix

    err = quat_angle_between(quat_from_matrix(world[:, 2]), wanted)
    assert err.max() <= 1e-9
    # The foot turned about its own pivot, origin(P @ C0): the end point did not move.
    np.testing.assert_allclose((world[:, 1] @ sk.parent_frames[2])[:, :3, 3], sol.points[:, -1], atol=1e-12)


@pytest.mark.parametrize("solver", ["fabrik", "ccd", "two_bone"])
def test_nan_free_on_zero_length_segments(solver: str) -> None:
    rng = np.random.default_rng(36)
    joints = 2 if solver == "two_bone" else 5
    lengths = np.full(joints, 0.5)
    if solver != "two_bone":
        lengths[1] = 0.0  # a zero-length joint, like the CMU files' hip joints
    sk, path, _ = random_chain(rng, joints, lengths=lengths)
    pose = PoseBuffers(sk, random_quats(rng, (20, joints)))
    kin = PathKinematics(sk, path, pose)
    target = kin.points()[:, 0] + unit(rng.normal(size=(20, 3))) * 0.4
    sol = solve_path_ik(kin, target, solver=solver)
    assert np.isfinite(sol.rotations).all() and np.isfinite(sol.residual).all()


def test_fused_rotation_kernels_match_the_separate_ones() -> None:
    """The kernels that take a quaternion product and a rotation matrix (or a matrix and the
    quaternion's length) from one table product agree with the separate kernels to rounding,
    zero-length quaternions included."""
    from marionette.core.rig.rotation_kernels import (
        normalized_rotation_matrices,
        quat_mul,
        quat_mul_and_matrix,
        rotation_matrices,
    )

    rng = np.random.default_rng(3)
    q = rng.normal(size=(200, 4)) * rng.uniform(0.1, 3.0, size=(200, 1))
    q[:3] = 0.0
    np.testing.assert_allclose(normalized_rotation_matrices(q), rotation_matrices(q), rtol=0.0, atol=1e-15)
    a = unit(rng.normal(size=(200, 4)))
    b = rng.normal(size=(200, 4))
    product, matrix = quat_mul_and_matrix(a, b)
    np.testing.assert_allclose(product, quat_mul(a, b), rtol=0.0, atol=1e-15 * np.abs(b).max())
    np.testing.assert_allclose(matrix, rotation_matrices(a, unit=True), rtol=0.0, atol=1e-15)


@pytest.mark.parametrize("child_frames", [False, True])
@pytest.mark.parametrize("scaled", [False, True])
def test_a_few_rows_are_written_back_as_the_batched_arrays_do(monkeypatch, child_frames: bool, scaled: bool) -> None:
    """A live frame's paths (a few rows) are written back in plain floats: the same rotations,
    points and last placement as the batched arrays give, to 1e-12, over many poses, with and
    without C1 frames and scales."""
    from marionette.core.controls import chains

    plain = 0
    for seed in range(40):
        joints = 2 + seed % 3
        frames = 1 + seed % 4
        rng, sk, path, lengths, _ = posed_chain(200 + seed, joints, frames, child_frames=child_frames)
        rot = random_quats(rng, (frames, joints))
        tr = rng.normal(scale=0.1, size=(frames, joints, 3))
        sc = rng.uniform(0.7, 1.3, size=(frames, joints, 3)) if scaled else None
        pose = PoseBuffers(sk, rot, tr, sc)
        kin = PathKinematics(sk, [path], pose)
        pts = kin.points() + rng.normal(scale=0.2, size=(frames, joints + 1, 3))
        monkeypatch.setattr(chains, "FEW_ROWS", 100)
        few = kin.rotations_from_points(pts)
        plain += kin._rows_from_points(pts) is not None
        monkeypatch.setattr(chains, "FEW_ROWS", 0)
        batched = PathKinematics(sk, [path], pose).rotations_from_points(pts)
        for a, b in zip(few, batched, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    # The plain route ran (a non-affine C1 inverse would send a path the general way).
    assert plain >= 20
