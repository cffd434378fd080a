"""Diamond closures as the control stack runs them (docs/controls.md#closure): the definition, its two smoothed
controller targets and its run. The solve is in :mod:`core.controls.closure`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ...errors import RigError
from ..closure import STOP_REASONS, DiamondClosure, solve_closure
from ..ik_common import DEFAULT_MAX_PASSES, DEFAULT_TOLERANCE
from .base import Candidate, ControlKind, ControlReport, ControlState, Evaluation, check_common, member_input


@dataclass(frozen=True)
class ClosureControl(ControlKind):
    """A diamond closure (docs/controls.md#closure); the instance gives the two controller targets
    (:meth:`ControlInstance.set_closure_targets`), smoothed like IK targets."""

    feed: ClassVar[str] = "closure"

    name: str
    closure: DiamondClosure
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.0
    tolerance: float = DEFAULT_TOLERANCE
    max_iterations: int = 16
    max_passes: int = DEFAULT_MAX_PASSES

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, self.smooth_time)
        if not (math.isfinite(self.tolerance) and self.tolerance > 0.0) or self.max_iterations < 1 or self.max_passes < 1:
            raise RigError(f"control {self.name!r}: tolerance must be > 0, max_iterations and max_passes >= 1")

    @property
    def written(self) -> tuple[int, ...]:
        return self.closure.written

    def ready(self, state: ControlState) -> bool:
        return state.target is not None and state.second is not None

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        return [self._close(states[0], ev)]

    def _close(self, st: ControlState, ev: Evaluation) -> Candidate:
        control, pose, dts = self, ev.pose, ev.dts
        assert st.target is not None and st.second is not None
        frames = pose.frames
        first = np.broadcast_to(member_input(control, st, "target", st.target, frames, dts), (frames, 3))
        second = np.broadcast_to(member_input(control, st, "second", st.second, frames, dts), (frames, 3))
        valid = np.isfinite(first).all(axis=1) & np.isfinite(second).all(axis=1)
        solve = solve_closure(
            ev.skeleton,
            control.closure,
            pose,
            np.where(valid[:, None], first, 0.0),
            np.where(valid[:, None], second, 0.0),
            tolerance=control.tolerance,
            max_iterations=control.max_iterations,
            max_passes=control.max_passes,
        )
        candidate = np.concatenate([solve.left, solve.right], axis=1)
        report = ControlReport(
            name=control.name,
            ran=valid,
            skipped=~valid,
            residual=solve.residual,
            iterations=solve.iterations,
            converged=solve.satisfied & valid,
            limited=solve.limited & valid,
            details=MappingProxyType(
                {
                    "satisfied": solve.satisfied,
                    "stop": np.array(STOP_REASONS)[solve.stop],
                    "endpoint_gap": solve.endpoint_gap,
                    "base_gap": solve.base_gap,
                    "meeting": solve.meeting,
                }
            ),
        )
        return Candidate(candidate, None, report)
