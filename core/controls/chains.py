"""Joint paths on a skeleton: their points, and solved points written back as local rotations.

The controls (IK, look-at) work on a *path*: joints listed parent-first, each the parent of the
next, plus an end point carried by the last joint. Frames come first in every array; everything is
float64 and follows :mod:`core.rig.rotations` (w-first Hamilton quaternions, column vectors) and the
attachment-frame model of :mod:`core.rig.skeleton`::

    M_k = P_k @ C0_k @ Tr_k @ R_k @ S_k @ inv(C1_k)

with ``P_k`` the current placement of the joint's parent, ``Tr_k``, ``R_k`` and ``S_k`` the
translation, rotation and scale of its local transform. The rotation turns about the *pivot*
``origin(P_k @ C0_k @ Tr_k)``; for a Blender bone that is the bone's head. A path's points are the
pivots of its joints followed by the end point: the pivot of ``end_joint`` (an ankle, a wrist)
or ``end_offset`` in the last joint's placement frame (a hand attachment, a bone tail).

Writing solved points back is parent-first: for each joint, the direction from its *current*
pivot (after its parents have been rewritten) to the next solved point is taken into the joint's
rotation space through the current parent frame, and the joint's rotation is premultiplied by the
minimal rotation from the current direction to that one. A world orientation is never written as
a local rotation directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from ..rig.rotation_kernels import (
    Mat,
    affine_mul,
    between_unit_one,
    lin_mul,
    mat_vec,
    matrix_of,
    normalized_rotation_matrices,
    quat_between_unit,
    quat_conj,
    quat_from_rotation_matrix,
    quat_mul,
    quat_mul_and_matrix,
    quat_mul_one,
    solve3,
)
from ..rig.rotations import FloatArray
from ..rig.skeleton import Skeleton


@dataclass(frozen=True)
class JointPath:
    """A parent-to-child run of joints and the end point it carries (shared definition)."""

    joints: tuple[int, ...]
    #: Joints from a root down to the parent of ``joints[0]``: their product places the path.
    ancestors: tuple[int, ...]
    #: Joint whose pivot is the end point, or -1 to use ``end_offset``.
    end_joint: int
    #: End point in the last joint's placement frame (used when ``end_joint`` is -1).
    end_offset: FloatArray

    @classmethod
    def between(
        cls,
        skeleton: Skeleton,
        first: int | str,
        last: int | str,
        end: int | str | None = None,
        end_offset: ArrayLike | None = None,
    ) -> JointPath:
        """Path from ``first`` down to ``last``; the end point is the pivot of ``end`` (a child of
        ``last``) or ``end_offset`` in ``last``'s frame. One of the two must be given."""
        i0 = first if isinstance(first, int) else skeleton.index(first)
        i1 = last if isinstance(last, int) else skeleton.index(last)
        joints = tuple(skeleton.chain(i0, i1))
        anc = skeleton.ancestors(i0)
        end_joint = -1
        if end is not None:
            end_joint = end if isinstance(end, int) else skeleton.index(end)
            if int(skeleton.parents[end_joint]) != i1:
                raise RigError(
                    f"end joint {skeleton.names[end_joint]!r} must be a child of {skeleton.names[i1]!r}"
                )
            offset = np.zeros(3)
        elif end_offset is not None:
            offset = np.array(end_offset, dtype=np.float64).reshape(-1)
            if offset.shape != (3,) or not np.all(np.isfinite(offset)):
                raise RigError(f"end_offset must be a finite vector of shape (3,), got {offset.shape}")
        else:
            raise RigError(
                f"the path ending at {skeleton.names[i1]!r} needs an end joint or an end offset"
            )
        offset.setflags(write=False)
        return cls(joints, tuple(anc[::-1]), end_joint, offset)

    def __len__(self) -> int:
        return len(self.joints)


@dataclass(frozen=True)
class Lineage:
    """Each joint's parent and a bit mask of the joint and its ancestors (bit ``j`` for joint
    ``j``): a write to some joints invalidates exactly the placements whose mask meets theirs.
    Build it once per skeleton (:meth:`of`) and share it."""

    parents: tuple[int, ...]
    masks: tuple[int, ...]

    @classmethod
    def of(cls, skeleton: Skeleton) -> Lineage:
        parents = tuple(int(p) for p in skeleton.parents)
        masks: list[int] = []
        for j, p in enumerate(parents):
            # Parents come before their children (the skeleton's order), so the parent's mask
            # is already there.
            masks.append((1 << j) | (masks[p] if p >= 0 else 0))
        return cls(parents, tuple(masks))


class PoseBuffers:
    """A working copy of a pose, frames first: rotations ``(T, B, 4)``, translations
    ``(T, B, 3)``, optional scales, and each joint's attached transform ``C0 @ T @ inv(C1)``
    ``(T, B, 4, 4)`` kept in step with them. It never aliases the arrays it was built from, so
    controls cannot write into the animation they read. Skeleton-space placements are computed
    on demand and cached until a write changes them: with a :class:`Lineage` only those of the
    written joints and their descendants are dropped (a control on the fingers keeps the spine's
    placements an arm control left), without one every placement.

    A write refreshes the written joints' attached transforms only when they are next read: a
    control stack writes after every control, and the last write (or one of several in a row)
    is never read back, so one refresh serves every write since the previous read."""

    __slots__ = ("skeleton", "rotations", "translations", "scales", "_attached_all", "_stale", "_inv_c1", "_world", "_lineage")

    def __init__(
        self,
        skeleton: Skeleton,
        rotations: ArrayLike,
        translations: ArrayLike | None = None,
        scales: ArrayLike | None = None,
        lineage: Lineage | None = None,
    ) -> None:
        n = len(skeleton)
        rot = np.array(rotations, dtype=np.float64)
        if rot.ndim != 3 or rot.shape[1:] != (n, 4):
            raise ValueError(f"rotations must have shape (T, {n}, 4), got {rot.shape}")
        t = rot.shape[0]
        tr = np.zeros((t, n, 3)) if translations is None else np.array(translations, dtype=np.float64)
        if tr.shape != (t, n, 3):
            raise ValueError(f"translations must have shape ({t}, {n}, 3), got {tr.shape}")
        sc = None if scales is None else np.array(scales, dtype=np.float64)
        if sc is not None and sc.shape != (t, n, 3):
            raise ValueError(f"scales must have shape ({t}, {n}, 3), got {sc.shape}")
        if lineage is not None and len(lineage.parents) != n:
            raise ValueError(f"the lineage is for {len(lineage.parents)} joints, the skeleton has {n}")
        self.skeleton = skeleton
        self.rotations: FloatArray = rot
        self.translations: FloatArray = tr
        self.scales: FloatArray | None = sc
        self._inv_c1: FloatArray | None = None if skeleton.child_frames is None else np.linalg.inv(skeleton.child_frames)
        self._world: dict[int, FloatArray] = {}
        self._lineage = lineage
        #: Joints written since their attached transforms were last computed.
        self._stale: dict[int, None] = {}
        self._attached_all: FloatArray = self._attached(slice(None))

    @property
    def attached(self) -> FloatArray:
        """Each joint's attached transform ``(T, B, 4, 4)`` (refreshed for joints written since
        the last read)."""
        if self._stale:
            idx = list(self._stale)
            self._stale = {}
            self._attached_all[:, idx] = self._attached(idx)
        return self._attached_all

    def _attached(self, joints: slice | Sequence[int]) -> FloatArray:
        sk = self.skeleton
        r = normalized_rotation_matrices(self.rotations[:, joints])
        if self.scales is not None:
            r = r * self.scales[:, joints, None, :]
        local = np.zeros(r.shape[:-2] + (4, 4))
        local[..., :3, :3] = r
        local[..., :3, 3] = self.translations[:, joints]
        local[..., 3, 3] = 1.0
        out: FloatArray = sk.parent_frames[joints] @ local
        if self._inv_c1 is not None:
            out = out @ self._inv_c1[joints]
        return out

    def copy(self) -> PoseBuffers:
        """An independent working copy. The attached transforms are copied, not recomputed from
        the rotations (the same values: they are a function of them), which saves a rotation
        matrix and a product per joint of the whole rig on every live frame."""
        out = PoseBuffers.__new__(PoseBuffers)
        out.skeleton = self.skeleton
        out.rotations = self.rotations.copy()
        out.translations = self.translations.copy()
        out.scales = None if self.scales is None else self.scales.copy()
        out._inv_c1 = self._inv_c1  # read only: the skeleton's constant
        out._world = {}
        out._lineage = self._lineage
        out._stale = dict(self._stale)
        out._attached_all = self._attached_all.copy()
        return out

    @property
    def frames(self) -> int:
        return int(self.rotations.shape[0])

    def set_rotations(self, joints: Sequence[int], rotations: FloatArray, index: NDArray[np.intp] | None = None) -> None:
        """Write ``(T, len(joints), 4)`` rotations and refresh those joints' attached transforms
        (``index``: the joints as an index array, when the caller has one)."""
        idx = list(joints)
        self.rotations[:, idx if index is None else index] = rotations
        self._written(idx)

    def set_translations(self, joints: Sequence[int], translations: FloatArray, index: NDArray[np.intp] | None = None) -> None:
        """Write ``(T, len(joints), 3)`` translations and refresh those joints' attached transforms."""
        idx = list(joints)
        self.translations[:, idx if index is None else index] = translations
        self._written(idx)

    def _written(self, idx: list[int]) -> None:
        self._stale.update(dict.fromkeys(idx))
        if not self._world:
            return
        if self._lineage is None:
            self._world = {}
            return
        hit = 0
        for j in idx:
            hit |= 1 << int(j)
        masks = self._lineage.masks
        self._world = {k: v for k, v in self._world.items() if not masks[k] & hit}

    def world(self, joint: int) -> FloatArray:
        """Skeleton-space placement ``(T, 4, 4)`` of ``joint`` (cached until a write changes it)."""
        cache = self._world
        cached = cache.get(joint)
        if cached is not None:
            return cached
        parents = self._lineage.parents if self._lineage is not None else None
        attached = self.attached
        # Down from the nearest cached ancestor (or the root), parent first.
        chain = []
        j = joint
        while j >= 0 and j not in cache:
            chain.append(j)
            j = parents[j] if parents is not None else int(self.skeleton.parents[j])
        out: FloatArray | None = None if j < 0 else cache[j]
        for k in reversed(chain):
            out = attached[:, k] if out is None else out @ attached[:, k]
            cache[k] = out
        assert out is not None
        return out

    def placement_of(self, chain: Sequence[int]) -> FloatArray:
        """Placement ``(T, 4, 4)`` at the end of a root-first run of joints (identity if empty)."""
        if not chain:
            return np.broadcast_to(np.eye(4), (self.frames, 4, 4)).copy()
        return self.world(chain[-1])

    def forward_kinematics(self) -> FloatArray:
        """Skeleton-space placements ``(T, B, 4, 4)`` of every joint."""
        attached = self.attached
        world = np.empty_like(attached)
        for i, p in enumerate(self.skeleton.parents):
            world[:, i] = attached[:, i] if p < 0 else world[:, p] @ attached[:, i]
        return world


@dataclass(frozen=True)
class _PathRest:
    """What :func:`_path_parts` needs of a group of paths that depends on the skeleton alone,
    worked out once per group (see :func:`_rest_of`). ``columns`` are the joints of each path
    followed by its end joint when every path ends on a joint: their pivots are computed in one
    product, the paths' pivots and end points alike."""

    joints: NDArray[np.intp]
    columns: NDArray[np.intp]
    ends_on_joints: bool
    c0: FloatArray
    c0_lin: FloatArray
    c0_t: FloatArray
    post: FloatArray | None


#: Rests by the identities of a skeleton and a group of paths (both kept alive by the entry, so
#: the identities cannot be reused while it stands). The stacks build their paths once, so a
#: handful of entries serve every frame; the bound only keeps rebuilt stacks from piling up.
_RESTS: dict[tuple[int, ...], tuple[Skeleton, tuple[JointPath, ...], _PathRest]] = {}
_RESTS_BOUND = 256


def _rest_of(skeleton: Skeleton, paths: tuple[JointPath, ...]) -> _PathRest:
    key = (id(skeleton), *map(id, paths))
    hit = _RESTS.get(key)
    if hit is not None:
        return hit[2]
    joints = np.array([p.joints for p in paths], dtype=np.intp)  # (m, n)
    ends = [p.end_joint for p in paths]
    on_joints = min(ends) >= 0
    columns = np.concatenate([joints, np.array(ends, dtype=np.intp)[:, None]], axis=1) if on_joints else joints
    c0 = skeleton.parent_frames[columns]  # (m, n or n + 1, 4, 4)
    post = None
    if skeleton.child_frames is not None:
        post = np.linalg.inv(skeleton.child_frames[joints])[:, None]
    rest = _PathRest(
        joints, columns, on_joints, c0[:, None, : joints.shape[1]], c0[..., :3, :3], c0[:, None, :, :3, 3].copy(), post
    )
    if len(_RESTS) >= _RESTS_BOUND:
        _RESTS.clear()
    _RESTS[key] = (skeleton, paths, rest)
    return rest


def _path_parts(
    skeleton: Skeleton, paths: tuple[JointPath, ...], pose: PoseBuffers
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray | None]:
    """The per-path arrays of :class:`PathKinematics`, for equally long paths at once, laid
    out path-major on the leading axis (``F = len(paths) * T``)."""
    rest = _rest_of(skeleton, paths)
    t = pose.frames
    m, n = rest.joints.shape
    base = np.concatenate([pose.placement_of(p.ancestors) for p in paths]) if m > 1 else pose.placement_of(paths[0].ancestors)
    tr = np.swapaxes(pose.translations[:, rest.columns], 0, 1)  # (m, T, n or n + 1, 3)
    # The pivots C0 @ Tr of the joints (and of the end joints), all at once.
    pivots = np.einsum("mkij,mtkj->mtki", rest.c0_lin, tr) + rest.c0_t
    pre = np.empty((m, t, n, 4, 4))
    pre[:] = rest.c0
    pre[..., :3, 3] = pivots[:, :, :n]
    rot = np.swapaxes(pose.rotations[:, rest.joints], 0, 1).reshape(m * t, n, 4)
    # Where each joint carries the next point, in its rotation-input space (after R, before S
    # and inv(C1) are undone): the next pivot, or the end point for the last joint.
    if rest.ends_on_joints:
        # Every path ends on a joint (limbs): the end pivots came with the others.
        nxt = pivots[:, :, 1:]
    else:
        nxt = np.empty((m, t, n, 3))
        nxt[:, :, :-1] = pivots[:, :, 1:]
        for i, p in enumerate(paths):
            if p.end_joint >= 0:
                c0e = skeleton.parent_frames[p.end_joint]
                nxt[i, :, -1] = pose.translations[:, p.end_joint] @ c0e[:3, :3].T + c0e[:3, 3]
            else:
                nxt[i, :, -1] = p.end_offset
    post: FloatArray | None = None
    if rest.post is not None:
        post = np.empty((m, t, n, 4, 4))
        post[:] = rest.post
    if pose.scales is not None:
        scale = np.zeros((m, t, n, 4, 4))
        scale[..., 3, 3] = 1.0
        scale[..., [0, 1, 2], [0, 1, 2]] = np.swapaxes(pose.scales[:, rest.joints], 0, 1)
        post = scale if post is None else scale @ post
    if post is not None:
        nxt = np.einsum("mtkij,mtkj->mtki", post[..., :3, :3], nxt) + post[..., :3, 3]
        post = post.reshape(m * t, n, 4, 4)
    return base, pre.reshape(m * t, n, 4, 4), rot, nxt.reshape(m * t, n, 3), post


#: Up to this many rows (a live frame's paths: a pair of legs, two or three spring chains)
#: solved points are written back in plain floats rather than numpy calls (the same steps; see
#: the tests). The plain route costs per joint and row, the numpy calls per joint along the
#: path whatever the rows: two 8-joint chains take half the time in floats, four 3-joint limbs
#: as long either way, so beyond three rows (four limbs at once, a bake) numpy stays. Walking a
#: path stays in numpy at any size.
FEW_ROWS = 3
_AFFINE_ROW = [0.0, 0.0, 0.0, 1.0]


class PathKinematics:
    """The pieces of a path at one pose that do not depend on the path's own rotations, so a
    solver can re-evaluate the path for any rotations cheaply (one product per joint).

    Several independent paths of the same length can be stacked into one (``paths`` a
    sequence): their frames are laid end to end, path-major, on the leading axis, so one
    batched solve serves them all. ``path`` is then the first of them.
    """

    __slots__ = ("paths", "base", "pre", "post", "rotations", "reach", "_current", "_mats")

    def __init__(self, skeleton: Skeleton, paths: JointPath | Sequence[JointPath], pose: PoseBuffers) -> None:
        group = (paths,) if isinstance(paths, JointPath) else tuple(paths)
        if not group or len({len(p) for p in group}) != 1:
            raise ValueError("stacked paths must all have the same number of joints")
        base, pre, rot, reach, post = _path_parts(skeleton, group, pose)
        self.paths: tuple[JointPath, ...] = group
        #: Placement of the first joint's parent ``(F, 4, 4)``.
        self.base: FloatArray = base
        #: ``C0 @ Tr`` per joint ``(F, n, 4, 4)``: what sits between the parent and the rotation.
        self.pre: FloatArray = pre
        #: The joints' current rotations ``(F, n, 4)``.
        self.rotations: FloatArray = rot
        #: Vector from each pivot to the next point, in rotation-input space ``(F, n, 3)``.
        self.reach: FloatArray = reach
        #: ``S @ inv(C1)`` per joint, or ``None`` when it is the identity for every joint.
        self.post: FloatArray | None = post
        self._current: tuple[FloatArray, FloatArray] | None = None
        # Rotation matrices of the current rotations, once either walk or
        # rotations_from_points has needed them (a spring or IK control calls both per frame).
        self._mats: FloatArray | None = None

    def _current_mats(self) -> FloatArray:
        if self._mats is None:
            self._mats = normalized_rotation_matrices(self.rotations)
        return self._mats

    def rebased(self, pose: PoseBuffers) -> PathKinematics:
        """The same paths on ``pose``, a pose that differs from this one's only in the paths'
        ancestors (a lowered pelvis above the legs): only the base placement is recomputed, the
        per-joint parts (the same values either way) are shared, not rebuilt."""
        out = PathKinematics.__new__(PathKinematics)
        out.paths = self.paths
        out.base = (
            np.concatenate([pose.placement_of(p.ancestors) for p in self.paths])
            if len(self.paths) > 1
            else pose.placement_of(self.paths[0].ancestors)
        )
        out.pre, out.rotations, out.reach, out.post = self.pre, self.rotations, self.reach, self.post
        out._current = None
        out._mats = self._mats
        return out

    @property
    def path(self) -> JointPath:
        return self.paths[0]

    @property
    def frames(self) -> int:
        return int(self.base.shape[0])

    def _step(self, frame: FloatArray, k: int, rot: FloatArray) -> FloatArray:
        """Placement of joint ``k`` from its frame ``P @ C0 @ Tr`` and rotation matrices."""
        m = frame.copy()
        m[:, :3, :3] = frame[:, :3, :3] @ rot
        if self.post is not None:
            m = m @ self.post[:, k]
        return m

    def walk(self, rotations: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
        """Points ``(F, n + 1, 3)`` (pivots, then the end point) and the last joint's placement
        ``(F, 4, 4)`` for ``rotations`` ``(F, n, 4)`` (default: the current ones, cached)."""
        if rotations is None and self._current is not None:
            return self._current
        r = self.rotations if rotations is None else rotations
        n = r.shape[1]
        mats = self._current_mats() if rotations is None else normalized_rotation_matrices(r)
        out = np.empty((self.frames, n + 1, 3))
        parent = self.base
        for k in range(n):
            frame = parent @ self.pre[:, k]
            out[:, k] = frame[:, :3, 3]
            if k == n - 1:
                lin = frame[:, :3, :3] @ mats[:, k]
                out[:, n] = out[:, k] + (lin @ self.reach[:, k, :, None])[..., 0]
            parent = self._step(frame, k, mats[:, k])
        result = (out, parent)
        if rotations is None:
            self._current = result
        return result

    def _row_parts(self) -> tuple[list[Mat], list[list[Mat]], list[list[Mat]], list[list[list[float]]], list[list[Mat]] | None]:
        """The base, per-joint frames, current rotation matrices, reaches and post transforms
        as plain lists (rows first), for :meth:`_rows_from_points`."""
        if self._mats is not None:
            mats: list[list[Mat]] = self._mats.tolist()
        else:
            mats = [[matrix_of(q) for q in row] for row in self.rotations.tolist()]
        post = None if self.post is None else self.post.tolist()
        return self.base.tolist(), self.pre.tolist(), mats, self.reach.tolist(), post

    def _affine(self, bases: list[Mat], pres: list[list[Mat]], posts: list[list[Mat]] | None) -> bool:
        """Whether every placement and joint transform ends in the row ``0, 0, 0, 1`` (the
        plain-float steps multiply only the top three rows)."""
        last = _AFFINE_ROW
        return (
            all(b[3] == last for b in bases)
            and all(m[3] == last for row in pres for m in row)
            and (posts is None or all(m[3] == last for row in posts for m in row))
        )

    def _rows_from_points(self, pts: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """:meth:`rotations_from_points` of a few rows in plain floats: the same steps (``None``
        for the rare cases that take another route there: a zero-length or reversed segment, a
        singular frame)."""
        bases, pres, mats_all, reaches, posts = self._row_parts()
        if not self._affine(bases, pres, posts):
            return None
        r0_all = self.rotations.tolist()
        n = len(r0_all[0])
        out: list[list[tuple[float, float, float, float]]] = []
        got: list[list[list[float]]] = []
        tips: list[Mat] = []
        for f, (parent, p) in enumerate(zip(bases, pts.tolist(), strict=True)):
            pre, mats, reach, r0 = pres[f], mats_all[f], reaches[f], r0_all[f]
            rot: list[tuple[float, float, float, float]] = []
            g: list[list[float]] = []
            for k in range(n):
                frame = affine_mul(parent, pre[k])
                pivot = [frame[0][3], frame[1][3], frame[2][3]]
                g.append(pivot)
                current = mat_vec(mats[k], reach[k])
                nxt = p[k + 1]
                wanted = solve3(frame, [nxt[0] - pivot[0], nxt[1] - pivot[1], nxt[2] - pivot[2]])
                if wanted is None:
                    return None
                delta = between_unit_one(current, wanted)
                if delta is None:
                    return None
                rot.append(quat_mul_one(delta, r0[k]))
                turned = lin_mul(matrix_of(delta, unit=True), mats[k])
                lin = lin_mul(frame, turned)
                if k == n - 1:
                    e = mat_vec(lin, reach[k])
                    g.append([pivot[0] + e[0], pivot[1] + e[1], pivot[2] + e[2]])
                parent = [[*lin[0], pivot[0]], [*lin[1], pivot[1]], [*lin[2], pivot[2]]]
                if posts is not None:
                    parent = affine_mul(parent, posts[f][k])
            out.append(rot)
            got.append(g)
            tips.append([*parent, [0.0, 0.0, 0.0, 1.0]])
        return np.array(out), np.array(got), np.array(tips)

    def points(self, rotations: FloatArray | None = None) -> FloatArray:
        """Pivots of the path's joints and its end point, ``(F, n + 1, 3)``."""
        return self.walk(rotations)[0]

    def placements(self, rotations: FloatArray | None = None) -> FloatArray:
        """Placements ``(F, n, 4, 4)`` of the path's joints for ``rotations`` (default current)."""
        r = self.rotations if rotations is None else rotations
        mats = normalized_rotation_matrices(r)
        out = np.empty((self.frames, r.shape[1], 4, 4))
        parent = self.base
        for k in range(r.shape[1]):
            parent = self._step(parent @ self.pre[:, k], k, mats[:, k])
            out[:, k] = parent
        return out

    def lengths(self) -> FloatArray:
        """Current segment lengths ``(F, n)`` (pivot to next point)."""
        out: FloatArray = np.linalg.norm(np.diff(self.points(), axis=1), axis=-1)
        return out

    def rotations_from_points(self, points: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Rotations ``(F, n, 4)`` that carry each segment toward the solved ``points``
        ``(F, n + 1, 3)``, parent-first from the current rotations; also the points and the last
        joint's placement they produce (forward kinematics of what would be written).

        A segment whose current or solved length is zero keeps its joint's rotation.
        """
        pts = np.asarray(points, dtype=np.float64)
        r0 = self.rotations
        n = r0.shape[1]
        if pts.shape != (self.frames, n + 1, 3):
            raise ValueError(f"points must have shape ({self.frames}, {n + 1}, 3), got {pts.shape}")
        if self.frames <= FEW_ROWS:
            few = self._rows_from_points(pts)
            if few is not None:
                return few
        out = np.empty_like(r0)
        got = np.empty_like(pts)
        mats = self._current_mats()
        # Each segment's current direction in its rotation-output space, all joints at once.
        currents = (mats @ self.reach[..., None])[..., 0]
        parent = self.base
        for k in range(n):
            frame = parent @ self.pre[:, k]
            pivot = frame[:, :3, 3]
            got[:, k] = pivot
            current = currents[:, k]
            # The solved direction is taken from the pivot where the rewritten parents put it,
            # back through the current parent frame (which may carry scale: solve, not transpose).
            wanted = np.linalg.solve(frame[:, :3, :3], (pts[:, k + 1] - pivot)[..., None])[..., 0]
            delta = quat_between_unit(current, wanted)
            out[:, k], delta_m = quat_mul_and_matrix(delta, r0[:, k])
            turned = delta_m @ mats[:, k]
            if k + 1 < n:
                parent = self._step(frame, k, turned)
            else:
                lin = frame[:, :3, :3] @ turned
                got[:, n] = pivot + (lin @ self.reach[:, k, :, None])[..., 0]
                # What _step gives, from the product just taken.
                parent = frame.copy()
                parent[:, :3, :3] = lin
                if self.post is not None:
                    parent = parent @ self.post[:, k]
        return out, got, parent


def end_rotations(
    skeleton: Skeleton, end_joints: Sequence[int], tip: FloatArray, orientation: ArrayLike
) -> FloatArray:
    """Local rotations ``(F, 4)`` that give end joints the skeleton-space ``orientation``
    ``(F, 4)`` when their parents are placed at ``tip`` ``(F, 4, 4)``. The frames are laid out
    joint-major like stacked paths: ``F / len(end_joints)`` rows per end joint."""
    ends = list(end_joints)
    frames = tip.shape[0] // len(ends)
    c0 = np.repeat(skeleton.parent_frames[ends][:, :3, :3], frames, axis=0)
    lin = tip[:, :3, :3] @ c0
    # Rotation part of the end joint's parent frame: strip (uniform) scale per column.
    lin = lin / np.sqrt(np.einsum("tij,tij->tj", lin, lin))[:, None, :]
    q = quat_mul(quat_conj(quat_from_rotation_matrix(lin)), np.asarray(orientation, dtype=np.float64))
    if skeleton.child_frames is not None:
        c1 = np.repeat(skeleton.child_frames[ends][:, :3, :3], frames, axis=0)
        c1 = c1 / np.linalg.norm(c1, axis=-2, keepdims=True)
        q = quat_mul(q, quat_from_rotation_matrix(c1))
    return q
