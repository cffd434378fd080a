"""Speed of the secondary controls (springs, ground adaptation, inheritance and fixed axes,
diamond closure) and of a full stack using them, each against a baseline timed in the same run.

For every case it prints microseconds per frame, live (one frame per call, as the viewport
evaluates) and baked (a batch of frames per call), and the ratio to its baseline:

* springs: the stepping alone of the plain scheme the spec rules out (``ceil(dt * 240)`` steps
  capped at 8, no carry, same forces and constraints; its frame windows built beforehand), so
  the baked ratio is what fixed 1/240 s steps with a carried remainder cost, plus the stack's
  per-frame work; and a forward kinematics of the rig, for scale;
* ground, inheritance, the full stack: one forward kinematics of the same rig (65 bones);
* closure: one FABRIK solve of one of its branches (what a closure iterates on).

Run on demand: ``python -m bench.bench_secondary [--repeat R]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from marionette.core.controls import springs
from marionette.core.controls.chains import JointPath, PathKinematics, PoseBuffers
from marionette.core.controls.closure import DiamondClosure
from marionette.core.controls.ground import GroundRig
from marionette.core.controls.ik import solve_path_ik
from marionette.core.controls.inheritance import FixedAxes, Grant, Inheritance
from marionette.core.controls.springs import SpringChain
from marionette.core.controls.stack import (
    ClosureControl,
    ControlStack,
    FixedAxisControl,
    GroundControl,
    InheritControl,
    SpringControl,
)
from marionette.core.rig.skeleton import Skeleton

# The synthetic rigs of the control tests.
from tests.helpers.control_rigs import _bone_matrix, hanging_chain, humanoid_65, humanoid_stack, walk_cycle


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


def row(name: str, live: float, baked: float, base_name: str, base_live: float, base_baked: float) -> None:
    us = 1e6
    print(
        f"{name:<34} {live * us:>9.1f} {baked * us:>9.1f}   {base_name:<22} {base_live * us:>8.1f} {base_baked * us:>8.1f}"
        f" {live / base_live:>7.1f}x {baked / base_baked:>7.1f}x"
    )


def live_and_baked(stack: ControlStack, setup: Callable[[object], None], rot, tr, fps: float, repeat: int, **kw):
    frames = len(rot)
    times = np.arange(frames) / fps

    def live() -> None:
        inst = stack.instance()
        setup(inst)
        for f in range(frames):
            inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f], **kw)

    def baked() -> None:
        inst = stack.instance()
        setup(inst)
        inst.evaluate(rot, tr, time=times, **kw)

    return best_of(live, repeat, 1) / frames, best_of(baked, repeat, 1) / frames


def fk_baseline(sk: Skeleton, rot, tr, repeat: int) -> tuple[float, float]:
    frames = len(rot)
    single = best_of(lambda: sk.forward_kinematics(rot[:1], tr[:1]), repeat, 200)
    batched = best_of(lambda: sk.forward_kinematics(rot, tr), repeat, 5) / frames
    return single, batched


def bench_springs(repeat: int) -> None:
    for segments in (4, 16):
        sk, path = hanging_chain(segments, 1.0)
        chain = SpringChain.build(path, stiffness=60.0, damping=3.0)
        stack = ControlStack(sk, [SpringControl("tail", chain)])
        for fps in (24, 60):
            frames = 2 * fps
            t = np.arange(frames) / fps
            rot = np.zeros((frames, len(sk), 4))
            rot[..., 0] = 1.0
            tr = np.zeros((frames, len(sk), 3))
            tr[:, 0, 0] = 0.05 * np.sin(2 * np.pi * t)
            tr[:, 0, 1] = -1.4 * t
            live, baked = live_and_baked(stack, lambda inst: None, rot, tr, fps, repeat)
            world = PathKinematics(sk, path, PoseBuffers(sk, rot, tr)).points()
            # The plain scheme's frame windows are built before timing: only its stepping counts.
            windows = [
                springs._Frame(
                    tuple(world[f - 1, 0]), [tuple(a) for a in np.diff(world[f - 1], axis=0)],
                    tuple(world[f, 0]), [tuple(a) for a in np.diff(world[f], axis=0)],
                )
                for f in range(1, frames)
            ]
            start = [tuple(p) for p in world[0, 1:]]

            def plain(windows: list = windows, start: list = start, fps: int = fps, chain: SpringChain = chain) -> None:
                dt = 1.0 / fps
                n = min(math.ceil(dt * 240 - 1e-9), 8)
                x = list(start)
                v = [(0.0, 0.0, 0.0)] * len(x)
                for frame in windows:
                    before = frame.ends(0.0)
                    for i in range(1, n + 1):
                        before = springs._step(chain, frame, i / n, dt / n, x, v, before, True)[1]

            plain_cost = best_of(plain, repeat, 1) / frames
            row(f"spring {segments} segments @ {fps} fps", live, baked, "plain steps (stepping)", plain_cost, plain_cost)
            fk_live, fk_baked = fk_baseline(sk, rot, tr, repeat)
            row("", live, baked, f"FK {len(sk)} bones", fk_live, fk_baked)


def bench_ground(repeat: int, sk: Skeleton) -> None:
    fps = 30
    times = np.arange(120) / fps
    rot, tr = walk_cycle(sk, times)
    t = math.tan(math.radians(15.0))
    n = np.array([0.0, t, 1.0]) / math.hypot(t, 1.0)

    def cast(origins: np.ndarray, directions: np.ndarray, distances: np.ndarray):
        h = -t * origins[:, 1]
        hit = (h <= origins[:, 2]) & (h >= origins[:, 2] - distances)
        return hit, np.stack([origins[:, 0], origins[:, 1], h], axis=1), np.broadcast_to(n, (len(h), 3))

    rig = GroundRig.build(sk, [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"], pelvis="hips")
    stack = ControlStack(sk, [GroundControl("ground", rig)])
    live, baked = live_and_baked(stack, lambda inst: inst.set_ground("ground", cast), rot, tr, fps, repeat)
    fk_live, fk_baked = fk_baseline(sk, rot, tr, repeat)
    row("ground, 2 legs + pelvis (65 bones)", live, baked, "FK 65 bones", fk_live, fk_baked)


def bench_inheritance(repeat: int, sk: Skeleton) -> None:
    rng = np.random.default_rng(3)
    frames = 120
    from tests.helpers.control_rigs import small_quats

    rot = small_quats(rng, (frames, len(sk)), 0.1)
    tr = np.zeros((frames, len(sk), 3))
    grants = Inheritance(
        tuple(
            Grant.build(sk, f"{part}_twist.{side}", f"{src}.{side}", rotation=0.5)
            for side in "LR"
            for part, src in (("upper_arm", "forearm"), ("forearm", "hand"), ("thigh", "shin"))
        )
    )
    axes = FixedAxes.build(sk, [f"forearm_twist.{s}" for s in "LR"], [0.0, 1.0, 0.0])
    stack = ControlStack(sk, [InheritControl("grants", grants), FixedAxisControl("axes", axes, priority=1)])
    live, baked = live_and_baked(stack, lambda inst: None, rot, tr, 30, repeat)
    fk_live, fk_baked = fk_baseline(sk, rot, tr, repeat)
    row("6 grants + 2 fixed axes (65 bones)", live, baked, "FK 65 bones", fk_live, fk_baked)


def bench_closure(repeat: int) -> None:
    hint = np.array([0.0, -1.0, 0.0])
    pts = {"pivot": (None, (0, 0, 0), (0, 0, -0.2)), "l0": ("pivot", (0, 0, 0), (-0.5, 0, 0.5)),
           "l1": ("l0", (-0.5, 0, 0.5), (0, 0, 1)), "r0": ("pivot", (0, 0, 0), (0.4, 0, 0.4)),
           "r1": ("r0", (0.4, 0, 0.4), (0, 0, 0.8))}
    names = list(pts)
    rest = np.array([_bone_matrix(np.array(h, float), np.array(t, float), hint) for _, h, t in pts.values()])
    sk = Skeleton.from_rest_matrices(names, [pts[n][0] for n in names], rest)
    lp = JointPath.between(sk, "l0", "l1", end_offset=[0.0, math.sqrt(0.5), 0.0])
    rp = JointPath.between(sk, "r0", "r1", end_offset=[0.0, math.sqrt(0.32), 0.0])
    stack = ControlStack(sk, [ClosureControl("loop", DiamondClosure.build(sk, lp, rp))])
    frames = 120
    rot = np.zeros((frames, len(sk), 4))
    rot[..., 0] = 1.0
    tr = np.zeros((frames, len(sk), 3))
    angle = np.linspace(0, 2 * np.pi, frames)
    # Within reach of both branches: one branch-pair solve closes it (out of reach of one, the
    # midpoint iteration halves the gap per pass and takes about 10).
    target = np.stack([0.15 * np.cos(angle), np.zeros(frames), 0.8 + 0.15 * np.sin(angle)], axis=1)

    def setup(inst) -> None:
        inst.set_closure_targets("loop", target, target + [0.05, 0.0, 0.0])

    def live() -> None:
        inst = stack.instance()
        for f in range(frames):
            inst.set_closure_targets("loop", target[f], target[f] + [0.05, 0.0, 0.0])
            inst.evaluate(rot[f : f + 1], tr[f : f + 1])

    def baked() -> None:
        inst = stack.instance()
        setup(inst)
        inst.evaluate(rot, tr)

    live_cost = best_of(live, repeat, 1) / frames
    baked_cost = best_of(baked, repeat, 1) / frames
    pose1 = PoseBuffers(sk, rot[:1], tr[:1])
    pose = PoseBuffers(sk, rot, tr)
    one = best_of(lambda: solve_path_ik(PathKinematics(sk, lp, pose1), target[:1], solver="fabrik"), repeat, 200)
    many = best_of(lambda: solve_path_ik(PathKinematics(sk, lp, pose), target, solver="fabrik"), repeat, 5) / frames
    inst = stack.instance()
    setup(inst)
    iterations = inst.evaluate(rot, tr).reports["loop"].iterations.mean()
    row(f"closure, 2x2 bones, {iterations:.1f} passes", live_cost, baked_cost, "one branch FABRIK", one, many)


def bench_full_stack(repeat: int, sk: Skeleton) -> None:
    fps = 30
    times = np.arange(120) / fps
    rot, tr = walk_cycle(sk, times)
    base = humanoid_stack(sk)
    # The walk drives the legs already; keep the arms' IK and the look-at, add the rest.
    controls = [c for c in base.controls if not c.name.startswith("leg")]
    rig = GroundRig.build(sk, [(f"thigh.{s}", f"shin.{s}", f"foot.{s}") for s in "LR"], pelvis="hips")
    controls.append(GroundControl("ground", rig, priority=-1))
    for side in "LR":
        path = JointPath.between(sk, f"finger1_0.{side}", f"finger1_2.{side}", end_offset=[0.0, 0.03, 0.0])
        controls.append(SpringControl(f"finger.{side}", SpringChain.build(path, stiffness=200.0, damping=8.0), priority=5))
    controls.append(
        InheritControl("twist", Inheritance(tuple(Grant.build(sk, f"forearm_twist.{s}", f"hand.{s}", rotation=0.5) for s in "LR")), priority=6)
    )
    stack = ControlStack(sk, controls)
    world = sk.forward_kinematics(rot[:1], tr[:1])[0]

    def flat(origins: np.ndarray, directions: np.ndarray, distances: np.ndarray):
        n = len(origins)
        return np.ones(n, dtype=bool), np.concatenate([origins[:, :2], np.zeros((n, 1))], axis=1), np.tile([0.0, 0.0, 1.0], (n, 1))

    def setup(inst) -> None:
        inst.set_ground("ground", flat)
        for side in "LR":
            hand = world[sk.index(f"hand.{side}"), :3, 3]
            inst.set_target(f"arm.{side}", hand + [0.0, -0.15, -0.1], pole=hand + [0.0, 1.0, 0.0])
        inst.set_target("look", [0.4, -2.0, 1.8])

    live, baked = live_and_baked(stack, setup, rot, tr, fps, repeat)
    fk_live, fk_baked = fk_baseline(sk, rot, tr, repeat)
    row(f"stack: {len(stack)} controls (65 bones)", live, baked, "FK 65 bones", fk_live, fk_baked)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many timing runs")
    args = parser.parse_args()
    sk, _ = humanoid_65()
    print(f"numpy {np.__version__}; best of {args.repeat} runs; microseconds per frame")
    print(f"{'case':<34} {'live':>9} {'baked':>9}   {'baseline':<22} {'live':>8} {'baked':>8} {'ratio':>8} {'(baked)':>8}")
    bench_springs(args.repeat)
    bench_ground(args.repeat, sk)
    bench_inheritance(args.repeat, sk)
    bench_closure(args.repeat)
    bench_full_stack(args.repeat, sk)


if __name__ == "__main__":
    main()
