"""Mapping a four-legged rig onto the quadruped profile (:mod:`.quadruped_profile`) by shape
(docs/mapping.md#quadrupeds).

Structure decides, names vote:

* legs are the two **mirrored pairs** of unbranched chains that reach the ground (the chains are
  found as sibling subtrees that mirror each other across one plane; the two longest pairs whose
  ends lie lowest are the legs), and up runs from the plane their ends stand on towards the body;
* the spine is the path between the bones the two pairs hang from; which pair is in front is a
  vote of the paws (the last segment of a leg points forward), the hierarchy (the pelvis carries
  the spine) and the names (a head or neck beyond one end, a tail beyond the other);
* the neck and head are the chain leaving the front end forwards, the tail the chain leaving the
  pelvis backwards; ears are a mirrored pair on the head, the jaw a lone child of the head;
* left and right come from positions (left = up x forward); a name saying otherwise is a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..errors import MappingError
from ..rig.rotations import FloatArray
from .analysis_tree import AnalysedRig
from .bone_mapping import BoneMapping, MappedBone
from .quadruped_profile import QUADRUPED_MINIMUM

_LEFT = re.compile(r"(^|[^a-z])(left|l)([^a-z]|$)|left")
_RIGHT = re.compile(r"(^|[^a-z])(right|r)([^a-z]|$)|right")
_FRONT_WORDS = ("head", "neck", "jaw", "ear", "skull", "nose")
_HIND_WORDS = ("tail", "pelvis", "hip")


def _unit(v: FloatArray) -> FloatArray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.zeros(3)


class _Shape:
    """The analysis tree seen as unbranched chains and mirrored pairs."""

    def __init__(self, rig: AnalysedRig) -> None:
        self.rig = rig

    def chain_from(self, i: int) -> list[int]:
        path = [i]
        while len(self.rig.akids[path[-1]]) == 1:
            path.append(self.rig.akids[path[-1]][0])
        return path

    def points(self, chain: list[int]) -> FloatArray:
        return self.rig.path_points(chain)

    def length(self, chain: list[int]) -> float:
        p = self.points(chain)
        return float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum())

    def mirror(self, a: list[int], b: list[int]) -> FloatArray | None:
        """The unit normal of the plane ``a`` and ``b`` mirror each other across, else ``None``."""
        if len(a) != len(b):
            return None
        pa, pb = self.points(a), self.points(b)
        d = pa - pb
        size = max(self.length(a), self.length(b), 1e-9)
        n = _unit(d.mean(axis=0))
        if not n.any() or np.linalg.norm(d, axis=1).min() < 0.05 * size:
            return None
        dirs = d / np.linalg.norm(d, axis=1, keepdims=True)
        mids = (pa + pb) / 2 @ n
        if (dirs @ n).min() < 0.9 or float(np.ptp(mids)) > 0.1 * size:
            return None
        if abs(self.length(a) - self.length(b)) > 0.1 * size:
            return None
        return n

    def pairs(self, among: list[int]) -> list[tuple[list[int], list[int], FloatArray]]:
        """Mirrored pairs of chains starting at ``among`` (siblings), longest first."""
        chains = [self.chain_from(c) for c in among]
        out = []
        used: set[int] = set()
        order = sorted(range(len(chains)), key=lambda k: -self.length(chains[k]))
        for x in order:
            if x in used:
                continue
            for y in order:
                if y == x or y in used:
                    continue
                n = self.mirror(chains[x], chains[y])
                if n is not None:
                    out.append((chains[x], chains[y], n))
                    used |= {x, y}
                    break
        return out


def _refused(reason: str) -> BoneMapping:
    return BoneMapping(refusal=f"not a quadruped: {reason}")


def map_quadruped(names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None = None) -> BoneMapping:
    """Map a rig onto the quadruped profile (see module doc) from names, hierarchy and rest
    positions in any units, up axis and facing. Never raises for a rig of another shape: the
    result then carries a :attr:`BoneMapping.refusal` saying why."""
    if len(names) == 0:
        return BoneMapping(refusal="the armature has no bones")
    rig = AnalysedRig(names, parents, heads, tails)
    shape = _Shape(rig)
    pairs: list[tuple[int, list[int], list[int], FloatArray]] = []
    for p in rig.order:
        if len(rig.akids[p]) >= 2:
            pairs += [(p, a, b, n) for a, b, n in shape.pairs(rig.akids[p])]
    pairs = [q for q in pairs if len(q[1]) >= 2]
    if len(pairs) < 2:
        return _refused("fewer than two mirrored pairs of limbs")
    pairs.sort(key=lambda q: -shape.length(q[1]))
    legs = _leg_pairs(shape, pairs)
    if legs is None:
        return _refused("no two mirrored pairs of limbs stand on one ground")
    (pa, a1, a2, na), (pb, b1, b2, _), up = legs
    if pa == pb:
        return _refused("both pairs of legs hang from the same bone")
    if rig.is_ancestor(pb, pa):
        (pa, a1, a2), (pb, b1, b2) = (pb, b1, b2), (pa, a1, a2)
    if not rig.is_ancestor(pa, pb):
        return _refused("the two pairs of legs hang from separate branches, not from one spine")
    spine = rig.path_between(pa, pb)
    # Which end is the front: the paws point forward, the ancestor is the pelvis, names vote.
    roots_a = (rig.heads[a1[0]] + rig.heads[a2[0]]) / 2
    roots_b = (rig.heads[b1[0]] + rig.heads[b2[0]]) / 2
    axis = _unit((roots_b - roots_a) - ((roots_b - roots_a) @ up) * up)
    paws = [shape.points(c) for c in (a1, a2, b1, b2)]
    toes = sum(_unit((p[-1] - p[-2]) - ((p[-1] - p[-2]) @ up) * up) for p in paws)
    vote = 0.5 + float(np.clip(toes @ axis / 4, -1, 1))  # the hierarchy's half vote for pa as the pelvis
    vote += 0.5 * (_word_score(rig, pb, spine, _FRONT_WORDS) - _word_score(rig, pb, spine, _HIND_WORDS))
    vote -= 0.5 * (_word_score(rig, pa, spine, _FRONT_WORDS) - _word_score(rig, pa, spine, _HIND_WORDS))
    if vote <= 0.0:
        return _refused("its front legs carry the hind legs (a rig rooted at the chest is not read)")
    forward = axis
    left = np.cross(up, forward)
    out: dict[str, MappedBone] = {}
    conflicts: list[str] = []
    sure = min(0.95, 0.75 + 0.1 * vote)

    def put(slot: str, bone: int, reason: str) -> None:
        out[slot] = MappedBone(rig.names[bone], sure, reason)

    put("pelvis", pa, "carries the hind legs, the spine and the tail")
    for k, b in enumerate(spine, 1):
        put(f"spine_{k}", b, "on the path from the pelvis to the front legs")
    taken = set(spine) | {pa} | set(a1) | set(a2) | set(b1) | set(b2)
    for chain, c1, c2 in (("hind_leg", a1, a2), ("front_leg", b1, b2)):
        first_left = (shape.points(c1).mean(axis=0) - shape.points(c2).mean(axis=0)) @ left > 0
        for side, c in (("L", c1 if first_left else c2), ("R", c2 if first_left else c1)):
            for k, b in enumerate(c, 1):
                put(f"{chain}_{k}.{side}", b, f"{'front' if chain == 'front_leg' else 'hind'} leg reaching the ground, {side} by position")
            said = _side_word(rig.names[c[0]])
            if said is not None and said != side:
                conflicts.append(f"{rig.names[c[0]]!r} is named {'left' if said == 'L' else 'right'} but lies on the body's {'left' if side == 'L' else 'right'}")
    neck = _leaving(shape, pb, taken, forward, rig.heads[pb])
    if not neck:
        return _refused("no neck or head leaves the front of the spine")
    head = neck[-1]  # where the chain leaving the spine forwards ends or branches (ears, jaw, eyes)
    for k, b in enumerate(neck[: neck.index(head)], 1):
        put(f"neck_{k}", b, "between the front of the spine and the head")
    put("head", head, "the end of the chain leaving the spine forwards")
    tail = _leaving(shape, pa, taken | set(neck), -forward, rig.heads[pa])
    for k, b in enumerate(tail, 1):
        put(f"tail_{k}", b, "the chain leaving the pelvis backwards")
    _head_parts(shape, head, forward, left, put)
    return BoneMapping(out, conflicts, None, None)


def _leg_pairs(
    shape: _Shape, pairs: list[tuple[int, list[int], list[int], FloatArray]]
) -> tuple[tuple[int, list[int], list[int], FloatArray], tuple[int, list[int], list[int], FloatArray], FloatArray] | None:
    """The two pairs that stand on one ground (longest first), with the body's up."""
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            a, b = pairs[i], pairs[j]
            if abs(float(a[3] @ b[3])) < 0.9 or a[0] == b[0]:
                continue
            chains = (a[1], a[2], b[1], b[2])
            tips = np.stack([shape.points(c)[-1] for c in chains])
            roots = np.stack([shape.points(c)[0] for c in chains])
            side = _unit(a[3] + np.sign(a[3] @ b[3]) * b[3])
            # Up: the normal of the plane the four ends stand on, towards the body.
            centred = tips - tips.mean(axis=0)
            normal = np.linalg.svd(centred)[2][-1]
            normal = _unit(normal - (normal @ side) * side)
            if normal @ (roots.mean(axis=0) - tips.mean(axis=0)) < 0:
                normal = -normal
            leg = float(np.mean([shape.length(c) for c in chains]))
            heights = (tips - tips.mean(axis=0)) @ normal
            rise = (roots - tips) @ normal
            if np.ptp(heights) <= 0.3 * leg and rise.min() > 0.4 * leg:
                return a, b, normal
    return None


def _word_score(rig: AnalysedRig, end: int, spine: list[int], words: tuple[str, ...]) -> float:
    """1 when a bone beyond ``end`` (not on the spine) is named with one of ``words``."""
    for b in rig.subtree(end):
        if b in spine:
            continue
        name = rig.names[b].lower()
        if any(w in name for w in words):
            return 1.0
    return 0.0


def _side_word(name: str) -> str | None:
    low = re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()
    left, right = bool(_LEFT.search(low)), bool(_RIGHT.search(low))
    return "L" if left and not right else "R" if right and not left else None


def _leaving(shape: _Shape, start: int, taken: set[int], towards: FloatArray, at: FloatArray) -> list[int]:
    """The unbranched chain among ``start``'s children (not ``taken``) that runs furthest
    along ``towards``; empty when none runs that way."""
    best: list[int] = []
    best_reach = 0.0
    for c in shape.rig.akids[start]:
        if c in taken:
            continue
        chain = shape.chain_from(c)
        reach = float((shape.points(chain)[-1] - at) @ towards)
        if reach > best_reach:
            best, best_reach = chain, reach
    return best


def _head_parts(shape: _Shape, head: int, forward: FloatArray, left: FloatArray, put: Callable[[str, int, str], None]) -> None:
    """Ears (a mirrored pair of the head's children) and the jaw (a lone child running forward)."""
    rig = shape.rig
    kids = rig.akids[head]
    if not kids:
        return
    paired: set[int] = set()
    for a, b, _ in shape.pairs(kids):
        first_left = (shape.points(a).mean(axis=0) - shape.points(b).mean(axis=0)) @ left > 0
        for side, c in (("L", a if first_left else b), ("R", b if first_left else a)):
            for k, bone in enumerate(c, 1):
                put(f"ear_{k}.{side}", bone, "mirrored pair on the head")
        paired |= set(a) | set(b)
        break
    rest = [c for c in kids if c not in paired]
    if rest:
        jaw = max(rest, key=lambda c: float((rig.ends[c] - rig.heads[head]) @ forward))
        if float((rig.ends[jaw] - rig.heads[jaw]) @ forward) > 0:
            put("jaw", jaw, "a lone child of the head running forward")


def check_quadruped(
    names: Sequence[str], parents: ArrayLike, heads: ArrayLike, tails: ArrayLike | None = None, mapping: BoneMapping | None = None
) -> BoneMapping:
    """The rig's quadruped mapping (``mapping`` or an automatic one), or :class:`MappingError`
    naming why it cannot be retargeted as a quadruped: the refusal, missing slots, bones not in
    the rig."""
    if mapping is None:
        mapping = map_quadruped(names, parents, heads, tails)
    if mapping.refusal is not None:
        raise MappingError(mapping.refusal)
    known = set(names)
    for slot, mb in mapping.slots.items():
        if mb.bone not in known:
            raise MappingError(f"the mapping names bone {mb.bone!r} ({slot}), which is not in the rig")
    missing = [s for s in QUADRUPED_MINIMUM if s not in mapping.slots]
    if missing:
        raise MappingError(f"not a usable quadruped: no bone for {', '.join(missing)}")
    return mapping
