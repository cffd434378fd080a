"""What spring colliders add to a live frame: two 8-bone spring chains (two ponytails) on a
walking carrier, with six colliders (a head sphere, two shoulder capsules, a back capsule, a chest
sphere and a floor plane; the chains rest against some of them as they swing) against the very
same chains without colliders, timed in the same run.

It prints milliseconds per live frame (one frame per call, as the viewport evaluates) at 24 and
60 fps (10 and 4 fixed 1/240 s steps per frame), for the stack's frame (its path kinematics, the
colliders' placement, the steps, the writeback), the baked cost per frame for scale, and the
added milliseconds per frame (the goal: at most 0.6 ms).

Run on demand: ``python -m bench.bench_springs_colliders [--repeat R]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from marionette.core.controls.chains import JointPath
from marionette.core.controls.colliders import Collider
from marionette.core.controls.springs import SpringChain
from marionette.core.controls.stack import ControlStack, SpringControl
from marionette.core.rig.rotations import quat_from_axis_angle
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.control_rigs import _bone_matrix

SEGMENTS = 8


def best_of_each(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """CPU seconds of the best of ``repeat`` runs of each function, the runs interleaved (the
    machine is shared: a busy spell then slows every case alike, not one of them, and the
    process's own CPU time leaves out the time other processes took the core)."""
    best = dict.fromkeys(fns, math.inf)
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t0)
    return best


def rig() -> tuple[Skeleton, list[JointPath]]:
    """A carrier ``head`` at (0, 0, 1.6) and two chains of 8 bones (0.6 units each) hanging
    from either side of the back of its head."""
    names = ["head"]
    parents: list[str | None] = [None]
    rest = [_bone_matrix(np.array([0.0, 0.0, 1.6]), np.array([0.0, 0.0, 1.8]), np.array([0.0, -1.0, 0.0]))]
    seg = 0.6 / SEGMENTS
    for side, x in (("L", 0.06), ("R", -0.06)):
        for k in range(SEGMENTS):
            head = np.array([x, 0.1, 1.7 - seg * k])
            names.append(f"hair.{side}.{k}")
            parents.append("head" if k == 0 else f"hair.{side}.{k - 1}")
            rest.append(_bone_matrix(head, head - [0.0, 0.0, seg], np.array([0.0, -1.0, 0.0])))
    sk = Skeleton.from_rest_matrices(names, parents, np.array(rest))
    paths = [
        JointPath.between(sk, f"hair.{s}.0", f"hair.{s}.{SEGMENTS - 1}", end_offset=[0.0, seg, 0.0]) for s in "LR"
    ]
    return sk, paths


def colliders(sk: Skeleton) -> list[Collider]:
    """Six colliders on the carrier (its frame: Y up the head, Z toward +Y, X the same)."""
    return [
        Collider.build(sk, "sphere", "head", offset=(0.0, 0.1, 0.0), radius=0.11, name="head"),
        Collider.build(sk, "capsule", "head", offset=(0.08, -0.25, 0.0), tail=(0.25, -0.28, 0.0), radius=0.07, name="shoulder.L"),
        Collider.build(sk, "capsule", "head", offset=(-0.08, -0.25, 0.0), tail=(-0.25, -0.28, 0.0), radius=0.07, name="shoulder.R"),
        Collider.build(sk, "capsule", "head", offset=(0.0, -0.25, -0.02), tail=(0.0, -0.75, 0.0), radius=0.14, name="back"),
        Collider.build(sk, "sphere", "head", offset=(0.0, -0.45, 0.1), radius=0.15, name="chest"),
        Collider.build(sk, "plane", "head", offset=(0.0, -1.6, 0.0), normal=(0.0, 1.0, 0.0), name="floor"),
    ]


def walk(sk: Skeleton, fps: int, seconds: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(int(seconds * fps)) / fps
    rot = np.zeros((len(t), len(sk), 4))
    rot[..., 0] = 1.0
    rot[:, 0] = quat_from_axis_angle([0.0, 0.0, 1.0], math.radians(15.0) * np.sin(2 * np.pi * 0.9 * t))
    tr = np.zeros((len(t), len(sk), 3))
    tr[:, 0, 0] = 0.08 * np.sin(2 * np.pi * 0.9 * t)
    tr[:, 0, 1] = -1.4 * t
    tr[:, 0, 2] = 0.03 * np.sin(2 * np.pi * 1.8 * t)
    return t, rot, tr


def live_per_frame(
    stacks: dict[str, ControlStack], times: np.ndarray, rot: np.ndarray, tr: np.ndarray, repeat: int
) -> dict[str, tuple[float, float]]:
    """CPU seconds per live frame (one frame per call, as the viewport evaluates) of each stack:
    the clip played ``repeat`` times, the stacks taking turns frame by frame; per stack the mean
    over the frames of each frame's best and of its median time. Every play computes the very
    same frames, so a frame's best is its cost; a busy spell on the shared machine slows a few
    frames of one play, not the same frame in every play. The median keeps what a frame often
    pays besides (the garbage collector, the machine's other work)."""
    spent = {name: np.empty((repeat, len(times))) for name in stacks}
    for r in range(-1, repeat):  # the first play warms up
        insts = {name: stack.instance() for name, stack in stacks.items()}
        for f in range(len(times)):
            for name, inst in insts.items():
                t0 = time.process_time()
                inst.evaluate(rot[f : f + 1], tr[f : f + 1], time=times[f])
                if r >= 0:
                    spent[name][r, f] = time.process_time() - t0
    return {name: (float(s.min(axis=0).mean()), float(np.median(s, axis=0).mean())) for name, s in spent.items()}


def baked_runner(stack: ControlStack, times: np.ndarray, rot: np.ndarray, tr: np.ndarray) -> Callable[[], None]:
    """A clip baked (one call)."""

    def baked() -> None:
        stack.instance().evaluate(rot, tr, time=times)

    return baked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sk, paths = rig()
    cols = colliders(sk)
    stacks = {
        name: ControlStack(
            sk,
            [SpringControl(f"hair.{s}", SpringChain.build(p, stiffness=12.0, damping=2.0, radius=0.015, colliders=c)) for s, p in zip("LR", paths, strict=True)],
        )
        for name, c in (("without", []), ("with", cols))
    }
    print(f"two {SEGMENTS}-bone spring chains, six colliders; ms per frame (live: each frame's best and median of {args.repeat} plays; baked: best of {args.repeat})")
    print(
        f"{'':<7} {'live, no colliders':>19} {'live, colliders':>16} {'added':>6} {'added (median)':>15}"
        f" {'baked, no':>10} {'baked, with':>12}  deepest"
    )
    for fps in (24, 60):
        times, rot, tr = walk(sk, fps, 4.0)
        frames = len(times)
        live = live_per_frame(stacks, times, rot, tr, args.repeat)
        best = best_of_each({name: baked_runner(stack, times, rot, tr) for name, stack in stacks.items()}, args.repeat)
        out = stacks["with"].instance().evaluate(rot, tr, time=times)
        deepest = max(float(r.details["step_penetration"].max()) for r in out.reports.values())

        ms = 1e3
        (no, no_median), (yes, yes_median) = live["without"], live["with"]
        print(
            f"{fps} fps  {no * ms:>19.3f} {yes * ms:>16.3f} {(yes - no) * ms:>6.3f} {(yes_median - no_median) * ms:>15.3f}"
            f" {best['without'] / frames * ms:>10.3f} {best['with'] / frames * ms:>12.3f}  {deepest * 1e3:.1e} mm"
        )

if __name__ == "__main__":
    main()
