"""Look-at: turn a chain (chest, neck, head) so its last joint faces a target, within limits.

Conventions: skeleton-space positions and directions, frames first, float64, quaternions as in
:mod:`core.rig.rotations`. Angles are radians. A chain is a parent-to-child path
(:class:`core.controls.chains.JointPath`); its last joint carries a *facing axis* and an *up axis* (in that
joint's placement frame, e.g. where the face points and where the top of the head points).

Limits live in the rig's *root space*, the current placement of a chosen space joint (usually the
hips or root bone; none means skeleton space). At build time the facing and up axes are taken, at
rest, into that space; yaw is the turn about the rest up axis (positive toward ``up x facing``,
i.e. counter-clockwise seen from above), pitch the elevation above the rest horizontal. Because
both are measured in root space, turning the whole character does not change the allowed head
turn (docs/controls.md#look-at).

Beyond the yaw range the allowed turn falls back linearly to the middle of the range as the
target goes round behind the character, reaching it directly behind. That keeps the aim
continuous when a target orbits the head: a hard clamp would snap from one yaw limit to the other
as the target crosses the back. Likewise, above or below the pitch range the yaw fades to the
middle of its range toward straight up or down, where yaw is undefined. ``behind_falloff=False``
gives the hard clamp instead.

The turn is distributed along the chain parent-first. Joint ``k`` takes the share
``w_k / (w_k + ... + w_last)`` of the minimal rotation from the current facing to the desired one,
recomputed after the joints above it have turned, so the shares of the whole turn follow the
weights and the last joint with positive weight completes the aim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..rig.rotation_kernels import (
    Mat,
    cross,
    mat_mul,
    mat_vec,
    matrix_of,
    normalized_rotation_matrices,
    pair_terms,
    quat_between_unit,
    quat_mul_and_matrix,
    quat_mul_one,
    solve3,
)
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton
from .chains import JointPath, PathKinematics, PoseBuffers

_EPS = 1e-12


def _unit3(v: ArrayLike, what: str) -> FloatArray:
    a = np.array(v, dtype=np.float64).reshape(-1)
    if a.shape != (3,):
        raise RigError(f"{what} must have shape (3,), got {a.shape}")
    n = float(np.linalg.norm(a))
    if not math.isfinite(n) or n < 1e-9:
        raise RigError(f"{what} must be a finite non-zero vector, got {a.tolist()}")
    return a / n


def _readonly(a: FloatArray) -> FloatArray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class LookAtChain:
    """Shared definition of a look-at chain; build it with :meth:`build`."""

    path: JointPath
    #: Share weight of every path joint ``(n,)``; joints between the chosen ones get 0.
    weights: FloatArray
    #: Per joint, the fraction of the remaining turn it takes ``(n,)``.
    shares: FloatArray
    facing_axis: FloatArray
    up_axis: FloatArray
    #: Joint whose placement is the root space, -1 for skeleton space.
    space_joint: int
    #: Root-first joints whose product places ``space_joint``.
    space_path: tuple[int, ...]
    #: Rest facing, up and side (``up x facing``) directions in root space ``(3, 3)`` rows.
    rest_frame: FloatArray
    yaw_limits: tuple[float, float]
    pitch_limits: tuple[float, float]
    behind_falloff: bool

    @cached_property
    def turning(self) -> list[int]:
        """Positions along the path of the joints that take a share of the turn (weight > 0)."""
        return [k for k, w in enumerate(self.weights.tolist()) if w > 0.0]

    @cached_property
    def share_list(self) -> list[float]:
        """:attr:`shares` as Python floats (read per joint on every frame)."""
        return [float(x) for x in self.shares]

    @cached_property
    def last_turning(self) -> int:
        """Position of the last joint with a share of the turn."""
        return max(k for k, share in enumerate(self.share_list) if share > 0.0)

    @cached_property
    def eye_off_pivot(self) -> bool:
        """Whether the eye sits off the last joint's pivot."""
        return bool(self.path.end_offset.any())

    @classmethod
    def build(
        cls,
        skeleton: Skeleton,
        joints: Sequence[int | str],
        *,
        weights: Sequence[float] | None = None,
        facing_axis: ArrayLike,
        up_axis: ArrayLike,
        space_joint: int | str | None = None,
        yaw_limits: tuple[float, float] = (-math.radians(80.0), math.radians(80.0)),
        pitch_limits: tuple[float, float] = (-math.radians(50.0), math.radians(60.0)),
        eye_offset: ArrayLike | None = None,
        behind_falloff: bool = True,
    ) -> LookAtChain:
        """``joints`` parent-first (each an ancestor of the next; joints between them are part
        of the path with weight 0); ``weights`` one per listed joint (default equal);
        ``facing_axis`` / ``up_axis`` in the last joint's placement frame; ``eye_offset`` the
        point that looks, in the same frame (default its pivot)."""
        idx = [j if isinstance(j, int) else skeleton.index(j) for j in joints]
        if not idx:
            raise RigError("a look-at chain needs at least one joint")
        offset = np.zeros(3) if eye_offset is None else np.asarray(eye_offset, dtype=np.float64)
        path = JointPath.between(skeleton, idx[0], idx[-1], end_offset=offset)
        w_listed = np.ones(len(idx)) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
        if w_listed.shape != (len(idx),) or not np.all(np.isfinite(w_listed)) or np.any(w_listed < 0.0):
            raise RigError(f"look-at weights must be {len(idx)} finite values >= 0, got {w_listed.tolist()}")
        if w_listed[-1] <= 0.0:
            raise RigError("the last look-at joint needs a positive weight, or the aim is never completed")
        w = np.zeros(len(path))
        for j, wj in zip(idx, w_listed, strict=True):
            if j not in path.joints:
                raise RigError(f"look-at joint {skeleton.names[j]!r} is not on the path to {skeleton.names[idx[-1]]!r}")
            w[path.joints.index(j)] = wj
        remaining = np.cumsum(w[::-1])[::-1]
        shares = np.where(remaining > 0.0, w / np.where(remaining > 0.0, remaining, 1.0), 0.0)
        for lo, hi, what in ((*yaw_limits, "yaw"), (*pitch_limits, "pitch")):
            bound = math.pi if what == "yaw" else math.pi / 2
            if not (-bound <= lo <= 0.0 <= hi <= bound):
                raise RigError(f"{what} limits must satisfy -{bound:.4f} <= min <= 0 <= max <= {bound:.4f}, got ({lo}, {hi})")
        facing = _unit3(facing_axis, "facing_axis")
        up = _unit3(up_axis, "up_axis")
        rest = skeleton.rest_placements()
        head = rest[idx[-1], :3, :3]
        if space_joint is None:
            sj = -1
            space_rot = np.eye(3)
            space_path: tuple[int, ...] = ()
        else:
            sj = space_joint if isinstance(space_joint, int) else skeleton.index(space_joint)
            # Root space must not turn with the chain, or the limits would chase the head.
            if sj == path.joints[0] or sj in skeleton.descendants(path.joints[0]):
                raise RigError(
                    f"the look-at space joint {skeleton.names[sj]!r} must not be part of, or below, the turning chain"
                )
            space_rot = rest[sj, :3, :3]
            space_path = (*reversed(skeleton.ancestors(sj)), sj)
        to_space = np.linalg.solve(space_rot, head)
        f = to_space @ facing
        f = f / np.linalg.norm(f)
        u = to_space @ up
        u = u - np.dot(u, f) * f
        if np.linalg.norm(u) < 1e-6:
            raise RigError("look-at up_axis is parallel to facing_axis")
        u = u / np.linalg.norm(u)
        side = cross(u, f)
        return cls(
            path=path,
            weights=_readonly(w),
            shares=_readonly(shares),
            facing_axis=_readonly(facing),
            up_axis=_readonly(up),
            space_joint=sj,
            space_path=space_path,
            rest_frame=_readonly(np.stack([f, u, side])),
            yaw_limits=(float(yaw_limits[0]), float(yaw_limits[1])),
            pitch_limits=(float(pitch_limits[0]), float(pitch_limits[1])),
            behind_falloff=behind_falloff,
        )


def yaw_pitch(directions: ArrayLike, rest_frame: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Yaw and pitch ``(...,)`` of root-space ``directions`` ``(..., 3)`` against the rest
    ``(facing, up, side)`` rows."""
    d = np.asarray(directions, dtype=np.float64)
    fr = np.asarray(rest_frame, dtype=np.float64)
    # Coordinates along (facing, up, side) in one product.
    c = d @ fr.T
    x, z, y = c[..., 0], c[..., 1], c[..., 2]
    yaw: FloatArray = np.arctan2(y, x)
    pitch: FloatArray = np.arctan2(z, np.hypot(x, y))
    return yaw, pitch


def limit_direction(chain: LookAtChain, directions: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Root-space ``directions`` ``(T, 3)`` (unit) brought inside the yaw/pitch limits, and
    whether each was changed. Directions inside come back unchanged, bit for bit."""
    yaw, pitch = yaw_pitch(directions, chain.rest_frame)
    ylo, yhi = chain.yaw_limits
    plo, phi = chain.pitch_limits
    changed = (yaw < ylo) | (yaw > yhi) | (pitch < plo) | (pitch > phi)
    if not changed.any():
        return directions, changed
    if chain.behind_falloff:
        mid = 0.5 * (ylo + yhi)
        # Linear from the limit (at the limit) to the middle of the range (directly behind), on
        # each side; both sides meet at +-pi, so the result is continuous all the way round.
        over = mid + (yhi - mid) * (math.pi - yaw) / max(math.pi - yhi, _EPS) if yhi < math.pi else yaw
        under = mid + (ylo - mid) * (math.pi + yaw) / max(math.pi + ylo, _EPS) if ylo > -math.pi else yaw
        yaw_c = np.where(yaw > yhi, over, np.where(yaw < ylo, under, yaw))
    else:
        yaw_c = np.clip(yaw, ylo, yhi)
    if chain.behind_falloff:
        # Beyond the pitch range, the yaw fades to the middle of its range as the target nears
        # straight up or down, where yaw is undefined: a target passing overhead, slightly to one
        # side, would otherwise swing the held-up head from one yaw limit to the other.
        mid = 0.5 * (ylo + yhi)
        half = 0.5 * math.pi
        fade = np.ones_like(pitch)
        if phi < half:
            fade = np.where(pitch > phi, (half - pitch) / (half - phi), fade)
        if plo > -half:
            fade = np.where(pitch < plo, (half + pitch) / (half + plo), fade)
        yaw_c = mid + (yaw_c - mid) * np.clip(fade, 0.0, 1.0)
    pitch_c = np.clip(pitch, plo, phi)
    f, u, s = chain.rest_frame
    cp = np.cos(pitch_c)[:, None]
    rebuilt = cp * (np.cos(yaw_c)[:, None] * f + np.sin(yaw_c)[:, None] * s) + np.sin(pitch_c)[:, None] * u
    out: FloatArray = np.where(changed[:, None], rebuilt, directions)
    return out, changed


@dataclass(frozen=True)
class LookAtSolve:
    """Per frame ``(T,)``: new rotations ``(T, n, 4)`` of the path joints, the remaining angle
    between the facing and the (limited) desired direction, whether the limits changed the
    direction, and whether the frame had a usable target (not at the eye, finite)."""

    rotations: FloatArray
    aim_error: FloatArray
    limited: NDArray[np.bool_]
    valid: NDArray[np.bool_]


def _partial(q: FloatArray, fraction: float) -> FloatArray:
    """``q`` raised to ``fraction`` (same axis, angle scaled), for unit ``q`` with ``w >= 0``."""
    if fraction >= 1.0:
        return q
    s = np.sqrt(np.einsum("ti,ti->t", q[:, 1:], q[:, 1:]))
    half = np.arctan2(s, q[:, 0]) * fraction
    out = np.empty_like(q)
    out[:, 0] = np.cos(half)
    out[:, 1:] = q[:, 1:] * (np.sin(half) / np.maximum(s, _EPS))[:, None]
    return out


def _partial_between(u: FloatArray, v: FloatArray, fraction: float) -> FloatArray:
    """``fraction`` of the minimal rotation from direction ``u`` to ``v`` (``(T, 3)``, any
    length): :func:`_partial` of :func:`quat_between_unit`, fused.

    The half angle of the minimal rotation is ``atan2(|u x v|, |u||v| + u . v)``, so the partial
    turn comes straight from those terms (:func:`pair_terms`) without
    forming the full quaternion first: a third of the numpy calls, which set the cost of a live
    frame. Opposite or zero-length directions take the general route."""
    if fraction >= 1.0:
        return quat_between_unit(u, v)
    f = pair_terms(u, v)
    scale = np.sqrt(f[:, 0] * f[:, 1])
    axis = f[:, 3:]
    s = np.sqrt(np.einsum("ti,ti->t", axis, axis))
    w = f[:, 2] + scale
    # As in quat_between_unit: a usable rotation needs |(w, u x v)| > 1e-10 |u||v|; s alone
    # bounding it keeps the division below safe.
    if not (s > 1e-10 * scale).all():
        return _partial(quat_between_unit(u, v), fraction)
    half = np.arctan2(s, w) * fraction
    out = np.empty((u.shape[0], 4))
    out[:, 0] = np.cos(half)
    out[:, 1:] = axis * (np.sin(half) / s)[:, None]
    return out


def _aim(
    chain: LookAtChain, space: FloatArray | None, target: FloatArray, valid: NDArray[np.bool_], last: FloatArray
) -> tuple[FloatArray, NDArray[np.bool_], NDArray[np.bool_]]:
    """Limited desired direction ``(T, 3)`` (skeleton space) from the eye of the last joint at
    placement ``last``, whether it is usable, and whether the limits changed it."""
    eye = last[:, :3, 3] + last[:, :3, :3] @ chain.path.end_offset if chain.eye_off_pivot else last[:, :3, 3]
    desired = target - eye
    dist = np.sqrt(np.einsum("ti,ti->t", desired, desired))
    ok = valid & (dist > _EPS)
    desired = desired / (dist if ok.all() else np.where(ok, dist, 1.0))[:, None]
    in_space = desired if space is None else np.einsum("tji,tj->ti", space, desired)
    clamped, changed = limit_direction(chain, in_space)
    if changed.any():
        desired = clamped if space is None else np.einsum("tij,tj->ti", space, clamped)
    return desired, ok, changed & ok


def look_at(
    skeleton: Skeleton,
    chain: LookAtChain,
    pose: PoseBuffers,
    target: ArrayLike,
    *,
    refine: int = 2,
) -> LookAtSolve:
    """Turn ``chain`` toward skeleton-space ``target`` ``(T, 3)`` at every frame of ``pose``.

    ``refine`` extra passes on the last joint absorb the eye moving when it sits off that
    joint's pivot (none are needed when it is on it)."""
    kin = PathKinematics(skeleton, chain.path, pose)
    t = np.asarray(target, dtype=np.float64)
    frames = kin.frames
    if t.shape != (frames, 3):
        raise ValueError(f"target must have shape ({frames}, 3), got {t.shape}")
    space: FloatArray | None = None
    if chain.space_joint >= 0:
        space = pose.placement_of(chain.space_path)[:, :3, :3]
        # Root space is a rotation: strip any (uniform) scale of the space joint.
        space = space / np.sqrt(np.einsum("tij,tij->tj", space, space))[:, None, :]
    if frames == 1:
        one = _look_at_one(chain, kin, t[0].tolist(), None if space is None else space[0].tolist(), refine)
        if one is not None:
            return one
    rot = kin.rotations.copy()
    n = rot.shape[1]
    post = kin.post
    mats = normalized_rotation_matrices(rot)
    # tail[k]: from joint k's rotation-output frame to the last joint's placement, with the
    # rotations as they are before this solve (joints below k have not turned yet when k turns).
    tails = np.zeros((frames, n, 4, 4))
    tails[:, :, :3, :3] = mats
    tails[:, :, 3, 3] = 1.0
    if post is not None:
        tails = tails @ post
    for k in range(n - 2, -1, -1):
        tails[:, k] = tails[:, k] @ kin.pre[:, k + 1] @ tails[:, k + 1]
    frame = kin.base @ kin.pre[:, 0]
    valid = np.isfinite(t).all(axis=1)
    extra = refine if chain.eye_off_pivot else 0
    identity = np.array([1.0, 0.0, 0.0, 0.0])
    shares = chain.share_list
    last_turning = chain.last_turning
    # The joints above the last turning one share the turn toward the direction seen from where
    # the eye is now; the last one re-aims from where their turns put the eye (parallax), so the
    # aim is exact whatever the distance of the target.
    desired, ok, limited = _aim(chain, space, t, valid, frame @ tails[:, 0])
    aim_error = np.zeros(frames)
    for k in range(n):
        share = shares[k]
        turned = mats[:, k]
        passes = 0 if share <= 0.0 else 1 + (extra if k == last_turning else 0)
        for _ in range(passes):
            if k == last_turning:
                desired, ok, changed = _aim(chain, space, t, valid, frame @ tails[:, k])
                limited = limited | changed
            # Both directions in joint k's rotation-output space: the facing straight from the
            # tail (the last placement is frame @ tail, so no solve is needed for it), the
            # desired direction back through the joint's current frame.
            facing = tails[:, k, :3, :3] @ chain.facing_axis
            wanted = np.linalg.solve(frame[:, :3, :3], desired[..., None])[..., 0]
            turn = _partial_between(facing, wanted, share)
            if not ok.all():
                turn = np.where(ok[:, None], turn, identity)
            rot[:, k], turn_m = quat_mul_and_matrix(turn, rot[:, k])
            tails[:, k, :3, :] = turn_m @ tails[:, k, :3, :]
            turned = turn_m @ turned
            if k == last_turning:
                after = (turn_m @ facing[..., None])[..., 0]
                sine = np.linalg.norm(cross(after, wanted), axis=-1)
                aim_error = np.where(ok, np.arctan2(sine, np.einsum("ti,ti->t", after, wanted)), 0.0)
        if k + 1 < n:
            # The placement of joint k is its frame times its own (possibly turned) rotation.
            m = frame.copy()
            m[:, :3, :3] = frame[:, :3, :3] @ turned
            if post is not None:
                m = m @ post[:, k]
            frame = m @ kin.pre[:, k + 1]
    return LookAtSolve(rotations=rot, aim_error=aim_error, limited=limited, valid=ok)


# --- a single frame in plain floats ------------------------------------------------------------
#
# A live frame turns two or three joints toward one target: a few dozen numpy calls on 3-vectors
# and 4 x 4 matrices, whose fixed cost far exceeds their arithmetic. The same steps as
# :func:`look_at` in plain Python floats (equal to rounding; see the tests). The rare cases
# that take another route there (an unusable target, opposite directions, a singular frame)
# return ``None`` here, and the caller runs the general path.


def _aim_one(
    chain: LookAtChain, space: Mat | None, target: list[float], last: Mat
) -> tuple[list[float], bool, bool] | None:
    """:func:`_aim` of one frame (``None``: the target is at the eye)."""
    eye = [last[i][3] for i in range(3)]
    if chain.eye_off_pivot:
        off = mat_vec(last, chain.path.end_offset.tolist())
        eye = [eye[i] + off[i] for i in range(3)]
    d = [target[i] - eye[i] for i in range(3)]
    dist = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    if not dist > _EPS:
        return None
    desired = [d[0] / dist, d[1] / dist, d[2] / dist]
    in_space = desired if space is None else [sum(space[j][i] * desired[j] for j in range(3)) for i in range(3)]
    fr = chain.rest_frame.tolist()
    x, z, y = (fr[r][0] * in_space[0] + fr[r][1] * in_space[1] + fr[r][2] * in_space[2] for r in range(3))
    yaw = math.atan2(y, x)
    pitch = math.atan2(z, math.hypot(x, y))
    (ylo, yhi), (plo, phi) = chain.yaw_limits, chain.pitch_limits
    if not (yaw < ylo or yaw > yhi or pitch < plo or pitch > phi):
        return desired, True, False
    clamped = limit_direction(chain, np.array([in_space]))[0][0].tolist()
    desired = clamped if space is None else mat_vec(space, clamped)
    return desired, True, True


def _look_at_one(
    chain: LookAtChain, kin: PathKinematics, target: list[float], space: Mat | None, refine: int
) -> LookAtSolve | None:
    if not all(math.isfinite(v) for v in target):
        return None
    rot = kin.rotations[0].tolist()
    pre: list[Mat] = kin.pre[0].tolist()
    post: list[Mat] | None = None if kin.post is None else kin.post[0].tolist()
    n = len(rot)
    mats = [matrix_of(q) for q in rot]
    tails: list[Mat] = [[[*m[0], 0.0], [*m[1], 0.0], [*m[2], 0.0], [0.0, 0.0, 0.0, 1.0]] for m in mats]
    if post is not None:
        tails = [mat_mul(tails[k], post[k]) for k in range(n)]
    for k in range(n - 2, -1, -1):
        tails[k] = mat_mul(mat_mul(tails[k], pre[k + 1]), tails[k + 1])
    frame = mat_mul(kin.base[0].tolist(), pre[0])
    extra = refine if chain.eye_off_pivot else 0
    shares = chain.share_list
    last_turning = chain.last_turning
    facing_axis = chain.facing_axis.tolist()
    aimed = _aim_one(chain, space, target, mat_mul(frame, tails[0]))
    if aimed is None:
        return None
    desired, _ok, limited = aimed
    aim_error = 0.0
    for k in range(n):
        share = shares[k]
        turned = mats[k]
        passes = 0 if share <= 0.0 else 1 + (extra if k == last_turning else 0)
        for _ in range(passes):
            if k == last_turning:
                aimed = _aim_one(chain, space, target, mat_mul(frame, tails[k]))
                if aimed is None:
                    return None
                desired, _ok, changed = aimed
                limited = limited or changed
            tail = tails[k]
            facing = mat_vec([row[:3] for row in tail[:3]], facing_axis)
            wanted = solve3(frame, desired)
            if wanted is None:
                return None
            turn = _partial_between_one(facing, wanted, share)
            if turn is None:
                return None
            rot[k] = list(quat_mul_one(turn, rot[k]))
            turn_m = matrix_of(turn, unit=True)
            tails[k] = [*mat_mul(turn_m, tail[:3]), tail[3]]
            turned = mat_mul(turn_m, turned)
            if k == last_turning:
                after = mat_vec(turn_m, facing)
                c = _cross3(after, wanted)
                sine = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
                aim_error = math.atan2(sine, after[0] * wanted[0] + after[1] * wanted[1] + after[2] * wanted[2])
        if k + 1 < n:
            lin = mat_mul([row[:3] for row in frame[:3]], turned)
            m = [[*lin[i], frame[i][3]] for i in range(3)] + [frame[3]]
            if post is not None:
                m = mat_mul(m, post[k])
            frame = mat_mul(m, pre[k + 1])
    return LookAtSolve(
        rotations=np.array([rot]),
        aim_error=np.array([aim_error]),
        limited=np.array([limited]),
        valid=np.ones(1, dtype=bool),
    )


def _cross3(a: list[float], b: list[float]) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _partial_between_one(u: list[float], v: list[float], fraction: float) -> tuple[float, float, float, float] | None:
    """:func:`_partial_between` of one pair (``None`` where that takes the general route)."""
    aa = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
    bb = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    ab = u[0] * v[0] + u[1] * v[1] + u[2] * v[2]
    axis = _cross3(u, v)
    scale = math.sqrt(aa * bb)
    w = ab + scale
    if fraction >= 1.0:
        norm = math.sqrt(w * w + axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2])
        if not norm > 1e-10 * scale:
            return None
        return (w / norm, axis[0] / norm, axis[1] / norm, axis[2] / norm)
    s = math.sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2])
    if not s > 1e-10 * scale:
        return None
    half = math.atan2(s, w) * fraction
    k = math.sin(half) / s
    return (math.cos(half), axis[0] * k, axis[1] * k, axis[2] * k)
