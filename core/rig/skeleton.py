"""Skeleton layout, attachment frames and forward kinematics, vectorised over frames.

A skeleton is an ordered list of joints, parents before children. Joint ``i`` has a parent index
(``-1`` for none), a parent-side attachment frame ``C0`` and a child-side frame ``C1``. With the
parent's placement ``P`` and the joint's animated local transform ``T`` its placement is::

    M = P @ C0 @ T @ inv(C1)

A Blender bone is the case ``C0 = inv(parent_rest) @ rest`` (the parent-relative rest matrix, or
the armature-space rest for a root bone) and ``C1 = I``; its ``T`` is ``pose_bone.matrix_basis``.
glTF nodes and engine motor joints fill in both frames. Local poses therefore live in the joint's
attachment frame, never in world space: anything that picks a world orientation converts it back
with :meth:`Skeleton.local_from_world`.

Placements are in *skeleton space* (Blender's armature space). ``placement`` is the skeleton's own
world transform (Blender's ``object.matrix_world``, which may carry a parent's scale and rotation);
:meth:`Skeleton.world_from_skeleton` applies it.

Conventions of :mod:`core.rig.rotations` apply: w-first Hamilton quaternions, column vectors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import RigError
from .rotations import FloatArray, invert_transform, matrix_from_quat, transform_from_parts

_IDENTITY4 = np.eye(4)


@dataclass(frozen=True)
class Joint:
    """One joint as an input to :meth:`Skeleton.from_joints` (any order, parents by name)."""

    name: str
    parent: str | None
    parent_frame: ArrayLike  # C0, 4x4
    child_frame: ArrayLike | None = None  # C1, 4x4; None means identity


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a.setflags(write=False)
    return a


def _check_transforms(a: FloatArray, n: int, what: str) -> None:
    if a.shape != (n, 4, 4):
        raise RigError(f"{what} must have shape ({n}, 4, 4), got {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = int(np.argwhere(~np.isfinite(a).all(axis=(1, 2)))[0, 0])
        raise RigError(f"{what} of joint {bad} is not finite")


class Skeleton:
    """An immutable joint layout. Build it with :meth:`from_rest_matrices` (Blender bones) or
    :meth:`from_joints` (general attachment frames)."""

    __slots__ = (
        "names",
        "parents",
        "parent_frames",
        "child_frames",
        "placement",
        "_name_index",
        "_inv_parent_frames",
        "_signature",
        "_depth_levels",
    )

    def __init__(
        self,
        names: Sequence[str],
        parents: ArrayLike,
        parent_frames: ArrayLike,
        child_frames: ArrayLike | None = None,
        placement: ArrayLike | None = None,
    ) -> None:
        names = tuple(str(n) for n in names)
        n = len(names)
        if n == 0:
            raise RigError("the skeleton has no bones")
        par = np.asarray(parents, dtype=np.int64).reshape(-1)
        if par.shape != (n,):
            raise RigError(f"parents must have one entry per joint ({n}), got {par.shape}")
        idx = np.arange(n)
        if np.any((par >= idx) | (par < -1)):
            bad = int(np.argwhere((par >= idx) | (par < -1))[0, 0])
            raise RigError(
                f"joint {names[bad]!r} comes before its parent: the layout must list parents first"
            )
        c0 = np.array(parent_frames, dtype=np.float64)
        _check_transforms(c0, n, "parent_frames (C0)")
        c1: FloatArray | None = None
        if child_frames is not None:
            c1 = np.array(child_frames, dtype=np.float64)
            _check_transforms(c1, n, "child_frames (C1)")
            if np.allclose(c1, _IDENTITY4, atol=0.0, rtol=0.0):
                c1 = None
        pl = np.eye(4) if placement is None else np.array(placement, dtype=np.float64)
        if pl.shape != (4, 4) or not np.all(np.isfinite(pl)):
            raise RigError(f"placement must be a finite 4x4 matrix, got shape {pl.shape}")
        if abs(np.linalg.det(pl[:3, :3])) < 1e-12:
            raise RigError("the skeleton's placement is degenerate (zero scale)")
        self.names: tuple[str, ...] = names
        self.parents: NDArray[np.int64] = _readonly(par)
        self.parent_frames: FloatArray = _readonly(c0)
        self.child_frames: FloatArray | None = None if c1 is None else _readonly(c1)
        self.placement: FloatArray = _readonly(pl)
        self._inv_parent_frames: FloatArray = _readonly(np.linalg.inv(c0))
        self._name_index = self._build_name_index()
        self._signature: str | None = None
        self._depth_levels: list[tuple[NDArray[np.int64], NDArray[np.int64] | None]] | None = None

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_rest_matrices(
        cls,
        names: Sequence[str],
        parents: Sequence[int | str | None],
        rest_matrices: ArrayLike,
        placement: ArrayLike | None = None,
    ) -> Skeleton:
        """Blender bones: ``rest_matrices`` are skeleton-space rests (``bone.matrix_local``),
        ``parents`` indices or names (``None``/``-1`` for roots), in any order."""
        rest = np.asarray(rest_matrices, dtype=np.float64)
        names = [str(n) for n in names]
        n = len(names)
        if n == 0:
            raise RigError("the armature has no bones")
        _check_transforms(rest, n, "rest matrices")
        par_idx = _parent_indices(names, parents)
        order = _parents_first_order(par_idx)
        remap = np.empty(n, dtype=np.int64)
        remap[order] = np.arange(n)
        new_par = np.array([-1 if par_idx[o] < 0 else remap[par_idx[o]] for o in order], dtype=np.int64)
        rest = rest[order]
        c0 = rest.copy()
        has_parent = new_par >= 0
        if np.any(has_parent):
            c0[has_parent] = np.linalg.inv(rest[new_par[has_parent]]) @ rest[has_parent]
        return cls([names[o] for o in order], new_par, c0, None, placement)

    @classmethod
    def from_joints(
        cls, joints: Sequence[Joint], root: str | None = None, placement: ArrayLike | None = None
    ) -> Skeleton:
        """General joints with attachment frames.

        Joints whose parent names a joint that does not exist are dropped together with their
        descendants (their referenced part is missing). When ``root`` is given, joints of other
        trees are kept, unparented, so nothing they carry is lost.
        """
        by_name: dict[str, Joint] = {}
        for j in joints:
            if j.name in by_name:
                raise RigError(
                    f"two joints are both called {j.name!r}; give them distinct names to build a layout"
                )
            by_name[j.name] = j
        kept: list[Joint] = []
        known: set[str] = set()
        pending = list(joints)
        # Resolve in passes so input order does not matter; what never resolves is dropped.
        while pending:
            progressed = False
            rest_pending = []
            for j in pending:
                if j.parent is None or j.parent in known:
                    kept.append(j)
                    known.add(j.name)
                    progressed = True
                elif j.parent in by_name:
                    rest_pending.append(j)
            pending = rest_pending
            if not progressed:
                break
        if not kept:
            raise RigError("no joint has all its referenced parts; the skeleton would be empty")
        names = [j.name for j in kept]
        parents: list[int | str | None] = [j.parent for j in kept]
        if root is not None:
            if root not in known:
                raise RigError(f"root joint {root!r} is not in the skeleton")
            # Joints of other trees already start at a parentless joint of their own; they stay.
        index = {nm: i for i, nm in enumerate(names)}
        par_idx = np.array([-1 if p is None else index[str(p)] for p in parents], dtype=np.int64)
        c0 = np.array([np.asarray(j.parent_frame, dtype=np.float64) for j in kept])
        c1 = np.array(
            [_IDENTITY4 if j.child_frame is None else np.asarray(j.child_frame, dtype=np.float64) for j in kept]
        )
        return cls(names, par_idx, c0, c1, placement)

    def with_placement(self, placement: ArrayLike) -> Skeleton:
        return Skeleton(self.names, self.parents, self.parent_frames, self.child_frames, placement)

    # --- lookup ------------------------------------------------------------------------------

    def _build_name_index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        dupes: set[str] = set()
        for i, nm in enumerate(self.names):
            if nm in index:
                dupes.add(nm)
            index[nm] = i
            p = int(self.parents[i])
            if p >= 0:
                index.setdefault(f"{self.names[p]}/{nm}", i)
        for nm in dupes:
            index[nm] = -1  # marks an ambiguous bare name
        return index

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"Skeleton({len(self)} joints, root {self.names[0]!r})"

    def index(self, name: str) -> int:
        """Index of a joint by bare name or by ``Parent/Child``; ambiguous bare names are refused."""
        i = self._name_index.get(name)
        if i is None:
            raise RigError(f"no joint called {name!r} in the skeleton")
        if i < 0:
            raise RigError(
                f"{name!r} names more than one joint; qualify it with its parent (Parent/{name})"
            )
        return i

    def find(self, name: str) -> int | None:
        """Like :meth:`index` but ``None`` for a missing or ambiguous name."""
        i = self._name_index.get(name)
        return None if i is None or i < 0 else i

    def children(self, i: int) -> list[int]:
        return [int(c) for c in np.flatnonzero(self.parents == i)]

    def descendants(self, i: int) -> list[int]:
        out: list[int] = []
        inside = np.zeros(len(self), dtype=bool)
        inside[i] = True
        for j in range(i + 1, len(self)):
            p = self.parents[j]
            if p >= 0 and inside[p]:
                inside[j] = True
                out.append(j)
        return out

    def ancestors(self, i: int) -> list[int]:
        """Joints above ``i``, its parent first, up to the root (empty for a root)."""
        out: list[int] = []
        p = int(self.parents[i])
        while p >= 0:
            out.append(p)
            p = int(self.parents[p])
        return out

    def chain(self, ancestor: int, descendant: int) -> list[int]:
        """Joints from ``ancestor`` down to ``descendant`` inclusive; refuses if not a chain."""
        out = [descendant]
        while out[-1] != ancestor:
            p = int(self.parents[out[-1]])
            if p < 0:
                raise RigError(
                    f"{self.names[descendant]!r} is not below {self.names[ancestor]!r} in the hierarchy"
                )
            out.append(p)
        return out[::-1]

    # --- kinematics --------------------------------------------------------------------------

    def local_transforms(
        self, rotations: ArrayLike, translations: ArrayLike | None = None, scales: ArrayLike | None = None
    ) -> FloatArray:
        """Local 4x4 transforms ``T`` from ``(T, B, 4)`` quaternions, ``(T, B, 3)`` translations
        and optional scales."""
        rot = np.asarray(rotations, dtype=np.float64)
        n = len(self)
        if rot.ndim != 3 or rot.shape[1:] != (n, 4):
            raise ValueError(f"rotations must have shape (T, {n}, 4), got {rot.shape}")
        tr = np.zeros(rot.shape[:2] + (3,)) if translations is None else np.asarray(translations, dtype=np.float64)
        if tr.shape != rot.shape[:2] + (3,):
            raise ValueError(f"translations must have shape {rot.shape[:2] + (3,)}, got {tr.shape}")
        sc = None if scales is None else np.asarray(scales, dtype=np.float64)
        if sc is not None and sc.shape != rot.shape[:2] + (3,):
            raise ValueError(f"scales must have shape {rot.shape[:2] + (3,)}, got {sc.shape}")
        return transform_from_parts(rot, tr, sc)

    def forward_kinematics(
        self, rotations: ArrayLike, translations: ArrayLike | None = None, scales: ArrayLike | None = None
    ) -> FloatArray:
        """Skeleton-space placements ``(T, B, 4, 4)`` of every joint at every frame."""
        return self.forward_kinematics_from_locals(self.local_transforms(rotations, translations, scales))

    def forward_kinematics_from_locals(self, local: ArrayLike) -> FloatArray:
        local = np.asarray(local, dtype=np.float64)
        n = len(self)
        if local.ndim != 4 or local.shape[1:] != (n, 4, 4):
            raise ValueError(f"local transforms must have shape (T, {n}, 4, 4), got {local.shape}")
        # Everything except the parent product is independent per bone: do it for all at once.
        attached = self.parent_frames @ local
        if self.child_frames is not None:
            attached = attached @ np.linalg.inv(self.child_frames)
        world = np.empty_like(attached)
        # One product per depth level of the hierarchy (all bones of a level at once), not one
        # per bone: a humanoid has ~10 levels and 50-200 bones.
        for level, parent in self._levels:
            if parent is None:
                world[:, level] = attached[:, level]
            else:
                world[:, level] = world[:, parent] @ attached[:, level]
        return world

    def bone_placements(
        self,
        bones: ArrayLike,
        rotations: ArrayLike,
        translations: ArrayLike,
        scales: ArrayLike | None = None,
        turn: FloatArray | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """Skeleton-space placements of a few joints, split into linear parts ``(S, T, 3, 3)``
        and positions ``(S, T, 3)``: the same values as :meth:`forward_kinematics`, for less.

        ``bones`` are ``S`` joint indices in increasing order that hold every ancestor of each
        (a subset closed under parents); ``rotations`` ``(S, T, 4)``, ``translations`` and
        ``scales`` ``(S, T, 3)`` are their local transforms. Arrays are *bone-major* (joint, then
        frame): a joint's frames are one contiguous block, so the walk down the hierarchy slices
        instead of gathering, and 3x3 products plus a vector replace 4x4 products.

        ``turn`` (3x3), when given, is applied on the left of every placement: folded into the
        roots' products, a change of axes costs nothing further.
        """
        idx = np.asarray(bones, dtype=np.int64)
        lin = matrix_from_quat(rotations)
        if scales is not None:
            lin = lin * np.asarray(scales, dtype=np.float64)[..., None, :]
        tr = np.asarray(translations, dtype=np.float64)
        # Attached = C0 @ T @ inv(C1), by parts: rotation C0r Tr iC1r, position C0r (Tr iC1t + t) + C0t.
        # C0r is applied in the walk below, as ``(parent @ C0r) @ Tr``: a constant on the right of
        # a block of frames is one (3T, 3) @ (3, 3) product, on the left it would be T products.
        c0 = self.parent_frames[idx]
        c0_r = c0[:, :3, :3]
        if self.child_frames is not None:
            inv_c1 = np.linalg.inv(self.child_frames[idx])
            tr = np.einsum("stij,sj->sti", lin, inv_c1[:, :3, 3]) + tr
            lin = lin @ inv_c1[:, None, :3, :3]
        att_t = tr @ np.swapaxes(c0_r, -1, -2) + c0[:, None, :3, 3]  # rows @ C0r^T = C0r @ t
        row = {int(b): r for r, b in enumerate(idx)}
        t = lin.shape[1]
        # Each joint's block of ``lin`` is overwritten by its placement once read, parents before
        # children: no second (S, T, 3, 3) array (fresh memory faults in at a real cost).
        world_r = lin
        world_p = np.empty_like(att_t)
        for r, b in enumerate(idx):
            p = int(self.parents[b])
            if p < 0:
                if turn is None:
                    world_r[r] = c0_r[r] @ lin[r]
                    world_p[r] = att_t[r]
                else:
                    world_r[r] = (turn @ c0_r[r]) @ lin[r]
                    world_p[r] = att_t[r] @ turn.T
                continue
            pr = row[p]  # a KeyError here means ``bones`` misses an ancestor
            turned = (world_r[pr].reshape(3 * t, 3) @ c0_r[r]).reshape(t, 3, 3)
            world_r[r] = turned @ lin[r]
            np.einsum("tij,tj->ti", world_r[pr], att_t[r], out=world_p[r])
            world_p[r] += world_p[pr]
        return world_r, world_p

    @property
    def inverse_parent_frames(self) -> FloatArray:
        """``inv(C0)`` of every joint ``(B, 4, 4)``, computed once (read-only)."""
        return self._inv_parent_frames

    @property
    def _levels(self) -> list[tuple[NDArray[np.int64], NDArray[np.int64] | None]]:
        cached = self._depth_levels
        if cached is None:
            depth = np.zeros(len(self), dtype=np.int64)
            for i in range(len(self)):
                p = self.parents[i]
                depth[i] = 0 if p < 0 else depth[p] + 1
            cached = []
            for d in range(int(depth.max()) + 1):
                level = np.flatnonzero(depth == d)
                cached.append((level, None if d == 0 else self.parents[level]))
            object.__setattr__(self, "_depth_levels", cached)
        return cached

    def rest_placements(self) -> FloatArray:
        """Skeleton-space placements ``(B, 4, 4)`` with every local transform at identity."""
        return self.forward_kinematics_from_locals(np.broadcast_to(_IDENTITY4, (1, len(self), 4, 4)))[0]

    def local_from_world(self, world: ArrayLike, parent_world: ArrayLike | None = None) -> FloatArray:
        """Local transforms ``T = inv(C0) @ inv(P) @ M @ C1`` for all joints.

        ``world`` is ``(T, B, 4, 4)`` skeleton-space placements. The parent placement ``P`` of
        each joint is taken from ``world`` itself unless ``parent_world`` (same shape, holding for
        joint ``i`` the *current* placement of its parent) is given.
        """
        world = np.asarray(world, dtype=np.float64)
        n = len(self)
        if world.ndim != 4 or world.shape[1:] != (n, 4, 4):
            raise ValueError(f"world placements must have shape (T, {n}, 4, 4), got {world.shape}")
        if parent_world is None:
            pw = np.broadcast_to(_IDENTITY4, world.shape).copy()
            has = self.parents >= 0
            pw[:, has] = world[:, self.parents[has]]
        else:
            pw = np.asarray(parent_world, dtype=np.float64)
        rel = np.linalg.solve(pw, world)  # inv(P) @ M, batched and better conditioned
        local = self._inv_parent_frames @ rel
        if self.child_frames is not None:
            local = local @ self.child_frames
        return local

    def joint_local_from_world(self, i: int, world: ArrayLike, parent_world: ArrayLike | None) -> FloatArray:
        """Local transform ``(T, 4, 4)`` of joint ``i`` that puts it at ``world`` under the
        parent's current placement ``parent_world`` (``None`` for a root)."""
        m = np.asarray(world, dtype=np.float64)
        rel = m if parent_world is None else np.linalg.solve(np.asarray(parent_world, dtype=np.float64), m)
        local = self._inv_parent_frames[i] @ rel
        if self.child_frames is not None:
            local = local @ self.child_frames[i]
        return local

    def world_from_skeleton(self, placements: ArrayLike) -> FloatArray:
        """Apply the skeleton's own world placement to skeleton-space placements."""
        return self.placement @ np.asarray(placements, dtype=np.float64)

    def skeleton_from_world(self, placements: ArrayLike) -> FloatArray:
        return invert_transform(self.placement) @ np.asarray(placements, dtype=np.float64)

    # --- identity ----------------------------------------------------------------------------

    def signature(self) -> str:
        """Stable hash of names, parents and rounded rest data (not of the placement).

        Two skeletons with the same bone count are not thereby compatible; two with the same
        signature are. Rest data is rounded to 1e-4 so float noise from exporters does not split
        one layout in two.
        """
        if self._signature is None:
            h = hashlib.sha1()
            h.update("\x00".join(self.names).encode("utf-8"))
            h.update(self.parents.astype("<i8").tobytes())
            for frames in (self.parent_frames, self.child_frames):
                if frames is not None:
                    r = np.round(frames, 4) + 0.0  # +0.0 folds -0.0 into 0.0
                    h.update(r.astype("<f8").tobytes())
            object.__setattr__(self, "_signature", h.hexdigest()[:16])
        assert self._signature is not None
        return self._signature


def _parent_indices(names: Sequence[str], parents: Sequence[int | str | None]) -> list[int]:
    if len(parents) != len(names):
        raise RigError(f"got {len(parents)} parents for {len(names)} joints")
    index: dict[str, int] = {}
    for i, nm in enumerate(names):
        if nm in index:
            raise RigError(f"two bones are both called {nm!r}")
        index[nm] = i
    out: list[int] = []
    for i, p in enumerate(parents):
        if p is None:
            out.append(-1)
        elif isinstance(p, str):
            if p not in index:
                raise RigError(f"bone {names[i]!r} has parent {p!r}, which is not in the armature")
            out.append(index[p])
        else:
            pi = int(p)
            if pi >= len(names) or pi < -1 or pi == i:
                raise RigError(f"bone {names[i]!r} has an invalid parent index {pi}")
            out.append(pi)
    return out


def _parents_first_order(par: Sequence[int]) -> list[int]:
    """Depth-first order (children in input order), the order Blender lists pose bones in."""
    n = len(par)
    kids: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for i, p in enumerate(par):
        (roots if p < 0 else kids[p]).append(i)
    order: list[int] = []
    stack = roots[::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(kids[i][::-1])
    if len(order) != n:
        raise RigError("the bone hierarchy has a cycle")
    return order
