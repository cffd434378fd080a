"""Spring chains (docs/controls.md#springs): segments that lag behind and swing about the animated pose.

Conventions: the simulation runs in *world* space (the armature object's placement applied), so
moving the object drives the springs as moving a bone does; gravity is a world vector (Blender:
+Z up, default ``(0, 0, -9.81)`` units/s^2). Times are seconds. A chain is a
:class:`core.controls.chains.JointPath`; its points are the pivots of its joints and the end point.

Per segment ``k`` (joint ``k``'s pivot to the next point) the state is an end point ``x_k`` and
a velocity ``v_k``; its target ``y_k`` is the animated end point. The simulated pivot ``p_k`` is
the animated root for the first segment and the previous simulated end point after it. Each
step::

    v_k <- u_k + (v_k + (K_k (y_k - x_k) + g) h - u_k) * exp(-c_k h)
    x_k <- x_k + v_k h, then the segment lengths L_k restored (below)
    v_k <- (x_k(new) - x_k(old)) / h

that is stiffness and gravity (plus the wind, :mod:`core.controls.wind`), damping, the lengths
restored (each end point then moved where the chain's colliders allow it,
:mod:`core.controls.colliders`), and the velocity the move implies. Damping acts on the velocity relative to ``u_k``, the animated end point's own velocity
over the step: a chain carried at constant speed hangs as animated instead of trailing as if in
a wind. As an exact decay factor it stays stable at any rate.

The lengths are restored by a Newton step on all the segment constraints at once (each end
point weighing the same, the animated root not giving; a chain's constraints couple neighbours
only, so it is a tridiagonal solve), then made exact by one pass from the root. With the
animation at rest and no damping the chain is then a conservative system (springs to fixed
points, gravity, workless constraints) and the scheme loses energy slowly and never gains it.

With a center joint the chain's input (points, colliders, gravity, wind) is taken into that
joint's moving frame each frame and the chain stepped there (the caller's part, see
:mod:`core.controls.kinds.springs`).

Frame-rate independence: a frame's time is clamped to ``MAX_FRAME_TIME`` and integrated in fixed
steps of ``SUBSTEP`` (1/240 s); the remainder is carried to the next frame, and the pose shown is
the committed state advanced by the remainder in one step that is not committed. Targets (and
colliders) at step times are interpolated linearly between the previous and the current frame's
animated pose, so a run at any frame rate commits the very steps a 240 Hz run would on the same
keyed motion; what remains between frame rates is the animation's own sampling.

Resets (to the animated pose with zero velocity, or during a step at rest relative to the
animation; each reported with its reason):

* ``start``: no state yet; ``no_time``: the caller gave no time (nothing to integrate over);
* ``length``: the number of segments, or a segment's length by more than ``LENGTH_CHANGE``
  (relative), changed since the stored state (smaller changes are absorbed by the restore);
* ``strayed``: before a step, an end point more than ``STRAY_LENGTHS`` lengths from its target,
  the length being the chain's up to that end point (it and the end points after it reset); or
  the chain's root travelling more than ``STRAY_LENGTHS`` chain lengths in one frame (a
  teleport: the whole chain). A swinging end point is never more than twice its reach from the
  animated one, so only a discontinuity trips this; a bare segment length would also trip on
  legitimate swings of finely divided chains (hair);
* ``non_finite``: an end point or velocity that is not finite (it and those after it);
* ``jump``: no cached state lies within ``JUMP_TIME`` before the new time (a jump to a frame
  not played before, or a leap forward).

Scrubbing: every evaluated frame's state is cached by its time (the last ``CACHE_FRAMES``).
Each frame starts from the latest cached state before its time, so evaluating a time again,
going back to it or skipping ahead over frames played before gives bit for bit what playing
straight through gave. The cache assumes the animation is unchanged: reset the instance when it
is edited.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError
from ..rig.rotations import FloatArray
from .chains import JointPath
from .colliders import (
    TOLERANCE,
    Collider,
    Placed,
    Prepared,
    clearance,
    collide,
    collide_nearest,
    deepest,
    motion,
    near,
    prepare,
    prepare_span,
    prepare_spans,
    room_from,
    spans,
)
from .wind import Wind

MAX_FRAME_TIME = 0.05
SUBSTEP = 1.0 / 240.0
STRAY_LENGTHS = 8.0
JUMP_TIME = 0.25
LENGTH_CHANGE = 1e-3
CACHE_FRAMES = 4096
#: Newton steps on the length constraints per fixed step, before the exact pass from the root.
CONSTRAINT_STEPS = 1
RESET_REASONS = ("start", "no_time", "length", "strayed", "non_finite", "jump")

_EPS = 1e-12
Vec = tuple[float, float, float]


def _per_segment(value: float | Sequence[float], n: int, what: str, path_desc: str) -> tuple[float, ...]:
    vals = [float(value)] * n if isinstance(value, (int, float)) else [float(v) for v in value]
    if len(vals) != n:
        raise RigError(f"{what} of the spring {path_desc} needs one value per segment ({n}), got {len(vals)}")
    if not all(math.isfinite(v) and v >= 0.0 for v in vals):
        raise RigError(f"{what} of the spring {path_desc} must be finite and >= 0, got {vals}")
    return tuple(vals)


@dataclass(frozen=True)
class SpringChain:
    """Shared definition of a spring chain; build it with :meth:`build`."""

    path: JointPath
    #: Pull toward the target per segment, 1/s^2 (per unit mass).
    stiffness: tuple[float, ...]
    #: Velocity decay rate per segment, 1/s.
    damping: tuple[float, ...]
    #: World-space acceleration, units/s^2.
    gravity: Vec
    #: Each segment end point's radius against the colliders (units).
    radius: tuple[float, ...] = ()
    #: The colliders the chain does not pass through (docs/controls.md#colliders).
    colliders: tuple[Collider, ...] = ()
    #: Wind on the chain (docs/controls.md#wind-and-the-center-space), or none.
    wind: Wind | None = None
    #: The joint whose moving frame the chain is simulated in (-1: the world).
    center: int = -1

    @classmethod
    def build(
        cls,
        path: JointPath,
        *,
        stiffness: float | Sequence[float] = 60.0,
        damping: float | Sequence[float] = 4.0,
        gravity: ArrayLike = (0.0, 0.0, -9.81),
        radius: float | Sequence[float] = 0.0,
        colliders: Sequence[Collider] = (),
        wind: Wind | None = None,
        center: int = -1,
    ) -> SpringChain:
        n = len(path)
        desc = f"of {n} segments"
        k = _per_segment(stiffness, n, "stiffness", desc)
        if max(k) * SUBSTEP * SUBSTEP > 1.0:
            raise RigError(
                f"stiffness {max(k)} is too stiff for the fixed {SUBSTEP:.5f} s step (at most {1 / SUBSTEP**2:.0f})"
            )
        c = _per_segment(damping, n, "damping", desc)
        g = np.asarray(gravity, dtype=np.float64).reshape(-1)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise RigError(f"gravity must be a finite vector of shape (3,), got {g.shape}")
        r = _per_segment(radius, n, "radius", desc)
        if not all(isinstance(x, Collider) for x in colliders):
            raise RigError("the colliders of a spring must be Collider definitions")
        if wind is not None and not isinstance(wind, Wind):
            raise RigError("the wind of a spring must be a Wind definition")
        if center >= 0 and (center in path.joints):
            raise RigError("a spring's center bone must not be one of its own bones")
        return cls(path, k, c, (float(g[0]), float(g[1]), float(g[2])), r, tuple(colliders), wind, int(center))


@dataclass(frozen=True)
class SpringSnapshot:
    """State after one frame: the time, committed endpoints and velocities (world), the time
    carried to the next frame, the frame's animated input (root pivot, segment vectors) and
    where the animated end points were at the committed time (``time - leftover``)."""

    time: float
    x: tuple[Vec, ...]
    v: tuple[Vec, ...]
    leftover: float
    root: Vec
    segments: tuple[Vec, ...]
    anchor: tuple[Vec, ...]
    #: The frame's colliders as placed (world), for the next frame to interpolate from.
    colliders: tuple[Placed, ...] = ()
    #: Each end point's clearance from the colliders of ``kept`` (indices into ``colliders``)
    #: as they are placed at ``time``, the point where it was committed (see ``_Frame``).
    clear: tuple[float, ...] = ()
    kept: tuple[int, ...] = ()


@dataclass
class SpringState:
    """Per-instance runtime state of one spring chain: the last frame's state and a cache of
    frame states by time (the cache assumes the animation it was computed from is unchanged;
    the caller resets the instance when the animation is edited)."""

    current: SpringSnapshot | None = None
    cache: dict[int, SpringSnapshot] = field(default_factory=dict)
    #: The cache's keys, sorted, to find the state before a time by bisection.
    keys: list[int] = field(default_factory=list)

    def clear(self) -> None:
        self.current = None
        self.cache = {}
        self.keys = []

    def _remember(self, snap: SpringSnapshot) -> None:
        key = _key(snap.time)
        if key in self.cache:
            del self.cache[key]
        else:
            bisect.insort(self.keys, key)
        self.cache[key] = snap
        if len(self.cache) > CACHE_FRAMES:
            # Dicts keep insertion order: the first key is the least recently evaluated frame.
            old = next(iter(self.cache))
            del self.cache[old]
            del self.keys[bisect.bisect_left(self.keys, old)]
        self.current = snap

    def _before(self, time: float) -> SpringSnapshot | None:
        """The cached state of the latest frame before ``time``, if within ``JUMP_TIME``."""
        i = bisect.bisect_left(self.keys, _key(time)) - 1
        if i < 0:
            return None
        snap = self.cache[self.keys[i]]
        return snap if time - snap.time <= JUMP_TIME else None


def _key(time: float) -> int:
    # Microseconds: frame times recomputed as frame / fps land on the same key.
    return int(round(time * 1e6))


@dataclass(frozen=True)
class SpringStep:
    """What one frame produced: the chain's points (world, ``(n + 1, 3)``), the reset reason
    (empty when none), whether the frame restarted from a cached state, and how many fixed
    steps were committed; the deepest penetration into a collider after each committed step
    (then after the uncommitted step to the frame's time, when there is one) and in the points
    shown, units (0 without colliders)."""

    points: FloatArray
    reset: str
    recomputed: bool
    substeps: int
    penetration: tuple[float, ...] = ()
    deepest: float = 0.0


def _animated(root: Vec, segs: Sequence[Vec]) -> list[Vec]:
    pts = [root]
    px, py, pz = root
    for ax, ay, az in segs:
        px, py, pz = px + ax, py + ay, pz + az
        pts.append((px, py, pz))
    return pts


class _Frame:
    """The animated input of one frame window: the previous and current frame's points, their
    segment lengths, and each end point's squared stray distance. The per-window differences
    (``moves``: each point's travel over the window, ``grow``: each length's change) are taken
    once here rather than in every fixed step; ``a + s * move`` is the very arithmetic
    ``a + s * (b - a)`` would do, so the steps are unchanged to the bit."""

    __slots__ = (
        "pts0", "pts1", "len0", "len1", "stray", "moves", "grow", "kept", "col0", "col1", "spans", "move", "clear", "nearest",
        "others", "last_s", "ready_s", "ready", "ready_all",
    )

    def __init__(
        self, root0: Vec, segs0: Sequence[Vec], root1: Vec, segs1: Sequence[Vec],
        colliders0: Sequence[Placed] = (), colliders1: Sequence[Placed] = (), reach: float = 0.0,
        clear: Sequence[float] = (), kept_before: Sequence[int] = (),
    ) -> None:
        self.pts0, self.pts1 = _animated(root0, segs0), _animated(root1, segs1)
        self.len0 = [math.sqrt(a[0] ** 2 + a[1] ** 2 + a[2] ** 2) for a in segs0]
        self.len1 = [math.sqrt(a[0] ** 2 + a[1] ** 2 + a[2] ** 2) for a in segs1]
        self.moves: list[Vec] = [(b[0] - a[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(self.pts0, self.pts1, strict=True)]
        self.grow = [b - a for a, b in zip(self.len0, self.len1, strict=True)]
        # Squared stray distance per end point: STRAY_LENGTHS times its reach from the root.
        total = 0.0
        self.stray = []
        for length in self.len1:
            total += length
            self.stray.append((STRAY_LENGTHS * total) ** 2)
        # The colliders the chain may reach over the window (the others cost nothing per step).
        if len(colliders0) != len(colliders1):
            colliders0 = colliders1
            clear = ()  # measured against other colliders
        r0, r1 = self.pts0[0], self.pts1[0]
        kept = [
            i for i, (a, b) in enumerate(zip(colliders0, colliders1, strict=True))
            if near(a, b, r0, r1, reach + max(total, sum(self.len0)))
        ]
        self.kept = tuple(kept)
        self.col0 = [colliders0[i] for i in kept]
        self.col1 = [colliders1[i] for i in kept]
        self.spans = spans(self.col0, self.col1)
        # Conservative advancement: each end point's clearance from the colliders at its last
        # test, used up by its moves and the colliders' (over the whole window at most ``move``),
        # both counted apart from the root's travel (which carries the whole chain and, on a
        # character, its colliders alike); the exact test is skipped while some is left.
        # ``clear``: from the nearest collider (``nearest``, an index into ``col0``), ``others``:
        # from the rest, so a point resting on one collider tests that one alone while the
        # others stay clear. ``last_s``: the window fraction of the state the next step starts
        # from (the caller's). The clearances the last window left (``clear``, at this one's
        # start) carry over while the colliders tested then include every one kept now.
        carried = self.moves[0]
        self.move = max((motion(a, b, carried) for a, b in zip(self.col0, self.col1, strict=True)), default=0.0)
        n = len(self.len1)
        if len(clear) == n and set(kept).issubset(kept_before):
            self.clear = list(clear)
        else:
            self.clear = [-1.0] * n
        self.others = list(self.clear)
        self.nearest = [0] * n
        self.last_s = 0.0
        # The colliders placed at fraction ``ready_s``, each as a test first needs it.
        self.ready_s = math.nan
        self.ready: list[Prepared | None] = []
        self.ready_all = False

    def carry(self) -> tuple[float, ...]:
        """The end points' clearances at the window's end, for the next window to start from:
        what the colliders' motion and the root's travel (the committed points stay where they
        are) may use up after the last committed step."""
        if not self.col0:
            return ()
        least = [min(a, b) for a, b in zip(self.clear, self.others, strict=True)]
        rest = 1.0 - self.last_s
        if not rest > 0.0:
            return tuple(least)
        d = self.moves[0]
        budget = rest * (self.move + math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]))
        return tuple(c - budget for c in least)
    def colliders(self, s: float) -> list[Prepared]:
        """The colliders the chain may reach, placed at fraction ``s`` of the window (each
        placed once per step)."""
        if s != self.ready_s:
            self.ready_s = s
            self.ready_all = False
        elif self.ready_all:
            return self.ready  # type: ignore[return-value]
        self.ready = list(prepare_spans(self.spans, s))
        self.ready_all = True
        return self.ready  # type: ignore[return-value]

    def collider(self, j: int, s: float) -> Prepared:
        """The ``j``-th collider the chain may reach, placed at fraction ``s`` (once per step)."""
        if s != self.ready_s:
            self.ready_s = s
            self.ready_all = False
            self.ready = [None] * len(self.spans)
        one = self.ready[j]
        if one is None:
            one = self.ready[j] = prepare_span(self.spans[j], s)
        return one

    def ends(self, s: float) -> list[Vec]:
        """The animated end points at fraction ``s`` of the window (they move linearly)."""
        return [
            (a[0] + s * d[0], a[1] + s * d[1], a[2] + s * d[2])
            for a, d in zip(self.pts0[1:], self.moves[1:], strict=True)
        ]


def _project(root: Vec, pts: list[list[float]], lengths: Sequence[float], free: Sequence[float]) -> None:
    """One Newton step toward ``|p_k - p_(k-1)| = L_k`` for the chain ``root, pts...`` in place,
    with inverse masses ``free`` (0 for a point that must not move; the root never moves):
    solve ``(J W J^T) lambda = -C`` (tridiagonal) and move the points by ``W J^T lambda``.

    Runs once per fixed step on a handful of points, so it is plain Python arithmetic (numpy's
    per-call overhead would dominate) with the matrix built inside the elimination loop."""
    n = len(pts)
    ux = [0.0] * n
    uy = [0.0] * n
    uz = [0.0] * n
    r = [0.0] * n  # -C, then the eliminated right-hand side, then lambda
    px, py, pz = root
    for k in range(n):
        bx, by, bz = pts[k]
        dx, dy, dz = bx - px, by - py, bz - pz
        d = math.sqrt(dx * dx + dy * dy + dz * dz)
        if not (d > _EPS and math.isfinite(d)):
            return  # degenerate: the exact pass from the root handles it
        ux[k], uy[k], uz[k] = dx / d, dy / d, dz / d
        r[k] = -(d - lengths[k])
        px, py, pz = bx, by, bz
    # A[k][k] = w_(k-1) + w_k, A[k][k+1] = -w_k (u_k . u_(k+1)); Thomas algorithm. Row 0 has no
    # left neighbour (its diagonal is w_0 alone, nothing to eliminate).
    c = [0.0] * n
    off_prev = 0.0
    for k in range(n):
        w = free[k]
        if k == 0:
            m = w
        else:
            m = (free[k - 1] + w) - off_prev * c[k - 1]
        if abs(m) < _EPS:
            return  # a segment between two fixed points: nothing to solve
        if k < n - 1:
            off = -w * (ux[k] * ux[k + 1] + uy[k] * uy[k + 1] + uz[k] * uz[k + 1])
            c[k] = off / m
        else:
            off = 0.0
        r[k] = r[k] / m if k == 0 else (r[k] - off_prev * r[k - 1]) / m
        off_prev = off
    lam = r
    for k in range(n - 2, -1, -1):
        lam[k] -= c[k] * lam[k + 1]
    for k in range(n):
        lk = lam[k]
        gx, gy, gz = lk * ux[k], lk * uy[k], lk * uz[k]
        if k + 1 < n:
            ln = lam[k + 1]
            gx -= ln * ux[k + 1]
            gy -= ln * uy[k + 1]
            gz -= ln * uz[k + 1]
        w = free[k]
        b = pts[k]
        b[0] += w * gx
        b[1] += w * gy
        b[2] += w * gz


def _decays(chain: SpringChain, h: float) -> list[float]:
    """Each segment's velocity decay over a step of ``h``."""
    return [math.exp(-c * h) for c in chain.damping]


def _step(
    chain: SpringChain,
    frame: _Frame,
    s: float,
    h: float,
    x: list[Vec],
    v: list[Vec],
    before: Sequence[Vec],
    commit: bool,
    decay: Sequence[float] | None = None,
    accel: Vec | None = None,
) -> tuple[str, list[Vec], float]:
    """One fixed step of length ``h`` toward the targets at fraction ``s`` of the frame window,
    in place on ``x`` and ``v``; ``before`` are the animated end points at the step's start (the
    damping acts relative to their velocity over the step). ``decay``: :func:`_decays` for
    ``h``, when the caller takes many steps of the same length. Returns the reset reason raised
    during it ('' for none), the targets (the next step's ``before``) and the deepest
    penetration into a collider left after it.

    Collisions are resolved in the exact pass from the root, right after each segment's length
    is restored: the end point is moved where the colliders allow it at that length, so the
    next segment hangs from where it ends and the velocity the move implies loses what the
    collider stopped (contacts are inelastic).

    Pinning always runs from a segment to the chain's end, so it is kept as the index of the
    first pinned segment (``n``: none)."""
    sqrt, isfinite = math.sqrt, math.isfinite  # looked up once: the loops below run per point
    r0, dr = frame.pts0[0], frame.moves[0]
    px, py, pz = r0[0] + s * dr[0], r0[1] + s * dr[1], r0[2] + s * dr[2]
    gx, gy, gz = chain.gravity if accel is None else accel
    if decay is None:
        decay = _decays(chain, h)
    stiffness = chain.stiffness
    stray = frame.stray
    reason = ""
    n = len(x)
    len0, grow = frame.len0, frame.grow
    pts0, moves = frame.pts0, frame.moves
    lengths: list[float] = []
    targets: list[Vec] = []  # frame.ends(s), built in this loop
    pred: list[list[float]] = []
    pinned = n
    for k in range(n):
        lengths.append(len0[k] + s * grow[k])
        a, d = pts0[k + 1], moves[k + 1]
        y0, y1, y2 = a[0] + s * d[0], a[1] + s * d[1], a[2] + s * d[2]
        targets.append((y0, y1, y2))
        if k < pinned:
            xk, vk = x[k], v[k]
            x0, x1, x2 = xk
            v0, v1, v2 = vk
            ex, ey, ez = x0 - y0, x1 - y1, x2 - y2
            # One test for six values: a sum is finite only if they are (or overflows, which
            # is as bad).
            if not isfinite(x0 + x1 + x2 + v0 + v1 + v2):
                reason = reason or "non_finite"
                pinned = k
            elif ex * ex + ey * ey + ez * ez > stray[k]:
                reason = reason or "strayed"
                pinned = k
            else:
                b = before[k]
                ux, uy, uz = (y0 - b[0]) / h, (y1 - b[1]) / h, (y2 - b[2]) / h
                stiff = stiffness[k]
                dk = decay[k]
                vx = ux + (v0 + (gx - stiff * ex) * h - ux) * dk
                vy = uy + (v1 + (gy - stiff * ey) * h - uy) * dk
                vz = uz + (v2 + (gz - stiff * ez) * h - uz) * dk
                pred.append([x0 + vx * h, x1 + vy * h, x2 + vz * h])
                continue
        pred.append([y0, y1, y2])
    # Lengths: Newton steps on all the segment constraints at once, each end point weighing the
    # same and the root (animated) not giving, then one pass from the root that makes them
    # exact. Moving only the child end would let a parent whip its children with energy it never
    # loses. A chain's constraints couple neighbours only: each step is a tridiagonal solve.
    free = [1.0] * pinned + [0.0] * (n - pinned)
    root = (px, py, pz)
    for _ in range(CONSTRAINT_STEPS):
        _project(root, pred, lengths, free)
    # The colliders are placed at this step only when a point's clearance runs out.
    placed: list[Prepared] | None = None
    colliding = bool(frame.col0)
    radii = chain.radius
    worst = 0.0
    if colliding:
        # What the root carried and the colliders may have moved since the last step (a step
        # not committed works on a copy: the next window starts from the committed state).
        clear = frame.clear if commit else list(frame.clear)
        others = frame.others if commit else list(frame.others)
        nearest = frame.nearest if commit else list(frame.nearest)
        ds = s - frame.last_s
        cx, cy, cz = ds * dr[0], ds * dr[1], ds * dr[2]
        used = ds * frame.move
    for k in range(n):
        y0, y1, y2 = y = targets[k]
        if k < pinned:
            b0, b1, b2 = pred[k]
            qx, qy, qz = b0 - px, b1 - py, b2 - pz
            lq = sqrt(qx * qx + qy * qy + qz * qz)
            if not (lq > _EPS and isfinite(lq)):
                # On the pivot (or overflowed): no direction to restore along, take the target's.
                qx, qy, qz = y0 - px, y1 - py, y2 - pz
                lq = sqrt(qx * qx + qy * qy + qz * qz)
            f = lengths[k] / lq if lq > _EPS else 0.0
            nx, ny, nz = px + qx * f, py + qy * f, pz + qz * f
            xk = x[k]
            # The move over the step (the velocity when committed; with the root's carry taken
            # off, what the point used of its clearance).
            d0, d1, d2 = nx - xk[0], ny - xk[1], nz - xk[2]
            if colliding:
                room = clear[k] - used
                rest = others[k] - used
                if rest > 0.0:
                    mx, my, mz = d0 - cx, d1 - cy, d2 - cz
                    travel = sqrt(mx * mx + my * my + mz * mz)
                    room -= travel
                    rest -= travel
                if not rest > 0.0:
                    if placed is None:
                        placed = frame.colliders(s)
                    room, nearest[k], rest = clearance(nx, ny, nz, radii[k], placed)
                elif not room > 0.0:
                    # Only the nearest collider can be touched: the others are still clear.
                    j = nearest[k]
                    room = room_from(nx, ny, nz, radii[k], frame.collider(j, s) if placed is None else placed[j])
                if room < -TOLERANCE:
                    pivot, at = (px, py, pz), (nx, ny, nz)
                    j = nearest[k]
                    done = None
                    if rest > 0.0:
                        one = frame.collider(j, s) if placed is None else placed[j]
                        done = collide_nearest(pivot, at, lengths[k], radii[k], one, rest)
                    if done is None:
                        if placed is None:
                            placed = frame.colliders(s)
                        done = collide(pivot, at, lengths[k], radii[k], placed)
                    (mx, my, mz), left = done
                    # The others' clearance less how far the collision moved the point.
                    rest -= sqrt((mx - nx) ** 2 + (my - ny) ** 2 + (mz - nz) ** 2)
                    nx, ny, nz = mx, my, mz
                    d0, d1, d2 = nx - xk[0], ny - xk[1], nz - xk[2]
                    room = 0.0
                    if left > worst:
                        worst = left
                clear[k] = room
                others[k] = rest
            if commit:
                vk = (d0 / h, d1 / h, d2 / h)
            else:
                vk = v[k]
            if isfinite(nx + ny + nz + vk[0] + vk[1] + vk[2]):
                x[k] = (nx, ny, nz)
                v[k] = vk
                px, py, pz = nx, ny, nz
                continue
            reason = reason or "non_finite"
            pinned = k
        # Back to the animation, at rest relative to it (its clearance unknown).
        if colliding:
            clear[k] = others[k] = -1.0
        b = before[k]
        x[k] = y
        v[k] = ((y0 - b[0]) / h, (y1 - b[1]) / h, (y2 - b[2]) / h)
        px, py, pz = y0, y1, y2
    if commit:
        frame.last_s = s
    return reason, targets, worst


def _reset(
    chain: SpringChain, state: SpringState, time: float | None, root: Vec, segs: tuple[Vec, ...], reason: str,
    placed: tuple[Placed, ...] = (),
) -> SpringStep:
    """Back to the animated pose at rest; an animated pose inside a collider is pushed out from
    the root down (the lengths kept), so a chain never starts inside one."""
    anim = _animated(root, segs)
    pts = anim
    worst = 0.0
    if placed:
        pts = [root]
        ready = prepare(placed)
        for k, seg in enumerate(segs):
            length = math.sqrt(seg[0] ** 2 + seg[1] ** 2 + seg[2] ** 2)
            p = pts[-1]
            x, left = collide(p, (p[0] + seg[0], p[1] + seg[1], p[2] + seg[2]), length, chain.radius[k], ready)
            pts.append(x)
            worst = max(worst, left)
    if time is not None:
        zero = tuple((0.0, 0.0, 0.0) for _ in segs)
        state._remember(SpringSnapshot(time, tuple(pts[1:]), zero, 0.0, root, segs, tuple(anim[1:]), placed))
    else:
        state.clear()
    return SpringStep(np.array(pts), reason, False, 0, (), worst)


def advance(
    chain: SpringChain, state: SpringState, time: float | None, points: ArrayLike, colliders: Sequence[Placed] = ()
) -> SpringStep:
    """Advance ``state`` to ``time`` (seconds; ``None`` = no clock, which resets) given the
    chain's animated points ``(n + 1, 3)`` in world space at that time and its colliders placed
    at that time (:func:`core.controls.colliders.place`); returns the simulated points.
    Non-finite input is the caller's to skip (it would poison the state)."""
    pts = np.asarray(points, dtype=np.float64)
    n = len(chain.path)
    if pts.shape != (n + 1, 3):
        raise ValueError(f"points must have shape ({n + 1}, 3), got {pts.shape}")
    if len(colliders) != len(chain.colliders):
        raise ValueError(f"the chain has {len(chain.colliders)} colliders, {len(colliders)} were placed")
    return advance_rows(chain, state, time, pts.tolist(), colliders)


def _turned(turn: Sequence[Sequence[float]] | None, v: Vec) -> Vec:
    if turn is None:
        return v
    return (
        turn[0][0] * v[0] + turn[0][1] * v[1] + turn[0][2] * v[2],
        turn[1][0] * v[0] + turn[1][1] * v[1] + turn[1][2] * v[2],
        turn[2][0] * v[0] + turn[2][1] * v[1] + turn[2][2] * v[2],
    )


def _accel(chain: SpringChain, turn: Sequence[Sequence[float]] | None, time: float) -> Vec | None:
    """Gravity and the wind at ``time``, turned into the frame simulated in (``None``: the
    chain's gravity as it is)."""
    g = chain.gravity
    if chain.wind is not None:
        w = chain.wind.at(time)
        g = (g[0] + w[0], g[1] + w[1], g[2] + w[2])
    elif turn is None:
        return None
    return _turned(turn, g)


def advance_rows(
    chain: SpringChain, state: SpringState, time: float | None, rows: Sequence[Sequence[float]],
    colliders: Sequence[Placed] = (), turn: Sequence[Sequence[float]] | None = None,
) -> SpringStep:
    """:func:`advance` with the points given as ``n + 1`` rows of three floats, unchecked (the
    control stack's entry: it has them as lists already, and a live frame pays per numpy call).
    ``turn``: the rotation from world into the frame the rows are given in (a center bone's),
    applied to gravity and the wind."""
    n = len(chain.path)
    first = rows[0]
    root: Vec = (first[0], first[1], first[2])
    segs: tuple[Vec, ...] = tuple((b[0] - a[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(rows[:-1], rows[1:], strict=True))
    placed = tuple(colliders)
    if time is None:
        return _reset(chain, state, None, root, segs, "no_time", placed)
    if state.current is None:
        return _reset(chain, state, time, root, segs, "start", placed)
    # The latest state before this time: the last frame when playing forward, a cached one
    # when the frame is evaluated again or the timeline went back or skipped ahead.
    start = state._before(time)
    if start is None:
        return _reset(chain, state, time, root, segs, "jump", placed)
    recomputed = start is not state.current
    gap = time - start.time
    if len(start.segments) != n:
        return _reset(chain, state, time, root, segs, "length", placed)
    dt = min(gap, MAX_FRAME_TIME)
    frame = _Frame(
        start.root, start.segments, root, segs, start.colliders, placed, max(chain.radius, default=0.0),
        start.clear, start.kept,
    )
    if any(abs(b - a) > LENGTH_CHANGE * max(a, _EPS) for a, b in zip(frame.len0, frame.len1, strict=True)):
        return _reset(chain, state, time, root, segs, "length", placed)
    travel = math.dist(start.root, root)
    if travel > STRAY_LENGTHS * sum(frame.len1):
        return _reset(chain, state, time, root, segs, "strayed", placed)
    total = start.leftover + dt
    # The small slack keeps 1/24 s from becoming 9 steps and a remainder of one step less a
    # rounding error; the count stays the same at every frame rate that divides 240.
    steps = int(math.floor(total / SUBSTEP + 1e-6))
    leftover = max(total - steps * SUBSTEP, 0.0)
    x = list(start.x)
    v = list(start.v)
    reason = ""
    before: Sequence[Vec] = start.anchor
    decay = _decays(chain, SUBSTEP)
    depths: list[float] = []
    # Wind is taken at each step's end time, counted from the committed state's (the same
    # times at every frame rate).
    origin = start.time - start.leftover
    accel = _accel(chain, turn, 0.0) if chain.wind is None else None
    for i in range(1, steps + 1):
        s = min((i * SUBSTEP - start.leftover) / dt, 1.0)
        a = accel if chain.wind is None else _accel(chain, turn, origin + i * SUBSTEP)
        raised, before, left = _step(chain, frame, s, SUBSTEP, x, v, before, True, decay, a)
        depths.append(left)
        reason = reason or raised
    carry = frame.carry()
    shown = x
    if leftover > 1e-9:
        shown = list(x)
        a = accel if chain.wind is None else _accel(chain, turn, time)
        depths.append(_step(chain, frame, 1.0, leftover, shown, list(v), before, False, None, a)[2])
    state._remember(SpringSnapshot(time, tuple(x), tuple(v), leftover, root, segs, tuple(before), placed, carry, frame.kept))
    # The points shown are those of the last step taken (committed or not).
    worst = depths[-1] if depths else (deepest(shown, chain.radius, placed) if placed else 0.0)
    return SpringStep(np.array([root, *shown]), reason, recomputed, steps, tuple(depths), worst)
