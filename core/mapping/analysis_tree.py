"""The rig as the mapper reads it: its arrays and the analysis tree.

Inputs are plain arrays: ``names`` (B), ``parents`` (B,) indices with ``-1`` for a root, in any
order, and skeleton-space rest ``heads`` / ``tails`` (B, 3) in any units, any up axis and any
facing. Bones that drive or decorate the rig rather than deform the body are left out of the
analysis tree and their children re-hung from the nearest kept ancestor; each bone keeps what its
name says (:mod:`core.mapping.name_hints`), and the longest reach below it for following limbs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..errors import MappingError
from ..rig.rotations import FloatArray
from .limb_ends import degenerate_tails, end_markers, joint_ends, loose_root_parents
from .name_hints import read_names


class AnalysedRig:
    """Arrays of one rig plus the analysis tree: bones that drive or decorate the rig (IK targets,
    poles, end markers, MakeHuman ``__`` offsets, Rigify's non-deforming bones) are left out and
    their children re-hung from the nearest kept ancestor."""

    def __init__(self, names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None) -> None:
        self.names = [str(n) for n in names]
        n = len(self.names)
        self.n = n
        par = np.asarray(parents, dtype=np.int64).reshape(-1)
        if par.shape != (n,):
            raise MappingError(f"parents must have shape ({n},) to match {n} names, got {par.shape}")
        if np.any((par < -1) | (par >= n)) or np.any(par == np.arange(n)):
            bad = int(np.argwhere((par < -1) | (par >= n) | (par == np.arange(n)))[0, 0])
            raise MappingError(f"bone {self.names[bad]!r} has an invalid parent index {int(par[bad])}")
        self.parents = par
        h = np.asarray(heads, dtype=np.float64)
        if h.shape != (n, 3):
            raise MappingError(f"heads must have shape ({n}, 3), got {h.shape}")
        if not np.all(np.isfinite(h)):
            raise MappingError("bone heads must be finite")
        self.heads = h
        self.kids: list[list[int]] = [[] for _ in range(n)]
        for i, p in enumerate(par):
            if p >= 0:
                self.kids[int(p)].append(i)
        self._check_acyclic()
        if tails is None:
            # Same convention as the retarget's default ends: children's heads, else the parent's line.
            ends = joint_ends(h, par, self.kids)
            self.has_tails = False
            self.tail_ok = np.zeros(n, dtype=bool)
        else:
            ends = np.asarray(tails, dtype=np.float64)
            if ends.shape != (n, 3):
                raise MappingError(f"tails must have shape ({n}, 3), got {ends.shape}")
            if not np.all(np.isfinite(ends)):
                raise MappingError("bone tails must be finite")
            self.has_tails = True
            # Near-zero bone lengths (glTF joints): where those bones go is read from the joints.
            pts = np.concatenate([h, ends])
            short = degenerate_tails(h, ends, par, self.kids, float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))))
            ends = np.where(short[:, None], joint_ends(h, par, self.kids, ends), ends)
            self.tail_ok = ~short
        self.ends = ends
        pts = np.concatenate([h, ends])
        self.size = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0))) or 1.0
        self.hints, self.convention = read_names(self.names, [not k for k in self.kids])
        self._build_analysis_tree()

    def _check_acyclic(self) -> None:
        state = np.zeros(self.n, dtype=np.int8)
        for start in range(self.n):
            i = start
            trail = []
            while i >= 0 and state[i] == 0:
                state[i] = 1
                trail.append(i)
                i = int(self.parents[i])
            if i >= 0 and state[i] == 1 and i in trail:
                raise MappingError(f"the bone hierarchy has a cycle through {self.names[i]!r}")
            for t in trail:
                state[t] = 2

    def _build_analysis_tree(self) -> None:
        n = self.n
        keep = np.array([h.role == "body" for h in self.hints], dtype=bool)
        deform_prefixed = [nm.startswith("DEF-") for nm in self.names]
        index = {nm: i for i, nm in enumerate(self.names)}
        if sum(deform_prefixed) >= 10:
            # A generated Rigify rig: only the DEF- bones deform. They hang from ORG- bones, so the
            # deform hierarchy is recovered through the ORG- bone's DEF- twin.
            keep &= np.array(deform_prefixed)
        if self.has_tails:
            # An importer's end marker (the FBX importer's ``*_end`` leaves), whatever its name,
            # is not a body part.
            keep[end_markers(self.heads, self.ends, self.parents, self.kids, self.size)] = False
        self.keep = keep
        apar = np.full(n, -1, dtype=np.int64)
        for i in range(n):
            if not keep[i]:
                continue
            p = int(self.parents[i])
            while p >= 0:
                if keep[p]:
                    break
                twin = index.get("DEF-" + self.names[p][4:]) if self.names[p].startswith("ORG-") else None
                if twin is not None and twin != i and keep[twin]:
                    p = twin
                    break
                p = int(self.parents[p])
            apar[i] = p
        for root, anchor in loose_root_parents(self.heads, self.ends, apar, keep, self.size).items():
            apar[root] = anchor
        self.apar = apar
        self.akids: list[list[int]] = [[] for _ in range(n)]
        self.roots: list[int] = []
        for i in range(n):
            if keep[i]:
                (self.akids[int(apar[i])] if apar[i] >= 0 else self.roots).append(i)
        # Parents-first order of the analysis tree.
        order: list[int] = []
        stack = self.roots[::-1]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(self.akids[i][::-1])
        self.order = order
        depth = np.zeros(n, dtype=np.int64)
        for i in order:
            if apar[i] >= 0:
                depth[i] = depth[apar[i]] + 1
        self.depth = depth
        # Longest path (by joint-to-joint length) from each bone's head to a leaf's end point.
        reach = np.zeros(n)
        best_kid = np.full(n, -1, dtype=np.int64)
        for i in reversed(order):
            own = float(np.linalg.norm(self.ends[i] - self.heads[i]))
            reach[i] = own
            best = -1.0
            for c in self.akids[i]:
                # Prefer deliberately unmapped twins (MMD's D-bone legs) last on a tie.
                val = float(np.linalg.norm(self.heads[c] - self.heads[i])) + reach[c]
                val *= 0.999 if self.hints[c].known_unmapped else 1.0
                if val > best:
                    best, best_kid[i] = val, c
            if best > reach[i]:
                reach[i] = best
        self.reach = reach
        self.best_kid = best_kid

    # --- paths ---------------------------------------------------------------------------

    def main_path(self, start: int) -> list[int]:
        path = [start]
        while self.best_kid[path[-1]] >= 0:
            path.append(int(self.best_kid[path[-1]]))
        return path

    def path_points(self, path: Sequence[int]) -> FloatArray:
        return np.concatenate([self.heads[list(path)], self.ends[path[-1]][None]])

    def leaf_paths(self, start: int, limit: int = 6) -> list[list[int]]:
        """The ``limit`` longest root-to-leaf paths of ``start``'s subtree."""
        paths: list[tuple[float, list[int]]] = []
        stack: list[tuple[int, list[int], float]] = [(start, [start], 0.0)]
        while stack and len(paths) < 400:
            i, path, length = stack.pop()
            kids = self.akids[i]
            if not kids:
                paths.append((length + float(np.linalg.norm(self.ends[i] - self.heads[i])), path))
            for c in kids:
                stack.append((c, path + [c], length + float(np.linalg.norm(self.heads[c] - self.heads[i]))))
        paths.sort(key=lambda t: -t[0])
        return [p for _, p in paths[:limit]]

    def is_ancestor(self, a: int, b: int) -> bool:
        """``a`` is ``b`` or above it in the analysis tree."""
        while b >= 0:
            if b == a:
                return True
            b = int(self.apar[b])
        return False

    def lca(self, a: int, b: int) -> int:
        seen = set()
        while a >= 0:
            seen.add(a)
            a = int(self.apar[a])
        while b >= 0 and b not in seen:
            b = int(self.apar[b])
        return b

    def path_between(self, top: int, bottom: int) -> list[int]:
        """Bones from ``top`` (exclusive) down to ``bottom`` (inclusive)."""
        out = []
        while bottom >= 0 and bottom != top:
            out.append(bottom)
            bottom = int(self.apar[bottom])
        return out[::-1]

    def subtree(self, i: int) -> list[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.akids[j])
        return out


# --- structure: mirrored limbs and the body --------------------------------------------------
