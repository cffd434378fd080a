"""The control stack: procedural controls that adjust an animated pose, in priority order.

Conventions: poses are local rotations ``(T, B, 4)`` (w-first unit quaternions, the rotation of
each joint's local transform in :mod:`core.rig.skeleton`), translations ``(T, B, 3)`` and optional
scales, frames first, float64. Targets are skeleton-space points; orientations skeleton-space
quaternions. Times are seconds.

Definitions and state are apart (docs/controls.md#definitions-and-instances). A :class:`ControlStack` (the skeleton, its control
definitions in run order, the prebuilt joint -> controls table) is immutable and may be shared
by any number of armature objects. Each object owns a :class:`ControlInstance`: targets, enable
flags, weights, smoothing memory, solver warm starts and the last reports. Two instances of one
stack never see each other's state.

One evaluation (docs/controls.md#the-stack): enabled controls with positive weight run in ascending priority
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

Control kinds: IK chains and look-at (docs/controls.md#ik-chains, docs/controls.md#look-at), ground adaptation (docs/controls.md#ground-feet, :mod:`core.controls.ground`),
spring chains (docs/controls.md#springs, :mod:`core.controls.springs`), bone inheritance and fixed axes (docs/controls.md#inheritance-and-fixed-axes,
:mod:`core.controls.inheritance`) and diamond closures (docs/controls.md#closure, :mod:`core.controls.closure`). Each kind's
definition and run live in :mod:`core.controls.kinds` (the behaviour the stack calls is
:class:`~core.controls.kinds.base.ControlKind`); this module orders the controls, batches them,
keeps each instance's state and reports, and blends the candidates (:mod:`core.controls.blend`). A control may change
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
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError
from ..rig.rotations import FloatArray, quat_normalize
from ..rig.skeleton import Skeleton
from .blend import Layout, apply_group
from .chains import Lineage, PoseBuffers
from .ground import RayCast
from .kinds.base import Candidate, ControlReport, ControlState, Evaluation, idle_report
from .kinds.closure import ClosureControl
from .kinds.ground import GroundControl
from .kinds.ik_look_at import LOOK_AT_TOLERANCE, IKControl, LookAtControl
from .kinds.inheritance import FixedAxisControl, InheritControl
from .kinds.springs import SpringControl
from .springs import SpringSnapshot

__all__ = [
    "LOOK_AT_TOLERANCE", "ClosureControl", "Control", "ControlInstance", "ControlReport", "ControlStack", "ControlStatus",
    "FixedAxisControl", "GroundControl", "IKControl", "InheritControl", "LookAtControl", "SpringControl", "StackResult",
]

#: Every control kind the stack runs.
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


def _batch_groups(controls: Sequence[Control]) -> tuple[tuple[int, ...], ...]:
    """Runs of consecutive controls solved in one batched call: each control says whether it
    joins the run before it (two-bone limbs with the same settings, spring chains of as many
    joints, none writing a joint another one reads)."""
    groups: list[list[int]] = []
    for i, c in enumerate(controls):
        if groups and c.joins([controls[j] for j in groups[-1]]):
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
        self.needs_time: bool = any(c.needs_time for c in self.controls)
        self.needs_placement: bool = any(c.needs_placement for c in self.controls)
        #: The skeleton's parents and ancestor masks, for the working pose's placement cache.
        self.lineage = Lineage.of(skeleton)
        #: Per control (run order), the joints it may rotate and move (the properties, taken once).
        self.written: tuple[tuple[int, ...], ...] = tuple(c.written for c in self.controls)
        self.moved: tuple[tuple[int, ...], ...] = tuple(c.moved for c in self.controls)
        #: Column layouts of the groups' blends by the members that ran (filled as they occur).
        self._layouts: dict[tuple[int, ...], Layout] = {}
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

    def layout(self, active: tuple[int, ...]) -> Layout:
        """Where the candidates of the group members ``active`` go in the pose."""
        hit = self._layouts.get(active)
        if hit is None:
            hit = self._layouts[active] = Layout.of([self.written[i] for i in active], [self.moved[i] for i in active])
        return hit


@dataclass(frozen=True)
class StackResult:
    rotations: FloatArray
    translations: FloatArray
    scales: FloatArray | None
    coverage: FloatArray
    reports: Mapping[str, ControlReport]


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
        self._states = [ControlState(enabled=True, weight=c.weight) for c in stack.controls]
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

    def _state(self, name: str) -> ControlState:
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
        if control.feed != "target":
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
        if self.stack.control(name).feed != "closure":
            raise RigError(f"control {name!r} is not a closure")
        st = self._state(name)
        st.target = _vector_input(first, 3, f"first target of {name!r}")
        st.second = _vector_input(second, 3, f"second target of {name!r}")

    def set_ground(self, name: str, ray_cast: RayCast | None) -> None:
        """The ground query of a ground control (see :mod:`core.controls.ground`; ``None`` idles it)."""
        if self.stack.control(name).feed != "ground":
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
        control = self.stack.control(name)
        if not isinstance(control, SpringControl):
            raise RigError(f"control {name!r} is not a spring")
        return control.snapshot(self._state(name))

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
        ev = Evaluation(sk, pose, dts, times, places, self._inverse_of)
        for group in self.stack.groups:
            active: list[int] = []
            for ci in group:
                control, st = self.stack.controls[ci], self._states[ci]
                if not (st.enabled and st.weight > 0.0 and control.ready(st)):
                    reports[control.name] = idle_report(control.name, frames)
                else:
                    active.append(ci)
            if not active:
                continue
            outputs: list[Candidate] = self.stack.controls[active[0]].run(
                [self.stack.controls[ci] for ci in active], [self._states[ci] for ci in active], ev
            )
            lay = self.stack.layout(tuple(active))
            weights = [self._states[ci].weight for ci in active]
            for ci, out in zip(active, apply_group(lay, weights, outputs, pose, cov), strict=True):
                self._states[ci].report = out
                reports[out.name] = out
        return StackResult(
            rotations=pose.rotations,
            translations=pose.translations,
            scales=pose.scales,
            coverage=cov,
            reports=MappingProxyType({c.name: reports[c.name] for c in self.stack.controls}),
        )
