"""Legs and arms found by shape: pairs of subtrees that mirror each other, and the body they make.

Limb chains are found as mirrored pairs of subtrees (resampled along their length and reflected
through the plane between them); the body is the pair of legs and the pair of arms that hang from
one spine, the hips being the bone that carries both. Names only vote (a subtree whose names say
arm is less likely the legs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from ..rig.rotations import FloatArray
from .analysis_tree import AnalysedRig
from .limb_ends import COINCIDENT, unit

# Two chains are mirror images when their resampled shapes agree within this fraction of their
# length (mocap T-poses are a few percent asymmetric).
_MIRROR_TOLERANCE = 0.2
_RESAMPLE = 9


def _resample(points: FloatArray, k: int = _RESAMPLE) -> FloatArray:
    """``k`` points spaced evenly by arc length along a polyline."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    if cum[-1] <= 0.0:
        return np.repeat(points[:1], k, axis=0)
    t = np.linspace(0.0, cum[-1], k)
    return np.stack([np.interp(t, cum, points[:, d]) for d in range(3)], axis=1)


@dataclass(frozen=True)
class MirrorPair:
    parent: int  # -1 when the two subtrees are roots
    a: int
    b: int
    length: float  # the shorter of the two matched chains
    normal: FloatArray  # unit, from b's side to a's side
    origin: FloatArray  # a point on the mirror plane
    error: float  # mirror error as a fraction of length
    path_a: tuple[int, ...]  # the chains that mirror each other (a prop in one hand is not on them)
    path_b: tuple[int, ...]


def path_length(points: FloatArray) -> float:
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def _mirror_pair(rig: AnalysedRig, parent: int, a: int, b: int) -> MirrorPair | None:
    longest = max(rig.reach[a], rig.reach[b])
    # Limbs are a sizeable part of the body; fingers, toes and face bones are not (and skipping
    # them keeps face rigs with hundreds of paired bones fast).
    if min(rig.reach[a], rig.reach[b]) <= 0.05 * rig.size:
        return None
    found = _match_paths(rig, [rig.main_path(a)], [rig.main_path(b)], longest)
    if found is None or found[5] > _MIRROR_TOLERANCE:
        # The longest paths differ (a prop in one hand): try the other chains.
        found = _match_paths(rig, _with_prefixes(rig.leaf_paths(a, 8)), _with_prefixes(rig.leaf_paths(b, 8)), longest)
    if found is None or found[5] > _MIRROR_TOLERANCE:
        return None
    _, n, o, pa, pb, err = found
    length = min(path_length(rig.path_points(pa)), path_length(rig.path_points(pb)))
    return MirrorPair(parent, a, b, length, n, o, err, tuple(pa), tuple(pb))


def _with_prefixes(paths: list[list[int]]) -> list[list[int]]:
    """The paths and every prefix of two bones or more: a prop that is the hand's only child ends
    every path of its arm, and the arm alone is what mirrors the other one."""
    out: list[list[int]] = []
    for p in paths:
        for k in range(len(p), 1, -1):
            if p[:k] not in out:
                out.append(p[:k])
    return out


def _match_paths(
    rig: AnalysedRig, paths_a: list[list[int]], paths_b: list[list[int]], longest: float
) -> tuple[float, FloatArray, FloatArray, list[int], list[int], float] | None:
    best: tuple[float, FloatArray, FloatArray, list[int], list[int], float] | None = None
    for pa in paths_a:
        pts_a = rig.path_points(pa)
        la = path_length(pts_a)
        p = _resample(pts_a)
        for pb in paths_b:
            pts_b = rig.path_points(pb)
            lb = path_length(pts_b)
            if min(la, lb) < 0.7 * max(la, lb) or max(la, lb) <= COINCIDENT * rig.size:
                continue
            q = _resample(pts_b)
            mp, mq = p.mean(axis=0), q.mean(axis=0)
            sep = float(np.linalg.norm(mp - mq))
            if sep < 0.05 * max(la, lb):
                continue  # the same place twice (a duplicate chain), not a mirror image
            n = (mp - mq) / sep
            o = 0.5 * (mp + mq)
            reflected = q - 2.0 * ((q - o) @ n)[:, None] * n
            err = float(np.linalg.norm(p - reflected, axis=1).mean()) / max(la, lb)
            # Prefer the longest chains that mirror well (the limb, not a finger of it).
            score = err - 0.05 * min(la, lb) / longest
            if best is None or score < best[0]:
                best = (score, n, o, pa, pb, err)
    return best


def _mirror_pairs(rig: AnalysedRig) -> list[MirrorPair]:
    pairs = []
    groups = [(-1, rig.roots)] + [(i, rig.akids[i]) for i in rig.order if len(rig.akids[i]) >= 2]
    for parent, kids in groups:
        for a, b in combinations(kids, 2):
            pair = _mirror_pair(rig, parent, a, b)
            if pair is not None:
                pairs.append(pair)
    return pairs


@dataclass
class Body:
    legs: MirrorPair
    arms: MirrorPair
    hips: int  # lowest common ancestor of legs and arms
    chest: int  # the bone the arms hang from
    up: FloatArray
    score: float


def _region_vote(rig: AnalysedRig, root: int, region: str) -> float:
    """+1 when the names in a subtree say ``region``, -1 when they say another limb region."""
    votes = [rig.hints[i].region for i in rig.subtree(root) if rig.hints[i].region in ("arm", "leg")]
    if not votes:
        return 0.0
    return (sum(1 for v in votes if v == region) - sum(1 for v in votes if v != region)) / len(votes)


def find_body(rig: AnalysedRig) -> Body | None:
    pairs = _mirror_pairs(rig)
    if not pairs:
        return None
    longest = max(p.length for p in pairs)
    big = [p for p in pairs if p.length >= 0.3 * longest]
    best: Body | None = None
    for legs in big:
        for arms in big:
            if legs is arms or arms.parent < 0 or legs.parent < 0:
                continue
            limbs_l = (legs.a, legs.b)
            limbs_a = (arms.a, arms.b)
            # Neither pair may hang inside the other's limbs.
            if any(rig.is_ancestor(x, arms.parent) for x in limbs_l) or any(
                rig.is_ancestor(x, legs.parent) for x in limbs_a
            ):
                continue
            hips = rig.lca(legs.parent, arms.parent)
            if hips < 0 or hips == arms.parent:
                continue  # the arms must hang above the hips, along a spine
            # Up runs from where the legs leave the body to where the arms do, whatever the
            # spine bones' own layout (one long spine bone may start right at the hips' head).
            up = 0.5 * (rig.heads[arms.a] + rig.heads[arms.b]) - 0.5 * (rig.heads[legs.a] + rig.heads[legs.b])
            column = float(np.linalg.norm(up))
            if column < 0.1 * legs.length:
                continue
            score = (legs.length + arms.length) / longest
            score -= 0.25 * float(rig.depth[legs.parent] - rig.depth[hips])
            score += 0.5 * (_region_vote(rig, legs.a, "leg") + _region_vote(rig, legs.b, "leg"))
            score += 0.5 * (_region_vote(rig, arms.a, "arm") + _region_vote(rig, arms.b, "arm"))
            # The lateral axes of legs and arms agree on a standing body.
            score += 0.3 * abs(float(legs.normal @ arms.normal))
            if best is None or score > best.score:
                best = Body(legs, arms, hips, arms.parent, unit(up), score)
    return None if best is None else _settle_arms(rig, best)


def _settle_arms(rig: AnalysedRig, body: Body) -> Body:
    """Start each arm at its own root. When the clavicles hang from different spine bones, the
    mirrored pair found is (spine bone carrying one arm and the neck, other clavicle): the leading
    bones of a matched chain that sit on the midline and branch belong to the spine, not the arm."""
    arms = body.arms
    trimmed = []
    for path in (arms.path_a, arms.path_b):
        k = 0
        while (
            k < len(path) - 3
            and len(rig.akids[path[k]]) >= 2
            and abs(float((rig.heads[path[k]] - arms.origin) @ arms.normal)) < 0.05 * arms.length
        ):
            k += 1
        trimmed.append(path[k:])
    if len(trimmed[0]) == len(arms.path_a) and len(trimmed[1]) == len(arms.path_b):
        return body
    pa, pb = int(rig.apar[trimmed[0][0]]), int(rig.apar[trimmed[1][0]])
    # The arms hang, for the neck's sake, from the higher of the two attachment bones.
    chest = pb if rig.is_ancestor(pa, pb) else pa if rig.is_ancestor(pb, pa) else body.chest
    arms = replace(arms, a=trimmed[0][0], b=trimmed[1][0], path_a=tuple(trimmed[0]), path_b=tuple(trimmed[1]))
    return replace(body, arms=arms, chest=chest)
