"""Ground adaptation (docs/controls.md#ground-feet): feet on uneven ground, pelvis lowered to let the lower leg reach.

Conventions: skeleton-space positions and directions, frames first, float64, quaternions as in
:mod:`core.rig.rotations`. World up is Blender's +Z; it is carried into skeleton space through the
armature object's placement (``(T, 4, 4)``, object to world), so a rotated or scaled object
probes the same world ground. Distances in the definition (probe height, offset bound, floor) are
skeleton units. Angles are radians.

The ground is queried through a ray-cast function passed in (the Blender layer gives it
``scene.ray_cast`` with the character excluded; tests give analytic terrain)::

    ray_cast(origins (N, 3), directions (N, 3), distances (N,)) -> (hit (N,), points (N, 3), normals (N, 3))

all in world space. Over several frames the rays come leg by leg, each over the frames in order
(ray ``k T + t`` probes leg ``k`` at frame ``t`` of ``T``), so a ground that moves can be placed
per frame. Per frame and foot:

1. *Probe.* The sole point (fixed in the foot's frame; by default the point under the rest ankle
   on the floor) is probed from ``probe_height`` above, down through twice that. The animation is
   taken to have been made on a floor, horizontal in the world, through the skeleton-space point
   ``floor * up``; the foot's *clearance* is its sole's height above that floor.
2. *Smoothing.* The hit plane (normal and offset, world space) is smoothed per foot with
   ``1 - exp(-dt / smooth_time)``; a missed ray aims it at the animation's floor. Smoothing the
   plane rather than the lift means a planted foot on a planar slope does not lag while the body
   moves over it (its lift changes, its plane does not), while a step edge or a lost ray still
   eases in.
3. *Tilt.* The foot turns from world up toward the smoothed normal, at most ``max_tilt`` (<= 35
   degrees), fading out as the clearance grows to the probe height (a foot high in the air does
   not follow the slope under it).
4. *Lift.* The vertical offset that puts the tilted sole at its animated clearance above the
   smoothed plane, clamped to ``+-max_offset``; never so low that the sole is below the ground
   actually hit (a late plane would sink the foot). On the animation's floor it is 0, so with no
   ground the foot returns to its animation; a lift within the rounding of a single-precision hit
   (Blender's ray casts) counts as none.
5. *Pelvis.* Aimed at the lowest negative lift (0 when none is negative) and smoothed with
   its own time constant, never above its animated height; lowered further, at once, when a leg
   could not reach its target otherwise (a smoothing lag must not leave a foot hanging); never
   asked to bend a leg more than the animation does.
6. *Legs.* Each leg is solved by the two-bone IK toward its animated ankle moved by its lift,
   from the lowered pelvis, the pole ahead of the knee along the rig's facing (the pelvis's
   current forward axis, made horizontal, so the knees follow the body as it turns); the foot
   keeps its animated world orientation turned by the tilt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..retarget.facing import Leg, infer_facing
from ..rig.rotation_kernels import Mat, cross, quat_from_rotation_matrix, quat_mul, solve3
from ..rig.rotations import FloatArray, orthonormalize
from ..rig.skeleton import Skeleton
from .chains import JointPath, PathKinematics, PoseBuffers, end_rotations
from .ik import solve_path_ik

BoolArray = NDArray[np.bool_]
RayCast = Callable[[FloatArray, FloatArray, FloatArray], tuple[ArrayLike, ArrayLike, ArrayLike]]

#: The largest foot tilt allowed (docs/controls.md#ground-feet).
MAX_TILT = math.radians(35.0)
_EPS = 1e-12
#: Relative rounding of a ray's hit height: four units in the last place of single precision.
_HIT_ROUNDING = 2.0**-21
_Z = np.array([0.0, 0.0, 1.0])
_DOWN = np.array([[0.0, 0.0, -1.0]])


def _readonly(a: FloatArray) -> FloatArray:
    a.setflags(write=False)
    return a


def _index(skeleton: Skeleton, j: int | str) -> int:
    return j if isinstance(j, int) else skeleton.index(j)


@dataclass(frozen=True)
class GroundLeg:
    """One leg: the thigh-shin path ending at the foot's pivot (the ankle), and the sole point
    in the foot's placement frame."""

    path: JointPath
    foot: int
    sole: FloatArray

    @property
    def joints(self) -> tuple[int, int, int]:
        return (self.path.joints[0], self.path.joints[1], self.foot)


@dataclass(frozen=True)
class GroundRig:
    """Shared definition of ground adaptation; build it with :meth:`build`."""

    legs: tuple[GroundLeg, ...]
    #: Joint whose translation lowers the body (-1: no pelvis adjustment).
    pelvis: int
    #: Joint whose placement carries the rig's facing: the pelvis, else the first thigh's parent
    #: (-1: none, skeleton space).
    facing_joint: int
    #: The rig's forward direction in ``facing_joint``'s placement frame.
    forward: FloatArray
    #: A point of the floor the animation was made on, skeleton space (``floor * up``).
    floor_point: FloatArray
    probe_height: float
    max_offset: float
    max_tilt: float

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        legs: Sequence[tuple[int | str, int | str, int | str]],
        *,
        pelvis: int | str | None = None,
        forward: ArrayLike | None = None,
        up: ArrayLike = (0.0, 0.0, 1.0),
        floor: float = 0.0,
        sole_height: float | None = None,
        probe_height: float = 0.5,
        max_offset: float | None = None,
        max_tilt: float = MAX_TILT,
        soles: Sequence[ArrayLike] | None = None,
    ) -> GroundRig:
        """``legs``: (thigh, shin, foot) per leg. ``pelvis``: the joint to lower (an ancestor of
        every thigh), or ``None`` for no pelvis adjustment. ``forward``: the rig's rest forward
        in skeleton space (default: inferred from the feet and knees, docs/pipeline.md#facing). ``up``: the
        skeleton's up at rest (+Z for Blender rigs, +Y for a BVH read as is); ``floor``: the
        height along ``up`` of the floor the animation was made on. The sole of each foot is a
        point ``sole_height`` under the rest ankle, carried by the foot (default: the rest
        ankle's height above the floor, for rigs whose rest pose stands on it), or ``soles``,
        one point per leg in the foot's placement frame. ``max_offset`` defaults to
        ``probe_height``; ``max_tilt`` 0 disables tilting."""
        if not legs:
            raise RigError("ground adaptation needs at least one leg")
        for value, what in ((probe_height, "probe_height"), (floor, "floor")):
            if not math.isfinite(value):
                raise RigError(f"{what} must be finite, got {value}")
        up_v = np.asarray(up, dtype=np.float64).reshape(-1)
        if up_v.shape != (3,) or not np.all(np.isfinite(up_v)) or np.linalg.norm(up_v) < 1e-9:
            raise RigError("up must be a finite non-zero vector of shape (3,)")
        up_v = up_v / np.linalg.norm(up_v)
        if sole_height is not None and not (math.isfinite(sole_height) and sole_height >= 0.0):
            raise RigError(f"sole_height must be finite and >= 0, got {sole_height}")
        if probe_height <= 0.0:
            raise RigError(f"probe_height must be > 0, got {probe_height}")
        bound = probe_height if max_offset is None else float(max_offset)
        if not (math.isfinite(bound) and bound >= 0.0):
            raise RigError(f"max_offset must be finite and >= 0, got {max_offset}")
        if not (math.isfinite(max_tilt) and 0.0 <= max_tilt <= MAX_TILT + 1e-12):
            raise RigError(f"max_tilt must be between 0 and 35 degrees, got {math.degrees(max_tilt):.3f}")
        rest = skeleton.rest_placements()
        built: list[GroundLeg] = []
        seen: set[int] = set()
        for k, (thigh, shin, foot) in enumerate(legs):
            t, s, f = (_index(skeleton, j) for j in (thigh, shin, foot))
            if int(skeleton.parents[s]) != t or int(skeleton.parents[f]) != s:
                raise RigError(
                    f"leg {k + 1}: {skeleton.names[f]!r} must be a child of {skeleton.names[s]!r},"
                    f" itself a child of {skeleton.names[t]!r}"
                )
            if seen & {t, s, f}:
                raise RigError(f"leg {k + 1} shares a joint with another leg")
            seen |= {t, s, f}
            path = JointPath.between(skeleton, t, s, end=f)
            if soles is None:
                ankle = rest[f, :3, 3]
                height = float(ankle @ up_v) - floor if sole_height is None else sole_height
                if height <= 0.0:
                    raise RigError(
                        f"the rest ankle {skeleton.names[f]!r} is not above the floor ({floor} along up);"
                        " give sole_height or the sole points"
                    )
                sole = np.linalg.solve(rest[f], np.append(ankle - height * up_v, 1.0))[:3]
            else:
                sole = np.asarray(soles[k], dtype=np.float64).reshape(-1)
                if sole.shape != (3,) or not np.all(np.isfinite(sole)):
                    raise RigError(f"the sole point of leg {k + 1} must be a finite vector of shape (3,)")
            built.append(GroundLeg(path, f, _readonly(sole.copy())))
        p = -1 if pelvis is None else _index(skeleton, pelvis)
        if p >= 0:
            if p in seen:
                raise RigError(f"the pelvis {skeleton.names[p]!r} cannot be a leg joint")
            for leg in built:
                if p not in leg.path.ancestors:
                    raise RigError(
                        f"the pelvis {skeleton.names[p]!r} must be an ancestor of {skeleton.names[leg.path.joints[0]]!r}"
                    )
        if forward is None:
            fwd = _infer_forward(skeleton, built, rest, p, up_v)
        else:
            fwd = np.asarray(forward, dtype=np.float64).reshape(-1)
            if fwd.shape != (3,) or not np.all(np.isfinite(fwd)) or np.linalg.norm(fwd - (fwd @ up_v) * up_v) < 1e-9:
                raise RigError("forward must be a finite vector of shape (3,) with a horizontal part")
        fwd = fwd / np.linalg.norm(fwd)
        facing = p if p >= 0 else int(skeleton.parents[built[0].path.joints[0]])
        if facing >= 0:
            fwd = orthonormalize(rest[facing, :3, :3]).T @ fwd
        return cls(
            tuple(built), p, facing, _readonly(fwd), _readonly(floor * up_v), float(probe_height), bound, float(max_tilt)
        )

    @property
    def written(self) -> tuple[int, ...]:
        """Joints whose rotation changes: thigh, shin and foot of every leg."""
        return tuple(j for leg in self.legs for j in leg.joints)

    @property
    def moved(self) -> tuple[int, ...]:
        """Joints whose translation changes: the pelvis, if any."""
        return (self.pelvis,) if self.pelvis >= 0 else ()


def _infer_forward(skeleton: Skeleton, legs: list[GroundLeg], rest: FloatArray, pelvis: int, up: FloatArray) -> FloatArray:
    cues = []
    for leg in legs:
        t, s, f = leg.joints
        toes = skeleton.children(f)
        cues.append(Leg(rest[t, :3, 3], rest[s, :3, 3], rest[f, :3, 3], rest[toes[0], :3, 3] if toes else None))
    hips = rest[pelvis, :3, 3] if pelvis >= 0 else np.mean([rest[leg.joints[0], :3, 3] for leg in legs], axis=0)
    facing = infer_facing(hips, hips + up, cues)
    if facing.forward is None:
        raise RigError("cannot tell which way this rig faces from its feet and knees; give forward explicitly")
    return np.asarray(facing.forward, dtype=np.float64)


@dataclass
class GroundMemory:
    """Per-instance smoothing state: the ground plane under each foot (world normals and
    offsets, one per leg) and the pelvis offset."""

    normal: list[tuple[float, float, float]] | None = None
    offset: list[float] | None = None
    pelvis: float | None = None


@dataclass(frozen=True)
class GroundSolve:
    """Result per frame. ``rotations`` ``(T, 3 L, 4)`` for thigh, shin, foot of each leg in
    :attr:`GroundRig.written` order; ``pelvis_translation`` ``(T, 3)`` (``None`` without a
    pelvis). Per foot ``(T, L)``: ``hit``, the smoothed ``lift`` and its target ``raw_lift``
    (skeleton units along up), the applied ``tilt`` (radians), ``capped`` (the normal was steeper
    than ``max_tilt``), ``clearance`` (animated sole height above the floor) and the leg IK
    ``residual``. ``pelvis_offset`` ``(T,)`` is always <= 0."""

    rotations: FloatArray
    pelvis_translation: FloatArray | None
    hit: BoolArray
    lift: FloatArray
    raw_lift: FloatArray
    tilt: FloatArray
    capped: BoolArray
    clearance: FloatArray
    pelvis_offset: FloatArray
    residual: FloatArray
    details: dict[str, FloatArray] = field(default_factory=dict)


def _unit_rows(v: FloatArray) -> FloatArray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    out: FloatArray = v / np.where(n > _EPS, n, 1.0)
    return out


def _cast(ray_cast: RayCast, origins: FloatArray, distance: FloatArray) -> tuple[BoolArray, FloatArray, FloatArray]:
    """The rays straight down from ``origins`` ``(N, 3)``, as the ray cast answers them
    (shapes checked)."""
    n = origins.shape[0]
    directions = np.repeat(_DOWN, n, axis=0)
    hit_raw, pts_raw, nrm_raw = ray_cast(origins, directions, distance)
    hit = np.asarray(hit_raw, dtype=bool).reshape(-1)
    pts = np.asarray(pts_raw, dtype=np.float64)
    nrm = np.asarray(nrm_raw, dtype=np.float64)
    if hit.shape != (n,) or pts.shape != (n, 3) or nrm.shape != (n, 3):
        raise ValueError(
            f"ray_cast must return hit ({n},), points ({n}, 3) and normals ({n}, 3), got {hit.shape}, {pts.shape}, {nrm.shape}"
        )
    return hit, pts, nrm


def _probe(
    ray_cast: RayCast, origins: FloatArray, distance: FloatArray
) -> tuple[BoolArray, FloatArray, FloatArray]:
    hit, pts, nrm = _cast(ray_cast, origins, distance)
    # A hit with a non-finite point or normal, or beyond the probe, counts as a miss.
    ok = hit & np.isfinite(np.concatenate([pts, nrm], axis=1)).all(axis=1) & (np.sqrt(np.einsum("ij,ij->i", nrm, nrm)) > 1e-9)
    ok &= (origins[:, 2] - pts[:, 2]) <= distance * (1.0 + 1e-9)
    if ok.all():
        return ok, pts, nrm
    return ok, np.where(ok[:, None], pts, 0.0), np.where(ok[:, None], nrm, _Z)


def _probe_rows(
    ray_cast: RayCast, origins: list[list[float]], distance: float
) -> tuple[list[bool], list[list[float]], list[list[float]]]:
    """:func:`_probe` of a few rays of one probe length, in plain floats after the cast."""
    hit_a, pts_a, nrm_a = _cast(ray_cast, np.array(origins), np.full(len(origins), distance))
    hits: list[bool] = []
    points: list[list[float]] = pts_a.tolist()
    normals: list[list[float]] = nrm_a.tolist()
    limit = distance * (1.0 + 1e-9)
    for i, (h, p, n, o) in enumerate(zip(hit_a.tolist(), points, normals, origins, strict=True)):
        ok = (
            h
            and all(math.isfinite(v) for v in (*p, *n))
            and math.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]) > 1e-9
            and o[2] - p[2] <= limit
        )
        hits.append(ok)
        if not ok:
            points[i], normals[i] = [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]
    return hits, points, normals


def _alpha(dt: float | None, tau: float) -> float:
    """Smoothing response for one frame: 1 (snap) without a usable dt or time constant."""
    if tau <= 0.0 or dt is None or not math.isfinite(dt) or dt < 0.0:
        return 1.0
    return 1.0 - math.exp(-dt / tau)


Vec = tuple[float, float, float]


def _smooth_ground(
    rig: GroundRig,
    memory: GroundMemory,
    table: list[list[list[float]]],
    floor: list[float],
    scale: list[float],
    up: list[list[float]],
    valid: list[bool],
    dts: list[float] | None,
    smooth_time: float,
    pelvis_smooth_time: float,
) -> tuple[list[list[float]], list[list[list[float]]], list[list[float]], list[list[float]], list[float], list[list[bool]]]:
    """The ground under each foot, smoothed frame after frame (the state carries across calls
    in ``memory``), and the lifts and pelvis offset it asks for. The plane is what is smoothed,
    not the lift: on a planar slope it does not change while the body moves over it, so a
    planted foot does not lag, while a step edge or a missed ray still eases in.

    ``table[t][leg]`` holds whether the ray hit, the hit point and normal (world, 3 each), the
    animated clearance, the sole and ankle (world, 3 each) and the hip, knee and ankle
    (skeleton, 3 each); per frame, ``floor`` is the animation's floor height (world),
    ``scale`` the world units per skeleton unit vertically and ``up`` world up in skeleton space.

    Returns per leg and frame the applied tilt (world radians), the smoothed normal, the raw and
    smoothed lifts (skeleton units; NaN on skipped frames), per frame the pelvis offset, and per
    leg and frame whether the hit normal was steeper than the tilt allows."""
    frames = len(table)
    count = len(rig.legs)
    tilt = [[0.0] * frames for _ in range(count)]
    normal: list[list[list[float]]] = [[[0.0, 0.0, 1.0] for _ in range(frames)] for _ in range(count)]
    raw = [[math.nan] * frames for _ in range(count)]
    lift_s = [[math.nan] * frames for _ in range(count)]
    capped = [[False] * frames for _ in range(count)]
    pelvis_off = [math.nan] * frames
    n_mem, d_mem, pelvis_mem = memory.normal, memory.offset, memory.pelvis
    max_tilt, probe_height, max_offset = rig.max_tilt, rig.probe_height, rig.max_offset
    for t in range(frames):
        rows = table[t]
        # Steepness is reported for every frame the ray hit; the rest waits for a usable pose.
        for k in range(count):
            row = rows[k]
            if row[0]:
                nz = row[6] / _length(row[4], row[5], row[6])
                capped[k][t] = math.acos(min(max(abs(nz), -1.0), 1.0)) > max_tilt + 1e-12
        if not valid[t]:
            # A frame with a non-finite pose is skipped and leaves the memory alone.
            continue
        dt = None if dts is None else dts[t]
        a_foot = _alpha(dt, smooth_time)
        sc = scale[t]
        bound = max_offset * sc
        reach = probe_height * sc
        n_new: list[Vec] = []
        d_new: list[float] = []
        lows: list[float] = []
        for k in range(count):
            (hit, px, py, pz, rx, ry, rz, keep, sx, sy, sz, ax, ay, az) = rows[k][:14]
            # The ground under the foot as a world plane n . p = d, its normal pointing up; a
            # missed ray aims at the plane that gives no lift (the animation's floor, level).
            if hit:
                length = _length(rx, ry, rz)
                ntx, nty, ntz = rx / length, ry / length, rz / length
                if ntz < 0.0:
                    ntx, nty, ntz = -ntx, -nty, -ntz
                d_t = ntx * px + nty * py + ntz * pz
            else:
                ntx, nty, ntz, d_t = 0.0, 0.0, 1.0, floor[t]
            if n_mem is None or d_mem is None:
                nx, ny, nz, d_s = ntx, nty, ntz, d_t
            else:
                mx, my, mz = n_mem[k]
                vx, vy, vz = mx + a_foot * (ntx - mx), my + a_foot * (nty - my), mz + a_foot * (ntz - mz)
                length = _length(vx, vy, vz)
                nx, ny, nz = vx / length, vy / length, vz / length
                d_s = d_mem[k] + a_foot * (d_t - d_mem[k])
            n_new.append((nx, ny, nz))
            d_new.append(d_s)
            # Tilt from up toward the smoothed normal, capped, fading with clearance.
            angle = min(math.acos(min(max(nz, -1.0), 1.0)), max_tilt)
            fade = min(max(1.0 - max(keep, 0.0) / reach, 0.0), 1.0)
            applied = angle * fade
            tilt[k][t] = applied
            normal[k][t] = [nx, ny, nz]
            # About up x normal = (-ny, nx, 0), unit.
            length = math.sqrt(ny * ny + nx * nx)
            length = length if length > _EPS else 1.0
            half = 0.5 * applied
            sine = math.sin(half)
            w, qx, qy = math.cos(half), sine * (-ny / length), sine * (nx / length)
            # The sole turned about the ankle: v + w t + q x t with t = 2 q x v (q has no z).
            vx, vy, vz = sx - ax, sy - ay, sz - az
            tx, ty, tz = 2.0 * (qy * vz), 2.0 * (-(qx * vz)), 2.0 * (qx * vy - qy * vx)
            ux, uy, uz = vx + w * tx + qy * tz, vy + w * ty - qx * tz, vz + w * tz + (qx * ty - qy * tx)
            ux, uy, uz = ux + ax, uy + ay, uz + az
            # The vertical move that puts the tilted sole at its animated clearance above the
            # plane (measured along the normal), and the one that just touches the ground
            # actually hit. A sole animated below its floor is raised by the touch bound where
            # there is ground, and left alone where there is none. The sole's height above the
            # hit plane serves both the target and the touch bound.
            above_t = ntx * ux + nty * uy + ntz * uz - d_t
            slope_t = max(ntz, 1e-6)
            lift = min(max((keep - (nx * ux + ny * uy + nz * uz - d_s)) / max(nz, 1e-6), -bound), bound)
            target = min(max((keep - above_t) / slope_t, -bound), bound)
            if hit:
                lift = max(lift, min(max(-above_t / slope_t, -bound), bound))
            # Rounding is no reason to move a foot (or, through the lowest foot, the pelvis) on
            # the floor the animation was made on: neither the plane arithmetic's nor the hit's,
            # which Blender's ray casts give in single precision (a few units in the last place
            # of the ray's height above the world origin).
            if abs(lift) < _HIT_ROUNDING * (abs(sz) + reach):
                lift = 0.0
            raw[k][t] = target / sc
            lows.append(lift / sc)
            lift_s[k][t] = lows[-1]
        n_mem, d_mem = n_new, d_new
        if rig.pelvis >= 0:
            ux, uy, uz = up[t]
            goal = min(0.0, min(lows))
            p = goal if pelvis_mem is None else pelvis_mem + _alpha(dt, pelvis_smooth_time) * (goal - pelvis_mem)
            # Lower further, at once, if a leg could not reach its target otherwise: solve
            # |hip - d up - goal|^2 = reach^2 for the smallest drop d.
            most = -math.inf
            for k in range(count):
                hx, hy, hz, kx, ky, kz, fx, fy, fz = rows[k][14:23]
                # How far the leg may be asked to extend: just short of straight, or as far as
                # the animation itself extends it (a straight mocap leg is not a reason to lower
                # the pelvis).
                extent = max(
                    (_distance(hx, hy, hz, kx, ky, kz) + _distance(kx, ky, kz, fx, fy, fz)) * (1.0 - 1e-6),
                    _distance(hx, hy, hz, fx, fy, fz),
                )
                s = lows[k]
                wx = hx + p * ux - (fx + s * ux)
                wy = hy + p * uy - (fy + s * uy)
                wz = hz + p * uz - (fz + s * uz)
                along = wx * ux + wy * uy + wz * uz
                disc = along * along - ((wx * wx + wy * wy + wz * wz) - extent * extent)
                need = along - math.sqrt(max(disc, 0.0)) if disc >= 0.0 else along
                # A leg already at its allowed extent asks for rounding, not for a drop.
                most = max(most, need if need > 1e-9 * extent else 0.0)
            p = min(p - most, 0.0)
            pelvis_mem = p
            pelvis_off[t] = p
        else:
            pelvis_off[t] = 0.0
    memory.normal, memory.offset, memory.pelvis = n_mem, d_mem, pelvis_mem
    return tilt, normal, raw, lift_s, pelvis_off, capped


def _distance(ax: float, ay: float, az: float, bx: float, by: float, bz: float) -> float:
    dx, dy, dz = bx - ax, by - ay, bz - az
    return math.sqrt(dx * dx + dy * dy + dz * dz)


def _length(x: float, y: float, z: float) -> float:
    """Length of a vector, or 1 for one too short to have a direction (it is then left as is)."""
    n = math.sqrt(x * x + y * y + z * z)
    return n if n > _EPS else 1.0


@dataclass(frozen=True)
class _Plan:
    """What the legs' solve needs of a probed and smoothed run of frames: per frame ``valid``
    ``(T,)``, world up in skeleton space ``up`` ``(T, 3)`` and the object's linear part ``lin``
    ``(T, 3, 3)``; per leg and frame the hip, knee and ankle ``pts`` ``(L, T, 3, 3)``, the foot's
    placement ``feet`` ``(L, T, 4, 4)``, the smoothed ``lift`` and ``tilt`` ``(L, T)`` and tilt
    normal ``(L, T, 3)``; the pelvis offset ``(T,)``; and the solve's per-frame figures."""

    valid: BoolArray
    up: FloatArray
    lin: FloatArray
    pts: FloatArray
    feet: FloatArray
    lift: FloatArray
    tilt: FloatArray
    tilt_normal: FloatArray
    pelvis_offset: FloatArray
    figures: dict[str, Any]


def adapt_to_ground(
    skeleton: Skeleton,
    rig: GroundRig,
    pose: PoseBuffers,
    placement: FloatArray,
    ray_cast: RayCast,
    memory: GroundMemory,
    dts: FloatArray | None,
    smooth_time: float,
    pelvis_smooth_time: float,
    tolerance: float = 1e-6,
) -> GroundSolve:
    """Run ground adaptation over the frames of ``pose`` (read, not written). ``placement``
    ``(T, 4, 4)`` is the object's world matrix per frame; ``memory`` carries the smoothing
    across calls; ``dts`` ``(T,)`` the time before each frame (``None``: no smoothing).

    A single frame (the live preview) on a skeleton without child frames is probed and smoothed
    in plain floats (:func:`_adapt_one`, the same steps); the legs, when some must move, are
    solved by the same arrays either way (:func:`_solve_legs`)."""
    frames = pose.frames
    legs = rig.legs
    count = len(legs)
    if placement.shape != (frames, 4, 4):
        raise ValueError(f"placement must have shape ({frames}, 4, 4), got {placement.shape}")
    if frames == 1 and skeleton.child_frames is None:
        return _adapt_one(skeleton, rig, pose, placement, ray_cast, memory, dts, smooth_time, pelvis_smooth_time, tolerance)
    lin = placement[:, :3, :3]
    up_raw = np.linalg.solve(lin, _Z[None])
    scale = 1.0 / np.linalg.norm(up_raw, axis=1)  # world units per skeleton unit, vertically
    up = up_raw * scale[:, None]  # (T, 3) world up in skeleton space

    kin: PathKinematics | None = None
    if skeleton.child_frames is None:
        # Each joint's pivot is then the origin of its placement: hip, knee and ankle and the
        # foot's placement come from the pose's own placements (mostly cached by the controls
        # before this one), and the legs' path kinematics are built only if a leg must move.
        placed = np.array([[pose.world(j) for j in leg.joints] for leg in legs])  # (L, 3, T, 4, 4)
        pts = np.swapaxes(placed[..., :3, 3], 1, 2)  # (L, T, 3, 3)
        feet = placed[:, 2]
    else:
        kin = PathKinematics(skeleton, [leg.path for leg in legs], pose)
        walked, shins = kin.walk()
        pts = walked.reshape(count, frames, 3, 3)
        # Each foot placed by its shin, which the walk down the leg has just placed.
        feet = shins.reshape(count, frames, 4, 4) @ np.swapaxes(pose.attached[:, [leg.foot for leg in legs]], 0, 1)
    ankle = pts[:, :, 2]  # (L, T, 3)
    sole = np.einsum("ltij,lj->lti", feet[..., :3, :3], np.stack([leg.sole for leg in legs])) + feet[..., :3, 3]
    floor_point = rig.floor_point

    # Probe in world space.
    sole_w = np.einsum("tij,ltj->lti", lin, sole) + placement[None, :, :3, 3]
    ankle_w = np.einsum("tij,ltj->lti", lin, ankle) + placement[None, :, :3, 3]
    floor_w = (placement[:, :3, :3] @ floor_point + placement[:, :3, 3])[:, 2]  # (T,)
    clearance_w = sole_w[..., 2] - floor_w[None]
    reach = rig.probe_height * scale
    origins = sole_w.copy()
    origins[..., 2] += reach[None]
    hit_f, pts_w, nrm_w = _probe(ray_cast, origins.reshape(-1, 3), np.tile(2.0 * reach, count))
    hit = hit_f.reshape(count, frames)
    # Per frame and leg, what the per-foot arithmetic reads, as Python floats in one table: it
    # is a handful of operations per foot, and the smoothing recursion is sequential by nature,
    # while a live frame pays per numpy call, not per float operation.
    table = np.concatenate(
        [hit[..., None], pts_w.reshape(count, frames, 3), nrm_w.reshape(count, frames, 3), clearance_w[..., None],
         sole_w, ankle_w, pts.reshape(count, frames, 9)],
        axis=-1,
    )
    valid = np.isfinite(table).all(axis=(0, 2)) & np.isfinite(up).all(axis=1)
    smoothed = _smooth_ground(
        rig, memory, table.transpose(1, 0, 2).tolist(), floor_w.tolist(), scale.tolist(), up.tolist(), valid.tolist(),
        None if dts is None else dts.tolist(), smooth_time, pelvis_smooth_time,
    )
    tilt_w, tilt_normal, raw, lift_s, pelvis_off, capped = (np.array(a) for a in smoothed)
    figures: dict[str, Any] = {
        "hit": hit.T.copy(), "lift": lift_s.T.copy(), "raw_lift": raw.T.copy(), "tilt": tilt_w.T.copy(),
        "capped": capped.T.copy(), "clearance": (clearance_w / scale[None]).T.copy(), "pelvis_offset": pelvis_off,
    }
    level = valid.all() and not lift_s.any() and not (rig.pelvis >= 0 and pelvis_off.any())
    if level and not (tilt_w >= 1e-12).any():
        return _as_animated(rig, pose, figures)
    plan = _Plan(valid, up, lin, pts, feet, lift_s, tilt_w, tilt_normal, pelvis_off, figures)
    return _solve_legs(skeleton, rig, pose, plan, kin, bool(level), tolerance)


def _adapt_one(
    skeleton: Skeleton,
    rig: GroundRig,
    pose: PoseBuffers,
    placement: FloatArray,
    ray_cast: RayCast,
    memory: GroundMemory,
    dts: FloatArray | None,
    smooth_time: float,
    pelvis_smooth_time: float,
    tolerance: float,
) -> GroundSolve:
    """:func:`adapt_to_ground` of one frame on a skeleton whose pivots are its placements'
    origins (no child frames), its probe and level case in plain floats: the same steps as
    the arrays, on so few numbers that each numpy call costs more than its arithmetic."""
    legs = rig.legs
    place: list[list[float]] = placement[0].tolist()
    up_raw = solve3(place, (0.0, 0.0, 1.0))
    if up_raw is None:
        # A singular or non-finite placement: whatever the arrays make of it.
        up_raw = np.linalg.solve(placement[:, :3, :3], _Z[None])[0].tolist()
    sc = 1.0 / math.sqrt(up_raw[0] * up_raw[0] + up_raw[1] * up_raw[1] + up_raw[2] * up_raw[2])
    up = [up_raw[0] * sc, up_raw[1] * sc, up_raw[2] * sc]
    r0, r1, r2 = place[0], place[1], place[2]

    def to_world(v: Sequence[float]) -> list[float]:
        x, y, z = v[0], v[1], v[2]
        return [r[0] * x + r[1] * y + r[2] * z + r[3] for r in (r0, r1, r2)]

    fp = rig.floor_point.tolist()
    floor_w = r2[0] * fp[0] + r2[1] * fp[1] + r2[2] * fp[2] + r2[3]
    reach = rig.probe_height * sc
    placed: list[list[Mat]] = [[pose.world(j)[0].tolist() for j in leg.joints] for leg in legs]
    rows: list[list[float]] = []
    origins: list[list[float]] = []
    for leg, placements in zip(legs, placed, strict=True):
        # The pivots of hip, knee and ankle are their placements' origins.
        hip, knee, ankle = ([m[0][3], m[1][3], m[2][3]] for m in placements)
        sx, sy, sz = leg.sole.tolist()
        sole = [r[0] * sx + r[1] * sy + r[2] * sz + r[3] for r in placements[2][:3]]
        sole_w = to_world(sole)
        origins.append([sole_w[0], sole_w[1], sole_w[2] + reach])
        rows.append([*sole_w, *to_world(ankle), *hip, *knee, *ankle])
    hits, points, normals = _probe_rows(ray_cast, origins, 2.0 * reach)
    # The table of the arrays' route, row by row: hit, hit point and normal, clearance, sole and
    # ankle (world), hip, knee and ankle (skeleton).
    table = [
        [1.0 if h else 0.0, *p, *n, row[2] - floor_w, *row] for h, p, n, row in zip(hits, points, normals, rows, strict=True)
    ]
    valid = all(math.isfinite(v) for row in table for v in row) and all(math.isfinite(v) for v in up)
    tilt_w, tilt_normal, raw, lift_s, pelvis_off, capped = _smooth_ground(
        rig, memory, [table], [floor_w], [sc], [up], [valid], None if dts is None else dts.tolist(), smooth_time, pelvis_smooth_time
    )
    figures: dict[str, Any] = {
        "hit": np.array([hits]), "lift": np.array([[k[0] for k in lift_s]]), "raw_lift": np.array([[k[0] for k in raw]]),
        "tilt": np.array([[k[0] for k in tilt_w]]), "capped": np.array([[k[0] for k in capped]]),
        "clearance": np.array([[row[7] / sc for row in table]]), "pelvis_offset": np.array(pelvis_off),
    }
    level = valid and not any(k[0] for k in lift_s) and not (rig.pelvis >= 0 and pelvis_off[0])
    if level and not any(k[0] >= 1e-12 for k in tilt_w):
        return _as_animated(rig, pose, figures)
    placed_a = np.array(placed)[:, None]  # (L, 1, 3, 4, 4)
    plan = _Plan(
        np.array([valid]), np.array([up]), placement[:, :3, :3], placed_a[..., :3, 3], placed_a[:, :, 2],
        np.array(lift_s), np.array(tilt_w), np.array(tilt_normal), np.array(pelvis_off), figures,
    )
    return _solve_legs(skeleton, rig, pose, plan, None, level, tolerance)


def _as_animated(rig: GroundRig, pose: PoseBuffers, figures: dict[str, Any]) -> GroundSolve:
    """Nothing lifted or tilted and the pelvis where it was (the character on its own floor):
    every leg keeps its animated rotations, which is what the solve gives a leg already at its
    target."""
    pelvis = pose.translations[:, rig.pelvis].copy() if rig.pelvis >= 0 else None
    residual = np.zeros((pose.frames, len(rig.legs)))
    return GroundSolve(rotations=pose.rotations[:, list(rig.written)], pelvis_translation=pelvis, residual=residual, **figures)


def _solve_legs(
    skeleton: Skeleton, rig: GroundRig, pose: PoseBuffers, plan: _Plan, kin: PathKinematics | None, level: bool, tolerance: float
) -> GroundSolve:
    """Lower the pelvis and solve the legs toward their lifted ankles, feet tilted (steps 5-6
    of the module docstring), for frames some foot or the pelvis moves on."""
    frames = pose.frames
    legs = rig.legs
    count = len(legs)
    valid, up, lin, pts, feet = plan.valid, plan.up, plan.lin, plan.pts, plan.feet
    lift_s, tilt_w, tilt_normal, pelvis_off = plan.lift, plan.tilt, plan.tilt_normal, plan.pelvis_offset
    ankle = pts[:, :, 2]
    pelvis_tr: FloatArray | None = None
    if kin is None:
        kin = PathKinematics(skeleton, [leg.path for leg in legs], pose)
    if level:
        # Nothing lifted and the pelvis where it was, only feet tilted: each ankle's target is
        # where it is, which the solve keeps as it is (the same arithmetic below gives exactly
        # that), so the legs need no pole and no rebased pelvis.
        if rig.pelvis >= 0:
            pelvis_tr = pose.translations[:, rig.pelvis].copy()
        solve = solve_path_ik(kin, kin.points()[:, -1], solver="two_bone", tolerance=tolerance)
    else:
        work = pose.copy()
        if rig.pelvis >= 0:
            parent = int(skeleton.parents[rig.pelvis])
            frame = skeleton.parent_frames[rig.pelvis]
            base = frame if parent < 0 else pose.world(parent) @ frame
            base_lin = np.broadcast_to(base[..., :3, :3], (frames, 3, 3))
            drop = np.where(valid, pelvis_off, 0.0)
            shift = np.linalg.solve(base_lin, (drop[:, None] * np.where(valid[:, None], up, 0.0))[..., None])[..., 0]
            pelvis_tr = pose.translations[:, rig.pelvis] + shift
            work.set_translations([rig.pelvis], pelvis_tr[:, None])
        # Only the pelvis (above every leg) moved: the legs' own parts are kin's.
        kin2 = kin.rebased(work)
        # Skipped frames aim at their own ankle so nothing non-finite enters the solve; they are
        # marked non-finite again at the end.
        lifted = ankle + np.where(valid[None], lift_s, 0.0)[..., None] * up[None]
        targets = (lifted if valid.all() else np.where(valid[None, :, None], lifted, ankle)).reshape(-1, 3)
        points = kin2.points()
        pole: FloatArray | None = None
        # The solve keeps every leg whose ankle is within tolerance of its target (the same
        # test as its own): the pole is needed only when some leg moves.
        gap = points[:, -1] - targets
        if not (np.sqrt(np.einsum("ti,ti->t", gap, gap)) <= tolerance).all():
            fwd_frame = (
                work.world(rig.facing_joint)[:, :3, :3] if rig.facing_joint >= 0 else np.broadcast_to(np.eye(3), (frames, 3, 3))
            )
            fwd = fwd_frame @ rig.forward
            fwd = fwd - np.einsum("ti,ti->t", fwd, up)[:, None] * up
            fwd_ok = np.linalg.norm(fwd, axis=1) > 1e-6
            # Facing straight up or down has no horizontal forward: the pole is then unusable
            # (NaN) and the solver keeps the existing bend.
            fwd = np.where(fwd_ok[:, None], _unit_rows(fwd), np.nan)
            lengths = kin.lengths().sum(axis=-1)
            pole = points[:, 1] + np.tile(fwd, (count, 1)) * lengths[:, None]
        solve = solve_path_ik(kin2, targets, solver="two_bone", pole=pole, tolerance=tolerance)
    # A leg left as it was with no tilt keeps its foot's rotation bit for bit (the round trip
    # through the world orientation would cost it rounding, and mark it changed).
    untouched = solve.kept.reshape(count, frames) & (tilt_w < 1e-12)
    animated_feet = np.swapaxes(pose.rotations[:, [leg.foot for leg in legs]], 0, 1)
    if untouched.all():
        foot_rot = animated_feet
    else:
        # The tilt as a skeleton-space turn: from up toward the smoothed normal (normals map
        # with the transpose of the object's linear part).
        n_skel = _unit_rows(np.einsum("tji,ltj->lti", lin, tilt_normal))
        axis_skel = _unit_rows(cross(np.broadcast_to(up, n_skel.shape), n_skel))
        tilt_s = np.concatenate([np.cos(0.5 * tilt_w)[..., None], np.sin(0.5 * tilt_w)[..., None] * axis_skel], axis=-1)
        foot_lin = feet[..., :3, :3]
        foot_lin = foot_lin / np.linalg.norm(foot_lin, axis=-2, keepdims=True)
        wanted = quat_mul(tilt_s, quat_from_rotation_matrix(foot_lin)).reshape(-1, 4)
        foot_rot = end_rotations(skeleton, [leg.foot for leg in legs], solve.tip, wanted).reshape(count, frames, 4)
        foot_rot = np.where(untouched[..., None], animated_feet, foot_rot)
    rot = np.empty((frames, 3 * count, 4))
    leg_rot = solve.rotations.reshape(count, frames, 2, 4)
    for k in range(count):
        rot[:, 3 * k : 3 * k + 2] = leg_rot[k]
        rot[:, 3 * k + 2] = foot_rot[k]
    rot[~valid] = np.nan
    if pelvis_tr is not None:
        pelvis_tr[~valid] = np.nan
    residual = solve.residual.reshape(count, frames).T.copy()
    return GroundSolve(rotations=rot, pelvis_translation=pelvis_tr, residual=residual, **plan.figures)


def _rotate_rows(q: FloatArray, v: FloatArray) -> FloatArray:
    """Rotate ``v`` ``(L, 3)`` by ``q`` ``(L, 4)`` row by row."""
    w = q[:, :1]
    xyz = q[:, 1:]
    t = 2.0 * cross(xyz, v)
    out: FloatArray = v + w * t + cross(xyz, t)
    return out
