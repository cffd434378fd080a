"""IK chains and look-at chains as the control stack runs them (docs/controls.md#ik-chains, docs/controls.md#look-at): their definitions,
what feeds them (a target, optionally a pole and an end orientation) and their batched runs over a
pose. The solvers are in :mod:`core.controls.ik` and :mod:`core.controls.look_at`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...errors import RigError
from ...rig.rotations import FloatArray
from ..chains import JointPath, PathKinematics, end_rotations
from ..ik import solve_path_ik
from ..ik_common import DEFAULT_MAX_PASSES, DEFAULT_TOLERANCE, SOLVERS
from ..joint_limits import JointLimit
from ..look_at import LookAtChain, look_at
from .base import (
    Candidate,
    ControlKind,
    ControlReport,
    ControlState,
    Evaluation,
    check_common,
    independent,
    member_input,
)

#: Aim error (radians) below which a look-at counts as converged.
LOOK_AT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class IKControl(ControlKind):
    """An IK chain (docs/controls.md#ik-chains). ``solver`` is ``two_bone`` (a 2-joint path), ``fabrik`` or
    ``ccd``; ``limits`` one entry per path joint (``None`` = free); ``orient_end`` lets the
    instance give the path's ``end_joint`` an orientation after the positional solve."""

    feed: ClassVar[str] = "target"

    name: str
    path: JointPath
    solver: str = "two_bone"
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.0
    tolerance: float = DEFAULT_TOLERANCE
    max_passes: int = DEFAULT_MAX_PASSES
    softness: float = 0.0
    limits: tuple[JointLimit | None, ...] | None = None
    orient_end: bool = False
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, self.smooth_time)
        if self.solver not in SOLVERS:
            raise RigError(f"control {self.name!r}: solver must be one of {SOLVERS}, got {self.solver!r}")
        if self.solver == "two_bone" and len(self.path) != 2:
            raise RigError(f"control {self.name!r}: the two_bone solver needs 2 joints, the path has {len(self.path)}")
        if self.limits is not None:
            object.__setattr__(self, "limits", tuple(self.limits))
            if len(self.limits) != len(self.path):
                raise RigError(
                    f"control {self.name!r}: limits need one entry per path joint ({len(self.path)}), got {len(self.limits)}"
                )
        if self.orient_end and self.path.end_joint < 0:
            raise RigError(f"control {self.name!r}: orient_end needs a path with an end joint")
        if not (math.isfinite(self.tolerance) and self.tolerance >= 0.0) or self.max_passes < 1:
            raise RigError(f"control {self.name!r}: tolerance must be >= 0 and max_passes >= 1")

    @property
    def written(self) -> tuple[int, ...]:
        """Joints whose rotation this control may change."""
        return self.path.joints + ((self.path.end_joint,) if self.orient_end else ())

    def ready(self, state: ControlState) -> bool:
        return state.target is not None

    def joins(self, group: Sequence[ControlKind]) -> bool:
        """Consecutive two-bone controls with the same settings, none writing a joint another one
        reads, are solved together."""
        if not (self.solver == "two_bone" and self.limits is None):
            return False
        lead = group[0]
        return (
            isinstance(lead, IKControl)
            and lead.solver == "two_bone"
            and lead.limits is None
            and (lead.tolerance, lead.max_passes, lead.softness) == (self.tolerance, self.max_passes, self.softness)
            and all(isinstance(o, IKControl) and independent(o.written, o.path, self.written, self.path) for o in group)
        )

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        return [Candidate(c, None, r) for c, r in self._solve(group, states, ev)]

    def _solve(
        self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation
    ) -> list[tuple[FloatArray, ControlReport]]:
        """Solve a group of IK controls in one batched call (a group of one is the usual case
        for FABRIK and CCD; independent two-bone limbs share a call). Rows of the batched solve
        are member-major: ``frames`` rows per member."""
        sk, pose, dts = ev.skeleton, ev.pose, ev.dts
        frames = pose.frames
        ik = [c for c in group if isinstance(c, IKControl)]
        count = len(ik)
        lead = ik[0]
        kin = PathKinematics(sk, [c.path for c in ik], pose)
        targets = np.empty((count, frames, 3))
        poles: FloatArray | None = None
        has_pole = [st.pole is not None for st in states]
        if any(has_pole):
            # Members without a pole get a non-finite one, which the solver treats as unusable
            # (it keeps the existing bend).
            poles = np.full((count, frames, 3), np.nan)
        for m, (c, st) in enumerate(zip(ik, states, strict=True)):
            assert st.target is not None
            targets[m] = member_input(c, st, "target", st.target, frames, dts)
            if st.pole is not None and poles is not None:
                poles[m] = member_input(c, st, "pole", st.pole, frames, dts)
        valid = np.isfinite(targets).all(axis=-1)
        if poles is not None:
            pole_ok = np.isfinite(poles).all(axis=-1)
            if not all(has_pole):
                pole_ok |= ~np.array(has_pole)[:, None]
            valid &= pole_ok
        valid_all = valid.reshape(-1)
        target_all = targets.reshape(-1, 3)
        safe_pole = None if poles is None else poles.reshape(-1, 3)
        if not valid_all.all():
            # A skipped frame still goes through the batched solve; aim it at its own end point
            # so nothing non-finite enters the arithmetic, then discard it.
            target_all = np.where(valid_all[:, None], target_all, kin.points()[:, -1])
            if safe_pole is not None:
                safe_pole = np.where(valid_all[:, None], safe_pole, np.nan)
        use_warm = count == 1 and lead.warm_start and lead.solver == "fabrik" and frames == 1
        initial = None
        if use_warm and states[0].warm is not None:
            # The warm start was stored in the path's parent frame, so it follows the character.
            initial = np.einsum("tij,tkj->tki", kin.base[:, :3, :3], states[0].warm) + kin.base[:, None, :3, 3]
        solve = solve_path_ik(
            kin,
            target_all,
            solver=lead.solver,
            pole=safe_pole,
            limits=lead.limits,
            initial=initial,
            tolerance=lead.tolerance,
            max_passes=lead.max_passes,
            softness=lead.softness,
        )
        if use_warm and valid_all[0]:
            rel = solve.points - kin.base[:, None, :3, 3]
            states[0].warm = np.linalg.solve(kin.base[:, None, :3, :3], rel[..., None])[..., 0]
        end_rot: dict[int, FloatArray] = {}
        oriented = [m for m, (c, st) in enumerate(zip(ik, states, strict=True)) if c.orient_end and st.orientation is not None]
        if oriented:
            wanted = np.empty((len(oriented), frames, 4))
            for row, m in enumerate(oriented):
                q = states[m].orientation
                assert q is not None
                wanted[row] = member_input(ik[m], states[m], "orientation", q, frames, dts)
            finite = np.isfinite(wanted).all(axis=-1)
            if not finite.all():
                valid[oriented] &= finite
                wanted = np.where(finite[..., None], wanted, np.array([1.0, 0.0, 0.0, 0.0]))
            tips = solve.tip.reshape(count, frames, 4, 4)[oriented].reshape(-1, 4, 4)
            solved = end_rotations(sk, [ik[m].path.end_joint for m in oriented], tips, wanted.reshape(-1, 4))
            for row, m in enumerate(oriented):
                end_rot[m] = solved[row * frames : (row + 1) * frames]
        # Report masks for all members at once, then one view per member.
        skipped = ~valid
        ran = valid & ~solve.kept.reshape(count, frames)
        out: list[tuple[FloatArray, ControlReport]] = []
        for m, c in enumerate(ik):
            rows = slice(m * frames, (m + 1) * frames)
            candidate = solve.rotations[rows]
            if c.orient_end:
                # Without an orientation the end joint keeps its animated rotation.
                end = end_rot.get(m, pose.rotations[:, c.path.end_joint])
                candidate = np.concatenate([candidate, end[:, None]], axis=1)
            out.append(
                (
                    candidate,
                    ControlReport(
                        name=c.name,
                        ran=ran[m],
                        skipped=skipped[m],
                        residual=solve.residual[rows],
                        iterations=solve.iterations[rows],
                        converged=solve.converged[rows],
                        limited=solve.limited[rows],
                    ),
                )
            )
        return out


@dataclass(frozen=True)
class LookAtControl(ControlKind):
    """A look-at chain (docs/controls.md#look-at)."""

    feed: ClassVar[str] = "target"

    name: str
    chain: LookAtChain
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.0

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, self.smooth_time)

    @property
    def written(self) -> tuple[int, ...]:
        return tuple(self.chain.path.joints[k] for k in self.chain.turning)

    def ready(self, state: ControlState) -> bool:
        return state.target is not None

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        rotations, report = self._aim(states[0], ev)
        return [Candidate(rotations, None, report)]

    def _aim(self, st: ControlState, ev: Evaluation) -> tuple[FloatArray, ControlReport]:
        control, sk, pose, dts = self, ev.skeleton, ev.pose, ev.dts
        assert st.target is not None
        target = member_input(control, st, "target", st.target, pose.frames, dts)
        if target.shape != (pose.frames, 3):
            target = np.broadcast_to(target, (pose.frames, 3))
        valid = np.isfinite(target).all(axis=1)
        safe = target if valid.all() else np.where(valid[:, None], target, 0.0)
        solve = look_at(sk, control.chain, pose, safe)
        keep = control.chain.turning
        ok = valid & solve.valid
        return solve.rotations if len(keep) == solve.rotations.shape[1] else solve.rotations[:, keep], ControlReport(
            name=control.name,
            ran=ok,
            skipped=~ok,
            residual=solve.aim_error,
            iterations=np.ones(pose.frames, dtype=np.int64),
            converged=solve.aim_error <= LOOK_AT_TOLERANCE,
            limited=solve.limited,
        )
