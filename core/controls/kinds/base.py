"""What the control stack asks of every control kind, and what they share.

Each kind (IK and look-at, ground, springs, inheritance and fixed axes, closures) is a frozen
definition deriving from :class:`ControlKind`: the joints it rotates, moves and copies, which
instance input feeds it, whether it is ready to run, whether it joins the batch before it, and
how it runs a batch of its members over a pose (:meth:`ControlKind.run`, returning one
:class:`Candidate` per member). The stack (:mod:`core.controls.stack`) orders, blends and
reports; it never asks which kind a control is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ...errors import RigError
from ...rig.rotations import FloatArray, quat_slerp
from ...rig.skeleton import Skeleton
from ..chains import JointPath, PoseBuffers
from ..ground import RayCast

BoolArray = NDArray[np.bool_]


def check_common(name: str, priority: int, weight: float, smooth_time: float) -> None:
    if not name:
        raise RigError("a control needs a name")
    if not isinstance(priority, int):
        raise RigError(f"control {name!r}: priority must be an integer, got {priority!r}")
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise RigError(f"control {name!r}: weight must be in [0, 1], got {weight}")
    if not (math.isfinite(smooth_time) and smooth_time >= 0.0):
        raise RigError(f"control {name!r}: smooth_time must be >= 0 seconds, got {smooth_time}")


@dataclass(frozen=True)
class ControlReport:
    """What one control did at each frame ``(T,)``: ``ran`` (it produced a candidate that was
    applied), ``skipped`` (non-finite target or candidate), the residual (IK: distance in
    skeleton units after writeback; look-at: aim error in radians), iterations, converged, and
    ``limited`` (IK: a joint limit made the target unreachable; look-at: the yaw/pitch limits
    changed the direction)."""

    name: str
    ran: BoolArray
    skipped: BoolArray
    residual: FloatArray
    iterations: NDArray[np.int64]
    converged: BoolArray
    limited: BoolArray
    #: Kind-specific diagnostics per frame (ground: lifts, hits, tilts, pelvis offset; springs:
    #: reset reasons; closure: gaps, satisfied, stop reasons), arrays with frames first.
    details: Mapping[str, NDArray[Any]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass
class ControlState:
    """Per-instance, per-control state. ``target``/``pole``/``orientation`` are inputs set by
    the owner; the rest is runtime memory that disabling clears."""

    enabled: bool
    weight: float
    target: FloatArray | None = None
    pole: FloatArray | None = None
    orientation: FloatArray | None = None
    #: The second controller target of a closure (``target`` is the first).
    second: FloatArray | None = None
    ray_cast: RayCast | None = None
    memory: dict[str, FloatArray] = field(default_factory=dict)
    warm: FloatArray | None = None
    report: ControlReport | None = None
    #: Simulation or smoothing state of a ground or spring control.
    runtime: object | None = None

    def clear_runtime(self) -> None:
        self.memory = {}
        self.warm = None
        self.report = None
        self.runtime = None


@dataclass
class Candidate:
    """One control's candidate: rotations of its ``written`` joints ``(T, w, 4)`` and
    translations of its ``moved`` joints ``(T, m, 3)`` (``None`` when it moves none)."""

    rotations: FloatArray
    translations: FloatArray | None
    report: ControlReport


@dataclass(frozen=True)
class Evaluation:
    """What a kind's run reads besides its own state: the skeleton, the working pose, per-frame
    ``dts`` (smoothing) and scene ``times`` (springs), the object's placements ``(T, 4, 4)``
    and their cached inverse."""

    skeleton: Skeleton
    pose: PoseBuffers
    dts: FloatArray | None
    times: FloatArray | None
    places: FloatArray
    inverse: Callable[[FloatArray], FloatArray]


class ControlKind:
    """The behaviour the stack calls on a control definition. Subclasses are frozen dataclasses
    with at least ``name``, ``priority`` and ``weight`` (``smooth_time`` where they smooth)."""

    name: str
    priority: int
    weight: float
    smooth_time: float = 0.0
    #: The instance input that feeds the kind: ``"target"`` (:meth:`ControlInstance.set_target`),
    #: ``"closure"`` (``set_closure_targets``), ``"ground"`` (``set_ground``) or ``""`` (none).
    feed: ClassVar[str] = ""
    #: Whether the kind integrates over scene time, and works in world space.
    needs_time: ClassVar[bool] = False
    needs_placement: ClassVar[bool] = False

    @property
    def written(self) -> tuple[int, ...]:
        """Joints whose rotation this control may change."""
        return ()

    @property
    def moved(self) -> tuple[int, ...]:
        """Joints whose translation this control may change."""
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        """Joints whose current local values this control copies (it runs after their writers)."""
        return ()

    def ready(self, state: ControlState) -> bool:
        """Whether the instance gave what the kind needs to run (enabled and weight aside)."""
        return True

    def joins(self, group: Sequence[ControlKind]) -> bool:
        """Whether this control is solved in one batched call with the consecutive ``group``
        before it (the same result as one after the other)."""
        return False

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        """Candidates of ``group`` (this control first, then the members that joined it), whose
        instance states are ``states``, on the pose of ``ev``."""
        raise NotImplementedError


def smooth(
    memory: dict[str, FloatArray], key: str, values: FloatArray, dt: FloatArray | None, smooth_time: float,
    rotation: bool = False,
) -> FloatArray:
    """Exponentially smoothed ``values`` ``(T, w)``, carrying ``memory[key]`` across calls.

    Non-finite frames stay non-finite (their control is skipped) and leave the memory alone; a
    missing, negative or non-finite ``dt`` (first frame, scrubbing backwards) snaps to the value.
    """
    if smooth_time <= 0.0:
        return values
    finite = np.isfinite(values).all(axis=1)
    if dt is None:
        if np.any(finite):
            memory[key] = values[np.flatnonzero(finite)[-1]].copy()
        return values
    out = np.full(values.shape, np.nan)
    state = memory.get(key)
    for t in range(values.shape[0]):
        if not finite[t]:
            continue
        step = float(dt[t])
        if state is None or not math.isfinite(step) or step < 0.0:
            state = values[t].copy()
        else:
            alpha = 1.0 - math.exp(-step / smooth_time)
            if rotation:
                state = quat_slerp(state, values[t], alpha)
            else:
                state = state + alpha * (values[t] - state)
        out[t] = state
    if state is not None:
        memory[key] = state
    return out


def member_input(
    control: ControlKind,
    st: ControlState,
    key: str,
    value: FloatArray,
    frames: int,
    dts: FloatArray | None,
) -> FloatArray:
    """A target-like input ``value`` ``(w,)`` or ``(T, w)`` of ``control``, checked against the
    pose's frames and smoothed under ``key`` when the control smooths."""
    if value.ndim == 2 and value.shape[0] != frames:
        raise ValueError(
            f"{key} of {control.name!r} has {value.shape[0]} frames, the pose has {frames}"
        )
    if control.smooth_time <= 0.0:
        return value
    rows = np.broadcast_to(value, (frames, value.shape[-1]))
    return smooth(st.memory, key, rows, dts, control.smooth_time, rotation=key == "orientation")


def _reads(path: JointPath) -> set[int]:
    return set(path.joints) | set(path.ancestors) | ({path.end_joint} if path.end_joint >= 0 else set())


def independent(a_written: tuple[int, ...], a_path: JointPath, b_written: tuple[int, ...], b_path: JointPath) -> bool:
    """Neither of two path controls writes a joint the other reads."""
    return not (set(a_written) & _reads(b_path)) and not (set(b_written) & _reads(a_path))


def full_report(name: str, frames: int) -> ControlReport:
    """A control that ran on every frame with nothing to report (inheritance, fixed axes)."""
    yes = np.ones(frames, dtype=bool)
    return ControlReport(name, yes, ~yes, np.zeros(frames), np.ones(frames, dtype=np.int64), yes.copy(), ~yes)


def idle_report(name: str, frames: int) -> ControlReport:
    no = np.zeros(frames, dtype=bool)
    return ControlReport(name, no, no.copy(), np.zeros(frames), np.zeros(frames, dtype=np.int64), no.copy(), no.copy())
