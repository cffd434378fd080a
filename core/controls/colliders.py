"""Spring colliders (docs/controls.md#colliders): spheres, capsules and planes that spring chains do
not pass through, and the inside variants that keep them in.

Conventions: a collider is attached to a joint; its ``offset`` (and a capsule's ``tail``, a
plane's ``normal``) are in that joint's placement frame, so it follows the animated pose as the
chain's points do. Placed in world space per frame (the armature object's placement applied,
radii scaled by the placement's uniform scale), a collider is one flat tuple
``(code, ax, ay, az, bx, by, bz, radius)``: ``a`` the centre (capsule: first end; plane: a point
on it), ``b`` the capsule's second end or the plane's unit normal. Between two frames the spring
integrator interpolates ``a`` and ``b`` linearly at each fixed step (a plane's normal made unit
again), as it does the chain's targets.

Each segment end point ``x`` with radius ``r`` (its own, per segment) hanging from the pivot ``p``
at length ``L`` must stay where the collider allows: outside a sphere (``|x - c| >= R + r``), a
capsule (``|x - q(x)| >= R + r``, ``q`` the closest point of its axis) or in front of a plane
(``(x - a) . n >= r``); inside an inner sphere or capsule (``|x - c| <= R - r``). On the sphere of
radius ``L`` about ``p`` each of these is a cone about one axis (``u . axis >= m``, ``u`` the
segment's direction), so a point that is not allowed is turned onto the cone's edge, in the
plane of ``u`` and the axis: the nearest allowed point at the segment's length, exactly, for
spheres and planes; a capsule is treated as the sphere about ``q(x)`` and checked again, as is a
point one collider pushed into another (a few sweeps at most). Where nothing at that length is
allowed (the pivot itself deep inside) the point goes as far out as the length lets it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import RigError
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton

KINDS = ("sphere", "capsule", "plane", "inside_sphere", "inside_capsule")
SPHERE, CAPSULE, PLANE, INSIDE_SPHERE, INSIDE_CAPSULE = range(5)
#: A penetration below this (units) counts as none: the cone edge is exact up to rounding.
TOLERANCE = 1e-9
#: Sweeps over a chain's colliders per point and step: a point pushed out of one collider into
#: another is pushed again; two contacts at once settle in two, a capsule's curve in two or three.
SWEEPS = 4

Vec = tuple[float, float, float]
#: A collider placed in world space: ``(code, ax, ay, az, bx, by, bz, radius)``.
Placed = tuple[int, float, float, float, float, float, float, float]

_EPS = 1e-12


def _vec(value: ArrayLike, what: str) -> Vec:
    a = np.asarray(value, dtype=np.float64).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise RigError(f"{what} must be a finite vector of shape (3,), got {a.tolist()}")
    return (float(a[0]), float(a[1]), float(a[2]))


@dataclass(frozen=True)
class Collider:
    """A sphere, capsule or plane attached to a joint (shared definition; build it with
    :meth:`build`). ``offset``: the centre, first end or point on the plane; ``tail``: a
    capsule's second end, or a plane's normal; both in the joint's placement frame."""

    kind: str
    joint: int
    offset: Vec
    tail: Vec
    radius: float
    name: str = ""

    @property
    def code(self) -> int:
        return KINDS.index(self.kind)

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        kind: str,
        joint: int | str,
        *,
        offset: ArrayLike = (0.0, 0.0, 0.0),
        tail: ArrayLike | None = None,
        normal: ArrayLike | None = None,
        radius: float = 0.0,
        name: str = "",
    ) -> Collider:
        """A collider of ``kind`` (one of :data:`KINDS`) on ``joint`` (index or name). Spheres
        and capsules need a radius above 0, capsules a ``tail``, planes a ``normal`` (default
        the joint's +Y); a missing joint or a bad size is refused naming the collider."""
        label = f"collider {name!r}" if name else f"the {kind.replace('_', ' ')} collider"
        if kind not in KINDS:
            raise RigError(f"{label}: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if isinstance(joint, str):
            j = skeleton.find(joint)
            if j is None:
                raise RigError(f"{label} is on the bone {joint!r}, which is not in the armature")
        else:
            j = int(joint)
            if not 0 <= j < len(skeleton):
                raise RigError(f"{label} is on joint {j}, which is not in the skeleton ({len(skeleton)} joints)")
        off = _vec(offset, f"{label}: the offset")
        r = float(radius)
        if kind == "plane":
            n = _vec((0.0, 1.0, 0.0) if normal is None else normal, f"{label}: the normal")
            length = math.sqrt(n[0] ** 2 + n[1] ** 2 + n[2] ** 2)
            if length < 1e-9:
                raise RigError(f"{label}: the normal must not be zero")
            if not (math.isfinite(r) and r >= 0.0):
                raise RigError(f"{label}: a plane's radius (thickness) must be >= 0, got {r}")
            return cls(kind, j, off, (n[0] / length, n[1] / length, n[2] / length), r, name)
        if not (math.isfinite(r) and r > 0.0):
            raise RigError(f"{label}: the radius must be above 0, got {r}")
        end = off
        if kind in ("capsule", "inside_capsule"):
            if tail is None:
                raise RigError(f"{label}: a capsule needs a tail (its second end)")
            end = _vec(tail, f"{label}: the tail")
        return cls(kind, j, off, end, r, name)


@dataclass(frozen=True)
class ColliderGroup:
    """Named colliders a spring chain chooses to collide with as a whole."""

    name: str
    colliders: tuple[Collider, ...]


def select_groups(groups: Sequence[ColliderGroup], names: Sequence[str]) -> tuple[Collider, ...]:
    """The colliders of the groups called ``names`` (each once, in group order); an unknown name
    is refused naming the groups there are."""
    by_name = {g.name: g for g in groups}
    out: list[Collider] = []
    for name in names:
        if name not in by_name:
            raise RigError(f"no collider group called {name!r}; there are {sorted(by_name) or 'none'}")
        for c in by_name[name].colliders:
            if c not in out:
                out.append(c)
    return tuple(out)


def place(colliders: Sequence[Collider], placements: FloatArray) -> list[list[Placed]]:
    """The colliders placed at each frame: ``placements`` ``(T, C, 4, 4)`` are the world
    placements of each collider's joint (object placement included). Returns ``T`` lists of
    :data:`Placed` tuples."""
    if not colliders:
        return [[] for _ in range(placements.shape[0])]
    off, tail, planes, radii, codes = _layout(tuple(colliders))
    lin = placements[..., :3, :3]
    org = placements[..., :3, 3]
    a = np.einsum("tcij,cj->tci", lin, off) + org
    b = np.einsum("tcij,cj->tci", lin, tail)
    b = np.where(planes[None, :, None], b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), _EPS), b + org)
    # Radii scale with the placement (uniform scale: the cube root of the determinant).
    scale = np.cbrt(np.abs(np.linalg.det(lin)))
    radius = scale * radii
    out: list[list[Placed]] = []
    for at, bt, rt in zip(a.tolist(), b.tolist(), radius.tolist(), strict=True):
        out.append([(k, *p, *q, r) for k, p, q, r in zip(codes, at, bt, rt, strict=True)])
    return out


def place_one(
    colliders: Sequence[Collider], placements: Sequence[Sequence[Sequence[float]]], scales: Sequence[float]
) -> list[Placed]:
    """:func:`place` of one frame in plain floats (a live frame: arrays this small cost more per
    numpy call than their arithmetic): ``placements`` are each collider's joint placement as
    rows (the top three of a 4 x 4 are read), ``scales`` their uniform scales (the cube root of
    the determinant, which the caller takes as :func:`place` does). The same placements bit for bit."""
    out: list[Placed] = []
    for c, m, scale in zip(colliders, placements, scales, strict=True):
        r0, r1, r2 = m[0], m[1], m[2]
        o0, o1, o2 = c.offset
        t0, t1, t2 = c.tail
        ax = r0[0] * o0 + r0[1] * o1 + r0[2] * o2 + r0[3]
        ay = r1[0] * o0 + r1[1] * o1 + r1[2] * o2 + r1[3]
        az = r2[0] * o0 + r2[1] * o1 + r2[2] * o2 + r2[3]
        bx = r0[0] * t0 + r0[1] * t1 + r0[2] * t2
        by = r1[0] * t0 + r1[1] * t1 + r1[2] * t2
        bz = r2[0] * t0 + r2[1] * t1 + r2[2] * t2
        if c.kind == "plane":
            n = max(math.sqrt(bx * bx + by * by + bz * bz), _EPS)
            bx, by, bz = bx / n, by / n, bz / n
        else:
            bx, by, bz = bx + r0[3], by + r1[3], bz + r2[3]
        out.append((c.code, ax, ay, az, bx, by, bz, scale * c.radius))
    return out


@functools.lru_cache(maxsize=256)
def _layout(colliders: tuple[Collider, ...]) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, tuple[int, ...]]:
    """The per-collider constants :func:`place` reads (offsets, tails, which are planes, radii,
    codes), built once per set of colliders rather than on every live frame (read only)."""
    off = np.array([c.offset for c in colliders])
    tail = np.array([c.tail for c in colliders])
    planes = np.array([c.kind == "plane" for c in colliders])
    radii = np.array([c.radius for c in colliders])
    return off, tail, planes, radii, tuple(c.code for c in colliders)


def between(c0: Placed, c1: Placed, s: float) -> Placed:
    """A placed collider at fraction ``s`` between two frames' placements."""
    a = (c0[1] + s * (c1[1] - c0[1]), c0[2] + s * (c1[2] - c0[2]), c0[3] + s * (c1[3] - c0[3]))
    b = (c0[4] + s * (c1[4] - c0[4]), c0[5] + s * (c1[5] - c0[5]), c0[6] + s * (c1[6] - c0[6]))
    if c0[0] == PLANE:
        n = math.sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2])
        if n > _EPS:
            b = (b[0] / n, b[1] / n, b[2] / n)
        else:
            b = (c1[4], c1[5], c1[6])
    return (c0[0], a[0], a[1], a[2], b[0], b[1], b[2], c0[7] + s * (c1[7] - c0[7]))


def near(c0: Placed, c1: Placed, r0: Vec, r1: Vec, reach: float) -> bool:
    """Whether a chain whose points stay within ``reach`` of its root (at ``r0`` then ``r1``
    over the window) may touch the collider over the window (both moving linearly): the
    closest approach of the root to the collider's centre against the sum of the sizes; a
    plane when the root comes within twice the reach of it. Inner colliders always count."""
    code = c0[0]
    if code in (INSIDE_SPHERE, INSIDE_CAPSULE):
        return True
    if code == PLANE:
        # Height of the root over the plane at either end of the window; the plane turning
        # within one frame is small, so twice the reach is a safe margin.
        h0 = (r0[0] - c0[1]) * c0[4] + (r0[1] - c0[2]) * c0[5] + (r0[2] - c0[3]) * c0[6] - c0[7]
        h1 = (r1[0] - c1[1]) * c1[4] + (r1[1] - c1[2]) * c1[5] + (r1[2] - c1[3]) * c1[6] - c1[7]
        return min(h0, h1) <= 2.0 * reach
    extent = c0[7]
    if code == CAPSULE:
        hx, hy, hz = c0[4] - c0[1], c0[5] - c0[2], c0[6] - c0[3]
        extent += 0.5 * math.sqrt(hx * hx + hy * hy + hz * hz)
        d0x, d0y, d0z = 0.5 * (c0[1] + c0[4]) - r0[0], 0.5 * (c0[2] + c0[5]) - r0[1], 0.5 * (c0[3] + c0[6]) - r0[2]
        d1x, d1y, d1z = 0.5 * (c1[1] + c1[4]) - r1[0], 0.5 * (c1[2] + c1[5]) - r1[1], 0.5 * (c1[3] + c1[6]) - r1[2]
    else:
        d0x, d0y, d0z = c0[1] - r0[0], c0[2] - r0[1], c0[3] - r0[2]
        d1x, d1y, d1z = c1[1] - r1[0], c1[2] - r1[1], c1[3] - r1[2]
    ex, ey, ez = d1x - d0x, d1y - d0y, d1z - d0z
    ee = ex * ex + ey * ey + ez * ez
    s = 0.0 if ee < _EPS else min(max(-(d0x * ex + d0y * ey + d0z * ez) / ee, 0.0), 1.0)
    cx, cy, cz = d0x + s * ex, d0y + s * ey, d0z + s * ez
    return math.sqrt(cx * cx + cy * cy + cz * cz) <= reach + extent


def _closest_on_axis(c: Placed, x: Sequence[float]) -> Vec:
    ax, ay, az = c[1], c[2], c[3]
    ex, ey, ez = c[4] - ax, c[5] - ay, c[6] - az
    ee = ex * ex + ey * ey + ez * ez
    t = 0.0 if ee < _EPS else ((x[0] - ax) * ex + (x[1] - ay) * ey + (x[2] - az) * ez) / ee
    t = min(max(t, 0.0), 1.0)
    return (ax + t * ex, ay + t * ey, az + t * ez)


def depth(c: Placed, x: Sequence[float], r: float) -> float:
    """How far the point ``x`` of radius ``r`` is where ``c`` does not allow it (<= 0: allowed)."""
    code = c[0]
    if code == PLANE:
        return r - ((x[0] - c[1]) * c[4] + (x[1] - c[2]) * c[5] + (x[2] - c[3]) * c[6])
    if code in (CAPSULE, INSIDE_CAPSULE):
        qx, qy, qz = _closest_on_axis(c, x)
    else:
        qx, qy, qz = c[1], c[2], c[3]
    dx, dy, dz = x[0] - qx, x[1] - qy, x[2] - qz
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    if code in (SPHERE, CAPSULE):
        return c[7] + r - d
    return d - max(c[7] - r, 0.0)


def _cone(p: Sequence[float], x: Sequence[float], length: float, axis: Vec, m: float) -> Vec:
    """The point at ``length`` from ``p`` nearest ``x`` whose direction ``u`` from ``p`` has
    ``u . axis >= m`` (``axis`` unit; ``m > 1``: along the axis, the nearest to allowed)."""
    ux, uy, uz = x[0] - p[0], x[1] - p[1], x[2] - p[2]
    ax, ay, az = axis
    lu = math.sqrt(ux * ux + uy * uy + uz * uz)
    if lu > _EPS:
        ux, uy, uz = ux / lu, uy / lu, uz / lu
        c = ux * ax + uy * ay + uz * az
        if c >= m:
            return (p[0] + length * ux, p[1] + length * uy, p[2] + length * uz)
    else:
        ux, uy, uz, c = ax, ay, az, 1.0
    m = min(m, 1.0)
    wx, wy, wz = ux - c * ax, uy - c * ay, uz - c * az
    lw = math.sqrt(wx * wx + wy * wy + wz * wz)
    if lw < 1e-9:
        # Straight against the axis: any side will do; take one fixed by the axis alone.
        wx, wy, wz = (-ay, ax, 0.0) if abs(az) < 0.9 else (0.0, -az, ay)
        lw = math.sqrt(wx * wx + wy * wy + wz * wz)
    s = math.sqrt(max(1.0 - m * m, 0.0)) / lw
    return (
        p[0] + length * (m * ax + s * wx),
        p[1] + length * (m * ay + s * wy),
        p[2] + length * (m * az + s * wz),
    )


def _fix(c: Placed, p: Sequence[float], x: Sequence[float], length: float, r: float) -> Vec:
    """``x`` moved to where ``c`` allows it at ``length`` from ``p`` (see the module docstring)."""
    code = c[0]
    if code == PLANE:
        n: Vec = (c[4], c[5], c[6])
        h = (p[0] - c[1]) * n[0] + (p[1] - c[2]) * n[1] + (p[2] - c[3]) * n[2] - r
        return _cone(p, x, length, n, -h / length if length > _EPS else -math.inf)
    if code in (CAPSULE, INSIDE_CAPSULE):
        cx, cy, cz = _closest_on_axis(c, x)
    else:
        cx, cy, cz = c[1], c[2], c[3]
    ex, ey, ez = cx - p[0], cy - p[1], cz - p[2]
    d = math.sqrt(ex * ex + ey * ey + ez * ez)
    inner = code in (INSIDE_SPHERE, INSIDE_CAPSULE)
    big = max(c[7] - r, 0.0) if inner else c[7] + r
    if d < _EPS or length < _EPS:
        # The pivot on the centre: every direction is as far; move along the point's own.
        ux, uy, uz = x[0] - cx, x[1] - cy, x[2] - cz
        lu = math.sqrt(ux * ux + uy * uy + uz * uz)
        if lu < _EPS:
            return (x[0], x[1], x[2])
        target = min(big, length) if inner else max(big, 0.0)
        return (cx + ux / lu * target, cy + uy / lu * target, cz + uz / lu * target)
    # |x - centre| = big where the direction's cosine to the centre is cos*.
    cos_star = (length * length + d * d - big * big) / (2.0 * length * d)
    a: Vec = (ex / d, ey / d, ez / d)
    if inner:
        return _cone(p, x, length, a, cos_star)
    return _cone(p, x, length, (-a[0], -a[1], -a[2]), -cos_star)


#: A placed collider ready for the per-step tests: ``(cx, cy, cz, extent, detail)``, a bound (a
#: point farther than ``extent`` plus its radius from ``c`` cannot touch an outer sphere or
#: capsule; ``extent`` below 0: no bound) and ``detail = (code, ax, ay, az, ex, ey, ez, inv_ee,
#: radius, placed)`` with ``e`` a capsule's axis (``b - a``; a plane's normal) and ``inv_ee`` one
#: over its squared length (0 for a sphere).
Detail = tuple[int, float, float, float, float, float, float, float, float, Placed]
Prepared = tuple[float, float, float, float, Detail]


def _prepared(c: Placed) -> Prepared:
    code, ax, ay, az, bx, by, bz, radius = c
    if code == PLANE:
        return (0.0, 0.0, 0.0, -1.0, (code, ax, ay, az, bx, by, bz, 0.0, radius, c))
    if code == CAPSULE or code == INSIDE_CAPSULE:
        ex, ey, ez = bx - ax, by - ay, bz - az
        ee = ex * ex + ey * ey + ez * ez
        inv = 1.0 / ee if ee > _EPS else 0.0
        extent = radius + 0.5 * math.sqrt(ee) if code == CAPSULE else -1.0
        return (ax + 0.5 * ex, ay + 0.5 * ey, az + 0.5 * ez, extent, (code, ax, ay, az, ex, ey, ez, inv, radius, c))
    return (ax, ay, az, radius if code == SPHERE else -1.0, (code, ax, ay, az, 0.0, 0.0, 0.0, 0.0, radius, c))


def prepare(placed: Sequence[Placed]) -> list[Prepared]:
    """The colliders of ``placed`` ready for :func:`collide`."""
    return [_prepared(c) for c in placed]


#: A collider over a frame window, ready to be placed at any fraction of it: ``(code, a0, a1 -
#: a0, b0, b1 - b0, r0, r1 - r0, end)`` flattened (16 values), ``end`` the placement at the window's
#: end (a plane's normal where the interpolated one vanishes).
Span = tuple[int, float, float, float, float, float, float, float, float, float, float, float, float, float, float, Placed]


def spans(start: Sequence[Placed], end: Sequence[Placed]) -> list[Span]:
    """The colliders' placements at both ends of a frame window as :data:`Span` values: the
    differences :func:`between` takes at every step, taken once per window."""
    return [
        (
            c0[0], c0[1], c0[2], c0[3], c1[1] - c0[1], c1[2] - c0[2], c1[3] - c0[3],
            c0[4], c0[5], c0[6], c1[4] - c0[4], c1[5] - c0[5], c1[6] - c0[6], c0[7], c1[7] - c0[7], c1,
        )
        for c0, c1 in zip(start, end, strict=True)
    ]


def prepare_span(span: Span, s: float) -> Prepared:
    """:func:`prepare` of one collider at fraction ``s`` of the window ``span`` describes
    (:func:`between`, in line for every kind: the same arithmetic, ``c0 + s * (c1 - c0)``, then
    :func:`_prepared`'s)."""
    code, a0, a1, a2, da0, da1, da2, b0, b1, b2, db0, db1, db2, r0, dr, c1 = span
    ax, ay, az = a0 + s * da0, a1 + s * da1, a2 + s * da2
    radius = r0 + s * dr
    if code == SPHERE:
        return (ax, ay, az, radius, (SPHERE, ax, ay, az, 0.0, 0.0, 0.0, 0.0, radius, (SPHERE, ax, ay, az, ax, ay, az, radius)))
    bx, by, bz = b0 + s * db0, b1 + s * db1, b2 + s * db2
    if code == PLANE:
        n = math.sqrt(bx * bx + by * by + bz * bz)
        if n > _EPS:
            bx, by, bz = bx / n, by / n, bz / n
        else:
            bx, by, bz = c1[4], c1[5], c1[6]
        return (0.0, 0.0, 0.0, -1.0, (code, ax, ay, az, bx, by, bz, 0.0, radius, (code, ax, ay, az, bx, by, bz, radius)))
    placed: Placed = (code, ax, ay, az, bx, by, bz, radius)
    if code == INSIDE_SPHERE:
        return (ax, ay, az, -1.0, (code, ax, ay, az, 0.0, 0.0, 0.0, 0.0, radius, placed))
    ex, ey, ez = bx - ax, by - ay, bz - az
    ee = ex * ex + ey * ey + ez * ez
    inv = 1.0 / ee if ee > _EPS else 0.0
    extent = radius + 0.5 * math.sqrt(ee) if code == CAPSULE else -1.0
    return (ax + 0.5 * ex, ay + 0.5 * ey, az + 0.5 * ez, extent, (code, ax, ay, az, ex, ey, ez, inv, radius, placed))


def prepare_spans(window: Sequence[Span], s: float) -> list[Prepared]:
    """:func:`prepare_span` of every collider of the window :func:`spans` describes."""
    return [prepare_span(span, s) for span in window]


def motion(c0: Placed, c1: Placed, carried: Sequence[float] = (0.0, 0.0, 0.0)) -> float:
    """How far a point carried by ``carried`` can find its distance to a collider changed as
    the collider goes from ``c0`` to ``c1`` (linearly): the farthest either end moves other than
    by ``carried`` (a translation moving both changes nothing), plus the radius's change. A
    turning plane changes the distance of far points without bound: infinite."""
    if c0[0] == PLANE:
        return math.inf
    tx, ty, tz = carried
    da = math.sqrt((c1[1] - c0[1] - tx) ** 2 + (c1[2] - c0[2] - ty) ** 2 + (c1[3] - c0[3] - tz) ** 2)
    db = math.sqrt((c1[4] - c0[4] - tx) ** 2 + (c1[5] - c0[5] - ty) ** 2 + (c1[6] - c0[6] - tz) ** 2)
    return max(da, db) + abs(c1[7] - c0[7])


def clearance(x0: float, x1: float, x2: float, r: float, prepared: Sequence[Prepared]) -> tuple[float, int, float]:
    """How far the point ``(x0, x1, x2)`` of radius ``r`` is from where the colliders of
    ``prepared`` stop allowing it (below ``-TOLERANCE``: it touches one), which collider that
    is (its index) and how far it is from the others (infinite when there are none). Each term
    is a distance to a sphere, capsule or plane, so it changes by no more than the point or the
    collider moves: the springs skip the test while that cannot have used it up, and test the
    nearest collider alone while only its share has run out."""
    least = second = math.inf
    nearest = 0
    for i, one in enumerate(prepared):
        room = room_from(x0, x1, x2, r, one)
        if room < least:
            second = least
            least = room
            nearest = i
        elif room < second:
            second = room
    return least, nearest, second


def _from_axis(detail: Detail, x0: float, x1: float, x2: float) -> float:
    """The distance of ``(x0, x1, x2)`` from a sphere's centre or a capsule's axis."""
    _code, ax, ay, az, ex, ey, ez, inv, _radius, _c = detail
    dx, dy, dz = x0 - ax, x1 - ay, x2 - az
    if inv:
        t = (dx * ex + dy * ey + dz * ez) * inv
        t = 0.0 if t < 0.0 else (1.0 if t > 1.0 else t)
        dx, dy, dz = dx - t * ex, dy - t * ey, dz - t * ez
    return math.sqrt(dx * dx + dy * dy + dz * dz)


def room_from(x0: float, x1: float, x2: float, r: float, one: Prepared) -> float:
    """:func:`clearance`'s first value for the one collider ``one`` (the same arithmetic): the
    test a point resting on a collider makes at every step, so it is made without the loop."""
    detail = one[4]
    code, ax, ay, az, ex, ey, ez, _inv, radius, _c = detail
    if code == PLANE:
        return (x0 - ax) * ex + (x1 - ay) * ey + (x2 - az) * ez - r
    dist = _from_axis(detail, x0, x1, x2)
    if code <= CAPSULE:
        return dist - radius - r
    inner = radius - r
    return (inner if inner > 0.0 else 0.0) - dist


def collide_nearest(
    p: Sequence[float], x: Vec, length: float, r: float, nearest: Prepared, others: float
) -> tuple[Vec, float] | None:
    """:func:`collide` when only ``nearest`` can be touched: the other colliders are at least
    ``others`` (> 0) away from ``x``. While no move takes the point that far from ``x`` they
    stay untouched, so :func:`collide` with all of them would make the very same moves;
    ``None`` when one does (the caller then runs :func:`collide`).

    The sweeps of :func:`collide`'s sweeps over one collider, written out for it (a point resting on a
    collider comes here at every step): the same tests and moves, bit for bit."""
    c = nearest[4][9]
    s0, s1, s2 = x
    for sweep in range(SWEEPS + 1):
        d = _inside(nearest, x[0], x[1], x[2], r)
        if not d > TOLERANCE:
            return x, 0.0
        if sweep == SWEEPS:
            return x, d
        x = _fix(c, p, x, length, r)
        mx, my, mz = x[0] - s0, x[1] - s1, x[2] - s2
        # Short of the others by more than the tests' own tolerance (and rounding).
        if not math.sqrt(mx * mx + my * my + mz * mz) < others - 1e-6:
            return None
    return x, 0.0  # not reached: the last sweep returns


def _inside(one: Prepared, x0: float, x1: float, x2: float, r: float) -> float:
    """How deep the point ``(x0, x1, x2)`` of radius ``r`` is where the collider ``one`` does not
    allow it (0 or less: allowed; the bound settles most points far from an outer collider)."""
    cx, cy, cz, extent, detail = one
    if extent >= 0.0:
        dx, dy, dz = x0 - cx, x1 - cy, x2 - cz
        reach = extent + r
        if dx * dx + dy * dy + dz * dz >= reach * reach:
            return 0.0
    code, ax, ay, az, ex, ey, ez, _inv, radius, _c = detail
    if code == PLANE:
        return r - ((x0 - ax) * ex + (x1 - ay) * ey + (x2 - az) * ez)
    dist = _from_axis(detail, x0, x1, x2)
    if code <= CAPSULE:
        return radius + r - dist
    inner = radius - r
    return dist - (inner if inner > 0.0 else 0.0)


def collide(p: Sequence[float], x: Vec, length: float, r: float, prepared: Sequence[Prepared]) -> tuple[Vec, float]:
    """The end point ``x`` of a segment of ``length`` from the pivot ``p``, moved where every
    collider of ``prepared`` (:func:`prepare`) allows it, and the deepest penetration left (0
    when none): up to ``SWEEPS`` passes over the colliders, each moving the point out of every
    one it is in, the deepest penetration the last pass finds being what is left. The tests are
    plain arithmetic; a collider far from the point costs one bound test."""
    worst = 0.0
    for sweep in range(SWEEPS + 1):
        moved = False
        worst = 0.0
        for one in prepared:
            d = _inside(one, x[0], x[1], x[2], r)
            if d > TOLERANCE:
                if sweep == SWEEPS:
                    worst = max(worst, d)
                    continue
                x = _fix(one[4][9], p, x, length, r)
                moved = True
        if not moved:
            return x, worst
    return x, worst


def deepest(points: Sequence[Sequence[float]], radii: Sequence[float], placed: Sequence[Placed]) -> float:
    """The deepest penetration of the segment end points ``points`` (radii per point) into the
    colliders ``placed`` (0 when none)."""
    worst = 0.0
    for x, r in zip(points, radii, strict=True):
        for c in placed:
            worst = max(worst, depth(c, x, r))
    return worst


def _circle(centre: FloatArray, u: FloatArray, v: FloatArray, radius: float, count: int) -> FloatArray:
    """Segments ``(count, 2, 3)`` of a circle about ``centre`` in the plane of unit ``u``, ``v``."""
    a = np.linspace(0.0, 2.0 * np.pi, count + 1)
    pts = centre + radius * (np.cos(a)[:, None] * u + np.sin(a)[:, None] * v)
    out: FloatArray = np.stack([pts[:-1], pts[1:]], axis=1)
    return out


def _frame_of(axis: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Two unit vectors completing the unit ``axis`` to a right-handed frame."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(axis, helper)
    u /= np.linalg.norm(u)
    return u, np.cross(axis, u)


def outline(c: Placed, count: int = 24, plane_size: float = 1.0) -> FloatArray:
    """Line segments ``(N, 2, 3)`` that draw a placed collider: three great circles of a sphere,
    a capsule's two end circles, its four side lines and the half circles of its caps, a square
    of ``plane_size`` on a plane with its normal."""
    code = c[0]
    a = np.array(c[1:4])
    b = np.array(c[4:7])
    r = c[7]
    x, y, z = np.eye(3)
    if code in (SPHERE, INSIDE_SPHERE):
        return np.concatenate([_circle(a, x, y, r, count), _circle(a, y, z, r, count), _circle(a, z, x, r, count)])
    if code == PLANE:
        u, v = _frame_of(b)
        h = 0.5 * plane_size
        corners = [a + h * (su * u + sv * v) for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        square = np.array([[corners[i], corners[(i + 1) % 4]] for i in range(4)])
        return np.concatenate([square, np.array([[a, a + h * b]])])
    axis = b - a
    length = float(np.linalg.norm(axis))
    w = axis / length if length > _EPS else z
    u, v = _frame_of(w)
    sides = np.array([[a + r * d, b + r * d] for d in (u, -u, v, -v)])
    half = count // 2
    caps = []
    for end, sign in ((a, -1.0), (b, 1.0)):
        for d in (u, v):
            t = np.linspace(0.0, np.pi, half + 1)
            arc = end + r * (np.cos(t)[:, None] * d + sign * np.sin(t)[:, None] * w)
            caps.append(np.stack([arc[:-1], arc[1:]], axis=1))
    return np.concatenate([_circle(a, u, v, r, count), _circle(b, u, v, r, count), sides, *caps])
