"""The control stack: procedural controls that adjust an animated pose, in priority order.

Conventions: poses are local rotations ``(T, B, 4)`` (w-first unit quaternions, the rotation of
each joint's local transform in :mod:`core.skeleton`), translations ``(T, B, 3)`` and optional
scales, frames first, float64. Targets are skeleton-space points; orientations skeleton-space
quaternions. Times are seconds.

Definitions and state are apart (SPEC 2.4). A :class:`ControlStack` (the skeleton, its control
definitions in run order, the prebuilt joint -> controls table) is immutable and may be shared
by any number of armature objects. Each object owns a :class:`ControlInstance`: targets, enable
flags, weights, smoothing memory, solver warm starts and the last reports. Two instances of one
stack never see each other's state.

One evaluation (SPEC 7.1): enabled controls with positive weight run in ascending priority
(definition order breaks ties), each reading the pose the previous one produced. A control
computes a candidate pose for the joints it drives; its weight blends the joints that changed
(slerp from the input toward the candidate; weight 1 writes the candidate itself). A frame whose
target or candidate is not finite is skipped for that control as a whole (a chain written joint by
joint where finite would tear). Changed joints gain coverage of at least the control's weight. Targets may be smoothed with response ``1 - exp(-dt / smooth_time)``
before the solve. The stack reads the input arrays and never writes into them, and nothing of a
frame's output becomes the next frame's input: warm starts only seed a solver, and the pose each
frame starts from is the animation's.

Consecutive two-bone controls that neither write what another reads (four limbs) are solved in
one batched call; the result is the same as running them one after the other.

Control kinds: IK chains and look-at (SPEC 7.2-7.3), ground adaptation (7.4, :mod:`core.ground`),
spring chains (7.5, :mod:`core.springs`), bone inheritance and fixed axes (7.6,
:mod:`core.inheritance`) and diamond closures (7.7, :mod:`core.closure`). A control may change
rotations (``written``) and translations (``moved``); translations blend linearly by the weight.
Run order is ascending priority with one exception that keeps inheritance well defined: an
inheritance control runs after every control that writes one of its sources (so the source is
read with its IK or other corrections applied), whatever their priorities; a cycle is refused.

Time: ``evaluate`` takes ``dt`` (seconds since the previous evaluation, then between frames) or
``time`` (the scene time of each frame, seconds). Springs need a time to integrate over; with
``time`` they also recompute a revisited frame from a cached state (scrubbing). ``placement``
is the armature object's world matrix (``(4, 4)`` or ``(T, 4, 4)``; default the skeleton's):
ground probes and springs work in world space, per object.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .chains import JointPath, PathKinematics, PoseBuffers, end_rotations
from .closure import STOP_REASONS, DiamondClosure, solve_closure
from .errors import RigError
from .ground import GroundMemory, GroundRig, RayCast, adapt_to_ground
from .ik import DEFAULT_MAX_PASSES, DEFAULT_TOLERANCE, SOLVERS, solve_path_ik
from .inheritance import FixedAxes, Inheritance, inherit, twist_about
from .joint_limits import JointLimit
from .look_at import LookAtChain, look_at
from .rotations import FloatArray, quat_normalize, quat_slerp
from .skeleton import Skeleton
from .springs import SpringChain, SpringSnapshot, SpringState, advance

BoolArray = NDArray[np.bool_]

#: Aim error (radians) below which a look-at counts as converged.
LOOK_AT_TOLERANCE = 1e-6


def _check_common(name: str, priority: int, weight: float, smooth_time: float) -> None:
    if not name:
        raise RigError("a control needs a name")
    if not isinstance(priority, int):
        raise RigError(f"control {name!r}: priority must be an integer, got {priority!r}")
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise RigError(f"control {name!r}: weight must be in [0, 1], got {weight}")
    if not (math.isfinite(smooth_time) and smooth_time >= 0.0):
        raise RigError(f"control {name!r}: smooth_time must be >= 0 seconds, got {smooth_time}")


@dataclass(frozen=True)
class IKControl:
    """An IK chain (SPEC 7.2). ``solver`` is ``two_bone`` (a 2-joint path), ``fabrik`` or
    ``ccd``; ``limits`` one entry per path joint (``None`` = free); ``orient_end`` lets the
    instance give the path's ``end_joint`` an orientation after the positional solve."""

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
        _check_common(self.name, self.priority, self.weight, self.smooth_time)
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

    @property
    def moved(self) -> tuple[int, ...]:
        """Joints whose translation this control may change."""
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        """Joints whose current local values this control copies (it runs after their writers)."""
        return ()


@dataclass(frozen=True)
class LookAtControl:
    """A look-at chain (SPEC 7.3)."""

    name: str
    chain: LookAtChain
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.0

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, self.smooth_time)

    @property
    def written(self) -> tuple[int, ...]:
        return tuple(j for j, w in zip(self.chain.path.joints, self.chain.weights, strict=True) if w > 0.0)

    @property
    def moved(self) -> tuple[int, ...]:
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class GroundControl:
    """Ground-adapted feet and pelvis (SPEC 7.4). The instance supplies the ray cast
    (:meth:`ControlInstance.set_ground`). ``smooth_time`` smooths the ground plane under each
    foot (hence its lift and tilt), ``pelvis_smooth_time`` the pelvis offset."""

    name: str
    rig: GroundRig
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.08
    pelvis_smooth_time: float = 0.15

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, self.smooth_time)
        if not (math.isfinite(self.pelvis_smooth_time) and self.pelvis_smooth_time >= 0.0):
            raise RigError(f"control {self.name!r}: pelvis_smooth_time must be >= 0 seconds, got {self.pelvis_smooth_time}")

    @property
    def written(self) -> tuple[int, ...]:
        return self.rig.written

    @property
    def moved(self) -> tuple[int, ...]:
        return self.rig.moved

    @property
    def sources(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class SpringControl:
    """A spring chain (SPEC 7.5); its state lives in each instance."""

    name: str
    chain: SpringChain
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.chain.path.joints

    @property
    def moved(self) -> tuple[int, ...]:
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class InheritControl:
    """Bone inheritance, "append"/"grant" (SPEC 7.6): runs after every control that writes one
    of its sources."""

    name: str
    inheritance: Inheritance
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.inheritance.rotated

    @property
    def moved(self) -> tuple[int, ...]:
        return self.inheritance.moved

    @property
    def sources(self) -> tuple[int, ...]:
        return self.inheritance.sources


@dataclass(frozen=True)
class FixedAxisControl:
    """Fixed axes (SPEC 7.6): each joint keeps only the twist about its axis."""

    name: str
    axes: FixedAxes
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.axes.joints

    @property
    def moved(self) -> tuple[int, ...]:
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class ClosureControl:
    """A diamond closure (SPEC 7.7); the instance gives the two controller targets
    (:meth:`ControlInstance.set_closure_targets`), smoothed like IK targets."""

    name: str
    closure: DiamondClosure
    priority: int = 0
    weight: float = 1.0
    smooth_time: float = 0.0
    tolerance: float = DEFAULT_TOLERANCE
    max_iterations: int = 16
    max_passes: int = DEFAULT_MAX_PASSES

    def __post_init__(self) -> None:
        _check_common(self.name, self.priority, self.weight, self.smooth_time)
        if not (math.isfinite(self.tolerance) and self.tolerance > 0.0) or self.max_iterations < 1 or self.max_passes < 1:
            raise RigError(f"control {self.name!r}: tolerance must be > 0, max_iterations and max_passes >= 1")

    @property
    def written(self) -> tuple[int, ...]:
        return self.closure.written

    @property
    def moved(self) -> tuple[int, ...]:
        return ()

    @property
    def sources(self) -> tuple[int, ...]:
        return ()


Control = IKControl | LookAtControl | GroundControl | SpringControl | InheritControl | FixedAxisControl | ClosureControl


def _run_order(controls: Sequence[Control]) -> list[int]:
    """Ascending (priority, definition index), except that a control copying a source joint
    runs after every control that writes it; a cycle is refused naming the controls."""
    n = len(controls)
    before: list[set[int]] = [set() for _ in range(n)]
    for i, c in enumerate(controls):
        for s in c.sources:
            for j, w in enumerate(controls):
                if j != i and (s in w.written or s in w.moved):
                    before[i].add(j)
    waiting = [len(b) for b in before]
    unlocks: list[list[int]] = [[] for _ in range(n)]
    for i, b in enumerate(before):
        for j in b:
            unlocks[j].append(i)
    ready = [(controls[i].priority, i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for k in unlocks[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, (controls[k].priority, k))
    if len(order) != n:
        stuck = sorted(controls[i].name for i in range(n) if i not in set(order))
        raise RigError(f"controls {stuck} copy joints from each other in a cycle; no run order satisfies them")
    return order


def _reads(c: IKControl) -> set[int]:
    p = c.path
    return set(p.joints) | set(p.ancestors) | ({p.end_joint} if p.end_joint >= 0 else set())


def _batch_groups(controls: Sequence[Control]) -> tuple[tuple[int, ...], ...]:
    """Consecutive two-bone controls with the same settings, none writing a joint another one
    reads, are solved together: the same result as one after the other, in one batched call."""
    groups: list[list[int]] = []
    for i, c in enumerate(controls):
        if groups and isinstance(c, IKControl) and c.solver == "two_bone" and c.limits is None:
            prev = [controls[j] for j in groups[-1]]
            lead = prev[0]
            if (
                isinstance(lead, IKControl)
                and lead.solver == "two_bone"
                and lead.limits is None
                and (lead.tolerance, lead.max_passes, lead.softness) == (c.tolerance, c.max_passes, c.softness)
                and all(
                    isinstance(o, IKControl)
                    and not (set(o.written) & _reads(c))
                    and not (set(c.written) & _reads(o))
                    for o in prev
                )
            ):
                groups[-1].append(i)
                continue
        groups.append([i])
    return tuple(tuple(g) for g in groups)


class ControlStack:
    """Shared, immutable definition: a skeleton, its controls in run order and the prebuilt
    joint -> controls table. Build a new stack to change it; instances keep the one they got."""

    __slots__ = ("skeleton", "controls", "_index", "groups", "joint_controls", "needs_time", "needs_placement", "_sealed")

    def __init__(self, skeleton: Skeleton, controls: Sequence[Control]) -> None:
        seen: set[str] = set()
        for c in controls:
            if c.name in seen:
                raise RigError(f"two controls are both called {c.name!r}")
            seen.add(c.name)
            for j in (*c.written, *c.moved, *c.sources):
                if not 0 <= j < len(skeleton):
                    raise RigError(f"control {c.name!r} drives joint {j}, which is not in the skeleton")
        order = _run_order(controls)
        self.skeleton = skeleton
        #: Controls in the order they run.
        self.controls: tuple[Control, ...] = tuple(controls[i] for i in order)
        self._index: Mapping[str, int] = MappingProxyType({c.name: i for i, c in enumerate(self.controls)})
        #: Runs of consecutive controls solved in one batched call (indices into ``controls``).
        self.groups: tuple[tuple[int, ...], ...] = _batch_groups(self.controls)
        table: dict[int, list[str]] = {}
        for c in self.controls:
            for j in dict.fromkeys((*c.written, *c.moved)):
                table.setdefault(j, []).append(c.name)
        #: Joint index -> names of the controls that drive it, in run order (prebuilt so the
        #: Blender layer never scans every chain to find a bone's controls).
        self.joint_controls: Mapping[int, tuple[str, ...]] = MappingProxyType({j: tuple(v) for j, v in table.items()})
        #: Whether any control integrates over scene time (springs) or works in world space
        #: (springs, ground); evaluation skips that bookkeeping otherwise.
        self.needs_time: bool = any(isinstance(c, SpringControl) for c in self.controls)
        self.needs_placement: bool = any(isinstance(c, SpringControl | GroundControl) for c in self.controls)
        self._sealed = True

    def __setattr__(self, key: str, value: object) -> None:
        if getattr(self, "_sealed", False):
            raise AttributeError("a ControlStack is shared and immutable; build a new one to change it")
        object.__setattr__(self, key, value)

    def __len__(self) -> int:
        return len(self.controls)

    def index(self, name: str) -> int:
        if name not in self._index:
            raise RigError(f"no control called {name!r}; the stack has {sorted(self._index)}")
        return self._index[name]

    def control(self, name: str) -> Control:
        return self.controls[self.index(name)]

    def controls_of_joint(self, joint: int | str) -> tuple[str, ...]:
        j = joint if isinstance(joint, int) else self.skeleton.index(joint)
        return self.joint_controls.get(j, ())

    def instance(self) -> ControlInstance:
        """A fresh per-object state for this stack."""
        return ControlInstance(self)


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


@dataclass(frozen=True)
class StackResult:
    rotations: FloatArray
    translations: FloatArray
    scales: FloatArray | None
    coverage: FloatArray
    reports: Mapping[str, ControlReport]


@dataclass
class _State:
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
    runtime: GroundMemory | SpringState | None = None

    def clear_runtime(self) -> None:
        self.memory = {}
        self.warm = None
        self.report = None
        self.runtime = None


@dataclass(frozen=True)
class ControlStatus:
    """Read-only view of one control's state in an instance."""

    enabled: bool
    weight: float
    smoothed_target: FloatArray | None
    has_warm_start: bool
    report: ControlReport | None


def _vector_input(value: ArrayLike | None, width: int, what: str) -> FloatArray | None:
    if value is None:
        return None
    a = np.array(value, dtype=np.float64)
    if a.shape != (width,) and not (a.ndim == 2 and a.shape[1] == width):
        raise ValueError(f"{what} must have shape ({width},) or (T, {width}), got {a.shape}")
    a.setflags(write=False)
    return a


def _smooth(
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


@dataclass
class _Output:
    """One control's candidate: rotations of its ``written`` joints ``(T, w, 4)`` and
    translations of its ``moved`` joints ``(T, m, 3)`` (``None`` when it moves none)."""

    rotations: FloatArray
    translations: FloatArray | None
    report: ControlReport


def _placements(value: ArrayLike | None, default: FloatArray, frames: int) -> FloatArray:
    if value is None:
        return np.broadcast_to(default, (frames, 4, 4))
    a = np.asarray(value, dtype=np.float64)
    if a.shape == (4, 4):
        return np.broadcast_to(a, (frames, 4, 4))
    if a.shape != (frames, 4, 4):
        raise ValueError(f"placement must have shape (4, 4) or ({frames}, 4, 4), got {a.shape}")
    return a


class ControlInstance:
    """Per-object state of a :class:`ControlStack` and its evaluation."""

    __slots__ = ("stack", "_states", "_clock")

    def __init__(self, stack: ControlStack) -> None:
        self.stack = stack
        self._states = [_State(enabled=True, weight=c.weight) for c in stack.controls]
        #: Scene time of the last evaluated frame, when known.
        self._clock: float | None = None

    def _state(self, name: str) -> _State:
        return self._states[self.stack.index(name)]

    def set_target(
        self,
        name: str,
        target: ArrayLike | None,
        *,
        pole: ArrayLike | None = None,
        orientation: ArrayLike | None = None,
    ) -> None:
        """Skeleton-space target ``(3,)`` or ``(T, 3)``, optional pole point (IK) and end
        orientation quaternion ``(4,)`` or ``(T, 4)`` (IK with ``orient_end``)."""
        control = self.stack.control(name)
        if not isinstance(control, IKControl | LookAtControl):
            raise RigError(f"control {name!r} ({type(control).__name__}) takes no target through set_target")
        st = self._state(name)
        st.target = _vector_input(target, 3, f"target of {name!r}")
        st.pole = _vector_input(pole, 3, f"pole of {name!r}")
        q = _vector_input(orientation, 4, f"orientation of {name!r}")
        if q is not None:
            q = quat_normalize(q)
            q.setflags(write=False)
        st.orientation = q

    def set_closure_targets(self, name: str, first: ArrayLike | None, second: ArrayLike | None) -> None:
        """The two controller targets of a closure, skeleton space, ``(3,)`` or ``(T, 3)`` each
        (``None`` idles the closure)."""
        if not isinstance(self.stack.control(name), ClosureControl):
            raise RigError(f"control {name!r} is not a closure")
        st = self._state(name)
        st.target = _vector_input(first, 3, f"first target of {name!r}")
        st.second = _vector_input(second, 3, f"second target of {name!r}")

    def set_ground(self, name: str, ray_cast: RayCast | None) -> None:
        """The ground query of a ground control (see :mod:`core.ground`; ``None`` idles it)."""
        if not isinstance(self.stack.control(name), GroundControl):
            raise RigError(f"control {name!r} is not a ground control")
        if ray_cast is not None and not callable(ray_cast):
            raise ValueError(f"the ray cast of {name!r} must be callable")
        self._state(name).ray_cast = ray_cast

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Disabling clears the control's runtime state (smoothing memory, warm start, spring
        and ground state, report), so re-enabling starts clean."""
        st = self._state(name)
        if not enabled:
            st.clear_runtime()
        st.enabled = bool(enabled)

    def set_weight(self, name: str, weight: float) -> None:
        if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
            raise ValueError(f"weight of {name!r} must be in [0, 1], got {weight}")
        self._state(name).weight = float(weight)

    def reset(self) -> None:
        """Forget all runtime state (a new clip): smoothing, warm starts, springs and their
        cached frames, the clock."""
        for st in self._states:
            st.clear_runtime()
        self._clock = None

    def status(self, name: str) -> ControlStatus:
        st = self._state(name)
        mem = st.memory.get("target")
        return ControlStatus(
            enabled=st.enabled,
            weight=st.weight,
            smoothed_target=None if mem is None else mem.copy(),
            has_warm_start=st.warm is not None,
            report=st.report,
        )

    def spring_state(self, name: str) -> SpringSnapshot | None:
        """The state a spring control holds after its last frame (``None`` before any)."""
        if not isinstance(self.stack.control(name), SpringControl):
            raise RigError(f"control {name!r} is not a spring")
        rt = self._state(name).runtime
        return rt.current if isinstance(rt, SpringState) else None

    def _ready(self, control: Control, st: _State) -> bool:
        if not st.enabled or st.weight <= 0.0:
            return False
        if isinstance(control, IKControl | LookAtControl):
            return st.target is not None
        if isinstance(control, ClosureControl):
            return st.target is not None and st.second is not None
        if isinstance(control, GroundControl):
            return st.ray_cast is not None
        return True

    def _timing(
        self, frames: int, dt: ArrayLike | None, time: ArrayLike | None
    ) -> tuple[FloatArray | None, FloatArray | None]:
        """Per-frame ``dt`` (for smoothing) and scene times (for springs; NaN = unknown)."""
        if time is not None:
            times = np.array(np.broadcast_to(np.asarray(time, dtype=np.float64), (frames,)))
            previous = np.nan if self._clock is None else self._clock
            dts = np.diff(np.concatenate([[previous], times]))
        elif dt is not None:
            given = np.asarray(dt, dtype=np.float64)
            # A scalar dt (every live frame) is spread with one call; broadcast_to costs more.
            dts = np.full(frames, float(given)) if given.ndim == 0 else np.broadcast_to(given, (frames,))
            if not self.stack.needs_time:
                # Only the clock is kept (for a later call that gives scene times).
                total = float(np.sum(dts[1:])) + (float(dts[0]) if self._clock is not None else 0.0)
                end = (self._clock or 0.0) + total
                self._clock = end if math.isfinite(end) else None
                return dts, None
            times = np.empty(frames)
            clock = self._clock
            for t in range(frames):
                step = float(dts[t])
                if clock is None:
                    # Nothing before this frame: it starts a timeline of its own at 0.
                    clock = 0.0
                elif math.isfinite(clock) and math.isfinite(step):
                    clock = clock + step
                else:
                    clock = math.nan
                times[t] = clock
        else:
            self._clock = None
            return None, None
        last = float(times[-1]) if frames else math.nan
        self._clock = last if math.isfinite(last) else None
        return dts, times

    def evaluate(
        self,
        rotations: ArrayLike,
        translations: ArrayLike | None = None,
        scales: ArrayLike | None = None,
        *,
        coverage: ArrayLike | None = None,
        dt: ArrayLike | None = None,
        time: ArrayLike | None = None,
        placement: ArrayLike | None = None,
    ) -> StackResult:
        """Run the stack over ``T`` frames of a pose.

        ``coverage`` ``(B,)`` or ``(T, B)`` is how much the animation drives each joint (default
        0, so the result shows what the controls drove). ``dt`` (seconds, scalar or ``(T,)``) is
        the time since the previous evaluation for the first frame and between frames after it;
        ``time`` (scalar or ``(T,)``) gives each frame's scene time instead (then ``dt`` is
        ignored and a frame evaluated again, or revisited by scrubbing, recomputes springs from
        the cached state before it). Neither disables smoothing and springs for this call.
        ``placement`` is the object's world matrix ``(4, 4)`` or ``(T, 4, 4)``. Warm starts are
        used for single-frame (live) evaluation; a batch of frames starts every frame from its
        own animated pose, so a bake does not depend on the order frames were visited (springs
        and smoothing, which carry state by nature, run through the frames in order).
        """
        sk = self.stack.skeleton
        pose = PoseBuffers(sk, rotations, translations, scales)
        frames = pose.frames
        n = len(sk)
        if coverage is None:
            cov = np.zeros((frames, n))
        else:
            c = np.asarray(coverage, dtype=np.float64)
            if c.shape == (n,):
                cov = np.broadcast_to(c, (frames, n)).copy()
            elif c.shape == (frames, n):
                cov = c.copy()
            else:
                raise ValueError(f"coverage must have shape ({n},) or ({frames}, {n}), got {c.shape}")
        places = _placements(placement, sk.placement, frames) if self.stack.needs_placement else sk.placement[None]
        dts, times = self._timing(frames, dt, time)
        reports: dict[str, ControlReport] = {}
        for group in self.stack.groups:
            active: list[int] = []
            for ci in group:
                control, st = self.stack.controls[ci], self._states[ci]
                if not self._ready(control, st):
                    reports[control.name] = _idle_report(control.name, frames)
                else:
                    active.append(ci)
            if not active:
                continue
            first = self.stack.controls[active[0]]
            st0 = self._states[active[0]]
            outputs: list[_Output]
            if isinstance(first, IKControl):
                outputs = [_Output(c, None, r) for c, r in self._run_ik(active, pose, dts)]
            elif isinstance(first, LookAtControl):
                look_rot, look_report = self._run_look_at(first, st0, pose, dts)
                outputs = [_Output(look_rot, None, look_report)]
            elif isinstance(first, GroundControl):
                outputs = [self._run_ground(first, st0, pose, dts, places)]
            elif isinstance(first, SpringControl):
                outputs = [self._run_spring(first, st0, pose, times, places)]
            elif isinstance(first, InheritControl):
                outputs = [_run_inherit(first, pose)]
            elif isinstance(first, FixedAxisControl):
                outputs = [_run_fixed_axis(first, pose)]
            else:
                outputs = [self._run_closure(first, st0, pose, dts)]
            for ci, out in zip(active, self._apply(active, outputs, pose, cov), strict=True):
                self._states[ci].report = out
                reports[out.name] = out
        return StackResult(
            rotations=pose.rotations,
            translations=pose.translations,
            scales=pose.scales,
            coverage=cov,
            reports=MappingProxyType({c.name: reports[c.name] for c in self.stack.controls}),
        )

    def _apply(self, active: list[int], outputs: list[_Output], pose: PoseBuffers, cov: FloatArray) -> list[ControlReport]:
        """Blend the candidates of one group into the pose by their weights; returns the
        reports with frames whose candidate was not finite marked skipped.

        Members of a group are independent (none writes what another reads), so their blends
        go in together: the same as running them one after the other."""
        frames = pose.frames
        rot_cols: list[int] = []
        rot_cands: list[FloatArray] = []
        # Per control its frame mask and how many columns it spans (expanded only when needed).
        rot_ok: list[tuple[BoolArray | None, int]] = []
        rot_w: list[float] = []
        tr_cols: list[int] = []
        tr_cands: list[FloatArray] = []
        tr_ok: list[tuple[BoolArray | None, int]] = []
        tr_w: list[float] = []
        oks: list[BoolArray | None] = []
        for ci, out in zip(active, outputs, strict=True):
            control = self.stack.controls[ci]
            weight = self._states[ci].weight
            # The usual frame is finite and not skipped: test that with one reduction per
            # array before building the per-frame mask (a live frame pays per numpy call).
            usable = np.isfinite(out.rotations).all() and not out.report.skipped.any()
            if usable and out.translations is not None:
                usable = bool(np.isfinite(out.translations).all())
            # None marks "every frame usable", the common case, so the report stands as is.
            ok: BoolArray | None = None
            if not usable:
                ok = ~out.report.skipped & np.isfinite(out.rotations).all(axis=(1, 2))
                if out.translations is not None:
                    ok &= np.isfinite(out.translations).all(axis=(1, 2))
                if ok.all():
                    ok = None
            oks.append(ok)
            if control.written:
                rot_cols.extend(control.written)
                rot_cands.append(out.rotations)
                rot_ok.append((ok, len(control.written)))
                rot_w.extend([weight] * len(control.written))
            if control.moved and out.translations is not None:
                tr_cols.extend(control.moved)
                tr_cands.append(out.translations)
                tr_ok.append((ok, len(control.moved)))
                tr_w.extend([weight] * len(control.moved))
        partial = any(o is not None for o in oks)
        if rot_cols:
            cand = rot_cands[0] if len(rot_cands) == 1 else np.concatenate(rot_cands, axis=1)
            old = pose.rotations[:, rot_cols]
            changed = np.any(cand != old, axis=-1)
            if partial:
                changed &= _column_masks(rot_ok, frames)
            if changed.any():
                w = np.array(rot_w)
                blended = cand
                if min(rot_w) < 1.0:
                    blended = np.where((w >= 1.0)[:, None], cand, quat_slerp(old, cand, w))
                pose.set_rotations(rot_cols, np.where(changed[..., None], blended, old))
                before = cov[:, rot_cols]
                cov[:, rot_cols] = np.where(changed, np.maximum(before, w), before)
        if tr_cols:
            cand = tr_cands[0] if len(tr_cands) == 1 else np.concatenate(tr_cands, axis=1)
            old = pose.translations[:, tr_cols]
            changed = np.any(cand != old, axis=-1)
            if partial:
                changed &= _column_masks(tr_ok, frames)
            if changed.any():
                w = np.array(tr_w)
                blended = np.where((w >= 1.0)[:, None], cand, old + w[:, None] * (cand - old))
                pose.set_translations(tr_cols, np.where(changed[..., None], blended, old))
                cov[:, tr_cols] = np.where(changed, np.maximum(cov[:, tr_cols], w), cov[:, tr_cols])
        result: list[ControlReport] = []
        for out, ok_or_none in zip(outputs, oks, strict=True):
            report = out.report
            if ok_or_none is not None:
                report = ControlReport(
                    name=report.name,
                    ran=ok_or_none & report.ran,
                    skipped=~ok_or_none,
                    residual=report.residual,
                    iterations=report.iterations,
                    converged=report.converged & ok_or_none,
                    limited=report.limited & ok_or_none,
                    details=report.details,
                )
            result.append(report)
        return result

    def _member_inputs(
        self,
        control: IKControl | LookAtControl | ClosureControl,
        st: _State,
        key: str,
        value: FloatArray,
        frames: int,
        dts: FloatArray | None,
    ) -> FloatArray:
        if value.ndim == 2 and value.shape[0] != frames:
            raise ValueError(
                f"{key} of {control.name!r} has {value.shape[0]} frames, the pose has {frames}"
            )
        if control.smooth_time <= 0.0:
            return value
        rows = np.broadcast_to(value, (frames, value.shape[-1]))
        return _smooth(st.memory, key, rows, dts, control.smooth_time, rotation=key == "orientation")

    def _run_ik(
        self, members: list[int], pose: PoseBuffers, dts: FloatArray | None
    ) -> list[tuple[FloatArray, ControlReport]]:
        """Solve a group of IK controls in one batched call (a group of one is the usual case
        for FABRIK and CCD; independent two-bone limbs share a call). Rows of the batched solve
        are member-major: ``frames`` rows per member."""
        sk = self.stack.skeleton
        frames = pose.frames
        ik = [c for c in (self.stack.controls[i] for i in members) if isinstance(c, IKControl)]
        states = [self._states[i] for i in members]
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
            targets[m] = self._member_inputs(c, st, "target", st.target, frames, dts)
            if st.pole is not None and poles is not None:
                poles[m] = self._member_inputs(c, st, "pole", st.pole, frames, dts)
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
                wanted[row] = self._member_inputs(ik[m], states[m], "orientation", q, frames, dts)
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

    def _run_look_at(
        self, control: LookAtControl, st: _State, pose: PoseBuffers, dts: FloatArray | None
    ) -> tuple[FloatArray, ControlReport]:
        sk = self.stack.skeleton
        assert st.target is not None
        target = self._member_inputs(control, st, "target", st.target, pose.frames, dts)
        if target.shape != (pose.frames, 3):
            target = np.broadcast_to(target, (pose.frames, 3))
        valid = np.isfinite(target).all(axis=1)
        safe = target if valid.all() else np.where(valid[:, None], target, 0.0)
        solve = look_at(sk, control.chain, pose, safe)
        keep = [k for k, w in enumerate(control.chain.weights) if w > 0.0]
        ok = valid & solve.valid
        return solve.rotations[:, keep], ControlReport(
            name=control.name,
            ran=ok,
            skipped=~ok,
            residual=solve.aim_error,
            iterations=np.ones(pose.frames, dtype=np.int64),
            converged=solve.aim_error <= LOOK_AT_TOLERANCE,
            limited=solve.limited,
        )

    def _run_ground(
        self, control: GroundControl, st: _State, pose: PoseBuffers, dts: FloatArray | None, places: FloatArray
    ) -> _Output:
        assert st.ray_cast is not None
        memory = st.runtime if isinstance(st.runtime, GroundMemory) else GroundMemory()
        st.runtime = memory
        solve = adapt_to_ground(
            self.stack.skeleton, control.rig, pose, places, st.ray_cast, memory, dts,
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
        return _Output(solve.rotations, tr, report)

    def _run_spring(
        self, control: SpringControl, st: _State, pose: PoseBuffers, times: FloatArray | None, places: FloatArray
    ) -> _Output:
        state = st.runtime if isinstance(st.runtime, SpringState) else SpringState()
        st.runtime = state
        kin = PathKinematics(self.stack.skeleton, control.chain.path, pose)
        animated = kin.points()
        frames = pose.frames
        world = np.einsum("tij,tkj->tki", places[:, :3, :3], animated) + places[:, None, :3, 3]
        usable = np.isfinite(world).all(axis=(1, 2)) & np.isfinite(places).all(axis=(1, 2))
        simulated = world.copy()
        reset = np.full(frames, "", dtype="<U10")
        recomputed = np.zeros(frames, dtype=bool)
        substeps = np.zeros(frames, dtype=np.int64)
        for t in range(frames):
            if not usable[t]:
                # A non-finite input frame is skipped and leaves the state as it was.
                continue
            when = None if times is None or not math.isfinite(float(times[t])) else float(times[t])
            step = advance(control.chain, state, when, world[t])
            simulated[t] = step.points
            reset[t] = step.reset
            recomputed[t] = step.recomputed
            substeps[t] = step.substeps
        # Every frame usable is the live case: spare it the masking (numpy's per-call overhead).
        all_usable = bool(usable.all())
        inv = np.linalg.inv(places if all_usable else np.where(usable[:, None, None], places, np.eye(4)))
        points = np.einsum("tij,tkj->tki", inv[:, :3, :3], simulated) + inv[:, None, :3, 3]
        if not all_usable:
            points = np.where(usable[:, None, None], points, animated)
        rot, got, _ = kin.rotations_from_points(points)
        # The miss per point and the segment lengths before and after, in one norm call (the
        # same per-row arithmetic as three).
        n = animated.shape[1] - 1
        norms = np.linalg.norm(
            np.concatenate([got - points, np.diff(animated, axis=1), np.diff(got, axis=1)], axis=1), axis=-1
        )
        residual = norms[:, : n + 1].max(axis=1)
        before, after = norms[:, n + 1 : 2 * n + 1], norms[:, 2 * n + 1 :]
        length_error = (np.abs(after - before) / np.maximum(before, 1e-300)).max(axis=1)
        report = ControlReport(
            name=control.name,
            ran=usable,
            skipped=~usable,
            residual=residual,
            iterations=substeps,
            converged=usable,
            limited=np.zeros(frames, dtype=bool),
            details=MappingProxyType(
                {"reset": reset, "recomputed": recomputed, "length_error": length_error, "points": points}
            ),
        )
        return _Output(rot if all_usable else np.where(usable[:, None, None], rot, np.nan), None, report)

    def _run_closure(self, control: ClosureControl, st: _State, pose: PoseBuffers, dts: FloatArray | None) -> _Output:
        assert st.target is not None and st.second is not None
        frames = pose.frames
        first = np.broadcast_to(self._member_inputs(control, st, "target", st.target, frames, dts), (frames, 3))
        second = np.broadcast_to(self._member_inputs(control, st, "second", st.second, frames, dts), (frames, 3))
        valid = np.isfinite(first).all(axis=1) & np.isfinite(second).all(axis=1)
        solve = solve_closure(
            self.stack.skeleton,
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
        return _Output(candidate, None, report)


def _run_inherit(control: InheritControl, pose: PoseBuffers) -> _Output:
    rot, tr = inherit(control.inheritance, pose.rotations, pose.translations)
    frames = pose.frames
    yes = np.ones(frames, dtype=bool)
    report = ControlReport(
        control.name, yes, ~yes, np.zeros(frames), np.ones(frames, dtype=np.int64), yes.copy(), ~yes
    )
    return _Output(rot, tr if control.moved else None, report)


def _run_fixed_axis(control: FixedAxisControl, pose: PoseBuffers) -> _Output:
    joints = list(control.axes.joints)
    rot = twist_about(pose.rotations[:, joints], control.axes.axes)
    frames = pose.frames
    yes = np.ones(frames, dtype=bool)
    report = ControlReport(
        control.name, yes, ~yes, np.zeros(frames), np.ones(frames, dtype=np.int64), yes.copy(), ~yes
    )
    return _Output(rot, None, report)


def _column_masks(masks: list[tuple[BoolArray | None, int]], frames: int) -> BoolArray:
    """Per-frame masks of consecutive column runs ``(mask (T,) or None = all frames, width)``
    laid out ``(T, C)``."""
    full = np.ones(frames, dtype=bool)
    return np.concatenate(
        [np.broadcast_to((full if m is None else m)[:, None], (frames, w)) for m, w in masks], axis=1
    )


def _idle_report(name: str, frames: int) -> ControlReport:
    no = np.zeros(frames, dtype=bool)
    return ControlReport(name, no, no.copy(), np.zeros(frames), np.zeros(frames, dtype=np.int64), no.copy(), no.copy())
