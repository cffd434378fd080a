"""Diamond closure (docs/controls.md#closure): two branches leave a shared pivot and their end points must meet.

Conventions: skeleton-space points, frames first, float64, quaternions as in
:mod:`core.rig.rotations`; each branch is a :class:`core.controls.chains.JointPath` solved and written back
exactly like an IK chain (:func:`core.controls.ik.solve_path_ik`).

The skeleton stays a tree: the loop is two independent branches (say a left and a right pair of
segments from one pivot) whose end points stand for the same closing point. The solve:

1. The shared target is the midpoint of the two controller targets.
2. Each branch is solved toward it separately, from the animated pose.
3. While limits or reach leave the end points apart, the shared target becomes the midpoint of
   the two solved end points and both branches are solved again, at most ``max_iterations``
   times in all. A frame stops early when it is satisfied or when an iteration no longer shrinks
   the gap (a limit holds one branch where it is).

The residual is the end-point spacing plus the base spacing (the two first pivots, which should
coincide); ``satisfied`` is ``residual <= tolerance``. Stopping is not satisfying: a frame that
ran out of iterations or stalled reports ``satisfied`` False with its reason. The closure
constrains positions only (end orientations are left to the branches' own joints).

Branches that share a driver joint, or where one hangs below the other (one branch's writeback
would move or overwrite the other's), are refused when the closure is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton
from .chains import JointPath, PathKinematics, PoseBuffers
from .ik import solve_path_ik
from .ik_common import DEFAULT_MAX_PASSES, DEFAULT_TOLERANCE, SOLVERS
from .joint_limits import JointLimit

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]

#: How the iteration of a frame ended.
STOP_REASONS = ("satisfied", "stalled", "max_iterations")
# An iteration that shrinks the end-point gap by less than this fraction has stalled.
_PROGRESS = 1e-3


@dataclass(frozen=True)
class DiamondClosure:
    """Shared definition of a closure; build it with :meth:`build`."""

    left: JointPath
    right: JointPath
    solver: str
    limits_left: tuple[JointLimit | None, ...] | None
    limits_right: tuple[JointLimit | None, ...] | None

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        left: JointPath,
        right: JointPath,
        *,
        solver: str = "fabrik",
        limits_left: Sequence[JointLimit | None] | None = None,
        limits_right: Sequence[JointLimit | None] | None = None,
    ) -> DiamondClosure:
        names = skeleton.names
        if solver not in SOLVERS:
            raise RigError(f"closure solver must be one of {SOLVERS}, got {solver!r}")
        for path, side in ((left, "left"), (right, "right")):
            if solver == "two_bone" and len(path) != 2:
                raise RigError(f"the two_bone solver needs 2 joints; the {side} branch has {len(path)}")
        shared = sorted(set(left.joints) & set(right.joints))
        if shared:
            raise RigError(
                "the closure's branches share driver bones "
                + ", ".join(repr(names[j]) for j in shared)
                + "; one branch's writeback would overwrite the other's"
            )
        for upper, lower, up_side, low_side in ((left, right, "left", "right"), (right, left, "right", "left")):
            below = {j: u for u in upper.joints for j in [u, *skeleton.descendants(u)]}
            for j in lower.joints:
                if j in below:
                    raise RigError(
                        f"the {low_side} branch's bone {names[j]!r} hangs below the {up_side} branch's bone"
                        f" {names[below[j]]!r}: nested branches cannot close a loop"
                    )
        lim: list[tuple[JointLimit | None, ...] | None] = []
        for limits, path, side in ((limits_left, left, "left"), (limits_right, right, "right")):
            if limits is None:
                lim.append(None)
                continue
            t = tuple(limits)
            if len(t) != len(path):
                raise RigError(f"the {side} branch's limits need one entry per joint ({len(path)}), got {len(t)}")
            lim.append(t)
        return cls(left, right, solver, lim[0], lim[1])

    @property
    def written(self) -> tuple[int, ...]:
        return self.left.joints + self.right.joints


@dataclass(frozen=True)
class ClosureSolve:
    """Per frame ``(T,)`` unless stated: new rotations of the ``left`` ``(T, nL, 4)`` and
    ``right`` ``(T, nR, 4)`` branches, the last shared target ``meeting`` ``(T, 3)``, the end
    point and base spacings, ``residual`` (their sum), ``iterations`` (branch-pair solves),
    ``satisfied``, ``stop`` (an index into :data:`STOP_REASONS`) and ``limited`` (a joint limit
    held a branch short of the shared target)."""

    left: FloatArray
    right: FloatArray
    meeting: FloatArray
    endpoint_gap: FloatArray
    base_gap: FloatArray
    residual: FloatArray
    iterations: IntArray
    satisfied: BoolArray
    stop: IntArray
    limited: BoolArray


def solve_closure(
    skeleton: Skeleton,
    closure: DiamondClosure,
    pose: PoseBuffers,
    left_target: ArrayLike,
    right_target: ArrayLike,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = 16,
    max_passes: int = DEFAULT_MAX_PASSES,
) -> ClosureSolve:
    """Close the diamond for every frame of ``pose`` (read, not written); targets ``(T, 3)``."""
    frames = pose.frames
    tl = np.broadcast_to(np.asarray(left_target, dtype=np.float64), (frames, 3))
    tr = np.broadcast_to(np.asarray(right_target, dtype=np.float64), (frames, 3))
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    kin_l = PathKinematics(skeleton, closure.left, pose)
    kin_r = PathKinematics(skeleton, closure.right, pose)
    base_gap = np.linalg.norm(kin_l.points()[:, 0] - kin_r.points()[:, 0], axis=1)
    # Each branch must land well inside the closure tolerance for the pair to meet within it.
    branch_tol = 0.25 * tolerance
    meeting = 0.5 * (tl + tr)
    left = kin_l.rotations.copy()
    right = kin_r.rotations.copy()
    gap = np.full(frames, np.inf)
    iterations = np.zeros(frames, dtype=np.int64)
    stop = np.full(frames, STOP_REASONS.index("max_iterations"), dtype=np.int64)
    limited = np.zeros(frames, dtype=bool)
    active = np.ones(frames, dtype=bool)
    last_meeting = meeting.copy()
    for _ in range(max_iterations):
        sl = solve_path_ik(
            kin_l, meeting, solver=closure.solver, limits=closure.limits_left, tolerance=branch_tol, max_passes=max_passes
        )
        sr = solve_path_ik(
            kin_r, meeting, solver=closure.solver, limits=closure.limits_right, tolerance=branch_tol, max_passes=max_passes
        )
        new_gap = np.linalg.norm(sl.points[:, -1] - sr.points[:, -1], axis=1)
        a = active
        # Keep the best pair seen: a stalled iteration may land a little worse than the last.
        better = a & (new_gap < gap)
        left[better] = sl.rotations[better]
        right[better] = sr.rotations[better]
        last_meeting[better] = meeting[better]
        limited[better] = sl.limited[better] | sr.limited[better]
        previous = gap
        gap = np.where(better, new_gap, gap)
        iterations[a] += 1
        satisfied_now = a & (gap + base_gap <= tolerance)
        # Once the ends meet, iterating cannot reduce the base spacing: that is a stall too.
        stalled_now = a & ~satisfied_now & ((new_gap > previous * (1.0 - _PROGRESS)) | (gap <= 1e-3 * tolerance))
        stop[satisfied_now] = STOP_REASONS.index("satisfied")
        stop[stalled_now] = STOP_REASONS.index("stalled")
        active = a & ~satisfied_now & ~stalled_now
        if not active.any():
            break
        meeting = np.where(active[:, None], 0.5 * (sl.points[:, -1] + sr.points[:, -1]), meeting)
    residual = gap + base_gap
    return ClosureSolve(
        left=left,
        right=right,
        meeting=last_meeting,
        endpoint_gap=gap,
        base_gap=base_gap,
        residual=residual,
        iterations=iterations,
        satisfied=residual <= tolerance,
        stop=stop,
        limited=limited,
    )
