"""Spring chains as the control stack runs them (docs/controls.md#springs): the definition, the per-instance
simulation state and the batched run of consecutive chains of as many joints (each steps on its
own, their path kinematics and writeback shared). The simulation is in :mod:`core.controls.springs`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ...rig.rotations import FloatArray
from ..chains import PathKinematics, PoseBuffers
from ..colliders import Collider, Placed, place, place_one
from ..springs import SpringChain, SpringSnapshot, SpringState, SpringStep, advance_rows
from .base import Candidate, ControlKind, ControlReport, ControlState, Evaluation, check_common, independent


@dataclass(frozen=True)
class SpringControl(ControlKind):
    """A spring chain (docs/controls.md#springs); its state lives in each instance."""

    needs_time: ClassVar[bool] = True
    needs_placement: ClassVar[bool] = True

    name: str
    chain: SpringChain
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.chain.path.joints

    def joins(self, group: Sequence[ControlKind]) -> bool:
        """Consecutive spring chains of as many joints, none writing a joint another one reads,
        share their path kinematics and writeback (each still simulates on its own)."""
        return all(
            isinstance(o, SpringControl) and len(o.chain.path) == len(self.chain.path)
            and independent(o.written, o.chain.path, self.written, self.chain.path)
            for o in group
        )

    def snapshot(self, state: ControlState) -> SpringSnapshot | None:
        """The state this spring holds in an instance after its last frame (``None`` before any)."""
        rt = state.runtime
        return rt.current if isinstance(rt, SpringState) else None

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        """Simulate a group of independent spring chains of as many joints: each chain steps on
        its own, their path kinematics and writeback go in one batched call (rows member-major,
        ``frames`` rows per member, as for IK groups)."""
        pose, times, places = ev.pose, ev.times, ev.places
        springs = [c for c in group if isinstance(c, SpringControl)]
        count = len(springs)
        frames = pose.frames
        kin = PathKinematics(ev.skeleton, [c.chain.path for c in springs], pose)
        animated = kin.points()
        if frames == 1 and all(c.chain.center < 0 for c in springs):
            one = _springs_one(springs, states, kin, animated, times, places, ev.inverse, pose)
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
        deep = [[0.0] * frames for _ in range(count)]
        deep_steps = [[0.0] * frames for _ in range(count)]
        clock = [None if t is None or not math.isfinite(t) else t for t in ([None] * frames if times is None else times.tolist())]
        # The chains simulated in the world share their colliders' placement (one call).
        world_chains = [m for m, c in enumerate(springs) if c.chain.center < 0]
        shared = dict(zip(world_chains, group_placed([springs[m].chain for m in world_chains], pose, places), strict=True))
        for m, c in enumerate(springs):
            st = states[m]
            state = st.runtime if isinstance(st.runtime, SpringState) else SpringState()
            st.runtime = state
            frame = places
            turns: list[list[list[float]] | None] = [None] * frames
            center: FloatArray | None = None
            if c.chain.center >= 0:
                # Simulated in the center bone's frame: the inputs taken into it, the result out.
                center = places @ pose.world(c.chain.center)
                usable[m] &= np.isfinite(center).all(axis=(1, 2)) & (np.abs(np.linalg.det(center[:, :3, :3])) > 1e-12)
                safe_center = np.where(usable[m][:, None, None], center, np.eye(4))
                to_center = np.linalg.inv(safe_center)
                frame = to_center @ places
                lin = to_center[:, :3, :3]
                turns = list((lin / np.linalg.norm(lin, axis=1, keepdims=True)).tolist())
                rows = (np.einsum("tij,tkj->tki", lin, world[m]) + to_center[:, None, :3, 3]).tolist()
            else:
                rows = world[m].tolist()
            ok = usable[m].tolist()
            placed = shared[m] if m in shared else placed_colliders(c.chain, pose, frame)
            for t in range(frames):
                if not ok[t] or (placed[t] and not _finite(placed[t])):
                    # A non-finite input frame is skipped and leaves the state as it was.
                    usable[m, t] = False
                    continue
                step = advance_rows(c.chain, state, clock[t], rows[t], placed[t], turns[t])
                simulated[m, t] = step.points if center is None else step.points @ center[t, :3, :3].T + center[t, :3, 3]
                resets[m][t] = step.reset
                again[m][t] = step.recomputed
                steps[m][t] = step.substeps
                deep[m][t] = step.deepest
                deep_steps[m][t] = max(step.penetration, default=step.deepest)
        reset = np.array(resets, dtype="<U10")
        recomputed = np.array(again, dtype=bool)
        substeps = np.array(steps, dtype=np.int64)
        penetration = np.array(deep)
        step_penetration = np.array(deep_steps)
        # Every frame usable is the live case: spare it the masking (numpy's per-call overhead).
        all_usable = bool(usable.all())
        safe = places if all_usable else np.where(np.isfinite(places).all(axis=(1, 2))[:, None, None], places, np.eye(4))
        inv = ev.inverse(safe)
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
        out: list[Candidate] = []
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
                    {
                        "reset": reset[m], "recomputed": recomputed[m], "length_error": length_error[m], "points": points[m],
                        "penetration": penetration[m], "step_penetration": step_penetration[m],
                    }
                ),
            )
            out.append(Candidate(rot[m], None, report))
        return out


def placed_colliders(chain: SpringChain, pose: PoseBuffers, places: FloatArray) -> list[list[Placed]]:
    """The chain's colliders placed in world space at each frame of ``pose`` (their joints'
    placements on the pose the chain reads, the object's placements ``places`` applied)."""
    return group_placed([chain], pose, places)[0]


def group_placed(chains: Sequence[SpringChain], pose: PoseBuffers, places: FloatArray) -> list[list[list[Placed]]]:
    """:func:`placed_colliders` of several chains simulated in the same frame ``places``: the
    colliders they share (chains on one character mostly collide with the same body) placed
    once, in one call. Per chain, per frame."""
    union: list[Collider] = []
    index: dict[int, int] = {}
    rows: list[list[int]] = []
    for chain in chains:
        row = []
        for c in chain.colliders:
            i = index.get(id(c))
            if i is None:
                i = index[id(c)] = len(union)
                union.append(c)
            row.append(i)
        rows.append(row)
    if not union:
        return [[[] for _ in range(pose.frames)] for _ in chains]
    if pose.frames == 1:
        one = place_one(union, *_joint_placements(union, pose, places[0].tolist()))
        return [[[one[i] for i in row]] for row in rows]
    mats = np.stack([pose.world(c.joint) for c in union], axis=1)
    placed = place(union, places[:, None] @ mats)
    return [[[at[i] for i in row] for at in placed] for row in rows]


def _joint_placements(
    colliders: Sequence[Collider], pose: PoseBuffers, place: list[list[float]]
) -> tuple[list[list[list[float]]], list[float]]:
    """Each collider's joint placement at a one-frame ``pose`` in world space (the top three
    rows of ``place @ world``) and its uniform scale (the cube root of the determinant), in plain
    floats: a live frame's few 4 x 4 products cost more per numpy call than their arithmetic."""
    rows: dict[int, list[list[float]]] = {}
    scales: dict[int, float] = {}
    for c in colliders:
        j = c.joint
        if j in rows:
            continue
        w = pose.world(j)[0].tolist()
        w0, w1, w2, w3 = w
        m = [
            [p[0] * w0[k] + p[1] * w1[k] + p[2] * w2[k] + p[3] * w3[k] for k in range(4)]
            for p in place[:3]
        ]
        (a, b, c_), (d, e, f), (g, h, i) = m[0][:3], m[1][:3], m[2][:3]
        rows[j] = m
        scales[j] = math.cbrt(abs(a * (e * i - f * h) - b * (d * i - f * g) + c_ * (d * h - e * g)))
    return [rows[c.joint] for c in colliders], [scales[c.joint] for c in colliders]


def _finite(placed: list[Placed]) -> bool:
    return all(math.isfinite(sum(c[1:])) for c in placed)


def _springs_one(
    springs: list[SpringControl],
    states: Sequence[ControlState],
    kin: PathKinematics,
    animated: FloatArray,
    times: FloatArray | None,
    places: FloatArray,
    inverse: Callable[[FloatArray], FloatArray],
    kin_pose: PoseBuffers,
) -> list[Candidate] | None:
    """:meth:`SpringControl.run` of one frame, its arithmetic in plain floats: the same steps, on
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
    inv = inverse(places)[0].tolist()
    placed = [p[0] for p in group_placed([c.chain for c in springs], kin_pose, places)]
    if not all(_finite(p) for p in placed):
        return None
    local: list[list[list[float]]] = []
    steps: list[SpringStep] = []
    for m, c in enumerate(springs):
        st = states[m]
        state = st.runtime if isinstance(st.runtime, SpringState) else SpringState()
        st.runtime = state
        step = advance_rows(c.chain, state, clock, world[m], placed[m])
        steps.append(step)
        local.append([[r[0] * x + r[1] * y + r[2] * z + r[3] for r in inv[:3]] for x, y, z in step.points.tolist()])
    points = np.array(local)
    rot, got_array, _ = kin.rotations_from_points(points)
    got = got_array.tolist()
    out: list[Candidate] = []
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
                    "penetration": np.array([step.deepest]),
                    "step_penetration": np.array([max(step.penetration, default=step.deepest)]),
                }
            ),
        )
        out.append(Candidate(rot[m : m + 1], None, report))
    return out


def _dist(a: Sequence[float], b: Sequence[float]) -> float:
    x, y, z = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return math.sqrt(x * x + y * y + z * z)
