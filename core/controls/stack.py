"""The control stack: procedural controls that adjust an animated pose, in priority order.

Conventions: poses are local rotations ``(T, B, 4)`` (w-first unit quaternions, the rotation of
each joint's local transform in :mod:`core.rig.skeleton`), translations ``(T, B, 3)`` and optional
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
one batched call; the result is the same as running them one after the other. Consecutive spring
chains of as many joints likewise share their path kinematics and writeback (each still steps
on its own).

Control kinds: IK chains and look-at (SPEC 7.2-7.3), ground adaptation (7.4, :mod:`core.controls.ground`),
spring chains (7.5, :mod:`core.controls.springs`), bone inheritance and fixed axes (7.6,
:mod:`core.controls.inheritance`) and diamond closures (7.7, :mod:`core.controls.closure`). A control may change
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..rig.rotations import FloatArray, quat_normalize, quat_slerp
from ..rig.skeleton import Skeleton
from .chains import JointPath, Lineage, PathKinematics, PoseBuffers, end_rotations
from .closure import STOP_REASONS, DiamondClosure, solve_closure
from .ground import GroundMemory, GroundRig, RayCast, adapt_to_ground
from .ik import DEFAULT_MAX_PASSES, DEFAULT_TOLERANCE, SOLVERS, solve_path_ik
from .inheritance import FixedAxes, Inheritance, inherit, twist_about
from .joint_limits import JointLimit
from .look_at import LookAtChain, look_at
from .springs import SpringChain, SpringSnapshot, SpringState, SpringStep, advance_rows

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
        return tuple(self.chain.path.joints[k] for k in self.chain.turning)

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


def _reads(path: JointPath) -> set[int]:
    return set(path.joints) | set(path.ancestors) | ({path.end_joint} if path.end_joint >= 0 else set())


def _independent(a: IKControl | SpringControl, b: IKControl | SpringControl) -> bool:
    """Neither of two path controls writes a joint the other reads."""
    pa = a.path if isinstance(a, IKControl) else a.chain.path
    pb = b.path if isinstance(b, IKControl) else b.chain.path
    return not (set(a.written) & _reads(pb)) and not (set(b.written) & _reads(pa))


def _batch_groups(controls: Sequence[Control]) -> tuple[tuple[int, ...], ...]:
    """Consecutive two-bone controls with the same settings, none writing a joint another one
    reads, are solved together: the same result as one after the other, in one batched call.
    Likewise consecutive spring chains of as many joints (each simulates on its own; their
    path kinematics and writeback are batched)."""
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
                and all(isinstance(o, IKControl) and _independent(o, c) for o in prev)
            ):
                groups[-1].append(i)
                continue
        if groups and isinstance(c, SpringControl):
            prev = [controls[j] for j in groups[-1]]
            if all(
                isinstance(o, SpringControl) and len(o.chain.path) == len(c.chain.path) and _independent(o, c)
                for o in prev
            ):
                groups[-1].append(i)
                continue
        groups.append([i])
    return tuple(tuple(g) for g in groups)


class ControlStack:
    """Shared, immutable definition: a skeleton, its controls in run order and the prebuilt
    joint -> controls table. Build a new stack to change it; instances keep the one they got."""

    __slots__ = (
        "skeleton", "controls", "_index", "groups", "joint_controls", "needs_time", "needs_placement", "lineage",
        "written", "moved", "_layouts", "_sealed",
    )

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
        #: The skeleton's parents and ancestor masks, for the working pose's placement cache.
        self.lineage = Lineage.of(skeleton)
        #: Per control (run order), the joints it may rotate and move (the properties, taken once).
        self.written: tuple[tuple[int, ...], ...] = tuple(c.written for c in self.controls)
        self.moved: tuple[tuple[int, ...], ...] = tuple(c.moved for c in self.controls)
        #: Column layouts of the groups' blends by the members that ran (filled as they occur).
        self._layouts: dict[tuple[int, ...], _Layout] = {}
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

    def layout(self, active: tuple[int, ...]) -> _Layout:
        """Where the candidates of the group members ``active`` go in the pose."""
        hit = self._layouts.get(active)
        if hit is None:
            hit = self._layouts[active] = _Layout.of([self.written[i] for i in active], [self.moved[i] for i in active])
        return hit


@dataclass(frozen=True)
class _Layout:
    """The joints a group's candidates write, side by side in member order: which members
    rotate (``rot_members``) and move (``tr_members``), the joints (a list for the pose's
    bookkeeping, an index array for numpy) and each member's column count."""

    rot_members: tuple[int, ...]
    rot_cols: list[int]
    rot_index: NDArray[np.intp]
    rot_widths: tuple[int, ...]
    tr_members: tuple[int, ...]
    tr_cols: list[int]
    tr_index: NDArray[np.intp]
    tr_widths: tuple[int, ...]

    @classmethod
    def of(cls, written: list[tuple[int, ...]], moved: list[tuple[int, ...]]) -> _Layout:
        rot_m = tuple(m for m, w in enumerate(written) if w)
        tr_m = tuple(m for m, w in enumerate(moved) if w)
        rot_cols = [j for m in rot_m for j in written[m]]
        tr_cols = [j for m in tr_m for j in moved[m]]
        return cls(
            rot_m, rot_cols, np.array(rot_cols, dtype=np.intp), tuple(len(written[m]) for m in rot_m),
            tr_m, tr_cols, np.array(tr_cols, dtype=np.intp), tuple(len(moved[m]) for m in tr_m),
        )


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

    __slots__ = ("stack", "_states", "_clock", "_inverse")

    def __init__(self, stack: ControlStack) -> None:
        self.stack = stack
        self._states = [_State(enabled=True, weight=c.weight) for c in stack.controls]
        #: Scene time of the last evaluated frame, when known.
        self._clock: float | None = None
        #: The last placements inverted, and their bytes (see _inverse_of).
        self._inverse: tuple[bytes, FloatArray] | None = None

    def _inverse_of(self, places: FloatArray) -> FloatArray:
        """``inv(places)``, taken again only when the placements changed: a character standing
        still keeps its matrix frame after frame, and a 4 x 4 inverse costs as much as a few
        dozen small products."""
        key = places.tobytes()
        if self._inverse is None or self._inverse[0] != key:
            self._inverse = (key, np.linalg.inv(places))
        return self._inverse[1]

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
        """The ground query of a ground control (see :mod:`core.controls.ground`; ``None`` idles it)."""
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
            given = np.asarray(time, dtype=np.float64)
            times = given.reshape(-1).copy() if given.size == frames else np.array(np.broadcast_to(given, (frames,)))
            previous = math.nan if self._clock is None else self._clock
            dts = np.empty(frames)
            if frames:
                dts[0] = times[0] - previous
                dts[1:] = times[1:] - times[:-1]
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
        pose = PoseBuffers(sk, rotations, translations, scales, lineage=self.stack.lineage)
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
                outputs = self._run_springs(active, pose, times, places)
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
        lay = self.stack.layout(tuple(active))
        weights = [self._states[ci].weight for ci in active]
        if frames == 1 and _apply_one(lay, weights, outputs, pose, cov):
            return [o.report for o in outputs]
        moves = [outputs[m].translations for m in lay.tr_members]
        rot_cand = _joined([outputs[m].rotations for m in lay.rot_members])
        tr_cand = _joined([t for t in moves if t is not None])
        if len(moves) != sum(t is not None for t in moves):
            raise RigError("a control that moves joints gave no translations")
        # The usual frame: every candidate finite and no control skipped it. One reduction per
        # array for the whole group (a live frame pays per numpy call), the per-frame masks
        # only when that fails.
        skipped = _joined([o.report.skipped for o in outputs], axis=0)
        usable = (
            not skipped.any()
            and (rot_cand is None or bool(np.isfinite(rot_cand).all()))
            and (tr_cand is None or bool(np.isfinite(tr_cand).all()))
        )
        # None marks "every frame usable", so the report stands as is.
        oks: list[BoolArray | None] = [None] * len(outputs)
        if not usable:
            for m, out in enumerate(outputs):
                ok = ~out.report.skipped & np.isfinite(out.rotations).all(axis=(1, 2))
                if out.translations is not None:
                    ok &= np.isfinite(out.translations).all(axis=(1, 2))
                oks[m] = None if ok.all() else ok
        partial = any(o is not None for o in oks)
        if rot_cand is not None:
            w = [weights[m] for m, width in zip(lay.rot_members, lay.rot_widths, strict=True) for _ in range(width)]
            masks = _column_masks([(oks[m], k) for m, k in zip(lay.rot_members, lay.rot_widths, strict=True)], frames) if partial else None
            _blend(pose.rotations, cov, lay.rot_cols, lay.rot_index, rot_cand, w, masks, pose.set_rotations, rotation=True)
        if tr_cand is not None:
            w = [weights[m] for m, width in zip(lay.tr_members, lay.tr_widths, strict=True) for _ in range(width)]
            masks = _column_masks([(oks[m], k) for m, k in zip(lay.tr_members, lay.tr_widths, strict=True)], frames) if partial else None
            _blend(pose.translations, cov, lay.tr_cols, lay.tr_index, tr_cand, w, masks, pose.set_translations, rotation=False)
        if not partial:
            return [o.report for o in outputs]
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

    def _run_springs(
        self, members: list[int], pose: PoseBuffers, times: FloatArray | None, places: FloatArray
    ) -> list[_Output]:
        """Simulate a group of independent spring chains of as many joints: each chain steps on
        its own, their path kinematics and writeback go in one batched call (rows member-major,
        ``frames`` rows per member, as for IK groups)."""
        springs = [c for c in (self.stack.controls[i] for i in members) if isinstance(c, SpringControl)]
        count = len(springs)
        frames = pose.frames
        kin = PathKinematics(self.stack.skeleton, [c.chain.path for c in springs], pose)
        animated = kin.points()
        if frames == 1:
            one = self._springs_one(springs, members, kin, animated, times, places)
            if one is not None:
                return one
        points_n = animated.shape[1]
        by_member = animated.reshape(count, frames, points_n, 3)
        lin = places[:, :3, :3]
        world = np.einsum("tij,mtkj->mtki", lin, by_member) + places[None, :, None, :3, 3]
        usable = np.isfinite(world).all(axis=(2, 3)) & np.isfinite(places).all(axis=(1, 2))[None]
        simulated = world.copy()
        # Per member and frame, gathered as Python values and turned into arrays once.
        resets = [[""] * frames for _ in range(count)]
        again = [[False] * frames for _ in range(count)]
        steps = [[0] * frames for _ in range(count)]
        clock = [None if t is None or not math.isfinite(t) else t for t in ([None] * frames if times is None else times.tolist())]
        for m, c in enumerate(springs):
            st = self._states[members[m]]
            state = st.runtime if isinstance(st.runtime, SpringState) else SpringState()
            st.runtime = state
            rows = world[m].tolist()
            ok = usable[m].tolist()
            for t in range(frames):
                if not ok[t]:
                    # A non-finite input frame is skipped and leaves the state as it was.
                    continue
                step = advance_rows(c.chain, state, clock[t], rows[t])
                simulated[m, t] = step.points
                resets[m][t] = step.reset
                again[m][t] = step.recomputed
                steps[m][t] = step.substeps
        reset = np.array(resets, dtype="<U10")
        recomputed = np.array(again, dtype=bool)
        substeps = np.array(steps, dtype=np.int64)
        # Every frame usable is the live case: spare it the masking (numpy's per-call overhead).
        all_usable = bool(usable.all())
        safe = places if all_usable else np.where(np.isfinite(places).all(axis=(1, 2))[:, None, None], places, np.eye(4))
        inv = self._inverse_of(safe)
        points = np.einsum("tij,mtkj->mtki", inv[:, :3, :3], simulated) + inv[None, :, None, :3, 3]
        if not all_usable:
            points = np.where(usable[..., None, None], points, by_member)
        rot, got, _ = kin.rotations_from_points(points.reshape(count * frames, points_n, 3))
        # The miss per point and the segment lengths before and after, in one norm call (the
        # same per-row arithmetic as three).
        n = points_n - 1
        flat = points.reshape(count * frames, points_n, 3)
        norms = np.linalg.norm(
            np.concatenate([got - flat, np.diff(animated, axis=1), np.diff(got, axis=1)], axis=1), axis=-1
        )
        residual = norms[:, : n + 1].max(axis=1).reshape(count, frames)
        before, after = norms[:, n + 1 : 2 * n + 1], norms[:, 2 * n + 1 :]
        length_error = (np.abs(after - before) / np.maximum(before, 1e-300)).max(axis=1).reshape(count, frames)
        rot = rot.reshape(count, frames, n, 4)
        if not all_usable:
            rot = np.where(usable[..., None, None], rot, np.nan)
        out: list[_Output] = []
        for m, c in enumerate(springs):
            report = ControlReport(
                name=c.name,
                ran=usable[m],
                skipped=~usable[m],
                residual=residual[m],
                iterations=substeps[m],
                converged=usable[m],
                limited=np.zeros(frames, dtype=bool),
                details=MappingProxyType(
                    {"reset": reset[m], "recomputed": recomputed[m], "length_error": length_error[m], "points": points[m]}
                ),
            )
            out.append(_Output(rot[m], None, report))
        return out

    def _springs_one(
        self,
        springs: list[SpringControl],
        members: list[int],
        kin: PathKinematics,
        animated: FloatArray,
        times: FloatArray | None,
        places: FloatArray,
    ) -> list[_Output] | None:
        """:meth:`_run_springs` of one frame, its arithmetic in plain floats: the same steps, on
        arrays so small that each numpy call costs more than its arithmetic. ``None`` (before any
        state is touched) for a frame with a non-finite input, which the general route masks."""
        place = places[0].tolist()
        if not all(math.isfinite(v) for row in place for v in row):
            return None
        anim: list[list[list[float]]] = animated.tolist()
        world: list[list[list[float]]] = []
        for pts in anim:
            rows = []
            for p in pts:
                x, y, z = p
                w = [r[0] * x + r[1] * y + r[2] * z + r[3] for r in place[:3]]
                if not (math.isfinite(w[0]) and math.isfinite(w[1]) and math.isfinite(w[2])):
                    return None
                rows.append(w)
            world.append(rows)
        t = None if times is None else float(times[0])
        clock = None if t is None or not math.isfinite(t) else t
        inv = self._inverse_of(places)[0].tolist()
        local: list[list[list[float]]] = []
        steps: list[SpringStep] = []
        for m, c in enumerate(springs):
            st = self._states[members[m]]
            state = st.runtime if isinstance(st.runtime, SpringState) else SpringState()
            st.runtime = state
            step = advance_rows(c.chain, state, clock, world[m])
            steps.append(step)
            local.append([[r[0] * x + r[1] * y + r[2] * z + r[3] for r in inv[:3]] for x, y, z in step.points.tolist()])
        points = np.array(local)
        rot, got_array, _ = kin.rotations_from_points(points)
        got = got_array.tolist()
        out: list[_Output] = []
        for m, c in enumerate(springs):
            g, q, a = got[m], local[m], anim[m]
            residual = max(_dist(g[k], q[k]) for k in range(len(q)))
            length_error = max(
                abs(_dist(g[k + 1], g[k]) - before) / max(before, 1e-300)
                for k, before in ((k, _dist(a[k + 1], a[k])) for k in range(len(a) - 1))
            )
            step = steps[m]
            report = ControlReport(
                name=c.name,
                ran=np.ones(1, dtype=bool),
                skipped=np.zeros(1, dtype=bool),
                residual=np.array([residual]),
                iterations=np.array([step.substeps], dtype=np.int64),
                converged=np.ones(1, dtype=bool),
                limited=np.zeros(1, dtype=bool),
                details=MappingProxyType(
                    {
                        "reset": np.array([step.reset], dtype="<U10"),
                        "recomputed": np.array([step.recomputed]),
                        "length_error": np.array([length_error]),
                        "points": points[m : m + 1],
                    }
                ),
            )
            out.append(_Output(rot[m : m + 1], None, report))
        return out

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


def _dist(a: Sequence[float], b: Sequence[float]) -> float:
    x, y, z = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return math.sqrt(x * x + y * y + z * z)


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


def _joined(arrays: list[FloatArray] | list[BoolArray], axis: int = 1) -> Any:
    """The arrays side by side along ``axis`` (``None`` for none; one is used as it is)."""
    if not arrays:
        return None
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=axis)


def _blend(
    values: FloatArray,
    cov: FloatArray,
    cols: list[int],
    index: NDArray[np.intp],
    cand: FloatArray,
    weights: list[float],
    masks: BoolArray | None,
    write: Callable[..., None],
    rotation: bool,
) -> None:
    """Blend candidates ``(T, C, w)`` of columns ``cols`` (``index`` the same as an array) into
    ``values`` (through ``write``) by their weights, where they differ from the current values
    (and ``masks`` allows), and raise those columns' coverage to the weights.

    The usual live frame changes every column at full weight: it writes the candidates as they
    are, which is what the masked blend gives then, in a third of the numpy calls."""
    old = values[:, index]
    changed = (cand != old).any(axis=-1)
    if masks is not None:
        changed &= masks
    full = min(weights) >= 1.0
    if changed.all():
        w = np.array(weights)
        write(cols, cand if full else _weighted(old, cand, w, rotation), index=index)
        cov[:, index] = np.maximum(cov[:, index], w)
        return
    if not changed.any():
        return
    w = np.array(weights)
    blended = cand if full else _weighted(old, cand, w, rotation)
    write(cols, np.where(changed[..., None], blended, old), index=index)
    before = cov[:, index]
    cov[:, index] = np.where(changed, np.maximum(before, w), before)


def _apply_one(lay: _Layout, weights: list[float], outputs: list[_Output], pose: PoseBuffers, cov: FloatArray) -> bool:
    """:meth:`ControlInstance._apply` of one frame where every candidate is usable at full
    weight (the usual live frame), in plain floats: the same values written and the same
    coverage; ``False`` (nothing done) for the other cases, which take the general route."""
    if min(weights) < 1.0 or any(bool(o.report.skipped[0]) for o in outputs):
        return False
    moves = [outputs[m].translations for m in lay.tr_members]
    rot_rows: list[list[float]] = [r for m in lay.rot_members for r in outputs[m].rotations[0].tolist()]
    tr_rows: list[list[float]] = []
    for t in moves:
        if t is None:
            return False
        tr_rows.extend(t[0].tolist())
    if not all(math.isfinite(v) for rows in (rot_rows, tr_rows) for row in rows for v in row):
        return False
    if rot_rows:
        _blend_one(pose.rotations, cov, lay.rot_cols, lay.rot_index, rot_rows, [weights[m] for m, width in zip(lay.rot_members, lay.rot_widths, strict=True) for _ in range(width)], pose.set_rotations)
    if tr_rows:
        _blend_one(pose.translations, cov, lay.tr_cols, lay.tr_index, tr_rows, [weights[m] for m, width in zip(lay.tr_members, lay.tr_widths, strict=True) for _ in range(width)], pose.set_translations)
    return True


def _blend_one(
    values: FloatArray,
    cov: FloatArray,
    cols: list[int],
    index: NDArray[np.intp],
    rows: list[list[float]],
    weights: list[float],
    write: Callable[..., None],
) -> None:
    """:func:`_blend` of one frame at full weight: candidates written where they differ from
    the current values, coverage raised to the weights there."""
    old: list[list[float]] = values[0, index].tolist()
    changed = [a != b for a, b in zip(rows, old, strict=True)]
    if not any(changed):
        return
    if not all(changed):
        rows = [a if c else b for a, b, c in zip(rows, old, changed, strict=True)]
    write(cols, np.array([rows]), index=index)
    before: list[float] = cov[0, index].tolist()
    cov[0, index] = [max(b, w) if c else b for b, w, c in zip(before, weights, changed, strict=True)]


def _weighted(old: FloatArray, cand: FloatArray, w: FloatArray, rotation: bool) -> FloatArray:
    """Each column moved from ``old`` toward ``cand`` by its weight ``w`` ``(C,)``: slerp for
    rotations, linear for translations; weight 1 gives the candidate itself."""
    if rotation:
        out: FloatArray = np.where((w >= 1.0)[:, None], cand, quat_slerp(old, cand, w))
    else:
        out = np.where((w >= 1.0)[:, None], cand, old + w[:, None] * (cand - old))
    return out


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
