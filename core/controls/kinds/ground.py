"""Ground adaptation as the control stack runs it (docs/controls.md#ground-feet): the definition, the ray cast that
feeds it and its run with the per-instance smoothing memory. The maths is in
:mod:`core.controls.ground`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ...errors import RigError
from ..ground import GroundMemory, GroundRig, adapt_to_ground
from .base import Candidate, ControlKind, ControlReport, ControlState, Evaluation, check_common


@dataclass(frozen=True)
class GroundControl(ControlKind):
    """Ground-adapted feet and pelvis (docs/controls.md#ground-feet). The instance supplies the ray cast
    (:meth:`ControlInstance.set_ground`). ``smooth_time`` smooths the ground plane under each
    foot (hence its lift and tilt), ``pelvis_smooth_time`` the pelvis offset."""

    feed: ClassVar[str] = "ground"
    needs_placement: ClassVar[bool] = True

    name: str
    rig: GroundRig
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.08
    pelvis_smooth_time: float = 0.15

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, self.smooth_time)
        if not (math.isfinite(self.pelvis_smooth_time) and self.pelvis_smooth_time >= 0.0):
            raise RigError(f"control {self.name!r}: pelvis_smooth_time must be >= 0 seconds, got {self.pelvis_smooth_time}")

    @property
    def written(self) -> tuple[int, ...]:
        return self.rig.written

    @property
    def moved(self) -> tuple[int, ...]:
        return self.rig.moved

    def ready(self, state: ControlState) -> bool:
        return state.ray_cast is not None

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        return [self._adapt(states[0], ev)]

    def _adapt(self, st: ControlState, ev: Evaluation) -> Candidate:
        control, pose, dts, places = self, ev.pose, ev.dts, ev.places
        assert st.ray_cast is not None
        memory = st.runtime if isinstance(st.runtime, GroundMemory) else GroundMemory()
        st.runtime = memory
        solve = adapt_to_ground(
            ev.skeleton, control.rig, pose, places, st.ray_cast, memory, dts,
            control.smooth_time, control.pelvis_smooth_time,
        )
        frames = pose.frames
        residual = solve.residual.max(axis=1)
        ok = np.isfinite(residual)
        report = ControlReport(
            name=control.name,
            ran=ok,
            skipped=~ok,
            residual=residual,
            iterations=np.ones(frames, dtype=np.int64),
            converged=residual <= 1e-6,
            limited=solve.capped.any(axis=1),
            details=MappingProxyType(
                {
                    "hit": solve.hit,
                    "lift": solve.lift,
                    "raw_lift": solve.raw_lift,
                    "tilt": solve.tilt,
                    "capped": solve.capped,
                    "clearance": solve.clearance,
                    "pelvis_offset": solve.pelvis_offset,
                    "leg_residual": solve.residual,
                }
            ),
        )
        tr = None if solve.pelvis_translation is None else solve.pelvis_translation[:, None]
        return Candidate(solve.rotations, tr, report)
