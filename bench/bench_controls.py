"""Speed of the controls (IK, look-at, the whole stack), each against a baseline timed in the
same run.

For every case it prints microseconds per solve for a single solve and per solve in a batch,
and two ratios:

* ``batch/loop``: the batched cost per solve against a plain Python loop of single solves
  (the same function called once per chain or frame): what batching buys;
* ``vs plain``: against a bare numpy reference written here (the textbook formula without
  fallbacks, checks or reports), single and batched: what the robustness costs.

Cases: two-bone IK, FABRIK on 10-joint chains, look-at on 3 joints, and the whole control stack
of a 65-bone humanoid (4 two-bone limbs, feet oriented, plus a 3-joint look-at) per frame, live
(one frame per call) and baked (240 frames per call); its baseline is one forward kinematics of
the same rig, timed here.

Run on demand: ``python bench/bench_controls.py [--batch N] [--repeat R]``. Goals (issue 7):
batched two-bone <= 0.2 us per solve, the whole stack <= 1 ms per frame.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Dev-only: the synthetic rigs live with the tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

from control_rigs import humanoid_65, humanoid_stack, small_quats  # noqa: E402

from marionette.core.controls.chains import PoseBuffers  # noqa: E402
from marionette.core.controls.ik_fabrik import fabrik  # noqa: E402
from marionette.core.controls.ik_two_bone import two_bone_ik  # noqa: E402
from marionette.core.controls.look_at import look_at  # noqa: E402


def best_of(fn: Callable[[], object], repeat: int, number: int) -> float:
    """Seconds per call: the best of ``repeat`` runs of ``number`` calls (the machine is shared)."""
    fn()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


# --- bare references -------------------------------------------------------------------------


def plain_two_bone(points: np.ndarray, target: np.ndarray, pole: np.ndarray) -> np.ndarray:
    root, mid, end = points[..., 0, :], points[..., 1, :], points[..., 2, :]
    a = np.linalg.norm(mid - root, axis=-1)
    b = np.linalg.norm(end - mid, axis=-1)
    to_t = target - root
    d = np.clip(np.linalg.norm(to_t, axis=-1), np.abs(a - b) + 1e-9, a + b - 1e-9)
    axis = to_t / np.linalg.norm(to_t, axis=-1, keepdims=True)
    x = (d * d + a * a - b * b) / (2 * d)
    h = np.sqrt(np.maximum(a * a - x * x, 0.0))
    bend = pole - root
    bend = bend - np.sum(bend * axis, axis=-1, keepdims=True) * axis
    bend = bend / np.linalg.norm(bend, axis=-1, keepdims=True)
    out = np.empty_like(points)
    out[..., 0, :] = root
    out[..., 1, :] = root + x[..., None] * axis + h[..., None] * bend
    out[..., 2, :] = root + d[..., None] * axis
    return out


def plain_fabrik(points: np.ndarray, target: np.ndarray, tolerance: float, passes: int = 16) -> np.ndarray:
    p = points.copy()
    lengths = np.linalg.norm(np.diff(p, axis=-2), axis=-1)
    root = p[..., 0, :].copy()
    n = p.shape[-2]
    for _ in range(passes):
        if np.all(np.linalg.norm(p[..., -1, :] - target, axis=-1) <= tolerance):
            break
        p[..., -1, :] = target
        for k in range(n - 2, -1, -1):
            d = p[..., k, :] - p[..., k + 1, :]
            p[..., k, :] = p[..., k + 1, :] + lengths[..., k, None] * d / np.linalg.norm(d, axis=-1, keepdims=True)
        p[..., 0, :] = root
        for k in range(1, n):
            d = p[..., k, :] - p[..., k - 1, :]
            p[..., k, :] = p[..., k - 1, :] + lengths[..., k - 1, None] * d / np.linalg.norm(d, axis=-1, keepdims=True)
    return p


# --- cases -----------------------------------------------------------------------------------


def row(name: str, single: float, batched: float, loop: float, plain_single: float, plain_batched: float) -> None:
    us = 1e6
    print(
        f"{name:<28} {single * us:>10.1f} {batched * us:>12.3f} {loop * us:>11.1f} {loop / batched:>10.0f}x"
        f" {single / plain_single:>9.1f}x {batched / plain_batched:>9.1f}x"
    )


def bench_two_bone(batch: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0.3, 0.6, batch)
    root = rng.normal(size=(batch, 3))
    mid = root + a[:, None] * np.array([0.0, 0.1, -1.0]) / np.linalg.norm([0.0, 0.1, -1.0])
    end = mid + a[:, None] * np.array([0.0, -0.3, -1.0]) / np.linalg.norm([0.0, -0.3, -1.0])
    pts = np.stack([root, mid, end], axis=1)
    target = root + (end - root) * 0.8 + rng.normal(scale=0.05, size=(batch, 3))
    pole = mid + [0.0, -1.0, 0.0]
    one = (pts[:1], target[:1], pole[:1])
    single = best_of(lambda: two_bone_ik(*one), repeat, 2000)
    batched = best_of(lambda: two_bone_ik(pts, target, pole), repeat, 20) / batch
    loop_n = min(batch, 2000)
    loop = best_of(lambda: [two_bone_ik(pts[i : i + 1], target[i : i + 1], pole[i : i + 1]) for i in range(loop_n)], 1, 1) / loop_n
    plain_single = best_of(lambda: plain_two_bone(*one), repeat, 2000)
    plain_batched = best_of(lambda: plain_two_bone(pts, target, pole), repeat, 20) / batch
    row("two-bone", single, batched, loop, plain_single, plain_batched)


def bench_fabrik(batch: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    joints = 10
    lengths = rng.uniform(0.5, 1.5, (batch, joints))
    direction = rng.normal(size=(batch, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # A gently curled start (a straight one is the solver's worst case, measured in the tests).
    seg = direction[:, None, :] + 0.3 * rng.normal(size=(batch, joints, 3))
    seg /= np.linalg.norm(seg, axis=-1, keepdims=True)
    pts = np.concatenate([np.zeros((batch, 1, 3)), np.cumsum(lengths[..., None] * seg, axis=1)], axis=1)
    total = lengths.sum(axis=1)
    target = pts[:, -1] * 0.7 + rng.normal(scale=0.5, size=(batch, 3))
    tol = 1e-3 * total
    n = min(batch, 200)
    single = best_of(lambda: fabrik(pts[:1], target[:1], tolerance=tol[:1]), repeat, 50)
    batched = best_of(lambda: fabrik(pts[:n], target[:n], tolerance=tol[:n]), repeat, 3) / n
    loop = best_of(lambda: [fabrik(pts[i : i + 1], target[i : i + 1], tolerance=tol[i : i + 1]) for i in range(n)], 1, 1) / n
    plain_single = best_of(lambda: plain_fabrik(pts[:1], target[:1], float(tol[0])), repeat, 50)
    plain_batched = best_of(lambda: plain_fabrik(pts[:n], target[:n], float(tol[:n].min())), repeat, 3) / n
    row("FABRIK 10 joints", single, batched, loop, plain_single, plain_batched)


def bench_look_at(batch: int, repeat: int, skeleton, stack) -> None:
    chain = stack.control("look").chain
    rng = np.random.default_rng(3)
    frames = min(batch, 2000)
    rot = small_quats(rng, (frames, len(skeleton)), 0.06)
    pose = PoseBuffers(skeleton, rot)
    target = np.array([0.3, -2.0, 1.7]) + rng.normal(scale=0.3, size=(frames, 3))
    one = PoseBuffers(skeleton, rot[:1])
    single = best_of(lambda: look_at(skeleton, chain, one, target[:1]), repeat, 300)
    batched = best_of(lambda: look_at(skeleton, chain, pose, target), repeat, 5) / frames
    poses = [PoseBuffers(skeleton, rot[i : i + 1]) for i in range(min(frames, 300))]
    loop = best_of(lambda: [look_at(skeleton, chain, p, target[i : i + 1]) for i, p in enumerate(poses)], 1, 1) / len(poses)
    # No bare reference for look-at: one forward kinematics of the 3-joint path stands in.
    from marionette.core.controls.chains import PathKinematics

    plain_single = best_of(lambda: PathKinematics(skeleton, chain.path, one).points(), repeat, 300)
    plain_batched = best_of(lambda: PathKinematics(skeleton, chain.path, pose).points(), repeat, 5) / frames
    row("look-at 3 joints (vs path FK)", single, batched, loop, plain_single, plain_batched)


def bench_stack(repeat: int, skeleton, stack) -> tuple[float, float]:
    rng = np.random.default_rng(4)
    frames = 240
    rot = small_quats(rng, (frames, len(skeleton)), 0.06)
    tr = np.zeros((frames, len(skeleton), 3))
    world = skeleton.forward_kinematics(rot[:1], tr[:1])[0]
    inst = stack.instance()
    for side in ("L", "R"):
        foot = world[skeleton.index(f"foot.{side}"), :3, 3]
        inst.set_target(f"leg.{side}", foot + [0.02, -0.08, 0.12], pole=foot + [0.0, -1.0, 0.6], orientation=[1.0, 0.0, 0.0, 0.0])
        hand = world[skeleton.index(f"hand.{side}"), :3, 3]
        inst.set_target(f"arm.{side}", hand + [0.0, -0.15, -0.1], pole=hand + [0.0, 1.0, 0.0])
    inst.set_target("look", [0.4, -2.0, 1.8])
    single = best_of(lambda: inst.evaluate(rot[:1], tr[:1], dt=1 / 30), repeat, 200)
    batched = best_of(lambda: inst.evaluate(rot, tr, dt=1 / 30), repeat, 5) / frames
    loop = best_of(lambda: [inst.evaluate(rot[i : i + 1], tr[i : i + 1], dt=1 / 30) for i in range(frames)], 1, 1) / frames
    fk_single = best_of(lambda: skeleton.forward_kinematics(rot[:1], tr[:1]), repeat, 200)
    fk_batched = best_of(lambda: skeleton.forward_kinematics(rot, tr), repeat, 5) / frames
    row("stack 65 bones, 4 IK + look", single, batched, loop, fk_single, fk_batched)
    return single, batched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=10000, help="chains or frames per batched call")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many timing runs")
    args = parser.parse_args()
    skeleton, _ = humanoid_65()
    stack = humanoid_stack(skeleton)
    print(f"numpy {np.__version__}; best of {args.repeat} runs; times in microseconds")
    print(f"{'case':<28} {'single':>10} {'batched/solve':>12} {'loop/solve':>11} {'batch/loop':>11} {'vs plain':>10} {'(batched)':>10}")
    bench_two_bone(args.batch, args.repeat)
    bench_fabrik(args.batch, args.repeat)
    bench_look_at(args.batch, args.repeat, skeleton, stack)
    single, batched = bench_stack(args.repeat, skeleton, stack)
    print(
        f"goals: whole stack {single * 1e6:.0f} us per live frame, {batched * 1e6:.0f} us per baked frame (goal <= 1000);"
        " batched two-bone goal <= 0.2 us per solve"
    )


if __name__ == "__main__":
    main()
